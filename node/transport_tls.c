/*
 * transport_tls.c -- raft's transport over mutually authenticated TLS.
 *
 * raft 0.15's uv io takes any raft_uv_transport that hands it libuv streams
 * (struct raft_uv_transport in raft/uv.h): it reads and writes them with
 * uv_read_start / uv_write and closes them with uv_close, nothing
 * TCP-specific.  So TLS needs no change to raft: each connection is an
 * nng TLS stream (nng's tls+tcp, built on mbedtls: common/tls.h's
 * configurations, peers must show a certificate of the cluster CA), and
 * raft gets one end of a socketpair; two threads pump bytes between the
 * other end and the TLS stream:
 *
 *   raft --uv_pipe--> fd a ==socketpair== fd b --up thread--> nng TLS stream
 *   raft <-uv_pipe--- fd a ==socketpair== fd b <-down thread-- nng TLS stream
 *
 * Either side's end tears the connection down: raft closing its pipe makes
 * the up thread read EOF and close the TLS stream, which fails the down
 * thread's receive; the peer going away fails the down thread's receive,
 * which shuts fd b, which raft sees as EOF.  The pump threads own their
 * connection and never touch the transport (they are common/tls.c's
 * sh_tls_pump, which the HTTPS endpoint shares).
 *
 * The handshake (what raft_uv_tcp's is for: who is connecting) is ours and
 * travels inside TLS: three little-endian u64 -- SH_TLS_HANDSHAKE, the
 * connecting server's id, the length of its address (at most SH_ADDR_MAX,
 * checked before anything is allocated) -- then the address.  A peer that
 * does not finish it (and TLS's) within HANDSHAKE_MS is dropped, and at
 * most ACCEPTING_MAX accepted connections may be in their handshakes at
 * once (more are closed at once), so a flood of idle connections costs
 * threads for a few seconds at most.
 *
 * Connecting and accepting (TLS handshake, our handshake) block, so each
 * runs on a thread of its own (a "job"); a job ends by posting an event to
 * the loop (uv_async) under t->mu and is joined there, so after the loop
 * has seen every job's event no thread refers to the transport.  close()
 * stops the listener, cancels every job, and reports closed once the last
 * job's event has been handled (connect requests then get RAFT_CANCELED,
 * as raft's interface asks).
 *
 * Threads: init, listen, connect, close and the event handler run on the
 * loop thread; the accept callback on nng's; jobs and pumps on their own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/tls.h"
#include "node/node.h"

#define SH_TLS_HANDSHAKE UINT64_C(0x53686f616c526674) /* "ShoalRft" */
#define HANDSHAKE_MS     5000
/* Connections accepted and still in their handshakes, at most (each holds
 * a thread for up to HANDSHAKE_MS): more are closed at once. */
#define ACCEPTING_MAX 64
#define CONNECT_MS    5000

typedef struct job job;

typedef struct tls_transport {
	struct raft_uv_transport *outer;
	uv_loop_t *loop;
	nng_tls_config *server, *client;
	raft_id id;
	char address[SH_ADDR_MAX];
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;

	nng_stream_listener *listener;
	nng_aio *accept_aio;
	bool accept_sleeping; /* accept_aio is a back-off sleep (nng thread) */

	uv_async_t async;
	bool async_open, async_closed;
	bool closing; /* loop; read by nng's accept callback under mu */

	pthread_mutex_t mu;
	job *jobs;            /* running, mu */
	unsigned n_accepting; /* ACCEPT jobs among them, mu */
	job *events;          /* finished, not yet handled by the loop, mu */
} tls_transport;

enum { JOB_CONNECT, JOB_ACCEPT };

struct job {
	tls_transport *t;
	int kind;
	pthread_t thread;
	nng_aio *aio;                /* the blocking step in progress; cancelled by close */
	bool canceled;               /* mu */
	job *next;                   /* in t->jobs, then in t->events */
	nng_stream *s;               /* ACCEPT: the accepted stream (owned until pumped) */
	struct raft_uv_connect *req; /* CONNECT */
	char url[SH_ADDR_MAX + 16];  /* CONNECT */
	/* Results, read by the loop after the event is posted. */
	int status; /* 0, or a RAFT_ code */
	int fd;     /* raft's end of the socketpair, or -1 */
	raft_id peer_id;
	char peer_address[SH_ADDR_MAX + 1];
};

/* ------------------------------------------------------------------------ */
/* The handshake                                                             */
/* ------------------------------------------------------------------------ */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

/* Ends a job: its event goes to the loop.  The job's thread touches nothing
 * of the transport after this. */
static void job_post(job *j)
{
	tls_transport *t = j->t;
	pthread_mutex_lock(&t->mu);
	for (job **pp = &t->jobs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	if (j->kind == JOB_ACCEPT)
		t->n_accepting--;
	j->next = t->events;
	t->events = j;
	uv_async_send(&t->async);
	pthread_mutex_unlock(&t->mu);
}

static bool job_canceled(job *j)
{
	pthread_mutex_lock(&j->t->mu);
	bool c = j->canceled;
	pthread_mutex_unlock(&j->t->mu);
	return c;
}

/* Ends a job's thread with stream s (NULL: none): pumped for raft when the
 * handshake went through, else closed; then the event goes to the loop. */
static void job_end(job *j, nng_stream *s, bool handshook)
{
	if (handshook) {
		j->fd = sh_tls_pump(s); /* (closes s on failure) */
		if (j->fd >= 0)
			j->status = 0;
	} else if (s != NULL) {
		nng_stream_close(s);
		nng_stream_free(s);
	}
	job_post(j);
}

static void *connect_main(void *arg)
{
	job *j = arg;
	tls_transport *t = j->t;
	nng_stream_dialer *d = NULL;
	nng_stream *s = NULL;
	j->status = RAFT_NOCONNECTION;
	int rv = nng_stream_dialer_alloc(&d, j->url);
	if (rv == 0)
		rv = nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, t->client);
	/* nng's streams leave Nagle on: with delayed ACKs every Raft
	 * round trip could wait 40 ms (PutItem p99 49 ms -> 19 ms). */
	if (rv == 0)
		rv = nng_stream_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
	if (rv == 0 && !job_canceled(j)) {
		nng_aio_set_timeout(j->aio, CONNECT_MS);
		nng_stream_dialer_dial(d, j->aio);
		nng_aio_wait(j->aio);
		if ((rv = nng_aio_result(j->aio)) == 0)
			s = nng_aio_get_output(j->aio, 0);
	}
	if (d != NULL)
		nng_stream_dialer_free(d);
	if (s != NULL && !job_canceled(j)) {
		uint8_t hs[24 + SH_ADDR_MAX];
		size_t alen = strlen(t->address);
		put64(hs, SH_TLS_HANDSHAKE);
		put64(hs + 8, t->id);
		put64(hs + 16, alen);
		memcpy(hs + 24, t->address, alen);
		nng_aio_set_timeout(j->aio, HANDSHAKE_MS);
		if (sh_tls_stream_all(s, j->aio, true, hs, 24 + alen) == 0) {
			job_end(j, s, true);
			return NULL;
		}
	}
	job_end(j, s, false);
	return NULL;
}

static void *accept_main(void *arg)
{
	job *j = arg;
	nng_stream *s = j->s;
	j->s = NULL;
	j->status = RAFT_NOCONNECTION;
	uint8_t hs[24];
	nng_aio_set_timeout(j->aio, HANDSHAKE_MS);
	if (sh_tls_stream_all(s, j->aio, false, hs, sizeof(hs)) == 0 &&
	    get64(hs) == SH_TLS_HANDSHAKE) {
		uint64_t alen = get64(hs + 16);
		j->peer_id = get64(hs + 8);
		/* Bounded before it is read: nothing is allocated for it. */
		if (alen >= 1 && alen <= SH_ADDR_MAX && j->peer_id != 0 &&
		    sh_tls_stream_all(s, j->aio, false, j->peer_address, (size_t)alen) == 0 &&
		    memchr(j->peer_address, '\0', (size_t)alen) == NULL) {
			j->peer_address[alen] = '\0';
			job_end(j, s, true);
			return NULL;
		}
	}
	job_end(j, s, false);
	return NULL;
}

/* Starts a job's thread; false (nothing started, j freed) on failure. */
static bool job_start(tls_transport *t, job *j, void *(*fn)(void *))
{
	j->t = t;
	j->fd = -1;
	if (nng_aio_alloc(&j->aio, NULL, NULL) != 0) {
		sh_free(j);
		return false;
	}
	pthread_mutex_lock(&t->mu);
	int rv = j->kind == JOB_ACCEPT && t->n_accepting >= ACCEPTING_MAX ? EAGAIN : 0;
	if (rv == 0) {
		j->next = t->jobs;
		t->jobs = j;
		rv = sh_tls_thread(&j->thread, fn, j, false);
		if (rv != 0)
			t->jobs = j->next;
		else if (j->kind == JOB_ACCEPT)
			t->n_accepting++;
	}
	pthread_mutex_unlock(&t->mu);
	if (rv != 0) {
		nng_aio_free(j->aio);
		sh_free(j);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* The loop's side                                                           */
/* ------------------------------------------------------------------------ */

static void async_closed(uv_handle_t *h)
{
	tls_transport *t = h->data;
	if (t->close_cb != NULL)
		t->close_cb(t->outer);
}

static void maybe_closed(tls_transport *t)
{
	pthread_mutex_lock(&t->mu);
	bool done = t->closing && t->jobs == NULL && t->events == NULL && t->async_open;
	pthread_mutex_unlock(&t->mu);
	if (done) {
		t->async_open = false;
		t->async_closed = true;
		uv_close((uv_handle_t *)&t->async, async_closed);
	}
}

/* A uv_pipe_t over fd for raft (which uv_close()s and frees it), or NULL
 * (fd closed). */
static struct uv_stream_s *raft_stream(tls_transport *t, int fd)
{
	uv_pipe_t *p = raft_malloc(sizeof(*p));
	if (p == NULL) {
		close(fd);
		return NULL;
	}
	uv_pipe_init(t->loop, p, 0);
	int rv = uv_pipe_open(p, fd);
	if (rv != 0) {
		node_logf(NODE_LOG_WARN, "raft transport: uv_pipe_open: %s", uv_strerror(rv));
		/* uv_close of a handle whose open failed does not close fd. */
		close(fd);
		p->data = p;
		uv_close((uv_handle_t *)p, (uv_close_cb)raft_free);
		return NULL;
	}
	return (struct uv_stream_s *)p;
}

static void on_events(uv_async_t *a)
{
	tls_transport *t = a->data;
	pthread_mutex_lock(&t->mu);
	job *list = t->events;
	t->events = NULL;
	pthread_mutex_unlock(&t->mu);
	while (list != NULL) {
		job *j = list;
		list = j->next;
		pthread_join(j->thread, NULL);
		nng_aio_free(j->aio);
		struct uv_stream_s *stream = NULL;
		if (j->status == 0 && !t->closing)
			stream = raft_stream(t, j->fd);
		else if (j->fd >= 0)
			close(j->fd);
		if (j->kind == JOB_CONNECT) {
			int status = stream != NULL ? 0
			             : t->closing   ? RAFT_CANCELED
			                            : RAFT_NOCONNECTION;
			j->req->cb(j->req, stream, status);
		} else if (stream != NULL) {
			t->accept_cb(t->outer, j->peer_id, j->peer_address, stream);
		}
		sh_free(j);
	}
	maybe_closed(t);
}

/* ------------------------------------------------------------------------ */
/* Accepting (nng's thread)                                                  */
/* ------------------------------------------------------------------------ */

static void accept_cb(void *arg)
{
	tls_transport *t = arg;
	int rv = nng_aio_result(t->accept_aio);
	pthread_mutex_lock(&t->mu);
	bool closing = t->closing;
	pthread_mutex_unlock(&t->mu);
	if (closing || rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	if (t->accept_sleeping) {
		t->accept_sleeping = false;
	} else if (rv == 0) {
		nng_stream *s = nng_aio_get_output(t->accept_aio, 0);
		job *j = sh_calloc(1, sizeof(*j));
		if (j == NULL) {
			nng_stream_close(s);
			nng_stream_free(s);
		} else {
			j->kind = JOB_ACCEPT;
			j->s = s;
			if (!job_start(t, j, accept_main)) {
				nng_stream_close(s);
				nng_stream_free(s);
			}
		}
	} else if (rv == NNG_ENOFILES || rv == NNG_ENOMEM || rv == NNG_ENOSPC) {
		/* Out of descriptors or memory: back off instead of
		 * spinning.  (One peer's failed connection is not a reason
		 * to make the others wait.) */
		t->accept_sleeping = true;
		nng_sleep_aio(100, t->accept_aio);
		return;
	}
	nng_stream_listener_accept(t->listener, t->accept_aio);
}

/* ------------------------------------------------------------------------ */
/* raft_uv_transport                                                         */
/* ------------------------------------------------------------------------ */

static int tls_init(struct raft_uv_transport *outer, raft_id id, const char *address)
{
	tls_transport *t = outer->impl;
	if (strlen(address) >= sizeof(t->address)) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "address too long: %s", address);
		return RAFT_INVALID;
	}
	t->id = id;
	snprintf(t->address, sizeof(t->address), "%s", address);
	return 0;
}

/* The loop's end of the jobs' events, opened on first need (raft closes a
 * transport it started; one it never started is freed without a close, and
 * must then own no handle). */
static int open_async(tls_transport *t)
{
	if (t->async_open || t->async_closed)
		return 0;
	int rv = uv_async_init(t->loop, &t->async, on_events);
	if (rv != 0)
		return rv;
	t->async.data = t;
	t->async_open = true;
	return 0;
}

static int tls_listen(struct raft_uv_transport *outer, raft_uv_accept_cb cb)
{
	tls_transport *t = outer->impl;
	char url[SH_ADDR_MAX + 16];
	int arv = open_async(t);
	if (arv != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "uv_async_init: %s",
		         uv_strerror(arv));
		return RAFT_IOERR;
	}
	snprintf(url, sizeof(url), "tls+tcp://%s", t->address);
	int rv = nng_stream_listener_alloc(&t->listener, url);
	if (rv == 0)
		rv = nng_stream_listener_set_ptr(t->listener, NNG_OPT_TLS_CONFIG, t->server);
	if (rv == 0) /* (as the dialer's) */
		rv = nng_stream_listener_set_bool(t->listener, NNG_OPT_TCP_NODELAY, true);
	if (rv == 0)
		rv = nng_stream_listener_listen(t->listener);
	if (rv == 0)
		rv = nng_aio_alloc(&t->accept_aio, accept_cb, t);
	if (rv != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "cannot listen on %s: %s", url,
		         nng_strerror(rv));
		if (t->listener != NULL)
			nng_stream_listener_free(t->listener);
		t->listener = NULL;
		return RAFT_IOERR;
	}
	t->accept_cb = cb;
	nng_stream_listener_accept(t->listener, t->accept_aio);
	return 0;
}

static int tls_connect(struct raft_uv_transport *outer, struct raft_uv_connect *req, raft_id id,
                       const char *address, raft_uv_connect_cb cb)
{
	tls_transport *t = outer->impl;
	int arv = open_async(t);
	if (arv != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "uv_async_init: %s",
		         uv_strerror(arv));
		return RAFT_NOCONNECTION;
	}
	job *j = sh_calloc(1, sizeof(*j));
	if (j == NULL) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "out of memory");
		return RAFT_NOMEM;
	}
	j->kind = JOB_CONNECT;
	j->req = req;
	req->cb = cb;
	if ((size_t)snprintf(j->url, sizeof(j->url), "tls+tcp://%s", address) >= sizeof(j->url)) {
		sh_free(j);
		snprintf(outer->errmsg, sizeof(outer->errmsg), "address too long: %s", address);
		return RAFT_INVALID;
	}
	if (!job_start(t, j, connect_main)) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "cannot start a connect thread");
		return RAFT_NOMEM;
	}
	return 0;
}

static void tls_close(struct raft_uv_transport *outer, raft_uv_transport_close_cb cb)
{
	tls_transport *t = outer->impl;
	t->close_cb = cb;
	pthread_mutex_lock(&t->mu);
	t->closing = true;
	pthread_mutex_unlock(&t->mu);
	if (t->listener != NULL) {
		nng_stream_listener_close(t->listener);
		nng_aio_stop(t->accept_aio); /* waits for a running accept_cb */
		nng_stream_listener_free(t->listener);
		nng_aio_free(t->accept_aio);
		t->listener = NULL;
		t->accept_aio = NULL;
	}
	pthread_mutex_lock(&t->mu);
	for (job *j = t->jobs; j != NULL; j = j->next) {
		j->canceled = true;
		nng_aio_cancel(j->aio);
	}
	pthread_mutex_unlock(&t->mu);
	/* Events already posted are handled (and the close reported) by the
	 * next on_events; post one in case there are none. */
	if (open_async(t) != 0) {
		node_logf(NODE_LOG_ERROR, "raft transport: cannot report its close");
		return;
	}
	uv_async_send(&t->async);
}

int node_transport_tls_init(struct raft_uv_transport *outer, uv_loop_t *loop,
                            nng_tls_config *server, nng_tls_config *client, char *errmsg)
{
	tls_transport *t = sh_calloc(1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "raft transport: out of memory");
	t->outer = outer;
	t->loop = loop;
	t->server = server;
	t->client = client;
	pthread_mutex_init(&t->mu, NULL);
	memset(outer, 0, sizeof(*outer));
	outer->impl = t;
	outer->init = tls_init;
	outer->listen = tls_listen;
	outer->connect = tls_connect;
	outer->close = tls_close;
	return SHOAL_OK;
}

void node_transport_tls_free(struct raft_uv_transport *outer)
{
	tls_transport *t = outer->impl;
	if (t == NULL)
		return;
	if (t->async_open || t->jobs != NULL) {
		/* Started and not closed: the loop may still use it. */
		node_logf(NODE_LOG_ERROR, "raft transport: freed while open; leaking it");
		outer->impl = NULL;
		return;
	}
	pthread_mutex_destroy(&t->mu);
	sh_free(t);
	outer->impl = NULL;
}
