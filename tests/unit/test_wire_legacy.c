/*
 * test_wire_legacy.c -- DynamoDB's legacy conditional parameters
 * (proto/wire_legacy.c): the expressions they become, what those
 * expressions decide on real items through storage's evaluator and update
 * engine, and every misuse with DynamoDB's exception and words.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/expr.h"
#include "tests/lib/testlib.h"

static sh_arena A;
static char msg[SH_ERRMSG_SIZE];
static json_t *pool[256];
static int npool;

static void setup(void)
{
	sh_arena_init(&A);
	msg[0] = '\0';
	npool = 0;
}

static void teardown(void)
{
	for (int i = 0; i < npool; i++)
		json_decref(pool[i]);
	npool = 0;
	sh_arena_fini(&A);
	sh_fault_reset();
}

static json_t *keep(json_t *j)
{
	ck_assert_int_lt(npool, (int)(sizeof(pool) / sizeof(pool[0])));
	pool[npool++] = j;
	return j;
}

/* The body text with ' for " parsed. */
static json_t *J(const char *text)
{
	char *t = sh_arena_strndup(&A, text, strlen(text));
	for (char *p = t; *p != '\0'; p++) {
		if (*p == '\'')
			*p = '"';
	}
	json_t *j;
	int rc = wire_json_parse(t, strlen(t), &j, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", t, msg);
	return keep(j);
}

static const char *dump(const json_t *j)
{
	char *out;
	ck_assert_int_eq(wire_json_dumps(&A, j, false, &out, msg), SHOAL_OK);
	return out;
}

static Shoal__Request *request(const char *op, const char *body)
{
	Shoal__Request *req;
	int rc = wire_api_request_from_json(&A, op, J(body), &req, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s %s: %s (%s)", op, body, msg, shoal_err_name(rc));
	return req;
}

/* The legacy body, converted and written back: the body with expressions
 * that a client would have sent (JSON compared, member order aside). */
static void translates(const char *op, const char *legacy, const char *want, int line)
{
	Shoal__Request *req = request(op, legacy);
	json_t *back;
	ck_assert_int_eq(wire_api_request_to_json(req, NULL, &back, msg), SHOAL_OK);
	keep(back);
	json_t *w = J(want);
	ck_assert_msg(json_equal(w, back), "line %d: %s\n want %s\n got  %s", line, legacy, dump(w),
	              dump(back));
}
#define TRANSLATES(op, legacy, want) translates(op, legacy, want, __LINE__)

START_TEST(test_translations)
{
	TRANSLATES("GetItem",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'AttributesToGet':['x','a.b']}",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'ProjectionExpression':'#legacy0, "
	           "#legacy1','ExpressionAttributeNames':{'#legacy0':'x','#legacy1':'a.b'}}");
	/* Exists/Value forms, AND by default, each in parentheses. */
	TRANSLATES(
	    "PutItem",
	    "{'TableName':'t1','Item':{'k':{'S':'a'}},'Expected':{'k':{'Exists':false},"
	    "'v':{'Value':{'N':'1'}},'w':{'Exists':true,'Value':{'S':'x'}}}}",
	    "{'TableName':'t1','Item':{'k':{'S':'a'}},'ConditionExpression':"
	    "'(attribute_not_exists(#legacy0)) AND (#legacy1 = :legacy0) AND (#legacy2 = "
	    ":legacy1)','ExpressionAttributeNames':{'#legacy0':'k','#legacy1':'v','#legacy2':"
	    "'w'},'ExpressionAttributeValues':{':legacy0':{'N':'1'},':legacy1':{'S':'x'}}}");
	/* One condition: no parentheses; ComparisonOperator with Value. */
	TRANSLATES("DeleteItem",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'Expected':{'n':{'ComparisonOperator':"
	           "'GT','Value':{'N':'5'}}}}",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'ConditionExpression':'#legacy0 > "
	           ":legacy0','ExpressionAttributeNames':{'#legacy0':'n'},"
	           "'ExpressionAttributeValues':{':legacy0':{'N':'5'}}}");
	/* Every operator, ORed. */
	TRANSLATES(
	    "Scan",
	    "{'TableName':'t1','ConditionalOperator':'OR','ScanFilter':{"
	    "'a':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'x'}]},"
	    "'b':{'ComparisonOperator':'NE','AttributeValueList':[{'N':'1'}]},"
	    "'c':{'ComparisonOperator':'LE','AttributeValueList':[{'N':'1'}]},"
	    "'d':{'ComparisonOperator':'LT','AttributeValueList':[{'N':'1'}]},"
	    "'e':{'ComparisonOperator':'GE','AttributeValueList':[{'N':'1'}]},"
	    "'f':{'ComparisonOperator':'GT','AttributeValueList':[{'N':'1'}]},"
	    "'g':{'ComparisonOperator':'NOT_NULL'},"
	    "'h':{'ComparisonOperator':'NULL','AttributeValueList':[]},"
	    "'i':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'x'}]},"
	    "'j':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'S':'x'}]},"
	    "'k':{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'S':'x'}]},"
	    "'l':{'ComparisonOperator':'IN','AttributeValueList':[{'N':'1'},{'N':'2'}]},"
	    "'m':{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'N':'1'},{'N':'2'}]}}}",
	    "{'TableName':'t1','FilterExpression':'(#legacy0 = :legacy0) OR (#legacy1 <> :legacy1) "
	    "OR (#legacy2 <= :legacy2) OR (#legacy3 < :legacy3) OR (#legacy4 >= :legacy4) OR "
	    "(#legacy5 > :legacy5) OR (attribute_exists(#legacy6)) OR "
	    "(attribute_not_exists(#legacy7)) OR (contains(#legacy8, :legacy6)) OR "
	    "(attribute_exists(#legacy9) AND NOT contains(#legacy9, :legacy7)) OR "
	    "(begins_with(#legacy10, :legacy8)) OR (#legacy11 IN (:legacy9, :legacy10)) OR "
	    "(#legacy12 BETWEEN :legacy11 AND :legacy12)',"
	    "'ExpressionAttributeNames':{'#legacy0':'a','#legacy1':'b','#legacy2':'c','#legacy3':"
	    "'d','#legacy4':'e','#legacy5':'f','#legacy6':'g','#legacy7':'h','#legacy8':'i',"
	    "'#legacy9':'j','#legacy10':'k','#legacy11':'l','#legacy12':'m'},"
	    "'ExpressionAttributeValues':{':legacy0':{'S':'x'},':legacy1':{'N':'1'},':legacy2':{'N'"
	    ":"
	    "'1'},':legacy3':{'N':'1'},':legacy4':{'N':'1'},':legacy5':{'N':'1'},':legacy6':{'S':"
	    "'x'},':legacy7':{'S':'x'},':legacy8':{'S':'x'},':legacy9':{'N':'1'},':legacy10':{'N':"
	    "'2'},':legacy11':{'N':'1'},':legacy12':{'N':'2'}}}");
	/* Every action; clauses in DynamoDB's order; Action defaults to PUT. */
	TRANSLATES("UpdateItem",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'AttributeUpdates':{"
	           "'p':{'Value':{'S':'x'}},'r':{'Action':'DELETE'},'n':{'Action':'ADD','Value':{"
	           "'N':'2'}},'s':{'Action':'DELETE','Value':{'SS':['y']}},'l':{'Action':'ADD',"
	           "'Value':{'L':[{'N':'1'}]}},'q':{'Action':'PUT','Value':{'N':'3'}}},"
	           "'Expected':{'p':{'Exists':false}},'ReturnValues':'ALL_NEW'}",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'UpdateExpression':'SET #legacy0 = "
	           ":legacy0, #legacy4 = list_append(if_not_exists(#legacy4, :legacy3), :legacy4), "
	           "#legacy5 = :legacy5 REMOVE #legacy1 ADD #legacy2 :legacy1 DELETE #legacy3 "
	           ":legacy2','ConditionExpression':'attribute_not_exists(#legacy6)',"
	           "'ExpressionAttributeNames':{'#legacy0':'p','#legacy1':'r','#legacy2':'n',"
	           "'#legacy3':'s','#legacy4':'l','#legacy5':'q','#legacy6':'p'},"
	           "'ExpressionAttributeValues':{':legacy0':{'S':'x'},':legacy1':{'N':'2'},"
	           "':legacy2':{'SS':['y']},':legacy3':{'L':[]},':legacy4':{'L':[{'N':'1'}]},"
	           "':legacy5':{'N':'3'}},'ReturnValues':'ALL_NEW'}");
	/* An empty AttributeUpdates or Expected asks for nothing. */
	TRANSLATES("UpdateItem",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}},'AttributeUpdates':{},"
	           "'Expected':{}}",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}}}");
	/* KeyConditions with the client's own FilterExpression and placeholders,
	 * one of which starts like ours: the prefix moves on. */
	TRANSLATES(
	    "Query",
	    "{'TableName':'t1','KeyConditions':{'pk':{'ComparisonOperator':'EQ',"
	    "'AttributeValueList':[{'S':'a'}]},'sk':{'ComparisonOperator':'BETWEEN',"
	    "'AttributeValueList':[{'N':'1'},{'N':'9'}]}},'FilterExpression':'#legacy0 = :v',"
	    "'ExpressionAttributeNames':{'#legacy0':'x'},'ExpressionAttributeValues':{':v':{"
	    "'N':'1'}}}",
	    "{'TableName':'t1','KeyConditionExpression':'#legacy_0 = :legacy_0 AND #legacy_1 "
	    "BETWEEN :legacy_1 AND :legacy_2','FilterExpression':'#legacy0 = :v',"
	    "'ExpressionAttributeNames':{'#legacy0':'x','#legacy_0':'pk','#legacy_1':'sk'},"
	    "'ExpressionAttributeValues':{':v':{'N':'1'},':legacy_0':{'S':'a'},':legacy_1':{"
	    "'N':'1'},':legacy_2':{'N':'9'}}}");
	TRANSLATES(
	    "Query",
	    "{'TableName':'t1','KeyConditions':{'pk':{'ComparisonOperator':'EQ',"
	    "'AttributeValueList':[{'S':'a'}]}},'QueryFilter':{'x':{'ComparisonOperator':"
	    "'NULL'}},'AttributesToGet':['x']}",
	    "{'TableName':'t1','KeyConditionExpression':'#legacy2 = :legacy0',"
	    "'FilterExpression':'attribute_not_exists(#legacy1)','ProjectionExpression':"
	    "'#legacy0','ExpressionAttributeNames':{'#legacy0':'x','#legacy1':'x','#legacy2':"
	    "'pk'},'ExpressionAttributeValues':{':legacy0':{'S':'a'}}}");
	/* BatchGetItem: per table. */
	TRANSLATES(
	    "BatchGetItem",
	    "{'RequestItems':{'t1':{'Keys':[{'k':{'S':'a'}}],'AttributesToGet':['k','v']},"
	    "'t2':{'Keys':[{'k':{'S':'b'}}],'ProjectionExpression':'v'}}}",
	    "{'RequestItems':{'t1':{'Keys':[{'k':{'S':'a'}}],'ProjectionExpression':"
	    "'#legacy0, #legacy1','ExpressionAttributeNames':{'#legacy0':'k','#legacy1':'v'}},"
	    "'t2':{'Keys':[{'k':{'S':'b'}}],'ProjectionExpression':'v'}}}");
	/* Legacy parameters set to null are absent. */
	TRANSLATES("GetItem", "{'TableName':'t1','Key':{'k':{'S':'a'}},'AttributesToGet':null}",
	           "{'TableName':'t1','Key':{'k':{'S':'a'}}}");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* What the expressions decide, through storage                              */
/* ------------------------------------------------------------------------ */

static st_value *item(const char *text)
{
	st_value *v = sh_arena_alloc(&A, sizeof(*v));
	ck_assert_int_eq(wire_item_from_json(&A, J(text), v, msg), SHOAL_OK);
	ck_assert_int_eq(st_value_normalize(&A, v, msg), SHOAL_OK);
	return v;
}

/* The ConditionExpression of a legacy DeleteItem with this Expected, on it. */
static bool expected_holds(const char *expected, const char *conditional_operator,
                           const st_value *it, int line)
{
	char body[2048];
	snprintf(body, sizeof(body),
	         "{'TableName':'tbl','Key':{'k':{'S':'a'}},'Expected':%s%s%s%s}", expected,
	         conditional_operator ? ",'ConditionalOperator':'" : "",
	         conditional_operator ? conditional_operator : "", conditional_operator ? "'" : "");
	Shoal__Request *req = request("DeleteItem", body);
	st_delete_req d;
	ck_assert_msg(wire_delete_req_from_pb(&A, req->delete_item, &d, msg) == SHOAL_OK,
	              "line %d: %s", line, msg);
	st_expr_ctx ctx;
	st_expr *e;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &A, &d.attrs, msg), SHOAL_OK);
	ck_assert_msg(st_expr_parse(&ctx, ST_EXPR_CONDITION, d.condition, &e, msg) == SHOAL_OK,
	              "line %d: %s: %s", line, d.condition, msg);
	ck_assert_msg(st_expr_ctx_check_unused(&ctx, msg) == SHOAL_OK, "line %d: %s", line, msg);
	bool r;
	ck_assert_int_eq(st_expr_eval(e, it, &r, msg), SHOAL_OK);
	return r;
}
#define HOLDS(expected, it)       ck_assert(expected_holds(expected, NULL, it, __LINE__))
#define FAILS(expected, it)       ck_assert(!expected_holds(expected, NULL, it, __LINE__))
#define HOLDS_OP(expected, o, it) ck_assert(expected_holds(expected, o, it, __LINE__))
#define FAILS_OP(expected, o, it) ck_assert(!expected_holds(expected, o, it, __LINE__))

#define C1(op, v) "{'a':{'ComparisonOperator':'" op "','AttributeValueList':[" v "]}}"

START_TEST(test_semantics)
{
	st_value *it = item("{'k':{'S':'a'},'a':{'N':'5'},'s':{'S':'hello'},'ss':{'SS':['x','y']},"
	                    "'l':{'L':[{'S':'x'}]},'b':{'BOOL':true}}");
	st_value *str = item("{'k':{'S':'a'},'a':{'S':'5'}}");
	st_value *none = item("{'k':{'S':'a'}}");

	HOLDS(C1("EQ", "{'N':'5.0'}"), it);
	FAILS(C1("EQ", "{'N':'5'}"), str); /* another type never equals */
	FAILS(C1("EQ", "{'N':'5'}"), none);
	HOLDS(C1("NE", "{'N':'6'}"), it);
	HOLDS(C1("NE", "{'N':'5'}"), str);
	HOLDS(C1("NE", "{'N':'5'}"), none); /* NE is true for an absent attribute */
	FAILS(C1("NE", "{'N':'5'}"), it);
	HOLDS(C1("LE", "{'N':'5'}"), it);
	FAILS(C1("LT", "{'N':'5'}"), it);
	HOLDS(C1("GE", "{'N':'5'}"), it);
	FAILS(C1("GT", "{'N':'5'}"), it);
	FAILS(C1("GT", "{'N':'1'}"), str); /* ordered comparisons need one type */
	FAILS(C1("LT", "{'N':'9'}"), none);
	HOLDS("{'a':{'ComparisonOperator':'NOT_NULL'}}", it);
	FAILS("{'a':{'ComparisonOperator':'NOT_NULL'}}", none);
	HOLDS("{'a':{'ComparisonOperator':'NULL'}}", none);
	FAILS("{'a':{'ComparisonOperator':'NULL'}}", it);
	HOLDS("{'s':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'ell'}]}}", it);
	HOLDS("{'ss':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'y'}]}}", it);
	HOLDS("{'l':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'x'}]}}", it);
	FAILS("{'s':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'z'}]}}", it);
	HOLDS("{'s':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'S':'z'}]}}", it);
	FAILS("{'ss':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'S':'x'}]}}", it);
	/* NOT_CONTAINS on an absent attribute is false, as DynamoDB answers. */
	FAILS("{'s':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'S':'z'}]}}", none);
	HOLDS("{'s':{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'S':'he'}]}}", it);
	FAILS("{'s':{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'S':'lo'}]}}", it);
	HOLDS(C1("IN", "{'N':'1'},{'N':'5'}"), it);
	FAILS(C1("IN", "{'N':'1'},{'N':'2'}"), it);
	FAILS(C1("IN", "{'N':'5'}"), str);
	HOLDS(C1("BETWEEN", "{'N':'5'},{'N':'6'}"), it);
	HOLDS(C1("BETWEEN", "{'N':'-1'},{'N':'5'}"), it);
	FAILS(C1("BETWEEN", "{'N':'6'},{'N':'7'}"), it);
	FAILS(C1("BETWEEN", "{'S':'1'},{'S':'9'}"), it);
	HOLDS(C1("EQ", "{'N':'5'}"), it);
	HOLDS("{'b':{'Value':{'BOOL':true}}}", it);
	HOLDS("{'b':{'ComparisonOperator':'EQ','Value':{'BOOL':true}}}", it);
	/* Exists forms. */
	HOLDS("{'a':{'Exists':false}}", none);
	FAILS("{'a':{'Exists':false}}", it);
	HOLDS("{'a':{'Exists':'true','Value':{'N':'5'}}}", it);
	FAILS("{'a':{'Value':{'N':'5'}}}", none);
	/* AND (default) and OR. */
	const char *two = "{'a':{'Value':{'N':'5'}},'s':{'Value':{'S':'nope'}}}";
	FAILS(two, it);
	FAILS_OP(two, "AND", it);
	HOLDS_OP(two, "OR", it);
	FAILS_OP(two, "OR", none);
	/* NOT_CONTAINS beside another condition: its own parentheses are the
	 * only ones (two pairs would be refused as redundant). */
	const char *nc =
	    "{'s':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'S':'z'}]},"
	    "'a':{'Value':{'N':'6'}}}";
	FAILS_OP(nc, "AND", it);
	HOLDS_OP(nc, "OR", it);
	FAILS_OP(nc, "OR", none);
}
END_TEST

/* AttributeUpdates on an item, through storage's update engine. */
static st_value *updated(const char *updates, const st_value *old)
{
	char body[2048];
	snprintf(body, sizeof(body),
	         "{'TableName':'tbl','Key':{'k':{'S':'a'}},'AttributeUpdates':%s}", updates);
	Shoal__Request *req = request("UpdateItem", body);
	st_update_req u;
	ck_assert_msg(wire_update_req_from_pb(&A, req->update_item, &u, msg) == SHOAL_OK, "%s",
	              msg);
	st_expr_ctx ctx;
	st_expr *e;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &A, &u.attrs, msg), SHOAL_OK);
	ck_assert_msg(st_expr_parse(&ctx, ST_EXPR_UPDATE, u.update, &e, msg) == SHOAL_OK, "%s: %s",
	              u.update, msg);
	st_value *out;
	ck_assert_msg(st_expr_update(e, &A, old, u.key, &out, msg) == SHOAL_OK, "%s", msg);
	return out;
}

static void assert_item(const st_value *got, const char *want)
{
	st_value *w = item(want);
	json_t *gj;
	ck_assert_int_eq(wire_item_to_json(got, &gj, msg), SHOAL_OK);
	keep(gj);
	ck_assert_msg(st_value_equal(got, w), "want %s\n got %s", want, dump(gj));
}

START_TEST(test_update_semantics)
{
	st_value *old = item("{'k':{'S':'a'},'n':{'N':'5'},'ss':{'SS':['x','y','z']},"
	                     "'l':{'L':[{'N':'1'}]},'gone':{'S':'g'}}");
	/* ADD to a number, to a set, to a list; ADD creates what is absent. */
	assert_item(
	    updated("{'n':{'Action':'ADD','Value':{'N':'-2'}},'ss':{'Action':'ADD','Value':"
	            "{'SS':['w']}},'l':{'Action':'ADD','Value':{'L':[{'N':'2'}]}},"
	            "'m':{'Action':'ADD','Value':{'N':'7'}},'nl':{'Action':'ADD','Value':"
	            "{'L':[{'S':'q'}]}}}",
	            old),
	    "{'k':{'S':'a'},'n':{'N':'3'},'ss':{'SS':['w','x','y','z']},'l':{'L':[{'N':'1'},"
	    "{'N':'2'}]},'gone':{'S':'g'},'m':{'N':'7'},'nl':{'L':[{'S':'q'}]}}");
	/* DELETE a subset of a set, DELETE without a value, PUT. */
	assert_item(updated("{'ss':{'Action':'DELETE','Value':{'SS':['x','q']}},'gone':{'Action':"
	                    "'DELETE'},'n':{'Action':'PUT','Value':{'S':'five'}}}",
	                    old),
	            "{'k':{'S':'a'},'n':{'S':'five'},'ss':{'SS':['y','z']},'l':{'L':[{'N':'1'}]}}");
	/* On no item: the key plus what was put and added. */
	assert_item(updated("{'n':{'Action':'ADD','Value':{'N':'1'}},'p':{'Value':{'S':'v'}},"
	                    "'gone':{'Action':'DELETE'}}",
	                    NULL),
	            "{'k':{'S':'a'},'n':{'N':'1'},'p':{'S':'v'}}");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Misuse                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct err_case {
	const char *op, *body;
	int code;
	const char *message;
} err_case;

#define BAD         "One or more parameter values were invalid: "
#define KEY         "'TableName':'t1','Key':{'k':{'S':'a'}},"
#define SCAN1(cond) "{'TableName':'t1','ScanFilter':{'a':" cond "}}"
#define ARITY(op)   BAD "Invalid number of argument(s) for the " op " ComparisonOperator"
#define CMP_SET                                                                                    \
	"[IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, "        \
	"CONTAINS]"
#define MIXED(non, ex)                                                                             \
	"Can not use both expression and non-expression parameters in the same request: "          \
	"Non-expression parameters: {" non "} Expression parameters: {" ex "}"

static const err_case errors[] = {
    /* Shapes: SerializationException at once. */
    {"Scan", "{'ScanFilter':[]}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type java.util.Map<java.lang.String, "
     "com.amazonaws.dynamodb.v20120810.Condition>"},
    {"Scan", "{'ScanFilter':{'a':5}}", SHOAL_E_SERIALIZATION, "Unexpected value type in payload"},
    {"Scan", SCAN1("{'ComparisonOperator':5}"), SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    {"Scan", SCAN1("{'ComparisonOperator':'EQ','AttributeValueList':{}}"), SHOAL_E_SERIALIZATION,
     "Start of structure or map found where not expected"},
    {"Scan", SCAN1("{'ComparisonOperator':'EQ','AttributeValueList':[{'S':1}]}"),
     SHOAL_E_SERIALIZATION, "NUMBER_VALUE cannot be converted to String"},
    {"PutItem", "{'Expected':{'a':{'Exists':'maybe'}}}", SHOAL_E_SERIALIZATION,
     "Unexpected token received from parser"},
    {"GetItem", "{'AttributesToGet':'a'}", SHOAL_E_SERIALIZATION, "Unexpected field type"},
    {"GetItem", "{'AttributesToGet':[1]}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    {"UpdateItem", "{'AttributeUpdates':{'a':{'Action':[]}}}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type class java.lang.String"},
    {"Query", "{'ConditionalOperator':{}}", SHOAL_E_SERIALIZATION,
     "Start of structure or map found where not expected"},
    /* Serialisation errors elsewhere win over misuse here. */
    {"GetItem", "{'AttributesToGet':[],'TableName':5}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},

    /* Parameter constraints. */
    {"Scan", SCAN1("{'ComparisonOperator':'EQUALS'}"), SHOAL_E_VALIDATION,
     "1 validation error detected: Value 'EQUALS' at 'scanFilter.a.member.comparisonOperator' "
     "failed to satisfy constraint: Member must satisfy enum value set: " CMP_SET},
    {"Query", "{'QueryFilter':{'a':{'AttributeValueList':[]}}}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'queryFilter.a.member.comparisonOperator' "
     "failed to satisfy constraint: Member must not be null"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'SET','Value':{'N':'1'}}}}",
     SHOAL_E_VALIDATION,
     "1 validation error detected: Value 'SET' at 'attributeUpdates.a.member.action' failed to "
     "satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]"},
    {"Scan", "{'ScanFilter':{},'ConditionalOperator':'XOR'}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value 'XOR' at 'conditionalOperator' failed to satisfy "
     "constraint: Member must satisfy enum value set: [OR, AND]"},
    {"GetItem", "{" KEY "'AttributesToGet':[]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy "
     "constraint: Member must have length greater than or equal to 1"},
    {"BatchGetItem", "{'RequestItems':{'t1':{'Keys':[{'k':{'S':'a'}}],'AttributesToGet':[]}}}",
     SHOAL_E_VALIDATION,
     "1 validation error detected: Value '[]' at 'requestItems.t1.member.attributesToGet' "
     "failed to satisfy constraint: Member must have length greater than or equal to 1"},
    {"PutItem", "{'Expected':{'a':{'ComparisonOperator':'X'},'b':{'ComparisonOperator':'Y'}}}",
     SHOAL_E_VALIDATION,
     "2 validation errors detected: Value 'X' at 'expected.a.member.comparisonOperator' failed "
     "to satisfy constraint: Member must satisfy enum value set: " CMP_SET
     "; Value 'Y' at 'expected.b.member.comparisonOperator' failed to satisfy constraint: "
     "Member must satisfy enum value set: " CMP_SET},

    /* Mixing. */
    {"PutItem", "{'Expected':{'a':{'Exists':false}},'ConditionExpression':'attribute_exists(b)'}",
     SHOAL_E_VALIDATION, MIXED("Expected", "ConditionExpression")},
    {"UpdateItem",
     "{'AttributeUpdates':{'a':{'Action':'DELETE'}},'ConditionalOperator':'AND',"
     "'UpdateExpression':'REMOVE b','ConditionExpression':'attribute_exists(b)'}",
     SHOAL_E_VALIDATION,
     MIXED("AttributeUpdates, ConditionalOperator", "UpdateExpression, ConditionExpression")},
    {"GetItem", "{'AttributesToGet':['a'],'ProjectionExpression':'b'}", SHOAL_E_VALIDATION,
     MIXED("AttributesToGet", "ProjectionExpression")},
    {"Scan", "{'ScanFilter':{},'FilterExpression':'a = :v'}", SHOAL_E_VALIDATION,
     MIXED("ScanFilter", "FilterExpression")},
    {"Query",
     "{'KeyConditions':{'k':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'a'}]}},"
     "'KeyConditionExpression':'k = :v','QueryFilter':{}}",
     SHOAL_E_VALIDATION, MIXED("QueryFilter, KeyConditions", "KeyConditionExpression")},
    {"Query", "{'AttributesToGet':['a'],'FilterExpression':'a = :v'}", SHOAL_E_VALIDATION,
     MIXED("AttributesToGet", "FilterExpression")},
    {"BatchGetItem",
     "{'RequestItems':{'t1':{'Keys':[{'k':{'S':'a'}}],'AttributesToGet':['a'],"
     "'ProjectionExpression':'a'}}}",
     SHOAL_E_VALIDATION, MIXED("AttributesToGet", "ProjectionExpression")},
    /* Placeholders with legacy parameters only. */
    {"GetItem", "{" KEY "'AttributesToGet':['a'],'ExpressionAttributeNames':{'#a':'a'}}",
     SHOAL_E_VALIDATION, "ExpressionAttributeNames can only be specified when using expressions"},
    {"PutItem", "{'Expected':{'a':{'Exists':false}},'ExpressionAttributeValues':{':a':{'S':'x'}}}",
     SHOAL_E_VALIDATION,
     "ExpressionAttributeValues can only be specified when using expressions: "
     "ConditionExpression is null"},
    {"Query",
     "{'KeyConditions':{'k':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'a'}]}},"
     "'ExpressionAttributeValues':{':a':{'S':'x'}}}",
     SHOAL_E_VALIDATION,
     "ExpressionAttributeValues can only be specified when using expressions: "
     "FilterExpression and KeyConditionExpression are null"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{},'ExpressionAttributeValues':{':a':{'S':'x'}}}",
     SHOAL_E_VALIDATION,
     "ExpressionAttributeValues can only be specified when using expressions: "
     "UpdateExpression and ConditionExpression are null"},
    {"Scan",
     "{'ScanFilter':{},'ProjectionExpression':'a','ExpressionAttributeValues':{':a':{"
     "'S':'x'}}}",
     SHOAL_E_VALIDATION,
     "Can not use both expression and non-expression parameters in the same request: "
     "Non-expression parameters: {ScanFilter} Expression parameters: {ProjectionExpression}"},
    {"Scan", "{'AttributesToGet':['a'],'ExpressionAttributeValues':{':a':{'S':'x'}}}",
     SHOAL_E_VALIDATION,
     "ExpressionAttributeValues can only be specified when using expressions: "
     "FilterExpression is null"},
    /* ConditionalOperator's use. */
    {"DeleteItem", "{" KEY "'ConditionalOperator':'AND'}", SHOAL_E_VALIDATION,
     "ConditionalOperator cannot be used without Filter or Expected"},
    {"Scan", "{'ConditionalOperator':'OR','ScanFilter':{'a':{'ComparisonOperator':'NULL'}}}",
     SHOAL_E_VALIDATION,
     "ConditionalOperator can only be used when Filter or Expected has two or more elements"},

    /* Operand counts, for every operator. */
    {"Scan", SCAN1("{'ComparisonOperator':'EQ'}"), SHOAL_E_VALIDATION, ARITY("EQ")},
    {"Scan", SCAN1("{'ComparisonOperator':'NE','AttributeValueList':[{'S':'a'},{'S':'b'}]}"),
     SHOAL_E_VALIDATION, ARITY("NE")},
    {"Scan", SCAN1("{'ComparisonOperator':'LE','AttributeValueList':[]}"), SHOAL_E_VALIDATION,
     ARITY("LE")},
    {"Scan", SCAN1("{'ComparisonOperator':'LT'}"), SHOAL_E_VALIDATION, ARITY("LT")},
    {"Scan", SCAN1("{'ComparisonOperator':'GE'}"), SHOAL_E_VALIDATION, ARITY("GE")},
    {"Scan", SCAN1("{'ComparisonOperator':'GT'}"), SHOAL_E_VALIDATION, ARITY("GT")},
    {"Scan", SCAN1("{'ComparisonOperator':'NOT_NULL','AttributeValueList':[{'S':'a'}]}"),
     SHOAL_E_VALIDATION, ARITY("NOT_NULL")},
    {"Scan", SCAN1("{'ComparisonOperator':'NULL','AttributeValueList':[{'S':'a'}]}"),
     SHOAL_E_VALIDATION, ARITY("NULL")},
    {"Scan", SCAN1("{'ComparisonOperator':'CONTAINS'}"), SHOAL_E_VALIDATION, ARITY("CONTAINS")},
    {"Scan", SCAN1("{'ComparisonOperator':'NOT_CONTAINS'}"), SHOAL_E_VALIDATION,
     ARITY("NOT_CONTAINS")},
    {"Scan", SCAN1("{'ComparisonOperator':'BEGINS_WITH'}"), SHOAL_E_VALIDATION,
     ARITY("BEGINS_WITH")},
    {"Scan", SCAN1("{'ComparisonOperator':'IN','AttributeValueList':[]}"), SHOAL_E_VALIDATION,
     ARITY("IN")},
    {"Scan", SCAN1("{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'N':'1'}]}"),
     SHOAL_E_VALIDATION, ARITY("BETWEEN")},
    {"PutItem", "{'Expected':{'a':{'ComparisonOperator':'NULL','Value':{'S':'x'}}}}",
     SHOAL_E_VALIDATION, ARITY("NULL")},
    /* Operand types. */
    {"Scan", SCAN1("{'ComparisonOperator':'IN','AttributeValueList':[{'S':'a'},{'N':'1'}]}"),
     SHOAL_E_VALIDATION, BAD "AttributeValues inside AttributeValueList must be of same type"},
    {"Scan", SCAN1("{'ComparisonOperator':'LT','AttributeValueList':[{'SS':['a']}]}"),
     SHOAL_E_VALIDATION, BAD "ComparisonOperator LT is not valid for SS AttributeValue type"},
    {"Scan", SCAN1("{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'N':'1'}]}"),
     SHOAL_E_VALIDATION,
     BAD "ComparisonOperator BEGINS_WITH is not valid for N AttributeValue type"},
    {"Scan", SCAN1("{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'BOOL':true}]}"),
     SHOAL_E_VALIDATION,
     BAD "ComparisonOperator CONTAINS is not valid for BOOL AttributeValue type"},
    {"Scan", SCAN1("{'ComparisonOperator':'IN','AttributeValueList':[{'L':[]}]}"),
     SHOAL_E_VALIDATION, BAD "ComparisonOperator IN is not valid for L AttributeValue type"},
    {"Scan", SCAN1("{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'N':'10'},{'N':'9'}]}"),
     SHOAL_E_VALIDATION,
     "The BETWEEN condition was provided a range where the lower bound is greater than the "
     "upper bound"},
    {"Scan", SCAN1("{'ComparisonOperator':'EQ','AttributeValueList':[{}]}"), SHOAL_E_VALIDATION,
     "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"},
    {"Scan", SCAN1("{'ComparisonOperator':'EQ','AttributeValueList':[{'N':'x'}]}"),
     SHOAL_E_VALIDATION, "The parameter cannot be converted to a numeric value: x"},
    /* Expected's forms. */
    {"PutItem", "{'Expected':{'a':{'Value':{'S':'x'},'AttributeValueList':[{'S':'x'}]}}}",
     SHOAL_E_VALIDATION,
     BAD "Value and AttributeValueList cannot be used together for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{'ComparisonOperator':'EQ','Exists':true,'Value':{'S':'x'}}}}",
     SHOAL_E_VALIDATION,
     BAD "Exists and ComparisonOperator cannot be used together for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{'ComparisonOperator':'EQ'}}}", SHOAL_E_VALIDATION,
     BAD "Value or AttributeValueList must be used with ComparisonOperator: EQ for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{'AttributeValueList':[{'S':'x'}]}}}", SHOAL_E_VALIDATION,
     BAD "AttributeValueList can only be used with a ComparisonOperator for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{}}}", SHOAL_E_VALIDATION,
     BAD "Value must be provided when Exists is null for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{'Exists':true}}}", SHOAL_E_VALIDATION,
     BAD "Value must be provided when Exists is true for Attribute: a"},
    {"PutItem", "{'Expected':{'a':{'Exists':false,'Value':{'S':'x'}}}}", SHOAL_E_VALIDATION,
     BAD "Value cannot be used when Exists is false for Attribute: a"},
    /* AttributeUpdates. */
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'PUT'}}}", SHOAL_E_VALIDATION,
     BAD "Only DELETE action is allowed when no attribute value is specified"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'ADD'}}}", SHOAL_E_VALIDATION,
     BAD "Only DELETE action is allowed when no attribute value is specified"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'DELETE','Value':{'S':'x'}}}}",
     SHOAL_E_VALIDATION, BAD "DELETE action with value is not supported for the type S"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'ADD','Value':{'S':'x'}}}}",
     SHOAL_E_VALIDATION, BAD "ADD action is not supported for the type S"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Action':'ADD','Value':{'M':{}}}}}",
     SHOAL_E_VALIDATION, BAD "ADD action is not supported for the type M"},
    {"UpdateItem", "{" KEY "'AttributeUpdates':{'a':{'Value':{'NULL':false}}}}", SHOAL_E_VALIDATION,
     BAD "Null attribute value types must have the value of true"},
    /* KeyConditions. */
    {"Query",
     "{'KeyConditions':{'k':{'ComparisonOperator':'NE','AttributeValueList':[{'S':'a'}]}}}",
     SHOAL_E_VALIDATION, "Attempted conditional constraint is not an indexable operation"},
    {"Query", "{'KeyConditions':{}}", SHOAL_E_VALIDATION,
     "Conditions can be of length 1 or 2 only"},
    {"Query",
     "{'KeyConditions':{'a':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'a'}]},"
     "'b':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'a'}]},"
     "'c':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'a'}]}}}",
     SHOAL_E_VALIDATION, "Conditions can be of length 1 or 2 only"},
    /* AttributesToGet. */
    {"Scan", "{'AttributesToGet':['a','b','a']}", SHOAL_E_VALIDATION,
     BAD "Duplicate value in attribute name: a"},
    {"GetItem", "{" KEY "'AttributesToGet':['a',null]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'attributesToGet.2.member' failed to satisfy "
     "constraint: Member must not be null"},
};

START_TEST(test_errors)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		const err_case *e = &errors[i];
		Shoal__Request *r = (Shoal__Request *)&msg;
		msg[0] = '\0';
		int rc = wire_api_request_from_json(&A, e->op, J(e->body), &r, msg);
		ck_assert_msg(rc == e->code, "%s %s: %s (%s)", e->op, e->body, shoal_err_name(rc),
		              msg);
		ck_assert_msg(strcmp(msg, e->message) == 0, "%s %s:\n want %s\n got  %s", e->op,
		              e->body, e->message, msg);
		ck_assert_ptr_null(r);
	}
}
END_TEST

/* Every allocation of a translation can fail: SHOAL_E_NOMEM, never a crash,
 * a leak or a half-translated request.  A first translation without faults
 * warms the walker's per-descriptor facts (built once per message type; a
 * failure to build them only means computing them each time). */
static void fault_loop(const char *op, const char *body)
{
	json_t *j = J(body);
	{
		sh_arena a;
		sh_arena_init(&a);
		char em[SH_ERRMSG_SIZE] = "";
		Shoal__Request *req;
		int rc = wire_api_request_from_json(&a, op, j, &req, em);
		sh_arena_fini(&a);
		ck_assert_msg(rc == SHOAL_OK, "%s: %s", op, em);
	}
	for (long n = 1;; n++) {
		ck_assert_int_lt(n, 100000);
		sh_arena a;
		sh_arena_init(&a);
		char em[SH_ERRMSG_SIZE] = "";
		Shoal__Request *req;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = wire_api_request_from_json(&a, op, j, &req, em);
		long fired = sh_fault_fired(SH_FAULT_ALLOC);
		sh_fault_reset();
		sh_arena_fini(&a);
		if (fired == 0) {
			ck_assert_msg(rc == SHOAL_OK, "%s n=%ld: %s", op, n, em);
			return;
		}
		ck_assert_msg(rc == SHOAL_E_NOMEM, "%s: allocation %ld failed, got %s (%s)", op, n,
		              shoal_err_name(rc), em);
	}
}

START_TEST(test_alloc_failures)
{
	fault_loop("UpdateItem",
	           "{" KEY
	           "'AttributeUpdates':{'a':{'Value':{'S':'x'}},'l':{'Action':'ADD','Value':{"
	           "'L':[{'N':'1'}]}},'s':{'Action':'DELETE','Value':{'SS':['y']}},'r':{'Action':"
	           "'DELETE'}},'Expected':{'a':{'Exists':false},'b':{'ComparisonOperator':'NOT_"
	           "CONTAINS','AttributeValueList':[{'S':'x'}]}},'ConditionalOperator':'OR'}");
	fault_loop(
	    "Query",
	    "{'TableName':'t1','KeyConditions':{'k':{'ComparisonOperator':'BETWEEN',"
	    "'AttributeValueList':[{'N':'1'},{'N':'2'}]}},'FilterExpression':'#a = :v',"
	    "'ExpressionAttributeNames':{'#a':'a'},'ExpressionAttributeValues':{':v':{'N':'1'"
	    "}},'AttributesToGet':null}");
	fault_loop(
	    "BatchGetItem",
	    "{'RequestItems':{'t1':{'Keys':[{'k':{'S':'a'}}],'AttributesToGet':['a','b']}}}");
}
END_TEST

static Suite *wire_legacy_suite(void)
{
	Suite *s = suite_create("wire_legacy");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_translations);
	tcase_add_test(tc, test_semantics);
	tcase_add_test(tc, test_update_semantics);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_alloc_failures);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(wire_legacy_suite)
