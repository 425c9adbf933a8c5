#include "arena.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"

#define ARENA_ALIGN       16
#define ARENA_FIRST_BLOCK 4096
#define ARENA_MAX_BLOCK   (1u << 20)

struct sh_arena_block {
	struct sh_arena_block *next;
	size_t size; /* usable bytes in data[] */
	size_t off;  /* next free byte in data[] */
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

void sh_arena_init(sh_arena *a)
{
	a->head = NULL;
	a->block_size = ARENA_FIRST_BLOCK;
	a->used = 0;
}

void sh_arena_fini(sh_arena *a)
{
	struct sh_arena_block *b = a->head;
	while (b != NULL) {
		struct sh_arena_block *next = b->next;
		sh_free(b);
		b = next;
	}
	sh_arena_init(a);
}

void sh_arena_reset(sh_arena *a)
{
	if (a->head == NULL)
		return;
	/* Keep the newest (largest) block. */
	struct sh_arena_block *keep = a->head;
	struct sh_arena_block *b = keep->next;
	while (b != NULL) {
		struct sh_arena_block *next = b->next;
		sh_free(b);
		b = next;
	}
	keep->next = NULL;
	keep->off = 0;
	a->used = 0;
}

void sh_arena_released(size_t bytes)
{
	static atomic_size_t since_trim;
	size_t before = atomic_fetch_add_explicit(&since_trim, bytes, memory_order_relaxed);
	if (before < SH_ARENA_TRIM_BYTES && before + bytes >= SH_ARENA_TRIM_BYTES) {
		malloc_trim(0);
		atomic_store_explicit(&since_trim, 0, memory_order_relaxed);
	}
}

size_t sh_arena_held(const sh_arena *a)
{
	size_t n = 0;
	for (const struct sh_arena_block *b = a->head; b != NULL; b = b->next)
		n += sizeof(*b) + b->size;
	return n;
}

void *sh_arena_alloc(sh_arena *a, size_t n)
{
	size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (need < n)
		return NULL; /* overflow */
	struct sh_arena_block *b = a->head;
	if (b == NULL || b->size - b->off < need) {
		size_t size = a->block_size;
		if (size < need)
			size = need;
		if (size > SIZE_MAX - sizeof(*b))
			return NULL;
		b = sh_malloc(sizeof(*b) + size);
		if (b == NULL)
			return NULL;
		b->size = size;
		b->off = 0;
		/* A block for one oversized request goes behind the current one so
		 * the current block's free space is not wasted. */
		if (need > a->block_size && a->head != NULL) {
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
			if (a->block_size < ARENA_MAX_BLOCK)
				a->block_size *= 2;
		}
	}
	void *p = b->data + b->off;
	b->off += need;
	a->used += need;
	return p;
}

void *sh_arena_calloc(sh_arena *a, size_t count, size_t n)
{
	if (n != 0 && count > SIZE_MAX / n)
		return NULL;
	void *p = sh_arena_alloc(a, count * n);
	if (p != NULL)
		memset(p, 0, count * n);
	return p;
}

void *sh_arena_memdup(sh_arena *a, const void *p, size_t n)
{
	void *d = sh_arena_alloc(a, n);
	if (d != NULL && n > 0)
		memcpy(d, p, n);
	return d;
}

char *sh_arena_strndup(sh_arena *a, const char *s, size_t n)
{
	char *d = sh_arena_alloc(a, n + 1);
	if (d == NULL)
		return NULL;
	if (n > 0)
		memcpy(d, s, n);
	d[n] = '\0';
	return d;
}
