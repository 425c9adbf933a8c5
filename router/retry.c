/*
 * retry.c -- the retry policy of one call to one storage group (pure: no
 * clock, no I/O; the transport feeds it outcomes and the time).
 *
 * States of a call (transport.c drives them; this file decides the edges):
 *
 *   attempt --DONE--------------------------------------> answered
 *   attempt --NOT_LEADER(hint in group, != target)-----> attempt at hint
 *   attempt --NOT_LEADER(0)/UNAVAILABLE/TIMEOUT/
 *             UNREACHABLE/BAD_ANSWER-------------------> attempt at next replica
 *   (any failure) --round of n attempts without answer-> wait backoff, then attempt
 *   (any failure) --now + wait >= deadline-------------> give up (ServiceUnavailable)
 *
 * Waiting only after a whole round means a dead or deposed leader costs one
 * attempt, not a sleep, while an election in progress (every replica says
 * "not leader, leader unknown") backs off 10, 20, 40 ... 200 ms between rounds.
 */
#include "router/router.h"

static const char *const outcome_names[RT_OUT__COUNT] = {
    [RT_OUT_DONE] = "done",
    [RT_OUT_NOT_LEADER] = "not_leader",
    [RT_OUT_UNAVAILABLE] = "unavailable",
    [RT_OUT_TIMEOUT] = "timeout",
    [RT_OUT_UNREACHABLE] = "unreachable",
    [RT_OUT_BAD_ANSWER] = "bad_answer",
};

const char *rt_outcome_name(rt_outcome o)
{
	return (unsigned)o < RT_OUT__COUNT ? outcome_names[o] : "unknown";
}

static int replica_index(const rt_retry *r, uint32_t node)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->replicas[i] == node)
			return (int)i;
	return -1;
}

void rt_retry_init(rt_retry *r, const uint32_t *replicas, uint32_t n, uint32_t first)
{
	if (n > SH_MAX_REPLICATION)
		n = SH_MAX_REPLICATION;
	if (n == 0)
		n = 1; /* a group always has a replica; be safe with a zero */
	for (uint32_t i = 0; i < n; i++)
		r->replicas[i] = replicas[i];
	r->n = n;
	r->target = replica_index(r, first) >= 0 ? first : replicas[0];
	r->attempts = 0;
	r->round = 0;
	r->backoff_ms = RT_BACKOFF_MIN_MS;
	r->last = RT_OUT_DONE;
}

bool rt_retry_next(rt_retry *r, rt_outcome o, uint32_t hint, int64_t now_ms, int64_t deadline_ms,
                   uint32_t *delay_ms)
{
	r->attempts++;
	r->round++;
	r->last = o;
	if (o == RT_OUT_NOT_LEADER && hint != 0 && hint != r->target &&
	    replica_index(r, hint) >= 0) {
		r->target = hint;
	} else {
		int i = replica_index(r, r->target);
		r->target = r->replicas[(uint32_t)(i + 1) % r->n];
	}
	uint32_t delay = 0;
	if (r->round >= r->n) {
		delay = r->backoff_ms;
		r->backoff_ms =
		    r->backoff_ms * 2 > RT_BACKOFF_MAX_MS ? RT_BACKOFF_MAX_MS : r->backoff_ms * 2;
		r->round = 0;
	}
	*delay_ms = delay;
	return now_ms + delay < deadline_ms;
}
