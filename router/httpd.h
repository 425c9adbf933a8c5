/*
 * httpd.h -- a small HTTP/1.1 server (router/httpd.c), the transport under
 * the DynamoDB endpoint (http.c).  Private to router/ and the unit test
 * tests/unit/test_http.c.
 *
 * Why our own and not nng's HTTP server: nng 1.5.2 runs every step of every
 * request (read the head, the handler, read the body, write the answer, read
 * the next) as a task on its task threads, a futex wake-up and a context
 * switch each; the router spent ~51 us of CPU per HTTP GetItem against ~13
 * us per native one, half of it in the kernel switching threads.  Here a
 * request costs one epoll wake-up of the I/O thread and one read(2) on the
 * way in, and one sendmsg(2) on the way out, written by the thread that has
 * the answer.  Why not libuv (the node's loop): a libuv stream may only be
 * written from its loop's thread, so every answer would need a uv_async
 * hand-off back to it -- the wake-up per request this server exists to
 * avoid.
 *
 * The model:
 *
 *   - I/O threads (conf.threads, epoll, edge-triggered, non-blocking
 *     sockets) own the listening socket and the connections: they accept,
 *     read, parse, enforce the limits and timeouts, and close.  A connection
 *     belongs to the thread that accepted it.  With HTTPS, one more thread
 *     (the handshake loop) accepts on HTTPS's listener and runs TLS
 *     handshakes only, then hands each connection to an I/O thread.
 *   - One request per connection at a time.  When a request's head and body
 *     are in, the connection stops reading and the request is handed to
 *     ops.request on the I/O thread itself.  Keep-alive is the default;
 *     pipelined requests are served in order, each after the previous answer
 *     was written.
 *   - rt_httpd_respond may be called from any thread (the nng callback that
 *     finishes the router's job).  It writes the answer on the socket right
 *     there (non-blocking, under the connection's lock); only a partial write
 *     leaves the rest queued for the I/O thread (EPOLLOUT).  Nothing wakes the
 *     I/O thread per answer: the client's next request does.
 *   - Connections are reference counted: a request in the endpoint's hands
 *     keeps its connection's memory, even after the peer went away or the
 *     server stopped; its answer then goes nowhere, harmlessly.
 *
 * Limits (issue 15), against peers that are slow, hostile or not yet
 * authenticated:
 *   - the head (request line + headers) is at most RT_HTTPD_MAX_HEAD bytes
 *     and RT_HTTPD_MAX_HEADERS headers (431, then close);
 *   - a head must be complete conf.head_ms (RT_HTTPD_HEAD_MS, 10 s) after
 *     the connection opened or, on a kept-alive one, after its first byte:
 *     a total, not an idle timeout, so trickling header bytes (slowloris)
 *     does not keep a connection;
 *   - a body or an answer that makes no progress for conf.timeout_ms
 *     (RT_HTTPD_TIMEOUT_MS, 30 s) is dropped, and so is an idle keep-alive
 *     connection after conf.idle_ms (RT_HTTPD_IDLE_MS);
 *   - a body must also arrive at conf.min_rate bytes a second on average
 *     (RT_HTTPD_MIN_RATE, 500, as Apache's mod_reqtimeout): its total
 *     deadline is conf.timeout_ms after it started plus 1 s for each
 *     min_rate bytes received, so trickling a byte now and then (under the
 *     no-progress timeout) does not keep a connection;
 *   - a body's memory is allocated only after ops.head accepted its head
 *     (which is where the endpoint checks the signature's format, key and
 *     date), and grows as its bytes arrive (at most twice what arrived, from
 *     16 KiB: a client that announces 16 MiB and sends nothing holds 16
 *     KiB);
 *   - the bytes of bodies held at once are bounded by conf.max_held for the
 *     server and conf.max_held_peer for the connections of one peer address
 *     (an IPv4 address, or an IPv6 /64), so that one address cannot take the
 *     whole server's share; past either, ops.busy answers (503, close) and
 *     r->peer_busy says which;
 *   - at most conf.max_conns connections at once, and conf.max_conns_peer
 *     from one peer address: more are answered a static 503 and closed at
 *     once (logged once for the server's limit);
 *   - accept(2) failing for lack of descriptors pauses accepting for
 *     RT_HTTPD_ACCEPT_PAUSE_MS instead of spinning;
 *   - one peer address may begin conf.handshakes_peer HTTPS connections a
 *     second on average (RT_HTTPD_HANDSHAKES_PEER), in bursts of twice that
 *     (a token bucket per address, kept by the handshake loop in a table of
 *     RT_HTTPD_HANDSHAKE_SLOTS: addresses that share a slot share its
 *     bucket, rt_httpd_handshake_slot): a handshake costs the server
 *     a millisecond or more of CPU, so one address cannot take the
 *     handshake loop's whole time from the others; past it the connection
 *     is closed at once (counted in conf.stats; logged at most every 10 s).
 */
#ifndef SHOAL_ROUTER_HTTPD_H
#define SHOAL_ROUTER_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#define RT_HTTPD_MAX_HEAD        (64u * 1024)
#define RT_HTTPD_MAX_HEADERS     100
#define RT_HTTPD_HEAD_MS         10000
#define RT_HTTPD_TIMEOUT_MS      30000
#define RT_HTTPD_MIN_RATE        500
#define RT_HTTPD_IDLE_MS         60000
#define RT_HTTPD_LINGER_MS       5000
#define RT_HTTPD_ACCEPT_PAUSE_MS 100
#define RT_HTTPD_MAX_CONNS       4096
#define RT_HTTPD_MAX_CHUNKED     (16u * 1024 * 1024)
#define RT_HTTPD_HANDSHAKES_PEER 100
#define RT_HTTPD_HANDSHAKE_SLOTS 4096

/* ------------------------------------------------------------------------ */
/* The request head parser (pure)                                            */
/* ------------------------------------------------------------------------ */

typedef struct rt_httpd_header {
	const char *name; /* as sent (compare case-insensitively) */
	const char *value;
} rt_httpd_header;

typedef struct rt_httpd_head {
	const char *method;
	const char *target; /* the request target as sent: path and ?query */
	int minor;          /* HTTP/1.<minor>: 0 or 1 */
	rt_httpd_header h[RT_HTTPD_MAX_HEADERS];
	uint32_t n;
	size_t len; /* bytes of the head, leading blank lines and final blank line included */
	/* From the headers. */
	uint64_t content_length; /* 0 without the header */
	bool bad_length;         /* Content-Length not one decimal number (or two that differ) */
	bool chunked;            /* a Transfer-Encoding header (any value) */
	bool chunked_body;       /* ... that is "chunked" alone, once, without Content-Length:
	                            a body this server decodes (content_length 0 until it is
	                            read, then the decoded length) */
	bool keep_alive;         /* HTTP/1.1 without "Connection: close", or HTTP/1.0 with
	                            "Connection: keep-alive" */
	bool expect_continue;    /* HTTP/1.1 with "Expect: 100-continue" */
} rt_httpd_head;

/* What rt_httpd_parse found. */
typedef enum rt_httpd_parse_rc {
	RT_HTTPD_INCOMPLETE = 0, /* no end of head yet: call again with more bytes */
	RT_HTTPD_DONE,           /* *out is the head; its first out->len bytes are used */
	RT_HTTPD_BAD,            /* malformed: 400 */
	RT_HTTPD_TOO_LARGE,      /* head over RT_HTTPD_MAX_HEAD or headers over MAX_HEADERS: 431 */
	RT_HTTPD_VERSION,        /* not HTTP/1.0 or 1.1: 505 */
} rt_httpd_parse_rc;

/* Parses the request head at the start of buf[0, len).  *scanned carries
 * how far an earlier call looked for the end of the head (start at 0; the
 * search resumes there, so feeding a head byte by byte costs linear time).
 * On DONE the head's bytes are modified in place (names, values, method and
 * target are NUL-terminated where they end) and *out points into buf: valid
 * while buf is.  Never reads past len; never allocates. */
rt_httpd_parse_rc rt_httpd_parse(char *buf, size_t len, size_t *scanned, rt_httpd_head *out);

/* The value of the first header named `name` (case-insensitive), or NULL. */
const char *rt_httpd_header_get(const rt_httpd_head *h, const char *name);

/* "Not Found" for 404, ..., "Unknown" for codes it does not know. */
const char *rt_httpd_reason(int status);

/* ------------------------------------------------------------------------ */
/* The server                                                                */
/* ------------------------------------------------------------------------ */

typedef struct rt_httpd rt_httpd;

/* A request in progress on a connection.  head, body and len are valid from
 * ops.head (body: from ops.request) until rt_httpd_respond; `data` is the
 * endpoint's. */
typedef struct rt_httpd_req {
	const rt_httpd_head *head;
	const uint8_t *body; /* head->content_length bytes (NULL when 0) */
	size_t len;
	void *data;
	bool peer_busy; /* ops.busy: conf.max_held_peer was reached, not conf.max_held */
	bool cors;      /* the endpoint's: the request came with an Origin header */
} rt_httpd_req;

typedef struct rt_httpd_ops {
	/* The head is in (an I/O thread).  Either answer now with
	 * rt_httpd_respond (then the body, if any, is not read and the
	 * connection closes after the answer) and return false, or return true
	 * to have the body read: head->content_length bytes, which the
	 * callback must have bounded (bad_length bodies, and chunked ones that
	 * are not chunked_body, cannot be read: it must answer those).  A
	 * chunked_body is decoded as it arrives, up to conf.max_chunked bytes:
	 * one that decodes to more is answered 413 by the server, a malformed
	 * one 400, and the connection closes. */
	bool (*head)(void *arg, rt_httpd_req *r);
	/* The body is in (an I/O thread).  Answer it exactly once with
	 * rt_httpd_respond, from any thread, now or later. */
	void (*request)(void *arg, rt_httpd_req *r);
	/* The body does not fit in conf.max_held: answer now (503). */
	void (*busy)(void *arg, rt_httpd_req *r);
	/* Optional: an I/O thread starts (true) and ends (false) handling
	 * what one epoll wake-up brought, so that the requests it hands over
	 * in between can be sent on together (http.c corks the router's lanes). */
	void (*burst)(void *arg, bool begin);
} rt_httpd_ops;

struct mbedtls_ssl_config;

/* Counters the server adds to (rt_httpd_conf.stats; the router's metrics). */
typedef struct rt_httpd_stats {
	_Atomic uint64_t https_begun;   /* HTTPS connections accepted: handshakes begun */
	_Atomic uint64_t https_refused; /* ... closed for their address's handshake rate */
} rt_httpd_stats;

typedef struct rt_httpd_conf {
	const char *hostport;     /* "host:port", "[v6]:port", ":port" (every address); NULL:
	                             no plain HTTP listener */
	const char *tls_hostport; /* the same for HTTPS; NULL: none */
	const struct mbedtls_ssl_config *tls; /* HTTPS's server configuration (https.c):
	                                         used by every HTTPS connection, outlives
	                                         the server */
	uint32_t threads;                     /* I/O threads (>= 1) */
	uint32_t max_conns;                   /* at once (lowered to fit the descriptor limit) */
	uint32_t max_conns_peer;              /* ... from one peer address (0: no limit of its own;
	                                         lowered in proportion with max_conns) */
	size_t max_held;                      /* bytes of bodies held at once */
	size_t max_held_peer; /* ... by the connections of one peer address (0: max_held) */
	size_t max_chunked;   /* a chunked body's decoded bytes (0: RT_HTTPD_MAX_CHUNKED) */
	uint32_t head_ms;     /* a whole head, from its first byte (0: RT_HTTPD_HEAD_MS) */
	uint32_t timeout_ms;  /* no progress on a body or an answer (0: RT_HTTPD_TIMEOUT_MS) */
	uint32_t min_rate;    /* a body's bytes a second, on average (0: RT_HTTPD_MIN_RATE) */
	uint32_t idle_ms;     /* keep-alive connection without a request (0: RT_HTTPD_IDLE_MS) */
	uint32_t handshakes_peer; /* HTTPS connections one peer address may begin a second,
	                             on average (0: RT_HTTPD_HANDSHAKES_PEER; UINT32_MAX: no
	                             limit) */
	rt_httpd_stats *stats;    /* counters to add to (NULL: none); outlives the server */
	rt_httpd_ops ops;
	void *arg;
} rt_httpd_conf;

/* Listens (on c->hostport and c->tls_hostport, either may be NULL) and
 * starts the I/O threads.  HTTPS connections are the same connections with
 * TLS in front (an mbedtls session driven by the same I/O: httpd.c), so
 * the same caps, limits per address and timeouts apply to both, and a TLS
 * handshake must end within the head's timeout.  Main thread. */
int rt_httpd_start(rt_httpd **out, const rt_httpd_conf *c, char *errmsg);
/* The ports it listens on (useful with port 0); 0: no such listener. */
int rt_httpd_port(const rt_httpd *s);
int rt_httpd_tls_port(const rt_httpd *s);
/* The handshake bucket's slot of a peer address (IPv4, or IPv6's /64),
 * in [0, RT_HTTPD_HANDSHAKE_SLOTS); -1 for another family. */
int rt_httpd_handshake_slot(const struct sockaddr_storage *ss);

/* Stops accepting, closes every connection, joins the I/O threads, waits
 * until every request handed to ops.request has been answered (their
 * answers go nowhere), frees.  The endpoint's own threads must keep serving
 * until this returns.  NULL is fine.  Main thread. */
void rt_httpd_stop(rt_httpd *s);

/* https.c: HTTPS's server configuration from the cluster's certificates
 * (tls: the router's, common/tls.h): its certificate and key router.pem,
 * TLS 1.2, no certificate asked of clients (they sign their requests).
 * rt_https_conf is what rt_httpd_conf.tls takes; free after rt_httpd_stop
 * (NULL is fine).  Main thread. */
struct sh_tls;
typedef struct rt_https rt_https;
int rt_https_init(rt_https **out, const struct sh_tls *tls, char *errmsg);
const struct mbedtls_ssl_config *rt_https_conf(const rt_https *h);
void rt_https_free(rt_https *h);

/* The answer to r: status, extra header lines `headers` ("Name: value\r\n"
 * each, or NULL) and a body (copied if it must wait).  The server adds the
 * status line, Content-Length and Connection, drops the body for HEAD, and
 * closes the connection after the answer when `close`, when the client did
 * not ask for keep-alive, or when the request's body was not read.  Any
 * thread, once per request; r is gone when it returns. */
void rt_httpd_respond(rt_httpd_req *r, int status, const char *headers, const void *body,
                      size_t len, bool close);

#endif
