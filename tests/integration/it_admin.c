/*
 * it_admin -- the elastic cluster's operator side (issue 14) on a real
 * 3-node cluster, through the real `shoal` CLI and libshoal:
 *  - `shoal status --output json` shows the cluster map: its epoch, every
 *    node active, every group's replicas as voters (and the Groups rows
 *    still name each replica's Node);
 *  - `shoal admin add-node` registers a node: the map's epoch rises, status
 *    lists it (active; not reachable, since nothing runs there), the router
 *    dialled it; the same registration again is OK; the same id with other
 *    addresses is a ValidationException; libshoal's shoal_admin_add_node
 *    does the same;
 *  - `shoal admin remove-node --no-wait` of an unknown node is a
 *    ResourceNotFoundException naming it; of the registered node it is
 *    accepted (the node is then draining, or already gone when group 0's
 *    executor removed it: it holds no replica);
 *  - an unsigned request, and a key with grants (even the admin grant,
 *    which reads the status) cannot call Admin;
 *  - `shoal admin split-partition` / `move-partition` change the map
 *    (status lists the table's partitions, the move pending or done), a
 *    retry is OK, a bad target or table is refused, the table answers.
 *
 * The cluster runs with a credentials file of two keys: ADMIN (no grants:
 * everything) and READER (read:* admin).
 *
 * And end to end: `deploy/cluster.sh add-node` starts node 4, it
 * serves and appears in status, replicas move to it, and `shoal admin
 * remove-node --node-id 4` waits until it holds none and has left the map,
 * while items written before stay readable.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define CREDS                                                                                      \
	"ADMIN admin/secret\n"                                                                     \
	"READER reader/secret read:* admin\n"

/* A node that is registered but never runs: nothing listens there. */
#define FAKE_ID   9
#define FAKE_RAFT "127.0.0.1:1"
#define FAKE_RPC  "tcp://127.0.0.1:2"

static tl_cluster C;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void as_admin(void)
{
	setenv("AWS_ACCESS_KEY_ID", "ADMIN", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "admin/secret", 1);
}

static void cluster_up(void)
{
	char dir[1024], creds[1100];
	snprintf(dir, sizeof(dir), "%s", tl_tmpdir("admin"));
	snprintf(creds, sizeof(creds), "%s/creds", dir);
	FILE *f = fopen(creds, "w");
	ck_assert_ptr_nonnull(f);
	fputs(CREDS, f);
	fclose(f);
	chmod(creds, 0600);
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	as_admin();
	char opts[1200];
	snprintf(opts, sizeof(opts), "--credentials '%s'", creds);
	if (!tl_cluster_up_opts(&C, 3, 1, 4, opts)) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
}

static void cluster_down(void)
{
	tl_cluster_down(&C);
}

/* Runs the CLI; returns its exit code, stdout as JSON in *out (NULL when
 * empty or not wanted) and stderr in *err (caller frees; may be NULL). */
static int run(json_t **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int run(json_t **out, char **err, const char *fmt, ...)
{
	char args[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(&C, &o, &e, "%s", args);
	if (out != NULL) {
		*out = NULL;
		if (o != NULL && o[strspn(o, " \n")] != '\0') {
			json_error_t je;
			*out = json_loads(o, 0, &je);
			ck_assert_msg(*out != NULL, "shoal %s: stdout is not JSON (%s): %s", args,
			              je.text, o);
		}
	}
	if (err != NULL)
		*err = e;
	else
		free(e);
	free(o);
	return rc;
}

static json_t *status(void)
{
	json_t *st;
	char *err;
	int rc = run(&st, &err, "status --output json");
	ck_assert_msg(rc == 0 && st != NULL, "status: exit %d: %s", rc, err);
	free(err);
	return st;
}

static long long jint(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* Nodes[] entry of node id, or NULL. */
static json_t *node_of(json_t *st, long long id)
{
	size_t i;
	json_t *n;
	json_array_foreach(json_object_get(st, "Nodes"), i, n) if (jint(n, "Id") == id) return n;
	return NULL;
}

static void expect_fail(int want_rc, const char *want, const char *args)
{
	char *err;
	int rc = run(NULL, &err, "%s", args);
	ck_assert_msg(rc == want_rc, "shoal %s: exit %d, want %d: %s", args, rc, want_rc, err);
	ck_assert_msg(err != NULL && strstr(err, want) != NULL, "shoal %s: stderr %s\nwant %s",
	              args, err, want);
	free(err);
}

START_TEST(test_map_in_status)
{
	json_t *st = status();
	ck_assert_int_ge(jint(st, "MapEpoch"), 1);
	ck_assert_uint_eq(json_array_size(json_object_get(st, "Nodes")), 3);
	for (long long id = 1; id <= 3; id++) {
		json_t *n = node_of(st, id);
		ck_assert_ptr_nonnull(n);
		ck_assert_str_eq(json_string_value(json_object_get(n, "State")), "active");
		ck_assert(json_is_true(json_object_get(n, "Reachable")));
	}
	json_t *mg = json_object_get(st, "MapGroups");
	ck_assert_uint_eq(json_array_size(mg), 4);
	size_t i, k;
	json_t *g, *r;
	json_array_foreach(mg, i, g)
	{
		ck_assert_int_eq(jint(g, "Group"), (long long)i);
		ck_assert_uint_eq(json_array_size(json_object_get(g, "Replicas")), 3);
		json_array_foreach(json_object_get(g, "Replicas"), k, r)
		{
			ck_assert(json_is_true(json_object_get(r, "Voter")));
			ck_assert_int_ge(jint(r, "Node"), 1);
		}
	}
	/* The Groups rows: one per (group, replica), naming the Node. */
	ck_assert_uint_eq(json_array_size(json_object_get(st, "Groups")), 12);
	json_array_foreach(json_object_get(st, "Groups"), i, g)
	    ck_assert_int_ge(jint(g, "Node"), 1);
	json_decref(st);

	/* The text form says the same. */
	char *text = NULL;
	ck_assert_int_eq(tl_shoal(&C, &text, NULL, "status"), 0);
	ck_assert_msg(strstr(text, "cluster map epoch ") != NULL, "%s", text);
	ck_assert_msg(strstr(text, " voter ") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "active\n") != NULL, "%s", text);
	free(text);
}
END_TEST

START_TEST(test_add_node)
{
	json_t *st = status();
	long long e0 = jint(st, "MapEpoch");
	json_decref(st);

	json_t *out;
	char *err;
	int rc = run(&out, &err, "admin add-node --node-id %d --raft %s --rpc %s", FAKE_ID,
	             FAKE_RAFT, FAKE_RPC);
	ck_assert_msg(rc == 0, "add-node: exit %d: %s", rc, err);
	free(err);
	long long e1 = jint(out, "MapEpoch");
	ck_assert_msg(e1 > e0, "epoch %lld after add-node, %lld before", e1, e0);
	json_decref(out);

	/* The answering router has the new map at once. */
	st = status();
	ck_assert_int_ge(jint(st, "MapEpoch"), e1);
	json_t *n = node_of(st, FAKE_ID);
	ck_assert_msg(n != NULL, "status does not list node %d", FAKE_ID);
	ck_assert_str_eq(json_string_value(json_object_get(n, "State")), "active");
	ck_assert_str_eq(json_string_value(json_object_get(n, "Rpc")), FAKE_RPC);
	ck_assert_str_eq(json_string_value(json_object_get(n, "Raft")), FAKE_RAFT);
	ck_assert(!json_is_true(json_object_get(n, "Reachable")));
	json_decref(st);

	/* The same registration again: done already. */
	rc = run(&out, &err, "admin add-node --node-id %d --raft %s --rpc %s", FAKE_ID, FAKE_RAFT,
	         FAKE_RPC);
	ck_assert_msg(rc == 0, "add-node again: exit %d: %s", rc, err);
	free(err);
	ck_assert_int_ge(jint(out, "MapEpoch"), e1);
	json_decref(out);

	/* The id with other addresses: refused, nothing changed. */
	expect_fail(254, "An error occurred (ValidationException) when calling the Admin operation",
	            "admin add-node --node-id 9 --raft 127.0.0.1:3 --rpc tcp://127.0.0.1:4");
	expect_fail(254, "already in the cluster",
	            "admin add-node --node-id 2 --raft 127.0.0.1:3 --rpc tcp://127.0.0.1:4");
	st = status();
	ck_assert_str_eq(json_string_value(json_object_get(node_of(st, FAKE_ID), "Rpc")), FAKE_RPC);
	json_decref(st);

	/* The router's own checks. */
	expect_fail(254, "Raft must be",
	            "admin add-node --node-id 11 --raft nowhere --rpc tcp://h:1");
	expect_fail(252, "the following arguments are required: --rpc",
	            "admin add-node --node-id 11 --raft h:1");

	/* libshoal: the same call. */
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &c, msg) == SHOAL_OK, "%s", msg);
	uint64_t epoch = 0;
	shoal_error e;
	rc = shoal_admin_add_node(c, FAKE_ID, FAKE_RAFT, FAKE_RPC, &epoch, &e);
	ck_assert_msg(rc == SHOAL_OK, "shoal_admin_add_node: %s", e.message);
	ck_assert_uint_ge(epoch, (uint64_t)e1);
	rc = shoal_admin_add_node(c, FAKE_ID, "127.0.0.1:5", FAKE_RPC, &epoch, &e);
	ck_assert_int_eq(rc, SHOAL_E_VALIDATION);
	ck_assert_str_eq(e.exception, "ValidationException");
	rc = shoal_admin_drain_node(c, 4242, &epoch, &e);
	ck_assert_int_eq(rc, SHOAL_E_NOT_FOUND);
	shoal_client_free(c);

	/* Decommission: unknown node, then the registered one. */
	expect_fail(254, "node 4242 is not in the cluster map",
	            "admin remove-node --node-id 4242 --no-wait");
	expect_fail(254, "(ResourceNotFoundException) when calling the Admin operation",
	            "admin remove-node --node-id 4242 --no-wait");
	rc = run(&out, &err, "admin remove-node --node-id %d --no-wait", FAKE_ID);
	ck_assert_msg(rc == 0, "remove-node: exit %d: %s", rc, err);
	free(err);
	long long e2 = jint(out, "MapEpoch");
	ck_assert_int_gt(e2, e1);
	json_decref(out);
	st = status();
	n = node_of(st, FAKE_ID);
	ck_assert_msg(n == NULL ||
	                  strcmp(json_string_value(json_object_get(n, "State")), "draining") == 0,
	              "node %d after remove-node: %s", FAKE_ID,
	              n != NULL ? json_string_value(json_object_get(n, "State")) : "");
	json_decref(st);
}
END_TEST

START_TEST(test_admin_authorization)
{
	/* Unsigned. */
	expect_fail(254, "(MissingAuthenticationTokenException)",
	            "--no-sign-request admin add-node --node-id 12 --raft 127.0.0.1:1 --rpc "
	            "tcp://127.0.0.1:2");
	/* A key with grants -- the admin grant reads the status, no more. */
	setenv("AWS_ACCESS_KEY_ID", "READER", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "reader/secret", 1);
	json_t *st = status();
	json_decref(st);
	expect_fail(254,
	            "An error occurred (AccessDeniedException) when calling the Admin operation: "
	            "User: arn:aws:iam::000000000000:user/READER is not authorized to perform: "
	            "shoal:Admin",
	            "admin remove-node --node-id 1 --no-wait");
	expect_fail(254, "(AccessDeniedException)",
	            "admin add-node --node-id 12 --raft 127.0.0.1:1 --rpc tcp://127.0.0.1:2");
	as_admin();
	/* Nothing of it reached the map. */
	st = status();
	ck_assert_ptr_null(node_of(st, 12));
	ck_assert_str_eq(json_string_value(json_object_get(node_of(st, 1), "State")), "active");
	json_decref(st);
}
END_TEST

/* deploy/cluster.sh add-node, replicas moving to the node (group 0's
 * executor), remove-node waiting for it to be emptied and removed. */
/* MapPartitions row of table `name` starting at lo, or NULL. */
static json_t *part_row(json_t *st, const char *name, const char *lo)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(st, "MapPartitions"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "TableName")), name) == 0 &&
		    strcmp(json_string_value(json_object_get(p, "Lo")), lo) == 0)
			return p;
	}
	return NULL;
}

/* split-partition and move-partition through the CLI: group 0 records them
 * in the map (the data moves in the background: only what the map says is
 * checked, a pending move or a finished one), status lists the partitions,
 * and the table keeps answering. */
START_TEST(test_partition_changes)
{
	char *err = NULL;
	int rc = run(NULL, &err,
	             "create-table --table-name pmv --attribute-definitions "
	             "AttributeName=pk,AttributeType=S --key-schema AttributeName=pk,KeyType=HASH "
	             "--billing-mode PAY_PER_REQUEST");
	ck_assert_msg(rc == 0, "create-table: %s", err);
	free(err);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(run(NULL, NULL,
		                     "put-item --table-name pmv --item '{\"pk\":{\"S\":\"k%d\"}}'",
		                     i),
		                 0);
	json_t *st = status();
	long long e0 = jint(st, "MapEpoch");
	ck_assert_ptr_null(part_row(st, "pmv", "0x0000000000000000")); /* placed statically */
	json_decref(st);

	/* 3 data groups: [0x5555555555555556, 0xaaaaaaaaaaaaaaaa] is group 2's. */
	json_t *out;
	rc = run(&out, &err,
	         "admin split-partition --table-name pmv --at 0x8000000000000000 --no-wait");
	ck_assert_msg(rc == 0, "split-partition: %s", err);
	free(err);
	ck_assert_int_gt(jint(out, "MapEpoch"), e0);
	json_decref(out);
	st = status();
	ck_assert_uint_eq(json_array_size(json_object_get(st, "MapPartitions")), 4);
	json_t *p = part_row(st, "pmv", "0x8000000000000000");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(json_string_value(json_object_get(p, "Hi")), "0xaaaaaaaaaaaaaaaa");
	ck_assert_int_eq(jint(p, "Group"), 2);
	ck_assert_int_eq(jint(p, "MovingTo"), 0);
	json_decref(st);

	rc = run(NULL, &err,
	         "admin move-partition --table-name pmv --hash 0x9000000000000000 --to-group 3 "
	         "--no-wait");
	ck_assert_msg(rc == 0, "move-partition: %s", err);
	free(err);
	st = status();
	p = part_row(st, "pmv", "0x8000000000000000");
	ck_assert_ptr_nonnull(p);
	ck_assert_msg((jint(p, "Group") == 2 && jint(p, "MovingTo") == 3) ||
	                  (jint(p, "Group") == 3 && jint(p, "MovingTo") == 0),
	              "group %lld, moving to %lld", jint(p, "Group"), jint(p, "MovingTo"));
	json_decref(st);
	/* The same move again (a retry) is OK. */
	ck_assert_int_eq(run(NULL, NULL,
	                     "admin move-partition --table-name pmv --hash 0x8000000000000000 "
	                     "--to-group 3 --no-wait"),
	                 0);
	char *text = NULL;
	ck_assert_int_eq(tl_shoal(&C, &text, NULL, "status"), 0);
	ck_assert_msg(strstr(text, "Partitions (cluster map)") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "0x8000000000000000 0xaaaaaaaaaaaaaaaa") != NULL, "%s", text);
	free(text);

	expect_fail(254, "ValidationException",
	            "admin move-partition --table-name pmv --hash 1 --to-group 0 --no-wait");
	expect_fail(254, "ToGroup 7 is not a data group",
	            "admin move-partition --table-name pmv --hash 1 --to-group 7 --no-wait");
	expect_fail(254, "Requested resource not found: Table: nope not found",
	            "admin split-partition --table-name nope --at 5 --no-wait");
	expect_fail(252, "a hash is a decimal or 0x hexadecimal number",
	            "admin split-partition --table-name pmv --at 0x1ffffffffffffffff");

	/* The table still answers, every key. */
	for (int i = 0; i < 20; i++) {
		json_t *got;
		rc = run(
		    &got, NULL,
		    "get-item --table-name pmv --key '{\"pk\":{\"S\":\"k%d\"}}' --consistent-read",
		    i);
		ck_assert_int_eq(rc, 0);
		ck_assert_ptr_nonnull(json_object_get(got, "Item"));
		json_decref(got);
	}
}
END_TEST

START_TEST(test_join_and_remove)
{
	char *err = NULL;
	int rc = run(NULL, &err,
	             "create-table --table-name joined --attribute-definitions "
	             "AttributeName=pk,AttributeType=S --key-schema AttributeName=pk,KeyType=HASH "
	             "--billing-mode PAY_PER_REQUEST");
	ck_assert_msg(rc == 0, "create-table: %s", err);
	free(err);
	for (int i = 0; i < 50; i++) {
		rc = run(NULL, NULL,
		         "put-item --table-name joined --item '{\"pk\":{\"S\":\"k%d\"}}'", i);
		ck_assert_int_eq(rc, 0);
	}
	char *text = tl_cluster_add_node(&C);
	ck_assert_msg(strstr(text, "node 4 added") != NULL, "%s", text);
	free(text);
	json_t *st = status();
	json_t *n = node_of(st, 4);
	ck_assert_ptr_nonnull(n);
	ck_assert(json_is_true(json_object_get(n, "Reachable")));
	json_decref(st);

	/* The rebalancer moves replicas to it. */
	int64_t until = now_ms() + 120000;
	for (;;) {
		st = status();
		size_t i, k;
		json_t *g, *r;
		int held = 0;
		json_array_foreach(json_object_get(st, "MapGroups"), i, g)
		    json_array_foreach(json_object_get(g, "Replicas"), k, r) held +=
		    jint(r, "Node") == 4 && json_is_true(json_object_get(r, "Voter"));
		json_decref(st);
		if (held > 0)
			break;
		ck_assert_msg(now_ms() < until, "no replica moved to node 4 within 120 s");
		usleep(200000);
	}

	/* Decommission: returns once it holds none and left the map. */
	rc = run(NULL, &err, "admin remove-node --node-id 4 --timeout-secs 180");
	ck_assert_msg(rc == 0, "remove-node: %s", err);
	ck_assert_msg(strstr(err, "removed from the cluster map") != NULL, "%s", err);
	free(err);
	st = status();
	ck_assert_ptr_null(node_of(st, 4));
	json_decref(st);
	for (int i = 0; i < 50; i++) {
		json_t *got;
		rc = run(&got, NULL,
		         "get-item --table-name joined --key '{\"pk\":{\"S\":\"k%d\"}}' "
		         "--consistent-read",
		         i);
		ck_assert_int_eq(rc, 0);
		ck_assert_ptr_nonnull(json_object_get(got, "Item"));
		json_decref(got);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_add_test(tc, test_map_in_status);
	tcase_add_test(tc, test_add_node);
	tcase_add_test(tc, test_admin_authorization);
	tcase_add_test(tc, test_join_and_remove);
	/* Last: a pending partition move counts against the executor's one
	 * move in flight, so replica moves wait until it is done. */
	tcase_add_test(tc, test_partition_changes);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(suite)
