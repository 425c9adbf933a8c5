/* DynamoDB JSON <-> st_value: every type both ways, exact output text,
 * base64 edge cases, DynamoDB's error messages and their order. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "tests/lib/tl_values.h"

#define EMPTY_AV                                                                                   \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
#define MORE_AV                                                                                    \
	"Supplied AttributeValue has more than one datatypes set, must contain exactly one of "    \
	"the supported datatypes"
#define NULL_TRUE                                                                                  \
	"One or more parameter values were invalid: Null attribute value types must have the "     \
	"value of true"
#define NEST                                                                                       \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"

static int value(const char *text, st_value *v)
{
	return wire_value_from_text(&tl_arena, text, strlen(text), v, tl_msg);
}

static int item(const char *text, st_value *v)
{
	return wire_item_from_text(&tl_arena, text, strlen(text), v, tl_msg);
}

/* The compact JSON text of v (an item when is_item). */
static const char *to_text(const st_value *v, bool is_item)
{
	json_t *j;
	int rc = is_item ? wire_item_to_json(v, &j, tl_msg) : wire_value_to_json(v, &j, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	char *out;
	ck_assert_int_eq(wire_json_dumps(&tl_arena, j, false, &out, tl_msg), SHOAL_OK);
	json_decref(j);
	return out;
}

static bool str_is(const st_value *v, st_type t, const char *p, size_t n)
{
	return v->type == t && v->u.str.len == n && memcmp(v->u.str.ptr, p, n) == 0;
}

/* A value's text goes in and comes out unchanged. */
static void check_round(const char *text)
{
	st_value v;
	ck_assert_msg(value(text, &v) == SHOAL_OK, "%s: %s", text, tl_msg);
	ck_assert_str_eq(to_text(&v, false), text);
}

START_TEST(test_every_type)
{
	st_value v;
	ck_assert_int_eq(value("{\"S\":\"hi\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_S, "hi", 2));
	ck_assert_int_eq(value("{\"N\":\"-1.50e3\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_N, "-1.50e3", 7)); /* as written: normalising is not JSON's job */
	ck_assert_int_eq(value("{\"B\":\"AP8Q\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_B, "\x00\xff\x10", 3));
	ck_assert_int_eq(value("{\"BOOL\":false}", &v), SHOAL_OK);
	ck_assert(v.type == ST_BOOL && !v.u.boolean);
	ck_assert_int_eq(value("{\"NULL\":true}", &v), SHOAL_OK);
	ck_assert(v.type == ST_NULL && v.u.boolean);
	ck_assert_int_eq(value("{\"SS\":[\"b\",\"a\"]}", &v), SHOAL_OK);
	ck_assert(v.type == ST_SS && v.u.list.n == 2 && str_is(&v.u.list.v[1], ST_S, "a", 1));
	ck_assert_int_eq(value("{\"NS\":[\"1\",\"2.5\"]}", &v), SHOAL_OK);
	ck_assert(v.type == ST_NS && str_is(&v.u.list.v[1], ST_N, "2.5", 3));
	ck_assert_int_eq(value("{\"BS\":[\"QQ==\",\"\"]}", &v), SHOAL_OK);
	ck_assert(v.type == ST_BS && str_is(&v.u.list.v[0], ST_B, "A", 1) &&
	          str_is(&v.u.list.v[1], ST_B, "", 0));
	ck_assert_int_eq(value("{\"L\":[{\"S\":\"x\"},{\"L\":[]}]}", &v), SHOAL_OK);
	ck_assert(v.type == ST_L && v.u.list.n == 2 && v.u.list.v[1].type == ST_L &&
	          v.u.list.v[1].u.list.n == 0);
	ck_assert_int_eq(value("{\"M\":{\"k\":{\"N\":\"1\"},\"j\":{\"M\":{}}}}", &v), SHOAL_OK);
	ck_assert(v.type == ST_M && v.u.map.n == 2 && v.u.map.a[0].name_len == 1 &&
	          v.u.map.a[0].name[0] == 'k' && v.u.map.a[1].value.type == ST_M);

	/* And back, unchanged (compact text, member order kept). */
	check_round("{\"S\":\"hi\"}");
	check_round("{\"N\":\"-1.50e3\"}");
	check_round("{\"B\":\"AP8Q\"}");
	check_round("{\"BOOL\":true}");
	check_round("{\"NULL\":true}");
	check_round("{\"SS\":[\"b\",\"a\"]}");
	check_round("{\"NS\":[\"1\",\"2.5\"]}");
	check_round("{\"BS\":[\"QQ==\",\"\"]}");
	check_round("{\"L\":[{\"S\":\"x\"},{\"L\":[]}]}");
	check_round("{\"M\":{\"k\":{\"N\":\"1\"},\"j\":{\"M\":{}}}}");
	check_round("{\"S\":\"\"}");
	check_round("{\"S\":\"caf\xc3\xa9 \xf0\x9f\x90\x9f\"}"); /* UTF-8 stays UTF-8 */
}
END_TEST

START_TEST(test_nul_and_escapes)
{
	st_value v;
	ck_assert_int_eq(value("{\"S\":\"a\\u0000b\\n\\\"\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_S, "a\0b\n\"", 5));
	ck_assert_str_eq(to_text(&v, false), "{\"S\":\"a\\u0000b\\n\\\"\"}");
	/* Attribute names holding U+0000 are written out, but jansson cannot
	 * read them back: a clean serialisation error. */
	st_value named = {.type = ST_M};
	st_attr at = {.name = "a\0b", .name_len = 3, .value = v};
	named.u.map.a = &at;
	named.u.map.n = 1;
	ck_assert_str_eq(to_text(&named, true), "{\"a\\u0000b\":{\"S\":\"a\\u0000b\\n\\\"\"}}");
	ck_assert_int_eq(item("{\"a\\u0000b\":{\"S\":\"x\"}}", &v), SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "NUL byte in object key") != NULL, "%s", tl_msg);
	/* Text that is not UTF-8 cannot be written as JSON. */
	st_value bad = {.type = ST_S};
	bad.u.str.ptr = "\xff";
	bad.u.str.len = 1;
	json_t *j;
	ck_assert_int_eq(wire_value_to_json(&bad, &j, tl_msg), SHOAL_E_VALIDATION);
}
END_TEST

START_TEST(test_item_output_text)
{
	const char *in = "{\"sk\":{\"N\":\"010.50\"},\"pk\":{\"S\":\"user#1\"},"
	                 "\"tags\":{\"SS\":[\"z\",\"a\"]},\"bin\":{\"B\":\"AQID\"},"
	                 "\"meta\":{\"M\":{\"y\":{\"NULL\":true},\"x\":{\"BOOL\":false}}},"
	                 "\"list\":{\"L\":[{\"N\":\"1\"},{\"S\":\"two\"}]}}";
	st_value v;
	ck_assert_int_eq(item(in, &v), SHOAL_OK);
	/* Normalised (sorted, canonical numbers), then written back. */
	ck_assert_int_eq(st_value_normalize(&tl_arena, &v, tl_msg), SHOAL_OK);
	ck_assert_str_eq(
	    to_text(&v, true),
	    "{\"bin\":{\"B\":\"AQID\"},\"list\":{\"L\":[{\"N\":\"1\"},{\"S\":\"two\"}]},"
	    "\"meta\":{\"M\":{\"x\":{\"BOOL\":false},\"y\":{\"NULL\":true}}},"
	    "\"pk\":{\"S\":\"user#1\"},\"sk\":{\"N\":\"10.5\"},"
	    "\"tags\":{\"SS\":[\"a\",\"z\"]}}");
	/* Pretty output, as the AWS CLI prints. */
	st_value small;
	ck_assert_int_eq(item("{\"pk\":{\"S\":\"a\"},\"n\":{\"NS\":[\"1\"]}}", &small), SHOAL_OK);
	json_t *j;
	char *out;
	ck_assert_int_eq(wire_item_to_json(&small, &j, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_json_dumps(&tl_arena, j, true, &out, tl_msg), SHOAL_OK);
	json_decref(j);
	ck_assert_str_eq(out, "{\n"
	                      "    \"pk\": {\n"
	                      "        \"S\": \"a\"\n"
	                      "    },\n"
	                      "    \"n\": {\n"
	                      "        \"NS\": [\n"
	                      "            \"1\"\n"
	                      "        ]\n"
	                      "    }\n"
	                      "}");
}
END_TEST

START_TEST(test_items_and_names)
{
	json_t *j;
	const char *arr = "[{\"a\":{\"N\":\"1\"}},{}]";
	ck_assert_int_eq(wire_json_parse(arr, strlen(arr), &j, tl_msg), SHOAL_OK);
	st_value *items;
	uint32_t n;
	ck_assert_int_eq(wire_items_from_json(&tl_arena, j, &items, &n, tl_msg), SHOAL_OK);
	json_decref(j);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(items[0].u.map.n, 1);
	ck_assert_uint_eq(items[1].u.map.n, 0);
	ck_assert_int_eq(wire_items_to_json(items, n, &j, tl_msg), SHOAL_OK);
	char *out;
	ck_assert_int_eq(wire_json_dumps(&tl_arena, j, false, &out, tl_msg), SHOAL_OK);
	json_decref(j);
	ck_assert_str_eq(out, "[{\"a\":{\"N\":\"1\"}},{}]");

	st_value names;
	const char *t = "{\"#n\":\"name\",\"#s\":\"status\"}";
	ck_assert_int_eq(wire_names_from_text(&tl_arena, t, strlen(t), &names, tl_msg), SHOAL_OK);
	ck_assert_int_eq(names.type, ST_M);
	ck_assert_uint_eq(names.u.map.n, 2);
	ck_assert(str_is(&names.u.map.a[1].value, ST_S, "status", 6));
	ck_assert_int_eq(wire_names_to_json(&names, &j, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_json_dumps(&tl_arena, j, false, &out, tl_msg), SHOAL_OK);
	json_decref(j);
	ck_assert_str_eq(out, t);

	t = "{\"#n\":5}";
	ck_assert_int_eq(wire_names_from_text(&tl_arena, t, strlen(t), &names, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(tl_msg, "NUMBER_VALUE cannot be converted to String");
	t = "[\"#n\"]";
	ck_assert_int_eq(wire_names_from_text(&tl_arena, t, strlen(t), &names, tl_msg),
	                 SHOAL_E_SERIALIZATION);
}
END_TEST

START_TEST(test_base64)
{
	uint8_t *d;
	size_t n;
	static const struct {
		const char *in;
		const char *out;
		size_t len;
	} good[] = {
	    {"", "", 0},
	    {"QQ==", "A", 1},
	    {"QUI=", "AB", 2},
	    {"QUJD", "ABC", 3},
	    {"AP8Q", "\0\xff\x10", 3},
	    {"+/+/", "\xfb\xff\xbf", 3},
	    {"QUJDRA==", "ABCD", 4},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(
		    wire_b64_decode(&tl_arena, good[i].in, strlen(good[i].in), &d, &n, tl_msg),
		    SHOAL_OK);
		ck_assert_uint_eq(n, good[i].len);
		ck_assert(memcmp(d, good[i].out, n) == 0);
	}
	static const struct {
		const char *in;
		const char *msg;
	} bad[] = {
	    {"QQ=", "Base64 encoded length is expected a multiple of 4 bytes but found: 3"},
	    {"Q", "Base64 encoded length is expected a multiple of 4 bytes but found: 1"},
	    {"QQ*=", "Invalid Base64 character: '*'"},
	    {"QQ==QQ==", "Invalid Base64 character: '='"},
	    {"Q===", "Invalid Base64 character: '='"},
	    {"====", "Invalid Base64 character: '='"},
	    {"QQ-_", "Invalid Base64 character: '-'"}, /* URL-safe alphabet is not base64 */
	    {"Q Q=", "Invalid Base64 character: ' '"},
	    {"QQ\x01=", "Invalid Base64 character: '\\x01'"},
	    {"QR==", "Invalid last non-pad Base64 character dectected"},
	    {"QUJ=", "Invalid last non-pad Base64 character dectected"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(
		    wire_b64_decode(&tl_arena, bad[i].in, strlen(bad[i].in), &d, &n, tl_msg),
		    SHOAL_E_SERIALIZATION);
		ck_assert_str_eq(tl_msg, bad[i].msg);
	}
	/* Every length and many byte patterns round-trip, with one encoding each. */
	uint64_t seed = tl_seed();
	uint8_t src[64];
	char enc[100];
	for (size_t len = 0; len <= sizeof(src); len++) {
		for (size_t i = 0; i < len; i++)
			src[i] = (uint8_t)tl_rand(&seed);
		wire_b64_encode(src, len, enc);
		ck_assert_uint_eq(strlen(enc), wire_b64_encoded_len(len));
		ck_assert_int_eq(wire_b64_decode(&tl_arena, enc, strlen(enc), &d, &n, tl_msg),
		                 SHOAL_OK);
		ck_assert_uint_eq(n, len);
		ck_assert(memcmp(d, src, len) == 0);
	}
	wire_b64_encode("ABCD", 4, enc);
	ck_assert_str_eq(enc, "QUJDRA==");
}
END_TEST

/* text -> (code, message) */
static void check_err(const char *text, int code, const char *want)
{
	st_value v;
	int rc = value(text, &v);
	ck_assert_msg(rc == code, "%s: got %s (%s)", text, shoal_err_name(rc), tl_msg);
	ck_assert_str_eq(tl_msg, want);
}

START_TEST(test_value_errors)
{
	check_err("{}", SHOAL_E_VALIDATION, EMPTY_AV);
	check_err("{\"S\":\"a\",\"N\":\"1\"}", SHOAL_E_VALIDATION, MORE_AV);
	check_err("{\"NULL\":false}", SHOAL_E_VALIDATION, NULL_TRUE);
	check_err("{\"NULL\":false,\"S\":\"x\"}", SHOAL_E_VALIDATION, NULL_TRUE);
	check_err("{\"L\":[{}]}", SHOAL_E_VALIDATION, EMPTY_AV);
	check_err("{\"L\":[null]}", SHOAL_E_VALIDATION, EMPTY_AV);
	check_err("{\"M\":{\"a\":{\"S\":\"x\",\"B\":\"\"}}}", SHOAL_E_VALIDATION, MORE_AV);
	check_err("null", SHOAL_E_VALIDATION, EMPTY_AV);

	check_err("{\"S\":5}", SHOAL_E_SERIALIZATION, "NUMBER_VALUE cannot be converted to String");
	check_err("{\"S\":1.5}", SHOAL_E_SERIALIZATION,
	          "DECIMAL_VALUE cannot be converted to String");
	check_err("{\"N\":true}", SHOAL_E_SERIALIZATION,
	          "TRUE_VALUE cannot be converted to String");
	check_err("{\"S\":false}", SHOAL_E_SERIALIZATION,
	          "FALSE_VALUE cannot be converted to String");
	check_err("{\"N\":1}", SHOAL_E_SERIALIZATION, "NUMBER_VALUE cannot be converted to String");
	check_err("{\"S\":{}}", SHOAL_E_SERIALIZATION,
	          "Start of structure or map found where not expected");
	check_err("{\"S\":[]}", SHOAL_E_SERIALIZATION,
	          "Unrecognized collection type class java.lang.String");
	check_err("{\"B\":5}", SHOAL_E_SERIALIZATION,
	          "only base-64-encoded strings are convertible to bytes");
	check_err("{\"B\":[]}", SHOAL_E_SERIALIZATION,
	          "Unrecognized collection type class java.nio.ByteBuffer");
	check_err("{\"B\":\"abc\"}", SHOAL_E_SERIALIZATION,
	          "Base64 encoded length is expected a multiple of 4 bytes but found: 3");
	check_err("{\"BS\":[\"QR==\"]}", SHOAL_E_SERIALIZATION,
	          "Invalid last non-pad Base64 character dectected");
	check_err("{\"BOOL\":\"maybe\"}", SHOAL_E_SERIALIZATION,
	          "Unexpected token received from parser");
	check_err("{\"BOOL\":1}", SHOAL_E_SERIALIZATION,
	          "NUMBER_VALUE cannot be converted to Boolean");
	check_err("{\"NULL\":[]}", SHOAL_E_SERIALIZATION,
	          "Unrecognized collection type class java.lang.Boolean");
	check_err("{\"SS\":\"a\"}", SHOAL_E_SERIALIZATION, "Unexpected field type");
	check_err("{\"NS\":{}}", SHOAL_E_SERIALIZATION,
	          "Start of structure or map found where not expected");
	check_err("{\"SS\":[1]}", SHOAL_E_SERIALIZATION,
	          "NUMBER_VALUE cannot be converted to String");
	check_err("{\"L\":{}}", SHOAL_E_SERIALIZATION,
	          "Start of structure or map found where not expected");
	check_err("{\"L\":\"x\"}", SHOAL_E_SERIALIZATION, "Unexpected field type");
	check_err("{\"M\":[]}", SHOAL_E_SERIALIZATION,
	          "Unrecognized collection type java.util.Map<java.lang.String, "
	          "com.amazonaws.dynamodb.v20120810.AttributeValue>");
	check_err("{\"M\":1}", SHOAL_E_SERIALIZATION, "Unexpected field type");
	check_err("\"x\"", SHOAL_E_SERIALIZATION, "Unexpected value type in payload");
	check_err(
	    "[]", SHOAL_E_SERIALIZATION,
	    "Unrecognized collection type class com.amazonaws.dynamodb.v20120810.AttributeValue");
	check_err("{\"SS\":[\"a\",null]}", SHOAL_E_VALIDATION,
	          "One or more parameter values were invalid: Set members may not be null");

	/* Serialisation errors win over validation errors met earlier. */
	check_err("{\"L\":[{},{\"S\":5}]}", SHOAL_E_SERIALIZATION,
	          "NUMBER_VALUE cannot be converted to String");
	/* The first validation error in document order is the one reported. */
	check_err("{\"L\":[{\"NULL\":false},{}]}", SHOAL_E_VALIDATION, NULL_TRUE);

	/* Malformed JSON says where. */
	st_value v;
	ck_assert_int_eq(value("{\"S\":\"x\"", &v), SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "Invalid JSON: ") == tl_msg &&
	                  strstr(tl_msg, "line 1, column") != NULL,
	              "%s", tl_msg);
	ck_assert_int_eq(value("{\"S\":\"\xff\"}", &v), SHOAL_E_SERIALIZATION);
	ck_assert_int_eq(value("", &v), SHOAL_E_SERIALIZATION);

	/* Item-level shapes. */
	ck_assert_int_eq(item("[]", &v), SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(tl_msg, "Unrecognized collection type java.util.Map<java.lang.String, "
	                         "com.amazonaws.dynamodb.v20120810.AttributeValue>");
	ck_assert_int_eq(item("\"x\"", &v), SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(tl_msg, "Unexpected field type");
	ck_assert_int_eq(item("{\"a\":null}", &v), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, EMPTY_AV);
	ck_assert_int_eq(item("{\"a\":\"x\"}", &v), SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(tl_msg, "Unexpected value type in payload");
}
END_TEST

START_TEST(test_lenient_shapes)
{
	st_value v;
	/* Unknown members and null members are ignored, as DynamoDB does. */
	ck_assert_int_eq(value("{\"S\":\"x\",\"foo\":1}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_S, "x", 1));
	ck_assert_int_eq(value("{\"N\":null,\"S\":\"x\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_S, "x", 1));
	check_err("{\"s\":\"x\"}", SHOAL_E_VALIDATION, EMPTY_AV);
	/* Duplicate keys: the last wins. */
	ck_assert_int_eq(value("{\"S\":\"a\",\"S\":\"b\"}", &v), SHOAL_OK);
	ck_assert(str_is(&v, ST_S, "b", 1));
	ck_assert_int_eq(item("{\"a\":{\"S\":\"1\"},\"a\":{\"N\":\"2\"}}", &v), SHOAL_OK);
	ck_assert_uint_eq(v.u.map.n, 1);
	ck_assert(str_is(&v.u.map.a[0].value, ST_N, "2", 1));
	/* BOOL from the strings Coral converts. */
	ck_assert_int_eq(value("{\"BOOL\":\"Yes\"}", &v), SHOAL_OK);
	ck_assert(v.type == ST_BOOL && v.u.boolean);
	ck_assert_int_eq(value("{\"BOOL\":\"0\"}", &v), SHOAL_OK);
	ck_assert(v.type == ST_BOOL && !v.u.boolean);
	ck_assert_int_eq(value("{\"NULL\":\"TRUE\"}", &v), SHOAL_OK);
	ck_assert_int_eq(v.type, ST_NULL);
}
END_TEST

START_TEST(test_nesting)
{
	/* DynamoDB JSON nested past the converter's bound: refused, no deep recursion. */
	char *text = sh_malloc(64 * 1024);
	size_t len = 0;
	int depth = WIRE_MAX_VALUE_DEPTH + 20;
	for (int i = 0; i < depth; i++)
		len += (size_t)sprintf(text + len, "{\"L\":[");
	len += (size_t)sprintf(text + len, "{\"NULL\":true}");
	for (int i = 0; i < depth; i++)
		len += (size_t)sprintf(text + len, "]}");
	st_value v;
	int rc = wire_value_from_text(&tl_arena, text, len, &v, tl_msg);
	sh_free(text);
	ck_assert_int_eq(rc, SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);

	/* Raw JSON nesting far past jansson's parser limit. */
	size_t n = 100000;
	text = sh_malloc(n + 1);
	memset(text, '[', n);
	rc = wire_value_from_text(&tl_arena, text, n, &v, tl_msg);
	sh_free(text);
	ck_assert_int_eq(rc, SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "Invalid JSON") != NULL, "%s", tl_msg);

	/* Writing a value nested too deep is refused too. */
	st_value deep = {.type = ST_NULL};
	deep.u.boolean = true;
	for (int i = 0; i < WIRE_MAX_VALUE_DEPTH; i++) {
		st_value *inner = sh_arena_alloc(&tl_arena, sizeof(*inner));
		*inner = deep;
		deep.type = ST_L;
		deep.u.list.v = inner;
		deep.u.list.n = 1;
	}
	json_t *j;
	ck_assert_int_eq(wire_value_to_json(&deep, &j, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);
	ck_assert_int_eq(wire_value_to_json(&deep.u.list.v[0], &j, tl_msg), SHOAL_OK);
	json_decref(j);
}
END_TEST

START_TEST(test_out_of_memory)
{
	const char *text = "{\"a\":{\"M\":{\"b\":{\"L\":[{\"S\":\"x\"},{\"B\":\"QQ==\"}]}}},"
	                   "\"c\":{\"NS\":[\"1\",\"2\"]}}";
	/* Parse and convert with the n-th allocation failing, n = 1, 2, ...: a
	 * clean NOMEM every time until everything fits. */
	int n;
	for (n = 1; n < 500; n++) {
		sh_arena a;
		sh_arena_init(&a);
		st_value v;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = wire_item_from_text(&a, text, strlen(text), &v, tl_msg);
		json_t *j = NULL;
		if (rc == SHOAL_OK)
			rc = wire_item_to_json(&v, &j, tl_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		json_decref(j);
		sh_arena_fini(&a);
		if (!fired) {
			ck_assert_int_eq(rc, SHOAL_OK);
			break;
		}
		ck_assert_msg(rc == SHOAL_E_NOMEM, "n=%d: %s (%s)", n, shoal_err_name(rc), tl_msg);
	}
	ck_assert_int_gt(n, 10);
	ck_assert_int_lt(n, 500);
}
END_TEST

static Suite *json_suite(void)
{
	return tl_suite("json", tl_arena_setup, tl_arena_teardown, 0,
	                TL_TESTS(test_every_type, test_nul_and_escapes, test_item_output_text,
	                         test_items_and_names, test_base64, test_value_errors,
	                         test_lenient_shapes, test_nesting, test_out_of_memory));
}

TL_MAIN(json_suite)
