/*
 * it_scrub -- the replica scrub (node/scrub.c) on a real local cluster:
 *  - healthy: over several full passes of every group the replicas'
 *    checksums agree (no mismatch is counted, none is logged) -- which
 *    also checks that applying the log is deterministic;
 *  - a corrupted replica: one node is stopped gracefully (its environments
 *    are then marked clean, so they are trusted at the next start), one
 *    item's value in one group's LMDB is changed behind Raft's back with
 *    LMDB directly, and the node is started again.  The scrub finds the
 *    mismatch (the leader logs the divergent replica and counts it), the
 *    divergent node marks its storage for rebuild and restarts in place
 *    (same pid), empties the environment and rebuilds it from Raft, and
 *    later passes compare equal.
 * Everything is waited for by polling with deadlines; nothing is timed.
 *
 * Snapshots: the corrupted cluster takes none during the test (default
 * snapshot spacing, small entries).  A snapshot taken by the corrupted
 * replica after the damage and before the scrub's verdict would carry the
 * damage, and a rebuild from it would not repair it (scrub.c: the replica
 * would be failed instead); with no snapshot the rebuild replays the whole
 * log.
 */
#include <check.h>
#include <jansson.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define GROUPS 4

static tl_cluster C;
static shoal_client *client;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void)
{
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL); /* between polls of a condition with a deadline */
}

static void start(const char *opts, int items)
{
	ck_assert_msg(tl_cluster_up_opts(&C, 3, 1, GROUPS, opts), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	char *out = NULL;
	shoal_error err;
	int rc =
	    shoal_call_json(client, "CreateTable",
	                    "{\"TableName\":\"scrub\",\"AttributeDefinitions\":[{\"AttributeName\":"
	                    "\"id\",\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":"
	                    "\"id\",\"KeyType\":\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}",
	                    &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "CreateTable: %s: %s", err.exception, err.message);
	shoal_free(out);
	for (int i = 0; i < items; i++) {
		char body[256];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"scrub\",\"Item\":{\"id\":{\"S\":\"k%d\"},\"v\":{\"S\":"
		         "\"value-%d\"}}}",
		         i, i);
		out = NULL;
		rc = shoal_call_json(client, "PutItem", body, &out, &err);
		ck_assert_msg(rc == SHOAL_OK, "PutItem k%d: %s: %s", i, err.exception, err.message);
		shoal_free(out);
	}
}

static void stop(void)
{
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}

/* ------------------------------------------------------------------------ */
/* Metrics                                                                   */
/* ------------------------------------------------------------------------ */

/* Waits until every group has had `passes` more passes than in base[]. */
static void wait_passes(const double *base, double passes, int64_t deadline_ms)
{
	for (int g = 0; g < GROUPS; g++) {
		while (tl_cluster_metric(&C, "shoal_scrub_passes_total", g) < base[g] + passes) {
			ck_assert_msg(now_ms() < deadline_ms,
			              "group %d: scrub passes stuck at %.0f (want %.0f)", g,
			              tl_cluster_metric(&C, "shoal_scrub_passes_total", g),
			              base[g] + passes);
			nap();
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Cluster status                                                            */
/* ------------------------------------------------------------------------ */

/* The leaders of every group (0: none known). */
static void leaders(uint32_t out[GROUPS])
{
	memset(out, 0, sizeof(uint32_t) * GROUPS);
	char *text = NULL;
	shoal_error err;
	int rc = shoal_call_json(client, "ClusterStatus", "{}", &text, &err);
	ck_assert_msg(rc == SHOAL_OK, "ClusterStatus: %s: %s", err.exception, err.message);
	json_t *st = json_loads(text, 0, NULL);
	shoal_free(text);
	ck_assert_ptr_nonnull(st);
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(st, "Groups"), i, g)
	{
		json_int_t gid = json_integer_value(json_object_get(g, "Group"));
		const char *role = json_string_value(json_object_get(g, "Role"));
		if (gid >= 0 && gid < GROUPS && role != NULL && strcmp(role, "leader") == 0)
			out[gid] = (uint32_t)json_integer_value(json_object_get(g, "Node"));
	}
	json_decref(st);
}

static long pid_of(int id)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/node-%d.pid", C.dir, id);
	char *text = tl_read_file(path);
	long pid = text != NULL ? atol(text) : 0;
	free(text);
	return pid;
}

/* ------------------------------------------------------------------------ */
/* Corrupting a replica behind Raft's back                                   */
/* ------------------------------------------------------------------------ */

/* Whether group g's LMDB in node id's directory holds an item; with
 * corrupt, flips one bit of the first item's value (the node is stopped). */
static bool lmdb_item(int id, int g, bool corrupt)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/node-%d/group-%d/lmdb", C.dir, id, g);
	MDB_env *env;
	ck_assert_int_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 8);
	int rc = mdb_env_open(env, path, corrupt ? 0 : MDB_RDONLY, 0600);
	ck_assert_msg(rc == 0, "mdb_env_open(%s): %s", path, mdb_strerror(rc));
	MDB_txn *txn;
	ck_assert_int_eq(mdb_txn_begin(env, NULL, corrupt ? 0 : MDB_RDONLY, &txn), 0);
	MDB_dbi dbi;
	bool found = false;
	if (mdb_dbi_open(txn, "data", 0, &dbi) == 0) {
		MDB_cursor *c;
		ck_assert_int_eq(mdb_cursor_open(txn, dbi, &c), 0);
		MDB_val k, v;
		found = mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0;
		if (found && corrupt) {
			char *copy = malloc(v.mv_size);
			ck_assert_ptr_nonnull(copy);
			memcpy(copy, v.mv_data, v.mv_size);
			copy[v.mv_size - 1] ^= 0x01;
			MDB_val nv = {v.mv_size, copy};
			ck_assert_int_eq(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
			free(copy);
		}
		mdb_cursor_close(c);
	}
	if (corrupt)
		ck_assert_int_eq(mdb_txn_commit(txn), 0);
	else
		mdb_txn_abort(txn);
	mdb_env_close(env);
	return found;
}

/* ------------------------------------------------------------------------ */

START_TEST(test_healthy_cluster_agrees)
{
	start("--scrub-ms 100", 60);
	double base[GROUPS];
	for (int g = 0; g < GROUPS; g++)
		base[g] = tl_cluster_metric(&C, "shoal_scrub_passes_total", g);
	wait_passes(base, 4, now_ms() + 40000);
	double ranges = tl_cluster_metric(&C, "shoal_scrub_ranges_total", -1);
	double keys = tl_cluster_metric(&C, "shoal_scrub_keys_total", -1);
	double mismatches = tl_cluster_metric(&C, "shoal_scrub_mismatches_total", -1);
	printf("healthy: %.0f ranges, %.0f pairs compared, %.0f mismatches\n", ranges, keys,
	       mismatches);
	ck_assert_msg(ranges >= 4 * GROUPS, "only %.0f ranges compared", ranges);
	ck_assert_msg(keys >= 60, "only %.0f pairs compared", keys);
	ck_assert_msg(mismatches == 0, "%.0f scrub mismatches on a healthy cluster", mismatches);
	for (int id = 1; id <= 3; id++)
		ck_assert_int_eq(tl_cluster_log_count(&C, id, "diverged"), 0);
	stop();
}
END_TEST

START_TEST(test_corrupted_replica_is_rebuilt)
{
	start("--scrub-ms 200", 60);
	/* A clean pass everywhere first. */
	double base[GROUPS] = {0};
	wait_passes(base, 1, now_ms() + 30000);
	ck_assert(tl_cluster_metric(&C, "shoal_scrub_mismatches_total", -1) == 0);

	/* The victim: node 3, in a data group it holds items of and does not
	 * lead (so that after its restart the mismatch is counted by a leader
	 * that keeps running). */
	uint32_t lead[GROUPS];
	const int victim = 3;
	/* Every data group led, one of them by another node: a leadership
	 * may be changing hands at any moment (elections, leader balance),
	 * and ClusterStatus then shows the group without a leader. */
	for (int64_t until = now_ms() + 30000;; usleep(100000)) {
		leaders(lead);
		bool all = true, other = false;
		for (int g = 1; g < GROUPS; g++)
			all = all && lead[g] != 0, other = other || lead[g] != (uint32_t)victim;
		if (all && other)
			break;
		ck_assert_msg(now_ms() < until, "the data groups' leaders not all known in 30 s");
	}
	ck_assert(tl_cluster_stop_node(&C, victim, false));
	int group = -1;
	for (int g = 1; g < GROUPS && group < 0; g++)
		if (lead[g] != 0 && lead[g] != (uint32_t)victim && lmdb_item(victim, g, false))
			group = g;
	ck_assert_msg(group > 0, "no data group with items that node %d does not lead", victim);
	ck_assert(lmdb_item(victim, group, true));
	printf("corrupted: one item of group %d on node %d (leader node %u)\n", group, victim,
	       lead[group]);
	ck_assert(tl_cluster_start_node(&C, victim));
	long pid = pid_of(victim);

	/* The scrub finds it and the victim rebuilds, in place. */
	int64_t deadline = now_ms() + 30000;
	char needle[128];
	snprintf(needle, sizeof(needle), "replica on node %d diverged", victim);
	int told = 0;
	while ((told = tl_cluster_log_count(&C, 1, needle) + tl_cluster_log_count(&C, 2, needle)) ==
	       0) {
		ck_assert_msg(now_ms() < deadline, "no leader logged '%s'", needle);
		nap();
	}
	while (tl_cluster_metric(&C, "shoal_scrub_mismatches_total", group) < 1) {
		ck_assert_msg(now_ms() < deadline, "no scrub mismatch counted in group %d", group);
		nap();
	}
	snprintf(needle, sizeof(needle), "scrub: group %d: this replica diverged", group);
	while (tl_cluster_log_count(&C, victim, needle) == 0) {
		ck_assert_msg(now_ms() < deadline, "node %d did not log '%s'", victim, needle);
		nap();
	}
	snprintf(needle, sizeof(needle), "group %d: storage rebuilt from Raft", group);
	while (tl_cluster_log_count(&C, victim, needle) == 0) {
		ck_assert_msg(now_ms() < deadline, "node %d did not log '%s'", victim, needle);
		nap();
	}
	ck_assert_int_eq(tl_cluster_log_count(&C, victim, "restarting in place"), 1);
	ck_assert_int_eq(tl_cluster_log_count(&C, victim, "not trusted and emptied"), 1);
	ck_assert_int_eq(tl_cluster_log_count(&C, victim, "needs replacing"), 0);
	ck_assert_int_eq(pid_of(victim), pid);
	const char *what;
	int id;
	ck_assert_msg(tl_cluster_alive(&C, &what, &id), "%s %d is gone", what, id);

	/* Afterwards full passes compare equal. */
	double after = tl_cluster_metric(&C, "shoal_scrub_mismatches_total", -1);
	for (int g = 0; g < GROUPS; g++)
		base[g] = tl_cluster_metric(&C, "shoal_scrub_passes_total", g);
	wait_passes(base, 3, now_ms() + 40000);
	double now_mm = tl_cluster_metric(&C, "shoal_scrub_mismatches_total", -1);
	printf("after the rebuild: mismatches %.0f then %.0f over 3 more passes\n", after, now_mm);
	ck_assert_msg(now_mm == after, "%.0f more mismatches after the rebuild", now_mm - after);
	ck_assert_int_eq(tl_cluster_log_count(&C, victim, "needs replacing"), 0);
	stop();
}
END_TEST

static Suite *scrub_suite(void)
{
	Suite *s = suite_create("scrub");
	TCase *tc = tcase_create("processes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_healthy_cluster_agrees);
	tcase_add_test(tc, test_corrupted_replica_is_rebuilt);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(scrub_suite)
