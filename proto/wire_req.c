/*
 * wire_req.c -- data-plane requests: decoded protobuf -> st_*_req (with
 * DynamoDB's API-level validation) and back.
 *
 * Each *_from_pb runs DynamoDB's stages in DynamoDB's order (wire_check.c):
 *   1. parameter constraints of the operation, collected;
 *   2. expression-parameter rules ("ExpressionAttributeNames can only be
 *      specified when using expressions", "ExpressionAttributeValues can only
 *      be specified when using expressions: ConditionExpression is null");
 *   3. the key or item values (normalised), then rules such as "ReturnValues
 *      can only be ALL_OLD or NONE", Segment/TotalSegments;
 *   4. ExpressionAttributeValues, then ExpressionAttributeNames.
 * Parsing the expressions, checking that every name and value is used, the
 * key against the table's schema and the item size are the storage engine's
 * (they need the table).  Absent optional strings stay NULL; an empty
 * expression is passed on as "" so the engine can say "Invalid
 * ConditionExpression: The expression can not be empty;".
 *
 * The *_to_pb direction builds the message a client or the router sends,
 * leaving defaults unset so that a round trip gives back the same struct.
 */
#include <string.h>

#include "proto/wire_int.h"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a request");
}

static int return_values(const char *s)
{
	return s == NULL ? ST_RV_NONE : st_return_values_parse(s);
}

static bool old_on_failure(const char *s)
{
	return s != NULL && strcmp(s, "ALL_OLD") == 0;
}

static int only_all_old_or_none(const char *rv, char *errmsg)
{
	if (rv != NULL && strcmp(rv, "ALL_OLD") != 0 && strcmp(rv, "NONE") != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ReturnValues can only be ALL_OLD or NONE");
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* From protobuf                                                             */
/* ------------------------------------------------------------------------ */

int wire_get_req_from_pb(sh_arena *a, const Shoal__GetItemRequest *pb, st_get_req *out,
                         char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *projection = WIRE_OPT(pb, projection_expression);
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_present(&e, "key", pb->key != NULL);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(pb->expression_attribute_names != NULL, false,
		                            projection != NULL, false, NULL, false, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_item(a, pb->key, &out->key, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_names(a, pb->expression_attribute_names, &out->names, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, projection, &out->projection, errmsg);
	return rc;
}

/* The parts put, update and delete share, after their own stage 1. */
static int write_common(sh_arena *a, const Shoal__ExpressionAttributeNames *names,
                        const Shoal__Item *values, const char *rvoccf, const char *condition,
                        st_expr_attrs *attrs, bool *old_on_fail, const char **cond_out,
                        char *errmsg)
{
	int rc = wire_norm_values(a, values, &attrs->values, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_names(a, names, &attrs->names, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, condition, cond_out, errmsg);
	*old_on_fail = old_on_failure(rvoccf);
	return rc;
}

int wire_put_req_from_pb(sh_arena *a, const Shoal__PutItemRequest *pb, st_put_req *out,
                         char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *cond = WIRE_OPT(pb, condition_expression);
	const char *rv = WIRE_OPT(pb, return_values);
	const char *rvoccf = WIRE_OPT(pb, return_values_on_condition_check_failure);
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_present(&e, "item", pb->item != NULL);
	wire_check_enum(&e, "returnValues", rv, wire_rv_set);
	wire_check_enum(&e, "returnItemCollectionMetrics",
	                WIRE_OPT(pb, return_item_collection_metrics), wire_ricm_set);
	wire_check_enum(&e, "returnValuesOnConditionCheckFailure", rvoccf, wire_rvoccf_set);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(pb->expression_attribute_names != NULL,
		                            pb->expression_attribute_values != NULL, cond != NULL,
		                            cond != NULL, "ConditionExpression", false, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_item(a, pb->item, &out->item, errmsg);
	if (rc == SHOAL_OK)
		rc = only_all_old_or_none(rv, errmsg);
	if (rc == SHOAL_OK)
		rc = write_common(a, pb->expression_attribute_names,
		                  pb->expression_attribute_values, rvoccf, cond, &out->attrs,
		                  &out->return_old_on_condition_fail, &out->condition, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	out->return_values = (st_return_values)return_values(rv);
	return rc;
}

int wire_update_req_from_pb(sh_arena *a, const Shoal__UpdateItemRequest *pb, st_update_req *out,
                            char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *update = WIRE_OPT(pb, update_expression);
	const char *cond = WIRE_OPT(pb, condition_expression);
	const char *rv = WIRE_OPT(pb, return_values);
	const char *rvoccf = WIRE_OPT(pb, return_values_on_condition_check_failure);
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_enum(&e, "returnItemCollectionMetrics",
	                WIRE_OPT(pb, return_item_collection_metrics), wire_ricm_set);
	wire_check_enum(&e, "returnValues", rv, wire_rv_set);
	wire_check_present(&e, "key", pb->key != NULL);
	wire_check_enum(&e, "returnValuesOnConditionCheckFailure", rvoccf, wire_rvoccf_set);
	int rc = wire_verr_done(&e, errmsg);
	bool any = update != NULL || cond != NULL;
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(
		    pb->expression_attribute_names != NULL, pb->expression_attribute_values != NULL,
		    any, any, "UpdateExpression and ConditionExpression", true, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_item(a, pb->key, &out->key, errmsg);
	if (rc == SHOAL_OK)
		rc = write_common(a, pb->expression_attribute_names,
		                  pb->expression_attribute_values, rvoccf, cond, &out->attrs,
		                  &out->return_old_on_condition_fail, &out->condition, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, update, &out->update, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	out->return_values = (st_return_values)return_values(rv);
	return rc;
}

int wire_delete_req_from_pb(sh_arena *a, const Shoal__DeleteItemRequest *pb, st_delete_req *out,
                            char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *cond = WIRE_OPT(pb, condition_expression);
	const char *rv = WIRE_OPT(pb, return_values);
	const char *rvoccf = WIRE_OPT(pb, return_values_on_condition_check_failure);
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_enum(&e, "returnValues", rv, wire_rv_set);
	wire_check_enum(&e, "returnItemCollectionMetrics",
	                WIRE_OPT(pb, return_item_collection_metrics), wire_ricm_set);
	wire_check_present(&e, "key", pb->key != NULL);
	wire_check_enum(&e, "returnValuesOnConditionCheckFailure", rvoccf, wire_rvoccf_set);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(pb->expression_attribute_names != NULL,
		                            pb->expression_attribute_values != NULL, cond != NULL,
		                            cond != NULL, "ConditionExpression", false, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_item(a, pb->key, &out->key, errmsg);
	if (rc == SHOAL_OK)
		rc = only_all_old_or_none(rv, errmsg);
	if (rc == SHOAL_OK)
		rc = write_common(a, pb->expression_attribute_names,
		                  pb->expression_attribute_values, rvoccf, cond, &out->attrs,
		                  &out->return_old_on_condition_fail, &out->condition, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	out->return_values = (st_return_values)return_values(rv);
	return rc;
}

static st_select parse_select(const char *s)
{
	return s == NULL ? ST_SELECT_DEFAULT : (st_select)st_select_parse(s);
}

int wire_query_req_from_pb(sh_arena *a, const Shoal__QueryRequest *pb, st_query_req *out,
                           char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *index = WIRE_OPT(pb, index_name);
	const char *kce = WIRE_OPT(pb, key_condition_expression);
	const char *filter = WIRE_OPT(pb, filter_expression);
	const char *projection = WIRE_OPT(pb, projection_expression);
	const char *select = WIRE_OPT(pb, select);
	bool has_limit = WIRE_HAS(pb, limit);
	wire_verrs e = {0};
	wire_check_enum(&e, "select", select, wire_select_set);
	wire_check_name(&e, "indexName", index, false);
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_min(&e, "limit", has_limit, has_limit ? pb->limit : 0, 1);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(
		    pb->expression_attribute_names != NULL, pb->expression_attribute_values != NULL,
		    kce != NULL || filter != NULL || projection != NULL,
		    kce != NULL || filter != NULL, "FilterExpression and KeyConditionExpression",
		    true, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_start_key(a, pb->exclusive_start_key, &out->exclusive_start_key,
		                         errmsg);
	if (rc == SHOAL_OK && kce == NULL)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "Either the KeyConditions or KeyConditionExpression parameter must be "
		             "specified in the request.");
	if (rc == SHOAL_OK)
		rc = wire_norm_values(a, pb->expression_attribute_values, &out->attrs.values,
		                      errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_names(a, pb->expression_attribute_names, &out->attrs.names, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, index, &out->index, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, kce, &out->key_condition, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, filter, &out->filter, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, projection, &out->projection, errmsg);
	out->forward = WIRE_HAS(pb, scan_index_forward) ? pb->scan_index_forward != 0 : true;
	out->limit = has_limit && pb->limit > 0 ? (uint32_t)pb->limit : 0;
	out->select = parse_select(select);
	out->consistent = pb->consistent_read != 0;
	return rc;
}

#define MAX_TOTAL_SEGMENTS 1000000

int wire_scan_req_from_pb(sh_arena *a, const Shoal__ScanRequest *pb, st_scan_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	const char *index = WIRE_OPT(pb, index_name);
	const char *filter = WIRE_OPT(pb, filter_expression);
	const char *projection = WIRE_OPT(pb, projection_expression);
	const char *select = WIRE_OPT(pb, select);
	bool has_limit = WIRE_HAS(pb, limit);
	bool has_seg = WIRE_HAS(pb, segment);
	bool has_total = WIRE_HAS(pb, total_segments);
	long long seg = has_seg ? pb->segment : 0;
	long long total = has_total ? pb->total_segments : 0;
	wire_verrs e = {0};
	wire_check_enum(&e, "select", select, wire_select_set);
	wire_check_name(&e, "indexName", index, false);
	wire_check_min(&e, "totalSegments", has_total, total, 1);
	wire_check_max(&e, "totalSegments", has_total, total, MAX_TOTAL_SEGMENTS);
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_name(&e, "tableName", table, true);
	wire_check_min(&e, "segment", has_seg, seg, 0);
	wire_check_max(&e, "segment", has_seg, seg, MAX_TOTAL_SEGMENTS - 1);
	wire_check_min(&e, "limit", has_limit, has_limit ? pb->limit : 0, 1);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_check_expr_params(pb->expression_attribute_names != NULL,
		                            pb->expression_attribute_values != NULL,
		                            filter != NULL || projection != NULL, filter != NULL,
		                            "FilterExpression", false, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_start_key(a, pb->exclusive_start_key, &out->exclusive_start_key,
		                         errmsg);
	if (rc == SHOAL_OK && has_seg && !has_total)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "The TotalSegments parameter is required but was not present in the "
		             "request when Segment parameter is present");
	if (rc == SHOAL_OK && has_total && !has_seg)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "The Segment parameter is required but was not present in the request "
		             "when parameter TotalSegments is present");
	if (rc == SHOAL_OK && has_total && seg >= total)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "The Segment parameter is zero-based and must be less than parameter "
		             "TotalSegments: Segment: %lld is not less than TotalSegments: %lld",
		             seg, total);
	if (rc == SHOAL_OK)
		rc = wire_norm_values(a, pb->expression_attribute_values, &out->attrs.values,
		                      errmsg);
	if (rc == SHOAL_OK)
		rc = wire_norm_names(a, pb->expression_attribute_names, &out->attrs.names, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->table, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, index, &out->index, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, filter, &out->filter, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, projection, &out->projection, errmsg);
	out->limit = has_limit && pb->limit > 0 ? (uint32_t)pb->limit : 0;
	out->select = parse_select(select);
	out->consistent = pb->consistent_read != 0;
	out->segment = has_seg && seg >= 0 ? (uint32_t)seg : 0;
	out->total_segments = has_total && total > 0 ? (uint32_t)total : 0;
	out->hash_lo = pb->hash_lo;
	out->hash_hi = pb->hash_hi;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* To protobuf                                                               */
/* ------------------------------------------------------------------------ */

/* Arena copy of s as a protobuf-c string (char *), NULL stays NULL. */
static int pbstr(sh_arena *a, const char *s, char **out, char *errmsg)
{
	*out = NULL;
	if (s == NULL)
		return SHOAL_OK;
	*out = sh_arena_strndup(a, s, strlen(s));
	return *out != NULL ? SHOAL_OK : nomem(errmsg);
}

/* Sets optional string field f of message m to a copy of s when s != NULL. */
#define SET_OPT_STR(m, f, s)                                                                       \
	do {                                                                                       \
		char *c_;                                                                          \
		if (rc == SHOAL_OK && (s) != NULL &&                                               \
		    (rc = pbstr(a, (s), &c_, errmsg)) == SHOAL_OK)                                 \
			WIRE_SET(m, f, c_);                                                        \
	} while (0)

/* The Item of a const st_value (NULL stays NULL). */
static int item_pb(sh_arena *a, const st_value *v, Shoal__Item **out, char *errmsg)
{
	return wire_item_to_pb(a, v, out, errmsg);
}

static int attrs_pb(sh_arena *a, const st_expr_attrs *attrs,
                    Shoal__ExpressionAttributeNames **names, Shoal__Item **values, char *errmsg)
{
	int rc = wire_names_to_pb(a, attrs->names, names, errmsg);
	if (rc == SHOAL_OK && values != NULL)
		rc = item_pb(a, attrs->values, values, errmsg);
	return rc;
}

int wire_get_req_to_pb(sh_arena *a, const st_get_req *req, Shoal__GetItemRequest **out,
                       char *errmsg)
{
	Shoal__GetItemRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__get_item_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, projection_expression, req->projection);
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->key, &pb->key, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_names_to_pb(a, req->names, &pb->expression_attribute_names, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_put_req_to_pb(sh_arena *a, const st_put_req *req, Shoal__PutItemRequest **out,
                       char *errmsg)
{
	Shoal__PutItemRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__put_item_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, condition_expression, req->condition);
	if (req->return_values != ST_RV_NONE)
		SET_OPT_STR(pb, return_values, wire_rv_name(req->return_values));
	if (req->return_old_on_condition_fail)
		SET_OPT_STR(pb, return_values_on_condition_check_failure, "ALL_OLD");
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->item, &pb->item, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_pb(a, &req->attrs, &pb->expression_attribute_names,
		              &pb->expression_attribute_values, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_update_req_to_pb(sh_arena *a, const st_update_req *req, Shoal__UpdateItemRequest **out,
                          char *errmsg)
{
	Shoal__UpdateItemRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__update_item_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, update_expression, req->update);
	SET_OPT_STR(pb, condition_expression, req->condition);
	if (req->return_values != ST_RV_NONE)
		SET_OPT_STR(pb, return_values, wire_rv_name(req->return_values));
	if (req->return_old_on_condition_fail)
		SET_OPT_STR(pb, return_values_on_condition_check_failure, "ALL_OLD");
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->key, &pb->key, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_pb(a, &req->attrs, &pb->expression_attribute_names,
		              &pb->expression_attribute_values, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_delete_req_to_pb(sh_arena *a, const st_delete_req *req, Shoal__DeleteItemRequest **out,
                          char *errmsg)
{
	Shoal__DeleteItemRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__delete_item_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, condition_expression, req->condition);
	if (req->return_values != ST_RV_NONE)
		SET_OPT_STR(pb, return_values, wire_rv_name(req->return_values));
	if (req->return_old_on_condition_fail)
		SET_OPT_STR(pb, return_values_on_condition_check_failure, "ALL_OLD");
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->key, &pb->key, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_pb(a, &req->attrs, &pb->expression_attribute_names,
		              &pb->expression_attribute_values, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_query_req_to_pb(sh_arena *a, const st_query_req *req, Shoal__QueryRequest **out,
                         char *errmsg)
{
	Shoal__QueryRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__query_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, index_name, req->index);
	SET_OPT_STR(pb, key_condition_expression, req->key_condition);
	SET_OPT_STR(pb, filter_expression, req->filter);
	SET_OPT_STR(pb, projection_expression, req->projection);
	SET_OPT_STR(pb, select, wire_select_name(req->select));
	if (!req->forward)
		WIRE_SET(pb, scan_index_forward, 0);
	if (req->limit > 0)
		WIRE_SET(pb, limit, req->limit > INT32_MAX ? INT32_MAX : (int32_t)req->limit);
	pb->consistent_read = req->consistent;
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->exclusive_start_key, &pb->exclusive_start_key, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_pb(a, &req->attrs, &pb->expression_attribute_names,
		              &pb->expression_attribute_values, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_scan_req_to_pb(sh_arena *a, const st_scan_req *req, Shoal__ScanRequest **out, char *errmsg)
{
	Shoal__ScanRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__scan_request__init(pb);
	int rc = SHOAL_OK;
	SET_OPT_STR(pb, table_name, req->table);
	SET_OPT_STR(pb, index_name, req->index);
	SET_OPT_STR(pb, filter_expression, req->filter);
	SET_OPT_STR(pb, projection_expression, req->projection);
	SET_OPT_STR(pb, select, wire_select_name(req->select));
	if (req->limit > 0)
		WIRE_SET(pb, limit, req->limit > INT32_MAX ? INT32_MAX : (int32_t)req->limit);
	if (req->total_segments > 0) {
		WIRE_SET(pb, segment, (int32_t)req->segment);
		WIRE_SET(pb, total_segments, (int32_t)req->total_segments);
	}
	pb->consistent_read = req->consistent;
	pb->hash_lo = req->hash_lo;
	pb->hash_hi = req->hash_hi;
	if (rc == SHOAL_OK)
		rc = item_pb(a, req->exclusive_start_key, &pb->exclusive_start_key, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_pb(a, &req->attrs, &pb->expression_attribute_names,
		              &pb->expression_attribute_values, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

const char *wire_request_table(const Shoal__Request *r)
{
	switch (r->op_case) {
	case SHOAL__REQUEST__OP_GET_ITEM:
		return WIRE_OPT(r->get_item, table_name);
	case SHOAL__REQUEST__OP_PUT_ITEM:
		return WIRE_OPT(r->put_item, table_name);
	case SHOAL__REQUEST__OP_UPDATE_ITEM:
		return WIRE_OPT(r->update_item, table_name);
	case SHOAL__REQUEST__OP_DELETE_ITEM:
		return WIRE_OPT(r->delete_item, table_name);
	case SHOAL__REQUEST__OP_QUERY:
		return WIRE_OPT(r->query, table_name);
	case SHOAL__REQUEST__OP_SCAN:
		return WIRE_OPT(r->scan, table_name);
	default:
		return NULL;
	}
}
