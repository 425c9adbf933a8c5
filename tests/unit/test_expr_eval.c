/* Evaluating conditions and filters: every comparator and function across
 * types, absent attributes, nested paths, precedence. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "storage/expr.h"
#include "tests/lib/tl_values.h"

#define ITEM                                                                                       \
	"{\"s\": {\"S\": \"abc\"}, \"s2\": {\"S\": \"abc\"}, \"up\": {\"S\": \"B\"}, "             \
	"\"utf\": {\"S\": \"\xc3\xa9t\xc3\xa9\"}, \"emp\": {\"S\": \"\"}, "                        \
	"\"n\": {\"N\": \"5\"}, \"n2\": {\"N\": \"5.00\"}, \"big\": {\"N\": \"10\"}, "             \
	"\"neg\": {\"N\": \"-1e2\"}, \"b\": {\"B\": \"xyz\"}, \"bool\": {\"BOOL\": true}, "        \
	"\"nul\": {\"NULL\": true}, "                                                              \
	"\"l\": {\"L\": [{\"S\": \"a\"}, {\"N\": \"1\"}, {\"M\": {\"x\": {\"N\": \"1\"}}}]}, "     \
	"\"m\": {\"M\": {\"k\": {\"S\": \"v\"}, \"deep\": {\"M\": {\"l\": {\"L\": [{\"N\": "       \
	"\"1\"}, {\"N\": \"2\"}]}}}}}, "                                                           \
	"\"ss\": {\"SS\": [\"b\", \"a\"]}, \"ns\": {\"NS\": [\"2\", \"1\"]}, "                     \
	"\"bs\": {\"BS\": [\"x\", \"y\"]}, \"yes\": {\"S\": \"yes\"}}"

#define VALUES                                                                                     \
	"{\":s\": {\"S\": \"abc\"}, \":s_lo\": {\"S\": \"abb\"}, \":s_hi\": {\"S\": \"abd\"}, "    \
	"\":pre\": {\"S\": \"ab\"}, \":a\": {\"S\": \"a\"}, \":v\": {\"S\": \"v\"}, "              \
	"\":bc\": {\"S\": \"bc\"}, \":empty\": {\"S\": \"\"}, "                                    \
	"\":n\": {\"N\": \"5\"}, \":n4\": {\"N\": \"4\"}, \":n6\": {\"N\": \"6\"}, \":n1\": "      \
	"{\"N\": \"1\"}, \":n2\": {\"N\": \"2\"}, \":n3\": {\"N\": \"3\"}, \":n9\": {\"N\": "      \
	"\"9\"}, \":n5e0\": {\"N\": \"0.5e1\"}, \":b\": {\"B\": \"xyz\"}, \":bpre\": {\"B\": "     \
	"\"xy\"}, \":bmid\": {\"B\": \"y\"}, \":x\": {\"B\": \"x\"}, \":true\": {\"BOOL\": "       \
	"true}, "                                                                                  \
	"\":false\": {\"BOOL\": false}, \":null\": {\"NULL\": true}, "                             \
	"\":l\": {\"L\": [{\"S\": \"a\"}, {\"N\": \"1.0\"}, {\"M\": {\"x\": {\"N\": \"1\"}}}]}, "  \
	"\":l2\": {\"L\": [{\"N\": \"1\"}, {\"S\": \"a\"}]}, "                                     \
	"\":mx\": {\"M\": {\"x\": {\"N\": \"1\"}}}, "                                              \
	"\":m\": {\"M\": {\"deep\": {\"M\": {\"l\": {\"L\": [{\"N\": \"1\"}, {\"N\": \"2\"}]}}}, " \
	"\"k\": {\"S\": \"v\"}}}, "                                                                \
	"\":ss\": {\"SS\": [\"a\", \"b\"]}, \":ns\": {\"NS\": [\"1\", \"2.0\"]}, \":bs\": "        \
	"{\"BS\": [\"y\", \"x\"]}, \":tS\": {\"S\": \"S\"}, \":tN\": {\"S\": \"N\"}, \":tSS\": "   \
	"{\"S\": \"SS\"}, \":tNULL\": {\"S\": \"NULL\"}, \":tM\": {\"S\": \"M\"}, \":tL\": "       \
	"{\"S\": \"L\"}, \":tBOOL\": {\"S\": \"BOOL\"}, \":tB\": {\"S\": \"B\"}, \":tNS\": "       \
	"{\"S\": \"NS\"}, \":tBS\": {\"S\": \"BS\"}, \":yes\": {\"S\": \"yes\"}, \":no\": "        \
	"{\"S\": "                                                                                 \
	"\"no\"}}"

static st_value *ITEM_V;

/* Evaluates text (kind FILTER and CONDITION alike) on item. */
static bool eval_on(const char *text, const st_value *item, int line)
{
	st_expr_attrs attrs = {NULL, tl_json_item(&tl_arena, VALUES)};
	st_expr_ctx ctx;
	char msg[SH_ERRMSG_SIZE];
	st_expr *e, *e2;
	bool r1, r2;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_OK);
	int rc = st_expr_parse(&ctx, ST_EXPR_FILTER, text, &e, msg);
	ck_assert_msg(rc == SHOAL_OK, "line %d: %s: %s", line, text, msg);
	rc = st_expr_parse(&ctx, ST_EXPR_CONDITION, text, &e2, msg);
	ck_assert_msg(rc == SHOAL_OK, "line %d: %s: %s", line, text, msg);
	ck_assert_int_eq(st_expr_eval(e, item, &r1, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_eval(e2, item, &r2, msg), SHOAL_OK);
	ck_assert(r1 == r2);
	return r1;
}

#define T(text)     ck_assert_msg(eval_on(text, ITEM_V, __LINE__), "expected true: %s", text)
#define FALSE(text) ck_assert_msg(!eval_on(text, ITEM_V, __LINE__), "expected false: %s", text)

START_TEST(test_equality)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("s = :s");
	T(":s = s");
	T("s = s2");
	FALSE("s = :pre");
	T("s <> :pre");
	FALSE("s <> :s");
	/* Numbers compare numerically, whatever their text. */
	T("n = :n");
	T("n = :n5e0");
	T("n = n2");
	FALSE("n = :n4");
	/* Different types are never equal. */
	FALSE("n = :s");
	T("n <> :s");
	FALSE("s = :b");
	FALSE("bool = :s");
	/* Binary, booleans, null. */
	T("b = :b");
	FALSE("b = :bpre");
	T("bool = :true");
	FALSE("bool = :false");
	T("bool <> :false");
	T("nul = :null");
	FALSE("nul <> :null");
	/* Documents and sets compare deeply; sets and numbers as values. */
	T("l = :l");
	FALSE("l = :l2");
	T("l <> :l2");
	T("m = :m");
	FALSE("m = :mx");
	T("l[2] = :mx");
	T("ss = :ss");
	T("ns = :ns");
	T("bs = :bs");
	FALSE("ss = :ns");
	/* Empty strings are values like any zy. */
	T("emp = :empty");
	FALSE("s = :empty");
}
END_TEST

START_TEST(test_ordering)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("n < :n6");
	T("n <= :n");
	T("n <= :n6");
	T("n > :n4");
	T("n >= :n");
	FALSE("n < :n");
	FALSE("n > :n");
	FALSE("n >= :n6");
	/* Numerically: 10 > 9 although "10" < "9" as text; -100 < 1. */
	T("big > :n9");
	T("neg < :n1");
	T(":n9 < big");
	/* Strings by UTF-8 bytes: "B" < "a" < "abc" < "abd". */
	T("up < :a");
	T("s > :s_lo");
	T("s < :s_hi");
	T("s >= :s");
	T(":pre < s");
	/* Binary by unsigned bytes. */
	T("b > :bpre");
	T("b < :bmid");
	/* Different types or unordered types: false, both ways. */
	FALSE("n < :s");
	FALSE("n > :s");
	FALSE("s < :n");
	FALSE("l < s");
	FALSE("l > s");
	FALSE("bool < n");
	FALSE("m >= l[2]");
	FALSE("ss <= bs");
	/* BETWEEN is inclusive at both ends. */
	T("n BETWEEN :n4 AND :n6");
	T("n BETWEEN :n AND :n");
	T("n BETWEEN :n4 AND :n");
	FALSE("n BETWEEN :n6 AND :n9");
	FALSE("n BETWEEN :n1 AND :n4");
	T("s BETWEEN :s_lo AND :s_hi");
	T("b BETWEEN :bpre AND :bmid");
	FALSE("n BETWEEN :s_lo AND :s_hi");
	FALSE("s BETWEEN :n4 AND :n6");
	T("big BETWEEN :n9 AND big");
}
END_TEST

START_TEST(test_in)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("n IN (:n)");
	T("n IN (:s, :n4, :n5e0)");
	FALSE("n IN (:s, :n4, :n6)");
	T("s IN (:pre, :s)");
	FALSE("s IN (:n)");
	T("l IN (:l2, :l)");
	T("ss IN (:ns, :ss)");
	T("n IN (big, n2)");
	FALSE("zz IN (:s, :n)");
	FALSE("n IN (zz)");
}
END_TEST

START_TEST(test_absent)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	/* An absent operand makes every comparison false, except <>, which is
	 * true -- even between two absent attributes. */
	FALSE("zz = :s");
	T("zz <> :s");
	T(":s <> zz");
	T("zz <> zy");
	FALSE("zz = zy");
	FALSE("zz < :n");
	FALSE("zz <= :n");
	FALSE("zz > :n");
	FALSE("zz >= :n");
	FALSE(":n < zz");
	FALSE("zz < zy");
	FALSE("zz BETWEEN :n4 AND :n6");
	FALSE("n BETWEEN zz AND :n6");
	FALSE("zz BETWEEN zy AND zx");
	T("NOT zz = :s");
	T("attribute_not_exists(zz)");
	FALSE("attribute_exists(zz)");
	FALSE("begins_with(zz, :pre)");
	FALSE("begins_with(s, zz)");
	FALSE("contains(zz, :a)");
	FALSE("contains(ss, zz)");
	FALSE("attribute_type(zz, :tS)");
	FALSE("size(zz) > :n1");
	FALSE("size(zz) = :n1");
	FALSE("size(zz) < :n1");

	/* No item at all: every path is absent. */
	ck_assert(eval_on("attribute_not_exists(s)", NULL, __LINE__));
	ck_assert(!eval_on("attribute_exists(s)", NULL, __LINE__));
	ck_assert(!eval_on("s = :s", NULL, __LINE__));
	ck_assert(eval_on("s <> :s", NULL, __LINE__));
	ck_assert(eval_on(":s = :s", NULL, __LINE__));
	ck_assert(eval_on("size(:s) = :n3", NULL, __LINE__));
}
END_TEST

START_TEST(test_nested_paths)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("m.k = :v");
	T("m.deep.l[1] = :n2");
	T("m.deep.l[0] < m.deep.l[1]");
	T("l[0] = :a");
	T("l[1] = :n1");
	T("l[2].x = :n1");
	T("attribute_exists(m.deep.l[1])");
	T("attribute_not_exists(m.deep.l[2])");
	T("attribute_not_exists(l[3])");
	T("attribute_not_exists(l[4294967295])");
	/* An index into a non-list, a name into a non-map: absent. */
	T("attribute_not_exists(m.k[0])");
	T("attribute_not_exists(l.x)");
	T("attribute_not_exists(s.x)");
	T("attribute_not_exists(m[0])");
	T("attribute_not_exists(n.deep)");
	FALSE("m.k.x = :v");
	/* #placeholders with dots in the name are one name. */
	st_value *item =
	    tl_json_item(&tl_arena, "{\"a.b\": {\"S\": \"flat\"}, \"a\": {\"M\": {\"b\": {\"S\": "
	                            "\"nested\"}}}}");
	st_expr_attrs attrs = {
	    tl_json_names(&tl_arena, "{\"#ab\": \"a.b\", \"#a\": \"a\", \"#b\": \"b\"}"),
	    tl_json_item(&tl_arena, "{\":flat\": {\"S\": \"flat\"}, \":nested\": {\"S\": "
	                            "\"nested\"}}")};
	st_expr_ctx ctx;
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	bool r;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_OK);
	ck_assert_int_eq(
	    st_expr_parse(&ctx, ST_EXPR_CONDITION, "#ab = :flat AND #a.#b = :nested", &e, msg),
	    SHOAL_OK);
	ck_assert_int_eq(st_expr_eval(e, item, &r, msg), SHOAL_OK);
	ck_assert(r);
	ck_assert_int_eq(st_expr_parse(&ctx, ST_EXPR_CONDITION, "#ab = :nested", &e, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_expr_eval(e, item, &r, msg), SHOAL_OK);
	ck_assert(!r);
}
END_TEST

START_TEST(test_functions)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("attribute_exists(s)");
	T("attribute_exists(nul)");
	T("attribute_exists(emp)");
	T("attribute_not_exists(zz)");
	/* attribute_type, every type. */
	T("attribute_type(s, :tS)");
	T("attribute_type(n, :tN)");
	T("attribute_type(b, :tB)");
	T("attribute_type(bool, :tBOOL)");
	T("attribute_type(nul, :tNULL)");
	T("attribute_type(l, :tL)");
	T("attribute_type(m, :tM)");
	T("attribute_type(ss, :tSS)");
	T("attribute_type(ns, :tNS)");
	T("attribute_type(bs, :tBS)");
	FALSE("attribute_type(s, :tN)");
	FALSE("attribute_type(ss, :tS)");
	FALSE("attribute_type(l, :tM)");
	/* begins_with: S with S, B with B. */
	T("begins_with(s, :pre)");
	T("begins_with(s, :s)");
	T("begins_with(s, :empty)");
	FALSE("begins_with(s, :s_hi)");
	FALSE("begins_with(:pre, s)");
	T("begins_with(b, :bpre)");
	FALSE("begins_with(b, :bmid)");
	FALSE("begins_with(s, :bpre)");
	FALSE("begins_with(n, :pre)");
	T("begins_with(s, s2)");
	/* contains: substrings, set members, list elements. */
	T("contains(s, :bc)");
	T("contains(s, :s)");
	T("contains(s, :empty)");
	FALSE("contains(s, :s_hi)");
	FALSE("contains(s, :n)");
	T("contains(b, :bmid)");
	FALSE("contains(b, :bc)");
	T("contains(ss, :a)");
	FALSE("contains(ss, :pre)");
	T("contains(ns, :n1)");
	T("contains(ns, :n2)");
	FALSE("contains(ns, :a)");
	T("contains(bs, :x)");
	FALSE("contains(bs, :a)");
	T("contains(l, :a)");
	T("contains(l, :n1)");
	T("contains(l, :mx)");
	FALSE("contains(l, :n2)");
	FALSE("contains(n, :n)");
	FALSE("contains(m, :v)");
	/* size: bytes of S and B, element counts of sets, lists and maps. */
	T("size(s) = :n3");
	T("size(utf) = :n5e0"); /* "été" is 5 bytes */
	T("size(emp) < :n1");
	T("size(b) = :n3");
	T("size(l) = :n3");
	T("size(m) = :n2");
	T("size(m.deep) = :n1");
	T("size(ss) = :n2");
	T("size(ns) = :n2");
	T("size(bs) = :n2");
	T("size(ss) = size(ns)");
	T("size(l) BETWEEN :n2 AND :n3");
	T("size(l) IN (:n1, :n3)");
	T("size(s) > size(bs)");
	T("size(:s) = :n3");
	FALSE("size(n) = :n1");
	FALSE("size(bool) < :n9");
	FALSE("size(nul) >= :n1");
}
END_TEST

START_TEST(test_logic)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	T("s = :s AND n = :n");
	FALSE("s = :s AND n = :n4");
	T("s = :pre OR n = :n");
	FALSE("s = :pre OR n = :n4");
	T("NOT s = :pre");
	FALSE("NOT s = :s");
	T("NOT NOT s = :s");
	/* AND binds tighter than OR. */
	T("s = :s OR n = :n4 AND n = :n6");
	FALSE("(s = :s OR n = :n4) AND n = :n6");
	/* NOT binds tighter than AND. */
	FALSE("NOT s = :s AND n = :n");
	T("NOT (s = :pre AND n = :n)");
	T("NOT s = :pre AND n = :n");
	FALSE("NOT (s = :s OR n = :n4)");
	T("NOT s = :s OR n = :n");
	/* Comparisons bind tighter than everything. */
	T("n BETWEEN :n4 AND :n6 AND s = :s");
	T("attribute_exists(s) AND NOT attribute_exists(zz) OR zz = :s");
}
END_TEST

/* Random boolean formulas over atoms of known value: the parser's
 * precedence must agree with a directly computed value. */
typedef struct gen {
	uint64_t rng;
	char *buf;
	size_t off, size;
} gen;

static unsigned rnd(gen *g, unsigned n)
{
	return (unsigned)(tl_rand(&g->rng) % n);
}

static void emit(gen *g, const char *s)
{
	g->off += (size_t)snprintf(g->buf + g->off, g->size - g->off, "%s", s);
}

enum { G_ATOM, G_NOT, G_AND, G_OR };

/* Emits a formula whose top operator binds at least as tight as `ctx`
 * requires (parenthesising when it does not) and returns its value. */
static bool formula(gen *g, int depth, int ctx)
{
	static const struct {
		const char *text;
		bool value;
	} atoms[] = {
	    {"yes = :yes", true},          {"yes = :no", false},
	    {"attribute_exists(s)", true}, {"attribute_exists(zz)", false},
	    {"zz <> :yes", true},          {"n BETWEEN :n4 AND :n6", true},
	    {"n IN (:n1, :n2)", false},    {"size(l) > :n2", true},
	    {"contains(ss, :pre)", false}, {"begins_with(s, :pre)", true},
	};
	int kind = depth == 0 ? G_ATOM : (int)rnd(g, 4);
	bool wrap = kind > ctx || (kind != G_ATOM && rnd(g, 4) == 0);
	if (kind == G_ATOM && rnd(g, 6) == 0)
		wrap = true;
	bool v;
	if (wrap)
		emit(g, "(");
	switch (kind) {
	case G_ATOM: {
		unsigned i = rnd(g, sizeof(atoms) / sizeof(atoms[0]));
		emit(g, atoms[i].text);
		v = atoms[i].value;
		break;
	}
	case G_NOT:
		emit(g, "NOT ");
		v = !formula(g, depth - 1, G_NOT);
		break;
	default: {
		unsigned n = 2 + rnd(g, 2);
		v = kind == G_AND;
		for (unsigned i = 0; i < n; i++) {
			if (i > 0)
				emit(g, kind == G_AND ? (rnd(g, 2) ? " AND " : " and ")
				                      : (rnd(g, 2) ? " OR " : " or "));
			/* Operands of AND must bind tighter than AND (NOT or atoms);
			 * the right-hand side may also be another chain of the same
			 * operator, which associates. */
			bool x = formula(g, depth - 1, kind - 1);
			v = kind == G_AND ? (v && x) : (v || x);
		}
		break;
	}
	}
	if (wrap)
		emit(g, ")");
	return v;
}

START_TEST(test_random_precedence)
{
	ITEM_V = tl_json_item(&tl_arena, ITEM);
	gen g = {.rng = tl_seed(), .size = ST_MAX_EXPR_SIZE + 1};
	char buf[ST_MAX_EXPR_SIZE + 1];
	g.buf = buf;
	for (int i = 0; i < 400; i++) {
		g.off = 0;
		bool want = formula(&g, 1 + (int)rnd(&g, 4), G_OR);
		if (g.off >= ST_MAX_EXPR_SIZE)
			continue;
		ck_assert_msg(eval_on(buf, ITEM_V, __LINE__) == want, "%s should be %s", buf,
		              want ? "true" : "false");
	}
}
END_TEST

static Suite *expr_eval_suite(void)
{
	return tl_suite("expr_eval", tl_arena_setup, tl_arena_teardown, 0,
	                TL_TESTS(test_equality, test_ordering, test_in, test_absent,
	                         test_nested_paths, test_functions, test_logic,
	                         test_random_precedence));
}

TL_MAIN(expr_eval_suite)
