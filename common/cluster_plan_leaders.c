/*
 * cluster_plan_leaders.c -- step 5 of the planner (cluster_plan.h): leader
 * transfers, which carry a group's leader count and its whole request rate
 * at once, so both are balanced by one search over a potential of the two.
 */
#include "alloc.h"
#include "cluster_plan_int.h"

static double sq(double x)
{
	return x * x;
}

/* The potential a node's deviation d (in bands) adds: d^2, plus a steep
 * term past PLAN_ACT so that bringing a node inside the band outweighs fine
 * tuning of nodes already inside. */
static double pen(double d)
{
	double out = (d < 0 ? -d : d) - PLAN_ACT;
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

/* What a transfer costs, in the potential's units: a short write pause at
 * the group, so that of two plans worth the same the one with fewer
 * transfers wins -- without it a chain through a third node tied with the
 * direct transfer it imitates and, found first, was chosen.  Group 0's costs
 * twice as much: its leader runs the plan (node/elastic.c), and a new leader
 * starts its load averages over, so among equals the executor keeps its
 * place and finishes the chain it began. */
#define TRANSFER_COST 1e-3

static double cost(const plan *p, uint32_t gi)
{
	return p->map->groups[gi].id == 0 ? 2 * TRANSFER_COST : TRANSFER_COST;
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
			double x = give + node_gain(p, b, 1, u1) + cost(p, g1);
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
					y += cost(p, g1) + cost(p, g2);
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
		double x = node_gain(p, b, -1, -u2) + take + cost(p, g2);
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
			           node_gain(p, b, 0, p1->units - u2) + take + cost(p, g1) +
			           cost(p, g2);
			if (y < best->gain)
				*best = (chain){g1, b, g2, n, y}, *a_out = a;
		}
	}
}

/* Fallback for a node over (give) or under (take) the band on leaders that
 * no chain of two improves: the shortest chain of transfers, breadth-first
 * over "x leads a group where y is a voter", to a node that can take one
 * more leader (give one) and stay inside PLAN_ACT of the band.  Nodes along the
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
				if (give ? d + step <= PLAN_ACT : d - step >= -PLAN_ACT) {
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
	for (uint32_t y = found; y != SH_MAP_NONE && y != n; y = prev[y])
		gain += cost(p, via[y]);
	if (found != SH_MAP_NONE && gain < -1e-9) {
		for (uint32_t y = found; y != n; y = prev[y])
			plan_transfer(p, via[y], give ? y : prev[y], SH_PLAN_R_BALANCE);
	} else {
		found = SH_MAP_NONE;
	}
	sh_free(prev);
	sh_free(queue);
	return found != SH_MAP_NONE;
}

void plan_balance_leaders(plan *p)
{
	const sh_map *m = p->map;
	uint32_t budget = p->conf->max_moves;
	for (uint32_t n = 0; n < m->n_nodes && budget > 0 && p->n + 2 <= p->cap; n++) {
		if (!p->nodes[n].alive)
			continue;
		bool draining = !p->nodes[n].active && p->nodes[n].load[SH_PLAN_LEADERS] > 0;
		double l = plan_dev(p, n, SH_PLAN_LEADERS), u = plan_dev(p, n, SH_PLAN_UNITS);
		chain c = {.g1 = SH_MAP_NONE, .gain = -1e-9};
		if (draining || (plan_eligible(p, n) && (l > PLAN_ACT || u > PLAN_ACT)))
			best_chain(p, n, &c);
		else if (plan_eligible(p, n) && (l < -PLAN_ACT || u < -PLAN_ACT))
			best_pull(p, n, &c, &(uint32_t){0});
		else
			continue;
		if (c.g1 == SH_MAP_NONE) {
			if (plan_eligible(p, n) && (l > 1 || l < -1) && p->cap - p->n >= m->n_nodes)
				budget -= leader_path(p, n, l > 1);
			continue;
		}
		/* A chain's last transfer first: the executor takes one step a
		 * round, and after "b gives g2 to c" the next round still sees n
		 * over and b under and plans the direct "n gives g1 to b" -- where
		 * "n gives g1 to b" first left b over, and when g1 was group 0 the
		 * new executor's first step could be to give it back. */
		sh_plan_reason why = draining ? SH_PLAN_R_DRAIN : SH_PLAN_R_BALANCE;
		if (c.g2 != SH_MAP_NONE)
			plan_transfer(p, c.g2, c.c, why);
		plan_transfer(p, c.g1, c.b, why);
		budget--;
	}
}
