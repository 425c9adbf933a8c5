/*
 * tl_load.h -- an open-loop load generator over libshoal's asynchronous API
 * (shoal_submit_json + shoal_poll on one thread), for load tests such as
 * the hot-partition tests (tests/integration/it_hot.c).
 *
 * A run offers one or more classes of requests, each at a fixed rate
 * (open loop: request k of a class is due at start + k / rate, whether or
 * not earlier ones were answered -- a slow or throttling server does not
 * slow the offered load down, as real users do not).  The caller's build
 * function writes each request (operation name and DynamoDB JSON body) and
 * says which stat it counts in, so one class can be split by key (e.g. the
 * background keys of each partition).  Answers are counted per stat as ok,
 * throttled (ProvisionedThroughputExceededException, SHOAL_E_THROUGHPUT) or
 * other errors, in totals and per second since the load's origin, with the
 * latency of ok and of throttled answers (microseconds from the time the
 * request was due, not sent: a client that falls behind shows as latency
 * rather than hiding it).  Latency histograms: tl_hist.h.
 *
 * The client is the caller's (its options decide retries: a raw measurement
 * turns them off).  In flight at most max_inflight requests: one due while
 * that many are unanswered is not sent and counted as `refused` (the server
 * is not keeping up; a test should see none).  After the run's time the
 * answers are awaited for TL_LOAD_DRAIN_MS; those missing count as `lost`.
 *
 * Threads: a tl_load is used by one thread (the one polling its client).
 */
#ifndef SHOAL_TL_LOAD_H
#define SHOAL_TL_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/shoal.h"
#include "tests/lib/tl_hist.h"

#define TL_LOAD_MAX_SECS 1200 /* per-second counts kept since the origin */
#define TL_LOAD_DRAIN_MS 10000
#define TL_LOAD_JSON_MAX 4096

typedef struct tl_load_stat {
	char name[48];
	uint64_t sent, ok, throttled, other, refused, lost;
	tl_hist ok_lat, thr_lat; /* us from due to answer */
	/* per second since the origin, by the second a request was answered
	 * (sent: by the second it was sent) */
	uint32_t sec_sent[TL_LOAD_MAX_SECS], sec_ok[TL_LOAD_MAX_SECS];
	uint32_t sec_thr[TL_LOAD_MAX_SECS], sec_other[TL_LOAD_MAX_SECS];
	uint32_t sec_max_us[TL_LOAD_MAX_SECS]; /* slowest ok answer (stalls show here) */
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 16]; /* "Exception: message" */
} tl_load_stat;

/* Writes request number n of a class: *op the operation ("PutItem"),
 * json[cap] its body.  Returns the index of the stat it counts in, or < 0
 * to skip this request. */
typedef int (*tl_load_build_fn)(void *arg, uint64_t n, const char **op, char *json, size_t cap);

typedef struct tl_load_class {
	double rate; /* requests per second, > 0 */
	tl_load_build_fn build;
	void *arg;
} tl_load_class;

typedef struct tl_load tl_load;

/* A load on client c (borrowed; must outlive the tl_load), counting seconds
 * from origin_us (tl_load_now_us's clock), into stats[0 .. nstats-1]
 * (borrowed; the caller zeroes and names them).  NULL when out of memory. */
tl_load *tl_load_new(shoal_client *c, uint64_t origin_us, unsigned max_inflight);
/* Frees the load.  Answers still due would run into freed memory: free the
 * client first (it abandons their callbacks), or poll no more. */
void tl_load_free(tl_load *l);

/* Runs the classes for secs seconds, then drains.  Returns the number of
 * requests still unanswered after the drain (counted as lost). */
unsigned tl_load_run(tl_load *l, const tl_load_class *classes, unsigned n_classes, double secs,
                     tl_load_stat *stats, unsigned nstats);

/* Calls fn(arg, stat, code, latency_us, now_us) for every answer counted
 * from now on (after the counts are updated; on the polling thread), for
 * figures the stats do not keep (latency by time window, say).  NULL: none. */
typedef void (*tl_load_answer_fn)(void *arg, int stat, int code, uint64_t lat_us, uint64_t now_us);
void tl_load_on_answer(tl_load *l, tl_load_answer_fn fn, void *arg);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t tl_load_now_us(void);

#endif
