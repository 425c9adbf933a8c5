/*
 * expr_check.c -- what st_expr_parse checks once the syntax is right.
 *
 * DynamoDB reports one error per request, and which one depends on an order
 * that clients observe (the dynalite and moto test suites pin it against the
 * real service).  Each kind has its own order; every step below walks the
 * whole expression before the next one starts:
 *
 *   condition, filter, key condition:
 *     1. redundant parentheses ("((a = b))")
 *     2. unknown function names           (post-order)
 *     3. functions used the wrong way: size() as a condition, a condition
 *        function as an operand           (post-order)
 *     4. reserved words used as names     (source order)
 *     5. then condition by condition, in source order:
 *        undefined #names and :values, function arity, identical first and
 *        second operands ("a = a"), operand types known without an item
 *        (a value, or size() which is a number), BETWEEN bounds, IN size
 *   update:
 *     parentheses, reserved words, unknown functions, a clause written twice,
 *     undefined #names, undefined :values, overlapping then conflicting
 *     target paths, ADD/DELETE operand types, then function arity and types
 *   projection:
 *     reserved words, undefined #names, overlapping then conflicting paths
 *
 * Resolution happens here too: each #name becomes the attribute name it
 * stands for and each :value its st_value, and the context records them as
 * used for st_expr_ctx_check_unused.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "expr_int.h"

typedef struct checker {
	st_expr *e;
	st_expr_ctx *ctx;
	const char *kname;
	char *errmsg;
} checker;

/* "Invalid <Kind>Expression: <message>" */
__attribute__((format(printf, 2, 3))) static int fail(checker *c, const char *fmt, ...)
{
	char msg[SH_ERRMSG_SIZE];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "Invalid %s: %s", c->kname, msg);
}

static const char *tok_text(const checker *c, uint32_t tok)
{
	return st_expr_tok_text(c->e, tok);
}

static int tok_len(const checker *c, uint32_t tok)
{
	return (int)c->e->toks[tok].len;
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */
/* ------------------------------------------------------------------------ */

void st_expr_path_str(const st_path *p, char *buf, size_t size)
{
	size_t off = 0;
	int w = snprintf(buf, size, "[");
	off = w > 0 ? (size_t)w : 0;
	for (uint32_t i = 0; i < p->n && off < size; i++) {
		const st_pelem *el = &p->e[i];
		const char *sep = i == 0 ? "" : ", ";
		if (el->is_index)
			w = snprintf(buf + off, size - off, "%s[%u]", sep, el->index);
		else
			w = snprintf(buf + off, size - off, "%s%.*s", sep, (int)el->len, el->name);
		off += w > 0 ? (size_t)w : 0;
	}
	if (off < size)
		snprintf(buf + off, size - off, "]");
}

/* 0: disjoint, 1: one is a prefix of the other, 2: a name and an index at
 * the same place. */
static int path_relation(const st_path *a, const st_path *b)
{
	uint32_t n = a->n < b->n ? a->n : b->n;
	for (uint32_t i = 0; i < n; i++) {
		const st_pelem *x = &a->e[i], *y = &b->e[i];
		if (x->is_index != y->is_index)
			return 2;
		if (x->is_index ? x->index != y->index
		                : (x->len != y->len || memcmp(x->name, y->name, x->len) != 0))
			return 0;
	}
	return 1;
}

static int path_pair_error(checker *c, const char *what, const st_path *a, const st_path *b)
{
	char s1[SH_ERRMSG_SIZE / 2], s2[SH_ERRMSG_SIZE / 2];
	st_expr_path_str(a, s1, sizeof(s1));
	st_expr_path_str(b, s2, sizeof(s2));
	return fail(c,
	            "Two document paths %s with each other; must remove or rewrite one of these "
	            "paths; path one: %s, path two: %s",
	            what, s1, s2);
}

/* Each path against the earlier ones: the first overlap wins over any
 * conflict; a path that overlaps ends the check. */
static int check_overlaps(checker *c, const st_path *const *paths, uint32_t n)
{
	const st_path *ca = NULL, *cb = NULL;
	for (uint32_t j = 0; j < n; j++) {
		for (uint32_t i = 0; i < j; i++) {
			int r = path_relation(paths[i], paths[j]);
			if (r == 1)
				return path_pair_error(c, "overlap", paths[i], paths[j]);
			if (r == 2 && ca == NULL) {
				ca = paths[i];
				cb = paths[j];
			}
		}
	}
	if (ca != NULL)
		return path_pair_error(c, "conflict", ca, cb);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Resolution                                                                */
/* ------------------------------------------------------------------------ */

static int find_attr(const st_value *m, const char *s, uint32_t len)
{
	if (m == NULL)
		return -1;
	for (uint32_t i = 0; i < m->u.map.n; i++) {
		const st_attr *at = &m->u.map.a[i];
		if (at->name_len == len && memcmp(at->name, s, len) == 0)
			return (int)i;
	}
	return -1;
}

static int resolve_path(checker *c, st_path *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		st_pelem *el = &p->e[i];
		if (el->is_index)
			continue;
		const char *s = tok_text(c, el->tok);
		uint32_t len = c->e->toks[el->tok].len;
		if (c->e->toks[el->tok].kind == TK_ID) {
			el->name = s;
			el->len = len;
			continue;
		}
		int k = find_attr(c->ctx->names, s, len);
		if (k < 0)
			return fail(c,
			            "An expression attribute name used in the document path is not "
			            "defined; attribute name: %.*s",
			            (int)len, s);
		c->ctx->names_used[k] = 1;
		const st_value *v = &c->ctx->names->u.map.a[k].value;
		el->name = v->u.str.ptr;
		el->len = v->u.str.len;
	}
	return SHOAL_OK;
}

static int resolve_value(checker *c, st_node *n)
{
	const char *s = tok_text(c, n->tok);
	uint32_t len = c->e->toks[n->tok].len;
	int k = find_attr(c->ctx->values, s, len);
	if (k < 0)
		return fail(c,
		            "An expression attribute value used in expression is not defined; "
		            "attribute value: %.*s",
		            (int)len, s);
	c->ctx->values_used[k] = 1;
	n->value = &c->ctx->values->u.map.a[k].value;
	return SHOAL_OK;
}

enum { RES_NAMES = 1, RES_VALUES = 2 };

/* Resolves the names and/or values of a subtree, in source order. */
static int resolve(checker *c, st_node *n, int what)
{
	int rc;
	if (n->kind == N_PATH)
		return (what & RES_NAMES) ? resolve_path(c, &n->path) : SHOAL_OK;
	if (n->kind == N_VALUE)
		return (what & RES_VALUES) ? resolve_value(c, n) : SHOAL_OK;
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = resolve(c, n->args[i], what)) != SHOAL_OK)
			return rc;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Walks                                                                     */
/* ------------------------------------------------------------------------ */

static int check_reserved_path(checker *c, const st_path *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		uint32_t t = p->e[i].tok;
		if (c->e->toks[t].kind == TK_ID &&
		    st_expr_is_reserved(tok_text(c, t), c->e->toks[t].len))
			return fail(c,
			            "Attribute name is a reserved keyword; reserved keyword: %.*s",
			            tok_len(c, t), tok_text(c, t));
	}
	return SHOAL_OK;
}

static int check_reserved(checker *c, const st_node *n)
{
	int rc;
	if (n->kind == N_PATH)
		return check_reserved_path(c, &n->path);
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = check_reserved(c, n->args[i])) != SHOAL_OK)
			return rc;
	return SHOAL_OK;
}

static bool fn_allowed(const checker *c, uint8_t fn)
{
	if (c->e->kind == ST_EXPR_UPDATE)
		return fn == FN_IF_NOT_EXISTS || fn == FN_LIST_APPEND;
	return fn != FN_UNKNOWN && fn != FN_IF_NOT_EXISTS && fn != FN_LIST_APPEND;
}

static int check_fn_names(checker *c, const st_node *n)
{
	int rc;
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = check_fn_names(c, n->args[i])) != SHOAL_OK)
			return rc;
	if (n->kind == N_FUNC && !fn_allowed(c, n->op))
		return fail(c, "Invalid function name; function: %.*s", tok_len(c, n->tok),
		            tok_text(c, n->tok));
	return SHOAL_OK;
}

static int misused(checker *c, const st_node *f)
{
	return fail(c,
	            "The function is not allowed to be used this way in an expression; function: "
	            "%.*s",
	            tok_len(c, f->tok), tok_text(c, f->tok));
}

static int check_misuse(checker *c, const st_node *n)
{
	int rc;
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = check_misuse(c, n->args[i])) != SHOAL_OK)
			return rc;
	bool logical = n->kind == N_AND || n->kind == N_OR || n->kind == N_NOT;
	for (uint32_t i = 0; i < n->nargs; i++) {
		const st_node *a = n->args[i];
		if (a->kind != N_FUNC)
			continue;
		if (logical ? a->op == FN_SIZE : a->op != FN_SIZE)
			return misused(c, a);
	}
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Operand types known without an item                                       */
/* ------------------------------------------------------------------------ */

/* The type of an operand if it is known before evaluation, else ST_NONE. */
static st_type known_type(const st_node *n)
{
	if (n->kind == N_VALUE)
		return n->value->type;
	if (n->kind == N_FUNC && n->op == FN_SIZE)
		return ST_N;
	return ST_NONE;
}

static bool is_scalar_key_type(st_type t)
{
	return t == ST_S || t == ST_N || t == ST_B;
}

static int bad_operand_type(checker *c, const char *fn, int fnlen, const char *type)
{
	return fail(c,
	            "Incorrect operand type for operator or function; operator or function: %.*s, "
	            "operand type: %s",
	            fnlen, fn, type);
}

static int fn_bad_type(checker *c, const st_node *f, st_type t)
{
	return bad_operand_type(c, tok_text(c, f->tok), tok_len(c, f->tok), st_type_name(t));
}

static int fn_arity(checker *c, const st_node *f)
{
	static const uint8_t arity[] = {
	    [FN_ATTRIBUTE_EXISTS] = 1, [FN_ATTRIBUTE_NOT_EXISTS] = 1,
	    [FN_ATTRIBUTE_TYPE] = 2,   [FN_BEGINS_WITH] = 2,
	    [FN_CONTAINS] = 2,         [FN_SIZE] = 1,
	    [FN_IF_NOT_EXISTS] = 2,    [FN_LIST_APPEND] = 2,
	};
	if (f->nargs == arity[f->op])
		return SHOAL_OK;
	return fail(c,
	            "Incorrect number of operands for operator or function; operator or function: "
	            "%.*s, number of operands: %u",
	            tok_len(c, f->tok), tok_text(c, f->tok), f->nargs);
}

static int requires_path(checker *c, const st_node *f)
{
	return fail(c, "Operator or function requires a document path; operator or function: %.*s",
	            tok_len(c, f->tok), tok_text(c, f->tok));
}

static bool valid_type_name(const st_value *v)
{
	static const char *const names[] = {"S",    "N", "B",  "NULL", "SS",
	                                    "BOOL", "L", "BS", "NS",   "M"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == v->u.str.len &&
		    memcmp(names[i], v->u.str.ptr, v->u.str.len) == 0)
			return true;
	return false;
}

/* The type checks of one condition function. */
static int check_cond_fn(checker *c, const st_node *f)
{
	st_type t;
	switch (f->op) {
	case FN_ATTRIBUTE_EXISTS:
	case FN_ATTRIBUTE_NOT_EXISTS:
		if (f->args[0]->kind != N_PATH)
			return requires_path(c, f);
		return SHOAL_OK;
	case FN_ATTRIBUTE_TYPE:
		t = known_type(f->args[1]);
		if (t == ST_NONE)
			return bad_operand_type(c, tok_text(c, f->tok), tok_len(c, f->tok),
			                        "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}");
		if (t != ST_S)
			return fn_bad_type(c, f, t);
		if (f->args[1]->kind == N_VALUE && !valid_type_name(f->args[1]->value)) {
			const st_value *v = f->args[1]->value;
			return fail(c,
			            "Invalid attribute type name found; type: %.*s, valid types: "
			            "{B,NULL,SS,BOOL,L,BS,N,NS,S,M}",
			            (int)v->u.str.len, v->u.str.ptr);
		}
		return SHOAL_OK;
	case FN_BEGINS_WITH:
		for (uint32_t i = 0; i < f->nargs; i++) {
			t = known_type(f->args[i]);
			if (t != ST_NONE && t != ST_S && t != ST_B)
				return fn_bad_type(c, f, t);
		}
		return SHOAL_OK;
	case FN_SIZE:
		t = known_type(f->args[0]);
		if (t == ST_N || t == ST_BOOL || t == ST_NULL)
			return fn_bad_type(c, f, t);
		return SHOAL_OK;
	default:
		return SHOAL_OK;
	}
}

/* The type checks of one update function (or + and -): only values count. */
static int check_update_fn(checker *c, const st_node *f)
{
	if (f->kind == N_ARITH) {
		char op[2] = {(char)f->op, '\0'};
		for (uint32_t i = 0; i < 2; i++) {
			const st_node *a = f->args[i];
			if (a->kind == N_VALUE && a->value->type != ST_N)
				return bad_operand_type(c, op, 1, st_type_name(a->value->type));
		}
		return SHOAL_OK;
	}
	if (f->op == FN_IF_NOT_EXISTS) {
		if (f->args[0]->kind != N_PATH)
			return requires_path(c, f);
		return SHOAL_OK;
	}
	for (uint32_t i = 0; i < f->nargs; i++) { /* list_append */
		const st_node *a = f->args[i];
		if (a->kind == N_VALUE && a->value->type != ST_L)
			return fn_bad_type(c, f, a->value->type);
	}
	return SHOAL_OK;
}

enum { FNCHK_ARITY, FNCHK_DISTINCT, FNCHK_TYPES };

static int distinct(checker *c, const char *op, int oplen, const st_node *x, const st_node *y)
{
	if (x->kind != N_PATH || y->kind != N_PATH || x->path.n != y->path.n ||
	    path_relation(&x->path, &y->path) != 1)
		return SHOAL_OK;
	char ps[SH_ERRMSG_SIZE / 2];
	st_expr_path_str(&x->path, ps, sizeof(ps));
	return fail(c,
	            "The first operand must be distinct from the remaining operands for this "
	            "operator or function; operator: %.*s, first operand: %s",
	            oplen, op, ps);
}

/* One of the function checks over the functions of a subtree, post-order. */
static int check_fns(checker *c, const st_node *n, int which)
{
	int rc;
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = check_fns(c, n->args[i], which)) != SHOAL_OK)
			return rc;
	bool update = c->e->kind == ST_EXPR_UPDATE;
	if (n->kind == N_ARITH && update && which == FNCHK_TYPES)
		return check_update_fn(c, n);
	if (n->kind != N_FUNC)
		return SHOAL_OK;
	switch (which) {
	case FNCHK_ARITY:
		return fn_arity(c, n);
	case FNCHK_DISTINCT:
		if (update || n->nargs != 2)
			return SHOAL_OK;
		return distinct(c, tok_text(c, n->tok), tok_len(c, n->tok), n->args[0], n->args[1]);
	default:
		return update ? check_update_fn(c, n) : check_cond_fn(c, n);
	}
}

/* ------------------------------------------------------------------------ */
/* Conditions                                                                */
/* ------------------------------------------------------------------------ */

static const char *const cmp_text[] = {"=", "<>", "<", "<=", ">", ">="};

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* {S:abc}, {N:1.5}, {B:<base64>} as DynamoDB prints a bound. */
static void format_bound(const st_value *v, char *buf, size_t size)
{
	size_t off = (size_t)snprintf(buf, size, "{%s:", st_type_name(v->type));
	if (v->type == ST_B) {
		const unsigned char *s = (const unsigned char *)v->u.str.ptr;
		uint32_t n = v->u.str.len;
		for (uint32_t i = 0; i < n && off + 5 < size; i += 3) {
			uint32_t x = (uint32_t)s[i] << 16 |
			             (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
			             (i + 2 < n ? s[i + 2] : 0);
			buf[off++] = b64[x >> 18 & 63];
			buf[off++] = b64[x >> 12 & 63];
			buf[off++] = i + 1 < n ? b64[x >> 6 & 63] : '=';
			buf[off++] = i + 2 < n ? b64[x & 63] : '=';
		}
		buf[off < size ? off : size - 1] = '\0';
	} else if (off < size) {
		snprintf(buf + off, size - off, "%.*s", (int)v->u.str.len, v->u.str.ptr);
	}
	off = strlen(buf);
	if (off + 1 < size) {
		buf[off] = '}';
		buf[off + 1] = '\0';
	}
}

static int check_between(checker *c, const st_node *n)
{
	const st_node *lo = n->args[1], *hi = n->args[2];
	if (lo->kind != N_VALUE || hi->kind != N_VALUE)
		return SHOAL_OK;
	const char *what;
	if (lo->value->type != hi->value->type)
		what = "The BETWEEN operator requires same data type for lower and upper bounds";
	else if (st_value_cmp(lo->value, hi->value) > 0)
		what = "The BETWEEN operator requires upper bound to be greater than or equal to "
		       "lower bound";
	else
		return SHOAL_OK;
	char b1[SH_ERRMSG_SIZE / 4], b2[SH_ERRMSG_SIZE / 4];
	format_bound(lo->value, b1, sizeof(b1));
	format_bound(hi->value, b2, sizeof(b2));
	return fail(c,
	            "%s; lower bound operand: AttributeValue: %s, upper bound operand: "
	            "AttributeValue: %s",
	            what, b1, b2);
}

/* The checks of one condition (a comparison, BETWEEN, IN or function). */
static int check_leaf(checker *c, st_node *n)
{
	int rc;
	if ((rc = resolve(c, n, RES_NAMES | RES_VALUES)) != SHOAL_OK)
		return rc;
	if ((rc = check_fns(c, n, FNCHK_ARITY)) != SHOAL_OK)
		return rc;
	if ((rc = check_fns(c, n, FNCHK_DISTINCT)) != SHOAL_OK)
		return rc;
	if (n->kind == N_CMP && (rc = distinct(c, cmp_text[n->op], (int)strlen(cmp_text[n->op]),
	                                       n->args[0], n->args[1])) != SHOAL_OK)
		return rc;
	if ((rc = check_fns(c, n, FNCHK_TYPES)) != SHOAL_OK)
		return rc;
	bool ordered = (n->kind == N_CMP && n->op >= CMP_LT) || n->kind == N_BETWEEN;
	if (ordered) {
		const char *op = n->kind == N_BETWEEN ? "BETWEEN" : cmp_text[n->op];
		for (uint32_t i = 0; i < n->nargs; i++) {
			st_type t = known_type(n->args[i]);
			if (t != ST_NONE && !is_scalar_key_type(t))
				return bad_operand_type(c, op, (int)strlen(op), st_type_name(t));
		}
	}
	if (n->kind == N_BETWEEN)
		return check_between(c, n);
	if (n->kind == N_IN && n->nargs - 1 > ST_MAX_IN_OPERANDS) {
		return fail(
		    c,
		    "The IN operator is provided with too many operands; number of operands: "
		    "%u",
		    n->nargs - 1);
	}
	return SHOAL_OK;
}

static int check_leaves(checker *c, st_node *n)
{
	int rc;
	if (n->kind != N_AND && n->kind != N_OR && n->kind != N_NOT)
		return check_leaf(c, n);
	for (uint32_t i = 0; i < n->nargs; i++)
		if ((rc = check_leaves(c, n->args[i])) != SHOAL_OK)
			return rc;
	return SHOAL_OK;
}

static int check_condition(checker *c)
{
	st_node *root = c->e->cond;
	int rc;
	if ((rc = check_fn_names(c, root)) != SHOAL_OK || (rc = check_misuse(c, root)) != SHOAL_OK)
		return rc;
	if (root->kind == N_FUNC && root->op == FN_SIZE)
		return misused(c, root);
	if ((rc = check_reserved(c, root)) != SHOAL_OK)
		return rc;
	return check_leaves(c, root);
}

/* ------------------------------------------------------------------------ */
/* Updates and projections                                                   */
/* ------------------------------------------------------------------------ */

static const char *const section_name[] = {"SET", "REMOVE", "ADD", "DELETE"};

static int check_update(checker *c)
{
	st_expr *e = c->e;
	int rc;
	for (uint32_t i = 0; i < e->nactions; i++) {
		if ((rc = check_reserved_path(c, &e->actions[i].path)) != SHOAL_OK ||
		    (e->actions[i].value != NULL &&
		     (rc = check_reserved(c, e->actions[i].value)) != SHOAL_OK))
			return rc;
	}
	for (uint32_t i = 0; i < e->nactions; i++)
		if (e->actions[i].value != NULL &&
		    (rc = check_fn_names(c, e->actions[i].value)) != SHOAL_OK)
			return rc;
	if (e->dup_section)
		return fail(c, "The \"%s\" section can only be used once in an update expression;",
		            section_name[e->dup_kind]);
	for (int what = RES_NAMES; what <= RES_VALUES; what++) {
		for (uint32_t i = 0; i < e->nactions; i++) {
			if (what == RES_NAMES &&
			    (rc = resolve_path(c, &e->actions[i].path)) != SHOAL_OK)
				return rc;
			if (e->actions[i].value != NULL &&
			    (rc = resolve(c, e->actions[i].value, what)) != SHOAL_OK)
				return rc;
		}
	}
	const st_path **paths = sh_arena_alloc(c->ctx->arena, e->nactions * sizeof(*paths));
	if (paths == NULL)
		return st_expr_nomem(c->errmsg);
	for (uint32_t i = 0; i < e->nactions; i++)
		paths[i] = &e->actions[i].path;
	if ((rc = check_overlaps(c, paths, e->nactions)) != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < e->nactions; i++) {
		const st_action *act = &e->actions[i];
		if (act->kind != ACT_ADD && act->kind != ACT_DELETE)
			continue;
		st_type t = act->value->value->type;
		const char *tn = NULL;
		switch (t) {
		case ST_S:
			tn = "STRING";
			break;
		case ST_N:
			tn = act->kind == ACT_ADD ? NULL : "NUMBER";
			break;
		case ST_B:
			tn = "BINARY";
			break;
		case ST_NULL:
			tn = "NULL";
			break;
		case ST_BOOL:
			tn = "BOOLEAN";
			break;
		case ST_L:
			tn = "LIST";
			break;
		case ST_M:
			tn = "MAP";
			break;
		default:
			break;
		}
		if (tn != NULL)
			return fail(
			    c,
			    "Incorrect operand type for operator or function; operator: %s, "
			    "operand type: %s",
			    section_name[act->kind], tn);
	}
	for (uint32_t i = 0; i < e->nactions; i++) {
		st_node *v = e->actions[i].value;
		if (v == NULL || e->actions[i].kind != ACT_SET)
			continue;
		if ((rc = check_fns(c, v, FNCHK_ARITY)) != SHOAL_OK ||
		    (rc = check_fns(c, v, FNCHK_TYPES)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int check_projection(checker *c)
{
	st_expr *e = c->e;
	int rc;
	for (uint32_t i = 0; i < e->npaths; i++)
		if ((rc = check_reserved_path(c, &e->paths[i])) != SHOAL_OK)
			return rc;
	for (uint32_t i = 0; i < e->npaths; i++)
		if ((rc = resolve_path(c, &e->paths[i])) != SHOAL_OK)
			return rc;
	const st_path **paths = sh_arena_alloc(c->ctx->arena, e->npaths * sizeof(*paths));
	if (paths == NULL)
		return st_expr_nomem(c->errmsg);
	for (uint32_t i = 0; i < e->npaths; i++)
		paths[i] = &e->paths[i];
	return check_overlaps(c, paths, e->npaths);
}

int st_expr_check(st_expr *e, st_expr_ctx *ctx, char *errmsg)
{
	checker c = {.e = e, .ctx = ctx, .kname = st_expr_kind_name(e->kind), .errmsg = errmsg};
	if (e->redundant_parens)
		return fail(&c, "The expression has redundant parentheses;");
	switch (e->kind) {
	case ST_EXPR_UPDATE:
		return check_update(&c);
	case ST_EXPR_PROJECTION:
		return check_projection(&c);
	default:
		return check_condition(&c);
	}
}
