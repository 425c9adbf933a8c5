/* The Raft transport with TCP_NODELAY (node/transport.c), on a real libuv
 * loop and real sockets on 127.0.0.1. */
#include <check.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/node.h"
#include "tests/lib/testlib.h"

/* Ports: a block per test process, unlikely to collide with other runs. */
static int base_port(int offset)
{
	static int base;
	if (base == 0)
		base = tl_free_ports(80);
	return base + offset;
}

/* Each test runs twice (Check's loop index _i): 0 over the plain wrapper,
 * 1 over the TLS transport (node/transport_tls.c) with certificates made by
 * deploy/certs.sh for nodes 1-3; tls_of(id) is then node id's
 * configuration, else NULL. */
#define N_CERTS 3
static sh_tls tls_store[N_CERTS];
static bool tls_on;

static void tls_done(void)
{
	for (int i = 0; i < N_CERTS && tls_on; i++)
		sh_tls_free(&tls_store[i]);
	tls_on = false;
}

static const sh_tls *tls_of(raft_id id)
{
	return tls_on ? &tls_store[id - 1] : NULL;
}

static void set_mode(int i)
{
	tls_done();
	if (i == 0)
		return;
	const char *dir = tl_tmpdir("transport-tls");
	char cmd[2048], err[SH_ERRMSG_SIZE];
	snprintf(cmd, sizeof(cmd), "deploy/certs.sh --dir '%s/tls' --nodes %d >/dev/null", dir,
	         N_CERTS);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	for (int n = 0; n < N_CERTS; n++) {
		char name[16];
		snprintf(cmd, sizeof(cmd), "%s/tls", dir);
		snprintf(name, sizeof(name), "node-%d", n + 1);
		ck_assert_msg(sh_tls_load(&tls_store[n], cmd, name, NULL, err) == SHOAL_OK, "%s",
		              err);
	}
	tls_on = true;
	atexit(tls_done);
}

/* Runs the loop until *flag is set or 10 s pass; returns the flag.  (The
 * pair's ticker wakes the loop every 10 ms, so UV_RUN_ONCE never blocks
 * past the deadline.) */
static bool run_until(uv_loop_t *loop, const bool *flag)
{
	uint64_t deadline = node_now_ns() + 10000000000ull;
	while (!*flag && node_now_ns() < deadline)
		uv_run(loop, UV_RUN_ONCE);
	return *flag;
}

static void tick(uv_timer_t *t)
{
	(void)t;
}

static int nodelay_of(uv_stream_t *stream)
{
	uv_os_fd_t fd;
	ck_assert_int_eq(uv_fileno((uv_handle_t *)stream, &fd), 0);
	int v = -1;
	socklen_t len = sizeof(v);
	ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
	return v;
}

typedef struct pair {
	uv_loop_t loop;
	uv_timer_t ticker;
	struct raft_uv_transport server, client;
	char server_addr[32], client_addr[32];
	/* accept side */
	bool accepted;
	struct raft_uv_transport *accept_t;
	raft_id accept_id;
	char accept_address[64];
	uv_stream_t *accept_stream;
	int accept_nodelay;
	/* connect side */
	struct raft_uv_connect req;
	bool connected;
	int connect_status;
	uv_stream_t *connect_stream;
	int connect_nodelay;
	int closed;
} pair;

static pair P;

static void on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                      uv_stream_t *stream)
{
	P.accepted = true;
	P.accept_t = t;
	P.accept_id = id;
	snprintf(P.accept_address, sizeof(P.accept_address), "%s", address);
	P.accept_stream = stream;
	P.accept_nodelay = !tls_on ? nodelay_of(stream) : 1;
}

static void on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
	ck_assert_ptr_eq(req, &P.req);
	P.connected = true;
	P.connect_status = status;
	P.connect_stream = stream;
	if (status == 0)
		P.connect_nodelay = !tls_on ? nodelay_of(stream) : 1;
}

static void on_closed(struct raft_uv_transport *t)
{
	ck_assert(t == &P.server || t == &P.client);
	P.closed++;
}

static void free_stream(uv_handle_t *h)
{
	raft_free(h); /* raft_uv_tcp allocates its streams with raft's heap */
}

/* The server is node 1; the client is node client_id with the certificate
 * of node cert_id (2 and 2 but in the identity test). */
static void pair_init_as(int port_offset, raft_id client_id, raft_id cert_id)
{
	memset(&P, 0, sizeof(P));
	P.accept_nodelay = P.connect_nodelay = -1;
	ck_assert_int_eq(uv_loop_init(&P.loop), 0);
	uv_timer_init(&P.loop, &P.ticker);
	uv_timer_start(&P.ticker, tick, 10, 10);
	ck_assert_int_eq(node_transport_init(&P.server, &P.loop, tls_of(1), NULL), SHOAL_OK);
	ck_assert_int_eq(node_transport_init(&P.client, &P.loop, tls_of(cert_id), NULL), SHOAL_OK);
	snprintf(P.server_addr, sizeof(P.server_addr), "127.0.0.1:%d", base_port(port_offset));
	snprintf(P.client_addr, sizeof(P.client_addr), "127.0.0.1:%d", base_port(port_offset + 1));
	ck_assert_int_eq(P.server.init(&P.server, 1, P.server_addr), 0);
	ck_assert_int_eq(P.client.init(&P.client, client_id, P.client_addr), 0);
}

static void pair_init(int port_offset)
{
	pair_init_as(port_offset, 2, 2);
}

/* Closes both transports, releases them and checks no handle is left. */
static void pair_fini(void)
{
	if (P.accept_stream != NULL)
		uv_close((uv_handle_t *)P.accept_stream, free_stream);
	if (P.connect_stream != NULL)
		uv_close((uv_handle_t *)P.connect_stream, free_stream);
	P.server.close(&P.server, on_closed);
	P.client.close(&P.client, on_closed);
	uint64_t deadline = node_now_ns() + 10000000000ull;
	while (P.closed < 2 && node_now_ns() < deadline)
		uv_run(&P.loop, UV_RUN_ONCE);
	ck_assert_int_eq(P.closed, 2);
	uv_close((uv_handle_t *)&P.ticker, NULL);
	uv_run(&P.loop, UV_RUN_DEFAULT);
	node_transport_close(&P.server);
	node_transport_close(&P.client);
	ck_assert_int_eq(uv_loop_close(&P.loop), 0);
}

/* This process's TCP sockets with port as their local or peer port whose
 * TCP_USER_TIMEOUT is NODE_RAFT_UNACKED_MS (both transports set it on both
 * ends: node_tcp_options). */
static int sockets_with_user_timeout(int port)
{
	int n = 0;
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_in me, peer;
		socklen_t ml = sizeof(me), pl = sizeof(peer);
		int type = 0;
		socklen_t tl = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
		    getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || me.sin_family != AF_INET ||
		    getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
			continue;
		if (ntohs(me.sin_port) != port && ntohs(peer.sin_port) != port)
			continue;
		unsigned int ut = 0;
		socklen_t ul = sizeof(ut);
		if (getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, &ul) == 0 &&
		    ut == NODE_RAFT_UNACKED_MS)
			n++;
	}
	return n;
}

START_TEST(test_nodelay_both_ends)
{
	set_mode(_i);
	pair_init(0 + 40 * _i);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert(run_until(&P.loop, &P.accepted));

	/* Connected side: raft's request got its callback, with NODELAY. */
	ck_assert_int_eq(P.connect_status, 0);
	ck_assert_ptr_nonnull(P.connect_stream);
	ck_assert_int_eq(P.connect_nodelay, 1);
	/* Accepted side: raft's callback sees our (outer) transport, the
	 * peer's handshake, and NODELAY. */
	ck_assert_ptr_eq(P.accept_t, &P.server);
	ck_assert_uint_eq(P.accept_id, 2);
	ck_assert_str_eq(P.accept_address, P.client_addr);
	ck_assert_int_eq(P.accept_nodelay, 1);
	/* Both ends' TCP sockets (raft's own, or the TLS transport's). */
	ck_assert_int_eq(sockets_with_user_timeout(base_port(0 + 40 * _i)), 2);

	/* Bytes flow over the pair (the handshake was consumed). */
	uv_os_fd_t a, b;
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.connect_stream, &a), 0);
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.accept_stream, &b), 0);
	ck_assert_int_eq(write(a, "ping", 4), 4);
	char buf[8] = {0};
	ssize_t got = 0;
	uint64_t deadline = node_now_ns() + 5000000000ull;
	while (got < 4 && node_now_ns() < deadline) {
		ssize_t r = read(b, buf + got, (size_t)(4 - got));
		if (r > 0)
			got += r;
		uv_run(&P.loop, UV_RUN_NOWAIT); /* (TLS: the loop moves the bytes) */
		if (r <= 0)
			usleep(1000);
	}
	ck_assert_int_eq(got, 4);
	ck_assert_str_eq(buf, "ping");
	pair_fini();
}
END_TEST

START_TEST(test_connect_refused)
{
	set_mode(_i);
	pair_init(10 + 40 * _i);
	/* Nobody listens on the server address: the callback reports it,
	 * with no stream, and the wrapper request is freed (ASan: no leak). */
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert_int_ne(P.connect_status, 0);
	ck_assert_ptr_null(P.connect_stream);
	pair_fini();
}
END_TEST

START_TEST(test_close_cancels_connect)
{
	set_mode(_i);
	pair_init(20 + 40 * _i);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	/* Close before the loop ran: the pending connect is cancelled and its
	 * callback still fires exactly once, through the wrapper. */
	P.client.close(&P.client, on_closed);
	uint64_t deadline = node_now_ns() + 10000000000ull;
	while ((!P.connected || P.closed < 1) && node_now_ns() < deadline)
		uv_run(&P.loop, UV_RUN_ONCE);
	ck_assert(P.connected);
	ck_assert_int_eq(P.connect_status, RAFT_CANCELED);
	ck_assert_ptr_null(P.connect_stream);
	ck_assert_int_eq(P.closed, 1);
	/* The server may have accepted the connection meanwhile. */
	P.server.close(&P.server, on_closed);
	if (P.accept_stream != NULL)
		uv_close((uv_handle_t *)P.accept_stream, free_stream);
	while (P.closed < 2 && node_now_ns() < deadline)
		uv_run(&P.loop, UV_RUN_ONCE);
	ck_assert_int_eq(P.closed, 2);
	uv_close((uv_handle_t *)&P.ticker, NULL);
	uv_run(&P.loop, UV_RUN_DEFAULT);
	node_transport_close(&P.server);
	node_transport_close(&P.client);
	ck_assert_int_eq(uv_loop_close(&P.loop), 0);
}
END_TEST

/* n bytes of raft messages: AppendEntries of one 64 KiB entry each, the
 * last cut short.  What reaches a TLS transport from a peer must be raft's
 * framing (node/raftframe.h). */
static uint8_t *raft_bytes(size_t n)
{
	uint8_t *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	uint8_t head[16 + 64] = {0};
	head[0] = RAFT_IO_APPEND_ENTRIES; /* type */
	head[8] = 64;                     /* header length: 48 + 16 x 1 entry */
	head[16 + 32] = 1;                /* entries */
	head[16 + 40 + 8] = RAFT_COMMAND; /* the entry's type */
	head[16 + 40 + 14] = 1;           /* its length: 65536 */
	for (size_t off = 0; off < n;) {
		size_t k = n - off < sizeof(head) ? n - off : sizeof(head);
		memcpy(b + off, head, k);
		off += k;
		for (size_t i = 0; i < 65536 && off < n; i++, off++)
			b[off] = (uint8_t)(off * 7);
	}
	return b;
}

/* Moves n bytes each way at once over a connected pair (the streams raft
 * got), running the loop in between; checks every byte.  Large enough to
 * fill the socket buffers, so the TLS transport's back-pressure works.  The
 * client (side 0) sends raft's messages (raft_bytes); the server's side
 * sends (i * 7 + 1) & 0xff as byte i. */
static void bulk_both_ways(size_t n)
{
	uv_os_fd_t fd[2];
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.connect_stream, &fd[0]), 0);
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.accept_stream, &fd[1]), 0);
	uint8_t *up = raft_bytes(n);
	size_t sent[2] = {0, 0}, got[2] = {0, 0};
	uint8_t buf[65536];
	uint64_t deadline = node_now_ns() + 30000000000ull;
	while ((got[0] < n || got[1] < n) && node_now_ns() < deadline) {
		for (int k = 0; k < 2; k++) {
			size_t len = n - sent[k] < sizeof(buf) ? n - sent[k] : sizeof(buf);
			const uint8_t *src = up + sent[0];
			if (k == 1) {
				for (size_t i = 0; i < len; i++)
					buf[i] = (uint8_t)((sent[1] + i) * 7 + 1);
				src = buf;
			}
			ssize_t w = len > 0 ? write(fd[k], src, len) : 0;
			if (w > 0)
				sent[k] += (size_t)w;
			ssize_t r = read(fd[k], buf, sizeof(buf));
			ssize_t bad = -1; /* (one assertion per read: Check's are slow) */
			for (ssize_t i = 0; i < r && bad < 0; i++) {
				size_t at = got[k] + (size_t)i;
				if (buf[i] != (k == 1 ? up[at] : (uint8_t)(at * 7 + 1)))
					bad = i;
			}
			ck_assert_msg(bad < 0, "side %d: byte %zu differs", k,
			              got[k] + (size_t)bad);
			if (r > 0)
				got[k] += (size_t)r;
		}
		uv_run(&P.loop, UV_RUN_NOWAIT);
	}
	free(up);
	ck_assert_uint_eq(got[0], n);
	ck_assert_uint_eq(got[1], n);
}

START_TEST(test_bulk_both_ways)
{
	set_mode(_i);
	pair_init(3 + 40 * _i);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert(run_until(&P.loop, &P.accepted));
	bulk_both_ways(24u << 20);
	pair_fini();
}
END_TEST

/* Whether fd reads EOF (the far end closed) within 10 s of running the loop. */
static bool reads_eof(uv_stream_t *stream)
{
	uv_os_fd_t fd;
	ck_assert_int_eq(uv_fileno((uv_handle_t *)stream, &fd), 0);
	uint64_t deadline = node_now_ns() + 10000000000ull;
	while (node_now_ns() < deadline) {
		char b[64];
		if (read(fd, b, sizeof(b)) == 0)
			return true;
		uv_run(&P.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	return false;
}

/* TLS: a certificate is good for its own node only.  Node 3's certificate
 * announcing node 2 gets no connection (the server drops it; raft never
 * hears of it), and a client that dials node 3 at an address whose server
 * shows node 1's certificate gives up. */
START_TEST(test_tls_identity)
{
	set_mode(1);
	pair_init_as(5, 2, 3);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert_int_eq(P.connect_status, 0); /* (the server's certificate is node 1's) */
	ck_assert_msg(reads_eof(P.connect_stream), "the server kept node 3 posing as node 2");
	ck_assert(!P.accepted);
	pair_fini();

	pair_init_as(7, 2, 2);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 3, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert_int_eq(P.connect_status, RAFT_NOCONNECTION);
	ck_assert_ptr_null(P.connect_stream);
	pair_fini();
	ck_assert(!P.accepted);
}
END_TEST

/* TLS: what a peer sends raft is checked first (node/raftframe.h).  A good
 * RequestVote reaches raft's end; an AppendEntries whose 48-byte header
 * claims 1000 entries (raft 0.15 would read 16,000 bytes of entry headers
 * past its buffer) does not, and the connection is closed. */
START_TEST(test_tls_frames_checked)
{
	set_mode(1);
	pair_init(14);
	ck_assert_int_eq(P.server.listen(&P.server, on_accept), 0);
	ck_assert_int_eq(P.client.connect(&P.client, &P.req, 1, P.server_addr, on_connect), 0);
	ck_assert(run_until(&P.loop, &P.connected));
	ck_assert(run_until(&P.loop, &P.accepted));
	uint8_t m[56 + 64] = {0};
	m[0] = RAFT_IO_REQUEST_VOTE, m[8] = 40, m[16] = 3;          /* term 3, ... */
	m[56] = RAFT_IO_APPEND_ENTRIES, m[64] = 48;                 /* no entry's room, */
	m[56 + 16 + 32] = 1000 & 0xff, m[56 + 16 + 33] = 1000 >> 8; /* 1000 entries */
	uv_os_fd_t a, b;
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.connect_stream, &a), 0);
	ck_assert_int_eq(uv_fileno((uv_handle_t *)P.accept_stream, &b), 0);
	/* The good message first, alone (a buffer holding a bad byte is held
	 * back whole), then the bad one. */
	ck_assert_int_eq(write(a, m, 56), 56);
	uint8_t got[sizeof(m)];
	size_t n = 0;
	bool eof = false;
	uint64_t deadline = node_now_ns() + 10000000000ull;
	for (int phase = 0; phase < 2; phase++) {
		if (phase == 1)
			ck_assert_int_eq(write(a, m + 56, 64), 64);
		while (!eof && (phase == 1 || n < 56) && node_now_ns() < deadline) {
			ssize_t r = read(b, got + n, sizeof(got) - n);
			if (r > 0)
				n += (size_t)r;
			eof = r == 0;
			uv_run(&P.loop, UV_RUN_NOWAIT);
			if (r < 0)
				usleep(1000);
		}
		ck_assert_uint_eq(n, 56);
	}
	ck_assert_msg(eof, "the connection stayed open");
	ck_assert_int_eq(memcmp(got, m, 56), 0);
	pair_fini();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Three raft servers on one loop, talking through the wrapper               */
/* ------------------------------------------------------------------------ */

#define N_RAFT 3

typedef struct srv {
	struct raft raft;
	struct raft_io io;
	struct raft_uv_transport transport;
	struct raft_fsm fsm;
	char dir[4200];
	char address[32];
	unsigned applied;
	bool closed;
} srv;

static srv S[N_RAFT];
static bool apply_done;
static int apply_status = -1;

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	srv *s = fsm->data;
	ck_assert_uint_eq(buf->len, 8);
	ck_assert_int_eq(memcmp(buf->base, "shoal-1\0", 8), 0);
	s->applied++;
	*result = NULL;
	return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	(void)fsm, (void)bufs, (void)n;
	return RAFT_NOTFOUND;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	(void)fsm;
	raft_free(buf->base);
	return 0;
}

static void on_apply(struct raft_apply *req, int status, void *result)
{
	(void)req, (void)result;
	apply_status = status;
	apply_done = true;
}

static void on_raft_closed(struct raft *r)
{
	((srv *)r->data)->closed = true;
}

START_TEST(test_raft_over_wrapper)
{
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	set_mode(_i);
	const char *root = tl_tmpdir("transport");
	struct raft_configuration conf;
	raft_configuration_init(&conf);
	for (int i = 0; i < N_RAFT; i++) {
		snprintf(S[i].address, sizeof(S[i].address), "127.0.0.1:%d",
		         base_port(30 + 40 * _i + i));
		ck_assert_int_eq(
		    raft_configuration_add(&conf, (raft_id)(i + 1), S[i].address, RAFT_VOTER), 0);
	}
	for (int i = 0; i < N_RAFT; i++) {
		srv *s = &S[i];
		memset(&s->raft, 0, sizeof(s->raft));
		s->applied = 0;
		s->closed = false;
		snprintf(s->dir, sizeof(s->dir), "%s/r%d", root, i);
		ck_assert_int_eq(mkdir(s->dir, 0755), 0);
		s->fsm = (struct raft_fsm){.version = 1,
		                           .data = s,
		                           .apply = fsm_apply,
		                           .snapshot = fsm_snapshot,
		                           .restore = fsm_restore};
		ck_assert_int_eq(
		    node_transport_init(&s->transport, &loop, tls_of((raft_id)(i + 1)), NULL),
		    SHOAL_OK);
		ck_assert_int_eq(raft_uv_init(&s->io, &loop, s->dir, &s->transport), 0);
		ck_assert_int_eq(raft_init(&s->raft, &s->io, &s->fsm, (raft_id)(i + 1), s->address),
		                 0);
		s->raft.data = s;
		raft_set_election_timeout(&s->raft, 200);
		raft_set_heartbeat_timeout(&s->raft, 50);
		ck_assert_int_eq(raft_bootstrap(&s->raft, &conf), 0);
		ck_assert_int_eq(raft_start(&s->raft), 0);
	}
	raft_configuration_close(&conf);

	/* A leader is elected over our transport. */
	int leader = -1;
	uint64_t deadline = node_now_ns() + 20000000000ull;
	while (leader < 0 && node_now_ns() < deadline) {
		uv_run(&loop, UV_RUN_ONCE);
		for (int i = 0; i < N_RAFT; i++)
			if (raft_state(&S[i].raft) == RAFT_LEADER)
				leader = i;
	}
	ck_assert_int_ge(leader, 0);

	/* An entry commits and every server applies it. */
	struct raft_apply req;
	struct raft_buffer buf = {raft_malloc(8), 8};
	memcpy(buf.base, "shoal-1\0", 8);
	apply_done = false;
	ck_assert_int_eq(raft_apply(&S[leader].raft, &req, &buf, 1, on_apply), 0);
	bool all = false;
	while (!all && node_now_ns() < deadline) {
		uv_run(&loop, UV_RUN_ONCE);
		all = apply_done;
		for (int i = 0; i < N_RAFT; i++)
			all = all && S[i].applied == 1;
	}
	ck_assert(apply_done);
	ck_assert_int_eq(apply_status, 0);
	for (int i = 0; i < N_RAFT; i++)
		ck_assert_uint_eq(S[i].applied, 1);

	/* Everything closes through the wrapper and nothing is left. */
	for (int i = 0; i < N_RAFT; i++)
		raft_close(&S[i].raft, on_raft_closed);
	bool closed = false;
	while (!closed && node_now_ns() < deadline) {
		uv_run(&loop, UV_RUN_ONCE);
		closed = true;
		for (int i = 0; i < N_RAFT; i++)
			closed = closed && S[i].closed;
	}
	ck_assert(closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	for (int i = 0; i < N_RAFT; i++) {
		raft_uv_close(&S[i].io);
		node_transport_close(&S[i].transport);
	}
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	tl_rmtree(root);
}
END_TEST

static Suite *transport_suite(void)
{
	Suite *s = suite_create("transport");
	TCase *tc = tcase_create("tcp");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_nodelay_both_ends, 0, 2);
	tcase_add_loop_test(tc, test_connect_refused, 0, 2);
	tcase_add_loop_test(tc, test_close_cancels_connect, 0, 2);
	tcase_add_loop_test(tc, test_raft_over_wrapper, 0, 2);
	tcase_add_loop_test(tc, test_bulk_both_ways, 0, 2);
	tcase_add_test(tc, test_tls_identity);
	tcase_add_test(tc, test_tls_frames_checked);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(transport_suite)
