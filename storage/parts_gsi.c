/*
 * parts_gsi.c -- partition moves of the GSI space (contract: parts.h, "The
 * GSI space"): the scan of a hash range's GSI entries, their copy, ingest
 * and purge, the pinned watermarks ("marks") and what st_index_apply needs
 * of them.
 *
 * Layout (meta DBI, prefix 0x05 as parts.h; integers big-endian):
 *
 *   0x05 'G' | 0 (4) | lo (8)               -> hi (8): a mark, hashes
 *                                              [lo, hi] of the GSI space
 *                                              deduplicated by their own
 *                                              watermarks
 *   0x05 'V' | 0 (4) | lo (8) | source (4)  -> seq (8): the mark's
 *                                              watermark of one source
 *                                              group (absent: 0)
 *
 * Marks never overlap.  Cutting one in two (mark_split) gives both halves
 * its watermarks: a watermark pinned for a range holds for any part of it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "codec.h"
#include "index.h"
#include "parts_int.h"

#define PT_MARK    'G'
#define PT_MARK_WM 'V'
#define PT_WM_KEY  (PT_KEY + 4) /* ... | source (4) */

static void wm_key(uint8_t k[PT_WM_KEY], uint64_t lo, uint32_t source)
{
	st_part_key(k, PT_MARK_WM, ST_PART_GSI, lo);
	st_put_be32(k + PT_KEY, source);
}

/* ------------------------------------------------------------------------ */
/* The scan of a range's GSI entries                                         */
/* ------------------------------------------------------------------------ */

int st_part_gsi_scan_init(MDB_txn *txn, st_env *env, sh_arena *a, uint64_t lo, uint64_t hi,
                          st_part_gsi_scan *s, char *errmsg)
{
	*s = (st_part_gsi_scan){.lo = lo, .hi = hi, .next_table = 1};
	int rc = st_ix_tables(txn, env, a, &s->tables, &s->n_tables, errmsg);
	if (rc == SHOAL_OK)
		rc = st_catalog_next_table_id(txn, env, &s->next_table, errmsg);
	return rc;
}

/* st_part_gsi_wanted without the cache. */
static bool wanted(const st_part_gsi_scan *s, uint32_t table, uint16_t index)
{
	if (index == 0)
		return false;
	const st_table_info *t = NULL;
	for (uint32_t i = 0; i < s->n_tables && t == NULL; i++)
		if (s->tables[i].def.id == table)
			t = &s->tables[i];
	for (uint32_t i = 0; t != NULL && i < t->def.n_indexes; i++)
		if (t->def.indexes[i].id == index && t->def.indexes[i].local)
			return false;
	return st_ix_index_wanted(t, table, s->next_table, index);
}

bool st_part_gsi_wanted(st_part_gsi_scan *s, uint32_t table, uint16_t index)
{
	if (!s->cached || s->cached_table != table || s->cached_index != index) {
		s->cached = true;
		s->cached_table = table;
		s->cached_index = index;
		s->cached_wanted = wanted(s, table, index);
	}
	return s->cached_wanted;
}

/* Seeks the first key at or after table | index | hash (index 0x10000:
 * the next table's first). */
static int seek(MDB_cursor *c, uint32_t table, uint32_t index, uint64_t hash, MDB_val *k,
                MDB_val *v, bool *end)
{
	uint8_t b[14]; /* read by mdb_cursor_get only, which points k at its own copy */
	if (index > UINT16_MAX) {
		if (table == UINT32_MAX) {
			*end = true;
			return MDB_NOTFOUND;
		}
		table++;
		index = 0;
		hash = 0;
	}
	st_put_be32(b, table);
	st_put_be16(b + 4, (uint16_t)index);
	st_put_be64(b + 6, hash);
	*k = (MDB_val){sizeof(b), b};
	return mdb_cursor_get(c, k, v, MDB_SET_RANGE);
}

/* From the cursor's position (k, v; mrc the positioning's result), moves
 * on to the first key of the scan at or after it; returns 0 there, or
 * MDB_NOTFOUND / an LMDB error. */
static int settle(st_part_gsi_scan *s, MDB_cursor *c, MDB_val *k, MDB_val *v, int mrc)
{
	bool end = false;
	while (mrc == 0) {
		if (k->mv_size < 14) {
			mrc = mdb_cursor_get(c, k, v, MDB_NEXT);
			continue;
		}
		const uint8_t *b = k->mv_data;
		uint32_t table = st_get_be32(b);
		uint16_t index = st_get_be16(b + 4);
		uint64_t h = st_get_be64(b + 6);
		if (!st_part_gsi_wanted(s, table, index) || h > s->hi)
			mrc = seek(c, table, (uint32_t)index + 1, s->lo, k, v, &end);
		else if (h < s->lo)
			mrc = seek(c, table, index, s->lo, k, v, &end);
		else
			return 0;
		if (end)
			return MDB_NOTFOUND;
	}
	return mrc;
}

int st_part_gsi_each(MDB_txn *txn, st_env *env, sh_arena *a, uint64_t lo, uint64_t hi,
                     const uint8_t *after, size_t after_len, st_part_gsi_fn fn, void *arg,
                     char *errmsg)
{
	st_part_gsi_scan s;
	int rc = st_part_gsi_scan_init(txn, env, a, lo, hi, &s, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	MDB_val k, v;
	if (after_len > 0) {
		/* Resume after that key (it may be gone since). */
		k = (MDB_val){after_len, (void *)after};
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == after_len && memcmp(k.mv_data, after, after_len) == 0)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	} else {
		mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	}
	bool stop = false;
	mrc = settle(&s, c, &k, &v, mrc);
	while (mrc == 0) {
		rc = fn(arg, &k, &v, &stop, errmsg);
		if (rc != SHOAL_OK || stop)
			break;
		mrc = settle(&s, c, &k, &v, mdb_cursor_get(c, &k, &v, MDB_NEXT));
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* gsi_keys' scan: the keys into an array. */
typedef struct keys_arg {
	sh_arena *a;
	st_key **out;
	size_t *n, cap, max;
	bool *more;
} keys_arg;

static int keys_fn(void *arg, const MDB_val *k, const MDB_val *v, bool *stop, char *errmsg)
{
	(void)v;
	keys_arg *x = arg;
	if (x->max != 0 && *x->n == x->max) {
		*x->more = true;
		*stop = true;
		return SHOAL_OK;
	}
	return st_part_key_push(x->a, x->out, x->n, &x->cap, k, errmsg);
}

/* Up to max (0: all) GSI entry keys of [lo, hi], copied into a; *more:
 * some remain past them. */
static int gsi_keys(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, size_t max, sh_arena *a,
                    st_key **out, size_t *n, bool *more, char *errmsg)
{
	*out = NULL;
	*n = 0;
	*more = false;
	keys_arg x = {a, out, n, 0, max, more};
	return st_part_gsi_each(txn, env, a, lo, hi, NULL, 0, keys_fn, &x, errmsg);
}

int st_part_gsi_delete(st_txn *txn, uint64_t lo, uint64_t hi, size_t max, sh_arena *a, bool *more,
                       char *errmsg)
{
	st_key *keys;
	size_t n;
	int rc = gsi_keys(txn->txn, txn->env, lo, hi, max, a, &keys, &n, more, errmsg);
	st_ix_count_acc *acc = NULL;
	uint32_t nacc = 0;
	if (rc == SHOAL_OK && n > 0 && (acc = sh_arena_calloc(a, n, sizeof(*acc))) == NULL)
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "GSI range delete: out of memory");
	sh_arena tmp;
	sh_arena_init(&tmp);
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++) {
		st_delta d = {.del = true, .key = keys[i].b, .key_len = keys[i].len};
		st_ix_count_acc *slot = st_ix_count_slot(acc, &nacc, st_get_be32(keys[i].b),
		                                         st_get_be16(keys[i].b + 4));
		rc = st_ix_entry_apply(txn, &d, &tmp, slot, errmsg);
	}
	sh_arena_fini(&tmp);
	if (rc == SHOAL_OK)
		rc = st_ix_count_flush(txn, acc, nacc, errmsg);
	return rc;
}

int st_part_gsi_has_entries(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, bool *any,
                            char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_key *keys;
	size_t n;
	bool more;
	int rc = gsi_keys(txn, env, lo, hi, 1, &a, &keys, &n, &more, errmsg);
	*any = rc == SHOAL_OK && n > 0;
	sh_arena_fini(&a);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Ingest (target)                                                           */
/* ------------------------------------------------------------------------ */

int st_part_gsi_check(uint64_t lo, uint64_t hi, size_t n, const uint8_t *const *keys,
                      const size_t *klens, const uint8_t *const *vals, const size_t *vlens,
                      sh_arena *a, st_delta **out, char *errmsg)
{
	*out = NULL;
	st_delta *d = NULL;
	if (n > 0 && (d = sh_arena_calloc(a, n, sizeof(*d))) == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "ingest: out of memory");
	sh_arena tmp;
	sh_arena_init(&tmp);
	int rc = SHOAL_OK;
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++) {
		const uint8_t *key = keys[i];
		size_t klen = klens[i], vlen = vlens[i];
		if (key == NULL || klen < ST_KEY_HEADER + 16 || klen > ST_KEY_MAX ||
		    st_get_be32(key) == 0 || st_get_be16(key + 4) == 0) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "ingest: key %zu is not a GSI entry key", i);
			break;
		}
		uint64_t h = st_get_be64(key + 6);
		if (h < lo || h > hi) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "ingest: key %zu has hash %016" PRIx64 " outside [%016" PRIx64
			             ", %016" PRIx64 "]",
			             i, h, lo, hi);
			break;
		}
		if (vlen > 0) {
			st_value item;
			char why[SH_ERRMSG_SIZE];
			sh_arena_reset(&tmp);
			int drc = vals[i] != NULL ? st_codec_decode(&tmp, vals[i], vlen, &item, why)
			                          : SHOAL_E_SERIALIZATION;
			if (drc == SHOAL_E_NOMEM) {
				rc = sh_errf(errmsg, drc, "%s", why);
				break;
			}
			if (drc != SHOAL_OK || item.type != ST_M) {
				rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "ingest: entry %zu: %s", i,
				             drc == SHOAL_E_SERIALIZATION && vals[i] == NULL
				                 ? "no value"
				             : drc != SHOAL_OK ? why
				                               : "not a map");
				break;
			}
		}
		d[i] = (st_delta){.hash = h,
		                  .table_id = st_get_be32(key),
		                  .index_id = st_get_be16(key + 4),
		                  .del = vlen == 0,
		                  .key = key,
		                  .key_len = klen,
		                  .val = vlen > 0 ? vals[i] : NULL,
		                  .val_len = vlen};
	}
	sh_arena_fini(&tmp);
	if (rc == SHOAL_OK)
		*out = d;
	return rc;
}

int st_part_gsi_write(st_txn *txn, uint64_t lo, uint64_t hi, const st_delta *d, size_t n,
                      sh_arena *a, char *errmsg)
{
	st_part_gsi_scan s;
	int rc = st_part_gsi_scan_init(txn->txn, txn->env, a, lo, hi, &s, errmsg);
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += 2 * ((uint64_t)d[i].key_len + d[i].val_len) + ST_RESERVE_PER_KEY;
	if (rc == SHOAL_OK)
		rc = st_txn_reserve(txn, bytes, errmsg);
	st_ix_count_acc *acc = NULL;
	uint32_t nacc = 0;
	if (rc == SHOAL_OK && n > 0 && (acc = sh_arena_calloc(a, n, sizeof(*acc))) == NULL)
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "ingest: out of memory");
	sh_arena tmp;
	sh_arena_init(&tmp);
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++) {
		/* An index deleted here meanwhile keeps nothing (as st_index_apply). */
		if (!st_part_gsi_wanted(&s, d[i].table_id, d[i].index_id))
			continue;
		rc = st_ix_entry_apply(txn, &d[i], &tmp,
		                       st_ix_count_slot(acc, &nacc, d[i].table_id, d[i].index_id),
		                       errmsg);
	}
	sh_arena_fini(&tmp);
	if (rc == SHOAL_OK)
		rc = st_ix_count_flush(txn, acc, nacc, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Marks                                                                     */
/* ------------------------------------------------------------------------ */

static int meta_put(st_txn *txn, const uint8_t *key, size_t klen, const void *val, size_t vlen,
                    char *errmsg)
{
	int rc = st_txn_reserve(txn, klen + vlen + ST_RESERVE_PER_KEY, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_put(meta mark)", errmsg);
}

static int mark_put(st_txn *txn, uint64_t lo, uint64_t hi, char *errmsg)
{
	uint8_t k[PT_KEY], v[8];
	st_part_key(k, PT_MARK, ST_PART_GSI, lo);
	st_put_be64(v, hi);
	/* Before the write: a reader that sees the mark sees the flag. */
	atomic_store_explicit(&txn->env->parts_any, true, memory_order_release);
	return meta_put(txn, k, sizeof(k), v, sizeof(v), errmsg);
}

static int wm_put(st_txn *txn, uint64_t lo, uint32_t source, uint64_t seq, char *errmsg)
{
	uint8_t k[PT_WM_KEY];
	wm_key(k, lo, source);
	return st_ix_meta_put_u64(txn, k, sizeof(k), seq, errmsg);
}

/* The mark holding hash, if *found (a read of txn). */
static int mark_at(MDB_txn *txn, st_env *env, uint64_t hash, uint64_t *lo, uint64_t *hi,
                   bool *found, char *errmsg)
{
	*found = false;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	uint8_t kb[PT_KEY];
	/* The last mark starting at or before hash: the first one after it,
	 * then one back. */
	bool top = hash == UINT64_MAX;
	st_part_key(kb, PT_MARK, ST_PART_GSI, top ? hash : hash + 1);
	MDB_val k = {sizeof(kb), kb}, v;
	mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (top && mrc == 0 && k.mv_size == PT_KEY && memcmp(k.mv_data, kb, PT_KEY) == 0)
		; /* a mark starting at 2^64-1 itself */
	else if (mrc == 0)
		mrc = mdb_cursor_get(c, &k, &v, MDB_PREV);
	else if (mrc == MDB_NOTFOUND)
		mrc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	int rc = SHOAL_OK;
	if (mrc == 0) {
		const uint8_t *b = k.mv_data;
		if (k.mv_size == PT_KEY && b[0] == PT_META && b[1] == PT_MARK &&
		    st_get_be32(b + 2) == ST_PART_GSI) {
			if (v.mv_size != 8) {
				rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt GSI mark");
			} else {
				*lo = st_get_be64(b + 6);
				*hi = st_get_be64(v.mv_data);
				*found = *lo <= hash && hash <= *hi;
			}
		}
	} else if (mrc != MDB_NOTFOUND) {
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta mark)", errmsg);
	}
	mdb_cursor_close(c);
	return rc;
}

/* The (source, seq) pairs of the meta keys prefix | source (4) -> seq (8)
 * into arrays from a: a mark's watermarks, or the group's own. */
static int seq_list(MDB_txn *txn, st_env *env, const uint8_t *prefix, size_t plen, sh_arena *a,
                    uint32_t **sources, uint64_t **seqs, uint32_t *n, char *errmsg)
{
	*sources = NULL;
	*seqs = NULL;
	*n = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	MDB_val k = {plen, (void *)prefix}, v;
	uint32_t cap = 0;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size == plen + 4 && memcmp(k.mv_data, prefix, plen) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (v.mv_size != 8) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt watermark in the meta DBI");
			break;
		}
		if (*n == cap) {
			uint32_t ncap = cap == 0 ? 8 : 2 * cap;
			uint32_t *s = sh_arena_alloc(a, ncap * sizeof(*s));
			uint64_t *q = sh_arena_alloc(a, ncap * sizeof(*q));
			if (s == NULL || q == NULL) {
				rc = sh_errf(errmsg, SHOAL_E_NOMEM, "GSI marks: out of memory");
				break;
			}
			if (*n > 0) {
				memcpy(s, *sources, *n * sizeof(*s));
				memcpy(q, *seqs, *n * sizeof(*q));
			}
			*sources = s, *seqs = q, cap = ncap;
		}
		(*sources)[*n] = st_get_be32((const uint8_t *)k.mv_data + plen);
		(*seqs)[*n] = st_get_be64(v.mv_data);
		(*n)++;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta watermarks)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* Every watermark of the mark at lo. */
static int wm_list(MDB_txn *txn, st_env *env, uint64_t lo, sh_arena *a, uint32_t **sources,
                   uint64_t **seqs, uint32_t *n, char *errmsg)
{
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_MARK_WM, ST_PART_GSI, lo);
	return seq_list(txn, env, kb, sizeof(kb), a, sources, seqs, n, errmsg);
}

/* Deletes the mark at lo and its watermarks. */
static int mark_del(st_txn *txn, uint64_t lo, char *errmsg)
{
	uint8_t k[PT_KEY];
	st_part_key(k, PT_MARK_WM, ST_PART_GSI, lo);
	int rc = st_delete_prefix(txn, txn->env->meta, k, sizeof(k), "delete(meta mark)", errmsg);
	st_part_key(k, PT_MARK, ST_PART_GSI, lo);
	MDB_val key = {sizeof(k), k};
	int mrc = rc == SHOAL_OK ? mdb_del(txn->txn, txn->env->meta, &key, NULL) : 0;
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_del(meta mark)", errmsg);
	return rc;
}

/* Writes mark [lo, hi] with these watermarks (zeros are not stored). */
static int mark_write(st_txn *txn, uint64_t lo, uint64_t hi, const uint32_t *sources,
                      const uint64_t *seqs, uint32_t n, char *errmsg)
{
	int rc = mark_put(txn, lo, hi, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++)
		if (seqs[i] > 0)
			rc = wm_put(txn, lo, sources[i], seqs[i], errmsg);
	return rc;
}

/* A mark holding b and starting before it becomes two: [lo, b-1] and
 * [b, hi], each with its watermarks. */
static int mark_split(st_txn *txn, uint64_t b, sh_arena *a, char *errmsg)
{
	uint64_t lo, hi;
	bool found;
	int rc = mark_at(txn->txn, txn->env, b, &lo, &hi, &found, errmsg);
	if (rc != SHOAL_OK || !found || lo == b)
		return rc;
	uint32_t *src, n;
	uint64_t *seq;
	rc = wm_list(txn->txn, txn->env, lo, a, &src, &seq, &n, errmsg);
	if (rc == SHOAL_OK)
		rc = mark_put(txn, lo, b - 1, errmsg);
	if (rc == SHOAL_OK)
		rc = mark_write(txn, b, hi, src, seq, n, errmsg);
	return rc;
}

/* The marks starting in [lo, hi] (after mark_split at lo and hi + 1, the
 * marks inside the range), lo order, into arrays from a. */
static int marks_in(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, sh_arena *a,
                    st_part_mark **out, size_t *n, bool with_wms, char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	uint8_t kb[PT_KEY];
	st_part_key(kb, PT_MARK, ST_PART_GSI, lo);
	MDB_val k = {sizeof(kb), kb}, v;
	size_t cap = 0;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size == PT_KEY && memcmp(k.mv_data, kb, 6) == 0 &&
	     st_get_be64((const uint8_t *)k.mv_data + 6) <= hi;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (v.mv_size != 8) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt GSI mark");
			break;
		}
		if (*n == cap) {
			size_t ncap = cap == 0 ? 8 : 2 * cap;
			st_part_mark *g = sh_arena_alloc(a, ncap * sizeof(*g));
			if (g == NULL) {
				rc = sh_errf(errmsg, SHOAL_E_NOMEM, "GSI marks: out of memory");
				break;
			}
			if (*n > 0)
				memcpy(g, *out, *n * sizeof(*g));
			*out = g, cap = ncap;
		}
		st_part_mark *m = &(*out)[(*n)++];
		*m = (st_part_mark){.lo = st_get_be64((const uint8_t *)k.mv_data + 6),
		                    .hi = st_get_be64(v.mv_data)};
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta mark)", errmsg);
	mdb_cursor_close(c);
	for (size_t i = 0; rc == SHOAL_OK && with_wms && i < *n; i++)
		rc = wm_list(txn, env, (*out)[i].lo, a, &(*out)[i].sources, &(*out)[i].seqs,
		             &(*out)[i].n, errmsg);
	return rc;
}

/* Cuts marks at lo and hi + 1, so that none straddles [lo, hi]'s edges. */
static int marks_cut(st_txn *txn, uint64_t lo, uint64_t hi, sh_arena *a, char *errmsg)
{
	int rc = mark_split(txn, lo, a, errmsg);
	if (rc == SHOAL_OK && hi != UINT64_MAX)
		rc = mark_split(txn, hi + 1, a, errmsg);
	return rc;
}

/* The group's own watermarks (0x01 'A' | source -> seq). */
static int applied_list(MDB_txn *txn, st_env *env, sh_arena *a, uint32_t **sources, uint64_t **seqs,
                        uint32_t *n, char *errmsg)
{
	const uint8_t prefix[2] = {IX_META, IX_META_APPLIED};
	return seq_list(txn, env, prefix, sizeof(prefix), a, sources, seqs, n, errmsg);
}

int st_part_gsi_pin(st_txn *txn, uint64_t lo, uint64_t hi, char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_part_mark *m;
	size_t n;
	uint32_t *src, ns;
	uint64_t *seq;
	int rc = marks_cut(txn, lo, hi, &a, errmsg);
	if (rc == SHOAL_OK)
		rc = marks_in(txn->txn, txn->env, lo, hi, &a, &m, &n, false, errmsg);
	if (rc == SHOAL_OK)
		rc = applied_list(txn->txn, txn->env, &a, &src, &seq, &ns, errmsg);
	/* The gaps between the marks inside get the group's own watermarks:
	 * every delta of theirs applied here is at or below them. */
	uint64_t at = lo;
	bool done = false;
	for (size_t i = 0; rc == SHOAL_OK && i <= n && !done; i++) {
		uint64_t end = i < n ? m[i].lo : hi; /* a gap is [at, end - 1], or [at, hi] */
		if (i < n && end > at)
			rc = mark_write(txn, at, end - 1, src, seq, ns, errmsg);
		else if (i == n)
			rc = mark_write(txn, at, end, src, seq, ns, errmsg);
		if (i < n) {
			if (m[i].hi == hi)
				done = true;
			else
				at = m[i].hi + 1;
		}
	}
	sh_arena_fini(&a);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_gsi_unmark(st_txn *txn, uint64_t lo, uint64_t hi, char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_part_mark *m;
	size_t n;
	int rc = marks_cut(txn, lo, hi, &a, errmsg);
	if (rc == SHOAL_OK)
		rc = marks_in(txn->txn, txn->env, lo, hi, &a, &m, &n, false, errmsg);
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++)
		rc = mark_del(txn, m[i].lo, errmsg);
	sh_arena_fini(&a);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_gsi_marks_check(uint64_t lo, uint64_t hi, const st_part_mark *m, size_t n, char *errmsg)
{
	/* The marks must tile [lo, hi] in order: nothing less is a copy of
	 * a fenced range's. */
	uint64_t at = lo;
	bool full = false;
	for (size_t i = 0; i < n; i++) {
		if (full || m[i].lo != at || m[i].hi < m[i].lo || m[i].hi > hi)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "GSI marks: mark %zu [%016" PRIx64 ", %016" PRIx64
			               "] does not continue the tiling of [%016" PRIx64
			               ", %016" PRIx64 "] at %016" PRIx64,
			               i, m[i].lo, m[i].hi, lo, hi, at);
		if (m[i].hi == hi)
			full = true;
		else
			at = m[i].hi + 1;
	}
	if (!full)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "GSI marks: %zu marks do not cover [%016" PRIx64 ", %016" PRIx64 "]",
		               n, lo, hi);
	return SHOAL_OK;
}

int st_part_gsi_mark_set(st_txn *txn, uint64_t lo, uint64_t hi, const st_part_mark *m, size_t n,
                         char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_part_gsi_marks_check(lo, hi, m, n, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_part_gsi_unmark(txn, lo, hi, errmsg);
	for (size_t i = 0; rc == SHOAL_OK && i < n; i++)
		rc = mark_write(txn, m[i].lo, m[i].hi, m[i].sources, m[i].seqs, m[i].n, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : st_part_fail(txn, rc, errmsg);
}

int st_part_gsi_marks(st_env *env, uint64_t lo, uint64_t hi, sh_arena *a, st_part_mark **out,
                      size_t *n, char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* A mark straddling lo is read whole (its watermarks hold for the
	 * part inside), and given [lo, ...]. */
	uint64_t mlo, mhi;
	bool found;
	rc = mark_at(txn, env, lo, &mlo, &mhi, &found, errmsg);
	st_part_mark *in = NULL;
	size_t nin = 0;
	if (rc == SHOAL_OK)
		rc = marks_in(txn, env, found ? mlo : lo, hi, a, &in, &nin, true, errmsg);
	mdb_txn_abort(txn);
	if (rc != SHOAL_OK)
		return rc;
	for (size_t i = 0; i < nin; i++) {
		if (in[i].lo < lo)
			in[i].lo = lo;
		if (in[i].hi > hi)
			in[i].hi = hi;
	}
	*out = in;
	*n = nin;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* What st_index_apply needs                                                 */
/* ------------------------------------------------------------------------ */

typedef struct view_mark {
	uint64_t lo, hi, seq;
	bool dirty;
} view_mark;

struct st_part_gsi_view {
	st_txn *txn;
	uint32_t source;
	sh_arena *a;
	view_mark *m;
	uint32_t n, cap;
};

int st_part_gsi_view_open(st_txn *txn, uint32_t source, sh_arena *a, st_part_gsi_view **out,
                          char *errmsg)
{
	*out = NULL;
	if (!st_part_any(txn->env))
		return SHOAL_OK;
	st_part_gsi_view *v = sh_arena_calloc(a, 1, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "index apply: out of memory");
	v->txn = txn;
	v->source = source;
	v->a = a;
	*out = v;
	return SHOAL_OK;
}

int st_part_gsi_mark(st_part_gsi_view *v, uint64_t hash, uint32_t *slot, char *errmsg)
{
	*slot = UINT32_MAX;
	for (uint32_t i = 0; i < v->n; i++)
		if (v->m[i].lo <= hash && hash <= v->m[i].hi) {
			*slot = i;
			return SHOAL_OK;
		}
	uint64_t lo, hi;
	bool found;
	int rc = mark_at(v->txn->txn, v->txn->env, hash, &lo, &hi, &found, errmsg);
	if (rc != SHOAL_OK || !found)
		return rc;
	if (v->n == v->cap) {
		uint32_t ncap = v->cap == 0 ? 4 : 2 * v->cap;
		view_mark *g = sh_arena_alloc(v->a, ncap * sizeof(*g));
		if (g == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "index apply: out of memory");
		if (v->n > 0)
			memcpy(g, v->m, v->n * sizeof(*g));
		v->m = g, v->cap = ncap;
	}
	uint8_t k[PT_WM_KEY];
	wm_key(k, lo, v->source);
	uint64_t seq;
	rc = st_ix_meta_get_u64(v->txn->txn, v->txn->env, k, sizeof(k), &seq, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	v->m[v->n] = (view_mark){lo, hi, seq, false};
	*slot = v->n++;
	return SHOAL_OK;
}

uint64_t st_part_gsi_mark_seq(const st_part_gsi_view *v, uint32_t slot)
{
	return v->m[slot].seq;
}

void st_part_gsi_mark_advance(st_part_gsi_view *v, uint32_t slot, uint64_t seq)
{
	v->m[slot].seq = seq;
	v->m[slot].dirty = true;
}

int st_part_gsi_view_close(st_part_gsi_view *v, char *errmsg)
{
	int rc = SHOAL_OK;
	for (uint32_t i = 0; v != NULL && rc == SHOAL_OK && i < v->n; i++)
		if (v->m[i].dirty)
			rc = wm_put(v->txn, v->m[i].lo, v->source, v->m[i].seq, errmsg);
	return rc;
}
