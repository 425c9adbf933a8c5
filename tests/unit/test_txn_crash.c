/*
 * test_txn_crash.c -- transactions across storage groups (two-phase commit,
 * router/txn.c's header is the protocol, node/fsm_txn.c applies it) with the
 * router crashing at every step, deterministically.
 *
 * The simulation: three storage groups 0..2, each of two replicas, each
 * replica one node_fsm over its own LMDB directory, driven as test_fsm.c
 * drives one (the raft_fsm apply callback called directly, with a fake
 * struct raft whose last_applied gives the entry's index).  A message to a
 * group is one Command of one operation applied to both replicas; the
 * leader's NodeResponse is read back from a node_batch registered on it
 * (the follower builds none), and at the end both replicas must hold the
 * same state.  A simulated clock stamps Command.ts_ms.  The "router" runs a
 * TransactWriteItems as router/txn.c does (every prepare, TxnDecide at the
 * coordinator, TxnFinish at the others, TxnAck) and may stop after any
 * step; the "recovery" runs node_txnrec_plan on each group's leader at the
 * simulated time and carries its actions out synchronously with
 * node/txn_recover.c's rules.  A crashed replica is an FSM closed and opened
 * again from its LMDB directory; a leader change makes the follower the
 * one that answers and recovers.  No raft, no sockets, no sleeps.
 *
 * The transaction (coordinator group 1, the first action's):
 *
 *   action  item  group  part  does
 *   0       a     1      0     Update SET v = new ADD n 1, if v = old
 *   1       b     1      0     Put {v new, n 1}, if it does not exist
 *   2       c     2      1     Update as a
 *   3       d     0      2     Update as a
 *   4       e     0      2     Delete, if it exists
 *
 * Before it: a, c, d {v old, n 0}, b absent, e {v old}.  After it: a, b, c,
 * d {v new, n 1}, e absent.  A part applied twice would show n 2.
 */
#include <check.h>
#include <jansson.h>
#include <raft.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/errors.h"
#include "node/fsm.h"
#include "node/node.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

#define NG      3 /* storage groups 0..NG-1 */
#define TABLE   "Txn"
#define T_START 1700000000000LL
#define ROUNDS  8 /* recovery rounds before giving up */

/* st_txn_state as NodeResponse.txn_state carries it. */
enum { TS_NONE = 0, TS_PREPARING = 1, TS_COMMITTED = 2, TS_ABORTED = 3 };

static char msg[SH_ERRMSG_SIZE];
static sh_arena A;       /* test scratch, freed by teardown */
static int64_t now_ms;   /* the simulated clock: Command.ts_ms, recovery's now */
static uint64_t batches; /* Command.batch_id */

/* One replica of a group: node id k + 1 of the group's replicas k = 0, 1. */
typedef struct replica {
	node_fsm *f;
	struct raft raft; /* fake: its last_applied gives the entry index */
	char dir[4096];
	uint64_t next; /* index of the next entry */
} replica;

/* A group: two replicas applying the same entries; the leader proposes
 * (its batch gets the answers), the follower computes none. */
typedef struct group {
	replica r[2];
	int lead;
} group;

static group G[NG];

/* The raw bytes of the last answer (a recorded outcome is returned as is). */
static uint8_t *last_raw;
static size_t last_raw_len;

/* ------------------------------------------------------------------------ */
/* Groups and messages                                                       */
/* ------------------------------------------------------------------------ */

static void replica_open(uint32_t g, int k)
{
	replica *r = &G[g].r[k];
	ck_assert_msg(node_fsm_open(r->dir, g, (uint32_t)k + 1, &r->f, msg) == SHOAL_OK, "%s", msg);
	memset(&r->raft, 0, sizeof(r->raft));
	node_fsm_attach(r->f, &r->raft);
	r->next = st_env_applied(node_fsm_env(r->f)) + 1;
}

static void open_group(uint32_t g)
{
	G[g].lead = 0;
	for (int k = 0; k < 2; k++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "txncrash-g%u-%d", g, k);
		snprintf(G[g].r[k].dir, sizeof(G[g].r[k].dir), "%s", tl_tmpdir(tag));
		replica_open(g, k);
	}
}

/* A crash of both replicas: each FSM closed, opened again from its LMDB
 * directory. */
static void reopen_group(uint32_t g)
{
	for (int k = 0; k < 2; k++) {
		node_fsm_close(G[g].r[k].f);
		replica_open(g, k);
	}
}

/* The leader dies; the follower leads (it has applied every entry). */
static void failover(uint32_t g)
{
	G[g].lead ^= 1;
}

/* The leader's environment: what the group's leader reads (recovery). */
static st_env *env(uint32_t g)
{
	return node_fsm_env(G[g].r[G[g].lead].f);
}

/* Applies buf as the next entry of replica r; returns the raft code. */
static int apply_next(replica *r, const struct raft_buffer *buf)
{
	struct raft_fsm *rf = node_fsm_raft(r->f);
	r->raft.last_applied = r->next - 1;
	void *res = NULL;
	int rv = rf->apply(rf, buf, &res);
	if (rv == 0)
		r->next++;
	return rv;
}

/* Applies op as the next entry of group g (both replicas) at the simulated
 * time; returns the leader's answer (arena memory).  The clock moves on
 * 1 ms. */
static Shoal__NodeResponse *deliver(uint32_t g, Shoal__CommandOp *op)
{
	replica *lead = &G[g].r[G[g].lead], *follow = &G[g].r[G[g].lead ^ 1];
	Shoal__Command c = SHOAL__COMMAND__INIT;
	c.proposer = (uint32_t)G[g].lead + 1;
	c.batch_id = ++batches;
	c.ts_ms = now_ms;
	c.n_ops = 1;
	c.ops = &op;
	struct raft_buffer buf;
	ck_assert_msg(node_fsm_encode(&c, &buf, msg) == SHOAL_OK, "%s", msg);
	node_batch b;
	ck_assert_int_eq(node_batch_init(&b, c.batch_id, 1), SHOAL_OK);
	node_fsm_register(lead->f, &b);
	int rv = apply_next(lead, &buf);
	node_fsm_unregister(lead->f, &b);
	int rv2 = apply_next(follow, &buf);
	raft_free(buf.base);
	ck_assert_msg(rv == 0, "group %u: apply failed: %d (%s)", g, rv,
	              node_fsm_failed(lead->f, msg) != SHOAL_OK ? msg : "");
	ck_assert_msg(rv2 == 0, "group %u: the follower's apply failed: %d (%s)", g, rv2,
	              node_fsm_failed(follow->f, msg) != SHOAL_OK ? msg : "");
	ck_assert(b.applied);
	ck_assert_ptr_nonnull(b.results[0]);
	now_ms++;
	last_raw_len = b.result_lens[0];
	last_raw = sh_arena_alloc(&A, last_raw_len + 1);
	memcpy(last_raw, b.results[0], last_raw_len);
	node_batch_fini(&b);
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, &A);
	Shoal__NodeResponse *r = shoal__node_response__unpack(&alloc, last_raw_len, last_raw);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(r->response);
	return r;
}

/* The Shoal code of an answer. */
static int code(const Shoal__NodeResponse *r)
{
	return wire_code_from_status((int)r->response->status);
}

static Shoal__CommandOp *new_op(void)
{
	Shoal__CommandOp *op = sh_arena_alloc(&A, sizeof(*op));
	ck_assert_ptr_nonnull(op);
	shoal__command_op__init(op);
	return op;
}

static ProtobufCBinaryData bin(const uint8_t *p, size_t n)
{
	return (ProtobufCBinaryData){n, (uint8_t *)p};
}

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

static Shoal__CommandOp *op_define(void)
{
	Shoal__Request *r =
	    api("CreateTable", "{\"TableName\":\"" TABLE "\",\"AttributeDefinitions\":["
	                       "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"
	                       "{\"AttributeName\":\"sk\",\"AttributeType\":\"N\"}],"
	                       "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
	                       "{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],"
	                       "\"BillingMode\":\"PAY_PER_REQUEST\"}");
	Shoal__TableDefine *td = sh_arena_alloc(&A, sizeof(*td));
	shoal__table_define__init(td);
	td->def = r->create_table;
	td->table_id = 7;
	td->created_ms = T_START;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	op->define_table = td;
	return op;
}

/* PutItem of a JSON item (DynamoDB JSON). */
static Shoal__CommandOp *op_put(const char *item_json)
{
	char body[1024];
	snprintf(body, sizeof(body), "{\"TableName\":\"" TABLE "\",\"Item\":%s}", item_json);
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_PUT;
	op->put = api("PutItem", body)->put_item;
	return op;
}

static Shoal__CommandOp *op_txn_write(Shoal__TxnWrite *w)
{
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_WRITE;
	op->txn_write = w;
	return op;
}

static Shoal__CommandOp *op_decide(const uint8_t *id, bool commit, ProtobufCBinaryData outcome)
{
	Shoal__TxnDecide *d = sh_arena_alloc(&A, sizeof(*d));
	shoal__txn_decide__init(d);
	d->id = bin(id, 16);
	d->commit = commit;
	d->outcome = outcome;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_DECIDE;
	op->txn_decide = d;
	return op;
}

static Shoal__CommandOp *op_finish(const uint8_t *id, bool commit)
{
	Shoal__TxnFinish *f = sh_arena_alloc(&A, sizeof(*f));
	shoal__txn_finish__init(f);
	f->id = bin(id, 16);
	f->commit = commit;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_FINISH;
	op->txn_finish = f;
	return op;
}

static Shoal__CommandOp *op_ack(const uint8_t *id, const uint32_t *groups, size_t n)
{
	Shoal__TxnAck *x = sh_arena_alloc(&A, sizeof(*x));
	shoal__txn_ack__init(x);
	x->id = bin(id, 16);
	x->groups = sh_arena_calloc(&A, n + 1, sizeof(uint32_t));
	memcpy(x->groups, groups, n * sizeof(uint32_t));
	x->n_groups = n;
	Shoal__TxnAcks *all = sh_arena_alloc(&A, sizeof(*all));
	shoal__txn_acks__init(all);
	all->acks = sh_arena_alloc(&A, sizeof(*all->acks));
	all->acks[0] = x;
	all->n_acks = 1;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_ACKS;
	op->txn_acks = all;
	return op;
}

static Shoal__CommandOp *op_status(const uint8_t *id)
{
	Shoal__TxnStatus *s = sh_arena_alloc(&A, sizeof(*s));
	shoal__txn_status__init(s);
	s->id = bin(id, 16);
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_STATUS;
	op->txn_status = s;
	return op;
}

/* ------------------------------------------------------------------------ */
/* The items                                                                 */
/* ------------------------------------------------------------------------ */

#define N_ITEMS 5
static const char *const ITEM_PK[N_ITEMS] = {"a", "b", "c", "d", "e"};
static const uint32_t ITEM_GROUP[N_ITEMS] = {1, 1, 2, 0, 0};
enum { IT_A, IT_B, IT_C, IT_D, IT_E };

static const char *key_json(int i)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "{\"pk\":{\"S\":\"%s\"},\"sk\":{\"N\":\"1\"}}", ITEM_PK[i]);
	return sh_arena_strndup(&A, buf, strlen(buf));
}

static st_value *value_of(const char *json)
{
	st_value *v = sh_arena_alloc(&A, sizeof(*v));
	ck_assert_msg(wire_item_from_text(&A, json, strlen(json), v, msg) == SHOAL_OK, "%s: %s",
	              json, msg);
	return v;
}

/* The stored item i, or NULL. */
static st_value *get(int i)
{
	st_get_req r = {.table = TABLE, .key = value_of(key_json(i))};
	st_value *it;
	ck_assert_msg(st_get_item(env(ITEM_GROUP[i]), &r, &A, &it, msg) == SHOAL_OK, "%s", msg);
	return it;
}

/* Whether a prepared transaction holds item i (st_txn_get_items). */
static bool locked(int i)
{
	st_txn_get g = {.req = {.table = TABLE, .key = value_of(key_json(i))}};
	uint64_t instance;
	ck_assert_msg(st_txn_get_items(env(ITEM_GROUP[i]), &g, 1, &A, &instance, msg) == SHOAL_OK,
	              "%s", msg);
	return g.locked;
}

/* Attribute `name` of it as text (S or N), or NULL. */
static const char *attr(const st_value *it, const char *name)
{
	const st_value *v = st_map_get(it, name, strlen(name));
	if (v == NULL || (v->type != ST_S && v->type != ST_N))
		return NULL;
	return sh_arena_strndup(&A, v->u.str.ptr, v->u.str.len);
}

static bool attr_is(const st_value *it, const char *name, const char *want)
{
	const char *v = attr(it, name);
	return v != NULL && strcmp(v, want) == 0;
}

enum { BEFORE, AFTER, OTHER };

/* Where item i stands: as before the transaction, as after it, or neither. */
static int item_state(int i)
{
	st_value *it = get(i);
	switch (i) {
	case IT_B:
		if (it == NULL)
			return BEFORE;
		return attr_is(it, "v", "new") && attr_is(it, "n", "1") ? AFTER : OTHER;
	case IT_E:
		if (it == NULL)
			return AFTER;
		return attr_is(it, "v", "old") ? BEFORE : OTHER;
	default:
		if (it == NULL)
			return OTHER;
		if (attr_is(it, "v", "old") && attr_is(it, "n", "0"))
			return BEFORE;
		if (attr_is(it, "v", "new") && attr_is(it, "n", "1"))
			return AFTER;
		return OTHER;
	}
}

static const char *state_name(int s)
{
	return s == BEFORE ? "before" : s == AFTER ? "after" : "other";
}

/* All or nothing: every item as before the transaction, or every one as
 * after it -- and which, as `committed` says. */
static void assert_outcome(bool committed)
{
	int want = committed ? AFTER : BEFORE;
	for (int i = 0; i < N_ITEMS; i++) {
		int s = item_state(i);
		ck_assert_msg(s == want, "item %s (group %u) is %s, the transaction %s", ITEM_PK[i],
		              ITEM_GROUP[i], state_name(s), committed ? "committed" : "did not");
	}
}

static uint32_t n_prepared(uint32_t g)
{
	st_prepared *p;
	uint32_t n;
	ck_assert_msg(st_txn_prepared_list(env(g), &A, &p, &n, msg) == SHOAL_OK, "%s", msg);
	return n;
}

static uint32_t n_open_records(uint32_t g)
{
	st_txn_record *r;
	uint32_t n;
	ck_assert_msg(st_txn_record_list(env(g), &A, &r, &n, msg) == SHOAL_OK, "%s", msg);
	return n;
}

/* Nothing left behind: no lock, no prepared part, no open record. */
static void assert_clean(void)
{
	for (uint32_t g = 0; g < NG; g++) {
		ck_assert_msg(n_prepared(g) == 0, "group %u still has a prepared part", g);
		ck_assert_msg(n_open_records(g) == 0, "group %u still has an open record", g);
	}
	for (int i = 0; i < N_ITEMS; i++)
		ck_assert_msg(!locked(i), "item %s is still locked", ITEM_PK[i]);
}

/* A single-item write to every item goes through. */
static void assert_writable(void)
{
	for (int i = 0; i < N_ITEMS; i++) {
		char item[256];
		snprintf(item, sizeof(item),
		         "{\"pk\":{\"S\":\"%s\"},\"sk\":{\"N\":\"1\"},\"v\":{\"S\":\"later\"}}",
		         ITEM_PK[i]);
		Shoal__NodeResponse *r = deliver(ITEM_GROUP[i], op_put(item));
		ck_assert_msg(code(r) == SHOAL_OK, "PutItem %s after the transaction: %s",
		              ITEM_PK[i], r->response->message ? r->response->message : "");
		ck_assert(attr_is(get(i), "v", "later"));
	}
}

/* ------------------------------------------------------------------------ */
/* The simulated router                                                      */
/* ------------------------------------------------------------------------ */

/* Which conditions hold. */
enum {
	V_COMMIT,       /* every part prepares: the router commits */
	V_CANCEL_PART,  /* part 2 (d's condition) fails: abort */
	V_CANCEL_COORD, /* part 0, the coordinator's (a's condition), fails: abort */
	V_LOST,         /* every part prepares, part 2's answer is lost: abort */
	V_COUNT
};

typedef struct sim_txn {
	Shoal__TransactWriteItemsRequest *req;
	uint8_t id[16], attempt[16], digest[16];
	bool token;
	uint32_t np;
	uint32_t group[NG];
	Shoal__TxnWrite w[NG];
	Shoal__NodeResponse *prep[NG]; /* the prepares' answers as the router got them */
	bool sent[NG];                 /* prepare sent (its finish is due) */
	bool holds[NG];                /* the part is prepared and not finished */
	bool decided, commit;
	Shoal__NodeResponse *decision;
	bool finished[NG];
	bool lost_answer; /* V_LOST: the last part's answer never reached it */
} sim_txn;

/* The request (DynamoDB JSON): a's condition fails with cancel_a, d's with
 * cancel_d. */
static Shoal__TransactWriteItemsRequest *request(bool cancel_a, bool cancel_d, const char *token)
{
	static const char *upd = "{\"Update\":{\"TableName\":\"" TABLE "\",\"Key\":%s,"
	                         "\"UpdateExpression\":\"SET v = :new ADD n :one\","
	                         "\"ConditionExpression\":\"%s\","
	                         "\"ExpressionAttributeValues\":{\":new\":{\"S\":\"new\"},"
	                         "\":one\":{\"N\":\"1\"},\":old\":{\"S\":\"old\"}}}}";
	char a[1024], c[1024], d[1024], tok[128] = "", body[8192];
	snprintf(a, sizeof(a), upd, key_json(IT_A), cancel_a ? "v <> :old" : "v = :old");
	snprintf(c, sizeof(c), upd, key_json(IT_C), "v = :old");
	snprintf(d, sizeof(d), upd, key_json(IT_D), cancel_d ? "v <> :old" : "v = :old");
	if (token != NULL)
		snprintf(tok, sizeof(tok), ",\"ClientRequestToken\":\"%s\"", token);
	snprintf(body, sizeof(body),
	         "{\"TransactItems\":[%s,"
	         "{\"Put\":{\"TableName\":\"" TABLE "\",\"Item\":{\"pk\":{\"S\":\"b\"},"
	         "\"sk\":{\"N\":\"1\"},\"v\":{\"S\":\"new\"},\"n\":{\"N\":\"1\"}},"
	         "\"ConditionExpression\":\"attribute_not_exists(pk)\"}},"
	         "%s,%s,"
	         "{\"Delete\":{\"TableName\":\"" TABLE "\",\"Key\":%s,"
	         "\"ConditionExpression\":\"attribute_exists(pk)\"}}]%s}",
	         a, c, d, key_json(IT_E), tok);
	Shoal__TransactWriteItemsRequest *r = api("TransactWriteItems", body)->transact_write_items;
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->n_transact_items, N_ITEMS);
	return r;
}

/* The parts as router/txn.c's txw_plan builds them (actions i go to the
 * group of item i; parts in order of first appearance; the coordinator's
 * part carries the participants, and with a token the digest). */
static void plan(sim_txn *t, Shoal__TransactWriteItemsRequest *req, uint8_t id_byte,
                 uint8_t attempt_byte)
{
	memset(t, 0, sizeof(*t));
	t->req = req;
	memset(t->id, id_byte, 16);
	memset(t->attempt, attempt_byte, 16);
	t->token = WIRE_HAS(req, client_request_token);
	if (t->token)
		wire_txn_digest(req, t->digest);
	uint32_t part_of[N_ITEMS];
	for (uint32_t i = 0; i < N_ITEMS; i++) {
		uint32_t p = 0;
		while (p < t->np && t->group[p] != ITEM_GROUP[i])
			p++;
		if (p == t->np)
			t->group[t->np++] = ITEM_GROUP[i];
		part_of[i] = p;
	}
	for (uint32_t p = 0; p < t->np; p++) {
		Shoal__TxnWrite *w = &t->w[p];
		shoal__txn_write__init(w);
		w->id = bin(t->id, 16);
		w->attempt = bin(t->attempt, 16);
		w->coord_group = t->group[0];
		w->single = false;
		w->token = t->token;
		w->request_actions = N_ITEMS;
		w->actions = sh_arena_calloc(&A, N_ITEMS, sizeof(*w->actions));
		w->positions = sh_arena_calloc(&A, N_ITEMS, sizeof(*w->positions));
		if (p == 0) {
			w->n_participants = t->np;
			w->participants = t->group;
			if (t->token)
				w->digest = bin(t->digest, 16);
		}
	}
	for (uint32_t i = 0; i < N_ITEMS; i++) {
		Shoal__TxnWrite *w = &t->w[part_of[i]];
		w->actions[w->n_actions++] = req->transact_items[i];
		w->positions[w->n_positions++] = i;
	}
}

/* TxnWrite of part p: prepared (its items locked) when it answers OK with
 * no decided state. */
static Shoal__NodeResponse *prepare(sim_txn *t, uint32_t p)
{
	Shoal__NodeResponse *r = deliver(t->group[p], op_txn_write(&t->w[p]));
	t->sent[p] = true;
	t->prep[p] = r;
	if (code(r) == SHOAL_OK && r->txn_state != TS_COMMITTED && r->txn_state != TS_ABORTED)
		t->holds[p] = true;
	return r;
}

/* The decision as router/txn.c's txw_prepared takes it: commit when every
 * part answered OK and none was decided already; TxnDecide to the
 * coordinator (with a token, the outcome a retry gets: a packed
 * NodeResponse of the answer and the state); then, as txw_decided, the
 * decision as the coordinator recorded it. */
static void decide(sim_txn *t)
{
	bool commit = true;
	for (uint32_t p = 0; p < t->np; p++) {
		const Shoal__NodeResponse *r = t->prep[p];
		if (r == NULL || (t->lost_answer && p == t->np - 1) || code(r) != SHOAL_OK ||
		    r->txn_state == TS_COMMITTED || r->txn_state == TS_ABORTED)
			commit = false;
	}
	ProtobufCBinaryData outcome = {0, NULL};
	if (t->token) {
		Shoal__TransactWriteItemsResponse ok = SHOAL__TRANSACT_WRITE_ITEMS_RESPONSE__INIT;
		Shoal__Response answer = SHOAL__RESPONSE__INIT;
		if (commit) {
			answer.result_case = SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS;
			answer.transact_write_items = &ok;
		} else {
			answer.status = wire_status_from_code(SHOAL_E_TXN_CANCELED);
			answer.message = "cancelled";
		}
		Shoal__NodeResponse nr = SHOAL__NODE_RESPONSE__INIT;
		nr.response = &answer;
		nr.txn_state = commit ? TS_COMMITTED : TS_ABORTED;
		ck_assert_int_eq(wire_pack(&A, &nr.base, &outcome.data, &outcome.len, msg),
		                 SHOAL_OK);
	}
	Shoal__NodeResponse *r = deliver(t->group[0], op_decide(t->id, commit, outcome));
	ck_assert_msg(code(r) == SHOAL_OK, "TxnDecide: %s", r->response->message);
	t->decided = true;
	t->decision = r;
	t->commit = commit && r->txn_state == TS_COMMITTED;
	ck_assert_int_eq(r->txn_state, commit ? TS_COMMITTED : TS_ABORTED);
	t->holds[0] = false;
}

/* TxnFinish of the decision to part p (p >= 1). */
static void finish(sim_txn *t, uint32_t p)
{
	Shoal__NodeResponse *r = deliver(t->group[p], op_finish(t->id, t->commit));
	ck_assert_msg(code(r) == SHOAL_OK, "TxnFinish: %s", r->response->message);
	t->finished[p] = true;
	t->holds[p] = false;
}

/* TxnAck, as txw_finished sends it: the coordinator (its decision finished
 * its part) and every participant that finished. */
static void ack(sim_txn *t)
{
	uint32_t done[NG];
	size_t n = 0;
	done[n++] = t->group[0];
	for (uint32_t p = 1; p < t->np; p++)
		if (t->finished[p] || !t->sent[p])
			done[n++] = t->group[p];
	Shoal__NodeResponse *r = deliver(t->group[0], op_ack(t->id, done, n));
	ck_assert_int_eq(code(r), SHOAL_OK);
}

/* ------------------------------------------------------------------------ */
/* The simulated recovery                                                    */
/* ------------------------------------------------------------------------ */

static uint32_t recovery_actions; /* carried out, over the test */

/* One scan of group g at now_ms (node/txn_recover.c's scan_group), its
 * actions carried out at once; returns how many there were.  With
 * lose_local, the local proposal that follows a remote answer (TxnFinish
 * after TxnStatus, TxnAck after TxnFinish) is lost: the leader died with
 * the task in flight. */
static uint32_t recover_group_lossy(uint32_t g, bool lose_local)
{
	st_prepared *parts;
	st_txn_record *recs;
	uint32_t np, nr;
	ck_assert_msg(st_txn_prepared_list(env(g), &A, &parts, &np, msg) == SHOAL_OK, "%s", msg);
	ck_assert_msg(st_txn_record_list(env(g), &A, &recs, &nr, msg) == SHOAL_OK, "%s", msg);
	node_txnrec_action acts[64];
	uint32_t n = node_txnrec_plan(g, NG, now_ms, parts, np, recs, nr, acts, 64);
	for (uint32_t i = 0; i < n; i++) {
		const node_txnrec_action *x = &acts[i];
		Shoal__NodeResponse *r;
		switch (x->kind) {
		case NODE_TXR_LOCAL_STATUS:
			ck_assert_uint_eq(x->target, g);
			r = deliver(g, op_status(x->id));
			ck_assert_int_eq(code(r), SHOAL_OK);
			break;
		case NODE_TXR_ASK_STATUS:
			ck_assert_uint_ne(x->target, g);
			ck_assert_uint_lt(x->target, NG);
			r = deliver(x->target, op_status(x->id));
			ck_assert_int_eq(code(r), SHOAL_OK);
			if (!lose_local &&
			    (r->txn_state == TS_COMMITTED || r->txn_state == TS_ABORTED)) {
				bool commit = r->txn_state == TS_COMMITTED;
				r = deliver(g, op_finish(x->id, commit));
				ck_assert_int_eq(code(r), SHOAL_OK);
			}
			break;
		case NODE_TXR_SEND_FINISH:
			ck_assert_uint_ne(x->target, g);
			ck_assert_uint_lt(x->target, NG);
			r = deliver(x->target, op_finish(x->id, x->commit));
			if (!lose_local && code(r) == SHOAL_OK) {
				uint32_t target = x->target;
				r = deliver(g, op_ack(x->id, &target, 1));
				ck_assert_int_eq(code(r), SHOAL_OK);
			}
			break;
		default:
			ck_abort_msg("unknown recovery action %d", (int)x->kind);
		}
	}
	recovery_actions += n;
	return n;
}

static uint32_t recover_group(uint32_t g)
{
	return recover_group_lossy(g, false);
}

/* Recovery on every group, a round a second, until a round finds nothing
 * to do; with reopen, every replica restarts before each round, and the
 * first round loses its local follow-ups (the leaders died mid-task). */
static void recover(bool reopen)
{
	for (int round = 0; round < ROUNDS; round++) {
		if (reopen)
			for (uint32_t g = 0; g < NG; g++)
				reopen_group(g);
		uint32_t n = 0;
		for (uint32_t g = 0; g < NG; g++)
			n += recover_group_lossy(g, reopen && round == 0);
		if (n == 0)
			return;
		now_ms += 1000;
	}
	ck_abort_msg("recovery still had work after %d rounds", ROUNDS);
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */
/* ------------------------------------------------------------------------ */

/* Three groups, the table in each, the items as before the transaction. */
static void start(void)
{
	now_ms = T_START;
	for (uint32_t g = 0; g < NG; g++) {
		open_group(g);
		Shoal__NodeResponse *r = deliver(g, op_define());
		ck_assert_msg(code(r) == SHOAL_OK, "define: %s", r->response->message);
	}
	for (int i = 0; i < N_ITEMS; i++) {
		if (i == IT_B)
			continue;
		char item[256];
		snprintf(item, sizeof(item),
		         "{\"pk\":{\"S\":\"%s\"},\"sk\":{\"N\":\"1\"},\"v\":{\"S\":\"old\"}%s}",
		         ITEM_PK[i], i == IT_E ? "" : ",\"n\":{\"N\":\"0\"}");
		ck_assert_int_eq(code(deliver(ITEM_GROUP[i], op_put(item))), SHOAL_OK);
	}
	assert_outcome(false);
	now_ms += 1000;
}

/* The two replicas of group g hold the same state: items, prepared parts,
 * open records, applied index. */
static void assert_replicas_agree(uint32_t g)
{
	st_env *e0 = node_fsm_env(G[g].r[0].f), *e1 = node_fsm_env(G[g].r[1].f);
	ck_assert_uint_eq(st_env_applied(e0), st_env_applied(e1));
	st_scan_req q0 = {.table = TABLE}, q1 = {.table = TABLE};
	st_page p0, p1;
	ck_assert_msg(st_scan(e0, &q0, &A, &p0, msg) == SHOAL_OK, "%s", msg);
	ck_assert_msg(st_scan(e1, &q1, &A, &p1, msg) == SHOAL_OK, "%s", msg);
	ck_assert_uint_eq(p0.count, p1.count);
	for (uint32_t i = 0; i < p0.count; i++)
		ck_assert_msg(st_value_equal(&p0.items[i], &p1.items[i]),
		              "group %u: item %u differs between replicas", g, i);
	st_prepared *x0, *x1;
	uint32_t n0, n1;
	ck_assert(st_txn_prepared_list(e0, &A, &x0, &n0, msg) == SHOAL_OK);
	ck_assert(st_txn_prepared_list(e1, &A, &x1, &n1, msg) == SHOAL_OK);
	ck_assert_uint_eq(n0, n1);
	for (uint32_t i = 0; i < n0; i++)
		ck_assert(memcmp(x0[i].id, x1[i].id, 16) == 0 &&
		          x0[i].created_ms == x1[i].created_ms &&
		          x0[i].coord_group == x1[i].coord_group && x0[i].n_locks == x1[i].n_locks);
	st_txn_record *r0, *r1;
	ck_assert(st_txn_record_list(e0, &A, &r0, &n0, msg) == SHOAL_OK);
	ck_assert(st_txn_record_list(e1, &A, &r1, &n1, msg) == SHOAL_OK);
	ck_assert_uint_eq(n0, n1);
	for (uint32_t i = 0; i < n0; i++)
		ck_assert(memcmp(r0[i].id, r1[i].id, 16) == 0 && r0[i].state == r1[i].state &&
		          r0[i].n_parts == r1[i].n_parts &&
		          memcmp(r0[i].acked, r1[i].acked, sizeof(r0[i].acked)) == 0);
}

static void stop(void)
{
	for (uint32_t g = 0; g < NG; g++) {
		assert_replicas_agree(g);
		for (int k = 0; k < 2; k++) {
			node_fsm_close(G[g].r[k].f);
			tl_rmtree(G[g].r[k].dir);
		}
	}
}

/* Every replica restarts; what each group had prepared and kept open is
 * still there after. */
static void reopen_all(void)
{
	for (uint32_t g = 0; g < NG; g++) {
		uint32_t np = n_prepared(g), nr = n_open_records(g);
		uint64_t applied = st_env_applied(env(g));
		assert_replicas_agree(g);
		reopen_group(g);
		ck_assert_uint_eq(n_prepared(g), np);
		ck_assert_uint_eq(n_open_records(g), nr);
		ck_assert_uint_eq(st_env_applied(env(g)), applied);
	}
}

/* Locks as the router's steps left them: an item is locked exactly when
 * its part is prepared and not finished, and then a single-item write of it
 * is refused (TransactionConflict) and changes nothing. */
static void assert_locks(const sim_txn *t)
{
	for (int i = 0; i < N_ITEMS; i++) {
		uint32_t p = 0;
		while (t->group[p] != ITEM_GROUP[i])
			p++;
		ck_assert_msg(locked(i) == t->holds[p], "item %s: locked %d, its part prepared %d",
		              ITEM_PK[i], locked(i), t->holds[p]);
		if (!t->holds[p])
			continue;
		Shoal__NodeResponse *r = deliver(ITEM_GROUP[i], op_put(key_json(i)));
		ck_assert_msg(code(r) == SHOAL_E_TXN_CONFLICT, "PutItem on locked %s: %s",
		              ITEM_PK[i], shoal_err_name(code(r)));
	}
}

/* ------------------------------------------------------------------------ */
/* 1. The router crashes at every step                                       */
/* ------------------------------------------------------------------------ */

/*
 * Crash points (router steps applied before it stops):
 *   0..7   the prepares of the parts in mask (bit p: part p), in part order
 *          (no token: the router sends every prepare at once, any subset
 *          may have been applied); 7: every prepare
 *   8      ... and the decision
 *   9      ... and the finish of part 1
 *   10     ... and the finish of part 2 (every finish, no ack)
 *   11     ... and the ack (no crash)
 * The loop index i: crash point i % 12, variant (i / 12) % V_COUNT, and
 * from i >= 12 * V_COUNT every replica also restarts after each step, the
 * other replica of each group leads once the router stopped, and recovery's
 * first round loses its local follow-ups.
 */
#define CRASH_POINTS 12

static const char *variant_name(int v)
{
	static const char *const names[] = {"commit", "cancel-part", "cancel-coord", "lost"};
	return names[v];
}

START_TEST(test_crash_points)
{
	int point = _i % CRASH_POINTS;
	int variant = (_i / CRASH_POINTS) % V_COUNT;
	bool reopen = _i >= CRASH_POINTS * V_COUNT;
	start();
	sim_txn t;
	plan(&t, request(variant == V_CANCEL_COORD, variant == V_CANCEL_PART, NULL), 0x11, 0x21);
	t.lost_answer = variant == V_LOST;
	ck_assert_uint_eq(t.np, 3);
	ck_assert_uint_eq(t.group[0], 1); /* the coordinator: a's group */

	unsigned mask = point < 8 ? (unsigned)point : 7;
	for (uint32_t p = 0; p < t.np; p++) {
		if (!(mask & (1u << p)))
			continue;
		Shoal__NodeResponse *r = prepare(&t, p);
		bool fails =
		    (variant == V_CANCEL_COORD && p == 0) || (variant == V_CANCEL_PART && p == 2);
		ck_assert_msg(code(r) == (fails ? SHOAL_E_TXN_CANCELED : SHOAL_OK),
		              "%s: prepare of part %u: %s", variant_name(variant), p,
		              shoal_err_name(code(r)));
		/* The coordinator's entry creates the record even when its
		 * part is cancelled. */
		ck_assert_uint_eq(r->txn_state, p == 0 ? TS_PREPARING : TS_NONE);
		if (reopen)
			reopen_all();
	}
	bool committed = false;
	if (point >= 8) {
		decide(&t);
		committed = t.commit;
		ck_assert(committed == (variant == V_COMMIT));
		if (reopen)
			reopen_all();
	}
	for (uint32_t p = 1; p < t.np && point >= 8 + (int)p; p++) {
		finish(&t, p);
		if (reopen)
			reopen_all();
	}
	if (point >= 11)
		ack(&t);
	assert_locks(&t);
	if (point == 11)
		assert_clean(); /* no crash: the router alone left nothing behind */
	else if (point < 8)     /* the coordinator's prepare opened the record */
		ck_assert_uint_eq(n_open_records(1), mask & 1);
	else /* decided, not every participant acknowledged */
		ck_assert_uint_eq(n_open_records(1), 1);
	/* With restarts, every group's leader dies with the router: the
	 * follower's recovery carries on from the replicated state. */
	if (reopen)
		for (uint32_t g = 0; g < NG; g++)
			failover(g);

	/* The router is gone.  Before NODE_TXN_RECOVER_MS recovery leaves
	 * everything alone; after it, it finishes everything. */
	now_ms += NODE_TXN_RECOVER_MS - 1000;
	for (uint32_t g = 0; g < NG; g++)
		ck_assert_uint_eq(recover_group(g), 0);
	assert_locks(&t);
	uint32_t pending = 0;
	for (uint32_t g = 0; g < NG; g++)
		pending += n_prepared(g) + n_open_records(g);
	now_ms += 2000;
	recover(reopen);
	ck_assert((recovery_actions > 0) == (pending > 0));

	assert_outcome(committed);
	assert_clean();
	assert_writable();
	stop();
}
END_TEST

/*
 * The same without a token: the router prepares the participants (parts 1
 * and 2) first and sends the coordinator's part last with decide set: it
 * prepares and decides in one entry (router/txn.c, PARTS and PD).  When a
 * participant cancels, the coordinator records ABORTED (abort) and answers
 * its own part's reasons.
 * Crash points:
 *   0..3   the participants' prepares in mask (bit 0: part 1, bit 1: part 2)
 *   4      every participant prepared, and the coordinator's entry (the
 *          prepare-and-decide: commit, or abort)
 *   5, 6   ... and the finish of part 1, of part 2
 *   7      ... and the acknowledgement (no crash)
 */
#define PD_POINTS 8

START_TEST(test_crash_points_decide_last)
{
	int point = _i % PD_POINTS;
	int variant = (_i / PD_POINTS) % V_COUNT;
	bool reopen = _i >= PD_POINTS * V_COUNT;
	start();
	sim_txn t;
	plan(&t, request(variant == V_CANCEL_COORD, variant == V_CANCEL_PART, NULL), 0x31, 0x41);
	t.lost_answer = variant == V_LOST;
	ck_assert_uint_eq(t.np, 3);
	unsigned mask = point < 4 ? (unsigned)point : 3;
	bool parts_ok = true;
	for (uint32_t p = 1; p < t.np; p++) {
		if (!(mask & (1u << (p - 1))))
			continue;
		Shoal__NodeResponse *r = prepare(&t, p);
		bool fails = variant == V_CANCEL_PART && p == 2;
		ck_assert_int_eq(code(r), fails ? SHOAL_E_TXN_CANCELED : SHOAL_OK);
		parts_ok = parts_ok && !fails && !(t.lost_answer && p == 2);
		if (reopen)
			reopen_all();
	}
	ck_assert_uint_eq(n_open_records(1), 0); /* no record before the decision */
	bool committed = false;
	if (point >= 4) {
		Shoal__TxnWrite *w0 = &t.w[0];
		w0->decide = true;
		w0->abort = !parts_ok; /* a participant did not prepare */
		Shoal__NodeResponse *r = deliver(t.group[0], op_txn_write(w0));
		t.sent[0] = true;
		committed = code(r) == SHOAL_OK && r->txn_state == TS_COMMITTED;
		ck_assert(committed == (variant == V_COMMIT));
		ck_assert_uint_eq(r->txn_state, committed ? TS_COMMITTED : TS_ABORTED);
		/* The coordinator's reasons are its own part's. */
		ck_assert_int_eq(code(r),
		                 variant == V_CANCEL_COORD ? SHOAL_E_TXN_CANCELED : SHOAL_OK);
		/* A commit's record waits for the participants; an abort's
		 * expires by itself. */
		ck_assert_uint_eq(n_open_records(1), committed ? 1 : 0);
		ck_assert(!locked(IT_A)); /* the coordinator's part never locks */
		t.decided = true;
		t.commit = committed;
		if (reopen)
			reopen_all();
	}
	for (uint32_t p = 1; p < t.np && point >= 4 + (int)p; p++) {
		if (!t.sent[p])
			continue;
		finish(&t, p);
		if (reopen)
			reopen_all();
	}
	if (point >= 7 && committed)
		ack(&t);
	assert_locks(&t);
	if (point == 7)
		assert_clean();
	if (reopen)
		for (uint32_t g = 0; g < NG; g++)
			failover(g);

	now_ms += NODE_TXN_RECOVER_MS - 1000;
	for (uint32_t g = 0; g < NG; g++)
		ck_assert_uint_eq(recover_group(g), 0);
	assert_locks(&t);
	now_ms += 2000;
	recover(reopen);
	assert_outcome(committed);
	assert_clean();
	/* The router's prepare-and-decide sent again after recovery (a retry
	 * whose first answer was lost, or one that comes late): it answers
	 * the decision taken -- by it or by the tombstone recovery left --
	 * and nothing is applied twice. */
	if (point >= 3 && parts_ok && mask == 3) {
		Shoal__TxnWrite *w0 = &t.w[0];
		w0->decide = true;
		w0->abort = false;
		Shoal__NodeResponse *r = deliver(t.group[0], op_txn_write(w0));
		if (code(r) == SHOAL_OK)
			ck_assert_uint_eq(r->txn_state, committed ? TS_COMMITTED : TS_ABORTED);
		else
			ck_assert(!committed);
		if (!committed && point < 4)
			/* Recovery found the participants' parts and asked: the
			 * tombstone decided the transaction ABORTED for good. */
			ck_assert_uint_eq(r->txn_state, TS_ABORTED);
		assert_outcome(committed);
		assert_clean();
	}
	assert_writable();

	stop();
}
END_TEST

/* Two runs of one id without a token (libshoal resends a request to another
 * router when the first died: both runs use its client_token as the id).
 * Run 1's participant d cannot prepare; before run 1 decides, d changes and
 * run 2 prepares every part and commits.  Run 1 then asks to abort: the
 * coordinator answers the decision recorded (COMMITTED), run 1 follows it,
 * and the transaction is applied exactly once, whole. */
START_TEST(test_shared_id)
{
	start();
	sim_txn r1, r2;
	Shoal__TransactWriteItemsRequest *req = request(false, true, NULL);
	plan(&r1, req, 0x51, 0x61);
	plan(&r2, req, 0x51, 0x62);
	ck_assert_int_eq(code(prepare(&r1, 1)), SHOAL_OK);
	ck_assert_int_eq(code(prepare(&r1, 2)), SHOAL_E_TXN_CANCELED);
	/* d changes: its condition (v <> old) now holds. */
	char d[256];
	snprintf(d, sizeof(d),
	         "{\"pk\":{\"S\":\"%s\"},\"sk\":{\"N\":\"1\"},\"v\":{\"S\":\"x\"},"
	         "\"n\":{\"N\":\"0\"}}",
	         ITEM_PK[IT_D]);
	ck_assert_int_eq(code(deliver(ITEM_GROUP[IT_D], op_put(d))), SHOAL_OK);
	/* Run 2: every participant prepared (part 1 holds run 1's), then the
	 * coordinator decides. */
	ck_assert_int_eq(code(prepare(&r2, 1)), SHOAL_OK);
	ck_assert_int_eq(code(prepare(&r2, 2)), SHOAL_OK);
	r2.w[0].decide = true;
	Shoal__NodeResponse *r = deliver(r2.group[0], op_txn_write(&r2.w[0]));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	/* Run 1 asks to abort: the record says COMMITTED. */
	r1.w[0].decide = true;
	r1.w[0].abort = true;
	r = deliver(r1.group[0], op_txn_write(&r1.w[0]));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	/* Both runs finish by the record (commit); twice is harmless. */
	r1.commit = r2.commit = true;
	for (uint32_t p = 1; p < r1.np; p++) {
		finish(&r1, p);
		finish(&r2, p);
	}
	ack(&r2);
	/* Applied once, whole: every item "after", d's counter 1. */
	assert_outcome(true);
	assert_clean();
	stop();
}
END_TEST

/* The coordinator's part has an error only storage finds (a malformed
 * UpdateExpression): its prepare-and-decide answers the error AND records
 * ABORTED, so the router can release the participants by the record. */
START_TEST(test_decide_request_error)
{
	start();
	sim_txn t;
	Shoal__TransactWriteItemsRequest *req = request(false, false, NULL);
	plan(&t, req, 0x71, 0x81);
	ck_assert_ptr_nonnull(req->transact_items[0]->update);
	req->transact_items[0]->update->update_expression = (char *)"SET v = = :new";
	ck_assert_int_eq(code(prepare(&t, 1)), SHOAL_OK);
	ck_assert_int_eq(code(prepare(&t, 2)), SHOAL_OK);
	t.w[0].decide = true;
	Shoal__NodeResponse *r = deliver(t.group[0], op_txn_write(&t.w[0]));
	ck_assert_int_eq(code(r), SHOAL_E_VALIDATION);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	ck_assert_ptr_nonnull(strstr(r->response->message, "Invalid UpdateExpression"));
	t.commit = false;
	for (uint32_t p = 1; p < t.np; p++)
		finish(&t, p);
	assert_outcome(false);
	assert_clean();
	stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Messages repeated or late                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_repeated_messages)
{
	start();
	sim_txn t;
	plan(&t, request(false, false, NULL), 0x12, 0x22);
	for (uint32_t p = 0; p < t.np; p++)
		ck_assert_int_eq(code(prepare(&t, p)), SHOAL_OK);
	decide(&t);
	ck_assert(t.commit);
	for (uint32_t p = 1; p < t.np; p++)
		finish(&t, p);
	ack(&t);
	assert_outcome(true);
	assert_clean();

	/* A prepare after the finish, to a participant: its marker answers
	 * the decided state and nothing is locked or applied again. */
	for (uint32_t p = 1; p < t.np; p++) {
		Shoal__NodeResponse *r = deliver(t.group[p], op_txn_write(&t.w[p]));
		ck_assert_int_eq(code(r), SHOAL_OK);
		ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	}
	/* ... and to the coordinator: its record answers. */
	Shoal__NodeResponse *r = deliver(t.group[0], op_txn_write(&t.w[0]));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	assert_clean();
	assert_outcome(true);

	/* TxnDecide again, and an abort after the commit: the decision
	 * stands, the coordinator's part is not applied twice. */
	r = deliver(t.group[0], op_decide(t.id, true, (ProtobufCBinaryData){0, NULL}));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	r = deliver(t.group[0], op_decide(t.id, false, (ProtobufCBinaryData){0, NULL}));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	/* TxnFinish again (commit, then a stray abort): no-ops. */
	for (uint32_t p = 1; p < t.np; p++) {
		ck_assert_int_eq(code(deliver(t.group[p], op_finish(t.id, true))), SHOAL_OK);
		ck_assert_int_eq(code(deliver(t.group[p], op_finish(t.id, false))), SHOAL_OK);
	}
	/* TxnAck again and TxnStatus: the record stays decided and closed. */
	ack(&t);
	r = deliver(t.group[0], op_status(t.id));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	assert_outcome(true);
	assert_clean();

	/* Recovery, much later, has nothing to do. */
	now_ms += NODE_TXN_RECOVER_MS + 1000;
	for (uint32_t g = 0; g < NG; g++)
		ck_assert_uint_eq(recover_group(g), 0);
	assert_outcome(true);
	stop();
}
END_TEST

/* A participant asks about a transaction whose coordinator never saw it:
 * the coordinator decides ABORTED on the spot and keeps a tombstone; the
 * coordinator's prepare that arrives late is refused, a commit cannot
 * override it, and nothing of the transaction is ever applied. */
START_TEST(test_tombstone)
{
	start();
	sim_txn t;
	plan(&t, request(false, false, NULL), 0x13, 0x23);
	/* Only part 1 (group 2, item c) is prepared. */
	ck_assert_int_eq(code(prepare(&t, 1)), SHOAL_OK);
	ck_assert(locked(IT_C));

	/* Too early: recovery waits. */
	now_ms += NODE_TXN_RECOVER_MS - 10;
	ck_assert_uint_eq(recover_group(2), 0);
	ck_assert(locked(IT_C));
	now_ms += 20;

	/* What group 2's recovery sends: TxnStatus to the coordinator. */
	Shoal__NodeResponse *r = deliver(t.group[0], op_status(t.id));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	ck_assert_uint_eq(n_open_records(t.group[0]), 0); /* a tombstone expires */
	/* And the same answer again (the tombstone, not a second one). */
	r = deliver(t.group[0], op_status(t.id));
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	recover(false); /* group 2 asks, is told ABORTED, drops its part */
	ck_assert(!locked(IT_C));
	ck_assert_uint_eq(n_prepared(2), 0);

	/* The router's prepares arrive late.  The coordinator's: refused,
	 * nothing locked, no record opened. */
	r = prepare(&t, 0);
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	ck_assert(!t.holds[0]);
	ck_assert(!locked(IT_A));
	ck_assert(!locked(IT_B));
	ck_assert_uint_eq(n_prepared(1), 0);
	ck_assert_uint_eq(n_open_records(1), 0);
	/* Part 1's again: group 2's marker answers, nothing locked. */
	r = deliver(t.group[1], op_txn_write(&t.w[1]));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	ck_assert(!locked(IT_C));
	/* Part 2's (group 0 never heard of it): it locks, and recovery
	 * releases it through the tombstone. */
	ck_assert_int_eq(code(prepare(&t, 2)), SHOAL_OK);
	ck_assert(locked(IT_D) && locked(IT_E));

	/* A commit cannot override the tombstone. */
	r = deliver(t.group[0], op_decide(t.id, true, (ProtobufCBinaryData){0, NULL}));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	/* A commit of a transaction the coordinator has no record of at all
	 * is refused. */
	uint8_t other[16];
	memset(other, 0x7e, sizeof(other));
	r = deliver(t.group[0], op_decide(other, true, (ProtobufCBinaryData){0, NULL}));
	ck_assert_int_eq(code(r), SHOAL_E_VALIDATION);

	now_ms += NODE_TXN_RECOVER_MS + 1;
	recover(false);
	assert_outcome(false);
	assert_clean();
	assert_writable();
	stop();
}
END_TEST

/* A router that is slow, not dead.  Its prepares took longer than
 * NODE_TXN_RECOVER_MS: recovery aborts the record first, and the router's
 * commit that comes after is answered ABORTED (the router then aborts too).
 * And a participant's recovery asking while the coordinator's record is
 * still young does not abort a transaction under way. */
START_TEST(test_slow_router)
{
	start();
	sim_txn t;
	plan(&t, request(false, false, NULL), 0x16, 0x2a);
	for (uint32_t p = 0; p < t.np; p++)
		ck_assert_int_eq(code(prepare(&t, p)), SHOAL_OK);
	now_ms += NODE_TXN_RECOVER_MS + 1;
	/* Only the coordinator's recovery runs: it decides ABORTED, and at its
	 * next scan tells the participants. */
	ck_assert_uint_gt(recover_group(t.group[0]), 0);
	ck_assert_uint_eq(n_prepared(t.group[1]), 1);
	now_ms += 1000;
	ck_assert_uint_gt(recover_group(t.group[0]), 0);
	ck_assert_uint_eq(n_prepared(t.group[1]), 0);
	ck_assert_uint_eq(n_prepared(t.group[2]), 0);
	/* The router's commit, late: refused, the decision stays. */
	Shoal__NodeResponse *r =
	    deliver(t.group[0], op_decide(t.id, true, (ProtobufCBinaryData){0, NULL}));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	t.commit = false;
	for (uint32_t p = 1; p < t.np; p++)
		finish(&t, p);
	ack(&t);
	recover(false);
	assert_outcome(false);
	assert_clean();

	/* Another run: the participants prepared early, the coordinator
	 * NODE_TXN_RECOVER_MS - 1 s later (its prepare was slow to arrive). */
	sim_txn u;
	plan(&u, request(false, false, NULL), 0x17, 0x2b);
	ck_assert_int_eq(code(prepare(&u, 1)), SHOAL_OK);
	ck_assert_int_eq(code(prepare(&u, 2)), SHOAL_OK);
	now_ms += NODE_TXN_RECOVER_MS - 1000;
	ck_assert_int_eq(code(prepare(&u, 0)), SHOAL_OK);
	now_ms += 1001;
	/* The participants' parts are old: they ask; the record is young and
	 * PREPARING, so nothing is decided and they keep their parts. */
	ck_assert_uint_gt(recover_group(u.group[1]), 0);
	ck_assert_uint_gt(recover_group(u.group[2]), 0);
	ck_assert_uint_eq(recover_group(u.group[0]), 0);
	ck_assert_uint_eq(n_prepared(u.group[1]), 1);
	ck_assert_uint_eq(n_prepared(u.group[2]), 1);
	ck_assert_uint_eq(n_open_records(u.group[0]), 1);
	/* The router commits. */
	decide(&u);
	ck_assert(u.commit);
	for (uint32_t p = 1; p < u.np; p++)
		finish(&u, p);
	ack(&u);
	assert_outcome(true);
	assert_clean();
	now_ms += NODE_TXN_RECOVER_MS + 1;
	recover(false);
	assert_outcome(true);
	stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. ClientRequestToken: a retry of a token's transaction                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_token_retry)
{
	start();
	/* The first run: with a token the coordinator prepares first, alone. */
	sim_txn t;
	plan(&t, request(false, false, "tok-1"), 0x14, 0x24);
	ck_assert(t.token);
	Shoal__NodeResponse *r = prepare(&t, 0);
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_PREPARING);
	for (uint32_t p = 1; p < t.np; p++)
		ck_assert_int_eq(code(prepare(&t, p)), SHOAL_OK);
	decide(&t);
	ck_assert(t.commit);
	for (uint32_t p = 1; p < t.np; p++)
		finish(&t, p);
	ack(&t);
	assert_outcome(true);
	assert_clean();

	/* The outcome TxnDecide recorded, as packed bytes. */
	Shoal__TransactWriteItemsResponse ok = SHOAL__TRANSACT_WRITE_ITEMS_RESPONSE__INIT;
	Shoal__Response answer = SHOAL__RESPONSE__INIT;
	answer.result_case = SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS;
	answer.transact_write_items = &ok;
	Shoal__NodeResponse rec = SHOAL__NODE_RESPONSE__INIT;
	rec.response = &answer;
	rec.txn_state = TS_COMMITTED;
	uint8_t *outcome;
	size_t outcome_len;
	ck_assert_int_eq(wire_pack(&A, &rec.base, &outcome, &outcome_len, msg), SHOAL_OK);

	/* A retry (another run: another attempt, the same request): the
	 * coordinator's prepare answers the recorded outcome, byte for byte,
	 * and locks or applies nothing. */
	sim_txn retry;
	plan(&retry, request(false, false, "tok-1"), 0x14, 0x25);
	ck_assert(memcmp(retry.digest, t.digest, 16) == 0);
	r = prepare(&retry, 0);
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_COMMITTED);
	ck_assert_int_eq(r->response->result_case, SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS);
	ck_assert_uint_eq(last_raw_len, outcome_len);
	ck_assert(memcmp(last_raw, outcome, outcome_len) == 0);
	assert_clean();
	assert_outcome(true);

	/* The same token with another request: IdempotentParameterMismatch. */
	sim_txn other;
	plan(&other, request(false, true, "tok-1"), 0x14, 0x26);
	ck_assert(memcmp(other.digest, t.digest, 16) != 0);
	r = prepare(&other, 0);
	ck_assert_msg(code(r) == SHOAL_E_IDEMPOTENT_MISMATCH, "%s", shoal_err_name(code(r)));
	assert_clean();
	assert_outcome(true);
	stop();
}
END_TEST

/* A token's transaction still PREPARING under one run: another run of it is
 * refused (TransactionInProgress) before it touches anything; the run's own
 * prepare sent twice holds; after the first run died, recovery aborts it
 * and a retry learns so. */
START_TEST(test_token_in_progress)
{
	start();
	sim_txn t;
	plan(&t, request(false, false, "tok-2"), 0x15, 0x27);
	Shoal__NodeResponse *r = prepare(&t, 0);
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_PREPARING);
	ck_assert(locked(IT_A) && locked(IT_B));

	sim_txn run2;
	plan(&run2, request(false, false, "tok-2"), 0x15, 0x28);
	r = prepare(&run2, 0);
	ck_assert_msg(code(r) == SHOAL_E_TXN_IN_PROGRESS, "%s", shoal_err_name(code(r)));
	/* Another request with that token, while it is in progress. */
	sim_txn run3;
	plan(&run3, request(true, false, "tok-2"), 0x15, 0x29);
	r = prepare(&run3, 0);
	ck_assert_msg(code(r) == SHOAL_E_IDEMPOTENT_MISMATCH, "%s", shoal_err_name(code(r)));

	/* The first run's prepare again (a retry after a lost answer): still
	 * prepared, once.  (It answers txn_state 0, not PREPARING as the
	 * first time: the router only looks for a decided state.) */
	r = deliver(t.group[0], op_txn_write(&t.w[0]));
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert(r->txn_state != TS_COMMITTED && r->txn_state != TS_ABORTED);
	ck_assert_uint_eq(n_prepared(1), 1);
	ck_assert_uint_eq(n_open_records(1), 1);
	ck_assert_int_eq(code(prepare(&t, 1)), SHOAL_OK); /* and part 1 */

	/* The first run dies; recovery aborts. */
	now_ms += NODE_TXN_RECOVER_MS + 1;
	recover(false);
	assert_outcome(false);
	assert_clean();

	/* A retry now: decided ABORTED, no recorded answer; nothing locked. */
	r = prepare(&run2, 0);
	ck_assert_int_eq(code(r), SHOAL_OK);
	ck_assert_uint_eq(r->txn_state, TS_ABORTED);
	ck_assert(!run2.holds[0]);
	assert_clean();
	assert_outcome(false);
	assert_writable();
	stop();
}
END_TEST

/* ------------------------------------------------------------------------ */

static void setup(void)
{
	sh_arena_init(&A);
	batches = 0;
	recovery_actions = 0;
}

static void teardown(void)
{
	sh_arena_fini(&A);
}

static Suite *txn_crash_suite(void)
{
	Suite *s = suite_create("txn_crash");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_crash_points, 0, 2 * CRASH_POINTS * V_COUNT);
	tcase_add_loop_test(tc, test_crash_points_decide_last, 0, 2 * PD_POINTS * V_COUNT);
	tcase_add_test(tc, test_repeated_messages);
	tcase_add_test(tc, test_shared_id);
	tcase_add_test(tc, test_decide_request_error);
	tcase_add_test(tc, test_tombstone);
	tcase_add_test(tc, test_slow_router);
	tcase_add_test(tc, test_token_retry);
	tcase_add_test(tc, test_token_in_progress);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(txn_crash_suite)
