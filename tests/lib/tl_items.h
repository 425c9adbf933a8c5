/*
 * tl_items.h -- a table of items with an exactly known state, for tests that
 * move data under load (it_pmove, it_pmove_chaos): a writer thread of puts,
 * overwrites and deletes through libshoal that keeps what it was
 * acknowledged, and the exact check of the table against it.
 *
 * The table (tl_items_create_table): pk S, sk N; LSI `byl` (pk, l) and GSI
 * `byg` (g, pk), both KEYS_ONLY; on demand.  Items are (pk "p<i>", sk n)
 * with attributes v (the value), l = v % 10 and g = "g<v % 7>":
 *   - preloaded: sk 0 .. pre_sks-1 of each of pks partition keys, v = sk
 *     (tl_items_preload, BatchWriteItem);
 *   - the writer's operation i: i % 5 == 1 deletes preloaded item
 *     (p<i % pks>, (i / pks) % pre_sks), i % 5 == 2 rewrites it with
 *     v = 100000 + i, otherwise it puts the new item (p<i % pks>, 1000 + i)
 *     with v = i; one at a time, ~every 2 ms (its retries are libshoal's).
 * An operation that fails makes its item uncertain: either outcome passes.
 *
 * The check (tl_items_check): for every partition key a ConsistentRead
 * Query (all pages) returns exactly the acknowledged items (none lost, none
 * returned twice, no deleted one back, every value the last acknowledged);
 * a Scan counts each item once (a source still serving a moved copy would
 * count it twice); the LSI holds one entry per item; the GSI converges
 * within 60 s to as many entries under each key g<k> as the items found
 * carry (a delta lost under one key and one applied twice under another do
 * not cancel out).  Failures go through tl_fail (the running
 * Check test fails).
 *
 * Threads: the writer runs on a thread of its own between writer_start and
 * writer_stop; everything else is called from one thread, with the writer
 * stopped for tl_items_check.  The client is the caller's (borrowed; it must
 * outlive the tl_items) and is shared with the writer (libshoal clients are
 * thread-safe).
 */
#ifndef SHOAL_TL_ITEMS_H
#define SHOAL_TL_ITEMS_H

#include <stdbool.h>
#include <stdint.h>

#include "client/shoal.h"

typedef struct tl_items tl_items;

/* Items of `table` (copied) through client c: pks partition keys of pre_sks
 * preloaded items each, at most max_ops writer operations in all; `tag`
 * (copied) starts every line printed.  NULL when out of memory. */
tl_items *tl_items_new(shoal_client *c, const char *table, int pks, int pre_sks, int max_ops,
                       const char *tag);
void tl_items_free(tl_items *t);

/* Before tl_items_create_table: the table gets a NEW_AND_OLD_IMAGES stream. */
void tl_items_with_stream(tl_items *t);
/* Creates the table (PAY_PER_REQUEST, the LSI and the GSI above). */
void tl_items_create_table(tl_items *t);
/* Writes the preloaded items. */
void tl_items_preload(tl_items *t);

/* Starts the writer (its worst latency and its failures are counted anew;
 * the operations go on from where the last run stopped). */
void tl_items_writer_start(tl_items *t);
/* Stops it and prints "<tag>: writer during <when>: N operations so far, F
 * failed, worst latency W ms[, first error ...]". */
void tl_items_writer_stop(tl_items *t, const char *when);
/* The writer's failed operations and worst latency (ms) since its start. */
int tl_items_failed(const tl_items *t);
int64_t tl_items_worst_ms(const tl_items *t);
/* The first failure's "Operation #i: Exception: message" ("" if none). */
const char *tl_items_first_error(const tl_items *t);
/* Operations done so far (all runs). */
int tl_items_ops(const tl_items *t);

/* The exact check above (the writer stopped); prints a line naming `when`. */
void tl_items_check(tl_items *t, const char *when);

/* The items the last tl_items_check found. */
long long tl_items_checked(const tl_items *t);
/* DescribeTable's ItemCount of the table. */
long long tl_items_described(tl_items *t);
/* ... and of its index "byl" (the LSI) or "byg" (the GSI). */
long long tl_items_described_index(tl_items *t, const char *index);

/* The stream check (the writer stopped; the table made with a stream): every
 * shard of DescribeStream (all pages) read from TRIM_HORIZON to its end,
 * parents before children, as a consumer following the lineage would; each
 * item's records must form one unbroken chain of images -- every record's
 * OldImage is the NewImage of the item's record before it (none before the
 * first), so a record lost, repeated or out of order across a split fails --
 * ending at the item's acknowledged state.  Prints a line naming `when`. */
void tl_items_stream_check(tl_items *t, const char *when);
/* Shards with a ParentShardId at the last stream check. */
int tl_items_stream_parents(const tl_items *t);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t tl_items_now_ms(void);

#endif
