/*
 * cli_cmds.c -- the command table of `shoal`: every subcommand of
 * `aws dynamodb` that Shoal serves, with the AWS CLI's option names, the
 * DynamoDB request member each one sets and the shape of its value.
 *
 * Shapes are the slice of DynamoDB's service model the CLI needs to read
 * shorthand syntax (which strings are numbers or booleans, which members a
 * structure has) and to validate bodies as botocore does.  Legacy parameters
 * (--expected, --key-conditions, --attribute-updates, ...) take the AWS
 * CLI's shapes; libshoal's JSON path translates them into expressions
 * (proto/wire_legacy.c), as the HTTP endpoint does.
 */
#include <string.h>

#include "client/cli_int.h"

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

static const cli_shape s_str = {CLI_STRING, NULL, NULL};
static const cli_shape s_int = {CLI_INT, NULL, NULL};
static const cli_shape s_long = {CLI_LONG, NULL, NULL};
static const cli_shape s_bool = {CLI_BOOL, NULL, NULL};
static const cli_shape s_blob = {CLI_BLOB, NULL, NULL};
static const cli_shape s_any = {CLI_ANY, NULL, NULL};
static const cli_shape s_str_list = {CLI_LIST, &s_str, NULL};
static const cli_shape s_blob_list = {CLI_LIST, &s_blob, NULL};
static const cli_shape s_names = {CLI_MAP, &s_str, NULL};

/* ------------------------------------------------------------------------ */
/* AttributeValue (recursive through M and L)                                */
/* ------------------------------------------------------------------------ */

static const cli_shape s_av;
static const cli_shape s_av_map = {CLI_MAP, &s_av, NULL};
static const cli_shape s_av_list = {CLI_LIST, &s_av, NULL};
static const cli_member m_av[] = {
    {"S", &s_str},       {"N", &s_str},        {"B", &s_blob},   {"SS", &s_str_list},
    {"NS", &s_str_list}, {"BS", &s_blob_list}, {"M", &s_av_map}, {"L", &s_av_list},
    {"NULL", &s_bool},   {"BOOL", &s_bool},    {NULL, NULL},
};
static const cli_shape s_av = {CLI_STRUCT, NULL, m_av};
static const cli_shape s_key_list = {CLI_LIST, &s_av_map, NULL};

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

static const cli_member m_attr_def[] = {
    {"AttributeName", &s_str}, {"AttributeType", &s_str}, {NULL, NULL}};
static const cli_shape s_attr_def = {CLI_STRUCT, NULL, m_attr_def};
static const cli_shape s_attr_defs = {CLI_LIST, &s_attr_def, NULL};

static const cli_member m_key_elem[] = {
    {"AttributeName", &s_str}, {"KeyType", &s_str}, {NULL, NULL}};
static const cli_shape s_key_elem = {CLI_STRUCT, NULL, m_key_elem};
static const cli_shape s_key_schema = {CLI_LIST, &s_key_elem, NULL};

static const cli_member m_projection[] = {
    {"ProjectionType", &s_str}, {"NonKeyAttributes", &s_str_list}, {NULL, NULL}};
static const cli_shape s_projection = {CLI_STRUCT, NULL, m_projection};

static const cli_member m_prov[] = {
    {"ReadCapacityUnits", &s_long}, {"WriteCapacityUnits", &s_long}, {NULL, NULL}};
static const cli_shape s_prov = {CLI_STRUCT, NULL, m_prov};

static const cli_member m_on_demand[] = {
    {"MaxReadRequestUnits", &s_long}, {"MaxWriteRequestUnits", &s_long}, {NULL, NULL}};
static const cli_shape s_on_demand = {CLI_STRUCT, NULL, m_on_demand};

static const cli_member m_warm[] = {
    {"ReadUnitsPerSecond", &s_long}, {"WriteUnitsPerSecond", &s_long}, {NULL, NULL}};
static const cli_shape s_warm = {CLI_STRUCT, NULL, m_warm};

static const cli_member m_gsi[] = {
    {"IndexName", &s_str},
    {"KeySchema", &s_key_schema},
    {"Projection", &s_projection},
    {"ProvisionedThroughput", &s_prov},
    {"OnDemandThroughput", &s_on_demand},
    {"WarmThroughput", &s_warm},
    {"WriteShards", &s_int}, /* Shoal: write sharding of hot index keys */
    {NULL, NULL},
};
static const cli_shape s_gsi = {CLI_STRUCT, NULL, m_gsi};
static const cli_shape s_gsis = {CLI_LIST, &s_gsi, NULL};

static const cli_member m_lsi[] = {{"IndexName", &s_str},
                                   {"KeySchema", &s_key_schema},
                                   {"Projection", &s_projection},
                                   {NULL, NULL}};
static const cli_shape s_lsi = {CLI_STRUCT, NULL, m_lsi};
static const cli_shape s_lsis = {CLI_LIST, &s_lsi, NULL};

static const cli_member m_gsi_update_update[] = {
    {"IndexName", &s_str},
    {"ProvisionedThroughput", &s_prov},
    {"OnDemandThroughput", &s_on_demand},
    {"WarmThroughput", &s_warm},
    {NULL, NULL},
};
static const cli_shape s_gsi_update_update = {CLI_STRUCT, NULL, m_gsi_update_update};
static const cli_member m_gsi_update_delete[] = {{"IndexName", &s_str}, {NULL, NULL}};
static const cli_shape s_gsi_update_delete = {CLI_STRUCT, NULL, m_gsi_update_delete};
static const cli_member m_gsi_update[] = {
    {"Update", &s_gsi_update_update},
    {"Create", &s_gsi},
    {"Delete", &s_gsi_update_delete},
    {NULL, NULL},
};
static const cli_shape s_gsi_update = {CLI_STRUCT, NULL, m_gsi_update};
static const cli_shape s_gsi_updates = {CLI_LIST, &s_gsi_update, NULL};

static const cli_member m_stream[] = {
    {"StreamEnabled", &s_bool}, {"StreamViewType", &s_str}, {NULL, NULL}};
static const cli_shape s_stream = {CLI_STRUCT, NULL, m_stream};

static const cli_member m_sse[] = {
    {"Enabled", &s_bool}, {"SSEType", &s_str}, {"KMSMasterKeyId", &s_str}, {NULL, NULL}};
static const cli_shape s_sse = {CLI_STRUCT, NULL, m_sse};

static const cli_member m_tag[] = {{"Key", &s_str}, {"Value", &s_str}, {NULL, NULL}};
static const cli_shape s_tag = {CLI_STRUCT, NULL, m_tag};
static const cli_shape s_tags = {CLI_LIST, &s_tag, NULL};

/* ------------------------------------------------------------------------ */
/* Batches and legacy conditions                                             */
/* ------------------------------------------------------------------------ */

static const cli_member m_put_request[] = {{"Item", &s_av_map}, {NULL, NULL}};
static const cli_shape s_put_request = {CLI_STRUCT, NULL, m_put_request};
static const cli_member m_delete_request[] = {{"Key", &s_av_map}, {NULL, NULL}};
static const cli_shape s_delete_request = {CLI_STRUCT, NULL, m_delete_request};
static const cli_member m_write_request[] = {
    {"PutRequest", &s_put_request}, {"DeleteRequest", &s_delete_request}, {NULL, NULL}};
static const cli_shape s_write_request = {CLI_STRUCT, NULL, m_write_request};
static const cli_shape s_write_requests = {CLI_LIST, &s_write_request, NULL};
static const cli_shape s_batch_write_items = {CLI_MAP, &s_write_requests, NULL};

static const cli_member m_keys_and_attrs[] = {
    {"Keys", &s_key_list},
    {"AttributesToGet", &s_str_list},
    {"ConsistentRead", &s_bool},
    {"ProjectionExpression", &s_str},
    {"ExpressionAttributeNames", &s_names},
    {NULL, NULL},
};
static const cli_shape s_keys_and_attrs = {CLI_STRUCT, NULL, m_keys_and_attrs};
static const cli_shape s_batch_get_items = {CLI_MAP, &s_keys_and_attrs, NULL};

static const cli_member m_expected_value[] = {
    {"Value", &s_av},
    {"Exists", &s_bool},
    {"ComparisonOperator", &s_str},
    {"AttributeValueList", &s_av_list},
    {NULL, NULL},
};
static const cli_shape s_expected_value = {CLI_STRUCT, NULL, m_expected_value};
static const cli_shape s_expected = {CLI_MAP, &s_expected_value, NULL};

static const cli_member m_attr_update[] = {{"Value", &s_av}, {"Action", &s_str}, {NULL, NULL}};
static const cli_shape s_attr_update = {CLI_STRUCT, NULL, m_attr_update};
static const cli_shape s_attr_updates = {CLI_MAP, &s_attr_update, NULL};

static const cli_member m_condition[] = {
    {"AttributeValueList", &s_av_list}, {"ComparisonOperator", &s_str}, {NULL, NULL}};
static const cli_shape s_condition = {CLI_STRUCT, NULL, m_condition};
static const cli_shape s_conditions = {CLI_MAP, &s_condition, NULL};

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

#define REQ    CLI_OPT_REQUIRED
#define PAIR   CLI_OPT_BOOL_PAIR
#define PAGING CLI_OPT_PAGING
#define OPT_RCC                                                                                    \
	{                                                                                          \
		"return-consumed-capacity", "ReturnConsumedCapacity", &s_str, 0                    \
	}
#define OPT_RICM                                                                                   \
	{                                                                                          \
		"return-item-collection-metrics", "ReturnItemCollectionMetrics", &s_str, 0         \
	}
#define OPT_NAMES                                                                                  \
	{                                                                                          \
		"expression-attribute-names", "ExpressionAttributeNames", &s_names, 0              \
	}
#define OPT_VALUES                                                                                 \
	{                                                                                          \
		"expression-attribute-values", "ExpressionAttributeValues", &s_av_map, 0           \
	}
#define OPT_COND                                                                                   \
	{                                                                                          \
		"condition-expression", "ConditionExpression", &s_str, 0                           \
	}
#define OPT_RV                                                                                     \
	{                                                                                          \
		"return-values", "ReturnValues", &s_str, 0                                         \
	}
#define OPT_RVOCCF                                                                                 \
	{                                                                                          \
		"return-values-on-condition-check-failure", "ReturnValuesOnConditionCheckFailure", \
		    &s_str, 0                                                                      \
	}
#define OPT_EXPECTED                                                                               \
	{                                                                                          \
		"expected", "Expected", &s_expected, 0                                             \
	}
#define OPT_CONDOP                                                                                 \
	{                                                                                          \
		"conditional-operator", "ConditionalOperator", &s_str, 0                           \
	}
#define OPT_TABLE                                                                                  \
	{                                                                                          \
		"table-name", "TableName", &s_str, REQ                                             \
	}
#define OPT_END                                                                                    \
	{                                                                                          \
		NULL, NULL, NULL, 0                                                                \
	}

static const cli_opt o_create_table[] = {
    {"attribute-definitions", "AttributeDefinitions", &s_attr_defs, REQ},
    OPT_TABLE,
    {"key-schema", "KeySchema", &s_key_schema, REQ},
    {"local-secondary-indexes", "LocalSecondaryIndexes", &s_lsis, 0},
    {"global-secondary-indexes", "GlobalSecondaryIndexes", &s_gsis, 0},
    {"billing-mode", "BillingMode", &s_str, 0},
    {"provisioned-throughput", "ProvisionedThroughput", &s_prov, 0},
    {"stream-specification", "StreamSpecification", &s_stream, 0},
    {"sse-specification", "SSESpecification", &s_sse, 0},
    {"tags", "Tags", &s_tags, 0},
    {"table-class", "TableClass", &s_str, 0},
    {"deletion-protection-enabled", "DeletionProtectionEnabled", &s_bool, PAIR},
    {"resource-policy", "ResourcePolicy", &s_str, 0},
    {"on-demand-throughput", "OnDemandThroughput", &s_on_demand, 0},
    {"warm-throughput", "WarmThroughput", &s_warm, 0},
    OPT_END,
};

static const cli_opt o_update_table[] = {
    {"attribute-definitions", "AttributeDefinitions", &s_attr_defs, 0},
    OPT_TABLE,
    {"billing-mode", "BillingMode", &s_str, 0},
    {"provisioned-throughput", "ProvisionedThroughput", &s_prov, 0},
    {"global-secondary-index-updates", "GlobalSecondaryIndexUpdates", &s_gsi_updates, 0},
    {"stream-specification", "StreamSpecification", &s_stream, 0},
    {"sse-specification", "SSESpecification", &s_sse, 0},
    {"replica-updates", "ReplicaUpdates", &s_any, 0},
    {"table-class", "TableClass", &s_str, 0},
    {"deletion-protection-enabled", "DeletionProtectionEnabled", &s_bool, PAIR},
    {"on-demand-throughput", "OnDemandThroughput", &s_on_demand, 0},
    {"warm-throughput", "WarmThroughput", &s_warm, 0},
    OPT_END,
};

static const cli_opt o_table_only[] = {OPT_TABLE, OPT_END};

static const cli_opt o_list_tables[] = {
    {"exclusive-start-table-name", "ExclusiveStartTableName", &s_str, PAGING},
    {"limit", "Limit", &s_int, PAGING},
    OPT_END,
};

static const cli_opt o_put_item[] = {
    OPT_TABLE,    {"item", "Item", &s_av_map, REQ},
    OPT_EXPECTED, OPT_RV,
    OPT_RCC,      OPT_RICM,
    OPT_CONDOP,   OPT_COND,
    OPT_NAMES,    OPT_VALUES,
    OPT_RVOCCF,   OPT_END,
};

static const cli_opt o_get_item[] = {
    OPT_TABLE,
    {"key", "Key", &s_av_map, REQ},
    {"attributes-to-get", "AttributesToGet", &s_str_list, 0},
    {"consistent-read", "ConsistentRead", &s_bool, PAIR},
    OPT_RCC,
    {"projection-expression", "ProjectionExpression", &s_str, 0},
    OPT_NAMES,
    OPT_END,
};

static const cli_opt o_update_item[] = {
    OPT_TABLE,
    {"key", "Key", &s_av_map, REQ},
    {"attribute-updates", "AttributeUpdates", &s_attr_updates, 0},
    OPT_EXPECTED,
    OPT_CONDOP,
    OPT_RV,
    OPT_RCC,
    OPT_RICM,
    {"update-expression", "UpdateExpression", &s_str, 0},
    OPT_COND,
    OPT_NAMES,
    OPT_VALUES,
    OPT_RVOCCF,
    OPT_END,
};

static const cli_opt o_delete_item[] = {
    OPT_TABLE,    {"key", "Key", &s_av_map, REQ},
    OPT_EXPECTED, OPT_CONDOP,
    OPT_RV,       OPT_RCC,
    OPT_RICM,     OPT_COND,
    OPT_NAMES,    OPT_VALUES,
    OPT_RVOCCF,   OPT_END,
};

static const cli_opt o_query[] = {
    OPT_TABLE,
    {"index-name", "IndexName", &s_str, 0},
    {"select", "Select", &s_str, 0},
    {"attributes-to-get", "AttributesToGet", &s_str_list, 0},
    {"limit", "Limit", &s_int, PAGING},
    {"consistent-read", "ConsistentRead", &s_bool, PAIR},
    {"key-conditions", "KeyConditions", &s_conditions, 0},
    {"query-filter", "QueryFilter", &s_conditions, 0},
    OPT_CONDOP,
    {"scan-index-forward", "ScanIndexForward", &s_bool, PAIR},
    {"exclusive-start-key", "ExclusiveStartKey", &s_av_map, PAGING},
    OPT_RCC,
    {"projection-expression", "ProjectionExpression", &s_str, 0},
    {"filter-expression", "FilterExpression", &s_str, 0},
    {"key-condition-expression", "KeyConditionExpression", &s_str, 0},
    OPT_NAMES,
    OPT_VALUES,
    OPT_END,
};

static const cli_opt o_scan[] = {
    OPT_TABLE,
    {"index-name", "IndexName", &s_str, 0},
    {"attributes-to-get", "AttributesToGet", &s_str_list, 0},
    {"limit", "Limit", &s_int, PAGING},
    {"select", "Select", &s_str, 0},
    {"scan-filter", "ScanFilter", &s_conditions, 0},
    OPT_CONDOP,
    {"exclusive-start-key", "ExclusiveStartKey", &s_av_map, PAGING},
    OPT_RCC,
    {"total-segments", "TotalSegments", &s_int, 0},
    {"segment", "Segment", &s_int, 0},
    {"projection-expression", "ProjectionExpression", &s_str, 0},
    {"filter-expression", "FilterExpression", &s_str, 0},
    OPT_NAMES,
    OPT_VALUES,
    {"consistent-read", "ConsistentRead", &s_bool, PAIR},
    OPT_END,
};

static const cli_opt o_batch_write[] = {
    {"request-items", "RequestItems", &s_batch_write_items, REQ},
    OPT_RCC,
    OPT_RICM,
    OPT_END,
};

static const cli_opt o_batch_get[] = {
    {"request-items", "RequestItems", &s_batch_get_items, REQ},
    OPT_RCC,
    OPT_END,
};

static const cli_opt o_transact_write[] = {
    {"transact-items", "TransactItems", &s_any, REQ},          OPT_RCC, OPT_RICM,
    {"client-request-token", "ClientRequestToken", &s_str, 0}, OPT_END,
};

static const cli_opt o_transact_get[] = {
    {"transact-items", "TransactItems", &s_any, REQ},
    OPT_RCC,
    OPT_END,
};

static const cli_opt o_none[] = {OPT_END};

static const cli_opt o_tag_resource[] = {
    {"resource-arn", "ResourceArn", &s_str, REQ},
    {"tags", "Tags", &s_tags, REQ},
    OPT_END,
};

static const cli_opt o_untag_resource[] = {
    {"resource-arn", "ResourceArn", &s_str, REQ},
    {"tag-keys", "TagKeys", &s_str_list, REQ},
    OPT_END,
};

static const cli_opt o_list_tags_of_resource[] = {
    {"resource-arn", "ResourceArn", &s_str, REQ},
    {"next-token", "NextToken", &s_str, 0},
    OPT_END,
};

/* DynamoDB Streams: `shoal dynamodbstreams <command>`, as `aws
 * dynamodbstreams` (no automatic paging: the AWS CLI pages neither). */
static const cli_opt o_list_streams[] = {
    {"table-name", "TableName", &s_str, 0},
    {"limit", "Limit", &s_int, 0},
    {"exclusive-start-stream-arn", "ExclusiveStartStreamArn", &s_str, 0},
    OPT_END,
};

static const cli_member m_shard_filter[] = {{"Type", &s_str}, {"ShardId", &s_str}, {NULL, NULL}};
static const cli_shape s_shard_filter = {CLI_STRUCT, NULL, m_shard_filter};

static const cli_opt o_describe_stream[] = {
    {"stream-arn", "StreamArn", &s_str, REQ},
    {"limit", "Limit", &s_int, 0},
    {"exclusive-start-shard-id", "ExclusiveStartShardId", &s_str, 0},
    {"shard-filter", "ShardFilter", &s_shard_filter, 0},
    OPT_END,
};

static const cli_opt o_get_shard_iterator[] = {
    {"stream-arn", "StreamArn", &s_str, REQ},
    {"shard-id", "ShardId", &s_str, REQ},
    {"shard-iterator-type", "ShardIteratorType", &s_str, REQ},
    {"sequence-number", "SequenceNumber", &s_str, 0},
    OPT_END,
};

static const cli_opt o_get_records[] = {
    {"shard-iterator", "ShardIterator", &s_str, REQ},
    {"limit", "Limit", &s_int, 0},
    OPT_END,
};

static const cli_member m_ttl_spec[] = {
    {"Enabled", &s_bool}, {"AttributeName", &s_str}, {NULL, NULL}};
static const cli_shape s_ttl_spec = {CLI_STRUCT, NULL, m_ttl_spec};

static const cli_opt o_update_time_to_live[] = {
    {"table-name", "TableName", &s_str, REQ},
    {"time-to-live-specification", "TimeToLiveSpecification", &s_ttl_spec, REQ},
    OPT_END,
};

#define o_describe_time_to_live o_table_only

/* Admin, raw (`shoal admin --add-node Id=4,Raft=h:p,Rpc=tcp://h:p`, `shoal
 * admin --drain-node 4`, `shoal admin --add-group '{"GroupId":5,"Nodes":[1,2,3]}'`);
 * the subcommands are cli_admin.c's. */
static const cli_member m_node_spec[] = {
    {"Id", &s_int}, {"Raft", &s_str}, {"Rpc", &s_str}, {NULL, NULL}};
static const cli_shape s_node_spec = {CLI_STRUCT, NULL, m_node_spec};
/* Hashes as text: decimal or 0x hex, up to 2^64-1 (a JSON integer is not). */
static const cli_member m_part_change[] = {
    {"TableName", &s_str}, {"Hash", &s_str}, {"At", &s_str}, {"ToGroup", &s_int}, {NULL, NULL}};
static const cli_shape s_part_change = {CLI_STRUCT, NULL, m_part_change};
static const cli_shape s_int_list = {CLI_LIST, &s_int, NULL};
static const cli_member m_group_spec[] = {
    {"GroupId", &s_int}, {"Nodes", &s_int_list}, {NULL, NULL}};
static const cli_shape s_group_spec = {CLI_STRUCT, NULL, m_group_spec};
static const cli_opt o_admin[] = {
    {"add-node", "AddNode", &s_node_spec, 0},
    {"drain-node", "DrainNode", &s_int, 0},
    {"move-partition", "MovePartition", &s_part_change, 0},
    {"split-partition", "SplitPartition", &s_part_change, 0},
    {"add-group", "AddGroup", &s_group_spec, 0},
    OPT_END,
};

/* Options of the commands whose names the registry derives (o_<field>). */
#define o_batch_get_item       o_batch_get
#define o_batch_write_item     o_batch_write
#define o_transact_write_items o_transact_write
#define o_transact_get_items   o_transact_get
#define o_describe_table       o_table_only
#define o_delete_table         o_table_only
#define o_cluster_status       o_none
#define o_describe_limits      o_none
#define o_describe_endpoints   o_none

/* One command per operation of the registry (proto/ops.h), in its order. */
const cli_cmd cli_cmds[] = {
#define CLI_CMD(Name, field, CONST, cli, flags, node, summary)                                     \
	{cli,                                                                                      \
	 #Name,                                                                                    \
	 ((flags)&SHOAL_OPF_PAGE)       ? CLI_PAGING_ITEMS                                         \
	 : ((flags)&SHOAL_OPF_PAGE_TBL) ? CLI_PAGING_TABLES                                        \
	                                : CLI_PAGING_NONE,                                         \
	 o_##field,                                                                                \
	 summary,                                                                                  \
	 ((flags)&SHOAL_OPF_STREAMS) != 0},
    SHOAL_OPS(CLI_CMD)
#undef CLI_CMD
        {NULL, NULL, CLI_PAGING_NONE, NULL, NULL, false},
};

const cli_cmd *cli_find_cmd(const char *name)
{
	for (const cli_cmd *c = cli_cmds; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

const cli_opt *cli_find_opt(const cli_cmd *cmd, const char *name)
{
	for (const cli_opt *o = cmd->opts; o->name != NULL; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}
