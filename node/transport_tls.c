/*
 * transport_tls.c -- raft's transport over mutually authenticated TLS, in
 * raft's own loop.
 *
 * raft 0.15's uv io takes any raft_uv_transport that hands it libuv streams
 * (struct raft_uv_transport in raft/uv.h): it reads and writes them with
 * uv_read_start / uv_write and closes them with uv_close, nothing
 * TCP-specific.  So TLS needs no change to raft: each connection is a TCP
 * socket of the loop with an mbedtls session on it (the TLS library nng is
 * built on, here used directly so that everything runs on the loop: no
 * thread per connection and no hand-off between threads per message), and
 * raft gets one end of a socketpair whose other end the loop also reads:
 *
 *   raft --uv_pipe--> fd a ==socketpair== fd b --ssl_write--> TCP (uv_tcp)
 *   raft <-uv_pipe--- fd a ==socketpair== fd b <--ssl_read--- TCP (uv_tcp)
 *
 * (The previous version pumped each direction on a thread of its own through
 * an nng TLS stream; PutItem ran at 0.69 of plain.  Measured with the
 * change: see the README's TLS section.)
 *
 * Who is at the other end: both sides show a certificate of the cluster CA
 * (common/tls.h's files) and require the peer's; the certificate's subject
 * CN must be "node-<id>" of the server the connection is for -- the dialled
 * id for an outgoing connection, the id announced in our handshake for an
 * incoming one.  So a router's certificate, or node 2's claiming to be
 * node 3, gets no Raft connection.
 *
 * What a peer sends raft is checked on its way (raftframe.h: raft 0.15
 * trusts its peers' framing and lengths, and reads past its buffers when
 * they lie): the first byte that breaks raft's framing closes the
 * connection before raft sees the buffer holding it.
 *
 * The handshake (what raft_uv_tcp's is for: who is connecting) is ours and
 * travels inside TLS: three little-endian u64 -- SH_TLS_HANDSHAKE, the
 * connecting server's id, the length of its address (at most SH_ADDR_MAX,
 * checked before it is read; nothing is allocated for it) -- then the
 * address.  A connection that has not finished TLS's handshake and ours
 * within HANDSHAKE_MS (CONNECT_MS for ours, resolving and connecting
 * included) is dropped, and at most ACCEPTING_MAX accepted connections may be
 * in their handshakes at once (more are closed at once).  A peer that takes
 * nothing we send for SEND_STALL_MS is dropped, and so (by the kernel:
 * TCP_USER_TIMEOUT) is one that acknowledges nothing for
 * NODE_RAFT_UNACKED_MS.  Each direction holds at most
 * about PENDING_HIGH bytes on its way: past it, the side feeding it stops
 * reading until the writes drain.
 *
 * Closing: either end's going away closes the connection -- raft closing its
 * pipe makes fd b read EOF, the peer leaving makes the socket read EOF; both
 * close the socket and fd b (so raft's pipe reads EOF).  close() stops the
 * listener, closes every connection and reports closed once every handle has
 * been closed (connect requests still in progress then get RAFT_CANCELED, as
 * raft's interface asks).
 *
 * Threads: all of it runs on the loop thread (name resolution in libuv's
 * pool, as raft_uv_tcp does).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/error.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "common/alloc.h"
#include "common/tls.h"
#include "common/tls_mbed.h"
#include "node/node.h"
#include "node/raftframe.h"

#define SH_TLS_HANDSHAKE UINT64_C(0x53686f616c526674) /* "ShoalRft" */
#define HANDSHAKE_MS     5000
#define CONNECT_MS       10000
#define SEND_STALL_MS    10000
#define TICK_MS          1000
/* A closed connection's last bytes (a refusal's alert) may take this long
 * to leave before the socket is closed anyway. */
#define CLOSE_DRAIN_MS 2000
/* Connections accepted and still in their handshakes, at most: more are
 * closed at once. */
#define ACCEPTING_MAX 64
#define READ_CHUNK    (64u * 1024)
/* Bytes on their way in one direction (uv_writes not yet done) past which
 * the side feeding it stops reading; it reads again below PENDING_LOW. */
#define PENDING_HIGH (4u * 1024 * 1024)
#define PENDING_LOW  (1u * 1024 * 1024)

typedef struct conn conn;

typedef struct tls_transport {
	struct raft_uv_transport *outer;
	uv_loop_t *loop;
	raft_id id;
	char address[SH_ADDR_MAX];
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;
	node_log_budget refused;    /* inbound TLS handshakes' failures, logged */
	node_log_budget bad_frames; /* inbound messages raft must not read, logged */

	sh_tls_ident ident;
	mbedtls_ssl_config server_conf, client_conf;

	uv_tcp_t listener;
	uv_timer_t timer;
	bool listener_open, timer_open;
	unsigned handles; /* handles (of the transport and its connections) not yet closed */
	conn *conns;
	unsigned n_accepting; /* incoming connections in their handshakes */
	bool closing, closed_reported;
	uint8_t pipe_buf[READ_CHUNK]; /* raft's bytes, encrypted as soon as read */
} tls_transport;

enum { C_RESOLVING, C_CONNECTING, C_TLS, C_OURS, C_OPEN };

struct conn {
	tls_transport *t;
	conn *next, *prev;
	int state;
	bool outbound, closing, delivered, tcp_stopped, pipe_stopped;
	struct raft_uv_connect *req; /* outbound */
	raft_id peer_id;             /* outbound: dialled; inbound: announced */
	raft_id cert_id;             /* the peer certificate's node id */
	char host[SH_ADDR_MAX], port[8];
	uint64_t started, progress; /* uv_now */

	uv_getaddrinfo_t gai;
	uv_connect_t connect_req;
	uv_shutdown_t shutdown_req;
	uint64_t closed_at; /* uv_now at conn_close (the socket may drain until CLOSE_DRAIN_MS) */
	uv_tcp_t tcp;
	uv_pipe_t pipe; /* fd b */
	bool gai_pending, tcp_open, pipe_open;
	unsigned open; /* of the above, not yet closed or called back */

	mbedtls_ssl_context ssl;
	bool ssl_init;
	uint8_t *in; /* ciphertext received, not yet taken by mbedtls */
	size_t in_off, in_len, in_cap;
	uint8_t *out; /* ciphertext made, not yet handed to uv_write */
	size_t out_len, out_cap;
	size_t tcp_pending, pipe_pending; /* bytes in uv_writes not yet done */

	uint8_t hs[24 + SH_ADDR_MAX]; /* inbound: our handshake as it arrives */
	size_t hs_len;
	node_rf rf; /* inbound: raft's messages, checked before raft reads them */
};

typedef struct wreq {
	uv_write_t req;
	conn *c;
	size_t len;
	uint8_t data[]; /* len bytes */
} wreq;

static void conn_close(conn *c);
static void conn_refuse(conn *c, unsigned char alert);
static void on_shutdown(uv_shutdown_t *req, int status);
static void pump_in(conn *c);

/* ------------------------------------------------------------------------ */
/* Little helpers                                                            */
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

static void log_tls(const conn *c, const char *what, int rv)
{
	char buf[160];
	mbedtls_strerror(rv, buf, sizeof(buf));
	node_logf(NODE_LOG_WARN, "raft transport: %s %s:%s (node %llu): %s", what,
	          c->outbound ? c->host : "peer", c->outbound ? c->port : "",
	          (unsigned long long)c->peer_id, buf);
}

/* The node id in a peer certificate's subject CN ("node-<id>"), or 0. */
static raft_id cert_node_id(const mbedtls_ssl_context *ssl)
{
	uint64_t id;
	return sh_tls_cert_peer(mbedtls_ssl_get_peer_cert(ssl), &id) == SH_TLS_PEER_NODE ? id : 0;
}

/* ------------------------------------------------------------------------ */
/* mbedtls's I/O: memory, the loop moves it                                  */
/* ------------------------------------------------------------------------ */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
	conn *c = ctx;
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 16 * 1024;
		while (cap < c->out_len + len)
			cap *= 2;
		uint8_t *p = sh_realloc(c->out, cap);
		if (p == NULL)
			return MBEDTLS_ERR_SSL_ALLOC_FAILED;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, buf, len);
	c->out_len += len;
	return (int)len;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
	conn *c = ctx;
	size_t avail = c->in_len - c->in_off;
	if (avail == 0)
		return MBEDTLS_ERR_SSL_WANT_READ;
	if (len > avail)
		len = avail;
	memcpy(buf, c->in + c->in_off, len);
	c->in_off += len;
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	return (int)len;
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                    */
/* ------------------------------------------------------------------------ */

static wreq *wreq_new(conn *c, size_t cap)
{
	wreq *w = sh_malloc(sizeof(*w) + cap);
	if (w != NULL) {
		w->c = c;
		w->len = 0;
	}
	return w;
}

static void on_pipe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_pipe_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_tcp_written(uv_write_t *req, int status)
{
	wreq *w = (wreq *)req;
	conn *c = w->c;
	c->tcp_pending -= w->len;
	sh_free(w);
	if (status != 0) {
		if (!c->closing)
			conn_close(c);
		return;
	}
	c->progress = uv_now(c->t->loop);
	if (c->pipe_stopped && c->tcp_pending < PENDING_LOW && !c->closing) {
		c->pipe_stopped = false;
		uv_read_start((uv_stream_t *)&c->pipe, on_pipe_alloc, on_pipe_read);
	}
}

/* Hands the ciphertext mbedtls made to the socket. */
static bool flush_out(conn *c)
{
	if (c->out_len == 0 || c->closing)
		return true;
	wreq *w = wreq_new(c, c->out_len);
	if (w == NULL) {
		conn_close(c);
		return false;
	}
	memcpy(w->data, c->out, c->out_len);
	w->len = c->out_len;
	c->out_len = 0;
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->len);
	int rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_tcp_written);
	if (rv != 0) {
		sh_free(w);
		conn_close(c);
		return false;
	}
	c->tcp_pending += w->len;
	return true;
}

static void on_pipe_written(uv_write_t *req, int status)
{
	wreq *w = (wreq *)req;
	conn *c = w->c;
	c->pipe_pending -= w->len;
	sh_free(w);
	if (status != 0) {
		if (!c->closing)
			conn_close(c);
		return;
	}
	if (c->tcp_stopped && c->pipe_pending < PENDING_LOW && !c->closing) {
		c->tcp_stopped = false;
		pump_in(c);
	}
}

/* ------------------------------------------------------------------------ */
/* Data: the peer's (decrypted to raft) and raft's (encrypted to the peer)   */
/* ------------------------------------------------------------------------ */

static void on_tcp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* Decrypts what has arrived and writes it to raft's pipe, unless raft is
 * behind by PENDING_HIGH (then the socket is not read until it catches up). */
static void pump_in(conn *c)
{
	if (c->state != C_OPEN || c->closing)
		return;
	while (!c->tcp_stopped) {
		wreq *w = wreq_new(c, READ_CHUNK);
		if (w == NULL) {
			conn_close(c);
			return;
		}
		int rv = 0;
		while (w->len < READ_CHUNK &&
		       (rv = mbedtls_ssl_read(&c->ssl, w->data + w->len, READ_CHUNK - w->len)) > 0)
			w->len += (size_t)rv;
		if (w->len < READ_CHUNK && rv != MBEDTLS_ERR_SSL_WANT_READ) {
			sh_free(w);
			if (rv != 0 && rv != MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
				log_tls(c, "read", rv);
			conn_close(c);
			return;
		}
		if (!flush_out(c)) { /* (alerts, if any) */
			sh_free(w);
			return;
		}
		if (w->len == 0) {
			sh_free(w);
			break;
		}
		const char *why;
		uint64_t skipped = 0;
		if (!c->outbound && node_rf_feed(&c->rf, w->data, w->len, &why) != 0) {
			if (node_log_allow(&c->t->bad_frames, uv_now(c->t->loop), &skipped))
				node_logf(NODE_LOG_WARN,
				          "raft transport: node %llu sent a message raft must not "
				          "read (%s, after %llu good ones); dropped (%llu more "
				          "such connections since the last such line)",
				          (unsigned long long)c->peer_id, why,
				          (unsigned long long)c->rf.messages,
				          (unsigned long long)skipped);
			sh_free(w);
			conn_close(c);
			return;
		}
		uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->len);
		if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_pipe_written) != 0) {
			sh_free(w);
			conn_close(c);
			return;
		}
		c->pipe_pending += w->len;
		if (c->pipe_pending > PENDING_HIGH)
			c->tcp_stopped = true;
		if (w->len < READ_CHUNK)
			break; /* WANT_READ */
	}
	/* Read the socket while raft keeps up, and only then. */
	if (c->tcp_stopped)
		uv_read_stop((uv_stream_t *)&c->tcp);
	else
		uv_read_start((uv_stream_t *)&c->tcp, on_tcp_alloc, on_tcp_read);
}

static void on_pipe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)hint;
	conn *c = h->data;
	*buf = uv_buf_init((char *)c->t->pipe_buf, sizeof(c->t->pipe_buf));
}

/* Raft's bytes: encrypted at once (mbedtls copies them into records). */
static void on_pipe_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	conn *c = s->data;
	if (n == 0 || c->closing)
		return;
	if (n < 0) { /* raft closed its end */
		conn_close(c);
		return;
	}
	const uint8_t *p = (const uint8_t *)buf->base;
	size_t off = 0;
	while (off < (size_t)n) {
		int rv = mbedtls_ssl_write(&c->ssl, p + off, (size_t)n - off);
		if (rv < 0) {
			log_tls(c, "write", rv);
			conn_close(c);
			return;
		}
		off += (size_t)rv;
	}
	if (!flush_out(c))
		return;
	if (c->tcp_pending > PENDING_HIGH) {
		c->pipe_stopped = true;
		uv_read_stop((uv_stream_t *)&c->pipe);
	}
}

/* ------------------------------------------------------------------------ */
/* Handshakes                                                                */
/* ------------------------------------------------------------------------ */

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

/* Both handshakes done: raft gets its end of a socketpair. */
static void go_open(conn *c)
{
	tls_transport *t = c->t;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		node_logf(NODE_LOG_WARN, "raft transport: socketpair: %s", strerror(errno));
		conn_close(c);
		return;
	}
	uv_pipe_init(t->loop, &c->pipe, 0);
	c->pipe.data = c;
	if (uv_pipe_open(&c->pipe, sv[1]) != 0) {
		close(sv[0]);
		close(sv[1]);
		c->pipe_open = true, c->open++, t->handles++; /* (closed by conn_close) */
		conn_close(c);
		return;
	}
	c->pipe_open = true, c->open++, t->handles++;
	struct uv_stream_s *stream = raft_stream(t, sv[0]);
	if (stream == NULL) {
		conn_close(c);
		return;
	}
	if (!c->outbound) {
		t->n_accepting--;
		node_rf_init(&c->rf);
	}
	c->state = C_OPEN;
	c->delivered = true;
	c->progress = uv_now(t->loop);
	uv_read_start((uv_stream_t *)&c->pipe, on_pipe_alloc, on_pipe_read);
	if (c->outbound)
		c->req->cb(c->req, stream, 0);
	else
		t->accept_cb(t->outer, c->peer_id, (const char *)c->hs + 24, stream);
	pump_in(c); /* what arrived with the handshakes */
}

/* Inbound: reads our handshake as far as it has arrived. */
static void read_ours(conn *c)
{
	for (;;) {
		size_t need = 24;
		if (c->hs_len >= 24) {
			uint64_t alen = get64(c->hs + 16);
			/* Bounded before it is read. */
			if (get64(c->hs) != SH_TLS_HANDSHAKE || alen < 1 || alen >= SH_ADDR_MAX) {
				node_logf(NODE_LOG_WARN, "raft transport: bad handshake; dropped");
				conn_refuse(c, MBEDTLS_SSL_ALERT_MSG_DECODE_ERROR);
				return;
			}
			need = 24 + (size_t)alen;
		}
		if (c->hs_len == need)
			break;
		int rv = mbedtls_ssl_read(&c->ssl, c->hs + c->hs_len, need - c->hs_len);
		if (!flush_out(c))
			return;
		if (rv == MBEDTLS_ERR_SSL_WANT_READ)
			return;
		if (rv <= 0) {
			if (rv < 0 && rv != MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
				log_tls(c, "handshake read", rv);
			conn_close(c);
			return;
		}
		c->hs_len += (size_t)rv;
	}
	c->peer_id = get64(c->hs + 8);
	c->hs[c->hs_len] = '\0'; /* (hs has room: alen < SH_ADDR_MAX) */
	if (memchr(c->hs + 24, '\0', c->hs_len - 24) != NULL || c->peer_id == 0) {
		node_logf(NODE_LOG_WARN, "raft transport: bad handshake; dropped");
		conn_refuse(c, MBEDTLS_SSL_ALERT_MSG_DECODE_ERROR);
		return;
	}
	if (c->peer_id != c->cert_id) {
		node_logf(NODE_LOG_WARN,
		          "raft transport: a peer with node %llu's certificate claims to be node "
		          "%llu; dropped",
		          (unsigned long long)c->cert_id, (unsigned long long)c->peer_id);
		conn_refuse(c, MBEDTLS_SSL_ALERT_MSG_ACCESS_DENIED);
		return;
	}
	go_open(c);
}

/* Drives TLS's handshake, then ours. */
static void handshake(conn *c)
{
	if (c->state == C_TLS) {
		int rv = mbedtls_ssl_handshake(&c->ssl);
		if (!flush_out(c))
			return;
		if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
			return;
		if (rv != 0) {
			/* An inbound one may be anyone's: its lines are budgeted. */
			uint64_t skipped = 0;
			char what[96] = "TLS handshake with";
			if (!c->outbound &&
			    !node_log_allow(&c->t->refused, uv_now(c->t->loop), &skipped)) {
				conn_close(c);
				return;
			}
			if (skipped > 0)
				snprintf(
				    what, sizeof(what),
				    "TLS handshake (%llu more failed since the last such line) "
				    "with",
				    (unsigned long long)skipped);
			log_tls(c, what, rv);
			conn_close(c);
			return;
		}
		c->cert_id = cert_node_id(&c->ssl);
		if (c->cert_id == 0 || (c->outbound && c->cert_id != c->peer_id)) {
			node_logf(
			    NODE_LOG_WARN,
			    "raft transport: the peer's certificate is not node %llu's (it is "
			    "%s); dropped",
			    (unsigned long long)c->peer_id,
			    c->cert_id == 0 ? "no node's" : "another node's");
			conn_refuse(c, MBEDTLS_SSL_ALERT_MSG_ACCESS_DENIED);
			return;
		}
		if (c->outbound) {
			uint8_t hs[24 + SH_ADDR_MAX];
			size_t alen = strlen(c->t->address);
			put64(hs, SH_TLS_HANDSHAKE);
			put64(hs + 8, c->t->id);
			put64(hs + 16, alen);
			memcpy(hs + 24, c->t->address, alen);
			for (size_t off = 0; off < 24 + alen;) {
				rv = mbedtls_ssl_write(&c->ssl, hs + off, 24 + alen - off);
				if (rv < 0) {
					log_tls(c, "handshake write", rv);
					conn_close(c);
					return;
				}
				off += (size_t)rv;
			}
			if (flush_out(c))
				go_open(c);
			return;
		}
		c->state = C_OURS;
	}
	if (c->state == C_OURS)
		read_ours(c);
}

static void on_tcp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)hint;
	conn *c = h->data;
	if (c->in_off > 0 && c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	if (c->in_cap - c->in_len < READ_CHUNK) {
		if (c->in_off > 0) { /* compact */
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		if (c->in_cap - c->in_len < READ_CHUNK) {
			uint8_t *p = sh_realloc(c->in, c->in_len + READ_CHUNK);
			if (p == NULL) {
				*buf = uv_buf_init(NULL, 0); /* (UV_ENOBUFS) */
				return;
			}
			c->in = p;
			c->in_cap = c->in_len + READ_CHUNK;
		}
	}
	*buf = uv_buf_init((char *)c->in + c->in_len, READ_CHUNK);
}

static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	conn *c = s->data;
	if (n == 0 || c->closing)
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->in_len += (size_t)n;
	if (c->state == C_OPEN)
		pump_in(c);
	else
		handshake(c);
}

/* The socket is connected (either way): TLS starts. */
static void start_tls(conn *c)
{
	tls_transport *t = c->t;
	node_tcp_options(&c->tcp, c->outbound ? "outgoing" : "accepted");
	mbedtls_ssl_init(&c->ssl);
	c->ssl_init = true;
	int rv = mbedtls_ssl_setup(&c->ssl, c->outbound ? &t->client_conf : &t->server_conf);
	if (rv != 0) {
		log_tls(c, "TLS setup for", rv);
		conn_close(c);
		return;
	}
	mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
	c->state = C_TLS;
	uv_read_start((uv_stream_t *)&c->tcp, on_tcp_alloc, on_tcp_read);
	handshake(c); /* the client's hello */
}

/* ------------------------------------------------------------------------ */
/* Connections: open, close                                                  */
/* ------------------------------------------------------------------------ */

static conn *conn_new(tls_transport *t, bool outbound)
{
	conn *c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->t = t;
	c->outbound = outbound;
	c->started = uv_now(t->loop);
	c->next = t->conns;
	if (t->conns != NULL)
		t->conns->prev = c;
	t->conns = c;
	if (!outbound)
		t->n_accepting++;
	return c;
}

static void maybe_closed(tls_transport *t)
{
	if (t->closing && t->handles == 0 && t->conns == NULL && !t->closed_reported) {
		t->closed_reported = true;
		if (t->close_cb != NULL)
			t->close_cb(t->outer);
	}
}

/* The last of a connection's handles is closed: it is freed (and a connect
 * request still waiting hears of its failure). */
static void conn_done(conn *c)
{
	tls_transport *t = c->t;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (!c->delivered && !c->outbound)
		t->n_accepting--;
	if (c->outbound && !c->delivered)
		c->req->cb(c->req, NULL, t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
	if (c->ssl_init)
		mbedtls_ssl_free(&c->ssl);
	sh_free(c->in);
	sh_free(c->out);
	sh_free(c);
	maybe_closed(t);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
	conn *c = h->data;
	c->t->handles--;
	if (--c->open == 0)
		conn_done(c);
}

static void close_tcp(conn *c)
{
	if (c->tcp_open) {
		c->tcp_open = false;
		uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
	}
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	close_tcp(req->data);
}

/* Refuses a peer during the handshakes: a fatal alert (so that it hears why
 * rather than seeing the socket vanish), then the close. */
static void conn_refuse(conn *c, unsigned char alert)
{
	if (c->ssl_init && !c->closing) {
		mbedtls_ssl_send_alert_message(&c->ssl, MBEDTLS_SSL_ALERT_LEVEL_FATAL, alert);
		flush_out(c);
	}
	conn_close(c);
}

/* Closes a connection: its handles first; conn_done frees it. */
static void conn_close(conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->gai_pending)
		uv_cancel((uv_req_t *)&c->gai); /* (its callback ends it) */
	c->closed_at = uv_now(c->t->loop);
	if (c->tcp_open && c->tcp_pending > 0 &&
	    uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) == 0) {
		/* What is queued (an alert) leaves first; on_shutdown or the
		 * tick closes the socket. */
		c->shutdown_req.data = c;
		uv_read_stop((uv_stream_t *)&c->tcp);
	} else {
		close_tcp(c);
	}
	if (c->pipe_open) {
		c->pipe_open = false;
		uv_close((uv_handle_t *)&c->pipe, on_conn_handle_closed);
	}
	if (c->open == 0)
		conn_done(c);
}

static void on_connected(uv_connect_t *req, int status)
{
	conn *c = req->data;
	if (c->closing)
		return;
	if (status != 0) {
		conn_close(c);
		return;
	}
	start_tls(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	conn *c = req->data;
	tls_transport *t = c->t;
	c->gai_pending = false;
	c->open--;
	if (c->closing || status != 0) {
		if (res != NULL)
			uv_freeaddrinfo(res);
		if (c->closing) {
			if (c->open == 0)
				conn_done(c);
		} else {
			conn_close(c);
		}
		return;
	}
	uv_tcp_init(t->loop, &c->tcp);
	c->tcp.data = c;
	c->tcp_open = true, c->open++, t->handles++;
	c->state = C_CONNECTING;
	c->connect_req.data = c;
	int rv = uv_tcp_connect(&c->connect_req, &c->tcp, res->ai_addr, on_connected);
	uv_freeaddrinfo(res);
	if (rv != 0)
		conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
	tls_transport *t = server->data;
	if (status != 0 || t->closing)
		return;
	bool refuse = t->n_accepting >= ACCEPTING_MAX;
	conn *c = refuse ? NULL : conn_new(t, false);
	uv_tcp_t *tcp = c != NULL ? &c->tcp : NULL;
	if (c == NULL) {
		/* Accept it and close it at once (a pending connection left in
		 * the backlog would wake the loop again and again). */
		uv_tcp_t *drop = sh_malloc(sizeof(*drop));
		if (drop == NULL)
			return;
		uv_tcp_init(t->loop, drop);
		uv_accept(server, (uv_stream_t *)drop);
		uv_close((uv_handle_t *)drop, (uv_close_cb)sh_free);
		return;
	}
	uv_tcp_init(t->loop, tcp);
	c->tcp.data = c;
	c->tcp_open = true, c->open++, t->handles++;
	if (uv_accept(server, (uv_stream_t *)tcp) != 0) {
		conn_close(c);
		return;
	}
	start_tls(c);
}

/* Every TICK_MS: handshakes past their time and peers that take nothing. */
static void on_tick(uv_timer_t *timer)
{
	tls_transport *t = timer->data;
	uint64_t now = uv_now(t->loop);
	for (conn *c = t->conns, *next; c != NULL; c = next) {
		next = c->next;
		if (c->closing) {
			if (now - c->closed_at > CLOSE_DRAIN_MS)
				close_tcp(c); /* (the peer takes nothing) */
			continue;
		}
		if (c->state != C_OPEN &&
		    now - c->started > (c->outbound ? CONNECT_MS : HANDSHAKE_MS)) {
			if (c->state >= C_TLS)
				node_logf(NODE_LOG_WARN,
				          "raft transport: handshake not done in time; dropped");
			conn_close(c);
		} else if (c->state == C_OPEN && c->tcp_pending > 0 &&
		           now - c->progress > SEND_STALL_MS) {
			node_logf(NODE_LOG_WARN,
			          "raft transport: node %llu took nothing for %d ms; dropped",
			          (unsigned long long)c->peer_id, SEND_STALL_MS);
			conn_close(c);
		}
	}
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

static void on_transport_handle_closed(uv_handle_t *h)
{
	tls_transport *t = h->data;
	t->handles--;
	maybe_closed(t);
}

/* The ticking timer, on first need (raft closes a transport it started; one
 * it never started is freed without a close, and must then own no handle). */
static int open_timer(tls_transport *t)
{
	if (t->timer_open || t->closing)
		return 0;
	int rv = uv_timer_init(t->loop, &t->timer);
	if (rv != 0)
		return rv;
	t->timer.data = t;
	t->timer_open = true;
	t->handles++;
	uv_timer_start(&t->timer, on_tick, TICK_MS, TICK_MS);
	uv_unref((uv_handle_t *)&t->timer);
	return 0;
}

static int tls_listen(struct raft_uv_transport *outer, raft_uv_accept_cb cb)
{
	tls_transport *t = outer->impl;
	int rv = open_timer(t);
	if (rv == 0)
		rv = uv_tcp_init(t->loop, &t->listener);
	if (rv != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "cannot listen on %s: %s",
		         t->address, uv_strerror(rv));
		return RAFT_IOERR;
	}
	t->listener.data = t;
	t->listener_open = true;
	t->handles++;
	if (node_tcp_listen(&t->listener, t->address, on_connection, outer->errmsg,
	                    sizeof(outer->errmsg)) != 0) {
		t->listener_open = false;
		uv_close((uv_handle_t *)&t->listener, on_transport_handle_closed);
		return RAFT_IOERR;
	}
	t->accept_cb = cb;
	return 0;
}

static int tls_connect(struct raft_uv_transport *outer, struct raft_uv_connect *req, raft_id id,
                       const char *address, raft_uv_connect_cb cb)
{
	tls_transport *t = outer->impl;
	if (open_timer(t) != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "uv_timer_init failed");
		return RAFT_NOCONNECTION;
	}
	conn *c = conn_new(t, true);
	if (c == NULL) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "out of memory");
		return RAFT_NOMEM;
	}
	c->req = req;
	c->peer_id = id;
	req->cb = cb;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	int rv = node_split_hostport(address, c->host, c->port) == 0 ? 0 : UV_EINVAL;
	if (rv == 0) {
		c->gai.data = c;
		rv = uv_getaddrinfo(t->loop, &c->gai, on_resolved, c->host, c->port, &hints);
	}
	if (rv != 0) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "cannot connect to %s: %s", address,
		         uv_strerror(rv));
		c->delivered = true; /* (refused: no callback) */
		conn_close(c);
		return RAFT_NOCONNECTION;
	}
	c->gai_pending = true;
	c->open++;
	return 0;
}

static void tls_close(struct raft_uv_transport *outer, raft_uv_transport_close_cb cb)
{
	tls_transport *t = outer->impl;
	t->close_cb = cb;
	t->closing = true;
	if (t->listener_open) {
		t->listener_open = false;
		uv_close((uv_handle_t *)&t->listener, on_transport_handle_closed);
	}
	if (t->timer_open) {
		t->timer_open = false;
		uv_close((uv_handle_t *)&t->timer, on_transport_handle_closed);
	}
	for (conn *c = t->conns, *next; c != NULL; c = next) {
		next = c->next;
		/* Sockets close now, drained or not: the tick that would end a
		 * drain is closing too.  (close_tcp frees nothing; conn_close
		 * may free c.) */
		close_tcp(c);
		conn_close(c);
	}
	maybe_closed(t); /* (nothing was open) */
}

/* ------------------------------------------------------------------------ */
/* Set up                                                                    */
/* ------------------------------------------------------------------------ */

static int conf_init(tls_transport *t, mbedtls_ssl_config *conf, int endpoint)
{
	mbedtls_ssl_config_init(conf);
	int rv = sh_tls_conf_defaults(conf, endpoint);
	if (rv != 0)
		return rv;
	return sh_tls_conf_ident(conf, &t->ident, true);
}

static void free_tls(tls_transport *t)
{
	mbedtls_ssl_config_free(&t->server_conf);
	mbedtls_ssl_config_free(&t->client_conf);
	sh_tls_ident_free(&t->ident);
}

int node_transport_tls_init(struct raft_uv_transport *outer, uv_loop_t *loop, const sh_tls *tls,
                            char *errmsg)
{
	tls_transport *t = sh_calloc(1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "raft transport: out of memory");
	t->outer = outer;
	t->loop = loop;
	mbedtls_ssl_config_init(&t->server_conf);
	mbedtls_ssl_config_init(&t->client_conf);
	const char *what;
	int rv = sh_tls_ident_load(&t->ident, tls, &what);
	if (rv == 0) {
		what = "the TLS configuration";
		rv = conf_init(t, &t->server_conf, MBEDTLS_SSL_IS_SERVER);
	}
	if (rv == 0)
		rv = conf_init(t, &t->client_conf, MBEDTLS_SSL_IS_CLIENT);
	if (rv != 0) {
		char buf[160];
		mbedtls_strerror(rv, buf, sizeof(buf));
		free_tls(t);
		sh_free(t);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "raft transport: %s: %s", what, buf);
	}
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
	if (t->handles != 0 || t->conns != NULL) {
		/* Started and not closed: the loop may still use it. */
		node_logf(NODE_LOG_ERROR, "raft transport: freed while open; leaking it");
		outer->impl = NULL;
		return;
	}
	free_tls(t);
	sh_free(t);
	outer->impl = NULL;
}
