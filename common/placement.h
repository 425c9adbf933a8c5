/*
 * placement.h -- the cluster map a process routes with (prefix sh_place_):
 * a thread-safe holder of the newest sh_map (common/cluster_map.h) it knows,
 * shared by every thread of a router or a node.
 *
 * Issue 14 moves placement from the cluster file (common/cluster.h, a pure
 * function of the file) to the map in group 0.  Every question "which nodes
 * hold group g", "where does node n listen", "does node n host group g" is
 * answered here, from the map, and nowhere else:
 *
 *   - A process starts with a map: the one it saved last (a node's
 *     <dir>/cluster.map), or the cluster file's birth map
 *     (sh_map_from_conf: epoch 1, exactly the file's old placement).
 *   - Newer maps arrive from group 0 (a node's own replica of it, a
 *     map_get answer, a router's refresh) through sh_place_offer, which
 *     installs one only if its epoch is higher: maps only move forward.
 *
 * Routing uses voters only (a non-voter is a replica being caught up: it
 * cannot lead and may be far behind); the node lifecycle uses every replica
 * (a node opens the groups it is a replica of, voter or not).
 *
 * Readers take a read lock and copy what they need; no pointer into the map
 * escapes.  Cost: one uncontended rwlock per question.
 */
#ifndef SHOAL_COMMON_PLACEMENT_H
#define SHOAL_COMMON_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "cluster_map.h"

typedef struct sh_place sh_place;

/* A holder of the map m (moved in: m is left empty).  NULL: out of memory. */
sh_place *sh_place_new(sh_map *m);
/* A holder of the cluster file's birth map (epoch 1). */
int sh_place_from_conf(const sh_cluster_conf *c, sh_place **out, char *errmsg);
void sh_place_free(sh_place *p);

uint64_t sh_place_epoch(sh_place *p);

/* Installs an encoded map if it decodes and its epoch is higher than the
 * current one.  Returns 1 if installed, 0 if not newer, or an error
 * (SHOAL_E_SERIALIZATION: the bytes are not a valid map; SHOAL_E_NOMEM). */
int sh_place_offer(sh_place *p, const uint8_t *buf, size_t len, char *errmsg);
/* The same with a decoded map (copied). */
int sh_place_offer_map(sh_place *p, const sh_map *m, char *errmsg);

/* Group g's voters, in the map's order (the first is the group's preferred
 * leader), into nodes[0 .. cap-1]; returns how many there are (0: no such
 * group). */
uint32_t sh_place_voters(sh_place *p, uint32_t group, uint32_t *nodes, uint32_t cap);
/* Group g's preferred leader: its first voter in the map's order whose node
 * is ACTIVE (not draining) and whose replica no other replica is replacing
 * (a move under way); the first voter if none is; 0 if the group has none.
 * Leaders are spread by this choice (node/group.c), and a replica about to
 * go is never handed the leadership back. */
uint32_t sh_place_preferred(sh_place *p, uint32_t group);
/* Group g's replicas, voters and non-voters, into out[0 .. cap-1]; returns
 * how many there are. */
uint32_t sh_place_replicas(sh_place *p, uint32_t group, sh_map_replica *out, uint32_t cap);
/* Whether node has a replica (voter or not) of group. */
bool sh_place_hosts(sh_place *p, uint32_t node, uint32_t group);
/* Whether node is a voter of group. */
bool sh_place_is_voter(sh_place *p, uint32_t node, uint32_t group);
/* The highest group id of the map (0 when it has none). */
uint32_t sh_place_max_group(sh_place *p);
/* The ids of the map's data groups (every group but group 0, unless it is
 * the only one), ascending, into out[0 .. cap-1]; returns how many there
 * are. */
uint32_t sh_place_data_groups(sh_place *p, uint32_t *out, uint32_t cap);
/* Whether node is a founding voter of a group not founded yet
 * (sh_map_create_group): it bootstraps the group if it has no data for it. */
bool sh_place_is_founder(sh_place *p, uint32_t node, uint32_t group);
/* The node's entry (addresses, state); false if the map has no such node. */
bool sh_place_node(sh_place *p, uint32_t id, sh_map_node *out);
/* The ids of every node of the map, ascending, into ids[0 .. cap-1];
 * returns how many there are. */
uint32_t sh_place_nodes(sh_place *p, uint32_t *ids, uint32_t cap);
/* Group g's Raft address on node n ("host:port", port = raft_port + g)
 * into buf (SH_ADDR_MAX); false if the map has no such node. */
bool sh_place_raft_address(sh_place *p, uint32_t node, uint32_t group, char *buf);

/* --- where a table's base items are (partition moves, Issue 14) -----------
 *
 * A table's base items, and its LSI entries (which live with them), are
 * placed by the map's partitions of the table: hash ranges, each served by
 * one group.  A table with no partitions in the map is placed as the
 * cluster file places it (sh_cluster_partition_group(c,
 * sh_cluster_partition_of(c, hash))); sh_map_add_table(t, D, D) with D =
 * sh_cluster_partitions(c) gives the same answer, groups made since the
 * birth or not, so the first split or move of a table changes no
 * placement.  A partition with a pending move
 * (to_group set) is still served by its `group`: the copy is running.
 *
 * GSI entries (st_index_hash) are placed the same way by the partitions of
 * "table" SH_MAP_GSI_SPACE (0), one hash space for every GSI, whatever the
 * tables' partitions: static until an operator moves or splits one. */

/* One partition: the inclusive hash range [lo, hi] and the group serving it. */
typedef struct sh_place_part {
	uint64_t lo, hi;
	uint32_t group;
} sh_place_part;

/* The static placement's partition holding hash (pure). */
void sh_place_static_part(const sh_cluster_conf *c, uint64_t hash, sh_place_part *out);
/* The group serving base hash `hash` of table `table`. */
uint32_t sh_place_route(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint64_t hash);
/* The partition of table `table` holding hash (its whole range and group). */
void sh_place_part_of(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint64_t hash,
                      sh_place_part *out);
/* The table's partitions in hash order (they tile [0, 2^64-1]) into
 * out[0 .. cap-1]; returns how many there are (may exceed cap). */
uint32_t sh_place_table_parts(sh_place *p, const sh_cluster_conf *c, uint32_t table,
                              sh_place_part *out, uint32_t cap);

/* How much of table `table` group `group` serves: *held, its partitions
 * there; *frac, their share of the table's hash space (0..1); *holders
 * (may be NULL), how many groups serve some of it.  A table placed
 * statically: one partition of D, in its group (none elsewhere), D groups. */
void sh_place_table_share(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint32_t group,
                          uint32_t *held, double *frac, uint32_t *holders);

/* A deep copy of the current map into out (not initialised). */
int sh_place_copy(sh_place *p, sh_map *out);
/* The current map encoded into a new sh_malloc'd buffer. */
int sh_place_encode(sh_place *p, uint8_t **buf, size_t *len);

/* "host:port" of group g's Raft endpoint of a map node (the one place this
 * address is made: a node's own comes from the map too). */
void sh_map_raft_address(const sh_map_node *n, uint32_t group, char *buf);

#endif
