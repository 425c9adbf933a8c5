/* Time to Live in the storage engine: the expiry decision (st_ttl_expired),
 * the setting in the table's record (UpdateTimeToLive through
 * st_table_update, redefinition in a data group), and the TTL service's
 * delete, decided at apply time with the transaction's time. */
#include <check.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "storage/catalog.h"
#include "storage/engine.h"
#include "storage/index.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

/* 2023-11-14T22:13:20Z */
#define NOW_MS 1700000000000LL

static void setup(void)
{
	tl_store_open("ttl", &(st_env_options){.map_size = 1ull << 30});
	st_env_set_ttl_change_interval(tl_env, 0); /* test_change_interval sets one */
	tl_create_table_gsi("Tbl", (st_key_schema){{"PK", ST_S}, {"SK", ST_N}}, "byG",
	                    (st_key_schema){{"G", ST_S}, {NULL, ST_NONE}});
}

static int set_ttl(const char *table, bool enabled, const char *attr, int64_t now_ms)
{
	st_table_update_req u = {
	    .name = table, .set_ttl = true, .ttl_enabled = enabled, .ttl_attr = attr};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, now_ms);
	int rc = st_table_update(txn, &u, tl_msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, tl_msg);
}

static st_table_def def_of(const char *table)
{
	st_table_info info;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_table_describe(tl_env, table, &tl_arena, &info, msg), SHOAL_OK);
	return info.def;
}

/* The TTL service's delete of T's item (pk, sk), applied at now_ms. */
static int ttl_delete(const char *pk, const char *sk, int64_t now_ms)
{
	st_delete_req r = {.table = "Tbl", .key = map("PK", S(pk), "SK", N(sk), NULL), .ttl = true};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, now_ms);
	st_write_result res = {0};
	int rc = st_delete(txn, &r, &tl_arena, &res, tl_msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, tl_msg);
}

static bool exists(const char *pk, const char *sk)
{
	return tl_get("Tbl", map("PK", S(pk), "SK", N(sk), NULL)) != NULL;
}

START_TEST(test_decision)
{
	/* Numbers of epoch seconds: earlier than now is expired, now is not. */
	ck_assert(st_ttl_expired(N("1699999999"), NOW_MS));
	ck_assert(st_ttl_expired(N("1699999999.999"), NOW_MS));
	ck_assert(!st_ttl_expired(N("1700000000"), NOW_MS));
	ck_assert(st_ttl_expired(N("1700000000"), NOW_MS + 1));
	ck_assert(!st_ttl_expired(N("1700000000.001"), NOW_MS));
	ck_assert(!st_ttl_expired(N("1800000000"), NOW_MS));
	ck_assert(!st_ttl_expired(N("1E+30"), NOW_MS));
	/* Five years (5 * 365 days) back is the oldest value that expires. */
	ck_assert(st_ttl_expired(N("1542320000"), NOW_MS));
	ck_assert(!st_ttl_expired(N("1542319999.999"), NOW_MS));
	ck_assert(!st_ttl_expired(N("0"), NOW_MS));
	ck_assert(!st_ttl_expired(N("-1"), NOW_MS));
	ck_assert(!st_ttl_expired(N("1E-100"), NOW_MS));
	/* Milliseconds by mistake: far in the future, never expired. */
	ck_assert(!st_ttl_expired(N("1699999999000"), NOW_MS));
	/* Not Numbers: ignored. */
	ck_assert(!st_ttl_expired(S("1600000000"), NOW_MS));
	ck_assert(!st_ttl_expired(SS(1, "1600000000"), NOW_MS));
	ck_assert(!st_ttl_expired(list(1, N("1600000000")), NOW_MS));
	ck_assert(!st_ttl_expired(NULL, NOW_MS));
	/* Items: the table's attribute, or nothing when TTL is off. */
	st_value *item = map("PK", S("a"), "exp", N("1600000000"), NULL);
	ck_assert(st_ttl_item_expired(item, "exp", NOW_MS));
	ck_assert(!st_ttl_item_expired(item, "other", NOW_MS));
	ck_assert(!st_ttl_item_expired(item, NULL, NOW_MS));
}
END_TEST

START_TEST(test_setting)
{
	ck_assert_ptr_null(def_of("Tbl").ttl_attr);
	ck_assert_int_eq(set_ttl("Tbl", false, "exp", NOW_MS), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TimeToLive is already disabled");
	ck_assert_int_eq(set_ttl("Tbl", true, "exp", NOW_MS), SHOAL_OK);
	st_table_def d = def_of("Tbl");
	ck_assert_str_eq(d.ttl_attr, "exp");
	ck_assert_int_eq(d.ttl_ms, NOW_MS);
	ck_assert_int_eq(set_ttl("Tbl", true, "exp", NOW_MS + 1), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TimeToLive is already enabled");
	ck_assert_int_eq(set_ttl("Tbl", true, "other", NOW_MS + 1), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TimeToLive is already enabled");
	ck_assert_int_eq(set_ttl("Tbl", false, "other", NOW_MS + 1), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TimeToLive is active on a different AttributeName: current "
	                         "AttributeName is exp");
	ck_assert_int_eq(set_ttl("NoSuchTable", true, "exp", NOW_MS), SHOAL_E_NOT_FOUND);
	ck_assert_int_eq(def_of("Tbl").ttl_ms, NOW_MS); /* refusals changed nothing */

	/* The record keeps it (encode, decode), and a record whose META has no
	 * TTL reads as disabled. */
	d = def_of("Tbl");
	uint8_t *buf;
	size_t len;
	st_table_info info;
	ck_assert_int_eq(st_catalog_encode(&tl_arena, &d, 1, 2, &buf, &len), SHOAL_OK);
	ck_assert_int_eq(st_catalog_decode("Tbl", buf, len, &tl_arena, &info, tl_msg), SHOAL_OK);
	ck_assert_str_eq(info.def.ttl_attr, "exp");
	ck_assert_int_eq(info.def.ttl_ms, NOW_MS);
	d.ttl_ms = 0;
	d.ttl_attr = NULL;
	ck_assert_int_eq(st_catalog_encode(&tl_arena, &d, 1, 2, &buf, &len), SHOAL_OK);
	ck_assert_int_eq(st_catalog_decode("Tbl", buf, len, &tl_arena, &info, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(info.def.ttl_attr);
	ck_assert_int_eq(info.def.ttl_ms, 0);

	/* A data group: a forwarded definition with an older setting does not
	 * take the newer one back; a newer one replaces it. */
	d = def_of("Tbl");
	st_table_def older = d;
	older.ttl_attr = NULL;
	older.ttl_ms = NOW_MS - 1;
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_table_redefine(txn, &older, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_str_eq(def_of("Tbl").ttl_attr, "exp");
	st_table_def newer = d;
	newer.ttl_attr = NULL;
	newer.ttl_ms = NOW_MS + 5;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_table_redefine(txn, &newer, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(def_of("Tbl").ttl_attr);
	ck_assert_int_eq(def_of("Tbl").ttl_ms, NOW_MS + 5);

	/* Disabled, then enabled on another attribute. */
	ck_assert_int_eq(set_ttl("Tbl", true, "exp2", NOW_MS + 6), SHOAL_OK);
	ck_assert_int_eq(set_ttl("Tbl", false, "exp2", NOW_MS + 7), SHOAL_OK);
	ck_assert_ptr_null(def_of("Tbl").ttl_attr);
}
END_TEST

START_TEST(test_delete_at_apply)
{
	ck_assert_int_eq(set_ttl("Tbl", true, "exp", NOW_MS), SHOAL_OK);
	tl_put("Tbl", map("PK", S("p"), "SK", N("1"), "G", S("g"), "exp", N("1699999000"), NULL));
	tl_put("Tbl", map("PK", S("p"), "SK", N("2"), "G", S("g"), "exp", N("1800000000"), NULL));
	tl_put("Tbl", map("PK", S("p"), "SK", N("3"), "G", S("g"), "exp", S("1600000000"), NULL));
	tl_put("Tbl", map("PK", S("p"), "SK", N("4"), "G", S("g"), NULL));
	tl_put("Tbl", map("PK", S("p"), "SK", N("5"), "G", S("g"), "exp", N("1699999990"), NULL));

	/* Expired by the entry's time: deleted. */
	ck_assert_int_eq(ttl_delete("p", "1", NOW_MS), SHOAL_OK);
	ck_assert(!exists("p", "1"));
	/* Not expired, a String, no attribute, no item: refused, kept. */
	ck_assert_int_eq(ttl_delete("p", "2", NOW_MS), SHOAL_E_CONDITION_FAILED);
	ck_assert_str_eq(tl_msg, "The conditional request failed");
	ck_assert(exists("p", "2"));
	ck_assert_int_eq(ttl_delete("p", "3", NOW_MS), SHOAL_E_CONDITION_FAILED);
	ck_assert(exists("p", "3"));
	ck_assert_int_eq(ttl_delete("p", "4", NOW_MS), SHOAL_E_CONDITION_FAILED);
	ck_assert(exists("p", "4"));
	ck_assert_int_eq(ttl_delete("p", "9", NOW_MS), SHOAL_E_CONDITION_FAILED);
	/* The entry's time decides, not the caller's: item 5 expires at
	 * 1699999990 s, so an entry stamped before that keeps it. */
	ck_assert_int_eq(ttl_delete("p", "5", 1699999989000LL), SHOAL_E_CONDITION_FAILED);
	ck_assert(exists("p", "5"));
	/* An update that moved the TTL into the future before the delete
	 * applied wins. */
	tl_put("Tbl", map("PK", S("p"), "SK", N("5"), "G", S("g"), "exp", N("1700000100"), NULL));
	ck_assert_int_eq(ttl_delete("p", "5", NOW_MS), SHOAL_E_CONDITION_FAILED);
	ck_assert(exists("p", "5"));
	/* TTL disabled since: refused even though the value is in the past. */
	tl_put("Tbl", map("PK", S("p"), "SK", N("6"), "G", S("g"), "exp", N("1699999000"), NULL));
	ck_assert_int_eq(set_ttl("Tbl", false, "exp", NOW_MS), SHOAL_OK);
	ck_assert_int_eq(ttl_delete("p", "6", NOW_MS), SHOAL_E_CONDITION_FAILED);
	ck_assert(exists("p", "6"));
	/* An ordinary delete is untouched by any of this. */
	st_delete_req r = {.table = "Tbl", .key = map("PK", S("p"), "SK", N("2"), NULL)};
	ck_assert_int_eq(st_delete_item(tl_env, &r, &tl_arena, NULL, tl_msg), SHOAL_OK);
	ck_assert(!exists("p", "2"));
}
END_TEST

/* DynamoDB's rule: a change within the interval after the previous one
 * is refused, by the time of the entry that carries it; the refusals of
 * a request that would change nothing come first. */
START_TEST(test_change_interval)
{
	st_env_set_ttl_change_interval(tl_env, 1000);
	ck_assert_int_eq(set_ttl("Tbl", true, "exp", NOW_MS), SHOAL_OK); /* never changed */
	ck_assert_int_eq(set_ttl("Tbl", true, "exp", NOW_MS + 10), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TimeToLive is already enabled");
	ck_assert_int_eq(set_ttl("Tbl", false, "exp", NOW_MS + 999), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Time to live has been modified multiple times within a fixed "
	                         "interval");
	ck_assert_str_eq(def_of("Tbl").ttl_attr, "exp");
	ck_assert_int_eq(set_ttl("Tbl", false, "exp", NOW_MS + 1000), SHOAL_OK);
	ck_assert_ptr_null(def_of("Tbl").ttl_attr);
	ck_assert_int_eq(set_ttl("Tbl", true, "e2", NOW_MS + 1500), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Time to live has been modified multiple times within a fixed "
	                         "interval");
	ck_assert_int_eq(def_of("Tbl").ttl_ms, NOW_MS + 1000);
	/* The default is DynamoDB's hour. */
	st_env_set_ttl_change_interval(tl_env, -1);
	ck_assert_int_eq(set_ttl("Tbl", true, "e2", NOW_MS + 1000 + 3599999), SHOAL_E_VALIDATION);
	ck_assert_int_eq(set_ttl("Tbl", true, "e2", NOW_MS + 1000 + 3600000), SHOAL_OK);
	ck_assert_str_eq(def_of("Tbl").ttl_attr, "e2");
	ck_assert_str_eq(wire_ttl_status(true, false), "ENABLING");
	ck_assert_str_eq(wire_ttl_status(false, false), "DISABLING");
	ck_assert_str_eq(wire_ttl_status(true, true), "ENABLED");
	ck_assert_str_eq(wire_ttl_status(false, true), "DISABLED");
}
END_TEST

static Suite *ttl_suite(void)
{
	return tl_suite(
	    "ttl", setup, tl_store_close, 0,
	    TL_TESTS(test_decision, test_setting, test_delete_at_apply, test_change_interval));
}

TL_MAIN(ttl_suite)
