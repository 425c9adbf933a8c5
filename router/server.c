/*
 * server.c -- the router's native listener: nng REP contexts, each with a
 * receive always posted, and client batches.
 *
 * With a credentials file (rt->creds), a message's signature (its Auth
 * field, proto/wire_auth.h) is verified and cut off before anything reads
 * it (rt_auth_native): an unsigned or badly signed message is answered
 * with the exception SigV4 gives and goes nowhere.  The key becomes the
 * principal of its job, or of every member's job for a batch (signed once
 * as a whole); job.c authorizes each.
 *
 * A received message is a Request, or a Request batch (shoal.proto
 * Request.batch: packed Requests, nothing else), which libshoal sends when
 * it has many requests in flight.  A Request becomes a job (job.c) whose
 * answer is sent on the context; each member of a batch becomes a job of
 * its own, started under one cork (proto/lanes.h) so that the members for
 * one node leave in one message, and the last member to finish sends the
 * batch's answer (Response.batch, in order).
 *
 * REP context states (rctx_cb, the context aio's callback):
 *
 *   state     event                                next      (function)
 *   --------  -----------------------------------  --------  -------------
 *   RECV      a message                            JOB       start_one /
 *                                                            start_batch
 *   RECV      socket closed                        DONE
 *   JOB       the job (every member) answered      SEND      send_answer
 *   SEND      sent (or failed: the client left)    RECV      rearm
 *   SEND      not sent in RT_REPLY_SEND_MS: the    RECV      rearm
 *             client's connection is closed (it stopped reading)
 *
 * Stopping (rt_server_stop, main thread): the listener closes (no new
 * connections), requests in progress finish (bounded by the drain time),
 * closing the socket fails every pending receive with NNG_ECLOSED (DONE),
 * and every aio is stopped (nng_aio_stop waits for a running callback)
 * before anything is freed.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "router/router.h"

#include <nng/protocol/reqrep0/rep.h>

#define RT_RECVMAXSZ (16u * 1024 * 1024)
/* An answer not sent within this long is given up and its client's
 * connection closed: REP queues answers behind the connection's previous
 * one without a limit, so a client that stops reading (or a connection
 * stuck under it) would otherwise hold this context -- and, as it keeps
 * sending, every context: the router would answer no one. */
#define RT_REPLY_SEND_MS 30000
/* One client connection holds at most n_ctxs / RT_PIPE_SHARE contexts with
 * an answer waiting to be sent; a message that arrives on it past that is
 * dropped unanswered (its client, which is not reading its answers, times
 * out on it): a client that stops reading can never take the contexts the
 * others need.  A client that reads keeps none waiting (an answer leaves as
 * soon as the connection is free), however many requests it has in flight. */
#define RT_PIPE_SHARE 4

enum rctx_state { RC_RECV = 0, RC_JOB, RC_SEND, RC_DONE };

struct rt_rctx {
	rt_server *s;
	nng_ctx ctx;
	nng_aio *aio;
	int state;
	nng_pipe pipe;                 /* the client's connection the message came on */
	_Atomic uint32_t sending_pipe; /* its id while an answer waits to be sent, else 0 */
	/* A batch: its member jobs, and how many have not answered (+1 while
	 * they are being started). */
	rt_job **members;
	uint32_t n_members;
	atomic_uint pending;
};

/* Whether connection p has its share of contexts waiting to send answers.
 * The fast path is one load: only when that many contexts wait in all (a
 * client not reading, or a stuck connection) are they counted by pipe. */
static bool pipe_full(rt_server *s, nng_pipe p, uint32_t cap)
{
	if (atomic_load(&s->sending) < cap)
		return false;
	uint32_t id = (uint32_t)nng_pipe_id(p), n = 0;
	for (uint32_t i = 0; i < s->n_ctxs && n < cap; i++)
		n += atomic_load(&s->ctxs[i].sending_pipe) == id;
	return n >= cap;
}

/* The message is answered (or dropped): receive the next one. */
static void rearm(rt_rctx *x)
{
	nng_aio_set_msg(x->aio, NULL);
	x->state = RC_RECV;
	atomic_fetch_sub(&x->s->busy, 1);
	nng_aio_set_timeout(x->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(x->ctx, x->aio);
}

static void send_answer(rt_rctx *x, nng_msg *m)
{
	if (m == NULL) {
		rt_log("server: no memory to answer a request; dropped");
		rearm(x);
		return;
	}
	x->state = RC_SEND;
	atomic_fetch_add(&x->s->sending, 1);
	atomic_store(&x->sending_pipe, (uint32_t)nng_pipe_id(x->pipe));
	nng_aio_set_timeout(x->aio, RT_REPLY_SEND_MS);
	nng_aio_set_msg(x->aio, m);
	nng_ctx_send(x->ctx, x->aio);
}

/* Answers x with a Response carrying only an error. */
static void reply_error(rt_rctx *x, int code, const char *text)
{
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Response *r = rt_error_response(&a, code, text);
	nng_msg *m = NULL;
	if (r != NULL && nng_msg_alloc(&m, shoal__response__get_packed_size(r)) == 0)
		shoal__response__pack(r, nng_msg_body(m));
	sh_arena_fini(&a);
	send_answer(x, m);
}

/* Answers the message msg (freed) with an error: a batch gets it once per
 * member (libshoal matches answers to members), anything else once. */
static void reply_refused(rt_rctx *x, nng_msg *msg, int code, const char *text)
{
	rt_router *rt = x->s->rt;
	uint32_t n = 0;
	const uint8_t *body = nng_msg_body(msg);
	size_t len = nng_msg_len(msg);
	/* The Auth field is still there: count the members by hand. */
	const uint8_t *p = body, *end = body + len;
	wire_field f;
	while (p < end && wire_next_field(&p, end, &f) && n < RT_CLIENT_BATCH_MAX)
		n += f.number == rt->f.req_batch && f.type == 2;
	nng_msg_free(msg);
	if (n == 0) {
		reply_error(x, code, text);
		return;
	}
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Response *r = rt_error_response(&a, code, text);
	nng_msg *out = NULL;
	size_t rl = r != NULL ? shoal__response__get_packed_size(r) : 0;
	uint8_t *one = r != NULL ? sh_arena_alloc(&a, rl + 1) : NULL;
	const uint8_t **data = sh_calloc(n, sizeof(*data));
	size_t *lens = sh_calloc(n, sizeof(*lens));
	if (one != NULL && data != NULL && lens != NULL) {
		shoal__response__pack(r, one);
		for (uint32_t i = 0; i < n; i++) {
			data[i] = one;
			lens[i] = rl;
		}
		out = wire_batch_answer(rt->f.resp_batch, data, lens, n);
	}
	sh_free(data);
	sh_free(lens);
	sh_arena_fini(&a);
	send_answer(x, out);
}

/* A lone request's job is done. */
static void one_done(rt_job *j)
{
	rt_rctx *x = j->done_arg;
	nng_msg *m = rt_job_answer_msg(j);
	rt_job_put(j);
	send_answer(x, m);
}

/* Every member of x's batch answered: one Response whose batch holds their
 * answers in order.  A member without an answer (no memory to build one)
 * answers InternalServerError. */
static void send_batch(rt_rctx *x)
{
	static const char lost[] = "the router could not build this request's answer";
	uint8_t fallback[128];
	Shoal__Response r = SHOAL__RESPONSE__INIT;
	r.status = SHOAL__STATUS__STATUS_INTERNAL;
	r.message = (char *)lost;
	size_t fallback_len = shoal__response__pack(&r, fallback);
	uint32_t n = x->n_members;
	const uint8_t **data = sh_calloc(n, sizeof(*data));
	size_t *len = sh_calloc(n, sizeof(*len));
	nng_msg *out = NULL;
	if (data != NULL && len != NULL) {
		for (uint32_t i = 0; i < n; i++) {
			nng_msg *a = x->members[i]->answer;
			data[i] = a != NULL ? nng_msg_body(a) : fallback;
			len[i] = a != NULL ? nng_msg_len(a) : fallback_len;
		}
		out = wire_batch_answer(x->s->rt->f.resp_batch, data, len, n);
	}
	sh_free(data);
	sh_free(len);
	for (uint32_t i = 0; i < n; i++)
		rt_job_put(x->members[i]);
	sh_free(x->members);
	x->members = NULL;
	x->n_members = 0;
	send_answer(x, out);
}

static void member_finished(rt_rctx *x)
{
	if (atomic_fetch_sub(&x->pending, 1) == 1)
		send_batch(x);
}

/* A member's job is done: keep its answer for the batch's. */
static void member_done(rt_job *j)
{
	j->answer = rt_job_answer_msg(j);
	member_finished(j->done_arg);
}

/* Starts every member of the batch in msg (taken over), each as if it had
 * come alone; the last to answer sends x's answer. */
static void start_batch(rt_rctx *x, nng_msg *msg, uint32_t n, int64_t t0, int64_t deadline,
                        const rt_principal *who)
{
	rt_router *rt = x->s->rt;
	x->members = sh_calloc(n, sizeof(*x->members));
	uint32_t got = 0;
	if (x->members != NULL)
		for (; got < n; got++)
			if ((x->members[got] = rt_job_get(rt)) == NULL)
				break;
	if (got < n) {
		for (uint32_t i = 0; i < got; i++)
			rt_job_put(x->members[i]);
		sh_free(x->members);
		x->members = NULL;
		nng_msg_free(msg);
		reply_error(x, SHOAL_E_NOMEM, "the router is out of memory");
		return;
	}
	x->n_members = n;
	atomic_store(&x->pending, n + 1);
	atomic_fetch_add_explicit(&rt->metrics.client_batches, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rt->metrics.client_batched, n, memory_order_relaxed);
	const uint8_t *p = nng_msg_body(msg), *end = p + nng_msg_len(msg), *data;
	size_t len;
	wire_lanes_cork(); /* the members for one node leave together */
	for (uint32_t i = 0; i < n && wire_batch_next(&p, end, rt->f.req_batch, &data, &len); i++) {
		rt_job *j = x->members[i];
		nng_msg *one;
		if (nng_msg_alloc(&one, len) != 0) {
			j->answer = NULL;
			member_finished(x);
			continue;
		}
		memcpy(nng_msg_body(one), data, len);
		j->who = *who;
		rt_job_start(j, one, NULL, t0, deadline, member_done, x);
	}
	wire_lanes_uncork();
	nng_msg_free(msg);
	member_finished(x);
}

/* The REP context's aio callback.  nng callback thread. */
static void rctx_cb(void *arg)
{
	rt_rctx *x = arg;
	rt_server *s = x->s;
	rt_router *rt = s->rt;
	int rv = nng_aio_result(x->aio);
	switch (x->state) {
	case RC_RECV: {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			x->state = RC_DONE;
			return;
		}
		if (rv != 0) {
			rt_log("server: receive: %s", nng_strerror(rv));
			nng_ctx_recv(x->ctx, x->aio);
			return;
		}
		nng_msg *msg = nng_aio_get_msg(x->aio);
		x->pipe = nng_msg_get_pipe(msg);
		nng_aio_set_msg(x->aio, NULL);
		uint32_t cap = s->n_ctxs / RT_PIPE_SHARE;
		if (pipe_full(s, x->pipe, cap > 0 ? cap : 1)) {
			/* Its connection holds its share of the contexts. */
			if (atomic_fetch_add(&s->pipe_drops, 1) % 10000 == 0)
				rt_log(
				    "server: a client connection (pipe %d) has %u answers waiting "
				    "to be sent (it does not read them?): its next messages are "
				    "dropped",
				    nng_pipe_id(x->pipe), cap);
			nng_msg_free(msg);
			nng_aio_set_timeout(x->aio, NNG_DURATION_INFINITE);
			nng_ctx_recv(x->ctx, x->aio);
			return;
		}
		atomic_fetch_add(&s->busy, 1);
		int64_t t0 = sh_now_us();
		int64_t deadline = t0 / 1000 + rt->opt.deadline_ms;
		x->state = RC_JOB;
		uint32_t n;
		char errmsg[SH_ERRMSG_SIZE];
		/* With credentials, the message's signature first (auth.c): it
		 * is cut off the message, and its key is every job's principal. */
		rt_principal who;
		int rc = rt_auth_native(rt->creds, msg, rt_wall_ms() / 1000, &who, errmsg);
		if (rc != SHOAL_OK) {
			reply_refused(x, msg, rc, errmsg);
			return;
		}
		if (wire_batch_members(nng_msg_body(msg), nng_msg_len(msg), rt->f.req_batch,
		                       RT_CLIENT_BATCH_MAX, "a Request batch", &n,
		                       errmsg) != SHOAL_OK) {
			nng_msg_free(msg);
			reply_error(x, SHOAL_E_VALIDATION, errmsg);
			return;
		}
		if (n > 0) {
			start_batch(x, msg, n, t0, deadline, &who);
			return;
		}
		rt_job *j = rt_job_get(rt);
		if (j == NULL) {
			nng_msg_free(msg);
			reply_error(x, SHOAL_E_NOMEM, "the router is out of memory");
			return;
		}
		j->who = who;
		rt_job_start(j, msg, NULL, t0, deadline, one_done, x);
		return;
	}
	case RC_SEND:
		atomic_store(&x->sending_pipe, 0);
		atomic_fetch_sub(&s->sending, 1);
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			if (m != NULL)
				nng_msg_free(m);
			if (rv == NNG_ETIMEDOUT) {
				rt_log("server: an answer could not be sent in %d ms: closing the "
				       "client's connection (pipe %d)",
				       RT_REPLY_SEND_MS, nng_pipe_id(x->pipe));
				nng_pipe_close(x->pipe);
			}
		}
		rearm(x);
		return;
	default:
		return; /* not reached: no operation of this aio is pending then */
	}
}

/* Stops and frees every context (the socket is closed). */
static void free_ctxs(rt_server *s)
{
	for (uint32_t i = 0; i < s->n_ctxs; i++)
		if (s->ctxs[i].aio != NULL)
			nng_aio_stop(s->ctxs[i].aio);
	for (uint32_t i = 0; i < s->n_ctxs; i++) {
		rt_rctx *x = &s->ctxs[i];
		if (x->aio != NULL) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			if (m != NULL)
				nng_msg_free(m);
			nng_aio_free(x->aio);
		}
		sh_free(x->members);
	}
	sh_free(s->ctxs);
	s->ctxs = NULL;
	s->n_ctxs = 0;
}

static void guard_log(const char *msg)
{
	rt_log("server: %s", msg);
}

static void keeper_log(const char *msg)
{
	rt_log("connections: %s", msg);
}

int rt_server_start(rt_server *s, rt_router *rt, const char *url, char *errmsg)
{
	memset(s, 0, sizeof(*s));
	s->rt = rt;
	atomic_init(&s->busy, 0);
	int rc = SHOAL_E_INTERNAL;
	int rv = nng_rep0_open(&s->sock);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_rep0_open: %s", nng_strerror(rv));
	s->open = true;
	if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RT_RECVMAXSZ)) != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "RECVMAXSZ: %s", nng_strerror(rv));
		goto err_after_socket;
	}
	uint32_t n = rt->opt.contexts > 0 ? rt->opt.contexts : 1;
	s->ctxs = sh_calloc(n, sizeof(*s->ctxs));
	if (s->ctxs == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_socket;
	}
	for (uint32_t i = 0; i < n; i++) {
		rt_rctx *x = &s->ctxs[i];
		x->s = s;
		s->n_ctxs++;
		if ((rv = nng_aio_alloc(&x->aio, rctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "REP context: %s", nng_strerror(rv));
			goto err_after_socket;
		}
	}
	/* A tls+tcp:// client port presents router.pem and asks clients for
	 * no certificate (they sign their requests). */
	if (sh_tls_is_tls(url) && rt->tls == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "listen %s: a TLS client port needs [tls] in the cluster file", url);
		goto err_after_socket;
	}
	sh_dial_keeper_log(keeper_log);
	if ((rc = sh_listen_guard_start(
	         &s->listener, s->sock, url, rt->tls != NULL ? rt->tls->public_server : NULL,
	         rt->tls != NULL ? rt->tls->probe : NULL, guard_log, errmsg)) != SHOAL_OK)
		goto err_after_socket;
	for (uint32_t i = 0; i < n; i++) {
		s->ctxs[i].state = RC_RECV;
		nng_ctx_recv(s->ctxs[i].ctx, s->ctxs[i].aio);
	}
	return SHOAL_OK;

err_after_socket:
	nng_close(s->sock);
	s->open = false;
	free_ctxs(s);
	return rc;
}

void rt_server_stop(rt_server *s, uint32_t drain_ms)
{
	if (!s->open)
		return;
	sh_listen_guard_close(s->listener);
	s->listener = NULL;
	int64_t until = sh_now_ms() + drain_ms;
	while (atomic_load(&s->busy) > 0 && sh_now_ms() < until)
		nng_msleep(10);
	if (atomic_load(&s->busy) > 0) {
		rt_log("server: %u requests still in progress at close", atomic_load(&s->busy));
		/* Their calls fail at once now; their answers find the socket
		 * closed.  They must be over before the contexts are freed. */
		rt_router_close(s->rt);
	}
	nng_close(s->sock);
	s->open = false;
	until = sh_now_ms() + 10000;
	while (atomic_load(&s->busy) > 0 && sh_now_ms() < until)
		nng_msleep(5);
	if (atomic_load(&s->busy) > 0) {
		rt_log("server: %u requests never ended; their contexts are left allocated",
		       atomic_load(&s->busy));
		return;
	}
	free_ctxs(s);
}
