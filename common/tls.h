/*
 * tls.h -- TLS between the processes of a cluster (prefix sh_tls_): the one
 * place that knows where certificates live, how nng is told about them and
 * what a peer must show.
 *
 * The cluster file's [tls] section names a directory (deploy/certs.sh makes
 * one):
 *
 *   [tls]
 *   dir = /etc/shoal/tls    ; ca.pem, node-<id>.pem, router.pem
 *
 *   ca.pem          the cluster's certificate authority (certificate only)
 *   node-<id>.pem   node <id>'s certificate and private key, in one file
 *   router.pem      the routers' certificate and private key
 *
 * A member is whoever holds a certificate the cluster CA signed for a
 * member: CN "node-<id>" (node <id>) or "router" (tls_mbed.h).  With a
 * [tls] section every node RPC port and every Raft port speaks TLS 1.2
 * only, requires the peer's certificate (mutual authentication) and
 * verifies it against ca.pem, so internal operations (index shipping,
 * scrub checks, the router's node requests, DDL) reach a node only from a
 * member.  Which member:
 *   - Raft's ports (node/transport_tls.c, mbedtls on the node's loop): the
 *     CN must be "node-<id>" of the node the connection is for;
 *   - nng's ports, in a process that registered Shoal's engine
 *     (sh_tls_engine_register: shoal-node and shoal-router do): a node's
 *     RPC port takes nodes and routers only, a member's dials take nodes
 *     only (anyone else fails the handshake), and the node's request
 *     handler tells a node from a router by sh_tls_pipe_peer, so operations
 *     only nodes send are refused from a router's certificate.  A dial of
 *     node <id> (the router's node requests, index shipping) uses
 *     sh_tls_client_for(id), which takes node <id>'s certificate only:
 *     one node's key does not answer at another node's address.
 * Host names are not checked (the CN says which member, not which host).
 * Keep ca.pem's private key off the cluster's machines.
 *
 * Client-facing ports (the router's native --listen, when its URL is
 * tls+tcp://) use router.pem as their certificate and do not ask clients
 * for one: clients authenticate with signed requests.
 */
#ifndef SHOAL_COMMON_TLS_H
#define SHOAL_COMMON_TLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* Who a certificate (or a connection) belongs to.  Values are bit positions
 * of peer sets (SH_TLS_PEERS). */
typedef enum sh_tls_peer {
	SH_TLS_PEER_OTHER = 0,  /* no certificate, a CN that is no member's, unknown */
	SH_TLS_PEER_NODE = 1,   /* "node-<id>" */
	SH_TLS_PEER_ROUTER = 2, /* "router" */
	SH_TLS_PEER_PLAIN = 3,  /* a connection without TLS (sh_tls_pipe_peer) */
} sh_tls_peer;

#define SH_TLS_PEERS(p) (1u << (p))

/* A client configuration for dials of one node (sh_tls_client_for). */
typedef struct sh_tls_named {
	uint32_t node_id;
	nng_tls_config *cfg;
} sh_tls_named;

/* A member's TLS configurations: server (for its listeners) and client (for
 * its dials); both present the member's certificate and require the peer's.
 * For a client-facing listener, `public_server` asks nothing of the peer.
 * `probe` dials the member's own listeners (sh_listen_guard): it presents
 * the member's certificate and takes any member's.
 * `peers_checked`: made by Shoal's engine, so server takes nodes and
 * routers only and client nodes only (else any certificate of the CA).
 * `named`: the client configurations of sh_tls_client_for, made on first
 * use (nodes join at run time), under `mu`. */
typedef struct sh_tls {
	nng_tls_config *server;
	nng_tls_config *client;
	nng_tls_config *public_server;
	nng_tls_config *probe; /* a listen guard's dials of its own listeners */
	bool peers_checked;
	char dir[1024];
	char cert[1100]; /* dir/<name>.pem */
	pthread_mutex_t mu;
	bool mu_init;
	sh_tls_named *named;
	size_t n_named, cap_named;
} sh_tls;

/* Loads dir/ca.pem and dir/<name>.pem (name: "node-3", "router").  Warns
 * (through warn, may be NULL) when the key file is readable by group or
 * others.  Errors name the file and what is wrong.  Call
 * sh_tls_engine_register first for peers_checked. */
int sh_tls_load(sh_tls *t, const char *dir, const char *name, void (*warn)(const char *msg),
                char *errmsg);
void sh_tls_free(sh_tls *t);

/* The client configuration for dials of node node_id (> 0): as t->client,
 * and the server must present node <node_id>'s certificate (its server
 * name is "node-<id>", which Shoal's engine checks against the
 * certificate's CN, not against its SANs).  Made on first use (reading t's files again) and
 * kept: owned by t, valid until sh_tls_free (a dialer holds its own
 * reference).  Without peers_checked (nng's engine: it cannot check)
 * t->client.  NULL on failure, with errmsg saying why; the caller must not
 * dial then.  Any thread. */
nng_tls_config *sh_tls_client_for(sh_tls *t, uint32_t node_id, char *errmsg);

/* The URL to use for a cluster-internal nng address: "tcp://h:p" becomes
 * "tls+tcp://h:p" when tls is true; anything else is copied.  Returns false
 * if it does not fit in cap. */
bool sh_tls_url(bool tls, const char *url, char *out, size_t cap);

/* Whether url is a TLS one ("tls+tcp://..."). */
bool sh_tls_is_tls(const char *url);

/* nng_listen / nng_dial of sock on url as given; a tls+tcp:// url uses cfg
 * (NNG_EINVAL without one).  Returns an nng error code.
 *
 * A dialer that keeps dialling (tls.c, "Dial keeper"): nng 1.5.2's dialer
 * has the listener's bug below -- when a TLS connection's SP negotiation
 * fails with NNG_ECLOSED (the server closed it right after the handshake: a
 * node killed or stopping, a listener its guard restarted),
 * dialer_connect_cb takes that for the dialer's own close and never dials
 * again, so the socket stays without a connection for good; or its
 * negotiation waits for ever for a close the TLS layer never reports.  And
 * a TCP connect whose SYN a cut network dropped is sent again only after
 * 1, 3, 7, 15, ... s.  So sh_tls_dial with NNG_FLAG_NONBLOCK (a dialer that
 * reconnects by itself), of a tls+ URL or a plain one, registers the
 * dialer with a process-wide keeper thread: every SH_DIAL_KEEP_MS it reads
 * nng's statistics of each registered dialer, and one that had no
 * connection and did nothing at all (no connection, refusal, timeout or
 * error counted) for SH_DIAL_KEEP_LOOKS looks in a row is replaced: closed,
 * and dialled again on the same socket with the same URL and configuration
 * (held meanwhile).  A live dialer retries at least every
 * NNG_OPT_RECONNMAXT (ours: at most 1 s), so only a TCP connect or a
 * handshake taking that long is replaced as well (a new attempt).  A
 * dialer closed by its owner (or with its socket) leaves the register at
 * the next look.
 *
 * The keeper also replaces, when asked (sh_dial_renew), a dialer whose
 * connection stopped carrying messages: see there. */
#define SH_DIAL_KEEP_MS    2000
#define SH_DIAL_KEEP_LOOKS 2
int sh_tls_listen(nng_socket sock, const char *url, nng_tls_config *cfg, nng_listener *out);
int sh_tls_dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags);
/* Any thread: how many of socket sock's kept dialers have no connection
 * and have had a connection refused (their server is down: nothing is
 * listening there).  0 without nng statistics. */
uint32_t sh_tls_dials_refused(nng_socket sock);
/*
 * sock's connection seems dead: its owner's exchanges have failed -- no
 * answer, and no room to send -- for a while without one answered
 * (proto/lanes.h, "Stalled connections").  nng keeps a connection until
 * the kernel ends it, and a peer that went without closing it (its machine
 * died, or a cut network dropped everything for a while: the sender's
 * retransmissions back off to two minutes apart) leaves the socket with a
 * connection that carries nothing for minutes, all the while the peer
 * could be reached again by a new one.  The keeper (woken at once) closes
 * each of sock's registered dialers that has a connection and dials again;
 * one without a connection is left to nng and the rule above.  Any thread,
 * nng's callbacks included: it only queues the socket (at most 64 at once;
 * the owner asks again).
 */
void sh_dial_renew(nng_socket sock);
/* Any thread: dialers the keeper replaced in this process (metrics). */
uint64_t sh_dial_keeper_redials(void);
/* Where the keeper says that it replaced a dialer (NULL, the default:
 * nowhere -- a library does not print). */
void sh_dial_keeper_log(void (*log)(const char *msg));

/* A listener that keeps accepting (tls.c, "Listen guard").  nng 1.5.2's
 * TLS transport stops a listener for good when a connection closes at the
 * wrong moment of its SP negotiation (it hands the listener NNG_ECLOSED,
 * which nng takes for the listener's own close: nanomsg/nng#1518, fixed
 * in 1.6.0; Debian 12 ships 1.5.2).  Then every new connection completes
 * its handshake and negotiation and is never read: its requests wait
 * forever.  A client that dials several routers and exits once one has
 * answered did it within ten calls.  So for a tls+ URL a guard thread
 * dials the listener with `probe` (a client configuration its server
 * configuration accepts) when it may have stopped, and when the probe's
 * connection is up at our end and sock has taken no connection
 * (NNG_PIPE_EV_ADD_POST) within SH_LISTEN_GUARD_ACCEPT_MS, twice in a
 * row, it closes the listener and listens again (closing a listener
 * closes its connections: their clients reconnect), and tells log.  "May
 * have stopped": the listener's "other" error count in nng's statistics
 * moved (that NNG_ECLOSED is counted there, and so is every connection's
 * end), or nng keeps no statistics, and every SH_LISTEN_GUARD_IDLE_MS
 * anyway.  The guard looks every SH_LISTEN_GUARD_MS, and probes again
 * SH_LISTEN_GUARD_RETRY_MS after a failed probe.  A plain URL gets the listener alone
 * (TCP's transport hands the listener ECONNSHUT or ECONNRESET, which nng
 * retries).  The guard owns sock's NNG_PIPE_EV_ADD_POST notification.
 * SHOAL_OK or an error in errmsg. */
#define SH_LISTEN_GUARD_RETRY_MS  1000
#define SH_LISTEN_GUARD_MS        5000
#define SH_LISTEN_GUARD_IDLE_MS   30000
#define SH_LISTEN_GUARD_ACCEPT_MS 2000
typedef struct sh_listen_guard sh_listen_guard;
int sh_listen_guard_start(sh_listen_guard **out, nng_socket sock, const char *url,
                          nng_tls_config *server, nng_tls_config *probe,
                          void (*log)(const char *msg), char *errmsg);
/* Stops the guard and closes the listener (NULL: nothing).  Not on the
 * log callback's thread. */
void sh_listen_guard_close(sh_listen_guard *g);
/* Any thread: how many times this process's guards listened again (the
 * metrics' shoal_{router,node}_listener_relistens_total). */
uint64_t sh_listen_guard_relistens(void);

/* Shoal's TLS engine for nng (tls_engine.c): mbedtls as nng's own engine
 * uses it, plus the peer's identity (sh_tls_config_alloc's peer sets,
 * sh_tls_pipe_peer) and one TLS record per nng message instead of up to
 * three.  Replaces nng's engine for the whole process: call once, before
 * any TLS configuration is made (configurations made before keep nng's).
 * log (may be NULL) is told of refused peers; it may be called on any of
 * nng's threads.  SHOAL_OK, or an error naming what nng said. */
int sh_tls_engine_register(void (*log)(const char *msg), char *errmsg);

/* Whether nng's TLS is Shoal's engine in this process. */
bool sh_tls_engine_ours(void);

/* nng_tls_config_alloc that, with Shoal's engine, makes a configuration
 * whose peers must hold a certificate of one of the set `peers`
 * (SH_TLS_PEERS(SH_TLS_PEER_NODE) | ...; 0: any the CA signed): anyone
 * else's fails the handshake (bad_certificate, and log is told).  With
 * another engine a non-empty set is NNG_ENOTSUP (nothing is made).  An nng
 * error code. */
int sh_tls_config_alloc(nng_tls_config **out, nng_tls_mode mode, unsigned peers);

/* Who is at the other end of pipe p of a listener whose configuration
 * takes nodes and routers (sh_tls.server with peers_checked):
 * SH_TLS_PEER_NODE or SH_TLS_PEER_ROUTER; SH_TLS_PEER_PLAIN for a pipe
 * without TLS; SH_TLS_PEER_OTHER when p is gone.  (From the one bit of
 * identity nng 1.5.2 passes from an engine to the application,
 * NNG_OPT_TLS_VERIFIED, which Shoal's engine sets for a node's certificate
 * only on such configurations.)  Any thread. */
sh_tls_peer sh_tls_pipe_peer(nng_pipe p);

#endif
