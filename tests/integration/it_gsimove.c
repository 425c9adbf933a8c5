/*
 * it_gsimove -- issue 14: GSI partitions move and split on a real local
 * cluster (real shoal-node / shoal-router processes, Raft, LMDB), with a
 * writer running through every step.  The GSI space -- the index partitions
 * of every GSI, by st_index_hash -- moves as a table's partitions do (copy,
 * move log, fence, cutover, purge; storage/parts.h "The GSI space"), while
 * the base groups go on shipping their deltas: a target refuses a range
 * moving away from it, and the sources hold those deltas until the map
 * names the new owner.
 *
 *  - move: the GSI partition holding g0's entries moves to another group
 *    (`shoal admin move-partition --gsi-space`), and the node leading its
 *    source group is killed with SIGKILL in the middle of the copy, then
 *    restarted: the next leader starts a new attempt and finishes;
 *  - split: the GSI partition holding g1's entries splits at g1's hash and
 *    the upper half moves to another group (`split-partition --gsi-space`);
 *  - a new group (`shoal admin add-group`), which has never seen the table,
 *    receives the GSI partition holding g3's entries and serves it;
 *  - DescribeTable's ItemCount of the GSI never counts an entry twice while
 *    a GSI partition moves (the writer stopped), and is exact after;
 *  - every process restarts: the GSI space's shape survives.
 *
 * After each step (the writer stopped) tl_items_check: the base table exact,
 * and every GSI key's entries converge to the items that carry it -- a
 * delta lost or applied twice across the move shows there.  The writer must
 * see no error, nor must a reader that queries the moving GSI keys the whole
 * time (its worst latency is the GSI reads' cutover).  Times are printed,
 * never asserted.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/shoal.h"
#include "common/arena.h"
#include "storage/index.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_items.h"
#include "tests/lib/tl_parts.h"

#define PKS      30
#define PRE_SKS  20
#define MAX_OPS  60000
#define TABLE    "gsimove"
#define GSI_ID   2 /* byg: tl_items' table defines the LSI byl first */
#define G_VALUES 7

static tl_cluster C;
static shoal_client *client;
static tl_items *items;
static tl_parts P;

/* The reader: GSI Queries of g0 and g1 (the keys that move) in a loop. */
typedef struct reader {
	pthread_t th;
	atomic_bool stop;
	int queries, failed;
	int64_t worst_ms;
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8];
} reader;
static reader R;

static void *reader_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&R.stop)) {
		char body[256], *out = NULL;
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"" TABLE "\",\"IndexName\":\"byg\","
		         "\"KeyConditionExpression\":\"g = :g\",\"ExpressionAttributeValues\":"
		         "{\":g\":{\"S\":\"g%d\"}},\"Select\":\"COUNT\"}",
		         R.queries % 2);
		shoal_error err;
		int64_t t0 = tl_items_now_ms();
		int rc = shoal_call_json(client, "Query", body, &out, &err);
		int64_t ms = tl_items_now_ms() - t0;
		shoal_free(out);
		if (ms > R.worst_ms)
			R.worst_ms = ms;
		if (rc != SHOAL_OK && R.failed++ == 0)
			snprintf(R.first_error, sizeof(R.first_error), "%s: %s", err.exception,
			         err.message);
		R.queries++;
		usleep(5000);
	}
	return NULL;
}

static void reader_start(void)
{
	R = (reader){.worst_ms = 0};
	atomic_store(&R.stop, false);
	ck_assert_int_eq(pthread_create(&R.th, NULL, reader_main, NULL), 0);
}

static void reader_stop(const char *when)
{
	atomic_store(&R.stop, true);
	pthread_join(R.th, NULL);
	printf("gsimove: reader during %s: %d GSI queries, %d failed, worst latency %lld ms%s%s\n",
	       when, R.queries, R.failed, (long long)R.worst_ms, R.failed > 0 ? ", first: " : "",
	       R.first_error);
	ck_assert_msg(R.failed == 0, "the GSI reader saw %d errors: %s", R.failed, R.first_error);
}

/* The GSI space hash of index key g<k> of the table. */
static uint64_t g_hash(uint32_t table, int k)
{
	sh_arena a;
	sh_arena_init(&a);
	char g[16];
	snprintf(g, sizeof(g), "g%d", k);
	st_value *v = st_new_s(&a, g);
	ck_assert(v != NULL);
	uint64_t h = st_index_hash(table, GSI_ID, 0, v);
	sh_arena_fini(&a);
	return h;
}

/* A data group (1..3) other than g. */
static int other(int g)
{
	return g % 3 + 1;
}

/* A Scan of the GSI, all pages: its entries wherever the map puts them. */
static long long gsi_scan_count(void)
{
	return tl_count_pages(client, "Scan",
	                      "\"TableName\":\"" TABLE
	                      "\",\"IndexName\":\"byg\",\"Select\":\"COUNT\"");
}

static void writer_ok(const char *when)
{
	reader_stop(when);
	tl_items_writer_stop(items, when);
	ck_assert_msg(tl_items_failed(items) == 0, "the client saw %d errors: %s",
	              tl_items_failed(items), tl_items_first_error(items));
	tl_items_check(items, when);
	/* The GSI key by key has converged: a Scan of it finds every entry
	 * once, in whichever groups the map puts its partitions. */
	long long n = gsi_scan_count();
	ck_assert_msg(n == tl_items_checked(items),
	              "%s: a Scan of the GSI counts %lld, the table %lld", when, n,
	              tl_items_checked(items));
}

START_TEST(test_gsi_move)
{
	/* The source leader pauses 150 ms after each 4 KiB chunk and before
	 * its fence, so that the SIGKILL below lands in the middle of a copy. */
	setenv("SHOAL_PMOVE_TEST_PAUSE_MS", "150", 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ck_assert_msg(tl_cluster_up(&C, 3, 1, 4), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	items = tl_items_new(client, TABLE, PKS, PRE_SKS, MAX_OPS, "gsimove");
	ck_assert_ptr_nonnull(items);
	tl_parts_init_gsi(&P, &C);
	tl_items_create_table(items);
	tl_items_preload(items);
	tl_items_check(items, "preload");
	uint32_t tid = tl_table_number(client, TABLE);
	ck_assert_uint_gt(tid, 0);
	uint64_t h[G_VALUES];
	for (int k = 0; k < G_VALUES; k++)
		h[k] = g_hash(tid, k);

	/* Move: g0's GSI partition to another group, its source's leader
	 * SIGKILLed mid-copy. */
	tl_part part;
	ck_assert(tl_parts_of(&P, h[0], &part));
	int from = part.group, to = other(from);
	/* The range holds entries: the hashes computed here are where the
	 * GSI's entries are (an index id guessed wrong would move an empty
	 * range, and every check below would pass).  It is the source group's
	 * only range of the GSI space. */
	long long held = tl_parts_index_entries(&P, from, TABLE, "byg");
	ck_assert_msg(held > 0, "group %d holds %lld entries of the GSI before the move", from,
	              held);
	tl_items_writer_start(items);
	reader_start();
	int64_t t0 = tl_items_now_ms();
	tl_parts_admin(
	    &P, "admin move-partition --gsi-space --hash 0x%016" PRIx64 " --to-group %d --no-wait",
	    h[0], to);
	int victim = 0;
	for (int64_t until = tl_items_now_ms() + 30000; victim == 0; usleep(20000)) {
		ck_assert_msg(tl_items_now_ms() < until, "group %d shows no leader", from);
		if (tl_parts_of(&P, h[0], &part) && part.moving == to)
			victim = tl_parts_leader_of(&P, from);
	}
	usleep(300000); /* a chunk or two into the copy */
	ck_assert(tl_cluster_stop_node(&C, victim, true));
	printf("gsimove: SIGKILL of node %d (group %d's leader, the move's source) %lld ms into "
	       "the move\n",
	       victim, from, (long long)(tl_items_now_ms() - t0));
	ck_assert(tl_cluster_start_node(&C, victim));
	tl_parts_wait_served(&P, h[0], to, 180);
	printf("gsimove: GSI partition [0x%016" PRIx64 ", 0x%016" PRIx64
	       "] from group %d to group %d, its source leader killed: %lld ms\n",
	       part.lo, part.hi, from, to, (long long)(tl_items_now_ms() - t0));
	writer_ok("the GSI move");
	/* ... and they left: the source's purge empties it (the copy's
	 * counter, shoal_node_partition_items_copied_total, is no witness:
	 * it lives in the memory of the leader killed above, which may have
	 * copied the whole range before it died). */
	long long left = held;
	for (int64_t until = tl_items_now_ms() + 60000; left != 0; usleep(50000)) {
		ck_assert_msg(
		    tl_items_now_ms() < until,
		    "group %d still holds %lld of its %lld GSI entries 60 s after the move", from,
		    left, held);
		left = tl_parts_index_entries(&P, from, TABLE, "byg");
	}
	printf("gsimove: group %d held %lld GSI entries before the move, none after its purge\n",
	       from, held);

	/* Split: g1's partition at g1's hash, the upper half to another group
	 * (g1's own entries move with it). */
	ck_assert(tl_parts_of(&P, h[1], &part));
	if (h[1] == part.lo) {
		printf("gsimove: g1's hash starts its partition; split at g2's\n");
		h[1] = h[2];
		ck_assert(tl_parts_of(&P, h[1], &part));
	}
	from = part.group;
	to = other(from);
	tl_items_writer_start(items);
	reader_start();
	t0 = tl_items_now_ms();
	tl_parts_admin(
	    &P, "admin split-partition --gsi-space --at 0x%016" PRIx64 " --to-group %d --no-wait",
	    h[1], to);
	tl_parts_wait_served(&P, h[1], to, 180);
	tl_part low;
	ck_assert(tl_parts_of(&P, h[1] - 1, &low));
	ck_assert_int_eq(low.group, from);
	printf("gsimove: GSI partition split at 0x%016" PRIx64 ", upper half from group %d to %d: "
	       "%lld ms\n",
	       h[1], from, to, (long long)(tl_items_now_ms() - t0));
	writer_ok("the GSI split");

	/* A group made since the birth, which has never seen the table: the
	 * GSI partition holding g3's entries moves into it, and is read there. */
	t0 = tl_items_now_ms();
	tl_parts_admin(&P, "admin add-group --group-id 4");
	ck_assert_int_ne(tl_parts_leader_of(&P, 4), 0);
	ck_assert(tl_parts_of(&P, h[3], &part));
	from = part.group;
	tl_items_writer_start(items);
	reader_start();
	tl_parts_admin(&P, "admin move-partition --gsi-space --hash 0x%016" PRIx64 " --to-group 4",
	               h[3]);
	tl_parts_wait_served(&P, h[3], 4, 60);
	printf("gsimove: GSI partition [0x%016" PRIx64 ", 0x%016" PRIx64
	       "] from group %d to the new group 4 (made and filled): %lld ms\n",
	       part.lo, part.hi, from, (long long)(tl_items_now_ms() - t0));
	writer_ok("the GSI move into a new group");

	/* DescribeTable's ItemCount of the GSI during a move of the GSI space
	 * with the writer stopped: the target's copy counts only once it owns
	 * the range and the source stops counting it at its handover
	 * (storage/parts.h, Counting), so no sample taken while the map shows
	 * the move pending (before and after the sample) counts an entry
	 * twice; exact after.  g3's partition goes from group 4 to group 1. */
	long long ng = tl_items_checked(items);
	t0 = tl_items_now_ms();
	for (long long got; (got = tl_items_described_index(items, "byg")) != ng; usleep(50000))
		ck_assert_msg(tl_items_now_ms() - t0 < 30000,
		              "the GSI's ItemCount %lld before the move, it holds %lld entries",
		              got, ng);
	t0 = tl_items_now_ms();
	tl_parts_admin(
	    &P, "admin move-partition --gsi-space --hash 0x%016" PRIx64 " --to-group 1 --no-wait",
	    h[3]);
	int samples = 0, judged = 0;
	bool pending = tl_parts_of(&P, h[3], &part) && part.moving == 1;
	for (;;) {
		long long got = tl_items_described_index(items, "byg");
		bool was = pending;
		pending = tl_parts_of(&P, h[3], &part) && part.moving == 1;
		samples++;
		if (was && pending) {
			ck_assert_msg(
			    got <= ng,
			    "the GSI's ItemCount %lld while the move is pending, it holds "
			    "%lld entries",
			    got, ng);
			judged++;
		}
		if (part.group == 1 && part.moving == 0)
			break;
		ck_assert_msg(tl_items_now_ms() - t0 < 180000, "the move took over 180 s");
	}
	for (long long got; (got = tl_items_described_index(items, "byg")) != ng; usleep(50000))
		ck_assert_msg(tl_items_now_ms() - t0 < 240000,
		              "the GSI's ItemCount %lld after the move, it holds %lld entries", got,
		              ng);
	printf("gsimove: the GSI's ItemCount during a move of g3's partition to group 1: %d "
	       "samples, %d while it was pending, none above %lld; %lld after it\n",
	       samples, judged, ng, ng);

	/* shoal status shows the GSI space's partitions. */
	char *o = NULL, *e = NULL;
	ck_assert_int_eq(tl_shoal(&C, &o, &e, "status"), 0);
	ck_assert_msg(o != NULL && strstr(o, "(GSI space)") != NULL,
	              "shoal status does not list the GSI space:\n%s", o != NULL ? o : "");
	free(o);
	free(e);

	/* Every process restarts: the shape and the entries survive. */
	int before = tl_parts_in_map(&P);
	tl_part last;
	ck_assert(tl_parts_of(&P, h[1], &last));
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_stop_node(&C, id, false));
	ck_assert(tl_cluster_stop_router(&C, 1, false));
	for (int id = 1; id <= 3; id++)
		ck_assert(tl_cluster_start_node(&C, id));
	ck_assert(tl_cluster_start_router(&C, 1));
	tl_parts_wait_served(&P, h[1], last.group, 60);
	ck_assert_int_eq(tl_parts_in_map(&P), before);
	tl_items_writer_start(items);
	reader_start();
	usleep(500000);
	writer_ok("a restart of every process");

	tl_items_free(items);
	items = NULL;
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

static Suite *gsimove_suite(void)
{
	Suite *s = suite_create("gsimove");
	TCase *tc = tcase_create("moves");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_gsi_move);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(gsimove_suite)
