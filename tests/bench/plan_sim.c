/*
 * plan_sim -- the planner (common/cluster_plan.h) at scale, in the
 * simulation of tests/lib/tl_plansim.h: by default 900 nodes grow to 1,000
 * while 10 are decommissioned and 3 fail one after another in the middle of
 * the plan, with 10,000 storage groups and 100,000 partitions of 1 GB and
 * 100 units/s on average (1 % of them 20x hotter, a few on a single key).
 * Prints the moves, the simulated time to balance and the planner's CPU
 * time per step.  Asserts only what the simulation asserts (majorities,
 * concurrency limits, accepted mutations); exits 1 if it does not settle.
 *
 *   plan_sim [-n nodes] [-j joining] [-g groups] [-p partitions] [-m max_moves]
 *            [-k max_moves_per_node]
 *   SHOAL_SEED=n replays a run.  `make bench-plan` runs the default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "tests/lib/tl_plansim.h"

int main(int argc, char **argv)
{
	uint32_t nodes = 900, join = 100, groups = 10000, parts = 100000, max_moves = 200,
	         per_node = 4;
	int opt;
	while ((opt = getopt(argc, argv, "n:j:g:p:m:k:")) != -1) {
		uint32_t v = (uint32_t)strtoul(optarg, NULL, 10);
		switch (opt) {
		case 'n':
			nodes = v;
			break;
		case 'j':
			join = v;
			break;
		case 'g':
			groups = v;
			break;
		case 'p':
			parts = v;
			break;
		case 'm':
			max_moves = v;
			break;
		case 'k':
			per_node = v;
			break;
		default:
			fprintf(stderr, "usage: plan_sim [-n nodes] [-j joining] [-g groups] "
			                "[-p partitions] [-m max_moves] [-k max_moves_per_node]\n");
			return 2;
		}
	}
	tl_plansim_conf c = {
	    .nodes = nodes,
	    .groups = groups + 1,
	    .replication = 3,
	    .tables = 10,
	    .parts_per_table = parts / 10,
	    .samples = 8,
	    .part_bytes = 1e9,
	    .part_units = 100,
	    .hot_share = 0.01,
	    .hot_keys = 10,
	    .bandwidth = 100e6,
	    .step_secs = 10,
	    .plan = {.max_moves = max_moves,
	             .max_moves_per_node = per_node,
	             .split_bytes = 4000000000,
	             .split_units = 1500,
	             .hot_key_share = 0.5,
	             .tolerance = {0.1, 0.25, 0.1, 0.2}},
	    .seed = tl_seed(),
	};
	printf("plan_sim: %u nodes + %u joining, %u groups, %u partitions, replication 3, "
	       "max %u moves (%u per node), copies at 100 MB/s, steps of 10 s\n",
	       nodes, join, groups, c.tables * c.parts_per_table, max_moves, per_node);
	tl_plansim *s = tl_plansim_new(&c);
	for (uint32_t i = 0; i < join; i++)
		tl_plansim_join(s);
	/* Mid-plan: decommission 10 nodes, and 3 fail one after another. */
	uint64_t step = 0;
	const uint64_t fail_at[] = {30, 120, 210}, drain_at = 60;
	uint32_t failed = 0;
	bool idle = false;
	while (!idle && step < 100000) {
		if (step == drain_at)
			for (uint32_t i = 0; i < 10 && i < nodes / 4; i++)
				tl_plansim_drain(s, 2 + i * (nodes / 10));
		if (failed < 3 && step == fail_at[failed])
			tl_plansim_fail(s, 5 + (failed++) * (nodes / 3));
		uint32_t n = tl_plansim_step(s);
		step++;
		if (step % 100 == 0) {
			char what[32];
			snprintf(what, sizeof(what), "step %llu", (unsigned long long)step);
			tl_plansim_print(s, what);
		}
		idle = step > fail_at[2] && n == 0 && tl_plansim_idle(s);
	}
	tl_plansim_print(s, idle ? "settled" : "NOT SETTLED");
	const tl_plansim_stats *st = tl_plansim_stats_of(s);
	printf("figures: replica moves %llu, partition moves %llu, splits %llu, leader transfers "
	       "%llu, hot keys reported %llu times; balanced after %.0f simulated s (%.1f h); "
	       "planner %.1f ms CPU per step (max %.1f ms)\n",
	       (unsigned long long)st->actions[SH_PLAN_ADD_REPLICA],
	       (unsigned long long)st->actions[SH_PLAN_MOVE_PARTITION],
	       (unsigned long long)st->actions[SH_PLAN_SPLIT],
	       (unsigned long long)st->actions[SH_PLAN_TRANSFER_LEADER],
	       (unsigned long long)st->actions[SH_PLAN_HOT_KEY], st->last_busy,
	       st->last_busy / 3600, 1e3 * st->plan_cpu_total / (double)st->steps,
	       1e3 * st->plan_cpu_max);
	/* What a map_get that must send the map carries (a refresh whose asker
	 * is current gets its epoch only). */
	printf("the map: %zu bytes encoded\n", sh_map_encoded_size(tl_plansim_map(s)));
	tl_plansim_free(s);
	return idle ? 0 : 1;
}
