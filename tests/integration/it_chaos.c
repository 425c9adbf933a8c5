/*
 * it_chaos -- acknowledged writes survive failures (the guide's rule 6: an
 * acknowledged write survives kill -9 of any minority of a group's replicas
 * and a restart of every process), on a real cluster of 3 nodes and 2
 * routers under a seeded schedule of faults.
 *
 * Writers (one libshoal client each, listing both routers) put and update
 * their own keys with increasing versions: attribute v, written only if
 * larger than the stored one (ConditionExpression), so a write applied late
 * (a retry, an outcome-unknown write committed by the next leader) never
 * takes a key backwards.  Each writer remembers, per key, the last version
 * acknowledged and the versions tried since (failed, timed out or refused:
 * their outcome is unknown); one time in four, right after an
 * acknowledgement, they read the key back with ConsistentRead, which must
 * return exactly that version (linearizable reads across leader changes).
 * Meanwhile a chaos thread, every 0.5-2.5 s, does one of: SIGKILL a node and
 * restart it later; SIGTERM a node and restart it; SIGSTOP a node for
 * 0.5-3 s (a hung or partitioned node, a leader that wakes up deposed);
 * SIGKILL a router and restart it -- never more than one node down at once
 * (a minority of every group: replication 3).
 *
 * Checks, after the writers stop:
 *   1. every key's ConsistentRead value is its last acknowledged version or
 *      one tried after it -- nothing acknowledged is lost, nothing appears
 *      that was never written;
 *   2. the same after SIGKILL of every node and router and a restart;
 *   3. the table's GSI converges to the table (build/bin/index_check).
 * Figures (writes, failures, the worst write latency, the time each check
 * took to pass) are printed, never asserted.
 *
 * CHAOS_SECS sets the chaos phase (default 20: the short version in `make
 * test`; `make chaos` runs 600).  SHOAL_SEED replays a schedule (the seed
 * is printed); the workload's interleaving with the faults is not replayed
 * exactly, the kinds and order of faults are.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define NODES        3
#define ROUTERS      2
#define GROUPS       4
#define WRITERS      4
#define KEYS         50 /* per writer */
#define UNKNOWN      64 /* versions remembered per key since its last ack */
#define CHECK_MS     120000
#define DEFAULT_SECS 20

static tl_cluster C;
static unsigned seed;
static atomic_bool stop_writers;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int chaos_secs(void)
{
	const char *s = getenv("CHAOS_SECS");
	int v = s != NULL ? atoi(s) : DEFAULT_SECS;
	return v > 0 ? v : DEFAULT_SECS;
}

static const char *TABLE_DEF =
    "{\"TableName\":\"chaos\","
    "\"AttributeDefinitions\":["
    "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"sk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
    "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
    "{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],"
    "\"GlobalSecondaryIndexes\":["
    "{\"IndexName\":\"byG\",\"KeySchema\":[{\"AttributeName\":\"g\",\"KeyType\":\"HASH\"},"
    "{\"AttributeName\":\"pk\",\"KeyType\":\"RANGE\"}],\"Projection\":{\"ProjectionType\":"
    "\"ALL\"}}],"
    "\"BillingMode\":\"PAY_PER_REQUEST\"}";

typedef struct key_state {
	uint64_t acked;          /* last acknowledged version, 0: none */
	uint64_t tried[UNKNOWN]; /* versions with an unknown outcome since */
	int n_tried;
	bool overflow; /* more than UNKNOWN of them: accept any above acked */
} key_state;

typedef struct writer {
	pthread_t thread;
	int id;
	unsigned rng;
	shoal_client *c;
	uint64_t version;
	key_state keys[KEYS];
	int ok, failed;
	int reads, read_failed; /* ConsistentReads right after an acknowledgement */
	int stale;              /* of which returned something else (the first kept) */
	char stale_msg[256];
	char last_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8]; /* of a failed write */
	int64_t worst_ms;
} writer;

static writer W[WRITERS];

static long long read_version(shoal_client *c, int wid, int k, char *why, size_t why_len);

static void one_write(writer *w)
{
	int k = (int)(rand_r(&w->rng) % KEYS);
	key_state *ks = &w->keys[k];
	uint64_t v = ++w->version;
	char body[1024];
	const char *op;
	/* The GSI hash key moves among a few values (entries move between index
	 * partitions). */
	int g = (int)(rand_r(&w->rng) % 5);
	if (rand_r(&w->rng) % 2 == 0) {
		op = "PutItem";
		snprintf(
		    body, sizeof(body),
		    "{\"TableName\":\"chaos\",\"Item\":{\"pk\":{\"S\":\"w%dk%d\"},\"sk\":{\"S\":"
		    "\"s\"},\"v\":{\"N\":\"%llu\"},\"g\":{\"S\":\"G%d\"},\"pad\":{\"S\":"
		    "\"%0*d\"}},\"ConditionExpression\":\"attribute_not_exists(v) OR v < :v\","
		    "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"%llu\"}}}",
		    w->id, k, (unsigned long long)v, g, 100, 0, (unsigned long long)v);
	} else {
		op = "UpdateItem";
		snprintf(
		    body, sizeof(body),
		    "{\"TableName\":\"chaos\",\"Key\":{\"pk\":{\"S\":\"w%dk%d\"},\"sk\":{\"S\":"
		    "\"s\"}},\"UpdateExpression\":\"SET v = :v, g = :g ADD n :one\","
		    "\"ConditionExpression\":\"attribute_not_exists(v) OR v < :v\","
		    "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"%llu\"},\":g\":{\"S\":"
		    "\"G%d\"},\":one\":{\"N\":\"1\"}}}",
		    w->id, k, (unsigned long long)v, g);
	}
	char *out = NULL;
	shoal_error err;
	int64_t t0 = now_ms();
	int rc = shoal_call_json(w->c, op, body, &out, &err);
	int64_t took = now_ms() - t0;
	shoal_free(out);
	if (took > w->worst_ms)
		w->worst_ms = took;
	if (rc == SHOAL_OK) {
		w->ok++;
		ks->acked = v;
		ks->n_tried = 0;
		ks->overflow = false;
		/* Read your write, one time in four: a ConsistentRead that starts
		 * after the acknowledgement must see exactly it (this writer is the
		 * key's only writer, and an earlier write applied late is refused
		 * by its condition), whatever leader answers it. */
		if (rand_r(&w->rng) % 4 == 0) {
			char why[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8];
			long long got = read_version(w->c, w->id, k, why, sizeof(why));
			if (got < 0) {
				w->read_failed++;
			} else {
				w->reads++;
				if ((uint64_t)got != v && w->stale++ == 0)
					snprintf(w->stale_msg, sizeof(w->stale_msg),
					         "w%dk%d: acknowledged version %llu, then a "
					         "ConsistentRead returned %lld",
					         w->id, k, (unsigned long long)v, got);
			}
		}
		return;
	}
	/* Failed, timed out, or (a retried write that had been applied)
	 * refused by its own condition: the outcome is unknown. */
	w->failed++;
	snprintf(w->last_error, sizeof(w->last_error), "%s: %s", err.exception, err.message);
	if (ks->n_tried < UNKNOWN)
		ks->tried[ks->n_tried++] = v;
	else
		ks->overflow = true;
}

static void *write_loop(void *arg)
{
	writer *w = arg;
	while (!atomic_load(&stop_writers))
		one_write(w);
	return NULL;
}

/* The stored version of a key (ConsistentRead): 0 if absent, -1 (with the
 * error in *why) if the read failed. */
static long long read_version(shoal_client *c, int wid, int k, char *why, size_t why_len)
{
	char body[256];
	snprintf(
	    body, sizeof(body),
	    "{\"TableName\":\"chaos\",\"Key\":{\"pk\":{\"S\":\"w%dk%d\"},\"sk\":{\"S\":\"s\"}},"
	    "\"ConsistentRead\":true}",
	    wid, k);
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(c, "GetItem", body, &out, &err);
	if (rc != SHOAL_OK) {
		snprintf(why, why_len, "%s: %s", err.exception, err.message);
		return -1;
	}
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	long long v = 0;
	json_t *n = json_object_get(json_object_get(json_object_get(j, "Item"), "v"), "N");
	if (json_is_string(n))
		v = atoll(json_string_value(n));
	json_decref(j);
	return v;
}

/* Check 1 and 2: every key holds its last acknowledged version or one tried
 * after it.  Reads are retried (the cluster may still be electing) until
 * CHECK_MS; a wrong value fails at once.  Returns the ms it took. */
static int64_t check_writes(const char *when)
{
	char msg[SH_ERRMSG_SIZE];
	shoal_client *c;
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &c, msg) == SHOAL_OK, "%s", msg);
	int64_t t0 = now_ms();
	int checked = 0, newer = 0;
	for (int i = 0; i < WRITERS; i++) {
		for (int k = 0; k < KEYS; k++) {
			const key_state *ks = &W[i].keys[k];
			char why[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8] = "";
			long long v;
			while ((v = read_version(c, i, k, why, sizeof(why))) < 0) {
				ck_assert_msg(now_ms() - t0 < CHECK_MS,
				              "%s: w%dk%d unreadable for %d s (seed %u): %s", when,
				              i, k, CHECK_MS / 1000, seed, why);
				pause_ms(100);
			}
			bool ok = (uint64_t)v == ks->acked;
			for (int t = 0; t < ks->n_tried && !ok; t++)
				ok = (uint64_t)v == ks->tried[t];
			if (!ok && ks->overflow)
				ok = (uint64_t)v > ks->acked;
			ck_assert_msg(
			    ok,
			    "%s: w%dk%d holds version %lld; acknowledged %llu, %d unknown "
			    "after it (seed %u)",
			    when, i, k, v, (unsigned long long)ks->acked, ks->n_tried, seed);
			newer += (uint64_t)v != ks->acked;
			checked++;
		}
	}
	int64_t took = now_ms() - t0;
	printf("it_chaos: %s: %d keys hold their acknowledged writes (%d a later write of "
	       "unknown outcome), checked in %lld ms\n",
	       when, checked, newer, (long long)took);
	fflush(stdout);
	shoal_client_free(c);
	return took;
}

/* Check 3: the GSI equals the one recomputed from the table. */
static void check_index(void)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s/index_check.out", C.dir);
	int64_t t0 = now_ms();
	int rc;
	char *report = NULL;
	for (;;) {
		rc = tl_sh("'%s/index_check' --endpoint '%s' --table-name chaos >'%s' 2>&1", C.bin,
		           C.endpoint, path);
		free(report);
		report = tl_read_file(path);
		if (rc == 0 || now_ms() - t0 > CHECK_MS)
			break;
		pause_ms(200);
	}
	printf("it_chaos: the index %s after %lld ms\n", rc == 0 ? "converged" : "did NOT converge",
	       (long long)(now_ms() - t0));
	fflush(stdout);
	ck_assert_msg(rc == 0, "the index differs from the table (seed %u):\n%s", seed,
	              report != NULL ? report : "");
	free(report);
}

/* Every node and router is running: none died of anything but our faults
 * (a crash would otherwise pass for one of them). */
static void check_alive(void)
{
	const char *what;
	int id;
	ck_assert_msg(tl_cluster_alive(&C, &what, &id),
	              "%s %d died on its own (seed %u); see %s-%d.log", what, id, seed, what, id);
}

/* SIGSTOP / SIGCONT node id. */
static void signal_node(int id, int sig)
{
	ck_assert_int_eq(tl_cluster_signal(&C, "node", id, sig), 0);
}

/* The fault schedule; returns how many faults it injected. */
static int run_chaos(int secs, unsigned *rng)
{
	int64_t end = now_ms() + (int64_t)secs * 1000;
	int faults = 0;
	while (now_ms() < end) {
		pause_ms(500 + (int)(rand_r(rng) % 2000));
		check_alive();
		int kind = (int)(rand_r(rng) % 7);
		int64_t t = now_ms();
		if (kind >= 5) { /* a node stops answering (a pause, a partition) */
			int id = 1 + (int)(rand_r(rng) % NODES);
			signal_node(id, SIGSTOP);
			pause_ms(500 + (int)(rand_r(rng) % 2500));
			signal_node(id, SIGCONT);
			printf("it_chaos: +%llds node %d SIGSTOP, SIGCONT after %lld ms\n",
			       (long long)(secs - (end - t) / 1000), id, (long long)(now_ms() - t));
		} else if (kind < 3) { /* a node: SIGKILL (2 in 7) or SIGTERM */
			int id = 1 + (int)(rand_r(rng) % NODES);
			bool hard = kind < 2;
			ck_assert_msg(tl_cluster_stop_node(&C, id, hard), "stopping node %d", id);
			pause_ms(200 + (int)(rand_r(rng) % 2500));
			ck_assert_msg(tl_cluster_start_node(&C, id), "restarting node %d", id);
			printf("it_chaos: +%llds node %d %s, back after %lld ms\n",
			       (long long)(secs - (end - t) / 1000), id,
			       hard ? "SIGKILL" : "SIGTERM", (long long)(now_ms() - t));
		} else { /* a router */
			int id = 1 + (int)(rand_r(rng) % ROUTERS);
			ck_assert_msg(tl_cluster_stop_router(&C, id, true), "killing router %d",
			              id);
			pause_ms(200 + (int)(rand_r(rng) % 1500));
			ck_assert_msg(tl_cluster_start_router(&C, id), "restarting router %d", id);
			printf("it_chaos: +%llds router %d SIGKILL, back after %lld ms\n",
			       (long long)(secs - (end - t) / 1000), id, (long long)(now_ms() - t));
		}
		fflush(stdout);
		faults++;
	}
	check_alive();
	return faults;
}

START_TEST(test_acknowledged_writes_survive_chaos)
{
	const char *s = getenv("SHOAL_SEED");
	seed = s != NULL ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
	int secs = chaos_secs();
	printf("it_chaos: seed %u (SHOAL_SEED=%u to replay the fault schedule), %d s of chaos\n",
	       seed, seed, secs);
	fflush(stdout);

	ck_assert_msg(tl_cluster_up(&C, NODES, ROUTERS, GROUPS), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	shoal_client *admin;
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &admin, msg) == SHOAL_OK, "%s", msg);
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(admin, "CreateTable", TABLE_DEF, &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "CreateTable: %s: %s", err.exception, err.message);
	shoal_free(out);
	shoal_client_free(admin);

	atomic_store(&stop_writers, false);
	for (int i = 0; i < WRITERS; i++) {
		memset(&W[i], 0, sizeof(W[i]));
		W[i].id = i;
		W[i].rng = seed + 7919u * (unsigned)(i + 1);
		ck_assert_msg(shoal_client_new(C.endpoint, NULL, &W[i].c, msg) == SHOAL_OK, "%s",
		              msg);
		ck_assert_int_eq(pthread_create(&W[i].thread, NULL, write_loop, &W[i]), 0);
	}
	unsigned rng = seed;
	int faults = run_chaos(secs, &rng);
	atomic_store(&stop_writers, true);
	int ok = 0, failed = 0, reads = 0, read_failed = 0, stale = 0;
	const char *stale_msg = "";
	int64_t worst = 0;
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(W[i].thread, NULL);
		shoal_client_free(W[i].c);
		ok += W[i].ok;
		failed += W[i].failed;
		reads += W[i].reads;
		read_failed += W[i].read_failed;
		if (W[i].stale > 0 && stale == 0)
			stale_msg = W[i].stale_msg;
		stale += W[i].stale;
		if (W[i].worst_ms > worst)
			worst = W[i].worst_ms;
	}
	printf("it_chaos: %d faults; %d writes acknowledged, %d with an unknown outcome; worst "
	       "latency %lld ms; %d ConsistentReads of an acknowledged write (%d failed, %d "
	       "stale)\n",
	       faults, ok, failed, (long long)worst, reads, read_failed, stale);
	fflush(stdout);
	for (int i = 0; i < WRITERS; i++)
		if (W[i].failed > 0)
			printf("it_chaos: writer %d: %d failed, the last: %s\n", i, W[i].failed,
			       W[i].last_error);
	fflush(stdout);
	ck_assert_msg(ok > 0, "no write was acknowledged");
	ck_assert_msg(stale == 0, "%d stale ConsistentReads (seed %u), the first: %s", stale, seed,
	              stale_msg);

	check_writes("after the chaos");

	/* Every process dies at once and comes back. */
	for (int id = 1; id <= NODES; id++)
		ck_assert(tl_cluster_stop_node(&C, id, true));
	for (int id = 1; id <= ROUTERS; id++)
		ck_assert(tl_cluster_stop_router(&C, id, true));
	int64_t t0 = now_ms();
	for (int id = 1; id <= NODES; id++)
		ck_assert_msg(tl_cluster_start_node(&C, id), "restarting node %d", id);
	for (int id = 1; id <= ROUTERS; id++)
		ck_assert_msg(tl_cluster_start_router(&C, id), "restarting router %d", id);
	printf("it_chaos: every process SIGKILLed and restarted in %lld ms\n",
	       (long long)(now_ms() - t0));
	check_writes("after a restart of every process");
	check_index();
	tl_cluster_down(&C);
}
END_TEST

static Suite *chaos_suite(void)
{
	Suite *s = suite_create("chaos");
	TCase *tc = tcase_create("chaos");
	tcase_set_timeout(tc, chaos_secs() + 600);
	tcase_add_test(tc, test_acknowledged_writes_survive_chaos);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(chaos_suite)
