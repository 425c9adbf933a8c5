/*
 * num.c -- DynamoDB numbers: parsing, canonical text, comparison and exact
 * addition/subtraction.
 *
 * Representation (st_num, storage.h): value = sign * 0.d[0]d[1]..d[n-1] * 10^exp
 * with 1 <= n <= 38, d[0] != 0 and d[n-1] != 0; zero is sign 0, ndigits 0.
 * DynamoDB's range 1E-130 .. 9.99..E+125 is therefore exp in [-129, 126].
 *
 * Syntax accepted (Java BigDecimal's, which DynamoDB uses): an optional '+'
 * or '-', digits with an optional '.' (at least one digit on either side:
 * "5.", ".5"), an optional exponent 'e'/'E' with optional sign and at least
 * one digit.  Nothing else: no spaces, no "NaN"/"Infinity", no hex.
 *
 * Range checks, in DynamoDB's order:
 *  - an exponent whose digits do not fit a signed 64-bit integer cannot be
 *    converted (syntax error); any other exponent is applied in full, so
 *    "1e2147483648" is an overflow, never a wrap-around;
 *  - overflow / underflow of the magnitude;
 *  - more than 38 significant digits (leading and trailing zeros do not
 *    count: "1.000...0" with many zeros is 1).
 *  - zero is range-checked by the exponent it is written with, as DynamoDB
 *    does (BigDecimal's adjusted exponent: written exponent minus the number
 *    of fraction digits): "0e126" overflows, "0e-131" underflows, "0e125" is 0.
 *
 * Canonical text: always plain decimal notation, never scientific, because
 * that is what DynamoDB returns ("1e3" -> "1000", "1E125" -> "1" and 125
 * zeros, "1e-3" -> "0.001", "-0" -> "0", ".5" -> "0.5").  Leading zeros
 * (except the one before '.'), trailing fraction zeros, '+' and the sign of
 * zero are dropped.  The longest canonical text is a negative 38-digit number
 * at 1E-130: "-0." + 129 zeros + 38 digits = 170 characters, well inside
 * ST_NUM_MAX_TEXT.
 *
 * Arithmetic is exact: the digits of both operands are laid out on a fixed
 * array of decimal positions (10^125 .. 10^-167 covers every valid operand)
 * and added or subtracted schoolbook style.  A result that needs more than 38
 * significant digits is refused, not rounded: DynamoDB refuses "SET a = :x +
 * :y" with 1e50 + 1, and it does so with its *overflow* message (observed
 * behaviour, reproduced by ScyllaDB's Alternator test suite), so we use that
 * message too.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "storage.h"

#define EXP_MAX 126    /* 0.999.. * 10^126 = 9.99..E+125 */
#define EXP_MIN (-129) /* 0.1 * 10^-129 = 1E-130 */

#define MSG_SYNTAX "The parameter cannot be converted to a numeric value"
#define MSG_DIGITS "Attempting to store more than 38 significant digits in a Number"
#define MSG_OVERFLOW                                                                               \
	"Number overflow. Attempting to store a number with magnitude larger than supported range"
#define MSG_UNDERFLOW                                                                              \
	"Number underflow. Attempting to store a number with magnitude smaller than supported "    \
	"range"

/* Longest piece of offending text quoted back in a syntax error. */
#define QUOTE_MAX 200

/* Clamp used to keep exponent arithmetic inside int64 whatever the input. */
#define CLAMP (INT64_C(1) << 61)

static int syntax_error(const char *s, size_t len, char *errmsg)
{
	int n = len > QUOTE_MAX ? QUOTE_MAX : (int)len;
	return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_SYNTAX ": %.*s", n, s);
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int64_t clamp64(int64_t v)
{
	if (v > CLAMP)
		return CLAMP;
	if (v < -CLAMP)
		return -CLAMP;
	return v;
}

int st_num_parse(const char *s, size_t len, st_num *out, char *errmsg)
{
	size_t i = 0;
	bool neg = false;

	assert(out != NULL);
	if (s == NULL)
		return syntax_error("", 0, errmsg);
	if (i < len && (s[i] == '+' || s[i] == '-')) {
		neg = s[i] == '-';
		i++;
	}
	size_t int_start = i;
	while (i < len && is_digit(s[i]))
		i++;
	size_t int_end = i;
	size_t frac_start = i, frac_end = i;
	if (i < len && s[i] == '.') {
		i++;
		frac_start = i;
		while (i < len && is_digit(s[i]))
			i++;
		frac_end = i;
	}
	if (int_end == int_start && frac_end == frac_start)
		return syntax_error(s, len, errmsg);

	int64_t e = 0;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		bool eneg = false;
		i++;
		if (i < len && (s[i] == '+' || s[i] == '-')) {
			eneg = s[i] == '-';
			i++;
		}
		size_t estart = i;
		while (i < len && is_digit(s[i])) {
			int d = s[i] - '0';
			if (e > (INT64_MAX - d) / 10)
				return syntax_error(s, len, errmsg); /* past a 64-bit integer */
			e = e * 10 + d;
			i++;
		}
		if (i == estart)
			return syntax_error(s, len, errmsg);
		if (eneg)
			e = -e;
	}
	if (i != len)
		return syntax_error(s, len, errmsg);

	/* The digits, integer part then fraction, as one sequence D. */
	size_t intlen = int_end - int_start;
	size_t fraclen = frac_end - frac_start;
	size_t total = intlen + fraclen;
#define DIGIT_AT(p) ((p) < intlen ? s[int_start + (p)] : s[frac_start + (p)-intlen])
	size_t first = 0;
	while (first < total && DIGIT_AT(first) == '0')
		first++;

	e = clamp64(e);
	if (first == total) {
		/* Zero: range-checked by its written (BigDecimal-adjusted) exponent. */
		int64_t adj = e - clamp64((int64_t)(fraclen > (size_t)CLAMP ? CLAMP : fraclen));
		if (adj > EXP_MAX - 1)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_OVERFLOW);
		if (adj < EXP_MIN - 1)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_UNDERFLOW);
		memset(out, 0, sizeof(*out));
		return SHOAL_OK;
	}
	size_t last = total - 1;
	while (DIGIT_AT(last) == '0')
		last--;

	/* 0.d form: exp = number of integer positions left of the first
	 * significant digit, plus the written exponent. */
	int64_t lead = (int64_t)(intlen > (size_t)CLAMP ? CLAMP : intlen) -
	               (int64_t)(first > (size_t)CLAMP ? CLAMP : first);
	int64_t exp = clamp64(lead) + e;
	if (exp > EXP_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_OVERFLOW);
	if (exp < EXP_MIN)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_UNDERFLOW);
	size_t sig = last - first + 1;
	if (sig > ST_NUM_MAX_DIGITS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_DIGITS);

	memset(out, 0, sizeof(*out));
	out->sign = neg ? -1 : 1;
	out->exp = (int16_t)exp;
	out->ndigits = (uint8_t)sig;
	for (size_t k = 0; k < sig; k++)
		out->d[k] = (uint8_t)(DIGIT_AT(first + k) - '0');
#undef DIGIT_AT
	return SHOAL_OK;
}

size_t st_num_format(const st_num *n, char *buf)
{
	char *p = buf;

	if (n->sign == 0 || n->ndigits == 0) {
		buf[0] = '0';
		buf[1] = '\0';
		return 1;
	}
	assert(n->ndigits <= ST_NUM_MAX_DIGITS);
	assert(n->exp >= EXP_MIN && n->exp <= EXP_MAX);
	int nd = n->ndigits, e = n->exp;
	if (n->sign < 0)
		*p++ = '-';
	if (e <= 0) {
		*p++ = '0';
		*p++ = '.';
		for (int k = 0; k < -e; k++)
			*p++ = '0';
		for (int k = 0; k < nd; k++)
			*p++ = (char)('0' + n->d[k]);
	} else if (e >= nd) {
		for (int k = 0; k < nd; k++)
			*p++ = (char)('0' + n->d[k]);
		for (int k = nd; k < e; k++)
			*p++ = '0';
	} else {
		for (int k = 0; k < e; k++)
			*p++ = (char)('0' + n->d[k]);
		*p++ = '.';
		for (int k = e; k < nd; k++)
			*p++ = (char)('0' + n->d[k]);
	}
	*p = '\0';
	assert((size_t)(p - buf) < ST_NUM_MAX_TEXT);
	return (size_t)(p - buf);
}

/* Compares magnitudes of two non-zero numbers. */
static int cmp_mag(const st_num *a, const st_num *b)
{
	if (a->exp != b->exp)
		return a->exp < b->exp ? -1 : 1;
	int n = a->ndigits < b->ndigits ? a->ndigits : b->ndigits;
	for (int k = 0; k < n; k++) {
		if (a->d[k] != b->d[k])
			return a->d[k] < b->d[k] ? -1 : 1;
	}
	/* Digits are normalised (no trailing zeros): the longer one is larger. */
	if (a->ndigits != b->ndigits)
		return a->ndigits < b->ndigits ? -1 : 1;
	return 0;
}

int st_num_cmp(const st_num *a, const st_num *b)
{
	if (a->sign != b->sign)
		return a->sign < b->sign ? -1 : 1;
	if (a->sign == 0)
		return 0;
	int c = cmp_mag(a, b);
	return a->sign > 0 ? c : -c;
}

/*
 * Positions: digit k of x has weight 10^(x->exp - 1 - k).  Valid operands
 * have weights 10^125 down to 10^-167; POS_OFF maps weight 10^p to index
 * p + POS_OFF, leaving room above for a carry.
 */
#define POS_OFF 170
#define POS_N   300

static void lay_out(const st_num *x, int8_t *acc)
{
	for (int k = 0; k < x->ndigits; k++)
		acc[x->exp - 1 - k + POS_OFF] = (int8_t)x->d[k];
}

/* acc = |a| + |b| */
static void add_mag(const st_num *a, const st_num *b, int8_t *acc)
{
	int8_t tb[POS_N];
	memset(tb, 0, sizeof(tb));
	lay_out(a, acc);
	lay_out(b, tb);
	int carry = 0;
	for (int i = 0; i < POS_N; i++) {
		int v = acc[i] + tb[i] + carry;
		carry = v >= 10;
		acc[i] = (int8_t)(carry ? v - 10 : v);
	}
	assert(carry == 0);
}

/* acc = |a| - |b|, requires |a| >= |b| */
static void sub_mag(const st_num *a, const st_num *b, int8_t *acc)
{
	int8_t tb[POS_N];
	memset(tb, 0, sizeof(tb));
	lay_out(a, acc);
	lay_out(b, tb);
	int borrow = 0;
	for (int i = 0; i < POS_N; i++) {
		int v = acc[i] - tb[i] - borrow;
		borrow = v < 0;
		acc[i] = (int8_t)(borrow ? v + 10 : v);
	}
	assert(borrow == 0);
}

static int from_positions(const int8_t *acc, int sign, st_num *out, char *errmsg)
{
	int hi = POS_N - 1, lo = 0;
	while (hi >= 0 && acc[hi] == 0)
		hi--;
	if (hi < 0) {
		memset(out, 0, sizeof(*out));
		return SHOAL_OK;
	}
	while (acc[lo] == 0)
		lo++;
	int exp = hi - POS_OFF + 1;
	if (exp > EXP_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_OVERFLOW);
	if (exp < EXP_MIN)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_UNDERFLOW);
	if (hi - lo + 1 > ST_NUM_MAX_DIGITS) /* DynamoDB reports inexact results as overflow */
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_OVERFLOW);
	memset(out, 0, sizeof(*out));
	out->sign = (int8_t)sign;
	out->exp = (int16_t)exp;
	out->ndigits = (uint8_t)(hi - lo + 1);
	for (int k = 0; k < out->ndigits; k++)
		out->d[k] = (uint8_t)acc[hi - k];
	return SHOAL_OK;
}

int st_num_add(const st_num *a, const st_num *b, st_num *out, char *errmsg)
{
	int8_t acc[POS_N];

	if (a->sign == 0) {
		*out = *b;
		return SHOAL_OK;
	}
	if (b->sign == 0) {
		*out = *a;
		return SHOAL_OK;
	}
	memset(acc, 0, sizeof(acc));
	if (a->sign == b->sign) {
		add_mag(a, b, acc);
		return from_positions(acc, a->sign, out, errmsg);
	}
	int c = cmp_mag(a, b);
	if (c == 0) {
		memset(out, 0, sizeof(*out));
		return SHOAL_OK;
	}
	if (c > 0) {
		sub_mag(a, b, acc);
		return from_positions(acc, a->sign, out, errmsg);
	}
	sub_mag(b, a, acc);
	return from_positions(acc, b->sign, out, errmsg);
}

int st_num_sub(const st_num *a, const st_num *b, st_num *out, char *errmsg)
{
	st_num nb = *b;
	nb.sign = (int8_t)-nb.sign;
	return st_num_add(a, &nb, out, errmsg);
}
