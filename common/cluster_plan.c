/*
 * cluster_plan.c -- the rebalancer (contract and the order of the steps in
 * cluster_plan.h): figures, moves in flight, continuing and repairing
 * groups, leader and replica balance.  Splits and partition moves are in
 * cluster_plan_split.c.
 *
 * Cost of one call: O(P log G) for the group figures, O(G * R) for the node
 * figures, O(N) per new move chosen (the scans for a target), so a call on
 * 1,000 nodes, 10,000 groups and 100,000 partitions is a few milliseconds.
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
 * or more voters than configured. */
static bool group_moving(const sh_map *m, const sh_map_group *g)
{
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
		p->inflight += pg->moving;
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
		if (!group_moving(m, g))
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
static double lead_score(const plan *p, uint32_t ni)
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
		double s = lead_score(p, ni) + (p->nodes[ni].active ? 0 : 1e6);
		if (best == SH_MAP_NONE || s < best_s)
			best = ni, best_s = s;
	}
	return best;
}

static void transfer(plan *p, uint32_t gi, uint32_t to, sh_plan_reason why)
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
			transfer(p, gi, to, SH_PLAN_R_CONTINUE);
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

/* --- 5. leaders ---------------------------------------------------------- */

/* Balancing acts on nodes beyond this share of the band, so that the cluster
 * settles inside the band (sh_plan_within) rather than on its edge. */
#define ACT 0.75

static double sq(double x)
{
	return x * x;
}

/* The potential a node's deviation d (in bands) adds: d^2, plus a steep
 * term past ACT so that bringing a node inside the band outweighs fine
 * tuning of nodes already inside. */
static double pen(double d)
{
	double out = (d < 0 ? -d : d) - ACT;
	return sq(d) + (out > 0 ? 50 * sq(out) : 0);
}

/* How node index x's potential on leaders and units changes when it gains
 * dl leaders and du units. */
static double node_gain(const plan *p, uint32_t x, double dl, double du)
{
	double l = plan_dev(p, x, SH_PLAN_LEADERS), u = plan_dev(p, x, SH_PLAN_UNITS);
	double l2 = l + dl / p->band[SH_PLAN_LEADERS], u2 = u + du / p->band[SH_PLAN_UNITS];
	return pen(l2) - pen(l) + pen(u2) - pen(u);
}

/* A planned change of leadership: one transfer, or two in a chain (n gives
 * g1 to b, b gives g2 to c: b keeps its count, n gives one to c -- what a
 * surplus of one needs when every peer of n is one below it). */
typedef struct chain {
	uint32_t g1, b, g2, c; /* g2 == SH_MAP_NONE: one transfer */
	double gain;           /* change of the sum of squared deviations; < 0 */
} chain;

/* The best chain moving leadership off node index n (over the band on
 * leaders or units, or draining).  Accepting only chains that lower the sum
 * of the nodes' potentials (pen) makes the search converge: the sum falls at
 * every step and takes finitely many values. */
static void best_chain(const plan *p, uint32_t n, chain *best)
{
	const sh_map *m = p->map;
	bool draining = !p->nodes[n].active;
	for (uint32_t i = p->by_node_off[n]; i < p->by_node_off[n + 1]; i++) {
		uint32_t g1 = p->by_node[i];
		const plan_group *p1 = &p->groups[g1];
		const sh_map_group *grp1 = &m->groups[g1];
		if (p1->moving || p1->leader != n)
			continue;
		double u1 = p1->units;
		double give = draining ? -1e6 : node_gain(p, n, -1, -u1);
		for (uint32_t k = 0; k < grp1->n_replicas; k++) {
			uint32_t b = plan_node_index(p, grp1->replicas[k].node);
			if (b == n || !grp1->replicas[k].voter || !plan_eligible(p, b))
				continue;
			double x = give + node_gain(p, b, 1, u1);
			if (x < best->gain)
				*best = (chain){g1, b, SH_MAP_NONE, SH_MAP_NONE, x};
			if (draining)
				continue;
			for (uint32_t j = p->by_node_off[b]; j < p->by_node_off[b + 1]; j++) {
				uint32_t g2 = p->by_node[j];
				const plan_group *p2 = &p->groups[g2];
				const sh_map_group *grp2 = &m->groups[g2];
				if (g2 == g1 || p2->moving || p2->leader != b)
					continue;
				double mid = give + node_gain(p, b, 0, u1 - p2->units);
				for (uint32_t q = 0; q < grp2->n_replicas; q++) {
					uint32_t c = plan_node_index(p, grp2->replicas[q].node);
					if (c == b || !grp2->replicas[q].voter ||
					    !plan_eligible(p, c))
						continue;
					/* c == n: a swap, for units at equal leader counts. */
					double y = c == n ? node_gain(p, n, 0, p2->units - u1) +
					                        node_gain(p, b, 0, u1 - p2->units)
					                  : mid + node_gain(p, c, 1, p2->units);
					if (y < best->gain)
						*best = (chain){g1, b, g2, c, y};
				}
			}
		}
	}
}

/* The best transfer to node index n (under the band) from a peer b, or
 * chain: a gives g1 to b, b gives g2 to n. */
static void best_pull(const plan *p, uint32_t n, chain *best, uint32_t *a_out)
{
	const sh_map *m = p->map;
	for (uint32_t i = p->by_node_off[n]; i < p->by_node_off[n + 1]; i++) {
		uint32_t g2 = p->by_node[i];
		const plan_group *p2 = &p->groups[g2];
		const sh_map_group *grp2 = &m->groups[g2];
		uint32_t b = p2->leader;
		if (p2->moving || b == SH_MAP_NONE || b == n || !plan_eligible(p, b) ||
		    !grp2->replicas[sh_map_replica_index(grp2, m->nodes[n].id)].voter)
			continue;
		double u2 = p2->units, take = node_gain(p, n, 1, u2);
		double x = node_gain(p, b, -1, -u2) + take;
		if (x < best->gain) /* b gives g2 to n */
			*best = (chain){g2, n, SH_MAP_NONE, SH_MAP_NONE, x}, *a_out = b;
		for (uint32_t j = p->by_node_off[b]; j < p->by_node_off[b + 1]; j++) {
			uint32_t g1 = p->by_node[j];
			const plan_group *p1 = &p->groups[g1];
			const sh_map_group *grp1 = &m->groups[g1];
			uint32_t a = p1->leader;
			if (g1 == g2 || p1->moving || a == SH_MAP_NONE || a == b || a == n ||
			    !plan_eligible(p, a) ||
			    !grp1->replicas[sh_map_replica_index(grp1, m->nodes[b].id)].voter)
				continue;
			double y = node_gain(p, a, -1, -p1->units) +
			           node_gain(p, b, 0, p1->units - u2) + take;
			if (y < best->gain)
				*best = (chain){g1, b, g2, n, y}, *a_out = a;
		}
	}
}

/* Fallback for a node over (give) or under (take) the band on leaders that
 * no chain of two improves: the shortest chain of transfers, breadth-first
 * over "x leads a group where y is a voter", to a node that can take one
 * more leader (give one) and stay inside ACT of the band.  Nodes along the
 * chain keep their counts; units are left to the search above.  Returns
 * whether a chain was planned. */
static bool leader_path(plan *p, uint32_t n, bool give)
{
	const sh_map *m = p->map;
	uint32_t *prev = sh_malloc(2 * (size_t)(m->n_nodes + 1) * sizeof(uint32_t));
	uint32_t *queue = sh_malloc((size_t)(m->n_nodes + 1) * sizeof(uint32_t));
	if (prev == NULL || queue == NULL) {
		sh_free(prev);
		sh_free(queue);
		return false;
	}
	uint32_t *via = prev + m->n_nodes; /* the group of the hop into a node */
	for (uint32_t i = 0; i < m->n_nodes; i++)
		prev[i] = SH_MAP_NONE;
	prev[n] = n;
	uint32_t head = 0, tail = 0, found = SH_MAP_NONE;
	double step = 1 / p->band[SH_PLAN_LEADERS];
	queue[tail++] = n;
	while (head < tail && found == SH_MAP_NONE) {
		uint32_t x = queue[head++];
		for (uint32_t i = p->by_node_off[x]; i < p->by_node_off[x + 1]; i++) {
			uint32_t gi = p->by_node[i];
			const plan_group *pg = &p->groups[gi];
			const sh_map_group *g = &m->groups[gi];
			if (pg->moving || pg->leader == SH_MAP_NONE ||
			    !g->replicas[sh_map_replica_index(g, m->nodes[x].id)].voter)
				continue;
			/* give: x leads gi and hands it to a voter y; take: x takes
			 * gi from its leader y. */
			for (uint32_t k = 0; k < (give ? g->n_replicas : 1); k++) {
				uint32_t y =
				    give ? plan_node_index(p, g->replicas[k].node) : pg->leader;
				if ((give && (pg->leader != x || !g->replicas[k].voter)) ||
				    (!give && pg->leader == x) || !plan_eligible(p, y) ||
				    prev[y] != SH_MAP_NONE)
					continue;
				prev[y] = x, via[y] = gi;
				double d = plan_dev(p, y, SH_PLAN_LEADERS);
				if (give ? d + step <= ACT : d - step >= -ACT) {
					found = y;
					break;
				}
				queue[tail++] = y;
			}
			if (found != SH_MAP_NONE)
				break;
		}
	}
	/* Only if the chain lowers the potential, as every other transfer:
	 * without that rule the search and this fallback undo each other.
	 * The chain is v0 = n, v1, ..., vk = found, hop i between v_i and
	 * v_i+1 (group via[v_i+1]); queue is reused to hold it, backwards. */
	uint32_t k = 0;
	for (uint32_t y = found; y != SH_MAP_NONE && y != n; y = prev[y])
		queue[k++] = y;
	double gain = 0, sign = give ? 1 : -1;
	for (uint32_t i = 0; i <= k && found != SH_MAP_NONE; i++) {
		/* queue[k - i] is v_i (queue[k] would be n). */
		uint32_t v = i == 0 ? n : queue[k - i];
		double in = i > 0 ? p->groups[via[v]].units : 0;                 /* hop i-1 */
		double out = i < k ? p->groups[via[queue[k - i - 1]]].units : 0; /* hop i */
		double dl = i == 0 ? -1 : i == k ? 1 : 0;
		gain += node_gain(p, v, sign * dl, sign * (in - out));
	}
	if (found != SH_MAP_NONE && gain < -1e-9) {
		for (uint32_t y = found; y != n; y = prev[y])
			transfer(p, via[y], give ? y : prev[y], SH_PLAN_R_BALANCE);
	} else {
		found = SH_MAP_NONE;
	}
	sh_free(prev);
	sh_free(queue);
	return found != SH_MAP_NONE;
}

static void balance_leaders(plan *p)
{
	const sh_map *m = p->map;
	uint32_t budget = p->conf->max_moves;
	for (uint32_t n = 0; n < m->n_nodes && budget > 0 && p->n + 2 <= p->cap; n++) {
		if (!p->nodes[n].alive)
			continue;
		bool draining = !p->nodes[n].active && p->nodes[n].load[SH_PLAN_LEADERS] > 0;
		double l = plan_dev(p, n, SH_PLAN_LEADERS), u = plan_dev(p, n, SH_PLAN_UNITS);
		chain c = {.g1 = SH_MAP_NONE, .gain = -1e-9};
		if (draining || (plan_eligible(p, n) && (l > ACT || u > ACT)))
			best_chain(p, n, &c);
		else if (plan_eligible(p, n) && (l < -ACT || u < -ACT))
			best_pull(p, n, &c, &(uint32_t){0});
		else
			continue;
		if (c.g1 == SH_MAP_NONE) {
			if (plan_eligible(p, n) && (l > 1 || l < -1) && p->cap - p->n >= m->n_nodes)
				budget -= leader_path(p, n, l > 1);
			continue;
		}
		sh_plan_reason why = draining ? SH_PLAN_R_DRAIN : SH_PLAN_R_BALANCE;
		transfer(p, c.g1, c.b, why);
		if (c.g2 != SH_MAP_NONE)
			transfer(p, c.g2, c.c, why);
		budget--;
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
			if (plan_dev(p, n, SH_PLAN_REPLICAS) < -ACT ||
			    plan_dev(p, n, SH_PLAN_BYTES) < -ACT)
				under = true;
			if (done[n] || p->nodes[n].busy >= limit_per_node(p))
				continue;
			if (s == SH_MAP_NONE || replica_score(p, n) > replica_score(p, s))
				s = n;
		}
		if (s == SH_MAP_NONE || (replica_score(p, s) <= ACT && !under) ||
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

int sh_plan_next(const sh_plan_input *in, const sh_plan_conf *conf, sh_plan_action *out,
                 uint32_t cap, uint32_t *n, char *errmsg)
{
	plan p;
	*n = 0;
	int rc = plan_init(&p, in, conf, conf->tolerance);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "planner: out of memory");
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
	balance_leaders(&p);
	balance_replicas(&p);
	*n = p.n;
	plan_fini(&p);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "planner: out of memory");
	return SHOAL_OK;
}
