/*
 * it_pmove_chaos -- issue 14's partition moves with one process SIGKILLed at
 * each phase of the protocol (node/pmove.c: OUT, COPYING, FENCED, READY,
 * OWN, PURGE), on a real local cluster (3 nodes, 1 router, groups 0-3) with
 * tests/lib/tl_items.h's writer running through every case:
 *
 *   a  a split whose upper half goes to another group; the TARGET group's
 *      leader is killed while the source copies to it (COPYING);
 *   b  a move; the SOURCE group's leader is killed once the range is
 *      fenced, before the cutover (FENCED);
 *   c  a move; GROUP 0's leader -- the executor that flips the map -- is
 *      killed while the range is fenced (FENCED, before READY is seen);
 *   d  a move; the ROUTER is killed during the copy and started again (the
 *      writer's libshoal reconnects);
 *   e  a move; the SOURCE group's leader is killed the moment the map shows
 *      the cutover (OWN / PURGE: the test prints whether the victim had
 *      finished the purge, which for a partition this small is one Raft
 *      entry);
 *   f  a move with no fault, the control (and, run twice or more in a row,
 *      the same range moved back and forth by the same leaders).
 * Cases e and f also assert that the map's cutover comes only after the
 * source fenced the range in this move (its hold was logged): the back and
 * forth of "ff" once flipped the map on a previous move's progress.  Cases b
 * and c also ask, while the range is fenced, for a new GSI of the table,
 * which must be refused (ResourceInUseException: a backfill and a move of
 * one table never overlap).
 *
 * Every killed process is started again.  Each case asserts that the move
 * completes (the partition is served by the target with no move pending,
 * and a leader of the source group logged the end of its purge) and that tl_items_check passes
 * (every partition key's items exactly as acknowledged, a Scan counts each once, the LSI agrees,
 * the GSI converges) and tl_items_stream_check (the table's stream, read parents before
 * children, gives every item one unbroken chain of images); the writer must see no error except in
 * case d, where a request in flight at the router's death may fail (its item becomes uncertain and
 * either outcome passes).  The move's time, when the fault landed and the writer's worst latency
 * are printed, never asserted.
 *
 * Phases are seen, never slept for: COPYING by the cluster's
 * shoal_node_partition_items_copied_total growing, FENCED by the source
 * leader's log line "test hold of" (SHOAL_PMOVE_TEST_FENCED_MS: each
 * attempt holds the range fenced for that long, a test-only knob), the
 * cutover by ClusterStatus.  The copy is slowed by SHOAL_PMOVE_TEST_PAUSE_MS
 * (4 KiB chunks, a pause after each).
 *
 * Groups are chosen per case from the leaders of the moment so that the
 * victim leads none of the other groups involved (when the leaders allow;
 * the choice is printed).
 *
 * PMOVE_CHAOS_CASES picks the cases (default "bcef", the short version `make
 * test` runs, ~20 s); PMOVE_CHAOS_ROUNDS repeats them (default 1) on the
 * same cluster and table, each round from where the last left the leaders
 * and partitions.  `make chaos` runs "abcde" 5 times (~2 minutes).
 *
 * Then the same cases move ranges of the GSI space instead of the table's
 * (`--gsi-space`: the index partitions of every GSI; storage/parts.h, "The
 * GSI space"), PMOVE_CHAOS_GSI_CASES (default "bcef"; "-": none), each
 * round after the table's: a range holding entries of the table's GSI (a
 * split at one of its keys' hashes), the same faults at the same phases,
 * and the same checks -- tl_items_check compares the GSI key by key with
 * the items, so a delta lost or applied twice across the move fails it.
 * Creating a GSI is not refused during such a move (no table moves).
 */
#include <check.h>
#include <inttypes.h>
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

#define PKS       40
#define PRE_SKS   25
#define MAX_OPS   100000
#define TABLE     "pchaos"
#define DATA      3 /* data groups 1..3 */
#define MOVE_SECS 180
#define COPIED    "shoal_node_partition_items_copied_total"
#define HOLD      "test hold of"
#define PURGED    "purged here"
/* Each source replica's apply of the purge's last entry (pmove.c): seen even
 * when the leader that proposed it died before saying PURGED (case e: the
 * next leader commits the entry and finds nothing left to drive). */
#define PURGE_APPLIED "purge applied, the range is gone"

static tl_cluster C;
static shoal_client *client;
static tl_items *items;
static tl_parts P;    /* the table's partitions */
static tl_parts PG;   /* the GSI space's */
static tl_parts *cur; /* the space the cases move: &P or &PG */
#define G_VALUES 7    /* tl_items' GSI byg: keys g0 .. g6 */
#define GSI_ID   2    /* byg's index id (the LSI byl is defined first) */
static uint64_t g_hash[G_VALUES];

typedef enum victim { V_TARGET, V_SOURCE, V_EXECUTOR, V_ROUTER, V_NONE } victim;

typedef struct chaos_case {
	char id;
	const char *what;
	bool split;
	victim v;
	enum { AT_COPYING, AT_FENCED, AT_CUTOVER } at;
} chaos_case;

static const chaos_case CASES[] = {
    {'a', "split, target leader killed during the copy", true, V_TARGET, AT_COPYING},
    {'b', "move, source leader killed after the fence", false, V_SOURCE, AT_FENCED},
    {'c', "move, group 0's leader (executor) killed while fenced", false, V_EXECUTOR, AT_FENCED},
    {'d', "move, router killed during the copy", false, V_ROUTER, AT_COPYING},
    {'e', "move, source leader killed at the cutover (own/purge)", false, V_SOURCE, AT_CUTOVER},
    {'f', "move, no fault (the control)", false, V_NONE, AT_CUTOVER},
};

/* The node victim v of a move from s to t is (0: the router). */
static int victim_node(victim v, const int *leader, int s, int t)
{
	switch (v) {
	case V_TARGET:
		return leader[t];
	case V_SOURCE:
		return leader[s];
	case V_EXECUTOR:
		return leader[0];
	default:
		return 0;
	}
}

/* The hash of a key of the GSI in partition x (0: none) -- for a split, one
 * above x's first hash, so that the upper half holds it. */
static uint64_t gsi_key_in(const tl_part *x, bool split)
{
	for (int k = 0; k < G_VALUES; k++)
		if (g_hash[k] >= x->lo && g_hash[k] <= x->hi && (!split || g_hash[k] > x->lo))
			return g_hash[k];
	return 0;
}

/* Chooses a partition of the table (its group the source) and a target so
 * that the victim leads none of the other groups involved, the widest such
 * partition; false if the table has no partition without a pending move. */
static bool choose(const chaos_case *cc, tl_part *part, int *to)
{
	int leader[DATA + 1];
	for (int g = 0; g <= DATA; g++)
		leader[g] = tl_parts_leader_of(cur, g);
	tl_part parts[64];
	int n = tl_parts_list(cur, parts, 64), best = -1;
	for (int i = 0; i < n; i++) {
		if (parts[i].moving != 0 || (cur == &PG && gsi_key_in(&parts[i], cc->split) == 0))
			continue;
		int s = parts[i].group;
		for (int t = 1; t <= DATA; t++) {
			if (t == s)
				continue;
			int vn = victim_node(cc->v, leader, s, t), score = 0;
			if (vn != 0) {
				score +=
				    vn != 0 && leader[s] != 0 && leader[t] != 0 && leader[0] != 0;
				score += cc->v == V_SOURCE || vn != leader[s];
				score += cc->v == V_TARGET || vn != leader[t];
				score += cc->v == V_EXECUTOR || vn != leader[0];
			}
			/* Ties go to the widest partition: the table has 40
			 * partition keys, and a range repeatedly split can
			 * hold none (nothing to copy, no copy to kill in). */
			if (score > best ||
			    (score == best && parts[i].hi - parts[i].lo > part->hi - part->lo)) {
				best = score;
				*part = parts[i];
				*to = t;
			}
		}
	}
	if (best < 0)
		return false;
	printf("pchaos: case %c%s: leaders g0=n%d g1=n%d g2=n%d g3=n%d; partition [%016" PRIx64
	       ", %016" PRIx64 "] of group %d to group %d%s\n",
	       cc->id, cur == &PG ? " (GSI space)" : "", leader[0], leader[1], leader[2], leader[3],
	       part->lo, part->hi, part->group, *to,
	       best == 4 || cc->v >= V_ROUTER ? "" : " (the victim leads another)");
	return true;
}

/* Starts node id again after its SIGKILL.  Once in ~25 restarts here the
 * new process found the data directory's lock still held by the killed
 * one (cluster.sh had seen it gone): start again until a deadline. */
static bool restart_node(int id)
{
	for (int64_t until = tl_items_now_ms() + 15000;; usleep(200000)) {
		if (tl_cluster_start_node(&C, id))
			return true;
		if (tl_items_now_ms() >= until)
			return false;
		printf("pchaos: node %d did not start; again\n", id);
	}
}

static int log_total(const char *needle)
{
	int n = 0;
	for (int id = 1; id <= C.nodes; id++)
		n += tl_cluster_log_count(&C, id, needle);
	return n;
}

/* UpdateTable creating GSI `name` of the table (on attribute l, KEYS_ONLY):
 * libshoal's result, *err on failure. */
static int create_gsi(const char *name, shoal_error *err)
{
	char body[512], *out = NULL;
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"" TABLE "\",\"AttributeDefinitions\":[{\"AttributeName\":"
	         "\"l\",\"AttributeType\":\"N\"}],\"GlobalSecondaryIndexUpdates\":[{"
	         "\"Create\":{\"IndexName\":\"%s\",\"KeySchema\":[{\"AttributeName\":"
	         "\"l\",\"KeyType\":\"HASH\"}],\"Projection\":{\"ProjectionType\":"
	         "\"KEYS_ONLY\"}}}]}",
	         name);
	int rc = shoal_call_json(client, "UpdateTable", body, &out, err);
	shoal_free(out);
	return rc;
}

static void run_case(const chaos_case *cc)
{
	tl_part part;
	int to = 0;
	ck_assert_msg(choose(cc, &part, &to), "case %c: no partition to move", cc->id);
	int from = part.group;
	/* The hash whose partition moves: a split's upper half, or the whole. */
	uint64_t h = cur == &PG  ? (cc->split ? gsi_key_in(&part, true) : part.lo)
	             : cc->split ? part.lo + (part.hi - part.lo) / 2 + 1
	                         : part.lo;
	const char *space = cur == &PG ? "--gsi-space" : "--table-name " TABLE;
	double copied0 = tl_cluster_metric(&C, COPIED, -1);
	int holds0 = log_total(HOLD), purged0 = log_total(PURGE_APPLIED);

	tl_items_writer_start(items);
	int64_t t0 = tl_items_now_ms();
	if (cc->split)
		tl_parts_admin(
		    cur, "admin split-partition %s --at 0x%016" PRIx64 " --to-group %d --no-wait",
		    space, h, to);
	else
		tl_parts_admin(
		    cur, "admin move-partition %s --hash 0x%016" PRIx64 " --to-group %d --no-wait",
		    space, h, to);

	/* Wait for the phase. */
	int64_t until = tl_items_now_ms() + 60000;
	const char *seen = NULL;
	while (seen == NULL) {
		ck_assert_msg(tl_items_now_ms() < until,
		              "case %c: the move never reached its phase", cc->id);
		tl_part now;
		switch (cc->at) {
		case AT_COPYING:
			if (tl_cluster_metric(&C, COPIED, -1) > copied0)
				seen = "items copied";
			break;
		case AT_FENCED:
			if (log_total(HOLD) > holds0)
				seen = "the source's fence hold";
			break;
		case AT_CUTOVER:
			if (tl_parts_of(cur, h, &now) && now.group == to) {
				seen = "the map's cutover";
				/* A cutover needs an attempt that copied and
				 * fenced (and so held, with the knob). */
				ck_assert_msg(log_total(HOLD) > holds0,
				              "case %c: the map gave the range to group %d before "
				              "the source fenced it",
				              cc->id, to);
			}
			break;
		}
		if (seen == NULL)
			usleep(10000);
	}
	/* The victim, as the leaders are now. */
	int vn = 0;
	switch (cc->v) {
	case V_TARGET:
		vn = tl_parts_leader_of(cur, to);
		break;
	case V_SOURCE:
		vn = tl_parts_leader_of(cur, from);
		break;
	case V_EXECUTOR:
		vn = tl_parts_leader_of(cur, 0);
		break;
	case V_ROUTER:
	case V_NONE:
		break;
	}
	/* While the move is under way no GSI of the table is created (its
	 * backfill would index items that are moving): ResourceInUse. */
	if (cc->at == AT_FENCED && cur == &P) {
		shoal_error err;
		int rc = create_gsi("busy", &err);
		ck_assert_msg(
		    rc != SHOAL_OK && strcmp(err.exception, "ResourceInUseException") == 0 &&
		        strstr(err.message, "is moving") != NULL,
		    "case %c: UpdateTable creating a GSI during the move: %s: %s", cc->id,
		    rc == SHOAL_OK ? "accepted" : err.exception, rc == SHOAL_OK ? "" : err.message);
	}
	int purged_before = vn != 0 ? tl_cluster_log_count(&C, vn, PURGED) : 0;
	int64_t t_fault = tl_items_now_ms() - t0;
	if (cc->v == V_NONE) {
		printf("pchaos: case %c: no fault (%s seen %lld ms into the move)\n", cc->id, seen,
		       (long long)t_fault);
	} else if (cc->v == V_ROUTER) {
		ck_assert(tl_cluster_stop_router(&C, 1, true));
		printf("pchaos: case %c: SIGKILL of the router %lld ms into the move (after %s)\n",
		       cc->id, (long long)t_fault, seen);
		ck_assert(tl_cluster_start_router(&C, 1));
	} else {
		ck_assert_msg(vn != 0, "case %c: no leader to kill", cc->id);
		ck_assert(tl_cluster_stop_node(&C, vn, true));
		printf("pchaos: case %c: SIGKILL of node %d %lld ms into the move (after %s)\n",
		       cc->id, vn, (long long)t_fault, seen);
		if (cc->at == AT_CUTOVER)
			printf("pchaos: case %c: the victim had %s the purge\n", cc->id,
			       tl_cluster_log_count(&C, vn, PURGED) > purged_before
			           ? "finished"
			           : "not finished");
		ck_assert_msg(restart_node(vn), "case %c: node %d did not start again", cc->id, vn);
	}
	tl_parts_wait_served(cur, h, to, MOVE_SECS);
	int64_t took = tl_items_now_ms() - t0;
	/* ... and the source's copy is gone: a replica of the source group
	 * applied the purge's last entry. */
	for (int64_t end = tl_items_now_ms() + MOVE_SECS * 1000;
	     log_total(PURGE_APPLIED) == purged0; usleep(20000))
		ck_assert_msg(tl_items_now_ms() < end,
		              "case %c: the source never finished its purge", cc->id);
	int64_t purged = tl_items_now_ms() - t0;
	if (cc->split) {
		tl_part low;
		ck_assert(tl_parts_of(cur, h - 1, &low));
		ck_assert_int_eq(low.group, from);
	}
	char when[64];
	snprintf(when, sizeof(when), "case %c%s", cc->id, cur == &PG ? " (GSI space)" : "");
	tl_items_writer_stop(items, when);
	printf("pchaos: %s (%s): served by the target after %lld ms, purged after %lld ms, "
	       "fault at %lld ms, writer's worst latency %lld ms, %d failed\n",
	       when, cc->what, (long long)took, (long long)purged, (long long)t_fault,
	       (long long)tl_items_worst_ms(items), tl_items_failed(items));
	if (cc->v != V_ROUTER)
		ck_assert_msg(tl_items_failed(items) == 0, "case %c: the client saw %d errors: %s",
		              cc->id, tl_items_failed(items), tl_items_first_error(items));
	snprintf(when, sizeof(when), "after case %c%s", cc->id, cur == &PG ? " (GSI space)" : "");
	tl_items_check(items, when);
	tl_items_stream_check(items, when);
	const char *what;
	int id;
	ck_assert_msg(tl_cluster_alive(&C, &what, &id), "case %c: %s %d died", cc->id, what, id);
}

/* The other side of "a backfill and a move of one table never overlap": a
 * GSI being created holds back a move of the table, refused with its
 * reason; ACTIVE, the move goes.  (A CREATING index activates when
 * DescribeTable or a read of it finds every group's backfill done, so it
 * stays CREATING until the DescribeTable below.) */
static void gsi_holds_moves(void)
{
	char *out = NULL;
	shoal_error err;
	ck_assert_msg(create_gsi("late", &err) == SHOAL_OK, "UpdateTable: %s: %s", err.exception,
	              err.message);
	tl_part part;
	ck_assert(tl_parts_of(&P, 0, &part));
	int to = part.group % DATA + 1;
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(&C, &o, &e,
	                  "admin move-partition --table-name " TABLE " --hash 0 --to-group %d "
	                  "--no-wait",
	                  to);
	ck_assert_msg(rc != 0 && e != NULL && strstr(e, "being created") != NULL,
	              "a move while a GSI is being created: exit %d: %s%s", rc, o ? o : "",
	              e ? e : "");
	printf("pchaos: a move while a GSI is created: %s", e);
	free(o);
	free(e);
	for (int64_t until = tl_items_now_ms() + 60000;; usleep(100000)) {
		ck_assert_msg(tl_items_now_ms() < until, "GSI late never became ACTIVE");
		ck_assert_msg(shoal_call_json(client, "DescribeTable",
		                              "{\"TableName\":\"" TABLE "\"}", &out,
		                              &err) == SHOAL_OK,
		              "DescribeTable: %s: %s", err.exception, err.message);
		bool creating = strstr(out, "CREATING") != NULL;
		shoal_free(out);
		if (!creating)
			break;
	}
	tl_parts_admin(
	    &P, "admin move-partition --table-name " TABLE " --hash 0 --to-group %d --no-wait", to);
	tl_parts_wait_served(&P, 0, to, MOVE_SECS);
	tl_items_check(items, "after the move that waited for the GSI");
}

START_TEST(test_pmove_chaos)
{
	setenv("SHOAL_PMOVE_TEST_PAUSE_MS", "100", 1);
	setenv("SHOAL_PMOVE_TEST_FENCED_MS", "1000", 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *cases = getenv("PMOVE_CHAOS_CASES");
	if (cases == NULL || cases[0] == '\0')
		cases = "bcef";
	int rounds = getenv("PMOVE_CHAOS_ROUNDS") != NULL ? atoi(getenv("PMOVE_CHAOS_ROUNDS")) : 1;
	if (rounds < 1)
		rounds = 1;
	printf("pchaos: cases %s (PMOVE_CHAOS_CASES), %d round(s) (PMOVE_CHAOS_ROUNDS)\n", cases,
	       rounds);
	ck_assert_msg(tl_cluster_up(&C, 3, 1, DATA + 1), "the cluster did not start");
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &client, msg) == SHOAL_OK, "%s", msg);
	items = tl_items_new(client, TABLE, PKS, PRE_SKS, MAX_OPS, "pchaos");
	ck_assert_ptr_nonnull(items);
	tl_parts_init(&P, &C, TABLE);
	tl_parts_init_gsi(&PG, &C);
	tl_items_with_stream(items);
	tl_items_create_table(items);
	tl_items_preload(items);
	tl_items_check(items, "preload");
	uint32_t tid = tl_table_number(client, TABLE);
	ck_assert_uint_gt(tid, 0);
	sh_arena a;
	sh_arena_init(&a);
	for (int k = 0; k < G_VALUES; k++) {
		char g[16];
		snprintf(g, sizeof(g), "g%d", k);
		st_value *v = st_new_s(&a, g);
		ck_assert(v != NULL);
		g_hash[k] = st_index_hash(tid, GSI_ID, 0, v);
	}
	sh_arena_fini(&a);
	const char *gsi_cases = getenv("PMOVE_CHAOS_GSI_CASES");
	if (gsi_cases == NULL || gsi_cases[0] == '\0')
		gsi_cases = "bcef";
	if (strcmp(gsi_cases, "-") == 0)
		gsi_cases = "";
	printf("pchaos: GSI space cases %s (PMOVE_CHAOS_GSI_CASES)\n", gsi_cases);
	for (int r = 0; r < rounds; r++)
		for (int space = 0; space < 2; space++) {
			cur = space == 0 ? &P : &PG;
			for (const char *c = space == 0 ? cases : gsi_cases; *c != '\0'; c++) {
				const chaos_case *cc = NULL;
				for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++)
					if (CASES[i].id == *c)
						cc = &CASES[i];
				ck_assert_msg(cc != NULL, "PMOVE_CHAOS_CASES: no case '%c' (a-f)",
				              *c);
				run_case(cc);
			}
		}
	cur = &P;
	gsi_holds_moves();
	tl_items_free(items);
	items = NULL;
	shoal_client_free(client);
	client = NULL;
	tl_cluster_down(&C);
}
END_TEST

static Suite *pmove_chaos_suite(void)
{
	Suite *s = suite_create("pmove_chaos");
	TCase *tc = tcase_create("faults");
	tcase_set_timeout(tc, 3600);
	tcase_add_test(tc, test_pmove_chaos);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(pmove_chaos_suite)
