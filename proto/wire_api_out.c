/*
 * wire_api_out.c -- a protobuf message -> DynamoDB JSON body, walking the
 * message's descriptor (the inverse of wire_api_in.c).
 *
 * Members are written in DynamoDB's order where wire_api_schema.c knows it,
 * else in field order, and only when set: a present optional (oneof case), a
 * non-NULL message, a non-empty string or list, a true bool, a non-zero
 * number -- except the members DynamoDB always sends (special.always), which
 * are written zero or empty too.  Items, keys and ExpressionAttributeNames
 * go through proto/wire.h's codec (wire_item_from_pb, then
 * wire_item_to_json) with the st_values in a scratch arena that dies with
 * the conversion.  Keyed maps are written as one object; two elements with
 * the same key are merged (the router may answer one table's keys from
 * several groups): arrays are concatenated, other members overwritten.
 *
 * JSON cannot carry text that is not UTF-8 or a double that is not finite:
 * those are SHOAL_E_VALIDATION.  Every jansson allocation is checked, and
 * a failure releases the partial tree before returning SHOAL_E_NOMEM.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire_api_int.h"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing a JSON response");
}

void wire_api_out_init(wire_api_out *c, char *errmsg)
{
	wire_json_init();
	sh_arena_init(&c->tmp);
	c->errmsg = errmsg;
	c->select_count = false;
	c->heuristic_count = false;
}

void wire_api_out_fini(wire_api_out *c)
{
	sh_arena_fini(&c->tmp);
}

int wire_api_set(json_t *obj, const char *name, json_t *v, char *errmsg)
{
	if (v == NULL)
		return nomem(errmsg);
	if (json_object_set_new(obj, name, v) != 0)
		return nomem(errmsg);
	return SHOAL_OK;
}

int wire_api_text_to_json(const char *s, size_t n, json_t **out, char *errmsg)
{
	if (s == NULL)
		s = "";
	if (!wire_api_utf8_valid(s, n))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Cannot write text that is not valid UTF-8 as JSON");
	*out = json_stringn(s, n);
	return *out != NULL ? SHOAL_OK : nomem(errmsg);
}

int wire_api_item_to_json(wire_api_out *c, const Shoal__Item *item, json_t **out)
{
	if (item == NULL) {
		*out = json_object();
		return *out != NULL ? SHOAL_OK : nomem(c->errmsg);
	}
	st_value v;
	int rc = wire_item_from_pb(&c->tmp, item, &v, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return wire_item_to_json(&v, out, c->errmsg);
}

static int names_to_json(wire_api_out *c, const Shoal__ExpressionAttributeNames *names,
                         json_t **out)
{
	st_value v;
	int rc = wire_names_from_pb(&c->tmp, names, &v, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return wire_names_to_json(&v, out, c->errmsg);
}

/* ------------------------------------------------------------------------ */
/* Fields                                                                    */
/* ------------------------------------------------------------------------ */

static const void *field_ptr(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return (const char *)m + f->offset;
}

static size_t field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return *(const size_t *)((const char *)m + f->quantifier_offset);
}

static bool is_nonzero(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return *(const uint32_t *)p != 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p != 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)p != 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p != 0;
	case PROTOBUF_C_TYPE_BOOL:
		return *(const protobuf_c_boolean *)p != 0;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		return s != NULL && s[0] != '\0';
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len > 0;
	default:
		return *(const void *const *)p != NULL;
	}
}

/* Query/Scan: is the Items member written? */
static bool page_items_written(const wire_api_out *c, const ProtobufCMessage *m,
                               const ProtobufCFieldDescriptor *f)
{
	if (c->select_count)
		return false;
	if (!c->heuristic_count || field_count(m, f) > 0)
		return true;
	const ProtobufCFieldDescriptor *cf =
	    protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "count");
	return cf == NULL || *(const uint32_t *)field_ptr(m, cf) == 0;
}

static bool present(const wire_api_out *c, const ProtobufCMessage *m,
                    const ProtobufCFieldDescriptor *f, const wire_api_special *sp)
{
	if (sp != NULL && sp->kind == WIRE_API_SKIP)
		return false;
	if (sp != NULL && sp->kind == WIRE_API_PAGE_ITEMS)
		return page_items_written(c, m, f);
	if (sp != NULL && sp->always)
		return true;
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return field_count(m, f) > 0;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)((const char *)m + f->quantifier_offset) == f->id;
	return is_nonzero(f, field_ptr(m, f));
}

static int message_to_json(wire_api_out *c, const ProtobufCMessage *m, json_t *obj,
                           const char *skip);

/* One value of field f at p -> a new JSON value. */
static int single_to_json(wire_api_out *c, const ProtobufCFieldDescriptor *f,
                          const wire_api_special *sp, const void *p, json_t **out)
{
	json_t *v = NULL;
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		return wire_api_text_to_json(s, s != NULL ? strlen(s) : 0, out, c->errmsg);
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		return wire_api_text_to_json((const char *)b->data, b->len, out, c->errmsg);
	}
	case PROTOBUF_C_TYPE_BOOL:
		v = json_boolean(*(const protobuf_c_boolean *)p);
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		v = json_integer(*(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		v = json_integer(*(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: {
		int64_t x = *(const int64_t *)p;
		v = sp != NULL && sp->kind == WIRE_API_TIME ? json_real((double)x / 1000.0)
		                                            : json_integer(x);
		break;
	}
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: {
		/* JSON integers here are 64-bit signed: counters never get there;
		 * hashes do, so they are written as text. */
		uint64_t x = *(const uint64_t *)p;
		if (sp != NULL && sp->kind == WIRE_API_HASH) {
			char hex[24];
			snprintf(hex, sizeof(hex), "0x%016" PRIx64, x);
			v = json_string(hex);
			break;
		}
		v = json_integer(x > INT64_MAX ? INT64_MAX : (json_int_t)x);
		break;
	}
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE: {
		double d =
		    f->type == PROTOBUF_C_TYPE_FLOAT ? *(const float *)p : *(const double *)p;
		if (!isfinite(d))
			return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
			               "Cannot write %s = %g as JSON: not a finite number", f->name,
			               d);
		v = json_real(d);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *m = *(const ProtobufCMessage *const *)p;
		if (f->descriptor == &shoal__item__descriptor)
			return wire_api_item_to_json(c, (const Shoal__Item *)m, out);
		if (m == NULL) {
			v = json_object();
			break;
		}
		if (f->descriptor == &shoal__expression_attribute_names__descriptor)
			return names_to_json(c, (const Shoal__ExpressionAttributeNames *)m, out);
		return wire_api_message_new_json(c, m, out);
	}
	default:
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "field %s has no JSON form", f->name);
	}
	*out = v;
	return v != NULL ? SHOAL_OK : nomem(c->errmsg);
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
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
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return sizeof(void *);
	}
}

static int array_to_json(wire_api_out *c, const ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *f, const wire_api_special *sp,
                         json_t **out)
{
	json_t *arr = json_array();
	if (arr == NULL)
		return nomem(c->errmsg);
	size_t n = field_count(m, f), size = elem_size(f);
	const char *base = *(const char *const *)field_ptr(m, f);
	for (size_t i = 0; i < n; i++) {
		json_t *v;
		int rc = single_to_json(c, f, sp, base + i * size, &v);
		if (rc == SHOAL_OK && json_array_append_new(arr, v) != 0)
			rc = nomem(c->errmsg);
		if (rc != SHOAL_OK) {
			json_decref(arr);
			return rc;
		}
	}
	*out = arr;
	return SHOAL_OK;
}

/* Merges into `into` the members of `from` (both objects or both arrays):
 * arrays are concatenated, other members replaced.  Takes `from`. */
static int merge(json_t *into, json_t *from, char *errmsg)
{
	int rc = SHOAL_OK;
	if (json_is_array(into) && json_is_array(from)) {
		if (json_array_extend(into, from) != 0)
			rc = nomem(errmsg);
	} else if (json_is_object(into) && json_is_object(from)) {
		const char *k;
		json_t *v;
		json_object_foreach(from, k, v)
		{
			json_t *old = json_object_get(into, k);
			if (old != NULL && json_is_array(old) && json_is_array(v)) {
				if (json_array_extend(old, v) != 0)
					rc = nomem(errmsg);
			} else if (json_object_set(into, k, v) != 0) {
				rc = nomem(errmsg);
			}
			if (rc != SHOAL_OK)
				break;
		}
	}
	json_decref(from);
	return rc;
}

/* A repeated message keyed by table/index name -> one JSON object. */
static int keyed_to_json(wire_api_out *c, const ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *f, const wire_api_special *sp,
                         json_t **out)
{
	const ProtobufCMessageDescriptor *edesc = f->descriptor;
	const ProtobufCFieldDescriptor *kf =
	    protobuf_c_message_descriptor_get_field_by_name(edesc, sp->key);
	const ProtobufCFieldDescriptor *vf =
	    sp->value != NULL ? protobuf_c_message_descriptor_get_field_by_name(edesc, sp->value)
	                      : NULL;
	if (kf == NULL || kf->type != PROTOBUF_C_TYPE_STRING || (sp->value != NULL && vf == NULL))
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "bad keyed field %s", f->name);
	json_t *obj = json_object();
	if (obj == NULL)
		return nomem(c->errmsg);
	size_t n = field_count(m, f);
	const ProtobufCMessage *const *elems =
	    *(const ProtobufCMessage *const *const *)field_ptr(m, f);
	int rc = SHOAL_OK;
	for (size_t i = 0; i < n && rc == SHOAL_OK; i++) {
		const ProtobufCMessage *e = elems[i];
		if (e == NULL)
			continue;
		const char *key = *(const char *const *)field_ptr(e, kf);
		if (key == NULL)
			key = "";
		if (!wire_api_utf8_valid(key, strlen(key))) {
			rc = sh_errf(c->errmsg, SHOAL_E_VALIDATION,
			             "Cannot write a name that is not valid UTF-8 as JSON");
			break;
		}
		json_t *v = NULL;
		if (vf == NULL) {
			v = json_object();
			rc = v == NULL ? nomem(c->errmsg) : message_to_json(c, e, v, sp->key);
		} else if (vf->label == PROTOBUF_C_LABEL_REPEATED) {
			rc = array_to_json(c, e, vf, NULL, &v);
		} else {
			rc = single_to_json(c, vf, NULL, field_ptr(e, vf), &v);
		}
		if (rc != SHOAL_OK) {
			json_decref(v);
			break;
		}
		json_t *old = json_object_get(obj, key);
		if (old != NULL)
			rc = merge(old, v, c->errmsg);
		else if (json_object_set_new(obj, key, v) != 0)
			rc = nomem(c->errmsg);
	}
	if (rc != SHOAL_OK) {
		json_decref(obj);
		return rc;
	}
	*out = obj;
	return SHOAL_OK;
}

static int field_to_json(wire_api_out *c, const ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *f, const wire_api_special *sp,
                         json_t **out)
{
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (sp != NULL && sp->kind == WIRE_API_KEYED)
			return keyed_to_json(c, m, f, sp, out);
		return array_to_json(c, m, f, sp, out);
	}
	return single_to_json(c, f, sp, field_ptr(m, f), out);
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

static int message_to_json(wire_api_out *c, const ProtobufCMessage *m, json_t *obj,
                           const char *skip)
{
	const ProtobufCMessageDescriptor *desc = m->descriptor;
	unsigned idx[WIRE_API_MAX_FIELDS];
	if (desc->n_fields > WIRE_API_MAX_FIELDS)
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "%s has too many fields", desc->name);
	wire_api_field_order(desc, idx);
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[idx[i]];
		wire_api_field_info tmp;
		const wire_api_field_info *fi = wire_api_field_info_of(desc, f, &tmp);
		const wire_api_special *sp = fi->sp;
		if (skip != NULL && strcmp(f->name, skip) == 0)
			continue;
		if (!present(c, m, f, sp))
			continue;
		const char *name = fi->name;
		json_t *v;
		int rc = field_to_json(c, m, f, sp, &v);
		if (rc == SHOAL_OK)
			rc = wire_api_set(obj, name, v, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

int wire_api_message_to_json(wire_api_out *c, const ProtobufCMessage *m, json_t *obj)
{
	return message_to_json(c, m, obj, NULL);
}

int wire_api_message_new_json(wire_api_out *c, const ProtobufCMessage *m, json_t **out)
{
	json_t *obj = json_object();
	if (obj == NULL)
		return nomem(c->errmsg);
	int rc = message_to_json(c, m, obj, NULL);
	if (rc != SHOAL_OK) {
		json_decref(obj);
		return rc;
	}
	*out = obj;
	return SHOAL_OK;
}
