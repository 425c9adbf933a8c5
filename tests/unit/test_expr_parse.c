/* The expression parser: every syntax form, precedence, and every error
 * message st_expr_parse and the contexts give (DynamoDB's texts). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/expr.h"
#include "storage/expr_int.h"
#include "tests/lib/tl_values.h"

#define NAMES "{\"#a\": \"a\", \"#b\": \"b\", \"#c\": \"c\", \"#d\": \"[3]\", \"#1\": \"1\"}"
#define VALUES                                                                                     \
	"{\":s\": {\"S\": \"x\"}, \":s2\": {\"S\": \"y\"}, \":n\": {\"N\": \"5\"}, \":n2\": "      \
	"{\"N\": "                                                                                 \
	"\"10\"}, \":b\": {\"B\": \"ab\"}, \":t\": {\"S\": \"S\"}, \":l\": {\"L\": []}, \":m\": "  \
	"{\"M\": {}}, \":ss\": {\"SS\": [\"x\"]}, \":ns\": {\"NS\": [\"1\"]}, \":bs\": {\"BS\": "  \
	"[\"ab\"]}, \":bool\": {\"BOOL\": true}, \":null\": {\"NULL\": true}}"

static st_expr_ctx CTX;

/* Parses with the given names and values (JSON, NULL for none). */
static int parse_nv(st_expr_kind kind, const char *text, const char *names, const char *values,
                    st_expr **e, char *msg)
{
	st_expr_attrs attrs = {tl_json_names(&tl_arena, names),
	                       values ? tl_json_item(&tl_arena, values) : NULL};
	msg[0] = '\0';
	int rc = st_expr_ctx_init(&CTX, &tl_arena, &attrs, msg);
	ck_assert_msg(rc == SHOAL_OK, "ctx: %s", msg);
	return st_expr_parse(&CTX, kind, text, e, msg);
}

static st_expr *ok_(st_expr_kind kind, const char *text, int line)
{
	char msg[SH_ERRMSG_SIZE];
	st_expr *e = NULL;
	int rc = parse_nv(kind, text, NAMES, VALUES, &e, msg);
	ck_assert_msg(rc == SHOAL_OK, "line %d: %s: %s", line, text, msg);
	ck_assert_ptr_nonnull(e);
	return e;
}

static void err_(st_expr_kind kind, const char *text, const char *want, int line)
{
	char msg[SH_ERRMSG_SIZE];
	st_expr *e = NULL;
	int rc = parse_nv(kind, text, NAMES, VALUES, &e, msg);
	ck_assert_msg(rc == SHOAL_E_VALIDATION, "line %d: %s: rc %d, %s", line, text, rc, msg);
	ck_assert_msg(strcmp(msg, want) == 0, "line %d: %s\n got: %s\nwant: %s", line, text, msg,
	              want);
	ck_assert_ptr_null(e);
}

#define OK(kind, text)        ok_(kind, text, __LINE__)
#define ERR(kind, text, want) err_(kind, text, want, __LINE__)
#define C                     ST_EXPR_CONDITION
#define F                     ST_EXPR_FILTER
#define K                     ST_EXPR_KEY_CONDITION
#define U                     ST_EXPR_UPDATE
#define P                     ST_EXPR_PROJECTION

START_TEST(test_condition_forms)
{
	static const char *const ok[] = {
	    "a = :s",
	    "a <> :s",
	    "a < :n",
	    "a <= :n",
	    "a > :n",
	    "a >= :n",
	    ":s = a",
	    "a = b",
	    "a.b.c = :s",
	    "a[0] = :s",
	    "a[10][2].b[0] = :s",
	    "#a = :s",
	    "#a.#b[1].#c = :s",
	    "#d = :s",
	    "a BETWEEN :n AND :n2",
	    "a between :n and :n2",
	    "a IN (:s)",
	    "a in (:s, :s2, :n, b.c)",
	    "attribute_exists(a)",
	    "attribute_not_exists(a.b[1])",
	    "attribute_type(a, :t)",
	    "begins_with(a, :s)",
	    "begins_with(a, :b)",
	    "begins_with(a, b)",
	    "contains(a, :s)",
	    "contains(a, :n)",
	    "size(a) > :n",
	    ":n < size(a)",
	    "size(a) BETWEEN :n AND :n2",
	    "size(a) IN (:n, :n2)",
	    "size(a) = size(b)",
	    "NOT a = :s",
	    "not attribute_exists(a)",
	    "NOT NOT a = :s",
	    "a = :s AND b = :s",
	    "a = :s OR b = :s",
	    "a = :s and b = :s or c = :s and d = :s",
	    "(a = :s)",
	    "(a) = :s",
	    "a = (:s)",
	    "((a) = :s)",
	    "(a = :s) AND (b = :s)",
	    "NOT (a = :s OR b = :s)",
	    "(NOT a = :s) OR b = :s",
	    "a IN ((:s), b)",
	    "a=:s AND(b=:s)OR(c<>:s)",
	    "\t a \r\n=\n:s ",
	    "a1_B = :s",
	    "contains(a, size(b))",
	    "attribute_type(a, :t) AND begins_with(b, :s)",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		OK(C, ok[i]);
		OK(F, ok[i]);
	}
}
END_TEST

START_TEST(test_syntax_errors)
{
	static const struct {
		st_expr_kind kind;
		const char *text, *msg;
	} cases[] = {
	    /* Observed against DynamoDB (near = the token before, the token, the one after). */
	    {U, "INVALID SYNTAX HERE",
	     "Invalid UpdateExpression: Syntax error; token: \"INVALID\", near: \"INVALID "
	     "SYNTAX\""},
	    {C, "a-b", "Invalid ConditionExpression: Syntax error; token: \"-\", near: \"a-b\""},
	    {F, "a-b", "Invalid FilterExpression: Syntax error; token: \"-\", near: \"a-b\""},
	    {K, "a-b", "Invalid KeyConditionExpression: Syntax error; token: \"-\", near: \"a-b\""},
	    {P, "!!! INVALID !!!",
	     "Invalid ProjectionExpression: Syntax error; token: \"!\", near: \"!!\""},
	    {U, "set _something = :s",
	     "Invalid UpdateExpression: Syntax error; token: \"_\", near: \"set _something\""},
	    {C, "__typename <> :s",
	     "Invalid ConditionExpression: Syntax error; token: \"_\", near: \"__\""},
	    {F, "_type = :s",
	     "Invalid FilterExpression: Syntax error; token: \"_\", near: \"_type\""},
	    {U, "ADD hits : incr",
	     "Invalid UpdateExpression: Syntax error; token: \":\", near: \"hits : incr\""},
	    {K, "begins_with()",
	     "Invalid KeyConditionExpression: Syntax error; token: \")\", near: \"()\""},
	    {K, "GI-1-PK = :s",
	     "Invalid KeyConditionExpression: Syntax error; token: \"-\", near: \"GI-1\""},
	    {K, "a = :s AND _sortKey = :s",
	     "Invalid KeyConditionExpression: Syntax error; token: \"_\", near: \"AND _sortKey\""},
	    /* Whitespace, the end of the text, and the token after. */
	    {U, "SET MyStr[ 3",
	     "Invalid UpdateExpression: Syntax error; token: \"<EOF>\", near: \"3\""},
	    {U, "SET MyStr[ 3 ",
	     "Invalid UpdateExpression: Syntax error; token: \"<EOF>\", near: \"3 \""},
	    {U, "SET MyStr[3 )",
	     "Invalid UpdateExpression: Syntax error; token: \")\", near: \"3 )\""},
	    {U, "SET attrName = 3",
	     "Invalid UpdateExpression: Syntax error; token: \"3\", near: \"= 3\""},
	    {U, "SET 2", "Invalid UpdateExpression: Syntax error; token: \"2\", near: \"SET 2\""},
	    {U, "2", "Invalid UpdateExpression: Syntax error; token: \"2\", near: \"2\""},
	    {U, "SET ) 3",
	     "Invalid UpdateExpression: Syntax error; token: \")\", near: \"SET ) 3\""},
	    {U, "SET MyStr = (:s",
	     "Invalid UpdateExpression: Syntax error; token: \"<EOF>\", near: \":s\""},
	    {U, "SET MyStr = [:s  ",
	     "Invalid UpdateExpression: Syntax error; token: \"[\", near: \"= [:s\""},
	    {U, "SET MyStr = ):s + :s2",
	     "Invalid UpdateExpression: Syntax error; token: \")\", near: \"= ):s\""},
	    {U, "  RESET NonExistent value",
	     "Invalid UpdateExpression: Syntax error; token: \"RESET\", near: \"  RESET "
	     "NonExistent\""},
	    {U, "RESET",
	     "Invalid UpdateExpression: Syntax error; token: \"RESET\", near: \"RESET\""},
	    {U, "SET a [  [2] ]. b = :s",
	     "Invalid UpdateExpression: Syntax error; token: \"[\", near: \"[  [2\""},
	    {U, "SET a [2 1]. b = :s",
	     "Invalid UpdateExpression: Syntax error; token: \"1\", near: \"2 1]\""},
	    {U, "SET #a a = :s",
	     "Invalid UpdateExpression: Syntax error; token: \"a\", near: \"#a a =\""},
	    {U, "SET a = b + + :s",
	     "Invalid UpdateExpression: Syntax error; token: \"+\", near: \"+ + :s\""},
	    {U, "REMOVE b + ",
	     "Invalid UpdateExpression: Syntax error; token: \"+\", near: \"b + \""},
	    {U, "ADD attr val foobar",
	     "Invalid UpdateExpression: Syntax error; token: \"val\", near: \"attr val foobar\""},
	    {U, "DELETE attr :s foobar",
	     "Invalid UpdateExpression: Syntax error; token: \"foobar\", near: \":s foobar\""},
	    {U, "REMOVE if_not_exists(a,b)",
	     "Invalid UpdateExpression: Syntax error; token: \"(\", near: \"if_not_exists(a\""},
	    {U, "SET a = :s,",
	     "Invalid UpdateExpression: Syntax error; token: \"<EOF>\", near: \",\""},
	    {U, "SET a = b + c + d",
	     "Invalid UpdateExpression: Syntax error; token: \"+\", near: \"c + d\""},
	    {U, "SET a = (b + c) - d",
	     "Invalid UpdateExpression: Syntax error; token: \"-\", near: \") - d\""},
	    {U, "SET a = b * c",
	     "Invalid UpdateExpression: Syntax error; token: \"*\", near: \"b * c\""},
	    {U, "set a[1] = \"eight\"",
	     "Invalid UpdateExpression: Syntax error; token: \"\"eight\"\", near: \"= \"eight\"\""},
	    {U, "set (a = b)",
	     "Invalid UpdateExpression: Syntax error; token: \"(\", near: \"set (a\""},
	    {U, "set a = (b.c).d",
	     "Invalid UpdateExpression: Syntax error; token: \".\", near: \").d\""},
	    {U, "set a=set",
	     "Invalid UpdateExpression: Syntax error; token: \"set\", near: \"=set\""},
	    {U, "set a", "Invalid UpdateExpression: Syntax error; token: \"<EOF>\", near: \"a\""},
	    {U, "remove :s",
	     "Invalid UpdateExpression: Syntax error; token: \":s\", near: \"remove :s\""},
	    {U, "SET a = list_append(a + b, c)",
	     "Invalid UpdateExpression: Syntax error; token: \"+\", near: \"a + b\""},
	    {C, "things are not gonna be ok",
	     "Invalid ConditionExpression: Syntax error; token: \"are\", near: \"things are not\""},
	    {C, "a > 4", "Invalid ConditionExpression: Syntax error; token: \"4\", near: \"> 4\""},
	    {C, "attribute_exists(Pictures..RearView)",
	     "Invalid ConditionExpression: Syntax error; token: \".\", near: \"..RearView\""},
	    {C, "attribute_exists(asdf[a])",
	     "Invalid ConditionExpression: Syntax error; token: \"a\", near: \"[a]\""},
	    {C, "attribute_exists(\"Pictures.RearView\")",
	     "Invalid ConditionExpression: Syntax error; token: \"\"Pictures.RearView\"\", near: "
	     "\"(\"Pictures.RearView\")\""},
	    {C, "a in b",
	     "Invalid ConditionExpression: Syntax error; token: \"b\", near: \"in b\""},
	    {C, "a in (b,c,)",
	     "Invalid ConditionExpression: Syntax error; token: \")\", near: \",)\""},
	    {C, "a > between",
	     "Invalid ConditionExpression: Syntax error; token: \"between\", near: \"> between\""},
	    {C, "a = :s AND",
	     "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \"AND\""},
	    {C, "a", "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \"a\""},
	    {C, "(a)", "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \")\""},
	    {C, "NOT a",
	     "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \"a\""},
	    {C, "a AND b = :s",
	     "Invalid ConditionExpression: Syntax error; token: \"AND\", near: \"a AND b\""},
	    {C, "(a = :s) = :s",
	     "Invalid ConditionExpression: Syntax error; token: \"=\", near: \") = :s\""},
	    {C, "a < :s < :s",
	     "Invalid ConditionExpression: Syntax error; token: \"<\", near: \":s < :s\""},
	    {C, "size(a).b > :n",
	     "Invalid ConditionExpression: Syntax error; token: \".\", near: \").b\""},
	    {C, "size(a)[0] > :n",
	     "Invalid ConditionExpression: Syntax error; token: \"[\", near: \")[0\""},
	    {C, "#$.b > a",
	     "Invalid ConditionExpression: Syntax error; token: \"#\", near: \"#$\""},
	    {C, "a > :s.b",
	     "Invalid ConditionExpression: Syntax error; token: \".\", near: \":s.b\""},
	    {C, "b[:s] > a",
	     "Invalid ConditionExpression: Syntax error; token: \":s\", near: \"[:s]\""},
	    {C, "b[#a] > a",
	     "Invalid ConditionExpression: Syntax error; token: \"#a\", near: \"[#a]\""},
	    {C, "\xc3\xbc > a",
	     "Invalid ConditionExpression: Syntax error; token: \"\xc3\xbc\", near: \"\xc3\xbc "
	     ">\""},
	    {C, "a[4.5] = :s",
	     "Invalid ConditionExpression: Syntax error; token: \".\", near: \"4.5\""},
	    {C, "a[01] = :s",
	     "Invalid ConditionExpression: Syntax error; token: \"1\", near: \"01]\""},
	    {C, "a = set",
	     "Invalid ConditionExpression: Syntax error; token: \"set\", near: \"= set\""},
	    {C, "a BETWEEN :n OR :n2",
	     "Invalid ConditionExpression: Syntax error; token: \"OR\", near: \":n OR :n2\""},
	    {C, "attribute_exists(a = :s)",
	     "Invalid ConditionExpression: Syntax error; token: \"=\", near: \"a = :s\""},
	    {C, "a = :s)",
	     "Invalid ConditionExpression: Syntax error; token: \")\", near: \":s)\""},
	    {C, "(a = :s",
	     "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \":s\""},
	    {C, "a = :", "Invalid ConditionExpression: Syntax error; token: \":\", near: \"= :\""},
	    {C, "a = #", "Invalid ConditionExpression: Syntax error; token: \"#\", near: \"= #\""},
	    {C, " ", "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \" \""},
	    {P, "whatever(stuff)",
	     "Invalid ProjectionExpression: Syntax error; token: \"(\", near: \"whatever(stuff\""},
	    {P, ":a", "Invalid ProjectionExpression: Syntax error; token: \":a\", near: \":a\""},
	    {P, "a,", "Invalid ProjectionExpression: Syntax error; token: \"<EOF>\", near: \",\""},
	    {P, "a,,b", "Invalid ProjectionExpression: Syntax error; token: \",\", near: \",,b\""},
	    {P, "a..b", "Invalid ProjectionExpression: Syntax error; token: \".\", near: \"..b\""},
	    {P, "a[b]", "Invalid ProjectionExpression: Syntax error; token: \"b\", near: \"[b]\""},
	    {P, "(a)", "Invalid ProjectionExpression: Syntax error; token: \"(\", near: \"(a\""},
	    {P, "a b", "Invalid ProjectionExpression: Syntax error; token: \"b\", near: \"a b\""},
	    {P, "a, delete",
	     "Invalid ProjectionExpression: Syntax error; token: \"delete\", near: \", delete\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		err_(cases[i].kind, cases[i].text, cases[i].msg, (int)i);
}
END_TEST

/* The AST shows the precedence: comparisons and functions, then NOT, AND, OR. */
START_TEST(test_precedence)
{
	st_expr *e = OK(C, "a = :s OR b = :s AND NOT c = :s AND attribute_exists(d) OR e < :n");
	st_node *r = e->cond;
	ck_assert_int_eq(r->kind, N_OR);
	ck_assert_uint_eq(r->nargs, 3);
	ck_assert_int_eq(r->args[0]->kind, N_CMP);
	st_node *and = r->args[1];
	ck_assert_int_eq(and->kind, N_AND);
	ck_assert_uint_eq(and->nargs, 3);
	ck_assert_int_eq(and->args[0]->kind, N_CMP);
	ck_assert_int_eq(and->args[1]->kind, N_NOT);
	ck_assert_int_eq(and->args[1]->args[0]->kind, N_CMP);
	ck_assert_int_eq(and->args[2]->kind, N_FUNC);
	ck_assert_int_eq(and->args[2]->op, FN_ATTRIBUTE_EXISTS);
	ck_assert_int_eq(r->args[2]->kind, N_CMP);
	ck_assert_int_eq(r->args[2]->op, CMP_LT);

	/* NOT binds tighter than AND: (NOT a) AND b. */
	e = OK(C, "NOT a = :s AND b = :s");
	ck_assert_int_eq(e->cond->kind, N_AND);
	ck_assert_int_eq(e->cond->args[0]->kind, N_NOT);

	/* Parentheses regroup; BETWEEN's AND belongs to BETWEEN. */
	e = OK(C, "(a = :s OR b = :s) AND c BETWEEN :n AND :n2");
	ck_assert_int_eq(e->cond->kind, N_AND);
	ck_assert_uint_eq(e->cond->nargs, 2);
	ck_assert_int_eq(e->cond->args[0]->kind, N_OR);
	ck_assert_int_eq(e->cond->args[1]->kind, N_BETWEEN);
	ck_assert_uint_eq(e->cond->args[1]->nargs, 3);

	e = OK(C, "a IN (:s, :s2, :n)");
	ck_assert_int_eq(e->cond->kind, N_IN);
	ck_assert_uint_eq(e->cond->nargs, 4);

	/* Paths are resolved: names, indexes, #placeholders. */
	e = OK(C, "#a.b[12].#d = :s");
	st_path *p = &e->cond->args[0]->path;
	ck_assert_uint_eq(p->n, 4);
	ck_assert_int_eq(p->e[0].len, 1);
	ck_assert_int_eq(memcmp(p->e[0].name, "a", 1), 0);
	ck_assert(p->e[2].is_index);
	ck_assert_uint_eq(p->e[2].index, 12);
	ck_assert_int_eq(memcmp(p->e[3].name, "[3]", 3), 0);
	ck_assert(!p->e[3].is_index);

	/* Updates keep their actions in source order, clauses in any order. */
	e = OK(U, "REMOVE x, y[2] ADD n :n SET a = b + :n, c = list_append(:l, d) DELETE s :ss");
	ck_assert_uint_eq(e->nactions, 6);
	ck_assert_int_eq(e->actions[0].kind, ACT_REMOVE);
	ck_assert_int_eq(e->actions[1].kind, ACT_REMOVE);
	ck_assert_int_eq(e->actions[2].kind, ACT_ADD);
	ck_assert_int_eq(e->actions[3].kind, ACT_SET);
	ck_assert_int_eq(e->actions[3].value->kind, N_ARITH);
	ck_assert_int_eq(e->actions[3].value->op, '+');
	ck_assert_int_eq(e->actions[4].value->kind, N_FUNC);
	ck_assert_int_eq(e->actions[5].kind, ACT_DELETE);

	e = OK(P, "a, b.c[1], #c.#b");
	ck_assert_uint_eq(e->npaths, 3);
	ck_assert_uint_eq(e->paths[1].n, 3);
}
END_TEST

START_TEST(test_update_forms)
{
	static const char *const ok[] = {
	    "SET a = :s",
	    "set a = :s, b = c",
	    "SET a.b[2].c = :s",
	    "SET a = b + :n",
	    "SET a = :n - b",
	    "SET a = (b + :n)",
	    "SET a = (:s)",
	    "SET a = (b) + (:n)",
	    "SET a = if_not_exists(a, :n)",
	    "SET a = if_not_exists(a, :n) + :n",
	    "SET a = list_append(a, :l)",
	    "SET a = list_append(:l, a)",
	    "SET a = list_append(if_not_exists(a, :l), :l)",
	    "SET a = if_not_exists(b, list_append(:l, c))",
	    "REMOVE a",
	    "remove a, b.c, d[3]",
	    "ADD a :n",
	    "ADD a :ss, b :ns, c :bs",
	    "DELETE a :ss",
	    "delete a.b :ns",
	    "SET a = :s REMOVE b",
	    "REMOVE b SET a = :s",
	    "SET a = :s REMOVE b ADD c :n DELETE d :ss",
	    "DELETE d :ss ADD c :n REMOVE b SET a = :s",
	    "SET a = b, b = a",
	    "SET #a = :s, #b.#c = :s",
	    "SET a[0] = :s, a[1] = :s",
	    "REMOVE a[0], a[2]",
	    "SET a.b = :s, a.c = :s",
	    "  SET   a=:s  ",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		OK(U, ok[i]);
}
END_TEST

START_TEST(test_reserved_words)
{
	ck_assert(st_expr_is_reserved("ABORT", 5));
	ck_assert(st_expr_is_reserved("abort", 5));
	ck_assert(st_expr_is_reserved("zone", 4));
	ck_assert(st_expr_is_reserved("status", 6));
	ck_assert(st_expr_is_reserved("Name", 4));
	ck_assert(st_expr_is_reserved("DATA", 4));
	ck_assert(st_expr_is_reserved("size", 4));
	ck_assert(!st_expr_is_reserved("REMOVE", 6));
	ck_assert(!st_expr_is_reserved("abortx", 6));
	ck_assert(!st_expr_is_reserved("", 0));
	ck_assert(!st_expr_is_reserved("a", 1));
	ck_assert(!st_expr_is_reserved("ABORTABORTABORTABORT", 20));

	ERR(C, "attribute_exists(views, #a)",
	    "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "views");
	ERR(F, ":s < abOrT",
	    "Invalid FilterExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "abOrT");
	ERR(C, "a.status = :s",
	    "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "status");
	ERR(U, " set #c = :s set abOrt = :s ",
	    "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "abOrt");
	ERR(U, " remove Absolute ",
	    "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "Absolute");
	ERR(U, "SET a = if_not_exists(name, :s)",
	    "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "name");
	ERR(P, "a.abORt",
	    "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "abORt");
	ERR(P, "#a,ABSoLUTE",
	    "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "ABSoLUTE");
	ERR(K, "zone = :s",
	    "Invalid KeyConditionExpression: Attribute name is a reserved keyword; reserved "
	    "keyword: zone");
	/* Function names are not attribute names. */
	OK(C, "size(a) > :n");
	/* A placeholder for a reserved word is the way round it. */
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	ck_assert_int_eq(
	    parse_nv(U, "SET #s = :s", "{\"#s\": \"status\"}", "{\":s\": {\"S\": \"x\"}}", &e, msg),
	    SHOAL_OK);
}
END_TEST

START_TEST(test_placeholders)
{
	ERR(F, "attribute_exists(#Pictures.RearView) and a=:s",
	    "Invalid FilterExpression: An expression attribute name used in the document path is "
	    "not "
	    "defined; attribute name: #Pictures");
	ERR(F, "#4g > a",
	    "Invalid FilterExpression: An expression attribute name used in the document path is "
	    "not "
	    "defined; attribute name: #4g");
	ERR(F, "(a)between(b.c[45].#e)and(:s)",
	    "Invalid FilterExpression: An expression attribute name used in the document path is "
	    "not "
	    "defined; attribute name: #e");
	ERR(F, "begins_with(:hello, #a)",
	    "Invalid FilterExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :hello");
	ERR(F, ":x < :y",
	    "Invalid FilterExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :x");
	ERR(F, ":_ > a",
	    "Invalid FilterExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :_");
	/* In an update, every undefined name is reported before any undefined value. */
	ERR(U, "SET a = :zz, #zz = :s",
	    "Invalid UpdateExpression: An expression attribute name used in the document path is "
	    "not "
	    "defined; attribute name: #zz");
	ERR(U, "SET a = :zz",
	    "Invalid UpdateExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :zz");
	ERR(P, "a, #zz",
	    "Invalid ProjectionExpression: An expression attribute name used in the document path "
	    "is "
	    "not defined; attribute name: #zz");
	/* In a condition, names and values come in source order. */
	ERR(C, "a = :zz AND #zz = :s",
	    "Invalid ConditionExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :zz");

	/* No maps at all. */
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	ck_assert_int_eq(parse_nv(U, "SET attr1 = :v", NULL, NULL, &e, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Invalid UpdateExpression: An expression attribute value used in "
	                      "expression is not defined; attribute value: :v");
	ck_assert_int_eq(parse_nv(F, "#missing = a", NULL, NULL, &e, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Invalid FilterExpression: An expression attribute name used in the "
	                      "document path is not defined; attribute name: #missing");
}
END_TEST

START_TEST(test_unused)
{
	char msg[SH_ERRMSG_SIZE];
	st_expr *e1, *e2;
	const char *names = "{\"#a\": \"a\", \"#b\": \"b\", \"#c\": \"c\"}";
	const char *values =
	    "{\":a\": {\"S\": \"x\"}, \":b\": {\"S\": \"y\"}, \":c\": {\"N\": \"1\"}}";

	/* Used across two expressions of one request: nothing unused. */
	ck_assert_int_eq(parse_nv(U, "SET #a = :a, #b = :b", names, values, &e1, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_parse(&CTX, C, "#c = :c", &e2, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_check_unused(&CTX, msg), SHOAL_OK);

	/* Names are reported before values, all of them, in map order. */
	ck_assert_int_eq(parse_nv(U, "SET a = :a", names, values, &e1, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_check_unused(&CTX, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Value provided in ExpressionAttributeNames unused in expressions: "
	                      "keys: {#a, #b, #c}");
	ck_assert_int_eq(parse_nv(U, "SET #a = :a, #b = :a", names, values, &e1, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_parse(&CTX, P, "#c", &e2, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_check_unused(&CTX, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Value provided in ExpressionAttributeValues unused in expressions: "
	                      "keys: {:b, :c}");
	ck_assert_int_eq(parse_nv(U, "SET attr1 = :v", "{\"#unused\": \"x\"}",
	                          "{\":v\": {\"S\": \"val\"}}", &e1, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_check_unused(&CTX, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Value provided in ExpressionAttributeNames unused in expressions: keys: "
	                 "{#unused}");

	/* No maps: nothing to report. */
	ck_assert_int_eq(parse_nv(P, "a", NULL, NULL, &e1, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_check_unused(&CTX, msg), SHOAL_OK);
}
END_TEST

START_TEST(test_ctx_init)
{
	char msg[SH_ERRMSG_SIZE];
	st_expr_ctx ctx;
	st_expr_attrs attrs = {st_new_map(&tl_arena, 0), NULL};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "ExpressionAttributeNames must not be empty");
	attrs = (st_expr_attrs){NULL, st_new_map(&tl_arena, 0)};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "ExpressionAttributeValues must not be empty");
	attrs = (st_expr_attrs){tl_json_names(&tl_arena, "{\"a\": \"a\"}"), NULL};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "ExpressionAttributeNames contains invalid key: Syntax error; key: \"a\"");
	attrs = (st_expr_attrs){tl_json_names(&tl_arena, "{\"#a-b\": \"a\"}"), NULL};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(
	    msg, "ExpressionAttributeNames contains invalid key: Syntax error; key: \"#a-b\"");
	attrs = (st_expr_attrs){tl_json_names(&tl_arena, "{\"#\": \"a\"}"), NULL};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	attrs = (st_expr_attrs){tl_json_names(&tl_arena, "{\"#a\": \"\"}"), NULL};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "ExpressionAttributeNames contains invalid value: Empty attribute name "
	                 "for key #a");
	attrs = (st_expr_attrs){NULL, tl_json_item(&tl_arena, "{\"b\": {\"S\": \"a\"}}")};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(
	    msg, "ExpressionAttributeValues contains invalid key: Syntax error; key: \"b\"");
	attrs = (st_expr_attrs){tl_json_names(&tl_arena, "{\"#_1\": \"a\"}"),
	                        tl_json_item(&tl_arena, "{\":_X9\": {\"S\": \"a\"}}")};
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, &attrs, msg), SHOAL_OK);
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &tl_arena, NULL, msg), SHOAL_OK);
}
END_TEST

START_TEST(test_functions)
{
	/* Unknown names, case-sensitive, kind by kind. */
	ERR(F, "a=:s and whatever((:s)) > a",
	    "Invalid FilterExpression: Invalid function name; function: whatever");
	ERR(F, "attRIbute_exIsts((views), #a)",
	    "Invalid FilterExpression: Invalid function name; function: attRIbute_exIsts");
	ERR(C, "if_not_exists(a, :s) = :s",
	    "Invalid ConditionExpression: Invalid function name; function: if_not_exists");
	ERR(U, "SET a = size(b)",
	    "Invalid UpdateExpression: Invalid function name; function: size");
	ERR(U, "set #c = if_not_exist(:s) set c = d",
	    "Invalid UpdateExpression: Invalid function name; function: if_not_exist");
	/* Used the wrong way. */
	static const char *const misused[][2] = {
	    {"a=:s and attribute_exists((views), (#a)) > b", "attribute_exists"},
	    {"attribute_not_exists(things) > b", "attribute_not_exists"},
	    {"attribute_type(things, :t) > b", "attribute_type"},
	    {"begins_with(things, a) > b", "begins_with"},
	    {"contains(:s, c) > b", "contains"},
	    {"size(contains(a, b)) > a", "contains"},
	    {"size(things)", "size"},
	    {"a = :s AND size(b)", "size"},
	    {"NOT size(b)", "size"},
	    {"a between b and attribute_exists(things)", "attribute_exists"},
	    {"a in (b, attribute_exists(things))", "attribute_exists"},
	};
	for (size_t i = 0; i < sizeof(misused) / sizeof(misused[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(
		    want, sizeof(want),
		    "Invalid FilterExpression: The function is not allowed to be used this way "
		    "in an expression; function: %s",
		    misused[i][1]);
		ERR(F, misused[i][0], want);
	}
	/* Arity. */
	static const char *const arity[][3] = {
	    {"attribute_exists(things, a) and a=:s", "attribute_exists", "2"},
	    {"attribute_not_exists(things, b)", "attribute_not_exists", "2"},
	    {"attribute_type(things)", "attribute_type", "1"},
	    {"begins_with(things)", "begins_with", "1"},
	    {"begins_with(things, size(a), b)", "begins_with", "3"},
	    {"contains(things)", "contains", "1"},
	    {"size(things, a) > b", "size", "2"},
	};
	for (size_t i = 0; i < sizeof(arity) / sizeof(arity[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(want, sizeof(want),
		         "Invalid FilterExpression: Incorrect number of operands for operator or "
		         "function; operator or function: %s, number of operands: %s",
		         arity[i][1], arity[i][2]);
		ERR(F, arity[i][0], want);
	}
	ERR(U, "set a = if_not_exists(c)",
	    "Invalid UpdateExpression: Incorrect number of operands for operator or function; "
	    "operator or function: if_not_exists, number of operands: 1");
	ERR(U, "set a = list_append(c, d, e)",
	    "Invalid UpdateExpression: Incorrect number of operands for operator or function; "
	    "operator or function: list_append, number of operands: 3");
	/* Operand types known without an item. */
	static const char *const types[][3] = {
	    {"attribute_type(a, size(a)) and a=:s", "attribute_type", "N"},
	    {"attribute_type(a, :n)", "attribute_type", "N"},
	    {"attribute_type(a, :b)", "attribute_type", "B"},
	    {"attribute_type(a, :bool)", "attribute_type", "BOOL"},
	    {"attribute_type(a, :null)", "attribute_type", "NULL"},
	    {"attribute_type(a, :l)", "attribute_type", "L"},
	    {"attribute_type(a, :m)", "attribute_type", "M"},
	    {"attribute_type(a, :ss)", "attribute_type", "SS"},
	    {"attribute_type(a, b)", "attribute_type", "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}"},
	    {"begins_with(a, size(a)) and a=:s", "begins_with", "N"},
	    {"begins_with(a, :n)", "begins_with", "N"},
	    {"begins_with(a, :bool)", "begins_with", "BOOL"},
	    {"begins_with(a, :null)", "begins_with", "NULL"},
	    {"begins_with(a, :l)", "begins_with", "L"},
	    {"begins_with(a, :m)", "begins_with", "M"},
	    {"begins_with(a, :ss)", "begins_with", "SS"},
	    {"begins_with(a, :ns)", "begins_with", "NS"},
	    {"begins_with(a, :bs)", "begins_with", "BS"},
	    {"begins_with(:n, a)", "begins_with", "N"},
	    {"size(size(a)) > :n", "size", "N"},
	    {"attribute_not_exists(size(:n))", "size", "N"},
	    {"size(:bool) > a", "size", "BOOL"},
	    {"size(:null) > a", "size", "NULL"},
	    {"a < :l", "<", "L"},
	    {":m <= a", "<=", "M"},
	    {"a > :bool", ">", "BOOL"},
	    {"a >= :ss", ">=", "SS"},
	    {"a BETWEEN :null AND :n", "BETWEEN", "NULL"},
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(
		    want, sizeof(want),
		    "Invalid FilterExpression: Incorrect operand type for operator or function; "
		    "operator or function: %s, operand type: %s",
		    types[i][1], types[i][2]);
		ERR(F, types[i][0], want);
	}
	ERR(F, "attribute_type(a, :s)",
	    "Invalid FilterExpression: Invalid attribute type name found; type: x, valid types: "
	    "{B,NULL,SS,BOOL,L,BS,N,NS,S,M}");
	ERR(F, "attribute_exists(:s) and a=:s",
	    "Invalid FilterExpression: Operator or function requires a document path; operator or "
	    "function: attribute_exists");
	ERR(F, "attribute_not_exists(size(:s))",
	    "Invalid FilterExpression: Operator or function requires a document path; operator or "
	    "function: attribute_not_exists");
	/* = and <> take any type; size() of a string value is fine. */
	OK(F, "a = :l AND b <> :m AND c IN (:ss, :null) AND size(:s) > a");
	/* Update functions. */
	ERR(U, "set a = if_not_exists(:s, c)",
	    "Invalid UpdateExpression: Operator or function requires a document path; operator or "
	    "function: if_not_exists");
	ERR(U, "set a = if_not_exists(if_not_exists(a, b), c)",
	    "Invalid UpdateExpression: Operator or function requires a document path; operator or "
	    "function: if_not_exists");
	static const char *const utypes[][3] = {
	    {"set a = list_append(:s, a)", "list_append", "S"},
	    {"set a = list_append(a, :n)", "list_append", "N"},
	    {"set a = list_append(:b, a)", "list_append", "B"},
	    {"set a = list_append(:m, a)", "list_append", "M"},
	    {"set a = list_append(:ss, a)", "list_append", "SS"},
	    {"set a = a + :s", "+", "S"},
	    {"set a = :s + :b", "+", "S"},
	    {"set a = :b + a", "+", "B"},
	    {"set a = a + :bool", "+", "BOOL"},
	    {"set a = a + :l", "+", "L"},
	    {"set a = a - :ns", "-", "NS"},
	    {"set a = a - :null", "-", "NULL"},
	    {"set a = a - :m", "-", "M"},
	};
	for (size_t i = 0; i < sizeof(utypes) / sizeof(utypes[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(
		    want, sizeof(want),
		    "Invalid UpdateExpression: Incorrect operand type for operator or function; "
		    "operator or function: %s, operand type: %s",
		    utypes[i][1], utypes[i][2]);
		ERR(U, utypes[i][0], want);
	}
	/* A function result is not checked (its type is known only at run time). */
	OK(U, "set a = if_not_exists(b, :s) + :n");
}
END_TEST

START_TEST(test_distinct_and_order)
{
	static const char *const cases[][3] = {
	    {"a = a AND #a = b AND :s = a", "=", "[a]"},
	    {"#a <> a", "<>", "[a]"},
	    {"a > #a", ">", "[a]"},
	    {"(a = a) OR (b = :s)", "=", "[a]"},
	    {"contains(ab.bc[1].a, ab.bc[1].#a)", "contains", "[ab, bc, [1], a]"},
	    {"attribute_type(ab.bc[1].#a, ab.bc[1].a)", "attribute_type", "[ab, bc, [1], a]"},
	    {"begins_with(ab.bc[1].a, ab.bc[1].#a)", "begins_with", "[ab, bc, [1], a]"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[SH_ERRMSG_SIZE];
		snprintf(want, sizeof(want),
		         "Invalid FilterExpression: The first operand must be distinct from the "
		         "remaining operands for this operator or function; operator: %s, first "
		         "operand: %s",
		         cases[i][1], cases[i][2]);
		ERR(F, cases[i][0], want);
	}
	OK(F, ":s > :s");
	OK(F, "a.b = a.c AND a[0] = a[1]");

	/* The order of the checks: parentheses, then unknown functions, then
	 * misused functions, then reserved words, then condition by condition. */
	ERR(F, "((a = :s)) AND foo(b) = :s AND status = :s",
	    "Invalid FilterExpression: The expression has redundant parentheses;");
	ERR(F, "status = :s AND foo(b) = :s AND size(a)",
	    "Invalid FilterExpression: Invalid function name; function: foo");
	ERR(F, "status = :s AND size(a) AND #zz = :s",
	    "Invalid FilterExpression: The function is not allowed to be used this way in an "
	    "expression; function: size");
	ERR(F, "#zz = :s AND status = :s",
	    "Invalid FilterExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "status");
	ERR(F, "begins_with(a, :n) AND #zz = :s",
	    "Invalid FilterExpression: Incorrect operand type for operator or function; operator "
	    "or "
	    "function: begins_with, operand type: N");
	ERR(F, "begins_with(#zz, :n)",
	    "Invalid FilterExpression: An expression attribute name used in the document path is "
	    "not "
	    "defined; attribute name: #zz");
	ERR(F, "begins_with(a, a, :n)",
	    "Invalid FilterExpression: Incorrect number of operands for operator or function; "
	    "operator or function: begins_with, number of operands: 3");
	ERR(F, "begins_with(a, #a) AND begins_with(b, :n)",
	    "Invalid FilterExpression: The first operand must be distinct from the remaining "
	    "operands for this operator or function; operator: begins_with, first operand: [a]");
	/* In an update: reserved words, unknown functions, clauses, names, values,
	 * paths, ADD/DELETE operands, functions. */
	ERR(U, "SET a = foo(b) SET status = :s",
	    "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: "
	    "status");
	ERR(U, "SET a = foo(b) SET c = #zz",
	    "Invalid UpdateExpression: Invalid function name; function: foo");
	ERR(U, "set a = #zz set c = :d",
	    "Invalid UpdateExpression: The \"SET\" section can only be used once in an update "
	    "expression;");
	ERR(U, "remove #d set a = b remove e",
	    "Invalid UpdateExpression: The \"REMOVE\" section can only be used once in an update "
	    "expression;");
	ERR(U, "add #d :e set a = b add e :f",
	    "Invalid UpdateExpression: The \"ADD\" section can only be used once in an update "
	    "expression;");
	ERR(U, "delete #d :e set a = b delete #e :f",
	    "Invalid UpdateExpression: The \"DELETE\" section can only be used once in an update "
	    "expression;");
	ERR(U, "SET a = :zz, a = if_not_exists(b)",
	    "Invalid UpdateExpression: An expression attribute value used in expression is not "
	    "defined; attribute value: :zz");
	ERR(U, "SET a = :s, a = if_not_exists(b)",
	    "Invalid UpdateExpression: Two document paths overlap with each other; must remove or "
	    "rewrite one of these paths; path one: [a], path two: [a]");
	ERR(U, "ADD a :s SET b = if_not_exists(c)",
	    "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: "
	    "ADD, operand type: STRING");
}
END_TEST

START_TEST(test_between_in)
{
	ERR(C, "a between :n and :s",
	    "Invalid ConditionExpression: The BETWEEN operator requires same data type for lower "
	    "and "
	    "upper bounds; lower bound operand: AttributeValue: {N:5}, upper bound operand: "
	    "AttributeValue: {S:x}");
	ERR(C, "a between :s2 and :s",
	    "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater "
	    "than or equal to lower bound; lower bound operand: AttributeValue: {S:y}, upper bound "
	    "operand: AttributeValue: {S:x}");
	ERR(K, "a between :n2 and :n",
	    "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be "
	    "greater "
	    "than or equal to lower bound; lower bound operand: AttributeValue: {N:10}, upper "
	    "bound "
	    "operand: AttributeValue: {N:5}");
	/* Numbers compare numerically (10 > 5 although "10" < "5"), B as base64. */
	OK(C, "a between :n and :n2");
	OK(C, "a between :s and :s");
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	ck_assert_int_eq(parse_nv(C, "a between :x and :y", NULL,
	                          "{\":x\": {\"B\": \"b\"}, \":y\": {\"B\": \"a\"}}", &e, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid ConditionExpression: The BETWEEN operator requires upper bound "
	                 "to be greater than or equal to lower bound; lower bound operand: "
	                 "AttributeValue: {B:Yg==}, upper bound operand: AttributeValue: {B:YQ==}");

	/* IN takes up to 100 operands. */
	char text[2048], values[8192];
	size_t off = (size_t)snprintf(text, sizeof(text), "a IN (");
	size_t voff = (size_t)snprintf(values, sizeof(values), "{");
	for (int i = 0; i < 101; i++) {
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s:v%d", i ? "," : "", i);
		voff += (size_t)snprintf(values + voff, sizeof(values) - voff,
		                         "%s\":v%d\": {\"N\": \"%d\"}", i ? "," : "", i, i);
	}
	snprintf(text + off, sizeof(text) - off, ")");
	snprintf(values + voff, sizeof(values) - voff, "}");
	ck_assert_int_eq(parse_nv(F, text, NULL, values, &e, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Invalid FilterExpression: The IN operator is provided with too many "
	                      "operands; number of operands: 101");
	/* Drop the last operand: 100 is fine. */
	char *last = strrchr(text, ',');
	strcpy(last, ")");
	ck_assert_int_eq(parse_nv(F, text, NULL, values, &e, msg), SHOAL_OK);
	ck_assert_uint_eq(e->cond->nargs, 101);
}
END_TEST

START_TEST(test_limits)
{
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	ERR(C, "", "Invalid ConditionExpression: The expression can not be empty;");
	ERR(F, "", "Invalid FilterExpression: The expression can not be empty;");
	ERR(K, "", "Invalid KeyConditionExpression: The expression can not be empty;");
	ERR(U, "", "Invalid UpdateExpression: The expression can not be empty;");
	ERR(P, "", "Invalid ProjectionExpression: The expression can not be empty;");

	/* 4096 bytes are fine, 4097 are not (whitespace counts). */
	static char big[ST_MAX_EXPR_SIZE + 2];
	memset(big, ' ', sizeof(big));
	memcpy(big, "a = :s", 6);
	big[ST_MAX_EXPR_SIZE] = '\0';
	OK(C, big);
	big[ST_MAX_EXPR_SIZE] = ' ';
	big[ST_MAX_EXPR_SIZE + 1] = '\0';
	ERR(C, big,
	    "Invalid ConditionExpression: Expression size has exceeded the maximum allowed size; "
	    "expression size: 4097");

	/* 300 operators are fine, 301 are not. */
	char text[ST_MAX_EXPR_SIZE + 1];
	size_t off = 0;
	for (int i = 0; i < 150; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%sa=:s", i ? " OR " : "");
	ck_assert_int_eq(parse_nv(F, text, NULL, "{\":s\": {\"S\": \"x\"}}", &e, msg), SHOAL_OK);
	snprintf(text + off, sizeof(text) - off, " OR NOT a=:s");
	ck_assert_int_eq(parse_nv(F, text, NULL, "{\":s\": {\"S\": \"x\"}}", &e, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid FilterExpression: The expression contains too many operators; "
	                 "operator count: 302");

	/* Hostile nesting: a clean error, never a stack overflow. */
	memset(text, '(', ST_MAX_EXPR_SIZE);
	text[ST_MAX_EXPR_SIZE] = '\0';
	ERR(C, text, "Invalid ConditionExpression: The expression has redundant parentheses;");
	for (int i = 0; i < ST_MAX_EXPR_SIZE / 4; i++)
		memcpy(text + 4 * i, "NOT ", 4);
	ERR(C, text,
	    "Invalid ConditionExpression: The expression contains too many operators; operator "
	    "count: 1024");
	off = 0;
	int calls = 0;
	for (; off + 5 < ST_MAX_EXPR_SIZE; calls++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "size(");
	char want[SH_ERRMSG_SIZE];
	snprintf(want, sizeof(want),
	         "Invalid FilterExpression: The expression contains too many operators; operator "
	         "count: %d",
	         calls);
	ERR(F, text, want);
	off = (size_t)snprintf(text, sizeof(text), "SET a = ");
	while (off + 14 < ST_MAX_EXPR_SIZE)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "list_append(");
	ck_assert_int_eq(parse_nv(U, text, NULL, NULL, &e, msg), SHOAL_E_VALIDATION);
	/* Legitimate nesting below the limit parses. */
	off = 0;
	for (int i = 0; i < 100; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "NOT (");
	off += (size_t)snprintf(text + off, sizeof(text) - off, "a = :s");
	for (int i = 0; i < 100; i++)
		text[off++] = ')';
	text[off] = '\0';
	OK(C, text);

	/* Document paths nest up to 32 levels. */
	off = (size_t)snprintf(text, sizeof(text), "a");
	for (int i = 1; i < ST_MAX_DEPTH; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, i % 2 ? ".b" : "[0]");
	OK(P, text);
	snprintf(text + off, sizeof(text) - off, ".c");
	ERR(P, text,
	    "Invalid ProjectionExpression: The document path has too many nesting levels; nesting "
	    "levels: 33");
}
END_TEST

START_TEST(test_update_paths)
{
	/* Overlaps are reported before conflicts, each path against the earlier ones. */
	char msg[SH_ERRMSG_SIZE];
	st_expr *e;
	const char *names = "{\"#c\": \"c\", \"#d\": \"[3]\"}";
	ck_assert_int_eq(parse_nv(U, "set d[1] = a, d.b = a, c[1].a = a, #c = if_not_exists(a)",
	                          names, NULL, &e, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid UpdateExpression: Two document paths overlap with each other; "
	                 "must remove or rewrite one of these paths; path one: [c, [1], a], path "
	                 "two: [c]");
	ck_assert_int_eq(parse_nv(U, "set #c[3].#d = a, #c[3] = a", names, NULL, &e, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid UpdateExpression: Two document paths overlap with each other; "
	                 "must remove or rewrite one of these paths; path one: [c, [3], [3]], "
	                 "path two: [c, [3]]");
	ck_assert_int_eq(
	    parse_nv(U, "set #c[3].#d = a, #c.#d[3] = if_not_exists(a, b)", names, NULL, &e, msg),
	    SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid UpdateExpression: Two document paths conflict with each other; "
	                 "must remove or rewrite one of these paths; path one: [c, [3], [3]], "
	                 "path two: [c, [3], [3]]");
	ck_assert_int_eq(parse_nv(U, "remove a.#c set a[1] = #d", names, NULL, &e, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "Invalid UpdateExpression: Two document paths conflict with each other; "
	                 "must remove or rewrite one of these paths; path one: [a, c], path two: "
	                 "[a, [1]]");
	ERR(U, "REMOVE a, a",
	    "Invalid UpdateExpression: Two document paths overlap with each other; must remove or "
	    "rewrite one of these paths; path one: [a], path two: [a]");
	ERR(U, "ADD a.b :n DELETE a :ss",
	    "Invalid UpdateExpression: Two document paths overlap with each other; must remove or "
	    "rewrite one of these paths; path one: [a, b], path two: [a]");
	/* Paths in values do not count. */
	OK(U, "SET a = a, b = a.c, c.d = c");
	OK(U, "SET a.b = :s, a.c = :s, a.d[0] = :s, a.d[1] = :s");

	/* ADD and DELETE operands. */
	static const char *const ops[][3] = {
	    {":s", "ADD", "STRING"},     {":s", "DELETE", "STRING"},
	    {":null", "ADD", "NULL"},    {":null", "DELETE", "NULL"},
	    {":bool", "ADD", "BOOLEAN"}, {":bool", "DELETE", "BOOLEAN"},
	    {":b", "ADD", "BINARY"},     {":b", "DELETE", "BINARY"},
	    {":m", "ADD", "MAP"},        {":m", "DELETE", "MAP"},
	    {":l", "ADD", "LIST"},       {":l", "DELETE", "LIST"},
	    {":n", "DELETE", "NUMBER"},
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		char text[64], want[SH_ERRMSG_SIZE];
		snprintf(text, sizeof(text), "%s a.b %s", ops[i][1], ops[i][0]);
		snprintf(
		    want, sizeof(want),
		    "Invalid UpdateExpression: Incorrect operand type for operator or function; "
		    "operator: %s, operand type: %s",
		    ops[i][1], ops[i][2]);
		ERR(U, text, want);
	}
	OK(U, "ADD a :n, b :ss, c :ns, d :bs DELETE e :ss, f :ns, g :bs");
}
END_TEST

START_TEST(test_projection)
{
	OK(P, "a");
	OK(P, "a, b, c");
	OK(P, "a.b.c, a.b.d, a.e[1], a.e[0]");
	OK(P, "#a, #b.#c[0]");
	ERR(P, "a, a.b",
	    "Invalid ProjectionExpression: Two document paths overlap with each other; must remove "
	    "or rewrite one of these paths; path one: [a], path two: [a, b]");
	ERR(P, "a.b[1], a.b",
	    "Invalid ProjectionExpression: Two document paths overlap with each other; must remove "
	    "or rewrite one of these paths; path one: [a, b, [1]], path two: [a, b]");
	ERR(P, "a.b, a[0]",
	    "Invalid ProjectionExpression: Two document paths conflict with each other; must "
	    "remove "
	    "or rewrite one of these paths; path one: [a, b], path two: [a, [0]]");
	ERR(P, "#a, a",
	    "Invalid ProjectionExpression: Two document paths overlap with each other; must remove "
	    "or rewrite one of these paths; path one: [a], path two: [a]");
	/* A name that looks like an index is still a name. */
	ERR(P, "c[3], c.#d",
	    "Invalid ProjectionExpression: Two document paths conflict with each other; must "
	    "remove "
	    "or rewrite one of these paths; path one: [c, [3]], path two: [c, [3]]");
}
END_TEST

START_TEST(test_key_condition_shape)
{
	OK(K, "a = :s");
	OK(K, "a = :s AND b = :s");
	OK(K, "a = :s AND b < :n");
	OK(K, "b >= :n AND a = :s");
	OK(K, "(a = :s) AND (b BETWEEN :n AND :n2)");
	OK(K, "((a = :s) AND begins_with(b, :s))");
	OK(K, ":s = a AND :n < b");
	st_expr *e = OK(K, ":s = a AND :n < b");
	ck_assert_uint_eq(e->nkc, 2);
	ck_assert_int_eq(e->kc[1].op, ST_KC_GT); /* :n < b is b > :n */
	static const char *const cases[][2] = {
	    {"a > :s and size(b) > :n or a > :n",
	     "Invalid operator used in KeyConditionExpression: OR"},
	    {"a in (:s, :s2)", "Invalid operator used in KeyConditionExpression: IN"},
	    {"attribute_exists(a)",
	     "Invalid operator used in KeyConditionExpression: attribute_exists"},
	    {"attribute_not_exists(a)",
	     "Invalid operator used in KeyConditionExpression: attribute_not_exists"},
	    {"attribute_type(a, :t)",
	     "Invalid operator used in KeyConditionExpression: attribute_type"},
	    {"contains(a.d, :s)", "Invalid operator used in KeyConditionExpression: contains"},
	    {"not a > :s", "Invalid operator used in KeyConditionExpression: NOT"},
	    {"a <> :s", "Invalid operator used in KeyConditionExpression: <>"},
	    {":s between :n and :n2 and b > :s",
	     "Invalid condition in KeyConditionExpression: BETWEEN operator must have the key "
	     "attribute as its first operand"},
	    {"begins_with(:s, b) and a > :s",
	     "Invalid condition in KeyConditionExpression: begins_with operator must have the key "
	     "attribute as its first operand"},
	    {"size(b) > :n AND a.b > :s AND b > :s",
	     "KeyConditionExpressions cannot contain nested operations"},
	    {"a > size(b.d)", "KeyConditionExpressions cannot contain nested operations"},
	    {"a between size(b) and :n",
	     "KeyConditionExpressions cannot contain nested operations"},
	    {"b > a.b",
	     "Invalid condition in KeyConditionExpression: Multiple attribute names used "
	     "in one condition"},
	    {"b between c[1] and :n", "Invalid condition in KeyConditionExpression: Multiple "
	                              "attribute names used in one condition"},
	    {"begins_with(a, b)", "Invalid condition in KeyConditionExpression: Multiple attribute "
	                          "names used in one condition"},
	    {"b.d > :s AND c.d > :s", "KeyConditionExpressions cannot have conditions on nested "
	                              "attributes"},
	    {"b[0] > :s", "KeyConditionExpressions cannot have conditions on nested attributes"},
	    {":n2 > :n AND a < :n2",
	     "Invalid condition in KeyConditionExpression: No key attribute specified"},
	    {"b > :n AND b < :n2 and c = :n",
	     "KeyConditionExpressions must only contain one condition per key"},
	    {"(a > :s and b > :s) and (b > :s and c > :s)",
	     "KeyConditionExpressions must only contain one condition per key"},
	    {"a = :s AND b = :s AND c = :s", "Conditions can be of length 1 or 2 only"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		err_(K, cases[i][0], cases[i][1], (int)i);
	/* The parse-time checks of every condition come first. */
	ERR(K, "begins_with(a, :n)",
	    "Invalid KeyConditionExpression: Incorrect operand type for operator or function; "
	    "operator or function: begins_with, operand type: N");
}
END_TEST

static int kc(const char *text, const st_key_schema *ks, st_key_cond *out, char *msg)
{
	st_expr *e;
	int rc =
	    parse_nv(K, text, NULL,
	             "{\":s\": {\"S\": \"x\"}, \":s2\": {\"S\": \"y\"}, \":n\": {\"N\": \"5\"}, "
	             "\":b\": {\"B\": \"ab\"}}",
	             &e, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
	return st_expr_key_condition(e, ks, out, msg);
}

START_TEST(test_key_condition_schema)
{
	char msg[SH_ERRMSG_SIZE];
	st_key_cond out;
	st_key_schema hash = {.hash = {"pk", ST_S}};
	st_key_schema both = {.hash = {"pk", ST_S}, .range = {"sk", ST_N}};
	st_key_schema bin = {.hash = {"pk", ST_S}, .range = {"sk", ST_B}};

	ck_assert_int_eq(kc("pk = :s", &hash, &out, msg), SHOAL_OK);
	ck_assert_str_eq(out.hash->u.str.ptr, "x");
	ck_assert_int_eq(out.op, ST_KC_NONE);
	ck_assert_int_eq(kc("pk = :s", &both, &out, msg), SHOAL_OK);
	ck_assert_int_eq(out.op, ST_KC_NONE);
	ck_assert_int_eq(kc("sk > :n AND pk = :s", &both, &out, msg), SHOAL_OK);
	ck_assert_int_eq(out.op, ST_KC_GT);
	ck_assert_str_eq(out.lo->u.str.ptr, "5");
	ck_assert_int_eq(kc(":n >= sk AND :s = pk", &both, &out, msg), SHOAL_OK);
	ck_assert_int_eq(out.op, ST_KC_LE);
	ck_assert_int_eq(kc("pk = :s AND sk BETWEEN :n AND :n", &both, &out, msg), SHOAL_OK);
	ck_assert_int_eq(out.op, ST_KC_BETWEEN);
	ck_assert_ptr_nonnull(out.hi);
	ck_assert_int_eq(kc("pk = :s AND begins_with(sk, :b)", &bin, &out, msg), SHOAL_OK);
	ck_assert_int_eq(out.op, ST_KC_BEGINS_WITH);
	static const st_kc_op ops[] = {ST_KC_EQ, ST_KC_LT, ST_KC_LE, ST_KC_GT, ST_KC_GE};
	static const char *const texts[] = {"pk = :s AND sk = :n", "pk = :s AND sk < :n",
	                                    "pk = :s AND sk <= :n", "pk = :s AND sk > :n",
	                                    "pk = :s AND sk >= :n"};
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(kc(texts[i], &both, &out, msg), SHOAL_OK);
		ck_assert_int_eq(out.op, ops[i]);
	}

	ck_assert_int_eq(kc("sk = :n", &both, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query condition missed key schema element: pk");
	ck_assert_int_eq(kc("x = :s", &hash, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query condition missed key schema element: pk");
	ck_assert_int_eq(kc("pk = :s AND x = :n", &both, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query condition missed key schema element: sk");
	ck_assert_int_eq(kc("pk = :s AND sk = :n", &hash, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query key condition not supported");
	ck_assert_int_eq(kc("pk > :s", &hash, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query key condition not supported");
	ck_assert_int_eq(kc("begins_with(pk, :s)", &hash, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query key condition not supported");
	ck_assert_int_eq(kc("pk = :n", &hash, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Condition parameter type "
	                      "does not match schema type");
	ck_assert_int_eq(kc("pk = :s AND sk = :s", &both, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Condition parameter type "
	                      "does not match schema type");
	/* begins_with on a number key: the operand cannot be a number. */
	ck_assert_int_eq(kc("pk = :s AND begins_with(sk, :s)", &both, &out, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Condition parameter type "
	                      "does not match schema type");
	/* Not a key condition. */
	st_expr *e;
	ck_assert_int_eq(parse_nv(C, "pk = :s", NULL, "{\":s\": {\"S\": \"x\"}}", &e, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(st_expr_key_condition(e, &hash, &out, msg), SHOAL_E_INTERNAL);
}
END_TEST

START_TEST(test_refs_attr)
{
	st_expr *e = OK(U, "SET a.b = c + :n, d = if_not_exists(#a, :n) REMOVE e[1]");
	ck_assert(st_expr_refs_attr(e, "a", 1));
	ck_assert(st_expr_refs_attr(e, "c", 1));
	ck_assert(st_expr_refs_attr(e, "d", 1));
	ck_assert(st_expr_refs_attr(e, "e", 1));
	ck_assert(!st_expr_refs_attr(e, "b", 1));
	ck_assert(!st_expr_refs_attr(e, "n", 1));
	e = OK(F, "x.y = :s AND (NOT contains(#b, :s) OR size(z) > :n)");
	ck_assert(st_expr_refs_attr(e, "x", 1));
	ck_assert(st_expr_refs_attr(e, "b", 1));
	ck_assert(st_expr_refs_attr(e, "z", 1));
	ck_assert(!st_expr_refs_attr(e, "y", 1));
	e = OK(P, "p.q, #c");
	ck_assert(st_expr_refs_attr(e, "p", 1));
	ck_assert(st_expr_refs_attr(e, "c", 1));
	ck_assert(!st_expr_refs_attr(e, "q", 1));
	ck_assert(!st_expr_refs_attr(e, "pq", 2));
}
END_TEST

/* Every allocation failing in turn: SHOAL_E_NOMEM or success, never a crash. */
START_TEST(test_alloc_failures)
{
	static const struct {
		st_expr_kind kind;
		const char *text;
	} cases[] = {
	    {F, "#a.b[1] = :s AND (c IN (:s, :n, d) OR NOT begins_with(e, :s)) AND size(f) > :n"},
	    {U, "SET a = list_append(if_not_exists(b, :l), :l), c.d = e + :n REMOVE f[1], f[2] "
	        "ADD g :ss DELETE h :ns"},
	    {P, "a, b.c[1], #c.#b, d[0], d[3]"},
	    {K, "a = :s AND b BETWEEN :n AND :n2"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool succeeded = false;
		for (long n = 1; n < 200 && !succeeded; n++) {
			sh_arena a;
			sh_arena_init(&a);
			st_expr_attrs attrs = {tl_json_names(&a, NAMES), tl_json_item(&a, VALUES)};
			st_expr_ctx ctx;
			char msg[SH_ERRMSG_SIZE];
			st_expr *e = NULL;
			ck_assert_int_eq(st_expr_ctx_init(&ctx, &a, &attrs, msg), SHOAL_OK);
			sh_fault_arm(SH_FAULT_ALLOC, n, true);
			int rc = st_expr_parse(&ctx, cases[i].kind, cases[i].text, &e, msg);
			sh_fault_reset();
			ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_NOMEM, "%s: %d %s",
			              cases[i].text, rc, msg);
			succeeded = rc == SHOAL_OK;
			sh_arena_fini(&a);
		}
		ck_assert_msg(succeeded, "%s never succeeded", cases[i].text);
	}
}
END_TEST

static Suite *expr_parse_suite(void)
{
	return tl_suite("expr_parse", tl_arena_setup, tl_arena_teardown, 0,
	                TL_TESTS(test_condition_forms, test_syntax_errors, test_precedence,
	                         test_update_forms, test_reserved_words, test_placeholders,
	                         test_unused, test_ctx_init, test_functions,
	                         test_distinct_and_order, test_between_in, test_limits,
	                         test_update_paths, test_projection, test_key_condition_shape,
	                         test_key_condition_schema, test_refs_attr, test_alloc_failures));
}

TL_MAIN(expr_parse_suite)
