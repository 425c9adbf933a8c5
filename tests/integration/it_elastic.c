/*
 * it_elastic -- issue 14's replica moves on a real local cluster (real
 * shoal-node / shoal-router processes, real Raft and LMDB), with a workload
 * running through every step:
 *
 *  - grow 3 -> 5 nodes (`deploy/cluster.sh add-node`, twice), with group
 *    0's leader (the executor) killed with SIGKILL while a move is in
 *    flight and restarted: group 0's executor moves replicas (Raft: a standby, caught up, promoted,
 * the old replica removed) until every node holds 2 or 3 of the 12 replicas and no node leads more
 * than one of the 4 groups (the preferred slot moves with a replaced replica, and the planner's
 * leader transfers make their node the group's preferred replica);
 *  - decommission node 1 (`shoal admin remove-node`): its replicas move
 *    away and it leaves the map;
 *  - node 2 loses its data directory (killed, directory deleted,
 *    restarted): it reports its groups lost, the executor removes those
 *    replicas from Raft and re-creates them, caught up before they vote;
 *  - node 3 dies for good: after dead_after_ms its replicas are re-created
 *    on the live nodes, and `shoal admin remove-node 3` finishes the job;
 *  - every process is restarted: the shape (the map and where every replica
 *    is) survives.
 * Throughout, a writer puts items with unique keys through libshoal (its
 * retries on) and must see no error; afterwards every acknowledged item is
 * read back with ConsistentRead and appears in the table's GSI.  Moves,
 * timings and the writer's worst latency are printed, never asserted.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define MAX_ITEMS 200000

static tl_cluster C;
static shoal_client *client;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *call(const char *op, const char *body)
{
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(client, op, body, &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s: %s", op, err.exception, err.message);
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	ck_assert_ptr_nonnull(j);
	return j;
}

static json_t *status(void)
{
	return call("ClusterStatus", "{}");
}

static long long jint(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* ------------------------------------------------------------------------ */
/* The writer                                                                */
/* ------------------------------------------------------------------------ */

static struct {
	pthread_t thread;
	atomic_bool stop;
	atomic_int n;      /* items attempted: keys 0 .. n-1 */
	atomic_int failed; /* errors seen by the client (after libshoal's retries) */
	bool acked[MAX_ITEMS];
	int64_t worst_ms;
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 32];
} W;

static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&W.stop) && atomic_load(&W.n) < MAX_ITEMS) {
		int i = atomic_load(&W.n);
		char body[256];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"elastic\",\"Item\":{\"pk\":{\"S\":\"k%d\"},\"v\":{\"N\":"
		         "\"%d\"},"
		         "\"g\":{\"S\":\"g%d\"}}}",
		         i, i, i % 7);
		char *out = NULL;
		shoal_error err;
		int64_t t0 = now_ms();
		int rc = shoal_call_json(client, "PutItem", body, &out, &err);
		int64_t ms = now_ms() - t0;
		shoal_free(out);
		if (ms > W.worst_ms)
			W.worst_ms = ms;
		if (rc == SHOAL_OK) {
			W.acked[i] = true;
		} else if (atomic_fetch_add(&W.failed, 1) == 0) {
			snprintf(W.first_error, sizeof(W.first_error), "k%d: %s: %s", i,
			         err.exception, err.message);
		}
		atomic_fetch_add(&W.n, 1);
		usleep(2000); /* a steady, modest load: ~300 writes/s */
	}
	return NULL;
}

static void writer_start(void)
{
	memset(&W, 0, sizeof(W));
	ck_assert_int_eq(pthread_create(&W.thread, NULL, writer, NULL), 0);
}

static void writer_stop(void)
{
	atomic_store(&W.stop, true);
	pthread_join(W.thread, NULL);
	printf("elastic: writer: %d writes, %d failed, worst latency %lld ms%s%s\n",
	       atomic_load(&W.n), atomic_load(&W.failed), (long long)W.worst_ms,
	       W.first_error[0] != '\0' ? ", first error " : "", W.first_error);
}

/* Every acknowledged item is there (ConsistentRead), and the GSI holds them
 * all once it converged. */
static void check_items(void)
{
	int n = atomic_load(&W.n), acked = 0;
	static bool seen[MAX_ITEMS];
	memset(seen, 0, sizeof(seen));
	/* BatchGetItem, ConsistentRead, 100 keys a call (unprocessed keys
	 * asked again). */
	char *body = malloc(100 * 48 + 256);
	ck_assert_ptr_nonnull(body);
	for (int i = 0; i < n;) {
		int len = snprintf(body, 256,
		                   "{\"RequestItems\":{\"elastic\":{\"ConsistentRead\":true,"
		                   "\"Keys\":[");
		int k = 0;
		for (; i < n && k < 100; i++) {
			if (!W.acked[i])
				continue;
			acked++;
			len += snprintf(body + len, 48, "%s{\"pk\":{\"S\":\"k%d\"}}",
			                k > 0 ? "," : "", i);
			k++;
		}
		if (k == 0)
			break;
		snprintf(body + len, 16, "]}}}");
		for (int tries = 0;; tries++) {
			json_t *got = call("BatchGetItem", body);
			size_t x;
			json_t *item;
			json_array_foreach(
			    json_object_get(json_object_get(got, "Responses"), "elastic"), x, item)
			{
				const char *pk = json_string_value(
				    json_object_get(json_object_get(item, "pk"), "S"));
				const char *v = json_string_value(
				    json_object_get(json_object_get(item, "v"), "N"));
				ck_assert(pk != NULL && v != NULL && pk[0] == 'k');
				ck_assert_str_eq(pk + 1, v);
				seen[atoi(v)] = true;
			}
			json_t *un =
			    json_object_get(json_object_get(got, "UnprocessedKeys"), "elastic");
			if (un == NULL || tries == 20) {
				json_decref(got);
				break;
			}
			/* ask again for what was not processed */
			char *again = json_dumps(un, JSON_COMPACT);
			snprintf(body, 100 * 48 + 256, "{\"RequestItems\":{\"elastic\":%s}}",
			         again);
			free(again);
			json_decref(got);
		}
	}
	free(body);
	for (int i = 0; i < n; i++)
		ck_assert_msg(!W.acked[i] || seen[i], "acknowledged item k%d is missing", i);
	/* The index: the count over its 7 partition keys reaches the table's. */
	int64_t until = now_ms() + 60000;
	for (;;) {
		long long total = 0;
		for (int g = 0; g < 7; g++) {
			char q_body[256];
			snprintf(
			    q_body, sizeof(q_body),
			    "{\"TableName\":\"elastic\",\"IndexName\":\"byg\","
			    "\"KeyConditionExpression\":"
			    "\"g = :g\",\"ExpressionAttributeValues\":{\":g\":{\"S\":\"g%d\"}},"
			    "\"Select\":\"COUNT\"}",
			    g);
			json_t *q = call("Query", q_body);
			total += jint(q, "Count");
			json_decref(q);
		}
		if (total >= acked)
			break;
		ck_assert_msg(now_ms() < until, "the GSI holds %lld of %d items after 60 s", total,
		              acked);
		usleep(100000);
	}
	printf("elastic: %d acknowledged items read back, GSI converged\n", acked);
}

/* ------------------------------------------------------------------------ */
/* The shape                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct shape {
	long long epoch;
	int voters[16], others[16]; /* by node id: voter replicas, non-voters */
	int leaders[16];
	int serving[16];          /* replicas whose node reports them leader or follower */
	int groups, short_groups; /* groups; groups with fewer than 3 voters */
	int moving;               /* non-voters in the map: moves in flight */
	int leader0;              /* the node leading group 0 (0: none seen) */
	bool in_map[16];
} shape;

static void shape_of(shape *s)
{
	memset(s, 0, sizeof(*s));
	json_t *st = status();
	s->epoch = jint(st, "MapEpoch");
	size_t i, k;
	json_t *g, *r, *n;
	json_array_foreach(json_object_get(st, "Nodes"), i, n)
	{
		long long id = jint(n, "Id");
		if (id > 0 && id < 16)
			s->in_map[id] = true;
	}
	json_array_foreach(json_object_get(st, "MapGroups"), i, g)
	{
		int v = 0;
		s->groups++;
		json_array_foreach(json_object_get(g, "Replicas"), k, r)
		{
			long long id = jint(r, "Node");
			bool voter = json_is_true(json_object_get(r, "Voter"));
			if (id <= 0 || id >= 16)
				continue;
			if (voter)
				s->voters[id]++, v++;
			else
				s->others[id]++, s->moving++;
		}
		if (v < 3)
			s->short_groups++;
	}
	json_array_foreach(json_object_get(st, "Groups"), i, g)
	{
		const char *role = json_string_value(json_object_get(g, "Role"));
		long long id = jint(g, "Node");
		if (role == NULL || id <= 0 || id >= 16)
			continue;
		if (strcmp(role, "leader") == 0)
			s->leaders[id]++;
		if (strcmp(role, "leader") == 0 && jint(g, "Group") == 0)
			s->leader0 = (int)id;
		if (strcmp(role, "leader") == 0 || strcmp(role, "follower") == 0)
			s->serving[id]++;
	}
	json_decref(st);
}

static void print_shape(const char *when, const shape *s)
{
	printf("elastic: %s: map epoch %lld, voters/leaders per node:", when, s->epoch);
	for (int id = 1; id < 16; id++)
		if (s->in_map[id])
			printf(" %d:%d/%d%s", id, s->voters[id], s->leaders[id],
			       s->others[id] ? "+" : "");
	printf("\n");
}

typedef bool (*shape_pred)(const shape *s, void *arg);

/* Polls the shape until pred holds (deadline secs); returns the time taken. */
static int64_t wait_shape(const char *what, shape_pred pred, void *arg, int secs, shape *out)
{
	int64_t t0 = now_ms(), until = t0 + (int64_t)secs * 1000;
	for (;;) {
		shape_of(out);
		if (pred(out, arg))
			break;
		if (now_ms() >= until) {
			print_shape(what, out);
			ck_abort_msg("%s: not reached within %d s", what, secs);
		}
		usleep(250000);
	}
	int64_t took = now_ms() - t0;
	printf("elastic: %s: %lld ms\n", what, (long long)took);
	print_shape(what, out);
	return took;
}

/* Settled: every group has 3 voters and no move in flight; each live node
 * of the map (the ids in arg, 0-terminated) holds between lo and hi voters
 * and serves each of them (its status says leader or follower: not lost). */
typedef struct spread {
	int nodes[8];
	int lo, hi;
	int max_leaders; /* every group led, no listed node leading more (0: not checked) */
} spread;

static bool settled(const shape *s, void *arg)
{
	const spread *sp = arg;
	if (s->short_groups != 0)
		return false;
	for (int id = 1; id < 16; id++)
		if (s->others[id] != 0)
			return false;
	for (int k = 0; sp->nodes[k] != 0; k++) {
		int id = sp->nodes[k];
		if (s->voters[id] < sp->lo || s->voters[id] > sp->hi)
			return false;
		if (s->serving[id] < s->voters[id]) /* a lost or closed replica */
			return false;
		if (sp->max_leaders != 0 && s->leaders[id] > sp->max_leaders)
			return false;
	}
	if (sp->max_leaders != 0) {
		int led = 0;
		for (int id = 1; id < 16; id++)
			led += s->leaders[id];
		if (led != s->groups)
			return false;
	}
	return true;
}

static bool gone(const shape *s, void *arg)
{
	int id = *(int *)arg;
	return !s->in_map[id] && s->voters[id] == 0 && s->others[id] == 0;
}

static void add_node(void)
{
	free(tl_cluster_add_node(&C));
}

static void remove_node(int id)
{
	char *out = NULL, *err = NULL;
	int rc = tl_shoal(&C, &out, &err, "admin remove-node --node-id %d --timeout-secs 240", id);
	ck_assert_msg(rc == 0, "remove-node %d: %s", id, err != NULL ? err : "");
	free(out);
	free(err);
}

/* ------------------------------------------------------------------------ */

START_TEST(test_elastic)
{
	ck_assert_msg(tl_cluster_up_opts(&C, 3, 1, 4, "--dead-after-ms 8000"),
	              "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	json_decref(call(
	    "CreateTable",
	    "{\"TableName\":\"elastic\",\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
	    "\"AttributeType\":\"S\"},{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
	    "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"}],"
	    "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"byg\",\"KeySchema\":[{\"AttributeName\":"
	    "\"g\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"pk\",\"KeyType\":\"RANGE\"}],"
	    "\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}],"
	    "\"BillingMode\":\"PAY_PER_REQUEST\"}"));
	shape s;
	shape_of(&s);
	print_shape("start", &s);
	writer_start();

	/* Grow 3 -> 5 under load; group 0's leader -- the executor -- is
	 * killed with SIGKILL while a move is in flight, and restarted: the
	 * next leader finds the move in the map and finishes it. */
	add_node();
	add_node();
	int64_t until = now_ms() + 60000;
	for (shape_of(&s); s.moving == 0 || s.leader0 == 0; shape_of(&s)) {
		ck_assert_msg(now_ms() < until, "no move in flight within 60 s");
		usleep(20000);
	}
	int victim = s.leader0;
	printf("elastic: SIGKILL of node %d (group 0's leader) with %d move(s) in flight, map "
	       "epoch %lld\n",
	       victim, s.moving, s.epoch);
	ck_assert(tl_cluster_stop_node(&C, victim, true));
	ck_assert(tl_cluster_start_node(&C, victim));
	spread five = {.nodes = {1, 2, 3, 4, 5}, .lo = 2, .hi = 3, .max_leaders = 1};
	wait_shape("grow 3 -> 5", settled, &five, 240, &s);
	ck_assert_int_ge(s.voters[4], 2);
	ck_assert_int_ge(s.voters[5], 2);

	/* Decommission node 1 under load. */
	remove_node(1);
	int one = 1;
	wait_shape("decommission node 1", gone, &one, 10, &s);
	spread four = {.nodes = {2, 3, 4, 5}, .lo = 3, .hi = 3, .max_leaders = 1};
	wait_shape("settled on 4 nodes", settled, &four, 120, &s);

	/* Node 2 loses its data directory. */
	ck_assert(tl_cluster_stop_node(&C, 2, true));
	ck_assert_int_eq(tl_sh("rm -rf '%s/node-2'", C.dir), 0);
	ck_assert(tl_cluster_start_node(&C, 2));
	wait_shape("node 2 rebuilt after losing its directory", settled, &four, 180, &s);
	ck_assert_int_eq(s.voters[2], 3);

	/* Node 3 dies for good: its replicas are re-created on 2, 4 and 5
	 * after dead_after_ms, then the operator removes it. */
	ck_assert(tl_cluster_stop_node(&C, 3, true));
	spread three = {.nodes = {2, 4, 5}, .lo = 4, .hi = 4, .max_leaders = 2};
	wait_shape("node 3 dead, its replicas re-created", settled, &three, 180, &s);
	remove_node(3);
	int three_id = 3;
	wait_shape("node 3 left the map", gone, &three_id, 30, &s);

	writer_stop();
	ck_assert_msg(atomic_load(&W.failed) == 0, "the client saw %d errors: %s",
	              atomic_load(&W.failed), W.first_error);
	check_items();

	/* Every process restarts: the shape survives. */
	shape before = s;
	for (int id = 2; id <= 5; id++)
		if (id != 3)
			ck_assert(tl_cluster_stop_node(&C, id, false));
	ck_assert(tl_cluster_stop_router(&C, 1, false));
	for (int id = 2; id <= 5; id++)
		if (id != 3)
			ck_assert(tl_cluster_start_node(&C, id));
	ck_assert(tl_cluster_start_router(&C, 1));
	wait_shape("restart of every process", settled, &three, 60, &s);
	ck_assert_int_eq(s.epoch, before.epoch);
	for (int id = 1; id < 16; id++)
		ck_assert_int_eq(s.voters[id], before.voters[id]);
	check_items();

	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

static Suite *elastic_suite(void)
{
	Suite *s = suite_create("elastic");
	TCase *tc = tcase_create("moves");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_elastic);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(elastic_suite)
