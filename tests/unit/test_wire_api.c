/* DynamoDB JSON bodies <-> the protobuf envelope (proto/wire_api.h): every
 * operation's request from a realistic body (seed 002's edtech-platform
 * table) and back, every kind of response to its exact JSON and back, error
 * bodies, DynamoDB's serialisation and validation messages, garbled bodies
 * (seeded), and allocation failures.
 *
 * Bodies are written with single quotes (q() turns them into double quotes)
 * so that they read like the JSON they are. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "tests/lib/testlib.h"

#define EMPTY_AV                                                                                   \
	"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
#define STRUCT "Start of structure or map found where not expected"
#define LIST   "Start of list found where not expected"

static sh_arena A;
static char msg[SH_ERRMSG_SIZE];
static json_t *pool[512];
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

/* Keeps j until teardown. */
static json_t *keep(json_t *j)
{
	ck_assert_int_lt(npool, (int)(sizeof(pool) / sizeof(pool[0])));
	pool[npool++] = j;
	return j;
}

/* The body text with ' for " parsed (kept until teardown). */
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

/* A file of deploy/demo, from the tree's root or relative to this source. */
static json_t *demo_file(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "deploy/demo/%s", name);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(path, sizeof(path), "%.*s/../../deploy/demo/%s",
		         (int)(strrchr(__FILE__, '/') - __FILE__), __FILE__, name);
		f = fopen(path, "r");
	}
	ck_assert_msg(f != NULL, "cannot open deploy/demo/%s", name);
	json_error_t err;
	json_t *j = json_loadf(f, 0, &err);
	fclose(f);
	ck_assert_msg(j != NULL, "%s: %s", path, err.text);
	return keep(j);
}

static void assert_json_eq(const json_t *want, const json_t *got)
{
	ck_assert_msg(json_equal((json_t *)want, (json_t *)got), "want %s\n got %s", dump(want),
	              dump(got));
}

static bool bytes_is(const ProtobufCBinaryData *b, const char *s)
{
	return b->len == strlen(s) && memcmp(b->data, s, b->len) == 0;
}

/* attribute i of an item is name = {"S": s} */
static bool attr_s(const Shoal__Item *it, size_t i, const char *name, const char *s)
{
	return it != NULL && i < it->n_attrs && bytes_is(&it->attrs[i]->name, name) &&
	       it->attrs[i]->value->value_case == SHOAL__ATTRIBUTE_VALUE__VALUE_S &&
	       bytes_is(&it->attrs[i]->value->s, s);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

/* body -> Request -> body (json_equal), also through pack and unpack. */
static Shoal__Request *round_trip_json(const char *op, const json_t *body)
{
	Shoal__Request *req;
	int rc = wire_api_request_from_json(&A, op, body, &req, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s (%s)", op, msg, shoal_err_name(rc));
	ck_assert_str_eq(wire_api_operation_name(req), op);
	json_t *back;
	const char *name;
	ck_assert_msg(wire_api_request_to_json(req, &name, &back, msg) == SHOAL_OK, "%s", msg);
	keep(back);
	ck_assert_str_eq(name, op);
	assert_json_eq(body, back);

	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&A, &req->base, &buf, &len, msg), SHOAL_OK);
	Shoal__Request *got;
	ck_assert_int_eq(wire_unpack_request(NULL, buf, len, &got, msg), SHOAL_OK);
	ck_assert_int_eq(wire_api_request_to_json(got, NULL, &back, msg), SHOAL_OK);
	wire_free_request(NULL, got);
	keep(back);
	assert_json_eq(body, back);
	return req;
}

static Shoal__Request *round_trip(const char *op, const char *text)
{
	return round_trip_json(op, J(text));
}

#define KEY_S1_PROFILE "{'PK':{'S':'STUDENT#s1'},'SK':{'S':'PROFILE'}}"

START_TEST(test_get_item)
{
	Shoal__Request *r = round_trip(
	    "GetItem", "{'TableName':'edtech-platform','Key':" KEY_S1_PROFILE
	               ",'ProjectionExpression':'#n, email, GSI1SK','ExpressionAttributeNames':"
	               "{'#n':'name'},'ConsistentRead':true,'ReturnConsumedCapacity':'TOTAL'}");
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_GET_ITEM);
	Shoal__GetItemRequest *g = r->get_item;
	ck_assert(WIRE_HAS(g, table_name));
	ck_assert_str_eq(g->table_name, "edtech-platform");
	ck_assert_uint_eq(g->key->n_attrs, 2);
	ck_assert(attr_s(g->key, 0, "PK", "STUDENT#s1"));
	ck_assert(attr_s(g->key, 1, "SK", "PROFILE"));
	ck_assert_str_eq(g->projection_expression, "#n, email, GSI1SK");
	ck_assert_uint_eq(g->expression_attribute_names->n_entries, 1);
	ck_assert(bytes_is(&g->expression_attribute_names->entries[0]->placeholder, "#n"));
	ck_assert(bytes_is(&g->expression_attribute_names->entries[0]->name, "name"));
	ck_assert(g->consistent_read);
	ck_assert_str_eq(g->return_consumed_capacity, "TOTAL");
	/* What the node does with it. */
	st_get_req sr;
	ck_assert_msg(wire_get_req_from_pb(&A, g, &sr, msg) == SHOAL_OK, "%s", msg);
	ck_assert_str_eq(sr.table, "edtech-platform");
	ck_assert_str_eq(sr.projection, "#n, email, GSI1SK");

	/* A full X-Amz-Target names the operation too; a null member is absent. */
	Shoal__Request *t;
	ck_assert_int_eq(wire_api_request_from_json(
	                     &A, "DynamoDB_20120810.GetItem",
	                     J("{'TableName':'x','Key':{},'ProjectionExpression':null}"), &t, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(t->op_case, SHOAL__REQUEST__OP_GET_ITEM);
	ck_assert(!WIRE_HAS(t->get_item, projection_expression));
	ck_assert_ptr_nonnull(t->get_item->key);
	ck_assert_uint_eq(t->get_item->key->n_attrs, 0);
}
END_TEST

START_TEST(test_put_update_delete)
{
	Shoal__Request *r = round_trip(
	    "PutItem",
	    "{'TableName':'edtech-platform','Item':{'PK':{'S':'STUDENT#s3'},'SK':{'S':"
	    "'ENROLLMENT#c10'},'GSI1PK':{'S':'COURSE#c10'},'GSI1SK':{'S':'STUDENT#s3'},"
	    "'entity_type':{'S':'ENROLLMENT'},'enrolled_at':{'S':'2024-09-06T09:00:00Z'},"
	    "'progress':{'N':'0'},'tags':{'SS':['new','mobile']},'scores':{'L':[{'N':'1.5'},"
	    "{'NULL':true},{'BOOL':false},{'B':'AAEC'},{'M':{'x':{'NS':['1','2']},'y':{'BS':["
	    "'AQ=='"
	    "]}}}]}},'ConditionExpression':'attribute_not_exists(PK)','ReturnValues':'ALL_OLD',"
	    "'ReturnValuesOnConditionCheckFailure':'ALL_OLD','ReturnConsumedCapacity':'INDEXES',"
	    "'ReturnItemCollectionMetrics':'SIZE'}");
	Shoal__PutItemRequest *p = r->put_item;
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_PUT_ITEM);
	ck_assert_uint_eq(p->item->n_attrs, 9);
	ck_assert(attr_s(p->item, 0, "PK", "STUDENT#s3"));
	ck_assert_str_eq(p->condition_expression, "attribute_not_exists(PK)");
	ck_assert_str_eq(p->return_values, "ALL_OLD");
	ck_assert_str_eq(p->return_values_on_condition_check_failure, "ALL_OLD");
	ck_assert_str_eq(p->return_consumed_capacity, "INDEXES");
	ck_assert_str_eq(p->return_item_collection_metrics, "SIZE");
	ck_assert_ptr_null(p->expression_attribute_names);
	ck_assert_ptr_null(p->expression_attribute_values);
	const Shoal__AttributeValue *scores = p->item->attrs[8]->value;
	ck_assert_int_eq(scores->value_case, SHOAL__ATTRIBUTE_VALUE__VALUE_L);
	ck_assert_uint_eq(scores->l->n_values, 5);
	ck_assert_int_eq(scores->l->values[3]->value_case, SHOAL__ATTRIBUTE_VALUE__VALUE_B);
	ck_assert_uint_eq(scores->l->values[3]->b.len, 3); /* AAEC = 00 01 02 */
	st_put_req pr;
	ck_assert_msg(wire_put_req_from_pb(&A, p, &pr, msg) == SHOAL_OK, "%s", msg);

	r = round_trip("UpdateItem",
	               "{'TableName':'edtech-platform','Key':{'PK':{'S':'STUDENT#s1'},'SK':{'S':"
	               "'ENROLLMENT#c10'}},'UpdateExpression':'SET progress = progress + :d, "
	               "last_seen = :now REMOVE #tmp','ConditionExpression':'attribute_exists(PK) "
	               "AND progress < :max','ExpressionAttributeNames':{'#tmp':'draft'},"
	               "'ExpressionAttributeValues':{':d':{'N':'10'},':now':{'S':'2024-09-10T12:"
	               "00:00Z'},':max':{'N':'100'}},'ReturnValues':'UPDATED_NEW'}");
	Shoal__UpdateItemRequest *u = r->update_item;
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_UPDATE_ITEM);
	ck_assert_str_eq(u->update_expression,
	                 "SET progress = progress + :d, last_seen = :now REMOVE #tmp");
	ck_assert_uint_eq(u->expression_attribute_values->n_attrs, 3);
	ck_assert(bytes_is(&u->expression_attribute_values->attrs[0]->name, ":d"));
	ck_assert_str_eq(u->return_values, "UPDATED_NEW");
	ck_assert(!WIRE_HAS(u, return_consumed_capacity));
	st_update_req ur;
	ck_assert_msg(wire_update_req_from_pb(&A, u, &ur, msg) == SHOAL_OK, "%s", msg);

	r = round_trip("DeleteItem",
	               "{'TableName':'edtech-platform','Key':{'PK':{'S':'COURSE#c10'},'SK':{'S':"
	               "'ENROLLMENT#STUDENT#s2'}},'ConditionExpression':'entity_type = :t',"
	               "'ExpressionAttributeValues':{':t':{'S':'ENROLLMENT'}},'ReturnValues':"
	               "'ALL_OLD'}");
	Shoal__DeleteItemRequest *d = r->delete_item;
	ck_assert(attr_s(d->key, 1, "SK", "ENROLLMENT#STUDENT#s2"));
	ck_assert_str_eq(d->condition_expression, "entity_type = :t");
	st_delete_req dr;
	ck_assert_msg(wire_delete_req_from_pb(&A, d, &dr, msg) == SHOAL_OK, "%s", msg);

	/* ExpressionAttributeNames {} stays present and empty (DynamoDB refuses it,
	 * later, with its own message). */
	r = round_trip("PutItem", "{'TableName':'t1','Item':{'a':{'S':'x'}},"
	                          "'ExpressionAttributeNames':{},'ExpressionAttributeValues':{}}");
	ck_assert_ptr_nonnull(r->put_item->expression_attribute_names);
	ck_assert_uint_eq(r->put_item->expression_attribute_names->n_entries, 0);
	ck_assert_ptr_nonnull(r->put_item->expression_attribute_values);
}
END_TEST

START_TEST(test_query_scan)
{
	Shoal__Request *r = round_trip(
	    "Query",
	    "{'TableName':'edtech-platform','IndexName':'GSI1','KeyConditionExpression':'GSI1PK = "
	    ":pk AND begins_with(GSI1SK, :prefix)','FilterExpression':'progress >= :p',"
	    "'ProjectionExpression':'PK, SK, progress','ExpressionAttributeValues':{':pk':{'S':"
	    "'COURSE#c10'},':prefix':{'S':'STUDENT#'},':p':{'N':'10'}},'ScanIndexForward':false,"
	    "'Limit':10,'Select':'SPECIFIC_ATTRIBUTES','ExclusiveStartKey':{'GSI1PK':{'S':'COURSE#"
	    "c10'},'GSI1SK':{'S':'STUDENT#s1'},'PK':{'S':'STUDENT#s1'},'SK':{'S':'ENROLLMENT#c10'}"
	    "},'ReturnConsumedCapacity':'TOTAL'}");
	Shoal__QueryRequest *q = r->query;
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_QUERY);
	ck_assert_str_eq(q->index_name, "GSI1");
	ck_assert_str_eq(q->key_condition_expression,
	                 "GSI1PK = :pk AND begins_with(GSI1SK, :prefix)");
	ck_assert(WIRE_HAS(q, scan_index_forward));
	ck_assert(!q->scan_index_forward);
	ck_assert(WIRE_HAS(q, limit));
	ck_assert_int_eq(q->limit, 10);
	ck_assert_str_eq(q->select, "SPECIFIC_ATTRIBUTES");
	ck_assert_uint_eq(q->exclusive_start_key->n_attrs, 4);
	ck_assert(!q->consistent_read);
	st_query_req qr;
	ck_assert_msg(wire_query_req_from_pb(&A, q, &qr, msg) == SHOAL_OK, "%s", msg);
	ck_assert_int_eq(qr.limit, 10);

	r = round_trip("Scan", "{'TableName':'edtech-platform','FilterExpression':"
	                       "'attribute_not_exists(lesson_id) AND begins_with(SK, :m)',"
	                       "'ExpressionAttributeValues':{':m':{'S':'MODULE#'}},'Segment':1,"
	                       "'TotalSegments':4,'Limit':100,'ConsistentRead':true,'Select':"
	                       "'ALL_ATTRIBUTES'}");
	Shoal__ScanRequest *s = r->scan;
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_SCAN);
	ck_assert(WIRE_HAS(s, segment));
	ck_assert_int_eq(s->segment, 1);
	ck_assert_int_eq(s->total_segments, 4);
	ck_assert(s->consistent_read);
	st_scan_req scr;
	ck_assert_msg(wire_scan_req_from_pb(&A, s, &scr, msg) == SHOAL_OK, "%s", msg);

	/* Limit 0 and Segment 0 are present, not absent: DynamoDB tells them apart. */
	r = round_trip("Scan", "{'TableName':'edtech-platform','Limit':0,'Segment':0}");
	ck_assert(WIRE_HAS(r->scan, limit));
	ck_assert(WIRE_HAS(r->scan, segment));
	ck_assert_int_eq(wire_scan_req_from_pb(&A, r->scan, &scr, msg), SHOAL_E_VALIDATION);
}
END_TEST

START_TEST(test_batches)
{
	Shoal__Request *r = round_trip(
	    "BatchGetItem",
	    "{'RequestItems':{'edtech-platform':{'Keys':[" KEY_S1_PROFILE
	    ",{'PK':{'S':'COURSE#c10'},'SK':{'S':'METADATA'}}],'ProjectionExpression':'PK, SK, "
	    "#n','ExpressionAttributeNames':{'#n':'name'},'ConsistentRead':true},'other-table':{"
	    "'Keys':[{'id':{'N':'7'}}]}},'ReturnConsumedCapacity':'TOTAL'}");
	Shoal__BatchGetItemRequest *bg = r->batch_get_item;
	ck_assert_uint_eq(bg->n_request_items, 2);
	ck_assert_str_eq(bg->request_items[0]->table_name, "edtech-platform");
	ck_assert_uint_eq(bg->request_items[0]->n_keys, 2);
	ck_assert(attr_s(bg->request_items[0]->keys[1], 1, "SK", "METADATA"));
	ck_assert(bg->request_items[0]->consistent_read);
	ck_assert_str_eq(bg->request_items[0]->projection_expression, "PK, SK, #n");
	ck_assert_str_eq(bg->request_items[1]->table_name, "other-table");
	ck_assert(!bg->request_items[1]->consistent_read);

	/* deploy/demo/edtech-items.json is BatchWriteItem's RequestItems. */
	json_t *body = keep(json_object());
	json_t *items = json_deep_copy(demo_file("edtech-items.json"));
	json_array_append_new(json_object_get(items, "edtech-platform"),
	                      json_pack("{s:{s:{s:{s:s},s:{s:s}}}}", "DeleteRequest", "Key", "PK",
	                                "S", "STUDENT#s9", "SK", "S", "PROFILE"));
	json_object_set_new(body, "RequestItems", items);
	json_object_set_new(body, "ReturnItemCollectionMetrics", json_string("SIZE"));
	r = round_trip_json("BatchWriteItem", body);
	Shoal__BatchWriteItemRequest *bw = r->batch_write_item;
	ck_assert_uint_eq(bw->n_request_items, 1);
	ck_assert_str_eq(bw->request_items[0]->table_name, "edtech-platform");
	ck_assert_uint_eq(bw->request_items[0]->n_requests, 16);
	Shoal__WriteRequest *w0 = bw->request_items[0]->requests[0];
	ck_assert_int_eq(w0->request_case, SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST);
	ck_assert(attr_s(w0->put_request->item, 0, "PK", "STUDENT#s1"));
	Shoal__WriteRequest *w15 = bw->request_items[0]->requests[15];
	ck_assert_int_eq(w15->request_case, SHOAL__WRITE_REQUEST__REQUEST_DELETE_REQUEST);
	ck_assert(attr_s(w15->delete_request->key, 0, "PK", "STUDENT#s9"));
	ck_assert_str_eq(bw->return_item_collection_metrics, "SIZE");
}
END_TEST

START_TEST(test_transactions)
{
	/* Seed 002's enroll_student: both edges, each guarded, plus the rest. */
	Shoal__Request *r = round_trip(
	    "TransactWriteItems",
	    "{'TransactItems':[{'Put':{'TableName':'edtech-platform','Item':{'PK':{'S':'STUDENT#s3'"
	    "},'SK':{'S':'ENROLLMENT#c10'},'GSI1PK':{'S':'COURSE#c10'},'GSI1SK':{'S':'STUDENT#s3'},"
	    "'progress':{'N':'0'}},'ConditionExpression':'attribute_not_exists(PK)'}},{'Put':{"
	    "'TableName':'edtech-platform','Item':{'PK':{'S':'COURSE#c10'},'SK':{'S':'ENROLLMENT#"
	    "STUDENT#s3'},'progress':{'N':'0'}},'ConditionExpression':'attribute_not_exists(PK)',"
	    "'ReturnValuesOnConditionCheckFailure':'ALL_OLD'}},{'Update':{'TableName':'edtech-"
	    "platform','Key':{'PK':{'S':'COURSE#c10'},'SK':{'S':'METADATA'}},'UpdateExpression':"
	    "'ADD enrolled :one','ExpressionAttributeValues':{':one':{'N':'1'}}}},{"
	    "'ConditionCheck':{'TableName':'edtech-platform','Key':{'PK':{'S':'STUDENT#s3'},'SK':"
	    "{'S':'PROFILE'}},'ConditionExpression':'attribute_exists(#e)',"
	    "'ExpressionAttributeNames':{'#e':'email'}}},{'Delete':{'TableName':'edtech-platform',"
	    "'Key':{'PK':{'S':'STUDENT#s3'},'SK':{'S':'WAITLIST#c10'}}}}],'ClientRequestToken':"
	    "'enroll-s3-c10','ReturnConsumedCapacity':'TOTAL'}");
	Shoal__TransactWriteItemsRequest *tw = r->transact_write_items;
	ck_assert_uint_eq(tw->n_transact_items, 5);
	ck_assert_int_eq(tw->transact_items[0]->action_case,
	                 SHOAL__TRANSACT_WRITE_ITEM__ACTION_PUT);
	ck_assert_str_eq(tw->transact_items[1]->put->return_values_on_condition_check_failure,
	                 "ALL_OLD");
	ck_assert_int_eq(tw->transact_items[2]->action_case,
	                 SHOAL__TRANSACT_WRITE_ITEM__ACTION_UPDATE);
	ck_assert_str_eq(tw->transact_items[2]->update->update_expression, "ADD enrolled :one");
	ck_assert_int_eq(tw->transact_items[3]->action_case,
	                 SHOAL__TRANSACT_WRITE_ITEM__ACTION_CONDITION_CHECK);
	ck_assert_str_eq(tw->transact_items[3]->condition_check->condition_expression,
	                 "attribute_exists(#e)");
	ck_assert_int_eq(tw->transact_items[4]->action_case,
	                 SHOAL__TRANSACT_WRITE_ITEM__ACTION_DELETE);
	ck_assert_str_eq(tw->client_request_token, "enroll-s3-c10");

	r = round_trip(
	    "TransactGetItems",
	    "{'TransactItems':[{'Get':{'TableName':'edtech-platform','Key':" KEY_S1_PROFILE
	    ",'ProjectionExpression':'#n','ExpressionAttributeNames':{'#n':'name'}}},{"
	    "'Get':{'TableName':'edtech-platform','Key':{'PK':{'S':'COURSE#c10'},'SK':{"
	    "'S':'METADATA'}}}}],'ReturnConsumedCapacity':'NONE'}");
	Shoal__TransactGetItemsRequest *tg = r->transact_get_items;
	ck_assert_uint_eq(tg->n_transact_items, 2);
	ck_assert_str_eq(tg->transact_items[0]->get->projection_expression, "#n");
	ck_assert(attr_s(tg->transact_items[1]->get->key, 1, "SK", "METADATA"));
}
END_TEST

START_TEST(test_tables)
{
	/* deploy/demo/edtech-table.json, as `aws dynamodb create-table --cli-input-json`. */
	Shoal__Request *r = round_trip_json("CreateTable", demo_file("edtech-table.json"));
	Shoal__CreateTableRequest *ct = r->create_table;
	ck_assert_str_eq(ct->table_name, "edtech-platform");
	ck_assert_uint_eq(ct->n_attribute_definitions, 4);
	ck_assert_str_eq(ct->attribute_definitions[2]->attribute_name, "GSI1PK");
	ck_assert_str_eq(ct->attribute_definitions[2]->attribute_type, "S");
	ck_assert_uint_eq(ct->n_key_schema, 2);
	ck_assert_str_eq(ct->key_schema[1]->key_type, "RANGE");
	ck_assert_uint_eq(ct->n_global_secondary_indexes, 1);
	ck_assert_str_eq(ct->global_secondary_indexes[0]->index_name, "GSI1");
	ck_assert_str_eq(ct->global_secondary_indexes[0]->projection->projection_type, "ALL");
	ck_assert_str_eq(ct->billing_mode, "PAY_PER_REQUEST");
	st_table_def def;
	ck_assert_msg(wire_create_table_from_pb(&A, ct, &def, msg) == SHOAL_OK, "%s", msg);
	ck_assert_uint_eq(def.n_indexes, 1);
	ck_assert_uint_eq(def.indexes[0].write_shards, 1);

	/* Everything else CreateTable has: an LSI, a write-sharded GSI, throughput. */
	r = round_trip(
	    "CreateTable",
	    "{'TableName':'edtech-sharded','AttributeDefinitions':[{'AttributeName':'PK',"
	    "'AttributeType':'S'},{'AttributeName':'SK','AttributeType':'S'},{'AttributeName':"
	    "'GSI1PK','AttributeType':'S'},{'AttributeName':'GSI1SK','AttributeType':'S'},{"
	    "'AttributeName':'progress','AttributeType':'N'}],'KeySchema':[{'AttributeName':'PK',"
	    "'KeyType':'HASH'},{'AttributeName':'SK','KeyType':'RANGE'}],'LocalSecondaryIndexes':[{"
	    "'IndexName':'ByProgress','KeySchema':[{'AttributeName':'PK','KeyType':'HASH'},{"
	    "'AttributeName':'progress','KeyType':'RANGE'}],'Projection':{'ProjectionType':"
	    "'INCLUDE','NonKeyAttributes':['name','email']}}],'GlobalSecondaryIndexes':[{"
	    "'IndexName':'GSI1','KeySchema':[{'AttributeName':'GSI1PK','KeyType':'HASH'},{"
	    "'AttributeName':'GSI1SK','KeyType':'RANGE'}],'Projection':{'ProjectionType':"
	    "'KEYS_ONLY'},'ProvisionedThroughput':{'ReadCapacityUnits':5,'WriteCapacityUnits':5},"
	    "'WriteShards':10}],'BillingMode':'PROVISIONED','ProvisionedThroughput':{"
	    "'ReadCapacityUnits':10,'WriteCapacityUnits':20}}");
	ct = r->create_table;
	ck_assert_uint_eq(ct->n_local_secondary_indexes, 1);
	ck_assert_uint_eq(ct->local_secondary_indexes[0]->projection->n_non_key_attributes, 2);
	ck_assert_str_eq(ct->local_secondary_indexes[0]->projection->non_key_attributes[1],
	                 "email");
	ck_assert_uint_eq(ct->global_secondary_indexes[0]->write_shards, 10);
	ck_assert_int_eq(
	    ct->global_secondary_indexes[0]->provisioned_throughput->read_capacity_units, 5);
	ck_assert_int_eq(ct->provisioned_throughput->write_capacity_units, 20);
	ck_assert_msg(wire_create_table_from_pb(&A, ct, &def, msg) == SHOAL_OK, "%s", msg);
	ck_assert_uint_eq(def.n_indexes, 2);

	r = round_trip("DescribeTable", "{'TableName':'edtech-platform'}");
	ck_assert_str_eq(r->describe_table->table_name, "edtech-platform");
	r = round_trip("DeleteTable", "{'TableName':'edtech-platform'}");
	ck_assert_str_eq(r->delete_table->table_name, "edtech-platform");
	r = round_trip("ListTables", "{'ExclusiveStartTableName':'edtech-a','Limit':10}");
	ck_assert_str_eq(r->list_tables->exclusive_start_table_name, "edtech-a");
	ck_assert_int_eq(r->list_tables->limit, 10);
	r = round_trip("ListTables", "{}");
	ck_assert(!WIRE_HAS(r->list_tables, limit));

	r = round_trip(
	    "UpdateTable",
	    "{'TableName':'edtech-platform','AttributeDefinitions':[{'AttributeName':'GSI2PK',"
	    "'AttributeType':'S'}],'BillingMode':'PAY_PER_REQUEST','GlobalSecondaryIndexUpdates':["
	    "{'Create':{'IndexName':'GSI2','KeySchema':[{'AttributeName':'GSI2PK','KeyType':'HASH'"
	    "}],'Projection':{'ProjectionType':'KEYS_ONLY'},'WriteShards':8}},{'Update':{"
	    "'IndexName':'GSI1','ProvisionedThroughput':{'ReadCapacityUnits':5,"
	    "'WriteCapacityUnits':5}}},{'Delete':{'IndexName':'OLD'}}]}");
	Shoal__UpdateTableRequest *ut = r->update_table;
	ck_assert_uint_eq(ut->n_global_secondary_index_updates, 3);
	ck_assert_int_eq(ut->global_secondary_index_updates[0]->action_case,
	                 SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE);
	ck_assert_uint_eq(ut->global_secondary_index_updates[0]->create->write_shards, 8);
	ck_assert_int_eq(ut->global_secondary_index_updates[2]->action_case,
	                 SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_DELETE);
	ck_assert_str_eq(ut->global_secondary_index_updates[2]->delete_->index_name, "OLD");

	r = round_trip("ClusterStatus", "{}");
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_CLUSTER_STATUS);
	/* No body at all is an empty one. */
	ck_assert_int_eq(wire_api_request_from_json(&A, "ListTables", NULL, &r, msg), SHOAL_OK);
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_LIST_TABLES);
}
END_TEST

/* Unknown members, and the CreateTable parameters Shoal has no use for, are
 * ignored: the Request is the one without them. */
START_TEST(test_ignored)
{
	Shoal__Request *r;
	json_t *back;
	ck_assert_int_eq(wire_api_request_from_json(
	                     &A, "PutItem",
	                     J("{'TableName':'t1','Item':{'a':{'S':'x'}},'Foo':{'bar':[1]},"
	                       "'tablename':5,'ConditionExpression':null}"),
	                     &r, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(wire_api_request_to_json(r, NULL, &back, msg), SHOAL_OK);
	assert_json_eq(J("{'TableName':'t1','Item':{'a':{'S':'x'}}}"), keep(back));

	json_t *ct = json_deep_copy(demo_file("edtech-table.json"));
	keep(ct);
	/* StreamSpecification is served (DynamoDB Streams), not ignored. */
	json_object_set_new(
	    ct, "StreamSpecification",
	    json_pack("{s:b,s:s}", "StreamEnabled", 1, "StreamViewType", "NEW_AND_OLD_IMAGES"));
	json_t *plain = keep(json_deep_copy(ct));
	json_object_set_new(ct, "SSESpecification", json_pack("{s:b}", "Enabled", 1));
	/* Carried, not ignored: */
	json_object_set_new(ct, "Tags", json_pack("[{s:s,s:s}]", "Key", "team", "Value", "edu"));
	json_object_set_new(ct, "TableClass", json_string("STANDARD"));
	json_object_set_new(ct, "DeletionProtectionEnabled", json_false());
	json_object_set_new(plain, "Tags", json_pack("[{s:s,s:s}]", "Key", "team", "Value", "edu"));
	json_object_set_new(plain, "TableClass", json_string("STANDARD"));
	json_object_set_new(plain, "DeletionProtectionEnabled", json_false());
	json_object_set_new(json_array_get(json_object_get(ct, "GlobalSecondaryIndexes"), 0),
	                    "WarmThroughput", json_pack("{s:i}", "ReadUnitsPerSecond", 100));
	ck_assert_int_eq(wire_api_request_from_json(&A, "CreateTable", ct, &r, msg), SHOAL_OK);
	ck_assert_int_eq(wire_api_request_to_json(r, NULL, &back, msg), SHOAL_OK);
	assert_json_eq(plain, keep(back));
}
END_TEST

typedef struct err_case {
	const char *op;
	const char *body;
	int code;
	const char *message;
} err_case;

static const err_case request_errors[] = {
    {"Foo", "{}", SHOAL_E_UNKNOWN_OPERATION, "An unknown operation was requested."},
    {"getitem", "{}", SHOAL_E_UNKNOWN_OPERATION, "An unknown operation was requested."},
    {"", "{}", SHOAL_E_UNKNOWN_OPERATION, "An unknown operation was requested."},
    /* The body itself. */
    {"GetItem", "[]", SHOAL_E_SERIALIZATION, LIST},
    {"GetItem", "5", SHOAL_E_SERIALIZATION, "Unexpected value type in payload"},
    /* Strings. */
    {"GetItem", "{'TableName':5}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    {"GetItem", "{'TableName':1.5}", SHOAL_E_SERIALIZATION,
     "DECIMAL_VALUE cannot be converted to String"},
    {"GetItem", "{'TableName':true}", SHOAL_E_SERIALIZATION,
     "TRUE_VALUE cannot be converted to String"},
    {"GetItem", "{'TableName':{}}", SHOAL_E_SERIALIZATION, STRUCT},
    {"GetItem", "{'TableName':['t']}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type class java.lang.String"},
    {"PutItem", "{'ReturnValues':false}", SHOAL_E_SERIALIZATION,
     "FALSE_VALUE cannot be converted to String"},
    /* Numbers and booleans. */
    {"Query", "{'Limit':'10'}", SHOAL_E_SERIALIZATION,
     "STRING_VALUE cannot be converted to Integer"},
    {"Query", "{'Limit':1.5}", SHOAL_E_SERIALIZATION,
     "DECIMAL_VALUE cannot be converted to Integer"},
    {"Query", "{'Limit':4294967296}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to Integer"},
    {"Scan", "{'Segment':[1]}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type class java.lang.Integer"},
    {"GetItem", "{'ConsistentRead':1}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to Boolean"},
    {"GetItem", "{'ConsistentRead':'maybe'}", SHOAL_E_SERIALIZATION,
     "Unexpected token received from parser"},
    {"CreateTable", "{'ProvisionedThroughput':{'ReadCapacityUnits':'5'}}", SHOAL_E_SERIALIZATION,
     "STRING_VALUE cannot be converted to Long"},
    {"CreateTable", "{'GlobalSecondaryIndexes':[{'WriteShards':-1}]}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to Integer"},
    /* Structures, lists, maps. */
    {"CreateTable", "{'ProvisionedThroughput':[]}", SHOAL_E_SERIALIZATION, LIST},
    {"CreateTable", "{'ProvisionedThroughput':'x'}", SHOAL_E_SERIALIZATION,
     "Unexpected value type in payload"},
    {"CreateTable", "{'KeySchema':{}}", SHOAL_E_SERIALIZATION, STRUCT},
    {"CreateTable", "{'KeySchema':'x'}", SHOAL_E_SERIALIZATION, "Unexpected field type"},
    {"CreateTable", "{'KeySchema':[5]}", SHOAL_E_SERIALIZATION, "Unexpected value type in payload"},
    {"TransactWriteItems", "{'TransactItems':{}}", SHOAL_E_SERIALIZATION, STRUCT},
    {"BatchGetItem", "{'RequestItems':[]}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type java.util.Map<java.lang.String, "
     "com.amazonaws.dynamodb.v20120810.KeysAndAttributes>"},
    {"BatchGetItem", "{'RequestItems':7}", SHOAL_E_SERIALIZATION, "Unexpected field type"},
    {"BatchWriteItem", "{'RequestItems':{'t1':{}}}", SHOAL_E_SERIALIZATION, STRUCT},
    {"BatchWriteItem", "{'RequestItems':{'t1':[{'PutRequest':[]}]}}", SHOAL_E_SERIALIZATION, LIST},
    /* Values go through the value codec, with its messages. */
    {"GetItem", "{'Key':[]}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type java.util.Map<java.lang.String, "
     "com.amazonaws.dynamodb.v20120810.AttributeValue>"},
    {"GetItem", "{'Key':{'PK':{'S':1}}}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    {"GetItem", "{'ExpressionAttributeNames':[]}", SHOAL_E_SERIALIZATION,
     "Unrecognized collection type java.util.Map<java.lang.String, java.lang.String>"},
    {"PutItem", "{'Item':{'a':{}}}", SHOAL_E_VALIDATION, EMPTY_AV},
    /* ... which DynamoDB places in a sentence naming the placeholder. */
    {"PutItem", "{'ExpressionAttributeValues':{':a':{'S':'x'},':b':{}}}", SHOAL_E_VALIDATION,
     "ExpressionAttributeValues contains invalid value: " EMPTY_AV " for key :b"},
    {"Query", "{'ExclusiveStartKey':{'a':{'S':'x','N':'1'}}}", SHOAL_E_VALIDATION,
     "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the "
     "supported datatypes"},
    /* Serialisation errors win over validation errors wherever they are. */
    {"PutItem", "{'Item':{'a':{}},'ReturnValues':5}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    {"GetItem", "{'AttributesToGet':['a'],'TableName':5}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    /* Accepted-and-ignored parameters are still type-checked. */
    {"CreateTable", "{'StreamSpecification':'yes'}", SHOAL_E_SERIALIZATION,
     "Unexpected value type in payload"},
    {"CreateTable", "{'Tags':{}}", SHOAL_E_SERIALIZATION, STRUCT},
    {"UpdateTable", "{'DeletionProtectionEnabled':5}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to Boolean"},
    {"CreateTable", "{'TableClass':3}", SHOAL_E_SERIALIZATION,
     "NUMBER_VALUE cannot be converted to String"},
    /* Legacy parameters are translated (test_wire_legacy.c has the rest);
     * their misuse is refused in DynamoDB's words. */
    {"GetItem", "{'TableName':'t1','AttributesToGet':['a'],'ProjectionExpression':'a'}",
     SHOAL_E_VALIDATION,
     "Can not use both expression and non-expression parameters in the same request: "
     "Non-expression parameters: {AttributesToGet} Expression parameters: "
     "{ProjectionExpression}"},
    {"PutItem", "{'Expected':{'a':{'Exists':true}}}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Value must be provided when Exists is true "
     "for Attribute: a"},
    {"UpdateItem", "{'AttributeUpdates':{'a':{'Action':'PUT'}}}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Only DELETE action is allowed when no "
     "attribute value is specified"},
    {"DeleteItem", "{'ConditionalOperator':'AND'}", SHOAL_E_VALIDATION,
     "ConditionalOperator cannot be used without Filter or Expected"},
    {"Query", "{'KeyConditions':{}}", SHOAL_E_VALIDATION,
     "Conditions can be of length 1 or 2 only"},
    {"Query", "{'QueryFilter':{},'FilterExpression':'a = :a'}", SHOAL_E_VALIDATION,
     "Can not use both expression and non-expression parameters in the same request: "
     "Non-expression parameters: {QueryFilter} Expression parameters: {FilterExpression}"},
    {"Scan", "{'ScanFilter':{'a':{'ComparisonOperator':'EQ'}}}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Invalid number of argument(s) for the EQ "
     "ComparisonOperator"},
    {"BatchGetItem", "{'RequestItems':{'t1':{'Keys':[],'AttributesToGet':['a','a']}}}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Duplicate value in attribute name: a"},
    /* Shapes protobuf cannot hold. */
    {"TransactWriteItems",
     "{'TransactItems':[{'Put':{'TableName':'t1'},'Delete':{'TableName':'t1'}}]}",
     SHOAL_E_VALIDATION, "TransactItems can only contain one of Check, Put, Update or Delete"},
    {"BatchWriteItem", "{'RequestItems':{'t1':[{'PutRequest':{},'DeleteRequest':{}}]}}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: A WriteRequest must contain exactly one of "
     "PutRequest or DeleteRequest"},
    {"CreateTable", "{'KeySchema':[null]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'keySchema.1.member' failed to satisfy "
     "constraint: Member must not be null"},
    {"TransactGetItems", "{'TransactItems':[{'Get':{'TableName':'t1'}},null]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'transactItems.2.member' failed to satisfy "
     "constraint: Member must not be null"},
    {"BatchGetItem", "{'RequestItems':{'t1':{'Keys':[{},null]}}}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'requestItems.t1.member.keys.2.member' failed "
     "to satisfy constraint: Member must not be null"},
    {"BatchWriteItem", "{'RequestItems':{'t1':null}}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'requestItems.t1.member' failed to satisfy "
     "constraint: Member must not be null"},
    /* A tag's Value may be empty but not absent (protobuf cannot tell the
     * two apart, so the JSON front door does). */
    {"TagResource", "{'ResourceArn':'x','Tags':[{'Key':'k','Value':''},{'Key':'k2'}]}",
     SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'tags.2.member.value' failed to satisfy "
     "constraint: Member must not be null"},
    {"CreateTable", "{'Tags':[{'Key':'k','Value':null}]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at 'tags.1.member.value' failed to satisfy "
     "constraint: Member must not be null"},
    {"DescribeTable", "{'TableName':'t\\u0000x'}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value at 'tableName' failed to satisfy constraint: Member "
     "must not contain the character U+0000"},
};

START_TEST(test_request_errors)
{
	for (size_t i = 0; i < sizeof(request_errors) / sizeof(request_errors[0]); i++) {
		const err_case *e = &request_errors[i];
		Shoal__Request *r = (Shoal__Request *)&msg; /* must be reset */
		msg[0] = '\0';
		int rc = wire_api_request_from_json(&A, e->op, J(e->body), &r, msg);
		ck_assert_msg(rc == e->code, "%s %s: %s (%s)", e->op, e->body, shoal_err_name(rc),
		              msg);
		ck_assert_msg(strcmp(msg, e->message) == 0, "%s %s:\n want %s\n got  %s", e->op,
		              e->body, e->message, msg);
		ck_assert_ptr_null(r);
	}
	/* A Request without an operation has no JSON form. */
	Shoal__Request none = SHOAL__REQUEST__INIT;
	json_t *j;
	ck_assert_int_eq(wire_api_request_to_json(&none, NULL, &j, msg), SHOAL_E_UNKNOWN_OPERATION);
	ck_assert_ptr_null(j);
	ck_assert_str_eq(wire_api_operation_name(&none), "");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */
/* ------------------------------------------------------------------------ */

/* The compact JSON of resp for op (NULL: from the result), asserted OK. */
static const char *resp_text(const Shoal__Response *resp, const char *op)
{
	json_t *j;
	int rc = wire_api_response_to_json(resp, op, &j, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", msg);
	keep(j);
	return dump(j);
}

static Shoal__Response *resp_new(void)
{
	Shoal__Response *r = sh_arena_alloc(&A, sizeof(*r));
	shoal__response__init(r);
	return r;
}

static Shoal__Item *item_pb(const char *text)
{
	json_t *j = J(text);
	st_value v;
	ck_assert_int_eq(wire_item_from_json(&A, j, &v, msg), SHOAL_OK);
	Shoal__Item *it;
	ck_assert_int_eq(wire_item_to_pb(&A, &v, &it, msg), SHOAL_OK);
	return it;
}

static st_value item_st(const char *text)
{
	st_value v;
	ck_assert_int_eq(wire_item_from_json(&A, J(text), &v, msg), SHOAL_OK);
	return v;
}

static Shoal__ConsumedCapacity *capacity(const char *table, double units)
{
	Shoal__ConsumedCapacity *c = sh_arena_alloc(&A, sizeof(*c));
	shoal__consumed_capacity__init(c);
	c->table_name = (char *)table;
	c->capacity_units = units;
	return c;
}

#define ITEM_S1 "{'PK':{'S':'STUDENT#s1'},'SK':{'S':'PROFILE'},'name':{'S':'Ana Souza'}}"

/* Placement hashes use all 64 bits: text in JSON (WIRE_API_HASH), both ways. */
START_TEST(test_partition_hashes)
{
	Shoal__Request *r = round_trip(
	    "Admin", "{'MovePartition':{'TableName':'t','Hash':'0xffffffffffffffff','ToGroup':2}}");
	ck_assert_int_eq(r->admin->action_case, SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION);
	ck_assert_uint_eq(r->admin->move_partition->hash, UINT64_MAX);
	ck_assert_uint_eq(r->admin->move_partition->to_group, 2);
	r = round_trip("Admin", "{'SplitPartition':{'TableName':'t','At':'0x8000000000000000'}}");
	ck_assert_uint_eq(r->admin->split_partition->at, 0x8000000000000000ull);
	/* Decimal text, hex in either case, and a plain JSON integer. */
	static const struct {
		const char *body;
		uint64_t want;
	} in[] = {
	    {"{'MovePartition':{'TableName':'t','Hash':'18446744073709551615'}}", UINT64_MAX},
	    {"{'MovePartition':{'TableName':'t','Hash':'0XaB'}}", 0xab},
	    {"{'MovePartition':{'TableName':'t','Hash':'0'}}", 0},
	    {"{'MovePartition':{'TableName':'t','Hash':12345}}", 12345},
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		ck_assert_int_eq(wire_api_request_from_json(&A, "Admin", J(in[i].body), &r, msg),
		                 SHOAL_OK);
		ck_assert_uint_eq(r->admin->move_partition->hash, in[i].want);
	}
	static const char *const bad[] = {
	    "{'MovePartition':{'TableName':'t','Hash':'18446744073709551616'}}",
	    "{'MovePartition':{'TableName':'t','Hash':'0x10000000000000000'}}",
	    "{'MovePartition':{'TableName':'t','Hash':'0x'}}",
	    "{'MovePartition':{'TableName':'t','Hash':''}}",
	    "{'MovePartition':{'TableName':'t','Hash':'-1'}}",
	    "{'MovePartition':{'TableName':'t','Hash':'12z'}}",
	    "{'SplitPartition':{'TableName':'t','At':' 1'}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(wire_api_request_from_json(&A, "Admin", J(bad[i]), &r, msg),
		                 SHOAL_E_VALIDATION);
		ck_assert_msg(strstr(msg, "Member must be a 64-bit hash") != NULL, "%s", msg);
	}
	ck_assert_int_eq(
	    wire_api_request_from_json(&A, "Admin",
	                               J("{'MovePartition':{'TableName':'t','Hash':-1}}"), &r, msg),
	    SHOAL_E_SERIALIZATION);

	/* ClusterStatus's map partitions: every member written, zero or not. */
	Shoal__Response *resp = resp_new();
	Shoal__ClusterStatusResponse *cs = sh_arena_alloc(&A, sizeof(*cs));
	Shoal__MapPartition *mp = sh_arena_alloc(&A, sizeof(*mp));
	Shoal__MapPartition **mps = sh_arena_alloc(&A, sizeof(*mps));
	shoal__cluster_status_response__init(cs);
	shoal__map_partition__init(mp);
	mp->table_id = 7;
	mp->table_name = "orders";
	mp->lo = 0xAAAAAAAAAAAAAAABull;
	mp->hi = UINT64_MAX;
	mp->group = 3;
	mps[0] = mp;
	cs->map_partitions = mps;
	cs->n_map_partitions = 1;
	resp->result_case = SHOAL__RESPONSE__RESULT_CLUSTER_STATUS;
	resp->cluster_status = cs;
	const char *text = resp_text(resp, "ClusterStatus");
	ck_assert_msg(strstr(text, "\"MapPartitions\":[{\"TableId\":7,\"TableName\":\"orders\","
	                           "\"Lo\":\"0xaaaaaaaaaaaaaaab\",\"Hi\":\"0xffffffffffffffff\","
	                           "\"Group\":3,\"MovingTo\":0}]") != NULL,
	              "%s", text);
}
END_TEST

START_TEST(test_item_responses)
{
	Shoal__Response *r = resp_new();
	r->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
	ck_assert_int_eq(wire_get_item_resp_to_pb(&A, NULL, &r->get_item, msg), SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "GetItem"), "{}");
	st_value it = item_st(ITEM_S1);
	ck_assert_int_eq(wire_get_item_resp_to_pb(&A, &it, &r->get_item, msg), SHOAL_OK);
	r->get_item->consumed_capacity = capacity("edtech-platform", 0.5);
	ck_assert_str_eq(resp_text(r, "GetItem"),
	                 "{\"Item\":{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"PROFILE\"},"
	                 "\"name\":{\"S\":\"Ana Souza\"}},\"ConsumedCapacity\":{\"TableName\":"
	                 "\"edtech-platform\",\"CapacityUnits\":0.5}}");
	/* The operation may be left to the result. */
	ck_assert_str_eq(resp_text(r, NULL), resp_text(r, "GetItem"));

	st_write_result none = {0};
	st_write_result old = {.attributes = &it};
	r->result_case = SHOAL__RESPONSE__RESULT_PUT_ITEM;
	ck_assert_int_eq(wire_put_item_resp_to_pb(&A, &none, &r->put_item, msg), SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "PutItem"), "{}");
	ck_assert_int_eq(wire_put_item_resp_to_pb(&A, &old, &r->put_item, msg), SHOAL_OK);
	r->put_item->consumed_capacity = capacity("edtech-platform", 1.0);
	Shoal__ItemCollectionMetrics *icm = sh_arena_alloc(&A, sizeof(*icm));
	shoal__item_collection_metrics__init(icm);
	icm->item_collection_key = item_pb("{'PK':{'S':'STUDENT#s1'}}");
	double range[2] = {0.0, 1.0};
	icm->size_estimate_range_gb = range;
	icm->n_size_estimate_range_gb = 2;
	r->put_item->item_collection_metrics = icm;
	ck_assert_str_eq(
	    resp_text(r, "PutItem"),
	    "{\"Attributes\":{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"PROFILE\"},"
	    "\"name\":{\"S\":\"Ana Souza\"}},\"ItemCollectionMetrics\":{"
	    "\"ItemCollectionKey\":{\"PK\":{\"S\":\"STUDENT#s1\"}},"
	    "\"SizeEstimateRangeGB\":[0.0,1.0]},\"ConsumedCapacity\":{\"TableName\":"
	    "\"edtech-platform\",\"CapacityUnits\":1.0}}");

	r->result_case = SHOAL__RESPONSE__RESULT_UPDATE_ITEM;
	ck_assert_int_eq(wire_update_item_resp_to_pb(&A, &old, &r->update_item, msg), SHOAL_OK);
	ck_assert_str_eq(
	    resp_text(r, "UpdateItem"),
	    "{\"Attributes\":{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"PROFILE\"},"
	    "\"name\":{\"S\":\"Ana Souza\"}}}");
	r->result_case = SHOAL__RESPONSE__RESULT_DELETE_ITEM;
	ck_assert_int_eq(wire_delete_item_resp_to_pb(&A, &none, &r->delete_item, msg), SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "DeleteItem"), "{}");

	/* A result that is not the operation's. */
	json_t *j;
	ck_assert_int_eq(wire_api_response_to_json(r, "GetItem", &j, msg), SHOAL_E_INTERNAL);
	ck_assert_ptr_null(j);
	ck_assert_int_eq(wire_api_response_to_json(r, "Bogus", &j, msg), SHOAL_E_UNKNOWN_OPERATION);
	/* Success without a result: {}. */
	Shoal__Response *empty = resp_new();
	ck_assert_str_eq(resp_text(empty, "TransactWriteItems"), "{}");
}
END_TEST

/* ReturnItemCollectionMetrics: from a write result, per table for batches
 * and transactions (one entry per collection), in DynamoDB's JSON. */
START_TEST(test_item_collection_metrics)
{
	double range[2];
	wire_icm_range(0, range);
	ck_assert(range[0] == 0.0 && range[1] == 1.0);
	wire_icm_range(3ull << 30, range); /* exactly 3 GiB */
	ck_assert(range[0] == 3.0 && range[1] == 4.0);
	wire_icm_range((10ull << 30) - 1, range);
	ck_assert(range[0] == 9.0 && range[1] == 10.0);
	ck_assert(wire_ricm_parse("SIZE"));
	ck_assert(!wire_ricm_parse("NONE") && !wire_ricm_parse(NULL));

	/* No LSI: nothing. */
	st_write_result plain = {0};
	Shoal__ItemCollectionMetrics *m;
	ck_assert_int_eq(wire_icm_new(&A, &plain, &m, msg), SHOAL_OK);
	ck_assert_ptr_null(m);

	st_value s1 = item_st("{'v':{'S':'STUDENT#s1'}}"), s2 = item_st("{'v':{'S':'STUDENT#s2'}}");
	st_write_result w1 = {
	    .coll_attr = "PK", .coll_pk = &s1.u.map.a[0].value, .coll_size = 2048};
	st_write_result w2 = {
	    .coll_attr = "PK", .coll_pk = &s2.u.map.a[0].value, .coll_size = (5ull << 30) + 1};
	Shoal__Response *r = resp_new();
	r->result_case = SHOAL__RESPONSE__RESULT_DELETE_ITEM;
	ck_assert_int_eq(wire_delete_item_resp_to_pb(&A, &plain, &r->delete_item, msg), SHOAL_OK);
	ck_assert_int_eq(wire_icm_new(&A, &w1, &r->delete_item->item_collection_metrics, msg),
	                 SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "DeleteItem"),
	                 "{\"ItemCollectionMetrics\":{\"ItemCollectionKey\":{\"PK\":{\"S\":"
	                 "\"STUDENT#s1\"}},\"SizeEstimateRangeGB\":[0.0,1.0]}}");

	/* A batch: two writes in s1's collection are one entry, the later
	 * figure; another table gets its own list. */
	Shoal__BatchWriteItemResponse *bw = sh_arena_alloc(&A, sizeof(*bw));
	shoal__batch_write_item_response__init(bw);
	Shoal__ItemCollectionMetrics *m1, *m2, *m3;
	ck_assert_int_eq(wire_icm_new(&A, &w1, &m1, msg), SHOAL_OK);
	ck_assert_int_eq(wire_icm_new(&A, &w2, &m2, msg), SHOAL_OK);
	w1.coll_size = 1ull << 30;
	ck_assert_int_eq(wire_icm_new(&A, &w1, &m3, msg), SHOAL_OK);
	Shoal__TableItemCollectionMetrics **part = NULL;
	size_t n_part = 0;
	ck_assert_int_eq(wire_icm_list_add(&A, &part, &n_part, "edtech-platform", m1), SHOAL_OK);
	ck_assert_int_eq(wire_icm_list_add(&A, &part, &n_part, "edtech-platform", NULL), SHOAL_OK);
	ck_assert_int_eq(wire_icm_list_add(&A, &part, &n_part, "edtech-platform", m2), SHOAL_OK);
	ck_assert_int_eq(wire_icm_list_add(&A, &part, &n_part, "t2", m2), SHOAL_OK);
	ck_assert_uint_eq(n_part, 2);
	ck_assert_uint_eq(part[0]->n_metrics, 2);
	/* Another group's answer merged in (the router's side). */
	ck_assert_int_eq(wire_icm_list_merge(&A, &bw->item_collection_metrics,
	                                     &bw->n_item_collection_metrics, part, n_part),
	                 SHOAL_OK);
	Shoal__TableItemCollectionMetrics **later = NULL;
	size_t n_later = 0;
	ck_assert_int_eq(wire_icm_list_add(&A, &later, &n_later, "edtech-platform", m3), SHOAL_OK);
	ck_assert_int_eq(wire_icm_list_merge(&A, &bw->item_collection_metrics,
	                                     &bw->n_item_collection_metrics, later, n_later),
	                 SHOAL_OK);
	bw->consumed_capacity = sh_arena_alloc(&A, sizeof(*bw->consumed_capacity));
	bw->consumed_capacity[0] = capacity("edtech-platform", 3.0);
	bw->n_consumed_capacity = 1;
	r->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
	r->batch_write_item = bw;
	ck_assert_str_eq(
	    resp_text(r, "BatchWriteItem"),
	    "{\"UnprocessedItems\":{},\"ItemCollectionMetrics\":{\"edtech-platform\":[{"
	    "\"ItemCollectionKey\":{\"PK\":{\"S\":\"STUDENT#s1\"}},\"SizeEstimateRangeGB\":["
	    "1.0,2.0]},{\"ItemCollectionKey\":{\"PK\":{\"S\":\"STUDENT#s2\"}},"
	    "\"SizeEstimateRangeGB\":[5.0,6.0]}],\"t2\":[{\"ItemCollectionKey\":{\"PK\":{"
	    "\"S\":\"STUDENT#s2\"}},\"SizeEstimateRangeGB\":[5.0,6.0]}]},"
	    "\"ConsumedCapacity\":[{\"TableName\":\"edtech-platform\",\"CapacityUnits\":3.0}]}");

	Shoal__TransactWriteItemsResponse *tw = sh_arena_alloc(&A, sizeof(*tw));
	shoal__transact_write_items_response__init(tw);
	tw->item_collection_metrics = later;
	tw->n_item_collection_metrics = n_later;
	r->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS;
	r->transact_write_items = tw;
	ck_assert_str_eq(resp_text(r, "TransactWriteItems"),
	                 "{\"ItemCollectionMetrics\":{\"edtech-platform\":[{"
	                 "\"ItemCollectionKey\":{\"PK\":{\"S\":\"STUDENT#s1\"}},"
	                 "\"SizeEstimateRangeGB\":[1.0,2.0]}]}}");
}
END_TEST

START_TEST(test_page_responses)
{
	st_value items[2] = {
	    item_st("{'PK':{'S':'STUDENT#s1'},'SK':{'S':'ENROLLMENT#c10'},'progress':{'N':'40'}}"),
	    item_st("{'PK':{'S':'STUDENT#s2'},'SK':{'S':'ENROLLMENT#c10'},'progress':{'N':'75'}}")};
	st_value last =
	    item_st("{'GSI1PK':{'S':'COURSE#c10'},'GSI1SK':{'S':'STUDENT#s2'},'PK':{'S':"
	            "'STUDENT#s2'},'SK':{'S':'ENROLLMENT#c10'}}");
	st_page page = {.items = items, .count = 2, .scanned = 3, .last_evaluated_key = &last};
	Shoal__Response *r = resp_new();
	r->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	ck_assert_int_eq(wire_query_resp_to_pb(&A, &page, &r->query, msg), SHOAL_OK);
	r->query->consumed_capacity = capacity("edtech-platform", 0.5);
	ck_assert_str_eq(
	    resp_text(r, "Query"),
	    "{\"Items\":[{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"ENROLLMENT#c10\"},"
	    "\"progress\":{\"N\":\"40\"}},{\"PK\":{\"S\":\"STUDENT#s2\"},\"SK\":{\"S\":"
	    "\"ENROLLMENT#c10\"},\"progress\":{\"N\":\"75\"}}],\"Count\":2,\"ScannedCount\":3,"
	    "\"LastEvaluatedKey\":{\"GSI1PK\":{\"S\":\"COURSE#c10\"},\"GSI1SK\":{\"S\":"
	    "\"STUDENT#s2\"},\"PK\":{\"S\":\"STUDENT#s2\"},\"SK\":{\"S\":\"ENROLLMENT#c10\"}},"
	    "\"ConsumedCapacity\":{\"TableName\":\"edtech-platform\",\"CapacityUnits\":0.5}}");

	/* Nothing found: Items [] and zero counts are still written. */
	st_page nothing = {0};
	r->result_case = SHOAL__RESPONSE__RESULT_SCAN;
	ck_assert_int_eq(wire_scan_resp_to_pb(&A, &nothing, &r->scan, msg), SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "Scan"), "{\"Items\":[],\"Count\":0,\"ScannedCount\":0}");

	/* Select COUNT: no Items.  Known from the request ... */
	st_page counted = {.count = 5, .scanned = 7};
	r->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	ck_assert_int_eq(wire_query_resp_to_pb(&A, &counted, &r->query, msg), SHOAL_OK);
	Shoal__Request *q;
	ck_assert_int_eq(wire_api_request_from_json(&A, "Query", J("{'Select':'COUNT'}"), &q, msg),
	                 SHOAL_OK);
	json_t *j;
	ck_assert_int_eq(wire_api_response_to_json_for(r, q, &j, msg), SHOAL_OK);
	ck_assert_str_eq(dump(keep(j)), "{\"Count\":5,\"ScannedCount\":7}");
	/* ... or guessed from a count without items. */
	ck_assert_str_eq(resp_text(r, "Query"), "{\"Count\":5,\"ScannedCount\":7}");
	r->query->count = 0;
	ck_assert_int_eq(wire_api_response_to_json_for(r, q, &j, msg), SHOAL_OK);
	ck_assert_str_eq(dump(keep(j)), "{\"Count\":0,\"ScannedCount\":7}");
	ck_assert_str_eq(resp_text(r, "Query"), "{\"Items\":[],\"Count\":0,\"ScannedCount\":7}");
	/* Without COUNT the request keeps Items even when empty. */
	ck_assert_int_eq(wire_api_request_from_json(&A, "Query", J("{}"), &q, msg), SHOAL_OK);
	ck_assert_int_eq(wire_api_response_to_json_for(r, q, &j, msg), SHOAL_OK);
	ck_assert_str_eq(dump(keep(j)), "{\"Items\":[],\"Count\":0,\"ScannedCount\":7}");
	/* The request's operation must match the result. */
	ck_assert_int_eq(wire_api_request_from_json(&A, "Scan", J("{}"), &q, msg), SHOAL_OK);
	ck_assert_int_eq(wire_api_response_to_json_for(r, q, &j, msg), SHOAL_E_INTERNAL);
}
END_TEST

static Shoal__TableItems *table_items(const char *table, int n, ...)
{
	Shoal__TableItems *t = sh_arena_alloc(&A, sizeof(*t));
	shoal__table_items__init(t);
	t->table_name = (char *)table;
	t->items = sh_arena_calloc(&A, (size_t)n, sizeof(*t->items));
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		t->items[t->n_items++] = item_pb(va_arg(ap, const char *));
	va_end(ap);
	return t;
}

START_TEST(test_batch_responses)
{
	/* One table answered by two groups: one "Responses" entry. */
	Shoal__Response *r = resp_new();
	Shoal__BatchGetItemResponse *bg = sh_arena_alloc(&A, sizeof(*bg));
	shoal__batch_get_item_response__init(bg);
	r->result_case = SHOAL__RESPONSE__RESULT_BATCH_GET_ITEM;
	r->batch_get_item = bg;
	ck_assert_str_eq(resp_text(r, "BatchGetItem"), "{\"Responses\":{},\"UnprocessedKeys\":{}}");
	Shoal__TableItems *parts[3] = {
	    table_items("edtech-platform", 1, "{'PK':{'S':'STUDENT#s1'},'SK':{'S':'PROFILE'}}"),
	    table_items("other", 0),
	    table_items("edtech-platform", 1, "{'PK':{'S':'COURSE#c10'},'SK':{'S':'METADATA'}}")};
	bg->responses = parts;
	bg->n_responses = 3;
	Shoal__TableKeysAndAttributes *uk = sh_arena_alloc(&A, sizeof(*uk));
	shoal__table_keys_and_attributes__init(uk);
	uk->table_name = "edtech-platform";
	Shoal__Item *ukeys[1] = {item_pb("{'PK':{'S':'STUDENT#s2'},'SK':{'S':'PROFILE'}}")};
	uk->keys = ukeys;
	uk->n_keys = 1;
	uk->consistent_read = 1;
	bg->unprocessed_keys = &uk;
	bg->n_unprocessed_keys = 1;
	ck_assert_str_eq(
	    resp_text(r, "BatchGetItem"),
	    "{\"Responses\":{\"edtech-platform\":[{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":"
	    "\"PROFILE\"}},{\"PK\":{\"S\":\"COURSE#c10\"},\"SK\":{\"S\":\"METADATA\"}}],\"other\":["
	    "]"
	    "},\"UnprocessedKeys\":{\"edtech-platform\":{\"Keys\":[{\"PK\":{\"S\":\"STUDENT#s2\"},"
	    "\"SK\":{\"S\":\"PROFILE\"}}],\"ConsistentRead\":true}}}");

	Shoal__BatchWriteItemResponse *bw = sh_arena_alloc(&A, sizeof(*bw));
	shoal__batch_write_item_response__init(bw);
	r->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
	r->batch_write_item = bw;
	ck_assert_str_eq(resp_text(r, "BatchWriteItem"), "{\"UnprocessedItems\":{}}");

	Shoal__TransactGetItemsResponse *tg = sh_arena_alloc(&A, sizeof(*tg));
	shoal__transact_get_items_response__init(tg);
	r->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_GET_ITEMS;
	r->transact_get_items = tg;
	ck_assert_str_eq(resp_text(r, "TransactGetItems"), "{\"Responses\":[]}");
	Shoal__ItemResponse ir[2] = {SHOAL__ITEM_RESPONSE__INIT, SHOAL__ITEM_RESPONSE__INIT};
	ir[0].item = item_pb("{'PK':{'S':'STUDENT#s1'}}");
	Shoal__ItemResponse *irs[2] = {&ir[0], &ir[1]};
	tg->responses = irs;
	tg->n_responses = 2;
	ck_assert_str_eq(resp_text(r, "TransactGetItems"),
	                 "{\"Responses\":[{\"Item\":{\"PK\":{\"S\":\"STUDENT#s1\"}}},{}]}");
}
END_TEST

START_TEST(test_table_responses)
{
	Shoal__Request *req;
	ck_assert_int_eq(wire_api_request_from_json(&A, "CreateTable",
	                                            demo_file("edtech-table.json"), &req, msg),
	                 SHOAL_OK);
	st_table_info info = {.item_count = 15, .size_bytes = 2345};
	ck_assert_int_eq(wire_create_table_from_pb(&A, req->create_table, &info.def, msg),
	                 SHOAL_OK);
	info.def.id = 7;
	info.def.created_ms = 1725000000500;
	Shoal__Response *r = resp_new();
	Shoal__DescribeTableResponse *dt = sh_arena_alloc(&A, sizeof(*dt));
	shoal__describe_table_response__init(dt);
	r->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE;
	r->describe_table = dt;
	ck_assert_int_eq(wire_table_desc_to_pb(&A, &info, "ACTIVE", &dt->table, msg), SHOAL_OK);
	const char *want =
	    "{\"Table\":{\"AttributeDefinitions\":[{\"AttributeName\":\"PK\",\"AttributeType\":"
	    "\"S\"},{\"AttributeName\":\"SK\",\"AttributeType\":\"S\"},{\"AttributeName\":"
	    "\"GSI1PK\",\"AttributeType\":\"S\"},{\"AttributeName\":\"GSI1SK\",\"AttributeType\":"
	    "\"S\"}],\"TableName\":\"edtech-platform\",\"KeySchema\":[{\"AttributeName\":\"PK\","
	    "\"KeyType\":\"HASH\"},{\"AttributeName\":\"SK\",\"KeyType\":\"RANGE\"}],"
	    "\"TableStatus\":\"ACTIVE\",\"CreationDateTime\":1725000000.5,"
	    "\"ProvisionedThroughput\":"
	    "{\"NumberOfDecreasesToday\":0,\"ReadCapacityUnits\":0,\"WriteCapacityUnits\":0},"
	    "\"TableSizeBytes\":2345,\"ItemCount\":15,\"TableArn\":\"arn:aws:dynamodb:shoal:"
	    "000000000000:table/edtech-platform\",\"TableId\":"
	    /* uuid.uuid5(UUID('6f3c0b5e-1a2d-4e8f-9b47-c261d0357a94'),
	     *            '7/1725000000500/edtech-platform') in Python */
	    "\"dfd14d44-0e82-5674-b673-8e8cb060fc1e\",\"BillingModeSummary\":{"
	    "\"BillingMode\":\"PAY_PER_REQUEST\",\"LastUpdateToPayPerRequestDateTime\":"
	    "1725000000.5},\"GlobalSecondaryIndexes\":[{\"IndexName\":"
	    "\"GSI1\",\"KeySchema\":[{\"AttributeName\":\"GSI1PK\",\"KeyType\":\"HASH\"},{"
	    "\"AttributeName\":\"GSI1SK\",\"KeyType\":\"RANGE\"}],\"Projection\":{"
	    "\"ProjectionType\":\"ALL\"},\"IndexStatus\":\"ACTIVE\",\"ProvisionedThroughput\":{"
	    "\"NumberOfDecreasesToday\":0,\"ReadCapacityUnits\":0,\"WriteCapacityUnits\":0},"
	    "\"IndexSizeBytes\":0,\"ItemCount\":0,\"IndexArn\":\"arn:aws:dynamodb:shoal:"
	    "000000000000:table/edtech-platform/index/GSI1\",\"OnDemandThroughput\":{"
	    "\"MaxReadRequestUnits\":-1,\"MaxWriteRequestUnits\":-1},\"WriteShards\":1}],"
	    "\"OnDemandThroughput\":{\"MaxReadRequestUnits\":-1,\"MaxWriteRequestUnits\":-1},"
	    "\"DeletionProtectionEnabled\":false}}";
	ck_assert_str_eq(resp_text(r, "DescribeTable"), want);

	/* CreateTable and DeleteTable say TableDescription. */
	Shoal__CreateTableResponse ctr = SHOAL__CREATE_TABLE_RESPONSE__INIT;
	ctr.table_description = dt->table;
	r->result_case = SHOAL__RESPONSE__RESULT_CREATE_TABLE;
	r->create_table = &ctr;
	const char *text = resp_text(r, "CreateTable");
	ck_assert_str_eq(text + strlen("{\"TableDescription\":"), want + strlen("{\"Table\":"));
	Shoal__DeleteTableResponse dtr = SHOAL__DELETE_TABLE_RESPONSE__INIT;
	dtr.table_description = dt->table;
	r->result_case = SHOAL__RESPONSE__RESULT_DELETE_TABLE;
	r->delete_table = &dtr;
	ck_assert_str_eq(resp_text(r, "DeleteTable"), text);
	Shoal__UpdateTableResponse utr = SHOAL__UPDATE_TABLE_RESPONSE__INIT;
	utr.table_description = dt->table;
	r->result_case = SHOAL__RESPONSE__RESULT_UPDATE_TABLE;
	r->update_table = &utr;
	ck_assert_str_eq(resp_text(r, "UpdateTable"), text);

	/* PROVISIONED, switched from PAY_PER_REQUEST once: the units, the times
	 * of the last changes (epoch seconds), no OnDemandThroughput. */
	st_table_info prov = info;
	st_index_def gsi = info.def.indexes[0];
	prov.def.indexes = &gsi;
	prov.def.billing = ST_BILLING_PROVISIONED;
	prov.def.tp = (st_throughput){10, 20, 0, 0};
	prov.def.last_increase_ms = 1725000100250;
	prov.def.last_decrease_ms = 1725000200500;
	prov.def.billing_changed_ms = 1725000050000;
	gsi.tp = (st_throughput){3, 4, 0, 0};
	r->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE;
	r->describe_table = dt; /* a oneof: update_table took its place */
	ck_assert_int_eq(wire_table_desc_to_pb(&A, &prov, "ACTIVE", &dt->table, msg), SHOAL_OK);
	json_t *pj;
	ck_assert_int_eq(wire_api_response_to_json(r, "DescribeTable", &pj, msg), SHOAL_OK);
	keep(pj);
	json_t *pt = json_object_get(json_object_get(pj, "Table"), "ProvisionedThroughput");
	assert_json_eq(J("{'LastIncreaseDateTime':1725000100.25,'LastDecreaseDateTime':"
	                 "1725000200.5,'NumberOfDecreasesToday':0,'ReadCapacityUnits':10,"
	                 "'WriteCapacityUnits':20}"),
	               pt);
	assert_json_eq(J("{'BillingMode':'PROVISIONED','LastUpdateToPayPerRequestDateTime':"
	                 "1725000050.0}"),
	               json_object_get(json_object_get(pj, "Table"), "BillingModeSummary"));
	ck_assert_ptr_null(json_object_get(json_object_get(pj, "Table"), "OnDemandThroughput"));
	json_t *g0 = json_array_get(
	    json_object_get(json_object_get(pj, "Table"), "GlobalSecondaryIndexes"), 0);
	assert_json_eq(J("{'NumberOfDecreasesToday':0,'ReadCapacityUnits':3,"
	                 "'WriteCapacityUnits':4}"),
	               json_object_get(g0, "ProvisionedThroughput"));
	ck_assert_ptr_null(json_object_get(g0, "OnDemandThroughput"));

	const char *names[2] = {"edtech-a", "edtech-platform"};
	r->result_case = SHOAL__RESPONSE__RESULT_LIST_TABLES;
	ck_assert_int_eq(
	    wire_list_tables_resp_to_pb(&A, names, 2, "edtech-platform", &r->list_tables, msg),
	    SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "ListTables"),
	                 "{\"TableNames\":[\"edtech-a\",\"edtech-platform\"],"
	                 "\"LastEvaluatedTableName\":\"edtech-platform\"}");
	ck_assert_int_eq(wire_list_tables_resp_to_pb(&A, NULL, 0, NULL, &r->list_tables, msg),
	                 SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "ListTables"), "{\"TableNames\":[]}");

	/* ClusterStatus: Shoal's own shape, every number written. */
	Shoal__ClusterStatusResponse cs = SHOAL__CLUSTER_STATUS_RESPONSE__INIT;
	Shoal__NodeInfo node = SHOAL__NODE_INFO__INIT;
	node.id = 1;
	node.rpc = "tcp://127.0.0.1:21001";
	node.raft = "127.0.0.1:22001";
	Shoal__NodeInfo *nodes[1] = {&node};
	Shoal__GroupStatus gs = SHOAL__GROUP_STATUS__INIT;
	gs.node = 1;
	gs.role = "leader";
	gs.term = 3;
	gs.commit_index = 40;
	gs.applied_index = 40;
	gs.leader_node = 1;
	Shoal__TableStats ts = SHOAL__TABLE_STATS__INIT;
	ts.table_name = "edtech-platform";
	ts.item_count = 15;
	Shoal__TableStats *tss[1] = {&ts};
	gs.tables = tss;
	gs.n_tables = 1;
	Shoal__GroupStatus *groups[1] = {&gs};
	cs.nodes = nodes;
	cs.n_nodes = 1;
	cs.groups = groups;
	cs.n_groups = 1;
	cs.partitions = 16;
	r->result_case = SHOAL__RESPONSE__RESULT_CLUSTER_STATUS;
	r->cluster_status = &cs;
	ck_assert_str_eq(resp_text(r, "ClusterStatus"),
	                 "{\"Nodes\":[{\"Id\":1,\"Rpc\":\"tcp://127.0.0.1:21001\",\"Raft\":"
	                 "\"127.0.0.1:22001\",\"Reachable\":false}],\"Groups\":[{\"Group\":0,"
	                 "\"Node\":1,\"Role\":\"leader\",\"Term\":3,\"CommitIndex\":40,"
	                 "\"AppliedIndex\":40,\"LeaderNode\":1,\"Tables\":[{\"TableName\":"
	                 "\"edtech-platform\",\"ItemCount\":15,\"SizeBytes\":0}]}],"
	                 "\"Partitions\":16}");
}
END_TEST

START_TEST(test_error_responses)
{
	Shoal__Response *r = resp_new();
	st_value old = item_st(ITEM_S1);
	ck_assert_int_eq(wire_response_set_error(&A, r, SHOAL_E_CONDITION_FAILED,
	                                         "The conditional request failed", &old, msg),
	                 SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "PutItem"),
	                 "{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
	                 "ConditionalCheckFailedException\",\"message\":\"The conditional request "
	                 "failed\",\"Item\":{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":"
	                 "\"PROFILE\"},\"name\":{\"S\":\"Ana Souza\"}}}");

	ck_assert_int_eq(wire_response_set_error(&A, r, SHOAL_E_VALIDATION,
	                                         "1 validation error detected: Value null at "
	                                         "'tableName' failed to satisfy constraint: Member "
	                                         "must not be null",
	                                         NULL, msg),
	                 SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "GetItem"),
	                 "{\"__type\":\"com.amazon.coral.validate#ValidationException\","
	                 "\"message\":\"1 validation error detected: Value null at 'tableName' "
	                 "failed to satisfy constraint: Member must not be null\"}");

	/* Transactions: reasons in request order, Code from the status when unset. */
	ck_assert_int_eq(wire_response_set_error(&A, r, SHOAL_E_TXN_CANCELED,
	                                         "Transaction cancelled, please refer cancellation "
	                                         "reasons for specific reasons [None, "
	                                         "ConditionalCheckFailed]",
	                                         NULL, msg),
	                 SHOAL_OK);
	Shoal__CancellationReason reasons[2] = {SHOAL__CANCELLATION_REASON__INIT,
	                                        SHOAL__CANCELLATION_REASON__INIT};
	reasons[1].status = SHOAL__STATUS__STATUS_CONDITION_FAILED;
	reasons[1].code = "ConditionalCheckFailed";
	reasons[1].message = "The conditional request failed";
	reasons[1].item = item_pb("{'PK':{'S':'COURSE#c10'},'SK':{'S':'ENROLLMENT#STUDENT#s3'}}");
	Shoal__CancellationReason *rs[2] = {&reasons[0], &reasons[1]};
	r->cancellation_reasons = rs;
	r->n_cancellation_reasons = 2;
	ck_assert_str_eq(
	    resp_text(r, "TransactWriteItems"),
	    "{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
	    "TransactionCanceledException\",\"Message\":\"Transaction cancelled, please "
	    "refer cancellation reasons for specific reasons [None, "
	    "ConditionalCheckFailed]\",\"CancellationReasons\":[{\"Code\":\"None\"},{"
	    "\"Item\":{\"PK\":{\"S\":\"COURSE#c10\"},\"SK\":{\"S\":"
	    "\"ENROLLMENT#STUDENT#s3\"}},\"Code\":\"ConditionalCheckFailed\","
	    "\"Message\":\"The conditional request failed\"}]}");
	r->n_cancellation_reasons = 0;

	/* Internal codes are InternalServerError; messages that are not UTF-8 are
	 * written with '?' for each bad byte. */
	ck_assert_int_eq(
	    wire_response_set_error(&A, r, SHOAL_E_NOT_LEADER, "bad \xff byte", NULL, msg),
	    SHOAL_OK);
	ck_assert_str_eq(resp_text(r, "GetItem"),
	                 "{\"__type\":\"com.amazonaws.dynamodb.v20120810#InternalServerError\","
	                 "\"message\":\"bad ? byte\"}");

	/* The error helpers alone. */
	json_t *j;
	ck_assert_int_eq(wire_api_error_to_json(SHOAL_E_SERIALIZATION, STRUCT, &j, msg), SHOAL_OK);
	ck_assert_str_eq(dump(keep(j)),
	                 "{\"__type\":\"com.amazon.coral.service#SerializationException\","
	                 "\"Message\":\"" STRUCT "\"}");
	ck_assert_int_eq(wire_api_error_to_json(SHOAL_E_UNKNOWN_OPERATION, NULL, &j, msg),
	                 SHOAL_OK);
	ck_assert_str_eq(dump(keep(j)),
	                 "{\"__type\":\"com.amazon.coral.service#UnknownOperationException\"}");
	ck_assert_str_eq(wire_api_error_type(SHOAL_E_NOT_FOUND),
	                 "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException");
	ck_assert_str_eq(wire_api_error_type(SHOAL_E_UNAVAILABLE),
	                 "com.amazonaws.dynamodb.v20120810#ServiceUnavailable");
	ck_assert_str_eq(wire_api_error_type(999),
	                 "com.amazonaws.dynamodb.v20120810#InternalServerError");
	ck_assert_int_eq(wire_api_http_status(SHOAL_OK), 200);
	ck_assert_int_eq(wire_api_http_status(SHOAL_E_CONDITION_FAILED), 400);
	ck_assert_int_eq(wire_api_http_status(SHOAL_E_THROUGHPUT), 400);
	ck_assert_int_eq(wire_api_http_status(SHOAL_E_NOMEM), 500);
	ck_assert_int_eq(wire_api_http_status(SHOAL_E_UNAVAILABLE), 503);
}
END_TEST

/* body -> Response -> body, also through pack and unpack. */
static Shoal__Response *resp_round(const char *op, const char *text)
{
	json_t *body = J(text);
	Shoal__Response *r;
	int rc = wire_api_response_from_json(&A, op, body, &r, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", op, msg);
	json_t *back;
	ck_assert_msg(wire_api_response_to_json(r, op, &back, msg) == SHOAL_OK, "%s", msg);
	assert_json_eq(body, keep(back));
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&A, &r->base, &buf, &len, msg), SHOAL_OK);
	Shoal__Response *got;
	ck_assert_int_eq(wire_unpack_response(NULL, buf, len, &got, msg), SHOAL_OK);
	ck_assert_int_eq(wire_api_response_to_json(got, op, &back, msg), SHOAL_OK);
	wire_free_response(NULL, got);
	assert_json_eq(body, keep(back));
	return r;
}

#define CC_FULL                                                                                    \
	"{'TableName':'edtech-platform','CapacityUnits':3.5,'ReadCapacityUnits':1.5,"              \
	"'WriteCapacityUnits':2.0,'Table':{'CapacityUnits':1.5},'LocalSecondaryIndexes':{"         \
	"'ByProgress':{'CapacityUnits':1.0}},'GlobalSecondaryIndexes':{'GSI1':{'CapacityUnits':"   \
	"1.0,'WriteCapacityUnits':1.0}}}"

START_TEST(test_response_round_trips)
{
	Shoal__Response *r =
	    resp_round("GetItem", "{'Item':" ITEM_S1 ",'ConsumedCapacity':" CC_FULL "}");
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(r->result_case, SHOAL__RESPONSE__RESULT_GET_ITEM);
	Shoal__ConsumedCapacity *cc = r->get_item->consumed_capacity;
	ck_assert_uint_eq(cc->n_global_secondary_indexes, 1);
	ck_assert_str_eq(cc->global_secondary_indexes[0]->index_name, "GSI1");
	ck_assert(cc->global_secondary_indexes[0]->capacity->write_capacity_units == 1.0);
	resp_round("GetItem", "{}");
	resp_round("PutItem",
	           "{'Attributes':" ITEM_S1 ",'ItemCollectionMetrics':{"
	           "'ItemCollectionKey':{'PK':{'S':'STUDENT#s1'}},'SizeEstimateRangeGB':[0.0,"
	           "1.0]},'ConsumedCapacity':{'TableName':'edtech-platform',"
	           "'CapacityUnits':1.0}}");
	resp_round("UpdateItem", "{'Attributes':{'progress':{'N':'50'}}}");
	resp_round("DeleteItem", "{}");
	r = resp_round("Query",
	               "{'Items':[" ITEM_S1 "],'Count':1,'ScannedCount':4,"
	               "'LastEvaluatedKey':{'PK':{'S':'STUDENT#s1'},'SK':{'S':'PROFILE'}}}");
	ck_assert_uint_eq(r->query->count, 1);
	ck_assert_uint_eq(r->query->scanned_count, 4);
	resp_round("Query", "{'Count':3,'ScannedCount':3}");
	resp_round("Scan", "{'Items':[],'Count':0,'ScannedCount':10,'LastEvaluatedKey':{'PK':{'S':"
	                   "'COURSE#c10'},'SK':{'S':'MODULE#m2'}}}");
	r = resp_round(
	    "BatchGetItem",
	    "{'Responses':{'edtech-platform':[" ITEM_S1 "]},'UnprocessedKeys':{'t2':{"
	    "'Keys':[{'id':{'N':'1'}}],'ProjectionExpression':'#n',"
	    "'ExpressionAttributeNames':{'#n':'name'}}},'ConsumedCapacity':[{'TableName':"
	    "'edtech-platform','CapacityUnits':1.0}]}");
	ck_assert_str_eq(r->batch_get_item->unprocessed_keys[0]->table_name, "t2");
	resp_round("BatchWriteItem",
	           "{'UnprocessedItems':{'edtech-platform':[{'DeleteRequest':{'Key':"
	           "{'PK':{'S':'STUDENT#s2'},'SK':{'S':'PROFILE'}}}},{'PutRequest':"
	           "{'Item':" ITEM_S1 "}}]}}");
	resp_round("TransactWriteItems", "{'ConsumedCapacity':[{'TableName':'edtech-platform',"
	                                 "'CapacityUnits':4.0}]}");
	r = resp_round("BatchWriteItem",
	               "{'UnprocessedItems':{},'ItemCollectionMetrics':{'edtech-platform':[{"
	               "'ItemCollectionKey':{'PK':{'S':'STUDENT#s1'}},'SizeEstimateRangeGB':[0.0,"
	               "1.0]}]}}");
	ck_assert_str_eq(r->batch_write_item->item_collection_metrics[0]->table_name,
	                 "edtech-platform");
	resp_round("TransactWriteItems",
	           "{'ConsumedCapacity':[{'TableName':'t2','CapacityUnits':2.0}],"
	           "'ItemCollectionMetrics':{'t2':[{'ItemCollectionKey':{'id':{'N':'7'}},"
	           "'SizeEstimateRangeGB':[0.0,1.0]}]}}");
	resp_round("TransactGetItems", "{'Responses':[{'Item':" ITEM_S1 "},{}]}");
	const char *table =
	    "{'AttributeDefinitions':[{'AttributeName':'PK','AttributeType':'S'},{'AttributeName':"
	    "'progress','AttributeType':'N'}],'TableName':'edtech-sharded','KeySchema':[{"
	    "'AttributeName':'PK','KeyType':'HASH'}],'TableStatus':'CREATING','CreationDateTime':"
	    "1725000000.123,'ProvisionedThroughput':{'NumberOfDecreasesToday':0,'ReadCapacityUnits'"
	    ":"
	    "10,'WriteCapacityUnits':20},'TableSizeBytes':0,'ItemCount':0,'TableArn':'arn:aws:"
	    "dynamodb:shoal:000000000000:table/edtech-sharded','TableId':'9','BillingModeSummary':"
	    "{'BillingMode':'PROVISIONED','LastUpdateToPayPerRequestDateTime':1700000000.25},"
	    "'LocalSecondaryIndexes':[{'IndexName':'ByProgress','KeySchema':[{'AttributeName':'PK',"
	    "'KeyType':'HASH'},{'AttributeName':'progress','KeyType':'RANGE'}],'Projection':{"
	    "'ProjectionType':'INCLUDE','NonKeyAttributes':['name']},'IndexSizeBytes':0,"
	    "'ItemCount':0,'IndexArn':'arn:x/index/ByProgress'}],'GlobalSecondaryIndexes':[{"
	    "'IndexName':'GSI1','KeySchema':[{'AttributeName':'GSI1PK','KeyType':'HASH'}],"
	    "'Projection':{'ProjectionType':'KEYS_ONLY'},'IndexStatus':'CREATING','Backfilling':"
	    "true"
	    ",'ProvisionedThroughput':{'NumberOfDecreasesToday':0,'ReadCapacityUnits':5,"
	    "'WriteCapacityUnits':5},'IndexSizeBytes':0,'ItemCount':0,'IndexArn':'arn:x/index/"
	    "GSI1',"
	    "'WriteShards':10}],'DeletionProtectionEnabled':false}";
	char body[4096];
	snprintf(body, sizeof(body), "{'Table':%s}", table);
	r = resp_round("DescribeTable", body);
	ck_assert_int_eq(r->describe_table->table->creation_date_time, 1725000000123);
	ck_assert_int_eq(r->describe_table->table->billing_mode_summary
	                     ->last_update_to_pay_per_request_date_time,
	                 1700000000250);
	ck_assert(r->describe_table->table->global_secondary_indexes[0]->backfilling);
	ck_assert_uint_eq(r->describe_table->table->global_secondary_indexes[0]->write_shards, 10);
	snprintf(body, sizeof(body), "{'TableDescription':%s}", table);
	resp_round("CreateTable", body);
	resp_round("DeleteTable", body);
	resp_round("UpdateTable", body);
	resp_round("ListTables", "{'TableNames':['a1','b22'],'LastEvaluatedTableName':'b22'}");
	resp_round("ClusterStatus",
	           "{'Nodes':[{'Id':1,'Rpc':'tcp://127.0.0.1:21001','Raft':'127.0.0.1:22001',"
	           "'Reachable':true}],'Groups':[{'Group':2,'Node':1,'Role':'unreachable','Term':0,"
	           "'CommitIndex':0,'AppliedIndex':0,'LeaderNode':0,'Error':'timed out'}],"
	           "'Partitions':16}");

	/* Errors, whatever the namespace, message spelled either way. */
	r = resp_round(
	    "TransactWriteItems",
	    "{'__type':'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',"
	    "'Message':'Transaction cancelled, please refer cancellation reasons for "
	    "specific reasons [None, ConditionalCheckFailed, TransactionConflict]',"
	    "'CancellationReasons':[{'Code':'None'},{'Item':" ITEM_S1 ",'Code':"
	    "'ConditionalCheckFailed','Message':'The conditional request failed'},{'Code':"
	    "'TransactionConflict','Message':'Transaction is ongoing for the item'}]}");
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_TXN_CANCELED);
	ck_assert_uint_eq(r->n_cancellation_reasons, 3);
	ck_assert_int_eq(r->cancellation_reasons[0]->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(r->cancellation_reasons[1]->status,
	                 SHOAL__STATUS__STATUS_CONDITION_FAILED);
	ck_assert_int_eq(r->cancellation_reasons[2]->status, SHOAL__STATUS__STATUS_TXN_CONFLICT);
	r = resp_round("PutItem",
	               "{'__type':'com.amazonaws.dynamodb.v20120810#"
	               "ConditionalCheckFailedException','message':'The conditional request "
	               "failed','Item':" ITEM_S1 "}");
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_CONDITION_FAILED);
	ck_assert_uint_eq(r->item->n_attrs, 3);
	r = resp_round("GetItem",
	               "{'__type':'com.amazon.coral.validate#ValidationException',"
	               "'message':'The provided key element does not match the schema'}");
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(r->message, "The provided key element does not match the schema");
	resp_round("DescribeTable", "{'__type':'com.amazonaws.dynamodb.v20120810#"
	                            "ResourceNotFoundException','message':'Requested resource not "
	                            "found: Table: nope not found'}");

	Shoal__Response *e;
	ck_assert_int_eq(wire_api_response_from_json(&A, "GetItem",
	                                             J("{'__type':'ResourceInUseException',"
	                                               "'Message':'in use'}"),
	                                             &e, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(e->status, SHOAL__STATUS__STATUS_IN_USE);
	ck_assert_str_eq(e->message, "in use");
	ck_assert_int_eq(wire_api_response_from_json(&A, "GetItem",
	                                             J("{'__type':'x#SomethingNew','message':'?'}"),
	                                             &e, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(e->status, SHOAL__STATUS__STATUS_INTERNAL);
	ck_assert_int_eq(wire_api_response_from_json(&A, "GetItem", J("[]"), &e, msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_int_eq(wire_api_response_from_json(&A, "Query", J("{'Count':'1'}"), &e, msg),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(msg, "STRING_VALUE cannot be converted to Integer");
	ck_assert_int_eq(wire_api_response_from_json(&A, "Nope", J("{}"), &e, msg),
	                 SHOAL_E_UNKNOWN_OPERATION);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Garbled bodies                                                            */
/* ------------------------------------------------------------------------ */

static const char *const ops[] = {
    "GetItem",       "PutItem",       "UpdateItem",     "DeleteItem",         "Query",
    "Scan",          "BatchGetItem",  "BatchWriteItem", "TransactWriteItems", "TransactGetItems",
    "CreateTable",   "DescribeTable", "ListTables",     "DeleteTable",        "UpdateTable",
    "ClusterStatus",
};

static const char *const names[] = {
    "TableName",
    "Key",
    "Item",
    "Keys",
    "S",
    "N",
    "B",
    "M",
    "L",
    "SS",
    "NS",
    "BS",
    "NULL",
    "BOOL",
    "PutRequest",
    "DeleteRequest",
    "RequestItems",
    "TransactItems",
    "Put",
    "Delete",
    "Update",
    "ConditionCheck",
    "Get",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
    "Limit",
    "Segment",
    "KeySchema",
    "AttributeDefinitions",
    "GlobalSecondaryIndexes",
    "Projection",
    "WriteShards",
    "ProvisionedThroughput",
    "ConsistentRead",
    "ScanIndexForward",
    "Select",
    "__type",
    "message",
    "Message",
    "CancellationReasons",
    "Code",
    "Items",
    "Count",
    "Table",
    "CreationDateTime",
    "Responses",
    "UnprocessedKeys",
    "ConsumedCapacity",
    "GlobalSecondaryIndexUpdates",
    "Create",
    "AttributesToGet",
    "IndexName",
    "x",
    "",
};

static json_t *random_json(uint64_t *st, int depth)
{
	switch (tl_rand(st) % (depth > 3 ? 7 : 10)) {
	case 0:
		return json_string(names[tl_rand(st) % (sizeof(names) / sizeof(names[0]))]);
	case 1:
		return json_integer((json_int_t)(tl_rand(st) % 5) - 1 +
		                    (tl_rand(st) % 4 == 0 ? (json_int_t)1 << 40 : 0));
	case 2:
		return json_real((double)(tl_rand(st) % 1000) / 7.0);
	case 3:
		return json_boolean(tl_rand(st) % 2);
	case 4:
		return json_null();
	case 5:
		return json_string(tl_rand(st) % 2 ? "ALL_OLD" : "COUNT");
	case 6:
		return json_stringn("a\0b", 3);
	case 7:
	case 8: {
		json_t *o = json_object();
		int n = (int)(tl_rand(st) % 4);
		for (int i = 0; i < n; i++)
			json_object_set_new(o,
			                    names[tl_rand(st) % (sizeof(names) / sizeof(names[0]))],
			                    random_json(st, depth + 1));
		return o;
	}
	default: {
		json_t *a = json_array();
		int n = (int)(tl_rand(st) % 4);
		for (int i = 0; i < n; i++)
			json_array_append_new(a, random_json(st, depth + 1));
		return a;
	}
	}
}

/* Containers of j, depth first, into out (at most max). */
static void containers(json_t *j, json_t **out, int *n, int max)
{
	if (*n >= max || !(json_is_object(j) || json_is_array(j)))
		return;
	out[(*n)++] = j;
	if (json_is_object(j)) {
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v) containers(v, out, n, max);
	} else {
		for (size_t i = 0; i < json_array_size(j); i++)
			containers(json_array_get(j, i), out, n, max);
	}
}

static void mutate(json_t *root, uint64_t *st)
{
	json_t *c[256];
	int n = 0;
	containers(root, c, &n, 256);
	json_t *t = c[tl_rand(st) % (uint64_t)n];
	if (json_is_object(t)) {
		size_t size = json_object_size(t);
		const char *name = names[tl_rand(st) % (sizeof(names) / sizeof(names[0]))];
		if (size > 0 && tl_rand(st) % 2) {
			/* Replace or drop an existing member. */
			size_t pick = tl_rand(st) % size, i = 0;
			const char *k;
			json_t *v;
			json_object_foreach(t, k, v)
			{
				if (i++ == pick) {
					name = k;
					break;
				}
			}
			if (tl_rand(st) % 3 == 0) {
				json_object_del(t, name);
				return;
			}
		}
		json_object_set_new(t, name, random_json(st, 0));
	} else {
		size_t size = json_array_size(t);
		if (size > 0 && tl_rand(st) % 2)
			json_array_set_new(t, tl_rand(st) % size, random_json(st, 0));
		else
			json_array_append_new(t, random_json(st, 0));
	}
}

static const char *const garble_bodies[] = {
    "{'TableName':'edtech-platform','Key':{'PK':{'S':'STUDENT#s1'}},'ExpressionAttributeNames':{"
    "'#n':'name'}}",
    "{'TableName':'t1','Item':{'a':{'M':{'b':{'L':[{'N':'1'},{'SS':['x']}]}}}},"
    "'ExpressionAttributeValues':{':v':{'BS':['AQ==']}}}",
    "{'RequestItems':{'t1':[{'PutRequest':{'Item':{'a':{'S':'x'}}}},{'DeleteRequest':{'Key':{"
    "'a':{'S':'y'}}}}]}}",
    "{'RequestItems':{'t1':{'Keys':[{'a':{'S':'x'}}],'ConsistentRead':true}}}",
    "{'TransactItems':[{'Put':{'TableName':'t1','Item':{'a':{'N':'1'}}}},{'Get':{'Key':{}}}]}",
    "{'TableName':'t1','AttributeDefinitions':[{'AttributeName':'a','AttributeType':'S'}],"
    "'KeySchema':[{'AttributeName':'a','KeyType':'HASH'}],'GlobalSecondaryIndexes':[{"
    "'IndexName':'g','Projection':{'ProjectionType':'ALL'},'WriteShards':2}]}",
    "{'Items':[{'a':{'S':'x'}}],'Count':1,'ScannedCount':1,'ConsumedCapacity':{'TableName':'t',"
    "'CapacityUnits':1.0,'GlobalSecondaryIndexes':{'g':{'CapacityUnits':1.0}}}}",
    "{'Table':{'TableName':'t1','CreationDateTime':1.5,'GlobalSecondaryIndexes':[{"
    "'IndexName':'g'}],'BillingModeSummary':{'BillingMode':'PAY_PER_REQUEST'}}}",
    "{'__type':'x#TransactionCanceledException','CancellationReasons':[{'Code':'None'},{'Item':"
    "{'a':{'S':'x'}}}]}",
    "{'Responses':{'t1':[{'a':{'S':'x'}}]},'UnprocessedKeys':{'t1':{'Keys':[]}}}",
};

START_TEST(test_garbled_never_crash)
{
	uint64_t st = tl_seed() ^ 0x5eed0002u;
	int ok = 0, refused = 0;
	enum { NB = sizeof(garble_bodies) / sizeof(garble_bodies[0]) };
	json_t *bodies[NB];
	for (int i = 0; i < NB; i++)
		bodies[i] = J(garble_bodies[i]);
	for (int iter = 0; iter < 4000; iter++) {
		json_t *body = json_deep_copy(bodies[tl_rand(&st) % NB]);
		int muts = 1 + (int)(tl_rand(&st) % 4);
		for (int m = 0; m < muts; m++)
			mutate(body, &st);
		const char *op = ops[tl_rand(&st) % (sizeof(ops) / sizeof(ops[0]))];
		sh_arena a;
		sh_arena_init(&a);
		char em[SH_ERRMSG_SIZE];
		Shoal__Request *req;
		int rc = wire_api_request_from_json(&a, op, body, &req, em);
		ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_SERIALIZATION ||
		                  rc == SHOAL_E_VALIDATION,
		              "%s: %s %s", op, shoal_err_name(rc), em);
		if (rc == SHOAL_OK) {
			ok++;
			json_t *back;
			ck_assert_msg(wire_api_request_to_json(req, NULL, &back, em) == SHOAL_OK,
			              "%s", em);
			json_decref(back);
			uint8_t *buf;
			size_t len;
			ck_assert_int_eq(wire_pack(&a, &req->base, &buf, &len, em), SHOAL_OK);
			Shoal__Request *got;
			ck_assert_int_eq(wire_unpack_request(NULL, buf, len, &got, em), SHOAL_OK);
			wire_free_request(NULL, got);
		} else {
			refused++;
		}
		Shoal__Response *resp;
		rc = wire_api_response_from_json(&a, op, body, &resp, em);
		ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_SERIALIZATION ||
		                  rc == SHOAL_E_VALIDATION,
		              "%s: %s %s", op, shoal_err_name(rc), em);
		if (rc == SHOAL_OK) {
			json_t *back;
			ck_assert_msg(wire_api_response_to_json(resp, op, &back, em) == SHOAL_OK,
			              "%s", em);
			json_decref(back);
			uint8_t *buf;
			size_t len;
			ck_assert_int_eq(wire_pack(&a, &resp->base, &buf, &len, em), SHOAL_OK);
		}
		sh_arena_fini(&a);
		json_decref(body);
	}
	/* Both outcomes were exercised. */
	ck_assert_int_gt(ok, 100);
	ck_assert_int_gt(refused, 100);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

static int conv_request(const json_t *body, sh_arena *a, char *errmsg, const char *op)
{
	Shoal__Request *req;
	int rc = wire_api_request_from_json(a, op, body, &req, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	json_t *back;
	rc = wire_api_request_to_json(req, NULL, &back, errmsg);
	if (rc == SHOAL_OK) {
		ck_assert(json_equal((json_t *)body, back));
		json_decref(back);
	}
	return rc;
}

static int conv_response(const json_t *body, sh_arena *a, char *errmsg, const char *op)
{
	Shoal__Response *resp;
	int rc = wire_api_response_from_json(a, op, body, &resp, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	json_t *back;
	rc = wire_api_response_to_json(resp, op, &back, errmsg);
	if (rc == SHOAL_OK) {
		ck_assert(json_equal((json_t *)body, back));
		json_decref(back);
	}
	return rc;
}

/* Every allocation of a conversion can fail: SHOAL_E_NOMEM.  A first
 * conversion without faults warms the walker's per-descriptor facts
 * (wire_api_field_info_of: built once per message type, and a failure to
 * build them only means computing them each time), so that every counted
 * allocation is the conversion's own. */
static void fault_loop(bool request, const char *op, const json_t *body)
{
	{
		sh_arena a;
		sh_arena_init(&a);
		char em[SH_ERRMSG_SIZE] = "";
		int rc = request ? conv_request(body, &a, em, op) : conv_response(body, &a, em, op);
		sh_arena_fini(&a);
		ck_assert_msg(rc == SHOAL_OK, "%s: %s", op, em);
	}
	for (long n = 1;; n++) {
		ck_assert_int_lt(n, 100000);
		sh_arena a;
		sh_arena_init(&a);
		char em[SH_ERRMSG_SIZE] = "";
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = request ? conv_request(body, &a, em, op) : conv_response(body, &a, em, op);
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
	json_t *bw = keep(json_object());
	json_object_set(bw, "RequestItems", demo_file("edtech-items.json"));
	fault_loop(true, "BatchWriteItem", bw);
	fault_loop(
	    true, "PutItem",
	    J("{'TableName':'t1','Item':{'a':{'M':{'b':{'L':[{'N':'1'},{'B':'AQ=='}]}}}},"
	      "'ExpressionAttributeNames':{'#a':'a'},'ExpressionAttributeValues':{':v':{'SS':["
	      "'x']}},'ConditionExpression':'#a <> :v'}"));
	fault_loop(true, "CreateTable", demo_file("edtech-table.json"));
	fault_loop(true, "TransactGetItems",
	           J("{'TransactItems':[{'Get':{'TableName':'t1','Key':{'a':{'S':'x'}}}}]}"));
	fault_loop(false, "Query",
	           J("{'Items':[{'a':{'S':'x'}},{'b':{'BS':['AQ==']}}],'Count':2,'ScannedCount':2,"
	             "'LastEvaluatedKey':{'a':{'S':'x'}},'ConsumedCapacity':{'TableName':'t',"
	             "'CapacityUnits':1.0,'GlobalSecondaryIndexes':{'g':{'CapacityUnits':1.0}}}}"));
	fault_loop(false, "BatchGetItem",
	           J("{'Responses':{'t1':[{'a':{'S':'x'}}]},'UnprocessedKeys':{'t1':{'Keys':[{'a':"
	             "{'S':'y'}}]}}}"));
	fault_loop(
	    false, "DescribeTable",
	    J("{'Table':{'AttributeDefinitions':[{'AttributeName':'PK','AttributeType':'S'}],"
	      "'TableName':'t1','CreationDateTime':1.5,'TableSizeBytes':0,'ItemCount':0,"
	      "'GlobalSecondaryIndexes':[{'IndexName':'g','IndexSizeBytes':0,'ItemCount':0,"
	      "'WriteShards':2}],'DeletionProtectionEnabled':true}}"));
	fault_loop(false, "TransactWriteItems",
	           J("{'__type':'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',"
	             "'Message':'m','CancellationReasons':[{'Code':'None'},{'Item':{'a':{'S':'x'}},"
	             "'Code':'ConditionalCheckFailed'}]}"));

	/* Error bodies and request-driven responses too. */
	for (long n = 1;; n++) {
		json_t *j = NULL;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = wire_api_error_to_json(SHOAL_E_VALIDATION, "bad \xff", &j, msg);
		long fired = sh_fault_fired(SH_FAULT_ALLOC);
		sh_fault_reset();
		json_decref(j);
		if (fired == 0) {
			ck_assert_int_eq(rc, SHOAL_OK);
			break;
		}
		ck_assert_int_eq(rc, SHOAL_E_NOMEM);
	}
}
END_TEST

/* UpdateTable's API-level checks (wire_update_table_from_pb): each body and
 * the error DynamoDB answers without looking at the table. */
typedef struct update_case {
	const char *body;
	int rc;
	const char *message;
} update_case;

#define GSI_CREATE(name, extra)                                                                    \
	"{'Create':{'IndexName':'" name "','KeySchema':[{'AttributeName':'G','KeyType':'HASH'}],"  \
	"'Projection':{'ProjectionType':'ALL'}" extra "}}"

static const update_case update_cases[] = {
    {"{}", SHOAL_E_VALIDATION,
     "The parameter 'TableName' is required but was not present in the request"},
    {"{'TableName':'ab'}", SHOAL_E_VALIDATION,
     "TableName must be at least 3 characters long and at most 255 characters long"},
    {"{'TableName':'tbl'}", SHOAL_E_VALIDATION,
     "At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, "
     "GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[]}", SHOAL_E_VALIDATION,
     "At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, "
     "GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required"},
    {"{'TableName':'tbl','BillingMode':'CHEAP'}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value 'CHEAP' at 'billingMode' failed to satisfy "
     "constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]"},
    {"{'TableName':'tbl','BillingMode':'PROVISIONED'}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: ProvisionedThroughput must be specified "
     "when BillingMode is PROVISIONED"},
    {"{'TableName':'tbl','OnDemandThroughput':{'MaxReadRequestUnits':0}}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Requested MaxReadRequestUnits for "
     "OnDemandThroughput for table is outside of valid range"},
    {"{'TableName':'tbl','OnDemandThroughput':{'MaxWriteRequestUnits':-2}}", SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Requested MaxWriteRequestUnits for "
     "OnDemandThroughput for table is outside of valid range"},
    {"{'TableName':'tbl','BillingMode':'PROVISIONED','ProvisionedThroughput':{"
     "'ReadCapacityUnits':1,'WriteCapacityUnits':1},'OnDemandThroughput':{"
     "'MaxWriteRequestUnits':5}}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: MaxWriteRequestUnits for OnDemandThroughput "
     "cannot be specified when the table BillingMode is PROVISIONED"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[{'Update':{'IndexName':'gsi',"
     "'OnDemandThroughput':{'MaxReadRequestUnits':0}}}]}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Requested MaxReadRequestUnits for "
     "OnDemandThroughput for index : gsi is outside of valid range"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[{'Update':{'IndexName':'gsi'}}]}",
     SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at "
     "'globalSecondaryIndexUpdates.1.member.update.provisionedThroughput' failed to satisfy "
     "constraint: Member must not be null"},
    {"{'TableName':'tbl','ProvisionedThroughput':{'ReadCapacityUnits':0,"
     "'WriteCapacityUnits':1}}",
     SHOAL_E_VALIDATION,
     "1 validation error detected: Value '0' at 'provisionedThroughput.readCapacityUnits' "
     "failed to satisfy constraint: Member must have value greater than or equal to 1"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[{'Delete':{}}]}", SHOAL_E_VALIDATION,
     "1 validation error detected: Value null at "
     "'globalSecondaryIndexUpdates.1.member.delete.indexName' failed to satisfy constraint: "
     "Member must not be null"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[{'Create':{'IndexName':'gsi'}}]}",
     SHOAL_E_VALIDATION,
     "2 validation errors detected: Value null at "
     "'globalSecondaryIndexUpdates.1.member.create.projection' failed to satisfy constraint: "
     "Member must not be null; Value null at "
     "'globalSecondaryIndexUpdates.1.member.create.keySchema' failed to satisfy constraint: "
     "Member must not be null"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[{'Delete':{'IndexName':'gsi'}},"
     "{'Delete':{'IndexName':'gsi'}}]}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Only one global secondary index update per "
     "index is allowed simultaneously. Index: gsi"},
    {"{'TableName':'tbl','GlobalSecondaryIndexUpdates':[" GSI_CREATE("gsi", "") "]}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: Some index key attributes are not defined in "
     "AttributeDefinitions. Keys: [G], AttributeDefinitions: []"},
    {"{'TableName':'tbl','AttributeDefinitions':[{'AttributeName':'G','AttributeType':'S'}],"
     "'GlobalSecondaryIndexUpdates':[{'Create':{'IndexName':'gsi','KeySchema':[{"
     "'AttributeName':'G','KeyType':'RANGE'}],'Projection':{'ProjectionType':'ALL'}}}]}",
     SHOAL_E_VALIDATION, "Invalid KeySchema: The first KeySchemaElement is not a HASH key type"},
    {"{'TableName':'tbl','AttributeDefinitions':[{'AttributeName':'G','AttributeType':'S'}],"
     "'GlobalSecondaryIndexUpdates':[{'Create':{'IndexName':'gsi','KeySchema':[{"
     "'AttributeName':'G','KeyType':'HASH'}],'Projection':{'ProjectionType':'KEYS_ONLY',"
     "'NonKeyAttributes':['x']}}}]}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: ProjectionType is KEYS_ONLY, but "
     "NonKeyAttributes is specified"},
    {"{'TableName':'tbl','AttributeDefinitions':[{'AttributeName':'G','AttributeType':'S'}],"
     "'BillingMode':'PAY_PER_REQUEST','GlobalSecondaryIndexUpdates':[" GSI_CREATE(
         "gsi", ",'ProvisionedThroughput':{'ReadCapacityUnits':1,'WriteCapacityUnits':1}") "]}",
     SHOAL_E_VALIDATION,
     "One or more parameter values were invalid: ProvisionedThroughput should not be "
     "specified for index: gsi when BillingMode is PAY_PER_REQUEST"},
    {"{'TableName':'tbl','AttributeDefinitions':[{'AttributeName':'G','AttributeType':'S'}],"
     "'GlobalSecondaryIndexUpdates':[" GSI_CREATE("gsi", "") ",{'Delete':{'IndexName':'old'}}]}",
     SHOAL_E_LIMIT_EXCEEDED,
     "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously "
     "per table"},
};

START_TEST(test_update_table_checks)
{
	for (size_t i = 0; i < sizeof(update_cases) / sizeof(update_cases[0]); i++) {
		const update_case *c = &update_cases[i];
		Shoal__Request *r;
		int rc = wire_api_request_from_json(&A, "UpdateTable", J(c->body), &r, msg);
		ck_assert_msg(rc == SHOAL_OK, "%s: %s", c->body, msg);
		st_table_update_req u;
		rc = wire_update_table_from_pb(&A, r->update_table, &u, msg);
		ck_assert_msg(rc == c->rc, "%s: rc %d (%s), want %d", c->body, rc, msg, c->rc);
		ck_assert_msg(strcmp(msg, c->message) == 0, "%s:\n got %s\nwant %s", c->body, msg,
		              c->message);
	}

	/* A valid one: a write-sharded GSI to create (CREATING, id 0, the
	 * request's key types), an Update ignored, a BillingMode alone. */
	Shoal__Request *r;
	ck_assert_int_eq(
	    wire_api_request_from_json(
	        &A, "UpdateTable",
	        J("{'TableName':'edtech-platform','AttributeDefinitions':[{'AttributeName':'G',"
	          "'AttributeType':'N'},{'AttributeName':'H','AttributeType':'S'}],"
	          "'GlobalSecondaryIndexUpdates':[{'Create':{'IndexName':'byG','KeySchema':[{"
	          "'AttributeName':'G','KeyType':'HASH'},{'AttributeName':'H','KeyType':'RANGE'}],"
	          "'Projection':{'ProjectionType':'INCLUDE','NonKeyAttributes':['a','b']},"
	          "'WriteShards':4}},{'Update':{'IndexName':'GSI1','ProvisionedThroughput':{"
	          "'ReadCapacityUnits':5,'WriteCapacityUnits':5}}}]}"),
	        &r, msg),
	    SHOAL_OK);
	st_table_update_req u;
	ck_assert_msg(wire_update_table_from_pb(&A, r->update_table, &u, msg) == SHOAL_OK, "%s",
	              msg);
	ck_assert_str_eq(u.name, "edtech-platform");
	ck_assert_uint_eq(u.n_create, 1);
	ck_assert_uint_eq(u.n_drop, 0);
	ck_assert_uint_eq(u.n_attrs, 2);
	ck_assert_int_eq(u.attrs[0].type, ST_N);
	const st_index_def *x = &u.create[0];
	ck_assert_str_eq(x->name, "byG");
	ck_assert_uint_eq(x->id, 0);
	ck_assert(!x->local);
	ck_assert_int_eq(x->status, ST_INDEX_CREATING);
	ck_assert_uint_eq(x->write_shards, 4);
	ck_assert_str_eq(x->key.hash.name, "G");
	ck_assert_int_eq(x->key.hash.type, ST_N);
	ck_assert_str_eq(x->key.range.name, "H");
	ck_assert_int_eq(x->projection, ST_PROJ_INCLUDE);
	ck_assert_uint_eq(x->n_include, 2);

	ck_assert_int_eq(wire_api_request_from_json(
	                     &A, "UpdateTable",
	                     J("{'TableName':'edtech-platform','GlobalSecondaryIndexUpdates':[{"
	                       "'Delete':{'IndexName':'GSI1'}}]}"),
	                     &r, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(wire_update_table_from_pb(&A, r->update_table, &u, msg), SHOAL_OK);
	ck_assert_uint_eq(u.n_drop, 1);
	ck_assert_str_eq(u.drop[0], "GSI1");
	ck_assert_uint_eq(u.n_create, 0);

	ck_assert_int_eq(wire_api_request_from_json(
	                     &A, "UpdateTable",
	                     J("{'TableName':'edtech-platform','BillingMode':'PAY_PER_REQUEST'}"),
	                     &r, msg),
	                 SHOAL_OK);
	ck_assert_int_eq(wire_update_table_from_pb(&A, r->update_table, &u, msg), SHOAL_OK);
	ck_assert_uint_eq(u.n_create + u.n_drop, 0);
	ck_assert(u.set_billing);
	ck_assert_int_eq(u.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert(!u.cap.set_tp);

	/* Capacity: the table's units, a maximum removed (-1), a GSI's
	 * maximum; the GSI Update of the first request carried units. */
	ck_assert_int_eq(wire_api_request_from_json(
	                     &A, "UpdateTable",
	                     J("{'TableName':'edtech-platform','OnDemandThroughput':{"
	                       "'MaxReadRequestUnits':-1,'MaxWriteRequestUnits':7},"
	                       "'GlobalSecondaryIndexUpdates':[{'Update':{'IndexName':'GSI1',"
	                       "'OnDemandThroughput':{'MaxWriteRequestUnits':9}}}]}"),
	                     &r, msg),
	                 SHOAL_OK);
	ck_assert_msg(wire_update_table_from_pb(&A, r->update_table, &u, msg) == SHOAL_OK, "%s",
	              msg);
	ck_assert(!u.set_billing);
	ck_assert(u.cap.set_max_rcu && u.cap.max_rcu == -1);
	ck_assert(u.cap.set_max_wcu && u.cap.max_wcu == 7);
	ck_assert_uint_eq(u.n_update, 1);
	ck_assert_str_eq(u.update[0].name, "GSI1");
	ck_assert(!u.update[0].cap.set_max_rcu && !u.update[0].cap.set_tp);
	ck_assert_int_eq(u.update[0].cap.max_wcu, 9);
	ck_assert_int_eq(
	    wire_api_request_from_json(&A, "UpdateTable",
	                               J("{'TableName':'edtech-platform','ProvisionedThroughput':{"
	                                 "'ReadCapacityUnits':3,'WriteCapacityUnits':4}}"),
	                               &r, msg),
	    SHOAL_OK);
	ck_assert_int_eq(wire_update_table_from_pb(&A, r->update_table, &u, msg), SHOAL_OK);
	ck_assert(u.cap.set_tp && u.cap.rcu == 3 && u.cap.wcu == 4);
}
END_TEST

static Suite *wire_api_suite(void)
{
	Suite *s = suite_create("wire_api");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_get_item);
	tcase_add_test(tc, test_put_update_delete);
	tcase_add_test(tc, test_query_scan);
	tcase_add_test(tc, test_batches);
	tcase_add_test(tc, test_transactions);
	tcase_add_test(tc, test_tables);
	tcase_add_test(tc, test_update_table_checks);
	tcase_add_test(tc, test_ignored);
	tcase_add_test(tc, test_request_errors);
	tcase_add_test(tc, test_partition_hashes);
	tcase_add_test(tc, test_item_responses);
	tcase_add_test(tc, test_item_collection_metrics);
	tcase_add_test(tc, test_page_responses);
	tcase_add_test(tc, test_batch_responses);
	tcase_add_test(tc, test_table_responses);
	tcase_add_test(tc, test_error_responses);
	tcase_add_test(tc, test_response_round_trips);
	tcase_add_test(tc, test_garbled_never_crash);
	tcase_add_test(tc, test_alloc_failures);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(wire_api_suite)
