/*
 * wire_value.c -- protobuf AttributeValue / Item / ExpressionAttributeNames
 * <-> st_value.
 *
 * The two representations map one to one (shoal.proto documents the
 * messages): the AttributeValue oneof member is the st_type, S/N/B bytes are
 * st_value strings, M is a MapValue of Attributes, L a ListValue, and SS/NS/BS
 * a SetValue whose members become ST_S/ST_N/ST_B values.
 *
 * From protobuf, every byte is copied into the caller's arena (the unpacked
 * message can be freed at once) and only structure is checked: one member set,
 * NULL is true, nesting bounded by WIRE_MAX_VALUE_DEPTH.  Canonical form and
 * DynamoDB's value rules are st_value_normalize's.  The recursion is bounded by
 * the same depth, and wire_unpack_* has already bounded the message's depth.
 *
 * To protobuf, messages are built in the arena with the generated __init
 * functions, bytes copied, and the same depth bound enforced so that whatever
 * is packed here can be unpacked by a peer.
 */
#include <string.h>

#include "proto/wire.h"

#define MSG_EMPTY                                                                                  \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
#define MSG_NULL_TRUE                                                                              \
	"One or more parameter values were invalid: Null attribute value types must have the "     \
	"value of true"
#define MSG_NESTING                                                                                \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting an attribute value");
}

/* ------------------------------------------------------------------------ */
/* From protobuf                                                             */
/* ------------------------------------------------------------------------ */

static int value_from_pb(sh_arena *a, const Shoal__AttributeValue *pb, st_value *out, int level,
                         char *errmsg);

static int copy_bytes(sh_arena *a, st_type t, const ProtobufCBinaryData *b, st_value *out,
                      char *errmsg)
{
	if (b->len > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Attribute value is too large");
	char *p = sh_arena_strndup(a, (const char *)b->data, b->len);
	if (p == NULL)
		return nomem(errmsg);
	out->type = t;
	out->u.str.ptr = p;
	out->u.str.len = (uint32_t)b->len;
	return SHOAL_OK;
}

/* attrs[0..n) at nesting `level` -> an ST_M (wire order). */
static int attrs_from_pb(sh_arena *a, size_t n, Shoal__Attribute *const *attrs, st_value *out,
                         int level, char *errmsg)
{
	if (n > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Too many attributes");
	st_attr *at = sh_arena_calloc(a, n, sizeof(*at));
	if (at == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < n; i++) {
		const Shoal__Attribute *pa = attrs[i];
		static const ProtobufCBinaryData none = {0, NULL};
		const ProtobufCBinaryData *name = pa != NULL ? &pa->name : &none;
		if (name->len > UINT32_MAX)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "Attribute name is too long");
		char *nm = sh_arena_strndup(a, (const char *)name->data, name->len);
		if (nm == NULL)
			return nomem(errmsg);
		at[i].name = nm;
		at[i].name_len = (uint32_t)name->len;
		int rc =
		    value_from_pb(a, pa != NULL ? pa->value : NULL, &at[i].value, level, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->type = ST_M;
	out->u.map.a = at;
	out->u.map.n = (uint32_t)n;
	return SHOAL_OK;
}

static int set_from_pb(sh_arena *a, st_type set_type, const Shoal__SetValue *pb, st_value *out,
                       char *errmsg)
{
	st_type member = set_type == ST_SS ? ST_S : set_type == ST_NS ? ST_N : ST_B;
	size_t n = pb != NULL ? pb->n_members : 0;
	if (n > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Too many set members");
	st_value *v = sh_arena_calloc(a, n, sizeof(*v));
	if (v == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < n; i++) {
		int rc = copy_bytes(a, member, &pb->members[i], &v[i], errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->type = set_type;
	out->u.list.v = v;
	out->u.list.n = (uint32_t)n;
	return SHOAL_OK;
}

static int value_from_pb(sh_arena *a, const Shoal__AttributeValue *pb, st_value *out, int level,
                         char *errmsg)
{
	memset(out, 0, sizeof(*out));
	if (level > WIRE_MAX_VALUE_DEPTH)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_NESTING);
	if (pb == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_EMPTY);
	switch (pb->value_case) {
	case SHOAL__ATTRIBUTE_VALUE__VALUE_S:
		return copy_bytes(a, ST_S, &pb->s, out, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_N:
		return copy_bytes(a, ST_N, &pb->n, out, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_B:
		return copy_bytes(a, ST_B, &pb->b, out, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_BOOL:
		out->type = ST_BOOL;
		out->u.boolean = pb->bool_ != 0;
		return SHOAL_OK;
	case SHOAL__ATTRIBUTE_VALUE__VALUE_NULL:
		if (!pb->null)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_NULL_TRUE);
		out->type = ST_NULL;
		out->u.boolean = true;
		return SHOAL_OK;
	case SHOAL__ATTRIBUTE_VALUE__VALUE_M:
		if (pb->m == NULL)
			return attrs_from_pb(a, 0, NULL, out, level + 1, errmsg);
		return attrs_from_pb(a, pb->m->n_attrs, pb->m->attrs, out, level + 1, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_L: {
		size_t n = pb->l != NULL ? pb->l->n_values : 0;
		if (n > UINT32_MAX)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "Too many list elements");
		st_value *v = sh_arena_calloc(a, n, sizeof(*v));
		if (v == NULL)
			return nomem(errmsg);
		for (size_t i = 0; i < n; i++) {
			int rc = value_from_pb(a, pb->l->values[i], &v[i], level + 1, errmsg);
			if (rc != SHOAL_OK)
				return rc;
		}
		out->type = ST_L;
		out->u.list.v = v;
		out->u.list.n = (uint32_t)n;
		return SHOAL_OK;
	}
	case SHOAL__ATTRIBUTE_VALUE__VALUE_SS:
		return set_from_pb(a, ST_SS, pb->ss, out, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_NS:
		return set_from_pb(a, ST_NS, pb->ns, out, errmsg);
	case SHOAL__ATTRIBUTE_VALUE__VALUE_BS:
		return set_from_pb(a, ST_BS, pb->bs, out, errmsg);
	default:
		/* Not set, or a member added by a newer peer. */
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_EMPTY);
	}
}

int wire_value_from_pb(sh_arena *a, const Shoal__AttributeValue *pb, st_value *out, char *errmsg)
{
	return value_from_pb(a, pb, out, 1, errmsg);
}

int wire_item_from_pb(sh_arena *a, const Shoal__Item *pb, st_value *out, char *errmsg)
{
	if (pb == NULL)
		return attrs_from_pb(a, 0, NULL, out, 1, errmsg);
	return attrs_from_pb(a, pb->n_attrs, pb->attrs, out, 1, errmsg);
}

int wire_names_from_pb(sh_arena *a, const Shoal__ExpressionAttributeNames *pb, st_value *out,
                       char *errmsg)
{
	size_t n = pb != NULL ? pb->n_entries : 0;
	if (n > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Too many ExpressionAttributeNames");
	st_attr *at = sh_arena_calloc(a, n, sizeof(*at));
	if (at == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < n; i++) {
		const Shoal__ExpressionAttributeName *e = pb->entries[i];
		static const ProtobufCBinaryData none = {0, NULL};
		const ProtobufCBinaryData *ph = e != NULL ? &e->placeholder : &none;
		const ProtobufCBinaryData *nm = e != NULL ? &e->name : &none;
		if (ph->len > UINT32_MAX)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "Placeholder is too long");
		char *p = sh_arena_strndup(a, (const char *)ph->data, ph->len);
		if (p == NULL)
			return nomem(errmsg);
		at[i].name = p;
		at[i].name_len = (uint32_t)ph->len;
		int rc = copy_bytes(a, ST_S, nm, &at[i].value, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->type = ST_M;
	out->u.map.a = at;
	out->u.map.n = (uint32_t)n;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* To protobuf                                                               */
/* ------------------------------------------------------------------------ */

static int value_to_pb(sh_arena *a, const st_value *v, Shoal__AttributeValue **out, int level,
                       char *errmsg);

static int bytes_to_pb(sh_arena *a, const char *p, uint32_t n, ProtobufCBinaryData *out,
                       char *errmsg)
{
	uint8_t *d = sh_arena_memdup(a, p, n);
	if (d == NULL)
		return nomem(errmsg);
	out->data = d;
	out->len = n;
	return SHOAL_OK;
}

/* The attributes of an M (or an item) at nesting `level`. */
static int attrs_to_pb(sh_arena *a, const st_value *m, Shoal__Attribute ***attrs, size_t *n,
                       int level, char *errmsg)
{
	uint32_t cnt = m->u.map.n;
	Shoal__Attribute **arr = sh_arena_calloc(a, cnt, sizeof(*arr));
	Shoal__Attribute *slab = sh_arena_calloc(a, cnt, sizeof(*slab));
	if (arr == NULL || slab == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < cnt; i++) {
		const st_attr *at = &m->u.map.a[i];
		shoal__attribute__init(&slab[i]);
		int rc = bytes_to_pb(a, at->name, at->name_len, &slab[i].name, errmsg);
		if (rc == SHOAL_OK)
			rc = value_to_pb(a, &at->value, &slab[i].value, level, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		arr[i] = &slab[i];
	}
	*attrs = arr;
	*n = cnt;
	return SHOAL_OK;
}

static int set_to_pb(sh_arena *a, const st_value *v, Shoal__SetValue **out, char *errmsg)
{
	Shoal__SetValue *s = sh_arena_alloc(a, sizeof(*s));
	ProtobufCBinaryData *m = sh_arena_calloc(a, v->u.list.n, sizeof(*m));
	if (s == NULL || m == NULL)
		return nomem(errmsg);
	shoal__set_value__init(s);
	for (uint32_t i = 0; i < v->u.list.n; i++) {
		const st_value *mem = &v->u.list.v[i];
		if (mem->type != ST_S && mem->type != ST_N && mem->type != ST_B)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "A member of a %s set is not a scalar",
			               st_type_name(v->type));
		int rc = bytes_to_pb(a, mem->u.str.ptr, mem->u.str.len, &m[i], errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	s->members = m;
	s->n_members = v->u.list.n;
	*out = s;
	return SHOAL_OK;
}

static int value_to_pb(sh_arena *a, const st_value *v, Shoal__AttributeValue **out, int level,
                       char *errmsg)
{
	if (level > WIRE_MAX_VALUE_DEPTH)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_NESTING);
	Shoal__AttributeValue *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__attribute_value__init(pb);
	int rc = SHOAL_OK;
	switch (v->type) {
	case ST_S:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
		rc = bytes_to_pb(a, v->u.str.ptr, v->u.str.len, &pb->s, errmsg);
		break;
	case ST_N:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_N;
		rc = bytes_to_pb(a, v->u.str.ptr, v->u.str.len, &pb->n, errmsg);
		break;
	case ST_B:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_B;
		rc = bytes_to_pb(a, v->u.str.ptr, v->u.str.len, &pb->b, errmsg);
		break;
	case ST_BOOL:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_BOOL;
		pb->bool_ = v->u.boolean;
		break;
	case ST_NULL:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_NULL;
		pb->null = 1;
		break;
	case ST_M: {
		Shoal__MapValue *m = sh_arena_alloc(a, sizeof(*m));
		if (m == NULL)
			return nomem(errmsg);
		shoal__map_value__init(m);
		rc = attrs_to_pb(a, v, &m->attrs, &m->n_attrs, level + 1, errmsg);
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_M;
		pb->m = m;
		break;
	}
	case ST_L: {
		Shoal__ListValue *l = sh_arena_alloc(a, sizeof(*l));
		Shoal__AttributeValue **vals = sh_arena_calloc(a, v->u.list.n, sizeof(*vals));
		if (l == NULL || vals == NULL)
			return nomem(errmsg);
		shoal__list_value__init(l);
		for (uint32_t i = 0; i < v->u.list.n && rc == SHOAL_OK; i++)
			rc = value_to_pb(a, &v->u.list.v[i], &vals[i], level + 1, errmsg);
		l->values = vals;
		l->n_values = v->u.list.n;
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_L;
		pb->l = l;
		break;
	}
	case ST_SS:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_SS;
		rc = set_to_pb(a, v, &pb->ss, errmsg);
		break;
	case ST_NS:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_NS;
		rc = set_to_pb(a, v, &pb->ns, errmsg);
		break;
	case ST_BS:
		pb->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_BS;
		rc = set_to_pb(a, v, &pb->bs, errmsg);
		break;
	default:
		return sh_errf(errmsg, SHOAL_E_VALIDATION, MSG_EMPTY);
	}
	if (rc != SHOAL_OK)
		return rc;
	*out = pb;
	return SHOAL_OK;
}

int wire_value_to_pb(sh_arena *a, const st_value *v, Shoal__AttributeValue **out, char *errmsg)
{
	return value_to_pb(a, v, out, 1, errmsg);
}

int wire_item_to_pb(sh_arena *a, const st_value *item, Shoal__Item **out, char *errmsg)
{
	if (item == NULL) {
		*out = NULL;
		return SHOAL_OK;
	}
	if (item->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "An item must be a map, not %s",
		               st_type_name(item->type));
	Shoal__Item *it = sh_arena_alloc(a, sizeof(*it));
	if (it == NULL)
		return nomem(errmsg);
	shoal__item__init(it);
	int rc = attrs_to_pb(a, item, &it->attrs, &it->n_attrs, 1, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*out = it;
	return SHOAL_OK;
}

int wire_names_to_pb(sh_arena *a, const st_value *names, Shoal__ExpressionAttributeNames **out,
                     char *errmsg)
{
	if (names == NULL) {
		*out = NULL;
		return SHOAL_OK;
	}
	if (names->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeNames must be a map of strings");
	uint32_t n = names->u.map.n;
	Shoal__ExpressionAttributeNames *pb = sh_arena_alloc(a, sizeof(*pb));
	Shoal__ExpressionAttributeName **arr = sh_arena_calloc(a, n, sizeof(*arr));
	Shoal__ExpressionAttributeName *slab = sh_arena_calloc(a, n, sizeof(*slab));
	if (pb == NULL || arr == NULL || slab == NULL)
		return nomem(errmsg);
	shoal__expression_attribute_names__init(pb);
	for (uint32_t i = 0; i < n; i++) {
		const st_attr *at = &names->u.map.a[i];
		if (at->value.type != ST_S)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "ExpressionAttributeNames must be a map of strings");
		shoal__expression_attribute_name__init(&slab[i]);
		int rc = bytes_to_pb(a, at->name, at->name_len, &slab[i].placeholder, errmsg);
		if (rc == SHOAL_OK)
			rc = bytes_to_pb(a, at->value.u.str.ptr, at->value.u.str.len, &slab[i].name,
			                 errmsg);
		if (rc != SHOAL_OK)
			return rc;
		arr[i] = &slab[i];
	}
	pb->entries = arr;
	pb->n_entries = n;
	*out = pb;
	return SHOAL_OK;
}
