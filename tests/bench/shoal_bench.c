/*
 * shoal_bench -- load generator for a running Shoal cluster (build/bin/shoal_bench).
 *
 * One thread drives the cluster through libshoal: with --concurrency C > 1 it
 * keeps C requests in flight with shoal_submit_pb + shoal_poll; with C = 1 it
 * is a single synchronous client (shoal_call_pb), which measures the latency
 * of one request alone.  Requests are packed shoal.Request messages built
 * from templates of the generated protobuf-c structs (only the key and value
 * bytes change per request), so the client spends ~1 us per request on
 * encoding; answers are not decoded here beyond a peek at two fields (a
 * GetItem's item present or not, a Query's item count).  The client's own
 * CPU use and context switches over the measured window are printed
 * (client_cpu in cores, per operation too) so that a saturated client shows.
 *
 * Workloads (--workload):
 *   put    PutItem of a random key (acknowledged after Raft commit + apply on
 *          the group's leader: every put is a durable, replicated write)
 *   get    GetItem of a random loaded key (eventually consistent unless
 *          --consistent)
 *   query  Query of one random item collection (PK = :pk), returning all of
 *          its --items-per-collection items
 *   mixed  GetItem with probability --read-ratio, else PutItem
 *   txwrite  TransactWriteItems of --txn-items Puts (no ClientRequestToken)
 *   txget    TransactGetItems of --txn-items loaded items
 *   transfer TransactWriteItems of two Updates moving 1..--max-amount from
 *          one account to another in another storage group: ADD balance
 *          :neg with ConditionExpression balance >= :amt on the debit side,
 *          ADD balance :amt on the credit side; accounts (--keys, default
 *          1000 for this workload, each loaded with balance --balance) are
 *          chosen by --dist (zipfian: contention on the hot accounts)
 * Where a transaction's items live (--txn-span):
 *   collection  one partition key, sort keys 000000, 000001, ...: one item
 *               collection, so one storage group (one Raft entry)
 *   group       distinct partition keys that all hash to one storage group
 *   cross       distinct partition keys in different groups, item j in data
 *               group (g0 + j) mod D for a random g0: 2 items span 2 groups,
 *               D items or more span them all (two-phase commit)
 * Groups are computed as the router computes them (st_key_hash of the table
 * number, which ClusterStatus returns as TableNumber, and the partition key ->
 * sh_cluster_partition_of -> sh_cluster_partition_group), with the number
 * of groups from ClusterStatus (or --groups); keys are drawn uniformly
 * within a group.  A TransactionCanceledException is a cancellation, not an
 * error: cancellations are counted (with their reasons: the distinct
 * non-None CancellationReason codes of the transaction, "+"-joined) and
 * timed apart; ops/s and the latency percentiles are those of the committed
 * transactions (or of the answered reads).
 * Keys: item i (0 <= i < --keys) has PK "c<i / K>" and SK "<i % K, 6 digits>"
 * with K = --items-per-collection (default 1, or 100 for query), so a query
 * of collection c returns exactly K items.  Key choice is uniform or
 * zipfian (theta 0.99, YCSB's generator over ranks; ranks are key numbers,
 * and the partition hash spreads neighbours anyway), from a seeded PRNG
 * whose seed is printed (--seed, or SHOAL_SEED).
 *
 * Phases: the table (--table, PK/SK strings) is created if missing; get,
 * query and mixed load every key first (--load auto|yes|no; --load-only
 * loads and exits) with
 * BatchWriteItem of 25 items, 32 batches in flight; one probe request checks
 * that a loaded key is there (and that a query returns K items); then
 * --warmup seconds unrecorded, then --duration seconds measured.  A request
 * counts in the window it completes in; latency is submit -> completion
 * callback, microseconds, in a log-bucketed histogram (tests/lib/tl_hist.h:
 * 128 linear buckets, then 64 sub-buckets per power of two: < 1.6 % error),
 * percentiles report the bucket's upper bound (as HdrHistogram's "highest
 * equivalent value").
 * When the window closes no new request is sent; answers are awaited for
 * DRAIN_US at most, and those still missing are reported (inflight_at_end,
 * oldest_inflight_us) rather than silently dropped: a cluster that stalls
 * at the end of a run shows up there, not in the percentiles.
 *
 * Output: one human summary line and one machine-readable line
 *   RESULT workload=put conc=64 dist=uniform ... ops_s=N p50_us=N ... errors=N
 * plus "errors:" by DynamoDB exception name when there are any, and the
 * first distinct error messages exactly as answered ("error message:", with
 * counts); for transactions also "cancellations:" by reason.  A benchmark
 * prints figures; it asserts nothing (exit 1 only when it cannot run).
 *
 * Threads: everything here runs on the main thread; shoal_poll runs the
 * completion callbacks on it too.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "common/cluster.h"
#include "proto/shoal.pb-c.h"
#include "proto/wire.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_hist.h"

#define BATCH         25 /* BatchWriteItem limit */
#define LOAD_INFLIGHT 32 /* batches in flight while loading */
#define MAX_CONC      4096
#define DRAIN_US      5000000 /* after the window, wait this long for answers */
#define KEY_MAX       64
#define TXN_MAX       100 /* actions of one transaction (DynamoDB's limit) */
#define TALLY_MAX     8   /* distinct error messages / cancellation reasons kept */
#define TALLY_TEXT    (SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 2) /* "Exception: message" */

enum workload { W_PUT, W_GET, W_QUERY, W_MIXED, W_TXWRITE, W_TXGET, W_TRANSFER, W__COUNT };
enum kind { K_PUT, K_GET, K_QUERY, K_BATCH, K_TXW, K_TXG, K_XFER };
static const char *const workload_names[W__COUNT] = {"put",     "get",   "query",   "mixed",
                                                     "txwrite", "txget", "transfer"};
enum span { SPAN_COLLECTION, SPAN_GROUP, SPAN_CROSS };
static const char *const span_names[] = {"collection", "group", "cross"};

static bool is_txn(enum kind k)
{
	return k == K_TXW || k == K_TXG || k == K_XFER;
}

/* ------------------------------------------------------------------------ */
/* Time and randomness                                                       */
/* ------------------------------------------------------------------------ */

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* CPU seconds and context switches of this process, every thread. */
static double cpu_s(uint64_t *csw)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	*csw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* splitmix64: small, fast, good enough for key choice. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(void)
{
	return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

/* YCSB's ZipfianGenerator (Gray et al., "Quickly generating billion-record
 * synthetic databases"), items 0..n-1, item 0 the most popular. */
typedef struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta, half_pow_theta;
} zipf;

static void zipf_init(zipf *z, uint64_t n, double theta)
{
	double zeta2 = 1.0 + pow(0.5, theta);
	double zetan = 0;
	for (uint64_t i = 1; i <= n; i++)
		zetan += 1.0 / pow((double)i, theta);
	z->n = n;
	z->theta = theta;
	z->zetan = zetan;
	z->alpha = 1.0 / (1.0 - theta);
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / zetan);
	z->half_pow_theta = pow(0.5, theta);
}

/* The probability that a draw falls among the m most popular items. */
static double zipf_share(const zipf *z, uint64_t m)
{
	double s = 0;
	for (uint64_t i = 1; i <= m && i <= z->n; i++)
		s += 1.0 / pow((double)i, z->theta);
	return s / z->zetan;
}

static uint64_t zipf_next(const zipf *z)
{
	double u = rng_unit();
	double uz = u * z->zetan;
	if (uz < 1.0 || z->n < 2)
		return 0;
	if (uz < 1.0 + z->half_pow_theta)
		return 1;
	uint64_t r = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return r < z->n ? r : z->n - 1;
}

/* ------------------------------------------------------------------------ */
/* Options and state                                                         */
/* ------------------------------------------------------------------------ */

typedef struct opts {
	const char *endpoint;
	const char *table;
	enum workload workload;
	uint64_t keys;
	bool zipfian;
	unsigned conc;
	double duration, warmup;
	unsigned value_size;
	unsigned per_coll; /* items per collection (K) */
	double read_ratio;
	bool consistent;
	int load; /* -1 auto, 0 no, 1 yes */
	bool load_only;
	int retries;
	int pipeline; /* libshoal's lanes (-1: its default) */
	uint64_t seed;
	unsigned txn_items; /* actions (txwrite) or gets (txget) per transaction */
	enum span span;
	unsigned groups;     /* storage groups; 0: ask ClusterStatus */
	unsigned balance;    /* transfer: initial balance of every account */
	unsigned max_amount; /* transfer: amounts are 1 .. max_amount */
} opts;

/* Counts by text: the first TALLY_MAX distinct texts, then "other". */
typedef struct tally {
	char text[TALLY_MAX][TALLY_TEXT];
	uint64_t n[TALLY_MAX];
	unsigned used;
	uint64_t other;
} tally;

typedef struct slot {
	struct bench *b;
	uint64_t t0;
	enum kind kind;
	uint64_t first; /* K_BATCH: first item number */
	unsigned n;     /* K_BATCH: items */
	unsigned tries; /* K_BATCH: attempts so far */
	bool busy;
	struct slot *next_free;
} slot;

typedef struct bench {
	opts o;
	shoal_client *c;
	zipf z;
	char *values; /* random printable bytes to take values from */
	size_t values_len;
	uint8_t *buf; /* packing buffer */
	size_t buf_cap;
	slot *slots, *free_slots;
	unsigned nslots, in_flight;
	/* measurement window: completions in [win0, win1) are recorded */
	uint64_t win0, win1;
	bool stop;
	tl_hist h;
	uint64_t errors, err_by_code[SHOAL_E__COUNT + 1];
	tally errmsgs;        /* "Exception: message" of the errors */
	uint64_t cancels;     /* TransactionCanceledException answers */
	tl_hist hc;           /* their latencies */
	tally reasons;        /* cancellations by reason */
	uint64_t misses;      /* gets that found no item */
	uint64_t query_items; /* items returned by recorded queries */
	uint64_t queries;
	/* load phase */
	uint64_t load_next, load_done, load_retries;
	bool load_failed;
	/* request templates */
	Shoal__Request req;
	Shoal__PutItemRequest put;
	Shoal__GetItemRequest get;
	Shoal__QueryRequest query;
	Shoal__Item item, key, eav;
	Shoal__Attribute a_pk, a_sk, a_v, a_qpk;
	Shoal__Attribute *item_attrs[3], *key_attrs[2], *eav_attrs[1];
	Shoal__AttributeValue v_pk, v_sk, v_v, v_qpk;
	char pk[KEY_MAX], sk[KEY_MAX];
	/* BatchWriteItem template */
	Shoal__BatchWriteItemRequest bw;
	Shoal__TableWriteRequests tw;
	Shoal__TableWriteRequests *tws[1];
	Shoal__WriteRequest wr[BATCH];
	Shoal__WriteRequest *wrs[BATCH];
	Shoal__PutRequest pr[BATCH];
	Shoal__Item bitem[BATCH];
	Shoal__Attribute *battrs[BATCH][3];
	Shoal__Attribute ba[BATCH][3];
	Shoal__AttributeValue bv[BATCH][3];
	char bpk[BATCH][KEY_MAX], bsk[BATCH][KEY_MAX];
	/* placement of the keys (transactions): each key's data group (its
	 * partition, 0 .. dgroups-1) and the keys of each data group */
	uint32_t table_id, groups, dgroups;
	uint32_t *group_of;   /* [keys] */
	uint64_t *keys_by_g;  /* the keys sorted by group: group g's are */
	uint64_t *g_first;    /* keys_by_g[g_first[g] .. g_first[g + 1]) */
	unsigned left_at_end; /* requests unanswered when the run ended */
	/* transaction templates: item j of a transaction uses titem[j] */
	Shoal__TransactWriteItemsRequest txw;
	Shoal__TransactWriteItem twi[TXN_MAX];
	Shoal__TransactWriteItem *twis[TXN_MAX];
	Shoal__Put tput[TXN_MAX];
	Shoal__TransactGetItemsRequest txg;
	Shoal__TransactGetItem tgi[TXN_MAX];
	Shoal__TransactGetItem *tgis[TXN_MAX];
	Shoal__Get tget[TXN_MAX];
	Shoal__Item titem[TXN_MAX];
	Shoal__Attribute ta[TXN_MAX][3];
	Shoal__Attribute *tattrs[TXN_MAX][3];
	Shoal__AttributeValue tv[TXN_MAX][3];
	char tpk[TXN_MAX][KEY_MAX], tsk[TXN_MAX][KEY_MAX];
	/* transfer: the debit and the credit */
	Shoal__Update xupd[2];
	Shoal__Item xeav[2];
	Shoal__Attribute xa_amt, xa_neg;
	Shoal__Attribute *xeav_debit[2], *xeav_credit[1];
	Shoal__AttributeValue xv_amt, xv_neg;
	char amt[24], neg[24];
} bench;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("shoal_bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static void set_s(Shoal__AttributeValue *v, const char *s, size_t n)
{
	v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
	v->s.data = (uint8_t *)s;
	v->s.len = n;
}

static void set_n(Shoal__AttributeValue *v, const char *text)
{
	v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_N;
	v->n.data = (uint8_t *)text;
	v->n.len = strlen(text);
}

static void set_attr(Shoal__Attribute *a, const char *name, Shoal__AttributeValue *v)
{
	shoal__attribute__init(a);
	a->name.data = (uint8_t *)name;
	a->name.len = strlen(name);
	a->value = v;
}

static size_t fmt_pk(char *out, uint64_t i, unsigned k)
{
	return (size_t)snprintf(out, KEY_MAX, "c%llu", (unsigned long long)(i / k));
}

static size_t fmt_sk(char *out, uint64_t i, unsigned k)
{
	return (size_t)snprintf(out, KEY_MAX, "%06llu", (unsigned long long)(i % k));
}

static void templates_init(bench *b)
{
	shoal__request__init(&b->req);
	shoal__put_item_request__init(&b->put);
	shoal__get_item_request__init(&b->get);
	shoal__query_request__init(&b->query);
	shoal__item__init(&b->item);
	shoal__item__init(&b->key);
	shoal__item__init(&b->eav);
	shoal__attribute_value__init(&b->v_pk);
	shoal__attribute_value__init(&b->v_sk);
	shoal__attribute_value__init(&b->v_v);
	shoal__attribute_value__init(&b->v_qpk);
	set_attr(&b->a_pk, "PK", &b->v_pk);
	set_attr(&b->a_sk, "SK", &b->v_sk);
	set_attr(&b->a_v, "v", &b->v_v);
	set_attr(&b->a_qpk, ":pk", &b->v_qpk);
	b->item_attrs[0] = &b->a_pk;
	b->item_attrs[1] = &b->a_sk;
	b->item_attrs[2] = &b->a_v;
	b->item.attrs = b->item_attrs;
	b->item.n_attrs = 3;
	b->key_attrs[0] = &b->a_pk;
	b->key_attrs[1] = &b->a_sk;
	b->key.attrs = b->key_attrs;
	b->key.n_attrs = 2;
	b->eav_attrs[0] = &b->a_qpk;
	b->eav.attrs = b->eav_attrs;
	b->eav.n_attrs = 1;

	WIRE_SET(&b->put, table_name, (char *)b->o.table);
	b->put.item = &b->item;
	WIRE_SET(&b->get, table_name, (char *)b->o.table);
	b->get.key = &b->key;
	b->get.consistent_read = b->o.consistent;
	WIRE_SET(&b->query, table_name, (char *)b->o.table);
	WIRE_SET(&b->query, key_condition_expression, (char *)"PK = :pk");
	b->query.expression_attribute_values = &b->eav;
	b->query.consistent_read = b->o.consistent;

	shoal__batch_write_item_request__init(&b->bw);
	shoal__table_write_requests__init(&b->tw);
	b->tw.table_name = (char *)b->o.table;
	b->tws[0] = &b->tw;
	b->bw.request_items = b->tws;
	b->bw.n_request_items = 1;
	for (unsigned i = 0; i < BATCH; i++) {
		shoal__write_request__init(&b->wr[i]);
		shoal__put_request__init(&b->pr[i]);
		shoal__item__init(&b->bitem[i]);
		b->wr[i].request_case = SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST;
		b->wr[i].put_request = &b->pr[i];
		b->pr[i].item = &b->bitem[i];
		/* accounts (transfer) carry a balance instead of a value */
		const char *const names[3] = {"PK", "SK",
		                              b->o.workload == W_TRANSFER ? "balance" : "v"};
		for (unsigned j = 0; j < 3; j++) {
			shoal__attribute_value__init(&b->bv[i][j]);
			set_attr(&b->ba[i][j], names[j], &b->bv[i][j]);
			b->battrs[i][j] = &b->ba[i][j];
		}
		b->bitem[i].attrs = b->battrs[i];
		b->bitem[i].n_attrs = 3;
		b->wrs[i] = &b->wr[i];
	}
	b->tw.requests = b->wrs;

	/* Transactions.  Item j: PK, SK (and v for a Put) in titem[j]. */
	shoal__transact_write_items_request__init(&b->txw);
	shoal__transact_get_items_request__init(&b->txg);
	b->txw.transact_items = b->twis;
	b->txg.transact_items = b->tgis;
	for (unsigned j = 0; j < TXN_MAX; j++) {
		static const char *const names[3] = {"PK", "SK", "v"};
		shoal__item__init(&b->titem[j]);
		for (unsigned a = 0; a < 3; a++) {
			shoal__attribute_value__init(&b->tv[j][a]);
			set_attr(&b->ta[j][a], names[a], &b->tv[j][a]);
			b->tattrs[j][a] = &b->ta[j][a];
		}
		b->titem[j].attrs = b->tattrs[j];
		shoal__transact_write_item__init(&b->twi[j]);
		shoal__put__init(&b->tput[j]);
		b->tput[j].table_name = (char *)b->o.table;
		b->tput[j].item = &b->titem[j];
		b->twis[j] = &b->twi[j];
		shoal__transact_get_item__init(&b->tgi[j]);
		shoal__get__init(&b->tget[j]);
		b->tget[j].table_name = (char *)b->o.table;
		b->tget[j].key = &b->titem[j];
		b->tgi[j].get = &b->tget[j];
		b->tgis[j] = &b->tgi[j];
	}
	shoal__attribute_value__init(&b->xv_amt);
	shoal__attribute_value__init(&b->xv_neg);
	set_attr(&b->xa_amt, ":amt", &b->xv_amt);
	set_attr(&b->xa_neg, ":neg", &b->xv_neg);
	b->xeav_debit[0] = &b->xa_amt;
	b->xeav_debit[1] = &b->xa_neg;
	b->xeav_credit[0] = &b->xa_amt;
	for (unsigned j = 0; j < 2; j++) {
		shoal__update__init(&b->xupd[j]);
		shoal__item__init(&b->xeav[j]);
		b->xupd[j].table_name = (char *)b->o.table;
		b->xupd[j].key = &b->titem[j];
		b->xupd[j].expression_attribute_values = &b->xeav[j];
	}
	b->xeav[0].attrs = b->xeav_debit;
	b->xeav[0].n_attrs = 2;
	b->xeav[1].attrs = b->xeav_credit;
	b->xeav[1].n_attrs = 1;
	b->xupd[0].update_expression = (char *)"ADD balance :neg";
	WIRE_SET(&b->xupd[0], condition_expression, (char *)"balance >= :amt");
	b->xupd[1].update_expression = (char *)"ADD balance :amt";
}

/* A value of value_size bytes taken from the random pool. */
static const char *value_bytes(bench *b)
{
	size_t span = b->values_len - b->o.value_size;
	return b->values + (span ? rng_next() % span : 0);
}

/* Packs b->req (whose op the caller set) into b->buf; returns its length. */
static size_t pack_req(bench *b)
{
	size_t n = protobuf_c_message_get_packed_size(&b->req.base);
	if (n > b->buf_cap) {
		free(b->buf);
		b->buf_cap = n * 2;
		b->buf = malloc(b->buf_cap);
		if (b->buf == NULL)
			die("out of memory");
	}
	return protobuf_c_message_pack(&b->req.base, b->buf);
}

/* A key of data group g other than the n in taken[], drawn uniformly
 * (placement() checked that every group has enough keys for this). */
static uint64_t key_in_group(bench *b, uint32_t g, const uint64_t *taken, unsigned n)
{
	uint64_t lo = b->g_first[g], cnt = b->g_first[g + 1] - lo;
	for (;;) {
		uint64_t k = b->keys_by_g[lo + rng_next() % cnt];
		unsigned j = 0;
		while (j < n && taken[j] != k)
			j++;
		if (j == n)
			return k;
	}
}

/* The key numbers of a transaction whose first item is key `first`: all
 * of them `first` for the collection span (the sort keys differ), else n
 * distinct keys in first's group (group span) or item j in data group
 * (group(first) + j) mod D (cross span). */
static void txn_keys(bench *b, uint64_t first, uint64_t *keys, unsigned n)
{
	keys[0] = first;
	for (unsigned j = 1; j < n; j++) {
		if (b->o.span == SPAN_COLLECTION) {
			keys[j] = first;
			continue;
		}
		uint32_t g = b->group_of[first];
		if (b->o.span == SPAN_CROSS)
			g = (g + j) % b->dgroups;
		keys[j] = key_in_group(b, g, keys, j);
	}
}

/* Transaction item j: key number i; its sort key is j in the collection
 * span, else key i's own; with_value: a Put's item (PK, SK, v), else a key. */
static void txn_item(bench *b, unsigned j, uint64_t i, bool with_value)
{
	unsigned k = b->o.per_coll;
	set_s(&b->tv[j][0], b->tpk[j], fmt_pk(b->tpk[j], i, k));
	if (b->o.span == SPAN_COLLECTION)
		set_s(&b->tv[j][1], b->tsk[j], (size_t)snprintf(b->tsk[j], KEY_MAX, "%06u", j));
	else
		set_s(&b->tv[j][1], b->tsk[j], fmt_sk(b->tsk[j], i, k));
	if (with_value)
		set_s(&b->tv[j][2], value_bytes(b), b->o.value_size);
	b->titem[j].n_attrs = with_value ? 3 : 2;
}

/* A transfer from account `from` to an account of another data group
 * (drawn like `from`, by --dist; after 100 draws in from's group, uniformly
 * from the next group). */
static void build_transfer(bench *b, uint64_t from)
{
	uint32_t gf = b->group_of[from];
	uint64_t to = from;
	for (int t = 0; t < 100 && (to == from || b->group_of[to] == gf); t++)
		to = b->o.zipfian ? zipf_next(&b->z) : rng_next() % b->o.keys;
	if (to == from || b->group_of[to] == gf)
		to = key_in_group(b, (gf + 1) % b->dgroups, &from, 1);
	unsigned amount = 1 + (unsigned)(rng_next() % b->o.max_amount);
	snprintf(b->amt, sizeof(b->amt), "%u", amount);
	snprintf(b->neg, sizeof(b->neg), "-%u", amount);
	set_n(&b->xv_amt, b->amt);
	set_n(&b->xv_neg, b->neg);
	txn_item(b, 0, from, false);
	txn_item(b, 1, to, false);
	for (unsigned j = 0; j < 2; j++) {
		b->twi[j].action_case = SHOAL__TRANSACT_WRITE_ITEM__ACTION_UPDATE;
		b->twi[j].update = &b->xupd[j];
	}
	b->txw.n_transact_items = 2;
	b->req.op_case = SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS;
	b->req.transact_write_items = &b->txw;
}

/* Builds the request for one operation of `kind` on item `i` (for a
 * transaction: its first item). */
static size_t build_one(bench *b, enum kind kind, uint64_t i)
{
	unsigned k = b->o.per_coll;
	shoal__request__init(&b->req);
	b->req.request_id = 0; /* libshoal accepts any; we match by slot */
	switch (kind) {
	case K_PUT:
		set_s(&b->v_pk, b->pk, fmt_pk(b->pk, i, k));
		set_s(&b->v_sk, b->sk, fmt_sk(b->sk, i, k));
		set_s(&b->v_v, value_bytes(b), b->o.value_size);
		b->req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
		b->req.put_item = &b->put;
		break;
	case K_GET:
		set_s(&b->v_pk, b->pk, fmt_pk(b->pk, i, k));
		set_s(&b->v_sk, b->sk, fmt_sk(b->sk, i, k));
		b->req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
		b->req.get_item = &b->get;
		break;
	case K_QUERY:
		set_s(&b->v_qpk, b->pk, fmt_pk(b->pk, i * k, k));
		b->req.op_case = SHOAL__REQUEST__OP_QUERY;
		b->req.query = &b->query;
		break;
	case K_TXW:
	case K_TXG: {
		uint64_t keys[TXN_MAX];
		unsigned n = b->o.txn_items;
		txn_keys(b, i, keys, n);
		for (unsigned j = 0; j < n; j++) {
			txn_item(b, j, keys[j], kind == K_TXW);
			b->twi[j].action_case = SHOAL__TRANSACT_WRITE_ITEM__ACTION_PUT;
			b->twi[j].put = &b->tput[j];
		}
		if (kind == K_TXW) {
			b->txw.n_transact_items = n;
			b->req.op_case = SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS;
			b->req.transact_write_items = &b->txw;
		} else {
			b->txg.n_transact_items = n;
			b->req.op_case = SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS;
			b->req.transact_get_items = &b->txg;
		}
		break;
	}
	case K_XFER:
		build_transfer(b, i);
		break;
	case K_BATCH:
		break;
	}
	return pack_req(b);
}

/* Builds a BatchWriteItem of items first .. first+n-1. */
static size_t build_batch(bench *b, uint64_t first, unsigned n)
{
	unsigned k = b->o.per_coll;
	for (unsigned j = 0; j < n; j++) {
		uint64_t i = first + j;
		set_s(&b->bv[j][0], b->bpk[j], fmt_pk(b->bpk[j], i, k));
		set_s(&b->bv[j][1], b->bsk[j], fmt_sk(b->bsk[j], i, k));
		if (b->o.workload == W_TRANSFER) {
			static char balance[24];
			snprintf(balance, sizeof(balance), "%u", b->o.balance);
			set_n(&b->bv[j][2], balance);
		} else {
			set_s(&b->bv[j][2], value_bytes(b), b->o.value_size);
		}
	}
	b->tw.n_requests = n;
	shoal__request__init(&b->req);
	b->req.op_case = SHOAL__REQUEST__OP_BATCH_WRITE_ITEM;
	b->req.batch_write_item = &b->bw;
	return pack_req(b);
}

/* ------------------------------------------------------------------------ */
/* A peek into packed Responses (no full unpack on the hot path)             */
/* ------------------------------------------------------------------------ */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned s = 0; s < 64 && *p < end; s += 7) {
		uint8_t c = *(*p)++;
		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/* The next occurrence of length-delimited field `f` in [*p, end): its bytes
 * in *sub, *p moved past it.  1: found, 0: none left, -1: malformed. */
static int pb_next(const uint8_t **p, const uint8_t *end, unsigned f, const uint8_t **sub,
                   size_t *sublen)
{
	while (*p < end) {
		uint64_t tag, v;
		if (!varint(p, end, &tag))
			return -1;
		switch (tag & 7) {
		case 0:
			if (!varint(p, end, &v))
				return -1;
			break;
		case 1:
			if (end - *p < 8)
				return -1;
			*p += 8;
			break;
		case 5:
			if (end - *p < 4)
				return -1;
			*p += 4;
			break;
		case 2:
			if (!varint(p, end, &v) || v > (uint64_t)(end - *p))
				return -1;
			*p += v;
			if ((tag >> 3) == f) {
				*sub = *p - v;
				*sublen = (size_t)v;
				return 1;
			}
			break;
		default:
			return -1;
		}
	}
	return 0;
}

/* Counts the occurrences of length-delimited field `f` in msg, and returns
 * the last one's bytes in *sub (NULL when none).  -1: malformed. */
static long pb_field(const uint8_t *p, size_t len, unsigned f, const uint8_t **sub, size_t *sublen)
{
	const uint8_t *end = p + len, *s;
	size_t slen;
	long count = 0;
	int rc;
	*sub = NULL;
	*sublen = 0;
	while ((rc = pb_next(&p, end, f, &s, &slen)) > 0) {
		count++;
		*sub = s;
		*sublen = slen;
	}
	return rc < 0 ? -1 : count;
}

/* ------------------------------------------------------------------------ */
/* Running operations                                                        */
/* ------------------------------------------------------------------------ */

static slot *slot_get(bench *b)
{
	slot *s = b->free_slots;
	if (s != NULL) {
		b->free_slots = s->next_free;
		s->busy = true;
	}
	return s;
}

static void slot_put(bench *b, slot *s)
{
	s->busy = false;
	s->next_free = b->free_slots;
	b->free_slots = s;
}

static void tally_add(tally *t, const char *text)
{
	for (unsigned i = 0; i < t->used; i++)
		if (strcmp(t->text[i], text) == 0) {
			t->n[i]++;
			return;
		}
	if (t->used == TALLY_MAX) {
		t->other++;
		return;
	}
	snprintf(t->text[t->used], TALLY_TEXT, "%s", text);
	t->n[t->used++] = 1;
}

static void tally_print(const tally *t, const char *what, uint64_t total)
{
	for (unsigned i = 0; i < t->used; i++)
		printf("%s: %llu (%.2f%%) %s\n", what, (unsigned long long)t->n[i],
		       total ? 100.0 * (double)t->n[i] / (double)total : 0.0, t->text[i]);
	if (t->other > 0)
		printf("%s: %llu others (more than %d distinct)\n", what,
		       (unsigned long long)t->other, TALLY_MAX);
}

static void count_error(bench *b, int code, const shoal_error *err)
{
	char text[TALLY_TEXT];
	b->errors++;
	b->err_by_code[code >= 0 && code < SHOAL_E__COUNT ? code : SHOAL_E__COUNT]++;
	snprintf(text, sizeof(text), "%s: %s", err->exception, err->message);
	tally_add(&b->errmsgs, text);
}

/* A TransactionCanceledException: its reason is the distinct non-None
 * codes of Response.cancellation_reasons, "+"-joined. */
static void count_cancel(bench *b, const uint8_t *body, size_t len)
{
	char text[TALLY_TEXT] = "";
	size_t at = 0;
	Shoal__Response *r = body != NULL ? shoal__response__unpack(NULL, len, body) : NULL;
	if (r == NULL) {
		tally_add(&b->reasons, "(no Response)");
		return;
	}
	for (size_t i = 0; i < r->n_cancellation_reasons; i++) {
		const char *code = r->cancellation_reasons[i]->code;
		if (code == NULL || code[0] == '\0' || strcmp(code, "None") == 0)
			continue;
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(r->cancellation_reasons[k]->code, code) == 0;
		if (!seen && at < sizeof(text))
			at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%s", at ? "+" : "",
			                       code);
	}
	tally_add(&b->reasons, at ? text : "(no reason given)");
	shoal__response__free_unpacked(r, NULL);
}

/* What an answer of an op says beyond its status (misses, query items). */
static void inspect(bench *b, enum kind kind, const uint8_t *body, size_t len)
{
	const uint8_t *res;
	size_t rlen;
	if (kind == K_GET) {
		/* Response.get_item (10) -> GetItemResponse.item (1) */
		if (pb_field(body, len, 10, &res, &rlen) <= 0) {
			b->misses++;
			return;
		}
		const uint8_t *it;
		size_t ilen;
		if (pb_field(res, rlen, 1, &it, &ilen) <= 0)
			b->misses++;
	} else if (kind == K_QUERY) {
		/* Response.query (14) -> QueryResponse.items (1, repeated) */
		b->queries++;
		if (pb_field(body, len, 14, &res, &rlen) > 0) {
			const uint8_t *it;
			size_t ilen;
			long n = pb_field(res, rlen, 1, &it, &ilen);
			if (n > 0)
				b->query_items += (uint64_t)n;
		}
	} else if (kind == K_TXG) {
		/* Response.transact_get_items (19) -> responses (1, repeated
		 * ItemResponse) -> item (1), absent for a missing item */
		unsigned got = 0;
		if (pb_field(body, len, 19, &res, &rlen) > 0) {
			const uint8_t *p = res, *ir, *it;
			size_t irlen, ilen;
			while (pb_next(&p, res + rlen, 1, &ir, &irlen) > 0) {
				got++;
				if (pb_field(ir, irlen, 1, &it, &ilen) <= 0)
					b->misses++;
			}
		}
		if (got < b->o.txn_items)
			b->misses += b->o.txn_items - got;
	}
}

static uint64_t pick_key(bench *b)
{
	uint64_t space = b->o.workload == W_QUERY ? b->o.keys / b->o.per_coll : b->o.keys;
	if (space == 0)
		space = 1;
	return b->o.zipfian ? zipf_next(&b->z) : rng_next() % space;
}

static enum kind pick_kind(bench *b)
{
	switch (b->o.workload) {
	case W_PUT:
		return K_PUT;
	case W_GET:
		return K_GET;
	case W_QUERY:
		return K_QUERY;
	case W_TXWRITE:
		return K_TXW;
	case W_TXGET:
		return K_TXG;
	case W_TRANSFER:
		return K_XFER;
	case W_MIXED:
	case W__COUNT:
		break;
	}
	return rng_unit() < b->o.read_ratio ? K_GET : K_PUT;
}

/* Records a finished op if it completed inside the window. */
static void finish(bench *b, enum kind kind, uint64_t t0, int code, const void *body, size_t len,
                   const shoal_error *err)
{
	uint64_t t = now_us();
	if (t < b->win0 || t >= b->win1)
		return;
	if (code == SHOAL_E_TXN_CANCELED && is_txn(kind)) {
		b->cancels++;
		tl_hist_record(&b->hc, t - t0);
		count_cancel(b, body, len);
		return;
	}
	if (code != SHOAL_OK) {
		count_error(b, code, err);
		return;
	}
	tl_hist_record(&b->h, t - t0);
	if (body != NULL)
		inspect(b, kind, body, len);
}

static void done_cb(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	slot *s = arg;
	bench *b = s->b;
	b->in_flight--;
	finish(b, s->kind, s->t0, code, body, len, err);
	slot_put(b, s);
}

/* Submits one op; false when the client refused it (counted as an error). */
static bool submit_one(bench *b)
{
	slot *s = slot_get(b);
	if (s == NULL)
		return false;
	s->kind = pick_kind(b);
	size_t n = build_one(b, s->kind, pick_key(b));
	shoal_error err;
	s->t0 = now_us();
	int rc = shoal_submit_pb(b->c, b->buf, n, done_cb, s, &err);
	if (rc != SHOAL_OK) {
		if (s->t0 >= b->win0 && s->t0 < b->win1)
			count_error(b, rc, &err);
		slot_put(b, s);
		return false;
	}
	b->in_flight++;
	return true;
}

/* Runs the workload for warmup + duration seconds. */
static void run(bench *b)
{
	uint64_t start = now_us();
	b->win0 = start + (uint64_t)(b->o.warmup * 1e6);
	b->win1 = b->win0 + (uint64_t)(b->o.duration * 1e6);
	/* client CPU and context switches over the measured window */
	double cpu0 = 0, cpu1 = 0;
	uint64_t oldest = 0; /* age of the oldest request in flight at the end (us) */
	unsigned left = 0;   /* requests in flight when the window closed */
	uint64_t csw0 = 0, csw1 = 0;
	bool cpu_started = false;
	if (b->o.conc == 1) {
		/* One synchronous client: a request, its answer, the next. */
		for (;;) {
			uint64_t t = now_us();
			if (!cpu_started && t >= b->win0) {
				cpu0 = cpu_s(&csw0);
				cpu_started = true;
			}
			if (t >= b->win1) {
				cpu1 = cpu_s(&csw1);
				break;
			}
			enum kind kind = pick_kind(b);
			size_t n = build_one(b, kind, pick_key(b));
			uint8_t *resp = NULL;
			size_t rlen = 0;
			shoal_error err;
			uint64_t t0 = now_us();
			int rc = shoal_call_pb(b->c, b->buf, n, &resp, &rlen, &err);
			finish(b, kind, t0, rc, resp, rlen, &err);
			shoal_free(resp);
			uint64_t t1 = now_us();
			if (t1 >= b->win1 && t0 < b->win1) {
				/* answered after the window closed: not recorded */
				cpu1 = cpu_s(&csw1);
				oldest = b->win1 - t0;
				left = 1;
				break;
			}
		}
	} else {
		while (!b->stop || b->in_flight > 0) {
			uint64_t t = now_us();
			if (!cpu_started && t >= b->win0) {
				cpu0 = cpu_s(&csw0);
				cpu_started = true;
			}
			if (t >= b->win1 && !b->stop) {
				cpu1 = cpu_s(&csw1);
				b->stop = true;
				for (unsigned i = 0; i < b->nslots; i++)
					if (b->slots[i].busy && t - b->slots[i].t0 > oldest)
						oldest = t - b->slots[i].t0;
				left = b->in_flight;
			}
			if (b->stop && t >= b->win1 + DRAIN_US)
				break; /* shoal_client_free abandons the rest */
			while (!b->stop && b->in_flight < b->o.conc)
				if (!submit_one(b))
					break;
			shoal_poll(b->c, 100);
		}
	}
	b->left_at_end = b->in_flight; /* still unanswered after the drain */
	double cpu = cpu_started ? cpu1 - cpu0 : 0;
	uint64_t csw = cpu_started ? csw1 - csw0 : 0;

	double secs = b->o.duration;
	uint64_t ops = b->h.count;
	double ops_s = (double)ops / secs;
	double cpu_op = ops ? cpu * 1e6 / (double)ops : 0;
	double csw_op = ops ? (double)csw / (double)ops : 0;
	const char *dist = b->o.zipfian ? "zipfian" : "uniform";
	const char *wl = workload_names[b->o.workload];
	unsigned long long p50 = tl_hist_pct(&b->h, 50), p95 = tl_hist_pct(&b->h, 95),
	                   p99 = tl_hist_pct(&b->h, 99), p999 = tl_hist_pct(&b->h, 99.9),
	                   max = b->h.max;
	printf("%s conc=%u %s keys=%llu value=%uB: %llu ops in %.1f s = %.0f ops/s, errors %llu; "
	       "latency us p50 %llu p95 %llu p99 %llu p99.9 %llu max %llu; client %.2f cores, "
	       "%.0f us cpu and %.1f context switches per op\n",
	       wl, b->o.conc, dist, (unsigned long long)b->o.keys, b->o.value_size,
	       (unsigned long long)ops, secs, ops_s, (unsigned long long)b->errors, p50, p95, p99,
	       p999, max, cpu / secs, cpu_op, csw_op);
	if (b->errors > 0) {
		printf("errors:");
		for (int code = 0; code <= SHOAL_E__COUNT; code++)
			if (b->err_by_code[code] > 0)
				printf(" %s(%s)=%llu",
				       code < SHOAL_E__COUNT ? shoal_exception_name(code) : "?",
				       code < SHOAL_E__COUNT ? shoal_err_name(code) : "?",
				       (unsigned long long)b->err_by_code[code]);
		printf("\n");
		tally_print(&b->errmsgs, "error message", b->errors);
	}
	bool txn = b->o.workload >= W_TXWRITE;
	uint64_t answered = ops + b->cancels;
	double cancel_pct = answered ? 100.0 * (double)b->cancels / (double)answered : 0.0;
	if (txn) {
		printf(
		    "transactions: %u items, span %s; %llu %s (%.0f/s), %llu cancelled = %.2f%% of "
		    "the %llu answered; cancelled ones took us p50 %llu p99 %llu\n",
		    b->o.txn_items, span_names[b->o.span], (unsigned long long)ops,
		    b->o.workload == W_TXGET ? "read" : "committed", ops_s,
		    (unsigned long long)b->cancels, cancel_pct, (unsigned long long)answered,
		    (unsigned long long)tl_hist_pct(&b->hc, 50),
		    (unsigned long long)tl_hist_pct(&b->hc, 99));
		tally_print(&b->reasons, "cancellations", b->cancels);
	}
	if (b->misses > 0)
		printf("note: %llu %s found no item (key not loaded?)\n",
		       (unsigned long long)b->misses,
		       b->o.workload == W_TXGET ? "items of TransactGetItems" : "gets");
	if (oldest > 1000000)
		printf("note: %u requests were unanswered when the window closed, the oldest for "
		       "%.1f s: they are in neither the latencies nor the errors\n",
		       left, (double)oldest / 1e6);
	printf("RESULT workload=%s conc=%u dist=%s keys=%llu value_size=%u items_per_collection=%u "
	       "secs=%.1f ops=%llu errors=%llu ops_s=%.0f p50_us=%llu p95_us=%llu p99_us=%llu "
	       "p999_us=%llu max_us=%llu mean_us=%.0f misses=%llu items_per_query=%.1f "
	       "client_cpu=%.2f client_cpu_us_per_op=%.0f client_csw_per_op=%.1f "
	       "inflight_at_end=%u oldest_inflight_us=%llu seed=%llu",
	       wl, b->o.conc, dist, (unsigned long long)b->o.keys, b->o.value_size, b->o.per_coll,
	       secs, (unsigned long long)ops, (unsigned long long)b->errors, ops_s, p50, p95, p99,
	       p999, max, ops ? (double)b->h.sum / (double)ops : 0.0, (unsigned long long)b->misses,
	       b->queries ? (double)b->query_items / (double)b->queries : 0.0, cpu / secs, cpu_op,
	       csw_op, left, (unsigned long long)oldest, (unsigned long long)b->o.seed);
	if (txn)
		printf(" txn_items=%u span=%s cancels=%llu cancel_pct=%.2f cancel_p50_us=%llu "
		       "cancel_p99_us=%llu answered_s=%.0f",
		       b->o.txn_items, span_names[b->o.span], (unsigned long long)b->cancels,
		       cancel_pct, (unsigned long long)tl_hist_pct(&b->hc, 50),
		       (unsigned long long)tl_hist_pct(&b->hc, 99), (double)answered / secs);
	printf("\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Setup: table and load                                                     */
/* ------------------------------------------------------------------------ */

static void ensure_table(bench *b)
{
	char body[512], *resp = NULL;
	shoal_error err;
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\"}", b->o.table);
	int rc = shoal_call_json(b->c, "DescribeTable", body, &resp, &err);
	shoal_free(resp);
	if (rc == SHOAL_OK)
		return;
	if (rc != SHOAL_E_NOT_FOUND)
		die("DescribeTable %s: %s: %s", b->o.table, err.exception, err.message);
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"%s\",\"AttributeDefinitions\":["
	         "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
	         "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"}],"
	         "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
	         "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
	         "\"BillingMode\":\"PAY_PER_REQUEST\"}",
	         b->o.table);
	resp = NULL;
	rc = shoal_call_json(b->c, "CreateTable", body, &resp, &err);
	shoal_free(resp);
	if (rc != SHOAL_OK && rc != SHOAL_E_IN_USE)
		die("CreateTable %s: %s: %s", b->o.table, err.exception, err.message);
	printf("created table %s (PK S, SK S)\n", b->o.table);
}

/* A blocking JSON call whose answer is parsed; dies on any error. */
static json_t *call_json(bench *b, const char *op, const char *body)
{
	char *resp = NULL;
	shoal_error err;
	if (shoal_call_json(b->c, op, body, &resp, &err) != SHOAL_OK)
		die("%s: %s: %s", op, err.exception, err.message);
	json_error_t je;
	json_t *j = json_loads(resp, 0, &je);
	shoal_free(resp);
	if (j == NULL)
		die("%s: unparseable answer: %s", op, je.text);
	return j;
}

/* Where every key lives, as the router places it: the number of groups
 * (ClusterStatus: the highest group number + 1, or --groups), the table's
 * number (ClusterStatus's TableNumber), then st_key_hash -> partition, partition p
 * living in group p + 1 (common/cluster.h). */
static void placement(bench *b)
{
	static sh_cluster_conf conf; /* only .groups matters to partitioning */
	b->groups = b->o.groups;
	if (b->groups == 0) {
		json_t *st = call_json(b, "ClusterStatus", NULL), *g;
		size_t at;
		json_int_t max = -1;
		json_array_foreach(json_object_get(st, "Groups"), at, g)
		{
			json_int_t n = json_integer_value(json_object_get(g, "Group"));
			if (n > max)
				max = n;
		}
		json_decref(st);
		if (max < 0 || max >= SH_MAX_GROUPS)
			die("ClusterStatus: no groups listed (pass --groups)");
		b->groups = (uint32_t)max + 1;
	}
	if ((b->table_id = tl_table_number(b->c, b->o.table)) == 0)
		die("ClusterStatus: no TableNumber for table %s", b->o.table);

	conf.groups = b->groups;
	b->dgroups = sh_cluster_partitions(&conf);
	uint64_t n = b->o.keys;
	b->group_of = malloc(n * sizeof(*b->group_of));
	b->keys_by_g = malloc(n * sizeof(*b->keys_by_g));
	b->g_first = calloc(b->dgroups + 1, sizeof(*b->g_first));
	if (b->group_of == NULL || b->keys_by_g == NULL || b->g_first == NULL)
		die("out of memory");
	char pk[KEY_MAX];
	for (uint64_t i = 0; i < n; i++) {
		st_value v = {.type = ST_S};
		v.u.str.ptr = pk;
		v.u.str.len = (uint32_t)fmt_pk(pk, i, b->o.per_coll);
		b->group_of[i] = sh_cluster_partition_of(&conf, st_key_hash(b->table_id, &v));
		b->g_first[b->group_of[i] + 1]++;
	}
	for (uint32_t g = 0; g < b->dgroups; g++)
		b->g_first[g + 1] += b->g_first[g];
	uint64_t *fill = calloc(b->dgroups, sizeof(*fill));
	if (fill == NULL)
		die("out of memory");
	for (uint64_t i = 0; i < n; i++)
		b->keys_by_g[b->g_first[b->group_of[i]] + fill[b->group_of[i]]++] = i;
	free(fill);
	printf("placement: table %s (id %u), %u groups (%u with data); keys per data group:",
	       b->o.table, b->table_id, b->groups, b->dgroups);
	for (uint32_t g = 0; g < b->dgroups; g++)
		printf(" g%u=%llu", sh_cluster_partition_group(&conf, g),
		       (unsigned long long)(b->g_first[g + 1] - b->g_first[g]));
	printf("\n");
	bool cross = b->o.span == SPAN_CROSS;
	if (cross && b->dgroups < 2)
		die("--txn-span cross needs at least 2 data groups (there are %u)", b->dgroups);
	for (uint32_t g = 0; g < b->dgroups; g++) {
		uint64_t have = b->g_first[g + 1] - b->g_first[g];
		unsigned need =
		    cross ? (b->o.txn_items + b->dgroups - 1) / b->dgroups : b->o.txn_items;
		if (have < need || have == 0)
			die("data group %u has %llu keys, a transaction needs %u: raise --keys", g,
			    (unsigned long long)have, need);
	}
}

/* Transfer: after the run, every account read back (a consistent Scan) --
 * transfers move money, so the sum must still be keys x balance, and the
 * condition keeps every balance >= 0.  Printed, not asserted: a Scan is
 * not a transaction, so a transfer still finishing (unanswered when the
 * run ended) may show. */
static void audit_accounts(bench *b)
{
	char body[1024];
	char *start = NULL;
	long long sum = 0, min = 0;
	uint64_t items = 0;
	bool first = true;
	do {
		snprintf(body, sizeof(body), "{\"TableName\":\"%s\",\"ConsistentRead\":true%s%s}",
		         b->o.table, start ? ",\"ExclusiveStartKey\":" : "", start ? start : "");
		free(start);
		start = NULL;
		json_t *r = call_json(b, "Scan", body), *it;
		size_t at;
		json_array_foreach(json_object_get(r, "Items"), at, it)
		{
			const char *n =
			    json_string_value(json_object_get(json_object_get(it, "balance"), "N"));
			long long v = n ? strtoll(n, NULL, 10) : 0;
			sum += v;
			if (first || v < min)
				min = v;
			first = false;
			items++;
		}
		json_t *lek = json_object_get(r, "LastEvaluatedKey");
		if (lek != NULL && (start = json_dumps(lek, JSON_COMPACT)) == NULL)
			die("out of memory");
		json_decref(r);
	} while (start != NULL);
	long long want = (long long)b->o.keys * b->o.balance;
	printf("accounts: %llu read back, balances sum to %lld (%s %lld), the lowest is %lld%s\n",
	       (unsigned long long)items, sum, sum == want ? "as loaded:" : "MISMATCH: loaded",
	       want, min,
	       b->left_at_end ? " (some transfers were still unanswered when the run ended)" : "");
}

static bool submit_batch(bench *b, slot *s);

static void batch_cb(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	slot *s = arg;
	bench *b = s->b;
	b->in_flight--;
	bool again = code != SHOAL_OK;
	if (code == SHOAL_OK) {
		/* Response.batch_write_item (17) -> unprocessed_items (1) */
		const uint8_t *res, *un;
		size_t rlen, ulen;
		if (pb_field(body, len, 17, &res, &rlen) > 0 &&
		    pb_field(res, rlen, 1, &un, &ulen) > 0)
			again = true; /* puts are idempotent: send the whole batch again */
	}
	if (!again) {
		b->load_done += s->n;
		slot_put(b, s);
		return;
	}
	b->load_retries++;
	if (++s->tries >= 20) {
		fprintf(stderr, "shoal_bench: load: batch at item %llu failed 20 times: %s: %s\n",
		        (unsigned long long)s->first, err->exception, err->message);
		b->load_failed = true;
		slot_put(b, s);
		return;
	}
	if (!submit_batch(b, s)) {
		b->load_failed = true;
		slot_put(b, s);
	}
}

static bool submit_batch(bench *b, slot *s)
{
	size_t n = build_batch(b, s->first, s->n);
	shoal_error err;
	s->kind = K_BATCH;
	s->t0 = now_us();
	if (shoal_submit_pb(b->c, b->buf, n, batch_cb, s, &err) != SHOAL_OK) {
		fprintf(stderr, "shoal_bench: load: %s: %s\n", err.exception, err.message);
		return false;
	}
	b->in_flight++;
	return true;
}

static void load(bench *b)
{
	uint64_t t0 = now_us();
	while (!b->load_failed && (b->load_next < b->o.keys || b->in_flight > 0)) {
		while (b->load_next < b->o.keys && b->in_flight < LOAD_INFLIGHT) {
			slot *s = slot_get(b);
			if (s == NULL)
				break;
			s->first = b->load_next;
			uint64_t left = b->o.keys - b->load_next;
			s->n = left < BATCH ? (unsigned)left : BATCH;
			s->tries = 0;
			b->load_next += s->n;
			if (!submit_batch(b, s)) {
				b->load_failed = true;
				slot_put(b, s);
				break;
			}
		}
		shoal_poll(b->c, 100);
	}
	while (b->in_flight > 0)
		shoal_poll(b->c, 100);
	if (b->load_failed)
		die("load failed");
	double secs = (double)(now_us() - t0) / 1e6;
	char what[64];
	if (b->o.workload == W_TRANSFER)
		snprintf(what, sizeof(what), "balance %u", b->o.balance);
	else
		snprintf(what, sizeof(what), "%u B values", b->o.value_size);
	printf("load: %llu items (%s) in %.1f s = %.0f items/s (BatchWriteItem x%u, %u in "
	       "flight, %llu batches resent)\n",
	       (unsigned long long)b->load_done, what, secs, (double)b->load_done / secs, BATCH,
	       LOAD_INFLIGHT, (unsigned long long)b->load_retries);
}

/* One synchronous request of the workload's kind on key 0: checks that the
 * data is there before measuring. */
static void probe(bench *b)
{
	enum kind kind = b->o.workload == W_QUERY ? K_QUERY : K_GET;
	size_t n = build_one(b, kind, 0);
	uint8_t *resp = NULL;
	size_t rlen = 0;
	shoal_error err;
	int rc = shoal_call_pb(b->c, b->buf, n, &resp, &rlen, &err);
	if (rc != SHOAL_OK)
		die("probe %s: %s: %s", kind == K_QUERY ? "Query" : "GetItem", err.exception,
		    err.message);
	uint64_t misses = b->misses, items = b->query_items;
	inspect(b, kind, resp, rlen);
	shoal_free(resp);
	if (kind == K_GET && b->misses != misses)
		printf("warning: probe GetItem of key 0 found no item\n");
	if (kind == K_QUERY)
		printf("probe: query of collection 0 returned %llu items (expected %u)\n",
		       (unsigned long long)(b->query_items - items), b->o.per_coll);
	b->misses = misses;
	b->query_items = items;
	b->queries = 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: shoal_bench [options]\n"
	    "  --endpoint URLS       router(s), or file://<dir>/router.endpoint "
	    "(default $SHOAL_ENDPOINT, else %s)\n"
	    "  --workload W          put | get | query | mixed | txwrite | txget | transfer\n"
	    "                        (default put)\n"
	    "  --table NAME          table, created if missing (default bench; transfer:\n"
	    "                        bench_accounts)\n"
	    "  --keys N              key space: items (default 100000; transfer: 1000 accounts)\n"
	    "  --dist D              uniform | zipfian (theta 0.99) (default uniform)\n"
	    "  --concurrency C       requests in flight; 1 = one synchronous client (default 64)\n"
	    "  --duration S          measured seconds (default 20)\n"
	    "  --warmup S            unrecorded seconds first (default 2)\n"
	    "  --value-size B        bytes of the value attribute (default 100)\n"
	    "  --items-per-collection K  items per PK (default 1; 100 for query)\n"
	    "  --read-ratio R        mixed: share of GetItem (default 0.5)\n"
	    "  --consistent          strongly consistent GetItem/Query\n"
	    "  --load auto|yes|no    fill the key space first (auto: get, query, mixed)\n"
	    "  --load-only           create the table, load the keys, probe, exit\n"
	    "  --retries N           client retries of ServiceUnavailable (default 0)\n"
	    "  --pipeline N          libshoal's pipelining lanes (shoal_options.pipeline;\n"
	    "                        default the library's, 0: one message per request)\n"
	    "  --seed N              PRNG seed (default $SHOAL_SEED, else time)\n"
	    "  --txn-items N         txwrite/txget: items per transaction, 1..100 (default 2)\n"
	    "  --txn-span S          txwrite/txget: collection (one partition key) | group\n"
	    "                        (keys of one storage group) | cross (keys in different\n"
	    "                        groups, round robin) (default cross)\n"
	    "  --groups N            storage groups of the cluster (default: ClusterStatus)\n"
	    "  --balance B           transfer: every account's balance at load (default 1000)\n"
	    "  --max-amount A        transfer: amounts are 1..A (default 10)\n",
	    SHOAL_DEFAULT_ENDPOINT);
}

static double num_arg(const char *name, const char *v, double lo, double hi)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || d < lo || d > hi)
		die("%s: bad value \"%s\" (expected %g .. %g)", name, v, lo, hi);
	return d;
}

static void parse_args(opts *o, int argc, char **argv)
{
	enum {
		O_ENDPOINT = 256,
		O_WORKLOAD,
		O_TABLE,
		O_KEYS,
		O_DIST,
		O_CONC,
		O_DURATION,
		O_WARMUP,
		O_VALUE,
		O_PERCOLL,
		O_RATIO,
		O_CONSISTENT,
		O_LOAD,
		O_RETRIES,
		O_PIPELINE,
		O_SEED,
		O_LOAD_ONLY,
		O_TXN_ITEMS,
		O_TXN_SPAN,
		O_GROUPS,
		O_BALANCE,
		O_MAX_AMOUNT,
		O_HELP
	};
	static const struct option longs[] = {
	    {"endpoint", required_argument, NULL, O_ENDPOINT},
	    {"workload", required_argument, NULL, O_WORKLOAD},
	    {"table", required_argument, NULL, O_TABLE},
	    {"keys", required_argument, NULL, O_KEYS},
	    {"dist", required_argument, NULL, O_DIST},
	    {"concurrency", required_argument, NULL, O_CONC},
	    {"duration", required_argument, NULL, O_DURATION},
	    {"warmup", required_argument, NULL, O_WARMUP},
	    {"value-size", required_argument, NULL, O_VALUE},
	    {"items-per-collection", required_argument, NULL, O_PERCOLL},
	    {"read-ratio", required_argument, NULL, O_RATIO},
	    {"consistent", no_argument, NULL, O_CONSISTENT},
	    {"load", required_argument, NULL, O_LOAD},
	    {"retries", required_argument, NULL, O_RETRIES},
	    {"pipeline", required_argument, NULL, O_PIPELINE},
	    {"seed", required_argument, NULL, O_SEED},
	    {"load-only", no_argument, NULL, O_LOAD_ONLY},
	    {"txn-items", required_argument, NULL, O_TXN_ITEMS},
	    {"txn-span", required_argument, NULL, O_TXN_SPAN},
	    {"groups", required_argument, NULL, O_GROUPS},
	    {"balance", required_argument, NULL, O_BALANCE},
	    {"max-amount", required_argument, NULL, O_MAX_AMOUNT},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof(*o));
	o->endpoint = getenv("SHOAL_ENDPOINT");
	o->table = "bench";
	o->workload = W_PUT;
	o->keys = 100000;
	o->conc = 64;
	o->duration = 20;
	o->warmup = 2;
	o->value_size = 100;
	o->read_ratio = 0.5;
	o->load = -1;
	o->pipeline = -1;
	o->txn_items = 2;
	o->span = SPAN_CROSS;
	o->balance = 1000;
	o->max_amount = 10;
	bool keys_given = false, table_given = false;
	const char *seed = getenv("SHOAL_SEED");
	o->seed = seed != NULL && *seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ now_us();
	int per_coll = -1;
	int c;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case O_ENDPOINT:
			o->endpoint = optarg;
			break;
		case O_WORKLOAD: {
			unsigned i;
			for (i = 0; i < W__COUNT; i++)
				if (strcmp(optarg, workload_names[i]) == 0)
					break;
			if (i == W__COUNT)
				die("--workload: put, get, query, mixed, txwrite, txget or "
				    "transfer, not \"%s\"",
				    optarg);
			o->workload = (enum workload)i;
			break;
		}
		case O_TABLE:
			if (optarg[0] == '\0' || strlen(optarg) > 255 ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                   "0123456789_.-") != strlen(optarg))
				die("--table: 1..255 of [a-zA-Z0-9_.-], not \"%s\"", optarg);
			o->table = optarg;
			table_given = true;
			break;
		case O_KEYS:
			o->keys = (uint64_t)num_arg("--keys", optarg, 1, 1e9);
			keys_given = true;
			break;
		case O_DIST:
			if (strcmp(optarg, "uniform") == 0)
				o->zipfian = false;
			else if (strcmp(optarg, "zipfian") == 0)
				o->zipfian = true;
			else
				die("--dist: uniform or zipfian, not \"%s\"", optarg);
			break;
		case O_CONC:
			o->conc = (unsigned)num_arg("--concurrency", optarg, 1, MAX_CONC);
			break;
		case O_DURATION:
			o->duration = num_arg("--duration", optarg, 0.1, 1e6);
			break;
		case O_WARMUP:
			o->warmup = num_arg("--warmup", optarg, 0, 1e6);
			break;
		case O_VALUE:
			o->value_size = (unsigned)num_arg("--value-size", optarg, 0, 350000);
			break;
		case O_PERCOLL:
			per_coll = (int)num_arg("--items-per-collection", optarg, 1, 1e6);
			break;
		case O_RATIO:
			o->read_ratio = num_arg("--read-ratio", optarg, 0, 1);
			break;
		case O_CONSISTENT:
			o->consistent = true;
			break;
		case O_LOAD:
			if (strcmp(optarg, "auto") == 0)
				o->load = -1;
			else if (strcmp(optarg, "yes") == 0)
				o->load = 1;
			else if (strcmp(optarg, "no") == 0)
				o->load = 0;
			else
				die("--load: auto, yes or no, not \"%s\"", optarg);
			break;
		case O_RETRIES:
			o->retries = (int)num_arg("--retries", optarg, 0, 100);
			break;
		case O_PIPELINE:
			o->pipeline = (int)num_arg("--pipeline", optarg, 0, 1024);
			break;
		case O_SEED:
			o->seed = strtoull(optarg, NULL, 0);
			break;
		case O_LOAD_ONLY:
			o->load_only = true;
			o->load = 1;
			break;
		case O_TXN_ITEMS:
			o->txn_items = (unsigned)num_arg("--txn-items", optarg, 1, TXN_MAX);
			break;
		case O_TXN_SPAN: {
			unsigned i;
			for (i = 0; i < 3; i++)
				if (strcmp(optarg, span_names[i]) == 0)
					break;
			if (i == 3)
				die("--txn-span: collection, group or cross, not \"%s\"", optarg);
			o->span = (enum span)i;
			break;
		}
		case O_GROUPS:
			o->groups = (unsigned)num_arg("--groups", optarg, 1, SH_MAX_GROUPS);
			break;
		case O_BALANCE:
			o->balance = (unsigned)num_arg("--balance", optarg, 0, 1e9);
			break;
		case O_MAX_AMOUNT:
			o->max_amount = (unsigned)num_arg("--max-amount", optarg, 1, 1e9);
			break;
		case O_HELP:
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind != argc)
		die("unexpected argument \"%s\"", argv[optind]);
	o->per_coll = per_coll > 0 ? (unsigned)per_coll : o->workload == W_QUERY ? 100 : 1;
	if (o->keys < o->per_coll)
		o->keys = o->per_coll;
	if (o->workload == W_TRANSFER) {
		/* two Updates in two groups, over accounts of their own table */
		o->txn_items = 2;
		o->span = SPAN_CROSS;
		if (!keys_given)
			o->keys = 1000;
		if (!table_given)
			o->table = "bench_accounts";
		o->per_coll = 1;
	}
	if (o->load < 0)
		o->load = o->workload != W_PUT && o->workload != W_TXWRITE;
	if (o->load_only)
		o->load = 1;
	/* file://D/router.endpoint goes to libshoal as is: it reads the file
	 * and finds the cluster's CA for tls+tcp:// routers. */
}

int main(int argc, char **argv)
{
	static bench b; /* large: keep it off the stack */
	parse_args(&b.o, argc, argv);
	rng_state = b.o.seed;
	uint64_t space = b.o.workload == W_QUERY ? b.o.keys / b.o.per_coll : b.o.keys;
	if (b.o.zipfian)
		zipf_init(&b.z, space, 0.99);
	printf("shoal_bench: workload %s, %u in flight%s, %s over %llu %s, table %s, seed %llu\n",
	       workload_names[b.o.workload], b.o.conc, b.o.conc == 1 ? " (synchronous)" : "",
	       b.o.zipfian ? "zipfian(0.99)" : "uniform", (unsigned long long)space,
	       b.o.workload == W_QUERY ? "collections" : "keys", b.o.table,
	       (unsigned long long)b.o.seed);
	if (b.o.zipfian)
		printf("zipfian: the hottest key gets %.1f%% of requests, the top 1%% of keys "
		       "%.0f%%\n",
		       100.0 / b.z.zetan, 100.0 * zipf_share(&b.z, (space + 99) / 100));

	/* SHOAL_BENCH_TLS_ENGINE=shoal: the client's nng TLS is Shoal's engine
	 * (one record per message), as the router's and the nodes' are, to
	 * measure what nng's own engine costs a client (bench-tls.sh). */
	const char *engine = getenv("SHOAL_BENCH_TLS_ENGINE");
	if (engine != NULL && strcmp(engine, "shoal") == 0) {
		char em[SH_ERRMSG_SIZE];
		if (shoal_tls_engine_install(em) != SHOAL_OK)
			die("%s", em);
		printf("shoal_bench: Shoal's TLS engine\n");
	}
	shoal_options so;
	shoal_options_init(&so);
	so.retries = b.o.retries;
	so.throttle_retries = 0; /* raw behaviour: a throttled request counts as an error */
	if (b.o.pipeline >= 0)
		so.pipeline = b.o.pipeline;
	char m[SH_ERRMSG_SIZE];
	if (shoal_client_new(b.o.endpoint, &so, &b.c, m) != SHOAL_OK)
		die("%s", m);

	b.values_len = 65536 + b.o.value_size;
	b.values = malloc(b.values_len);
	b.nslots = b.o.conc > LOAD_INFLIGHT ? b.o.conc : LOAD_INFLIGHT;
	b.slots = calloc(b.nslots, sizeof(*b.slots));
	if (b.values == NULL || b.slots == NULL)
		die("out of memory");
	for (size_t i = 0; i < b.values_len; i++)
		b.values[i] = (char)('a' + rng_next() % 26);
	for (unsigned i = b.nslots; i-- > 0;) {
		b.slots[i].b = &b;
		slot_put(&b, &b.slots[i]);
	}
	templates_init(&b);

	ensure_table(&b);
	if (b.o.workload >= W_TXWRITE && b.o.span != SPAN_COLLECTION)
		placement(&b);
	if (b.o.load)
		load(&b);
	if (b.o.workload != W_PUT && b.o.workload != W_TXWRITE)
		probe(&b);
	if (!b.o.load_only) {
		run(&b);
		if (b.o.workload == W_TRANSFER)
			audit_accounts(&b);
	}

	shoal_client_free(b.c);
	free(b.values);
	free(b.slots);
	free(b.buf);
	free(b.group_of);
	free(b.keys_by_g);
	free(b.g_first);
	return 0;
}
