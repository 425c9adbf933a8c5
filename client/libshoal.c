/*
 * libshoal.c -- the client library's transport: one nng REQ socket, one
 * context per request in flight, and the state machine that moves a request
 * along (contract: shoal.h; requests and answers: libshoal_call.c).
 *
 * Transport.  The client opens one REQ socket and dials every router with
 * NNG_FLAG_NONBLOCK, so each router is one pipe that nng redials in the
 * background (10 ms, backing off to 200 ms).  The socket's
 * NNG_OPT_REQ_RESENDTIME is the attempt timeout: req0 then resends a request
 * whose pipe closed at once, and one left unanswered after the attempt
 * timeout, on whichever pipe is ready (nng 1.5.2 req.c: req0_pipe_close
 * schedules the context's resend timer to fire immediately).  That is the
 * whole failover story: a router restart costs one resend.  Pipes are
 * counted through nng_pipe_notify (ADD_POST / REM_POST, by pipe id, because
 * REM_POST also fires for pipes rejected before ADD_POST) so that a request
 * that cannot even be sent can say "Could not connect" instead of timing out.
 *
 * Requests.  Every request in flight is an `op`: an nng context, one aio
 * used for each step in turn, the packed Request kept for resends, and the
 * deadline.  Ops are pooled (contexts and aios are reused).  The aio callback
 * runs on nng's threads and only moves the op along its state machine; the
 * protobuf -> JSON conversion of an answer and every user callback run on the
 * user's thread (the blocking caller, or shoal_poll).
 *
 *   state      event                                         next      (op_cb)
 *   ---------  --------------------------------------------  ---------
 *   IDLE       shoal_call_* / shoal_submit_* (lib_op_start)  SENDING
 *   SENDING    handed to a pipe                              RECEIVING
 *   SENDING    send timed out, no router connected           DONE  connect error
 *   SENDING    send timed out, connected, time left          SENDING
 *   SENDING    deadline passed / socket closed               DONE  timeout / closed
 *   RECEIVING  answer ServiceUnavailable, retries left       BACKOFF
 *   RECEIVING  answer throttling, throttle retries left,      BACKOFF
 *              the jittered wait ends before the deadline
 *   RECEIVING  answer                                        DONE  ok
 *   RECEIVING  deadline passed                               DONE  timeout or connect error
 *   BACKOFF    backoff slept                                 SENDING
 *   DONE       delivered to the caller (lib_op_release)      IDLE
 *
 * Pipelining.  Asynchronous requests (shoal_submit_*) go through a few
 * lanes (shoal_options.pipeline, default 4): while every lane has a message
 * in flight, new requests queue, and the next free lane sends all of them
 * as one Request batch (see "Pipelining: lanes" below).  Blocking calls
 * always go alone.
 *
 * Completion.  A blocking caller waits on its op's condition variable; an
 * asynchronous op is appended to the client's completion queue and the
 * client's condition variable wakes shoal_poll.  Both under c->mu.  Before an
 * op is reused or freed, nng_aio_wait makes sure its callback has returned.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "client/libshoal_int.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/tls.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

void lib_set_err(shoal_error *err, int code, int source, const char *msg)
{
	if (err == NULL)
		return;
	err->code = code;
	err->source = code == SHOAL_OK ? SHOAL_SRC_NONE : source;
	snprintf(err->exception, sizeof(err->exception), "%s", shoal_exception_name(code));
	snprintf(err->message, sizeof(err->message), "%s", msg != NULL ? msg : "");
}

/* Monotonic milliseconds. */
static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before the op's deadline (<= 0: passed). */
static int64_t remaining(const op *o)
{
	return o->deadline - now_ms();
}

static int nng_code(int rv)
{
	switch (rv) {
	case NNG_ENOMEM:
		return SHOAL_E_NOMEM;
	case NNG_ETIMEDOUT:
		return SHOAL_E_TIMEOUT;
	case NNG_ECLOSED:
	case NNG_ECONNRESET:
	case NNG_ECONNREFUSED:
	case NNG_ECONNSHUT:
		return SHOAL_E_UNAVAILABLE;
	default:
		return SHOAL_E_INTERNAL;
	}
}

void shoal_options_init(shoal_options *o)
{
	o->attempt_timeout_ms = 12000;
	o->deadline_ms = 30000;
	o->connect_timeout_ms = 2000;
	o->retries = 2;
	o->pipeline = 4;
	o->throttle_retries = 9;
	o->throttle_base_ms = 50;
	o->throttle_max_ms = 20000;
	o->access_key_id = NULL;
	o->secret_access_key = NULL;
	o->profile = NULL;
	o->region = NULL;
	o->no_sign = 0;
	o->ca_bundle = NULL;
}

void shoal_free(void *p)
{
	sh_free(p);
}

/* ------------------------------------------------------------------------ */
/* Pipes                                                                     */
/* ------------------------------------------------------------------------ */

/* nng thread: a router connection came or went. */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	shoal_client *c = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	pthread_mutex_lock(&c->pmu);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		if (c->n_pipes == c->cap_pipes) {
			unsigned cap = c->cap_pipes * 2;
			uint32_t *np = sh_realloc(c->pipes, cap * sizeof(*np));
			if (np != NULL) {
				c->pipes = np;
				c->cap_pipes = cap;
			}
		}
		/* Out of memory: the pipe is not counted; at worst a call that
		 * finds no counted pipe reports a connection error early. */
		if (c->n_pipes < c->cap_pipes)
			c->pipes[c->n_pipes++] = id;
		pthread_cond_broadcast(&c->pcond);
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		for (unsigned i = 0; i < c->n_pipes; i++) {
			if (c->pipes[i] == id) {
				c->pipes[i] = c->pipes[--c->n_pipes];
				break;
			}
		}
	}
	pthread_mutex_unlock(&c->pmu);
}

unsigned shoal_connected(shoal_client *c)
{
	pthread_mutex_lock(&c->pmu);
	unsigned n = c->n_pipes;
	pthread_mutex_unlock(&c->pmu);
	return n;
}

const char *shoal_endpoints(const shoal_client *c)
{
	return c->endpoints;
}

/* ------------------------------------------------------------------------ */
/* Client                                                                    */
/* ------------------------------------------------------------------------ */

static int lanes_open(shoal_client *c, char *errmsg);
static void lanes_close(shoal_client *c);

/*
 * Before the socket closes: nng 1.5.2 (Debian 12's; nanomsg/nng#1518, fixed
 * in 1.6.0) stops a TLS listener for good when a connection leaves in the
 * middle of its handshake or SP negotiation -- the router's listen guard
 * (common/tls.h sh_listen_guard) listens again within ~10 s, dropping that
 * router's connections.  A client of several routers' endpoints that made
 * one call through the first connection up would leave the others exactly
 * there.  So when it dials a TLS endpoint it waits, at most
 * SHOAL_SETTLE_MS, until it has a connection per dialer (a connection
 * counted here has finished its negotiation at both ends), or until the
 * dialers without one have each had a connection refused (their router is
 * down); an unreachable host (no answer at all) makes it wait the whole
 * bound.  Plain TCP needs no wait (nng retries after a peer's close there).
 */
#define SHOAL_SETTLE_MS      300
#define SHOAL_SETTLE_LOOK_MS 20

static void settle_dials(shoal_client *c)
{
	if (!c->tls_dials)
		return;
	/* A dialer whose router refuses connections (down: nothing listens)
	 * will not finish a handshake: it is not waited for.  Looked at every
	 * SHOAL_SETTLE_LOOK_MS (a look at nng's statistics, ~50 us). */
	int64_t end = sh_now_ms() + SHOAL_SETTLE_MS;
	pthread_mutex_lock(&c->pmu);
	for (;;) {
		uint32_t need = c->n_dials, have = c->n_pipes;
		if (have >= need)
			break;
		pthread_mutex_unlock(&c->pmu);
		uint32_t down = sh_tls_dials_refused(c->sock);
		pthread_mutex_lock(&c->pmu);
		int64_t left = end - sh_now_ms();
		if (c->n_pipes + down >= c->n_dials || left <= 0)
			break;
		struct timespec until;
		sh_timespec_in(CLOCK_MONOTONIC,
		               left < SHOAL_SETTLE_LOOK_MS ? left : SHOAL_SETTLE_LOOK_MS, &until);
		pthread_cond_timedwait(&c->pcond, &c->pmu, &until);
	}
	pthread_mutex_unlock(&c->pmu);
}

static int check_options(const shoal_options *o, char *errmsg)
{
	if (o->attempt_timeout_ms <= 0 || o->deadline_ms <= 0 || o->connect_timeout_ms <= 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "client timeouts must be positive (attempt %d ms, deadline %d ms, "
		               "connect %d ms)",
		               o->attempt_timeout_ms, o->deadline_ms, o->connect_timeout_ms);
	if (o->retries < 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "client retries must be >= 0 (got %d)",
		               o->retries);
	if (o->throttle_retries < 0 || o->throttle_base_ms < 1 ||
	    o->throttle_max_ms < o->throttle_base_ms)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "client throttle retries must be >= 0 (got %d), throttle_base_ms >= 1 "
		    "(got %d) and throttle_max_ms >= throttle_base_ms (got %d)",
		    o->throttle_retries, o->throttle_base_ms, o->throttle_max_ms);
	if (o->pipeline < 0 || o->pipeline > 1024)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "client pipeline must be 0 .. 1024 (got %d)", o->pipeline);
	return SHOAL_OK;
}

/* D/<name> next to the endpoint file D/router.endpoint, if readable. */
static bool beside(const char *endpoint_file, const char *name, char *out, size_t cap)
{
	const char *slash = strrchr(endpoint_file, '/');
	int dlen = slash != NULL ? (int)(slash - endpoint_file) : 1;
	const char *d = slash != NULL ? endpoint_file : ".";
	if ((size_t)snprintf(out, cap, "%.*s/%s", dlen, d, name) < cap && access(out, R_OK) == 0)
		return true;
	if (cap > 0)
		out[0] = '\0';
	return false;
}

bool lib_endpoint_ca(const char *endpoint_file, char *out, size_t cap)
{
	return beside(endpoint_file, "tls/ca.pem", out, cap);
}

bool lib_endpoint_creds(const char *endpoint_file, char *out, size_t cap)
{
	return beside(endpoint_file, "aws-credentials", out, cap);
}

SHOAL_API int shoal_tls_engine_install(char *errmsg)
{
	char msg[SH_ERRMSG_SIZE];
	int rc = sh_tls_engine_register(NULL, msg);
	if (rc != SHOAL_OK && errmsg != NULL)
		snprintf(errmsg, SH_ERRMSG_SIZE, "%s", msg);
	return rc;
}

/* The TLS configuration for tls+tcp:// endpoints: the server must show a
 * certificate of c->ca_bundle's CAs. */
static int client_tls(shoal_client *c, const char *url, char *errmsg)
{
	if (c->ca_bundle[0] == '\0')
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid endpoint: \"%s\" is TLS: name the CA certificates its "
		               "router's certificate is signed by (--ca-bundle, AWS_CA_BUNDLE; "
		               "deploy/cluster.sh makes D/tls/ca.pem)",
		               url);
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return sh_errf(errmsg, nng_code(rv), "TLS: %s", nng_strerror(rv));
	if ((rv = nng_tls_config_ca_file(cfg, c->ca_bundle)) != 0 ||
	    (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0) {
		nng_tls_config_free(cfg);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TLS: CA bundle %s: %s", c->ca_bundle,
		               rv == NNG_ENOENT ? "no such file" : nng_strerror(rv));
	}
	c->tls = cfg;
	return SHOAL_OK;
}

/* Dials every URL of the list; builds the normalised list in c->endpoints. */
static int dial_all(shoal_client *c, const char *list, char *errmsg)
{
	size_t cap = strlen(list) + 1;
	c->endpoints = sh_malloc(cap);
	if (c->endpoints == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	c->endpoints[0] = '\0';
	size_t used = 0;
	const char *p = list;
	unsigned n = 0;
	for (;;) {
		const char *end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		const char *b = p, *e = end;
		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
			e--;
		if (b == e)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "empty endpoint in the endpoint list \"%s\"", list);
		char url[1024];
		if ((size_t)(e - b) >= sizeof(url))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "endpoint URL too long: \"%.60s...\"", b);
		memcpy(url, b, (size_t)(e - b));
		url[e - b] = '\0';
		if (sh_tls_is_tls(url) && c->tls == NULL) {
			int trc = client_tls(c, url, errmsg);
			if (trc != SHOAL_OK)
				return trc;
		}
		int rv = sh_tls_dial(c->sock, url, c->tls, NNG_FLAG_NONBLOCK);
		if (rv != 0) {
			int code = (rv == NNG_ENOMEM) ? SHOAL_E_NOMEM : SHOAL_E_VALIDATION;
			return sh_errf(errmsg, code, "Invalid endpoint: \"%s\": %s", url,
			               nng_strerror(rv));
		}
		c->n_dials++;
		c->tls_dials = c->tls_dials || sh_tls_is_tls(url);
		used +=
		    (size_t)snprintf(c->endpoints + used, cap - used, "%s%s", n ? "," : "", url);
		n++;
		if (*end == '\0')
			break;
		p = end + 1;
	}
	return SHOAL_OK;
}

/* "file://PATH": the endpoint list is the file's text (deploy/cluster.sh
 * writes <dir>/router.endpoint), one URL per line or comma-separated. */
static int read_endpoint_file(const char *path, char *buf, size_t cap, char *errmsg)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid endpoint: cannot read \"%s\": %s", path, strerror(errno));
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Lines become list entries; blank lines and trailing newlines vanish. */
	size_t w = 0;
	bool sep = false;
	for (size_t i = 0; i < n; i++) {
		char ch = buf[i];
		if (ch == '\n' || ch == '\r' || ch == ',') {
			sep = w > 0;
			continue;
		}
		if (sep) {
			buf[w++] = ',';
			sep = false;
		}
		buf[w++] = ch;
	}
	buf[w] = '\0';
	if (w == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid endpoint: \"%s\" is empty",
		               path);
	return SHOAL_OK;
}

int shoal_client_new(const char *endpoints, const shoal_options *opts, shoal_client **out,
                     char *errmsg)
{
	return lib_client_new(endpoints, opts, NULL, out, errmsg);
}

int lib_client_new(const char *endpoints, const shoal_options *opts, const char *cluster_creds,
                   shoal_client **out, char *errmsg)
{
	*out = NULL;
	if (endpoints == NULL || endpoints[0] == '\0')
		endpoints = SHOAL_DEFAULT_ENDPOINT;
	char from_file[4096], ca_default[1024] = "", creds_default[1024] = "";
	if (strncmp(endpoints, "file://", 7) == 0) {
		lib_endpoint_ca(endpoints + 7, ca_default, sizeof(ca_default));
		if (cluster_creds == NULL &&
		    lib_endpoint_creds(endpoints + 7, creds_default, sizeof(creds_default)))
			cluster_creds = creds_default;
		int frc = read_endpoint_file(endpoints + 7, from_file, sizeof(from_file), errmsg);
		if (frc != SHOAL_OK)
			return frc;
		endpoints = from_file;
	}
	shoal_options o;
	shoal_options_init(&o);
	if (opts != NULL)
		o = *opts;
	int rc = check_options(&o, errmsg);
	if (rc != SHOAL_OK)
		return rc;

	shoal_client *c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	c->opts = o;
	/* The caller's, else the cluster's (an endpoint file of a cluster
	 * made by deploy/cluster.sh), else the environment's. */
	const char *cab = o.ca_bundle != NULL ? o.ca_bundle : ca_default;
	if (cab[0] == '\0' && getenv("AWS_CA_BUNDLE") != NULL)
		cab = getenv("AWS_CA_BUNDLE");
	snprintf(c->ca_bundle, sizeof(c->ca_bundle), "%s", cab);
	c->opts.ca_bundle = NULL;
	snprintf(c->cluster_creds, sizeof(c->cluster_creds), "%s",
	         cluster_creds != NULL ? cluster_creds : "");
	pthread_mutex_init(&c->kmu, NULL);
	rc = lib_creds_find(c, errmsg);
	/* The caller's strings are not kept (copied into c if used). */
	c->opts.access_key_id = c->opts.secret_access_key = NULL;
	c->opts.profile = c->opts.region = NULL;
	if (rc != SHOAL_OK) {
		pthread_mutex_destroy(&c->kmu);
		sh_free(c);
		return rc;
	}
	atomic_init(&c->next_id, 1);
	if (getrandom(c->nonce, sizeof(c->nonce), 0) != (ssize_t)sizeof(c->nonce)) {
		uint64_t x[2] = {(uint64_t)time(NULL) ^ (uint64_t)getpid() << 32,
		                 (uint64_t)(uintptr_t)c};
		memcpy(c->nonce, x, sizeof(x));
	}
	c->f_client_token = wire_field_number(&shoal__request__descriptor, "client_token");
	c->f_status = wire_field_number(&shoal__response__descriptor, "status");
	c->cap_pipes = 8;
	c->pipes = sh_calloc(c->cap_pipes, sizeof(*c->pipes));
	if (c->pipes == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_client;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->pmu, NULL);
	sh_cond_init_monotonic(&c->cond);
	sh_cond_init_monotonic(&c->pcond);

	int rv = nng_req0_open(&c->sock);
	if (rv != 0) {
		rc = sh_errf(errmsg, nng_code(rv), "nng_req0_open: %s", nng_strerror(rv));
		goto err_after_sync;
	}
	if ((rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, MAX_MSG)) != 0 ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, o.attempt_timeout_ms)) != 0 ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 10)) != 0 ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 200)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, c)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_cb, c)) != 0) {
		rc = sh_errf(errmsg, nng_code(rv), "setting up the client socket: %s",
		             nng_strerror(rv));
		goto err_after_socket;
	}
	rc = lanes_open(c, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_socket;
	rc = dial_all(c, endpoints, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_socket;
	*out = c;
	return SHOAL_OK;

err_after_socket:
	lanes_close(c);
	settle_dials(c);
	nng_close(c->sock);
	if (c->tls != NULL)
		nng_tls_config_free(c->tls);
err_after_sync:
	pthread_cond_destroy(&c->pcond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->pmu);
	pthread_mutex_destroy(&c->mu);
err_after_client:
	pthread_mutex_destroy(&c->kmu);
	memset(c->secret, 0, sizeof(c->secret));
	sh_free(c->endpoints);
	sh_free(c->pipes);
	sh_free(c);
	return rc;
}

static void op_free(op *o)
{
	nng_aio_stop(o->aio);
	nng_msg *m = nng_aio_get_msg(o->aio);
	if (m != NULL)
		nng_msg_free(m);
	nng_aio_free(o->aio);
	if (o->req != NULL)
		nng_msg_free(o->req);
	if (o->reply != NULL)
		nng_msg_free(o->reply);
	pthread_cond_destroy(&o->cond);
	sh_free(o);
}

void shoal_client_free(shoal_client *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_mutex_unlock(&c->mu);
	/* The lanes first: their messages are cancelled and no new one starts
	 * (their ops end "closing").  Then closing the socket fails every
	 * op's own pending operation with NNG_ECLOSED; op_free's nng_aio_stop
	 * waits for each callback to return. */
	lanes_close(c);
	settle_dials(c);
	nng_close(c->sock);
	if (c->tls != NULL)
		nng_tls_config_free(c->tls);
	op *o = c->all;
	while (o != NULL) {
		op *next = o->all_next;
		op_free(o);
		o = next;
	}
	pthread_cond_destroy(&c->pcond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->pmu);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->kmu);
	memset(c->secret, 0, sizeof(c->secret));
	sh_free(c->endpoints);
	sh_free(c->pipes);
	sh_free(c);
}

/* ------------------------------------------------------------------------ */
/* Ops: the state machine (nng threads)                                      */
/* ------------------------------------------------------------------------ */

static void op_cb(void *arg);

/* Any thread: a pooled op, or a new one.  SHOAL_E_UNAVAILABLE when the
 * client is closing, SHOAL_E_NOMEM, ... with the text in msg. */
int lib_op_get(shoal_client *c, op **out, char *msg)
{
	*out = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->closing) {
		pthread_mutex_unlock(&c->mu);
		return sh_errf(msg, SHOAL_E_UNAVAILABLE, "the client is closing");
	}
	op *o = c->free_ops;
	if (o != NULL) {
		c->free_ops = o->next;
		pthread_mutex_unlock(&c->mu);
		o->next = NULL;
		*out = o;
		return SHOAL_OK;
	}
	pthread_mutex_unlock(&c->mu);

	o = sh_calloc(1, sizeof(*o));
	if (o == NULL)
		return sh_errf(msg, SHOAL_E_NOMEM, "out of memory");
	o->c = c;
	int rc = SHOAL_OK;
	int rv = nng_aio_alloc(&o->aio, op_cb, o);
	if (rv != 0) {
		rc = sh_errf(msg, nng_code(rv), "nng_aio_alloc: %s", nng_strerror(rv));
		goto err_after_op;
	}
	/* The context inherits the socket's resend time (the attempt timeout). */
	rv = nng_ctx_open(&o->ctx, c->sock);
	if (rv != 0) {
		rc = sh_errf(msg, nng_code(rv), "nng_ctx_open: %s", nng_strerror(rv));
		goto err_after_aio;
	}
	pthread_cond_init(&o->cond, NULL);
	pthread_mutex_lock(&c->mu);
	o->all_next = c->all;
	c->all = o;
	pthread_mutex_unlock(&c->mu);
	*out = o;
	return SHOAL_OK;

err_after_aio:
	nng_aio_free(o->aio);
err_after_op:
	sh_free(o);
	return rc;
}

/* User thread: back to the pool once the caller has its result.  The aio
 * callback may still be returning from op_finish: wait for it first. */
void lib_op_release(op *o)
{
	shoal_client *c = o->c;
	nng_aio_wait(o->aio);
	if (o->req != NULL) {
		nng_msg_free(o->req);
		o->req = NULL;
	}
	if (o->reply != NULL) {
		nng_msg_free(o->reply);
		o->reply = NULL;
	}
	o->state = OP_IDLE;
	o->done = false;
	o->cb = NULL;
	o->arg = NULL;
	pthread_mutex_lock(&c->mu);
	o->next = c->free_ops;
	c->free_ops = o;
	pthread_mutex_unlock(&c->mu);
}

/* nng thread (or the submitter): the op is over; hand it to its waiter.  The
 * op must not be touched after this returns. */
static void op_finish(op *o, int code, int source, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void op_finish(op *o, int code, int source, const char *fmt, ...)
{
	shoal_client *c = o->c;
	o->code = code;
	o->source = source;
	o->msg[0] = '\0';
	if (fmt != NULL) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(o->msg, sizeof(o->msg), fmt, ap);
		va_end(ap);
	}
	o->state = OP_DONE;
	pthread_mutex_lock(&c->mu);
	if (o->async) {
		o->next = NULL;
		if (c->done_tail != NULL)
			c->done_tail->next = o;
		else
			c->done_head = o;
		c->done_tail = o;
		pthread_cond_broadcast(&c->cond);
	} else {
		o->done = true;
		pthread_cond_signal(&o->cond);
	}
	pthread_mutex_unlock(&c->mu);
}

static void finish_connect_error(op *o)
{
	op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_CONNECT,
	          "Could not connect to the endpoint URL: \"%s\"", o->c->endpoints);
}

static void finish_timeout(op *o)
{
	if (shoal_connected(o->c) == 0) {
		finish_connect_error(o);
		return;
	}
	op_finish(o, SHOAL_E_TIMEOUT, SHOAL_SRC_TIMEOUT,
	          "Read timeout on endpoint URL: \"%s\": no answer within %d ms", o->c->endpoints,
	          o->c->opts.deadline_ms);
}

/* Sends a copy of the request; the send waits at most connect_timeout_ms
 * for a ready router (and never past the deadline). */
static void op_send(op *o)
{
	int64_t left = remaining(o);
	if (left <= 0) {
		finish_timeout(o);
		return;
	}
	nng_msg *m;
	int rv = nng_msg_dup(&m, o->req);
	if (rv != 0 || lib_sign(o->c, m) != SHOAL_OK) { /* each copy signed as it goes */
		if (rv == 0)
			nng_msg_free(m);
		op_finish(o, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory copying a request");
		return;
	}
	int64_t wait = o->c->opts.connect_timeout_ms;
	if (wait > left)
		wait = left;
	o->state = OP_SENDING;
	nng_aio_set_msg(o->aio, m);
	nng_aio_set_timeout(o->aio, (nng_duration)wait);
	nng_ctx_send(o->ctx, o->aio);
}

/* The Response's status (an error code), read from its top-level fields
 * without unpacking the rest (an answer may be a 1 MB page, and this runs on
 * nng's thread for every answer while retries are possible); -1 if the
 * fields do not frame.  The answer is decoded in full later (op_result). */
static int reply_status(const shoal_client *c, nng_msg *m)
{
	const uint8_t *p = nng_msg_body(m), *end = p + nng_msg_len(m);
	int st = SHOAL_OK; /* proto3: an absent status is STATUS_OK */
	wire_field f;
	while (p < end) {
		if (!wire_next_field(&p, end, &f))
			return -1;
		if (f.number == c->f_status && f.type == 0)
			st = wire_code_from_status((int)f.value);
	}
	return st;
}

/* A lone call's exchange ended with rv (WIRE_LANE_*): "Stalled
 * connections" (proto/lanes.h), as the lanes do. */
static void note_exchange(shoal_client *c, int rv)
{
	if (wire_stall_note(&c->stall, rv, WIRE_LANE_STALL_MS))
		sh_dial_renew(c->sock);
}

static void on_sent(op *o, int rv)
{
	if (rv == 0) {
		int64_t left = remaining(o);
		if (left <= 0)
			left = 1; /* let the receive time out: it resets the context */
		o->state = OP_RECEIVING;
		nng_aio_set_timeout(o->aio, (nng_duration)left);
		nng_ctx_recv(o->ctx, o->aio);
		return;
	}
	/* A failed send gives the message back. */
	nng_msg *m = nng_aio_get_msg(o->aio);
	nng_aio_set_msg(o->aio, NULL);
	if (m != NULL)
		nng_msg_free(m);
	if (rv == NNG_ETIMEDOUT) {
		note_exchange(o->c, WIRE_LANE_UNREACHABLE);
		if (shoal_connected(o->c) == 0)
			finish_connect_error(o);
		else if (remaining(o) <= 0)
			finish_timeout(o);
		else
			op_send(o); /* routers connected but none was ready */
		return;
	}
	if (rv == NNG_ECLOSED) {
		op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_LOCAL, "the client is closing");
		return;
	}
	op_finish(o, nng_code(rv), SHOAL_SRC_LOCAL, "sending a request: %s", nng_strerror(rv));
}

/* An answer (taken over) arrived for o: done, or ServiceUnavailable or a
 * throttling error retried after a backoff (the policy: common/retry.h), on
 * o's own context from then on.  The wait is an nng timer on the op's aio:
 * no thread sleeps, whether the caller blocks or polls. */
static void op_answered(op *o, nng_msg *m)
{
	note_exchange(o->c, WIRE_LANE_OK);
	sh_retry *r = &o->retry;
	bool unavailable_left = r->attempts + 1 < r->max_attempts;
	bool throttle_left = r->throttled < r->throttle_max;
	/* Reading the status (on nng's thread) only when a retry may follow. */
	if (unavailable_left || throttle_left) {
		int st = reply_status(o->c, m);
		uint32_t delay = 0;
		bool again = false;
		if (st == SHOAL_E_UNAVAILABLE && unavailable_left)
			again =
			    sh_retry_next(r, SH_OUT_UNAVAILABLE, 0, now_ms(), o->deadline, &delay);
		else if (st > 0 && sh_retry_is_throttling(st) && throttle_left)
			again = sh_retry_throttled(r, now_ms(), o->deadline, &delay);
		if (again) {
			nng_msg_free(m);
			o->state = OP_BACKOFF;
			nng_sleep_aio((nng_duration)delay, o->aio);
			return;
		}
	}
	o->reply = m;
	op_finish(o, SHOAL_OK, SHOAL_SRC_NONE, NULL);
}

static void on_received(op *o, int rv)
{
	if (rv != 0) {
		if (rv == NNG_ETIMEDOUT) {
			note_exchange(o->c, WIRE_LANE_TIMEOUT);
			finish_timeout(o);
		} else if (rv == NNG_ECLOSED)
			op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_LOCAL, "the client is closing");
		else
			op_finish(o, nng_code(rv), SHOAL_SRC_LOCAL, "receiving an answer: %s",
			          nng_strerror(rv));
		return;
	}
	nng_msg *m = nng_aio_get_msg(o->aio);
	nng_aio_set_msg(o->aio, NULL);
	if (m == NULL) {
		/* Seen once from nng 1.5.2's REQ context (a receive that
		 * succeeded without a message, while the cluster's routers
		 * dialled new nodes): no answer -- send again while time is
		 * left, as after a connection reset. */
		if (remaining(o) > 0)
			op_send(o);
		else
			finish_timeout(o);
		return;
	}
	op_answered(o, m);
}

/* nng thread: one step of the state machine (table at the top). */
static void op_cb(void *arg)
{
	op *o = arg;
	int rv = nng_aio_result(o->aio);
	switch (o->state) {
	case OP_SENDING:
		on_sent(o, rv);
		break;
	case OP_RECEIVING:
		on_received(o, rv);
		break;
	case OP_BACKOFF:
		/* A sleep cut short by the aio's timeout ends with NNG_ETIMEDOUT:
		 * op_send checks the deadline itself. */
		if (rv != 0 && rv != NNG_ETIMEDOUT)
			op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_LOCAL, "the client is closing");
		else
			op_send(o);
		break;
	case OP_IDLE:
	case OP_PIPELINED:
	case OP_DONE:
		break; /* no operation of this aio is pending in these states */
	}
}

/* ------------------------------------------------------------------------ */
/* Pipelining: lanes (nng threads and submitters)                            */
/* ------------------------------------------------------------------------ */

/*
 * Asynchronous ops go through the client's lanes to the routers (the one
 * batching transport, proto/lanes.h): while every lane has a message in
 * flight, new ops queue, and the next free lane sends all of them as one
 * Request batch, which the router answers in one Response holding each
 * answer in order.  Each answer then goes through op_answered as if it had
 * come alone.  When anything goes wrong with a lane's message -- no router
 * ready, a timeout, a router lost -- its ops continue on their own contexts
 * (op_send), each with its own deadline, so every failure is handled by the
 * per-op state machine above.
 */

/* The end of an op's trip in a lane.  nng thread. */
static void lane_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	op *o = (op *)it;
	if (rv != WIRE_LANE_OK) {
		if (rv == WIRE_LANE_CLOSED)
			op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_LOCAL, "the client is closing");
		else if (rv == WIRE_LANE_BAD)
			op_finish(o, SHOAL_E_INTERNAL, SHOAL_SRC_PROTOCOL,
			          "malformed response from \"%s\": a batch answered without this "
			          "request's answer",
			          o->c->endpoints);
		else
			op_send(o); /* its own deadline, connect and timeout handling */
		return;
	}
	if (whole == NULL) {
		if (nng_msg_alloc(&whole, len) != 0) {
			op_finish(o, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
			return;
		}
		memcpy(nng_msg_body(whole), ans, len);
	}
	op_answered(o, whole);
}

/* Creates c's lanes (c->opts.pipeline of them). */
static int lanes_open(shoal_client *c, char *errmsg)
{
	if (c->opts.pipeline == 0)
		return SHOAL_OK;
	wire_lane_nng_io(&c->nng_io, &c->sock);
	lib_signing_io(c);
	wire_lanes_conf lc = {
	    .io = &c->io,
	    .n_lanes = (uint32_t)c->opts.pipeline,
	    .max_items = LANE_MAX_OPS,
	    .max_bytes = LANE_MAX_BYTES,
	    .req_field = wire_field_number(&shoal__request__descriptor, "batch"),
	    .resp_field = wire_field_number(&shoal__response__descriptor, "batch"),
	    .send_ms = (uint32_t)c->opts.connect_timeout_ms,
	};
	int rc = wire_lanes_init(&c->lanes, &lc, errmsg);
	c->lanes_on = true;
	return rc;
}

/* Stops every lane (their ops end: closing) and frees them; the socket is
 * closed. */
static void lanes_close(shoal_client *c)
{
	if (!c->lanes_on)
		return;
	wire_lanes_close(&c->lanes);
	wire_lanes_fini(&c->lanes);
	c->lanes_on = false;
}

/* The client whose shoal_poll is running callbacks on this thread: what
 * they submit waits for the end of the poll (lib_lanes_flush), so that a
 * burst of follow-up requests leaves as one message instead of its first
 * alone on the lane that just came back. */
static __thread shoal_client *corked;

void lib_lanes_cork(shoal_client *c)
{
	corked = c;
	wire_lanes_cork();
}

bool lib_lanes_corked(const shoal_client *c)
{
	return corked == c;
}

void lib_lanes_flush(shoal_client *c)
{
	if (corked != c)
		return;
	corked = NULL;
	wire_lanes_uncork();
}

/* A nested poll's: what the callbacks submitted so far leaves now; the
 * thread stays corked until the outer poll's flush. */
void lib_lanes_send_held(shoal_client *c)
{
	if (corked == c)
		wire_lanes_flush();
}

/* Submitter: an asynchronous op into the lanes; an idle lane sends it (with
 * anything else queued) at once, unless the submitter is a callback of
 * shoal_poll (then lib_lanes_flush does). */
static void lane_submit(op *o)
{
	o->state = OP_PIPELINED;
	o->item.part[0] = nng_msg_body(o->req);
	o->item.len[0] = nng_msg_len(o->req);
	o->item.part[1] = NULL;
	o->item.len[1] = 0;
	o->item.deadline = o->deadline;
	o->item.done = lane_done;
	if (wire_lanes_submit(&o->c->lanes, &o->item) != SHOAL_OK)
		op_finish(o, SHOAL_E_UNAVAILABLE, SHOAL_SRC_LOCAL, "the client is closing");
}

/* Submitter: arms the op (o->req set by op_prepare) and starts it. */
void lib_op_start(op *o)
{
	shoal_client *c = o->c;
	o->reply = NULL;
	o->code = SHOAL_OK;
	o->source = SHOAL_SRC_NONE;
	o->msg[0] = '\0';
	o->done = false;
	o->deadline = now_ms() + c->opts.deadline_ms;
	uint32_t only = 0;
	sh_retry_init(&o->retry, &only, 1, 0, BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
	o->retry.max_attempts = (uint32_t)c->opts.retries + 1;
	/* Each request its own jitter: the client's random nonce and the
	 * request id. */
	uint64_t seed;
	memcpy(&seed, c->nonce, sizeof(seed));
	sh_retry_throttle_init(
	    &o->retry, (uint32_t)c->opts.throttle_retries, (uint32_t)c->opts.throttle_base_ms,
	    (uint32_t)c->opts.throttle_max_ms, seed ^ o->request_id * 0x9e3779b97f4a7c15ull);
	if (o->async && c->lanes_on)
		lane_submit(o);
	else
		op_send(o);
}
