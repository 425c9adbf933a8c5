/*
 * capacity_int.h -- what capacity.c (admission, charging) and
 * capacity_load.c (the tick, reports between nodes, status, metrics) share.
 * The rules are in capacity.h; the threads in capacity.c's header.
 */
#ifndef SHOAL_NODE_CAPACITY_INT_H
#define SHOAL_NODE_CAPACITY_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/clock.h"
#include "node/capacity.h"
#include "node/node.h"

typedef struct cap_part {
	uint32_t table_id;
	uint16_t index_id; /* 0: the base table (and its LSIs) */
	char table[ST_TABLE_NAME_MAX + 1];
	char index[ST_TABLE_NAME_MAX + 1];
	char hash_attr[256]; /* partition key attribute, for hot keys */
	bool provisioned;
	cap_limits lim[2];
	cap_bucket b[2];
	double total[2];       /* units since the node started */
	uint64_t thr_total[2]; /* throttled requests since the node started */
	double win[2];         /* since the last tick */
	uint64_t thr_win[2];
	double last[2]; /* the last tick's figures, per second */
	double thr_last[2];
	/* Of the throttled, those refused by a bucket at the partitions' limit
	 * (cap_at_partition_limit; not a GSI's backpressure): what a split for
	 * heat relieves.  An index partition refuses nothing: it counts the
	 * entries it applies in debt at that limit. */
	uint64_t thr_split_win[2];
	double thr_split_last[2];
	int64_t gsi_behind_until_ms; /* base: a GSI partition of the table is over */
	bool seen;
} cap_part;

typedef struct cap_group {
	pthread_mutex_t mu;
	cap_part *parts;
	uint32_t n, size;
	cap_sketch hot;
	bool leading;
	/* Set by node_cap_catalog_changed (any thread), taken by the tick,
	 * which then reads the group's catalog again; set at start. */
	atomic_bool catalog_changed;
} cap_group;

/* Another node's report of a partition it leads (node_handle_cap_report). */
typedef struct cap_remote {
	uint32_t gid, table_id;
	uint16_t index_id;
	double last[2];
	int64_t at_ms;
} cap_remote;

/* Reports older than this are not used (the sender stopped leading, or
 * stopped). */
#define CAP_REMOTE_FRESH_MS 3000
/* At most this many remembered (a peer's report is bounded by it too). */
#define CAP_REMOTE_MAX 16384

struct node_cap {
	node *n;
	uint32_t groups;
	cap_group **g;       /* [groups], hosted here or not */
	pthread_mutex_t rmu; /* remote */
	cap_remote *remote;
	uint32_t n_remote, size_remote;
	double part_max[2];
	double burst_secs;
	int64_t last_tick_ms;
	sh_arena scratch; /* the tick's */
};

/* The last second's consumption of every partition of this node's leading
 * groups, for adaptive capacity. */
typedef struct cap_use {
	uint32_t gid, table_id;
	uint16_t index_id;
	double last[2];
} cap_use;

extern const char *const cap_kind_name[2];

static inline int64_t cap_now_ms(void)
{
	return sh_now_ms();
}

/* The group's state, NULL when gid is not hosted here. */
cap_group *cap_group_of(node_cap *c, uint32_t gid);
/* The partition (table_id, index_id) of cg, or NULL.  Under cg->mu. */
cap_part *cap_find_id(cap_group *cg, uint32_t table_id, uint16_t index_id);

#endif
