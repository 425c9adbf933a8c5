/*
 * index_meta.c -- what a group knows of each of its indexes: the index state
 * record (backfill progress and entry counters), the backfill steps of a new
 * GSI, and st_index_progress_list.
 *
 * Index state record (meta key 0x01 'X' | table id (4) | index id (2), see
 * index_int.h), integers big-endian:
 *
 *   offset  size  field
 *   0       1     record version, 1
 *   1       1     flags: bit 0 = backfill done
 *   2       8     backfill_seq: outbox last_seq when the backfill finished
 *   10      8     entries of the index stored in this group
 *   18      8     their st_item_size sum
 *   26      2     cursor length (0: the backfill has not started)
 *   28      *     cursor: the data key of the last base item the backfill read
 *
 * An index without a record has its backfill done and no entries: LSIs and
 * indexes created with the table start that way; st_table_redefine writes a
 * not-done record for each GSI it adds.
 *
 * Backfill.  A step reads base items in LMDB key order after the cursor, and
 * appends an upsert delta for each item that has the index's keys, then moves
 * the cursor, all in the step's write transaction.  The cursor and the items
 * are replicated state, so every replica appends the same deltas with the
 * same seqs.  Writes that happen while the backfill runs append their own
 * deltas (the write path treats CREATING GSIs like ACTIVE ones); an item the
 * backfill reaches later is upserted again with its current value, in seq
 * order after the write's deltas, so the target converges either way.
 */
#include <string.h>

#include "codec.h"
#include "index_int.h"

#define STATE_VERSION 1
#define STATE_FIXED   28

static void state_key(uint8_t k[8], uint32_t table, uint16_t index)
{
	k[0] = IX_META;
	k[1] = IX_META_STATE;
	st_put_be32(k + 2, table);
	st_put_be16(k + 6, index);
}

int st_ix_meta_get_u64(MDB_txn *txn, st_env *env, const uint8_t *key, size_t klen, uint64_t *out,
                       char *errmsg)
{
	MDB_val k = {klen, (void *)key}, v;
	*out = 0;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta)", errmsg);
	if (v.mv_size != 8)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt index meta record");
	*out = st_get_be64(v.mv_data);
	return SHOAL_OK;
}

int st_ix_meta_put_u64(st_txn *txn, const uint8_t *key, size_t klen, uint64_t val, char *errmsg)
{
	uint8_t b[8];
	st_put_be64(b, val);
	MDB_val k = {klen, (void *)key}, v = {8, b};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta)", errmsg);
	return SHOAL_OK;
}

int st_ix_state_get(MDB_txn *txn, st_env *env, uint32_t table, uint16_t index, st_ix_state *out,
                    char *errmsg)
{
	memset(out, 0, offsetof(st_ix_state, cursor));
	out->backfill_done = true;
	uint8_t kb[8];
	state_key(kb, table, index);
	MDB_val k = {sizeof(kb), kb}, v;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta index state)", errmsg);
	const uint8_t *p = v.mv_data;
	if (v.mv_size < STATE_FIXED || p[0] != STATE_VERSION || st_get_be16(p + 26) > ST_KEY_MAX ||
	    v.mv_size != (size_t)STATE_FIXED + st_get_be16(p + 26))
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "corrupt index state record (table %u, index %u)", table, index);
	out->backfill_done = (p[1] & 1) != 0;
	out->backfill_seq = st_get_be64(p + 2);
	out->item_count = st_get_be64(p + 10);
	out->size_bytes = st_get_be64(p + 18);
	out->cursor_len = st_get_be16(p + 26);
	memcpy(out->cursor, p + STATE_FIXED, out->cursor_len);
	return SHOAL_OK;
}

int st_ix_state_put(st_txn *txn, uint32_t table, uint16_t index, const st_ix_state *s, char *errmsg)
{
	uint8_t buf[STATE_FIXED + ST_KEY_MAX];
	buf[0] = STATE_VERSION;
	buf[1] = s->backfill_done ? 1 : 0;
	st_put_be64(buf + 2, s->backfill_seq);
	st_put_be64(buf + 10, s->item_count);
	st_put_be64(buf + 18, s->size_bytes);
	st_put_be16(buf + 26, s->cursor_len);
	memcpy(buf + STATE_FIXED, s->cursor, s->cursor_len);
	uint8_t kb[8];
	state_key(kb, table, index);
	MDB_val k = {sizeof(kb), kb}, v = {STATE_FIXED + (size_t)s->cursor_len, buf};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta index state)", errmsg);
	return SHOAL_OK;
}

static uint64_t add_sat(uint64_t v, int64_t d)
{
	if (d >= 0)
		return v + (uint64_t)d >= v ? v + (uint64_t)d : UINT64_MAX;
	uint64_t m = (uint64_t)(-(d + 1)) + 1;
	return v > m ? v - m : 0;
}

int st_ix_state_count(st_txn *txn, uint32_t table, uint16_t index, int64_t items, int64_t bytes,
                      char *errmsg)
{
	if (items == 0 && bytes == 0)
		return SHOAL_OK;
	st_ix_state s;
	int rc = st_ix_state_get(txn->txn, txn->env, table, index, &s, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	s.item_count = add_sat(s.item_count, items);
	s.size_bytes = add_sat(s.size_bytes, bytes);
	return st_ix_state_put(txn, table, index, &s, errmsg);
}

int st_ix_forget_table(st_txn *txn, uint32_t table, char *errmsg)
{
	uint8_t p[6] = {IX_META, IX_META_STATE};
	st_put_be32(p + 2, table);
	int rc = st_delete_prefix(txn, txn->env->meta, p, 6, "delete(meta index state)", errmsg);
	p[1] = IX_META_COLL;
	if (rc == SHOAL_OK)
		rc = st_delete_prefix(txn, txn->env->meta, p, 6, "delete(meta collection)", errmsg);
	return rc;
}

int st_ix_drop_index(st_txn *txn, uint32_t table, uint16_t index, char *errmsg)
{
	st_key k;
	st_key_table(&k, table, index);
	int rc = st_delete_prefix(txn, txn->env->data, k.b, k.len, "delete(data index)", errmsg);
	uint8_t kb[8];
	state_key(kb, table, index);
	MDB_val mk = {sizeof(kb), kb};
	int mrc = rc == SHOAL_OK ? mdb_del(txn->txn, txn->env->meta, &mk, NULL) : 0;
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_del(meta index state)", errmsg);
	return rc;
}

int st_ix_tables(MDB_txn *txn, st_env *env, sh_arena *a, st_table_info **out, uint32_t *n,
                 char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_stat stat;
	int mrc = mdb_stat(txn, env->catalog, &stat);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_stat(catalog)", errmsg);
	st_table_info *t = sh_arena_calloc(a, stat.ms_entries + 1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "index: out of memory");
	MDB_cursor *c;
	mrc = mdb_cursor_open(txn, env->catalog, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
	MDB_val k, v;
	int rc = SHOAL_OK;
	uint32_t count = 0;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && count < stat.ms_entries;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		char *name = sh_arena_strndup(a, k.mv_data, k.mv_size);
		if (name == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "index: out of memory");
			break;
		}
		rc = st_catalog_decode(name, v.mv_data, v.mv_size, a, &t[count], errmsg);
		if (rc != SHOAL_OK)
			break;
		count++;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
	mdb_cursor_close(c);
	if (rc == SHOAL_OK) {
		*out = t;
		*n = count;
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Backfill                                                                  */
/* ------------------------------------------------------------------------ */

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

static const st_index_def *index_by_id(const st_table_def *t, uint16_t id)
{
	for (uint32_t i = 0; i < t->n_indexes; i++)
		if (t->indexes[i].id == id)
			return &t->indexes[i];
	return NULL;
}

static int backfill(st_txn *txn, const st_table_info *t, const st_index_def *x, st_ix_state *s,
                    uint32_t max_items, bool *done, char *errmsg)
{
	st_key prefix;
	st_key_table(&prefix, t->def.id, 0);
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	MDB_val k, v;
	if (s->cursor_len > 0) {
		k.mv_size = s->cursor_len;
		k.mv_data = s->cursor;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == s->cursor_len &&
		    memcmp(k.mv_data, s->cursor, s->cursor_len) == 0)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	} else {
		k.mv_size = prefix.len;
		k.mv_data = prefix.b;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	int rc = SHOAL_OK;
	uint32_t n = 0;
	sh_arena tmp;
	sh_arena_init(&tmp);
	for (; mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < prefix.len || memcmp(k.mv_data, prefix.b, prefix.len) != 0) {
			mrc = MDB_NOTFOUND;
			break;
		}
		if (n == (max_items > 0 ? max_items : 1))
			break;
		/* An item of a range moving out (FENCED) or away (AWAY: moved,
		 * being purged, or copied in and not owned yet) is another
		 * group's to index: its upsert, shipped after the move's
		 * cutover, could overtake the new owner's newer delta of the
		 * same entry (a stale entry, or a deleted item's back). */
		char why[SH_ERRMSG_SIZE];
		int prc =
		    k.mv_size >= ST_KEY_HEADER
		        ? st_part_check_range(txn->txn, txn->env, t->def.id,
		                              st_get_be64((const uint8_t *)k.mv_data + 6),
		                              st_get_be64((const uint8_t *)k.mv_data + 6), why)
		        : SHOAL_OK;
		if (prc != SHOAL_OK && prc != SHOAL_E_WRONG_GROUP) {
			rc = sh_errf(errmsg, prc, "%s", why);
			break;
		}
		memcpy(s->cursor, k.mv_data, k.mv_size);
		s->cursor_len = (uint16_t)k.mv_size;
		n++;
		if (prc == SHOAL_E_WRONG_GROUP)
			continue;
		sh_arena_reset(&tmp);
		st_value item;
		rc = st_codec_decode(&tmp, v.mv_data, v.mv_size, &item, errmsg);
		st_ix_entry e;
		if (rc == SHOAL_OK)
			rc = st_ix_entry_of(&t->def, x, &item, &tmp, &e);
		if (rc == SHOAL_OK && e.present)
			rc = st_txn_reserve(
			    txn, 2 * ((uint64_t)e.key.len + e.val_len) + ST_RESERVE_PER_KEY,
			    errmsg);
		if (rc == SHOAL_OK && e.present)
			rc = st_outbox_append(txn, e.hash, t->def.id, x->id, false, &e.key, e.val,
			                      e.val_len, errmsg);
		if (rc != SHOAL_OK)
			break;
	}
	sh_arena_fini(&tmp);
	mdb_cursor_close(c);
	if (rc != SHOAL_OK)
		return rc;
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
	*done = mrc == MDB_NOTFOUND;
	if (*done) {
		s->backfill_done = true;
		rc = st_outbox_last(txn, &s->backfill_seq, errmsg);
	}
	return rc;
}

int st_backfill_step(st_txn *txn, const char *table, uint16_t index_id, uint32_t max_items,
                     bool *done, char *errmsg)
{
	*done = true;
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	int rc = st_table_load(txn->txn, txn->env, table, &a, &t, errmsg);
	if (rc == SHOAL_E_NOT_FOUND || rc == SHOAL_E_VALIDATION) {
		sh_arena_fini(&a);
		return SHOAL_OK; /* the table is gone: nothing to do */
	}
	const st_index_def *x = rc == SHOAL_OK ? index_by_id(&t.def, index_id) : NULL;
	st_ix_state s;
	if (rc == SHOAL_OK && x != NULL && !x->local && x->status != ST_INDEX_DELETING) {
		rc = st_ix_state_get(txn->txn, txn->env, t.def.id, index_id, &s, errmsg);
		if (rc == SHOAL_OK && !s.backfill_done) {
			rc = backfill(txn, &t, x, &s, max_items, done, errmsg);
			if (rc == SHOAL_OK)
				rc = st_ix_state_put(txn, t.def.id, index_id, &s, errmsg);
		}
	}
	sh_arena_fini(&a);
	if (rc != SHOAL_OK && env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

int st_index_progress_list(st_env *env, sh_arena *a, st_index_progress **out, uint32_t *n,
                           char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	st_table_info *t;
	uint32_t nt;
	int rc = st_ix_tables(txn, env, a, &t, &nt, errmsg);
	uint32_t total = 0;
	for (uint32_t i = 0; rc == SHOAL_OK && i < nt; i++)
		total += t[i].def.n_indexes;
	st_index_progress *p = NULL;
	if (rc == SHOAL_OK) {
		p = sh_arena_calloc(a, total + 1, sizeof(*p));
		if (p == NULL)
			rc =
			    sh_errf(errmsg, SHOAL_E_NOMEM, "st_index_progress_list: out of memory");
	}
	uint32_t k = 0;
	for (uint32_t i = 0; rc == SHOAL_OK && i < nt; i++) {
		for (uint32_t j = 0; rc == SHOAL_OK && j < t[i].def.n_indexes; j++) {
			const st_index_def *x = &t[i].def.indexes[j];
			st_ix_state s;
			rc = st_ix_state_get(txn, env, t[i].def.id, x->id, &s, errmsg);
			p[k] = (st_index_progress){
			    .table = t[i].def.name,
			    .table_id = t[i].def.id,
			    .index = x->name,
			    .index_id = x->id,
			    .local = x->local,
			    .write_shards = x->write_shards,
			    .status = x->status,
			    .backfill_done = s.backfill_done,
			    .backfill_seq = s.backfill_seq,
			    .item_count = s.item_count,
			    .size_bytes = s.size_bytes,
			};
			k++;
		}
	}
	mdb_txn_abort(txn);
	if (rc == SHOAL_OK) {
		*out = p;
		*n = k;
	}
	return rc;
}
