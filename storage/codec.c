/*
 * codec.c -- the LMDB value of an item: a compact, self-describing binary
 * encoding of a normalised ST_M.
 *
 * Byte by byte (varint = unsigned LEB128 of a uint32: 7 bits per byte, low
 * group first, high bit set on every byte but the last, at most 5 bytes):
 *
 *   item   := 0x01 (format version)  count:varint  attr{count}
 *   attr   := name_len:varint  name:bytes  value      (names sorted, unique,
 *                                                      1..65535 bytes UTF-8)
 *   value  := tag  payload
 *     0x01 S     len:varint bytes (UTF-8)
 *     0x02 N     number
 *     0x03 B     len:varint bytes
 *     0x04 BOOL  false            0x05 BOOL true       0x06 NULL
 *     0x07 M     count:varint attr{count}
 *     0x08 L     count:varint value{count}
 *     0x09 SS    count:varint (len:varint bytes){count}   count >= 1, sorted, unique
 *     0x0A NS    count:varint number{count}               count >= 1, sorted, unique
 *     0x0B BS    count:varint (len:varint bytes){count}   count >= 1, sorted, unique
 *   number := h:byte [ e:byte  bcd:ceil(nd / 2) bytes ]
 *     h   bits 0-5: nd, the number of significant digits (0..38), bit 6: 0,
 *         bit 7: negative; h == 0 is zero and nothing follows.
 *     e   st_num's exp + 129 (0..255 covers exactly -129..126).
 *     bcd the digits two per byte, high nibble first; an odd last digit has
 *         a zero low nibble.  The first and last digits are non-zero.
 *
 * Numbers are stored as digits, not text: a 38-digit number takes 22 bytes
 * whatever its exponent, and the decoder rebuilds the canonical text with
 * st_num_format, so what comes out is canonical by construction.
 *
 * The decoder trusts nothing: every length and count is checked against the
 * bytes that remain (a count of n elements needs at least n bytes, so nothing
 * allocated can exceed a small multiple of the input), nesting deeper than
 * ST_MAX_DEPTH is refused, and the result must be a valid normalised item
 * (sorted unique names and set members, non-empty sets, valid UTF-8, canonical
 * digits) -- otherwise SHOAL_E_INTERNAL "corrupt item: ...".  The input is
 * copied into the arena once and the decoded strings point into that copy.
 */
#include <string.h>

#include "codec.h"

#define VERSION 0x01

enum {
	T_S = 0x01,
	T_N = 0x02,
	T_B = 0x03,
	T_FALSE = 0x04,
	T_TRUE = 0x05,
	T_NULL = 0x06,
	T_M = 0x07,
	T_L = 0x08,
	T_SS = 0x09,
	T_NS = 0x0a,
	T_BS = 0x0b,
};

#define NUM_NEG     0x80
#define NUM_ND_MASK 0x3f

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/* A writer that only counts when p is NULL, so sizing and writing share code. */
typedef struct wr {
	uint8_t *p;
	size_t n;
} wr;

static void w_byte(wr *w, uint8_t b)
{
	if (w->p != NULL)
		w->p[w->n] = b;
	w->n++;
}

static void w_bytes(wr *w, const void *p, size_t n)
{
	if (w->p != NULL && n > 0)
		memcpy(w->p + w->n, p, n);
	w->n += n;
}

static void w_varint(wr *w, uint32_t v)
{
	while (v >= 0x80) {
		w_byte(w, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	w_byte(w, (uint8_t)v);
}

static int w_number(wr *w, const st_value *v)
{
	st_num n;
	if (st_num_parse(v->u.str.ptr, v->u.str.len, &n, NULL) != SHOAL_OK)
		return SHOAL_E_INTERNAL; /* not normalised */
	if (n.sign == 0) {
		w_byte(w, 0);
		return SHOAL_OK;
	}
	w_byte(w, (uint8_t)(n.ndigits | (n.sign < 0 ? NUM_NEG : 0)));
	w_byte(w, (uint8_t)(n.exp + 129));
	for (int i = 0; i < n.ndigits; i += 2)
		w_byte(w, (uint8_t)(n.d[i] << 4 | (i + 1 < n.ndigits ? n.d[i + 1] : 0)));
	return SHOAL_OK;
}

static int w_value(wr *w, const st_value *v, int level);

static int w_attrs(wr *w, const st_value *m, int level)
{
	w_varint(w, m->u.map.n);
	for (uint32_t i = 0; i < m->u.map.n; i++) {
		const st_attr *at = &m->u.map.a[i];
		w_varint(w, at->name_len);
		w_bytes(w, at->name, at->name_len);
		int rc = w_value(w, &at->value, level + 1);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int w_value(wr *w, const st_value *v, int level)
{
	if (level > ST_MAX_DEPTH)
		return SHOAL_E_INTERNAL; /* not normalised */
	switch (v->type) {
	case ST_S:
	case ST_B:
		w_byte(w, v->type == ST_S ? T_S : T_B);
		w_varint(w, v->u.str.len);
		w_bytes(w, v->u.str.ptr, v->u.str.len);
		return SHOAL_OK;
	case ST_N:
		w_byte(w, T_N);
		return w_number(w, v);
	case ST_BOOL:
		w_byte(w, v->u.boolean ? T_TRUE : T_FALSE);
		return SHOAL_OK;
	case ST_NULL:
		w_byte(w, T_NULL);
		return SHOAL_OK;
	case ST_M:
		w_byte(w, T_M);
		return w_attrs(w, v, level);
	case ST_L:
		w_byte(w, T_L);
		w_varint(w, v->u.list.n);
		for (uint32_t i = 0; i < v->u.list.n; i++) {
			int rc = w_value(w, &v->u.list.v[i], level + 1);
			if (rc != SHOAL_OK)
				return rc;
		}
		return SHOAL_OK;
	case ST_SS:
	case ST_BS:
	case ST_NS:
		w_byte(w, v->type == ST_SS ? T_SS : v->type == ST_BS ? T_BS : T_NS);
		w_varint(w, v->u.list.n);
		for (uint32_t i = 0; i < v->u.list.n; i++) {
			const st_value *m = &v->u.list.v[i];
			if (v->type == ST_NS) {
				int rc = w_number(w, m);
				if (rc != SHOAL_OK)
					return rc;
			} else {
				w_varint(w, m->u.str.len);
				w_bytes(w, m->u.str.ptr, m->u.str.len);
			}
		}
		return SHOAL_OK;
	default:
		return SHOAL_E_INTERNAL;
	}
}

int st_codec_encode(sh_arena *a, const st_value *item, uint8_t **out, size_t *len)
{
	if (item == NULL || item->type != ST_M)
		return SHOAL_E_INTERNAL;
	wr w = {NULL, 0};
	w_byte(&w, VERSION);
	int rc = w_attrs(&w, item, 0);
	if (rc != SHOAL_OK)
		return rc;
	size_t size = w.n;
	w.p = sh_arena_alloc(a, size);
	if (w.p == NULL)
		return SHOAL_E_NOMEM;
	w.n = 0;
	w_byte(&w, VERSION);
	rc = w_attrs(&w, item, 0);
	if (rc != SHOAL_OK)
		return rc;
	*out = w.p;
	*len = w.n;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct rd {
	const uint8_t *p, *end;
	sh_arena *a;
	char *errmsg;
} rd;

static int corrupt(rd *r, const char *what)
{
	return sh_errf(r->errmsg, SHOAL_E_INTERNAL, "corrupt item: %s", what);
}

static size_t left(const rd *r)
{
	return (size_t)(r->end - r->p);
}

static int r_byte(rd *r, uint8_t *b)
{
	if (r->p >= r->end)
		return corrupt(r, "truncated");
	*b = *r->p++;
	return SHOAL_OK;
}

static int r_varint(rd *r, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 5; i++) {
		uint8_t b = 0;
		int rc = r_byte(r, &b);
		if (rc != SHOAL_OK)
			return rc;
		if (i == 4 && b > 0x0f)
			return corrupt(r, "varint overflows 32 bits");
		v |= (uint32_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			return SHOAL_OK;
		}
	}
	return corrupt(r, "varint longer than 5 bytes");
}

/* A count of elements each needing at least `min_bytes`. */
static int r_count(rd *r, uint32_t *n, size_t min_bytes)
{
	int rc = r_varint(r, n);
	if (rc != SHOAL_OK)
		return rc;
	if ((size_t)*n > left(r) / min_bytes)
		return corrupt(r, "count larger than the data");
	return SHOAL_OK;
}

/* Whether p[0..n) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
static bool utf8_valid(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len = c >= 0xc2 && c <= 0xdf   ? 2
		             : c >= 0xe0 && c <= 0xef ? 3
		             : c >= 0xf0 && c <= 0xf4 ? 4
		                                      : 0;
		if (len == 0 || n - i < len)
			return false;
		unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
		unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
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

/* Bytes of a length-prefixed string, pointing into the arena copy. */
static int r_str(rd *r, st_value *v, st_type t)
{
	uint32_t n;
	int rc = r_varint(r, &n);
	if (rc != SHOAL_OK)
		return rc;
	if (n > left(r))
		return corrupt(r, "string longer than the data");
	if (t == ST_S && !utf8_valid(r->p, n))
		return corrupt(r, "string is not UTF-8");
	v->type = t;
	v->u.str.ptr = (const char *)r->p;
	v->u.str.len = n;
	r->p += n;
	return SHOAL_OK;
}

static int r_number(rd *r, st_value *v, st_num *num)
{
	uint8_t h = 0, e = 0;
	int rc = r_byte(r, &h);
	if (rc != SHOAL_OK)
		return rc;
	st_num n;
	memset(&n, 0, sizeof(n));
	if (h != 0) {
		int nd = h & NUM_ND_MASK;
		if ((h & 0x40) || nd == 0 || nd > ST_NUM_MAX_DIGITS)
			return corrupt(r, "bad number header");
		if ((rc = r_byte(r, &e)) != SHOAL_OK)
			return rc;
		if ((size_t)(nd + 1) / 2 > left(r))
			return corrupt(r, "truncated");
		for (int i = 0; i < nd; i += 2) {
			uint8_t b = *r->p++;
			uint8_t d0 = b >> 4, d1 = b & 0x0f;
			if (d0 > 9 || d1 > 9 || (i + 1 == nd && d1 != 0))
				return corrupt(r, "bad number digits");
			n.d[i] = d0;
			if (i + 1 < nd)
				n.d[i + 1] = d1;
		}
		if (n.d[0] == 0 || n.d[nd - 1] == 0)
			return corrupt(r, "number not normalised");
		n.sign = (h & NUM_NEG) ? -1 : 1;
		n.exp = (int16_t)(e - 129);
		n.ndigits = (uint8_t)nd;
	}
	char buf[ST_NUM_MAX_TEXT];
	size_t len = st_num_format(&n, buf);
	char *text = sh_arena_strndup(r->a, buf, len);
	if (text == NULL)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory decoding an item");
	v->type = ST_N;
	v->u.str.ptr = text;
	v->u.str.len = (uint32_t)len;
	if (num != NULL)
		*num = n;
	return SHOAL_OK;
}

static int bytes_cmp(const st_value *a, const st_value *b)
{
	size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
	int c = n > 0 ? memcmp(a->u.str.ptr, b->u.str.ptr, n) : 0;
	if (c != 0)
		return c;
	return a->u.str.len < b->u.str.len ? -1 : a->u.str.len > b->u.str.len ? 1 : 0;
}

static int r_value(rd *r, st_value *v, int level);

static int r_attrs(rd *r, st_value *m, int level)
{
	uint32_t n;
	int rc = r_count(r, &n, 2); /* a name length and a tag at least */
	if (rc != SHOAL_OK)
		return rc;
	m->type = ST_M;
	m->u.map.n = n;
	m->u.map.a = sh_arena_alloc(r->a, (size_t)n * sizeof(st_attr));
	if (m->u.map.a == NULL)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory decoding an item");
	st_value prev;
	memset(&prev, 0, sizeof(prev));
	for (uint32_t i = 0; i < n; i++) {
		st_attr *at = &m->u.map.a[i];
		st_value name;
		if ((rc = r_str(r, &name, ST_S)) != SHOAL_OK)
			return rc;
		if (name.u.str.len == 0 || name.u.str.len > ST_MAX_NAME_SIZE)
			return corrupt(r, "bad attribute name length");
		if (i > 0 && bytes_cmp(&prev, &name) >= 0)
			return corrupt(r, "attribute names out of order");
		prev = name;
		at->name = name.u.str.ptr;
		at->name_len = name.u.str.len;
		if ((rc = r_value(r, &at->value, level + 1)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int r_set(rd *r, st_value *v, st_type t)
{
	uint32_t n;
	int rc = r_count(r, &n, 1);
	if (rc != SHOAL_OK)
		return rc;
	if (n == 0)
		return corrupt(r, "empty set");
	v->type = t;
	v->u.list.n = n;
	v->u.list.v = sh_arena_alloc(r->a, (size_t)n * sizeof(st_value));
	if (v->u.list.v == NULL)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory decoding an item");
	st_num prev, cur;
	memset(&prev, 0, sizeof(prev));
	memset(&cur, 0, sizeof(cur));
	for (uint32_t i = 0; i < n; i++) {
		st_value *m = &v->u.list.v[i];
		if (t == ST_NS)
			rc = r_number(r, m, &cur);
		else
			rc = r_str(r, m, t == ST_SS ? ST_S : ST_B);
		if (rc != SHOAL_OK)
			return rc;
		if (i > 0) {
			int c = t == ST_NS ? st_num_cmp(&prev, &cur) : bytes_cmp(m - 1, m);
			if (c >= 0)
				return corrupt(r, "set members out of order");
		}
		prev = cur;
	}
	return SHOAL_OK;
}

static int r_value(rd *r, st_value *v, int level)
{
	uint8_t tag = 0;
	int rc;
	if (level > ST_MAX_DEPTH)
		return corrupt(r, "nested too deeply");
	if ((rc = r_byte(r, &tag)) != SHOAL_OK)
		return rc;
	memset(v, 0, sizeof(*v));
	switch (tag) {
	case T_S:
		return r_str(r, v, ST_S);
	case T_B:
		return r_str(r, v, ST_B);
	case T_N:
		return r_number(r, v, NULL);
	case T_FALSE:
	case T_TRUE:
		v->type = ST_BOOL;
		v->u.boolean = tag == T_TRUE;
		return SHOAL_OK;
	case T_NULL:
		v->type = ST_NULL;
		v->u.boolean = true;
		return SHOAL_OK;
	case T_M:
		return r_attrs(r, v, level);
	case T_L: {
		uint32_t n;
		if ((rc = r_count(r, &n, 1)) != SHOAL_OK)
			return rc;
		v->type = ST_L;
		v->u.list.n = n;
		v->u.list.v = sh_arena_alloc(r->a, (size_t)n * sizeof(st_value));
		if (v->u.list.v == NULL)
			return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory decoding an item");
		for (uint32_t i = 0; i < n; i++) {
			if ((rc = r_value(r, &v->u.list.v[i], level + 1)) != SHOAL_OK)
				return rc;
		}
		return SHOAL_OK;
	}
	case T_SS:
		return r_set(r, v, ST_SS);
	case T_NS:
		return r_set(r, v, ST_NS);
	case T_BS:
		return r_set(r, v, ST_BS);
	default:
		return corrupt(r, "unknown type tag");
	}
}

int st_codec_decode(sh_arena *a, const uint8_t *buf, size_t len, st_value *item, char *errmsg)
{
	rd r = {NULL, NULL, a, errmsg};
	if (buf == NULL || len == 0)
		return corrupt(&r, "empty");
	if (buf[0] != VERSION)
		return corrupt(&r, "unknown format version");
	uint8_t *copy = sh_arena_memdup(a, buf, len);
	if (copy == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory decoding an item");
	r.p = copy + 1;
	r.end = copy + len;
	st_value v;
	memset(&v, 0, sizeof(v));
	int rc = r_attrs(&r, &v, 0);
	if (rc != SHOAL_OK)
		return rc;
	if (r.p != r.end)
		return corrupt(&r, "trailing bytes");
	*item = v;
	return SHOAL_OK;
}
