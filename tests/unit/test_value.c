/* Values: type names, maps, copy, normalisation (every rule and message),
 * equality, ordering and DynamoDB's size rules. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/storage.h"
#define TL_RAW_VALUE_NAMES
#include "tests/lib/tl_values.h"

#define INVALID "One or more parameter values were invalid: "
#define NEST                                                                                       \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"

static void norm_ok(st_value *v)
{
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_value_normalize(&tl_arena, v, msg);
	ck_assert_msg(rc == SHOAL_OK, "normalize failed: %s", msg);
}

static void norm_fails(st_value v, const char *want)
{
	char msg[SH_ERRMSG_SIZE] = "";
	ck_assert_int_eq(st_value_normalize(&tl_arena, &v, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, want);
}

START_TEST(test_type_names)
{
	static const char *const names[] = {"S", "N", "B",  "BOOL", "NULL",
	                                    "M", "L", "SS", "NS",   "BS"};
	for (int t = ST_S; t <= ST_BS; t++) {
		ck_assert_str_eq(st_type_name((st_type)t), names[t - 1]);
		ck_assert_int_eq(st_type_parse(names[t - 1], strlen(names[t - 1])), t);
	}
	ck_assert_str_eq(st_type_name(ST_NONE), "");
	ck_assert_int_eq(st_type_parse("X", 1), ST_NONE);
	ck_assert_int_eq(st_type_parse("NULLX", 5), ST_NONE);
	ck_assert_int_eq(st_type_parse("NS", 1), ST_N); /* length-bounded */
	ck_assert_int_eq(st_type_parse("", 0), ST_NONE);
	ck_assert_int_eq(st_type_parse("s", 1), ST_NONE);
}
END_TEST

START_TEST(test_constructors)
{
	st_value *v = st_new_s(&tl_arena, "héllo");
	ck_assert_int_eq(v->type, ST_S);
	ck_assert(tl_str_is(v, "héllo"));
	v = st_new_n(&tl_arena, "+001.50e1");
	ck_assert_int_eq(v->type, ST_N);
	ck_assert(tl_str_is(v, "15"));
	ck_assert_ptr_null(st_new_n(&tl_arena, "abc"));
	ck_assert_ptr_null(st_new_n(&tl_arena, "1e200"));
	v = st_new_b(&tl_arena, "\0\xff", 2);
	ck_assert_int_eq(v->type, ST_B);
	ck_assert_uint_eq(v->u.str.len, 2);
	ck_assert_int_eq((unsigned char)v->u.str.ptr[1], 0xff);
	v = st_new_b(&tl_arena, NULL, 0);
	ck_assert_uint_eq(v->u.str.len, 0);
	v = st_new_map(&tl_arena, 4);
	ck_assert_int_eq(v->type, ST_M);
	ck_assert_uint_eq(v->u.map.n, 0);
	/* Out of memory gives NULL, never a crash. */
	sh_fault_arm(SH_FAULT_ALLOC, 1, true);
	sh_arena B2;
	sh_arena_init(&B2);
	ck_assert_ptr_null(st_new_s(&B2, "x"));
	ck_assert_ptr_null(st_new_n(&B2, "1"));
	ck_assert_ptr_null(st_new_map(&B2, 3));
	sh_fault_reset();
	sh_arena_fini(&B2);
}
END_TEST

static void check_sorted(const st_value *m)
{
	for (uint32_t i = 1; i < m->u.map.n; i++) {
		const st_attr *x = &m->u.map.a[i - 1], *y = &m->u.map.a[i];
		size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
		int c = memcmp(x->name, y->name, n);
		ck_assert(c < 0 || (c == 0 && x->name_len < y->name_len));
	}
}

START_TEST(test_map_set_get_remove)
{
	st_value *m = st_new_map(&tl_arena, 2);
	const char *names[] = {"b", "a", "ab", "ba", "\xff", "A", "aa", "a\0b"};
	size_t lens[] = {1, 1, 2, 2, 1, 1, 2, 3};
	for (int i = 0; i < 8; i++) {
		st_value *v = st_new_s(&tl_arena, "v");
		ck_assert_int_eq(st_map_set(&tl_arena, m, names[i], lens[i], v), SHOAL_OK);
		check_sorted(m);
	}
	ck_assert_uint_eq(m->u.map.n, 8);
	/* memcmp order, a prefix first: A a a\0b aa ab b ba \xff */
	ck_assert_uint_eq(m->u.map.a[0].name_len, 1);
	ck_assert_int_eq(m->u.map.a[0].name[0], 'A');
	ck_assert_uint_eq(m->u.map.a[1].name_len, 1);
	ck_assert_uint_eq(m->u.map.a[2].name_len, 3); /* "a\0b" */
	ck_assert_int_eq((unsigned char)m->u.map.a[7].name[0], 0xff);
	for (int i = 0; i < 8; i++)
		ck_assert_ptr_nonnull(st_map_get(m, names[i], lens[i]));
	ck_assert_ptr_null(st_map_get(m, "c", 1));
	ck_assert_ptr_null(st_map_get(m, "a\0", 2));
	ck_assert_ptr_null(st_map_get(m, "", 0));
	/* Replace in place. */
	st_value *n = st_new_n(&tl_arena, "7");
	ck_assert_int_eq(st_map_set(&tl_arena, m, "ab", 2, n), SHOAL_OK);
	ck_assert_uint_eq(m->u.map.n, 8);
	ck_assert_int_eq(st_map_get(m, "ab", 2)->type, ST_N);
	/* The value may alias one of the map's own attrs. */
	ck_assert_int_eq(st_map_set(&tl_arena, m, "zz", 2, st_map_get(m, "ab", 2)), SHOAL_OK);
	ck_assert(tl_str_is(st_map_get(m, "zz", 2), "7"));
	/* The name is copied. */
	char tmp[4] = "tmp";
	ck_assert_int_eq(st_map_set(&tl_arena, m, tmp, 3, n), SHOAL_OK);
	tmp[0] = 'x';
	ck_assert_ptr_nonnull(st_map_get(m, "tmp", 3));
	/* Remove. */
	st_map_remove(m, "ab", 2);
	ck_assert_ptr_null(st_map_get(m, "ab", 2));
	st_map_remove(m, "nope", 4);
	ck_assert_uint_eq(m->u.map.n, 9);
	st_map_remove(m, "A", 1);
	st_map_remove(m, "\xff", 1);
	check_sorted(m);
	ck_assert_uint_eq(m->u.map.n, 7);
	ck_assert_ptr_nonnull(st_map_get(m, "a\0b", 3));
	/* Out of memory on insert leaves the map unchanged. */
	sh_arena B2;
	sh_arena_init(&B2);
	sh_fault_arm(SH_FAULT_ALLOC, 1, true);
	ck_assert_int_eq(st_map_set(&B2, m, "new", 3, n), SHOAL_E_NOMEM);
	sh_fault_reset();
	ck_assert_uint_eq(m->u.map.n, 7);
	ck_assert_ptr_null(st_map_get(m, "new", 3));
	sh_arena_fini(&B2);
}
END_TEST

START_TEST(test_map_random)
{
	uint64_t st = tl_seed();
	st_value *m = st_new_map(&tl_arena, 0);
	bool present[64] = {false};
	for (int i = 0; i < 2000; i++) {
		int k = (int)(tl_rand(&st) % 64);
		char name[8];
		int len = snprintf(name, sizeof(name), "k%d", k);
		if (tl_rand(&st) % 3 == 0) {
			st_map_remove(m, name, (size_t)len);
			present[k] = false;
		} else {
			ck_assert_int_eq(
			    st_map_set(&tl_arena, m, name, (size_t)len, st_new_s(&tl_arena, name)),
			    SHOAL_OK);
			present[k] = true;
		}
		check_sorted(m);
	}
	uint32_t count = 0;
	for (int k = 0; k < 64; k++) {
		char name[8];
		int len = snprintf(name, sizeof(name), "k%d", k);
		const st_value *v = st_map_get(m, name, (size_t)len);
		ck_assert(present[k] == (v != NULL));
		if (v != NULL) {
			ck_assert(tl_str_is(v, name));
			count++;
		}
	}
	ck_assert_uint_eq(m->u.map.n, count);
}
END_TEST

static st_value sample_item(void)
{
	unsigned char bin[3] = {0, 1, 0xff};
	return MAP(10, "s", S("text"), "n", N("1.50"), "b", B(bin, 3), "t", BOOLV(true), "z", NUL(),
	           "l", LIST(ST_L, 2, N("2"), S("x")), "m", MAP(2, "y", BOOLV(false), "x", S("")),
	           "ss", LIST(ST_SS, 2, S("b"), S("a")), "ns",
	           LIST(ST_NS, 3, N("10"), N("-1"), N("1e-5")), "bs",
	           LIST(ST_BS, 2, B("\xff", 1), B("\x00", 1)));
}

START_TEST(test_copy)
{
	st_value item = sample_item();
	norm_ok(&item);
	st_value copy;
	ck_assert_int_eq(st_value_copy(&tl_arena, &item, &copy), SHOAL_OK);
	ck_assert(st_value_equal(&item, &copy));
	/* Deep: no memory shared. */
	ck_assert_ptr_ne(copy.u.map.a, item.u.map.a);
	const st_value *l = st_map_get(&copy, "l", 1);
	const st_value *l0 = st_map_get(&item, "l", 1);
	ck_assert_ptr_ne(l->u.list.v, l0->u.list.v);
	ck_assert_ptr_ne(l->u.list.v[1].u.str.ptr, l0->u.list.v[1].u.str.ptr);
	((char *)l->u.list.v[1].u.str.ptr)[0] = 'q';
	ck_assert(tl_str_is(&l0->u.list.v[1], "x"));
	ck_assert(!st_value_equal(&item, &copy));
	/* In place (dst == src) gives an independent copy too. */
	st_value again = item;
	ck_assert_int_eq(st_value_copy(&tl_arena, &again, &again), SHOAL_OK);
	ck_assert(st_value_equal(&item, &again));
	ck_assert_ptr_ne(again.u.map.a, item.u.map.a);
	/* Out of memory at every allocation: an error, never a crash. */
	for (long k = 1;; k++) {
		sh_arena B2;
		sh_arena_init(&B2);
		sh_fault_arm(SH_FAULT_ALLOC, k, false);
		int rc = st_value_copy(&B2, &item, &copy);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		sh_arena_fini(&B2);
		if (!fired) {
			ck_assert_int_eq(rc, SHOAL_OK);
			break;
		}
		ck_assert_int_eq(rc, SHOAL_E_NOMEM);
	}
}
END_TEST

START_TEST(test_normalize_canonical)
{
	st_value item = sample_item();
	norm_ok(&item);
	check_sorted(&item);
	ck_assert_uint_eq(item.u.map.n, 10);
	static const char *const order[] = {"b", "bs", "l", "m", "n", "ns", "s", "ss", "t", "z"};
	for (int i = 0; i < 10; i++) {
		ck_assert_uint_eq(item.u.map.a[i].name_len, strlen(order[i]));
		ck_assert(memcmp(item.u.map.a[i].name, order[i], strlen(order[i])) == 0);
	}
	ck_assert(tl_str_is(st_map_get(&item, "n", 1), "1.5"));
	const st_value *l = st_map_get(&item, "l", 1);
	ck_assert(tl_str_is(&l->u.list.v[0], "2")); /* lists keep their order */
	ck_assert(tl_str_is(&l->u.list.v[1], "x"));
	const st_value *m = st_map_get(&item, "m", 1);
	check_sorted(m);
	ck_assert_int_eq(m->u.map.a[0].name[0], 'x');
	const st_value *ss = st_map_get(&item, "ss", 2);
	ck_assert(tl_str_is(&ss->u.list.v[0], "a"));
	ck_assert(tl_str_is(&ss->u.list.v[1], "b"));
	const st_value *ns = st_map_get(&item, "ns", 2);
	ck_assert(tl_str_is(&ns->u.list.v[0], "-1"));
	ck_assert(tl_str_is(&ns->u.list.v[1], "0.00001"));
	ck_assert(tl_str_is(&ns->u.list.v[2], "10"));
	const st_value *bs = st_map_get(&item, "bs", 2);
	ck_assert_int_eq((unsigned char)bs->u.list.v[0].u.str.ptr[0], 0);
	ck_assert_int_eq((unsigned char)bs->u.list.v[1].u.str.ptr[0], 0xff);
	/* Idempotent. */
	st_value copy;
	ck_assert_int_eq(st_value_copy(&tl_arena, &item, &copy), SHOAL_OK);
	norm_ok(&copy);
	ck_assert(st_value_equal(&item, &copy));
	/* Scalars on their own. */
	st_value n = N("-00.0100");
	norm_ok(&n);
	ck_assert(tl_str_is(&n, "-0.01"));
	st_value e = S("");
	norm_ok(&e); /* empty strings are allowed */
	st_value eb = B("", 0);
	norm_ok(&eb);
	st_value em = MAP(0);
	norm_ok(&em);
	st_value el = LIST(ST_L, 0);
	norm_ok(&el);
	st_value utf = S("\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9");
	norm_ok(&utf);
}
END_TEST

START_TEST(test_normalize_errors)
{
	norm_fails(N("abc"), "The parameter cannot be converted to a numeric value: abc");
	norm_fails(N(""), "The parameter cannot be converted to a numeric value: ");
	norm_fails(N("1e126"), "Number overflow. Attempting to store a number with magnitude "
	                       "larger than supported range");
	norm_fails(MAP(1, "a", LIST(ST_NS, 2, N("1"), N("1e-131"))),
	           "Number underflow. Attempting to store a number with magnitude smaller than "
	           "supported range");
	norm_fails(
	    MAP(1, "a", MAP(1, "x", LIST(ST_L, 1, N("1234567890123456789012345678901234567890")))),
	    "Attempting to store more than 38 significant digits in a Number");
	norm_fails(LIST(ST_SS, 0), INVALID "An string set  may not be empty");
	norm_fails(LIST(ST_NS, 0), INVALID "An number set  may not be empty");
	norm_fails(LIST(ST_BS, 0), INVALID "Binary sets should not be empty");
	norm_fails(MAP(1, "x", LIST(ST_L, 1, LIST(ST_SS, 0))),
	           INVALID "An string set  may not be empty");
	st_value nul = NUL();
	nul.u.boolean = false;
	norm_fails(nul, INVALID "Null attribute value types must have the value of true");
	st_value none = {.type = ST_NONE};
	norm_fails(MAP(1, "a", none), "Supplied AttributeValue is empty, must contain exactly one "
	                              "of the supported datatypes");
	/* Duplicates, quoted as DynamoDB quotes them. */
	norm_fails(LIST(ST_SS, 2, S("a"), S("a")),
	           INVALID "Input collection [\"a\", \"a\"] contains duplicates.");
	norm_fails(LIST(ST_SS, 3, S("b"), S("a"), S("b")),
	           INVALID "Input collection [\"a\", \"b\", \"b\"] contains duplicates.");
	norm_fails(LIST(ST_SS, 5, S("d"), S("c"), S("d"), S("a"), S("c")), INVALID
	           "Input collection [\"c\", \"d\", \"d\", \"a\", \"c\"] contains duplicates.");
	norm_fails(LIST(ST_SS, 2, S("q\"\\"), S("q\"\\")),
	           INVALID "Input collection [\"q\\\"\\\\\", \"q\\\"\\\\\"] contains duplicates.");
	norm_fails(LIST(ST_BS, 3, B("\xff", 1), B("\0", 1), B("\0", 1)),
	           INVALID "Input collection [\"AA==\",\"/w==\",\"AA==\"]of type BS contains "
	                   "duplicates.");
	norm_fails(LIST(ST_BS, 2, B("abcd", 4), B("abcd", 4)),
	           INVALID "Input collection [\"YWJjZA==\",\"YWJjZA==\"]of type BS contains "
	                   "duplicates.");
	norm_fails(LIST(ST_NS, 3, N("2"), N("1"), N("2")),
	           INVALID "Input collection contains duplicates.");
	/* Duplicates after canonicalisation. */
	norm_fails(LIST(ST_NS, 2, N("1"), N("1.0")),
	           INVALID "Input collection contains duplicates.");
	norm_fails(LIST(ST_NS, 2, N("1e2"), N("100")),
	           INVALID "Input collection contains duplicates.");
	/* Members of the wrong type. */
	norm_fails(LIST(ST_SS, 1, N("1")), INVALID "A member of a SS set is of type N");
	/* Names. */
	norm_fails(MAP(1, "", S("x")), INVALID "Empty attribute name");
	norm_fails(MAP(1, "a", MAP(1, "", S("x"))), INVALID "Empty attribute name");
	norm_fails(MAP(2, "a", S("x"), "a", S("y")), INVALID "Duplicate attribute name: a");
	norm_fails(MAP(3, "b", S("x"), "a", S("y"), "b", N("1")),
	           INVALID "Duplicate attribute name: b");
	/* UTF-8. */
	norm_fails(S("\xc0\x80"), INVALID "A string value is not valid UTF-8");     /* overlong */
	norm_fails(S("\xed\xa0\x80"), INVALID "A string value is not valid UTF-8"); /* surrogate */
	norm_fails(S("\xf4\x90\x80\x80"),
	           INVALID "A string value is not valid UTF-8");                  /* > 10FFFF */
	norm_fails(S("ab\xe2\x82"), INVALID "A string value is not valid UTF-8"); /* truncated */
	norm_fails(S("\xff"), INVALID "A string value is not valid UTF-8");
	norm_fails(LIST(ST_SS, 1, S("\x80")), INVALID "A string set member is not valid UTF-8");
	norm_fails(MAP(1, "\xe9", S("x")), INVALID "An attribute name is not valid UTF-8");
	/* Binary may hold anything. */
	st_value b = B("\xff\xc0", 2);
	norm_ok(&b);
	/* Name length limit. */
	static char longname[ST_MAX_NAME_SIZE + 2];
	memset(longname, 'a', ST_MAX_NAME_SIZE + 1);
	st_value m = MAP(1, longname, S("x"));
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_value_normalize(&tl_arena, &m, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, INVALID
	                 "Attribute name is too long: 65536 bytes, the limit is 65535 bytes");
	longname[ST_MAX_NAME_SIZE] = '\0';
	m = MAP(1, longname, S("x"));
	norm_ok(&m);
}
END_TEST

START_TEST(test_normalize_depth)
{
	/* An attribute nested 31 levels (leaf at level 32) is accepted, 32 is not. */
	st_value ok = MAP(2, "pk", S("p"), "data", deep_map(31, S("leaf")));
	norm_ok(&ok);
	norm_fails(MAP(2, "pk", S("p"), "data", deep_map(32, S("leaf"))), NEST);
	/* Lists count the same. */
	st_value l = S("leaf");
	for (int i = 0; i < 31; i++)
		l = LIST(ST_L, 1, l);
	st_value okl = MAP(1, "a", l);
	norm_ok(&okl);
	norm_fails(MAP(1, "a", LIST(ST_L, 1, l)), NEST);
	/* A value that is not a map counts itself as level 1. */
	norm_ok(&l);
	norm_fails(LIST(ST_L, 1, l), NEST);
	/* An empty container at level 33 is too deep as well. */
	norm_fails(MAP(1, "a", deep_map(32, MAP(0))), NEST);
	norm_ok(heap(MAP(1, "a", deep_map(31, MAP(0)))));
	/* Document order decides which error is reported. */
	norm_fails(MAP(2, "d", deep_map(40, S("x")), "bad", N("abc")), NEST);
	norm_fails(MAP(2, "bad", N("abc"), "d", deep_map(40, S("x"))),
	           "The parameter cannot be converted to a numeric value: abc");
	norm_fails(MAP(1, "d", deep_map(40, N("abc"))), NEST);
	/* Very deep input is refused without walking all of it. */
	norm_fails(MAP(1, "d", deep_map(10000, S("x"))), NEST);
}
END_TEST

START_TEST(test_normalize_nomem)
{
	for (long k = 1;; k++) {
		sh_arena B2;
		sh_arena_init(&B2);
		st_value item = sample_item();
		sh_fault_arm(SH_FAULT_ALLOC, k, false);
		char msg[SH_ERRMSG_SIZE];
		int rc = st_value_normalize(&B2, &item, msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		sh_arena_fini(&B2);
		if (!fired) {
			ck_assert_int_eq(rc, SHOAL_OK);
			break;
		}
		ck_assert_int_eq(rc, SHOAL_E_NOMEM);
	}
}
END_TEST

START_TEST(test_equal)
{
	st_value a = sample_item(), b = sample_item();
	norm_ok(&a);
	ck_assert(st_value_equal(&a, &a));
	/* b is not normalised: unsorted sets, maps, "1.50": still equal. */
	ck_assert(st_value_equal(&a, &b));
	ck_assert(st_value_equal(&b, &a));
	/* Numbers compare numerically. */
	st_value n1 = N("1"), n2 = N("1.0"), n3 = N("2"), s1 = S("1");
	ck_assert(st_value_equal(&n1, &n2));
	ck_assert(!st_value_equal(&n1, &n3));
	ck_assert(!st_value_equal(&n1, &s1));
	/* Sets are sets. */
	st_value x = LIST(ST_SS, 3, S("a"), S("b"), S("c"));
	st_value y = LIST(ST_SS, 3, S("c"), S("a"), S("b"));
	st_value z = LIST(ST_SS, 3, S("c"), S("a"), S("d"));
	st_value w = LIST(ST_SS, 2, S("a"), S("b"));
	ck_assert(st_value_equal(&x, &y));
	ck_assert(!st_value_equal(&x, &z));
	ck_assert(!st_value_equal(&x, &w));
	st_value ns1 = LIST(ST_NS, 2, N("1"), N("2")), ns2 = LIST(ST_NS, 2, N("2.0"), N("1"));
	ck_assert(st_value_equal(&ns1, &ns2));
	st_value ss1 = LIST(ST_SS, 2, S("1"), S("2"));
	ck_assert(!st_value_equal(&ns1, &ss1));
	/* Lists are ordered. */
	st_value l1 = LIST(ST_L, 2, S("a"), S("b")), l2 = LIST(ST_L, 2, S("b"), S("a"));
	ck_assert(!st_value_equal(&l1, &l2));
	/* Maps compare by name and value. */
	st_value m1 = MAP(2, "a", S("1"), "b", S("2")), m2 = MAP(2, "b", S("2"), "a", S("1"));
	st_value m3 = MAP(2, "a", S("1"), "c", S("2")), m4 = MAP(2, "a", S("1"), "b", S("3"));
	ck_assert(st_value_equal(&m1, &m2));
	ck_assert(!st_value_equal(&m1, &m3));
	ck_assert(!st_value_equal(&m1, &m4));
	st_value t = BOOLV(true), f = BOOLV(false), nul = NUL();
	ck_assert(!st_value_equal(&t, &f));
	ck_assert(st_value_equal(&nul, &nul));
	ck_assert(!st_value_equal(&t, &nul));
	st_value b1 = B("ab", 2), b2 = B("ab", 2), b3 = B("a", 1), e1 = S(""), e2 = S("");
	ck_assert(st_value_equal(&b1, &b2));
	ck_assert(!st_value_equal(&b1, &b3));
	ck_assert(st_value_equal(&e1, &e2));
}
END_TEST

static int sgn(int x)
{
	return x < 0 ? -1 : x > 0;
}

START_TEST(test_cmp)
{
	st_value a = S("a"), ab = S("ab"), b = S("b"), hi = S("\xc3\xa9"), e = S("");
	ck_assert_int_lt(st_value_cmp(&a, &ab), 0);
	ck_assert_int_lt(st_value_cmp(&ab, &b), 0);
	ck_assert_int_lt(st_value_cmp(&b, &hi), 0); /* unsigned bytes */
	ck_assert_int_lt(st_value_cmp(&e, &a), 0);
	ck_assert_int_eq(st_value_cmp(&a, &a), 0);
	st_value n9 = N("9"), n10 = N("10"), nm = N("-11"), n10b = N("1e1");
	ck_assert_int_lt(st_value_cmp(&n9, &n10), 0);
	ck_assert_int_lt(st_value_cmp(&nm, &n9), 0);
	ck_assert_int_eq(st_value_cmp(&n10, &n10b), 0);
	st_value x = B("\x00", 1), y = B("\x00\x00", 2), z = B("\xff", 1);
	ck_assert_int_lt(st_value_cmp(&x, &y), 0);
	ck_assert_int_lt(st_value_cmp(&y, &z), 0);
	ck_assert_int_eq(sgn(st_value_cmp(&z, &x)), 1);
}
END_TEST

START_TEST(test_sizes)
{
	st_value v;
	v = S("hello");
	ck_assert_uint_eq(st_value_size(&v), 5);
	v = S("\xc3\xa9"); /* UTF-8 bytes, not characters */
	ck_assert_uint_eq(st_value_size(&v), 2);
	/* N: (significant digits + 1) / 2 + 1 */
	v = N("123");
	ck_assert_uint_eq(st_value_size(&v), 3);
	v = N("1234");
	ck_assert_uint_eq(st_value_size(&v), 3);
	v = N("0");
	ck_assert_uint_eq(st_value_size(&v), 1);
	v = N("-0.001");
	ck_assert_uint_eq(st_value_size(&v), 2);
	v = N("1000000");
	ck_assert_uint_eq(st_value_size(&v), 2);
	v = N("10.01");
	ck_assert_uint_eq(st_value_size(&v), 3);
	v = N("12345678901234567890123456789012345678");
	ck_assert_uint_eq(st_value_size(&v), 20);
	v = B("abc", 3);
	ck_assert_uint_eq(st_value_size(&v), 3);
	v = BOOLV(false);
	ck_assert_uint_eq(st_value_size(&v), 1);
	v = NUL();
	ck_assert_uint_eq(st_value_size(&v), 1);
	/* M: 3 + per attr 1 + name + value = 3 + 1 + 1 + 2 */
	v = MAP(1, "a", S("xy"));
	ck_assert_uint_eq(st_value_size(&v), 7);
	v = MAP(0);
	ck_assert_uint_eq(st_value_size(&v), 3);
	/* L: 3 + (1 + 2) + (1 + 1) */
	v = LIST(ST_L, 2, N("1"), BOOLV(true));
	ck_assert_uint_eq(st_value_size(&v), 8);
	/* Sets: sum of members. */
	v = LIST(ST_SS, 2, S("ab"), S("c"));
	ck_assert_uint_eq(st_value_size(&v), 3);
	v = LIST(ST_NS, 2, N("1"), N("22"));
	ck_assert_uint_eq(st_value_size(&v), 4);
	/* Nested: {"m": {"l": [S "abc"]}} value = 3 + 1 + 1 + (3 + 1 + 3) */
	v = MAP(1, "l", LIST(ST_L, 1, S("abc")));
	ck_assert_uint_eq(st_value_size(&v), 12);
	/* Item: sum of name length + value size (no container overhead). */
	st_value item = MAP(2, "id", S("abc"), "n", N("12"));
	ck_assert_uint_eq(st_item_size(&item), 2 + 3 + 1 + 2);
	st_value empty = MAP(0);
	ck_assert_uint_eq(st_item_size(&empty), 0);
}
END_TEST

static Suite *value_suite(void)
{
	return tl_suite("value", tl_arena_setup, tl_arena_teardown, 0,
	                TL_TESTS(test_type_names, test_constructors, test_map_set_get_remove,
	                         test_map_random, test_copy, test_normalize_canonical,
	                         test_normalize_errors, test_normalize_depth, test_normalize_nomem,
	                         test_equal, test_cmp, test_sizes));
}

TL_MAIN(value_suite)
