/*
 * test_txn.c -- transactions in one storage group (storage/txn.c): all or
 * nothing, the reasons of a cancellation, locks of a prepared transaction
 * (a TransactionConflict for every other write of the item), release,
 * transaction records, write tokens, expiry.  Real LMDB (tl_store).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "storage/index.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static void setup(void)
{
	tl_store_open("txn", NULL);
	tl_create_table_gsi("Txn", (st_key_schema){{"PK", ST_S}, {"SK", ST_S}}, "byG",
	                    (st_key_schema){{"G", ST_S}, {NULL, ST_NONE}});
}

static st_value *key(const char *pk, const char *sk)
{
	return map("PK", S(pk), "SK", S(sk), NULL);
}

static st_txn_action put_act(st_value *item, const char *cond, st_value *values)
{
	st_txn_action a = {.kind = ST_TXA_PUT};
	a.u.put =
	    (st_put_req){.table = "Txn", .item = item, .condition = cond, .attrs = {NULL, values}};
	return a;
}

static st_txn_action check_act(st_value *k, const char *cond, st_value *values)
{
	st_txn_action a = {.kind = ST_TXA_CHECK};
	a.u.check = (st_check_req){.table = "Txn",
	                           .key = k,
	                           .condition = cond,
	                           .attrs = {NULL, values},
	                           .return_old_on_condition_fail = true};
	return a;
}

static st_txn_action update_act(st_value *k, const char *upd, st_value *values)
{
	st_txn_action a = {.kind = ST_TXA_UPDATE};
	a.u.update =
	    (st_update_req){.table = "Txn", .key = k, .update = upd, .attrs = {NULL, values}};
	return a;
}

static st_txn_action delete_act(st_value *k)
{
	st_txn_action a = {.kind = ST_TXA_DELETE};
	a.u.del = (st_delete_req){.table = "Txn", .key = k};
	return a;
}

/* st_transact in a transaction of its own (committed when it succeeds). */
static int transact(const st_txn_action *acts, uint32_t n, st_txn_result *res)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	int rc = st_transact(txn, acts, n, &tl_arena, res, tl_msg);
	if (rc == SHOAL_OK)
		ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	else
		st_txn_abort(txn);
	return rc;
}

static const char *num(const st_value *v)
{
	ck_assert_ptr_nonnull(v);
	return tl_show(&tl_arena, v);
}

static const char *str(const st_value *item, const char *name)
{
	const st_value *v = attr(item, name);
	ck_assert_ptr_nonnull(v);
	static char buf[64];
	snprintf(buf, sizeof(buf), "%.*s", (int)v->u.str.len, v->u.str.ptr);
	return buf;
}

START_TEST(test_all_or_nothing)
{
	tl_put("Txn", map("PK", S("s1"), "SK", S("PROFILE"), "n", N("1"), NULL));
	/* The second action's condition fails: nothing is written. */
	st_txn_action acts[3] = {
	    put_act(map("PK", S("s1"), "SK", S("E#c1"), "G", S("g"), NULL),
	            "attribute_not_exists(PK)", NULL),
	    check_act(key("s1", "PROFILE"), "n = :two", map(":two", N("2"), NULL)),
	    update_act(key("c1", "E#s1"), "SET v = :v", map(":v", S("x"), NULL)),
	};
	st_txn_result res[3];
	ck_assert_int_eq(transact(acts, 3, res), SHOAL_E_TXN_CANCELED);
	ck_assert_int_eq(res[0].code, SHOAL_OK);
	ck_assert_int_eq(res[1].code, SHOAL_E_CONDITION_FAILED);
	ck_assert_str_eq(res[1].message, "The conditional request failed");
	ck_assert_ptr_nonnull(res[1].old_item); /* ReturnValuesOnConditionCheckFailure */
	ck_assert_str_eq(str(res[1].old_item, "n"), "1");
	ck_assert_int_eq(res[2].code, SHOAL_OK);
	ck_assert_ptr_null(tl_get("Txn", key("s1", "E#c1")));
	ck_assert_ptr_null(tl_get("Txn", key("c1", "E#s1")));
	/* The condition holds: every action applies, the check writes nothing. */
	acts[1] = check_act(key("s1", "PROFILE"), "n = :one", map(":one", N("1"), NULL));
	ck_assert_int_eq(transact(acts, 3, res), SHOAL_OK);
	ck_assert_ptr_nonnull(tl_get("Txn", key("s1", "E#c1")));
	ck_assert_str_eq(str(tl_get("Txn", key("c1", "E#s1")), "v"), "x");
	ck_assert_int_eq(res[2].res.old_size, 0);
	ck_assert_uint_gt(res[2].res.new_size, 0);
	/* The GSI's delta went to the outbox like any write's. */
	st_outbox_info info;
	ck_assert_int_eq(st_outbox_get_info(tl_env, &info, tl_msg), SHOAL_OK);
	ck_assert_uint_ge(info.last_seq, 1);
	/* A request error of one action (found before its item is read:
	 * here an UpdateExpression on a key attribute) refuses the whole
	 * transaction with its message, as DynamoDB validates first. */
	st_txn_action bad[2] = {
	    delete_act(key("s1", "E#c1")),
	    update_act(key("s1", "PROFILE"), "SET PK = :v", map(":v", S("y"), NULL))};
	ck_assert_int_eq(transact(bad, 2, res), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(tl_msg, "This attribute is part of the key"));
	ck_assert_ptr_nonnull(tl_get("Txn", key("s1", "E#c1")));
	/* An error that depends on the item (ADD to a string attribute) is
	 * that action's reason: the transaction is cancelled. */
	st_txn_action bad2[2] = {
	    delete_act(key("s1", "E#c1")),
	    update_act(key("c1", "E#s1"), "ADD v :one", map(":one", N("1"), NULL))};
	ck_assert_int_eq(transact(bad2, 2, res), SHOAL_E_TXN_CANCELED);
	ck_assert_int_eq(res[0].code, SHOAL_OK);
	ck_assert_int_eq(res[1].code, SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(
	    res[1].message, "An operand in the update expression has an incorrect data type"));
	ck_assert_ptr_nonnull(tl_get("Txn", key("s1", "E#c1")));
	/* Two actions on one item: refused as a whole. */
	st_txn_action twice[2] = {delete_act(key("s1", "E#c1")),
	                          check_act(key("s1", "E#c1"), "attribute_exists(PK)", NULL)};
	ck_assert_int_eq(transact(twice, 2, res), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "Transaction request cannot include multiple operations on one item");
}
END_TEST

static const uint8_t ID1[16] = "transaction-0001";
static const uint8_t ID2[16] = "transaction-0002";

START_TEST(test_prepare_locks_release)
{
	tl_put("Txn", map("PK", S("a"), "SK", S("1"), "n", N("5"), NULL));
	st_txn_action acts[2] = {
	    update_act(key("a", "1"), "SET n = n - :d", map(":d", N("2"), NULL)),
	    put_act(map("PK", S("b"), "SK", S("1"), "n", N("2"), NULL), NULL, NULL),
	};
	st_txn_result res[2];
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, 1000);
	ck_assert_int_eq(st_txn_prepare(txn, ID1, 3, acts, 2, "blob", 4, &tl_arena, res, tl_msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	/* Nothing applied yet; both items locked. */
	ck_assert_str_eq(num(attr(tl_get("Txn", key("a", "1")), "n")), "{\"N\":\"5\"}");
	ck_assert_ptr_null(tl_get("Txn", key("b", "1")));
	st_put_req pr = {.table = "Txn", .item = map("PK", S("a"), "SK", S("1"), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &pr, &tl_arena, NULL, tl_msg), SHOAL_E_TXN_CONFLICT);
	ck_assert_str_eq(tl_msg, "Transaction is ongoing for the item");
	st_delete_req dr = {.table = "Txn", .key = key("b", "1")};
	ck_assert_int_eq(st_delete_item(tl_env, &dr, &tl_arena, NULL, tl_msg),
	                 SHOAL_E_TXN_CONFLICT);
	/* Another transaction touching one of them: cancelled, that reason. */
	st_txn_action other[2] = {put_act(map("PK", S("c"), "SK", S("1"), NULL), NULL, NULL),
	                          check_act(key("b", "1"), "attribute_not_exists(PK)", NULL)};
	ck_assert_int_eq(transact(other, 2, res), SHOAL_E_TXN_CANCELED);
	ck_assert_int_eq(res[0].code, SHOAL_OK);
	ck_assert_int_eq(res[1].code, SHOAL_E_TXN_CONFLICT);
	/* Reads see the committed state meanwhile. */
	ck_assert_ptr_nonnull(tl_get("Txn", key("a", "1")));
	/* A second prepare of the same id holds; another id on the items fails. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_prepare(txn, ID1, 3, acts, 2, "blob", 4, &tl_arena, res, tl_msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_txn_prepare(txn, ID2, 3, acts, 2, "x", 1, &tl_arena, res, tl_msg),
	                 SHOAL_E_TXN_CANCELED);
	ck_assert_int_eq(res[0].code, SHOAL_E_TXN_CONFLICT);
	st_prepared p;
	bool found;
	ck_assert_int_eq(st_txn_prepared_get(txn, ID1, &tl_arena, &p, &found, tl_msg), SHOAL_OK);
	ck_assert(found);
	ck_assert_uint_eq(p.coord_group, 3);
	ck_assert_int_eq(p.created_ms, 1000);
	ck_assert_uint_eq(p.len, 4);
	ck_assert(memcmp(p.blob, "blob", 4) == 0);
	st_txn_abort(txn);
	st_prepared *list;
	uint32_t n;
	ck_assert_int_eq(st_txn_prepared_list(tl_env, &tl_arena, &list, &n, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert(memcmp(list[0].id, ID1, 16) == 0);
	/* Commit: release, then the actions apply (locks gone first). */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_release(txn, ID1, &tl_arena, &p, &found, tl_msg), SHOAL_OK);
	ck_assert(found);
	ck_assert_int_eq(st_transact(txn, acts, 2, &tl_arena, res, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_str_eq(num(attr(tl_get("Txn", key("a", "1")), "n")), "{\"N\":\"3\"}");
	ck_assert_ptr_nonnull(tl_get("Txn", key("b", "1")));
	ck_assert_int_eq(st_put_item(tl_env, &pr, &tl_arena, NULL, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_prepared_list(tl_env, &tl_arena, &list, &n, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	/* A decision that comes twice: nothing left to release. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_release(txn, ID1, &tl_arena, &p, &found, tl_msg), SHOAL_OK);
	ck_assert(!found);
	st_txn_abort(txn);
}
END_TEST

START_TEST(test_records_tokens_expiry)
{
	st_txn *txn;
	st_txn_record r = {.state = ST_TXN_PREPARING, .created_ms = 10, .n_parts = 2};
	memcpy(r.id, ID1, 16);
	memcpy(r.digest, "digest-of-reques", 16);
	r.parts[0] = 1;
	r.parts[1] = 3;
	r.outcome = (const uint8_t *)"ok";
	r.outcome_len = 2;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_record_put(txn, &r, tl_msg), SHOAL_OK);
	/* Decided, acknowledged, expiring at 600 010. */
	r.state = ST_TXN_COMMITTED;
	r.acked[0] = r.acked[1] = true;
	r.expires_ms = 600010;
	ck_assert_int_eq(st_txn_record_put(txn, &r, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_write_token_put(txn, ID2, 500, "answer", 6, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);

	st_txn_record got;
	bool found;
	const uint8_t *out;
	size_t len;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_record_get(txn, ID1, &tl_arena, &got, &found, tl_msg), SHOAL_OK);
	ck_assert(found);
	ck_assert_int_eq(got.state, ST_TXN_COMMITTED);
	ck_assert_uint_eq(got.n_parts, 2);
	ck_assert_uint_eq(got.parts[1], 3);
	ck_assert(got.acked[0] && got.acked[1]);
	ck_assert_uint_eq(got.outcome_len, 2);
	ck_assert(memcmp(got.outcome, "ok", 2) == 0);
	ck_assert_int_eq(st_write_token_get(txn, ID2, &tl_arena, &out, &len, &found, tl_msg),
	                 SHOAL_OK);
	ck_assert(found && len == 6 && memcmp(out, "answer", 6) == 0);
	/* Expiry by the replicated clock: the token at 500, the record later. */
	uint32_t removed;
	ck_assert_int_eq(st_txn_expire(txn, 499, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(st_txn_expire(txn, 500, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(st_write_token_get(txn, ID2, &tl_arena, &out, &len, &found, tl_msg),
	                 SHOAL_OK);
	ck_assert(!found);
	ck_assert_int_eq(st_txn_record_get(txn, ID1, &tl_arena, &got, &found, tl_msg), SHOAL_OK);
	ck_assert(found);
	ck_assert_int_eq(st_txn_expire(txn, 700000, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(st_txn_record_get(txn, ID1, &tl_arena, &got, &found, tl_msg), SHOAL_OK);
	ck_assert(!found);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	st_txn_record *list;
	uint32_t n;
	ck_assert_int_eq(st_txn_record_list(tl_env, &tl_arena, &list, &n, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n, 0);
}
END_TEST

/* A transaction whose write grows an item collection (a table with an LSI)
 * past the limit is cancelled with ItemCollectionSizeLimitExceeded for that
 * action; the limit is 400 bytes here instead of 10 GB. */
START_TEST(test_collection_limit)
{
	tl_store_close();
	tl_store_open("txn-lsi",
	              &(st_env_options){.map_size = 1ull << 30, .collection_limit = 400});
	st_key_attr attrs[3] = {{"PK", ST_S}, {"SK", ST_S}, {"L", ST_N}};
	st_index_def lsi = {.name = "byL",
	                    .local = true,
	                    .key = {{"PK", ST_S}, {"L", ST_N}},
	                    .projection = ST_PROJ_KEYS_ONLY,
	                    .write_shards = 1,
	                    .status = ST_INDEX_ACTIVE};
	st_table_def d = {.name = "Lsi",
	                  .key = {{"PK", ST_S}, {"SK", ST_S}},
	                  .attrs = attrs,
	                  .n_attrs = 3,
	                  .indexes = &lsi,
	                  .n_indexes = 1};
	tl_create_table_def(&d);
	tl_put("Lsi", map("PK", S("p"), "SK", S("a"), "L", N("1"), NULL));
	char big[500];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	st_txn_action acts[2] = {{.kind = ST_TXA_PUT}, {.kind = ST_TXA_PUT}};
	acts[0].u.put = (st_put_req){.table = "Lsi",
	                             .item = map("PK", S("q"), "SK", S("b"), "L", N("2"), NULL)};
	acts[1].u.put =
	    (st_put_req){.table = "Lsi",
	                 .item = map("PK", S("p"), "SK", S("c"), "L", N("3"), "x", S(big), NULL)};
	st_txn_result res[2];
	ck_assert_int_eq(transact(acts, 2, res), SHOAL_E_TXN_CANCELED);
	ck_assert_int_eq(res[0].code, SHOAL_OK);
	ck_assert_int_eq(res[1].code, SHOAL_E_COLLECTION_SIZE);
	ck_assert_ptr_null(tl_get("Lsi", map("PK", S("q"), "SK", S("b"), NULL)));
}
END_TEST

static Suite *txn_suite(void)
{
	Suite *s = suite_create("txn");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, tl_store_close);
	tcase_add_test(tc, test_all_or_nothing);
	tcase_add_test(tc, test_prepare_locks_release);
	tcase_add_test(tc, test_records_tokens_expiry);
	tcase_add_test(tc, test_collection_limit);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(txn_suite)
