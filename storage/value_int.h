/*
 * value_int.h -- comparisons shared by value.c and value_norm.c (private to
 * storage/).  Inline: they sit on the hot path of every map lookup.
 */
#ifndef SHOAL_STORAGE_VALUE_INT_H
#define SHOAL_STORAGE_VALUE_INT_H

#include <string.h>

#include "storage.h"

/* memcmp order of two byte strings, a prefix sorting first: <0, 0, >0. */
static inline int st_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n > 0 ? memcmp(a, b, n) : 0;
	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* The bytes of two S, N or B values in st_name_cmp order. */
static inline int st_bytes_cmp(const st_value *a, const st_value *b)
{
	return st_name_cmp(a->u.str.ptr, a->u.str.len, b->u.str.ptr, b->u.str.len);
}

/* Attributes i and j of the attr array ctx by name (an index comparator). */
static inline int st_attr_idx_cmp(const void *ctx, uint32_t i, uint32_t j)
{
	const st_attr *at = ctx;
	return st_name_cmp(at[i].name, at[i].name_len, at[j].name, at[j].name_len);
}

#endif
