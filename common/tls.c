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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/req.h>

#include "alloc.h"
#include "clock.h"
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

/* nng_dial with cfg for a tls+ URL; *out the dialer (when not NULL). */
static int dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags, nng_dialer *out)
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
	else if (out != NULL)
		*out = d;
	return rv;
}

/* ------------------------------------------------------------------------ */
/* Dial keeper (tls.h)                                                       */
/* ------------------------------------------------------------------------ */

typedef struct kept {
	struct kept *next;
	nng_socket sock;
	nng_dialer d;
	nng_tls_config *cfg; /* held */
	char url[256];
	uint64_t activity; /* the sum of its counts at the last look */
	int quiet;         /* looks in a row without a connection or activity */
	int64_t logged_ms; /* when its last replacement was logged (0: never) */
	uint32_t unlogged; /* replacements since, not logged */
} kept;

/* A dialer's replacements are logged at most once per KEEPER_LOG_MS (a
 * partition that lasts an hour would otherwise log one every 4 s); the next
 * line says how many there were meanwhile. */
#define KEEPER_LOG_MS 60000

/* Sockets whose connections sh_dial_renew was asked to renew, taken by the
 * keeper thread (which it wakes).  Its own lock, never held while calling
 * nng: sh_dial_renew is called from nng's callbacks, and the keeper holds
 * keeper_mu while it closes dialers (whose pipes' ends run callbacks). */
#define RENEW_MAX 64
static pthread_mutex_t renew_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t renew_cv;       /* (renew_mu) once renew_ready */
static bool renew_ready;              /* (renew_mu) renew_cv made */
static uint32_t renew_ids[RENEW_MAX]; /* (renew_mu) socket ids */
static uint32_t n_renew;              /* (renew_mu) */

static pthread_mutex_t keeper_mu = PTHREAD_MUTEX_INITIALIZER;
static kept *keeper_list;   /* (keeper_mu) */
static bool keeper_running; /* (keeper_mu) */
static bool keeper_off;     /* (keeper_mu) nng keeps no statistics */
static atomic_uint_fast64_t keeper_redials;
static void (*_Atomic keeper_log)(const char *msg);

void sh_dial_keeper_log(void (*log)(const char *msg))
{
	atomic_store(&keeper_log, log);
}

uint64_t sh_dial_keeper_redials(void)
{
	return atomic_load_explicit(&keeper_redials, memory_order_relaxed);
}

static uint64_t stat_of(nng_stat *parent, const char *name)
{
	nng_stat *st = nng_stat_find(parent, name);
	return st != NULL ? nng_stat_value(st) : 0;
}

/* An NNG_STAT_ID's value: nng 1.5.2 keeps it as an int in a union with the
 * 64-bit value nng_stat_value reads (zeroed first), so the id is the low or
 * the high half depending on the byte order. */
static uint32_t stat_id(nng_stat *st)
{
	uint64_t v = nng_stat_value(st);
	return v > UINT32_MAX ? (uint32_t)(v >> 32) : (uint32_t)v;
}

/*
 * The scope `name` ("dialer", "listener") whose "id" is id, in the tree
 * under st.  Not nng_stat_find_dialer / _listener: in nng 1.5.2 they return
 * the first scope of that name whatever its id (nng_stat_find_scope looks
 * below the top with nng_stat_find, which matches names only), so every
 * dialer of a process was read as its first one.
 */
static nng_stat *find_scope(nng_stat *st, const char *name, uint32_t id)
{
	for (; st != NULL; st = nng_stat_next(st)) {
		if (nng_stat_type(st) == NNG_STAT_SCOPE && strcmp(nng_stat_name(st), name) == 0) {
			nng_stat *ids = nng_stat_find(st, "id");
			if (ids != NULL && stat_id(ids) == id)
				return st;
			continue;
		}
		nng_stat *found = find_scope(nng_stat_child(st), name, id);
		if (found != NULL)
			return found;
	}
	return NULL;
}

static nng_stat *find_dialer(nng_stat *all, nng_dialer d)
{
	return find_scope(all, "dialer", (uint32_t)nng_dialer_id(d));
}

/* Every "dialer" scope of a snapshot, sorted by id: built once per look,
 * so that each kept dialer is a binary search, not a walk of the whole
 * tree (quadratic in a process with thousands of dialers: a program with
 * a thousand libshoal clients).  Out of memory: find_dialer's walk. */
typedef struct dialer_ref {
	uint32_t id;
	nng_stat *st;
} dialer_ref;

typedef struct dialer_index {
	nng_stat *all;
	dialer_ref *v;
	uint32_t n, cap;
	bool failed;
} dialer_index;

static void index_walk(nng_stat *st, dialer_index *ix)
{
	for (; st != NULL && !ix->failed; st = nng_stat_next(st)) {
		if (nng_stat_type(st) == NNG_STAT_SCOPE &&
		    strcmp(nng_stat_name(st), "dialer") == 0) {
			nng_stat *ids = nng_stat_find(st, "id");
			if (ids == NULL)
				continue;
			if (ix->n == ix->cap) {
				uint32_t cap = ix->cap * 2 + 64;
				dialer_ref *v = sh_realloc(ix->v, cap * sizeof(*v));
				if (v == NULL) {
					ix->failed = true;
					return;
				}
				ix->v = v;
				ix->cap = cap;
			}
			ix->v[ix->n++] = (dialer_ref){stat_id(ids), st};
			continue;
		}
		index_walk(nng_stat_child(st), ix);
	}
}

static int by_ref_id(const void *a, const void *b)
{
	uint32_t x = ((const dialer_ref *)a)->id, y = ((const dialer_ref *)b)->id;
	return (x > y) - (x < y);
}

static void index_build(dialer_index *ix, nng_stat *all)
{
	*ix = (dialer_index){.all = all};
	index_walk(all, ix);
	if (!ix->failed && ix->n > 1)
		qsort(ix->v, ix->n, sizeof(*ix->v), by_ref_id);
}

static nng_stat *index_find(const dialer_index *ix, nng_dialer d)
{
	if (ix->failed)
		return find_dialer(ix->all, d);
	dialer_ref key = {(uint32_t)nng_dialer_id(d), NULL};
	const dialer_ref *r =
	    ix->n > 0 ? bsearch(&key, ix->v, ix->n, sizeof(key), by_ref_id) : NULL;
	return r != NULL ? r->st : NULL;
}

static void index_free(dialer_index *ix)
{
	sh_free(ix->v);
	ix->v = NULL;
}

static void drop_kept(kept *k)
{
	if (k->cfg != NULL)
		nng_tls_config_free(k->cfg);
	sh_free(k);
}

/* Closes k's dialer and dials again on the same socket, URL and
 * configuration (keeper_mu held); tells the log why (unless the socket is
 * closing). */
static void replace(kept *k, const char *why)
{
	nng_dialer nd;
	nng_dialer_close(k->d);
	int rv = dial(k->sock, k->url, k->cfg, NNG_FLAG_NONBLOCK, &nd);
	if (rv == 0) {
		k->d = nd;
		atomic_fetch_add_explicit(&keeper_redials, 1, memory_order_relaxed);
	}
	void (*log)(const char *) = atomic_load(&keeper_log);
	int64_t now = sh_now_ms();
	if (log != NULL && rv != NNG_ECLOSED) {
		if (k->logged_ms != 0 && now - k->logged_ms < KEEPER_LOG_MS) {
			k->unlogged++;
		} else {
			char msg[700], more[64] = "";
			if (k->unlogged > 0)
				snprintf(more, sizeof(more),
				         " (replaced %u times since its last line)",
				         k->unlogged + 1);
			snprintf(msg, sizeof(msg), "dialer of %s %s: %s%s", k->url, why,
			         rv == 0 ? "dialling again" : nng_strerror(rv), more);
			log(msg);
			k->logged_ms = now;
			k->unlogged = 0;
		}
	}
	/* (A failed dial: the socket is closing; the next look finds no
	 * dialer and lets it go.)  A new dialer's statistics start at 0. */
	k->quiet = 0;
	k->activity = 0;
}

/* The renewals asked for sockets ids[0..n) (keeper_mu held): each of their
 * kept dialers that has a connection is replaced -- that connection is the
 * stalled one.  One without a connection is dialling already (or is the
 * quiet rule's).  true to go on. */
static bool keeper_renew(const uint32_t *ids, uint32_t n)
{
	nng_stat *all;
	int rv = nng_stats_get(&all);
	if (rv != 0)
		return rv != NNG_ENOTSUP; /* (out of memory: asked again later) */
	dialer_index ix;
	index_build(&ix, all);
	for (kept *k = keeper_list; k != NULL; k = k->next) {
		bool asked = false;
		for (uint32_t i = 0; i < n && !asked; i++)
			asked = ids[i] == (uint32_t)k->sock.id;
		nng_stat *ds = asked ? index_find(&ix, k->d) : NULL;
		if (ds != NULL && stat_of(ds, "pipes") > 0)
			replace(k, "has a connection that stopped carrying messages (its sends "
			           "found no room and got no answer: a peer gone without closing "
			           "it, or a cut network); closed it");
	}
	index_free(&ix);
	nng_stats_free(all);
	return true;
}

/* One look at every kept dialer (keeper_mu held).  true to go on looking. */
static bool keeper_look(void)
{
	nng_stat *all;
	int rv = nng_stats_get(&all);
	if (rv != 0) /* an nng without statistics: nothing to look at, ever; out
	              * of memory: the next look (not the keeper's end) */
		return rv != NNG_ENOTSUP;
	dialer_index ix;
	index_build(&ix, all);
	for (kept **pp = &keeper_list; *pp != NULL;) {
		kept *k = *pp;
		nng_stat *ds = index_find(&ix, k->d);
		if (ds == NULL) { /* closed by its owner, or with its socket */
			*pp = k->next;
			drop_kept(k);
			continue;
		}
		uint64_t pipes = stat_of(ds, "pipes");
		static const char *const acts[] = {"connect", "refused", "disconnect", "canceled",
		                                   "other",   "timeout", "proto",      "auth",
		                                   "oom",     "reject"};
		uint64_t activity = 0;
		for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
			activity += stat_of(ds, acts[i]);
		if (pipes != 0 || activity != k->activity) {
			k->quiet = 0;
		} else if (++k->quiet >= SH_DIAL_KEEP_LOOKS) {
			/* No connection, and nothing at all for that long: nng
			 * stopped the dialer, its negotiation hangs, or its TCP
			 * connect does (a SYN dropped by a cut network is sent
			 * again only after seconds, doubling). */
			char why[160];
			snprintf(why, sizeof(why),
			         "had no connection and did nothing for %d ms (a connect that "
			         "hangs, or nng 1.5.2's TLS negotiation, nanomsg/nng#1518)",
			         SH_DIAL_KEEP_LOOKS * SH_DIAL_KEEP_MS);
			replace(k, why); /* (its activity starts again at 0) */
			pp = &k->next;
			continue;
		}
		k->activity = activity;
		pp = &k->next;
	}
	index_free(&ix);
	nng_stats_free(all);
	return true;
}

/* Looks every SH_DIAL_KEEP_MS; renews as soon as asked. */
static void *keeper_main(void *arg)
{
	(void)arg;
	int64_t next_look = sh_now_ms() + SH_DIAL_KEEP_MS;
	for (;;) {
		uint32_t ids[RENEW_MAX], n;
		pthread_mutex_lock(&renew_mu);
		for (int64_t left; n_renew == 0 && (left = next_look - sh_now_ms()) > 0;) {
			struct timespec ts;
			sh_timespec_in(CLOCK_MONOTONIC, left, &ts);
			pthread_cond_timedwait(&renew_cv, &renew_mu, &ts);
		}
		n = n_renew;
		memcpy(ids, renew_ids, n * sizeof(ids[0]));
		n_renew = 0;
		pthread_mutex_unlock(&renew_mu);
		bool look = sh_now_ms() >= next_look;
		pthread_mutex_lock(&keeper_mu);
		bool go_on = (n == 0 || keeper_renew(ids, n)) && (!look || keeper_look());
		if (!go_on) { /* for good: dialers are left as nng made them */
			keeper_off = true;
			while (keeper_list != NULL) {
				kept *k = keeper_list;
				keeper_list = k->next;
				drop_kept(k);
			}
		}
		pthread_mutex_unlock(&keeper_mu);
		if (!go_on)
			return NULL;
		if (look)
			next_look = sh_now_ms() + SH_DIAL_KEEP_MS;
	}
}

/* Registers d (a started non-blocking dialer of sock; cfg NULL for a plain
 * URL).  NNG_ENOMEM when out of memory; without a thread (or nng's
 * statistics) the dialer is left as nng made it. */
static int keep(nng_socket sock, nng_dialer d, const char *url, nng_tls_config *cfg)
{
	kept *k = sh_calloc(1, sizeof(*k));
	if (k == NULL)
		return NNG_ENOMEM;
	if (snprintf(k->url, sizeof(k->url), "%s", url) >= (int)sizeof(k->url)) {
		sh_free(k);
		return 0; /* (no URL of ours is that long) */
	}
	k->sock = sock;
	k->d = d;
	k->cfg = sh_tls_is_tls(url) ? cfg : NULL;
	if (k->cfg != NULL)
		nng_tls_config_hold(k->cfg);
	pthread_mutex_lock(&keeper_mu);
	if (!keeper_running && !keeper_off) {
		pthread_mutex_lock(&renew_mu);
		if (!renew_ready)
			renew_ready = sh_cond_init_monotonic(&renew_cv) == 0;
		pthread_mutex_unlock(&renew_mu);
		pthread_t th;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		keeper_running = renew_ready && pthread_create(&th, &a, keeper_main, NULL) == 0;
		pthread_attr_destroy(&a);
	}
	if (keeper_running && !keeper_off) {
		k->next = keeper_list;
		keeper_list = k;
		k = NULL;
	}
	pthread_mutex_unlock(&keeper_mu);
	if (k != NULL)
		drop_kept(k);
	return 0;
}

int sh_tls_dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags)
{
	nng_dialer d;
	int rv = dial(sock, url, cfg, flags, &d);
	if (rv == 0 && (flags & NNG_FLAG_NONBLOCK) != 0 && (rv = keep(sock, d, url, cfg)) != 0)
		nng_dialer_close(d);
	return rv;
}

void sh_dial_renew(nng_socket sock)
{
	pthread_mutex_lock(&renew_mu);
	if (renew_ready) {
		bool asked = false;
		for (uint32_t i = 0; i < n_renew && !asked; i++)
			asked = renew_ids[i] == (uint32_t)sock.id;
		if (!asked && n_renew < RENEW_MAX) /* (full: the owner asks again) */
			renew_ids[n_renew++] = (uint32_t)sock.id;
		pthread_cond_signal(&renew_cv);
	}
	pthread_mutex_unlock(&renew_mu);
}

uint32_t sh_tls_dials_refused(nng_socket sock)
{
	uint32_t n = 0;
	nng_stat *all;
	pthread_mutex_lock(&keeper_mu);
	if (keeper_list != NULL && nng_stats_get(&all) == 0) {
		for (kept *k = keeper_list; k != NULL; k = k->next) {
			nng_stat *ds = k->sock.id == sock.id ? find_dialer(all, k->d) : NULL;
			n += ds != NULL && stat_of(ds, "pipes") == 0 && stat_of(ds, "refused") > 0;
		}
		nng_stats_free(all);
	}
	pthread_mutex_unlock(&keeper_mu);
	return n;
}

/* ------------------------------------------------------------------------ */
/* Listen guard (tls.h)                                                      */
/* ------------------------------------------------------------------------ */

struct sh_listen_guard {
	nng_socket sock;
	char url[256];   /* what it listens on */
	char probe[256]; /* where its probe dials (a wildcard host made 127.0.0.1) */
	nng_tls_config *server, *probe_cfg;
	void (*log)(const char *msg);
	nng_listener l;       /* (the guard thread's once started) */
	bool guarded;         /* a thread runs */
	atomic_uint accepted; /* connections the socket took */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop; /* (mu) */
};

static void guard_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)p;
	(void)ev;
	sh_listen_guard *g = arg;
	atomic_fetch_add(&g->accepted, 1);
}

/* Waits ms or until stopped: true when stopped. */
static bool guard_sleep(sh_listen_guard *g, int64_t ms)
{
	struct timespec ts;
	sh_timespec_in(CLOCK_MONOTONIC, ms, &ts);
	pthread_mutex_lock(&g->mu);
	while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &ts) == 0)
		;
	bool stop = g->stop;
	pthread_mutex_unlock(&g->mu);
	return stop;
}

/* One probe: true unless our end of a new connection is up and the
 * listener took no connection within SH_LISTEN_GUARD_ACCEPT_MS.  (A dial
 * that fails says nothing about accepting: an overloaded or stopping
 * server.) */
static bool guard_probe(sh_listen_guard *g)
{
	nng_socket s;
	if (nng_req0_open(&s) != 0)
		return true;
	unsigned before = atomic_load(&g->accepted);
	bool ok = true;
	if (sh_tls_dial(s, g->probe, g->probe_cfg, 0) == 0) {
		ok = false;
		for (int waited = 0; waited < SH_LISTEN_GUARD_ACCEPT_MS && !ok; waited += 10) {
			if (atomic_load(&g->accepted) != before)
				ok = true;
			else if (guard_sleep(g, 10))
				ok = true; /* stopping: no verdict */
		}
	}
	nng_close(s);
	return ok;
}

static atomic_uint_fast64_t relistens;

uint64_t sh_listen_guard_relistens(void)
{
	return atomic_load_explicit(&relistens, memory_order_relaxed);
}

/* The listener's "other" error count (nng's statistics; nng 1.5.2 counts
 * there the NNG_ECLOSED that stops it), or -1 when nng keeps none. */
static int64_t listener_other(nng_listener l)
{
	nng_stat *all;
	if (nng_stats_get(&all) != 0)
		return -1;
	nng_stat *ls = find_scope(all, "listener", (uint32_t)nng_listener_id(l));
	nng_stat *o = ls != NULL ? nng_stat_find(ls, "other") : NULL;
	int64_t v = o != NULL ? (int64_t)nng_stat_value(o) : -1;
	nng_stats_free(all);
	return v;
}

/* After a probe that was accepted: the listener's "other" count once the
 * probe's own closed connection is counted there (nng counts a
 * connection's end as an error of its listener), so that it does not
 * call for the next probe; at most a second's wait, looking every 100 ms
 * (each look is a snapshot of all of nng's statistics). */
static int64_t guard_settled(sh_listen_guard *g, int64_t before)
{
	int64_t now = listener_other(g->l);
	for (int waited = 0; now >= 0 && now <= before && waited < 1000; waited += 100) {
		if (guard_sleep(g, 100))
			break;
		now = listener_other(g->l);
	}
	return now;
}

static void *guard_main(void *arg)
{
	sh_listen_guard *g = arg;
	int strikes = 0;
	int64_t seen = listener_other(g->l), since = 0;
	/* A look at nng's statistics costs ~50 us, and ~1 ms per 200
	 * connections in the process: every SH_LISTEN_GUARD_MS. */
	while (!guard_sleep(g, strikes > 0 ? SH_LISTEN_GUARD_RETRY_MS : SH_LISTEN_GUARD_MS)) {
		/* A probe after a failed one; when the listener counted an error
		 * (or nng keeps no statistics); every SH_LISTEN_GUARD_IDLE_MS
		 * anyway. */
		int64_t other = listener_other(g->l);
		since += SH_LISTEN_GUARD_MS;
		if (strikes == 0 && since < SH_LISTEN_GUARD_IDLE_MS && other >= 0 && other == seen)
			continue;
		since = 0;
		if (guard_probe(g)) {
			strikes = 0;
			seen = guard_settled(g, other);
			continue;
		}
		if (++strikes < 2)
			continue;
		strikes = 0;
		nng_listener_close(g->l);
		int rv = sh_tls_listen(g->sock, g->url, g->server, &g->l);
		atomic_fetch_add_explicit(&relistens, 1, memory_order_relaxed);
		char msg[512];
		snprintf(msg, sizeof(msg),
		         "listener %s took no connection for two probes while they connected (nng "
		         "1.5.2: a peer that closed during its SP negotiation over TLS stops a "
		         "listener, nanomsg/nng#1518): %s",
		         g->url, rv == 0 ? "listening again" : nng_strerror(rv));
		if (g->log != NULL)
			g->log(msg);
		while (rv != 0 && !guard_sleep(g, SH_LISTEN_GUARD_MS))
			rv = sh_tls_listen(g->sock, g->url, g->server, &g->l);
		seen = listener_other(g->l);
	}
	return NULL;
}

int sh_listen_guard_start(sh_listen_guard **out, nng_socket sock, const char *url,
                          nng_tls_config *server, nng_tls_config *probe,
                          void (*log)(const char *msg), char *errmsg)
{
	sh_listen_guard *g = sh_calloc(1, sizeof(*g));
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "listen %s: out of memory", url);
	g->sock = sock;
	g->server = server;
	g->probe_cfg = probe;
	g->log = log;
	atomic_init(&g->accepted, 0);
	if (snprintf(g->url, sizeof(g->url), "%s", url) >= (int)sizeof(g->url)) {
		sh_free(g);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "listen: URL too long: %s", url);
	}
	/* The probe dials a host: a wildcard listener is dialled on loopback. */
	const char *host = strstr(url, "://");
	host = host != NULL ? host + 3 : url;
	const char *port = strrchr(host, ':');
	bool wild = port == NULL || port == host || strncmp(host, "0.0.0.0:", 8) == 0 ||
	            strncmp(host, "*:", 2) == 0;
	bool wild6 = strncmp(host, "[::]:", 5) == 0;
	if (wild6)
		snprintf(g->probe, sizeof(g->probe), "%.*s[::1]%s", (int)(host - url), url, port);
	else if (wild && port != NULL)
		snprintf(g->probe, sizeof(g->probe), "%.*s127.0.0.1%s", (int)(host - url), url,
		         port);
	else
		snprintf(g->probe, sizeof(g->probe), "%s", url);
	int rv = sh_tls_listen(sock, url, server, &g->l);
	if (rv != 0) {
		sh_free(g);
		return sh_errf(errmsg, SHOAL_E_IO, "listen %s: %s", url, nng_strerror(rv));
	}
	if (sh_tls_is_tls(url) && probe != NULL) {
		sh_cond_init_monotonic(&g->cv);
		pthread_mutex_init(&g->mu, NULL);
		if ((rv = nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, guard_pipe_cb, g)) != 0 ||
		    pthread_create(&g->th, NULL, guard_main, g) != 0) {
			nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
			pthread_cond_destroy(&g->cv);
			pthread_mutex_destroy(&g->mu);
			nng_listener_close(g->l);
			sh_free(g);
			return sh_errf(errmsg, SHOAL_E_INTERNAL, "listen %s: no guard thread", url);
		}
		g->guarded = true;
	}
	*out = g;
	return SHOAL_OK;
}

void sh_listen_guard_close(sh_listen_guard *g)
{
	if (g == NULL)
		return;
	if (g->guarded) {
		pthread_mutex_lock(&g->mu);
		g->stop = true;
		pthread_cond_signal(&g->cv);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->th, NULL);
		nng_pipe_notify(g->sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
		pthread_cond_destroy(&g->cv);
		pthread_mutex_destroy(&g->mu);
	}
	nng_listener_close(g->l);
	sh_free(g);
}
