/*
 * wire_api_schema.c -- what shoal.proto's descriptors do not say about
 * DynamoDB's JSON bodies.
 *
 * The walker (wire_api_in.c, wire_api_out.c) takes everything it can from
 * the protobuf-c descriptors: a field `return_values` is the member
 * "ReturnValues", its protobuf type says which JSON type it takes, a
 * one-member oneof is an optional parameter, a repeated field a list.  This
 * file holds the exceptions, as small tables looked up by (descriptor, field
 * name): fields without a JSON form, JSON maps stored as repeated messages,
 * millisecond times that DynamoDB writes as epoch seconds, members DynamoDB
 * always sends, DynamoDB's member order where the AWS CLI shows it, the
 * parameters Shoal accepts and ignores, and the table of operations (the
 * legacy parameters are wire_legacy.c's).  The tables are read-only; what is
 * derived from them per descriptor is computed once and shared ("Per-descriptor
 * facts" below), so every function here is thread-safe.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire_api_int.h"

#define D(x)           &shoal__##x##__descriptor
#define KEYS_AND_ATTRS "com.amazonaws.dynamodb.v20120810.KeysAndAttributes"
#define WRITE_REQS     "java.util.List<com.amazonaws.dynamodb.v20120810.WriteRequest>"
#define ITEM_LIST                                                                                  \
	"java.util.List<java.util.Map<java.lang.String, "                                          \
	"com.amazonaws.dynamodb.v20120810.AttributeValue>>"
#define CAPACITY "com.amazonaws.dynamodb.v20120810.Capacity"
#define ICM_LIST "java.util.List<com.amazonaws.dynamodb.v20120810.ItemCollectionMetrics>"

/* ------------------------------------------------------------------------ */
/* Special fields                                                            */
/* ------------------------------------------------------------------------ */

static const wire_api_special specials[] = {
    /* Router -> node only. */
    {D(scan_request), "hash_lo", WIRE_API_SKIP, false, NULL, NULL, NULL, NULL},
    {D(scan_request), "hash_hi", WIRE_API_SKIP, false, NULL, NULL, NULL, NULL},
    /* Derived from Code. */
    {D(cancellation_reason), "status", WIRE_API_SKIP, false, NULL, NULL, NULL, NULL},

    /* Maps keyed by table or index name. */
    {D(batch_get_item_request), "request_items", WIRE_API_KEYED, true, NULL, "table_name", NULL,
     KEYS_AND_ATTRS},
    {D(batch_get_item_response), "responses", WIRE_API_KEYED, true, NULL, "table_name", "items",
     ITEM_LIST},
    {D(batch_get_item_response), "unprocessed_keys", WIRE_API_KEYED, true, NULL, "table_name", NULL,
     KEYS_AND_ATTRS},
    {D(batch_write_item_request), "request_items", WIRE_API_KEYED, true, NULL, "table_name",
     "requests", WRITE_REQS},
    {D(batch_write_item_response), "unprocessed_items", WIRE_API_KEYED, true, NULL, "table_name",
     "requests", WRITE_REQS},
    {D(batch_write_item_response), "item_collection_metrics", WIRE_API_KEYED, false, NULL,
     "table_name", "metrics", ICM_LIST},
    {D(transact_write_items_response), "item_collection_metrics", WIRE_API_KEYED, false, NULL,
     "table_name", "metrics", ICM_LIST},
    {D(consumed_capacity), "global_secondary_indexes", WIRE_API_KEYED, false, NULL, "index_name",
     "capacity", CAPACITY},
    {D(consumed_capacity), "local_secondary_indexes", WIRE_API_KEYED, false, NULL, "index_name",
     "capacity", CAPACITY},

    /* Pages. */
    {D(query_response), "items", WIRE_API_PAGE_ITEMS, true, NULL, NULL, NULL, NULL},
    {D(query_response), "count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(query_response), "scanned_count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(scan_response), "items", WIRE_API_PAGE_ITEMS, true, NULL, NULL, NULL, NULL},
    {D(scan_response), "count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(scan_response), "scanned_count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(transact_get_items_response), "responses", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(list_tables_response), "table_names", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},

    /* Capacity. */
    {D(consumed_capacity), "capacity_units", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(capacity), "capacity_units", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(item_collection_metrics), "size_estimate_range_gb", WIRE_API_PLAIN, false,
     "SizeEstimateRangeGB", NULL, NULL, NULL},
    {D(provisioned_throughput), "read_capacity_units", WIRE_API_PLAIN, true, NULL, NULL, NULL,
     NULL},
    {D(provisioned_throughput), "write_capacity_units", WIRE_API_PLAIN, true, NULL, NULL, NULL,
     NULL},

    /* Table descriptions. */
    {D(table_description), "creation_date_time", WIRE_API_TIME, true, NULL, NULL, NULL, NULL},
    {D(table_description), "item_count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(table_description), "table_size_bytes", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(billing_mode_summary), "last_update_to_pay_per_request_date_time", WIRE_API_TIME, false,
     NULL, NULL, NULL, NULL},
    {D(table_class_summary), "last_update_date_time", WIRE_API_TIME, false, NULL, NULL, NULL, NULL},
    {D(provisioned_throughput_description), "read_capacity_units", WIRE_API_PLAIN, true, NULL, NULL,
     NULL, NULL},
    {D(provisioned_throughput_description), "write_capacity_units", WIRE_API_PLAIN, true, NULL,
     NULL, NULL, NULL},
    {D(provisioned_throughput_description), "number_of_decreases_today", WIRE_API_PLAIN, true, NULL,
     NULL, NULL, NULL},
    {D(provisioned_throughput_description), "last_increase_date_time", WIRE_API_TIME, false, NULL,
     NULL, NULL, NULL},
    {D(provisioned_throughput_description), "last_decrease_date_time", WIRE_API_TIME, false, NULL,
     NULL, NULL, NULL},
    {D(global_secondary_index_description), "item_count", WIRE_API_PLAIN, true, NULL, NULL, NULL,
     NULL},
    {D(global_secondary_index_description), "index_size_bytes", WIRE_API_PLAIN, true, NULL, NULL,
     NULL, NULL},
    {D(local_secondary_index_description), "item_count", WIRE_API_PLAIN, true, NULL, NULL, NULL,
     NULL},
    {D(local_secondary_index_description), "index_size_bytes", WIRE_API_PLAIN, true, NULL, NULL,
     NULL, NULL},

    /* Tags, limits, endpoints: members DynamoDB always sends. */
    {D(table_description), "deletion_protection_enabled", WIRE_API_PLAIN, true, NULL, NULL, NULL,
     NULL},
    {D(tag), "key", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    /* (Required: a tag's Value may be empty, not absent.) */
    {D(tag), "value", WIRE_API_REQUIRED, true, NULL, NULL, NULL, NULL},
    {D(list_tags_of_resource_response), "tags", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(describe_limits_response), "account_max_read_capacity_units", WIRE_API_PLAIN, true, NULL,
     NULL, NULL, NULL},
    {D(describe_limits_response), "account_max_write_capacity_units", WIRE_API_PLAIN, true, NULL,
     NULL, NULL, NULL},
    {D(describe_limits_response), "table_max_read_capacity_units", WIRE_API_PLAIN, true, NULL, NULL,
     NULL, NULL},
    {D(describe_limits_response), "table_max_write_capacity_units", WIRE_API_PLAIN, true, NULL,
     NULL, NULL, NULL},
    {D(endpoint), "cache_period_in_minutes", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    /* DynamoDB Streams: records spell their members in camelCase. */
    {D(record), "event_id", WIRE_API_PLAIN, false, "eventID", NULL, NULL, NULL},
    {D(record), "event_name", WIRE_API_PLAIN, false, "eventName", NULL, NULL, NULL},
    {D(record), "event_version", WIRE_API_PLAIN, false, "eventVersion", NULL, NULL, NULL},
    {D(record), "event_source", WIRE_API_PLAIN, false, "eventSource", NULL, NULL, NULL},
    {D(record), "aws_region", WIRE_API_PLAIN, false, "awsRegion", NULL, NULL, NULL},
    {D(record), "dynamodb", WIRE_API_PLAIN, false, "dynamodb", NULL, NULL, NULL},
    {D(record), "user_identity", WIRE_API_PLAIN, false, "userIdentity", NULL, NULL, NULL},
    {D(stream_record), "approximate_creation_date_time", WIRE_API_TIME, true, NULL, NULL, NULL,
     NULL},
    {D(stream_record), "size_bytes", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(get_records_response), "records", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(list_streams_response), "streams", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(stream_description), "creation_request_date_time", WIRE_API_TIME, true, NULL, NULL, NULL,
     NULL},
    {D(stream_description), "shards", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},

    /* ClusterStatus: every number and flag, zero or not. */
    {D(cluster_status_response), "partitions", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(node_info), "id", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(node_info), "reachable", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "group", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "node", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "term", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "commit_index", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "applied_index", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(group_status), "leader_node", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(table_stats), "item_count", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(table_stats), "size_bytes", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_group), "group", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_replica), "node", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_replica), "voter", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_replica), "replaces", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(admin_response), "map_epoch", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_partition), "table_id", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_partition), "lo", WIRE_API_HASH, true, NULL, NULL, NULL, NULL},
    {D(map_partition), "hi", WIRE_API_HASH, true, NULL, NULL, NULL, NULL},
    {D(map_partition), "group", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(map_partition), "to_group", WIRE_API_PLAIN, true, "MovingTo", NULL, NULL, NULL},
    {D(unsplit_key), "group", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(unsplit_key), "lo", WIRE_API_HASH, true, NULL, NULL, NULL, NULL},
    {D(unsplit_key), "hash", WIRE_API_HASH, true, NULL, NULL, NULL, NULL},
    {D(unsplit_key), "first_seen_ms", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    {D(unsplit_key), "last_seen_ms", WIRE_API_PLAIN, true, NULL, NULL, NULL, NULL},
    /* Admin's partition changes: hashes past 2^63 (see WIRE_API_HASH). */
    {D(partition_change), "hash", WIRE_API_HASH, false, NULL, NULL, NULL, NULL},
    {D(partition_change), "at", WIRE_API_HASH, false, NULL, NULL, NULL, NULL},
};

/* The special entry of f, found by scanning the table (computed once per
 * field: wire_api_field_info_of). */
static const wire_api_special *special_scan(const ProtobufCMessageDescriptor *desc,
                                            const ProtobufCFieldDescriptor *f)
{
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
		if (specials[i].desc == desc && strcmp(specials[i].field, f->name) == 0)
			return &specials[i];
	}
	return NULL;
}

/* f's JSON member name into buf (WIRE_API_NAME_MAX bytes): the special
 * entry's, else PascalCase of the field name. */
static void json_name_build(const wire_api_special *sp, const ProtobufCFieldDescriptor *f,
                            char *buf)
{
	if (sp != NULL && sp->json != NULL) {
		snprintf(buf, WIRE_API_NAME_MAX, "%s", sp->json);
		return;
	}
	/* snake_case -> PascalCase */
	size_t k = 0;
	bool up = true;
	for (const char *p = f->name; *p != '\0' && k + 1 < WIRE_API_NAME_MAX; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		buf[k++] = up ? (char)toupper((unsigned char)*p) : *p;
		up = false;
	}
	buf[k] = '\0';
}

static void field_info_build(const ProtobufCMessageDescriptor *desc,
                             const ProtobufCFieldDescriptor *f, wire_api_field_info *out)
{
	out->sp = special_scan(desc, f);
	json_name_build(out->sp, f, out->name);
}

static void field_order_build(const ProtobufCMessageDescriptor *desc, unsigned *idx);

/* ------------------------------------------------------------------------ */
/* Per-descriptor facts, computed once                                       */
/* ------------------------------------------------------------------------ */

/*
 * The walkers ask, for every field of every message they convert, its
 * special entry (a scan of `specials` with strcmp), its JSON name
 * (PascalCase built a character at a time) and, on output, the message's
 * member order: about 4% of the router's CPU on an HTTP GetItem (perf,
 * 2026-11-27).  They are functions of the descriptor alone, so each
 * descriptor's are computed on its first use and kept for the life of the
 * process, in an open-addressing table keyed by the descriptor's address:
 * readers take a published entry with an acquire load and no lock; a miss
 * builds the entry under desc_mu and publishes it with a release store.
 * Entries are never removed.  A full table (DESC_SLOTS, eight times
 * shoal.proto's messages) or no memory falls back to computing every time.
 */
#define DESC_SLOTS 1024 /* a power of two */

typedef struct desc_info {
	const ProtobufCMessageDescriptor *desc;
	unsigned order[WIRE_API_MAX_FIELDS];
	wire_api_field_info fields[]; /* desc->n_fields */
} desc_info;

static desc_info *_Atomic desc_slots[DESC_SLOTS];
static pthread_mutex_t desc_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t desc_slot(const ProtobufCMessageDescriptor *desc)
{
	uint64_t h = (uint64_t)(uintptr_t)desc * UINT64_C(0x9E3779B97F4A7C15);
	return (size_t)(h >> 54) & (DESC_SLOTS - 1); /* the top 10 bits */
}

/* desc's entry, or NULL (the next empty slot in *empty, or DESC_SLOTS if the
 * probe found none). */
static desc_info *desc_find(const ProtobufCMessageDescriptor *desc, size_t *empty)
{
	size_t i = desc_slot(desc);
	for (size_t probes = 0; probes < DESC_SLOTS; probes++, i = (i + 1) & (DESC_SLOTS - 1)) {
		desc_info *d = atomic_load_explicit(&desc_slots[i], memory_order_acquire);
		if (d == NULL) {
			*empty = i;
			return NULL;
		}
		if (d->desc == desc)
			return d;
	}
	*empty = DESC_SLOTS;
	return NULL;
}

static const desc_info *desc_info_of(const ProtobufCMessageDescriptor *desc)
{
	size_t empty;
	desc_info *d = desc_find(desc, &empty);
	if (d != NULL || desc->n_fields > WIRE_API_MAX_FIELDS)
		return d;
	pthread_mutex_lock(&desc_mu);
	d = desc_find(desc, &empty); /* another thread may have built it */
	if (d == NULL && empty < DESC_SLOTS &&
	    (d = sh_calloc(1, sizeof(*d) + desc->n_fields * sizeof(d->fields[0]))) != NULL) {
		d->desc = desc;
		field_order_build(desc, d->order);
		for (unsigned k = 0; k < desc->n_fields; k++)
			field_info_build(desc, &desc->fields[k], &d->fields[k]);
		atomic_store_explicit(&desc_slots[empty], d, memory_order_release);
	}
	pthread_mutex_unlock(&desc_mu);
	return d;
}

const wire_api_field_info *wire_api_field_info_of(const ProtobufCMessageDescriptor *desc,
                                                  const ProtobufCFieldDescriptor *f,
                                                  wire_api_field_info *tmp)
{
	const desc_info *d = desc_info_of(desc);
	if (d != NULL && f >= desc->fields && f < desc->fields + desc->n_fields)
		return &d->fields[f - desc->fields];
	field_info_build(desc, f, tmp);
	return tmp;
}

/* ------------------------------------------------------------------------ */
/* Output order                                                              */
/* ------------------------------------------------------------------------ */

static const struct {
	const ProtobufCMessageDescriptor *desc;
	const char *const fields[16];
} orders[] = {
    /* As `aws dynamodb describe-table` prints a table. */
    {D(table_description),
     {"attribute_definitions", "table_name", "key_schema", "table_status", "creation_date_time",
      "provisioned_throughput", "table_size_bytes", "item_count", "table_arn", "table_id",
      "billing_mode_summary", "local_secondary_indexes", "global_secondary_indexes", NULL}},
    {D(global_secondary_index_description),
     {"index_name", "key_schema", "projection", "index_status", "backfilling",
      "provisioned_throughput", "index_size_bytes", "item_count", "index_arn",
      "on_demand_throughput", "write_shards", NULL}},
    {D(local_secondary_index_description),
     {"index_name", "key_schema", "projection", "index_size_bytes", "item_count", "index_arn",
      NULL}},
    {D(provisioned_throughput_description),
     {"last_increase_date_time", "last_decrease_date_time", "number_of_decreases_today",
      "read_capacity_units", "write_capacity_units", NULL}},
    /* ConsumedCapacity last. */
    {D(put_item_response), {"attributes", "item_collection_metrics", "consumed_capacity", NULL}},
    {D(update_item_response), {"attributes", "item_collection_metrics", "consumed_capacity", NULL}},
    {D(delete_item_response), {"attributes", "item_collection_metrics", "consumed_capacity", NULL}},
    {D(batch_write_item_response),
     {"unprocessed_items", "item_collection_metrics", "consumed_capacity", NULL}},
    {D(cancellation_reason), {"item", "code", "message", NULL}},
};

void wire_api_field_order(const ProtobufCMessageDescriptor *desc, unsigned *idx)
{
	const desc_info *d = desc_info_of(desc);
	if (d != NULL) {
		memcpy(idx, d->order, desc->n_fields * sizeof(*idx));
		return;
	}
	field_order_build(desc, idx);
}

static void field_order_build(const ProtobufCMessageDescriptor *desc, unsigned *idx)
{
	unsigned n = 0;
	bool used[WIRE_API_MAX_FIELDS] = {false};
	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
		if (orders[i].desc != desc)
			continue;
		for (const char *const *f = orders[i].fields; *f != NULL; f++) {
			const ProtobufCFieldDescriptor *fd =
			    protobuf_c_message_descriptor_get_field_by_name(desc, *f);
			if (fd == NULL)
				continue;
			unsigned k = (unsigned)(fd - desc->fields);
			if (k < WIRE_API_MAX_FIELDS && !used[k]) {
				used[k] = true;
				idx[n++] = k;
			}
		}
		break;
	}
	for (unsigned k = 0; k < desc->n_fields && k < WIRE_API_MAX_FIELDS; k++) {
		if (!used[k])
			idx[n++] = k;
	}
}

bool wire_api_in_group(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f)
{
	if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
		return false;
	unsigned members = 0;
	for (unsigned k = 0; k < desc->n_fields; k++) {
		const ProtobufCFieldDescriptor *g = &desc->fields[k];
		if ((g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    g->quantifier_offset == f->quantifier_offset)
			members++;
	}
	return members > 1;
}

/* ------------------------------------------------------------------------ */
/* Ignored parameters                                                        */
/* ------------------------------------------------------------------------ */

static const char *const ignored_create[] = {"oSSESpecification", "oWarmThroughput",
                                             "sResourcePolicy", NULL};
static const char *const ignored_update[] = {"oSSESpecification", "aReplicaUpdates",
                                             "oWarmThroughput", NULL};
static const char *const ignored_gsi[] = {"oWarmThroughput", NULL};

const char *const *wire_api_ignored_of(const ProtobufCMessageDescriptor *desc)
{
	if (desc == D(create_table_request))
		return ignored_create;
	if (desc == D(update_table_request))
		return ignored_update;
	if (desc == D(global_secondary_index) || desc == D(update_global_secondary_index_action))
		return ignored_gsi;
	return NULL;
}

const char *wire_api_group_message(const ProtobufCMessageDescriptor *desc)
{
	if (desc == D(transact_write_item))
		return "TransactItems can only contain one of Check, Put, Update or Delete";
	if (desc == D(write_request))
		return "One or more parameter values were invalid: A WriteRequest must contain "
		       "exactly one of PutRequest or DeleteRequest";
	if (desc == D(global_secondary_index_update))
		return "One or more parameter values were invalid: A GlobalSecondaryIndexUpdate "
		       "must contain exactly one of Create, Update or Delete";
	return "One or more parameter values were invalid: more than one member of a union set";
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/* The registry (proto/ops.h) as data. */
const wire_op_info wire_ops[SHOAL_OP__COUNT] = {
#define OP_INFO(Name, field, CONST, cli, flags, node, summary)                                     \
	[SHOAL_OP_##CONST] = {#Name, #field, cli, summary, flags, SHOAL__REQUEST__OP_##CONST},
    SHOAL_OPS(OP_INFO)
#undef OP_INFO
};

const wire_op_info *wire_op_by_name(const char *operation)
{
	if (operation == NULL)
		return NULL;
	const char *dot = strrchr(operation, '.');
	const char *name = dot != NULL ? dot + 1 : operation;
	for (size_t i = 0; i < SHOAL_OP__COUNT; i++) {
		if (strcmp(wire_ops[i].name, name) == 0)
			return &wire_ops[i];
	}
	return NULL;
}

shoal_op wire_op_of(Shoal__Request__OpCase op_case)
{
	switch (op_case) {
#define OP_CASE(Name, field, CONST, cli, flags, node, summary)                                     \
	case SHOAL__REQUEST__OP_##CONST:                                                           \
		return SHOAL_OP_##CONST;
		SHOAL_OPS(OP_CASE)
#undef OP_CASE
	default:
		return SHOAL_OP__COUNT;
	}
}

const wire_op_info *wire_op_by_id(uint32_t id)
{
	shoal_op op = wire_op_of((Shoal__Request__OpCase)id);
	return op < SHOAL_OP__COUNT ? &wire_ops[op] : NULL;
}

const char *wire_op_name(Shoal__Request__OpCase op_case)
{
	const wire_op_info *o = wire_op_by_id((uint32_t)op_case);
	return o != NULL ? o->name : "";
}

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------ */

size_t wire_api_utf8_seq(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;
	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

bool wire_api_utf8_valid(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t len = wire_api_utf8_seq(s + i, n - i);
		if (len == 0)
			return false;
		i += len;
	}
	return true;
}
