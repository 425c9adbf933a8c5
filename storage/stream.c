/*
 * stream.c -- the per-group stream log of DynamoDB Streams records.  The
 * design, the record format and the layout are at the top of stream.h.
 *
 * Appending happens inside the write's st_txn (write.c), so a failure here
 * is environmental and poisons it (the caller's fail()).  Reads open their
 * own read-only LMDB transaction: a consistent view of the log at one
 * applied index.
 */
#include <string.h>

#include "catalog.h"
#include "codec.h"
#include "engine.h"
#include "index_int.h"
#include "stream_int.h"

#define REC_VERSION 1
#define REC_FIXED   31
#define REC_BY_TTL  0x80 /* in the event byte: a REMOVE by Time to Live */

static void rec_key(uint8_t k[14], uint32_t table, uint64_t seq)
{
	st_stream_meta_key(k, KIND_REC, table);
	st_put_be64(k + 6, seq);
}

/* 0x03 'F' | table | label_ms: the first seq of that stream's records. */
static void first_key(uint8_t k[14], uint32_t table, int64_t label_ms)
{
	st_stream_meta_key(k, KIND_FIRST, table);
	st_put_be64(k + 6, (uint64_t)label_ms);
}

static int get_u64(MDB_txn *txn, st_env *env, char kind, uint32_t table, uint64_t *out,
                   char *errmsg)
{
	uint8_t k[6];
	st_stream_meta_key(k, kind, table);
	return st_ix_meta_get_u64(txn, env, k, sizeof(k), out, errmsg);
}

static int put_u64(st_txn *txn, char kind, uint32_t table, uint64_t v, char *errmsg)
{
	uint8_t k[6];
	st_stream_meta_key(k, kind, table);
	return st_ix_meta_put_u64(txn, k, sizeof(k), v, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Append and trim                                                           */
/* ------------------------------------------------------------------------ */

static bool view_has_old(st_stream_view v)
{
	return v == ST_VIEW_OLD_IMAGE || v == ST_VIEW_NEW_AND_OLD_IMAGES;
}

static bool view_has_new(st_stream_view v)
{
	return v == ST_VIEW_NEW_IMAGE || v == ST_VIEW_NEW_AND_OLD_IMAGES;
}

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "stream record: out of memory");
}

int st_stream_append(st_txn *txn, const st_table_def *t, const st_key *k, const st_value *old_item,
                     const st_value *new_item, bool by_ttl, sh_arena *a, char *errmsg)
{
	if (!t->stream.enabled)
		return SHOAL_OK;
	if (old_item == NULL && new_item == NULL)
		return SHOAL_OK;
	if (old_item != NULL && new_item != NULL && st_value_equal(old_item, new_item))
		return SHOAL_OK; /* nothing changed: DynamoDB writes no record */
	st_stream_event ev = old_item == NULL   ? ST_EV_INSERT
	                     : new_item == NULL ? ST_EV_REMOVE
	                                        : ST_EV_MODIFY;
	st_stream_view view = t->stream.view;
	const st_value *any = new_item != NULL ? new_item : old_item;
	st_value *keys;
	if (st_key_extract(a, &t->key, any, &keys) != SHOAL_OK)
		return nomem(errmsg);
	const st_value *old_img = view_has_old(view) ? old_item : NULL;
	const st_value *new_img = view_has_new(view) ? new_item : NULL;
	uint8_t *kb, *ob = NULL, *nb = NULL;
	size_t kl, ol = 0, nl = 0;
	if (st_codec_encode(a, keys, &kb, &kl) != SHOAL_OK ||
	    (old_img != NULL && st_codec_encode(a, old_img, &ob, &ol) != SHOAL_OK) ||
	    (new_img != NULL && st_codec_encode(a, new_img, &nb, &nl) != SHOAL_OK))
		return nomem(errmsg);
	size_t size = st_item_size(keys) + (old_img != NULL ? st_item_size(old_img) : 0) +
	              (new_img != NULL ? st_item_size(new_img) : 0);

	/* Retention first, so the log's head moves before it grows. */
	uint32_t removed;
	int rc = st_stream_trim(txn, t->id, txn->ts_ms - txn->env->stream_retention_ms,
	                        ST_STREAM_TRIM_PER_APPEND, &removed, errmsg);
	uint64_t last = 0;
	if (rc == SHOAL_OK)
		rc = get_u64(txn->txn, txn->env, KIND_LAST, t->id, &last, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint64_t seq = last + 1;
	uint8_t key[14];
	/* The stream's first record: remembered, so that its bounds are found
	 * without walking other streams' records (st_stream_bounds_get). */
	uint64_t first = 0;
	first_key(key, t->id, t->stream.label_ms);
	if ((rc = st_ix_meta_get_u64(txn->txn, txn->env, key, sizeof(key), &first, errmsg)) !=
	    SHOAL_OK)
		return rc;
	if (first == 0 && (rc = st_ix_meta_put_u64(txn, key, sizeof(key), seq, errmsg)) != SHOAL_OK)
		return rc;
	rec_key(key, t->id, seq);
	size_t len = REC_FIXED + 4 + kl + 4 + ol + 4 + nl;
	/* Disk for it was reserved with the item's (write.c, reserve_item). */
	MDB_val mk = {sizeof(key), key}, mv = {len, NULL};
	int mrc = mdb_put(txn->txn, txn->env->meta, &mk, &mv, MDB_RESERVE);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta stream)", errmsg);
	uint8_t *p = mv.mv_data;
	p[0] = REC_VERSION;
	p[1] = (uint8_t)((uint8_t)ev | (by_ttl && ev == ST_EV_REMOVE ? REC_BY_TTL : 0));
	p[2] = (uint8_t)view;
	st_put_be64(p + 3, (uint64_t)txn->ts_ms);
	st_put_be64(p + 11, (uint64_t)t->stream.label_ms);
	st_put_be64(p + 19, st_get_be64(k->b + 6));
	st_put_be32(p + 27, size > UINT32_MAX ? UINT32_MAX : (uint32_t)size);
	size_t off = REC_FIXED;
	st_put_be32(p + off, (uint32_t)kl);
	memcpy(p + off + 4, kb, kl);
	off += 4 + kl;
	st_put_be32(p + off, (uint32_t)ol);
	if (ol > 0)
		memcpy(p + off + 4, ob, ol);
	off += 4 + ol;
	st_put_be32(p + off, (uint32_t)nl);
	if (nl > 0)
		memcpy(p + off + 4, nb, nl);
	return put_u64(txn, KIND_LAST, t->id, seq, errmsg);
}

int st_stream_seq_reserve(st_txn *txn, uint32_t table, uint64_t *seq, char *errmsg)
{
	uint64_t last = 0;
	int rc = get_u64(txn->txn, txn->env, KIND_LAST, table, &last, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*seq = last + 1;
	return put_u64(txn, KIND_LAST, table, *seq, errmsg);
}

int st_stream_trim(st_txn *txn, uint32_t table, int64_t before_ms, uint32_t max, uint32_t *removed,
                   char *errmsg)
{
	*removed = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta stream)", errmsg);
	uint8_t prefix[14];
	rec_key(prefix, table, 0);
	uint64_t highest = 0;
	int rc = SHOAL_OK;
	while (*removed < max) {
		MDB_val k = {sizeof(prefix), prefix}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
			break;
		}
		if (k.mv_size != 14 || memcmp(k.mv_data, prefix, 6) != 0)
			break;
		if (v.mv_size < REC_FIXED ||
		    (int64_t)st_get_be64((const uint8_t *)v.mv_data + 3) >= before_ms)
			break;
		highest = st_get_be64((const uint8_t *)k.mv_data + 6);
		if ((mrc = mdb_cursor_del(c, 0)) != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_del(meta stream)", errmsg);
			break;
		}
		(*removed)++;
	}
	mdb_cursor_close(c);
	if (rc == SHOAL_OK && highest != 0)
		rc = put_u64(txn, KIND_TRIMMED, table, highest, errmsg);
	/* Only when the head moved: most appends trim nothing. */
	if (rc == SHOAL_OK && highest != 0)
		rc = st_stream_shards_trimmed(txn, table, highest, errmsg);
	return rc;
}

int st_stream_forget_table(st_txn *txn, uint32_t table, char *errmsg)
{
	static const char kinds[] = {KIND_LAST,  KIND_TRIMMED, KIND_REC,
	                             KIND_FIRST, KIND_DROPPED, KIND_SHARD};
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta stream)", errmsg);
	for (size_t i = 0; i < sizeof(kinds) && mrc == 0; i++) {
		uint8_t prefix[6];
		st_stream_meta_key(prefix, kinds[i], table);
		for (;;) {
			MDB_val k = {sizeof(prefix), prefix}, v;
			mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
			if (mrc == MDB_NOTFOUND) {
				mrc = 0;
				break;
			}
			if (mrc != 0 || k.mv_size < 6 || memcmp(k.mv_data, prefix, 6) != 0)
				break;
			if ((mrc = mdb_cursor_del(c, 0)) != 0)
				break;
		}
	}
	mdb_cursor_close(c);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_cursor_del(meta stream)", errmsg);
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                     */
/* ------------------------------------------------------------------------ */

/* The fixed part of a record (label, time) without decoding the items;
 * false if it is damaged. */
static bool rec_head(const MDB_val *v, int64_t *label_ms)
{
	const uint8_t *p = v->mv_data;
	if (v->mv_size < REC_FIXED + 12 || p[0] != REC_VERSION)
		return false;
	*label_ms = (int64_t)st_get_be64(p + 11);
	return true;
}

static int corrupt(uint64_t seq, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt stream record %llu",
	               (unsigned long long)seq);
}

/* One length-prefixed codec blob at *off; *blob NULL with length 0. */
static bool blob(const uint8_t *p, size_t len, size_t *off, const uint8_t **b, size_t *bl)
{
	if (len - *off < 4)
		return false;
	size_t n = st_get_be32(p + *off);
	if (len - *off - 4 < n)
		return false;
	*b = n > 0 ? p + *off + 4 : NULL;
	*bl = n;
	*off += 4 + n;
	return true;
}

static int decode(uint64_t seq, const MDB_val *v, sh_arena *a, st_stream_rec *r, char *errmsg)
{
	const uint8_t *p = v->mv_data;
	size_t len = v->mv_size;
	uint8_t ev = len >= REC_FIXED ? (uint8_t)(p[1] & ~REC_BY_TTL) : 0;
	if (len < REC_FIXED || p[0] != REC_VERSION || ev < ST_EV_INSERT || ev > ST_EV_REMOVE ||
	    ((p[1] & REC_BY_TTL) != 0 && ev != ST_EV_REMOVE) || p[2] < ST_VIEW_KEYS_ONLY ||
	    p[2] > ST_VIEW_NEW_AND_OLD_IMAGES)
		return corrupt(seq, errmsg);
	memset(r, 0, sizeof(*r));
	r->seq = seq;
	r->event = (st_stream_event)ev;
	r->by_ttl = (p[1] & REC_BY_TTL) != 0;
	r->view = (st_stream_view)p[2];
	r->ts_ms = (int64_t)st_get_be64(p + 3);
	r->label_ms = (int64_t)st_get_be64(p + 11);
	r->hash = st_get_be64(p + 19);
	r->size_bytes = st_get_be32(p + 27);
	size_t off = 31;
	const uint8_t *kb, *ob, *nb;
	size_t kl, ol, nl;
	if (!blob(p, len, &off, &kb, &kl) || !blob(p, len, &off, &ob, &ol) ||
	    !blob(p, len, &off, &nb, &nl) || off != len || kl == 0)
		return corrupt(seq, errmsg);
	char msg[SH_ERRMSG_SIZE];
	if (st_codec_decode(a, kb, kl, &r->keys, msg) != SHOAL_OK)
		return corrupt(seq, errmsg);
	if (ol > 0) {
		r->old_image = sh_arena_alloc(a, sizeof(st_value));
		if (r->old_image == NULL)
			return nomem(errmsg);
		if (st_codec_decode(a, ob, ol, r->old_image, msg) != SHOAL_OK)
			return corrupt(seq, errmsg);
	}
	if (nl > 0) {
		r->new_image = sh_arena_alloc(a, sizeof(st_value));
		if (r->new_image == NULL)
			return nomem(errmsg);
		if (st_codec_decode(a, nb, nl, r->new_image, msg) != SHOAL_OK)
			return corrupt(seq, errmsg);
	}
	return SHOAL_OK;
}

static int read_begin(st_env *env, MDB_txn **txn, MDB_cursor **c, char *errmsg)
{
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	mrc = mdb_cursor_open(*txn, env->meta, c);
	if (mrc != 0) {
		mdb_txn_abort(*txn);
		return st_lmdb_err(mrc, "mdb_cursor_open(meta stream)", errmsg);
	}
	return SHOAL_OK;
}

/* The first record of stream label_ms met walking table's log from seq
 * `from` (positioned with `first`, moving with `step`): *seq, 0 if none.
 * *mrc: LMDB's last cursor code. */
static int find_label(MDB_cursor *c, uint32_t table, uint64_t from, MDB_cursor_op first,
                      MDB_cursor_op step, int64_t label_ms, uint64_t *seq, int *mrc, char *errmsg)
{
	uint8_t kb[14];
	rec_key(kb, table, from);
	MDB_val k = {sizeof(kb), kb}, v;
	*seq = 0;
	for (*mrc = mdb_cursor_get(c, &k, &v, first); *mrc == 0;
	     *mrc = mdb_cursor_get(c, &k, &v, step)) {
		if (k.mv_size != 14 || memcmp(k.mv_data, kb, 6) != 0)
			break;
		int64_t label;
		uint64_t at = st_get_be64((const uint8_t *)k.mv_data + 6);
		if (!rec_head(&v, &label))
			return corrupt(at, errmsg);
		if (label == label_ms) {
			*seq = at;
			break;
		}
	}
	return SHOAL_OK;
}

/* The first seq of stream label_ms (*first, 0: not remembered: a log
 * written before 'F' keys existed) and the first seq of the table's next
 * stream (*next, 0: none, the stream is the newest in this log). */
static int label_range(MDB_txn *txn, st_env *env, MDB_cursor *c, uint32_t table, int64_t label_ms,
                       uint64_t *first, uint64_t *next, char *errmsg)
{
	uint8_t kb[14];
	*next = 0;
	first_key(kb, table, label_ms);
	int rc = st_ix_meta_get_u64(txn, env, kb, sizeof(kb), first, errmsg);
	if (rc != SHOAL_OK || *first == 0)
		return rc;
	first_key(kb, table, label_ms + 1);
	MDB_val k = {sizeof(kb), kb}, v;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
	if (k.mv_size == 14 && memcmp(k.mv_data, kb, 6) == 0 && v.mv_size == 8)
		*next = st_get_be64(v.mv_data);
	return SHOAL_OK;
}

/*
 * A table's records are dense in seq but for the seqs reserved by shard
 * changes, which no record has (every other seq given has its record until
 * trimmed, and trimming takes the head in order), and a stream's records
 * are one run of them (a group's copy of the table has one stream at a time
 * and a new stream has a later label), so the stream of label_ms holds
 * [max(first, trimmed + 1), (next stream's first or newest + 1) - 1]: two
 * lookups, whatever the other streams hold.  Either bound may be a reserved
 * seq: they bound positions, and reads pass over the gaps (a read that
 * reaches the log's end moves *next past the newest).  A log from before the 'F' keys
 * falls back to walking it (find_label).
 */
int st_stream_bounds_get(st_env *env, uint32_t table, int64_t label_ms, st_stream_bounds *out,
                         char *errmsg)
{
	memset(out, 0, sizeof(*out));
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = read_begin(env, &txn, &c, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = get_u64(txn, env, KIND_LAST, table, &out->newest, errmsg);
	if (rc == SHOAL_OK)
		rc = get_u64(txn, env, KIND_TRIMMED, table, &out->trimmed, errmsg);
	uint64_t first = 0, next = 0;
	if (rc == SHOAL_OK)
		rc = label_range(txn, env, c, table, label_ms, &first, &next, errmsg);
	if (rc == SHOAL_OK && first != 0) {
		uint64_t lo = first > out->trimmed ? first : out->trimmed + 1;
		uint64_t hi = next != 0 ? next - 1 : out->newest;
		if (lo <= hi) {
			out->first = lo;
			out->last = hi;
		}
	} else if (rc == SHOAL_OK) {
		/* Oldest of the stream: forward from the head; newest: backward
		 * from the table's last seq. */
		int mrc = MDB_NOTFOUND;
		rc = find_label(c, table, 0, MDB_SET_RANGE, MDB_NEXT, label_ms, &out->first, &mrc,
		                errmsg);
		if (rc == SHOAL_OK && out->first != 0)
			rc = find_label(c, table, out->newest, MDB_SET_KEY, MDB_PREV, label_ms,
			                &out->last, &mrc, errmsg);
		if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
			rc = st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return rc;
}

uint64_t st_stream_latest(const st_stream_bounds *b)
{
	return (b->trimmed > b->newest ? b->trimmed : b->newest) + 1;
}

/* Records a read examines at least, whatever max_n, when it reads one
 * shard: a small range of a busy log is mostly other ranges' records. */
#define SHARD_EXAMINED_MIN 1024

int st_stream_read_shard(st_env *env, uint32_t table, int64_t label_ms, const st_shard *s,
                         uint64_t from, uint32_t max_n, size_t max_bytes, sh_arena *a,
                         st_stream_rec **out, uint32_t *n, uint64_t *next, char *errmsg)
{
	*out = NULL;
	*n = 0;
	/* Seq 0 is no record's: a shard from the log's beginning starts at 1. */
	if (s != NULL && from < s->start)
		from = s->start;
	if (s != NULL && from == 0)
		from = 1;
	*next = from;
	/* A closed shard read past its end: done, nothing there (its records
	 * may be trimmed since, and that is no reason to refuse). */
	if (s != NULL && s->end != 0 && from >= s->end)
		return SHOAL_OK;
	st_stream_rec *v = max_n > 0 ? sh_arena_calloc(a, max_n, sizeof(*v)) : NULL;
	if (max_n > 0 && v == NULL)
		return nomem(errmsg);
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = read_begin(env, &txn, &c, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint64_t trimmed = 0, newest = 0;
	rc = get_u64(txn, env, KIND_TRIMMED, table, &trimmed, errmsg);
	if (rc == SHOAL_OK)
		rc = get_u64(txn, env, KIND_LAST, table, &newest, errmsg);
	if (rc == SHOAL_OK && from <= trimmed)
		rc = sh_errf(errmsg, SHOAL_E_TRIMMED,
		             "Attempting to access data that has been trimmed (sequence number "
		             "%llu, trimmed up to %llu)",
		             (unsigned long long)from, (unsigned long long)trimmed);
	uint8_t kb[14];
	rec_key(kb, table, from);
	MDB_val k = {sizeof(kb), kb}, val;
	uint32_t count = 0;
	size_t bytes = 0;
	/* Records skipped over (other streams', other ranges') are bounded too,
	 * so a read never walks the whole log. */
	uint32_t examined = 0, max_examined = max_n * 4 + 64;
	if (s != NULL && max_examined < SHARD_EXAMINED_MIN)
		max_examined = SHARD_EXAMINED_MIN;
	/* The loop ran out of log (rather than of room or of the span). */
	bool at_end = false;
	int mrc = rc == SHOAL_OK ? mdb_cursor_get(c, &k, &val, MDB_SET_RANGE) : MDB_NOTFOUND;
	for (; mrc == 0 && count < max_n && examined < max_examined;
	     mrc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
		if (k.mv_size != 14 || memcmp(k.mv_data, kb, 6) != 0) {
			at_end = true;
			break;
		}
		uint64_t seq = st_get_be64((const uint8_t *)k.mv_data + 6);
		if (s != NULL && s->end != 0 && seq >= s->end) {
			*next = s->end;
			break;
		}
		int64_t label;
		if (!rec_head(&val, &label)) {
			rc = corrupt(seq, errmsg);
			break;
		}
		examined++;
		uint64_t hash = st_get_be64((const uint8_t *)val.mv_data + 19);
		if (label != label_ms || (s != NULL && (hash < s->lo || hash > s->hi))) {
			*next = seq + 1;
			continue;
		}
		if (count > 0 && bytes + val.mv_size > max_bytes)
			break;
		if ((rc = decode(seq, &val, a, &v[count], errmsg)) != SHOAL_OK)
			break;
		count++;
		bytes += val.mv_size;
		*next = seq + 1;
	}
	if (mrc == MDB_NOTFOUND)
		at_end = true;
	else if (rc == SHOAL_OK && mrc != 0)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
	/* Past the last record: the seqs up to the newest that no record has
	 * (reserved by shard changes, stream_shards.c) are passed over too, so
	 * that a reader gets past a span's end (and a disabled stream's last
	 * seq, st_stream_bounds_get) with no record after it.  Safe on a
	 * lagging replica: whatever is committed later gets a seq above this
	 * transaction's newest. */
	if (rc == SHOAL_OK && at_end && *next <= newest)
		*next = newest + 1;
	if (s != NULL && s->end != 0 && *next > s->end)
		*next = s->end;
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK) {
		*out = v;
		*n = count;
	}
	return rc;
}

int st_stream_read(st_env *env, uint32_t table, int64_t label_ms, uint64_t from, uint32_t max_n,
                   size_t max_bytes, sh_arena *a, st_stream_rec **out, uint32_t *n, uint64_t *next,
                   char *errmsg)
{
	return st_stream_read_shard(env, table, label_ms, NULL, from, max_n, max_bytes, a, out, n,
	                            next, errmsg);
}

/* The 'D' record of the first deleted table >= *table: *table and its
 * deletion time; SHOAL_E_NOT_FOUND when there is none.  (Defined below.) */
static int next_dropped(MDB_cursor *c, uint32_t *table, int64_t *deleted_ms, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Trimming without writes                                                   */
/* ------------------------------------------------------------------------ */

/* The first record of the first table >= *table that has one: *table and
 * the record's time; SHOAL_E_NOT_FOUND when there is none. */
static int next_table_head(MDB_cursor *c, uint32_t *table, int64_t *ts_ms, char *errmsg)
{
	uint8_t kb[14];
	rec_key(kb, *table, 0);
	MDB_val k = {sizeof(kb), kb}, v;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_E_NOT_FOUND;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
	if (k.mv_size != 14 || memcmp(k.mv_data, kb, 2) != 0)
		return SHOAL_E_NOT_FOUND; /* past the records */
	*table = st_get_be32((const uint8_t *)k.mv_data + 2);
	if (v.mv_size < REC_FIXED)
		return corrupt(st_get_be64((const uint8_t *)k.mv_data + 6), errmsg);
	*ts_ms = (int64_t)st_get_be64((const uint8_t *)v.mv_data + 3);
	return SHOAL_OK;
}

int st_stream_oldest(st_env *env, int64_t *ts_ms, bool *any, char *errmsg)
{
	*any = false;
	*ts_ms = 0;
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = read_begin(env, &txn, &c, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (uint32_t table = 0;;) {
		int64_t ts;
		if ((rc = next_table_head(c, &table, &ts, errmsg)) != SHOAL_OK)
			break;
		if (!*any || ts < *ts_ms)
			*ts_ms = ts;
		*any = true;
		if (table == UINT32_MAX)
			break;
		table++;
	}
	/* A deleted table's record is due when the deletion passes the
	 * retention: report it as if it were a record of then. */
	for (uint32_t table = 0; rc == SHOAL_E_NOT_FOUND;) {
		int64_t deleted;
		if ((rc = next_dropped(c, &table, &deleted, errmsg)) != SHOAL_OK)
			break;
		if (!*any || deleted < *ts_ms)
			*ts_ms = deleted;
		*any = true;
		rc = SHOAL_E_NOT_FOUND;
		if (table == UINT32_MAX)
			break;
		table++;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return rc == SHOAL_E_NOT_FOUND ? SHOAL_OK : rc;
}

bool st_stream_expired(const st_env *env, int64_t ts_ms, int64_t now_ms)
{
	return ts_ms < now_ms - env->stream_retention_ms;
}

int st_stream_trim_expired(st_txn *txn, uint32_t max, uint32_t *removed, char *errmsg)
{
	*removed = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta stream)", errmsg);
	int64_t before = txn->ts_ms - txn->env->stream_retention_ms;
	int rc = SHOAL_OK;
	for (uint32_t table = 0; *removed < max;) {
		int64_t ts;
		if ((rc = next_table_head(c, &table, &ts, errmsg)) != SHOAL_OK)
			break;
		uint32_t n = 0;
		if (ts < before && (rc = st_stream_trim(txn, table, before, max - *removed, &n,
		                                        errmsg)) != SHOAL_OK)
			break;
		*removed += n;
		if (table == UINT32_MAX)
			break;
		table++;
	}
	/* Deleted tables past the retention whose logs are empty now: forgotten. */
	for (uint32_t table = 0; rc == SHOAL_E_NOT_FOUND || rc == SHOAL_OK;) {
		int64_t deleted, ts;
		if ((rc = next_dropped(c, &table, &deleted, errmsg)) != SHOAL_OK)
			break;
		uint32_t head = table;
		int hrc = next_table_head(c, &head, &ts, errmsg);
		if (hrc != SHOAL_OK && hrc != SHOAL_E_NOT_FOUND) {
			rc = hrc;
			break;
		}
		if (deleted < before && (hrc == SHOAL_E_NOT_FOUND || head != table) &&
		    (rc = st_stream_forget_table(txn, table, errmsg)) != SHOAL_OK)
			break;
		if (table == UINT32_MAX)
			break;
		table++;
	}
	mdb_cursor_close(c);
	return rc == SHOAL_E_NOT_FOUND ? SHOAL_OK : rc;
}

/* ------------------------------------------------------------------------ */
/* Deleted tables' streams                                                   */
/* ------------------------------------------------------------------------ */

static int next_dropped(MDB_cursor *c, uint32_t *table, int64_t *deleted_ms, char *errmsg)
{
	uint8_t kb[6];
	st_stream_meta_key(kb, KIND_DROPPED, *table);
	MDB_val k = {sizeof(kb), kb}, v;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_E_NOT_FOUND;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
	if (k.mv_size != 6 || memcmp(k.mv_data, kb, 2) != 0)
		return SHOAL_E_NOT_FOUND;
	*table = st_get_be32((const uint8_t *)k.mv_data + 2);
	if (v.mv_size < 10)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt deleted-table record %u", *table);
	*deleted_ms = (int64_t)st_get_be64(v.mv_data);
	return SHOAL_OK;
}

int st_stream_table_dropped(st_txn *txn, const char *name, uint32_t id, const uint8_t *rec,
                            size_t len, bool *kept, char *errmsg)
{
	*kept = false;
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	int rc = st_catalog_decode(name, rec, len, &a, &t, errmsg);
	/* rec is LMDB's: copied before the put below may move it. */
	uint8_t *copy = rc == SHOAL_OK ? sh_arena_memdup(&a, rec, len) : NULL;
	if (rc == SHOAL_OK && copy == NULL)
		rc = nomem(errmsg);
	if (rc != SHOAL_OK || t.def.stream.label_ms == 0) {
		sh_arena_fini(&a);
		return rc;
	}
	size_t nl = strlen(name);
	uint8_t key[6];
	st_stream_meta_key(key, KIND_DROPPED, id);
	MDB_val mk = {sizeof(key), key}, mv = {8 + 2 + nl + len, NULL};
	int mrc = mdb_put(txn->txn, txn->env->meta, &mk, &mv, MDB_RESERVE);
	if (mrc != 0) {
		sh_arena_fini(&a);
		return st_lmdb_err(mrc, "mdb_put(meta deleted table)", errmsg);
	}
	uint8_t *p = mv.mv_data;
	st_put_be64(p, (uint64_t)txn->ts_ms);
	p[8] = (uint8_t)(nl >> 8);
	p[9] = (uint8_t)nl;
	memcpy(p + 10, name, nl);
	memcpy(p + 10 + nl, copy, len);
	sh_arena_fini(&a);
	*kept = true;
	return SHOAL_OK;
}

/* The definition in the 'D' record v (in a); false if damaged. */
static bool dropped_def(const MDB_val *v, sh_arena *a, st_table_def *def, int64_t *deleted_ms)
{
	const uint8_t *p = v->mv_data;
	if (v->mv_size < 10)
		return false;
	size_t nl = ((size_t)p[8] << 8) | p[9];
	if (v->mv_size < 10 + nl)
		return false;
	char *name = sh_arena_strndup(a, (const char *)p + 10, nl);
	st_table_info t;
	char msg[SH_ERRMSG_SIZE];
	if (name == NULL ||
	    st_catalog_decode(name, p + 10 + nl, v->mv_size - 10 - nl, a, &t, msg) != SHOAL_OK)
		return false;
	*def = t.def;
	def->stream.enabled = false;
	*deleted_ms = (int64_t)st_get_be64(p);
	return true;
}

int st_stream_dropped_list(st_env *env, sh_arena *a, st_table_def **defs, int64_t **deleted_ms,
                           uint32_t *n, char *errmsg)
{
	*defs = NULL;
	*deleted_ms = NULL;
	*n = 0;
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = read_begin(env, &txn, &c, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint32_t cap = 0;
	for (uint32_t table = 0;;) {
		int64_t deleted;
		if ((rc = next_dropped(c, &table, &deleted, errmsg)) != SHOAL_OK)
			break;
		MDB_val k, v;
		int mrc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_get(meta stream)", errmsg);
			break;
		}
		if (*n == cap) {
			uint32_t ncap = cap != 0 ? cap * 2 : 8;
			st_table_def *d2 = sh_arena_calloc(a, ncap, sizeof(*d2));
			int64_t *t2 = sh_arena_calloc(a, ncap, sizeof(*t2));
			if (d2 == NULL || t2 == NULL) {
				rc = nomem(errmsg);
				break;
			}
			if (*n > 0) {
				memcpy(d2, *defs, *n * sizeof(*d2));
				memcpy(t2, *deleted_ms, *n * sizeof(*t2));
			}
			*defs = d2;
			*deleted_ms = t2;
			cap = ncap;
		}
		if (dropped_def(&v, a, &(*defs)[*n], &(*deleted_ms)[*n]))
			(*n)++;
		if (table == UINT32_MAX)
			break;
		table++;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return rc == SHOAL_E_NOT_FOUND ? SHOAL_OK : rc;
}

int st_stream_dropped_find(st_env *env, const char *name, int64_t label_ms, int64_t now_ms,
                           sh_arena *a, st_table_def *def, int64_t *deleted_ms, char *errmsg)
{
	st_table_def *defs;
	int64_t *when;
	uint32_t n;
	int rc = st_stream_dropped_list(env, a, &defs, &when, &n, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_stream_view view;
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(defs[i].name, name) == 0 &&
		    st_stream_spec_find_dropped(&defs[i].stream, when[i], label_ms, now_ms,
		                                env->stream_retention_ms, &view)) {
			*def = defs[i];
			*deleted_ms = when[i];
			return SHOAL_OK;
		}
	return SHOAL_E_NOT_FOUND;
}
