/*
 * nngwatch.h -- notices nng's reaper being stuck, and bounds a stop.
 *
 * nng 1.5.2 can lose a send (README, TLS: "nng 1.5.2 can lose a send, and
 * then never finish closing"): the connection's teardown then waits for
 * ever on nng's only reaper thread, and every later teardown of the process
 * queues behind it.  Such a process goes on serving the connections it has,
 * but a connection that closes is never freed, a dialer whose connection
 * dropped never dials again (nng redials once the old pipe is reaped), and
 * any nng_close waits for ever: it loses its peers one by one.  Nothing
 * inside the process can finish the lost send.
 *
 * So shoal-node and shoal-router watch the reaper: every period a probe
 * connects two inproc sockets and closes them, which finishes only once the
 * reaper has reaped their pipe.  A probe that has not finished after
 * `stuck_ms` of the process's running time (seconds the process was stopped
 * -- SIGSTOP, a suspended VM -- do not count) means the reaper is stuck, and
 * the watch calls `stuck`: the programs log it and exit with status
 * SH_EXIT_NNG_STUCK, so that their supervisor (deploy/systemd,
 * Restart=on-failure) starts them again.  Exiting is safe: an acknowledged
 * write is in Raft's log on a majority, and a node's exit is a crash the
 * cluster is built to take.
 *
 * A stop is bounded the same way: sh_watch_deadline calls `late` if the
 * process is still running `ms` after it (a graceful stop whose nng_close
 * waits on a stuck reaper).
 *
 * One watch per process (the reaper is the process's).  In-process users of
 * node/ and router/ (the tests) do not start it.
 */
#ifndef SHOAL_NNGWATCH_H
#define SHOAL_NNGWATCH_H

#include <stdbool.h>
#include <stdint.h>

/* The exit status of a program that found nng's reaper stuck (EX_SOFTWARE). */
#define SH_EXIT_NNG_STUCK 70

typedef struct sh_watch_conf {
	unsigned period_ms; /* between probes (0: 10000) */
	unsigned stuck_ms;  /* a probe this long in running time is stuck (0: 30000) */
	/* Called once, on the watch's thread, when a probe is stuck; `waited_ms`
	 * is how long it has been waiting.  Expected not to return (it exits). */
	void (*stuck)(void *arg, unsigned waited_ms);
	void *arg;
	/* Test seam: the probe (NULL: nng's inproc sockets, sh_watch_probe). */
	int (*probe)(void *probe_arg, char *errmsg);
	void *probe_arg;
} sh_watch_conf;

/* Starts the watch's two threads (the prober and the clock).  SHOAL_OK, or
 * an error code with errmsg (SH_ERRMSG_SIZE). */
int sh_watch_start(const sh_watch_conf *conf, char *errmsg);

/* Stops the watch (idempotent; no-op if not started): the clock thread is
 * joined; a prober still inside a probe is left to finish by itself. */
void sh_watch_stop(void);

/* Probes finished, and the longest one so far in milliseconds. */
void sh_watch_stats(uint64_t *probes, unsigned *longest_ms);

/* One probe of nng's reaper: SHOAL_OK once two inproc sockets connected
 * and closed (waits as long as the reaper does). */
int sh_watch_probe(void *unused, char *errmsg);

/* Calls late(arg) from a thread of its own if the process still runs `ms`
 * milliseconds from now (in running time, as above).  For a stop: late logs
 * and exits.  At most one deadline per process; a second call is ignored. */
void sh_watch_deadline(unsigned ms, void (*late)(void *arg), void *arg);

#endif
