/*
 * server.c -- shoal-node's request server: nng REP on the node's rpc URL.
 *
 * W worker threads each own an nng context and loop: blocking receive ->
 * handle -> blocking send (simple, and enough for now: a fully asynchronous
 * server with an aio state machine per context would save the thread per
 * in-flight request; workers spend most of their time blocked on Raft
 * anyway, and that blocking is what feeds group commit).
 *
 * One front door (handle_request) does, for every request and in order:
 *   1. decode: wire_check_framing + shoal__node_request__unpack into the
 *      worker's arena (freed in the same function), exactly one operation;
 *   2. look the operation up in the one dispatch table `ops` below;
 *   3. ownership: the group must be hosted here (else SHOAL_E_UNAVAILABLE),
 *      healthy (node_group_health: FSM not failed, node not stopping);
 *   4. leadership for writes and consistent reads (NOT_LEADER with the
 *      believed leader in NodeResponse.leader_node);
 *   5. dispatch by flags:
 *        WRITE  the worker prepares a CommandOp pointing into the decoded
 *               request (after the same validation the FSM will do, so that
 *               junk never reaches the log), queues it on the group
 *               (node_group_submit) and waits; the loop group-commits it
 *               and hands back the op's packed NodeResponse from the FSM;
 *        READ   any_replica: the handler reads LMDB right here (storage
 *               reads are thread-safe); otherwise the worker first waits
 *               for a Raft barrier on the leader (consistent read);
 *        LOCAL  the handler runs here on any replica (group_status).
 * Handlers (handlers.c) never repeat these checks.
 *
 * Shutdown: node_server_stop runs once the groups are closed, so every
 * waiting request has been answered (SHOAL_E_UNAVAILABLE) and new ones are
 * refused by step 3; it waits for in-flight handling to finish, closes the
 * socket (which ends every pending receive) and joins the workers.
 *
 * Threads: node_server_start/stop on the main thread; everything else on
 * the workers.
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

static const op_def ops[NODE_OP__COUNT] = {
    [NODE_OP_GET_ITEM] = {"get_item", OP_READ, node_handle_get_item, NULL},
    [NODE_OP_PUT_ITEM] = {"put_item", OP_WRITE, NULL, prepare_put},
    [NODE_OP_UPDATE_ITEM] = {"update_item", OP_WRITE, NULL, prepare_update},
    [NODE_OP_DELETE_ITEM] = {"delete_item", OP_WRITE, NULL, prepare_delete},
    [NODE_OP_QUERY] = {"query", OP_READ, node_handle_query, NULL},
    [NODE_OP_SCAN] = {"scan", OP_READ, node_handle_scan, NULL},
    [NODE_OP_BATCH_GET_ITEM] = {"batch_get_item", OP_READ, node_handle_batch_get_item, NULL},
    [NODE_OP_BATCH_WRITE_ITEM] = {"batch_write_item", OP_WRITE, NULL, prepare_batch_write},
    [NODE_OP_DESCRIBE_TABLE] = {"describe_table", OP_READ, node_handle_describe_table, NULL},
    [NODE_OP_LIST_TABLES] = {"list_tables", OP_READ, node_handle_list_tables, NULL},
    [NODE_OP_DEFINE_TABLE] = {"define_table", OP_WRITE, NULL, prepare_define_table},
    [NODE_OP_DROP_TABLE] = {"drop_table", OP_WRITE, NULL, prepare_drop_table},
    [NODE_OP_GROUP_STATUS] = {"group_status", OP_LOCAL | OP_ANY_HEALTH, node_handle_group_status,
                              NULL},
    [NODE_OP_LIST_CATALOG] = {"list_catalog", OP_READ | OP_GROUP0, node_handle_list_catalog, NULL},
    [NODE_OP_INVALID] = {"invalid", 0, NULL, NULL},
};

const char *node_op_name(int op)
{
	if (op < 0 || op >= NODE_OP__COUNT)
		return "invalid";
	return ops[op].name;
}

typedef struct worker {
	node_server *s;
	unsigned index;
	pthread_t thread;
	bool started;
	nng_ctx ctx;
	nng_aio *aio;
	node_waiter waiter;
	bool waiter_init;
	sh_arena arena;
} worker;

struct node_server {
	node *node;
	nng_socket sock;
	bool sock_open;
	worker *workers;
	unsigned n_workers;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	unsigned busy; /* workers handling a request */
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

/* ------------------------------------------------------------------------ */
/* The front door                                                            */
/* ------------------------------------------------------------------------ */

/* Which operation a decoded request is; SHOAL_OK or why it is not one. */
static int classify(const Shoal__NodeRequest *req, int *op, char *errmsg)
{
	int set = (req->request != NULL) + (req->define_table != NULL) + (req->drop_table != NULL) +
	          (req->group_status != 0) + (req->list_catalog != 0);
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

/* The write path: queue the operation on the group and wait for its packed
 * NodeResponse.  On success *raw (sh_malloc'd) is it. */
static int do_write(worker *w, node_call *c, const op_def *d, size_t request_size, uint32_t *leader,
                    uint8_t **raw, size_t *raw_len)
{
	node_waiter *wt = &w->waiter;
	Shoal__CommandOp op = SHOAL__COMMAND_OP__INIT;
	int rc = d->prepare(c, &op);
	if (rc != SHOAL_OK)
		return rc;
	wt->kind = NODE_WAIT_WRITE;
	wt->op = op;
	wt->size = request_size;
	rc = node_group_submit(c->group, wt, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = node_waiter_wait(wt);
	if (rc != SHOAL_OK) {
		*leader = wt->leader;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", wt->msg);
		return rc;
	}
	*raw = wt->resp;
	*raw_len = wt->resp_len;
	wt->resp = NULL;
	return SHOAL_OK;
}

/* Waits for a Raft barrier on the group (consistent read). */
static int do_barrier(worker *w, node_call *c, uint32_t *leader)
{
	node_waiter *wt = &w->waiter;
	wt->kind = NODE_WAIT_BARRIER;
	int rc = node_group_submit(c->group, wt, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = node_waiter_wait(wt);
	if (rc != SHOAL_OK) {
		*leader = wt->leader;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", wt->msg);
	}
	return rc;
}

/* Checks ownership, health and leadership, then runs the operation.  Writes
 * return their packed result in *raw; everything else fills c->nresp. */
static int dispatch(worker *w, node_call *c, int op, size_t request_size, uint32_t *leader,
                    uint8_t **raw, size_t *raw_len)
{
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
	if (d->flags & OP_WRITE)
		return do_write(w, c, d, request_size, leader, raw, raw_len);
	if (consistent_read) {
		int rc = do_barrier(w, c, leader);
		if (rc != SHOAL_OK)
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

/* Handles one request; returns the reply (NULL only when out of memory). */
static nng_msg *handle_request(worker *w, const uint8_t *body, size_t len, int *op_out,
                               int *status_out)
{
	node *n = w->s->node;
	sh_arena *a = &w->arena;
	ProtobufCAllocator alloc;
	Shoal__NodeRequest *req = NULL;
	Shoal__NodeResponse nresp_init = SHOAL__NODE_RESPONSE__INIT;
	Shoal__Response resp_init = SHOAL__RESPONSE__INIT;
	Shoal__NodeResponse *nresp = &nresp_init;
	node_call c = {.node = n, .arena = a, .nresp = &nresp_init, .resp = &resp_init};
	uint32_t leader = 0;
	uint8_t *raw = NULL;
	size_t raw_len = 0;
	int op = NODE_OP_INVALID;
	int rc;

	sh_arena_reset(a);
	nresp_init.response = &resp_init;
	wire_arena_allocator(&alloc, a);

	rc = wire_check_framing(&shoal__node_request__descriptor, body, len, c.errmsg);
	if (rc == SHOAL_OK) {
		req = shoal__node_request__unpack(&alloc, len, body);
		if (req == NULL)
			rc = sh_errf(c.errmsg, SHOAL_E_SERIALIZATION, "malformed NodeRequest");
	}
	if (rc == SHOAL_OK) {
		c.req = req;
		if (req->request != NULL)
			resp_init.request_id = req->request->request_id;
		rc = classify(req, &op, c.errmsg);
	}
	if (rc == SHOAL_OK)
		rc = dispatch(w, &c, op, len, &leader, &raw, &raw_len);
	if (rc == SHOAL_OK && raw != NULL) {
		rc = relabel(a, raw, raw_len, resp_init.request_id, &nresp, c.errmsg);
		if (rc != SHOAL_OK)
			nresp = &nresp_init;
	}
	if (rc != SHOAL_OK) {
		/* A failed request answers with the status alone. */
		nresp_init = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
		nresp_init.response = &resp_init;
		if (wire_response_set_error(a, &resp_init, rc, c.errmsg, NULL, NULL) != SHOAL_OK) {
			resp_init.status = wire_status_from_code(rc);
			resp_init.message = (char *)"out of memory";
		}
		if (rc == SHOAL_E_NOT_LEADER)
			nresp_init.leader_node = leader;
		/* Our own failures are worth a line; the client's are not. */
		bool ours = rc == SHOAL_E_INTERNAL || rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO ||
		            rc == SHOAL_E_FULL || rc == SHOAL_E_TIMEOUT;
		node_logf(ours ? NODE_LOG_WARN : NODE_LOG_DEBUG, "%s on group %u: %s: %s",
		          ops[op].name, req != NULL ? req->group : 0, shoal_err_name(rc), c.errmsg);
	}
	*op_out = op;
	*status_out = nresp->response != NULL ? (int)nresp->response->status : SHOAL_OK;

	nng_msg *m = NULL;
	size_t size = shoal__node_response__get_packed_size(nresp);
	if (nng_msg_alloc(&m, size) == 0)
		shoal__node_response__pack(nresp, nng_msg_body(m));
	else
		m = NULL;
	sh_free(raw);
	if (req != NULL)
		shoal__node_request__free_unpacked(req, &alloc);
	return m;
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

static void *worker_main(void *arg)
{
	worker *w = arg;
	node_server *s = w->s;

	for (;;) {
		nng_ctx_recv(w->ctx, w->aio);
		nng_aio_wait(w->aio);
		int rv = nng_aio_result(w->aio);
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			break;
		if (rv != 0) {
			node_logf(NODE_LOG_WARN, "server: receive: %s", nng_strerror(rv));
			continue;
		}
		nng_msg *msg = nng_aio_get_msg(w->aio);
		nng_aio_set_msg(w->aio, NULL);

		pthread_mutex_lock(&s->mu);
		s->busy++;
		pthread_mutex_unlock(&s->mu);

		uint64_t t0 = node_now_ns();
		int op = NODE_OP_INVALID, status = SHOAL_OK;
		nng_msg *reply =
		    handle_request(w, nng_msg_body(msg), nng_msg_len(msg), &op, &status);
		nng_msg_free(msg);
		if (reply != NULL) {
			nng_aio_set_msg(w->aio, reply);
			nng_ctx_send(w->ctx, w->aio);
			nng_aio_wait(w->aio);
			rv = nng_aio_result(w->aio);
			if (rv != 0) {
				nng_msg_free(reply);
				if (rv != NNG_ECLOSED)
					node_logf(NODE_LOG_WARN, "server: send: %s",
					          nng_strerror(rv));
			}
			nng_aio_set_msg(w->aio, NULL);
		} else {
			node_logf(NODE_LOG_ERROR, "server: out of memory building a reply");
		}
		node_stats_record(&s->node->stats, op, status, node_now_ns() - t0);

		pthread_mutex_lock(&s->mu);
		if (--s->busy == 0)
			pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static void server_free(node_server *s)
{
	if (s->sock_open) {
		nng_close(s->sock);
		s->sock_open = false;
	}
	for (unsigned i = 0; i < s->n_workers; i++) {
		worker *w = &s->workers[i];
		if (w->started)
			pthread_join(w->thread, NULL);
		if (w->aio != NULL)
			nng_aio_free(w->aio);
		if (w->waiter_init)
			node_waiter_fini(&w->waiter);
		sh_arena_fini(&w->arena);
	}
	sh_free(s->workers);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
}

int node_server_start(node *n, const char *url, unsigned workers, node_server **out, char *errmsg)
{
	int rc = SHOAL_OK, rv;
	*out = NULL;
	if (workers == 0)
		workers = NODE_DEFAULT_WORKERS;
	node_server *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
	s->node = n;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	s->workers = sh_calloc(workers, sizeof(*s->workers));
	if (s->workers == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
		goto err;
	}
	s->n_workers = workers;

	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "server: nng_rep0_open: %s",
		             nng_strerror(rv));
		goto err;
	}
	s->sock_open = true;
	nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, NODE_RECV_MAX);
	for (unsigned i = 0; i < workers; i++) {
		worker *w = &s->workers[i];
		w->s = s;
		w->index = i;
		sh_arena_init(&w->arena);
		if (node_waiter_init(&w->waiter) != SHOAL_OK) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: out of memory");
			goto err;
		}
		w->waiter_init = true;
		if ((rv = nng_aio_alloc(&w->aio, NULL, NULL)) != 0 ||
		    (rv = nng_ctx_open(&w->ctx, s->sock)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: %s", nng_strerror(rv));
			goto err;
		}
	}
	if ((rv = nng_listen(s->sock, url, NULL, 0)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "server: listen on %s: %s", url, nng_strerror(rv));
		goto err;
	}
	for (unsigned i = 0; i < workers; i++) {
		worker *w = &s->workers[i];
		if ((rv = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "server: pthread_create: %s",
			             strerror(rv));
			goto err;
		}
		w->started = true;
	}
	node_logf(NODE_LOG_INFO, "server: listening on %s with %u workers", url, workers);
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
