/*
 * retry.h -- the one retry policy (prefix sh_retry): where to send the next
 * attempt of a request to a replicated group, and how long to wait first.
 * Pure: no clock, no I/O; the caller feeds it outcomes and the time.  Used
 * by the router's calls to storage groups (router/call.c), the index
 * shipper's batches to target groups (node/ship_link.c) and libshoal's
 * requests to routers (a "group" of one: the client's socket).
 *
 * The edges, for one request:
 *
 *   attempt --answered-------------------------------------> done
 *   attempt --NOT_LEADER(hint in the group, != target)-----> attempt at the hint, at once
 *   attempt --any other failure, or no usable hint---------> attempt at the next replica
 *   (failure) --a whole round of n attempts without answer-> wait backoff first
 *                (min_ms, doubling up to max_ms)
 *   (failure) --now + wait >= deadline, or attempts spent--> give up
 *
 * Waiting only after a whole round means a dead or deposed leader costs one
 * attempt, not a sleep, while an election in progress (every replica says
 * "not leader, leader unknown") backs off 10, 20, 40 ... between rounds.
 *
 * Throttling is another matter: the service answered, and said the request
 * exceeds a capacity (sh_retry_is_throttling).  The same target is asked
 * again -- it is the right one, only busy -- after the AWS SDKs'
 * "exponential backoff with full jitter", counted apart from the failures
 * above (sh_retry_throttled):
 *
 *   answer --throttling, throttle retries left, now + wait < deadline--> same target, after wait
 *   answer --throttling, otherwise-----------------------------------> give up: it is the result
 *
 * where the k-th wait (k = 1, 2, ...) is drawn uniformly from
 * [0, min(throttle_max_ms, throttle_base_ms * 2^(k-1))]: botocore's standard
 * mode (rand() * min(base * 2^(k-1), 20 s)), whose jitter keeps the clients
 * a hot partition throttled together from coming back together.  The random
 * numbers come from a generator in the struct seeded by the caller, so the
 * policy stays pure and a test replays it.
 */
#ifndef SHOAL_COMMON_RETRY_H
#define SHOAL_COMMON_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster.h"

/* How one attempt ended. */
typedef enum sh_outcome {
	SH_OUT_DONE = 0,    /* an answer to pass on (success or a client error) */
	SH_OUT_NOT_LEADER,  /* the node is not the leader; hint = leader (0: unknown) */
	SH_OUT_UNAVAILABLE, /* the node does not serve the group now (not hosted, stopping) */
	SH_OUT_TIMEOUT,     /* sent, but no answer within the attempt timeout */
	SH_OUT_UNREACHABLE, /* could not send: no connection */
	SH_OUT_BAD_ANSWER,  /* an answer that does not decode */
	SH_OUT__COUNT
} sh_outcome;

/* "done", "not_leader", "unavailable", ... (metrics labels). */
const char *sh_outcome_name(sh_outcome o);

typedef struct sh_retry {
	uint32_t replicas[SH_MAX_REPLICATION];
	uint32_t n;            /* replicas in the group, >= 1 */
	uint32_t target;       /* the node (replica id) to try now */
	uint32_t attempts;     /* failed attempts so far */
	uint32_t round;        /* attempts since the last wait */
	uint32_t backoff_ms;   /* the next wait */
	uint32_t max_ms;       /* the longest wait */
	uint32_t max_attempts; /* give up after this many failures (0: no limit) */
	sh_outcome last;       /* outcome of the last failed attempt */
	/* Throttling (sh_retry_throttle_init; off after sh_retry_init). */
	uint32_t throttled;        /* throttled answers so far */
	uint32_t throttle_max;     /* retries of throttled answers allowed (0: none) */
	uint32_t throttle_base_ms; /* cap of the first wait */
	uint32_t throttle_max_ms;  /* largest cap */
	uint64_t rng;              /* xorshift64* state, never 0 */
} sh_retry;

/* first: the replica to try first (one of replicas; else replicas[0]).
 * Waits start at min_ms and double up to max_ms. */
void sh_retry_init(sh_retry *r, const uint32_t *replicas, uint32_t n, uint32_t first,
                   uint32_t min_ms, uint32_t max_ms);

/* After a failed attempt (o != SH_OUT_DONE): sets r->target and *delay_ms
 * and returns true, or returns false when now + delay would reach the
 * deadline or max_attempts failures have been seen. */
bool sh_retry_next(sh_retry *r, sh_outcome o, uint32_t hint, int64_t now_ms, int64_t deadline_ms,
                   uint32_t *delay_ms);

/* Whether an answer with this error code (enum shoal_err) is throttling:
 * ProvisionedThroughputExceededException, RequestLimitExceeded, and
 * TransactionInProgressException (botocore's standard mode counts it among
 * the throttling errors: the same token's transaction is still running).
 * Not LimitExceededException: in Shoal it is a hard limit (table ids, indexes
 * per table) that no wait lifts.  The one list of them. */
bool sh_retry_is_throttling(int code);

/* Turns throttle retries on for r (after sh_retry_init): at most max_retries
 * of them, waits capped at base_ms doubling to max_ms (base_ms >= 1 is
 * assumed; max_ms below base_ms acts as base_ms), jitter from `seed`. */
void sh_retry_throttle_init(sh_retry *r, uint32_t max_retries, uint32_t base_ms, uint32_t max_ms,
                            uint64_t seed);

/* The cap of the k-th wait (k >= 1): min(throttle_max_ms,
 * throttle_base_ms * 2^(k-1)). */
uint32_t sh_retry_throttle_cap(const sh_retry *r, uint32_t k);

/* After a throttled answer: sets *delay_ms (uniform in [0, cap of this
 * retry]) and returns true, or returns false when the retries are spent or
 * now + delay would reach the deadline.  r->target is unchanged. */
bool sh_retry_throttled(sh_retry *r, int64_t now_ms, int64_t deadline_ms, uint32_t *delay_ms);

#endif
