/*
 * tls_mbed.h -- the mbedtls pieces every TLS of Shoal's own uses (prefix
 * sh_tls_): who a cluster certificate belongs to, the random generator and
 * the defaults of an mbedtls configuration.  Two users: Raft's transport
 * (node/transport_tls.c, mbedtls on the node's loop) and the nng TLS engine
 * (common/tls_engine.c, mbedtls under nng's node RPC and client ports).
 *
 * Cluster certificates (deploy/certs.sh) name their holder in the subject
 * CN: "node-<id>" for node <id> (decimal, 1 or more), "router" for the
 * routers.  Any other CN, even one the cluster CA signed, is no member.
 */
#ifndef SHOAL_COMMON_TLS_MBED_H
#define SHOAL_COMMON_TLS_MBED_H

#include <stddef.h>
#include <stdint.h>

#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "tls.h" /* sh_tls_peer */

/* The holder of crt (may be NULL: SH_TLS_PEER_OTHER); *node_id (may be NULL)
 * is set to the id for a node, else 0.  Only the first CN counts. */
sh_tls_peer sh_tls_cert_peer(const mbedtls_x509_crt *crt, uint64_t *node_id);

/* The same for a CN's text v[0..len) (not NUL-terminated): the one parser
 * of member names, also used for a server name that names a node
 * (tls_engine.c). */
sh_tls_peer sh_tls_name_peer(const char *v, size_t len, uint64_t *node_id);

/* mbedtls's f_rng: one CTR-DRBG for the process, seeded from the system's
 * entropy on first use, behind a mutex (so any thread may call it; it is
 * used in handshakes, not per record).  p is unused.  0 or an mbedtls
 * error. */
int sh_tls_random(void *p, unsigned char *out, size_t len);

/* mbedtls_ssl_config_defaults for endpoint (MBEDTLS_SSL_IS_SERVER /
 * _CLIENT) and stream transport, then Shoal's choices: TLS 1.2 (the newest
 * mbedtls 2.28 has), the peer's certificate required, sh_tls_random, and
 * ECDHE-ECDSA with ChaCha20-Poly1305 first, then AES-GCM (the cluster's
 * keys are P-256; why ChaCha first: tls_mbed.c's suites).  The caller
 * adds the CA and its own certificate.  0 or an mbedtls error. */
int sh_tls_conf_defaults(mbedtls_ssl_config *conf, int endpoint);

/* A member's certificates as mbedtls holds them: the cluster CA, its own
 * certificate and key (one PEM file, sh_tls.cert). */
typedef struct sh_tls_ident {
	mbedtls_x509_crt ca, own;
	mbedtls_pk_context key;
} sh_tls_ident;

/* Reads t's dir/ca.pem and t->cert into id (initialised here; free it with
 * sh_tls_ident_free, also after a failure).  0, or an mbedtls error with
 * *what naming the file it was about. */
int sh_tls_ident_load(sh_tls_ident *id, const sh_tls *t, const char **what);
void sh_tls_ident_free(sh_tls_ident *id);

/* mbedtls_ssl_conf_own_cert of id's certificate and key on conf, and (if
 * ca) id's CA as the chain peers are verified against.  0 or an mbedtls
 * error. */
int sh_tls_conf_ident(mbedtls_ssl_config *conf, sh_tls_ident *id, bool ca);

#endif
