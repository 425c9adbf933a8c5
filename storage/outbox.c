/*
 * outbox.c -- the group's outbox of GSI deltas (source side) and applying
 * shipped deltas (target side).  Model and contract: index.h.
 *
 * Outbox.  Deltas live in the meta DBI under 0x01 'O' | seq (u64 big-endian),
 * so they sit in seq order; 0x01 'L' holds last_seq (the seq of the newest
 * delta ever appended) and 0x01 'W' the shipped watermark.  Seqs start at 1
 * and are never reused: a trim deletes records but never lowers last_seq.  A
 * delta record (integers big-endian):
 *
 *   offset  size  field
 *   0       1     record version, 1
 *   1       8     hash: the placement hash of the entry (target partition)
 *   9       4     table id
 *   13      2     index id
 *   15      1     flags: bit 0 = delete
 *   16      8     ts_ms (i64, two's complement): st_txn_set_time of the write
 *   24      2     key length K (22 + 16 .. ST_KEY_MAX)
 *   26      K     the entry's data key
 *   26 + K  *     the entry's value (item codec); empty for a delete
 *
 * Appending is part of the write's LMDB transaction, so the outbox is a
 * deterministic function of the applied log: every replica holds the same
 * deltas under the same seqs.
 *
 * Applying.  The target records, per source group, the last seq it applied
 * (0x01 'A' | group) in the same transaction as the entries: a redelivered
 * delta (seq <= that) is skipped.  Deltas of an index this group's catalog
 * knows to be deleted (absent from the table's definition with an id below
 * its next_index_id, or DELETING) or of a dropped table (absent, id below the
 * group's next table id) are dropped; deltas of an index id or a table id
 * this group has not heard of yet (id >= next) are stored: the definition
 * that names it is on its way.  Every delta is
 * checked before anything is written, so a malformed batch changes nothing
 * (SHOAL_E_SERIALIZATION) and the transaction stays usable.
 */
#include <inttypes.h>
#include <string.h>

#include "catalog.h"
#include "codec.h"
#include "index_int.h"
#include "parts_int.h"

#define DELTA_VERSION 1
#define DELTA_FIXED   26

static const uint8_t KEY_LAST[2] = {IX_META, IX_META_LAST};
static const uint8_t KEY_SHIPPED[2] = {IX_META, IX_META_SHIPPED};

static void seq_key(uint8_t k[10], uint64_t seq)
{
	k[0] = IX_META;
	k[1] = IX_META_OUTBOX;
	st_put_be64(k + 2, seq);
}

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

static int sticky(const st_txn *txn, char *errmsg)
{
	return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
}

int st_outbox_last(st_txn *txn, uint64_t *out, char *errmsg)
{
	return st_ix_meta_get_u64(txn->txn, txn->env, KEY_LAST, sizeof(KEY_LAST), out, errmsg);
}

int st_outbox_append(st_txn *txn, uint64_t hash, uint32_t table, uint16_t index, bool del,
                     const st_key *k, const uint8_t *val, size_t val_len, char *errmsg)
{
	uint64_t last;
	int rc = st_outbox_last(txn, &last, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint64_t seq = last + 1;
	if (del)
		val_len = 0;
	uint8_t kb[10];
	seq_key(kb, seq);
	MDB_val mk = {sizeof(kb), kb}, mv = {DELTA_FIXED + k->len + val_len, NULL};
	/* MDB_RESERVE: LMDB hands out the value's room, filled in place. */
	int mrc = mdb_put(txn->txn, txn->env->meta, &mk, &mv, MDB_RESERVE);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta outbox)", errmsg);
	uint8_t *p = mv.mv_data;
	p[0] = DELTA_VERSION;
	st_put_be64(p + 1, hash);
	st_put_be32(p + 9, table);
	st_put_be16(p + 13, index);
	p[15] = del ? 1 : 0;
	st_put_be64(p + 16, (uint64_t)txn->ts_ms);
	st_put_be16(p + 24, k->len);
	memcpy(p + DELTA_FIXED, k->b, k->len);
	if (val_len > 0)
		memcpy(p + DELTA_FIXED + k->len, val, val_len);
	return st_ix_meta_put_u64(txn, KEY_LAST, sizeof(KEY_LAST), seq, errmsg);
}

/* Decodes a delta record (borrowed: pointers into rec). */
static bool delta_decode(uint64_t seq, const uint8_t *rec, size_t len, st_delta *d)
{
	if (len < DELTA_FIXED || rec[0] != DELTA_VERSION)
		return false;
	size_t klen = st_get_be16(rec + 24);
	if (klen > ST_KEY_MAX || DELTA_FIXED + klen > len)
		return false;
	d->seq = seq;
	d->hash = st_get_be64(rec + 1);
	d->table_id = st_get_be32(rec + 9);
	d->index_id = st_get_be16(rec + 13);
	d->del = (rec[15] & 1) != 0;
	d->ts_ms = (int64_t)st_get_be64(rec + 16);
	d->key = rec + DELTA_FIXED;
	d->key_len = klen;
	d->val = rec + DELTA_FIXED + klen;
	d->val_len = len - DELTA_FIXED - klen;
	return true;
}

int st_outbox_get_info(st_env *env, st_outbox_info *out, char *errmsg)
{
	*out = (st_outbox_info){0};
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	int rc = st_ix_meta_get_u64(txn, env, KEY_LAST, sizeof(KEY_LAST), &out->last_seq, errmsg);
	if (rc == SHOAL_OK)
		rc = st_ix_meta_get_u64(txn, env, KEY_SHIPPED, sizeof(KEY_SHIPPED), &out->shipped,
		                        errmsg);
	if (rc == SHOAL_OK) {
		out->depth = out->last_seq > out->shipped ? out->last_seq - out->shipped : 0;
		MDB_cursor *c;
		mrc = mdb_cursor_open(txn, env->meta, &c);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
		} else {
			uint8_t kb[10];
			seq_key(kb, 0);
			MDB_val k = {sizeof(kb), kb}, v;
			mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
			st_delta d;
			if (mrc == 0 && k.mv_size == 10 && memcmp(k.mv_data, kb, 2) == 0 &&
			    delta_decode(st_get_be64((const uint8_t *)k.mv_data + 2), v.mv_data,
			                 v.mv_size, &d))
				out->oldest_ts_ms = d.ts_ms;
			else if (mrc != 0 && mrc != MDB_NOTFOUND)
				rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
			mdb_cursor_close(c);
		}
	}
	mdb_txn_abort(txn);
	if (rc != SHOAL_OK)
		*out = (st_outbox_info){0};
	return rc;
}

int st_outbox_read(st_env *env, uint64_t after, uint32_t max_n, size_t max_bytes, sh_arena *a,
                   st_delta **out, uint32_t *n, char *errmsg)
{
	*out = NULL;
	*n = 0;
	if (after == UINT64_MAX || max_n == 0)
		return SHOAL_OK;
	st_delta *v = sh_arena_calloc(a, max_n, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_outbox_read: out of memory");
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	MDB_cursor *c;
	mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0) {
		mdb_txn_abort(txn);
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	}
	uint8_t kb[10];
	seq_key(kb, after + 1);
	MDB_val k = {sizeof(kb), kb}, val;
	int rc = SHOAL_OK;
	uint32_t count = 0;
	size_t bytes = 0;
	for (mrc = mdb_cursor_get(c, &k, &val, MDB_SET_RANGE); mrc == 0 && count < max_n;
	     mrc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
		if (k.mv_size != 10 || memcmp(k.mv_data, kb, 2) != 0)
			break;
		st_delta d;
		if (!delta_decode(st_get_be64((const uint8_t *)k.mv_data + 2), val.mv_data,
		                  val.mv_size, &d)) {
			rc = sh_errf(
			    errmsg, SHOAL_E_INTERNAL, "corrupt outbox record %llu",
			    (unsigned long long)st_get_be64((const uint8_t *)k.mv_data + 2));
			break;
		}
		size_t sz = d.key_len + d.val_len;
		if (count > 0 && bytes + sz > max_bytes)
			break;
		d.key = sh_arena_memdup(a, d.key, d.key_len);
		d.val = sh_arena_memdup(a, d.val, d.val_len);
		if (d.key == NULL || d.val == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_outbox_read: out of memory");
			break;
		}
		v[count++] = d;
		bytes += sz;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK) {
		*out = v;
		*n = count;
	}
	return rc;
}

int st_outbox_trim(st_txn *txn, uint64_t upto, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	uint64_t last, shipped;
	int rc = st_outbox_last(txn, &last, errmsg);
	if (rc == SHOAL_OK)
		rc = st_ix_meta_get_u64(txn->txn, txn->env, KEY_SHIPPED, sizeof(KEY_SHIPPED),
		                        &shipped, errmsg);
	if (rc != SHOAL_OK)
		goto err;
	if (upto > last)
		upto = last;
	if (upto <= shipped)
		return SHOAL_OK;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
		goto err;
	}
	uint8_t kb[10];
	seq_key(kb, 0);
	for (;;) {
		MDB_val k = {sizeof(kb), kb}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc == 0 && (k.mv_size != 10 || memcmp(k.mv_data, kb, 2) != 0 ||
		                 st_get_be64((const uint8_t *)k.mv_data + 2) > upto))
			break;
		if (mrc == 0)
			mrc = mdb_cursor_del(c, 0);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "trim(meta outbox)", errmsg);
			break;
		}
	}
	mdb_cursor_close(c);
	if (rc == SHOAL_OK)
		rc = st_ix_meta_put_u64(txn, KEY_SHIPPED, sizeof(KEY_SHIPPED), upto, errmsg);
	if (rc == SHOAL_OK)
		return SHOAL_OK;
err:
	st_txn_poison(txn, rc, errmsg);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Applying shipped deltas                                                   */
/* ------------------------------------------------------------------------ */

static void applied_key(uint8_t k[6], uint32_t group)
{
	k[0] = IX_META;
	k[1] = IX_META_APPLIED;
	st_put_be32(k + 2, group);
}

uint64_t st_index_applied_seq(st_env *env, uint32_t source_group)
{
	MDB_txn *txn;
	if (mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn) != 0)
		return 0;
	uint8_t kb[6];
	applied_key(kb, source_group);
	uint64_t v = 0;
	if (st_ix_meta_get_u64(txn, env, kb, sizeof(kb), &v, NULL) != SHOAL_OK)
		v = 0;
	mdb_txn_abort(txn);
	return v;
}

/* Whether a delta is well formed: a key of its table and index, long enough
 * for a header and a base-key digest, and an upsert value that decodes. */
static int delta_check(const st_delta *d, sh_arena *tmp, uint32_t i, char *errmsg)
{
	st_key k;
	st_key_table(&k, d->table_id, d->index_id);
	bool ok = d->index_id != 0 && d->table_id != 0 && d->key != NULL &&
	          d->key_len >= ST_KEY_HEADER + 16 && d->key_len <= ST_KEY_MAX &&
	          memcmp(d->key, k.b, 6) == 0 && (d->del || d->val != NULL);
	if (ok && !d->del) {
		st_value item;
		sh_arena_reset(tmp);
		ok = st_codec_decode(tmp, d->val, d->val_len, &item, NULL) == SHOAL_OK;
	}
	if (!ok)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "st_index_apply: malformed delta %u (seq %llu)", i,
		               (unsigned long long)d->seq);
	return SHOAL_OK;
}

static const st_table_info *table_by_id(const st_table_info *t, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (t[i].def.id == id)
			return &t[i];
	return NULL;
}

bool st_ix_index_wanted(const st_table_info *t, uint32_t table_id, uint32_t next_table_id,
                        uint16_t id)
{
	/* A table this group has not been told about yet (its define may
	 * arrive after the source group's: the router defines groups one by
	 * one and repairs a missed define later) keeps its entries; a table id
	 * below every id defined here and absent was dropped. */
	if (t == NULL)
		return table_id >= next_table_id;
	for (uint32_t i = 0; i < t->def.n_indexes; i++)
		if (t->def.indexes[i].id == id)
			return t->def.indexes[i].status != ST_INDEX_DELETING;
	return id >= t->def.next_index_id; /* not heard of yet */
}

/* Size of the entry stored under k (0 and *exists false if none). */
static int stored_size(st_txn *txn, const MDB_val *k, sh_arena *tmp, bool *exists, size_t *size,
                       char *errmsg)
{
	MDB_val v;
	*exists = false;
	*size = 0;
	int mrc = mdb_get(txn->txn, txn->env->data, (MDB_val *)k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(data)", errmsg);
	st_value item;
	sh_arena_reset(tmp);
	int rc = st_codec_decode(tmp, v.mv_data, v.mv_size, &item, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*exists = true;
	*size = st_item_size(&item);
	return SHOAL_OK;
}

st_ix_count_acc *st_ix_count_slot(st_ix_count_acc *acc, uint32_t *n, uint32_t table, uint16_t index)
{
	uint32_t j = 0;
	while (j < *n && (acc[j].table != table || acc[j].index != index))
		j++;
	if (j == *n)
		acc[(*n)++] = (st_ix_count_acc){table, index, 0, 0};
	return &acc[j];
}

int st_ix_count_flush(st_txn *txn, const st_ix_count_acc *acc, uint32_t n, char *errmsg)
{
	int rc = SHOAL_OK;
	for (uint32_t j = 0; rc == SHOAL_OK && j < n; j++)
		if (acc[j].items != 0 || acc[j].bytes != 0)
			rc = st_ix_state_count(txn, acc[j].table, acc[j].index, acc[j].items,
			                       acc[j].bytes, errmsg);
	return rc;
}

int st_ix_entry_apply(st_txn *txn, const st_delta *d, sh_arena *tmp, st_ix_count_acc *acc,
                      char *errmsg)
{
	MDB_val k = {d->key_len, (void *)d->key};
	bool exists;
	size_t old_size;
	int rc = stored_size(txn, &k, tmp, &exists, &old_size, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (d->del) {
		if (!exists)
			return SHOAL_OK;
		int mrc = mdb_del(txn->txn, txn->env->data, &k, NULL);
		if (mrc != 0)
			return st_lmdb_err(mrc, "mdb_del(data)", errmsg);
		acc->items--;
		acc->bytes -= (int64_t)old_size;
		return SHOAL_OK;
	}
	MDB_val v = {d->val_len, (void *)d->val};
	int mrc = mdb_put(txn->txn, txn->env->data, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(data)", errmsg);
	st_value item;
	sh_arena_reset(tmp);
	rc = st_codec_decode(tmp, d->val, d->val_len, &item, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	acc->items += exists ? 0 : 1;
	acc->bytes += (int64_t)st_item_size(&item) - (int64_t)old_size;
	return SHOAL_OK;
}

/* The first delta of a range FENCED or AWAY as txn sees it: WRONG_GROUP,
 * with the range in *refused; state[i] (state may be NULL) is the state of
 * the record holding delta i (0: none), for the log of OUT ranges. */
static int refusal_of(MDB_txn *txn, st_env *env, const st_delta *d, uint32_t n, uint8_t *state,
                      st_index_refusal *refused, char *errmsg)
{
	for (uint32_t i = 0; i < n; i++) {
		st_part_rec r;
		int rc = st_part_rec_at(txn, env, ST_PART_GSI, d[i].hash, &r, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (state != NULL)
			state[i] = r.state;
		if (r.state != ST_PART_FENCED && r.state != ST_PART_AWAY)
			continue;
		if (refused != NULL)
			*refused = (st_index_refusal){r.lo, r.hi, r.state, r.to_group};
		if (r.state == ST_PART_AWAY && r.to_group == 0) /* a target's, until its own */
			return sh_errf(errmsg, SHOAL_E_WRONG_GROUP,
			               "GSI hash %016" PRIx64 " is not applied by this group yet: its "
			               "range [%016" PRIx64 ", %016" PRIx64 "] is being copied in",
			               d[i].hash, r.lo, r.hi);
		return sh_errf(errmsg, SHOAL_E_WRONG_GROUP,
		               "GSI hash %016" PRIx64 " is not applied by this group: its range "
		               "[%016" PRIx64 ", %016" PRIx64 "] is %s (%s group %" PRIu32 ")",
		               d[i].hash, r.lo, r.hi, st_part_state_name(r.state),
		               r.state == ST_PART_AWAY ? "moved to" : "moving to", r.to_group);
	}
	return SHOAL_OK;
}

int st_index_apply_check(st_env *env, const st_delta *d, uint32_t n, st_index_refusal *refused,
                         char *errmsg)
{
	if (!st_part_any(env))
		return SHOAL_OK;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = refusal_of(txn, env, d, n, NULL, refused, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

int st_index_apply(st_txn *txn, uint32_t source_group, const st_delta *d, uint32_t n,
                   st_index_refusal *refused, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	sh_arena a, tmp;
	sh_arena_init(&a);
	sh_arena_init(&tmp);
	int rc = SHOAL_OK;
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++)
		rc = delta_check(&d[i], &tmp, i, errmsg);
	/* The GSI space's moves (storage/parts.h): one branch without any. */
	st_part_gsi_view *gv = NULL;
	uint8_t *state = NULL;
	if (rc == SHOAL_OK && n > 0)
		rc = st_part_gsi_view_open(txn, source_group, &a, &gv, errmsg);
	if (rc == SHOAL_OK && gv != NULL)
		rc = (state = sh_arena_calloc(&a, n, 1)) == NULL
		         ? sh_errf(errmsg, SHOAL_E_NOMEM, "st_index_apply: out of memory")
		         : refusal_of(txn->txn, txn->env, d, n, state, refused, errmsg);
	if (rc != SHOAL_OK) {
		sh_arena_fini(&tmp);
		sh_arena_fini(&a);
		return rc; /* nothing written: the transaction stays usable */
	}

	/* Every delta may land as an entry on a half-full page. */
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++)
		bytes += 2 * ((uint64_t)d[i].key_len + d[i].val_len) + ST_RESERVE_PER_KEY;
	if ((rc = st_txn_reserve(txn, bytes, errmsg)) != SHOAL_OK) {
		sh_arena_fini(&tmp);
		sh_arena_fini(&a);
		return rc; /* nothing written */
	}

	uint8_t ak[6];
	applied_key(ak, source_group);
	uint64_t last, first_last;
	st_table_info *tables = NULL;
	uint32_t nt = 0;
	st_ix_count_acc *acc = NULL;
	uint32_t nacc = 0;
	rc = st_ix_meta_get_u64(txn->txn, txn->env, ak, sizeof(ak), &last, errmsg);
	first_last = last;
	uint32_t next_table_id = 1;
	if (rc == SHOAL_OK && n > 0)
		rc = st_ix_tables(txn->txn, txn->env, &a, &tables, &nt, errmsg);
	if (rc == SHOAL_OK && n > 0)
		rc = st_catalog_next_table_id(txn->txn, txn->env, &next_table_id, errmsg);
	if (rc == SHOAL_OK && n > 0) {
		acc = sh_arena_calloc(&a, n, sizeof(*acc));
		if (acc == NULL)
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_index_apply: out of memory");
	}
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++) {
		uint32_t slot = UINT32_MAX;
		if (gv != NULL && (rc = st_part_gsi_mark(gv, d[i].hash, &slot, errmsg)) != SHOAL_OK)
			break;
		if (slot != UINT32_MAX) {
			/* A pinned range: its own watermark, not the group's. */
			if (d[i].seq <= st_part_gsi_mark_seq(gv, slot))
				continue; /* redelivered */
			st_part_gsi_mark_advance(gv, slot, d[i].seq);
		} else {
			if (d[i].seq <= last)
				continue; /* redelivered */
			last = d[i].seq;
		}
		const st_table_info *t = table_by_id(tables, nt, d[i].table_id);
		if (!st_ix_index_wanted(t, d[i].table_id, next_table_id, d[i].index_id))
			continue; /* deleted index or table */
		rc = st_ix_entry_apply(txn, &d[i], &tmp,
		                       st_ix_count_slot(acc, &nacc, d[i].table_id, d[i].index_id),
		                       errmsg);
		if (rc == SHOAL_OK && state != NULL && state[i] == ST_PART_OUT)
			rc = st_part_log(txn, ST_PART_GSI, d[i].hash, d[i].key, d[i].key_len,
			                 d[i].del ? NULL : d[i].val, d[i].del ? 0 : d[i].val_len,
			                 errmsg);
	}
	if (rc == SHOAL_OK)
		rc = st_ix_count_flush(txn, acc, nacc, errmsg);
	if (rc == SHOAL_OK)
		rc = st_part_gsi_view_close(gv, errmsg);
	if (rc == SHOAL_OK && last != first_last)
		rc = st_ix_meta_put_u64(txn, ak, sizeof(ak), last, errmsg);
	sh_arena_fini(&tmp);
	sh_arena_fini(&a);
	if (rc != SHOAL_OK && env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}
