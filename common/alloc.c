#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static struct {
	atomic_long countdown; /* 0: disarmed */
	atomic_long fired;
	atomic_bool sticky;
	atomic_bool tripped;
} faults[SH_FAULT__COUNT];

void sh_fault_arm(enum sh_fault_point p, long n, bool sticky)
{
	atomic_store(&faults[p].countdown, n);
	atomic_store(&faults[p].sticky, sticky);
	atomic_store(&faults[p].tripped, false);
	atomic_store(&faults[p].fired, 0);
}

void sh_fault_reset(void)
{
	for (int i = 0; i < SH_FAULT__COUNT; i++)
		sh_fault_arm((enum sh_fault_point)i, 0, false);
}

bool sh_fault_check(enum sh_fault_point p)
{
	if (atomic_load_explicit(&faults[p].countdown, memory_order_relaxed) == 0 &&
	    !atomic_load_explicit(&faults[p].tripped, memory_order_relaxed))
		return false;
	if (atomic_load(&faults[p].tripped)) {
		if (!atomic_load(&faults[p].sticky))
			return false;
		atomic_fetch_add(&faults[p].fired, 1);
		return true;
	}
	if (atomic_fetch_sub(&faults[p].countdown, 1) == 1) {
		atomic_store(&faults[p].tripped, true);
		atomic_fetch_add(&faults[p].fired, 1);
		return true;
	}
	return false;
}

long sh_fault_fired(enum sh_fault_point p)
{
	return atomic_load(&faults[p].fired);
}

void *sh_malloc(size_t n)
{
	if (sh_fault_check(SH_FAULT_ALLOC))
		return NULL;
	return malloc(n == 0 ? 1 : n);
}

void *sh_calloc(size_t count, size_t n)
{
	if (sh_fault_check(SH_FAULT_ALLOC))
		return NULL;
	return calloc(count == 0 ? 1 : count, n == 0 ? 1 : n);
}

void *sh_realloc(void *p, size_t n)
{
	if (sh_fault_check(SH_FAULT_ALLOC))
		return NULL;
	return realloc(p, n == 0 ? 1 : n);
}

char *sh_strndup(const char *s, size_t n)
{
	char *d = sh_malloc(n + 1);
	if (d == NULL)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

void sh_free(void *p)
{
	free(p);
}
