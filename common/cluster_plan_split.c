/*
 * cluster_plan_split.c -- steps 3 and 4 of the planner (cluster_plan.h):
 * where to split a partition, when a key cannot be split, and which
 * partition leaves a group that carries too much.
 */
#include <string.h>

#include "alloc.h"
#include "cluster_plan_int.h"
#include "errors.h"

/* A group sends partitions away past this many times the mean data group. */
#define GROUP_OVER 2.0

static double weight(const sh_plan_sample *s, bool heat)
{
	return heat ? s->units : (double)s->bytes;
}

/*
 * The hash at which [lo, hi] splits into two halves of equal load by the
 * samples (bytes for size, units for heat): the first hash of the upper
 * half, lo < at <= hi.  Without samples (or load), the middle of the range.
 * Returns false, with the key's hash in *key, when one key carries at least
 * `share` of the load -- or the range is a single hash: splitting cannot
 * divide one key's load, however it cuts.
 */
static bool split_point(uint64_t lo, uint64_t hi, const sh_plan_part_load *l, bool heat,
                        double share, uint64_t *at, uint64_t *key)
{
	double total = 0, top = -1;
	for (uint32_t j = 0; j < l->n_samples; j++) {
		double w = weight(&l->samples[j], heat);
		total += w;
		if (w > top)
			top = w, *key = l->samples[j].hash;
	}
	/* One key's share of what was sampled -- unless the samples cover
	 * under a quarter of the partition's load: they are the leader's
	 * busiest keys group-wide, so a partition of many evenly loaded keys
	 * may have one sample or two, each "most of the samples", and such a
	 * partition was reported as one hot key and never split
	 * (it_autosplit test_heat_split); then the key's share of the whole
	 * load.  (Not always the whole: the samples' rates decay and lag the
	 * partition's window, so a real hot key may show less than half of
	 * it -- test_hot_key's partition was split twice that way.) */
	double whole = heat ? l->units : (double)l->bytes;
	double of = total >= 0.25 * whole ? total : whole;
	if (total > 0 && top >= share * of) {
		return false;
	}
	if (total <= 0 || l->n_samples < 2) {
		if (hi == lo) {
			*key = lo;
			return false;
		}
		*at = lo + (hi - lo) / 2 + 1;
		return true;
	}
	/* The boundary before sample j (j >= 1) that best halves the load. */
	double left = 0, best = -1;
	for (uint32_t j = 1; j < l->n_samples; j++) {
		left += weight(&l->samples[j - 1], heat);
		double gap = 2 * left - total;
		gap = gap < 0 ? -gap : gap;
		uint64_t h = l->samples[j].hash;
		if (h > lo && h <= hi && (best < 0 || gap < best))
			best = gap, *at = h;
	}
	if (best < 0) { /* samples outside the range: the caller's figures are stale */
		if (hi == lo) {
			*key = lo;
			return false;
		}
		*at = lo + (hi - lo) / 2 + 1;
	}
	return true;
}

void plan_splits(plan *p)
{
	const sh_map *m = p->map;
	const sh_plan_conf *c = p->conf;
	uint32_t left = c->max_splits ? c->max_splits : UINT32_MAX;
	if (c->hold_splits)
		return;
	for (uint32_t i = 0; i < m->n_parts && left > 0 && p->n < p->cap; i++) {
		const sh_map_part *x = &m->parts[i];
		const sh_plan_part_load *l = &p->in->parts[i];
		if (x->to_group != SH_MAP_NONE)
			continue;
		bool big = c->split_bytes && l->bytes > c->split_bytes;
		bool hot = (c->split_units > 0 && l->units > c->split_units) ||
		           (c->split_throttled > 0 && l->throttled > c->split_throttled);
		if (!big && !hot)
			continue;
		uint64_t at = 0, key = 0;
		sh_plan_action a = {.reason = hot ? SH_PLAN_R_HEAT : SH_PLAN_R_SIZE,
		                    .group = x->group,
		                    .table = x->table,
		                    .lo = x->lo,
		                    .to_group = x->group};
		if (split_point(x->lo, sh_map_part_hi(m, i), l, hot, c->hot_key_share, &at, &key)) {
			a.kind = SH_PLAN_SPLIT, a.at = at;
			left--;
		} else {
			a.kind = SH_PLAN_HOT_KEY, a.at = key;
		}
		plan_emit(p, a);
	}
}

/* Moves the load of partition i from group gi to group ti in the figures. */
static void shift(plan *p, uint32_t i, uint32_t gi, uint32_t ti)
{
	const sh_plan_part_load *l = &p->in->parts[i];
	const uint32_t from_to[2] = {gi, ti};
	for (int s = 0; s < 2; s++) {
		double sign = s == 0 ? -1 : 1;
		plan_group *pg = &p->groups[from_to[s]];
		const sh_map_group *g = &p->map->groups[from_to[s]];
		pg->bytes += sign * (double)l->bytes;
		pg->units += sign * l->units;
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			uint32_t ni = plan_node_index(p, g->replicas[k].node);
			p->nodes[ni].load[SH_PLAN_BYTES] += sign * (double)l->bytes;
		}
		if (pg->leader != SH_MAP_NONE)
			p->nodes[pg->leader].load[SH_PLAN_UNITS] += sign * l->units;
	}
}

/*
 * Step 7's second half: a data group created after the birth that holds no
 * partition (none there, none moving in) gets one -- the largest idle
 * partition (bytes, then units) of the group holding the most (two or more),
 * else the largest partition of all split at its middle with the upper half
 * sent to it.  off / by_group: each group's idle partitions.  True if a step
 * was planned.
 */
static bool fill_empty_group(plan *p, const uint32_t *off, const uint32_t *by_group)
{
	const sh_map *m = p->map;
	if (p->inflight >= p->conf->max_moves || p->n >= p->cap)
		return false;
	uint32_t to = SH_MAP_NONE;
	for (uint32_t ti = 0; ti < m->n_groups && to == SH_MAP_NONE; ti++) {
		const sh_map_group *g = &m->groups[ti];
		if (g->id < p->conf->birth_groups || !sh_map_is_data_group(m, g->id) ||
		    sh_map_group_founding(g) || p->groups[ti].stuck || off[ti + 1] > off[ti])
			continue;
		bool incoming = false;
		for (uint32_t i = 0; i < m->n_parts && !incoming; i++)
			incoming = m->parts[i].to_group == g->id;
		if (!incoming)
			to = ti;
	}
	if (to == SH_MAP_NONE)
		return false;
	uint32_t from = SH_MAP_NONE;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		uint32_t n = off[gi + 1] - off[gi];
		if (gi == to || n < 2 || !sh_map_is_data_group(m, m->groups[gi].id) ||
		    p->groups[gi].stuck)
			continue;
		uint32_t nf = from == SH_MAP_NONE ? 0 : off[from + 1] - off[from];
		if (from == SH_MAP_NONE || n > nf ||
		    (n == nf && p->groups[gi].bytes > p->groups[from].bytes))
			from = gi;
	}
	/* The candidates: the source group's idle partitions, or (splitting)
	 * every idle partition of a data group. */
	uint32_t lo_j = from != SH_MAP_NONE ? off[from] : off[0];
	uint32_t hi_j = from != SH_MAP_NONE ? off[from + 1] : off[m->n_groups];
	uint32_t pick = SH_MAP_NONE;
	for (uint32_t j = lo_j; j < hi_j; j++) {
		uint32_t i = by_group[j];
		const sh_plan_part_load *l = &p->in->parts[i],
		                        *b = pick != SH_MAP_NONE ? &p->in->parts[pick] : NULL;
		uint32_t gi = plan_group_index(p, m->parts[i].group);
		if (gi == to || !sh_map_is_data_group(m, m->parts[i].group) || p->groups[gi].stuck)
			continue;
		if (from == SH_MAP_NONE && sh_map_part_hi(m, i) == m->parts[i].lo)
			continue; /* a single hash cannot split */
		if (b == NULL || l->bytes > b->bytes ||
		    (l->bytes == b->bytes && l->units > b->units))
			pick = i;
	}
	if (pick == SH_MAP_NONE || (p->in->parts[pick].bytes == 0 && p->in->parts[pick].units <= 0))
		return false;
	const sh_map_part *x = &m->parts[pick];
	sh_plan_action a = {.reason = SH_PLAN_R_BALANCE,
	                    .group = x->group,
	                    .table = x->table,
	                    .lo = x->lo,
	                    .to_group = m->groups[to].id};
	if (from != SH_MAP_NONE) {
		a.kind = SH_PLAN_MOVE_PARTITION;
	} else {
		if (p->conf->hold_splits)
			return false;
		uint64_t hi = sh_map_part_hi(m, pick);
		a.kind = SH_PLAN_SPLIT;
		a.at = x->lo + (hi - x->lo) / 2 + 1;
	}
	if (!plan_emit(p, a))
		return false;
	p->inflight++;
	return true;
}

int plan_partition_moves(plan *p)
{
	const sh_map *m = p->map;
	double sum_b = 0, sum_u = 0;
	uint32_t data = 0;
	/* A group being founded (no leader yet) takes no part: it holds
	 * nothing, and may never be elected. */
	for (uint32_t gi = 0; gi < m->n_groups; gi++)
		if (sh_map_is_data_group(m, m->groups[gi].id) &&
		    !sh_map_group_founding(&m->groups[gi])) {
			data++;
			sum_b += p->groups[gi].bytes;
			sum_u += p->groups[gi].units;
		}
	if (data < 2 || (sum_b <= 0 && sum_u <= 0) || p->conf->hold_partition_moves)
		return SHOAL_OK;
	/* Only from a whole picture: a data group whose leader is not known
	 * this round reported no figures, and would look like the lightest
	 * group while the others look like twice the mean (a cluster
	 * restarting moved a partition that way). */
	for (uint32_t gi = 0; gi < m->n_groups; gi++)
		if (sh_map_is_data_group(m, m->groups[gi].id) &&
		    !sh_map_group_founding(&m->groups[gi]) && p->in->groups[gi].leader == 0)
			return SHOAL_OK;
	double mean[2] = {sum_b / data, sum_u / data};
	/* The idle partitions of each group: by_group[off[g] .. off[g + 1]). */
	uint32_t *off = sh_calloc(m->n_groups + 2, sizeof(uint32_t));
	uint32_t *by_group = sh_calloc(m->n_parts + 1, sizeof(uint32_t));
	if (off == NULL || by_group == NULL) {
		sh_free(off);
		sh_free(by_group);
		return SHOAL_E_NOMEM;
	}
	for (uint32_t i = 0; i < m->n_parts; i++)
		if (m->parts[i].to_group == SH_MAP_NONE)
			off[plan_group_index(p, m->parts[i].group) + 2]++;
	for (uint32_t g = 0; g < m->n_groups; g++)
		off[g + 2] += off[g + 1];
	for (uint32_t i = 0; i < m->n_parts; i++)
		if (m->parts[i].to_group == SH_MAP_NONE)
			by_group[off[plan_group_index(p, m->parts[i].group) + 1]++] = i;
	/* off[g] .. off[g + 1] now delimit group g. */
	if (fill_empty_group(p, off, by_group))
		goto out;
	for (uint32_t gi = 0; gi < m->n_groups && p->inflight < p->conf->max_moves && p->n < p->cap;
	     gi++) {
		if (!sh_map_is_data_group(m, m->groups[gi].id) || off[gi + 1] - off[gi] < 2)
			continue;
		double load[2] = {p->groups[gi].bytes, p->groups[gi].units};
		double rb = mean[0] > 0 ? load[0] / mean[0] : 0,
		       ru = mean[1] > 0 ? load[1] / mean[1] : 0;
		if (rb <= GROUP_OVER && ru <= GROUP_OVER)
			continue;
		int d = ru >= rb ? 1 : 0;
		double excess = load[d] - mean[d];
		uint32_t to = SH_MAP_NONE;
		for (uint32_t ti = 0; ti < m->n_groups; ti++) {
			if (ti == gi || !sh_map_is_data_group(m, m->groups[ti].id) ||
			    p->groups[ti].stuck || sh_map_group_founding(&m->groups[ti]))
				continue;
			double tl = d ? p->groups[ti].units : p->groups[ti].bytes;
			if (to == SH_MAP_NONE ||
			    tl < (d ? p->groups[to].units : p->groups[to].bytes))
				to = ti;
		}
		if (to == SH_MAP_NONE)
			continue;
		/* The largest partition that takes the group towards the mean
		 * and leaves the target lighter than the source: a move that
		 * would only swap which group is heavy (or even them out by
		 * moving one of two equal partitions) is not made. */
		double tl = d ? p->groups[to].units : p->groups[to].bytes;
		uint32_t pick = SH_MAP_NONE;
		double pick_w = 0;
		/* Nor one that leaves the target over on the other dimension:
		 * that one would move it straight back (it did in the
		 * simulation, a partition heavy in units and in bytes sent
		 * back and forth between two groups for ever). */
		double to_other = d ? p->groups[to].bytes : p->groups[to].units;
		for (uint32_t j = off[gi]; j < off[gi + 1]; j++) {
			const sh_plan_part_load *l = &p->in->parts[by_group[j]];
			double w = d ? l->units : (double)l->bytes;
			double wo = d ? (double)l->bytes : l->units;
			if (mean[1 - d] > 0 && to_other + wo > GROUP_OVER * mean[1 - d])
				continue;
			if (w > 0 && w <= excess && tl + w < load[d] - w && w > pick_w)
				pick = by_group[j], pick_w = w;
		}
		if (pick == SH_MAP_NONE)
			continue;
		const sh_map_part *x = &m->parts[pick];
		if (!plan_emit(p, (sh_plan_action){.kind = SH_PLAN_MOVE_PARTITION,
		                                   .reason = d ? SH_PLAN_R_HEAT : SH_PLAN_R_SIZE,
		                                   .group = x->group,
		                                   .table = x->table,
		                                   .lo = x->lo,
		                                   .to_group = m->groups[to].id}))
			break;
		p->inflight++;
		shift(p, pick, gi, to);
	}
out:
	sh_free(off);
	sh_free(by_group);
	return SHOAL_OK;
}
