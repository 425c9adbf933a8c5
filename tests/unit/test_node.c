/* shoal-node in-process: three nodes (node/node.c) in one test process, each
 * on its own loop thread, with real Raft over 127.0.0.1 and real nng
 * clients: group commit, leadership, consistent reads, hostile input,
 * metrics, failover and restart. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/alloc.h"
#include "node/node.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/index.h"
#include "tests/lib/testlib.h"

#define NN     3
#define GROUPS 4
#define SEC    1000000000ull

typedef struct tnode {
	node *n;
	pthread_t thread;
	char dir[4200];
	char rpc[64];
} tnode;

static sh_cluster_conf conf;
static tnode T[NN + 1]; /* by node id */
static int metrics_port;

static void *run_node(void *arg)
{
	node_run(arg);
	return NULL;
}

static void start_node(int id)
{
	char msg[SH_ERRMSG_SIZE] = "";
	/* A small outbox bound: test_index_shipping reaches it on purpose;
	 * writes one at a time never come near it otherwise. */
	node_options o = {
	    .conf = &conf, .id = (uint32_t)id, .dir = T[id].dir, .workers = 8, .outbox_limit = 20};
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

static void cluster_start(void)
{
	/* Below the ephemeral range (32768+): a port there may be the local
	 * port of some connection -- the shipper's and raft's own included --
	 * and listening on it then fails.  Each test runs in its own process
	 * (Check forks), so each gets its own block of 80 ports. */
	int base = tl_free_ports(80);
	const char *root = tl_tmpdir("node");
	char path[4200], text[4096];
	/* Unthrottled partitions: test_snapshot_budget writes 100 KB items
	 * (100 WCU each) as fast as it can. */
	int len = snprintf(text, sizeof(text),
	                   "[cluster]\ngroups = %d\nreplication = 3\npartition_rcu = 1000000000\n"
	                   "partition_wcu = 1000000000\n",
	                   GROUPS);
	metrics_port = base + 70;
	for (int i = 1; i <= NN; i++) {
		snprintf(T[i].dir, sizeof(T[i].dir), "%s/node%d", root, i);
		snprintf(T[i].rpc, sizeof(T[i].rpc), "tcp://127.0.0.1:%d", base + 60 + i);
		len += snprintf(text + len, sizeof(text) - (size_t)len,
		                "[node.%d]\nraft = 127.0.0.1:%d\nrpc = %s\n%s", i, base + 10 * i,
		                T[i].rpc, i == 1 ? "" : "");
		if (i == 1)
			len += snprintf(text + len, sizeof(text) - (size_t)len,
			                "metrics = 127.0.0.1:%d\n", metrics_port);
	}
	snprintf(path, sizeof(path), "%s/cluster.ini", root);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(sh_cluster_load(path, &conf, msg) == SHOAL_OK, "%s", msg);
	node_log_set_level(NODE_LOG_WARN);
	for (int i = 1; i <= NN; i++)
		start_node(i);
}

static void cluster_stop(void)
{
	for (int i = 1; i <= NN; i++)
		if (T[i].n != NULL)
			stop_node(i);
}

/* The node that leads group g (not `not`) once every running replica
 * knows it, polling up to 30 s.  With every node running that is the
 * group's preferred replica, the steady state (node/group.c hands
 * leadership back to it), so that a test's writes are not refused by a
 * hand-over in the middle. */
static int wait_leader(uint32_t g, int not )
{
	uint64_t deadline = node_now_ns() + 30 * SEC;
	uint32_t reps[SH_MAX_REPLICATION];
	sh_cluster_replicas(&conf, g, reps);
	bool all = not == 0;
	for (int i = 1; i <= NN; i++)
		all = all && T[i].n != NULL;
	int leader = -1;
	while (node_now_ns() < deadline) {
		leader = -1;
		bool agree = true;
		for (int i = 1; i <= NN; i++) {
			if (i == not || T[i].n == NULL)
				continue;
			node_group_status st;
			node_group *grp = node_group_get(T[i].n, g);
			if (grp == NULL) { /* not open yet: the map is being learnt */
				agree = false;
				continue;
			}
			node_group_status_get(grp, &st);
			if (st.role == RAFT_LEADER)
				leader = i;
		}
		if (all && leader != (int)reps[0])
			agree = false;
		for (int i = 1; i <= NN && leader > 0; i++) {
			if (T[i].n == NULL)
				continue;
			node_group_status st;
			node_group *grp = node_group_get(T[i].n, g);
			if (grp == NULL) {
				agree = false;
				continue;
			}
			node_group_status_get(grp, &st);
			agree = agree && st.leader == (uint32_t)leader;
		}
		if (leader > 0 && agree)
			return leader;
		usleep(10000);
	}
	ck_abort_msg("no settled leader for group %u (preferred node %u, last seen %d)", g, reps[0],
	             leader);
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Client side                                                               */
/* ------------------------------------------------------------------------ */

/* Sends raw bytes to node id; returns the decoded answer (free it with
 * shoal__node_response__free_unpacked). */
static Shoal__NodeResponse *rpc_raw(int id, const void *buf, size_t len)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000), 0);
	ck_assert_int_eq(nng_dial(s, T[id].rpc, NULL, 0), 0);
	ck_assert_int_eq(nng_send(s, (void *)buf, len, 0), 0);
	void *rb;
	size_t rl;
	int rv = nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC);
	ck_assert_msg(rv == 0, "recv from node %d: %s", id, nng_strerror(rv));
	Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, rl, rb);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->response != NULL || r->n_batch > 0); /* random bytes may be a batch */
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

static int status_of(Shoal__NodeResponse *r)
{
	return (int)r->response->status;
}

/* Builders: everything lives in one arena per test. */
static sh_arena A;

static Shoal__Item *item_pb(const char *text)
{
	st_value v;
	Shoal__Item *pb;
	ck_assert_int_eq(wire_item_from_text(&A, text, strlen(text), &v, NULL), SHOAL_OK);
	ck_assert_int_eq(wire_item_to_pb(&A, &v, &pb, NULL), SHOAL_OK);
	return pb;
}

static Shoal__TableDefine *define_pb(const char *table, uint32_t id)
{
	Shoal__CreateTableRequest *ct = sh_arena_alloc(&A, sizeof(*ct));
	shoal__create_table_request__init(ct);
	WIRE_SET(ct, table_name, (char *)table);
	static Shoal__AttributeDefinition ad = SHOAL__ATTRIBUTE_DEFINITION__INIT;
	static Shoal__AttributeDefinition *ads[] = {&ad};
	static Shoal__KeySchemaElement ks = SHOAL__KEY_SCHEMA_ELEMENT__INIT;
	static Shoal__KeySchemaElement *kss[] = {&ks};
	ad.attribute_name = (char *)"pk";
	ad.attribute_type = (char *)"S";
	ks.attribute_name = (char *)"pk";
	ks.key_type = (char *)"HASH";
	ct->n_attribute_definitions = 1;
	ct->attribute_definitions = ads;
	ct->n_key_schema = 1;
	ct->key_schema = kss;
	Shoal__TableDefine *d = sh_arena_alloc(&A, sizeof(*d));
	shoal__table_define__init(d);
	d->def = ct;
	d->table_id = id;
	d->created_ms = 1700000000000;
	return d;
}

static Shoal__NodeResponse *define(int id, uint32_t group, const char *table, uint32_t table_id)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = group;
	nr.define_table = define_pb(table, table_id);
	return rpc(id, &nr);
}

/* A packed NodeRequest in A. */
static ProtobufCBinaryData packed(const Shoal__NodeRequest *nr)
{
	ProtobufCBinaryData b;
	b.len = shoal__node_request__get_packed_size(nr);
	b.data = sh_arena_alloc(&A, b.len + 1);
	shoal__node_request__pack(nr, b.data);
	return b;
}

static ProtobufCBinaryData put_req(uint32_t group, const char *table, const char *item,
                                   uint64_t request_id)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__PutItemRequest p = SHOAL__PUT_ITEM_REQUEST__INIT;
	if (table != NULL)
		WIRE_SET(&p, table_name, (char *)table);
	p.item = item_pb(item);
	req.request_id = request_id;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	req.put_item = &p;
	nr.group = group;
	nr.request = &req;
	return packed(&nr);
}

static Shoal__NodeResponse *put(int id, uint32_t group, const char *table, const char *item,
                                uint64_t request_id)
{
	ProtobufCBinaryData b = put_req(group, table, item, request_id);
	return rpc_raw(id, b.data, b.len);
}

static ProtobufCBinaryData get_req(uint32_t group, const char *table, const char *key,
                                   bool any_replica, uint64_t request_id)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__GetItemRequest g = SHOAL__GET_ITEM_REQUEST__INIT;
	WIRE_SET(&g, table_name, (char *)table);
	g.key = item_pb(key);
	g.consistent_read = !any_replica;
	req.request_id = request_id;
	req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	req.get_item = &g;
	nr.group = group;
	nr.request = &req;
	nr.any_replica = any_replica;
	return packed(&nr);
}

static Shoal__NodeResponse *get(int id, uint32_t group, const char *table, const char *key,
                                bool any_replica)
{
	ProtobufCBinaryData b = get_req(group, table, key, any_replica, 77);
	return rpc_raw(id, b.data, b.len);
}

static char *got_v(Shoal__NodeResponse *r);

/* For a replica being polled: whether its GetItem answer holds an item (with
 * v == want, unless want is NULL).  An error (the replica has not applied
 * the table's definition yet, or has not opened the group) is not yet. */
static bool seen_v(Shoal__NodeResponse *r, const char *want)
{
	if (status_of(r) != SHOAL_OK)
		return false;
	const char *v = got_v(r);
	return v != NULL && (want == NULL || strcmp(v, want) == 0);
}

/* The value of attribute v of a GetItem answer, or NULL without an item. */
static char *got_v(Shoal__NodeResponse *r)
{
	static char out[256];
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	ck_assert_int_eq(r->response->result_case, SHOAL__RESPONSE__RESULT_GET_ITEM);
	Shoal__Item *it = r->response->get_item->item;
	if (it == NULL)
		return NULL;
	for (size_t i = 0; i < it->n_attrs; i++)
		if (it->attrs[i]->name.len == 1 && it->attrs[i]->name.data[0] == 'v') {
			snprintf(out, sizeof(out), "%.*s", (int)it->attrs[i]->value->s.len,
			         (char *)it->attrs[i]->value->s.data);
			return out;
		}
	return NULL;
}

static Shoal__NodeResponse *group_status(int id, uint32_t group)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = group;
	nr.group_status = 1;
	return rpc(id, &nr);
}

#define FREE(r) shoal__node_response__free_unpacked((r), NULL)

/* ------------------------------------------------------------------------ */
/* Concurrent writers                                                        */
/* ------------------------------------------------------------------------ */

typedef struct writer {
	int node;
	int index;
	int ok;
} writer;

#define WRITERS    8
#define PER_WRITER 25

static void *writer_main(void *arg)
{
	writer *w = arg;
	nng_socket s;
	nng_req0_open(&s);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000);
	if (nng_dial(s, T[w->node].rpc, NULL, 0) != 0)
		return NULL;
	sh_arena a;
	sh_arena_init(&a);
	for (int k = 0; k < PER_WRITER; k++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"pk\":{\"S\":\"w%d-%d\"},\"v\":{\"S\":\"x\"}}",
		         w->index, k);
		st_value v;
		Shoal__Item *it;
		if (wire_item_from_text(&a, text, strlen(text), &v, NULL) != SHOAL_OK ||
		    wire_item_to_pb(&a, &v, &it, NULL) != SHOAL_OK)
			break;
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		Shoal__Request req = SHOAL__REQUEST__INIT;
		Shoal__PutItemRequest p = SHOAL__PUT_ITEM_REQUEST__INIT;
		WIRE_SET(&p, table_name, (char *)"Music");
		p.item = it;
		req.request_id = (uint64_t)(w->index * 1000 + k);
		req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
		req.put_item = &p;
		nr.group = 1;
		nr.request = &req;
		size_t len = shoal__node_request__get_packed_size(&nr);
		uint8_t *buf = sh_arena_alloc(&a, len);
		shoal__node_request__pack(&nr, buf);
		void *rb;
		size_t rl;
		if (nng_send(s, buf, len, 0) != 0 || nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC) != 0)
			break;
		Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, rl, rb);
		if (r != NULL && r->response != NULL && r->response->status == 0 &&
		    r->response->request_id == req.request_id)
			w->ok++;
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
		nng_free(rb, rl);
	}
	sh_arena_fini(&a);
	nng_close(s);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static uint64_t group_commit_index(int id, uint32_t g)
{
	node_group_status st;
	node_group_status_get(node_group_get(T[id].n, g), &st);
	return st.commit;
}

START_TEST(test_cluster)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;

	/* Every group elects a leader. */
	int lead[GROUPS];
	for (uint32_t g = 0; g < GROUPS; g++)
		lead[g] = wait_leader(g, 0);
	int follower1 = lead[1] % NN + 1;

	/* CreateTable as the router does it: group 0 assigns the id (a
	 * follower of group 0 redirects to its leader) ... */
	r = define(lead[0] % NN + 1, 0, "Music", 0);
	ck_assert_int_eq(status_of(r), SHOAL_E_NOT_LEADER);
	ck_assert_int_eq(r->leader_node, lead[0]);
	FREE(r);
	r = define(lead[0], 0, "Music", 0);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%s", r->response->message);
	FREE(r);
	Shoal__NodeRequest cat = SHOAL__NODE_REQUEST__INIT;
	cat.list_catalog = 1;
	r = rpc(lead[0], &cat);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	ck_assert_uint_eq(r->n_catalog, 1);
	ck_assert_str_eq(r->catalog[0]->def->table_name, "Music");
	uint32_t table_id = r->catalog[0]->table_id;
	ck_assert_uint_ne(table_id, 0);
	FREE(r);
	/* ... then every data group gets the definition with that id. */
	for (uint32_t g = 1; g < GROUPS; g++) {
		r = define(lead[g], g, "Music", table_id);
		ck_assert_msg(status_of(r) == SHOAL_OK, "%s", r->response->message);
		FREE(r);
	}

	/* A write through the leader answers with the request's id. */
	r = put(lead[1], 1, "Music", "{\"pk\":{\"S\":\"k1\"},\"v\":{\"S\":\"hello\"}}", 4242);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%s", r->response->message);
	ck_assert_uint_eq(r->response->request_id, 4242);
	ck_assert_int_eq(r->response->result_case, SHOAL__RESPONSE__RESULT_PUT_ITEM);
	FREE(r);
	/* A follower refuses writes and consistent reads, naming the leader. */
	r = put(follower1, 1, "Music", "{\"pk\":{\"S\":\"k2\"},\"v\":{\"S\":\"no\"}}", 1);
	ck_assert_int_eq(status_of(r), SHOAL_E_NOT_LEADER);
	ck_assert_int_eq(r->leader_node, lead[1]);
	ck_assert_uint_eq(r->response->request_id, 1);
	FREE(r);
	r = get(follower1, 1, "Music", "{\"pk\":{\"S\":\"k1\"}}", false);
	ck_assert_int_eq(status_of(r), SHOAL_E_NOT_LEADER);
	ck_assert_int_eq(r->leader_node, lead[1]);
	FREE(r);
	/* The leader's consistent read sees the write at once. */
	r = get(lead[1], 1, "Music", "{\"pk\":{\"S\":\"k1\"}}", false);
	ck_assert_str_eq(got_v(r), "hello");
	ck_assert_uint_eq(r->response->request_id, 77);
	FREE(r);
	/* A follower's eventually consistent read sees it soon. */
	uint64_t deadline = node_now_ns() + 10 * SEC;
	bool seen = false;
	while (!seen && node_now_ns() < deadline) {
		r = get(follower1, 1, "Music", "{\"pk\":{\"S\":\"k1\"}}", true);
		seen = seen_v(r, NULL);
		FREE(r);
		if (!seen)
			usleep(10000);
	}
	ck_assert(seen);

	/* Errors from the state machine come back per operation. */
	r = put(lead[2], 2, "Nope", "{\"pk\":{\"S\":\"k\"}}", 5);
	ck_assert_int_eq(status_of(r), SHOAL_E_NOT_FOUND);
	FREE(r);
	/* An invalid write is refused before Raft: the log does not grow. */
	uint64_t before = group_commit_index(lead[1], 1);
	r = put(lead[1], 1, NULL, "{\"pk\":{\"S\":\"k\"}}", 6);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	FREE(r);
	ck_assert_uint_eq(group_commit_index(lead[1], 1), before);

	/* Group commit: concurrent writers all succeed. */
	pthread_t th[WRITERS];
	writer w[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (writer){.node = lead[1], .index = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].ok, PER_WRITER);
	}
	uint64_t entries = group_commit_index(lead[1], 1) - before;
	fprintf(stderr, "group commit: %d writes in %llu Raft entries\n", WRITERS * PER_WRITER,
	        (unsigned long long)entries);
	ck_assert_uint_le(entries, WRITERS * PER_WRITER);
	r = group_status(lead[1], 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	ck_assert_ptr_nonnull(r->status);
	ck_assert_str_eq(r->status->role, "leader");
	ck_assert_uint_eq(r->status->leader_node, lead[1]);
	ck_assert_uint_eq(r->status->n_tables, 1);
	ck_assert_uint_eq(r->status->tables[0]->item_count, 1 + WRITERS * PER_WRITER);
	FREE(r);

	/* Metrics: counters and per-group gauges, also over HTTP. */
	char *text;
	size_t len;
	ck_assert_int_eq(node_metrics_render(T[lead[1]].n, &text, &len, NULL), SHOAL_OK);
	ck_assert_ptr_nonnull(strstr(text, "shoal_raft_role{group=\"1\"} 3\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "shoal_node_errors_total{op=\"put_item\",code=\"validation\"} 1\n"));
	char want[128];
	snprintf(want, sizeof(want), "shoal_node_request_seconds_count{op=\"put_item\"} %d\n",
	         2 + WRITERS * PER_WRITER + (lead[1] == lead[2] ? 1 : 0));
	ck_assert_msg(strstr(text, want) != NULL, "missing %s in\n%s", want, text);
	sh_free(text);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)metrics_port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	const char *http = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	ck_assert_int_eq(write(fd, http, strlen(http)), (ssize_t)strlen(http));
	static char page[1 << 17];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(page) - 1 && (n = read(fd, page + got, sizeof(page) - 1 - got)) > 0)
		got += (size_t)n;
	page[got] = '\0';
	close(fd);
	ck_assert_msg(strncmp(page, "HTTP/1.0 200", 12) == 0 ||
	                  strncmp(page, "HTTP/1.1 200", 12) == 0,
	              "%.200s", page);
	ck_assert_ptr_nonnull(strstr(page, "shoal_node_requests_total{op=\"get_item\"}"));
	ck_assert_ptr_nonnull(strstr(page, "shoal_raft_term{group=\"3\"}"));

	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

START_TEST(test_hostile_input)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	/* Every group settled first: the groups open once the nodes agreed
	 * the cluster is new (node/mapsync.c), and a raft stopped in the
	 * middle of its first log writes leaks them (raft 0.15, raftio.c). */
	for (uint32_t g = 0; g < GROUPS; g++)
		wait_leader(g, 0);
	int l1 = wait_leader(1, 0);

	/* Not protobuf at all. */
	r = rpc_raw(1, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
	ck_assert_int_eq(status_of(r), SHOAL_E_SERIALIZATION);
	FREE(r);
	/* Empty: no operation. */
	r = rpc_raw(1, "", 0);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	FREE(r);
	/* Two operations at once. */
	Shoal__NodeRequest two = SHOAL__NODE_REQUEST__INIT;
	two.group_status = 1;
	two.list_catalog = 1;
	r = rpc(1, &two);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	FREE(r);
	/* A group that does not exist. */
	Shoal__NodeRequest bad = SHOAL__NODE_REQUEST__INIT;
	bad.group = 99;
	bad.group_status = 1;
	r = rpc(1, &bad);
	ck_assert_int_eq(status_of(r), SHOAL_E_UNAVAILABLE);
	FREE(r);
	/* Router-level operations are not served by nodes. */
	Shoal__NodeRequest tx = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__TransactWriteItemsRequest t = SHOAL__TRANSACT_WRITE_ITEMS_REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS;
	req.transact_write_items = &t;
	req.request_id = 9;
	tx.group = 1;
	tx.request = &req;
	r = rpc(l1, &tx);
	ck_assert_int_eq(status_of(r), SHOAL_E_UNKNOWN_OPERATION);
	ck_assert_uint_eq(r->response->request_id, 9);
	FREE(r);
	/* The catalog lives in group 0 only. */
	Shoal__NodeRequest cat = SHOAL__NODE_REQUEST__INIT;
	cat.group = 1;
	cat.list_catalog = 1;
	cat.any_replica = 1;
	r = rpc(1, &cat);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	FREE(r);
	/* A put whose item nests M values 300 deep: refused by the framing
	 * check before protobuf-c's recursive unpacker could overflow. */
	static uint8_t deep[16384];
	size_t start = sizeof(deep);
	uint8_t tags[] = {0x12 /* Attribute.value */, 0x0a /* MapValue.attrs */,
	                  0x32 /* AttributeValue.m */};
	/* Then Attribute.value, Item.attrs, PutItemRequest.item,
	 * Request.put_item, NodeRequest.request. */
	const uint8_t outer[] = {0x12, 0x0a, 0x12, 0x5a, 0x1a};
	for (int i = 0; i < 300 * 3 + 5; i++) {
		uint8_t tag = i < 900 ? tags[i % 3] : outer[i - 900];
		size_t len = sizeof(deep) - start;
		uint8_t v[10];
		int nv = 0;
		do {
			v[nv++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
			len >>= 7;
		} while (len != 0);
		start -= (size_t)nv;
		memcpy(deep + start, v, (size_t)nv);
		deep[--start] = tag;
	}
	r = rpc_raw(1, deep + start, sizeof(deep) - start);
	ck_assert_int_eq(status_of(r), SHOAL_E_SERIALIZATION);
	FREE(r);

	/* Random bytes: every message gets an answer, the node keeps serving. */
	uint64_t seed = tl_seed();
	uint8_t buf[256];
	for (int i = 0; i < 300; i++) {
		size_t n = (size_t)(tl_rand(&seed) % sizeof(buf));
		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)tl_rand(&seed);
		r = rpc_raw(1 + i % NN, buf, n);
		FREE(r);
	}
	r = group_status(1, 0);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);

	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

START_TEST(test_failover_and_restart)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	int l0 = wait_leader(0, 0);
	r = define(l0, 0, "Music", 0);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	/* Group 1 is led by its preferred replica (it wins most elections and
	 * is handed leadership back otherwise: group.c, rebalance). */
	uint32_t reps[SH_MAX_REPLICATION];
	sh_cluster_replicas(&conf, 1, reps);
	int l1 = wait_leader(1, 0);
	ck_assert_int_eq(l1, (int)reps[0]);
	r = define(l1, 1, "Music", 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	r = put(l1, 1, "Music", "{\"pk\":{\"S\":\"a\"},\"v\":{\"S\":\"before\"}}", 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);

	/* The leader of group 1 stops; another replica takes over and has
	 * every acknowledged write. */
	stop_node(l1);
	int l1b = wait_leader(1, l1);
	ck_assert_int_ne(l1b, l1);
	r = get(l1b, 1, "Music", "{\"pk\":{\"S\":\"a\"}}", false);
	ck_assert_str_eq(got_v(r), "before");
	FREE(r);
	r = put(l1b, 1, "Music", "{\"pk\":{\"S\":\"b\"},\"v\":{\"S\":\"during\"}}", 2);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);

	/* The stopped node restarts from its directory and catches up. */
	start_node(l1);
	uint64_t deadline = node_now_ns() + 20 * SEC;
	bool seen = false;
	while (!seen && node_now_ns() < deadline) {
		r = get(l1, 1, "Music", "{\"pk\":{\"S\":\"b\"}}", true);
		seen = seen_v(r, "during");
		FREE(r);
		if (!seen)
			usleep(10000);
	}
	ck_assert(seen);
	/* The replica that took over hands leadership back to the preferred
	 * one, which leads with every write. */
	ck_assert_int_eq(wait_leader(1, 0), l1);
	r = get(l1, 1, "Music", "{\"pk\":{\"S\":\"b\"}}", false);
	ck_assert_str_eq(got_v(r), "during");
	FREE(r);

	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

/* An UpdateItem "ADD n :one" of key pk, carrying write token tok (NULL:
 * none), packed. */
static ProtobufCBinaryData add_req(uint32_t group, const char *pk, const uint8_t *tok)
{
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__UpdateItemRequest u = SHOAL__UPDATE_ITEM_REQUEST__INIT;
	char key[128];
	snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"%s\"}}", pk);
	WIRE_SET(&u, table_name, (char *)"Music");
	u.key = item_pb(key);
	WIRE_SET(&u, update_expression, (char *)"ADD n :one");
	u.expression_attribute_values = item_pb("{\":one\":{\"N\":\"1\"}}");
	WIRE_SET(&u, return_values, (char *)"UPDATED_NEW");
	req.request_id = 5;
	req.op_case = SHOAL__REQUEST__OP_UPDATE_ITEM;
	req.update_item = &u;
	nr.group = group;
	nr.request = &req;
	if (tok != NULL)
		nr.write_token = (ProtobufCBinaryData){16, (uint8_t *)tok};
	return packed(&nr);
}

/* Attribute n of item pk (a consistent read at node id), or -1. */
static long counter_of(int id, uint32_t group, const char *pk)
{
	char key[128];
	snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"%s\"}}", pk);
	Shoal__NodeResponse *r = get(id, group, "Music", key, false);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	long n = -1;
	Shoal__Item *it = r->response->get_item->item;
	for (size_t i = 0; it != NULL && i < it->n_attrs; i++)
		if (it->attrs[i]->name.len == 1 && it->attrs[i]->name.data[0] == 'n') {
			char buf[32]; /* the number's bytes are not NUL-terminated */
			snprintf(buf, sizeof(buf), "%.*s", (int)it->attrs[i]->value->n.len,
			         (char *)it->attrs[i]->value->n.data);
			n = strtol(buf, NULL, 10);
		}
	FREE(r);
	return n;
}

/* A write sent again with its token (what the router does when the first
 * answer was lost: a timeout, a leader that failed after proposing) is
 * applied once and answered as the first time -- also by the next leader,
 * since the token's record is replicated state. */
START_TEST(test_write_token)
{
	sh_arena_init(&A);
	cluster_start();
	int l0 = wait_leader(0, 0);
	Shoal__NodeResponse *r = define(l0, 0, "Music", 0);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	int l1 = wait_leader(1, 0);
	r = define(l1, 1, "Music", 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);

	static const uint8_t t1[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	static const uint8_t t2[16] = {2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	ProtobufCBinaryData b1 = add_req(1, "c", t1);
	Shoal__NodeResponse *first = rpc_raw(l1, b1.data, b1.len);
	ck_assert_int_eq(status_of(first), SHOAL_OK);
	/* The first answer is "lost": the same request again. */
	Shoal__NodeResponse *again = rpc_raw(l1, b1.data, b1.len);
	ck_assert_int_eq(status_of(again), SHOAL_OK);
	ck_assert_int_eq(again->response->result_case, SHOAL__RESPONSE__RESULT_UPDATE_ITEM);
	ck_assert_int_eq(counter_of(l1, 1, "c"), 1);
	/* ... answered as the first time (UPDATED_NEW n = 1). */
	size_t la = shoal__response__get_packed_size(first->response);
	size_t lb = shoal__response__get_packed_size(again->response);
	ck_assert_uint_eq(la, lb);
	FREE(first);
	FREE(again);

	/* A new token is a new write; no token, too. */
	ProtobufCBinaryData b2 = add_req(1, "c", t2);
	r = rpc_raw(l1, b2.data, b2.len);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	ProtobufCBinaryData b3 = add_req(1, "c", NULL);
	r = rpc_raw(l1, b3.data, b3.len);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	ck_assert_int_eq(counter_of(l1, 1, "c"), 3);

	/* The leader goes; the retry of t2 reaches the new leader. */
	stop_node(l1);
	int l1b = wait_leader(1, l1);
	r = rpc_raw(l1b, b2.data, b2.len);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	ck_assert_int_eq(counter_of(l1b, 1, "c"), 3);

	/* A token of the wrong length is refused before the log. */
	ProtobufCBinaryData b4 = add_req(1, "c", t1);
	Shoal__NodeRequest *bad = shoal__node_request__unpack(NULL, b4.len, b4.data);
	bad->write_token.len = 5;
	r = rpc(l1b, bad);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	FREE(r);
	shoal__node_request__free_unpacked(bad, NULL);
	ck_assert_int_eq(counter_of(l1b, 1, "c"), 3);

	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

/* Writers that record which keys were acknowledged, until told to stop or
 * until a request fails. */
typedef struct acker {
	int node;
	int index;
	int acked; /* keys a<index>-0 .. a<index>-(acked-1) were acknowledged */
	int bad;   /* answers other than OK / UNAVAILABLE / NOT_LEADER / OUTCOME_UNKNOWN */
	atomic_bool *stop;
} acker;

static void *acker_main(void *arg)
{
	acker *w = arg;
	nng_socket s;
	nng_req0_open(&s);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 3000);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 60000);
	if (nng_dial(s, T[w->node].rpc, NULL, 0) != 0)
		return NULL;
	sh_arena a;
	sh_arena_init(&a);
	for (int k = 0; !atomic_load(w->stop); k++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"pk\":{\"S\":\"a%d-%d\"},\"v\":{\"S\":\"x\"}}",
		         w->index, k);
		st_value v;
		Shoal__Item *it;
		sh_arena_reset(&a);
		if (wire_item_from_text(&a, text, strlen(text), &v, NULL) != SHOAL_OK ||
		    wire_item_to_pb(&a, &v, &it, NULL) != SHOAL_OK)
			break;
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		Shoal__Request req = SHOAL__REQUEST__INIT;
		Shoal__PutItemRequest p = SHOAL__PUT_ITEM_REQUEST__INIT;
		WIRE_SET(&p, table_name, (char *)"Music");
		p.item = it;
		req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
		req.put_item = &p;
		nr.group = 1;
		nr.request = &req;
		size_t len = shoal__node_request__get_packed_size(&nr);
		uint8_t *buf = sh_arena_alloc(&a, len);
		shoal__node_request__pack(&nr, buf);
		void *rb;
		size_t rl;
		if (nng_send(s, buf, len, 0) != 0 || nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC) != 0)
			break;
		Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, rl, rb);
		int st = r != NULL && r->response != NULL ? (int)r->response->status : -1;
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
		nng_free(rb, rl);
		if (st == SHOAL_OK && w->acked == k) {
			w->acked++;
			continue;
		}
		if (st != SHOAL_E_UNAVAILABLE && st != SHOAL_E_NOT_LEADER &&
		    st != SHOAL_E_OUTCOME_UNKNOWN)
			w->bad++;
		break;
	}
	sh_arena_fini(&a);
	nng_close(s);
	return NULL;
}

START_TEST(test_stop_under_load)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	int l0 = wait_leader(0, 0);
	r = define(l0, 0, "Music", 0);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	int l1 = wait_leader(1, 0);
	r = define(l1, 1, "Music", 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);

	/* Writers keep the leader of group 1 busy while it stops. */
	atomic_bool stop = false;
	pthread_t th[WRITERS];
	acker w[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (acker){.node = l1, .index = i, .stop = &stop};
		ck_assert_int_eq(pthread_create(&th[i], NULL, acker_main, &w[i]), 0);
	}
	uint64_t deadline = node_now_ns() + 20 * SEC;
	int total = 0;
	while (total < 100 && node_now_ns() < deadline) {
		usleep(5000);
		total = 0;
		for (int i = 0; i < WRITERS; i++)
			total += __atomic_load_n(&w[i].acked, __ATOMIC_RELAXED);
	}
	ck_assert_int_ge(total, 100);
	stop_node(l1); /* graceful: in-flight writes are answered */
	atomic_store(&stop, true);
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].bad, 0);
	}

	/* Every acknowledged write survives at the new leader. */
	int l1b = wait_leader(1, l1);
	for (int i = 0; i < WRITERS; i++) {
		for (int k = 0; k < w[i].acked; k++) {
			char key[64];
			snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"a%d-%d\"}}", i, k);
			r = get(l1b, 1, "Music", key, false);
			ck_assert_msg(got_v(r) != NULL, "acknowledged write a%d-%d lost", i, k);
			FREE(r);
		}
	}
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Index shipping                                                            */
/* ------------------------------------------------------------------------ */

/* Entries of index byg of table gsi held by group g, on its leader. */
static uint64_t index_entries(uint32_t g)
{
	int l = wait_leader(g, 0);
	st_index_progress *p;
	uint32_t n;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(st_index_progress_list(node_group_env(node_group_get(T[l].n, g)), &A, &p, &n,
	                                     msg) == SHOAL_OK,
	              "%s", msg);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(p[i].table, "gsi") == 0 && strcmp(p[i].index, "byg") == 0)
			return p[i].item_count;
	return 0;
}

static uint64_t all_entries(void)
{
	uint64_t sum = 0;
	for (uint32_t g = 1; g < GROUPS; g++)
		sum += index_entries(g);
	return sum;
}

static Shoal__NodeResponse *put_g(int id, int i)
{
	char item[128];
	snprintf(item, sizeof(item), "{\"pk\":{\"S\":\"k%d\"},\"g\":{\"S\":\"v%d\"}}", i, i % 10);
	return put(id, 1, "gsi", item, (uint64_t)i);
}

/* A table with a GSI: writes in group 1 append deltas that the leader ships
 * to the groups owning their index partitions (all three data groups), the
 * outbox is trimmed behind them, and the counters show it.  With shipping
 * paused the backlog reaches --outbox-limit and base writes are refused
 * with ProvisionedThroughputExceeded until shipping resumes. */
/* Group 1's outbox on node id once it is empty (every delta shipped and the
 * watermark trimmed through the log), or as it is after 20 s. */
static st_outbox_info outbox_drained(int id)
{
	char msg[SH_ERRMSG_SIZE];
	st_outbox_info ob;
	uint64_t deadline = node_now_ns() + 20 * SEC;
	do {
		ck_assert_int_eq(
		    st_outbox_get_info(node_group_env(node_group_get(T[id].n, 1)), &ob, msg),
		    SHOAL_OK);
		if (ob.depth == 0)
			break;
		usleep(10000);
	} while (node_now_ns() < deadline);
	ck_assert_uint_eq(ob.depth, 0);
	return ob;
}

START_TEST(test_index_shipping)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	const char *body =
	    "{\"TableName\":\"gsi\",\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
	    "\"AttributeType\":\"S\"},{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
	    "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"}],"
	    "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"byg\",\"KeySchema\":[{\"AttributeName\":"
	    "\"g\",\"KeyType\":\"HASH\"}],\"Projection\":{\"ProjectionType\":\"ALL\"}}]}";
	json_t *j = json_loads(body, 0, NULL);
	ck_assert_ptr_nonnull(j);
	Shoal__Request *ct;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(wire_api_request_from_json(&A, "CreateTable", j, &ct, msg) == SHOAL_OK, "%s",
	              msg);
	json_decref(j);

	/* Group 0 fixes the id and the index ids; every data group gets its
	 * answer, as the router forwards it. */
	Shoal__TableDefine td = SHOAL__TABLE_DEFINE__INIT;
	td.def = ct->create_table;
	td.created_ms = 1700000000000;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.define_table = &td;
	int l0 = wait_leader(0, 0);
	Shoal__NodeResponse *created = rpc(l0, &nr);
	ck_assert_int_eq(status_of(created), SHOAL_OK);
	ck_assert_uint_eq(created->n_catalog, 1);
	ck_assert_uint_eq(created->catalog[0]->n_indexes, 1);
	for (uint32_t g = 1; g < GROUPS; g++) {
		nr.group = g;
		nr.define_table = created->catalog[0];
		r = rpc(wait_leader(g, 0), &nr);
		ck_assert_int_eq(status_of(r), SHOAL_OK);
		FREE(r);
	}
	FREE(created);

	enum { ITEMS = 60 };
	int l1 = wait_leader(1, 0);
	for (int i = 0; i < ITEMS; i++) {
		r = put_g(l1, i);
		ck_assert_msg(status_of(r) == SHOAL_OK, "put %d: %s", i, r->response->message);
		FREE(r);
	}
	/* Converges: every item in the index, spread over the groups, and the
	 * outbox of group 1 trimmed behind what was shipped. */
	uint64_t deadline = node_now_ns() + 20 * SEC;
	st_outbox_info ob = {0};
	bool spread = false;
	while (node_now_ns() < deadline) {
		ck_assert_int_eq(
		    st_outbox_get_info(node_group_env(node_group_get(T[l1].n, 1)), &ob, msg),
		    SHOAL_OK);
		spread = index_entries(1) > 0 && index_entries(2) > 0 && index_entries(3) > 0;
		if (all_entries() == ITEMS && ob.shipped == ob.last_seq && spread)
			break;
		sh_arena_reset(&A);
		usleep(10000);
	}
	ck_assert_uint_eq(all_entries(), ITEMS);
	ck_assert(spread);
	ck_assert_uint_eq(ob.last_seq, ITEMS);
	ck_assert_uint_eq(ob.shipped, ITEMS);
	ck_assert_uint_eq(ob.depth, 0);

	r = group_status(l1, 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	ck_assert_uint_eq(r->status->outbox_last_seq, ITEMS);
	ck_assert_uint_eq(r->status->outbox_shipped, ITEMS);
	ck_assert_uint_eq(r->status->outbox_depth, 0);
	bool found = false;
	for (size_t i = 0; i < r->status->n_tables; i++)
		if (strcmp(r->status->tables[i]->table_name, "gsi") == 0)
			found = r->status->tables[i]->n_indexes == 1 &&
			        strcmp(r->status->tables[i]->indexes[0]->index_name, "byg") == 0;
	ck_assert(found);
	FREE(r);
	/* The node that shipped the deltas (l1, unless leadership moved
	 * meanwhile) reports the last propagation lag it measured. */
	bool lag_seen = false;
	for (int i = 1; i <= NN && !lag_seen; i++) {
		r = group_status(i, 1);
		for (size_t t = 0; status_of(r) == SHOAL_OK && t < r->status->n_tables; t++)
			for (size_t x = 0; x < r->status->tables[t]->n_indexes; x++)
				lag_seen |= r->status->tables[t]->indexes[x]->lag_seen &&
				            r->status->tables[t]->indexes[x]->lag_ms >= 0;
		FREE(r);
	}
	ck_assert(lag_seen);

	char *text;
	size_t len;
	ck_assert_int_eq(node_metrics_render(T[l1].n, &text, &len, NULL), SHOAL_OK);
	ck_assert_ptr_nonnull(strstr(text, "shoal_index_deltas_shipped_total{group=\"1\"} 60\n"));
	ck_assert_ptr_nonnull(strstr(text, "shoal_outbox_shipped_seq{group=\"1\"} 60\n"));
	ck_assert_ptr_nonnull(strstr(text, "shoal_index_propagation_seconds_count{"));
	sh_free(text);

	/* Backpressure: nothing ships, the backlog grows to the limit (20). */
	for (int i = 1; i <= NN; i++)
		node_ship_set_paused(T[i].n->ship, true);
	int refused_at = -1;
	for (int i = ITEMS; i < ITEMS + 40 && refused_at < 0; i++) {
		r = put_g(l1, i);
		if (status_of(r) == SHOAL__STATUS__STATUS_THROUGHPUT) {
			refused_at = i - ITEMS;
			ck_assert_ptr_nonnull(strstr(r->response->message, "index"));
			ck_assert_ptr_nonnull(strstr(r->response->message, "behind"));
		} else {
			ck_assert_int_eq(status_of(r), SHOAL_OK);
		}
		FREE(r);
	}
	ck_assert_msg(refused_at >= 20 && refused_at <= 23, "refused after %d writes", refused_at);
	for (int i = 1; i <= NN; i++)
		node_ship_set_paused(T[i].n->ship, false);
	deadline = node_now_ns() + 20 * SEC;
	while (all_entries() != (uint64_t)(ITEMS + refused_at) && node_now_ns() < deadline) {
		sh_arena_reset(&A);
		usleep(10000);
	}
	ck_assert_uint_eq(all_entries(), (uint64_t)(ITEMS + refused_at));
	/* The targets have everything; the throttle lifts once the source has
	 * replicated its trimmed watermark (the next OutboxTrim entry). */
	ob = outbox_drained(l1);
	r = put_g(l1, 1000);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%d %s", status_of(r), r->response->message);
	FREE(r);
	uint64_t total = (uint64_t)(ITEMS + refused_at + 1);

	/* The source's leader stops right after a burst: the new leader
	 * resumes from the replicated watermark and nothing is lost. */
	for (int i = 2000; i < 2030; i++) {
		r = put_g(l1, i);
		ck_assert_int_eq(status_of(r), SHOAL_OK);
		FREE(r);
	}
	total += 30;
	stop_node(l1);
	int l1b = wait_leader(1, l1);
	/* The new leader re-ships what the old one shipped but had not yet
	 * trimmed through the log (up to 30 deltas, over the limit of 20), so
	 * its first writes may be throttled until the targets acknowledge
	 * again: retried, as a client would. */
	for (int i = 3000; i < 3010; i++) {
		deadline = node_now_ns() + 20 * SEC;
		for (;;) {
			r = put_g(l1b, i);
			if (status_of(r) != SHOAL__STATUS__STATUS_THROUGHPUT ||
			    node_now_ns() > deadline)
				break;
			FREE(r);
			usleep(10000);
		}
		ck_assert_msg(status_of(r) == SHOAL_OK, "%d %s", status_of(r),
		              r->response->message);
		FREE(r);
	}
	total += 10;
	deadline = node_now_ns() + 20 * SEC;
	while (all_entries() != total && node_now_ns() < deadline) {
		sh_arena_reset(&A);
		usleep(10000);
	}
	ck_assert_uint_eq(all_entries(), total);
	ob = outbox_drained(l1b);
	ck_assert_uint_eq(ob.last_seq, total);
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

/* Member i of a batch answer, decoded (free with FREE). */
static Shoal__NodeResponse *member(const Shoal__NodeResponse *r, size_t i)
{
	ck_assert_uint_gt(r->n_batch, i);
	Shoal__NodeResponse *m =
	    shoal__node_response__unpack(NULL, r->batch[i].len, r->batch[i].data);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(m->response);
	return m;
}

/* NodeRequest batches: every member is handled as if it came alone and
 * answered in order in one message; bad members fail alone. */
START_TEST(test_batch)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r, *m;
	int lead[GROUPS];
	for (uint32_t g = 0; g < GROUPS; g++)
		lead[g] = wait_leader(g, 0);
	r = define(lead[0], 0, "Batched", 0);
	ck_assert_msg(status_of(r) == SHOAL_OK, "%s", r->response->message);
	FREE(r);
	Shoal__NodeRequest cat = SHOAL__NODE_REQUEST__INIT;
	cat.list_catalog = 1;
	r = rpc(lead[0], &cat);
	uint32_t table_id = r->catalog[0]->table_id;
	FREE(r);
	for (uint32_t g = 1; g < GROUPS; g++) {
		r = define(lead[g], g, "Batched", table_id);
		ck_assert_int_eq(status_of(r), SHOAL_OK);
		FREE(r);
	}
	int l = lead[1];
	/* A group this node does not lead, for a NOT_LEADER member. */
	uint32_t other = 0;
	for (uint32_t g = 1; g < GROUPS; g++)
		if (lead[g] != l)
			other = g;

	/* 40 puts, a write to a group led elsewhere, a read, a status, bytes
	 * that are not a NodeRequest, and a member that is a batch itself. */
	enum { PUTS = 40 };
	Shoal__NodeRequest b = SHOAL__NODE_REQUEST__INIT;
	ProtobufCBinaryData mem[PUTS + 5];
	size_t n = 0;
	for (int i = 0; i < PUTS; i++) {
		char item[96];
		snprintf(item, sizeof(item), "{\"pk\":{\"S\":\"b%d\"},\"v\":{\"S\":\"v%d\"}}", i,
		         i);
		mem[n++] = put_req(1, "Batched", item, 1000 + (uint64_t)i);
	}
	size_t not_leader = n;
	mem[n++] = other != 0 ? put_req(other, "Batched", "{\"pk\":{\"S\":\"x\"}}", 5)
	                      : put_req(1, "Batched", "{\"pk\":{\"S\":\"x\"}}", 5);
	size_t read = n;
	mem[n++] = get_req(1, "Batched", "{\"pk\":{\"S\":\"b0\"}}", true, 6);
	Shoal__NodeRequest st = SHOAL__NODE_REQUEST__INIT;
	st.group = 0;
	st.group_status = 1;
	size_t status = n;
	mem[n++] = packed(&st);
	size_t garbage = n;
	static uint8_t junk[] = {0xff, 0xff, 0xff};
	mem[n++] = (ProtobufCBinaryData){sizeof(junk), junk};
	Shoal__NodeRequest inner = SHOAL__NODE_REQUEST__INIT;
	inner.n_batch = 1;
	inner.batch = &mem[0];
	inner.group_status = 1;
	size_t nested = n;
	mem[n++] = packed(&inner);
	b.n_batch = n;
	b.batch = mem;
	size_t len = shoal__node_request__get_packed_size(&b);
	uint8_t *buf = sh_arena_alloc(&A, len);
	shoal__node_request__pack(&b, buf);

	/* Raft indexes through LMDB's applied index: it is written with the
	 * data, before the answer leaves (the published commit index lags by
	 * up to a loop iteration). */
	st_env *env1 = node_group_env(node_group_get(T[l].n, 1));
	uint64_t applied0 = st_env_applied(env1);
	uint64_t wakes0 = atomic_load(&T[l].n->stats.loop_wakes);
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000), 0);
	ck_assert_int_eq(nng_dial(s, T[l].rpc, NULL, 0), 0);
	ck_assert_int_eq(nng_send(s, buf, len, 0), 0);
	void *rb;
	size_t rl;
	ck_assert_int_eq(nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC), 0);
	nng_close(s);
	r = shoal__node_response__unpack(NULL, rl, rb);
	nng_free(rb, rl);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_null(r->response);
	ck_assert_uint_eq(r->n_batch, n);
	for (size_t i = 0; i < PUTS; i++) {
		m = member(r, i);
		ck_assert_msg(status_of(m) == SHOAL_OK, "member %zu: %s", i, m->response->message);
		ck_assert_uint_eq(m->response->request_id, 1000 + i);
		ck_assert_int_eq(m->response->result_case, SHOAL__RESPONSE__RESULT_PUT_ITEM);
		FREE(m);
	}
	m = member(r, not_leader);
	if (other != 0) {
		ck_assert_int_eq(status_of(m), SHOAL_E_NOT_LEADER);
		ck_assert_int_eq(m->leader_node, lead[other]);
	}
	FREE(m);
	m = member(r, read);
	ck_assert_int_eq(status_of(m), SHOAL_OK);
	ck_assert_uint_eq(m->response->request_id, 6);
	FREE(m);
	m = member(r, status);
	ck_assert_int_eq(status_of(m), SHOAL_OK);
	ck_assert_ptr_nonnull(m->status);
	FREE(m);
	m = member(r, garbage);
	ck_assert_int_eq(status_of(m), SHOAL_E_SERIALIZATION);
	FREE(m);
	m = member(r, nested);
	ck_assert_int_eq(status_of(m), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(m->response->message, "cannot be a batch"));
	FREE(m);
	FREE(r);
	/* The puts went through Raft together: the loop was woken once the
	 * whole batch was queued (node_wake_hold), so they are one Command,
	 * the entry right after the last one applied (the consistent read's
	 * barrier follows it).  Woken on the first put, the loop would propose
	 * it alone, then the barrier, then the other 39. */
	uint64_t entries = st_env_applied(env1) - applied0;
	ck_assert_msg(entries == 1, "%llu Raft entries for %d puts", (unsigned long long)entries,
	              PUTS);
	/* That held for sure because the batch woke the loop once, not once
	 * per write (a few other wake-ups may come from elsewhere). */
	uint64_t wakes = atomic_load(&T[l].n->stats.loop_wakes) - wakes0;
	ck_assert_msg(wakes <= 4, "the loop was woken %llu times for one batch",
	              (unsigned long long)wakes);
	/* node_wake_hold itself, on a node with no loop (nothing else wakes
	 * it): wakes are owed until the outermost release. */
	static node quiet;
	ck_assert_int_eq(pthread_mutex_init(&quiet.wake_mu, NULL), 0);
	node_wake_hold();
	node_wake_hold();
	node_wake(&quiet);
	node_wake(&quiet);
	node_wake_release();
	ck_assert_uint_eq(atomic_load(&quiet.stats.loop_wakes), 0);
	node_wake_release();
	ck_assert_uint_eq(atomic_load(&quiet.stats.loop_wakes), 1);
	node_wake(&quiet);
	ck_assert_uint_eq(atomic_load(&quiet.stats.loop_wakes), 2);
	pthread_mutex_destroy(&quiet.wake_mu);

	/* Every put is there. */
	for (int i = 0; i < PUTS; i++) {
		char key[64], want[16];
		snprintf(key, sizeof(key), "{\"pk\":{\"S\":\"b%d\"}}", i);
		snprintf(want, sizeof(want), "v%d", i);
		r = get(l, 1, "Batched", key, false);
		ck_assert_str_eq(got_v(r), want);
		FREE(r);
	}

	/* A batch with anything else in it is refused as a whole. */
	Shoal__NodeRequest mixed = SHOAL__NODE_REQUEST__INIT;
	mixed.n_batch = 1;
	mixed.batch = &mem[read];
	mixed.group_status = 1;
	r = rpc(l, &mixed);
	ck_assert_int_eq(status_of(r), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(r->response->message, "nothing but its requests"));
	ck_assert_uint_eq(r->n_batch, 0);
	FREE(r);

	/* The node keeps serving plain requests. */
	r = group_status(l, 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

/* test_snapshot_budget's item k (~100 KB) put at node l, group 1; *st
 * the group's status after it. */
static void put_big(int l, int k, node_group_status *st)
{
	static char item[120000], v[100001];
	if (v[0] == '\0')
		memset(v, 'x', sizeof(v) - 1);
	snprintf(item, sizeof(item), "{\"pk\":{\"S\":\"k%d\"},\"v\":{\"S\":\"%s\"}}", k, v);
	Shoal__NodeResponse *r = put(l, 1, "Big", item, (uint64_t)k + 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	sh_arena_reset(&A);
	node_group_status_get(node_group_get(T[l].n, 1), st);
}

/* raft holds every entry since the last snapshot in memory: a group of
 * large entries snapshots after its log budget (node.h NODE_LOG_BUDGET),
 * not after 65536 entries; the budget grows with the group's data. */
START_TEST(test_snapshot_budget)
{
	sh_arena_init(&A);
	cluster_start();
	Shoal__NodeResponse *r;
	int l0 = wait_leader(0, 0);
	r = define(l0, 0, "Big", 0);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	int l1 = wait_leader(1, 0);
	r = define(l1, 1, "Big", 1);
	ck_assert_int_eq(status_of(r), SHOAL_OK);
	FREE(r);
	node_group_status st;
	uint64_t deadline = node_now_ns() + 60 * SEC;
	int i = 0;
	do
		put_big(l1, i++, &st);
	while (st.snapshot_index == 0 && i < 1000 && node_now_ns() < deadline);
	/* ~100 KB entries: a 32 MiB log is a few hundred of them. */
	ck_assert_uint_ge(st.entry_bytes, 90000);
	ck_assert_uint_lt(st.snapshot_threshold, 1000);
	ck_assert_uint_gt(st.snapshot_index, 0);
	ck_assert_int_lt(i, 1000);
	/* The budget grows with the group's data (a snapshot writes all of
	 * it): half the data past 64 MiB, retuned when it moved by a quarter
	 * (at ~80 MiB of data). */
	uint32_t first = st.snapshot_threshold;
	int more = i + 900;
	deadline = node_now_ns() + 60 * SEC;
	do
		put_big(l1, i++, &st);
	while (st.snapshot_threshold <= first && i < more && node_now_ns() < deadline);
	ck_assert_msg(st.snapshot_threshold > first,
	              "snapshot threshold %u after %d puts of 100 KB (%u at the first snapshot)",
	              st.snapshot_threshold, i, first);
	cluster_stop();
	sh_arena_fini(&A);
}
END_TEST

static Suite *node_suite(void)
{
	Suite *s = suite_create("node");
	TCase *tc = tcase_create("cluster");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cluster);
	tcase_add_test(tc, test_hostile_input);
	tcase_add_test(tc, test_failover_and_restart);
	tcase_add_test(tc, test_write_token);
	tcase_add_test(tc, test_stop_under_load);
	tcase_add_test(tc, test_index_shipping);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_snapshot_budget);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(node_suite)
