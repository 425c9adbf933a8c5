/*
 * transport.c -- raft's TCP transport with TCP_NODELAY on every connection.
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
 * A failure to set NODELAY is logged and otherwise ignored: the connection
 * still works, only slower.
 *
 * Threads: everything runs on the loop thread of `loop`.
 *
 * With the cluster's [tls], node_transport_init gives raft the TLS
 * transport of transport_tls.c instead.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "node/node.h"

typedef struct transport {
	struct raft_uv_transport inner; /* raft_uv_tcp */
	struct raft_uv_transport *outer;
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;
	const char *address; /* raft's copy, valid while raft is */
} transport;

/* One connect request in flight: raft's request and the one we give to the
 * inner transport.  Freed when the inner callback fires. */
typedef struct connect_wrap {
	struct raft_uv_connect inner;
	struct raft_uv_connect *outer_req;
	transport *t;
} connect_wrap;

static void set_nodelay(struct uv_stream_s *stream, const char *what)
{
	int rv = uv_tcp_nodelay((uv_tcp_t *)stream, 1);
	if (rv != 0)
		node_logf(NODE_LOG_WARN, "raft transport: TCP_NODELAY on %s connection: %s", what,
		          uv_strerror(rv));
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

static void accept_wrapper(struct raft_uv_transport *inner, raft_id id, const char *address,
                           struct uv_stream_s *stream)
{
	transport *t = inner->data;
	set_nodelay(stream, "accepted");
	t->accept_cb(t->outer, id, address, stream);
}

static int wrap_listen(struct raft_uv_transport *outer, raft_uv_accept_cb cb)
{
	transport *t = outer->impl;
	t->accept_cb = cb;
	int rv = t->inner.listen(&t->inner, accept_wrapper);
	if (rv != 0) {
		/* raft_uv_tcp 0.15 says nothing about a failed bind. */
		if (t->inner.errmsg[0] != '\0')
			memcpy(outer->errmsg, t->inner.errmsg, sizeof(outer->errmsg));
		else
			snprintf(outer->errmsg, sizeof(outer->errmsg),
			         "cannot listen on %s (address in use, or not an address of this "
			         "host?)",
			         t->address != NULL ? t->address : "?");
	}
	return rv;
}

static void connect_wrapper(struct raft_uv_connect *inner_req, struct uv_stream_s *stream,
                            int status)
{
	connect_wrap *w = inner_req->data;
	struct raft_uv_connect *req = w->outer_req;
	sh_free(w);
	if (status == 0)
		set_nodelay(stream, "outgoing");
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
	if (t->close_cb != NULL)
		t->close_cb(t->outer);
}

static void wrap_close(struct raft_uv_transport *outer, raft_uv_transport_close_cb cb)
{
	transport *t = outer->impl;
	t->close_cb = cb;
	t->inner.close(&t->inner, close_wrapper);
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
