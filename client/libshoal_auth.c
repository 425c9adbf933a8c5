/*
 * libshoal_auth.c -- credentials as the AWS CLI finds them, and the
 * signature of every message libshoal sends (contract: shoal.h
 * shoal_options; the algorithm: proto/wire_auth.h).
 *
 * Order (the AWS CLI's, without the parts that need AWS: SSO, roles,
 * instance metadata): explicit options, the environment, the profile of the
 * shared credentials file -- with one step of Shoal's own before the
 * default profile: for an endpoint file D/router.endpoint, the cluster's
 * key in D/aws-credentials (c->cluster_creds; deploy/cluster.sh up
 * --credentials writes it), as D/tls/ca.pem is the CA of such endpoints.
 * A profile the user named (options, AWS_PROFILE) still wins over it; the
 * default profile does not, since it is usually the user's AWS account.
 * The config file only gives a region.  Files are
 * INI (inih), as botocore reads them: "[name]" sections in the credentials
 * file, "[profile name]" (and "[default]") in the config file.
 *
 * A message is signed when it is sent: op_send signs each copy it sends
 * (a resend gets a fresh date), and the lanes' io signs each message,
 * batch or lone request, once as a whole.  The derived key is cached for
 * the day under kmu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ini.h>

#include "client/libshoal_int.h"
#include "common/alloc.h"
#include "proto/wire_auth.h"

#define SERVICE "dynamodb"

/* ------------------------------------------------------------------------ */
/* Finding credentials                                                       */
/* ------------------------------------------------------------------------ */

typedef struct ini_want {
	const char *section; /* "default", "profile x", ... */
	bool found;
	char key_id[128];
	char secret[256];
	char region[64];
} ini_want;

static void copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
	ini_want *w = user;
	if (strcmp(section, w->section) != 0)
		return 1;
	w->found = true;
	if (strcmp(name, "aws_access_key_id") == 0)
		copy(w->key_id, sizeof(w->key_id), value);
	else if (strcmp(name, "aws_secret_access_key") == 0)
		copy(w->secret, sizeof(w->secret), value);
	else if (strcmp(name, "region") == 0)
		copy(w->region, sizeof(w->region), value);
	return 1;
}

/* $var, else ~/.aws/<name>, into path; false when neither can be had. */
static bool aws_file(const char *var, const char *name, char *path, size_t cap)
{
	const char *v = getenv(var);
	if (v != NULL && v[0] != '\0') {
		copy(path, cap, v);
		return true;
	}
	const char *home = getenv("HOME");
	if (home == NULL || home[0] == '\0')
		return false;
	snprintf(path, cap, "%s/.aws/%s", home, name);
	return true;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

int lib_creds_find(shoal_client *c, char *errmsg)
{
	const shoal_options *o = &c->opts;
	c->sign = false;
	c->creds_source = NULL;
	const char *named =
	    o->profile != NULL && o->profile[0] != '\0' ? o->profile : env("AWS_PROFILE");
	const char *profile = named != NULL ? named : "default";
	char path[4096];
	ini_want cw = {.section = profile}, cluster = {.section = "default"};
	if (o->no_sign)
		return SHOAL_OK;
	if (o->access_key_id != NULL || o->secret_access_key != NULL) {
		if (o->access_key_id == NULL || o->secret_access_key == NULL ||
		    o->access_key_id[0] == '\0' || o->secret_access_key[0] == '\0')
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Partial credentials found in options, missing: %s",
			               o->access_key_id == NULL || o->access_key_id[0] == '\0'
			                   ? "access_key_id"
			                   : "secret_access_key");
		copy(cw.key_id, sizeof(cw.key_id), o->access_key_id);
		copy(cw.secret, sizeof(cw.secret), o->secret_access_key);
		c->creds_source = "options";
	} else if (env("AWS_ACCESS_KEY_ID") != NULL || env("AWS_SECRET_ACCESS_KEY") != NULL) {
		if (env("AWS_ACCESS_KEY_ID") == NULL || env("AWS_SECRET_ACCESS_KEY") == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Partial credentials found in env, missing: %s",
			               env("AWS_ACCESS_KEY_ID") == NULL ? "AWS_ACCESS_KEY_ID"
			                                                : "AWS_SECRET_ACCESS_KEY");
		copy(cw.key_id, sizeof(cw.key_id), env("AWS_ACCESS_KEY_ID"));
		copy(cw.secret, sizeof(cw.secret), env("AWS_SECRET_ACCESS_KEY"));
		c->creds_source = "environment";
	} else if (named == NULL && c->cluster_creds[0] != '\0' &&
	           ini_parse(c->cluster_creds, on_ini, &cluster) >= 0 && cluster.found) {
		/* The cluster's own key: before the default profile, which is
		 * usually for AWS, and after everything the user named. */
		if (cluster.key_id[0] == '\0' || cluster.secret[0] == '\0')
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Partial credentials found in the cluster's credentials "
			               "file %s: it needs aws_access_key_id and "
			               "aws_secret_access_key",
			               c->cluster_creds);
		copy(cw.key_id, sizeof(cw.key_id), cluster.key_id);
		copy(cw.secret, sizeof(cw.secret), cluster.secret);
		c->creds_source = "cluster-credentials-file";
	} else {
		if (aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", path, sizeof(path)))
			ini_parse(path, on_ini, &cw); /* a missing file is no profile */
		if (cw.found && cw.key_id[0] != '\0' && cw.secret[0] != '\0')
			c->creds_source = "shared-credentials-file";
		else if (cw.found)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Partial credentials found in shared-credentials-file %s "
			               "profile %s: it needs aws_access_key_id and "
			               "aws_secret_access_key",
			               path, profile);
	}
	/* The region: options, environment, the profile in the config file. */
	const char *region = o->region != NULL && o->region[0] != '\0' ? o->region : NULL;
	if (region == NULL)
		region = env("AWS_REGION");
	if (region == NULL)
		region = env("AWS_DEFAULT_REGION");
	char section[300];
	snprintf(section, sizeof(section), "%s%s",
	         strcmp(profile, "default") == 0 ? "" : "profile ", profile);
	ini_want fw = {.section = section};
	if (aws_file("AWS_CONFIG_FILE", "config", path, sizeof(path)))
		ini_parse(path, on_ini, &fw);
	if (region == NULL && cw.region[0] != '\0')
		region = cw.region;
	if (region == NULL && fw.region[0] != '\0')
		region = fw.region;
	if (named != NULL && c->creds_source == NULL && !fw.found)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The config profile (%s) could not be found", named);
	if (c->creds_source == NULL)
		return SHOAL_OK; /* unsigned */
	if (strlen(cw.key_id) >= WIRE_AUTH_KEY_MAX || strlen(cw.secret) > 200)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "the access key id (< %d bytes) or secret (<= 200 bytes) is too long",
		    WIRE_AUTH_KEY_MAX);
	copy(c->key_id, sizeof(c->key_id), cw.key_id);
	copy(c->secret, sizeof(c->secret), cw.secret);
	copy(c->region, sizeof(c->region), region != NULL ? region : "us-east-1");
	memset(&cw, 0, sizeof(cw));
	memset(&cluster, 0, sizeof(cluster));
	c->sign = true;
	return SHOAL_OK;
}

const char *shoal_access_key_id(const shoal_client *c)
{
	return c->sign ? c->key_id : NULL;
}

const char *shoal_credentials_source(const shoal_client *c)
{
	return c->sign ? c->creds_source : NULL;
}

/* ------------------------------------------------------------------------ */
/* Signing                                                                   */
/* ------------------------------------------------------------------------ */

/* (libshoal_int.h's MSG_ROOM: the client token's 23 bytes and this field.) */
_Static_assert(MSG_ROOM >= 23 + WIRE_AUTH_KEY_MAX + 2 * WIRE_AUTH_SCOPE_MAX + 128,
               "MSG_ROOM too small for the Auth field");

int lib_sign(shoal_client *c, nng_msg *m)
{
	if (!c->sign)
		return SHOAL_OK;
	char date[17];
	wire_auth_amz_date((int64_t)time(NULL), date);
	uint8_t key[32], sig[32];
	pthread_mutex_lock(&c->kmu);
	if (strncmp(c->kdate, date, 8) != 0) {
		memcpy(c->kdate, date, 8);
		c->kdate[8] = '\0';
		wire_auth_signing_key(c->secret, c->kdate, c->region, SERVICE, c->kkey);
	}
	memcpy(key, c->kkey, 32);
	pthread_mutex_unlock(&c->kmu);
	wire_auth_signature(key, date, c->region, SERVICE, nng_msg_body(m), nng_msg_len(m), sig);
	uint8_t field[WIRE_AUTH_KEY_MAX + 2 * WIRE_AUTH_SCOPE_MAX + 128];
	size_t n = wire_auth_encode(field, sizeof(field), c->key_id, date, c->region, SERVICE, sig);
	if (n == 0 || nng_msg_append(m, field, n) != 0)
		return SHOAL_E_NOMEM;
	return SHOAL_OK;
}

/* The lanes' io: each channel of c->nng_io, wrapped so that its messages
 * are signed before they go. */
typedef struct signing_chan {
	shoal_client *c;
	void *inner;
} signing_chan;

static int sc_open(void *impl, wire_lane_io_cb cb, void *arg, void **chan)
{
	shoal_client *c = impl;
	signing_chan *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return SHOAL_E_NOMEM;
	s->c = c;
	int rc = c->nng_io.open(c->nng_io.impl, cb, arg, &s->inner);
	if (rc != SHOAL_OK) {
		sh_free(s);
		return rc;
	}
	*chan = s;
	return SHOAL_OK;
}

static void sc_send(void *chan, nng_msg *msg, int64_t send_by, int64_t answer_by)
{
	signing_chan *s = chan;
	/* Out of memory: it goes unsigned, and the router says so. */
	(void)lib_sign(s->c, msg);
	s->c->nng_io.send(s->inner, msg, send_by, answer_by);
}

static void sc_stop(void *chan)
{
	signing_chan *s = chan;
	s->c->nng_io.stop(s->inner);
}

static void sc_free(void *chan)
{
	signing_chan *s = chan;
	s->c->nng_io.free(s->inner);
	sh_free(s);
}

static void sc_renew(void *impl)
{
	shoal_client *c = impl;
	c->nng_io.renew(c->nng_io.impl);
}

void lib_signing_io(shoal_client *c)
{
	c->io.impl = c;
	c->io.renew = sc_renew;
	c->io.open = sc_open;
	c->io.send = sc_send;
	c->io.stop = sc_stop;
	c->io.free = sc_free;
}
