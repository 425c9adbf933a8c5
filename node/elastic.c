/*
 * elastic.c -- the cluster's shape on the node side of group 0 (issue 14):
 * operators' changes of the cluster map (map_change), and the executor that
 * carries out the planner's steps (common/cluster_plan.h) while this node
 * leads group 0.
 *
 * map_change (shoal admin, through a router): group 0's leader reads the map
 * its replica has applied (the birth map if none is stored yet), applies the
 * change with the sh_map_* mutation (which refuses what would break the
 * map's rules, changing nothing), and proposes the whole new map as a
 * MapSet entry made from that epoch.  The apply is a compare-and-set
 * (storage/clustermap.c): if another change landed first, this one is
 * refused with SHOAL_E_WRONG_EPOCH and the caller asks again.
 *
 * The executor (node_elastic_*): while this node leads group 0, a round
 * every NODE_ELASTIC_ROUND_MS:
 *
 *   1. facts: node_status from every node of the map; each group's leader
 *      (the replica that says so, highest term), its Raft configuration and
 *      how far each member's log is.  Nothing is decided unless a majority
 *      of the map's nodes answered (a leader cut off from most of the
 *      cluster must not judge it).  A node is dead for the planner only
 *      after it has not answered for [cluster] dead_after_ms (5 minutes by
 *      default), counted from when this node began leading group 0: a
 *      restart or a short partition moves no replica;
 *   2. repair what a previous leader left half done: a non-voter of the map
 *      that is not in its group's Raft configuration (the map change landed,
 *      raft_add did not) is added again; a replica whose node reports it
 *      "lost" (the node came back with an empty directory and did not open
 *      the group) leaves Raft and the map, to be re-created as a new one;
 *      a draining node that holds no replica leaves the map;
 *   3. otherwise the planner's first step (common/cluster_plan.h, which
 *      keeps no state: everything in flight is in the map):
 *        ADD_REPLICA      map add_replica, then member_change ADD (standby)
 *        PROMOTE          member_change PROMOTE (raft catches it up), then
 *                         map promote
 *        REMOVE_REPLICA   member_change REMOVE, then map remove_replica
 *        TRANSFER_LEADER  member_change TRANSFER; for balance, the map's
 *                         `prefer` first (the node becomes the group's first
 *                         voter), since node/group.c hands the leadership to
 *                         the preferred replica (sh_place_preferred)
 *        SPLIT            map split at `at` (and, when the upper half goes
 *                         to another group, its move begun in the same
 *                         MapSet)
 *        MOVE_PARTITION   map begin_move; partition_moves() and pmove.c
 *                         carry every begun move out
 *        HOT_KEY          no step: a WARN once per key an hour, a counter
 *      The planner is given each map partition's load: the group leaders'
 *      per-table bytes, request units and requests throttled at the
 *      partition limit, shared among the table's partitions in the group by
 *      hash width (sh_plan_apportion), units and throttled averaged over
 *      the last EL_HEAT_WINDOW seconds (a window per (group, table), one
 *      sample a second), and the leaders' hot keys as samples -- kept by
 *      elastic_load.c, the executor's load book.  A table
 *      not in the map yet (static placement) whose figures in a group pass
 *      a split threshold is first added to it (node_part_add_table, which
 *      moves nothing), so that the planner sees its partitions.
 *      Map changes are proposed on group 0 as MapSet from the map they were
 *      computed on (a compare-and-set), so an operator's change landing in
 *      between makes the step fail and the next round start over.
 *
 * A partition move's source reporting READY (its range is refused until the
 * cutover) does not wait for a round: between rounds the cutover begins on
 * the last round's map, and in the middle of one the round is cut short --
 * its node_status answers are dropped by their round number (gen) -- and
 * the cutover begins on its map; the target's leader is the round's, or
 * the last complete round's (leader_of).  The round after the step starts
 * afresh.
 *
 * One step at a time, cluster-wide (max_moves 1): a move never overlaps
 * another, so a group never has two replicas in motion.  Every member_change
 * is "make it so" and every map step is checked against the map, so a step
 * cut short by a crash of this node is simply found and finished by the next
 * group-0 leader.  Raft order keeps a majority: a new replica is a voter only
 * after raft caught it up; the old one leaves only after the new one votes.
 *
 * Threads: tick on the loop; lanes callbacks on nng threads and proposal
 * callbacks on the loop meet under e->mu.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/cluster_map.h"
#include "common/cluster_plan.h"
#include "common/placement.h"
#include "node/elastic_int.h"
#include "node/node.h"
#include "node/ship_int.h"
#include "proto/lanes.h"
#include "proto/wire.h"

int node_map_load(node *n, node_group *g0, sh_map *out, char *errmsg)
{
	bool found;
	int rc = st_cluster_map_load(node_group_env(g0), out, &found, errmsg);
	if (rc != SHOAL_OK) {
		sh_map_init(out, n->conf->replication);
		return rc;
	}
	return found ? SHOAL_OK : sh_map_from_conf(out, n->conf, errmsg);
}

/* "host:port" -> host and port (the Raft base address of a NodeSpec). */
static int parse_raft(const char *s, sh_map_node *n, char *errmsg)
{
	const char *colon = strrchr(s, ':');
	if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof(n->raft_host) - 8)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "add_node: raft address '%s' is not host:port", s);
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "add_node: raft port in '%s' is not 1..65535", s);
	memcpy(n->raft_host, s, (size_t)(colon - s));
	n->raft_host[colon - s] = '\0';
	n->raft_port = (uint16_t)port;
	return SHOAL_OK;
}

/*
 * shoal admin add-group: a new group (sh_map_create_group) with the given
 * voters, or the `replication` ACTIVE nodes holding the fewest replicas.
 * The router fills group_id (the lowest id its fresh map leaves free), so a
 * retried request names the same group: one that exists already with those
 * voters (or any, when none were named) is done already.
 */
static int add_group(const sh_cluster_conf *conf, sh_map *m, const Shoal__GroupSpec *gs,
                     bool *already, char *errmsg)
{
	uint32_t cap = sh_cluster_group_cap(conf);
	if (gs == NULL || gs->group_id == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "AddGroup: GroupId must be 1 or more");
	if (gs->group_id >= cap)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "AddGroup: GroupId %u is past the cluster's group ids 0..%u (raise "
		               "[cluster] max_groups in the cluster file: each node's Raft ports "
		               "base .. base + max_groups - 1 must be free)",
		               gs->group_id, cap - 1);
	if (m->n_groups < 2)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "AddGroup: a cluster born with one group keeps its data in group 0 "
		               "and cannot add groups");
	if (gs->n_nodes > m->replication)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "AddGroup: %zu nodes named, more than the replication of %u",
		               gs->n_nodes, m->replication);
	const sh_map_group *old = sh_map_group_get(m, gs->group_id);
	if (old != NULL) {
		bool same = gs->n_nodes == 0 || gs->n_nodes == old->n_replicas;
		for (size_t k = 0; same && k < gs->n_nodes; k++)
			same = sh_map_replica_index(old, gs->nodes[k]) >= 0;
		if (same)
			return *already = true, SHOAL_OK;
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "AddGroup: group %u exists with other replicas", gs->group_id);
	}
	uint32_t nodes[SH_MAX_REPLICATION];
	uint32_t n = (uint32_t)gs->n_nodes;
	if (n == 0) {
		n = m->replication;
		if (sh_map_emptiest_nodes(m, n, nodes) != n)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "AddGroup: fewer than %u active nodes in the cluster map",
			               n);
	} else {
		memcpy(nodes, gs->nodes, n * sizeof(*nodes));
	}
	return sh_map_create_group(m, gs->group_id, nodes, n, errmsg);
}

/* Applies an operator's change to m (validated by the sh_map mutation);
 * *already: it is so already (a retried change), m unchanged. */
static int apply_admin(node_call *c, sh_map *m, const Shoal__AdminRequest *a, bool *already,
                       char *errmsg)
{
	switch (a->action_case) {
	case SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION:
	case SHOAL__ADMIN_REQUEST__ACTION_SPLIT_PARTITION:
		return node_part_admin(m, c->node->conf, a, node_part_catalog_id,
		                       node_group_env(c->group), already, errmsg);
	case SHOAL__ADMIN_REQUEST__ACTION_ADD_NODE: {
		const Shoal__NodeSpec *s = a->add_node;
		sh_map_node n = {.id = s->id, .state = SH_MAP_NODE_ACTIVE};
		if (s->id == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "add_node: node ids start at 1");
		if (strlen(s->rpc) == 0 || strlen(s->rpc) >= sizeof(n.rpc))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "add_node: rpc URL must be 1..%zu bytes", sizeof(n.rpc) - 1);
		int rc = parse_raft(s->raft, &n, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		memcpy(n.rpc, s->rpc, strlen(s->rpc) + 1);
		const sh_map_node *old = sh_map_node_get(m, s->id);
		if (old != NULL) {
			/* Registering again with the same addresses is done
			 * already (a retried add-node). */
			if (strcmp(old->raft_host, n.raft_host) == 0 &&
			    old->raft_port == n.raft_port && strcmp(old->rpc, n.rpc) == 0 &&
			    old->state == SH_MAP_NODE_ACTIVE)
				return *already = true, SHOAL_OK;
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "add_node: node %u is already in the cluster with other "
			               "addresses or draining",
			               s->id);
		}
		return sh_map_add_node(m, &n, errmsg);
	}
	case SHOAL__ADMIN_REQUEST__ACTION_ADD_GROUP:
		return add_group(c->node->conf, m, a->add_group, already, errmsg);
	case SHOAL__ADMIN_REQUEST__ACTION_DRAIN_NODE: {
		const sh_map_node *old = sh_map_node_get(m, a->drain_node);
		if (old == NULL)
			return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
			               "node %u is not in the cluster map", a->drain_node);
		if (old->state == SH_MAP_NODE_DRAINING)
			return *already = true, SHOAL_OK;
		return sh_map_drain_node(m, a->drain_node, errmsg);
	}
	default:
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "map_change: no action");
	}
}

int node_prepare_map_change(node_call *c, Shoal__CommandOp *op)
{
	sh_map m;
	int rc = node_map_load(c->node, c->group, &m, c->errmsg);
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	uint64_t prev = m.epoch;
	bool already = false;
	rc = apply_admin(c, &m, c->req->map_change, &already, c->errmsg);
	if (rc == SHOAL_OK && already) {
		/* Already so (a retried change): the same map under the next
		 * epoch, so the answer comes through the log like any. */
		m.epoch++;
	} else if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	size_t len = sh_map_encoded_size(&m);
	uint8_t *buf = sh_arena_alloc(c->arena, len);
	Shoal__MapSet *set = sh_arena_alloc(c->arena, sizeof(*set));
	if (buf == NULL || set == NULL) {
		sh_map_fini(&m);
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "map_change: out of memory");
	}
	sh_map_encode(&m, buf);
	shoal__map_set__init(set);
	set->prev_epoch = prev;
	set->map.data = buf;
	set->map.len = len;
	op->op_case = SHOAL__COMMAND_OP__OP_MAP_SET;
	op->map_set = set;
	node_logf(NODE_LOG_INFO, "cluster map: proposing epoch %" PRIu64 " (from %" PRIu64 ")",
	          m.epoch, prev);
	sh_map_fini(&m);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* The executor                                                              */
/* ------------------------------------------------------------------------ */

#define ELASTIC_STATUS_MS       1500  /* a node's node_status answer, at most */
#define ELASTIC_CHANGE_MS       5000  /* ADD, REMOVE, TRANSFER */
#define ELASTIC_PROMOTE_MS      60000 /* PROMOTE: raft's catch-up rounds */
#define ELASTIC_CAUGHT_UP       64    /* a standby this close to the leader's last index */
#define ELASTIC_FENCED_POLL_MS  20    /* the next round while a move's range is fenced */
#define ELASTIC_MOVING_ROUND_MS 100   /* rounds while a partition move is in flight */
#define ELASTIC_SETTLE_MS       10000 /* a new leadership's wait before leader balance */
/* No load-based partition move until the map's partitions have stayed as
 * they are for the load window and a little more: a (group, table) figure
 * is spread over the partitions the map gives that group now, so right
 * after a move the source's load is counted nowhere and the target's is
 * spread over one partition more (it_pmove_chaos once saw an operator's
 * move undone 8 ms after its cutover). */
#define ELASTIC_PARTS_SETTLE_MS ((EL_HEAT_WINDOW + 2) * EL_HEAT_SAMPLE_MS)
#define ELASTIC_MAX_MEMBERS     16
#define SH_MAP_MAX_SEEN         SH_MAX_NODES * 4 /* nodes whose last answer is remembered */

typedef struct group_fact {
	uint32_t lost[SH_MAP_GROUP_REPLICAS]; /* nodes that lost their replica's data */
	uint32_t n_lost;
	uint32_t leader; /* 0: none seen */
	uint64_t term, last_index;
	uint32_t n_members;
	struct {
		uint32_t node;
		bool voter, standby;
		uint64_t match;
	} members[ELASTIC_MAX_MEMBERS];
	el_figures load; /* the leader's */
} group_fact;

/* A partition move its source's leader reported READY (pmove.c). */
typedef struct ready_move {
	bool valid;
	uint32_t table, from, to;
	uint64_t lo, hi, attempt;
	bool has_shard; /* the stream shard the source's fence closed */
	uint64_t shard_lo, shard_start;
} ready_move;

/* One exchange with a node (lanes item). */
typedef struct ask {
	wire_lane_item item; /* first: the lanes hand it back */
	node_elastic *e;
	uint64_t gen; /* node_status: the round that asked (e->gen) */
	uint32_t node;
	uint8_t *buf;
	ready_move move; /* part_move: the move asked about */
} ask;

typedef enum sub_kind { SUB_NONE, SUB_MEMBER, SUB_MAP, SUB_OWN } sub_kind;

/* A map mutation, computed on the map current when it is proposed. */
typedef enum map_mut {
	MUT_ADD_REPLICA,
	MUT_PROMOTE,
	MUT_REMOVE_REPLICA,
	MUT_REMOVE_NODE,
	MUT_PREFER,
	MUT_FINISH_MOVE,
	MUT_ADD_TABLE,    /* a table into the map with its static placement */
	MUT_SPLIT,        /* (table, lo) split at `at`; the upper half to to_group */
	MUT_BEGIN_MOVE,   /* (table, lo) begins moving to to_group */
	MUT_DROP_TABLE,   /* a deleted table's partitions out of the map */
	MUT_FOUNDED,      /* a new group has a leader: its replicas may change */
	MUT_CREATE_GROUP, /* a new group on nodes[] (the planner's step 7) */
} map_mut;

typedef struct sub {
	sub_kind kind;
	int action; /* SUB_MEMBER: Shoal__MemberChange__Action */
	map_mut mut;
	uint32_t group, node, replaces;
	/* MUT_FINISH_MOVE, SUB_OWN (group: the target): a partition move.
	 * MUT_SPLIT, MUT_BEGIN_MOVE: group is the partition's. */
	uint32_t table, to_group;
	uint64_t lo, hi, attempt, at;
	/* SUB_OWN: the stream shard the source closed (the new one's
	 * parent), in group `from` */
	bool has_shard;
	uint32_t from;
	uint64_t shard_lo, shard_start;
	/* MUT_CREATE_GROUP: the new group's voters */
	uint32_t nodes[SH_MAX_REPLICATION];
	uint32_t n_nodes;
} sub;

struct node_elastic {
	node *n;
	node_ship *s;
	pthread_mutex_t mu;
	uint64_t next_ns; /* loop: the next round */
	bool busy;        /* a round or a step is in flight (mu) */
	bool closing;
	uint64_t quorum_log_ns; /* no "no live majority" log before */
	uint64_t gsi_log_ns;    /* no "waits for a GSI's backfill" log before */

	/* When each node last answered node_status (by id; 0: not since this
	 * node started leading group 0, which counts as "now" at its start:
	 * a new leader gives every node the whole grace period). */
	uint64_t seen_ns[SH_MAP_MAX_SEEN];
	uint32_t seen_id[SH_MAP_MAX_SEEN];
	uint64_t lead_since_ns; /* when this node's current leadership of group 0 began */
	uint64_t lead_term;
	uint64_t dead_after_ns;

	/* The round's facts (mu). */
	sh_map map;
	bool map_init;
	bool *alive;       /* parallel to map.nodes */
	group_fact *facts; /* parallel to map.groups */
	uint32_t facts_n;
	uint32_t pending; /* node_status answers outstanding */
	bool gathering;   /* the round waits for them */
	uint64_t gen;     /* the round's number: a later one drops older answers */
	/* Tests (SHOAL_ELASTIC_TEST_GATHER_MS): every round gathers at least
	 * this long, as if the nodes answered slowly; gathered_ns: until when
	 * this round does. */
	uint64_t test_gather_ns, gathered_ns;
	/* Each group's leader as the last complete round found it (by group
	 * id): a cutover that cuts a round's gathering short asks it. */
	struct known_leader {
		uint32_t group, node;
	} * leaders;
	uint32_t n_leaders;

	/* The step (mu): up to three sub-operations, run in order. */
	char what[160];
	sub subs[3];
	uint32_t n_subs, at;
	node_waiter w; /* SUB_MAP's proposal on group 0 */
	bool w_init;
	Shoal__MapSet set;
	uint8_t *set_buf;

	ready_move ready; /* (mu) */
	/* The map's partitions as of the last round (a digest of each one's
	 * table, lo, group and target) and when they last changed; 0: not
	 * since this node started, which counts as a change. */
	uint64_t parts_digest, parts_changed_ns;
	/* Per map table, a digest of which group owns how much of its hash
	 * space (split-invariant: a split in place leaves it as it is), and
	 * when one of them last changed: a partition changed group (0: not
	 * since this node started).  A table that enters the map changes no
	 * owner. */
	struct table_owners {
		uint32_t table;
		uint64_t owners;
	} * owners;
	uint32_t n_owners;
	uint64_t owners_changed_ns;

	el_book *book; /* what the executor knows of load (mu) */

	/* Statistics. */
	atomic_uint_fast64_t steps, failures, splits, hot_keys;
};

static void round_end(node_elastic *e, uint64_t pause_ms)
{
	/* A move reported READY (asked, or pushed by its source: part_ready)
	 * is cut over by the next round, at once. */
	if (e->ready.valid)
		pause_ms = 0;
	/* While a partition move is in flight its cutover waits for a round
	 * (the source's READY is asked each round): rounds come quickly. */
	for (uint32_t i = 0;
	     e->map_init && pause_ms > ELASTIC_MOVING_ROUND_MS && i < e->map.n_parts; i++)
		if (e->map.parts[i].to_group != SH_MAP_NONE)
			pause_ms = ELASTIC_MOVING_ROUND_MS;
	e->busy = false;
	e->next_ns = node_now_ns() + pause_ms * 1000000u;
}

static void run_sub(node_elastic *e);

static void step_failed(node_elastic *e, const char *why)
{
	atomic_fetch_add(&e->failures, 1);
	node_logf(NODE_LOG_WARN, "elastic: %s: stopped at step %u: %s (the next round starts over)",
	          e->what, e->at + 1, why);
	round_end(e, NODE_ELASTIC_ROUND_MS);
}

static void sub_done(node_elastic *e)
{
	if (++e->at < e->n_subs) {
		run_sub(e);
		return;
	}
	atomic_fetch_add(&e->steps, 1);
	node_logf(NODE_LOG_INFO, "elastic: %s: done", e->what);
	round_end(e, 0);
}

/* --- exchanges with nodes ------------------------------------------------- */

static void ask_free(ask *a)
{
	sh_free(a->buf);
	sh_free(a);
}

/* Packs nr and sends it to node dest; done called on an nng thread with the
 * unpacked answer (NULL: no answer). */
static bool send_to(node_elastic *e, uint32_t dest, Shoal__NodeRequest *nr, int64_t ms,
                    void (*done)(wire_lane_item *, int, nng_msg *, const uint8_t *, size_t),
                    const ready_move *move)
{
	wire_lanes *l = node_ship_lanes_to(e->s, dest);
	ask *a = sh_calloc(1, sizeof(*a));
	size_t len = shoal__node_request__get_packed_size(nr);
	if (a != NULL)
		a->buf = sh_malloc(len > 0 ? len : 1);
	if (l == NULL || a == NULL || a->buf == NULL) {
		if (a != NULL)
			ask_free(a);
		return false;
	}
	a->e = e;
	a->gen = e->gen;
	a->node = dest;
	if (move != NULL)
		a->move = *move;
	a->item.part[0] = a->buf;
	a->item.len[0] = shoal__node_request__pack(nr, a->buf);
	a->item.deadline = sh_now_ms() + ms;
	a->item.done = done;
	if (wire_lanes_submit(l, &a->item) != SHOAL_OK) {
		ask_free(a);
		return false;
	}
	return true;
}

static Shoal__NodeResponse *answer_of(int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	Shoal__NodeResponse *nr = NULL;
	if (rv == WIRE_LANE_OK)
		wire_unpack_node_response(NULL, ans, len, &nr, NULL);
	if (whole != NULL)
		nng_msg_free(whole);
	return nr;
}

static int code_of(const Shoal__NodeResponse *nr, char *msg, size_t cap)
{
	if (nr == NULL) {
		snprintf(msg, cap, "no answer");
		return SHOAL_E_UNAVAILABLE;
	}
	if (nr->response == NULL) {
		snprintf(msg, cap, "an answer without a response");
		return SHOAL_E_INTERNAL;
	}
	snprintf(msg, cap, "%s", nr->response->message != NULL ? nr->response->message : "");
	return wire_code_from_status(nr->response->status);
}

/* --- the round: facts ------------------------------------------------------ */

static int node_index(const sh_map *m, uint32_t id)
{
	for (uint32_t i = 0; i < m->n_nodes; i++)
		if (m->nodes[i].id == id)
			return (int)i;
	return -1;
}

static int group_index(const sh_map *m, uint32_t id)
{
	const sh_map_group *g = sh_map_group_get(m, id);
	return g == NULL ? -1 : (int)(g - m->groups);
}

static void plan_and_act(node_elastic *e);
static bool send_own(node_elastic *e, const sub *s,
                     void (*done)(wire_lane_item *, int, nng_msg *, const uint8_t *, size_t));
static void early_own_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans,
                           size_t len);

/* The slot of node id in seen_* (a free or the oldest one if new). */
static uint32_t seen_slot(node_elastic *e, uint32_t id)
{
	uint32_t oldest = 0;
	for (uint32_t i = 0; i < SH_MAP_MAX_SEEN; i++) {
		if (e->seen_id[i] == id)
			return i;
		if (e->seen_ns[i] < e->seen_ns[oldest])
			oldest = i;
	}
	e->seen_id[oldest] = id;
	e->seen_ns[oldest] = 0;
	return oldest;
}

static void seen(node_elastic *e, uint32_t id, uint64_t now)
{
	e->seen_ns[seen_slot(e, id)] = now;
}

/* Whether node id counts as live for the planner: it answered within
 * dead_after (a node is "dead" -- its replicas re-created elsewhere -- only
 * after that long, so a restart or a short partition moves nothing). */
static bool live(node_elastic *e, uint32_t id, uint64_t now)
{
	uint64_t t = e->seen_ns[seen_slot(e, id)];
	if (t == 0) {
		/* Not heard from since this leadership began: a node holding
		 * replicas gets the grace from then; one holding none (a node
		 * registered that never ran) is no place for a replica. */
		uint32_t any;
		if (sh_map_node_groups(&e->map, id, &any, 1) == 0)
			return false;
		t = e->lead_since_ns;
	}
	return now < t + e->dead_after_ns;
}

/* Every node_status of the round is in (mu held): the round goes on, unless
 * a test holds it longer (node_elastic_tick then). */
static void gathered(node_elastic *e, uint64_t now)
{
	if (now < e->gathered_ns)
		return;
	e->gathering = false;
	if (e->closing)
		e->busy = false;
	else
		plan_and_act(e);
}

static void status_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	ask *a = (ask *)it;
	node_elastic *e = a->e;
	Shoal__NodeResponse *nr = answer_of(rv, whole, ans, len);
	char msg[SH_ERRMSG_SIZE];
	int code = code_of(nr, msg, sizeof(msg));
	pthread_mutex_lock(&e->mu);
	if (a->gen != e->gen || !e->gathering) {
		/* A round a cutover cut short (node_elastic_tick): dropped. */
		pthread_mutex_unlock(&e->mu);
		if (nr != NULL)
			shoal__node_response__free_unpacked(nr, wire_heap_allocator());
		ask_free(a);
		return;
	}
	int ni = node_index(&e->map, a->node);
	if (code == SHOAL_OK && ni >= 0) {
		e->alive[ni] = true;
		seen(e, a->node, node_now_ns());
		for (size_t k = 0; k < nr->n_groups; k++) {
			const Shoal__GroupStatus *gs = nr->groups[k];
			int gi = group_index(&e->map, gs->group);
			if (gi < 0 || gs->role == NULL)
				continue;
			group_fact *f = &e->facts[gi];
			if (strcmp(gs->role, "lost") == 0 && f->n_lost < SH_MAP_GROUP_REPLICAS) {
				f->lost[f->n_lost++] = a->node;
				continue;
			}
			if (strcmp(gs->role, "leader") != 0)
				continue;
			if (f->leader != 0 && gs->term <= f->term)
				continue;
			f->leader = a->node;
			f->term = gs->term;
			f->last_index = gs->last_index;
			el_figures_of(gs, &f->load);
			f->n_members = 0;
			for (size_t j = 0; j < gs->n_members && j < ELASTIC_MAX_MEMBERS; j++) {
				const Shoal__RaftMember *rm = gs->members[j];
				f->members[f->n_members].node = rm->node;
				f->members[f->n_members].voter = strcmp(rm->role, "voter") == 0;
				f->members[f->n_members].standby = strcmp(rm->role, "standby") == 0;
				f->members[f->n_members].match = rm->match_index;
				f->n_members++;
			}
		}
	}
	if (--e->pending == 0)
		gathered(e, node_now_ns());
	pthread_mutex_unlock(&e->mu);
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	ask_free(a);
}

static void facts_free(node_elastic *e)
{
	for (uint32_t gi = 0; e->facts != NULL && gi < e->facts_n; gi++)
		el_figures_fini(&e->facts[gi].load);
	sh_free(e->facts);
	e->facts = NULL;
	e->facts_n = 0;
}

/* A table's owners digest: the sum over its partitions of a mix of (table,
 * group) times the partition's width, so that two halves of a split in
 * place sum to the whole (mod 2^64) and a partition changing group changes
 * it. */
static uint64_t owner_mix(uint32_t table, uint32_t group)
{
	uint64_t x = ((uint64_t)table << 32 | group) + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Recomputes e->owners from e->map (parts are sorted by table, then lo)
 * and notes when a table's owners changed. */
static void note_owners(node_elastic *e)
{
	const sh_map *m = &e->map;
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->n_parts; i++)
		n += i == 0 || m->parts[i].table != m->parts[i - 1].table;
	struct table_owners *now = sh_calloc(n + 1, sizeof(*now));
	if (now == NULL)
		return; /* (the next round tries again) */
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->n_parts; i++) {
		const sh_map_part *p = &m->parts[i];
		if (i == 0 || p->table != m->parts[i - 1].table)
			now[k++] = (struct table_owners){.table = p->table};
		now[k - 1].owners +=
		    owner_mix(p->table, p->group) * (sh_map_part_hi(m, i) - p->lo + 1);
	}
	/* Both lists are in table order: one merge. */
	bool changed = false;
	for (uint32_t i = 0, j = 0; i < n && j < e->n_owners && !changed;) {
		if (now[i].table < e->owners[j].table)
			i++;
		else if (now[i].table > e->owners[j].table)
			j++;
		else
			changed = now[i++].owners != e->owners[j++].owners;
	}
	if (changed)
		e->owners_changed_ns = node_now_ns();
	sh_free(e->owners);
	e->owners = now;
	e->n_owners = n;
}

static void round_start(node_elastic *e)
{
	node_group *g0 = node_group_get(e->n, 0);
	char msg[SH_ERRMSG_SIZE];
	if (e->map_init)
		sh_map_fini(&e->map);
	e->map_init = true;
	if (g0 == NULL || node_map_load(e->n, g0, &e->map, msg) != SHOAL_OK) {
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	uint64_t digest = 1469598103934665603ull; /* FNV-1a over the partitions */
	for (uint32_t i = 0; i < e->map.n_parts; i++) {
		const sh_map_part *p = &e->map.parts[i];
		uint64_t v[4] = {p->table, p->lo, p->group, p->to_group};
		for (int k = 0; k < 4; k++)
			digest = (digest ^ v[k]) * 1099511628211ull;
	}
	if (digest != e->parts_digest || e->parts_changed_ns == 0) {
		e->parts_digest = digest;
		e->parts_changed_ns = node_now_ns();
	}
	note_owners(e);
	facts_free(e);
	sh_free(e->alive);
	e->alive = sh_calloc(e->map.n_nodes + 1, sizeof(*e->alive));
	e->facts = sh_calloc(e->map.n_groups + 1, sizeof(*e->facts));
	e->facts_n = e->facts != NULL ? e->map.n_groups : 0;
	if (e->alive == NULL || e->facts == NULL) {
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.node_status = true;
	e->gen++;
	e->gathering = true;
	e->gathered_ns = e->test_gather_ns != 0 ? node_now_ns() + e->test_gather_ns : 0;
	e->pending = 1; /* held while sending */
	for (uint32_t i = 0; i < e->map.n_nodes; i++) {
		e->pending++;
		if (!send_to(e, e->map.nodes[i].id, &nr, ELASTIC_STATUS_MS, status_done, NULL))
			e->pending--;
	}
	if (--e->pending == 0)
		gathered(e, node_now_ns());
}

/* --- the round: decisions -------------------------------------------------- */

static const group_fact *fact_of(node_elastic *e, uint32_t group)
{
	int gi = group_index(&e->map, group);
	/* (No facts for this map: a round that could not begin them.) */
	return gi < 0 || e->facts == NULL || (uint32_t)gi >= e->facts_n ? NULL : &e->facts[gi];
}

static int member_of(const group_fact *f, uint32_t id)
{
	for (uint32_t j = 0; j < f->n_members; j++)
		if (f->members[j].node == id)
			return (int)j;
	return -1;
}

static void begin(node_elastic *e, const sub *subs, uint32_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void begin(node_elastic *e, const sub *subs, uint32_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->what, sizeof(e->what), fmt, ap);
	va_end(ap);
	memcpy(e->subs, subs, n * sizeof(*subs));
	e->n_subs = n;
	e->at = 0;
	node_logf(NODE_LOG_INFO, "elastic: %s (map epoch %" PRIu64 ")", e->what, e->map.epoch);
	run_sub(e);
}

/* Step 2: what a previous round left half done. */
static bool repair(node_elastic *e)
{
	/* A new group that has elected a leader: its founders bootstrapped
	 * it (a majority of them at least), so its replicas may now change
	 * like any group's (a founder that had not opened it by then finds no
	 * founder mark and reports it lost: re-created as a new replica). */
	for (uint32_t gi = 0; gi < e->map.n_groups; gi++) {
		const sh_map_group *g = &e->map.groups[gi];
		if (!sh_map_group_founding(g) || e->facts[gi].leader == 0)
			continue;
		sub s = {.kind = SUB_MAP, .mut = MUT_FOUNDED, .group = g->id};
		begin(e, &s, 1, "group %u: founded, led by node %u", g->id, e->facts[gi].leader);
		return true;
	}
	for (uint32_t gi = 0; gi < e->map.n_groups; gi++) {
		const sh_map_group *g = &e->map.groups[gi];
		const group_fact *f = &e->facts[gi];
		if (f->leader == 0)
			continue;
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			const sh_map_replica *r = &g->replicas[k];
			int ni = node_index(&e->map, r->node);
			if (r->voter || ni < 0 || !e->alive[ni] || member_of(f, r->node) >= 0)
				continue;
			sub s = {.kind = SUB_MEMBER,
			         .action = SHOAL__MEMBER_CHANGE__ACTION__ADD,
			         .group = g->id,
			         .node = r->node};
			begin(e, &s, 1,
			      "group %u: add node %u to Raft as a standby (in the map already)",
			      g->id, r->node);
			return true;
		}
	}
	/* A replica whose node lost its data (its disk was replaced: the node
	 * came back with an empty directory and did not open the group, which
	 * would have let it vote with no memory): out of Raft and the map; the
	 * planner then re-creates it as a new replica, caught up from the
	 * others before it votes. */
	for (uint32_t gi = 0; gi < e->map.n_groups; gi++) {
		const sh_map_group *g = &e->map.groups[gi];
		const group_fact *f = &e->facts[gi];
		for (uint32_t k = 0; f->leader != 0 && k < f->n_lost; k++) {
			/* Only a voter: a node reports "lost" a group the map
			 * it knows has it vote in; once its replica is a new
			 * non-voter it opens the group empty, as it should --
			 * its report may lag the map by a refresh. */
			int ri = sh_map_replica_index(g, f->lost[k]);
			if (ri < 0 || !g->replicas[ri].voter || f->lost[k] == f->leader)
				continue;
			sub s[2] = {{.kind = SUB_MEMBER,
			             .action = SHOAL__MEMBER_CHANGE__ACTION__REMOVE,
			             .group = g->id,
			             .node = f->lost[k]},
			            {.kind = SUB_MAP,
			             .mut = MUT_REMOVE_REPLICA,
			             .group = g->id,
			             .node = f->lost[k]}};
			begin(e, s, 2,
			      "group %u: node %u lost its replica's data: remove it (repair)",
			      g->id, f->lost[k]);
			return true;
		}
	}
	for (uint32_t i = 0; i < e->map.n_nodes; i++) {
		const sh_map_node *nd = &e->map.nodes[i];
		uint32_t any;
		if (nd->state != SH_MAP_NODE_DRAINING ||
		    sh_map_node_groups(&e->map, nd->id, &any, 1) != 0)
			continue;
		sub s = {.kind = SUB_MAP, .mut = MUT_REMOVE_NODE, .node = nd->id};
		begin(e, &s, 1, "node %u: drained, leaves the cluster map", nd->id);
		return true;
	}
	return false;
}

/*
 * auto_groups: a founded group made since the birth holding no partition
 * can be given one (the planner's step 7) only from tables in the map; a
 * table placed statically enters it first (moving nothing) -- the one with
 * the most bytes in a group.  Index into t, or -1.
 */
static int table_for_new_group(node_elastic *e, const sh_plan_table_load *t, uint32_t n)
{
	const sh_map *m = &e->map;
	bool empty = false;
	if (!e->n->conf->auto_groups)
		return -1;
	for (uint32_t gi = 0; gi < m->n_groups && !empty; gi++) {
		const sh_map_group *g = &m->groups[gi];
		if (g->id < e->n->conf->groups || sh_map_group_founding(g))
			continue;
		empty = true;
		for (uint32_t i = 0; i < m->n_parts && empty; i++)
			empty = m->parts[i].group != g->id && m->parts[i].to_group != g->id;
	}
	int best = -1;
	for (uint32_t k = 0; empty && k < n; k++)
		if (t[k].bytes > 0 && sh_map_is_data_group(m, t[k].group) &&
		    sh_map_part_of(m, t[k].table, 0) == SH_MAP_NONE &&
		    (best < 0 || t[k].bytes > t[best].bytes))
			best = (int)k;
	return best;
}

/* part_move answered: a READY move is remembered for the next round, which
 * comes at once. */
static void part_asked(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	ask *a = (ask *)it;
	node_elastic *e = a->e;
	Shoal__NodeResponse *nr = answer_of(rv, whole, ans, len);
	char msg[SH_ERRMSG_SIZE];
	int code = code_of(nr, msg, sizeof(msg));
	int phase = code == SHOAL_OK && nr->part_status != NULL ? (int)nr->part_status->phase : 0;
	if (phase == SHOAL__PART_STATUS__PHASE__READY ||
	    phase == SHOAL__PART_STATUS__PHASE__FENCED) {
		/* The range is refused while fenced: the cutover comes as soon
		 * as it is ready, not a round later. */
		uint64_t soon = node_now_ns() + ELASTIC_FENCED_POLL_MS * 1000000ull;
		pthread_mutex_lock(&e->mu);
		if (phase == SHOAL__PART_STATUS__PHASE__READY) {
			const Shoal__StreamShardRef *sc = nr->part_status->stream_closed;
			e->ready = a->move;
			e->ready.attempt = nr->part_status->attempt;
			e->ready.has_shard = sc != NULL;
			e->ready.shard_lo = sc != NULL ? sc->lo : 0;
			e->ready.shard_start = sc != NULL ? sc->start : 0;
			e->ready.valid = true;
			soon = 0;
		}
		if (!e->busy && e->next_ns > soon)
			e->next_ns = soon;
		pthread_mutex_unlock(&e->mu);
	}
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	ask_free(a);
}

int node_handle_part_ready(node_call *c)
{
	const Shoal__PartRange *r = c->req->part_ready;
	node_elastic *e = c->node->ship != NULL ? c->node->ship->elastic : NULL;
	uint64_t term;
	if (node_group_id(c->group) != 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "part_ready goes to group 0");
	if (!node_group_leading(c->group, &term)) {
		node_group_status st;
		node_group_status_get(c->group, &st);
		c->nresp->leader_node = st.leader;
		return sh_errf(c->errmsg, SHOAL_E_NOT_LEADER, "not the leader of group 0");
	}
	if (e == NULL)
		return SHOAL_OK;
	/* Believed as a polled READY is: cut_over_ready checks it against
	 * the map, and the target's own against its attempt.  The loop's next
	 * tick cuts over, even in the middle of a round's gathering
	 * (node_elastic_tick). */
	const Shoal__StreamShardRef *sc = r->stream_parent;
	pthread_mutex_lock(&e->mu);
	e->ready = (ready_move){.valid = true,
	                        .table = r->table,
	                        .from = r->from_group,
	                        .to = r->to_group,
	                        .lo = r->lo,
	                        .hi = r->hi,
	                        .attempt = r->attempt,
	                        .has_shard = sc != NULL,
	                        .shard_lo = sc != NULL ? sc->lo : 0,
	                        .shard_start = sc != NULL ? sc->start : 0};
	if (!e->busy || e->gathering)
		e->next_ns = 0;
	pthread_mutex_unlock(&e->mu);
	node_wake(c->node);
	return SHOAL_OK;
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Group 0's catalog (this leader's replica) against the map: *gone, a
 * table with partitions in the map that the catalog no longer has --
 * deleted, as table ids are never reused and a table enters the map only
 * once the catalog has it; *missing, when new tables start with more
 * partitions than the static D ([cluster] table_partitions), a catalog
 * table not in the map yet.  0: none, or the catalog could not be read (the
 * next round looks again). */
static void catalog_vs_map(node_elastic *e, uint32_t *gone_out, uint32_t *missing_out)
{
	*gone_out = *missing_out = 0;
	bool want_all = sh_cluster_table_partitions(e->n->conf) > sh_cluster_partitions(e->n->conf);
	if (e->map.n_parts == 0 && !want_all)
		return;
	node_group *g0 = node_group_get(e->n, 0);
	if (g0 == NULL)
		return;
	st_env *env = node_group_env(g0);
	sh_arena a;
	sh_arena_init(&a);
	uint32_t *ids = NULL, n_ids = 0, cap = 0, gone = 0, missing = 0;
	const char *start = NULL, *last;
	char msg[SH_ERRMSG_SIZE];
	bool ok = true;
	do {
		const char **names;
		uint32_t n;
		if (st_table_list(env, start, 100, &a, &names, &n, &last, msg) != SHOAL_OK) {
			ok = false;
			break;
		}
		for (uint32_t k = 0; k < n && ok; k++) {
			uint32_t id;
			if (st_table_id(env, names[k], &id, msg) != SHOAL_OK)
				continue; /* deleted meanwhile */
			if (n_ids == cap) {
				uint32_t *v = sh_arena_calloc(&a, cap * 2 + 16, sizeof(*v));
				if (v == NULL) {
					ok = false;
					break;
				}
				if (n_ids > 0)
					memcpy(v, ids, n_ids * sizeof(*v));
				ids = v;
				cap = cap * 2 + 16;
			}
			ids[n_ids++] = id;
		}
		start = last;
	} while (ok && last != NULL);
	/* Sorted, so that each map table is looked up, not scanned for (the
	 * map holds many tables, and this runs every round). */
	if (ok && n_ids > 1)
		qsort(ids, n_ids, sizeof(*ids), by_u32);
	for (uint32_t i = 0; ok && gone == 0 && i < e->map.n_parts; i++) {
		uint32_t t = e->map.parts[i].table;
		if ((i > 0 && e->map.parts[i - 1].table == t) || t == SH_MAP_GSI_SPACE)
			continue; /* the GSI space is no table of the catalog */
		if (n_ids == 0 || bsearch(&t, ids, n_ids, sizeof(*ids), by_u32) == NULL)
			gone = t;
	}
	for (uint32_t k = 0; ok && want_all && missing == 0 && k < n_ids; k++)
		if (sh_map_part_of(&e->map, ids[k], 0) == SH_MAP_NONE)
			missing = ids[k];
	sh_arena_fini(&a);
	*gone_out = gone;
	*missing_out = missing;
}

/* The cutover of the move reported READY, if e->map has it in flight, as
 * a step: the map's finish (routers go to the target), then part_own on
 * the target with the attempt whose data is complete (for a table's range
 * also sent at once, beside the finish).  Begun (true), or
 * not (false; e->ready forgotten unless keep: the map of an earlier round
 * may not show the move yet, the next round's will). */
static bool cut_over_ready(node_elastic *e, bool keep)
{
	if (!e->ready.valid || !e->map_init)
		return false;
	ready_move r = e->ready;
	uint32_t i = sh_map_part_find(&e->map, r.table, r.lo);
	if (i == SH_MAP_NONE || e->map.parts[i].group != r.from ||
	    e->map.parts[i].to_group != r.to || sh_map_part_hi(&e->map, i) != r.hi) {
		e->ready.valid = keep;
		return false;
	}
	e->ready.valid = false;
	sub s[2] = {{.kind = SUB_MAP,
	             .mut = MUT_FINISH_MOVE,
	             .group = r.to,
	             .table = r.table,
	             .lo = r.lo,
	             .hi = r.hi},
	            {.kind = SUB_OWN,
	             .group = r.to,
	             .table = r.table,
	             .lo = r.lo,
	             .hi = r.hi,
	             .attempt = r.attempt,
	             .has_shard = r.has_shard,
	             .from = r.from,
	             .shard_lo = r.shard_lo,
	             .shard_start = r.shard_start}};
	/* A range of the GSI space: the own carries the watermarks its source
	 * pinned, which only the source's driver has (pmove.c): it tells the
	 * target once it sees the map.  A table's range: the target is told to
	 * serve it at once, while the map's flip is proposed -- a READY range
	 * is fenced at its source, which never serves it again (no move is
	 * aborted past its fence), and until the flip no router sends the
	 * target anything for it -- so that the routers' first requests after
	 * the flip do not wait for the own's Raft commit at the target.  The
	 * step's own after the flip confirms it (or does it, if this one was
	 * lost). */
	if (r.table != SH_MAP_GSI_SPACE)
		send_own(e, &s[1], early_own_done);
	begin(e, s, r.table == SH_MAP_GSI_SPACE ? 1 : 2,
	      "%s [%016" PRIx64 ", %016" PRIx64 "]: cut over from group %u to group %u",
	      SH_MAP_TABLE(r.table), r.lo, r.hi, r.from, r.to);
	return true;
}

/* Partition moves begun in the map (shoal admin, or the planner): one
 * reported READY is cut over; the source group's leader of each other is
 * asked how it goes (pmove.c drives it).  Asking is not a step: the
 * planner goes on meanwhile. */
static bool partition_moves(node_elastic *e)
{
	if (cut_over_ready(e, false))
		return true;
	for (uint32_t i = 0; i < e->map.n_parts; i++) {
		const sh_map_part *p = &e->map.parts[i];
		if (p->to_group == SH_MAP_NONE)
			continue;
		const group_fact *f = fact_of(e, p->group);
		if (f == NULL || f->leader == 0)
			continue;
		Shoal__PartRange r = SHOAL__PART_RANGE__INIT;
		r.table = p->table;
		r.lo = p->lo;
		r.hi = sh_map_part_hi(&e->map, i);
		r.to_group = p->to_group;
		r.attempt = e->map.epoch; /* part_move: the map the move is in */
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.group = p->group;
		nr.part_move = &r;
		ready_move mv = {
		    .table = r.table, .from = p->group, .to = r.to_group, .lo = r.lo, .hi = r.hi};
		send_to(e, f->leader, &nr, ELASTIC_STATUS_MS, part_asked, &mv);
	}
	return false;
}

/* HOT_KEY: a key splitting cannot divide.  Remembered for `shoal status`
 * (node_elastic_unsplit_status), logged once per (table, hash) an hour, and
 * counted. */
static void hot_key(node_elastic *e, const sh_plan_action *a)
{
	const group_fact *f = fact_of(e, a->group);
	if (!el_hot_key_found(e->book, f != NULL ? &f->load : NULL, a->table, a->at, a->group,
	                      a->lo, a->reason == SH_PLAN_R_SIZE, node_now_ns()))
		return;
	atomic_fetch_add(&e->hot_keys, 1);
	node_logf(NODE_LOG_WARN,
	          "elastic: %s partition at %016" PRIx64 " in group %u: a single hot key "
	          "(hash %016" PRIx64 ") carries most of its %s; it is not split (a split cannot "
	          "divide one key's load)",
	          SH_MAP_TABLE(a->table), a->lo, a->group, a->at,
	          a->reason == SH_PLAN_R_SIZE ? "size" : "load");
}

/* The planner's view as one log phrase: each node's leaders and units, then
 * the steps planned ("leaders/units per node 1:2/310 2:1/95 ...; plan g0->1
 * g3->2"), so that a leader transfer can be checked against its figures. */
static void plan_view(const node_elastic *e, const sh_plan_group_load *gl,
                      const sh_plan_part_load *parts, const sh_plan_action *acts, uint32_t n,
                      char *buf, size_t size)
{
	size_t at = 0;
	buf[0] = '\0';
#define VIEW(...)                                                                                  \
	do {                                                                                       \
		if (at < size)                                                                     \
			at += (size_t)snprintf(buf + at, size - at, __VA_ARGS__);                  \
	} while (0)
	VIEW("leaders/units per node");
	for (uint32_t ni = 0; ni < e->map.n_nodes; ni++) {
		uint32_t id = e->map.nodes[ni].id, led = 0;
		double units = 0;
		for (uint32_t gi = 0; gi < e->map.n_groups; gi++) {
			if (gl[gi].leader != id)
				continue;
			led++;
			for (uint32_t i = 0; parts != NULL && i < e->map.n_parts; i++) {
				const sh_map_part *x = &e->map.parts[i];
				uint32_t g = x->to_group != SH_MAP_NONE ? x->to_group : x->group;
				if (g == e->map.groups[gi].id)
					units += parts[i].units;
			}
		}
		VIEW(" %u:%u/%.0f%s", id, led, units, e->alive[ni] ? "" : "(dead)");
	}
	VIEW("; plan");
	for (uint32_t i = 0; i < n; i++)
		if (acts[i].kind == SH_PLAN_TRANSFER_LEADER)
			VIEW(" g%u->%u", acts[i].group, acts[i].node);
		else
			VIEW(" %s", sh_plan_kind_name(acts[i].kind));
#undef VIEW
}

/* Whether table has a GSI being created, as group 0's catalog (this
 * leader's replica) has it: its partitions do not move until the index is
 * ACTIVE (group 0 refuses a map that begins such a move: storage/
 * clustermap.c, moves_allowed), so the
 * planner's split into another group or move of it waits, logged once a
 * minute.  A split in place moves nothing and goes on. */
static bool waits_for_gsi(node_elastic *e, uint32_t table)
{
	node_group *g0 = node_group_get(e->n, 0);
	if (g0 == NULL)
		return false;
	sh_arena a;
	sh_arena_init(&a);
	st_index_progress *p;
	uint32_t n;
	char msg[SH_ERRMSG_SIZE];
	bool creating = false;
	const char *name = "";
	if (st_index_progress_list(node_group_env(g0), &a, &p, &n, msg) == SHOAL_OK)
		for (uint32_t i = 0; i < n && !creating; i++)
			if ((p[i].table_id == table || table == SH_MAP_GSI_SPACE) && !p[i].local &&
			    p[i].status == ST_INDEX_CREATING)
				creating = true, name = p[i].index;
	if (creating && node_now_ns() >= e->gsi_log_ns) {
		node_logf(NODE_LOG_INFO,
		          "elastic: %s: its partitions move once its index %s, being "
		          "created, is ACTIVE",
		          SH_MAP_TABLE(table), name);
		e->gsi_log_ns = node_now_ns() + 60ull * 1000000000u;
	}
	sh_arena_fini(&a);
	return creating;
}

/* Keeps each group's leader of this (complete) round for a cutover that
 * cuts the next round short. */
static void note_leaders(node_elastic *e)
{
	struct known_leader *v = sh_calloc(e->facts_n + 1, sizeof(*v));
	if (v == NULL)
		return; /* (the last ones stay) */
	uint32_t k = 0;
	for (uint32_t gi = 0; gi < e->facts_n && gi < e->map.n_groups; gi++)
		if (e->facts[gi].leader != 0)
			v[k++] = (struct known_leader){e->map.groups[gi].id, e->facts[gi].leader};
	sh_free(e->leaders);
	e->leaders = v;
	e->n_leaders = k;
}

/* Group's leader: this round's if it found one, else the last round's. */
static uint32_t leader_of(node_elastic *e, uint32_t group)
{
	const group_fact *f = fact_of(e, group);
	if (f != NULL && f->leader != 0)
		return f->leader;
	for (uint32_t k = 0; k < e->n_leaders; k++)
		if (e->leaders[k].group == group)
			return e->leaders[k].node;
	return 0;
}

static void plan_and_act(node_elastic *e)
{
	/* Judge only from a majority's view: a node that cannot hear most of
	 * the cluster (or a cluster whose nodes do not answer node_status)
	 * must not declare the others dead and move their replicas. */
	uint32_t alive = 0;
	for (uint32_t i = 0; i < e->map.n_nodes; i++)
		alive += e->alive[i];
	if (alive < e->map.n_nodes / 2 + 1) {
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	note_leaders(e);
	if (repair(e))
		return;
	if (partition_moves(e))
		return;
	/* The planner's notion: live unless unheard of for dead_after. */
	uint64_t now = node_now_ns();
	for (uint32_t i = 0; i < e->map.n_nodes; i++)
		e->alive[i] = live(e, e->map.nodes[i].id, now);
	sh_plan_group_load *gl = sh_calloc(e->map.n_groups + 1, sizeof(*gl));
	if (gl == NULL) {
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	for (uint32_t gi = 0; gi < e->map.n_groups; gi++) {
		const sh_map_group *g = &e->map.groups[gi];
		const group_fact *f = &e->facts[gi];
		gl[gi].leader = f->leader;
		bool caught = f->leader != 0;
		for (uint32_t k = 0; caught && k < g->n_replicas; k++) {
			if (g->replicas[k].voter)
				continue;
			int j = member_of(f, g->replicas[k].node);
			caught = j >= 0 && f->members[j].match + ELASTIC_CAUGHT_UP >= f->last_index;
		}
		gl[gi].caught_up = caught;
	}
	/* Leader balance only from a whole picture: a group without a known
	 * leader this round (an election under way, a cluster starting) would
	 * make its leader's node look lighter than it is. */
	bool all_led = true;
	for (uint32_t gi = 0; gi < e->map.n_groups; gi++)
		all_led = all_led && gl[gi].leader != 0;
	/* ... and only once node/group.c's bias has done its part: every
	 * group led by its preferred replica.  Until then (elections landing
	 * elsewhere, a node just restarted) the groups move back by
	 * themselves, and a transfer now would only fight that. */
	for (uint32_t gi = 0; gi < e->map.n_groups && all_led; gi++)
		all_led = gl[gi].leader == sh_map_preferred(&e->map, e->map.groups[gi].id);
	sh_plan_table_load *tables;
	sh_plan_part_load *parts;
	sh_plan_sample *samples;
	uint32_t n_tables;
	el_figures *figs = sh_calloc(e->map.n_groups + 1, sizeof(*figs));
	for (uint32_t gi = 0; figs != NULL && gi < e->map.n_groups; gi++)
		if (e->facts[gi].leader != 0)
			figs[gi] = e->facts[gi].load; /* shallow: facts keep them */
	if (figs == NULL || el_round_loads(e->book, &e->map, figs, node_now_ns(), &tables,
	                                   &n_tables, &parts, &samples) != SHOAL_OK) {
		if (figs != NULL) {
			sh_free(tables);
			sh_free(parts);
			sh_free(samples);
		}
		sh_free(figs);
		sh_free(gl);
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	sh_free(figs);
	/* A table deleted since its partitions entered the map: they go (a
	 * move of one is abandoned: its source forgets it, storage/parts.h). */
	uint32_t gone, missing;
	catalog_vs_map(e, &gone, &missing);
	if (missing != 0) {
		sub s = {.kind = SUB_MAP, .mut = MUT_ADD_TABLE, .table = missing};
		begin(e, &s, 1, "%s: into the cluster map with %u partitions (table_partitions)",
		      SH_MAP_TABLE(missing), sh_cluster_table_partitions(e->n->conf));
		sh_free(tables);
		sh_free(parts);
		sh_free(samples);
		sh_free(gl);
		return;
	}
	if (gone != 0) {
		sub s = {.kind = SUB_MAP, .mut = MUT_DROP_TABLE, .table = gone};
		begin(e, &s, 1, "%s: deleted, its partitions out of the cluster map",
		      SH_MAP_TABLE(gone));
		sh_free(tables);
		sh_free(parts);
		sh_free(samples);
		sh_free(gl);
		return;
	}
	int add = el_table_to_add(e->book, &e->map, tables, n_tables);
	if (add < 0)
		add = table_for_new_group(e, tables, n_tables);
	if (add >= 0) {
		sub s = {.kind = SUB_MAP, .mut = MUT_ADD_TABLE, .table = tables[add].table};
		begin(e, &s, 1,
		      "%s: into the cluster map (%" PRIu64 " bytes, %.0f units/s, %.1f "
		      "throttled/s in group %u), so that its partitions can split",
		      SH_MAP_TABLE(tables[add].table), tables[add].bytes, tables[add].units,
		      tables[add].throttled, tables[add].group);
		sh_free(tables);
		sh_free(parts);
		sh_free(samples);
		sh_free(gl);
		return;
	}
	sh_free(tables);
	sh_plan_input in = {.map = &e->map, .alive = e->alive, .groups = gl, .parts = parts};
	sh_plan_conf conf = {
	    .max_moves = 1,
	    .max_moves_per_node = 1,
	    .max_splits = 1,
	    .hot_key_share = 0.5,
	    .tolerance = {[SH_PLAN_REPLICAS] = 0.1,
	                  [SH_PLAN_LEADERS] = 0.25,
	                  [SH_PLAN_BYTES] = 0.1,
	                  [SH_PLAN_UNITS] = 0.2},
	};
	el_plan_conf(e->book, &conf);
	conf.max_groups = e->n->conf->auto_groups ? sh_cluster_group_cap(e->n->conf) : 0;
	/* Filling empty new groups goes with creating them: without
	 * auto_groups an operator's new group waits for the operator's moves
	 * (or the load-based ones). */
	conf.birth_groups = e->n->conf->auto_groups ? e->n->conf->groups : UINT32_MAX;
	conf.hold_partition_moves =
	    node_now_ns() < e->parts_changed_ns + (uint64_t)ELASTIC_PARTS_SETTLE_MS * 1000000u;
	conf.hold_splits =
	    node_now_ns() < e->owners_changed_ns + (uint64_t)ELASTIC_PARTS_SETTLE_MS * 1000000u;
	sh_plan_action acts[8];
	uint32_t n = 0;
	char msg[SH_ERRMSG_SIZE];
	int rc = sh_plan_next(&in, &conf, acts, 8, &n, msg);
	/* What a balance transfer was judged from, for its log line. */
	char view[512] = "";
	for (uint32_t i = 0; rc == SHOAL_OK && i < n && view[0] == '\0'; i++)
		if (acts[i].kind == SH_PLAN_TRANSFER_LEADER && acts[i].reason == SH_PLAN_R_BALANCE)
			plan_view(e, gl, parts, acts, n, view, sizeof(view));
	sh_free(gl);
	/* The loads, for the step's log line; the samples die with them. */
	double load_units[8] = {0}, load_throttled[8] = {0};
	uint64_t load_bytes[8] = {0};
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++) {
		uint32_t pi = sh_map_part_find(&e->map, acts[i].table, acts[i].lo);
		if ((acts[i].kind == SH_PLAN_SPLIT || acts[i].kind == SH_PLAN_MOVE_PARTITION) &&
		    pi != SH_MAP_NONE)
			load_units[i] = parts[pi].units, load_bytes[i] = parts[pi].bytes,
			load_throttled[i] = parts[pi].throttled;
	}
	sh_free(parts);
	sh_free(samples);
	if (rc != SHOAL_OK) {
		round_end(e, NODE_ELASTIC_ROUND_MS);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const sh_plan_action *a = &acts[i];
		const char *why = sh_plan_reason_name(a->reason);
		sub s[2];
		switch (a->kind) {
		case SH_PLAN_ADD_REPLICA:
			s[0] = (sub){.kind = SUB_MAP,
			             .mut = MUT_ADD_REPLICA,
			             .group = a->group,
			             .node = a->node,
			             .replaces = a->replaces};
			s[1] = (sub){.kind = SUB_MEMBER,
			             .action = SHOAL__MEMBER_CHANGE__ACTION__ADD,
			             .group = a->group,
			             .node = a->node};
			if (a->replaces != 0)
				begin(e, s, 2,
				      "group %u: new replica on node %u replacing node %u (%s)",
				      a->group, a->node, a->replaces, why);
			else
				begin(e, s, 2, "group %u: new replica on node %u (%s)", a->group,
				      a->node, why);
			return;
		case SH_PLAN_PROMOTE:
			s[0] = (sub){.kind = SUB_MEMBER,
			             .action = SHOAL__MEMBER_CHANGE__ACTION__PROMOTE,
			             .group = a->group,
			             .node = a->node};
			s[1] = (sub){.kind = SUB_MAP,
			             .mut = MUT_PROMOTE,
			             .group = a->group,
			             .node = a->node};
			begin(e, s, 2, "group %u: promote node %u to voter (%s)", a->group, a->node,
			      why);
			return;
		case SH_PLAN_REMOVE_REPLICA:
			s[0] = (sub){.kind = SUB_MEMBER,
			             .action = SHOAL__MEMBER_CHANGE__ACTION__REMOVE,
			             .group = a->group,
			             .node = a->node};
			s[1] = (sub){.kind = SUB_MAP,
			             .mut = MUT_REMOVE_REPLICA,
			             .group = a->group,
			             .node = a->node};
			begin(e, s, 2, "group %u: remove node %u's replica (%s)", a->group, a->node,
			      why);
			return;
		case SH_PLAN_TRANSFER_LEADER:
			if (a->reason == SH_PLAN_R_BALANCE && !all_led)
				continue;
			/* None for balance before this leadership has watched
			 * the loads for a while: group 0's leader is this
			 * executor, and a new one judging from figures it has only
			 * begun to average handed group 0 straight back -- under
			 * load two executors passed it back and forth twice a
			 * second (423 transfers in 4 minutes in it_elastic beside
			 * another test).  At most one such hand-over per
			 * ELASTIC_SETTLE_MS now. */
			if (a->reason == SH_PLAN_R_BALANCE &&
			    now < e->lead_since_ns + (uint64_t)ELASTIC_SETTLE_MS * 1000000u)
				continue;
			if (a->reason != SH_PLAN_R_BALANCE) {
				s[0] = (sub){.kind = SUB_MEMBER,
				             .action = SHOAL__MEMBER_CHANGE__ACTION__TRANSFER,
				             .group = a->group,
				             .node = a->node};
				begin(e, s, 1, "group %u: leadership to node %u (%s)", a->group,
				      a->node, why);
				return;
			}
			/* For balance the node becomes the group's preferred replica
			 * first (the map's first voter), so that node/group.c's
			 * preferred-leader bias keeps the leadership there instead
			 * of handing it back. */
			s[0] = (sub){
			    .kind = SUB_MAP, .mut = MUT_PREFER, .group = a->group, .node = a->node};
			s[1] = (sub){.kind = SUB_MEMBER,
			             .action = SHOAL__MEMBER_CHANGE__ACTION__TRANSFER,
			             .group = a->group,
			             .node = a->node};
			begin(e, s, 2, "group %u: node %u preferred, leadership to it (%s; %s)",
			      a->group, a->node, why, view);
			return;
		case SH_PLAN_NO_QUORUM:
			if (node_now_ns() >= e->quorum_log_ns) {
				node_logf(NODE_LOG_WARN,
				          "elastic: group %u has no live majority of voters",
				          a->group);
				e->quorum_log_ns = node_now_ns() + 60ull * 1000000000u;
			}
			continue;
		case SH_PLAN_SPLIT:
			/* The map's split, and when the upper half goes elsewhere
			 * its move begun, in one MapSet; pmove.c and
			 * partition_moves() carry the move out. */
			if (a->to_group != a->group && waits_for_gsi(e, a->table))
				continue;
			s[0] = (sub){.kind = SUB_MAP,
			             .mut = MUT_SPLIT,
			             .group = a->group,
			             .table = a->table,
			             .lo = a->lo,
			             .at = a->at,
			             .to_group = a->to_group};
			begin(e, s, 1,
			      "%s [%016" PRIx64 ", ...] in group %u: split at %016" PRIx64
			      ", upper half to group %u (%s: %" PRIu64
			      " bytes, %.0f units/s, %.0f throttled/s)",
			      SH_MAP_TABLE(a->table), a->lo, a->group, a->at, a->to_group, why,
			      load_bytes[i], load_units[i], load_throttled[i]);
			return;
		case SH_PLAN_MOVE_PARTITION:
			if (waits_for_gsi(e, a->table))
				continue;
			s[0] = (sub){.kind = SUB_MAP,
			             .mut = MUT_BEGIN_MOVE,
			             .group = a->group,
			             .table = a->table,
			             .lo = a->lo,
			             .to_group = a->to_group};
			begin(e, s, 1,
			      "%s partition at %016" PRIx64
			      ": begin its move from group %u to group %u (%s: %" PRIu64
			      " bytes, %.0f units/s)",
			      SH_MAP_TABLE(a->table), a->lo, a->group, a->to_group, why,
			      load_bytes[i], load_units[i]);
			return;
		case SH_PLAN_ADD_GROUP: {
			char ids[64] = "";
			size_t len = 0;
			s[0] = (sub){.kind = SUB_MAP, .mut = MUT_CREATE_GROUP, .group = a->group};
			for (uint32_t k = 0; k < a->n_nodes && k < SH_MAX_REPLICATION; k++) {
				s[0].nodes[s[0].n_nodes++] = a->nodes[k];
				len += (size_t)snprintf(ids + len, sizeof(ids) - len, "%s%u",
				                        k > 0 ? " " : "", a->nodes[k]);
				if (len >= sizeof(ids))
					break;
			}
			begin(e, s, 1,
			      "group %u: a new group on nodes %s (fewer data groups than active "
			      "nodes; auto_groups)",
			      a->group, ids);
			return;
		}
		case SH_PLAN_HOT_KEY:
			hot_key(e, a);
			continue;
		default:
			continue;
		}
	}
	round_end(e, NODE_ELASTIC_ROUND_MS);
}

/* --- the step's sub-operations --------------------------------------------- */

static void member_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	ask *a = (ask *)it;
	node_elastic *e = a->e;
	Shoal__NodeResponse *nr = answer_of(rv, whole, ans, len);
	char msg[SH_ERRMSG_SIZE];
	int code = code_of(nr, msg, sizeof(msg));
	pthread_mutex_lock(&e->mu);
	if (e->closing)
		e->busy = false;
	else if (code == SHOAL_OK)
		sub_done(e);
	else
		step_failed(e, msg[0] != '\0' ? msg : shoal_err_name(code));
	pthread_mutex_unlock(&e->mu);
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	ask_free(a);
}

static void run_member(node_elastic *e, const sub *s)
{
	const group_fact *f = fact_of(e, s->group);
	const sh_map_node *nd = sh_map_node_get(&e->map, s->node);
	if (f == NULL || f->leader == 0 || nd == NULL) {
		step_failed(e, "the group has no known leader, or the node left the map");
		return;
	}
	char address[SH_ADDR_MAX];
	sh_map_raft_address(nd, s->group, address);
	Shoal__MemberChange mc = SHOAL__MEMBER_CHANGE__INIT;
	mc.action = (Shoal__MemberChange__Action)s->action;
	mc.node = s->node;
	mc.address = address;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = s->group;
	nr.member_change = &mc;
	int64_t ms = s->action == SHOAL__MEMBER_CHANGE__ACTION__PROMOTE ? ELASTIC_PROMOTE_MS
	                                                                : ELASTIC_CHANGE_MS;
	if (!send_to(e, f->leader, &nr, ms, member_done, NULL))
		step_failed(e, "cannot reach the group's leader");
}

/* The partition (table, lo) as the step saw it: in `group`, not moving. */
static int part_as_planned(const sh_map *m, const sub *s, uint32_t *i, char *errmsg)
{
	*i = sh_map_part_find(m, s->table, s->lo);
	if (*i == SH_MAP_NONE || m->parts[*i].group != s->group ||
	    m->parts[*i].to_group != SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "%s's partition at %016" PRIx64
		               " is no longer in group %u, or is moving",
		               SH_MAP_TABLE(s->table), s->lo, s->group);
	return SHOAL_OK;
}

static int mutate(sh_map *m, const sh_cluster_conf *conf, const sub *s, char *errmsg)
{
	uint32_t i;
	switch (s->mut) {
	case MUT_DROP_TABLE:
		if (sh_map_part_of(m, s->table, 0) == SH_MAP_NONE)
			return SHOAL_E_IN_USE; /* gone already */
		return sh_map_drop_table(m, s->table, errmsg);
	case MUT_ADD_TABLE:
		if (sh_map_part_of(m, s->table, 0) != SH_MAP_NONE)
			return SHOAL_E_IN_USE; /* in the map already */
		return node_part_add_table(m, conf, s->table, errmsg);
	case MUT_SPLIT: {
		/* The boundary at `at` there already: this split (its move
		 * was begun in the same MapSet) landed. */
		uint32_t j = sh_map_part_find(m, s->table, s->at);
		if (j != SH_MAP_NONE && j > 0 && m->parts[j - 1].table == s->table &&
		    m->parts[j - 1].lo == s->lo)
			return SHOAL_E_IN_USE;
		int rc = part_as_planned(m, s, &i, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		rc = sh_map_split(m, s->table, s->lo, s->at, s->group, errmsg);
		if (rc == SHOAL_OK && s->to_group != s->group)
			rc = sh_map_begin_move(m, s->table, s->at, s->to_group, errmsg);
		return rc;
	}
	case MUT_BEGIN_MOVE:
		i = sh_map_part_find(m, s->table, s->lo);
		if (i != SH_MAP_NONE &&
		    (m->parts[i].to_group == s->to_group ||
		     (m->parts[i].to_group == SH_MAP_NONE && m->parts[i].group == s->to_group)))
			return SHOAL_E_IN_USE; /* begun, or done, already */
		if (part_as_planned(m, s, &i, errmsg) != SHOAL_OK)
			return SHOAL_E_VALIDATION;
		return sh_map_begin_move(m, s->table, s->lo, s->to_group, errmsg);
	case MUT_ADD_REPLICA:
		return sh_map_add_replica(m, s->group, s->node, s->replaces, errmsg);
	case MUT_PROMOTE: {
		const sh_map_group *g = sh_map_group_get(m, s->group);
		int k = g != NULL ? sh_map_replica_index(g, s->node) : -1;
		if (k >= 0 && g->replicas[k].voter)
			return SHOAL_E_IN_USE; /* done already */
		return sh_map_promote(m, s->group, s->node, errmsg);
	}
	case MUT_REMOVE_REPLICA: {
		const sh_map_group *g = sh_map_group_get(m, s->group);
		if (g == NULL || sh_map_replica_index(g, s->node) < 0)
			return SHOAL_E_IN_USE;
		return sh_map_remove_replica(m, s->group, s->node, errmsg);
	}
	case MUT_CREATE_GROUP:
		if (sh_map_group_get(m, s->group) != NULL)
			return SHOAL_E_IN_USE; /* made already (or the id was taken) */
		if (s->group >= sh_cluster_group_cap(conf))
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u: past max_groups",
			               s->group);
		return sh_map_create_group(m, s->group, s->nodes, s->n_nodes, errmsg);
	case MUT_FOUNDED:
		if (!sh_map_group_founding(sh_map_group_get(m, s->group)))
			return SHOAL_E_IN_USE; /* founded already, or gone */
		return sh_map_group_founded(m, s->group, errmsg);
	case MUT_REMOVE_NODE:
		return sh_map_remove_node(m, s->node, errmsg);
	case MUT_PREFER:
		return sh_map_prefer(m, s->group, s->node, errmsg);
	case MUT_FINISH_MOVE: {
		i = sh_map_part_find(m, s->table, s->lo);
		if (i != SH_MAP_NONE && m->parts[i].group == s->group)
			return SHOAL_E_IN_USE; /* done already */
		if (i == SH_MAP_NONE || m->parts[i].to_group != s->group ||
		    sh_map_part_hi(m, i) != s->hi)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "the move of %s's partition at %016" PRIx64
			               " is no longer in the map",
			               SH_MAP_TABLE(s->table), s->lo);
		return sh_map_finish_move(m, s->table, s->lo, errmsg);
	}
	}
	return SHOAL_E_INTERNAL;
}

/* The proposal's completion (loop). */
static void map_proposed(node_waiter *w)
{
	node_elastic *e = w->data;
	sh_free(w->resp);
	w->resp = NULL;
	pthread_mutex_lock(&e->mu);
	sh_free(e->set_buf);
	e->set_buf = NULL;
	if (e->closing)
		e->busy = false;
	else if (w->code == SHOAL_OK) {
		if (e->subs[e->at].mut == MUT_SPLIT)
			atomic_fetch_add(&e->splits, 1);
		sub_done(e);
	} else {
		step_failed(e, w->msg[0] != '\0' ? w->msg : shoal_err_name(w->code));
	}
	pthread_mutex_unlock(&e->mu);
}

static void run_map(node_elastic *e, const sub *s)
{
	/* Held while it is used here (this may run on an nng thread, and
	 * group 0 may leave this node with the map). */
	node_group *g0 = node_group_acquire(e->n, 0);
	char msg[SH_ERRMSG_SIZE] = "";
	sh_map m;
	if (g0 == NULL) {
		step_failed(e, "group 0 is not here");
		return;
	}
	if (node_map_load(e->n, g0, &m, msg) != SHOAL_OK) {
		sh_map_fini(&m);
		node_group_release(g0);
		step_failed(e, msg);
		return;
	}
	uint64_t prev = m.epoch;
	int rc = mutate(&m, e->n->conf, s, msg);
	if (rc == SHOAL_E_IN_USE) { /* so already */
		sh_map_fini(&m);
		node_group_release(g0);
		sub_done(e);
		return;
	}
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		node_group_release(g0);
		step_failed(e, msg);
		return;
	}
	size_t len = sh_map_encoded_size(&m);
	e->set_buf = sh_malloc(len);
	if (e->set_buf == NULL) {
		sh_map_fini(&m);
		node_group_release(g0);
		step_failed(e, "out of memory");
		return;
	}
	sh_map_encode(&m, e->set_buf);
	sh_map_fini(&m);
	shoal__map_set__init(&e->set);
	e->set.prev_epoch = prev;
	e->set.map = (ProtobufCBinaryData){len, e->set_buf};
	e->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	e->w.op.op_case = SHOAL__COMMAND_OP__OP_MAP_SET;
	e->w.op.map_set = &e->set;
	e->w.kind = NODE_WAIT_WRITE;
	e->w.size = len + 64;
	e->w.cb = map_proposed;
	e->w.data = e;
	e->w.done = false;
	/* (A waiter in a group's queue is answered even if the group closes:
	 * the group is not needed after the submit.) */
	if (node_group_submit(g0, &e->w, msg) != SHOAL_OK) {
		sh_free(e->set_buf);
		e->set_buf = NULL;
		node_group_release(g0);
		step_failed(e, msg);
		return;
	}
	node_group_release(g0);
}

/* part_own answered (the target serves the range, or did already). */
static void own_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	ask *a = (ask *)it;
	node_elastic *e = a->e;
	Shoal__NodeResponse *nr = answer_of(rv, whole, ans, len);
	char msg[SH_ERRMSG_SIZE];
	int code = code_of(nr, msg, sizeof(msg));
	pthread_mutex_lock(&e->mu);
	if (e->closing)
		e->busy = false;
	else if (code == SHOAL_OK || code == SHOAL_E_IN_USE)
		sub_done(e);
	else /* the source's driver tells the target too, once it sees the map */
		step_failed(e, msg[0] != '\0' ? msg : shoal_err_name(code));
	pthread_mutex_unlock(&e->mu);
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	ask_free(a);
}

/* Sends the part_own of SUB_OWN s to the target group's leader (false: no
 * leader known, or it cannot be reached). */
static bool send_own(node_elastic *e, const sub *s,
                     void (*done)(wire_lane_item *, int, nng_msg *, const uint8_t *, size_t))
{
	uint32_t leader = leader_of(e, s->group);
	if (leader == 0)
		return false;
	Shoal__PartRange r = SHOAL__PART_RANGE__INIT;
	r.table = s->table;
	r.lo = s->lo;
	r.hi = s->hi;
	r.to_group = s->group;
	r.attempt = s->attempt;
	Shoal__StreamShardRef parent = SHOAL__STREAM_SHARD_REF__INIT;
	if (s->has_shard) {
		parent.group = s->from;
		parent.lo = s->shard_lo;
		parent.start = s->shard_start;
		r.stream_parent = &parent;
	}
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = s->group;
	nr.part_own = &r;
	return send_to(e, leader, &nr, ELASTIC_CHANGE_MS, done, NULL);
}

/* The early part_own of a cutover answered: nothing waits for it (the step's
 * own, after the map's flip, is the one that counts). */
static void early_own_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans,
                           size_t len)
{
	ask *a = (ask *)it;
	Shoal__NodeResponse *nr = answer_of(rv, whole, ans, len);
	char msg[SH_ERRMSG_SIZE];
	int code = code_of(nr, msg, sizeof(msg));
	if (code != SHOAL_OK && code != SHOAL_E_IN_USE)
		node_logf(NODE_LOG_DEBUG, "elastic: part_own before the flip: %s",
		          msg[0] != '\0' ? msg : shoal_err_name(code));
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	ask_free(a);
}

static void run_own(node_elastic *e, const sub *s)
{
	if (leader_of(e, s->group) == 0)
		step_failed(e, "the target group has no known leader");
	else if (!send_own(e, s, own_done))
		step_failed(e, "cannot reach the target group's leader");
}

static void run_sub(node_elastic *e)
{
	const sub *s = &e->subs[e->at];
	if (s->kind == SUB_MEMBER)
		run_member(e, s);
	else if (s->kind == SUB_OWN)
		run_own(e, s);
	else
		run_map(e, s);
}

/* --- lifecycle -------------------------------------------------------------- */

int node_elastic_open(node_ship *s, node_elastic **out, char *errmsg)
{
	*out = NULL;
	node_elastic *e = sh_calloc(1, sizeof(*e));
	if (e == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "elastic: out of memory");
	e->n = s->n;
	e->s = s;
	pthread_mutex_init(&e->mu, NULL);
	if (node_waiter_init(&e->w) != SHOAL_OK) {
		pthread_mutex_destroy(&e->mu);
		sh_free(e);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "elastic: out of memory");
	}
	e->w_init = true;
	e->next_ns = node_now_ns() + (uint64_t)NODE_ELASTIC_ROUND_MS * 1000000u;
	uint32_t dead_ms =
	    s->n->conf->dead_after_ms != 0 ? s->n->conf->dead_after_ms : SH_DEAD_AFTER_MS;
	e->dead_after_ns = (uint64_t)dead_ms * 1000000u;
	const char *hold = getenv("SHOAL_ELASTIC_TEST_GATHER_MS");
	if (hold != NULL && atoi(hold) > 0) {
		e->test_gather_ns = (uint64_t)atoi(hold) * 1000000u;
		node_logf(NODE_LOG_WARN,
		          "elastic: test hook: every round gathers for at least %d ms", atoi(hold));
	}
	if (el_book_new(s->n->conf, &e->book, errmsg) != SHOAL_OK) {
		node_waiter_fini(&e->w);
		pthread_mutex_destroy(&e->mu);
		sh_free(e);
		return SHOAL_E_NOMEM;
	}
	*out = e;
	return SHOAL_OK;
}

void node_elastic_tick(node_elastic *e, uint64_t now_ns)
{
	if (e == NULL || now_ns < e->next_ns)
		return;
	node_group *g0 = node_group_get(e->n, 0);
	uint64_t term;
	pthread_mutex_lock(&e->mu);
	if (e->busy && e->gathering && e->ready.valid && !e->closing && g0 != NULL &&
	    node_group_leading(g0, &term) && term == e->lead_term) {
		/* A move is READY while the round waits for every node's
		 * status: the range is refused until the cutover, which needs
		 * none of them.  The round is cut short (its answers are
		 * dropped, by gen) and the cutover begins on its map; the round
		 * after the step starts afresh. */
		e->gen++;
		e->gathering = false;
		e->pending = 0;
		node_logf(NODE_LOG_INFO,
		          "elastic: a move is ready: the round's node statuses are not waited for");
		if (!cut_over_ready(e, false))
			round_end(e, 0);
	} else if (e->busy && e->gathering && e->pending == 0) {
		gathered(e, now_ns); /* a round a test held */
	} else if (!e->busy && !e->closing) {
		if (g0 != NULL && node_group_leading(g0, &term)) {
			if (term != e->lead_term) {
				e->lead_term = term;
				e->lead_since_ns = now_ns;
			}
			e->busy = true;
			/* A READY move between rounds: cut over on the last
			 * round's map if it shows the move (no round of
			 * statuses first); else the round as usual. */
			if (cut_over_ready(e, true))
				node_logf(NODE_LOG_INFO,
				          "elastic: a move is ready: cut over before "
				          "the next round of node statuses");
			else
				round_start(e);
		} else {
			e->next_ns = now_ns + (uint64_t)NODE_ELASTIC_ROUND_MS * 1000000u;
		}
	}
	pthread_mutex_unlock(&e->mu);
}

void node_elastic_metrics(node_elastic *e, node_appendf_fn appendf, void *buf)
{
	if (e == NULL)
		return;
	appendf(
	    buf,
	    "# HELP shoal_node_elastic_steps_total Steps of the cluster's shape (replica moves, "
	    "leader transfers, map changes) this node's executor completed while leading "
	    "group 0.\n"
	    "# TYPE shoal_node_elastic_steps_total counter\n"
	    "shoal_node_elastic_steps_total %" PRIu64 "\n"
	    "# HELP shoal_node_elastic_failures_total Steps that stopped before the end (the "
	    "next round starts over).\n"
	    "# TYPE shoal_node_elastic_failures_total counter\n"
	    "shoal_node_elastic_failures_total %" PRIu64 "\n"
	    "# HELP shoal_node_elastic_splits_total Partitions this node's executor split "
	    "automatically (by size or heat) while leading group 0.\n"
	    "# TYPE shoal_node_elastic_splits_total counter\n"
	    "shoal_node_elastic_splits_total %" PRIu64 "\n"
	    "# HELP shoal_node_elastic_hot_keys_total Single keys found carrying most of a "
	    "partition's load, which a split cannot divide (each logged once an hour).\n"
	    "# TYPE shoal_node_elastic_hot_keys_total counter\n"
	    "shoal_node_elastic_hot_keys_total %" PRIu64 "\n",
	    (uint64_t)atomic_load(&e->steps), (uint64_t)atomic_load(&e->failures),
	    (uint64_t)atomic_load(&e->splits), (uint64_t)atomic_load(&e->hot_keys));
}

int node_elastic_unsplit_status(node *nd, sh_arena *a, Shoal__GroupStatus *gs)
{
	node_elastic *e = nd->ship != NULL ? nd->ship->elastic : NULL;
	if (e == NULL)
		return SHOAL_OK;
	el_unsplit u[EL_HOT_SEEN];
	pthread_mutex_lock(&e->mu);
	uint64_t now = node_now_ns();
	uint32_t cnt = el_unsplit_list(e->book, now, u, EL_HOT_SEEN);
	pthread_mutex_unlock(&e->mu);
	if (cnt == 0)
		return SHOAL_OK;
	if ((gs->unsplit_keys = sh_arena_calloc(a, cnt, sizeof(*gs->unsplit_keys))) == NULL)
		return SHOAL_E_NOMEM;
	for (uint32_t i = 0; i < cnt; i++) {
		Shoal__UnsplitKey *k = sh_arena_alloc(a, sizeof(*k));
		if (k == NULL)
			return SHOAL_E_NOMEM;
		shoal__unsplit_key__init(k);
		k->table = sh_arena_strndup(a, u[i].name.table, strlen(u[i].name.table));
		k->key = sh_arena_strndup(a, u[i].name.key, strlen(u[i].name.key));
		k->index = sh_arena_strndup(a, u[i].name.index, strlen(u[i].name.index));
		if (k->table == NULL || k->key == NULL || k->index == NULL)
			return SHOAL_E_NOMEM;
		k->group = u[i].group;
		k->lo = u[i].lo;
		k->hash = u[i].hash;
		k->reason = (char *)(u[i].by_size ? "size" : "load");
		k->first_seen_ms = (int64_t)((now - u[i].first_ns) / 1000000u);
		k->last_seen_ms = (int64_t)((now - u[i].last_ns) / 1000000u);
		gs->unsplit_keys[gs->n_unsplit_keys++] = k;
	}
	return SHOAL_OK;
}

void node_elastic_close(node_elastic *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mu);
	e->closing = true;
	pthread_mutex_unlock(&e->mu);
}

void node_elastic_free(node_elastic *e)
{
	if (e == NULL)
		return;
	if (e->w_init)
		node_waiter_fini(&e->w);
	sh_free(e->set_buf);
	if (e->map_init)
		sh_map_fini(&e->map);
	sh_free(e->alive);
	sh_free(e->owners);
	sh_free(e->leaders);
	facts_free(e);
	el_book_free(e->book);
	pthread_mutex_destroy(&e->mu);
	sh_free(e);
}
