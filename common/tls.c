/*
 * tls.c -- nng URLs, listeners and dials with TLS (contract: tls.h; a
 * member's configurations: tls_load.c; the engine: tls_engine.c).
 */
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"

bool sh_tls_is_tls(const char *url)
{
	return strncmp(url, "tls+", 4) == 0;
}

bool sh_tls_url(bool tls, const char *url, char *out, size_t cap)
{
	const char *prefix = tls && strncmp(url, "tcp", 3) == 0 ? "tls+" : "";
	return (size_t)snprintf(out, cap, "%s%s", prefix, url) < cap;
}

int sh_tls_listen(nng_socket sock, const char *url, nng_tls_config *cfg, nng_listener *out)
{
	nng_listener l;
	int rv = nng_listener_create(&l, sock, url);
	if (rv != 0)
		return rv;
	if (sh_tls_is_tls(url))
		rv = cfg == NULL ? NNG_EINVAL : nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
	if (rv == 0)
		rv = nng_listener_start(l, 0);
	if (rv != 0) {
		nng_listener_close(l);
		return rv;
	}
	if (out != NULL)
		*out = l;
	return 0;
}

int sh_tls_dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags)
{
	nng_dialer d;
	int rv = nng_dialer_create(&d, sock, url);
	if (rv != 0)
		return rv;
	if (sh_tls_is_tls(url))
		rv = cfg == NULL ? NNG_EINVAL : nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
	if (rv == 0)
		rv = nng_dialer_start(d, flags);
	if (rv != 0)
		nng_dialer_close(d);
	return rv;
}
