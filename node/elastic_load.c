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
#include "node/capacity.h"
#include "node/elastic_int.h"
#include "proto/wire.h"

/* The last EL_HEAT_WINDOW samples of one (group, table)'s units and
 * throttled requests per second (a ring; missing samples count as 0). */
typedef struct heat_window {
	uint32_t group, table;
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

static sh_plan_table_load *table_of(const Shoal__GroupStatus *gs, el_figures *f, const char *name)
{
	for (size_t k = 0; k < gs->n_tables && k < f->n_tables; k++)
		if (gs->tables[k]->table_name != NULL &&
		    strcmp(gs->tables[k]->table_name, name) == 0)
			return &f->tables[k];
	return NULL;
}

/* The placement hash of a hot key as the leader's sketch names it (its
 * DynamoDB JSON).  false when it cannot be known: the sketch keeps only a
 * key's first CAP_HOT_RAW_MAX bytes (an S cut at a UTF-8 boundary, up to 3
 * bytes short of that), so a key that long may have been cut.  (A short
 * key whose JSON escapes overflow CAP_HOT_KEY_MAX is cut too and gets a
 * wrong hash: its sample lands in the wrong partition, or none.) */
static bool hot_key_hash(uint32_t table, const char *json, uint64_t *hash)
{
	json_t *j = NULL;
	sh_arena a;
	st_value v;
	bool ok = false;
	sh_arena_init(&a);
	if (json != NULL && wire_json_parse(json, strlen(json), &j, NULL) == SHOAL_OK &&
	    wire_value_from_json(&a, j, &v, NULL) == SHOAL_OK &&
	    (v.type == ST_S || v.type == ST_N || v.type == ST_B) &&
	    v.u.str.len + 3 < CAP_HOT_RAW_MAX) {
		*hash = st_key_hash(table, &v);
		ok = true;
	}
	if (j != NULL)
		json_decref(j);
	sh_arena_fini(&a);
	return ok;
}

/*
 * Each table's bytes in the group (TableStats: the leader's replica's), its
 * request units and the requests throttled at the partitions' limit
 * (PartitionLoad names a partition by (table, index) within the group: the
 * base table is index ""; throttling below that limit -- a provisioned
 * table at its provisioned rate, a base table held back for its GSI -- is no
 * reason to split, since a split raises neither), and its hot keys.
 */
void el_figures_of(const Shoal__GroupStatus *gs, el_figures *f)
{
	el_figures_fini(f);
	if (gs->n_tables > 0 && (f->tables = sh_calloc(gs->n_tables, sizeof(*f->tables))) == NULL)
		return;
	for (size_t k = 0; k < gs->n_tables; k++)
		f->tables[f->n_tables++] =
		    (sh_plan_table_load){.group = gs->group,
		                         .table = gs->tables[k]->table_number,
		                         .bytes = gs->tables[k]->size_bytes};
	for (size_t k = 0; k < gs->n_load; k++) {
		const Shoal__PartitionLoad *l = gs->load[k];
		if (l->table == NULL || (l->index != NULL && l->index[0] != '\0'))
			continue;
		sh_plan_table_load *t = table_of(gs, f, l->table);
		if (t == NULL)
			continue;
		t->units += l->read_units + l->write_units;
		t->throttled += (double)(l->read_throttled_at_limit + l->write_throttled_at_limit);
	}
	if (gs->n_hot_keys > 0 &&
	    ((f->keys = sh_calloc(gs->n_hot_keys, sizeof(*f->keys))) == NULL ||
	     (f->names = sh_calloc(gs->n_hot_keys, sizeof(*f->names))) == NULL)) {
		sh_free(f->keys);
		f->keys = NULL;
		return;
	}
	for (size_t k = 0; k < gs->n_hot_keys; k++) {
		const Shoal__HotKey *h = gs->hot_keys[k];
		const sh_plan_table_load *t;
		uint64_t hash;
		if (h->table == NULL || (h->index != NULL && h->index[0] != '\0') ||
		    (t = table_of(gs, f, h->table)) == NULL ||
		    !hot_key_hash(t->table, h->key, &hash))
			continue;
		el_key_name *nm = &f->names[f->n_keys];
		snprintf(nm->table, sizeof(nm->table), "%s", h->table);
		snprintf(nm->key, sizeof(nm->key), "%s", h->key != NULL ? h->key : "");
		f->keys[f->n_keys++] = (sh_plan_key_load){.group = gs->group,
		                                          .table = t->table,
		                                          .hash = hash,
		                                          .units = h->read_units + h->write_units};
	}
}

/* --- the round ---------------------------------------------------------------- */

/* Replaces t's units and throttled requests by their average over the last
 * EL_HEAT_WINDOW samples of (t->group, t->table), taking this one as a
 * sample if the last is a second old: the leader's figures are per second,
 * and a window of whole seconds makes one busy second weigh a fifth, so a
 * spike does not split.  A window begins all zero. */
static void heat_average(el_book *b, sh_plan_table_load *t, uint64_t now)
{
	heat_window *w = NULL, *oldest = &b->heat[0];
	for (uint32_t i = 0; i < EL_HEAT_MAX && w == NULL; i++) {
		if (b->heat[i].last_ns != 0 && b->heat[i].group == t->group &&
		    b->heat[i].table == t->table)
			w = &b->heat[i];
		else if (b->heat[i].last_ns < oldest->last_ns)
			oldest = &b->heat[i];
	}
	if (w == NULL) {
		w = oldest;
		memset(w, 0, sizeof(*w));
		w->group = t->group, w->table = t->table;
	}
	if (w->last_ns == 0 || now >= w->last_ns + EL_HEAT_SAMPLE_MS * 1000000ull * 9 / 10) {
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
			heat_average(b, &(*tables)[(*n)++], now_ns);
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
		if (t[k].table == 0 || !sh_map_is_data_group(m, t[k].group) ||
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
