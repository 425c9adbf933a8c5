/*
 * server.c -- shoal-node's request server: nng REP on the node's rpc URL.
 *
 * Fully asynchronous: C contexts (nng_ctx), each driven by one nng_aio
 * whose callback runs this state machine; no thread ever blocks on a
 * request, and a request costs no thread hop it does not need:
 *
 *   state   event                                  next    where
 *   ------  -------------------------------------  ------  ----------------
 *   RECV    request received; answered at once     SEND    nng callback
 *           (any_replica reads, LOCAL, errors)
 *   RECV    write / consistent read handed to the  WAIT    nng callback
 *           group (node_group_submit)
 *   RECV    socket closed (ECLOSED / ECANCELED)    DONE    nng callback
 *   WAIT    the loop completed the waiter: write   SEND    loop thread
 *           result / barrier passed (read served)
 *   SEND    reply sent (or failed)                 RECV    nng callback
 *   SEND    not sent in NODE_REPLY_SEND_MS: its    RECV    nng callback
 *           connection is closed (a peer that stopped reading must not
 *           hold contexts: REP queues replies behind a stuck one)
 *
 * An eventually consistent read is served from LMDB inside the receive
 * callback (microseconds); a write's answer is sent by the loop thread
 * right after its Command applied (nng_ctx_send with an aio is thread-safe),
 * a consistent read's after its barrier, without waking any other thread.
 *
 * One front door (start_request) does, for every request and in order:
 *   1. decode: wire_check_framing + shoal__node_request__unpack into the
 *      request's arena (freed in complete()), exactly one operation;
 *   2. look the operation up in the one dispatch table `ops` below, and
 *      check who sent it: operations only nodes send (OP_FROM_NODE) are
 *      refused (ACCESS_DENIED) from a router's certificate (admit_peer);
 *   3. ownership: the group must be hosted here (else SHOAL_E_UNAVAILABLE),
 *      healthy (node_group_health: FSM not failed, node not stopping);
 *   4. leadership for writes and consistent reads (NOT_LEADER with the
 *      believed leader in NodeResponse.leader_node); then backpressure:
 *      base writes (OP_BASE_WRITE) are refused with THROUGHPUT while the
 *      group's unshipped index deltas exceed --outbox-limit (ship.c
 *      publishes the backlog), so GSI lag stays bounded; then capacity:
 *      node_cap_admit refuses (THROUGHPUT, at once) a request whose
 *      partition's token bucket is empty (capacity.c);
 *   5. dispatch by flags:
 *        WRITE  prepare a CommandOp pointing into the decoded request (after
 *               the same validation the FSM will do, so that junk never
 *               reaches the log) and queue it on the group
 *               (node_group_submit); the loop group-commits it and hands
 *               back the op's packed NodeResponse from the FSM;
 *        READ   any_replica: the handler reads LMDB right away (storage
 *               reads are thread-safe); otherwise the read waits for a Raft
 *               barrier on the leader and runs on the loop (consistent);
 *        LOCAL  the handler runs at once on any replica (group_status).
 * Handlers (handlers.c) never repeat these checks.
 *
 * Batches.  A router under load sends a node many requests in one message
 * (NodeRequest.batch: packed NodeRequests, nothing else), which costs one
 * receive and one send instead of one each per request.  Each member is an
 * nreq of its own, taken from a pool, and goes through the same front door
 * as a message's single request, concurrently with the others: reads are
 * answered in the receive callback, writes of one group land in the same
 * group-commit queue together.  A member's answer is packed into its arena;
 * the last member to finish (an atomic count, +1 while they are started)
 * sends one NodeResponse whose batch holds every answer in request order,
 * from whichever thread it finished on.  Statistics count members, not
 * messages.
 *
 * Shutdown: node_server_stop runs once the groups are closed, so every
 * waiting request has been answered (SHOAL_E_UNAVAILABLE) and new ones are
 * refused by step 3; it waits for in-flight requests to be answered, closes
 * the socket (which ends every pending receive), stops and frees the aios.
 *
 * Threads: node_server_start/stop on the main thread; the state machine on
 * nng's callback threads and (WAIT -> SEND) the loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "common/alloc.h"
#include "common/tls.h"
#include "node/node.h"
#include "proto/lanes.h"
#include "proto/wire.h"

/* Dispatch flags. */
enum {
	OP_READ = 1 << 0,       /* leader + barrier unless any_replica */
	OP_WRITE = 1 << 1,      /* leader, through Raft */
	OP_LOCAL = 1 << 2,      /* any replica, no leadership */
	OP_GROUP0 = 1 << 3,     /* the metadata group only */
	OP_ANY_HEALTH = 1 << 4, /* served even by a failed replica */
	OP_BASE_WRITE = 1 << 5, /* writes base items: refused while the outbox is full */
	OP_FROM_NODE = 1 << 6,  /* sent by nodes only: refused from a router's certificate */
	OP_NODE = 1 << 7,       /* node-level: NodeRequest.group is not looked at */
	OP_MEMBER = 1 << 8,     /* a Raft membership change, on the group's leader */
};

typedef int (*prepare_fn)(node_call *c, Shoal__CommandOp *op);

typedef struct op_def {
	const char *name;
	unsigned flags;
	int (*handle)(node_call *c); /* READ, LOCAL */
	prepare_fn prepare;          /* WRITE */
} op_def;

static int node_prepare_put_item(node_call *c, Shoal__CommandOp *op);
static int node_prepare_update_item(node_call *c, Shoal__CommandOp *op);
static int node_prepare_delete_item(node_call *c, Shoal__CommandOp *op);
static int node_prepare_batch_write_item(node_call *c, Shoal__CommandOp *op);
static int prepare_define_table(node_call *c, Shoal__CommandOp *op);
static int prepare_drop_table(node_call *c, Shoal__CommandOp *op);
static int prepare_update_table(node_call *c, Shoal__CommandOp *op);
static int prepare_activate_index(node_call *c, Shoal__CommandOp *op);
static int prepare_index_ship(node_call *c, Shoal__CommandOp *op);
static int prepare_txn_write(node_call *c, Shoal__CommandOp *op);
static int prepare_txn_decide(node_call *c, Shoal__CommandOp *op);
static int prepare_txn_finish(node_call *c, Shoal__CommandOp *op);
static int prepare_txn_acks(node_call *c, Shoal__CommandOp *op);
static int prepare_txn_status(node_call *c, Shoal__CommandOp *op);

/* How a node serves a registry operation (the `node` column of proto/ops.h). */
#define NODE_ENTRY_NODE_READ(field)                                                                \
	{                                                                                          \
#field, OP_READ, node_handle_##field, NULL                                         \
	}
#define NODE_ENTRY_NODE_WRITE(field)                                                               \
	{                                                                                          \
#field, OP_WRITE | OP_BASE_WRITE, NULL, node_prepare_##field                       \
	}
#define NODE_ENTRY_NODE_NONE(field)                                                                \
	{                                                                                          \
#field, 0, NULL, NULL                                                              \
	}

static const op_def ops[NODE_OP__COUNT] = {
#define NODE_ENTRY(Name, field, CONST, cli, flags, node, summary)                                  \
	[NODE_OP_##CONST] = NODE_ENTRY_##node(field),
    SHOAL_OPS(NODE_ENTRY)
#undef NODE_ENTRY
        [NODE_OP_DEFINE_TABLE] = {"define_table", OP_WRITE, NULL, prepare_define_table},
    [NODE_OP_DROP_TABLE] = {"drop_table", OP_WRITE, NULL, prepare_drop_table},
    [NODE_OP_GROUP_STATUS] = {"group_status", OP_LOCAL | OP_ANY_HEALTH, node_handle_group_status,
                              NULL},
    [NODE_OP_LIST_CATALOG] = {"list_catalog", OP_READ | OP_GROUP0, node_handle_list_catalog, NULL},
    [NODE_OP_UPDATE_TABLE_DEF] = {"update_table_def", OP_WRITE | OP_GROUP0, NULL,
                                  prepare_update_table},
    [NODE_OP_ACTIVATE_INDEX] = {"activate_index", OP_WRITE | OP_GROUP0, NULL,
                                prepare_activate_index},
    [NODE_OP_INDEX_SHIP] = {"index_ship", OP_WRITE | OP_FROM_NODE, NULL, prepare_index_ship},
    /* A prepare writes base items (when it commits): refused while the
     * outbox is full, as any base write.  The decision and what follows
     * it never are: they end a transaction and free its items. */
    [NODE_OP_TXN_WRITE] = {"txn_write", OP_WRITE | OP_BASE_WRITE, NULL, prepare_txn_write},
    [NODE_OP_TXN_DECIDE] = {"txn_decide", OP_WRITE, NULL, prepare_txn_decide},
    [NODE_OP_TXN_FINISH] = {"txn_finish", OP_WRITE, NULL, prepare_txn_finish},
    [NODE_OP_TXN_ACK] = {"txn_acks", OP_WRITE, NULL, prepare_txn_acks},
    /* (txn_finish and txn_acks come from routers too: a coordinator's
     * router, and a participant's recovery on a node.) */
    [NODE_OP_TXN_STATUS] = {"txn_status", OP_WRITE | OP_FROM_NODE, NULL, prepare_txn_status},
    [NODE_OP_CAP_REPORT] = {"cap_report", OP_LOCAL | OP_ANY_HEALTH | OP_FROM_NODE,
                            node_handle_cap_report, NULL},
    [NODE_OP_SCRUB_CHECK] = {"scrub_check", OP_LOCAL | OP_ANY_HEALTH | OP_FROM_NODE,
                             node_handle_scrub_check, NULL},
    /* (map_change: an operator's, through a router.) */
    [NODE_OP_MAP_CHANGE] = {"map_change", OP_WRITE | OP_GROUP0, NULL, node_prepare_map_change},
    [NODE_OP_MAP_GET] = {"map_get", OP_NODE, node_handle_map_get, NULL},
    [NODE_OP_NODE_STATUS] = {"node_status", OP_NODE, node_handle_node_status, NULL},
    [NODE_OP_MEMBER_CHANGE] = {"member_change", OP_MEMBER | OP_FROM_NODE, NULL, NULL},
    /* Partition moves (pmove.c): from group 0's executor and from the
     * source group's leader only. */
    [NODE_OP_PART_MOVE] = {"part_move", OP_LOCAL | OP_FROM_NODE, node_handle_part_move, NULL},
    [NODE_OP_PART_READY] = {"part_ready", OP_LOCAL | OP_FROM_NODE, node_handle_part_ready, NULL},
    [NODE_OP_PART_INGEST] = {"part_ingest", OP_WRITE | OP_FROM_NODE, NULL,
                             node_prepare_part_ingest},
    [NODE_OP_PART_OWN] = {"part_own", OP_WRITE | OP_FROM_NODE, NULL, node_prepare_part_own},
    [NODE_OP_INVALID] = {"invalid", 0, NULL, NULL},
};

_Static_assert((int)NODE_OP_DEFINE_TABLE == (int)SHOAL_OP__COUNT,
               "the node's client operations are the registry's, in its order");

bool node_op_served(int op)
{
	return op >= 0 && op < NODE_OP__COUNT && (op == NODE_OP_INVALID || ops[op].flags != 0);
}

const char *node_op_name(int op)
{
	if (op < 0 || op >= NODE_OP__COUNT)
		return "invalid";
	return ops[op].name;
}

typedef enum rctx_state {
	RCTX_RECV, /* a receive is pending */
	RCTX_WAIT, /* the request (or a member of the batch) waits for the loop */
	RCTX_SEND, /* the reply is being sent */
	RCTX_DONE, /* the socket closed: idle for good */
} rctx_state;

typedef struct rctx rctx;

/* One operation being handled: a message's single request, or one member of
 * a batch.  Everything it decodes and builds lives in its arena. */
typedef struct nreq {
	rctx *x; /* the REP context that answers it */
	sh_arena arena;
	node_waiter waiter;
	bool waiter_init;
	ProtobufCAllocator alloc;
	Shoal__NodeRequest *req;
	Shoal__NodeResponse nresp;
	Shoal__Response resp;
	node_call c;
	int op;
	uint64_t t0;
	uint8_t *out; /* a member's packed NodeResponse, in arena */
	size_t out_len;
	struct nreq *next; /* the server's free list */
	size_t pool_held;  /* arena bytes it holds while in the pool */
} nreq;

/* One REP context and the message it is answering. */
struct rctx {
	node_server *s;
	nng_ctx ctx;
	nng_aio *aio;
	rctx_state state;
	nng_msg *msg;  /* the request message, until the reply is built */
	nng_pipe pipe; /* the connection it came on (the reply leaves on it) */
	nreq one;      /* a message with one request */
	/* A batch: its members (from the server's pool) and how many are
	 * still being handled (+1 while they are being started). */
	nreq **members;
	uint32_t n_members;
	atomic_uint pending;
};

struct node_server {
	node *node;
	nng_socket sock;
	bool sock_open;
	rctx *ctxs;
	unsigned n_ctxs;
	sh_listen_guard *listener; /* kept accepting (common/tls.h) */
	pthread_mutex_t mu;
	pthread_cond_t idle;
	unsigned busy;          /* messages received and not yet answered */
	int64_t full_logged_ms; /* when "all contexts busy" was last logged */
	/* Idle batch members (mu): at most NODE_BATCH_POOL_KEEP holding at
	 * most NODE_BATCH_POOL_BYTES; members in use are in their context's
	 * `members`. */
	nreq *free_members;
	uint32_t n_free;
	size_t free_bytes;
	uint32_t f_req_batch, f_resp_batch; /* NodeRequest.batch, NodeResponse.batch */
};

/* ------------------------------------------------------------------------ */
/* Writes: prepare the Command operation                                     */
/* ------------------------------------------------------------------------ */

/* Each runs the conversion the FSM will run at apply time, so that a request
 * it would refuse is refused now, without a trip through the Raft log; the
 * result of the conversion is thrown away (the FSM converts again from the
 * protobuf in the entry). */

/* A single-item write's idempotency token goes into the log with it
 * (fsm_apply.c answers a retry with the first answer). */
static int write_token(node_call *c, Shoal__CommandOp *op)
{
	ProtobufCBinaryData t = c->req->write_token;
	if (t.len != 0 && t.len != ST_TXN_ID_LEN)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "a write token has %d bytes (got %zu)", ST_TXN_ID_LEN, t.len);
	op->write_token = t;
	return SHOAL_OK;
}

static int node_prepare_put_item(node_call *c, Shoal__CommandOp *op)
{
	st_put_req r;
	int rc = wire_put_req_from_pb(c->arena, c->req->request->put_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_PUT;
	op->put = c->req->request->put_item;
	return write_token(c, op);
}

static int node_prepare_update_item(node_call *c, Shoal__CommandOp *op)
{
	st_update_req r;
	int rc = wire_update_req_from_pb(c->arena, c->req->request->update_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_UPDATE;
	op->update = c->req->request->update_item;
	return write_token(c, op);
}

static int node_prepare_delete_item(node_call *c, Shoal__CommandOp *op)
{
	st_delete_req r;
	int rc = wire_delete_req_from_pb(c->arena, c->req->request->delete_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_DELETE;
	op->delete_ = c->req->request->delete_item;
	return write_token(c, op);
}

static int node_prepare_batch_write_item(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__BatchWriteItemRequest *b = c->req->request->batch_write_item;
	size_t n = 0;
	for (size_t i = 0; i < b->n_request_items; i++) {
		const Shoal__TableWriteRequests *t = b->request_items[i];
		if (t == NULL || t->table_name == NULL || t->table_name[0] == '\0')
			return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
			               "1 validation error detected: Value null at 'tableName' "
			               "failed to satisfy constraint: Member must not be null");
		n += t->n_requests;
	}
	if (n == 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'requestItems' failed "
		               "to satisfy constraint: Member must have length greater than or "
		               "equal to 1");
	op->op_case = SHOAL__COMMAND_OP__OP_BATCH_WRITE;
	op->batch_write = c->req->request->batch_write_item;
	return SHOAL_OK;
}

static int prepare_define_table(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__TableDefine *d = c->req->define_table;
	if (d->def == NULL)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "define_table without a definition");
	if (d->table_id == 0 && c->req->group != 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "define_table with table id 0 (assign) is for group 0 only");
	st_table_def def;
	int rc = wire_create_table_from_pb(c->arena, d->def, &def, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	op->define_table = c->req->define_table;
	return SHOAL_OK;
}

static int prepare_drop_table(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__TableDrop *d = c->req->drop_table;
	if (d->table_name == NULL || d->table_name[0] == '\0')
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "drop_table without a table name");
	op->op_case = SHOAL__COMMAND_OP__OP_DROP_TABLE;
	op->drop_table = c->req->drop_table;
	return SHOAL_OK;
}

static int prepare_update_table(node_call *c, Shoal__CommandOp *op)
{
	st_table_update_req r;
	int rc = wire_table_update_from_pb(c->arena, c->req->update_table, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_UPDATE_TABLE;
	op->update_table = c->req->update_table;
	return SHOAL_OK;
}

static int prepare_activate_index(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__IndexActivate *a = c->req->activate_index;
	if (a->table_name == NULL || a->table_name[0] == '\0' || a->index_name == NULL ||
	    a->index_name[0] == '\0')
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "activate_index needs a table name and an index name");
	op->op_case = SHOAL__COMMAND_OP__OP_ACTIVATE_INDEX;
	op->activate_index = c->req->activate_index;
	return SHOAL_OK;
}

static int prepare_index_ship(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__IndexApply *ia = c->req->index_ship;
	if (ia->source_group >= sh_cluster_group_cap(c->node->conf))
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "index_ship from group %u: the cluster has %u groups",
		               ia->source_group, sh_cluster_group_cap(c->node->conf));
	if (ia->n_deltas == 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "index_ship without deltas");
	st_delta *d = sh_arena_calloc(c->arena, ia->n_deltas, sizeof(*d));
	if (d == NULL)
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	int rc = node_index_deltas_from_pb(ia, d, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* A batch the state machine would refuse (a GSI range moving or moved
	 * away, storage/parts.h) is refused here, without a Raft entry. */
	st_index_refusal ref;
	rc = st_index_apply_check(node_group_env(c->group), d, (uint32_t)ia->n_deltas, &ref,
	                          c->errmsg);
	if (rc == SHOAL_E_WRONG_GROUP &&
	    node_index_refused_to_pb(c->arena, &ref, c->nresp, c->errmsg) != SHOAL_OK)
		return SHOAL_E_NOMEM;
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_INDEX_APPLY;
	op->index_apply = c->req->index_ship;
	return SHOAL_OK;
}

/* Transactions: the FSM checks everything again (fsm_txn.c); here, what
 * keeps junk out of the log. */
static int txn_id_check(node_call *c, ProtobufCBinaryData id)
{
	if (id.len != ST_TXN_ID_LEN)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "a transaction id has %d bytes (got %zu)", ST_TXN_ID_LEN, id.len);
	return SHOAL_OK;
}

static int prepare_txn_write(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__TxnWrite *w = c->req->txn_write;
	int rc = txn_id_check(c, w->id);
	if (rc != SHOAL_OK)
		return rc;
	if (w->n_actions == 0 || w->n_actions > ST_MAX_TXN_ITEMS || w->n_positions != w->n_actions)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "txn_write with %zu actions and %zu positions", w->n_actions,
		               w->n_positions);
	if (!w->single && w->coord_group >= sh_cluster_group_cap(c->node->conf))
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "txn_write: no group %u",
		               w->coord_group);
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_WRITE;
	op->txn_write = c->req->txn_write;
	return SHOAL_OK;
}

static int prepare_txn_decide(node_call *c, Shoal__CommandOp *op)
{
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_DECIDE;
	op->txn_decide = c->req->txn_decide;
	return txn_id_check(c, c->req->txn_decide->id);
}

static int prepare_txn_finish(node_call *c, Shoal__CommandOp *op)
{
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_FINISH;
	op->txn_finish = c->req->txn_finish;
	return txn_id_check(c, c->req->txn_finish->id);
}

static int prepare_txn_acks(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__TxnAcks *a = c->req->txn_acks;
	if (a->n_acks == 0 || a->n_acks > 65536)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "txn_acks with %zu acknowledgements",
		               a->n_acks);
	for (size_t i = 0; i < a->n_acks; i++) {
		int rc = txn_id_check(c, a->acks[i]->id);
		if (rc != SHOAL_OK)
			return rc;
	}
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_ACKS;
	op->txn_acks = c->req->txn_acks;
	return SHOAL_OK;
}

static int prepare_txn_status(node_call *c, Shoal__CommandOp *op)
{
	op->op_case = SHOAL__COMMAND_OP__OP_TXN_STATUS;
	op->txn_status = c->req->txn_status;
	return txn_id_check(c, c->req->txn_status->id);
}

/* ------------------------------------------------------------------------ */
/* The front door                                                            */
/* ------------------------------------------------------------------------ */

/* Which operation a decoded request is; SHOAL_OK or why it is not one. */
static int classify(const Shoal__NodeRequest *req, int *op, char *errmsg)
{
	if (req->n_batch > 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "a request of a NodeRequest batch cannot be a batch itself");
	int set = (req->request != NULL) + (req->define_table != NULL) + (req->drop_table != NULL) +
	          (req->group_status != 0) + (req->list_catalog != 0) +
	          (req->update_table != NULL) + (req->activate_index != NULL) +
	          (req->index_ship != NULL) + (req->txn_write != NULL) + (req->txn_decide != NULL) +
	          (req->txn_finish != NULL) + (req->txn_acks != NULL) + (req->txn_status != NULL) +
	          (req->cap_report != NULL) + (req->scrub_check != NULL) +
	          (req->map_change != NULL) + (req->map_get != 0) + (req->node_status != 0) +
	          (req->member_change != NULL) + (req->part_move != NULL) +
	          (req->part_ingest != NULL) + (req->part_own != NULL) + (req->part_ready != NULL);
	if (set != 1)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "a NodeRequest carries exactly one operation (found %d)", set);
	if (req->define_table != NULL) {
		*op = NODE_OP_DEFINE_TABLE;
	} else if (req->drop_table != NULL) {
		*op = NODE_OP_DROP_TABLE;
	} else if (req->group_status) {
		*op = NODE_OP_GROUP_STATUS;
	} else if (req->list_catalog) {
		*op = NODE_OP_LIST_CATALOG;
	} else if (req->update_table != NULL) {
		*op = NODE_OP_UPDATE_TABLE_DEF;
	} else if (req->activate_index != NULL) {
		*op = NODE_OP_ACTIVATE_INDEX;
	} else if (req->index_ship != NULL) {
		*op = NODE_OP_INDEX_SHIP;
	} else if (req->txn_write != NULL) {
		*op = NODE_OP_TXN_WRITE;
	} else if (req->txn_decide != NULL) {
		*op = NODE_OP_TXN_DECIDE;
	} else if (req->txn_finish != NULL) {
		*op = NODE_OP_TXN_FINISH;
	} else if (req->txn_acks != NULL) {
		*op = NODE_OP_TXN_ACK;
	} else if (req->txn_status != NULL) {
		*op = NODE_OP_TXN_STATUS;
	} else if (req->cap_report != NULL) {
		*op = NODE_OP_CAP_REPORT;
	} else if (req->scrub_check != NULL) {
		*op = NODE_OP_SCRUB_CHECK;
	} else if (req->map_change != NULL) {
		*op = NODE_OP_MAP_CHANGE;
	} else if (req->map_get) {
		*op = NODE_OP_MAP_GET;
	} else if (req->node_status) {
		*op = NODE_OP_NODE_STATUS;
	} else if (req->member_change != NULL) {
		*op = NODE_OP_MEMBER_CHANGE;
	} else if (req->part_move != NULL) {
		*op = NODE_OP_PART_MOVE;
	} else if (req->part_ingest != NULL) {
		*op = NODE_OP_PART_INGEST;
	} else if (req->part_own != NULL) {
		*op = NODE_OP_PART_OWN;
	} else if (req->part_ready != NULL) {
		*op = NODE_OP_PART_READY;
	} else {
		if (req->request->op_case == SHOAL__REQUEST__OP__NOT_SET)
			return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
			               "the request carries no operation");
		shoal_op o = wire_op_of(req->request->op_case);
		if (o >= SHOAL_OP__COUNT || ops[o].flags == 0) {
			const char *name = wire_op_name(req->request->op_case);
			return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
			               "%s is not an operation of a storage node",
			               name[0] != '\0' ? name : "this operation");
		}
		*op = (int)o; /* NODE_OP_<CONST> == SHOAL_OP_<CONST> */
	}
	return SHOAL_OK;
}

static void waiter_done(node_waiter *wt);

/* The write path: queue the operation on the group; its packed NodeResponse
 * arrives in waiter_done.  SHOAL_OK means pending. */
static int do_write(nreq *q, const op_def *d, size_t request_size)
{
	node_call *c = &q->c;
	node_waiter *wt = &q->waiter;
	Shoal__CommandOp op = SHOAL__COMMAND_OP__INIT;
	int rc = d->prepare(c, &op);
	if (rc != SHOAL_OK)
		return rc;
	wt->kind = NODE_WAIT_WRITE;
	wt->op = op;
	wt->size = request_size;
	return node_group_submit(c->group, wt, c->errmsg);
}

/* Queues a consistent read behind a Raft barrier on the group; the read
 * runs in waiter_done.  SHOAL_OK means pending. */
static int do_barrier(nreq *q)
{
	node_waiter *wt = &q->waiter;
	wt->kind = NODE_WAIT_BARRIER;
	return node_group_submit(q->c.group, wt, q->c.errmsg);
}

/* Who may send op: with TLS, everyone at the other end is a node or a router
 * (the listener's configuration refuses anyone else in the handshake); an
 * operation only nodes send is refused from a router's certificate.  The
 * peer is looked up only for those (from the message's pipe). */
static int admit_peer(nreq *q, const op_def *d)
{
	if (!(d->flags & OP_FROM_NODE) || q->c.node->tls == NULL)
		return SHOAL_OK;
	sh_tls_peer p = sh_tls_pipe_peer(nng_msg_get_pipe(q->x->msg));
	if (p == SH_TLS_PEER_NODE)
		return SHOAL_OK;
	return sh_errf(q->c.errmsg, SHOAL_E_ACCESS_DENIED,
	               "%s is sent by nodes only; this connection's certificate is %s", d->name,
	               p == SH_TLS_PEER_ROUTER ? "the routers'" : "no node's");
}

/* Queues a membership change on the group's loop (member.c); the answer
 * arrives in waiter_done.  SHOAL_OK means pending. */
static int do_member(nreq *q)
{
	const Shoal__MemberChange *m = q->c.req->member_change;
	node_waiter *wt = &q->waiter;
	if (m->action == SHOAL__MEMBER_CHANGE__ACTION__NONE || m->node == 0)
		return sh_errf(q->c.errmsg, SHOAL_E_VALIDATION,
		               "member_change needs an action and a node id");
	if (m->address != NULL && strlen(m->address) >= sizeof(wt->member_address))
		return sh_errf(q->c.errmsg, SHOAL_E_VALIDATION,
		               "member_change: address longer than %zu bytes",
		               sizeof(wt->member_address) - 1);
	wt->kind = NODE_WAIT_MEMBER;
	wt->member_action = (int)m->action;
	wt->member_node = m->node;
	snprintf(wt->member_address, sizeof(wt->member_address), "%s",
	         m->address != NULL ? m->address : "");
	return node_group_submit(q->c.group, wt, q->c.errmsg);
}

/* Checks ownership, health and leadership, then runs the operation or
 * hands it to the loop (*pending). */
static int dispatch(nreq *q, int op, size_t request_size, uint32_t *leader, bool *pending)
{
	node_call *c = &q->c;
	const op_def *d = &ops[op];
	node *n = c->node;
	const Shoal__NodeRequest *req = c->req;

	/* Node-level operations need no group (and are answered by a node
	 * that hosts none yet: a joining one). */
	if (d->flags & OP_NODE)
		return d->handle(c);
	/* Held until complete() (node_group_acquire: the group may leave
	 * this node meanwhile, node.c "Groups follow the map"). */
	c->group = node_group_acquire(n, req->group);
	if (c->group == NULL) {
		if (req->group >= sh_cluster_group_cap(n->conf))
			return sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
			               "group %u does not exist (the cluster has %u groups)",
			               req->group, sh_cluster_group_cap(n->conf));
		return sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE, "group %u is not hosted on node %u",
		               req->group, n->id);
	}
	if ((d->flags & OP_GROUP0) && req->group != 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "%s is served by group 0 only",
		               d->name);
	if (!(d->flags & OP_ANY_HEALTH)) {
		int rc = node_group_health(c->group, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}

	/* A router that routed by another table of this name (its cache
	 * predates a DeleteTable + CreateTable through another router) must
	 * refresh it before anything is read or written here. */
	const char *table = req->request != NULL ? wire_request_table(req->request) : NULL;
	if (req->table_id != 0 && table != NULL) {
		uint32_t id;
		if (st_table_id(node_group_env(c->group), table, &id, c->errmsg) == SHOAL_OK &&
		    id != req->table_id)
			return sh_errf(
			    c->errmsg, SHOAL_E_WRONG_EPOCH,
			    "table %s is id %u in group %u, the router routed it as id %u", table,
			    id, req->group, req->table_id);
	}

	bool consistent_read = (d->flags & OP_READ) && !req->any_replica;
	if (d->flags & OP_MEMBER) {
		node_group_status st;
		node_group_status_get(c->group, &st);
		if (st.role != RAFT_LEADER) {
			*leader = st.leader;
			return sh_errf(c->errmsg, SHOAL_E_NOT_LEADER,
			               "node %u is not the leader of group %u", n->id, req->group);
		}
		int rc = do_member(q);
		if (rc == SHOAL_OK)
			*pending = true;
		return rc;
	}
	/* A replica whose storage is being rebuilt from Raft after a machine
	 * crash holds an old state until it catches up: the router reads
	 * elsewhere meanwhile.  (Consistent reads wait for a barrier on the
	 * leader, which has applied everything committed.) */
	if ((d->flags & OP_READ) && !consistent_read && node_group_rebuilding(c->group))
		return sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
		               "group %u on node %u is rebuilding its storage from Raft after an "
		               "unclean machine shutdown",
		               req->group, n->id);
	if ((d->flags & OP_WRITE) || consistent_read) {
		node_group_status st;
		node_group_status_get(c->group, &st);
		if (st.role != RAFT_LEADER) {
			*leader = st.leader;
			return sh_errf(c->errmsg, SHOAL_E_NOT_LEADER,
			               "node %u is not the leader of group %u", n->id, req->group);
		}
	}
	/* Backpressure: index propagation must not fall unboundedly behind
	 * the base table, so base writes wait (the client retries, as with
	 * DynamoDB's GSI throttling) while the outbox is over its bound. */
	/* (A transaction's decision is not refused: its participants hold
	 * locks, and passed this check when they prepared.) */
	bool decision = req->txn_write != NULL && req->txn_write->decide;
	if ((d->flags & OP_BASE_WRITE) && !decision &&
	    node_ship_backlog(n->ship, req->group) > n->outbox_limit)
		return sh_errf(c->errmsg, SHOAL_E_THROUGHPUT,
		               "Throughput exceeds the current capacity of your table or index: "
		               "global secondary index propagation of group %u is behind (%" PRIu64
		               " index updates waiting, limit %" PRIu64 ")",
		               req->group, node_ship_backlog(n->ship, req->group), n->outbox_limit);
	/* Capacity: every partition bucket the request draws on must hold
	 * tokens, else it is refused at once (never queued). */
	int crc = node_cap_admit(n->cap, req->group, req, c->errmsg);
	if (crc != SHOAL_OK)
		return crc;
	if ((d->flags & OP_WRITE) || consistent_read) {
		int rc = (d->flags & OP_WRITE) ? do_write(q, d, request_size) : do_barrier(q);
		if (rc == SHOAL_OK)
			*pending = true;
		return rc;
	}
	return d->handle(c);
}

/* Re-labels a write's NodeResponse from the FSM with the request's id. */
static int relabel(sh_arena *a, const uint8_t *raw, size_t len, uint64_t request_id,
                   Shoal__NodeResponse **out, char *errmsg)
{
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	ProtobufCMessage *m;
	char why[SH_ERRMSG_SIZE];
	if (wire_unpack_local(&shoal__node_response__descriptor, &alloc, raw, len, &m, why) !=
	    SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "the state machine's result is malformed: %s", why);
	Shoal__NodeResponse *r = (Shoal__NodeResponse *)m;
	if (r->response == NULL) {
		r->response = sh_arena_alloc(a, sizeof(*r->response));
		if (r->response == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		*r->response = (Shoal__Response)SHOAL__RESPONSE__INIT;
	}
	r->response->request_id = request_id;
	*out = r; /* arena memory: freeing it is a no-op, the arena goes with the request */
	return SHOAL_OK;
}

/* The message is answered (or dropped): receive the next one (SEND -> RECV). */
static void rearm(rctx *x)
{
	node_server *s = x->s;
	nng_aio_set_msg(x->aio, NULL);
	pthread_mutex_lock(&s->mu);
	if (--s->busy == 0)
		pthread_cond_broadcast(&s->idle);
	atomic_store_explicit(&s->node->stats.server_busy, s->busy, memory_order_relaxed);
	pthread_mutex_unlock(&s->mu);
	x->state = RCTX_RECV;
	nng_aio_set_timeout(x->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(x->ctx, x->aio);
}

/* Sends m (NULL: out of memory, no reply) as x's answer: -> SEND. */
static void send_reply(rctx *x, nng_msg *m)
{
	nng_msg_free(x->msg);
	x->msg = NULL;
	x->state = RCTX_SEND;
	if (m == NULL) {
		/* No reply: REP drops the request; the router times out. */
		node_logf(NODE_LOG_ERROR, "server: out of memory building a reply");
		rearm(x);
		return;
	}
	/* REP queues a reply behind the pipe's previous one without a limit:
	 * a peer that stopped reading (or a connection stuck under it) would
	 * hold this context, and soon all of them -- the node would answer no
	 * one.  A reply that cannot leave in NODE_REPLY_SEND_MS is given up,
	 * and its pipe closed (rctx_cb) so that the peer connects again. */
	nng_aio_set_timeout(x->aio, NODE_REPLY_SEND_MS);
	nng_aio_set_msg(x->aio, m);
	nng_ctx_send(x->ctx, x->aio);
}

static void member_done(rctx *x);

/* Answers q with rc (and, for a write, its packed result raw), counts it and
 * frees its request; a single request's answer is sent, a member's kept for
 * the batch's.  nng callback or loop thread. */
static void complete(nreq *q, int rc, uint32_t leader, uint8_t *raw, size_t raw_len)
{
	sh_arena *a = &q->arena;
	node_call *c = &q->c;
	Shoal__NodeResponse *nresp = &q->nresp;
	Shoal__NodeRequest *req = q->req;
	rctx *x = q->x;

	if (rc == SHOAL_OK && raw != NULL) {
		rc = relabel(a, raw, raw_len, q->resp.request_id, &nresp, c->errmsg);
		if (rc != SHOAL_OK)
			nresp = &q->nresp;
	}
	if (rc != SHOAL_OK) {
		/* A failed request answers with the status alone -- and a
		 * refused index batch with the range (prepare_index_ship). */
		Shoal__PartRange *refused = q->nresp.refused;
		q->nresp = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
		q->nresp.response = &q->resp;
		q->nresp.refused = rc == SHOAL_E_WRONG_GROUP ? refused : NULL;
		if (wire_response_set_error(a, &q->resp, rc, c->errmsg, NULL, NULL) != SHOAL_OK) {
			q->resp.status = wire_status_from_code(rc);
			q->resp.message = (char *)"out of memory";
		}
		if (rc == SHOAL_E_NOT_LEADER)
			q->nresp.leader_node = leader;
		/* Our own failures are worth a line; the client's are not. */
		bool ours = rc == SHOAL_E_INTERNAL || rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO ||
		            rc == SHOAL_E_FULL || rc == SHOAL_E_TIMEOUT;
		node_logf(ours ? NODE_LOG_WARN : NODE_LOG_DEBUG, "%s on group %u: %s: %s",
		          ops[q->op].name, req != NULL ? req->group : 0, shoal_err_name(rc),
		          c->errmsg);
	}
	int status = nresp->response != NULL ? (int)nresp->response->status : SHOAL_OK;
	node_stats_record(&x->s->node->stats, q->op, status, node_now_ns() - q->t0);

	size_t size = shoal__node_response__get_packed_size(nresp);
	nng_msg *m = NULL;
	bool single = q == &x->one;
	if (single) {
		if (nng_msg_alloc(&m, size) == 0)
			shoal__node_response__pack(nresp, nng_msg_body(m));
		else
			m = NULL;
	} else {
		q->out = sh_arena_alloc(a, size);
		q->out_len = q->out != NULL ? shoal__node_response__pack(nresp, q->out) : 0;
	}
	sh_free(raw);
	node_group_release(c->group);
	c->group = NULL;
	if (req != NULL)
		shoal__node_request__free_unpacked(req, &q->alloc);
	q->req = NULL;
	if (single)
		send_reply(x, m);
	else
		member_done(x);
}

/* Readies q for a new request. */
static void nreq_reset(nreq *q)
{
	sh_arena *a = &q->arena;
	sh_arena_reset(a);
	q->req = NULL;
	q->op = NODE_OP_INVALID;
	q->out = NULL;
	q->out_len = 0;
	q->nresp = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	q->resp = (Shoal__Response)SHOAL__RESPONSE__INIT;
	q->nresp.response = &q->resp;
	q->c = (node_call){.node = q->x->s->node, .arena = a, .nresp = &q->nresp, .resp = &q->resp};
	wire_arena_allocator(&q->alloc, a);
}

/* Decodes and dispatches one request (body, len): answers it at once or
 * leaves it waiting for the loop.  nng callback thread. */
static void start_request(nreq *q, const uint8_t *body, size_t len)
{
	uint32_t leader = 0;
	bool pending = false;
	int rc;

	nreq_reset(q);
	rc = wire_unpack_node_request(&q->alloc, body, len, &q->req, q->c.errmsg);
	if (rc == SHOAL_OK) {
		q->c.req = q->req;
		if (q->req->request != NULL)
			q->resp.request_id = q->req->request->request_id;
		rc = classify(q->req, &q->op, q->c.errmsg);
	}
	if (rc == SHOAL_OK)
		rc = admit_peer(q, &ops[q->op]);
	if (rc == SHOAL_OK) {
		rc = dispatch(q, q->op, len, &leader, &pending);
		if (pending)
			return; /* waiter_done answers */
	}
	complete(q, rc, leader, NULL, 0);
}

/* The loop completed a request's waiter.  Loop thread. */
static void waiter_done(node_waiter *wt)
{
	nreq *q = wt->data;
	int rc = wt->code;
	if (rc != SHOAL_OK) {
		snprintf(q->c.errmsg, sizeof(q->c.errmsg), "%s", wt->msg);
		complete(q, rc, wt->leader, NULL, 0);
		return;
	}
	if (wt->kind == NODE_WAIT_WRITE) {
		uint8_t *raw = wt->resp;
		wt->resp = NULL;
		if (q->op == NODE_OP_INDEX_SHIP)
			node_ship_count_applied(q->x->s->node->ship, q->req->group,
			                        q->req->index_ship->n_deltas);
		complete(q, SHOAL_OK, 0, raw, wt->resp_len);
		return;
	}
	if (wt->kind == NODE_WAIT_MEMBER) {
		complete(q, SHOAL_OK, 0, NULL, 0);
		return;
	}
	/* The barrier passed: the consistent read runs now. */
	rc = ops[q->op].handle(&q->c);
	complete(q, rc, 0, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */
/* ------------------------------------------------------------------------ */

/* Sets up a request record (the context's own, or a pooled member). */
static int nreq_init(nreq *q, rctx *x)
{
	q->x = x;
	sh_arena_init(&q->arena);
	if (node_waiter_init(&q->waiter) != SHOAL_OK)
		return SHOAL_E_NOMEM;
	q->waiter_init = true;
	q->waiter.cb = waiter_done;
	q->waiter.data = q;
	return SHOAL_OK;
}

static void nreq_fini(nreq *q)
{
	if (q->req != NULL)
		shoal__node_request__free_unpacked(q->req, &q->alloc);
	q->req = NULL;
	if (q->waiter_init)
		node_waiter_fini(&q->waiter);
	q->waiter_init = false;
	sh_arena_fini(&q->arena);
}

/* Publishes the pool's size to the metrics (mu held). */
static void pool_gauges(node_server *s)
{
	node_stats *st = &s->node->stats;
	atomic_store_explicit(&st->pool_members, s->n_free, memory_order_relaxed);
	atomic_store_explicit(&st->pool_bytes, s->free_bytes, memory_order_relaxed);
}

/* A member from the pool (or a new one), for x; NULL when out of memory. */
static nreq *member_get(node_server *s, rctx *x)
{
	pthread_mutex_lock(&s->mu);
	nreq *q = s->free_members;
	if (q != NULL) {
		s->free_members = q->next;
		s->n_free--;
		s->free_bytes -= q->pool_held;
		pool_gauges(s);
	}
	pthread_mutex_unlock(&s->mu);
	if (q == NULL) {
		q = sh_calloc(1, sizeof(*q));
		if (q == NULL)
			return NULL;
		if (nreq_init(q, x) != SHOAL_OK) {
			nreq_fini(q);
			sh_free(q);
			return NULL;
		}
	}
	q->x = x;
	return q;
}

/* Returns x's members to the pool, up to what it keeps; the others are
 * freed (a member whose arena grew large gives that memory back first). */
static void members_put(rctx *x)
{
	node_server *s = x->s;
	size_t released = 0;
	for (uint32_t i = 0; i < x->n_members; i++) {
		nreq *q = x->members[i];
		if (q->arena.used > NODE_BATCH_ARENA_KEEP) {
			sh_arena_fini(&q->arena);
			sh_arena_init(&q->arena);
		} else {
			sh_arena_reset(&q->arena);
		}
		size_t held = sh_arena_held(&q->arena);
		pthread_mutex_lock(&s->mu);
		if (s->n_free < NODE_BATCH_POOL_KEEP) {
			if (s->free_bytes + held > NODE_BATCH_POOL_BYTES) {
				sh_arena_fini(&q->arena); /* rare: many large arenas */
				held = 0;
			}
			q->pool_held = held;
			q->next = s->free_members;
			s->free_members = q;
			s->n_free++;
			s->free_bytes += held;
			pool_gauges(s);
			q = NULL;
		}
		pthread_mutex_unlock(&s->mu);
		if (q != NULL) {
			nreq_fini(q);
			sh_free(q);
			released += sizeof(*q) + held;
		}
	}
	if (released > 0)
		sh_arena_released(released);
	sh_free(x->members);
	x->members = NULL;
	x->n_members = 0;
}

/* Every member of x's batch answered: one NodeResponse with their packed
 * answers in order (its `batch` field: wire_batch_answer), sent on x.  A
 * member whose answer could not be built (out of memory) answers with an
 * empty NodeResponse, which the router treats as a bad answer for that
 * request alone. */
static void send_batch(rctx *x)
{
	uint32_t n = x->n_members;
	const uint8_t **data = sh_calloc(n + 1, sizeof(*data));
	size_t *len = sh_calloc(n + 1, sizeof(*len));
	nng_msg *m = NULL;
	if (data != NULL && len != NULL) {
		for (uint32_t i = 0; i < n; i++) {
			data[i] = x->members[i]->out;
			len[i] = x->members[i]->out_len;
		}
		m = wire_batch_answer(x->s->f_resp_batch, data, len, n);
	}
	sh_free(data);
	sh_free(len);
	members_put(x);
	send_reply(x, m);
}

static void member_done(rctx *x)
{
	if (atomic_fetch_sub(&x->pending, 1) == 1)
		send_batch(x);
}

/* Starts every member of the batch in x->msg; the last to finish sends the
 * answer (member_done).  nng callback thread. */
static void start_batch(rctx *x, uint32_t n)
{
	node_server *s = x->s;
	x->members = sh_calloc(n, sizeof(*x->members));
	uint32_t got = 0;
	if (x->members != NULL)
		for (; got < n; got++)
			if ((x->members[got] = member_get(s, x)) == NULL)
				break;
	if (got < n) {
		node_logf(NODE_LOG_ERROR, "server: out of memory starting a batch of %u", n);
		x->n_members = got;
		members_put(x);
		send_reply(x, NULL);
		return;
	}
	x->n_members = n;
	atomic_store(&x->pending, n + 1);
	const uint8_t *p = nng_msg_body(x->msg), *end = p + nng_msg_len(x->msg), *data;
	size_t len;
	uint64_t t0 = node_now_ns();
	node_wake_hold(); /* the loop sees the batch's writes together */
	for (uint32_t i = 0; i < n && wire_batch_next(&p, end, s->f_req_batch, &data, &len); i++) {
		nreq *q = x->members[i];
		q->t0 = t0;
		start_request(q, data, len);
	}
	node_wake_release();
	member_done(x); /* the starting itself */
}

/* Counts the server's connections (stats.server_conns): nng calls REM_POST
 * for exactly the pipes it called ADD_PRE for (nng 1.5.2 pipe.c). */
static void conn_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	node_server *s = arg;
	(void)p;
	if (ev == NNG_PIPE_EV_ADD_PRE)
		atomic_fetch_add_explicit(&s->node->stats.server_conns, 1, memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&s->node->stats.server_conns, 1, memory_order_relaxed);
}

/* The aio callback: one context's state machine.  nng callback thread. */
static void rctx_cb(void *arg)
{
	rctx *x = arg;
	node_server *s = x->s;
	int rv = nng_aio_result(x->aio);

	switch (x->state) {
	case RCTX_RECV: {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			x->state = RCTX_DONE;
			return;
		}
		if (rv != 0) {
			node_logf(NODE_LOG_WARN, "server: receive: %s", nng_strerror(rv));
			nng_ctx_recv(x->ctx, x->aio);
			return;
		}
		x->msg = nng_aio_get_msg(x->aio);
		x->pipe = nng_msg_get_pipe(x->msg);
		nng_aio_set_msg(x->aio, NULL);
		pthread_mutex_lock(&s->mu);
		s->busy++;
		atomic_store_explicit(&s->node->stats.server_busy, s->busy, memory_order_relaxed);
		/* Every context holds a request: REP reads nothing more from any
		 * connection until one is answered.  Said once a minute at most
		 * (a node under a burst may be here often and briefly). */
		bool full = s->busy == s->n_ctxs;
		int64_t now = full ? node_wall_ms() : 0;
		if (full && now - s->full_logged_ms >= 60000)
			s->full_logged_ms = now;
		else
			full = false;
		pthread_mutex_unlock(&s->mu);
		if (full)
			node_logf(NODE_LOG_WARN,
			          "server: all %u contexts hold a request not yet answered: no "
			          "more requests are read until one is (shoal_node_server_busy)",
			          s->n_ctxs);
		x->state = RCTX_WAIT; /* before the loop can complete anything */
		const uint8_t *body = nng_msg_body(x->msg);
		size_t len = nng_msg_len(x->msg);
		uint32_t n = 0;
		char msg[SH_ERRMSG_SIZE];
		x->one.t0 = node_now_ns();
		int rc = wire_batch_members(body, len, s->f_req_batch, NODE_BATCH_MAX_MEMBERS,
		                            "a NodeRequest batch", &n, msg);
		if (rc != SHOAL_OK) {
			nreq_reset(&x->one);
			snprintf(x->one.c.errmsg, sizeof(x->one.c.errmsg), "%s", msg);
			complete(&x->one, rc, 0, NULL, 0);
		} else if (n > 0) {
			start_batch(x, n);
		} else {
			start_request(&x->one, body, len);
		}
		return;
	}
	case RCTX_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			if (rv == NNG_ETIMEDOUT) {
				node_logf(NODE_LOG_WARN,
				          "server: a reply could not be sent in %d ms: closing its "
				          "connection (pipe %d), whose peer connects again",
				          NODE_REPLY_SEND_MS, nng_pipe_id(x->pipe));
				nng_pipe_close(x->pipe);
			} else if (rv != NNG_ECLOSED) {
				node_logf(NODE_LOG_WARN, "server: send: %s", nng_strerror(rv));
			}
			if (m != NULL)
				nng_msg_free(m);
		}
		rearm(x);
		return;
	case RCTX_WAIT:
	case RCTX_DONE:
		return; /* not reached: no aio operation pending in these */
	}
}

static void server_free(node_server *s)
{
	sh_listen_guard_close(s->listener); /* (its thread uses the socket) */
	s->listener = NULL;
	if (s->sock_open) {
		nng_close(s->sock);
		s->sock_open = false;
	}
	for (unsigned i = 0; i < s->n_ctxs; i++) {
		rctx *x = &s->ctxs[i];
		if (x->aio != NULL)
			nng_aio_stop(x->aio);
	}
	for (unsigned i = 0; i < s->n_ctxs; i++) {
		rctx *x = &s->ctxs[i];
		if (x->aio != NULL)
			nng_aio_free(x->aio);
		if (x->msg != NULL)
			nng_msg_free(x->msg);
		nreq_fini(&x->one);
		for (uint32_t m = 0; x->members != NULL && m < x->n_members; m++) {
			nreq_fini(x->members[m]);
			sh_free(x->members[m]);
		}
		sh_free(x->members);
	}
	for (nreq *q = s->free_members, *next; q != NULL; q = next) {
		next = q->next;
		nreq_fini(q);
		sh_free(q);
	}
	sh_free(s->ctxs);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
}

static void guard_log(const char *msg)
{
	node_logf(NODE_LOG_WARN, "server: %s", msg);
}

static void keeper_log(const char *msg)
{
	node_logf(NODE_LOG_WARN, "connections: %s", msg);
}

int node_server_start(node *n, const char *url, unsigned contexts, node_server **out, char *errmsg)
{
	int rc = SHOAL_OK, rv;
	*out = NULL;
	if (contexts == 0)
		contexts = NODE_DEFAULT_WORKERS;
	node_server *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
	s->node = n;
	s->f_req_batch = wire_field_number(&shoal__node_request__descriptor, "batch");
	s->f_resp_batch = wire_field_number(&shoal__node_response__descriptor, "batch");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	s->ctxs = sh_calloc(contexts, sizeof(*s->ctxs));
	if (s->ctxs == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
		goto err;
	}
	s->n_ctxs = contexts;

	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "server: nng_rep0_open: %s",
		             nng_strerror(rv));
		goto err;
	}
	s->sock_open = true;
	nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, NODE_RECV_MAX);
	atomic_store(&n->stats.server_contexts, contexts);
	if ((rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, conn_cb, s)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, conn_cb, s)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "server: nng_pipe_notify: %s",
		             nng_strerror(rv));
		goto err;
	}
	for (unsigned i = 0; i < contexts; i++) {
		rctx *x = &s->ctxs[i];
		x->s = s;
		if (nreq_init(&x->one, x) != SHOAL_OK) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
			goto err;
		}
		if ((rv = nng_aio_alloc(&x->aio, rctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: %s", nng_strerror(rv));
			goto err;
		}
	}
	/* With the cluster's TLS, only members (a certificate of the cluster
	 * CA) get a connection: every operation here is internal. */
	char lurl[SH_ADDR_MAX + 8];
	if (!sh_tls_url(n->tls != NULL, url, lurl, sizeof(lurl))) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "server: URL too long: %s", url);
		goto err;
	}
	url = lurl;
	sh_dial_keeper_log(keeper_log);
	if ((rc = sh_listen_guard_start(
	         &s->listener, s->sock, url, n->tls != NULL ? n->tls->server : NULL,
	         n->tls != NULL ? n->tls->probe : NULL, guard_log, errmsg)) != SHOAL_OK)
		goto err;
	for (unsigned i = 0; i < contexts; i++) {
		rctx *x = &s->ctxs[i];
		x->state = RCTX_RECV;
		nng_ctx_recv(x->ctx, x->aio);
	}
	node_logf(NODE_LOG_INFO, "server: listening on %s with %u contexts", url, contexts);
	*out = s;
	return SHOAL_OK;
err:
	server_free(s);
	return rc;
}

void node_server_stop(node_server *s)
{
	if (s == NULL)
		return;
	/* Requests being handled end quickly once the groups are closed;
	 * give them a bounded time to send their answers. */
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&s->mu);
	while (s->busy > 0) {
		if (pthread_cond_timedwait(&s->idle, &s->mu, &deadline) == ETIMEDOUT) {
			node_logf(NODE_LOG_WARN, "server: %u requests still in flight at close",
			          s->busy);
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	server_free(s);
}
