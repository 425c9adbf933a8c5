/*
 * index_write.c -- index maintenance on the write path.
 *
 * Every base write (st_put, st_update, st_delete) and nothing else changes
 * base items, so this is the one place where entries are derived from items.
 * For each index of the table the old entry (from the old image, if any) and
 * the new entry (from the new image, if any) are computed (index_entry.c),
 * then:
 *
 *   LSI  (synchronous): the old entry's key is deleted when it exists and the
 *        new one does not or has another key; the new entry is written when it
 *        exists and its key or value changed.  The item collection (base items
 *        and LSI entries of one partition-key value) is sized in a counter kept
 *        for tables with LSIs only (meta 0x01 'C', index_int.h); a write that
 *        would grow it past the environment's collection_limit is refused with
 *        ItemCollectionSizeLimitExceededException.
 *   GSI  (CREATING or ACTIVE; asynchronous): the same decisions become outbox
 *        deltas: delete of the old entry, upsert of the new one.  A write that
 *        changes nothing an index holds (an unprojected attribute) appends
 *        nothing.  DELETING GSIs are not maintained.
 *
 * A partition move's writes (txn->part_raw: st_part_ingest, st_part_purge)
 * maintain LSI entries and the collection counter the same way, but append
 * no GSI deltas (a GSI's entries live in its own hash space, which does not
 * move) and are not held to the collection limit (the source accepted the
 * collection).
 *
 * The plan is computed first, reading only, so that the one client error it
 * can give (the collection limit) leaves the transaction untouched; then the
 * base write happens, then st_ix_plan_apply writes entries, deltas and
 * counters (environmental errors only).
 */
#include <string.h>

#include "index_int.h"

typedef enum op_kind { OP_LSI_DEL, OP_LSI_PUT, OP_DELTA_DEL, OP_DELTA_PUT } op_kind;

typedef struct ix_op {
	op_kind kind;
	uint16_t index;
	const st_ix_entry *e;
} ix_op;

typedef struct lsi_count {
	uint16_t index;
	int64_t items, bytes;
} lsi_count;

struct st_ix_plan {
	uint32_t table;
	ix_op *ops;
	uint32_t n_ops;
	lsi_count *counts;
	uint32_t n_counts;
	bool coll; /* the table has LSIs: update the collection counter */
	uint8_t coll_key[22];
	int64_t coll_delta;     /* the change this write makes to it */
	uint64_t coll_size;     /* its new value (re-read and recomputed by apply) */
	const char *coll_attr;  /* tables with LSIs: the partition key's name (arena) */
	st_index_write *writes; /* per index changed, for ReturnConsumedCapacity */
	uint32_t n_writes;
};

static bool same_key(const st_ix_entry *a, const st_ix_entry *b)
{
	return a->key.len == b->key.len && memcmp(a->key.b, b->key.b, a->key.len) == 0;
}

static bool same_val(const st_ix_entry *a, const st_ix_entry *b)
{
	return a->val_len == b->val_len && memcmp(a->val, b->val, a->val_len) == 0;
}

static int collection_key(const st_table_def *t, const st_value *item, uint8_t k[22])
{
	const st_value *pk = st_map_get(item, t->key.hash.name, strlen(t->key.hash.name));
	if (pk == NULL)
		return SHOAL_E_INTERNAL;
	st_key h;
	st_key_partition(&h, t->id, 0, pk);
	k[0] = IX_META;
	k[1] = IX_META_COLL;
	memcpy(k + 2, h.b, 4);
	memcpy(k + 6, h.b + 6, 16);
	return SHOAL_OK;
}

int st_ix_plan_write(st_txn *txn, const st_table_info *t, const st_value *old_item,
                     const st_value *new_item, sh_arena *a, st_ix_plan **plan, char *errmsg)
{
	*plan = NULL;
	const st_table_def *d = &t->def;
	if (d->n_indexes == 0)
		return SHOAL_OK;
	st_ix_plan *p = sh_arena_calloc(a, 1, sizeof(*p));
	st_ix_entry *e = sh_arena_calloc(a, 2 * (size_t)d->n_indexes, sizeof(*e));
	if (p != NULL) {
		p->ops = sh_arena_calloc(a, 2 * (size_t)d->n_indexes, sizeof(*p->ops));
		p->counts = sh_arena_calloc(a, d->n_indexes, sizeof(*p->counts));
		p->writes = sh_arena_calloc(a, d->n_indexes, sizeof(*p->writes));
	}
	if (p == NULL || e == NULL || p->ops == NULL || p->counts == NULL || p->writes == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "index maintenance: out of memory");
	p->table = d->id;
	int64_t coll_delta = 0;
	bool has_lsi = false;
	for (uint32_t i = 0; i < d->n_indexes; i++) {
		const st_index_def *x = &d->indexes[i];
		has_lsi = has_lsi || x->local;
		/* A partition move's writes (txn->part_raw) carry no GSI
		 * deltas: the GSI entries stay where they are. */
		if (!x->local && (x->status == ST_INDEX_DELETING || txn->part_raw))
			continue;
		st_ix_entry *eo = &e[2 * i], *en = &e[2 * i + 1];
		if (st_ix_entry_of(d, x, old_item, a, eo) != SHOAL_OK ||
		    st_ix_entry_of(d, x, new_item, a, en) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "index maintenance: out of memory");
		bool same = eo->present && en->present && same_key(eo, en);
		bool del = eo->present && !same;
		bool put = en->present && (!same || !same_val(eo, en));
		if (del)
			p->ops[p->n_ops++] =
			    (ix_op){x->local ? OP_LSI_DEL : OP_DELTA_DEL, x->id, eo};
		if (put)
			p->ops[p->n_ops++] =
			    (ix_op){x->local ? OP_LSI_PUT : OP_DELTA_PUT, x->id, en};
		if (del || put) {
			/* The caller's arena: the definition may live in the
			 * transaction's (st_txn_table), which ends first. */
			const char *name = sh_arena_strndup(a, x->name, strlen(x->name));
			if (name == NULL)
				return sh_errf(errmsg, SHOAL_E_NOMEM, "index plan: out of memory");
			p->writes[p->n_writes++] = (st_index_write){
			    name, x->local, del, put, del ? eo->size : 0, put ? en->size : 0};
		}
		if (x->local && (del || put)) {
			lsi_count *c = &p->counts[p->n_counts++];
			c->index = x->id;
			c->items = (en->present ? 1 : 0) - (eo->present ? 1 : 0);
			c->bytes = (int64_t)(en->present ? en->size : 0) -
			           (int64_t)(eo->present ? eo->size : 0);
			coll_delta += c->bytes;
		}
	}
	if (has_lsi) {
		coll_delta += (int64_t)(new_item != NULL ? st_item_size(new_item) : 0) -
		              (int64_t)(old_item != NULL ? st_item_size(old_item) : 0);
		const st_value *any = new_item != NULL ? new_item : old_item;
		if (any == NULL || collection_key(d, any, p->coll_key) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_INTERNAL, "index maintenance: no item key");
		uint64_t cur;
		int rc = st_ix_meta_get_u64(txn->txn, txn->env, p->coll_key, sizeof(p->coll_key),
		                            &cur, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		/* A partition move copies a collection the source accepted. */
		if (!txn->part_raw && coll_delta > 0 &&
		    cur + (uint64_t)coll_delta > txn->env->collection_limit)
			return sh_errf(errmsg, SHOAL_E_COLLECTION_SIZE,
			               "Item collection size limit exceeded. The size of an item "
			               "collection (items and local secondary index entries of one "
			               "partition key value) cannot exceed %llu bytes",
			               (unsigned long long)txn->env->collection_limit);
		if (coll_delta < 0)
			cur = (uint64_t)-coll_delta < cur ? cur - (uint64_t)-coll_delta : 0;
		else
			cur += (uint64_t)coll_delta;
		p->coll = coll_delta != 0;
		p->coll_delta = coll_delta;
		p->coll_size = cur;
		/* For ReturnItemCollectionMetrics; the caller's arena as above. */
		p->coll_attr = sh_arena_strndup(a, d->key.hash.name, strlen(d->key.hash.name));
		if (p->coll_attr == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "index plan: out of memory");
	}
	if (p->n_ops == 0 && !has_lsi)
		return SHOAL_OK;
	*plan = p;
	return SHOAL_OK;
}

void st_ix_plan_writes(const st_ix_plan *p, st_index_write **writes, uint32_t *n)
{
	*writes = p != NULL && p->n_writes > 0 ? p->writes : NULL;
	*n = p != NULL ? p->n_writes : 0;
}

bool st_ix_plan_collection(const st_ix_plan *p, const char **attr, uint64_t *size)
{
	if (p == NULL || p->coll_attr == NULL)
		return false;
	*attr = p->coll_attr;
	*size = p->coll_size;
	return true;
}

int st_ix_plan_apply(st_txn *txn, st_ix_plan *p, char *errmsg)
{
	if (p == NULL)
		return SHOAL_OK;
	int rc = SHOAL_OK;
	for (uint32_t i = 0; rc == SHOAL_OK && i < p->n_ops; i++) {
		const ix_op *op = &p->ops[i];
		MDB_val k = {op->e->key.len, (void *)op->e->key.b};
		MDB_val v = {op->e->val_len, op->e->val};
		int mrc = 0;
		switch (op->kind) {
		case OP_LSI_DEL:
			mrc = mdb_del(txn->txn, txn->env->data, &k, NULL);
			if (mrc == MDB_NOTFOUND)
				mrc = 0;
			break;
		case OP_LSI_PUT:
			mrc = mdb_put(txn->txn, txn->env->data, &k, &v, 0);
			break;
		case OP_DELTA_DEL:
		case OP_DELTA_PUT:
			rc = st_outbox_append(txn, op->e->hash, p->table, op->index,
			                      op->kind == OP_DELTA_DEL, &op->e->key, op->e->val,
			                      op->e->val_len, errmsg);
			break;
		}
		if (mrc != 0)
			rc = st_lmdb_err(mrc, "index entry write", errmsg);
	}
	for (uint32_t i = 0; rc == SHOAL_OK && i < p->n_counts; i++)
		rc = st_ix_state_count(txn, p->table, p->counts[i].index, p->counts[i].items,
		                       p->counts[i].bytes, errmsg);
	if (rc == SHOAL_OK && p->coll) {
		/* The delta on the counter as it is now, not the planned value:
		 * a transaction plans all its writes before it applies any, and
		 * two of them in one collection must both count. */
		uint64_t cur;
		rc = st_ix_meta_get_u64(txn->txn, txn->env, p->coll_key, sizeof(p->coll_key), &cur,
		                        errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (p->coll_delta < 0)
			cur = (uint64_t)-p->coll_delta < cur ? cur - (uint64_t)-p->coll_delta : 0;
		else
			cur += (uint64_t)p->coll_delta;
		p->coll_size = cur;
		if (p->coll_size == 0) {
			MDB_val k = {sizeof(p->coll_key), (void *)p->coll_key};
			int mrc = mdb_del(txn->txn, txn->env->meta, &k, NULL);
			if (mrc != 0 && mrc != MDB_NOTFOUND)
				rc = st_lmdb_err(mrc, "mdb_del(meta collection)", errmsg);
		} else {
			rc = st_ix_meta_put_u64(txn, p->coll_key, sizeof(p->coll_key), p->coll_size,
			                        errmsg);
		}
	}
	return rc;
}
