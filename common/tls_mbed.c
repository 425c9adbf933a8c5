/*
 * tls_mbed.c -- mbedtls pieces shared by Shoal's TLS (contract: tls_mbed.h).
 */
#include "tls_mbed.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>

sh_tls_peer sh_tls_name_peer(const char *v, size_t len, uint64_t *node_id)
{
	if (node_id != NULL)
		*node_id = 0;
	if (len == 6 && memcmp(v, "router", 6) == 0)
		return SH_TLS_PEER_ROUTER;
	if (len < 6 || len > 25 || memcmp(v, "node-", 5) != 0)
		return SH_TLS_PEER_OTHER;
	uint64_t id = 0;
	for (size_t i = 5; i < len; i++) {
		if (v[i] < '0' || v[i] > '9' || id > UINT64_MAX / 10 - 1)
			return SH_TLS_PEER_OTHER;
		id = id * 10 + (uint64_t)(v[i] - '0');
	}
	if (id == 0)
		return SH_TLS_PEER_OTHER;
	if (node_id != NULL)
		*node_id = id;
	return SH_TLS_PEER_NODE;
}

sh_tls_peer sh_tls_cert_peer(const mbedtls_x509_crt *crt, uint64_t *node_id)
{
	if (node_id != NULL)
		*node_id = 0;
	if (crt == NULL)
		return SH_TLS_PEER_OTHER;
	for (const mbedtls_x509_name *n = &crt->subject; n != NULL; n = n->next)
		if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0)
			return sh_tls_name_peer((const char *)n->val.p, n->val.len, node_id);
	return SH_TLS_PEER_OTHER;
}

/* ------------------------------------------------------------------------ */
/* The process's random generator                                           */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t rng_mu = PTHREAD_MUTEX_INITIALIZER;
static bool rng_ready;
static mbedtls_entropy_context rng_entropy;
static mbedtls_ctr_drbg_context rng_drbg;

int sh_tls_random(void *p, unsigned char *out, size_t len)
{
	(void)p;
	pthread_mutex_lock(&rng_mu);
	int rv = 0;
	if (!rng_ready) {
		static const char pers[] = "shoal tls";
		mbedtls_entropy_init(&rng_entropy);
		mbedtls_ctr_drbg_init(&rng_drbg);
		rv = mbedtls_ctr_drbg_seed(&rng_drbg, mbedtls_entropy_func, &rng_entropy,
		                           (const unsigned char *)pers, sizeof(pers) - 1);
		if (rv != 0) {
			mbedtls_ctr_drbg_free(&rng_drbg);
			mbedtls_entropy_free(&rng_entropy);
		}
		rng_ready = rv == 0;
	}
	if (rv == 0)
		rv = mbedtls_ctr_drbg_random(&rng_drbg, out, len);
	pthread_mutex_unlock(&rng_mu);
	return rv;
}

/* ------------------------------------------------------------------------ */
/* Configuration defaults                                                    */
/* ------------------------------------------------------------------------ */

/* Every TLS of ours (Raft's transport, nng's through tls_engine.c, HTTPS)
 * offers these, in this order of preference; a server picks by its own order
 * (Debian's mbedtls leaves MBEDTLS_SSL_SRV_RESPECT_CLIENT_PREFERENCE off).
 * ChaCha20-Poly1305 first: in mbedtls 2.28 it seals a record in ~0.55-0.7
 * of AES-128-GCM's time even with AES-NI (2.28's GCM runs its counter and
 * tag a block at a time through byte loops; on the test VM, one thread:
 * 350 bytes 1.9 vs 2.7 us, 1 KiB 4.6 vs 8.3, 4 KiB 17 vs 33), and
 * OpenSSL's clients (wrk, curl, Python) do it as fast as AES-GCM.  Both
 * are TLS 1.2 AEAD suites with ephemeral ECDH. */
static const int suites[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    0,
};

/* The ephemeral ECDH groups, in the same way: the server picks by its own
 * order, and mbedtls's default order starts with secp521r1, which OpenSSL's
 * clients offer, so every HTTPS handshake from curl, wrk or Python paid for
 * P-521 (the router: 9.9 ms of CPU a handshake with it; one side's key and
 * shared secret on the test VM: P-521 5.6 ms, P-384 2.6, P-256 2.4, X25519
 * 2.1).  The faster first; P-521 last, for a client that offers nothing
 * else.  (Certificates and their ECDSA keys are P-256: deploy/certs.sh.) */
static const mbedtls_ecp_group_id groups[] = {
    MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1,
    MBEDTLS_ECP_DP_SECP521R1,  MBEDTLS_ECP_DP_NONE,
};

int sh_tls_conf_defaults(mbedtls_ssl_config *conf, int endpoint)
{
	int rv = mbedtls_ssl_config_defaults(conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
	                                     MBEDTLS_SSL_PRESET_DEFAULT);
	if (rv != 0)
		return rv;
	mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3,
	                             MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_rng(conf, sh_tls_random, NULL);
	mbedtls_ssl_conf_ciphersuites(conf, suites);
	mbedtls_ssl_conf_curves(conf, groups);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* A member's certificates                                                   */
/* ------------------------------------------------------------------------ */

int sh_tls_ident_load(sh_tls_ident *id, const sh_tls *t, const char **what)
{
	static __thread char ca[sizeof(t->dir) + 8];
	mbedtls_x509_crt_init(&id->ca);
	mbedtls_x509_crt_init(&id->own);
	mbedtls_pk_init(&id->key);
	snprintf(ca, sizeof(ca), "%s/ca.pem", t->dir);
	*what = ca;
	int rv = mbedtls_x509_crt_parse_file(&id->ca, ca);
	if (rv == 0) {
		*what = t->cert;
		rv = mbedtls_x509_crt_parse_file(&id->own, t->cert);
	}
	if (rv == 0)
		rv = mbedtls_pk_parse_keyfile(&id->key, t->cert, NULL);
	return rv;
}

void sh_tls_ident_free(sh_tls_ident *id)
{
	mbedtls_pk_free(&id->key);
	mbedtls_x509_crt_free(&id->own);
	mbedtls_x509_crt_free(&id->ca);
}

int sh_tls_conf_ident(mbedtls_ssl_config *conf, sh_tls_ident *id, bool ca)
{
	if (ca)
		mbedtls_ssl_conf_ca_chain(conf, &id->ca, NULL);
	return mbedtls_ssl_conf_own_cert(conf, &id->own, &id->key);
}
