/* PutItem, UpdateItem, DeleteItem: DynamoDB's semantics, limits and messages. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/engine.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

static char dir[4096];
static st_env *env;
static sh_arena A;
static char msg[SH_ERRMSG_SIZE];

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

static st_value *S(const char *s)
{
	st_value *v = st_new_s(&A, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

static st_value *N(const char *s)
{
	st_value *v = st_new_n(&A, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

static st_value *B(const void *p, size_t n)
{
	st_value *v = st_new_b(&A, p, n);
	ck_assert_ptr_nonnull(v);
	return v;
}

/* A string of n copies of c. */
static st_value *Sn(size_t n, char c)
{
	char *s = malloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	st_value *v = S(s);
	free(s);
	return v;
}

/* M("name", value, "name", value, ..., NULL) */
static st_value *M(const char *name, ...)
{
	st_value *m = st_new_map(&A, 4);
	ck_assert_ptr_nonnull(m);
	va_list ap;
	va_start(ap, name);
	for (const char *n = name; n != NULL; n = va_arg(ap, const char *)) {
		st_value *v = va_arg(ap, st_value *);
		ck_assert_int_eq(st_map_set(&A, m, n, strlen(n), v), SHOAL_OK);
	}
	va_end(ap);
	return m;
}

/* SS of the given members (sorted by the caller). */
static st_value *SS(int n, ...)
{
	st_value *v = sh_arena_calloc(&A, 1, sizeof(*v));
	v->type = ST_SS;
	v->u.list.v = sh_arena_calloc(&A, (size_t)n, sizeof(st_value));
	v->u.list.n = (uint32_t)n;
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		v->u.list.v[i] = *S(va_arg(ap, const char *));
	va_end(ap);
	return v;
}

static void assert_value_eq(const st_value *got, const st_value *want)
{
	if (want == NULL) {
		ck_assert_msg(got == NULL, "expected no value");
		return;
	}
	ck_assert_msg(got != NULL, "expected a value, got none");
	ck_assert_msg(st_value_equal(got, want), "values differ");
}

/* ------------------------------------------------------------------------ */
/* Fixture: tables Tbl (PK S, SK N, GSI byG on G S), Str (PK S, SK S),       */
/* Bin (PK B, SK B), Hash (PK N)                                             */
/* ------------------------------------------------------------------------ */

static void create_table(const char *name, const char *pk, st_type pt, const char *sk,
                         st_type stype, bool gsi)
{
	st_key_attr attrs[3] = {{pk, pt}, {sk, stype}, {"G", ST_S}};
	st_index_def idx = {.name = "byG",
	                    .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                    .projection = ST_PROJ_ALL,
	                    .write_shards = 1,
	                    .status = ST_INDEX_ACTIVE};
	st_table_def def = {.name = name,
	                    .key = {{pk, pt}, {sk, stype}},
	                    .attrs = attrs,
	                    .n_attrs = sk != NULL ? 2 : 1,
	                    .indexes = gsi ? &idx : NULL,
	                    .n_indexes = gsi ? 1 : 0};
	if (gsi) {
		attrs[def.n_attrs] = attrs[2];
		def.n_attrs++;
	}
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, msg), SHOAL_OK);
	ck_assert_msg(st_table_create(txn, &def, msg) == SHOAL_OK, "%s", msg);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s", tl_tmpdir("write"));
	st_env_options o = {.map_size = 1ull << 30};
	ck_assert_int_eq(st_env_open(dir, &o, &env, msg), SHOAL_OK);
	sh_arena_init(&A);
	create_table("Tbl", "PK", ST_S, "SK", ST_N, true);
	create_table("Str", "PK", ST_S, "SK", ST_S, false);
	create_table("Bin", "PK", ST_B, "SK", ST_B, false);
	create_table("Hash", "PK", ST_N, NULL, ST_NONE, false);
}

static void teardown(void)
{
	sh_arena_fini(&A);
	st_env_close(env);
	tl_rmtree(dir);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

static int put(const char *table, const st_value *item, const char *cond, const st_value *values,
               st_return_values rv, st_write_result *res)
{
	st_put_req r = {.table = table,
	                .item = item,
	                .condition = cond,
	                .attrs = {NULL, values},
	                .return_values = rv,
	                .return_old_on_condition_fail = true};
	msg[0] = '\0';
	return st_put_item(env, &r, &A, res, msg);
}

static void put_ok(const char *table, const st_value *item)
{
	st_write_result res;
	int rc = put(table, item, NULL, NULL, ST_RV_NONE, &res);
	ck_assert_msg(rc == SHOAL_OK, "put: %s: %s", shoal_err_name(rc), msg);
}

static int update(const char *table, const st_value *key, const char *upd, const char *cond,
                  const st_value *names, const st_value *values, st_return_values rv,
                  st_write_result *res)
{
	st_update_req r = {.table = table,
	                   .key = key,
	                   .update = upd,
	                   .condition = cond,
	                   .attrs = {names, values},
	                   .return_values = rv,
	                   .return_old_on_condition_fail = true};
	msg[0] = '\0';
	return st_update_item(env, &r, &A, res, msg);
}

static int del(const char *table, const st_value *key, const char *cond, const st_value *values,
               st_return_values rv, st_write_result *res)
{
	st_delete_req r = {.table = table,
	                   .key = key,
	                   .condition = cond,
	                   .attrs = {NULL, values},
	                   .return_values = rv,
	                   .return_old_on_condition_fail = true};
	msg[0] = '\0';
	return st_delete_item(env, &r, &A, res, msg);
}

static st_value *get(const char *table, const st_value *key)
{
	st_get_req r = {.table = table, .key = key};
	st_value *item = NULL;
	int rc = st_get_item(env, &r, &A, &item, msg);
	ck_assert_msg(rc == SHOAL_OK, "get: %s", msg);
	return item;
}

static void counts(const char *table, uint64_t items, uint64_t bytes)
{
	st_table_info info;
	ck_assert_int_eq(st_table_describe(env, table, &A, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, items);
	ck_assert_uint_eq(info.size_bytes, bytes);
}

static st_value *key_of(const char *pk, const char *sk)
{
	return M("PK", S(pk), "SK", N(sk), NULL);
}

#define expect_err(call, code, text)                                                               \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		ck_assert_msg(rc_ == (code), "got %s (%s), want %s", shoal_err_name(rc_), msg,     \
		              shoal_err_name(code));                                               \
		if ((text) != NULL)                                                                \
			ck_assert_str_eq(msg, (const char *)(text));                               \
	} while (0)

/* ------------------------------------------------------------------------ */
/* PutItem                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_put_get)
{
	st_value *item = M("PK", S("p"), "SK", N("1.50"), "n", N("007"), "s", S("hi"), NULL);
	put_ok("Tbl", item);
	/* Numbers were canonicalised: the key 1.5 finds it. */
	st_value *got = get("Tbl", key_of("p", "1.5"));
	assert_value_eq(got, M("PK", S("p"), "SK", N("1.5"), "n", N("7"), "s", S("hi"), NULL));
	/* PK(2)+1 + SK(2)+2 + n(1)+2 + s(1)+2 */
	counts("Tbl", 1, 13);

	/* The request is not modified: attrs out of order stay out of order. */
	st_value raw_n = {.type = ST_N, .u.str = {"2.0", 3}};
	st_attr attrs[3] = {{"z", 1, *S("last")}, {"SK", 2, raw_n}, {"PK", 2, *S("q")}};
	st_value raw = {.type = ST_M, .u.map = {attrs, 3}};
	put_ok("Tbl", &raw);
	ck_assert_str_eq(attrs[0].name, "z");
	ck_assert_uint_eq(attrs[1].value.u.str.len, 3);
	ck_assert(memcmp(attrs[1].value.u.str.ptr, "2.0", 3) == 0);
	assert_value_eq(get("Tbl", key_of("q", "2")),
	                M("PK", S("q"), "SK", N("2"), "z", S("last"), NULL));
	counts("Tbl", 2, 13 + 3 + 4 + 5);

	/* Invalid values are refused with the value module's message. */
	st_value bad_null = {.type = ST_NULL, .u.boolean = false};
	expect_err(put("Tbl", M("PK", S("p"), "SK", N("1"), "x", &bad_null, NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, NULL);
	expect_err(put("Nope", item, NULL, NULL, ST_RV_NONE, NULL), SHOAL_E_NOT_FOUND,
	           "Requested resource not found: Table: Nope not found");
	expect_err(put("Tbl", NULL, NULL, NULL, ST_RV_NONE, NULL), SHOAL_E_VALIDATION,
	           "1 validation error detected: Value null at 'item' failed to satisfy "
	           "constraint: Member must not be null");
	counts("Tbl", 2, 25);
}
END_TEST

START_TEST(test_put_return_values)
{
	st_write_result res;
	st_value *v1 = M("PK", S("p"), "SK", N("1"), "a", N("1"), NULL);
	st_value *v2 = M("PK", S("p"), "SK", N("1"), "a", N("2"), NULL);
	ck_assert_int_eq(put("Tbl", v1, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes); /* no old item */
	ck_assert_int_eq(put("Tbl", v2, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	assert_value_eq(res.attributes, v1);
	ck_assert_int_eq(put("Tbl", v1, NULL, NULL, ST_RV_NONE, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_ptr_null(res.old_item);
	st_return_values bad[] = {ST_RV_UPDATED_OLD, ST_RV_ALL_NEW, ST_RV_UPDATED_NEW};
	for (int i = 0; i < 3; i++)
		expect_err(put("Tbl", v2, NULL, NULL, bad[i], &res), SHOAL_E_VALIDATION,
		           "ReturnValues can only be ALL_OLD or NONE");
	assert_value_eq(get("Tbl", key_of("p", "1")), v1);

	ck_assert_int_eq(st_return_values_parse("NONE"), ST_RV_NONE);
	ck_assert_int_eq(st_return_values_parse("ALL_OLD"), ST_RV_ALL_OLD);
	ck_assert_int_eq(st_return_values_parse("UPDATED_OLD"), ST_RV_UPDATED_OLD);
	ck_assert_int_eq(st_return_values_parse("ALL_NEW"), ST_RV_ALL_NEW);
	ck_assert_int_eq(st_return_values_parse("UPDATED_NEW"), ST_RV_UPDATED_NEW);
	ck_assert_int_eq(st_return_values_parse("all_old"), -1);
	ck_assert_int_eq(st_return_values_parse(""), -1);
	ck_assert_int_eq(st_return_values_parse(NULL), -1);
}
END_TEST

START_TEST(test_put_conditions)
{
	st_write_result res;
	st_value *v1 = M("PK", S("p"), "SK", N("1"), "a", N("1"), NULL);
	st_value *v2 = M("PK", S("p"), "SK", N("1"), "a", N("2"), NULL);
	/* Idempotent create. */
	ck_assert_int_eq(put("Tbl", v1, "attribute_not_exists(PK)", NULL, ST_RV_NONE, &res),
	                 SHOAL_OK);
	expect_err(put("Tbl", v2, "attribute_not_exists(PK)", NULL, ST_RV_ALL_OLD, &res),
	           SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	assert_value_eq(res.old_item, v1); /* ReturnValuesOnConditionCheckFailure */
	ck_assert_ptr_null(res.attributes);
	st_put_req r = {.table = "Tbl", .item = v2, .condition = "attribute_not_exists(PK)"};
	expect_err(st_put_item(env, &r, &A, &res, msg), SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item); /* not asked for */
	assert_value_eq(get("Tbl", key_of("p", "1")), v1);
	counts("Tbl", 1, 3 + 4 + 3);

	/* Conditions on the old image with values. */
	st_value *one = M(":one", N("1"), NULL);
	ck_assert_int_eq(put("Tbl", v2, "a = :one", one, ST_RV_ALL_OLD, &res), SHOAL_OK);
	assert_value_eq(res.attributes, v1);
	expect_err(put("Tbl", v1, "a = :one", one, ST_RV_NONE, &res), SHOAL_E_CONDITION_FAILED,
	           NULL);
	assert_value_eq(res.old_item, v2);
	/* A condition on an absent item sees no attributes. */
	expect_err(put("Tbl", M("PK", S("new"), "SK", N("1"), NULL), "attribute_exists(PK)", NULL,
	               ST_RV_NONE, &res),
	           SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item);
	ck_assert_ptr_null(get("Tbl", key_of("new", "1")));

	/* Placeholders without an expression, unused ones, a bad expression. */
	st_put_req pr = {.table = "Tbl", .item = v1, .attrs = {M("#n", S("a"), NULL), NULL}};
	expect_err(st_put_item(env, &pr, &A, &res, msg), SHOAL_E_VALIDATION,
	           "ExpressionAttributeNames can only be specified when using expressions");
	pr.attrs.names = NULL;
	pr.attrs.values = one;
	expect_err(st_put_item(env, &pr, &A, &res, msg), SHOAL_E_VALIDATION,
	           "ExpressionAttributeValues can only be specified when using expressions: "
	           "ConditionExpression is null");
	pr.condition = "attribute_exists(PK)";
	expect_err(
	    st_put_item(env, &pr, &A, &res, msg), SHOAL_E_VALIDATION,
	    "Value provided in ExpressionAttributeValues unused in expressions: keys: {:one}");
	pr.condition = "a = = :one";
	expect_err(st_put_item(env, &pr, &A, &res, msg), SHOAL_E_VALIDATION, NULL);
	ck_assert_ptr_nonnull(strstr(msg, "Invalid ConditionExpression"));
	assert_value_eq(get("Tbl", key_of("p", "1")), v2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Keys and sizes                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_key_checks_item)
{
	const char *p = "One or more parameter values were invalid: ";
	char want[SH_ERRMSG_SIZE];
	snprintf(want, sizeof(want), "%sMissing the key PK in the item", p);
	expect_err(put("Tbl", M("SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sMissing the key SK in the item", p);
	expect_err(put("Tbl", M("PK", S("a"), "x", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sType mismatch for key PK expected: S actual: N", p);
	expect_err(put("Tbl", M("PK", N("1"), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sType mismatch for key SK expected: N actual: SS", p);
	expect_err(
	    put("Tbl", M("PK", S("a"), "SK", SS(1, "x"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, want);
	expect_err(put("Tbl", M("PK", S(""), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. The AttributeValue for a key "
	           "attribute cannot contain an empty string value. Key: PK");
	expect_err(
	    put("Bin", M("PK", B("x", 1), "SK", B("", 0), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION,
	    "One or more parameter values are not valid. The AttributeValue for a key "
	    "attribute cannot contain an empty binary value. Key: SK");
	/* Index keys must have their defined type. */
	snprintf(want, sizeof(want),
	         "%sType mismatch for Index Key G Expected: S Actual: N IndexName: byG", p);
	expect_err(put("Tbl", M("PK", S("a"), "SK", N("1"), "G", N("5"), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	expect_err(put("Tbl", M("PK", S("a"), "SK", N("1"), "G", S(""), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. A value specified for a secondary "
	           "index key is not supported. The AttributeValue for a key attribute cannot "
	           "contain an empty string value. IndexName: byG, IndexKey: G");
	put_ok("Tbl", M("PK", S("a"), "SK", N("1"), "G", S("five"), NULL));
	counts("Tbl", 1, 3 + 4 + 5);
	/* A hash-only table: extra attributes are fine in an item. */
	put_ok("Hash", M("PK", N("-1e100"), "other", S("x"), NULL));
	assert_value_eq(get("Hash", M("PK", N("-1E+100"), NULL)),
	                M("PK", N("-1e100"), "other", S("x"), NULL));
}
END_TEST

START_TEST(test_key_checks_key)
{
	const char *nomatch = "The provided key element does not match the schema";
	put_ok("Tbl", M("PK", S("a"), "SK", N("1"), "x", N("1"), NULL));
	st_write_result res;
	st_value *keys[] = {
	    M("PK", S("a"), NULL),                            /* missing SK */
	    M("PK", S("a"), "SK", N("1"), "x", N("1"), NULL), /* extra attribute */
	    M("PK", S("a"), "XX", N("1"), NULL),              /* wrong name */
	    M("PK", N("1"), "SK", N("1"), NULL),              /* wrong type */
	    M("PK", S("a"), "SK", S("1"), NULL),              /* wrong type */
	    M(NULL),                                          /* empty */
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		expect_err(del("Tbl", keys[i], NULL, NULL, ST_RV_NONE, &res), SHOAL_E_VALIDATION,
		           nomatch);
		expect_err(update("Tbl", keys[i], "SET y = :v", NULL, NULL, M(":v", N("1"), NULL),
		                  ST_RV_NONE, &res),
		           SHOAL_E_VALIDATION, nomatch);
	}
	expect_err(del("Tbl", M("PK", S(""), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. The AttributeValue for a key "
	           "attribute cannot contain an empty string value. Key: PK");
	expect_err(del("Tbl", NULL, NULL, NULL, ST_RV_NONE, &res), SHOAL_E_VALIDATION,
	           "1 validation error detected: Value null at 'key' failed to satisfy "
	           "constraint: Member must not be null");
	counts("Tbl", 1, 3 + 4 + 3);
	ck_assert_ptr_nonnull(get("Tbl", key_of("a", "1")));
}
END_TEST

START_TEST(test_key_sizes)
{
	const char *pk_msg = "One or more parameter values were invalid: Size of hashkey has "
	                     "exceeded the maximum size limit of2048 bytes";
	const char *sk_msg = "One or more parameter values were invalid: Aggregated size of all "
	                     "range keys has exceeded the size limit of 1024 bytes";
	/* Exactly at the limits: stored and found again, also sort keys that
	 * do not fit an LMDB key inline. */
	st_value *big = M("PK", Sn(2048, 'p'), "SK", Sn(1024, 's'), "v", N("1"), NULL);
	put_ok("Str", big);
	assert_value_eq(get("Str", M("PK", Sn(2048, 'p'), "SK", Sn(1024, 's'), NULL)), big);
	st_value *big2 = M("PK", Sn(2048, 'p'), "SK", Sn(1023, 's'), NULL);
	put_ok("Str", big2);
	assert_value_eq(get("Str", M("PK", Sn(2048, 'p'), "SK", Sn(1023, 's'), NULL)), big2);
	counts("Str", 2, (2 + 2048 + 2 + 1024 + 1 + 2) + (2 + 2048 + 2 + 1023));
	/* One byte more. */
	expect_err(
	    put("Str", M("PK", Sn(2049, 'p'), "SK", S("s"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, pk_msg);
	expect_err(
	    put("Str", M("PK", S("p"), "SK", Sn(1025, 's'), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, sk_msg);
	expect_err(
	    del("Str", M("PK", Sn(2049, 'p'), "SK", S("s"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, pk_msg);
	expect_err(update("Str", M("PK", S("p"), "SK", Sn(1025, 's'), NULL), NULL, NULL, NULL, NULL,
	                  ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, sk_msg);
	/* Binary keys count bytes too. */
	uint8_t bytes[2049];
	memset(bytes, 0xff, sizeof(bytes));
	put_ok("Bin", M("PK", B(bytes, 2048), "SK", B(bytes, 1024), NULL));
	expect_err(put("Bin", M("PK", B(bytes, 2049), "SK", B(bytes, 1), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, pk_msg);
	expect_err(put("Bin", M("PK", B(bytes, 1), "SK", B(bytes, 1025), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, sk_msg);
	counts("Bin", 1, 2 + 2048 + 2 + 1024);
}
END_TEST

START_TEST(test_item_size_limit)
{
	/* PK(2)+"p"(1) + SK(2)+N 1(2) + data(4)+L = 11 + L */
	size_t L = ST_MAX_ITEM_SIZE - 11;
	st_value *at_limit = M("PK", S("p"), "SK", N("1"), "data", Sn(L, 'x'), NULL);
	ck_assert_uint_eq(st_item_size(at_limit), ST_MAX_ITEM_SIZE);
	put_ok("Tbl", at_limit);
	counts("Tbl", 1, ST_MAX_ITEM_SIZE);
	st_value *over = M("PK", S("p"), "SK", N("2"), "data", Sn(L + 1, 'x'), NULL);
	expect_err(put("Tbl", over, NULL, NULL, ST_RV_NONE, NULL), SHOAL_E_VALIDATION,
	           "Item size has exceeded the maximum allowed size");
	ck_assert_ptr_null(get("Tbl", key_of("p", "2")));
	assert_value_eq(get("Tbl", key_of("p", "1")), at_limit);

	/* UpdateItem checks the item the update makes. */
	put_ok("Tbl", M("PK", S("p"), "SK", N("3"), "data", S("small"), NULL));
	st_write_result res;
	expect_err(update("Tbl", key_of("p", "3"), "SET #d = :v", NULL, M("#d", S("data"), NULL),
	                  M(":v", Sn(L + 1, 'y'), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, "Item size to update has exceeded the maximum allowed size");
	assert_value_eq(get("Tbl", key_of("p", "3")),
	                M("PK", S("p"), "SK", N("3"), "data", S("small"), NULL));
	ck_assert_int_eq(update("Tbl", key_of("p", "3"), "SET #d = :v", NULL,
	                        M("#d", S("data"), NULL), M(":v", Sn(L, 'y'), NULL), ST_RV_NONE,
	                        &res),
	                 SHOAL_OK);
	counts("Tbl", 2, 2 * ST_MAX_ITEM_SIZE);
	/* Growing an item past the limit by appending. */
	expect_err(update("Tbl", key_of("p", "3"), "SET more = :v", NULL, NULL,
	                  M(":v", S("z"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, "Item size to update has exceeded the maximum allowed size");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* UpdateItem                                                                */
/* ------------------------------------------------------------------------ */

static st_value *orig_item(void)
{
	return M("PK", S("u"), "SK", N("1"), "a", N("1"), "b", S("x"), "c",
	         M("d", N("1"), "e", N("2"), NULL), "tags", SS(1, "t1"), NULL);
}

static const char *UPD = "SET a = a + :one, c.d = :nine REMOVE b ADD tags :t2";

static st_value *upd_values(void)
{
	return M(":one", N("1"), ":nine", N("9"), ":t2", SS(1, "t2"), NULL);
}

START_TEST(test_update_return_values)
{
	st_value *new_item = M("PK", S("u"), "SK", N("1"), "a", N("2"), "c",
	                       M("d", N("9"), "e", N("2"), NULL), "tags", SS(2, "t1", "t2"), NULL);
	struct {
		st_return_values rv;
		st_value *want;
	} cases[] = {
	    {ST_RV_NONE, NULL},
	    {ST_RV_ALL_OLD, orig_item()},
	    {ST_RV_ALL_NEW, new_item},
	    {ST_RV_UPDATED_OLD,
	     M("a", N("1"), "b", S("x"), "c", M("d", N("1"), NULL), "tags", SS(1, "t1"), NULL)},
	    {ST_RV_UPDATED_NEW,
	     M("a", N("2"), "c", M("d", N("9"), NULL), "tags", SS(2, "t1", "t2"), NULL)},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put_ok("Tbl", orig_item());
		st_write_result res;
		int rc = update("Tbl", key_of("u", "1"), UPD, NULL, NULL, upd_values(), cases[i].rv,
		                &res);
		ck_assert_msg(rc == SHOAL_OK, "%s", msg);
		assert_value_eq(res.attributes, cases[i].want);
		ck_assert_ptr_null(res.old_item);
		assert_value_eq(get("Tbl", key_of("u", "1")), new_item);
		counts("Tbl", 1, st_item_size(new_item));
	}
	expect_err(update("Tbl", key_of("u", "1"), UPD, NULL, NULL, upd_values(),
	                  (st_return_values)42, NULL),
	           SHOAL_E_VALIDATION, NULL);

	/* On an absent item: UPDATED_OLD and ALL_OLD give nothing. */
	st_write_result res;
	ck_assert_int_eq(update("Tbl", key_of("v", "1"), "SET a = :one", NULL, NULL,
	                        M(":one", N("1"), NULL), ST_RV_UPDATED_OLD, &res),
	                 SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_int_eq(update("Tbl", key_of("w", "1"), "SET a = :one", NULL, NULL,
	                        M(":one", N("1"), NULL), ST_RV_ALL_OLD, &res),
	                 SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_int_eq(update("Tbl", key_of("x", "1"), "SET a = :one", NULL, NULL,
	                        M(":one", N("1"), NULL), ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	assert_value_eq(res.attributes, M("a", N("1"), NULL));
	/* Removing what is not there: nothing updated, nothing returned. */
	ck_assert_int_eq(
	    update("Tbl", key_of("x", "1"), "REMOVE zz", NULL, NULL, NULL, ST_RV_UPDATED_NEW, &res),
	    SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_int_eq(
	    update("Tbl", key_of("x", "1"), "REMOVE zz", NULL, NULL, NULL, ST_RV_UPDATED_OLD, &res),
	    SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	counts("Tbl", 4, st_item_size(new_item) + 3 * (3 + 4 + 3));
}
END_TEST

START_TEST(test_update_key_only)
{
	st_write_result res;
	/* No UpdateExpression: creates the key-only item. */
	ck_assert_int_eq(
	    update("Tbl", key_of("k", "5"), NULL, NULL, NULL, NULL, ST_RV_ALL_NEW, &res), SHOAL_OK);
	st_value *key_only = key_of("k", "5");
	assert_value_eq(res.attributes, key_only);
	assert_value_eq(get("Tbl", key_of("k", "5")), key_only);
	counts("Tbl", 1, 3 + 4);
	/* Again: nothing changes; ALL_OLD returns it. */
	ck_assert_int_eq(
	    update("Tbl", key_of("k", "5"), NULL, NULL, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	assert_value_eq(res.attributes, key_only);
	counts("Tbl", 1, 3 + 4);
	/* An existing item without an UpdateExpression is left as it is. */
	put_ok("Tbl", M("PK", S("k"), "SK", N("6"), "a", N("1"), NULL));
	ck_assert_int_eq(
	    update("Tbl", key_of("k", "6"), NULL, NULL, NULL, NULL, ST_RV_ALL_NEW, &res), SHOAL_OK);
	assert_value_eq(res.attributes, M("PK", S("k"), "SK", N("6"), "a", N("1"), NULL));
	/* Removing every other attribute keeps the key-only item. */
	put_ok("Tbl", M("PK", S("k"), "SK", N("7"), "a", N("1"), "b", S("bb"), NULL));
	ck_assert_int_eq(update("Tbl", key_of("k", "7"), "REMOVE a, b", NULL, NULL, NULL,
	                        ST_RV_UPDATED_OLD, &res),
	                 SHOAL_OK);
	assert_value_eq(res.attributes, M("a", N("1"), "b", S("bb"), NULL));
	assert_value_eq(get("Tbl", key_of("k", "7")), key_of("k", "7"));
	counts("Tbl", 3, 3 * 7 + 3);
}
END_TEST

START_TEST(test_update_key_attributes)
{
	put_ok("Tbl", orig_item());
	st_write_result res;
	const char *pre = "One or more parameter values were invalid: Cannot update attribute ";
	char want[SH_ERRMSG_SIZE];
	snprintf(want, sizeof(want), "%sPK. This attribute is part of the key", pre);
	expect_err(update("Tbl", key_of("u", "1"), "SET PK = :v", NULL, NULL, M(":v", S("z"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	expect_err(update("Tbl", key_of("u", "1"), "SET a = :v, #k = :v", NULL,
	                  M("#k", S("PK"), NULL), M(":v", S("z"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sSK. This attribute is part of the key", pre);
	expect_err(update("Tbl", key_of("u", "1"), "REMOVE SK", NULL, NULL, NULL, ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	expect_err(update("Tbl", key_of("u", "1"), "ADD SK :v", NULL, NULL, M(":v", N("1"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	/* Reading a key attribute is fine. */
	ck_assert_int_eq(update("Tbl", key_of("u", "1"), "SET pkcopy = PK", NULL, NULL, NULL,
	                        ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	assert_value_eq(res.attributes, M("pkcopy", S("u"), NULL));
	/* Placeholders without expressions. */
	expect_err(update("Tbl", key_of("u", "1"), NULL, NULL, NULL, M(":v", N("1"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "ExpressionAttributeValues can only be specified when using expressions: "
	           "UpdateExpression and ConditionExpression are null");
	expect_err(update("Tbl", key_of("u", "1"), NULL, NULL, M("#n", S("x"), NULL), NULL,
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "ExpressionAttributeNames can only be specified when using expressions");
	/* A runtime error of the update: nothing written. */
	expect_err(update("Tbl", key_of("u", "1"), "SET a = b + :one", NULL, NULL,
	                  M(":one", N("1"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, NULL);
	assert_value_eq(get("Tbl", key_of("u", "1")),
	                M("PK", S("u"), "SK", N("1"), "a", N("1"), "b", S("x"), "c",
	                  M("d", N("1"), "e", N("2"), NULL), "tags", SS(1, "t1"), "pkcopy", S("u"),
	                  NULL));
	/* Index key types are checked on the updated item. */
	expect_err(update("Tbl", key_of("u", "1"), "SET G = :v", NULL, NULL, M(":v", N("1"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Type mismatch for Index Key G "
	           "Expected: S Actual: N IndexName: byG");
}
END_TEST

START_TEST(test_update_conditions)
{
	put_ok("Tbl", orig_item());
	st_write_result res;
	expect_err(update("Tbl", key_of("u", "1"), "SET a = :two", "a = :two", NULL,
	                  M(":two", N("2"), NULL), ST_RV_ALL_NEW, &res),
	           SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	assert_value_eq(res.old_item, orig_item());
	ck_assert_ptr_null(res.attributes);
	assert_value_eq(get("Tbl", key_of("u", "1")), orig_item());
	ck_assert_int_eq(update("Tbl", key_of("u", "1"), "SET a = :two",
	                        "a = :one AND attribute_exists(c.d)", NULL,
	                        M(":two", N("2"), ":one", N("1"), NULL), ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	assert_value_eq(res.attributes, M("a", N("2"), NULL));
	/* Upsert-only-if-absent on a missing item. */
	expect_err(update("Tbl", key_of("none", "1"), "SET a = :two", "attribute_exists(PK)", NULL,
	                  M(":two", N("2"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item);
	ck_assert_ptr_null(get("Tbl", key_of("none", "1")));
	counts("Tbl", 1, st_item_size(get("Tbl", key_of("u", "1"))));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* DeleteItem                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_delete)
{
	st_write_result res;
	st_value *v = M("PK", S("d"), "SK", N("1"), "a", N("1"), NULL);
	put_ok("Tbl", v);
	put_ok("Tbl", M("PK", S("d"), "SK", N("2"), NULL));
	counts("Tbl", 2, 10 + 7);
	st_return_values bad[] = {ST_RV_UPDATED_OLD, ST_RV_ALL_NEW, ST_RV_UPDATED_NEW};
	for (int i = 0; i < 3; i++)
		expect_err(del("Tbl", key_of("d", "1"), NULL, NULL, bad[i], &res),
		           SHOAL_E_VALIDATION, "ReturnValues can only be ALL_OLD or NONE");
	expect_err(
	    del("Tbl", key_of("d", "1"), "a = :two", M(":two", N("2"), NULL), ST_RV_ALL_OLD, &res),
	    SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	assert_value_eq(res.old_item, v);
	counts("Tbl", 2, 17);
	ck_assert_int_eq(
	    del("Tbl", key_of("d", "1"), "a = :one", M(":one", N("1"), NULL), ST_RV_ALL_OLD, &res),
	    SHOAL_OK);
	assert_value_eq(res.attributes, v);
	ck_assert_ptr_null(get("Tbl", key_of("d", "1")));
	counts("Tbl", 1, 7);
	/* Deleting an absent item is fine and returns nothing. */
	ck_assert_int_eq(del("Tbl", key_of("d", "1"), NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	counts("Tbl", 1, 7);
	expect_err(del("Tbl", key_of("d", "1"), "attribute_exists(PK)", NULL, ST_RV_NONE, &res),
	           SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item);
	ck_assert_int_eq(del("Tbl", key_of("d", "2"), NULL, NULL, ST_RV_NONE, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	counts("Tbl", 0, 0);
	expect_err(del("Gone", key_of("d", "2"), NULL, NULL, ST_RV_NONE, &res), SHOAL_E_NOT_FOUND,
	           "Requested resource not found: Table: Gone not found");
	expect_err(del("Tbl", key_of("d", "2"), NULL, M(":x", N("1"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "ExpressionAttributeValues can only be specified when using expressions: "
	           "ConditionExpression is null");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Transactions                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_txn_abort)
{
	put_ok("Tbl", M("PK", S("keep"), "SK", N("1"), NULL));
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, msg), SHOAL_OK);
	st_write_result res;
	for (int i = 0; i < 10; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "%d", i);
		st_put_req p = {.table = "Tbl", .item = M("PK", S("t"), "SK", N(sk), NULL)};
		ck_assert_int_eq(st_put(txn, &p, &A, &res, msg), SHOAL_OK);
	}
	st_update_req u = {.table = "Tbl",
	                   .key = key_of("t", "3"),
	                   .update = "SET a = :v",
	                   .attrs = {NULL, M(":v", S("x"), NULL)},
	                   .return_values = ST_RV_ALL_NEW};
	ck_assert_int_eq(st_update(txn, &u, &A, &res, msg), SHOAL_OK);
	st_delete_req d = {
	    .table = "Tbl", .key = key_of("keep", "1"), .return_values = ST_RV_ALL_OLD};
	ck_assert_int_eq(st_delete(txn, &d, &A, &res, msg), SHOAL_OK);
	ck_assert_ptr_nonnull(res.attributes);
	st_txn_set_applied(txn, 77);
	st_txn_abort(txn);
	for (int i = 0; i < 10; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "%d", i);
		ck_assert_ptr_null(get("Tbl", key_of("t", sk)));
	}
	ck_assert_ptr_nonnull(get("Tbl", key_of("keep", "1")));
	counts("Tbl", 1, 2 + 4 + 2 + 2);
	ck_assert_uint_eq(st_env_applied(env), 0);
}
END_TEST

START_TEST(test_txn_client_errors)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, msg), SHOAL_OK);
	st_write_result res;
	st_put_req p1 = {.table = "Tbl", .item = M("PK", S("a"), "SK", N("1"), NULL)};
	ck_assert_int_eq(st_put(txn, &p1, &A, &res, msg), SHOAL_OK);
	/* The txn sees its own write. */
	st_put_req p1c = {.table = "Tbl",
	                  .item = M("PK", S("a"), "SK", N("1"), "v", N("2"), NULL),
	                  .condition = "attribute_exists(PK)"};
	ck_assert_int_eq(st_put(txn, &p1c, &A, &res, msg), SHOAL_OK);
	/* Client errors of every kind leave it usable. */
	st_put_req bad_key = {.table = "Tbl", .item = M("PK", S("b"), NULL)};
	expect_err(st_put(txn, &bad_key, &A, &res, msg), SHOAL_E_VALIDATION, NULL);
	st_put_req cond = {.table = "Tbl",
	                   .item = M("PK", S("a"), "SK", N("1"), NULL),
	                   .condition = "attribute_not_exists(PK)"};
	expect_err(st_put(txn, &cond, &A, &res, msg), SHOAL_E_CONDITION_FAILED, NULL);
	st_update_req ku = {.table = "Tbl",
	                    .key = key_of("a", "1"),
	                    .update = "REMOVE PK",
	                    .return_values = ST_RV_NONE};
	expect_err(st_update(txn, &ku, &A, &res, msg), SHOAL_E_VALIDATION, NULL);
	st_delete_req nf = {.table = "Missing", .key = key_of("a", "1")};
	expect_err(st_delete(txn, &nf, &A, &res, msg), SHOAL_E_NOT_FOUND, NULL);
	st_update_req rt = {.table = "Tbl",
	                    .key = key_of("a", "1"),
	                    .update = "SET v = v + :s",
	                    .attrs = {NULL, M(":s", S("str"), NULL)}};
	expect_err(st_update(txn, &rt, &A, &res, msg), SHOAL_E_VALIDATION, NULL);
	st_put_req p2 = {.table = "Tbl", .item = M("PK", S("b"), "SK", N("2"), NULL)};
	ck_assert_int_eq(st_put(txn, &p2, &A, &res, msg), SHOAL_OK);
	st_txn_set_applied(txn, 12);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	assert_value_eq(get("Tbl", key_of("a", "1")),
	                M("PK", S("a"), "SK", N("1"), "v", N("2"), NULL));
	assert_value_eq(get("Tbl", key_of("b", "2")), key_of("b", "2"));
	counts("Tbl", 2, 3 + 4 + 1 + 2 + 3 + 4);
	ck_assert_uint_eq(st_env_applied(env), 12);
}
END_TEST

START_TEST(test_txn_poisoned)
{
	put_ok("Tbl", M("PK", S("old"), "SK", N("1"), NULL));
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, msg), SHOAL_OK);
	st_write_result res;
	st_put_req p = {.table = "Tbl", .item = M("PK", S("a"), "SK", N("1"), "x", S("y"), NULL)};
	ck_assert_int_eq(st_put(txn, &p, &A, &res, msg), SHOAL_OK);
	/* A new item bigger than any arena block so far: the copy allocates. */
	st_put_req p2 = {.table = "Tbl",
	                 .item = M("PK", S("b"), "SK", N("1"), "x", Sn(100000, 'y'), NULL)};
	sh_fault_arm(SH_FAULT_ALLOC, 1, false);
	int rc = st_put(txn, &p2, &A, &res, msg);
	ck_assert_int_eq(sh_fault_fired(SH_FAULT_ALLOC), 1);
	sh_fault_reset();
	ck_assert_int_eq(rc, SHOAL_E_NOMEM);
	char first[SH_ERRMSG_SIZE];
	snprintf(first, sizeof(first), "%s", msg);
	/* Every later call, whatever it is, returns the same error. */
	st_delete_req d = {.table = "Tbl", .key = key_of("old", "1")};
	expect_err(st_delete(txn, &d, &A, &res, msg), SHOAL_E_NOMEM, first);
	st_update_req u = {.table = "Tbl", .key = key_of("old", "1")};
	expect_err(st_update(txn, &u, &A, &res, msg), SHOAL_E_NOMEM, first);
	expect_err(st_put(txn, &p, &A, &res, msg), SHOAL_E_NOMEM, first);
	expect_err(st_txn_commit(txn, msg), SHOAL_E_NOMEM, first);
	ck_assert_ptr_null(get("Tbl", key_of("a", "1")));
	ck_assert_ptr_nonnull(get("Tbl", key_of("old", "1")));
	counts("Tbl", 1, 2 + 3 + 2 + 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism                                                               */
/* ------------------------------------------------------------------------ */

/* Every key and value of the data and catalog DBIs, concatenated. */
static size_t dump(st_env *e, uint8_t **out)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	MDB_txn *txn;
	ck_assert_int_eq(mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn), 0);
	MDB_dbi dbis[2] = {e->catalog, e->data};
	for (int i = 0; i < 2; i++) {
		MDB_cursor *c;
		ck_assert_int_eq(mdb_cursor_open(txn, dbis[i], &c), 0);
		MDB_val k, v;
		for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
		     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			size_t need = len + k.mv_size + v.mv_size + 16;
			while (need > cap)
				buf = realloc(buf, cap *= 2);
			memcpy(buf + len, &k.mv_size, sizeof(k.mv_size));
			len += sizeof(k.mv_size);
			memcpy(buf + len, k.mv_data, k.mv_size);
			len += k.mv_size;
			memcpy(buf + len, &v.mv_size, sizeof(v.mv_size));
			len += sizeof(v.mv_size);
			memcpy(buf + len, v.mv_data, v.mv_size);
			len += v.mv_size;
		}
		mdb_cursor_close(c);
	}
	mdb_txn_abort(txn);
	*out = buf;
	return len;
}

static int random_op(st_env *e, uint64_t *rs, sh_arena *a, char *m)
{
	st_write_result res;
	char pk[8], sk[8], val[16];
	snprintf(pk, sizeof(pk), "p%d", (int)(tl_rand(rs) % 3));
	snprintf(sk, sizeof(sk), "%d", (int)(tl_rand(rs) % 5));
	snprintf(val, sizeof(val), "%d", (int)(tl_rand(rs) % 100));
	st_value *key = st_new_map(a, 2);
	st_map_set(a, key, "PK", 2, st_new_s(a, pk));
	st_map_set(a, key, "SK", 2, st_new_n(a, sk));
	st_value *vals = st_new_map(a, 1);
	st_map_set(a, vals, ":v", 2, st_new_n(a, val));
	switch (tl_rand(rs) % 4) {
	case 0: {
		st_value *item = st_new_map(a, 3);
		st_map_set(a, item, "PK", 2, st_new_s(a, pk));
		st_map_set(a, item, "SK", 2, st_new_n(a, sk));
		st_map_set(a, item, "n", 1, st_new_n(a, val));
		st_put_req r = {.table = "Tbl", .item = item};
		return st_put_item(e, &r, a, &res, m);
	}
	case 1: {
		st_update_req r = {.table = "Tbl",
		                   .key = key,
		                   .update = "ADD n :v SET #x = if_not_exists(#x, :v)",
		                   .attrs = {NULL, vals}};
		st_value *names = st_new_map(a, 1);
		st_map_set(a, names, "#x", 2, st_new_s(a, "x"));
		r.attrs.names = names;
		return st_update_item(e, &r, a, &res, m);
	}
	case 2: {
		st_update_req r = {.table = "Tbl",
		                   .key = key,
		                   .update = "SET n = :v",
		                   .condition = "attribute_exists(n) AND n < :v",
		                   .attrs = {NULL, vals}};
		return st_update_item(e, &r, a, &res, m);
	}
	default: {
		st_delete_req r = {.table = "Tbl", .key = key};
		return st_delete_item(e, &r, a, &res, m);
	}
	}
}

START_TEST(test_deterministic)
{
	char dir2[4096];
	snprintf(dir2, sizeof(dir2), "%s", tl_tmpdir("write2"));
	st_env *env2;
	ck_assert_int_eq(st_env_open(dir2, NULL, &env2, msg), SHOAL_OK);
	st_env *saved = env;
	env = env2;
	create_table("Tbl", "PK", ST_S, "SK", ST_N, true);
	env = saved;
	uint64_t seed = tl_seed();
	uint64_t r1 = seed, r2 = seed;
	for (int i = 0; i < 300; i++) {
		char m1[SH_ERRMSG_SIZE] = "", m2[SH_ERRMSG_SIZE] = "";
		int rc1 = random_op(env, &r1, &A, m1);
		int rc2 = random_op(env2, &r2, &A, m2);
		ck_assert_int_eq(rc1, rc2);
		ck_assert_str_eq(m1, m2);
		ck_assert_msg(rc1 == SHOAL_OK || rc1 == SHOAL_E_CONDITION_FAILED, "%s", m1);
		sh_arena_reset(&A);
	}
	/* The other tables of env differ; compare Tbl's data and record. */
	uint8_t *d1, *d2;
	st_table_info i1, i2;
	ck_assert_int_eq(st_table_describe(env, "Tbl", &A, &i1, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(env2, "Tbl", &A, &i2, msg), SHOAL_OK);
	ck_assert_uint_eq(i1.item_count, i2.item_count);
	ck_assert_uint_eq(i1.size_bytes, i2.size_bytes);
	ck_assert_uint_eq(i1.def.id, 1);
	ck_assert_uint_eq(i2.def.id, 1);
	size_t n2 = dump(env2, &d2);
	/* env holds three more (empty) tables in its catalog: drop them. */
	const char *others[] = {"Str", "Bin", "Hash"};
	for (int i = 0; i < 3; i++) {
		st_txn *txn;
		ck_assert_int_eq(st_txn_begin(env, &txn, msg), SHOAL_OK);
		ck_assert_int_eq(st_table_delete(txn, others[i], msg), SHOAL_OK);
		ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	}
	size_t n1 = dump(env, &d1);
	ck_assert_uint_eq(n1, n2);
	ck_assert(memcmp(d1, d2, n1) == 0);
	free(d1);
	free(d2);
	st_env_close(env2);
	tl_rmtree(dir2);
}
END_TEST

static Suite *write_suite(void)
{
	Suite *s = suite_create("write");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_put_get);
	tcase_add_test(tc, test_put_return_values);
	tcase_add_test(tc, test_put_conditions);
	tcase_add_test(tc, test_key_checks_item);
	tcase_add_test(tc, test_key_checks_key);
	tcase_add_test(tc, test_key_sizes);
	tcase_add_test(tc, test_item_size_limit);
	tcase_add_test(tc, test_update_return_values);
	tcase_add_test(tc, test_update_key_only);
	tcase_add_test(tc, test_update_key_attributes);
	tcase_add_test(tc, test_update_conditions);
	tcase_add_test(tc, test_delete);
	tcase_add_test(tc, test_txn_abort);
	tcase_add_test(tc, test_txn_client_errors);
	tcase_add_test(tc, test_txn_poisoned);
	tcase_add_test(tc, test_deterministic);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(write_suite)
