/*
 * it_stale -- a router whose catalog cache is stale never misplaces items.
 *
 * Router 1 caches table "stale"; through router 2 the table is deleted and
 * created again (a new table id, so every key hashes elsewhere).  Writes
 * through router 1 must land where router 2 (and every later reader) looks:
 * the node refuses a request routed with the old id (NodeRequest.table_id),
 * router 1 refreshes its catalog and routes again.  Without that check about
 * two thirds of the keys would be written to groups that do not own them
 * under the new id, acknowledged, and never found.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define KEYS 30

static tl_cluster C;

static const char *TABLE = "{\"TableName\":\"stale\",\"AttributeDefinitions\":[{\"AttributeName\":"
                           "\"id\",\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":"
                           "\"id\",\"KeyType\":\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}";

static int call(shoal_client *c, const char *op, const char *body, char **out)
{
	shoal_error err;
	char *resp = NULL;
	int rc = shoal_call_json(c, op, body, &resp, &err);
	if (rc != SHOAL_OK)
		fprintf(stderr, "%s: %s: %s\n", op, err.exception, err.message);
	if (out != NULL)
		*out = resp;
	else
		shoal_free(resp);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(test_recreated_table_through_another_router)
{
	ck_assert_msg(tl_cluster_up(&C, 3, 2, 4), "the cluster did not start");
	/* One client per router: C.endpoint lists both. */
	char one[512], two[512];
	snprintf(one, sizeof(one), "%s", C.endpoint);
	char *comma = strchr(one, ',');
	ck_assert_ptr_nonnull(comma);
	snprintf(two, sizeof(two), "%s", comma + 1);
	*comma = '\0';
	shoal_client *a, *b;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(one, NULL, &a, msg) == SHOAL_OK, "%s", msg);
	ck_assert_msg(shoal_client_new(two, NULL, &b, msg) == SHOAL_OK, "%s", msg);

	ck_assert_int_eq(call(a, "CreateTable", TABLE, NULL), SHOAL_OK);
	/* Router 1 caches the table's first id. */
	ck_assert_int_eq(
	    call(a, "PutItem", "{\"TableName\":\"stale\",\"Item\":{\"id\":{\"S\":\"old\"}}}", NULL),
	    SHOAL_OK);

	/* Router 2 drops it and creates it again. */
	ck_assert_int_eq(call(b, "DeleteTable", "{\"TableName\":\"stale\"}", NULL), SHOAL_OK);
	int64_t deadline = now_ms() + 30000;
	int rc;
	while ((rc = call(b, "CreateTable", TABLE, NULL)) == SHOAL_E_IN_USE &&
	       now_ms() < deadline) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(rc, SHOAL_OK);

	/* Writes through router 1, with its stale cache. */
	char body[256];
	for (int i = 0; i < KEYS; i++) {
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"stale\",\"Item\":{\"id\":{\"S\":\"k%d\"},\"v\":{\"N\":"
		         "\"%d\"}}}",
		         i, i);
		ck_assert_int_eq(call(a, "PutItem", body, NULL), SHOAL_OK);
	}
	/* Every acknowledged write is where router 2 looks for it. */
	for (int i = 0; i < KEYS; i++) {
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"stale\",\"Key\":{\"id\":{\"S\":\"k%d\"}},"
		         "\"ConsistentRead\":true}",
		         i);
		char *out = NULL;
		ck_assert_int_eq(call(b, "GetItem", body, &out), SHOAL_OK);
		ck_assert_msg(out != NULL && strstr(out, "\"Item\"") != NULL,
		              "k%d written through the stale router is missing: %s", i,
		              out != NULL ? out : "");
		shoal_free(out);
	}
	/* The old table's item is gone with it. */
	char *out = NULL;
	ck_assert_int_eq(call(b, "GetItem",
	                      "{\"TableName\":\"stale\",\"Key\":{\"id\":{\"S\":\"old\"}},"
	                      "\"ConsistentRead\":true}",
	                      &out),
	                 SHOAL_OK);
	ck_assert_ptr_null(strstr(out, "\"Item\""));
	shoal_free(out);
	shoal_client_free(a);
	shoal_client_free(b);
	tl_cluster_down(&C);
}
END_TEST

static Suite *stale_suite(void)
{
	Suite *s = suite_create("stale");
	TCase *tc = tcase_create("stale");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_recreated_table_through_another_router);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(stale_suite)
