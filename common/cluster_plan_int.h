/*
 * cluster_plan_int.h -- what the planner's files share (private to
 * cluster_plan.c, cluster_plan_split.c): the figures one call works on.
 *
 * Figures are projected: a replica that a newer one replaces counts as gone,
 * the new one as there; a partition being moved counts in its target group.
 * Every step chosen during the call updates them, so the next choice sees it.
 */
#ifndef SHOAL_COMMON_CLUSTER_PLAN_INT_H
#define SHOAL_COMMON_CLUSTER_PLAN_INT_H

#include "cluster_plan.h"

typedef struct plan_node {
	double load[SH_PLAN_DIM__COUNT];
	uint32_t busy; /* replica moves in flight involving it */
	bool alive, active;
} plan_node;

typedef struct plan_group {
	double bytes, units; /* of its partitions */
	uint32_t leader;     /* node index, or SH_MAP_NONE (unknown or dead) */
	bool moving;         /* a replica move is in flight (or was planned now) */
	bool stuck;          /* no quorum: nothing can be done */
} plan_group;

typedef struct plan {
	const sh_plan_input *in;
	const sh_plan_conf *conf;
	const sh_map *map;
	plan_node *nodes;      /* parallel to map->nodes */
	plan_group *groups;    /* parallel to map->groups */
	uint32_t *by_node;     /* indices of the groups with a replica on node n: */
	uint32_t *by_node_off; /* by_node[by_node_off[n] .. by_node_off[n + 1]) */
	uint32_t eligible;     /* live ACTIVE nodes */
	double mean[SH_PLAN_DIM__COUNT], band[SH_PLAN_DIM__COUNT];
	uint32_t inflight;
	sh_plan_action *out;
	uint32_t cap, n;
} plan;

static inline bool plan_eligible(const plan *p, uint32_t ni)
{
	return p->nodes[ni].alive && p->nodes[ni].active;
}

/* How far node ni is from the mean on d, in bands (> 1: over, < -1: under). */
static inline double plan_dev(const plan *p, uint32_t ni, sh_plan_dim d)
{
	return (p->nodes[ni].load[d] - p->mean[d]) / p->band[d];
}

/* Index of a node / group of the map by id, or SH_MAP_NONE. */
uint32_t plan_node_index(const plan *p, uint32_t id);
uint32_t plan_group_index(const plan *p, uint32_t id);
/* Appends a step; false when out is full. */
bool plan_emit(plan *p, sh_plan_action a);

/* Balancing acts on nodes beyond this share of the band, so that the cluster
 * settles inside the band (sh_plan_within) rather than on its edge. */
#define PLAN_ACT 0.75

/* max(leaders, units) deviation of node index ni, in bands. */
double plan_lead_score(const plan *p, uint32_t ni);
/* Moves group gi's leadership to node index to (figures updated; the group
 * takes no other step in this call). */
void plan_transfer(plan *p, uint32_t gi, uint32_t to, sh_plan_reason why);

/* Step 5 (cluster_plan_leaders.c). */
void plan_balance_leaders(plan *p);
/* Steps 3 and 4 of cluster_plan.h (cluster_plan_split.c). */
void plan_splits(plan *p);
int plan_partition_moves(plan *p);

#endif
