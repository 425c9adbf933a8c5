/*
 * retry.c -- the retry policy (common/retry.h has the edges).
 */
#include <stddef.h>

#include "common/errors.h"
#include "common/retry.h"

static const char *const outcome_names[SH_OUT__COUNT] = {
    [SH_OUT_DONE] = "done",
    [SH_OUT_NOT_LEADER] = "not_leader",
    [SH_OUT_UNAVAILABLE] = "unavailable",
    [SH_OUT_TIMEOUT] = "timeout",
    [SH_OUT_UNREACHABLE] = "unreachable",
    [SH_OUT_BAD_ANSWER] = "bad_answer",
};

const char *sh_outcome_name(sh_outcome o)
{
	return (unsigned)o < SH_OUT__COUNT ? outcome_names[o] : "unknown";
}

static int replica_index(const sh_retry *r, uint32_t node)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->replicas[i] == node)
			return (int)i;
	return -1;
}

void sh_retry_init(sh_retry *r, const uint32_t *replicas, uint32_t n, uint32_t first,
                   uint32_t min_ms, uint32_t max_ms)
{
	if (n > SH_MAX_REPLICATION)
		n = SH_MAX_REPLICATION;
	if (n == 0)
		n = 1; /* a group always has a replica; be safe with a zero */
	for (uint32_t i = 0; i < n; i++)
		r->replicas[i] = replicas != NULL ? replicas[i] : 0;
	r->n = n;
	r->target = replica_index(r, first) >= 0 ? first : r->replicas[0];
	r->attempts = 0;
	r->round = 0;
	r->backoff_ms = min_ms;
	r->max_ms = max_ms > min_ms ? max_ms : min_ms;
	r->max_attempts = 0;
	r->last = SH_OUT_DONE;
	r->throttled = 0;
	r->throttle_max = 0;
	r->throttle_base_ms = 1;
	r->throttle_max_ms = 1;
	r->rng = 1;
}

bool sh_retry_next(sh_retry *r, sh_outcome o, uint32_t hint, int64_t now_ms, int64_t deadline_ms,
                   uint32_t *delay_ms)
{
	r->attempts++;
	r->round++;
	r->last = o;
	if (o == SH_OUT_NOT_LEADER && hint != 0 && hint != r->target &&
	    replica_index(r, hint) >= 0) {
		r->target = hint;
	} else {
		int i = replica_index(r, r->target);
		r->target = r->replicas[(uint32_t)(i + 1) % r->n];
	}
	uint32_t delay = 0;
	if (r->round >= r->n) {
		delay = r->backoff_ms;
		r->backoff_ms = r->backoff_ms * 2 > r->max_ms ? r->max_ms : r->backoff_ms * 2;
		r->round = 0;
	}
	*delay_ms = delay;
	if (r->max_attempts != 0 && r->attempts >= r->max_attempts)
		return false;
	return now_ms + delay < deadline_ms;
}

bool sh_retry_is_throttling(int code)
{
	return code == SHOAL_E_THROUGHPUT || code == SHOAL_E_REQUEST_LIMIT ||
	       code == SHOAL_E_TXN_IN_PROGRESS;
}

void sh_retry_throttle_init(sh_retry *r, uint32_t max_retries, uint32_t base_ms, uint32_t max_ms,
                            uint64_t seed)
{
	r->throttled = 0;
	r->throttle_max = max_retries;
	r->throttle_base_ms = base_ms > 0 ? base_ms : 1;
	r->throttle_max_ms = max_ms > r->throttle_base_ms ? max_ms : r->throttle_base_ms;
	/* splitmix64 of the seed: nearby seeds (request ids) give unrelated
	 * sequences, and the state is never 0 (xorshift's fixed point). */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	r->rng = z != 0 ? z : 1;
}

uint32_t sh_retry_throttle_cap(const sh_retry *r, uint32_t k)
{
	uint64_t cap = r->throttle_base_ms;
	for (uint32_t i = 1; i < k && cap < r->throttle_max_ms; i++)
		cap *= 2;
	return cap < r->throttle_max_ms ? (uint32_t)cap : r->throttle_max_ms;
}

/* xorshift64* (Vigna): uniform enough for jitter, one multiply. */
static uint64_t next_random(sh_retry *r)
{
	uint64_t x = r->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

bool sh_retry_throttled(sh_retry *r, int64_t now_ms, int64_t deadline_ms, uint32_t *delay_ms)
{
	*delay_ms = 0;
	if (r->throttled >= r->throttle_max)
		return false;
	r->throttled++;
	uint32_t cap = sh_retry_throttle_cap(r, r->throttled);
	/* Full jitter: uniform in [0, cap] (the top 32 bits: the best ones). */
	uint32_t delay = (uint32_t)(((next_random(r) >> 32) * ((uint64_t)cap + 1)) >> 32);
	*delay_ms = delay;
	return now_ms + delay < deadline_ms;
}
