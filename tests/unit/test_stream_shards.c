/* A stream's shards (storage/stream_shards.c and st_stream_read_shard): the
 * implicit static shard, a leave closing a shard and opening what is left of
 * its range as children, arrivals with their parents, the seqs each change
 * reserves, reads of one shard, retention and DeleteTable. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/engine.h"
#include "storage/index.h"
#include "storage/stream.h"
#include "tests/lib/tl_store.h"

#define LABEL  1700000000123ll
#define GROUP  3 /* this group's id, the parent_group of its children */
#define NITEMS 10

static void stream_table(const char *name)
{
	static st_key_attr attrs[2] = {{"pk", ST_S}, {"sk", ST_N}};
	st_table_def d = {.name = name,
	                  .key = {{"pk", ST_S}, {"sk", ST_N}},
	                  .attrs = attrs,
	                  .n_attrs = 2,
	                  .created_ms = LABEL,
	                  .stream = {.enabled = true,
	                             .view = ST_VIEW_KEYS_ONLY,
	                             .label_ms = LABEL,
	                             .changed_ms = LABEL}};
	tl_create_table_def(&d);
}

static uint32_t tid;

static void setup(void)
{
	tl_store_open("stream_shards", NULL);
	stream_table("Tbl");
	ck_assert_int_eq(st_table_id(tl_env, "Tbl", &tid, tl_msg), SHOAL_OK);
}

static uint64_t newest(void)
{
	st_stream_bounds b;
	ck_assert_int_eq(st_stream_bounds_get(tl_env, tid, LABEL, &b, tl_msg), SHOAL_OK);
	return b.newest;
}

/* Puts item (pk, sk) at time ts; returns its record's seq, and its hash in
 * *hash. */
static uint64_t put_at(const char *pk, long sk, int64_t ts, uint64_t *hash)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, ts);
	st_put_req r = {.table = "Tbl",
	                .item = tl_map("pk", tl_s(pk), "sk", tl_ni(sk), "v", tl_ni(ts), NULL)};
	st_write_result res;
	ck_assert_int_eq(st_put(txn, &r, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	uint64_t seq = newest();
	st_stream_rec *rec;
	uint32_t n;
	uint64_t next;
	ck_assert_int_eq(st_stream_read(tl_env, tid, LABEL, seq, 1, 1u << 20, &tl_arena, &rec, &n,
	                                &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(rec[0].seq, seq);
	if (hash != NULL)
		*hash = rec[0].hash;
	return seq;
}

static uint64_t put(const char *pk, uint64_t *hash)
{
	return put_at(pk, 1, LABEL, hash);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* NITEMS items "k0".. (seqs 1..NITEMS), their hashes in h, sorted in s. */
static void fill(uint64_t h[NITEMS], uint64_t s[NITEMS])
{
	char pk[16];
	for (int i = 0; i < NITEMS; i++) {
		snprintf(pk, sizeof(pk), "k%d", i);
		ck_assert_uint_eq(put(pk, &h[i]), (uint64_t)i + 1);
		s[i] = h[i];
	}
	qsort(s, NITEMS, sizeof(*s), cmp_u64);
	for (int i = 1; i < NITEMS; i++)
		ck_assert_uint_lt(s[i - 1], s[i]); /* distinct: ranges split them */
	ck_assert_uint_gt(s[0], 0);
}

static bool leave(uint64_t mlo, uint64_t mhi, bool has_static, st_shard *closed)
{
	st_txn *txn;
	bool found;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	int rc = st_stream_shard_leave(txn, GROUP, tid, mlo, mhi, has_static, 0, UINT64_MAX, closed,
	                               &found, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	return found;
}

static void arrive(uint64_t lo, uint64_t hi, bool has_parent, uint32_t pg, uint64_t plo,
                   uint64_t pstart)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	int rc = st_stream_shard_arrive(txn, tid, lo, hi, has_parent, pg, plo, pstart, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}

/* The shards, the static one [0, max] held when has_static. */
static st_shard *list(bool has_static, uint32_t *n)
{
	st_shard *s;
	int rc =
	    st_stream_shard_list(tl_env, tid, has_static, 0, UINT64_MAX, &tl_arena, &s, n, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	return s;
}

static void assert_shard(const st_shard *s, uint64_t lo, uint64_t hi, uint64_t start, uint64_t end)
{
	ck_assert_uint_eq(s->lo, lo);
	ck_assert_uint_eq(s->hi, hi);
	ck_assert_uint_eq(s->start, start);
	ck_assert_uint_eq(s->end, end);
}

static void assert_parent(const st_shard *s, uint32_t group, uint64_t lo, uint64_t start)
{
	ck_assert(s->has_parent);
	ck_assert_uint_eq(s->parent_group, group);
	ck_assert_uint_eq(s->parent_lo, lo);
	ck_assert_uint_eq(s->parent_start, start);
}

/* Every record of shard s from its start, read max_n at a time; *next_out:
 * where the reads ended. */
static st_stream_rec *read_all(const st_shard *s, uint32_t max_n, uint32_t *n, uint64_t *next_out)
{
	st_stream_rec *all = NULL;
	*n = 0;
	uint64_t pos = s->start, next;
	for (int rounds = 0; rounds < 1000; rounds++) {
		st_stream_rec *r;
		uint32_t got;
		int rc = st_stream_read_shard(tl_env, tid, LABEL, s, pos, max_n, 1u << 20,
		                              &tl_arena, &r, &got, &next, tl_msg);
		ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
		ck_assert_uint_ge(next, pos);
		if (got > 0) {
			st_stream_rec *a = sh_arena_calloc(&tl_arena, *n + got, sizeof(*a));
			if (*n > 0)
				memcpy(a, all, *n * sizeof(*a));
			memcpy(a + *n, r, got * sizeof(*a));
			all = a;
			*n += got;
		}
		if (next == pos)
			break; /* nothing more (yet) */
		pos = next;
		if (s->end != 0 && pos >= s->end)
			break;
	}
	*next_out = pos;
	return all;
}

/* ------------------------------------------------------------------------ */

START_TEST(test_static_leave_upper)
{
	uint32_t n;
	st_shard *s = list(true, &n);
	ck_assert_uint_eq(n, 1);
	assert_shard(&s[0], 0, UINT64_MAX, 0, 0);
	ck_assert(!s[0].has_parent);
	/* Not held: none. */
	list(false, &n);
	ck_assert_uint_eq(n, 0);

	uint64_t h[NITEMS], sorted[NITEMS];
	fill(h, sorted);
	uint64_t m = sorted[NITEMS / 2]; /* [m, max] holds the upper half */
	st_shard closed;
	ck_assert(leave(m, UINT64_MAX, true, &closed));
	/* Closed at a reserved seq; what is left opens there, its child. */
	assert_shard(&closed, 0, UINT64_MAX, 0, NITEMS + 1);
	ck_assert_uint_eq(newest(), NITEMS + 1);
	s = list(true, &n);
	ck_assert_uint_eq(n, 2);
	assert_shard(&s[0], 0, UINT64_MAX, 0, NITEMS + 1);
	assert_shard(&s[1], 0, m - 1, NITEMS + 1, 0);
	assert_parent(&s[1], GROUP, 0, 0);
	/* The closed static shard's record persists: no longer implicit. */
	st_shard g;
	ck_assert_int_eq(st_stream_shard_get(tl_env, tid, 0, 0, true, 0, UINT64_MAX, &g, tl_msg),
	                 SHOAL_OK);
	assert_shard(&g, 0, UINT64_MAX, 0, NITEMS + 1);
	ck_assert_int_eq(
	    st_stream_shard_get(tl_env, tid, 0, NITEMS + 1, true, 0, UINT64_MAX, &g, tl_msg),
	    SHOAL_OK);
	assert_shard(&g, 0, m - 1, NITEMS + 1, 0);
	ck_assert_int_eq(st_stream_shard_get(tl_env, tid, 0, 5, true, 0, UINT64_MAX, &g, tl_msg),
	                 SHOAL_E_NOT_FOUND);
	/* Applied again: the range is in no open shard any more. */
	ck_assert(!leave(m, UINT64_MAX, true, &closed));
	ck_assert_uint_eq(newest(), NITEMS + 1);
	/* No record has the reserved seq: the next append gets the one after. */
	uint64_t hk;
	ck_assert_uint_eq(put("after", &hk), NITEMS + 2);
}
END_TEST

START_TEST(test_leave_middle_and_not_found)
{
	arrive(1000, 9999, false, 0, 0, 0);
	uint32_t n;
	st_shard *s = list(false, &n);
	ck_assert_uint_eq(n, 1);
	assert_shard(&s[0], 1000, 9999, 1, 0);
	ck_assert(!s[0].has_parent);
	st_shard closed;
	/* A range no open shard contains: nothing written. */
	ck_assert(!leave(500, 2000, false, &closed));
	ck_assert(!leave(9000, 10000, false, &closed));
	ck_assert_uint_eq(newest(), 1);
	s = list(false, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(s[0].end, 0);
	/* The middle of the arrived shard: two remainders, both its children. */
	ck_assert(leave(3000, 3999, false, &closed));
	assert_shard(&closed, 1000, 9999, 1, 2);
	s = list(false, &n);
	ck_assert_uint_eq(n, 3);
	assert_shard(&s[0], 1000, 9999, 1, 2); /* closed */
	assert_shard(&s[1], 1000, 2999, 2, 0); /* below */
	assert_shard(&s[2], 4000, 9999, 2, 0); /* above */
	assert_parent(&s[1], GROUP, 1000, 1);
	assert_parent(&s[2], GROUP, 1000, 1);
	/* Straddling the two remainders: in neither. */
	ck_assert(!leave(2999, 4000, false, &closed));
	ck_assert_uint_eq(newest(), 2);
	s = list(false, &n);
	ck_assert_uint_eq(n, 3);
	/* An empty range is refused. */
	st_txn *txn;
	bool found;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(
	    st_stream_shard_leave(txn, GROUP, tid, 5, 4, false, 0, 0, &closed, &found, tl_msg),
	    SHOAL_E_VALIDATION);
	ck_assert_int_eq(st_stream_shard_arrive(txn, tid, 5, 4, false, 0, 0, 0, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}
END_TEST

START_TEST(test_arrive_and_reserved_seqs)
{
	/* Arrives with its parent (the source's closed shard). */
	arrive(100, 199, true, 7, 100, 42);
	ck_assert_uint_eq(newest(), 1);
	arrive(100, 199, true, 7, 100, 42); /* the same entry again */
	ck_assert_uint_eq(newest(), 1);
	uint32_t n;
	st_shard *s = list(false, &n);
	ck_assert_uint_eq(n, 1);
	assert_shard(&s[0], 100, 199, 1, 0);
	assert_parent(&s[0], 7, 100, 42);
	/* Leaves, comes back, leaves again, with no record in between: every
	 * change has its own seq, so (lo, start) stays unique. */
	st_shard closed;
	ck_assert(leave(100, 199, false, &closed));
	assert_shard(&closed, 100, 199, 1, 2);
	arrive(100, 199, true, GROUP, 100, 1); /* an aborted fence */
	ck_assert(leave(100, 199, false, &closed));
	assert_shard(&closed, 100, 199, 3, 4);
	assert_parent(&closed, GROUP, 100, 1);
	s = list(false, &n);
	ck_assert_uint_eq(n, 2);
	assert_shard(&s[0], 100, 199, 1, 2);
	assert_shard(&s[1], 100, 199, 3, 4);
	/* The same range and parent again, but that shard is closed: a new one. */
	arrive(100, 199, true, GROUP, 100, 1);
	s = list(false, &n);
	ck_assert_uint_eq(n, 3);
	assert_shard(&s[2], 100, 199, 5, 0);
	/* The last closed shard containing a range: the latest leave's. */
	bool found;
	ck_assert_int_eq(
	    st_stream_shard_last_closed(tl_env, tid, 150, 160, &closed, &found, tl_msg), SHOAL_OK);
	ck_assert(found);
	assert_shard(&closed, 100, 199, 3, 4);
	ck_assert_int_eq(
	    st_stream_shard_last_closed(tl_env, tid, 150, 260, &closed, &found, tl_msg), SHOAL_OK);
	ck_assert(!found);
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(
	    st_stream_shard_last_closed_txn(txn, tid, 100, 199, &closed, &found, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert(found);
	ck_assert_uint_eq(closed.start, 3);
}
END_TEST

START_TEST(test_read_shard)
{
	uint64_t h[NITEMS], sorted[NITEMS];
	fill(h, sorted);
	uint64_t m = sorted[NITEMS / 2];
	st_shard closed;
	ck_assert(leave(m, UINT64_MAX, true, &closed));
	uint64_t cut = closed.end;
	/* After the leave, writes in both halves (the moved half's would be
	 * refused by the fence; here they test the filter). */
	uint64_t after[NITEMS];
	char pk[16];
	for (int i = 0; i < NITEMS; i++) {
		snprintf(pk, sizeof(pk), "k%d", i);
		ck_assert_uint_eq(put_at(pk, 2, LABEL, &after[i]), cut + 1 + (uint64_t)i);
		ck_assert_uint_eq(after[i], h[i]); /* the hash is the partition key's */
	}
	/* The closed static shard: every record before the cut, in order, and
	 * its reader ends at its end (done). */
	uint32_t n;
	uint64_t next;
	st_stream_rec *r = read_all(&closed, 3, &n, &next);
	ck_assert_uint_eq(n, NITEMS);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(r[i].seq, i + 1);
	ck_assert_uint_eq(next, cut);
	/* Read once more at the end: nothing, still done. */
	st_stream_rec *r2;
	ck_assert_int_eq(st_stream_read_shard(tl_env, tid, LABEL, &closed, cut, 10, 1u << 20,
	                                      &tl_arena, &r2, &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_ge(next, cut);
	/* The remainder: only the lower half's records after the cut. */
	uint32_t ns;
	st_shard *s = list(true, &ns);
	ck_assert_uint_eq(ns, 2);
	st_shard rest = s[1];
	r = read_all(&rest, 2, &n, &next);
	ck_assert_uint_eq(n, NITEMS / 2);
	uint64_t prev = 0;
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_uint_gt(r[i].seq, cut);
		ck_assert_uint_gt(r[i].seq, prev);
		ck_assert_uint_lt(r[i].hash, m);
		prev = r[i].seq;
	}
	ck_assert_uint_eq(next, newest() + 1);
	/* A closed shard of a small range among a busy log: a read of one
	 * record still gets past the others' records to its end (with
	 * st_stream_read's bound, 68 examined, it would not). */
	for (int i = 0; i < 200; i++) {
		snprintf(pk, sizeof(pk), "busy%d", i);
		put(pk, NULL);
	}
	st_shard small = {.lo = h[1], .hi = h[1], .start = 1, .end = newest() + 1};
	ck_assert_int_eq(st_stream_read_shard(tl_env, tid, LABEL, &small, 3, 1, 1u << 20, &tl_arena,
	                                      &r, &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].hash, h[1]);
	ck_assert_uint_eq(r[0].seq, cut + 2);
	ck_assert_int_eq(st_stream_read_shard(tl_env, tid, LABEL, &small, next, 1, 1u << 20,
	                                      &tl_arena, &r, &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(next, small.end);
	/* No shard: st_stream_read's behaviour, past reserved seqs at the end
	 * of the log too. */
	ck_assert_int_eq(st_stream_read_shard(tl_env, tid, LABEL, NULL, 1, 1000, 1u << 20,
	                                      &tl_arena, &r, &n, &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, newest() - 1); /* all but the reserved one */
	arrive(5, 6, false, 0, 0, 0);
	ck_assert_int_eq(st_stream_read(tl_env, tid, LABEL, next, 1000, 1u << 20, &tl_arena, &r, &n,
	                                &next, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(next, newest() + 1);
}
END_TEST

START_TEST(test_trim_and_forget)
{
	/* Records 1..4 at 100.., the static shard closed at 5; records 6, 7 at
	 * 200.., the remainder [0, m - 1] closed at 8 for its lower part;
	 * records at 5000.. after. */
	for (int i = 0; i < 4; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "t%d", i);
		put_at(pk, 1, 100 + i, NULL);
	}
	st_shard closed;
	ck_assert(leave(1ull << 63, UINT64_MAX, true, &closed));
	ck_assert_uint_eq(closed.end, 5);
	put_at("t4", 1, 200, NULL);
	put_at("t5", 1, 201, NULL);
	ck_assert(leave(0, 1000, true, &closed));
	assert_shard(&closed, 0, (1ull << 63) - 1, 5, 8);
	put_at("t6", 1, 5000, NULL);
	put_at("t7", 1, 5001, NULL);
	uint32_t n;
	st_shard *s = list(true, &n);
	ck_assert_uint_eq(n, 3);
	/* Trimming 1..7: the closed remainder's span is gone, so is its record;
	 * the static shard's stays (else it would be implicit, open, again);
	 * the open one stays. */
	st_txn *txn;
	uint32_t removed;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_stream_trim(txn, tid, 1000, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 6);
	s = list(true, &n);
	ck_assert_uint_eq(n, 2);
	assert_shard(&s[0], 0, UINT64_MAX, 0, 5);
	assert_shard(&s[1], 1001, (1ull << 63) - 1, 8, 0);
	/* A trim that reaches only part of a closed span keeps it. */
	ck_assert(leave(2000, 3000, true, &closed));
	assert_shard(&closed, 1001, (1ull << 63) - 1, 8, 11);
	put_at("t8", 1, 6000, NULL);
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_stream_trim(txn, tid, 5001, 100, &removed, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(removed, 1); /* record 9; 10 is still in [8, 11) */
	s = list(true, &n);
	ck_assert_uint_eq(n, 4);
	assert_shard(&s[1], 1001, (1ull << 63) - 1, 8, 11);
	/* A read of the static shard now: trimmed. */
	st_stream_rec *r;
	uint64_t next;
	ck_assert_int_eq(st_stream_read_shard(tl_env, tid, LABEL, &s[0], 0, 10, 1u << 20, &tl_arena,
	                                      &r, &n, &next, tl_msg),
	                 SHOAL_E_TRIMMED);
	/* DeleteTable: every 'S' record goes with the log. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_stream_forget_table(txn, tid, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	list(false, &n);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(newest(), 0);
	bool found;
	ck_assert_int_eq(st_stream_shard_last_closed(tl_env, tid, 0, 0, &closed, &found, tl_msg),
	                 SHOAL_OK);
	ck_assert(!found);
}
END_TEST

static Suite *shards_suite(void)
{
	return tl_suite("stream_shards", setup, tl_store_close, 60,
	                TL_TESTS(test_static_leave_upper, test_leave_middle_and_not_found,
	                         test_arrive_and_reserved_seqs, test_read_shard,
	                         test_trim_and_forget));
}

TL_MAIN(shards_suite)
