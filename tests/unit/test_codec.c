/* Item codec: round trips of every type, random items, and robustness against
 * truncated, bit-flipped and hostile input (run under ASan). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/codec.h"
#define TL_RAW_VALUE_NAMES
#include "tests/lib/tl_values.h"

static void normalize(st_value *v)
{
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_value_normalize(&tl_arena, v, msg);
	ck_assert_msg(rc == SHOAL_OK, "normalize: %s", msg);
}

/* Encodes, decodes, checks equality and that re-encoding gives the same bytes. */
static st_value round_trip(const st_value *item, size_t *enc_len)
{
	uint8_t *buf, *buf2;
	size_t len, len2;
	ck_assert_int_eq(st_codec_encode(&tl_arena, item, &buf, &len), SHOAL_OK);
	st_value out;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_codec_decode(&tl_arena, buf, len, &out, msg);
	ck_assert_msg(rc == SHOAL_OK, "decode: %s", msg);
	ck_assert(st_value_equal(item, &out));
	ck_assert_int_eq(st_codec_encode(&tl_arena, &out, &buf2, &len2), SHOAL_OK);
	ck_assert_uint_eq(len, len2);
	ck_assert_mem_eq(buf, buf2, len);
	if (enc_len != NULL)
		*enc_len = len;
	return out;
}

static st_value all_types(void)
{
	unsigned char bin[4] = {0, 1, 0x80, 0xff};
	st_value item =
	    MAP(14, "s", S("héllo"), "empty", S(""), "n", N("-1.50"), "zero", N("0"), "b",
	        B(bin, 4), "eb", B("", 0), "t", BOOLV(true), "f", BOOLV(false), "z", NUL(), "l",
	        LIST(ST_L, 4, N("1"), S("x"), LIST(ST_L, 0), MAP(1, "k", BOOLV(false))), "m",
	        MAP(3, "y", LIST(ST_SS, 2, S("b"), S("")), "x", MAP(0), "w",
	            LIST(ST_BS, 2, B("\xff", 1), B("", 0))),
	        "ss", LIST(ST_SS, 3, S("b"), S("a"), S("ab")), "ns",
	        LIST(ST_NS, 4, N("10"), N("-1"), N("1e-130"),
	             N("9.9999999999999999999999999999999999999e125")),
	        "bs", LIST(ST_BS, 2, B("\x01\x02", 2), B("\x00", 1)));
	normalize(&item);
	return item;
}

START_TEST(test_round_trip_types)
{
	st_value item = all_types();
	st_value out = round_trip(&item, NULL);
	ck_assert_uint_eq(out.u.map.n, 14);
	ck_assert(tl_str_is(st_map_get(&out, "n", 1), "-1.5"));
	ck_assert(tl_str_is(st_map_get(&out, "zero", 4), "0"));
	ck_assert(tl_str_is(st_map_get(&out, "empty", 5), ""));
	ck_assert_int_eq(st_map_get(&out, "t", 1)->u.boolean, true);
	ck_assert_int_eq(st_map_get(&out, "f", 1)->u.boolean, false);
	ck_assert_int_eq(st_map_get(&out, "z", 1)->type, ST_NULL);
	const st_value *ns = st_map_get(&out, "ns", 2);
	ck_assert_int_eq(ns->type, ST_NS);
	ck_assert(tl_str_is(&ns->u.list.v[0], "-1"));
	ck_assert(
	    tl_str_is(&ns->u.list.v[3],
	              "999999999999999999999999999999999999990000000000000000000000000000000000"
	              "000000000000000000000000000000000000000000000000000000"));
	/* An empty item. */
	st_value empty = MAP(0);
	size_t len;
	round_trip(&empty, &len);
	ck_assert_uint_eq(len, 2);
}
END_TEST

START_TEST(test_golden_bytes)
{
	st_value item = MAP(2, "b", BOOLV(true), "a", N("-1.5"));
	normalize(&item);
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
	static const uint8_t want[] = {0x01, 0x02, 0x01, 'a', 0x02, 0x82,
	                               0x82, 0x15, 0x01, 'b', 0x05};
	ck_assert_uint_eq(len, sizeof(want));
	ck_assert_mem_eq(buf, want, len);
	/* 38 digits at any exponent take 22 bytes after the tag. */
	st_value big = MAP(1, "n", N("-1.2345678901234567890123456789012345678E-130"));
	normalize(&big);
	ck_assert_int_eq(st_codec_encode(&tl_arena, &big, &buf, &len), SHOAL_OK);
	ck_assert_uint_eq(len, 1 + 1 + 2 + 1 + 1 + 1 + 19);
}
END_TEST

START_TEST(test_depth)
{
	st_value ok = MAP(1, "d", deep_map(31, S("leaf")));
	normalize(&ok);
	round_trip(&ok, NULL);
	st_value l = N("7");
	for (int i = 0; i < 31; i++)
		l = LIST(ST_L, 1, l);
	st_value okl = MAP(1, "l", l);
	normalize(&okl);
	round_trip(&okl, NULL);
	/* One level more is not an item: encode refuses, and a hand-made
	 * encoding of it does not decode. */
	st_value deep = MAP(1, "d", deep_map(32, S("leaf")));
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, &deep, &buf, &len), SHOAL_E_INTERNAL);
	uint8_t hand[200];
	size_t n = 0;
	hand[n++] = 0x01;
	hand[n++] = 1;
	hand[n++] = 1;
	hand[n++] = 'd';
	for (int i = 0; i < 32; i++) {
		hand[n++] = 0x08; /* L of one */
		hand[n++] = 1;
	}
	hand[n++] = 0x06;
	st_value out;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_codec_decode(&tl_arena, hand, n, &out, msg), SHOAL_E_INTERNAL);
	ck_assert_str_eq(msg, "corrupt item: nested too deeply");
	/* With 31 lists it is fine. */
	memmove(hand + 4, hand + 6, n - 6);
	ck_assert_int_eq(st_codec_decode(&tl_arena, hand, n - 2, &out, msg), SHOAL_OK);
}
END_TEST

START_TEST(test_decode_copies)
{
	st_value item = all_types();
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
	uint8_t *mine = malloc(len);
	memcpy(mine, buf, len);
	st_value out;
	ck_assert_int_eq(st_codec_decode(&tl_arena, mine, len, &out, NULL), SHOAL_OK);
	memset(mine, 0xee, len);
	free(mine);
	ck_assert(st_value_equal(&item, &out)); /* nothing points into the input */
}
END_TEST

/* ---- random items ------------------------------------------------------- */

START_TEST(test_random_round_trip)
{
	uint64_t st = tl_seed();
	for (int i = 0; i < 2000; i++) {
		st_value item = tl_rand_item(&st);
		round_trip(&item, NULL);
		if (i % 100 == 99)
			sh_arena_reset(&tl_arena);
	}
}
END_TEST

/* Decoding arbitrary bytes: OK with a valid item, or a clean corrupt-item error. */
static void decode_any(const uint8_t *buf, size_t len)
{
	sh_arena B2;
	sh_arena_init(&B2);
	st_value out;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_codec_decode(&B2, buf, len, &out, msg);
	if (rc == SHOAL_OK) {
		/* A valid, normalised item: normalising changes nothing, encoding works. */
		st_value copy;
		ck_assert_int_eq(st_value_copy(&B2, &out, &copy), SHOAL_OK);
		ck_assert_int_eq(st_value_normalize(&B2, &copy, msg), SHOAL_OK);
		ck_assert(st_value_equal(&out, &copy));
		uint8_t *enc;
		size_t elen;
		ck_assert_int_eq(st_codec_encode(&B2, &out, &enc, &elen), SHOAL_OK);
	} else {
		ck_assert_int_eq(rc, SHOAL_E_INTERNAL);
		ck_assert_msg(strncmp(msg, "corrupt item: ", 14) == 0, "message: %s", msg);
	}
	/* Never more memory than a small multiple of the input. */
	ck_assert_uint_le(B2.used, 64 * len + 4096);
	sh_arena_fini(&B2);
}

START_TEST(test_truncations)
{
	st_value item = all_types();
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
	for (size_t cut = 0; cut < len; cut++) {
		st_value out;
		char msg[SH_ERRMSG_SIZE] = "";
		uint8_t *piece = malloc(cut + 1); /* exact size so ASan sees overreads */
		memcpy(piece, buf, cut);
		ck_assert_int_eq(st_codec_decode(&tl_arena, piece, cut, &out, msg),
		                 SHOAL_E_INTERNAL);
		ck_assert(strncmp(msg, "corrupt item: ", 14) == 0);
		free(piece);
	}
	/* And every truncation of random items. */
	uint64_t st = tl_seed() ^ 7;
	for (int i = 0; i < 200; i++) {
		st_value it = tl_rand_item(&st);
		ck_assert_int_eq(st_codec_encode(&tl_arena, &it, &buf, &len), SHOAL_OK);
		for (size_t cut = 0; cut < len; cut++) {
			uint8_t *piece = malloc(cut + 1);
			memcpy(piece, buf, cut);
			decode_any(piece, cut);
			free(piece);
		}
	}
	/* Trailing bytes. */
	ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
	uint8_t *more = malloc(len + 1);
	memcpy(more, buf, len);
	more[len] = 0;
	st_value out;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_codec_decode(&tl_arena, more, len + 1, &out, msg), SHOAL_E_INTERNAL);
	ck_assert_str_eq(msg, "corrupt item: trailing bytes");
	free(more);
}
END_TEST

START_TEST(test_bit_flips)
{
	uint64_t st = tl_seed() ^ 11;
	int ok = 0, bad = 0;
	for (int i = 0; i < 3000; i++) {
		st_value item = i % 2 ? all_types() : tl_rand_item(&st);
		uint8_t *buf;
		size_t len;
		ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
		uint8_t *mut = malloc(len);
		memcpy(mut, buf, len);
		int flips = 1 + (int)(tl_rand(&st) % 3);
		for (int f = 0; f < flips; f++) {
			size_t at = tl_rand(&st) % len;
			if (tl_rand(&st) % 2)
				mut[at] ^= (uint8_t)(1u << (tl_rand(&st) % 8));
			else
				mut[at] = (uint8_t)tl_rand(&st);
		}
		sh_arena B2;
		sh_arena_init(&B2);
		st_value out;
		int rc = st_codec_decode(&B2, mut, len, &out, NULL);
		sh_arena_fini(&B2);
		if (rc == SHOAL_OK)
			ok++;
		else
			bad++;
		decode_any(mut, len);
		free(mut);
		if (i % 100 == 99)
			sh_arena_reset(&tl_arena);
	}
	ck_assert_int_gt(bad, 0);
	ck_assert_int_eq(ok + bad, 3000);
}
END_TEST

START_TEST(test_hostile)
{
	/* Huge counts and lengths must not allocate or read past the end. */
	static const uint8_t cases[][12] = {
	    {0x01, 0xff, 0xff, 0xff, 0xff, 0x0f},                        /* 4G attributes */
	    {0x01, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'},             /* 4G name */
	    {0x01, 0x01, 0x01, 'a', 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, /* 4G list */
	    {0x01, 0x01, 0x01, 'a', 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f}, /* 4G string */
	    {0x01, 0x01, 0x01, 'a', 0x0a, 0xff, 0xff, 0x7f},             /* 2M numbers */
	    {0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},                  /* varint too long */
	    {0x01, 0xff, 0xff, 0xff, 0xff, 0x1f},                        /* varint > 32 bits */
	    {0x02, 0x00},                                                /* unknown version */
	    {0x01, 0x01, 0x01, 'a', 0x0c},                               /* unknown tag */
	    {0x01, 0x01, 0x01, 'a', 0x00},                               /* tag 0 */
	    {0x01, 0x01, 0x01, 'a', 0x09, 0x00},                         /* empty set */
	    {0x01, 0x01, 0x00, 0x06},                                    /* empty name */
	    {0x01, 0x02, 0x01, 'b', 0x06, 0x01, 'a', 0x06},              /* names out of order */
	    {0x01, 0x02, 0x01, 'a', 0x06, 0x01, 'a', 0x06},              /* duplicate name */
	    {0x01, 0x01, 0x01, 'a', 0x09, 0x02, 0x01, 'b', 0x01, 'a'},   /* set out of order */
	    {0x01, 0x01, 0x01, 'a', 0x0b, 0x02, 0x01, 'a', 0x01, 'a'},   /* set duplicate */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x01, 0x82, 0x10},             /* odd digits, pad ok: 1 */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x01, 0x82, 0x11},             /* pad nibble not zero */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x02, 0x82, 0x10},             /* trailing zero digit */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x02, 0x82, 0x0a}, /* leading zero, nibble a */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x27, 0x82, 0x11}, /* 39 digits */
	    {0x01, 0x01, 0x01, 'a', 0x02, 0x41, 0x82, 0x10}, /* reserved bit */
	    {0x01, 0x01, 0x01, 'a', 0x01, 0x01, 0xc0},       /* bad UTF-8 */
	    {0x01, 0x01, 0x01, 0xff, 0x06},                  /* bad UTF-8 name */
	};
	static const size_t lens[] = {6, 8, 10, 10, 8, 7, 6, 2, 5, 5, 6, 4,
	                              8, 8, 10, 10, 8, 8, 8, 8, 8, 8, 7, 5};
	ck_assert_uint_eq(sizeof(lens) / sizeof(lens[0]), sizeof(cases) / sizeof(cases[0]));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *buf = malloc(lens[i]);
		memcpy(buf, cases[i], lens[i]);
		sh_arena B2;
		sh_arena_init(&B2);
		st_value out;
		char msg[SH_ERRMSG_SIZE] = "";
		int rc = st_codec_decode(&B2, buf, lens[i], &out, msg);
		if (i == 16) {
			ck_assert_int_eq(rc, SHOAL_OK);
			ck_assert(tl_str_is(&out.u.map.a[0].value, "1"));
		} else {
			ck_assert_msg(rc == SHOAL_E_INTERNAL, "case %zu decoded", i);
			ck_assert(strncmp(msg, "corrupt item: ", 14) == 0);
		}
		ck_assert_uint_le(B2.used, 4096);
		sh_arena_fini(&B2);
		free(buf);
	}
	st_value out;
	ck_assert_int_eq(st_codec_decode(&tl_arena, NULL, 0, &out, NULL), SHOAL_E_INTERNAL);
	/* Pure noise. */
	uint64_t st = tl_seed() ^ 13;
	for (int i = 0; i < 5000; i++) {
		size_t len = tl_rand(&st) % 64;
		uint8_t *buf = malloc(len + 1);
		for (size_t k = 0; k < len; k++)
			buf[k] =
			    (uint8_t)(tl_rand(&st) % 16 == 0 ? tl_rand(&st) : tl_rand(&st) % 12);
		if (len > 0)
			buf[0] = 0x01;
		decode_any(buf, len);
		free(buf);
	}
}
END_TEST

START_TEST(test_nomem)
{
	st_value item = all_types();
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_codec_encode(&tl_arena, &item, &buf, &len), SHOAL_OK);
	for (long k = 1;; k++) {
		sh_arena B2;
		sh_arena_init(&B2);
		sh_fault_arm(SH_FAULT_ALLOC, k, false);
		st_value out;
		uint8_t *b2;
		size_t l2;
		int rc = st_codec_decode(&B2, buf, len, &out, NULL);
		int rc2 = st_codec_encode(&B2, &item, &b2, &l2);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		sh_arena_fini(&B2);
		if (!fired) {
			ck_assert_int_eq(rc, SHOAL_OK);
			ck_assert_int_eq(rc2, SHOAL_OK);
			break;
		}
		ck_assert(rc == SHOAL_E_NOMEM || rc2 == SHOAL_E_NOMEM);
		ck_assert(rc == SHOAL_OK || rc == SHOAL_E_NOMEM);
		ck_assert(rc2 == SHOAL_OK || rc2 == SHOAL_E_NOMEM);
	}
}
END_TEST

static Suite *codec_suite(void)
{
	return tl_suite("codec", tl_arena_setup, tl_arena_teardown, 60,
	                TL_TESTS(test_round_trip_types, test_golden_bytes, test_depth,
	                         test_decode_copies, test_random_round_trip, test_truncations,
	                         test_bit_flips, test_hostile, test_nomem));
}

TL_MAIN(codec_suite)
