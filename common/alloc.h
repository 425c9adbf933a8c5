/*
 * Memory allocation and fault injection.
 *
 * All of Shoal's heap allocations go through sh_malloc/sh_calloc/sh_realloc so
 * that tests can make the N-th allocation fail (SQLite's malloc tests, raft's
 * heap fault tests).  The same countdown primitive guards other fault points:
 * the storage commit and the transport send.  Callers must treat a NULL from
 * these functions as an environmental error (SHOAL_E_NOMEM), never abort.
 *
 * Fault points are process-global and meant for single-threaded tests; when
 * no fault is armed the check is one relaxed atomic load.
 */
#ifndef SHOAL_COMMON_ALLOC_H
#define SHOAL_COMMON_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

enum sh_fault_point {
	SH_FAULT_ALLOC = 0, /* sh_malloc, sh_calloc, sh_realloc, sh_strndup */
	SH_FAULT_COMMIT,    /* storage: the LMDB write-transaction commit */
	SH_FAULT_SEND,      /* transports: sending a message */
	SH_FAULT__COUNT
};

/* Arms a fault point: the n-th check from now (n >= 1) fails, and so does every
 * later one if `sticky`; n = 0 disarms.  Returns nothing; see sh_fault_fired. */
void sh_fault_arm(enum sh_fault_point p, long n, bool sticky);

/* Disarms every fault point and clears the fired counters. */
void sh_fault_reset(void);

/* True if the point is armed and this call is the one (or after the one) that
 * fails.  Called by the code that owns the fault point. */
bool sh_fault_check(enum sh_fault_point p);

/* How many times the point has failed since it was armed. */
long sh_fault_fired(enum sh_fault_point p);

void *sh_malloc(size_t n);
void *sh_calloc(size_t count, size_t n);
void *sh_realloc(void *p, size_t n);
char *sh_strndup(const char *s, size_t n); /* always NUL-terminates */
void sh_free(void *p);

#endif
