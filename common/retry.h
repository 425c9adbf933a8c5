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

#endif
