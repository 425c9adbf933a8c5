/*
 * The router's pipeline (router/job.c, call.c) and its server
 * (router/server.c), end to end: a real REP listener (rt_server_start), a
 * client REQ socket, and fake nodes (nng REP servers in threads) that check
 * the hand-written NodeRequest and script their answers: plain answers are
 * passed on byte for byte; NOT_LEADER hints are followed, ResourceNotFound
 * repaired, silence retried until the deadline, unknown tables looked up;
 * requests for one node share messages; stopping with requests in flight
 * is clean.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "router/router.h"
#include "tests/lib/testlib.h"

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

/* Ports base+1..3 (the fake nodes) and base+5 (the router), claimed the
 * way every test claims its ports (tl_free_ports: other test binaries
 * running at once stay off them -- a port only probed free once met
 * test_tls_name's listener in CI). */
static int base_port(void)
{
	static int chosen;
	if (chosen == 0)
		chosen = tl_free_ports(6);
	return chosen;
}

static sh_cluster_conf *make_conf(void)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/cluster.ini", tl_tmpdir("pipeline"));
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[cluster]\ngroups = 4\nreplication = 3\n");
	for (int i = 1; i <= 3; i++)
		fprintf(f, "[node.%d]\nraft = 127.0.0.1:%d\nrpc = tcp://127.0.0.1:%d\n", i,
		        base_port() + 100 * i, base_port() + i);
	fclose(f);
	sh_cluster_conf *c = sh_malloc(sizeof(*c));
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_cluster_load(path, c, msg), SHOAL_OK);
	return c;
}

/* ------------------------------------------------------------------------ */
/* Fake nodes                                                                */
/* ------------------------------------------------------------------------ */

/* What the fakes do (set by each test, read under mu). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t leader = 3; /* answers writes and consistent reads */
static bool lost_table;     /* data groups answer ResourceNotFound once */
static bool silent_node2;   /* node 2 never answers */
static int defines_seen;    /* define_table received (repair) */
static int calls[4];        /* item requests per node id */
static int bad_requests;    /* NodeRequests that did not look right */
static uint64_t last_request_id;
static int delay_ms;     /* every message waits this long for its answer */
static int batches_seen; /* NodeRequest batches received */
static int garbled;      /* batch members answered with junk ("garble" keys) */

typedef struct fake {
	uint32_t id;
	nng_socket sock;
	pthread_t th;
} fake;
static fake fakes[3];

static Shoal__NodeResponse *status_answer(sh_arena *a, int code, const char *msg)
{
	Shoal__NodeResponse *nr = sh_arena_alloc(a, sizeof(*nr));
	Shoal__Response *r = sh_arena_alloc(a, sizeof(*r));
	shoal__node_response__init(nr);
	shoal__response__init(r);
	nr->response = r;
	if (code != SHOAL_OK)
		wire_response_set_error(a, r, code, msg, NULL, NULL);
	return nr;
}

static Shoal__NodeResponse *catalog(sh_arena *a)
{
	st_key_attr attrs[1] = {{"PK", ST_S}};
	st_table_def def = {
	    .name = "tbl", .key = {.hash = {"PK", ST_S}}, .attrs = attrs, .n_attrs = 1};
	Shoal__TableDefine *d = sh_arena_alloc(a, sizeof(*d));
	shoal__table_define__init(d);
	ck_assert_int_eq(wire_create_table_to_pb(a, &def, &d->def, NULL), SHOAL_OK);
	d->table_id = 7;
	d->created_ms = 1700000000007;
	Shoal__NodeResponse *nr = status_answer(a, SHOAL_OK, NULL);
	nr->catalog = sh_arena_alloc(a, sizeof(*nr->catalog));
	nr->catalog[0] = d;
	nr->n_catalog = 1;
	return nr;
}

static Shoal__NodeResponse *serve(fake *f, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (req->list_catalog)
		return catalog(a);
	if (req->define_table != NULL) {
		defines_seen++;
		lost_table = false;
		return status_answer(a, SHOAL_OK, NULL);
	}
	if (req->request == NULL) {
		bad_requests++;
		return status_answer(a, SHOAL_E_VALIDATION, "no request");
	}
	calls[f->id]++;
	last_request_id = req->request->request_id;
	if (f->id == 2 && silent_node2)
		return NULL;
	const Shoal__GetItemRequest *g =
	    req->request->op_case == SHOAL__REQUEST__OP_GET_ITEM ? req->request->get_item : NULL;
	/* The router must have said what it means: reads that any replica may
	 * serve are exactly the eventually consistent GetItems. */
	if (req->any_replica != (g != NULL && !g->consistent_read) || req->group == 0)
		bad_requests++;
	if (!req->any_replica && f->id != leader) {
		Shoal__NodeResponse *nr = status_answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = leader;
		return nr;
	}
	if (lost_table)
		return status_answer(a, SHOAL_E_NOT_FOUND,
		                     "Requested resource not found: Table: tbl not found");
	Shoal__NodeResponse *nr = status_answer(a, SHOAL_OK, NULL);
	nr->leader_node = 99; /* ignored: only NOT_LEADER carries a hint */
	if (g != NULL) {
		Shoal__GetItemResponse *gr = sh_arena_alloc(a, sizeof(*gr));
		shoal__get_item_response__init(gr);
		gr->item = g->key;
		nr->response->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
		nr->response->get_item = gr;
	} else {
		Shoal__PutItemResponse *pr = sh_arena_alloc(a, sizeof(*pr));
		shoal__put_item_response__init(pr);
		nr->response->result_case = SHOAL__RESPONSE__RESULT_PUT_ITEM;
		nr->response->put_item = pr;
	}
	nr->response->request_id = req->request->request_id;
	return nr;
}

/* Whether a put's key is "garble" (its batch answer is junk). */
static bool garble(const Shoal__NodeRequest *req)
{
	if (req->request == NULL || req->request->op_case != SHOAL__REQUEST__OP_PUT_ITEM)
		return false;
	const Shoal__Item *it = req->request->put_item->item;
	for (size_t i = 0; it != NULL && i < it->n_attrs; i++)
		if (it->attrs[i]->name.len == 2 && memcmp(it->attrs[i]->name.data, "PK", 2) == 0)
			return it->attrs[i]->value->s.len == 6 &&
			       memcmp(it->attrs[i]->value->s.data, "garble", 6) == 0;
	return false;
}

/* A batch as a node answers it: every member served, answers in order. */
static Shoal__NodeResponse *serve_batch(fake *f, const Shoal__NodeRequest *req, sh_arena *a)
{
	batches_seen++;
	Shoal__NodeResponse *nr = sh_arena_alloc(a, sizeof(*nr));
	shoal__node_response__init(nr);
	nr->n_batch = req->n_batch;
	nr->batch = sh_arena_calloc(a, req->n_batch, sizeof(*nr->batch));
	for (size_t i = 0; i < req->n_batch; i++) {
		Shoal__NodeRequest *m =
		    shoal__node_request__unpack(NULL, req->batch[i].len, req->batch[i].data);
		if (m == NULL || m->n_batch > 0) {
			bad_requests++;
		} else if (garble(m)) {
			garbled++;
			nr->batch[i].data = (uint8_t *)"\xff\xff";
			nr->batch[i].len = 2;
		} else {
			Shoal__NodeResponse *r = serve(f, m, a);
			ck_assert_ptr_nonnull(r); /* silent nodes stay silent as a whole */
			ck_assert_int_eq(
			    wire_pack(a, &r->base, &nr->batch[i].data, &nr->batch[i].len, NULL),
			    SHOAL_OK);
		}
		if (m != NULL)
			shoal__node_request__free_unpacked(m, NULL);
	}
	return nr;
}

static void *fake_loop(void *arg)
{
	fake *f = arg;
	for (;;) {
		void *buf;
		size_t len;
		if (nng_recv(f->sock, &buf, &len, NNG_FLAG_ALLOC) != 0)
			return NULL;
		Shoal__NodeRequest *req = shoal__node_request__unpack(NULL, len, buf);
		nng_free(buf, len);
		if (req == NULL) {
			pthread_mutex_lock(&mu);
			bad_requests++;
			pthread_mutex_unlock(&mu);
			continue;
		}
		sh_arena a;
		sh_arena_init(&a);
		pthread_mutex_lock(&mu);
		int delay = delay_ms;
		bool quiet = f->id == 2 && silent_node2;
		Shoal__NodeResponse *resp = quiet              ? NULL
		                            : req->n_batch > 0 ? serve_batch(f, req, &a)
		                                               : serve(f, req, &a);
		pthread_mutex_unlock(&mu);
		if (delay > 0)
			nng_msleep((nng_duration)delay); /* a slow node (a scripted fake) */
		uint8_t *out;
		size_t out_len;
		if (resp != NULL && wire_pack(&a, &resp->base, &out, &out_len, NULL) == SHOAL_OK)
			nng_send(f->sock, out, out_len, 0);
		shoal__node_request__free_unpacked(req, NULL);
		sh_arena_fini(&a);
	}
}

static void fakes_start(const sh_cluster_conf *c)
{
	leader = 3;
	lost_table = silent_node2 = false;
	defines_seen = bad_requests = delay_ms = batches_seen = garbled = 0;
	memset(calls, 0, sizeof(calls));
	for (uint32_t i = 0; i < 3; i++) {
		fake *f = &fakes[i];
		f->id = c->nodes[i].id;
		ck_assert_int_eq(nng_rep0_open(&f->sock), 0);
		ck_assert_int_eq(nng_listen(f->sock, c->nodes[i].rpc, NULL, 0), 0);
		ck_assert_int_eq(pthread_create(&f->th, NULL, fake_loop, f), 0);
	}
}

static void fakes_stop(void)
{
	for (uint32_t i = 0; i < 3; i++) {
		nng_close(fakes[i].sock);
		pthread_join(fakes[i].th, NULL);
	}
}

/* ------------------------------------------------------------------------ */
/* Router and client                                                         */
/* ------------------------------------------------------------------------ */

static rt_router rt;
static rt_server srv;
static nng_socket client;

static void up_with(uint32_t attempt_ms, uint32_t contexts)
{
	sh_cluster_conf *c = make_conf();
	fakes_start(c);
	rt_options o;
	rt_options_default(&o);
	o.attempt_ms = attempt_ms;
	o.send_ms = 200;
	o.deadline_ms = 3000;
	o.contexts = contexts;
	char msg[SH_ERRMSG_SIZE], url[64];
	ck_assert_int_eq(rt_router_init(&rt, c, &o, msg), SHOAL_OK);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", base_port() + 5);
	ck_assert_msg(rt_server_start(&srv, &rt, url, msg) == SHOAL_OK, "%s", msg);
	ck_assert_int_eq(nng_req0_open(&client), 0);
	ck_assert_int_eq(nng_socket_set_ms(client, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE),
	                 0);
	ck_assert_int_eq(nng_socket_set_ms(client, NNG_OPT_RECVTIMEO, 10000), 0);
	ck_assert_int_eq(nng_dial(client, url, NULL, 0), 0);
}

static void up(void)
{
	up_with(300, 16);
}

static void down(void)
{
	nng_close(client);
	rt_server_stop(&srv, 2000);
	rt_router_fini(&rt);
	fakes_stop();
}

static Shoal__Request *get_req(sh_arena *a, uint64_t id, const char *table, const char *pk,
                               bool consistent)
{
	Shoal__Request *req = sh_arena_alloc(a, sizeof(*req));
	Shoal__GetItemRequest *g = sh_arena_alloc(a, sizeof(*g));
	shoal__request__init(req);
	shoal__get_item_request__init(g);
	req->request_id = id;
	req->op_case = SHOAL__REQUEST__OP_GET_ITEM;
	req->get_item = g;
	WIRE_SET(g, table_name, (char *)table);
	st_value *k = st_new_map(a, 1);
	st_map_set(a, k, "PK", 2, st_new_s(a, pk));
	ck_assert_int_eq(wire_item_to_pb(a, k, &g->key, NULL), SHOAL_OK);
	g->consistent_read = consistent;
	return req;
}

static Shoal__Request *put_req(sh_arena *a, uint64_t id, const char *pk)
{
	Shoal__Request *req = sh_arena_alloc(a, sizeof(*req));
	Shoal__PutItemRequest *p = sh_arena_alloc(a, sizeof(*p));
	shoal__request__init(req);
	shoal__put_item_request__init(p);
	req->request_id = id;
	req->op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	req->put_item = p;
	WIRE_SET(p, table_name, (char *)"tbl");
	st_value *k = st_new_map(a, 2);
	st_map_set(a, k, "PK", 2, st_new_s(a, pk));
	st_map_set(a, k, "v", 1, st_new_s(a, "value"));
	ck_assert_int_eq(wire_item_to_pb(a, k, &p->item, NULL), SHOAL_OK);
	return req;
}

/* Sends req to the router and returns its answer (in a). */
static Shoal__Response *call(sh_arena *a, Shoal__Request *req)
{
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(a, &req->base, &buf, &len, NULL), SHOAL_OK);
	ck_assert_int_eq(nng_send(client, buf, len, 0), 0);
	void *ans;
	size_t ans_len;
	ck_assert_int_eq(nng_recv(client, &ans, &ans_len, NNG_FLAG_ALLOC), 0);
	uint8_t *copy = sh_arena_alloc(a, ans_len + 1);
	memcpy(copy, ans, ans_len);
	nng_free(ans, ans_len);
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	Shoal__Response *resp;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_unpack_response(&alloc, copy, ans_len, &resp, msg), SHOAL_OK);
	ck_assert_uint_eq(resp->request_id, req->request_id);
	return resp;
}

static uint64_t requests(Shoal__Request__OpCase op)
{
	return atomic_load(&rt.metrics.requests[wire_op_of(op)]);
}

/* Node messages that carried several requests, and the requests in them. */
static uint64_t node_batches(bool items)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < rt.conf->n_nodes; i++)
		for (int k = 0; k < RT_CLASS__COUNT; k++)
			n += items ? atomic_load(&rt.nodes[i].lanes[k].batched)
			           : atomic_load(&rt.nodes[i].lanes[k].batches);
	return n;
}

/* Item requests the fake nodes received. */
static int node_calls(void)
{
	pthread_mutex_lock(&mu);
	int n = calls[1] + calls[2] + calls[3];
	pthread_mutex_unlock(&mu);
	return n;
}

/* ------------------------------------------------------------------------ */

START_TEST(test_answers_hints_repair)
{
	up();
	sh_arena a;
	sh_arena_init(&a);

	/* No catalog yet: the job loads it (and follows the hints). */
	Shoal__Response *r = call(&a, get_req(&a, 1, "tbl", "k0", true));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);

	/* Every group's leader learnt (consistent reads go to the leader). */
	for (int i = 0; i < 30; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", i);
		r = call(&a, get_req(&a, 100 + (uint64_t)i, "tbl", pk, true));
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
		ck_assert_int_eq(r->result_case, SHOAL__RESPONSE__RESULT_GET_ITEM);
		ck_assert_ptr_nonnull(r->get_item->item);
	}

	/* Known leaders: one node call each, answered byte for byte what the
	 * node said (request_id checked by call()). */
	int before = node_calls();
	uint64_t retried = atomic_load(&rt.metrics.retries[SH_OUT_NOT_LEADER]);
	for (int i = 0; i < 20; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", i);
		r = call(&a, get_req(&a, 200 + (uint64_t)i, "tbl", pk, i % 2 == 0));
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
		ck_assert_uint_eq(r->get_item->item->n_attrs, 1);
		ProtobufCBinaryData got = r->get_item->item->attrs[0]->value->s;
		ck_assert_uint_eq(got.len, strlen(pk));
		ck_assert(memcmp(got.data, pk, got.len) == 0);
		r = call(&a, put_req(&a, 300 + (uint64_t)i, pk));
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
		ck_assert_int_eq(r->result_case, SHOAL__RESPONSE__RESULT_PUT_ITEM);
	}
	ck_assert_uint_eq(atomic_load(&rt.metrics.retries[SH_OUT_NOT_LEADER]), retried);
	ck_assert_int_eq(node_calls(), before + 40);
	pthread_mutex_lock(&mu);
	ck_assert_int_eq(bad_requests, 0);
	/* A new leader: NOT_LEADER with a hint is followed at once; the next
	 * request goes straight there. */
	leader = 1;
	pthread_mutex_unlock(&mu);
	before = node_calls();
	r = call(&a, put_req(&a, 400, "k1"));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(node_calls(), before + 2);
	ck_assert_uint_eq(atomic_load(&rt.metrics.retries[SH_OUT_NOT_LEADER]), retried + 1);
	r = call(&a, put_req(&a, 401, "k1"));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(node_calls(), before + 3);

	/* ResourceNotFound from a data group: the job repairs and retries. */
	pthread_mutex_lock(&mu);
	lost_table = true;
	pthread_mutex_unlock(&mu);
	r = call(&a, put_req(&a, 500, "k1"));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_uint_eq(atomic_load(&rt.metrics.repairs), 1);
	ck_assert_int_eq(defines_seen, 1);

	/* An unknown table: the job refreshes the catalog and says so. */
	r = call(&a, get_req(&a, 600, "nope", "k", false));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_NOT_FOUND);
	ck_assert_str_eq(r->message, "Requested resource not found: Table: nope not found");

	/* Every request counted once. */
	ck_assert_uint_eq(requests(SHOAL__REQUEST__OP_GET_ITEM), 1 + 30 + 20 + 1);
	ck_assert_uint_eq(requests(SHOAL__REQUEST__OP_PUT_ITEM), 20 + 3);
	sh_arena_fini(&a);
	down();
}
END_TEST

START_TEST(test_timeout_and_stop)
{
	up();
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Response *r = call(&a, get_req(&a, 1, "tbl", "k0", true));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	/* Node 2 leads and then goes silent: the attempt times out
	 * (attempt_ms), the call tries the others, is told node 2 leads, and
	 * answers ServiceUnavailable at the deadline -- not before, not much
	 * later. */
	pthread_mutex_lock(&mu);
	leader = 2;
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 10; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", i);
		r = call(&a, put_req(&a, 10 + (uint64_t)i, pk));
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	}
	pthread_mutex_lock(&mu);
	silent_node2 = true;
	pthread_mutex_unlock(&mu);
	int64_t t0 = rt_now_ms();
	r = call(&a, put_req(&a, 99, "k3"));
	int64_t took = rt_now_ms() - t0;
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_UNAVAILABLE);
	ck_assert_int_ge(took, 2500);
	ck_assert_int_lt(took, 4500);
	ck_assert_uint_ge(atomic_load(&rt.metrics.retries[SH_OUT_TIMEOUT]), 1);

	/* Stopping with requests in flight (some waiting for silent node 2):
	 * the drain gives up after its time, every aio stops, nothing leaks
	 * (sanitizer builds check). */
	nng_socket c2;
	ck_assert_int_eq(nng_req0_open(&c2), 0);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", base_port() + 5);
	ck_assert_int_eq(nng_dial(c2, url, NULL, 0), 0);
	nng_ctx ctxs[8];
	nng_aio *aios[8];
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(nng_ctx_open(&ctxs[i], c2), 0);
		ck_assert_int_eq(nng_aio_alloc(&aios[i], NULL, NULL), 0);
		char pk[16];
		snprintf(pk, sizeof(pk), "s%d", i);
		uint8_t *buf;
		size_t len;
		ck_assert_int_eq(
		    wire_pack(&a, &put_req(&a, 1000 + (uint64_t)i, pk)->base, &buf, &len, NULL),
		    SHOAL_OK);
		nng_msg *m;
		ck_assert_int_eq(nng_msg_alloc(&m, len), 0);
		memcpy(nng_msg_body(m), buf, len);
		nng_aio_set_msg(aios[i], m);
		nng_ctx_send(ctxs[i], aios[i]);
	}
	for (int i = 0; i < 8; i++) {
		nng_aio_wait(aios[i]);
		ck_assert_int_eq(nng_aio_result(aios[i]), 0);
	}
	nng_msleep(100);
	nng_close(client);
	t0 = rt_now_ms();
	rt_server_stop(&srv, 200);
	ck_assert_int_lt(rt_now_ms() - t0, 4000);
	rt_router_fini(&rt);
	nng_close(c2);
	for (int i = 0; i < 8; i++)
		nng_aio_free(aios[i]);
	fakes_stop();
	sh_arena_fini(&a);
}
END_TEST

/* Requests sent at once on their own contexts of the client socket. */
typedef struct burst {
	uint32_t n;
	nng_ctx ctx[64];
	nng_aio *aio[64];
	Shoal__Request *req[64];
} burst;

static void burst_send(sh_arena *a, burst *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		ck_assert_int_eq(nng_ctx_open(&b->ctx[i], client), 0);
		ck_assert_int_eq(nng_aio_alloc(&b->aio[i], NULL, NULL), 0);
		nng_aio_set_timeout(b->aio[i], 10000);
		uint8_t *buf;
		size_t len;
		ck_assert_int_eq(wire_pack(a, &b->req[i]->base, &buf, &len, NULL), SHOAL_OK);
		nng_msg *m;
		ck_assert_int_eq(nng_msg_alloc(&m, len), 0);
		memcpy(nng_msg_body(m), buf, len);
		nng_aio_set_msg(b->aio[i], m);
		nng_ctx_send(b->ctx[i], b->aio[i]);
	}
}

/* Waits for every answer of b; each must answer its own request. */
static void burst_check(sh_arena *a, burst *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		nng_aio_wait(b->aio[i]);
		ck_assert_int_eq(nng_aio_result(b->aio[i]), 0);
		nng_ctx_recv(b->ctx[i], b->aio[i]);
	}
	for (uint32_t i = 0; i < b->n; i++) {
		nng_aio_wait(b->aio[i]);
		ck_assert_int_eq(nng_aio_result(b->aio[i]), 0);
		nng_msg *m = nng_aio_get_msg(b->aio[i]);
		ProtobufCAllocator alloc;
		wire_arena_allocator(&alloc, a);
		uint8_t *copy = sh_arena_memdup(a, nng_msg_body(m), nng_msg_len(m));
		Shoal__Response *r;
		ck_assert_int_eq(wire_unpack_response(&alloc, copy, nng_msg_len(m), &r, NULL),
		                 SHOAL_OK);
		nng_msg_free(m);
		ck_assert_uint_eq(r->request_id, b->req[i]->request_id);
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
		ck_assert_int_eq(r->result_case, b->req[i]->op_case == SHOAL__REQUEST__OP_PUT_ITEM
		                                     ? SHOAL__RESPONSE__RESULT_PUT_ITEM
		                                     : SHOAL__RESPONSE__RESULT_GET_ITEM);
		if (r->result_case == SHOAL__RESPONSE__RESULT_GET_ITEM) {
			/* The fake echoes the key: this request's key. */
			ProtobufCBinaryData want = b->req[i]->get_item->key->attrs[0]->value->s,
			                    got = r->get_item->item->attrs[0]->value->s;
			ck_assert_uint_eq(got.len, want.len);
			ck_assert(memcmp(got.data, want.data, got.len) == 0);
		}
		nng_ctx_close(b->ctx[i]);
		nng_aio_free(b->aio[i]);
	}
}

/* A slow node: requests queue for its lanes and leave in batches; every
 * answer reaches its own client; a member answered with junk alone is
 * asked again. */
START_TEST(test_node_batches)
{
	up_with(2500, 64); /* every request of the burst is received at once */
	sh_arena a;
	sh_arena_init(&a);
	/* The first job loads the catalog, and consistent reads teach the
	 * router every data group's leader (node 3). */
	bool learnt = false;
	for (int i = 0; i < 200 && !learnt; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", i);
		Shoal__Response *r = call(&a, get_req(&a, 1 + (uint64_t)i, "tbl", pk, true));
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
		learnt = true;
		for (uint32_t g = 1; g < rt.conf->groups; g++)
			learnt = learnt && atomic_load(&rt.leader[g]) == 3;
	}
	ck_assert(learnt);
	uint64_t bad_answers = atomic_load(&rt.metrics.retries[SH_OUT_BAD_ANSWER]);
	uint64_t batches0 = node_batches(false), batched0 = node_batches(true);
	pthread_mutex_lock(&mu);
	/* The fake answers one message at a time: 4 lanes' worth stays
	 * below attempt_ms, and the whole burst is sent long before the
	 * first answer, so all but the first few requests queue. */
	delay_ms = 100;
	pthread_mutex_unlock(&mu);
	burst b = {.n = 48};
	for (uint32_t i = 0; i < b.n; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "b%u", i);
		/* Writes and eventually consistent reads, which use other lanes. */
		b.req[i] = i % 3 == 2 ? get_req(&a, 1000 + i, "tbl", pk, false)
		                      : put_req(&a, 1000 + i, i == b.n - 2 ? "garble" : pk);
	}
	burst_send(&a, &b);
	burst_check(&a, &b);
	/* Only 2 + 2 lanes per node: most requests shared a message. */
	uint64_t batches = node_batches(false) - batches0;
	uint64_t batched = node_batches(true) - batched0;
	ck_assert_uint_ge(batches, 1);
	ck_assert_uint_ge(batched, b.n / 2);
	pthread_mutex_lock(&mu);
	ck_assert_int_eq(batches_seen, (int)node_batches(false));
	ck_assert_int_eq(bad_requests, 0);
	ck_assert_int_ge(garbled, 1);
	/* The junk answer's request was asked again (each junk answer once). */
	ck_assert_uint_eq(atomic_load(&rt.metrics.retries[SH_OUT_BAD_ANSWER]),
	                  bad_answers + (uint64_t)garbled);
	pthread_mutex_unlock(&mu);
	sh_arena_fini(&a);
	down();
}
END_TEST

/* A client's Request batch: every member answered as if it came alone, in
 * order, in one Response; bad members fail alone. */
START_TEST(test_client_batch)
{
	up();
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Response *r = call(&a, get_req(&a, 1, "tbl", "k0", true)); /* catalog */
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);

	ProtobufCBinaryData mem[6];
	size_t n = 0;
	Shoal__Request *parts[] = {get_req(&a, 11, "tbl", "k1", false), put_req(&a, 12, "k2"),
	                           get_req(&a, 13, "nope", "k", false)};
	for (size_t i = 0; i < 3; i++, n++)
		ck_assert_int_eq(wire_pack(&a, &parts[i]->base, &mem[n].data, &mem[n].len, NULL),
		                 SHOAL_OK);
	static uint8_t junk[] = {0xff, 0xff};
	mem[n++] = (ProtobufCBinaryData){sizeof(junk), junk};
	Shoal__Request nested = SHOAL__REQUEST__INIT;
	nested.n_batch = 1;
	nested.batch = &mem[0];
	ck_assert_int_eq(wire_pack(&a, &nested.base, &mem[n].data, &mem[n].len, NULL), SHOAL_OK);
	n++;
	Shoal__Request b = SHOAL__REQUEST__INIT;
	b.n_batch = n;
	b.batch = mem;
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&a, &b.base, &buf, &len, NULL), SHOAL_OK);
	ck_assert_int_eq(nng_send(client, buf, len, 0), 0);
	void *ans;
	size_t ans_len;
	ck_assert_int_eq(nng_recv(client, &ans, &ans_len, NNG_FLAG_ALLOC), 0);
	Shoal__Response *whole = shoal__response__unpack(NULL, ans_len, ans);
	nng_free(ans, ans_len);
	ck_assert_ptr_nonnull(whole);
	ck_assert_uint_eq(whole->n_batch, n);
	int want[] = {SHOAL__STATUS__STATUS_OK, SHOAL__STATUS__STATUS_OK,
	              SHOAL__STATUS__STATUS_NOT_FOUND, SHOAL__STATUS__STATUS_SERIALIZATION,
	              SHOAL__STATUS__STATUS_VALIDATION};
	uint64_t ids[] = {11, 12, 13, 0, 0};
	for (size_t i = 0; i < n; i++) {
		Shoal__Response *m =
		    shoal__response__unpack(NULL, whole->batch[i].len, whole->batch[i].data);
		ck_assert_ptr_nonnull(m);
		ck_assert_msg((int)m->status == want[i], "member %zu: status %d (%s)", i,
		              (int)m->status, m->message);
		ck_assert_uint_eq(m->request_id, ids[i]);
		if (i == 0) /* the fake echoes the key */
			ck_assert(m->get_item->item->attrs[0]->value->s.len == 2 &&
			          memcmp(m->get_item->item->attrs[0]->value->s.data, "k1", 2) == 0);
		if (i == 4)
			ck_assert_ptr_nonnull(strstr(m->message, "cannot be a batch"));
		shoal__response__free_unpacked(m, NULL);
	}
	shoal__response__free_unpacked(whole, NULL);
	ck_assert_uint_eq(atomic_load(&rt.metrics.client_batches), 1);
	ck_assert_uint_eq(atomic_load(&rt.metrics.client_batched), n);

	/* A client batch's writes for one node leave in one node message
	 * (the cork of server.c), not the first alone and the rest behind it. */
	for (int i = 0; i < 30; i++) { /* teach the router every group's leader */
		char pk[16];
		snprintf(pk, sizeof(pk), "w%d", i);
		ck_assert_int_eq(call(&a, put_req(&a, 700 + (uint64_t)i, pk))->status,
		                 SHOAL__STATUS__STATUS_OK);
	}
	ProtobufCBinaryData puts[10];
	for (int i = 0; i < 10; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "w%d", i);
		ck_assert_int_eq(wire_pack(&a, &put_req(&a, 800 + (uint64_t)i, pk)->base,
		                           &puts[i].data, &puts[i].len, NULL),
		                 SHOAL_OK);
	}
	Shoal__Request pb = SHOAL__REQUEST__INIT;
	pb.n_batch = 10;
	pb.batch = puts;
	uint64_t batched = node_batches(true);
	ck_assert_int_eq(wire_pack(&a, &pb.base, &buf, &len, NULL), SHOAL_OK);
	ck_assert_int_eq(nng_send(client, buf, len, 0), 0);
	ck_assert_int_eq(nng_recv(client, &ans, &ans_len, NNG_FLAG_ALLOC), 0);
	whole = shoal__response__unpack(NULL, ans_len, ans);
	nng_free(ans, ans_len);
	ck_assert_uint_eq(whole->n_batch, 10);
	shoal__response__free_unpacked(whole, NULL);
	ck_assert_uint_eq(node_batches(true), batched + 10);

	/* A batch with an operation beside it is refused as a whole. */
	Shoal__Request *mixed = get_req(&a, 20, "tbl", "k1", false);
	mixed->n_batch = 1;
	mixed->batch = mem;
	ck_assert_int_eq(wire_pack(&a, &mixed->base, &buf, &len, NULL), SHOAL_OK);
	ck_assert_int_eq(nng_send(client, buf, len, 0), 0);
	ck_assert_int_eq(nng_recv(client, &ans, &ans_len, NNG_FLAG_ALLOC), 0);
	whole = shoal__response__unpack(NULL, ans_len, ans);
	nng_free(ans, ans_len);
	ck_assert_int_eq(whole->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_uint_eq(whole->n_batch, 0);
	ck_assert_ptr_nonnull(strstr(whole->message, "nothing but its requests"));
	shoal__response__free_unpacked(whole, NULL);
	/* The router goes on answering lone requests. */
	r = call(&a, get_req(&a, 30, "tbl", "k3", false));
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	sh_arena_fini(&a);
	down();
}
END_TEST

static Suite *pipeline_suite(void)
{
	Suite *s = suite_create("pipeline");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_answers_hints_repair);
	tcase_add_test(tc, test_timeout_and_stop);
	tcase_add_test(tc, test_node_batches);
	tcase_add_test(tc, test_client_batch);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(pipeline_suite)
