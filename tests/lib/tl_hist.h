/*
 * tl_hist.h -- a latency histogram for load generators (shoal_bench, the
 * hot-partition tests): microseconds in log-linear buckets, < 1.6 % error.
 *
 * Values < 128 have a bucket each; above, each power of two [2^m, 2^(m+1))
 * is split into 64 buckets.  Percentiles report the bucket's upper bound (as
 * HdrHistogram's "highest equivalent value"), never above the largest value
 * recorded.  A tl_hist is plain data: zero it (memset or = {0}) to start.
 * Not thread-safe: one writer at a time.
 */
#ifndef SHOAL_TL_HIST_H
#define SHOAL_TL_HIST_H

#include <stdint.h>

#define TL_HIST_SUB     64
#define TL_HIST_BUCKETS (TL_HIST_SUB * 40)

typedef struct tl_hist {
	uint64_t n[TL_HIST_BUCKETS];
	uint64_t count, max, sum;
} tl_hist;

void tl_hist_record(tl_hist *h, uint64_t v);
/* The p-th percentile (0 < p <= 100); 0 when empty. */
uint64_t tl_hist_pct(const tl_hist *h, double p);
/* Adds every value of `from` into `into`. */
void tl_hist_merge(tl_hist *into, const tl_hist *from);

#endif
