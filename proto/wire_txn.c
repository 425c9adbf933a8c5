/*
 * wire_txn.c -- TransactWriteItems and TransactGetItems on the wire: one
 * action as an engine action, the request's checks that come before any
 * item is looked at, a request's digest (ClientRequestToken), and the
 * TransactionCanceledException answer with its CancellationReasons.
 *
 * An action is checked as its single-item operation is (a Put as a
 * PutItemRequest, an Update as an UpdateItemRequest, a Delete and a
 * ConditionCheck as a DeleteItemRequest built around the same fields), so
 * DynamoDB's API-level messages are the ones wire_req.c already gives.
 */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "proto/wire_int.h"

/* ------------------------------------------------------------------------ */
/* Actions                                                                   */
/* ------------------------------------------------------------------------ */

#define COPY_OPT(dst, src, f)                                                                      \
	do {                                                                                       \
		if ((src)->f != NULL && (src)->f[0] != '\0')                                       \
			WIRE_SET(dst, f, (char *)(src)->f);                                        \
	} while (0)

/* Coral's constraints on an action's own members (kind "put", "update",
 * "delete", "conditionCheck"), named from the request's top as DynamoDB
 * names them: 'transactItems.2.member.put.returnValuesOnConditionCheckFailure'.
 * The single-item checks that follow then have nothing more to say about
 * these members (theirs would name them from the item request's top). */
static int action_constraints(size_t pos, const char *kind, const char *table, const char *target,
                              bool has_target, const char *rvoccf, char *errmsg)
{
	char path[3][96];
	snprintf(path[0], sizeof(path[0]), "transactItems.%zu.member.%s.tableName", pos, kind);
	snprintf(path[1], sizeof(path[1]), "transactItems.%zu.member.%s.%s", pos, kind, target);
	snprintf(path[2], sizeof(path[2]),
	         "transactItems.%zu.member.%s.returnValuesOnConditionCheckFailure", pos, kind);
	wire_verrs e = {0};
	wire_check_name(&e, path[0], table != NULL && table[0] != '\0' ? table : NULL, true);
	wire_check_present(&e, path[1], has_target);
	wire_check_enum(&e, path[2], rvoccf != NULL && rvoccf[0] != '\0' ? rvoccf : NULL,
	                wire_rvoccf_set);
	return wire_verr_done(&e, errmsg);
}

int wire_txn_action_from_pb(sh_arena *a, const Shoal__TransactWriteItem *pb, size_t pos,
                            st_txn_action *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc;
	switch (pb->action_case) {
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_PUT: {
		const Shoal__Put *x = pb->put;
		if ((rc = action_constraints(pos, "put", x->table_name, "item", x->item != NULL,
		                             x->return_values_on_condition_check_failure,
		                             errmsg)) != SHOAL_OK)
			return rc;
		Shoal__PutItemRequest r = SHOAL__PUT_ITEM_REQUEST__INIT;
		COPY_OPT(&r, x, table_name);
		r.item = x->item;
		if (WIRE_HAS(x, condition_expression))
			WIRE_SET(&r, condition_expression, x->condition_expression);
		r.expression_attribute_names = x->expression_attribute_names;
		r.expression_attribute_values = x->expression_attribute_values;
		COPY_OPT(&r, x, return_values_on_condition_check_failure);
		out->kind = ST_TXA_PUT;
		rc = wire_put_req_from_pb(a, &r, &out->u.put, errmsg);
		if (rc == SHOAL_OK && st_item_size(out->u.put.item) > ST_MAX_ITEM_SIZE)
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "Item size has exceeded the maximum allowed size");
		return rc;
	}
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_UPDATE: {
		const Shoal__Update *x = pb->update;
		if ((rc = action_constraints(pos, "update", x->table_name, "key", x->key != NULL,
		                             x->return_values_on_condition_check_failure,
		                             errmsg)) != SHOAL_OK)
			return rc;
		Shoal__UpdateItemRequest r = SHOAL__UPDATE_ITEM_REQUEST__INIT;
		COPY_OPT(&r, x, table_name);
		r.key = x->key;
		if (x->update_expression != NULL && x->update_expression[0] != '\0')
			WIRE_SET(&r, update_expression, x->update_expression);
		if (WIRE_HAS(x, condition_expression))
			WIRE_SET(&r, condition_expression, x->condition_expression);
		r.expression_attribute_names = x->expression_attribute_names;
		r.expression_attribute_values = x->expression_attribute_values;
		COPY_OPT(&r, x, return_values_on_condition_check_failure);
		out->kind = ST_TXA_UPDATE;
		if (!WIRE_HAS(&r, update_expression))
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "1 validation error detected: Value null at "
			    "'transactItems.%zu.member.update.updateExpression' failed to "
			    "satisfy constraint: Member must not be null",
			    pos);
		return wire_update_req_from_pb(a, &r, &out->u.update, errmsg);
	}
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_DELETE: {
		const Shoal__Delete *x = pb->delete_;
		if ((rc = action_constraints(pos, "delete", x->table_name, "key", x->key != NULL,
		                             x->return_values_on_condition_check_failure,
		                             errmsg)) != SHOAL_OK)
			return rc;
		Shoal__DeleteItemRequest r = SHOAL__DELETE_ITEM_REQUEST__INIT;
		COPY_OPT(&r, x, table_name);
		r.key = x->key;
		if (WIRE_HAS(x, condition_expression))
			WIRE_SET(&r, condition_expression, x->condition_expression);
		r.expression_attribute_names = x->expression_attribute_names;
		r.expression_attribute_values = x->expression_attribute_values;
		COPY_OPT(&r, x, return_values_on_condition_check_failure);
		out->kind = ST_TXA_DELETE;
		return wire_delete_req_from_pb(a, &r, &out->u.del, errmsg);
	}
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_CONDITION_CHECK: {
		const Shoal__ConditionCheck *x = pb->condition_check;
		if ((rc = action_constraints(
		         pos, "conditionCheck", x->table_name, "key", x->key != NULL,
		         x->return_values_on_condition_check_failure, errmsg)) != SHOAL_OK)
			return rc;
		Shoal__DeleteItemRequest r = SHOAL__DELETE_ITEM_REQUEST__INIT;
		COPY_OPT(&r, x, table_name);
		r.key = x->key;
		if (x->condition_expression == NULL || x->condition_expression[0] == '\0')
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "1 validation error detected: Value null at "
			    "'transactItems.%zu.member.conditionCheck.conditionExpression' "
			    "failed to satisfy constraint: Member must not be null",
			    pos);
		WIRE_SET(&r, condition_expression, x->condition_expression);
		r.expression_attribute_names = x->expression_attribute_names;
		r.expression_attribute_values = x->expression_attribute_values;
		COPY_OPT(&r, x, return_values_on_condition_check_failure);
		st_delete_req d;
		if ((rc = wire_delete_req_from_pb(a, &r, &d, errmsg)) != SHOAL_OK)
			return rc;
		out->kind = ST_TXA_CHECK;
		out->u.check =
		    (st_check_req){.table = d.table,
		                   .key = d.key,
		                   .condition = d.condition,
		                   .attrs = d.attrs,
		                   .return_old_on_condition_fail = d.return_old_on_condition_fail};
		return SHOAL_OK;
	}
	default:
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "TransactItems can only contain one of Check, Put, Update or Delete");
	}
}

void wire_txn_action_target(const st_txn_action *act, const char **table, const st_value **key,
                            bool *item)
{
	*item = false;
	switch (act->kind) {
	case ST_TXA_PUT:
		*table = act->u.put.table;
		*key = act->u.put.item;
		*item = true;
		return;
	case ST_TXA_UPDATE:
		*table = act->u.update.table;
		*key = act->u.update.key;
		return;
	case ST_TXA_DELETE:
		*table = act->u.del.table;
		*key = act->u.del.key;
		return;
	case ST_TXA_CHECK:
		*table = act->u.check.table;
		*key = act->u.check.key;
		return;
	}
	*table = NULL;
	*key = NULL;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

int wire_txn_write_check(const Shoal__TransactWriteItemsRequest *pb, char *errmsg)
{
	size_t n = pb->n_transact_items;
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	wire_check_enum(&e, "returnItemCollectionMetrics",
	                WIRE_OPT(pb, return_item_collection_metrics), wire_ricm_set);
	int rc = wire_verr_done(&e, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (n == 0 || n > ST_MAX_TXN_ITEMS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%s' at 'transactItems' failed "
		               "to satisfy constraint: Member must have length %s",
		               n == 0 ? "[]" : "[...]",
		               n == 0 ? "greater than or equal to 1" : "less than or equal to 100");
	const char *token = WIRE_OPT(pb, client_request_token);
	if (token != NULL && (strlen(token) < 1 || strlen(token) > 36))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%s' at 'clientRequestToken' "
		               "failed to satisfy constraint: Member must have length less than or "
		               "equal to 36",
		               token);
	size_t bytes = protobuf_c_message_get_packed_size(&pb->base);
	if (bytes > ST_MAX_TXN_BYTES)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Transaction request size of %zu bytes exceeds the limit of 4 MB",
		               bytes);
	return SHOAL_OK;
}

int wire_txn_get_check(const Shoal__TransactGetItemsRequest *pb, char *errmsg)
{
	size_t n = pb->n_transact_items;
	wire_verrs e = {0};
	wire_check_enum(&e, "returnConsumedCapacity", WIRE_OPT(pb, return_consumed_capacity),
	                wire_rcc_set);
	int rc = wire_verr_done(&e, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (n == 0 || n > ST_MAX_TXN_ITEMS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%s' at 'transactItems' failed "
		               "to satisfy constraint: Member must have length %s",
		               n == 0 ? "[]" : "[...]",
		               n == 0 ? "greater than or equal to 1" : "less than or equal to 100");
	for (size_t i = 0; i < n; i++)
		if (pb->transact_items[i] == NULL || pb->transact_items[i]->get == NULL)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "1 validation error detected: Value null at "
			    "'transactItems.%zu.member.get' failed to satisfy constraint: "
			    "Member must not be null",
			    i + 1);
	return SHOAL_OK;
}

int wire_txn_get_from_pb(sh_arena *a, const Shoal__Get *pb, st_get_req *out, char *errmsg)
{
	/* A Get is checked as the GetItem it would be. */
	Shoal__GetItemRequest g = SHOAL__GET_ITEM_REQUEST__INIT;
	if (pb->table_name != NULL && pb->table_name[0] != '\0')
		WIRE_SET(&g, table_name, pb->table_name);
	g.key = pb->key;
	if (WIRE_HAS(pb, projection_expression))
		WIRE_SET(&g, projection_expression, pb->projection_expression);
	g.expression_attribute_names = pb->expression_attribute_names;
	return wire_get_req_from_pb(a, &g, out, errmsg);
}

void wire_txn_digest(const Shoal__TransactWriteItemsRequest *pb, uint8_t out[16])
{
	/* The actions and options as packed, the token itself aside (a retry
	 * carries the same token; what must match is everything else). */
	Shoal__TransactWriteItemsRequest copy = *pb;
	WIRE_CLEAR(&copy, client_request_token);
	size_t n = protobuf_c_message_get_packed_size(&copy.base);
	uint8_t small[4096];
	uint8_t *buf = n <= sizeof(small) ? small : sh_malloc(n);
	XXH128_hash_t h = {0, 0};
	if (buf != NULL) {
		protobuf_c_message_pack(&copy.base, buf);
		h = XXH3_128bits(buf, n);
	}
	if (buf != small)
		sh_free(buf); /* out of memory: a zero digest, which only a retry compares */
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(h.high64 >> (56 - 8 * i));
		out[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
	}
}

/* ------------------------------------------------------------------------ */
/* Cancellation                                                              */
/* ------------------------------------------------------------------------ */

const char *wire_cancel_code(int code)
{
	switch (code) {
	case SHOAL_OK:
		return "None";
	case SHOAL_E_CONDITION_FAILED:
		return "ConditionalCheckFailed";
	case SHOAL_E_TXN_CONFLICT:
		return "TransactionConflict";
	case SHOAL_E_COLLECTION_SIZE:
		return "ItemCollectionSizeLimitExceeded";
	case SHOAL_E_THROUGHPUT:
		return "ProvisionedThroughputExceeded";
	case SHOAL_E_REQUEST_LIMIT:
		return "ThrottlingError";
	default:
		return "ValidationError";
	}
}

int wire_txn_cancel(sh_arena *a, Shoal__Response *resp, const wire_txn_reason *reasons, uint32_t n,
                    char *errmsg)
{
	resp->status = wire_status_from_code(SHOAL_E_TXN_CANCELED);
	resp->result_case = SHOAL__RESPONSE__RESULT__NOT_SET;
	resp->item = NULL;
	resp->cancellation_reasons = sh_arena_calloc(a, n + 1, sizeof(*resp->cancellation_reasons));
	Shoal__CancellationReason *v = sh_arena_calloc(a, n + 1, sizeof(*v));
	size_t cap = 96 + 36 * (size_t)n;
	char *msg = sh_arena_alloc(a, cap);
	if (resp->cancellation_reasons == NULL || v == NULL || msg == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cancellation: out of memory");
	size_t used = (size_t)snprintf(msg, cap,
	                               "Transaction cancelled, please refer cancellation reasons "
	                               "for specific reasons [");
	for (uint32_t i = 0; i < n; i++) {
		const wire_txn_reason *r = &reasons[i];
		shoal__cancellation_reason__init(&v[i]);
		/* A code that is not a reason of its own (e.g. an internal failure
		 * of one part) is reported as the closest: ValidationError. */
		int code = r->code;
		v[i].code = (char *)wire_cancel_code(code);
		v[i].status = wire_status_from_code(code);
		if (code != SHOAL_OK && r->message != NULL)
			v[i].message = (char *)r->message;
		v[i].item = r->item;
		resp->cancellation_reasons[i] = &v[i];
		used +=
		    (size_t)snprintf(msg + used, cap - used, "%s%s", i > 0 ? ", " : "", v[i].code);
	}
	snprintf(msg + used, cap - used, "]");
	resp->n_cancellation_reasons = n;
	resp->message = msg;
	return SHOAL_OK;
}
