/*
 * Arena (region) allocator.
 *
 * A request's decoded values, parsed expressions and results all live in one
 * arena and die together when the request is done (as SQLite and nng do with
 * per-statement / per-message memory).  Blocks come from sh_malloc, so the
 * allocation fault point covers arenas too.  An arena is not thread-safe.
 *
 * Ownership: every pointer returned by sh_arena_* is owned by the arena and is
 * valid until sh_arena_reset or sh_arena_fini.
 */
#ifndef SHOAL_COMMON_ARENA_H
#define SHOAL_COMMON_ARENA_H

#include <stddef.h>

struct sh_arena_block;

typedef struct sh_arena {
	struct sh_arena_block *head; /* newest block first */
	size_t block_size;           /* size of the next ordinary block */
	size_t used;                 /* bytes handed out, for accounting */
} sh_arena;

/* Initialises an empty arena; no memory is allocated until the first alloc. */
void sh_arena_init(sh_arena *a);

/* Frees every block. The arena may be reused after sh_arena_init. */
void sh_arena_fini(sh_arena *a);

/* Frees everything but keeps the arena usable (keeps one block for reuse). */
void sh_arena_reset(sh_arena *a);

/* Bytes of blocks the arena holds (what it costs while kept: after
 * sh_arena_reset, its one remaining block). */
size_t sh_arena_held(const sh_arena *a);

/* A pool that frees records (and their arenas) it no longer keeps reports
 * the bytes here; every SH_ARENA_TRIM_BYTES of them, the C library is asked
 * to give its free pages back to the system (glibc's malloc_trim): freed
 * blocks between live ones otherwise stay in the process's RSS.  Rare by
 * construction (pools free only past what they keep); any thread. */
#define SH_ARENA_TRIM_BYTES (32u * 1024 * 1024)
void sh_arena_released(size_t bytes);

/* n bytes aligned to 16; NULL when out of memory. n == 0 returns a valid pointer. */
void *sh_arena_alloc(sh_arena *a, size_t n);
void *sh_arena_calloc(sh_arena *a, size_t count, size_t n);

/* Copies n bytes and appends a NUL; NULL when out of memory. */
char *sh_arena_strndup(sh_arena *a, const char *s, size_t n);
void *sh_arena_memdup(sh_arena *a, const void *p, size_t n);

#endif
