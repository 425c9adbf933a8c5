/*
 * fast.c -- the asynchronous fast path: GetItem, PutItem, UpdateItem,
 * DeleteItem and single-partition Query, entirely in nng's aio callbacks,
 * with the requests for one node batched into shared messages.
 *
 * The blocking path costs every request a hand-off to a worker thread and
 * back, and a worker blocked in nng_aio_wait for each step of its node call;
 * on a small machine those wakeups, not the work, were most of the router's
 * CPU.  Here the REP context's receive callback decodes and routes the
 * request and queues it for the target node; a lane of that node sends it
 * (with whatever else is queued for the node) and, in the lane's aio
 * callback, each node answer is passed on as the client's answer.  Whenever
 * anything is unusual the request goes to a worker (rt_server_defer), which
 * runs it from the start through the blocking front door (rt_handle_at)
 * with the request's own start time and deadline, so the semantics stay
 * those of items.c and transport.c:
 *
 *   - not one of the five operations, a request that does not decode or
 *     fails the API-level checks (the worker produces the exact error), a
 *     table missing from the cached catalog (the worker refreshes it), a key
 *     that does not match the schema, a Query on an index;
 *   - an attempt that did not end in a plain answer: NOT_LEADER (the hint
 *     is learnt first, as rt_call_all would), unavailable, unreachable,
 *     timeout, an answer that does not decode or has no Response, and
 *     ResourceNotFound (the worker repairs the group's catalog and retries).
 *     None of these executed a write except, possibly, a timed-out one,
 *     which rt_call_all would retry too; an answer "outcome unknown" is a
 *     plain answer and is passed on, as before.
 *
 * Lanes and batches.  Every nng message costs the router (and the node) a
 * poller wakeup and task-queue hand-offs on each side, more than the
 * request's own work.  So each node has a FIFO queue and a few lanes per
 * class of request -- eventually consistent reads (answered by the node at
 * once) and everything else (writes and consistent reads, which wait for
 * Raft), so that reads never wait behind a write's commit.  A lane is one
 * REQ context and aio with one message in flight.  A routed request is
 * queued; an idle lane takes everything queued (up to RT_BATCH_MAX requests
 * and about RT_BATCH_BYTES) and sends it: a lone request as a plain
 * NodeRequest, several as one NodeRequest batch (cluster.proto), which the
 * node answers in one NodeResponse.  When the answer comes, the lane takes
 * the next batch off the queue, or goes idle.  A request never waits while
 * a lane is idle, so one client alone sees no added latency, and the busier
 * a node the more each message carries.
 *
 * Lane state machine (lane_cb, the lane aio's callback):
 *
 *   state       event                                 next        (function)
 *   ----------  ------------------------------------  ----------  -----------
 *   LANE_IDLE   requests taken off the queue          LANE_SEND   lane_send
 *   LANE_SEND   handed to a pipe                      LANE_RECV   (recv posted only
 *                                                                  now: nng 1.5.2 req)
 *   LANE_SEND   failed / timed out                    LANE_IDLE*  each defers (UNREACHABLE)
 *   LANE_RECV   answer                                LANE_IDLE*  deliver: reply or defer each
 *   LANE_RECV   timeout, reset                        LANE_IDLE*  each defers
 *   (* or LANE_SEND again at once when requests are queued: lane_next)
 *
 * A lane whose attempt failed closes its context and opens a fresh one for
 * its next message (a REQ context with an unanswered request must not be
 * reused).
 *
 * No re-encoding: the NodeRequest is written by hand around the client's
 * packed Request (field 3, length-delimited, with group and any_replica
 * before it: protobuf fields may come in any order), and the answer is the
 * node's Response bytes with the NodeResponse framing taken off, since the
 * node echoes the Request's request_id in its Response.  Only the Response's
 * status and the NodeResponse's leader hint are read.  A node's answer is
 * checked with wire_check_framing first, as rt_call_all's unpack would.
 */
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

enum lane_state { LANE_IDLE = 0, LANE_SEND, LANE_RECV };

/* The classes of requests, each with its own queue and lanes per node. */
enum { CLASS_READ = 0, CLASS_WAIT, CLASS__COUNT };
static const uint32_t class_lanes[CLASS__COUNT] = {RT_LANES_READ, RT_LANES_WAIT};

typedef struct rt_mux rt_mux;

/* One message in flight to a node: the requests it carries. */
typedef struct rt_lane {
	rt_mux *mux;
	nng_aio *aio; /* callback lane_cb */
	nng_ctx ctx;  /* REQ context on the node's socket, while open */
	bool ctx_open;
	int state;
	rt_rctx *head; /* the requests in the message, in order (fast.next) */
	uint32_t n;
} rt_lane;

/* One node's queue and lanes for one class of requests. */
struct rt_mux {
	rt_router *rt;
	rt_node *node;
	pthread_mutex_t mu;
	bool mu_init;
	bool closing;         /* rt_fast_close: no new sends */
	rt_rctx *head, *tail; /* queued requests (fast.next) */
	rt_lane *idle[RT_LANES_MAX];
	uint32_t n_idle;
	rt_lane lanes[RT_LANES_MAX];
	uint32_t n_lanes;
};

struct rt_lanes {
	rt_mux mux[SH_MAX_NODES][CLASS__COUNT]; /* by node index in the conf */
	uint32_t n_nodes;
};

static void lane_cb(void *arg);

/* ------------------------------------------------------------------------ */
/* Decode and route                                                          */
/* ------------------------------------------------------------------------ */

/* The group of the request's key and whether any replica may serve it;
 * false when the request is not for the fast path.  Mirrors items.c. */
static bool route(rt_router *rt, sh_arena *a, const Shoal__Request *in, uint32_t *group,
                  uint32_t *table_id, bool *any_replica)
{
	char errmsg[SH_ERRMSG_SIZE];
	const char *table;
	const st_value *key = NULL;
	bool item = false, query = false;
	st_query_req qr;
	*any_replica = false;
	switch (in->op_case) {
	case SHOAL__REQUEST__OP_GET_ITEM: {
		st_get_req q;
		if (wire_get_req_from_pb(a, in->get_item, &q, errmsg) != SHOAL_OK)
			return false;
		table = q.table;
		key = q.key;
		*any_replica = !in->get_item->consistent_read;
		break;
	}
	case SHOAL__REQUEST__OP_PUT_ITEM: {
		st_put_req q;
		if (wire_put_req_from_pb(a, in->put_item, &q, errmsg) != SHOAL_OK)
			return false;
		table = q.table;
		key = q.item;
		item = true;
		break;
	}
	case SHOAL__REQUEST__OP_UPDATE_ITEM: {
		st_update_req q;
		if (wire_update_req_from_pb(a, in->update_item, &q, errmsg) != SHOAL_OK)
			return false;
		table = q.table;
		key = q.key;
		break;
	}
	case SHOAL__REQUEST__OP_DELETE_ITEM: {
		st_delete_req q;
		if (wire_delete_req_from_pb(a, in->delete_item, &q, errmsg) != SHOAL_OK)
			return false;
		table = q.table;
		key = q.key;
		break;
	}
	case SHOAL__REQUEST__OP_QUERY:
		if (wire_query_req_from_pb(a, in->query, &qr, errmsg) != SHOAL_OK ||
		    qr.index != NULL)
			return false;
		table = qr.table;
		query = true;
		*any_replica = !qr.consistent;
		break;
	default:
		return false;
	}
	rt_catalog_snap *snap = rt_catalog_acquire(&rt->catalog);
	if (snap == NULL)
		return false;
	const rt_table *t = rt_catalog_find(snap, table);
	const st_value *pk = NULL;
	bool ok = t != NULL;
	if (ok && query)
		ok = st_query_partition_key(&qr, &t->def.key, a, &pk, errmsg) == SHOAL_OK;
	else if (ok)
		ok = key != NULL &&
		     st_route_key(&t->def.key, key, item, &pk, NULL, NULL) == SHOAL_OK;
	if (ok) {
		*group = rt_group_of(rt, t->id, pk);
		*table_id = t->id;
	}
	rt_catalog_release(snap);
	return ok;
}

/* ------------------------------------------------------------------------ */
/* Messages by hand                                                          */
/* ------------------------------------------------------------------------ */

/* NodeRequest{group = 1, any_replica = 4, table_id = 18} written into the
 * request's header; the client's packed Request (field 3) follows it. */
static void node_header(rt_fast *f, size_t request_len, uint32_t table_id)
{
	uint8_t *h = f->hdr;
	size_t n = 0;
	if (f->group != 0) {
		h[n++] = 1 << 3 | 0;
		n += wire_put_varint(h + n, f->group);
	}
	if (f->any_replica) {
		h[n++] = 4 << 3 | 0;
		h[n++] = 1;
	}
	if (table_id != 0) { /* field 18: a two-byte tag */
		n += wire_put_varint(h + n, 18 << 3 | 0);
		n += wire_put_varint(h + n, table_id);
	}
	h[n++] = 3 << 3 | 2;
	n += wire_put_varint(h + n, request_len);
	f->hdr_len = (uint8_t)n;
}

/* The bytes of x's NodeRequest. */
static size_t node_request_len(const rt_rctx *x)
{
	return x->fast.hdr_len + nng_msg_len(x->msg);
}

static uint8_t *put_node_request(uint8_t *p, rt_rctx *x)
{
	memcpy(p, x->fast.hdr, x->fast.hdr_len);
	p += x->fast.hdr_len;
	size_t len = nng_msg_len(x->msg);
	memcpy(p, nng_msg_body(x->msg), len);
	return p + len;
}

/* The message for the n requests chained at head: a plain NodeRequest for
 * one, a NodeRequest batch (field 19) for several.  NULL: out of memory. */
static nng_msg *lane_message(rt_rctx *head, uint32_t n)
{
	size_t size = 0;
	for (rt_rctx *x = head; x != NULL; x = x->fast.next) {
		size_t len = node_request_len(x);
		size += n == 1 ? len : 2 + wire_varint_len(len) + len;
	}
	nng_msg *m;
	if (nng_msg_alloc(&m, size) != 0)
		return NULL;
	uint8_t *p = nng_msg_body(m);
	for (rt_rctx *x = head; x != NULL; x = x->fast.next) {
		if (n > 1) {
			p += wire_put_varint(p, 19 << 3 | 2);
			p += wire_put_varint(p, node_request_len(x));
		}
		p = put_node_request(p, x);
	}
	return m;
}

/* What a NodeResponse says: where its Response lies, the Response's status
 * and the leader hint.  False if it cannot be read this way (no Response,
 * or a Response in several pieces, which protobuf would merge). */
static bool read_answer(const uint8_t *buf, size_t len, size_t *off, size_t *rlen, uint64_t *status,
                        uint32_t *leader)
{
	const uint8_t *p = buf, *end = buf + len, *resp = NULL;
	wire_field f;
	*leader = 0;
	*status = 0;
	while (p < end) {
		if (!wire_next_field(&p, end, &f))
			return false;
		if (f.type == 0 && f.number == 2)
			*leader = (uint32_t)f.value;
		if (f.type == 2 && f.number == 1) {
			if (resp != NULL)
				return false;
			resp = f.data;
			*rlen = f.len;
		}
	}
	if (resp == NULL)
		return false;
	*off = (size_t)(resp - buf);
	/* The Response's status (field 2, varint; the last one counts). */
	p = resp;
	end = resp + *rlen;
	while (p < end) {
		if (!wire_next_field(&p, end, &f))
			return false;
		if (f.type == 0 && f.number == 2)
			*status = f.value;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* One request's outcome                                                     */
/* ------------------------------------------------------------------------ */

/* The attempt ended without a plain answer: learn from it and hand the
 * request to a worker.  Any thread. */
static void give_up(rt_rctx *x, rt_outcome o, uint32_t hint)
{
	rt_fast *f = &x->fast;
	rt_router *rt = x->s->rt;
	atomic_fetch_add_explicit(&rt->metrics.fast_deferred, 1, memory_order_relaxed);
	if (o != RT_OUT_DONE) {
		rt_note_failure(rt, f->group, o, f->node->id, hint);
		atomic_fetch_add(&rt->metrics.retries[o], 1);
	}
	rt_server_defer(x);
}

/* The node answered x with the NodeResponse buf[0, len), which lies in m
 * (the whole message: a lone request's answer, taken over and trimmed in
 * place) or, for a batch member, in a message that stays the lane's (m
 * NULL: the Response is copied).  Replies or defers.  Any thread. */
static void answered(rt_rctx *x, nng_msg *m, const uint8_t *buf, size_t len)
{
	rt_fast *f = &x->fast;
	rt_router *rt = x->s->rt;
	char errmsg[SH_ERRMSG_SIZE];
	size_t off = 0, rlen = 0;
	uint64_t status;
	uint32_t leader;
	if (wire_check_framing(&shoal__node_response__descriptor, buf, len, errmsg) != SHOAL_OK) {
		rt_log("node %u, group %u: bad answer: %s", f->node->id, f->group, errmsg);
		if (m != NULL)
			nng_msg_free(m);
		give_up(x, RT_OUT_BAD_ANSWER, 0);
		return;
	}
	if (!read_answer(buf, len, &off, &rlen, &status, &leader)) {
		if (m != NULL)
			nng_msg_free(m); /* e.g. no Response: the worker says so */
		give_up(x, RT_OUT_DONE, 0);
		return;
	}
	int code = wire_code_from_status((int)status);
	if (code == SHOAL_E_NOT_LEADER || code == SHOAL_E_UNAVAILABLE) {
		if (m != NULL)
			nng_msg_free(m);
		give_up(x, code == SHOAL_E_NOT_LEADER ? RT_OUT_NOT_LEADER : RT_OUT_UNAVAILABLE,
		        leader);
		return;
	}
	rt_note_answer(rt, f->group, f->node->id, f->any_replica);
	if (code == SHOAL_E_NOT_FOUND || code == SHOAL_E_WRONG_EPOCH) {
		/* The worker repairs the group, or refreshes a stale table id. */
		if (m != NULL)
			nng_msg_free(m);
		give_up(x, RT_OUT_DONE, 0);
		return;
	}
	/* The answer: the Response's bytes. */
	if (m != NULL) {
		nng_msg_header_clear(m);
		nng_msg_chop(m, len - off - rlen);
		nng_msg_trim(m, off);
	} else if (nng_msg_alloc(&m, rlen) == 0) {
		memcpy(nng_msg_body(m), buf + off, rlen);
	} else {
		give_up(x, RT_OUT_DONE, 0); /* out of memory: the worker tries */
		return;
	}
	rt_metrics_request(&rt->metrics, f->slot, code, rt_now_us() - x->t0_us);
	atomic_fetch_add_explicit(&rt->metrics.fast_answered, 1, memory_order_relaxed);
	rt_server_reply(x, m);
}

/* ------------------------------------------------------------------------ */
/* Lanes                                                                     */
/* ------------------------------------------------------------------------ */

static nng_duration left_ms(int64_t deadline, uint32_t cap)
{
	int64_t left = deadline - rt_now_ms();
	if (left < 1)
		left = 1;
	return (nng_duration)(left < cap ? left : cap);
}

/* Takes the next message's worth of requests off m's queue (mu held). */
static void take(rt_mux *m, rt_lane *l)
{
	rt_rctx *head = m->head, *last = head;
	uint32_t n = 1;
	size_t bytes = node_request_len(head);
	for (rt_rctx *x = head->fast.next;
	     x != NULL && n < RT_BATCH_MAX && bytes + node_request_len(x) <= RT_BATCH_BYTES;
	     x = x->fast.next) {
		bytes += node_request_len(x);
		n++;
		last = x;
	}
	m->head = last->fast.next;
	if (m->head == NULL)
		m->tail = NULL;
	last->fast.next = NULL;
	l->head = head;
	l->n = n;
}

/* Hands every request of the lane's message to the workers. */
static void lane_fail(rt_lane *l, rt_outcome o)
{
	rt_rctx *x = l->head;
	l->head = NULL;
	l->n = 0;
	if (l->ctx_open) {
		nng_ctx_close(l->ctx);
		l->ctx_open = false;
	}
	while (x != NULL) {
		rt_rctx *next = x->fast.next;
		give_up(x, o, 0);
		x = next;
	}
}

static void lane_next(rt_lane *l);

/* Sends the lane's requests (LANE_IDLE -> LANE_SEND). */
static void lane_send(rt_lane *l)
{
	rt_mux *m = l->mux;
	rt_router *rt = m->rt;
	if (!l->ctx_open) {
		if (nng_ctx_open(&l->ctx, m->node->sock) != 0) {
			lane_fail(l, RT_OUT_UNREACHABLE);
			lane_next(l);
			return;
		}
		l->ctx_open = true;
	}
	nng_msg *msg = lane_message(l->head, l->n);
	if (msg == NULL) {
		lane_fail(l, RT_OUT_DONE); /* out of memory: the workers try */
		lane_next(l);
		return;
	}
	if (l->n > 1) {
		atomic_fetch_add_explicit(&rt->metrics.fast_batches, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&rt->metrics.fast_batched, l->n, memory_order_relaxed);
	}
	int64_t deadline = l->head->deadline;
	for (rt_rctx *x = l->head->fast.next; x != NULL; x = x->fast.next)
		if (x->deadline < deadline)
			deadline = x->deadline;
	l->state = LANE_SEND;
	nng_aio_set_msg(l->aio, msg);
	nng_aio_set_timeout(l->aio, left_ms(deadline, rt->opt.send_ms));
	nng_ctx_send(l->ctx, l->aio);
}

/* The lane's message is done: send the next one, or go idle. */
static void lane_next(rt_lane *l)
{
	rt_mux *m = l->mux;
	pthread_mutex_lock(&m->mu);
	if (m->head != NULL && !m->closing) {
		take(m, l);
		pthread_mutex_unlock(&m->mu);
		lane_send(l);
		return;
	}
	l->state = LANE_IDLE;
	m->idle[m->n_idle++] = l;
	pthread_mutex_unlock(&m->mu);
}

/* The node's answer to the lane's message (taken over): each request's
 * answer goes to its client, in order. */
static void deliver(rt_lane *l, nng_msg *msg)
{
	rt_rctx *x = l->head;
	uint32_t n = l->n;
	l->head = NULL;
	l->n = 0;
	if (n == 1) {
		answered(x, msg, nng_msg_body(msg), nng_msg_len(msg));
		return;
	}
	/* A batch's answer: field 8, once per request, in order. */
	const uint8_t *p = nng_msg_body(msg), *end = p + nng_msg_len(msg);
	wire_field f;
	uint32_t i = 0;
	while (x != NULL && p < end) {
		if (!wire_next_field(&p, end, &f))
			break;
		if (f.number != 8 || f.type != 2)
			continue;
		rt_rctx *next = x->fast.next;
		answered(x, NULL, f.data, f.len);
		x = next;
		i++;
	}
	if (x != NULL) {
		rt_log("node %u: a batch of %u requests answered %u", l->mux->node->id, n, i);
		while (x != NULL) {
			rt_rctx *next = x->fast.next;
			give_up(x, RT_OUT_BAD_ANSWER, 0);
			x = next;
		}
	}
	nng_msg_free(msg);
}

/* The lane aio's callback.  nng callback thread. */
static void lane_cb(void *arg)
{
	rt_lane *l = arg;
	rt_router *rt = l->mux->rt;
	int rv = nng_aio_result(l->aio);
	switch (l->state) {
	case LANE_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(l->aio);
			if (m != NULL)
				nng_msg_free(m);
			nng_aio_set_msg(l->aio, NULL);
			lane_fail(l, RT_OUT_UNREACHABLE);
			lane_next(l);
			return;
		}
		l->state = LANE_RECV;
		int64_t deadline = l->head->deadline;
		for (rt_rctx *x = l->head->fast.next; x != NULL; x = x->fast.next)
			if (x->deadline < deadline)
				deadline = x->deadline;
		nng_aio_set_timeout(l->aio, left_ms(deadline, rt->opt.attempt_ms));
		nng_ctx_recv(l->ctx, l->aio);
		return;
	case LANE_RECV:
		if (rv != 0) {
			lane_fail(l, rv == NNG_ETIMEDOUT ? RT_OUT_TIMEOUT : RT_OUT_UNREACHABLE);
			lane_next(l);
			return;
		}
		nng_msg *m = nng_aio_get_msg(l->aio);
		nng_aio_set_msg(l->aio, NULL);
		deliver(l, m);
		lane_next(l);
		return;
	default:
		return; /* not reached: no operation pending */
	}
}

/* ------------------------------------------------------------------------ */
/* The front of the fast path                                                */
/* ------------------------------------------------------------------------ */

/* rt_fast_cork / _uncork: on this thread, requests are queued without
 * starting a lane until the uncork, so that the members of a client's batch
 * leave for each node together instead of the first alone. */
#define CORK_MAX 16
static __thread int cork_depth;
static __thread rt_mux *corked[CORK_MAX];
static __thread int n_corked;

void rt_fast_cork(void)
{
	cork_depth++;
}

/* Starts idle lanes of m on what is queued. */
static void kick(rt_mux *m)
{
	for (;;) {
		rt_lane *l = NULL;
		pthread_mutex_lock(&m->mu);
		if (m->n_idle > 0 && m->head != NULL && !m->closing) {
			l = m->idle[--m->n_idle];
			take(m, l);
		}
		pthread_mutex_unlock(&m->mu);
		if (l == NULL)
			return;
		lane_send(l);
	}
}

void rt_fast_uncork(void)
{
	if (--cork_depth > 0)
		return;
	int n = n_corked;
	n_corked = 0;
	for (int i = 0; i < n; i++)
		kick(corked[i]);
}

bool rt_fast_start(rt_rctx *x)
{
	rt_router *rt = x->s->rt;
	rt_lanes *lanes = x->s->lanes;
	rt_fast *f = &x->fast;
	sh_arena *a = &x->arena;
	char errmsg[SH_ERRMSG_SIZE];
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	Shoal__Request *in;
	if (lanes == NULL || wire_unpack_request(&alloc, nng_msg_body(x->msg), nng_msg_len(x->msg),
	                                         &in, errmsg) != SHOAL_OK)
		return false;
	uint32_t group = 0, table_id = 0;
	bool any = false;
	bool ok = route(rt, a, in, &group, &table_id, &any);
	f->slot = rt_op_slot(in->op_case);
	sh_arena_reset(a);
	if (!ok || group >= rt->conf->groups)
		return false;
	uint32_t reps[SH_MAX_REPLICATION];
	sh_cluster_replicas(rt->conf, group, reps);
	uint32_t target = rt_first_target(rt, group, any, reps, rt->conf->replication);
	rt_node *n = rt_node_by_id(rt, target);
	if (n == NULL || !n->open)
		return false;
	f->node = n;
	f->group = group;
	f->any_replica = any;
	f->next = NULL;
	node_header(f, nng_msg_len(x->msg), table_id);

	rt_mux *m = &lanes->mux[n - rt->nodes][any ? CLASS_READ : CLASS_WAIT];
	bool hold = false;
	if (cork_depth > 0) {
		for (int i = 0; i < n_corked && !hold; i++)
			hold = corked[i] == m;
		if (!hold && n_corked < CORK_MAX) {
			corked[n_corked++] = m;
			hold = true;
		}
	}
	pthread_mutex_lock(&m->mu);
	if (m->tail != NULL)
		m->tail->fast.next = x;
	else
		m->head = x;
	m->tail = x;
	rt_lane *l = NULL;
	if (!hold && m->n_idle > 0 && !m->closing) {
		l = m->idle[--m->n_idle];
		take(m, l);
	}
	pthread_mutex_unlock(&m->mu);
	if (l != NULL)
		lane_send(l);
	return true;
}

int rt_fast_open(rt_server *s, char *errmsg)
{
	rt_router *rt = s->rt;
	rt_lanes *lanes = sh_calloc(1, sizeof(*lanes));
	if (lanes == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "fast path: out of memory");
	s->lanes = lanes;
	lanes->n_nodes = rt->conf->n_nodes;
	for (uint32_t i = 0; i < lanes->n_nodes; i++) {
		for (int c = 0; c < CLASS__COUNT; c++) {
			rt_mux *m = &lanes->mux[i][c];
			m->rt = rt;
			m->node = &rt->nodes[i];
			if (pthread_mutex_init(&m->mu, NULL) != 0)
				return sh_errf(errmsg, SHOAL_E_INTERNAL, "fast path: mutex");
			m->mu_init = true;
			for (uint32_t k = 0; k < class_lanes[c]; k++) {
				rt_lane *l = &m->lanes[k];
				l->mux = m;
				int rv = nng_aio_alloc(&l->aio, lane_cb, l);
				if (rv != 0)
					return sh_errf(errmsg, SHOAL_E_NOMEM, "fast path aio: %s",
					               nng_strerror(rv));
				m->n_lanes++;
				m->idle[m->n_idle++] = l;
			}
		}
	}
	return SHOAL_OK;
}

void rt_fast_close(rt_server *s)
{
	rt_lanes *lanes = s->lanes;
	if (lanes == NULL)
		return;
	for (uint32_t i = 0; i < lanes->n_nodes; i++)
		for (int c = 0; c < CLASS__COUNT; c++) {
			rt_mux *m = &lanes->mux[i][c];
			if (!m->mu_init)
				continue;
			pthread_mutex_lock(&m->mu);
			m->closing = true;
			pthread_mutex_unlock(&m->mu);
			for (uint32_t k = 0; k < m->n_lanes; k++)
				nng_aio_stop(m->lanes[k].aio);
		}
	for (uint32_t i = 0; i < lanes->n_nodes; i++)
		for (int c = 0; c < CLASS__COUNT; c++) {
			rt_mux *m = &lanes->mux[i][c];
			for (uint32_t k = 0; k < m->n_lanes; k++) {
				rt_lane *l = &m->lanes[k];
				nng_msg *msg = nng_aio_get_msg(l->aio);
				if (msg != NULL)
					nng_msg_free(msg);
				nng_aio_free(l->aio);
				if (l->ctx_open)
					nng_ctx_close(l->ctx);
			}
			if (m->mu_init)
				pthread_mutex_destroy(&m->mu);
		}
	sh_free(lanes);
	s->lanes = NULL;
}
