/*
 * http_bench -- load generator for the router's DynamoDB HTTP endpoint
 * (build/bin/http_bench), the HTTP counterpart of shoal_bench.
 *
 *   http_bench --url http://127.0.0.1:8000 --workload get|put
 *              [--concurrency 64] [--duration 20] [--warmup 2] [--keys 100000]
 *              [--value-size 100] [--table bench] [--seed N]
 *
 * C keep-alive connections (nng's HTTP client), each with one request in
 * flight: POST / with X-Amz-Target DynamoDB_20120810.GetItem or PutItem and
 * a DynamoDB JSON body, like an SDK sends (unsigned: the endpoint accepts
 * that unless it verifies SigV4).  Keys are shoal_bench's (PK "c<i>", SK
 * "000000", attribute v of --value-size bytes), so a get run finds the keys
 * a shoal_bench get run loaded into the same table.  Answers are checked for
 * status 200 (and an Item for gets) but not parsed further.
 *
 * Measured: requests completed in the --duration window after --warmup;
 * latency from send to answer in a log-bucketed histogram (1/16 octave:
 * < 4.5 % error).  Output: a summary line and
 *   RESULT transport=http workload=get conc=64 ops_s=N p50_us=N p99_us=N errors=N misses=N
 *
 * Threads: nng runs the completion callbacks on its own threads; each
 * connection's state is touched by one callback at a time, totals are
 * atomics, the main thread only sleeps and reads them.
 */
#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>

#define BUCKETS (64 * 16)

typedef struct conn conn;

static struct {
	const char *url, *table;
	bool put;
	unsigned conc, duration, warmup, value_size;
	uint64_t keys, seed;
	nng_url *u;
	_Atomic bool measuring, stop;
	_Atomic uint64_t ops, errors, misses;
	_Atomic uint64_t hist[BUCKETS];
	_Atomic unsigned running;
	char value[4096];
	char target[64];
} g;

struct conn {
	nng_http_client *cli;
	nng_http_conn *hc;
	nng_aio *aio;
	nng_http_req *req;
	nng_http_res *res;
	uint64_t rng;
	int64_t t0;
	int state; /* 0 connecting, 1 transacting */
	char body[8192];
};

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t rng_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static unsigned bucket_of(uint64_t us)
{
	if (us < 1)
		us = 1;
	unsigned b = (unsigned)(log2((double)us) * 16.0);
	return b < BUCKETS ? b : BUCKETS - 1;
}

static uint64_t bucket_top(unsigned b)
{
	return (uint64_t)ceil(exp2((b + 1) / 16.0));
}

static void die(const char *what, int rv)
{
	fprintf(stderr, "http_bench: %s: %s\n", what, nng_strerror(rv));
	exit(1);
}

static void send_next(conn *c)
{
	uint64_t i = rng_next(&c->rng) % g.keys;
	int n;
	if (g.put)
		n = snprintf(c->body, sizeof(c->body),
		             "{\"TableName\":\"%s\",\"Item\":{\"PK\":{\"S\":\"c%llu\"},"
		             "\"SK\":{\"S\":\"000000\"},\"v\":{\"S\":\"%s\"}}}",
		             g.table, (unsigned long long)i, g.value);
	else
		n = snprintf(c->body, sizeof(c->body),
		             "{\"TableName\":\"%s\",\"Key\":{\"PK\":{\"S\":\"c%llu\"},"
		             "\"SK\":{\"S\":\"000000\"}}}",
		             g.table, (unsigned long long)i);
	/* A fresh request and response each time: nng 1.5.2 caches a request's
	 * formatted header (with the first Content-Length) across reuses. */
	nng_http_req_free(c->req);
	nng_http_res_free(c->res);
	int rv;
	if ((rv = nng_http_req_alloc(&c->req, g.u)) != 0 ||
	    (rv = nng_http_res_alloc(&c->res)) != 0 ||
	    (rv = nng_http_req_set_method(c->req, "POST")) != 0 ||
	    (rv = nng_http_req_set_uri(c->req, "/")) != 0 ||
	    (rv = nng_http_req_set_header(c->req, "X-Amz-Target", g.target)) != 0 ||
	    (rv = nng_http_req_set_header(c->req, "Content-Type", "application/x-amz-json-1.0")) !=
	        0 ||
	    (rv = nng_http_req_set_data(c->req, c->body, (size_t)n)) != 0)
		die("request", rv);
	c->t0 = now_us();
	c->state = 1;
	nng_http_conn_transact(c->hc, c->req, c->res, c->aio);
}

static void on_done(void *arg)
{
	conn *c = arg;
	int rv = nng_aio_result(c->aio);
	if (c->state == 0) {
		if (rv != 0)
			die("connect", rv);
		c->hc = nng_aio_get_output(c->aio, 0);
		send_next(c);
		return;
	}
	if (rv != 0) {
		fprintf(stderr, "http_bench: request: %s\n", nng_strerror(rv));
		atomic_fetch_sub(&g.running, 1);
		return;
	}
	int64_t lat = now_us() - c->t0;
	if (atomic_load(&g.measuring)) {
		if (nng_http_res_get_status(c->res) != 200) {
			atomic_fetch_add(&g.errors, 1);
		} else {
			if (!g.put) {
				void *d;
				size_t n;
				nng_http_res_get_data(c->res, &d, &n);
				if (n < 8 || memmem(d, n, "\"Item\"", 6) == NULL)
					atomic_fetch_add(&g.misses, 1);
			}
			atomic_fetch_add(&g.ops, 1);
			atomic_fetch_add(&g.hist[bucket_of((uint64_t)lat)], 1);
		}
	}
	if (atomic_load(&g.stop)) {
		atomic_fetch_sub(&g.running, 1);
		return;
	}
	send_next(c);
}

static void usage(void)
{
	fprintf(stderr, "usage: http_bench --url http://HOST:PORT --workload get|put "
	                "[--concurrency N] [--duration S] [--warmup S] [--keys N] "
	                "[--value-size B] [--table T] [--seed N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	g.table = "bench";
	g.conc = 64;
	g.duration = 20;
	g.warmup = 2;
	g.value_size = 100;
	g.keys = 100000;
	g.seed = (uint64_t)time(NULL);
	const char *wl = NULL;
	static const struct option longs[] = {
	    {"url", required_argument, NULL, 'u'},
	    {"workload", required_argument, NULL, 'w'},
	    {"concurrency", required_argument, NULL, 'c'},
	    {"duration", required_argument, NULL, 'd'},
	    {"warmup", required_argument, NULL, 'W'},
	    {"keys", required_argument, NULL, 'k'},
	    {"value-size", required_argument, NULL, 'v'},
	    {"table", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (ch) {
		case 'u':
			g.url = optarg;
			break;
		case 'w':
			wl = optarg;
			break;
		case 'c':
			g.conc = (unsigned)atoi(optarg);
			break;
		case 'd':
			g.duration = (unsigned)atoi(optarg);
			break;
		case 'W':
			g.warmup = (unsigned)atoi(optarg);
			break;
		case 'k':
			g.keys = strtoull(optarg, NULL, 10);
			break;
		case 'v':
			g.value_size = (unsigned)atoi(optarg);
			break;
		case 't':
			g.table = optarg;
			break;
		case 's':
			g.seed = strtoull(optarg, NULL, 0);
			break;
		default:
			usage();
		}
	}
	if (g.url == NULL || wl == NULL || (strcmp(wl, "get") != 0 && strcmp(wl, "put") != 0) ||
	    g.conc < 1 || g.keys < 1 || g.value_size >= sizeof(g.value))
		usage();
	g.put = strcmp(wl, "put") == 0;
	for (unsigned i = 0; i < g.value_size; i++)
		g.value[i] = (char)('a' + (rng_next(&g.seed) % 26));
	int rv = nng_url_parse(&g.u, g.url);
	if (rv != 0)
		die("url", rv);

	conn *cs = calloc(g.conc, sizeof(*cs));
	snprintf(g.target, sizeof(g.target), "DynamoDB_20120810.%s", g.put ? "PutItem" : "GetItem");
	atomic_store(&g.running, g.conc);
	for (unsigned i = 0; i < g.conc; i++) {
		conn *c = &cs[i];
		c->rng = g.seed + i * 7919;
		if ((rv = nng_http_client_alloc(&c->cli, g.u)) != 0 ||
		    (rv = nng_aio_alloc(&c->aio, on_done, c)) != 0)
			die("setup", rv);
		nng_http_client_connect(c->cli, c->aio);
	}
	nng_msleep(g.warmup * 1000);
	atomic_store(&g.measuring, true);
	int64_t t0 = now_us();
	nng_msleep(g.duration * 1000);
	atomic_store(&g.measuring, false);
	double secs = (double)(now_us() - t0) / 1e6;
	atomic_store(&g.stop, true);
	for (int i = 0; i < 500 && atomic_load(&g.running) > 0; i++)
		nng_msleep(10);

	uint64_t ops = atomic_load(&g.ops), cum = 0;
	uint64_t p50 = 0, p99 = 0, p999 = 0;
	for (unsigned b = 0; b < BUCKETS; b++) {
		cum += atomic_load(&g.hist[b]);
		if (p50 == 0 && cum * 2 >= ops && ops > 0)
			p50 = bucket_top(b);
		if (p99 == 0 && cum * 100 >= ops * 99 && ops > 0)
			p99 = bucket_top(b);
		if (p999 == 0 && cum * 1000 >= ops * 999 && ops > 0)
			p999 = bucket_top(b);
	}
	printf("http %s conc=%u: %llu ops in %.1f s = %.0f ops/s, errors %llu, misses %llu; "
	       "p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
	       wl, g.conc, (unsigned long long)ops, secs, (double)ops / secs,
	       (unsigned long long)atomic_load(&g.errors),
	       (unsigned long long)atomic_load(&g.misses), (double)p50 / 1000, (double)p99 / 1000,
	       (double)p999 / 1000);
	printf(
	    "RESULT transport=http workload=%s conc=%u secs=%.1f ops=%llu ops_s=%.0f p50_us=%llu "
	    "p99_us=%llu p999_us=%llu errors=%llu misses=%llu\n",
	    wl, g.conc, secs, (unsigned long long)ops, (double)ops / secs, (unsigned long long)p50,
	    (unsigned long long)p99, (unsigned long long)p999,
	    (unsigned long long)atomic_load(&g.errors), (unsigned long long)atomic_load(&g.misses));
	/* Connections in flight at exit are abandoned: the process ends. */
	return 0;
}
