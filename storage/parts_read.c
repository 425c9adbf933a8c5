/*
 * parts_read.c -- partition moves: the source leader's reads (contract:
 * parts.h).  Each opens a read transaction of its own, so a chunk is one
 * consistent snapshot; st_part_copy_chunk reads the move log's last seq in
 * the same snapshot as the items, which is what makes "copy, then the log
 * after the first chunk's seq" exact (see parts.c).
 */
#include <inttypes.h>
#include <string.h>

#include "codec.h"
#include "parts_int.h"

int st_part_list(st_env *env, sh_arena *a, st_part_rec **out, size_t *n, char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0) {
		mdb_txn_abort(txn);
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	}
	const uint8_t prefix[2] = {PT_META, PT_REC};
	MDB_val k = {sizeof(prefix), (void *)prefix}, v;
	size_t cap = 0;

	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size >= 2 && memcmp(k.mv_data, prefix, 2) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (*n == cap) {
			size_t ncap = cap == 0 ? 8 : 2 * cap;
			st_part_rec *grown = sh_arena_alloc(a, ncap * sizeof(*grown));
			if (grown == NULL) {
				rc =
				    sh_errf(errmsg, SHOAL_E_NOMEM, "partition list: out of memory");
				break;
			}
			if (*n > 0)
				memcpy(grown, *out, *n * sizeof(*grown));
			*out = grown;
			cap = ncap;
		}
		rc = st_part_rec_decode(&k, &v, &(*out)[*n], errmsg);
		if (rc != SHOAL_OK)
			break;
		(*n)++;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc != SHOAL_OK) {
		*out = NULL;
		*n = 0;
	}
	return rc;
}

int st_part_range_items(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                        st_part_held *out, char *errmsg)
{
	st_key from, to;
	bool has_to;
	st_part_base_range(table, lo, hi, &from, &to, &has_to);
	out->items = out->bytes = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	sh_arena a;
	sh_arena_init(&a);
	int rc = SHOAL_OK;
	MDB_val k = {from.len, from.b}, v;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && st_part_key_before(&k, &to, has_to);
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		st_value item;
		char why[SH_ERRMSG_SIZE];
		sh_arena_reset(&a);
		rc = st_codec_decode(&a, v.mv_data, v.mv_size, &item, why);
		if (rc != SHOAL_OK) {
			rc = sh_errf(errmsg, rc == SHOAL_E_NOMEM ? rc : SHOAL_E_INTERNAL,
			             "counting the items of table %" PRIu32 " in [%016" PRIx64
			             ", %016" PRIx64 "]: %s",
			             table, lo, hi, why);
			break;
		}
		out->items++;
		out->bytes += st_item_size(&item);
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
	sh_arena_fini(&a);
	mdb_cursor_close(c);
	return rc;
}

int st_part_held_count(st_env *env, uint32_t table, uint64_t lo, st_part_held *out, bool *counted,
                       char *errmsg)
{
	out->items = out->bytes = 0;
	out->ix_known = false;
	out->n_ix = 0;
	*counted = false;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_part_rec r;
	bool found;
	rc = st_part_rec_get(txn, env, table, lo, &r, &found, errmsg);
	if (rc == SHOAL_OK && !found)
		rc = sh_errf(errmsg, SHOAL_E_NOT_FOUND,
		             "no partition record of table %" PRIu32 " at %016" PRIx64, table, lo);
	if (rc == SHOAL_OK && (r.counted || r.state != ST_PART_FENCED))
		*counted = true;
	else if (rc == SHOAL_OK)
		rc = st_part_range_items(txn, env, table, r.lo, r.hi, out, errmsg);
	if (rc == SHOAL_OK && !*counted)
		rc = st_part_range_entries(txn, env, table, r.lo, r.hi, out, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

/* Arrays of (key, value) pairs handed out by the reads, grown in an arena. */
typedef struct pairs {
	uint8_t **keys, **vals;
	size_t *klens, *vlens;
	size_t n, cap, bytes;
} pairs;

/* Appends a copy of (key, val); NOMEM on failure. */
static int pairs_add(pairs *p, sh_arena *a, const void *key, size_t klen, const void *val,
                     size_t vlen, char *errmsg)
{
	if (p->n == p->cap) {
		size_t ncap = p->cap == 0 ? 16 : 2 * p->cap;
		uint8_t **k = sh_arena_alloc(a, ncap * sizeof(*k));
		uint8_t **v = sh_arena_alloc(a, ncap * sizeof(*v));
		size_t *kl = sh_arena_alloc(a, ncap * sizeof(*kl));
		size_t *vl = sh_arena_alloc(a, ncap * sizeof(*vl));
		if (k == NULL || v == NULL || kl == NULL || vl == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "partition read: out of memory");
		if (p->n > 0) {
			memcpy(k, p->keys, p->n * sizeof(*k));
			memcpy(v, p->vals, p->n * sizeof(*v));
			memcpy(kl, p->klens, p->n * sizeof(*kl));
			memcpy(vl, p->vlens, p->n * sizeof(*vl));
		}
		p->keys = k, p->vals = v, p->klens = kl, p->vlens = vl;
		p->cap = ncap;
	}
	uint8_t *kc = sh_arena_memdup(a, key, klen);
	uint8_t *vc = vlen > 0 ? sh_arena_memdup(a, val, vlen) : NULL;
	if (kc == NULL || (vlen > 0 && vc == NULL))
		return sh_errf(errmsg, SHOAL_E_NOMEM, "partition read: out of memory");
	p->keys[p->n] = kc;
	p->vals[p->n] = vc;
	p->klens[p->n] = klen;
	p->vlens[p->n] = vlen;
	p->n++;
	p->bytes += klen + vlen;
	return SHOAL_OK;
}

/* Whether one more pair of `size` bytes fits (the first always does). */
static bool pairs_fit(const pairs *p, size_t size, size_t max_bytes)
{
	return p->n == 0 || p->bytes + size <= max_bytes;
}

static void pairs_out(const pairs *p, uint8_t ***keys, size_t **klens, uint8_t ***vals,
                      size_t **vlens, size_t *n)
{
	*keys = p->keys;
	*klens = p->klens;
	*vals = p->vals;
	*vlens = p->vlens;
	*n = p->n;
}

/* gsi_chunk's scan. */
typedef struct chunk_arg {
	pairs *p;
	sh_arena *a;
	size_t max_bytes;
	bool *more;
} chunk_arg;

static int chunk_fn(void *arg, const MDB_val *k, const MDB_val *v, bool *stop, char *errmsg)
{
	chunk_arg *x = arg;
	if (!pairs_fit(x->p, k->mv_size + v->mv_size, x->max_bytes)) {
		*x->more = true;
		*stop = true;
		return SHOAL_OK;
	}
	return pairs_add(x->p, x->a, k->mv_data, k->mv_size, v->mv_data, v->mv_size, errmsg);
}

/* st_part_copy_chunk of the GSI space: its entries (parts_gsi.c's scan). */
static int gsi_chunk(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, const uint8_t *after,
                     size_t after_len, size_t max_bytes, sh_arena *a, pairs *p, bool *more,
                     char *errmsg)
{
	chunk_arg x = {p, a, max_bytes, more};
	return st_part_gsi_each(txn, env, a, lo, hi, after, after_len, chunk_fn, &x, errmsg);
}

int st_part_copy_chunk(st_env *env, uint32_t table, uint64_t lo, uint64_t hi, const uint8_t *after,
                       size_t after_len, size_t max_bytes, sh_arena *a, uint8_t ***keys,
                       size_t **klens, uint8_t ***vals, size_t **vlens, size_t *n, bool *more,
                       uint64_t *log_last, char *errmsg)
{
	pairs p = {0};
	pairs_out(&p, keys, klens, vals, vlens, n);
	*more = false;
	*log_last = 0;
	if (lo > hi || after_len > ST_KEY_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "copy chunk: invalid range or cursor");
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* The watermark, in the same snapshot as the items. */
	uint8_t nk[PT_KEY];
	st_part_key(nk, PT_LAST, table, lo);
	rc = st_ix_meta_get_u64(txn, env, nk, sizeof(nk), log_last, errmsg);
	MDB_cursor *c = NULL;
	int mrc = 0;
	if (rc == SHOAL_OK && (mrc = mdb_cursor_open(txn, env->data, &c)) != 0)
		rc = st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	if (rc != SHOAL_OK)
		goto out;
	if (table == ST_PART_GSI) {
		rc = gsi_chunk(txn, env, lo, hi, after, after_len, max_bytes, a, &p, more, errmsg);
		goto out;
	}
	st_key from, to;
	bool has_to;
	st_part_base_range(table, lo, hi, &from, &to, &has_to);
	MDB_val k, v;
	if (after_len > 0) {
		/* Resume after the last key sent (it may be gone since). */
		k = (MDB_val){after_len, (void *)after};
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == after_len && memcmp(k.mv_data, after, after_len) == 0)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		/* A cursor before the range starts at the range. */
		if (mrc == 0 && st_part_key_before(&k, &from, true)) {
			k = (MDB_val){from.len, from.b};
			mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		}
	} else {
		k = (MDB_val){from.len, from.b};
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	for (; mrc == 0 && st_part_key_before(&k, &to, has_to);
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (!pairs_fit(&p, k.mv_size + v.mv_size, max_bytes)) {
			*more = true;
			break;
		}
		rc = pairs_add(&p, a, k.mv_data, k.mv_size, v.mv_data, v.mv_size, errmsg);
		if (rc != SHOAL_OK)
			break;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
out:
	if (c != NULL)
		mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK)
		pairs_out(&p, keys, klens, vals, vlens, n);
	else
		*more = false;
	return rc;
}

int st_part_log_read(st_env *env, uint32_t table, uint64_t lo, uint64_t after_seq, size_t max_bytes,
                     size_t max_records, sh_arena *a, uint8_t ***keys, size_t **klens,
                     uint8_t ***vals, size_t **vlens, uint64_t *last_seq, size_t *n, char *errmsg)
{
	pairs p = {0};
	pairs_out(&p, keys, klens, vals, vlens, n);
	*last_seq = after_seq;
	if (after_seq == UINT64_MAX)
		return SHOAL_OK;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0) {
		mdb_txn_abort(txn);
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	}
	uint8_t kb[PT_LOG_KEY];
	st_part_log_key(kb, table, lo, after_seq + 1);
	MDB_val k = {sizeof(kb), kb}, v;

	uint64_t last = after_seq;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size == PT_LOG_KEY && memcmp(k.mv_data, kb, PT_KEY) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const uint8_t *b = v.mv_data;
		/* klen (4) | key | vlen (4) | value: the sizes must add up. */
		size_t klen = v.mv_size >= 8 ? st_get_be32(b) : 0;
		bool ok = v.mv_size >= 8 && klen <= v.mv_size - 8;
		size_t vlen = ok ? st_get_be32(b + 4 + klen) : 0;
		if (!ok || vlen != v.mv_size - 8 - klen) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt move-log record");
			break;
		}
		if (!pairs_fit(&p, klen + vlen, max_bytes) ||
		    (max_records != 0 && p.n >= max_records))
			break;
		rc = pairs_add(&p, a, b + 4, klen, b + 8 + klen, vlen, errmsg);
		if (rc != SHOAL_OK)
			break;
		last = st_get_be64((const uint8_t *)k.mv_data + PT_KEY);
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK) {
		pairs_out(&p, keys, klens, vals, vlens, n);
		*last_seq = last;
	}
	return rc;
}

int st_part_log_last(st_env *env, uint32_t table, uint64_t lo, uint64_t *seq, char *errmsg)
{
	*seq = 0;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint8_t nk[PT_KEY];
	st_part_key(nk, PT_LAST, table, lo);
	rc = st_ix_meta_get_u64(txn, env, nk, sizeof(nk), seq, errmsg);
	mdb_txn_abort(txn);
	return rc;
}
