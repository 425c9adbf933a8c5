/*
 * gsi_bench -- global secondary index figures of a running cluster
 * (build/bin/gsi_bench; `make bench-cluster` runs both modes).
 *
 *   gsi_bench --mode lag [--rate R] [--duration S] [--endpoint E]
 *       Propagation lag: PutItem at a steady open-loop rate R/s (default
 *       1000) on a table with a KEYS_ONLY GSI; every 5 ms a sampler takes the
 *       most recently acknowledged put and queries the index (Select COUNT,
 *       the entry's exact key) until the entry is there.  Lag = time of the
 *       answer that shows it - time the put was acknowledged; it therefore
 *       includes up to one index query round trip (~0.5 ms here) of
 *       polling granularity.  Prints p50/p90/p99/max of the samples.
 *
 *   gsi_bench --mode hot --shards N [--duration S] [--concurrency C]
 *       One hot index key: every item has GSI hash key "HOT" (index with
 *       WriteShards N).  PutItem as fast as C requests in flight allow for S
 *       seconds, then a COUNT query of the hot key is repeated until it sees
 *       every acknowledged put.  Prints the base write rate, throttled writes
 *       (ProvisionedThroughputExceededException: the index fell behind), and
 *       the rate at which the one hot index key absorbed entries
 *       (acknowledged puts / time from the first put until the index had
 *       them all).
 *
 * Output: a human line and a `RESULT mode=...` line.  Seeds: none (keys are
 * sequential).  A benchmark prints figures and asserts nothing; exit 1 only
 * when it cannot run.  Single thread: shoal_poll runs the callbacks here.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"

#define MAX_INFLIGHT 256
#define MAX_SAMPLES  200000

static shoal_client *cl;
static const char *mode = "lag";
static double rate = 1000, duration = 10;
static unsigned shards = 1, conc = 64;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "gsi_bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* A blocking JSON call; returns the parsed answer, or NULL with *code set. */
static json_t *call(const char *op, const char *body, int *code)
{
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(cl, op, body, &out, &err);
	if (code != NULL)
		*code = rc;
	if (rc != SHOAL_OK) {
		if (code == NULL)
			die("%s: %s: %s", op, err.exception, err.message);
		return NULL;
	}
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	return j;
}

/* Creates table `name` with index "byg" (gpk S, gsk N, KEYS_ONLY, shards);
 * deletes an older one of that name first, so every run starts empty. */
static void fresh_table(const char *name, unsigned n_shards)
{
	char body[2048];
	int code;
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\"}", name);
	json_t *j = call("DeleteTable", body, &code);
	json_decref(j);
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"%s\",\"AttributeDefinitions\":["
	         "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
	         "{\"AttributeName\":\"gpk\",\"AttributeType\":\"S\"},"
	         "{\"AttributeName\":\"gsk\",\"AttributeType\":\"N\"}],"
	         "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"}],"
	         "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"byg\",\"KeySchema\":["
	         "{\"AttributeName\":\"gpk\",\"KeyType\":\"HASH\"},"
	         "{\"AttributeName\":\"gsk\",\"KeyType\":\"RANGE\"}],"
	         "\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"},\"WriteShards\":%u}],"
	         "\"BillingMode\":\"PAY_PER_REQUEST\"}",
	         name, n_shards);
	/* A DeleteTable of the same name may still be finishing: retry a while. */
	uint64_t deadline = now_us() + 30000000u;
	for (;;) {
		j = call("CreateTable", body, &code);
		if (j != NULL)
			break;
		if (code != SHOAL_E_IN_USE || now_us() > deadline)
			die("CreateTable %s failed (code %d)", name, code);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	json_decref(j);
}

/* ------------------------------------------------------------------------ */

typedef struct put_slot {
	uint64_t i, t0;
	bool busy;
} put_slot;

static put_slot slots[MAX_INFLIGHT];
static unsigned in_flight;
static uint64_t acked, throttled, failed, last_acked_i, last_acked_t;
static bool have_acked;
static const char *table;
static const char *hot_key; /* NULL: gpk = G<i % 64> */

static void put_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	(void)body, (void)len, (void)err;
	put_slot *s = arg;
	s->busy = false;
	in_flight--;
	if (code == SHOAL_OK) {
		acked++;
		if (!have_acked || s->i > last_acked_i) {
			last_acked_i = s->i;
			last_acked_t = now_us();
			have_acked = true;
		}
	} else if (code == SHOAL_E_THROUGHPUT) {
		throttled++;
	} else {
		failed++;
	}
}

static void gpk_of(uint64_t i, char *out, size_t cap)
{
	if (hot_key != NULL)
		snprintf(out, cap, "%s", hot_key);
	else
		snprintf(out, cap, "G%" PRIu64, i % 64);
}

static bool submit_put(uint64_t i)
{
	put_slot *s = NULL;
	for (unsigned k = 0; k < MAX_INFLIGHT && s == NULL; k++)
		if (!slots[k].busy)
			s = &slots[k];
	if (s == NULL)
		return false;
	char gpk[32], body[512];
	gpk_of(i, gpk, sizeof(gpk));
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"%s\",\"Item\":{\"PK\":{\"S\":\"k%" PRIu64 "\"},\"gpk\":{\"S\":"
	         "\"%s\"},\"gsk\":{\"N\":\"%" PRIu64 "\"},\"v\":{\"S\":\"0123456789abcdef\"}}}",
	         table, i, gpk, i);
	s->i = i;
	s->t0 = now_us();
	s->busy = true;
	shoal_error err;
	if (shoal_submit_json(cl, "PutItem", body, put_done, s, &err) != SHOAL_OK)
		die("PutItem submit: %s", err.message);
	in_flight++;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Lag sampler                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t *samples;
static size_t n_samples;
static bool probing;
static uint64_t probe_i, probe_ack_t;

static void submit_probe(void);

static void probe_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	(void)arg, (void)len, (void)err;
	if (code == SHOAL_OK && body != NULL) {
		json_t *j = json_loads(body, 0, NULL);
		json_int_t count = json_integer_value(json_object_get(j, "Count"));
		json_decref(j);
		if (count >= 1) {
			if (n_samples < MAX_SAMPLES)
				samples[n_samples++] = now_us() - probe_ack_t;
			probing = false;
			return;
		}
	}
	submit_probe(); /* not visible yet (or an error): ask again */
}

static void submit_probe(void)
{
	char gpk[32], body[512];
	gpk_of(probe_i, gpk, sizeof(gpk));
	snprintf(
	    body, sizeof(body),
	    "{\"TableName\":\"%s\",\"IndexName\":\"byg\",\"KeyConditionExpression\":\"gpk = :p "
	    "AND gsk = :s\",\"ExpressionAttributeValues\":{\":p\":{\"S\":\"%s\"},\":s\":{"
	    "\"N\":\"%" PRIu64 "\"}},\"Select\":\"COUNT\"}",
	    table, gpk, probe_i);
	shoal_error err;
	if (shoal_submit_json(cl, "Query", body, probe_done, NULL, &err) != SHOAL_OK)
		die("Query submit: %s", err.message);
	probing = true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct_ms(double p)
{
	if (n_samples == 0)
		return 0;
	size_t k = (size_t)(p * (double)(n_samples - 1) + 0.5);
	return (double)samples[k] / 1000.0;
}

static void run_lag(void)
{
	table = "gsibench_lag";
	fresh_table(table, 1);
	samples = calloc(MAX_SAMPLES, sizeof(*samples));
	if (samples == NULL)
		die("out of memory");
	uint64_t t0 = now_us(), end = t0 + (uint64_t)(duration * 1e6), next_sample = t0;
	uint64_t sent = 0, late = 0;
	while (now_us() < end) {
		uint64_t now = now_us();
		/* Open loop: the puts due by now, unless the in-flight cap is hit. */
		uint64_t due = (uint64_t)((double)(now - t0) * rate / 1e6);
		while (sent < due) {
			if (!submit_put(sent)) {
				late++;
				break;
			}
			sent++;
		}
		if (!probing && have_acked && now >= next_sample) {
			probe_i = last_acked_i;
			probe_ack_t = last_acked_t;
			next_sample = now + 5000;
			submit_probe();
		}
		shoal_poll(cl, 1);
	}
	while (in_flight > 0 || probing)
		shoal_poll(cl, 100);
	double secs = (double)(now_us() - t0) / 1e6;
	qsort(samples, n_samples, sizeof(*samples), cmp_u64);
	printf("gsi lag: %.0f puts/s offered, %.0f/s acknowledged, %zu samples: p50 %.2f ms, p90 "
	       "%.2f ms, p99 %.2f ms, max %.2f ms; throttled %" PRIu64 ", failed %" PRIu64
	       ", behind schedule %" PRIu64 "\n",
	       rate, (double)acked / secs, n_samples, pct_ms(0.5), pct_ms(0.9), pct_ms(0.99),
	       pct_ms(1.0), throttled, failed, late);
	printf("RESULT mode=lag rate=%.0f acked_s=%.0f samples=%zu lag_p50_ms=%.2f lag_p90_ms=%.2f "
	       "lag_p99_ms=%.2f lag_max_ms=%.2f throttled=%" PRIu64 " failed=%" PRIu64 "\n",
	       rate, (double)acked / secs, n_samples, pct_ms(0.5), pct_ms(0.9), pct_ms(0.99),
	       pct_ms(1.0), throttled, failed);
	free(samples);
}

/* Entries of the hot key in the index (all pages of a COUNT query). */
static uint64_t hot_count(void)
{
	uint64_t total = 0;
	json_t *start = NULL;
	for (;;) {
		json_t *req =
		    json_pack("{s:s,s:s,s:s,s:{s:{s:s}},s:s}", "TableName", table, "IndexName",
		              "byg", "KeyConditionExpression", "gpk = :p",
		              "ExpressionAttributeValues", ":p", "S", hot_key, "Select", "COUNT");
		if (start != NULL)
			json_object_set_new(req, "ExclusiveStartKey", start);
		char *body = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		json_t *j = call("Query", body, NULL);
		free(body);
		total += (uint64_t)json_integer_value(json_object_get(j, "Count"));
		start = json_object_get(j, "LastEvaluatedKey");
		json_incref(start);
		json_decref(j);
		if (start == NULL)
			return total;
	}
}

static void run_hot(void)
{
	static char name[64];
	snprintf(name, sizeof(name), "gsibench_hot%u", shards);
	table = name;
	hot_key = "HOT";
	fresh_table(table, shards);
	uint64_t t0 = now_us(), end = t0 + (uint64_t)(duration * 1e6), sent = 0;
	while (now_us() < end) {
		while (in_flight < conc && submit_put(sent))
			sent++;
		shoal_poll(cl, 1);
	}
	while (in_flight > 0)
		shoal_poll(cl, 100);
	uint64_t t_puts = now_us();
	double put_secs = (double)(t_puts - t0) / 1e6;
	uint64_t seen = 0, deadline = t_puts + 300000000u;
	while ((seen = hot_count()) < acked && now_us() < deadline) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	double idx_secs = (double)(now_us() - t0) / 1e6;
	printf("gsi hot key, WriteShards %u: %.0f puts/s acknowledged (%" PRIu64 " in %.1f s, "
	       "throttled %" PRIu64 ", failed %" PRIu64 "); the hot index key held %" PRIu64
	       " entries after %.1f s: %.0f entries/s\n",
	       shards, (double)acked / put_secs, acked, put_secs, throttled, failed, seen, idx_secs,
	       (double)seen / idx_secs);
	printf("RESULT mode=hot shards=%u conc=%u puts_s=%.0f acked=%" PRIu64 " throttled=%" PRIu64
	       " failed=%" PRIu64 " index_entries=%" PRIu64 " index_entries_s=%.0f complete=%s\n",
	       shards, conc, (double)acked / put_secs, acked, throttled, failed, seen,
	       (double)seen / idx_secs, seen >= acked ? "yes" : "no");
}

int main(int argc, char **argv)
{
	const char *endpoint = getenv("SHOAL_ENDPOINT");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL)
			die("usage: gsi_bench --mode lag|hot [--rate R] [--shards N] [--duration "
			    "S] "
			    "[--concurrency C] [--endpoint E]");
		if (strcmp(a, "--mode") == 0)
			mode = v;
		else if (strcmp(a, "--rate") == 0)
			rate = atof(v);
		else if (strcmp(a, "--shards") == 0)
			shards = (unsigned)atoi(v);
		else if (strcmp(a, "--duration") == 0)
			duration = atof(v);
		else if (strcmp(a, "--concurrency") == 0)
			conc = (unsigned)atoi(v);
		else if (strcmp(a, "--endpoint") == 0)
			endpoint = v;
		else
			die("unknown option %s", a);
		i++;
	}
	if (rate <= 0 || duration <= 0 || shards < 1 || conc < 1 || conc > MAX_INFLIGHT)
		die("bad --rate, --duration, --shards or --concurrency");
	char errmsg[SH_ERRMSG_SIZE];
	shoal_options so;
	shoal_options_init(&so);
	so.throttle_retries = 0; /* raw behaviour: measure the throttling, do not hide it */
	if (shoal_client_new(endpoint, &so, &cl, errmsg) != SHOAL_OK)
		die("%s", errmsg);
	if (strcmp(mode, "lag") == 0)
		run_lag();
	else if (strcmp(mode, "hot") == 0)
		run_hot();
	else
		die("unknown --mode %s (lag or hot)", mode);
	shoal_client_free(cl);
	return 0;
}
