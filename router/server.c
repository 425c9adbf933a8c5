/*
 * server.c -- the client endpoint: one nng REP socket, C contexts driven by
 * aio callbacks, and W worker threads for the requests that need to block.
 *
 * Every REP context (rt_rctx) runs this state machine in its aio callback
 * (rctx_cb), as node/server.c does on the node side:
 *
 *   state      event                                     next       where
 *   ---------  ----------------------------------------  ---------  -----------
 *   RC_RECV    request received, taken by the fast path  RC_NODE    rt_fast_start
 *   RC_RECV    request received, not for the fast path   RC_WORKER  defer
 *   RC_RECV    socket closed (ECLOSED / ECANCELED)       RC_DONE
 *   RC_NODE    the node answered plainly                 RC_SEND    rt_server_reply
 *   RC_NODE    anything else (retry, repair, timeout)    RC_WORKER  rt_server_defer
 *   RC_WORKER  a worker ran rt_handle_at                 RC_SEND    worker
 *   RC_SEND    reply sent (or failed)                    RC_RECV    rearm
 *
 * The fast path (fast.c) decodes and routes in the receive callback, sends
 * one NodeRequest on a pooled node context and, in that aio's callback,
 * sends the node's Response on as the answer: no thread of ours is woken.
 * The workers take deferred requests from a FIFO queue and run them through
 * the blocking front door (rt_handle_at) exactly as before, with the
 * request's own start time and deadline: retries, backoff, catalog refresh,
 * repair and every operation other than the single-item ones.  A context
 * whose request waits in the queue or on a worker stays busy; C contexts
 * bound the requests in progress, W workers the blocking ones among them.
 *
 * Records and client batches.  A request that did not arrive on a REP
 * context runs in a record from a pool (rt_server_record): an rt_rctx
 * without a REP context whose answer goes to its `done` callback where a
 * REP context's would be sent (send_reply).  The HTTP endpoint runs its
 * requests so (http.c), and so do the members of a client's batch: a
 * Request whose only field is `batch` carries many packed Requests
 * (libshoal sends them when it has many asynchronous requests in flight);
 * each member runs exactly as a lone request would -- the fast path, or a
 * worker -- and keeps its answer, and the last member to answer (an atomic
 * count, +1 while they are started) sends one Response holding every answer
 * in order on the context that received the batch.
 *
 * The arena of a context holds the decoded request (fast path) or
 * everything rt_handle_at allocates (worker); it is reset when the context
 * goes back to RC_RECV (freed instead if it grew past RT_ARENA_KEEP).
 *
 * Stopping (rt_server_stop, main thread): the listener closes (no new
 * connections), requests in progress finish (bounded by the drain time),
 * the workers are told to quit, closing the socket fails every pending
 * receive with NNG_ECLOSED (RC_DONE), the workers are joined, and every aio
 * is stopped (nng_aio_stop waits for a running callback; later operations
 * on a stopped aio are refused without a callback) before anything is
 * freed.
 */
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

#include <nng/protocol/reqrep0/rep.h>

#define RT_RECVMAXSZ (16u * 1024 * 1024)
/* An arena that grew past this is freed instead of kept for the next request. */
#define RT_ARENA_KEEP (4u * 1024 * 1024)

enum rctx_state { RC_RECV = 0, RC_NODE, RC_WORKER, RC_SEND, RC_DONE };

/* The request is answered (or dropped): receive the next one (-> RC_RECV). */
static void rearm(rt_rctx *x)
{
	rt_server *s = x->s;
	if (x->arena.used > RT_ARENA_KEEP) {
		sh_arena_fini(&x->arena);
		sh_arena_init(&x->arena);
	} else {
		sh_arena_reset(&x->arena);
	}
	nng_aio_set_msg(x->aio, NULL);
	x->state = RC_RECV;
	atomic_fetch_sub(&s->busy, 1);
	nng_ctx_recv(x->ctx, x->aio);
}

static void member_answer(rt_rctx *x, nng_msg *answer);

/* Sends `reply` (taken over) on x's context (-> RC_SEND), or for a member of
 * a batch keeps it as the member's answer.  x must not be touched after
 * this: its callback may already run. */
static void send_reply(rt_rctx *x, nng_msg *reply)
{
	if (x->done != NULL) {
		x->done(x, reply);
		return;
	}
	x->state = RC_SEND;
	nng_aio_set_msg(x->aio, reply);
	nng_ctx_send(x->ctx, x->aio);
}

/* Answers x (a REP context) with a Response carrying only an error. */
static void reply_error(rt_rctx *x, int code, const char *text)
{
	Shoal__Response r = SHOAL__RESPONSE__INIT;
	nng_msg *m;
	sh_arena_reset(&x->arena);
	if (wire_response_set_error(&x->arena, &r, code, text, NULL, NULL) != SHOAL_OK)
		r.status = wire_status_from_code(code);
	size_t n = shoal__response__get_packed_size(&r);
	if (nng_msg_alloc(&m, n) != 0) {
		rt_log("server: no memory to answer a request; dropped");
		rearm(x);
		return;
	}
	shoal__response__pack(&r, nng_msg_body(m));
	send_reply(x, m);
}

/* ------------------------------------------------------------------------ */
/* Client batches                                                            */
/* ------------------------------------------------------------------------ */

rt_rctx *rt_server_record(rt_server *s)
{
	pthread_mutex_lock(&s->pool_mu);
	rt_rctx *m = s->pool;
	if (m != NULL)
		s->pool = m->pool_next;
	pthread_mutex_unlock(&s->pool_mu);
	if (m != NULL)
		return m;
	m = sh_calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->s = s;
	sh_arena_init(&m->arena);
	pthread_mutex_lock(&s->pool_mu);
	m->all_next = s->all;
	s->all = m;
	pthread_mutex_unlock(&s->pool_mu);
	return m;
}

void rt_server_record_free(rt_server *s, rt_rctx *m)
{
	if (m->answer != NULL)
		nng_msg_free(m->answer);
	if (m->msg != NULL)
		nng_msg_free(m->msg);
	m->answer = m->msg = NULL;
	m->done = NULL;
	m->done_arg = NULL;
	if (m->arena.used > RT_MEMBER_ARENA_KEEP) {
		sh_arena_fini(&m->arena);
		sh_arena_init(&m->arena);
	} else {
		sh_arena_reset(&m->arena);
	}
	pthread_mutex_lock(&s->pool_mu);
	m->pool_next = s->pool;
	s->pool = m;
	pthread_mutex_unlock(&s->pool_mu);
}

/* Every member of x's batch answered: one Response whose batch (field 50)
 * holds their answers in order, sent on x.  A member without an answer (no
 * memory to build one) answers InternalServerError. */
static void send_batch(rt_rctx *x)
{
	static const char lost[] = "the router could not build this request's answer";
	uint8_t fallback[128];
	Shoal__Response r = SHOAL__RESPONSE__INIT;
	r.status = SHOAL__STATUS__STATUS_INTERNAL;
	r.message = (char *)lost;
	size_t fallback_len = shoal__response__pack(&r, fallback);

	size_t size = 0;
	for (uint32_t i = 0; i < x->n_members; i++) {
		const rt_rctx *m = x->members[i];
		size_t n = m->answer != NULL ? nng_msg_len(m->answer) : fallback_len;
		size += 2 + wire_varint_len(n) + n;
	}
	nng_msg *out = NULL;
	if (nng_msg_alloc(&out, size) == 0) {
		uint8_t *p = nng_msg_body(out);
		for (uint32_t i = 0; i < x->n_members; i++) {
			const rt_rctx *m = x->members[i];
			const uint8_t *b = m->answer != NULL ? nng_msg_body(m->answer) : fallback;
			size_t n = m->answer != NULL ? nng_msg_len(m->answer) : fallback_len;
			p += wire_put_varint(p, 50 << 3 | 2);
			p += wire_put_varint(p, n);
			memcpy(p, b, n);
			p += n;
		}
	} else {
		out = NULL;
	}
	for (uint32_t i = 0; i < x->n_members; i++)
		rt_server_record_free(x->s, x->members[i]);
	sh_free(x->members);
	x->members = NULL;
	x->n_members = 0;
	if (out == NULL) {
		rt_log("server: no memory to answer a batch; dropped");
		rearm(x);
		return;
	}
	send_reply(x, out);
}

/* One member of x's batch is done (or, once, the starting of them all). */
static void member_answer_done(rt_rctx *x)
{
	if (atomic_fetch_sub(&x->pending, 1) == 1)
		send_batch(x);
}

/* Member x has its answer (NULL: none could be built). */
static void member_answer(rt_rctx *x, nng_msg *answer)
{
	x->answer = answer;
	member_answer_done(x->done_arg);
}

void rt_server_run(rt_rctx *x)
{
	x->state = RC_NODE;
	if (x->s->rt->opt.fast_path && rt_fast_start(x))
		return;
	rt_server_defer(x);
}

/* Whether x's message is a Request batch (field 50 only), with the number
 * of its members in *n (0: a plain Request); false when it mixes a batch
 * with anything else or is too large (x has been answered then). */
static bool batch_size(rt_rctx *x, uint32_t *n)
{
	const uint8_t *p = nng_msg_body(x->msg), *end = p + nng_msg_len(x->msg);
	wire_field f;
	uint32_t members = 0, others = 0;
	*n = 0;
	while (p < end) {
		if (!wire_next_field(&p, end, &f))
			return true; /* the front door says what is wrong with it */
		if (f.number == 50 && f.type == 2)
			members++;
		else
			others++;
	}
	char msg[SH_ERRMSG_SIZE];
	if (members > 0 && others > 0)
		snprintf(msg, sizeof(msg), "a Request batch carries nothing but its requests");
	else if (members > RT_CLIENT_BATCH_MAX)
		snprintf(msg, sizeof(msg), "a Request batch of %u requests (at most %u)", members,
		         RT_CLIENT_BATCH_MAX);
	else {
		*n = members;
		return true;
	}
	nng_msg_free(x->msg);
	x->msg = NULL;
	reply_error(x, SHOAL_E_VALIDATION, msg);
	return false;
}

/* Starts every member of the batch in x->msg, each as if it had come alone
 * (fast path or worker); the last to answer sends x's answer. */
static void start_batch(rt_rctx *x, uint32_t n)
{
	rt_server *s = x->s;
	rt_router *rt = s->rt;
	x->members = sh_calloc(n, sizeof(*x->members));
	uint32_t got = 0;
	if (x->members != NULL)
		for (; got < n; got++)
			if ((x->members[got] = rt_server_record(s)) == NULL)
				break;
	if (got < n) {
		for (uint32_t i = 0; i < got; i++)
			rt_server_record_free(s, x->members[i]);
		sh_free(x->members);
		x->members = NULL;
		nng_msg_free(x->msg);
		x->msg = NULL;
		reply_error(x, SHOAL_E_NOMEM, "the router is out of memory");
		return;
	}
	x->n_members = n;
	atomic_store(&x->pending, n + 1);
	atomic_fetch_add_explicit(&rt->metrics.client_batches, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rt->metrics.client_batched, n, memory_order_relaxed);
	const uint8_t *p = nng_msg_body(x->msg), *end = p + nng_msg_len(x->msg);
	wire_field f;
	rt_fast_cork(); /* the members for one node leave together */
	for (uint32_t i = 0; i < n && wire_next_field(&p, end, &f); i++) {
		rt_rctx *m = x->members[i];
		m->done = member_answer;
		m->done_arg = x;
		m->t0_us = x->t0_us;
		m->deadline = x->deadline;
		m->answer = NULL;
		if (nng_msg_alloc(&m->msg, f.len) != 0) {
			m->msg = NULL;
			member_answer(m, NULL);
			continue;
		}
		memcpy(nng_msg_body(m->msg), f.data, f.len);
		rt_server_run(m);
	}
	rt_fast_uncork();
	nng_msg_free(x->msg);
	x->msg = NULL;
	member_answer_done(x);
}

void rt_server_reply(rt_rctx *x, nng_msg *reply)
{
	if (x->msg != NULL) {
		nng_msg_free(x->msg);
		x->msg = NULL;
	}
	send_reply(x, reply);
}

void rt_server_defer(rt_rctx *x)
{
	rt_server *s = x->s;
	x->state = RC_WORKER;
	x->next = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->tail != NULL)
		s->tail->next = x;
	else
		s->head = x;
	s->tail = x;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Runs a deferred request through the front door and sends its answer.
 * Worker thread. */
static void handle_blocking(rt_rctx *x)
{
	rt_server *s = x->s;
	nng_msg *m = x->msg;
	x->msg = NULL;
	sh_arena_reset(&x->arena);
	uint8_t *ans;
	size_t ans_len;
	int rc = rt_handle_at(s->rt, &x->arena, nng_msg_body(m), nng_msg_len(m), x->t0_us,
	                      x->deadline, &ans, &ans_len);
	if (rc == SHOAL_OK) {
		nng_msg_clear(m);
		rc = nng_msg_append(m, ans, ans_len) == 0 ? SHOAL_OK : SHOAL_E_NOMEM;
	}
	if (rc != SHOAL_OK) {
		rt_log("worker: no memory to answer a request; dropped");
		nng_msg_free(m);
		if (x->done != NULL)
			x->done(x, NULL);
		else
			rearm(x);
		return;
	}
	send_reply(x, m);
}

static void *worker(void *arg)
{
	rt_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (s->head == NULL && !s->quit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->quit) {
			pthread_mutex_unlock(&s->mu);
			return NULL;
		}
		rt_rctx *x = s->head;
		s->head = x->next;
		if (s->head == NULL)
			s->tail = NULL;
		pthread_mutex_unlock(&s->mu);
		handle_blocking(x);
	}
}

/* The REP context's aio callback.  nng callback thread. */
static void rctx_cb(void *arg)
{
	rt_rctx *x = arg;
	rt_server *s = x->s;
	int rv = nng_aio_result(x->aio);

	switch (x->state) {
	case RC_RECV:
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			x->state = RC_DONE;
			return;
		}
		if (rv != 0) {
			rt_log("server: receive: %s", nng_strerror(rv));
			nng_ctx_recv(x->ctx, x->aio);
			return;
		}
		x->msg = nng_aio_get_msg(x->aio);
		nng_aio_set_msg(x->aio, NULL);
		atomic_fetch_add(&s->busy, 1);
		x->t0_us = rt_now_us();
		x->deadline = x->t0_us / 1000 + s->rt->opt.deadline_ms;
		x->state = RC_NODE;
		uint32_t n;
		if (!batch_size(x, &n))
			return; /* answered */
		if (n > 0) {
			start_batch(x, n);
			return;
		}
		if (s->rt->opt.fast_path && rt_fast_start(x))
			return;
		rt_server_defer(x);
		return;
	case RC_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			if (m != NULL)
				nng_msg_free(m);
		}
		rearm(x);
		return;
	default:
		return; /* not reached: no operation of this aio is pending then */
	}
}

/* Stops and frees everything; the socket must be closed and the workers
 * joined. */
static void free_ctxs(rt_server *s)
{
	rt_fast_close(s);
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
		if (x->msg != NULL)
			nng_msg_free(x->msg);
		sh_free(x->members);
		sh_arena_fini(&x->arena);
	}
	for (rt_rctx *m = s->all, *next; m != NULL; m = next) {
		next = m->all_next;
		if (m->msg != NULL)
			nng_msg_free(m->msg);
		if (m->answer != NULL)
			nng_msg_free(m->answer);
		sh_arena_fini(&m->arena);
		sh_free(m);
	}
	s->all = s->pool = NULL;
	sh_free(s->ctxs);
	s->ctxs = NULL;
	s->n_ctxs = 0;
	s->head = s->tail = NULL;
}

static void join_workers(rt_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->quit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (uint32_t i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	sh_free(s->threads);
	s->threads = NULL;
	s->n_threads = 0;
}

int rt_server_start(rt_server *s, rt_router *rt, const char *url, char *errmsg)
{
	memset(s, 0, sizeof(*s));
	s->rt = rt;
	atomic_init(&s->busy, 0);
	int rc = SHOAL_E_INTERNAL;
	if (pthread_mutex_init(&s->mu, NULL) != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the worker queue");
	if (pthread_cond_init(&s->cv, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the worker queue");
	}
	if (pthread_mutex_init(&s->pool_mu, NULL) != 0) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the member pool");
	}
	int rv = nng_rep0_open(&s->sock);
	if (rv != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_rep0_open: %s", nng_strerror(rv));
		goto err_after_queue;
	}
	s->open = true;
	if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RT_RECVMAXSZ)) != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "RECVMAXSZ: %s", nng_strerror(rv));
		goto err_after_socket;
	}
	uint32_t n = rt->opt.contexts > 0 ? rt->opt.contexts : 1;
	s->ctxs = sh_calloc(n, sizeof(*s->ctxs));
	s->threads = sh_calloc(rt->opt.workers, sizeof(*s->threads));
	if (s->ctxs == NULL || s->threads == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_socket;
	}
	for (uint32_t i = 0; i < n; i++) {
		rt_rctx *x = &s->ctxs[i];
		x->s = s;
		sh_arena_init(&x->arena);
		s->n_ctxs++;
		if ((rv = nng_aio_alloc(&x->aio, rctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "REP context: %s", nng_strerror(rv));
			goto err_after_socket;
		}
	}
	if (rt->opt.fast_path && (rc = rt_fast_open(s, errmsg)) != SHOAL_OK)
		goto err_after_socket;
	for (uint32_t i = 0; i < rt->opt.workers; i++) {
		if (pthread_create(&s->threads[i], NULL, worker, s) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot start worker thread %u", i);
			goto err_after_socket;
		}
		s->n_threads++;
	}
	if ((rv = nng_listen(s->sock, url, &s->listener, 0)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "listen %s: %s", url, nng_strerror(rv));
		goto err_after_socket;
	}
	for (uint32_t i = 0; i < n; i++) {
		s->ctxs[i].state = RC_RECV;
		nng_ctx_recv(s->ctxs[i].ctx, s->ctxs[i].aio);
	}
	return SHOAL_OK;

err_after_socket:
	nng_close(s->sock);
	s->open = false;
	join_workers(s);
	free_ctxs(s);
err_after_queue:
	pthread_mutex_destroy(&s->pool_mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	return rc;
}

void rt_server_stop(rt_server *s, uint32_t drain_ms)
{
	if (!s->open)
		return;
	nng_listener_close(s->listener);
	int64_t until = rt_now_ms() + drain_ms;
	while (atomic_load(&s->busy) > 0 && rt_now_ms() < until)
		nng_msleep(10);
	if (atomic_load(&s->busy) > 0)
		rt_log("server: %u requests still in progress at close", atomic_load(&s->busy));
	/* Workers finish the request in hand (its answer then fails to send)
	 * and leave the rest of the queue. */
	pthread_mutex_lock(&s->mu);
	s->quit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	nng_close(s->sock);
	s->open = false;
	join_workers(s);
	free_ctxs(s);
	pthread_mutex_destroy(&s->pool_mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}
