/*
 * capacity.h -- capacity units enforced per partition (node/capacity.c).
 *
 * A partition is one table's (or one GSI's) share of one storage group:
 * every table has one partition per data group (common/cluster.h), and so
 * does every GSI (its index partitions).  Each partition has two token
 * buckets, reads and writes, kept by the replica that serves it (the
 * group's leader: routers send consistent and eventually consistent reads
 * there, and every write).
 *
 * The arithmetic (capacity_math.c), pure and with time passed in (tested in
 * tests/unit/test_buckets.c):
 *
 *   rate     a partition's share of its table's capacity: provisioned units
 *            (PROVISIONED) or the OnDemandThroughput maximum (PAY_PER_REQUEST)
 *            divided by the number of partitions, never above the partition
 *            limit (cluster.ini partition_rcu / partition_wcu, DynamoDB's
 *            3000 / 1000); a PAY_PER_REQUEST table without a maximum: the
 *            partition limit.
 *   adaptive a partition whose share is too small may use what the table's
 *            other partitions leave unused (table rate - their consumption),
 *            up to the partition limit (DynamoDB's adaptive capacity).  When
 *            the others' consumption is unknown they count as using their
 *            whole share, so adaptive capacity never lends what may be used.
 *   burst    unused tokens are kept up to `burst_secs` seconds of the share
 *            (DynamoDB: 300 s), at least one second of the rate.
 *   admit    a request is admitted while its bucket holds more than zero
 *            tokens; its real cost (known only once it ran: item sizes) is
 *            taken afterwards, so a bucket may go into debt, by at most one
 *            second of its rate.  A throttled request costs nothing.
 *
 * Hot keys: a Space-Saving sketch (Metwally et al. 2005) of CAP_HOT_SLOTS
 * counters per group, weighted by units, whose counters decay by half every
 * CAP_HOT_HALF_LIFE_S seconds; it names the partition keys that consume
 * most, with their units per second and throttled requests.
 */
#ifndef SHOAL_NODE_CAPACITY_H
#define SHOAL_NODE_CAPACITY_H

#include <stdbool.h>
#include <stdint.h>

#define CAP_READ  0
#define CAP_WRITE 1

typedef struct cap_bucket {
	double tokens; /* units available now; < 0: debt */
	double rate;   /* units per second */
	double max;    /* the most tokens kept */
	int64_t last_ms;
} cap_bucket;

/* A bucket refilling at `rate`, keeping `burst` units at most (raised to one
 * second of rate), starting with one second of rate. */
void cap_bucket_init(cap_bucket *b, double rate, double burst, int64_t now_ms);
/* Changes rate and burst, keeping the tokens (cut to the new maximum). */
void cap_bucket_set(cap_bucket *b, double rate, double burst, int64_t now_ms);
/* Adds the tokens earned since the last call. */
void cap_bucket_refill(cap_bucket *b, int64_t now_ms);
/* Whether a request may start now (tokens > 0 after refilling). */
bool cap_bucket_admit(cap_bucket *b, int64_t now_ms);
/* Takes `units` (may leave a debt of at most one second of rate). */
void cap_bucket_take(cap_bucket *b, double units, int64_t now_ms);

/* The limits of one group's share of a table or GSI: `held` partitions
 * covering `frac` of its hash space (a GSI, or a table placed statically:
 * one partition of D, frac 1/D; a table in the cluster map: its partitions
 * in the group, so that a split raises the limit as DynamoDB's does). */
typedef struct cap_limits {
	double table_rate; /* provisioned or on-demand maximum of the table/GSI; 0: none */
	double frac;       /* the share of the table's hash space here (0 < frac <= 1) */
	uint32_t held;     /* partitions here (>= 1) */
	double part_max;   /* the partition limit */
	double others;     /* units/s the other groups use; < 0: unknown */
} cap_limits;

/* The group's share: table_rate x frac, at most held x part_max (held x
 * part_max without a table rate). */
double cap_share(const cap_limits *l);
/* The rate with adaptive capacity: max(share, table_rate - others), at most
 * held x part_max; the share when others is unknown or there is no table
 * rate. */
double cap_adaptive_rate(const cap_limits *l);
/* Whether a bucket of `rate` is held down by the partitions' limit (held x
 * part_max), which a split raises -- not by the table's rate, which no split
 * changes. */
bool cap_at_partition_limit(const cap_limits *l, double rate);

/* ------------------------------------------------------------------------ */
/* Hot keys                                                                  */
/* ------------------------------------------------------------------------ */

#define CAP_HOT_SLOTS       32
#define CAP_HOT_KEY_MAX     128 /* bytes of a key's DynamoDB JSON, at most */
#define CAP_HOT_RAW_MAX     80  /* bytes of a key's value kept */
#define CAP_HOT_HALF_LIFE_S 5.0

typedef struct cap_hot {
	uint64_t id; /* 0: free slot; else hash of (table, index, key) */
	uint32_t table_id;
	uint16_t index_id;
	double count;       /* decayed units (Space-Saving's counter) */
	double win[2];      /* units since the last roll: read, write */
	double rate[2];     /* units per second (decaying average) */
	uint64_t throttled; /* requests throttled since it entered */
	/* the key's value (its first CAP_HOT_RAW_MAX bytes), rendered as JSON
	 * only when shown (cap_hot_json): a new key costs no formatting */
	char type; /* 'S', 'N', 'B' */
	uint8_t len;
	char raw[CAP_HOT_RAW_MAX];
} cap_hot;

typedef struct cap_sketch {
	cap_hot slot[CAP_HOT_SLOTS];
} cap_sketch;

/* Counts `units` of `kind` for key `id`: its slot, or the slot of the
 * smallest counter, taken over (*fresh true: the caller fills table_id,
 * index_id and key).  Never NULL. */
cap_hot *cap_sketch_add(cap_sketch *s, uint64_t id, int kind, double units, bool *fresh);
/* Closes a period of dt seconds: rates from the windows, counters decay. */
void cap_sketch_roll(cap_sketch *s, double dt);
/* Fills idx[0..] with up to max slot indexes, heaviest rate first; returns
 * how many. */
uint32_t cap_sketch_top(const cap_sketch *s, uint32_t *idx, uint32_t max);

/* Keeps a key's value in a fresh slot (cut to CAP_HOT_RAW_MAX bytes, never
 * inside a UTF-8 sequence of an S). */
void cap_hot_set_key(cap_hot *h, char type, const char *p, uint32_t len);
/* The slot's key as DynamoDB JSON into buf (CAP_HOT_KEY_MAX). */
void cap_hot_json(const cap_hot *h, char *buf, size_t size);

/* A key value as DynamoDB JSON ({"S":"..."}, {"N":"..."}, {"B":"<base64>"})
 * into buf (cut, still valid JSON, when it does not fit). `type` is 'S',
 * 'N' or 'B'. */
void cap_key_json(char type, const char *p, uint32_t len, char *buf, size_t size);

#endif
