/*
 * clustermap.c -- group 0's copy of the cluster map (issue 14; the map is
 * common/cluster_map.h, what it means is common/placement.h).
 *
 * Stored in the meta DBI under the named key "cluster_map" as the map's
 * canonical encoding (cluster_map_codec.c), so it travels in snapshots with
 * the rest of meta.  Absent until the first change: the cluster then runs on
 * the cluster file's birth map (epoch 1).
 *
 * A change replaces the whole map, as a compare-and-set on the epoch: the
 * proposer computed it from the map of epoch prev_epoch, and the apply
 * refuses it (SHOAL_E_WRONG_EPOCH, the same on every replica) if the stored
 * map has moved on meanwhile -- two changes computed from one map cannot both
 * land.  The new bytes must decode to a valid map with a higher epoch.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "engine.h"

static const char KEY[] = "cluster_map";

static int stored_epoch(MDB_txn *txn, st_env *env, uint64_t *epoch, MDB_val *v, char *errmsg)
{
	MDB_val k = {sizeof(KEY) - 1, (void *)KEY};
	*epoch = 0;
	int mrc = mdb_get(txn, env->meta, &k, v);
	if (mrc == MDB_NOTFOUND) {
		v->mv_size = 0;
		v->mv_data = NULL;
		return SHOAL_OK;
	}
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta cluster_map)", errmsg);
	sh_map m;
	int rc = sh_map_decode(v->mv_data, v->mv_size, &m, errmsg);
	*epoch = m.epoch;
	sh_map_fini(&m);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record cluster_map");
	return SHOAL_OK;
}

int st_cluster_map_get(st_env *env, uint8_t **buf, size_t *len, uint64_t *epoch, char *errmsg)
{
	*buf = NULL;
	*len = 0;
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin", errmsg);
	MDB_val v;
	int rc = stored_epoch(txn, env, epoch, &v, errmsg);
	if (rc == SHOAL_OK && v.mv_size > 0) {
		if ((*buf = sh_malloc(v.mv_size)) == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
		} else {
			memcpy(*buf, v.mv_data, v.mv_size);
			*len = v.mv_size;
		}
	}
	mdb_txn_abort(txn);
	return rc;
}

int st_cluster_map_set(st_txn *txn, uint64_t prev_epoch, const uint8_t *buf, size_t len,
                       char *errmsg)
{
	uint64_t have;
	MDB_val old;
	int rc = stored_epoch(txn->txn, txn->env, &have, &old, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* Nothing stored: the cluster runs on the birth map, epoch 1. */
	uint64_t current = have != 0 ? have : 1;
	if (current != prev_epoch)
		return sh_errf(errmsg, SHOAL_E_WRONG_EPOCH,
		               "the cluster map changed meanwhile (epoch %llu, the change was made "
		               "from epoch %llu)",
		               (unsigned long long)current, (unsigned long long)prev_epoch);
	sh_map m;
	char msg[SH_ERRMSG_SIZE] = "";
	rc = sh_map_decode(buf, len, &m, msg);
	uint64_t epoch = m.epoch;
	sh_map_fini(&m);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "not a valid cluster map: %s", msg);
	if (epoch <= prev_epoch)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "a new cluster map must have a higher epoch than %llu (it has %llu)",
		               (unsigned long long)prev_epoch, (unsigned long long)epoch);
	MDB_val k = {sizeof(KEY) - 1, (void *)KEY}, v = {len, (void *)buf};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta cluster_map)", errmsg);
	return SHOAL_OK;
}
