/*
 * elastic_int.h -- what elastic.c (group 0's executor: rounds and steps)
 * and elastic_load.c (what the executor knows of the partitions' load)
 * share.  Prefix el_.
 *
 * The load book keeps, across rounds, what one round's node_status answers
 * cannot say alone: a window of the last EL_HEAT_WINDOW one-second samples
 * of each (group, table)'s units and throttled requests, and the hot keys
 * reported lately.  Not thread-safe: the executor calls it under its mutex.
 */
#ifndef SHOAL_NODE_ELASTIC_INT_H
#define SHOAL_NODE_ELASTIC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster.h"
#include "common/cluster_plan.h"
#include "node/capacity.h"
#include "node/node.h"
#include "storage/storage.h"

#define EL_HEAT_WINDOW    5    /* load samples averaged for heat splits */
#define EL_HEAT_SAMPLE_MS 1000 /* at most one sample a second per (group, table) */
#define EL_HEAT_MAX       256  /* (group, table) windows remembered */
#define EL_HOT_SEEN       64   /* hot keys whose report is remembered */
#define EL_HOT_QUIET_S    3600 /* one report per hot key an hour */
#define EL_HOT_SHOW_S     60   /* shown in status while found this lately */
/* A hot GSI key of more write shards than this is no sample: its load is
 * spread over as many partitions' hashes, each a small part of it. */
#define EL_KEY_SHARDS 64

/* A hot key's names as its group leader's sketch gave them (HotKey). */
typedef struct el_key_name {
	char table[ST_TABLE_NAME_MAX + 1];
	char index[ST_TABLE_NAME_MAX + 1]; /* "": a key of the table, else of this GSI */
	char key[CAP_HOT_KEY_MAX + 1];     /* DynamoDB JSON */
} el_key_name;

/* One group leader's figures (arrays sh_malloc'd, owned by the struct):
 * bytes, units and requests throttled at the partition limit of each table
 * in the group -- and of the GSI space (SH_MAP_GSI_SPACE: every GSI's
 * entries in the group) --, and its hot keys with their placement hashes
 * (a GSI key's: one per write shard, in the GSI space). */
typedef struct el_figures {
	sh_plan_table_load *tables;
	uint32_t n_tables;
	sh_plan_key_load *keys;
	el_key_name *names; /* parallel to keys */
	uint32_t n_keys;
} el_figures;

typedef struct el_book el_book;

/* The book with conf's thresholds ([cluster] split_*) and partition limits. */
int el_book_new(const sh_cluster_conf *conf, el_book **out, char *errmsg);
void el_book_free(el_book *b);

/* f (whose old arrays are freed) becomes the figures of gs, a group
 * leader's GroupStatus (read during the call only).  Out of memory leaves
 * f with fewer figures, never a dangling one. */
void el_figures_of(const Shoal__GroupStatus *gs, el_figures *f);
void el_figures_fini(el_figures *f);

/* The round's loads from figs (parallel to m->groups; empty for a group
 * whose leader is unknown): every (group, table) figure, its units and
 * throttled requests averaged over its window (this round a sample if the
 * last is a second old), in *tables (*n of them), and their shares of m's
 * partitions in *parts (parallel to m->parts; samples in *samples).  All
 * sh_malloc'd, the caller frees them (also on failure: SHOAL_E_NOMEM). */
int el_round_loads(el_book *b, const sh_map *m, const el_figures *figs, uint64_t now_ns,
                   sh_plan_table_load **tables, uint32_t *n, sh_plan_part_load **parts,
                   sh_plan_sample **samples);

/* A table not in m yet (placed statically) whose figure in a data group
 * passes a split threshold: the index into t of that figure, or -1. */
int el_table_to_add(const el_book *b, const sh_map *m, const sh_plan_table_load *t, uint32_t n);

/* conf's split thresholds. */
void el_plan_conf(const el_book *b, sh_plan_conf *conf);

/* A key carrying most of a partition's load (or size), which the planner
 * did not split: (table, hash) in the partition at `lo` of `group`, named
 * from fig (that group's leader's figures; NULL or not among them: no
 * names).  Remembered (EL_HOT_SEEN keys, the least recently found
 * forgotten first) for el_unsplit_list.  Whether to log it now: true once
 * per EL_HOT_QUIET_S for a key. */
bool el_hot_key_found(el_book *b, const el_figures *fig, uint32_t table, uint64_t hash,
                      uint32_t group, uint64_t lo, bool by_size, uint64_t now_ns);

/* One remembered unsplit key. */
typedef struct el_unsplit {
	el_key_name name; /* "" when not known */
	uint32_t table, group;
	uint64_t lo, hash;
	bool by_size;
	uint64_t first_ns, last_ns;
} el_unsplit;

/* The keys found in the last EL_HOT_SHOW_S seconds, at most max of them,
 * into out: how many. */
uint32_t el_unsplit_list(const el_book *b, uint64_t now_ns, el_unsplit *out, uint32_t max);

#endif
