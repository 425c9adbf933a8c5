/*
 * transport.c -- raft's TCP transport with TCP_NODELAY (and TCP_USER_TIMEOUT:
 * node_tcp_options) on every connection.
 *
 * canonical/raft 0.15's stock transport (raft_uv_tcp) never sets
 * TCP_NODELAY; with Nagle's algorithm and delayed ACKs a 3-node cluster
 * stalls at about a thousand commits per second (NOTES.md).  We keep the
 * stock transport -- its handshake, connection management and close logic
 * are exactly what raft expects -- and wrap it:
 *
 *   outer (ours, given to raft_uv_init)      inner (raft_uv_tcp)
 *   init(id, address)                  ->    init
 *   listen(cb)                         ->    listen(accept_wrapper)
 *        accept_wrapper(inner, id, addr, stream):
 *            uv_tcp_nodelay(stream); cb(outer, id, addr, stream)
 *   connect(req, id, addr, cb)         ->    connect(&wrap->inner, ..., connect_wrapper)
 *        connect_wrapper(inner req, stream, status):
 *            status 0: uv_tcp_nodelay(stream); req->cb(req, stream, status); free wrap
 *   close(cb)                          ->    close(close_wrapper) -> cb(outer)
 *
 * raft's uv code uses the outer transport's `data` field as its own (it sets
 * it in raft_uv_init and uses it as an "initialised" flag), so our state
 * lives behind `impl`, and the inner transport's `data` points back to it.
 * Every stream raft_uv_tcp hands out is a uv_tcp_t (uv_tcp_connect.c and
 * uv_tcp_listen.c of raft 0.15).
 *
 * A failure to set NODELAY (or the user timeout) is logged and otherwise
 * ignored: the connection still works, only slower (or slower to notice a
 * dead peer).
 *
 * Except for accepting: raft_uv_tcp's listener allocates whatever address
 * length a peer's handshake announces (a handshake claiming an 8 GiB address
 * raised a node's virtual size by 8 GiB) and waits for it forever.  So the
 * listener is ours: it reads raft_uv_tcp's handshake (little-endian u64s:
 * protocol 1, the connecting server's id, the length of its address with
 * its NUL, padded to 8; then the address) into a buffer of its own, refuses
 * a length over ADDR_PADDED_MAX before reading it, drops a connection
 * whose handshake is not done within HANDSHAKE_MS and, past ACCEPTING_MAX
 * handshakes at once, accepts and closes new ones; then hands raft the TCP
 * stream as raft_uv_tcp would (raft_malloc'd: raft uv_close()s and frees
 * it).  Connecting stays raft_uv_tcp's.
 *
 * Threads: everything runs on the loop thread of `loop`.
 *
 * With the cluster's [tls], node_transport_init gives raft the TLS
 * transport of transport_tls.c instead.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "node/node.h"

#define UV_TCP_PROTOCOL 1 /* raft 0.15's UV__TCP_HANDSHAKE_PROTOCOL */
#define ADDR_PADDED_MAX (((SH_ADDR_MAX + 1) + 7) & ~(size_t)7)
#define HANDSHAKE_MS    5000
#define ACCEPTING_MAX   64
#define TICK_MS         1000

typedef struct incoming incoming;

typedef struct transport {
	struct raft_uv_transport inner; /* raft_uv_tcp: connecting */
	struct raft_uv_transport *outer;
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;
	const char *address; /* raft's copy, valid while raft is */
	uv_loop_t *loop;
	uv_tcp_t listener;
	uv_timer_t timer;
	bool listener_open, timer_open, closing, inner_closed;
	unsigned handles; /* ours still open: listener, timer, connections not handed over */
	incoming *accepting;
	unsigned n_accepting;
	node_log_budget refused; /* bad handshakes' log lines */
} transport;

/* A connection whose handshake is arriving. */
struct incoming {
	transport *t;
	incoming *next, *prev;
	uv_tcp_t *tcp; /* raft_malloc'd: raft's once handed over */
	uint64_t started;
	size_t have, need;
	uint8_t buf[24 + ADDR_PADDED_MAX];
};

/* One connect request in flight: raft's request and the one we give to the
 * inner transport.  Freed when the inner callback fires. */
typedef struct connect_wrap {
	struct raft_uv_connect inner;
	struct raft_uv_connect *outer_req;
	transport *t;
} connect_wrap;

void node_tcp_options(uv_tcp_t *tcp, const char *what)
{
	int rv = uv_tcp_nodelay(tcp, 1);
	if (rv != 0)
		node_logf(NODE_LOG_WARN, "raft transport: TCP_NODELAY on %s connection: %s", what,
		          uv_strerror(rv));
	uv_os_fd_t fd;
	unsigned int unacked = NODE_RAFT_UNACKED_MS;
	if (uv_fileno((uv_handle_t *)tcp, &fd) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacked, sizeof(unacked)) != 0)
		node_logf(NODE_LOG_WARN, "raft transport: TCP_USER_TIMEOUT on %s connection: %s",
		          what, strerror(errno));
}

static int wrap_init(struct raft_uv_transport *outer, raft_id id, const char *address)
{
	transport *t = outer->impl;
	t->address = address;
	int rv = t->inner.init(&t->inner, id, address);
	if (rv != 0)
		memcpy(outer->errmsg, t->inner.errmsg, sizeof(outer->errmsg));
	return rv;
}

/* ------------------------------------------------------------------------ */
/* Accepting                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void maybe_closed(transport *t)
{
	if (t->closing && t->inner_closed && t->handles == 0 && t->close_cb != NULL) {
		raft_uv_transport_close_cb cb = t->close_cb;
		t->close_cb = NULL;
		cb(t->outer);
	}
}

static void on_handle_closed(uv_handle_t *h)
{
	transport *t = h->data;
	t->handles--;
	maybe_closed(t);
}

static void on_dropped(uv_handle_t *h)
{
	transport *t = h->data;
	raft_free(h);
	t->handles--;
	maybe_closed(t);
}

static void unlink_incoming(incoming *in)
{
	transport *t = in->t;
	if (in->prev != NULL)
		in->prev->next = in->next;
	else
		t->accepting = in->next;
	if (in->next != NULL)
		in->next->prev = in->prev;
	t->n_accepting--;
}

static void drop(incoming *in)
{
	transport *t = in->t;
	unlink_incoming(in);
	in->tcp->data = t;
	uv_close((uv_handle_t *)in->tcp, on_dropped);
	sh_free(in);
}

static void on_incoming_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)hint;
	incoming *in = h->data;
	/* Exactly what the handshake still lacks: what follows it is raft's. */
	buf->base = (char *)in->buf + in->have;
	buf->len = in->need - in->have;
}

static void on_incoming_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	incoming *in = s->data;
	transport *t = in->t;
	if (n < 0) {
		drop(in); /* gone before its handshake ended */
		return;
	}
	in->have += (size_t)n;
	if (in->have < in->need)
		return;
	if (in->need == 24) {
		uint64_t protocol = get64(in->buf), len = get64(in->buf + 16);
		if (protocol != UV_TCP_PROTOCOL || len == 0 || len > ADDR_PADDED_MAX) {
			uint64_t skipped;
			if (node_log_allow(&t->refused, uv_now(t->loop), &skipped))
				node_logf(
				    NODE_LOG_WARN,
				    "raft transport: a handshake of protocol %llu announcing a "
				    "%llu-byte address refused (%llu more refused since the last "
				    "such line)",
				    (unsigned long long)protocol, (unsigned long long)len,
				    (unsigned long long)skipped);
			drop(in);
			return;
		}
		in->need = 24 + (size_t)len;
		return;
	}
	if (memchr(in->buf + 24, '\0', in->need - 24) == NULL) {
		drop(in);
		return;
	}
	uv_read_stop(s);
	unlink_incoming(in);
	t->handles--; /* raft's now */
	node_tcp_options((uv_tcp_t *)s, "accepted");
	/* raft copies the address (raft_uv_tcp frees its own after the call). */
	in->tcp->data = NULL;
	t->accept_cb(t->outer, get64(in->buf + 8), (const char *)in->buf + 24,
	             (struct uv_stream_s *)in->tcp);
	sh_free(in);
}

static void on_connection(uv_stream_t *server, int status)
{
	transport *t = server->data;
	if (status != 0 || t->closing)
		return;
	uv_tcp_t *tcp = raft_malloc(sizeof(*tcp));
	incoming *in = t->n_accepting < ACCEPTING_MAX ? sh_calloc(1, sizeof(*in)) : NULL;
	if (tcp == NULL) {
		sh_free(in);
		return;
	}
	uv_tcp_init(t->loop, tcp);
	t->handles++;
	if (uv_accept(server, (uv_stream_t *)tcp) != 0 || in == NULL) {
		/* Accepted and closed at once: a connection left in the
		 * backlog would wake the loop again and again. */
		sh_free(in);
		tcp->data = t;
		uv_close((uv_handle_t *)tcp, on_dropped);
		return;
	}
	in->t = t;
	in->tcp = tcp;
	in->need = 24;
	in->started = uv_now(t->loop);
	in->next = t->accepting;
	if (in->next != NULL)
		in->next->prev = in;
	t->accepting = in;
	t->n_accepting++;
	tcp->data = in;
	if (uv_read_start((uv_stream_t *)tcp, on_incoming_alloc, on_incoming_read) != 0)
		drop(in);
}

/* Every TICK_MS: handshakes past their time. */
static void on_tick(uv_timer_t *timer)
{
	transport *t = timer->data;
	uint64_t now = uv_now(t->loop);
	for (incoming *in = t->accepting, *next; in != NULL; in = next) {
		next = in->next;
		if (now - in->started > HANDSHAKE_MS)
			drop(in);
	}
}

static int wrap_listen(struct raft_uv_transport *outer, raft_uv_accept_cb cb)
{
	transport *t = outer->impl;
	int rv = uv_timer_init(t->loop, &t->timer);
	if (rv == 0) {
		t->timer.data = t;
		t->timer_open = true;
		t->handles++;
		uv_timer_start(&t->timer, on_tick, TICK_MS, TICK_MS);
		uv_unref((uv_handle_t *)&t->timer);
		rv = uv_tcp_init(t->loop, &t->listener);
	}
	if (rv == 0) {
		t->listener.data = t;
		t->listener_open = true;
		t->handles++;
		rv = node_tcp_listen(&t->listener, t->address != NULL ? t->address : "?",
		                     on_connection, outer->errmsg, sizeof(outer->errmsg));
	} else {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "cannot listen: %s",
		         uv_strerror(rv));
	}
	if (rv != 0) {
		if (t->listener_open) {
			t->listener_open = false;
			uv_close((uv_handle_t *)&t->listener, on_handle_closed);
		}
		return RAFT_IOERR;
	}
	t->accept_cb = cb;
	return 0;
}

static void connect_wrapper(struct raft_uv_connect *inner_req, struct uv_stream_s *stream,
                            int status)
{
	connect_wrap *w = inner_req->data;
	struct raft_uv_connect *req = w->outer_req;
	sh_free(w);
	if (status == 0)
		node_tcp_options((uv_tcp_t *)stream, "outgoing");
	req->cb(req, stream, status);
}

static int wrap_connect(struct raft_uv_transport *outer, struct raft_uv_connect *req, raft_id id,
                        const char *address, raft_uv_connect_cb cb)
{
	transport *t = outer->impl;
	connect_wrap *w = sh_malloc(sizeof(*w));
	if (w == NULL) {
		snprintf(outer->errmsg, sizeof(outer->errmsg), "out of memory");
		return RAFT_NOMEM;
	}
	w->inner.data = w;
	w->outer_req = req;
	w->t = t;
	req->cb = cb;
	int rv = t->inner.connect(&t->inner, &w->inner, id, address, connect_wrapper);
	if (rv != 0) {
		/* The inner transport fires no callback for a request it
		 * refused (uv_tcp_connect.c). */
		memcpy(outer->errmsg, t->inner.errmsg, sizeof(outer->errmsg));
		sh_free(w);
	}
	return rv;
}

static void close_wrapper(struct raft_uv_transport *inner)
{
	transport *t = inner->data;
	t->inner_closed = true;
	maybe_closed(t);
}

static void wrap_close(struct raft_uv_transport *outer, raft_uv_transport_close_cb cb)
{
	transport *t = outer->impl;
	t->close_cb = cb;
	t->closing = true;
	while (t->accepting != NULL)
		drop(t->accepting);
	if (t->listener_open) {
		t->listener_open = false;
		uv_close((uv_handle_t *)&t->listener, on_handle_closed);
	}
	if (t->timer_open) {
		t->timer_open = false;
		uv_close((uv_handle_t *)&t->timer, on_handle_closed);
	}
	t->inner.close(&t->inner, close_wrapper);
}

int node_split_hostport(const char *address, char host[SH_ADDR_MAX], char port[8])
{
	const char *colon = strrchr(address, ':');
	if (colon == NULL || colon == address || strlen(colon + 1) == 0 || strlen(colon + 1) >= 8 ||
	    (size_t)(colon - address) >= SH_ADDR_MAX)
		return -1;
	const char *h = address;
	size_t hl = (size_t)(colon - address);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
		h++, hl -= 2;
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, 8, "%s", colon + 1);
	return 0;
}

int node_tcp_listen(uv_tcp_t *listener, const char *address, uv_connection_cb cb, char *errmsg,
                    size_t size)
{
	char host[SH_ADDR_MAX], port[8];
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *res = NULL;
	int rv = 0;
	if (node_split_hostport(address, host, port) != 0 ||
	    (rv = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(errmsg, size, "cannot resolve %s: %s", address,
		         rv != 0 ? gai_strerror(rv) : "not host:port");
		return UV_EINVAL;
	}
	rv = uv_tcp_bind(listener, res->ai_addr, 0);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)listener, 128, cb);
	freeaddrinfo(res);
	if (rv != 0)
		snprintf(errmsg, size, "cannot listen on %s: %s", address, uv_strerror(rv));
	return rv;
}

int node_transport_init(struct raft_uv_transport *outer, uv_loop_t *loop, const sh_tls *tls,
                        char *errmsg)
{
	if (tls != NULL)
		return node_transport_tls_init(outer, loop, tls, errmsg);
	transport *t = sh_calloc(1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "raft transport: out of memory");
	t->inner.data = t;
	int rv = raft_uv_tcp_init(&t->inner, loop);
	if (rv != 0) {
		sh_free(t);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "raft_uv_tcp_init: %s", raft_strerror(rv));
	}
	t->outer = outer;
	t->loop = loop;
	memset(outer, 0, sizeof(*outer));
	outer->impl = t;
	outer->init = wrap_init;
	outer->listen = wrap_listen;
	outer->connect = wrap_connect;
	outer->close = wrap_close;
	return SHOAL_OK;
}

void node_transport_close(struct raft_uv_transport *outer)
{
	if (outer->connect != wrap_connect) {
		node_transport_tls_free(outer);
		return;
	}
	transport *t = outer->impl;
	if (t == NULL)
		return;
	raft_uv_tcp_close(&t->inner);
	sh_free(t);
	outer->impl = NULL;
}
