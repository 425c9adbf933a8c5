#include "tl_values.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"

sh_arena tl_arena;
char tl_msg[SH_ERRMSG_SIZE];

void tl_arena_setup(void)
{
	sh_arena_init(&tl_arena);
	tl_msg[0] = '\0';
}

void tl_arena_teardown(void)
{
	sh_arena_fini(&tl_arena);
	sh_fault_reset();
}

/* ------------------------------------------------------------------------ */
/* Builders of st_value *                                                    */
/* ------------------------------------------------------------------------ */

/* p, asserted non-NULL: an allocation or a constructor that failed. */
static void *built(void *p)
{
	tl_assert_msg(p != NULL, "building a value failed");
	return p;
}

st_value *tl_s(const char *s)
{
	return built(st_new_s(&tl_arena, s));
}

st_value *tl_sn(size_t n, char c)
{
	char *s = malloc(n + 1);
	tl_assert(s != NULL);
	memset(s, c, n);
	s[n] = '\0';
	st_value *v = tl_s(s);
	free(s);
	return v;
}

st_value *tl_n(const char *text)
{
	return built(st_new_n(&tl_arena, text));
}

st_value *tl_ni(long i)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", i);
	return tl_n(buf);
}

st_value *tl_b(const void *p, size_t n)
{
	return built(st_new_b(&tl_arena, p, n));
}

st_value *tl_map(const char *name, ...)
{
	st_value *m = built(st_new_map(&tl_arena, 4));
	va_list ap;
	va_start(ap, name);
	for (const char *n = name; n != NULL; n = va_arg(ap, const char *)) {
		st_value *v = va_arg(ap, st_value *);
		int rc = st_map_set(&tl_arena, m, n, strlen(n), v);
		tl_assert_msg(rc == SHOAL_OK, "st_map_set(%s): %s", n, shoal_err_name(rc));
	}
	va_end(ap);
	return m;
}

/* An empty list-like value of type t with room for n members. */
static st_value *new_list(st_type t, uint32_t n)
{
	st_value *l = built(sh_arena_calloc(&tl_arena, 1, sizeof(*l)));
	l->type = t;
	l->u.list.v = built(sh_arena_calloc(&tl_arena, (size_t)n + 1, sizeof(st_value)));
	l->u.list.n = n;
	return l;
}

/* How the variadic members of a list are passed. */
enum member_kind { BY_POINTER, BY_VALUE, AS_S_TEXT };

/* A list-like value of type t whose n members come from ap. */
static st_value *list_of(st_type t, uint32_t n, enum member_kind kind, va_list ap)
{
	st_value *l = new_list(t, n);
	for (uint32_t i = 0; i < n; i++) {
		switch (kind) {
		case BY_POINTER:
			l->u.list.v[i] = *va_arg(ap, st_value *);
			break;
		case BY_VALUE:
			l->u.list.v[i] = va_arg(ap, st_value);
			break;
		case AS_S_TEXT:
			l->u.list.v[i] = *tl_s(va_arg(ap, const char *));
			break;
		}
	}
	return l;
}

st_value *tl_list(uint32_t n, ...)
{
	va_list ap;
	va_start(ap, n);
	st_value *l = list_of(ST_L, n, BY_POINTER, ap);
	va_end(ap);
	return l;
}

st_value *tl_ss(uint32_t n, ...)
{
	va_list ap;
	va_start(ap, n);
	st_value *l = list_of(ST_SS, n, AS_S_TEXT, ap);
	va_end(ap);
	return l;
}

const st_value *tl_attr(const st_value *item, const char *name)
{
	return st_map_get(item, name, strlen(name));
}

bool tl_str_is(const st_value *v, const char *s)
{
	return v->u.str.len == strlen(s) && memcmp(v->u.str.ptr, s, v->u.str.len) == 0;
}

/* ------------------------------------------------------------------------ */
/* Raw values                                                                */
/* ------------------------------------------------------------------------ */

st_value tl_raw(st_type t, const void *p, size_t n)
{
	st_value v = {.type = t};
	v.u.str.ptr = built(sh_arena_memdup(&tl_arena, n ? p : "", n));
	v.u.str.len = (uint32_t)n;
	return v;
}

st_value tl_raw_s(const char *s)
{
	return tl_raw(ST_S, s, strlen(s));
}

st_value tl_raw_n(const char *s)
{
	return tl_raw(ST_N, s, strlen(s));
}

st_value tl_raw_b(const void *p, size_t n)
{
	return tl_raw(ST_B, p, n);
}

st_value tl_raw_bool(bool b)
{
	st_value v = {.type = ST_BOOL};
	v.u.boolean = b;
	return v;
}

st_value tl_raw_null(void)
{
	st_value v = {.type = ST_NULL};
	v.u.boolean = true;
	return v;
}

st_value tl_raw_list(st_type t, uint32_t n, ...)
{
	va_list ap;
	va_start(ap, n);
	st_value *l = list_of(t, n, BY_VALUE, ap);
	va_end(ap);
	return *l;
}

st_value tl_raw_map(uint32_t n, ...)
{
	st_value v = {.type = ST_M};
	v.u.map.a = built(sh_arena_calloc(&tl_arena, (size_t)n + 1, sizeof(st_attr)));
	v.u.map.n = n;
	va_list ap;
	va_start(ap, n);
	for (uint32_t i = 0; i < n; i++) {
		const char *name = va_arg(ap, const char *);
		v.u.map.a[i].name = name;
		v.u.map.a[i].name_len = (uint32_t)strlen(name);
		v.u.map.a[i].value = va_arg(ap, st_value);
	}
	va_end(ap);
	return v;
}

st_value tl_raw_deep_map(int depth, st_value leaf)
{
	st_value v = leaf;
	for (int i = 0; i < depth; i++)
		v = tl_raw_map(1, "n", v);
	return v;
}

st_value *tl_heap(st_value v)
{
	return built(sh_arena_memdup(&tl_arena, &v, sizeof(v)));
}

/* ------------------------------------------------------------------------ */
/* DynamoDB JSON                                                             */
/* ------------------------------------------------------------------------ */

/* Rewrites the plain text of a JSON string as base64, in place. */
static void to_base64(json_t *s)
{
	if (!json_is_string(s))
		return; /* not a B: the codec reports it */
	size_t n = json_string_length(s);
	char *enc = malloc(wire_b64_encoded_len(n) + 1);
	tl_assert(enc != NULL);
	wire_b64_encode(json_string_value(s), n, enc);
	tl_assert(json_string_set(s, enc) == 0);
	free(enc);
}

/* The tests' plain-text B and BS members of the AttributeValue av (and of
 * the values nested in it) as base64, in place. */
static void b64_members(json_t *av)
{
	const char *k;
	json_t *x;
	size_t i;
	json_t *m;
	json_object_foreach(av, k, x)
	{
		if (strcmp(k, "B") == 0) {
			to_base64(x);
		} else if (strcmp(k, "BS") == 0) {
			json_array_foreach(x, i, m)
			{
				to_base64(m);
			}
		} else if (strcmp(k, "L") == 0) {
			json_array_foreach(x, i, m)
			{
				b64_members(m);
			}
		} else if (strcmp(k, "M") == 0) {
			const char *name;
			json_object_foreach(x, name, m)
			{
				b64_members(m);
			}
		}
	}
}

static json_t *parse(const char *text)
{
	json_t *j;
	char msg[SH_ERRMSG_SIZE];
	int rc = wire_json_parse(text, strlen(text), &j, msg);
	tl_assert_msg(rc == SHOAL_OK, "bad JSON in test: %s: %s", text, msg);
	return j;
}

static void normalize(sh_arena *a, st_value *v, const char *text)
{
	char msg[SH_ERRMSG_SIZE];
	int rc = st_value_normalize(a, v, msg);
	tl_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
}

/* A value (or, when item, an item) from the tests' DynamoDB JSON text. */
static st_value *from_json(sh_arena *a, const char *text, bool item)
{
	json_t *j = parse(text);
	if (item) {
		const char *name;
		json_t *x;
		json_object_foreach(j, name, x)
		{
			b64_members(x);
		}
	} else {
		b64_members(j);
	}
	st_value *v = built(sh_arena_calloc(a, 1, sizeof(*v)));
	char msg[SH_ERRMSG_SIZE];
	int rc = item ? wire_item_from_json(a, j, v, msg) : wire_value_from_json(a, j, v, msg);
	json_decref(j);
	tl_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
	normalize(a, v, text);
	return v;
}

st_value *tl_json_val(sh_arena *a, const char *text)
{
	return from_json(a, text, false);
}

st_value *tl_json_item(sh_arena *a, const char *text)
{
	return from_json(a, text, true);
}

st_value *tl_json_names(sh_arena *a, const char *text)
{
	if (text == NULL)
		return NULL;
	st_value *v = built(sh_arena_calloc(a, 1, sizeof(*v)));
	char msg[SH_ERRMSG_SIZE];
	int rc = wire_names_from_text(a, text, strlen(text), v, msg);
	tl_assert_msg(rc == SHOAL_OK, "%s: %s", text, msg);
	normalize(a, v, text); /* sorted, as st_map_get needs */
	return v;
}

/* Appends the DynamoDB JSON of v to buf (B as plain text). */
static void show_into(const st_value *v, char *buf, size_t size)
{
	size_t off = strlen(buf);
#define PUT(...) (off += (size_t)snprintf(buf + off, off < size ? size - off : 0, __VA_ARGS__))
	switch (v->type) {
	case ST_S:
	case ST_N:
	case ST_B:
		PUT("{\"%s\":\"%.*s\"}", st_type_name(v->type), (int)v->u.str.len, v->u.str.ptr);
		break;
	case ST_BOOL:
		PUT("{\"BOOL\":%s}", v->u.boolean ? "true" : "false");
		break;
	case ST_NULL:
		PUT("{\"NULL\":true}");
		break;
	case ST_M:
		PUT("{\"M\":{");
		for (uint32_t i = 0; i < v->u.map.n && off < size; i++) {
			PUT("%s\"%.*s\":", i ? "," : "", (int)v->u.map.a[i].name_len,
			    v->u.map.a[i].name);
			show_into(&v->u.map.a[i].value, buf, size);
			off = strlen(buf);
		}
		PUT("}}");
		break;
	case ST_L:
		PUT("{\"L\":[");
		for (uint32_t i = 0; i < v->u.list.n && off < size; i++) {
			PUT("%s", i ? "," : "");
			show_into(&v->u.list.v[i], buf, size);
			off = strlen(buf);
		}
		PUT("]}");
		break;
	default: /* sets */
		PUT("{\"%s\":[", st_type_name(v->type));
		for (uint32_t i = 0; i < v->u.list.n; i++)
			PUT("%s\"%.*s\"", i ? "," : "", (int)v->u.list.v[i].u.str.len,
			    v->u.list.v[i].u.str.ptr);
		PUT("]}");
		break;
	}
#undef PUT
}

const char *tl_show(sh_arena *a, const st_value *v)
{
	size_t size = 8192;
	char *buf = sh_arena_calloc(a, 1, size);
	if (v == NULL)
		return "<absent>";
	if (buf == NULL)
		return "<out of memory>";
	show_into(v, buf, size);
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */
/* ------------------------------------------------------------------------ */

bool tl_same(const st_value *x, const st_value *y)
{
	if (x->type != y->type)
		return false;
	switch (x->type) {
	case ST_S:
	case ST_N:
	case ST_B:
		return x->u.str.len == y->u.str.len &&
		       memcmp(x->u.str.ptr, y->u.str.ptr, x->u.str.len) == 0;
	case ST_BOOL:
	case ST_NULL:
		return x->u.boolean == y->u.boolean;
	case ST_M:
		if (x->u.map.n != y->u.map.n)
			return false;
		for (uint32_t i = 0; i < x->u.map.n; i++) {
			const st_attr *p = &x->u.map.a[i], *q = &y->u.map.a[i];
			if (p->name_len != q->name_len ||
			    memcmp(p->name, q->name, p->name_len) != 0 ||
			    !tl_same(&p->value, &q->value))
				return false;
		}
		return true;
	default:
		if (x->u.list.n != y->u.list.n)
			return false;
		for (uint32_t i = 0; i < x->u.list.n; i++) {
			if (!tl_same(&x->u.list.v[i], &y->u.list.v[i]))
				return false;
		}
		return true;
	}
}

void tl_assert_value_eq(const st_value *got, const st_value *want)
{
	if (want == NULL) {
		tl_assert_msg(got == NULL, "expected no value, got %s", tl_show(&tl_arena, got));
		return;
	}
	tl_assert_msg(got != NULL, "expected a value, got none");
	tl_assert_msg(st_value_equal(got, want), "values differ: got %s\nwant %s",
	              tl_show(&tl_arena, got), tl_show(&tl_arena, want));
}

/* ------------------------------------------------------------------------ */
/* Random values                                                             */
/* ------------------------------------------------------------------------ */

static st_value rand_scalar_bytes(uint64_t *st, st_type t)
{
	static const char alpha[] = "ab\0\x7f\xc3\xa9z";
	char buf[16];
	size_t n = tl_rand(st) % 6;
	for (size_t i = 0; i < n; i++) {
		if (t == ST_S) {
			buf[i] = (char)('a' + tl_rand(st) % 26);
		} else {
			buf[i] = alpha[tl_rand(st) % (sizeof(alpha) - 1)];
		}
	}
	return tl_raw(t, buf, n);
}

static st_value rand_number(uint64_t *st)
{
	char text[80];
	if (tl_rand(st) % 8 == 0)
		return tl_raw_n("0");
	int nd = 1 + (int)(tl_rand(st) % 38), p = 0;
	if (tl_rand(st) % 2)
		text[p++] = '-';
	text[p++] = '.';
	for (int i = 0; i < nd; i++)
		text[p++] = (char)('0' + (i == 0 ? 1 + tl_rand(st) % 9 : tl_rand(st) % 10));
	snprintf(text + p, sizeof(text) - (size_t)p, "e%d", -129 + (int)(tl_rand(st) % 256));
	return tl_raw_n(text);
}

st_value tl_rand_value(uint64_t *st, int depth)
{
	int kinds = depth >= 6 ? 8 : 10;
	switch (tl_rand(st) % (uint64_t)kinds) {
	case 0:
		return rand_scalar_bytes(st, ST_S);
	case 1:
		return rand_number(st);
	case 2:
		return rand_scalar_bytes(st, ST_B);
	case 3:
		return tl_raw_bool(tl_rand(st) % 2);
	case 4:
		return tl_raw_null();
	case 5:
	case 6:
	case 7: {
		st_type t = (st_type)(ST_SS + tl_rand(st) % 3);
		uint32_t n = 1 + (uint32_t)(tl_rand(st) % 5);
		st_value v = *new_list(t, n);
		/* distinct members: index-tagged */
		for (uint32_t i = 0; i < n; i++) {
			char buf[24];
			if (t == ST_NS) {
				snprintf(buf, sizeof(buf), "%u.%llu", i,
				         (unsigned long long)(tl_rand(st) % 1000));
				v.u.list.v[i] = tl_raw_n(buf);
			} else {
				int len = snprintf(buf, sizeof(buf), "%c%llu", 'a' + (int)i,
				                   (unsigned long long)(tl_rand(st) % 100));
				v.u.list.v[i] = tl_raw(t == ST_SS ? ST_S : ST_B, buf, (size_t)len);
			}
		}
		return v;
	}
	case 8: {
		uint32_t n = (uint32_t)(tl_rand(st) % 4);
		st_value v = *new_list(ST_L, n);
		for (uint32_t i = 0; i < n; i++)
			v.u.list.v[i] = tl_rand_value(st, depth + 1);
		return v;
	}
	default: {
		uint32_t n = (uint32_t)(tl_rand(st) % 4);
		st_value v = tl_raw_map(0);
		v.u.map.a = built(sh_arena_alloc(&tl_arena, (n + 1) * sizeof(st_attr)));
		for (uint32_t i = 0; i < n; i++) {
			char *name = built(sh_arena_alloc(&tl_arena, 8));
			snprintf(name, 8, "%c%u", 'a' + (int)(tl_rand(st) % 26), i);
			v.u.map.a[i].name = name;
			v.u.map.a[i].name_len = (uint32_t)strlen(name);
			v.u.map.a[i].value = tl_rand_value(st, depth + 1);
		}
		v.u.map.n = n;
		return v;
	}
	}
}

st_value tl_rand_item(uint64_t *st)
{
	uint32_t n = (uint32_t)(tl_rand(st) % 8);
	st_value item = tl_raw_map(0);
	item.u.map.a = built(sh_arena_alloc(&tl_arena, (n + 1) * sizeof(st_attr)));
	for (uint32_t i = 0; i < n; i++) {
		char *name = built(sh_arena_alloc(&tl_arena, 12));
		snprintf(name, 12, "attr%u", i);
		item.u.map.a[i].name = name;
		item.u.map.a[i].name_len = (uint32_t)strlen(name);
		item.u.map.a[i].value = tl_rand_value(st, 1);
	}
	item.u.map.n = n;
	normalize(&tl_arena, &item, "tl_rand_item");
	return item;
}
