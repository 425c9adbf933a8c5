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
 *
 * An eventually consistent read is served from LMDB inside the receive
 * callback (microseconds); a write's answer is sent by the loop thread
 * right after its Command applied (nng_ctx_send with an aio is thread-safe),
 * a consistent read's after its barrier, without waking any other thread.
 *
 * One front door (start_request) does, for every request and in order:
 *   1. decode: wire_check_framing + shoal__node_request__unpack into the
 *      context's arena (freed in complete()), exactly one operation;
 *   2. look the operation up in the one dispatch table `ops` below;
 *   3. ownership: the group must be hosted here (else SHOAL_E_UNAVAILABLE),
 *      healthy (node_group_health: FSM not failed, node not stopping);
 *   4. leadership for writes and consistent reads (NOT_LEADER with the
 *      believed leader in NodeResponse.leader_node); then backpressure:
 *      base writes (OP_BASE_WRITE) are refused with THROUGHPUT while the
 *      group's unshipped index deltas exceed --outbox-limit (ship.c
 *      publishes the backlog), so GSI lag stays bounded;
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
#include "node/node.h"
#include "proto/wire.h"

/* Dispatch flags. */
enum {
	OP_READ = 1 << 0,       /* leader + barrier unless any_replica */
	OP_WRITE = 1 << 1,      /* leader, through Raft */
	OP_LOCAL = 1 << 2,      /* any replica, no leadership */
	OP_GROUP0 = 1 << 3,     /* the metadata group only */
	OP_ANY_HEALTH = 1 << 4, /* served even by a failed replica */
	OP_BASE_WRITE = 1 << 5, /* writes base items: refused while the outbox is full */
};

typedef int (*prepare_fn)(node_call *c, Shoal__CommandOp *op);

typedef struct op_def {
	const char *name;
	unsigned flags;
	int (*handle)(node_call *c); /* READ, LOCAL */
	prepare_fn prepare;          /* WRITE */
} op_def;

static int prepare_put(node_call *c, Shoal__CommandOp *op);
static int prepare_update(node_call *c, Shoal__CommandOp *op);
static int prepare_delete(node_call *c, Shoal__CommandOp *op);
static int prepare_batch_write(node_call *c, Shoal__CommandOp *op);
static int prepare_define_table(node_call *c, Shoal__CommandOp *op);
static int prepare_drop_table(node_call *c, Shoal__CommandOp *op);
static int prepare_update_table(node_call *c, Shoal__CommandOp *op);
static int prepare_activate_index(node_call *c, Shoal__CommandOp *op);
static int prepare_index_ship(node_call *c, Shoal__CommandOp *op);

static const op_def ops[NODE_OP__COUNT] = {
    [NODE_OP_GET_ITEM] = {"get_item", OP_READ, node_handle_get_item, NULL},
    [NODE_OP_PUT_ITEM] = {"put_item", OP_WRITE | OP_BASE_WRITE, NULL, prepare_put},
    [NODE_OP_UPDATE_ITEM] = {"update_item", OP_WRITE | OP_BASE_WRITE, NULL, prepare_update},
    [NODE_OP_DELETE_ITEM] = {"delete_item", OP_WRITE | OP_BASE_WRITE, NULL, prepare_delete},
    [NODE_OP_QUERY] = {"query", OP_READ, node_handle_query, NULL},
    [NODE_OP_SCAN] = {"scan", OP_READ, node_handle_scan, NULL},
    [NODE_OP_BATCH_GET_ITEM] = {"batch_get_item", OP_READ, node_handle_batch_get_item, NULL},
    [NODE_OP_BATCH_WRITE_ITEM] = {"batch_write_item", OP_WRITE | OP_BASE_WRITE, NULL,
                                  prepare_batch_write},
    [NODE_OP_DESCRIBE_TABLE] = {"describe_table", OP_READ, node_handle_describe_table, NULL},
    [NODE_OP_LIST_TABLES] = {"list_tables", OP_READ, node_handle_list_tables, NULL},
    [NODE_OP_DEFINE_TABLE] = {"define_table", OP_WRITE, NULL, prepare_define_table},
    [NODE_OP_DROP_TABLE] = {"drop_table", OP_WRITE, NULL, prepare_drop_table},
    [NODE_OP_GROUP_STATUS] = {"group_status", OP_LOCAL | OP_ANY_HEALTH, node_handle_group_status,
                              NULL},
    [NODE_OP_LIST_CATALOG] = {"list_catalog", OP_READ | OP_GROUP0, node_handle_list_catalog, NULL},
    [NODE_OP_UPDATE_TABLE] = {"update_table", OP_WRITE | OP_GROUP0, NULL, prepare_update_table},
    [NODE_OP_ACTIVATE_INDEX] = {"activate_index", OP_WRITE | OP_GROUP0, NULL,
                                prepare_activate_index},
    [NODE_OP_INDEX_SHIP] = {"index_ship", OP_WRITE, NULL, prepare_index_ship},
    [NODE_OP_INVALID] = {"invalid", 0, NULL, NULL},
};

const char *node_op_name(int op)
{
	if (op < 0 || op >= NODE_OP__COUNT)
		return "invalid";
	return ops[op].name;
}

typedef enum rctx_state {
	RCTX_RECV, /* a receive is pending */
	RCTX_WAIT, /* the request waits for the loop (waiter) */
	RCTX_SEND, /* the reply is being sent */
	RCTX_DONE, /* the socket closed: idle for good */
} rctx_state;

/* One REP context and the request it is handling. */
typedef struct rctx {
	node_server *s;
	nng_ctx ctx;
	nng_aio *aio;
	rctx_state state;
	node_waiter waiter;
	bool waiter_init;
	sh_arena arena;

	/* The request in hand (RECV -> SEND). */
	nng_msg *msg; /* the request message */
	ProtobufCAllocator alloc;
	Shoal__NodeRequest *req;
	Shoal__NodeResponse nresp;
	Shoal__Response resp;
	node_call c;
	int op;
	uint64_t t0;
	int status; /* the answer's status, for the statistics */
} rctx;

struct node_server {
	node *node;
	nng_socket sock;
	bool sock_open;
	rctx *ctxs;
	unsigned n_ctxs;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	unsigned busy; /* requests received and not yet answered */
};

/* ------------------------------------------------------------------------ */
/* Writes: prepare the Command operation                                     */
/* ------------------------------------------------------------------------ */

/* Each runs the conversion the FSM will run at apply time, so that a request
 * it would refuse is refused now, without a trip through the Raft log; the
 * result of the conversion is thrown away (the FSM converts again from the
 * protobuf in the entry). */

static int prepare_put(node_call *c, Shoal__CommandOp *op)
{
	st_put_req r;
	int rc = wire_put_req_from_pb(c->arena, c->req->request->put_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_PUT;
	op->put = c->req->request->put_item;
	return SHOAL_OK;
}

static int prepare_update(node_call *c, Shoal__CommandOp *op)
{
	st_update_req r;
	int rc = wire_update_req_from_pb(c->arena, c->req->request->update_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_UPDATE;
	op->update = c->req->request->update_item;
	return SHOAL_OK;
}

static int prepare_delete(node_call *c, Shoal__CommandOp *op)
{
	st_delete_req r;
	int rc = wire_delete_req_from_pb(c->arena, c->req->request->delete_item, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_DELETE;
	op->delete_ = c->req->request->delete_item;
	return SHOAL_OK;
}

static int prepare_batch_write(node_call *c, Shoal__CommandOp *op)
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
	const Shoal__TableUpdate *u = c->req->update_table;
	if (u->update == NULL)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "update_table without an UpdateTable");
	st_table_update_req r;
	int rc = wire_update_table_from_pb(c->arena, u->update, &r, c->errmsg);
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
	if (ia->source_group >= c->node->conf->groups)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "index_ship from group %u: the cluster has %u groups",
		               ia->source_group, c->node->conf->groups);
	if (ia->n_deltas == 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "index_ship without deltas");
	st_delta *d = sh_arena_calloc(c->arena, ia->n_deltas, sizeof(*d));
	if (d == NULL)
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	int rc = node_index_deltas_from_pb(ia, d, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_INDEX_APPLY;
	op->index_apply = c->req->index_ship;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* The front door                                                            */
/* ------------------------------------------------------------------------ */

/* Which operation a decoded request is; SHOAL_OK or why it is not one. */
static int classify(const Shoal__NodeRequest *req, int *op, char *errmsg)
{
	int set = (req->request != NULL) + (req->define_table != NULL) + (req->drop_table != NULL) +
	          (req->group_status != 0) + (req->list_catalog != 0) +
	          (req->update_table != NULL) + (req->activate_index != NULL) +
	          (req->index_ship != NULL);
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
		*op = NODE_OP_UPDATE_TABLE;
	} else if (req->activate_index != NULL) {
		*op = NODE_OP_ACTIVATE_INDEX;
	} else if (req->index_ship != NULL) {
		*op = NODE_OP_INDEX_SHIP;
	} else {
		switch (req->request->op_case) {
		case SHOAL__REQUEST__OP_GET_ITEM:
			*op = NODE_OP_GET_ITEM;
			break;
		case SHOAL__REQUEST__OP_PUT_ITEM:
			*op = NODE_OP_PUT_ITEM;
			break;
		case SHOAL__REQUEST__OP_UPDATE_ITEM:
			*op = NODE_OP_UPDATE_ITEM;
			break;
		case SHOAL__REQUEST__OP_DELETE_ITEM:
			*op = NODE_OP_DELETE_ITEM;
			break;
		case SHOAL__REQUEST__OP_QUERY:
			*op = NODE_OP_QUERY;
			break;
		case SHOAL__REQUEST__OP_SCAN:
			*op = NODE_OP_SCAN;
			break;
		case SHOAL__REQUEST__OP_BATCH_GET_ITEM:
			*op = NODE_OP_BATCH_GET_ITEM;
			break;
		case SHOAL__REQUEST__OP_BATCH_WRITE_ITEM:
			*op = NODE_OP_BATCH_WRITE_ITEM;
			break;
		case SHOAL__REQUEST__OP_DESCRIBE_TABLE:
			*op = NODE_OP_DESCRIBE_TABLE;
			break;
		case SHOAL__REQUEST__OP_LIST_TABLES:
			*op = NODE_OP_LIST_TABLES;
			break;
		case SHOAL__REQUEST__OP__NOT_SET:
			return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
			               "the request carries no operation");
		default: {
			const char *name = wire_op_name(req->request->op_case);
			return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
			               "%s is not an operation of a storage node",
			               name[0] != '\0' ? name : "this operation");
		}
		}
	}
	return SHOAL_OK;
}

static void waiter_done(node_waiter *wt);

/* The write path: queue the operation on the group; its packed NodeResponse
 * arrives in waiter_done.  SHOAL_OK means pending. */
static int do_write(rctx *x, const op_def *d, size_t request_size)
{
	node_call *c = &x->c;
	node_waiter *wt = &x->waiter;
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
static int do_barrier(rctx *x)
{
	node_waiter *wt = &x->waiter;
	wt->kind = NODE_WAIT_BARRIER;
	return node_group_submit(x->c.group, wt, x->c.errmsg);
}

/* Checks ownership, health and leadership, then runs the operation or
 * hands it to the loop (*pending). */
static int dispatch(rctx *x, int op, size_t request_size, uint32_t *leader, bool *pending)
{
	node_call *c = &x->c;
	const op_def *d = &ops[op];
	node *n = c->node;
	const Shoal__NodeRequest *req = c->req;

	c->group = node_group_get(n, req->group);
	if (c->group == NULL) {
		if (req->group >= n->conf->groups)
			return sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
			               "group %u does not exist (the cluster has %u groups)",
			               req->group, n->conf->groups);
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
	if ((d->flags & OP_BASE_WRITE) && node_ship_backlog(n->ship, req->group) > n->outbox_limit)
		return sh_errf(c->errmsg, SHOAL_E_THROUGHPUT,
		               "Throughput exceeds the current capacity of your table or index: "
		               "global secondary index propagation of group %u is behind (%" PRIu64
		               " index updates waiting, limit %" PRIu64 ")",
		               req->group, node_ship_backlog(n->ship, req->group), n->outbox_limit);
	if ((d->flags & OP_WRITE) || consistent_read) {
		int rc = (d->flags & OP_WRITE) ? do_write(x, d, request_size) : do_barrier(x);
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
	Shoal__NodeResponse *r = shoal__node_response__unpack(&alloc, len, raw);
	if (r == NULL)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "the state machine's result is malformed");
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

/* The request is answered (or dropped): count it and receive the next one
 * (SEND -> RECV). */
static void rearm(rctx *x)
{
	node_server *s = x->s;
	nng_aio_set_msg(x->aio, NULL);
	node_stats_record(&s->node->stats, x->op, x->status, node_now_ns() - x->t0);
	pthread_mutex_lock(&s->mu);
	if (--s->busy == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
	x->state = RCTX_RECV;
	nng_ctx_recv(x->ctx, x->aio);
}

/* Answers the request in hand with rc (and, for a write, its packed result
 * raw), frees the request and sends the reply: RECV/WAIT -> SEND.  nng
 * callback or loop thread. */
static void complete(rctx *x, int rc, uint32_t leader, uint8_t *raw, size_t raw_len)
{
	sh_arena *a = &x->arena;
	node_call *c = &x->c;
	Shoal__NodeResponse *nresp = &x->nresp;
	Shoal__NodeRequest *req = x->req;

	if (rc == SHOAL_OK && raw != NULL) {
		rc = relabel(a, raw, raw_len, x->resp.request_id, &nresp, c->errmsg);
		if (rc != SHOAL_OK)
			nresp = &x->nresp;
	}
	if (rc != SHOAL_OK) {
		/* A failed request answers with the status alone. */
		x->nresp = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
		x->nresp.response = &x->resp;
		if (wire_response_set_error(a, &x->resp, rc, c->errmsg, NULL, NULL) != SHOAL_OK) {
			x->resp.status = wire_status_from_code(rc);
			x->resp.message = (char *)"out of memory";
		}
		if (rc == SHOAL_E_NOT_LEADER)
			x->nresp.leader_node = leader;
		/* Our own failures are worth a line; the client's are not. */
		bool ours = rc == SHOAL_E_INTERNAL || rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO ||
		            rc == SHOAL_E_FULL || rc == SHOAL_E_TIMEOUT;
		node_logf(ours ? NODE_LOG_WARN : NODE_LOG_DEBUG, "%s on group %u: %s: %s",
		          ops[x->op].name, req != NULL ? req->group : 0, shoal_err_name(rc),
		          c->errmsg);
	}
	x->status = nresp->response != NULL ? (int)nresp->response->status : SHOAL_OK;

	nng_msg *m = NULL;
	size_t size = shoal__node_response__get_packed_size(nresp);
	if (nng_msg_alloc(&m, size) == 0)
		shoal__node_response__pack(nresp, nng_msg_body(m));
	else
		m = NULL;
	sh_free(raw);
	if (req != NULL)
		shoal__node_request__free_unpacked(req, &x->alloc);
	x->req = NULL;
	nng_msg_free(x->msg);
	x->msg = NULL;

	x->state = RCTX_SEND;
	if (m == NULL) {
		/* No reply: REP drops the request; the router times out. */
		node_logf(NODE_LOG_ERROR, "server: out of memory building a reply");
		rearm(x);
		return;
	}
	nng_aio_set_msg(x->aio, m);
	nng_ctx_send(x->ctx, x->aio);
}

/* Decodes and dispatches the received request: answers it at once or
 * leaves it waiting for the loop (RECV -> SEND | WAIT).  nng callback. */
static void start_request(rctx *x)
{
	node *n = x->s->node;
	sh_arena *a = &x->arena;
	const uint8_t *body = nng_msg_body(x->msg);
	size_t len = nng_msg_len(x->msg);
	uint32_t leader = 0;
	bool pending = false;
	int rc;

	sh_arena_reset(a);
	x->req = NULL;
	x->op = NODE_OP_INVALID;
	x->nresp = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	x->resp = (Shoal__Response)SHOAL__RESPONSE__INIT;
	x->nresp.response = &x->resp;
	x->c = (node_call){.node = n, .arena = a, .nresp = &x->nresp, .resp = &x->resp};
	wire_arena_allocator(&x->alloc, a);

	rc = wire_check_framing(&shoal__node_request__descriptor, body, len, x->c.errmsg);
	if (rc == SHOAL_OK) {
		x->req = shoal__node_request__unpack(&x->alloc, len, body);
		if (x->req == NULL)
			rc = sh_errf(x->c.errmsg, SHOAL_E_SERIALIZATION, "malformed NodeRequest");
	}
	if (rc == SHOAL_OK) {
		x->c.req = x->req;
		if (x->req->request != NULL)
			x->resp.request_id = x->req->request->request_id;
		rc = classify(x->req, &x->op, x->c.errmsg);
	}
	if (rc == SHOAL_OK) {
		x->state = RCTX_WAIT; /* before the loop can complete it */
		rc = dispatch(x, x->op, len, &leader, &pending);
		if (pending)
			return; /* waiter_done answers */
	}
	complete(x, rc, leader, NULL, 0);
}

/* The loop completed the request's waiter (WAIT -> SEND).  Loop thread. */
static void waiter_done(node_waiter *wt)
{
	rctx *x = wt->data;
	int rc = wt->code;
	if (rc != SHOAL_OK) {
		snprintf(x->c.errmsg, sizeof(x->c.errmsg), "%s", wt->msg);
		complete(x, rc, wt->leader, NULL, 0);
		return;
	}
	if (wt->kind == NODE_WAIT_WRITE) {
		uint8_t *raw = wt->resp;
		wt->resp = NULL;
		if (x->op == NODE_OP_INDEX_SHIP)
			node_ship_count_applied(x->s->node->ship, x->req->group,
			                        x->req->index_ship->n_deltas);
		complete(x, SHOAL_OK, 0, raw, wt->resp_len);
		return;
	}
	/* The barrier passed: the consistent read runs now. */
	rc = ops[x->op].handle(&x->c);
	complete(x, rc, 0, NULL, 0);
}

/* The aio callback: one context's state machine.  nng callback thread. */
static void rctx_cb(void *arg)
{
	rctx *x = arg;
	node_server *s = x->s;
	int rv = nng_aio_result(x->aio);

	switch (x->state) {
	case RCTX_RECV:
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
		nng_aio_set_msg(x->aio, NULL);
		pthread_mutex_lock(&s->mu);
		s->busy++;
		pthread_mutex_unlock(&s->mu);
		x->t0 = node_now_ns();
		start_request(x);
		return;
	case RCTX_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			if (m != NULL)
				nng_msg_free(m);
			if (rv != NNG_ECLOSED)
				node_logf(NODE_LOG_WARN, "server: send: %s", nng_strerror(rv));
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
		if (x->req != NULL)
			shoal__node_request__free_unpacked(x->req, &x->alloc);
		if (x->waiter_init)
			node_waiter_fini(&x->waiter);
		sh_arena_fini(&x->arena);
	}
	sh_free(s->ctxs);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
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
	for (unsigned i = 0; i < contexts; i++) {
		rctx *x = &s->ctxs[i];
		x->s = s;
		sh_arena_init(&x->arena);
		if (node_waiter_init(&x->waiter) != SHOAL_OK) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
			goto err;
		}
		x->waiter_init = true;
		x->waiter.cb = waiter_done;
		x->waiter.data = x;
		if ((rv = nng_aio_alloc(&x->aio, rctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: %s", nng_strerror(rv));
			goto err;
		}
	}
	if ((rv = nng_listen(s->sock, url, NULL, 0)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "server: listen on %s: %s", url, nng_strerror(rv));
		goto err;
	}
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
