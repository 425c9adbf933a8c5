/*
 * expr_parse.c -- st_expr_parse: the recursive-descent parser.
 *
 * st_expr_parse runs in three steps, and the first failure is the answer:
 *   1. limits on the raw text (empty, longer than ST_MAX_EXPR_SIZE);
 *   2. the syntax, here: the token stream (expr_lex.c) is parsed into the
 *      AST of expr_int.h; a syntax error names the first token that cannot
 *      continue the expression, as DynamoDB's ANTLR parser does;
 *   3. everything else (expr_check.c, expr_keycond.c): placeholders,
 *      reserved words, functions, operand types, overlapping paths, in the
 *      order DynamoDB reports them.
 *
 * The grammars (DynamoDB's, as published with the DAX client):
 *
 *   condition  := or
 *   or         := and (OR and)*                 precedence: comparisons,
 *   and        := not (AND not)*                BETWEEN, IN and functions
 *   not        := NOT not | pred                bind tighter than NOT, NOT
 *   pred       := operand comparator operand    tighter than AND, AND
 *              |  operand BETWEEN operand AND operand         tighter than OR
 *              |  operand IN '(' operand (',' operand)* ')'
 *              |  function | '(' condition ')'
 *   operand    := path | :value | function | '(' operand ')'
 *   function   := ID '(' operand (',' operand)* ')'
 *   path       := (ID | #name) ('.' (ID | #name) | '[' INDEX ']')*
 *
 *   update     := (SET set (',' set)* | REMOVE path (',' path)*
 *                 | ADD path :value (',' ...)* | DELETE path :value (',' ...)*)+
 *   set        := path '=' (operand | arith)
 *   arith      := operand ('+' | '-') operand | '(' arith ')'
 *
 *   projection := path (',' path)*
 *
 * A '(' at the start of a predicate may open a condition or an operand; the
 * parser does not guess: it parses a condition in which a bare operand is
 * allowed, and the operand is accepted only if a comparator, BETWEEN or IN
 * follows it (or a ')' that makes it a parenthesised operand).  AND and OR
 * chains are n-ary nodes built by loops, so only parentheses, NOT and
 * function calls make the parser (and the evaluator) recurse, at most
 * ST_EXPR_MAX_NESTING levels.
 */
#include <string.h>

#include "expr_int.h"

/* ------------------------------------------------------------------------ */
/* Parser state                                                              */
/* ------------------------------------------------------------------------ */

typedef struct parser {
	st_expr *e;
	sh_arena *a;
	const char *kname;
	const st_tok *toks;
	uint32_t ntoks;
	uint32_t cur; /* current token, never whitespace */
	uint32_t depth;
	uint32_t nops; /* operators and functions so far */
	char *errmsg;
} parser;

typedef struct nvec {
	st_node **v;
	uint32_t n, cap;
} nvec;

static uint8_t peek(const parser *p)
{
	return p->toks[p->cur].kind;
}

/* The kind of the token after the current one. */
static uint8_t peek2(const parser *p)
{
	uint32_t i = p->cur + 1;
	while (i < p->ntoks && p->toks[i].kind == TK_WS)
		i++;
	return i < p->ntoks ? p->toks[i].kind : TK_EOF;
}

static void skip_ws(parser *p)
{
	while (p->toks[p->cur].kind == TK_WS)
		p->cur++;
}

static void advance(parser *p)
{
	if (p->toks[p->cur].kind != TK_EOF)
		p->cur++;
	skip_ws(p);
}

static int syntax(parser *p)
{
	return st_expr_syntax_error(p->kname, p->e->text, p->toks, p->ntoks, p->cur, p->errmsg);
}

static int expect(parser *p, uint8_t kind)
{
	if (peek(p) != kind)
		return syntax(p);
	advance(p);
	return SHOAL_OK;
}

/* Operators and function calls in the whole text, counted on the tokens. */
static uint32_t count_operators(const parser *p)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->ntoks; i++) {
		uint8_t k = p->toks[i].kind;
		if ((k >= TK_EQ && k <= TK_MINUS) || (k >= TK_IN && k <= TK_OR)) {
			n++;
		} else if (k == TK_ID) {
			uint32_t j = i + 1;
			while (j < p->ntoks && p->toks[j].kind == TK_WS)
				j++;
			n += j < p->ntoks && p->toks[j].kind == TK_LPAREN;
		}
	}
	return n;
}

/* Enters one level of parentheses, NOT or function call. */
static int enter(parser *p)
{
	if (++p->depth <= ST_EXPR_MAX_NESTING)
		return SHOAL_OK;
	/* Every level is a '(', a NOT or a function call, so nesting this deep
	 * in 4 KB means more operators than DynamoDB allows, or parentheses
	 * around parentheses.  The parser stops here rather than recurse on. */
	uint32_t nops = count_operators(p);
	if (nops > ST_EXPR_MAX_OPERATORS)
		return sh_errf(p->errmsg, SHOAL_E_VALIDATION,
		               "Invalid %s: The expression contains too many operators; operator "
		               "count: %u",
		               p->kname, nops);
	return sh_errf(p->errmsg, SHOAL_E_VALIDATION,
	               "Invalid %s: The expression has redundant parentheses;", p->kname);
}

static st_node *new_node(parser *p, uint8_t kind, uint32_t tok)
{
	st_node *n = sh_arena_calloc(p->a, 1, sizeof(*n));
	if (n != NULL) {
		n->kind = kind;
		n->tok = tok;
	}
	return n;
}

static int push(parser *p, nvec *v, st_node *x)
{
	if (v->n == v->cap) {
		uint32_t cap = v->cap == 0 ? 4 : v->cap * 2;
		st_node **nv = sh_arena_alloc(p->a, cap * sizeof(*nv));
		if (nv == NULL)
			return st_expr_nomem(p->errmsg);
		if (v->n > 0)
			memcpy(nv, v->v, v->n * sizeof(*nv));
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = x;
	return SHOAL_OK;
}

/* A node with the given operands. */
static int make(parser *p, uint8_t kind, uint8_t op, uint32_t tok, st_node **args, uint32_t nargs,
                st_node **out)
{
	st_node *n = new_node(p, kind, tok);
	if (n == NULL)
		return st_expr_nomem(p->errmsg);
	n->op = op;
	n->nargs = nargs;
	n->args = args;
	*out = n;
	return SHOAL_OK;
}

static int make2(parser *p, uint8_t kind, uint8_t op, uint32_t tok, st_node *x, st_node *y,
                 st_node **out)
{
	st_node **args = sh_arena_alloc(p->a, 2 * sizeof(*args));
	if (args == NULL)
		return st_expr_nomem(p->errmsg);
	args[0] = x;
	args[1] = y;
	return make(p, kind, op, tok, args, 2, out);
}

static void mark_parens(parser *p, st_node *x)
{
	if (x->parens)
		p->e->redundant_parens = true;
	x->parens = 1;
}

/* ------------------------------------------------------------------------ */
/* Paths, values, functions                                                  */
/* ------------------------------------------------------------------------ */

static uint32_t parse_index(const char *s, uint32_t len)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < len; i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > UINT32_MAX)
			return UINT32_MAX;
	}
	return (uint32_t)v;
}

/* path at the current token, which is an ID or a #name. */
static int parse_path(parser *p, st_path *out)
{
	st_pelem buf[ST_MAX_DEPTH];
	uint32_t n = 0;
	buf[n++] = (st_pelem){.tok = p->cur};
	advance(p);
	for (;;) {
		uint8_t k = peek(p);
		st_pelem el = {0};
		if (k == TK_DOT) {
			advance(p);
			if (peek(p) != TK_ID && peek(p) != TK_NAME)
				return syntax(p);
			el.tok = p->cur;
			advance(p);
		} else if (k == TK_LBRACK) {
			advance(p);
			if (peek(p) != TK_INDEX)
				return syntax(p);
			const st_tok *t = &p->toks[p->cur];
			el.is_index = true;
			el.index = parse_index(p->e->text + t->start, t->len);
			el.tok = p->cur;
			advance(p);
			int rc = expect(p, TK_RBRACK);
			if (rc != SHOAL_OK)
				return rc;
		} else {
			break;
		}
		if (n == ST_MAX_DEPTH)
			return sh_errf(p->errmsg, SHOAL_E_VALIDATION,
			               "Invalid %s: The document path has too many nesting levels; "
			               "nesting levels: %u",
			               p->kname, n + 1);
		buf[n++] = el;
	}
	out->e = sh_arena_memdup(p->a, buf, n * sizeof(buf[0]));
	if (out->e == NULL)
		return st_expr_nomem(p->errmsg);
	out->n = n;
	return SHOAL_OK;
}

static int path_node(parser *p, st_node **out)
{
	st_node *n = new_node(p, N_PATH, p->cur);
	if (n == NULL)
		return st_expr_nomem(p->errmsg);
	*out = n;
	return parse_path(p, &n->path);
}

static int value_node(parser *p, st_node **out)
{
	st_node *n = new_node(p, N_VALUE, p->cur);
	if (n == NULL)
		return st_expr_nomem(p->errmsg);
	advance(p);
	*out = n;
	return SHOAL_OK;
}

static uint8_t fn_lookup(const char *s, uint32_t len)
{
	static const struct {
		const char *name;
		uint8_t fn;
	} fns[] = {
	    {"attribute_exists", FN_ATTRIBUTE_EXISTS},
	    {"attribute_not_exists", FN_ATTRIBUTE_NOT_EXISTS},
	    {"attribute_type", FN_ATTRIBUTE_TYPE},
	    {"begins_with", FN_BEGINS_WITH},
	    {"contains", FN_CONTAINS},
	    {"size", FN_SIZE},
	    {"if_not_exists", FN_IF_NOT_EXISTS},
	    {"list_append", FN_LIST_APPEND},
	};
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (strlen(fns[i].name) == len && memcmp(fns[i].name, s, len) == 0)
			return fns[i].fn;
	return FN_UNKNOWN;
}

typedef int (*operand_fn)(parser *p, st_node **out);

/* function at the current token (an ID followed by '('). */
static int parse_func(parser *p, operand_fn arg, st_node **out)
{
	uint32_t tok = p->cur;
	const st_tok *t = &p->toks[tok];
	nvec args = {0};
	int rc;
	p->nops++;
	if ((rc = enter(p)) != SHOAL_OK)
		return rc;
	advance(p); /* name */
	advance(p); /* ( */
	for (;;) {
		st_node *x;
		if ((rc = arg(p, &x)) != SHOAL_OK || (rc = push(p, &args, x)) != SHOAL_OK)
			return rc;
		if (peek(p) != TK_COMMA)
			break;
		advance(p);
	}
	if ((rc = expect(p, TK_RPAREN)) != SHOAL_OK)
		return rc;
	p->depth--;
	return make(p, N_FUNC, fn_lookup(p->e->text + t->start, t->len), tok, args.v, args.n, out);
}

/* ------------------------------------------------------------------------ */
/* Conditions                                                                */
/* ------------------------------------------------------------------------ */

static int parse_or(parser *p, st_node **out);

/* A condition node (a function may be either). */
static bool is_cond(const st_node *n)
{
	return n->kind >= N_CMP || n->kind == N_FUNC;
}

static bool is_operand(const st_node *n)
{
	return n->kind <= N_ARITH;
}

static int parse_coperand(parser *p, st_node **out)
{
	int rc;
	switch (peek(p)) {
	case TK_LPAREN:
		if ((rc = enter(p)) != SHOAL_OK)
			return rc;
		advance(p);
		if ((rc = parse_coperand(p, out)) != SHOAL_OK ||
		    (rc = expect(p, TK_RPAREN)) != SHOAL_OK)
			return rc;
		p->depth--;
		mark_parens(p, *out);
		return SHOAL_OK;
	case TK_ID:
		if (peek2(p) == TK_LPAREN)
			return parse_func(p, parse_coperand, out);
		return path_node(p, out);
	case TK_NAME:
		return path_node(p, out);
	case TK_VALUE:
		return value_node(p, out);
	default:
		return syntax(p);
	}
}

/* An operand, or a parenthesised condition. */
static int parse_cprimary(parser *p, st_node **out)
{
	int rc;
	if (peek(p) != TK_LPAREN)
		return parse_coperand(p, out);
	if ((rc = enter(p)) != SHOAL_OK)
		return rc;
	advance(p);
	if ((rc = parse_or(p, out)) != SHOAL_OK || (rc = expect(p, TK_RPAREN)) != SHOAL_OK)
		return rc;
	p->depth--;
	mark_parens(p, *out);
	return SHOAL_OK;
}

static int parse_pred(parser *p, st_node **out)
{
	uint32_t tok = p->cur;
	st_node *x, *y;
	int rc = parse_cprimary(p, &x);
	if (rc != SHOAL_OK)
		return rc;
	uint8_t k = peek(p);
	if (k >= TK_EQ && k <= TK_GE) {
		if (!is_operand(x))
			return syntax(p);
		p->nops++;
		advance(p);
		if ((rc = parse_coperand(p, &y)) != SHOAL_OK)
			return rc;
		return make2(p, N_CMP, (uint8_t)(CMP_EQ + (k - TK_EQ)), tok, x, y, out);
	}
	if (k == TK_BETWEEN) {
		if (!is_operand(x))
			return syntax(p);
		p->nops++;
		advance(p);
		st_node **args = sh_arena_alloc(p->a, 3 * sizeof(*args));
		if (args == NULL)
			return st_expr_nomem(p->errmsg);
		args[0] = x;
		if ((rc = parse_coperand(p, &args[1])) != SHOAL_OK ||
		    (rc = expect(p, TK_AND)) != SHOAL_OK ||
		    (rc = parse_coperand(p, &args[2])) != SHOAL_OK)
			return rc;
		return make(p, N_BETWEEN, 0, tok, args, 3, out);
	}
	if (k == TK_IN) {
		if (!is_operand(x))
			return syntax(p);
		p->nops++;
		advance(p);
		if ((rc = expect(p, TK_LPAREN)) != SHOAL_OK)
			return rc;
		nvec args = {0};
		if ((rc = push(p, &args, x)) != SHOAL_OK)
			return rc;
		for (;;) {
			if ((rc = parse_coperand(p, &y)) != SHOAL_OK ||
			    (rc = push(p, &args, y)) != SHOAL_OK)
				return rc;
			if (peek(p) != TK_COMMA)
				break;
			advance(p);
		}
		if ((rc = expect(p, TK_RPAREN)) != SHOAL_OK)
			return rc;
		return make(p, N_IN, 0, tok, args.v, args.n, out);
	}
	*out = x; /* a condition, or an operand the caller must refuse */
	return SHOAL_OK;
}

static int parse_not(parser *p, st_node **out)
{
	int rc;
	if (peek(p) != TK_NOT)
		return parse_pred(p, out);
	uint32_t tok = p->cur;
	p->nops++;
	if ((rc = enter(p)) != SHOAL_OK)
		return rc;
	advance(p);
	st_node **arg = sh_arena_alloc(p->a, sizeof(*arg));
	if (arg == NULL)
		return st_expr_nomem(p->errmsg);
	if ((rc = parse_not(p, arg)) != SHOAL_OK)
		return rc;
	if (!is_cond(*arg))
		return syntax(p);
	p->depth--;
	return make(p, N_NOT, 0, tok, arg, 1, out);
}

/* and := not (AND not)*, or := and (OR and)*: one n-ary node per chain. */
static int parse_chain(parser *p, uint8_t optok, uint8_t kind, operand_fn sub, st_node **out)
{
	uint32_t tok = p->cur;
	st_node *x;
	int rc = sub(p, &x);
	if (rc != SHOAL_OK)
		return rc;
	if (peek(p) != optok) {
		*out = x;
		return SHOAL_OK;
	}
	nvec args = {0};
	if (!is_cond(x))
		return syntax(p);
	if ((rc = push(p, &args, x)) != SHOAL_OK)
		return rc;
	while (peek(p) == optok) {
		p->nops++;
		advance(p);
		if ((rc = sub(p, &x)) != SHOAL_OK)
			return rc;
		if (!is_cond(x))
			return syntax(p);
		if ((rc = push(p, &args, x)) != SHOAL_OK)
			return rc;
	}
	return make(p, kind, 0, tok, args.v, args.n, out);
}

static int parse_and(parser *p, st_node **out)
{
	return parse_chain(p, TK_AND, N_AND, parse_not, out);
}

static int parse_or(parser *p, st_node **out)
{
	return parse_chain(p, TK_OR, N_OR, parse_and, out);
}

static int parse_condition(parser *p)
{
	int rc = parse_or(p, &p->e->cond);
	if (rc != SHOAL_OK)
		return rc;
	if (!is_cond(p->e->cond) || peek(p) != TK_EOF)
		return syntax(p);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Updates                                                                   */
/* ------------------------------------------------------------------------ */

static int parse_set_value(parser *p, st_node **out);

static int parse_uprimary(parser *p, bool allow_arith, st_node **out);

static int parse_uoperand(parser *p, st_node **out)
{
	return parse_uprimary(p, false, out);
}

static int parse_uprimary(parser *p, bool allow_arith, st_node **out)
{
	int rc;
	switch (peek(p)) {
	case TK_LPAREN:
		if ((rc = enter(p)) != SHOAL_OK)
			return rc;
		advance(p);
		rc = allow_arith ? parse_set_value(p, out) : parse_uoperand(p, out);
		if (rc != SHOAL_OK || (rc = expect(p, TK_RPAREN)) != SHOAL_OK)
			return rc;
		p->depth--;
		mark_parens(p, *out);
		return SHOAL_OK;
	case TK_ID:
		if (peek2(p) == TK_LPAREN)
			return parse_func(p, parse_uoperand, out);
		return path_node(p, out);
	case TK_NAME:
		return path_node(p, out);
	case TK_VALUE:
		return value_node(p, out);
	default:
		return syntax(p);
	}
}

static int parse_set_value(parser *p, st_node **out)
{
	uint32_t tok = p->cur;
	st_node *x, *y;
	int rc = parse_uprimary(p, true, &x);
	if (rc != SHOAL_OK)
		return rc;
	uint8_t k = peek(p);
	if (x->kind == N_ARITH || (k != TK_PLUS && k != TK_MINUS)) {
		*out = x;
		return SHOAL_OK;
	}
	p->nops++;
	advance(p);
	if ((rc = parse_uoperand(p, &y)) != SHOAL_OK)
		return rc;
	return make2(p, N_ARITH, k == TK_PLUS ? '+' : '-', tok, x, y, out);
}

static int action_kind(uint8_t tok)
{
	switch (tok) {
	case TK_SET:
		return ACT_SET;
	case TK_REMOVE:
		return ACT_REMOVE;
	case TK_ADD:
		return ACT_ADD;
	case TK_DELETE:
		return ACT_DELETE;
	default:
		return -1;
	}
}

static int parse_update(parser *p)
{
	st_action *acts = NULL;
	uint32_t n = 0, cap = 0;
	bool seen[4] = {false, false, false, false};
	int rc;
	if (action_kind(peek(p)) < 0)
		return syntax(p);
	while (peek(p) != TK_EOF) {
		int kind = action_kind(peek(p));
		if (kind < 0)
			return syntax(p);
		if (seen[kind] && !p->e->dup_section) {
			p->e->dup_section = true;
			p->e->dup_kind = (uint8_t)kind;
		}
		seen[kind] = true;
		advance(p);
		for (;;) {
			if (n == cap) {
				cap = cap == 0 ? 8 : cap * 2;
				st_action *na = sh_arena_alloc(p->a, cap * sizeof(*na));
				if (na == NULL)
					return st_expr_nomem(p->errmsg);
				if (n > 0)
					memcpy(na, acts, n * sizeof(*na));
				acts = na;
			}
			st_action *act = &acts[n];
			memset(act, 0, sizeof(*act));
			act->kind = (uint8_t)kind;
			if (peek(p) != TK_ID && peek(p) != TK_NAME)
				return syntax(p);
			if ((rc = parse_path(p, &act->path)) != SHOAL_OK)
				return rc;
			if (kind == ACT_SET) {
				if ((rc = expect(p, TK_EQ)) != SHOAL_OK ||
				    (rc = parse_set_value(p, &act->value)) != SHOAL_OK)
					return rc;
			} else if (kind == ACT_ADD || kind == ACT_DELETE) {
				if (peek(p) != TK_VALUE)
					return syntax(p);
				if ((rc = value_node(p, &act->value)) != SHOAL_OK)
					return rc;
			}
			n++;
			if (peek(p) != TK_COMMA)
				break;
			advance(p);
		}
	}
	p->e->actions = acts;
	p->e->nactions = n;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Projections                                                               */
/* ------------------------------------------------------------------------ */

static int parse_projection(parser *p)
{
	st_path *paths = NULL;
	uint32_t n = 0, cap = 0;
	int rc;
	for (;;) {
		if (peek(p) != TK_ID && peek(p) != TK_NAME)
			return syntax(p);
		if (n == cap) {
			cap = cap == 0 ? 8 : cap * 2;
			st_path *np = sh_arena_alloc(p->a, cap * sizeof(*np));
			if (np == NULL)
				return st_expr_nomem(p->errmsg);
			if (n > 0)
				memcpy(np, paths, n * sizeof(*np));
			paths = np;
		}
		if ((rc = parse_path(p, &paths[n])) != SHOAL_OK)
			return rc;
		n++;
		if (peek(p) != TK_COMMA)
			break;
		advance(p);
	}
	if (peek(p) != TK_EOF)
		return syntax(p);
	p->e->paths = paths;
	p->e->npaths = n;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* st_expr_parse                                                             */
/* ------------------------------------------------------------------------ */

int st_expr_parse(st_expr_ctx *ctx, st_expr_kind kind, const char *text, st_expr **out,
                  char *errmsg)
{
	const char *kname = st_expr_kind_name(kind);
	size_t len = strlen(text);
	int rc;
	*out = NULL;
	if (len == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid %s: The expression can not be empty;", kname);
	if (len > ST_MAX_EXPR_SIZE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid %s: Expression size has exceeded the maximum allowed size; "
		               "expression size: %zu",
		               kname, len);
	st_expr *e = sh_arena_calloc(ctx->arena, 1, sizeof(*e));
	if (e == NULL)
		return st_expr_nomem(errmsg);
	e->kind = kind;
	e->text = text;
	if (st_expr_lex(ctx->arena, text, len, &e->toks, &e->ntoks) != SHOAL_OK)
		return st_expr_nomem(errmsg);
	parser p = {
	    .e = e,
	    .a = ctx->arena,
	    .kname = kname,
	    .toks = e->toks,
	    .ntoks = e->ntoks,
	    .errmsg = errmsg,
	};
	skip_ws(&p);
	switch (kind) {
	case ST_EXPR_CONDITION:
	case ST_EXPR_FILTER:
	case ST_EXPR_KEY_CONDITION:
		rc = parse_condition(&p);
		break;
	case ST_EXPR_UPDATE:
		rc = parse_update(&p);
		break;
	case ST_EXPR_PROJECTION:
		rc = parse_projection(&p);
		break;
	default:
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "unknown expression kind %d", (int)kind);
	}
	if (rc != SHOAL_OK)
		return rc;
	if (p.nops > ST_EXPR_MAX_OPERATORS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid %s: The expression contains too many operators; operator "
		               "count: %u",
		               kname, p.nops);
	if ((rc = st_expr_check(e, ctx, errmsg)) != SHOAL_OK)
		return rc;
	if (kind == ST_EXPR_KEY_CONDITION &&
	    (rc = st_expr_check_key_condition(e, errmsg)) != SHOAL_OK)
		return rc;
	*out = e;
	return SHOAL_OK;
}
