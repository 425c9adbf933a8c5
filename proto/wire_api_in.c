/*
 * wire_api_in.c -- a DynamoDB JSON body -> a protobuf message, walking the
 * message's descriptor.
 *
 * For each field of the descriptor the walker looks up its member in the
 * JSON object (wire_api_field_info_of); members that are absent or null are skipped,
 * and so is every member the descriptor does not name (DynamoDB ignores
 * unknown members).  The field's protobuf type says which JSON type fits:
 *
 *   string, bytes        JSON string           (Coral: "String")
 *   bool                 true/false, or "true"/"false"/"1"/"0"/"yes"/"no"
 *                        as Coral converts them            ("Boolean")
 *   int32, uint32        JSON integer in range              ("Integer")
 *   int64, uint64        JSON integer in range              ("Long")
 *   int64 (WIRE_API_TIME)      JSON number of epoch seconds       ("Date")
 *   double               JSON number                        ("Double")
 *   Item, names          the value codec of proto/wire.h
 *   other messages       a JSON object, recursively
 *   repeated             a JSON array; WIRE_API_KEYED: a JSON object keyed by
 *                        table/index name
 *
 * A type that does not fit is a SerializationException at once, in Coral's
 * words.  Validation errors (the value codec's, null members of lists and
 * maps, two members of one union, U+0000 in a string, misused legacy
 * parameters -- wire_legacy.c rewrites the others into expressions first)
 * are recorded -- the first one wins -- and reported by wire_api_in_finish only if
 * the whole body deserialised, because DynamoDB deserialises before it
 * validates.  The message is built in the arena with protobuf-c's own
 * initialiser, so defaults are the generated ones, and every pointer the
 * walker stores (elements of repeated fields included) is valid: whatever
 * it returns with SHOAL_OK can be packed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proto/wire_api_int.h"

#define MSG_STRUCT "Start of structure or map found where not expected"
#define MSG_LIST   "Start of list found where not expected"
#define MSG_HASH                                                                                   \
	"1 validation error detected: Value '%.40s' at '%s' failed to satisfy constraint: "        \
	"Member must be a 64-bit hash, decimal or 0x hexadecimal, at most 0xffffffffffffffff"
#define MSG_NULL                                                                                   \
	"1 validation error detected: Value null at '%s' failed to satisfy constraint: Member "    \
	"must not be null"

/* One value of any field type. */
typedef union slot {
	const char *s;
	ProtobufCBinaryData b;
	protobuf_c_boolean bo;
	int32_t i32;
	uint32_t u32;
	int64_t i64;
	uint64_t u64;
	double d;
	float fl;
	ProtobufCMessage *m;
} slot;

void wire_api_in_init(wire_api_in *c, sh_arena *a, bool request, char *errmsg)
{
	c->a = a;
	c->errmsg = errmsg;
	c->request = request;
	c->vcode = SHOAL_OK;
	c->vmsg[0] = '\0';
	c->path[0] = '\0';
	c->plen = 0;
}

int wire_api_in_finish(wire_api_in *c, int rc)
{
	if (rc != SHOAL_OK)
		return rc;
	if (c->vcode != SHOAL_OK)
		return sh_errf(c->errmsg, c->vcode, "%s", c->vmsg);
	return SHOAL_OK;
}

int wire_api_in_invalid(wire_api_in *c, const char *fmt, ...)
{
	if (c->vcode != SHOAL_OK)
		return SHOAL_OK;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->vmsg, sizeof(c->vmsg), fmt, ap);
	va_end(ap);
	c->vcode = SHOAL_E_VALIDATION;
	return SHOAL_OK;
}

static int ser(wire_api_in *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ser(wire_api_in *c, const char *fmt, ...)
{
	char buf[SH_ERRMSG_SIZE];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sh_errf(c->errmsg, SHOAL_E_SERIALIZATION, "%s", buf);
}

static int nomem(wire_api_in *c)
{
	return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory converting a JSON request");
}

/* ------------------------------------------------------------------------ */
/* Paths ('transactItems.1.member.put.key')                                  */
/* ------------------------------------------------------------------------ */

static size_t path_push_raw(wire_api_in *c, const char *s, size_t n, bool lower_first)
{
	size_t mark = c->plen;
	size_t need = (c->plen > 0 ? 1 : 0) + n;
	if (c->plen + need + 1 > sizeof(c->path))
		return mark; /* too deep to say: the path stays a prefix */
	if (c->plen > 0)
		c->path[c->plen++] = '.';
	memcpy(c->path + c->plen, s, n);
	if (lower_first && n > 0 && c->path[c->plen] >= 'A' && c->path[c->plen] <= 'Z')
		c->path[c->plen] = (char)(c->path[c->plen] - 'A' + 'a');
	c->plen += n;
	c->path[c->plen] = '\0';
	return mark;
}

size_t wire_api_path_push(wire_api_in *c, const char *name)
{
	return path_push_raw(c, name, strlen(name), true);
}

void wire_api_path_pop(wire_api_in *c, size_t len)
{
	c->plen = len;
	c->path[len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

/* Coral's word for a JSON scalar that does not fit. */
static const char *token(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_INTEGER:
		return "NUMBER_VALUE";
	case JSON_REAL:
		return "DECIMAL_VALUE";
	case JSON_TRUE:
		return "TRUE_VALUE";
	case JSON_FALSE:
		return "FALSE_VALUE";
	default:
		return "STRING_VALUE";
	}
}

/* j where a scalar of Java type `java` was expected. */
static int mismatch(wire_api_in *c, const json_t *j, const char *java)
{
	if (json_is_object(j))
		return ser(c, MSG_STRUCT);
	if (json_is_array(j))
		return ser(c, "Unrecognized collection type class java.lang.%s", java);
	return ser(c, "%s cannot be converted to %s", token(j), java);
}

int wire_api_mismatch(wire_api_in *c, const json_t *j, const char *java)
{
	return mismatch(c, j, java);
}

/* j where a structure was expected. */
static int object_check(wire_api_in *c, const json_t *j)
{
	if (json_is_object(j))
		return SHOAL_OK;
	if (json_is_array(j))
		return ser(c, MSG_LIST);
	return ser(c, "Unexpected value type in payload");
}

/* j where a list was expected. */
static int array_check(wire_api_in *c, const json_t *j)
{
	if (json_is_array(j))
		return SHOAL_OK;
	if (json_is_object(j))
		return ser(c, MSG_STRUCT);
	return ser(c, "Unexpected field type");
}

int wire_api_object_check(wire_api_in *c, const json_t *j)
{
	return object_check(c, j);
}

int wire_api_array_check(wire_api_in *c, const json_t *j)
{
	return array_check(c, j);
}

static int text_from_json(wire_api_in *c, const json_t *j, const char **out, size_t *len)
{
	if (!json_is_string(j))
		return mismatch(c, j, "String");
	const char *s = json_string_value(j);
	size_t n = json_string_length(j);
	if (memchr(s, '\0', n) != NULL)
		wire_api_in_invalid(c,
		                    "1 validation error detected: Value at '%s' failed to satisfy "
		                    "constraint: Member must not contain the character U+0000",
		                    c->path);
	char *p = sh_arena_strndup(c->a, s, n);
	if (p == NULL)
		return nomem(c);
	*out = p;
	*len = n;
	return SHOAL_OK;
}

int wire_api_string_from_json(wire_api_in *c, const json_t *j, const char **out)
{
	size_t n;
	return text_from_json(c, j, out, &n);
}

static int bool_from_json(wire_api_in *c, const json_t *j, protobuf_c_boolean *out)
{
	if (json_is_boolean(j)) {
		*out = json_is_true(j);
		return SHOAL_OK;
	}
	if (json_is_string(j)) {
		/* Coral converts these strings, case-insensitively. */
		const char *s = json_string_value(j);
		if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0 ||
		    strcasecmp(s, "yes") == 0) {
			*out = 1;
			return SHOAL_OK;
		}
		if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0 ||
		    strcasecmp(s, "no") == 0) {
			*out = 0;
			return SHOAL_OK;
		}
		return ser(c, "Unexpected token received from parser");
	}
	return mismatch(c, j, "Boolean");
}

int wire_api_bool_from_json(wire_api_in *c, const json_t *j, protobuf_c_boolean *out)
{
	return bool_from_json(c, j, out);
}

static int int_from_json(wire_api_in *c, const json_t *j, long long min, long long max,
                         const char *java, long long *out)
{
	if (!json_is_integer(j))
		return mismatch(c, j, java);
	long long v = json_integer_value(j);
	if (v < min || v > max)
		return ser(c, "NUMBER_VALUE cannot be converted to %s", java);
	*out = v;
	return SHOAL_OK;
}

/* A placement hash (WIRE_API_HASH): "0x" and 1..16 hex digits, or decimal
 * digits up to 2^64-1, as a string; or a non-negative JSON integer. */
static int hash_from_json(wire_api_in *c, const json_t *j, uint64_t *out)
{
	if (json_is_integer(j)) {
		long long v = 0;
		int rc = int_from_json(c, j, 0, INT64_MAX, "Long", &v);
		*out = (uint64_t)v;
		return rc;
	}
	if (!json_is_string(j))
		return mismatch(c, j, "String");
	const char *s = json_string_value(j);
	bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	const char *d = hex ? s + 2 : s;
	uint64_t v = 0;
	size_t n = 0;
	for (; d[n] != '\0'; n++) {
		unsigned digit;
		if (d[n] >= '0' && d[n] <= '9')
			digit = (unsigned)(d[n] - '0');
		else if (hex && d[n] >= 'a' && d[n] <= 'f')
			digit = (unsigned)(d[n] - 'a' + 10);
		else if (hex && d[n] >= 'A' && d[n] <= 'F')
			digit = (unsigned)(d[n] - 'A' + 10);
		else
			break;
		uint64_t base = hex ? 16 : 10;
		if (v > (UINT64_MAX - digit) / base)
			return wire_api_in_invalid(c, MSG_HASH, s, c->path);
		v = v * base + digit;
	}
	if (n == 0 || d[n] != '\0')
		return wire_api_in_invalid(c, MSG_HASH, s, c->path);
	*out = v;
	return SHOAL_OK;
}

static int double_from_json(wire_api_in *c, const json_t *j, const char *java, double *out)
{
	if (!json_is_number(j))
		return mismatch(c, j, java);
	*out = json_number_value(j);
	return SHOAL_OK;
}

/* Epoch seconds (DynamoDB's timestamps) -> ms. */
static int time_from_json(wire_api_in *c, const json_t *j, int64_t *out)
{
	double sec;
	if (!json_is_number(j))
		return mismatch(c, j, "Date");
	sec = json_number_value(j);
	if (!isfinite(sec) || fabs(sec) > 9.0e15)
		return ser(c, "%s cannot be converted to Date", token(j));
	*out = (int64_t)llround(sec * 1000.0);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Values through the codec                                                  */
/* ------------------------------------------------------------------------ */

/* A codec error: validation errors are recorded, others returned. */
static int codec_error(wire_api_in *c, int rc, const char *msg)
{
	if (rc == SHOAL_E_VALIDATION)
		return wire_api_in_invalid(c, "%s", msg);
	return sh_errf(c->errmsg, rc, "%s", msg);
}

static Shoal__Item *empty_item(wire_api_in *c)
{
	Shoal__Item *it = sh_arena_alloc(c->a, sizeof(*it));
	if (it != NULL)
		shoal__item__init(it);
	return it;
}

int wire_api_item_from_json(wire_api_in *c, const json_t *j, Shoal__Item **out)
{
	char msg[SH_ERRMSG_SIZE];
	st_value v;
	int rc = wire_item_from_json(c->a, j, &v, msg);
	if (rc == SHOAL_OK)
		rc = wire_item_to_pb(c->a, &v, out, msg);
	if (rc == SHOAL_OK)
		return SHOAL_OK;
	rc = codec_error(c, rc, msg);
	if (rc != SHOAL_OK)
		return rc;
	/* Invalid but deserialised: keep going with a valid placeholder. */
	*out = empty_item(c);
	return *out != NULL ? SHOAL_OK : nomem(c);
}

/* ExpressionAttributeValues: as an Item, but a value that the codec refuses
 * is reported as DynamoDB reports it, "ExpressionAttributeValues contains
 * invalid value: <the codec's message> for key :v", naming the first
 * placeholder whose value fails (wire_norm_values words the later checks
 * the same way). */
static int values_from_json(wire_api_in *c, const json_t *j, Shoal__Item **out)
{
	char msg[SH_ERRMSG_SIZE];
	st_value v;
	int rc = wire_item_from_json(c->a, j, &v, msg);
	if (rc == SHOAL_OK)
		rc = wire_item_to_pb(c->a, &v, out, msg);
	if (rc == SHOAL_OK)
		return SHOAL_OK;
	const char *key;
	json_t *x;
	if (rc == SHOAL_E_VALIDATION && json_is_object(j)) {
		json_object_foreach((json_t *)j, key, x)
		{
			char one_msg[SH_ERRMSG_SIZE];
			st_value one;
			int one_rc = wire_value_from_json(c->a, x, &one, one_msg);
			if (one_rc == SHOAL_E_VALIDATION) {
				rc = wire_api_in_invalid(
				    c,
				    "ExpressionAttributeValues contains invalid "
				    "value: %s for key %.255s",
				    one_msg, key);
				break;
			}
		}
	}
	if (rc != SHOAL_OK)
		rc = codec_error(c, rc, msg);
	if (rc != SHOAL_OK)
		return rc;
	/* Invalid but deserialised: keep going with a valid placeholder. */
	*out = empty_item(c);
	return *out != NULL ? SHOAL_OK : nomem(c);
}

static int names_from_json(wire_api_in *c, const json_t *j, Shoal__ExpressionAttributeNames **out)
{
	char msg[SH_ERRMSG_SIZE];
	st_value v;
	int rc = wire_names_from_json(c->a, j, &v, msg);
	if (rc == SHOAL_OK)
		rc = wire_names_to_pb(c->a, &v, out, msg);
	if (rc == SHOAL_OK)
		return SHOAL_OK;
	rc = codec_error(c, rc, msg);
	if (rc != SHOAL_OK)
		return rc;
	*out = sh_arena_alloc(c->a, sizeof(**out));
	if (*out == NULL)
		return nomem(c);
	shoal__expression_attribute_names__init(*out);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Fields                                                                    */
/* ------------------------------------------------------------------------ */

static size_t slot_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return sizeof(ProtobufCMessage *);
	}
}

static int fill_message(wire_api_in *c, const ProtobufCMessageDescriptor *desc, const json_t *j,
                        ProtobufCMessage *m, const char *skip);

static ProtobufCMessage *new_message(wire_api_in *c, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = sh_arena_alloc(c->a, desc->sizeof_message);
	if (m != NULL)
		protobuf_c_message_init(desc, m);
	return m;
}

int wire_api_message_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                               const json_t *j, ProtobufCMessage **out)
{
	if (j != NULL) {
		int rc = object_check(c, j);
		if (rc != SHOAL_OK)
			return rc;
	}
	ProtobufCMessage *m = new_message(c, desc);
	if (m == NULL)
		return nomem(c);
	int rc = fill_message(c, desc, j, m, NULL);
	if (rc != SHOAL_OK)
		return rc;
	*out = m;
	return SHOAL_OK;
}

/* One value of field f (not repeated) from j into *out. */
static int single_from_json(wire_api_in *c, const ProtobufCFieldDescriptor *f,
                            const wire_api_special *sp, const json_t *j, slot *out)
{
	long long v = 0;
	int rc;
	memset(out, 0, sizeof(*out));
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		return wire_api_string_from_json(c, j, &out->s);
	case PROTOBUF_C_TYPE_BYTES: {
		const char *s;
		size_t n;
		rc = text_from_json(c, j, &s, &n);
		out->b.data = (uint8_t *)s;
		out->b.len = n;
		return rc;
	}
	case PROTOBUF_C_TYPE_BOOL:
		return bool_from_json(c, j, &out->bo);
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		rc = int_from_json(c, j, INT32_MIN, INT32_MAX, "Integer", &v);
		out->i32 = (int32_t)v;
		return rc;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		rc = int_from_json(c, j, 0, UINT32_MAX, "Integer", &v);
		out->u32 = (uint32_t)v;
		return rc;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (sp != NULL && sp->kind == WIRE_API_TIME)
			return time_from_json(c, j, &out->i64);
		rc = int_from_json(c, j, INT64_MIN, INT64_MAX, "Long", &v);
		out->i64 = (int64_t)v;
		return rc;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (sp != NULL && sp->kind == WIRE_API_HASH)
			return hash_from_json(c, j, &out->u64);
		rc = int_from_json(c, j, 0, INT64_MAX, "Long", &v);
		out->u64 = (uint64_t)v;
		return rc;
	case PROTOBUF_C_TYPE_DOUBLE:
		return double_from_json(c, j, "Double", &out->d);
	case PROTOBUF_C_TYPE_FLOAT: {
		double d = 0;
		rc = double_from_json(c, j, "Float", &d);
		out->fl = (float)d;
		return rc;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		if (f->descriptor == &shoal__item__descriptor &&
		    strcmp(f->name, "expression_attribute_values") == 0)
			return values_from_json(c, j, (Shoal__Item **)&out->m);
		if (f->descriptor == &shoal__item__descriptor)
			return wire_api_item_from_json(c, j, (Shoal__Item **)&out->m);
		if (f->descriptor == &shoal__expression_attribute_names__descriptor)
			return names_from_json(c, j, (Shoal__ExpressionAttributeNames **)&out->m);
		return wire_api_message_from_json(c, f->descriptor, j, &out->m);
	default:
		return ser(c, "Unexpected field type");
	}
}

static int field_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                           const ProtobufCFieldDescriptor *f, const wire_api_special *sp,
                           const json_t *j, ProtobufCMessage *m);

/* A JSON array -> repeated field f. */
static int repeated_from_json(wire_api_in *c, const ProtobufCFieldDescriptor *f,
                              const wire_api_special *sp, const json_t *j, ProtobufCMessage *m)
{
	int rc = array_check(c, j);
	if (rc != SHOAL_OK)
		return rc;
	size_t n = json_array_size(j), size = slot_size(f->type), k = 0;
	char *arr = sh_arena_calloc(c->a, n, size);
	if (arr == NULL)
		return nomem(c);
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_array_get(j, i);
		char idx[32];
		int len = snprintf(idx, sizeof(idx), "%zu.member", i + 1);
		size_t mark = path_push_raw(c, idx, (size_t)len, false);
		slot s;
		memset(&s, 0, sizeof(s));
		if (json_is_null(v))
			rc = wire_api_in_invalid(c, MSG_NULL, c->path);
		else
			rc = single_from_json(c, f, sp, v, &s);
		wire_api_path_pop(c, mark);
		if (rc != SHOAL_OK)
			return rc;
		if (!json_is_null(v))
			memcpy(arr + size * k++, &s, size);
	}
	*(size_t *)((char *)m + f->quantifier_offset) = k;
	*(void **)((char *)m + f->offset) = arr;
	return SHOAL_OK;
}

/* A JSON object keyed by table or index name -> repeated field f. */
static int keyed_from_json(wire_api_in *c, const ProtobufCFieldDescriptor *f,
                           const wire_api_special *sp, const json_t *j, ProtobufCMessage *m)
{
	if (json_is_array(j))
		return ser(c, "Unrecognized collection type java.util.Map<java.lang.String, %s>",
		           sp->java);
	if (!json_is_object(j))
		return ser(c, "Unexpected field type");
	const ProtobufCMessageDescriptor *edesc = f->descriptor;
	const ProtobufCFieldDescriptor *kf =
	    protobuf_c_message_descriptor_get_field_by_name(edesc, sp->key);
	const ProtobufCFieldDescriptor *vf =
	    sp->value != NULL ? protobuf_c_message_descriptor_get_field_by_name(edesc, sp->value)
	                      : NULL;
	if (kf == NULL || kf->type != PROTOBUF_C_TYPE_STRING || (sp->value != NULL && vf == NULL))
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "bad keyed field %s", f->name);
	size_t n = json_object_size(j), k = 0;
	ProtobufCMessage **arr = sh_arena_calloc(c->a, n, sizeof(*arr));
	if (arr == NULL)
		return nomem(c);
	const char *key;
	size_t key_len;
	json_t *v;
	json_object_keylen_foreach((json_t *)j, key, key_len, v)
	{
		if (k == n)
			break;
		size_t mark = path_push_raw(c, key, key_len, false);
		path_push_raw(c, "member", 6, false);
		int rc = SHOAL_OK;
		ProtobufCMessage *e = NULL;
		if (json_is_null(v)) {
			rc = wire_api_in_invalid(c, MSG_NULL, c->path);
		} else if ((e = new_message(c, edesc)) == NULL) {
			rc = nomem(c);
		} else {
			char *name = sh_arena_strndup(c->a, key, key_len);
			if (name == NULL)
				rc = nomem(c);
			else if (memchr(key, '\0', key_len) != NULL)
				wire_api_in_invalid(
				    c,
				    "1 validation error detected: Value at '%s' failed to "
				    "satisfy constraint: Member must not contain the "
				    "character U+0000",
				    c->path);
			if (rc == SHOAL_OK)
				*(char **)((char *)e + kf->offset) = name;
			if (rc == SHOAL_OK && vf != NULL)
				rc = field_from_json(c, edesc, vf, NULL, v, e);
			else if (rc == SHOAL_OK && (rc = object_check(c, v)) == SHOAL_OK)
				rc = fill_message(c, edesc, v, e, sp->key);
		}
		wire_api_path_pop(c, mark);
		if (rc != SHOAL_OK)
			return rc;
		if (e != NULL)
			arr[k++] = e;
	}
	*(size_t *)((char *)m + f->quantifier_offset) = k;
	*(void **)((char *)m + f->offset) = arr;
	return SHOAL_OK;
}

static int field_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                           const ProtobufCFieldDescriptor *f, const wire_api_special *sp,
                           const json_t *j, ProtobufCMessage *m)
{
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (sp != NULL && sp->kind == WIRE_API_KEYED)
			return keyed_from_json(c, f, sp, j, m);
		return repeated_from_json(c, f, sp, j, m);
	}
	slot s;
	int rc = single_from_json(c, f, sp, j, &s);
	if (rc != SHOAL_OK)
		return rc;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t *cs = (uint32_t *)((char *)m + f->quantifier_offset);
		if (*cs != 0 && *cs != f->id && wire_api_in_group(desc, f))
			return wire_api_in_invalid(c, "%s", wire_api_group_message(desc));
		*cs = f->id;
	}
	memcpy((char *)m + f->offset, &s, slot_size(f->type));
	return SHOAL_OK;
}

int wire_api_field_from_json(wire_api_in *c, const ProtobufCMessageDescriptor *desc,
                             const char *field, const json_t *j, ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(desc, field);
	if (f == NULL)
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "no field %s in %s", field, desc->name);
	wire_api_field_info tmp;
	const wire_api_field_info *fi = wire_api_field_info_of(desc, f, &tmp);
	size_t mark = wire_api_path_push(c, fi->name);
	int rc = field_from_json(c, desc, f, fi->sp, j, m);
	wire_api_path_pop(c, mark);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

/* Parameters Shoal accepts and ignores are type-checked. */
static int check_extra(wire_api_in *c, const ProtobufCMessageDescriptor *desc, const json_t *j)
{
	const char *const *ign = wire_api_ignored_of(desc);
	for (; ign != NULL && *ign != NULL; ign++) {
		const json_t *v = json_object_get(j, *ign + 1);
		if (v == NULL || json_is_null(v))
			continue;
		int rc = SHOAL_OK;
		protobuf_c_boolean b;
		switch ((*ign)[0]) {
		case 'o':
			rc = object_check(c, v);
			break;
		case 'a':
			rc = array_check(c, v);
			break;
		case 's':
			if (!json_is_string(v))
				rc = mismatch(c, v, "String");
			break;
		default:
			rc = bool_from_json(c, v, &b);
			break;
		}
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

/* Fills m (of type desc) from object j (NULL: empty), skipping field skip.
 * A request message carrying legacy parameters is read from its rewrite
 * with expressions (wire_legacy.c). */
static int fill_message(wire_api_in *c, const ProtobufCMessageDescriptor *desc, const json_t *j,
                        ProtobufCMessage *m, const char *skip)
{
	if (j == NULL)
		return SHOAL_OK;
	json_t *rewritten = NULL;
	if (c->request) {
		int rc = check_extra(c, desc, j);
		if (rc == SHOAL_OK)
			rc = wire_legacy_rewrite(c, desc, j, &rewritten);
		if (rc != SHOAL_OK)
			return rc;
		if (rewritten != NULL)
			j = rewritten;
	}
	int rc = SHOAL_OK;
	for (unsigned i = 0; i < desc->n_fields && rc == SHOAL_OK; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		wire_api_field_info tmp;
		const wire_api_field_info *fi = wire_api_field_info_of(desc, f, &tmp);
		const wire_api_special *sp = fi->sp;
		const char *name = fi->name;
		if (sp != NULL && sp->kind == WIRE_API_SKIP)
			continue;
		if (skip != NULL && strcmp(f->name, skip) == 0)
			continue;
		const json_t *v = json_object_get(j, name);
		if ((v == NULL || json_is_null(v)) &&
		    !(c->request && sp != NULL && sp->kind == WIRE_API_REQUIRED))
			continue;
		size_t mark = wire_api_path_push(c, name);
		if (v == NULL || json_is_null(v))
			rc = wire_api_in_invalid(c, MSG_NULL, c->path);
		else
			rc = field_from_json(c, desc, f, sp, v, m);
		wire_api_path_pop(c, mark);
	}
	json_decref(rewritten);
	return rc;
}
