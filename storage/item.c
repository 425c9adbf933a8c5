/*
 * item.c -- reading one stored item by its LMDB key, for the write path (old
 * image) and the read path (GetItem).  The value bytes live in LMDB's map only
 * until the transaction ends, so the codec copies everything into the arena.
 */
#include "codec.h"
#include "engine.h"

int st_item_read(MDB_txn *txn, st_env *env, const st_key *k, sh_arena *a, st_value **item,
                 char *errmsg)
{
	MDB_val key = {k->len, (void *)k->b}, val;
	*item = NULL;
	int rc = mdb_get(txn, env->data, &key, &val);
	if (rc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_get(data)", errmsg);
	st_value *v = sh_arena_alloc(a, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_item_read: out of memory");
	rc = st_codec_decode(a, val.mv_data, val.mv_size, v, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*item = v;
	return SHOAL_OK;
}
