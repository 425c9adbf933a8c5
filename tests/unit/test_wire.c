/* The wire format: the Status enum against common/errors.h, values through
 * protobuf pack/unpack, framing and depth limits, request and response
 * conversions with DynamoDB's validation messages. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#define TL_RAW_VALUE_NAMES
#include "tests/lib/tl_values.h"
#include "tests/lib/tl_wire.h"

#define NEST                                                                                       \
	"Nesting Levels have exceeded supported limits: Attributes in the item have nested "       \
	"levels beyond supported limit"
#define EMPTY_AV                                                                                   \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"

/* An item with every type, nested, including text with U+0000 and an empty S. */
static st_value every_type_item(void)
{
	static const char nul_text[] = {'a', '\0', 'b'};
	static const unsigned char bin[] = {0x00, 0xff, 0x10, 0x80};
	st_value nested = MAP(3, "z", LIST(ST_L, 2, S("deep"), MAP(1, "k", N("-1.5e3"))), "a",
	                      BOOLV(false), "m", MAP(0));
	return MAP(12, "pk", S("user#1"), "nul", raw(ST_S, nul_text, sizeof(nul_text)), "empty",
	           S(""), "num", N("12.50"), "bin", raw(ST_B, bin, sizeof(bin)), "yes", BOOLV(true),
	           "nil", NUL(), "map", nested, "list",
	           LIST(ST_L, 3, N("1"), S("two"), LIST(ST_L, 0)), "ss",
	           LIST(ST_SS, 2, S("b"), S("a")), "ns", LIST(ST_NS, 2, N("3"), N("1.0")), "bs",
	           LIST(ST_BS, 1, raw(ST_B, bin, 2)));
}

/* Packs a Request, unpacks it with the heap allocator; the caller frees. */
static Shoal__Request *round_trip(Shoal__Request *req)
{
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, &req->base, &buf, &len, tl_msg), SHOAL_OK);
	Shoal__Request *out;
	ck_assert_int_eq(wire_unpack_request(NULL, buf, len, &out, tl_msg), SHOAL_OK);
	ck_assert_ptr_nonnull(out);
	return out;
}

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

static void check_status(const char *cname, int value)
{
	const ProtobufCEnumValue *v =
	    protobuf_c_enum_descriptor_get_value(&shoal__status__descriptor, value);
	ck_assert_msg(v != NULL, "no Status with value %d (%s)", value, cname);
	char want[64];
	if (strncmp(cname, "SHOAL_E_", 8) == 0)
		snprintf(want, sizeof(want), "STATUS_%s", cname + 8);
	else
		snprintf(want, sizeof(want), "STATUS_%s", cname + 6); /* SHOAL_OK */
	ck_assert_str_eq(v->name, want);
	ck_assert_int_eq(v->value, value);
	ck_assert_int_eq(wire_status_from_code(value), value);
	ck_assert_int_eq(wire_code_from_status(value), value);
}

START_TEST(test_status_mirrors_errors)
{
	ck_assert_uint_eq(shoal__status__descriptor.n_values, SHOAL_E__COUNT);
#define CHECK_STATUS_(name, value, exc, desc) check_status(#name, value);
	SHOAL_ERRORS(CHECK_STATUS_)
#undef CHECK_STATUS_
	ck_assert_int_eq(wire_status_from_code(-1), SHOAL__STATUS__STATUS_INTERNAL);
	ck_assert_int_eq(wire_status_from_code(SHOAL_E__COUNT), SHOAL__STATUS__STATUS_INTERNAL);
	ck_assert_int_eq(wire_code_from_status(999), SHOAL_E_INTERNAL);
	ck_assert_str_eq(wire_op_name(SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS),
	                 "TransactWriteItems");
	ck_assert_str_eq(wire_op_name(SHOAL__REQUEST__OP__NOT_SET), "");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_value_round_trip)
{
	st_value item = every_type_item();
	st_put_req put = {.table = "things", .item = &item};
	Shoal__PutItemRequest *p;
	ck_assert_int_eq(wire_put_req_to_pb(&tl_arena, &put, &p, tl_msg), SHOAL_OK);
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.request_id = 42;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	req.put_item = p;
	Shoal__Request *got = round_trip(&req);
	ck_assert_uint_eq(got->request_id, 42);
	ck_assert_int_eq(got->op_case, SHOAL__REQUEST__OP_PUT_ITEM);
	st_value back;
	ck_assert_int_eq(wire_item_from_pb(&tl_arena, got->put_item->item, &back, tl_msg),
	                 SHOAL_OK);
	wire_free_request(NULL, got);
	/* Exactly what was sent, order and bytes included (not normalised). */
	ck_assert(tl_same(&item, &back));
	ck_assert_uint_eq(back.u.map.a[1].value.u.str.len, 3); /* "a\0b" kept whole */
	ck_assert_uint_eq(back.u.map.a[2].value.u.str.len, 0);

	/* Each type alone as a value. */
	for (uint32_t i = 0; i < item.u.map.n; i++) {
		Shoal__AttributeValue *pb;
		st_value v;
		ck_assert_int_eq(wire_value_to_pb(&tl_arena, &item.u.map.a[i].value, &pb, tl_msg),
		                 SHOAL_OK);
		ck_assert_int_eq(wire_value_from_pb(&tl_arena, pb, &v, tl_msg), SHOAL_OK);
		ck_assert(tl_same(&item.u.map.a[i].value, &v));
	}
}
END_TEST

START_TEST(test_value_from_pb_errors)
{
	st_value v;
	Shoal__AttributeValue av = SHOAL__ATTRIBUTE_VALUE__INIT;
	ck_assert_int_eq(wire_value_from_pb(&tl_arena, &av, &v, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, EMPTY_AV);

	av.value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_NULL;
	av.null = 0;
	ck_assert_int_eq(wire_value_from_pb(&tl_arena, &av, &v, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: Null attribute value "
	                         "types must have the value of true");
	av.null = 1;
	ck_assert_int_eq(wire_value_from_pb(&tl_arena, &av, &v, tl_msg), SHOAL_OK);
	ck_assert_int_eq(v.type, ST_NULL);

	/* An Attribute without a value. */
	Shoal__Attribute at = SHOAL__ATTRIBUTE__INIT;
	at.name.data = (uint8_t *)"a";
	at.name.len = 1;
	Shoal__Attribute *ats[] = {&at};
	Shoal__Item item = SHOAL__ITEM__INIT;
	item.attrs = ats;
	item.n_attrs = 1;
	ck_assert_int_eq(wire_item_from_pb(&tl_arena, &item, &v, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, EMPTY_AV);

	/* Nesting past the converter's bound, built in memory (no framing). */
	Shoal__AttributeValue *chain = sh_arena_alloc(&tl_arena, sizeof(*chain));
	shoal__attribute_value__init(chain);
	chain->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_NULL;
	chain->null = 1;
	for (int i = 0; i < WIRE_MAX_VALUE_DEPTH + 5; i++) {
		Shoal__ListValue *l = sh_arena_alloc(&tl_arena, sizeof(*l));
		Shoal__AttributeValue **one = sh_arena_alloc(&tl_arena, sizeof(*one));
		Shoal__AttributeValue *up = sh_arena_alloc(&tl_arena, sizeof(*up));
		shoal__list_value__init(l);
		shoal__attribute_value__init(up);
		one[0] = chain;
		l->values = one;
		l->n_values = 1;
		up->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_L;
		up->l = l;
		chain = up;
	}
	ck_assert_int_eq(wire_value_from_pb(&tl_arena, chain, &v, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);
}
END_TEST

START_TEST(test_value_to_pb_errors)
{
	Shoal__AttributeValue *pb;
	st_value none = {.type = ST_NONE};
	ck_assert_int_eq(wire_value_to_pb(&tl_arena, &none, &pb, tl_msg), SHOAL_E_VALIDATION);
	st_value deep = N("1");
	for (int i = 0; i < WIRE_MAX_VALUE_DEPTH; i++)
		deep = LIST(ST_L, 1, deep);
	ck_assert_int_eq(wire_value_to_pb(&tl_arena, &deep, &pb, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);
	/* One level less fits, and what fits can be unpacked by a peer. */
	deep = deep.u.list.v[0];
	ck_assert_int_eq(wire_value_to_pb(&tl_arena, &deep, &pb, tl_msg), SHOAL_OK);
	st_value item = MAP(1, "a", deep);
	st_put_req put = {.table = "tbl", .item = &item};
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	ck_assert_int_eq(wire_put_req_to_pb(&tl_arena, &put, &req.put_item, tl_msg), SHOAL_OK);
	Shoal__Request *got = round_trip(&req);
	st_value back;
	ck_assert_int_eq(wire_item_from_pb(&tl_arena, got->put_item->item, &back, tl_msg),
	                 SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert(tl_same(&item, &back));

	st_value names = MAP(1, "#n", N("1"));
	Shoal__ExpressionAttributeNames *np;
	ck_assert_int_eq(wire_names_to_pb(&tl_arena, &names, &np, tl_msg), SHOAL_E_VALIDATION);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Framing                                                                   */
/* ------------------------------------------------------------------------ */

/* A PutItem Request whose attribute "a" is an L nested `depth` times around
 * {NULL: true}. Message depth: 5 + 2 * depth. */
static const uint8_t *nested_put_l(size_t depth, size_t *len)
{
	return tl_nested_put(&tl_arena, false, depth, len);
}

static int decode_put(const uint8_t *buf, size_t len, st_put_req *put)
{
	Shoal__Request *req;
	int rc = wire_unpack_request(NULL, buf, len, &req, tl_msg);
	if (rc != SHOAL_OK) {
		ck_assert_ptr_null(req);
		return rc;
	}
	ck_assert_int_eq(req->op_case, SHOAL__REQUEST__OP_PUT_ITEM);
	rc = wire_put_req_from_pb(&tl_arena, req->put_item, put, tl_msg);
	wire_free_request(NULL, req);
	return rc;
}

START_TEST(test_depth_limits)
{
	st_put_req put;
	size_t len;
	const uint8_t *buf;
	/* DynamoDB's 32 levels: an attribute is level 1, so 31 nested Ls fit. */
	buf = nested_put_l(ST_MAX_DEPTH - 1, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_OK);
	ck_assert_str_eq(put.table, "tbl");
	buf = nested_put_l(ST_MAX_DEPTH, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);
	/* Past the converter's margin: refused by the converter, same text. */
	buf = nested_put_l(WIRE_MAX_VALUE_DEPTH + 10, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, NEST);
	/* The deepest message the framing accepts, and one level more. */
	size_t max_lists = (WIRE_MAX_MSG_DEPTH - 5) / 2;
	buf = nested_put_l(max_lists, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_E_VALIDATION);
	buf = nested_put_l(max_lists + 1, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "nested deeper than 160 levels") != NULL, "%s", tl_msg);
	/* A hostile message: 100000 levels in about 1 MB. */
	buf = nested_put_l(100000, &len);
	ck_assert_int_eq(decode_put(buf, len, &put), SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "nested deeper") != NULL, "%s", tl_msg);
}
END_TEST

START_TEST(test_framing_errors)
{
	Shoal__Request *req;
	/* Truncated: field 11 claims 5 bytes, 1 follows. */
	static const uint8_t trunc[] = {0x5a, 0x05, 0x0a};
	ck_assert_int_eq(wire_unpack_request(NULL, trunc, sizeof(trunc), &req, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_ptr_null(req);
	ck_assert_msg(strstr(tl_msg, "byte 0: length runs past the end") != NULL, "%s", tl_msg);
	/* Group wire type. */
	static const uint8_t group[] = {0x0b};
	ck_assert_int_eq(wire_unpack_request(NULL, group, 1, &req, tl_msg), SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "groups") != NULL, "%s", tl_msg);
	/* Wire types 6 and 7 do not exist. */
	static const uint8_t wt7[] = {0x0f};
	ck_assert_int_eq(wire_unpack_request(NULL, wt7, 1, &req, tl_msg), SHOAL_E_SERIALIZATION);
	/* Field number 0. */
	static const uint8_t zero[] = {0x00, 0x00};
	ck_assert_int_eq(wire_unpack_request(NULL, zero, 2, &req, tl_msg), SHOAL_E_SERIALIZATION);
	/* request_id (varint) sent as length-delimited. */
	static const uint8_t mismatch[] = {0x0a, 0x00};
	ck_assert_int_eq(wire_unpack_request(NULL, mismatch, 2, &req, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "shoal.Request.request_id has wire type 2") != NULL, "%s",
	              tl_msg);
	/* A varint that never ends, and one of 11 bytes. */
	static const uint8_t endless[] = {0x08, 0xff, 0xff};
	ck_assert_int_eq(wire_unpack_request(NULL, endless, 3, &req, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	static const uint8_t eleven[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	ck_assert_int_eq(wire_unpack_request(NULL, eleven, sizeof(eleven), &req, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	/* A NUL inside a string field (TableName "Mu\0x") is refused, not cut. */
	/* (request_id 1; get_item, field 10: {table_name, field 1: "Mu\0x"}) */
	static const uint8_t nul_name[] = {0x08, 0x01, 0x52, 0x06, 0x0a, 0x04, 'M', 'u', 0x00, 'x'};
	ck_assert_int_eq(wire_unpack_request(NULL, nul_name, sizeof(nul_name), &req, tl_msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_msg(strstr(tl_msg, "NUL") != NULL, "%s", tl_msg);
	/* Unknown fields are skipped; empty input is an empty Request. */
	static const uint8_t unknown[] = {0xf8, 0x07, 0x01, 0x08, 0x07};
	ck_assert_int_eq(wire_unpack_request(NULL, unknown, sizeof(unknown), &req, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(req->request_id, 7);
	wire_free_request(NULL, req);
	ck_assert_int_eq(wire_unpack_request(NULL, NULL, 0, &req, tl_msg), SHOAL_OK);
	ck_assert_int_eq(req->op_case, SHOAL__REQUEST__OP__NOT_SET);
	wire_free_request(NULL, req);

	/* Arena allocator: nothing to free. */
	ProtobufCAllocator arena_alloc;
	wire_arena_allocator(&arena_alloc, &tl_arena);
	ck_assert_int_eq(wire_unpack_request(&arena_alloc, unknown, sizeof(unknown), &req, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(req->request_id, 7);
}
END_TEST

START_TEST(test_unpack_out_of_memory)
{
	st_value item = every_type_item();
	st_put_req put = {.table = "things", .item = &item};
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	ck_assert_int_eq(wire_put_req_to_pb(&tl_arena, &put, &req.put_item, tl_msg), SHOAL_OK);
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, &req.base, &buf, &len, tl_msg), SHOAL_OK);
	/* Fail the n-th allocation for n = 1, 2, ... until unpacking succeeds. */
	int n;
	for (n = 1; n < 1000; n++) {
		Shoal__Request *got;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = wire_unpack_request(NULL, buf, len, &got, tl_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		if (!fired) {
			ck_assert_int_eq(rc, SHOAL_OK);
			wire_free_request(NULL, got);
			break;
		}
		ck_assert_int_eq(rc, SHOAL_E_NOMEM);
		ck_assert_ptr_null(got);
	}
	ck_assert_int_gt(n, 5);
	ck_assert_int_lt(n, 1000);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Data-plane requests                                                       */
/* ------------------------------------------------------------------------ */

static Shoal__PutItemRequest *put_pb(const char *table, st_value *item)
{
	Shoal__PutItemRequest *p = sh_arena_alloc(&tl_arena, sizeof(*p));
	shoal__put_item_request__init(p);
	if (table != NULL)
		WIRE_SET(p, table_name, (char *)table);
	if (item != NULL)
		ck_assert_int_eq(wire_item_to_pb(&tl_arena, item, &p->item, tl_msg), SHOAL_OK);
	return p;
}

START_TEST(test_put_validation)
{
	st_put_req out;
	st_value item = MAP(1, "pk", S("a"));
	Shoal__PutItemRequest *p = put_pb(NULL, &item);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "1 validation error detected: Value null at 'tableName' failed to "
	                         "satisfy constraint: Member must not be null");

	p = put_pb("a!", NULL);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "3 validation errors detected: Value 'a!' at 'tableName' failed to "
	                 "satisfy constraint: Member must satisfy regular expression pattern: "
	                 "[a-zA-Z0-9_.-]+; Value 'a!' at 'tableName' failed to satisfy "
	                 "constraint: Member must have length greater than or equal to 3; "
	                 "Value null at 'item' failed to satisfy constraint: Member must not be "
	                 "null");

	char long_name[300];
	memset(long_name, 'x', 256);
	long_name[256] = '\0';
	p = put_pb(long_name, &item);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(tl_msg, "Member must have length less than or equal to 255") != NULL,
	              "%s", tl_msg);

	p = put_pb("things", &item);
	WIRE_SET(p, return_values, "FOO");
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'FOO' at 'returnValues' failed "
	                 "to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, "
	                 "UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]");
	WIRE_SET(p, return_values, "ALL_NEW");
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ReturnValues can only be ALL_OLD or NONE");
	WIRE_SET(p, return_values, "ALL_OLD");
	WIRE_SET(p, return_consumed_capacity, "ALL");
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'ALL' at "
	                 "'returnConsumedCapacity' failed to satisfy constraint: Member must "
	                 "satisfy enum value set: [INDEXES, TOTAL, NONE]");
	WIRE_CLEAR(p, return_consumed_capacity);

	/* Expression parameters without expressions. */
	st_value names = MAP(1, "#n", S("name"));
	ck_assert_int_eq(
	    wire_names_to_pb(&tl_arena, &names, &p->expression_attribute_names, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ExpressionAttributeNames can only be specified when using "
	                         "expressions");
	p->expression_attribute_names = NULL;
	st_value values = MAP(1, ":v", N("01"));
	ck_assert_int_eq(
	    wire_item_to_pb(&tl_arena, &values, &p->expression_attribute_values, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ExpressionAttributeValues can only be specified when using "
	                         "expressions: ConditionExpression is null");

	/* A valid one: values normalised, condition copied, "" kept as "". */
	WIRE_SET(p, condition_expression, "");
	WIRE_SET(p, return_values_on_condition_check_failure, "ALL_OLD");
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_OK);
	ck_assert_str_eq(out.table, "things");
	ck_assert_str_eq(out.condition, "");
	ck_assert_int_eq(out.return_values, ST_RV_ALL_OLD);
	ck_assert(out.return_old_on_condition_fail);
	ck_assert_int_eq(out.attrs.values->u.map.a[0].value.type, ST_N);
	ck_assert_uint_eq(out.attrs.values->u.map.a[0].value.u.str.len, 1); /* "01" -> "1" */
	ck_assert_ptr_null(out.attrs.names);

	/* Invalid values carry DynamoDB's prefix. */
	values = MAP(1, ":v", N("x1"));
	ck_assert_int_eq(
	    wire_item_to_pb(&tl_arena, &values, &p->expression_attribute_values, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_msg(strncmp(tl_msg, "ExpressionAttributeValues contains invalid value: ", 50) ==
	                  0,
	              "%s", tl_msg);
	ck_assert_msg(strstr(tl_msg, " for key :v") != NULL, "%s", tl_msg);

	/* An item value the normaliser refuses. */
	st_value bad = MAP(1, "s", LIST(ST_SS, 0));
	p = put_pb("things", &bad);
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, p, &out, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: An string set  may not "
	                 "be empty");
}
END_TEST

START_TEST(test_write_round_trips)
{
	st_value item = every_type_item();
	st_value names = MAP(2, "#b", S("b"), "#a", S("a"));
	st_value values = MAP(1, ":one", N("1"));
	st_value key = MAP(1, "pk", S("user#1"));
	char e[SH_ERRMSG_SIZE];

	st_put_req put = {.table = "things",
	                  .item = &item,
	                  .condition = "attribute_not_exists(#a) AND #b <> :one",
	                  .attrs = {&names, &values},
	                  .return_values = ST_RV_ALL_OLD,
	                  .return_old_on_condition_fail = true};
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	ck_assert_int_eq(wire_put_req_to_pb(&tl_arena, &put, &req.put_item, tl_msg), SHOAL_OK);
	Shoal__Request *got = round_trip(&req);
	st_put_req p2;
	ck_assert_int_eq(wire_put_req_from_pb(&tl_arena, got->put_item, &p2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_str_eq(p2.table, put.table);
	ck_assert_str_eq(p2.condition, put.condition);
	ck_assert_int_eq(p2.return_values, ST_RV_ALL_OLD);
	ck_assert(p2.return_old_on_condition_fail);
	/* Values come back normalised: compare with the normalised originals. */
	st_value norm;
	ck_assert_int_eq(st_value_copy(&tl_arena, &item, &norm), SHOAL_OK);
	ck_assert_int_eq(st_value_normalize(&tl_arena, &norm, e), SHOAL_OK);
	ck_assert(tl_same(&norm, p2.item));
	ck_assert_int_eq(st_value_normalize(&tl_arena, &names, e), SHOAL_OK);
	ck_assert(tl_same(&names, p2.attrs.names));
	ck_assert(tl_same(&values, p2.attrs.values));

	st_update_req upd = {.table = "things",
	                     .key = &key,
	                     .update = "SET #a = :one",
	                     .attrs = {&names, &values},
	                     .return_values = ST_RV_UPDATED_NEW};
	req.op_case = SHOAL__REQUEST__OP_UPDATE_ITEM;
	ck_assert_int_eq(wire_update_req_to_pb(&tl_arena, &upd, &req.update_item, tl_msg),
	                 SHOAL_OK);
	got = round_trip(&req);
	st_update_req u2;
	ck_assert_int_eq(wire_update_req_from_pb(&tl_arena, got->update_item, &u2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_str_eq(u2.update, upd.update);
	ck_assert_ptr_null(u2.condition);
	ck_assert_int_eq(u2.return_values, ST_RV_UPDATED_NEW);
	ck_assert(!u2.return_old_on_condition_fail);
	ck_assert(tl_same(&key, u2.key));

	st_delete_req del = {.table = "things", .key = &key, .return_values = ST_RV_ALL_OLD};
	req.op_case = SHOAL__REQUEST__OP_DELETE_ITEM;
	ck_assert_int_eq(wire_delete_req_to_pb(&tl_arena, &del, &req.delete_item, tl_msg),
	                 SHOAL_OK);
	got = round_trip(&req);
	st_delete_req d2;
	ck_assert_int_eq(wire_delete_req_from_pb(&tl_arena, got->delete_item, &d2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_str_eq(d2.table, "things");
	ck_assert_ptr_null(d2.condition);
	ck_assert_ptr_null(d2.attrs.names);
	ck_assert_ptr_null(d2.attrs.values);
	ck_assert_int_eq(d2.return_values, ST_RV_ALL_OLD);

	st_get_req get = {.table = "things", .key = &key, .projection = "#a", .names = &names};
	req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	ck_assert_int_eq(wire_get_req_to_pb(&tl_arena, &get, &req.get_item, tl_msg), SHOAL_OK);
	got = round_trip(&req);
	st_get_req g2;
	ck_assert_int_eq(wire_get_req_from_pb(&tl_arena, got->get_item, &g2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_str_eq(g2.projection, "#a");
	ck_assert(tl_same(&names, g2.names));
	ck_assert(tl_same(&key, g2.key));
}
END_TEST

START_TEST(test_update_delete_get_validation)
{
	st_update_req u;
	Shoal__UpdateItemRequest up = SHOAL__UPDATE_ITEM_REQUEST__INIT;
	WIRE_SET(&up, table_name, "things");
	ck_assert_int_eq(wire_update_req_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value null at 'key' failed to satisfy "
	                 "constraint: Member must not be null");
	st_value key = MAP(1, "pk", S("a"));
	ck_assert_int_eq(wire_item_to_pb(&tl_arena, &key, &up.key, tl_msg), SHOAL_OK);
	st_value values = MAP(1, ":v", N("1"));
	ck_assert_int_eq(
	    wire_item_to_pb(&tl_arena, &values, &up.expression_attribute_values, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_update_req_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ExpressionAttributeValues can only be specified when using "
	                         "expressions: UpdateExpression and ConditionExpression are null");
	WIRE_SET(&up, update_expression, "SET a = :v");
	WIRE_SET(&up, return_values, "UPDATED_OLD");
	ck_assert_int_eq(wire_update_req_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_OK);
	ck_assert_int_eq(u.return_values, ST_RV_UPDATED_OLD);
	WIRE_SET(&up, return_values_on_condition_check_failure, "ALL_NEW");
	ck_assert_int_eq(wire_update_req_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'ALL_NEW' at "
	                 "'returnValuesOnConditionCheckFailure' failed to satisfy constraint: "
	                 "Member must satisfy enum value set: [ALL_OLD, NONE]");

	st_delete_req d;
	Shoal__DeleteItemRequest dp = SHOAL__DELETE_ITEM_REQUEST__INIT;
	WIRE_SET(&dp, table_name, "things");
	dp.key = up.key;
	WIRE_SET(&dp, return_values, "UPDATED_NEW");
	ck_assert_int_eq(wire_delete_req_from_pb(&tl_arena, &dp, &d, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ReturnValues can only be ALL_OLD or NONE");
	WIRE_CLEAR(&dp, return_values);
	WIRE_SET(&dp, return_item_collection_metrics, "FULL");
	ck_assert_int_eq(wire_delete_req_from_pb(&tl_arena, &dp, &d, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'FULL' at "
	                 "'returnItemCollectionMetrics' failed to satisfy constraint: Member "
	                 "must satisfy enum value set: [SIZE, NONE]");

	st_get_req g;
	Shoal__GetItemRequest gp = SHOAL__GET_ITEM_REQUEST__INIT;
	WIRE_SET(&gp, table_name, "");
	ck_assert_int_eq(wire_get_req_from_pb(&tl_arena, &gp, &g, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "3 validation errors detected: Value '' at 'tableName' failed to "
	                 "satisfy constraint: Member must satisfy regular expression pattern: "
	                 "[a-zA-Z0-9_.-]+; Value '' at 'tableName' failed to satisfy "
	                 "constraint: Member must have length greater than or equal to 3; Value "
	                 "null at 'key' failed to satisfy constraint: Member must not be null");
	/* A key with a duplicate attribute. */
	st_value dup = MAP(2, "pk", S("a"), "pk", S("b"));
	WIRE_SET(&gp, table_name, "things");
	ck_assert_int_eq(wire_item_to_pb(&tl_arena, &dup, &gp.key, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_get_req_from_pb(&tl_arena, &gp, &g, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: Duplicate attribute "
	                         "name: pk");
}
END_TEST

START_TEST(test_query_scan)
{
	st_query_req q;
	Shoal__QueryRequest qp = SHOAL__QUERY_REQUEST__INIT;
	WIRE_SET(&qp, table_name, "things");
	WIRE_SET(&qp, limit, 0);
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value '0' at 'limit' failed to satisfy "
	                 "constraint: Member must have value greater than or equal to 1");
	WIRE_SET(&qp, limit, 10);
	WIRE_SET(&qp, select, "SOME");
	WIRE_SET(&qp, index_name, "ix");
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "2 validation errors detected: Value 'SOME' at 'select' failed to "
	                 "satisfy constraint: Member must satisfy enum value set: "
	                 "[SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]; "
	                 "Value 'ix' at 'indexName' failed to satisfy constraint: Member must "
	                 "have length greater than or equal to 3");
	WIRE_SET(&qp, select, "COUNT");
	WIRE_SET(&qp, index_name, "by-date");
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "Either the KeyConditions or KeyConditionExpression parameter must "
	                 "be specified in the request.");
	WIRE_SET(&qp, key_condition_expression, "pk = :p");
	st_value esk = MAP(1, "pk", LIST(ST_SS, 0));
	ck_assert_int_eq(wire_item_to_pb(&tl_arena, &esk, &qp.exclusive_start_key, tl_msg),
	                 SHOAL_OK);
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "The provided starting key is invalid: One or more parameter values "
	                 "were invalid: An string set  may not be empty");
	qp.exclusive_start_key = NULL;
	/* Defaults: ScanIndexForward absent means true, Limit absent means none. */
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_OK);
	ck_assert(q.forward);
	ck_assert_uint_eq(q.limit, 10);
	ck_assert_int_eq(q.select, ST_SELECT_COUNT);
	ck_assert_str_eq(q.index, "by-date");
	ck_assert_str_eq(q.key_condition, "pk = :p");
	WIRE_SET(&qp, scan_index_forward, 0);
	WIRE_CLEAR(&qp, limit);
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, &qp, &q, tl_msg), SHOAL_OK);
	ck_assert(!q.forward);
	ck_assert_uint_eq(q.limit, 0);

	/* Round trip through the wire. */
	st_value values = MAP(1, ":p", S("x"));
	st_value start = MAP(2, "pk", S("x"), "sk", N("5"));
	st_query_req qr = {.table = "things",
	                   .index = "by-date",
	                   .key_condition = "pk = :p",
	                   .filter = "attribute_exists(sk)",
	                   .attrs = {NULL, &values},
	                   .forward = false,
	                   .limit = 25,
	                   .select = ST_SELECT_ALL_PROJECTED_ATTRIBUTES,
	                   .exclusive_start_key = &start,
	                   .consistent = true};
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_QUERY;
	ck_assert_int_eq(wire_query_req_to_pb(&tl_arena, &qr, &req.query, tl_msg), SHOAL_OK);
	Shoal__Request *got = round_trip(&req);
	char e[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_query_req_from_pb(&tl_arena, got->query, &q, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_str_eq(q.filter, qr.filter);
	ck_assert(!q.forward);
	ck_assert(q.consistent);
	ck_assert_uint_eq(q.limit, 25);
	ck_assert_int_eq(q.select, ST_SELECT_ALL_PROJECTED_ATTRIBUTES);
	ck_assert(tl_same(&start, q.exclusive_start_key));
	ck_assert_ptr_null(q.projection);

	/* Scan: segments. */
	st_scan_req s;
	Shoal__ScanRequest sp = SHOAL__SCAN_REQUEST__INIT;
	WIRE_SET(&sp, table_name, "things");
	WIRE_SET(&sp, segment, 0);
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "The TotalSegments parameter is required but was not present in the "
	                 "request when Segment parameter is present");
	WIRE_CLEAR(&sp, segment);
	WIRE_SET(&sp, total_segments, 4);
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "The Segment parameter is required but was not present in the "
	                         "request when parameter TotalSegments is present");
	WIRE_SET(&sp, segment, 4);
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "The Segment parameter is zero-based and must be less than "
	                 "parameter TotalSegments: Segment: 4 is not less than TotalSegments: "
	                 "4");
	WIRE_SET(&sp, segment, -1);
	WIRE_SET(&sp, total_segments, 1000001);
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "2 validation errors detected: Value '1000001' at 'totalSegments' "
	                 "failed to satisfy constraint: Member must have value less than or "
	                 "equal to 1000000; Value '-1' at 'segment' failed to satisfy "
	                 "constraint: Member must have value greater than or equal to 0");
	WIRE_SET(&sp, segment, 3);
	WIRE_SET(&sp, total_segments, 4);
	ck_assert_int_eq(
	    wire_item_to_pb(&tl_arena, &values, &sp.expression_attribute_values, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "ExpressionAttributeValues can only be specified when using "
	                         "expressions: FilterExpression is null");
	WIRE_SET(&sp, filter_expression, "a = :p");
	sp.hash_lo = 5;
	sp.hash_hi = 99;
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, &sp, &s, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(s.segment, 3);
	ck_assert_uint_eq(s.total_segments, 4);
	ck_assert_uint_eq(s.hash_lo, 5);
	ck_assert_uint_eq(s.hash_hi, 99);
	ck_assert_uint_eq(s.limit, 0);
	ck_assert_int_eq(s.select, ST_SELECT_DEFAULT);

	req.op_case = SHOAL__REQUEST__OP_SCAN;
	ck_assert_int_eq(wire_scan_req_to_pb(&tl_arena, &s, &req.scan, tl_msg), SHOAL_OK);
	got = round_trip(&req);
	st_scan_req s2;
	ck_assert_int_eq(wire_scan_req_from_pb(&tl_arena, got->scan, &s2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_uint_eq(s2.segment, 3);
	ck_assert_uint_eq(s2.total_segments, 4);
	ck_assert_uint_eq(s2.hash_hi, 99);
	ck_assert_str_eq(s2.filter, "a = :p");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

static Shoal__KeySchemaElement *kse(const char *name, const char *type)
{
	Shoal__KeySchemaElement *k = sh_arena_alloc(&tl_arena, sizeof(*k));
	shoal__key_schema_element__init(k);
	k->attribute_name = (char *)name;
	k->key_type = (char *)type;
	return k;
}

static Shoal__AttributeDefinition *adef(const char *name, const char *type)
{
	Shoal__AttributeDefinition *d = sh_arena_alloc(&tl_arena, sizeof(*d));
	shoal__attribute_definition__init(d);
	d->attribute_name = (char *)name;
	d->attribute_type = (char *)type;
	return d;
}

/* A CreateTable request for table "things" (pk S, sk N) with n_defs of the
 * given definitions. */
static Shoal__CreateTableRequest *create_pb(Shoal__AttributeDefinition **defs, size_t n_defs,
                                            Shoal__KeySchemaElement **ks, size_t n_ks)
{
	Shoal__CreateTableRequest *c = sh_arena_alloc(&tl_arena, sizeof(*c));
	shoal__create_table_request__init(c);
	WIRE_SET(c, table_name, "things");
	c->attribute_definitions = defs;
	c->n_attribute_definitions = n_defs;
	c->key_schema = ks;
	c->n_key_schema = n_ks;
	return c;
}

START_TEST(test_create_table)
{
	st_table_def def;
	Shoal__AttributeDefinition *defs[] = {adef("pk", "S"), adef("sk", "N"), adef("g", "B")};
	Shoal__KeySchemaElement *ks[] = {kse("pk", "HASH"), kse("sk", "RANGE")};
	Shoal__CreateTableRequest *c = create_pb(defs, 2, ks, 2);

	WIRE_CLEAR(c, table_name);
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "The parameter 'TableName' is required but was not present in the "
	                         "request");
	WIRE_SET(c, table_name, "ab");
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TableName must be at least 3 characters long and at most 255 "
	                         "characters long");
	WIRE_SET(c, table_name, "things");

	ks[1]->key_type = "SORT";
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'SORT' at "
	                 "'keySchema.2.member.keyType' failed to satisfy constraint: Member "
	                 "must satisfy enum value set: [HASH, RANGE]");
	ks[1]->key_type = "HASH";
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "Invalid KeySchema: The second KeySchemaElement is not a RANGE key "
	                 "type");
	ks[1]->key_type = "RANGE";
	ks[0]->key_type = "RANGE";
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Invalid KeySchema: The first KeySchemaElement is not a HASH key "
	                         "type");
	ks[0]->key_type = "HASH";

	c->n_attribute_definitions = 1;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Invalid KeySchema: Some index key attribute have no definition");
	Shoal__AttributeDefinition *other[] = {adef("pk", "S"), adef("x", "S")};
	c->attribute_definitions = other;
	c->n_attribute_definitions = 2;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: Some index key "
	                 "attributes are not defined in AttributeDefinitions. Keys: [pk, sk], "
	                 "AttributeDefinitions: [pk, x]");
	c->attribute_definitions = defs;
	c->n_attribute_definitions = 3;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: Number of attributes in "
	                 "KeySchema does not exactly match number of attributes defined in "
	                 "AttributeDefinitions");

	/* With a GSI on g (sharded) and an LSI on g. */
	Shoal__GlobalSecondaryIndex gsi = SHOAL__GLOBAL_SECONDARY_INDEX__INIT;
	Shoal__KeySchemaElement *gks[] = {kse("g", "HASH"), kse("sk", "RANGE")};
	Shoal__Projection proj = SHOAL__PROJECTION__INIT;
	gsi.index_name = "by-g";
	gsi.key_schema = gks;
	gsi.n_key_schema = 2;
	gsi.projection = &proj;
	gsi.write_shards = 8;
	Shoal__GlobalSecondaryIndex *gsis[] = {&gsi};
	c->global_secondary_indexes = gsis;
	c->n_global_secondary_indexes = 1;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: Unknown ProjectionType: "
	                 "null");
	proj.projection_type = "KEYS_ONLY";
	char *inc[] = {"a"};
	proj.non_key_attributes = inc;
	proj.n_non_key_attributes = 1;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: ProjectionType is "
	                         "KEYS_ONLY, but NonKeyAttributes is specified");
	proj.projection_type = "INCLUDE";
	/* An empty name: refused here, not one Raft entry later by group 0. */
	inc[0] = "";
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: NonKeyAttributes must "
	                         "not contain an empty name");
	inc[0] = "a";

	Shoal__LocalSecondaryIndex lsi = SHOAL__LOCAL_SECONDARY_INDEX__INIT;
	Shoal__KeySchemaElement *lks[] = {kse("g", "HASH"), kse("g2", "RANGE")};
	Shoal__Projection lproj = SHOAL__PROJECTION__INIT;
	lproj.projection_type = "ALL";
	lsi.index_name = "by-g2";
	lsi.key_schema = lks;
	lsi.n_key_schema = 2;
	lsi.projection = &lproj;
	Shoal__LocalSecondaryIndex *lsis[] = {&lsi};
	c->local_secondary_indexes = lsis;
	c->n_local_secondary_indexes = 1;
	Shoal__AttributeDefinition *defs4[] = {adef("pk", "S"), adef("sk", "N"), adef("g", "B"),
	                                       adef("g2", "S")};
	c->attribute_definitions = defs4;
	c->n_attribute_definitions = 4;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: Index KeySchema does not "
	                 "have the same leading hash key as table KeySchema for index: by-g2. "
	                 "index hash key: g, table hash key: pk");
	lks[0]->attribute_name = "pk";
	WIRE_SET(c, billing_mode, "PAY_PER_REQUEST");
	Shoal__ProvisionedThroughput tp = SHOAL__PROVISIONED_THROUGHPUT__INIT;
	tp.read_capacity_units = 5;
	tp.write_capacity_units = 5;
	c->provisioned_throughput = &tp;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: Neither "
	                         "ReadCapacityUnits nor WriteCapacityUnits can be specified when "
	                         "BillingMode is PAY_PER_REQUEST");
	c->provisioned_throughput = NULL;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_OK);

	ck_assert_str_eq(def.name, "things");
	ck_assert_str_eq(def.key.hash.name, "pk");
	ck_assert_int_eq(def.key.hash.type, ST_S);
	ck_assert_str_eq(def.key.range.name, "sk");
	ck_assert_int_eq(def.key.range.type, ST_N);
	ck_assert_uint_eq(def.n_attrs, 4);
	ck_assert_uint_eq(def.n_indexes, 2);
	ck_assert_str_eq(def.indexes[0].name, "by-g2");
	ck_assert(def.indexes[0].local);
	ck_assert_int_eq(def.indexes[0].key.range.type, ST_S);
	ck_assert_int_eq(def.indexes[0].projection, ST_PROJ_ALL);
	ck_assert_str_eq(def.indexes[1].name, "by-g");
	ck_assert(!def.indexes[1].local);
	ck_assert_int_eq(def.indexes[1].key.hash.type, ST_B);
	ck_assert_uint_eq(def.indexes[1].write_shards, 8);
	ck_assert_int_eq(def.indexes[1].projection, ST_PROJ_INCLUDE);
	ck_assert_uint_eq(def.indexes[1].n_include, 1);
	ck_assert_str_eq(def.indexes[1].include[0], "a");

	/* An unused definition. */
	Shoal__AttributeDefinition *defs5[] = {adef("pk", "S"), adef("sk", "N"), adef("g", "B"),
	                                       adef("g2", "S"), adef("zz", "S")};
	c->attribute_definitions = defs5;
	c->n_attribute_definitions = 5;
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "One or more parameter values were invalid: Some AttributeDefinitions "
	                 "are not used. AttributeDefinitions: [pk, sk, g, g2, zz], keys used: "
	                 "[pk, sk, g, g2]");
	c->n_attribute_definitions = 4;

	/* Round trip: st_table_def -> CreateTable -> wire -> st_table_def. */
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, c, &def, tl_msg), SHOAL_OK);
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_CREATE_TABLE;
	ck_assert_int_eq(wire_create_table_to_pb(&tl_arena, &def, &req.create_table, tl_msg),
	                 SHOAL_OK);
	Shoal__Request *got = round_trip(&req);
	st_table_def d2;
	char e[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_create_table_from_pb(&tl_arena, got->create_table, &d2, e), SHOAL_OK);
	wire_free_request(NULL, got);
	ck_assert_uint_eq(d2.n_indexes, 2);
	ck_assert_uint_eq(d2.indexes[1].write_shards, 8);
	ck_assert_str_eq(d2.indexes[1].include[0], "a");
	ck_assert_str_eq(d2.indexes[0].key.range.name, "g2");

	/* A table description of it, through the wire and back. */
	st_table_info info = {.def = def, .item_count = 12, .size_bytes = 3400};
	info.def.id = 7;
	info.def.created_ms = 1700000000123;
	info.def.indexes[1].status = ST_INDEX_CREATING;
	Shoal__TableDescription *td;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &td, tl_msg), SHOAL_OK);
	ck_assert_str_eq(td->table_arn, "arn:aws:dynamodb:shoal:000000000000:table/things");
	ck_assert_str_eq(td->global_secondary_indexes[0]->index_status, "CREATING");
	ck_assert(td->global_secondary_indexes[0]->backfilling);
	ck_assert_str_eq(td->billing_mode_summary->billing_mode, "PAY_PER_REQUEST");
	Shoal__Response resp = SHOAL__RESPONSE__INIT;
	Shoal__DescribeTableResponse dr = SHOAL__DESCRIBE_TABLE_RESPONSE__INIT;
	dr.table = td;
	resp.result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE;
	resp.describe_table = &dr;
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, &resp.base, &buf, &len, tl_msg), SHOAL_OK);
	Shoal__Response *rgot;
	ck_assert_int_eq(wire_unpack_response(NULL, buf, len, &rgot, tl_msg), SHOAL_OK);
	st_table_info back;
	const char *status;
	ck_assert_int_eq(
	    wire_table_desc_from_pb(&tl_arena, rgot->describe_table->table, &back, &status, tl_msg),
	    SHOAL_OK);
	wire_free_response(NULL, rgot);
	ck_assert_str_eq(status, "ACTIVE");
	ck_assert_uint_eq(back.item_count, 12);
	ck_assert_uint_eq(back.size_bytes, 3400);
	/* TableId is a UUID (version 5, RFC 4122 variant), not the number */
	ck_assert_uint_eq(back.def.id, 0);
	ck_assert_uint_eq(strlen(td->table_id), 36);
	ck_assert(td->table_id[14] == '5' && strchr("89ab", td->table_id[19]) != NULL);
	ck_assert(td->table_id[8] == '-' && td->table_id[13] == '-' && td->table_id[18] == '-' &&
	          td->table_id[23] == '-');
	ck_assert_int_eq(back.def.created_ms, 1700000000123);
	ck_assert_int_eq(back.def.key.range.type, ST_N);
	ck_assert_uint_eq(back.def.n_indexes, 2);
	ck_assert_uint_eq(back.def.n_attrs, 4);
	ck_assert_int_eq(back.def.indexes[1].status, ST_INDEX_CREATING);
	ck_assert_uint_eq(back.def.indexes[1].write_shards, 8);
	ck_assert_int_eq(back.def.indexes[1].key.hash.type, ST_B);
	ck_assert_str_eq(back.def.indexes[0].name, "by-g2");
}
END_TEST

START_TEST(test_table_ops)
{
	const char *name;
	Shoal__DescribeTableRequest dt = SHOAL__DESCRIBE_TABLE_REQUEST__INIT;
	ck_assert_int_eq(wire_describe_table_from_pb(&tl_arena, &dt, &name, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "The parameter 'TableName' is required but was not present in the "
	                         "request");
	WIRE_SET(&dt, table_name, "x");
	ck_assert_int_eq(wire_describe_table_from_pb(&tl_arena, &dt, &name, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "TableName must be at least 3 characters long and at most 255 "
	                         "characters long");
	WIRE_SET(&dt, table_name, "bad name");
	ck_assert_int_eq(wire_describe_table_from_pb(&tl_arena, &dt, &name, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'bad name' at 'tableName' "
	                 "failed to satisfy constraint: Member must satisfy regular expression "
	                 "pattern: [a-zA-Z0-9_.-]+");
	WIRE_SET(&dt, table_name, "Good.Name_1-2");
	ck_assert_int_eq(wire_describe_table_from_pb(&tl_arena, &dt, &name, tl_msg), SHOAL_OK);
	ck_assert_str_eq(name, "Good.Name_1-2");

	Shoal__DeleteTableRequest del = SHOAL__DELETE_TABLE_REQUEST__INIT;
	WIRE_SET(&del, table_name, "things");
	ck_assert_int_eq(wire_delete_table_from_pb(&tl_arena, &del, &name, tl_msg), SHOAL_OK);
	ck_assert_str_eq(name, "things");

	Shoal__ListTablesRequest lt = SHOAL__LIST_TABLES_REQUEST__INIT;
	const char *start;
	uint32_t limit;
	ck_assert_int_eq(wire_list_tables_from_pb(&tl_arena, &lt, &start, &limit, tl_msg),
	                 SHOAL_OK);
	ck_assert_ptr_null(start);
	ck_assert_uint_eq(limit, 100);
	WIRE_SET(&lt, limit, 101);
	ck_assert_int_eq(wire_list_tables_from_pb(&tl_arena, &lt, &start, &limit, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value '101' at 'limit' failed to "
	                 "satisfy constraint: Member must have value less than or equal to 100");
	WIRE_SET(&lt, limit, 3);
	WIRE_SET(&lt, exclusive_start_table_name, "abc");
	ck_assert_int_eq(wire_list_tables_from_pb(&tl_arena, &lt, &start, &limit, tl_msg),
	                 SHOAL_OK);
	ck_assert_str_eq(start, "abc");
	ck_assert_uint_eq(limit, 3);

	const char *names[] = {"abc", "def"};
	Shoal__ListTablesResponse *lr;
	ck_assert_int_eq(wire_list_tables_resp_to_pb(&tl_arena, names, 2, "def", &lr, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(lr->n_table_names, 2);
	ck_assert_str_eq(lr->table_names[1], "def");
	ck_assert_str_eq(lr->last_evaluated_table_name, "def");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_responses)
{
	st_value items[2] = {MAP(2, "pk", S("a"), "n", N("1")), MAP(1, "pk", S("b"))};
	st_value last = MAP(1, "pk", S("b"));
	st_page page = {.items = items, .count = 2, .scanned = 5, .last_evaluated_key = &last};
	Shoal__Response resp = SHOAL__RESPONSE__INIT;
	resp.request_id = 9;
	resp.result_case = SHOAL__RESPONSE__RESULT_QUERY;
	ck_assert_int_eq(wire_query_resp_to_pb(&tl_arena, &page, &resp.query, tl_msg), SHOAL_OK);
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, &resp.base, &buf, &len, tl_msg), SHOAL_OK);
	Shoal__Response *got;
	ck_assert_int_eq(wire_unpack_response(NULL, buf, len, &got, tl_msg), SHOAL_OK);
	st_page back;
	ck_assert_int_eq(wire_query_resp_from_pb(&tl_arena, got->query, &back, tl_msg), SHOAL_OK);
	wire_free_response(NULL, got);
	ck_assert_uint_eq(back.count, 2);
	ck_assert_uint_eq(back.scanned, 5);
	ck_assert(tl_same(&items[0], &back.items[0]));
	ck_assert(tl_same(&items[1], &back.items[1]));
	ck_assert(tl_same(&last, back.last_evaluated_key));

	/* Select COUNT: no items, a count, range exhausted. */
	st_page counted = {.items = NULL, .count = 7, .scanned = 9};
	Shoal__ScanResponse *sr;
	ck_assert_int_eq(wire_scan_resp_to_pb(&tl_arena, &counted, &sr, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(sr->n_items, 0);
	ck_assert_ptr_null(sr->last_evaluated_key);
	ck_assert_int_eq(wire_scan_resp_from_pb(&tl_arena, sr, &back, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(back.count, 7);
	ck_assert_ptr_null(back.items);
	ck_assert_ptr_null(back.last_evaluated_key);

	/* Get without an item; writes with and without attributes. */
	Shoal__GetItemResponse *gr;
	ck_assert_int_eq(wire_get_item_resp_to_pb(&tl_arena, NULL, &gr, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(gr->item);
	st_write_result wr = {.attributes = heap(MAP(1, "pk", S("a")))};
	Shoal__UpdateItemResponse *ur;
	ck_assert_int_eq(wire_update_item_resp_to_pb(&tl_arena, &wr, &ur, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(ur->attributes->n_attrs, 1);
	Shoal__PutItemResponse *pr;
	st_write_result none = {0};
	ck_assert_int_eq(wire_put_item_resp_to_pb(&tl_arena, &none, &pr, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(pr->attributes);
	Shoal__DeleteItemResponse *dr;
	ck_assert_int_eq(wire_delete_item_resp_to_pb(&tl_arena, &wr, &dr, tl_msg), SHOAL_OK);
	ck_assert_ptr_nonnull(dr->attributes);

	/* A failure with the old item. */
	Shoal__Response err = SHOAL__RESPONSE__INIT;
	err.result_case = SHOAL__RESPONSE__RESULT_PUT_ITEM;
	err.put_item = pr;
	ck_assert_int_eq(wire_response_set_error(&tl_arena, &err, SHOAL_E_CONDITION_FAILED,
	                                         "The conditional request failed", wr.attributes,
	                                         tl_msg),
	                 SHOAL_OK);
	ck_assert_int_eq(err.result_case, SHOAL__RESPONSE__RESULT__NOT_SET);
	ck_assert_int_eq(wire_pack(&tl_arena, &err.base, &buf, &len, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_unpack_response(NULL, buf, len, &got, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_code_from_status(got->status), SHOAL_E_CONDITION_FAILED);
	ck_assert_str_eq(got->message, "The conditional request failed");
	st_value old;
	ck_assert_int_eq(wire_item_from_pb(&tl_arena, got->item, &old, tl_msg), SHOAL_OK);
	wire_free_response(NULL, got);
	ck_assert(tl_same(wr.attributes, &old));
	/* Other errors carry no item. */
	ck_assert_int_eq(wire_response_set_error(&tl_arena, &err, SHOAL_E_VALIDATION, "bad",
	                                         wr.attributes, tl_msg),
	                 SHOAL_OK);
	ck_assert_ptr_null(err.item);
	ck_assert_int_eq(err.status, SHOAL__STATUS__STATUS_VALIDATION);
}
END_TEST

/* ARNs, TableId, and the tag operations' requests. */
START_TEST(test_table_meta)
{
	const char *name;
	/* The ARN a description gives names its table; any region and
	 * account; an index's ARN, or anything else, is not a table ARN. */
	ck_assert_int_eq(wire_table_arn_parse(&tl_arena,
	                                      "arn:aws:dynamodb:shoal:000000000000:table/Things",
	                                      &name, tl_msg),
	                 SHOAL_OK);
	ck_assert_str_eq(name, "Things");
	ck_assert_int_eq(
	    wire_table_arn_parse(&tl_arena, "arn:aws:dynamodb:us-east-1:123456789012:table/a.b-c_d",
	                         &name, tl_msg),
	    SHOAL_OK);
	ck_assert_str_eq(name, "a.b-c_d");
	ck_assert_int_eq(wire_table_arn_parse(&tl_arena, NULL, &name, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Invalid TableArn");
	const char *bad[] = {"arn:aws:dynamodb:shoal:000000000000:table/Things/index/gsi",
	                     "I_do_not_exist",
	                     "arn:aws:s3:shoal:000000000000:table/Things",
	                     "arn:aws:dynamodb:shoal:000000000000:table/",
	                     "arn:aws:dynamodb:shoal:000000000000:table/x",
	                     "arn:aws:dynamodb:shoal:table/Things",
	                     "arn:aws:dynamodb:shoal:000000000000:stream/Things"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(wire_table_arn_parse(&tl_arena, bad[i], &name, tl_msg),
		                 SHOAL_E_VALIDATION);
		char want[300];
		snprintf(want, sizeof(want),
		         "Invalid TableArn: Invalid ResourceArn provided as input %s", bad[i]);
		ck_assert_str_eq(tl_msg, want);
	}

	/* TableId: the same for the same table, another for a table created
	 * again under the same name. */
	st_table_info info = {0};
	st_key_attr attrs[] = {{"pk", ST_S}};
	info.def.name = "Things";
	info.def.id = 3;
	info.def.created_ms = 1700000000000;
	info.def.key.hash = attrs[0];
	info.def.attrs = attrs;
	info.def.n_attrs = 1;
	Shoal__TableDescription *a, *b, *c;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &a, tl_msg), SHOAL_OK);
	info.item_count = 99;
	info.def.deletion_protection = true;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &b, tl_msg), SHOAL_OK);
	info.def.id = 4;
	info.def.created_ms++;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &c, tl_msg), SHOAL_OK);
	ck_assert_str_eq(a->table_id, b->table_id);
	ck_assert_str_ne(a->table_id, c->table_id);
	ck_assert(!a->deletion_protection_enabled && b->deletion_protection_enabled);
	ck_assert_ptr_null(a->table_class_summary);
	info.def.table_class = ST_CLASS_STANDARD;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &c, tl_msg), SHOAL_OK);
	ck_assert_str_eq(c->table_class_summary->table_class, "STANDARD");
	ck_assert_int_eq(c->table_class_summary->last_update_date_time, 0);
	ck_assert_str_eq(c->table_arn, "arn:aws:dynamodb:shoal:000000000000:table/Things");

	/* The TableDefine every group and router reads carries the metadata. */
	st_tag tg[] = {{"team", "edu"}, {"empty", ""}};
	info.def.tags = tg;
	info.def.n_tags = 2;
	info.def.table_class = ST_CLASS_STANDARD_IA;
	info.def.class_changed_ms = 1700000000999;
	Shoal__TableDefine *tdp;
	ck_assert_int_eq(wire_table_define_to_pb(&tl_arena, &info.def, &tdp, tl_msg), SHOAL_OK);
	uint8_t *pk;
	size_t pkl;
	ck_assert_int_eq(wire_pack(&tl_arena, &tdp->base, &pk, &pkl, tl_msg), SHOAL_OK);
	Shoal__TableDefine *tdu = shoal__table_define__unpack(NULL, pkl, pk);
	ck_assert_ptr_nonnull(tdu);
	st_table_def back2;
	int rc2 = wire_table_define_from_pb(&tl_arena, tdu, &back2, tl_msg);
	ck_assert_msg(rc2 == SHOAL_OK, "%s", tl_msg);
	ck_assert(back2.deletion_protection);
	ck_assert_int_eq(back2.table_class, ST_CLASS_STANDARD_IA);
	ck_assert_int_eq(back2.class_changed_ms, 1700000000999);
	ck_assert_uint_eq(back2.n_tags, 2);
	ck_assert_str_eq(back2.tags[0].key, "team");
	ck_assert_str_eq(back2.tags[1].value, "");
	ck_assert_uint_eq(back2.id, 4);
	shoal__table_define__free_unpacked(tdu, NULL);
	info.def.n_tags = 0;
	info.def.table_class = ST_CLASS_STANDARD;

	/* TagResource. */
	Shoal__TagResourceRequest tr = SHOAL__TAG_RESOURCE_REQUEST__INIT;
	st_table_update_req u;
	ck_assert_int_eq(wire_tag_resource_from_pb(&tl_arena, &tr, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Invalid TableArn");
	WIRE_SET(&tr, resource_arn, (char *)c->table_arn);
	ck_assert_int_eq(wire_tag_resource_from_pb(&tl_arena, &tr, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Atleast one Tag needs to be provided as Input.");
	Shoal__Tag t1 = SHOAL__TAG__INIT, t2 = SHOAL__TAG__INIT;
	t1.key = "team";
	t1.value = "edu";
	t2.key = "aws:x";
	t2.value = "";
	Shoal__Tag *tags[] = {&t1, &t2};
	tr.tags = tags;
	tr.n_tags = 1;
	ck_assert_int_eq(wire_tag_resource_from_pb(&tl_arena, &tr, &u, tl_msg), SHOAL_OK);
	ck_assert_str_eq(u.name, "Things");
	ck_assert_uint_eq(u.n_tag_set, 1);
	ck_assert_str_eq(u.tag_set[0].value, "edu");
	tr.n_tags = 2;
	ck_assert_int_eq(wire_tag_resource_from_pb(&tl_arena, &tr, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(tl_msg, "aws: is reserved"));

	/* UntagResource. */
	Shoal__UntagResourceRequest ur = SHOAL__UNTAG_RESOURCE_REQUEST__INIT;
	WIRE_SET(&ur, resource_arn, "arn:aws:dynamodb:shoal:000000000000:table/Things/index/g");
	ck_assert_int_eq(wire_untag_resource_from_pb(&tl_arena, &ur, &u, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(tl_msg, "Invalid ResourceArn provided as input"));
	WIRE_SET(&ur, resource_arn, (char *)c->table_arn);
	ck_assert_int_eq(wire_untag_resource_from_pb(&tl_arena, &ur, &u, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Atleast one Tag Key needs to be provided as Input.");
	char *keys[] = {"team"};
	ur.tag_keys = keys;
	ur.n_tag_keys = 1;
	ck_assert_int_eq(wire_untag_resource_from_pb(&tl_arena, &ur, &u, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(u.n_tag_remove, 1);

	/* A TableUpdate carries one change. */
	Shoal__TableUpdate tu = SHOAL__TABLE_UPDATE__INIT;
	ck_assert_int_eq(wire_table_update_from_pb(&tl_arena, &tu, &u, tl_msg), SHOAL_E_VALIDATION);
	tu.untag = &ur;
	ck_assert_int_eq(wire_table_update_from_pb(&tl_arena, &tu, &u, tl_msg), SHOAL_OK);
	tu.tag = &tr;
	ck_assert_int_eq(wire_table_update_from_pb(&tl_arena, &tu, &u, tl_msg), SHOAL_E_VALIDATION);

	/* UpdateTable with only DeletionProtectionEnabled is a change. */
	Shoal__UpdateTableRequest up = SHOAL__UPDATE_TABLE_REQUEST__INIT;
	WIRE_SET(&up, table_name, "Things");
	ck_assert_int_eq(wire_update_table_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_E_VALIDATION);
	WIRE_SET(&up, deletion_protection_enabled, true);
	ck_assert_int_eq(wire_update_table_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_OK);
	ck_assert(u.set_deletion_protection && u.deletion_protection);
	WIRE_SET(&up, table_class, "GLACIER");
	ck_assert_int_eq(wire_update_table_from_pb(&tl_arena, &up, &u, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg,
	                 "1 validation error detected: Value 'GLACIER' at 'tableClass' "
	                 "failed to satisfy constraint: Member must satisfy enum value set: "
	                 "[STANDARD, STANDARD_INFREQUENT_ACCESS]");
	WIRE_CLEAR(&up, table_class);

	/* New indexes: INCLUDE names its attributes, each once. */
	Shoal__Projection proj = SHOAL__PROJECTION__INIT;
	proj.projection_type = "INCLUDE";
	Shoal__GlobalSecondaryIndex gsi = SHOAL__GLOBAL_SECONDARY_INDEX__INIT;
	gsi.projection = &proj;
	Shoal__GlobalSecondaryIndex *gsis[] = {&gsi};
	Shoal__CreateTableRequest ct = SHOAL__CREATE_TABLE_REQUEST__INIT;
	ct.global_secondary_indexes = gsis;
	ct.n_global_secondary_indexes = 1;
	ck_assert_int_eq(wire_create_table_check_new(&ct, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: ProjectionType is "
	                         "INCLUDE, but NonKeyAttributes is not specified");
	char *dups[] = {"a", "b", "a"};
	proj.non_key_attributes = dups;
	proj.n_non_key_attributes = 3;
	ck_assert_int_eq(wire_create_table_check_new(&ct, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: Duplicate attribute "
	                         "name in NonKeyAttributes: a");
	Shoal__GlobalSecondaryIndexUpdate gu = SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__INIT;
	gu.action_case = SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE;
	gu.create = &gsi;
	Shoal__GlobalSecondaryIndexUpdate *gus[] = {&gu};
	up.global_secondary_index_updates = gus;
	up.n_global_secondary_index_updates = 1;
	ck_assert_int_eq(wire_update_table_check_new(&up, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "One or more parameter values were invalid: Duplicate attribute "
	                         "name in NonKeyAttributes: a");
	proj.n_non_key_attributes = 2;
	ck_assert_int_eq(wire_create_table_check_new(&ct, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_update_table_check_new(&up, tl_msg), SHOAL_OK);
}
END_TEST

static Suite *wire_suite(void)
{
	return tl_suite(
	    "wire", tl_arena_setup, tl_arena_teardown, 60,
	    TL_TESTS(test_status_mirrors_errors, test_value_round_trip, test_value_from_pb_errors,
	             test_value_to_pb_errors, test_depth_limits, test_framing_errors,
	             test_unpack_out_of_memory, test_put_validation, test_write_round_trips,
	             test_update_delete_get_validation, test_query_scan, test_create_table,
	             test_table_ops, test_responses, test_table_meta));
}

TL_MAIN(wire_suite)
