/*
 * tls.c -- TLS configurations for cluster members (contract: tls.h).
 */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"

static int config(nng_tls_config **out, nng_tls_mode mode, const char *cert, const char *ca,
                  nng_tls_auth_mode auth, char *errmsg)
{
	nng_tls_config *c;
	int rv = nng_tls_config_alloc(&c, mode);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_tls_config_alloc: %s",
		               nng_strerror(rv));
	const char *what = "TLS 1.2 or later";
	rv = nng_tls_config_version(c, NNG_TLS_1_2, NNG_TLS_1_3);
	if (rv == 0 && cert != NULL) {
		what = cert;
		rv = nng_tls_config_cert_key_file(c, cert, NULL);
	}
	if (rv == 0 && ca != NULL) {
		what = ca;
		rv = nng_tls_config_ca_file(c, ca);
	}
	if (rv == 0) {
		what = "the authentication mode";
		rv = nng_tls_config_auth_mode(c, auth);
	}
	if (rv != 0) {
		nng_tls_config_free(c);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TLS: %s: %s", what, nng_strerror(rv));
	}
	*out = c;
	return SHOAL_OK;
}

/* A readable regular file; a message naming it otherwise. */
static int check_file(const char *path, bool secret, void (*warn)(const char *msg),
                      char *errmsg)
{
	struct stat st;
	if (stat(path, &st) != 0 || access(path, R_OK) != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TLS: %s: %s (deploy/certs.sh makes a cluster's certificates)", path,
		               strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TLS: %s is not a regular file", path);
	if (secret && (st.st_mode & 077) != 0 && warn != NULL) {
		char msg[1200];
		snprintf(msg, sizeof(msg),
		         "TLS: %s holds a private key and is readable by others (mode %04o); "
		         "chmod 600 it",
		         path, (unsigned)(st.st_mode & 07777));
		warn(msg);
	}
	return SHOAL_OK;
}

int sh_tls_load(sh_tls *t, const char *dir, const char *name, void (*warn)(const char *msg),
                char *errmsg)
{
	memset(t, 0, sizeof(*t));
	char ca[1100];
	if (snprintf(t->dir, sizeof(t->dir), "%s", dir) >= (int)sizeof(t->dir) ||
	    snprintf(t->cert, sizeof(t->cert), "%s/%s.pem", dir, name) >= (int)sizeof(t->cert) ||
	    snprintf(ca, sizeof(ca), "%s/ca.pem", dir) >= (int)sizeof(ca))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TLS: directory name too long: %s", dir);
	int rc = check_file(ca, false, warn, errmsg);
	if (rc == SHOAL_OK)
		rc = check_file(t->cert, true, warn, errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->server, NNG_TLS_MODE_SERVER, t->cert, ca, NNG_TLS_AUTH_MODE_REQUIRED,
		            errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->client, NNG_TLS_MODE_CLIENT, t->cert, ca, NNG_TLS_AUTH_MODE_REQUIRED,
		            errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->public_server, NNG_TLS_MODE_SERVER, t->cert, NULL,
		            NNG_TLS_AUTH_MODE_NONE, errmsg);
	if (rc != SHOAL_OK)
		sh_tls_free(t);
	return rc;
}

void sh_tls_free(sh_tls *t)
{
	if (t->server != NULL)
		nng_tls_config_free(t->server);
	if (t->client != NULL)
		nng_tls_config_free(t->client);
	if (t->public_server != NULL)
		nng_tls_config_free(t->public_server);
	t->server = t->client = t->public_server = NULL;
}

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
