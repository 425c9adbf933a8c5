/*
 * tl_plansim.h -- a discrete simulation of a cluster driven by the planner
 * (common/cluster_plan.h), shared by tests/unit/test_plan.c (small) and
 * tests/bench/plan_sim.c (1,000 nodes, 100,000 partitions).
 *
 * Time advances in steps of step_secs.  Each step: pending partition moves
 * whose copy is done cut over; a group whose leader died elects its first
 * live voter; the planner is called on the map and the figures; its steps
 * are applied to the map as the executor would (map mutations, which must
 * all be accepted: a refusal is a planner bug and fails the run).  A new
 * non-voter catches up after (group bytes / bandwidth) seconds, a partition
 * move copies for (partition bytes / bandwidth) seconds; promotions,
 * removals, transfers and splits in place take one step.
 *
 * Checked after every applied step (tl_assert): the group keeps a majority
 * of live voters; moves in flight never exceed max_moves cluster-wide or
 * max_moves_per_node on a node (counted by sh_plan_inflight); a removed
 * replica is not the group's leader.
 *
 * Load: partition bytes and request units are drawn around the means (a
 * log-normal-ish spread), a share of partitions is 20x hotter, and a few
 * carry 20x a mean partition's units on a single key.  Each partition has `samples`
 * sampled keys over its range that carry its bytes and units; a split
 * divides them.  Random numbers from the seed only: a run replays exactly.
 * With SHOAL_PLANSIM_TRACE set in the environment every applied step is
 * printed ("plansim <seconds> s: <kind> (<reason>) group ...").
 */
#ifndef SHOAL_TL_PLANSIM_H
#define SHOAL_TL_PLANSIM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster_plan.h"

#define TL_PLANSIM_SAMPLES 16

typedef struct tl_plansim_conf {
	uint32_t nodes;       /* at the start: ids 1 .. nodes */
	uint32_t groups;      /* including group 0 */
	uint32_t replication; /* group g on nodes (g + k) mod nodes, as the cluster file */
	uint32_t tables, parts_per_table;
	uint32_t samples;  /* sampled keys per partition, <= TL_PLANSIM_SAMPLES */
	double part_bytes; /* mean partition size */
	double part_units; /* mean partition request units per second */
	double hot_share;  /* share of partitions 20x hotter */
	uint32_t hot_keys; /* how many of the hot ones have a single hot key */
	double bandwidth;  /* bytes per second of one copy */
	double step_secs;  /* simulated seconds per step */
	sh_plan_conf plan;
	uint64_t seed;
} tl_plansim_conf;

typedef struct tl_plansim_stats {
	uint64_t steps;
	uint64_t actions[SH_PLAN_KIND__COUNT]; /* applied (reports: seen) */
	double now;                            /* simulated seconds */
	double plan_cpu_total, plan_cpu_max;   /* seconds of CPU in sh_plan_next */
	uint32_t max_inflight, max_inflight_node;
	double last_busy; /* simulated time of the last step that planned anything */
} tl_plansim_stats;

typedef struct tl_plansim tl_plansim;

tl_plansim *tl_plansim_new(const tl_plansim_conf *c);
void tl_plansim_free(tl_plansim *s);

/* A node joins; returns its id. */
uint32_t tl_plansim_join(tl_plansim *s);
/* Decommission (sh_map_drain_node). */
void tl_plansim_drain(tl_plansim *s, uint32_t node);
/* The node dies (for good): its replicas must be re-created elsewhere. */
void tl_plansim_fail(tl_plansim *s, uint32_t node);

/* One step; returns the number of steps the planner gave, reports aside. */
uint32_t tl_plansim_step(tl_plansim *s);
/* Whether no move is in flight. */
bool tl_plansim_idle(tl_plansim *s);
/* Steps until idle -- a plan with nothing but reports and no move in
 * flight -- or max_steps; returns whether it became idle. */
bool tl_plansim_run(tl_plansim *s, uint64_t max_steps);

/* The spread of load over live ACTIVE nodes (sh_plan_spread_of). */
void tl_plansim_spread(tl_plansim *s, const double *tolerance, sh_plan_spread *out);
/* Replicas held by a node. */
uint32_t tl_plansim_replicas_on(const tl_plansim *s, uint32_t node);
const tl_plansim_stats *tl_plansim_stats_of(const tl_plansim *s);
const sh_map *tl_plansim_map(const tl_plansim *s);
/* Prints the spread and the counters, one line each, with a prefix. */
void tl_plansim_print(tl_plansim *s, const char *prefix);

#endif
