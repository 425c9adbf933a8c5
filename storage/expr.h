/*
 * expr.h -- DynamoDB's expression language (private to storage/).
 *
 * One parser for the five kinds of expression, producing an AST in the
 * request's arena, and the functions that use an AST: evaluate a condition or
 * filter, apply an update, project an item, extract a key condition.
 *
 * Names and values: expressions refer to "#name" placeholders and ":value"
 * placeholders from the request's ExpressionAttributeNames/Values.  All the
 * expressions of one request share one st_expr_ctx, which records which
 * placeholders were used, so that st_expr_ctx_check_unused can report the
 * unused ones as DynamoDB does.
 *
 * Errors are SHOAL_E_VALIDATION with DynamoDB's message, which starts with
 * "Invalid <Kind>Expression: " for parse and resolution errors, e.g.
 *   Invalid ConditionExpression: Syntax error; token: "=", near: "a = = b"
 *   Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status
 *   Invalid FilterExpression: An expression attribute value used in expression is not defined;
 * attribute value: :v Value provided in ExpressionAttributeValues unused in expressions: keys: {:x}
 * or SHOAL_E_NOMEM.
 */
#ifndef SHOAL_STORAGE_EXPR_H
#define SHOAL_STORAGE_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage.h"

typedef struct st_expr st_expr; /* an AST; arena-owned */

typedef enum st_expr_kind {
	ST_EXPR_CONDITION = 0, /* ConditionExpression */
	ST_EXPR_FILTER,        /* FilterExpression: same grammar as a condition */
	ST_EXPR_KEY_CONDITION, /* KeyConditionExpression */
	ST_EXPR_UPDATE,        /* UpdateExpression */
	ST_EXPR_PROJECTION,    /* ProjectionExpression */
} st_expr_kind;

typedef struct st_expr_ctx {
	sh_arena *arena;
	const st_value *names;  /* M of S, or NULL */
	const st_value *values; /* M, or NULL */
	uint8_t *names_used;    /* one flag per attr of names */
	uint8_t *values_used;   /* one flag per attr of values */
} st_expr_ctx;

/* Prepares a context. Validates the maps themselves: names must map to
 * non-empty S values, placeholders must start with '#' / ':' and values must
 * be normalised (the caller normalises them).  An empty map that was given is
 * an error, as in DynamoDB ("ExpressionAttributeValues must not be empty"). */
int st_expr_ctx_init(st_expr_ctx *ctx, sh_arena *a, const st_expr_attrs *attrs, char *errmsg);

/* After every expression of the request has been parsed: reports unused
 * names, then unused values (DynamoDB's messages). */
int st_expr_ctx_check_unused(const st_expr_ctx *ctx, char *errmsg);

/* Parses text (at most ST_MAX_EXPR_SIZE bytes, else a ValidationException
 * that says so) as an expression of the given kind, resolving placeholders
 * through ctx.  Checks what can be checked without an item: syntax, reserved
 * words, undefined placeholders, function names and arity, operand types of
 * values known at parse time (e.g. begins_with with a number value), IN with
 * more than ST_MAX_IN_OPERANDS operands, overlapping or conflicting update
 * paths, nesting depth of paths. */
int st_expr_parse(st_expr_ctx *ctx, st_expr_kind kind, const char *text, st_expr **out,
                  char *errmsg);

/* Evaluates a CONDITION or FILTER on item (NULL: no item, every path is
 * absent).  Comparisons between different types are false, as in DynamoDB. */
int st_expr_eval(const st_expr *e, const st_value *item, bool *result, char *errmsg);

/* Applies an UPDATE to old (NULL if there is no item; then the new item
 * starts as a copy of key).  *out is the new item, normalised (maps sorted,
 * sets sorted).  Runtime errors are ValidationExceptions with DynamoDB's
 * messages ("The provided expression refers to an attribute that does not
 * exist in the item", "An operand in the update expression has an incorrect
 * data type", "The document path provided in the update expression is
 * invalid for update", number overflow, ...). */
int st_expr_update(const st_expr *e, sh_arena *a, const st_value *old, const st_value *key,
                   st_value **out, char *errmsg);

/* For ReturnValues UPDATED_OLD / UPDATED_NEW: the parts of item at the
 * paths the UPDATE sets, removes, adds or deletes (a nested path yields the
 * nested structure down to it, as DynamoDB returns it). *out is an ST_M,
 * possibly empty. */
int st_expr_update_project(const st_expr *update, sh_arena *a, const st_value *item, st_value **out,
                           char *errmsg);

/* Applies a PROJECTION to item: a new ST_M holding only the projected paths
 * (list elements keep their relative order and are compacted, as DynamoDB). */
int st_expr_project(const st_expr *proj, sh_arena *a, const st_value *item, st_value **out,
                    char *errmsg);

/* Whether any path of the expression starts with top-level attribute name
 * (used to refuse updating key attributes and filtering on key attributes). */
bool st_expr_refs_attr(const st_expr *e, const char *name, size_t len);

typedef enum st_kc_op {
	ST_KC_NONE = 0, /* no sort-key condition */
	ST_KC_EQ,
	ST_KC_LT,
	ST_KC_LE,
	ST_KC_GT,
	ST_KC_GE,
	ST_KC_BETWEEN,
	ST_KC_BEGINS_WITH,
} st_kc_op;

typedef struct st_key_cond {
	const st_value *hash; /* the partition key value (=) */
	st_kc_op op;          /* condition on the sort key */
	const st_value *lo;   /* operand; lower bound of BETWEEN */
	const st_value *hi;   /* upper bound of BETWEEN */
} st_key_cond;

/* Checks a parsed KEY_CONDITION against a key schema (DynamoDB's messages:
 * "Query condition missed key schema element: PK", "Query key condition not
 * supported", type mismatches, BETWEEN bounds out of order, begins_with on a
 * number) and extracts it. */
int st_expr_key_condition(const st_expr *e, const st_key_schema *ks, st_key_cond *out,
                          char *errmsg);

#endif
