/*
 * wire.h -- the contract of proto/ (prefix wire_): Shoal's wire format and
 * its encodings.
 *
 * proto/shoal.proto defines every message between client, router and node;
 * protobuf-c code for it is generated at build time (proto/shoal.pb-c.h in
 * the build directory).  This header adds what the generated code lacks:
 *
 *   framing     wire_unpack_request / _response: a bounded pre-walk of the
 *               raw bytes (nesting depth, tag and length framing) before
 *               protobuf-c's unpacker, which recurses without limit and would
 *               overflow the stack on a hostile, deeply nested message.
 *   values      protobuf AttributeValue / Item  <->  st_value.
 *   requests    decoded protobuf requests -> the storage request structs
 *               (st_put_req, ...) with DynamoDB's API-level validation and
 *               messages; storage results -> protobuf responses.
 *   JSON        DynamoDB JSON ({"S":"x"}, {"N":"1"}, {"B":"<base64>"}, ...)
 *               <-> st_value, with jansson, as the AWS CLI and DynamoDB's HTTP
 *               API write it.
 *   base64      the strict decoder and encoder DynamoDB JSON needs.
 *
 * Memory.  Conversions allocate everything they hand out in the caller's
 * sh_arena, valid until it is reset or finalised:
 *   - *_to_pb build protobuf-c structs in the arena: nothing to free, never
 *     pass them to *__free_unpacked.
 *   - *_from_pb copy every byte out of the protobuf message, so the unpacked
 *     message may be freed as soon as the conversion returns.
 *   - JSON: *_from_json copy out of the json_t; *_to_json return a new
 *     reference the caller must json_decref.
 * Inputs are borrowed for the duration of the call.
 *
 * Values from the wire are checked for structure only (exactly one type,
 * NULL is true, nesting bounded): they are *not* normalised (maps
 * may be unsorted, numbers not canonical, sets unchecked).  Callers normalise
 * them with st_value_normalize; wire_*_req_from_pb do so for the request
 * structs they build.
 *
 * Errors are codes from common/errors.h with a message in errmsg
 * (SH_ERRMSG_SIZE bytes, may be NULL): SHOAL_E_SERIALIZATION for malformed
 * bytes or JSON shapes, SHOAL_E_VALIDATION with DynamoDB's text for invalid
 * requests, SHOAL_E_NOMEM.  Nothing here aborts on input.
 */
#ifndef SHOAL_PROTO_WIRE_H
#define SHOAL_PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "proto/cluster.pb-c.h"
#include "proto/ops.h"
#include "proto/shoal.pb-c.h"

#include "../common/arena.h"
#include "../common/errors.h"
#include "../storage/storage.h"
#include "../storage/index.h"
#include "../storage/stream.h"

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Nesting of M and L accepted by the converters: ST_MAX_DEPTH plus a margin,
 * so that st_value_normalize, not the converter, reports DynamoDB's exact
 * limit; past this bound the converters refuse with the same message
 * ("Nesting Levels have exceeded supported limits: ...") without recursing
 * further.  Levels are counted as st_value_normalize counts them: the
 * attributes of an item are level 1, the members of an M or L at level k are
 * at level k + 1.
 */
#define WIRE_MAX_VALUE_DEPTH (ST_MAX_DEPTH + 16)

/*
 * Nesting of protobuf messages accepted by wire_unpack_*.  Each M level costs
 * three messages (AttributeValue, MapValue, Attribute), each L level two, and
 * the deepest envelope (Request, BatchWriteItemRequest, TableWriteRequests,
 * WriteRequest, PutRequest, Item, Attribute) seven before the first
 * AttributeValue, so every value the converters accept fits:
 * 8 + 3 * WIRE_MAX_VALUE_DEPTH + 4 <= 160.
 * Stack: protobuf-c's unpacker takes about 1 KB of stack per level, so a
 * message at this limit needs about 200 KB -- unpack on threads with ordinary
 * stacks (glibc's default is 8 MB), not on tiny coroutine stacks.
 */
#define WIRE_MAX_MSG_DEPTH 160

/*
 * Memory a decode may take: protobuf-c allocates a record per field it keeps
 * (a struct per message, a slot per repeated element, a record and a copy per
 * unknown field, bookkeeping per field of a large message), so a hostile
 * message of n bytes could take 52 n.  wire_unpack_* and wire_check_framing
 * refuse a message of n bytes that would take more than
 * WIRE_DECODE_PER_BYTE * n + WIRE_DECODE_SLACK (ValidationException "The
 * Request is too complex for its size: ...").
 * Measured (tests/unit/test_wire_budget.c, bytes allocated per byte): items
 * of attributes of a few characters 5-9; BatchWriteItem of 25 items of 4000
 * one-character attributes holding NULL, BOOL, N "42" or S "v" 14-15; a Query
 * page of items of 17 such attributes (protobuf-c's first scan slab past 16
 * fields is 1 KiB) 20; a List of NULLs, the densest valid value, 22 to 30
 * (protobuf-c's scan slabs double: 30 when the last one is nearly empty).  So
 * every message of valid values decodes; what needs more is made of empty
 * or unknown fields (36-52 per byte).  The slack lets any message up to
 * 32 KiB take any shape.  It is a ratio, not a cap: a 16 MiB message of
 * NULLs may still take 30 times its size while it is handled.
 */
#define WIRE_DECODE_PER_BYTE 32u
#define WIRE_DECODE_SLACK    (1024u * 1024)

/* WIRE_DECODE_PER_BYTE * len + WIRE_DECODE_SLACK (saturating). */
size_t wire_decode_budget(size_t len);

/* ------------------------------------------------------------------------ */
/* Optional fields                                                           */
/* ------------------------------------------------------------------------ */

/*
 * shoal.proto spells proto3 `optional` as a one-member oneof named "_field"
 * (see the top of the .proto); protobuf-c then gives the struct a member
 * `_field_case` that is the field number when set and 0 when not.
 *   WIRE_HAS(req, limit)          is req->limit present?
 *   WIRE_SET(req, limit, 10)      sets it and marks it present.
 *   WIRE_CLEAR(req, limit)        marks it absent.
 * The pointer or bytes stored by WIRE_SET stay owned by the caller.
 */
#define WIRE_HAS(m, f) ((m)->_##f##_case != 0)
/* An optional string field of a decoded message, NULL when absent. */
#define WIRE_OPT(m, f) (WIRE_HAS(m, f) ? (const char *)(m)->f : NULL)
#define WIRE_SET(m, f, v)                                                                          \
	do {                                                                                       \
		(m)->f = (v);                                                                      \
		(m)->_##f##_case =                                                                 \
		    (__typeof__((m)->_##f##_case))wire_field_id((m)->base.descriptor, #f);         \
	} while (0)
#define WIRE_CLEAR(m, f) ((m)->_##f##_case = (__typeof__((m)->_##f##_case))0)

/* The number of field `name` of a message type; asserts that it exists. */
unsigned wire_field_id(const ProtobufCMessageDescriptor *desc, const char *name);

/* ------------------------------------------------------------------------ */
/* Allocators, framing, packing (wire_frame.c)                              */
/* ------------------------------------------------------------------------ */

/* protobuf-c allocator over sh_malloc/sh_free (static storage). */
ProtobufCAllocator *wire_heap_allocator(void);
/* Fills *out with an allocator that takes memory from arena a (free is a
 * no-op: the memory goes with the arena). *out must outlive its use. */
void wire_arena_allocator(ProtobufCAllocator *out, sh_arena *a);

/*
 * Walks buf as an encoded message of type desc without building it: every
 * tag and wire type is valid, every varint ends, every length fits in what is
 * left, no group wire types, and messages nest at most WIRE_MAX_MSG_DEPTH
 * deep (fields of message type are followed through the descriptors; unknown
 * fields are skipped).  Iterative within a message, recursive per nesting
 * level, so its own stack use is bounded too.  SHOAL_E_SERIALIZATION with a
 * message saying what and where ("byte 17: ...").
 */
int wire_check_framing(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                       char *errmsg);
/* (It also adds up a lower bound of what unpacking will allocate and refuses
 * with SHOAL_E_VALIDATION, before anything is allocated, a message that
 * would pass wire_decode_budget(len).) */

/*
 * wire_check_framing, then protobuf-c's unpack of a `desc` message with
 * `alloc` (NULL: the heap allocator).  On success *out is the message;
 * release it with protobuf_c_message_free_unpacked (wire_free_request for a
 * Request) and the same allocator in the same function (with an arena
 * allocator that is optional).  On failure *out is NULL and nothing needs
 * freeing: SHOAL_E_SERIALIZATION, SHOAL_E_VALIDATION when decoding would take
 * more than wire_decode_budget(len) bytes from `alloc` (what was taken before
 * the refusal stays in an arena until it is reset), or SHOAL_E_NOMEM if an
 * allocation failed.  Every unpack of bytes from outside the process goes
 * through here.
 */
int wire_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                const uint8_t *buf, size_t len, ProtobufCMessage **out, char *errmsg);
/*
 * The same without the decode budget, for bytes this process or its own Raft
 * group wrote after they passed the budget as requests: a group's log entry
 * (one Command may carry many requests, each of which fitted only its own
 * budget, and a replica that cannot decode an entry stops), the state
 * machine's own results.  Never for bytes from a socket.
 */
int wire_unpack_local(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                      const uint8_t *buf, size_t len, ProtobufCMessage **out, char *errmsg);
int wire_unpack_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                        Shoal__Request **out, char *errmsg);
void wire_free_request(ProtobufCAllocator *alloc, Shoal__Request *req);
int wire_unpack_response(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                         Shoal__Response **out, char *errmsg);
void wire_free_response(ProtobufCAllocator *alloc, Shoal__Response *resp);
/* The same for the messages between router and node, and between nodes. */
int wire_unpack_node_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                             Shoal__NodeRequest **out, char *errmsg);
int wire_unpack_node_response(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                              Shoal__NodeResponse **out, char *errmsg);

/* Packs any message into arena memory: *buf (*len bytes). SHOAL_E_NOMEM. */
int wire_pack(sh_arena *a, const ProtobufCMessage *msg, uint8_t **buf, size_t *len, char *errmsg);

/* Status <-> error code (the same numbers: see shoal.proto).  Codes without a
 * Status, and Statuses unknown to this build, become INTERNAL. */
Shoal__Status wire_status_from_code(int code);
int wire_code_from_status(int status);

/*
 * The operation registry (proto/ops.h) as data, in shoal_op order: each
 * operation's DynamoDB name, Request/Response field, `shoal` subcommand,
 * one-line summary, SHOAL_OPF_* flags and Request oneof case.
 */
typedef struct wire_op_info {
	const char *name;    /* "GetItem" */
	const char *field;   /* "get_item" (the same in Request and Response) */
	const char *cli;     /* "get-item" */
	const char *summary; /* for `shoal help` */
	unsigned flags;      /* SHOAL_OPF_* */
	Shoal__Request__OpCase op_case;
} wire_op_info;
extern const wire_op_info wire_ops[SHOAL_OP__COUNT];

/* The registry index of a Request oneof case; SHOAL_OP__COUNT if none. */
shoal_op wire_op_of(Shoal__Request__OpCase op_case);
/* By name (a "Service.Operation" target is accepted); NULL if unknown. */
const wire_op_info *wire_op_by_name(const char *operation);
/* By the field number of the Request/Response oneof; NULL if unknown. */
const wire_op_info *wire_op_by_id(uint32_t id);
/* DynamoDB's name of an operation ("GetItem", "CreateTable"); "" if unset. */
const char *wire_op_name(Shoal__Request__OpCase op);

/*
 * Fields by hand, for the hot paths that pass messages on without unpacking
 * them (the router's fast path, node batches: a NodeRequest written around
 * a client's packed Request, a Response sliced out of a NodeResponse).
 * Protobuf fields may come in any order and a repeated field is one field
 * per element.
 */
typedef struct wire_field {
	uint32_t number;
	int type;            /* wire type: 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
	uint64_t value;      /* type 0: the value */
	const uint8_t *data; /* type 2: the bytes (pointing into the buffer) */
	size_t len;
} wire_field;

/* Reads the field at *p (< end) and moves *p past it; false on malformed
 * input (a truncated field, a length past end, groups: no Shoal message has
 * them). */
bool wire_next_field(const uint8_t **p, const uint8_t *end, wire_field *f);
/* Writes v as a varint at p (room for 10 bytes); returns its length. */
size_t wire_put_varint(uint8_t *p, uint64_t v);
/* The encoded length of varint v. */
size_t wire_varint_len(uint64_t v);

/* ------------------------------------------------------------------------ */
/* Values: protobuf <-> st_value (wire_value.c)                              */
/* ------------------------------------------------------------------------ */

/*
 * From protobuf: structure checks, copies into a.  Errors (SHOAL_E_VALIDATION
 * unless noted):
 *   no member set (or Attribute without value):
 *     "Supplied AttributeValue is empty, must contain exactly one of the
 *      supported datatypes"
 *   NULL false:
 *     "One or more parameter values were invalid: Null attribute value types
 *      must have the value of true"
 *   deeper than WIRE_MAX_VALUE_DEPTH: "Nesting Levels have exceeded supported
 *     limits: Attributes in the item have nested levels beyond supported limit"
 * (UTF-8, numbers, sets and names are st_value_normalize's to check.)
 * Items become ST_M values with the attributes in wire order; a NULL item or
 * names message gives an empty ST_M.
 */
int wire_value_from_pb(sh_arena *a, const Shoal__AttributeValue *pb, st_value *out, char *errmsg);
int wire_item_from_pb(sh_arena *a, const Shoal__Item *pb, st_value *out, char *errmsg);
/* ExpressionAttributeNames -> an ST_M of ST_S ("#n" -> S "name"). */
int wire_names_from_pb(sh_arena *a, const Shoal__ExpressionAttributeNames *pb, st_value *out,
                       char *errmsg);

/* To protobuf, built in a (bytes are copied: nothing points into v).
 * SHOAL_E_NOMEM; SHOAL_E_VALIDATION if v nests deeper than
 * WIRE_MAX_VALUE_DEPTH or holds ST_NONE (so every message built here can be
 * unpacked by wire_unpack_*).  item and names are ST_M (names: of ST_S), or
 * NULL, which gives *out NULL (an absent field). */
int wire_value_to_pb(sh_arena *a, const st_value *v, Shoal__AttributeValue **out, char *errmsg);
int wire_item_to_pb(sh_arena *a, const st_value *item, Shoal__Item **out, char *errmsg);
int wire_names_to_pb(sh_arena *a, const st_value *names, Shoal__ExpressionAttributeNames **out,
                     char *errmsg);

/* ------------------------------------------------------------------------ */
/* Requests and results (wire_req.c, wire_table.c, wire_desc.c, wire_resp.c) */
/* ------------------------------------------------------------------------ */

/*
 * Decoded request -> storage request, with the checks DynamoDB makes at its
 * API layer, in DynamoDB's words:
 *  - parameter constraints, collected and reported together:
 *      "1 validation error detected: Value null at 'tableName' failed to
 *       satisfy constraint: Member must not be null"
 *      "2 validation errors detected: Value 'a!' at 'tableName' ...: Member
 *       must satisfy regular expression pattern: [a-zA-Z0-9_.-]+; ..."
 *    (TableName and IndexName 3..255 of [a-zA-Z0-9_.-], Key/Item not null,
 *    Limit >= 1, Segment >= 0, TotalSegments 1..1000000, and the enums
 *    ReturnValues, ReturnValuesOnConditionCheckFailure, Select,
 *    ReturnConsumedCapacity, ReturnItemCollectionMetrics);
 *  - then the cross-parameter rules ("ReturnValues can only be ALL_OLD or
 *    NONE", "ExpressionAttributeNames can only be specified when using
 *    expressions", Segment without TotalSegments, ...);
 *  - then every value is normalised (st_value_normalize), with DynamoDB's
 *    prefixes for ExclusiveStartKey ("The provided starting key is invalid:
 *    ...") and ExpressionAttributeValues ("ExpressionAttributeValues contains
 *    invalid value: ... for key :v").
 * Expressions themselves are parsed by the storage engine, not here.
 * Everything in *out lives in a; pb may be freed on return.
 */
int wire_get_req_from_pb(sh_arena *a, const Shoal__GetItemRequest *pb, st_get_req *out,
                         char *errmsg);
int wire_put_req_from_pb(sh_arena *a, const Shoal__PutItemRequest *pb, st_put_req *out,
                         char *errmsg);
int wire_update_req_from_pb(sh_arena *a, const Shoal__UpdateItemRequest *pb, st_update_req *out,
                            char *errmsg);
int wire_delete_req_from_pb(sh_arena *a, const Shoal__DeleteItemRequest *pb, st_delete_req *out,
                            char *errmsg);
int wire_query_req_from_pb(sh_arena *a, const Shoal__QueryRequest *pb, st_query_req *out,
                           char *errmsg);
int wire_scan_req_from_pb(sh_arena *a, const Shoal__ScanRequest *pb, st_scan_req *out,
                          char *errmsg);

/* The TableName of a single-table data-plane request (GetItem, PutItem,
 * UpdateItem, DeleteItem, Query, Scan), NULL for other operations or when
 * absent. */
const char *wire_request_table(const Shoal__Request *r);

/*
 * CreateTable -> st_table_def: parameter constraints and DynamoDB's key
 * schema rules ("Invalid KeySchema: The first KeySchemaElement is not a HASH
 * key type", "One or more parameter values were invalid: Some index key
 * attributes are not defined in AttributeDefinitions. ...", LSI/GSI rules,
 * billing mode consistency).  Without BillingMode or ProvisionedThroughput
 * the table is PAY_PER_REQUEST (Shoal's capacity is per partition).
 * New indexes are ST_INDEX_ACTIVE (the table is empty), write_shards >= 1,
 * ids 0 (assigned by the engine); created_ms is 0: the caller sets it.
 */
int wire_create_table_from_pb(sh_arena *a, const Shoal__CreateTableRequest *pb, st_table_def *out,
                              char *errmsg);
/* Rules DynamoDB applies to the indexes of a request that Shoal did not
 * always apply, so that definitions stored before still read: INCLUDE needs
 * NonKeyAttributes, each named once ("One or more parameter values were
 * invalid: ProjectionType is INCLUDE, but NonKeyAttributes is not
 * specified").  The router calls them on CreateTable and UpdateTable
 * requests after converting them.  SHOAL_E_VALIDATION. */
int wire_create_table_check_new(const Shoal__CreateTableRequest *pb, char *errmsg);
int wire_update_table_check_new(const Shoal__UpdateTableRequest *pb, char *errmsg);
/*
 * UpdateTable -> st_table_update_req (storage/index.h): parameter
 * constraints DynamoDB checks without the table (TableName, at least one
 * change, one GlobalSecondaryIndexUpdate action each, a Create's key schema
 * and projection as CreateTable checks a GSI, WriteShards).  Creates are
 * ST_INDEX_CREATING with id 0 (group 0 assigns ids).  Update actions
 * (provisioned throughput of a GSI) are accepted and ignored.  Rules that
 * need the table (index exists, attributes defined) are st_table_update's.
 */
/*
 * Tags and the table's metadata (wire_tags.c).  TagResource and
 * UntagResource -> st_table_update_req carrying only the tag change (the
 * table named by the ARN), checked as DynamoDB checks them without the
 * table: ResourceArn ("Invalid TableArn", an index's ARN refused), at least
 * one Tag / TagKey, each tag (st_tags_check).  ListTagsOfResource -> the
 * table's name; wire_list_tags_resp_to_pb: the table's tags (Tags always,
 * [] when none).  TableClass names: wire_table_class_parse answers
 * ST_CLASS_NONE for a name it does not know.
 */
int wire_tag_resource_from_pb(sh_arena *a, const Shoal__TagResourceRequest *pb,
                              st_table_update_req *out, char *errmsg);
int wire_untag_resource_from_pb(sh_arena *a, const Shoal__UntagResourceRequest *pb,
                                st_table_update_req *out, char *errmsg);
int wire_list_tags_from_pb(sh_arena *a, const Shoal__ListTagsOfResourceRequest *pb,
                           const char **table, char *errmsg);
int wire_list_tags_resp_to_pb(sh_arena *a, const st_table_def *def,
                              Shoal__ListTagsOfResourceResponse **out, char *errmsg);
/* UpdateTimeToLive (wire_ttl.c): the table name, then the specification
 * (Enabled and AttributeName required, AttributeName 1..255 bytes) with
 * DynamoDB's messages, into an update request with set_ttl; its answer
 * echoes the specification.  DescribeTimeToLive -> the table's name; its
 * answer: ENABLED with AttributeName, or DISABLED, and the internal
 * changed_ms (the router turns it into ENABLING / DISABLING, router/ttl.c).
 * wire_ttl_status: the status of a setting (enabled or not) that is or is
 * not in force everywhere yet; a static string. */
int wire_update_ttl_from_pb(sh_arena *a, const Shoal__UpdateTimeToLiveRequest *pb,
                            st_table_update_req *out, char *errmsg);
int wire_update_ttl_resp_to_pb(sh_arena *a, const Shoal__UpdateTimeToLiveRequest *pb,
                               Shoal__UpdateTimeToLiveResponse **out, char *errmsg);
int wire_describe_ttl_from_pb(sh_arena *a, const Shoal__DescribeTimeToLiveRequest *pb,
                              const char **table, char *errmsg);
int wire_describe_ttl_resp_to_pb(sh_arena *a, const st_table_def *def,
                                 Shoal__DescribeTimeToLiveResponse **out, char *errmsg);
const char *wire_ttl_status(bool enabled, bool in_force);
/* A TableUpdate (cluster.proto: group 0's change of a table's definition:
 * an UpdateTable, a TagResource or an UntagResource, exactly one) as the
 * converter of its member converts it. */
int wire_table_update_from_pb(sh_arena *a, const Shoal__TableUpdate *tu, st_table_update_req *out,
                              char *errmsg);
/* The table named by a table ARN (arn:...:dynamodb:<region>:<account>:
 * table/<name>, any partition, region and account); *table in a.
 * SHOAL_E_VALIDATION with DynamoDB's message otherwise (index ARNs too). */
int wire_table_arn_parse(sh_arena *a, const char *arn, const char **table, char *errmsg);
const char *wire_table_class_name(st_table_class c);
st_table_class wire_table_class_parse(const char *s);

int wire_update_table_from_pb(sh_arena *a, const Shoal__UpdateTableRequest *pb,
                              st_table_update_req *out, char *errmsg);
/* DescribeTable / DeleteTable: the table name, checked as DynamoDB checks it
 * for table operations ("The parameter 'TableName' is required but was not
 * present in the request", "TableName must be at least 3 characters long and
 * at most 255 characters long"). */
int wire_describe_table_from_pb(sh_arena *a, const Shoal__DescribeTableRequest *pb,
                                const char **table, char *errmsg);
int wire_delete_table_from_pb(sh_arena *a, const Shoal__DeleteTableRequest *pb, const char **table,
                              char *errmsg);
/* ListTables: *exclusive_start is NULL when absent; *limit 1..100 (default 100). */
int wire_list_tables_from_pb(sh_arena *a, const Shoal__ListTablesRequest *pb,
                             const char **exclusive_start, uint32_t *limit, char *errmsg);

/*
 * Storage request -> protobuf (what a client or the router sends).  Fields at
 * their defaults are left unset (NONE, ST_SELECT_DEFAULT, limit 0, ...).
 */
int wire_get_req_to_pb(sh_arena *a, const st_get_req *req, Shoal__GetItemRequest **out,
                       char *errmsg);
int wire_put_req_to_pb(sh_arena *a, const st_put_req *req, Shoal__PutItemRequest **out,
                       char *errmsg);
int wire_update_req_to_pb(sh_arena *a, const st_update_req *req, Shoal__UpdateItemRequest **out,
                          char *errmsg);
int wire_delete_req_to_pb(sh_arena *a, const st_delete_req *req, Shoal__DeleteItemRequest **out,
                          char *errmsg);
int wire_query_req_to_pb(sh_arena *a, const st_query_req *req, Shoal__QueryRequest **out,
                         char *errmsg);
int wire_scan_req_to_pb(sh_arena *a, const st_scan_req *req, Shoal__ScanRequest **out,
                        char *errmsg);
int wire_create_table_to_pb(sh_arena *a, const st_table_def *def, Shoal__CreateTableRequest **out,
                            char *errmsg);

/*
 * TableDefine (cluster.proto: what group 0 stores and sends to every data
 * group) <-> st_table_def, the one converter (wire_define.c).  from_pb:
 * the CreateTable request converted as CreateTable converts it, group 0's
 * index ids and statuses laid over it, in the form the catalog stores
 * (st_table_def_stored); an unknown index status or an id above 65535 is
 * SHOAL_E_VALIDATION.  to_pb borrows def's strings.  Memory from a.
 */
int wire_table_define_to_pb(sh_arena *a, const st_table_def *def, Shoal__TableDefine **out,
                            char *errmsg);
int wire_table_define_from_pb(sh_arena *a, const Shoal__TableDefine *td, st_table_def *out,
                              char *errmsg);
/* "ACTIVE" / "CREATING" / "DELETING"; parse: NULL or "" is ACTIVE,
 * anything else unknown SHOAL_E_VALIDATION. */
const char *wire_index_status_name(st_index_status s);
int wire_index_status_parse(const char *s, st_index_status *out);

/* Storage results -> protobuf responses (built in a). */
int wire_get_item_resp_to_pb(sh_arena *a, const st_value *item, Shoal__GetItemResponse **out,
                             char *errmsg);
int wire_put_item_resp_to_pb(sh_arena *a, const st_write_result *res, Shoal__PutItemResponse **out,
                             char *errmsg);
int wire_update_item_resp_to_pb(sh_arena *a, const st_write_result *res,
                                Shoal__UpdateItemResponse **out, char *errmsg);
int wire_delete_item_resp_to_pb(sh_arena *a, const st_write_result *res,
                                Shoal__DeleteItemResponse **out, char *errmsg);
int wire_query_resp_to_pb(sh_arena *a, const st_page *page, Shoal__QueryResponse **out,
                          char *errmsg);
int wire_scan_resp_to_pb(sh_arena *a, const st_page *page, Shoal__ScanResponse **out, char *errmsg);
/* status: "ACTIVE", "CREATING", "DELETING" or "UPDATING". ARN:
 * "arn:aws:dynamodb:shoal:000000000000:table/<name>" (".../index/<index>"). */
int wire_table_desc_to_pb(sh_arena *a, const st_table_info *info, const char *status,
                          Shoal__TableDescription **out, char *errmsg);
int wire_list_tables_resp_to_pb(sh_arena *a, const char *const *names, uint32_t n, const char *last,
                                Shoal__ListTablesResponse **out, char *errmsg);

/* Protobuf responses -> storage results (client, router merging pages).
 * Items are checked for structure, not normalised. */
int wire_query_resp_from_pb(sh_arena *a, const Shoal__QueryResponse *pb, st_page *out,
                            char *errmsg);
int wire_scan_resp_from_pb(sh_arena *a, const Shoal__ScanResponse *pb, st_page *out, char *errmsg);
/* *status (may be NULL) receives the TableStatus, copied into a. */
int wire_table_desc_from_pb(sh_arena *a, const Shoal__TableDescription *pb, st_table_info *out,
                            const char **status, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Transactions (wire_txn.c)                                                 */
/* ------------------------------------------------------------------------ */

/* One TransactWriteItem as an engine action, checked as its single-item
 * operation checks it (a Put as PutItem, ...).  pos is its 1-based position
 * in TransactItems, which DynamoDB's messages name
 * ('transactItems.2.member.update.updateExpression').  Memory from a. */
int wire_txn_action_from_pb(sh_arena *a, const Shoal__TransactWriteItem *pb, size_t pos,
                            st_txn_action *out, char *errmsg);
/* The table and key (or, for a Put, item: *item true) an action writes. */
void wire_txn_action_target(const st_txn_action *act, const char **table, const st_value **key,
                            bool *item);
/* The request-wide checks of TransactWriteItems / TransactGetItems (1..100
 * actions, the token's length, 4 MB, enums), in DynamoDB's words. */
int wire_txn_write_check(const Shoal__TransactWriteItemsRequest *pb, char *errmsg);
int wire_txn_get_check(const Shoal__TransactGetItemsRequest *pb, char *errmsg);
/* One Get of TransactGetItems, checked as its GetItem. */
int wire_txn_get_from_pb(sh_arena *a, const Shoal__Get *pb, st_get_req *out, char *errmsg);
/* A digest of the request without its ClientRequestToken: a retry with the
 * same token must carry the same digest. */
void wire_txn_digest(const Shoal__TransactWriteItemsRequest *pb, uint8_t out[16]);

/* One action's part of a cancellation. */
typedef struct wire_txn_reason {
	int code;            /* SHOAL_OK: "None" */
	const char *message; /* NULL for none */
	Shoal__Item *item;   /* the old item (ReturnValuesOnConditionCheckFailure), or NULL */
} wire_txn_reason;
/* "None", "ConditionalCheckFailed", "TransactionConflict", ... of a code. */
const char *wire_cancel_code(int code);
/* resp as TransactionCanceledException: a reason per action in request
 * order and DynamoDB's message "Transaction cancelled, please refer
 * cancellation reasons for specific reasons [None, ConditionalCheckFailed]".
 * Memory from a; strings and items borrowed. */
int wire_txn_cancel(sh_arena *a, Shoal__Response *resp, const wire_txn_reason *reasons, uint32_t n,
                    char *errmsg);

/* Fills resp (initialised by the caller, request_id set) as a failure: status
 * from code, message copied into a, and for SHOAL_E_CONDITION_FAILED the old
 * item (may be NULL) in resp->item.  Clears any result. */
int wire_response_set_error(sh_arena *a, Shoal__Response *resp, int code, const char *message,
                            const st_value *old_item, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Consumed capacity (wire_capacity.c)                                       */
/* ------------------------------------------------------------------------ */

/*
 * ReturnConsumedCapacity, with DynamoDB's on-demand arithmetic, in one place
 * for the node (which knows the sizes) and the router (which adds up the
 * answers of several partitions, write shards or batch parts):
 *
 *   read   ceil(bytes / 4 KB) units, at least 1, halved when eventually
 *          consistent.  GetItem: the item's size (a missing item costs the
 *          minimum); Query and Scan: the sum of the sizes of every item
 *          evaluated (before the filter), rounded once for the request.
 *   write  ceil(max(old size, new size) / 1 KB) units, at least 1, for the
 *          base item; and for every index entry written, ceil(entry size /
 *          1 KB), at least 1, a moved entry being a delete and a put.
 *
 * A ConsumedCapacity answers TOTAL with TableName and CapacityUnits, and
 * INDEXES with also Table (the base table's share) and the indexes' shares
 * under GlobalSecondaryIndexes / LocalSecondaryIndexes; CapacityUnits is
 * always the total.  The INDEXES form is recognised by cc->table != NULL.
 * Single-item operations, Query, Scan and batches carry no
 * ReadCapacityUnits / WriteCapacityUnits, as DynamoDB sends none there.
 * Everything is built in the arena.
 */
typedef enum wire_rcc {
	WIRE_RCC_NONE = 0,
	WIRE_RCC_TOTAL,
	WIRE_RCC_INDEXES,
} wire_rcc;

/* "TOTAL", "INDEXES"; anything else (NULL, "NONE") is NONE. */
wire_rcc wire_rcc_parse(const char *s);
/* The ReturnConsumedCapacity of a decoded request message pb. */
#define WIRE_RCC(pb)                                                                               \
	wire_rcc_parse(WIRE_HAS(pb, return_consumed_capacity) ? (pb)->return_consumed_capacity     \
	                                                      : NULL)
/* Read units of bytes read by one request. */
double wire_read_units(uint64_t bytes, bool consistent);
/* Write units of writing an item or index entry of `bytes`. */
double wire_write_units(uint64_t bytes);

/* A zero ConsumedCapacity for table in mode rcc, or *out NULL for NONE.
 * SHOAL_E_NOMEM only. */
int wire_capacity_new(sh_arena *a, wire_rcc rcc, const char *table, Shoal__ConsumedCapacity **out);
/* Charges units to the base table (cc may be NULL: nothing). */
void wire_capacity_charge_table(Shoal__ConsumedCapacity *cc, double units);
/* Charges units to an index: the total, and in INDEXES form the index's
 * entry (added when absent).  SHOAL_E_NOMEM only. */
int wire_capacity_charge_index(sh_arena *a, Shoal__ConsumedCapacity *cc, const char *index,
                               bool local, double units);
/* Charges a successful write (its sizes and index entry writes). */
/* The units a write costs its own partition: the item's (the larger of its
 * old and new sizes) and its LSI entries'.  Its GSI entries are paid by their
 * index partitions when shipped there (ConsumedCapacity reports all). */
double wire_write_partition_units(const st_write_result *res);
int wire_capacity_charge_write(sh_arena *a, Shoal__ConsumedCapacity *cc,
                               const st_write_result *res);
/* Adds `from` into `into` (same table): totals, table share, index shares. */
int wire_capacity_add(sh_arena *a, Shoal__ConsumedCapacity *into,
                      const Shoal__ConsumedCapacity *from);
/* Batches: adds `from` to the list's entry for its table, appending a copy
 * when there is none (*list grows in the arena). */
int wire_capacity_list_add(sh_arena *a, Shoal__ConsumedCapacity ***list, size_t *n,
                           const Shoal__ConsumedCapacity *from);

/* ------------------------------------------------------------------------ */
/* Item collection metrics (wire_metrics.c)                                  */
/* ------------------------------------------------------------------------ */

/*
 * ReturnItemCollectionMetrics.  Only SIZE asks for them, and
 * only a write on a table with a local secondary index has any
 * (st_write_result.coll_attr): the rest get none, as in DynamoDB.
 */
/* "SIZE": true; anything else (NULL, "NONE") false. */
bool wire_ricm_parse(const char *s);
/* The ReturnItemCollectionMetrics of a decoded request message pb. */
#define WIRE_RICM(pb) wire_ricm_parse(WIRE_OPT(pb, return_item_collection_metrics))
/* SizeEstimateRangeGB of a collection of `bytes`: whole GiB around it,
 * [floor(bytes / 2^30), that + 1]. */
void wire_icm_range(uint64_t bytes, double range[2]);
/* The ItemCollectionMetrics of a successful write, *out NULL when the table
 * has no LSI.  Built in a; borrows res's attribute name.  SHOAL_E_NOMEM. */
int wire_icm_new(sh_arena *a, const st_write_result *res, Shoal__ItemCollectionMetrics **out,
                 char *errmsg);
/* Adds m (NULL: nothing) to the list's entry for table (appended when
 * absent), replacing an entry of the same collection: one per collection,
 * the latest.  *list grows in a; m is borrowed.  SHOAL_E_NOMEM only. */
int wire_icm_list_add(sh_arena *a, Shoal__TableItemCollectionMetrics ***list, size_t *n,
                      const char *table, Shoal__ItemCollectionMetrics *m);
/* Adds every entry of `from` (another part's list) with wire_icm_list_add. */
int wire_icm_list_merge(sh_arena *a, Shoal__TableItemCollectionMetrics ***list, size_t *n,
                        Shoal__TableItemCollectionMetrics *const *from, size_t n_from);

/* ------------------------------------------------------------------------ */
/* DynamoDB JSON (wire_json.c in, wire_json_out.c out)                      */
/* ------------------------------------------------------------------------ */

/*
 * Parses JSON text (U+0000 allowed in strings but not in object keys, a
 * jansson limit; duplicate object keys: the last one wins, as in DynamoDB).
 * SHOAL_E_SERIALIZATION with the position of the error, SHOAL_E_NOMEM.
 * *out is a new reference: json_decref it.
 */
int wire_json_parse(const char *text, size_t len, json_t **out, char *errmsg);

/*
 * DynamoDB JSON -> st_value.  Errors as DynamoDB reports them:
 * SHOAL_E_SERIALIZATION for wrong JSON shapes ("NUMBER_VALUE cannot be
 * converted to String", "Start of structure or map found where not expected",
 * "Base64 encoded length is expected a multiple of 4 bytes but found: 5",
 * ...), reported before SHOAL_E_VALIDATION ("Supplied AttributeValue is
 * empty, ...", "Supplied AttributeValue has more than one datatypes set,
 * ...", "... Null attribute value types must have the value of true",
 * nesting).  Members of an AttributeValue object other than the ten type
 * names, and members whose value is null, are ignored (as DynamoDB does).
 */
int wire_value_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg);
/* An object of name -> AttributeValue (an item or a key) -> ST_M. */
int wire_item_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg);
/* An array of items -> *items (n of them, in a). */
int wire_items_from_json(sh_arena *a, const json_t *j, st_value **items, uint32_t *n, char *errmsg);
/* ExpressionAttributeNames {"#n": "name"} -> ST_M of ST_S. */
int wire_names_from_json(sh_arena *a, const json_t *j, st_value *out, char *errmsg);

/* The same from text (wire_json_parse, then the conversion). */
int wire_value_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg);
int wire_item_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg);
int wire_names_from_text(sh_arena *a, const char *text, size_t len, st_value *out, char *errmsg);

/* st_value -> DynamoDB JSON (a new reference in *out).  M attributes in
 * st_value order.  SHOAL_E_NOMEM; SHOAL_E_VALIDATION for ST_NONE, text that
 * is not UTF-8, or nesting past WIRE_MAX_VALUE_DEPTH. */
int wire_value_to_json(const st_value *v, json_t **out, char *errmsg);
int wire_item_to_json(const st_value *item, json_t **out, char *errmsg);
int wire_items_to_json(const st_value *items, uint32_t n, json_t **out, char *errmsg);
int wire_names_to_json(const st_value *names, json_t **out, char *errmsg);

/* Serialises j into arena memory (NUL-terminated): compact, or indented by
 * four spaces like the AWS CLI's output when pretty.  Key order preserved. */
int wire_json_dumps(sh_arena *a, const json_t *j, bool pretty, char **out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Base64 (base64.c): RFC 4648 standard alphabet with padding                */
/* ------------------------------------------------------------------------ */

/* Length of the encoding of n bytes (without the NUL). */
size_t wire_b64_encoded_len(size_t n);
/* Writes wire_b64_encoded_len(n) characters and a NUL into dst. */
void wire_b64_encode(const void *src, size_t n, char *dst);
/*
 * Strict decoder: length a multiple of 4, only the alphabet, '=' only as one
 * or two final pad characters, unused low bits zero.  The result (in a, *len
 * bytes, NUL-terminated for convenience) may be empty.  SHOAL_E_SERIALIZATION
 * with the texts DynamoDB uses: "Base64 encoded length is expected a multiple
 * of 4 bytes but found: 5", "Invalid Base64 character: '*'", "Invalid last
 * non-pad Base64 character dectected" (sic).
 */
int wire_b64_decode(sh_arena *a, const char *src, size_t n, uint8_t **out, size_t *len,
                    char *errmsg);

/* ------------------------------------------------------------------------ */
/* DynamoDB Streams (wire_stream.c; formats at its top)                      */
/* ------------------------------------------------------------------------ */

#define WIRE_STREAM_LABEL_MAX 64
#define WIRE_SHARD_ID_MAX     72
#define WIRE_SEQNO_MAX        24
#define WIRE_ITER_TTL_MS      (15 * 60 * 1000) /* DynamoDB: iterators expire after 15 minutes */

/* "KEYS_ONLY", ...; "" for ST_VIEW_NONE. */
const char *wire_stream_view_name(st_stream_view v);
/* A request's StreamSpecification (StreamEnabled required, a view type
 * with it when enabling, none when disabling), DynamoDB's messages. */
int wire_stream_spec_from_pb(const Shoal__StreamSpecification *pb, st_stream_spec *out,
                             char *errmsg);
/* A table's StreamSpecification (NULL: out of memory). */
Shoal__StreamSpecification *wire_stream_spec_to_pb(sh_arena *a, const st_stream_spec *s);
void wire_stream_label(int64_t ms, char out[WIRE_STREAM_LABEL_MAX]);
bool wire_stream_label_parse(const char *s, int64_t *ms);
/* <TableArn>/stream/<label>, built where the table's ARN is (wire_desc.c). */
char *wire_stream_arn(sh_arena *a, const char *table, int64_t label_ms);
/* The table and label of a StreamArn (ValidationException otherwise). */
int wire_stream_arn_parse(sh_arena *a, const char *arn, const char **table, int64_t *label_ms,
                          char *errmsg);
/* A shard of a stream (storage/stream.h, "Shards"): a table's static
 * partition's, which every table starts with and which lives in that
 * partition's group from the log's beginning (is_static), or a span of one
 * group's log of one hash range, begun when a range moved (group, lo and
 * the span's first seq). */
typedef struct wire_shard {
	bool is_static;
	uint32_t partition; /* is_static */
	uint32_t group;     /* !is_static */
	uint64_t lo, start; /* !is_static */
} wire_shard;
void wire_shard_id(int64_t label_ms, const wire_shard *s, char out[WIRE_SHARD_ID_MAX]);
bool wire_shard_id_parse(const char *s, int64_t *label_ms, wire_shard *out);
void wire_seqno(uint64_t seq, char out[WIRE_SEQNO_MAX]);
bool wire_seqno_parse(const char *s, uint64_t *seq);

/* A shard iterator's contents (strings in the decoding arena). */
typedef struct wire_iter {
	const char *stream_arn;
	const char *table;
	int64_t label_ms;
	uint32_t table_id;
	wire_shard shard;
	uint64_t pos;      /* the next seq to read */
	int64_t issued_ms; /* wall clock of the node that issued it */
} wire_iter;
char *wire_iter_encode(sh_arena *a, const char *stream_arn, const wire_iter *it);
int wire_iter_decode(sh_arena *a, const char *s, wire_iter *out, char *errmsg);
/* ExpiredIteratorException when it is older than WIRE_ITER_TTL_MS at now_ms. */
int wire_iter_check_age(const wire_iter *it, int64_t now_ms, char *errmsg);
/* Stream records as GetRecords returns them; *out has n entries. */
int wire_stream_records_to_pb(sh_arena *a, const st_stream_rec *recs, uint32_t n, uint32_t table_id,
                              uint32_t group, const char *region, Shoal__Record ***out,
                              char *errmsg);

/* The table name inside a StreamArn or a shard iterator (which starts with
 * one) into buf (n bytes); false if there is none that fits. */
bool wire_stream_table_of(const char *arn, char *buf, size_t n);
/* The requests, checked with DynamoDB's messages (router and node alike). */
typedef enum wire_iter_type {
	WIRE_ITER_TRIM_HORIZON,
	WIRE_ITER_LATEST,
	WIRE_ITER_AT,
	WIRE_ITER_AFTER,
} wire_iter_type;
typedef struct wire_shard_iter_req {
	const char *stream_arn;
	const char *table;
	int64_t label_ms;
	wire_shard shard;
	wire_iter_type type;
	uint64_t seq; /* AT / AFTER */
} wire_shard_iter_req;
int wire_get_shard_iterator_from_pb(sh_arena *a, const Shoal__GetShardIteratorRequest *pb,
                                    wire_shard_iter_req *out, char *errmsg);
/* GetRecords: the iterator (not its age: wire_iter_check_age) and Limit
 * (1..1000, default 1000). */
int wire_get_records_from_pb(sh_arena *a, const Shoal__GetRecordsRequest *pb, wire_iter *it,
                             uint32_t *limit, char *errmsg);
typedef struct wire_describe_stream_req {
	const char *stream_arn;
	const char *table;
	int64_t label_ms;
	uint32_t limit;       /* shards, 1..100 */
	const char *start_id; /* ExclusiveStartShardId (NULL: none), checked */
	const char *child_of; /* ShardFilter CHILD_SHARDS' ShardId (NULL: none), checked */
} wire_describe_stream_req;
int wire_describe_stream_from_pb(sh_arena *a, const Shoal__DescribeStreamRequest *pb,
                                 wire_describe_stream_req *out, char *errmsg);
int wire_list_streams_from_pb(const Shoal__ListStreamsRequest *pb, const char **table,
                              const char **start_arn, uint32_t *limit, char *errmsg);

#endif
