/*
 * parts.c -- partition moves, the storage side (contract and layout:
 * parts.h).
 *
 * Range records are keyed by (table, lo) and never overlap within a table,
 * so the record that may hold a hash h is the last one with lo <= h: a
 * lookup is one cursor positioning (walk_overlaps).  The request path first
 * reads env->parts_any and returns at once when no record exists.
 *
 * The move's own writes (st_part_ingest, st_part_purge) go through the write
 * path (write.c: st_plan_raw + st_plan_apply) with txn->part_raw set, so the
 * item, its LSI entries, the LSI counters, the item collection size and the
 * table's counters are maintained by the one code that maintains them for
 * every write; part_raw leaves out the GSI deltas, the stream record, the
 * move-log record and the fence check.
 *
 * The move log is appended in the write's LMDB transaction (st_part_log from
 * write.c), so a copy read at some applied index plus the log records after
 * the seq read in that same read transaction is exactly the range's content
 * at any later index: the copy's read transaction and the log's watermark
 * are one snapshot (st_part_copy_chunk).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "common/alloc.h"
#include "index.h"
#include "parts_int.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

/* Returns rc, poisoning txn first if rc is environmental. */
int st_part_fail(st_txn *txn, int rc, char *errmsg)
{
	if (env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

static int sticky(const st_txn *txn, char *errmsg)
{
	return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
}

static bool any_records(const st_env *env)
{
	return atomic_load_explicit(&env->parts_any, memory_order_acquire);
}

bool st_part_any(const st_env *env)
{
	return any_records(env);
}

const char *st_part_state_name(uint8_t state)
{
	switch (state) {
	case ST_PART_OUT:
		return "OUT";
	case ST_PART_FENCED:
		return "FENCED";
	case ST_PART_AWAY:
		return "AWAY";
	}
	return "?";
}

static int meta_put(st_txn *txn, const uint8_t *key, size_t klen, const void *val, size_t vlen,
                    const char *what, char *errmsg)
{
	int rc = st_txn_reserve(txn, klen + vlen + ST_RESERVE_PER_KEY, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, what, errmsg);
}

static int meta_del(st_txn *txn, const uint8_t *key, size_t klen, const char *what, char *errmsg)
{
	MDB_val k = {klen, (void *)key};
	int mrc = mdb_del(txn->txn, txn->env->meta, &k, NULL);
	return mrc == 0 || mrc == MDB_NOTFOUND ? SHOAL_OK : st_lmdb_err(mrc, what, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Range records                                                             */
/* ------------------------------------------------------------------------ */

static bool is_rec_of(const MDB_val *k, uint32_t table)
{
	const uint8_t *b = k->mv_data;
	return k->mv_size == PT_KEY && b[0] == PT_META && b[1] == PT_REC &&
	       st_get_be32(b + 2) == table;
}

int st_part_rec_decode(const MDB_val *k, const MDB_val *v, st_part_rec *r, char *errmsg)
{
	const uint8_t *kb = k->mv_data, *vb = v->mv_data;
	if (k->mv_size != PT_KEY || (v->mv_size != PT_REC_VAL && v->mv_size != PT_REC_V1))
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt partition record (sizes)");
	r->table = st_get_be32(kb + 2);
	r->lo = st_get_be64(kb + 6);
	r->hi = st_get_be64(vb);
	r->state = vb[8];
	r->to_group = st_get_be32(vb + 9);
	r->attempt = st_get_be64(vb + 13);
	r->counted = v->mv_size == PT_REC_VAL && vb[21] != 0;
	r->held_items = v->mv_size == PT_REC_VAL ? st_get_be64(vb + 22) : 0;
	r->held_bytes = v->mv_size == PT_REC_VAL ? st_get_be64(vb + 30) : 0;
	if (r->hi < r->lo || r->state < ST_PART_OUT || r->state > ST_PART_AWAY)
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "corrupt partition record of table %" PRIu32 " at %016" PRIx64,
		               r->table, r->lo);
	return SHOAL_OK;
}

static int rec_put(st_txn *txn, const st_part_rec *r, char *errmsg)
{
	uint8_t k[PT_KEY], v[PT_REC_VAL];
	st_part_key(k, PT_REC, r->table, r->lo);
	st_put_be64(v, r->hi);
	v[8] = r->state;
	st_put_be32(v + 9, r->to_group);
	st_put_be64(v + 13, r->attempt);
	v[21] = r->counted ? 1 : 0;
	st_put_be64(v + 22, r->held_items);
	st_put_be64(v + 30, r->held_bytes);
	/* Before the write: a reader that sees the record sees the flag. */
	atomic_store_explicit(&txn->env->parts_any, true, memory_order_release);
	return meta_put(txn, k, sizeof(k), v, sizeof(v), "mdb_put(meta partition)", errmsg);
}

int st_part_rec_get(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, st_part_rec *r,
                    bool *found, char *errmsg)
{
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_REC, table, lo);
	MDB_val k = {sizeof(kb), kb}, v;
	*found = false;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta partition)", errmsg);
	*found = true;
	return st_part_rec_decode(&k, &v, r, errmsg);
}

/* Deletes the move-log records of (table, lo). */
static int log_drop(st_txn *txn, uint32_t table, uint64_t lo, char *errmsg)
{
	uint8_t k[PT_KEY];
	st_part_key(k, PT_LOG, table, lo);
	return st_delete_prefix(txn, txn->env->meta, k, sizeof(k), "delete(meta move log)", errmsg);
}

/* Deletes the log, its last seq ('N'), the index entries held ('H') and
 * (with_rec) the record of (table, lo). */
static int rec_forget(st_txn *txn, uint32_t table, uint64_t lo, bool with_rec, char *errmsg)
{
	uint8_t k[PT_KEY];
	int rc = log_drop(txn, table, lo, errmsg);
	if (rc == SHOAL_OK)
		rc = st_part_held_ix_drop(txn, table, lo, errmsg);
	st_part_key(k, PT_LAST, table, lo);
	if (rc == SHOAL_OK)
		rc = meta_del(txn, k, sizeof(k), "mdb_del(meta move log seq)", errmsg);
	st_part_key(k, PT_WAITS, table, lo);
	if (rc == SHOAL_OK)
		rc = meta_del(txn, k, sizeof(k), "mdb_del(meta fence waits)", errmsg);
	st_part_key(k, PT_REC, table, lo);
	if (rc == SHOAL_OK && with_rec)
		rc = meta_del(txn, k, sizeof(k), "mdb_del(meta partition)", errmsg);
	return rc;
}

/* Called for each record overlapping a range; *stop ends the walk. */
typedef int (*rec_fn)(void *arg, const st_part_rec *r, bool *stop, char *errmsg);

/* Calls fn for every record of table overlapping [lo, hi], in lo order:
 * the one starting before lo, if it reaches lo, then those starting in
 * [lo, hi]. */
static int walk_overlaps(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                         rec_fn fn, void *arg, char *errmsg)
{
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_REC, table, lo);
	MDB_val k = {sizeof(kb), kb}, v;
	st_part_rec r;
	bool stop = false;
	int rc = SHOAL_OK;
	mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	bool exact = mrc == 0 && k.mv_size == sizeof(kb) && memcmp(k.mv_data, kb, sizeof(kb)) == 0;
	if ((mrc == 0 || mrc == MDB_NOTFOUND) && !exact) {
		int prc = mdb_cursor_get(c, &k, &v, mrc == 0 ? MDB_PREV : MDB_LAST);
		if (prc == 0 && is_rec_of(&k, table)) {
			rc = st_part_rec_decode(&k, &v, &r, errmsg);
			if (rc == SHOAL_OK && r.hi >= lo)
				rc = fn(arg, &r, &stop, errmsg);
		} else if (prc != 0 && prc != MDB_NOTFOUND) {
			mrc = prc;
		}
	}
	if (mrc == 0 || mrc == MDB_NOTFOUND) {
		k = (MDB_val){sizeof(kb), kb};
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	while (rc == SHOAL_OK && !stop && mrc == 0 && is_rec_of(&k, table)) {
		rc = st_part_rec_decode(&k, &v, &r, errmsg);
		if (rc != SHOAL_OK || r.lo > hi)
			break;
		rc = fn(arg, &r, &stop, errmsg);
		if (rc == SHOAL_OK && !stop)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta partition)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* The overlapping records, collected (few: records do not overlap). */
#define PT_MAX_OVERLAPS 64

typedef struct collect_arg {
	st_part_rec r[PT_MAX_OVERLAPS];
	size_t n;
} collect_arg;

static int collect_fn(void *arg, const st_part_rec *r, bool *stop, char *errmsg)
{
	collect_arg *c = arg;
	if (c->n == PT_MAX_OVERLAPS)
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "more than %d partition records overlap the range of table %" PRIu32,
		               PT_MAX_OVERLAPS, r->table);
	c->r[c->n++] = *r;
	return SHOAL_OK;
}

/* The first record overlapping the range whose state is in `states` (a bit
 * per st_part_state). */
typedef struct first_arg {
	unsigned states;
	bool found;
	st_part_rec r;
} first_arg;

static int first_fn(void *arg, const st_part_rec *r, bool *stop, char *errmsg)
{
	first_arg *f = arg;
	if (f->states & 1u << r->state) {
		f->found = true;
		f->r = *r;
		*stop = true;
	}
	return SHOAL_OK;
}

int st_part_rec_at(MDB_txn *txn, st_env *env, uint32_t table, uint64_t hash, st_part_rec *r,
                   char *errmsg)
{
	first_arg f = {.states = 1u << ST_PART_OUT | 1u << ST_PART_FENCED | 1u << ST_PART_AWAY};
	int rc = walk_overlaps(txn, env, table, hash, hash, first_fn, &f, errmsg);
	r->state = 0;
	if (rc == SHOAL_OK && f.found)
		*r = f.r;
	return rc;
}

/* Sums the held figures of counted records (st_part_uncount). */
static int held_fn(void *arg, const st_part_rec *r, bool *stop, char *errmsg)
{
	st_part_held *h = arg;
	if (r->counted) {
		h->items += r->held_items;
		h->bytes += r->held_bytes;
	}
	return SHOAL_OK;
}

int st_part_uncount(st_env *env, st_table_info *info, char *errmsg)
{
	if (!any_records(env))
		return SHOAL_OK;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_part_held h = {0};
	rc = walk_overlaps(txn, env, info->def.id, 0, UINT64_MAX, held_fn, &h, errmsg);
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK) {
		info->item_count = h.items < info->item_count ? info->item_count - h.items : 0;
		info->size_bytes = h.bytes < info->size_bytes ? info->size_bytes - h.bytes : 0;
	}
	return rc;
}

int st_part_refresh(st_env *env, char *errmsg)
{
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	bool any = true; /* on failure: true, which only costs lookups */
	int rc = mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	if (rc == SHOAL_OK) {
		/* Range records, and the GSI space's marks (parts_gsi.c), which
		 * st_index_apply looks for under the same flag. */
		const uint8_t prefix[2] = {PT_META, PT_REC}, marks[2] = {PT_META, 'G'};
		rc = st_meta_has_prefix(txn, env, prefix, sizeof(prefix), &any, errmsg);
		if (rc == SHOAL_OK && !any)
			rc = st_meta_has_prefix(txn, env, marks, sizeof(marks), &any, errmsg);
		if (rc != SHOAL_OK)
			any = true;
		mdb_txn_abort(txn);
	}
	atomic_store_explicit(&env->parts_any, any, memory_order_release);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Request path                                                              */
/* ------------------------------------------------------------------------ */

int st_part_check_range(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                        char *errmsg)
{
	if (!any_records(env))
		return SHOAL_OK;
	first_arg f = {.states = 1u << ST_PART_FENCED | 1u << ST_PART_AWAY};
	int rc = walk_overlaps(txn, env, table, lo, hi, first_fn, &f, errmsg);
	if (rc != SHOAL_OK || !f.found)
		return rc;
	uint64_t h = lo > f.r.lo ? lo : f.r.lo;
	return sh_errf(errmsg, SHOAL_E_WRONG_GROUP,
	               "table %" PRIu32 " hash %016" PRIx64 " is not served by this group: its "
	               "partition [%016" PRIx64 ", %016" PRIx64 "] is %s (%s group %" PRIu32 ")",
	               table, h, f.r.lo, f.r.hi, st_part_state_name(f.r.state),
	               f.r.state == ST_PART_AWAY ? "moved to" : "moving to", f.r.to_group);
}

/* The first record not served for GSI reads (st_part_check_gsi_read). */
static int unread_fn(void *arg, const st_part_rec *r, bool *stop, char *errmsg)
{
	(void)errmsg;
	first_arg *f = arg;
	if (r->state == ST_PART_AWAY || (r->state == ST_PART_FENCED && r->counted)) {
		f->found = true;
		f->r = *r;
		*stop = true;
	}
	return SHOAL_OK;
}

int st_part_check_gsi_read(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, char *errmsg)
{
	if (!any_records(env))
		return SHOAL_OK;
	first_arg f = {.found = false};
	int rc = walk_overlaps(txn, env, ST_PART_GSI, lo, hi, unread_fn, &f, errmsg);
	if (rc != SHOAL_OK || !f.found)
		return rc;
	return sh_errf(errmsg, SHOAL_E_WRONG_GROUP,
	               "GSI hash %016" PRIx64 " is not served by this group: its range [%016" PRIx64
	               ", %016" PRIx64 "] %s",
	               lo > f.r.lo ? lo : f.r.lo, f.r.lo, f.r.hi,
	               f.r.state == ST_PART_AWAY ? "is not this group's" : "moved away");
}

int st_part_check_env(st_env *env, uint32_t table, uint64_t lo, uint64_t hi, char *errmsg)
{
	if (!any_records(env))
		return SHOAL_OK;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_part_check_range(txn, env, table, lo, hi, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

int st_part_check(st_txn *txn, uint32_t table, uint64_t hash, char *errmsg)
{
	if (txn->part_raw || !any_records(txn->env))
		return SHOAL_OK;
	return st_part_check_range(txn->txn, txn->env, table, hash, hash, errmsg);
}

int st_part_log(st_txn *txn, uint32_t table, uint64_t hash, const uint8_t *key, size_t klen,
                const uint8_t *val, size_t vlen, char *errmsg)
{
	if (txn->part_raw || !any_records(txn->env))
		return SHOAL_OK;
	first_arg f = {.states = 1u << ST_PART_OUT | 1u << ST_PART_FENCED};
	int rc = walk_overlaps(txn->txn, txn->env, table, hash, hash, first_fn, &f, errmsg);
	if (rc != SHOAL_OK || !f.found)
		return rc;
	uint8_t nk[PT_KEY], lk[PT_LOG_KEY];
	uint64_t seq;
	st_part_key(nk, PT_LAST, table, f.r.lo);
	rc = st_ix_meta_get_u64(txn->txn, txn->env, nk, sizeof(nk), &seq, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_reserve(txn, 2 * (klen + vlen) + 2 * ST_RESERVE_PER_KEY, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	seq++;
	st_part_log_key(lk, table, f.r.lo, seq);
	/* Written in place (MDB_RESERVE): no copy of the item in memory. */
	MDB_val k = {sizeof(lk), lk}, v = {8 + klen + vlen, NULL};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, MDB_RESERVE);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta move log)", errmsg);
	uint8_t *p = v.mv_data;
	st_put_be32(p, (uint32_t)klen);
	memcpy(p + 4, key, klen);
	st_put_be32(p + 4 + klen, (uint32_t)vlen);
	if (vlen > 0)
		memcpy(p + 8 + klen, val, vlen);
	return st_ix_meta_put_u64(txn, nk, sizeof(nk), seq, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Source: out, fence, purge, abort                                          */
/* ------------------------------------------------------------------------ */

/* Deletes the ingest records ('I') of table whose lo is in [lo, hi]. */
static int ingest_drop(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, char *errmsg)
{
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_INGEST, table, lo);
	MDB_cursor *cur;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &cur);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	MDB_val k = {sizeof(kb), kb}, v;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != PT_KEY || memcmp(k.mv_data, kb, 6) != 0 ||
		    st_get_be64((const uint8_t *)k.mv_data + 6) > hi)
			break;
		if ((mrc = mdb_cursor_del(cur, 0)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	return mrc == 0 || mrc == MDB_NOTFOUND ? SHOAL_OK
	                                       : st_lmdb_err(mrc, "ingest records", errmsg);
}

/* ------------------------------------------------------------------------ */
/* Prepared transactions and the fence                                       */
/* ------------------------------------------------------------------------ */

/* 'W' of (table, lo): the ids of the transactions prepared now. */
static int waits_put(st_txn *txn, uint32_t table, uint64_t lo, char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	uint8_t *ids;
	uint32_t n;
	int rc = st_txn_prepared_ids(txn->txn, txn->env, &a, &ids, &n, errmsg);
	uint8_t k[PT_KEY];
	st_part_key(k, PT_WAITS, table, lo);
	if (rc == SHOAL_OK && n > 0)
		rc = meta_put(txn, k, sizeof(k), ids, 16 * (size_t)n, "mdb_put(meta fence waits)",
		              errmsg);
	sh_arena_fini(&a);
	return rc;
}

/* Whether a prepared transaction may hold items of (table, lo)'s range:
 * one of its 'W' list still prepared, or any 'X' note of it. */
static int range_txns(st_txn *txn, uint32_t table, uint64_t lo, bool *busy, char *errmsg)
{
	*busy = false;
	uint8_t k[PT_KEY];
	st_part_key(k, PT_WAITS, table, lo);
	MDB_val kv = {sizeof(k), k}, v;
	int mrc = mdb_get(txn->txn, txn->env->meta, &kv, &v);
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_get(meta fence waits)", errmsg);
	for (size_t off = 0; mrc == 0 && !*busy && off + 16 <= v.mv_size; off += 16) {
		int rc = st_txn_is_prepared(txn->txn, txn->env, (const uint8_t *)v.mv_data + off,
		                            busy, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	if (*busy)
		return SHOAL_OK;
	st_part_key(k, PT_TXN_IN, table, lo);
	MDB_cursor *c;
	if ((mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c)) != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	kv = (MDB_val){sizeof(k), k};
	mrc = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
	*busy = mrc == 0 && kv.mv_size == sizeof(k) + 16 && memcmp(kv.mv_data, k, sizeof(k)) == 0;
	mdb_cursor_close(c);
	return mrc == 0 || mrc == MDB_NOTFOUND ? SHOAL_OK
	                                       : st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
}

int st_part_txn_note(st_txn *txn, const uint8_t id[16], const struct st_write_plan *const *plans,
                     uint32_t n, char *errmsg)
{
	if (txn->part_raw || !any_records(txn->env))
		return SHOAL_OK;
	/* The distinct OUT ranges of the items: (table (4) | lo (8)) each. */
	uint8_t *list = n > 0 ? sh_malloc(12 * (size_t)n) : NULL;
	if (n > 0 && list == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "prepare: out of memory");
	uint32_t m = 0;
	int rc = SHOAL_OK;
	for (uint32_t i = 0; i < n && rc == SHOAL_OK; i++) {
		uint32_t table;
		uint64_t hash;
		st_plan_place(plans[i], &table, &hash);
		first_arg f = {.states = 1u << ST_PART_OUT};
		rc = walk_overlaps(txn->txn, txn->env, table, hash, hash, first_fn, &f, errmsg);
		if (rc != SHOAL_OK || !f.found)
			continue;
		uint8_t e[12];
		st_put_be32(e, table);
		st_put_be64(e + 4, f.r.lo);
		bool seen = false;
		for (uint32_t j = 0; j < m && !seen; j++)
			seen = memcmp(list + 12 * (size_t)j, e, 12) == 0;
		if (seen)
			continue;
		memcpy(list + 12 * (size_t)m++, e, 12);
		uint8_t xk[PT_KEY + 16];
		st_part_key(xk, PT_TXN_IN, table, f.r.lo);
		memcpy(xk + PT_KEY, id, 16);
		rc = meta_put(txn, xk, sizeof(xk), "", 0, "mdb_put(meta txn in range)", errmsg);
	}
	if (rc == SHOAL_OK && m > 0) {
		uint8_t yk[2 + 16] = {PT_META, PT_TXN};
		memcpy(yk + 2, id, 16);
		rc = meta_put(txn, yk, sizeof(yk), list, 12 * (size_t)m, "mdb_put(meta txn ranges)",
		              errmsg);
	}
	sh_free(list);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_txn_forget(st_txn *txn, const uint8_t id[16], char *errmsg)
{
	uint8_t yk[2 + 16] = {PT_META, PT_TXN};
	memcpy(yk + 2, id, 16);
	MDB_val k = {sizeof(yk), yk}, v;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_part_fail(txn, st_lmdb_err(mrc, "mdb_get(meta txn ranges)", errmsg),
		                    errmsg);
	/* Copied: deleting changes LMDB's pages under v. */
	size_t len = v.mv_size - v.mv_size % 12;
	uint8_t *list = len > 0 ? sh_malloc(len) : NULL;
	if (len > 0 && list == NULL)
		return st_part_fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "release: out of memory"),
		                    errmsg);
	if (len > 0)
		memcpy(list, v.mv_data, len);
	int rc = SHOAL_OK;
	for (size_t off = 0; off < len && rc == SHOAL_OK; off += 12) {
		uint8_t xk[PT_KEY + 16];
		st_part_key(xk, PT_TXN_IN, st_get_be32(list + off), st_get_be64(list + off + 4));
		memcpy(xk + PT_KEY, id, 16);
		rc = meta_del(txn, xk, sizeof(xk), "mdb_del(meta txn in range)", errmsg);
	}
	if (rc == SHOAL_OK)
		rc = meta_del(txn, yk, sizeof(yk), "mdb_del(meta txn ranges)", errmsg);
	sh_free(list);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_out(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint32_t to_group,
                uint64_t attempt, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	if (lo > hi)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "partition range [%016" PRIx64 ", %016" PRIx64 "] is empty", lo, hi);
	collect_arg c = {.n = 0};
	int rc = walk_overlaps(txn->txn, txn->env, table, lo, hi, collect_fn, &c, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	st_part_rec r = {.table = table,
	                 .lo = lo,
	                 .hi = hi,
	                 .state = ST_PART_OUT,
	                 .to_group = to_group,
	                 .attempt = attempt};
	if (c.n == 0) {
		/* A range that once moved in leaves: its ingest records go, so
		 * that it can come in again some day. */
		rc = ingest_drop(txn, table, lo, hi, errmsg);
		/* The transactions prepared now may hold items of the range
		 * (they noted nothing: no range was OUT): the fence waits for
		 * them as for those that note it from now on. */
		if (rc == SHOAL_OK)
			rc = waits_put(txn, table, lo, errmsg);
		if (rc != SHOAL_OK)
			return st_part_fail(txn, rc, errmsg);
	}
	for (size_t i = 0; i < c.n; i++) {
		const st_part_rec *o = &c.r[i];
		if (o->lo != lo || o->hi != hi)
			return sh_errf(errmsg, SHOAL_E_IN_USE,
			               "partition range [%016" PRIx64 ", %016" PRIx64
			               "] of table %" PRIu32 " overlaps [%016" PRIx64
			               ", %016" PRIx64 "] (%s)",
			               lo, hi, table, o->lo, o->hi, st_part_state_name(o->state));
		if (o->state != ST_PART_OUT)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "partition [%016" PRIx64 ", %016" PRIx64
			               "] of table %" PRIu32 " is %s already",
			               lo, hi, table, st_part_state_name(o->state));
		if (o->attempt == attempt && o->to_group == to_group)
			return SHOAL_OK; /* the same entry again */
		if (o->attempt != attempt) {
			/* A new attempt copies again and ships the log from its own
			 * watermark: the earlier records are of no use ('N', the
			 * seq, stays). */
			rc = log_drop(txn, table, lo, errmsg);
			if (rc != SHOAL_OK)
				return st_part_fail(txn, rc, errmsg);
		}
	}
	rc = rec_put(txn, &r, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

/* The record at (table, lo) that a source operation needs; VALIDATION if
 * there is none. */
static int source_rec(st_txn *txn, uint32_t table, uint64_t lo, const char *op, st_part_rec *r,
                      char *errmsg)
{
	bool found;
	int rc = st_part_rec_get(txn->txn, txn->env, table, lo, r, &found, errmsg);
	if (rc == SHOAL_OK && !found)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "%s: no partition move of table %" PRIu32 " at %016" PRIx64, op, table,
		             lo);
	return rc;
}

int st_part_fence(st_txn *txn, uint32_t table, uint64_t lo, bool *fenced_now, char *errmsg)
{
	*fenced_now = false;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_part_rec r;
	int rc = source_rec(txn, table, lo, "fence", &r, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (r.state == ST_PART_FENCED)
		return SHOAL_OK;
	if (r.state != ST_PART_OUT)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "fence: partition [%016" PRIx64 ", %016" PRIx64 "] of table %" PRIu32
		               " is %s",
		               r.lo, r.hi, table, st_part_state_name(r.state));
	/* A prepared transaction holding items of the range may commit
	 * later; its writes must reach the log before the fence, so the fence
	 * waits until none is left -- only those that may hold some: the ones
	 * prepared before the range went OUT, and those that noted it since
	 * (transactions elsewhere in the group do not hold the fence back). */
	bool busy;
	rc = range_txns(txn, table, lo, &busy, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (busy)
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "fence of table %" PRIu32 " at %016" PRIx64
		               ": a prepared transaction holds items of the range",
		               table, lo);
	r.state = ST_PART_FENCED;
	uint8_t wk[PT_KEY];
	st_part_key(wk, PT_WAITS, table, lo);
	rc = rec_put(txn, &r, errmsg);
	if (rc == SHOAL_OK)
		rc = meta_del(txn, wk, sizeof(wk), "mdb_del(meta fence waits)", errmsg);
	/* The GSI space: the range's watermarks pinned (parts.h). */
	if (rc == SHOAL_OK && table == ST_PART_GSI)
		rc = st_part_gsi_pin(txn, r.lo, r.hi, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	*fenced_now = true;
	return SHOAL_OK;
}

/* The table of id `table` as txn's writes see it (st_txn_table); *found
 * false when there is none.  Scratch in a. */
static int table_by_id(st_txn *txn, uint32_t table, sh_arena *a, st_table_info *out, bool *found,
                       char *errmsg)
{
	st_table_info *all;
	uint32_t n;
	*found = false;
	int rc = st_ix_tables(txn->txn, txn->env, a, &all, &n, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++)
		if (all[i].def.id == table) {
			*found = true;
			return st_txn_table(txn, all[i].def.name, out, errmsg);
		}
	return rc;
}

void st_part_index_range(uint32_t table, uint16_t index, uint64_t lo, uint64_t hi, st_key *from,
                         st_key *to, bool *has_to)
{
	st_key_hash_bound(from, table, index, lo);
	if (hi != UINT64_MAX) {
		st_key_hash_bound(to, table, index, hi + 1);
		*has_to = true;
	} else {
		st_key_table(to, table, index);
		*has_to = st_key_prefix_end(to);
	}
}

void st_part_base_range(uint32_t table, uint64_t lo, uint64_t hi, st_key *from, st_key *to,
                        bool *has_to)
{
	st_part_index_range(table, 0, lo, hi, from, to, has_to);
}

bool st_part_key_before(const MDB_val *k, const st_key *to, bool has_to)
{
	if (!has_to)
		return true;
	size_t n = k->mv_size < to->len ? k->mv_size : to->len;
	int c = memcmp(k->mv_data, to->b, n);
	return c < 0 || (c == 0 && k->mv_size < to->len);
}

int st_part_key_push(sh_arena *a, st_key **keys, size_t *n, size_t *cap, const MDB_val *k,
                     char *errmsg)
{
	if (k->mv_size > ST_KEY_MAX)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt data key (%zu bytes)",
		               k->mv_size);
	if (*n == *cap) {
		size_t ncap = *cap == 0 ? 16 : 2 * *cap;
		st_key *grown = sh_arena_alloc(a, ncap * sizeof(*grown));
		if (grown == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "partition keys: out of memory");
		if (*n > 0)
			memcpy(grown, *keys, *n * sizeof(*grown));
		*keys = grown;
		*cap = ncap;
	}
	st_key *dst = &(*keys)[(*n)++];
	dst->len = (uint16_t)k->mv_size;
	memcpy(dst->b, k->mv_data, k->mv_size);
	return SHOAL_OK;
}

/* Up to max base keys of [lo, hi] (all of them when max is 0), copied into
 * a; *more: keys remain past them. */
static int base_keys(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                     size_t max, sh_arena *a, st_key **out, size_t *n, bool *more, char *errmsg)
{
	st_key from, to;
	bool has_to;
	st_part_base_range(table, lo, hi, &from, &to, &has_to);
	*out = NULL;
	*n = 0;
	*more = false;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	size_t cap = 0;
	int rc = SHOAL_OK;
	MDB_val k = {from.len, from.b}, v;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && st_part_key_before(&k, &to, has_to);
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (max != 0 && *n == max) {
			*more = true;
			break;
		}
		if ((rc = st_part_key_push(a, out, n, &cap, &k, errmsg)) != SHOAL_OK)
			break;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* What a move's writes changed in the table's counters. */
typedef struct held_delta {
	int64_t items, bytes;
} held_delta;

/* One write of a partition move through the write path (write.c), as
 * txn->part_raw writes: new_item NULL deletes.  Adds its change of the
 * table's counters to *d. */
static int raw_write(st_txn *txn, const st_table_info *t, const st_key *k, st_value *new_item,
                     sh_arena *a, held_delta *d, char *errmsg)
{
	st_write_plan *p;
	st_write_result res;
	int rc = st_plan_raw(txn, t, k, new_item, a, &p, errmsg);
	if (rc == SHOAL_OK)
		rc = st_plan_apply(txn, p, a, &res, errmsg);
	if (rc == SHOAL_OK) {
		/* Items have a key attribute: a size of 0 is no item. */
		d->items += (res.new_size > 0) - (res.old_size > 0);
		d->bytes += (int64_t)res.new_size - (int64_t)res.old_size;
	}
	return rc;
}

/* Adds d to the held figures of r (a counted record), and stores it. */
static int held_put(st_txn *txn, st_part_rec *r, const held_delta *d, char *errmsg)
{
	if (!r->counted || (d->items == 0 && d->bytes == 0))
		return SHOAL_OK;
	r->held_items = st_add_clamped(r->held_items, d->items);
	r->held_bytes = st_add_clamped(r->held_bytes, d->bytes);
	return rec_put(txn, r, errmsg);
}

/* Deletes up to max (0: all) base items of [lo, hi]; *more: some remain.
 * *d: what the deletes took from the table's counters. */
static int delete_range(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, size_t max,
                        sh_arena *a, bool *more, held_delta *d, char *errmsg)
{
	st_table_info t;
	bool found;
	int rc = table_by_id(txn, table, a, &t, &found, errmsg);
	*more = false;
	if (rc != SHOAL_OK || !found) /* a dropped table's data went with it */
		return rc;
	st_key *keys;
	size_t n;
	rc = base_keys(txn->txn, txn->env, table, lo, hi, max, a, &keys, &n, more, errmsg);
	bool raw = txn->part_raw;
	txn->part_raw = true;
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++)
		rc = raw_write(txn, &t, &keys[i], NULL, a, d, errmsg);
	txn->part_raw = raw;
	return rc;
}

/* The FENCED range r stops counting here: it holds `range` (NULL: not
 * known, 0; its index entries: when known) from now on. */
static int hand_over(st_txn *txn, st_part_rec *r, const st_part_held *range, char *errmsg)
{
	r->counted = true;
	r->held_items = range != NULL ? range->items : 0;
	r->held_bytes = range != NULL ? range->bytes : 0;
	int rc = rec_put(txn, r, errmsg);
	return rc == SHOAL_OK ? st_part_held_ix_set(txn, r->table, r->lo, range, errmsg) : rc;
}

int st_part_handover(st_txn *txn, uint32_t table, uint64_t lo, const st_part_held *range,
                     char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_part_rec r;
	int rc = source_rec(txn, table, lo, "handover", &r, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (r.counted || r.state == ST_PART_AWAY)
		return SHOAL_OK; /* the same entry again, or after the purge */
	if (r.state != ST_PART_FENCED)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "handover: partition [%016" PRIx64 ", %016" PRIx64
		               "] of table %" PRIu32 " is %s, not FENCED",
		               r.lo, r.hi, table, st_part_state_name(r.state));
	rc = hand_over(txn, &r, range, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_purge(st_txn *txn, uint32_t table, uint64_t lo, uint32_t max_items,
                  const st_part_held *range, bool *done, char *errmsg)
{
	*done = false;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_part_rec r;
	int rc = source_rec(txn, table, lo, "purge", &r, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (r.state == ST_PART_AWAY) {
		*done = true;
		return SHOAL_OK;
	}
	if (r.state != ST_PART_FENCED)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "purge: partition [%016" PRIx64 ", %016" PRIx64 "] of table %" PRIu32
		               " is %s, not FENCED",
		               r.lo, r.hi, table, st_part_state_name(r.state));
	if (!r.counted && (rc = hand_over(txn, &r, range, errmsg)) != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	sh_arena a;
	sh_arena_init(&a);
	bool more = false;
	held_delta d = {0, 0};
	/* What the deletes take from the index counters, the record holds no
	 * more (parts.h, Counting). */
	st_part_ixsnap before = {0, NULL};
	if (max_items > 0)
		rc = st_part_ixsnap_take(txn->txn, txn->env, table, &a, &before, errmsg);
	if (rc == SHOAL_OK && table == ST_PART_GSI) {
		if (max_items > 0) {
			rc = st_part_gsi_delete(txn, r.lo, r.hi, max_items, &a, &more, errmsg);
			if (rc == SHOAL_OK)
				rc = st_part_held_ix_moved(txn, &r, &before, &a, errmsg);
		} else {
			rc = st_part_gsi_has_entries(txn->txn, txn->env, r.lo, r.hi, &more, errmsg);
		}
	} else if (rc == SHOAL_OK && max_items > 0) {
		/* more false: what was there fitted in max_items and is gone. */
		rc = delete_range(txn, table, r.lo, r.hi, max_items, &a, &more, &d, errmsg);
		if (rc == SHOAL_OK)
			rc = held_put(txn, &r, &d, errmsg);
		if (rc == SHOAL_OK)
			rc = st_part_held_ix_moved(txn, &r, &before, &a, errmsg);
	} else if (rc == SHOAL_OK) {
		st_key *keys;
		size_t n;
		rc = base_keys(txn->txn, txn->env, table, r.lo, r.hi, 1, &a, &keys, &n, &more,
		               errmsg);
		more = n > 0;
	}
	sh_arena_fini(&a);
	if (rc == SHOAL_OK && !more) {
		r.state = ST_PART_AWAY;
		r.held_items = r.held_bytes = 0; /* none left */
		rc = rec_forget(txn, table, lo, false, errmsg);
		if (rc == SHOAL_OK)
			rc = rec_put(txn, &r, errmsg);
		/* Refused for good: the pinned watermarks have no use here. */
		if (rc == SHOAL_OK && table == ST_PART_GSI)
			rc = st_part_gsi_unmark(txn, r.lo, r.hi, errmsg);
		*done = rc == SHOAL_OK;
	}
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_abort(st_txn *txn, uint32_t table, uint64_t lo, uint8_t *was, char *errmsg)
{
	*was = 0;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_part_rec r;
	bool found;
	int rc = st_part_rec_get(txn->txn, txn->env, table, lo, &r, &found, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (!found)
		return SHOAL_OK;
	if (r.state == ST_PART_AWAY)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "abort: partition [%016" PRIx64 ", %016" PRIx64 "] of table %" PRIu32
		               " has moved away already",
		               r.lo, r.hi, table);
	rc = rec_forget(txn, table, lo, true, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	*was = r.state;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Target: ingest, own                                                       */
/* ------------------------------------------------------------------------ */

typedef struct ingest_state {
	bool found, owned;
	uint64_t attempt;
	/* The table's next_index_id here at the attempt's reset: indexes with
	 * an id at or above it were created since (UINT32_MAX: not known). */
	uint32_t next_index;
} ingest_state;

static int ingest_get(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, ingest_state *s,
                      char *errmsg)
{
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_INGEST, table, lo);
	MDB_val k = {sizeof(kb), kb}, v;
	*s = (ingest_state){0};
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta ingest)", errmsg);
	if (v.mv_size != PT_ING_VAL && v.mv_size != PT_ING_V1)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt partition ingest record");
	s->found = true;
	s->attempt = st_get_be64(v.mv_data);
	s->owned = ((const uint8_t *)v.mv_data)[8] != 0;
	s->next_index =
	    v.mv_size == PT_ING_VAL ? st_get_be32((const uint8_t *)v.mv_data + 9) : UINT32_MAX;
	return SHOAL_OK;
}

static int ingest_put(st_txn *txn, uint32_t table, uint64_t lo, uint64_t attempt, bool owned,
                      uint32_t next_index, char *errmsg)
{
	uint8_t kb[PT_KEY], v[PT_ING_VAL];
	st_part_key(kb, PT_INGEST, table, lo);
	st_put_be64(v, attempt);
	v[8] = owned ? 1 : 0;
	st_put_be32(v + 9, next_index);
	return meta_put(txn, kb, sizeof(kb), v, sizeof(v), "mdb_put(meta ingest)", errmsg);
}

/* Stores [lo, hi], a piece of record r, with r's state; recount: its held
 * figures are what it holds (counted), items and index entries, else r's
 * are kept (zero, no index entries). */
static int piece_put(st_txn *txn, const st_part_rec *r, uint64_t lo, uint64_t hi, bool recount,
                     char *errmsg)
{
	st_part_rec piece = *r;
	piece.lo = lo;
	piece.hi = hi;
	if (!recount)
		return rec_put(txn, &piece, errmsg);
	st_part_held h;
	int rc = st_part_range_items(txn->txn, txn->env, r->table, lo, hi, &h, errmsg);
	if (rc == SHOAL_OK)
		rc = st_part_range_entries(txn->txn, txn->env, r->table, lo, hi, &h, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	piece.held_items = h.items;
	piece.held_bytes = h.bytes;
	rc = rec_put(txn, &piece, errmsg);
	return rc == SHOAL_OK ? st_part_held_ix_set(txn, r->table, lo, &h, errmsg) : rc;
}

/* Removes the overlap of the AWAY records c (those overlapping [lo, hi])
 * with [lo, hi]: what lies outside stays AWAY, split into the part below lo
 * (keeps its key) and the part above hi (a new key). */
static int away_carve(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, const collect_arg *c,
                      char *errmsg)
{
	int rc = SHOAL_OK;
	for (size_t i = 0; rc == SHOAL_OK && i < c->n; i++) {
		st_part_rec r = c->r[i];
		uint8_t kb[PT_KEY];
		st_part_key(kb, PT_REC, table, r.lo);
		/* A piece of a record holding items or index entries holds
		 * those of its own range (parts.h, Counting): counted again. */
		st_part_held ix;
		rc = st_part_held_ix_get(txn->txn, txn->env, table, r.lo, &ix, errmsg);
		bool recount = r.counted && (r.held_items > 0 || r.held_bytes > 0 || ix.n_ix > 0 ||
		                             !ix.ix_known);
		if (rc != SHOAL_OK)
			break;
		if (r.lo < lo)
			rc = piece_put(txn, &r, r.lo, lo - 1, recount, errmsg);
		else
			rc = meta_del(txn, kb, sizeof(kb), "mdb_del(meta partition)", errmsg);
		if (rc == SHOAL_OK && r.lo >= lo)
			rc = st_part_held_ix_drop(txn, table, r.lo, errmsg);
		if (rc == SHOAL_OK && r.hi > hi)
			rc = piece_put(txn, &r, hi + 1, r.hi, recount, errmsg);
	}
	return rc;
}

/* Records of [lo, hi] that are not AWAY: SHOAL_E_IN_USE (what: the
 * operation, for the message); else c holds the AWAY ones. */
static int only_away(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, const char *what,
                     collect_arg *c, char *errmsg)
{
	c->n = 0;
	int rc = walk_overlaps(txn->txn, txn->env, table, lo, hi, collect_fn, c, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (size_t i = 0; i < c->n; i++)
		if (c->r[i].state != ST_PART_AWAY)
			return sh_errf(errmsg, SHOAL_E_IN_USE,
			               "%s: partition [%016" PRIx64 ", %016" PRIx64
			               "] of table %" PRIu32 " is %s here",
			               what, c->r[i].lo, c->r[i].hi, table,
			               st_part_state_name(c->r[i].state));
	return SHOAL_OK;
}

/* The GSIs of table that may lack the items of a range becoming this
 * group's: their backfill here passed over the range while it was AWAY
 * (index_meta.c: items not served here are not indexed from here), and the
 * source did not index them if the index was created after the move began
 * -- that is, after the map's cutover, since group 0 refuses one while the
 * move is under way (st_cluster_map_moving).  Such an index has an id at or
 * above next_index, the table's next id here at this attempt's reset (an
 * index known here then was ACTIVE before the move began: moves wait for
 * backfills, so the source indexed the range), or is still being created.
 * Its backfill reads the table again from its start, the range included --
 * also for an index already ACTIVE (activated before this own: its entries
 * for the range appear once the backfill has passed them).  Upserts of
 * current items: reading again is harmless. */
static int backfills_again(st_txn *txn, uint32_t table, uint32_t next_index, char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	bool found;
	int rc = table_by_id(txn, table, &a, &t, &found, errmsg);
	for (uint32_t k = 0; rc == SHOAL_OK && found && k < t.def.n_indexes; k++) {
		const st_index_def *x = &t.def.indexes[k];
		if (x->local || x->status == ST_INDEX_DELETING ||
		    (x->status != ST_INDEX_CREATING && x->id < next_index))
			continue;
		st_ix_state s;
		rc = st_ix_state_get(txn->txn, txn->env, table, x->id, &s, errmsg);
		if (rc == SHOAL_OK && (s.backfill_done || s.cursor_len > 0)) {
			s.backfill_done = false;
			s.cursor_len = 0;
			rc = st_ix_state_put(txn, table, x->id, &s, errmsg);
		}
	}
	sh_arena_fini(&a);
	return rc;
}

int st_part_own(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint64_t attempt,
                bool *owned_now, char *errmsg)
{
	*owned_now = false;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	ingest_state s;
	int rc = ingest_get(txn->txn, txn->env, table, lo, &s, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	if (!s.found || s.attempt != attempt)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "own: the latest ingest of table %" PRIu32 " at %016" PRIx64
		               " is %s%" PRIu64 ", not attempt %" PRIu64,
		               table, lo, s.found ? "attempt " : "none ", s.attempt, attempt);
	if (s.owned)
		return SHOAL_OK; /* the same entry again */
	if (lo > hi)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "partition range [%016" PRIx64 ", %016" PRIx64 "] is empty", lo, hi);
	collect_arg c;
	rc = only_away(txn, table, lo, hi, "own", &c, errmsg);
	if (rc != SHOAL_OK)
		return rc == SHOAL_E_IN_USE ? rc : st_part_fail(txn, rc, errmsg);
	rc = away_carve(txn, table, lo, hi, &c, errmsg);
	if (rc == SHOAL_OK)
		rc = ingest_put(txn, table, lo, attempt, true, s.next_index, errmsg);
	if (rc == SHOAL_OK)
		rc = backfills_again(txn, table, s.next_index, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);
	*owned_now = true;
	return SHOAL_OK;
}

/* Checks one key (and item) of an ingest chunk; *item is the decoded item
 * (NULL: a delete).  Client errors: VALIDATION. */
static int ingest_check(const st_table_info *t, uint64_t lo, uint64_t hi, size_t i,
                        const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                        sh_arena *a, st_value **item, char *errmsg)
{
	*item = NULL;
	if (klen < ST_KEY_HEADER || klen > ST_KEY_MAX || st_get_be32(key) != t->def.id ||
	    st_get_be16(key + 4) != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ingest: key %zu is not a base key of table %" PRIu32, i, t->def.id);
	uint64_t h = st_get_be64(key + 6);
	if (h < lo || h > hi)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ingest: key %zu has hash %016" PRIx64 " outside [%016" PRIx64
		               ", %016" PRIx64 "]",
		               i, h, lo, hi);
	if (vlen == 0)
		return SHOAL_OK;
	st_value *v = sh_arena_alloc(a, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "ingest: out of memory");
	char why[SH_ERRMSG_SIZE];
	int rc = st_codec_decode(a, val, vlen, v, why);
	if (rc == SHOAL_E_NOMEM)
		return sh_errf(errmsg, rc, "%s", why);
	if (rc != SHOAL_OK || v->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "ingest: item %zu: %s", i,
		               rc != SHOAL_OK ? why : "not a map");
	const st_value *pk, *sk;
	rc = st_key_check(&t->def.key, v, ST_KEYCHECK_ITEM, &pk, &sk, why);
	st_key k;
	if (rc == SHOAL_OK)
		st_key_item(&k, t->def.id, 0, pk, sk);
	if (rc != SHOAL_OK || k.len != klen || memcmp(k.b, key, klen) != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ingest: item %zu does not carry key %zu%s%s", i, i,
		               rc != SHOAL_OK ? ": " : "", rc != SHOAL_OK ? why : "");
	*item = v;
	return SHOAL_OK;
}

/* The latest ingest's attempt check of a chunk that is not a reset: stale
 * (WRONG_EPOCH) unless of the recorded, not yet owned, attempt; a reset of
 * an owned range: IN_USE. */
static int ingest_current(const ingest_state *s, uint32_t table, uint64_t lo, uint64_t attempt,
                          bool reset, char *errmsg)
{
	if (!reset && (!s->found || s->attempt != attempt || s->owned))
		return sh_errf(errmsg, SHOAL_E_WRONG_EPOCH,
		               "ingest: stale chunk of attempt %" PRIu64 " for table %" PRIu32
		               " at %016" PRIx64 " (latest: %s%" PRIu64 ")",
		               attempt, table, lo,
		               !s->found  ? "none "
		               : s->owned ? "owned "
		                          : "",
		               s->attempt);
	/* Once owned, the range is served here: no attempt may reset it
	 * (a late one of a source's earlier leader would wipe served data).
	 * It can come in again only after it moved out (st_part_out drops
	 * the record). */
	if (reset && s->found && s->owned)
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "ingest: table %" PRIu32 " at %016" PRIx64
		               " is served here already (attempt %" PRIu64 " was owned)",
		               table, lo, s->attempt);
	return SHOAL_OK;
}

/* The chunk just written (index counters `before` it) is held by the
 * range's AWAY record at lo, as its base items are (held_put did); *held
 * (may be NULL): what that record holds now. */
static int ingest_held(st_txn *txn, uint32_t table, uint64_t lo, const held_delta *d,
                       const st_part_ixsnap *before, sh_arena *a, st_part_held *held, char *errmsg)
{
	first_arg f = {.states = 1u << ST_PART_AWAY};
	int rc = walk_overlaps(txn->txn, txn->env, table, lo, lo, first_fn, &f, errmsg);
	if (rc != SHOAL_OK || !f.found)
		return rc;
	rc = held_put(txn, &f.r, d, errmsg);
	if (rc == SHOAL_OK)
		rc = st_part_held_ix_moved(txn, &f.r, before, a, errmsg);
	if (rc == SHOAL_OK && f.r.counted && held != NULL) {
		held->items = f.r.held_items;
		held->bytes = f.r.held_bytes;
		rc = st_part_held_ix_get(txn->txn, txn->env, table, f.r.lo, held, errmsg);
	}
	return rc;
}

/* st_part_ingest of the GSI space: entries, held by the range's record as
 * index entries (no items). */
static int gsi_ingest(st_txn *txn, uint64_t lo, uint64_t hi, uint64_t attempt, bool reset, size_t n,
                      const uint8_t *const *keys, const size_t *klens, const uint8_t *const *vals,
                      const size_t *vlens, sh_arena *a, st_part_held *held, char *errmsg)
{
	ingest_state s;
	int rc = ingest_get(txn->txn, txn->env, ST_PART_GSI, lo, &s, errmsg);
	if (rc == SHOAL_OK)
		rc = ingest_current(&s, ST_PART_GSI, lo, attempt, reset, errmsg);
	collect_arg c;
	if (rc == SHOAL_OK && reset)
		rc = only_away(txn, ST_PART_GSI, lo, hi, "ingest", &c, errmsg);
	st_delta *d = NULL;
	if (rc == SHOAL_OK)
		rc = st_part_gsi_check(lo, hi, n, keys, klens, vals, vlens, a, &d, errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg); /* nothing written */
	if (reset) {
		/* Refused here until st_part_own, as a table's range: deltas
		 * for it wait at their sources meanwhile. */
		rc = away_carve(txn, ST_PART_GSI, lo, hi, &c, errmsg);
		if (rc == SHOAL_OK) {
			st_part_rec r = {.table = ST_PART_GSI,
			                 .lo = lo,
			                 .hi = hi,
			                 .state = ST_PART_AWAY,
			                 .counted = true};
			rc = rec_put(txn, &r, errmsg);
		}
		bool more;
		if (rc == SHOAL_OK)
			rc = st_part_gsi_delete(txn, lo, hi, 0, a, &more, errmsg);
		if (rc == SHOAL_OK)
			rc = ingest_put(txn, ST_PART_GSI, lo, attempt, false, 0, errmsg);
	}
	st_part_ixsnap before;
	if (rc == SHOAL_OK)
		rc = st_part_ixsnap_take(txn->txn, txn->env, ST_PART_GSI, a, &before, errmsg);
	if (rc == SHOAL_OK)
		rc = st_part_gsi_write(txn, lo, hi, d, n, a, errmsg);
	held_delta none = {0, 0};
	if (rc == SHOAL_OK)
		rc = ingest_held(txn, ST_PART_GSI, lo, &none, &before, a, held, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_ingest(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint64_t attempt,
                   bool reset, size_t n, const uint8_t *const *keys, const size_t *klens,
                   const uint8_t *const *vals, const size_t *vlens, sh_arena *a, st_part_held *held,
                   char *errmsg)
{
	if (held != NULL) {
		held->items = held->bytes = 0;
		held->ix_known = false;
		held->n_ix = 0;
	}
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	if (lo > hi)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "partition range [%016" PRIx64 ", %016" PRIx64 "] is empty", lo, hi);
	if (table == ST_PART_GSI)
		return gsi_ingest(txn, lo, hi, attempt, reset, n, keys, klens, vals, vlens, a, held,
		                  errmsg);
	st_table_info t;
	bool found;
	int rc = table_by_id(txn, table, a, &t, &found, errmsg);
	if (rc == SHOAL_OK && !found)
		rc = sh_errf(errmsg, SHOAL_E_NOT_FOUND, "ingest: no table %" PRIu32, table);
	ingest_state s;
	if (rc == SHOAL_OK)
		rc = ingest_get(txn->txn, txn->env, table, lo, &s, errmsg);
	if (rc == SHOAL_OK)
		rc = ingest_current(&s, table, lo, attempt, reset, errmsg);
	collect_arg c;
	if (rc == SHOAL_OK && reset)
		rc = only_away(txn, table, lo, hi, "ingest", &c, errmsg);
	/* Every key and item checked before anything is written. */
	st_value **items = NULL;
	if (rc == SHOAL_OK && n > 0) {
		items = sh_arena_calloc(a, n, sizeof(*items));
		if (items == NULL)
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "ingest: out of memory");
	}
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++)
		rc = ingest_check(&t, lo, hi, i, keys[i], klens[i], vals != NULL ? vals[i] : NULL,
		                  vlens[i], a, &items[i], errmsg);
	if (rc != SHOAL_OK)
		return st_part_fail(txn, rc, errmsg);

	bool more;
	if (reset) {
		/* Until st_part_own the range is refused here: a router with a
		 * map from before some earlier move must not read or write a
		 * half-copied range.  One AWAY record over [lo, hi]. */
		rc = away_carve(txn, table, lo, hi, &c, errmsg);
		/* Not counted here until owned: it holds what the chunks
		 * store (parts.h, Counting).  What the reset deletes was held
		 * by the records carved, or counted here. */
		if (rc == SHOAL_OK) {
			st_part_rec r = {.table = table,
			                 .lo = lo,
			                 .hi = hi,
			                 .state = ST_PART_AWAY,
			                 .counted = true};
			rc = rec_put(txn, &r, errmsg);
		}
		held_delta gone = {0, 0};
		if (rc == SHOAL_OK)
			rc = delete_range(txn, table, lo, hi, 0, a, &more, &gone, errmsg);
		if (rc == SHOAL_OK)
			rc =
			    ingest_put(txn, table, lo, attempt, false, t.def.next_index_id, errmsg);
	}
	st_part_ixsnap before;
	if (rc == SHOAL_OK)
		rc = st_part_ixsnap_take(txn->txn, txn->env, table, a, &before, errmsg);
	bool raw = txn->part_raw;
	txn->part_raw = true;
	held_delta d = {0, 0};
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++) {
		st_key k;
		k.len = (uint16_t)klens[i];
		memcpy(k.b, keys[i], klens[i]);
		rc = raw_write(txn, &t, &k, items[i], a, &d, errmsg);
	}
	txn->part_raw = raw;
	/* The chunk's items and LSI entries are held by the range's AWAY
	 * record (the reset's). */
	if (rc == SHOAL_OK)
		rc = ingest_held(txn, table, lo, &d, &before, a, held, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}
