/*
 * wire_int.h -- helpers shared by proto/'s request and response converters
 * (private to proto/; the contract is wire.h).
 *
 * wire_check.c  DynamoDB's parameter-constraint messages (collected, up to
 *               ten, "N validation errors detected: ..."), name and enum
 *               checks, and the normalisation of request values with
 *               DynamoDB's per-parameter message prefixes
 * wire_req.c    data-plane requests: protobuf <-> st_*_req
 * wire_table.c  table operations: protobuf -> st_table_def and names
 * wire_desc.c   st_table_def / st_table_info <-> protobuf
 * wire_resp.c   data-plane responses and error responses
 * wire_json.c / wire_json_out.c  DynamoDB JSON in and out
 */
#ifndef SHOAL_PROTO_WIRE_INT_H
#define SHOAL_PROTO_WIRE_INT_H

#include "proto/wire.h"

/* DynamoDB's pattern for table and index names. */
#define WIRE_NAME_PATTERN "[a-zA-Z0-9_.-]+"

/* Collected constraint violations ("Value ... at ... failed to satisfy
 * constraint: ..."); DynamoDB reports at most ten. */
typedef struct wire_verrs {
	int n;
	size_t len;
	char buf[1536];
} wire_verrs;

/* value NULL prints as `Value null`, else `Value '<value>'`. */
void wire_verr_add(wire_verrs *e, const char *value, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* SHOAL_OK if nothing was collected, else SHOAL_E_VALIDATION with
 * "N validation error(s) detected: a; b". */
int wire_verr_done(const wire_verrs *e, char *errmsg);

/* Stage 2: "ExpressionAttributeNames can only be specified when using
 * expressions" (names given, no expression), "ExpressionAttributeValues can
 * only be specified when using expressions: <val_exprs> is|are null" (values
 * given, no expression that takes values; val_exprs NULL: the operation has
 * none, plural: "are"). */
int wire_check_expr_params(bool names, bool values, bool any_expr, bool any_val_expr,
                           const char *val_exprs, bool plural, char *errmsg);

/* Member must not be null. */
void wire_check_present(wire_verrs *e, const char *path, bool present);
/* A table or index name: not null (if required), the pattern, 3..255 chars. */
void wire_check_name(wire_verrs *e, const char *path, const char *name, bool required);
/* s (if not NULL) is one of set (NULL-terminated, in DynamoDB's order). */
void wire_check_enum(wire_verrs *e, const char *path, const char *s, const char *const *set);
/* present => v >= min / v <= max. */
void wire_check_min(wire_verrs *e, const char *path, bool present, long long v, long long min);
void wire_check_max(wire_verrs *e, const char *path, bool present, long long v, long long max);

/* Characters (UTF-8 code points) in s, as DynamoDB's length limits count. */
size_t wire_char_len(const char *s);
/* s matches WIRE_NAME_PATTERN. */
bool wire_name_chars_ok(const char *s);

/* The enum sets, in the order DynamoDB lists them in messages. */
extern const char *const wire_rcc_set[];    /* ReturnConsumedCapacity */
extern const char *const wire_rv_set[];     /* ReturnValues */
extern const char *const wire_ricm_set[];   /* ReturnItemCollectionMetrics */
extern const char *const wire_rvoccf_set[]; /* ReturnValuesOnConditionCheckFailure */
extern const char *const wire_select_set[]; /* Select */

/* Arena copy of s (NULL stays NULL). */
int wire_dup(sh_arena *a, const char *s, const char **out, char *errmsg);
/* Tags of a request as st_tag (strings shared with pb; a missing Key or
 * Value stays NULL for st_tags_check to report). */
int wire_tags_from_pb(sh_arena *a, Shoal__Tag *const *pb, size_t n, st_tag **out, uint32_t *n_out,
                      char *errmsg);

/* Request values, converted and normalised (NULL pb gives *out NULL):
 *   key / item      plain normalisation message
 *   start key       "The provided starting key is invalid: ..." (DynamoDB
 *                   omits the prefix for number and duplicate messages)
 *   values          "ExpressionAttributeValues contains invalid value: <msg>
 *                   for key <name>"
 *   names           sorted M of S */
int wire_norm_item(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg);
int wire_norm_start_key(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg);
int wire_norm_values(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg);
int wire_norm_names(sh_arena *a, const Shoal__ExpressionAttributeNames *pb, const st_value **out,
                    char *errmsg);

/* Points jansson at sh_malloc/sh_free, once per process (wire_json.c). */
void wire_json_init(void);

/* Text of the storage enums, for messages and protobuf. */
const char *wire_rv_name(st_return_values rv);
const char *wire_select_name(st_select s);

#endif
