/*
 * it_netns -- a cluster on a real network: every shoal-node and shoal-router
 * in its own network namespace (cluster.sh up --netns), faults made by the
 * kernel (deploy/netns.sh: nftables on the bridge), the test process and its
 * client in the root namespace, reaching the router over the bridge.
 *  - the fault primitives, checked with real traffic between namespaces (TCP
 *    connects, UDP datagrams for the one-way cut);
 *  - the leader of the data group is isolated from its followers while the
 *    router still reaches it: a new leader is elected among the others and
 *    writes through the router succeed again; a write sent while the old
 *    leader still believes it leads either fails or is visible afterwards;
 *    after healing, no acknowledged write is lost and every replica has
 *    applied the same index.
 * Without root, iproute2 or nftables the test prints a SKIP line and passes:
 * it never fakes a partition.  Times are printed, not asserted.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_netns.h"

#define GROUP    1 /* with groups = 2, every item lives in group 1 */
#define MAX_KEYS 256

static tl_cluster C;
static char prefix[16]; /* namespaces prefix-n<i>, prefix-r<r> */
static shoal_client *client;
static bool skipped;
static char skip_why[512];

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits without polling anything: only between polls of a condition. */
static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* The cluster is made and removed by the parent process (an unchecked
 * fixture): Check's forked test child leaves through _exit when an assertion
 * fails, and then kills its process group, so only the parent can be
 * trusted to remove the namespaces.  The client lives in the child. */
static void setup(void)
{
	/* Check's child leaves through _exit on a failure: print as we go. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	skipped = !tl_netns_available(skip_why, sizeof(skip_why));
	if (skipped)
		return;
	snprintf(prefix, sizeof(prefix), "sn%d", (int)(getpid() % 100000));
	if (!tl_netns_up(&C, prefix, 3, 1, 2)) {
		/* up removed what it made; the tests fail on C.endpoint. */
		fprintf(stderr, "it_netns: the namespaced cluster did not start\n");
		C.endpoint[0] = '\0';
	}
}

static void teardown(void)
{
	if (skipped)
		return;
	tl_netns_heal_all(&C);
	tl_cluster_down(&C);
}

static void client_new(void)
{
	ck_assert_msg(C.endpoint[0] != '\0', "no cluster");
	shoal_options o;
	shoal_options_init(&o);
	o.attempt_timeout_ms = 8000;
	o.deadline_ms = 8000;
	o.retries = 0;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, &o, &client, msg) == SHOAL_OK, "%s", msg);
}

static int call(const char *op, const char *body, char **out)
{
	shoal_error err;
	char *o = NULL;
	int rc = shoal_call_json(client, op, body, &o, &err);
	if (rc != SHOAL_OK && strcmp(op, "GetItem") != 0)
		printf("%s: %s: %s\n", op, err.exception, err.message);
	if (out != NULL)
		*out = o;
	else
		shoal_free(o);
	return rc;
}

static int put(const char *key, int v)
{
	char body[256];
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"netns\",\"Item\":{\"id\":{\"S\":\"%s\"},\"v\":{\"N\":\"%d\"}}}",
	         key, v);
	return call("PutItem", body, NULL);
}

/* The value of key (ConsistentRead), -1 if absent, -2 on error. */
static int get(const char *key)
{
	char body[256], *out = NULL;
	snprintf(
	    body, sizeof(body),
	    "{\"TableName\":\"netns\",\"Key\":{\"id\":{\"S\":\"%s\"}},\"ConsistentRead\":true}",
	    key);
	if (call("GetItem", body, &out) != SHOAL_OK)
		return -2;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	int v = -1;
	json_t *attr = json_object_get(json_object_get(j, "Item"), "v");
	const char *n = json_string_value(json_object_get(attr, "N"));
	if (n != NULL)
		v = atoi(n);
	json_decref(j);
	return v;
}

/* Group GROUP as the cluster reports it: the node each replica names as
 * leader (or that says it leads), and each replica's applied index. */
typedef struct {
	int leader_role[4]; /* leader_role[n]: node n says it is the leader */
	long applied[4];
	bool reachable[4];
} group_view;

static bool view(group_view *g)
{
	memset(g, 0, sizeof(*g));
	char *out = NULL;
	int rc = tl_shoal(&C, &out, NULL, "status --output json");
	json_t *j = rc == 0 && out != NULL ? json_loads(out, 0, NULL) : NULL;
	free(out);
	if (j == NULL)
		return false;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(j, "Groups"), i, e)
	{
		if (json_integer_value(json_object_get(e, "Group")) != GROUP)
			continue;
		int n = (int)json_integer_value(json_object_get(e, "Node"));
		if (n < 1 || n > 3)
			continue;
		const char *role = json_string_value(json_object_get(e, "Role"));
		g->leader_role[n] = role != NULL && strcmp(role, "leader") == 0;
		g->reachable[n] = role != NULL && strcmp(role, "unreachable") != 0;
		g->applied[n] = (long)json_integer_value(json_object_get(e, "AppliedIndex"));
	}
	json_decref(j);
	return true;
}

/* The one node that says it leads GROUP apart from `not` (0: any), or 0. */
static int leader_except(int not )
{
	group_view g;
	if (!view(&g))
		return 0;
	for (int n = 1; n <= 3; n++)
		if (n != not &&g.leader_role[n])
			return n;
	return 0;
}

START_TEST(test_primitives)
{
	if (skipped) {
		printf("SKIP it_netns: %s\n", skip_why);
		return;
	}
	ck_assert_msg(C.endpoint[0] != '\0', "no cluster");
	/* Node 2's rpc port (base + 200 + 80) answers when packets flow. */
	int p2 = C.base_port + 280, p1 = C.base_port + 180, p3 = C.base_port + 380;
	ck_assert_int_eq(tl_netns_probe(&C, "1", "2", p2), 1);
	ck_assert(tl_netns_cut(&C, "1", "2"));
	ck_assert_int_eq(tl_netns_probe(&C, "1", "2", p2), 0);
	ck_assert_int_eq(tl_netns_probe(&C, "2", "1", p1), 0);
	ck_assert_int_eq(tl_netns_probe(&C, "1", "3", p3), 1);
	ck_assert(tl_netns_heal(&C, "1", "2"));
	ck_assert_int_eq(tl_netns_probe(&C, "1", "2", p2), 1);

	ck_assert(tl_netns_oneway(&C, "1", "2"));
	ck_assert_int_eq(tl_netns_probe_udp(&C, "1", "2", 9999), 0);
	ck_assert_int_eq(tl_netns_probe_udp(&C, "2", "1", 9999), 1);
	ck_assert(tl_netns_heal_all(&C));
	ck_assert_int_eq(tl_netns_probe_udp(&C, "1", "2", 9999), 1);

	ck_assert(tl_netns_isolate(&C, "3"));
	ck_assert_int_eq(tl_netns_probe(&C, "3", "1", p1), 0);
	ck_assert_int_eq(tl_netns_probe(&C, "2", "3", p3), 0);
	ck_assert_int_eq(tl_netns_probe(&C, "r1", "3", p3), 1);
	ck_assert_int_eq(tl_netns_probe(&C, "host", "3", p3), 1);
	ck_assert(tl_netns_heal_all(&C));
	ck_assert_int_eq(tl_netns_probe(&C, "3", "1", p1), 1);

	ck_assert(tl_netns_loss(&C, "3", 100));
	ck_assert_int_eq(tl_netns_probe(&C, "r1", "3", p3), 0);
	ck_assert(tl_netns_loss(&C, "3", 0));
	ck_assert_int_eq(tl_netns_probe(&C, "r1", "3", p3), 1);

	int rc = tl_netns_netem(&C, "3", "delay 20ms");
	if (rc == 3)
		printf("netem: this kernel has no netem qdisc; delay/reorder not checked\n");
	else
		ck_assert_int_eq(rc, 0);
	ck_assert(tl_netns_heal_all(&C));
}
END_TEST

START_TEST(test_isolated_leader)
{
	if (skipped) {
		printf("SKIP it_netns: %s\n", skip_why);
		return;
	}
	client_new();
	ck_assert_int_eq(
	    call("CreateTable",
	         "{\"TableName\":\"netns\",\"AttributeDefinitions\":[{\"AttributeName\":"
	         "\"id\",\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":"
	         "\"id\",\"KeyType\":\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}",
	         NULL),
	    SHOAL_OK);
	/* acked[i]: key k<i> was acknowledged with value i; tried[i]: sent. */
	static bool acked[MAX_KEYS], tried[MAX_KEYS];
	int next = 0;
	char key[32];
	for (; next < 10; next++) {
		snprintf(key, sizeof(key), "k%d", next);
		tried[next] = true;
		ck_assert_int_eq(put(key, next), SHOAL_OK);
		acked[next] = true;
	}
	ck_assert_int_eq(get("k3"), 3);

	int old = 0;
	int64_t deadline = now_ms() + 20000;
	while ((old = leader_except(0)) == 0 && now_ms() < deadline)
		pause_ms(100);
	ck_assert_msg(old != 0, "group %d has no leader", GROUP);
	char olds[8];
	snprintf(olds, sizeof(olds), "%d", old);
	printf("group %d: leader node %d; isolating it from its followers\n", GROUP, old);

	int64_t t0 = now_ms();
	ck_assert(tl_netns_isolate(&C, olds));
	ck_assert_int_eq(tl_netns_probe(&C, "r1", olds, C.base_port + 100 * old + 80), 1);
	group_view g;
	if (view(&g))
		printf("just after isolating: node %d says %s\n", old,
		       g.leader_role[old] ? "it is the leader" : "it is not the leader");

	/* While the old leader may still believe it leads: a write through the
	 * router.  It must fail or be visible after the heal. */
	snprintf(key, sizeof(key), "k%d", next);
	tried[next] = true;
	int rc = put(key, next);
	acked[next] = rc == SHOAL_OK;
	printf("write during the partition, %lld ms after isolating: %s\n",
	       (long long)(now_ms() - t0), rc == SHOAL_OK ? "acknowledged" : shoal_strerror(rc));
	next++;

	int fresh = 0;
	deadline = now_ms() + 30000;
	while ((fresh = leader_except(old)) == 0 && now_ms() < deadline)
		pause_ms(100);
	ck_assert_msg(fresh != 0, "no new leader among the followers of node %d within 30 s", old);
	printf("new leader: node %d, %lld ms after isolating node %d\n", fresh,
	       (long long)(now_ms() - t0), old);

	/* Writes through the router succeed again. */
	int64_t first_ok = -1;
	deadline = now_ms() + 30000;
	while (next < MAX_KEYS - 20 && now_ms() < deadline) {
		snprintf(key, sizeof(key), "k%d", next);
		tried[next] = true;
		acked[next] = put(key, next) == SHOAL_OK;
		if (acked[next] && first_ok < 0)
			first_ok = now_ms();
		next++;
		if (first_ok >= 0)
			break;
	}
	ck_assert_msg(first_ok >= 0, "no write through the router succeeded within 30 s");
	printf("writes through the router succeed again %lld ms after isolating\n",
	       (long long)(first_ok - t0));
	for (int i = 0; i < 10; i++, next++) {
		snprintf(key, sizeof(key), "k%d", next);
		tried[next] = true;
		acked[next] = put(key, next) == SHOAL_OK;
	}
	/* The old leader steps down when it has not heard from a majority. */
	bool believes = true;
	deadline = now_ms() + 30000;
	while ((believes = !view(&g) || g.leader_role[old]) && now_ms() < deadline)
		pause_ms(100);
	printf("the isolated node %d %s\n", old,
	       believes ? "still says it leads after 30 s" : "no longer says it leads");
	if (!believes)
		printf("  (seen %lld ms after isolating)\n", (long long)(now_ms() - t0));

	int64_t t1 = now_ms();
	ck_assert(tl_netns_heal_all(&C));
	/* Every replica converges: one leader, the same applied index. */
	bool same = false;
	deadline = now_ms() + 30000;
	while (!same && now_ms() < deadline) {
		if (view(&g) && g.reachable[1] && g.reachable[2] && g.reachable[3]) {
			int leaders = g.leader_role[1] + g.leader_role[2] + g.leader_role[3];
			same = leaders == 1 && g.applied[1] == g.applied[2] &&
			       g.applied[2] == g.applied[3];
		}
		if (!same)
			pause_ms(100);
	}
	ck_assert_msg(same,
	              "replicas of group %d did not converge within 30 s: applied %ld %ld %ld",
	              GROUP, g.applied[1], g.applied[2], g.applied[3]);
	printf("after healing: replicas converged at applied index %ld in %lld ms\n", g.applied[1],
	       (long long)(now_ms() - t1));

	/* Nothing acknowledged is lost; an unacknowledged write may be there
	 * or not, with its own value if it is. */
	int acked_n = 0, failed_present = 0;
	for (int i = 0; i < next; i++) {
		if (!tried[i])
			continue;
		snprintf(key, sizeof(key), "k%d", i);
		int v = get(key);
		if (acked[i]) {
			acked_n++;
			ck_assert_msg(v == i, "acknowledged write %s: read %d", key, v);
		} else {
			ck_assert_msg(v == i || v == -1, "failed write %s: read %d", key, v);
			failed_present += v == i;
		}
	}
	printf("%d acknowledged writes all readable; %d of %d failed writes visible\n", acked_n,
	       failed_present, next - acked_n);
	shoal_client_free(client);
	client = NULL;
}
END_TEST

int main(void)
{
	tl_fail_hook = tl_fail_check;
	Suite *s = suite_create("netns");
	TCase *tc = tcase_create("core");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_primitives);
	tcase_add_test(tc, test_isolated_leader);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* Nothing of the network stays behind. */
	if (!skipped && tl_sh("ip netns list | grep -E '^%s-' ; ip -o link show | grep -E ': %s-'",
	                      prefix, prefix) == 0) {
		printf("it_netns: namespaces or links %s-* left behind (listed above)\n", prefix);
		failed++;
	}
	return failed == 0 ? 0 : 1;
}
