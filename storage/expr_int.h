/*
 * expr_int.h -- internals of the expression module (private to storage/expr_*.c).
 *
 * expr_ctx.c      st_expr_ctx_*: the request's names and values, used flags
 * expr_lex.c      tokens (DynamoDB's lexer) and the "Syntax error; token:
 *                 ..., near: ..." message
 * expr_reserved.c DynamoDB's reserved words
 * expr_parse.c    st_expr_parse: limits, then recursive descent into the
 *                 AST below
 * expr_check.c    what st_expr_parse checks after the syntax, in DynamoDB's
 *                 order: placeholders, reserved words, functions, operand
 *                 types, overlapping paths
 * expr_keycond.c  KeyConditionExpression shape and st_expr_key_condition
 * expr_eval.c     st_expr_eval, document paths on items, st_expr_refs_attr
 * expr_update.c   st_expr_update, st_expr_update_project
 * expr_project.c  st_expr_project and the nested-projection builder
 *
 * Every node, path and array lives in the request's arena.  Resolved names
 * and values point into the st_expr_ctx's maps (the request's), which the
 * caller keeps alive as long as the expressions.
 */
#ifndef SHOAL_STORAGE_EXPR_INT_H
#define SHOAL_STORAGE_EXPR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expr.h"

/* DynamoDB's limit on operators and functions in one expression. */
#define ST_EXPR_MAX_OPERATORS 300
/* Nesting of parentheses, NOT and function calls the parser accepts; it
 * bounds the recursion of the parser and the evaluator. */
#define ST_EXPR_MAX_NESTING 256

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum st_tok_kind {
	TK_EOF = 0,
	TK_WS,
	TK_ID,    /* [a-zA-Z][a-zA-Z0-9_]* that is not a keyword */
	TK_NAME,  /* #[a-zA-Z0-9_]+ */
	TK_VALUE, /* :[a-zA-Z0-9_]+ */
	TK_INDEX, /* 0 | [1-9][0-9]* */
	TK_EQ,
	TK_NE,
	TK_LT,
	TK_LE,
	TK_GT,
	TK_GE,
	TK_PLUS,
	TK_MINUS,
	TK_LPAREN,
	TK_RPAREN,
	TK_LBRACK,
	TK_RBRACK,
	TK_COMMA,
	TK_DOT,
	TK_IN, /* keywords, case-insensitive */
	TK_BETWEEN,
	TK_NOT,
	TK_AND,
	TK_OR,
	TK_SET,
	TK_ADD,
	TK_DELETE,
	TK_REMOVE,
	TK_STRING,  /* "..." or '...': a token of the lexer, never valid */
	TK_UNKNOWN, /* any other character */
} st_tok_kind;

typedef struct st_tok {
	uint8_t kind;
	uint32_t start; /* byte offset in the text */
	uint32_t len;
} st_tok;

/* Splits text into tokens, whitespace included, ending with one TK_EOF at
 * offset len.  SHOAL_E_NOMEM only. */
int st_expr_lex(sh_arena *a, const char *text, size_t len, st_tok **toks, uint32_t *ntoks);

/* Writes "Invalid <kind>: Syntax error; token: "<tok>", near: "<ctx>"" for
 * the token toks[i] and returns SHOAL_E_VALIDATION. */
int st_expr_syntax_error(const char *kind_name, const char *text, const st_tok *toks,
                         uint32_t ntoks, uint32_t i, char *errmsg);

/* Whether name (any case) is one of DynamoDB's reserved words. */
bool st_expr_is_reserved(const char *name, size_t len);

/* "ConditionExpression", "UpdateExpression", ... */
const char *st_expr_kind_name(st_expr_kind kind);

/* ------------------------------------------------------------------------ */
/* The AST                                                                   */
/* ------------------------------------------------------------------------ */

/* One element of a document path: an attribute name or a list index. */
typedef struct st_pelem {
	const char *name; /* resolved name (NULL for an index, or before resolution) */
	uint32_t len;
	uint32_t index;
	bool is_index;
	uint32_t tok; /* its token: TK_ID, TK_NAME or TK_INDEX */
} st_pelem;

typedef struct st_path {
	st_pelem *e;
	uint32_t n; /* >= 1; e[0] is never an index */
} st_path;

typedef enum st_node_kind {
	N_PATH = 0,
	N_VALUE, /* :placeholder */
	N_FUNC,
	N_ARITH, /* op '+' or '-' (update only) */
	N_CMP,   /* op st_cmp */
	N_BETWEEN,
	N_IN,
	N_AND, /* n-ary */
	N_OR,  /* n-ary */
	N_NOT,
} st_node_kind;

typedef enum st_cmp {
	CMP_EQ = 0,
	CMP_NE,
	CMP_LT,
	CMP_LE,
	CMP_GT,
	CMP_GE,
} st_cmp;

typedef enum st_fn {
	FN_UNKNOWN = 0,
	FN_ATTRIBUTE_EXISTS,
	FN_ATTRIBUTE_NOT_EXISTS,
	FN_ATTRIBUTE_TYPE,
	FN_BEGINS_WITH,
	FN_CONTAINS,
	FN_SIZE,
	FN_IF_NOT_EXISTS,
	FN_LIST_APPEND,
} st_fn;

typedef struct st_node st_node;

struct st_node {
	uint8_t kind;   /* st_node_kind */
	uint8_t op;     /* N_CMP: st_cmp; N_FUNC: st_fn; N_ARITH: '+' or '-' */
	uint8_t parens; /* written inside parentheses */
	uint32_t tok;   /* N_FUNC: its name; N_VALUE: the placeholder; else first token */
	uint32_t nargs;
	st_node **args;        /* operands in source order (N_IN: args[0] IN (args[1..])) */
	st_path path;          /* N_PATH */
	const st_value *value; /* N_VALUE, once resolved */
};

typedef enum st_action_kind {
	ACT_SET = 0,
	ACT_REMOVE,
	ACT_ADD,
	ACT_DELETE,
} st_action_kind;

typedef struct st_action {
	uint8_t kind; /* st_action_kind */
	st_path path;
	st_node *value; /* SET: the value; ADD/DELETE: an N_VALUE; REMOVE: NULL */
} st_action;

/*
 * A trie of document paths, built by projections (ProjectionExpression,
 * UPDATED_OLD/NEW) and by updates (the targets of SET/REMOVE/ADD/DELETE):
 * one node per map or list on the way, children in first-seen order.  The
 * parser has refused overlapping and conflicting paths, so a node is a leaf
 * or has children, never both, and its children are all names or all
 * indexes.  Arena-allocated.
 */
typedef struct st_ptrie st_ptrie;

typedef struct st_ptrie_kid {
	const st_pelem *el;
	st_ptrie *node;
} st_ptrie_kid;

struct st_ptrie {
	const st_action *act;  /* update: a leaf's action */
	const st_value *value; /* projection: the selected value; update: SET's
	                        * computed value or ADD/DELETE's operand */
	bool is_list;          /* children are list indexes */
	st_ptrie_kid *kids;
	uint32_t n, cap;
};

/* The child of parent for path element el, created if absent; NULL when out
 * of memory. */
st_ptrie *st_ptrie_child(sh_arena *a, st_ptrie *parent, const st_pelem *el);

/* Sorts a list node's children by index (insertion sort: no malloc behind the
 * allocator's back, and a 4 KB expression has at most a few hundred paths). */
void st_ptrie_sort(st_ptrie *list);

/* One condition of a KeyConditionExpression, normalised to "key op value". */
typedef struct st_kc_term {
	const char *name;
	uint32_t len;
	st_kc_op op;
	const st_value *v[2];
} st_kc_term;

struct st_expr {
	st_expr_kind kind;
	const char *text; /* the source (the caller's), for messages */
	st_tok *toks;
	uint32_t ntoks;
	st_node *cond;      /* CONDITION, FILTER, KEY_CONDITION */
	st_action *actions; /* UPDATE, in source order */
	uint32_t nactions;
	st_path *paths; /* PROJECTION, in source order */
	uint32_t npaths;
	st_kc_term kc[2]; /* KEY_CONDITION */
	uint32_t nkc;
	bool redundant_parens; /* found by the parser, reported by the checks */
	bool dup_section;      /* UPDATE: a clause written twice ... */
	uint8_t dup_kind;      /* ... this one (st_action_kind) */
};

/* The text of a token. */
static inline const char *st_expr_tok_text(const st_expr *e, uint32_t tok)
{
	return e->text + e->toks[tok].start;
}

/* ------------------------------------------------------------------------ */
/* Cross-file helpers                                                        */
/* ------------------------------------------------------------------------ */

/* The checks after the syntax (expr_check.c): resolves the placeholders of e
 * through ctx and reports the first problem in DynamoDB's order. */
int st_expr_check(st_expr *e, st_expr_ctx *ctx, char *errmsg);

/* Checks the shape of a parsed KEY_CONDITION and fills e->kc (expr_keycond.c). */
int st_expr_check_key_condition(st_expr *e, char *errmsg);

/* Formats a path as DynamoDB prints it: "[a, b, [1], c]". */
void st_expr_path_str(const st_path *p, char *buf, size_t size);

/* The value at path p in item (an ST_M, or NULL), or NULL when absent. */
const st_value *st_expr_path_get(const st_value *item, const st_path *p);

/* Builds the ST_M holding the values of item at the n paths (nested maps and
 * lists down to them; list elements compacted in index order; absent paths
 * left out).  Values are deep-copied into a.  The paths must not overlap. */
int st_expr_project_paths(sh_arena *a, const st_value *item, const st_path *const *paths,
                          uint32_t n, st_value **out, char *errmsg);

/* "out of memory" */
int st_expr_nomem(char *errmsg);

#endif
