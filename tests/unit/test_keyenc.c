/* Key encoding: layout, order preservation (seeded property test), begins_with
 * prefixes, truncation of long sort keys, partition grouping, prefix ends. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/keyenc.h"
#define TL_RAW_VALUE_NAMES
#include "tests/lib/tl_values.h"

static size_t enc(uint8_t *buf, const st_value *v)
{
	size_t n = st_key_encode_scalar(buf, 4096, v);
	ck_assert_uint_gt(n, 0);
	return n;
}

static int sgn(int x)
{
	return x < 0 ? -1 : x > 0;
}

static int memcmp_len(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? memcmp(a, b, n) : 0;
	if (c != 0)
		return sgn(c);
	return an < bn ? -1 : an > bn;
}

static void expect_bytes(const st_value *v, const char *hex)
{
	uint8_t buf[64];
	size_t n = enc(buf, v);
	char got[200] = "";
	for (size_t i = 0; i < n; i++)
		snprintf(got + 2 * i, sizeof(got) - 2 * i, "%02x", buf[i]);
	ck_assert_str_eq(got, hex);
}

START_TEST(test_layout)
{
	st_key k;
	st_key_table(&k, 0x01020304, 0x0506);
	ck_assert_uint_eq(k.len, 6);
	ck_assert_mem_eq(k.b, "\x01\x02\x03\x04\x05\x06", 6);
	st_key_hash_bound(&k, 0x01020304, 0x0506, 0x1122334455667788ULL);
	ck_assert_uint_eq(k.len, 14);
	ck_assert_mem_eq(k.b + 6, "\x11\x22\x33\x44\x55\x66\x77\x88", 8);

	st_value pk = raw(ST_S, "user#1", 6);
	st_key_partition(&k, 7, 0, &pk);
	ck_assert_uint_eq(k.len, ST_KEY_HEADER);
	uint64_t h = st_key_hash(7, &pk), be = 0;
	for (int i = 0; i < 8; i++)
		be = be << 8 | k.b[6 + i];
	ck_assert_uint_eq(h, be);
	/* The on-disk format is pinned: seed and digest must never change. */
	ck_assert_uint_eq(h, 0xb3d9b27e480e8f5dULL);

	/* Equal numbers address the same partition; tables are separate. */
	st_value n1 = N("1"), n2 = N("1.0"), n3 = N("2");
	ck_assert_uint_eq(st_key_hash(7, &n1), st_key_hash(7, &n2));
	ck_assert_uint_ne(st_key_hash(7, &n1), st_key_hash(7, &n3));
	ck_assert_uint_ne(st_key_hash(7, &pk), st_key_hash(8, &pk));
	st_value b = raw(ST_B, "user#1", 6);
	ck_assert_uint_eq(st_key_hash(7, &b), h); /* canonical bytes, type not hashed */

	/* Item key = partition header + sort key encoding. */
	st_value sk = raw(ST_S, "a\0b", 3);
	st_key it;
	st_key_item(&it, 7, 0, &pk, &sk);
	ck_assert_uint_eq(it.len, ST_KEY_HEADER + 6);
	ck_assert_mem_eq(it.b, k.b, ST_KEY_HEADER);
	ck_assert_mem_eq(it.b + ST_KEY_HEADER,
	                 "a\x00\xff"
	                 "b\x00\x00",
	                 6);
	st_key_item(&it, 7, 0, &pk, NULL);
	ck_assert_uint_eq(it.len, ST_KEY_HEADER);

	/* Number encodings, byte by byte. */
	expect_bytes(&n1, "038214"); /* +, exp 1, pair 10 last */
	st_value m1 = N("-1");
	expect_bytes(&m1, "017deb");
	st_value z = N("0");
	expect_bytes(&z, "02");
	st_value n123 = N("123");
	expect_bytes(&n123, "038419"
	                    "3c"); /* exp 3, pair 12 more (25), pair 30 last (60) */
	st_value s0 = raw(ST_S, "", 0);
	expect_bytes(&s0, "0000");
	st_value bff = raw(ST_B, "\xff\x00", 2);
	expect_bytes(&bff, "ff00ff0000");
}
END_TEST

/* Random values of one type: small alphabets so prefixes and repeats are common. */
static st_value random_bytes_value(uint64_t *st, st_type t, st_value *pool, int npool)
{
	static const uint8_t alpha[] = {0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0xfe, 0xff};
	uint8_t buf[40];
	size_t n = 0;
	if (npool > 0 && tl_rand(st) % 3 == 0) {
		/* extend or cut an earlier value: prefixes of each other */
		const st_value *p = &pool[tl_rand(st) % (uint64_t)npool];
		n = p->u.str.len;
		memcpy(buf, p->u.str.ptr, n);
		if (tl_rand(st) % 2 && n > 0)
			n = tl_rand(st) % n;
		else
			while (n < sizeof(buf) && tl_rand(st) % 2)
				buf[n++] = alpha[tl_rand(st) % sizeof(alpha)];
	} else {
		n = tl_rand(st) % 12;
		for (size_t i = 0; i < n; i++)
			buf[i] = alpha[tl_rand(st) % sizeof(alpha)];
	}
	return raw(t, buf, n);
}

static st_value random_number(uint64_t *st, st_value *pool, int npool)
{
	static const char *const special[] = {
	    "0",
	    "-0",
	    "1",
	    "1.0",
	    "-1",
	    "1E-130",
	    "-1E-130",
	    "9.9999999999999999999999999999999999999E+125",
	    "-9.9999999999999999999999999999999999999E+125",
	    "1.2345678901234567890123456789012345678",
	    "1.2345678901234567890123456789012345679",
	    "-1.2345678901234567890123456789012345678",
	    "-1.2345678901234567890123456789012345679",
	    "12345678901234567890123456789012345678",
	    "12345678901234567890123456789012345679",
	    "0.1",
	    "0.11",
	    "0.12",
	    "0.1000000000000000000000000000000000001",
	    "10",
	    "100",
	    "99",
	    "1.5e10",
	    "1.5e11",
	    "-1.5e10",
	    "-1.5e11",
	};
	uint64_t r = tl_rand(st) % 10;
	if (r == 0)
		return N(special[tl_rand(st) % (sizeof(special) / sizeof(special[0]))]);
	char text[ST_NUM_MAX_TEXT];
	if (r == 1 && npool > 0) {
		/* the same digits as an earlier value, another exponent or sign */
		const st_value *p = &pool[tl_rand(st) % (uint64_t)npool];
		st_num n;
		ck_assert_int_eq(st_num_parse(p->u.str.ptr, p->u.str.len, &n, NULL), SHOAL_OK);
		if (n.sign == 0)
			return N("0");
		if (tl_rand(st) % 2)
			n.exp = (int16_t)(-129 + (int)(tl_rand(st) % 256));
		else
			n.sign = (int8_t)-n.sign;
		st_num_format(&n, text);
		return N(text);
	}
	if (r == 2 && npool > 0) {
		/* an earlier value with its last digit changed: differ at the end */
		const st_value *p = &pool[tl_rand(st) % (uint64_t)npool];
		st_num n;
		ck_assert_int_eq(st_num_parse(p->u.str.ptr, p->u.str.len, &n, NULL), SHOAL_OK);
		if (n.sign == 0 || n.ndigits == ST_NUM_MAX_DIGITS)
			return *p;
		n.d[n.ndigits++] = (uint8_t)(1 + tl_rand(st) % 9);
		st_num_format(&n, text);
		return N(text);
	}
	/* sign 0.DDD e exp, with a leading non-zero digit: any valid exponent */
	int nd = 1 + (int)(tl_rand(st) % 38);
	int p = 0;
	if (tl_rand(st) % 2)
		text[p++] = '-';
	text[p++] = '0';
	text[p++] = '.';
	for (int i = 0; i < nd; i++)
		text[p++] = (char)('0' + (i == 0 ? 1 + tl_rand(st) % 9 : tl_rand(st) % 10));
	int e =
	    tl_rand(st) % 4 == 0 ? -129 + (int)(tl_rand(st) % 256) : -5 + (int)(tl_rand(st) % 10);
	snprintf(text + p, sizeof(text) - (size_t)p, "e%d", e);
	return N(text);
}

typedef struct encval {
	st_value v;
	uint8_t e[128];
	size_t n;
} encval;

static int by_encoding(const void *a, const void *b)
{
	const encval *x = a, *y = b;
	return memcmp_len(x->e, x->n, y->e, y->n);
}

static void check_order(encval *vals, int n, uint64_t *st)
{
	for (int i = 0; i < n; i++) {
		vals[i].n = st_key_encode_scalar(vals[i].e, sizeof(vals[i].e), &vals[i].v);
		ck_assert_uint_gt(vals[i].n, 0);
	}
	/* Random pairs: sign(memcmp) == sign(cmp). */
	for (int k = 0; k < 20000; k++) {
		encval *a = &vals[tl_rand(st) % (uint64_t)n], *b = &vals[tl_rand(st) % (uint64_t)n];
		int c = sgn(st_value_cmp(&a->v, &b->v));
		int e = memcmp_len(a->e, a->n, b->e, b->n);
		ck_assert_msg(c == e, "cmp %d, memcmp %d for %.*s / %.*s", c, e,
		              (int)a->v.u.str.len, a->v.u.str.ptr, (int)b->v.u.str.len,
		              b->v.u.str.ptr);
	}
	/* All of them: in encoding order, neighbours are in value order and
	 * equal encodings are exactly equal values. */
	qsort(vals, (size_t)n, sizeof(encval), by_encoding);
	for (int i = 1; i < n; i++) {
		int c = st_value_cmp(&vals[i - 1].v, &vals[i].v);
		int e = memcmp_len(vals[i - 1].e, vals[i - 1].n, vals[i].e, vals[i].n);
		ck_assert_int_le(e, 0);
		ck_assert_int_eq(sgn(c), e);
	}
	/* Self-delimiting: no encoding is a proper prefix of another. */
	for (int i = 1; i < n; i++) {
		if (vals[i - 1].n < vals[i].n)
			ck_assert(memcmp(vals[i - 1].e, vals[i].e, vals[i - 1].n) != 0);
	}
}

START_TEST(test_order_property)
{
	uint64_t st = tl_seed();
	enum { NV = 3000 };
	encval *vals = calloc(NV, sizeof(encval));
	st_value *pool = calloc(NV, sizeof(st_value));
	static const st_type types[] = {ST_S, ST_B, ST_N};
	for (int t = 0; t < 3; t++) {
		for (int i = 0; i < NV; i++) {
			if (types[t] == ST_N)
				pool[i] = random_number(&st, pool, i);
			else
				pool[i] = random_bytes_value(&st, types[t], pool, i);
			vals[i].v = pool[i];
		}
		check_order(vals, NV, &st);
	}
	free(vals);
	free(pool);
}
END_TEST

START_TEST(test_equal_numbers_encode_identically)
{
	static const char *const same[][2] = {
	    {"1", "1.0"},           {"1e3", "1000"},        {"-0", "0"},
	    {"0.0", "0e5"},         {"+5", "5.000"},        {".5", "0.50"},
	    {"-1.5e-3", "-0.0015"}, {"1E-130", "0.1e-129"},
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		st_value a = N(same[i][0]), b = N(same[i][1]);
		uint8_t ea[64], eb[64];
		size_t na = enc(ea, &a), nb = enc(eb, &b);
		ck_assert_uint_eq(na, nb);
		ck_assert_mem_eq(ea, eb, na);
		st_key ka, kb;
		st_key_item(&ka, 1, 0, &a, &b);
		st_key_item(&kb, 1, 0, &b, &a);
		ck_assert_uint_eq(ka.len, kb.len);
		ck_assert_mem_eq(ka.b, kb.b, ka.len);
	}
}
END_TEST

static bool starts_with(const st_value *v, const st_value *p)
{
	return v->u.str.len >= p->u.str.len &&
	       (p->u.str.len == 0 || memcmp(v->u.str.ptr, p->u.str.ptr, p->u.str.len) == 0);
}

START_TEST(test_begins_with_prefix)
{
	uint64_t st = tl_seed() ^ 1;
	enum { NV = 600 };
	st_value pool[NV];
	for (int i = 0; i < NV; i++)
		pool[i] = random_bytes_value(&st, i % 2 ? ST_S : ST_B, pool, i);
	for (int k = 0; k < 20000; k++) {
		const st_value *v = &pool[tl_rand(&st) % NV];
		st_value p;
		if (tl_rand(&st) % 2) {
			size_t cut = v->u.str.len ? tl_rand(&st) % (v->u.str.len + 1) : 0;
			p = raw(v->type, v->u.str.ptr, cut);
		} else {
			p = pool[tl_rand(&st) % NV];
			p.type = v->type;
		}
		st_key kp, kv;
		kp.len = kv.len = 0;
		ck_assert(st_key_append_scalar(&kp, &p, true));
		ck_assert(st_key_append_scalar(&kv, v, false));
		bool enc_prefix = kp.len <= kv.len && memcmp(kp.b, kv.b, kp.len) == 0;
		ck_assert_int_eq(enc_prefix, starts_with(v, &p));
		/* The prefix encoding plus terminator is the full encoding. */
		st_key full;
		full.len = 0;
		st_key_append_scalar(&full, &p, false);
		ck_assert_uint_eq(full.len, kp.len + 2);
		ck_assert_mem_eq(full.b, kp.b, kp.len);
	}
}
END_TEST

static st_value long_value(st_type t, size_t n, char fill, size_t tail_at, char tail)
{
	char *buf = sh_arena_alloc(&tl_arena, n);
	memset(buf, fill, n);
	if (tail_at < n)
		buf[tail_at] = tail;
	return raw(t, buf, n);
}

START_TEST(test_truncation)
{
	st_value pk = raw(ST_S, "p", 1);
	st_key k1, k2, ks;
	/* 1024-byte sort keys differing only near the end. */
	st_value a = long_value(ST_S, 1024, 'x', 1000, 'a');
	st_value b = long_value(ST_S, 1024, 'x', 1000, 'b');
	st_key_item(&k1, 3, 0, &pk, &a);
	st_key_item(&k2, 3, 0, &pk, &b);
	ck_assert_uint_eq(k1.len, ST_KEY_MAX);
	ck_assert_uint_eq(k2.len, ST_KEY_MAX);
	ck_assert(st_key_truncated(k1.b, k1.len));
	ck_assert_mem_eq(k1.b, k2.b, ST_KEY_HEADER + ST_KEY_SK_INLINE);
	ck_assert(memcmp(k1.b, k2.b, ST_KEY_MAX) != 0);
	/* Deterministic. */
	st_key k1b;
	st_key_item(&k1b, 3, 0, &pk, &a);
	ck_assert_mem_eq(k1.b, k1b.b, ST_KEY_MAX);
	/* Binary with zero bytes doubles in encoding: 300 zeros -> 602 bytes. */
	st_value z = long_value(ST_B, 300, '\0', 300, 0);
	st_key_item(&ks, 3, 0, &pk, &z);
	ck_assert_uint_eq(ks.len, ST_KEY_MAX);
	/* Just under and just over the inline limit. */
	st_value fit = long_value(ST_S, ST_KEY_SK_INLINE - 2, 'y', 0, 'y');
	st_key_item(&ks, 3, 0, &pk, &fit);
	ck_assert_uint_eq(ks.len, ST_KEY_HEADER + ST_KEY_SK_INLINE);
	ck_assert(!st_key_truncated(ks.b, ks.len));
	st_value over = long_value(ST_S, ST_KEY_SK_INLINE - 1, 'y', 0, 'y');
	st_key_item(&ks, 3, 0, &pk, &over);
	ck_assert_uint_eq(ks.len, ST_KEY_MAX);
	/* A truncated key still sorts correctly against untruncated ones whose
	 * values differ within the inline prefix. */
	st_value small = long_value(ST_S, 10, 'x', 5, 'a'), big = long_value(ST_S, 10, 'x', 5, 'z');
	st_key kl, kh;
	st_key_item(&kl, 3, 0, &pk, &small);
	st_key_item(&kh, 3, 0, &pk, &big);
	ck_assert_int_lt(memcmp_len(kl.b, kl.len, k1.b, k1.len), 0); /* "xxxxxa.." < "xxx..x" */
	ck_assert_int_lt(memcmp_len(k1.b, k1.len, kh.b, kh.len), 0);
	/* st_key_encode_scalar: exact capacity works, one byte less does not. */
	uint8_t buf[4096];
	size_t n = st_key_encode_scalar(buf, sizeof(buf), &a);
	ck_assert_uint_eq(n, 1026);
	ck_assert_uint_eq(st_key_encode_scalar(buf, n, &a), n);
	ck_assert_uint_eq(st_key_encode_scalar(buf, n - 1, &a), 0);
	/* st_key_append_scalar stops at ST_KEY_MAX. */
	st_key_partition(&ks, 3, 0, &pk);
	ck_assert(!st_key_append_scalar(&ks, &a, false));
	ck_assert_uint_eq(ks.len, ST_KEY_MAX);
	ck_assert(!st_key_append_scalar(&ks, &small, false));
	ck_assert_uint_eq(ks.len, ST_KEY_MAX);
}
END_TEST

START_TEST(test_partitions_do_not_interleave)
{
	uint64_t st = tl_seed() ^ 2;
	st_value pks[4] = {raw(ST_S, "alpha", 5), raw(ST_S, "beta", 4), N("42"), N("-42")};
	enum { PER = 50 };
	st_key keys[4][PER];
	for (int p = 0; p < 4; p++) {
		for (int i = 0; i < PER; i++) {
			st_value sk = random_bytes_value(&st, ST_S, NULL, 0);
			if (i == 0)
				sk = long_value(ST_S, 1000, '\0', 1000,
				                0); /* truncated, all zeros */
			if (i == 1)
				sk = long_value(ST_S, 1000, '\xff', 1000, 0);
			st_key_item(&keys[p][i], 9, 2, &pks[p], &sk);
		}
	}
	for (int p = 0; p < 4; p++) {
		for (int q = p + 1; q < 4; q++) {
			int dir =
			    memcmp_len(keys[p][0].b, keys[p][0].len, keys[q][0].b, keys[q][0].len);
			ck_assert_int_ne(dir, 0);
			for (int i = 0; i < PER; i++)
				for (int j = 0; j < PER; j++)
					ck_assert_int_eq(memcmp_len(keys[p][i].b, keys[p][i].len,
					                            keys[q][j].b, keys[q][j].len),
					                 dir);
		}
	}
	/* Every key of a partition starts with its header, which starts with the
	 * table prefix; the hash bound of its own hash is <= every such key and
	 * the bound of hash + 1 is > every such key. */
	st_key hdr, tbl, lo, hi;
	st_key_table(&tbl, 9, 2);
	for (int p = 0; p < 4; p++) {
		st_key_partition(&hdr, 9, 2, &pks[p]);
		ck_assert_mem_eq(hdr.b, tbl.b, 6);
		uint64_t h = st_key_hash(9, &pks[p]);
		st_key_hash_bound(&lo, 9, 2, h);
		ck_assert(h != UINT64_MAX);
		st_key_hash_bound(&hi, 9, 2, h + 1);
		for (int i = 0; i < PER; i++) {
			ck_assert_mem_eq(keys[p][i].b, hdr.b, ST_KEY_HEADER);
			ck_assert_int_le(memcmp_len(lo.b, lo.len, keys[p][i].b, keys[p][i].len), 0);
			ck_assert_int_gt(memcmp_len(hi.b, hi.len, keys[p][i].b, keys[p][i].len), 0);
		}
	}
}
END_TEST

START_TEST(test_prefix_end)
{
	st_key k;
	k.len = 4;
	memcpy(k.b, "\x01\x02\xff\xff", 4);
	ck_assert(st_key_prefix_end(&k));
	ck_assert_uint_eq(k.len, 2);
	ck_assert_mem_eq(k.b, "\x01\x03", 2);
	k.len = 3;
	memcpy(k.b, "\xff\xff\xff", 3);
	ck_assert(!st_key_prefix_end(&k));
	k.len = 0;
	ck_assert(!st_key_prefix_end(&k));
	k.len = 2;
	memcpy(k.b, "\x00\x00", 2);
	ck_assert(st_key_prefix_end(&k));
	ck_assert_uint_eq(k.len, 2);
	ck_assert_mem_eq(k.b, "\x00\x01", 2);

	/* Property: end(P) is greater than every key starting with P and no
	 * greater than any key above them. */
	uint64_t st = tl_seed() ^ 3;
	for (int t = 0; t < 5000; t++) {
		st_key p, e, x;
		p.len = (uint16_t)(1 + tl_rand(&st) % 6);
		for (int i = 0; i < p.len; i++)
			p.b[i] = (uint8_t)(tl_rand(&st) % 3 == 0 ? 0xff : tl_rand(&st) % 256);
		e = p;
		if (!st_key_prefix_end(&e))
			continue;
		x = p;
		size_t extra = tl_rand(&st) % 4;
		for (size_t i = 0; i < extra; i++)
			x.b[x.len++] = (uint8_t)tl_rand(&st);
		ck_assert_int_lt(memcmp_len(x.b, x.len, e.b, e.len), 0);
		ck_assert_int_gt(memcmp_len(e.b, e.len, p.b, p.len), 0);
		/* Nothing strictly between P's range and end(P) is a non-P key:
		 * any key < end(P) and >= P starts with P. */
		st_key y;
		y.len = (uint16_t)(1 + tl_rand(&st) % 8);
		for (int i = 0; i < y.len; i++)
			y.b[i] = i < p.len && tl_rand(&st) % 2 ? p.b[i] : (uint8_t)tl_rand(&st);
		if (memcmp_len(y.b, y.len, p.b, p.len) >= 0 &&
		    memcmp_len(y.b, y.len, e.b, e.len) < 0)
			ck_assert(y.len >= p.len && memcmp(y.b, p.b, p.len) == 0);
	}
	/* For an item collection: every key of a partition is below the prefix
	 * end of its header. */
	st_value pk = raw(ST_B, "\xff\xff", 2), sk = raw(ST_B, "\xff\xff\xff", 3);
	st_key hdr, item;
	st_key_partition(&hdr, 0xffffffff, 0xffff, &pk);
	st_key_item(&item, 0xffffffff, 0xffff, &pk, &sk);
	ck_assert(st_key_prefix_end(&hdr));
	ck_assert_int_lt(memcmp_len(item.b, item.len, hdr.b, hdr.len), 0);
}
END_TEST

static Suite *keyenc_suite(void)
{
	return tl_suite("keyenc", tl_arena_setup, tl_arena_teardown, 60,
	                TL_TESTS(test_layout, test_order_property,
	                         test_equal_numbers_encode_identically, test_begins_with_prefix,
	                         test_truncation, test_partitions_do_not_interleave,
	                         test_prefix_end));
}

TL_MAIN(keyenc_suite)
