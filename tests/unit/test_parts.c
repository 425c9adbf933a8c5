/* Partition moves, the storage side (storage/parts.c): the move log on OUT,
 * the fence refusing reads and writes, ingest through the write path (LSI
 * entries and counters, no outbox delta, no stream record), stale attempts,
 * purge to AWAY, own splitting an AWAY record, abort, the in-memory flag,
 * a randomised copy + log replay that must give exactly the source's range
 * (seed printed; SHOAL_SEED=n replays it), and a GSI's backfill against
 * moves (what it indexes; group 0 keeping the two apart). */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cluster_map.h"
#include "storage/catalog.h"
#include "storage/codec.h"
#include "storage/engine.h"
#include "storage/index.h"
#include "storage/parts.h"
#include "storage/parts_int.h"
#include "storage/read.h"
#include "storage/snapshot.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_store.h"

#define TID   7
#define LABEL 1700000000123ll

static st_env *tgt; /* the target group's environment (tl_env is the source) */

/* Table "T" (id TID) with an LSI byL (PK, L), a GSI byG (G) and a stream. */
static void create_table(st_env *e)
{
	st_key_attr attrs[4] = {{"PK", ST_S}, {"SK", ST_S}, {"L", ST_N}, {"G", ST_S}};
	st_index_def ix[2] = {{.name = "byL",
	                       .local = true,
	                       .key = {{"PK", ST_S}, {"L", ST_N}},
	                       .projection = ST_PROJ_ALL,
	                       .write_shards = 1,
	                       .status = ST_INDEX_ACTIVE},
	                      {.name = "byG",
	                       .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                       .projection = ST_PROJ_ALL,
	                       .write_shards = 1,
	                       .status = ST_INDEX_ACTIVE}};
	st_table_def d = {.name = "Tab",
	                  .id = TID,
	                  .key = {{"PK", ST_S}, {"SK", ST_S}},
	                  .attrs = attrs,
	                  .n_attrs = 4,
	                  .indexes = ix,
	                  .n_indexes = 2,
	                  .created_ms = LABEL,
	                  .stream = {.enabled = true,
	                             .view = ST_VIEW_NEW_AND_OLD_IMAGES,
	                             .label_ms = LABEL,
	                             .changed_ms = LABEL}};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

static void setup(void)
{
	tl_store_open("parts", NULL);
	create_table(tl_env);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", tl_tmpdir("parts-target"));
	ck_assert_int_eq(st_env_open(dir, NULL, &tgt, tl_msg), SHOAL_OK);
	create_table(tgt);
}

static void teardown(void)
{
	st_env_close(tgt);
	tgt = NULL;
	tl_store_close();
}

static uint64_t hash_of(const char *pk)
{
	return st_key_hash(TID, tl_s(pk));
}

static st_value *item(const char *pk, const char *sk, long l, const char *g)
{
	st_value *it = tl_map("PK", tl_s(pk), "SK", tl_s(sk), NULL);
	if (l >= 0)
		st_map_set(&tl_arena, it, "L", 1, tl_ni(l));
	if (g != NULL)
		st_map_set(&tl_arena, it, "G", 1, tl_s(g));
	return it;
}

static st_value *key(const char *pk, const char *sk)
{
	return tl_map("PK", tl_s(pk), "SK", tl_s(sk), NULL);
}

/* One write in a transaction of its own; the transaction commits only when
 * the write succeeded. */
static int finish(st_txn *t, int rc)
{
	if (rc == SHOAL_OK)
		ck_assert_msg(st_txn_commit(t, tl_msg) == SHOAL_OK, "%s", tl_msg);
	else
		st_txn_abort(t);
	return rc;
}

static int put(st_env *e, const st_value *it)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	st_txn_set_time(t, LABEL);
	st_put_req r = {.table = "Tab", .item = it};
	st_write_result res;
	return finish(t, st_put(t, &r, &tl_arena, &res, tl_msg));
}

static int del(st_env *e, const st_value *k)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	st_txn_set_time(t, LABEL);
	st_delete_req r = {.table = "Tab", .key = k};
	st_write_result res;
	return finish(t, st_delete(t, &r, &tl_arena, &res, tl_msg));
}

static int get(st_env *e, const st_value *k, st_value **out)
{
	st_get_req r = {.table = "Tab", .key = k};
	return st_get_item(e, &r, &tl_arena, out, tl_msg);
}

/* Apply-side calls, each in a transaction of its own. */
static int p_out(st_env *e, uint64_t lo, uint64_t hi, uint64_t attempt)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_out(t, TID, lo, hi, 2, attempt, tl_msg));
}

/* What the last p_fence, p_abort and p_own said had happened. */
static bool fenced_now, owned_now;
static uint8_t abort_was;

static int p_fence(st_env *e, uint64_t lo)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_fence(t, TID, lo, &fenced_now, tl_msg));
}

/* A purge entry as the source's leader proposes it: with the range's
 * count while the record has none (pmove.c purge). */
static int p_purge(st_env *e, uint64_t lo, uint32_t max, bool *done)
{
	st_part_held held;
	bool counted = true;
	if (st_part_held_count(e, TID, lo, &held, &counted, tl_msg) != SHOAL_OK)
		counted = true;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_purge(t, TID, lo, max, counted ? NULL : &held, done, tl_msg));
}

/* The handover entry with the figures the target's last ingest gave, as
 * the source's leader proposes it (pmove.c), or (ingest NULL) with the
 * leader's own count. */
static int p_handover(st_env *e, uint64_t lo, const st_part_held *ingest)
{
	st_part_held held;
	bool counted = false;
	if (ingest != NULL)
		held = *ingest;
	else
		ck_assert_int_eq(st_part_held_count(e, TID, lo, &held, &counted, tl_msg), SHOAL_OK);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_handover(t, TID, lo, counted ? NULL : &held, tl_msg));
}

static int p_abort(st_env *e, uint64_t lo)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_abort(t, TID, lo, &abort_was, tl_msg));
}

static int p_own(st_env *e, uint64_t lo, uint64_t hi, uint64_t attempt)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_own(t, TID, lo, hi, attempt, &owned_now, tl_msg));
}

/* What the last p_ingest said the range's record holds. */
static st_part_held ingest_held;

static int p_ingest(st_env *e, uint64_t lo, uint64_t hi, uint64_t attempt, bool reset, size_t n,
                    uint8_t **keys, size_t *klens, uint8_t **vals, size_t *vlens)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	st_txn_set_time(t, LABEL);
	return finish(t, st_part_ingest(
	                     t, TID, lo, hi, attempt, reset, n, (const uint8_t *const *)keys, klens,
	                     (const uint8_t *const *)vals, vlens, &tl_arena, &ingest_held, tl_msg));
}

/* Every (key, value) of the source's range, as one chunk, into the target. */
static void copy_all(uint64_t lo, uint64_t hi, uint64_t attempt, uint64_t *log_last)
{
	uint8_t **k, **v;
	size_t *kl, *vl, n;
	bool more;
	ck_assert_int_eq(st_part_copy_chunk(tl_env, TID, lo, hi, NULL, 0, SIZE_MAX, &tl_arena, &k,
	                                    &kl, &v, &vl, &n, &more, log_last, tl_msg),
	                 SHOAL_OK);
	ck_assert(!more);
	ck_assert_msg(p_ingest(tgt, lo, hi, attempt, true, n, k, kl, v, vl) == SHOAL_OK, "%s",
	              tl_msg);
}

/* Keys of the meta DBI that start with b0 b1. */
typedef struct count_arg {
	uint8_t p[2];
	uint64_t n;
} count_arg;

static int count_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	count_arg *c = arg;
	if (kl >= 2 && memcmp(k, c->p, 2) == 0)
		c->n++;
	return SHOAL_OK;
}

static uint64_t count_meta(st_env *e, uint8_t b0, uint8_t b1)
{
	st_view *v;
	ck_assert_int_eq(st_view_begin(e, &v, tl_msg), SHOAL_OK);
	count_arg c = {{b0, b1}, 0};
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_META, count_fn, &c, tl_msg), SHOAL_OK);
	st_view_end(v);
	return c.n;
}

#define OUTBOX(e)  count_meta(e, 0x01, 'O')
#define STREAM(e)  count_meta(e, 0x03, 'R')
#define MOVELOG(e) count_meta(e, 0x05, 'L')

/* The data entries of table TID (base items and LSI entries) whose hash is
 * inside [lo, hi] (or outside it), as one buffer of (len, key, len, value). */
typedef struct dump_arg {
	uint64_t lo, hi;
	bool inside;
	uint8_t *buf;
	size_t len, cap;
} dump_arg;

static void dump_add(dump_arg *d, const void *p, size_t n)
{
	if (d->len + n + sizeof(size_t) > d->cap) {
		d->cap = 2 * (d->len + n + sizeof(size_t)) + 4096;
		d->buf = realloc(d->buf, d->cap);
		ck_assert_ptr_nonnull(d->buf);
	}
	memcpy(d->buf + d->len, &n, sizeof(n));
	memcpy(d->buf + d->len + sizeof(n), p, n);
	d->len += sizeof(n) + n;
}

static int dump_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	dump_arg *d = arg;
	const uint8_t *b = k;
	if (kl < ST_KEY_HEADER || st_get_be32(b) != TID)
		return SHOAL_OK;
	uint64_t h = st_get_be64(b + 6);
	if ((h >= d->lo && h <= d->hi) != d->inside)
		return SHOAL_OK;
	dump_add(d, k, kl);
	dump_add(d, v, vl);
	return SHOAL_OK;
}

static uint8_t *dump(st_env *e, uint64_t lo, uint64_t hi, bool inside, size_t *len)
{
	st_view *v;
	ck_assert_int_eq(st_view_begin(e, &v, tl_msg), SHOAL_OK);
	dump_arg d = {.lo = lo, .hi = hi, .inside = inside};
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_DATA, dump_fn, &d, tl_msg), SHOAL_OK);
	st_view_end(v);
	*len = d.len;
	return d.buf;
}

/* Whether env's data holds the base item (pk, sk), read raw (a range being
 * ingested is refused to clients until it is owned). */
typedef struct has_arg {
	st_key k;
	bool found;
} has_arg;

static int has_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	(void)v, (void)vl, (void)errmsg;
	has_arg *h = arg;
	if (kl == h->k.len && memcmp(k, h->k.b, kl) == 0)
		h->found = true;
	return SHOAL_OK;
}

static bool raw_has(st_env *e, const char *pk, const char *sk)
{
	has_arg h = {.found = false};
	st_key_item(&h.k, TID, 0, tl_s(pk), tl_s(sk));
	st_view *v;
	ck_assert_int_eq(st_view_begin(e, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_DATA, has_fn, &h, tl_msg), SHOAL_OK);
	st_view_end(v);
	return h.found;
}

static void assert_same(uint8_t *a, size_t alen, uint8_t *b, size_t blen, const char *what)
{
	ck_assert_msg(alen == blen && (alen == 0 || memcmp(a, b, alen) == 0),
	              "%s differ (%zu and %zu bytes)", what, alen, blen);
	free(a);
	free(b);
}

/* The counters an environment keeps for table T (item count and bytes, the
 * LSI's entry count and bytes, every item collection's size) against what
 * its data holds. */
typedef struct counters {
	uint64_t items, bytes, lsi_items, lsi_bytes;
	struct {
		uint8_t digest[16];
		uint64_t size;
	} coll[512];
	uint32_t n_coll;
} counters;

static int counters_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	counters *c = arg;
	const uint8_t *b = k;
	if (kl < ST_KEY_HEADER || st_get_be32(b) != TID || st_get_be16(b + 4) > 1)
		return SHOAL_OK;
	st_value it;
	ck_assert_int_eq(st_codec_decode(&tl_arena, v, vl, &it, errmsg), SHOAL_OK);
	uint64_t size = st_item_size(&it);
	if (st_get_be16(b + 4) == 0) {
		c->items++;
		c->bytes += size;
	} else {
		c->lsi_items++;
		c->lsi_bytes += size;
	}
	uint32_t i = 0;
	while (i < c->n_coll && memcmp(c->coll[i].digest, b + 6, 16) != 0)
		i++;
	if (i == c->n_coll) {
		ck_assert_uint_lt(c->n_coll, 512);
		memcpy(c->coll[c->n_coll++].digest, b + 6, 16);
	}
	c->coll[i].size += size;
	return SHOAL_OK;
}

static void check_counters(st_env *e)
{
	static counters c;
	memset(&c, 0, sizeof(c));
	st_view *v;
	ck_assert_int_eq(st_view_begin(e, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_DATA, counters_fn, &c, tl_msg), SHOAL_OK);
	st_view_end(v);
	st_table_info t;
	ck_assert_int_eq(st_table_describe(e, "Tab", &tl_arena, &t, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(t.item_count, c.items);
	ck_assert_uint_eq(t.size_bytes, c.bytes);
	st_index_progress *p;
	uint32_t n;
	ck_assert_int_eq(st_index_progress_list(e, &tl_arena, &p, &n, tl_msg), SHOAL_OK);
	bool seen = false;
	for (uint32_t i = 0; i < n; i++)
		if (p[i].local) {
			seen = true;
			ck_assert_uint_eq(p[i].item_count, c.lsi_items);
			ck_assert_uint_eq(p[i].size_bytes, c.lsi_bytes);
		}
	ck_assert(seen);
	/* Collection sizes: one meta counter per partition-key value held. */
	ck_assert_uint_eq(count_meta(e, 0x01, 'C'), c.n_coll);
	MDB_txn *rt;
	ck_assert_int_eq(mdb_txn_begin(e->env, NULL, MDB_RDONLY, &rt), 0);
	for (uint32_t i = 0; i < c.n_coll; i++) {
		uint8_t mk[22] = {0x01, 'C'};
		st_put_be32(mk + 2, TID);
		memcpy(mk + 6, c.coll[i].digest, 16);
		MDB_val k = {sizeof(mk), mk}, val;
		ck_assert_int_eq(mdb_get(rt, e->meta, &k, &val), 0);
		ck_assert_uint_eq(st_get_be64(val.mv_data), c.coll[i].size);
	}
	mdb_txn_abort(rt);
}

/* Base items of table T in e (and their st_item_size) with hashes inside
 * [lo, hi] (or outside it), from the data itself. */
typedef struct range_arg {
	uint64_t lo, hi;
	bool inside;
	uint16_t index; /* 0: base items; 1: the LSI's entries */
	st_part_held h;
} range_arg;

static int range_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	range_arg *r = arg;
	const uint8_t *b = k;
	if (kl < ST_KEY_HEADER || st_get_be32(b) != TID || st_get_be16(b + 4) != r->index)
		return SHOAL_OK;
	uint64_t h = st_get_be64(b + 6);
	if ((h >= r->lo && h <= r->hi) != r->inside)
		return SHOAL_OK;
	st_value it;
	ck_assert_int_eq(st_codec_decode(&tl_arena, v, vl, &it, errmsg), SHOAL_OK);
	r->h.items++;
	r->h.bytes += st_item_size(&it);
	return SHOAL_OK;
}

/* Entries of index `index` (0: base items) of table T in e with hashes
 * inside [lo, hi] (or outside it). */
static st_part_held in_range_ix(st_env *e, uint16_t index, uint64_t lo, uint64_t hi, bool inside)
{
	range_arg r = {lo, hi, inside, index, {0}};
	st_view *v;
	ck_assert_int_eq(st_view_begin(e, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_DATA, range_fn, &r, tl_msg), SHOAL_OK);
	st_view_end(v);
	return r.h;
}

static st_part_held in_range(st_env *e, uint64_t lo, uint64_t hi, bool inside)
{
	return in_range_ix(e, 0, lo, hi, inside);
}

/* What e counts of table T (DescribeTable, GroupStatus). */
static st_part_held served(st_env *e)
{
	st_table_info t;
	ck_assert_int_eq(st_table_describe(e, "Tab", &tl_arena, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_part_uncount(e, &t, tl_msg) == SHOAL_OK, "%s", tl_msg);
	st_part_held h = {.items = t.item_count, .bytes = t.size_bytes};
	return h;
}

/* What e counts of the LSI's entries (GroupStatus's IndexStats). */
static st_part_held served_lsi(st_env *e)
{
	st_index_progress *p;
	uint32_t n;
	ck_assert_int_eq(st_index_progress_list(e, &tl_arena, &p, &n, tl_msg), SHOAL_OK);
	ck_assert_msg(st_part_uncount_indexes(e, p, n, tl_msg) == SHOAL_OK, "%s", tl_msg);
	st_part_held h = {0};
	for (uint32_t i = 0; i < n; i++)
		if (p[i].local) {
			h.items = p[i].item_count;
			h.bytes = p[i].size_bytes;
		}
	return h;
}

/* The LSI's entries h says it holds. */
static st_part_held held_lsi(const st_part_held *h)
{
	st_part_held x = {0};
	ck_assert(h->ix_known);
	for (uint32_t i = 0; i < h->n_ix; i++) {
		ck_assert_uint_eq(h->ix[i].table, TID);
		ck_assert_uint_eq(h->ix[i].index, 1);
		x.items = h->ix[i].items;
		x.bytes = h->ix[i].bytes;
	}
	return x;
}

/* Who counts the range [lo, hi] of a move. */
enum { BY_SOURCE, BY_NONE, BY_TARGET };

/* The source and the target together count every item once: those outside
 * [lo, hi] on the source, and those inside on the group counting the range
 * (the source until its handover, the target once it owns the range, none
 * in between). */
static void check_counted_once(uint64_t lo, uint64_t hi, int by, const char *when)
{
	st_part_held out = in_range(tl_env, lo, hi, false);
	st_part_held in = by == BY_NONE ? (st_part_held){0}
	                                : in_range(by == BY_TARGET ? tgt : tl_env, lo, hi, true);
	st_part_held s = served(tl_env), t = served(tgt);
	/* Until it owns the range, the target's record holds exactly the
	 * range's items there. */
	st_part_rec *r;
	size_t n;
	ck_assert_int_eq(st_part_list(tgt, &tl_arena, &r, &n, tl_msg), SHOAL_OK);
	st_part_held copy = in_range(tgt, lo, hi, true);
	for (size_t i = 0; by != BY_TARGET && i < n; i++)
		if (r[i].lo == lo)
			ck_assert_msg(r[i].counted && r[i].held_items == copy.items &&
			                  r[i].held_bytes == copy.bytes,
			              "%s: the target's record holds %" PRIu64 " items (%" PRIu64
			              " bytes), the range has %" PRIu64 " (%" PRIu64 ")",
			              when, r[i].held_items, r[i].held_bytes, copy.items,
			              copy.bytes);
	ck_assert_msg(
	    s.items + t.items == out.items + in.items && s.bytes + t.bytes == out.bytes + in.bytes,
	    "%s: counted %" PRIu64 " + %" PRIu64 " items (%" PRIu64 " + %" PRIu64
	    " bytes), hold %" PRIu64 " (%" PRIu64 ")",
	    when, s.items, t.items, s.bytes, t.bytes, out.items + in.items, out.bytes + in.bytes);
	/* The same for the LSI's entries, which live with the items. */
	out = in_range_ix(tl_env, 1, lo, hi, false);
	in = by == BY_NONE ? (st_part_held){0}
	                   : in_range_ix(by == BY_TARGET ? tgt : tl_env, 1, lo, hi, true);
	s = served_lsi(tl_env), t = served_lsi(tgt);
	ck_assert_msg(
	    s.items + t.items == out.items + in.items && s.bytes + t.bytes == out.bytes + in.bytes,
	    "%s: counted %" PRIu64 " + %" PRIu64 " LSI entries (%" PRIu64 " + %" PRIu64
	    " bytes), hold %" PRIu64 " (%" PRIu64 ")",
	    when, s.items, t.items, s.bytes, t.bytes, out.items + in.items, out.bytes + in.bytes);
}

static int query_rc(st_query_req *q)
{
	st_page p;
	return st_query(tl_env, q, &tl_arena, &p, tl_msg);
}

static int scan_rc(st_scan_req *s)
{
	st_page p;
	return st_scan(tl_env, s, &tl_arena, &p, tl_msg);
}

static void list(st_env *e, st_part_rec **r, size_t *n)
{
	ck_assert_int_eq(st_part_list(e, &tl_arena, r, n, tl_msg), SHOAL_OK);
}

/* ------------------------------------------------------------------------ */

START_TEST(test_log_on_out)
{
	ck_assert(!st_part_any(tl_env));
	ck_assert_int_eq(put(tl_env, item("a", "1", 1, "g")), SHOAL_OK);
	uint64_t h = hash_of("a");
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert(st_part_any(tl_env));
	/* Idempotent; overlapping another range: IN_USE; empty: VALIDATION. */
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert_int_eq(p_out(tl_env, h > 0 ? h - 1 : h, h, 1), SHOAL_E_IN_USE);
	ck_assert_int_eq(p_out(tl_env, 5, 4, 1), SHOAL_E_VALIDATION);

	ck_assert_int_eq(put(tl_env, item("a", "2", 2, "g")), SHOAL_OK); /* logged */
	ck_assert_int_eq(put(tl_env, item("b", "1", 1, "g")), SHOAL_OK); /* not in range */
	ck_assert_int_eq(del(tl_env, key("a", "1")), SHOAL_OK);          /* logged */
	ck_assert_int_eq(del(tl_env, key("a", "9")), SHOAL_OK);          /* nothing to delete */
	uint64_t last;
	ck_assert_int_eq(st_part_log_last(tl_env, TID, h, &last, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(last, 2);

	uint8_t **k, **v;
	size_t *kl, *vl, n;
	uint64_t seq;
	ck_assert_int_eq(st_part_log_read(tl_env, TID, h, 0, 1, 0, &tl_arena, &k, &kl, &v, &vl,
	                                  &seq, &n, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 1); /* max_bytes 1: still one */
	ck_assert_uint_eq(seq, 1);
	st_value it;
	ck_assert_uint_gt(vl[0], 0);
	ck_assert_int_eq(st_codec_decode(&tl_arena, v[0], vl[0], &it, tl_msg), SHOAL_OK);
	ck_assert(tl_same(&it, item("a", "2", 2, "g")));
	ck_assert_int_eq(st_part_log_read(tl_env, TID, h, 1, 1 << 20, 0, &tl_arena, &k, &kl, &v,
	                                  &vl, &seq, &n, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(seq, 2);
	ck_assert_uint_eq(vl[0], 0); /* the delete */
	ck_assert_uint_eq(st_get_be64(k[0] + 6), h);
	ck_assert_int_eq(st_part_log_read(tl_env, TID, h, 2, 1 << 20, 0, &tl_arena, &k, &kl, &v,
	                                  &vl, &seq, &n, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(seq, 2);
	/* Bounded by records as well as bytes. */
	for (size_t max = 0; max <= 2; max++) {
		ck_assert_int_eq(st_part_log_read(tl_env, TID, h, 0, 1 << 20, max, &tl_arena, &k,
		                                  &kl, &v, &vl, &seq, &n, tl_msg),
		                 SHOAL_OK);
		ck_assert_uint_eq(n, max == 1 ? 1 : 2);
		ck_assert_uint_eq(seq, n);
	}

	/* A new attempt of the same range drops the old records, keeps the seq. */
	ck_assert_int_eq(p_out(tl_env, h, h, 2), SHOAL_OK);
	ck_assert_uint_eq(MOVELOG(tl_env), 0);
	ck_assert_int_eq(put(tl_env, item("a", "3", 3, "g")), SHOAL_OK);
	ck_assert_int_eq(st_part_log_last(tl_env, TID, h, &last, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(last, 3);
	st_part_rec *r;
	list(tl_env, &r, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].attempt, 2);
	ck_assert_uint_eq(r[0].state, ST_PART_OUT);
	check_counters(tl_env);
}
END_TEST

/* A two-phase transaction of one put prepared here as id {n}. */
static int prepare_put(uint8_t n, st_value *it)
{
	st_txn *t;
	uint8_t id[ST_TXN_ID_LEN] = {n};
	st_txn_action act = {.kind = ST_TXA_PUT, .u.put = {.table = "Tab", .item = it}};
	st_txn_result res[1];
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	return finish(t, st_txn_prepare(t, id, 0, &act, 1, "x", 1, &tl_arena, res, tl_msg));
}

/* Transaction {n}'s decision applied: its prepared record released. */
static int release(uint8_t n)
{
	st_txn *t;
	uint8_t id[ST_TXN_ID_LEN] = {n};
	st_prepared prep;
	bool found;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	int rc = finish(t, st_txn_release(t, id, &tl_arena, &prep, &found, tl_msg));
	ck_assert(found);
	return rc;
}

/* Meta records whose key starts with prefix | kind. */
static uint32_t meta_count(uint8_t prefix, char kind)
{
	MDB_txn *rtx;
	MDB_cursor *c;
	ck_assert_int_eq(st_read_txn_begin(tl_env, &rtx, tl_msg), SHOAL_OK);
	ck_assert_int_eq(mdb_cursor_open(rtx, tl_env->meta, &c), 0);
	uint8_t p[2] = {prefix, (uint8_t)kind};
	MDB_val k = {2, p}, v;
	uint32_t n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size >= 2 && memcmp(k.mv_data, p, 2) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		n++;
	mdb_cursor_close(c);
	mdb_txn_abort(rtx);
	return n;
}

START_TEST(test_fence_refuses)
{
	ck_assert_int_eq(put(tl_env, item("a", "1", 1, "g")), SHOAL_OK);
	ck_assert_int_eq(put(tl_env, item("b", "1", 1, "g")), SHOAL_OK);
	uint64_t h = hash_of("a");
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_E_VALIDATION); /* no record */
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);

	/* The fence waits for the prepared transactions that may hold items
	 * of its range: those prepared before the range went OUT (whatever
	 * they hold: they noted nothing), and those that noted it since --
	 * not for one prepared since on an item elsewhere. */
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK);
	ck_assert(fenced_now);
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);                     /* back to no record */
	ck_assert_int_eq(prepare_put(1, item("c", "1", 1, "g")), SHOAL_OK); /* before the OUT */
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_E_IN_USE);
	ck_assert_int_eq(prepare_put(2, item("a", "9", 1, "g")), SHOAL_OK); /* in the range */
	ck_assert_int_eq(release(1), SHOAL_OK);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_E_IN_USE);
	ck_assert_int_eq(prepare_put(3, item("c", "2", 1, "g")), SHOAL_OK); /* elsewhere */
	ck_assert_int_eq(release(2), SHOAL_OK);
	ck_assert_uint_eq(meta_count(0x05, 'X'), 0); /* transaction 3 noted nothing */
	ck_assert_uint_eq(meta_count(0x05, 'Y'), 0);
	ck_assert_int_eq(prepare_put(4, item("a", "8", 1, "g")), SHOAL_OK);
	ck_assert_uint_eq(meta_count(0x05, 'X'), 1);
	ck_assert_uint_eq(meta_count(0x05, 'Y'), 1);
	ck_assert_int_eq(release(4), SHOAL_OK);
	ck_assert_uint_eq(meta_count(0x05, 'X'), 0);
	ck_assert_uint_eq(meta_count(0x05, 'Y'), 0);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK); /* transaction 3 still prepared */
	ck_assert(fenced_now);
	ck_assert_uint_eq(meta_count(0x05, 'W'), 0); /* the fence's wait list went with it */
	ck_assert_int_eq(release(3), SHOAL_OK);
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);

	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK);
	ck_assert(fenced_now);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK); /* idempotent */
	ck_assert(!fenced_now);
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_E_VALIDATION);

	/* Writes and reads of the range: WRONG_GROUP, naming table and hash. */
	char want[64];
	snprintf(want, sizeof(want), "table %d hash %016" PRIx64, TID, h);
	ck_assert_int_eq(put(tl_env, item("a", "2", 1, "g")), SHOAL_E_WRONG_GROUP);
	ck_assert_msg(strstr(tl_msg, want) != NULL && strstr(tl_msg, "FENCED") != NULL, "%s",
	              tl_msg);
	ck_assert_int_eq(del(tl_env, key("a", "1")), SHOAL_E_WRONG_GROUP);
	st_value *got;
	ck_assert_int_eq(get(tl_env, key("a", "1"), &got), SHOAL_E_WRONG_GROUP);
	ck_assert_int_eq(st_part_check_env(tl_env, TID, 0, UINT64_MAX, tl_msg),
	                 SHOAL_E_WRONG_GROUP);
	ck_assert_int_eq(st_part_check_env(tl_env, TID + 1, 0, UINT64_MAX, tl_msg), SHOAL_OK);
	if (h < UINT64_MAX)
		ck_assert_int_eq(st_part_check_env(tl_env, TID, h + 1, UINT64_MAX, tl_msg),
		                 SHOAL_OK);
	st_query_req q = {.table = "Tab",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, tl_map(":p", tl_s("a"), NULL)},
	                  .forward = true};
	ck_assert_int_eq(query_rc(&q), SHOAL_E_WRONG_GROUP);
	q.index = "byL"; /* the LSI's entries live with the items */
	ck_assert_int_eq(query_rc(&q), SHOAL_E_WRONG_GROUP);
	st_scan_req s = {.table = "Tab"};
	ck_assert_int_eq(scan_rc(&s), SHOAL_E_WRONG_GROUP);
	/* A scan of a hash range beside it, and the other items, are served. */
	st_page p;
	if (h > 0) {
		s.hash_lo = 0, s.hash_hi = h - 1;
		tl_scan_ok(&s, &p);
	}
	q.index = NULL;
	q.attrs.values = tl_map(":p", tl_s("b"), NULL);
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 1);
	ck_assert_int_eq(get(tl_env, key("b", "1"), &got), SHOAL_OK);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(put(tl_env, item("b", "2", 1, "g")), SHOAL_OK);
	/* A GSI's hash space does not move. */
	st_scan_req gs = {.table = "Tab", .index = "byG"};
	tl_scan_ok(&gs, &p);

	/* A transaction touching the range is refused as a whole. */
	st_txn_action acts[2] = {
	    {.kind = ST_TXA_PUT, .u.put = {.table = "Tab", .item = item("b", "3", 1, "g")}},
	    {.kind = ST_TXA_PUT, .u.put = {.table = "Tab", .item = item("a", "3", 1, "g")}}};
	st_txn_result rs[2];
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(finish(t, st_transact(t, acts, 2, &tl_arena, rs, tl_msg)),
	                 SHOAL_E_WRONG_GROUP);
	st_txn_get g = {.req = {.table = "Tab", .key = key("a", "1")}};
	uint64_t inst;
	ck_assert_int_eq(st_txn_get_items(tl_env, &g, 1, &tl_arena, &inst, tl_msg),
	                 SHOAL_E_WRONG_GROUP);
}
END_TEST

START_TEST(test_ingest_maintains_indexes)
{
	for (int i = 0; i < 20; i++) {
		char pk[8], sk[8];
		snprintf(pk, sizeof(pk), "p%d", i % 5);
		snprintf(sk, sizeof(sk), "s%d", i);
		ck_assert_int_eq(put(tl_env, item(pk, sk, i % 3 == 0 ? -1 : i, "g")), SHOAL_OK);
	}
	ck_assert_uint_gt(OUTBOX(tl_env), 0);
	ck_assert_uint_gt(STREAM(tl_env), 0);
	uint64_t last;
	copy_all(0, UINT64_MAX, 1, &last);
	ck_assert_uint_eq(last, 0);
	size_t la, lb;
	uint8_t *a = dump(tl_env, 0, UINT64_MAX, true, &la);
	uint8_t *b = dump(tgt, 0, UINT64_MAX, true, &lb);
	assert_same(a, la, b, lb, "source and target data");
	check_counters(tgt);
	ck_assert_uint_eq(OUTBOX(tgt), 0);
	ck_assert_uint_eq(STREAM(tgt), 0);
	ck_assert_uint_eq(MOVELOG(tgt), 0);
	/* Ingest of an update and a delete: the LSI entry moves and goes. */
	uint8_t *k[2], *v[2];
	size_t kl[2], vl[2];
	st_key k0, k1;
	st_key_item(&k0, TID, 0, tl_s("p1"), tl_s("s1"));
	st_key_item(&k1, TID, 0, tl_s("p2"), tl_s("s2"));
	k[0] = k0.b, kl[0] = k0.len, k[1] = k1.b, kl[1] = k1.len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, item("p1", "s1", 99, "h"), &v[0], &vl[0]),
	                 SHOAL_OK);
	v[1] = NULL, vl[1] = 0;
	ck_assert_int_eq(p_ingest(tgt, 0, UINT64_MAX, 1, false, 2, k, kl, v, vl), SHOAL_OK);
	ck_assert_int_eq(put(tl_env, item("p1", "s1", 99, "h")), SHOAL_OK);
	ck_assert_int_eq(del(tl_env, key("p2", "s2")), SHOAL_OK);
	a = dump(tl_env, 0, UINT64_MAX, true, &la);
	b = dump(tgt, 0, UINT64_MAX, true, &lb);
	assert_same(a, la, b, lb, "source and target data after updates");
	check_counters(tgt);
	ck_assert_uint_eq(OUTBOX(tgt), 0);
	ck_assert_uint_eq(STREAM(tgt), 0);
	/* Refused until owned; then the target's LSI answers. */
	st_value *got;
	ck_assert_int_eq(get(tgt, key("p1", "s1"), &got), SHOAL_E_WRONG_GROUP);
	ck_assert_int_eq(p_own(tgt, 0, UINT64_MAX, 1), SHOAL_OK);
	st_query_req q = {.table = "Tab",
	                  .index = "byL",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, tl_map(":p", tl_s("p1"), NULL)},
	                  .forward = true};
	st_page p, pt;
	tl_query_ok(&q, &p);
	st_env *save = tl_env;
	tl_env = tgt;
	tl_query_ok(&q, &pt);
	tl_env = save;
	ck_assert_uint_eq(p.count, pt.count);
	ck_assert_uint_gt(pt.count, 0);
}
END_TEST

START_TEST(test_ingest_refusals)
{
	ck_assert_int_eq(put(tl_env, item("a", "1", 1, "g")), SHOAL_OK);
	uint64_t h = hash_of("a"), last;
	copy_all(h, h, 5, &last);
	st_value *got;
	/* A range being ingested is refused to clients until it is owned. */
	ck_assert_int_eq(get(tgt, key("a", "1"), &got), SHOAL_E_WRONG_GROUP);

	st_key ka, kb;
	st_key_item(&ka, TID, 0, tl_s("a"), tl_s("2"));
	st_key_item(&kb, TID, 0, tl_s("b"), tl_s("2"));
	uint8_t *k[1] = {ka.b}, *v[1];
	size_t kl[1] = {ka.len}, vl[1];
	ck_assert_int_eq(st_codec_encode(&tl_arena, item("a", "2", 2, "g"), &v[0], &vl[0]),
	                 SHOAL_OK);
	/* Stale attempt, or no reset recorded for it. */
	ck_assert_int_eq(p_ingest(tgt, h, h, 4, false, 1, k, kl, v, vl), SHOAL_E_WRONG_EPOCH);
	/* A key outside the range, an item that does not carry its key, a
	 * corrupt item, a key of another table: nothing written. */
	uint8_t *kb_[1] = {kb.b};
	size_t kbl[1] = {kb.len};
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 1, kb_, kbl, v, vl), SHOAL_E_VALIDATION);
	uint8_t *k2[2] = {ka.b, ka.b}, *v2[2] = {v[0], v[0]};
	size_t kl2[2] = {ka.len, ka.len}, vl2[2] = {vl[0], vl[0] - 1};
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 2, k2, kl2, v2, vl2), SHOAL_E_VALIDATION);
	uint8_t *wrong;
	size_t wl;
	ck_assert_int_eq(st_codec_encode(&tl_arena, item("a", "3", 2, "g"), &wrong, &wl), SHOAL_OK);
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 1, k, kl, &wrong, &wl), SHOAL_E_VALIDATION);
	uint8_t other[ST_KEY_MAX];
	memcpy(other, ka.b, ka.len);
	other[3] ^= 1;
	uint8_t *ko[1] = {other};
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 1, ko, kl, v, vl), SHOAL_E_VALIDATION);
	ck_assert(!raw_has(tgt, "a", "2"));
	/* The right attempt goes. */
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 1, k, kl, v, vl), SHOAL_OK);
	ck_assert(raw_has(tgt, "a", "2"));
	/* A new reset wipes the range first. */
	ck_assert_int_eq(p_ingest(tgt, h, h, 6, true, 0, NULL, NULL, NULL, NULL), SHOAL_OK);
	ck_assert(!raw_has(tgt, "a", "1"));
	ck_assert_int_eq(p_ingest(tgt, h, h, 5, false, 1, k, kl, v, vl), SHOAL_E_WRONG_EPOCH);
	check_counters(tgt);
	/* Own: only of the latest reset; then chunks of it are stale. */
	ck_assert_int_eq(p_own(tgt, h, h, 5), SHOAL_E_VALIDATION);
	ck_assert(!owned_now);
	ck_assert_int_eq(p_own(tgt, h, h, 6), SHOAL_OK);
	ck_assert(owned_now);
	ck_assert_int_eq(p_own(tgt, h, h, 6), SHOAL_OK); /* the same entry again */
	ck_assert(!owned_now);
	ck_assert_int_eq(p_ingest(tgt, h, h, 6, false, 1, k, kl, v, vl), SHOAL_E_WRONG_EPOCH);
	/* Owned: served here, no reset of any attempt wipes it. */
	ck_assert_int_eq(p_ingest(tgt, h, h, 6, true, 1, k, kl, v, vl), SHOAL_E_IN_USE);
	ck_assert_int_eq(p_ingest(tgt, h, h, 7, true, 1, k, kl, v, vl), SHOAL_E_IN_USE);
	ck_assert(!raw_has(tgt, "a", "2")); /* nothing written */
}
END_TEST

START_TEST(test_purge_to_away)
{
	for (int i = 0; i < 30; i++) {
		char pk[8], sk[8];
		snprintf(pk, sizeof(pk), "p%d", i % 10);
		snprintf(sk, sizeof(sk), "s%d", i);
		ck_assert_int_eq(put(tl_env, item(pk, sk, i, "g")), SHOAL_OK);
	}
	/* The range: half of the hash space, holding some of the items. */
	uint64_t lo = 0, hi = UINT64_MAX / 2;
	size_t l0, l1;
	uint8_t *outside = dump(tl_env, lo, hi, false, &l0);
	uint8_t *inside = dump(tl_env, lo, hi, true, &l1);
	ck_assert_uint_gt(l0, 0);
	ck_assert_uint_gt(l1, 0);
	free(inside);
	ck_assert_int_eq(p_out(tl_env, lo, hi, 1), SHOAL_OK);
	bool done = false;
	ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_E_VALIDATION); /* not fenced */
	ck_assert_int_eq(p_fence(tl_env, lo), SHOAL_OK);
	uint64_t ob = OUTBOX(tl_env), sb = STREAM(tl_env);
	int rounds = 0;
	while (!done) {
		ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_OK);
		check_counters(tl_env);
		ck_assert_int_lt(++rounds, 100);
	}
	ck_assert_int_gt(rounds, 1);
	ck_assert_uint_eq(OUTBOX(tl_env), ob); /* no GSI delta */
	ck_assert_uint_eq(STREAM(tl_env), sb); /* no stream record */
	ck_assert_uint_eq(MOVELOG(tl_env), 0);
	uint64_t last;
	ck_assert_int_eq(st_part_log_last(tl_env, TID, lo, &last, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(last, 0);
	size_t l2;
	uint8_t *gone = dump(tl_env, lo, hi, true, &l2);
	ck_assert_uint_eq(l2, 0);
	free(gone);
	uint8_t *after = dump(tl_env, lo, hi, false, &l2);
	assert_same(outside, l0, after, l2, "items outside the range");
	st_part_rec *r;
	size_t n;
	list(tl_env, &r, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].state, ST_PART_AWAY);
	ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_OK);
	ck_assert(done);
	ck_assert_int_eq(p_abort(tl_env, lo), SHOAL_E_VALIDATION);
	/* AWAY refuses. */
	st_scan_req s = {.table = "Tab"};
	ck_assert_int_eq(scan_rc(&s), SHOAL_E_WRONG_GROUP);
	ck_assert_msg(strstr(tl_msg, "AWAY") != NULL, "%s", tl_msg);
}
END_TEST

START_TEST(test_own_splits_away)
{
	/* An empty range purged at once: AWAY. */
	ck_assert_int_eq(p_out(tgt, 0x1000, 0x8fff, 1), SHOAL_OK);
	ck_assert_int_eq(p_fence(tgt, 0x1000), SHOAL_OK);
	bool done;
	ck_assert_int_eq(p_purge(tgt, 0x1000, 0, &done), SHOAL_OK);
	ck_assert(done);
	/* Part of it comes back. */
	ck_assert_int_eq(p_ingest(tgt, 0x3000, 0x4fff, 7, true, 0, NULL, NULL, NULL, NULL),
	                 SHOAL_OK);
	ck_assert_int_eq(p_own(tgt, 0x3000, 0x4fff, 8), SHOAL_E_VALIDATION);
	ck_assert_int_eq(p_own(tgt, 0x3000, 0x4fff, 7), SHOAL_OK);
	st_part_rec *r;
	size_t n;
	list(tgt, &r, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(r[0].lo, 0x1000);
	ck_assert_uint_eq(r[0].hi, 0x2fff);
	ck_assert_uint_eq(r[0].state, ST_PART_AWAY);
	ck_assert_uint_eq(r[1].lo, 0x5000);
	ck_assert_uint_eq(r[1].hi, 0x8fff);
	ck_assert_uint_eq(r[1].state, ST_PART_AWAY);
	/* A range covering a whole AWAY record removes it. */
	ck_assert_int_eq(p_ingest(tgt, 0x1000, 0x2fff, 9, true, 0, NULL, NULL, NULL, NULL),
	                 SHOAL_OK);
	ck_assert_int_eq(p_own(tgt, 0x1000, 0x2fff, 9), SHOAL_OK);
	list(tgt, &r, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].lo, 0x5000);
	/* Ingest into a range moving out of here: IN_USE. */
	ck_assert_int_eq(p_out(tgt, 0x9000, 0x9fff, 1), SHOAL_OK);
	ck_assert_int_eq(p_ingest(tgt, 0x9000, 0x9fff, 3, true, 0, NULL, NULL, NULL, NULL),
	                 SHOAL_E_IN_USE);
}
END_TEST

START_TEST(test_abort)
{
	uint64_t h = hash_of("a");
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK); /* nothing to abort */
	ck_assert_uint_eq(abort_was, 0);
	/* An OUT range's abort says OUT. */
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);
	ck_assert_uint_eq(abort_was, ST_PART_OUT);
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert_int_eq(put(tl_env, item("a", "1", 1, "g")), SHOAL_OK);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK);
	ck_assert_uint_eq(MOVELOG(tl_env), 1);
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);
	ck_assert_uint_eq(abort_was, ST_PART_FENCED);
	ck_assert_uint_eq(MOVELOG(tl_env), 0);
	/* Applied again: no record, nothing was. */
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);
	ck_assert_uint_eq(abort_was, 0);
	st_part_rec *r;
	size_t n;
	list(tl_env, &r, &n);
	ck_assert_uint_eq(n, 0);
	/* Served again, and not logged. */
	ck_assert_int_eq(put(tl_env, item("a", "2", 1, "g")), SHOAL_OK);
	ck_assert_uint_eq(MOVELOG(tl_env), 0);
	uint64_t last;
	ck_assert_int_eq(st_part_log_last(tl_env, TID, h, &last, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(last, 0);
}
END_TEST

/* The flag: set by a record, found again at open and by a snapshot load. */
static int load_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	return st_load_put(arg, ST_DBI_META, k, kl, v, vl, errmsg);
}

static int load_cat(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	return st_load_put(arg, ST_DBI_CATALOG, k, kl, v, vl, errmsg);
}

static void copy_env(st_env *from, st_env *to)
{
	st_view *v;
	st_load *l;
	ck_assert_int_eq(st_view_begin(from, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_load_begin(to, &l, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_CATALOG, load_cat, l, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_META, load_fn, l, tl_msg), SHOAL_OK);
	st_view_end(v);
	ck_assert_msg(st_load_commit(l, tl_msg) == SHOAL_OK, "%s", tl_msg);
}

/* --- a GSI's backfill and partition moves ----------------------------------- */

/* A GSI byH<id> (G) being created, added to table Tab of e as group 0's
 * UpdateTable and the redefinition in the group would: its id. */
static uint16_t add_creating_gsi(st_env *e)
{
	st_table_info info;
	ck_assert_int_eq(st_table_describe(e, "Tab", &tl_arena, &info, tl_msg), SHOAL_OK);
	st_table_def d = info.def;
	st_index_def *ix = sh_arena_calloc(&tl_arena, d.n_indexes + 1, sizeof(*ix));
	ck_assert_ptr_nonnull(ix);
	memcpy(ix, d.indexes, d.n_indexes * sizeof(*ix));
	uint16_t id = (uint16_t)d.next_index_id;
	char *name = sh_arena_alloc(&tl_arena, 16);
	ck_assert_ptr_nonnull(name);
	snprintf(name, 16, "byH%u", id);
	ix[d.n_indexes] = (st_index_def){.name = name,
	                                 .id = id,
	                                 .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                                 .projection = ST_PROJ_ALL,
	                                 .write_shards = 1,
	                                 .status = ST_INDEX_CREATING};
	d.indexes = ix;
	d.n_indexes++;
	d.next_index_id++;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_redefine(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	return id;
}

/* Runs GSI id's backfill in e to its end: the deltas it appended. */
static uint64_t backfill_all(st_env *e, uint16_t id)
{
	uint64_t before = OUTBOX(e);
	bool done = false;
	for (int steps = 0; !done; steps++) {
		ck_assert_int_lt(steps, 1000);
		st_txn *t;
		ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
		ck_assert_msg(st_backfill_step(t, "Tab", id, 4, &done, tl_msg) == SHOAL_OK, "%s",
		              tl_msg);
		ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	}
	return OUTBOX(e) - before;
}

static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* 30 items k0..k29 with G in the source; [*lo, *hi] covers 10 of them. */
static void thirty_items(uint64_t *lo, uint64_t *hi)
{
	uint64_t h[30];
	for (int i = 0; i < 30; i++) {
		char pk[8];
		snprintf(pk, sizeof(pk), "k%d", i);
		ck_assert_int_eq(put(tl_env, item(pk, "s", -1, "g")), SHOAL_OK);
		h[i] = hash_of(pk);
	}
	qsort(h, 30, sizeof(h[0]), by_u64);
	*lo = h[10];
	*hi = h[19];
}

/* A backfill indexes only what the group serves: not the items of a range
 * fenced for a move or moved away and being purged (the new owner indexes
 * them; the source's upsert could reach the index after the owner's newer
 * delta of the same entry), nor, on the target, a range copied in and not
 * owned yet -- which its own reads again from the start (the backfill of a
 * GSI being created restarts at st_part_own). */
START_TEST(test_backfill_serves_only_its_ranges)
{
	uint64_t lo, hi;
	thirty_items(&lo, &hi);
	/* Source: the range fenced; the backfill indexes the other 20. */
	ck_assert_int_eq(p_out(tl_env, lo, hi, 1), SHOAL_OK);
	uint64_t log_last;
	copy_all(lo, hi, 5, &log_last); /* into the target, attempt 5 */
	ck_assert_int_eq(p_fence(tl_env, lo), SHOAL_OK);
	uint16_t id = add_creating_gsi(tl_env);
	ck_assert_uint_eq(backfill_all(tl_env, id), 20);
	/* Being purged (3 of its 10 items gone, still FENCED): another
	 * index's backfill indexes the 20 as well. */
	bool done = false;
	ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_OK);
	ck_assert(!done);
	ck_assert_uint_eq(backfill_all(tl_env, add_creating_gsi(tl_env)), 20);

	/* Target: the copy is there, refused until owned; its backfill
	 * indexes none of it -- nor that of an index created (after the map's
	 * cutover) and even activated before the own. */
	uint16_t tid = add_creating_gsi(tgt);
	ck_assert_uint_eq(backfill_all(tgt, tid), 0);
	uint16_t early = add_creating_gsi(tgt);
	ck_assert_uint_eq(backfill_all(tgt, early), 0);
	char early_name[16];
	snprintf(early_name, sizeof(early_name), "byH%u", early);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tgt, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tab", early_name, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	st_index_progress *p;
	uint32_t n;
	ck_assert_int_eq(st_index_progress_list(tgt, &tl_arena, &p, &n, tl_msg), SHOAL_OK);
	for (uint32_t i = 0; i < n; i++)
		if (p[i].index_id == tid)
			ck_assert(p[i].backfill_done);
	/* Owned: both backfills read the table again, the range included; the
	 * index the table had before the move began (byG, ACTIVE) does not:
	 * the source indexed the range for it. */
	ck_assert_int_eq(p_own(tgt, lo, hi, 5), SHOAL_OK);
	ck_assert(owned_now);
	ck_assert_int_eq(st_index_progress_list(tgt, &tl_arena, &p, &n, tl_msg), SHOAL_OK);
	int seen = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i].local)
			continue;
		seen++;
		ck_assert_msg(p[i].backfill_done == (strcmp(p[i].index, "byG") == 0), "%s",
		              p[i].index);
	}
	ck_assert_int_eq(seen, 3);
	ck_assert_uint_eq(backfill_all(tgt, tid), 10);
	ck_assert_uint_eq(backfill_all(tgt, early), 10);
	/* The same own again changes nothing. */
	ck_assert_int_eq(p_own(tgt, lo, hi, 5), SHOAL_OK);
	ck_assert(!owned_now);
	ck_assert_uint_eq(backfill_all(tgt, tid), 0);
}
END_TEST

/* A target's ingest record written before 2026-11-27 (9 bytes: attempt,
 * owned; no next index id) is still read, and at its own only the indexes
 * being created start their backfill again (none is known to be new). */
START_TEST(test_own_with_an_old_ingest_record)
{
	uint64_t lo, hi;
	thirty_items(&lo, &hi);
	uint64_t log_last;
	copy_all(lo, hi, 5, &log_last); /* into the target, attempt 5 */
	uint16_t creating = add_creating_gsi(tgt);
	uint16_t active = add_creating_gsi(tgt);
	char name[16];
	snprintf(name, sizeof(name), "byH%u", active);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tgt, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tab", name, tl_msg), SHOAL_OK);
	/* The record as the old code wrote it. */
	uint8_t kb[PT_KEY], v[PT_ING_V1];
	st_part_key(kb, PT_INGEST, TID, lo);
	st_put_be64(v, 5);
	v[8] = 0;
	MDB_val k = {sizeof(kb), kb}, val = {sizeof(v), v};
	ck_assert_int_eq(mdb_put(t->txn, tgt->meta, &k, &val, 0), 0);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(backfill_all(tgt, creating), 0);
	ck_assert_uint_eq(backfill_all(tgt, active), 0);
	ck_assert_int_eq(p_own(tgt, lo, hi, 5), SHOAL_OK);
	ck_assert(owned_now);
	ck_assert_uint_eq(backfill_all(tgt, creating), 10);
	ck_assert_uint_eq(backfill_all(tgt, active), 0);
}
END_TEST

/* Items a target holds for a range it does not serve are not counted there;
 * when another move's reset carves the range's record, what is left is
 * counted again (exactly); a purge without the leader's count counts the
 * range until gone; the handover stops the source counting, once; a record
 * from before counting is not counted. */
START_TEST(test_counts_of_unserved_ranges)
{
	for (int i = 0; i < 60; i++) {
		char pk[8], sk[8];
		snprintf(pk, sizeof(pk), "p%d", i % 20);
		snprintf(sk, sizeof(sk), "s%d", i);
		ck_assert_int_eq(put(tl_env, item(pk, sk, i, "g")), SHOAL_OK);
	}
	uint64_t lo = 0, mid = UINT64_MAX / 4, hi = UINT64_MAX / 2, hi2 = UINT64_MAX / 4 * 3;
	uint64_t log_last;
	copy_all(lo, hi, 1, &log_last); /* attempt 1, never owned */
	st_part_held raw = in_range(tgt, 0, UINT64_MAX, true);
	ck_assert_uint_gt(raw.items, 0);
	ck_assert_uint_eq(served(tgt).items, 0);
	ck_assert_uint_eq(served(tgt).bytes, 0);
	ck_assert_uint_gt(in_range_ix(tgt, 1, 0, UINT64_MAX, true).items, 0);
	ck_assert_uint_eq(served_lsi(tgt).items, 0);
	ck_assert_uint_eq(served_lsi(tgt).bytes, 0);
	/* Another move into the target over (mid, hi2]: attempt 1's record
	 * keeps [lo, mid] and counts what is there. */
	copy_all(mid + 1, hi2, 2, &log_last);
	ck_assert_uint_eq(served(tgt).items, 0);
	ck_assert_int_eq(p_own(tgt, mid + 1, hi2, 2), SHOAL_OK);
	st_part_held want = in_range(tgt, mid + 1, hi2, true);
	ck_assert_uint_gt(want.items, 0);
	ck_assert_uint_gt(in_range(tgt, lo, mid, true).items, 0); /* held, not counted */
	st_part_held got = served(tgt);
	ck_assert_uint_eq(got.items, want.items);
	ck_assert_uint_eq(got.bytes, want.bytes);
	st_part_rec *r;
	size_t n;
	list(tgt, &r, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].hi, mid);
	ck_assert(r[0].counted);
	st_part_held left = in_range(tgt, lo, mid, true);
	ck_assert_uint_eq(r[0].held_items, left.items);
	ck_assert_uint_eq(r[0].held_bytes, left.bytes);
	/* The LSI's entries likewise: those of (mid, hi2] count. */
	want = in_range_ix(tgt, 1, mid + 1, hi2, true);
	ck_assert_uint_gt(want.items, 0);
	ck_assert_uint_gt(in_range_ix(tgt, 1, lo, mid, true).items, 0);
	got = served_lsi(tgt);
	ck_assert_uint_eq(got.items, want.items);
	ck_assert_uint_eq(got.bytes, want.bytes);

	/* The source: a purge told nothing counts the range until it is gone. */
	st_part_held all = in_range(tl_env, 0, UINT64_MAX, true);
	ck_assert_int_eq(p_out(tl_env, lo, hi, 1), SHOAL_OK);
	ck_assert_int_eq(p_fence(tl_env, lo), SHOAL_OK);
	got = served(tl_env);
	ck_assert_uint_eq(got.items, all.items); /* fenced: still counted here */
	bool done;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(finish(t, st_part_purge(t, TID, lo, 3, NULL, &done, tl_msg)), SHOAL_OK);
	ck_assert(!done);
	ck_assert_uint_eq(served(tl_env).items, all.items - 3);
	/* The handover: refused while OUT; then the range counts no more; a
	 * second one changes nothing; the purge keeps the figures. */
	ck_assert_int_eq(p_abort(tl_env, lo), SHOAL_OK); /* FENCED: served again */
	all = in_range(tl_env, 0, UINT64_MAX, true);
	ck_assert_int_eq(p_out(tl_env, lo, hi, 2), SHOAL_OK);
	st_part_held in = in_range(tl_env, lo, hi, true);
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(finish(t, st_part_handover(t, TID, lo, &in, tl_msg)), SHOAL_E_VALIDATION);
	ck_assert_int_eq(p_fence(tl_env, lo), SHOAL_OK);
	ck_assert_uint_eq(served(tl_env).items, all.items);
	st_part_held all_lsi = in_range_ix(tl_env, 1, 0, UINT64_MAX, true);
	st_part_held in_lsi = in_range_ix(tl_env, 1, lo, hi, true);
	ck_assert_uint_gt(in_lsi.items, 0);
	ck_assert_uint_eq(served_lsi(tl_env).items, all_lsi.items);
	ck_assert_int_eq(p_handover(tl_env, lo, NULL), SHOAL_OK); /* the leader's count */
	got = served(tl_env);
	ck_assert_uint_eq(got.items, all.items - in.items);
	ck_assert_uint_eq(got.bytes, all.bytes - in.bytes);
	got = served_lsi(tl_env);
	ck_assert_uint_eq(got.items, all_lsi.items - in_lsi.items);
	ck_assert_uint_eq(got.bytes, all_lsi.bytes - in_lsi.bytes);
	st_part_held wrong = {.items = 1, .bytes = 1};
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(finish(t, st_part_handover(t, TID, lo, &wrong, tl_msg)), SHOAL_OK);
	ck_assert_uint_eq(served(tl_env).items, all.items - in.items);
	bool counted;
	st_part_held again;
	ck_assert_int_eq(st_part_held_count(tl_env, TID, lo, &again, &counted, tl_msg), SHOAL_OK);
	ck_assert(counted);
	ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_OK);
	got = served(tl_env);
	ck_assert_uint_eq(got.items, all.items - in.items);
	ck_assert_uint_eq(got.bytes, all.bytes - in.bytes);
	while (!done)
		ck_assert_int_eq(p_purge(tl_env, lo, 3, &done), SHOAL_OK);
	got = served(tl_env);
	ck_assert_uint_eq(got.items, all.items - in.items);
	ck_assert_uint_eq(got.bytes, all.bytes - in.bytes);
	got = served_lsi(tl_env);
	ck_assert_uint_eq(got.items, all_lsi.items - in_lsi.items);
	ck_assert_uint_eq(got.bytes, all_lsi.bytes - in_lsi.bytes);
	ck_assert_uint_eq(count_meta(tl_env, 0x05, 'H'), 0); /* none held when AWAY */
	list(tl_env, &r, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].state, ST_PART_AWAY);
	ck_assert_uint_eq(r[0].held_items, 0);

	/* A record as the code before counting wrote it: not counted. */
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	uint8_t kb[PT_KEY], v[PT_REC_V1];
	st_part_key(kb, PT_REC, TID, hi2 + 1);
	st_put_be64(v, UINT64_MAX);
	v[8] = ST_PART_FENCED;
	st_put_be32(v + 9, 2);
	st_put_be64(v + 13, 3);
	MDB_val k = {sizeof(kb), kb}, val = {sizeof(v), v};
	ck_assert_int_eq(mdb_put(t->txn, tl_env->meta, &k, &val, 0), 0);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	list(tl_env, &r, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert(!r[1].counted);
	ck_assert_int_eq(st_part_held_count(tl_env, TID, hi2 + 1, &again, &counted, tl_msg),
	                 SHOAL_OK);
	ck_assert(!counted);
	in = in_range(tl_env, hi2 + 1, UINT64_MAX, true);
	ck_assert_uint_eq(again.items, in.items);
	ck_assert_uint_eq(again.bytes, in.bytes);
}
END_TEST

/* Group 0's map change, e standing in for group 0. */
static int map_set(st_env *e, uint64_t prev, const sh_map *m)
{
	size_t len = sh_map_encoded_size(m);
	uint8_t *buf = sh_arena_alloc(&tl_arena, len);
	ck_assert_ptr_nonnull(buf);
	sh_map_encode(m, buf);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_cluster_map_set(t, prev, buf, len, tl_msg));
}

/* UpdateTable creating a GSI of Tab in group 0 (e). */
static int create_gsi(st_env *e, const char *name)
{
	st_index_def c = {.name = name,
	                  .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                  .projection = ST_PROJ_ALL,
	                  .write_shards = 1};
	st_table_update_req u = {.name = "Tab", .create = &c, .n_create = 1};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	return finish(t, st_table_update(t, &u, tl_msg));
}

/* A move and a GSI's backfill of one table never overlap (group 0 decides
 * both): a map beginning a move of a table with a GSI being created is
 * refused, and so is creating a GSI while a move of the table is under way;
 * a split in place moves nothing and is not held back. */
START_TEST(test_moves_wait_for_backfills)
{
	sh_map m;
	sh_map_init(&m, 1);
	sh_map_node nd = {.id = 1, .raft_port = 7100};
	snprintf(nd.raft_host, sizeof(nd.raft_host), "127.0.0.1");
	snprintf(nd.rpc, sizeof(nd.rpc), "tcp://127.0.0.1:7200");
	uint32_t one[] = {1};
	ck_assert_int_eq(sh_map_add_node(&m, &nd, tl_msg), SHOAL_OK);
	for (uint32_t g = 0; g < 3; g++)
		ck_assert_int_eq(sh_map_add_group(&m, g, one, 1, tl_msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_add_table(&m, TID, 2, 2, tl_msg), SHOAL_OK);
	ck_assert_int_eq(map_set(tl_env, 1, &m), SHOAL_OK);

	ck_assert_int_eq(create_gsi(tl_env, "byX"), SHOAL_OK); /* CREATING */
	uint64_t prev = m.epoch;
	sh_map w;
	ck_assert_int_eq(sh_map_copy(&w, &m), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&w, TID, 0, 2, tl_msg), SHOAL_OK);
	ck_assert_int_eq(map_set(tl_env, prev, &w), SHOAL_E_IN_USE);
	ck_assert_msg(strstr(tl_msg, "being created") != NULL, "%s", tl_msg);
	sh_map_fini(&w);
	/* A split in place is no move. */
	ck_assert_int_eq(sh_map_split(&m, TID, 0, 0x1000, 1, tl_msg), SHOAL_OK);
	ck_assert_int_eq(map_set(tl_env, prev, &m), SHOAL_OK);
	prev = m.epoch;
	/* ACTIVE: the move goes. */
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tab", "byX", tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&m, TID, 0x1000, 2, tl_msg), SHOAL_OK);
	ck_assert_int_eq(map_set(tl_env, prev, &m), SHOAL_OK);
	prev = m.epoch;
	/* Under way: no GSI is created. */
	ck_assert_int_eq(create_gsi(tl_env, "byY"), SHOAL_E_IN_USE);
	ck_assert_msg(strstr(tl_msg, "is moving") != NULL, "%s", tl_msg);
	/* Done: it is. */
	ck_assert_int_eq(sh_map_finish_move(&m, TID, 0x1000, tl_msg), SHOAL_OK);
	ck_assert_int_eq(map_set(tl_env, prev, &m), SHOAL_OK);
	ck_assert_int_eq(create_gsi(tl_env, "byY"), SHOAL_OK);
	sh_map_fini(&m);
}
END_TEST

START_TEST(test_flag)
{
	uint64_t h = hash_of("a");
	ck_assert(!st_part_any(tl_env));
	ck_assert(!st_part_any(tgt));
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK);
	ck_assert(st_part_any(tl_env));
	/* A snapshot with a record sets it; one without clears it. */
	copy_env(tl_env, tgt);
	ck_assert(st_part_any(tgt));
	st_value *got;
	ck_assert_int_eq(get(tgt, key("a", "1"), &got), SHOAL_E_WRONG_GROUP);
	ck_assert_int_eq(p_abort(tl_env, h), SHOAL_OK);
	copy_env(tl_env, tgt);
	ck_assert(!st_part_any(tgt));
	/* Reopened: found at open. */
	ck_assert_int_eq(p_out(tl_env, h, h, 1), SHOAL_OK);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", tl_dir);
	st_env_close(tl_env);
	ck_assert_int_eq(st_env_open(dir, NULL, &tl_env, tl_msg), SHOAL_OK);
	ck_assert(st_part_any(tl_env));
	ck_assert_int_eq(p_fence(tl_env, h), SHOAL_OK);
	ck_assert_int_eq(put(tl_env, item("a", "1", 1, "g")), SHOAL_E_WRONG_GROUP);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Copy + log replay, randomised                                             */
/* ------------------------------------------------------------------------ */

static uint64_t rng;

/* One random write on the source: a put or a delete of one of 30 x 4 keys. */
static void random_write(uint64_t lo, uint64_t hi, bool fenced)
{
	char pk[8], sk[8];
	snprintf(pk, sizeof(pk), "p%u", (unsigned)(tl_rand(&rng) % 30));
	snprintf(sk, sizeof(sk), "s%u", (unsigned)(tl_rand(&rng) % 4));
	uint64_t h = hash_of(pk);
	int want = fenced && h >= lo && h <= hi ? SHOAL_E_WRONG_GROUP : SHOAL_OK;
	int rc;
	if (tl_rand(&rng) % 4 == 0) {
		rc = del(tl_env, key(pk, sk));
	} else {
		long l = (long)(tl_rand(&rng) % 6) - 1; /* -1: no L (sparse LSI) */
		char g[4];
		snprintf(g, sizeof(g), "g%u", (unsigned)(tl_rand(&rng) % 3));
		rc = put(tl_env, item(pk, sk, l, g));
	}
	ck_assert_msg(rc == want, "write of %s/%s: %s", pk, sk, tl_msg);
}

/* Ships the log after *seq in small batches into the target. */
static void replay(uint64_t lo, uint64_t hi, uint64_t *seq, bool writes)
{
	for (;;) {
		uint8_t **k, **v;
		size_t *kl, *vl, n;
		ck_assert_int_eq(st_part_log_read(tl_env, TID, lo, *seq, 300, 0, &tl_arena, &k, &kl,
		                                  &v, &vl, seq, &n, tl_msg),
		                 SHOAL_OK);
		if (n == 0)
			return;
		ck_assert_msg(p_ingest(tgt, lo, hi, 1, false, n, k, kl, v, vl) == SHOAL_OK, "%s",
		              tl_msg);
		if (writes && tl_rand(&rng) % 2 == 0)
			random_write(lo, hi, false);
	}
}

START_TEST(test_copy_and_replay_random)
{
	rng = tl_seed();
	for (int i = 0; i < 150; i++)
		random_write(0, 0, false);
	uint64_t a = tl_rand(&rng), b = tl_rand(&rng);
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	ck_assert_int_eq(p_out(tl_env, lo, hi, 1), SHOAL_OK);

	/* The copy, in small chunks, with writes between them. */
	uint8_t after[ST_KEY_MAX];
	size_t after_len = 0;
	uint64_t watermark = 0;
	bool first = true, more = true;
	int chunks = 0;
	while (more) {
		uint8_t **k, **v;
		size_t *kl, *vl, n;
		uint64_t log_last;
		ck_assert_int_eq(st_part_copy_chunk(tl_env, TID, lo, hi, after, after_len, 400,
		                                    &tl_arena, &k, &kl, &v, &vl, &n, &more,
		                                    &log_last, tl_msg),
		                 SHOAL_OK);
		if (first)
			watermark = log_last;
		ck_assert_msg(p_ingest(tgt, lo, hi, 1, first, n, k, kl, v, vl) == SHOAL_OK, "%s",
		              tl_msg);
		first = false;
		if (n > 0) {
			memcpy(after, k[n - 1], kl[n - 1]);
			after_len = kl[n - 1];
		}
		check_counted_once(lo, hi, BY_SOURCE, "copy");
		for (int i = 0; i < 5; i++)
			random_write(lo, hi, false);
		chunks++;
	}
	for (int i = 0; i < 20; i++)
		random_write(lo, hi, false);
	uint64_t seq = watermark;
	replay(lo, hi, &seq, true);
	ck_assert_int_eq(p_fence(tl_env, lo), SHOAL_OK);
	for (int i = 0; i < 20; i++)
		random_write(lo, hi, true); /* refused in the range, not logged outside */
	replay(lo, hi, &seq, false);
	check_counted_once(lo, hi, BY_SOURCE, "fenced");
	uint64_t last;
	ck_assert_int_eq(st_part_log_last(tl_env, TID, lo, &last, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(seq, last);

	size_t la, lb, lc;
	uint8_t *src = dump(tl_env, lo, hi, true, &la);
	uint8_t *dst = dump(tgt, lo, hi, true, &lb);
	uint8_t *stray = dump(tgt, lo, hi, false, &lc);
	ck_assert_uint_eq(lc, 0);
	free(stray);
	uint8_t *outside = dump(tl_env, lo, hi, false, &lc);
	assert_same(src, la, dst, lb, "the range at the source and the target");
	check_counters(tgt);
	ck_assert_uint_eq(OUTBOX(tgt), 0);
	ck_assert_uint_eq(STREAM(tgt), 0);
	/* The target's last ingest answered what it holds: the source's range. */
	st_part_held want = in_range(tl_env, lo, hi, true);
	ck_assert_uint_eq(ingest_held.items, want.items);
	ck_assert_uint_eq(ingest_held.bytes, want.bytes);
	/* ... and the range's LSI entries. */
	want = in_range_ix(tl_env, 1, lo, hi, true);
	ck_assert_uint_gt(want.items, 0);
	st_part_held lsi = held_lsi(&ingest_held);
	ck_assert_uint_eq(lsi.items, want.items);
	ck_assert_uint_eq(lsi.bytes, want.bytes);
	ck_assert_int_eq(p_handover(tl_env, lo, &ingest_held), SHOAL_OK);
	check_counted_once(lo, hi, BY_NONE, "handed over");
	ck_assert_int_eq(p_own(tgt, lo, hi, 1), SHOAL_OK);
	check_counted_once(lo, hi, BY_TARGET, "owned");

	/* The source purges the range; the rest is untouched. */
	bool done = false;
	while (!done) {
		ck_assert_int_eq(p_purge(tl_env, lo, 7, &done), SHOAL_OK);
		check_counted_once(lo, hi, BY_TARGET, "purge");
	}
	check_counters(tl_env);
	uint8_t *rest = dump(tl_env, lo, hi, false, &la);
	assert_same(outside, lc, rest, la, "the source outside the range");
	printf("copy and replay: %d chunks, %" PRIu64 " log records after the watermark\n", chunks,
	       last - watermark);
}
END_TEST

static Suite *parts_suite(void)
{
	return tl_suite("parts", setup, teardown, 60,
	                TL_TESTS(test_log_on_out, test_fence_refuses, test_ingest_maintains_indexes,
	                         test_ingest_refusals, test_purge_to_away, test_own_splits_away,
	                         test_abort, test_flag, test_copy_and_replay_random,
	                         test_backfill_serves_only_its_ranges,
	                         test_moves_wait_for_backfills, test_own_with_an_old_ingest_record,
	                         test_counts_of_unserved_ranges));
}

TL_MAIN(parts_suite)
