/*
 * it_pmove -- issue 14's partition moves on a real local cluster (real
 * shoal-node / shoal-router processes, real Raft and LMDB), with a writer
 * running through every step:
 *
 *  - split: table `pmove`'s first partition (group 1) splits at its middle
 *    and the upper half moves to group 3 (`shoal admin split-partition`);
 *  - move: its second partition (group 2) moves whole to group 1 (`shoal
 *    admin move-partition`), and the node leading group 2 -- the source, whose
 *    leader drives the copy -- is killed with SIGKILL while the move is under
 *    way, then restarted: the next leader starts a new attempt and finishes;
 *  - every process restarts: the map, and where every item lives, survive.
 *
 * The writer puts new items, updates and deletes preloaded ones, one at a
 * time through libshoal (its retries on), and keeps the state it was
 * acknowledged; it must see no error.  Afterwards, for every partition key,
 * a ConsistentRead Query returns exactly the acknowledged items (none lost,
 * none duplicated, no deleted one back), the LSI counts agree, a Scan counts
 * each item once (the source's copy is gone), and the GSI converges to the
 * same count.  Times and the writer's worst latency (the cutover pauses) are
 * printed, never asserted.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define PKS      40
#define PRE_SKS  25 /* preloaded items per partition key: sk 0 .. 24 */
#define MAX_OPS  60000
#define TABLE    "pmove"
#define G_VALUES 7

static tl_cluster C;
static shoal_client *client;
static long long table_id; /* TABLE's id (status names it "" before the router's catalog does) */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int call_rc(const char *op, const char *body, json_t **out, shoal_error *err)
{
	char *o = NULL;
	int rc = shoal_call_json(client, op, body, &o, err);
	if (out != NULL)
		*out = rc == SHOAL_OK ? json_loads(o, 0, NULL) : NULL;
	shoal_free(o);
	return rc;
}

static json_t *call(const char *op, const char *body)
{
	json_t *j;
	shoal_error err;
	int rc = call_rc(op, body, &j, &err);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s: %s", op, err.exception, err.message);
	ck_assert_ptr_nonnull(j);
	return j;
}

static long long jint(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* ------------------------------------------------------------------------ */
/* The expected state                                                        */
/* ------------------------------------------------------------------------ */

/* Items are (pk "p<i>", sk n).  Preloaded: sk 0 .. PRE_SKS-1; the writer's
 * new items: sk 1000 + op.  Each item's acknowledged v, or absent. */
typedef struct item_state {
	bool present;
	bool uncertain; /* an operation on it failed: either outcome is right */
	long long v;
} item_state;

static item_state pre[PKS][PRE_SKS];
static item_state fresh[MAX_OPS];

static struct {
	pthread_t thread;
	atomic_bool stop;
	atomic_int ops, failed;
	int64_t worst_ms;
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 32];
} W;

static void put_body(char *b, size_t cap, int pk, long long sk, long long v)
{
	snprintf(b, cap,
	         "{\"TableName\":\"" TABLE
	         "\",\"Item\":{\"pk\":{\"S\":\"p%d\"},\"sk\":{\"N\":\"%lld\"},"
	         "\"v\":{\"N\":\"%lld\"},\"l\":{\"N\":\"%lld\"},\"g\":{\"S\":\"g%lld\"}}}",
	         pk, sk, v, v % 10, v % G_VALUES);
}

static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&W.stop) && atomic_load(&W.ops) < MAX_OPS) {
		int i = atomic_load(&W.ops);
		char body[512];
		const char *op;
		item_state *st;
		item_state next;
		int pk = i % PKS, sk = (i / PKS) % PRE_SKS;
		if (i % 5 == 1) { /* delete a preloaded item */
			op = "DeleteItem";
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"" TABLE
			         "\",\"Key\":{\"pk\":{\"S\":\"p%d\"},\"sk\":"
			         "{\"N\":\"%d\"}}}",
			         pk, sk);
			st = &pre[pk][sk];
			next = (item_state){.present = false};
		} else if (i % 5 == 2) { /* (re)write a preloaded item */
			op = "PutItem";
			put_body(body, sizeof(body), pk, sk, 100000 + i);
			st = &pre[pk][sk];
			next = (item_state){.present = true, .v = 100000 + i};
		} else { /* a new item */
			op = "PutItem";
			put_body(body, sizeof(body), pk, 1000 + i, i);
			st = &fresh[i];
			next = (item_state){.present = true, .v = i};
		}
		shoal_error err;
		int64_t t0 = now_ms();
		int rc = call_rc(op, body, NULL, &err);
		int64_t ms = now_ms() - t0;
		if (ms > W.worst_ms)
			W.worst_ms = ms;
		if (rc == SHOAL_OK) {
			*st = next;
		} else {
			st->uncertain = true;
			if (atomic_fetch_add(&W.failed, 1) == 0)
				snprintf(W.first_error, sizeof(W.first_error), "%s #%d: %s: %s", op,
				         i, err.exception, err.message);
		}
		atomic_fetch_add(&W.ops, 1);
		usleep(2000); /* ~300 operations/s */
	}
	return NULL;
}

static void writer_start(void)
{
	atomic_store(&W.stop, false);
	W.worst_ms = 0;
	ck_assert_int_eq(pthread_create(&W.thread, NULL, writer, NULL), 0);
}

static void writer_stop(const char *when)
{
	atomic_store(&W.stop, true);
	pthread_join(W.thread, NULL);
	printf("pmove: writer during %s: %d operations so far, %d failed, worst latency %lld "
	       "ms%s%s\n",
	       when, atomic_load(&W.ops), atomic_load(&W.failed), (long long)W.worst_ms,
	       W.first_error[0] != '\0' ? ", first error " : "", W.first_error);
}

static void preload(void)
{
	for (int pk = 0; pk < PKS; pk++) {
		char body[8192];
		int len = snprintf(body, sizeof(body), "{\"RequestItems\":{\"" TABLE "\":[");
		for (int sk = 0; sk < PRE_SKS; sk++) {
			char item[512];
			put_body(item, sizeof(item), pk, sk, sk);
			/* the Item object of put_body's body */
			const char *it = strstr(item, "\"Item\":");
			len += snprintf(body + len, sizeof(body) - (size_t)len,
			                "%s{\"PutRequest\":{%.*s}}", sk > 0 ? "," : "",
			                (int)(strlen(it) - 1), it);
			pre[pk][sk] = (item_state){.present = true, .v = sk};
		}
		snprintf(body + len, sizeof(body) - (size_t)len, "]}}");
		json_t *r = call("BatchWriteItem", body);
		ck_assert_int_eq(json_object_size(json_object_get(r, "UnprocessedItems")), 0);
		json_decref(r);
	}
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */

/* The items of partition key pk, ConsistentRead, all pages: sk -> v into
 * got (sk < 1000: pre; else fresh[sk - 1000]); returns how many. */
static int query_pk(int pk, long long *sks, long long *vs, int cap)
{
	int n = 0;
	char *start = NULL;
	do {
		char body[1024];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"" TABLE "\",\"ConsistentRead\":true,"
		         "\"KeyConditionExpression\":\"pk = :p\",\"ExpressionAttributeValues\":"
		         "{\":p\":{\"S\":\"p%d\"}}%s%s}",
		         pk, start != NULL ? ",\"ExclusiveStartKey\":" : "",
		         start != NULL ? start : "");
		free(start);
		start = NULL;
		json_t *q = call("Query", body);
		size_t x;
		json_t *it;
		json_array_foreach(json_object_get(q, "Items"), x, it)
		{
			ck_assert_int_lt(n, cap);
			sks[n] = atoll(
			    json_string_value(json_object_get(json_object_get(it, "sk"), "N")));
			vs[n] = atoll(
			    json_string_value(json_object_get(json_object_get(it, "v"), "N")));
			n++;
		}
		json_t *lek = json_object_get(q, "LastEvaluatedKey");
		if (lek != NULL)
			start = json_dumps(lek, JSON_COMPACT);
		json_decref(q);
	} while (start != NULL);
	return n;
}

static long long count_of(const char *op, const char *body_fmt, const char *arg)
{
	long long total = 0;
	char *start = NULL;
	do {
		char body[1024], inner[512];
		snprintf(inner, sizeof(inner), body_fmt, arg);
		snprintf(body, sizeof(body), "{%s%s%s}", inner,
		         start != NULL ? ",\"ExclusiveStartKey\":" : "",
		         start != NULL ? start : "");
		free(start);
		start = NULL;
		json_t *q = call(op, body);
		total += jint(q, "Count");
		json_t *lek = json_object_get(q, "LastEvaluatedKey");
		if (lek != NULL)
			start = json_dumps(lek, JSON_COMPACT);
		json_decref(q);
	} while (start != NULL);
	return total;
}

static void check_all(const char *when)
{
	static long long sks[MAX_OPS + PRE_SKS], vs[MAX_OPS + PRE_SKS];
	static bool seen_fresh[MAX_OPS];
	memset(seen_fresh, 0, sizeof(seen_fresh));
	int ops = atomic_load(&W.ops);
	long long expected = 0, certain_total = 0, uncertain = 0;
	for (int pk = 0; pk < PKS; pk++) {
		bool seen_pre[PRE_SKS] = {false};
		int n = query_pk(pk, sks, vs, MAX_OPS + PRE_SKS);
		for (int k = 0; k < n; k++) {
			if (sks[k] < 1000) {
				ck_assert_int_lt(sks[k], PRE_SKS);
				const item_state *s = &pre[pk][sks[k]];
				ck_assert_msg(!seen_pre[sks[k]], "%s: p%d/%lld returned twice",
				              when, pk, sks[k]);
				seen_pre[sks[k]] = true;
				ck_assert_msg(s->uncertain || (s->present && s->v == vs[k]),
				              "%s: p%d/%lld is v=%lld, acknowledged %s%lld", when,
				              pk, sks[k], vs[k], s->present ? "v=" : "deleted ",
				              s->present ? s->v : 0);
			} else {
				long long i = sks[k] - 1000;
				ck_assert(i >= 0 && i < ops && i % PKS == pk);
				ck_assert_msg(!seen_fresh[i], "%s: p%d/%lld returned twice", when,
				              pk, sks[k]);
				seen_fresh[i] = true;
				ck_assert_msg(
				    fresh[i].uncertain || (fresh[i].present && fresh[i].v == vs[k]),
				    "%s: p%d/%lld was never acknowledged", when, pk, sks[k]);
			}
		}
		for (int sk = 0; sk < PRE_SKS; sk++) {
			const item_state *s = &pre[pk][sk];
			if (s->uncertain) {
				uncertain++;
				continue;
			}
			ck_assert_msg(seen_pre[sk] == s->present, "%s: p%d/%d %s", when, pk, sk,
			              s->present ? "is missing" : "was deleted but is back");
			certain_total += s->present;
		}
		expected += n;
	}
	for (int i = 0; i < ops; i++) {
		if (fresh[i].uncertain) {
			uncertain++;
			continue;
		}
		if (!fresh[i].present)
			continue;
		ck_assert_msg(seen_fresh[i], "%s: acknowledged item p%d/%d is missing", when,
		              i % PKS, 1000 + i);
		certain_total++;
	}
	/* Scan: every item once (a source that still served its moved copy
	 * would count it twice). */
	long long scanned =
	    count_of("Scan", "\"TableName\":\"" TABLE "\",\"Select\":\"COUNT\"%s", "");
	ck_assert_msg(scanned == expected, "%s: Scan counts %lld items, Queries found %lld", when,
	              scanned, expected);
	/* The LSI holds one entry per item. */
	long long lsi = 0;
	for (int pk = 0; pk < PKS; pk++) {
		char arg[32];
		snprintf(arg, sizeof(arg), "p%d", pk);
		lsi +=
		    count_of("Query",
		             "\"TableName\":\"" TABLE "\",\"IndexName\":\"byl\",\"ConsistentRead\":"
		             "true,\"KeyConditionExpression\":\"pk = :p\","
		             "\"ExpressionAttributeValues\":{\":p\":{\"S\":\"%s\"}},\"Select\":"
		             "\"COUNT\"",
		             arg);
	}
	ck_assert_msg(lsi == expected, "%s: the LSI holds %lld entries for %lld items", when, lsi,
	              expected);
	/* The GSI converges to the same count. */
	int64_t until = now_ms() + 60000;
	long long gsi;
	for (;;) {
		gsi = 0;
		for (int g = 0; g < G_VALUES; g++) {
			char arg[32];
			snprintf(arg, sizeof(arg), "g%d", g);
			gsi += count_of("Query",
			                "\"TableName\":\"" TABLE "\",\"IndexName\":\"byg\","
			                "\"KeyConditionExpression\":\"g = :g\","
			                "\"ExpressionAttributeValues\":{\":g\":{\"S\":\"%s\"}},"
			                "\"Select\":\"COUNT\"",
			                arg);
		}
		if (gsi == expected)
			break;
		ck_assert_msg(now_ms() < until,
		              "%s: the GSI holds %lld entries for %lld items after 60 s", when, gsi,
		              expected);
		usleep(200000);
	}
	printf("pmove: %s: %lld items (%lld certain, %lld uncertain), each read once, LSI and GSI "
	       "agree\n",
	       when, expected, certain_total, uncertain);
}

/* ------------------------------------------------------------------------ */
/* The map                                                                   */
/* ------------------------------------------------------------------------ */

static json_t *status_json(void)
{
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(&C, &o, &e, "status --output json");
	ck_assert_msg(rc == 0, "status: exit %d: %s", rc, e);
	json_t *st = json_loads(o, 0, NULL);
	ck_assert_ptr_nonnull(st);
	free(o);
	free(e);
	return st;
}

static uint64_t hexval(const json_t *v)
{
	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	const char *s = json_string_value(v);
	return s != NULL ? strtoull(s, NULL, 0) : 0;
}

/* The group serving the partition of TABLE holding hash h, and its pending
 * move's target (0: none); false if the table has no partitions in the map. */
static bool part_of(uint64_t h, int *group, int *moving)
{
	json_t *st = status_json();
	json_t *parts = json_object_get(st, "MapPartitions");
	size_t i;
	json_t *p;
	bool found = false;
	json_array_foreach(parts, i, p)
	{
		const char *t = json_string_value(json_object_get(p, "TableName"));
		if (t != NULL && strcmp(t, TABLE) == 0 && table_id == 0)
			table_id = jint(p, "TableId");
		if ((t == NULL || strcmp(t, TABLE) != 0) &&
		    (table_id == 0 || jint(p, "TableId") != table_id))
			continue;
		uint64_t lo = hexval(json_object_get(p, "Lo")),
		         hi = hexval(json_object_get(p, "Hi"));
		if (h < lo || h > hi)
			continue;
		*group = (int)jint(p, "Group");
		*moving = (int)jint(p, "MovingTo");
		found = true;
	}
	json_decref(st);
	return found;
}

/* The node leading group g (0: none). */
static int leader_of(int g)
{
	json_t *st = status_json();
	size_t i;
	json_t *row;
	int leader = 0;
	json_array_foreach(json_object_get(st, "Groups"), i, row)
	{
		const char *role = json_string_value(json_object_get(row, "Role"));
		if (jint(row, "Group") == g && role != NULL && strcmp(role, "leader") == 0)
			leader = (int)jint(row, "Node");
	}
	json_decref(st);
	return leader;
}

static void admin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void admin(const char *fmt, ...)
{
	char args[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(&C, &o, &e, "%s", args);
	ck_assert_msg(rc == 0, "shoal %s: exit %d: %s%s", args, rc, o != NULL ? o : "",
	              e != NULL ? e : "");
	free(o);
	free(e);
}

/* Waits until hash h's partition is served by group `to` with no move
 * pending; returns the milliseconds it took. */
static int64_t wait_served(uint64_t h, int to, int secs)
{
	int64_t t0 = now_ms(), until = t0 + secs * 1000;
	for (;;) {
		int g = -1, moving = -1;
		if (part_of(h, &g, &moving) && g == to && moving == 0)
			return now_ms() - t0;
		ck_assert_msg(now_ms() < until,
		              "hash %016" PRIx64 " is in group %d (moving to %d) after %d s", h, g,
		              moving, secs);
		usleep(50000);
	}
}

/* ------------------------------------------------------------------------ */

START_TEST(test_pmove)
{
	/* The source leader pauses 150 ms after each 4 KiB chunk and before
	 * its fence, so that the SIGKILL below lands in the middle of a copy. */
	setenv("SHOAL_PMOVE_TEST_PAUSE_MS", "150", 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ck_assert_msg(tl_cluster_up(&C, 3, 1, 4), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	json_decref(call(
	    "CreateTable",
	    "{\"TableName\":\"" TABLE "\",\"AttributeDefinitions\":["
	    "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"
	    "{\"AttributeName\":\"sk\",\"AttributeType\":\"N\"},"
	    "{\"AttributeName\":\"l\",\"AttributeType\":\"N\"},"
	    "{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
	    "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
	    "{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],"
	    "\"LocalSecondaryIndexes\":[{\"IndexName\":\"byl\",\"KeySchema\":["
	    "{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"l\",\"KeyType\":"
	    "\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}],"
	    "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"byg\",\"KeySchema\":["
	    "{\"AttributeName\":\"g\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"pk\",\"KeyType\":"
	    "\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}],"
	    "\"BillingMode\":\"PAY_PER_REQUEST\"}"));
	preload();
	check_all("preload");

	/* 3 data groups: partitions [0, 1/3), [1/3, 2/3), [2/3, 1) of the
	 * hash space in groups 1, 2, 3. */
	const uint64_t mid0 = 0x2aaaaaaaaaaaaaaaull; /* the middle of partition 0 */
	const uint64_t in1 = 0x8000000000000000ull;  /* inside partition 1 */

	/* Split partition 0 at its middle; the upper half goes to group 3. */
	writer_start();
	int64_t t0 = now_ms();
	admin("admin split-partition --table-name " TABLE " --at 0x%016" PRIx64
	      " --to-group 3 --no-wait",
	      mid0);
	wait_served(mid0, 3, 120);
	int g = -1, moving = -1;
	ck_assert(part_of(mid0 - 1, &g, &moving));
	ck_assert_int_eq(g, 1);
	printf("pmove: split of partition 0, upper half to group 3: %lld ms\n",
	       (long long)(now_ms() - t0));
	writer_stop("the split");
	ck_assert_msg(atomic_load(&W.failed) == 0, "the client saw %d errors: %s",
	              atomic_load(&W.failed), W.first_error);
	check_all("after the split");

	/* Move partition 1 (group 2) to group 1; SIGKILL group 2's leader
	 * while the move is under way. */
	writer_start();
	t0 = now_ms();
	admin("admin move-partition --table-name " TABLE " --hash 0x%016" PRIx64
	      " --to-group 1 --no-wait",
	      in1);
	int victim = 0;
	for (int64_t until = now_ms() + 30000; victim == 0; usleep(20000)) {
		ck_assert_msg(now_ms() < until, "group 2 shows no leader");
		g = moving = -1;
		if (part_of(in1, &g, &moving) && moving == 1)
			victim = leader_of(2);
	}
	usleep(400000); /* a few chunks into the copy */
	ck_assert(tl_cluster_stop_node(&C, victim, true));
	printf("pmove: SIGKILL of node %d (group 2's leader, the move's source) %lld ms into the "
	       "move\n",
	       victim, (long long)(now_ms() - t0));
	ck_assert(tl_cluster_start_node(&C, victim));
	wait_served(in1, 1, 180);
	printf("pmove: move of partition 1 to group 1 with its source leader killed: %lld ms\n",
	       (long long)(now_ms() - t0));
	writer_stop("the move");
	ck_assert_msg(atomic_load(&W.failed) == 0, "the client saw %d errors: %s",
	              atomic_load(&W.failed), W.first_error);
	check_all("after the move");

	/* Every process restarts: the shape and the items survive. */
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_stop_node(&C, id, false));
	ck_assert(tl_cluster_stop_router(&C, 1, false));
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_start_node(&C, id));
	ck_assert(tl_cluster_start_router(&C, 1));
	wait_served(in1, 1, 60);
	wait_served(mid0, 3, 60);
	check_all("after a restart of every process");

	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

static Suite *pmove_suite(void)
{
	Suite *s = suite_create("pmove");
	TCase *tc = tcase_create("moves");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_pmove);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(pmove_suite)
