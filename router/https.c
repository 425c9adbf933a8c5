/*
 * https.c -- HTTPS's server configuration for the DynamoDB endpoint
 * (contract: httpd.h, rt_https_init).
 *
 * The HTTP server (httpd.c) runs TLS itself: each HTTPS connection is an
 * mbedtls session driven by the server's own I/O (its epoll thread, and the
 * thread writing an answer), so a request costs no thread hop and no copy
 * through another socket.  (Until 2026-11 each TLS connection was pumped
 * by two threads of its own through a socketpair into the server, at
 * 0.58-0.62 of plain HTTP's throughput at 64 requests in flight: README.)
 * Here: the one mbedtls configuration every connection uses -- the
 * cluster's router.pem as certificate and key, Shoal's TLS defaults
 * (common/tls_mbed.h: TLS 1.2, ECDHE with ChaCha20-Poly1305 first), and no
 * certificate asked of clients: they authenticate by signing requests
 * (SigV4), as with DynamoDB.
 *
 * Threads: init and free on the main thread; the configuration is read by
 * any thread in between (mbedtls configurations are read-only once set up;
 * the random generator has its own lock).
 */
#include <mbedtls/error.h>
#include <mbedtls/ssl.h>

#include "common/alloc.h"
#include "common/tls.h"
#include "common/tls_mbed.h"
#include "router/httpd.h"
#include "router/router.h"

struct rt_https {
	sh_tls_ident ident;
	mbedtls_ssl_config conf;
};

int rt_https_init(rt_https **out, const sh_tls *tls, char *errmsg)
{
	*out = NULL;
	rt_https *h = sh_calloc(1, sizeof(*h));
	if (h == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	mbedtls_ssl_config_init(&h->conf);
	const char *what;
	int rv = sh_tls_ident_load(&h->ident, tls, &what);
	if (rv == 0) {
		what = "the TLS configuration";
		rv = sh_tls_conf_defaults(&h->conf, MBEDTLS_SSL_IS_SERVER);
	}
	if (rv == 0) {
		mbedtls_ssl_conf_authmode(&h->conf, MBEDTLS_SSL_VERIFY_NONE);
		rv = sh_tls_conf_ident(&h->conf, &h->ident, false);
	}
	if (rv != 0) {
		char buf[160];
		mbedtls_strerror(rv, buf, sizeof(buf));
		rt_https_free(h);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "https: %s: %s", what, buf);
	}
	*out = h;
	return SHOAL_OK;
}

const struct mbedtls_ssl_config *rt_https_conf(const rt_https *h)
{
	return &h->conf;
}

void rt_https_free(rt_https *h)
{
	if (h == NULL)
		return;
	mbedtls_ssl_config_free(&h->conf);
	sh_tls_ident_free(&h->ident);
	sh_free(h);
}
