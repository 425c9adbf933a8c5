/*
 * it_converge -- indexes converge (DESIGN.md: once writes stop, every index
 * equals the index recomputed from its base table), on a real 3-node cluster.
 *
 * A seeded random workload (SHOAL_SEED=n to replay; the seed is printed) of
 * puts, updates that set, change and remove index keys, deletes, and
 * conditional writes runs from several threads against a table with three
 * GSIs (ALL; KEYS_ONLY with 4 write shards; INCLUDE, hash key only) and an
 * LSI, while a node is killed with SIGKILL and restarted, and another is
 * stopped and started gracefully.  Writes that fail during the failures have
 * an unknown outcome, which is fine: the check compares each index with the
 * table as it ends up.  After the workload stops, build/bin/index_check is
 * polled until every index matches (the differences are printed otherwise).
 * The time the indexes took to converge is printed, never asserted.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define WRITERS     4
#define OPS_PER     600
#define PKS         12
#define SKS         8
#define CONVERGE_MS 90000

static tl_cluster C;
static shoal_client *client;
static unsigned seed;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *TABLE_DEF =
    "{\"TableName\":\"conv\","
    "\"AttributeDefinitions\":["
    "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"sk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"g1pk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"g1sk\",\"AttributeType\":\"N\"},"
    "{\"AttributeName\":\"g2pk\",\"AttributeType\":\"S\"},"
    "{\"AttributeName\":\"lsk\",\"AttributeType\":\"N\"}],"
    "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
    "{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],"
    "\"GlobalSecondaryIndexes\":["
    "{\"IndexName\":\"byG1\",\"KeySchema\":[{\"AttributeName\":\"g1pk\",\"KeyType\":\"HASH\"},"
    "{\"AttributeName\":\"g1sk\",\"KeyType\":\"RANGE\"}],\"Projection\":{\"ProjectionType\":"
    "\"ALL\"}},"
    "{\"IndexName\":\"byG1sharded\",\"KeySchema\":[{\"AttributeName\":\"g1pk\",\"KeyType\":"
    "\"HASH\"},{\"AttributeName\":\"g1sk\",\"KeyType\":\"RANGE\"}],\"Projection\":{"
    "\"ProjectionType\":\"KEYS_ONLY\"},\"WriteShards\":4},"
    "{\"IndexName\":\"byG2\",\"KeySchema\":[{\"AttributeName\":\"g2pk\",\"KeyType\":\"HASH\"}],"
    "\"Projection\":{\"ProjectionType\":\"INCLUDE\",\"NonKeyAttributes\":[\"a\"]}}],"
    "\"LocalSecondaryIndexes\":["
    "{\"IndexName\":\"byL\",\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
    "{\"AttributeName\":\"lsk\",\"KeyType\":\"RANGE\"}],\"Projection\":{\"ProjectionType\":"
    "\"ALL\"}}],"
    "\"BillingMode\":\"PAY_PER_REQUEST\"}";

typedef struct writer {
	pthread_t thread;
	unsigned rng;
	int ok, failed, cond_failed;
} writer;

static _Atomic int ops_done;

/* One random write; the attributes that feed indexes are present only
 * sometimes (sparse indexes), and the GSI hash key takes few values (hot
 * keys, several entries per key). */
static void one_op(writer *w)
{
	char body[1024];
	int pk = rand_r(&w->rng) % PKS, sk = rand_r(&w->rng) % SKS;
	int kind = rand_r(&w->rng) % 10;
	char key[96];
	snprintf(key, sizeof(key), "\"pk\":{\"S\":\"p%d\"},\"sk\":{\"S\":\"s%d\"}", pk, sk);
	const char *op;
	if (kind < 4) { /* put, each index attribute present with probability 2/3 */
		char attrs[512] = "";
		size_t n = 0;
		if (rand_r(&w->rng) % 3 != 0)
			n += (size_t)snprintf(attrs + n, sizeof(attrs) - n,
			                      ",\"g1pk\":{\"S\":\"G%d\"},\"g1sk\":{\"N\":\"%d\"}",
			                      rand_r(&w->rng) % 3, rand_r(&w->rng) % 50);
		if (rand_r(&w->rng) % 3 != 0)
			n += (size_t)snprintf(attrs + n, sizeof(attrs) - n,
			                      ",\"g2pk\":{\"S\":\"H%d\"}", rand_r(&w->rng) % 5);
		if (rand_r(&w->rng) % 3 != 0)
			n += (size_t)snprintf(attrs + n, sizeof(attrs) - n,
			                      ",\"lsk\":{\"N\":\"%d\"}", rand_r(&w->rng) % 20);
		snprintf(attrs + n, sizeof(attrs) - n,
		         ",\"a\":{\"N\":\"%d\"},\"b\":{\"S\":\"x%d\"}", rand_r(&w->rng) % 100,
		         rand_r(&w->rng) % 100);
		op = "PutItem";
		if (kind == 3) /* conditional: only a new item */
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"conv\",\"Item\":{%s%s},"
			         "\"ConditionExpression\":\"attribute_not_exists(pk)\"}",
			         key, attrs);
		else
			snprintf(body, sizeof(body), "{\"TableName\":\"conv\",\"Item\":{%s%s}}",
			         key, attrs);
	} else if (kind < 8) { /* update: change or remove index keys or projected data */
		op = "UpdateItem";
		switch (rand_r(&w->rng) % 6) {
		case 0:
			snprintf(
			    body, sizeof(body),
			    "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":\"SET g1pk "
			    "= "
			    ":p, g1sk = :s\",\"ExpressionAttributeValues\":{\":p\":{\"S\":\"G%d\"},"
			    "\":s\":{\"N\":\"%d\"}}}",
			    key, rand_r(&w->rng) % 3, rand_r(&w->rng) % 50);
			break;
		case 1:
			snprintf(
			    body, sizeof(body),
			    "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":\"REMOVE "
			    "g1sk\"}",
			    key);
			break;
		case 2:
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":\"SET "
			         "g2pk = "
			         ":h\",\"ExpressionAttributeValues\":{\":h\":{\"S\":\"H%d\"}}}",
			         key, rand_r(&w->rng) % 5);
			break;
		case 3:
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":"
			         "\"REMOVE g2pk, "
			         "lsk\"}",
			         key);
			break;
		case 4: /* projected attribute of byG2 (INCLUDE a) changes, keys do not */
			snprintf(
			    body, sizeof(body),
			    "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":\"ADD a "
			    ":one\",\"ExpressionAttributeValues\":{\":one\":{\"N\":\"1\"}}}",
			    key);
			break;
		default: /* conditional update on the item's data */
			snprintf(
			    body, sizeof(body),
			    "{\"TableName\":\"conv\",\"Key\":{%s},\"UpdateExpression\":\"SET lsk = "
			    ":l, b = :b\",\"ConditionExpression\":\"attribute_exists(pk) AND a < "
			    ":lim\",\"ExpressionAttributeValues\":{\":l\":{\"N\":\"%d\"},\":b\":{"
			    "\"S\":\"u\"},\":lim\":{\"N\":\"50\"}}}",
			    key, rand_r(&w->rng) % 20);
			break;
		}
	} else {
		op = "DeleteItem";
		snprintf(body, sizeof(body), "{\"TableName\":\"conv\",\"Key\":{%s}}", key);
	}
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(client, op, body, &out, &err);
	shoal_free(out);
	if (rc == SHOAL_OK)
		w->ok++;
	else if (rc == SHOAL_E_CONDITION_FAILED)
		w->cond_failed++;
	else
		w->failed++;
	atomic_fetch_add(&ops_done, 1);
}

static void *write_loop(void *arg)
{
	writer *w = arg;
	for (int i = 0; i < OPS_PER; i++)
		one_op(w);
	return NULL;
}

static void wait_ops(int n)
{
	int64_t deadline = now_ms() + 120000;
	while (atomic_load(&ops_done) < n) {
		ck_assert_msg(now_ms() < deadline, "the workload stalled at %d ops",
		              atomic_load(&ops_done));
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* Runs index_check; returns its exit status, its output in *out (freed by
 * the caller). */
static int index_check(char **out)
{
	char path[2048], cmd[4096];
	snprintf(path, sizeof(path), "%s/index_check.out", C.dir);
	snprintf(cmd, sizeof(cmd), "'%s/index_check' --endpoint '%s' --table-name conv >'%s' 2>&1",
	         C.bin, C.endpoint, path);
	int rc = tl_sh("%s", cmd);
	*out = tl_read_file(path);
	return rc;
}

START_TEST(test_indexes_converge_through_failures)
{
	const char *s = getenv("SHOAL_SEED");
	seed = s != NULL ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
	printf("it_converge: seed %u (SHOAL_SEED=%u to replay)\n", seed, seed);
	fflush(stdout);

	ck_assert_msg(tl_cluster_up(&C, 3, 1, 4), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(client, "CreateTable", TABLE_DEF, &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "CreateTable: %s: %s", err.exception, err.message);
	shoal_free(out);

	static writer w[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].rng = seed + (unsigned)i * 7919u;
		pthread_create(&w[i].thread, NULL, write_loop, &w[i]);
	}
	int total = WRITERS * OPS_PER;
	/* A node dies hard a quarter of the way in and comes back at half;
	 * another stops gracefully at 60% and comes back at 80%. */
	wait_ops(total / 4);
	ck_assert(tl_cluster_stop_node(&C, 2, true));
	wait_ops(total / 2);
	ck_assert(tl_cluster_start_node(&C, 2));
	wait_ops(total * 3 / 5);
	ck_assert(tl_cluster_stop_node(&C, 3, false));
	wait_ops(total * 4 / 5);
	ck_assert(tl_cluster_start_node(&C, 3));
	int ok = 0, failed = 0, cond = 0;
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(w[i].thread, NULL);
		ok += w[i].ok;
		failed += w[i].failed;
		cond += w[i].cond_failed;
	}
	printf("it_converge: %d writes acknowledged, %d conditional failures, %d failed\n", ok,
	       cond, failed);
	ck_assert_int_gt(ok, total / 2);

	int64_t t0 = now_ms();
	char *report = NULL;
	for (;;) {
		free(report);
		rc = index_check(&report);
		if (rc == 0)
			break;
		if (now_ms() - t0 > CONVERGE_MS)
			break;
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	printf("it_converge: indexes %s after %lld ms\n%s",
	       rc == 0 ? "converged" : "did NOT converge", (long long)(now_ms() - t0),
	       report != NULL ? report : "");
	ck_assert_msg(rc == 0, "the indexes differ from the table (seed %u):\n%s", seed,
	              report != NULL ? report : "");
	free(report);
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

static Suite *converge_suite(void)
{
	Suite *s = suite_create("converge");
	TCase *tc = tcase_create("converge");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_indexes_converge_through_failures);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(converge_suite)
