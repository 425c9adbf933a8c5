/*
 * cluster_plan_load.c -- the planner's per-partition loads from the figures
 * storage groups report per (group, table) (sh_plan_apportion, contract in
 * cluster_plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cluster_plan.h"
#include "errors.h"

/* The width of partition i's hash range, as a double (up to 2^64). */
static double width(const sh_map *m, uint32_t i)
{
	return (double)(sh_map_part_hi(m, i) - m->parts[i].lo) + 1.0;
}

/* One (group, table) figure over t's partitions in g: each gets the share
 * of its width.  Bytes by the running sum, so that the shares add up to the
 * figure exactly whatever the rounding. */
static void spread(const sh_map *m, const sh_plan_table_load *tl, sh_plan_part_load *out)
{
	uint32_t first = sh_map_part_of(m, tl->table, 0);
	if (first == SH_MAP_NONE)
		return;
	double total = 0;
	uint32_t end = first;
	for (; end < m->n_parts && m->parts[end].table == tl->table; end++)
		if (m->parts[end].group == tl->group)
			total += width(m, end);
	if (total <= 0)
		return;
	double cum = 0;
	uint64_t given = 0;
	for (uint32_t i = first; i < end; i++) {
		if (m->parts[i].group != tl->group)
			continue;
		double w = width(m, i);
		cum += w;
		uint64_t upto =
		    cum >= total ? tl->bytes : (uint64_t)((double)tl->bytes * (cum / total));
		if (upto < given)
			upto = given;
		out[i].bytes += upto - given;
		given = upto;
		out[i].units += tl->units * (w / total);
		out[i].throttled += tl->throttled * (w / total);
	}
}

static int by_part_hash(const void *a, const void *b)
{
	const sh_plan_key_load *x = a, *y = b;
	if (x->table != y->table)
		return x->table < y->table ? -1 : 1;
	return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int sh_plan_apportion(const sh_map *m, const sh_plan_table_load *tables, uint32_t n_tables,
                      const sh_plan_key_load *keys, uint32_t n_keys, sh_plan_part_load *out,
                      sh_plan_sample **samples)
{
	memset(out, 0, (size_t)m->n_parts * sizeof(*out));
	*samples = NULL;
	for (uint32_t k = 0; k < n_tables; k++)
		spread(m, &tables[k], out);
	if (n_keys == 0)
		return SHOAL_OK;
	/* Keys in (table, hash) order, so that each partition's samples are
	 * one sorted run of the array. */
	sh_plan_key_load *sorted = sh_malloc((size_t)n_keys * sizeof(*sorted));
	sh_plan_sample *s = sh_calloc(n_keys, sizeof(*s));
	if (sorted == NULL || s == NULL) {
		sh_free(sorted);
		sh_free(s);
		memset(out, 0, (size_t)m->n_parts * sizeof(*out));
		return SHOAL_E_NOMEM;
	}
	memcpy(sorted, keys, (size_t)n_keys * sizeof(*sorted));
	qsort(sorted, n_keys, sizeof(*sorted), by_part_hash);
	uint32_t n = 0;
	for (uint32_t k = 0; k < n_keys; k++) {
		const sh_plan_key_load *key = &sorted[k];
		uint32_t i = sh_map_part_of(m, key->table, key->hash);
		/* A key reported by a group that does not hold its partition
		 * (a report from before a cutover) says nothing of it. */
		if (i == SH_MAP_NONE || m->parts[i].group != key->group)
			continue;
		sh_plan_part_load *l = &out[i];
		if (l->n_samples > 0 && s[n - 1].hash == key->hash) {
			s[n - 1].units += key->units;
			continue;
		}
		if (l->n_samples == 0)
			l->samples = &s[n];
		s[n++] = (sh_plan_sample){.hash = key->hash, .units = key->units};
		l->n_samples++;
	}
	sh_free(sorted);
	if (n == 0) {
		sh_free(s);
		for (uint32_t i = 0; i < m->n_parts; i++)
			out[i].samples = NULL;
		return SHOAL_OK;
	}
	*samples = s;
	return SHOAL_OK;
}
