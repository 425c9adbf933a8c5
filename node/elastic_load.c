/*
 * elastic_load.c -- what group 0's executor knows of the partitions' load
 * (contract in elastic_int.h): the group leaders' figures from node_status,
 * averaged over a window, shared among the map's partitions
 * (sh_plan_apportion), and the tables that must enter the map to be split.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/index.h"
#include "node/capacity.h"
#include "node/elastic_int.h"
#include "proto/wire.h"

/* The last EL_HEAT_WINDOW samples of one (group, table)'s units and
 * throttled requests per second (a ring; missing samples count as 0), since
 * the table's partitions in the group last changed in number. */
typedef struct heat_window {
	uint32_t group, table;
	uint32_t parts;   /* the map's partitions of the table in the group */
	uint64_t last_ns; /* the last sample; 0: a free slot */
	uint32_t next;
	double units[EL_HEAT_WINDOW], throttled[EL_HEAT_WINDOW];
} heat_window;

struct el_book {
	uint64_t split_bytes; /* 0: off */
	double split_units, split_throttled;
	heat_window heat[EL_HEAT_MAX];
	struct hot_seen {
		el_unsplit u;      /* u.last_ns 0: a free slot */
		uint64_t until_ns; /* logged again from then on */
	} hot_seen[EL_HOT_SEEN];
};

int el_book_new(const sh_cluster_conf *conf, el_book **out, char *errmsg)
{
	el_book *b = sh_calloc(1, sizeof(*b));
	*out = b;
	if (b == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "elastic: out of memory");
	b->split_bytes = sh_cluster_split_bytes(conf);
	b->split_units = (double)conf->split_units;
	b->split_throttled = (double)sh_cluster_split_throttled(conf);
	return SHOAL_OK;
}

void el_book_free(el_book *b)
{
	sh_free(b);
}

void el_plan_conf(const el_book *b, sh_plan_conf *conf)
{
	conf->split_bytes = b->split_bytes;
	conf->split_units = b->split_units;
	conf->split_throttled = b->split_throttled;
}

/* --- one leader's figures ---------------------------------------------------- */

void el_figures_fini(el_figures *f)
{
	sh_free(f->tables);
	sh_free(f->keys);
	sh_free(f->names);
	*f = (el_figures){0};
}

/* The index of table `name` among gs's TableStats, or -1. */
static int table_at(const Shoal__GroupStatus *gs, const char *name)
{
	for (size_t k = 0; k < gs->n_tables; k++)
		if (name != NULL && gs->tables[k]->table_name != NULL &&
		    strcmp(gs->tables[k]->table_name, name) == 0)
			return (int)k;
	return -1;
}

/* The GSI `name` of table stats ts, or NULL (an LSI, or not known). */
static const Shoal__IndexStats *gsi_of(const Shoal__TableStats *ts, const char *name)
{
	for (size_t k = 0; name != NULL && k < ts->n_indexes; k++)
		if (!ts->indexes[k]->local && ts->indexes[k]->index_name != NULL &&
		    strcmp(ts->indexes[k]->index_name, name) == 0)
			return ts->indexes[k];
	return NULL;
}

/* The placement hashes of a hot key as the leader's sketch names it (its
 * DynamoDB JSON), of table `table` (ix NULL) or of its GSI ix: a GSI
 * key's entries spread over its index's write shards, one hash each
 * (st_index_hash).  Into out[0 .. cap-1]; how many (0 when they cannot be
 * known, or more than cap).  The sketch keeps only a key's first
 * CAP_HOT_RAW_MAX bytes (an S cut at a UTF-8 boundary, up to 3 bytes short
 * of that), so a key that long may have been cut.  (A short key whose
 * JSON escapes overflow CAP_HOT_KEY_MAX is cut too and gets a wrong hash:
 * its sample lands in the wrong partition, or none.) */
static uint32_t hot_key_hashes(uint32_t table, const Shoal__IndexStats *ix, const char *json,
                               uint64_t *out, uint32_t cap)
{
	json_t *j = NULL;
	sh_arena a;
	st_value v;
	uint32_t n = 0, shards = ix == NULL ? 1 : ix->write_shards > 0 ? ix->write_shards : 1;
	sh_arena_init(&a);
	if (shards <= cap && json != NULL &&
	    wire_json_parse(json, strlen(json), &j, NULL) == SHOAL_OK &&
	    wire_value_from_json(&a, j, &v, NULL) == SHOAL_OK &&
	    (v.type == ST_S || v.type == ST_N || v.type == ST_B) &&
	    v.u.str.len + 3 < CAP_HOT_RAW_MAX) {
		for (n = 0; n < shards; n++)
			out[n] = ix == NULL ? st_key_hash(table, &v)
			                    : st_index_hash(table, (uint16_t)ix->index_id, n, &v);
	}
	if (j != NULL)
		json_decref(j);
	sh_arena_fini(&a);
	return n;
}

/*
 * Each table's bytes in the group (TableStats: the leader's replica's), its
 * request units and the requests throttled at the partitions' limit
 * (PartitionLoad names a partition by (table, index) within the group: the
 * base table is index ""; throttling below that limit -- a provisioned
 * table at its provisioned rate, a base table held back for its GSI -- is no
 * reason to split, since a split raises neither), and its hot keys.
 *
 * The GSI space ("table" SH_MAP_GSI_SPACE) is one more figure, last, when
 * the group holds a GSI: the bytes of every GSI's entries here (IndexStats;
 * an LSI's entries live with their base items, counted in the table's
 * partitions' moves, not here), the units and throttled requests of every
 * index partition (only GSIs have their own), and each hot GSI key as one
 * sample per write shard carrying its share of the key's units (a key is
 * spread over its shards by the base keys' hash).
 */
void el_figures_of(const Shoal__GroupStatus *gs, el_figures *f)
{
	el_figures_fini(f);
	if ((f->tables = sh_calloc(gs->n_tables + 1, sizeof(*f->tables))) == NULL)
		return;
	sh_plan_table_load gsi = {.group = gs->group, .table = SH_MAP_GSI_SPACE};
	bool has_gsi = false;
	for (size_t k = 0; k < gs->n_tables; k++) {
		const Shoal__TableStats *ts = gs->tables[k];
		f->tables[f->n_tables++] = (sh_plan_table_load){
		    .group = gs->group, .table = ts->table_number, .bytes = ts->size_bytes};
		for (size_t x = 0; x < ts->n_indexes; x++)
			if (!ts->indexes[x]->local) {
				has_gsi = true;
				gsi.bytes += ts->indexes[x]->size_bytes;
			}
	}
	for (size_t k = 0; k < gs->n_load; k++) {
		const Shoal__PartitionLoad *l = gs->load[k];
		int t = table_at(gs, l->table);
		if (t < 0)
			continue;
		sh_plan_table_load *to =
		    l->index != NULL && l->index[0] != '\0' ? &gsi : &f->tables[t];
		to->units += l->read_units + l->write_units;
		to->throttled += (double)(l->read_throttled_at_limit + l->write_throttled_at_limit);
	}
	if (has_gsi)
		f->tables[f->n_tables++] = gsi;
	/* Room for the hot keys' samples: one each, a GSI's one per write shard
	 * (none past EL_KEY_SHARDS). */
	size_t room = 0;
	for (size_t k = 0; k < gs->n_hot_keys; k++) {
		const Shoal__HotKey *h = gs->hot_keys[k];
		int t = table_at(gs, h->table);
		const Shoal__IndexStats *ix = t >= 0 && h->index != NULL && h->index[0] != '\0'
		                                  ? gsi_of(gs->tables[t], h->index)
		                                  : NULL;
		room += ix == NULL                          ? 1
		        : ix->write_shards <= EL_KEY_SHARDS ? ix->write_shards + 1
		                                            : 0;
	}
	if (room > 0 && ((f->keys = sh_calloc(room, sizeof(*f->keys))) == NULL ||
	                 (f->names = sh_calloc(room, sizeof(*f->names))) == NULL)) {
		sh_free(f->keys);
		f->keys = NULL;
		return;
	}
	for (size_t k = 0; k < gs->n_hot_keys; k++) {
		const Shoal__HotKey *h = gs->hot_keys[k];
		int t = table_at(gs, h->table);
		if (t < 0)
			continue;
		const Shoal__TableStats *ts = gs->tables[t];
		bool of_gsi = h->index != NULL && h->index[0] != '\0';
		const Shoal__IndexStats *ix = of_gsi ? gsi_of(ts, h->index) : NULL;
		uint64_t hash[EL_KEY_SHARDS];
		uint32_t n = of_gsi && ix == NULL ? 0
		                                  : hot_key_hashes(ts->table_number, ix, h->key,
		                                                   hash, EL_KEY_SHARDS);
		for (uint32_t s = 0; s < n; s++) {
			el_key_name *nm = &f->names[f->n_keys];
			snprintf(nm->table, sizeof(nm->table), "%s", h->table);
			snprintf(nm->index, sizeof(nm->index), "%s", of_gsi ? h->index : "");
			snprintf(nm->key, sizeof(nm->key), "%s", h->key != NULL ? h->key : "");
			f->keys[f->n_keys++] = (sh_plan_key_load){
			    .group = gs->group,
			    .table = of_gsi ? SH_MAP_GSI_SPACE : ts->table_number,
			    .hash = hash[s],
			    .units = (h->read_units + h->write_units) / n};
		}
	}
}

/* --- the round ---------------------------------------------------------------- */

/* Replaces t's units and throttled requests by their average over the last
 * EL_HEAT_WINDOW samples of (t->group, t->table), taking this one as a
 * sample if the last is a second old: the leader's figures are per second,
 * and a window of whole seconds makes one busy second weigh a fifth, so a
 * spike does not split.  A window begins all zero -- also when the table's
 * partitions in the group (`parts`, from the map) have changed in number
 * since the last sample: a split in place raises the group's limits at
 * once, and the seconds before it would go on splitting its halves (a
 * GSI space throttled over its limit went from 3 partitions to 14 in 8 s,
 * one split a round, it_autosplit) -- and its first sample is the next
 * second's, not the figures at hand (reported before the change: with them
 * the halves split again within milliseconds, 3 -> 10 partitions in 4 s).
 * Entering the map (no partition in it before) keeps the window. */
static void heat_average(el_book *b, sh_plan_table_load *t, uint32_t parts, uint64_t now)
{
	heat_window *w = NULL, *oldest = &b->heat[0];
	for (uint32_t i = 0; i < EL_HEAT_MAX && w == NULL; i++) {
		if (b->heat[i].last_ns != 0 && b->heat[i].group == t->group &&
		    b->heat[i].table == t->table)
			w = &b->heat[i];
		else if (b->heat[i].last_ns < oldest->last_ns)
			oldest = &b->heat[i];
	}
	bool changed = w != NULL && w->parts != 0 && w->parts != parts;
	if (w == NULL || changed) {
		if (w == NULL)
			w = oldest;
		memset(w, 0, sizeof(*w));
		w->group = t->group, w->table = t->table;
	}
	w->parts = parts;
	if (changed) {
		/* The figures at hand were reported before the change (the
		 * rounds after a split follow it within milliseconds, with the
		 * same reports): the first sample is the next second's. */
		w->last_ns = now;
	} else if (w->last_ns == 0 || now >= w->last_ns + EL_HEAT_SAMPLE_MS * 1000000ull * 9 / 10) {
		w->units[w->next] = t->units;
		w->throttled[w->next] = t->throttled;
		w->next = (w->next + 1) % EL_HEAT_WINDOW;
		w->last_ns = now;
	}
	double u = 0, th = 0;
	for (uint32_t i = 0; i < EL_HEAT_WINDOW; i++)
		u += w->units[i], th += w->throttled[i];
	t->units = u / EL_HEAT_WINDOW;
	t->throttled = th / EL_HEAT_WINDOW;
}

/* The map's partitions of table t in group g (0: the table is not in it). */
static uint32_t parts_in(const sh_map *m, uint32_t t, uint32_t g)
{
	uint32_t n = 0;
	for (uint32_t i = sh_map_part_of(m, t, 0);
	     i != SH_MAP_NONE && i < m->n_parts && m->parts[i].table == t; i++)
		n += m->parts[i].group == g;
	return n;
}

int el_round_loads(el_book *b, const sh_map *m, const el_figures *figs, uint64_t now_ns,
                   sh_plan_table_load **tables, uint32_t *n, sh_plan_part_load **parts,
                   sh_plan_sample **samples)
{
	uint32_t nt = 0, nk = 0;
	for (uint32_t gi = 0; gi < m->n_groups; gi++)
		nt += figs[gi].n_tables, nk += figs[gi].n_keys;
	*tables = sh_calloc(nt + 1, sizeof(**tables));
	sh_plan_key_load *keys = sh_calloc(nk + 1, sizeof(*keys));
	*parts = sh_calloc(m->n_parts + 1, sizeof(**parts));
	*samples = NULL;
	*n = 0;
	if (*tables == NULL || keys == NULL || *parts == NULL) {
		sh_free(keys);
		return SHOAL_E_NOMEM;
	}
	nk = 0;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		const el_figures *f = &figs[gi];
		for (uint32_t k = 0; k < f->n_tables; k++) {
			(*tables)[*n] = f->tables[k];
			heat_average(b, &(*tables)[*n],
			             parts_in(m, f->tables[k].table, f->tables[k].group), now_ns);
			(*n)++;
		}
		if (f->n_keys > 0)
			memcpy(keys + nk, f->keys, f->n_keys * sizeof(*keys));
		nk += f->n_keys;
	}
	int rc = sh_plan_apportion(m, *tables, *n, keys, nk, *parts, samples);
	sh_free(keys);
	return rc;
}

int el_table_to_add(const el_book *b, const sh_map *m, const sh_plan_table_load *t, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		if (!sh_map_is_data_group(m, t[k].group) ||
		    sh_map_part_of(m, t[k].table, 0) != SH_MAP_NONE)
			continue;
		if ((b->split_bytes != 0 && t[k].bytes > b->split_bytes) ||
		    (b->split_units > 0 && t[k].units > b->split_units) ||
		    (b->split_throttled > 0 && t[k].throttled > b->split_throttled))
			return (int)k;
	}
	return -1;
}

bool el_hot_key_found(el_book *b, const el_figures *fig, uint32_t table, uint64_t hash,
                      uint32_t group, uint64_t lo, bool by_size, uint64_t now_ns)
{
	struct hot_seen *seen = NULL, *oldest = &b->hot_seen[0];
	for (uint32_t i = 0; i < EL_HOT_SEEN && seen == NULL; i++) {
		struct hot_seen *h = &b->hot_seen[i];
		if (h->u.last_ns != 0 && h->u.table == table && h->u.hash == hash)
			seen = h;
		else if (h->u.last_ns < oldest->u.last_ns)
			oldest = h;
	}
	if (seen == NULL) {
		seen = oldest;
		*seen = (struct hot_seen){.u = {.table = table, .hash = hash, .first_ns = now_ns}};
	}
	seen->u.group = group, seen->u.lo = lo, seen->u.by_size = by_size;
	seen->u.last_ns = now_ns;
	for (uint32_t k = 0; fig != NULL && k < fig->n_keys; k++)
		if (fig->keys[k].table == table && fig->keys[k].hash == hash)
			seen->u.name = fig->names[k];
	if (now_ns < seen->until_ns)
		return false;
	seen->until_ns = now_ns + EL_HOT_QUIET_S * 1000000000ull;
	return true;
}

uint32_t el_unsplit_list(const el_book *b, uint64_t now_ns, el_unsplit *out, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < EL_HOT_SEEN && n < max; i++) {
		const el_unsplit *u = &b->hot_seen[i].u;
		if (u->last_ns != 0 && now_ns < u->last_ns + EL_HOT_SHOW_S * 1000000000ull)
			out[n++] = *u;
	}
	return n;
}
