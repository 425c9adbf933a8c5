/*
 * clock.h -- the monotonic clock every part uses for deadlines, timeouts and
 * latencies (CLOCK_MONOTONIC: never jumps with the wall clock).
 */
#ifndef SHOAL_COMMON_CLOCK_H
#define SHOAL_COMMON_CLOCK_H

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

#endif
