/*
 * it_groups -- issue 14's new storage groups on a real local cluster (real
 * shoal-node / shoal-router processes, real Raft and LMDB), with a writer
 * running through every step:
 *
 *  - `shoal admin add-group` (no arguments) creates group 4 on the three
 *    nodes: its founders bootstrap it from the cluster map, elect a leader,
 *    and group 0's executor marks it founded (the command waits for that);
 *    asked again with its id it is done already; an id past max_groups and
 *    a group of that id with other nodes are refused with a message; group
 *    5 is made too, and stays empty;
 *  - a split sends the upper half of table `groups`'s first partition to the
 *    new group, which has never seen the table (the move defines it there
 *    from the source's catalog), and a move sends its last partition there;
 *  - every process restarts: the group, the map and every item survive;
 *    then Time to Live deletes an expired item in group 1, which a range
 *    of the table moved out of;
 *  - case founder: a founder dead (SIGKILL) when add-group runs; the others
 *    found the group, and the founder restarted comes back into it;
 *  - case founder_wiped: a founder that comes back from an empty data
 *    directory while its group is still being founded does not bootstrap
 *    it (it may have founded it before losing its data); its replica is
 *    re-created once the others have founded the group;
 *  - case auto: with [cluster] auto_groups, a cluster grown 3 -> 5 nodes
 *    under a writer gets groups 4 and 5 from group 0's executor, each given
 *    a partition of the table.
 *
 * The writer (libshoal, retries on) must see no error; afterwards every
 * partition key's ConsistentRead Query returns exactly the acknowledged
 * items, a Scan counts each once, the LSI and GSI agree, and the stream's
 * chains of images are whole.  Times are printed, never asserted.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_items.h"
#include "tests/lib/tl_parts.h"
#include "storage/storage.h"

#define PKS     40
#define PRE_SKS 20
#define MAX_OPS 60000
#define TABLE   "groups"

static tl_cluster C;
static shoal_client *client;
static tl_items *items;
static tl_parts P;

/* A 3-node cluster of 4 groups (cluster.sh options opts, or none), a
 * client, and table `table` created and preloaded (with a stream). */
static void start(const char *opts, const char *table, const char *name, bool stream)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	ck_assert_msg(tl_cluster_up_opts(&C, 3, 1, 4, opts), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	items = tl_items_new(client, table, PKS, PRE_SKS, MAX_OPS, name);
	ck_assert_ptr_nonnull(items);
	tl_parts_init(&P, &C, table);
	if (stream)
		tl_items_with_stream(items);
	tl_items_create_table(items);
	tl_items_preload(items);
}

/* Time to Live in a group that a range of its table moved out of: group 1
 * still serves [0, below) of TABLE, and keeps the record of the range
 * moved away, which refuses a scan of the whole table for good.  An item
 * expired a minute ago in [0, below) must be deleted there (the test's
 * cluster runs a TTL pass every 200 ms).  After every check of the items
 * and the stream: this item is none of theirs. */
static void ttl_where_a_range_moved_out(uint64_t below)
{
	char *out = NULL;
	shoal_error err;
	ck_assert_msg(shoal_call_json(client, "UpdateTimeToLive",
	                              "{\"TableName\":\"" TABLE "\",\"TimeToLiveSpecification\":"
	                              "{\"Enabled\":true,\"AttributeName\":\"expires\"}}",
	                              &out, &err) == SHOAL_OK,
	              "UpdateTimeToLive: %s: %s", err.exception, err.message);
	shoal_free(out);
	uint32_t t = tl_table_number(client, TABLE);
	ck_assert_uint_ne(t, 0);
	char pk[32];
	sh_arena a;
	sh_arena_init(&a);
	for (int i = 0;; i++) {
		snprintf(pk, sizeof(pk), "ttl#%d", i);
		st_value *v = st_new_s(&a, pk);
		ck_assert_ptr_nonnull(v);
		if (st_key_hash(t, v) < below)
			break;
	}
	sh_arena_fini(&a);
	tl_part part;
	ck_assert(tl_parts_of(&P, 0, &part));
	ck_assert_int_eq(part.group, 1);
	char put[256], get[128];
	snprintf(put, sizeof(put),
	         "{\"TableName\":\"" TABLE "\",\"Item\":{\"pk\":{\"S\":\"%s\"},\"sk\":"
	         "{\"N\":\"0\"},\"expires\":{\"N\":\"%lld\"}}}",
	         pk, (long long)time(NULL) - 60);
	snprintf(get, sizeof(get),
	         "{\"TableName\":\"" TABLE "\",\"Key\":{\"pk\":{\"S\":\"%s\"},\"sk\":"
	         "{\"N\":\"0\"}},\"ConsistentRead\":true}",
	         pk);
	ck_assert_msg(shoal_call_json(client, "PutItem", put, &out, &err) == SHOAL_OK,
	              "PutItem: %s: %s", err.exception, err.message);
	shoal_free(out);
	int64_t t0 = tl_items_now_ms();
	for (;;) {
		ck_assert_msg(shoal_call_json(client, "GetItem", get, &out, &err) == SHOAL_OK,
		              "GetItem: %s: %s", err.exception, err.message);
		bool gone = strstr(out, "\"Item\"") == NULL;
		shoal_free(out);
		if (gone)
			break;
		ck_assert_msg(tl_items_now_ms() - t0 < 60000,
		              "the expired item %s in group 1 is still there after 60 s: Time to "
		              "Live does not run where a range moved out",
		              pk);
		usleep(50000); /* polling interval */
	}
	printf("groups: an expired item in group 1 (a range of the table moved out) deleted "
	       "by Time to Live after %lld ms\n",
	       (long long)(tl_items_now_ms() - t0));
}

static void finish(void)
{
	tl_items_free(items);
	items = NULL;
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}

/* `shoal status --output json`, parsed (json_decref it). */
static json_t *status_json(void)
{
	char *o = NULL, *e = NULL;
	ck_assert_int_eq(tl_shoal(&C, &o, &e, "status --output json"), 0);
	json_t *st = json_loads(o, 0, NULL);
	free(o);
	free(e);
	ck_assert_ptr_nonnull(st);
	return st;
}

/* The voters group g has in `shoal status --output json`'s MapGroups (the
 * map the router routes with), -1 if the group is not there; *founding:
 * the row's Founding. */
static int map_voters(int g, bool *founding)
{
	json_t *st = status_json();
	int n = -1;
	size_t i, k;
	json_t *row, *r;
	json_array_foreach(json_object_get(st, "MapGroups"), i, row)
	{
		if (json_integer_value(json_object_get(row, "Group")) != g)
			continue;
		n = 0;
		*founding = json_is_true(json_object_get(row, "Founding"));
		json_array_foreach(json_object_get(row, "Replicas"), k, r) n +=
		    json_is_true(json_object_get(r, "Voter"));
	}
	json_decref(st);
	return n;
}

/* Runs `shoal <args>`, expects it to fail with `want` in its stderr. */
static void refused(const char *args, const char *want)
{
	char *o = NULL, *e = NULL;
	int code = tl_shoal(&C, &o, &e, "%s", args);
	ck_assert_msg(code != 0 && e != NULL && strstr(e, want) != NULL,
	              "shoal %s: exit %d, stderr %s (wanted '%s')", args, code, e ? e : "", want);
	free(o);
	free(e);
}

START_TEST(test_groups)
{
	start("--ttl-scan-ms 200", TABLE, "groups", true);
	tl_items_check(items, "preload");

	/* A new group while the writer runs. */
	tl_items_writer_start(items);
	int64_t t0 = tl_items_now_ms();
	tl_parts_admin(&P, "admin add-group");
	bool founding = true;
	ck_assert_int_eq(map_voters(4, &founding), 3);
	ck_assert_msg(!founding, "add-group returned before group 4 was founded");
	ck_assert_int_ne(tl_parts_leader_of(&P, 4), 0);
	printf("groups: group 4 created and led: %lld ms\n", (long long)(tl_items_now_ms() - t0));
	tl_parts_admin(&P, "admin add-group --group-id 4"); /* done already */
	refused("admin add-group --group-id 80", "max_groups");
	refused("admin add-group --group-id 4 --nodes 1,2", "exists with other replicas");
	refused("admin add-group --nodes 1,1,2", "named twice");
	refused("admin add-group --nodes 1,x", "node ids (1 or more) separated by commas");
	refused("admin add-group --nodes 1,2,9", "no node 9");
	tl_parts_admin(&P, "admin --add-group '{\"GroupId\": 4}'"); /* raw: done already */
	/* A second new group, which stays empty: the table, placed statically
	 * in groups 1-3, enters the map at its first split below as it is
	 * placed -- not spread over the five data groups (it was, until
	 * 2026-11-27: the items of its last third were then looked for in
	 * group 4, which had none of them). */
	tl_parts_admin(&P, "admin add-group");
	ck_assert_int_eq(map_voters(5, &founding), 3);
	ck_assert(!founding);

	/* Its first data: half of partition 0 (group 1), then partition 2
	 * (group 3), both moved into the group that has never seen the
	 * table. */
	const uint64_t mid0 = 0x2aaaaaaaaaaaaaaaull;
	const uint64_t in2 = 0xd000000000000000ull;
	t0 = tl_items_now_ms();
	tl_parts_admin(&P,
	               "admin split-partition --table-name " TABLE " --at 0x%016" PRIx64
	               " --to-group 4 --no-wait",
	               mid0);
	tl_parts_wait_served(&P, mid0, 4, 120);
	printf("groups: split of partition 0, upper half to the new group: %lld ms\n",
	       (long long)(tl_items_now_ms() - t0));
	t0 = tl_items_now_ms();
	tl_parts_admin(&P,
	               "admin move-partition --table-name " TABLE " --hash 0x%016" PRIx64
	               " --to-group 4 --no-wait",
	               in2);
	tl_parts_wait_served(&P, in2, 4, 120);
	printf("groups: move of partition 2 to the new group: %lld ms\n",
	       (long long)(tl_items_now_ms() - t0));
	tl_items_writer_stop(items, "the moves");
	ck_assert_msg(tl_items_failed(items) == 0, "the client saw %d errors: %s",
	              tl_items_failed(items), tl_items_first_error(items));
	tl_items_check(items, "after the moves into the new group");
	tl_items_stream_check(items, "after the moves into the new group");

	/* Every process restarts: the new group and its data survive. */
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_stop_node(&C, id, false));
	ck_assert(tl_cluster_stop_router(&C, 1, false));
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_start_node(&C, id));
	ck_assert(tl_cluster_start_router(&C, 1));
	tl_parts_wait_served(&P, mid0, 4, 60);
	tl_parts_wait_served(&P, in2, 4, 60);
	ck_assert_int_eq(map_voters(4, &founding), 3);
	ck_assert(!founding);
	tl_items_check(items, "after a restart of every process");
	tl_items_stream_check(items, "after a restart of every process");
	ttl_where_a_range_moved_out(mid0);

	finish();
}
END_TEST

/* Whether group g has `want` voters in the map, none founding or being
 * caught up, and every one of them reports the group applied as far as its
 * leader has committed (a replica that came back holds it all). */
static bool whole(int g, int want)
{
	json_t *st = status_json();
	int voters = 0, replicas = 0, caught = 0;
	bool founding = true;
	long long commit = -1;
	size_t i, k;
	json_t *row, *r;
	json_array_foreach(json_object_get(st, "MapGroups"), i, row)
	{
		if (json_integer_value(json_object_get(row, "Group")) != g)
			continue;
		founding = json_is_true(json_object_get(row, "Founding"));
		json_array_foreach(json_object_get(row, "Replicas"), k, r)
		{
			replicas++;
			voters += json_is_true(json_object_get(r, "Voter"));
		}
	}
	json_array_foreach(
	    json_object_get(st, "Groups"), i,
	    row) if (json_integer_value(json_object_get(row, "Group")) == g &&
	             strcmp(json_string_value(json_object_get(row, "Role")) ?: "", "leader") == 0)
	    commit = json_integer_value(json_object_get(row, "CommitIndex"));
	json_array_foreach(json_object_get(st, "Groups"), i, row) caught +=
	    json_integer_value(json_object_get(row, "Group")) == g && commit > 0 &&
	    json_integer_value(json_object_get(row, "AppliedIndex")) >= commit;
	json_decref(st);
	return !founding && voters == want && replicas == want && caught == want;
}

/* A founder dead (SIGKILL) when the group is made: the other two elect,
 * group 0 marks the group founded, and the founder restarted has no data
 * for it and no founder mark any more: it reports the replica lost, which
 * is removed and re-created as a new replica, caught up before it votes --
 * until the group has three voters, all caught up, and serves a
 * partition. */
START_TEST(test_founder_killed)
{
	start(NULL, "founder", "founder killed", false);
	tl_items_writer_start(items);
	int64_t t0 = tl_items_now_ms();
	/* Node 3 dies first: the map names it a founder, yet it never
	 * bootstraps the group. */
	ck_assert(tl_cluster_stop_node(&C, 3, true));
	tl_parts_admin(&P, "admin add-group --group-id 4 --nodes 3,1,2 --no-wait");
	bool founding = true;
	for (int64_t until = tl_items_now_ms() + 60000; map_voters(4, &founding) != 3 || founding;
	     usleep(100000))
		ck_assert_msg(tl_items_now_ms() < until, "group 4 not founded within 60 s");
	printf("founder killed: group 4 founded without node 3: %lld ms\n",
	       (long long)(tl_items_now_ms() - t0));
	ck_assert(tl_cluster_start_node(&C, 3));
	for (int64_t until = tl_items_now_ms() + 120000; !whole(4, 3); usleep(200000))
		ck_assert_msg(tl_items_now_ms() < until,
		              "group 4 not whole (3 caught-up voters) within 120 s of node 3's "
		              "restart");
	printf("founder killed: group 4 whole again with node 3: %lld ms (node 3 %s)\n",
	       (long long)(tl_items_now_ms() - t0),
	       tl_cluster_log_count(&C, 3,
	                            "group 4: the cluster map has this node as a voter but "
	                            "it has no data") > 0
	           ? "had not bootstrapped it: its replica was re-created"
	           : "kept the log it had bootstrapped");
	const uint64_t in0 = 0x1000000000000000ull;
	tl_parts_admin(&P,
	               "admin move-partition --table-name founder --hash 0x%016" PRIx64
	               " --to-group 4 --no-wait",
	               in0);
	tl_parts_wait_served(&P, in0, 4, 120);
	tl_items_writer_stop(items, "the founding");
	ck_assert_msg(tl_items_failed(items) == 0, "the client saw %d errors: %s",
	              tl_items_failed(items), tl_items_first_error(items));
	tl_items_check(items, "after the founding and a move into the group");
	finish();
}
END_TEST

/* A founder that comes back from an empty data directory while its group
 * is still being founded: it may have founded the group (and voted in it)
 * before it lost its data, so it must not bootstrap it again.  Four nodes:
 * group 0 lives on nodes 1-3; group 4 is made with founders 3, 4 and 1
 * while nodes 3 and 4 are down, so node 1 alone bootstraps it and it stays
 * founding; node 3's directory is deleted and node 3 started: it reports
 * the group lost instead of bootstrapping it; node 4 starts and founds it
 * with node 1; node 3's replica is then removed and re-created, caught up
 * before it votes. */
START_TEST(test_founder_wiped)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	ck_assert_msg(tl_cluster_up_opts(&C, 4, 1, 4, NULL), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	tl_parts_init(&P, &C, "none");
	int64_t t0 = tl_items_now_ms();
	ck_assert(tl_cluster_stop_node(&C, 3, true));
	ck_assert(tl_cluster_stop_node(&C, 4, true));
	tl_parts_admin(&P, "admin add-group --group-id 4 --nodes 3,4,1 --no-wait");
	bool founding = false;
	ck_assert_int_eq(map_voters(4, &founding), 3);
	ck_assert(founding);
	ck_assert_int_eq(tl_sh("rm -rf '%s/node-3'", C.dir), 0);
	ck_assert(tl_cluster_start_node(&C, 3));
	const char *warned = "group 4: being founded with this node a founder, but this node "
	                     "started from an empty data directory";
	for (int64_t until = tl_items_now_ms() + 60000; tl_cluster_log_count(&C, 3, warned) == 0;
	     usleep(100000))
		ck_assert_msg(tl_items_now_ms() < until,
		              "node 3 never said it would not found group 4");
	ck_assert(map_voters(4, &founding) == 3 && founding);
	ck_assert(tl_cluster_start_node(&C, 4));
	for (int64_t until = tl_items_now_ms() + 180000; !whole(4, 3); usleep(200000))
		ck_assert_msg(tl_items_now_ms() < until,
		              "group 4 not whole (3 caught-up voters) within 180 s");
	ck_assert_int_eq(tl_cluster_log_count(&C, 3, "group 4: a new group founded here"), 0);
	printf("founder wiped: group 4 founded by nodes 1 and 4, node 3's replica re-created: "
	       "%lld ms\n",
	       (long long)(tl_items_now_ms() - t0));
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

/* Whether every data group of the map is founded, groups 4 and 5 exist,
 * and each of them serves a partition of the table with no move pending. */
static bool grown(int *n_data)
{
	json_t *st = status_json();
	bool founded = true;
	*n_data = 0;
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(st, "MapGroups"), i, row)
	{
		*n_data += json_integer_value(json_object_get(row, "Group")) != 0;
		founded = founded && !json_is_true(json_object_get(row, "Founding"));
	}
	json_decref(st);
	tl_part parts[64];
	int n = tl_parts_list(&P, parts, 64);
	bool in4 = false, in5 = false;
	for (int k = 0; k < n && k < 64; k++) {
		in4 = in4 || (parts[k].group == 4 && parts[k].moving == 0);
		in5 = in5 || (parts[k].group == 5 && parts[k].moving == 0);
	}
	return founded && *n_data == 5 && in4 && in5;
}

/* auto_groups: grown 3 -> 5 nodes under a writer, group 0's executor adds
 * groups 4 and 5 by itself (fewer data groups than nodes) and gives each a
 * partition of the table (the table enters the map, a partition is split
 * with its upper half sent there). */
START_TEST(test_auto_groups)
{
	start("--auto-groups", "auto", "auto groups", false);
	tl_items_writer_start(items);
	int64_t t0 = tl_items_now_ms();
	free(tl_cluster_add_node(&C));
	free(tl_cluster_add_node(&C));
	printf("auto groups: nodes 4 and 5 joined: %lld ms\n", (long long)(tl_items_now_ms() - t0));
	int n_data = 0;
	for (int64_t until = tl_items_now_ms() + 300000; !grown(&n_data); usleep(500000))
		ck_assert_msg(tl_items_now_ms() < until,
		              "not grown within 300 s: %d data groups in the map", n_data);
	printf("auto groups: groups 4 and 5 made and serving a partition each: %lld ms after the "
	       "nodes began joining\n",
	       (long long)(tl_items_now_ms() - t0));
	tl_items_writer_stop(items, "the growth");
	ck_assert_msg(tl_items_failed(items) == 0, "the client saw %d errors: %s",
	              tl_items_failed(items), tl_items_first_error(items));
	tl_items_check(items, "after the growth");
	bool founding;
	ck_assert_int_eq(map_voters(4, &founding), 3);
	ck_assert_int_eq(map_voters(5, &founding), 3);
	int made = 0; /* "elastic: group 4: a new group on nodes ... auto_groups): done" */
	for (int id = 1; id <= 5; id++)
		made += tl_cluster_log_count(&C, id, "auto_groups): done");
	ck_assert_int_ge(made, 2);
	finish();
}
END_TEST

static Suite *groups_suite(void)
{
	Suite *s = suite_create("groups");
	TCase *tc = tcase_create("groups");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_groups);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("founder");
	tcase_set_timeout(tf, 900);
	tcase_add_test(tf, test_founder_killed);
	suite_add_tcase(s, tf);
	TCase *tw = tcase_create("founder_wiped");
	tcase_set_timeout(tw, 900);
	tcase_add_test(tw, test_founder_wiped);
	suite_add_tcase(s, tw);
	TCase *ta = tcase_create("auto");
	tcase_set_timeout(ta, 900);
	tcase_add_test(ta, test_auto_groups);
	suite_add_tcase(s, ta);
	return s;
}

TL_MAIN(groups_suite)
