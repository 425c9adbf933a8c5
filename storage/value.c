/*
 * value.c -- the value model of storage.h: type names, constructors, sorted
 * maps, deep copy, equality, ordering and DynamoDB's size rules.  Validation
 * of client values (st_value_normalize) is in value_norm.c.
 *
 * Maps keep their attrs sorted by name in memcmp order, a name that is a
 * prefix of another sorting first; lookups are binary searches.  The st_value
 * struct has no room for a map's capacity, so st_map_set cannot tell whether
 * an array has spare slots: inserting a new name always copies the attrs into
 * a fresh arena array one slot larger (O(n) per insert; replacing an existing
 * name is in place).  Callers building large maps should fill an array and
 * call st_value_normalize once, which sorts in O(n log n).
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "value_int.h"

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const type_names[] = {
    [ST_NONE] = "",     [ST_S] = "S",       [ST_N] = "N",   [ST_B] = "B",
    [ST_BOOL] = "BOOL", [ST_NULL] = "NULL", [ST_M] = "M",   [ST_L] = "L",
    [ST_SS] = "SS",     [ST_NS] = "NS",     [ST_BS] = "BS",
};

#define N_TYPES ((int)(sizeof(type_names) / sizeof(type_names[0])))

const char *st_type_name(st_type t)
{
	if ((int)t < 0 || (int)t >= N_TYPES)
		return "";
	return type_names[t];
}

st_type st_type_parse(const char *s, size_t len)
{
	if (s == NULL || len == 0)
		return ST_NONE;
	for (int t = ST_S; t < N_TYPES; t++) {
		if (strlen(type_names[t]) == len && memcmp(type_names[t], s, len) == 0)
			return (st_type)t;
	}
	return ST_NONE;
}

/* ------------------------------------------------------------------------ */
/* Constructors                                                              */
/* ------------------------------------------------------------------------ */

static st_value *new_str(sh_arena *a, st_type t, const void *p, size_t n)
{
	if (n > UINT32_MAX)
		return NULL;
	st_value *v = sh_arena_calloc(a, 1, sizeof(*v));
	if (v == NULL)
		return NULL;
	char *copy = sh_arena_strndup(a, n > 0 ? p : "", n);
	if (copy == NULL)
		return NULL;
	v->type = t;
	v->u.str.ptr = copy;
	v->u.str.len = (uint32_t)n;
	return v;
}

st_value *st_new_s(sh_arena *a, const char *s)
{
	return new_str(a, ST_S, s, strlen(s));
}

st_value *st_new_n(sh_arena *a, const char *text)
{
	st_num n;
	char buf[ST_NUM_MAX_TEXT];
	if (st_num_parse(text, strlen(text), &n, NULL) != SHOAL_OK)
		return NULL;
	size_t len = st_num_format(&n, buf);
	return new_str(a, ST_N, buf, len);
}

st_value *st_new_b(sh_arena *a, const void *p, size_t n)
{
	return new_str(a, ST_B, p, n);
}

st_value *st_new_map(sh_arena *a, uint32_t capacity)
{
	st_value *v = sh_arena_calloc(a, 1, sizeof(*v));
	if (v == NULL)
		return NULL;
	v->type = ST_M;
	if (capacity > 0) {
		v->u.map.a = sh_arena_calloc(a, capacity, sizeof(st_attr));
		if (v->u.map.a == NULL)
			return NULL;
	}
	v->u.map.n = 0;
	return v;
}

/* ------------------------------------------------------------------------ */
/* Maps                                                                      */
/* ------------------------------------------------------------------------ */

/* Index of the first attr whose name is >= name; *found if equal. */
static uint32_t lower_bound(const st_value *m, const char *name, size_t len, bool *found)
{
	uint32_t lo = 0, hi = m->u.map.n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const st_attr *at = &m->u.map.a[mid];
		if (st_name_cmp(at->name, at->name_len, name, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < m->u.map.n &&
	         st_name_cmp(m->u.map.a[lo].name, m->u.map.a[lo].name_len, name, len) == 0;
	return lo;
}

int st_map_set(sh_arena *a, st_value *m, const char *name, size_t name_len, const st_value *v)
{
	assert(m != NULL && m->type == ST_M && v != NULL);
	if (name_len > UINT32_MAX || m->u.map.n == UINT32_MAX)
		return SHOAL_E_NOMEM;
	st_value val = *v; /* v may point into m's own attrs */
	bool found;
	uint32_t at = lower_bound(m, name, name_len, &found);
	if (found) {
		m->u.map.a[at].value = val;
		return SHOAL_OK;
	}
	uint32_t n = m->u.map.n;
	st_attr *na = sh_arena_alloc(a, ((size_t)n + 1) * sizeof(st_attr));
	char *nm = sh_arena_strndup(a, name_len > 0 ? name : "", name_len);
	if (na == NULL || nm == NULL)
		return SHOAL_E_NOMEM;
	if (at > 0)
		memcpy(na, m->u.map.a, at * sizeof(st_attr));
	if (at < n)
		memcpy(na + at + 1, m->u.map.a + at, (n - at) * sizeof(st_attr));
	na[at].name = nm;
	na[at].name_len = (uint32_t)name_len;
	na[at].value = val;
	m->u.map.a = na;
	m->u.map.n = n + 1;
	return SHOAL_OK;
}

void st_map_remove(st_value *m, const char *name, size_t name_len)
{
	assert(m != NULL && m->type == ST_M);
	bool found;
	uint32_t at = lower_bound(m, name, name_len, &found);
	if (!found)
		return;
	memmove(m->u.map.a + at, m->u.map.a + at + 1, (m->u.map.n - at - 1) * sizeof(st_attr));
	m->u.map.n--;
}

const st_value *st_map_get(const st_value *m, const char *name, size_t name_len)
{
	assert(m != NULL && m->type == ST_M);
	bool found;
	uint32_t at = lower_bound(m, name, name_len, &found);
	return found ? &m->u.map.a[at].value : NULL;
}

/* ------------------------------------------------------------------------ */
/* Deep copy                                                                 */
/* ------------------------------------------------------------------------ */

int st_value_copy(sh_arena *a, const st_value *src, st_value *dst)
{
	st_value s = *src; /* dst may be src */
	*dst = s;
	switch (s.type) {
	case ST_S:
	case ST_N:
	case ST_B: {
		char *p = sh_arena_memdup(a, s.u.str.len > 0 ? s.u.str.ptr : "", s.u.str.len);
		if (p == NULL)
			return SHOAL_E_NOMEM;
		dst->u.str.ptr = p;
		return SHOAL_OK;
	}
	case ST_L:
	case ST_SS:
	case ST_NS:
	case ST_BS: {
		st_value *v = sh_arena_alloc(a, (size_t)s.u.list.n * sizeof(st_value));
		if (v == NULL)
			return SHOAL_E_NOMEM;
		for (uint32_t i = 0; i < s.u.list.n; i++) {
			int rc = st_value_copy(a, &s.u.list.v[i], &v[i]);
			if (rc != SHOAL_OK)
				return rc;
		}
		dst->u.list.v = v;
		return SHOAL_OK;
	}
	case ST_M: {
		st_attr *at = sh_arena_alloc(a, (size_t)s.u.map.n * sizeof(st_attr));
		if (at == NULL)
			return SHOAL_E_NOMEM;
		for (uint32_t i = 0; i < s.u.map.n; i++) {
			const st_attr *sa = &s.u.map.a[i];
			char *nm =
			    sh_arena_memdup(a, sa->name_len > 0 ? sa->name : "", sa->name_len);
			if (nm == NULL)
				return SHOAL_E_NOMEM;
			at[i].name = nm;
			at[i].name_len = sa->name_len;
			int rc = st_value_copy(a, &sa->value, &at[i].value);
			if (rc != SHOAL_OK)
				return rc;
		}
		dst->u.map.a = at;
		return SHOAL_OK;
	}
	default:
		return SHOAL_OK;
	}
}

/* ------------------------------------------------------------------------ */
/* Scalars: comparison                                                       */
/* ------------------------------------------------------------------------ */

int st_value_cmp(const st_value *a, const st_value *b)
{
	assert(a->type == b->type);
	assert(a->type == ST_S || a->type == ST_N || a->type == ST_B);
	if (a->type != ST_N)
		return st_bytes_cmp(a, b);
	st_num x, y;
	if (st_num_parse(a->u.str.ptr, a->u.str.len, &x, NULL) != SHOAL_OK ||
	    st_num_parse(b->u.str.ptr, b->u.str.len, &y, NULL) != SHOAL_OK)
		return st_bytes_cmp(a, b); /* not normalised: any total order will do */
	return st_num_cmp(&x, &y);
}

/* ------------------------------------------------------------------------ */
/* Equality                                                                  */
/* ------------------------------------------------------------------------ */

static bool scalar_equal(const st_value *a, const st_value *b)
{
	if (a->u.str.len == b->u.str.len &&
	    (a->u.str.len == 0 || memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0))
		return true;
	return a->type == ST_N && st_value_cmp(a, b) == 0; /* tolerate non-canonical text */
}

static bool set_strictly_sorted(const st_value *s)
{
	for (uint32_t i = 1; i < s->u.list.n; i++) {
		if (st_value_cmp(&s->u.list.v[i - 1], &s->u.list.v[i]) >= 0)
			return false;
	}
	return true;
}

static bool set_contains(const st_value *s, const st_value *x)
{
	for (uint32_t i = 0; i < s->u.list.n; i++) {
		if (scalar_equal(&s->u.list.v[i], x))
			return true;
	}
	return false;
}

static bool map_strictly_sorted(const st_value *m)
{
	for (uint32_t i = 1; i < m->u.map.n; i++) {
		if (st_attr_idx_cmp(m->u.map.a, i - 1, i) >= 0)
			return false;
	}
	return true;
}

bool st_value_equal(const st_value *a, const st_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case ST_S:
	case ST_N:
	case ST_B:
		return scalar_equal(a, b);
	case ST_BOOL:
		return a->u.boolean == b->u.boolean;
	case ST_NULL:
	case ST_NONE:
		return true;
	case ST_L:
		if (a->u.list.n != b->u.list.n)
			return false;
		for (uint32_t i = 0; i < a->u.list.n; i++) {
			if (!st_value_equal(&a->u.list.v[i], &b->u.list.v[i]))
				return false;
		}
		return true;
	case ST_SS:
	case ST_NS:
	case ST_BS:
		if (a->u.list.n != b->u.list.n)
			return false;
		if (set_strictly_sorted(a) && set_strictly_sorted(b)) {
			for (uint32_t i = 0; i < a->u.list.n; i++) {
				if (!scalar_equal(&a->u.list.v[i], &b->u.list.v[i]))
					return false;
			}
			return true;
		}
		for (uint32_t i = 0; i < a->u.list.n; i++) {
			if (!set_contains(b, &a->u.list.v[i]) || !set_contains(a, &b->u.list.v[i]))
				return false;
		}
		return true;
	case ST_M:
		if (a->u.map.n != b->u.map.n)
			return false;
		if (map_strictly_sorted(a) && map_strictly_sorted(b)) {
			for (uint32_t i = 0; i < a->u.map.n; i++) {
				const st_attr *x = &a->u.map.a[i], *y = &b->u.map.a[i];
				if (st_name_cmp(x->name, x->name_len, y->name, y->name_len) != 0 ||
				    !st_value_equal(&x->value, &y->value))
					return false;
			}
			return true;
		}
		for (uint32_t i = 0; i < a->u.map.n; i++) {
			const st_attr *x = &a->u.map.a[i];
			bool hit = false;
			for (uint32_t j = 0; j < b->u.map.n && !hit; j++) {
				const st_attr *y = &b->u.map.a[j];
				hit =
				    st_name_cmp(x->name, x->name_len, y->name, y->name_len) == 0 &&
				    st_value_equal(&x->value, &y->value);
			}
			if (!hit)
				return false;
		}
		return true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                     */
/* ------------------------------------------------------------------------ */

/* Significant digits of number text: from the first non-zero digit to the
 * last, not counting the decimal point. */
static size_t significant_digits(const char *s, size_t len)
{
	size_t count = 0, upto_last = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == 'e' || c == 'E')
			break;
		if (c < '0' || c > '9' || (c == '0' && count == 0))
			continue; /* sign, point, leading zero */
		count++;
		if (c != '0')
			upto_last = count; /* trailing zeros do not count */
	}
	return upto_last;
}

size_t st_value_size(const st_value *v)
{
	size_t sz = 0;
	switch (v->type) {
	case ST_S:
	case ST_B:
		return v->u.str.len;
	case ST_N:
		return (significant_digits(v->u.str.ptr, v->u.str.len) + 1) / 2 + 1;
	case ST_BOOL:
	case ST_NULL:
		return 1;
	case ST_M:
		sz = 3;
		for (uint32_t i = 0; i < v->u.map.n; i++)
			sz += 1 + v->u.map.a[i].name_len + st_value_size(&v->u.map.a[i].value);
		return sz;
	case ST_L:
		sz = 3;
		for (uint32_t i = 0; i < v->u.list.n; i++)
			sz += 1 + st_value_size(&v->u.list.v[i]);
		return sz;
	case ST_SS:
	case ST_NS:
	case ST_BS:
		for (uint32_t i = 0; i < v->u.list.n; i++)
			sz += st_value_size(&v->u.list.v[i]);
		return sz;
	default:
		return 0;
	}
}

size_t st_item_size(const st_value *item)
{
	size_t sz = 0;
	if (item == NULL || item->type != ST_M)
		return 0;
	for (uint32_t i = 0; i < item->u.map.n; i++)
		sz += item->u.map.a[i].name_len + st_value_size(&item->u.map.a[i].value);
	return sz;
}
