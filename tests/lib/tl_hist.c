#include "tl_hist.h"

#include <math.h>

/* bucket = 64 * (m - 6) + (v >> (m - 6)) for v in [2^m, 2^(m+1)), m >= 7. */
static unsigned bucket(uint64_t v)
{
	if (v < 2 * TL_HIST_SUB)
		return (unsigned)v;
	unsigned m = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = m - 6;
	unsigned b = TL_HIST_SUB * shift + (unsigned)(v >> shift);
	return b < TL_HIST_BUCKETS ? b : TL_HIST_BUCKETS - 1;
}

/* The largest value that falls in bucket b. */
static uint64_t upper(unsigned b)
{
	if (b < 2 * TL_HIST_SUB)
		return b;
	unsigned shift = b / TL_HIST_SUB - 1;
	uint64_t top = b - (uint64_t)TL_HIST_SUB * shift;
	return ((top + 1) << shift) - 1;
}

void tl_hist_record(tl_hist *h, uint64_t v)
{
	h->n[bucket(v)]++;
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

uint64_t tl_hist_pct(const tl_hist *h, double p)
{
	if (h->count == 0)
		return 0;
	uint64_t want = (uint64_t)ceil(p / 100.0 * (double)h->count);
	if (want < 1)
		want = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < TL_HIST_BUCKETS; b++) {
		seen += h->n[b];
		if (seen >= want) {
			uint64_t u = upper(b);
			return u < h->max ? u : h->max;
		}
	}
	return h->max;
}

void tl_hist_merge(tl_hist *into, const tl_hist *from)
{
	for (unsigned b = 0; b < TL_HIST_BUCKETS; b++)
		into->n[b] += from->n[b];
	into->count += from->count;
	into->sum += from->sum;
	if (from->max > into->max)
		into->max = from->max;
}
