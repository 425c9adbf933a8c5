/*
 * expr_test.h -- helpers shared by the expression tests (test_expr_*.c):
 * values written as DynamoDB JSON, expression contexts, printing values.
 *
 * Values are written the way DynamoDB's wire format writes them, except
 * that B (and BS members) hold plain text rather than base64, so tests stay
 * readable: {"M": {"a": {"N": "1"}, "b": {"B": "raw bytes"}}}.  Everything is
 * allocated in the arena passed in; malformed JSON in a test is a bug in the
 * test and aborts it through ck_assert.
 */
#ifndef SHOAL_TESTS_EXPR_TEST_H
#define SHOAL_TESTS_EXPR_TEST_H

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "storage/expr.h"

static inline st_value *et_conv(sh_arena *a, json_t *j);

static inline void et_conv_into(sh_arena *a, json_t *j, st_value *out)
{
	st_value *v = et_conv(a, j);
	*out = *v;
}

/* A list-like value (L, SS, NS, BS) from a JSON array. */
static inline void et_list(sh_arena *a, json_t *arr, st_type t, st_value *v)
{
	ck_assert(json_is_array(arr));
	size_t n = json_array_size(arr);
	v->type = t;
	v->u.list.n = (uint32_t)n;
	v->u.list.v = sh_arena_calloc(a, n + 1, sizeof(st_value));
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(arr, i);
		st_value *m = &v->u.list.v[i];
		if (t == ST_L) {
			et_conv_into(a, x, m);
			continue;
		}
		const char *s = json_string_value(x);
		ck_assert_ptr_nonnull(s);
		m->type = t == ST_SS ? ST_S : t == ST_NS ? ST_N : ST_B;
		m->u.str.ptr = sh_arena_strndup(a, s, strlen(s));
		m->u.str.len = (uint32_t)strlen(s);
	}
}

/* A map from a JSON object of DynamoDB JSON values. */
static inline void et_map(sh_arena *a, json_t *obj, st_value *v)
{
	ck_assert(json_is_object(obj));
	v->type = ST_M;
	v->u.map.n = (uint32_t)json_object_size(obj);
	v->u.map.a = sh_arena_calloc(a, v->u.map.n + 1, sizeof(st_attr));
	const char *k;
	json_t *x;
	uint32_t i = 0;
	json_object_foreach(obj, k, x)
	{
		st_attr *at = &v->u.map.a[i++];
		at->name = sh_arena_strndup(a, k, strlen(k));
		at->name_len = (uint32_t)strlen(k);
		et_conv_into(a, x, &at->value);
	}
}

static inline st_value *et_conv(sh_arena *a, json_t *j)
{
	st_value *v = sh_arena_calloc(a, 1, sizeof(*v));
	ck_assert(json_is_object(j) && json_object_size(j) == 1);
	const char *t = json_object_iter_key(json_object_iter(j));
	json_t *x = json_object_get(j, t);
	if (strcmp(t, "S") == 0 || strcmp(t, "N") == 0 || strcmp(t, "B") == 0) {
		const char *s = json_string_value(x);
		ck_assert_ptr_nonnull(s);
		v->type = t[0] == 'S' ? ST_S : t[0] == 'N' ? ST_N : ST_B;
		v->u.str.ptr = sh_arena_strndup(a, s, strlen(s));
		v->u.str.len = (uint32_t)strlen(s);
	} else if (strcmp(t, "BOOL") == 0) {
		v->type = ST_BOOL;
		v->u.boolean = json_is_true(x);
	} else if (strcmp(t, "NULL") == 0) {
		v->type = ST_NULL;
		v->u.boolean = true;
	} else if (strcmp(t, "L") == 0) {
		et_list(a, x, ST_L, v);
	} else if (strcmp(t, "SS") == 0) {
		et_list(a, x, ST_SS, v);
	} else if (strcmp(t, "NS") == 0) {
		et_list(a, x, ST_NS, v);
	} else if (strcmp(t, "BS") == 0) {
		et_list(a, x, ST_BS, v);
	} else if (strcmp(t, "M") == 0) {
		et_map(a, x, v);
	} else {
		ck_abort_msg("unknown type %s", t);
	}
	return v;
}

static inline json_t *et_load(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	ck_assert_msg(j != NULL, "bad JSON in test: %s: %s", text, jerr.text);
	return j;
}

/* A normalised value from DynamoDB JSON: {"S": "x"}. */
static inline st_value *et_val(sh_arena *a, const char *text)
{
	json_t *j = et_load(text);
	st_value *v = et_conv(a, j);
	json_decref(j);
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(st_value_normalize(a, v, msg) == SHOAL_OK, "%s: %s", text, msg);
	return v;
}

/* A normalised item (ST_M) from a JSON object of attributes: {"a": {"N": "1"}}. */
static inline st_value *et_item(sh_arena *a, const char *text)
{
	json_t *j = et_load(text);
	st_value *v = sh_arena_calloc(a, 1, sizeof(*v));
	et_map(a, j, v);
	json_decref(j);
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(st_value_normalize(a, v, msg) == SHOAL_OK, "%s: %s", text, msg);
	return v;
}

/* ExpressionAttributeNames from {"#a": "a"}; NULL for NULL. */
static inline st_value *et_names(sh_arena *a, const char *text)
{
	if (text == NULL)
		return NULL;
	json_t *j = et_load(text);
	st_value *m = st_new_map(a, 0);
	const char *k;
	json_t *x;
	json_object_foreach(j, k, x)
	{
		ck_assert_int_eq(st_map_set(a, m, k, strlen(k), st_new_s(a, json_string_value(x))),
		                 SHOAL_OK);
	}
	json_decref(j);
	return m;
}

/* Appends the DynamoDB JSON of v to buf (B as plain text). */
static inline void et_show_into(const st_value *v, char *buf, size_t size)
{
	size_t off = strlen(buf);
#define ET_PUT(...) (off += (size_t)snprintf(buf + off, off < size ? size - off : 0, __VA_ARGS__))
	switch (v->type) {
	case ST_S:
	case ST_N:
	case ST_B:
		ET_PUT("{\"%s\":\"%.*s\"}", st_type_name(v->type), (int)v->u.str.len, v->u.str.ptr);
		break;
	case ST_BOOL:
		ET_PUT("{\"BOOL\":%s}", v->u.boolean ? "true" : "false");
		break;
	case ST_NULL:
		ET_PUT("{\"NULL\":true}");
		break;
	case ST_M:
		ET_PUT("{\"M\":{");
		for (uint32_t i = 0; i < v->u.map.n && off < size; i++) {
			ET_PUT("%s\"%.*s\":", i ? "," : "", (int)v->u.map.a[i].name_len,
			       v->u.map.a[i].name);
			et_show_into(&v->u.map.a[i].value, buf, size);
			off = strlen(buf);
		}
		ET_PUT("}}");
		break;
	case ST_L:
		ET_PUT("{\"L\":[");
		for (uint32_t i = 0; i < v->u.list.n && off < size; i++) {
			ET_PUT("%s", i ? "," : "");
			et_show_into(&v->u.list.v[i], buf, size);
			off = strlen(buf);
		}
		ET_PUT("]}");
		break;
	default: /* sets */
		ET_PUT("{\"%s\":[", st_type_name(v->type));
		for (uint32_t i = 0; i < v->u.list.n; i++)
			ET_PUT("%s\"%.*s\"", i ? "," : "", (int)v->u.list.v[i].u.str.len,
			       v->u.list.v[i].u.str.ptr);
		ET_PUT("]}");
		break;
	}
#undef ET_PUT
}

/* The DynamoDB JSON of v in a's memory ("<absent>" for NULL). */
static inline const char *et_show(sh_arena *a, const st_value *v)
{
	size_t size = 8192;
	char *buf = sh_arena_calloc(a, 1, size);
	if (v == NULL)
		return "<absent>";
	et_show_into(v, buf, size);
	return buf;
}

/* Asserts that v equals the item written as JSON attributes (deep, exact
 * order of the normalised forms). */
#define et_assert_item(a, v, json)                                                                 \
	do {                                                                                       \
		const st_value *et_want_ = et_item((a), (json));                                   \
		ck_assert_msg((v) != NULL && st_value_equal((v), et_want_), "got %s\nwant %s",     \
		              et_show((a), (v)), et_show((a), et_want_));                          \
	} while (0)

#endif
