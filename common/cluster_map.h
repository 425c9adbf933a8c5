/*
 * cluster_map.h -- the cluster map as data (prefix sh_map_): nodes, storage
 * groups with their replicas, and every table's partitions as hash ranges
 * mapped to groups, with an epoch.  Issue 14 puts it in the metadata group
 * (group 0): the cluster file only bootstraps it (sh_map_from_conf), and from
 * then on every change is one of the mutations below, applied by group 0's
 * state machine to its copy, encoded into Raft entries and snapshots with
 * sh_map_encode, and cached by routers and nodes.
 *
 * A table not in the map yet is placed statically (common/cluster.h), and
 * sh_map_from_conf + sh_map_add_table(t, D, D) (D = sh_cluster_partitions(c))
 * gives exactly that placement (tests/unit/test_cluster_map.c checks it), so
 * a table entering the map moves nothing.
 *
 * Pure: no clock, no I/O, no globals.  The map owns its three arrays
 * (sh_malloc'd); pointers returned by lookups are valid until the next
 * mutation of the map.
 *
 * Shape and invariants (sh_map_check verifies them all; the decoder refuses
 * bytes that break one; every mutation keeps them):
 *   - nodes sorted by id, ids >= 1; a node is ACTIVE or DRAINING
 *     (decommissioning: it takes no new replica; sh_map_remove_node deletes
 *     it once it holds none).  Liveness is not in the map: it is a fact the
 *     planner is told (cluster_plan.h), not a decision.
 *   - groups sorted by id; each has 1 .. SH_MAP_GROUP_REPLICAS replicas on
 *     distinct nodes of the map, at least majority(replication) of them
 *     voters; a non-voter is a replica being caught up.  A replica may name
 *     the replica it `replaces`: the move in progress, recorded so that
 *     whoever continues it (the planner, a new group-0 leader) knows which
 *     replica goes once the new one is a voter.
 *   - partitions sorted by (table, lo); a table's partitions cover the hash
 *     space [0, 2^64-1] without gap or overlap: partition i covers
 *     [lo_i, lo_{i+1} - 1] (the last one up to 2^64-1), so the first lo is 0
 *     and only lo is stored -- an overlap cannot be written down.  Each is in
 *     an existing group and may carry a pending move (to_group, begun by
 *     sh_map_begin_move: the copy is running; routing still uses group).
 *
 * Epoch: every successful mutation bumps it by one, so two maps with the
 * same epoch from the same history are equal; a refused mutation changes
 * nothing, epoch included (mutations validate first, then write).
 *
 * Errors: SHOAL_E_NOT_FOUND (no such node / group / partition),
 * SHOAL_E_VALIDATION (the change would break a rule above, with the rule in
 * errmsg), SHOAL_E_IN_USE (a move of that partition is in progress),
 * SHOAL_E_NOMEM; the decoder: SHOAL_E_SERIALIZATION.  errmsg may be NULL.
 *
 * Merging partitions: sh_map_merge joins two adjacent partitions of one table
 * in one group (metadata only, the data is already together).  The planner
 * does not merge cold partitions yet: decided to leave it out until the
 * executor exists; splitting never depends on it.
 */
#ifndef SHOAL_COMMON_CLUSTER_MAP_H
#define SHOAL_COMMON_CLUSTER_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

#define SH_MAP_VERSION 1
#define SH_MAP_NONE    UINT32_MAX /* "no group / no partition" */
/* The "table" of the GSI space: the index partitions of every GSI, by
 * st_index_hash (storage/parts.h, "The GSI space"); table ids start at 1.
 * Moved and split as a table's partitions are, by operators and by the
 * planner. */
#define SH_MAP_GSI_SPACE      0u
#define SH_MAP_GROUP_REPLICAS 10 /* replication (<= 7) + 1 during a move + catch-up */
#define SH_MAP_MAX_NODES      (1u << 16)
#define SH_MAP_MAX_GROUPS     (1u << 20)
#define SH_MAP_MAX_PARTS      (1u << 24)

typedef enum sh_map_node_state {
	SH_MAP_NODE_ACTIVE = 0,
	SH_MAP_NODE_DRAINING = 1, /* decommissioning: replicas move away, none arrive */
} sh_map_node_state;

typedef struct sh_map_node {
	uint32_t id;        /* >= 1 */
	uint8_t state;      /* sh_map_node_state */
	uint16_t raft_port; /* base port: group g listens on raft_port + g */
	char raft_host[SH_ADDR_MAX];
	char rpc[SH_ADDR_MAX]; /* nng URL for routers */
} sh_map_node;

#define SH_MAP_FOUNDER 2 /* sh_map_replica.voter of a new group's founding voter */

typedef struct sh_map_replica {
	uint32_t node;
	uint8_t voter;     /* 0: non-voter being caught up; 1: voter; SH_MAP_FOUNDER */
	uint32_t replaces; /* node whose replica this one replaces once a voter; 0: none */
} sh_map_replica;

typedef struct sh_map_group {
	uint32_t id;
	uint32_t n_replicas;
	sh_map_replica replicas[SH_MAP_GROUP_REPLICAS];
} sh_map_group;

typedef struct sh_map_part {
	uint32_t table;    /* the id of the hash space: a table (or, later, an index) */
	uint64_t lo;       /* first hash; the end is the next partition's lo - 1 */
	uint32_t group;    /* the group that serves it */
	uint32_t to_group; /* pending move's target (sh_map_begin_move), or SH_MAP_NONE */
} sh_map_part;

typedef struct sh_map {
	uint64_t epoch;
	uint32_t replication; /* voters per group, as configured */
	uint32_t n_nodes, n_groups, n_parts;
	sh_map_node *nodes;   /* sorted by id */
	sh_map_group *groups; /* sorted by id */
	sh_map_part *parts;   /* sorted by (table, lo) */
	uint32_t cap_nodes, cap_groups, cap_parts;
} sh_map;

static inline uint32_t sh_map_majority(uint32_t voters)
{
	return voters / 2 + 1;
}

/* --- lifecycle ----------------------------------------------------------- */

/* An empty map (epoch 0, no nodes) with this replication. */
void sh_map_init(sh_map *m, uint32_t replication);
void sh_map_fini(sh_map *m);
/* dst (not initialised) becomes a deep copy of src; on failure dst is empty. */
int sh_map_copy(sh_map *dst, const sh_map *src);
/* m (not initialised) becomes the map of a new cluster from its file: the
 * file's nodes, groups 0 .. groups-1 with replicas (g + k) mod N as
 * sh_cluster_replicas, all voters, no tables; epoch 1. */
int sh_map_from_conf(sh_map *m, const sh_cluster_conf *c, char *errmsg);
/* Whether the invariants above hold (errmsg says which does not). */
bool sh_map_check(const sh_map *m, char *errmsg);
/* Whether two maps are equal, epoch included. */
bool sh_map_equal(const sh_map *a, const sh_map *b);

/* --- lookups (the request path: binary searches) ------------------------- */

const sh_map_node *sh_map_node_get(const sh_map *m, uint32_t id);
const sh_map_group *sh_map_group_get(const sh_map *m, uint32_t id);
/* How logs name map table `table`: "table 7", or "the GSI space"; buf holds
 * SH_MAP_TABLE_LABEL bytes.  SH_MAP_TABLE(t): the same in a buffer of the
 * calling expression's. */
#define SH_MAP_TABLE_LABEL 24
const char *sh_map_table_label(uint32_t table, char *buf);
#define SH_MAP_TABLE(t) sh_map_table_label((t), (char[SH_MAP_TABLE_LABEL]){0})
/* Index into m->parts of the partition of `table` holding `hash`, or
 * SH_MAP_NONE if the table has no partitions. */
uint32_t sh_map_part_of(const sh_map *m, uint32_t table, uint64_t hash);
/* Index of the partition of `table` that starts at lo exactly, or SH_MAP_NONE. */
uint32_t sh_map_part_find(const sh_map *m, uint32_t table, uint64_t lo);
/* Last hash of partition i. */
uint64_t sh_map_part_hi(const sh_map *m, uint32_t i);
/* The group serving (table, hash), or SH_MAP_NONE: what a router asks. */
uint32_t sh_map_route(const sh_map *m, uint32_t table, uint64_t hash);
/* Writes up to cap ids of the groups with a replica on node (ascending);
 * returns how many there are (may exceed cap). */
uint32_t sh_map_node_groups(const sh_map *m, uint32_t node, uint32_t *groups, uint32_t cap);
/* Index of node's replica in g, or -1. */
int sh_map_replica_index(const sh_map_group *g, uint32_t node);
uint32_t sh_map_voters(const sh_map_group *g);
/* Whether a group holds table data: every group but group 0, unless group 0
 * is the only one (group 0 keeps the catalog). */
bool sh_map_is_data_group(const sh_map *m, uint32_t group);

/* --- encoding (format at the top of cluster_map_codec.c) ------------------ */

/* Exact size of the encoding. */
size_t sh_map_encoded_size(const sh_map *m);
/* Encodes into buf (at least sh_map_encoded_size bytes); returns the length. */
size_t sh_map_encode(const sh_map *m, uint8_t *buf);
/* out (not initialised) becomes the decoded map; the input is untrusted:
 * counts are bounded, every length checked, the invariants verified, and
 * the encoding is canonical (encode(decode(b)) == b).  On failure out is an
 * empty map (sh_map_fini it either way). */
int sh_map_decode(const uint8_t *buf, size_t len, sh_map *out, char *errmsg);
/* The epoch of an encoding, from its header alone (no decode: a
 * 100,000-partition map is megabytes); 0 if buf is not a map's header.
 * For an encoding already validated (group 0's stored map). */
uint64_t sh_map_peek_epoch(const uint8_t *buf, size_t len);

/* --- mutations (validate, then apply and bump the epoch) ------------------ */

/* A table's first partitions: n equal hash ranges (cluster.h's boundaries),
 * partition i in data group floor(i * d / n) by position among the map's
 * first d data groups by id (group 0 itself if it is the only group) --
 * consecutive ranges share a group.  d is the cluster file's data groups
 * (sh_cluster_partitions): those are the map's first d (a group made since
 * the birth takes an id above them, and birth groups are never removed), so
 * with n a multiple of d every partition lies in the static range of its
 * group (cluster.h) and adding a table moves nothing, however many groups
 * were made since -- they hold none of a statically placed table.  Refused
 * (VALIDATION) unless 1 <= d <= the map's data groups. */
int sh_map_add_table(sh_map *m, uint32_t table, uint32_t n, uint32_t d, char *errmsg);
/* How many of the map's groups hold table data (sh_map_is_data_group). */
uint32_t sh_map_data_groups(const sh_map *m);
int sh_map_drop_table(sh_map *m, uint32_t table, char *errmsg);

/* A node joins (ACTIVE); n->id must be new. */
int sh_map_add_node(sh_map *m, const sh_map_node *n, char *errmsg);
/* Decommission: the node takes no new replica; the planner moves its own away. */
int sh_map_drain_node(sh_map *m, uint32_t node, char *errmsg);
/* Deletes a node that holds no replica. */
int sh_map_remove_node(sh_map *m, uint32_t node, char *errmsg);

/* A new group with these voters (distinct ACTIVE nodes, n <= replication). */
int sh_map_add_group(sh_map *m, uint32_t group, const uint32_t *nodes, uint32_t n, char *errmsg);
/*
 * A group made after the cluster's birth (shoal admin add-group, the
 * planner): sh_map_add_group whose voters are marked SH_MAP_FOUNDER.  Its
 * founders' nodes bootstrap it with the map's voters as its first Raft
 * configuration (node/node.c) -- the only time a node starts a group
 * without data that is not the cluster's birth -- so its replicas cannot
 * change (add_replica, promote, remove_replica refuse with SHOAL_E_IN_USE)
 * until group 0's executor has seen it elected and marks it founded.  A
 * group is founding if its first replica is a founder (then all are).
 */
int sh_map_create_group(sh_map *m, uint32_t group, const uint32_t *nodes, uint32_t n, char *errmsg);
bool sh_map_group_founding(const sh_map_group *g);
/* Where a new group goes: up to `want` ACTIVE nodes, those holding the
 * fewest replicas first, ties broken by the fewest groups they are the
 * preferred leader of, then by id -- so the first, the new group's preferred
 * leader, is the one leading least.  Returns how many were found (0 also
 * when out of memory). */
uint32_t sh_map_emptiest_nodes(const sh_map *m, uint32_t want, uint32_t *out);
int sh_map_group_founded(sh_map *m, uint32_t group, char *errmsg);
/* Adds node (ACTIVE, not in the group) as a non-voter; replaces: a node of the
 * group whose replica the new one will replace, or 0. */
int sh_map_add_replica(sh_map *m, uint32_t group, uint32_t node, uint32_t replaces, char *errmsg);
/* Non-voter -> voter; refused past replication + 1 voters. */
int sh_map_promote(sh_map *m, uint32_t group, uint32_t node, char *errmsg);
/* Removes node's replica; a voter only if majority(replication) voters remain.
 * A voter that `replaces` it takes its position in the group's order (the
 * first voter is the preferred leader); other `replaces` marks naming it are
 * cleared. */
int sh_map_remove_replica(sh_map *m, uint32_t group, uint32_t node, char *errmsg);

/* The group's preferred leader: its first voter whose node is ACTIVE and
 * whose replica no other replica is replacing; the first voter if none is;
 * 0 if it has none (common/placement.h, node/group.c). */
uint32_t sh_map_preferred(const sh_map *m, uint32_t group);
/* Makes node's voter the group's first replica (its preferred leader: the
 * others keep their order behind it); SHOAL_E_IN_USE if it is already. */
int sh_map_prefer(sh_map *m, uint32_t group, uint32_t node, char *errmsg);

/* Splits the partition starting at lo at hash `at` (lo < at <= hi): [lo, at-1]
 * stays, [at, hi] goes to to_group (its own group: a split in place). */
int sh_map_split(sh_map *m, uint32_t table, uint64_t lo, uint64_t at, uint32_t to_group,
                 char *errmsg);
/* Moves a partition to another group at once (the cutover). */
int sh_map_move_partition(sh_map *m, uint32_t table, uint64_t lo, uint32_t to_group, char *errmsg);
/* A move in two steps: begin records the target (the copy runs meanwhile,
 * the partition is still served by its group); finish is the cutover; abort
 * forgets it. */
int sh_map_begin_move(sh_map *m, uint32_t table, uint64_t lo, uint32_t to_group, char *errmsg);
int sh_map_finish_move(sh_map *m, uint32_t table, uint64_t lo, char *errmsg);
int sh_map_abort_move(sh_map *m, uint32_t table, uint64_t lo, char *errmsg);
/* Merges the partition starting at lo with the next one of the table: same
 * group, neither moving. */
int sh_map_merge(sh_map *m, uint32_t table, uint64_t lo, char *errmsg);

#endif
