/*
 * it_member -- issue 14's node side on a real cluster (shoal-node and
 * shoal-router processes started by deploy/cluster.sh, 127.0.0.1):
 *  - a fourth shoal-node started with --join (its [node.4] section appended
 *    to the cluster file, as `cluster.sh add-node` does) never bootstraps:
 *    it learns the cluster map from the file's other nodes (map_get over
 *    the wire) and hosts nothing until the map gives it a replica;
 *  - node 3, killed and restarted with an empty data directory, does not
 *    bootstrap either: the others say the cluster exists, it takes their
 *    map, opens none of the groups it is a voter of (it would vote with no
 *    memory) and reports them "lost" in node_status; group 0's executor
 *    (node/elastic.c) then removes those replicas from Raft and the map and
 *    re-creates them -- a standby caught up, then a voter -- so that in the
 *    end node 3 is a caught-up voter of every group again, from new
 *    directories, without ever bootstrapping, and every item written before
 *    is still read through the router.
 * (The single replica moves -- ADD, PROMOTE, TRANSFER, REMOVE -- are also
 * driven in tests/unit/test_member.c, where the test plays the executor's
 * map changes; tests/integration/it_elastic.c runs whole plans.)
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/cluster.h"
#include "common/errors.h"
#include "common/tls.h"
#include "proto/cluster.pb-c.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

static tl_cluster C;
static sh_tls tls; /* the routers' certificate, when the cluster has [tls] */
static bool tls_on;
static pid_t pid4; /* the --join node, started by the test itself */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends req to the node at url; the answer (free it), or NULL if none. */
static Shoal__NodeResponse *ask(const char *url, const Shoal__NodeRequest *req)
{
	nng_socket s;
	if (nng_req0_open(&s) != 0)
		return NULL;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 5000);
	Shoal__NodeResponse *r = NULL;
	size_t len = shoal__node_request__get_packed_size(req);
	uint8_t *buf = malloc(len + 1);
	shoal__node_request__pack(req, buf);
	void *rb;
	size_t rl;
	char lurl[SH_ADDR_MAX + 8];
	if (sh_tls_url(tls_on, url, lurl, sizeof(lurl)) &&
	    sh_tls_dial(s, lurl, tls_on ? tls.client : NULL, 0) == 0 &&
	    nng_send(s, buf, len, 0) == 0 && nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC) == 0) {
		r = shoal__node_response__unpack(NULL, rl, rb);
		nng_free(rb, rl);
	}
	free(buf);
	nng_close(s);
	return r;
}

static Shoal__NodeResponse *node_status(const char *url)
{
	Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
	req.node_status = true;
	return ask(url, &req);
}

static int count_items(void)
{
	char *out = NULL;
	int rc = tl_shoal(&C, &out, NULL, "scan --table-name members --select COUNT");
	int n = -1;
	const char *p = out != NULL ? strstr(out, "\"Count\"") : NULL;
	if (rc == 0 && p != NULL)
		sscanf(p, "\"Count\": %d", &n);
	free(out);
	return n;
}

START_TEST(test_join_and_empty_dir)
{
	ck_assert_msg(tl_cluster_up(&C, 3, 1, 3), "the cluster did not start");
	char *err = NULL;
	int rc = tl_shoal(&C, NULL, &err,
	                  "create-table --table-name members --attribute-definitions "
	                  "AttributeName=id,AttributeType=S --key-schema "
	                  "AttributeName=id,KeyType=HASH --billing-mode PAY_PER_REQUEST");
	ck_assert_msg(rc == 0, "create-table: %s", err ? err : "");
	free(err);
	for (int k = 0; k < 30; k++) {
		rc = tl_shoal(&C, NULL, NULL,
		              "put-item --table-name members --item '{\"id\":{\"S\":\"m%d\"}}'", k);
		ck_assert_int_eq(rc, 0);
	}
	ck_assert_int_eq(count_items(), 30);

	/* --join: node 4's section appended to the file, the node started. */
	char ini[1400], line[1400], msg[SH_ERRMSG_SIZE];
	snprintf(ini, sizeof(ini), "%s/cluster.ini", C.dir);
	int port = tl_free_ports(10);
	FILE *f = fopen(ini, "a");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "\n[node.4]\nraft = 127.0.0.1:%d\nrpc = tcp://127.0.0.1:%d\n", port, port + 8);
	fclose(f);
	static sh_cluster_conf conf;
	ck_assert_msg(sh_cluster_load(ini, &conf, msg) == SHOAL_OK, "%s", msg);
	if (conf.tls_dir[0] != '\0') { /* its certificate, from the cluster's CA */
		ck_assert_int_eq(tl_sh("'%s/deploy/certs.sh' --dir '%s' --config '%s' >/dev/null",
		                       C.root, conf.tls_dir, ini),
		                 0);
		ck_assert_int_eq(sh_tls_load(&tls, conf.tls_dir, "router", NULL, msg), SHOAL_OK);
		tls_on = true;
	}
	ck_assert_int_eq(tl_sh("'%s/shoal-node' --config '%s' --id 4 --dir '%s/node-4' --join "
	                       ">>'%s/node-4.log' 2>&1 </dev/null & echo $! >'%s/join-4.pid'",
	                       C.bin, ini, C.dir, C.dir, C.dir),
	                 0);
	snprintf(line, sizeof(line), "%s/join-4.pid", C.dir);
	char *pidtext = tl_read_file(line);
	ck_assert_ptr_nonnull(pidtext);
	pid4 = (pid_t)atoi(pidtext);
	free(pidtext);
	ck_assert_int_gt(pid4, 0);
	const char *url4 = sh_cluster_node(&conf, 4)->rpc;
	int64_t deadline = now_ms() + 30000;
	uint64_t epoch = 0;
	bool born = true;
	while (now_ms() < deadline && epoch == 0) {
		Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
		req.map_get = true;
		Shoal__NodeResponse *r = ask(url4, &req);
		if (r != NULL && r->response != NULL && r->response->status == 0) {
			epoch = r->epoch;
			born = r->map_born;
		}
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
		if (epoch == 0)
			usleep(50000);
	}
	ck_assert_msg(epoch >= 1, "node 4 did not learn the cluster map");
	ck_assert(!born);
	Shoal__NodeResponse *st = node_status(url4);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(st->response->status, 0);
	ck_assert_uint_eq(st->n_groups, 0); /* the map gave it nothing (yet) */
	shoal__node_response__free_unpacked(st, NULL);
	struct stat sb;
	snprintf(line, sizeof(line), "%s/node-4/group-0", C.dir);
	ck_assert_int_ne(stat(line, &sb), 0);
	snprintf(line, sizeof(line), "%s/node-4/cluster.map", C.dir);
	ck_assert_int_eq(stat(line, &sb), 0); /* the learnt map, saved */
	ck_assert_int_gt(tl_cluster_log_count(&C, 4, "the cluster exists (--join)"), 0);
	ck_assert_int_eq(tl_cluster_log_count(&C, 4, "bootstrapped"), 0);
	kill(pid4, SIGTERM);
	deadline = now_ms() + 20000;
	while (now_ms() < deadline && kill(pid4, 0) == 0)
		usleep(20000);
	ck_assert_int_ne(kill(pid4, 0), 0);
	pid4 = 0;

	/* Node 3's disk is replaced. */
	int boots = tl_cluster_log_count(&C, 3, "bootstrapped");
	ck_assert(tl_cluster_stop_node(&C, 3, true));
	ck_assert_int_eq(tl_sh("rm -rf '%s/node-3'", C.dir), 0);
	ck_assert(tl_cluster_start_node(&C, 3));
	const char *url3 = sh_cluster_node(&conf, 3)->rpc;
	deadline = now_ms() + 30000;
	uint32_t lost = 0;
	while (now_ms() < deadline && lost < conf.groups) {
		lost = 0;
		Shoal__NodeResponse *r = node_status(url3);
		for (size_t i = 0; r != NULL && i < r->n_groups; i++)
			lost += strcmp(r->groups[i]->role, "lost") == 0;
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
		if (lost < conf.groups)
			usleep(50000);
	}
	ck_assert_msg(lost == conf.groups, "node 3 reports %u of %u groups lost", lost,
	              conf.groups);
	ck_assert_int_eq(tl_cluster_log_count(&C, 3, "bootstrapped"), boots); /* none since */
	for (uint32_t g = 0; g < conf.groups; g++) {
		snprintf(line, sizeof(line), "%s/node-3/group-%u", C.dir, g);
		ck_assert_int_ne(stat(line, &sb), 0);
	}
	/* Group 0's executor (node/elastic.c) takes the lost replicas out of
	 * Raft and the map, and the planner re-creates them -- on node 3, the
	 * only node not in those groups any more -- as new replicas, caught up
	 * (a standby) before they vote: in the end every group's leader has
	 * node 3 as a voter again, with 3 members, and node 3 serves every
	 * group from a new directory. */
	uint32_t back = 0;
	deadline = now_ms() + 180000;
	while (now_ms() < deadline && back < conf.groups) {
		uint64_t groups_back = 0; /* by group: a leader lists node 3 caught up */
		back = 0;
		for (int id = 1; id <= 3; id++) {
			Shoal__NodeResponse *r =
			    node_status(sh_cluster_node(&conf, (uint32_t)id)->rpc);
			for (size_t i = 0; r != NULL && i < r->n_groups; i++) {
				const Shoal__GroupStatus *gs = r->groups[i];
				if (strcmp(gs->role, "leader") != 0 || gs->n_members != 3)
					continue;
				bool voter3 = false;
				for (size_t j = 0; j < gs->n_members; j++)
					voter3 =
					    voter3 ||
					    (gs->members[j]->node == 3 &&
					     strcmp(gs->members[j]->role, "voter") == 0 &&
					     gs->members[j]->match_index + 64 >= gs->last_index);
				if (voter3 && gs->group < 64)
					groups_back |= 1ull << gs->group;
			}
			if (r != NULL)
				shoal__node_response__free_unpacked(r, NULL);
		}
		back = (uint32_t)__builtin_popcountll(groups_back);
		/* ... and node 3 serves each of them from a new directory. */
		for (uint32_t g = 0; g < conf.groups && back == conf.groups; g++) {
			snprintf(line, sizeof(line), "%s/node-3/group-%u", C.dir, g);
			if (stat(line, &sb) != 0)
				back--;
		}
		if (back < conf.groups)
			usleep(100000);
	}
	ck_assert_msg(back == conf.groups, "node 3 is back as a caught-up voter in %u of %u groups",
	              back, conf.groups);
	ck_assert_int_eq(tl_cluster_log_count(&C, 3, "bootstrapped"), boots); /* never */
	for (uint32_t g = 0; g < conf.groups; g++) {
		snprintf(line, sizeof(line), "%s/node-3/group-%u", C.dir, g);
		ck_assert_int_eq(stat(line, &sb), 0); /* re-created */
	}
	ck_assert_int_gt(tl_cluster_log_count(&C, 1, "lost its replica's data") +
	                     tl_cluster_log_count(&C, 2, "lost its replica's data") +
	                     tl_cluster_log_count(&C, 3, "lost its replica's data"),
	                 0);
	ck_assert_int_eq(count_items(), 30);
	if (tls_on)
		sh_tls_free(&tls);
}
END_TEST

static void teardown(void)
{
	if (pid4 > 0 && kill(pid4, 0) == 0)
		kill(pid4, SIGKILL); /* by its pid only */
	tl_cluster_down(&C);         /* also when the test failed */
}

static Suite *member_suite(void)
{
	Suite *s = suite_create("member");
	TCase *tc = tcase_create("cluster");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_join_and_empty_dir);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(member_suite)
