/*
 * retry.c -- the retry policy (common/retry.h has the edges).
 */
#include <stddef.h>

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
