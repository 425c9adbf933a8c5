/*
 * index_entry.c -- what an item looks like in a secondary index: its
 * projection, its entry (LMDB key, encoded value, placement hash), the order
 * of entries (st_index_entry_cmp) and the LastEvaluatedKey of an entry.
 *
 * An item has an entry in index x when it holds x's partition key and (if x
 * has one) sort key with the types of their AttributeDefinitions (the write
 * path refuses other types; a stored item of another type, which cannot
 * happen, is simply not indexed).  The entry's value is the projection:
 *   ALL        the item as it is
 *   KEYS_ONLY  the table's key attributes and the index's
 *   INCLUDE    those and the NonKeyAttributes the item has
 * encoded by the item codec, so entries of equal items are equal bytes
 * (values are normalised and maps sorted), which is how the write path tells
 * that a projected value did not change.
 */
#include <string.h>

#include "codec.h"
#include "index_int.h"

static const st_value *attr(const st_value *item, const char *name)
{
	return name != NULL ? st_map_get(item, name, strlen(name)) : NULL;
}

static int copy_attr(sh_arena *a, st_value *m, const st_value *item, const char *name)
{
	const st_value *v = attr(item, name);
	if (v == NULL)
		return SHOAL_OK;
	return st_map_set(a, m, name, strlen(name), v);
}

int st_ix_project(const st_table_def *t, const st_index_def *x, const st_value *item, sh_arena *a,
                  const st_value **out)
{
	if (x->projection == ST_PROJ_ALL) {
		*out = item;
		return SHOAL_OK;
	}
	st_value *m = st_new_map(a, 4 + x->n_include);
	if (m == NULL)
		return SHOAL_E_NOMEM;
	const char *names[4] = {t->key.hash.name, t->key.range.name, x->key.hash.name,
	                        x->key.range.name};
	int rc = SHOAL_OK;
	for (int i = 0; rc == SHOAL_OK && i < 4; i++)
		rc = copy_attr(a, m, item, names[i]);
	if (x->projection == ST_PROJ_INCLUDE)
		for (uint32_t i = 0; rc == SHOAL_OK && i < x->n_include; i++)
			rc = copy_attr(a, m, item, x->include[i]);
	if (rc != SHOAL_OK)
		return rc;
	*out = m;
	return SHOAL_OK;
}

/* The index key values of item, or false when it has no entry. */
static bool index_keys(const st_index_def *x, const st_value *item, const st_value **ipk,
                       const st_value **isk)
{
	*ipk = attr(item, x->key.hash.name);
	*isk = NULL;
	if (*ipk == NULL || (*ipk)->type != x->key.hash.type)
		return false;
	if (x->key.range.name != NULL) {
		*isk = attr(item, x->key.range.name);
		if (*isk == NULL || (*isk)->type != x->key.range.type)
			return false;
	}
	return true;
}

void st_ix_entry_key(const st_table_def *t, const st_index_def *x, uint32_t shard,
                     const st_value *ipk, const st_value *isk, const st_value *bpk,
                     const st_value *bsk, st_key *k)
{
	uint8_t digest[16];
	st_key_base_digest(digest, t->id, bpk, bsk);
	if (x->local)
		st_key_lsi_entry(k, t->id, x->id, bpk, isk, digest);
	else
		st_key_gsi_entry(k, t->id, x->id, shard, ipk, isk, digest);
}

int st_ix_entry_of(const st_table_def *t, const st_index_def *x, const st_value *item, sh_arena *a,
                   st_ix_entry *out)
{
	out->present = false;
	const st_value *ipk, *isk;
	if (item == NULL || !index_keys(x, item, &ipk, &isk))
		return SHOAL_OK;
	const st_value *bpk = attr(item, t->key.hash.name);
	const st_value *bsk = attr(item, t->key.range.name);
	if (bpk == NULL || (t->key.range.name != NULL && bsk == NULL))
		return SHOAL_OK; /* not a stored item: never happens */
	uint32_t shard = x->local ? 0 : st_index_shard(t->id, bpk, bsk, x->write_shards);
	st_ix_entry_key(t, x, shard, ipk, isk, bpk, bsk, &out->key);
	out->hash = x->local ? st_key_hash(t->id, bpk) : st_index_hash(t->id, x->id, shard, ipk);
	const st_value *proj;
	int rc = st_ix_project(t, x, item, a, &proj);
	if (rc == SHOAL_OK)
		rc = st_codec_encode(a, proj, &out->val, &out->val_len);
	if (rc != SHOAL_OK)
		return SHOAL_E_NOMEM;
	out->size = st_item_size(proj);
	out->present = true;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Order and LastEvaluatedKey                                                */
/* ------------------------------------------------------------------------ */

/* The base-key digest of an entry item (zeros if it lacks the table keys). */
static void item_digest(const st_table_def *t, const st_value *item, uint8_t d[16])
{
	const st_value *bpk = attr(item, t->key.hash.name);
	const st_value *bsk = attr(item, t->key.range.name);
	if (bpk == NULL || (bpk->type != ST_S && bpk->type != ST_N && bpk->type != ST_B) ||
	    (bsk != NULL && bsk->type != ST_S && bsk->type != ST_N && bsk->type != ST_B)) {
		memset(d, 0, 16);
		return;
	}
	st_key_base_digest(d, t->id, bpk, bsk);
}

int st_index_entry_cmp(const st_table_def *t, const st_index_def *x, const st_value *a,
                       const st_value *b)
{
	if (x->key.range.name != NULL) {
		const st_value *sa = attr(a, x->key.range.name);
		const st_value *sb = attr(b, x->key.range.name);
		bool oka = sa != NULL && sa->type == x->key.range.type;
		bool okb = sb != NULL && sb->type == x->key.range.type;
		if (oka != okb)
			return oka ? 1 : -1; /* never: entries have their keys */
		if (oka) {
			int c = st_value_cmp(sa, sb);
			if (c != 0)
				return c;
		}
	}
	uint8_t da[16], db[16];
	item_digest(t, a, da);
	item_digest(t, b, db);
	return memcmp(da, db, 16);
}

int st_index_last_key(const st_table_def *t, const st_index_def *x, const st_value *item,
                      sh_arena *a, st_value **out, char *errmsg)
{
	*out = NULL;
	st_value *m = st_new_map(a, 4);
	if (m == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_index_last_key: out of memory");
	const char *names[4] = {t->key.hash.name, t->key.range.name, x->key.hash.name,
	                        x->key.range.name};
	for (int i = 0; i < 4; i++) {
		const st_value *v = attr(item, names[i]);
		if (v == NULL)
			continue;
		st_value copy;
		if (st_value_copy(a, v, &copy) != SHOAL_OK ||
		    st_map_set(a, m, names[i], strlen(names[i]), &copy) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "st_index_last_key: out of memory");
	}
	*out = m;
	return SHOAL_OK;
}

int st_delta_item(const st_delta *d, sh_arena *a, st_value *item, char *errmsg)
{
	if (d->del || d->val == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "a delete carries no item");
	return st_codec_decode(a, d->val, d->val_len, item, errmsg);
}
