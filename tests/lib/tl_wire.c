#include "tl_wire.h"

#include <string.h>

#include "testlib.h"

/* A message written back to front: buf[start..cap) holds the bytes so far. */
typedef struct bw {
	uint8_t *buf;
	size_t cap, start;
} bw;

static void bw_bytes(bw *w, const void *p, size_t n)
{
	tl_assert(w->start >= n);
	w->start -= n;
	memcpy(w->buf + w->start, p, n);
}

static void bw_varint(bw *w, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	do {
		tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v != 0);
	bw_bytes(w, tmp, n);
}

/* Wraps everything written so far as length-delimited field `field`. */
static void bw_wrap(bw *w, unsigned field)
{
	bw_varint(w, w->cap - w->start);
	bw_varint(w, (uint64_t)field << 3 | 2);
}

const uint8_t *tl_nested_put(sh_arena *a, bool map, size_t depth, size_t *len)
{
	bw w = {NULL, 64 + depth * 20, 0};
	w.buf = sh_arena_alloc(a, w.cap);
	tl_assert(w.buf != NULL);
	w.start = w.cap;
	static const uint8_t null_true[] = {0x28, 0x01};
	bw_bytes(&w, null_true, sizeof(null_true));
	for (size_t i = 0; i < depth; i++) {
		if (map) {
			bw_wrap(&w, 2); /* Attribute.value */
			bw_bytes(&w,
			         "\x0a\x01"
			         "k",
			         3);    /* Attribute.name */
			bw_wrap(&w, 1); /* MapValue.attrs */
			bw_wrap(&w, 6); /* AttributeValue.m */
		} else {
			bw_wrap(&w, 1); /* ListValue.values */
			bw_wrap(&w, 7); /* AttributeValue.l */
		}
	}
	bw_wrap(&w, 2); /* Attribute.value */
	bw_bytes(&w,
	         "\x0a\x01"
	         "a",
	         3);    /* Attribute.name */
	bw_wrap(&w, 1); /* Item.attrs */
	bw_wrap(&w, 2); /* PutItemRequest.item */
	bw_bytes(&w,
	         "\x0a\x03"
	         "tbl",
	         5);     /* PutItemRequest.table_name */
	bw_wrap(&w, 11); /* Request.put_item */
	*len = w.cap - w.start;
	return w.buf + w.start;
}
