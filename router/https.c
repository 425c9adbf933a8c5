/*
 * https.c -- HTTPS for the DynamoDB endpoint (contract: httpd.h,
 * rt_https_start).
 *
 * TLS is nng's (tls+tcp stream listener, mbedtls), with the cluster's
 * router.pem (common/tls.h); the HTTP server (httpd.c) stays as it is: each
 * accepted TLS stream is pumped (sh_tls_pump: two threads copying between
 * the stream and one end of a socketpair) and the other end is handed to
 * the server as a connection of its own, with the client's address, so its
 * limits per address, timeouts and caps apply unchanged.  A client that
 * never finishes its TLS handshake holds its pump threads until the
 * server's head timeout closes the connection.
 *
 * Threads: start/stop on the main thread; the accept callback on nng's.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/tls.h"
#include "router/httpd.h"
#include "router/router.h"

struct rt_https {
	rt_httpd *httpd;
	nng_stream_listener *l;
	nng_aio *aio;
	bool sleeping; /* aio is a back-off sleep (accept callback) */
	atomic_bool closing;
	char url[300];
};

/* nng's address of the peer as a sockaddr (family 0 when unknown). */
static void peer_of(nng_stream *s, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	nng_sockaddr sa;
	if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &sa) != 0)
		return;
	if (sa.s_family == NNG_AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = sa.s_in.sa_port;
		in->sin_addr.s_addr = sa.s_in.sa_addr;
	} else if (sa.s_family == NNG_AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = sa.s_in6.sa_port;
		memcpy(&in6->sin6_addr, sa.s_in6.sa_addr, 16);
	}
}

static void accept_cb(void *arg)
{
	rt_https *h = arg;
	int rv = nng_aio_result(h->aio);
	if (atomic_load(&h->closing) || rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	if (h->sleeping) {
		h->sleeping = false;
	} else if (rv == 0) {
		nng_stream *s = nng_aio_get_output(h->aio, 0);
		struct sockaddr_storage ss;
		peer_of(s, &ss);
		int fd = sh_tls_pump(s);
		if (fd >= 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			rt_httpd_adopt(h->httpd, fd, &ss);
		}
	} else if (rv == NNG_ENOFILES || rv == NNG_ENOMEM || rv == NNG_ENOSPC) {
		/* Out of descriptors or memory: back off instead of
		 * spinning.  (One peer's failed connection is not a reason
		 * to make the others wait.) */
		h->sleeping = true;
		nng_sleep_aio(100, h->aio);
		return;
	}
	nng_stream_listener_accept(h->l, h->aio);
}

int rt_https_start(rt_https **out, rt_httpd *httpd, const char *hostport, nng_tls_config *cfg,
                   char *errmsg)
{
	*out = NULL;
	rt_https *h = sh_calloc(1, sizeof(*h));
	if (h == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	h->httpd = httpd;
	if ((size_t)snprintf(h->url, sizeof(h->url), "tls+tcp://%s", hostport) >= sizeof(h->url)) {
		sh_free(h);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "https: address too long: %s", hostport);
	}
	int rv = nng_stream_listener_alloc(&h->l, h->url);
	if (rv == 0)
		rv = nng_stream_listener_set_ptr(h->l, NNG_OPT_TLS_CONFIG, cfg);
	/* nng's streams leave Nagle on; HTTP answers must not wait for ACKs. */
	if (rv == 0)
		rv = nng_stream_listener_set_bool(h->l, NNG_OPT_TCP_NODELAY, true);
	if (rv == 0)
		rv = nng_stream_listener_listen(h->l);
	if (rv == 0)
		rv = nng_aio_alloc(&h->aio, accept_cb, h);
	if (rv != 0) {
		if (h->l != NULL)
			nng_stream_listener_free(h->l);
		sh_free(h);
		return sh_errf(errmsg, SHOAL_E_IO, "https: listen on %s: %s", hostport,
		               nng_strerror(rv));
	}
	nng_stream_listener_accept(h->l, h->aio);
	*out = h;
	return SHOAL_OK;
}

void rt_https_stop(rt_https *h)
{
	if (h == NULL)
		return;
	atomic_store(&h->closing, true);
	nng_stream_listener_close(h->l);
	nng_aio_stop(h->aio); /* waits for a running accept_cb */
	nng_aio_free(h->aio);
	nng_stream_listener_free(h->l);
	sh_free(h);
}
