/*
 * wire_legacy_int.h -- between the two halves of the legacy-parameter
 * translation (private to them; the walker's entry point is
 * wire_legacy_rewrite in wire_api_int.h):
 *
 * wire_legacy.c        what the legacy parameters mean: which operation
 *                      takes which, the comparison operators' rules, each
 *                      parameter's own checks, the rewritten body
 * wire_legacy_check.c  DynamoDB's checks before any meaning: shapes,
 *                      constraints, mixing with expressions,
 *                      ConditionalOperator's use
 * wire_legacy_text.c   how the replacing expressions are spelled:
 *                      generated placeholders, conditions, update clauses
 *
 * Memory: text is built in the request's arena; the placeholder maps are
 * JSON objects owned by wire_legacy_ph (wire_legacy_ph_fini drops them).
 * Every function returning int answers SHOAL_OK or SHOAL_E_NOMEM (message
 * in ph->errmsg).
 */
#ifndef SHOAL_PROTO_WIRE_LEGACY_INT_H
#define SHOAL_PROTO_WIRE_LEGACY_INT_H

#include "proto/wire_api_int.h"

/* ------------------------------------------------------------------------ */
/* Spelling (wire_legacy_text.c)                                             */
/* ------------------------------------------------------------------------ */

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

/*
 * The comparison operators, in the order DynamoDB lists them in its enum
 * messages, with DynamoDB's rules for their operands (its API reference:
 * "EQ ... is supported for all data types, including lists and maps";
 * ordered comparisons, IN and BETWEEN take String, Number or Binary;
 * BEGINS_WITH String or Binary; CONTAINS "String, Number, or Binary (not a
 * set type)"), whether a Query key condition may use them, and their
 * spelling: X(name, min operands, max operands, operand types, key, kind,
 * operator or function).  The one list: wire_legacy.c's table and
 * wire_legacy_check.c's enum set come from it.
 */
#define WIRE_LG_T(t)   (1u << (t))
#define WIRE_LG_T_SNB  (WIRE_LG_T(ST_S) | WIRE_LG_T(ST_N) | WIRE_LG_T(ST_B))
#define WIRE_LG_T_ANY  0xffffu
#define WIRE_LG_NO_MAX 1000000u
#define WIRE_LG_CMP_OPS(X)                                                                         \
	X("IN", 1, WIRE_LG_NO_MAX, WIRE_LG_T_SNB, false, WIRE_LG_IN, NULL)                         \
	X("NULL", 0, 0, 0, false, WIRE_LG_NOT_EXISTS, NULL)                                        \
	X("BETWEEN", 2, 2, WIRE_LG_T_SNB, true, WIRE_LG_BETWEEN, NULL)                             \
	X("LT", 1, 1, WIRE_LG_T_SNB, true, WIRE_LG_BINARY, "<")                                    \
	X("NOT_CONTAINS", 1, 1, WIRE_LG_T_SNB, false, WIRE_LG_NOT_CONTAINS, NULL)                  \
	X("EQ", 1, 1, WIRE_LG_T_ANY, true, WIRE_LG_BINARY, "=")                                    \
	X("GT", 1, 1, WIRE_LG_T_SNB, true, WIRE_LG_BINARY, ">")                                    \
	X("NOT_NULL", 0, 0, 0, false, WIRE_LG_EXISTS, NULL)                                        \
	X("NE", 1, 1, WIRE_LG_T_ANY, false, WIRE_LG_BINARY, "<>")                                  \
	X("LE", 1, 1, WIRE_LG_T_SNB, true, WIRE_LG_BINARY, "<=")                                   \
	X("BEGINS_WITH", 1, 1, WIRE_LG_T(ST_S) | WIRE_LG_T(ST_B), true, WIRE_LG_FUNC,              \
	  "begins_with")                                                                           \
	X("GE", 1, 1, WIRE_LG_T_SNB, true, WIRE_LG_BINARY, ">=")                                   \
	X("CONTAINS", 1, 1, WIRE_LG_T_SNB, false, WIRE_LG_FUNC, "contains")

/* A ComparisonOperator (one row of WIRE_LG_CMP_OPS). */
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

/* ------------------------------------------------------------------------ */
/* The body being rewritten (wire_legacy.c, wire_legacy_check.c)             */
/* ------------------------------------------------------------------------ */

/* The legacy parameters. */
enum {
	WIRE_LG_ATG = 1u << 0,      /* AttributesToGet */
	WIRE_LG_EXPECTED = 1u << 1, /* Expected */
	WIRE_LG_CONDOP = 1u << 2,   /* ConditionalOperator */
	WIRE_LG_UPDATES = 1u << 3,  /* AttributeUpdates */
	WIRE_LG_KEYCOND = 1u << 4,  /* KeyConditions */
	WIRE_LG_QFILTER = 1u << 5,  /* QueryFilter */
	WIRE_LG_SFILTER = 1u << 6,  /* ScanFilter */
};

/* The legacy parameters (wire_legacy.c), ended by a NULL name: bit, name,
 * and for the maps of conditions or updates, the element type as Coral
 * names it in messages. */
typedef struct wire_lg_param {
	unsigned bit;
	const char *name;
	const char *java; /* NULL: not a map */
} wire_lg_param;
extern const wire_lg_param wire_lg_params[];

/* The WIRE_LG_* bit of a parameter name (0: not a legacy parameter). */
unsigned wire_lg_param_bit(const char *name);

/* A request message that takes legacy parameters. */
typedef struct wire_lg_op {
	const ProtobufCMessageDescriptor *desc;
	/* Non-expression and expression parameters, in the order DynamoDB names
	 * them in "Can not use both ..." and "... when using expressions:
	 * FilterExpression and KeyConditionExpression are null" (NULL-terminated). */
	const char *nonexpr[5];
	const char *expr[4];
} wire_lg_op;

/* One message's rewrite. */
typedef struct wire_lg {
	wire_api_in *c;
	const wire_lg_op *op;
	const json_t *in; /* the client's object (borrowed, never modified) */
	unsigned present; /* WIRE_LG_* bits given (not null) */
	bool failed;      /* a validation error was recorded */
	wire_lg_ph ph;    /* the placeholders, once translation starts */
} wire_lg;

/* Member `name` of j when present and not null (non-const for jansson's
 * iterators). */
json_t *wire_lg_member(const json_t *j, const char *name);
/* Records a validation error (the first one wins) and sets g->failed. */
void wire_lg_invalid(wire_lg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An AttributeValue, converted and normalised: shapes are returned
 * (SHOAL_E_SERIALIZATION), an invalid value is recorded unless quiet;
 * *ok says whether *v is usable. */
int wire_lg_value_of(wire_lg *g, const json_t *j, bool quiet, st_value *v, bool *ok);

/* wire_legacy_check.c, in DynamoDB's order.  Shapes return
 * SHOAL_E_SERIALIZATION / SHOAL_E_NOMEM; the others record their error. */
int wire_lg_check_shapes(wire_lg *g);
void wire_lg_check_constraints(wire_lg *g);
void wire_lg_check_mixing(wire_lg *g);
void wire_lg_check_condop(wire_lg *g);

#endif
