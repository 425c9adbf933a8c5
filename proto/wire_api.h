/*
 * wire_api.h -- DynamoDB's JSON 1.0 protocol bodies <-> Shoal's protobuf
 * envelope (part of proto/, prefix wire_api_; public like wire.h).
 *
 * The shoal CLI (mirroring `aws dynamodb`), a DynamoDB-compatible HTTP
 * endpoint and tests all speak the JSON bodies of DynamoDB's HTTP API: the
 * request body of X-Amz-Target "DynamoDB_20120810.<Operation>" and the body
 * DynamoDB answers with.  This is the one conversion between those bodies and
 * shoal.Request / shoal.Response, in both directions:
 *
 *   client side   body JSON --request_from_json--> Request --(nng)-->
 *                 Response --response_to_json--> body JSON
 *   and back      Request --request_to_json--> body JSON (drive libshoal in
 *                 JSON, log requests), body JSON --response_from_json-->
 *                 Response (parse what a DynamoDB-compatible server sent).
 *
 * The mapping is driven by shoal.proto's descriptors: a protobuf field
 * `foo_bar` is the DynamoDB member "FooBar" (shoal.proto names fields after
 * DynamoDB's parameters), so every parameter shoal.proto carries is converted
 * and a field added to the schema is picked up without code here.  Where the
 * two shapes differ the converter knows it (proto/wire_api_schema.c):
 *   - attribute values, items, keys and ExpressionAttributeNames go through
 *     proto/wire.h's one value codec (wire_item_from_json, wire_item_to_pb,
 *     wire_item_from_pb, wire_item_to_json, wire_names_*);
 *   - maps keyed by table or index name (RequestItems, Responses,
 *     UnprocessedKeys, UnprocessedItems, ConsumedCapacity's
 *     GlobalSecondaryIndexes) are repeated messages whose table_name /
 *     index_name is the key; duplicate keys on output are merged;
 *   - CreationDateTime and LastUpdateToPayPerRequestDateTime are epoch
 *     seconds (a JSON number with a fraction) in JSON, milliseconds in
 *     protobuf;
 *   - ScanRequest.hash_lo/hash_hi (router -> node only) have no JSON form.
 *
 * Requests from JSON (what DynamoDB does at deserialisation):
 *   - unknown members are ignored, and so are members whose value is null;
 *   - a JSON type that does not fit the model is a SerializationException
 *     with Coral's words ("NUMBER_VALUE cannot be converted to String",
 *     "Start of structure or map found where not expected", "STRING_VALUE
 *     cannot be converted to Integer", "Start of list found where not
 *     expected", "Unexpected field type", ...);
 *   - serialisation errors win over validation errors anywhere in the body
 *     (DynamoDB deserialises all, then validates); of the validation errors
 *     met here the first is reported:
 *       the value codec's ("Supplied AttributeValue is empty, ..."),
 *       a null member of a list or map ("1 validation error detected: Value
 *         null at 'keySchema.1.member' failed to satisfy constraint: Member
 *         must not be null"),
 *       two actions in one TransactItems entry ("TransactItems can only
 *         contain one of Check, Put, Update or Delete"), WriteRequest or
 *         GlobalSecondaryIndexUpdate,
 *       U+0000 inside a string parameter (protobuf-c strings would cut it),
 *       misused legacy parameters (below);
 *   - DynamoDB's legacy parameters (AttributesToGet, KeyConditions,
 *     QueryFilter, ScanFilter, Expected, AttributeUpdates,
 *     ConditionalOperator) are translated into the expressions that replaced
 *     them, with generated placeholders (proto/wire_legacy.c), so the
 *     Request carries expressions only; mixing them with expressions and
 *     their other misuses are refused in DynamoDB's words ("Can not use both
 *     expression and non-expression parameters in the same request: ...");
 *   - everything else (required members, enums, lengths, expressions) is
 *     checked where the Request is served (wire_*_req_from_pb, storage), so
 *     a JSON client and a protobuf client get the same messages;
 *   - CreateTable/UpdateTable parameters Shoal has no field for
 *     (StreamSpecification, SSESpecification, Tags, TableClass,
 *     DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput,
 *     ResourcePolicy, ReplicaUpdates, a GSI's OnDemandThroughput /
 *     WarmThroughput) are type-checked and then ignored.
 *
 * Responses to JSON follow DynamoDB's member order (the AWS CLI prints what
 * it receives in order): Items, Count, ScannedCount, LastEvaluatedKey,
 * ConsumedCapacity; TableDescription as DescribeTable prints it.  Members
 * DynamoDB always sends are always written (Count, ItemCount, TableNames,
 * UnprocessedKeys {}, ...); others only when set.  An error Response is
 * {"__type": "<namespace>#<Exception>", "message": "..."} with DynamoDB's
 * namespaces (com.amazon.coral.validate#ValidationException,
 * com.amazon.coral.service#SerializationException and
 * #UnknownOperationException, com.amazonaws.dynamodb.v20120810#<others>),
 * "Message" instead of "message" where DynamoDB capitalises it
 * (TransactionCanceledException, SerializationException,
 * UnknownOperationException), plus "CancellationReasons" and "Item" where
 * DynamoDB adds them.  Readers (response_from_json) accept any namespace
 * and either spelling.
 *
 * Memory.  *_from_json build the protobuf message in the caller's arena `a`
 * (valid until it is reset; never pass it to *__free_unpacked) and copy out
 * of the json_t, which stays the caller's.  *_to_json return a new JSON
 * reference in *out (json_decref it) and borrow the message.  On failure *out
 * is NULL and nothing needs freeing (the arena may hold garbage).
 *
 * Errors: SHOAL_E_UNKNOWN_OPERATION, SHOAL_E_SERIALIZATION,
 * SHOAL_E_VALIDATION (above), SHOAL_E_NOMEM, and for *_to_json
 * SHOAL_E_VALIDATION when the message holds what JSON cannot carry (text
 * that is not UTF-8, an empty AttributeValue, a non-finite double) or a
 * Response whose result does not match the operation (SHOAL_E_INTERNAL).
 * Messages go to errmsg (SH_ERRMSG_SIZE bytes, may be NULL).
 *
 * Threads: every function is reentrant (no shared state besides jansson's
 * allocator hook, set once by wire_json_init).
 */
#ifndef SHOAL_PROTO_WIRE_API_H
#define SHOAL_PROTO_WIRE_API_H

#include "proto/wire.h"

/*
 * A DynamoDB request body -> a Request.  operation is DynamoDB's name
 * ("PutItem", ..., and Shoal's own "ClusterStatus"); a full X-Amz-Target
 * ("DynamoDB_20120810.PutItem") is accepted too.  body NULL is an empty body
 * ({}).  request_id is left 0.
 */
int wire_api_request_from_json(sh_arena *a, const char *operation, const json_t *body,
                               Shoal__Request **out, char *errmsg);

/*
 * A Request -> its DynamoDB body; *operation (may be NULL) receives the
 * operation name (static storage).  Defaults are left out (ConsistentRead
 * false, empty strings, WriteShards 0, ...), so a body converted in and out
 * comes back json_equal unless it spelled out such a default or used legacy
 * parameters (they come back as the expressions they became).
 */
int wire_api_request_to_json(const Shoal__Request *req, const char **operation, json_t **out,
                             char *errmsg);

/* DynamoDB's name of req's operation ("GetItem", "ClusterStatus"); "" when no
 * operation is set.  Static storage. */
const char *wire_api_operation_name(const Shoal__Request *req);

/*
 * A Response -> the body DynamoDB would send for `operation` (NULL: the one
 * the result is for).  A successful Response without a result gives {}.
 * Query/Scan with Select COUNT carry no items, which a Response does not
 * say: here "Items" is left out when there are none but Count > 0;
 * wire_api_response_to_json_for knows from the request.
 */
int wire_api_response_to_json(const Shoal__Response *resp, const char *operation, json_t **out,
                              char *errmsg);
/* The same for the Response to req (operation and Select taken from it). */
int wire_api_response_to_json_for(const Shoal__Response *resp, const Shoal__Request *req,
                                  json_t **out, char *errmsg);

/*
 * A DynamoDB response body for `operation` -> a Response in a.  A body with
 * "__type" is an error: status from the exception name after the last '#'
 * (names Shoal does not know become STATUS_INTERNAL; InternalServerError is
 * STATUS_INTERNAL), message, CancellationReasons (status from each Code) and
 * Item.  Anything else is the operation's result (status OK).  Returns
 * SHOAL_OK when the body was understood, whatever status it carries.
 */
int wire_api_response_from_json(sh_arena *a, const char *operation, const json_t *body,
                                Shoal__Response **out, char *errmsg);

/* The error body {"__type": ..., "message": ...} for an error code. */
int wire_api_error_to_json(int code, const char *message, json_t **out, char *errmsg);
/* "__type" of a code: "com.amazon.coral.validate#ValidationException". */
const char *wire_api_error_type(int code);
/* The HTTP status DynamoDB answers a code with: 200 for SHOAL_OK, 400 for
 * client errors, 500 InternalServerError, 503 ServiceUnavailable. */
int wire_api_http_status(int code);

#endif
