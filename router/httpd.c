/*
 * httpd.c -- a small HTTP/1.1 server on epoll (contract: httpd.h).
 *
 * A connection's states (c->state), under c->mu:
 *
 *   state   event                                       next     (function)
 *   ------  ------------------------------------------  -------  -------------
 *   HEAD    bytes, head incomplete                      HEAD     conn_input
 *   HEAD    head complete: ops.head                     BUSY     conn_serve
 *   HEAD    malformed / too large                       LINGER   conn_fail
 *   BUSY    ops.head wants the body                     BODY     body_start
 *   BUSY    ops.head answered                           LINGER   rt_httpd_respond
 *   BODY    bytes, body incomplete                      BODY     conn_input
 *   BODY    body complete: ops.request                  BUSY     conn_serve
 *   BUSY    answer written, keep-alive                  HEAD     conn_done
 *   BUSY    answer written, close                       LINGER   conn_done
 *   BUSY    answer partly written                       WRITE    rt_httpd_respond
 *   WRITE   the rest written (EPOLLOUT)                 HEAD or  conn_flush
 *                                                       LINGER
 *   LINGER  peer's EOF, RT_HTTPD_LINGER_MS, 1 MiB read  closed   linger_read
 *   any     error, EOF, timeout, stop                   closed   conn_close
 *
 * In LINGER our side is shut (the answer and a FIN are on their way) and
 * whatever the peer still sends is read and dropped, so that closing with
 * unread bytes does not reset the connection under an answer the peer has
 * not read yet (a 413 sent while the client is still sending its body).
 *
 * Threads.  The I/O thread that accepted a connection does everything to it
 * but answer: the endpoint's thread calls rt_httpd_respond, which writes on
 * the socket itself.  Only the I/O thread closes a descriptor (so that its
 * number is never reused under an epoll event in flight); another thread
 * that finds a connection broken shuts it down, which wakes the I/O thread
 * (EPOLLHUP).  While BUSY the I/O thread does not touch the request (in,
 * head, body): the endpoint reads it.  An HTTPS connection is accepted by
 * the handshake loop and changes loops once, when its handshake is over
 * (conn_move): from then on it belongs to that I/O thread as above.
 *
 * Epoll is edge-triggered: each connection is registered once, for
 * EPOLLIN | EPOLLOUT | EPOLLRDHUP, and never modified.  c->readable records
 * that the socket may hold bytes: set by EPOLLIN, cleared by a short read
 * (a read that returns less than asked drained the socket; the next byte
 * that arrives is a new edge).  So a request costs one read(2), and a
 * connection that became readable while BUSY (a pipelining client, or the
 * peer's EOF) is looked at again when its answer has been written: the
 * answering thread posts it to its I/O thread (post_resume), the only case
 * where an answer wakes the I/O thread.
 *
 * References (c->refs): one for the I/O thread (from accept until the
 * event batch in which it closed the socket ends: the batch may still hold
 * events naming it), one per request in the endpoint's hands (until
 * rt_httpd_respond returns), one per pending resume.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "router/httpd.h"
#include "router/router.h"

/* ------------------------------------------------------------------------ */
/* Connections                                                               */
/* ------------------------------------------------------------------------ */

enum { C_HEAD, C_BODY, C_BUSY, C_WRITE, C_LINGER, C_CLOSED };

/* Bodies up to this size are read into the connection's input buffer,
 * right after their head (no allocation of their own). */
#define IN_BODY_MAX (16u * 1024)
#define IN_INIT     4096u
/* A separate body buffer starts at IN_BODY_MAX (or what arrived with the
 * head) and doubles as it fills: at most twice what arrived is held. */
#define BODY_CHUNK    (64u * 1024)
#define PEER_BUCKETS  1024u
#define LINGER_MAX    (1u << 20)
#define SCAN_EVERY_MS 1000
#define EVENTS        128
/* HTTPS: ciphertext read from the socket at once (mbedtls takes it a record
 * at a time), and the most plaintext sealed into one record. */
#define TLS_RAW     (16u * 1024 + 512)
#define TLS_REC_MAX (16u * 1024)

typedef struct loop loop;
typedef struct conn conn;

/* The HTTPS handshake bucket of the addresses whose hash lands on it
 * (rt_httpd.hs; the handshake loop's alone): tokens, and when they were
 * counted (0: never, a full bucket). */
typedef struct hs_slot {
	double tokens;
	int64_t at_ms;
} hs_slot;

/* A peer address and what its connections hold (rt_httpd.peers). */
typedef struct peer {
	struct peer *next;
	uint8_t addr[16];
	uint8_t len;        /* 4 (IPv4) or 16 (IPv6) */
	uint32_t refs;      /* connections naming it (s->peers_mu) */
	uint32_t open;      /* of which open (s->peers_mu) */
	atomic_size_t held; /* bytes of bodies its connections hold */
} peer;

struct conn {
	rt_httpd_req req;
	rt_httpd *s;
	loop *lp;
	pthread_mutex_t mu;
	atomic_uint refs;
	int fd;           /* -1 once closed */
	int state;        /* C_* */
	bool readable;    /* the socket may hold bytes we have not read */
	bool peer_eof;    /* the peer shut its side: close after this answer */
	bool body_read;   /* the request's body was read (else: close after the answer) */
	bool close_after; /* WRITE: close once the rest is written */
	bool posted;      /* on a resume list */
	bool idle;        /* HEAD, kept alive with no byte of the next request yet */
	int64_t deadline; /* monotonic ms: the current state's timeout */
	int64_t body_due; /* BODY: its total deadline (grows by 1 s per min_rate bytes) */
	peer *peer;       /* the peer's address (NULL: not counted) */
	/* Input: the I/O thread's, or the request's owner's while BUSY. */
	char *in;
	size_t in_len, in_cap;
	size_t scanned; /* rt_httpd_parse's */
	size_t used;    /* bytes of `in` the current request took */
	rt_httpd_head head;
	uint8_t *body; /* a separate body buffer, or NULL (the body is in `in`) */
	size_t body_cap, got;
	/* A chunked body being decoded (chunk_feed): the state, the data left
	 * in the current chunk, where its raw bytes resume in `in`, and the
	 * length of the current size or trailer line. */
	int ck;
	uint64_t ck_left;
	size_t ck_pos;
	size_t ck_line;
	size_t held; /* bytes counted in s->held */
	size_t lingered;
	/* Output not yet written. */
	char *wq;
	size_t wq_off, wq_len, wq_cap;
	conn *prev, *next; /* the loop's connections */
	/* Lists (one link each: a posted connection may be closed before its
	 * resume runs, so it is on both). */
	conn *rlink; /* a resume list */
	conn *clink; /* the loop's closed list */
	/* Events met while another thread held mu (the I/O thread's). */
	uint32_t deferred_ev;
	conn *dlink;
	/* HTTPS (NULL ssl: plain): the session, whether its handshake is over,
	 * ciphertext read and not yet taken by mbedtls, and the length of a
	 * record mbedtls_ssl_write could not finish (it must be called again
	 * with the same length). */
	mbedtls_ssl_context *ssl;
	bool hs_done;
	uint8_t *raw;
	size_t raw_off, raw_len;
	size_t tls_wlen;
	bool moving; /* its handshake is over: off to an I/O loop (conn_move) */
	conn *mlink; /* the target loop's `moved` list */
};

struct loop {
	rt_httpd *s;
	int ep, evfd;
	pthread_t th;
	bool started;
	conn *conns;
	conn *closed;   /* closed in this batch: the loop's reference goes after it */
	conn *local;    /* resumes posted by this thread */
	conn *deferred; /* events to handle after this batch (on_conn) */
	pthread_mutex_t mu;
	conn *remote;    /* resumes posted by other threads (mu) */
	conn *moved;     /* HTTPS connections handed over by the handshake loop (mu) */
	bool no_moves;   /* stopped: takes no more (mu) */
	bool handshakes; /* the handshake loop: HTTPS's listener, handshakes only */
	bool listening;
	int64_t paused_until;
	int64_t next_scan;
	char scratch[16384]; /* lingering reads */
};

struct rt_httpd {
	rt_httpd_conf c;
	int lfd, tls_lfd; /* the listeners (HTTP, HTTPS), or -1 */
	int port, tls_port;
	loop *loops; /* the I/O loops, then (HTTPS) the handshake loop */
	uint32_t n_loops, n_io;
	atomic_uint next_move; /* round robin of handshaken connections */
	atomic_bool stopping;
	atomic_uint n_conns;
	atomic_size_t held;
	atomic_uint busy; /* requests in the endpoint's hands */
	atomic_bool refusing, out_of_fds;
	pthread_mutex_t peers_mu;
	peer *peers[PEER_BUCKETS]; /* by address (peers_mu) */
	hs_slot *hs;               /* [RT_HTTPD_HANDSHAKE_SLOTS] (the handshake loop's) */
	rt_httpd_stats own_stats;  /* when c.stats is NULL */
	uint64_t hs_refused;       /* refusals (the handshake loop's; for its log) */
	int64_t hs_logged;         /* when a refusal was last logged (the handshake loop's) */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* busy reached 0 while stopping */
};

/* Wakes lp's I/O thread (its eventfd; a full one is awake anyway). */
static void loop_wake(loop *lp)
{
	uint64_t one = 1;
	ssize_t w = write(lp->evfd, &one, sizeof(one));
	(void)w;
}

static __thread loop *tl_loop; /* the I/O thread's own loop */

static conn *conn_of(rt_httpd_req *r)
{
	return (conn *)((char *)r - offsetof(conn, req));
}

/* The address a peer is counted by (peer_get): false if not IP. */
static bool peer_key(const struct sockaddr_storage *ss, uint8_t a[16], uint8_t *len)
{
	if (ss->ss_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)ss)->sin_addr, 4);
		*len = 4;
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(in6)) {
			memcpy(a, in6->s6_addr + 12, 4);
			*len = 4;
		} else {
			memcpy(a, in6->s6_addr, 8);
			*len = 8;
		}
	} else {
		return false;
	}
	return true;
}

static uint32_t peer_hash(const uint8_t *a, uint8_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (uint8_t i = 0; i < len; i++)
		h = (h ^ a[i]) * 16777619u;
	return h;
}

/* The peer entry of a new connection's address, created on its first
 * connection, which counts as open in it; NULL when the address is not
 * IP or memory is short (the connection is then bounded by the server's
 * limits only), and NULL with *full set when the address has
 * max_conns_peer connections open already.  An IPv6 peer is its /64 (what
 * one host is usually given: counting its 2^64 addresses apart would bound
 * nothing); an IPv4-mapped one is its IPv4 address. */
static peer *peer_get(rt_httpd *s, const struct sockaddr_storage *ss, bool *full)
{
	uint8_t a[16], len;
	*full = false;
	if (!peer_key(ss, a, &len))
		return NULL;
	peer **b = &s->peers[peer_hash(a, len) % PEER_BUCKETS], *p;
	pthread_mutex_lock(&s->peers_mu);
	for (p = *b; p != NULL; p = p->next)
		if (p->len == len && memcmp(p->addr, a, len) == 0)
			break;
	if (p == NULL && (p = sh_calloc(1, sizeof(*p))) != NULL) {
		memcpy(p->addr, a, len);
		p->len = len;
		atomic_init(&p->held, 0);
		p->next = *b;
		*b = p;
	}
	if (p != NULL && s->c.max_conns_peer > 0 && p->open >= s->c.max_conns_peer) {
		assert(p->refs > 0); /* (a full address has connections: it stays listed) */
		*full = true;
		p = NULL;
	} else if (p != NULL) {
		p->refs++;
		p->open++;
	}
	pthread_mutex_unlock(&s->peers_mu);
	return p;
}

/* The connection's socket closed: its address has one fewer open. */
static void peer_closed(rt_httpd *s, peer *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&s->peers_mu);
	p->open--;
	pthread_mutex_unlock(&s->peers_mu);
}

static void peer_put(rt_httpd *s, peer *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&s->peers_mu);
	if (--p->refs == 0) {
		assert(atomic_load(&p->held) == 0 && p->open == 0);
		peer **b = &s->peers[peer_hash(p->addr, p->len) % PEER_BUCKETS];
		while (*b != p)
			b = &(*b)->next;
		*b = p->next;
		sh_free(p);
	}
	pthread_mutex_unlock(&s->peers_mu);
}

static void conn_unref(conn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	assert(c->fd < 0 && c->held == 0 && c->body == NULL && c->peer == NULL);
	if (c->ssl != NULL) {
		mbedtls_ssl_free(c->ssl);
		sh_free(c->ssl);
	}
	sh_free(c->raw);
	sh_free(c->in);
	sh_free(c->wq);
	pthread_mutex_destroy(&c->mu);
	sh_free(c);
}

/* Bytes of bodies: reserve n more (false when over max_held_peer for the
 * peer's address, noted in req.peer_busy, or over max_held). */
static bool held_add(conn *c, size_t n)
{
	rt_httpd *s = c->s;
	peer *p = c->peer;
	if (p != NULL && atomic_fetch_add(&p->held, n) + n > s->c.max_held_peer) {
		atomic_fetch_sub(&p->held, n);
		c->req.peer_busy = true;
		return false;
	}
	if (atomic_fetch_add(&s->held, n) + n > s->c.max_held) {
		atomic_fetch_sub(&s->held, n);
		if (p != NULL)
			atomic_fetch_sub(&p->held, n);
		return false;
	}
	c->held += n;
	return true;
}

/* The request is over: its body goes. */
static void body_release(conn *c)
{
	sh_free(c->body);
	c->body = NULL;
	c->body_cap = c->got = 0;
	if (c->held > 0) {
		atomic_fetch_sub(&c->s->held, c->held);
		if (c->peer != NULL)
			atomic_fetch_sub(&c->peer->held, c->held);
		c->held = 0;
	}
	c->req.body = NULL;
	c->req.len = 0;
}

/* The connection is closed and its body released: its address no longer
 * counts it (before request_end: rt_httpd_stop may free s after that). */
static void peer_drop(conn *c)
{
	assert(c->held == 0);
	peer_put(c->s, c->peer);
	c->peer = NULL;
}

static void request_end(rt_httpd *s)
{
	if (atomic_fetch_sub(&s->busy, 1) == 1 && atomic_load(&s->stopping)) {
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Removes c from lp's list of connections. */
static void conn_unlink(loop *lp, conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		lp->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void conn_link(loop *lp, conn *c)
{
	c->prev = NULL;
	c->next = lp->conns;
	if (lp->conns != NULL)
		lp->conns->prev = c;
	lp->conns = c;
}

/* Closes the socket (I/O thread, c->mu held).  A BUSY request stays with
 * its owner, whose answer then goes nowhere. */
static void conn_close(loop *lp, conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	peer_closed(c->s, c->peer);
	if (c->state != C_BUSY) {
		body_release(c);
		peer_drop(c);
		c->state = C_CLOSED;
	}
	c->wq_off = c->wq_len = 0;
	conn_unlink(lp, c);
	c->clink = lp->closed;
	lp->closed = c;
	atomic_fetch_sub(&lp->s->n_conns, 1);
}

/* Another thread found the connection broken: its I/O thread closes it
 * (the shutdown wakes it with EPOLLHUP; the timer scan is the backstop). */
static void conn_kill(conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->state = C_LINGER;
	c->deadline = 0;
}

/* ------------------------------------------------------------------------ */
/* HTTPS: mbedtls over the connection's socket                               */
/* ------------------------------------------------------------------------ */

/*
 * An HTTPS connection is the same connection with an mbedtls session in
 * front of its socket, driven by whoever does its I/O (the I/O thread, or
 * the answering thread under c->mu, as for plain ones): no thread of its own
 * and no copy through another socket.  Its I/O points are the plain ones':
 * conn_read (the handshake, then mbedtls_ssl_read), wq_send (the answer,
 * mbedtls_ssl_write from the write queue: an answer's head and body are
 * sealed as one record when they fit) and conn_done (close_notify before
 * our FIN).  The lingering read drops ciphertext unread.
 *
 * Edge-triggered epoll and mbedtls's buffers: tls_recv reads up to TLS_RAW
 * bytes of ciphertext at once into c->raw and clears c->readable on a
 * short read or EAGAIN, as conn_read does for plain sockets; bytes left in
 * c->raw or decrypted and not yet taken (mbedtls_ssl_get_bytes_avail) are
 * input no epoll edge will announce, so conn_more counts them.  A write
 * mbedtls could not finish (WANT_WRITE: its record is sealed, part of it
 * sent) is retried on EPOLLOUT with the same length, as mbedtls requires;
 * the queue's bytes may move (wq_add) meanwhile, mbedtls does not read
 * them again.  A handshake waits for either edge (conn_more is true until
 * it is over) and must end within the head's deadline.
 */

/* mbedtls's BIO: the socket. */
static int tls_send(void *arg, const unsigned char *buf, size_t len)
{
	conn *c = arg;
	ssize_t w;
	do
		w = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w >= 0)
		return (int)w;
	return errno == EAGAIN || errno == EWOULDBLOCK ? MBEDTLS_ERR_SSL_WANT_WRITE
	                                               : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int tls_recv(void *arg, unsigned char *buf, size_t len)
{
	conn *c = arg;
	if (c->raw_off == c->raw_len) {
		if (c->raw == NULL && (c->raw = sh_malloc(TLS_RAW)) == NULL)
			return MBEDTLS_ERR_SSL_ALLOC_FAILED;
		ssize_t n;
		do
			n = read(c->fd, c->raw, TLS_RAW);
		while (n < 0 && errno == EINTR);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->readable = false;
			return MBEDTLS_ERR_SSL_WANT_READ;
		}
		if (n < 0)
			return MBEDTLS_ERR_NET_RECV_FAILED;
		if (n == 0)
			return 0; /* EOF */
		if ((size_t)n < TLS_RAW)
			c->readable = false;
		c->raw_off = 0;
		c->raw_len = (size_t)n;
	}
	size_t k = c->raw_len - c->raw_off < len ? c->raw_len - c->raw_off : len;
	memcpy(buf, c->raw + c->raw_off, k);
	c->raw_off += k;
	return (int)k;
}

/* An mbedtls result that is not data: 0 to wait for the socket, -1 for the
 * end of the connection (the peer's close_notify or EOF, an alert, an
 * error). */
static ssize_t tls_wait(int r)
{
	return r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE ? 0 : -1;
}

/* Plaintext into buf (the handshake first): as conn_read. */
static ssize_t tls_read(conn *c, void *buf, size_t cap)
{
	int r;
	if (!c->hs_done) {
		if ((r = mbedtls_ssl_handshake(c->ssl)) != 0)
			return tls_wait(r);
		c->hs_done = true;
		if (c->lp->handshakes) {
			c->moving = true; /* conn_serve hands it to an I/O loop */
			return 0;
		}
	}
	r = mbedtls_ssl_read(c->ssl, buf, cap);
	return r > 0 ? r : r == 0 ? -1 : tls_wait(r);
}

/* Whether the connection may have input no epoll edge will announce: the
 * socket's (c->readable), or TLS's ciphertext read and not yet decrypted,
 * plaintext decrypted and not yet taken, or a handshake in progress. */
static bool conn_more(conn *c)
{
	return c->readable || (c->ssl != NULL && (!c->hs_done || c->raw_off < c->raw_len ||
	                                          mbedtls_ssl_get_bytes_avail(c->ssl) > 0));
}

/* Sets up an HTTPS connection's session (before it is registered).  false
 * when out of memory. */
static bool tls_setup(conn *c, const mbedtls_ssl_config *conf)
{
	if ((c->ssl = sh_malloc(sizeof(*c->ssl))) == NULL)
		return false;
	mbedtls_ssl_init(c->ssl);
	if (mbedtls_ssl_setup(c->ssl, conf) != 0)
		return false; /* (conn_unref frees it) */
	mbedtls_ssl_set_bio(c->ssl, c, tls_send, tls_recv, NULL);
	return true;
}

/* Queues the bytes of iov from offset skip on (c->mu held). */
static int wq_add(conn *c, const struct iovec *iov, int n, size_t skip)
{
	size_t more = 0;
	for (int i = 0; i < n; i++)
		more += iov[i].iov_len;
	more -= skip;
	if (c->wq_off > 0) {
		memmove(c->wq, c->wq + c->wq_off, c->wq_len - c->wq_off);
		c->wq_len -= c->wq_off;
		c->wq_off = 0;
	}
	if (c->wq_len + more > c->wq_cap) {
		char *q = sh_realloc(c->wq, c->wq_len + more);
		if (q == NULL)
			return -1;
		c->wq = q;
		c->wq_cap = c->wq_len + more;
	}
	for (int i = 0; i < n; i++) {
		size_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		memcpy(c->wq + c->wq_len, (const char *)iov[i].iov_base + skip, l - skip);
		c->wq_len += l - skip;
		skip = 0;
	}
	return 0;
}

/* Writes the queue as far as the connection takes it: 1 when all of it is
 * written (the queue is then empty), 0 when the rest waits for EPOLLOUT, -1
 * when the connection is broken (c->mu held, c->fd open). */
static int wq_send(conn *c)
{
	while (c->wq_off < c->wq_len) {
		ssize_t w;
		if (c->ssl != NULL) {
			size_t len = c->tls_wlen;
			if (len == 0)
				len = c->wq_len - c->wq_off < TLS_REC_MAX ? c->wq_len - c->wq_off
				                                          : TLS_REC_MAX;
			int r = mbedtls_ssl_write(c->ssl, (const unsigned char *)c->wq + c->wq_off,
			                          len);
			if (r == MBEDTLS_ERR_SSL_WANT_WRITE || r == MBEDTLS_ERR_SSL_WANT_READ) {
				c->tls_wlen = len;
				return 0;
			}
			if (r < 0)
				return -1;
			c->tls_wlen = 0;
			w = r;
		} else {
			w = send(c->fd, c->wq + c->wq_off, c->wq_len - c->wq_off,
			         MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
			}
		}
		c->wq_off += (size_t)w;
		c->deadline = rt_now_ms() + c->s->c.timeout_ms;
	}
	c->wq_off = c->wq_len = 0;
	return 1;
}

/* Writes iov now, as much as the socket takes, and queues the rest for
 * EPOLLOUT; behind bytes already queued, queues it all.  0, or -1 when the
 * connection is broken (c->mu held, c->fd open).  HTTPS: all of it goes
 * through the queue, so that a head and its body leave as one record. */
static int conn_write(conn *c, const struct iovec *iov, int n)
{
	if (c->ssl != NULL) {
		bool behind = c->wq_off < c->wq_len;
		if (wq_add(c, iov, n, 0) < 0)
			return -1;
		if (!behind && wq_send(c) < 0)
			return -1;
		if (c->wq_off < c->wq_len)
			c->deadline = rt_now_ms() + c->s->c.timeout_ms;
		return 0;
	}
	size_t sent = 0, total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (c->wq_off == c->wq_len) {
		struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
		ssize_t w;
		do
			w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (w < 0 && errno == EINTR);
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		sent = w > 0 ? (size_t)w : 0;
		if (sent == total)
			return 0;
	}
	c->deadline = rt_now_ms() + c->s->c.timeout_ms;
	return wq_add(c, iov, n, sent);
}

static void post_resume(conn *c);

/* The answer is written: the request is over.  close: shut our side and
 * linger; else wait for the next request (c->mu held, c->fd open). */
static void conn_done(conn *c, bool close)
{
	body_release(c);
	int64_t now = rt_now_ms();
	if (close) {
		if (c->ssl != NULL)
			mbedtls_ssl_close_notify(c->ssl); /* best effort, before our FIN */
		shutdown(c->fd, SHUT_WR);
		c->state = C_LINGER;
		c->deadline = now + RT_HTTPD_LINGER_MS;
		c->readable = true;
		return;
	}
	c->state = C_HEAD;
	if (c->used < c->in_len)
		memmove(c->in, c->in + c->used, c->in_len - c->used);
	c->in_len -= c->used;
	c->used = c->scanned = 0;
	if (c->in_cap > 4 * IN_INIT && c->in_len <= IN_INIT) {
		char *small = sh_malloc(IN_INIT);
		if (small != NULL) {
			memcpy(small, c->in, c->in_len);
			sh_free(c->in);
			c->in = small;
			c->in_cap = IN_INIT;
		}
	}
	c->idle = c->in_len == 0;
	c->deadline = now + (c->idle ? c->s->c.idle_ms : c->s->c.head_ms);
	if (c->in_len > 0 || conn_more(c))
		post_resume(c);
}

/* Writes queued bytes (c->mu held); a WRITE whose answer is then complete
 * is done.  -1 when the connection is broken. */
static int conn_flush(conn *c)
{
	int r = wq_send(c);
	if (r <= 0)
		return r;
	if (c->wq_cap > BODY_CHUNK) {
		sh_free(c->wq);
		c->wq = NULL;
		c->wq_cap = 0;
	}
	if (c->state == C_WRITE)
		conn_done(c, c->close_after);
	return 0;
}

static char *put(char *p, const char *s, size_t n)
{
	if (n > 0) /* s may be NULL then */
		memcpy(p, s, n);
	return p + n;
}

static char *put_u64(char *p, uint64_t v)
{
	char d[20];
	size_t n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0)
		*p++ = d[--n];
	return p;
}

/* The status line, headers, Content-Length and Connection into buf (cap
 * bytes); the length, or 0 if it does not fit.  (By hand: this runs once
 * per answer, and vfprintf was visible in the profile.) */
static size_t build_head(char *buf, size_t cap, int status, const char *headers, size_t len,
                         const char *connection)
{
	const char *reason = rt_httpd_reason(status);
	size_t rl = strlen(reason), hl = headers != NULL ? strlen(headers) : 0;
	size_t cl = connection != NULL ? strlen(connection) : 0;
	if (9 + 20 + 1 + rl + 2 + hl + 16 + 20 + 2 + 12 + cl + 2 + 2 > cap)
		return 0;
	char *p = put(buf, "HTTP/1.1 ", 9);
	p = put_u64(p, (uint64_t)status);
	*p++ = ' ';
	p = put(p, reason, rl);
	p = put(p, "\r\n", 2);
	p = put(p, headers, hl);
	p = put(p, "Content-Length: ", 16);
	p = put_u64(p, len);
	p = put(p, "\r\n", 2);
	if (connection != NULL) {
		p = put(p, "Connection: ", 12);
		p = put(p, connection, cl);
		p = put(p, "\r\n", 2);
	}
	p = put(p, "\r\n", 2);
	return (size_t)(p - buf);
}

void rt_httpd_respond(rt_httpd_req *r, int status, const char *headers, const void *body,
                      size_t len, bool close)
{
	conn *c = conn_of(r);
	rt_httpd *s = c->s;
	pthread_mutex_lock(&c->mu);
	assert(c->state == C_BUSY);
	const rt_httpd_head *h = &c->head;
	bool unread = !c->body_read && (h->chunked || h->bad_length || h->content_length > 0);
	close = close || unread || !h->keep_alive || c->peer_eof;
	if (c->fd < 0) {
		body_release(c);
		peer_drop(c);
		c->state = C_CLOSED;
	} else {
		const char *connection = close ? "close" : h->minor == 0 ? "keep-alive" : NULL;
		char small[1024], *buf = small;
		size_t cap = sizeof(small), hl;
		while ((hl = build_head(buf, cap, status, headers, len, connection)) == 0) {
			if (buf != small)
				sh_free(buf);
			cap = cap * 4 + (headers != NULL ? strlen(headers) : 0);
			if ((buf = sh_malloc(cap)) == NULL)
				break;
		}
		struct iovec iov[2] = {{buf, hl}, {(void *)body, len}};
		int n = len > 0 && strcmp(h->method, "HEAD") != 0 ? 2 : 1;
		if (buf == NULL || conn_write(c, iov, n) < 0) {
			body_release(c);
			conn_kill(c);
		} else if (c->wq_off < c->wq_len) {
			body_release(c);
			c->state = C_WRITE;
			c->close_after = close;
		} else {
			conn_done(c, close);
		}
		if (buf != small)
			sh_free(buf);
	}
	request_end(s);
	pthread_mutex_unlock(&c->mu);
	conn_unref(c);
}

/* The I/O thread answers a request it cannot parse, and closes (c->mu
 * held). */
static void conn_fail(conn *c, int status)
{
	const char *text = rt_httpd_reason(status);
	char head[256];
	size_t hl = build_head(head, sizeof(head), status, "Content-Type: text/plain\r\n",
	                       strlen(text), "close");
	struct iovec iov[2] = {{head, hl}, {(void *)text, strlen(text)}};
	body_release(c);
	if (conn_write(c, iov, 2) < 0) {
		conn_kill(c);
	} else if (c->wq_off < c->wq_len) {
		c->state = C_WRITE;
		c->close_after = true;
	} else {
		conn_done(c, true);
	}
}

/* ------------------------------------------------------------------------ */
/* Reading requests (the I/O thread)                                         */
/* ------------------------------------------------------------------------ */

/* Replaces `in` by a buffer of cap bytes, moving the parsed head's
 * pointers along. */
static bool in_resize(conn *c, size_t cap, bool parsed)
{
	char *n = sh_malloc(cap);
	if (n == NULL)
		return false;
	if (c->in_len > 0)
		memcpy(n, c->in, c->in_len);
	if (parsed) {
		rt_httpd_head *h = &c->head;
		h->method = n + (h->method - c->in);
		h->target = n + (h->target - c->in);
		for (uint32_t i = 0; i < h->n; i++) {
			h->h[i].name = n + (h->h[i].name - c->in);
			h->h[i].value = n + (h->h[i].value - c->in);
		}
	}
	sh_free(c->in);
	c->in = n;
	c->in_cap = cap;
	return true;
}

/* A read into buf: bytes read, 0 for none now (the socket is drained),
 * -1 for EOF or an error. */
static ssize_t conn_read(conn *c, void *buf, size_t cap)
{
	ssize_t n;
	if (c->ssl != NULL)
		n = tls_read(c, buf, cap);
	else
		do
			n = read(c->fd, buf, cap);
		while (n < 0 && errno == EINTR);
	if (n > 0) {
		if ((size_t)n < cap && c->ssl == NULL)
			c->readable = false;
		if (c->state == C_BODY) { /* a body: an idle timeout, and a rate */
			int64_t now = rt_now_ms();
			c->body_due += (int64_t)n * 1000 / c->s->c.min_rate;
			c->deadline = now + c->s->c.timeout_ms;
			if (c->deadline > c->body_due)
				c->deadline = c->body_due;
		} else if (c->idle) { /* a head: a total one, from its first byte */
			c->idle = false;
			c->deadline = rt_now_ms() + c->s->c.head_ms;
		}
		return n;
	}
	if (c->ssl != NULL)
		return n;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		c->readable = false;
		return 0;
	}
	return -1;
}

enum { ACT_WAIT, ACT_HEAD, ACT_REQUEST, ACT_BUSY };

/* ------------------------------------------------------------------------ */
/* Chunked bodies                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A chunked body (RFC 9112 7.1) is decoded as its bytes arrive.  The raw
 * bytes stay in `in` after the head, from ck_pos on (those consumed are
 * dropped before the next read: `in` holds the head and at most a partial
 * line); the data goes to `body`, grown as the other bodies are (held_add,
 * doubling).  Byte by byte, except chunk data, which is copied whole:
 *
 *   state        byte                      next
 *   CK_SIZE      hex digit                 CK_SIZE (size*16+d; past the
 *                                          limit: 413)
 *   CK_SIZE      ';' (digits seen)         CK_EXT
 *   CK_SIZE      CR (digits seen)          CK_SIZE_LF
 *   CK_EXT       CR                        CK_SIZE_LF
 *   CK_EXT       other (not LF or NUL)     CK_EXT (extensions ignored)
 *   CK_SIZE_LF   LF                        CK_DATA, or CK_TRAILER (size 0)
 *   CK_DATA      (size bytes, copied)      CK_DATA_CR
 *   CK_DATA_CR   CR                        CK_DATA_LF
 *   CK_DATA_LF   LF                        CK_SIZE
 *   CK_TRAILER   CR                        CK_TRAILER_LF
 *   CK_TRAILER   other (not LF or NUL)     CK_TRAILER (fields ignored)
 *   CK_TRAILER_LF LF ending an empty line  done
 *   CK_TRAILER_LF LF ending a field        CK_TRAILER
 *
 * Anything else is malformed (400).  A size or extension line, and the
 * trailer, may hold at most CK_LINE_MAX bytes (400 past it); the decoded
 * body at most conf.max_chunked (413).  Both end the connection.
 */
enum {
	CK_SIZE,
	CK_EXT,
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER,
	CK_TRAILER_LF,
};
enum { CKR_MORE, CKR_DONE, CKR_BAD, CKR_BIG, CKR_BUSY };
#define CK_LINE_MAX 4096u

static int hex_digit(unsigned char b)
{
	return b >= '0' && b <= '9'   ? b - '0'
	       : b >= 'a' && b <= 'f' ? b - 'a' + 10
	       : b >= 'A' && b <= 'F' ? b - 'A' + 10
	                              : -1;
}

/* Room in `body` for n more decoded bytes (false: not held). */
static bool body_room(conn *c, size_t n)
{
	if (c->got + n <= c->body_cap)
		return true;
	size_t cap = c->body_cap > 0 ? c->body_cap * 2 : IN_BODY_MAX;
	if (cap < c->got + n)
		cap = c->got + n;
	if (cap > c->s->c.max_chunked)
		cap = c->s->c.max_chunked; /* >= got + n: sizes are checked first */
	if (!held_add(c, cap - c->body_cap))
		return false;
	uint8_t *b = sh_realloc(c->body, cap);
	if (b == NULL)
		return false; /* (held until body_release) */
	c->body = b;
	c->body_cap = cap;
	return true;
}

/* Decodes the raw bytes in `in` from ck_pos on. */
static int chunk_feed(conn *c)
{
	const size_t max = c->s->c.max_chunked;
	const char *p = c->in + c->ck_pos, *e = c->in + c->in_len;
	int r = CKR_MORE;
	while (p < e && r == CKR_MORE) {
		if (c->ck == CK_DATA) {
			size_t n = (size_t)(e - p);
			if (n > c->ck_left)
				n = (size_t)c->ck_left;
			if (!body_room(c, n)) {
				r = CKR_BUSY;
				break;
			}
			memcpy(c->body + c->got, p, n);
			c->got += n;
			c->ck_left -= n;
			p += n;
			if (c->ck_left == 0)
				c->ck = CK_DATA_CR;
			continue;
		}
		unsigned char b = (unsigned char)*p++;
		if (++c->ck_line > CK_LINE_MAX) {
			r = CKR_BAD;
			break;
		}
		int d;
		switch (c->ck) {
		case CK_SIZE:
			if ((d = hex_digit(b)) >= 0) {
				c->ck_left = c->ck_left * 16 + (uint64_t)d;
				if (c->ck_left > max - c->got)
					r = CKR_BIG;
			} else if ((b == ';' || b == '\r') && c->ck_line > 1) {
				c->ck = b == ';' ? CK_EXT : CK_SIZE_LF;
			} else {
				r = CKR_BAD;
			}
			break;
		case CK_EXT:
			if (b == '\r')
				c->ck = CK_SIZE_LF;
			else if (b == '\n' || b == '\0')
				r = CKR_BAD;
			break;
		case CK_SIZE_LF: /* the last chunk (size 0) leads to the trailer,
		                  * with ck_left 0: an empty line so far */
			if (b != '\n')
				r = CKR_BAD;
			c->ck = c->ck_left > 0 ? CK_DATA : CK_TRAILER;
			c->ck_line = 0;
			break;
		case CK_DATA_CR:
			c->ck = CK_DATA_LF;
			if (b != '\r')
				r = CKR_BAD;
			break;
		case CK_DATA_LF:
			c->ck = CK_SIZE;
			c->ck_line = 0;
			if (b != '\n')
				r = CKR_BAD;
			break;
		case CK_TRAILER: /* ck_left: bytes of this trailer line */
			if (b == '\r')
				c->ck = CK_TRAILER_LF;
			else if (b == '\n' || b == '\0')
				r = CKR_BAD;
			else
				c->ck_left++;
			break;
		case CK_TRAILER_LF: /* (ck_line counts the whole trailer) */
			if (b != '\n')
				r = CKR_BAD;
			else if (c->ck_left == 0)
				r = CKR_DONE; /* the empty line */
			c->ck = CK_TRAILER;
			c->ck_left = 0;
			break;
		default:
			r = CKR_BAD;
			break;
		}
	}
	c->ck_pos = (size_t)(p - c->in);
	return r;
}

/* What a decoder result means for the connection (c->mu held): the body is
 * complete (ACT_REQUEST), or more bytes are needed or the connection was
 * failed (ACT_WAIT), or it cannot be held (ACT_BUSY). */
static int chunk_result(conn *c, int r)
{
	switch (r) {
	case CKR_DONE:
		c->head.content_length = c->got;
		c->used = c->ck_pos;
		return ACT_REQUEST;
	case CKR_BAD:
		conn_fail(c, 400);
		return ACT_WAIT;
	case CKR_BIG:
		conn_fail(c, 413);
		return ACT_WAIT;
	case CKR_BUSY:
		return ACT_BUSY;
	default:
		return ACT_WAIT;
	}
}

/* BODY of a chunked request: drops the raw bytes decoded, reads more,
 * decodes them. */
static int chunk_input(loop *lp, conn *c)
{
	for (;;) {
		size_t keep = c->in_len - c->ck_pos;
		if (c->ck_pos > c->head.len) {
			memmove(c->in + c->head.len, c->in + c->ck_pos, keep);
			c->in_len = c->head.len + keep;
			c->ck_pos = c->head.len;
		}
		if (c->in_cap < c->head.len + IN_BODY_MAX &&
		    !in_resize(c, c->head.len + IN_BODY_MAX, true)) {
			conn_close(lp, c);
			return ACT_WAIT;
		}
		if (c->in_len == c->in_cap) { /* a partial line fills it: malformed */
			conn_fail(c, 400);
			return ACT_WAIT;
		}
		if (!conn_more(c))
			return ACT_WAIT;
		ssize_t n = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
		if (n < 0) {
			conn_close(lp, c);
			return ACT_WAIT;
		}
		if (n == 0)
			return ACT_WAIT;
		c->in_len += (size_t)n;
		int act = chunk_result(c, chunk_feed(c));
		if (act != ACT_WAIT || c->state != C_BODY)
			return act;
	}
}

/* The rest of the body is awaited (c->mu held): its deadline starts, and a
 * client that asked for it is told to go on (100 Continue).  ACT_WAIT, or
 * -1 when that answer cannot be written. */
static int body_wait(conn *c)
{
	c->state = C_BODY;
	c->deadline = c->body_due = rt_now_ms() + c->s->c.timeout_ms;
	if (c->head.expect_continue) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		struct iovec iov = {(void *)cont, sizeof(cont) - 1};
		if (conn_write(c, &iov, 1) < 0)
			return -1;
	}
	return ACT_WAIT;
}

/* The head was accepted: where its body goes (c->mu held).  ACT_REQUEST
 * when it is all there already, ACT_BUSY when it cannot be held. */
static int body_start(conn *c)
{
	uint64_t cl = c->head.content_length;
	size_t have = c->in_len - c->head.len;
	c->body_read = true;
	if (c->head.chunked_body) {
		c->ck = CK_SIZE;
		c->ck_left = 0;
		c->ck_line = 0;
		c->ck_pos = c->head.len;
		c->got = 0;
		int act = chunk_result(c, chunk_feed(c));
		if (act != ACT_WAIT || c->state != C_HEAD)
			return act;
		return body_wait(c);
	}
	if (cl == 0) {
		c->used = c->head.len;
		return ACT_REQUEST;
	}
	if (cl <= IN_BODY_MAX) {
		if (!held_add(c, (size_t)cl))
			return ACT_BUSY;
		size_t need = c->head.len + (size_t)cl;
		if (need > c->in_cap && !in_resize(c, need, true))
			return ACT_BUSY;
		c->got = have < cl ? have : (size_t)cl;
	} else {
		size_t cap = have > IN_BODY_MAX ? have : IN_BODY_MAX;
		if (cap > cl)
			cap = (size_t)cl;
		if (!held_add(c, cap))
			return ACT_BUSY;
		if ((c->body = sh_malloc(cap)) == NULL)
			return ACT_BUSY;
		c->body_cap = cap;
		c->got = have < cap ? have : cap;
		memcpy(c->body, c->in + c->head.len, c->got);
	}
	c->used = c->head.len + c->got;
	if (c->got == cl)
		return ACT_REQUEST;
	return body_wait(c);
}

/* Reads and parses as far as the bytes go (c->mu held; HEAD or BODY).
 * Returns what the caller hands to the endpoint, or ACT_WAIT (maybe after
 * closing). */
static int conn_input(loop *lp, conn *c)
{
	for (;;) {
		if (c->state == C_HEAD) {
			if (c->in_len > 0) {
				switch (rt_httpd_parse(c->in, c->in_len, &c->scanned, &c->head)) {
				case RT_HTTPD_DONE:
					c->req.head = &c->head;
					c->req.body = NULL;
					c->req.len = 0;
					c->req.peer_busy = false;
					c->req.cors = false;
					c->body_read = false;
					c->used = c->head.len;
					return ACT_HEAD;
				case RT_HTTPD_BAD:
					conn_fail(c, 400);
					return ACT_WAIT;
				case RT_HTTPD_TOO_LARGE:
					conn_fail(c, 431);
					return ACT_WAIT;
				case RT_HTTPD_VERSION:
					conn_fail(c, 505);
					return ACT_WAIT;
				case RT_HTTPD_INCOMPLETE:
					break;
				}
			}
			if (!conn_more(c))
				return ACT_WAIT;
			if (c->in_len == c->in_cap) {
				/* The parser refuses a head of RT_HTTPD_MAX_HEAD bytes
				 * before the buffer outgrows it. */
				size_t cap = c->in_cap == 0 ? IN_INIT : c->in_cap * 2;
				if (cap > RT_HTTPD_MAX_HEAD)
					cap = RT_HTTPD_MAX_HEAD;
				if (cap <= c->in_len || !in_resize(c, cap, false)) {
					conn_close(lp, c);
					return ACT_WAIT;
				}
			}
			ssize_t n = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
			if (n < 0) {
				conn_close(lp, c);
				return ACT_WAIT;
			}
			if (n == 0)
				return ACT_WAIT;
			c->in_len += (size_t)n;
			continue;
		}
		assert(c->state == C_BODY);
		if (c->head.chunked_body)
			return chunk_input(lp, c);
		uint64_t cl = c->head.content_length;
		if (c->got == cl)
			return ACT_REQUEST;
		if (!conn_more(c))
			return ACT_WAIT;
		ssize_t n;
		if (c->body == NULL) {
			n = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
			if (n > 0) {
				c->in_len += (size_t)n;
				size_t have = c->in_len - c->head.len;
				c->got = have < cl ? have : (size_t)cl;
				c->used = c->head.len + c->got;
			}
		} else {
			if (c->got == c->body_cap) {
				size_t cap = c->body_cap * 2 < cl ? c->body_cap * 2 : (size_t)cl;
				uint8_t *b;
				if (!held_add(c, cap - c->body_cap))
					return ACT_BUSY;
				if ((b = sh_realloc(c->body, cap)) == NULL)
					return ACT_BUSY;
				c->body = b;
				c->body_cap = cap;
			}
			n = conn_read(c, c->body + c->got, c->body_cap - c->got);
			if (n > 0)
				c->got += (size_t)n;
		}
		if (n < 0) {
			conn_close(lp, c);
			return ACT_WAIT;
		}
		if (n == 0)
			return ACT_WAIT;
	}
}

/* The request goes to the endpoint: BUSY, with a reference of its own
 * (c->mu held; released). */
static void hand_over(conn *c)
{
	c->state = C_BUSY;
	if (c->body_read && c->head.content_length > 0) {
		c->req.body = c->body != NULL ? c->body : (uint8_t *)c->in + c->head.len;
		c->req.len = (size_t)c->head.content_length;
	}
	atomic_fetch_add(&c->refs, 1);
	atomic_fetch_add(&c->s->busy, 1);
	pthread_mutex_unlock(&c->mu);
}

static void linger_read(loop *lp, conn *c);
static void conn_move(loop *lp, conn *c);

/* Serves the connection as far as it goes: reads, and hands heads and
 * requests to the endpoint (I/O thread; called with c->mu held, returns
 * with it released). */
static void conn_serve(loop *lp, conn *c)
{
	rt_httpd *s = lp->s;
	while (c->fd >= 0 && (c->state == C_HEAD || c->state == C_BODY)) {
		int act = conn_input(lp, c);
		if (act == ACT_WAIT)
			break;
		if (act < 0) {
			conn_close(lp, c);
			break;
		}
		if (act == ACT_BUSY)
			c->body_read = false;
		hand_over(c);
		if (act == ACT_REQUEST) {
			s->c.ops.request(s->c.arg, &c->req);
			return; /* the request is the endpoint's now */
		}
		if (act == ACT_BUSY) {
			s->c.ops.busy(s->c.arg, &c->req);
			pthread_mutex_lock(&c->mu);
			assert(c->state != C_BUSY); /* ops.busy answers */
			continue;
		}
		bool read_body = s->c.ops.head(s->c.arg, &c->req);
		pthread_mutex_lock(&c->mu);
		if (!read_body) {
			assert(c->state != C_BUSY); /* ops.head answered */
			continue;
		}
		assert(c->state == C_BUSY);
		request_end(s);
		atomic_fetch_sub(&c->refs, 1); /* the I/O thread's own remains */
		c->state = C_HEAD;             /* body_start moves on */
		int next = body_start(c);
		if (next == ACT_WAIT || next < 0) {
			if (next < 0)
				conn_close(lp, c);
			continue;
		}
		/* The whole body was there, or it cannot be held: hand it over. */
		if (next == ACT_BUSY)
			c->body_read = false;
		hand_over(c);
		if (next == ACT_REQUEST) {
			s->c.ops.request(s->c.arg, &c->req);
			return;
		}
		s->c.ops.busy(s->c.arg, &c->req);
		pthread_mutex_lock(&c->mu);
		assert(c->state != C_BUSY);
	}
	/* Refused with its body unread: drop what the socket holds now.  Its
	 * buffer may be full already (a client blocked sending its body), and
	 * then no new edge would come before the linger timeout, whose close
	 * would reset the connection under the answer. */
	if (c->fd >= 0 && c->state == C_LINGER && c->readable)
		linger_read(lp, c);
	if (c->fd >= 0 && c->moving)
		conn_move(lp, c);
	pthread_mutex_unlock(&c->mu);
}

/* LINGER: read and drop until the peer's EOF (c->mu held). */
static void linger_read(loop *lp, conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, lp->scratch, sizeof(lp->scratch));
		if (n > 0) {
			c->lingered += (size_t)n;
			if (c->lingered > LINGER_MAX)
				break;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		break;
	}
	conn_close(lp, c);
}

/* ------------------------------------------------------------------------ */
/* The I/O threads                                                           */
/* ------------------------------------------------------------------------ */

/* The connection has something to do that no epoll event will announce:
 * bytes already read (a pipelined request) or noticed while it was busy
 * (c->mu held). */
static void post_resume(conn *c)
{
	if (c->posted)
		return;
	c->posted = true;
	atomic_fetch_add(&c->refs, 1);
	loop *lp = c->lp;
	if (tl_loop == lp) {
		c->rlink = lp->local;
		lp->local = c;
		return;
	}
	pthread_mutex_lock(&lp->mu);
	c->rlink = lp->remote;
	lp->remote = c;
	pthread_mutex_unlock(&lp->mu);
	loop_wake(lp);
}

/*
 * HTTPS handshakes run on a loop of their own (the handshake loop, which
 * holds HTTPS's listener): a handshake costs the router milliseconds of CPU
 * (README, TLS), so clients that open connections fast -- or a hostile one
 * -- delay other handshakes, never the requests of established
 * connections.  Once its handshake is over (tls_read sets c->moving),
 * conn_serve hands the connection to an I/O loop, round robin: out of the
 * handshake loop's epoll and list, onto the target's `moved` list (its
 * mutex), which the target takes at its next wake-up (conn_adopt: into its
 * epoll, edge-triggered, and served at once: the client's first request
 * may be in already).  The handshake loop's reference travels with it.  A
 * target that has stopped takes none (no_moves): the connection is closed
 * where it is.  (c->mu held.)
 */
static void conn_move(loop *lp, conn *c)
{
	rt_httpd *s = lp->s;
	c->moving = false;
	loop *to = &s->loops[atomic_fetch_add(&s->next_move, 1) % s->n_io];
	pthread_mutex_lock(&to->mu);
	if (to->no_moves) {
		pthread_mutex_unlock(&to->mu);
		conn_close(lp, c);
		return;
	}
	epoll_ctl(lp->ep, EPOLL_CTL_DEL, c->fd, NULL);
	conn_unlink(lp, c);
	c->lp = to;
	c->mlink = to->moved;
	to->moved = c;
	pthread_mutex_unlock(&to->mu);
	loop_wake(to);
}

/* A connection moved here (conn_move): registered and served. */
static void conn_adopt(loop *lp, conn *c)
{
	pthread_mutex_lock(&c->mu);
	conn_link(lp, c);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
	                         .data.ptr = c};
	if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		conn_close(lp, c);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	c->readable = true;
	conn_serve(lp, c); /* (unlocks) */
}

/* Epoll events of a connection.  If another thread holds its lock, it is
 * writing the answer right now and the client's next request came before
 * sendmsg returned: the events wait for the end of this batch rather than
 * the whole loop for the lock. */
static void on_conn(loop *lp, conn *c, uint32_t ev, bool wait)
{
	if (wait) {
		pthread_mutex_lock(&c->mu);
	} else if (pthread_mutex_trylock(&c->mu) != 0) {
		if (c->deferred_ev == 0) {
			c->dlink = lp->deferred;
			lp->deferred = c;
		}
		c->deferred_ev |= ev;
		return;
	}
	if (c->fd < 0)
		goto out;
	if (ev & (EPOLLERR | EPOLLHUP)) {
		conn_close(lp, c);
		goto out;
	}
	if (ev & EPOLLRDHUP)
		c->peer_eof = true;
	if (ev & (EPOLLIN | EPOLLRDHUP))
		c->readable = true;
	if ((ev & EPOLLOUT) && c->wq_off < c->wq_len && conn_flush(c) < 0) {
		conn_close(lp, c);
		goto out;
	}
	switch (c->state) {
	case C_HEAD:
	case C_BODY:
		conn_serve(lp, c);
		return;
	case C_LINGER:
		if (c->readable)
			linger_read(lp, c);
		break;
	default:
		break; /* BUSY, WRITE: c->readable is looked at after the answer */
	}
out:
	pthread_mutex_unlock(&c->mu);
}

static void resume(loop *lp, conn *list)
{
	while (list != NULL) {
		conn *c = list;
		list = c->rlink;
		pthread_mutex_lock(&c->mu);
		c->posted = false;
		if (c->fd >= 0 && (c->state == C_HEAD || c->state == C_BODY))
			conn_serve(lp, c);
		else
			pthread_mutex_unlock(&c->mu);
		conn_unref(c);
	}
}

/* The epoll tags of the listeners (connections are tagged with their conn,
 * the loop's eventfd with its loop). */
static char tag_http, tag_https;

/* The listener lp accepts on (HTTPS's for the handshake loop), or -1. */
static int loop_lfd(const loop *lp)
{
	return lp->handshakes ? lp->s->tls_lfd : lp->s->lfd;
}

static void listen_pause(loop *lp, int err)
{
	rt_httpd *s = lp->s;
	if (!atomic_exchange(&s->out_of_fds, true))
		rt_log("http: accept: %s; pausing accepts for %d ms at a time", strerror(err),
		       RT_HTTPD_ACCEPT_PAUSE_MS);
	epoll_ctl(lp->ep, EPOLL_CTL_DEL, loop_lfd(lp), NULL);
	lp->listening = false;
	lp->paused_until = rt_now_ms() + RT_HTTPD_ACCEPT_PAUSE_MS;
}

static void listen_resume(loop *lp)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
	                         .data.ptr = lp->handshakes ? &tag_https : &tag_http};
	if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, loop_lfd(lp), &ev) == 0)
		lp->listening = true;
	else
		lp->paused_until = rt_now_ms() + RT_HTTPD_ACCEPT_PAUSE_MS;
}

/* A connection over max_conns or max_conns_peer: a clean refusal the
 * client can read (and retry: botocore retries 503), before anything of
 * its request arrived. */
static void refuse(int fd)
{
	static const char full[] = "HTTP/1.1 503 Service Unavailable\r\n"
	                           "Content-Type: text/plain\r\n"
	                           "Content-Length: 20\r\n"
	                           "Retry-After: 1\r\n"
	                           "Connection: close\r\n\r\n"
	                           "too many connections";
	ssize_t w = send(fd, full, sizeof(full) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)w;
	shutdown(fd, SHUT_WR);
	close(fd);
}

int rt_httpd_handshake_slot(const struct sockaddr_storage *ss)
{
	uint8_t a[16], len;
	if (!peer_key(ss, a, &len))
		return -1;
	return (int)(peer_hash(a, len) % RT_HTTPD_HANDSHAKE_SLOTS);
}

/* Whether peer ss may begin another HTTPS handshake now (the handshake
 * loop's thread): its slot's bucket refills at handshakes_peer a second up
 * to twice that, and each handshake takes a token.  Addresses whose hashes
 * share a slot share its bucket (1 in RT_HTTPD_HANDSHAKE_SLOTS for two
 * given addresses): an address never begins more than the rate, however it
 * alternates with another (a slot that went to whichever address came last
 * with a full bucket gave two alternating addresses a burst each time). */
static bool handshake_allowed(rt_httpd *s, const struct sockaddr_storage *ss, int64_t now)
{
	int slot = rt_httpd_handshake_slot(ss);
	if (s->c.handshakes_peer == UINT32_MAX || s->hs == NULL || slot < 0)
		return true;
	double rate = s->c.handshakes_peer, burst = 2 * rate;
	hs_slot *h = &s->hs[slot];
	if (h->at_ms == 0) {
		h->tokens = burst;
	} else if (now > h->at_ms) {
		h->tokens += rate * (double)(now - h->at_ms) / 1000.0;
		if (h->tokens > burst)
			h->tokens = burst;
	}
	h->at_ms = now;
	if (h->tokens < 1)
		return false;
	h->tokens -= 1;
	return true;
}

/* A new connection fd from peer ss (accepted; HTTPS when tls): counted,
 * refused when over a cap (HTTPS: closed, a plain answer would be
 * garbage to a TLS client), else registered with lp's epoll. */
static void conn_add(loop *lp, int fd, const struct sockaddr_storage *ss, bool tls)
{
	rt_httpd *s = lp->s;
	if (tls) {
		int64_t now = rt_now_ms();
		if (!handshake_allowed(s, ss, now)) {
			close(fd);
			atomic_fetch_add(&s->c.stats->https_refused, 1);
			s->hs_refused++;
			if (now - s->hs_logged >= 10000) {
				char host[NI_MAXHOST];
				if (getnameinfo((const struct sockaddr *)ss, sizeof(*ss), host,
				                sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
					snprintf(host, sizeof(host), "?");
				rt_log("https: %s began more than %u connections a second: "
				       "closing its new ones (%" PRIu64 " so far; logged at most "
				       "every 10 s)",
				       host, s->c.handshakes_peer, s->hs_refused);
				s->hs_logged = now;
			}
			return;
		}
		atomic_fetch_add(&s->c.stats->https_begun, 1);
	}
	if (atomic_fetch_add(&s->n_conns, 1) >= s->c.max_conns) {
		atomic_fetch_sub(&s->n_conns, 1);
		if (tls)
			close(fd);
		else
			refuse(fd);
		if (!atomic_exchange(&s->refusing, true))
			rt_log("http: %u connections open: refusing new ones until some close",
			       s->c.max_conns);
		return;
	}
	atomic_store(&s->refusing, false);
	bool full;
	peer *p = peer_get(s, ss, &full);
	if (full) {
		atomic_fetch_sub(&s->n_conns, 1);
		if (tls)
			close(fd);
		else
			refuse(fd);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	conn *c = sh_calloc(1, sizeof(*c));
	if (c == NULL) {
		atomic_fetch_sub(&s->n_conns, 1);
		close(fd);
		peer_closed(s, p);
		peer_put(s, p);
		return;
	}
	c->peer = p;
	c->s = s;
	c->lp = lp;
	c->fd = fd;
	c->state = C_HEAD;
	c->readable = true;
	c->deadline = rt_now_ms() + s->c.head_ms;
	atomic_init(&c->refs, 1);
	pthread_mutex_init(&c->mu, NULL);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
	                         .data.ptr = c};
	if ((tls && !tls_setup(c, s->c.tls)) || epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		atomic_fetch_sub(&s->n_conns, 1);
		close(fd);
		c->fd = -1;
		peer_closed(s, p);
		peer_drop(c);
		conn_unref(c);
		return;
	}
	c->next = lp->conns;
	if (lp->conns != NULL)
		lp->conns->prev = c;
	lp->conns = c;
}

static void on_accept(loop *lp, bool tls)
{
	rt_httpd *s = lp->s;
	int lfd = tls ? s->tls_lfd : s->lfd;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			if (e == EAGAIN || e == EWOULDBLOCK)
				return;
			if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM)
				continue;
			listen_pause(lp, e); /* EMFILE, ENFILE, ENOBUFS, ENOMEM, ... */
			return;
		}
		atomic_store(&s->out_of_fds, false);
		conn_add(lp, fd, &ss, tls);
	}
}

/* Closes connections whose state has timed out. */
static void scan(loop *lp, int64_t now)
{
	conn *next;
	for (conn *c = lp->conns; c != NULL; c = next) {
		next = c->next;
		pthread_mutex_lock(&c->mu);
		if (c->state != C_BUSY && now >= c->deadline)
			conn_close(lp, c);
		pthread_mutex_unlock(&c->mu);
	}
}

static void release_closed(loop *lp)
{
	while (lp->closed != NULL) {
		conn *c = lp->closed;
		lp->closed = c->clink;
		conn_unref(c);
	}
}

static void *loop_main(void *arg)
{
	loop *lp = arg;
	rt_httpd *s = lp->s;
	tl_loop = lp;
	struct epoll_event ev[EVENTS];
	lp->next_scan = rt_now_ms() + SCAN_EVERY_MS;
	while (!atomic_load(&s->stopping)) {
		int64_t now = rt_now_ms();
		int64_t until = lp->next_scan;
		if (!lp->listening && loop_lfd(lp) >= 0 && lp->paused_until < until)
			until = lp->paused_until;
		int timeout = lp->local != NULL ? 0 : until > now ? (int)(until - now) : 0;
		int n = epoll_wait(lp->ep, ev, EVENTS, timeout);
		if (n < 0 && errno != EINTR) {
			rt_log("http: epoll_wait: %s", strerror(errno));
			break;
		}
		if (s->c.ops.burst != NULL)
			s->c.ops.burst(s->c.arg, true);
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &tag_http || p == &tag_https) {
				on_accept(lp, p == &tag_https);
			} else if (p == lp) {
				uint64_t x;
				ssize_t r = read(lp->evfd, &x, sizeof(x));
				(void)r;
			} else {
				on_conn(lp, p, ev[i].events, false);
			}
		}
		pthread_mutex_lock(&lp->mu);
		conn *remote = lp->remote;
		lp->remote = NULL;
		conn *moved = lp->moved;
		lp->moved = NULL;
		pthread_mutex_unlock(&lp->mu);
		while (moved != NULL) {
			conn *c = moved;
			moved = c->mlink;
			conn_adopt(lp, c);
		}
		resume(lp, remote);
		conn *local = lp->local;
		lp->local = NULL;
		resume(lp, local);
		while (lp->deferred != NULL) {
			conn *c = lp->deferred;
			lp->deferred = c->dlink;
			uint32_t e = c->deferred_ev;
			c->deferred_ev = 0;
			on_conn(lp, c, e, true); /* (closed ones are freed after) */
		}
		if (s->c.ops.burst != NULL)
			s->c.ops.burst(s->c.arg, false);
		release_closed(lp);
		now = rt_now_ms();
		if (!lp->listening && loop_lfd(lp) >= 0 && now >= lp->paused_until)
			listen_resume(lp);
		if (now >= lp->next_scan) {
			scan(lp, now);
			release_closed(lp);
			lp->next_scan = now + SCAN_EVERY_MS;
		}
	}
	/* Stopping: every connection closes, those moved here included (and
	 * none is moved here after: no_moves); requests in the endpoint's
	 * hands keep theirs until answered. */
	lp->deferred = NULL;
	pthread_mutex_lock(&lp->mu);
	conn *moved = lp->moved;
	lp->moved = NULL;
	lp->no_moves = true;
	pthread_mutex_unlock(&lp->mu);
	while (moved != NULL) {
		conn *c = moved;
		moved = c->mlink;
		pthread_mutex_lock(&c->mu);
		conn_link(lp, c);
		pthread_mutex_unlock(&c->mu);
	}
	while (lp->conns != NULL) {
		conn *c = lp->conns;
		pthread_mutex_lock(&c->mu);
		conn_close(lp, c);
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_lock(&lp->mu);
	conn *remote = lp->remote;
	lp->remote = NULL;
	pthread_mutex_unlock(&lp->mu);
	resume(lp, remote);
	resume(lp, lp->local);
	lp->local = NULL;
	release_closed(lp);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                            */
/* ------------------------------------------------------------------------ */

/* A listening socket on hostport: *fd, and the port it got. */
static int listen_on(const char *hostport, int *out_fd, int *out_port, char *errmsg)
{
	char host[256], port[16];
	const char *colon = strrchr(hostport, ':');
	if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= sizeof(port))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "http address %s: expected HOST:PORT",
		               hostport);
	size_t hl = (size_t)(colon - hostport);
	const char *h = hostport;
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "http address %s: host too long",
		               hostport);
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res;
	bool any = host[0] == '\0' || strcmp(host, "*") == 0;
	int gai = getaddrinfo(any ? NULL : host, port, &hints, &res);
	if (gai != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "http address %s: %s", hostport,
		               gai_strerror(gai));
	int err = 0;
	for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		                a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);
			getsockname(fd, (struct sockaddr *)&ss, &sl);
			*out_port = ss.ss_family == AF_INET6
			                ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
			                : ntohs(((struct sockaddr_in *)&ss)->sin_port);
			*out_fd = fd;
			freeaddrinfo(res);
			return SHOAL_OK;
		}
		err = errno;
		close(fd);
	}
	freeaddrinfo(res);
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "http server %s: %s", hostport, strerror(err));
}

static void loops_stop(rt_httpd *s)
{
	atomic_store(&s->stopping, true);
	for (uint32_t i = 0; i < s->n_loops; i++) {
		loop_wake(&s->loops[i]);
	}
	for (uint32_t i = 0; i < s->n_loops; i++)
		if (s->loops[i].started)
			pthread_join(s->loops[i].th, NULL);
}

static void free_server(rt_httpd *s)
{
	for (uint32_t i = 0; i < s->n_loops; i++) {
		loop *lp = &s->loops[i];
		if (lp->ep >= 0)
			close(lp->ep);
		if (lp->evfd >= 0)
			close(lp->evfd);
		pthread_mutex_destroy(&lp->mu);
	}
	sh_free(s->loops);
	sh_free(s->hs);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->tls_lfd >= 0)
		close(s->tls_lfd);
	for (uint32_t i = 0; i < PEER_BUCKETS; i++)
		assert(s->peers[i] == NULL); /* every connection dropped its peer */
	pthread_mutex_destroy(&s->peers_mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
}

int rt_httpd_start(rt_httpd **out, const rt_httpd_conf *conf, char *errmsg)
{
	*out = NULL;
	assert(conf->threads >= 1 && conf->ops.head && conf->ops.request && conf->ops.busy);
	rt_httpd *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	s->c = *conf;
	if (s->c.timeout_ms == 0)
		s->c.timeout_ms = RT_HTTPD_TIMEOUT_MS;
	if (s->c.min_rate == 0)
		s->c.min_rate = RT_HTTPD_MIN_RATE;
	if (s->c.head_ms == 0)
		s->c.head_ms = RT_HTTPD_HEAD_MS;
	if (s->c.max_held_peer == 0 || s->c.max_held_peer > s->c.max_held)
		s->c.max_held_peer = s->c.max_held;
	if (s->c.idle_ms == 0)
		s->c.idle_ms = RT_HTTPD_IDLE_MS;
	if (s->c.max_chunked == 0)
		s->c.max_chunked = RT_HTTPD_MAX_CHUNKED;
	if (s->c.handshakes_peer == 0)
		s->c.handshakes_peer = RT_HTTPD_HANDSHAKES_PEER;
	if (s->c.stats == NULL)
		s->c.stats = &s->own_stats;
	s->hs_logged = INT64_MIN / 2;
	s->lfd = s->tls_lfd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->peers_mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	/* Leave descriptors for the rest of the router (nng, logs). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		rlim_t room = rl.rlim_cur > 512 ? rl.rlim_cur - 256 : rl.rlim_cur / 2;
		if (s->c.max_conns > room) {
			/* (one address keeps the same share of the fewer) */
			s->c.max_conns_peer =
			    (uint32_t)((uint64_t)s->c.max_conns_peer * room / s->c.max_conns);
			if (conf->max_conns_peer > 0 && s->c.max_conns_peer == 0)
				s->c.max_conns_peer = 1;
			s->c.max_conns = (uint32_t)room;
		}
	}
	int rc = conf->hostport != NULL ? listen_on(conf->hostport, &s->lfd, &s->port, errmsg)
	                                : SHOAL_OK;
	if (rc == SHOAL_OK && conf->tls_hostport != NULL)
		rc = conf->tls == NULL
		         ? sh_errf(errmsg, SHOAL_E_INTERNAL, "https: no configuration")
		         : listen_on(conf->tls_hostport, &s->tls_lfd, &s->tls_port, errmsg);
	if (rc != SHOAL_OK)
		goto err;
	if (s->tls_lfd >= 0 &&
	    (s->hs = sh_calloc(RT_HTTPD_HANDSHAKE_SLOTS, sizeof(*s->hs))) == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err;
	}
	/* The I/O loops, and HTTPS's handshake loop last (conn_move). */
	uint32_t n_loops = conf->threads + (s->tls_lfd >= 0 ? 1 : 0);
	s->n_io = conf->threads;
	s->loops = sh_calloc(n_loops, sizeof(*s->loops));
	if (s->loops == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err;
	}
	for (uint32_t i = 0; i < n_loops; i++) {
		loop *lp = &s->loops[i];
		lp->handshakes = i >= conf->threads;
		lp->s = s;
		lp->ep = epoll_create1(EPOLL_CLOEXEC);
		lp->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		pthread_mutex_init(&lp->mu, NULL);
		s->n_loops++;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = lp};
		if (lp->ep < 0 || lp->evfd < 0 ||
		    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->evfd, &ev) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "http server: epoll: %s",
			             strerror(errno));
			goto err_after_loops;
		}
		if (loop_lfd(lp) >= 0)
			listen_resume(lp);
		if (loop_lfd(lp) >= 0 && !lp->listening) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "http server: epoll: %s",
			             strerror(errno));
			goto err_after_loops;
		}
	}
	for (uint32_t i = 0; i < s->n_loops; i++) {
		if (pthread_create(&s->loops[i].th, NULL, loop_main, &s->loops[i]) != 0) {
			rc =
			    sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot start http I/O thread %u", i);
			goto err_after_loops;
		}
		s->loops[i].started = true;
	}
	*out = s;
	return SHOAL_OK;

err_after_loops:
	loops_stop(s);
err:
	free_server(s);
	return rc;
}

int rt_httpd_port(const rt_httpd *s)
{
	return s->port;
}

int rt_httpd_tls_port(const rt_httpd *s)
{
	return s->tls_port;
}

void rt_httpd_stop(rt_httpd *s)
{
	if (s == NULL)
		return;
	loops_stop(s);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->tls_lfd >= 0)
		close(s->tls_lfd);
	s->lfd = s->tls_lfd = -1;
	pthread_mutex_lock(&s->mu);
	while (atomic_load(&s->busy) > 0) {
		struct timespec ts;
		sh_timespec_in(CLOCK_REALTIME, 100, &ts);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
	assert(atomic_load(&s->held) == 0);
	free_server(s);
}
