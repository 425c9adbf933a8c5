/* Issue 14's replica moves on the node side, in-process: real shoal-nodes
 * (node/node.c) on their own loop threads, real Raft over 127.0.0.1 and real
 * nng requests.  The test plays group 0's executor (node/elastic.c): it
 * changes the cluster map (offered to every node, as their refreshers
 * would after a MapSet) and sends member_change to the group's leader.
 *
 *  - test_move: node 4 starts with --join, learns the map, opens group 1
 *    empty when the map lists it, is added as a standby (a second change
 *    sent together is refused, retryable), receives the data, is promoted,
 *    takes the leadership (TRANSFER); node 3 is removed, closes the group
 *    and deletes its directory; every item written before and during is
 *    readable from the new leader and from node 4's replica.
 *  - test_empty_dir: a node restarted with an empty directory in a running
 *    cluster does not bootstrap: it learns the map from its peers, opens
 *    none of the groups it is a voter of (reports them "lost"), and the
 *    leaders' Raft configurations are unchanged. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/alloc.h"
#include "common/placement.h"
#include "node/node.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "tests/lib/testlib.h"

#define NN     4 /* nodes 1-3 at birth, node 4 joins */
#define GROUPS 2
#define SEC    1000000000ull
#define ITEMS  150

typedef struct tnode {
	node *n;
	pthread_t thread;
	char dir[4200];
	char rpc[64];
} tnode;

static sh_cluster_conf conf3, conf4; /* the birth file; the file after add-node */
static tnode T[NN + 1];
static sh_arena A;

static void *run_node(void *arg)
{
	node_run(arg);
	return NULL;
}

static void start_node(int id, bool join)
{
	char msg[SH_ERRMSG_SIZE] = "";
	node_options o = {.conf = id == 4 ? &conf4 : &conf3,
	                  .id = (uint32_t)id,
	                  .dir = T[id].dir,
	                  .workers = 8,
	                  .join = join};
	ck_assert_msg(node_open(&o, &T[id].n, msg) == SHOAL_OK, "node_open: %s", msg);
	ck_assert_int_eq(pthread_create(&T[id].thread, NULL, run_node, T[id].n), 0);
}

static void stop_node(int id)
{
	node_stop(T[id].n);
	pthread_join(T[id].thread, NULL);
	node_close(T[id].n);
	T[id].n = NULL;
}

static void load(const char *root, const char *text, sh_cluster_conf *c)
{
	char path[4200], msg[SH_ERRMSG_SIZE];
	snprintf(path, sizeof(path), "%s/cluster-%p.ini", root, (void *)c);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_msg(sh_cluster_load(path, c, msg) == SHOAL_OK, "%s", msg);
}

static void cluster_start(void)
{
	/* The test plays the executor: the nodes' own (node/elastic.c, on
	 * group 0's leader) never gets past gathering its first round's
	 * statuses (a test hook), so it repairs nothing behind the test's back
	 * -- it would take the "lost" replica of test_empty_dir out of Raft. */
	setenv("SHOAL_ELASTIC_TEST_GATHER_MS", "3600000", 1);
	int base = tl_free_ports(80);
	const char *root = tl_tmpdir("member");
	char text[4096];
	int len = snprintf(text, sizeof(text),
	                   "[cluster]\ngroups = %d\nreplication = 3\npartition_rcu = 1000000000\n"
	                   "partition_wcu = 1000000000\nsnapshot_entries = 64\n",
	                   GROUPS);
	for (int i = 1; i <= NN; i++) {
		snprintf(T[i].dir, sizeof(T[i].dir), "%s/node%d", root, i);
		snprintf(T[i].rpc, sizeof(T[i].rpc), "tcp://127.0.0.1:%d", base + 60 + i);
		if (i == 4)
			load(root, text, &conf3);
		len += snprintf(text + len, sizeof(text) - (size_t)len,
		                "[node.%d]\nraft = 127.0.0.1:%d\nrpc = %s\n", i, base + 10 * i,
		                T[i].rpc);
	}
	load(root, text, &conf4);
	node_log_set_level(NODE_LOG_WARN);
	for (int i = 1; i <= 3; i++)
		start_node(i, false);
}

static void cluster_stop(void)
{
	for (int i = 1; i <= NN; i++)
		if (T[i].n != NULL)
			stop_node(i);
}

/* ------------------------------------------------------------------------ */
/* Client side                                                               */
/* ------------------------------------------------------------------------ */

static Shoal__NodeResponse *rpc_raw(int id, const void *buf, size_t len)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000), 0);
	ck_assert_int_eq(nng_dial(s, T[id].rpc, NULL, 0), 0);
	ck_assert_int_eq(nng_send(s, (void *)buf, len, 0), 0);
	void *rb;
	size_t rl;
	int rv = nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC);
	ck_assert_msg(rv == 0, "recv from node %d: %s", id, nng_strerror(rv));
	Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, rl, rb);
	ck_assert_ptr_nonnull(r);
	nng_free(rb, rl);
	nng_close(s);
	return r;
}

static Shoal__NodeResponse *rpc(int id, const Shoal__NodeRequest *nr)
{
	size_t len = shoal__node_request__get_packed_size(nr);
	uint8_t *buf = malloc(len + 1);
	shoal__node_request__pack(nr, buf);
	Shoal__NodeResponse *r = rpc_raw(id, buf, len);
	free(buf);
	return r;
}

#define FREE(r) shoal__node_response__free_unpacked((r), NULL)

static int status_of(const Shoal__NodeResponse *r)
{
	return r->response != NULL ? (int)r->response->status : -1;
}

static const char *message_of(const Shoal__NodeResponse *r)
{
	return r->response != NULL && r->response->message != NULL ? r->response->message : "";
}

static Shoal__Item *item_pb(const char *text)
{
	st_value v;
	Shoal__Item *pb;
	ck_assert_int_eq(wire_item_from_text(&A, text, strlen(text), &v, NULL), SHOAL_OK);
	ck_assert_int_eq(wire_item_to_pb(&A, &v, &pb, NULL), SHOAL_OK);
	return pb;
}

static Shoal__NodeResponse *define(int id, uint32_t group, const char *table, uint32_t table_id)
{
	Shoal__CreateTableRequest ct = SHOAL__CREATE_TABLE_REQUEST__INIT;
	WIRE_SET(&ct, table_name, (char *)table);
	Shoal__AttributeDefinition ad = SHOAL__ATTRIBUTE_DEFINITION__INIT;
	Shoal__AttributeDefinition *ads[] = {&ad};
	Shoal__KeySchemaElement ks = SHOAL__KEY_SCHEMA_ELEMENT__INIT;
	Shoal__KeySchemaElement *kss[] = {&ks};
	ad.attribute_name = (char *)"pk";
	ad.attribute_type = (char *)"S";
	ks.attribute_name = (char *)"pk";
	ks.key_type = (char *)"HASH";
	ct.n_attribute_definitions = 1;
	ct.attribute_definitions = ads;
	ct.n_key_schema = 1;
	ct.key_schema = kss;
	Shoal__TableDefine d = SHOAL__TABLE_DEFINE__INIT;
	d.def = &ct;
	d.table_id = table_id;
	d.created_ms = 1700000000000;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = group;
	nr.define_table = &d;
	return rpc(id, &nr);
}

static Shoal__NodeResponse *put(int id, uint32_t group, const char *item)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__PutItemRequest p = SHOAL__PUT_ITEM_REQUEST__INIT;
	WIRE_SET(&p, table_name, (char *)"tbl");
	p.item = item_pb(item);
	req.request_id = 1;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	req.put_item = &p;
	nr.group = group;
	nr.request = &req;
	return rpc(id, &nr);
}

static Shoal__NodeResponse *get(int id, uint32_t group, const char *key, bool any_replica)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__GetItemRequest g = SHOAL__GET_ITEM_REQUEST__INIT;
	WIRE_SET(&g, table_name, (char *)"tbl");
	g.key = item_pb(key);
	g.consistent_read = !any_replica;
	req.request_id = 2;
	req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	req.get_item = &g;
	nr.group = group;
	nr.request = &req;
	nr.any_replica = any_replica;
	return rpc(id, &nr);
}

/* Whether a GetItem answer carries an item whose v is `want`. */
static bool has_v(const Shoal__NodeResponse *r, int want)
{
	if (status_of(r) != SHOAL_OK || r->response->get_item == NULL ||
	    r->response->get_item->item == NULL)
		return false;
	const Shoal__Item *it = r->response->get_item->item;
	char w[32];
	snprintf(w, sizeof(w), "%d", want);
	for (size_t i = 0; i < it->n_attrs; i++)
		if (it->attrs[i]->name.len == 1 && it->attrs[i]->name.data[0] == 'v')
			return it->attrs[i]->value->s.len == strlen(w) &&
			       memcmp(it->attrs[i]->value->s.data, w, strlen(w)) == 0;
	return false;
}

/* The node every running node agrees leads group g, polling up to 30 s. */
static int wait_leader(uint32_t g)
{
	uint64_t deadline = node_now_ns() + 30 * SEC;
	while (node_now_ns() < deadline) {
		int leader = 0;
		for (int i = 1; i <= NN; i++) {
			node_group *grp = T[i].n != NULL ? node_group_get(T[i].n, g) : NULL;
			node_group_status st;
			if (grp == NULL)
				continue;
			node_group_status_get(grp, &st);
			if (st.role == RAFT_LEADER)
				leader = i;
		}
		if (leader > 0)
			return leader;
		usleep(10000);
	}
	ck_abort_msg("no leader for group %u", g);
	return -1;
}

/* Writes item k (v = k) to group 1, following NOT_LEADER hints. */
static void write_item(int k)
{
	char text[128];
	snprintf(text, sizeof(text), "{\"pk\":{\"S\":\"k%d\"},\"v\":{\"S\":\"%d\"}}", k, k);
	uint64_t deadline = node_now_ns() + 30 * SEC;
	int to = wait_leader(1);
	while (node_now_ns() < deadline) {
		Shoal__NodeResponse *r = put(to, 1, text);
		int st = status_of(r);
		uint32_t hint = r->leader_node;
		FREE(r);
		if (st == SHOAL_OK)
			return;
		ck_assert_msg(st == SHOAL_E_NOT_LEADER || st == SHOAL_E_UNAVAILABLE,
		              "put k%d: status %d", k, st);
		to = hint != 0 && T[hint].n != NULL ? (int)hint : wait_leader(1);
		usleep(20000);
	}
	ck_abort_msg("put k%d never succeeded", k);
}

static Shoal__NodeRequest member_req(uint32_t group, int action, uint32_t who,
                                     Shoal__MemberChange *mc, char *address)
{
	shoal__member_change__init(mc);
	mc->action = (Shoal__MemberChange__Action)action;
	mc->node = who;
	mc->address = address;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = group;
	nr.member_change = mc;
	return nr;
}

/* A file node's Raft address for group g, as the map makes it. */
static void raft_address(const sh_node_conf *nc, uint32_t g, char *out)
{
	sh_map_node mn = {.id = nc->id, .raft_port = nc->raft_port};
	memcpy(mn.raft_host, nc->raft_host, sizeof(mn.raft_host));
	sh_map_raft_address(&mn, g, out);
}

/* member_change on group 1's leader, following NOT_LEADER; the status. */
static int member(int action, uint32_t who, char *msg_out, size_t msg_len)
{
	char address[SH_ADDR_MAX] = "";
	const sh_node_conf *nc = sh_cluster_node(&conf4, who);
	raft_address(nc, 1, address);
	uint64_t deadline = node_now_ns() + 60 * SEC;
	int to = wait_leader(1), st = -1;
	while (node_now_ns() < deadline) {
		Shoal__MemberChange mc;
		Shoal__NodeRequest nr = member_req(1, action, who, &mc, address);
		Shoal__NodeResponse *r = rpc(to, &nr);
		st = status_of(r);
		uint32_t hint = r->leader_node;
		if (msg_out != NULL)
			snprintf(msg_out, msg_len, "%s", message_of(r));
		FREE(r);
		if (st != SHOAL_E_NOT_LEADER)
			return st;
		to = hint != 0 && T[hint].n != NULL ? (int)hint : wait_leader(1);
	}
	return st;
}

/* node_status of node id: the GroupStatus of group g (NULL if not
 * reported); *r keeps the answer (free it). */
static const Shoal__GroupStatus *node_status(int id, uint32_t g, Shoal__NodeResponse **r)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.node_status = true;
	nr.group = 99; /* node-level: not looked at */
	*r = rpc(id, &nr);
	ck_assert_msg(status_of(*r) == SHOAL_OK, "node_status: %s", message_of(*r));
	for (size_t i = 0; i < (*r)->n_groups; i++)
		if ((*r)->groups[i]->group == g)
			return (*r)->groups[i];
	return NULL;
}

/* The role of node `who` in group g's Raft configuration as its leader
 * reports it ("" if absent), and its match index. */
static const char *member_role(uint32_t g, uint32_t who, uint64_t *match, uint64_t *last)
{
	static char role[16];
	Shoal__NodeResponse *r;
	const Shoal__GroupStatus *gs = node_status(wait_leader(g), g, &r);
	role[0] = '\0';
	if (gs != NULL) {
		for (size_t i = 0; i < gs->n_members; i++)
			if (gs->members[i]->node == who) {
				snprintf(role, sizeof(role), "%s", gs->members[i]->role);
				if (match != NULL)
					*match = gs->members[i]->match_index;
			}
		if (last != NULL)
			*last = gs->last_index;
	}
	FREE(r);
	return role;
}

static size_t n_voters(uint32_t g)
{
	Shoal__NodeResponse *r;
	const Shoal__GroupStatus *gs = node_status(wait_leader(g), g, &r);
	size_t n = 0;
	for (size_t i = 0; gs != NULL && i < gs->n_members; i++)
		n += strcmp(gs->members[i]->role, "voter") == 0;
	FREE(r);
	return n;
}

/* Offers map m (as group 0's refreshers would after a MapSet) to every
 * running node. */
static void offer_map(const sh_map *m)
{
	size_t len = sh_map_encoded_size(m);
	uint8_t *buf = malloc(len);
	sh_map_encode(m, buf);
	char msg[SH_ERRMSG_SIZE];
	for (int i = 1; i <= NN; i++)
		if (T[i].n != NULL)
			ck_assert_msg(node_map_offer(T[i].n, buf, len, msg) >= 0, "%s", msg);
	free(buf);
}

static bool dir_exists(int id, uint32_t g)
{
	char path[4300];
	struct stat st;
	snprintf(path, sizeof(path), "%s/group-%u", T[id].dir, g);
	return stat(path, &st) == 0;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_move)
{
	sh_arena_init(&A);
	cluster_start();
	char msg[SH_ERRMSG_SIZE];
	Shoal__NodeResponse *r;

	r = define(wait_leader(1), 1, "tbl", 5);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%s", message_of(r));
	FREE(r);
	for (int k = 0; k < ITEMS; k++)
		write_item(k);

	/* Node 4 joins: it learns the map (the birth map, epoch 1) from the
	 * file's other nodes and hosts nothing yet. */
	start_node(4, true);
	uint64_t deadline = node_now_ns() + 30 * SEC;
	uint64_t epoch = 0;
	while (node_now_ns() < deadline && epoch == 0) {
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.map_get = true;
		r = rpc(4, &nr);
		ck_assert_int_eq(status_of(r), SHOAL_OK);
		epoch = r->epoch;
		ck_assert(!r->map_born); /* an empty directory at start */
		FREE(r);
		if (epoch == 0)
			usleep(20000);
	}
	ck_assert_uint_ge(epoch, 1);
	ck_assert_ptr_null(node_group_get(T[4].n, 1));
	ck_assert(!dir_exists(4, 0) && !dir_exists(4, 1));
	/* map_get with the asker's epoch: the map only when the node's is newer
	 * (a refresh's answer is then a few bytes). */
	for (int k = 0; k < 3; k++) {
		uint64_t known = k == 0 ? epoch : k == 1 ? epoch + 5 : epoch - 1;
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.map_get = true;
		nr.map_known = known;
		r = rpc(4, &nr);
		ck_assert_int_eq(status_of(r), SHOAL_OK);
		ck_assert_uint_eq(r->epoch, epoch);
		if (known == 0 || known < epoch) {
			sh_map got;
			ck_assert_int_eq(sh_map_decode(r->map.data, r->map.len, &got, msg),
			                 SHOAL_OK);
			ck_assert_uint_eq(got.epoch, epoch);
			sh_map_fini(&got);
		} else {
			ck_assert_uint_eq(r->map.len, 0);
		}
		FREE(r);
	}

	/* The executor's first steps: node 4 in the map, then a non-voter of
	 * group 1 replacing node 3's replica.  Node 4 opens the group empty
	 * (no bootstrap) as soon as its map says so. */
	sh_map m;
	ck_assert_int_eq(sh_place_copy(T[1].n->place, &m), SHOAL_OK);
	sh_map_node n4 = {.id = 4, .state = SH_MAP_NODE_ACTIVE};
	const sh_node_conf *c4 = sh_cluster_node(&conf4, 4);
	snprintf(n4.raft_host, sizeof(n4.raft_host), "%s", c4->raft_host);
	n4.raft_port = c4->raft_port;
	snprintf(n4.rpc, sizeof(n4.rpc), "%s", c4->rpc);
	ck_assert_int_eq(sh_map_add_node(&m, &n4, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_add_replica(&m, 1, 4, 3, msg), SHOAL_OK);
	offer_map(&m);
	deadline = node_now_ns() + 30 * SEC;
	while (node_now_ns() < deadline && node_group_get(T[4].n, 1) == NULL)
		usleep(10000);
	ck_assert_ptr_nonnull(node_group_get(T[4].n, 1));
	ck_assert_ptr_null(node_group_get(T[4].n, 0)); /* not placed there */

	/* ADD, with a PROMOTE sent in the same message: raft allows one
	 * configuration change at a time, so the second is refused, cleanly
	 * and retryably, while the first is in flight. */
	char address[SH_ADDR_MAX];
	raft_address(c4, 1, address);
	int lead = wait_leader(1);
	Shoal__MemberChange mc1, mc2;
	Shoal__NodeRequest a1 = member_req(1, SHOAL__MEMBER_CHANGE__ACTION__ADD, 4, &mc1, address);
	Shoal__NodeRequest a2 =
	    member_req(1, SHOAL__MEMBER_CHANGE__ACTION__PROMOTE, 4, &mc2, address);
	ProtobufCBinaryData parts[2];
	const Shoal__NodeRequest *reqs[2] = {&a1, &a2};
	for (int i = 0; i < 2; i++) {
		parts[i].len = shoal__node_request__get_packed_size(reqs[i]);
		parts[i].data = sh_arena_alloc(&A, parts[i].len + 1);
		shoal__node_request__pack(reqs[i], parts[i].data);
	}
	Shoal__NodeRequest batch = SHOAL__NODE_REQUEST__INIT;
	batch.batch = parts;
	batch.n_batch = 2;
	r = rpc(lead, &batch);
	ck_assert_uint_eq(r->n_batch, 2);
	Shoal__NodeResponse *b1 =
	    shoal__node_response__unpack(NULL, r->batch[0].len, r->batch[0].data);
	Shoal__NodeResponse *b2 =
	    shoal__node_response__unpack(NULL, r->batch[1].len, r->batch[1].data);
	FREE(r);
	ck_assert_msg(status_of(b1) == SHOAL_OK, "ADD: %d %s", status_of(b1), message_of(b1));
	ck_assert_msg(status_of(b2) == SHOAL_E_UNAVAILABLE, "second change: %d %s", status_of(b2),
	              message_of(b2));
	ck_assert_msg(strstr(message_of(b2), "in progress") != NULL, "%s", message_of(b2));
	FREE(b1);
	FREE(b2);
	ck_assert_str_eq(member_role(1, 4, NULL, NULL), "standby");
	ck_assert_uint_eq(n_voters(1), 3);
	/* Asking again for what holds answers OK. */
	ck_assert_int_eq(member(SHOAL__MEMBER_CHANGE__ACTION__ADD, 4, NULL, 0), SHOAL_OK);

	/* Writes go on during the move; the standby receives everything (a
	 * snapshot: they are taken every 64 entries, and the log after it). */
	for (int k = ITEMS; k < 2 * ITEMS; k++)
		write_item(k);
	deadline = node_now_ns() + 30 * SEC;
	uint64_t match = 0, last = 1;
	while (node_now_ns() < deadline) {
		ck_assert_str_eq(member_role(1, 4, &match, &last), "standby");
		if (match >= last)
			break;
		usleep(20000);
	}
	ck_assert_msg(match >= last, "standby at %llu of %llu", (unsigned long long)match,
	              (unsigned long long)last);
	for (int k = 0; k < 2 * ITEMS; k += 7) {
		char key[64];
		snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"k%d\"}}", k);
		deadline = node_now_ns() + 10 * SEC;
		bool ok = false;
		while (!ok && node_now_ns() < deadline) {
			r = get(4, 1, key, true); /* node 4's own replica */
			ok = has_v(r, k);
			FREE(r);
			if (!ok)
				usleep(10000);
		}
		ck_assert_msg(ok, "node 4's standby has no k%d", k);
	}

	/* PROMOTE (raft catches it up in rounds first), then the map. */
	ck_assert_int_eq(member(SHOAL__MEMBER_CHANGE__ACTION__PROMOTE, 4, msg, sizeof(msg)),
	                 SHOAL_OK);
	ck_assert_str_eq(member_role(1, 4, NULL, NULL), "voter");
	ck_assert_uint_eq(n_voters(1), 4);
	ck_assert_int_eq(member(SHOAL__MEMBER_CHANGE__ACTION__PROMOTE, 4, NULL, 0), SHOAL_OK);
	ck_assert_int_eq(sh_map_promote(&m, 1, 4, msg), SHOAL_OK);
	offer_map(&m);

	/* TRANSFER the leadership to node 4. */
	ck_assert_msg(member(SHOAL__MEMBER_CHANGE__ACTION__TRANSFER, 4, msg, sizeof(msg)) ==
	                  SHOAL_OK,
	              "transfer: %s", msg);
	deadline = node_now_ns() + 10 * SEC;
	while (node_now_ns() < deadline && wait_leader(1) != 4)
		usleep(10000);
	ck_assert_int_eq(wait_leader(1), 4);
	for (int k = 2 * ITEMS; k < 2 * ITEMS + 20; k++)
		write_item(k);

	/* REMOVE node 3 from Raft, then from the map: node 3 closes group 1
	 * and, after the grace, deletes its directory. */
	ck_assert_int_eq(member(SHOAL__MEMBER_CHANGE__ACTION__REMOVE, 3, msg, sizeof(msg)),
	                 SHOAL_OK);
	ck_assert_str_eq(member_role(1, 3, NULL, NULL), "");
	ck_assert_uint_eq(n_voters(1), 3);
	ck_assert_int_eq(member(SHOAL__MEMBER_CHANGE__ACTION__REMOVE, 3, NULL, 0), SHOAL_OK);
	ck_assert(dir_exists(3, 1));
	ck_assert_int_eq(sh_map_remove_replica(&m, 1, 3, msg), SHOAL_OK);
	offer_map(&m);
	deadline = node_now_ns() + 10 * SEC;
	while (node_now_ns() < deadline && node_group_get(T[3].n, 1) != NULL)
		usleep(10000);
	ck_assert_ptr_null(node_group_get(T[3].n, 1));
	ck_assert_ptr_nonnull(node_group_get(T[3].n, 0)); /* group 0 stays */
	r = get(3, 1, "{\"pk\":{\"S\":\"k1\"}}", true);
	ck_assert_int_eq(status_of(r), SHOAL_E_UNAVAILABLE); /* not hosted any more */
	FREE(r);
	deadline = node_now_ns() + (NODE_GROUP_GRACE_MS / 1000 + 20) * SEC;
	while (node_now_ns() < deadline && dir_exists(3, 1))
		usleep(50000);
	ck_assert_msg(!dir_exists(3, 1), "node 3 kept its group-1 directory");

	/* Every item written before and during the move is there. */
	for (int k = 0; k < 2 * ITEMS + 20; k++) {
		char key[64];
		snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"k%d\"}}", k);
		r = get(wait_leader(1), 1, key, false);
		ck_assert_msg(has_v(r, k), "k%d lost: %d %s", k, status_of(r), message_of(r));
		FREE(r);
	}
	/* The map each node saved is the newest. */
	for (int i = 1; i <= NN; i++) {
		deadline = node_now_ns() + 10 * SEC;
		while (node_now_ns() < deadline && sh_place_epoch(T[i].n->place) != m.epoch)
			usleep(10000);
		ck_assert_uint_eq(sh_place_epoch(T[i].n->place), m.epoch);
	}
	sh_map_fini(&m);

	/* A restart keeps the shape: node 4 comes back from its cluster.map
	 * (still --join: it never bootstraps) with group 1's data. */
	stop_node(4);
	start_node(4, true);
	ck_assert_ptr_nonnull(node_group_get(T[4].n, 1));
	for (int k = 0; k < 2 * ITEMS + 20; k += 11) {
		char key[64];
		snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"k%d\"}}", k);
		r = get(wait_leader(1), 1, key, false);
		ck_assert_msg(has_v(r, k), "k%d lost after the restart", k);
		FREE(r);
	}
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

START_TEST(test_empty_dir)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	r = define(wait_leader(1), 1, "tbl", 5);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%s", message_of(r));
	FREE(r);
	for (int k = 0; k < 40; k++)
		write_item(k);
	/* Node 3's disk is replaced: stopped, its directory emptied. */
	stop_node(3);
	char cmd[4400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T[3].dir);
	ck_assert_int_eq(system(cmd), 0);
	for (int k = 40; k < 60; k++)
		write_item(k);
	start_node(3, false);
	/* It learns the map from the others (they answer born) ... */
	uint64_t deadline = node_now_ns() + 30 * SEC;
	bool lost = false;
	while (node_now_ns() < deadline && !lost) {
		const Shoal__GroupStatus *gs = node_status(3, 1, &r);
		lost = gs != NULL && strcmp(gs->role, "lost") == 0;
		FREE(r);
		if (!lost)
			usleep(20000);
	}
	ck_assert_msg(lost, "node 3 does not report group 1 lost");
	/* ... and opened nothing: no group directory, no raft, no vote. */
	for (uint32_t g = 0; g < GROUPS; g++) {
		ck_assert_ptr_null(node_group_get(T[3].n, g));
		ck_assert(!dir_exists(3, g));
		r = get(3, g, "{\"pk\":{\"S\":\"k1\"}}", true);
		ck_assert_int_eq(status_of(r), SHOAL_E_UNAVAILABLE);
		FREE(r);
	}
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.map_get = true;
	r = rpc(3, &nr);
	ck_assert(!r->map_born);
	ck_assert_uint_ge(r->epoch, 1);
	FREE(r);
	/* The leaders' configurations are unchanged: node 3 is still listed
	 * as the voter it was (the executor, not the node, removes it). */
	for (uint32_t g = 0; g < GROUPS; g++) {
		ck_assert_uint_eq(n_voters(g), 3);
		ck_assert_str_eq(member_role(g, 3, NULL, NULL), "voter");
		ck_assert_int_ne(wait_leader(g), 3);
	}
	/* Writes go on with the two others. */
	for (int k = 60; k < 70; k++)
		write_item(k);
	for (int k = 0; k < 70; k++) {
		char key[64];
		snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"k%d\"}}", k);
		r = get(wait_leader(1), 1, key, false);
		ck_assert_msg(has_v(r, k), "k%d lost", k);
		FREE(r);
	}
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

static Suite *member_suite(void)
{
	Suite *s = suite_create("member");
	TCase *tc = tcase_create("moves");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_move);
	tcase_add_test(tc, test_empty_dir);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(member_suite)
