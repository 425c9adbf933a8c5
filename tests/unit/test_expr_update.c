/* Applying update expressions (st_expr_update), the UPDATED_OLD/NEW
 * projection (st_expr_update_project) and projections (st_expr_project). */
#include <check.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/expr.h"
#include "tests/lib/tl_values.h"

#define OLD_ATTRS                                                                                  \
	"\"pk\": {\"S\": \"k\"}, \"s\": {\"S\": \"str\"}, \"n\": {\"N\": \"5\"}, "                 \
	"\"l\": {\"L\": [{\"S\": \"a\"}, {\"S\": \"b\"}, {\"S\": \"c\"}, {\"S\": \"d\"}]}, "       \
	"\"m\": {\"M\": {\"x\": {\"N\": \"1\"}, \"y\": {\"M\": {\"z\": {\"S\": \"deep\"}}}, "      \
	"\"ml\": {\"L\": [{\"N\": \"1\"}, {\"N\": \"2\"}]}}}, "                                    \
	"\"ss\": {\"SS\": [\"a\", \"b\"]}, \"ns\": {\"NS\": [\"1\", \"2\"]}, "                     \
	"\"bs\": {\"BS\": [\"x\"]}, \"nul\": {\"NULL\": true}"

/* An item with one attribute of each kind; the tests that need variants
 * spell their items out whole. */
#define OLD "{" OLD_ATTRS "}"

#define VALUES                                                                                     \
	"{\":s\": {\"S\": \"new\"}, \":n\": {\"N\": \"1\"}, \":n10\": {\"N\": \"10\"}, \":neg\": " \
	"{\"N\": \"-2.5\"}, \":zero\": {\"N\": \"0\"}, \":l\": {\"L\": [{\"S\": \"x\"}, {\"S\": "  \
	"\"y\"}]}, \":l1\": {\"L\": [{\"S\": \"e\"}]}, \":ss\": {\"SS\": [\"b\", \"c\"]}, "        \
	"\":ss_a\": {\"SS\": [\"a\", \"b\"]}, \":ns\": {\"NS\": [\"3\", \"2\"]}, \":ns1\": "       \
	"{\"NS\": [\"1.0\"]}, \":bs\": {\"BS\": [\"y\"]}, \":m\": {\"M\": {\"q\": {\"S\": "        \
	"\"r\"}}}, \":big\": {\"N\": \"9.9999999999999999999999999999999999999E+125\"}, "          \
	"\":e50\": {\"N\": \"1E50\"}, \":p1\": {\"N\": \"0.1\"}, \":p2\": {\"N\": \"0.2\"}, "      \
	"\":d38\": {\"N\": \"99999999999999999999999999999999999999\"}}"

#define NAMES "{\"#pk\": \"pk\", \"#dot\": \"a.b\", \"#1\": \"1\"}"

static st_expr *parse_update(const char *text)
{
	st_expr_attrs attrs = {tl_json_names(&tl_arena, NAMES), tl_json_item(&tl_arena, VALUES)};
	st_expr_ctx ctx;
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_OK);
	int rc = st_expr_parse(&ctx, ST_EXPR_UPDATE, text, &e, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
	return e;
}

/* Applies text to old (JSON attributes, NULL for no item) with key {"pk": "k"}. */
static int apply(const char *text, const char *old, st_value **out, char *msg)
{
	st_expr *e = parse_update(text);
	st_value *key = tl_json_item(&tl_arena, "{\"pk\": {\"S\": \"k\"}}");
	st_value *o = old ? tl_json_item(&tl_arena, old) : NULL;
	msg[0] = '\0';
	return st_expr_update(e, &tl_arena, o, key, out, msg);
}

static void ok_(const char *text, const char *old, const char *want, int line)
{
	char msg[SH_ERRMSG_SIZE];
	st_value *out = NULL;
	int rc = apply(text, old, &out, msg);
	ck_assert_msg(rc == SHOAL_OK, "line %d: %s: %s", line, text, msg);
	const st_value *w = tl_json_item(&tl_arena, want);
	ck_assert_msg(st_value_equal(out, w), "line %d: %s\n got %s\nwant %s", line, text,
	              tl_show(&tl_arena, out), tl_show(&tl_arena, w));
	/* The result is normalised: normalising it again changes nothing. */
	st_value copy;
	ck_assert_int_eq(st_value_copy(&tl_arena, out, &copy), SHOAL_OK);
	ck_assert_int_eq(st_value_normalize(&tl_arena, &copy, msg), SHOAL_OK);
	ck_assert_str_eq(tl_show(&tl_arena, &copy), tl_show(&tl_arena, out));
}

static void err_(const char *text, const char *old, const char *want, int line)
{
	char msg[SH_ERRMSG_SIZE];
	st_value *out = NULL;
	int rc = apply(text, old, &out, msg);
	ck_assert_msg(rc == SHOAL_E_VALIDATION, "line %d: %s: rc %d %s", line, text, rc,
	              out ? tl_show(&tl_arena, out) : msg);
	ck_assert_msg(strcmp(msg, want) == 0, "line %d: %s\n got %s\nwant %s", line, text, msg,
	              want);
}

#define OK(text, old, want)  ok_(text, old, want, __LINE__)
#define ERR(text, old, want) err_(text, old, want, __LINE__)

#define MSG_PATH    "The document path provided in the update expression is invalid for update"
#define MSG_MISSING "The provided expression refers to an attribute that does not exist in the item"
#define MSG_TYPE    "An operand in the update expression has an incorrect data type"
#define MSG_OVERFLOW                                                                               \
	"Number overflow. Attempting to store a number with magnitude larger than supported range"

/* Items used below, small enough to spell out whole. */
#define L4                                                                                         \
	"{\"pk\": {\"S\": \"k\"}, \"l\": {\"L\": [{\"S\": \"a\"}, {\"S\": \"b\"}, {\"S\": "        \
	"\"c\"}, {\"S\": \"d\"}]}}"
#define LIST(...) "{\"pk\": {\"S\": \"k\"}, \"l\": {\"L\": [" __VA_ARGS__ "]}}"
#define S(x)      "{\"S\": \"" x "\"}"
#define N(x)      "{\"N\": \"" x "\"}"
#define PK        "\"pk\": {\"S\": \"k\"}"

START_TEST(test_set)
{
	OK("SET a = :s", "{" PK "}", "{" PK ", \"a\": " S("new") "}");
	OK("SET a = :s", NULL, "{" PK ", \"a\": " S("new") "}");
	OK("SET a = :m", NULL, "{" PK ", \"a\": {\"M\": {\"q\": " S("r") "}}}");
	OK("SET a = :s", "{" PK ", \"a\": " N("1") "}", "{" PK ", \"a\": " S("new") "}");
	OK("SET a = pk", NULL, "{" PK ", \"a\": " S("k") "}");
	OK("SET a = #pk, b = :n", NULL, "{" PK ", \"a\": " S("k") ", \"b\": " N("1") "}");
	OK("SET #dot = :n", NULL, "{" PK ", \"a.b\": " N("1") "}");
	/* Values are computed from the item before the update: a swap. */
	OK("SET a = b, b = a", "{" PK ", \"a\": " S("1") ", \"b\": " N("2") "}",
	   "{" PK ", \"a\": " N("2") ", \"b\": " S("1") "}");
	/* Nested maps. */
	OK("SET m.x = :s", "{" PK ", \"m\": {\"M\": {\"x\": " N("1") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"x\": " S("new") "}}}");
	OK("SET m.w = :s, m.a = :n", "{" PK ", \"m\": {\"M\": {\"x\": " N("1") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"a\": " N("1") ", \"w\": " S("new") ", \"x\": " N("1") "}}}");
	OK("SET m.y.z = :n", OLD,
	   "{" PK
	   ", \"s\": " S("str") ", \"n\": " N("5") ", \"l\": {\"L\": [" S("a") "," S("b") "," S("c") "," S("d") "]}, \"m\": {\"M\": {\"x\": " N(
	       "1") ", \"y\": {\"M\": {\"z\": " N("1") "}}, "
	                                               "\"ml"
	                                               "\": "
	                                               "{\"L"
	                                               "\": "
	                                               "[" N("1") "," N(
	                                                   "2") "]}}}, \"ss\": {\"SS\": [\"a\", "
	                                                        "\"b\"]}, "
	                                                        "\"ns\": {\"NS\": [\"1\", \"2\"]}, "
	                                                        "\"bs\": {\"BS\": [\"x\"]}, "
	                                                        "\"nul\": {\"NULL\": true}}");
	OK("SET m.#1 = :n", "{" PK ", \"m\": {\"M\": {}}}",
	   "{" PK ", \"m\": {\"M\": {\"1\": " N("1") "}}}");
	/* Lists: replace, append past the end (in index order), nested. */
	OK("SET l[1] = :s", L4, LIST(S("a") "," S("new") "," S("c") "," S("d")));
	OK("SET l[4] = :s", L4, LIST(S("a") "," S("b") "," S("c") "," S("d") "," S("new")));
	OK("SET l[100] = :s", L4, LIST(S("a") "," S("b") "," S("c") "," S("d") "," S("new")));
	OK("SET l[10] = :s, l[7] = :n", L4,
	   LIST(S("a") "," S("b") "," S("c") "," S("d") "," N("1") "," S("new")));
	OK("SET l[0] = :n, l[9] = :s, l[3] = :n10", L4,
	   LIST(N("1") "," S("b") "," S("c") "," N("10") "," S("new")));
	OK("SET l[0] = :s", "{" PK ", \"l\": {\"L\": []}}", LIST(S("new")));
	OK("SET l[1].x = :s",
	   "{" PK ", \"l\": {\"L\": [" N("0") ", {\"M\": {\"x\": " N("1") "}}]}}",
	   "{" PK ", \"l\": {\"L\": [" N("0") ", {\"M\": {\"x\": " S("new") "}}]}}");
	OK("SET l[0][1] = :s", "{" PK ", \"l\": {\"L\": [{\"L\": [" N("0") "]}]}}",
	   "{" PK ", \"l\": {\"L\": [{\"L\": [" N("0") "," S("new") "]}]}}");
	/* if_not_exists. */
	OK("SET a = if_not_exists(a, :n)", NULL, "{" PK ", \"a\": " N("1") "}");
	OK("SET a = if_not_exists(a, :n)", "{" PK ", \"a\": " S("x") "}",
	   "{" PK ", \"a\": " S("x") "}");
	OK("SET a = if_not_exists(b, pk)", NULL, "{" PK ", \"a\": " S("k") "}");
	OK("SET a = if_not_exists(m.x, :n10)", "{" PK ", \"m\": {\"M\": {\"x\": " N("7") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"x\": " N("7") "}}, \"a\": " N("7") "}");
	/* list_append, both orders, with if_not_exists. */
	OK("SET l = list_append(l, :l)", L4,
	   LIST(S("a") "," S("b") "," S("c") "," S("d") "," S("x") "," S("y")));
	OK("SET l = list_append(:l, l)", L4,
	   LIST(S("x") "," S("y") "," S("a") "," S("b") "," S("c") "," S("d")));
	OK("SET l = list_append(if_not_exists(l, :l1), :l)", NULL,
	   LIST(S("e") "," S("x") "," S("y")));
	OK("SET l = list_append(:l, :l1)", NULL, LIST(S("x") "," S("y") "," S("e")));
	OK("SET l = list_append(l, l)", "{" PK ", \"l\": {\"L\": [" N("1") "]}}",
	   LIST(N("1") "," N("1")));
}
END_TEST

START_TEST(test_arithmetic)
{
	const char *n5 = "{" PK ", \"n\": " N("5") "}";
	OK("SET n = n + :n", n5, "{" PK ", \"n\": " N("6") "}");
	OK("SET n = :n - n", n5, "{" PK ", \"n\": " N("-4") "}");
	OK("SET n = n - :neg", n5, "{" PK ", \"n\": " N("7.5") "}");
	OK("SET n = n + n", n5, "{" PK ", \"n\": " N("10") "}");
	OK("SET c = if_not_exists(c, :zero) + :n", NULL, "{" PK ", \"c\": " N("1") "}");
	OK("SET c = :n10 - :n", NULL, "{" PK ", \"c\": " N("9") "}");
	OK("SET c = (:n10 - :n)", NULL, "{" PK ", \"c\": " N("9") "}");
	/* Exact decimals, not floating point. */
	OK("SET c = :p1 + :p2", NULL, "{" PK ", \"c\": " N("0.3") "}");
	OK("SET c = :d38 + :n", NULL,
	   "{" PK ", \"c\": " N("100000000000000000000000000000000000000") "}");
	OK("SET c = :n - :n", NULL, "{" PK ", \"c\": " N("0") "}");
	/* Beyond DynamoDB's range or precision: refused. */
	ERR("SET c = :big + :big", NULL, MSG_OVERFLOW);
	ERR("SET c = :e50 + :n", NULL, MSG_OVERFLOW);
	ERR("SET c = :d38 + :p1", NULL, MSG_OVERFLOW);
	/* Operands of the wrong type, or absent. */
	ERR("SET c = s + :n", "{" PK ", \"s\": " S("1") "}", MSG_TYPE);
	ERR("SET c = :n - s", "{" PK ", \"s\": " S("1") "}", MSG_TYPE);
	ERR("SET c = l + :n", L4, MSG_TYPE);
	ERR("SET c = zz + :n", NULL, MSG_MISSING);
	ERR("SET c = :n + zz", NULL, MSG_MISSING);
	ERR("SET c = if_not_exists(zz, :s) + :n", NULL, MSG_TYPE);
}
END_TEST

START_TEST(test_remove)
{
	OK("REMOVE s", "{" PK ", \"s\": " S("x") "}", "{" PK "}");
	OK("REMOVE zz", "{" PK "}", "{" PK "}");
	OK("REMOVE zz", NULL, "{" PK "}");
	OK("REMOVE a, b", "{" PK ", \"a\": " S("x") ", \"b\": " S("x") ", \"c\": " S("x") "}",
	   "{" PK ", \"c\": " S("x") "}");
	OK("REMOVE m.x", "{" PK ", \"m\": {\"M\": {\"x\": " N("1") ", \"y\": " N("2") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"y\": " N("2") "}}}");
	OK("REMOVE m.nope", "{" PK ", \"m\": {\"M\": {\"x\": " N("1") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"x\": " N("1") "}}}");
	OK("REMOVE m.x", "{" PK ", \"m\": {\"M\": {\"x\": " N("1") "}}}",
	   "{" PK ", \"m\": {\"M\": {}}}");
	/* List elements shift; several indexes mean the original positions. */
	OK("REMOVE l[1]", L4, LIST(S("a") "," S("c") "," S("d")));
	OK("REMOVE l[0], l[2]", L4, LIST(S("b") "," S("d")));
	OK("REMOVE l[3], l[0]", L4, LIST(S("b") "," S("c")));
	OK("REMOVE l[0], l[1], l[2], l[3]", L4, LIST(""));
	OK("REMOVE l[9]", L4, L4);
	OK("REMOVE l[3], l[4]", L4, LIST(S("a") "," S("b") "," S("c")));
	/* Together with SET on the same list, still by original position. */
	OK("SET l[2] = :s REMOVE l[0]", L4, LIST(S("b") "," S("new") "," S("d")));
	OK("REMOVE l[1] SET l[9] = :s", L4, LIST(S("a") "," S("c") "," S("d") "," S("new")));
	OK("REMOVE l[0].x, l[1]",
	   "{" PK
	   ", \"l\": {\"L\": [{\"M\": {\"x\": " N("1") ", \"y\": " N("2") "}}, " N("3") "]}}",
	   "{" PK ", \"l\": {\"L\": [{\"M\": {\"y\": " N("2") "}}]}}");
}
END_TEST

START_TEST(test_add_delete)
{
	const char *sets =
	    "{" PK ", \"ss\": {\"SS\": [\"a\", \"b\"]}, \"ns\": {\"NS\": [\"1\", \"2\"]}, "
	    "\"bs\": {\"BS\": [\"x\"]}, \"n\": " N("5") "}";
#define SETS(ss, ns, bs, n)                                                                        \
	"{" PK ", \"ss\": {\"SS\": [" ss "]}, \"ns\": {\"NS\": [" ns "]}, \"bs\": {\"BS\": [" bs   \
	"]}, \"n\": " N(n) "}"
	OK("ADD n :n", sets, SETS("\"a\", \"b\"", "\"1\", \"2\"", "\"x\"", "6"));
	OK("ADD n :neg", sets, SETS("\"a\", \"b\"", "\"1\", \"2\"", "\"x\"", "2.5"));
	OK("ADD ss :ss", sets, SETS("\"a\", \"b\", \"c\"", "\"1\", \"2\"", "\"x\"", "5"));
	OK("ADD ns :ns", sets, SETS("\"a\", \"b\"", "\"1\", \"2\", \"3\"", "\"x\"", "5"));
	OK("ADD ns :ns1", sets, SETS("\"a\", \"b\"", "\"1\", \"2\"", "\"x\"", "5"));
	OK("ADD bs :bs", sets, SETS("\"a\", \"b\"", "\"1\", \"2\"", "\"x\", \"y\"", "5"));
	OK("ADD ss :ss, ns :ns, n :n10", sets,
	   SETS("\"a\", \"b\", \"c\"", "\"1\", \"2\", \"3\"", "\"x\"", "15"));
	/* ADD to an absent attribute sets it. */
	OK("ADD c :n", NULL, "{" PK ", \"c\": " N("1") "}");
	OK("ADD c :ss", NULL, "{" PK ", \"c\": {\"SS\": [\"b\", \"c\"]}}");
	OK("ADD m.c :n", "{" PK ", \"m\": {\"M\": {}}}",
	   "{" PK ", \"m\": {\"M\": {\"c\": " N("1") "}}}");
	OK("ADD m.c :n", "{" PK ", \"m\": {\"M\": {\"c\": " N("1") "}}}",
	   "{" PK ", \"m\": {\"M\": {\"c\": " N("2") "}}}");
	OK("ADD l[0] :n", "{" PK ", \"l\": {\"L\": [" N("1") "]}}", LIST(N("2")));
	OK("ADD l[5] :n", "{" PK ", \"l\": {\"L\": [" N("1") "]}}", LIST(N("1") "," N("1")));
	/* DELETE: set difference; emptied sets disappear; absent is fine. */
	OK("DELETE ss :ss", sets, SETS("\"a\"", "\"1\", \"2\"", "\"x\"", "5"));
	OK("DELETE ns :ns1", sets, SETS("\"a\", \"b\"", "\"2\"", "\"x\"", "5"));
	OK("DELETE bs :bs", sets, SETS("\"a\", \"b\"", "\"1\", \"2\"", "\"x\"", "5"));
	OK("DELETE ss :ss_a", sets,
	   "{" PK
	   ", \"ns\": {\"NS\": [\"1\", \"2\"]}, \"bs\": {\"BS\": [\"x\"]}, \"n\": " N("5") "}");
	OK("DELETE zz :ss", sets, sets);
	OK("DELETE zz :ss", NULL, "{" PK "}");
	OK("DELETE m.s :ss", "{" PK ", \"m\": {\"M\": {\"s\": {\"SS\": [\"b\"]}}}}",
	   "{" PK ", \"m\": {\"M\": {}}}");
	OK("DELETE l[0] :ss, l[1] :ss",
	   "{" PK ", \"l\": {\"L\": [{\"SS\": [\"b\"]}, {\"SS\": [\"a\", \"b\"]}]}}",
	   "{" PK ", \"l\": {\"L\": [{\"SS\": [\"a\"]}]}}");
	/* Type mismatches. */
	ERR("ADD ss :ns", sets, MSG_TYPE);
	ERR("ADD ns :n", sets, MSG_TYPE);
	ERR("ADD n :ns", sets, MSG_TYPE);
	ERR("ADD n :ss", sets, MSG_TYPE);
	ERR("ADD s :n", "{" PK ", \"s\": " S("1") "}", MSG_TYPE);
	ERR("ADD l :ss", L4, MSG_TYPE);
	ERR("DELETE ss :ns", sets, MSG_TYPE);
	ERR("DELETE ns :bs", sets, MSG_TYPE);
	ERR("DELETE n :ns", sets, MSG_TYPE);
	ERR("DELETE l :ss", L4, MSG_TYPE);
	ERR("ADD big :e50",
	    "{" PK ", \"big\": " N("9.9999999999999999999999999999999999999E+125") "}",
	    MSG_OVERFLOW);
#undef SETS
}
END_TEST

START_TEST(test_runtime_errors)
{
	/* Operands that refer to nothing. */
	ERR("SET c = zz", OLD, MSG_MISSING);
	ERR("SET c = m.nope", OLD, MSG_MISSING);
	ERR("SET c = l[9]", OLD, MSG_MISSING);
	ERR("SET c = list_append(zz, :l)", OLD, MSG_MISSING);
	ERR("SET c = list_append(:l, zz)", OLD, MSG_MISSING);
	ERR("SET c = if_not_exists(zz, yy)", OLD, MSG_MISSING);
	/* Operands of the wrong type. */
	ERR("SET c = list_append(s, :l)", OLD, MSG_TYPE);
	ERR("SET c = list_append(:l, ns)", OLD, MSG_TYPE);
	ERR("SET c = list_append(d, if_not_exists(f, :l))", "{" PK ", \"d\": {\"NS\": [\"1\"]}}",
	    MSG_TYPE);
	/* The first failing value wins, in source order. */
	ERR("SET c = zz, d = s + :n", OLD, MSG_MISSING);
	ERR("SET d = s + :n, c = zz", OLD, MSG_TYPE);
	/* Paths whose parent is absent or of the wrong type. */
	static const char *const bad_paths[] = {
	    "SET zz.a = :s",     "SET zz[0] = :s",  "SET s.a = :s",      "SET s[0] = :s",
	    "SET m[0] = :s",     "SET l.a = :s",    "SET nul.a = :s",    "SET l[9].x = :s",
	    "SET m.nope.x = :s", "SET l[0].x = :s", "REMOVE zz.a",       "REMOVE s.a",
	    "REMOVE m[1]",       "REMOVE l.x",      "REMOVE zz[1]",      "REMOVE l[9].x",
	    "ADD zz.a :n",       "ADD s.a :n",      "ADD m[0] :n",       "DELETE zz.a :ss",
	    "DELETE s.a :ss",    "DELETE l.#1 :ss", "DELETE m.y[0] :ss", "ADD m.nope.deep :n",
	};
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		err_(bad_paths[i], OLD, MSG_PATH, (int)i);
	/* And on a new item, which is just its key. */
	ERR("SET b.a = :s", NULL, MSG_PATH);
	ERR("SET b[1] = :s", NULL, MSG_PATH);
	ERR("REMOVE b.a", NULL, MSG_PATH);
	ERR("SET c = b", NULL, MSG_MISSING);
}
END_TEST

START_TEST(test_old_untouched)
{
	st_value *old = tl_json_item(&tl_arena, OLD);
	st_value before;
	ck_assert_int_eq(st_value_copy(&tl_arena, old, &before), SHOAL_OK);
	const char *shown = tl_show(&tl_arena, old);
	static const char *const updates[] = {
	    "SET m.y.z = :n, l[1] = :s, l[7] = :s, s = n, n = n + :n",
	    "REMOVE l[0], l[2], m.x, s",
	    "ADD ss :ss, ns :ns, m.ml[0] :n, bs :bs",
	    "DELETE ss :ss_a, ns :ns1",
	    "SET l = list_append(l, :l), m.ml = list_append(:l, m.ml)",
	};
	char msg[SH_ERRMSG_SIZE];
	st_value *key = tl_json_item(&tl_arena, "{\"pk\": {\"S\": \"k\"}}");
	for (size_t i = 0; i < sizeof(updates) / sizeof(updates[0]); i++) {
		st_value *out;
		st_expr *e = parse_update(updates[i]);
		ck_assert_int_eq(st_expr_update(e, &tl_arena, old, key, &out, msg), SHOAL_OK);
		ck_assert(!st_value_equal(out, old));
		ck_assert(st_value_equal(old, &before));
		ck_assert_str_eq(tl_show(&tl_arena, old), shown);
	}
	/* A failing update leaves it alone too. */
	st_value *out;
	ck_assert_int_eq(st_expr_update(parse_update("REMOVE l[0] SET s.x = :s"), &tl_arena, old,
	                                key, &out, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_show(&tl_arena, old), shown);
}
END_TEST

static st_value *updated(const char *text, const st_value *item)
{
	st_value *out;
	char msg[SH_ERRMSG_SIZE];
	int rc = st_expr_update_project(parse_update(text), &tl_arena, item, &out, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", msg);
	return out;
}

START_TEST(test_update_project)
{
	st_value *old = tl_json_item(&tl_arena, OLD), *new;
	char msg[SH_ERRMSG_SIZE];
	const char *text = "SET m.y.z = :n, l[1] = :s REMOVE s ADD zz :ss DELETE ss :ss";
	st_value *key = tl_json_item(&tl_arena, "{\"pk\": {\"S\": \"k\"}}");
	ck_assert_int_eq(st_expr_update(parse_update(text), &tl_arena, old, key, &new, msg),
	                 SHOAL_OK);
	/* UPDATED_OLD: what the paths held before (zz did not exist). */
	tl_assert_item(
	    &tl_arena, updated(text, old),
	    "{\"m\": {\"M\": {\"y\": {\"M\": {\"z\": " S("deep") "}}}}, \"l\": {\"L\": [" S(
	        "b") "]}, \"s\": " S("str") ", \"ss\": {\"SS\": [\"a\", \"b\"]}}");
	/* UPDATED_NEW: what they hold now (s is gone). */
	tl_assert_item(
	    &tl_arena, updated(text, new),
	    "{\"m\": {\"M\": {\"y\": {\"M\": {\"z\": " N("1") "}}}}, \"l\": {\"L\": [" S(
	        "new") "]}, \"zz\": {\"SS\": [\"b\", \"c\"]}, \"ss\": {\"SS\": [\"a\"]}}");
	/* List elements come back compacted, in index order. */
	tl_assert_item(&tl_arena, updated("REMOVE l[3], l[1]", old),
	               "{\"l\": {\"L\": [" S("b") ", " S("d") "]}}");
	tl_assert_item(&tl_arena, updated("SET m.ml[1] = :n, m.x = :n", old),
	               "{\"m\": {\"M\": {\"ml\": {\"L\": [" N("2") "]}, \"x\": " N("1") "}}}");
	/* Nothing at the paths: an empty map. */
	st_value *empty = updated("REMOVE zz, yy.x", old);
	ck_assert_int_eq(empty->type, ST_M);
	ck_assert_uint_eq(empty->u.map.n, 0);
	/* The result is a deep copy. */
	st_value *u = updated("SET s = :s", old);
	ck_assert_ptr_ne(st_map_get(u, "s", 1)->u.str.ptr, st_map_get(old, "s", 1)->u.str.ptr);
}
END_TEST

static st_value *project(const char *text, const st_value *item)
{
	st_expr_attrs attrs = {tl_json_names(&tl_arena, "{\"#n\": \"n\", \"#dot\": \"a.b\"}"),
	                       NULL};
	st_expr_ctx ctx;
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	st_value *out;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_OK);
	int rc = st_expr_parse(&ctx, ST_EXPR_PROJECTION, text, &e, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
	ck_assert_int_eq(st_expr_project(e, &tl_arena, item, &out, msg), SHOAL_OK);
	return out;
}

START_TEST(test_project)
{
	st_value *old = tl_json_item(&tl_arena, OLD);
	tl_assert_item(&tl_arena, project("s", old), "{\"s\": " S("str") "}");
	tl_assert_item(&tl_arena, project("s, #n, zz", old),
	               "{\"s\": " S("str") ", \"n\": " N("5") "}");
	tl_assert_item(
	    &tl_arena, project("m.y.z, l[3], l[1], m.ml[1], m.zz, l[9]", old),
	    "{\"m\": {\"M\": {\"y\": {\"M\": {\"z\": " S("deep") "}}, \"ml\": {\"L\": [" N(
	        "2") "]}}}, \"l\": {\"L\": [" S("b") ", " S("d") "]}}");
	tl_assert_item(&tl_arena, project("m", old),
	               "{\"m\": {\"M\": {\"x\": " N("1") ", \"y\": {\"M\": {\"z\": " S(
	                   "deep") "}}, "
	                           "\"ml\": {\"L\": [" N("1") "," N("2") "]}}}}");
	tl_assert_item(&tl_arena, project("ss, nul", old),
	               "{\"ss\": {\"SS\": [\"a\", \"b\"]}, \"nul\": {\"NULL\": true}}");
	/* Paths through the wrong type lead nowhere. */
	tl_assert_item(&tl_arena, project("s.x, l.x, m[0], n[0]", old), "{}");
	/* A name with a dot, through a placeholder. */
	st_value *dotted =
	    tl_json_item(&tl_arena, "{\"a.b\": " N("1") ", \"a\": {\"M\": {\"b\": " N("2") "}}}");
	tl_assert_item(&tl_arena, project("#dot", dotted), "{\"a.b\": " N("1") "}");
	tl_assert_item(&tl_arena, project("a.b", dotted), "{\"a\": {\"M\": {\"b\": " N("2") "}}}");
	/* No item. */
	st_value *none = project("a, b", NULL);
	ck_assert_int_eq(none->type, ST_M);
	ck_assert_uint_eq(none->u.map.n, 0);
}
END_TEST

/* Every allocation failing in turn: SHOAL_E_NOMEM, never a crash, and
 * eventually success. */
START_TEST(test_alloc_failures)
{
	const char *text = "SET m.y.z = :n, l[1] = :s, l[9] = :s, c = list_append(:l, l), "
	                   "n = n + :n REMOVE l[0], s ADD ss :ss, zz :ns DELETE ns :ns1";
	st_value *old = tl_json_item(&tl_arena, OLD);
	st_value *key = tl_json_item(&tl_arena, "{\"pk\": {\"S\": \"k\"}}");
	st_expr *e = parse_update(text);
	bool succeeded = false;
	for (long n = 1; n < 500 && !succeeded; n++) {
		sh_arena a;
		sh_arena_init(&a);
		char msg[SH_ERRMSG_SIZE];
		st_value *out = NULL, *proj = NULL;
		sh_fault_arm(SH_FAULT_ALLOC, n, true);
		int rc = st_expr_update(e, &a, old, key, &out, msg);
		if (rc == SHOAL_OK)
			rc = st_expr_update_project(e, &a, out, &proj, msg);
		sh_fault_reset();
		ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_NOMEM, "%d %s", rc, msg);
		succeeded = rc == SHOAL_OK;
		sh_arena_fini(&a);
	}
	ck_assert(succeeded);
}
END_TEST

static Suite *expr_update_suite(void)
{
	return tl_suite("expr_update", tl_arena_setup, tl_arena_teardown, 0,
	                TL_TESTS(test_set, test_arithmetic, test_remove, test_add_delete,
	                         test_runtime_errors, test_old_untouched, test_update_project,
	                         test_project, test_alloc_failures));
}

TL_MAIN(expr_update_suite)
