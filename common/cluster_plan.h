/*
 * cluster_plan.h -- the rebalancer and split planner (prefix sh_plan_): a
 * pure function from the cluster map and load figures to the next steps.
 * No clock, no I/O, no state between calls: everything a plan in progress
 * needs is in the map itself (a non-voter is a replica move under way, the
 * replica it `replaces` is the one that goes after it; a partition with a
 * to_group is a partition move under way), so a new group-0 leader that
 * calls the planner continues where the old one stopped.
 *
 * Group 0's executor (node/elastic.c) carries the steps out with
 * canonical/raft's raft_add / raft_assign / raft_remove / raft_transfer and
 * map changes; tests/lib/tl_plansim.c executes them in a simulation
 * (test_plan, make bench-plan).
 *
 * What one call returns, in this order (each a sh_plan_action):
 *   1. continue moves in flight: remove a non-voter on a dead or draining
 *      node (the move is abandoned), promote a non-voter that caught up,
 *      remove the replica a promoted voter replaces (or, with more voters
 *      than replication and no mark, the worst one: dead, draining, most
 *      loaded) -- after moving the leadership away from it if it leads;
 *   2. repair: a group with a voter on a dead node, or fewer voters than
 *      replication, gets a new non-voter on the least loaded live node
 *      (replacing the dead one); then the same for voters on draining nodes;
 *   3. splits: a partition over split_bytes, or over split_units /
 *      split_throttled (heat; figures averaged by the caller over the window
 *      that makes them "sustained"), is split in place at the hash that
 *      halves its bytes (size) or request units (heat) as its key samples
 *      show (DynamoDB's split for heat, ATC'22); a key that carries at least
 *      hot_key_share of the load cannot be split: SH_PLAN_HOT_KEY reports it;
 *      none while conf.hold_splits says the figures lag the map;
 *   4. partition moves: a group with more than twice the mean group bytes or
 *      units sends one of its partitions to the lightest group -- only when
 *      every data group's leader is known (groups[].leader), the caller's
 *      sign that each group's figures are in the loads, and not while
 *      conf.hold_partition_moves says the figures lag the map;
 *   5. leader transfers: leaders off draining nodes, then from nodes over the
 *      band on leaders or units to a voter of the same group under it;
 *   6. replica moves: from the node furthest over the band on replicas or
 *      bytes to the least loaded node that improves both (a new non-voter
 *      that replaces the source's replica: added first, removed last);
 *   7. new groups, only when nothing else is to be done or in flight, every
 *      node of the map is live and none drains: while the cluster has fewer
 *      data groups than ACTIVE nodes (a node that leads no data group serves
 *      no write), one new group (conf.max_groups) on the `replication`
 *      nodes holding the fewest replicas, the one leading fewest first (its
 *      preferred leader).  An empty data group -- new, or emptied -- is then
 *      given data by step 4: the largest idle partition of the group holding
 *      the most partitions (two or more), else the largest partition split
 *      at its middle with the upper half sent to it.
 * The GSI space (SH_MAP_GSI_SPACE: the index partitions of every GSI) is
 * planned as a table is (3, 4, 7), except that none of its partitions
 * splits while one of its ranges moves: the copy counts at the target too
 * (a GSI range's entries are counted per index, not kept apart by range).
 * New moves (2, 4, 6) start only while fewer than max_moves are in flight
 * cluster-wide and the nodes involved have fewer than max_moves_per_node;
 * no step removes a voter unless a majority of the remaining voters is live.
 *
 * Balanced (sh_plan_within, the planner's target and the tests' check):
 * every live ACTIVE node within the band max(tolerance[d] * mean, grain) of
 * the mean on each dimension d, where the grain is what one move shifts: 1
 * replica, 1 leader, a mean group's bytes, a mean group's units.  The
 * planner acts on nodes past 3/4 of the band, so the cluster settles inside.
 * Leaders and units move together (a transfer carries a group's whole
 * request rate), so they are balanced by one search that lowers a potential
 * of both (the sum of squared deviations, steep past the band) and by chains
 * of two transfers or a swap; the tolerances of those two are best set
 * wider than the others' (the tests use 0.25 and 0.2 against 0.1).
 *
 * What it cannot do yet: a single key hotter than a node's band leaves the
 * node leading its group over the band on units (it cannot shed more
 * leaders than the leaders band allows; DynamoDB would isolate the key's
 * partition); merging cold partitions is not planned.
 *
 * Ownership: the input's arrays are the caller's, read during the call only.
 */
#ifndef SHOAL_COMMON_CLUSTER_PLAN_H
#define SHOAL_COMMON_CLUSTER_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster_map.h"

/* X(kind, name): the steps, and two reports that ask an operator. */
#define SH_PLAN_KINDS(X)                                                                           \
	X(SH_PLAN_ADD_REPLICA, "add-replica")                                                      \
	X(SH_PLAN_PROMOTE, "promote")                                                              \
	X(SH_PLAN_REMOVE_REPLICA, "remove-replica")                                                \
	X(SH_PLAN_TRANSFER_LEADER, "transfer-leader")                                              \
	X(SH_PLAN_SPLIT, "split")                                                                  \
	X(SH_PLAN_MOVE_PARTITION, "move-partition")                                                \
	X(SH_PLAN_HOT_KEY, "hot-key")                                                              \
	X(SH_PLAN_NO_QUORUM, "no-quorum")                                                          \
	X(SH_PLAN_ADD_GROUP, "add-group")

typedef enum sh_plan_kind {
#define SH_PLAN_ENUM_(k, name) k,
	SH_PLAN_KINDS(SH_PLAN_ENUM_)
#undef SH_PLAN_ENUM_
	    SH_PLAN_KIND__COUNT
} sh_plan_kind;

/* X(reason, name): why a step was chosen. */
#define SH_PLAN_REASONS(X)                                                                         \
	X(SH_PLAN_R_CONTINUE, "continue")                                                          \
	X(SH_PLAN_R_REPAIR, "repair")                                                              \
	X(SH_PLAN_R_DRAIN, "drain")                                                                \
	X(SH_PLAN_R_SIZE, "size")                                                                  \
	X(SH_PLAN_R_HEAT, "heat")                                                                  \
	X(SH_PLAN_R_BALANCE, "balance")

typedef enum sh_plan_reason {
#define SH_PLAN_ENUM_(r, name) r,
	SH_PLAN_REASONS(SH_PLAN_ENUM_)
#undef SH_PLAN_ENUM_
	    SH_PLAN_REASON__COUNT
} sh_plan_reason;

/* X(dim, name): the load dimensions balanced across nodes. */
#define SH_PLAN_DIMS(X)                                                                            \
	X(SH_PLAN_REPLICAS, "replicas")                                                            \
	X(SH_PLAN_LEADERS, "leaders")                                                              \
	X(SH_PLAN_BYTES, "bytes")                                                                  \
	X(SH_PLAN_UNITS, "units")

typedef enum sh_plan_dim {
#define SH_PLAN_ENUM_(d, name) d,
	SH_PLAN_DIMS(SH_PLAN_ENUM_)
#undef SH_PLAN_ENUM_
	    SH_PLAN_DIM__COUNT
} sh_plan_dim;

const char *sh_plan_kind_name(sh_plan_kind k);
const char *sh_plan_reason_name(sh_plan_reason r);
const char *sh_plan_dim_name(sh_plan_dim d);

/*
 * One step.  Map mutation that executes it, once the cluster has done it:
 *   ADD_REPLICA      sh_map_add_replica(group, node, replaces) then raft_add
 *   PROMOTE          raft_assign(voter), then sh_map_promote(group, node)
 *   REMOVE_REPLICA   raft_remove, then sh_map_remove_replica(group, node)
 *   TRANSFER_LEADER  raft_transfer(group, node): no map change
 *   SPLIT            sh_map_split(table, lo, at, to_group) (to_group: the
 *                    partition's own group -- a split in place)
 *   MOVE_PARTITION   sh_map_begin_move(table, lo, to_group), copy, then
 *                    sh_map_finish_move
 *   HOT_KEY          report: the key at hash `at` of (table, lo) carries the
 *                    partition's load (reason SIZE or HEAT); not split
 *   NO_QUORUM        report: group has fewer live voters than a majority
 *   ADD_GROUP        sh_map_create_group(group, nodes[0 .. n_nodes-1]); its
 *                    founders bootstrap it (node/node.c)
 */
typedef struct sh_plan_action {
	sh_plan_kind kind;
	sh_plan_reason reason;
	uint32_t group;
	uint32_t node;     /* the replica's node; TRANSFER_LEADER: the new leader */
	uint32_t replaces; /* ADD_REPLICA: the node whose replica goes after, or 0 */
	uint32_t table;    /* SPLIT, MOVE_PARTITION, HOT_KEY */
	uint64_t lo;
	uint64_t at;       /* SPLIT: first hash of the upper half; HOT_KEY: the key's hash */
	uint32_t to_group; /* SPLIT, MOVE_PARTITION */
	/* ADD_GROUP: its voters, the first the preferred leader */
	uint32_t nodes[SH_MAX_REPLICATION];
	uint32_t n_nodes;
} sh_plan_action;

/* A sampled key of a partition (the capacity counters' hot keys and samples). */
typedef struct sh_plan_sample {
	uint64_t hash;
	uint64_t bytes;
	double units;
} sh_plan_sample;

typedef struct sh_plan_part_load {
	uint64_t bytes;
	double units;                  /* request units per second over the caller's window */
	double throttled;              /* throttled requests per second over the same window */
	const sh_plan_sample *samples; /* sorted by hash, distinct, inside the partition */
	uint32_t n_samples;
} sh_plan_part_load;

typedef struct sh_plan_group_load {
	uint32_t leader; /* node id, 0: none known */
	bool caught_up;  /* the group's non-voters have caught up with the leader */
} sh_plan_group_load;

typedef struct sh_plan_input {
	const sh_map *map;
	const bool *alive;                /* parallel to map->nodes */
	const sh_plan_group_load *groups; /* parallel to map->groups */
	const sh_plan_part_load *parts;   /* parallel to map->parts; NULL: all zero */
} sh_plan_input;

typedef struct sh_plan_conf {
	uint32_t max_moves;          /* replica and partition moves in flight, cluster-wide */
	uint32_t max_moves_per_node; /* replica moves involving one live node */
	uint32_t max_splits;         /* splits per call (0: as many as fit) */
	uint64_t split_bytes;        /* 0: no size splits */
	double split_units;          /* 0: no heat splits by load */
	double split_throttled;      /* 0: no heat splits by throttling */
	double hot_key_share;        /* e.g. 0.5 */
	/* No partition moves this call: the caller's per-group figures do not
	 * reflect the map's partitions yet (a partition changed group less than
	 * a load window ago: its load is still counted where it was). */
	bool hold_partition_moves;
	/* No splits this call: a partition changed group less than a load
	 * window ago, so the figures of the groups it left and entered, spread
	 * over their partitions now, are wrong for both (a group's remaining
	 * partition looked as big as the whole group had been and was split
	 * at once, in it_autosplit). */
	bool hold_splits;
	double tolerance[SH_PLAN_DIM__COUNT]; /* per dimension, e.g. 0.1 */
	/* New groups (7 below): group ids may be 0 .. max_groups-1; 0 or not
	 * above the map's highest id: no new group. */
	uint32_t max_groups;
	/* Groups 0 .. birth_groups-1 are the cluster file's: they may hold
	 * tables placed statically, which the map does not show, so only a
	 * later group with no partition counts as empty (step 7). */
	uint32_t birth_groups;
} sh_plan_conf;

/*
 * The planner's per-partition loads from what storage groups report: a
 * group's leader knows each table's bytes, request units and throttled
 * requests in the group as a whole (one figure per (group, table)) and a few
 * hot keys.  sh_plan_apportion gives each map partition of table t in group
 * g the share of (g, t)'s figures that its hash range's width is of the
 * width of all t's partitions in g (placement hashes are uniform, so bytes
 * and requests spread over a table's hash space in proportion to width),
 * and the keys whose hash falls inside it as samples (sorted by hash, one
 * per hash, their units summed).  A partition counts in its map group also
 * while moving (the source serves it until the cutover).  Figures of a
 * (group, table) without a partition of t in g (a table not in the map, a
 * move's target before the cutover) are left out.  Shares of bytes are
 * rounded so that a group's partitions sum to its figure exactly.
 */
typedef struct sh_plan_table_load {
	uint32_t group, table;
	uint64_t bytes;
	double units, throttled;
} sh_plan_table_load;

typedef struct sh_plan_key_load {
	uint32_t group, table;
	uint64_t hash;
	double units;
} sh_plan_key_load;

/* Fills out[0 .. m->n_parts) (parallel to m->parts); the samples they point
 * to are in *samples (sh_malloc'd, the caller frees it with sh_free after
 * the last use of out; NULL when there are none).  Returns SHOAL_OK, or
 * SHOAL_E_NOMEM (out all zero, *samples NULL). */
int sh_plan_apportion(const sh_map *m, const sh_plan_table_load *tables, uint32_t n_tables,
                      const sh_plan_key_load *keys, uint32_t n_keys, sh_plan_part_load *out,
                      sh_plan_sample **samples);

/* Writes up to cap steps into out and their number into *n.  Returns
 * SHOAL_OK, or SHOAL_E_NOMEM (working memory; nothing planned). */
int sh_plan_next(const sh_plan_input *in, const sh_plan_conf *conf, sh_plan_action *out,
                 uint32_t cap, uint32_t *n, char *errmsg);

/* Moves in flight, as the planner counts them: per node (parallel to
 * map->nodes; a replica move counts on the live nodes of its new replica and
 * of the replica it replaces) and in total (replica moves + partition moves).
 * per_node may be NULL. */
uint32_t sh_plan_inflight(const sh_plan_input *in, uint32_t *per_node);

/* The spread of load over the live ACTIVE nodes, as the planner sees it. */
typedef struct sh_plan_spread {
	uint32_t nodes; /* live ACTIVE nodes */
	double mean[SH_PLAN_DIM__COUNT], min[SH_PLAN_DIM__COUNT], max[SH_PLAN_DIM__COUNT];
	double band[SH_PLAN_DIM__COUNT]; /* max(tolerance * mean, grain) */
	uint32_t stranded;               /* replicas on dead or draining nodes */
} sh_plan_spread;

int sh_plan_spread_of(const sh_plan_input *in, const double *tolerance, sh_plan_spread *out);
/* Whether every live ACTIVE node is within the band on dimension d. */
bool sh_plan_within(const sh_plan_spread *s, sh_plan_dim d);

#endif
