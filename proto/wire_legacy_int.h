/*
 * wire_legacy_int.h -- between the two halves of the legacy-parameter
 * translation (private to them; the walker's entry point is
 * wire_legacy_rewrite in wire_api_int.h):
 *
 * wire_legacy.c       what the legacy parameters mean: which operation takes
 *                     which, DynamoDB's checks and messages, the comparison
 *                     operators' rules, the rewritten body
 * wire_legacy_text.c  how the replacing expressions are spelled: generated
 *                     placeholders, conditions, update clauses
 *
 * Memory: text is built in the request's arena; the placeholder maps are
 * JSON objects owned by wire_legacy_ph (wire_legacy_ph_fini drops them).
 * Every function returning int answers SHOAL_OK or SHOAL_E_NOMEM (message
 * in ph->errmsg).
 */
#ifndef SHOAL_PROTO_WIRE_LEGACY_INT_H
#define SHOAL_PROTO_WIRE_LEGACY_INT_H

#include "proto/wire_api_int.h"

/* How an operator is spelled in an expression. */
typedef enum wire_lg_kind {
	WIRE_LG_BINARY,       /* a <text> :v */
	WIRE_LG_EXISTS,       /* attribute_exists(a) */
	WIRE_LG_NOT_EXISTS,   /* attribute_not_exists(a) */
	WIRE_LG_FUNC,         /* <text>(a, :v) */
	WIRE_LG_NOT_CONTAINS, /* (attribute_exists(a) AND NOT contains(a, :v)) */
	WIRE_LG_IN,           /* a IN (:v1, ...) */
	WIRE_LG_BETWEEN,      /* a BETWEEN :lo AND :hi */
} wire_lg_kind;

/* A ComparisonOperator (the table is wire_legacy.c's). */
typedef struct wire_lg_cmp {
	const char *name;  /* "BEGINS_WITH" */
	unsigned min, max; /* operand count */
	unsigned types;    /* operand types it takes: bit (1 << st_type) */
	bool key;          /* usable in KeyConditions */
	wire_lg_kind kind;
	const char *text; /* the operator or function, for BINARY and FUNC */
} wire_lg_cmp;

/* Text growing in an arena; oom is sticky (the text is then unusable). */
typedef struct wire_lg_text {
	sh_arena *a;
	char *p; /* NUL-terminated once anything was added */
	size_t len, cap;
	bool oom;
} wire_lg_text;

void wire_lg_add(wire_lg_text *t, const char *s, size_t n);
void wire_lg_str(wire_lg_text *t, const char *s);

/* A shallow copy of object j, or a new empty object for NULL; NULL when
 * out of memory (jansson's json_copy drops the members it fails to add). */
json_t *wire_lg_copy_object(const json_t *j);

/* The generated placeholders of one request message. */
typedef struct wire_lg_ph {
	sh_arena *a;
	char *errmsg;
	char prefix[40]; /* "legacy", "legacy_", ... */
	unsigned nnames, nvalues;
	json_t *names;  /* the client's ExpressionAttributeNames + ours */
	json_t *values; /* the same for ExpressionAttributeValues */
} wire_lg_ph;

/* Starts from the client's maps (objects or NULL, borrowed), choosing a
 * prefix that none of the client's placeholders starts with. */
int wire_lg_ph_init(wire_lg_ph *ph, sh_arena *a, const json_t *names, const json_t *values,
                    char *errmsg);
void wire_lg_ph_fini(wire_lg_ph *ph);

/* Appends a new placeholder for attribute name (len bytes) / for
 * AttributeValue v (a new reference is taken) to t. */
int wire_lg_name(wire_lg_ph *ph, wire_lg_text *t, const char *name, size_t len);
int wire_lg_value(wire_lg_ph *ph, wire_lg_text *t, json_t *v);

/* Appends the condition on attribute name with operator op and its n
 * operands (checked by the caller) to t. */
int wire_lg_condition(wire_lg_ph *ph, wire_lg_text *t, const char *name, const wire_lg_cmp *op,
                      json_t *const *vals, size_t n);

/* An UpdateExpression built one action at a time, clauses in DynamoDB's
 * order: SET, REMOVE, ADD, DELETE. */
typedef enum wire_lg_action {
	WIRE_LG_SET,    /* SET a = :v */
	WIRE_LG_APPEND, /* SET a = list_append(if_not_exists(a, :empty), :v) */
	WIRE_LG_REMOVE, /* REMOVE a */
	WIRE_LG_ADD,    /* ADD a :v */
	WIRE_LG_DELETE, /* DELETE a :v */
} wire_lg_action;

typedef struct wire_lg_update {
	wire_lg_text clause[4]; /* SET, REMOVE, ADD, DELETE */
} wire_lg_update;

void wire_lg_update_init(wire_lg_update *u, sh_arena *a);
/* value is NULL for REMOVE. */
int wire_lg_update_add(wire_lg_ph *ph, wire_lg_update *u, wire_lg_action action, const char *name,
                       json_t *value);
/* The whole expression into *out (NULL when no action was added). */
int wire_lg_update_text(wire_lg_ph *ph, wire_lg_update *u, const char **out);

#endif
