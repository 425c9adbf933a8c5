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
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "engine.h"
#include "index_int.h"

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
	/* The header's epoch, without decoding a map of megabytes: enough for
	 * the compare-and-set and the epoch look.  (Checked whole when it was
	 * set -- but a snapshot installed from a peer brings it unchecked, so
	 * st_cluster_map_load, which hands it out, checks what it decodes.) */
	*epoch = sh_map_peek_epoch(v->mv_data, v->mv_size);
	if (*epoch == 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record cluster_map");
	return SHOAL_OK;
}

/* The stored map's epoch (0: none stored) and, when out is not NULL and a
 * map is stored, the map decoded into it (*found says so). */
static int read_stored(st_env *env, uint64_t *epoch, sh_map *out, bool *found, char *errmsg)
{
	*found = false;
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin", errmsg);
	MDB_val v;
	int rc = stored_epoch(txn, env, epoch, &v, errmsg);
	if (rc == SHOAL_OK && v.mv_size > 0 && out != NULL) {
		if (sh_map_decode(v.mv_data, v.mv_size, out, NULL) != SHOAL_OK ||
		    out->epoch != *epoch) {
			sh_map_fini(out);
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record cluster_map");
		} else {
			*found = true;
		}
	}
	mdb_txn_abort(txn);
	return rc;
}

int st_cluster_map_epoch(st_env *env, uint64_t *epoch, char *errmsg)
{
	bool found;
	return read_stored(env, epoch, NULL, &found, errmsg);
}

int st_cluster_map_load(st_env *env, sh_map *out, bool *found, char *errmsg)
{
	uint64_t epoch;
	return read_stored(env, &epoch, out, found, errmsg);
}

/* Whether table id has a GSI being created (backfilling), as the catalog
 * in txn has it; if so, the table's and the index's names into what
 * (SH_ERRMSG_SIZE). */
static int creating_gsi(st_txn *txn, uint32_t table, bool *creating, char *what, char *errmsg)
{
	*creating = false;
	sh_arena a;
	sh_arena_init(&a);
	st_table_info *all;
	uint32_t n;
	int rc = st_ix_tables(txn->txn, txn->env, &a, &all, &n, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++) {
		if (all[i].def.id != table)
			continue;
		for (uint32_t k = 0; k < all[i].def.n_indexes && !*creating; k++) {
			const st_index_def *x = &all[i].def.indexes[k];
			if (!x->local && x->status == ST_INDEX_CREATING) {
				*creating = true;
				snprintf(what, SH_ERRMSG_SIZE,
				         "table %s has its global secondary index %s",
				         all[i].def.name, x->name);
			}
		}
	}
	sh_arena_fini(&a);
	return rc;
}

/* A partition move and a GSI's backfill of one table never overlap (a
 * backfill's upserts of items that move could reach the index after the new
 * owner's deltas of the same entries): a map beginning a move of a table
 * with a GSI being created is refused, as UpdateTable creating a GSI of a
 * table with a move under way is (st_cluster_map_moving). */
static int moves_allowed(st_txn *txn, const MDB_val *old, const sh_map *m, char *errmsg)
{
	/* The stored map (none: the birth map, which moves nothing). */
	sh_map o;
	if (old->mv_size == 0 || sh_map_decode(old->mv_data, old->mv_size, &o, NULL) != SHOAL_OK) {
		if (old->mv_size > 0)
			sh_map_fini(&o); /* (a snapshot's, unchecked: the stored map is replaced) */
		sh_map_init(&o, m->replication);
	}
	int rc = SHOAL_OK;
	uint32_t checked = SH_MAP_NONE;
	for (uint32_t i = 0; rc == SHOAL_OK && i < m->n_parts; i++) {
		const sh_map_part *p = &m->parts[i];
		if (p->to_group == SH_MAP_NONE || p->table == checked)
			continue;
		uint32_t j = sh_map_part_find(&o, p->table, p->lo);
		if (j != SH_MAP_NONE && o.parts[j].to_group == p->to_group)
			continue; /* under way already */
		bool creating;
		char what[SH_ERRMSG_SIZE];
		rc = creating_gsi(txn, p->table, &creating, what, errmsg);
		if (rc == SHOAL_OK && creating)
			rc = sh_errf(errmsg, SHOAL_E_IN_USE,
			             "%s being created: its partitions move once the index is "
			             "ACTIVE",
			             what);
		checked = p->table;
	}
	sh_map_fini(&o);
	return rc;
}

int st_cluster_map_moving(st_txn *txn, uint32_t table, bool *moving, char *errmsg)
{
	*moving = false;
	uint64_t epoch;
	MDB_val v;
	int rc = stored_epoch(txn->txn, txn->env, &epoch, &v, errmsg);
	if (rc != SHOAL_OK || v.mv_size == 0)
		return rc;
	sh_map m;
	rc = sh_map_decode(v.mv_data, v.mv_size, &m, errmsg);
	for (uint32_t i = sh_map_part_of(&m, table, 0);
	     rc == SHOAL_OK && i != SH_MAP_NONE && i < m.n_parts && m.parts[i].table == table; i++)
		*moving |= m.parts[i].to_group != SH_MAP_NONE;
	sh_map_fini(&m);
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
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "not a valid cluster map: %s", msg);
	}
	if (epoch <= prev_epoch) {
		sh_map_fini(&m);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "a new cluster map must have a higher epoch than %llu (it has %llu)",
		               (unsigned long long)prev_epoch, (unsigned long long)epoch);
	}
	rc = moves_allowed(txn, &old, &m, errmsg);
	sh_map_fini(&m);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = {sizeof(KEY) - 1, (void *)KEY}, v = {len, (void *)buf};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta cluster_map)", errmsg);
	return SHOAL_OK;
}
