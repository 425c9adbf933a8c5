/*
 * lanes.c -- the batching transport (contract and state machine: lanes.h).
 *
 * A lane owns its channel and the items of the message in flight; the
 * destination's mutex guards only the queue, the idle stack and `closing`,
 * and is never held while a message is built, sent or answered.  Items are
 * done (their callbacks run) with no lock held, so a callback may submit
 * again, to these lanes or others.
 */
#include <stdatomic.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/tls.h"
#include "proto/lanes.h"
#include "proto/wire.h"

#include <nng/protocol/reqrep0/req.h>

struct wire_lane {
	wire_lanes *owner;
	void *chan;
	wire_lane_item *head; /* the message's items, in order */
	uint32_t n;
};

const char *wire_lane_rv_name(int rv)
{
	static const char *const names[] = {
	    [WIRE_LANE_OK] = "ok",
	    [WIRE_LANE_UNREACHABLE] = "unreachable",
	    [WIRE_LANE_TIMEOUT] = "timeout",
	    [WIRE_LANE_RESET] = "connection lost",
	    [WIRE_LANE_BAD] = "bad answer",
	    [WIRE_LANE_CLOSED] = "closed",
	    [WIRE_LANE_NOMEM] = "out of memory",
	};
	return rv >= 0 && (size_t)rv < sizeof(names) / sizeof(names[0]) ? names[rv] : "unknown";
}

/* ------------------------------------------------------------------------ */
/* Corks (per thread)                                                        */
/* ------------------------------------------------------------------------ */

#define CORK_MAX 32
static __thread int cork_depth;
static __thread wire_lanes *corked[CORK_MAX];
static __thread int n_corked;

void wire_lanes_cork(void)
{
	cork_depth++;
}

static void kick(wire_lanes *l);

void wire_lanes_uncork(void)
{
	if (--cork_depth > 0)
		return;
	int n = n_corked;
	n_corked = 0;
	for (int i = 0; i < n; i++)
		kick(corked[i]);
}

void wire_lanes_flush(void)
{
	int n = n_corked;
	n_corked = 0;
	for (int i = 0; i < n; i++)
		kick(corked[i]);
}

/* Whether this thread holds l's sends back (and remembers l for the
 * uncork).  A thread corking more destinations than it can remember lets
 * the extra ones go at once. */
static bool held(wire_lanes *l)
{
	if (cork_depth == 0)
		return false;
	for (int i = 0; i < n_corked; i++)
		if (corked[i] == l)
			return true;
	if (n_corked == CORK_MAX)
		return false;
	corked[n_corked++] = l;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Lanes                                                                     */
/* ------------------------------------------------------------------------ */

static size_t item_len(const wire_lane_item *it)
{
	return it->len[0] + it->len[1];
}

/* Takes the next message's worth of items off l's queue into lane (mu
 * held, queue not empty). */
static void take(wire_lanes *l, wire_lane *lane)
{
	wire_lane_item *head = l->head, *last = head;
	uint32_t n = 1;
	size_t bytes = item_len(head);
	uint32_t max = l->conf.req_field != 0 ? l->conf.max_items : 1;
	for (wire_lane_item *it = head->next;
	     it != NULL && n < max && bytes + item_len(it) <= l->conf.max_bytes; it = it->next) {
		bytes += item_len(it);
		n++;
		last = it;
	}
	l->head = last->next;
	if (l->head == NULL)
		l->tail = NULL;
	last->next = NULL;
	lane->head = head;
	lane->n = n;
}

/* Each item of the lane's message is done with rv. */
/* Items it..: their exchange failed with rv. */
static void items_fail(wire_lane_item *it, int rv)
{
	while (it != NULL) {
		wire_lane_item *next = it->next;
		it->done(it, rv, NULL, NULL, 0);
		it = next;
	}
}

static void lane_send(wire_lane *lane);

/* The lane's message is over: send the next one, or go idle. */
static void lane_next(wire_lane *lane)
{
	wire_lanes *l = lane->owner;
	pthread_mutex_lock(&l->mu);
	if (l->head != NULL && !l->closing) {
		take(l, lane);
		pthread_mutex_unlock(&l->mu);
		lane_send(lane);
		return;
	}
	l->idle[l->n_idle++] = lane;
	pthread_mutex_unlock(&l->mu);
}

static nng_msg *lane_message(const wire_lane *lane, uint32_t field)
{
	size_t size = 0;
	for (const wire_lane_item *it = lane->head; it != NULL; it = it->next) {
		size_t n = item_len(it);
		size += lane->n == 1
		            ? n
		            : wire_varint_len((uint64_t)field << 3 | 2) + wire_varint_len(n) + n;
	}
	nng_msg *m;
	if (nng_msg_alloc(&m, size) != 0)
		return NULL;
	uint8_t *p = nng_msg_body(m);
	for (const wire_lane_item *it = lane->head; it != NULL; it = it->next) {
		if (lane->n > 1) {
			p += wire_put_varint(p, (uint64_t)field << 3 | 2);
			p += wire_put_varint(p, item_len(it));
		}
		for (int k = 0; k < 2; k++)
			if (it->len[k] > 0) {
				memcpy(p, it->part[k], it->len[k]);
				p += it->len[k];
			}
	}
	return m;
}

/* Sends the lane's items (IDLE -> BUSY). */
static void lane_send(wire_lane *lane)
{
	wire_lanes *l = lane->owner;
	nng_msg *m = lane_message(lane, l->conf.req_field);
	if (m == NULL) {
		wire_lane_item *it = lane->head;
		lane->head = NULL;
		lane->n = 0;
		lane_next(lane);
		items_fail(it, WIRE_LANE_NOMEM);
		return;
	}
	int64_t answer_by = lane->head->deadline;
	for (const wire_lane_item *it = lane->head->next; it != NULL; it = it->next)
		if (it->deadline < answer_by)
			answer_by = it->deadline;
	int64_t send_by = sh_now_ms() + l->conf.send_ms;
	if (send_by > answer_by)
		send_by = answer_by;
	atomic_fetch_add_explicit(&l->messages, 1, memory_order_relaxed);
	if (lane->n > 1) {
		atomic_fetch_add_explicit(&l->batches, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&l->batched, lane->n, memory_order_relaxed);
	}
	l->conf.io->send(lane->chan, m, send_by, answer_by);
}

/* The answer (taken over) to the lane's message: each item gets its own. */
/* Items it.. (n of them, in message order) get their answers out of
 * reply. */
static void items_deliver(wire_lane_item *it, uint32_t n, nng_msg *reply, uint32_t field)
{
	if (n == 1) {
		it->done(it, WIRE_LANE_OK, reply, nng_msg_body(reply), nng_msg_len(reply));
		return;
	}
	const uint8_t *p = nng_msg_body(reply), *end = p + nng_msg_len(reply), *data;
	size_t len;
	while (it != NULL && wire_batch_next(&p, end, field, &data, &len)) {
		wire_lane_item *next = it->next;
		it->done(it, WIRE_LANE_OK, NULL, data, len);
		it = next;
	}
	items_fail(it, WIRE_LANE_BAD); /* the answer held fewer answers than items */
	nng_msg_free(reply);
}

bool wire_stall_note(wire_stall *s, int rv, uint32_t stall_ms)
{
	if (rv == WIRE_LANE_OK) {
		if (atomic_load_explicit(&s->since, memory_order_relaxed) != 0)
			atomic_store_explicit(&s->since, 0, memory_order_relaxed);
		return false;
	}
	if (rv != WIRE_LANE_TIMEOUT && rv != WIRE_LANE_UNREACHABLE)
		return false; /* a reset or a close: the connection ended by itself */
	int64_t now = sh_now_ms(), since = 0;
	if (atomic_compare_exchange_strong(&s->since, &since, now) ||
	    now - since < (int64_t)stall_ms)
		return false;
	int64_t last = atomic_load(&s->renewed_at);
	if ((last != 0 && now - last < (int64_t)stall_ms) ||
	    !atomic_compare_exchange_strong(&s->renewed_at, &last, now))
		return false;
	atomic_fetch_add_explicit(&s->renewals, 1, memory_order_relaxed);
	return true;
}

/* The channel's callback: the lane's exchange ended.  The lane takes its
 * next message first, then the finished items get their answers: the
 * destination is not left without this lane's message while the answers
 * are handled (converted, written to clients). */
static void lane_cb(void *arg, int rv, nng_msg *reply)
{
	wire_lane *lane = arg;
	wire_lane_item *it = lane->head;
	uint32_t n = lane->n;
	uint32_t field = lane->owner->conf.resp_field;
	lane->head = NULL;
	lane->n = 0;
	wire_lanes *l = lane->owner;
	if (wire_stall_note(&l->stall, rv, l->conf.stall_ms) && l->conf.io->renew != NULL)
		l->conf.io->renew(l->conf.io->impl);
	lane_next(lane);
	if (rv == WIRE_LANE_OK)
		items_deliver(it, n, reply, field);
	else
		items_fail(it, rv);
}

/* Starts idle lanes of l on what is queued. */
static void kick(wire_lanes *l)
{
	for (;;) {
		wire_lane *lane = NULL;
		pthread_mutex_lock(&l->mu);
		if (l->n_idle > 0 && l->head != NULL && !l->closing) {
			lane = l->idle[--l->n_idle];
			take(l, lane);
		}
		pthread_mutex_unlock(&l->mu);
		if (lane == NULL)
			return;
		lane_send(lane);
	}
}

int wire_lanes_submit(wire_lanes *l, wire_lane_item *it)
{
	bool hold = held(l);
	wire_lane *lane = NULL;
	it->next = NULL;
	pthread_mutex_lock(&l->mu);
	if (l->closing) {
		pthread_mutex_unlock(&l->mu);
		return SHOAL_E_UNAVAILABLE;
	}
	if (l->tail != NULL)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	if (!hold && l->n_idle > 0) {
		lane = l->idle[--l->n_idle];
		take(l, lane);
	}
	pthread_mutex_unlock(&l->mu);
	if (lane != NULL)
		lane_send(lane);
	return SHOAL_OK;
}

int wire_lanes_init(wire_lanes *l, const wire_lanes_conf *conf, char *errmsg)
{
	memset(l, 0, sizeof(*l));
	l->conf = *conf;
	if (l->conf.n_lanes == 0)
		l->conf.n_lanes = 1;
	if (l->conf.max_items == 0 || l->conf.req_field == 0 || l->conf.resp_field == 0)
		l->conf.max_items = 1;
	if (l->conf.stall_ms == 0)
		l->conf.stall_ms = WIRE_LANE_STALL_MS;
	if (pthread_mutex_init(&l->mu, NULL) != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "lanes: cannot initialise a mutex");
	l->mu_init = true;
	l->lanes = sh_calloc(l->conf.n_lanes, sizeof(*l->lanes));
	l->idle = sh_calloc(l->conf.n_lanes, sizeof(*l->idle));
	if (l->lanes == NULL || l->idle == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "lanes: out of memory");
	for (uint32_t i = 0; i < l->conf.n_lanes; i++) {
		wire_lane *lane = &l->lanes[i];
		lane->owner = l;
		int rc = l->conf.io->open(l->conf.io->impl, lane_cb, lane, &lane->chan);
		if (rc != SHOAL_OK)
			return sh_errf(errmsg, rc, "lanes: cannot open a channel");
		l->n_lanes++;
		l->idle[l->n_idle++] = lane;
	}
	return SHOAL_OK;
}

void wire_lanes_close(wire_lanes *l)
{
	if (!l->mu_init)
		return;
	pthread_mutex_lock(&l->mu);
	l->closing = true;
	wire_lane_item *it = l->head;
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->mu);
	while (it != NULL) {
		wire_lane_item *next = it->next;
		it->done(it, WIRE_LANE_CLOSED, NULL, NULL, 0);
		it = next;
	}
	for (uint32_t i = 0; i < l->n_lanes; i++)
		l->conf.io->stop(l->lanes[i].chan);
}

void wire_lanes_fini(wire_lanes *l)
{
	for (uint32_t i = 0; i < l->n_lanes; i++)
		l->conf.io->free(l->lanes[i].chan);
	sh_free(l->lanes);
	sh_free(l->idle);
	l->lanes = NULL;
	l->idle = NULL;
	l->n_lanes = l->n_idle = 0;
	if (l->mu_init)
		pthread_mutex_destroy(&l->mu);
	l->mu_init = false;
}

/* ------------------------------------------------------------------------ */
/* The nng I/O: one REQ context and aio per channel                          */
/* ------------------------------------------------------------------------ */

/*
 *   state  event                         next   result
 *   -----  ----------------------------  -----  ------------------------------
 *   SEND   handed to a pipe              RECV   (recv posted only now: nng
 *                                               1.5.2's req needs the send done)
 *   SEND   failed / timed out            IDLE   UNREACHABLE (CLOSED if closed)
 *   RECV   answer                        IDLE   OK
 *   RECV   timed out / reset / closed    IDLE   TIMEOUT / RESET / CLOSED
 *   FAIL   (a context could not open)    IDLE   UNREACHABLE, from a 0 ms sleep
 *                                               so that cb never runs in send
 * A failed exchange closes the context; the next send opens a new one.
 *
 * Stopping (wire_lanes_close) cancels the exchange in flight and marks the
 * channel stopping: its callback ends the exchange CLOSED instead of posting
 * the receive, and a send that comes after (a lane taken just before the
 * close) ends CLOSED through a 0 ms sleep.  Not nng_aio_stop: in nng 1.5.2
 * an operation started on a stopped aio returns without ever calling back,
 * so the lane's items -- a router's calls -- would never end (test_pipeline
 * saw a stop wait 10 s for them, or free them under a late answer).
 */
enum chan_state { CH_IDLE = 0, CH_SEND, CH_RECV, CH_FAIL };

typedef struct nng_chan {
	nng_socket *sock;
	nng_ctx ctx;
	bool ctx_open;
	nng_aio *aio;
	int state;
	int64_t answer_by;
	wire_lane_io_cb cb;
	void *arg;
	atomic_bool stopping; /* chan_stop: no new exchange */
} nng_chan;

static void chan_end(nng_chan *c, int rv, nng_msg *reply)
{
	if (rv != WIRE_LANE_OK && c->ctx_open) {
		nng_ctx_close(c->ctx);
		c->ctx_open = false;
	}
	c->state = CH_IDLE;
	c->cb(c->arg, rv, reply);
}

static void chan_aio_cb(void *arg)
{
	nng_chan *c = arg;
	int rv = nng_aio_result(c->aio);
	switch (c->state) {
	case CH_SEND:
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(c->aio);
			nng_aio_set_msg(c->aio, NULL);
			if (m != NULL)
				nng_msg_free(m);
			chan_end(c,
			         rv == NNG_ECLOSED || rv == NNG_ECANCELED ? WIRE_LANE_CLOSED
			                                                  : WIRE_LANE_UNREACHABLE,
			         NULL);
			return;
		}
		if (atomic_load(&c->stopping)) {
			chan_end(c, WIRE_LANE_CLOSED, NULL);
			return;
		}
		c->state = CH_RECV;
		int64_t left = c->answer_by - sh_now_ms();
		nng_aio_set_timeout(c->aio, (nng_duration)(left > 1 ? left : 1));
		nng_ctx_recv(c->ctx, c->aio);
		return;
	case CH_RECV:
		if (rv != 0) {
			chan_end(c,
			         rv == NNG_ETIMEDOUT                        ? WIRE_LANE_TIMEOUT
			         : rv == NNG_ECLOSED || rv == NNG_ECANCELED ? WIRE_LANE_CLOSED
			                                                    : WIRE_LANE_RESET,
			         NULL);
			return;
		}
		nng_msg *m = nng_aio_get_msg(c->aio);
		nng_aio_set_msg(c->aio, NULL);
		chan_end(c, WIRE_LANE_OK, m);
		return;
	case CH_FAIL:
		chan_end(c,
		         atomic_load(&c->stopping) || rv == NNG_ECLOSED || rv == NNG_ECANCELED
		             ? WIRE_LANE_CLOSED
		             : WIRE_LANE_UNREACHABLE,
		         NULL);
		return;
	default:
		return; /* not reached: nothing pending */
	}
}

static int chan_open(void *impl, wire_lane_io_cb cb, void *arg, void **out)
{
	nng_chan *c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return SHOAL_E_NOMEM;
	c->sock = impl;
	c->cb = cb;
	c->arg = arg;
	if (nng_aio_alloc(&c->aio, chan_aio_cb, c) != 0) {
		sh_free(c);
		return SHOAL_E_NOMEM;
	}
	*out = c;
	return SHOAL_OK;
}

static void chan_send(void *chan, nng_msg *msg, int64_t send_by, int64_t answer_by)
{
	nng_chan *c = chan;
	c->answer_by = answer_by;
	if (!c->ctx_open && nng_ctx_open(&c->ctx, *c->sock) == 0)
		c->ctx_open = true;
	if (!c->ctx_open || atomic_load(&c->stopping) || sh_fault_check(SH_FAULT_SEND)) {
		nng_msg_free(msg);
		c->state = CH_FAIL;
		nng_sleep_aio(0, c->aio);
		return;
	}
	int64_t left = send_by - sh_now_ms();
	c->state = CH_SEND;
	nng_aio_set_msg(c->aio, msg);
	nng_aio_set_timeout(c->aio, (nng_duration)(left > 1 ? left : 1));
	nng_ctx_send(c->ctx, c->aio);
}

static void chan_stop(void *chan)
{
	nng_chan *c = chan;
	atomic_store(&c->stopping, true);
	nng_aio_cancel(c->aio);
	nng_aio_wait(c->aio);
}

static void chan_free(void *chan)
{
	nng_chan *c = chan;
	if (c == NULL)
		return;
	nng_aio_stop(c->aio);
	nng_msg *m = nng_aio_get_msg(c->aio);
	if (m != NULL)
		nng_msg_free(m);
	nng_aio_free(c->aio);
	if (c->ctx_open)
		nng_ctx_close(c->ctx);
	sh_free(c);
}

static void chan_renew(void *impl)
{
	sh_dial_renew(*(nng_socket *)impl);
}

void wire_lane_nng_io(wire_lane_io *io, nng_socket *sock)
{
	io->impl = sock;
	io->open = chan_open;
	io->send = chan_send;
	io->stop = chan_stop;
	io->free = chan_free;
	io->renew = chan_renew;
}

/* ------------------------------------------------------------------------ */
/* Batches at the receiving end                                              */
/* ------------------------------------------------------------------------ */

uint32_t wire_field_number(const ProtobufCMessageDescriptor *d, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(d, name);
	return f != NULL ? f->id : 0;
}

int wire_batch_members(const uint8_t *body, size_t len, uint32_t field, uint32_t max,
                       const char *what, uint32_t *n, char *errmsg)
{
	const uint8_t *p = body, *end = body + len;
	wire_field f;
	uint32_t members = 0, others = 0;
	*n = 0;
	while (p < end) {
		if (!wire_next_field(&p, end, &f))
			return SHOAL_OK; /* the receiver's decoder says what is wrong */
		if (f.number == field && f.type == 2)
			members++;
		else
			others++;
	}
	if (members == 0)
		return SHOAL_OK;
	if (others > 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s carries nothing but its requests",
		               what);
	if (members > max)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s of %u requests (at most %u)", what,
		               members, max);
	*n = members;
	return SHOAL_OK;
}

bool wire_batch_next(const uint8_t **p, const uint8_t *end, uint32_t field, const uint8_t **data,
                     size_t *len)
{
	wire_field f;
	while (*p < end) {
		if (!wire_next_field(p, end, &f))
			return false;
		if (f.number == field && f.type == 2) {
			*data = f.data;
			*len = f.len;
			return true;
		}
	}
	return false;
}

nng_msg *wire_batch_answer(uint32_t field, const uint8_t *const *data, const size_t *len,
                           uint32_t n)
{
	size_t tag = wire_varint_len((uint64_t)field << 3 | 2), size = 0;
	for (uint32_t i = 0; i < n; i++)
		size += tag + wire_varint_len(len[i]) + len[i];
	nng_msg *m;
	if (nng_msg_alloc(&m, size) != 0)
		return NULL;
	uint8_t *p = nng_msg_body(m);
	for (uint32_t i = 0; i < n; i++) {
		p += wire_put_varint(p, (uint64_t)field << 3 | 2);
		p += wire_put_varint(p, len[i]);
		if (len[i] > 0)
			memcpy(p, data[i], len[i]);
		p += len[i];
	}
	return m;
}
