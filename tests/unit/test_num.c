/* Numbers: parsing, canonical text, errors, comparison, exact add/sub. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"
#include "tests/lib/testlib.h"

#define SYNTAX "The parameter cannot be converted to a numeric value"
#define DIGITS "Attempting to store more than 38 significant digits in a Number"
#define OVERFLOW                                                                                   \
	"Number overflow. Attempting to store a number with magnitude larger than supported range"
#define UNDERFLOW                                                                                  \
	"Number underflow. Attempting to store a number with magnitude smaller than supported "    \
	"range"

static st_num parse_ok(const char *s)
{
	st_num n;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_num_parse(s, strlen(s), &n, msg);
	ck_assert_msg(rc == SHOAL_OK, "parse(\"%s\") failed: %s", s, msg);
	return n;
}

static const char *canon(const char *s)
{
	static char buf[ST_NUM_MAX_TEXT];
	st_num n = parse_ok(s);
	size_t len = st_num_format(&n, buf);
	ck_assert_uint_eq(len, strlen(buf));
	return buf;
}

static void parse_fails(const char *s, size_t len, const char *want)
{
	st_num n;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = st_num_parse(s, len, &n, msg);
	ck_assert_msg(rc == SHOAL_E_VALIDATION, "parse(\"%.*s\") should fail", (int)len, s);
	ck_assert_str_eq(msg, want);
}

static void parse_fails_z(const char *s, const char *want)
{
	parse_fails(s, strlen(s), want);
}

START_TEST(test_canonical_forms)
{
	static const char *const cases[][2] = {
	    {"1", "1"},
	    {"123", "123"},
	    {"-5", "-5"},
	    {"0", "0"},
	    {"100", "100"},
	    {"007", "7"},
	    {"001.23", "1.23"},
	    {"00", "0"},
	    {"+3", "3"},
	    {"+0", "0"},
	    {"+1.5", "1.5"},
	    {"1.0", "1"},
	    {"1.00", "1"},
	    {"1.10", "1.1"},
	    {"100.000", "100"},
	    {"0.0", "0"},
	    {"0.10", "0.1"},
	    {"1e3", "1000"},
	    {"1E3", "1000"},
	    {"1e+3", "1000"},
	    {"1E+3", "1000"},
	    {"-3e2", "-300"},
	    {"1.5e2", "150"},
	    {"1.23e4", "12300"},
	    {"1e-3", "0.001"},
	    {"5e-1", "0.5"},
	    {"123e-2", "1.23"},
	    {"1.23e-1", "0.123"},
	    {"1.0e3", "1000"},
	    {"1.0e-1", "0.1"},
	    {"-0", "0"},
	    {"-0.0", "0"},
	    {"0e5", "0"},
	    {"0.0e3", "0"},
	    {"0e-5", "0"},
	    {"0e125", "0"},
	    {".5", "0.5"},
	    {"-.5", "-0.5"},
	    {"5.", "5"},
	    {"5.e1", "50"},
	    {"0042.1200", "42.12"},
	    {"1e20", "100000000000000000000"},
	    {"1e-20", "0.00000000000000000001"},
	    {"-273.15", "-273.15"},
	    {"1e0005", "100000"},
	    {"12345678901234567890123456789012345678", "12345678901234567890123456789012345678"},
	    {"1234567890123456789012345678901234567800000",
	     "1234567890123456789012345678901234567800000"},
	    {"0.12345678901234567890123456789012345678",
	     "0.12345678901234567890123456789012345678"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_str_eq(canon(cases[i][0]), cases[i][1]);
}
END_TEST

START_TEST(test_extremes)
{
	char want[ST_NUM_MAX_TEXT];
	/* 1E125: "1" and 125 zeros. */
	memset(want, '0', 126);
	want[0] = '1';
	want[126] = '\0';
	ck_assert_str_eq(canon("1E125"), want);
	/* The largest: 38 nines then 88 zeros. */
	memset(want, '9', 38);
	memset(want + 38, '0', 88);
	want[126] = '\0';
	ck_assert_str_eq(canon("9.9999999999999999999999999999999999999E+125"), want);
	/* 1E-130: "0." then 129 zeros then "1". */
	strcpy(want, "0.");
	memset(want + 2, '0', 129);
	strcpy(want + 131, "1");
	ck_assert_str_eq(canon("1E-130"), want);
	ck_assert_str_eq(canon("0.1E-129"), want);
	ck_assert_str_eq(canon(want), want);
	/* The longest canonical text: negative, 38 digits, smallest exponent. */
	const char *s = canon("-1.2345678901234567890123456789012345678E-130");
	ck_assert_uint_eq(strlen(s), 170);
	ck_assert(strncmp(s, "-0.000", 6) == 0);
	ck_assert_str_eq(s + 132, "12345678901234567890123456789012345678");
	st_num n = parse_ok("-1.2345678901234567890123456789012345678E-130");
	ck_assert_int_eq(n.sign, -1);
	ck_assert_int_eq(n.exp, -129);
	ck_assert_int_eq(n.ndigits, 38);
	n = parse_ok("9.9999999999999999999999999999999999999E+125");
	ck_assert_int_eq(n.exp, 126);
}
END_TEST

START_TEST(test_long_texts)
{
	/* 10000 leading zeros, then 1: no overflow of any counter. */
	size_t len = 10002;
	char *s = malloc(len + 1);
	memset(s, '0', len);
	s[len - 1] = '1';
	s[len] = '\0';
	ck_assert_str_eq(canon(s), "1");
	/* 1 followed by a point and 10000 zeros. */
	s[0] = '1';
	s[1] = '.';
	memset(s + 2, '0', len - 2);
	ck_assert_str_eq(canon(s), "1");
	/* "0." then 129 zeros then 1 is 1E-130, one more zero underflows. */
	char t[200];
	strcpy(t, "0.");
	memset(t + 2, '0', 129);
	strcpy(t + 131, "1");
	parse_ok(t);
	strcpy(t, "0.");
	memset(t + 2, '0', 130);
	strcpy(t + 132, "1");
	parse_fails_z(t, UNDERFLOW);
	/* 126 integer digits fit, 127 do not. */
	memset(s, '0', 127);
	s[0] = '1';
	s[126] = '\0';
	parse_ok(s);
	s[126] = '0';
	s[127] = '\0';
	parse_fails_z(s, OVERFLOW);
	/* A huge digit string with more than 38 significant digits. */
	memset(s, '7', len);
	s[len] = '\0';
	parse_fails_z(s, OVERFLOW);
	memset(s, '7', 100);
	s[100] = '\0';
	parse_fails_z(s, DIGITS);
	free(s);
}
END_TEST

START_TEST(test_syntax_errors)
{
	static const char *const bad[] = {
	    "abc", "",     " 1",    "1 ",   "0x10", "1e",   "NaN", "Infinity", "-Infinity", "-NaN",
	    "dog", "-dog", "1.2.3", ".",    "+",    "-",    "e5",  "1e+",      "1e-",       "--1",
	    "+-1", "1,5",  "1e5.0", "1ee5", "١",    "1e 5", ".e1", "1_000",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(want, sizeof(want), SYNTAX ": %s", bad[i]);
		parse_fails_z(bad[i], want);
	}
	/* Embedded NUL is not part of a number. */
	parse_fails("1\0"
	            "2",
	            3, SYNTAX ": 1");
	/* An exponent past a 64-bit integer cannot be converted. */
	parse_fails_z("1e9223372036854775808", SYNTAX ": 1e9223372036854775808");
	parse_fails_z("1e-99999999999999999999", SYNTAX ": 1e-99999999999999999999");
	/* The quoted text is bounded. */
	char long_bad[1000];
	memset(long_bad, 'x', sizeof(long_bad) - 1);
	long_bad[sizeof(long_bad) - 1] = '\0';
	st_num n;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_num_parse(long_bad, strlen(long_bad), &n, msg), SHOAL_E_VALIDATION);
	ck_assert(strncmp(msg, SYNTAX ": xxx", strlen(SYNTAX) + 5) == 0);
	ck_assert_int_eq(st_num_parse(long_bad, strlen(long_bad), &n, NULL), SHOAL_E_VALIDATION);
}
END_TEST

START_TEST(test_range_errors)
{
	parse_fails_z("1e126", OVERFLOW);
	parse_fails_z("1E+126", OVERFLOW);
	parse_fails_z("-1e126", OVERFLOW);
	parse_fails_z("10e125", OVERFLOW);
	parse_fails_z("1e99999999999", OVERFLOW);
	parse_fails_z("-1e99999999999", OVERFLOW);
	parse_fails_z("1e2147483648", OVERFLOW);
	parse_fails_z("1e2147483647", OVERFLOW);
	parse_fails_z("1e9223372036854775807", OVERFLOW);
	parse_fails_z("1e-131", UNDERFLOW);
	parse_fails_z("0.1e-130", UNDERFLOW);
	parse_fails_z("-1e-131", UNDERFLOW);
	parse_fails_z("1e-99999999999", UNDERFLOW);
	parse_fails_z("1e-2147483648", UNDERFLOW);
	parse_fails_z("1e-9223372036854775807", UNDERFLOW);
	/* Zero is checked by the exponent it is written with. */
	parse_fails_z("0e126", OVERFLOW);
	parse_fails_z("0e-131", UNDERFLOW);
	parse_fails_z("0.0e-130", UNDERFLOW);
	parse_ok("0e-130");
	parse_ok("0.0e-129");
	/* 38 digits fit, 39 do not; leading and trailing zeros do not count. */
	parse_ok("1.2345678901234567890123456789012345678");
	parse_fails_z("1.23456789012345678901234567890123456789", DIGITS);
	parse_fails_z("1234567890123456789012345678901234567890", DIGITS);
	parse_fails_z("3.14159265358979323846264338327950288419", DIGITS);
	parse_fails_z("314159265358979323846264338327950288419e30", DIGITS);
	parse_ok("000001234567890123456789012345678901234567800000000.0000000");
	/* Magnitude is checked before precision, as DynamoDB does. */
	parse_fails_z("1234567890123456789012345678901234567890e200", OVERFLOW);
	parse_fails_z("1234567890123456789012345678901234567890e-200", UNDERFLOW);
}
END_TEST

static int cmp_text(const char *a, const char *b)
{
	st_num x = parse_ok(a), y = parse_ok(b);
	return st_num_cmp(&x, &y);
}

START_TEST(test_compare)
{
	ck_assert_int_eq(cmp_text("1", "1.0"), 0);
	ck_assert_int_eq(cmp_text("-0", "0"), 0);
	ck_assert_int_eq(cmp_text("1e3", "1000"), 0);
	ck_assert_int_lt(cmp_text("1", "2"), 0);
	ck_assert_int_gt(cmp_text("10", "9"), 0);
	ck_assert_int_lt(cmp_text("-10", "-9"), 0);
	ck_assert_int_lt(cmp_text("-1", "0"), 0);
	ck_assert_int_lt(cmp_text("0", "1E-130"), 0);
	ck_assert_int_gt(cmp_text("0", "-1E-130"), 0);
	ck_assert_int_lt(cmp_text("0.1", "1"), 0);
	ck_assert_int_lt(cmp_text("0.12", "0.123"), 0);
	ck_assert_int_gt(cmp_text("0.13", "0.123"), 0);
	ck_assert_int_gt(cmp_text("-0.12", "-0.123"), 0);
	/* Differ only at the 38th digit. */
	ck_assert_int_lt(cmp_text("1.2345678901234567890123456789012345678",
	                          "1.2345678901234567890123456789012345679"),
	                 0);
	ck_assert_int_gt(cmp_text("-1.2345678901234567890123456789012345678",
	                          "-1.2345678901234567890123456789012345679"),
	                 0);
	ck_assert_int_lt(cmp_text("12345678901234567890123456789012345678",
	                          "12345678901234567890123456789012345679"),
	                 0);
	/* Differ only in exponent. */
	ck_assert_int_lt(cmp_text("1.5e10", "1.5e11"), 0);
	ck_assert_int_gt(cmp_text("-1.5e10", "-1.5e11"), 0);
	ck_assert_int_lt(cmp_text("1E-130", "9.9999999999999999999999999999999999999E+125"), 0);
	ck_assert_int_lt(cmp_text("-9.9999999999999999999999999999999999999E+125", "-1E-130"), 0);
}
END_TEST

static const char *arith(const char *a, const char *b, bool sub, int want_rc, const char *want_msg)
{
	static char buf[ST_NUM_MAX_TEXT];
	st_num x = parse_ok(a), y = parse_ok(b), r;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = sub ? st_num_sub(&x, &y, &r, msg) : st_num_add(&x, &y, &r, msg);
	ck_assert_msg(rc == want_rc, "%s %c %s: rc %d (%s)", a, sub ? '-' : '+', b, rc, msg);
	if (rc != SHOAL_OK) {
		ck_assert_str_eq(msg, want_msg);
		return NULL;
	}
	st_num_format(&r, buf);
	return buf;
}

#define ADD(a, b) arith(a, b, false, SHOAL_OK, NULL)
#define SUB(a, b) arith(a, b, true, SHOAL_OK, NULL)

START_TEST(test_add_sub)
{
	ck_assert_str_eq(ADD("1", "1"), "2");
	ck_assert_str_eq(SUB("1", "1"), "0");
	ck_assert_str_eq(ADD("1", "-1"), "0");
	ck_assert_str_eq(SUB("1", "2"), "-1");
	ck_assert_str_eq(SUB("-1", "-1"), "0");
	ck_assert_str_eq(ADD("-1.5", "2"), "0.5");
	ck_assert_str_eq(ADD("0.5", "0.5"), "1");
	ck_assert_str_eq(ADD("0", "-7.25"), "-7.25");
	ck_assert_str_eq(SUB("0", "-7.25"), "7.25");
	ck_assert_str_eq(ADD("-7.25", "0"), "-7.25");
	ck_assert_str_eq(ADD("0.1", "0.2"), "0.3");
	ck_assert_str_eq(SUB("0.3", "0.1"), "0.2");
	ck_assert_str_eq(ADD("1", "10000000000000000000000"), "10000000000000000000001");
	ck_assert_str_eq(SUB("10000000000000000000000", "1"), "9999999999999999999999");
	ck_assert_str_eq(SUB("100000000000000000000.00000001", "1"),
	                 "99999999999999999999.00000001");
	/* Carries all the way up. */
	ck_assert_str_eq(ADD("99999999999999999999999999999999999999", "1"),
	                 "100000000000000000000000000000000000000");
	ck_assert_str_eq(ADD("0.99999999999999999999999999999999999999",
	                     "0.00000000000000000000000000000000000001"),
	                 "1");
	/* Borrows all the way down. */
	ck_assert_str_eq(SUB("100000000000000000000000000000000000000", "1"),
	                 "99999999999999999999999999999999999999");
	/* Sign changes. */
	ck_assert_str_eq(ADD("-5", "3"), "-2");
	ck_assert_str_eq(ADD("5", "-8"), "-3");
	ck_assert_str_eq(SUB("3", "5"), "-2");
	ck_assert_str_eq(SUB("-3", "-5"), "2");
	/* Extremes. */
	ck_assert_str_eq(ADD("9e125", "9e124"), canon("9.9e125"));
	ck_assert_str_eq(SUB("2e-130", "1e-130"), canon("1e-130"));
	ck_assert_str_eq(ADD("1e-130", "-1e-130"), "0");
	arith("9e125", "9e125", false, SHOAL_E_VALIDATION, OVERFLOW);
	arith("9e125", "-9e125", true, SHOAL_E_VALIDATION, OVERFLOW);
	arith("-9e125", "9e125", true, SHOAL_E_VALIDATION, OVERFLOW);
	arith("2e-130", "1.5e-130", true, SHOAL_E_VALIDATION, UNDERFLOW);
	/* Not representable in 38 digits: refused (DynamoDB's overflow message). */
	arith("1e50", "1", false, SHOAL_E_VALIDATION, OVERFLOW);
	arith("1e50", "1", true, SHOAL_E_VALIDATION, OVERFLOW);
	arith("1", "1e-130", false, SHOAL_E_VALIDATION, OVERFLOW);
	arith("12345678901234567890123456789012345678", "0.1", false, SHOAL_E_VALIDATION, OVERFLOW);
	/* Exactly 38 digits is fine. */
	ck_assert_str_eq(ADD("12345678901234567890123456789012345670", "8"),
	                 "12345678901234567890123456789012345678");
	/* Result may alias an operand. */
	st_num x = parse_ok("2.5"), y = parse_ok("0.5");
	ck_assert_int_eq(st_num_add(&x, &y, &x, NULL), SHOAL_OK);
	char buf[ST_NUM_MAX_TEXT];
	st_num_format(&x, buf);
	ck_assert_str_eq(buf, "3");
	ck_assert_int_eq(st_num_sub(&x, &y, &y, NULL), SHOAL_OK);
	st_num_format(&y, buf);
	ck_assert_str_eq(buf, "2.5");
}
END_TEST

/* Formats integer v scaled by 10^-scale as decimal text. */
static void fixed_text(char *buf, size_t cap, int64_t v, int scale)
{
	char digits[32];
	bool neg = v < 0;
	uint64_t m = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	snprintf(digits, sizeof(digits), "%0*" PRIu64, scale + 1, m);
	size_t n = strlen(digits);
	snprintf(buf, cap, "%s%.*s%s%s", neg ? "-" : "", (int)(n - (size_t)scale), digits,
	         scale > 0 ? "." : "", digits + n - scale);
}

START_TEST(test_random_against_int64)
{
	uint64_t st = tl_seed();
	for (int i = 0; i < 20000; i++) {
		int64_t x =
		    (int64_t)(tl_rand(&st) % 2000000000000000001ULL) - 1000000000000000000LL;
		int64_t y =
		    (int64_t)(tl_rand(&st) % 2000000000000000001ULL) - 1000000000000000000LL;
		if (tl_rand(&st) % 4 == 0)
			y = -x; /* cancellation */
		if (tl_rand(&st) % 4 == 0)
			x /= (int64_t)(tl_rand(&st) % 1000000 + 1); /* different magnitudes */
		int scale = (int)(tl_rand(&st) % 19);
		int exp = (int)(tl_rand(&st) % 200) - 100;
		char a[64], b[64], want[64], ea[80], eb[80];
		fixed_text(a, sizeof(a), x, scale);
		fixed_text(b, sizeof(b), y, scale);
		/* Shift both by the same power of ten: exactness must not depend on it. */
		snprintf(ea, sizeof(ea), "%se%d", a, exp);
		snprintf(eb, sizeof(eb), "%se%d", b, exp);
		fixed_text(want, sizeof(want), x + y, scale);
		char want_e[80], want_canon[ST_NUM_MAX_TEXT];
		snprintf(want_e, sizeof(want_e), "%se%d", want, exp);
		strcpy(want_canon, canon(want_e));
		ck_assert_str_eq(ADD(ea, eb), want_canon);
		fixed_text(want, sizeof(want), x - y, scale);
		snprintf(want_e, sizeof(want_e), "%se%d", want, exp);
		strcpy(want_canon, canon(want_e));
		ck_assert_str_eq(SUB(ea, eb), want_canon);
		/* cmp agrees with the integers. */
		int c = cmp_text(ea, eb);
		ck_assert_int_eq(c < 0 ? -1 : c > 0, x < y ? -1 : x > y);
		/* Canonical text is a fixed point. */
		char c1[ST_NUM_MAX_TEXT];
		strcpy(c1, canon(ea));
		ck_assert_str_eq(canon(c1), c1);
	}
}
END_TEST

/* Random 38-digit numbers: (a + b) - b == a whenever a + b is exact, and
 * comparison is antisymmetric and agrees with the sign of a - b. */
START_TEST(test_random_wide)
{
	uint64_t st = tl_seed() ^ 0x5eed;
	for (int i = 0; i < 5000; i++) {
		char a[64], b[64];
		int na = (int)(tl_rand(&st) % 38) + 1, nb = (int)(tl_rand(&st) % 38) + 1;
		int p = 0;
		if (tl_rand(&st) % 2)
			a[p++] = '-';
		for (int k = 0; k < na; k++)
			a[p++] = (char)('0' + (k == 0 ? 1 + tl_rand(&st) % 9 : tl_rand(&st) % 10));
		p += snprintf(a + p, sizeof(a) - (size_t)p, "e%d",
		              (int)(tl_rand(&st) % 60) - 30 - na);
		p = 0;
		if (tl_rand(&st) % 2)
			b[p++] = '-';
		for (int k = 0; k < nb; k++)
			b[p++] = (char)('0' + (k == 0 ? 1 + tl_rand(&st) % 9 : tl_rand(&st) % 10));
		snprintf(b + p, sizeof(b) - (size_t)p, "e%d", (int)(tl_rand(&st) % 60) - 30 - nb);
		st_num x = parse_ok(a), y = parse_ok(b), s, d, back;
		int c = st_num_cmp(&x, &y);
		ck_assert_int_eq(c, -st_num_cmp(&y, &x));
		if (st_num_add(&x, &y, &s, NULL) == SHOAL_OK) {
			ck_assert_int_eq(st_num_sub(&s, &y, &back, NULL), SHOAL_OK);
			ck_assert_int_eq(st_num_cmp(&back, &x), 0);
		}
		if (st_num_sub(&x, &y, &d, NULL) == SHOAL_OK)
			ck_assert_int_eq(d.sign, c);
	}
}
END_TEST

static Suite *num_suite(void)
{
	return tl_suite("num", NULL, NULL, 0,
	                TL_TESTS(test_canonical_forms, test_extremes, test_long_texts,
	                         test_syntax_errors, test_range_errors, test_compare, test_add_sub,
	                         test_random_against_int64, test_random_wide));
}

TL_MAIN(num_suite)
