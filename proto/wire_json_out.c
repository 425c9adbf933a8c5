/*
 * wire_json_out.c -- st_value -> DynamoDB JSON (the inverse of
 * wire_json.c), and serialising JSON into arena memory.
 *
 * Each value becomes {"<type>": ...} with numbers as strings, binary as
 * base64 and sets as arrays; maps keep the st_value's attribute order, which
 * after st_value_normalize is sorted by name, so output is deterministic.
 * jansson refuses text that is not UTF-8 (json_stringn returns NULL), so
 * text is checked first and reported as SHOAL_E_VALIDATION, keeping NULL for
 * out of memory.  Nesting is bounded by WIRE_MAX_VALUE_DEPTH, as on input.
 */
#include <string.h>

#include "proto/wire_int.h"

#include "../common/alloc.h"

#define MSG_EMPTY                                                                                  \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
#define MSG_NESTING                                                                                \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing JSON");
}

/* ------------------------------------------------------------------------ */
/* st_value -> JSON                                                          */
/* ------------------------------------------------------------------------ */

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += len;
	}
	return true;
}

static int text_to_json(const char *p, uint32_t n, json_t **out, char *errmsg)
{
	if (!utf8_valid((const unsigned char *)p, n))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Cannot write a string that is not valid UTF-8 as JSON");
	*out = json_stringn(p, n);
	return *out != NULL ? SHOAL_OK : nomem(errmsg);
}

static int blob_to_json(const char *p, uint32_t n, json_t **out, char *errmsg)
{
	size_t len = wire_b64_encoded_len(n);
	char *buf = sh_malloc(len + 1);
	if (buf == NULL)
		return nomem(errmsg);
	wire_b64_encode(p, n, buf);
	*out = json_stringn(buf, len);
	sh_free(buf);
	return *out != NULL ? SHOAL_OK : nomem(errmsg);
}

static int value_to_json(const st_value *v, json_t **out, int level, char *errmsg);

/* Attributes of an M or item at `level` into a new object. */
static int attrs_to_json(const st_value *m, json_t **out, int level, char *errmsg)
{
	json_t *o = json_object();
	if (o == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < m->u.map.n; i++) {
		const st_attr *at = &m->u.map.a[i];
		json_t *jv;
		int rc;
		if (!utf8_valid((const unsigned char *)at->name, at->name_len))
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "Cannot write an attribute name that is not valid UTF-8 as "
			             "JSON");
		else
			rc = value_to_json(&at->value, &jv, level, errmsg);
		if (rc == SHOAL_OK && json_object_setn_new(o, at->name, at->name_len, jv) != 0)
			rc = nomem(errmsg);
		if (rc != SHOAL_OK) {
			json_decref(o);
			return rc;
		}
	}
	*out = o;
	return SHOAL_OK;
}

/* An array of the members of an L (or set) at `level`. */
static int array_to_json(const st_value *v, json_t **out, int level, char *errmsg)
{
	json_t *arr = json_array();
	if (arr == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < v->u.list.n; i++) {
		const st_value *m = &v->u.list.v[i];
		json_t *jv;
		int rc;
		if (v->type == ST_L)
			rc = value_to_json(m, &jv, level, errmsg);
		else if (m->type != ST_S && m->type != ST_N && m->type != ST_B)
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "A member of a %s set is not a scalar", st_type_name(v->type));
		else if (v->type == ST_BS)
			rc = blob_to_json(m->u.str.ptr, m->u.str.len, &jv, errmsg);
		else
			rc = text_to_json(m->u.str.ptr, m->u.str.len, &jv, errmsg);
		if (rc == SHOAL_OK && json_array_append_new(arr, jv) != 0)
			rc = nomem(errmsg);
		if (rc != SHOAL_OK) {
			json_decref(arr);
			return rc;
		}
	}
	*out = arr;
	return SHOAL_OK;
}

static int value_to_json(const st_value *v, json_t **out, int level, char *errmsg)
{
	if (level > WIRE_MAX_VALUE_DEPTH)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_NESTING);
	json_t *inner;
	int rc;
	switch (v->type) {
	case ST_S:
	case ST_N:
		rc = text_to_json(v->u.str.ptr, v->u.str.len, &inner, errmsg);
		break;
	case ST_B:
		rc = blob_to_json(v->u.str.ptr, v->u.str.len, &inner, errmsg);
		break;
	case ST_BOOL:
		inner = json_boolean(v->u.boolean);
		rc = SHOAL_OK;
		break;
	case ST_NULL:
		inner = json_true();
		rc = SHOAL_OK;
		break;
	case ST_M:
		rc = attrs_to_json(v, &inner, level + 1, errmsg);
		break;
	case ST_L:
	case ST_SS:
	case ST_NS:
	case ST_BS:
		rc = array_to_json(v, &inner, level + 1, errmsg);
		break;
	default:
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_EMPTY);
	}
	if (rc != SHOAL_OK)
		return rc;
	json_t *o = json_object();
	if (o == NULL || json_object_set_new(o, st_type_name(v->type), inner) != 0) {
		if (o == NULL)
			json_decref(inner);
		json_decref(o);
		return nomem(errmsg);
	}
	*out = o;
	return SHOAL_OK;
}

int wire_value_to_json(const st_value *v, json_t **out, char *errmsg)
{
	wire_json_init();
	return value_to_json(v, out, 1, errmsg);
}

int wire_item_to_json(const st_value *item, json_t **out, char *errmsg)
{
	wire_json_init();
	if (item->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "An item must be a map, not %s",
		               st_type_name(item->type));
	return attrs_to_json(item, out, 1, errmsg);
}

int wire_items_to_json(const st_value *items, uint32_t n, json_t **out, char *errmsg)
{
	wire_json_init();
	json_t *arr = json_array();
	if (arr == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < n; i++) {
		json_t *it;
		int rc = wire_item_to_json(&items[i], &it, errmsg);
		if (rc == SHOAL_OK && json_array_append_new(arr, it) != 0)
			rc = nomem(errmsg);
		if (rc != SHOAL_OK) {
			json_decref(arr);
			return rc;
		}
	}
	*out = arr;
	return SHOAL_OK;
}

int wire_names_to_json(const st_value *names, json_t **out, char *errmsg)
{
	wire_json_init();
	if (names->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeNames must be a map of strings");
	json_t *o = json_object();
	if (o == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < names->u.map.n; i++) {
		const st_attr *at = &names->u.map.a[i];
		json_t *s;
		int rc;
		if (at->value.type != ST_S)
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "ExpressionAttributeNames must be a map of strings");
		else if (!utf8_valid((const unsigned char *)at->name, at->name_len))
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "Cannot write a placeholder that is not valid UTF-8 as JSON");
		else
			rc = text_to_json(at->value.u.str.ptr, at->value.u.str.len, &s, errmsg);
		if (rc == SHOAL_OK && json_object_setn_new(o, at->name, at->name_len, s) != 0)
			rc = nomem(errmsg);
		if (rc != SHOAL_OK) {
			json_decref(o);
			return rc;
		}
	}
	*out = o;
	return SHOAL_OK;
}

int wire_json_dumps(sh_arena *a, const json_t *j, bool pretty, char **out, char *errmsg)
{
	wire_json_init();
	size_t flags = JSON_PRESERVE_ORDER | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15) |
	               (pretty ? JSON_INDENT(4) : JSON_COMPACT);
	size_t n = json_dumpb(j, NULL, 0, flags);
	if (n == 0)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing JSON");
	char *buf = sh_arena_alloc(a, n + 1);
	if (buf == NULL)
		return nomem(errmsg);
	if (json_dumpb(j, buf, n, flags) != n)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing JSON");
	buf[n] = '\0';
	*out = buf;
	return SHOAL_OK;
}
