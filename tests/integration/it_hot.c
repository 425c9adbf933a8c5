/*
 * it_hot -- the hot-partition load tests (issue 13): a real cluster of 3
 * nodes, 1 router and 4 groups (3 data partitions per table and per GSI),
 * started by deploy/cluster.sh with small per-partition limits
 * (--partition-wcu PART_WCU --partition-rcu PART_RCU --burst-secs BURST_SECS;
 * --split-throttled 0: no split for heat)
 * so that the whole test fits a busy 2-core machine.  One run, one cluster,
 * six phases of HOT_SECS seconds each (default 6 here, as `make test` runs
 * it; `make hot` runs 60), with the same background load in every phase:
 *
 *   background  uniform PutItem and GetItem (ConsistentRead: at the group
 *               leader, where capacity is enforced) over BG_KEYS keys of table
 *               "hot", BG_WRITES + BG_READS per second: a quarter of each
 *               partition's limits.  Counted per partition, so that the keys
 *               sharing the hot key's partition are told from the others.
 *   baseline    the background alone: the reference throughput and latency.
 *   hot-key     + PutItem of one partition key ("hot", sort keys varying)
 *               at HOT_FACTOR x the partition's write limit.
 *   hot-key-prov  the same hot key in table "prov", PROVISIONED with
 *               PROV_WCU (a share of half the partition limit per
 *               partition) and otherwise idle: adaptive capacity may lend
 *               the hot partition the table's unused units, up to the
 *               partition limit.
 *   hot-query   + Query of one item collection ("coll", COLL_ITEMS items,
 *               ConsistentRead) at HOT_FACTOR x the partition's read limit
 *               (in queries: the units one query costs are probed first,
 *               with ReturnConsumedCapacity).
 *   gsi-1       + PutItem of new students to table "students" (seed 002's
 *               overloaded GSI: GSI1PK = "STUDENT" for every item) at GSI_RATE
 *               per second: each base partition gets a third of it, the one
 *               index partition all of it, more than its limit.
 *   gsi-10      the same load on "students10", whose GSI has WriteShards 10
 *               (made again under another name until its shards' placement
 *               puts at most half of the entries on one index partition).
 *
 * After each phase but the last, the background runs alone for a few
 * seconds (max(BURST_SECS + 2, HOT_SECS / 6)): a partition a hot phase
 * drained recovers before the next phase, and the background's latency
 * there is a reference taken under the machine's conditions of the moment.
 *
 * The load (tests/lib/tl_load.h) is open loop: each class is offered at a
 * fixed rate whatever the answers; latencies count from when a request was
 * due.  libshoal's retries are off, throttle_retries too (raw behaviour).
 * A thread scrapes every node's metrics endpoint once a second
 * (shoal_partition_consumed_units_total, shoal_partition_throttled_total,
 * shoal_partition_limit_units, shoal_hot_key_units) and reads RssAnon,
 * VmRSS and CPU time of the router and the nodes from /proc (pids from the
 * cluster's pid files), and the machine's CPU time (tests/lib/tl_metrics.h).
 *
 * Assertions, with their tolerances and why:
 *   - nothing fails but throttling: every request of every class in every
 *     phase is answered OK or ProvisionedThroughputExceededException; none
 *     is refused by the generator (MAX_INFLIGHT unanswered) or lost (no
 *     answer TL_LOAD_DRAIN_MS after its phase).  Exact.
 *   - baseline: no background request is throttled (the background uses a
 *     quarter of each limit).  Exact.
 *   - hot key / hot collection held near the limit: its admitted requests
 *     over the phase are at most (HOT_SECS + BURST_SECS) x limit x
 *     (1 + HI_TOL) + SLACK_REQS (the bucket starts full: BURST_SECS of
 *     capacity; HI_TOL = 0.15 for a token bucket refilled continuously but
 *     observed through 1-s windows of answers) and at least LO_TOL = 0.5 x
 *     HOT_SECS x limit (held *near* it: the partition keeps serving the
 *     key, minus what its neighbours in the partition take -- a twelfth of
 *     the limit here); at least MIN_THR = 0.7 of its requests are throttled
 *     (offered 10x: ~0.9 expected).  With adaptive capacity a partition may
 *     not exceed the partition limit either, so the upper bound holds.
 *   - adaptive capacity (hot-key-prov): the lower bound is LO_TOL x the
 *     partition's share (PROV_WCU / 3), and over the second half of the phase
 *     (the burst long spent) the hot key is admitted at least ADAPT_MIN = 1.3
 *     x its share per second: the table's other partitions are idle, so
 *     DynamoDB's adaptive capacity lets it reach the partition limit (2 x
 *     the share here); 1.3 leaves room for a controller that converges over
 *     seconds and for 1-s measurement windows, and fails without it (<= 1.0
 *     x the share once the burst is spent).
 *   - every other key keeps its throughput and latency: background keys in
 *     the other partitions have no throttles, their p50 latency is at most
 *     P50_FACTOR (3) x their baseline p50 + 2 ms, and their p99 at most
 *     P99_FACTOR (3) x a reference p99 + P99_SLACK_MS (5 ms; in runs shorter
 *     than 30 s a phase SHORT_P99_SLACK_MS, 50 ms: a CI run failed 25 ms
 *     against 3 x 3.3 + 5 with the machine 66% busy) -- p99 taken
 *     per window (1 s in runs shorter than 30 s a phase, else 5 s) and the
 *     median window's compared; whole-phase p99s are printed beside.  The
 *     reference is the largest of the baseline's and of the background-only
 *     seconds just before and just after the phase.  The
 *     factors are generous on purpose: the hot key's rejected requests
 *     still cost the router and the leader CPU on a 2-core machine shared
 *     with other builds.  The windows are measured necessity: on the busy
 *     2-core VM every phase, the baseline included, had stalls of the whole
 *     machine (slowest background answer 40-280 ms, printed per phase; one
 *     60-s hot-key run had 10 s of them), and a stall of a second or more
 *     IS a phase's p99 -- that phase, with no stall in its baseline, failed
 *     143 ms against 5.5.  A stall spoils a few windows; a hot key that
 *     slows the other keys spoils all of them.  The machine's busy share and
 *     the cores the cluster and the load used are printed per phase.  Keys that share the hot key's
 *     partition share its token bucket (Shoal throttles per partition, and
 *     does not split a partition whose load is one key): their figures are printed,
 *     not asserted, except that in the hot-query phase the background
 *     WRITES of the hot partition are never throttled (reads and writes have
 *     separate buckets).
 *   - the hot key shows in shoal_hot_key_units ({"S":"hot"} for writes,
 *     {"S":"coll"} for reads) in some scrape during its phase.
 *   - no queue grows: throttled answers come at once -- their p50 is at most
 *     the background's ok p50 in the same phase + 1 ms (a request that
 *     waited in a queue before its refusal would be slower than one served);
 *     and for the router and every node, RssAnon at the end of each load
 *     phase is at most RSS_SLACK_MB (8 MiB) + RSS_PER_WRITE_KB (1 KiB) per
 *     write admitted in the phase (index entries counted) above its value
 *     one second into the phase.  RssAnon grows with the writes, hot key or
 *     not: raft keeps its recent log in memory until a snapshot (measured in
 *     60-s phases: ~0.35-0.6 KiB per admitted write on every node, 5 MiB a
 *     minute in the baseline, 18 in gsi-10, which writes 3x more), while a
 *     queue of the hot key's refused requests (1800/s, >= 0.5 KiB each)
 *     would add >= 50 MiB a minute without a write.  A 6-s phase is too
 *     short for the memory check to see such a queue (~5 MiB); the latency of
 *     the refusals still does.  VmRSS is printed too; it includes LMDB's
 *     mapped pages, which grow with the data.
 *   In AddressSanitizer builds memory and latency are printed, not judged
 *   (see SANITIZED below: measured +10-60 MiB of quarantine a 4-s phase, and
 *   a background p99 of 25 ms against 3 with the processes instrumented).
 *   - seed 002's pitfall: in gsi-1, at least GSI_MIN_THR (0.15) of the base
 *     writes are throttled over the seconds after the burst (expected
 *     1 - PART_WCU / GSI_RATE, 0.42 at 347/s: the index partition gets
 *     GSI_RATE entries a second for its PART_WCU); in gsi-10, at most
 *     GSI_MAX_THR (0.01).  GSI_RATE is chosen from the shards' placement
 *     (computed as the nodes do: st_index_shard, st_index_hash) so that the
 *     busiest index partition of the sharded GSI gets <= 0.7 of its limit.
 *     The background (table "hot") is not throttled in either: a GSI throttles
 *     its own base table only.  Nor in hot-key-prov (another table).
 *
 * Output: a table of the figures on stdout, and in HOT_OUT (default
 * <build>/hot-test; `make hot` sets <build>/hot): partitions.csv (per second,
 * per partition: units consumed, requests throttled, limit), client.csv (per
 * second: the background's and each phase's hot class's ok and throttled
 * answers), rss.csv, and hot.png drawn by gnuplot (if installed; the
 * assertions do not depend on it).  The cluster directory is printed;
 * SHOAL_KEEP_CLUSTER=1 keeps it.  Keys are fixed; the background's key
 * choice is seeded (SHOAL_SEED, printed).
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "common/arena.h"
#include "common/cluster.h"
#include "storage/index.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_hist.h"
#include "tests/lib/tl_load.h"
#include "tests/lib/tl_metrics.h"

#define NODES        3
#define GROUPS       4
#define PARTS        (GROUPS - 1)
#define PART_WCU     200
#define PART_RCU     200
#define BURST_SECS   2
#define BG_KEYS      3000
#define BG_WRITES    150 /* per second, all partitions: 50 WCU each */
#define BG_READS     150
#define HOT_FACTOR   10
#define COLL_ITEMS   10
#define DEFAULT_SECS 6
#define MAX_INFLIGHT 4096

/* Tolerances (see the header). */
#define HI_TOL       0.15
#define SLACK_REQS   50
#define LO_TOL       0.5
#define MIN_THR      0.7
#define P99_FACTOR   3.0
#define P99_SLACK_MS 5.0
/* Runs shorter than 30 s a phase (`make test`'s) judge 1-s windows, where
 * one scheduler stall of the shared machine moves the median: they only
 * catch what a queue behind the hot key would do (hundreds of ms). */
#define SHORT_P99_SLACK_MS 50.0
#define MAX_WINDOWS        1200
#define P50_FACTOR         3.0
#define P50_SLACK_MS       2.0
/* In an AddressSanitizer build (SANITIZE=address,...) memory and latency are
 * printed, not judged: its quarantine keeps freed memory (up to 256 MiB, so
 * RssAnon grows whatever the code does), and the instrumented processes are
 * 2-3x slower, so this load saturates two cores and the other keys' latency
 * measures the instrumentation.  Everything else is judged as usual. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define RSS_SLACK_MB     8.0
#define RSS_PER_WRITE_KB 1.0
#define GSI_MIN_THR      0.15
#define GSI_MAX_THR      0.01
#define GSI_SHARDS       10
#define PROV_WCU         (PARTS * PART_WCU / 2) /* table "prov": half a partition limit each */
#define ADAPT_MIN        1.3

enum { PH_BASE, PH_HOTKEY, PH_PROV, PH_HOTQUERY, PH_GSI1, PH_GSI10, PH__COUNT };
static const char *const phase_names[PH__COUNT] = {"baseline",  "hot-key", "hot-key-prov",
                                                   "hot-query", "gsi-1",   "gsi-10"};
/* The stats of a phase: 0..5 background (partition p: 2p writes, 2p+1
 * reads), 6 the phase's hot class. */
#define ST_HOT  (2 * PARTS)
#define N_STATS (2 * PARTS + 1)

static tl_cluster C;
static shoal_client *cli;
static sh_cluster_conf conf;
static double secs;
static uint64_t origin;
static char outdir[1100];
static uint64_t rng;

static int bg_part[BG_KEYS];
static int hot_part, coll_part;
static uint32_t hot_table_id;
static double units_put = 1, units_query = 1;
static double gsi_rate;
static char students10[32]; /* the sharded table (see the test) */
static tl_load_stat stats[PH__COUNT][N_STATS];
static int ph_start[PH__COUNT], ph_end[PH__COUNT]; /* seconds since origin */
/* the hot class's offered rate, and the partition's limit and share (its part of the
 * table's provisioned capacity; the limit when on demand), in requests per second */
static double hot_offered[PH__COUNT], hot_limit[PH__COUNT], hot_share[PH__COUNT];

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static char value[256]; /* ~200 B payload: every write is one WCU */

static int build_bg_write(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	unsigned k = (unsigned)(tl_rand(&rng) % BG_KEYS);
	*op = "PutItem";
	snprintf(json, cap,
	         "{\"TableName\":\"hot\",\"Item\":{\"PK\":{\"S\":\"k%u\"},\"SK\":{\"S\":\"0\"},"
	         "\"v\":{\"S\":\"%s\"}}}",
	         k, value);
	return 2 * bg_part[k];
}

static int build_bg_read(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	unsigned k = (unsigned)(tl_rand(&rng) % BG_KEYS);
	*op = "GetItem";
	snprintf(json, cap,
	         "{\"TableName\":\"hot\",\"Key\":{\"PK\":{\"S\":\"k%u\"},\"SK\":{\"S\":\"0\"}},"
	         "\"ConsistentRead\":true}",
	         k);
	return 2 * bg_part[k] + 1;
}

static int build_hot_write(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	*op = "PutItem";
	snprintf(json, cap,
	         "{\"TableName\":\"hot\",\"Item\":{\"PK\":{\"S\":\"hot\"},\"SK\":{\"S\":\"%03u\"},"
	         "\"v\":{\"S\":\"%s\"}}}",
	         (unsigned)(n % 100), value);
	return ST_HOT;
}

static int build_prov_write(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	*op = "PutItem";
	snprintf(json, cap,
	         "{\"TableName\":\"prov\",\"Item\":{\"PK\":{\"S\":\"hot\"},\"SK\":{\"S\":\"%03u\"},"
	         "\"v\":{\"S\":\"%s\"}}}",
	         (unsigned)(n % 100), value);
	return ST_HOT;
}

static const char coll_query[] = "{\"TableName\":\"hot\",\"KeyConditionExpression\":\"PK = :pk\","
                                 "\"ExpressionAttributeValues\":{\":pk\":{\"S\":\"coll\"}},"
                                 "\"ConsistentRead\":true}";

static int build_hot_query(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	*op = "Query";
	snprintf(json, cap, "%s", coll_query);
	return ST_HOT;
}

/* Student n of table `arg`: seed 002's overloaded GSI, GSI1PK = "STUDENT". */
static void student_json(const char *table, uint64_t n, char *json, size_t cap)
{
	snprintf(json, cap,
	         "{\"TableName\":\"%s\",\"Item\":{\"PK\":{\"S\":\"STUDENT#s%llu\"},"
	         "\"SK\":{\"S\":\"PROFILE\"},\"GSI1PK\":{\"S\":\"STUDENT\"},"
	         "\"GSI1SK\":{\"S\":\"2024-09-01#%08llu\"},\"name\":{\"S\":\"%.100s\"}}}",
	         table, (unsigned long long)n, (unsigned long long)n, value);
}

static int build_student(void *arg, uint64_t n, const char **op, char *json, size_t cap)
{
	*op = "PutItem";
	student_json(arg, n, json, cap);
	return ST_HOT;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

static json_t *call(const char *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A blocking call that must succeed; its answer parsed. */
static json_t *call(const char *op, const char *fmt, ...)
{
	char body[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(cli, op, body, &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "%s %s: %s: %s", op, body, err.exception, err.message);
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	ck_assert_msg(j != NULL, "%s: unparsable answer", op);
	return j;
}

static void create_students(const char *name, unsigned shards)
{
	char extra[64] = "";
	if (shards > 1)
		snprintf(extra, sizeof(extra), ",\"WriteShards\":%u", shards);
	json_decref(call("CreateTable",
	                 "{\"TableName\":\"%s\",\"AttributeDefinitions\":["
	                 "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
	                 "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"},"
	                 "{\"AttributeName\":\"GSI1PK\",\"AttributeType\":\"S\"},"
	                 "{\"AttributeName\":\"GSI1SK\",\"AttributeType\":\"S\"}],"
	                 "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
	                 "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
	                 "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"GSI1\",\"KeySchema\":["
	                 "{\"AttributeName\":\"GSI1PK\",\"KeyType\":\"HASH\"},"
	                 "{\"AttributeName\":\"GSI1SK\",\"KeyType\":\"RANGE\"}],"
	                 "\"Projection\":{\"ProjectionType\":\"ALL\"}%s}],"
	                 "\"BillingMode\":\"PAY_PER_REQUEST\"}",
	                 name, extra));
}

static uint32_t table_id(const char *name)
{
	json_t *j = call("DescribeTable", "{\"TableName\":\"%s\"}", name);
	json_t *t = json_object_get(j, "Table");
	const char *st = json_string_value(json_object_get(t, "TableStatus"));
	ck_assert_msg(st != NULL && strcmp(st, "ACTIVE") == 0, "table %s is %s", name,
	              st ? st : "?");
	json_decref(j);
	uint32_t v = tl_table_number(cli, name);
	ck_assert_msg(v > 0, "ClusterStatus gave no TableNumber for %s", name);
	return v;
}

static int part_of_s(uint32_t table, const char *pk)
{
	sh_arena a;
	sh_arena_init(&a);
	st_value *v = st_new_s(&a, pk);
	ck_assert(v != NULL);
	int p = (int)sh_cluster_partition_of(&conf, st_key_hash(table, v));
	sh_arena_fini(&a);
	return p;
}

/* The index partition of student n's GSI1 entry in a table whose GSI1
 * (index id 1: the only index) has `shards` write shards. */
static int student_index_part(uint32_t table, uint64_t n, unsigned shards)
{
	sh_arena a;
	sh_arena_init(&a);
	char pk[64];
	snprintf(pk, sizeof(pk), "STUDENT#s%llu", (unsigned long long)n);
	st_value *bpk = st_new_s(&a, pk), *bsk = st_new_s(&a, "PROFILE"),
	         *gpk = st_new_s(&a, "STUDENT");
	ck_assert(bpk != NULL && bsk != NULL && gpk != NULL);
	uint32_t shard = st_index_shard(table, bpk, bsk, shards);
	int p = (int)sh_cluster_partition_of(&conf, st_index_hash(table, 1, shard, gpk));
	sh_arena_fini(&a);
	return p;
}

/* Prints which node leads each group (capacity is enforced there, and
 * node/capacity.c lends adaptive capacity only with the table's other
 * partitions led by the same node). */
static void print_leaders(const char *when)
{
	json_t *j = call("ClusterStatus", "{}");
	size_t i;
	json_t *v;
	printf("leaders %s:", when);
	json_array_foreach(json_object_get(j, "Groups"), i, v)
	{
		const char *role = json_string_value(json_object_get(v, "Role"));
		if (role != NULL && strcmp(role, "leader") == 0)
			printf(" group %lld on node %lld",
			       (long long)json_number_value(json_object_get(v, "Group")),
			       (long long)json_number_value(json_object_get(v, "Node")));
	}
	printf("\n");
	json_decref(j);
}

/* Units a request costs, from ReturnConsumedCapacity TOTAL (1 if absent). */
static double probe_units(const char *op, const char *body_no_brace)
{
	json_t *j = call(op, "%.*s,\"ReturnConsumedCapacity\":\"TOTAL\"}",
	                 (int)strlen(body_no_brace) - 1, body_no_brace);
	json_t *cc = json_object_get(j, "ConsumedCapacity");
	double u = json_number_value(json_object_get(cc, "CapacityUnits"));
	json_decref(j);
	return u > 0 ? u : 1;
}

/* ------------------------------------------------------------------------ */
/* Scraping: metrics and memory, once a second                               */
/* ------------------------------------------------------------------------ */

#define MAX_SERIES 256
#define MAX_SECS   1200
#define MAX_PROCS  (NODES + 1)
#define MAX_HOTK   256

typedef struct series {
	char name[96]; /* "hot g2 write", "students/GSI1 g3 write" */
	double consumed[MAX_SECS], throttled[MAX_SECS], limit[MAX_SECS];
	bool have[MAX_SECS];
} series;

typedef struct hotkey {
	char table[64], index[64], key[160], kind[8];
	double max_units;
} hotkey;

static series *ser;
static int n_ser;
static double rss_anon[MAX_PROCS][MAX_SECS], rss_vm[MAX_PROCS][MAX_SECS]; /* MiB */
/* cumulative CPU seconds at each second: the machine's busy and total time,
 * the cluster's processes, this process (the load) */
static double mach_busy[MAX_SECS], mach_total[MAX_SECS], clu_cpu[MAX_SECS], self_cpu[MAX_SECS];
static const char *const proc_names[MAX_PROCS] = {"router-1", "node-1", "node-2", "node-3"};
static hotkey hotk[PH__COUNT][MAX_HOTK];
static int n_hotk[PH__COUNT];
static int scrapes_ok, scrapes_with_capacity;
static bool sample_seen; /* the scrape being parsed had capacity metrics */
static atomic_int cur_phase = -1;
static atomic_bool scrape_stop;
static atomic_int last_sec;

static series *series_get(const char *name)
{
	for (int i = 0; i < n_ser; i++)
		if (strcmp(ser[i].name, name) == 0)
			return &ser[i];
	if (n_ser == MAX_SERIES)
		return NULL;
	series *s = &ser[n_ser++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

static void note_hotkey(int ph, const char *table, const char *index, const char *key,
                        const char *kind, double units)
{
	if (ph < 0 || units < 1.0)
		return; /* the background's keys (~0.1 unit/s each) would crowd the list */
	for (int i = 0; i < n_hotk[ph]; i++) {
		hotkey *h = &hotk[ph][i];
		if (strcmp(h->table, table) == 0 && strcmp(h->index, index) == 0 &&
		    strcmp(h->key, key) == 0 && strcmp(h->kind, kind) == 0) {
			if (units > h->max_units)
				h->max_units = units;
			return;
		}
	}
	if (n_hotk[ph] == MAX_HOTK)
		return;
	hotkey *h = &hotk[ph][n_hotk[ph]++];
	snprintf(h->table, sizeof(h->table), "%s", table);
	snprintf(h->index, sizeof(h->index), "%s", index);
	snprintf(h->key, sizeof(h->key), "%s", key);
	snprintf(h->kind, sizeof(h->kind), "%s", kind);
	h->max_units = units;
}

/* One sample of a node's metrics at second *(int *)arg. */
static void on_sample(void *arg, const char *name, size_t len, const char *labels, double v)
{
	static const char *const names[] = {"shoal_partition_consumed_units_total",
	                                    "shoal_partition_throttled_total",
	                                    "shoal_partition_limit_units", "shoal_hot_key_units"};
	int sec = *(int *)arg, which = -1;
	for (int i = 0; i < 4 && which < 0; i++)
		if (len == strlen(names[i]) && strncmp(name, names[i], len) == 0)
			which = i;
	if (which < 0)
		return;
	sample_seen = true;
	char table[64] = "";
	tl_metrics_label(labels, "table", table, sizeof(table));
	if (strcmp(table, "hot") != 0 && strcmp(table, "prov") != 0 &&
	    strncmp(table, "students", 8) != 0)
		return; /* not this test's (a cluster on our ports would show here) */
	char group[16] = "", index[64] = "", kind[8] = "", key[160] = "";
	tl_metrics_label(labels, "group", group, sizeof(group));
	tl_metrics_label(labels, "index", index, sizeof(index));
	tl_metrics_label(labels, "kind", kind, sizeof(kind));
	if (which == 3) {
		tl_metrics_label(labels, "key", key, sizeof(key));
		note_hotkey(atomic_load(&cur_phase), table, index, key, kind, v);
		return;
	}
	char sname[96];
	snprintf(sname, sizeof(sname), "%s%s%s g%s %s", table, index[0] ? "/" : "", index, group,
	         kind);
	series *s = series_get(sname);
	if (s == NULL || sec >= MAX_SECS)
		return;
	double *arr = which == 0 ? s->consumed : which == 1 ? s->throttled : s->limit;
	arr[sec] = v;
	s->have[sec] = true;
}

static void *scraper(void *arg)
{
	for (int sec = 0; !atomic_load(&scrape_stop) && sec < MAX_SECS; sec++) {
		/* Sample at origin + sec: counters then cover [sec - 1, sec). */
		uint64_t at = origin + (uint64_t)sec * 1000000u;
		for (;;) {
			uint64_t t = tl_load_now_us();
			if (t >= at || atomic_load(&scrape_stop))
				break;
			uint64_t d = at - t;
			struct timespec ts = {.tv_sec = (time_t)(d / 1000000u),
			                      .tv_nsec = (long)(d % 1000000u) * 1000};
			nanosleep(&ts, NULL);
		}
		for (uint32_t i = 0; i < conf.n_nodes; i++) {
			if (conf.nodes[i].metrics[0] == '\0')
				continue;
			char *text = tl_metrics_get(conf.nodes[i].metrics);
			if (text != NULL) {
				scrapes_ok++;
				sample_seen = false;
				tl_metrics_each(text, on_sample, &sec);
				scrapes_with_capacity += sample_seen;
			}
			free(text);
		}
		for (int p = 0; p < MAX_PROCS; p++) {
			char pidfile[1200];
			snprintf(pidfile, sizeof(pidfile), "%s/%s.pid", C.dir, proc_names[p]);
			tl_proc_rss(pidfile, &rss_anon[p][sec], &rss_vm[p][sec]);
			double c;
			if (tl_proc_cpu(pidfile, &c))
				clu_cpu[sec] += c;
		}
		tl_machine_cpu(&mach_busy[sec], &mach_total[sec]);
		struct timespec ts;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		self_cpu[sec] = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
		atomic_store(&last_sec, sec);
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Background latency by window                                              */
/* ------------------------------------------------------------------------ */

static double ms(uint64_t us)
{
	return (double)us / 1000.0;
}

static int win_secs = 5;
static tl_hist *win_hist[PARTS][MAX_WINDOWS]; /* ok answers of the background */

static void on_answer(void *arg, int stat, int code, uint64_t lat_us, uint64_t now_us)
{
	if (stat >= ST_HOT || code != SHOAL_OK)
		return;
	uint64_t w = (now_us - origin) / 1000000u / (uint64_t)win_secs;
	int p = stat / 2;
	if (w >= MAX_WINDOWS)
		return;
	if (win_hist[p][w] == NULL && (win_hist[p][w] = calloc(1, sizeof(tl_hist))) == NULL)
		return;
	tl_hist_record(win_hist[p][w], lat_us);
}

/* The median over the whole windows in seconds [from, to) of the
 * background's p99 (ms), partition hp left out (-1: none). */
static double median_window_p99(int from, int to, int hp)
{
	double v[MAX_WINDOWS];
	int n = 0;
	for (int w = (from + win_secs - 1) / win_secs; (w + 1) * win_secs <= to && w < MAX_WINDOWS;
	     w++) {
		tl_hist *m = calloc(1, sizeof(tl_hist));
		if (m == NULL)
			continue;
		for (int p = 0; p < PARTS; p++)
			if (p != hp && win_hist[p][w] != NULL)
				tl_hist_merge(m, win_hist[p][w]);
		if (m->count > 0)
			v[n++] = ms(tl_hist_pct(m, 99));
		free(m);
	}
	for (int i = 1; i < n; i++) /* insertion sort: a few dozen windows */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* ------------------------------------------------------------------------ */
/* Phases                                                                    */
/* ------------------------------------------------------------------------ */

static int sec_now(void)
{
	return (int)((tl_load_now_us() - origin) / 1000000u);
}

/* The background alone for settle_secs after phase ph (not the last):
 * partitions a hot phase drained (buckets in debt) recover before the next
 * phase, and the background's latency just before and after each phase is
 * a reference taken under the machine's conditions of the moment. */
static tl_load_stat settle[PH__COUNT][N_STATS];
static int se_start[PH__COUNT], se_end[PH__COUNT];
static double settle_secs;

static void run_settle(tl_load *l, int ph)
{
	tl_load_class cls[2] = {
	    {.rate = BG_WRITES, .build = build_bg_write},
	    {.rate = BG_READS, .build = build_bg_read},
	};
	for (int i = 0; i < N_STATS; i++)
		snprintf(settle[ph][i].name, sizeof(settle[ph][i].name), "settle bg p%d %s", i / 2,
		         i % 2 ? "read" : "write");
	atomic_store(&cur_phase, -1);
	se_start[ph] = sec_now();
	tl_load_run(l, cls, 2, settle_secs, settle[ph], N_STATS);
	se_end[ph] = sec_now();
}

/* The reference p99 of phase ph's background (partition hp left out): the
 * largest of the baseline's and of the settles just before and after. */
static double ref_p99(int ph, int hp)
{
	double r = median_window_p99(ph_start[PH_BASE], ph_end[PH_BASE], hp);
	if (ph > 0)
		r = fmax(r, median_window_p99(se_start[ph - 1], se_end[ph - 1], hp));
	if (ph + 1 < PH__COUNT)
		r = fmax(r, median_window_p99(se_start[ph], se_end[ph], hp));
	return r;
}

/* Machine busy share and cores used by the cluster and by this process
 * over seconds [from, to). */
static void cpu_span(int from, int to, double *busy, double *cluster, double *self)
{
	if (to > last_sec)
		to = last_sec;
	if (from >= to) {
		*busy = *cluster = *self = 0;
		return;
	}
	double dt = mach_total[to] - mach_total[from], secs_ = to - from;
	*busy = dt > 0 ? (mach_busy[to] - mach_busy[from]) / dt : 0;
	*cluster = (clu_cpu[to] - clu_cpu[from]) / secs_;
	*self = (self_cpu[to] - self_cpu[from]) / secs_;
}

static void run_phase(tl_load *l, int ph, const tl_load_class *hot, double limit, double share)
{
	tl_load_class cls[3] = {
	    {.rate = BG_WRITES, .build = build_bg_write},
	    {.rate = BG_READS, .build = build_bg_read},
	};
	unsigned n = 2;
	if (hot != NULL)
		cls[n++] = *hot;
	for (int i = 0; i < N_STATS; i++) {
		if (i < ST_HOT)
			snprintf(stats[ph][i].name, sizeof(stats[ph][i].name), "bg p%d %s", i / 2,
			         i % 2 ? "read" : "write");
		else
			snprintf(stats[ph][i].name, sizeof(stats[ph][i].name), "%s",
			         phase_names[ph]);
	}
	hot_offered[ph] = hot != NULL ? hot->rate : 0;
	hot_limit[ph] = limit;
	hot_share[ph] = share;
	atomic_store(&cur_phase, ph);
	ph_start[ph] = sec_now();
	printf("phase %s: %.0f s, background %d writes + %d reads/s", phase_names[ph], secs,
	       BG_WRITES, BG_READS);
	if (hot != NULL)
		printf(", hot class %.0f/s (limit %.0f/s, share %.0f/s)", hot->rate, limit, share);
	printf("\n");
	fflush(stdout);
	unsigned left = tl_load_run(l, cls, n, secs, stats[ph], N_STATS);
	ph_end[ph] = sec_now();
	if (left > 0)
		printf("phase %s: %u requests unanswered after the drain\n", phase_names[ph], left);
	if (ph + 1 < PH__COUNT)
		run_settle(l, ph);
}

/* ------------------------------------------------------------------------ */
/* Figures and assertions                                                    */
/* ------------------------------------------------------------------------ */

static int failures;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void vcheck(bool ok, bool judged, const char *fmt, va_list ap)
{
	printf("%s ", !judged ? "  (not judged)" : ok ? "  ok  " : "  FAIL");
	vprintf(fmt, ap);
	printf("\n");
	if (judged && !ok)
		failures++;
}

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vcheck(ok, true, fmt, ap);
	va_end(ap);
}

/* A check of latency or memory: not judged in a sanitizer build. */
static void check_timing(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check_timing(bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vcheck(ok, !SANITIZED, fmt, ap);
	va_end(ap);
}

/* The background of phase ph, in the hot partition `hp` (in_hot) or the
 * others, reads and/or writes (kinds: 1 writes, 2 reads, 3 both). */
static tl_load_stat bg_merge(int ph, int hp, bool in_hot, int kinds)
{
	tl_load_stat m;
	memset(&m, 0, sizeof(m));
	for (int p = 0; p < PARTS; p++) {
		if ((p == hp) != in_hot)
			continue;
		for (int k = 0; k < 2; k++) {
			if (!(kinds & (1 << k)))
				continue;
			const tl_load_stat *s = &stats[ph][2 * p + k];
			m.sent += s->sent;
			m.ok += s->ok;
			m.throttled += s->throttled;
			m.other += s->other;
			tl_hist_merge(&m.ok_lat, &s->ok_lat);
		}
	}
	return m;
}

static double frac(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* RssAnon of process p at the phase's second s0 + 1 and at its end. */
static void rss_span(int ph, int p, double *a0, double *a1, double *v0, double *v1)
{
	int s0 = ph_start[ph] + 1, s1 = ph_end[ph];
	if (s1 > last_sec)
		s1 = last_sec;
	if (s0 > s1)
		s0 = s1;
	*a0 = rss_anon[p][s0];
	*a1 = rss_anon[p][s1];
	*v0 = rss_vm[p][s0];
	*v1 = rss_vm[p][s1];
}

/* Writes admitted in phase ph: the background's, the hot class's (twice in
 * the GSI phases: the base item and its index entry). */
static double admitted_writes(int ph)
{
	double w = 0;
	for (int p = 0; p < PARTS; p++)
		w += (double)stats[ph][2 * p].ok;
	double hot = (double)stats[ph][ST_HOT].ok;
	if (ph == PH_HOTKEY || ph == PH_PROV)
		w += hot;
	else if (ph == PH_GSI1 || ph == PH_GSI10)
		w += 2 * hot;
	return w;
}

static bool hotkey_seen(int ph, const char *table, const char *key, const char *kind, double *units)
{
	*units = 0;
	bool seen = false;
	for (int i = 0; i < n_hotk[ph]; i++) {
		const hotkey *h = &hotk[ph][i];
		if (strcmp(h->table, table) == 0 && strcmp(h->key, key) == 0 &&
		    strcmp(h->kind, kind) == 0 && h->max_units > 0) {
			seen = true;
			if (h->max_units > *units)
				*units = h->max_units;
		}
	}
	return seen;
}

/* Steady-state share of throttled answers of a phase's hot class: the
 * seconds after the burst (BURST_SECS + 1 into the phase) to the end. */
static double steady_thr(int ph)
{
	uint64_t ok = 0, thr = 0;
	const tl_load_stat *s = &stats[ph][ST_HOT];
	for (int t = ph_start[ph] + BURST_SECS + 1; t < ph_end[ph] && t < TL_LOAD_MAX_SECS; t++) {
		ok += s->sec_ok[t];
		thr += s->sec_thr[t];
	}
	return frac(thr, ok + thr);
}

/* The partition of table "hot" that phase ph makes hot (-1: none; the hot
 * load of hot-key-prov and the GSI phases is another table's). */
static int hot_part_of(int ph)
{
	return ph == PH_HOTKEY ? hot_part : ph == PH_HOTQUERY ? coll_part : -1;
}

/* Admitted requests per second of phase ph's hot class over the second half
 * of the phase (long after any burst). */
static double late_rate(int ph)
{
	uint64_t ok = 0;
	int from = ph_start[ph] + (ph_end[ph] - ph_start[ph]) / 2, n = 0;
	for (int t = from; t < ph_end[ph] && t < TL_LOAD_MAX_SECS; t++, n++)
		ok += stats[ph][ST_HOT].sec_ok[t];
	return n ? (double)ok / n : 0;
}

static void print_table(void)
{
	tl_load_stat base_other[PH__COUNT];
	printf(
	    "\nHot-partition figures: 3 nodes, %d data partitions, per partition %d WCU / %d "
	    "RCU, burst %d s, %.0f s per phase; background %d writes + %d reads/s over %d keys\n",
	    PARTS, PART_WCU, PART_RCU, BURST_SECS, secs, BG_WRITES, BG_READS, BG_KEYS);
	printf("\n| scenario | hot offered/s | hot admitted/s | limit/s | hot throttled | "
	       "bg ok/s | bg p50 ms | bg p99 ms (baseline) | bg p99 of %d-s windows, median "
	       "(reference) | bg in hot partition: throttled | RSS anon MiB start→end (router, "
	       "nodes) | CPU: machine busy, cluster + load cores |\n",
	       win_secs);
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int ph = 0; ph < PH__COUNT; ph++) {
		int hp = hot_part_of(ph);
		base_other[ph] = bg_merge(PH_BASE, hp, false, 3);
		tl_load_stat o = bg_merge(ph, hp, false, 3), in = bg_merge(ph, hp, true, 3);
		const tl_load_stat *h = &stats[ph][ST_HOT];
		double busy, cl, self;
		cpu_span(ph_start[ph], ph_end[ph], &busy, &cl, &self);
		char rss[256] = "";
		size_t at = 0;
		for (int p = 0; p < MAX_PROCS; p++) {
			double a0, a1, v0, v1;
			rss_span(ph, p, &a0, &a1, &v0, &v1);
			at += (size_t)snprintf(rss + at, sizeof(rss) - at, "%s%.0f→%.0f",
			                       p ? ", " : "", a0, a1);
		}
		char hot[128] = "–", adm[32] = "–", lim[32] = "–", thr[32] = "–", inhot[32] = "–";
		if (ph != PH_BASE) {
			snprintf(hot, sizeof(hot), "%.0f", hot_offered[ph]);
			snprintf(adm, sizeof(adm), "%.0f", (double)h->ok / secs);
			if (hot_share[ph] < hot_limit[ph])
				snprintf(lim, sizeof(lim), "%.0f (share %.0f)", hot_limit[ph],
				         hot_share[ph]);
			else
				snprintf(lim, sizeof(lim), "%.0f", hot_limit[ph]);
			snprintf(thr, sizeof(thr), "%.1f%%", 100 * frac(h->throttled, h->sent));
		}
		if (hp >= 0)
			snprintf(inhot, sizeof(inhot), "%.1f%%", 100 * frac(in.throttled, in.sent));
		printf(
		    "| %s | %s | %s | %s | %s | %.0f | %.2f | %.2f (%.2f) | %.2f (%.2f) | %s | %s "
		    "| %.0f%%, %.2f + %.2f |\n",
		    phase_names[ph], hot, adm, lim, thr, (double)o.ok / secs,
		    ms(tl_hist_pct(&o.ok_lat, 50)), ms(tl_hist_pct(&o.ok_lat, 99)),
		    ms(tl_hist_pct(&base_other[ph].ok_lat, 99)),
		    median_window_p99(ph_start[ph], ph_end[ph], hp), ref_p99(ph, hp), inhot, rss,
		    100 * busy, cl, self);
	}
	printf("\n(bg: the background keys outside the hot partition -- all of them in baseline, "
	       "hot-key-prov and the GSI phases, whose hot load is another table.  Hot admitted/s "
	       "and bg ok/s: over the whole phase, burst included.  limit/s: the partition's "
	       "limit, in requests of the hot class.)\n");
	for (int ph = 1; ph < PH__COUNT; ph++) {
		const tl_load_stat *h = &stats[ph][ST_HOT];
		printf(
		    "%s: hot class sent %llu ok %llu throttled %llu (steady state %.1f%%) other "
		    "%llu; admitted %.0f/s in the second half; throttled answers p50 %.2f ms p99 "
		    "%.2f ms\n",
		    phase_names[ph], (unsigned long long)h->sent, (unsigned long long)h->ok,
		    (unsigned long long)h->throttled, 100 * steady_thr(ph),
		    (unsigned long long)h->other, late_rate(ph), ms(tl_hist_pct(&h->thr_lat, 50)),
		    ms(tl_hist_pct(&h->thr_lat, 99)));
	}
	for (int ph = 0; ph < PH__COUNT; ph++)
		for (int i = 0; i < n_hotk[ph]; i++)
			if (i < 6)
				printf("%s: hot key seen: table %s index '%s' key %s %s max %.1f "
				       "units/s\n",
				       phase_names[ph], hotk[ph][i].table, hotk[ph][i].index,
				       hotk[ph][i].key, hotk[ph][i].kind, hotk[ph][i].max_units);
	for (int ph = 0; ph < PH__COUNT; ph++) {
		uint32_t worst = 0;
		int at = ph_start[ph];
		for (int t = ph_start[ph]; t < ph_end[ph] && t < TL_LOAD_MAX_SECS; t++)
			for (int i = 0; i < ST_HOT; i++)
				if (stats[ph][i].sec_max_us[t] > worst) {
					worst = stats[ph][i].sec_max_us[t];
					at = t;
				}
		printf("%s: slowest background answer %.1f ms, in second %d of the run\n",
		       phase_names[ph], worst / 1000.0, at);
	}
	printf("metrics: %d scrapes, %d with capacity metrics\n\n", scrapes_ok,
	       scrapes_with_capacity);
}

static void assert_all(void)
{
	printf("Assertions:\n");
	/* Nothing fails but throttling. */
	for (int ph = 0; ph < 2 * PH__COUNT; ph++)
		for (int i = 0; i < N_STATS; i++) {
			const tl_load_stat *s =
			    ph < PH__COUNT ? &stats[ph][i] : &settle[ph - PH__COUNT][i];
			if (s->sent == 0)
				continue;
			check(
			    s->other == 0 && s->refused == 0 && s->lost == 0,
			    "%s / %s: nothing fails but throttling (other %llu, refused %llu, lost "
			    "%llu)%s%s",
			    phase_names[ph % PH__COUNT], s->name, (unsigned long long)s->other,
			    (unsigned long long)s->refused, (unsigned long long)s->lost,
			    s->first_error[0] ? ": " : "", s->first_error);
		}
	tl_load_stat all = bg_merge(PH_BASE, -1, false, 3);
	check(all.throttled == 0, "baseline: background not throttled (%llu of %llu)",
	      (unsigned long long)all.throttled, (unsigned long long)all.sent);

	for (int ph = PH_HOTKEY; ph <= PH_HOTQUERY; ph++) {
		int hp = hot_part_of(ph);
		const tl_load_stat *h = &stats[ph][ST_HOT];
		double lim = hot_limit[ph];
		double hi = (secs + BURST_SECS) * lim * (1 + HI_TOL) + SLACK_REQS;
		double lo = LO_TOL * secs * hot_share[ph];
		check((double)h->ok <= hi && (double)h->ok >= lo,
		      "%s: hot class held near its limit: admitted %llu in %.0f s (%.0f/s), bounds "
		      "[%.0f, %.0f] (limit %.0f/s, burst %d s)",
		      phase_names[ph], (unsigned long long)h->ok, secs, (double)h->ok / secs, lo,
		      hi, lim, BURST_SECS);
		double tf = frac(h->throttled, h->sent);
		check(tf >= MIN_THR, "%s: hot class throttled %.1f%% >= %.0f%% (offered %.0fx)",
		      phase_names[ph], 100 * tf, 100 * MIN_THR, (double)HOT_FACTOR);
		tl_load_stat o = bg_merge(ph, hp, false, 3), b = bg_merge(PH_BASE, hp, false, 3);
		double p99 = median_window_p99(ph_start[ph], ph_end[ph], hp),
		       p99b = ref_p99(ph, hp);
		double p50 = ms(tl_hist_pct(&o.ok_lat, 50)), p50b = ms(tl_hist_pct(&b.ok_lat, 50));
		check(o.throttled == 0 && o.ok == o.sent,
		      "%s: other partitions keep their throughput: %llu of %llu ok, %llu throttled",
		      phase_names[ph], (unsigned long long)o.ok, (unsigned long long)o.sent,
		      (unsigned long long)o.throttled);
		check_timing(
		    p50 <= P50_FACTOR * p50b + P50_SLACK_MS,
		    "%s: other partitions keep their latency: p50 %.2f ms <= %.1f x baseline %.2f "
		    "ms + %.0f ms",
		    phase_names[ph], p50, P50_FACTOR, p50b, P50_SLACK_MS);
		double busy, cl, self;
		cpu_span(ph_start[ph], ph_end[ph], &busy, &cl, &self);
		double slack = win_secs >= 5 ? P99_SLACK_MS : SHORT_P99_SLACK_MS;
		check_timing(
		    p99 <= P99_FACTOR * p99b + slack,
		    "%s: other partitions keep their latency: p99 (median of %d-s windows) %.2f "
		    "ms <= %.1f x reference %.2f ms + %.0f ms (whole phase: %.2f ms, baseline "
		    "phase %.2f ms; machine %.0f%% busy, cluster %.2f + load %.2f cores)",
		    phase_names[ph], win_secs, p99, P99_FACTOR, p99b, slack,
		    ms(tl_hist_pct(&o.ok_lat, 99)), ms(tl_hist_pct(&b.ok_lat, 99)), 100 * busy, cl,
		    self);
		double tp50 = ms(tl_hist_pct(&h->thr_lat, 50));
		check(tp50 <= p50 + 1.0,
		      "%s: throttled at once: refusals' p50 %.2f ms <= the background's ok p50 "
		      "%.2f ms + 1 ms",
		      phase_names[ph], tp50, p50);
		const char *key = ph == PH_HOTQUERY ? "{\"S\":\"coll\"}" : "{\"S\":\"hot\"}";
		const char *kind = ph == PH_HOTQUERY ? "read" : "write";
		double u;
		bool seen = hotkey_seen(ph, ph == PH_PROV ? "prov" : "hot", key, kind, &u);
		check(seen, "%s: shoal_hot_key_units names the hot key %s (%s): max %.1f units/s",
		      phase_names[ph], key, kind, u);
		if (ph == PH_PROV) {
			double r = late_rate(ph);
			check(r >= ADAPT_MIN * hot_share[ph],
			      "hot-key-prov: adaptive capacity lends the table's unused capacity: "
			      "%.0f/s admitted in the phase's second half >= %.1f x share %.0f/s "
			      "(limit %.0f/s)",
			      r, ADAPT_MIN, hot_share[ph], lim);
		}
		if (ph == PH_HOTQUERY) {
			tl_load_stat w = bg_merge(ph, hp, true, 1);
			check(w.throttled == 0,
			      "hot-query: writes in the read-hot partition not throttled (%llu of "
			      "%llu)",
			      (unsigned long long)w.throttled, (unsigned long long)w.sent);
		}
	}
	for (int ph = PH_HOTKEY; ph < PH__COUNT; ph++)
		for (int p = 0; p < MAX_PROCS; p++) {
			double a0, a1, v0, v1;
			rss_span(ph, p, &a0, &a1, &v0, &v1);
			double tol = RSS_SLACK_MB + RSS_PER_WRITE_KB * admitted_writes(ph) / 1024.0;
			check_timing(
			    a1 - a0 <= tol,
			    "%s: %s memory flat: RssAnon %.1f -> %.1f MiB (<= +%.0f; VmRSS %.1f -> "
			    "%.1f)",
			    phase_names[ph], proc_names[p], a0, a1, tol, v0, v1);
		}
	double t1 = steady_thr(PH_GSI1), t10 = steady_thr(PH_GSI10);
	check(t1 >= GSI_MIN_THR,
	      "gsi-1: base writes throttled by the hot index partition: %.1f%% >= %.0f%% after "
	      "the burst",
	      100 * t1, 100 * GSI_MIN_THR);
	check(t10 <= GSI_MAX_THR, "gsi-10: WriteShards 10 is not throttled: %.2f%% <= %.0f%%",
	      100 * t10, 100 * GSI_MAX_THR);
	for (int ph = PH_GSI1; ph <= PH_GSI10; ph++) {
		tl_load_stat b = bg_merge(ph, -1, false, 3);
		check(b.throttled == 0, "%s: the other table is not throttled (%llu of %llu)",
		      phase_names[ph], (unsigned long long)b.throttled, (unsigned long long)b.sent);
	}
}

/* ------------------------------------------------------------------------ */
/* Output files and the plot                                                 */
/* ------------------------------------------------------------------------ */

static void write_files(void)
{
	char path[1300];
	int n = last_sec + 1;
	snprintf(path, sizeof(path), "%s/partitions.csv", outdir);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	/* Wide: sec, then for each partition that consumed anything its units
	 * per second, then each one's throttles per second. */
	int keep[MAX_SERIES], nk = 0;
	for (int i = 0; i < n_ser; i++) {
		double last = 0;
		for (int t = 0; t < n; t++)
			if (ser[i].have[t] && ser[i].consumed[t] + ser[i].throttled[t] > last)
				last = ser[i].consumed[t] + ser[i].throttled[t];
		if (last > 0)
			keep[nk++] = i;
	}
	fprintf(f, "sec");
	for (int k = 0; k < nk; k++)
		fprintf(f, ",%s units/s", ser[keep[k]].name);
	for (int k = 0; k < nk; k++)
		fprintf(f, ",%s throttled/s", ser[keep[k]].name);
	for (int k = 0; k < nk; k++)
		fprintf(f, ",%s limit", ser[keep[k]].name);
	fprintf(f, "\n");
	for (int t = 1; t < n; t++) {
		fprintf(f, "%d", t - 1);
		for (int w = 0; w < 3; w++)
			for (int k = 0; k < nk; k++) {
				const series *s = &ser[keep[k]];
				const double *arr = w == 0   ? s->consumed
				                    : w == 1 ? s->throttled
				                             : s->limit;
				double v = 0;
				if (w == 2)
					v = s->have[t] ? arr[t] : 0;
				else if (s->have[t] && s->have[t - 1] && arr[t] >= arr[t - 1])
					v = arr[t] -
					    arr[t - 1]; /* a counter; a new leader restarts it */
				fprintf(f, ",%.1f", v);
			}
		fprintf(f, "\n");
	}
	fclose(f);

	snprintf(path, sizeof(path), "%s/client.csv", outdir);
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fprintf(f, "sec,background ok/s,background throttled/s,hot offered/s,hot ok/s,hot "
	           "throttled/s,background slowest ms,phase\n");
	for (int t = 0; t < n && t < TL_LOAD_MAX_SECS; t++) {
		uint64_t bok = 0, bthr = 0, hs = 0, hok = 0, hthr = 0, slow = 0;
		int cur = -1;
		for (int ph = 0; ph < PH__COUNT; ph++) {
			for (int i = 0; i < ST_HOT; i++) {
				bok += stats[ph][i].sec_ok[t];
				bthr += stats[ph][i].sec_thr[t];
				if (stats[ph][i].sec_max_us[t] > slow)
					slow = stats[ph][i].sec_max_us[t];
			}
			hs += stats[ph][ST_HOT].sec_sent[t];
			hok += stats[ph][ST_HOT].sec_ok[t];
			hthr += stats[ph][ST_HOT].sec_thr[t];
			if (t >= ph_start[ph] && t < ph_end[ph])
				cur = ph;
			for (int i = 0; i < ST_HOT; i++) {
				bok += settle[ph][i].sec_ok[t];
				bthr += settle[ph][i].sec_thr[t];
				if (settle[ph][i].sec_max_us[t] > slow)
					slow = settle[ph][i].sec_max_us[t];
			}
		}
		fprintf(f, "%d,%llu,%llu,%llu,%llu,%llu,%.1f,%s\n", t, (unsigned long long)bok,
		        (unsigned long long)bthr, (unsigned long long)hs, (unsigned long long)hok,
		        (unsigned long long)hthr, slow / 1000.0, cur >= 0 ? phase_names[cur] : "");
	}
	fclose(f);

	snprintf(path, sizeof(path), "%s/rss.csv", outdir);
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fprintf(f, "sec");
	for (int p = 0; p < MAX_PROCS; p++)
		fprintf(f, ",%s RssAnon MiB,%s VmRSS MiB", proc_names[p], proc_names[p]);
	fprintf(f, "\n");
	for (int t = 0; t < n; t++) {
		fprintf(f, "%d", t);
		for (int p = 0; p < MAX_PROCS; p++)
			fprintf(f, ",%.1f,%.1f", rss_anon[p][t], rss_vm[p][t]);
		fprintf(f, "\n");
	}
	fclose(f);

	/* The plot: per-partition units/s and throttles/s from the nodes'
	 * metrics, then the client's view, phases marked. */
	snprintf(path, sizeof(path), "%s/hot.gp", outdir);
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fprintf(f,
	        "set terminal pngcairo size 1400,1300 font 'sans,10' noenhanced\n"
	        "set output '%s/hot.png'\nset datafile separator ','\n"
	        "set multiplot layout 3,1 title 'Shoal hot partitions: %d WCU / %d RCU per "
	        "partition, burst %d s, %.0f s per phase'\n"
	        "set key outside right top\nset grid\nset xlabel 'seconds'\n"
	        "set lmargin at screen 0.06\nset rmargin at screen 0.72\n"
	        "set xrange [0:%d]\nset yrange [0:*]\nset offsets 0, 0, graph 0.08, 0\n",
	        outdir, PART_WCU, PART_RCU, BURST_SECS, secs, n);
	for (int ph = 0; ph < PH__COUNT; ph++)
		fprintf(f,
		        "set arrow %d from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb 'gray'\n"
		        "set label %d '%s' at %d, graph 0.95 offset 0.5,0\n",
		        ph + 1, ph_start[ph], ph_start[ph], ph + 1, phase_names[ph], ph_start[ph]);
	/* the throttles panel shows only the partitions that throttled */
	char thr_cols[4 * MAX_SERIES + 8] = "";
	size_t tc = 0;
	for (int k = 0; k < nk; k++) {
		bool any = false;
		for (int t = 1; t < n && !any; t++)
			any = ser[keep[k]].have[t] && ser[keep[k]].throttled[t] > 0;
		if (any)
			tc += (size_t)snprintf(thr_cols + tc, sizeof(thr_cols) - tc, "%s%d",
			                       tc ? " " : "", nk + 2 + k);
	}
	if (nk > 0) {
		fprintf(f,
		        "set title 'units consumed per second, per partition (table[/index] group "
		        "kind; "
		        "the leaders metrics)'\n"
		        "plot for [i=2:%d] '%s/partitions.csv' using 1:i with steps lw 1.5 title "
		        "columnheader(i)\n"
		        "set title 'requests throttled per second, per partition (those that "
		        "throttled)'\n"
		        "plot for [i in '%s'] '%s/partitions.csv' using 1:int(i) with steps lw 1.5 "
		        "title columnheader(int(i))\n",
		        nk + 1, outdir, tc ? thr_cols : "2", outdir);
	} else {
		fprintf(f, "set title 'no capacity metrics were exported by the nodes'\n"
		           "plot 0 notitle\nplot 0 notitle\n");
	}
	fprintf(f,
	        "set title 'client: answers per second (open loop; hot = the phase''s hot "
	        "class)'\n"
	        "plot for [i=2:6] '%s/client.csv' using 1:i with steps lw 1.5 title "
	        "columnheader(i)\n"
	        "unset multiplot\n",
	        outdir);
	fclose(f);
	if (tl_sh("command -v gnuplot >/dev/null") == 0) {
		int rc = tl_sh("gnuplot '%s/hot.gp' 2>'%s/gnuplot.err'", outdir, outdir);
		printf("plot: %s/hot.png%s\n", outdir,
		       rc == 0 ? "" : " (gnuplot failed: see gnuplot.err)");
	} else {
		printf("plot: gnuplot is not installed (deploy/install-deps.sh); %s/hot.gp\n",
		       outdir);
	}
	printf("figures: %s/partitions.csv, client.csv, rss.csv\n", outdir);
}

/* ------------------------------------------------------------------------ */
/* The test                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(hot_partitions)
{
	const char *e = getenv("HOT_SECS");
	secs = e != NULL && atof(e) >= 3 ? atof(e) : DEFAULT_SECS;
	ck_assert_msg(PH__COUNT * (secs + TL_LOAD_DRAIN_MS / 1000.0) + 30 < MAX_SECS,
	              "HOT_SECS %.0f is too long for the scraper's %d s", secs, MAX_SECS);
	rng = tl_seed();
	memset(value, 'x', 200);

	/* No split for heat (it_autosplit proves them): the phases measure
	 * throttling at fixed limits, and gsi-1's overloaded index partition
	 * would otherwise split within a `make hot` phase. */
	char opts[256];
	snprintf(opts, sizeof(opts),
	         "--partition-wcu %d --partition-rcu %d --burst-secs %d --split-throttled 0",
	         PART_WCU, PART_RCU, BURST_SECS);
	ck_assert_msg(tl_cluster_up_opts(&C, NODES, 1, GROUPS, opts), "cluster did not start");
	printf("cluster: %s (%s)\n", C.dir, opts);
	e = getenv("HOT_OUT");
	if (e != NULL && e[0] != '\0')
		snprintf(outdir, sizeof(outdir), "%s", e);
	else
		snprintf(outdir, sizeof(outdir), "%s/../hot-test", C.bin);
	ck_assert_int_eq(tl_sh("mkdir -p '%s'", outdir), 0);

	char path[1100], msg[SH_ERRMSG_SIZE];
	snprintf(path, sizeof(path), "%s/cluster.ini", C.dir);
	ck_assert_msg(sh_cluster_load(path, &conf, msg) == SHOAL_OK, "%s", msg);
	ck_assert_int_eq(sh_cluster_partitions(&conf), PARTS);

	shoal_options o;
	shoal_options_init(&o);
	o.retries = 0;          /* raw behaviour: every answer as the router gave it, */
	o.throttle_retries = 0; /* throttles included */
	o.deadline_ms = 10000;
	ck_assert_int_eq(shoal_client_new(C.endpoint, &o, &cli, msg), SHOAL_OK);

	json_decref(call("CreateTable",
	                 "{\"TableName\":\"hot\",\"AttributeDefinitions\":["
	                 "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
	                 "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"}],"
	                 "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
	                 "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
	                 "\"BillingMode\":\"PAY_PER_REQUEST\"}"));
	json_decref(call("CreateTable",
	                 "{\"TableName\":\"prov\",\"AttributeDefinitions\":["
	                 "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
	                 "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"}],"
	                 "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
	                 "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
	                 "\"BillingMode\":\"PROVISIONED\",\"ProvisionedThroughput\":{"
	                 "\"ReadCapacityUnits\":%d,\"WriteCapacityUnits\":%d}}",
	                 PROV_WCU, PROV_WCU));
	create_students("students", 1);
	hot_table_id = table_id("hot");
	table_id("prov");
	uint32_t st1 = table_id("students");

	/* Where everything lives, computed as the router does. */
	int per_part[PARTS] = {0};
	for (int k = 0; k < BG_KEYS; k++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", k);
		bg_part[k] = part_of_s(hot_table_id, pk);
		per_part[bg_part[k]]++;
	}
	hot_part = part_of_s(hot_table_id, "hot");
	coll_part = part_of_s(hot_table_id, "coll");
	printf("background keys per partition: %d %d %d; \"hot\" in partition %d, \"coll\" in %d\n",
	       per_part[0], per_part[1], per_part[2], hot_part, coll_part);

	/* The GSI load: the index partition of "STUDENT" gets all of it
	 * unsharded; sharded, each index partition the entries of the shards
	 * placed on it.  With 3 partitions, 10 shards placed by hash may put 6
	 * or more on one: the sharded table is made again (a new table id, a
	 * new placement) until no index partition gets more than half of the
	 * entries, so that a load exists that the sharded GSI serves and the
	 * unsharded one does not.  Each placement is printed. */
	uint64_t gsi_n = (uint64_t)(secs * 2 * PART_WCU) + 1000;
	uint64_t share1[PARTS] = {0};
	for (uint64_t i = 0; i < gsi_n; i++)
		share1[student_index_part(st1, i, 1)]++;
	double busiest = 1;
	for (int attempt = 0; attempt < 12 && busiest > 0.5; attempt++) {
		snprintf(students10, sizeof(students10), attempt ? "students10-%d" : "students10",
		         attempt);
		create_students(students10, GSI_SHARDS);
		uint32_t st10 = table_id(students10);
		uint64_t share10[PARTS] = {0};
		for (uint64_t i = 0; i < gsi_n; i++)
			share10[student_index_part(st10, i, GSI_SHARDS)]++;
		busiest = 0;
		for (int p = 0; p < PARTS; p++)
			if ((double)share10[p] / (double)gsi_n > busiest)
				busiest = (double)share10[p] / (double)gsi_n;
		printf("GSI1 entries per index partition of %s (WriteShards %d): %llu %llu %llu "
		       "(busiest %.0f%%)\n",
		       students10, GSI_SHARDS, (unsigned long long)share10[0],
		       (unsigned long long)share10[1], (unsigned long long)share10[2],
		       100 * busiest);
	}
	gsi_rate = fmin(2.0 * PART_WCU, 0.7 * PART_WCU / busiest);
	printf("GSI1 entries per index partition of students (unsharded): %llu %llu %llu; GSI "
	       "load %.0f puts/s\n",
	       (unsigned long long)share1[0], (unsigned long long)share1[1],
	       (unsigned long long)share1[2], gsi_rate);
	fflush(stdout);
	ck_assert_msg(gsi_rate > 1.2 * PART_WCU,
	              "the sharded GSI's placement leaves no load that only sharding serves");

	/* The item collection, and what its requests cost. */
	for (int i = 0; i < COLL_ITEMS; i++)
		json_decref(call("PutItem",
		                 "{\"TableName\":\"hot\",\"Item\":{\"PK\":{\"S\":\"coll\"},\"SK\":{"
		                 "\"S\":\"i%02d\"},\"v\":{\"S\":\"%s\"}}}",
		                 i, value));
	units_query = probe_units("Query", coll_query);
	char put[1024];
	const char *op;
	build_hot_write(NULL, 0, &op, put, sizeof(put));
	units_put = probe_units("PutItem", put);
	printf("units: a hot PutItem %.1f WCU, a Query of the collection %.1f RCU\n", units_put,
	       units_query);

	print_leaders("before the load");
	ser = calloc(MAX_SERIES, sizeof(series));
	ck_assert(ser != NULL);
	origin = tl_load_now_us();
	tl_load *l = tl_load_new(cli, origin, MAX_INFLIGHT);
	ck_assert(l != NULL);
	win_secs = secs >= 30 ? 5 : 1;
	settle_secs = fmax(BURST_SECS + 2, secs / 6);
	tl_load_on_answer(l, on_answer, NULL);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, scraper, NULL), 0);

	run_phase(l, PH_BASE, NULL, 0, 0);
	double wlim = PART_WCU / units_put, rlim = PART_RCU / units_query;
	tl_load_class hk = {.rate = HOT_FACTOR * wlim, .build = build_hot_write};
	run_phase(l, PH_HOTKEY, &hk, wlim, wlim);
	tl_load_class hp = {.rate = HOT_FACTOR * wlim, .build = build_prov_write};
	run_phase(l, PH_PROV, &hp, wlim, PROV_WCU / PARTS / units_put);
	tl_load_class hq = {.rate = HOT_FACTOR * rlim, .build = build_hot_query};
	run_phase(l, PH_HOTQUERY, &hq, rlim, rlim);
	tl_load_class g1 = {.rate = gsi_rate, .build = build_student, .arg = "students"};
	run_phase(l, PH_GSI1, &g1, PART_WCU, PART_WCU);
	tl_load_class g10 = {.rate = gsi_rate, .build = build_student, .arg = students10};
	run_phase(l, PH_GSI10, &g10, PART_WCU, PART_WCU);
	atomic_store(&cur_phase, -1);

	/* One more scrape past the end of the last phase, then stop. */
	int want = sec_now() + 1;
	uint64_t deadline = tl_load_now_us() + 5000000u;
	while (atomic_load(&last_sec) < want && tl_load_now_us() < deadline) {
		struct timespec ts = {.tv_nsec = 20000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&scrape_stop, true);
	pthread_join(th, NULL);
	print_leaders("after the load");
	shoal_client_free(cli); /* before the load: answers still due are abandoned */
	cli = NULL;
	tl_load_free(l);

	print_table();
	write_files();
	assert_all();
	printf("%d assertion(s) failed\n", failures);
	fflush(stdout);
	free(ser);
	for (int p = 0; p < PARTS; p++)
		for (int w = 0; w < MAX_WINDOWS; w++)
			free(win_hist[p][w]);
	tl_cluster_down(&C);
	ck_assert_msg(failures == 0, "%d hot-partition assertion(s) failed (see above)", failures);
}
END_TEST

static Suite *suite(void)
{
	const char *e = getenv("HOT_SECS");
	double s = e != NULL && atof(e) >= 3 ? atof(e) : DEFAULT_SECS;
	return tl_suite("hot", NULL, NULL, PH__COUNT * (s + 15) + 180, TL_TESTS(hot_partitions));
}

TL_MAIN(suite)
