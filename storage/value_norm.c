/*
 * value_norm.c -- validation of client values: st_value_normalize.
 *
 * Normalisation walks the value in document order, so
 * when a value has several problems the first one a reader meets is the one
 * reported, as DynamoDB does:
 *  - nesting: an item's (or key's, or expression-value map's) attributes are
 *    level 1, a value nested in them level 2, and so on; a value at a level
 *    above ST_MAX_DEPTH (32) is refused.  When st_value_normalize is handed an
 *    M, the M is taken to be such a container (level 0); any other value is
 *    itself level 1.  (To check a lone M attribute value with the exact limit,
 *    wrap it in a one-attribute map.)
 *  - numbers are parsed and rewritten canonically (st_num_parse/format), also
 *    inside NS;
 *  - S values, SS members and attribute names must be valid UTF-8 and names
 *    non-empty and at most ST_MAX_NAME_SIZE bytes;
 *  - NULL must carry true;
 *  - sets must be non-empty, of members of the set's type, without duplicates
 *    (after canonicalisation: "1" and "1.0" are duplicates), and are sorted
 *    (st_value_cmp order); maps are sorted and must not repeat a name.
 * Messages are DynamoDB's where it has one (the set messages quote the
 * members the way DynamoDB does: the members before the first repeat in
 * sorted order, then the repeat, then the rest as sent).
 *
 * Sorting uses a merge sort of index arrays in arena memory (libc's qsort may
 * call malloc behind the allocator's back).
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "value_int.h"

#define MSG_INVALID "One or more parameter values were invalid: "
#define MSG_NESTING                                                                                \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"

/* ------------------------------------------------------------------------ */
/* Sorting                                                                   */
/* ------------------------------------------------------------------------ */

typedef int (*idx_cmp_fn)(const void *ctx, uint32_t i, uint32_t j);

/* Stable merge sort of idx[0..n) using tmp[0..n). */
static void merge_sort(uint32_t *idx, uint32_t *tmp, uint32_t n, idx_cmp_fn cmp, const void *ctx)
{
	if (n < 2)
		return;
	if (n <= 8) {
		for (uint32_t i = 1; i < n; i++) {
			uint32_t x = idx[i], j = i;
			while (j > 0 && cmp(ctx, idx[j - 1], x) > 0) {
				idx[j] = idx[j - 1];
				j--;
			}
			idx[j] = x;
		}
		return;
	}
	uint32_t h = n / 2;
	merge_sort(idx, tmp, h, cmp, ctx);
	merge_sort(idx + h, tmp, n - h, cmp, ctx);
	uint32_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		tmp[k++] = cmp(ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
	while (i < h)
		tmp[k++] = idx[i++];
	while (j < n)
		tmp[k++] = idx[j++];
	memcpy(idx, tmp, (size_t)n * sizeof(uint32_t));
}

/* Sorted index permutation of n elements in arena memory; NULL if out of memory. */
static uint32_t *sorted_index(sh_arena *a, uint32_t n, idx_cmp_fn cmp, const void *ctx)
{
	uint32_t *idx = sh_arena_alloc(a, (size_t)n * sizeof(uint32_t));
	uint32_t *tmp = sh_arena_alloc(a, (size_t)n * sizeof(uint32_t));
	if (idx == NULL || tmp == NULL)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	merge_sort(idx, tmp, n, cmp, ctx);
	return idx;
}

/* ------------------------------------------------------------------------ */
/* Normalisation                                                             */
/* ------------------------------------------------------------------------ */

/* Whether p[0..n) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
static bool utf8_valid(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len;
		unsigned lo = 0x80, hi = 0xbf;
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		if (p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (size_t k = 2; k < len; k++) {
			if (p[i + k] < 0x80 || p[i + k] > 0xbf)
				return false;
		}
		i += len;
	}
	return true;
}

/* A bounded string builder for messages (truncates silently). */
typedef struct msgbuf {
	char b[SH_ERRMSG_SIZE];
	size_t len;
} msgbuf;

static void mb_put(msgbuf *m, const char *s, size_t n)
{
	size_t room = sizeof(m->b) - 1 - m->len;
	if (n > room)
		n = room;
	memcpy(m->b + m->len, s, n);
	m->len += n;
	m->b[m->len] = '\0';
}

static void mb_puts(msgbuf *m, const char *s)
{
	mb_put(m, s, strlen(s));
}

/* A string as a JSON string literal. */
static void mb_json(msgbuf *m, const char *s, size_t n)
{
	mb_puts(m, "\"");
	for (size_t i = 0; i < n && m->len < sizeof(m->b) - 1; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			mb_put(m, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			mb_puts(m, esc);
		} else {
			mb_put(m, (const char *)&c, 1);
		}
	}
	mb_puts(m, "\"");
}

static void mb_base64(msgbuf *m, const unsigned char *p, size_t n)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n && m->len < sizeof(m->b) - 1; i += 3) {
		unsigned v = (unsigned)p[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {tbl[(v >> 18) & 63], tbl[(v >> 12) & 63],
		             i + 1 < n ? tbl[(v >> 6) & 63] : '=', i + 2 < n ? tbl[v & 63] : '='};
		mb_put(m, q, 4);
	}
}

static int normalize_value(sh_arena *a, st_value *v, int level, char *errmsg);

/* Rewrites the N text *s canonically (arena copy only when it changes). */
static int canonical_number(sh_arena *a, st_value *v, st_num *num, char *errmsg)
{
	st_num n;
	char buf[ST_NUM_MAX_TEXT];
	int rc = st_num_parse(v->u.str.ptr, v->u.str.len, &n, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	size_t len = st_num_format(&n, buf);
	if (len != v->u.str.len || memcmp(buf, v->u.str.ptr, len) != 0) {
		char *p = sh_arena_strndup(a, buf, len);
		if (p == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory normalising a number");
		v->u.str.ptr = p;
		v->u.str.len = (uint32_t)len;
	}
	if (num != NULL)
		*num = n;
	return SHOAL_OK;
}

static int check_name(const st_attr *at, char *errmsg)
{
	if (at->name_len == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_INVALID "Empty attribute name");
	if (at->name_len > ST_MAX_NAME_SIZE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Attribute name is too long: %u bytes, the limit is %d "
		                           "bytes",
		               at->name_len, ST_MAX_NAME_SIZE);
	if (!utf8_valid((const unsigned char *)at->name, at->name_len))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "An attribute name is not valid UTF-8");
	return SHOAL_OK;
}

static int normalize_map(sh_arena *a, st_value *m, int level, char *errmsg)
{
	st_attr *at = m->u.map.a;
	uint32_t n = m->u.map.n;
	for (uint32_t i = 0; i < n; i++) {
		int rc = check_name(&at[i], errmsg);
		if (rc == SHOAL_OK)
			rc = normalize_value(a, &at[i].value, level + 1, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	bool sorted = true;
	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = st_attr_idx_cmp(at, i - 1, i) < 0;
	if (sorted)
		return SHOAL_OK;
	uint32_t *idx = sorted_index(a, n, st_attr_idx_cmp, at);
	st_attr *copy = sh_arena_memdup(a, at, (size_t)n * sizeof(st_attr));
	if (idx == NULL || copy == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory sorting a map");
	for (uint32_t i = 1; i < n; i++) {
		if (st_attr_idx_cmp(at, idx[i - 1], idx[i]) == 0) {
			const st_attr *d = &at[idx[i]];
			int len = d->name_len > 200 ? 200 : (int)d->name_len;
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "Duplicate attribute name: %.*s", len, d->name);
		}
	}
	for (uint32_t i = 0; i < n; i++)
		at[i] = copy[idx[i]];
	return SHOAL_OK;
}

typedef struct set_ctx {
	const st_value *v;
	const st_num *nums; /* NS only */
} set_ctx;

static int set_idx_cmp(const void *ctx, uint32_t i, uint32_t j)
{
	const set_ctx *c = ctx;
	if (c->nums != NULL)
		return st_num_cmp(&c->nums[i], &c->nums[j]);
	return st_bytes_cmp(&c->v[i], &c->v[j]);
}

static void mb_member(msgbuf *mb, st_type t, const st_value *m)
{
	if (t == ST_SS)
		mb_json(mb, m->u.str.ptr, m->u.str.len);
	else {
		mb_puts(mb, "\"");
		mb_base64(mb, (const unsigned char *)m->u.str.ptr, m->u.str.len);
		mb_puts(mb, "\"");
	}
}

/* DynamoDB's duplicate message: members before the first repeat (in input
 * order) sorted, then the repeat, then the remaining members as sent. */
static int duplicate_error(const st_value *set, const uint32_t *idx, uint32_t first_dup,
                           char *errmsg)
{
	st_type t = set->type;
	if (t == ST_NS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Input collection contains duplicates.");
	const st_value *mem = set->u.list.v;
	uint32_t n = set->u.list.n;
	const char *sep = t == ST_SS ? ", " : ",";
	msgbuf mb = {.len = 0};
	mb.b[0] = '\0';
	mb_puts(&mb, MSG_INVALID "Input collection [");
	bool any = false;
	for (uint32_t k = 0; k < n; k++) {
		if (idx[k] >= first_dup)
			continue;
		if (any)
			mb_puts(&mb, sep);
		mb_member(&mb, t, &mem[idx[k]]);
		any = true;
	}
	for (uint32_t k = first_dup; k < n; k++) {
		if (any)
			mb_puts(&mb, sep);
		mb_member(&mb, t, &mem[k]);
		any = true;
	}
	mb_puts(&mb, t == ST_SS ? "] contains duplicates." : "]of type BS contains duplicates.");
	return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", mb.b);
}

static int normalize_set(sh_arena *a, st_value *v, char *errmsg)
{
	static const char *const empty_msg[] = {
	    [ST_SS] = MSG_INVALID "An string set  may not be empty",
	    [ST_NS] = MSG_INVALID "An number set  may not be empty",
	    [ST_BS] = MSG_INVALID "Binary sets should not be empty",
	};
	st_type member_type = v->type == ST_SS ? ST_S : v->type == ST_NS ? ST_N : ST_B;
	uint32_t n = v->u.list.n;
	st_value *mem = v->u.list.v;

	if (n == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", empty_msg[v->type]);
	st_num *nums = NULL;
	if (v->type == ST_NS) {
		nums = sh_arena_alloc(a, (size_t)n * sizeof(st_num));
		if (nums == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory normalising a set");
	}
	for (uint32_t i = 0; i < n; i++) {
		if (mem[i].type != member_type)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "A member of a %s set is of type %s",
			               st_type_name(v->type), st_type_name(mem[i].type));
		if (v->type == ST_NS) {
			int rc = canonical_number(a, &mem[i], &nums[i], errmsg);
			if (rc != SHOAL_OK)
				return rc;
		} else if (v->type == ST_SS &&
		           !utf8_valid((const unsigned char *)mem[i].u.str.ptr, mem[i].u.str.len)) {
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "A string set member is not valid UTF-8");
		}
	}
	set_ctx ctx = {mem, nums};
	bool sorted = true;
	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = set_idx_cmp(&ctx, i - 1, i) < 0;
	if (sorted)
		return SHOAL_OK;
	uint32_t *idx = sorted_index(a, n, set_idx_cmp, &ctx);
	st_value *copy = sh_arena_memdup(a, mem, (size_t)n * sizeof(st_value));
	if (idx == NULL || copy == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory sorting a set");
	/* Stable sort: within a run of equals the indexes ascend, so the first
	 * repeat in input order is the smallest second index of any run. */
	uint32_t first_dup = UINT32_MAX;
	for (uint32_t k = 1; k < n; k++) {
		if (set_idx_cmp(&ctx, idx[k - 1], idx[k]) == 0 && idx[k] < first_dup)
			first_dup = idx[k];
	}
	if (first_dup != UINT32_MAX)
		return duplicate_error(v, idx, first_dup, errmsg);
	for (uint32_t i = 0; i < n; i++)
		mem[i] = copy[idx[i]];
	return SHOAL_OK;
}

static int normalize_value(sh_arena *a, st_value *v, int level, char *errmsg)
{
	if (level > ST_MAX_DEPTH)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_NESTING);
	switch (v->type) {
	case ST_S:
		if (!utf8_valid((const unsigned char *)v->u.str.ptr, v->u.str.len))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "A string value is not valid UTF-8");
		return SHOAL_OK;
	case ST_N:
		return canonical_number(a, v, NULL, errmsg);
	case ST_B:
	case ST_BOOL:
		return SHOAL_OK;
	case ST_NULL:
		if (!v->u.boolean)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "Null attribute value types must have the value "
			                           "of true");
		return SHOAL_OK;
	case ST_M:
		return normalize_map(a, v, level, errmsg);
	case ST_L:
		for (uint32_t i = 0; i < v->u.list.n; i++) {
			int rc = normalize_value(a, &v->u.list.v[i], level + 1, errmsg);
			if (rc != SHOAL_OK)
				return rc;
		}
		return SHOAL_OK;
	case ST_SS:
	case ST_NS:
	case ST_BS:
		return normalize_set(a, v, errmsg);
	default:
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Supplied AttributeValue is empty, must contain exactly one of the "
		               "supported datatypes");
	}
}

int st_value_normalize(sh_arena *a, st_value *v, char *errmsg)
{
	assert(v != NULL);
	if (v->type == ST_M)
		return normalize_map(a, v, 0, errmsg);
	return normalize_value(a, v, 1, errmsg);
}
