/*
 * tls_load.c -- a member's certificates and its nng TLS configurations
 * (contract: tls.h, sh_tls_load).  Apart from tls.c so that libshoal, which
 * dials with a configuration of its own, does not carry the engine and
 * mbedtls with it.
 */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"

static int config(nng_tls_config **out, nng_tls_mode mode, const char *cert, const char *ca,
                  nng_tls_auth_mode auth, unsigned peers, char *errmsg)
{
	nng_tls_config *c;
	int rv = sh_tls_config_alloc(&c, mode, peers);
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
static int check_file(const char *path, bool secret, void (*warn)(const char *msg), char *errmsg)
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
	if (pthread_mutex_init(&t->mu, NULL) != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "TLS: pthread_mutex_init failed");
	t->mu_init = true;
	char ca[1100];
	if (snprintf(t->dir, sizeof(t->dir), "%s", dir) >= (int)sizeof(t->dir) ||
	    snprintf(t->cert, sizeof(t->cert), "%s/%s.pem", dir, name) >= (int)sizeof(t->cert) ||
	    snprintf(ca, sizeof(ca), "%s/ca.pem", dir) >= (int)sizeof(ca)) {
		sh_tls_free(t);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TLS: directory name too long: %s", dir);
	}
	/* With Shoal's engine: a member's listeners (node RPC) take nodes and
	 * routers, its dials reach nodes only. */
	t->peers_checked = sh_tls_engine_ours();
	unsigned members = 0, nodes = 0;
	if (t->peers_checked) {
		nodes = SH_TLS_PEERS(SH_TLS_PEER_NODE);
		members = nodes | SH_TLS_PEERS(SH_TLS_PEER_ROUTER);
	}
	int rc = check_file(ca, false, warn, errmsg);
	if (rc == SHOAL_OK)
		rc = check_file(t->cert, true, warn, errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->server, NNG_TLS_MODE_SERVER, t->cert, ca,
		            NNG_TLS_AUTH_MODE_REQUIRED, members, errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->client, NNG_TLS_MODE_CLIENT, t->cert, ca,
		            NNG_TLS_AUTH_MODE_REQUIRED, nodes, errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->public_server, NNG_TLS_MODE_SERVER, t->cert, NULL,
		            NNG_TLS_AUTH_MODE_NONE, 0, errmsg);
	if (rc == SHOAL_OK)
		rc = config(&t->probe, NNG_TLS_MODE_CLIENT, t->cert, ca, NNG_TLS_AUTH_MODE_REQUIRED,
		            members, errmsg);
	if (rc != SHOAL_OK)
		sh_tls_free(t);
	return rc;
}

nng_tls_config *sh_tls_client_for(sh_tls *t, uint32_t node_id, char *errmsg)
{
	if (!t->peers_checked)
		return t->client;
	nng_tls_config *c = NULL;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n_named && c == NULL; i++)
		if (t->named[i].node_id == node_id)
			c = t->named[i].cfg;
	if (c != NULL)
		goto out;
	if (t->n_named == t->cap_named) {
		size_t cap = t->cap_named != 0 ? 2 * t->cap_named : 8;
		sh_tls_named *grown = sh_realloc(t->named, cap * sizeof(*grown));
		if (grown == NULL) {
			sh_errf(errmsg, SHOAL_E_INTERNAL, "TLS: out of memory (node %u)", node_id);
			goto out;
		}
		t->named = grown;
		t->cap_named = cap;
	}
	char ca[1100], name[32];
	snprintf(ca, sizeof(ca), "%s/ca.pem", t->dir); /* (fitted in sh_tls_load) */
	snprintf(name, sizeof(name), "node-%u", node_id);
	if (config(&c, NNG_TLS_MODE_CLIENT, t->cert, ca, NNG_TLS_AUTH_MODE_REQUIRED,
	           SH_TLS_PEERS(SH_TLS_PEER_NODE), errmsg) != SHOAL_OK)
		goto out;
	int rv = nng_tls_config_server_name(c, name);
	if (rv != 0) {
		nng_tls_config_free(c);
		c = NULL;
		sh_errf(errmsg, SHOAL_E_INTERNAL, "TLS: server name %s: %s", name,
		        nng_strerror(rv));
		goto out;
	}
	t->named[t->n_named++] = (sh_tls_named){.node_id = node_id, .cfg = c};
out:
	pthread_mutex_unlock(&t->mu);
	return c;
}

void sh_tls_free(sh_tls *t)
{
	for (size_t i = 0; i < t->n_named; i++)
		nng_tls_config_free(t->named[i].cfg);
	sh_free(t->named);
	t->named = NULL;
	t->n_named = t->cap_named = 0;
	if (t->mu_init)
		pthread_mutex_destroy(&t->mu);
	t->mu_init = false;
	if (t->server != NULL)
		nng_tls_config_free(t->server);
	if (t->client != NULL)
		nng_tls_config_free(t->client);
	if (t->public_server != NULL)
		nng_tls_config_free(t->public_server);
	if (t->probe != NULL)
		nng_tls_config_free(t->probe);
	t->server = t->client = t->public_server = t->probe = NULL;
}
