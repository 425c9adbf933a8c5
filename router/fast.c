/*
 * fast.c -- the asynchronous fast path: GetItem, PutItem, UpdateItem,
 * DeleteItem and single-partition Query, entirely in nng's aio callbacks.
 *
 * The blocking path costs every request a hand-off to a worker thread and
 * back, and a worker blocked in nng_aio_wait for each step of its node call;
 * on a small machine those wakeups, not the work, were most of the router's
 * CPU.  Here the REP context's receive callback decodes and routes the
 * request, sends one NodeRequest on a pooled context of the target node's
 * REQ socket, and that aio's callback passes the node's Response on as the
 * answer.  Whenever anything is unusual the request goes to a worker
 * (rt_server_defer), which runs it from the start through the blocking
 * front door (rt_handle_at) with the request's own start time and deadline,
 * so the semantics stay those of items.c and transport.c:
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
 * Attempt state machine (the aio's callback, fast_cb):
 *
 *   state    event                                  next     (function)
 *   -------  -------------------------------------  -------  -----------------
 *   FS_IDLE  request routed                         FS_SEND  rt_fast_start
 *   FS_SEND  handed to a pipe                       FS_RECV  (recv posted only
 *                                                            now: nng 1.5.2 req)
 *   FS_SEND  failed / timed out                     FS_IDLE  defer (UNREACHABLE)
 *   FS_RECV  plain answer                           FS_IDLE  answer -> reply
 *   FS_RECV  retryable answer, timeout, reset       FS_IDLE  defer
 *
 * No re-encoding: the NodeRequest is written by hand around the client's
 * packed Request (field 3, length-delimited, with group and any_replica
 * before it: protobuf fields may come in any order), and the answer is the
 * node's message with the NodeResponse framing trimmed off, since the node
 * echoes the Request's request_id in its Response.  Only the Response's
 * status and the NodeResponse's leader hint are read.  A node's answer is
 * checked with wire_check_framing first, as rt_call_all's unpack would.
 */
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

enum fast_state { FS_IDLE = 0, FS_SEND, FS_RECV };

static void fast_cb(void *arg);

int rt_fast_init(rt_rctx *x, char *errmsg)
{
	int rv = nng_aio_alloc(&x->fast.aio, fast_cb, x);
	if (rv != 0) {
		x->fast.aio = NULL;
		return sh_errf(errmsg, SHOAL_E_NOMEM, "fast path aio: %s", nng_strerror(rv));
	}
	return SHOAL_OK;
}

static void close_ctx(rt_fast *f)
{
	if (f->ctx_open) {
		nng_ctx_close(f->ctx);
		f->ctx_open = false;
	}
}

void rt_fast_stop(rt_rctx *x)
{
	if (x->fast.aio != NULL)
		nng_aio_stop(x->fast.aio);
}

void rt_fast_fini(rt_rctx *x)
{
	rt_fast *f = &x->fast;
	if (f->aio != NULL) {
		nng_msg *m = nng_aio_get_msg(f->aio);
		if (m != NULL)
			nng_msg_free(m);
		nng_aio_free(f->aio);
		f->aio = NULL;
	}
	close_ctx(f);
}

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
/* Protobuf framing by hand                                                  */
/* ------------------------------------------------------------------------ */

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = r;
			return true;
		}
	}
	return false;
}

/* NodeRequest{group = 1, request = 3, any_replica = 4, table_id = 18}
 * around the client's packed Request. */
static nng_msg *node_request(const nng_msg *client, uint32_t group, uint32_t table_id,
                             bool any_replica)
{
	uint8_t hdr[40];
	size_t n = 0;
	size_t len = nng_msg_len(client);
	if (group != 0) {
		hdr[n++] = 1 << 3 | 0;
		n += put_varint(hdr + n, group);
	}
	if (any_replica) {
		hdr[n++] = 4 << 3 | 0;
		hdr[n++] = 1;
	}
	if (table_id != 0) { /* field 18: a two-byte tag */
		n += put_varint(hdr + n, 18 << 3 | 0);
		n += put_varint(hdr + n, table_id);
	}
	hdr[n++] = 3 << 3 | 2;
	n += put_varint(hdr + n, len);
	nng_msg *m;
	if (nng_msg_alloc(&m, n + len) != 0)
		return NULL;
	uint8_t *body = nng_msg_body(m);
	memcpy(body, hdr, n);
	memcpy(body + n, nng_msg_body((nng_msg *)client), len);
	return m;
}

/* The next field of a protobuf message in [*p, end): its number, and for a
 * varint its value (*v) or for a length-delimited field its bytes (*data,
 * *len); fixed32/64 fields are skipped over.  False on malformed input
 * (groups included: no Shoal message has them). */
static bool next_field(const uint8_t **p, const uint8_t *end, uint64_t *field, int *wire,
                       uint64_t *v, const uint8_t **data, size_t *len)
{
	uint64_t tag;
	if (!get_varint(p, end, &tag))
		return false;
	*field = tag >> 3;
	*wire = (int)(tag & 7);
	switch (*wire) {
	case 0:
		return get_varint(p, end, v);
	case 1:
	case 5: {
		size_t n = *wire == 1 ? 8 : 4;
		if ((size_t)(end - *p) < n)
			return false;
		*p += n;
		return true;
	}
	case 2:
		if (!get_varint(p, end, v) || *v > (uint64_t)(end - *p))
			return false;
		*data = *p;
		*len = (size_t)*v;
		*p += *v;
		return true;
	default:
		return false;
	}
}

/* What a NodeResponse says: where its Response lies, the Response's status
 * and the leader hint.  False if it cannot be read this way (no Response,
 * or a Response in several pieces, which protobuf would merge). */
static bool read_answer(const uint8_t *buf, size_t len, size_t *off, size_t *rlen, uint64_t *status,
                        uint32_t *leader)
{
	const uint8_t *p = buf, *end = buf + len, *resp = NULL, *data = NULL;
	uint64_t field, v = 0;
	size_t dlen = 0;
	int wire;
	*leader = 0;
	*status = 0;
	while (p < end) {
		if (!next_field(&p, end, &field, &wire, &v, &data, &dlen))
			return false;
		if (wire == 0 && field == 2)
			*leader = (uint32_t)v;
		if (wire == 2 && field == 1) {
			if (resp != NULL)
				return false;
			resp = data;
			*rlen = dlen;
		}
	}
	if (resp == NULL)
		return false;
	*off = (size_t)(resp - buf);
	/* The Response's status (field 2, varint; the last one counts). */
	p = resp;
	end = resp + *rlen;
	while (p < end) {
		if (!next_field(&p, end, &field, &wire, &v, &data, &dlen))
			return false;
		if (wire == 0 && field == 2)
			*status = v;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* The attempt                                                               */
/* ------------------------------------------------------------------------ */

static nng_duration left_ms(const rt_rctx *x, uint32_t cap)
{
	int64_t left = x->deadline - rt_now_ms();
	if (left < 1)
		left = 1;
	return (nng_duration)(left < cap ? left : cap);
}

/* The attempt ended without a plain answer: learn from it and hand the
 * request to a worker.  Any thread, x's callbacks done. */
static void give_up(rt_rctx *x, rt_outcome o, uint32_t hint)
{
	rt_fast *f = &x->fast;
	rt_router *rt = x->s->rt;
	close_ctx(f);
	f->state = FS_IDLE;
	atomic_fetch_add_explicit(&rt->metrics.fast_deferred, 1, memory_order_relaxed);
	if (o != RT_OUT_DONE) {
		rt_note_failure(rt, f->group, o, f->node->id, hint);
		atomic_fetch_add(&rt->metrics.retries[o], 1);
	}
	rt_server_defer(x);
}

bool rt_fast_start(rt_rctx *x)
{
	rt_router *rt = x->s->rt;
	rt_fast *f = &x->fast;
	sh_arena *a = &x->arena;
	char errmsg[SH_ERRMSG_SIZE];
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	Shoal__Request *in;
	if (wire_unpack_request(&alloc, nng_msg_body(x->msg), nng_msg_len(x->msg), &in, errmsg) !=
	    SHOAL_OK)
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
	rt_node *n =
	    rt_node_by_id(rt, rt_first_target(rt, group, any, reps, rt->conf->replication));
	if (n == NULL || !n->open)
		return false;
	nng_msg *m = node_request(x->msg, group, table_id, any);
	if (m == NULL)
		return false;
	if (rt_node_ctx_get(n, &f->ctx) != 0) {
		nng_msg_free(m);
		return false;
	}
	f->ctx_open = true;
	f->node = n;
	f->group = group;
	f->any_replica = any;
	f->state = FS_SEND;
	nng_aio_set_msg(f->aio, m);
	nng_aio_set_timeout(f->aio, left_ms(x, rt->opt.send_ms));
	nng_ctx_send(f->ctx, f->aio);
	return true;
}

/* The node answered (FS_RECV, aio result 0). */
static void answered(rt_rctx *x)
{
	rt_fast *f = &x->fast;
	rt_router *rt = x->s->rt;
	nng_msg *m = nng_aio_get_msg(f->aio);
	nng_aio_set_msg(f->aio, NULL);
	/* A reply came: nothing is outstanding on the context; keep it. */
	rt_node_ctx_put(f->node, f->ctx);
	f->ctx_open = false;

	char errmsg[SH_ERRMSG_SIZE];
	const uint8_t *body = nng_msg_body(m);
	size_t len = nng_msg_len(m), off = 0, rlen = 0;
	uint64_t status;
	uint32_t leader;
	if (wire_check_framing(&shoal__node_response__descriptor, body, len, errmsg) != SHOAL_OK) {
		rt_log("node %u, group %u: bad answer: %s", f->node->id, f->group, errmsg);
		nng_msg_free(m);
		give_up(x, RT_OUT_BAD_ANSWER, 0);
		return;
	}
	if (!read_answer(body, len, &off, &rlen, &status, &leader)) {
		nng_msg_free(m); /* e.g. no Response: the worker says so */
		give_up(x, RT_OUT_DONE, 0);
		return;
	}
	int code = wire_code_from_status((int)status);
	if (code == SHOAL_E_NOT_LEADER || code == SHOAL_E_UNAVAILABLE) {
		nng_msg_free(m);
		give_up(x, code == SHOAL_E_NOT_LEADER ? RT_OUT_NOT_LEADER : RT_OUT_UNAVAILABLE,
		        leader);
		return;
	}
	rt_note_answer(rt, f->group, f->node->id, f->any_replica);
	if (code == SHOAL_E_NOT_FOUND || code == SHOAL_E_WRONG_EPOCH) {
		/* The worker repairs the group, or refreshes a stale table id. */
		nng_msg_free(m);
		give_up(x, RT_OUT_DONE, 0);
		return;
	}
	/* The answer: the Response's bytes, framing trimmed off in place. */
	nng_msg_header_clear(m);
	nng_msg_chop(m, len - off - rlen);
	nng_msg_trim(m, off);
	f->state = FS_IDLE;
	rt_metrics_request(&rt->metrics, f->slot, code, rt_now_us() - x->t0_us);
	atomic_fetch_add_explicit(&rt->metrics.fast_answered, 1, memory_order_relaxed);
	rt_server_reply(x, m);
}

/* The node aio's callback.  nng callback thread. */
static void fast_cb(void *arg)
{
	rt_rctx *x = arg;
	rt_fast *f = &x->fast;
	rt_router *rt = x->s->rt;
	int rv = nng_aio_result(f->aio);
	switch (f->state) {
	case FS_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(f->aio);
			if (m != NULL)
				nng_msg_free(m);
			nng_aio_set_msg(f->aio, NULL);
			give_up(x, RT_OUT_UNREACHABLE, 0);
			return;
		}
		f->state = FS_RECV;
		nng_aio_set_timeout(f->aio, left_ms(x, rt->opt.attempt_ms));
		nng_ctx_recv(f->ctx, f->aio);
		return;
	case FS_RECV:
		if (rv != 0) {
			give_up(x, rv == NNG_ETIMEDOUT ? RT_OUT_TIMEOUT : RT_OUT_UNREACHABLE, 0);
			return;
		}
		answered(x);
		return;
	default:
		return; /* not reached: no operation pending */
	}
}
