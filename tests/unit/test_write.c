/* PutItem, UpdateItem, DeleteItem: DynamoDB's semantics, limits and messages. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/engine.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

/* ------------------------------------------------------------------------ */
/* Fixture: tables Tbl (PK S, SK N, GSI byG on G S), Str (PK S, SK S),       */
/* Bin (PK B, SK B), Hash (PK N)                                             */
/* ------------------------------------------------------------------------ */

/* A table; with gsi, with the index byG on G (S). */
static void create_table(const char *name, const char *pk, st_type pt, const char *sk,
                         st_type stype, bool gsi)
{
	if (gsi)
		tl_create_table_gsi(name, (st_key_schema){{pk, pt}, {sk, stype}}, "byG",
		                    (st_key_schema){{"G", ST_S}, {NULL, ST_NONE}});
	else
		tl_create_table(name, pk, pt, sk, stype);
}

static void setup(void)
{
	tl_store_open("write", &(st_env_options){.map_size = 1ull << 30});
	create_table("Tbl", "PK", ST_S, "SK", ST_N, true);
	create_table("Str", "PK", ST_S, "SK", ST_S, false);
	create_table("Bin", "PK", ST_B, "SK", ST_B, false);
	create_table("Hash", "PK", ST_N, NULL, ST_NONE, false);
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
	tl_msg[0] = '\0';
	return st_put_item(tl_env, &r, &tl_arena, res, tl_msg);
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
	tl_msg[0] = '\0';
	return st_update_item(tl_env, &r, &tl_arena, res, tl_msg);
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
	tl_msg[0] = '\0';
	return st_delete_item(tl_env, &r, &tl_arena, res, tl_msg);
}

static void counts(const char *table, uint64_t items, uint64_t bytes)
{
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, table, &tl_arena, &info, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, items);
	ck_assert_uint_eq(info.size_bytes, bytes);
}

static st_value *key_of(const char *pk, const char *sk)
{
	return map("PK", S(pk), "SK", N(sk), NULL);
}

#define expect_err(call, code, text)                                                               \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		ck_assert_msg(rc_ == (code), "got %s (%s), want %s", shoal_err_name(rc_), tl_msg,  \
		              shoal_err_name(code));                                               \
		if ((text) != NULL)                                                                \
			ck_assert_str_eq(tl_msg, (const char *)(text));                            \
	} while (0)

/* ------------------------------------------------------------------------ */
/* PutItem                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_put_get)
{
	st_value *item = map("PK", S("p"), "SK", N("1.50"), "n", N("007"), "s", S("hi"), NULL);
	tl_put("Tbl", item);
	/* Numbers were canonicalised: the key 1.5 finds it. */
	st_value *got = tl_get("Tbl", key_of("p", "1.5"));
	tl_assert_value_eq(got, map("PK", S("p"), "SK", N("1.5"), "n", N("7"), "s", S("hi"), NULL));
	/* PK(2)+1 + SK(2)+2 + n(1)+2 + s(1)+2 */
	counts("Tbl", 1, 13);

	/* The request is not modified: attrs out of order stay out of order. */
	st_value raw_n = {.type = ST_N, .u.str = {"2.0", 3}};
	st_attr attrs[3] = {{"z", 1, *S("last")}, {"SK", 2, raw_n}, {"PK", 2, *S("q")}};
	st_value raw = {.type = ST_M, .u.map = {attrs, 3}};
	tl_put("Tbl", &raw);
	ck_assert_str_eq(attrs[0].name, "z");
	ck_assert_uint_eq(attrs[1].value.u.str.len, 3);
	ck_assert(memcmp(attrs[1].value.u.str.ptr, "2.0", 3) == 0);
	tl_assert_value_eq(tl_get("Tbl", key_of("q", "2")),
	                   map("PK", S("q"), "SK", N("2"), "z", S("last"), NULL));
	counts("Tbl", 2, 13 + 3 + 4 + 5);

	/* Invalid values are refused with the value module's message. */
	st_value bad_null = {.type = ST_NULL, .u.boolean = false};
	expect_err(put("Tbl", map("PK", S("p"), "SK", N("1"), "x", &bad_null, NULL), NULL, NULL,
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
	st_value *v1 = map("PK", S("p"), "SK", N("1"), "a", N("1"), NULL);
	st_value *v2 = map("PK", S("p"), "SK", N("1"), "a", N("2"), NULL);
	ck_assert_int_eq(put("Tbl", v1, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes); /* no old item */
	ck_assert_int_eq(put("Tbl", v2, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	tl_assert_value_eq(res.attributes, v1);
	ck_assert_int_eq(put("Tbl", v1, NULL, NULL, ST_RV_NONE, &res), SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_ptr_null(res.old_item);
	st_return_values bad[] = {ST_RV_UPDATED_OLD, ST_RV_ALL_NEW, ST_RV_UPDATED_NEW};
	for (int i = 0; i < 3; i++)
		expect_err(put("Tbl", v2, NULL, NULL, bad[i], &res), SHOAL_E_VALIDATION,
		           "ReturnValues can only be ALL_OLD or NONE");
	tl_assert_value_eq(tl_get("Tbl", key_of("p", "1")), v1);

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
	st_value *v1 = map("PK", S("p"), "SK", N("1"), "a", N("1"), NULL);
	st_value *v2 = map("PK", S("p"), "SK", N("1"), "a", N("2"), NULL);
	/* Idempotent create. */
	ck_assert_int_eq(put("Tbl", v1, "attribute_not_exists(PK)", NULL, ST_RV_NONE, &res),
	                 SHOAL_OK);
	expect_err(put("Tbl", v2, "attribute_not_exists(PK)", NULL, ST_RV_ALL_OLD, &res),
	           SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	tl_assert_value_eq(res.old_item, v1); /* ReturnValuesOnConditionCheckFailure */
	ck_assert_ptr_null(res.attributes);
	st_put_req r = {.table = "Tbl", .item = v2, .condition = "attribute_not_exists(PK)"};
	expect_err(st_put_item(tl_env, &r, &tl_arena, &res, tl_msg), SHOAL_E_CONDITION_FAILED,
	           NULL);
	ck_assert_ptr_null(res.old_item); /* not asked for */
	tl_assert_value_eq(tl_get("Tbl", key_of("p", "1")), v1);
	counts("Tbl", 1, 3 + 4 + 3);

	/* Conditions on the old image with values. */
	st_value *one = map(":one", N("1"), NULL);
	ck_assert_int_eq(put("Tbl", v2, "a = :one", one, ST_RV_ALL_OLD, &res), SHOAL_OK);
	tl_assert_value_eq(res.attributes, v1);
	expect_err(put("Tbl", v1, "a = :one", one, ST_RV_NONE, &res), SHOAL_E_CONDITION_FAILED,
	           NULL);
	tl_assert_value_eq(res.old_item, v2);
	/* A condition on an absent item sees no attributes. */
	expect_err(put("Tbl", map("PK", S("new"), "SK", N("1"), NULL), "attribute_exists(PK)", NULL,
	               ST_RV_NONE, &res),
	           SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item);
	ck_assert_ptr_null(tl_get("Tbl", key_of("new", "1")));

	/* Placeholders without an expression, unused ones, a bad expression. */
	st_put_req pr = {.table = "Tbl", .item = v1, .attrs = {map("#n", S("a"), NULL), NULL}};
	expect_err(st_put_item(tl_env, &pr, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION,
	           "ExpressionAttributeNames can only be specified when using expressions");
	pr.attrs.names = NULL;
	pr.attrs.values = one;
	expect_err(st_put_item(tl_env, &pr, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION,
	           "ExpressionAttributeValues can only be specified when using expressions: "
	           "ConditionExpression is null");
	pr.condition = "attribute_exists(PK)";
	expect_err(
	    st_put_item(tl_env, &pr, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION,
	    "Value provided in ExpressionAttributeValues unused in expressions: keys: {:one}");
	pr.condition = "a = = :one";
	expect_err(st_put_item(tl_env, &pr, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION, NULL);
	ck_assert_ptr_nonnull(strstr(tl_msg, "Invalid ConditionExpression"));
	tl_assert_value_eq(tl_get("Tbl", key_of("p", "1")), v2);
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
	expect_err(put("Tbl", map("SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sMissing the key SK in the item", p);
	expect_err(put("Tbl", map("PK", S("a"), "x", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sType mismatch for key PK expected: S actual: N", p);
	expect_err(put("Tbl", map("PK", N("1"), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sType mismatch for key SK expected: N actual: SS", p);
	expect_err(
	    put("Tbl", map("PK", S("a"), "SK", SS(1, "x"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, want);
	expect_err(put("Tbl", map("PK", S(""), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. The AttributeValue for a key "
	           "attribute cannot contain an empty string value. Key: PK");
	expect_err(
	    put("Bin", map("PK", B("x", 1), "SK", B("", 0), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION,
	    "One or more parameter values are not valid. The AttributeValue for a key "
	    "attribute cannot contain an empty binary value. Key: SK");
	/* Index keys must have their defined type. */
	snprintf(want, sizeof(want),
	         "%sType mismatch for Index Key G Expected: S Actual: N IndexName: byG", p);
	expect_err(put("Tbl", map("PK", S("a"), "SK", N("1"), "G", N("5"), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, want);
	expect_err(put("Tbl", map("PK", S("a"), "SK", N("1"), "G", S(""), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. A value specified for a secondary "
	           "index key is not supported. The AttributeValue for a key attribute cannot "
	           "contain an empty string value. IndexName: byG, IndexKey: G");
	tl_put("Tbl", map("PK", S("a"), "SK", N("1"), "G", S("five"), NULL));
	counts("Tbl", 1, 3 + 4 + 5);
	/* A hash-only table: extra attributes are fine in an item. */
	tl_put("Hash", map("PK", N("-1e100"), "other", S("x"), NULL));
	tl_assert_value_eq(tl_get("Hash", map("PK", N("-1E+100"), NULL)),
	                   map("PK", N("-1e100"), "other", S("x"), NULL));
}
END_TEST

START_TEST(test_key_checks_key)
{
	const char *nomatch = "The provided key element does not match the schema";
	tl_put("Tbl", map("PK", S("a"), "SK", N("1"), "x", N("1"), NULL));
	st_write_result res;
	st_value *keys[] = {
	    map("PK", S("a"), NULL),                            /* missing SK */
	    map("PK", S("a"), "SK", N("1"), "x", N("1"), NULL), /* extra attribute */
	    map("PK", S("a"), "XX", N("1"), NULL),              /* wrong name */
	    map("PK", N("1"), "SK", N("1"), NULL),              /* wrong type */
	    map("PK", S("a"), "SK", S("1"), NULL),              /* wrong type */
	    map(NULL),                                          /* empty */
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		expect_err(del("Tbl", keys[i], NULL, NULL, ST_RV_NONE, &res), SHOAL_E_VALIDATION,
		           nomatch);
		expect_err(update("Tbl", keys[i], "SET y = :v", NULL, NULL, map(":v", N("1"), NULL),
		                  ST_RV_NONE, &res),
		           SHOAL_E_VALIDATION, nomatch);
	}
	expect_err(del("Tbl", map("PK", S(""), "SK", N("1"), NULL), NULL, NULL, ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values are not valid. The AttributeValue for a key "
	           "attribute cannot contain an empty string value. Key: PK");
	expect_err(del("Tbl", NULL, NULL, NULL, ST_RV_NONE, &res), SHOAL_E_VALIDATION,
	           "1 validation error detected: Value null at 'key' failed to satisfy "
	           "constraint: Member must not be null");
	counts("Tbl", 1, 3 + 4 + 3);
	ck_assert_ptr_nonnull(tl_get("Tbl", key_of("a", "1")));
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
	st_value *big = map("PK", Sn(2048, 'p'), "SK", Sn(1024, 's'), "v", N("1"), NULL);
	tl_put("Str", big);
	tl_assert_value_eq(tl_get("Str", map("PK", Sn(2048, 'p'), "SK", Sn(1024, 's'), NULL)), big);
	st_value *big2 = map("PK", Sn(2048, 'p'), "SK", Sn(1023, 's'), NULL);
	tl_put("Str", big2);
	tl_assert_value_eq(tl_get("Str", map("PK", Sn(2048, 'p'), "SK", Sn(1023, 's'), NULL)),
	                   big2);
	counts("Str", 2, (2 + 2048 + 2 + 1024 + 1 + 2) + (2 + 2048 + 2 + 1023));
	/* One byte more. */
	expect_err(
	    put("Str", map("PK", Sn(2049, 'p'), "SK", S("s"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, pk_msg);
	expect_err(
	    put("Str", map("PK", S("p"), "SK", Sn(1025, 's'), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, sk_msg);
	expect_err(
	    del("Str", map("PK", Sn(2049, 'p'), "SK", S("s"), NULL), NULL, NULL, ST_RV_NONE, NULL),
	    SHOAL_E_VALIDATION, pk_msg);
	expect_err(update("Str", map("PK", S("p"), "SK", Sn(1025, 's'), NULL), NULL, NULL, NULL,
	                  NULL, ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, sk_msg);
	/* Binary keys count bytes too. */
	uint8_t bytes[2049];
	memset(bytes, 0xff, sizeof(bytes));
	tl_put("Bin", map("PK", B(bytes, 2048), "SK", B(bytes, 1024), NULL));
	expect_err(put("Bin", map("PK", B(bytes, 2049), "SK", B(bytes, 1), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, pk_msg);
	expect_err(put("Bin", map("PK", B(bytes, 1), "SK", B(bytes, 1025), NULL), NULL, NULL,
	               ST_RV_NONE, NULL),
	           SHOAL_E_VALIDATION, sk_msg);
	counts("Bin", 1, 2 + 2048 + 2 + 1024);
}
END_TEST

START_TEST(test_item_size_limit)
{
	/* PK(2)+"p"(1) + SK(2)+N 1(2) + data(4)+L = 11 + L */
	size_t L = ST_MAX_ITEM_SIZE - 11;
	st_value *at_limit = map("PK", S("p"), "SK", N("1"), "data", Sn(L, 'x'), NULL);
	ck_assert_uint_eq(st_item_size(at_limit), ST_MAX_ITEM_SIZE);
	tl_put("Tbl", at_limit);
	counts("Tbl", 1, ST_MAX_ITEM_SIZE);
	st_value *over = map("PK", S("p"), "SK", N("2"), "data", Sn(L + 1, 'x'), NULL);
	expect_err(put("Tbl", over, NULL, NULL, ST_RV_NONE, NULL), SHOAL_E_VALIDATION,
	           "Item size has exceeded the maximum allowed size");
	ck_assert_ptr_null(tl_get("Tbl", key_of("p", "2")));
	tl_assert_value_eq(tl_get("Tbl", key_of("p", "1")), at_limit);

	/* UpdateItem checks the item the update makes. */
	tl_put("Tbl", map("PK", S("p"), "SK", N("3"), "data", S("small"), NULL));
	st_write_result res;
	expect_err(update("Tbl", key_of("p", "3"), "SET #d = :v", NULL, map("#d", S("data"), NULL),
	                  map(":v", Sn(L + 1, 'y'), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, "Item size to update has exceeded the maximum allowed size");
	tl_assert_value_eq(tl_get("Tbl", key_of("p", "3")),
	                   map("PK", S("p"), "SK", N("3"), "data", S("small"), NULL));
	ck_assert_int_eq(update("Tbl", key_of("p", "3"), "SET #d = :v", NULL,
	                        map("#d", S("data"), NULL), map(":v", Sn(L, 'y'), NULL), ST_RV_NONE,
	                        &res),
	                 SHOAL_OK);
	counts("Tbl", 2, 2 * ST_MAX_ITEM_SIZE);
	/* Growing an item past the limit by appending. */
	expect_err(update("Tbl", key_of("p", "3"), "SET more = :v", NULL, NULL,
	                  map(":v", S("z"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, "Item size to update has exceeded the maximum allowed size");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* UpdateItem                                                                */
/* ------------------------------------------------------------------------ */

static st_value *orig_item(void)
{
	return map("PK", S("u"), "SK", N("1"), "a", N("1"), "b", S("x"), "c",
	           map("d", N("1"), "e", N("2"), NULL), "tags", SS(1, "t1"), NULL);
}

static const char *UPD = "SET a = a + :one, c.d = :nine REMOVE b ADD tags :t2";

static st_value *upd_values(void)
{
	return map(":one", N("1"), ":nine", N("9"), ":t2", SS(1, "t2"), NULL);
}

START_TEST(test_update_return_values)
{
	st_value *new_item =
	    map("PK", S("u"), "SK", N("1"), "a", N("2"), "c", map("d", N("9"), "e", N("2"), NULL),
	        "tags", SS(2, "t1", "t2"), NULL);
	struct {
		st_return_values rv;
		st_value *want;
	} cases[] = {
	    {ST_RV_NONE, NULL},
	    {ST_RV_ALL_OLD, orig_item()},
	    {ST_RV_ALL_NEW, new_item},
	    {ST_RV_UPDATED_OLD,
	     map("a", N("1"), "b", S("x"), "c", map("d", N("1"), NULL), "tags", SS(1, "t1"), NULL)},
	    {ST_RV_UPDATED_NEW,
	     map("a", N("2"), "c", map("d", N("9"), NULL), "tags", SS(2, "t1", "t2"), NULL)},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tl_put("Tbl", orig_item());
		st_write_result res;
		int rc = update("Tbl", key_of("u", "1"), UPD, NULL, NULL, upd_values(), cases[i].rv,
		                &res);
		ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
		tl_assert_value_eq(res.attributes, cases[i].want);
		ck_assert_ptr_null(res.old_item);
		tl_assert_value_eq(tl_get("Tbl", key_of("u", "1")), new_item);
		counts("Tbl", 1, st_item_size(new_item));
	}
	expect_err(update("Tbl", key_of("u", "1"), UPD, NULL, NULL, upd_values(),
	                  (st_return_values)42, NULL),
	           SHOAL_E_VALIDATION, NULL);

	/* On an absent item: UPDATED_OLD and ALL_OLD give nothing. */
	st_write_result res;
	ck_assert_int_eq(update("Tbl", key_of("v", "1"), "SET a = :one", NULL, NULL,
	                        map(":one", N("1"), NULL), ST_RV_UPDATED_OLD, &res),
	                 SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_int_eq(update("Tbl", key_of("w", "1"), "SET a = :one", NULL, NULL,
	                        map(":one", N("1"), NULL), ST_RV_ALL_OLD, &res),
	                 SHOAL_OK);
	ck_assert_ptr_null(res.attributes);
	ck_assert_int_eq(update("Tbl", key_of("x", "1"), "SET a = :one", NULL, NULL,
	                        map(":one", N("1"), NULL), ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	tl_assert_value_eq(res.attributes, map("a", N("1"), NULL));
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
	tl_assert_value_eq(res.attributes, key_only);
	tl_assert_value_eq(tl_get("Tbl", key_of("k", "5")), key_only);
	counts("Tbl", 1, 3 + 4);
	/* Again: nothing changes; ALL_OLD returns it. */
	ck_assert_int_eq(
	    update("Tbl", key_of("k", "5"), NULL, NULL, NULL, NULL, ST_RV_ALL_OLD, &res), SHOAL_OK);
	tl_assert_value_eq(res.attributes, key_only);
	counts("Tbl", 1, 3 + 4);
	/* An existing item without an UpdateExpression is left as it is. */
	tl_put("Tbl", map("PK", S("k"), "SK", N("6"), "a", N("1"), NULL));
	ck_assert_int_eq(
	    update("Tbl", key_of("k", "6"), NULL, NULL, NULL, NULL, ST_RV_ALL_NEW, &res), SHOAL_OK);
	tl_assert_value_eq(res.attributes, map("PK", S("k"), "SK", N("6"), "a", N("1"), NULL));
	/* Removing every other attribute keeps the key-only item. */
	tl_put("Tbl", map("PK", S("k"), "SK", N("7"), "a", N("1"), "b", S("bb"), NULL));
	ck_assert_int_eq(update("Tbl", key_of("k", "7"), "REMOVE a, b", NULL, NULL, NULL,
	                        ST_RV_UPDATED_OLD, &res),
	                 SHOAL_OK);
	tl_assert_value_eq(res.attributes, map("a", N("1"), "b", S("bb"), NULL));
	tl_assert_value_eq(tl_get("Tbl", key_of("k", "7")), key_of("k", "7"));
	counts("Tbl", 3, 3 * 7 + 3);
}
END_TEST

START_TEST(test_update_key_attributes)
{
	tl_put("Tbl", orig_item());
	st_write_result res;
	const char *pre = "One or more parameter values were invalid: Cannot update attribute ";
	char want[SH_ERRMSG_SIZE];
	snprintf(want, sizeof(want), "%sPK. This attribute is part of the key", pre);
	expect_err(update("Tbl", key_of("u", "1"), "SET PK = :v", NULL, NULL,
	                  map(":v", S("z"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	expect_err(update("Tbl", key_of("u", "1"), "SET a = :v, #k = :v", NULL,
	                  map("#k", S("PK"), NULL), map(":v", S("z"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	snprintf(want, sizeof(want), "%sSK. This attribute is part of the key", pre);
	expect_err(update("Tbl", key_of("u", "1"), "REMOVE SK", NULL, NULL, NULL, ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	expect_err(update("Tbl", key_of("u", "1"), "ADD SK :v", NULL, NULL, map(":v", N("1"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, want);
	/* Reading a key attribute is fine. */
	ck_assert_int_eq(update("Tbl", key_of("u", "1"), "SET pkcopy = PK", NULL, NULL, NULL,
	                        ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	tl_assert_value_eq(res.attributes, map("pkcopy", S("u"), NULL));
	/* Placeholders without expressions. */
	expect_err(update("Tbl", key_of("u", "1"), NULL, NULL, NULL, map(":v", N("1"), NULL),
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "ExpressionAttributeValues can only be specified when using expressions: "
	           "UpdateExpression and ConditionExpression are null");
	expect_err(update("Tbl", key_of("u", "1"), NULL, NULL, map("#n", S("x"), NULL), NULL,
	                  ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "ExpressionAttributeNames can only be specified when using expressions");
	/* A runtime error of the update: nothing written. */
	expect_err(update("Tbl", key_of("u", "1"), "SET a = b + :one", NULL, NULL,
	                  map(":one", N("1"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION, NULL);
	tl_assert_value_eq(tl_get("Tbl", key_of("u", "1")),
	                   map("PK", S("u"), "SK", N("1"), "a", N("1"), "b", S("x"), "c",
	                       map("d", N("1"), "e", N("2"), NULL), "tags", SS(1, "t1"), "pkcopy",
	                       S("u"), NULL));
	/* Index key types are checked on the updated item. */
	expect_err(update("Tbl", key_of("u", "1"), "SET G = :v", NULL, NULL,
	                  map(":v", N("1"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Type mismatch for Index Key G "
	           "Expected: S Actual: N IndexName: byG");
}
END_TEST

START_TEST(test_update_conditions)
{
	tl_put("Tbl", orig_item());
	st_write_result res;
	expect_err(update("Tbl", key_of("u", "1"), "SET a = :two", "a = :two", NULL,
	                  map(":two", N("2"), NULL), ST_RV_ALL_NEW, &res),
	           SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	tl_assert_value_eq(res.old_item, orig_item());
	ck_assert_ptr_null(res.attributes);
	tl_assert_value_eq(tl_get("Tbl", key_of("u", "1")), orig_item());
	ck_assert_int_eq(update("Tbl", key_of("u", "1"), "SET a = :two",
	                        "a = :one AND attribute_exists(c.d)", NULL,
	                        map(":two", N("2"), ":one", N("1"), NULL), ST_RV_UPDATED_NEW, &res),
	                 SHOAL_OK);
	tl_assert_value_eq(res.attributes, map("a", N("2"), NULL));
	/* Upsert-only-if-absent on a missing item. */
	expect_err(update("Tbl", key_of("none", "1"), "SET a = :two", "attribute_exists(PK)", NULL,
	                  map(":two", N("2"), NULL), ST_RV_NONE, &res),
	           SHOAL_E_CONDITION_FAILED, NULL);
	ck_assert_ptr_null(res.old_item);
	ck_assert_ptr_null(tl_get("Tbl", key_of("none", "1")));
	counts("Tbl", 1, st_item_size(tl_get("Tbl", key_of("u", "1"))));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* DeleteItem                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_delete)
{
	st_write_result res;
	st_value *v = map("PK", S("d"), "SK", N("1"), "a", N("1"), NULL);
	tl_put("Tbl", v);
	tl_put("Tbl", map("PK", S("d"), "SK", N("2"), NULL));
	counts("Tbl", 2, 10 + 7);
	st_return_values bad[] = {ST_RV_UPDATED_OLD, ST_RV_ALL_NEW, ST_RV_UPDATED_NEW};
	for (int i = 0; i < 3; i++)
		expect_err(del("Tbl", key_of("d", "1"), NULL, NULL, bad[i], &res),
		           SHOAL_E_VALIDATION, "ReturnValues can only be ALL_OLD or NONE");
	expect_err(del("Tbl", key_of("d", "1"), "a = :two", map(":two", N("2"), NULL),
	               ST_RV_ALL_OLD, &res),
	           SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	tl_assert_value_eq(res.old_item, v);
	counts("Tbl", 2, 17);
	ck_assert_int_eq(del("Tbl", key_of("d", "1"), "a = :one", map(":one", N("1"), NULL),
	                     ST_RV_ALL_OLD, &res),
	                 SHOAL_OK);
	tl_assert_value_eq(res.attributes, v);
	ck_assert_ptr_null(tl_get("Tbl", key_of("d", "1")));
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
	expect_err(del("Tbl", key_of("d", "2"), NULL, map(":x", N("1"), NULL), ST_RV_NONE, &res),
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
	tl_put("Tbl", map("PK", S("keep"), "SK", N("1"), NULL));
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_write_result res;
	for (int i = 0; i < 10; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "%d", i);
		st_put_req p = {.table = "Tbl", .item = map("PK", S("t"), "SK", N(sk), NULL)};
		ck_assert_int_eq(st_put(txn, &p, &tl_arena, &res, tl_msg), SHOAL_OK);
	}
	st_update_req u = {.table = "Tbl",
	                   .key = key_of("t", "3"),
	                   .update = "SET a = :v",
	                   .attrs = {NULL, map(":v", S("x"), NULL)},
	                   .return_values = ST_RV_ALL_NEW};
	ck_assert_int_eq(st_update(txn, &u, &tl_arena, &res, tl_msg), SHOAL_OK);
	st_delete_req d = {
	    .table = "Tbl", .key = key_of("keep", "1"), .return_values = ST_RV_ALL_OLD};
	ck_assert_int_eq(st_delete(txn, &d, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_ptr_nonnull(res.attributes);
	st_txn_set_applied(txn, 77);
	st_txn_abort(txn);
	for (int i = 0; i < 10; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "%d", i);
		ck_assert_ptr_null(tl_get("Tbl", key_of("t", sk)));
	}
	ck_assert_ptr_nonnull(tl_get("Tbl", key_of("keep", "1")));
	counts("Tbl", 1, 2 + 4 + 2 + 2);
	ck_assert_uint_eq(st_env_applied(tl_env), 0);
}
END_TEST

START_TEST(test_txn_client_errors)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_write_result res;
	st_put_req p1 = {.table = "Tbl", .item = map("PK", S("a"), "SK", N("1"), NULL)};
	ck_assert_int_eq(st_put(txn, &p1, &tl_arena, &res, tl_msg), SHOAL_OK);
	/* The txn sees its own write. */
	st_put_req p1c = {.table = "Tbl",
	                  .item = map("PK", S("a"), "SK", N("1"), "v", N("2"), NULL),
	                  .condition = "attribute_exists(PK)"};
	ck_assert_int_eq(st_put(txn, &p1c, &tl_arena, &res, tl_msg), SHOAL_OK);
	/* Client errors of every kind leave it usable. */
	st_put_req bad_key = {.table = "Tbl", .item = map("PK", S("b"), NULL)};
	expect_err(st_put(txn, &bad_key, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION, NULL);
	st_put_req cond = {.table = "Tbl",
	                   .item = map("PK", S("a"), "SK", N("1"), NULL),
	                   .condition = "attribute_not_exists(PK)"};
	expect_err(st_put(txn, &cond, &tl_arena, &res, tl_msg), SHOAL_E_CONDITION_FAILED, NULL);
	st_update_req ku = {.table = "Tbl",
	                    .key = key_of("a", "1"),
	                    .update = "REMOVE PK",
	                    .return_values = ST_RV_NONE};
	expect_err(st_update(txn, &ku, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION, NULL);
	st_delete_req nf = {.table = "Missing", .key = key_of("a", "1")};
	expect_err(st_delete(txn, &nf, &tl_arena, &res, tl_msg), SHOAL_E_NOT_FOUND, NULL);
	st_update_req rt = {.table = "Tbl",
	                    .key = key_of("a", "1"),
	                    .update = "SET v = v + :s",
	                    .attrs = {NULL, map(":s", S("str"), NULL)}};
	expect_err(st_update(txn, &rt, &tl_arena, &res, tl_msg), SHOAL_E_VALIDATION, NULL);
	st_put_req p2 = {.table = "Tbl", .item = map("PK", S("b"), "SK", N("2"), NULL)};
	ck_assert_int_eq(st_put(txn, &p2, &tl_arena, &res, tl_msg), SHOAL_OK);
	st_txn_set_applied(txn, 12);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	tl_assert_value_eq(tl_get("Tbl", key_of("a", "1")),
	                   map("PK", S("a"), "SK", N("1"), "v", N("2"), NULL));
	tl_assert_value_eq(tl_get("Tbl", key_of("b", "2")), key_of("b", "2"));
	counts("Tbl", 2, 3 + 4 + 1 + 2 + 3 + 4);
	ck_assert_uint_eq(st_env_applied(tl_env), 12);
}
END_TEST

START_TEST(test_txn_poisoned)
{
	tl_put("Tbl", map("PK", S("old"), "SK", N("1"), NULL));
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_write_result res;
	st_put_req p = {.table = "Tbl", .item = map("PK", S("a"), "SK", N("1"), "x", S("y"), NULL)};
	ck_assert_int_eq(st_put(txn, &p, &tl_arena, &res, tl_msg), SHOAL_OK);
	/* A new item bigger than any arena block so far: the copy allocates. */
	st_put_req p2 = {.table = "Tbl",
	                 .item = map("PK", S("b"), "SK", N("1"), "x", Sn(100000, 'y'), NULL)};
	sh_fault_arm(SH_FAULT_ALLOC, 1, false);
	int rc = st_put(txn, &p2, &tl_arena, &res, tl_msg);
	ck_assert_int_eq(sh_fault_fired(SH_FAULT_ALLOC), 1);
	sh_fault_reset();
	ck_assert_int_eq(rc, SHOAL_E_NOMEM);
	char first[SH_ERRMSG_SIZE];
	snprintf(first, sizeof(first), "%s", tl_msg);
	/* Every later call, whatever it is, returns the same error. */
	st_delete_req d = {.table = "Tbl", .key = key_of("old", "1")};
	expect_err(st_delete(txn, &d, &tl_arena, &res, tl_msg), SHOAL_E_NOMEM, first);
	st_update_req u = {.table = "Tbl", .key = key_of("old", "1")};
	expect_err(st_update(txn, &u, &tl_arena, &res, tl_msg), SHOAL_E_NOMEM, first);
	expect_err(st_put(txn, &p, &tl_arena, &res, tl_msg), SHOAL_E_NOMEM, first);
	expect_err(st_txn_commit(txn, tl_msg), SHOAL_E_NOMEM, first);
	ck_assert_ptr_null(tl_get("Tbl", key_of("a", "1")));
	ck_assert_ptr_nonnull(tl_get("Tbl", key_of("old", "1")));
	counts("Tbl", 1, 2 + 3 + 2 + 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism                                                               */
/* ------------------------------------------------------------------------ */

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
	ck_assert_int_eq(st_env_open(dir2, NULL, &env2, tl_msg), SHOAL_OK);
	st_env *saved = tl_env;
	tl_env = env2;
	create_table("Tbl", "PK", ST_S, "SK", ST_N, true);
	tl_env = saved;
	uint64_t seed = tl_seed();
	uint64_t r1 = seed, r2 = seed;
	for (int i = 0; i < 300; i++) {
		char m1[SH_ERRMSG_SIZE] = "", m2[SH_ERRMSG_SIZE] = "";
		int rc1 = random_op(tl_env, &r1, &tl_arena, m1);
		int rc2 = random_op(env2, &r2, &tl_arena, m2);
		ck_assert_int_eq(rc1, rc2);
		ck_assert_str_eq(m1, m2);
		ck_assert_msg(rc1 == SHOAL_OK || rc1 == SHOAL_E_CONDITION_FAILED, "%s", m1);
		sh_arena_reset(&tl_arena);
	}
	/* The other tables of tl_env differ; compare Tbl's data and record. */
	uint8_t *d1, *d2;
	st_table_info i1, i2;
	ck_assert_int_eq(st_table_describe(tl_env, "Tbl", &tl_arena, &i1, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(env2, "Tbl", &tl_arena, &i2, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(i1.item_count, i2.item_count);
	ck_assert_uint_eq(i1.size_bytes, i2.size_bytes);
	ck_assert_uint_eq(i1.def.id, 1);
	ck_assert_uint_eq(i2.def.id, 1);
	size_t n2;
	d2 = tl_store_dump(env2, false, &n2);
	/* tl_env holds three more (empty) tables in its catalog: drop them. */
	const char *others[] = {"Str", "Bin", "Hash"};
	for (int i = 0; i < 3; i++) {
		st_txn *txn;
		ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
		ck_assert_int_eq(st_table_delete(txn, others[i], tl_msg), SHOAL_OK);
		ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	}
	size_t n1;
	d1 = tl_store_dump(tl_env, false, &n1);
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
	return tl_suite("write", setup, tl_store_close, 60,
	                TL_TESTS(test_put_get, test_put_return_values, test_put_conditions,
	                         test_key_checks_item, test_key_checks_key, test_key_sizes,
	                         test_item_size_limit, test_update_return_values,
	                         test_update_key_only, test_update_key_attributes,
	                         test_update_conditions, test_delete, test_txn_abort,
	                         test_txn_client_errors, test_txn_poisoned, test_deterministic));
}

TL_MAIN(write_suite)
