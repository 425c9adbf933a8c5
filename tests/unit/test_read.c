/* GetItem: whole items, projections, missing items, key and request errors. */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

static char g_dir[PATH_MAX];
static st_env *g_env;
static sh_arena g_a;
static char g_msg[SH_ERRMSG_SIZE];

static void setup(void)
{
	snprintf(g_dir, sizeof(g_dir), "%s", tl_tmpdir("read"));
	st_env_options o = {.map_size = 1ull << 30, .nosync = true};
	ck_assert_msg(st_env_open(g_dir, &o, &g_env, g_msg) == SHOAL_OK, "%s", g_msg);
	sh_arena_init(&g_a);
}

static void teardown(void)
{
	st_env_close(g_env);
	tl_rmtree(g_dir);
	sh_arena_fini(&g_a);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static st_value *S(const char *s)
{
	st_value *v = st_new_s(&g_a, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

static st_value *N(const char *s)
{
	st_value *v = st_new_n(&g_a, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

/* map("a", v1, "b", v2, NULL) */
static st_value *map(const char *name, ...)
{
	st_value *m = st_new_map(&g_a, 4);
	ck_assert_ptr_nonnull(m);
	va_list ap;
	va_start(ap, name);
	for (const char *n = name; n != NULL; n = va_arg(ap, const char *)) {
		st_value *v = va_arg(ap, st_value *);
		ck_assert_int_eq(st_map_set(&g_a, m, n, strlen(n), v), SHOAL_OK);
	}
	va_end(ap);
	return m;
}

/* list(3, v1, v2, v3) */
static st_value *list(uint32_t n, ...)
{
	st_value *l = sh_arena_alloc(&g_a, sizeof(*l));
	st_value *v = sh_arena_alloc(&g_a, (n + 1) * sizeof(*v));
	va_list ap;
	va_start(ap, n);
	for (uint32_t i = 0; i < n; i++)
		v[i] = *va_arg(ap, st_value *);
	va_end(ap);
	l->type = ST_L;
	l->u.list.v = v;
	l->u.list.n = n;
	return l;
}

static void create_table(const char *name, const char *pk, st_type pt, const char *sk, st_type stt)
{
	st_key_attr attrs[2] = {{pk, pt}, {sk, stt}};
	st_table_def d = {.name = name,
	                  .key = {{pk, pt}, {sk, stt}},
	                  .attrs = attrs,
	                  .n_attrs = sk != NULL ? 2 : 1};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(g_env, &t, g_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, g_msg) == SHOAL_OK, "%s", g_msg);
	ck_assert_msg(st_txn_commit(t, g_msg) == SHOAL_OK, "%s", g_msg);
}

static void put(const char *table, st_value *item)
{
	st_put_req r = {.table = table, .item = item};
	st_write_result res;
	ck_assert_msg(st_put_item(g_env, &r, &g_a, &res, g_msg) == SHOAL_OK, "%s", g_msg);
}

static st_value *get_ok(const char *table, st_value *key, const char *proj, st_value *names)
{
	st_get_req r = {.table = table, .key = key, .projection = proj, .names = names};
	st_value *item = (st_value *)1;
	int rc = st_get_item(g_env, &r, &g_a, &item, g_msg);
	ck_assert_msg(rc == SHOAL_OK, "get: %s", g_msg);
	return item;
}

static void get_err(const char *table, st_value *key, const char *proj, st_value *names, int code,
                    const char *msg)
{
	st_get_req r = {.table = table, .key = key, .projection = proj, .names = names};
	st_value *item = (st_value *)1;
	int rc = st_get_item(g_env, &r, &g_a, &item, g_msg);
	ck_assert_msg(rc == code, "expected %s, got %s (%s)", shoal_err_name(code),
	              shoal_err_name(rc), g_msg);
	ck_assert_ptr_null(item);
	if (msg != NULL)
		ck_assert_str_eq(g_msg, msg);
}

static const char NO_MATCH[] = "The provided key element does not match the schema";

/* The item of the projection tests. */
static st_value *rich_item(void)
{
	return map("PK", S("p"), "SK", N("1.5"), "a",
	           map("b", list(3, N("1"), map("c", S("x"), "d", S("y"), NULL), N("3")), "e",
	               S("f"), NULL),
	           "g", list(3, S("g0"), S("g1"), S("g2")), "h.i", S("dotted"), "j", N("7"), NULL);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_get_whole_item)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	st_value *it = rich_item();
	put("tbl", it);
	put("tbl", map("PK", S("p"), "SK", N("2"), NULL));
	put("tbl", map("PK", S("q"), "SK", N("1.5"), NULL));
	st_value *got = get_ok("tbl", map("PK", S("p"), "SK", N("1.5"), NULL), NULL, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(st_value_equal(got, it));
	/* The key is normalised: 15e-1 is 1.5. */
	st_value raw = {.type = ST_N, .u.str = {"15e-1", 5}};
	got = get_ok("tbl", map("PK", S("p"), "SK", &raw, NULL), NULL, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(st_value_equal(got, it));
	/* The result does not depend on the request's values or LMDB memory. */
	sh_arena other;
	sh_arena_init(&other);
	st_get_req r = {.table = "tbl", .key = map("PK", S("p"), "SK", N("1.5"), NULL)};
	st_value *item;
	ck_assert_int_eq(st_get_item(g_env, &r, &other, &item, g_msg), SHOAL_OK);
	ck_assert(st_value_equal(item, it));
	sh_arena_fini(&other);
}
END_TEST

START_TEST(test_get_missing)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	put("tbl", map("PK", S("p"), "SK", N("1"), NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("p"), "SK", N("2"), NULL), NULL, NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("q"), "SK", N("1"), NULL), NULL, NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("p"), "SK", N("2"), NULL), "a.b", NULL));
}
END_TEST

START_TEST(test_get_projection)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	put("tbl", rich_item());
	st_value *key = map("PK", S("p"), "SK", N("1.5"), NULL);

	st_value *got = get_ok("tbl", key, "a.b[1].c, g[0], g[2], #hi, nothing, a.nothing",
	                       map("#hi", S("h.i"), NULL));
	st_value *want = map("a", map("b", list(1, map("c", S("x"), NULL)), NULL), "g",
	                     list(2, S("g0"), S("g2")), "h.i", S("dotted"), NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(st_value_equal(got, want));

	got = get_ok("tbl", key, "a.e, SK, j", NULL);
	want = map("a", map("e", S("f"), NULL), "SK", N("1.5"), "j", N("7"), NULL);
	ck_assert(st_value_equal(got, want));

	/* Two paths into one map merge into it. */
	got = get_ok("tbl", key, "a.b[2], a.e", NULL);
	want = map("a", map("b", list(1, N("3")), "e", S("f"), NULL), NULL);
	ck_assert(st_value_equal(got, want));

	/* Nothing projected exists: an empty item, not a missing one. */
	got = get_ok("tbl", key, "zz, a.zz", NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->u.map.n, 0);
}
END_TEST

START_TEST(test_get_key_errors)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	get_err("tbl", map("PK", S("p"), NULL), NULL, NULL, SHOAL_E_VALIDATION, NO_MATCH);
	get_err("tbl", map("PK", S("p"), "SK", N("1"), "x", N("1"), NULL), NULL, NULL,
	        SHOAL_E_VALIDATION, NO_MATCH);
	get_err("tbl", map("PK", S("p"), "sk", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        NO_MATCH);
	get_err("tbl", map("PK", N("1"), "SK", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        NO_MATCH);
	get_err("tbl", map("PK", S("p"), "SK", S("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        NO_MATCH);
	get_err("tbl", map("PK", S(""), "SK", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        "One or more parameter values are not valid. The AttributeValue for a key "
	        "attribute cannot contain an empty string value. Key: PK");
	char *big = malloc(ST_MAX_PK_SIZE + 2);
	memset(big, 'k', ST_MAX_PK_SIZE + 1);
	big[ST_MAX_PK_SIZE + 1] = '\0';
	get_err("tbl", map("PK", S(big), "SK", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: Size of hashkey has exceeded the "
	        "maximum size limit of2048 bytes");
	free(big);
	get_err("tbl", st_new_map(&g_a, 0), NULL, NULL, SHOAL_E_VALIDATION, NO_MATCH);
	/* A malformed number in the key is refused before any lookup. */
	st_value bad = {.type = ST_N, .u.str = {"1.2.3", 5}};
	get_err("tbl", map("PK", S("p"), "SK", &bad, NULL), NULL, NULL, SHOAL_E_VALIDATION, NULL);
	/* A table without a sort key wants exactly its partition key. */
	create_table("hash_only", "id", ST_S, NULL, ST_NONE);
	put("hash_only", map("id", S("x"), "v", N("1"), NULL));
	get_err("hash_only", map("id", S("x"), "SK", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        NO_MATCH);
	st_value *got = get_ok("hash_only", map("id", S("x"), NULL), NULL, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(st_value_equal(got, map("id", S("x"), "v", N("1"), NULL)));
}
END_TEST

START_TEST(test_get_request_errors)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	st_value *key = map("PK", S("p"), "SK", N("1"), NULL);
	get_err("Nope", key, NULL, NULL, SHOAL_E_NOT_FOUND,
	        "Requested resource not found: Table: Nope not found");
	get_err("tbl", key, "a, #b", map("#b", S("b"), "#c", S("c"), NULL), SHOAL_E_VALIDATION,
	        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#c}");
	get_err("tbl", key, NULL, map("#b", S("b"), NULL), SHOAL_E_VALIDATION,
	        "ExpressionAttributeNames can only be specified when using expressions");
	get_err("tbl", key, "#b", NULL, SHOAL_E_VALIDATION, NULL);
	ck_assert_msg(strncmp(g_msg, "Invalid ProjectionExpression: ", 30) == 0, "%s", g_msg);
	get_err("tbl", key, "a,, b", NULL, SHOAL_E_VALIDATION, NULL);
	ck_assert_msg(strncmp(g_msg, "Invalid ProjectionExpression: ", 30) == 0, "%s", g_msg);
	get_err("tbl", key, "a", st_new_map(&g_a, 0), SHOAL_E_VALIDATION,
	        "ExpressionAttributeNames must not be empty");
	/* Projection errors come before the table lookup. */
	get_err("Nope", key, "#zz", NULL, SHOAL_E_VALIDATION, NULL);
}
END_TEST

START_TEST(test_get_out_of_memory)
{
	create_table("tbl", "PK", ST_S, "SK", ST_N);
	put("tbl", rich_item());
	st_get_req r = {.table = "tbl",
	                .key = map("PK", S("p"), "SK", N("1.5"), NULL),
	                .projection = "a.b[1], #g",
	                .names = map("#g", S("g"), NULL)};
	for (long n = 1;; n++) {
		sh_arena a;
		sh_arena_init(&a);
		st_value *item = NULL;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = st_get_item(g_env, &r, &a, &item, g_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		ck_assert_msg(rc == SHOAL_OK || (fired && rc == SHOAL_E_NOMEM),
		              "allocation %ld: %s (%s)", n, shoal_err_name(rc), g_msg);
		if (rc == SHOAL_OK)
			ck_assert_uint_eq(item->u.map.n, 2);
		else
			ck_assert_ptr_null(item);
		sh_arena_fini(&a);
		if (!fired)
			break;
		ck_assert_int_lt(n, 100000);
	}
}
END_TEST

static Suite *read_suite(void)
{
	Suite *s = suite_create("read");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_get_whole_item);
	tcase_add_test(tc, test_get_missing);
	tcase_add_test(tc, test_get_projection);
	tcase_add_test(tc, test_get_key_errors);
	tcase_add_test(tc, test_get_request_errors);
	tcase_add_test(tc, test_get_out_of_memory);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(read_suite)
