/*
 * wire_api_int.h -- the schema walker behind proto/wire_api.h (private to
 * proto/'s wire_api*.c files).
 *
 * wire_api_schema.c  what the descriptors do not say: JSON member names,
 *                    fields with special shapes (keyed maps, times, always
 *                    written, skipped), member order on output, ignored
 *                    parameters, the operation table
 * wire_legacy.c      legacy conditional parameters -> expressions
 * wire_api_in.c      JSON object -> protobuf message (generic, in an arena)
 * wire_api_out.c     protobuf message -> JSON object (generic)
 * wire_api_req.c     Request <-> body
 * wire_api_resp.c    Response <-> body, error bodies
 *
 * The walker recurses once per message level of shoal.proto, whose messages
 * (other than AttributeValue, which the value codec handles) are not
 * recursive: its depth is bounded by the schema, not by the input.
 */
#ifndef SHOAL_PROTO_WIRE_API_INT_H
#define SHOAL_PROTO_WIRE_API_INT_H

#include "proto/wire_api.h"
#include "proto/wire_int.h"

/* ------------------------------------------------------------------------ */
/* Schema (wire_api_schema.c)                                                */
/* ------------------------------------------------------------------------ */

typedef enum wire_api_kind {
	WIRE_API_PLAIN = 0,  /* by the descriptor */
	WIRE_API_SKIP,       /* no JSON form (internal fields, CancellationReason.status) */
	WIRE_API_PAGE_ITEMS, /* Query/Scan Items: always written, except with Select COUNT */
	WIRE_API_TIME,       /* int64 ms <-> JSON number of epoch seconds */
	WIRE_API_KEYED,      /* repeated message <-> JSON object keyed by `key` */
	WIRE_API_REQUIRED,   /* a request member DynamoDB's model requires where protobuf
	                        cannot tell it absent from empty (Tag.Value, a plain
	                        string): absent or null is "Value null at ..." */
	WIRE_API_HASH,       /* uint64 placement hash: all 64 bits, which a JSON integer
	                        (signed) cannot hold.  Out: a string "0x%016x"; in: that,
	                        a decimal string, or a non-negative JSON integer */
} wire_api_kind;

typedef struct wire_api_special {
	const ProtobufCMessageDescriptor *desc;
	const char *field; /* protobuf field name */
	wire_api_kind kind;
	bool always;      /* written even when zero / empty / false */
	const char *json; /* JSON member name when not PascalCase(field) */
	/* WIRE_API_KEYED: the element's field holding the key, and the one holding
	 * the value (NULL: the rest of the element is the value object); the
	 * DynamoDB type of the value, for messages about the map. */
	const char *key;
	const char *value;
	const char *java;
} wire_api_special;

/* What the walkers need of field f of desc: its special entry (NULL when
 * it has none) and its JSON member name.  Computed once per descriptor and kept (wire_api_schema.c,
 * "Per-descriptor facts"); the pointer returned stays valid for the life of
 * the process -- or, when the table could not take desc, it is tmp, filled
 * (valid as long as tmp is). */
#define WIRE_API_NAME_MAX 64
typedef struct wire_api_field_info {
	const wire_api_special *sp;   /* NULL: none */
	char name[WIRE_API_NAME_MAX]; /* the JSON member name */
} wire_api_field_info;
const wire_api_field_info *wire_api_field_info_of(const ProtobufCMessageDescriptor *desc,
                                                  const ProtobufCFieldDescriptor *f,
                                                  wire_api_field_info *tmp);

/* Output order of desc's fields: fills idx (desc->n_fields entries) with
 * field indexes, DynamoDB's order where it is known, else field order. */
#define WIRE_API_MAX_FIELDS 32
void wire_api_field_order(const ProtobufCMessageDescriptor *desc, unsigned *idx);

/* Is f a member of a real oneof (two or more members), not an optional? */
bool wire_api_in_group(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f);

/* Parameters accepted and ignored: "<json kind letter><name>" strings
 * (o object, a array, s string, b boolean), NULL-terminated, or NULL. */
const char *const *wire_api_ignored_of(const ProtobufCMessageDescriptor *desc);

/* What to say when a real oneof group has two members set. */
const char *wire_api_group_message(const ProtobufCMessageDescriptor *desc);

/* Well-formed UTF-8; wire_api_utf8_seq: the length of the well-formed sequence
 * at s (0 if there is none). */
bool wire_api_utf8_valid(const char *s, size_t n);
size_t wire_api_utf8_seq(const char *s, size_t n);

/* ------------------------------------------------------------------------ */
/* JSON -> protobuf (wire_api_in.c)                                          */
/* ------------------------------------------------------------------------ */

#define WIRE_API_PATH_MAX 256

typedef struct wire_api_in {
	sh_arena *a;
	char *errmsg;
	bool request; /* a request body: legacy and ignored parameters apply */
	int vcode;    /* the first validation error met, or SHOAL_OK */
	char vmsg[SH_ERRMSG_SIZE];
	char path[WIRE_API_PATH_MAX]; /* DynamoDB-style path of the member being read */
	size_t plen;
} wire_api_in;

void wire_api_in_init(wire_api_in *c, sh_arena *a, bool request, char *errmsg);
/* The result of a whole conversion: rc, else the pending validation error. */
int wire_api_in_finish(wire_api_in *c, int rc);
/* Records a validation error (the first one wins). Returns SHOAL_OK. */
int wire_api_in_invalid(wire_api_in *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The path element `name` in DynamoDB's form (lowerCamel), pushed; returns
 * the previous length for wire_api_path_pop. */
size_t wire_api_path_push(wire_api_in *c, const char *name);
void wire_api_path_pop(wire_api_in *c, size_t len);

/* A new message of type desc from object j (NULL: an empty object). */
int wire_api_message_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                               const json_t *j, ProtobufCMessage **out);
/* JSON value j -> field `field` of m (whose type is desc). */
int wire_api_field_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                             const char *field, const json_t *j, ProtobufCMessage *m);
/* Reads JSON string j (a parameter) into an arena copy. */
int wire_api_string_from_json(wire_api_in *c, const json_t *j, const char **out);
/* Coral's checks of one JSON value, SHOAL_E_SERIALIZATION when it does not
 * fit: a scalar of Java type `java`, a structure, a list, a Boolean (with
 * Coral's string conversions). */
int wire_api_mismatch(wire_api_in *c, const json_t *j, const char *java);
int wire_api_object_check(wire_api_in *c, const json_t *j);
int wire_api_array_check(wire_api_in *c, const json_t *j);
int wire_api_bool_from_json(wire_api_in *c, const json_t *j, protobuf_c_boolean *out);
/* An item / key / ExpressionAttributeValues object -> protobuf via the
 * value codec (validation errors are recorded, not returned). */
int wire_api_item_from_json(wire_api_in *c, const json_t *j, Shoal__Item **out);

/* ------------------------------------------------------------------------ */
/* Legacy parameters (wire_legacy.c)                                         */
/* ------------------------------------------------------------------------ */

/*
 * For a request message desc read from object j: when desc takes legacy
 * parameters and j carries some, *out is a new object (json_decref it) to
 * read instead of j -- j's members with the legacy parameters replaced by
 * expressions and their placeholders.  Otherwise *out is NULL: j as it is,
 * also when the legacy parameters are misused, which is then recorded as
 * a validation error (wire_api_in_invalid).  Returns SHOAL_E_SERIALIZATION
 * for shapes that do not fit, SHOAL_E_NOMEM.
 */
int wire_legacy_rewrite(wire_api_in *c, const ProtobufCMessageDescriptor *desc, const json_t *j,
                        json_t **out);

/* ------------------------------------------------------------------------ */
/* protobuf -> JSON (wire_api_out.c)                                         */
/* ------------------------------------------------------------------------ */

typedef struct wire_api_out {
	sh_arena tmp; /* st_values on their way between the codecs */
	char *errmsg;
	bool select_count;    /* Query/Scan with Select COUNT: no Items */
	bool heuristic_count; /* Select unknown: no Items when none and Count > 0 */
} wire_api_out;

void wire_api_out_init(wire_api_out *c, char *errmsg);
void wire_api_out_fini(wire_api_out *c);

/* Adds m's members to object obj. */
int wire_api_message_to_json(wire_api_out *c, const ProtobufCMessage *m, json_t *obj);
/* A new object for m. */
int wire_api_message_new_json(wire_api_out *c, const ProtobufCMessage *m, json_t **out);
/* A protobuf Item -> a new JSON object through the value codec. */
int wire_api_item_to_json(wire_api_out *c, const Shoal__Item *item, json_t **out);
/* Text (must be UTF-8) -> a new JSON string. */
int wire_api_text_to_json(const char *s, size_t n, json_t **out, char *errmsg);
/* obj[name] = v, taking v (also on failure). SHOAL_E_NOMEM. */
int wire_api_set(json_t *obj, const char *name, json_t *v, char *errmsg);

#endif
