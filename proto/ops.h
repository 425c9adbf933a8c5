/*
 * ops.h -- the one list of Shoal's client operations.
 *
 * Every table that names or dispatches operations is derived from
 * SHOAL_OPS: the router's steps (router/job.c), the DynamoDB JSON names and
 * the HTTP endpoint's X-Amz-Target (proto/wire_api_schema.c), wire_op_name,
 * the `shoal` command line's subcommands (client/cli_cmds.c), the storage
 * node's dispatch table (node/server.c) and the metrics labels (router/
 * metrics.c).  Adding an operation means one line here, its protobuf message
 * in shoal.proto, and its handlers -- nothing else.
 *
 *   X(Name, field, CONST, cli, flags, node, summary)
 *
 *   Name     DynamoDB's name of the operation ("GetItem"), also its metrics
 *            label and the X-Amz-Target suffix
 *   field    the member of Request.op and Response.result ("get_item"); the
 *            router's step is rt_step_<field>, the CLI's options o_<field>
 *   CONST    the Shoal__Request__OpCase suffix (SHOAL__REQUEST__OP_<CONST>)
 *   cli      the `shoal` subcommand, as `aws dynamodb` names it
 *   flags    SHOAL_OPF_*: what kind of operation it is (below)
 *   node     how a storage node serves it: NODE_READ (node_handle_<field>),
 *            NODE_WRITE (node_prepare_<field>, through Raft), NODE_NONE (the
 *            router composes it from other node operations)
 *   summary  one line for `shoal help`
 *
 * The order is the order of the enum shoal_op, which is also the order of
 * per-operation metrics series.
 */
#ifndef SHOAL_PROTO_OPS_H
#define SHOAL_PROTO_OPS_H

/* Flags of an operation. */
#define SHOAL_OPF_READ     (1u << 0) /* reads items */
#define SHOAL_OPF_WRITE    (1u << 1) /* writes items (through Raft) */
#define SHOAL_OPF_ITEM     (1u << 2) /* one item or one item collection: one group */
#define SHOAL_OPF_SCATTER  (1u << 3) /* may touch several groups */
#define SHOAL_OPF_DDL      (1u << 4) /* table definitions (group 0, then every group) */
#define SHOAL_OPF_ADMIN    (1u << 5) /* Shoal's own operations (cluster status, admin) */
#define SHOAL_OPF_TXN      (1u << 6) /* transactional */
#define SHOAL_OPF_PAGE     (1u << 7) /* answers pages of items (Query, Scan) */
#define SHOAL_OPF_PAGE_TBL (1u << 8) /* answers pages of table names (ListTables) */
/* DynamoDB Streams' service (DynamoDBStreams_20120810, `shoal dynamodbstreams
 * <cli>`) rather than DynamoDB's (DynamoDB_20120810, `shoal <cli>`). */
#define SHOAL_OPF_STREAMS (1u << 9)

#define SHOAL_OPS(X)                                                                               \
	X(GetItem, get_item, GET_ITEM, "get-item", SHOAL_OPF_READ | SHOAL_OPF_ITEM, NODE_READ,     \
	  "read one item")                                                                         \
	X(PutItem, put_item, PUT_ITEM, "put-item", SHOAL_OPF_WRITE | SHOAL_OPF_ITEM, NODE_WRITE,   \
	  "create or replace one item")                                                            \
	X(UpdateItem, update_item, UPDATE_ITEM, "update-item", SHOAL_OPF_WRITE | SHOAL_OPF_ITEM,   \
	  NODE_WRITE, "update attributes of one item")                                             \
	X(DeleteItem, delete_item, DELETE_ITEM, "delete-item", SHOAL_OPF_WRITE | SHOAL_OPF_ITEM,   \
	  NODE_WRITE, "delete one item")                                                           \
	X(Query, query, QUERY, "query", SHOAL_OPF_READ | SHOAL_OPF_ITEM | SHOAL_OPF_PAGE,          \
	  NODE_READ, "read the items of one partition key (an item collection)")                   \
	X(Scan, scan, SCAN, "scan", SHOAL_OPF_READ | SHOAL_OPF_SCATTER | SHOAL_OPF_PAGE,           \
	  NODE_READ, "read every item of a table or index")                                        \
	X(BatchGetItem, batch_get_item, BATCH_GET_ITEM, "batch-get-item",                          \
	  SHOAL_OPF_READ | SHOAL_OPF_SCATTER, NODE_READ,                                           \
	  "read up to 100 items from one or more tables")                                          \
	X(BatchWriteItem, batch_write_item, BATCH_WRITE_ITEM, "batch-write-item",                  \
	  SHOAL_OPF_WRITE | SHOAL_OPF_SCATTER, NODE_WRITE,                                         \
	  "put or delete up to 25 items in one or more tables")                                    \
	X(TransactWriteItems, transact_write_items, TRANSACT_WRITE_ITEMS, "transact-write-items",  \
	  SHOAL_OPF_WRITE | SHOAL_OPF_SCATTER | SHOAL_OPF_TXN, NODE_NONE,                          \
	  "write up to 100 items atomically")                                                      \
	X(TransactGetItems, transact_get_items, TRANSACT_GET_ITEMS, "transact-get-items",          \
	  SHOAL_OPF_READ | SHOAL_OPF_SCATTER | SHOAL_OPF_TXN, NODE_READ,                           \
	  "read up to 100 items atomically")                                                       \
	X(CreateTable, create_table, CREATE_TABLE, "create-table", SHOAL_OPF_DDL, NODE_NONE,       \
	  "create a table")                                                                        \
	X(DescribeTable, describe_table, DESCRIBE_TABLE, "describe-table", SHOAL_OPF_DDL,          \
	  NODE_READ, "describe a table (status, keys, indexes, item count)")                       \
	X(ListTables, list_tables, LIST_TABLES, "list-tables", SHOAL_OPF_DDL | SHOAL_OPF_PAGE_TBL, \
	  NODE_READ, "list table names")                                                           \
	X(DeleteTable, delete_table, DELETE_TABLE, "delete-table", SHOAL_OPF_DDL, NODE_NONE,       \
	  "delete a table and its items")                                                          \
	X(UpdateTable, update_table, UPDATE_TABLE, "update-table", SHOAL_OPF_DDL, NODE_NONE,       \
	  "change a table's indexes or capacity settings")                                         \
	X(TagResource, tag_resource, TAG_RESOURCE, "tag-resource", SHOAL_OPF_DDL, NODE_NONE,       \
	  "add tags to a table (or change their values)")                                          \
	X(UntagResource, untag_resource, UNTAG_RESOURCE, "untag-resource", SHOAL_OPF_DDL,          \
	  NODE_NONE, "remove tags from a table")                                                   \
	X(ListTagsOfResource, list_tags_of_resource, LIST_TAGS_OF_RESOURCE,                        \
	  "list-tags-of-resource", SHOAL_OPF_DDL, NODE_READ, "list the tags of a table")           \
	X(UpdateTimeToLive, update_time_to_live, UPDATE_TIME_TO_LIVE, "update-time-to-live",       \
	  SHOAL_OPF_DDL, NODE_NONE, "enable or disable Time to Live on a table")                   \
	X(DescribeTimeToLive, describe_time_to_live, DESCRIBE_TIME_TO_LIVE,                        \
	  "describe-time-to-live", SHOAL_OPF_DDL, NODE_READ,                                       \
	  "the Time to Live setting of a table")                                                   \
	X(DescribeLimits, describe_limits, DESCRIBE_LIMITS, "describe-limits", 0, NODE_NONE,       \
	  "the capacity limits of the account and of one table")                                   \
	X(DescribeEndpoints, describe_endpoints, DESCRIBE_ENDPOINTS, "describe-endpoints", 0,      \
	  NODE_NONE, "the endpoint to use (this router's address)")                                \
	X(ClusterStatus, cluster_status, CLUSTER_STATUS, "status", SHOAL_OPF_ADMIN, NODE_NONE,     \
	  "Shoal: nodes, storage groups, leaders, terms, applied indexes, item counts")            \
	X(Admin, admin, ADMIN, "admin", SHOAL_OPF_ADMIN, NODE_NONE,                                \
	  "Shoal: change the cluster's shape (admin add-node, admin remove-node)")                 \
	X(ListStreams, list_streams, LIST_STREAMS, "list-streams", SHOAL_OPF_STREAMS, NODE_NONE,   \
	  "list the streams of tables (DynamoDB Streams)")                                         \
	X(DescribeStream, describe_stream, DESCRIBE_STREAM, "describe-stream",                     \
	  SHOAL_OPF_STREAMS | SHOAL_OPF_READ | SHOAL_OPF_SCATTER, NODE_READ,                       \
	  "describe a stream and its shards (DynamoDB Streams)")                                   \
	X(GetShardIterator, get_shard_iterator, GET_SHARD_ITERATOR, "get-shard-iterator",          \
	  SHOAL_OPF_STREAMS | SHOAL_OPF_READ, NODE_READ,                                           \
	  "a position in a shard of a stream (DynamoDB Streams)")                                  \
	X(GetRecords, get_records, GET_RECORDS, "get-records", SHOAL_OPF_STREAMS | SHOAL_OPF_READ, \
	  NODE_READ, "read the records of a shard from a position (DynamoDB Streams)")

/* The operations in registry order; SHOAL_OP__COUNT of them. */
typedef enum shoal_op {
#define SHOAL_OP_ENUM(Name, field, CONST, cli, flags, node, summary) SHOAL_OP_##CONST,
	SHOAL_OPS(SHOAL_OP_ENUM)
#undef SHOAL_OP_ENUM
	    SHOAL_OP__COUNT
} shoal_op;

#endif
