/*
 * wire_json.c -- DynamoDB JSON -> st_value, with jansson (the other way is
 * wire_json_out.c).
 *
 * DynamoDB JSON is the form the AWS CLI and DynamoDB's HTTP API use for
 * attribute values: an object with exactly one member named after the type,
 *   {"S": "text"}  {"N": "1.5"}  {"B": "<base64>"}  {"BOOL": true}
 *   {"NULL": true} {"M": {"name": {...}, ...}}  {"L": [{...}, ...]}
 *   {"SS": ["a"]}  {"NS": ["1"]}  {"BS": ["<base64>"]}
 * Numbers travel as JSON strings so that no digit is lost to a double.
 *
 * Errors, as DynamoDB reports them.  DynamoDB first deserialises the whole
 * request (Coral/Jackson), failing with a SerializationException when a JSON
 * type does not fit the model ("NUMBER_VALUE cannot be converted to String"),
 * and only then validates it (ValidationException: an empty AttributeValue,
 * two types in one, NULL false, nesting).  The converter makes one pass but
 * keeps that order: a serialisation error is returned at once, a validation
 * error is remembered (the first one met, in document order) and returned
 * only if the rest of the document deserialises.  The Java class names in
 * some messages are DynamoDB's own (its texts are mimicked from observed
 * responses).
 *
 * Members of an AttributeValue object that are not type names, and members
 * whose value is null, are ignored, as DynamoDB ignores unknown and null
 * fields.  U+0000 is accepted in strings (JSON_ALLOW_NUL) but not in object
 * keys, which jansson refuses ("NUL byte in object key not supported"): such
 * attribute names travel in protobuf only (they are written out fine).  Duplicate object keys: the
 * last one wins (jansson's behaviour without JSON_REJECT_DUPLICATES, and DynamoDB's).
 *
 * Depth: jansson's parser stops at 2048 levels by itself
 * (JSON_PARSER_MAX_DEPTH); the converters stop descending past
 * WIRE_MAX_VALUE_DEPTH, so neither recursion is unbounded.
 *
 * Memory: jansson is pointed at sh_malloc/sh_free once (json_set_alloc_funcs
 * is process-wide; both are malloc-compatible, so values allocated before the
 * switch are still freed correctly), which puts jansson under the
 * allocation fault point too.
 *
 * Decode budget (issue 15).  jansson's tree costs far more than its text:
 * measured with jansson 2.14, a list of numbers {"N":"1"} takes 32 bytes of
 * allocations per byte of text, an item of 100k small attributes 22, a
 * realistic BatchWriteItem 15 -- and an array of empty objects [{},{},...]
 * 72 (a 16 MiB body of them added 1.1 GB to the router).  So every
 * wire_json_parse gets an allocation budget, counted by the allocator hook
 * while this thread is inside json_loadb (a thread-local: the hook is
 * process-wide, the budget is the decode's):
 *   - one decode may allocate at most WIRE_JSON_RATIO bytes per byte of
 *     text (+ WIRE_JSON_SLACK): above every realistic shape measured, below
 *     the floods of empty objects and arrays.  Past it: ValidationException
 *     ("too complex"), the request's own fault;
 *   - all decodes in progress in the process together allocate at most
 *     WIRE_JSON_POOL bytes, so N concurrent large bodies cannot multiply the
 *     bound.  One decode that alone would need more than the pool is refused
 *     as too complex; one that does not fit beside the others gets
 *     SHOAL_E_UNAVAILABLE (retryable).
 * Bytes are counted as allocated (frees during the parse are not credited
 * back) and returned to the pool when json_loadb returns: the tree then
 * lives, unaccounted, only while the caller converts it.  And before
 * anything is allocated, a text of PRESCAN_MIN bytes or more is scanned
 * once for its tokens (decode_floor): when what jansson must allocate for
 * them is already over the budget, the text is refused at once, so a flood
 * of empty objects costs a scan instead of its budget.  This is the only
 * place that decides how much a JSON text may cost.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proto/wire_int.h"

#include "../common/alloc.h"

#define MSG_EMPTY                                                                                  \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
#define MSG_MORE                                                                                   \
	"Supplied AttributeValue has more than one datatypes set, must contain exactly one of "    \
	"the supported datatypes"
#define MSG_NULL_TRUE                                                                              \
	"One or more parameter values were invalid: Null attribute value types must have the "     \
	"value of true"
#define MSG_NESTING                                                                                \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"
#define MSG_STRUCT "Start of structure or map found where not expected"
#define MSG_MAP_COLLECTION                                                                         \
	"Unrecognized collection type java.util.Map<java.lang.String, "                            \
	"com.amazonaws.dynamodb.v20120810.AttributeValue>"

#define WIRE_JSON_RATIO 40u
#define WIRE_JSON_SLACK (1u << 20)
#define WIRE_JSON_POOL  ((size_t)256 << 20)
#define PRESCAN_MIN     (64u * 1024)
/* What jansson 2.14 allocates at least for a token (measured: an object's
 * struct 72 + its 8 buckets 128; an array's 40 + 8 slots 64; a string's
 * struct 32 + its text; a number 24; a key at least the lexer's copy of it,
 * its pair (57 + length) being reused when the key repeats). */
#define FLOOR_OBJECT 200u
#define FLOOR_ARRAY  104u
#define FLOOR_STRING 33u
#define FLOOR_KEY    4u
#define FLOOR_NUMBER 24u

static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;

/* jansson reports some allocation failures as syntax errors ("string or '}'
 * expected"), so the allocator itself records them for wire_json_parse. */
static _Thread_local bool alloc_failed;

/* The decode in progress on this thread (budget > 0 while in json_loadb). */
enum { OVER_NONE, OVER_RATIO, OVER_POOL };
static _Thread_local size_t budget, spent;
static _Thread_local int over;
static atomic_size_t pool_used; /* bytes spent by every decode in progress */

static void *json_alloc(size_t n)
{
	if (budget > 0) {
		if (spent + n > budget) {
			over = OVER_RATIO;
			return NULL;
		}
		if (atomic_fetch_add(&pool_used, n) + n > WIRE_JSON_POOL) {
			atomic_fetch_sub(&pool_used, n);
			over = OVER_POOL;
			return NULL;
		}
		spent += n;
	}
	void *p = sh_malloc(n);
	if (p == NULL)
		alloc_failed = true;
	return p;
}

static void set_alloc_funcs(void)
{
	json_set_alloc_funcs(json_alloc, sh_free);
}

void wire_json_init(void)
{
	pthread_once(&alloc_once, set_alloc_funcs);
}

/* ------------------------------------------------------------------------ */
/* Parsing text                                                              */
/* ------------------------------------------------------------------------ */

/* A lower bound of the bytes json_loadb allocates for text.  It counts the
 * tokens of the first value only, and no deeper than jansson parses
 * (JSON_PARSER_MAX_DEPTH), so that a text jansson refuses early (trailing
 * garbage, runaway nesting) is not counted past that point.  (A syntax
 * error inside the value, "[1 2]", is not seen: such a text may be called
 * too complex rather than invalid.) */
static size_t decode_floor(const char *t, size_t len)
{
	size_t cost = 0;
	unsigned depth = 0;
	for (size_t i = 0; i < len; i++) {
		switch (t[i]) {
		case '{':
		case '[':
			if (++depth > JSON_PARSER_MAX_DEPTH)
				return cost;
			cost += t[i] == '{' ? FLOOR_OBJECT : FLOOR_ARRAY;
			continue;
		case '}':
		case ']':
			if (depth <= 1)
				return cost; /* the end of the value */
			depth--;
			continue;
		case '"': {
			size_t j = i + 1;
			while (j < len && t[j] != '"')
				j += t[j] == '\\' ? 2 : 1;
			size_t k = j + 1;
			while (k < len &&
			       (t[k] == ' ' || t[k] == '\t' || t[k] == '\n' || t[k] == '\r'))
				k++;
			cost += k < len && t[k] == ':' ? FLOOR_KEY : FLOOR_STRING;
			i = j;
			break;
		}
		case '-':
		case '0' ... '9':
			cost += FLOOR_NUMBER;
			while (i + 1 < len && t[i + 1] != '\0' &&
			       strchr("0123456789+-.eE", t[i + 1]))
				i++;
			break;
		default:
			continue;
		}
		if (depth == 0)
			return cost; /* a string or number alone */
	}
	return cost;
}

static int too_complex(char *errmsg, size_t len, size_t limit)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "Request too complex: decoding its %zu bytes of JSON would take more than "
	               "%zu bytes of memory (the limit is %u bytes per byte of JSON, at most %zu "
	               "MiB)",
	               len, limit, WIRE_JSON_RATIO, WIRE_JSON_POOL >> 20);
}

int wire_json_parse(const char *text, size_t len, json_t **out, char *errmsg)
{
	wire_json_init();
	json_error_t err;
	alloc_failed = false;
	over = OVER_NONE;
	spent = 0;
	size_t limit = len <= (SIZE_MAX - WIRE_JSON_SLACK) / WIRE_JSON_RATIO
	                   ? len * WIRE_JSON_RATIO + WIRE_JSON_SLACK
	                   : SIZE_MAX;
	if (limit > WIRE_JSON_POOL)
		limit = WIRE_JSON_POOL;
	*out = NULL;
	if (len >= PRESCAN_MIN && decode_floor(text, len) > limit)
		return too_complex(errmsg, len, limit);
	budget = limit;
	*out = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	atomic_fetch_sub(&pool_used, spent);
	budget = 0;
	if (*out == NULL) {
		if (over == OVER_RATIO)
			return too_complex(errmsg, len, limit);
		if (over == OVER_POOL)
			return sh_errf(errmsg, SHOAL_E_UNAVAILABLE,
			               "Too many large JSON requests are being decoded at once: "
			               "retry");
		if (alloc_failed || json_error_code(&err) == json_error_out_of_memory)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory parsing JSON");
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "Invalid JSON: %s at line %d, column %d (byte %d)", err.text,
		               err.line, err.column, err.position);
	}
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* JSON -> st_value                                                          */
/* ------------------------------------------------------------------------ */

typedef struct jctx {
	sh_arena *a;
	char *errmsg;
	int vcode; /* the first validation error met, or SHOAL_OK */
	char vmsg[SH_ERRMSG_SIZE];
} jctx;

static void ctx_init(jctx *c, sh_arena *a, char *errmsg)
{
	c->a = a;
	c->errmsg = errmsg;
	c->vcode = SHOAL_OK;
	c->vmsg[0] = '\0';
}

/* Remembers a validation error (the first one wins); returns SHOAL_OK so
 * that the caller goes on looking for serialisation errors. */
static int invalid(jctx *c, const char *msg)
{
	if (c->vcode == SHOAL_OK)
		c->vcode = sh_errf(c->vmsg, SHOAL_E_VALIDATION, "%s", msg);
	return SHOAL_OK;
}

static int ser(jctx *c, const char *msg)
{
	return sh_errf(c->errmsg, SHOAL_E_SERIALIZATION, "%s", msg);
}

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting JSON");
}

/* The result of a whole conversion: a validation error if one was met. */
static int ctx_finish(jctx *c, int rc)
{
	if (rc != SHOAL_OK)
		return rc;
	if (c->vcode != SHOAL_OK)
		return sh_errf(c->errmsg, c->vcode, "%s", c->vmsg);
	return SHOAL_OK;
}

/* Coral's words for a JSON scalar that does not fit: NUMBER_VALUE, ... */
static const char *scalar_token(const json_t *j)
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

/* A JSON string for a String member (S, N, set members, names). */
static int get_string(jctx *c, const json_t *j, const char **s, size_t *n)
{
	if (json_is_string(j)) {
		*s = json_string_value(j);
		*n = json_string_length(j);
		if (*n > UINT32_MAX)
			return ser(c, "String value is too long");
		return SHOAL_OK;
	}
	if (json_is_object(j))
		return ser(c, MSG_STRUCT);
	if (json_is_array(j))
		return ser(c, "Unrecognized collection type class java.lang.String");
	char msg[64];
	snprintf(msg, sizeof(msg), "%s cannot be converted to String", scalar_token(j));
	return ser(c, msg);
}

static int str_value(jctx *c, st_type t, const json_t *j, st_value *out)
{
	const char *s = NULL;
	size_t n = 0;
	int rc = get_string(c, j, &s, &n);
	if (rc != SHOAL_OK)
		return rc;
	char *p = sh_arena_strndup(c->a, s, n);
	if (p == NULL)
		return nomem(c->errmsg);
	out->type = t;
	out->u.str.ptr = p;
	out->u.str.len = (uint32_t)n;
	return SHOAL_OK;
}

static int blob_value(jctx *c, const json_t *j, st_value *out)
{
	if (!json_is_string(j)) {
		if (json_is_object(j))
			return ser(c, MSG_STRUCT);
		if (json_is_array(j))
			return ser(c, "Unrecognized collection type class java.nio.ByteBuffer");
		return ser(c, "only base-64-encoded strings are convertible to bytes");
	}
	uint8_t *d;
	size_t n;
	int rc =
	    wire_b64_decode(c->a, json_string_value(j), json_string_length(j), &d, &n, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->type = ST_B;
	out->u.str.ptr = (const char *)d;
	out->u.str.len = (uint32_t)n;
	return SHOAL_OK;
}

static int bool_value(jctx *c, const json_t *j, bool *out)
{
	switch (json_typeof(j)) {
	case JSON_TRUE:
		*out = true;
		return SHOAL_OK;
	case JSON_FALSE:
		*out = false;
		return SHOAL_OK;
	case JSON_STRING: {
		/* Coral converts these strings, case-insensitively. */
		const char *s = json_string_value(j);
		if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0 ||
		    strcasecmp(s, "yes") == 0) {
			*out = true;
			return SHOAL_OK;
		}
		if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0 ||
		    strcasecmp(s, "no") == 0) {
			*out = false;
			return SHOAL_OK;
		}
		return ser(c, "Unexpected token received from parser");
	}
	case JSON_OBJECT:
		return ser(c, MSG_STRUCT);
	case JSON_ARRAY:
		return ser(c, "Unrecognized collection type class java.lang.Boolean");
	default: {
		char msg[64];
		snprintf(msg, sizeof(msg), "%s cannot be converted to Boolean", scalar_token(j));
		return ser(c, msg);
	}
	}
}

static int set_value(jctx *c, st_type set_type, const json_t *j, st_value *out)
{
	if (json_is_object(j))
		return ser(c, MSG_STRUCT);
	if (!json_is_array(j))
		return ser(c, "Unexpected field type");
	size_t n = json_array_size(j);
	st_value *v = sh_arena_calloc(c->a, n, sizeof(*v));
	if (v == NULL)
		return nomem(c->errmsg);
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *m = json_array_get(j, i);
		int rc;
		if (json_is_null(m)) {
			invalid(c,
			        "One or more parameter values were invalid: Set members may not be "
			        "null");
			continue;
		}
		if (set_type == ST_BS)
			rc = blob_value(c, m, &v[k]);
		else
			rc = str_value(c, set_type == ST_SS ? ST_S : ST_N, m, &v[k]);
		if (rc != SHOAL_OK)
			return rc;
		k++;
	}
	out->type = set_type;
	out->u.list.v = v;
	out->u.list.n = k;
	return SHOAL_OK;
}

static int value_from_json(jctx *c, const json_t *j, st_value *out, int level);

/* An object of name -> AttributeValue at nesting `level` -> ST_M. */
static int map_from_json(jctx *c, const json_t *j, st_value *out, int level)
{
	out->type = ST_M;
	out->u.map.a = NULL;
	out->u.map.n = 0;
	if (json_is_array(j))
		return ser(c, MSG_MAP_COLLECTION);
	if (!json_is_object(j))
		return ser(c, "Unexpected field type");
	size_t n = json_object_size(j);
	st_attr *at = sh_arena_calloc(c->a, n, sizeof(*at));
	if (at == NULL)
		return nomem(c->errmsg);
	const char *key;
	size_t key_len;
	json_t *v;
	uint32_t k = 0;
	json_object_keylen_foreach((json_t *)j, key, key_len, v)
	{
		if (k == n)
			break;
		char *nm = sh_arena_strndup(c->a, key, key_len);
		if (nm == NULL)
			return nomem(c->errmsg);
		at[k].name = nm;
		at[k].name_len = (uint32_t)key_len;
		int rc = value_from_json(c, v, &at[k].value, level);
		if (rc != SHOAL_OK)
			return rc;
		k++;
	}
	out->u.map.a = at;
	out->u.map.n = k;
	return SHOAL_OK;
}

static int list_from_json(jctx *c, const json_t *j, st_value *out, int level)
{
	if (json_is_object(j))
		return ser(c, MSG_STRUCT);
	if (!json_is_array(j))
		return ser(c, "Unexpected field type");
	size_t n = json_array_size(j);
	st_value *v = sh_arena_calloc(c->a, n, sizeof(*v));
	if (v == NULL)
		return nomem(c->errmsg);
	for (size_t i = 0; i < n; i++) {
		int rc = value_from_json(c, json_array_get(j, i), &v[i], level);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->type = ST_L;
	out->u.list.v = v;
	out->u.list.n = (uint32_t)n;
	return SHOAL_OK;
}

static const struct {
	const char *name;
	st_type type;
} type_names[] = {
    {"S", ST_S}, {"N", ST_N}, {"B", ST_B},   {"BOOL", ST_BOOL}, {"NULL", ST_NULL},
    {"M", ST_M}, {"L", ST_L}, {"SS", ST_SS}, {"NS", ST_NS},     {"BS", ST_BS},
};

static st_type type_of_key(const char *key, size_t len)
{
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
		if (strlen(type_names[i].name) == len && memcmp(type_names[i].name, key, len) == 0)
			return type_names[i].type;
	}
	return ST_NONE;
}

/* One member of an AttributeValue object, of type t, into out. */
static int typed_member(jctx *c, st_type t, const json_t *v, st_value *out, int level)
{
	bool b;
	int rc;
	switch (t) {
	case ST_S:
	case ST_N:
		return str_value(c, t, v, out);
	case ST_B:
		return blob_value(c, v, out);
	case ST_BOOL:
	case ST_NULL:
		rc = bool_value(c, v, &b);
		if (rc != SHOAL_OK)
			return rc;
		out->type = t;
		out->u.boolean = t == ST_NULL ? true : b;
		if (t == ST_NULL && !b)
			invalid(c, MSG_NULL_TRUE);
		return SHOAL_OK;
	case ST_M:
		return map_from_json(c, v, out, level + 1);
	case ST_L:
		return list_from_json(c, v, out, level + 1);
	default:
		return set_value(c, t, v, out);
	}
}

static int value_from_json(jctx *c, const json_t *j, st_value *out, int level)
{
	memset(out, 0, sizeof(*out));
	out->type = ST_NULL; /* placeholder while a validation error is pending */
	out->u.boolean = true;
	if (level > WIRE_MAX_VALUE_DEPTH)
		return invalid(c, MSG_NESTING);
	if (j == NULL || json_is_null(j))
		return invalid(c, MSG_EMPTY);
	if (json_is_array(j))
		return ser(c, "Unrecognized collection type class "
		              "com.amazonaws.dynamodb.v20120810.AttributeValue");
	if (!json_is_object(j))
		return ser(c, "Unexpected value type in payload");
	int types = 0;
	const char *key;
	size_t key_len;
	json_t *v;
	json_object_keylen_foreach((json_t *)j, key, key_len, v)
	{
		st_type t = type_of_key(key, key_len);
		if (t == ST_NONE || json_is_null(v))
			continue;
		st_value tmp;
		memset(&tmp, 0, sizeof(tmp));
		int rc = typed_member(c, t, v, &tmp, level);
		if (rc != SHOAL_OK)
			return rc;
		if (types++ == 0)
			*out = tmp;
	}
	if (types == 0)
		return invalid(c, MSG_EMPTY);
	if (types > 1)
		return invalid(c, MSG_MORE);
	return SHOAL_OK;
}

int wire_value_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg)
{
	jctx c;
	ctx_init(&c, a, errmsg);
	return ctx_finish(&c, value_from_json(&c, j, out, 1));
}

int wire_item_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg)
{
	jctx c;
	ctx_init(&c, a, errmsg);
	return ctx_finish(&c, map_from_json(&c, j, out, 1));
}

int wire_items_from_json(sh_arena *a, const json_t *j, st_value **items, uint32_t *n, char *errmsg)
{
	jctx c;
	ctx_init(&c, a, errmsg);
	*items = NULL;
	*n = 0;
	if (json_is_object(j))
		return ser(&c, MSG_STRUCT);
	if (!json_is_array(j))
		return ser(&c, "Unexpected field type");
	size_t cnt = json_array_size(j);
	if (cnt > UINT32_MAX)
		return ser(&c, "Too many items");
	st_value *v = sh_arena_calloc(a, cnt, sizeof(*v));
	if (v == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < cnt; i++) {
		int rc = map_from_json(&c, json_array_get(j, i), &v[i], 1);
		if (rc != SHOAL_OK)
			return rc;
	}
	int rc = ctx_finish(&c, SHOAL_OK);
	if (rc == SHOAL_OK) {
		*items = v;
		*n = (uint32_t)cnt;
	}
	return rc;
}

int wire_names_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg)
{
	jctx c;
	ctx_init(&c, a, errmsg);
	if (json_is_array(j))
		return ser(&c, "Unrecognized collection type java.util.Map<java.lang.String, "
		               "java.lang.String>");
	if (!json_is_object(j))
		return ser(&c, "Unexpected field type");
	size_t n = json_object_size(j);
	st_attr *at = sh_arena_calloc(a, n, sizeof(*at));
	if (at == NULL)
		return nomem(errmsg);
	const char *key;
	size_t key_len;
	json_t *v;
	uint32_t k = 0;
	json_object_keylen_foreach((json_t *)j, key, key_len, v)
	{
		if (k == n)
			break;
		if (json_is_null(v))
			return ser(&c, "Unexpected null value in ExpressionAttributeNames");
		char *nm = sh_arena_strndup(a, key, key_len);
		if (nm == NULL)
			return nomem(errmsg);
		at[k].name = nm;
		at[k].name_len = (uint32_t)key_len;
		int rc = str_value(&c, ST_S, v, &at[k].value);
		if (rc != SHOAL_OK)
			return rc;
		k++;
	}
	out->type = ST_M;
	out->u.map.a = at;
	out->u.map.n = k;
	return SHOAL_OK;
}

typedef int (*from_json_fn)(sh_arena *, const json_t *, st_value *, char *);

static int from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg,
                     from_json_fn fn)
{
	json_t *j;
	int rc = wire_json_parse(text, len, &j, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = fn(a, j, out, errmsg);
	json_decref(j);
	return rc;
}

int wire_value_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg)
{
	return from_text(a, text, len, out, errmsg, wire_value_from_json);
}

int wire_item_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg)
{
	return from_text(a, text, len, out, errmsg, wire_item_from_json);
}

int wire_names_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg)
{
	return from_text(a, text, len, out, errmsg, wire_names_from_json);
}
