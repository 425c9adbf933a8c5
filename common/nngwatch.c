/*
 * nngwatch.c -- the reaper watch and the stop deadline (nngwatch.h).
 *
 * Two threads.  The clock wakes every TICK_MS and counts the process's
 * running time: each wake adds the time since the last one, but never more
 * than TICK_MAX_MS, so that a process stopped for a minute (SIGSTOP, a
 * suspended VM) or starved of CPU does not see its probe as a minute late.
 * It asks the prober for a probe every period_ms of that time, and adds the
 * same time to the probe in progress; past stuck_ms, stuck() is called.
 * The prober runs the probes, so that a stuck one stops only itself.
 */
#include "common/nngwatch.h"

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "common/clock.h"
#include "common/errors.h"

#define TICK_MS     250
#define TICK_MAX_MS 1000

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	bool started, stopping;
	pthread_t clock, prober;
	sh_watch_conf conf;
	bool want;           /* the clock asks for a probe */
	bool busy;           /* the prober is in one */
	uint64_t busy_ms;    /* running time the probe in progress has taken */
	uint64_t probes;     /* finished */
	unsigned longest_ms; /* the longest finished probe, wall time */
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Running time: the monotonic clock's advance since *last, at most
 * TICK_MAX_MS. */
static uint64_t tick(uint64_t *last)
{
	uint64_t now = (uint64_t)sh_now_ms();
	uint64_t dt = now - *last;
	*last = now;
	return dt > TICK_MAX_MS ? TICK_MAX_MS : dt;
}

int sh_watch_probe(void *unused, char *errmsg)
{
	(void)unused;
	static atomic_uint seq;
	char url[64];
	snprintf(url, sizeof(url), "inproc://shoal-reaper-probe-%u", atomic_fetch_add(&seq, 1));
	nng_socket l, d;
	int rv;
	if ((rv = nng_pair1_open(&l)) != 0) {
		snprintf(errmsg, SH_ERRMSG_SIZE, "reaper probe: socket: %s", nng_strerror(rv));
		return SHOAL_E_INTERNAL;
	}
	if ((rv = nng_pair1_open(&d)) != 0) {
		nng_close(l);
		snprintf(errmsg, SH_ERRMSG_SIZE, "reaper probe: socket: %s", nng_strerror(rv));
		return SHOAL_E_INTERNAL;
	}
	if ((rv = nng_listen(l, url, NULL, 0)) == 0)
		rv = nng_dial(d, url, NULL, 0); /* inproc: connected on return */
	/* Each close waits until the reaper has reaped the socket's pipe (and
	 * dialer or listener). */
	nng_close(d);
	nng_close(l);
	if (rv != 0) {
		snprintf(errmsg, SH_ERRMSG_SIZE, "reaper probe: %s: %s", url, nng_strerror(rv));
		return SHOAL_E_INTERNAL;
	}
	return SHOAL_OK;
}

static void *prober_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&W.mu);
	for (;;) {
		while (!W.want && !W.stopping)
			pthread_cond_wait(&W.cv, &W.mu);
		if (W.stopping)
			break;
		W.want = false;
		W.busy = true;
		W.busy_ms = 0;
		pthread_mutex_unlock(&W.mu);
		uint64_t t0 = (uint64_t)sh_now_ms();
		char errmsg[SH_ERRMSG_SIZE];
		W.conf.probe(W.conf.probe_arg, errmsg); /* an error is a probe finished too */
		uint64_t took = (uint64_t)sh_now_ms() - t0;
		pthread_mutex_lock(&W.mu);
		W.busy = false;
		W.probes++;
		if (took > W.longest_ms)
			W.longest_ms = took > UINT32_MAX ? UINT32_MAX : (unsigned)took;
	}
	pthread_mutex_unlock(&W.mu);
	return NULL;
}

static void *clock_main(void *unused)
{
	(void)unused;
	uint64_t last = (uint64_t)sh_now_ms(), since_probe = 0;
	pthread_mutex_lock(&W.mu);
	while (!W.stopping) {
		struct timespec ts;
		sh_timespec_in(CLOCK_MONOTONIC, TICK_MS, &ts);
		pthread_cond_timedwait(&W.cv, &W.mu, &ts);
		if (W.stopping)
			break;
		uint64_t dt = tick(&last);
		if (W.busy) {
			W.busy_ms += dt;
			if (W.busy_ms >= W.conf.stuck_ms) {
				unsigned waited = (unsigned)W.busy_ms;
				pthread_mutex_unlock(&W.mu);
				W.conf.stuck(W.conf.arg, waited); /* does not return, as a rule */
				return NULL;
			}
			continue;
		}
		since_probe += dt;
		if (since_probe >= W.conf.period_ms && !W.want) {
			since_probe = 0;
			W.want = true;
			pthread_cond_broadcast(&W.cv);
		}
	}
	pthread_mutex_unlock(&W.mu);
	return NULL;
}

int sh_watch_start(const sh_watch_conf *conf, char *errmsg)
{
	pthread_mutex_lock(&W.mu);
	if (W.started) {
		pthread_mutex_unlock(&W.mu);
		snprintf(errmsg, SH_ERRMSG_SIZE, "the reaper watch is already running");
		return SHOAL_E_INTERNAL;
	}
	if (conf->stuck == NULL) {
		pthread_mutex_unlock(&W.mu);
		snprintf(errmsg, SH_ERRMSG_SIZE, "the reaper watch needs a stuck callback");
		return SHOAL_E_INTERNAL;
	}
	W.conf = *conf;
	if (W.conf.period_ms == 0)
		W.conf.period_ms = 10000;
	if (W.conf.stuck_ms == 0)
		W.conf.stuck_ms = 30000;
	if (W.conf.probe == NULL)
		W.conf.probe = sh_watch_probe;
	int rv = sh_cond_init_monotonic(&W.cv);
	if (rv != 0) {
		pthread_mutex_unlock(&W.mu);
		snprintf(errmsg, SH_ERRMSG_SIZE, "the reaper watch: a condition variable: error %d",
		         rv);
		return SHOAL_E_INTERNAL;
	}
	W.stopping = W.want = W.busy = false;
	W.probes = 0;
	W.longest_ms = 0;
	rv = pthread_create(&W.prober, NULL, prober_main, NULL);
	if (rv == 0 && (rv = pthread_create(&W.clock, NULL, clock_main, NULL)) != 0) {
		W.stopping = true;
		pthread_cond_broadcast(&W.cv);
		pthread_mutex_unlock(&W.mu);
		pthread_join(W.prober, NULL);
		pthread_mutex_lock(&W.mu);
	}
	if (rv != 0) {
		pthread_cond_destroy(&W.cv);
		pthread_mutex_unlock(&W.mu);
		snprintf(errmsg, SH_ERRMSG_SIZE, "the reaper watch: a thread: error %d", rv);
		return SHOAL_E_INTERNAL;
	}
	W.started = true;
	pthread_mutex_unlock(&W.mu);
	return SHOAL_OK;
}

void sh_watch_stop(void)
{
	pthread_mutex_lock(&W.mu);
	if (!W.started) {
		pthread_mutex_unlock(&W.mu);
		return;
	}
	W.stopping = true;
	pthread_cond_broadcast(&W.cv);
	bool busy = W.busy;
	pthread_mutex_unlock(&W.mu);
	pthread_join(W.clock, NULL);
	if (busy)
		pthread_detach(W.prober); /* inside a probe that may never end */
	else
		pthread_join(W.prober, NULL);
	pthread_mutex_lock(&W.mu);
	W.started = false;
	if (!busy)
		pthread_cond_destroy(&W.cv);
	pthread_mutex_unlock(&W.mu);
}

void sh_watch_stats(uint64_t *probes, unsigned *longest_ms)
{
	pthread_mutex_lock(&W.mu);
	*probes = W.probes;
	*longest_ms = W.longest_ms;
	pthread_mutex_unlock(&W.mu);
}

static struct {
	atomic_bool armed;
	unsigned ms;
	void (*late)(void *);
	void *arg;
} D;

static void *deadline_main(void *unused)
{
	(void)unused;
	uint64_t last = (uint64_t)sh_now_ms(), ran = 0;
	while (ran < D.ms) {
		struct timespec ts = {0, TICK_MS * 1000000L};
		nanosleep(&ts, NULL);
		ran += tick(&last);
	}
	D.late(D.arg);
	return NULL;
}

void sh_watch_deadline(unsigned ms, void (*late)(void *arg), void *arg)
{
	if (atomic_exchange(&D.armed, true))
		return;
	D.ms = ms;
	D.late = late;
	D.arg = arg;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, deadline_main, NULL) != 0)
		atomic_store(&D.armed, false); /* no deadline: the stop is as before */
	pthread_attr_destroy(&a);
}
