/*
 * The replicated state machine of a storage group (node/fsm*.c), driven by
 * libraft 0.15's deterministic fixture (raft/fixture.h): three servers, each
 * with its own node_fsm over its own LMDB directory; elections, crashes and
 * snapshot installs happen in simulated time with no sockets and no sleeps.
 * Some tests call the raft_fsm callbacks directly, with a struct raft whose
 * last_applied they set, to apply one entry at a chosen index.
 */
#include <check.h>
#include <raft.h>
#include <raft/fixture.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "node/fsm.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/index.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

#define N_SERVERS     3
#define MAX_PROPOSALS 256
#define STEP_MS       20000 /* simulated time budget of every step_until */

static char msg[SH_ERRMSG_SIZE];
static sh_arena A;     /* test scratch, reset by each test's teardown */
static int64_t cmd_ts; /* Command.ts_ms of the commands built by command() */

/* ------------------------------------------------------------------------ */
/* Building commands                                                         */
/* ------------------------------------------------------------------------ */

static st_value *item(const char *json)
{
	st_value *v = sh_arena_alloc(&A, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	ck_assert_msg(wire_item_from_text(&A, json, strlen(json), v, msg) == SHOAL_OK, "%s: %s",
	              json, msg);
	return v;
}

static Shoal__CommandOp *new_op(void)
{
	Shoal__CommandOp *op = sh_arena_alloc(&A, sizeof(*op));
	ck_assert_ptr_nonnull(op);
	shoal__command_op__init(op);
	return op;
}

/* A TableDefine of table `name` (pk S, sk N) with the given id. */
static Shoal__CommandOp *op_define(const char *name, uint32_t id)
{
	st_key_attr *attrs = sh_arena_calloc(&A, 2, sizeof(*attrs));
	attrs[0] = (st_key_attr){"pk", ST_S};
	attrs[1] = (st_key_attr){"sk", ST_N};
	st_table_def def = {.name = name,
	                    .key = {.hash = {"pk", ST_S}, .range = {"sk", ST_N}},
	                    .attrs = attrs,
	                    .n_attrs = 2};
	Shoal__CreateTableRequest *ct;
	ck_assert_msg(wire_create_table_to_pb(&A, &def, &ct, msg) == SHOAL_OK, "%s", msg);
	Shoal__TableDefine *td = sh_arena_alloc(&A, sizeof(*td));
	shoal__table_define__init(td);
	td->def = ct;
	td->table_id = id;
	td->created_ms = 1700000000000 + id;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	op->define_table = td;
	return op;
}

static Shoal__CommandOp *op_drop(const char *name)
{
	Shoal__TableDrop *td = sh_arena_alloc(&A, sizeof(*td));
	shoal__table_drop__init(td);
	td->table_name = (char *)name;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DROP_TABLE;
	op->drop_table = td;
	return op;
}

/* PutItem of a JSON item; cond may be NULL.  A failed condition returns the
 * old item (ReturnValuesOnConditionCheckFailure ALL_OLD). */
static Shoal__CommandOp *op_put(const char *table, const char *json, const char *cond)
{
	st_put_req req = {.table = table,
	                  .item = item(json),
	                  .condition = cond,
	                  .return_old_on_condition_fail = cond != NULL};
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_PUT;
	ck_assert_msg(wire_put_req_to_pb(&A, &req, &op->put, msg) == SHOAL_OK, "%s", msg);
	return op;
}

/* UpdateItem "ADD c :one" on key (pk, sk). */
static Shoal__CommandOp *op_add(const char *table, const char *key_json)
{
	st_update_req req = {.table = table,
	                     .key = item(key_json),
	                     .update = "ADD c :one",
	                     .attrs = {.values = item("{\":one\":{\"N\":\"1\"}}")}};
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_UPDATE;
	ck_assert_msg(wire_update_req_to_pb(&A, &req, &op->update, msg) == SHOAL_OK, "%s", msg);
	return op;
}

static Shoal__CommandOp *op_delete(const char *table, const char *key_json)
{
	st_delete_req req = {.table = table, .key = item(key_json)};
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DELETE;
	ck_assert_msg(wire_delete_req_to_pb(&A, &req, &op->delete_, msg) == SHOAL_OK, "%s", msg);
	return op;
}

/* BatchWriteItem on one table: puts of items[0..n_put), then deletes of
 * keys[0..n_del). */
static Shoal__CommandOp *op_batch(const char *table, const char **puts, int n_put,
                                  const char **dels, int n_del)
{
	Shoal__TableWriteRequests *tw = sh_arena_alloc(&A, sizeof(*tw));
	shoal__table_write_requests__init(tw);
	tw->table_name = (char *)table;
	tw->n_requests = (size_t)(n_put + n_del);
	tw->requests = sh_arena_calloc(&A, tw->n_requests, sizeof(*tw->requests));
	for (int i = 0; i < n_put + n_del; i++) {
		Shoal__WriteRequest *wr = sh_arena_alloc(&A, sizeof(*wr));
		shoal__write_request__init(wr);
		Shoal__Item *pb;
		ck_assert_int_eq(
		    wire_item_to_pb(&A, item(i < n_put ? puts[i] : dels[i - n_put]), &pb, msg),
		    SHOAL_OK);
		if (i < n_put) {
			wr->request_case = SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST;
			wr->put_request = sh_arena_alloc(&A, sizeof(*wr->put_request));
			shoal__put_request__init(wr->put_request);
			wr->put_request->item = pb;
		} else {
			wr->request_case = SHOAL__WRITE_REQUEST__REQUEST_DELETE_REQUEST;
			wr->delete_request = sh_arena_alloc(&A, sizeof(*wr->delete_request));
			shoal__delete_request__init(wr->delete_request);
			wr->delete_request->key = pb;
		}
		tw->requests[i] = wr;
	}
	Shoal__BatchWriteItemRequest *bw = sh_arena_alloc(&A, sizeof(*bw));
	shoal__batch_write_item_request__init(bw);
	bw->n_request_items = 1;
	bw->request_items = sh_arena_alloc(&A, sizeof(*bw->request_items));
	bw->request_items[0] = tw;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_BATCH_WRITE;
	op->batch_write = bw;
	return op;
}

static Shoal__Command *command(uint32_t proposer, uint64_t batch_id, int n, Shoal__CommandOp **ops)
{
	Shoal__Command *c = sh_arena_alloc(&A, sizeof(*c));
	shoal__command__init(c);
	c->proposer = proposer;
	c->batch_id = batch_id;
	c->ts_ms = cmd_ts;
	c->n_ops = (size_t)n;
	c->ops = sh_arena_calloc(&A, (size_t)(n > 0 ? n : 1), sizeof(*c->ops));
	memcpy(c->ops, ops, (size_t)n * sizeof(*ops));
	return c;
}

static struct raft_buffer encode(const Shoal__Command *c)
{
	struct raft_buffer buf;
	ck_assert_msg(node_fsm_encode(c, &buf, msg) == SHOAL_OK, "%s", msg);
	return buf;
}

/* The i-th result of a batch, unpacked (free with
 * shoal__node_response__free_unpacked). */
static Shoal__NodeResponse *result(const node_batch *b, uint32_t i)
{
	ck_assert(b->applied);
	ck_assert_ptr_nonnull(b->results[i]);
	ck_assert_int_eq(wire_check_framing(&shoal__node_response__descriptor, b->results[i],
	                                    b->result_lens[i], msg),
	                 SHOAL_OK);
	Shoal__NodeResponse *r =
	    shoal__node_response__unpack(NULL, b->result_lens[i], b->results[i]);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(r->response);
	return r;
}

static int result_status(const node_batch *b, uint32_t i)
{
	Shoal__NodeResponse *r = result(b, i);
	int s = (int)r->response->status;
	shoal__node_response__free_unpacked(r, NULL);
	return s;
}

/* ------------------------------------------------------------------------ */
/* Reading a replica                                                         */
/* ------------------------------------------------------------------------ */

static st_page scan_all(node_fsm *f, const char *table)
{
	st_scan_req r = {.table = table};
	st_page page;
	ck_assert_msg(st_scan(node_fsm_env(f), &r, &A, &page, msg) == SHOAL_OK, "%s", msg);
	ck_assert_ptr_null(page.last_evaluated_key);
	return page;
}

/* Same items in the same order (page by page) and the same applied index. */
static void assert_same_data(node_fsm *a, node_fsm *b, const char *table)
{
	st_scan_req ra = {.table = table}, rb = {.table = table};
	uint32_t total = 0;
	for (;;) {
		st_page pa, pb;
		ck_assert_msg(st_scan(node_fsm_env(a), &ra, &A, &pa, msg) == SHOAL_OK, "%s", msg);
		ck_assert_msg(st_scan(node_fsm_env(b), &rb, &A, &pb, msg) == SHOAL_OK, "%s", msg);
		ck_assert_uint_eq(pa.count, pb.count);
		for (uint32_t i = 0; i < pa.count; i++)
			ck_assert_msg(st_value_equal(&pa.items[i], &pb.items[i]), "item %u differs",
			              total + i);
		total += pa.count;
		if (pa.last_evaluated_key == NULL) {
			ck_assert_ptr_null(pb.last_evaluated_key);
			break;
		}
		ck_assert_ptr_nonnull(pb.last_evaluated_key);
		ra.exclusive_start_key = pa.last_evaluated_key;
		rb.exclusive_start_key = pb.last_evaluated_key;
	}
	ck_assert_uint_eq(st_env_applied(node_fsm_env(a)), st_env_applied(node_fsm_env(b)));
}

/* The item under (pk, sk) or NULL. */
static st_value *get(node_fsm *f, const char *table, const char *key_json)
{
	st_get_req r = {.table = table, .key = item(key_json)};
	st_value *it;
	ck_assert_msg(st_get_item(node_fsm_env(f), &r, &A, &it, msg) == SHOAL_OK, "%s", msg);
	return it;
}

static const char *num_attr(const st_value *it, const char *name)
{
	const st_value *v = st_map_get(it, name, strlen(name));
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, ST_N);
	return sh_arena_strndup(&A, v->u.str.ptr, v->u.str.len);
}

static const char *key_json(int i)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "{\"pk\":{\"S\":\"k%d\"},\"sk\":{\"N\":\"%d\"}}", i % 7, i);
	return sh_arena_strndup(&A, buf, strlen(buf));
}

static const char *item_json(int i)
{
	char buf[160];
	snprintf(buf, sizeof(buf),
	         "{\"pk\":{\"S\":\"k%d\"},\"sk\":{\"N\":\"%d\"},\"v\":{\"N\":\"%d\"}}", i % 7, i,
	         i * 3);
	return sh_arena_strndup(&A, buf, strlen(buf));
}

/* ------------------------------------------------------------------------ */
/* A fixture cluster                                                         */
/* ------------------------------------------------------------------------ */

/* The FSM as handed to raft: a copy of node_fsm_raft's table (rf.data is
 * the node_fsm, so the copy works as the original) whose snapshot and
 * restore count their calls. */
typedef struct counted_fsm {
	struct raft_fsm rf;
	node_fsm *f;
	unsigned snapshots, restores;
} counted_fsm;

static int counted_snapshot(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n)
{
	counted_fsm *c = (counted_fsm *)rf;
	c->snapshots++;
	return node_fsm_raft(c->f)->snapshot(rf, bufs, n);
}

static int counted_restore(struct raft_fsm *rf, struct raft_buffer *buf)
{
	counted_fsm *c = (counted_fsm *)rf;
	int rv = node_fsm_raft(c->f)->restore(rf, buf);
	if (rv == 0)
		c->restores++;
	return rv;
}

typedef struct proposal {
	struct raft_apply req;
	node_batch batch;
	unsigned server; /* where it was proposed and its batch registered */
	bool done;
	int status;
} proposal;

typedef struct cluster {
	struct raft_fixture fx;
	char dirs[N_SERVERS][4096];
	node_fsm *fsm[N_SERVERS];
	counted_fsm counted[N_SERVERS];
	proposal *props; /* MAX_PROPOSALS */
	unsigned n_props;
	uint64_t next_batch;
} cluster;

static cluster C;

static void cluster_start(uint32_t group)
{
	memset(&C, 0, sizeof(C));
	C.props = calloc(MAX_PROPOSALS, sizeof(*C.props));
	ck_assert_ptr_nonnull(C.props);
	ck_assert_int_eq(raft_fixture_initialize(&C.fx), 0);
	for (unsigned i = 0; i < N_SERVERS; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "fsm%u", i);
		snprintf(C.dirs[i], sizeof(C.dirs[i]), "%s", tl_tmpdir(tag));
		ck_assert_msg(node_fsm_open(C.dirs[i], group, i + 1, &C.fsm[i], msg) == SHOAL_OK,
		              "%s", msg);
		C.counted[i].rf = *node_fsm_raft(C.fsm[i]);
		C.counted[i].rf.snapshot = counted_snapshot;
		C.counted[i].rf.restore = counted_restore;
		C.counted[i].f = C.fsm[i];
		/* raft 0.15's fixture never sets its raft_io's version, and
		 * raft_init refuses an FSM with snapshot_async unless
		 * io->version >= 2 (ioFsmCompat); the in-memory io does
		 * implement async_work, and ioInit leaves the field alone, so
		 * set it before raft_fixture_grow initialises server i. */
		C.fx.servers[i].io.version = 2;
		ck_assert_int_eq(raft_fixture_grow(&C.fx, &C.counted[i].rf), 0);
		node_fsm_attach(C.fsm[i], raft_fixture_get(&C.fx, i));
	}
	struct raft_configuration conf;
	ck_assert_int_eq(raft_fixture_configuration(&C.fx, N_SERVERS, &conf), 0);
	ck_assert_int_eq(raft_fixture_bootstrap(&C.fx, &conf), 0);
	raft_configuration_close(&conf);
	ck_assert_int_eq(raft_fixture_start(&C.fx), 0);
	ck_assert(raft_fixture_step_until_has_leader(&C.fx, STEP_MS));
}

static void cluster_stop(void)
{
	raft_fixture_close(&C.fx); /* fires pending apply callbacks */
	for (unsigned i = 0; i < C.n_props; i++) {
		node_fsm_unregister(C.fsm[C.props[i].server], &C.props[i].batch);
		node_batch_fini(&C.props[i].batch);
	}
	for (unsigned i = 0; i < N_SERVERS; i++) {
		node_fsm_close(C.fsm[i]);
		tl_rmtree(C.dirs[i]);
	}
	free(C.props);
}

static unsigned leader(void)
{
	unsigned l = raft_fixture_leader_index(&C.fx);
	ck_assert_uint_lt(l, N_SERVERS);
	return l;
}

static void apply_cb(struct raft_apply *req, int status, void *res)
{
	(void)res;
	proposal *p = req->data;
	p->done = true;
	p->status = status;
}

/* Proposes ops on server l; returns the proposal. */
static proposal *propose_on(unsigned l, int n, Shoal__CommandOp **ops)
{
	ck_assert_uint_lt(C.n_props, MAX_PROPOSALS);
	proposal *p = &C.props[C.n_props++];
	p->server = l;
	uint64_t id = ++C.next_batch;
	struct raft_buffer buf = encode(command(l + 1, id, n, ops));
	ck_assert_int_eq(node_batch_init(&p->batch, id, (uint32_t)n), SHOAL_OK);
	node_fsm_register(C.fsm[l], &p->batch);
	p->req.data = p;
	int rv = raft_apply(raft_fixture_get(&C.fx, l), &p->req, &buf, 1, apply_cb);
	ck_assert_msg(rv == 0, "raft_apply: %s", raft_strerror(rv));
	return p;
}

/* Proposes ops on the current leader. */
static proposal *propose(int n, Shoal__CommandOp **ops)
{
	return propose_on(leader(), n, ops);
}

static bool proposal_done(struct raft_fixture *fx, void *arg)
{
	(void)fx;
	return ((proposal *)arg)->done;
}

/* Proposes and steps until the proposer's apply callback fired. */
static proposal *propose_wait(int n, Shoal__CommandOp **ops)
{
	proposal *p = propose(n, ops);
	ck_assert(raft_fixture_step_until(&C.fx, proposal_done, p, STEP_MS));
	return p;
}

/* Steps until every live server applied everything the leader has. */
static void settle(void)
{
	struct raft *r = raft_fixture_get(&C.fx, leader());
	ck_assert(raft_fixture_step_until_applied(&C.fx, N_SERVERS, raft_last_index(r), STEP_MS));
}

static Shoal__CommandOp *define_t1(void)
{
	return op_define("tbl", 7);
}

/* ------------------------------------------------------------------------ */
/* (1) Replication                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_replication)
{
	cluster_start(1);
	Shoal__CommandOp *ops[16];
	ops[0] = define_t1();
	proposal *p = propose_wait(1, ops);
	ck_assert_int_eq(p->status, 0);
	ck_assert_int_eq(result_status(&p->batch, 0), SHOAL__STATUS__STATUS_OK);
	Shoal__NodeResponse *r = result(&p->batch, 0);
	ck_assert_uint_eq(r->n_catalog, 1);
	ck_assert_uint_eq(r->catalog[0]->table_id, 7);
	ck_assert_int_eq(r->catalog[0]->created_ms, 1700000000007);
	ck_assert_str_eq(r->catalog[0]->def->table_name, "tbl");
	shoal__node_response__free_unpacked(r, NULL);

	/* 100 puts in batches of 10, pipelined; a follower registers a batch
	 * under the same ids as a decoy: it is not the proposer, so nothing is
	 * built for it. */
	node_batch decoy;
	unsigned f = (leader() + 1) % N_SERVERS;
	ck_assert_int_eq(node_batch_init(&decoy, C.next_batch + 1, 10), SHOAL_OK);
	node_fsm_register(C.fsm[f], &decoy);
	proposal *batches[10];
	for (int b = 0; b < 10; b++) {
		for (int i = 0; i < 10; i++)
			ops[i] = op_put("tbl", item_json(b * 10 + i), NULL);
		batches[b] = propose(10, ops);
	}
	/* A batch mixing outcomes: a failed condition (old item returned), an
	 * ADD, a validation error, a delete and a batch write. */
	const char *bputs[] = {"{\"pk\":{\"S\":\"bw\"},\"sk\":{\"N\":\"1\"}}",
	                       "{\"pk\":{\"S\":\"bw\"},\"sk\":{\"N\":\"2\"}}"};
	const char *bdels[] = {"{\"pk\":{\"S\":\"k1\"},\"sk\":{\"N\":\"1\"}}"};
	ops[0] = op_put("tbl", item_json(5), "attribute_not_exists(pk)");
	ops[1] = op_add("tbl", key_json(6));
	ops[2] = op_put("nosuch", item_json(5), NULL);
	ops[3] = op_delete("tbl", key_json(8));
	ops[4] = op_batch("tbl", bputs, 2, bdels, 1);
	ops[5] = op_add("tbl", key_json(6));
	proposal *mixed = propose(6, ops);
	ck_assert(raft_fixture_step_until(&C.fx, proposal_done, mixed, STEP_MS));
	settle();

	for (int b = 0; b < 10; b++) {
		ck_assert(batches[b]->done);
		ck_assert_int_eq(batches[b]->status, 0);
		for (uint32_t i = 0; i < 10; i++)
			ck_assert_int_eq(result_status(&batches[b]->batch, i),
			                 SHOAL__STATUS__STATUS_OK);
	}
	ck_assert(!decoy.applied);
	ck_assert_ptr_null(decoy.results[0]);
	node_fsm_unregister(C.fsm[f], &decoy);
	node_batch_fini(&decoy);

	r = result(&mixed->batch, 0);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_CONDITION_FAILED);
	ck_assert_str_eq(r->response->message, "The conditional request failed");
	ck_assert_ptr_nonnull(r->response->item); /* the old item */
	shoal__node_response__free_unpacked(r, NULL);
	r = result(&mixed->batch, 1);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(r->response->result_case, SHOAL__RESPONSE__RESULT_UPDATE_ITEM);
	shoal__node_response__free_unpacked(r, NULL);
	r = result(&mixed->batch, 2);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(r->response->message, "nosuch"));
	shoal__node_response__free_unpacked(r, NULL);
	ck_assert_int_eq(result_status(&mixed->batch, 3), SHOAL__STATUS__STATUS_OK);
	r = result(&mixed->batch, 4);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(r->response->result_case, SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM);
	ck_assert_uint_eq(r->response->batch_write_item->n_unprocessed_items, 0);
	shoal__node_response__free_unpacked(r, NULL);

	/* Every replica holds the same data: 100 puts - 2 deletes + 2. */
	for (unsigned i = 0; i < N_SERVERS; i++) {
		ck_assert_uint_eq(scan_all(C.fsm[i], "tbl").count, 100);
		ck_assert_str_eq(num_attr(get(C.fsm[i], "tbl", key_json(6)), "c"), "2");
		ck_assert_ptr_null(get(C.fsm[i], "tbl", key_json(8)));
		ck_assert_ptr_null(get(C.fsm[i], "tbl", key_json(1)));
		ck_assert_ptr_nonnull(get(C.fsm[i], "tbl", bputs[1]));
		ck_assert_int_eq(node_fsm_failed(C.fsm[i], NULL), SHOAL_OK);
	}
	assert_same_data(C.fsm[0], C.fsm[1], "tbl");
	assert_same_data(C.fsm[0], C.fsm[2], "tbl");
	cluster_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (2) Leader change mid-stream                                              */
/* ------------------------------------------------------------------------ */

/* Proposes 5 batches of 4 puts starting at item `from`: the first two wait
 * for their acknowledgement, the last three are left in flight. */
static void write_burst(int from)
{
	for (int b = 0; b < 5; b++) {
		Shoal__CommandOp *ops[4];
		for (int i = 0; i < 4; i++)
			ops[i] = op_put("tbl", item_json(from + b * 4 + i), NULL);
		if (b < 2)
			ck_assert_int_eq(propose_wait(4, ops)->status, 0);
		else
			propose(4, ops);
	}
}

static bool all_done(struct raft_fixture *fx, void *arg)
{
	(void)fx;
	(void)arg;
	for (unsigned i = 0; i < C.n_props; i++)
		if (!C.props[i].done)
			return false;
	return true;
}

START_TEST(test_leader_change)
{
	cluster_start(1);
	Shoal__CommandOp *ops[1] = {define_t1()};
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);

	write_burst(0);
	/* Depose the leader while part of the burst is in flight. */
	raft_fixture_step_n(&C.fx, 3);
	raft_fixture_depose(&C.fx);
	ck_assert(raft_fixture_step_until_has_leader(&C.fx, STEP_MS));
	write_burst(20);

	/* Crash the new leader: the other two elect a third term's leader. */
	raft_fixture_step_n(&C.fx, 2);
	unsigned dead = leader();
	raft_fixture_kill(&C.fx, dead);
	ck_assert(raft_fixture_step_until_has_no_leader(&C.fx, STEP_MS));
	ck_assert(raft_fixture_step_until_has_leader(&C.fx, STEP_MS));
	ck_assert_uint_ne(leader(), dead);
	write_burst(40);
	raft_fixture_revive(&C.fx, dead);
	ck_assert(raft_fixture_step_until(&C.fx, all_done, NULL, STEP_MS));
	ck_assert(raft_fixture_step_until_has_leader(&C.fx, STEP_MS));
	/* One more entry from the final leader commits everything before it. */
	ops[0] = op_add("tbl", key_json(0));
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	settle();

	/* Every acknowledged write is on every replica, with its results. */
	unsigned acked = 0;
	for (unsigned p = 1; p < C.n_props - 1; p++) {
		if (C.props[p].status != 0)
			continue;
		acked++;
		ck_assert(C.props[p].batch.applied);
		for (unsigned s = 0; s < N_SERVERS; s++)
			for (int i = 0; i < 4; i++) {
				int n = (int)(p - 1) * 4 + i;
				ck_assert_msg(get(C.fsm[s], "tbl", key_json(n)) != NULL,
				              "write %d missing on server %u", n, s);
			}
	}
	ck_assert_uint_ge(acked, 9); /* 2 + 2 + the whole last burst */
	assert_same_data(C.fsm[0], C.fsm[1], "tbl");
	assert_same_data(C.fsm[0], C.fsm[2], "tbl");
	cluster_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (3) Snapshots                                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_snapshot_install)
{
	cluster_start(1);
	for (unsigned i = 0; i < N_SERVERS; i++) {
		raft_set_snapshot_threshold(raft_fixture_get(&C.fx, i), 8);
		raft_set_snapshot_trailing(raft_fixture_get(&C.fx, i), 2);
	}
	Shoal__CommandOp *ops[4] = {define_t1()};
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	settle();

	unsigned l = leader();
	unsigned down = (l + 1) % N_SERVERS;
	raft_fixture_kill(&C.fx, down);
	for (int b = 0; b < 30; b++) {
		for (int i = 0; i < 4; i++)
			ops[i] = op_put("tbl", item_json(b * 4 + i), NULL);
		ck_assert_int_eq(propose_wait(4, ops)->status, 0);
	}
	ops[0] = op_add("tbl", key_json(3));
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	ck_assert_uint_ge(C.counted[l].snapshots, 3);
	ck_assert_uint_eq(C.counted[down].restores, 0);
	ck_assert_uint_lt(st_env_applied(node_fsm_env(C.fsm[down])), 5);

	/* The revived server is behind the leader's truncated log: it gets the
	 * snapshot, restores it, then the entries after it. */
	raft_fixture_revive(&C.fx, down);
	settle();
	ck_assert_uint_ge(C.counted[down].restores, 1);
	for (unsigned i = 0; i < N_SERVERS; i++) {
		ck_assert_uint_eq(scan_all(C.fsm[i], "tbl").count, 120);
		ck_assert_str_eq(num_attr(get(C.fsm[i], "tbl", key_json(3)), "c"), "1");
	}
	assert_same_data(C.fsm[l], C.fsm[down], "tbl");
	assert_same_data(C.fsm[0], C.fsm[1], "tbl");
	assert_same_data(C.fsm[0], C.fsm[2], "tbl");

	/* And it keeps applying normally afterwards. */
	ops[0] = op_add("tbl", key_json(3));
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	settle();
	ck_assert_str_eq(num_attr(get(C.fsm[down], "tbl", key_json(3)), "c"), "2");
	cluster_stop();
}
END_TEST

/* A single FSM driven by direct calls: apply at a chosen index. */
static struct raft fake_raft;

static node_fsm *open_single(const char *tag, uint32_t group, char *dir)
{
	snprintf(dir, 4096, "%s", tl_tmpdir(tag));
	node_fsm *f;
	ck_assert_msg(node_fsm_open(dir, group, 1, &f, msg) == SHOAL_OK, "%s", msg);
	node_fsm_attach(f, &fake_raft);
	return f;
}

/* Applies buf as the entry at `index`; returns apply's raft code. */
static int apply_at(node_fsm *f, uint64_t index, const struct raft_buffer *buf)
{
	struct raft_fsm *rf = node_fsm_raft(f);
	fake_raft.last_applied = index - 1;
	void *res = (void *)1;
	int rv = rf->apply(rf, buf, &res);
	ck_assert_ptr_null(res);
	return rv;
}

static int apply_ops_at(node_fsm *f, uint64_t index, node_batch *b, int n, Shoal__CommandOp **ops)
{
	struct raft_buffer buf = encode(command(1, b != NULL ? b->id : 999, n, ops));
	int rv = apply_at(f, index, &buf);
	raft_free(buf.base);
	return rv;
}

/* Takes a snapshot the way raft 0.15 does (snapshot, snapshot_async,
 * finalize) and returns it as one raft_malloc'd buffer. */
static unsigned last_n_bufs; /* chunks of the last take_snapshot */

static struct raft_buffer take_snapshot(node_fsm *f)
{
	struct raft_fsm *rf = node_fsm_raft(f);
	struct raft_buffer *bufs;
	unsigned n;
	ck_assert_int_eq(rf->snapshot(rf, &bufs, &n), 0);
	ck_assert_int_eq(rf->snapshot_async(rf, &bufs, &n), 0);
	size_t len = 0;
	for (unsigned i = 0; i < n; i++)
		len += bufs[i].len;
	struct raft_buffer out = {raft_malloc(len), len};
	ck_assert_ptr_nonnull(out.base);
	size_t off = 0;
	for (unsigned i = 0; i < n; i++) {
		memcpy((uint8_t *)out.base + off, bufs[i].base, bufs[i].len);
		off += bufs[i].len;
	}
	last_n_bufs = n;
	ck_assert_int_eq(rf->snapshot_finalize(rf, &bufs, &n), 0);
	ck_assert_ptr_null(bufs);
	return out;
}

static struct raft_buffer copy_buf(struct raft_buffer b)
{
	struct raft_buffer c = {raft_malloc(b.len), b.len};
	memcpy(c.base, b.base, b.len);
	return c;
}

START_TEST(test_restore_direct)
{
	char d1[4096], d2[4096], d3[4096];
	node_fsm *a = open_single("snapA", 1, d1);
	Shoal__CommandOp *ops[8];
	ops[0] = define_t1();
	ck_assert_int_eq(apply_ops_at(a, 1, NULL, 1, ops), 0);
	for (int i = 0; i < 8; i++)
		ops[i] = op_put("tbl", item_json(i), NULL);
	ck_assert_int_eq(apply_ops_at(a, 2, NULL, 8, ops), 0);
	struct raft_buffer snap = take_snapshot(a);
	struct raft_fsm *rf;

	/* Behind: an empty environment gets everything, applied index included. */
	node_fsm *b = open_single("snapB", 1, d2);
	rf = node_fsm_raft(b);
	struct raft_buffer bad = copy_buf(snap);
	((uint8_t *)bad.base)[bad.len / 2] ^= 0x40; /* checksum mismatch */
	ck_assert_int_eq(rf->restore(rf, &bad), RAFT_CORRUPT);
	raft_free(bad.base); /* refused: still ours */
	ck_assert_uint_eq(st_env_applied(node_fsm_env(b)), 0);
	bad = copy_buf(snap);
	bad.len -= 1;
	ck_assert_int_eq(rf->restore(rf, &bad), RAFT_CORRUPT);
	raft_free(bad.base);
	struct raft_buffer s2 = copy_buf(snap);
	ck_assert_int_eq(rf->restore(rf, &s2), 0); /* takes s2's memory */
	ck_assert_uint_eq(st_env_applied(node_fsm_env(b)), 2);
	assert_same_data(a, b, "tbl");
	/* It continues from there: the next entry applies, a replay does not. */
	ops[0] = op_add("tbl", key_json(1));
	ck_assert_int_eq(apply_ops_at(b, 3, NULL, 1, ops), 0);
	ck_assert_int_eq(apply_ops_at(b, 3, NULL, 1, ops), 0);
	ck_assert_str_eq(num_attr(get(b, "tbl", key_json(1)), "c"), "1");

	/* Ahead: restoring the older snapshot changes nothing. */
	s2 = copy_buf(snap);
	ck_assert_int_eq(rf->restore(rf, &s2), 0);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(b)), 3);
	ck_assert_str_eq(num_attr(get(b, "tbl", key_json(1)), "c"), "1");
	/* At: the same index, skipped as well. */
	s2 = copy_buf(snap);
	rf = node_fsm_raft(a);
	ck_assert_int_eq(rf->restore(rf, &s2), 0);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(a)), 2);

	/* Another group's snapshot is refused. */
	node_fsm *c = open_single("snapC", 2, d3);
	rf = node_fsm_raft(c);
	s2 = copy_buf(snap);
	ck_assert_int_eq(rf->restore(rf, &s2), RAFT_CORRUPT);
	raft_free(s2.base);
	/* An environment with data is replaced wholesale by a newer snapshot. */
	node_fsm_close(c);
	tl_rmtree(d3);
	c = open_single("snapC", 1, d3);
	ops[0] = op_define("other", 9);
	ops[1] = op_put("other", item_json(1), NULL);
	ck_assert_int_eq(apply_ops_at(c, 1, NULL, 2, ops), 0);
	rf = node_fsm_raft(c);
	s2 = copy_buf(snap);
	ck_assert_int_eq(rf->restore(rf, &s2), 0);
	assert_same_data(a, c, "tbl");
	st_table_info info;
	ck_assert_int_eq(st_table_describe(node_fsm_env(c), "other", &A, &info, msg),
	                 SHOAL_E_NOT_FOUND);

	raft_free(snap.base);
	node_fsm_close(a);
	node_fsm_close(b);
	node_fsm_close(c);
	tl_rmtree(d1);
	tl_rmtree(d2);
	tl_rmtree(d3);
}
END_TEST

/* A snapshot bigger than one chunk (4 MiB): pairs split across chunks. */
START_TEST(test_snapshot_large)
{
	char d1[4096], d2[4096];
	node_fsm *a = open_single("bigA", 1, d1);
	Shoal__CommandOp *ops[100];
	ops[0] = define_t1();
	ck_assert_int_eq(apply_ops_at(a, 1, NULL, 1, ops), 0);
	static char pad[3001];
	for (int i = 0; i < 3000; i++)
		pad[i] = (char)('a' + i % 26);
	pad[3000] = '\0';
	for (int e = 0; e < 20; e++) {
		for (int i = 0; i < 100; i++) {
			int n = e * 100 + i;
			char *json = sh_arena_alloc(&A, 3200);
			snprintf(
			    json, 3200,
			    "{\"pk\":{\"S\":\"k%d\"},\"sk\":{\"N\":\"%d\"},\"p\":{\"S\":\"%d%s\"}}",
			    n % 7, n, n, pad);
			ops[i] = op_put("tbl", json, NULL);
		}
		ck_assert_int_eq(apply_ops_at(a, (uint64_t)e + 2, NULL, 100, ops), 0);
		sh_arena_reset(&A);
	}
	struct raft_buffer snap = take_snapshot(a);
	ck_assert_uint_ge(last_n_bufs, 2);
	ck_assert_uint_gt(snap.len, 5u << 20);
	node_fsm *b = open_single("bigB", 1, d2);
	struct raft_fsm *rf = node_fsm_raft(b);
	ck_assert_int_eq(rf->restore(rf, &snap), 0);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(b)), 21);
	assert_same_data(a, b, "tbl");
	st_table_info ia, ib;
	ck_assert_int_eq(st_table_describe(node_fsm_env(a), "tbl", &A, &ia, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(node_fsm_env(b), "tbl", &A, &ib, msg), SHOAL_OK);
	ck_assert_uint_eq(ia.item_count, 2000);
	ck_assert_uint_eq(ib.item_count, 2000);
	ck_assert_uint_eq(ia.size_bytes, ib.size_bytes);
	ck_assert_ptr_nonnull(get(b, "tbl", key_json(1999)));
	node_fsm_close(a);
	node_fsm_close(b);
	tl_rmtree(d1);
	tl_rmtree(d2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (4) Idempotent replay                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_replay)
{
	char d[4096];
	node_fsm *f = open_single("replay", 1, d);
	Shoal__CommandOp *ops[1] = {define_t1()};
	ck_assert_int_eq(apply_ops_at(f, 1, NULL, 1, ops), 0);
	ops[0] = op_add("tbl", key_json(4));
	struct raft_buffer buf = encode(command(1, 5, 1, ops));
	node_batch b;
	ck_assert_int_eq(node_batch_init(&b, 5, 1), SHOAL_OK);
	node_fsm_register(f, &b);
	ck_assert_int_eq(apply_at(f, 2, &buf), 0);
	ck_assert(b.applied);
	node_batch_fini(&b);
	ck_assert_int_eq(node_batch_init(&b, 5, 1), SHOAL_OK);
	/* The same entry at the same index again: skipped, no results built. */
	ck_assert_int_eq(apply_at(f, 2, &buf), 0);
	ck_assert(!b.applied);
	ck_assert_str_eq(num_attr(get(f, "tbl", key_json(4)), "c"), "1");
	ck_assert_int_eq(apply_at(f, 1, &buf), 0); /* and any older index */
	ck_assert_str_eq(num_attr(get(f, "tbl", key_json(4)), "c"), "1");
	node_fsm_unregister(f, &b);

	/* After a restart the stored applied index still rules. */
	node_fsm_close(f);
	ck_assert_msg(node_fsm_open(d, 1, 1, &f, msg) == SHOAL_OK, "%s", msg);
	node_fsm_attach(f, &fake_raft);
	ck_assert_int_eq(apply_at(f, 2, &buf), 0);
	ck_assert_str_eq(num_attr(get(f, "tbl", key_json(4)), "c"), "1");
	ck_assert_int_eq(apply_at(f, 3, &buf), 0); /* a new index applies */
	ck_assert_str_eq(num_attr(get(f, "tbl", key_json(4)), "c"), "2");
	ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 3);
	raft_free(buf.base);
	node_batch_fini(&b);
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

/* The TTL service's delete (CommandOp.ttl_expire): applied only if the item
 * is expired at the entry's ts_ms by the table's TTL attribute; a client's
 * delete of the same kind of item is unaffected. */
START_TEST(test_ttl_delete)
{
	char d[4096];
	node_fsm *f = open_single("ttl", 1, d);
	Shoal__CommandOp *def = op_define("tbl", 7);
	def->define_table->ttl_attribute = "exp";
	def->define_table->ttl_ms = 1;
	Shoal__CommandOp *ops[3] = {def};
	ck_assert_int_eq(apply_ops_at(f, 1, NULL, 1, ops), 0);
	ops[0] = op_put(
	    "tbl", "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"1\"},\"exp\":{\"N\":\"1700000000\"}}",
	    NULL);
	ops[1] = op_put(
	    "tbl", "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"2\"},\"exp\":{\"N\":\"1900000000\"}}",
	    NULL);
	ops[2] = op_put(
	    "tbl", "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"3\"},\"exp\":{\"S\":\"1700000000\"}}",
	    NULL);
	ck_assert_int_eq(apply_ops_at(f, 2, NULL, 3, ops), 0);
	const char *k1 = "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"1\"}}";
	const char *k2 = "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"2\"}}";
	const char *k3 = "{\"pk\":{\"S\":\"a\"},\"sk\":{\"N\":\"3\"}}";
	for (int i = 0; i < 3; i++) {
		ops[i] = op_delete("tbl", i == 0 ? k1 : i == 1 ? k2 : k3);
		ops[i]->ttl_expire = true;
	}
	node_batch b;
	/* An entry stamped before item 1's expiry: nothing is deleted. */
	cmd_ts = 1699999999000;
	ck_assert_int_eq(node_batch_init(&b, 40, 3), SHOAL_OK);
	node_fsm_register(f, &b);
	ck_assert_int_eq(apply_ops_at(f, 3, &b, 3, ops), 0);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(result_status(&b, i), SHOAL__STATUS__STATUS_CONDITION_FAILED);
	node_fsm_unregister(f, &b);
	node_batch_fini(&b);
	ck_assert_ptr_nonnull(get(f, "tbl", k1));
	/* After it: item 1 goes; the future and the String TTL stay. */
	cmd_ts = 1700000001000;
	ck_assert_int_eq(node_batch_init(&b, 41, 3), SHOAL_OK);
	node_fsm_register(f, &b);
	ck_assert_int_eq(apply_ops_at(f, 4, &b, 3, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(result_status(&b, 1), SHOAL__STATUS__STATUS_CONDITION_FAILED);
	ck_assert_int_eq(result_status(&b, 2), SHOAL__STATUS__STATUS_CONDITION_FAILED);
	node_fsm_unregister(f, &b);
	node_batch_fini(&b);
	ck_assert_ptr_null(get(f, "tbl", k1));
	ck_assert_ptr_nonnull(get(f, "tbl", k2));
	ck_assert_ptr_nonnull(get(f, "tbl", k3));
	/* A client's delete (no flag) of an unexpired item goes through. */
	ops[0] = op_delete("tbl", k2);
	ck_assert_int_eq(apply_ops_at(f, 5, NULL, 1, ops), 0);
	ck_assert_ptr_null(get(f, "tbl", k2));
	cmd_ts = 0;
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Catalog operations                                                        */
/* ------------------------------------------------------------------------ */

START_TEST(test_catalog_ops)
{
	char d0[4096], d1[4096];
	node_fsm *g0 = open_single("cat0", 0, d0);
	node_batch b;
	Shoal__CommandOp *ops[4];

	/* Group 0 assigns ids; catalog[0] is the stored definition. */
	ck_assert_int_eq(node_batch_init(&b, 1, 2), SHOAL_OK);
	node_fsm_register(g0, &b);
	ops[0] = op_define("alpha", 0);
	ops[1] = op_define("beta", 0);
	ck_assert_int_eq(apply_ops_at(g0, 1, &b, 2, ops), 0);
	Shoal__NodeResponse *r = result(&b, 0);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_uint_eq(r->n_catalog, 1);
	ck_assert_uint_eq(r->catalog[0]->table_id, 1);
	ck_assert_int_eq(r->catalog[0]->created_ms, 1700000000000);
	shoal__node_response__free_unpacked(r, NULL);
	r = result(&b, 1);
	ck_assert_uint_eq(r->catalog[0]->table_id, 2);
	shoal__node_response__free_unpacked(r, NULL);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);

	/* A data group: the id is given; id 0 is refused; a re-send is
	 * idempotent; another id for the same name is ResourceInUse; a used id
	 * under another name too. */
	node_fsm *g1 = open_single("cat1", 1, d1);
	ck_assert_int_eq(node_batch_init(&b, 2, 4), SHOAL_OK);
	node_fsm_register(g1, &b);
	ops[0] = op_define("alpha", 0);
	ops[1] = op_define("alpha", 1);
	ops[2] = op_define("alpha", 1);
	ops[3] = op_define("alpha", 2);
	ck_assert_int_eq(apply_ops_at(g1, 1, &b, 4, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_int_eq(result_status(&b, 1), SHOAL__STATUS__STATUS_OK);
	r = result(&b, 2);
	ck_assert_int_eq(r->response->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_uint_eq(r->catalog[0]->table_id, 1);
	ck_assert_int_eq(r->catalog[0]->created_ms, 1700000000001);
	shoal__node_response__free_unpacked(r, NULL);
	ck_assert_int_eq(result_status(&b, 3), SHOAL__STATUS__STATUS_IN_USE);
	node_fsm_unregister(g1, &b);
	node_batch_fini(&b);

	ck_assert_int_eq(node_batch_init(&b, 3, 3), SHOAL_OK);
	node_fsm_register(g1, &b);
	ops[0] = op_define("gamma", 1);
	ops[1] = op_drop("alpha");
	ops[2] = op_drop("alpha");
	ck_assert_int_eq(apply_ops_at(g1, 2, &b, 3, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_IN_USE);
	ck_assert_int_eq(result_status(&b, 1), SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(result_status(&b, 2), SHOAL__STATUS__STATUS_NOT_FOUND);
	node_fsm_unregister(g1, &b);
	node_batch_fini(&b);

	/* A batch with fewer slots than operations gets the first ones; an
	 * empty CommandOp is a per-operation error. */
	ck_assert_int_eq(node_batch_init(&b, 4, 1), SHOAL_OK);
	node_fsm_register(g1, &b);
	ops[0] = new_op();
	ops[1] = op_define("delta", 5);
	ck_assert_int_eq(apply_ops_at(g1, 3, &b, 2, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_VALIDATION);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(node_fsm_env(g1), "delta", &A, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 5);
	node_fsm_unregister(g1, &b);
	node_batch_fini(&b);
	ck_assert_int_eq(node_fsm_failed(g1, NULL), SHOAL_OK);

	node_fsm_close(g0);
	node_fsm_close(g1);
	tl_rmtree(d0);
	tl_rmtree(d1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (5) Sticky failure                                                        */
/* ------------------------------------------------------------------------ */

START_TEST(test_sticky_direct)
{
	char d[4096];
	node_fsm *f = open_single("sticky", 1, d);
	Shoal__CommandOp *ops[2] = {define_t1()};
	ck_assert_int_eq(apply_ops_at(f, 1, NULL, 1, ops), 0);

	node_batch b;
	ck_assert_int_eq(node_batch_init(&b, 9, 2), SHOAL_OK);
	node_fsm_register(f, &b);
	ops[0] = op_put("tbl", item_json(1), NULL);
	ops[1] = op_put("tbl", item_json(2), NULL);
	sh_fault_arm(SH_FAULT_COMMIT, 1, false);
	ck_assert_int_eq(apply_ops_at(f, 2, &b, 2, ops), RAFT_IOERR);
	sh_fault_reset();
	char m[SH_ERRMSG_SIZE];
	ck_assert_int_eq(node_fsm_failed(f, m), SHOAL_E_IO);
	ck_assert_msg(strstr(m, "injected fault") != NULL && strstr(m, "entry 2") != NULL, "%s", m);
	ck_assert(!b.applied);
	ck_assert_ptr_null(b.results[0]);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 1);
	ck_assert_ptr_null(get(f, "tbl", key_json(1)));

	/* Sticky: later applies, snapshots and restores fail at once. */
	ck_assert_int_eq(apply_ops_at(f, 2, &b, 2, ops), RAFT_IOERR);
	ck_assert_int_eq(apply_ops_at(f, 3, &b, 2, ops), RAFT_IOERR);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 1);
	struct raft_fsm *rf = node_fsm_raft(f);
	struct raft_buffer *bufs;
	unsigned n;
	ck_assert_int_ne(rf->snapshot(rf, &bufs, &n), 0);
	node_fsm_unregister(f, &b);
	node_batch_fini(&b);
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

/* The N-th allocation of an apply fails, for N = 1, 2, ...: the FSM fails
 * with SHOAL_E_NOMEM, the environment and the batch are unchanged, nothing
 * leaks (the sanitizer build checks that). */
START_TEST(test_alloc_faults)
{
	char d[4096];
	node_fsm *f = open_single("allocf", 1, d);
	Shoal__CommandOp *ops[5] = {define_t1()};
	ck_assert_int_eq(apply_ops_at(f, 1, NULL, 1, ops), 0);
	const char *bputs[] = {"{\"pk\":{\"S\":\"bw\"},\"sk\":{\"N\":\"1\"}}"};
	ops[0] = op_put("tbl", item_json(1), NULL);
	ops[1] = op_add("tbl", key_json(1));
	ops[2] = op_batch("tbl", bputs, 1, NULL, 0);
	ops[3] = op_put("tbl", item_json(1), "attribute_not_exists(pk)");
	ops[4] = op_define("t2", 8);
	struct raft_buffer buf = encode(command(1, 77, 5, ops));
	long n;
	for (n = 1;; n++) {
		node_batch b;
		ck_assert_int_eq(node_batch_init(&b, 77, 5), SHOAL_OK);
		node_fsm_register(f, &b);
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rv = apply_at(f, 2, &buf);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		node_fsm_unregister(f, &b);
		if (!fired) {
			ck_assert_int_eq(rv, 0);
			ck_assert(b.applied);
			ck_assert_int_eq(result_status(&b, 3),
			                 SHOAL__STATUS__STATUS_CONDITION_FAILED);
			node_batch_fini(&b);
			break;
		}
		char m[SH_ERRMSG_SIZE];
		ck_assert_int_eq(rv, RAFT_NOMEM);
		ck_assert_msg(node_fsm_failed(f, m) == SHOAL_E_NOMEM, "fault %ld: %s (%s)", n,
		              shoal_err_name(node_fsm_failed(f, NULL)), m);
		ck_assert(!b.applied);
		for (int i = 0; i < 5; i++)
			ck_assert_ptr_null(b.results[i]);
		ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 1);
		ck_assert_ptr_null(get(f, "tbl", key_json(1)));
		node_batch_fini(&b);
		/* A failed FSM stays failed: reopen (a node restart). */
		node_fsm_close(f);
		ck_assert_msg(node_fsm_open(d, 1, 1, &f, msg) == SHOAL_OK, "%s", msg);
		node_fsm_attach(f, &fake_raft);
	}
	ck_assert_int_gt(n, 10);
	ck_assert_str_eq(num_attr(get(f, "tbl", key_json(1)), "c"), "1");
	raft_free(buf.base);
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

START_TEST(test_sticky_cluster)
{
	/* The n-th commit anywhere after arming fails: n = 1 hits the leader
	 * (it applies first), n = 2 and 3 the followers. */
	long n = _i;
	cluster_start(1);
	Shoal__CommandOp *ops[1] = {define_t1()};
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	settle();
	uint64_t before = st_env_applied(node_fsm_env(C.fsm[0]));
	unsigned l = leader();

	/* Exactly one replica applies nothing more; the other two go on. */
	sh_fault_arm(SH_FAULT_COMMIT, n, false);
	ops[0] = op_put("tbl", item_json(1), NULL);
	proposal *p = propose(1, ops);
	raft_fixture_step_until_elapsed(&C.fx, 3000);
	sh_fault_reset();
	unsigned failed = N_SERVERS, n_failed = 0;
	for (unsigned i = 0; i < N_SERVERS; i++)
		if (node_fsm_failed(C.fsm[i], NULL) != SHOAL_OK) {
			failed = i;
			n_failed++;
		}
	ck_assert_uint_eq(n_failed, 1);
	ck_assert(n == 1 ? failed == l : failed != l);
	/* On the proposer the entry's callback fires only if it applied. */
	ck_assert(p->done == (failed != l));
	/* A follower whose apply failed learns the commit index from a
	 * heartbeat; raft 0.15 then turns it RAFT_UNAVAILABLE. */
	if (failed != l)
		ck_assert_int_eq(raft_state(raft_fixture_get(&C.fx, failed)), RAFT_UNAVAILABLE);
	ck_assert_int_eq(node_fsm_failed(C.fsm[failed], NULL), SHOAL_E_IO);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(C.fsm[failed])), before);
	ck_assert_uint_eq(raft_last_applied(raft_fixture_get(&C.fx, failed)), before);
	for (unsigned i = 0; i < N_SERVERS; i++)
		if (i != failed) {
			ck_assert_uint_gt(st_env_applied(node_fsm_env(C.fsm[i])), before);
			ck_assert_ptr_nonnull(get(C.fsm[i], "tbl", key_json(1)));
		}
	ck_assert_ptr_null(get(C.fsm[failed], "tbl", key_json(1)));

	/* More writes: the healthy majority applies them, the failed replica
	 * stays where it stopped. */
	if (failed == l) {
		/* raft 0.15 keeps a leader whose apply failed in office; its
		 * log still commits (the followers apply), it applies nothing. */
		ck_assert_int_eq(raft_state(raft_fixture_get(&C.fx, l)), RAFT_LEADER);
	}
	ops[0] = op_put("tbl", item_json(2), NULL);
	propose_on(l, 1, ops); /* the fixture sees no "stable" leader now */
	raft_fixture_step_until_elapsed(&C.fx, 3000);
	for (unsigned i = 0; i < N_SERVERS; i++)
		if (i != failed)
			ck_assert_ptr_nonnull(get(C.fsm[i], "tbl", key_json(2)));
	ck_assert_uint_eq(st_env_applied(node_fsm_env(C.fsm[failed])), before);
	ck_assert_ptr_null(get(C.fsm[failed], "tbl", key_json(2)));
	cluster_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (6) Malformed entries                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_malformed_direct)
{
	uint64_t seed = tl_seed();
	uint64_t st = seed;
	char d[4096];
	for (int round = 0; round < 40; round++) {
		node_fsm *f = open_single("malf", 1, d);
		uint8_t bytes[256];
		size_t len = 1 + tl_rand(&st) % sizeof(bytes);
		for (size_t i = 0; i < len; i++)
			bytes[i] = (uint8_t)tl_rand(&st);
		if (round == 0) { /* deep nesting: field 3 (ops) as nested length-delimited */
			len = sizeof(bytes);
			for (size_t i = 0; i + 1 < len; i += 2) {
				bytes[i] = 0x1a;
				bytes[i + 1] = (uint8_t)(len - i - 2 > 127 ? 127 : len - i - 2);
			}
		}
		struct raft_buffer buf = {bytes, len};
		int rv = apply_at(f, 1, &buf);
		int code = node_fsm_failed(f, NULL);
		/* Random bytes may happen to be a valid (odd) Command: then it
		 * applied cleanly; otherwise the FSM failed cleanly. */
		if (rv != 0) {
			ck_assert_msg(code == SHOAL_E_SERIALIZATION, "seed %llu round %d: %s",
			              (unsigned long long)seed, round, shoal_err_name(code));
			ck_assert_int_eq(rv, RAFT_MALFORMED);
			ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 0);
		} else {
			ck_assert_int_eq(code, SHOAL_OK);
		}
		node_fsm_close(f);
		tl_rmtree(d);
	}
	/* An empty entry is a Command with no operations: applied, no effect. */
	node_fsm *f = open_single("malf", 1, d);
	struct raft_buffer empty = {NULL, 0};
	ck_assert_int_eq(apply_at(f, 1, &empty), 0);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 1);
	uint8_t trunc[] = {0x1a, 0x05, 0x0a};
	struct raft_buffer t = {trunc, sizeof(trunc)};
	ck_assert_int_eq(apply_at(f, 2, &t), RAFT_MALFORMED);
	ck_assert_int_eq(node_fsm_failed(f, NULL), SHOAL_E_SERIALIZATION);
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

START_TEST(test_malformed_cluster)
{
	cluster_start(1);
	Shoal__CommandOp *ops[1] = {define_t1()};
	ck_assert_int_eq(propose_wait(1, ops)->status, 0);
	settle();
	uint64_t before = st_env_applied(node_fsm_env(C.fsm[0]));
	static uint8_t garbage[] = {0x1a, 0x7f, 0x01, 0x02};
	struct raft_buffer buf = {raft_malloc(sizeof(garbage)), sizeof(garbage)};
	memcpy(buf.base, garbage, sizeof(garbage));
	struct raft_apply req;
	ck_assert_int_eq(raft_apply(raft_fixture_get(&C.fx, leader()), &req, &buf, 1, NULL), 0);
	raft_fixture_step_until_elapsed(&C.fx, 3000);
	for (unsigned i = 0; i < N_SERVERS; i++) {
		char m[SH_ERRMSG_SIZE];
		ck_assert_int_eq(node_fsm_failed(C.fsm[i], m), SHOAL_E_SERIALIZATION);
		ck_assert_ptr_nonnull(strstr(m, "entry"));
		ck_assert_uint_eq(st_env_applied(node_fsm_env(C.fsm[i])), before);
	}
	cluster_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Secondary indexes: outbox, shipping ops, UpdateTable                      */
/* ------------------------------------------------------------------------ */

/* A Request from its DynamoDB JSON body (arena memory). */
static Shoal__Request *api(const char *op, const char *body)
{
	json_error_t je;
	json_t *j = json_loads(body, 0, &je);
	ck_assert_msg(j != NULL, "%s: %s", body, je.text);
	Shoal__Request *r;
	int rc = wire_api_request_from_json(&A, op, j, &r, msg);
	json_decref(j);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", op, msg);
	return r;
}

#define GT_KEYS                                                                                    \
	"\"AttributeDefinitions\":[{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"            \
	"{\"AttributeName\":\"sk\",\"AttributeType\":\"N\"}%s],"                                   \
	"\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"                          \
	"{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],\"BillingMode\":\"PAY_PER_REQUEST\""
#define GT_GSI                                                                                     \
	"{\"IndexName\":\"byg\",\"KeySchema\":[{\"AttributeName\":\"g\",\"KeyType\":\"HASH\"}],"   \
	"\"Projection\":{\"ProjectionType\":\"ALL\"}}"

/* define_table of `name` (pk S, sk N, attribute g S), with GSI byg on g when
 * gsi, under table id `id`. */
static Shoal__TableDefine *gt_define(const char *name, uint32_t id, bool gsi)
{
	char keys[1024], body[2048];
	snprintf(keys, sizeof(keys), GT_KEYS,
	         gsi ? ",{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}" : "");
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\",%s%s}", name, keys,
	         gsi ? ",\"GlobalSecondaryIndexes\":[" GT_GSI "]" : "");
	Shoal__TableDefine *td = sh_arena_alloc(&A, sizeof(*td));
	shoal__table_define__init(td);
	td->def = api("CreateTable", body)->create_table;
	td->table_id = id;
	td->created_ms = 1700000000000 + id;
	return td;
}

static Shoal__CommandOp *op_of_define(Shoal__TableDefine *td)
{
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	op->define_table = td;
	return op;
}

static Shoal__CommandOp *op_update_gsi(const char *table)
{
	char body[2048];
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"%s\",\"AttributeDefinitions\":[{\"AttributeName\":\"g\","
	         "\"AttributeType\":\"S\"}],\"GlobalSecondaryIndexUpdates\":[{\"Create\":%s}]}",
	         table, GT_GSI);
	Shoal__TableUpdate *tu = sh_arena_alloc(&A, sizeof(*tu));
	shoal__table_update__init(tu);
	tu->update = api("UpdateTable", body)->update_table;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_UPDATE_TABLE;
	op->update_table = tu;
	return op;
}

static Shoal__CommandOp *op_activate(const char *table, const char *index)
{
	Shoal__IndexActivate *ia = sh_arena_alloc(&A, sizeof(*ia));
	shoal__index_activate__init(ia);
	ia->table_name = (char *)table;
	ia->index_name = (char *)index;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_ACTIVATE_INDEX;
	op->activate_index = ia;
	return op;
}

static Shoal__CommandOp *op_trim(uint64_t upto)
{
	Shoal__OutboxTrim *t = sh_arena_alloc(&A, sizeof(*t));
	shoal__outbox_trim__init(t);
	t->upto = upto;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_OUTBOX_TRIM;
	op->outbox_trim = t;
	return op;
}

static Shoal__CommandOp *op_backfill(const char *table, uint32_t index_id, uint32_t max)
{
	Shoal__IndexBackfill *b = sh_arena_alloc(&A, sizeof(*b));
	shoal__index_backfill__init(b);
	b->table_name = (char *)table;
	b->index_id = index_id;
	b->max_items = max;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_BACKFILL;
	op->backfill = b;
	return op;
}

/* index_apply of deltas d[0..n) as shipped by source group `source`. */
static Shoal__CommandOp *op_index_apply(uint32_t source, const st_delta *d, uint32_t n)
{
	Shoal__IndexApply *ia = sh_arena_alloc(&A, sizeof(*ia));
	shoal__index_apply__init(ia);
	ia->source_group = source;
	ia->n_deltas = n;
	ia->deltas = sh_arena_calloc(&A, n > 0 ? n : 1, sizeof(*ia->deltas));
	for (uint32_t i = 0; i < n; i++) {
		Shoal__IndexDelta *x = sh_arena_alloc(&A, sizeof(*x));
		shoal__index_delta__init(x);
		x->seq = d[i].seq;
		x->hash = d[i].hash;
		x->table_id = d[i].table_id;
		x->index_id = d[i].index_id;
		x->del = d[i].del;
		x->key.data = (uint8_t *)d[i].key;
		x->key.len = d[i].key_len;
		x->value.data = (uint8_t *)d[i].val;
		x->value.len = d[i].val_len;
		x->ts_ms = d[i].ts_ms;
		ia->deltas[i] = x;
	}
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_INDEX_APPLY;
	op->index_apply = ia;
	return op;
}

static const char *gt_item(int i, const char *g)
{
	char buf[160];
	if (g != NULL)
		snprintf(buf, sizeof(buf),
		         "{\"pk\":{\"S\":\"p%d\"},\"sk\":{\"N\":\"%d\"},\"g\":{\"S\":\"%s\"}}",
		         i % 3, i, g);
	else
		snprintf(buf, sizeof(buf), "{\"pk\":{\"S\":\"p%d\"},\"sk\":{\"N\":\"%d\"}}", i % 3,
		         i);
	return sh_arena_strndup(&A, buf, strlen(buf));
}

static st_outbox_info outbox(node_fsm *f)
{
	st_outbox_info info;
	ck_assert_msg(st_outbox_get_info(node_fsm_env(f), &info, msg) == SHOAL_OK, "%s", msg);
	return info;
}

/* Every delta after `after` (all of them: the outbox is small here). */
static st_delta *outbox_all(node_fsm *f, uint64_t after, uint32_t *n)
{
	st_delta *d;
	ck_assert_msg(st_outbox_read(node_fsm_env(f), after, 100000, 64u << 20, &A, &d, n, msg) ==
	                  SHOAL_OK,
	              "%s", msg);
	return d;
}

/* This group's progress entry of index `index` of `table`. */
static st_index_progress progress(node_fsm *f, const char *table, const char *index)
{
	st_index_progress *p;
	uint32_t n;
	ck_assert_msg(st_index_progress_list(node_fsm_env(f), &A, &p, &n, msg) == SHOAL_OK, "%s",
	              msg);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(p[i].table, table) == 0 && strcmp(p[i].index, index) == 0)
			return p[i];
	ck_abort_msg("no progress entry for %s.%s", table, index);
	return p[0];
}

static const st_index_def *index_named(node_fsm *f, const char *table, const char *index)
{
	st_table_info info;
	ck_assert_msg(st_table_describe(node_fsm_env(f), table, &A, &info, msg) == SHOAL_OK, "%s",
	              msg);
	for (uint32_t i = 0; i < info.def.n_indexes; i++)
		if (strcmp(info.def.indexes[i].name, index) == 0)
			return &info.def.indexes[i];
	return NULL;
}

/* Writes on a table with a GSI append the same deltas on every replica,
 * stamped with the proposer's clock; outbox_trim and index_apply replicate,
 * and a redelivered batch (whole, or overlapping) changes nothing. */
START_TEST(test_outbox_cluster)
{
	cluster_start(1);
	cmd_ts = 1711111111111;
	Shoal__CommandOp *ops[16];
	ops[0] = op_of_define(gt_define("gtab", 7, true));
	proposal *p = propose_wait(1, ops);
	ck_assert_int_eq(result_status(&p->batch, 0), SHOAL__STATUS__STATUS_OK);
	Shoal__NodeResponse *r = result(&p->batch, 0);
	ck_assert_uint_eq(r->catalog[0]->n_indexes, 1);
	ck_assert_str_eq(r->catalog[0]->indexes[0]->index_name, "byg");
	ck_assert_str_eq(r->catalog[0]->indexes[0]->status, "ACTIVE");
	ck_assert_uint_gt(r->catalog[0]->next_index_id, r->catalog[0]->indexes[0]->index_id);
	shoal__node_response__free_unpacked(r, NULL);

	/* 10 items with the index key, 2 without (sparse: no delta). */
	for (int i = 0; i < 12; i++)
		ops[i] = op_put("gtab", gt_item(i, i < 10 ? (i % 2 ? "odd" : "even") : NULL), NULL);
	ck_assert_int_eq(propose_wait(12, ops)->status, 0);
	settle();

	uint32_t n0;
	st_delta *d0 = outbox_all(C.fsm[0], 0, &n0);
	ck_assert_uint_eq(n0, 10);
	for (unsigned s = 0; s < N_SERVERS; s++) {
		st_outbox_info info = outbox(C.fsm[s]);
		ck_assert_uint_eq(info.last_seq, 10);
		ck_assert_uint_eq(info.depth, 10);
		ck_assert_uint_eq(info.shipped, 0);
		ck_assert_int_eq(info.oldest_ts_ms, cmd_ts);
		uint32_t n;
		st_delta *d = outbox_all(C.fsm[s], 0, &n);
		ck_assert_uint_eq(n, n0);
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_uint_eq(d[i].seq, i + 1);
			ck_assert_uint_eq(d[i].seq, d0[i].seq);
			ck_assert_uint_eq(d[i].hash, d0[i].hash);
			ck_assert_uint_eq(d[i].table_id, 7);
			ck_assert(!d[i].del);
			ck_assert_int_eq(d[i].ts_ms, cmd_ts);
			ck_assert_uint_eq(d[i].key_len, d0[i].key_len);
			ck_assert_int_eq(memcmp(d[i].key, d0[i].key, d[i].key_len), 0);
			ck_assert_uint_eq(d[i].val_len, d0[i].val_len);
			ck_assert_int_eq(memcmp(d[i].val, d0[i].val, d[i].val_len), 0);
		}
	}

	/* The shipped watermark is replicated; a lower trim is ignored. */
	ops[0] = op_trim(4);
	ops[1] = op_trim(2);
	p = propose_wait(2, ops);
	ck_assert_int_eq(result_status(&p->batch, 0), SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(result_status(&p->batch, 1), SHOAL__STATUS__STATUS_OK);
	settle();
	for (unsigned s = 0; s < N_SERVERS; s++) {
		st_outbox_info info = outbox(C.fsm[s]);
		ck_assert_uint_eq(info.shipped, 4);
		ck_assert_uint_eq(info.depth, 6);
		uint32_t n;
		st_delta *d = outbox_all(C.fsm[s], 0, &n);
		ck_assert_uint_eq(n, 6);
		ck_assert_uint_eq(d[0].seq, 5);
	}

	/* The deltas, shipped back to this group as if from group 2 (the
	 * group holds the index partitions too): applied once on every
	 * replica, whatever is redelivered. */
	cmd_ts = 1711111112222;
	ops[0] = op_index_apply(2, d0, 10);
	ops[1] = op_index_apply(2, d0, 10);    /* the same batch again */
	ops[2] = op_index_apply(2, d0 + 4, 6); /* an overlapping one */
	p = propose_wait(3, ops);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(result_status(&p->batch, i), SHOAL__STATUS__STATUS_OK);
	settle();
	for (unsigned s = 0; s < N_SERVERS; s++) {
		ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(C.fsm[s]), 2), 10);
		ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(C.fsm[s]), 3), 0);
		ck_assert_uint_eq(progress(C.fsm[s], "gtab", "byg").item_count, 10);
		/* Applying shipped entries appends nothing to this outbox. */
		ck_assert_uint_eq(outbox(C.fsm[s]).last_seq, 10);
		ck_assert_int_eq(node_fsm_failed(C.fsm[s], NULL), SHOAL_OK);
	}
	assert_same_data(C.fsm[0], C.fsm[1], "gtab");
	assert_same_data(C.fsm[0], C.fsm[2], "gtab");
	cmd_ts = 0;
	cluster_stop();
}
END_TEST

/* index_apply and the outbox across replays and restarts: an entry at or
 * below the applied index is skipped; the same deltas in a new entry are
 * deduplicated by (source group, seq), also after a restart. */
START_TEST(test_index_apply_replay)
{
	char d[4096];
	node_fsm *f = open_single("ixreplay", 1, d);
	cmd_ts = 1722222222222;
	Shoal__CommandOp *ops[8];
	ops[0] = op_of_define(gt_define("gtab", 7, true));
	ck_assert_int_eq(apply_ops_at(f, 1, NULL, 1, ops), 0);
	for (int i = 0; i < 5; i++)
		ops[i] = op_put("gtab", gt_item(i, "v"), NULL);
	ck_assert_int_eq(apply_ops_at(f, 2, NULL, 5, ops), 0);
	/* A replayed write entry appends no second set of deltas. */
	ck_assert_int_eq(apply_ops_at(f, 2, NULL, 5, ops), 0);
	ck_assert_uint_eq(outbox(f).last_seq, 5);

	uint32_t n;
	st_delta *dl = outbox_all(f, 0, &n);
	ck_assert_uint_eq(n, 5);
	ops[0] = op_index_apply(4, dl, n);
	struct raft_buffer buf = encode(command(1, 50, 1, ops));
	ck_assert_int_eq(apply_at(f, 3, &buf), 0);
	ck_assert_int_eq(apply_at(f, 3, &buf), 0); /* replay of the entry */
	ck_assert_int_eq(apply_at(f, 4, &buf), 0); /* redelivery in a new entry */
	ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(f), 4), 5);
	ck_assert_uint_eq(progress(f, "gtab", "byg").item_count, 5);

	/* Moving one item's index key: a delete and an upsert; deleting
	 * another: a delete.  Shipped, the index follows. */
	ops[0] = op_put("gtab", gt_item(1, "w"), NULL);
	ops[1] = op_delete("gtab", gt_item(2, NULL));
	ck_assert_int_eq(apply_ops_at(f, 5, NULL, 2, ops), 0);
	st_delta *more = outbox_all(f, 5, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert(more[0].del);
	ck_assert(!more[1].del);
	ck_assert(more[2].del);
	ops[0] = op_index_apply(4, more, n);
	struct raft_buffer buf2 = encode(command(1, 51, 1, ops));
	ck_assert_int_eq(apply_at(f, 6, &buf2), 0);
	ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(f), 4), 8);
	ck_assert_uint_eq(progress(f, "gtab", "byg").item_count, 4);

	/* After a restart the dedup state is still there. */
	node_fsm_close(f);
	ck_assert_msg(node_fsm_open(d, 1, 1, &f, msg) == SHOAL_OK, "%s", msg);
	node_fsm_attach(f, &fake_raft);
	ck_assert_int_eq(apply_at(f, 7, &buf), 0);
	ck_assert_int_eq(apply_at(f, 8, &buf2), 0);
	ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(f), 4), 8);
	ck_assert_uint_eq(progress(f, "gtab", "byg").item_count, 4);
	ck_assert_uint_eq(st_env_applied(node_fsm_env(f)), 8);

	/* Deltas out of order are refused as a whole (the same on every
	 * replica: a per-operation error, not a failure). */
	node_batch b;
	ck_assert_int_eq(node_batch_init(&b, 52, 1), SHOAL_OK);
	node_fsm_register(f, &b);
	st_delta swapped[2] = {more[1], more[0]};
	ops[0] = op_index_apply(9, swapped, 2);
	ck_assert_int_eq(apply_ops_at(f, 9, &b, 1, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_uint_eq(st_index_applied_seq(node_fsm_env(f), 9), 0);
	node_fsm_unregister(f, &b);
	node_batch_fini(&b);
	ck_assert_int_eq(node_fsm_failed(f, NULL), SHOAL_OK);

	raft_free(buf.base);
	raft_free(buf2.base);
	cmd_ts = 0;
	node_fsm_close(f);
	tl_rmtree(d);
}
END_TEST

/* The answer of a catalog op, unpacked into the test arena's lifetime. */
static Shoal__TableDefine *catalog0(node_batch *b, uint32_t i)
{
	Shoal__NodeResponse *r = result(b, i);
	ck_assert_msg(r->response->status == SHOAL__STATUS__STATUS_OK, "op %u: %s", i,
	              r->response->message);
	ck_assert_uint_eq(r->n_catalog, 1);
	/* Keep it: re-pack into the arena so the test can forward it. */
	size_t len = shoal__table_define__get_packed_size(r->catalog[0]);
	uint8_t *p = sh_arena_alloc(&A, len + 1);
	shoal__table_define__pack(r->catalog[0], p);
	shoal__node_response__free_unpacked(r, NULL);
	ProtobufCAllocator al;
	wire_arena_allocator(&al, &A);
	Shoal__TableDefine *td = shoal__table_define__unpack(&al, len, p);
	ck_assert_ptr_nonnull(td);
	return td;
}

/* Group 0: UpdateTable adds a GSI (CREATING, a fresh id), activate_index
 * makes it ACTIVE; both answer the new TableDefine.  A data group takes the
 * forwarded definitions (redefine), ignores stale ones, and backfills. */
START_TEST(test_update_table_flow)
{
	char d0[4096], d1[4096];
	node_fsm *g0 = open_single("ut0", 0, d0);
	node_fsm *g1 = open_single("ut1", 1, d1);
	node_batch b;
	Shoal__CommandOp *ops[4];

	Shoal__TableDefine *orig = gt_define("utab", 0, false);
	ck_assert_int_eq(node_batch_init(&b, 1, 1), SHOAL_OK);
	node_fsm_register(g0, &b);
	ops[0] = op_of_define(orig);
	ck_assert_int_eq(apply_ops_at(g0, 1, &b, 1, ops), 0);
	Shoal__TableDefine *created = catalog0(&b, 0);
	ck_assert_uint_eq(created->table_id, 1);
	ck_assert_uint_eq(created->n_indexes, 0);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);

	ck_assert_int_eq(node_batch_init(&b, 2, 3), SHOAL_OK);
	node_fsm_register(g0, &b);
	ops[0] = op_update_gsi("utab");
	ops[1] = op_update_gsi("utab"); /* the index exists now */
	ops[2] = op_update_gsi("nosuchtab");
	ck_assert_int_eq(apply_ops_at(g0, 2, &b, 3, ops), 0);
	Shoal__TableDefine *creating = catalog0(&b, 0);
	ck_assert_int_ne(result_status(&b, 1), SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(result_status(&b, 2), SHOAL__STATUS__STATUS_NOT_FOUND);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);
	ck_assert_uint_eq(creating->table_id, 1);
	ck_assert_int_eq(creating->created_ms, created->created_ms);
	ck_assert_uint_eq(creating->n_indexes, 1);
	ck_assert_str_eq(creating->indexes[0]->index_name, "byg");
	ck_assert_str_eq(creating->indexes[0]->status, "CREATING");
	uint32_t xid = creating->indexes[0]->index_id;
	ck_assert_uint_ge(xid, 1);
	ck_assert_uint_gt(creating->next_index_id, xid);
	ck_assert_uint_eq(creating->def->n_global_secondary_indexes, 1);

	ck_assert_int_eq(node_batch_init(&b, 3, 2), SHOAL_OK);
	node_fsm_register(g0, &b);
	ops[0] = op_activate("utab", "byg");
	ops[1] = op_activate("utab", "nosuchtab");
	ck_assert_int_eq(apply_ops_at(g0, 3, &b, 2, ops), 0);
	Shoal__TableDefine *active = catalog0(&b, 0);
	ck_assert_int_eq(result_status(&b, 1), SHOAL__STATUS__STATUS_NOT_FOUND);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);
	ck_assert_str_eq(active->indexes[0]->status, "ACTIVE");
	ck_assert_uint_eq(active->indexes[0]->index_id, xid);
	/* The catalog listing carries the same (wire_table_define_to_pb). */
	st_table_info info;
	ck_assert_int_eq(st_table_describe(node_fsm_env(g0), "utab", &A, &info, msg), SHOAL_OK);
	Shoal__TableDefine *listed;
	ck_assert_int_eq(wire_table_define_to_pb(&A, &info.def, &listed, msg), SHOAL_OK);
	ck_assert_uint_eq(listed->n_indexes, 1);
	ck_assert_uint_eq(listed->indexes[0]->index_id, xid);
	ck_assert_str_eq(listed->indexes[0]->status, "ACTIVE");
	ck_assert_uint_eq(listed->next_index_id, active->next_index_id);
	/* update_table is group 0's: a data group refuses it. */
	ck_assert_int_eq(node_batch_init(&b, 4, 1), SHOAL_OK);
	node_fsm_register(g1, &b);
	ops[0] = op_update_gsi("utab");
	ck_assert_int_eq(apply_ops_at(g1, 1, &b, 1, ops), 0);
	ck_assert_int_eq(result_status(&b, 0), SHOAL__STATUS__STATUS_VALIDATION);
	node_fsm_unregister(g1, &b);
	node_batch_fini(&b);

	/* The data group: the table as created, 5 items (3 with g). */
	ops[0] = op_of_define(created);
	ck_assert_int_eq(apply_ops_at(g1, 2, NULL, 1, ops), 0);
	for (int i = 0; i < 4; i++)
		ops[i] = op_put("utab", gt_item(i, i < 3 ? "x" : NULL), NULL);
	ck_assert_int_eq(apply_ops_at(g1, 3, NULL, 4, ops), 0);
	ops[0] = op_put("utab", gt_item(4, NULL), NULL);
	ck_assert_int_eq(apply_ops_at(g1, 4, NULL, 1, ops), 0);
	ck_assert_uint_eq(outbox(g1).last_seq, 0);

	/* The forwarded CREATING definition redefines the table; a re-send
	 * is idempotent; the original (older next_index_id) is stale. */
	created->next_index_id = 1;
	ops[0] = op_of_define(creating);
	ops[1] = op_of_define(creating);
	ops[2] = op_of_define(created);
	ck_assert_int_eq(node_batch_init(&b, 5, 3), SHOAL_OK);
	node_fsm_register(g1, &b);
	ck_assert_int_eq(apply_ops_at(g1, 5, &b, 3, ops), 0);
	for (uint32_t i = 0; i < 3; i++) {
		Shoal__TableDefine *t = catalog0(&b, i);
		ck_assert_uint_eq(t->n_indexes, 1);
		ck_assert_uint_eq(t->indexes[0]->index_id, xid);
	}
	node_fsm_unregister(g1, &b);
	node_batch_fini(&b);
	const st_index_def *x = index_named(g1, "utab", "byg");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->id, xid);
	ck_assert_int_eq(x->status, ST_INDEX_CREATING);
	ck_assert(!progress(g1, "utab", "byg").backfill_done);

	/* Backfill, two items a step, until done: one delta per item with g. */
	uint64_t idx = 6;
	for (int step = 0; step < 10 && !progress(g1, "utab", "byg").backfill_done; step++) {
		ops[0] = op_backfill("utab", xid, 2);
		ck_assert_int_eq(apply_ops_at(g1, idx++, NULL, 1, ops), 0);
	}
	st_index_progress pr = progress(g1, "utab", "byg");
	ck_assert(pr.backfill_done);
	ck_assert_uint_eq(pr.backfill_seq, 3);
	ck_assert_uint_eq(outbox(g1).last_seq, 3);
	ck_assert_uint_ge(idx, 9); /* 5 items, 2 a step: at least 3 steps */
	/* A step after the end is a no-op. */
	ops[0] = op_backfill("utab", xid, 2);
	ck_assert_int_eq(apply_ops_at(g1, idx++, NULL, 1, ops), 0);
	ck_assert_uint_eq(outbox(g1).last_seq, 3);

	/* ACTIVE forwarded; then the CREATING one again is stale. */
	ops[0] = op_of_define(active);
	ck_assert_int_eq(apply_ops_at(g1, idx++, NULL, 1, ops), 0);
	ck_assert_int_eq(index_named(g1, "utab", "byg")->status, ST_INDEX_ACTIVE);
	ops[0] = op_of_define(creating);
	ck_assert_int_eq(apply_ops_at(g1, idx++, NULL, 1, ops), 0);
	ck_assert_int_eq(index_named(g1, "utab", "byg")->status, ST_INDEX_ACTIVE);
	ck_assert_int_eq(node_fsm_failed(g0, NULL), SHOAL_OK);
	ck_assert_int_eq(node_fsm_failed(g1, NULL), SHOAL_OK);

	node_fsm_close(g0);
	node_fsm_close(g1);
	tl_rmtree(d0);
	tl_rmtree(d1);
}
END_TEST

/* Group 0: an UpdateTable of throughput is applied at the proposer's time
 * (Command.ts_ms) and answers the new TableDefine; a data group takes the
 * forwarded definition's capacity (same indexes, newer capacity_ms) and
 * keeps it when an older definition arrives after it. */
START_TEST(test_update_capacity_flow)
{
	char d0[4096], d1[4096];
	node_fsm *g0 = open_single("cap0", 0, d0);
	node_fsm *g1 = open_single("cap1", 1, d1);
	node_batch b;
	Shoal__CommandOp *ops[2];

	Shoal__TableDefine *orig = sh_arena_alloc(&A, sizeof(*orig));
	shoal__table_define__init(orig);
	orig->def =
	    api("CreateTable",
	        "{\"TableName\":\"ptab\",\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
	        "\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
	        "\"HASH\"}],\"BillingMode\":\"PROVISIONED\",\"ProvisionedThroughput\":{"
	        "\"ReadCapacityUnits\":5,\"WriteCapacityUnits\":5}}")
	        ->create_table;
	orig->created_ms = 1700000000000;
	ck_assert_int_eq(node_batch_init(&b, 1, 1), SHOAL_OK);
	node_fsm_register(g0, &b);
	ops[0] = op_of_define(orig);
	ck_assert_int_eq(apply_ops_at(g0, 1, &b, 1, ops), 0);
	Shoal__TableDefine *created = catalog0(&b, 0);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);
	ck_assert_str_eq(created->def->billing_mode, "PROVISIONED");
	ck_assert_int_eq(created->capacity_ms, 0);

	Shoal__TableUpdate *tu = sh_arena_alloc(&A, sizeof(*tu));
	shoal__table_update__init(tu);
	tu->update = api("UpdateTable", "{\"TableName\":\"ptab\",\"ProvisionedThroughput\":{"
	                                "\"ReadCapacityUnits\":50,\"WriteCapacityUnits\":2}}")
	                 ->update_table;
	ops[0] = new_op();
	ops[0]->op_case = SHOAL__COMMAND_OP__OP_UPDATE_TABLE;
	ops[0]->update_table = tu;
	ops[1] = ops[0]; /* the same again: "will not change" */
	int64_t ts = cmd_ts;
	cmd_ts = 1800000000123;
	ck_assert_int_eq(node_batch_init(&b, 2, 2), SHOAL_OK);
	node_fsm_register(g0, &b);
	ck_assert_int_eq(apply_ops_at(g0, 2, &b, 2, ops), 0);
	Shoal__TableDefine *updated = catalog0(&b, 0);
	ck_assert_int_eq(result_status(&b, 1), SHOAL__STATUS__STATUS_VALIDATION);
	node_fsm_unregister(g0, &b);
	node_batch_fini(&b);
	cmd_ts = ts;
	ck_assert_int_eq(updated->def->provisioned_throughput->read_capacity_units, 50);
	ck_assert_int_eq(updated->last_increase_ms, 1800000000123);
	ck_assert_int_eq(updated->last_decrease_ms, 1800000000123);
	ck_assert_uint_eq(updated->decreases_today, 1);
	ck_assert_int_eq(updated->capacity_ms, 1800000000123);

	/* The data group: created, then the update forwarded, then the older
	 * definition again (a late re-send): the newer capacity stays. */
	ops[0] = op_of_define(created);
	ck_assert_int_eq(apply_ops_at(g1, 1, NULL, 1, ops), 0);
	ops[0] = op_of_define(updated);
	ck_assert_int_eq(apply_ops_at(g1, 2, NULL, 1, ops), 0);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(node_fsm_env(g1), "ptab", &A, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.tp.rcu, 50);
	ck_assert_uint_eq(info.def.tp.wcu, 2);
	ck_assert_int_eq(info.def.last_decrease_ms, 1800000000123);
	ops[0] = op_of_define(created);
	ck_assert_int_eq(apply_ops_at(g1, 3, NULL, 1, ops), 0);
	ck_assert_int_eq(st_table_describe(node_fsm_env(g1), "ptab", &A, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.tp.rcu, 50);
	ck_assert_int_eq(info.def.capacity_ms, 1800000000123);
	ck_assert_int_eq(node_fsm_failed(g0, NULL), SHOAL_OK);
	ck_assert_int_eq(node_fsm_failed(g1, NULL), SHOAL_OK);

	node_fsm_close(g0);
	node_fsm_close(g1);
	tl_rmtree(d0);
	tl_rmtree(d1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/* Every encoded entry is a multiple of 8 bytes (raft 0.15's libuv log needs
 * it, see node/fsm.c) and decodes to the same Command. */
START_TEST(test_encode_aligned)
{
	for (int k = 0; k < 200; k++) {
		Shoal__CommandOp *ops[3];
		int n = k % 4;
		for (int i = 0; i < n; i++)
			ops[i] = op_put("tbl", item_json(k * 1000 + i),
			                k % 2 ? "attribute_exists(v)" : NULL);
		uint64_t id = (uint64_t)k * 0x10001ull;
		struct raft_buffer buf = encode(command((uint32_t)k, id, n > 3 ? 3 : n, ops));
		ck_assert_uint_eq(buf.len % 8, 0);
		ck_assert_uint_ge(buf.len, 8);
		ck_assert_int_eq(
		    wire_check_framing(&shoal__command__descriptor, buf.base, buf.len, msg),
		    SHOAL_OK);
		Shoal__Command *c = shoal__command__unpack(NULL, buf.len, buf.base);
		ck_assert_ptr_nonnull(c);
		ck_assert_uint_eq(c->proposer, (uint32_t)k);
		ck_assert_uint_eq(c->batch_id, id);
		ck_assert_uint_eq(c->n_ops, (size_t)(n > 3 ? 3 : n));
		shoal__command__free_unpacked(c, NULL);
		raft_free(buf.base);
		sh_arena_reset(&A);
	}
}
END_TEST

/* node_index_deltas_from_pb checks every delta before it converts any: a
 * list refused at its second delta leaves the output as it was (it used to
 * fill in the first; found by tests/fuzz/fuzz_index_ship.c). */
START_TEST(test_index_deltas_refusal)
{
	Shoal__IndexDelta x[2] = {SHOAL__INDEX_DELTA__INIT, SHOAL__INDEX_DELTA__INIT};
	Shoal__IndexDelta *xs[] = {&x[0], &x[1]};
	Shoal__IndexApply ia = SHOAL__INDEX_APPLY__INIT;
	ia.n_deltas = 2;
	ia.deltas = xs;
	for (int i = 0; i < 2; i++) {
		x[i].seq = 10 + (uint64_t)i;
		x[i].table_id = 7;
		x[i].index_id = 1;
		x[i].key.data = (uint8_t *)"key";
		x[i].key.len = 3;
	}
	st_delta d[2], before[2];
	ck_assert_int_eq(node_index_deltas_from_pb(&ia, d, msg), SHOAL_OK);
	ck_assert_uint_eq(d[1].seq, 11);
	ck_assert_ptr_eq(d[1].key, x[1].key.data);

	/* The second delta out of order, without an index, without a key. */
	for (int bad = 0; bad < 3; bad++) {
		x[1].seq = bad == 0 ? 10 : 11;
		x[1].index_id = bad == 1 ? 0 : 1;
		x[1].key.len = bad == 2 ? 0 : 3;
		memset(d, 0xab, sizeof(d));
		memcpy(before, d, sizeof(d));
		msg[0] = '\0';
		ck_assert_int_eq(node_index_deltas_from_pb(&ia, d, msg), SHOAL_E_VALIDATION);
		ck_assert_str_ne(msg, "");
		ck_assert_msg(memcmp(d, before, sizeof(d)) == 0, "case %d: a refusal changed d",
		              bad);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */

static void setup(void)
{
	sh_arena_init(&A);
	memset(&fake_raft, 0, sizeof(fake_raft));
}

static void teardown(void)
{
	sh_fault_reset();
	sh_arena_fini(&A);
}

static Suite *fsm_suite(void)
{
	Suite *s = suite_create("fsm");
	TCase *tc = tcase_create("fsm");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_replication);
	tcase_add_test(tc, test_leader_change);
	tcase_add_test(tc, test_snapshot_install);
	tcase_add_test(tc, test_restore_direct);
	tcase_add_test(tc, test_snapshot_large);
	tcase_add_test(tc, test_replay);
	tcase_add_test(tc, test_ttl_delete);
	tcase_add_test(tc, test_catalog_ops);
	tcase_add_test(tc, test_sticky_direct);
	tcase_add_test(tc, test_alloc_faults);
	tcase_add_loop_test(tc, test_sticky_cluster, 1, 4);
	tcase_add_test(tc, test_malformed_direct);
	tcase_add_test(tc, test_malformed_cluster);
	tcase_add_test(tc, test_encode_aligned);
	tcase_add_test(tc, test_outbox_cluster);
	tcase_add_test(tc, test_index_apply_replay);
	tcase_add_test(tc, test_index_deltas_refusal);
	tcase_add_test(tc, test_update_table_flow);
	tcase_add_test(tc, test_update_capacity_flow);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(fsm_suite)
