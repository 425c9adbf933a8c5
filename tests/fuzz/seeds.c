/*
 * seeds.c -- writes the seed corpus of the fuzz targets (`make fuzz-seeds`
 * runs it into tests/fuzz/corpus/; the files are in git, this program is
 * how they were made and how to remake them after a protocol change).
 *
 * Every protobuf seed is made by the real encoders from a DynamoDB JSON
 * body: wire_json_parse, wire_api_request_from_json (what the CLI and the
 * HTTP endpoint do) and protobuf-c's pack -- so a seed is a message a client
 * really sends:
 *   json/          "<Operation>\n<body>" for every operation, valid bodies
 *                  plus a few that are refused at each stage
 *   request/       each valid body as a packed Request; a batch of three; a
 *                  Request signed with an Auth field (wire_auth_encode)
 *   node_request/  each Request wrapped as the router sends it to a node
 *                  (group, epoch, table id; any_replica for reads), the
 *                  internal operations (define_table, drop_table,
 *                  update_table, activate_index, index_ship, transactions,
 *                  group_status, list_catalog) and a NodeRequest batch
 *   response/      DynamoDB response bodies (results and errors), as JSON
 *                  and as the packed Response wire_api_response_from_json
 *                  makes of them, behind the operation byte
 *   codec/         the items of the PutItem and BatchWriteItem seeds as the
 *                  storage engine stores them (st_codec_encode)
 *   expr/          a kind byte and an expression of each kind
 *   http_head/     heads as botocore, the AWS CLI, curl and a health
 *                  check send them, keep-alive, 100-continue, HTTP/1.0, and
 *                  malformed ones
 *   cluster_map/   cluster maps (sh_map_encode): a 3-node cluster file's
 *                  with two tables, then with splits, a pending move, a
 *                  non-voter replacing a voter and a draining node
 *   fsm/           Raft entries as node_fsm_encode makes them (padded): a
 *                  Command that defines Music (the create_table seed) and
 *                  runs every write on it; the DDL ops; a transaction's
 *                  ops; the internal ops (index_apply with real deltas,
 *                  outbox_trim, backfill, scrub, stream_trim, txn_expire);
 *                  with the proposer node 1 (results built) or another;
 *                  the DDL also with an even batch_id (group 0's FSM)
 *   node_response/ answers nodes send: the FSM's answers to the writes,
 *                  transaction and group 0 entries of fsm/ (each, and all
 *                  as one batched answer), a NOT_LEADER with a hint, group
 *                  0's list_catalog, a group status, a scrub result, a
 *                  Scan page with its last key, TransactGetItems with item
 *                  states, an index shipment's gsi_behind, a Response in
 *                  two pieces; behind the operation byte
 *   snapshot/      snapshots a leader sends (InstallSnapshot), taken by the
 *                  FSM's own callbacks after applying fsm/'s Commands: a data
 *                  group's (tables with a GSI and an LSI, items, outbox
 *                  entries, transaction records, stream records), one at
 *                  index 1, group 0's (tables, a cluster map), an empty one;
 *                  refused ones (valid checksums): a header index other than
 *                  meta's "applied", meta's "format" another build's
 *   index_ship/    IndexApply messages with real deltas (the outbox of a
 *                  node_fsm after the PutItem seed on Music), and refused
 *                  ones: out of order, index id 0, empty key, the first
 *                  delta good and the second bad
 *   raft_frame/    two bytes choosing a cut, then what a Raft peer sends
 *                  (laid out as raft 0.15's uv_encoding.c writes it): each
 *                  message type, AppendEntries with no entries and with a
 *                  command, a barrier and a configuration change,
 *                  InstallSnapshot with a three-server configuration, and
 *                  all of them in one stream; checked by node_rf_feed here
 *
 * Usage: fuzz-seeds DIR (DIR/<target>/ must exist).  Stops at the first
 * problem (a seed meant valid that is refused says so).
 */
#include <errno.h>
#include <raft.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "node/fsm.h"
#include "node/raftframe.h"
#include "proto/lanes.h"
#include "storage/index.h"
#include "proto/wire_api.h"
#include "proto/wire_auth.h"
#include "router/http.h"
#include "router/httpd.h"
#include "storage/codec.h"
#include "storage/expr.h"
#include "tests/fuzz/harness.h"

static const char *dir;
static sh_arena arena;

__attribute__((noreturn)) static void die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz-seeds: %s: %s\n", what, why);
	exit(1);
}

static void write_file(const char *target, const char *name, const void *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
		die(path, strerror(errno));
}

static void write_msg(const char *target, const char *name, const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = sh_arena_alloc(&arena, len + 1);
	protobuf_c_message_pack(m, buf);
	write_file(target, name, buf, len);
}

/* ------------------------------------------------------------------------ */
/* DynamoDB JSON bodies                                                      */
/* ------------------------------------------------------------------------ */

typedef struct body {
	const char *name; /* file name */
	const char *op;
	const char *json;
	bool valid; /* converts to a Request (else: a refused seed, json/ only) */
} body;

static const body bodies[] = {
    {"get_item", "GetItem",
     "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"Artist#1\"}, \"sk\": {\"N\": \"3\"}}, "
     "\"ProjectionExpression\": \"#t, Albums[1].Title, Tags\", "
     "\"ExpressionAttributeNames\": {\"#t\": \"Title\"}, \"ConsistentRead\": true, "
     "\"ReturnConsumedCapacity\": \"TOTAL\"}",
     true},
    {"put_item", "PutItem",
     "{\"TableName\": \"Music\", \"Item\": {\"pk\": {\"S\": \"Artist#1\"}, \"sk\": {\"N\": "
     "\"3\"}, \"Title\": {\"S\": \"Caf\\u00e9\"}, \"Price\": {\"N\": \"-12.50e3\"}, \"Cover\": "
     "{\"B\": \"iVBORw0KGgo=\"}, \"Live\": {\"BOOL\": false}, \"Gone\": {\"NULL\": true}, "
     "\"Albums\": {\"L\": [{\"M\": {\"Title\": {\"S\": \"One\"}, \"Year\": {\"N\": \"1999\"}}}, "
     "{\"M\": {\"Title\": {\"S\": \"Two\"}}}]}, \"Tags\": {\"SS\": [\"rock\", \"pop\"]}, "
     "\"Ranks\": {\"NS\": [\"1\", \"2.5\", \"1E+10\"]}, \"Blobs\": {\"BS\": [\"AQI=\", "
     "\"/w==\"]}}, \"ConditionExpression\": \"attribute_not_exists(pk) OR Price < :p\", "
     "\"ExpressionAttributeValues\": {\":p\": {\"N\": \"100\"}}, \"ReturnValues\": \"ALL_OLD\", "
     "\"ReturnValuesOnConditionCheckFailure\": \"ALL_OLD\"}",
     true},
    {"update_item", "UpdateItem",
     "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"Artist#1\"}, \"sk\": {\"N\": "
     "\"3\"}}, \"UpdateExpression\": \"SET #t = :t, Plays = if_not_exists(Plays, :zero) + :one, "
     "More = list_append(if_not_exists(More, :more), :more), Albums[0].#y = :y REMOVE Gone, "
     "Albums[1] ADD Tags "
     ":tags, Plays2 :one DELETE Ranks :r\", \"ConditionExpression\": \"attribute_exists(pk) AND "
     "(size(Tags) <= :ten OR contains(Tags, :tag)) AND NOT begins_with(#t, :t)\", "
     "\"ExpressionAttributeNames\": {\"#t\": \"Title\", \"#y\": \"Year\"}, "
     "\"ExpressionAttributeValues\": {\":t\": {\"S\": \"New\"}, \":zero\": {\"N\": \"0\"}, "
     "\":one\": {\"N\": \"1\"}, \":more\": "
     "{\"L\": [{\"S\": \"Three\"}]}, \":y\": {\"N\": \"2001\"}, \":tags\": {\"SS\": [\"jazz\"]}, "
     "\":r\": {\"NS\": [\"2.5\"]}, \":ten\": {\"N\": \"10\"}, \":tag\": {\"S\": \"rock\"}}, "
     "\"ReturnValues\": \"UPDATED_NEW\"}",
     true},
    {"delete_item", "DeleteItem",
     "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"Artist#1\"}, \"sk\": {\"N\": "
     "\"3\"}}, \"ConditionExpression\": \"Price BETWEEN :lo AND :hi AND attribute_type(Tags, "
     ":ss) AND Live IN (:f, :n)\", \"ExpressionAttributeValues\": {\":lo\": {\"N\": \"1\"}, "
     "\":hi\": {\"N\": \"99\"}, \":ss\": {\"S\": \"SS\"}, \":f\": {\"BOOL\": false}, \":n\": "
     "{\"NULL\": true}}, \"ReturnValues\": \"ALL_OLD\"}",
     true},
    {"query", "Query",
     "{\"TableName\": \"Music\", \"IndexName\": \"byTitle\", \"KeyConditionExpression\": "
     "\"pk = :p AND sk BETWEEN :a AND :b\", \"FilterExpression\": \"Price > :min AND "
     "attribute_exists(Albums[0].Title)\", \"ProjectionExpression\": \"pk, sk, Price\", "
     "\"ExpressionAttributeValues\": {\":p\": {\"S\": \"Artist#1\"}, \":a\": {\"N\": \"1\"}, "
     "\":b\": {\"N\": \"9\"}, \":min\": {\"N\": \"0.5\"}}, \"Limit\": 25, \"ScanIndexForward\": "
     "false, \"ExclusiveStartKey\": {\"pk\": {\"S\": \"Artist#1\"}, \"sk\": {\"N\": \"2\"}}, "
     "\"ReturnConsumedCapacity\": \"INDEXES\"}",
     true},
    {"query_begins", "Query",
     "{\"TableName\": \"Music\", \"KeyConditionExpression\": \"#k = :p AND sk >= :s\", "
     "\"ExpressionAttributeNames\": {\"#k\": \"pk\"}, \"ExpressionAttributeValues\": "
     "{\":p\": {\"S\": \"A\"}, \":s\": {\"N\": \"2024\"}}, \"Select\": \"COUNT\"}",
     true},
    {"scan", "Scan",
     "{\"TableName\": \"Music\", \"FilterExpression\": \"contains(Title, :w) OR size(Albums) > "
     ":n OR Albums[0] = :m\", \"ExpressionAttributeValues\": {\":w\": {\"S\": \"the\"}, \":n\": "
     "{\"N\": \"2\"}, \":m\": {\"M\": {\"Title\": {\"S\": \"One\"}}}}, \"Segment\": 1, "
     "\"TotalSegments\": 4, \"Limit\": 100, \"ConsistentRead\": true}",
     true},
    {"scan_count", "Scan", "{\"TableName\": \"Music\", \"Select\": \"COUNT\"}", true},
    {"batch_get_item", "BatchGetItem",
     "{\"RequestItems\": {\"Music\": {\"Keys\": [{\"pk\": {\"S\": \"A\"}, \"sk\": {\"N\": "
     "\"1\"}}, {\"pk\": {\"S\": \"B\"}, \"sk\": {\"N\": \"2\"}}], \"ProjectionExpression\": "
     "\"#t\", \"ExpressionAttributeNames\": {\"#t\": \"Title\"}, \"ConsistentRead\": true}, "
     "\"Fans\": {\"Keys\": [{\"id\": {\"B\": \"AAEC\"}}]}}, \"ReturnConsumedCapacity\": "
     "\"TOTAL\"}",
     true},
    {"batch_write_item", "BatchWriteItem",
     "{\"RequestItems\": {\"Music\": [{\"PutRequest\": {\"Item\": {\"pk\": {\"S\": \"A\"}, "
     "\"sk\": {\"N\": \"1\"}, \"L\": {\"L\": [{\"N\": \"1\"}, {\"L\": []}]}}}}, "
     "{\"DeleteRequest\": {\"Key\": {\"pk\": {\"S\": \"B\"}, \"sk\": {\"N\": \"2\"}}}}], "
     "\"Fans\": [{\"PutRequest\": {\"Item\": {\"id\": {\"B\": \"AAEC\"}, \"m\": {\"M\": {}}}}}]}, "
     "\"ReturnConsumedCapacity\": \"TOTAL\", \"ReturnItemCollectionMetrics\": \"SIZE\"}",
     true},
    {"transact_write_items", "TransactWriteItems",
     "{\"TransactItems\": [{\"ConditionCheck\": {\"TableName\": \"Accounts\", \"Key\": "
     "{\"pk\": {\"S\": \"alice\"}}, \"ConditionExpression\": \"Balance >= :amt\", "
     "\"ExpressionAttributeValues\": {\":amt\": {\"N\": \"10\"}}}}, {\"Update\": "
     "{\"TableName\": \"Accounts\", \"Key\": {\"pk\": {\"S\": \"bob\"}}, \"UpdateExpression\": "
     "\"ADD Balance :amt\", \"ExpressionAttributeValues\": {\":amt\": {\"N\": \"10\"}}}}, "
     "{\"Put\": {\"TableName\": \"Ledger\", \"Item\": {\"pk\": {\"S\": \"tx#1\"}, \"amt\": "
     "{\"N\": \"10\"}}, \"ConditionExpression\": \"attribute_not_exists(pk)\", "
     "\"ReturnValuesOnConditionCheckFailure\": \"ALL_OLD\"}}, {\"Delete\": {\"TableName\": "
     "\"Holds\", \"Key\": {\"pk\": {\"S\": \"alice\"}}}}], \"ClientRequestToken\": "
     "\"6f1c2d9a-0b1e-4c5d-9e8f-112233445566\", \"ReturnConsumedCapacity\": \"TOTAL\"}",
     true},
    {"transact_get_items", "TransactGetItems",
     "{\"TransactItems\": [{\"Get\": {\"TableName\": \"Accounts\", \"Key\": {\"pk\": {\"S\": "
     "\"alice\"}}, \"ProjectionExpression\": \"#b\", \"ExpressionAttributeNames\": {\"#b\": "
     "\"Balance\"}}}, {\"Get\": {\"TableName\": \"Accounts\", \"Key\": {\"pk\": {\"S\": "
     "\"bob\"}}}}]}",
     true},
    {"create_table", "CreateTable",
     "{\"TableName\": \"Music\", \"KeySchema\": [{\"AttributeName\": \"pk\", \"KeyType\": "
     "\"HASH\"}, {\"AttributeName\": \"sk\", \"KeyType\": \"RANGE\"}], "
     "\"AttributeDefinitions\": [{\"AttributeName\": \"pk\", \"AttributeType\": \"S\"}, "
     "{\"AttributeName\": \"sk\", \"AttributeType\": \"N\"}, {\"AttributeName\": \"Title\", "
     "\"AttributeType\": \"S\"}, {\"AttributeName\": \"Cover\", \"AttributeType\": \"B\"}], "
     "\"GlobalSecondaryIndexes\": [{\"IndexName\": \"byTitle\", \"KeySchema\": "
     "[{\"AttributeName\": \"Title\", \"KeyType\": \"HASH\"}, {\"AttributeName\": \"sk\", "
     "\"KeyType\": \"RANGE\"}], \"Projection\": {\"ProjectionType\": \"INCLUDE\", "
     "\"NonKeyAttributes\": [\"Price\"]}, \"WriteShards\": 4}], \"LocalSecondaryIndexes\": "
     "[{\"IndexName\": \"byCover\", \"KeySchema\": [{\"AttributeName\": \"pk\", \"KeyType\": "
     "\"HASH\"}, {\"AttributeName\": \"Cover\", \"KeyType\": \"RANGE\"}], \"Projection\": "
     "{\"ProjectionType\": \"KEYS_ONLY\"}}], \"BillingMode\": \"PAY_PER_REQUEST\", "
     "\"StreamSpecification\": {\"StreamEnabled\": false}, \"Tags\": [{\"Key\": \"k\", "
     "\"Value\": \"v\"}]}",
     true},
    {"create_table_provisioned", "CreateTable",
     "{\"TableName\": \"Fans\", \"KeySchema\": [{\"AttributeName\": \"id\", \"KeyType\": "
     "\"HASH\"}], \"AttributeDefinitions\": [{\"AttributeName\": \"id\", \"AttributeType\": "
     "\"B\"}], \"BillingMode\": \"PROVISIONED\", \"ProvisionedThroughput\": "
     "{\"ReadCapacityUnits\": 5, \"WriteCapacityUnits\": 5}}",
     true},
    {"describe_table", "DescribeTable", "{\"TableName\": \"Music\"}", true},
    {"delete_table", "DeleteTable", "{\"TableName\": \"Music\"}", true},
    {"list_tables", "ListTables", "{\"ExclusiveStartTableName\": \"Fans\", \"Limit\": 10}", true},
    {"update_table", "UpdateTable",
     "{\"TableName\": \"Music\", \"AttributeDefinitions\": [{\"AttributeName\": \"Year\", "
     "\"AttributeType\": \"N\"}], \"GlobalSecondaryIndexUpdates\": [{\"Create\": "
     "{\"IndexName\": \"byYear\", \"KeySchema\": [{\"AttributeName\": \"Year\", \"KeyType\": "
     "\"HASH\"}], \"Projection\": {\"ProjectionType\": \"ALL\"}, \"WriteShards\": 2}}]}",
     true},
    {"update_table_delete", "UpdateTable",
     "{\"TableName\": \"Music\", \"GlobalSecondaryIndexUpdates\": [{\"Delete\": "
     "{\"IndexName\": \"byTitle\"}}], \"BillingMode\": \"PAY_PER_REQUEST\"}",
     true},
    {"cluster_status", "ClusterStatus", "{}", true},
    /* The legacy parameters, translated into expressions by the converter. */
    {"query_legacy", "Query",
     "{\"TableName\": \"Music\", \"KeyConditions\": {\"pk\": {\"ComparisonOperator\": \"EQ\", "
     "\"AttributeValueList\": [{\"S\": \"A\"}]}, \"sk\": {\"ComparisonOperator\": \"BETWEEN\", "
     "\"AttributeValueList\": [{\"N\": \"1\"}, {\"N\": \"9\"}]}}, \"QueryFilter\": {\"Price\": "
     "{\"ComparisonOperator\": \"IN\", \"AttributeValueList\": [{\"N\": \"1\"}, {\"N\": "
     "\"2\"}]}, \"Title\": {\"ComparisonOperator\": \"NOT_CONTAINS\", \"AttributeValueList\": "
     "[{\"S\": \"x\"}]}}, \"ConditionalOperator\": \"OR\", \"AttributesToGet\": [\"pk\", "
     "\"Title\"]}",
     true},
    {"scan_legacy", "Scan",
     "{\"TableName\": \"Music\", \"ScanFilter\": {\"Title\": {\"ComparisonOperator\": "
     "\"BEGINS_WITH\", \"AttributeValueList\": [{\"S\": \"The\"}]}, \"Live\": "
     "{\"ComparisonOperator\": \"NULL\"}}}",
     true},
    {"update_legacy", "UpdateItem",
     "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"A\"}, \"sk\": {\"N\": \"1\"}}, "
     "\"AttributeUpdates\": {\"Plays\": {\"Action\": \"ADD\", \"Value\": {\"N\": \"1\"}}, "
     "\"Tags\": {\"Action\": \"DELETE\", \"Value\": {\"SS\": [\"old\"]}}, \"Albums\": "
     "{\"Action\": \"ADD\", \"Value\": {\"L\": [{\"S\": \"New\"}]}}, \"Live\": {\"Action\": "
     "\"DELETE\"}, \"Title\": {\"Value\": {\"S\": \"T\"}}}, \"Expected\": {\"Title\": "
     "{\"Exists\": false}, \"Price\": {\"ComparisonOperator\": \"LT\", \"Value\": {\"N\": "
     "\"5\"}}}, \"ConditionalOperator\": \"OR\", \"ReturnValues\": \"ALL_NEW\"}",
     true},
    /* Refused, each at another stage. */
    {"bad_json", "PutItem", "{\"TableName\": \"Music\", \"Item\": {\"pk\": {\"S\": \"a\"", false},
    {"bad_shape", "PutItem", "{\"TableName\": 7, \"Item\": [1, 2]}", false},
    {"bad_value", "PutItem",
     "{\"TableName\": \"Music\", \"Item\": {\"pk\": {\"S\": \"a\", \"N\": \"1\"}, \"b\": "
     "{\"B\": \"abc\"}}}",
     false},
    /* Legacy and expression parameters together. */
    {"legacy", "Query",
     "{\"TableName\": \"Music\", \"KeyConditions\": {\"pk\": {\"ComparisonOperator\": \"EQ\", "
     "\"AttributeValueList\": [{\"S\": \"a\"}]}}, \"KeyConditionExpression\": \"pk = :a\", "
     "\"ExpressionAttributeValues\": {\":a\": {\"S\": \"a\"}}}",
     false},
    {"unknown_op", "FrobnicateItem", "{}", false},
};
#define NBODIES (sizeof(bodies) / sizeof(bodies[0]))

/* Valid bodies that convert but that the router then refuses (validation
 * seeds: they reach the converters' error paths with a well-formed message). */
static const body invalid_requests[] = {
    {"put_item_invalid", "PutItem",
     "{\"TableName\": \"a!\", \"Item\": {\"pk\": {\"N\": \"1e200\"}, \"s\": {\"SS\": [\"x\", "
     "\"x\"]}, \"e\": {\"S\": \"\"}}, \"ReturnValues\": \"UPDATED_NEW\"}",
     true},
    {"update_item_bad_expr", "UpdateItem",
     "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"a\"}}, \"UpdateExpression\": \"SET "
     "a = :v, a.b = :v REMOVE status\", \"ExpressionAttributeValues\": {\":v\": {\"N\": \"1\"}, "
     "\":unused\": {\"S\": \"x\"}}}",
     true},
};
#define NINVALID (sizeof(invalid_requests) / sizeof(invalid_requests[0]))

static Shoal__Request *requests[NBODIES + NINVALID];
static const body *request_body[NBODIES + NINVALID];
static size_t nrequests;

static Shoal__Request *convert(const body *b)
{
	char m[SH_ERRMSG_SIZE] = "";
	json_t *j = NULL;
	Shoal__Request *r = NULL;
	if (wire_json_parse(b->json, strlen(b->json), &j, m) != SHOAL_OK)
		return NULL;
	int rc = wire_api_request_from_json(&arena, b->op, j, &r, m);
	json_decref(j);
	return rc == SHOAL_OK ? r : NULL;
}

static void json_seeds(void)
{
	for (size_t i = 0; i < NBODIES + NINVALID; i++) {
		const body *b = i < NBODIES ? &bodies[i] : &invalid_requests[i - NBODIES];
		size_t lo = strlen(b->op), lj = strlen(b->json);
		char *text = sh_arena_alloc(&arena, lo + 1 + lj);
		memcpy(text, b->op, lo);
		text[lo] = '\n';
		memcpy(text + lo + 1, b->json, lj);
		write_file("json", b->name, text, lo + 1 + lj);
		Shoal__Request *r = convert(b);
		if ((r != NULL) != b->valid)
			die(b->name,
			    b->valid ? "a valid body does not convert" : "a bad body converts");
		if (r != NULL) {
			r->request_id = 1000 + i;
			request_body[nrequests] = b;
			requests[nrequests++] = r;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Native Requests                                                           */
/* ------------------------------------------------------------------------ */

static const Shoal__Request *find(const char *name)
{
	for (size_t i = 0; i < nrequests; i++)
		if (strcmp(request_body[i]->name, name) == 0)
			return requests[i];
	die(name, "no such seed body");
	return NULL;
}

static uint8_t *pack_request(const Shoal__Request *r, size_t *len)
{
	*len = shoal__request__get_packed_size(r);
	uint8_t *buf = sh_arena_alloc(&arena, *len + 1);
	shoal__request__pack(r, buf);
	return buf;
}

/* body || its Auth field, signed by AKIDEXAMPLE at FZ_NOW_S. */
static void sign(const char *name, const uint8_t *body, size_t len)
{
	char date[17], date8[9];
	uint8_t key[32], sig[32];
	wire_auth_amz_date(FZ_NOW_S, date);
	memcpy(date8, date, 8);
	date8[8] = '\0';
	wire_auth_signing_key(FZ_SECRET, date8, "us-east-1", "dynamodb", key);
	wire_auth_signature(key, date, "us-east-1", "dynamodb", body, len, sig);
	uint8_t *msg = sh_arena_alloc(&arena, len + 512);
	memcpy(msg, body, len);
	size_t n =
	    wire_auth_encode(msg + len, 512, "AKIDEXAMPLE", date, "us-east-1", "dynamodb", sig);
	if (n == 0)
		die(name, "wire_auth_encode");
	write_file("request", name, msg, len + n);
}

static void request_seeds(void)
{
	for (size_t i = 0; i < nrequests; i++)
		write_msg("request", request_body[i]->name, &requests[i]->base);

	/* A batch of three (libshoal with many requests in flight). */
	Shoal__Request batch = SHOAL__REQUEST__INIT;
	ProtobufCBinaryData members[3];
	for (size_t i = 0; i < 3; i++)
		members[i].data = pack_request(requests[i], &members[i].len);
	batch.n_batch = 3;
	batch.batch = members;
	write_msg("request", "batch", &batch.base);

	/* Signed, as libshoal signs (proto/wire_auth.h): one the grants allow,
	 * ones they deny, a batch signed as a whole, a transaction. */
	size_t len;
	uint8_t *body = pack_request(find("get_item"), &len);
	sign("signed_get_item", body, len);
	body = pack_request(find("put_item"), &len);
	sign("signed_put_item", body, len);
	body = pack_request(find("transact_write_items"), &len);
	sign("signed_transact_write_items", body, len);
	body = pack_request(find("create_table_provisioned"), &len);
	sign("signed_create_table", body, len);
	body = pack_request(&batch, &len);
	sign("signed_batch", body, len);
}

/* ------------------------------------------------------------------------ */
/* NodeRequests                                                              */
/* ------------------------------------------------------------------------ */

static const uint8_t txn_id[16] = {0x6f, 0x1c, 0x2d, 0x9a, 0x0b, 0x1e, 0x4c, 0x5d,
                                   0x9e, 0x8f, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66};

static void node_seeds(void)
{
	char name[128];
	for (size_t i = 0; i < nrequests; i++) {
		const Shoal__Request *r = requests[i];
		shoal_op op = wire_op_of(r->op_case);
		if (op >= SHOAL_OP__COUNT || (wire_ops[op].flags & SHOAL_OPF_DDL) ||
		    (wire_ops[op].flags & SHOAL_OPF_ADMIN))
			continue; /* the router does these through group 0's own messages */
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.group = 3;
		nr.epoch = 12;
		nr.table_id = 7;
		nr.request = (Shoal__Request *)r;
		nr.any_replica = (wire_ops[op].flags & SHOAL_OPF_READ) != 0;
		if (r->op_case == SHOAL__REQUEST__OP_PUT_ITEM) {
			nr.write_token.data = (uint8_t *)txn_id;
			nr.write_token.len = sizeof(txn_id);
		}
		if (r->op_case == SHOAL__REQUEST__OP_SCAN) {
			nr.hash_lo = 1ull << 62;
			nr.hash_hi = (1ull << 63) - 1;
			nr.want_last_key = true;
		}
		snprintf(name, sizeof(name), "%s", request_body[i]->name);
		write_msg("node_request", name, &nr.base);
	}

	/* Group 0 and table definitions. */
	Shoal__TableDefine td = SHOAL__TABLE_DEFINE__INIT;
	td.def = find("create_table")->create_table;
	td.table_id = 7;
	td.created_ms = 1795000000123;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.group = 2;
	nr.define_table = &td;
	write_msg("node_request", "define_table", &nr.base);

	Shoal__TableDrop drop = SHOAL__TABLE_DROP__INIT;
	drop.table_name = (char *)"Music";
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 2;
	nr.drop_table = &drop;
	write_msg("node_request", "drop_table", &nr.base);

	Shoal__TableUpdate tu = SHOAL__TABLE_UPDATE__INIT;
	tu.update = find("update_table")->update_table;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.update_table = &tu;
	write_msg("node_request", "update_table", &nr.base);

	Shoal__IndexActivate act = SHOAL__INDEX_ACTIVATE__INIT;
	act.table_name = (char *)"Music";
	act.index_name = (char *)"byYear";
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.activate_index = &act;
	write_msg("node_request", "activate_index", &nr.base);

	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 4;
	nr.group_status = true;
	write_msg("node_request", "group_status", &nr.base);
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.list_catalog = true;
	write_msg("node_request", "list_catalog", &nr.base);

	/* Index shipping, node -> node. */
	Shoal__IndexDelta d1 = SHOAL__INDEX_DELTA__INIT, d2 = SHOAL__INDEX_DELTA__INIT;
	Shoal__IndexDelta *deltas[] = {&d1, &d2};
	d1.seq = 41;
	d1.hash = 0x9e3779b97f4a7c15ull;
	d1.table_id = 7;
	d1.index_id = 1;
	d1.key.data = (uint8_t *)"\x00\x07\x00\x01kTitle";
	d1.key.len = 10;
	d1.value.data = (uint8_t *)"\x01\x02value";
	d1.value.len = 7;
	d1.ts_ms = 1795000000000;
	d2 = d1;
	d2.seq = 42;
	d2.del = true;
	d2.value.len = 0;
	Shoal__IndexApply ia = SHOAL__INDEX_APPLY__INIT;
	ia.source_group = 1;
	ia.n_deltas = 2;
	ia.deltas = deltas;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 3;
	nr.index_ship = &ia;
	write_msg("node_request", "index_ship", &nr.base);

	/* Transactions: one group's part, the decision, finish, acks, status. */
	const Shoal__TransactWriteItemsRequest *tw =
	    find("transact_write_items")->transact_write_items;
	uint32_t positions[] = {0, 1};
	uint32_t participants[] = {3, 5};
	Shoal__TxnWrite w = SHOAL__TXN_WRITE__INIT;
	w.id.data = (uint8_t *)txn_id;
	w.id.len = sizeof(txn_id);
	w.n_actions = 2;
	w.actions = tw->transact_items;
	w.n_positions = 2;
	w.positions = positions;
	w.coord_group = 3;
	w.n_participants = 2;
	w.participants = participants;
	w.digest.data = (uint8_t *)txn_id;
	w.digest.len = sizeof(txn_id);
	w.token = true;
	w.request_actions = 4;
	w.deadline_ms = 1795000005000;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 3;
	nr.txn_write = &w;
	write_msg("node_request", "txn_write", &nr.base);

	Shoal__TxnDecide dec = SHOAL__TXN_DECIDE__INIT;
	dec.id = w.id;
	dec.commit = true;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 3;
	nr.txn_decide = &dec;
	write_msg("node_request", "txn_decide", &nr.base);

	Shoal__TxnFinish fin = SHOAL__TXN_FINISH__INIT;
	fin.id = w.id;
	fin.commit = true;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 5;
	nr.txn_finish = &fin;
	write_msg("node_request", "txn_finish", &nr.base);

	Shoal__TxnAck ack = SHOAL__TXN_ACK__INIT, *acks[] = {&ack};
	ack.id = w.id;
	ack.n_groups = 1;
	ack.groups = &participants[1];
	Shoal__TxnAcks ta = SHOAL__TXN_ACKS__INIT;
	ta.n_acks = 1;
	ta.acks = acks;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 3;
	nr.txn_acks = &ta;
	write_msg("node_request", "txn_acks", &nr.base);

	Shoal__TxnStatus st = SHOAL__TXN_STATUS__INIT;
	st.id = w.id;
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.group = 3;
	nr.txn_status = &st;
	write_msg("node_request", "txn_status", &nr.base);

	/* A batch, as the router sends one node many requests at once. */
	Shoal__NodeRequest m1 = SHOAL__NODE_REQUEST__INIT, m2 = SHOAL__NODE_REQUEST__INIT;
	m1.group = 3;
	m1.request = (Shoal__Request *)find("get_item");
	m1.any_replica = true;
	m2.group = 4;
	m2.request = (Shoal__Request *)find("update_item");
	ProtobufCBinaryData members[2];
	const Shoal__NodeRequest *ms[] = {&m1, &m2};
	for (int i = 0; i < 2; i++) {
		members[i].len = shoal__node_request__get_packed_size(ms[i]);
		members[i].data = sh_arena_alloc(&arena, members[i].len);
		shoal__node_request__pack(ms[i], members[i].data);
	}
	nr = (Shoal__NodeRequest)SHOAL__NODE_REQUEST__INIT;
	nr.n_batch = 2;
	nr.batch = members;
	write_msg("node_request", "batch", &nr.base);
}

/* ------------------------------------------------------------------------ */
/* Raft entries and shipped index deltas                                     */
/* ------------------------------------------------------------------------ */

#define FSM_GROUP 1
#define FSM_NODE  1
#define FSM_TS    1795000000000

static struct raft seed_raft;

static void seed_map(uint8_t **buf, size_t *len);

/* Every Command write_command made, by name (snapshot_seeds applies them). */
static struct {
	const char *name;
	uint8_t *buf;
	size_t len;
} entries[16];
static size_t n_entries;

/* A Command of the n ops, from proposer, as node_fsm_encode pads it. */
/* fuzz_fsm applies a Command with an even batch_id in group 0, else in
 * group 1. */
static void write_command(const char *name, uint32_t proposer, uint64_t batch_id,
                          Shoal__CommandOp **ops, size_t n)
{
	Shoal__Command cmd = SHOAL__COMMAND__INIT;
	cmd.proposer = proposer;
	cmd.batch_id = batch_id;
	cmd.ts_ms = FSM_TS;
	cmd.n_ops = n;
	cmd.ops = ops;
	struct raft_buffer buf;
	char m[SH_ERRMSG_SIZE];
	if (node_fsm_encode(&cmd, &buf, m) != SHOAL_OK)
		die(name, m);
	write_file("fsm", name, buf.base, buf.len);
	/* Kept for the snapshot seeds, which apply them. */
	if (n_entries == sizeof(entries) / sizeof(entries[0]))
		die(name, "too many entries");
	entries[n_entries].name = name;
	entries[n_entries].len = buf.len;
	entries[n_entries].buf = sh_arena_alloc(&arena, buf.len);
	memcpy(entries[n_entries++].buf, buf.base, buf.len);
	raft_free(buf.base);
}

static Shoal__CommandOp *new_op(void)
{
	Shoal__CommandOp *op = sh_arena_alloc(&arena, sizeof(*op));
	shoal__command_op__init(op);
	return op;
}

/* A define_table of the table a CreateTable makes, under id. */
static Shoal__CommandOp *define(const Shoal__CreateTableRequest *ct, uint32_t id)
{
	Shoal__TableDefine *td = sh_arena_alloc(&arena, sizeof(*td));
	shoal__table_define__init(td);
	td->def = (Shoal__CreateTableRequest *)ct;
	td->table_id = id;
	td->created_ms = FSM_TS - 1000;
	Shoal__CommandOp *op = new_op();
	op->op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	op->define_table = td;
	return op;
}

static Shoal__CommandOp *define_music(void)
{
	return define(find("create_table")->create_table, 7);
}

/* The deltas a node_fsm's outbox holds after the PutItem seed on Music
 * (its GSI byTitle), copied into the seeds' arena. */
static void real_deltas(st_delta **out, uint32_t *n)
{
	char tmpl[] = "/tmp/shoal-fuzz-seeds.XXXXXX", m[SH_ERRMSG_SIZE];
	if (mkdtemp(tmpl) == NULL)
		die("mkdtemp", strerror(errno));
	node_fsm *f;
	if (node_fsm_open(tmpl, FSM_GROUP, FSM_NODE, &f, m) != SHOAL_OK)
		die("node_fsm_open", m);
	node_fsm_attach(f, &seed_raft);
	Shoal__CommandOp *put = new_op();
	put->op_case = SHOAL__COMMAND_OP__OP_PUT;
	put->put = find("put_item")->put_item;
	Shoal__CommandOp *ops[] = {define_music(), put};
	Shoal__Command cmd = SHOAL__COMMAND__INIT;
	cmd.proposer = 2;
	cmd.ts_ms = FSM_TS;
	cmd.n_ops = 2;
	cmd.ops = ops;
	struct raft_buffer buf;
	if (node_fsm_encode(&cmd, &buf, m) != SHOAL_OK)
		die("node_fsm_encode", m);
	struct raft_fsm *rf = node_fsm_raft(f);
	void *res;
	seed_raft.last_applied = 0;
	if (rf->apply(rf, &buf, &res) != 0 || node_fsm_failed(f, m) != SHOAL_OK)
		die("applying the Music seed", m);
	raft_free(buf.base);
	if (st_outbox_read(node_fsm_env(f), 0, 16, 1 << 20, &arena, out, n, m) != SHOAL_OK)
		die("st_outbox_read", m);
	if (*n == 0)
		die("st_outbox_read", "the PutItem seed made no index delta");
	node_fsm_close(f);
	char p[512];
	snprintf(p, sizeof(p), "rm -rf '%s'", tmpl);
	if (system(p) != 0)
		die("rm", tmpl);
}

static Shoal__IndexApply *index_apply_of(const st_delta *d, uint32_t n)
{
	Shoal__IndexApply *ia = sh_arena_alloc(&arena, sizeof(*ia));
	shoal__index_apply__init(ia);
	ia->source_group = 2;
	ia->n_deltas = n;
	ia->deltas = sh_arena_alloc(&arena, n * sizeof(*ia->deltas));
	for (uint32_t i = 0; i < n; i++) {
		Shoal__IndexDelta *x = sh_arena_alloc(&arena, sizeof(*x));
		shoal__index_delta__init(x);
		x->seq = d[i].seq;
		x->hash = d[i].hash;
		x->table_id = d[i].table_id;
		x->index_id = d[i].index_id;
		x->del = d[i].del;
		x->key.data = (uint8_t *)d[i].key;
		x->key.len = d[i].key_len;
		x->value.data = (uint8_t *)d[i].val;
		x->value.len = d[i].val_len;
		x->ts_ms = d[i].ts_ms;
		ia->deltas[i] = x;
	}
	return ia;
}

static void fsm_seeds(void)
{
	st_delta *d;
	uint32_t n;
	real_deltas(&d, &n);

	/* index_ship/: the real deltas, one of them, a delete, refused lists. */
	Shoal__IndexApply *ia = index_apply_of(d, n);
	write_msg("index_ship", "real", &ia->base);
	Shoal__IndexApply *one = index_apply_of(d, 1);
	write_msg("index_ship", "one", &one->base);
	Shoal__IndexApply *del = index_apply_of(d, 1);
	del->deltas[0]->del = true;
	del->deltas[0]->value.len = 0;
	write_msg("index_ship", "delete", &del->base);
	st_delta two[2] = {d[0], d[0]};
	two[1].seq = d[0].seq + 1;
	Shoal__IndexApply *bad = index_apply_of(two, 2);
	bad->deltas[1]->seq = d[0].seq;
	write_msg("index_ship", "out_of_order", &bad->base);
	bad = index_apply_of(two, 2);
	bad->deltas[1]->index_id = 0;
	write_msg("index_ship", "second_index_0", &bad->base);
	bad = index_apply_of(two, 2);
	bad->deltas[1]->key.len = 0;
	write_msg("index_ship", "second_key_empty", &bad->base);
	bad = index_apply_of(two, 2);
	bad->deltas[0]->index_id = 70000;
	write_msg("index_ship", "index_id_70000", &bad->base);

	/* fsm/: Fans and Music defined, then every write on them (results
	 * built). */
	Shoal__CommandOp *w[8];
	w[0] = define(find("create_table_provisioned")->create_table, 8);
	w[1] = define_music();
	w[2] = new_op();
	w[2]->op_case = SHOAL__COMMAND_OP__OP_PUT;
	w[2]->put = find("put_item")->put_item;
	w[2]->write_token.data = (uint8_t *)txn_id;
	w[2]->write_token.len = sizeof(txn_id);
	w[3] = new_op();
	w[3]->op_case = SHOAL__COMMAND_OP__OP_UPDATE;
	w[3]->update = find("update_item")->update_item;
	w[4] = new_op();
	w[4]->op_case = SHOAL__COMMAND_OP__OP_BATCH_WRITE;
	w[4]->batch_write = find("batch_write_item")->batch_write_item;
	w[5] = new_op();
	w[5]->op_case = SHOAL__COMMAND_OP__OP_DELETE;
	w[5]->delete_ = find("delete_item")->delete_item;
	w[6] = new_op();
	w[6]->op_case = SHOAL__COMMAND_OP__OP_DELETE;
	w[6]->delete_ = find("delete_item")->delete_item;
	w[6]->ttl_expire = true;
	w[7] = w[2]; /* the tokened put again: its first answer */
	write_command("writes", FSM_NODE, 77, w, 8);
	write_command("writes_replica", 2, 77, w, 8);

	/* The DDL ops, as group 1 applies the ones group 0 forwards. */
	Shoal__CommandOp *ddl[4];
	ddl[0] = define_music();
	ddl[1] = new_op();
	ddl[1]->op_case = SHOAL__COMMAND_OP__OP_UPDATE_TABLE;
	ddl[1]->update_table = sh_arena_alloc(&arena, sizeof(Shoal__TableUpdate));
	shoal__table_update__init(ddl[1]->update_table);
	ddl[1]->update_table->update = find("update_table")->update_table;
	ddl[2] = new_op();
	ddl[2]->op_case = SHOAL__COMMAND_OP__OP_ACTIVATE_INDEX;
	ddl[2]->activate_index = sh_arena_alloc(&arena, sizeof(Shoal__IndexActivate));
	shoal__index_activate__init(ddl[2]->activate_index);
	ddl[2]->activate_index->table_name = (char *)"Music";
	ddl[2]->activate_index->index_name = (char *)"byTitle";
	ddl[3] = new_op();
	ddl[3]->op_case = SHOAL__COMMAND_OP__OP_DROP_TABLE;
	ddl[3]->drop_table = sh_arena_alloc(&arena, sizeof(Shoal__TableDrop));
	shoal__table_drop__init(ddl[3]->drop_table);
	ddl[3]->drop_table->table_name = (char *)"Music";
	write_command("ddl", FSM_NODE, 77, ddl, 4);
	write_command("ddl_group0", FSM_NODE, 78, ddl, 4);

	/* A transaction's part, decision, finish, acks and status. */
	const Shoal__TransactWriteItemsRequest *tw =
	    find("transact_write_items")->transact_write_items;
	static uint32_t positions[] = {0, 1}, participants[] = {1, 5};
	Shoal__TxnWrite *tx = sh_arena_alloc(&arena, sizeof(*tx));
	shoal__txn_write__init(tx);
	tx->id.data = (uint8_t *)txn_id;
	tx->id.len = sizeof(txn_id);
	tx->n_actions = tw->n_transact_items < 2 ? tw->n_transact_items : 2;
	tx->actions = tw->transact_items;
	tx->n_positions = tx->n_actions;
	tx->positions = positions;
	tx->coord_group = FSM_GROUP;
	tx->n_participants = 2;
	tx->participants = participants;
	tx->digest = tx->id;
	tx->token = true;
	tx->request_actions = 4;
	tx->deadline_ms = FSM_TS + 5000;
	static const body accounts = {
	    "accounts", "CreateTable",
	    "{\"TableName\": \"Accounts\", \"KeySchema\": [{\"AttributeName\": \"pk\", "
	    "\"KeyType\": \"HASH\"}], \"AttributeDefinitions\": [{\"AttributeName\": \"pk\", "
	    "\"AttributeType\": \"S\"}]}",
	    true};
	Shoal__Request *acc = convert(&accounts);
	if (acc == NULL)
		die("fsm seeds", "the Accounts CreateTable does not convert");
	static const body alice = {"alice", "PutItem",
	                           "{\"TableName\": \"Accounts\", \"Item\": {\"pk\": {\"S\": "
	                           "\"alice\"}, \"Balance\": {\"N\": \"100\"}}}",
	                           true};
	Shoal__Request *put_alice = convert(&alice);
	if (put_alice == NULL)
		die("fsm seeds", "the PutItem of alice does not convert");
	Shoal__CommandOp *t[8];
	t[0] = define(acc->create_table, 9);
	t[7] = new_op();
	t[7]->op_case = SHOAL__COMMAND_OP__OP_PUT;
	t[7]->put = put_alice->put_item;
	t[1] = new_op();
	t[1]->op_case = SHOAL__COMMAND_OP__OP_TXN_WRITE;
	t[1]->txn_write = tx;
	t[2] = new_op();
	t[2]->op_case = SHOAL__COMMAND_OP__OP_TXN_DECIDE;
	t[2]->txn_decide = sh_arena_alloc(&arena, sizeof(Shoal__TxnDecide));
	shoal__txn_decide__init(t[2]->txn_decide);
	t[2]->txn_decide->id = tx->id;
	t[2]->txn_decide->commit = true;
	t[3] = new_op();
	t[3]->op_case = SHOAL__COMMAND_OP__OP_TXN_FINISH;
	t[3]->txn_finish = sh_arena_alloc(&arena, sizeof(Shoal__TxnFinish));
	shoal__txn_finish__init(t[3]->txn_finish);
	t[3]->txn_finish->id = tx->id;
	t[3]->txn_finish->commit = true;
	static Shoal__TxnAck ack = SHOAL__TXN_ACK__INIT, *acks[] = {&ack};
	ack.id = tx->id;
	ack.n_groups = 1;
	ack.groups = &participants[1];
	t[4] = new_op();
	t[4]->op_case = SHOAL__COMMAND_OP__OP_TXN_ACKS;
	t[4]->txn_acks = sh_arena_alloc(&arena, sizeof(Shoal__TxnAcks));
	shoal__txn_acks__init(t[4]->txn_acks);
	t[4]->txn_acks->n_acks = 1;
	t[4]->txn_acks->acks = acks;
	t[5] = new_op();
	t[5]->op_case = SHOAL__COMMAND_OP__OP_TXN_STATUS;
	t[5]->txn_status = sh_arena_alloc(&arena, sizeof(Shoal__TxnStatus));
	shoal__txn_status__init(t[5]->txn_status);
	t[5]->txn_status->id = tx->id;
	t[6] = new_op();
	t[6]->op_case = SHOAL__COMMAND_OP__OP_TXN_EXPIRE;
	t[6]->txn_expire = true;
	/* alice's account before the transaction that checks it */
	Shoal__CommandOp *tx_ops[8] = {t[0], t[7], t[1], t[2], t[3], t[4], t[5], t[6]};
	write_command("txn", FSM_NODE, 77, tx_ops, 8);

	/* The internal ops: shipped deltas, outbox trim, backfill, scrub,
	 * stream trim. */
	Shoal__CommandOp *in[6];
	in[0] = define_music();
	in[1] = new_op();
	in[1]->op_case = SHOAL__COMMAND_OP__OP_INDEX_APPLY;
	in[1]->index_apply = ia;
	in[2] = new_op();
	in[2]->op_case = SHOAL__COMMAND_OP__OP_OUTBOX_TRIM;
	in[2]->outbox_trim = sh_arena_alloc(&arena, sizeof(Shoal__OutboxTrim));
	shoal__outbox_trim__init(in[2]->outbox_trim);
	in[2]->outbox_trim->upto = 1;
	in[3] = new_op();
	in[3]->op_case = SHOAL__COMMAND_OP__OP_BACKFILL;
	in[3]->backfill = sh_arena_alloc(&arena, sizeof(Shoal__IndexBackfill));
	shoal__index_backfill__init(in[3]->backfill);
	in[3]->backfill->table_name = (char *)"Music";
	in[3]->backfill->index_id = 1;
	in[3]->backfill->max_items = 8;
	in[4] = new_op();
	in[4]->op_case = SHOAL__COMMAND_OP__OP_SCRUB;
	in[4]->scrub = sh_arena_alloc(&arena, sizeof(Shoal__Scrub));
	shoal__scrub__init(in[4]->scrub);
	in[4]->scrub->proposer = FSM_NODE;
	in[4]->scrub->seq = 3;
	in[4]->scrub->max_keys = 100;
	in[5] = new_op();
	in[5]->op_case = SHOAL__COMMAND_OP__OP_STREAM_TRIM;
	in[5]->stream_trim = true;
	write_command("internal", FSM_NODE, 77, in, 6);

	/* A table with a stream (NEW_AND_OLD_IMAGES), written: stream
	 * records. */
	static const body events[] = {
	    {"events", "CreateTable",
	     "{\"TableName\": \"Events\", \"KeySchema\": [{\"AttributeName\": \"id\", "
	     "\"KeyType\": \"HASH\"}], \"AttributeDefinitions\": [{\"AttributeName\": \"id\", "
	     "\"AttributeType\": \"S\"}], \"StreamSpecification\": {\"StreamEnabled\": true, "
	     "\"StreamViewType\": \"NEW_AND_OLD_IMAGES\"}}",
	     true},
	    {"e1", "PutItem",
	     "{\"TableName\": \"Events\", \"Item\": {\"id\": {\"S\": \"e1\"}, \"n\": {\"N\": "
	     "\"1\"}}}",
	     true},
	    {"e2", "PutItem",
	     "{\"TableName\": \"Events\", \"Item\": {\"id\": {\"S\": \"e2\"}, \"l\": {\"L\": "
	     "[{\"S\": \"x\"}]}}}",
	     true},
	    {"e1_update", "UpdateItem",
	     "{\"TableName\": \"Events\", \"Key\": {\"id\": {\"S\": \"e1\"}}, "
	     "\"UpdateExpression\": \"ADD n :one\", \"ExpressionAttributeValues\": {\":one\": "
	     "{\"N\": \"1\"}}}",
	     true},
	    {"e2_delete", "DeleteItem",
	     "{\"TableName\": \"Events\", \"Key\": {\"id\": {\"S\": \"e2\"}}}", true},
	};
	Shoal__CommandOp *ev[5];
	for (size_t i = 0; i < 5; i++) {
		Shoal__Request *r = convert(&events[i]);
		if (r == NULL)
			die("fsm seeds", events[i].name);
		if (i == 0) {
			ev[i] = define(r->create_table, 10);
			continue;
		}
		ev[i] = new_op();
		if (r->op_case == SHOAL__REQUEST__OP_PUT_ITEM) {
			ev[i]->op_case = SHOAL__COMMAND_OP__OP_PUT;
			ev[i]->put = r->put_item;
		} else if (r->op_case == SHOAL__REQUEST__OP_UPDATE_ITEM) {
			ev[i]->op_case = SHOAL__COMMAND_OP__OP_UPDATE;
			ev[i]->update = r->update_item;
		} else {
			ev[i]->op_case = SHOAL__COMMAND_OP__OP_DELETE;
			ev[i]->delete_ = r->delete_item;
		}
	}
	write_command("streams", FSM_NODE, 77, ev, 5);

	/* Group 0: tables defined, an index added, the cluster map set. */
	Shoal__CommandOp *g0[4];
	g0[0] = define_music();
	g0[1] = define(find("create_table_provisioned")->create_table, 8);
	g0[2] = new_op();
	g0[2]->op_case = SHOAL__COMMAND_OP__OP_UPDATE_TABLE;
	g0[2]->update_table = sh_arena_alloc(&arena, sizeof(Shoal__TableUpdate));
	shoal__table_update__init(g0[2]->update_table);
	g0[2]->update_table->update = find("update_table")->update_table;
	g0[3] = new_op();
	g0[3]->op_case = SHOAL__COMMAND_OP__OP_MAP_SET;
	g0[3]->map_set = sh_arena_alloc(&arena, sizeof(Shoal__MapSet));
	shoal__map_set__init(g0[3]->map_set);
	g0[3]->map_set->prev_epoch = 1;
	seed_map(&g0[3]->map_set->map.data, &g0[3]->map_set->map.len);
	write_command("map_group0", FSM_NODE, 80, g0, 4);

	/* Not a Command: the FSM must stop, not guess. */
	write_file("fsm", "not_a_command", "\x0a\xff\xff\xff\xff\x0f", 6);
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

static const uint8_t *entry(const char *name, size_t *len)
{
	for (size_t i = 0; i < n_entries; i++)
		if (strcmp(entries[i].name, name) == 0) {
			*len = entries[i].len;
			return entries[i].buf;
		}
	die(name, "no such entry");
}

/* A snapshot's trailer made right again after a change (XXH64, big-endian). */
static void resum(uint8_t *snap, size_t len)
{
	uint64_t sum = XXH64(snap, len - 8, 0);
	for (int i = 0; i < 8; i++)
		snap[len - 8 + i] = (uint8_t)(sum >> (56 - 8 * i));
}

/* A snapshot of a fresh FSM of group g after the named entries, applied at
 * indexes 1, 2, ... (as raft hands them: node_fsm_raft's callbacks), taken
 * by the FSM's own snapshot callbacks and written as one buffer. */
static void write_snapshot(const char *name, uint32_t g, const char *const *names, size_t n)
{
	char tmpl[] = "/tmp/shoal-fuzz-seeds.XXXXXX", m[SH_ERRMSG_SIZE];
	if (mkdtemp(tmpl) == NULL)
		die("mkdtemp", strerror(errno));
	node_fsm *f;
	if (node_fsm_open(tmpl, g, FSM_NODE, &f, m) != SHOAL_OK)
		die("node_fsm_open", m);
	node_fsm_attach(f, &seed_raft);
	struct raft_fsm *rf = node_fsm_raft(f);
	for (size_t i = 0; i < n; i++) {
		struct raft_buffer buf;
		buf.base = (void *)entry(names[i], &buf.len);
		void *res;
		seed_raft.last_applied = i;
		if (rf->apply(rf, &buf, &res) != 0 || node_fsm_failed(f, m) != SHOAL_OK)
			die(names[i], m);
	}
	if (g == 0) {
		sh_map map;
		bool found;
		if (st_cluster_map_load(node_fsm_env(f), &map, &found, m) != SHOAL_OK || !found)
			die(name, "group 0 holds no cluster map");
		sh_map_fini(&map);
	}
	struct raft_buffer *bufs = NULL;
	unsigned nb = 0;
	if (rf->snapshot(rf, &bufs, &nb) != 0 || rf->snapshot_async(rf, &bufs, &nb) != 0)
		die(name, "taking the snapshot");
	size_t total = 0;
	for (unsigned i = 0; i < nb; i++)
		total += bufs[i].len;
	uint8_t *snap = sh_arena_alloc(&arena, total + 1), *p = snap;
	for (unsigned i = 0; i < nb; i++) {
		memcpy(p, bufs[i].base, bufs[i].len);
		p += bufs[i].len;
	}
	rf->snapshot_finalize(rf, &bufs, &nb);
	write_file("snapshot", name, snap, total);
	if (g == 1 && n == 4) {
		/* Refused ones, each with a valid checksum (what fuzz_snapshot
		 * found installed): a header index other than meta's "applied",
		 * and meta's "format" another build's. */
		uint8_t *bad = sh_arena_alloc(&arena, total);
		memcpy(bad, snap, total);
		bad[23]++;
		resum(bad, total);
		write_file("snapshot", "applied_mismatch", bad, total);
		memcpy(bad, snap, total);
		uint8_t *fmt = memmem(bad, total,
		                      "\0\0\0\x06"
		                      "format"
		                      "\0\0\0\x04",
		                      14);
		if (fmt == NULL)
			die(name, "no format in meta");
		fmt[17]++;
		resum(bad, total);
		write_file("snapshot", "format_2", bad, total);
	}
	node_fsm_close(f);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	if (system(cmd) != 0)
		die("rm", tmpl);
}

/* ------------------------------------------------------------------------ */
/* NodeResponses                                                             */
/* ------------------------------------------------------------------------ */

/* The operation byte of fuzz_node_response for a DynamoDB operation. */
static uint8_t op_byte(const char *op)
{
	for (uint8_t i = 0; i < SHOAL_OP__COUNT; i++)
		if (strcmp(wire_ops[i].name, op) == 0)
			return i;
	die(op, "no such operation");
}

static void write_answer(const char *name, const char *op, const uint8_t *buf, size_t len)
{
	uint8_t *b = sh_arena_alloc(&arena, len + 1);
	b[0] = op_byte(op);
	if (len > 0)
		memcpy(b + 1, buf, len);
	write_file("node_response", name, b, len + 1);
}

static void write_nresp(const char *name, const char *op, const Shoal__NodeResponse *nr)
{
	size_t len = shoal__node_response__get_packed_size(nr);
	uint8_t *buf = sh_arena_alloc(&arena, len + 1);
	shoal__node_response__pack(nr, buf);
	write_answer(name, op, buf, len);
}

/* The answers the FSM builds for the proposer of entry `name` (applied at
 * index 1 to a fresh FSM of group g), each as a seed named <name>_<i> with
 * the operation ops[i], and all of them as one batched answer, as a node
 * sends a router's batch back (wire_batch_answer). */
static void fsm_answers(const char *name, uint32_t g, const char *const *ops, size_t n_ops)
{
	char tmpl[] = "/tmp/shoal-fuzz-seeds.XXXXXX", m[SH_ERRMSG_SIZE];
	if (mkdtemp(tmpl) == NULL)
		die("mkdtemp", strerror(errno));
	node_fsm *f;
	if (node_fsm_open(tmpl, g, FSM_NODE, &f, m) != SHOAL_OK)
		die("node_fsm_open", m);
	node_fsm_attach(f, &seed_raft);
	struct raft_fsm *rf = node_fsm_raft(f);
	struct raft_buffer buf;
	buf.base = (void *)entry(name, &buf.len);
	Shoal__Command *cmd = shoal__command__unpack(NULL, buf.len, buf.base);
	if (cmd == NULL || cmd->proposer != FSM_NODE || cmd->n_ops != n_ops)
		die(name, "not an entry of this node with that many operations");
	node_batch b;
	if (node_batch_init(&b, cmd->batch_id, (uint32_t)cmd->n_ops) != SHOAL_OK)
		die(name, "node_batch_init");
	shoal__command__free_unpacked(cmd, NULL);
	node_fsm_register(f, &b);
	void *res;
	seed_raft.last_applied = 0;
	if (rf->apply(rf, &buf, &res) != 0 || node_fsm_failed(f, m) != SHOAL_OK)
		die(name, m);
	node_fsm_unregister(f, &b);
	if (!b.applied)
		die(name, "no answers");
	char file[128];
	for (uint32_t i = 0; i < b.n_ops; i++) {
		snprintf(file, sizeof(file), "%s_%u", name, i);
		write_answer(file, ops[i], b.results[i], b.result_lens[i]);
	}
	nng_msg *batch =
	    wire_batch_answer(wire_field_number(&shoal__node_response__descriptor, "batch"),
	                      (const uint8_t *const *)b.results, b.result_lens, b.n_ops);
	if (batch == NULL)
		die(name, "wire_batch_answer");
	snprintf(file, sizeof(file), "%s_batch", name);
	write_answer(file, ops[0], nng_msg_body(batch), nng_msg_len(batch));
	nng_msg_free(batch);
	node_batch_fini(&b);
	node_fsm_close(f);
	char cmdline[512];
	snprintf(cmdline, sizeof(cmdline), "rm -rf '%s'", tmpl);
	if (system(cmdline) != 0)
		die("rm", tmpl);
}

/* node_response/: what nodes answer routers and each other
 * (fuzz_node_response). */
static void node_response_seeds(void)
{
	static const char *const writes[] = {"CreateTable", "CreateTable",    "PutItem",
	                                     "UpdateItem",  "BatchWriteItem", "DeleteItem",
	                                     "DeleteItem",  "PutItem"};
	fsm_answers("writes", 1, writes, 8);
	static const char *const txn[] = {"CreateTable",        "PutItem",
	                                  "TransactWriteItems", "TransactWriteItems",
	                                  "TransactWriteItems", "TransactWriteItems",
	                                  "TransactWriteItems", "TransactWriteItems"};
	fsm_answers("txn", 1, txn, 8);
	static const char *const g0[] = {"CreateTable", "CreateTable", "UpdateTable",
	                                 "ClusterStatus"};
	fsm_answers("map_group0", 0, g0, 4);

	/* A follower's refusal with the leader it believes in. */
	Shoal__Response r = SHOAL__RESPONSE__INIT;
	r.status = SHOAL__STATUS__STATUS_NOT_LEADER;
	r.message = (char *)"not the leader of group 3";
	Shoal__NodeResponse nr = SHOAL__NODE_RESPONSE__INIT;
	nr.response = &r;
	nr.leader_node = 3;
	write_nresp("not_leader", "GetItem", &nr);

	/* group 0's list_catalog: two tables and a dropped one. */
	Shoal__TableDefine td[3], *tds[3];
	const char *ct[] = {"create_table", "create_table_provisioned", "create_table"};
	for (int i = 0; i < 3; i++) {
		shoal__table_define__init(&td[i]);
		td[i].def = find(ct[i])->create_table;
		td[i].table_id = 7 + (uint32_t)i;
		td[i].created_ms = FSM_TS - 1000;
		tds[i] = &td[i];
	}
	td[2].dropped_ms = FSM_TS;
	Shoal__Response ok = SHOAL__RESPONSE__INIT;
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = &ok;
	nr.n_catalog = 3;
	nr.catalog = tds;
	nr.epoch = 12;
	write_nresp("list_catalog", "ListTables", &nr);

	/* A data group's status. */
	Shoal__IndexStats is = SHOAL__INDEX_STATS__INIT, *iss[] = {&is};
	is.index_name = (char *)"byTitle";
	is.index_id = 1;
	is.item_count = 3;
	is.status = (char *)"ACTIVE";
	Shoal__TableStats ts = SHOAL__TABLE_STATS__INIT, *tss[] = {&ts};
	ts.table_name = (char *)"Music";
	ts.item_count = 5;
	ts.size_bytes = 500;
	ts.n_indexes = 1;
	ts.indexes = iss;
	Shoal__GroupStatus gs = SHOAL__GROUP_STATUS__INIT;
	gs.group = 3;
	gs.node = 2;
	gs.role = (char *)"follower";
	gs.leader_node = 1;
	gs.n_tables = 1;
	gs.tables = tss;
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = &ok;
	nr.status = &gs;
	write_nresp("group_status", "ClusterStatus", &nr);

	/* A replica's scrub result. */
	Shoal__ScrubResult sr = SHOAL__SCRUB_RESULT__INIT;
	sr.found = true;
	sr.index = 41;
	sr.start.data = (uint8_t *)"\x02\x00\x07";
	sr.start.len = 3;
	sr.count = 100;
	sr.hash = 0x9e3779b97f4a7c15ull;
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = &ok;
	nr.scrub = &sr;
	write_nresp("scrub", "GetItem", &nr);

	/* A page of a Scan with its last key, and TransactGetItems' states. */
	char m[SH_ERRMSG_SIZE];
	json_t *j;
	Shoal__Response *page;
	const char *query = "{\"Items\": [{\"pk\": {\"S\": \"A\"}, \"sk\": {\"N\": \"1\"}}], "
	                    "\"Count\": 1, \"ScannedCount\": 2, \"LastEvaluatedKey\": {\"pk\": "
	                    "{\"S\": \"A\"}, \"sk\": {\"N\": \"1\"}}}";
	if (wire_json_parse(query, strlen(query), &j, m) != SHOAL_OK ||
	    wire_api_response_from_json(&arena, "Scan", j, &page, m) != SHOAL_OK)
		die("scan page", m);
	json_decref(j);
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = page;
	nr.last_key = page->scan->last_evaluated_key;
	nr.read_bytes = 120;
	write_nresp("scan_page", "Scan", &nr);

	Shoal__Response *tg;
	const char *tget = "{\"Responses\": [{\"Item\": {\"pk\": {\"S\": \"alice\"}}}, {}]}";
	if (wire_json_parse(tget, strlen(tget), &j, m) != SHOAL_OK ||
	    wire_api_response_from_json(&arena, "TransactGetItems", j, &tg, m) != SHOAL_OK)
		die("transact get", m);
	json_decref(j);
	Shoal__TxnItemState s1 = SHOAL__TXN_ITEM_STATE__INIT, s2 = SHOAL__TXN_ITEM_STATE__INIT;
	Shoal__TxnItemState *states[] = {&s1, &s2};
	s1.version = 7;
	s2.locked = true;
	s2.version = 9;
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = tg;
	nr.n_txn_items = 2;
	nr.txn_items = states;
	nr.txn_instance = 0x1234;
	write_nresp("transact_get", "TransactGetItems", &nr);

	/* Two answers concatenated: one NodeResponse whose Response comes in
	 * two pieces (a refusal, then a result), which the router's fast path
	 * refuses (fuzz_node_response found it read another status than
	 * protobuf-c's merge). */
	{
		Shoal__Response bad = SHOAL__RESPONSE__INIT;
		bad.status = SHOAL__STATUS__STATUS_NOT_LEADER;
		bad.message = (char *)"not the leader";
		Shoal__NodeResponse a = SHOAL__NODE_RESPONSE__INIT, b = SHOAL__NODE_RESPONSE__INIT;
		a.response = &bad;
		b.response = page;
		b.leader_node = 3;
		size_t la = shoal__node_response__get_packed_size(&a);
		size_t lb = shoal__node_response__get_packed_size(&b);
		uint8_t *two = sh_arena_alloc(&arena, la + lb);
		shoal__node_response__pack(&a, two);
		shoal__node_response__pack(&b, two + la);
		write_answer("response_in_pieces", "Scan", two, la + lb);
	}

	/* An index shipment's answer with GSI partitions over capacity. */
	uint32_t behind[] = {7, 9};
	nr = (Shoal__NodeResponse)SHOAL__NODE_RESPONSE__INIT;
	nr.response = &ok;
	nr.n_gsi_behind = 2;
	nr.gsi_behind = behind;
	write_nresp("index_ship", "PutItem", &nr);
}

/* snapshot/: what a leader sends in InstallSnapshot (fuzz_snapshot). */
static void snapshot_seeds(void)
{
	/* A data group after tables with GSIs and an LSI, every write, a
	 * transaction's records, shipped index deltas, a backfill, a scrub and
	 * stream records. */
	static const char *const data[] = {"writes", "txn", "internal", "streams"};
	write_snapshot("data_group", 1, data, 4);
	/* Before any index fuzz_snapshot's FSM has passed: not loaded. */
	write_snapshot("data_group_old", 1, data, 1);
	/* Group 0 with tables and a cluster map. */
	static const char *const g0[] = {"map_group0", "ddl_group0"};
	write_snapshot("group0", 0, g0, 2);
	write_snapshot("empty", 1, data, 0);
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */
/* ------------------------------------------------------------------------ */

static void response_seeds(void)
{
	static const struct {
		const char *name, *op, *json;
	} r[] = {
	    {"get_item", "GetItem",
	     "{\"Item\": {\"pk\": {\"S\": \"A\"}, \"n\": {\"N\": \"1.5\"}, \"l\": {\"L\": "
	     "[{\"M\": {\"b\": {\"B\": \"AAE=\"}}}, {\"NULL\": true}]}, \"s\": {\"SS\": "
	     "[\"x\", \"y\"]}}, \"ConsumedCapacity\": {\"TableName\": \"Music\", "
	     "\"CapacityUnits\": 0.5}}"},
	    {"query", "Query",
	     "{\"Items\": [{\"pk\": {\"S\": \"A\"}, \"sk\": {\"N\": \"1\"}}, {\"pk\": {\"S\": "
	     "\"A\"}, \"sk\": {\"N\": \"2\"}}], \"Count\": 2, \"ScannedCount\": 5, "
	     "\"LastEvaluatedKey\": {\"pk\": {\"S\": \"A\"}, \"sk\": {\"N\": \"2\"}}, "
	     "\"ConsumedCapacity\": {\"TableName\": \"Music\", \"CapacityUnits\": 1.0, \"Table\": "
	     "{\"CapacityUnits\": 0.5}, \"GlobalSecondaryIndexes\": {\"byTitle\": "
	     "{\"CapacityUnits\": 0.5}}}}"},
	    {"update_item", "UpdateItem", "{\"Attributes\": {\"Plays\": {\"N\": \"7\"}}}"},
	    {"batch_write_item", "BatchWriteItem",
	     "{\"UnprocessedItems\": {\"Music\": [{\"PutRequest\": {\"Item\": {\"pk\": {\"S\": "
	     "\"A\"}}}}, {\"DeleteRequest\": {\"Key\": {\"pk\": {\"S\": \"B\"}}}}]}}"},
	    {"batch_get_item", "BatchGetItem",
	     "{\"Responses\": {\"Music\": [{\"pk\": {\"S\": \"A\"}}]}, \"UnprocessedKeys\": "
	     "{\"Fans\": {\"Keys\": [{\"id\": {\"B\": \"AAEC\"}}]}}}"},
	    {"describe_table", "DescribeTable",
	     "{\"Table\": {\"TableName\": \"Music\", \"TableStatus\": \"ACTIVE\", "
	     "\"CreationDateTime\": 1795000000.123, \"KeySchema\": [{\"AttributeName\": \"pk\", "
	     "\"KeyType\": \"HASH\"}], \"AttributeDefinitions\": [{\"AttributeName\": \"pk\", "
	     "\"AttributeType\": \"S\"}], \"ItemCount\": 3, \"TableSizeBytes\": 120, "
	     "\"TableArn\": \"arn:aws:dynamodb:shoal:000000000000:table/Music\", "
	     "\"BillingModeSummary\": {\"BillingMode\": \"PAY_PER_REQUEST\"}, "
	     "\"GlobalSecondaryIndexes\": [{\"IndexName\": \"byTitle\", \"KeySchema\": "
	     "[{\"AttributeName\": \"Title\", \"KeyType\": \"HASH\"}], \"Projection\": "
	     "{\"ProjectionType\": \"ALL\"}, \"IndexStatus\": \"CREATING\", \"Backfilling\": "
	     "true}]}}"},
	    {"list_tables", "ListTables",
	     "{\"TableNames\": [\"Fans\", \"Music\"], \"LastEvaluatedTableName\": \"Music\"}"},
	    {"condition_failed", "PutItem",
	     "{\"__type\": \"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException\", "
	     "\"message\": \"The conditional request failed\", \"Item\": {\"pk\": {\"S\": "
	     "\"A\"}}}"},
	    {"txn_canceled", "TransactWriteItems",
	     "{\"__type\": \"com.amazonaws.dynamodb.v20120810#TransactionCanceledException\", "
	     "\"Message\": \"Transaction cancelled, please refer cancellation reasons for specific "
	     "reasons [None, ConditionalCheckFailed]\", \"CancellationReasons\": [{\"Code\": "
	     "\"None\"}, {\"Code\": \"ConditionalCheckFailed\", \"Message\": \"The conditional "
	     "request failed\", \"Item\": {\"pk\": {\"S\": \"alice\"}}}]}"},
	    {"validation", "Query",
	     "{\"__type\": \"com.amazon.coral.validate#ValidationException\", \"message\": "
	     "\"Query condition missed key schema element: pk\"}"},
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		uint8_t opb = 0;
		while (strcmp(wire_ops[opb].name, r[i].op) != 0)
			opb++;
		size_t n = strlen(r[i].json);
		uint8_t *buf = sh_arena_alloc(&arena, n + 1);
		buf[0] = opb | 0x80;
		memcpy(buf + 1, r[i].json, n);
		char name[64];
		snprintf(name, sizeof(name), "json_%s", r[i].name);
		write_file("response", name, buf, n + 1);

		char m[SH_ERRMSG_SIZE];
		json_t *j;
		Shoal__Response *resp;
		if (wire_json_parse(r[i].json, n, &j, m) != SHOAL_OK ||
		    wire_api_response_from_json(&arena, r[i].op, j, &resp, m) != SHOAL_OK)
			die(r[i].name, m);
		json_decref(j);
		resp->request_id = 2000 + i;
		size_t len = shoal__response__get_packed_size(resp);
		buf = sh_arena_alloc(&arena, len + 1);
		buf[0] = opb;
		shoal__response__pack(resp, buf + 1);
		snprintf(name, sizeof(name), "pb_%s", r[i].name);
		write_file("response", name, buf, len + 1);
	}
}

/* ------------------------------------------------------------------------ */
/* Stored items                                                              */
/* ------------------------------------------------------------------------ */

static void codec_item(const char *name, const Shoal__PutItemRequest *pb)
{
	char m[SH_ERRMSG_SIZE];
	st_put_req q;
	if (wire_put_req_from_pb(&arena, pb, &q, m) != SHOAL_OK)
		die(name, m);
	uint8_t *buf;
	size_t len;
	if (st_codec_encode(&arena, q.item, &buf, &len) != SHOAL_OK)
		die(name, "st_codec_encode");
	write_file("codec", name, buf, len);
}

static void codec_seeds(void)
{
	codec_item("put_item", find("put_item")->put_item);
	const Shoal__BatchWriteItemRequest *b = find("batch_write_item")->batch_write_item;
	int k = 0;
	for (size_t i = 0; i < b->n_request_items; i++)
		for (size_t j = 0; j < b->request_items[i]->n_requests; j++) {
			const Shoal__WriteRequest *w = b->request_items[i]->requests[j];
			if (w->request_case != SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST)
				continue;
			Shoal__PutItemRequest f = SHOAL__PUT_ITEM_REQUEST__INIT;
			WIRE_SET(&f, table_name, b->request_items[i]->table_name);
			f.item = w->put_request->item;
			char name[32];
			snprintf(name, sizeof(name), "batch_item_%d", k++);
			codec_item(name, &f);
		}
}

/* ------------------------------------------------------------------------ */
/* Expressions and HTTP heads                                                */
/* ------------------------------------------------------------------------ */

static void expr_seeds(void)
{
	static const struct {
		const char *name;
		st_expr_kind kind;
		const char *text;
	} ex[] = {
	    {"condition_paths", ST_EXPR_CONDITION,
	     "#a.b[1] = :s AND (c IN (:s, :n, d) OR NOT begins_with(b, :s))"},
	    {"condition_functions", ST_EXPR_CONDITION,
	     "attribute_not_exists(pk) OR size(a.b) BETWEEN :n2 AND :n"},
	    {"condition_types", ST_EXPR_CONDITION,
	     "contains(c, :s) AND attribute_type(e, :t) AND e <> :n"},
	    {"filter_nested", ST_EXPR_FILTER,
	     "(a.c > :n) AND NOT (b < :s2 OR size(c) >= :n) AND d[0][0] = :n"},
	    {"filter_in", ST_EXPR_FILTER,
	     "#d = :b AND a.b[0] IN (:n, :n2) AND begins_with(#d, :b)"},
	    {"key_between", ST_EXPR_KEY_CONDITION, "#k = :s AND sk BETWEEN :n2 AND :n"},
	    {"key_begins", ST_EXPR_KEY_CONDITION, "pk = :s AND begins_with(sk, :s)"},
	    {"key_reversed", ST_EXPR_KEY_CONDITION, ":s = pk AND sk <= :n"},
	    {"update_all", ST_EXPR_UPDATE,
	     "SET a.b[1] = :s, e = e + :n, f = list_append(if_not_exists(f, :l), :l) REMOVE d[0], "
	     "b ADD g :ns, h :n DELETE c :ss"},
	    {"update_arith", ST_EXPR_UPDATE,
	     "SET x = if_not_exists(y, :n) - :n2, a.c = a.c + :big, d[5] = :m"},
	    {"update_remove", ST_EXPR_UPDATE, "REMOVE a.b[0], a.b[1] SET #d = :b ADD c :ss"},
	    {"projection", ST_EXPR_PROJECTION, "pk, a.b[1], #d, d[1], d[0][0], zz.y"},
	    {"projection_names", ST_EXPR_PROJECTION, "#a.c, b, c"},
	    {"reserved", ST_EXPR_CONDITION, "status = :s"},
	};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		size_t n = strlen(ex[i].text);
		char *buf = sh_arena_alloc(&arena, n + 1);
		buf[0] = (char)ex[i].kind;
		memcpy(buf + 1, ex[i].text, n);
		write_file("expr", ex[i].name, buf, n + 1);
	}
}

static const char *head_header(void *ctx, const char *name)
{
	return rt_httpd_header_get(ctx, name);
}

/* A request as botocore sends it, signed by AKIDEXAMPLE at FZ_NOW_HTTP:
 * the signature is computed with router/sigv4.c over the parsed head. */
static void signed_head(const char *name, const char *op, const char *body)
{
	static const char fmt[] =
	    "POST / HTTP/1.1\r\nHost: localhost:8000\r\nAccept-Encoding: identity\r\n"
	    "X-Amz-Target: DynamoDB_20120810.%s\r\nContent-Type: application/x-amz-json-1.0\r\n"
	    "User-Agent: Boto3/1.26.27 Python/3.11.2 Linux/6.1.0 Botocore/1.29.27\r\n"
	    "X-Amz-Date: 20261125T230000Z\r\nAuthorization: AWS4-HMAC-SHA256 "
	    "Credential=AKIDEXAMPLE/20261125/us-east-1/dynamodb/aws4_request, "
	    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=%s\r\n"
	    "amz-sdk-invocation-id: 0b4f8f3e-8a4c-4d7e-b2a1-52c7a3b0c0de\r\n"
	    "amz-sdk-request: attempt=1\r\nContent-Length: %zu\r\n\r\n%s";
	char text[2048], parsed[2048], sig[65];
	memset(sig, '0', 64);
	sig[64] = '\0';
	int n = snprintf(text, sizeof(text), fmt, op, sig, strlen(body), body);
	memcpy(parsed, text, (size_t)n);
	rt_httpd_head h;
	size_t scanned = 0;
	if (rt_httpd_parse(parsed, (size_t)n, &scanned, &h) != RT_HTTPD_DONE)
		die(name, "the head does not parse");
	rt_sigv4_req r = {.method = h.method,
	                  .uri = h.target,
	                  .header = head_header,
	                  .ctx = &h,
	                  .body = body,
	                  .body_len = strlen(body)};
	char m[SH_ERRMSG_SIZE], *canon = NULL, *sts = NULL;
	if (rt_sigv4_canonical_request(&r, "content-type;host;x-amz-date;x-amz-target", &canon,
	                               m) != SHOAL_OK ||
	    rt_sigv4_string_to_sign("20261125T230000Z", "20261125/us-east-1/dynamodb/aws4_request",
	                            canon, &sts) != SHOAL_OK)
		die(name, "cannot sign");
	rt_sigv4_sign(FZ_SECRET, "20261125", "us-east-1", "dynamodb", sts, sig);
	sh_free(canon);
	sh_free(sts);
	n = snprintf(text, sizeof(text), fmt, op, sig, strlen(body), body);
	/* Check it as the endpoint would. */
	memcpy(parsed, text, (size_t)n);
	scanned = 0;
	rt_httpd_parse(parsed, (size_t)n, &scanned, &h);
	r.method = h.method;
	r.uri = h.target;
	rt_principal who;
	if (rt_sigv4_verify_as(fz_creds(), &r, FZ_NOW_HTTP, &who, m) != RT_AUTH_OK)
		die(name, m);
	write_file("http_head", name, text, (size_t)n);
}

static void http_seeds(void)
{
	static const struct {
		const char *name, *head;
	} h[] = {
	    {"awscli_keepalive",
	     "POST / HTTP/1.1\r\nhost: 127.0.0.1:8000\r\nx-amz-target: DynamoDB_20120810.Query\r\n"
	     "content-type: application/x-amz-json-1.0\r\nconnection: keep-alive\r\n"
	     "content-length: 2\r\n\r\n{}"
	     "POST / HTTP/1.1\r\nhost: 127.0.0.1:8000\r\ncontent-length: 0\r\n\r\n"},
	    {"expect_continue",
	     "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 16777216\r\n"
	     "X-Amz-Security-Token: FQoGZXIvYXdzEJr\r\n\r\n"},
	    {"health",
	     "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"},
	    {"http10",
	     "\r\n\r\nGET /?X-Amz-Signature=abc HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"},
	    {"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
	                "chunked\r\nContent-Length: 5\r\n\r\n"},
	    {"two_lengths",
	     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 05\r\n"
	     "Connection: close, TE\r\n\r\n"},
	    {"bare_lf", "POST / HTTP/1.1\nHost: h\nContent-Length: 2\n\n{}"},
	    {"folded", "POST / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n  continued\r\n\r\n"},
	    {"version", "POST / HTTP/2.0\r\nHost: h\r\n\r\n"},
	    {"bad_name", "POST / HTTP/1.1\r\nHo st: h\r\n: empty\r\n\r\n"},
	    {"incomplete", "POST / HTTP/1.1\r\nHost: h\r\nContent-Le"},
	};
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		write_file("http_head", h[i].name, h[i].head, strlen(h[i].head));
	signed_head("botocore_put_item", "PutItem",
	            "{\"TableName\": \"Ledger\", \"Item\": {\"pk\": {\"S\": \"tx#2\"}}}");
	signed_head("botocore_get_item", "GetItem",
	            "{\"TableName\": \"Music\", \"Key\": {\"pk\": {\"S\": \"Artist#1\"}}}");
}

static void write_map(const char *name, const sh_map *m)
{
	size_t len = sh_map_encoded_size(m);
	uint8_t *buf = sh_arena_alloc(&arena, len);
	sh_map_encode(m, buf);
	write_file("cluster_map", name, buf, len);
}

static void map_seeds(void)
{
	sh_cluster_conf c;
	char msg[SH_ERRMSG_SIZE];
	memset(&c, 0, sizeof(c));
	c.groups = 4;
	c.replication = 3;
	c.n_nodes = 4;
	for (uint32_t i = 0; i < c.n_nodes; i++) {
		c.nodes[i].id = i + 1;
		c.nodes[i].raft_port = (uint16_t)(7100 + 10 * i);
		snprintf(c.nodes[i].raft_host, sizeof(c.nodes[i].raft_host), "127.0.0.1");
		snprintf(c.nodes[i].rpc, sizeof(c.nodes[i].rpc), "tcp://127.0.0.1:%u", 7200 + i);
	}
	sh_map m;
	if (sh_map_from_conf(&m, &c, msg) != SHOAL_OK ||
	    sh_map_add_table(&m, 1, 3, sh_map_data_groups(&m), msg) != SHOAL_OK ||
	    sh_map_add_table(&m, 7, 3, sh_map_data_groups(&m), msg) != SHOAL_OK)
		die("cluster map", msg);
	write_map("from_conf", &m);
	if (sh_map_split(&m, 1, 0, 1000, 2, msg) != SHOAL_OK ||
	    sh_map_split(&m, 7, 0, 1u << 20, 1, msg) != SHOAL_OK ||
	    sh_map_begin_move(&m, 7, 1u << 20, 3, msg) != SHOAL_OK ||
	    sh_map_add_replica(&m, 1, 1, 2, msg) != SHOAL_OK ||
	    sh_map_drain_node(&m, 2, msg) != SHOAL_OK)
		die("cluster map", msg);
	write_map("moving", &m);
	sh_map_fini(&m);
}

/* The "from_conf" map with its epoch moved past the birth map's (1), as a
 * MapSet over it carries, encoded in the arena. */
static void seed_map(uint8_t **buf, size_t *len)
{
	sh_cluster_conf c;
	char msg[SH_ERRMSG_SIZE];
	memset(&c, 0, sizeof(c));
	c.groups = 2;
	c.replication = 3;
	c.n_nodes = 3;
	for (uint32_t i = 0; i < c.n_nodes; i++) {
		c.nodes[i].id = i + 1;
		c.nodes[i].raft_port = (uint16_t)(7100 + 10 * i);
		snprintf(c.nodes[i].raft_host, sizeof(c.nodes[i].raft_host), "127.0.0.1");
		snprintf(c.nodes[i].rpc, sizeof(c.nodes[i].rpc), "tcp://127.0.0.1:%u", 7200 + i);
	}
	sh_map m;
	if (sh_map_from_conf(&m, &c, msg) != SHOAL_OK ||
	    sh_map_add_table(&m, 7, 2, sh_map_data_groups(&m), msg) != SHOAL_OK)
		die("cluster map", msg);
	if (m.epoch < 2)
		m.epoch = 2;
	*len = sh_map_encoded_size(&m);
	*buf = sh_arena_alloc(&arena, *len);
	sh_map_encode(&m, *buf);
	sh_map_fini(&m);
}

/* --- raft_frame/ ---------------------------------------------------------- */

typedef struct rbuf {
	uint8_t b[1024];
	size_t len;
} rbuf;

static void r64(rbuf *r, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		r->b[r->len++] = (uint8_t)(v >> (8 * i));
}

static void r8(rbuf *r, uint8_t v)
{
	r->b[r->len++] = v;
}

/* A message of type with an n-word header of small numbers. */
static void r_simple(rbuf *r, uint64_t type, unsigned words)
{
	r64(r, type);
	r64(r, 8 * (uint64_t)words);
	for (unsigned i = 0; i < words; i++)
		r64(r, 3 + i);
}

static void r_append(rbuf *r, bool entries)
{
	static const uint8_t types[] = {RAFT_COMMAND, RAFT_BARRIER, RAFT_CHANGE};
	unsigned n = entries ? 3 : 0;
	r64(r, RAFT_IO_APPEND_ENTRIES);
	r64(r, 48 + 16 * (uint64_t)n);
	r64(r, 5), r64(r, 20), r64(r, 4), r64(r, 19), r64(r, n);
	for (unsigned i = 0; i < n; i++) {
		r64(r, 5);
		r8(r, types[i]), r8(r, 0), r8(r, 0), r8(r, 0);
		r8(r, 16), r8(r, 0), r8(r, 0), r8(r, 0); /* 16 bytes each */
	}
	r64(r, 0); /* the unwritten "leader id" */
	for (unsigned i = 0; i < n * 16; i++)
		r8(r, (uint8_t)i);
}

static void r_snapshot(rbuf *r)
{
	static const char *const addr[] = {"127.0.0.1:7101", "127.0.0.1:7201", "127.0.0.1:7301"};
	size_t conf = 1 + 8;
	for (int i = 0; i < 3; i++)
		conf += 8 + strlen(addr[i]) + 2;
	conf = (conf + 7) & ~(size_t)7;
	r64(r, RAFT_IO_INSTALL_SNAPSHOT);
	r64(r, 56 + conf);
	r64(r, 5), r64(r, 30), r64(r, 4), r64(r, 28), r64(r, conf);
	size_t start = r->len;
	r8(r, 1);
	r64(r, 3);
	for (int i = 0; i < 3; i++) {
		r64(r, (uint64_t)i + 1);
		memcpy(r->b + r->len, addr[i], strlen(addr[i]) + 1);
		r->len += strlen(addr[i]) + 1;
		r8(r, RAFT_VOTER);
	}
	while (r->len < start + conf)
		r8(r, 0);
	r64(r, 24); /* data */
	r64(r, 0);
	for (int i = 0; i < 24; i++)
		r8(r, (uint8_t)i);
}

static void write_frames(const char *name, const rbuf *r, unsigned messages)
{
	node_rf f;
	const char *why = NULL;
	node_rf_init(&f);
	if (node_rf_feed(&f, r->b + 2, r->len - 2, &why) != 0 || f.messages != messages)
		die(name, why != NULL ? why : "not every message passed");
	write_file("raft_frame", name, r->b, r->len);
}

static void raft_frame_seeds(void)
{
	static const struct {
		const char *name;
		uint64_t type;
		unsigned words;
	} simple[] = {
	    {"request_vote", RAFT_IO_REQUEST_VOTE, 5},
	    {"request_vote_v1", RAFT_IO_REQUEST_VOTE, 4},
	    {"request_vote_result", RAFT_IO_REQUEST_VOTE_RESULT, 3},
	    {"append_entries_result", RAFT_IO_APPEND_ENTRIES_RESULT, 3},
	    {"timeout_now", RAFT_IO_TIMEOUT_NOW, 3},
	};
	rbuf all = {.len = 0};
	r8(&all, 0), r8(&all, 40); /* the cut */
	for (size_t i = 0; i < sizeof(simple) / sizeof(simple[0]); i++) {
		rbuf r = {.len = 0};
		r8(&r, 0), r8(&r, 20);
		r_simple(&r, simple[i].type, simple[i].words);
		write_frames(simple[i].name, &r, 1);
		r_simple(&all, simple[i].type, simple[i].words);
	}
	rbuf r = {.len = 0};
	r8(&r, 0), r8(&r, 30);
	r_append(&r, false);
	write_frames("heartbeat", &r, 1);
	r.len = 2;
	r_append(&r, true);
	write_frames("append_entries", &r, 1);
	r.len = 2;
	r_snapshot(&r);
	write_frames("install_snapshot", &r, 1);
	r_append(&all, false);
	r_append(&all, true);
	r_snapshot(&all);
	write_frames("all", &all, 8);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz-seeds DIR\n");
		return 2;
	}
	dir = argv[1];
	sh_arena_init(&arena);
	json_seeds();
	request_seeds();
	node_seeds();
	fsm_seeds();
	snapshot_seeds();
	node_response_seeds();
	codec_seeds();
	response_seeds();
	expr_seeds();
	http_seeds();
	map_seeds();
	raft_frame_seeds();
	sh_arena_fini(&arena);
	return 0;
}
