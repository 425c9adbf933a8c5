/* GetItem: whole items, projections, missing items, key and request errors. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static void setup(void)
{
	tl_store_open("read", &(st_env_options){.map_size = 1ull << 30, .nosync = true});
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static st_value *get_ok(const char *table, st_value *key, const char *proj, st_value *names)
{
	st_get_req r = {.table = table, .key = key, .projection = proj, .names = names};
	st_value *item = (st_value *)1;
	int rc = st_get_item(tl_env, &r, &tl_arena, &item, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "get: %s", tl_msg);
	return item;
}

static void get_err(const char *table, st_value *key, const char *proj, st_value *names, int code,
                    const char *msg)
{
	st_get_req r = {.table = table, .key = key, .projection = proj, .names = names};
	st_value *item = (st_value *)1;
	int rc = st_get_item(tl_env, &r, &tl_arena, &item, tl_msg);
	ck_assert_msg(rc == code, "expected %s, got %s (%s)", shoal_err_name(code),
	              shoal_err_name(rc), tl_msg);
	ck_assert_ptr_null(item);
	if (msg != NULL)
		ck_assert_str_eq(tl_msg, msg);
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
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	st_value *it = rich_item();
	tl_put("tbl", it);
	tl_put("tbl", map("PK", S("p"), "SK", N("2"), NULL));
	tl_put("tbl", map("PK", S("q"), "SK", N("1.5"), NULL));
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
	ck_assert_int_eq(st_get_item(tl_env, &r, &other, &item, tl_msg), SHOAL_OK);
	ck_assert(st_value_equal(item, it));
	sh_arena_fini(&other);
}
END_TEST

START_TEST(test_get_missing)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	tl_put("tbl", map("PK", S("p"), "SK", N("1"), NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("p"), "SK", N("2"), NULL), NULL, NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("q"), "SK", N("1"), NULL), NULL, NULL));
	ck_assert_ptr_null(get_ok("tbl", map("PK", S("p"), "SK", N("2"), NULL), "a.b", NULL));
}
END_TEST

START_TEST(test_get_projection)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	tl_put("tbl", rich_item());
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
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
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
	get_err("tbl", st_new_map(&tl_arena, 0), NULL, NULL, SHOAL_E_VALIDATION, NO_MATCH);
	/* A malformed number in the key is refused before any lookup. */
	st_value bad = {.type = ST_N, .u.str = {"1.2.3", 5}};
	get_err("tbl", map("PK", S("p"), "SK", &bad, NULL), NULL, NULL, SHOAL_E_VALIDATION, NULL);
	/* A table without a sort key wants exactly its partition key. */
	tl_create_table("hash_only", "id", ST_S, NULL, ST_NONE);
	tl_put("hash_only", map("id", S("x"), "v", N("1"), NULL));
	get_err("hash_only", map("id", S("x"), "SK", N("1"), NULL), NULL, NULL, SHOAL_E_VALIDATION,
	        NO_MATCH);
	st_value *got = get_ok("hash_only", map("id", S("x"), NULL), NULL, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(st_value_equal(got, map("id", S("x"), "v", N("1"), NULL)));
}
END_TEST

START_TEST(test_get_request_errors)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	st_value *key = map("PK", S("p"), "SK", N("1"), NULL);
	get_err("Nope", key, NULL, NULL, SHOAL_E_NOT_FOUND,
	        "Requested resource not found: Table: Nope not found");
	get_err("tbl", key, "a, #b", map("#b", S("b"), "#c", S("c"), NULL), SHOAL_E_VALIDATION,
	        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#c}");
	get_err("tbl", key, NULL, map("#b", S("b"), NULL), SHOAL_E_VALIDATION,
	        "ExpressionAttributeNames can only be specified when using expressions");
	get_err("tbl", key, "#b", NULL, SHOAL_E_VALIDATION, NULL);
	ck_assert_msg(strncmp(tl_msg, "Invalid ProjectionExpression: ", 30) == 0, "%s", tl_msg);
	get_err("tbl", key, "a,, b", NULL, SHOAL_E_VALIDATION, NULL);
	ck_assert_msg(strncmp(tl_msg, "Invalid ProjectionExpression: ", 30) == 0, "%s", tl_msg);
	get_err("tbl", key, "a", st_new_map(&tl_arena, 0), SHOAL_E_VALIDATION,
	        "ExpressionAttributeNames must not be empty");
	/* Projection errors come before the table lookup. */
	get_err("Nope", key, "#zz", NULL, SHOAL_E_VALIDATION, NULL);
}
END_TEST

START_TEST(test_get_out_of_memory)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	tl_put("tbl", rich_item());
	st_get_req r = {.table = "tbl",
	                .key = map("PK", S("p"), "SK", N("1.5"), NULL),
	                .projection = "a.b[1], #g",
	                .names = map("#g", S("g"), NULL)};
	for (long n = 1;; n++) {
		sh_arena a;
		sh_arena_init(&a);
		st_value *item = NULL;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = st_get_item(tl_env, &r, &a, &item, tl_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		ck_assert_msg(rc == SHOAL_OK || (fired && rc == SHOAL_E_NOMEM),
		              "allocation %ld: %s (%s)", n, shoal_err_name(rc), tl_msg);
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
	return tl_suite("read", setup, tl_store_close, 0,
	                TL_TESTS(test_get_whole_item, test_get_missing, test_get_projection,
	                         test_get_key_errors, test_get_request_errors,
	                         test_get_out_of_memory));
}

TL_MAIN(read_suite)
