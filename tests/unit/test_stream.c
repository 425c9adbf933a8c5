/* DynamoDB Streams: the per-group stream log (storage/stream.c) and its wire
 * forms (proto/wire_stream.c): append from the write path, reads from
 * positions, trimming by age, determinism, and the names and tokens. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/engine.h"
#include "storage/snapshot.h"
#include "storage/stream.h"
#include "tests/lib/tl_store.h"

#define LABEL 1700000000123ll

static void stream_table(const char *name, st_stream_view view)
{
	static st_key_attr attrs[2] = {{"pk", ST_S}, {"sk", ST_N}};
	st_table_def d = {.name = name,
	                  .key = {{"pk", ST_S}, {"sk", ST_N}},
	                  .attrs = attrs,
	                  .n_attrs = 2,
	                  .created_ms = LABEL,
	                  .stream = {.enabled = view != ST_VIEW_NONE,
	                             .view = view,
	                             .label_ms = view != ST_VIEW_NONE ? LABEL : 0,
	                             .changed_ms = view != ST_VIEW_NONE ? LABEL : 0}};
	tl_create_table_def(&d);
}

static st_value *item(const char *pk, long sk, long v)
{
	return tl_map("pk", tl_s(pk), "sk", tl_ni(sk), "v", tl_ni(v), NULL);
}

static st_value *key(const char *pk, long sk)
{
	return tl_map("pk", tl_s(pk), "sk", tl_ni(sk), NULL);
}

/* One write in a transaction of its own at time ts. */
static int put_at(st_env *env, const char *table, const st_value *it, int64_t ts)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, ts);
	st_put_req r = {.table = table, .item = it};
	st_write_result res;
	int rc = st_put(txn, &r, &tl_arena, &res, tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	return rc;
}

static void del_at(st_env *env, const char *table, const st_value *k, int64_t ts)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, ts);
	st_delete_req r = {.table = table, .key = k};
	st_write_result res;
	ck_assert_int_eq(st_delete(txn, &r, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}

static uint32_t table_id(const char *name)
{
	uint32_t id;
	ck_assert_int_eq(st_table_id(tl_env, name, &id, tl_msg), SHOAL_OK);
	return id;
}

static void read_from(const char *table, uint64_t from, uint32_t max, st_stream_rec **r,
                      uint32_t *n, uint64_t *next)
{
	int rc = st_stream_read(tl_env, table_id(table), LABEL, from, max, 1u << 20, &tl_arena, r,
	                        n, next, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
}

static void setup(void)
{
	tl_store_open("stream", NULL);
}

START_TEST(test_append_events_and_images)
{
	stream_table("Tbl", ST_VIEW_NEW_AND_OLD_IMAGES);
	stream_table("Kys", ST_VIEW_KEYS_ONLY);
	stream_table("Plain", ST_VIEW_NONE);
	for (int k = 0; k < 2; k++) {
		const char *t = k == 0 ? "Tbl" : "Kys";
		ck_assert_int_eq(put_at(tl_env, t, item("a", 1, 1), 1000), SHOAL_OK);
		ck_assert_int_eq(put_at(tl_env, t, item("a", 1, 2), 2000), SHOAL_OK);
		/* The same image again: nothing changed, no record. */
		ck_assert_int_eq(put_at(tl_env, t, item("a", 1, 2), 3000), SHOAL_OK);
		del_at(tl_env, t, key("a", 1), 4000);
		del_at(tl_env, t, key("absent", 1), 5000); /* deletes nothing: no record */
	}
	ck_assert_int_eq(put_at(tl_env, "Plain", item("a", 1, 1), 1000), SHOAL_OK);
	st_stream_rec *r;
	uint32_t n;
	uint64_t next;
	read_from("Tbl", 1, 100, &r, &n, &next);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(next, 4);
	st_stream_event ev[3] = {ST_EV_INSERT, ST_EV_MODIFY, ST_EV_REMOVE};
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(r[i].seq, i + 1);
		ck_assert_int_eq(r[i].event, ev[i]);
		ck_assert_int_eq(r[i].view, ST_VIEW_NEW_AND_OLD_IMAGES);
		ck_assert_int_eq(r[i].label_ms, LABEL);
		ck_assert(st_value_equal(&r[i].keys, key("a", 1)));
		ck_assert_uint_gt(r[i].size_bytes, 0);
	}
	ck_assert_int_eq(r[0].ts_ms, 1000);
	ck_assert_int_eq(r[2].ts_ms, 4000);
	ck_assert_ptr_null(r[0].old_image);
	ck_assert(st_value_equal(r[0].new_image, item("a", 1, 1)));
	ck_assert(st_value_equal(r[1].old_image, item("a", 1, 1)));
	ck_assert(st_value_equal(r[1].new_image, item("a", 1, 2)));
	ck_assert(st_value_equal(r[2].old_image, item("a", 1, 2)));
	ck_assert_ptr_null(r[2].new_image);
	/* KEYS_ONLY: no images at all. */
	read_from("Kys", 1, 100, &r, &n, &next);
	ck_assert_uint_eq(n, 3);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert(r[i].old_image == NULL && r[i].new_image == NULL);
	/* A table without a stream has no log. */
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("Plain"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.newest, 0);
	ck_assert_uint_eq(b.first, 0);
}
END_TEST

/* A deletion by the Time to Live service is marked in its record (the
 * userIdentity of DynamoDB's records); a client's is not. */
START_TEST(test_ttl_removal_marked)
{
	static st_key_attr attrs[2] = {{"pk", ST_S}, {"sk", ST_N}};
	st_table_def d = {.name = "Ttl",
	                  .key = {{"pk", ST_S}, {"sk", ST_N}},
	                  .attrs = attrs,
	                  .n_attrs = 2,
	                  .created_ms = LABEL,
	                  .ttl_attr = "exp",
	                  .ttl_ms = LABEL,
	                  .stream = {.enabled = true,
	                             .view = ST_VIEW_OLD_IMAGE,
	                             .label_ms = LABEL,
	                             .changed_ms = LABEL}};
	tl_create_table_def(&d);
	const int64_t now = LABEL + 60000; /* ms; the items expired at LABEL / 1000 s */
	for (int i = 0; i < 2; i++) {
		st_value *it = tl_map("pk", tl_s(i == 0 ? "ttl" : "client"), "sk", tl_ni(1), "exp",
		                      tl_ni(LABEL / 1000), NULL);
		ck_assert_int_eq(put_at(tl_env, "Ttl", it, LABEL), SHOAL_OK);
	}
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, now);
	st_delete_req r = {.table = "Ttl", .key = key("ttl", 1), .ttl = true};
	st_write_result res;
	ck_assert_int_eq(st_delete(txn, &r, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	del_at(tl_env, "Ttl", key("client", 1), now);
	st_stream_rec *rec;
	uint32_t n;
	uint64_t next;
	read_from("Ttl", 1, 100, &rec, &n, &next);
	ck_assert_uint_eq(n, 4);
	ck_assert(!rec[0].by_ttl && !rec[1].by_ttl);
	ck_assert_int_eq(rec[2].event, ST_EV_REMOVE);
	ck_assert(rec[2].by_ttl);
	ck_assert(st_value_equal(&rec[2].keys, key("ttl", 1)));
	ck_assert_int_eq(rec[3].event, ST_EV_REMOVE);
	ck_assert(!rec[3].by_ttl);
}
END_TEST

START_TEST(test_read_positions_and_limits)
{
	stream_table("Tbl", ST_VIEW_NEW_IMAGE);
	for (long i = 0; i < 50; i++)
		ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", i, i), 1000 + i), SHOAL_OK);
	st_stream_rec *r;
	uint32_t n;
	uint64_t next;
	/* From a position, up to a count: positions chain with no gap and no
	 * repeat. */
	uint64_t pos = 1, seen = 0;
	while (true) {
		read_from("Tbl", pos, 7, &r, &n, &next);
		if (n == 0)
			break;
		ck_assert_uint_le(n, 7);
		for (uint32_t i = 0; i < n; i++)
			ck_assert_uint_eq(r[i].seq, pos + i);
		seen += n;
		pos = next;
	}
	ck_assert_uint_eq(seen, 50);
	ck_assert_uint_eq(pos, 51);
	read_from("Tbl", 20, 1, &r, &n, &next);
	ck_assert_uint_eq(n, 1);
	ck_assert(st_value_equal(r[0].new_image, item("p", 19, 19)));
	/* A byte budget smaller than one record still returns one. */
	ck_assert_int_eq(st_stream_read(tl_env, table_id("Tbl"), LABEL, 1, 100, 1, &tl_arena, &r,
	                                &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 1);
	/* Another stream's label: its records are skipped, the position moves. */
	ck_assert_int_eq(st_stream_read(tl_env, table_id("Tbl"), LABEL + 1, 1, 100, 1u << 20,
	                                &tl_arena, &r, &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_gt(next, 1);
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("Tbl"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.first, 1);
	ck_assert_uint_eq(b.last, 50);
	ck_assert_uint_eq(b.newest, 50);
	ck_assert_uint_eq(b.trimmed, 0);
	/* DeleteTable keeps a table's stream for the retention (DynamoDB's
	 * rule): the log stays, the deleted table is found by name and label
	 * (and listed), then the stream_trim past the retention forgets all. */
	st_env_set_stream_retention(tl_env, 1000);
	uint32_t id = table_id("Tbl");
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, 500);
	ck_assert_int_eq(st_table_delete(txn, "Tbl", tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	uint32_t gone;
	ck_assert_int_eq(st_table_id(tl_env, "Tbl", &gone, tl_msg), SHOAL_E_NOT_FOUND);
	st_table_def d;
	int64_t deleted;
	ck_assert_int_eq(
	    st_stream_dropped_find(tl_env, "Tbl", LABEL, 1500, &tl_arena, &d, &deleted, tl_msg),
	    SHOAL_OK);
	ck_assert_int_eq(deleted, 500);
	ck_assert(!d.stream.enabled);
	id = d.id;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(b.first, 1);
	ck_assert_uint_eq(b.last, 50);
	ck_assert_int_eq(
	    st_stream_dropped_find(tl_env, "Tbl", LABEL + 1, 1500, &tl_arena, &d, &deleted, tl_msg),
	    SHOAL_E_NOT_FOUND);
	ck_assert_int_eq(
	    st_stream_dropped_find(tl_env, "Tbl", LABEL, 1501, &tl_arena, &d, &deleted, tl_msg),
	    SHOAL_E_NOT_FOUND); /* past the retention */
	st_table_def *defs;
	int64_t *when;
	uint32_t n_dropped;
	ck_assert_int_eq(
	    st_stream_dropped_list(tl_env, &tl_arena, &defs, &when, &n_dropped, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n_dropped, 1);
	ck_assert_str_eq(defs[0].name, "Tbl");
	int64_t ts;
	bool any;
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert(any);
	uint32_t removed;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, 100000);
	ck_assert_int_eq(st_stream_trim_expired(txn, 4096, &removed, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 50);
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert(!any);
	ck_assert_int_eq(
	    st_stream_dropped_list(tl_env, &tl_arena, &defs, &when, &n_dropped, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n_dropped, 0);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(b.newest, 0);
	ck_assert_uint_eq(b.first, 0);
}
END_TEST

/* n puts to table in one transaction at time ts (items pk p, sk from..). */
static void put_many(const char *table, long from, long n, int64_t ts)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, ts);
	for (long i = from; i < from + n; i++) {
		st_put_req r = {.table = table, .item = item("p", i, i)};
		st_write_result res;
		ck_assert_int_eq(st_put(txn, &r, &tl_arena, &res, tl_msg), SHOAL_OK);
	}
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}

static void set_stream(const char *table, bool enabled, int64_t ts)
{
	st_table_update_req u = {.name = table,
	                         .set_stream = true,
	                         .stream = {.enabled = enabled, .view = ST_VIEW_KEYS_ONLY}};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, ts);
	ck_assert_int_eq(st_table_update(txn, &u, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}

/* Average ns of one st_stream_bounds_get of label over `rounds` calls. */
static double bounds_ns(uint32_t id, int64_t label, int rounds, st_stream_bounds *b)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < rounds; i++)
		ck_assert_int_eq(st_stream_bounds_get(tl_env, id, label, b, tl_msg), SHOAL_OK);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / rounds;
}

/* Two streams of one table (disabled, enabled again: a new label), each
 * with many records: each one's bounds are its own run of seqs, found
 * without walking the other's records (the 'F' keys).  Prints the cost of
 * a call, the micro-benchmark of the change (SHOAL_BOUNDS_N records per
 * stream, default 20000). */
START_TEST(test_bounds_two_streams)
{
	const char *env_n = getenv("SHOAL_BOUNDS_N");
	long n = env_n != NULL ? atol(env_n) : 20000;
	stream_table("Tbl", ST_VIEW_KEYS_ONLY);
	uint32_t id = table_id("Tbl");
	put_many("Tbl", 0, n, LABEL + 1);
	set_stream("Tbl", false, LABEL + 2);
	set_stream("Tbl", true, LABEL + 3); /* the new stream's label: LABEL + 3 */
	put_many("Tbl", n, n, LABEL + 4);
	st_stream_bounds b;
	double old_ns = bounds_ns(id, LABEL, 200, &b);
	ck_assert_uint_eq(b.first, 1);
	ck_assert_uint_eq(b.last, (uint64_t)n);
	ck_assert_uint_eq(b.newest, 2 * (uint64_t)n);
	double new_ns = bounds_ns(id, LABEL + 3, 200, &b);
	ck_assert_uint_eq(b.first, (uint64_t)n + 1);
	ck_assert_uint_eq(b.last, 2 * (uint64_t)n);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL + 2, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(b.first, 0); /* no such stream */
	ck_assert_uint_eq(b.last, 0);
	printf("st_stream_bounds_get, two streams of %ld records each: the old stream %.1f us, "
	       "the new one %.1f us per call\n",
	       n, old_ns / 1000, new_ns / 1000);
	/* Trimmed into: the old stream's head moves, then it is gone. */
	st_env_set_stream_retention(tl_env, 1000);
	put_many("Tbl", 2 * n, (n + 3) / 4, LABEL + 5000); /* 4 trimmed per append */
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(b.first, 0);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL + 3, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(b.first, b.trimmed + 1);
	ck_assert_uint_gt(b.first, (uint64_t)n);
}
END_TEST

START_TEST(test_trim_by_age)
{
	st_env_set_stream_retention(tl_env, 1000);
	stream_table("Tbl", ST_VIEW_KEYS_ONLY);
	for (long i = 0; i < 10; i++) /* times 0, 100, ..., 900 */
		ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", i, i), i * 100), SHOAL_OK);
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("Tbl"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.first, 1);
	ck_assert_uint_eq(b.trimmed, 0);
	/* At 1450 everything before 450 goes (at most ST_STREAM_TRIM_PER_APPEND
	 * per append): records 1..4 (times 0..300), the 5th stays. */
	ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", 10, 10), 1450), SHOAL_OK);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("Tbl"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.trimmed, ST_STREAM_TRIM_PER_APPEND);
	ck_assert_uint_eq(b.first, ST_STREAM_TRIM_PER_APPEND + 1);
	ck_assert_uint_eq(b.newest, 11);
	st_stream_rec *r;
	uint32_t n;
	uint64_t next;
	/* Reading a trimmed position is TrimmedDataAccessException. */
	ck_assert_int_eq(st_stream_read(tl_env, table_id("Tbl"), LABEL, 2, 10, 1u << 20, &tl_arena,
	                                &r, &n, &next, tl_msg),
	                 SHOAL_E_TRIMMED);
	ck_assert_str_eq(shoal_exception_name(SHOAL_E_TRIMMED), "TrimmedDataAccessException");
	read_from("Tbl", b.trimmed + 1, 100, &r, &n, &next);
	ck_assert_uint_eq(n, 11 - ST_STREAM_TRIM_PER_APPEND);
	/* Far later: more goes with each append, never the new record. */
	ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", 11, 11), 100000), SHOAL_OK);
	ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", 12, 12), 100001), SHOAL_OK);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("Tbl"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.first, 12);
	ck_assert_uint_eq(b.trimmed, 11);
	ck_assert_uint_eq(b.last, 13);
}
END_TEST

/* Two environments applying the same writes at the same times hold the same
 * bytes, stream log included: what Raft replicas rely on. */
/* Trimming without writes: st_stream_oldest tells the leader a trim is
 * due; the stream_trim entry's apply trims every table's expired head, by
 * the entry's time, and TrimmedDataAccess follows. */
START_TEST(test_trim_without_writes)
{
	st_env_set_stream_retention(tl_env, 1000);
	stream_table("TblA", ST_VIEW_KEYS_ONLY);
	stream_table("TblB", ST_VIEW_KEYS_ONLY);
	int64_t ts;
	bool any;
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert(!any);
	for (long i = 0; i < 3; i++) {
		ck_assert_int_eq(put_at(tl_env, "TblA", item("p", i, i), 100 + i), SHOAL_OK);
		ck_assert_int_eq(put_at(tl_env, "TblB", item("p", i, i), 50 + i * 400), SHOAL_OK);
	}
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert(any);
	ck_assert_int_eq(ts, 50);
	ck_assert(!st_stream_expired(tl_env, ts, 1050));
	ck_assert(st_stream_expired(tl_env, ts, 1051));
	/* At 1500: TblA's three (100..102) and TblB's 50 and 450 go; its 850
	 * stays. */
	st_txn *txn;
	uint32_t removed;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, 1500);
	ck_assert_int_eq(st_stream_trim_expired(txn, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 5);
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("TblA"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.first, 0);
	ck_assert_uint_eq(b.trimmed, 3);
	ck_assert_int_eq(st_stream_bounds_get(tl_env, table_id("TblB"), LABEL, &b, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(b.first, 3);
	ck_assert_uint_eq(b.trimmed, 2);
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert_int_eq(ts, 850);
	/* At most max records per entry. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, 100000);
	ck_assert_int_eq(st_stream_trim_expired(txn, 1, &removed, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(st_stream_oldest(tl_env, &ts, &any, tl_msg), SHOAL_OK);
	ck_assert(!any);
}
END_TEST

START_TEST(test_deterministic)
{
	stream_table("Tbl", ST_VIEW_NEW_AND_OLD_IMAGES);
	st_env *other;
	char dir2[PATH_MAX + 16];
	snprintf(dir2, sizeof(dir2), "%s/second", tl_dir);
	ck_assert_int_eq(mkdir(dir2, 0700), 0);
	ck_assert_int_eq(st_env_open(dir2, NULL, &other, tl_msg), SHOAL_OK);
	st_env_set_stream_retention(tl_env, 500);
	st_env_set_stream_retention(other, 500);
	st_env *envs[2] = {tl_env, other};
	for (int e = 0; e < 2; e++) {
		if (e == 1) {
			st_env *save = tl_env;
			tl_env = other;
			stream_table("Tbl", ST_VIEW_NEW_AND_OLD_IMAGES);
			tl_env = save;
		}
		srand(7);
		for (int i = 0; i < 200; i++) {
			char pk[8];
			snprintf(pk, sizeof(pk), "k%d", rand() % 10);
			if (rand() % 4 == 0)
				del_at(envs[e], "Tbl", key(pk, 1), i * 10);
			else
				ck_assert_int_eq(
				    put_at(envs[e], "Tbl", item(pk, 1, rand() % 3), i * 10),
				    SHOAL_OK);
		}
	}
	size_t l1, l2;
	uint8_t *a = tl_store_dump(tl_env, true, &l1);
	uint8_t *b = tl_store_dump(other, true, &l2);
	ck_assert_uint_eq(l1, l2);
	ck_assert(memcmp(a, b, l1) == 0);
	free(a);
	free(b);
	st_stream_bounds b1;
	ck_assert_int_eq(st_stream_bounds_get(other, table_id("Tbl"), LABEL, &b1, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_gt(b1.trimmed, 0);
	st_env_close(other);
}
END_TEST

/* GetShardIterator LATEST from a replica that lags its leader (item 4 of
 * issue 16): the lagging replica's position is at or before every record
 * committed after it was taken, so reading from it -- on the leader, or on
 * the lagging replica once it caught up -- skips nothing; meanwhile the
 * lagging replica itself answers no record and keeps the position. */
START_TEST(test_latest_on_lagging_replica)
{
	st_env *lag;
	char dir2[PATH_MAX + 16];
	snprintf(dir2, sizeof(dir2), "%s/lagging", tl_dir);
	ck_assert_int_eq(mkdir(dir2, 0700), 0);
	ck_assert_int_eq(st_env_open(dir2, NULL, &lag, tl_msg), SHOAL_OK);
	stream_table("Tbl", ST_VIEW_KEYS_ONLY);
	st_env *save = tl_env;
	tl_env = lag;
	stream_table("Tbl", ST_VIEW_KEYS_ONLY);
	tl_env = save;
	uint32_t id = table_id("Tbl");
	/* The same committed sequence: the leader applied 10, the lagging
	 * replica 6 of them. */
	for (long i = 0; i < 10; i++) {
		ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", i, i), LABEL + i), SHOAL_OK);
		if (i < 6)
			ck_assert_int_eq(put_at(lag, "Tbl", item("p", i, i), LABEL + i), SHOAL_OK);
	}
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(lag, id, LABEL, &b, tl_msg), SHOAL_OK);
	uint64_t pos = st_stream_latest(&b);
	ck_assert_uint_eq(pos, 7);
	/* The lagging replica: nothing there yet, the position kept. */
	st_stream_rec *r;
	uint32_t n;
	uint64_t next;
	ck_assert_int_eq(
	    st_stream_read(lag, id, LABEL, pos, 100, 1u << 20, &tl_arena, &r, &n, &next, tl_msg),
	    SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(next, pos);
	/* A record committed after the iterator was issued. */
	ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", 10, 10), LABEL + 10), SHOAL_OK);
	/* The leader: 7..11, the four the replica lacked and the new one. */
	ck_assert_int_eq(
	    st_stream_read(tl_env, id, LABEL, pos, 100, 1u << 20, &tl_arena, &r, &n, &next, tl_msg),
	    SHOAL_OK);
	ck_assert_uint_eq(n, 5);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(r[i].seq, pos + i);
	ck_assert_uint_eq(next, 12);
	/* The lagging replica, caught up: the same records. */
	for (long i = 6; i < 11; i++)
		ck_assert_int_eq(put_at(lag, "Tbl", item("p", i, i), LABEL + i), SHOAL_OK);
	ck_assert_int_eq(
	    st_stream_read(lag, id, LABEL, pos, 100, 1u << 20, &tl_arena, &r, &n, &next, tl_msg),
	    SHOAL_OK);
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(r[0].seq, 7);
	ck_assert_uint_eq(next, 12);
	/* The leader's LATEST at the same moment would have been 11: the
	 * lagging one's is earlier, never later. */
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL, &b, tl_msg), SHOAL_OK);
	ck_assert_uint_ge(st_stream_latest(&b), pos);
	st_env_close(lag);
}
END_TEST

/* A Raft snapshot is a copy of every DBI (storage/snapshot.h): a replica
 * restored from one serves the same stream, trim state included. */
static int copy_pair(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	struct {
		st_load *l;
		st_dbi d;
	} *c = arg;
	return st_load_put(c->l, c->d, k, kl, v, vl, errmsg);
}

START_TEST(test_snapshot_carries_the_log)
{
	st_env_set_stream_retention(tl_env, 1000);
	stream_table("Tbl", ST_VIEW_NEW_IMAGE);
	for (long i = 0; i < 30; i++)
		ck_assert_int_eq(put_at(tl_env, "Tbl", item("p", i % 7, i), i * 100), SHOAL_OK);
	char dir2[PATH_MAX + 16];
	snprintf(dir2, sizeof(dir2), "%s/restored", tl_dir);
	ck_assert_int_eq(mkdir(dir2, 0700), 0);
	st_env *other;
	ck_assert_int_eq(st_env_open(dir2, NULL, &other, tl_msg), SHOAL_OK);
	st_view *v;
	st_load *l;
	ck_assert_int_eq(st_view_begin(tl_env, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_load_begin(other, &l, tl_msg), SHOAL_OK);
	for (int d = 0; d < ST_DBI__COUNT; d++) {
		struct {
			st_load *l;
			st_dbi d;
		} c = {l, (st_dbi)d};
		ck_assert_int_eq(st_view_foreach(v, (st_dbi)d, copy_pair, &c, tl_msg), SHOAL_OK);
	}
	st_view_end(v);
	ck_assert_int_eq(st_load_commit(l, tl_msg), SHOAL_OK);
	st_stream_bounds b1, b2;
	uint32_t id = table_id("Tbl");
	ck_assert_int_eq(st_stream_bounds_get(tl_env, id, LABEL, &b1, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_stream_bounds_get(other, id, LABEL, &b2, tl_msg), SHOAL_OK);
	ck_assert_uint_gt(b1.trimmed, 0);
	ck_assert(memcmp(&b1, &b2, sizeof(b1)) == 0);
	st_stream_rec *r1, *r2;
	uint32_t n1, n2;
	uint64_t x1, x2;
	ck_assert_int_eq(st_stream_read(tl_env, id, LABEL, b1.first, 100, 1u << 20, &tl_arena, &r1,
	                                &n1, &x1, tl_msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_stream_read(other, id, LABEL, b2.first, 100, 1u << 20, &tl_arena, &r2,
	                                &n2, &x2, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n1, n2);
	ck_assert_uint_gt(n1, 0);
	for (uint32_t i = 0; i < n1; i++) {
		ck_assert_uint_eq(r1[i].seq, r2[i].seq);
		ck_assert_int_eq(r1[i].ts_ms, r2[i].ts_ms);
		ck_assert(st_value_equal(r1[i].new_image, r2[i].new_image));
	}
	st_env_close(other);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Wire forms                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_names_and_tokens)
{
	char label[WIRE_STREAM_LABEL_MAX], id[WIRE_SHARD_ID_MAX], seq[WIRE_SEQNO_MAX];
	wire_stream_label(LABEL, label);
	ck_assert_str_eq(label, "2023-11-14T22:13:20.123");
	int64_t ms;
	ck_assert(wire_stream_label_parse(label, &ms));
	ck_assert_int_eq(ms, LABEL);
	ck_assert(!wire_stream_label_parse("2023-11-14T22:13:20.12", &ms));
	ck_assert(!wire_stream_label_parse("2023-13-14T22:13:20.123", &ms));
	wire_shard w = {.is_static = true, .partition = 0x1234abcd}, p;
	wire_shard_id(LABEL, &w, id);
	ck_assert_str_eq(id, "shardId-00000001700000000123-1234abcd");
	ck_assert(wire_shard_id_parse(id, &ms, &p));
	ck_assert_int_eq(ms, LABEL);
	ck_assert(p.is_static);
	ck_assert_uint_eq(p.partition, 0x1234abcd);
	ck_assert(!wire_shard_id_parse("shardId-00000001700000000123-1234abcX", &ms, &p));
	/* A span of a group's log: 65 characters, DynamoDB's longest. */
	w = (wire_shard){.group = 0xab, .lo = 0xfedcba9876543210ull, .start = 77};
	wire_shard_id(LABEL, &w, id);
	ck_assert_str_eq(id, "shardId-00000001700000000123-00abfedcba9876543210000000000000004d");
	ck_assert_uint_eq(strlen(id), 65);
	ck_assert(wire_shard_id_parse(id, &ms, &p));
	ck_assert(!p.is_static);
	ck_assert_uint_eq(p.group, 0xab);
	ck_assert_uint_eq(p.lo, 0xfedcba9876543210ull);
	ck_assert_uint_eq(p.start, 77);
	/* A span never starts at 0 (that is the static partition's shard). */
	ck_assert(!wire_shard_id_parse(
	    "shardId-00000001700000000123-00abfedcba98765432100000000000000000", &ms, &p));
	wire_seqno(42, seq);
	ck_assert_str_eq(seq, "100000000000000000042");
	uint64_t s;
	ck_assert(wire_seqno_parse(seq, &s));
	ck_assert_uint_eq(s, 42);
	ck_assert(!wire_seqno_parse("00000000000000000042", &s));
	ck_assert(!wire_seqno_parse("1000000000000000000a2", &s));

	char *arn = wire_stream_arn(&tl_arena, "Music", LABEL);
	ck_assert_str_eq(arn, "arn:aws:dynamodb:shoal:000000000000:table/Music/stream/"
	                      "2023-11-14T22:13:20.123");
	const char *table;
	ck_assert_int_eq(wire_stream_arn_parse(&tl_arena, arn, &table, &ms, tl_msg), SHOAL_OK);
	ck_assert_str_eq(table, "Music");
	ck_assert_int_eq(ms, LABEL);
	ck_assert_int_eq(wire_stream_arn_parse(&tl_arena, "arn:aws:dynamodb:x:1:table/Music",
	                                       &table, &ms, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "1 validation error detected: Value "
	                         "'arn:aws:dynamodb:x:1:table/Music' at 'streamArn' failed to "
	                         "satisfy constraint: Member must have length greater than or "
	                         "equal to 37");

	wire_iter it = {.table_id = 7,
	                .shard = {.is_static = true, .partition = 2},
	                .pos = 99,
	                .issued_ms = 5000},
	          back;
	char *s_it = wire_iter_encode(&tl_arena, arn, &it);
	ck_assert_int_eq(wire_iter_decode(&tl_arena, s_it, &back, tl_msg), SHOAL_OK);
	ck_assert_str_eq(back.table, "Music");
	ck_assert_str_eq(back.stream_arn, arn);
	ck_assert_uint_eq(back.table_id, 7);
	ck_assert(back.shard.is_static);
	ck_assert_uint_eq(back.shard.partition, 2);
	ck_assert_uint_eq(back.pos, 99);
	ck_assert_int_eq(back.issued_ms, 5000);
	ck_assert_int_eq(wire_iter_check_age(&back, 5000 + WIRE_ITER_TTL_MS, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_iter_check_age(&back, 5001 + WIRE_ITER_TTL_MS, tl_msg),
	                 SHOAL_E_EXPIRED_ITERATOR);
	wire_iter sb;
	/* A span's iterator, with a lo past 2^63 (decimal, all 64 bits). */
	wire_iter sp = {.table_id = 7,
	                .shard = {.group = 3, .lo = UINT64_MAX - 5, .start = 12},
	                .pos = 40,
	                .issued_ms = 6000};
	ck_assert_int_eq(
	    wire_iter_decode(&tl_arena, wire_iter_encode(&tl_arena, arn, &sp), &sb, tl_msg),
	    SHOAL_OK);
	ck_assert(!sb.shard.is_static);
	ck_assert_uint_eq(sb.shard.group, 3);
	ck_assert_uint_eq(sb.shard.lo, UINT64_MAX - 5);
	ck_assert_uint_eq(sb.shard.start, 12);
	ck_assert_uint_eq(sb.pos, 40);
	ck_assert_int_eq(sb.issued_ms, 6000);
	const char *bad[] = {"", "x", "abc|1|2|3|4|5", NULL};
	for (int i = 0; bad[i] != NULL; i++)
		ck_assert_int_eq(wire_iter_decode(&tl_arena, bad[i], &back, tl_msg),
		                 SHOAL_E_VALIDATION);
	/* Tampered numbers are refused, not wrapped. */
	char buf[600];
	snprintf(buf, sizeof(buf), "%s|1|99999999999|2|3|4", arn);
	ck_assert_int_eq(wire_iter_decode(&tl_arena, buf, &back, tl_msg), SHOAL_E_VALIDATION);
	snprintf(buf, sizeof(buf), "%s|1|7|2|3|4|5", arn);
	ck_assert_int_eq(wire_iter_decode(&tl_arena, buf, &back, tl_msg), SHOAL_E_VALIDATION);
	snprintf(buf, sizeof(buf), "%s|2|7|2|18446744073709551616|1|4|5", arn);
	ck_assert_int_eq(wire_iter_decode(&tl_arena, buf, &back, tl_msg), SHOAL_E_VALIDATION);
	snprintf(buf, sizeof(buf), "%s|2|7|2|3|0|4|5", arn); /* a span starting at 0 */
	ck_assert_int_eq(wire_iter_decode(&tl_arena, buf, &back, tl_msg), SHOAL_E_VALIDATION);
}
END_TEST

/* The JSON of the Streams requests and of a GetRecords answer. */
START_TEST(test_json)
{
	Shoal__Request *r;
	json_t *j = json_loads("{\"StreamArn\":\"arn:aws:dynamodb:shoal:000000000000:table/M/"
	                       "stream/2023-11-14T22:13:20.123\",\"ShardId\":"
	                       "\"shardId-00000001700000000123-00000001\",\"ShardIteratorType\":"
	                       "\"AFTER_SEQUENCE_NUMBER\",\"SequenceNumber\":"
	                       "\"100000000000000000042\"}",
	                       0, NULL);
	ck_assert_int_eq(wire_api_request_from_json(&tl_arena, "GetShardIterator", j, &r, tl_msg),
	                 SHOAL_OK);
	json_decref(j);
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_GET_SHARD_ITERATOR);
	wire_shard_iter_req q;
	ck_assert_int_eq(
	    wire_get_shard_iterator_from_pb(&tl_arena, r->get_shard_iterator, &q, tl_msg),
	    SHOAL_OK);
	ck_assert_str_eq(q.table, "M");
	ck_assert(q.shard.is_static);
	ck_assert_uint_eq(q.shard.partition, 1);
	ck_assert_int_eq(q.type, WIRE_ITER_AFTER);
	ck_assert_uint_eq(q.seq, 42);
	/* DescribeStream's ShardFilter: CHILD_SHARDS of a shard of the stream. */
	static const struct {
		const char *filter;
		int rc;
		const char *msg;
	} filters[] = {
	    {"{\"Type\":\"CHILD_SHARDS\",\"ShardId\":\"shardId-00000001700000000123-00000001\"}",
	     SHOAL_OK, NULL},
	    {"{\"Type\":\"PARENT\",\"ShardId\":\"shardId-00000001700000000123-00000001\"}",
	     SHOAL_E_VALIDATION,
	     "1 validation error detected: Value 'PARENT' at 'shardFilter.type' failed to satisfy "
	     "constraint: Member must satisfy enum value set: [CHILD_SHARDS]"},
	    {"{\"Type\":\"CHILD_SHARDS\"}", SHOAL_E_VALIDATION,
	     "ShardFilter of type CHILD_SHARDS needs a ShardId"},
	    {"{\"Type\":\"CHILD_SHARDS\",\"ShardId\":\"shardId-00000001700000000999-00000001\"}",
	     SHOAL_E_VALIDATION,
	     "Invalid ShardId in ShardFilter: shardId-00000001700000000999-00000001"},
	};
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		char buf[512];
		snprintf(buf, sizeof(buf),
		         "{\"StreamArn\":\"arn:aws:dynamodb:shoal:000000000000:table/M/stream/"
		         "2023-11-14T22:13:20.123\",\"ShardFilter\":%s}",
		         filters[i].filter);
		j = json_loads(buf, 0, NULL);
		ck_assert_int_eq(
		    wire_api_request_from_json(&tl_arena, "DescribeStream", j, &r, tl_msg),
		    SHOAL_OK);
		json_decref(j);
		wire_describe_stream_req dq;
		ck_assert_int_eq(
		    wire_describe_stream_from_pb(&tl_arena, r->describe_stream, &dq, tl_msg),
		    filters[i].rc);
		if (filters[i].msg != NULL)
			ck_assert_str_eq(tl_msg, filters[i].msg);
		else
			ck_assert_str_eq(dq.child_of, "shardId-00000001700000000123-00000001");
	}

	/* The target prefix decides the service: GetRecords is Streams'. */
	ck_assert_ptr_nonnull(wire_op_by_name("DynamoDBStreams_20120810.GetRecords"));
	ck_assert(wire_op_by_name("GetRecords")->flags & SHOAL_OPF_STREAMS);
	ck_assert(!(wire_op_by_name("GetItem")->flags & SHOAL_OPF_STREAMS));

	/* A record as GetRecords writes it: camelCase members, seconds. */
	st_stream_rec rec = {.seq = 3,
	                     .event = ST_EV_MODIFY,
	                     .view = ST_VIEW_NEW_AND_OLD_IMAGES,
	                     .ts_ms = 1700000000999,
	                     .label_ms = LABEL,
	                     .size_bytes = 12,
	                     .keys = *key("a", 1),
	                     .old_image = item("a", 1, 1),
	                     .new_image = item("a", 1, 2)};
	Shoal__Record **pr;
	ck_assert_int_eq(wire_stream_records_to_pb(&tl_arena, &rec, 1, 5, 1, "shoal", &pr, tl_msg),
	                 SHOAL_OK);
	Shoal__Response resp = SHOAL__RESPONSE__INIT;
	Shoal__GetRecordsResponse gr = SHOAL__GET_RECORDS_RESPONSE__INIT;
	gr.records = pr;
	gr.n_records = 1;
	resp.result_case = SHOAL__RESPONSE__RESULT_GET_RECORDS;
	resp.get_records = &gr;
	json_t *out;
	ck_assert_int_eq(wire_api_response_to_json(&resp, "GetRecords", &out, tl_msg), SHOAL_OK);
	char *text = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
	ck_assert_str_eq(
	    text, "{\"Records\":[{\"awsRegion\":\"shoal\",\"dynamodb\":{"
	          "\"ApproximateCreationDateTime\":1700000000.0,\"Keys\":{\"pk\":{\"S\":\"a\"},"
	          "\"sk\":{\"N\":\"1\"}},\"NewImage\":{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"1\"},"
	          "\"v\":{\"N\":\"2\"}},\"OldImage\":{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"1\"},"
	          "\"v\":{\"N\":\"1\"}},\"SequenceNumber\":\"100000000000000000003\","
	          "\"SizeBytes\":12,\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},\"eventID\":"
	          "\"00000005000000010000000000000003\",\"eventName\":\"MODIFY\",\"eventSource\":"
	          "\"aws:dynamodb\",\"eventVersion\":\"1.1\"}]}");
	free(text);
	json_decref(out);
}
END_TEST

static Suite *stream_suite(void)
{
	return tl_suite("stream", setup, tl_store_close, 60,
	                TL_TESTS(test_append_events_and_images, test_ttl_removal_marked,
	                         test_bounds_two_streams, test_trim_without_writes,
	                         test_latest_on_lagging_replica, test_read_positions_and_limits,
	                         test_trim_by_age, test_deterministic,
	                         test_snapshot_carries_the_log, test_names_and_tokens, test_json));
}

TL_MAIN(stream_suite)
