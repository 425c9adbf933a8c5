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
 * A member is whoever holds a certificate the cluster CA signed: with a
 * [tls] section every node RPC port and every Raft port speaks TLS 1.2+
 * only, requires the peer's certificate (mutual authentication) and
 * verifies it against ca.pem, so internal operations (index shipping,
 * scrub checks, the router's node requests, DDL) reach a node only from a
 * member.  Which member is checked on Raft's ports only
 * (node/transport_tls.c, which runs mbedtls itself: a certificate's CN
 * "node-<id>" must be the node's the connection is for); on nng's ports any
 * certificate the CA signed passes (nng 1.5.2 does not expose the peer's
 * certificate), and server names are not checked.  Keep ca.pem's private
 * key off the cluster's machines.
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

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* A member's TLS configurations: server (for its listeners) and client (for
 * its dials); both present the member's certificate and require the peer's.
 * For a client-facing listener, `public_server` asks nothing of the peer. */
typedef struct sh_tls {
	nng_tls_config *server;
	nng_tls_config *client;
	nng_tls_config *public_server;
	char dir[1024];
	char cert[1100]; /* dir/<name>.pem */
} sh_tls;

/* Loads dir/ca.pem and dir/<name>.pem (name: "node-3", "router").  Warns
 * (through warn, may be NULL) when the key file is readable by group or
 * others.  Errors name the file and what is wrong. */
int sh_tls_load(sh_tls *t, const char *dir, const char *name, void (*warn)(const char *msg),
                char *errmsg);
void sh_tls_free(sh_tls *t);

/* The URL to use for a cluster-internal nng address: "tcp://h:p" becomes
 * "tls+tcp://h:p" when tls is true; anything else is copied.  Returns false
 * if it does not fit in cap. */
bool sh_tls_url(bool tls, const char *url, char *out, size_t cap);

/* Whether url is a TLS one ("tls+tcp://..."). */
bool sh_tls_is_tls(const char *url);

/* nng_listen / nng_dial of sock on url as given; a tls+tcp:// url uses cfg
 * (NNG_EINVAL without one).  Returns an nng error code. */
int sh_tls_listen(nng_socket sock, const char *url, nng_tls_config *cfg, nng_listener *out);
int sh_tls_dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags);

/* Streams (nng_stream: tls+tcp:// or tcp://) as file descriptors, for code
 * that wants a descriptor (the HTTP server's epoll, for HTTPS).
 *
 * sh_tls_pump starts two detached threads that copy bytes between s and
 * one end of a socketpair, and returns the other end (blocking; the caller
 * owns it), or -1 (s is then closed and freed).  Closing the returned
 * descriptor closes s; s failing or the peer leaving makes the descriptor
 * read EOF.  The threads own s and free it. */
int sh_tls_pump(nng_stream *s);

#endif
