/*
 * clock.h -- the monotonic clock every part uses for deadlines, timeouts and
 * latencies (CLOCK_MONOTONIC: never jumps with the wall clock).
 */
#ifndef SHOAL_COMMON_CLOCK_H
#define SHOAL_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t sh_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t sh_now_us(void)
{
	return sh_now_ns() / 1000;
}

static inline int64_t sh_now_ms(void)
{
	return sh_now_ns() / 1000000;
}

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines
 * (sh_timespec_in(CLOCK_MONOTONIC, ...)): a wall-clock step does not
 * stretch or cut them.  0, or pthread_cond_init's error. */
static inline int sh_cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int rv = pthread_condattr_init(&ca);
	if (rv != 0)
		return rv;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rv = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return rv;
}

/* *ts = the time of `clock` ms milliseconds from now: a deadline for
 * pthread_cond_timedwait (whose condition variable waits on that clock:
 * CLOCK_REALTIME unless its attributes said otherwise). */
static inline void sh_timespec_in(clockid_t clock, int64_t ms, struct timespec *ts)
{
	clock_gettime(clock, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

#endif
