/*
 * stream_bench -- DynamoDB Streams: how soon a write shows in GetRecords, on
 * a running cluster (build/bin/stream_bench).
 *
 *   stream_bench [--rate R] [--duration S] [--poll-ms P] [--endpoint E]
 *       PutItem at a steady open-loop rate R/s (default 1000) on a table
 *       with a KEYS_ONLY stream, while a consumer keeps one GetRecords in
 *       flight per shard (after an answer without records it waits P ms,
 *       default 5, before asking again, as a consumer that polls would).
 *       Lag of a record = time of the GetRecords answer that carries it -
 *       time its put was acknowledged (0 when the record came first), so it
 *       includes up to P ms plus one GetRecords round trip of polling
 *       granularity.  Every acknowledged put must show up exactly once;
 *       prints p50/p90/p99/max over all of them.
 *
 * Output: a human line and a `RESULT` line.  A benchmark prints figures and
 * asserts nothing; exit 1 only when it cannot run (or a record is missing or
 * repeated, which is a bug).  Single thread: shoal_poll runs the callbacks.
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
#define MAX_SHARDS   64
#define TABLE        "streambench"

static shoal_client *cl;
static double rate = 1000, duration = 10;
static unsigned poll_ms = 5;

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
	fprintf(stderr, "stream_bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

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

/* ------------------------------------------------------------------------ */

static uint64_t n_max;    /* puts that may be sent */
static uint64_t *ack_us;  /* [n_max]: when put i was acknowledged (0: not) */
static uint64_t *seen_us; /* [n_max]: when its record arrived (0: not) */
static uint32_t *seen_n;  /* [n_max]: how many records it had */
static unsigned in_flight;
static uint64_t acked, failed;

typedef struct put_slot {
	uint64_t i;
	bool busy;
} put_slot;
static put_slot slots[MAX_INFLIGHT];

static void put_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	(void)body, (void)len, (void)err;
	put_slot *s = arg;
	s->busy = false;
	in_flight--;
	if (code == SHOAL_OK) {
		acked++;
		ack_us[s->i] = now_us();
	} else {
		failed++;
	}
}

static bool submit_put(uint64_t i)
{
	put_slot *s = NULL;
	for (unsigned k = 0; k < MAX_INFLIGHT && s == NULL; k++)
		if (!slots[k].busy)
			s = &slots[k];
	if (s == NULL)
		return false;
	char body[256];
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"" TABLE "\",\"Item\":{\"PK\":{\"S\":\"k%" PRIu64 "\"},\"v\":{"
	         "\"S\":\"0123456789abcdef\"}}}",
	         i);
	s->i = i;
	s->busy = true;
	shoal_error err;
	if (shoal_submit_json(cl, "PutItem", body, put_done, s, &err) != SHOAL_OK)
		die("PutItem submit: %s", err.message);
	in_flight++;
	return true;
}

/* One consumer per shard: its iterator and whether a GetRecords is out. */
typedef struct shard {
	char *it;
	bool busy;
	uint64_t next_at; /* after an empty answer: not before this */
} shard;
static shard shards[MAX_SHARDS];
static unsigned n_shards;

static void records_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	(void)len;
	shard *s = arg;
	s->busy = false;
	if (code != SHOAL_OK)
		die("GetRecords: %s: %s", err->exception, err->message);
	uint64_t now = now_us();
	json_t *j = json_loads(body, 0, NULL);
	json_t *recs = json_object_get(j, "Records"), *r;
	size_t k;
	json_array_foreach(recs, k, r)
	{
		const char *pk = json_string_value(json_object_get(
		    json_object_get(json_object_get(json_object_get(r, "dynamodb"), "Keys"), "PK"),
		    "S"));
		uint64_t i = pk != NULL ? strtoull(pk + 1, NULL, 10) : n_max;
		if (i >= n_max)
			die("a record of an unknown key");
		seen_n[i]++;
		if (seen_us[i] == 0)
			seen_us[i] = now;
	}
	free(s->it);
	s->it = strdup(json_string_value(json_object_get(j, "NextShardIterator")));
	s->next_at = json_array_size(recs) == 0 ? now + poll_ms * 1000u : now;
	json_decref(j);
}

static void pump_consumers(void)
{
	uint64_t now = now_us();
	for (unsigned k = 0; k < n_shards; k++) {
		shard *s = &shards[k];
		if (s->busy || now < s->next_at)
			continue;
		char body[4096];
		snprintf(body, sizeof(body), "{\"ShardIterator\":\"%s\"}", s->it);
		shoal_error err;
		if (shoal_submit_json(cl, "GetRecords", body, records_done, s, &err) != SHOAL_OK)
			die("GetRecords submit: %s", err.message);
		s->busy = true;
	}
}

static void setup_stream(void)
{
	int code;
	json_decref(call("DeleteTable", "{\"TableName\":\"" TABLE "\"}", &code));
	const char *create =
	    "{\"TableName\":\"" TABLE "\",\"AttributeDefinitions\":[{\"AttributeName\":\"PK\","
	    "\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":"
	    "\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\",\"StreamSpecification\":{"
	    "\"StreamEnabled\":true,\"StreamViewType\":\"KEYS_ONLY\"}}";
	uint64_t deadline = now_us() + 30000000u;
	json_t *j;
	while ((j = call("CreateTable", create, &code)) == NULL) {
		if (code != SHOAL_E_IN_USE || now_us() > deadline)
			die("CreateTable failed (code %d)", code);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL); /* the DeleteTable of an earlier run is finishing */
	}
	const char *arn = json_string_value(
	    json_object_get(json_object_get(j, "TableDescription"), "LatestStreamArn"));
	if (arn == NULL)
		die("CreateTable answered no LatestStreamArn");
	char body[1024];
	snprintf(body, sizeof(body), "{\"StreamArn\":\"%s\"}", arn);
	json_t *d = call("DescribeStream", body, NULL);
	json_t *list = json_object_get(json_object_get(d, "StreamDescription"), "Shards"), *sh;
	size_t k;
	json_array_foreach(list, k, sh)
	{
		if (n_shards == MAX_SHARDS)
			break;
		snprintf(body, sizeof(body),
		         "{\"StreamArn\":\"%s\",\"ShardId\":\"%s\",\"ShardIteratorType\":"
		         "\"TRIM_HORIZON\"}",
		         arn, json_string_value(json_object_get(sh, "ShardId")));
		json_t *it = call("GetShardIterator", body, NULL);
		shards[n_shards++].it =
		    strdup(json_string_value(json_object_get(it, "ShardIterator")));
		json_decref(it);
	}
	json_decref(d);
	json_decref(j);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *endpoint = getenv("SHOAL_ENDPOINT");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL)
			die("usage: stream_bench [--rate R] [--duration S] [--poll-ms P] "
			    "[--endpoint E]");
		if (strcmp(a, "--rate") == 0)
			rate = atof(v);
		else if (strcmp(a, "--duration") == 0)
			duration = atof(v);
		else if (strcmp(a, "--poll-ms") == 0)
			poll_ms = (unsigned)atoi(v);
		else if (strcmp(a, "--endpoint") == 0)
			endpoint = v;
		else
			die("unknown option %s", a);
		i++;
	}
	if (rate <= 0 || duration <= 0 || rate * duration > 5e7)
		die("bad --rate or --duration");
	if (endpoint == NULL)
		endpoint = "tcp://127.0.0.1:8100";
	char msg[512];
	if (shoal_client_new(endpoint, NULL, &cl, msg) != SHOAL_OK)
		die("%s", msg);
	n_max = (uint64_t)(rate * duration) + 1;
	ack_us = calloc(n_max, sizeof(*ack_us));
	seen_us = calloc(n_max, sizeof(*seen_us));
	seen_n = calloc(n_max, sizeof(*seen_n));
	if (ack_us == NULL || seen_us == NULL || seen_n == NULL)
		die("out of memory");
	setup_stream();

	uint64_t t0 = now_us(), end = t0 + (uint64_t)(duration * 1e6), sent = 0, late = 0;
	while (now_us() < end) {
		uint64_t due = (uint64_t)((double)(now_us() - t0) * rate / 1e6);
		if (due > n_max)
			due = n_max;
		while (sent < due) {
			if (!submit_put(sent)) {
				late++;
				break;
			}
			sent++;
		}
		pump_consumers();
		shoal_poll(cl, 1);
	}
	while (in_flight > 0)
		shoal_poll(cl, 100);
	double secs = (double)(now_us() - t0) / 1e6;
	/* Until every acknowledged put's record is in (30 s at most). */
	uint64_t deadline = now_us() + 30000000u, missing;
	do {
		pump_consumers();
		shoal_poll(cl, 1);
		missing = 0;
		for (uint64_t i = 0; i < sent; i++)
			missing += ack_us[i] != 0 && seen_n[i] == 0;
	} while (missing > 0 && now_us() < deadline);
	for (unsigned k = 0; k < n_shards; k++)
		while (shards[k].busy)
			shoal_poll(cl, 100);
	uint64_t *lag = calloc(sent + 1, sizeof(*lag)), n = 0, twice = 0;
	for (uint64_t i = 0; i < sent; i++) {
		twice += seen_n[i] > 1;
		if (ack_us[i] != 0 && seen_n[i] > 0)
			lag[n++] = seen_us[i] > ack_us[i] ? seen_us[i] - ack_us[i] : 0;
	}
	qsort(lag, n, sizeof(*lag), cmp_u64);
#define PCT(p) (n > 0 ? (double)lag[(size_t)((p) * (double)(n - 1) + 0.5)] / 1000.0 : 0.0)
	printf("stream lag: %.0f puts/s offered, %.0f/s acknowledged, %" PRIu64
	       " records over %u shards: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms "
	       "(poll %u ms); failed %" PRIu64 ", behind schedule %" PRIu64 ", missing %" PRIu64
	       ", repeated %" PRIu64 "\n",
	       rate, (double)acked / secs, n, n_shards, PCT(0.5), PCT(0.9), PCT(0.99), PCT(1.0),
	       poll_ms, failed, late, missing, twice);
	printf("RESULT rate=%.0f acked_s=%.0f records=%" PRIu64 " lag_p50_ms=%.2f lag_p90_ms=%.2f "
	       "lag_p99_ms=%.2f lag_max_ms=%.2f missing=%" PRIu64 " repeated=%" PRIu64 "\n",
	       rate, (double)acked / secs, n, PCT(0.5), PCT(0.9), PCT(0.99), PCT(1.0), missing,
	       twice);
	free(lag);
	shoal_client_free(cl);
	return missing > 0 || twice > 0 ? 1 : 0;
}
