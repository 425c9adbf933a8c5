/*
 * partadmin.c -- an operator's partition changes (`shoal admin
 * move-partition | split-partition`, AdminRequest.move_partition /
 * split_partition) applied to group 0's copy of the cluster map.
 *
 * elastic.c's map_change handler calls node_part_admin on the map its
 * replica has applied and proposes the result as a MapSet (a compare-and-set
 * on the epoch), as for add_node.  The change only writes the map down:
 *
 *   move   the partition holding `hash` gets a pending move to to_group
 *          (sh_map_begin_move); routing still uses its group until the
 *          executor has copied it and finishes the move;
 *   split  the partition holding `at` becomes [lo, at-1] and [at, hi], both
 *          in its group (sh_map_split); with a to_group other than that
 *          group, [at, hi] then gets a pending move there.
 *
 * The GSI space (GsiSpace, "table" SH_MAP_GSI_SPACE: the index partitions
 * of every GSI by st_index_hash) moves and splits the same way, entering the
 * map with the same placement as a table.
 *
 * A table with no partitions in the map is placed statically
 * (sh_cluster_partition_group); its first change adds it with
 * sh_map_add_table(sh_cluster_table_partitions(conf), D) -- D partitions,
 * or [cluster] table_partitions rounded up to a multiple of D, each inside
 * its group's static range among the file's D data groups (not the groups
 * made since, which hold none of it) -- which gives the same placement, so
 * adding it moves nothing.
 *
 * "Make it so": the router sends the change again when an answer is lost, so
 * a change already in the map (the partition is in to_group or moving there,
 * the boundary at `at` exists) is *already, not an error.  Everything is
 * done on a copy, so a refused change or one already made leaves m as it was.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "node/node.h"
#include "storage/storage.h"

#define RANGE_FMT "[0x%016" PRIx64 ", 0x%016" PRIx64 "]"

int node_part_catalog_id(void *env, const char *name, uint32_t *id, char *errmsg)
{
	return st_table_id(env, name, id, errmsg);
}

/* "1 2 3" (the map's data groups, at most the first 16) into buf. */
static void data_groups(const sh_map *m, char *buf, size_t cap)
{
	size_t len = 0;
	uint32_t shown = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < m->n_groups && len < cap; i++) {
		if (!sh_map_is_data_group(m, m->groups[i].id))
			continue;
		if (shown++ == 16) {
			snprintf(buf + len, cap - len, " ...");
			return;
		}
		len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIu32, len > 0 ? " " : "",
		                        m->groups[i].id);
	}
}

static int check_target(const sh_map *m, uint32_t group, char *errmsg)
{
	const sh_map_group *g = sh_map_group_get(m, group);
	if (g != NULL && sh_map_is_data_group(m, group) && sh_map_group_founding(g))
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "ToGroup %" PRIu32
		               " is being founded (its replicas have not elected a leader yet); "
		               "shoal admin add-group returns once it has one",
		               group);
	if (g != NULL && sh_map_is_data_group(m, group))
		return SHOAL_OK;
	char groups[128];
	data_groups(m, groups, sizeof(groups));
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "ToGroup %" PRIu32
	               " is not a data group of the cluster map (data groups: %s)",
	               group, groups);
}

/* The partition already moving elsewhere. */
static int moving(const sh_map *m, uint32_t i, const char *table, const char *what, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_IN_USE,
	               "%s%s: partition " RANGE_FMT " is moving to group %" PRIu32
	               " (from group %" PRIu32 "); %s once the move is done (shoal status)",
	               table != NULL && table[0] != '\0' ? "table " : "",
	               table != NULL && table[0] != '\0' ? table : "the GSI space", m->parts[i].lo,
	               sh_map_part_hi(m, i), m->parts[i].to_group, m->parts[i].group, what);
}

static int move(sh_map *m, uint32_t t, const Shoal__PartitionChange *pc, bool *already,
                char *errmsg)
{
	uint32_t i = sh_map_part_of(m, t, pc->hash);
	const sh_map_part *p = &m->parts[i];
	if (p->to_group == pc->to_group ||
	    (p->to_group == SH_MAP_NONE && p->group == pc->to_group)) {
		*already = true;
		return SHOAL_OK;
	}
	if (p->to_group != SH_MAP_NONE)
		return moving(m, i, pc->table_name, "move it", errmsg);
	return sh_map_begin_move(m, t, p->lo, pc->to_group, errmsg);
}

static int split(sh_map *m, uint32_t t, const Shoal__PartitionChange *pc, bool *already,
                 char *errmsg)
{
	if (pc->at == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "At must be 1 or more: hash 0 starts the table's first partition");
	uint32_t i = sh_map_part_of(m, t, pc->at);
	const sh_map_part p = m->parts[i];
	uint32_t target = pc->to_group != 0 ? pc->to_group : p.group;
	if (p.lo == pc->at) {
		/* The boundary is there (a retried split): make the upper half's
		 * group so. */
		if (pc->to_group == 0 || p.to_group == target ||
		    (p.to_group == SH_MAP_NONE && p.group == target)) {
			*already = true;
			return SHOAL_OK;
		}
		if (p.to_group != SH_MAP_NONE)
			return moving(m, i, pc->table_name, "move it", errmsg);
		return sh_map_begin_move(m, t, p.lo, target, errmsg);
	}
	if (p.to_group != SH_MAP_NONE)
		return moving(m, i, pc->table_name, "split it", errmsg);
	int rc = sh_map_split(m, t, p.lo, pc->at, p.group, errmsg);
	if (rc == SHOAL_OK && target != p.group)
		rc = sh_map_begin_move(m, t, pc->at, target, errmsg);
	return rc;
}

int node_part_add_table(sh_map *m, const sh_cluster_conf *conf, uint32_t t, char *errmsg)
{
	if (sh_map_part_of(m, t, 0) != SH_MAP_NONE)
		return SHOAL_OK;
	return sh_map_add_table(m, t, sh_cluster_table_partitions(conf),
	                        sh_cluster_partitions(conf), errmsg);
}

int node_part_admin(sh_map *m, const sh_cluster_conf *conf, const Shoal__AdminRequest *a,
                    node_table_id_fn table_id, void *catalog, bool *already, char *errmsg)
{
	*already = false;
	bool is_split = a->action_case == SHOAL__ADMIN_REQUEST__ACTION_SPLIT_PARTITION;
	const Shoal__PartitionChange *pc = is_split ? a->split_partition : a->move_partition;
	if (a->action_case != SHOAL__ADMIN_REQUEST__ACTION_SPLIT_PARTITION &&
	    a->action_case != SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "map_change: not a partition change");
	bool named = pc != NULL && pc->table_name != NULL && pc->table_name[0] != '\0';
	if (pc == NULL || named == pc->gsi_space)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "%s: TableName is required (or GsiSpace: the index partitions of "
		               "every GSI), not both",
		               is_split ? "SplitPartition" : "MovePartition");
	uint32_t t = SH_MAP_GSI_SPACE;
	int rc = named ? table_id(catalog, pc->table_name, &t, errmsg) : SHOAL_OK;
	if (rc == SHOAL_E_NOT_FOUND)
		return sh_errf(errmsg, rc, "Requested resource not found: Table: %s not found",
		               pc->table_name);
	if (rc != SHOAL_OK)
		return rc;
	if ((!is_split || pc->to_group != 0) &&
	    (rc = check_target(m, pc->to_group, errmsg)) != SHOAL_OK)
		return rc;

	sh_map w;
	if ((rc = sh_map_copy(&w, m)) != SHOAL_OK) {
		sh_map_fini(&w);
		return sh_errf(errmsg, rc, "partition change: out of memory");
	}
	rc = node_part_add_table(&w, conf, t, errmsg);
	if (rc == SHOAL_OK)
		rc =
		    is_split ? split(&w, t, pc, already, errmsg) : move(&w, t, pc, already, errmsg);
	if (rc != SHOAL_OK || *already) {
		sh_map_fini(&w);
		return rc;
	}
	sh_map_fini(m);
	*m = w;
	return SHOAL_OK;
}
