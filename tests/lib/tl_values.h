/*
 * tl_values.h -- st_value helpers for tests: the test arena, value builders,
 * values from DynamoDB JSON text, random values, comparison and printing.
 *
 * Memory: everything handed out lives in an arena -- tl_arena for the
 * builders, the caller's for the functions that take one -- and stays valid
 * until that arena is reset or finalised.  A builder that cannot build its
 * value (out of memory, a number that does not parse) is a bug in the test
 * and fails it (tl_assert).
 */
#ifndef SHOAL_TL_VALUES_H
#define SHOAL_TL_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "storage/storage.h"
#include "testlib.h"

/* ------------------------------------------------------------------------ */
/* The test arena and message buffer                                         */
/* ------------------------------------------------------------------------ */

extern sh_arena tl_arena;
extern char tl_msg[SH_ERRMSG_SIZE];

/* A Check fixture: initialises tl_arena and clears tl_msg; the teardown
 * finalises tl_arena and disarms every fault point. */
void tl_arena_setup(void);
void tl_arena_teardown(void);

/* ------------------------------------------------------------------------ */
/* Builders of st_value * (in tl_arena)                                      */
/* ------------------------------------------------------------------------ */

/* Scalars through st_new_*: tl_n's text is canonicalised ("1.50" -> "1.5"). */
st_value *tl_s(const char *s);
st_value *tl_sn(size_t n, char c); /* S of n copies of c */
st_value *tl_n(const char *text);
st_value *tl_ni(long i);
st_value *tl_b(const void *p, size_t n);
/* tl_map("a", v1, "b", v2, NULL): an M through st_map_set (sorted, a repeated
 * name replaced); tl_map(NULL) is empty. */
st_value *tl_map(const char *name, ...);
/* tl_list(3, v1, v2, v3): an L of copies of the values. */
st_value *tl_list(uint32_t n, ...);
/* tl_ss(2, "a", "b"): an SS of the members in the order given. */
st_value *tl_ss(uint32_t n, ...);

/* The attribute `name` of an item, or NULL. */
const st_value *tl_attr(const st_value *item, const char *name);
/* Whether v's bytes (S, N or B) are exactly the NUL-terminated s. */
bool tl_str_is(const st_value *v, const char *s);

/* ------------------------------------------------------------------------ */
/* Raw values (in tl_arena): exactly as built, not normalised                */
/* ------------------------------------------------------------------------ */

st_value tl_raw(st_type t, const void *p, size_t n);
st_value tl_raw_s(const char *s);
st_value tl_raw_n(const char *s);
st_value tl_raw_b(const void *p, size_t n);
st_value tl_raw_bool(bool b);
st_value tl_raw_null(void);
/* tl_raw_list(ST_SS, 2, v0, v1): an L, SS, NS or BS of n values. */
st_value tl_raw_list(st_type t, uint32_t n, ...);
/* tl_raw_map(2, "b", v0, "a", v1): an M of n (name, value) pairs in the order
 * given (names are not copied). */
st_value tl_raw_map(uint32_t n, ...);
/* depth levels of single-attribute maps {"n": ...} around leaf. */
st_value tl_raw_deep_map(int depth, st_value leaf);
/* A copy of v in tl_arena. */
st_value *tl_heap(st_value v);

/*
 * Short names for test bodies: a test defines TL_VALUE_NAMES (the st_value *
 * builders) or TL_RAW_VALUE_NAMES (the raw ones) before including this header.
 */
#ifdef TL_VALUE_NAMES
#define S(s)       tl_s(s)
#define Sn(n, c)   tl_sn(n, c)
#define N(text)    tl_n(text)
#define Ni(i)      tl_ni(i)
#define B(p, n)    tl_b(p, n)
#define map(...)   tl_map(__VA_ARGS__)
#define list(...)  tl_list(__VA_ARGS__)
#define SS(...)    tl_ss(__VA_ARGS__)
#define attr(i, n) tl_attr(i, n)
#endif
#ifdef TL_RAW_VALUE_NAMES
#define raw(t, p, n)          tl_raw(t, p, n)
#define S(s)                  tl_raw_s(s)
#define N(s)                  tl_raw_n(s)
#define B(p, n)               tl_raw_b(p, n)
#define BOOLV(b)              tl_raw_bool(b)
#define NUL()                 tl_raw_null()
#define LIST(...)             tl_raw_list(__VA_ARGS__)
#define MAP(...)              tl_raw_map(__VA_ARGS__)
#define deep_map(depth, leaf) tl_raw_deep_map(depth, leaf)
#define heap(v)               tl_heap(v)
#endif

/* ------------------------------------------------------------------------ */
/* DynamoDB JSON, as the tests write it                                      */
/* ------------------------------------------------------------------------ */

/*
 * Values from DynamoDB JSON text through the real codec (proto/wire.h),
 * normalised, in arena a -- with one liberty for readable tests: B and BS
 * members are written as plain text rather than base64, so
 * {"M": {"a": {"N": "1"}, "b": {"B": "raw bytes"}}}.  Text the codec or the
 * normaliser refuses is a bug in the test and fails it.
 */
st_value *tl_json_val(sh_arena *a, const char *text);
/* An item (ST_M) from a JSON object of attributes: {"a": {"N": "1"}}. */
st_value *tl_json_item(sh_arena *a, const char *text);
/* ExpressionAttributeNames from {"#a": "a"}; NULL for NULL. */
st_value *tl_json_names(sh_arena *a, const char *text);

/* The DynamoDB JSON of v in a's memory, B as plain text ("<absent>" for
 * NULL).  For messages: long values are cut at 8 KB. */
const char *tl_show(sh_arena *a, const st_value *v);

/* Asserts that v equals the item written as JSON attributes (st_value_equal
 * with the normalised form), showing both when not. */
#define tl_assert_item(a, v, json)                                                                 \
	do {                                                                                       \
		const st_value *tl_want_ = tl_json_item((a), (json));                              \
		ck_assert_msg((v) != NULL && st_value_equal((v), tl_want_), "got %s\nwant %s",     \
		              tl_show((a), (v)), tl_show((a), tl_want_));                          \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */
/* ------------------------------------------------------------------------ */

/* Same type, same bytes, same order (stricter than st_value_equal: nothing
 * is compared as a number or a set). */
bool tl_same(const st_value *x, const st_value *y);

/* Asserts got equals want by st_value_equal; want NULL: got must be NULL. */
void tl_assert_value_eq(const st_value *got, const st_value *want);

/* ------------------------------------------------------------------------ */
/* Random values (in tl_arena), from the tl_rand generator state *st          */
/* ------------------------------------------------------------------------ */

/* Any value at nesting level depth (1: an attribute): short S and B over a
 * small alphabet, numbers of 1..38 digits over the whole exponent range, sets
 * of distinct members, and below level 6 also L and M. */
st_value tl_rand_value(uint64_t *st, int depth);
/* A normalised item of 0..7 attributes "attr<i>". */
st_value tl_rand_item(uint64_t *st);

#endif
