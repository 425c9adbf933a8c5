/*
 * it_capacity -- throttling of every operation type on a real cluster (3
 * shoal-node, 1 shoal-router; partitions limited to PART_WCU write and
 * PART_RCU read units per second, no burst), through libshoal with its
 * throttle retries off:
 *
 *   - PutItem, UpdateItem, DeleteItem, GetItem, Query and Scan each draw on
 *     their partition's bucket: after the bucket refilled, each succeeds at
 *     least once and then gets ProvisionedThroughputExceededException (with
 *     DynamoDB's on-demand message) when called in a loop; a key of another
 *     partition is served meanwhile;
 *   - BatchWriteItem / BatchGetItem return a throttled partition's items as
 *     UnprocessedItems / UnprocessedKeys, the others' done;
 *   - TransactWriteItems on a throttled partition is cancelled with the
 *     reason ProvisionedThroughputExceeded; a transactional write costs
 *     twice a write's units, in ConsumedCapacity and in the partition's
 *     consumed units (metrics);
 *   - a GSI whose partition key is one value for every item (seed 002's
 *     pitfall) throttles its base table's writes once its one index
 *     partition is over capacity, with DynamoDB's GSI message, while another
 *     table's writes in the same groups go on;
 *   - an UpdateTable of a PROVISIONED table's throughput reaches the
 *     partitions' buckets.
 *
 * Partitions of a new table become known to their leaders at the next
 * capacity tick (<= 1 s): every test first polls the metrics until the
 * table's partitions show.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_metrics.h"

#define PART_WCU    40
#define PART_RCU    80
#define DEADLINE_MS 20000
#define HOT_PAD     (390 * 1024) /* bytes of test_batches' hot item */

static tl_cluster C;
static shoal_client *S;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Splits for heat off: every case judges throttling at fixed limits, and a
 * split raises them (it_autosplit tests the splits). */
static void cluster_up(void)
{
	char opts[200];
	snprintf(opts, sizeof(opts),
	         "--partition-wcu %d --partition-rcu %d --burst-secs 0 --split-throttled 0",
	         PART_WCU, PART_RCU);
	if (!tl_cluster_up_opts(&C, 3, 1, 4, opts)) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
}

static void cluster_down(void)
{
	tl_cluster_down(&C);
}

static void client_up(void)
{
	shoal_options o;
	shoal_options_init(&o);
	o.retries = 0;
	o.throttle_retries = 0; /* raw behaviour: see the throttles */
	ck_assert_int_eq(shoal_client_new(C.endpoint, &o, &S, NULL), SHOAL_OK);
}

static void client_down(void)
{
	shoal_client_free(S);
	S = NULL;
}

/* One call; its answer parsed (NULL on error, *e filled). */
static json_t *call(const char *op, shoal_error *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static json_t *call(const char *op, shoal_error *e, const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *body = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(body);
	vsnprintf(body, (size_t)len + 1, fmt, ap2);
	va_end(ap2);
	char *resp = NULL;
	shoal_error err;
	int rc = shoal_call_json(S, op, body, &resp, &err);
	free(body);
	if (e != NULL)
		*e = err;
	if (rc != SHOAL_OK)
		return NULL;
	json_t *j = json_loads(resp, 0, NULL);
	shoal_free(resp);
	ck_assert_ptr_nonnull(j);
	return j;
}

static void ok(const char *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(const char *op, const char *fmt, ...)
{
	char body[16384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	shoal_error e;
	json_t *j = call(op, &e, "%s", body);
	ck_assert_msg(j != NULL, "%s: %s: %s", op, e.exception, e.message);
	json_decref(j);
}

/* Counts the samples of metric `name` with table=`table` over every node
 * (leaders only export them), adding their values for kind (NULL: any). */
typedef struct msum {
	const char *name, *table, *kind;
	int n;
	double sum;
} msum;

static void msum_each(void *arg, const char *name, size_t name_len, const char *labels,
                      double value)
{
	msum *m = arg;
	char t[300], k[16];
	if (strlen(m->name) != name_len || strncmp(name, m->name, name_len) != 0)
		return;
	if (!tl_metrics_label(labels, "table", t, sizeof(t)) || strcmp(t, m->table) != 0)
		return;
	if (m->kind != NULL &&
	    (!tl_metrics_label(labels, "kind", k, sizeof(k)) || strcmp(k, m->kind) != 0))
		return;
	m->n++;
	m->sum += value;
}

static msum metric(const char *name, const char *table, const char *kind)
{
	msum m = {name, table, kind, 0, 0};
	for (int i = 1; i <= 3; i++) {
		char hp[64];
		snprintf(hp, sizeof(hp), "127.0.0.1:%d", C.base_port + 100 * i + 90);
		char *text = tl_metrics_get(hp);
		if (text != NULL)
			tl_metrics_each(text, msum_each, &m);
		free(text);
	}
	return m;
}

/* Creates table `name` (PK S, SK S; gsi: a GSI "G" on attribute g) and
 * waits until its leaders know its partitions (both kinds of the table's
 * three partitions, and the GSI's). */
static void create(const char *name, bool gsi)
{
	if (gsi)
		ok("CreateTable",
		   "{\"TableName\":\"%s\",\"BillingMode\":\"PAY_PER_REQUEST\","
		   "\"AttributeDefinitions\":[{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
		   "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"},"
		   "{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
		   "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
		   "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
		   "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"GSI1\",\"KeySchema\":"
		   "[{\"AttributeName\":\"g\",\"KeyType\":\"HASH\"}],"
		   "\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}]}",
		   name);
	else
		ok("CreateTable",
		   "{\"TableName\":\"%s\",\"BillingMode\":\"PAY_PER_REQUEST\","
		   "\"AttributeDefinitions\":[{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"},"
		   "{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"}],"
		   "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"},"
		   "{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}]}",
		   name);
	int want = (gsi ? 2 : 1) * 3 * 2;
	int64_t deadline = now_ms() + DEADLINE_MS;
	msum m;
	do {
		m = metric("shoal_partition_limit_units", name, NULL);
		if (m.n >= want)
			return;
		usleep(20000); /* polling interval */
	} while (now_ms() < deadline);
	ck_abort_msg("table %s: %d partition limits exported, want %d", name, m.n, want);
}

static const char *item(char *buf, size_t size, const char *pk, const char *sk)
{
	snprintf(buf, size, "{\"PK\":{\"S\":\"%s\"},\"SK\":{\"S\":\"%s\"},\"v\":{\"S\":\"x\"}}", pk,
	         sk);
	return buf;
}

/* Calls op with body until it is throttled; asserts it succeeded at least
 * `min_ok` times first and was throttled with DynamoDB's exception. */
static void until_throttled(const char *op, int min_ok, const char *body)
{
	int64_t deadline = now_ms() + DEADLINE_MS;
	int n_ok = 0;
	shoal_error e;
	for (;;) {
		json_t *j = call(op, &e, "%s", body);
		if (j == NULL)
			break;
		json_decref(j);
		n_ok++;
		ck_assert_msg(now_ms() < deadline, "%s: never throttled (%d calls)", op, n_ok);
	}
	ck_assert_msg(e.code == SHOAL_E_THROUGHPUT, "%s: %s: %s", op, e.exception, e.message);
	ck_assert_str_eq(e.exception, "ProvisionedThroughputExceededException");
	ck_assert_msg(strstr(e.message, "check if you have a hot key") != NULL, "%s", e.message);
	ck_assert_msg(n_ok >= min_ok, "%s: throttled after %d successes (%s)", op, n_ok, e.message);
}

/* The fewest tokens (kind "Read" or "Write") any partition of table's base
 * holds now, from ClusterStatus (leaders report Load; absent members are 0). */
static double min_tokens(const char *table, const char *kind)
{
	shoal_error e;
	json_t *st = call("ClusterStatus", &e, "{}");
	ck_assert_msg(st != NULL, "ClusterStatus: %s: %s", e.exception, e.message);
	char member[32];
	snprintf(member, sizeof(member), "%sTokens", kind);
	double min = 1e300;
	int n = 0;
	size_t i, k;
	json_t *g, *l;
	json_array_foreach(json_object_get(st, "Groups"), i, g)
	{
		json_array_foreach(json_object_get(g, "Load"), k, l)
		{
			const char *t = json_string_value(json_object_get(l, "Table"));
			const char *x = json_string_value(json_object_get(l, "Index"));
			if (t == NULL || strcmp(t, table) != 0 || (x != NULL && x[0] != '\0'))
				continue;
			json_t *v = json_object_get(l, member);
			double d = json_is_number(v) ? json_number_value(v) : 0;
			min = d < min ? d : min;
			n++;
		}
	}
	json_decref(st);
	return n >= 3 ? min : -1e300;
}

/* Waits until every partition of table holds at least `want` tokens of
 * kind: the buckets have refilled after a test drained one. */
static void until_tokens(const char *table, const char *kind, double want)
{
	int64_t deadline = now_ms() + DEADLINE_MS;
	while (min_tokens(table, kind) < want) {
		ck_assert_msg(now_ms() < deadline, "table %s: %s tokens never refilled", table,
		              kind);
		usleep(20000); /* polling interval */
	}
}

/* How many of keys k0..k(n-1) of table a write reaches at once. */
static int writable_now(const char *table, int n)
{
	int got = 0;
	char pk[32], it[256];
	for (int i = 0; i < n; i++) {
		snprintf(pk, sizeof(pk), "k%d", i);
		shoal_error e;
		json_t *j = call("PutItem", &e, "{\"TableName\":\"%s\",\"Item\":%s}", table,
		                 item(it, sizeof(it), pk, "w"));
		if (j != NULL)
			got++;
		json_decref(j);
	}
	return got;
}

START_TEST(test_item_operations)
{
	client_up();
	create("cap_ops", false);
	char body[1024], it[256];
	const char *key = "{\"PK\":{\"S\":\"hot\"},\"SK\":{\"S\":\"w\"}}";

	snprintf(body, sizeof(body), "{\"TableName\":\"cap_ops\",\"Item\":%s}",
	         item(it, sizeof(it), "hot", "w"));
	until_throttled("PutItem", 1, body);
	/* Other partitions are served meanwhile (20 keys over 3 partitions:
	 * some outside the hot one). */
	ck_assert_int_gt(writable_now("cap_ops", 20), 0);

	until_tokens("cap_ops", "Write", 5);
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"cap_ops\",\"Key\":%s,\"UpdateExpression\":\"SET n = :v\","
	         "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"1\"}}}",
	         key);
	until_throttled("UpdateItem", 1, body);

	until_tokens("cap_ops", "Write", 5);
	snprintf(body, sizeof(body), "{\"TableName\":\"cap_ops\",\"Key\":%s}", key);
	until_throttled("DeleteItem", 1, body);

	until_tokens("cap_ops", "Read", 5);
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"cap_ops\",\"Key\":%s,\"ConsistentRead\":true}", key);
	until_throttled("GetItem", 1, body);

	until_tokens("cap_ops", "Read", 5);
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"cap_ops\",\"KeyConditionExpression\":\"PK = :p\","
	         "\"ExpressionAttributeValues\":{\":p\":{\"S\":\"hot\"}}}");
	until_throttled("Query", 1, body);

	until_tokens("cap_ops", "Read", 5);
	until_throttled("Scan", 1, "{\"TableName\":\"cap_ops\"}");
	client_down();
}
END_TEST

/* The items of a batch answer's UnprocessedItems / UnprocessedKeys for
 * table whose PK is pk. */
static int unprocessed_with(json_t *resp, const char *field, const char *table, const char *pk,
                            int *total)
{
	json_t *t = json_object_get(json_object_get(resp, field), table);
	json_t *list = strcmp(field, "UnprocessedKeys") == 0 ? json_object_get(t, "Keys") : t;
	int n = 0;
	*total = (int)json_array_size(list);
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
	{
		json_t *m = strcmp(field, "UnprocessedKeys") == 0
		                ? e
		                : json_object_get(json_object_get(e, "PutRequest"), "Item");
		const char *v = json_string_value(json_object_get(json_object_get(m, "PK"), "S"));
		if (v != NULL && strcmp(v, pk) == 0)
			n++;
	}
	return n;
}

START_TEST(test_batches)
{
	client_up();
	create("cap_batch", false);
	/* The hot partition is throttled with an item so large (one write
	 * costs ~390 WCU, one consistent read ~98 RCU, more than a second of
	 * the rate) that its bucket stays in debt for a while after: the
	 * batch that follows finds it empty even when this machine is slow to
	 * send it.  (With small items the bucket was back above zero 1/80 s
	 * later, and a batch admitted then took every hot key.) */
	char *big = malloc(HOT_PAD + 200);
	ck_assert_ptr_nonnull(big);
	int at = snprintf(big, 200,
	                  "{\"TableName\":\"cap_batch\",\"Item\":{\"PK\":{\"S\":\"hot\"},"
	                  "\"SK\":{\"S\":\"w\"},\"pad\":{\"S\":\"");
	memset(big + at, 'x', HOT_PAD);
	snprintf(big + at + HOT_PAD, 200, "\"}}}");
	until_throttled("PutItem", 1, big);
	free(big);

	char body[16384], it[256];

	/* 10 items of the throttled partition (PK hot) and 10 of keys spread
	 * over the partitions: the hot ones all come back unprocessed, some
	 * others are written. */
	size_t o = (size_t)snprintf(body, sizeof(body), "{\"RequestItems\":{\"cap_batch\":[");
	for (int i = 0; i < 20; i++) {
		char pk[16], sk[16];
		snprintf(pk, sizeof(pk), i < 10 ? "hot" : "k%d", i);
		snprintf(sk, sizeof(sk), "b%d", i);
		o +=
		    (size_t)snprintf(body + o, sizeof(body) - o, "%s{\"PutRequest\":{\"Item\":%s}}",
		                     i > 0 ? "," : "", item(it, sizeof(it), pk, sk));
	}
	snprintf(body + o, sizeof(body) - o, "]}}");
	shoal_error e;
	json_t *r = call("BatchWriteItem", &e, "%s", body);
	ck_assert_msg(r != NULL, "BatchWriteItem: %s: %s", e.exception, e.message);
	int total;
	ck_assert_int_eq(unprocessed_with(r, "UnprocessedItems", "cap_batch", "hot", &total), 10);
	ck_assert_int_lt(total, 20);
	json_decref(r);

	/* Reads: the hot partition's read bucket drained, BatchGetItem returns
	 * its keys unprocessed. */
	until_tokens("cap_batch", "Read", 5);
	until_throttled("GetItem", 1,
	                "{\"TableName\":\"cap_batch\",\"Key\":{\"PK\":{\"S\":\"hot\"},"
	                "\"SK\":{\"S\":\"w\"}},\"ConsistentRead\":true}");
	o = (size_t)snprintf(body, sizeof(body), "{\"RequestItems\":{\"cap_batch\":{\"Keys\":[");
	for (int i = 0; i < 20; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), i < 10 ? "hot" : "k%d", i);
		o += (size_t)snprintf(body + o, sizeof(body) - o,
		                      "%s{\"PK\":{\"S\":\"%s\"},\"SK\":{\"S\":\"b%d\"}}",
		                      i > 0 ? "," : "", pk, i);
	}
	snprintf(body + o, sizeof(body) - o, "],\"ConsistentRead\":true}}}");
	r = call("BatchGetItem", &e, "%s", body);
	ck_assert_msg(r != NULL, "BatchGetItem: %s: %s", e.exception, e.message);
	ck_assert_int_eq(unprocessed_with(r, "UnprocessedKeys", "cap_batch", "hot", &total), 10);
	ck_assert_int_lt(total, 20);
	json_decref(r);
	client_down();
}
END_TEST

START_TEST(test_transactions)
{
	client_up();
	create("cap_txn", false);
	char it[256], it2[256];
	/* Cost: three one-item transactions of small items consume 2 units
	 * each, reported and charged. */
	msum before = metric("shoal_partition_consumed_units_total", "cap_txn", "write");
	for (int i = 0; i < 3; i++) {
		char sk[16];
		snprintf(sk, sizeof(sk), "t%d", i);
		shoal_error e;
		json_t *r =
		    call("TransactWriteItems", &e,
		         "{\"TransactItems\":[{\"Put\":{\"TableName\":\"cap_txn\",\"Item\":%s}}],"
		         "\"ReturnConsumedCapacity\":\"TOTAL\"}",
		         item(it, sizeof(it), "cost", sk));
		ck_assert_msg(r != NULL, "TransactWriteItems: %s: %s", e.exception, e.message);
		json_t *cc = json_array_get(json_object_get(r, "ConsumedCapacity"), 0);
		ck_assert_double_eq(json_number_value(json_object_get(cc, "CapacityUnits")), 2.0);
		json_decref(r);
	}
	msum after = metric("shoal_partition_consumed_units_total", "cap_txn", "write");
	ck_assert_double_eq_tol(after.sum - before.sum, 6.0, 1e-9);

	/* A throttled partition cancels the transaction with its reason. */
	char body[1024];
	snprintf(body, sizeof(body), "{\"TableName\":\"cap_txn\",\"Item\":%s}",
	         item(it, sizeof(it), "hot", "w"));
	/* The bucket refills between the drain and the transaction: on a slow
	 * machine the transaction may find room, so drain and try again (a few
	 * times, then fail).  A transaction that found room was admitted on a
	 * bucket holding a few tokens and took its 2 units, so it may have left
	 * the bucket empty: the next drain may be refused at once. */
	shoal_error e;
	json_t *r = NULL;
	for (int tries = 0; tries < 5; tries++) {
		until_throttled("PutItem", tries == 0 ? 1 : 0, body);
		r = call("TransactWriteItems", &e,
		         "{\"TransactItems\":[{\"Put\":{\"TableName\":\"cap_txn\",\"Item\":%s}},"
		         "{\"Put\":{\"TableName\":\"cap_txn\",\"Item\":%s}}]}",
		         item(it, sizeof(it), "hot", "t"), item(it2, sizeof(it2), "cost", "t9"));
		if (r == NULL)
			break;
		json_decref(r);
		printf("it_capacity: the transaction found room after the drain; again\n");
		fflush(stdout);
	}
	ck_assert_ptr_null(r);
	ck_assert_msg(strcmp(e.exception, "TransactionCanceledException") == 0, "%s: %s",
	              e.exception, e.message);
	ck_assert_msg(strstr(e.message, "ProvisionedThroughputExceeded") != NULL, "%s", e.message);
	client_down();
}
END_TEST

START_TEST(test_gsi_throttles_base)
{
	client_up();
	create("cap_gsi", true);
	create("cap_other", false);
	/* Every item has g = STUDENT: one index partition takes every index
	 * write (the base table's three partitions together may write three
	 * times its limit). */
	int64_t deadline = now_ms() + DEADLINE_MS;
	shoal_error e;
	char it[300];
	int n = 0;
	for (;; n++) {
		snprintf(it, sizeof(it),
		         "{\"PK\":{\"S\":\"s%d\"},\"SK\":{\"S\":\"x\"},\"g\":{\"S\":\"STUDENT\"}}",
		         n);
		json_t *r = call("PutItem", &e, "{\"TableName\":\"cap_gsi\",\"Item\":%s}", it);
		if (r == NULL && strstr(e.message, "global secondary indexes") != NULL)
			break;
		json_decref(r);
		ck_assert_msg(r != NULL || e.code == SHOAL_E_THROUGHPUT, "%s: %s", e.exception,
		              e.message);
		ck_assert_msg(now_ms() < deadline, "no GSI throttling after %d writes", n);
	}
	ck_assert_str_eq(e.exception, "ProvisionedThroughputExceededException");
	/* That table only: another table's writes in the same groups go on. */
	ck_assert_int_gt(writable_now("cap_other", 6), 0);
	/* The index partition shows its consumption. */
	msum m = metric("shoal_partition_consumed_units_total", "cap_gsi", "write");
	ck_assert_double_gt(m.sum, PART_WCU);
	client_down();
}
END_TEST

/* Polls until every partition of table exports write limit `want`. */
static void until_write_limit(const char *table, double want)
{
	int64_t deadline = now_ms() + DEADLINE_MS;
	for (;;) {
		msum m = metric("shoal_partition_limit_units", table, "write");
		if (m.n == 3 && fabs(m.sum - 3 * want) < 1e-6)
			return;
		ck_assert_msg(now_ms() < deadline,
		              "table %s: write limits sum %.1f over %d, want 3 x %.1f", table,
		              m.sum, m.n, want);
		usleep(20000); /* polling interval */
	}
}

START_TEST(test_provisioned_update)
{
	/* A PROVISIONED table's partitions follow its throughput: created at 6
	 * WCU, each idle partition may use all of it (adaptive, the others
	 * idle); UpdateTable to 30 reaches every leader's buckets. */
	client_up();
	ok("CreateTable",
	   "{\"TableName\":\"cap_prov\",\"BillingMode\":\"PROVISIONED\","
	   "\"ProvisionedThroughput\":{\"ReadCapacityUnits\":6,\"WriteCapacityUnits\":6},"
	   "\"AttributeDefinitions\":[{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"}],"
	   "\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"}]}");
	until_write_limit("cap_prov", 6);
	ok("UpdateTable", "{\"TableName\":\"cap_prov\",\"ProvisionedThroughput\":"
	                  "{\"ReadCapacityUnits\":6,\"WriteCapacityUnits\":30}}");
	until_write_limit("cap_prov", 30);
	client_down();
}
END_TEST

static Suite *capacity_suite(void)
{
	Suite *s = suite_create("capacity");
	TCase *tc = tcase_create("cluster");
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_item_operations);
	tcase_add_test(tc, test_batches);
	tcase_add_test(tc, test_transactions);
	tcase_add_test(tc, test_gsi_throttles_base);
	tcase_add_test(tc, test_provisioned_update);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(capacity_suite)
