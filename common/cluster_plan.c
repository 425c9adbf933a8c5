/*
 * cluster_plan.c -- the rebalancer (contract and the order of the steps in
 * cluster_plan.h): figures, moves in flight, continuing and repairing
 * groups, replica balance, and the call that runs the steps in order.
 * Splits and partition moves are in cluster_plan_split.c, leader transfers
 * in cluster_plan_leaders.c.
 *
 * Cost of one call: O(P log G) for the group figures, O(G * R) for the node
 * figures, O(N) per new move chosen (the scans for a target), and the leader
 * search over the groups of nodes outside the band: about 45 ms of CPU on
 * 1,000 nodes, 10,000 groups and 100,000 partitions (make bench-plan).
 */
#include "cluster_plan.h"

#include <string.h>

#include "alloc.h"
#include "cluster_plan_int.h"
#include "errors.h"

static const char *const kind_names[] = {
#define X_(k, name) name,
    SH_PLAN_KINDS(X_)
#undef X_
};
static const char *const reason_names[] = {
#define X_(r, name) name,
    SH_PLAN_REASONS(X_)
#undef X_
};
static const char *const dim_names[] = {
#define X_(d, name) name,
    SH_PLAN_DIMS(X_)
#undef X_
};

const char *sh_plan_kind_name(sh_plan_kind k)
{
	return (unsigned)k < SH_PLAN_KIND__COUNT ? kind_names[k] : "?";
}

const char *sh_plan_reason_name(sh_plan_reason r)
{
	return (unsigned)r < SH_PLAN_REASON__COUNT ? reason_names[r] : "?";
}

const char *sh_plan_dim_name(sh_plan_dim d)
{
	return (unsigned)d < SH_PLAN_DIM__COUNT ? dim_names[d] : "?";
}

uint32_t plan_node_index(const plan *p, uint32_t id)
{
	const sh_map_node *n = sh_map_node_get(p->map, id);
	return n ? (uint32_t)(n - p->map->nodes) : SH_MAP_NONE;
}

uint32_t plan_group_index(const plan *p, uint32_t id)
{
	const sh_map_group *g = sh_map_group_get(p->map, id);
	return g ? (uint32_t)(g - p->map->groups) : SH_MAP_NONE;
}

bool plan_emit(plan *p, sh_plan_action a)
{
	if (p->n == p->cap)
		return false;
	p->out[p->n++] = a;
	return true;
}

/* --- figures ------------------------------------------------------------- */

/* Whether another replica of g replaces the one on `node`. */
static bool replaced(const sh_map_group *g, uint32_t node)
{
	for (uint32_t k = 0; k < g->n_replicas; k++)
		if (g->replicas[k].replaces == node)
			return true;
	return false;
}

/* A replica move is in flight in g: a non-voter, a replica still to remove,
 * or more voters than configured; or g is a new group not founded yet (its
 * replicas cannot change until the executor marks it founded). */
static bool group_moving(const sh_map *m, const sh_map_group *g)
{
	if (sh_map_group_founding(g))
		return true;
	for (uint32_t k = 0; k < g->n_replicas; k++)
		if (!g->replicas[k].voter || g->replicas[k].replaces != 0)
			return true;
	return sh_map_voters(g) > m->replication;
}

/* Whether replica r of a moving group takes part in the move: the new one
 * (a non-voter, or a voter that still replaces another) or the old one. */
static bool in_move(const sh_map_group *g, const sh_map_replica *r)
{
	return !r->voter || r->replaces != 0 || replaced(g, r->node);
}

static void plan_fini(plan *p)
{
	sh_free(p->nodes);
	sh_free(p->groups);
	sh_free(p->by_node);
	sh_free(p->by_node_off);
}

static int plan_init(plan *p, const sh_plan_input *in, const sh_plan_conf *conf,
                     const double *tolerance)
{
	const sh_map *m = in->map;
	memset(p, 0, sizeof(*p));
	p->in = in;
	p->conf = conf;
	p->map = m;
	uint32_t total_replicas = 0;
	for (uint32_t i = 0; i < m->n_groups; i++)
		total_replicas += m->groups[i].n_replicas;
	p->nodes = sh_calloc(m->n_nodes + 1, sizeof(plan_node));
	p->groups = sh_calloc(m->n_groups + 1, sizeof(plan_group));
	p->by_node = sh_calloc(total_replicas + 1, sizeof(uint32_t));
	p->by_node_off = sh_calloc(m->n_nodes + 2, sizeof(uint32_t));
	if (!p->nodes || !p->groups || !p->by_node || !p->by_node_off) {
		plan_fini(p);
		return SHOAL_E_NOMEM;
	}
	for (uint32_t n = 0; n < m->n_nodes; n++) {
		p->nodes[n].alive = in->alive[n];
		p->nodes[n].active = m->nodes[n].state == SH_MAP_NODE_ACTIVE;
		p->eligible += plan_eligible(p, n);
	}
	/* Group figures: partitions counted where they are going. */
	for (uint32_t i = 0; i < m->n_parts; i++) {
		const sh_map_part *x = &m->parts[i];
		uint32_t gi =
		    plan_group_index(p, x->to_group != SH_MAP_NONE ? x->to_group : x->group);
		p->groups[gi].bytes += (double)in->parts[i].bytes;
		p->groups[gi].units += in->parts[i].units;
		p->inflight += x->to_group != SH_MAP_NONE;
	}
	double total[SH_PLAN_DIM__COUNT] = {0}, gbytes = 0, gunits = 0;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		const sh_map_group *g = &m->groups[gi];
		plan_group *pg = &p->groups[gi];
		uint32_t ln = plan_node_index(p, in->groups[gi].leader);
		pg->leader = ln != SH_MAP_NONE && p->nodes[ln].alive ? ln : SH_MAP_NONE;
		pg->moving = group_moving(m, g);
		/* A founding group changes nothing but itself: it is no move
		 * (a group whose founders never elect must not stall the rest). */
		p->inflight += pg->moving && !sh_map_group_founding(g);
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			const sh_map_replica *r = &g->replicas[k];
			uint32_t ni = plan_node_index(p, r->node);
			p->by_node_off[ni + 1]++;
			if (pg->moving && p->nodes[ni].alive && in_move(g, r))
				p->nodes[ni].busy++;
			if (replaced(g, r->node))
				continue;
			p->nodes[ni].load[SH_PLAN_REPLICAS] += 1;
			p->nodes[ni].load[SH_PLAN_BYTES] += pg->bytes;
		}
		if (pg->leader != SH_MAP_NONE) {
			p->nodes[pg->leader].load[SH_PLAN_LEADERS] += 1;
			p->nodes[pg->leader].load[SH_PLAN_UNITS] += pg->units;
		}
		/* What a settled cluster holds: replication replicas per group. */
		total[SH_PLAN_REPLICAS] += m->replication;
		total[SH_PLAN_BYTES] += m->replication * pg->bytes;
		total[SH_PLAN_LEADERS] += 1;
		total[SH_PLAN_UNITS] += pg->units;
		gbytes += pg->bytes;
		gunits += pg->units;
	}
	for (uint32_t n = 0; n < m->n_nodes; n++)
		p->by_node_off[n + 1] += p->by_node_off[n];
	uint32_t *cur = sh_calloc(m->n_nodes + 1, sizeof(uint32_t));
	if (cur == NULL) {
		plan_fini(p);
		return SHOAL_E_NOMEM;
	}
	memcpy(cur, p->by_node_off, m->n_nodes * sizeof(uint32_t));
	for (uint32_t gi = 0; gi < m->n_groups; gi++)
		for (uint32_t k = 0; k < m->groups[gi].n_replicas; k++) {
			uint32_t ni = plan_node_index(p, m->groups[gi].replicas[k].node);
			p->by_node[cur[ni]++] = gi;
		}
	sh_free(cur);
	double grain[SH_PLAN_DIM__COUNT] = {
	    [SH_PLAN_REPLICAS] = 1,
	    [SH_PLAN_LEADERS] = 1,
	    [SH_PLAN_BYTES] = m->n_groups ? gbytes / m->n_groups : 1,
	    [SH_PLAN_UNITS] = m->n_groups ? gunits / m->n_groups : 1,
	};
	for (int d = 0; d < SH_PLAN_DIM__COUNT; d++) {
		p->mean[d] = p->eligible ? total[d] / p->eligible : 0;
		p->band[d] =
		    tolerance[d] * p->mean[d] > grain[d] ? tolerance[d] * p->mean[d] : grain[d];
		if (p->band[d] <= 0)
			p->band[d] = 1;
	}
	return SHOAL_OK;
}

uint32_t sh_plan_inflight(const sh_plan_input *in, uint32_t *per_node)
{
	const sh_map *m = in->map;
	uint32_t total = 0;
	if (per_node)
		memset(per_node, 0, m->n_nodes * sizeof(uint32_t));
	for (uint32_t i = 0; i < m->n_parts; i++)
		total += m->parts[i].to_group != SH_MAP_NONE;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		const sh_map_group *g = &m->groups[gi];
		if (!group_moving(m, g) || sh_map_group_founding(g))
			continue;
		total++;
		for (uint32_t k = 0; per_node && k < g->n_replicas; k++) {
			const sh_map_replica *r = &g->replicas[k];
			const sh_map_node *n = sh_map_node_get(m, r->node);
			uint32_t ni = (uint32_t)(n - m->nodes);
			if (in->alive[ni] && in_move(g, r))
				per_node[ni]++;
		}
	}
	return total;
}

int sh_plan_spread_of(const sh_plan_input *in, const double *tolerance, sh_plan_spread *out)
{
	plan p;
	sh_plan_conf conf = {0};
	memset(out, 0, sizeof(*out));
	int rc = plan_init(&p, in, &conf, tolerance);
	if (rc != SHOAL_OK)
		return rc;
	out->nodes = p.eligible;
	for (int d = 0; d < SH_PLAN_DIM__COUNT; d++) {
		out->mean[d] = p.mean[d];
		out->band[d] = p.band[d];
		out->min[d] = p.eligible ? 1e300 : 0;
		out->max[d] = 0;
	}
	for (uint32_t n = 0; n < in->map->n_nodes; n++) {
		if (!plan_eligible(&p, n)) {
			out->stranded += p.by_node_off[n + 1] - p.by_node_off[n];
			continue;
		}
		for (int d = 0; d < SH_PLAN_DIM__COUNT; d++) {
			double v = p.nodes[n].load[d];
			out->min[d] = v < out->min[d] ? v : out->min[d];
			out->max[d] = v > out->max[d] ? v : out->max[d];
		}
	}
	plan_fini(&p);
	return SHOAL_OK;
}

bool sh_plan_within(const sh_plan_spread *s, sh_plan_dim d)
{
	return s->max[d] <= s->mean[d] + s->band[d] + 1e-9 &&
	       s->min[d] >= s->mean[d] - s->band[d] - 1e-9;
}

/* --- 1. continue moves in flight ----------------------------------------- */

static uint32_t live_voters(const plan *p, const sh_map_group *g)
{
	uint32_t lv = 0;
	for (uint32_t k = 0; k < g->n_replicas; k++)
		if (g->replicas[k].voter && p->nodes[plan_node_index(p, g->replicas[k].node)].alive)
			lv++;
	return lv;
}

/* Leader / units score of a node: how far over the band it is. */
double plan_lead_score(const plan *p, uint32_t ni)
{
	double a = plan_dev(p, ni, SH_PLAN_LEADERS), b = plan_dev(p, ni, SH_PLAN_UNITS);
	return a > b ? a : b;
}

static double replica_score(const plan *p, uint32_t ni)
{
	double a = plan_dev(p, ni, SH_PLAN_REPLICAS), b = plan_dev(p, ni, SH_PLAN_BYTES);
	return a > b ? a : b;
}

/* The best live voter of g to lead instead of node `not` (index), or NONE. */
static uint32_t next_leader(const plan *p, const sh_map_group *g, uint32_t not )
{
	uint32_t best = SH_MAP_NONE;
	double best_s = 0;
	for (uint32_t k = 0; k < g->n_replicas; k++) {
		const sh_map_replica *r = &g->replicas[k];
		uint32_t ni = plan_node_index(p, r->node);
		if (!r->voter || ni == not || !p->nodes[ni].alive || replaced(g, r->node))
			continue;
		/* Draining nodes only if nothing else: they are leaving. */
		double s = plan_lead_score(p, ni) + (p->nodes[ni].active ? 0 : 1e6);
		if (best == SH_MAP_NONE || s < best_s)
			best = ni, best_s = s;
	}
	return best;
}

void plan_transfer(plan *p, uint32_t gi, uint32_t to, sh_plan_reason why)
{
	plan_group *pg = &p->groups[gi];
	if (!plan_emit(p, (sh_plan_action){.kind = SH_PLAN_TRANSFER_LEADER,
	                                   .reason = why,
	                                   .group = p->map->groups[gi].id,
	                                   .node = p->map->nodes[to].id}))
		return;
	if (pg->leader != SH_MAP_NONE) {
		p->nodes[pg->leader].load[SH_PLAN_LEADERS] -= 1;
		p->nodes[pg->leader].load[SH_PLAN_UNITS] -= pg->units;
	}
	p->nodes[to].load[SH_PLAN_LEADERS] += 1;
	p->nodes[to].load[SH_PLAN_UNITS] += pg->units;
	pg->leader = to;
	pg->moving = true; /* one change per group per call */
}

/* The voter to remove from g, as a node id (0: none): one a newer replica
 * replaces (a dead one first), else with more voters than replication the
 * worst: dead, then draining, then the most loaded. */
static uint32_t removal_victim(const plan *p, const sh_map_group *g)
{
	uint32_t best = 0;
	double best_s = 0;
	bool marked = false;
	for (uint32_t k = 0; k < g->n_replicas; k++) {
		const sh_map_replica *r = &g->replicas[k];
		if (!r->voter)
			continue;
		uint32_t ni = plan_node_index(p, r->node);
		bool mark = false;
		for (uint32_t j = 0; j < g->n_replicas; j++)
			mark |= g->replicas[j].voter && g->replicas[j].replaces == r->node;
		if (marked && !mark)
			continue;
		double s = replica_score(p, ni) + (p->nodes[ni].active ? 0 : 1e6) +
		           (p->nodes[ni].alive ? 0 : 2e6);
		if (mark && !marked)
			best = 0, marked = true;
		if (best == 0 || s > best_s)
			best = r->node, best_s = s;
	}
	if (!marked && sh_map_voters(g) <= p->map->replication)
		return 0;
	return best;
}

static void continue_group(plan *p, uint32_t gi)
{
	const sh_map_group *g = &p->map->groups[gi];
	plan_group *pg = &p->groups[gi];
	uint32_t v = sh_map_voters(g), lv = live_voters(p, g);
	sh_plan_action a = {.reason = SH_PLAN_R_CONTINUE, .group = g->id};
	if (sh_map_group_founding(g))
		return; /* the executor marks it founded once it has a leader */
	for (uint32_t k = 0; k < g->n_replicas; k++) {
		const sh_map_replica *r = &g->replicas[k];
		uint32_t ni = plan_node_index(p, r->node);
		if (!r->voter && (!p->nodes[ni].alive || !p->nodes[ni].active)) {
			a.kind = SH_PLAN_REMOVE_REPLICA, a.node = r->node;
			plan_emit(p, a); /* abandon: its node died or is leaving */
			return;
		}
	}
	for (uint32_t k = 0; k < g->n_replicas; k++) {
		const sh_map_replica *r = &g->replicas[k];
		if (!r->voter && p->in->groups[gi].caught_up && v < p->map->replication + 1) {
			a.kind = SH_PLAN_PROMOTE, a.node = r->node;
			plan_emit(p, a);
			return;
		}
	}
	uint32_t victim = removal_victim(p, g);
	if (victim == 0)
		return;
	uint32_t vi = plan_node_index(p, victim);
	uint32_t lv_after = lv - (p->nodes[vi].alive ? 1 : 0);
	/* Never below a majority of the configured replication (the map's rule),
	 * and never leave fewer live voters than a majority of those left. */
	if (v - 1 < sh_map_majority(p->map->replication) || lv_after < sh_map_majority(v - 1))
		return;
	if (pg->leader == vi) {
		uint32_t to = next_leader(p, g, vi);
		if (to != SH_MAP_NONE)
			plan_transfer(p, gi, to, SH_PLAN_R_CONTINUE);
		return;
	}
	a.kind = SH_PLAN_REMOVE_REPLICA, a.node = victim;
	plan_emit(p, a);
}

/* --- 2. repair and drain ------------------------------------------------- */

static uint32_t limit_per_node(const plan *p)
{
	return p->conf->max_moves_per_node ? p->conf->max_moves_per_node : UINT32_MAX;
}

/* The least loaded live ACTIVE node not in g with room for a move. */
static uint32_t best_target(const plan *p, const sh_map_group *g)
{
	uint32_t best = SH_MAP_NONE;
	double best_s = 0;
	for (uint32_t n = 0; n < p->map->n_nodes; n++) {
		if (!plan_eligible(p, n) || p->nodes[n].busy >= limit_per_node(p) ||
		    sh_map_replica_index(g, p->map->nodes[n].id) >= 0)
			continue;
		double s = plan_dev(p, n, SH_PLAN_REPLICAS) + plan_dev(p, n, SH_PLAN_BYTES);
		if (best == SH_MAP_NONE || s < best_s)
			best = n, best_s = s;
	}
	return best;
}

/* Starts a replica move in group gi: a non-voter on node index t that
 * replaces the replica on node index src (SH_MAP_NONE: none). */
static bool start_move(plan *p, uint32_t gi, uint32_t t, uint32_t src, sh_plan_reason why)
{
	const sh_map *m = p->map;
	if (!plan_emit(p, (sh_plan_action){.kind = SH_PLAN_ADD_REPLICA,
	                                   .reason = why,
	                                   .group = m->groups[gi].id,
	                                   .node = m->nodes[t].id,
	                                   .replaces = src == SH_MAP_NONE ? 0 : m->nodes[src].id}))
		return false;
	plan_group *pg = &p->groups[gi];
	pg->moving = true;
	p->inflight++;
	p->nodes[t].busy++;
	p->nodes[t].load[SH_PLAN_REPLICAS] += 1;
	p->nodes[t].load[SH_PLAN_BYTES] += pg->bytes;
	if (src != SH_MAP_NONE) {
		p->nodes[src].busy += p->nodes[src].alive;
		p->nodes[src].load[SH_PLAN_REPLICAS] -= 1;
		p->nodes[src].load[SH_PLAN_BYTES] -= pg->bytes;
	}
	return true;
}

static bool room(const plan *p)
{
	return p->inflight < p->conf->max_moves && p->n < p->cap;
}

/* Pass 0: dead voters and missing replicas; pass 1: draining voters. */
static void repair(plan *p, int pass)
{
	const sh_map *m = p->map;
	for (uint32_t gi = 0; gi < m->n_groups && room(p); gi++) {
		const sh_map_group *g = &m->groups[gi];
		if (p->groups[gi].moving || p->groups[gi].stuck)
			continue;
		uint32_t src = SH_MAP_NONE;
		bool need = pass == 0 && sh_map_voters(g) < m->replication;
		for (uint32_t k = 0; k < g->n_replicas && !need; k++) {
			uint32_t ni = plan_node_index(p, g->replicas[k].node);
			if (pass == 0 ? !p->nodes[ni].alive
			              : p->nodes[ni].alive && !p->nodes[ni].active &&
			                    p->nodes[ni].busy < limit_per_node(p))
				src = ni, need = true;
		}
		if (!need)
			continue;
		uint32_t t = best_target(p, g);
		if (t != SH_MAP_NONE)
			start_move(p, gi, t, src, pass == 0 ? SH_PLAN_R_REPAIR : SH_PLAN_R_DRAIN);
	}
}

/* --- 6. replicas --------------------------------------------------------- */

#define TARGETS 8

static double score_after(const plan *p, uint32_t n, double dr, double db)
{
	double r = (p->nodes[n].load[SH_PLAN_REPLICAS] + dr - p->mean[SH_PLAN_REPLICAS]) /
	           p->band[SH_PLAN_REPLICAS];
	double b = (p->nodes[n].load[SH_PLAN_BYTES] + db - p->mean[SH_PLAN_BYTES]) /
	           p->band[SH_PLAN_BYTES];
	double ar = r < 0 ? -r : r, ab = b < 0 ? -b : b;
	return ar > ab ? ar : ab;
}

/* How far under the band a node is on its emptier dimension: targets are
 * ranked by it, so a node short of replicas but not of bytes (or the other
 * way round) is a candidate; score_after then decides. */
static double room_score(const plan *p, uint32_t ni)
{
	double a = plan_dev(p, ni, SH_PLAN_REPLICAS), b = plan_dev(p, ni, SH_PLAN_BYTES);
	return a < b ? a : b;
}

/* The TARGETS emptiest eligible nodes with room for a move, into t; how many. */
static uint32_t targets(const plan *p, uint32_t *t)
{
	uint32_t k = 0;
	for (uint32_t n = 0; n < p->map->n_nodes; n++) {
		if (!plan_eligible(p, n) || p->nodes[n].busy >= limit_per_node(p))
			continue;
		double s = room_score(p, n);
		uint32_t at = k < TARGETS ? k++ : TARGETS;
		while (at > 0 && room_score(p, t[at - 1]) > s) {
			if (at < TARGETS)
				t[at] = t[at - 1];
			at--;
		}
		if (at < TARGETS)
			t[at] = n;
	}
	return k;
}

static void balance_replicas(plan *p)
{
	const sh_map *m = p->map;
	bool *done = sh_calloc(m->n_nodes + 1, sizeof(bool));
	if (done == NULL)
		return; /* balance waits for the next call */
	while (room(p)) {
		/* Source: the node furthest over the band; or, when none is over
		 * but one is under, the most loaded. */
		uint32_t s = SH_MAP_NONE;
		bool under = false;
		for (uint32_t n = 0; n < m->n_nodes; n++) {
			if (!plan_eligible(p, n))
				continue;
			if (plan_dev(p, n, SH_PLAN_REPLICAS) < -PLAN_ACT ||
			    plan_dev(p, n, SH_PLAN_BYTES) < -PLAN_ACT)
				under = true;
			if (done[n] || p->nodes[n].busy >= limit_per_node(p))
				continue;
			if (s == SH_MAP_NONE || replica_score(p, n) > replica_score(p, s))
				s = n;
		}
		if (s == SH_MAP_NONE || (replica_score(p, s) <= PLAN_ACT && !under) ||
		    replica_score(p, s) <= 0)
			break;
		uint32_t t[TARGETS], nt = targets(p, t);
		uint32_t best_g = SH_MAP_NONE, best_t = SH_MAP_NONE;
		double old_s = score_after(p, s, 0, 0), best = 0;
		for (uint32_t i = p->by_node_off[s]; i < p->by_node_off[s + 1]; i++) {
			uint32_t gi = p->by_node[i];
			const sh_map_group *g = &m->groups[gi];
			const plan_group *pg = &p->groups[gi];
			if (pg->moving || pg->stuck)
				continue;
			for (uint32_t j = 0; j < nt; j++) {
				if (t[j] == s || sh_map_replica_index(g, m->nodes[t[j]].id) >= 0)
					continue;
				double old = old_s > score_after(p, t[j], 0, 0)
				                 ? old_s
				                 : score_after(p, t[j], 0, 0);
				double a = score_after(p, s, -1, -pg->bytes);
				double b = score_after(p, t[j], 1, pg->bytes);
				double after = a > b ? a : b;
				if (after < old - 1e-9 && (best_g == SH_MAP_NONE || after < best))
					best = after, best_g = gi, best_t = t[j];
			}
		}
		if (best_g == SH_MAP_NONE) {
			done[s] = true;
			continue;
		}
		start_move(p, best_g, best_t, s, SH_PLAN_R_BALANCE);
	}
	sh_free(done);
}

/* --- the plan ------------------------------------------------------------ */

/* --- 7. new groups ---------------------------------------------------------- */

/* One new group while the cluster has fewer data groups than ACTIVE nodes:
 * only on a settled cluster (nothing planned or in flight, every node live,
 * none draining, no group being founded). */
static void add_group(plan *p)
{
	const sh_map *m = p->map;
	uint32_t need = m->replication, data = 0, id = 0;
	if (p->conf->max_groups == 0 || p->inflight > 0 || m->n_groups < 2 || m->n_nodes < need ||
	    need > SH_MAX_REPLICATION)
		return;
	for (uint32_t i = 0; i < p->n; i++) /* reports do not count */
		if (p->out[i].kind != SH_PLAN_HOT_KEY && p->out[i].kind != SH_PLAN_NO_QUORUM)
			return;
	for (uint32_t ni = 0; ni < m->n_nodes; ni++)
		if (!plan_eligible(p, ni))
			return;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		if (sh_map_group_founding(&m->groups[gi]) || p->groups[gi].stuck)
			return;
		data += sh_map_is_data_group(m, m->groups[gi].id);
	}
	if (data >= m->n_nodes)
		return;
	for (uint32_t g = 1; g < p->conf->max_groups && id == 0; g++)
		if (sh_map_group_get(m, g) == NULL)
			id = g;
	if (id == 0)
		return;
	/* The map's answer (sh_map_emptiest_nodes): on a settled cluster its
	 * replicas are the projected ones and its preferred leaders the
	 * leaders. */
	sh_plan_action a = {.kind = SH_PLAN_ADD_GROUP, .reason = SH_PLAN_R_BALANCE, .group = id};
	a.n_nodes = sh_map_emptiest_nodes(m, need, a.nodes);
	if (a.n_nodes != need)
		return;
	plan_emit(p, a);
}

int sh_plan_next(const sh_plan_input *in, const sh_plan_conf *conf, sh_plan_action *out,
                 uint32_t cap, uint32_t *n, char *errmsg)
{
	plan p;
	*n = 0;
	/* No loads given: every partition's is zero (an array of zeros, so
	 * that the rest reads in->parts[i] without asking). */
	sh_plan_input zeroed;
	sh_plan_part_load *none = NULL;
	if (in->parts == NULL && in->map->n_parts > 0) {
		if ((none = sh_calloc(in->map->n_parts, sizeof(*none))) == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "planner: out of memory");
		zeroed = *in;
		zeroed.parts = none;
		in = &zeroed;
	}
	int rc = plan_init(&p, in, conf, conf->tolerance);
	if (rc != SHOAL_OK) {
		sh_free(none);
		return sh_errf(errmsg, rc, "planner: out of memory");
	}
	p.out = out;
	p.cap = cap;
	const sh_map *m = in->map;
	for (uint32_t gi = 0; gi < m->n_groups && p.n < p.cap; gi++) {
		const sh_map_group *g = &m->groups[gi];
		if (live_voters(&p, g) < sh_map_majority(sh_map_voters(g))) {
			p.groups[gi].stuck = true;
			plan_emit(&p, (sh_plan_action){.kind = SH_PLAN_NO_QUORUM,
			                               .reason = SH_PLAN_R_REPAIR,
			                               .group = g->id});
			continue;
		}
		if (p.groups[gi].moving)
			continue_group(&p, gi);
	}
	repair(&p, 0);
	repair(&p, 1);
	plan_splits(&p);
	rc = plan_partition_moves(&p);
	plan_balance_leaders(&p);
	balance_replicas(&p);
	add_group(&p);
	*n = p.n;
	plan_fini(&p);
	sh_free(none);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "planner: out of memory");
	return SHOAL_OK;
}
