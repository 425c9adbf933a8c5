/*
 * move_bench -- `make bench-move`: what a partition move and a split cost a
 * client (issue 14's figures).  Prints figures; asserts nothing.
 *
 * It starts a local cluster of its own (tests/lib/tl_cluster.h: 3 nodes, 1
 * router, groups 0-3, partitions unthrottled), creates table `mbench` (pk S,
 * no index) and loads MOVE_BENCH_MB MiB (default 1024) of items of
 * MOVE_BENCH_ITEM bytes (default 1024) into ONE partition -- the table's
 * first, in group 1: keys "k<n>" whose hash falls in its range -- with
 * BatchWriteItem of 25 items from MOVE_BENCH_LOADERS threads (default 4).
 * Then, while one writer puts items into the same partition at
 * MOVE_BENCH_RATE per second (default 200; one put at a time, request k
 * due at start + k / rate, sent then or as soon as the one before is
 * answered; percentiles are from sending to the answer, and the slowest
 * from the due time is shown beside them, the backlog a stall leaves):
 *
 *   1. MOVE_BENCH_IDLE seconds (default 5) before anything;
 *   2. the move of that partition to group 2 (`shoal admin move-partition`),
 *      until the map shows it served by group 2 with no move pending;
 *   3. MOVE_BENCH_IDLE seconds;
 *   4. the split of it at its middle, the upper half to group 3, until done;
 *   5. MOVE_BENCH_IDLE seconds.
 *
 * ClusterStatus is polled every 20 ms: the cutover is the first poll that
 * shows the partition in its new group (so it is late by up to a poll).
 *
 * Output: the load's time and rate; per second, the writer's answers, p50,
 * p99 and max latency with the phase; then for the move and the split: how
 * long it took, the writer's throughput and p50/p99 before, during and
 * after, p50/p99/max in the cutover second (answers within half a second
 * either side of the poll that saw the cutover: stalls of the copy's last
 * moments count there too), the cutover's own pause (the puts answered
 * after the source's fence -- its time read from the nodes' logs -- and sent
 * before the cutover was seen, each from its sending or the fence,
 * whichever is later), and the longest write pause (the slowest single put
 * from its sending, and the longest time between two answers; latencies
 * from the due time also carry the backlog a pause leaves behind a
 * one-at-a-time writer).  Lines starting with RESULT are machine-readable.
 *
 * Disk: the data is written ~6 times over per replica (Raft log and LMDB at
 * the source, again at the target) on 3 replicas: plan ~20x MOVE_BENCH_MB
 * free.  The cluster's directory is removed at the end (SHOAL_KEEP_CLUSTER=1
 * keeps it).
 */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_hist.h"
#include "tests/lib/tl_parts.h"

#define TABLE    "mbench"
#define BATCH    25
#define POLL_US  20000
#define MAX_SECS 3600

static tl_cluster C;
static tl_parts P;
static shoal_client *client;
static uint32_t table_no;
static uint64_t part_lo, part_hi; /* the loaded partition's hash range */

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);
	return s != NULL && atoi(s) > 0 ? atoi(s) : def;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Whether key "<prefix><n>" falls in the partition. */
static bool in_part(const char *key)
{
	st_value v = {.type = ST_S};
	v.u.str.ptr = (char *)key;
	v.u.str.len = (uint32_t)strlen(key);
	uint64_t h = st_key_hash(table_no, &v);
	return h >= part_lo && h <= part_hi;
}

static char *payload; /* the v attribute of every item */

/* --- the loader ------------------------------------------------------------- */

static struct {
	atomic_ullong next;    /* the next key number to consider */
	atomic_ullong claimed; /* items the loaders took on */
	atomic_ullong loaded;
	uint64_t want;
	atomic_int errors;
} L;

static void *loader(void *arg)
{
	(void)arg;
	size_t cap = (size_t)BATCH * (strlen(payload) + 128) + 256;
	char *body = malloc(cap);
	tl_assert(body != NULL);
	for (;;) {
		uint64_t c = atomic_fetch_add(&L.claimed, BATCH);
		if (c >= L.want)
			break;
		int batch = L.want - c < BATCH ? (int)(L.want - c) : BATCH;
		size_t len = (size_t)snprintf(body, cap, "{\"RequestItems\":{\"" TABLE "\":[");
		int n = 0;
		while (n < batch) {
			char key[32];
			snprintf(key, sizeof(key), "k%llu",
			         (unsigned long long)atomic_fetch_add(&L.next, 1));
			if (!in_part(key))
				continue;
			len +=
			    (size_t)snprintf(body + len, cap - len,
			                     "%s{\"PutRequest\":{\"Item\":{\"pk\":{\"S\":\"%s\"},"
			                     "\"v\":{\"S\":\"%s\"}}}}",
			                     n > 0 ? "," : "", key, payload);
			n++;
		}
		snprintf(body + len, cap - len, "]}}");
		for (int tries = 0;; tries++) {
			char *out = NULL;
			shoal_error err;
			int rc = shoal_call_json(client, "BatchWriteItem", body, &out, &err);
			json_t *j = rc == SHOAL_OK ? json_loads(out, 0, NULL) : NULL;
			bool whole = j != NULL &&
			             json_object_size(json_object_get(j, "UnprocessedItems")) == 0;
			json_decref(j);
			shoal_free(out);
			if (whole)
				break;
			if (atomic_fetch_add(&L.errors, 1) < 3)
				fprintf(stderr, "move_bench: BatchWriteItem: %s: %s (sent again)\n",
				        rc == SHOAL_OK ? "unprocessed items" : err.exception,
				        rc == SHOAL_OK ? "" : err.message);
			tl_assert_msg(tries < 20, "BatchWriteItem failed 20 times");
		}
		atomic_fetch_add(&L.loaded, (unsigned long long)n);
	}
	free(body);
	return NULL;
}

/* --- the writer --------------------------------------------------------------- */

typedef struct op_rec {
	uint64_t due, sent, done; /* us */
	bool ok;
} op_rec;

static struct {
	pthread_t th;
	atomic_bool stop;
	double rate;
	uint64_t start;
	op_rec *ops;
	size_t cap;
	atomic_size_t n;
	char **keys; /* in the partition */
	size_t nkeys;
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8];
} W;

static void *writer(void *arg)
{
	(void)arg;
	char body[4096];
	for (size_t k = 0; k < W.cap && !atomic_load(&W.stop); k++) {
		uint64_t due = W.start + (uint64_t)((double)k * 1e6 / W.rate);
		uint64_t now = now_us();
		if (due > now)
			usleep((useconds_t)(due - now));
		uint64_t sent = now_us();
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"" TABLE "\",\"Item\":{\"pk\":{\"S\":\"%s\"},"
		         "\"v\":{\"S\":\"w%zu\"}}}",
		         W.keys[k % W.nkeys], k);
		shoal_error err;
		char *out = NULL;
		int rc = shoal_call_json(client, "PutItem", body, &out, &err);
		shoal_free(out);
		W.ops[k] =
		    (op_rec){.due = due, .sent = sent, .done = now_us(), .ok = rc == SHOAL_OK};
		if (rc != SHOAL_OK && W.first_error[0] == '\0')
			snprintf(W.first_error, sizeof(W.first_error), "%s: %s", err.exception,
			         err.message);
		atomic_store(&W.n, k + 1);
	}
	return NULL;
}

/* --- operations ----------------------------------------------------------------- */

typedef struct span {
	const char *name;
	uint64_t lo;                      /* the moving range's first hash */
	uint64_t begin, seen, end, fence; /* us: asked, cutover seen, done, fenced (0: not found) */
} span;

/* Runs `shoal admin ...`, then polls until hash h is served by `to` with no
 * move pending; fills the span. */
static void operate(span *s, uint64_t h, int to, const char *fmt, uint64_t arg)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), fmt, arg, to);
	s->begin = now_us();
	tl_parts_admin(&P, "%s", cmd);
	s->seen = 0;
	for (uint64_t until = s->begin + 3600ull * 1000000u;; usleep(POLL_US)) {
		tl_part x;
		tl_assert_msg(now_us() < until, "%s: not done after an hour", s->name);
		if (!tl_parts_of(&P, h, &x))
			continue;
		if (x.group == to && s->seen == 0)
			s->seen = now_us();
		if (x.group == to && x.moving == 0)
			break;
	}
	s->end = now_us();
	printf("move_bench: %s done in %.2f s\n", s->name, (double)(s->end - s->begin) / 1e6);
}

/* Figures of the writer's requests answered in [from, to) (us). */
typedef struct window {
	uint64_t ok, err;
	tl_hist h;        /* sent to answered, us */
	uint64_t max_due; /* the slowest put from its due time, us */
	uint64_t max_gap; /* the longest time between two answers, us */
} window;

static void measure(uint64_t from, uint64_t to, window *w)
{
	memset(w, 0, sizeof(*w));
	size_t n = atomic_load(&W.n);
	uint64_t last = from;
	for (size_t k = 0; k < n; k++) {
		const op_rec *o = &W.ops[k];
		if (o->done < from || o->done >= to)
			continue;
		if (o->ok) {
			w->ok++;
			tl_hist_record(&w->h, o->done - o->sent);
			if (o->done - o->due > w->max_due)
				w->max_due = o->done - o->due;
		} else {
			w->err++;
		}
		if (o->done - last > w->max_gap)
			w->max_gap = o->done - last;
		last = o->done;
	}
}

static void print_window(const char *op, const char *label, uint64_t from, uint64_t to)
{
	window w;
	measure(from, to, &w);
	double secs = (double)(to - from) / 1e6;
	printf("  %-8s %-16s %6.1f s  %7.1f puts/s  p50 %7.2f ms  p99 %8.2f ms  max %8.2f ms  "
	       "errors %llu\n",
	       op, label, secs, secs > 0 ? (double)w.ok / secs : 0,
	       (double)tl_hist_pct(&w.h, 50) / 1000, (double)tl_hist_pct(&w.h, 99) / 1000,
	       (double)w.h.max / 1000, (unsigned long long)w.err);
	printf("RESULT op=%s window=%s secs=%.2f puts_s=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f "
	       "errors=%llu\n",
	       op, label, secs, secs > 0 ? (double)w.ok / secs : 0,
	       (double)tl_hist_pct(&w.h, 50) / 1000, (double)tl_hist_pct(&w.h, 99) / 1000,
	       (double)w.h.max / 1000, (unsigned long long)w.err);
}

/* now_us() time t as UTC wall-clock time (HH:MM:SS.mmm), to line a put up
 * with the nodes' logs. */
static int64_t wall_offset_us(void)
{
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	return (int64_t)((uint64_t)rt.tv_sec * 1000000u + (uint64_t)rt.tv_nsec / 1000u) -
	       (int64_t)now_us();
}

static void wall_of(uint64_t t, char *buf, size_t len)
{
	int64_t us = (int64_t)t + wall_offset_us();
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (int)(us % 1000000 / 1000));
}

/* When the source fenced s's range: the last "fenced" line naming it in the
 * nodes' logs (node/pmove.c; UTC to the millisecond) between the ask and the
 * cutover seen, as now_us() time (0: none found). */
static uint64_t fence_of(const span *s)
{
	char needle[64];
	snprintf(needle, sizeof(needle), "[%016" PRIx64 "]: fenced (", s->lo);
	int64_t off = wall_offset_us();
	uint64_t best = 0;
	for (int id = 1; id <= C.nodes; id++) {
		char path[1200], line[2048];
		snprintf(path, sizeof(path), "%s/node-%d.log", C.dir, id);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			struct tm tm;
			int ms;
			memset(&tm, 0, sizeof(tm));
			if (strstr(line, needle) == NULL ||
			    sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
			           &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
				continue;
			tm.tm_year -= 1900;
			tm.tm_mon -= 1;
			int64_t t = (int64_t)timegm(&tm) * 1000000 + (int64_t)ms * 1000 - off;
			if (t >= (int64_t)s->begin && t <= (int64_t)s->seen && (uint64_t)t > best)
				best = (uint64_t)t;
		}
		fclose(f);
	}
	return best;
}

static void report(const span *s, uint64_t idle_us)
{
	printf("%s: %.2f s (cutover seen at %.2f s)\n", s->name, (double)(s->end - s->begin) / 1e6,
	       (double)(s->seen - s->begin) / 1e6);
	print_window(s->name, "before", s->begin - idle_us, s->begin);
	print_window(s->name, "during", s->begin, s->end);
	print_window(s->name, "cutover-second", s->seen - 500000, s->seen + 500000);
	/* The cutover second's puts over 50 ms, with their wall-clock times,
	 * to line them up with the nodes' logs (fence, READY, the map's
	 * flip, the own): which were held by the cutover, which by the copy
	 * or log replay before the fence, or a stall. */
	size_t n = atomic_load(&W.n);
	int shown = 0;
	for (size_t k = 0; k < n && shown < 12; k++) {
		const op_rec *o = &W.ops[k];
		if (o->done < s->seen - 500000 || o->done >= s->seen + 500000 ||
		    o->done - o->sent < 50000)
			continue;
		char sent[32], done[32];
		wall_of(o->sent, sent, sizeof(sent));
		wall_of(o->done, done, sizeof(done));
		printf("  %-8s cutover second: a put sent %s, answered %s UTC: %.1f ms%s\n",
		       s->name, sent, done, (double)(o->done - o->sent) / 1000,
		       o->ok ? "" : " (failed)");
		shown++;
	}
	/* The cutover's own pause: the puts it held -- answered after the fence
	 * and sent before the cutover was seen -- each from its sending or the
	 * fence, whichever is later (so a stall of the copy before the fence
	 * is not counted; the fence's time is the log's, to the millisecond).
	 * The status poll goes through the writer's router, which takes the
	 * map it fetched before it answers (router/cluster.c), so the puts sent
	 * after it are routed with the new map. */
	if (s->fence != 0) {
		uint64_t held = 0, worst = 0, worst_sent = 0;
		for (size_t k = 0; k < n; k++) {
			const op_rec *o = &W.ops[k];
			if (o->done <= s->fence || o->sent > s->seen)
				continue;
			uint64_t from = o->sent > s->fence ? o->sent : s->fence;
			held++;
			if (o->done - from > worst) {
				worst = o->done - from;
				worst_sent = o->sent;
			}
		}
		printf(
		    "  %-8s cutover: fenced %.1f ms before the cutover was seen; %llu puts held, "
		    "the longest %.1f ms from %s\n",
		    s->name, (double)(s->seen - s->fence) / 1000, (unsigned long long)held,
		    (double)worst / 1000, worst_sent > s->fence ? "its sending" : "the fence");
		printf("RESULT op=%s fence_to_seen_ms=%.1f cutover_pause_ms=%.1f held=%llu\n",
		       s->name, (double)(s->seen - s->fence) / 1000, (double)worst / 1000,
		       (unsigned long long)held);
	} else {
		printf("  %-8s cutover: no fence line found in the nodes' logs\n", s->name);
	}
	print_window(s->name, "after", s->end, s->end + idle_us);
	window w;
	measure(s->begin, s->end + 1000000, &w);
	printf("  %-8s longest write pause: %.1f ms (the slowest single put, sent to answered); "
	       "%.1f ms between two answers; %.1f ms the slowest from its due time (the backlog "
	       "a pause leaves included)\n",
	       s->name, (double)w.h.max / 1000, (double)w.max_gap / 1000, (double)w.max_due / 1000);
	printf("RESULT op=%s took_s=%.2f cutover_seen_s=%.2f longest_pause_ms=%.1f "
	       "longest_gap_ms=%.1f max_from_due_ms=%.1f\n",
	       s->name, (double)(s->end - s->begin) / 1e6, (double)(s->seen - s->begin) / 1e6,
	       (double)w.h.max / 1000, (double)w.max_gap / 1000, (double)w.max_due / 1000);
}

/* What went on in [from, to). */
static const char *phase_at(uint64_t from, uint64_t to, const span *sp, int n)
{
	for (int i = 0; i < n; i++) {
		if (sp[i].seen >= from && sp[i].seen < to)
			return i == 0 ? "move: cutover seen" : "split: cutover seen";
		if (sp[i].begin < to && sp[i].end > from)
			return sp[i].name;
	}
	return "";
}

static void wait_until(uint64_t t)
{
	uint64_t now = now_us();
	if (t > now)
		usleep((useconds_t)(t - now));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int mb = env_int("MOVE_BENCH_MB", 1024), item = env_int("MOVE_BENCH_ITEM", 1024);
	int loaders = env_int("MOVE_BENCH_LOADERS", 4), idle = env_int("MOVE_BENCH_IDLE", 5);
	W.rate = env_int("MOVE_BENCH_RATE", 200);
	L.want = (uint64_t)mb * 1024 * 1024 / (uint64_t)item;
	if (item < 64 || item > 300000) {
		fprintf(stderr, "move_bench: MOVE_BENCH_ITEM: 64 .. 300000\n");
		return 1;
	}
	payload = malloc((size_t)item - 32);
	tl_assert(payload != NULL);
	memset(payload, 'x', (size_t)item - 33);
	payload[item - 33] = '\0';
	printf("move_bench: %d MiB in one partition (%llu items of ~%d bytes), writer at %.0f "
	       "puts/s, %d s idle around each operation; %ld CPUs, ",
	       mb, (unsigned long long)L.want, item, W.rate, idle, sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	tl_sh("date -u '+%%Y-%%m-%%d %%H:%%M UTC'; df -h --output=avail,target \"${TMPDIR:-/tmp}\" "
	      "| tail -n 1");

	if (!tl_cluster_up(&C, 3, 1, 4)) {
		fprintf(stderr, "move_bench: the cluster did not start\n");
		return 1;
	}
	char msg[SH_ERRMSG_SIZE];
	if (shoal_client_new(C.endpoint, NULL, &client, msg) != SHOAL_OK) {
		fprintf(stderr, "move_bench: %s\n", msg);
		tl_cluster_down(&C);
		return 1;
	}
	tl_parts_init(&P, &C, TABLE);
	char *out = NULL;
	shoal_error err;
	tl_assert_msg(shoal_call_json(client, "CreateTable",
	                              "{\"TableName\":\"" TABLE "\",\"AttributeDefinitions\":["
	                              "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"}],"
	                              "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
	                              "\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}",
	                              &out, &err) == SHOAL_OK,
	              "CreateTable: %s: %s", err.exception, err.message);
	shoal_free(out);
	table_no = tl_table_number(client, TABLE);
	tl_assert_msg(table_no != 0, "no TableNumber for " TABLE);
	tl_part parts[16];
	int np = 0;
	for (uint64_t until = now_us() + 30000000u; np == 0; usleep(POLL_US)) {
		tl_assert_msg(now_us() < until, "the map shows no partitions of " TABLE);
		np = tl_parts_list(&P, parts, 16);
	}
	part_lo = parts[0].lo;
	part_hi = parts[0].hi;
	int from = parts[0].group;
	int to = from % 3 + 1, split_to = to % 3 + 1;
	printf("move_bench: partition [%016" PRIx64 ", %016" PRIx64 "] in group %d\n", part_lo,
	       part_hi, from);

	/* Load. */
	uint64_t t0 = now_us();
	pthread_t th[16];
	if (loaders > 16)
		loaders = 16;
	for (int i = 0; i < loaders; i++)
		tl_assert(pthread_create(&th[i], NULL, loader, NULL) == 0);
	for (int i = 0; i < loaders; i++)
		pthread_join(th[i], NULL);
	double load_s = (double)(now_us() - t0) / 1e6;
	printf("move_bench: loaded %llu items (%.0f MiB) in %.1f s: %.0f items/s, %.1f MiB/s, %d "
	       "batches sent again\n",
	       (unsigned long long)atomic_load(&L.loaded),
	       (double)atomic_load(&L.loaded) * item / 1048576, load_s,
	       (double)atomic_load(&L.loaded) / load_s,
	       (double)atomic_load(&L.loaded) * item / 1048576 / load_s, atomic_load(&L.errors));
	printf("RESULT op=load items=%llu secs=%.1f\n", (unsigned long long)atomic_load(&L.loaded),
	       load_s);
	tl_sh("du -sh '%s' | cut -f1 | sed 's/^/move_bench: the cluster directory holds /'", C.dir);

	/* The writer's keys: in the partition, not loaded ones. */
	W.nkeys = 1000;
	W.keys = calloc(W.nkeys, sizeof(*W.keys));
	tl_assert(W.keys != NULL);
	for (size_t n = 0, i = 0; i < W.nkeys; n++) {
		char key[32];
		snprintf(key, sizeof(key), "w%zu", n);
		if (in_part(key))
			W.keys[i++] = strdup(key);
	}
	W.cap = (size_t)(W.rate * MAX_SECS);
	W.ops = calloc(W.cap, sizeof(*W.ops));
	tl_assert(W.ops != NULL);
	W.start = now_us();
	tl_assert(pthread_create(&W.th, NULL, writer, NULL) == 0);
	uint64_t idle_us = (uint64_t)idle * 1000000u;

	uint64_t mid = part_lo + (part_hi - part_lo) / 2 + 1;
	span sp[2] = {{.name = "move", .lo = part_lo}, {.name = "split", .lo = mid}};
	wait_until(W.start + idle_us);
	operate(&sp[0], part_lo, to,
	        "admin move-partition --table-name " TABLE " --hash 0x%016" PRIx64
	        " --to-group %d --no-wait",
	        part_lo);
	wait_until(sp[0].end + idle_us);
	operate(&sp[1], mid, split_to,
	        "admin split-partition --table-name " TABLE " --at 0x%016" PRIx64
	        " --to-group %d --no-wait",
	        mid);
	wait_until(sp[1].end + idle_us);
	atomic_store(&W.stop, true);
	pthread_join(W.th, NULL);

	/* Per second. */
	printf("\nthe writer per second (answered puts; latency from sending, and the slowest "
	       "from its due time):\n");
	printf("  %5s %7s %6s %9s %9s %9s %10s  %s\n", "sec", "puts", "errors", "p50 ms", "p99 ms",
	       "max ms", "due max", "phase");
	uint64_t last = W.ops[atomic_load(&W.n) - 1].done;
	for (uint64_t s = W.start; s < last; s += 1000000) {
		window w;
		measure(s, s + 1000000, &w);
		printf("  %5llu %7llu %6llu %9.2f %9.2f %9.2f %10.2f  %s\n",
		       (unsigned long long)((s - W.start) / 1000000), (unsigned long long)w.ok,
		       (unsigned long long)w.err, (double)tl_hist_pct(&w.h, 50) / 1000,
		       (double)tl_hist_pct(&w.h, 99) / 1000, (double)w.h.max / 1000,
		       (double)w.max_due / 1000, phase_at(s, s + 1000000, sp, 2));
	}
	printf("\nmove_bench: %d MiB partition, writer at %.0f puts/s (first error: %s)\n", mb,
	       W.rate, W.first_error[0] != '\0' ? W.first_error : "none");
	for (int i = 0; i < 2; i++) {
		sp[i].fence = fence_of(&sp[i]);
		report(&sp[i], idle_us);
	}
	tl_sh("du -sh '%s' | cut -f1 | sed 's/^/move_bench: the cluster directory holds /'", C.dir);

	shoal_client_free(client);
	tl_cluster_down(&C);
	for (size_t i = 0; i < W.nkeys; i++)
		free(W.keys[i]);
	free(W.keys);
	free(W.ops);
	free(payload);
	return 0;
}
