/*
 * tl_parts.h -- where a table's partitions are, from `shoal status --output
 * json` (MapPartitions, Groups) of a tl_cluster, for tests that move
 * partitions (it_pmove, it_pmove_chaos) and the move benchmark.
 *
 * A tl_parts names one table; it remembers the table's id, as status names
 * a table "" until the router's catalog knows it.  Failures go through
 * tl_fail.
 */
#ifndef SHOAL_TL_PARTS_H
#define SHOAL_TL_PARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/lib/tl_cluster.h"

typedef struct tl_parts {
	tl_cluster *c;
	char table[256];
	long long table_id; /* 0 until status named the table */
	bool gsi;           /* the GSI space (TableId 0) instead of a table */
} tl_parts;

typedef struct tl_part {
	uint64_t lo, hi;
	int group, moving; /* moving: the pending move's target, 0: none */
} tl_part;

void tl_parts_init(tl_parts *p, tl_cluster *c, const char *table);
/* The same for the GSI space: the index partitions of every GSI (TableId 0
 * in the map; the cluster file's placement until it enters it). */
void tl_parts_init_gsi(tl_parts *p, tl_cluster *c);
/* The partition holding hash h (false if the table has none in the map). */
bool tl_parts_of(tl_parts *p, uint64_t h, tl_part *out);
/* The table's partitions in hash order, up to cap; returns how many.  A
 * table the map has no partitions of (none of its partitions moved yet, or
 * the router's catalog does not name it yet) has the cluster file's
 * placement: partition i of D in data group i + 1. */
int tl_parts_list(tl_parts *p, tl_part *out, int cap);
/* How many partitions the map itself lists for the table (its id, learnt
 * by an earlier tl_parts_list), without the cluster file's fallback. */
int tl_parts_in_map(tl_parts *p);
/* The node leading group g (0: none known). */
int tl_parts_leader_of(tl_parts *p, int g);
/* The entries of index `index` of `table` stored in group g, as its
 * leader's row of ClusterStatus says (IndexStats.ItemCount); -1 when no
 * leader row names them. */
long long tl_parts_index_entries(tl_parts *p, int g, const char *table, const char *index);
/* Waits (polling every 50 ms) until hash h's partition is served by group
 * `to` with no move pending; the milliseconds it took.  Fails the test after
 * secs seconds. */
int64_t tl_parts_wait_served(tl_parts *p, uint64_t h, int to, int secs);
/* Runs `shoal <args>` and fails the test unless it exits 0. */
void tl_parts_admin(tl_parts *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
