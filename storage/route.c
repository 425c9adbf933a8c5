/*
 * route.c -- placing a request on a partition (storage/route.h).
 *
 * A router must know a request's partition-key value before it can pick the
 * storage group, and for a Query that value sits inside the
 * KeyConditionExpression.  st_query_partition_key therefore replays, step by
 * step, what st_query (read_query.c) checks before it opens the table --
 * Select, the rules on ExpressionAttributeNames/Values, the three
 * expressions, unused placeholders, the ExclusiveStartKey's values -- and then
 * matches the key condition against the key schema, so the first error it
 * meets is the one the node would have answered.  Whatever passes here is
 * checked again by the node; nothing here touches LMDB.
 *
 * st_route_key is st_key_check (keycheck.c) under a public name.
 */
#include <string.h>

#include "read.h"
#include "route.h"

int st_route_key(const st_key_schema *ks, const st_value *key, bool item, const st_value **pk,
                 const st_value **sk, char *errmsg)
{
	const st_value *sk_local;
	if (key == NULL || key->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provided key element does not match the schema");
	return st_key_check(ks, key, item ? ST_KEYCHECK_ITEM : ST_KEYCHECK_KEY, pk,
	                    sk != NULL ? sk : &sk_local, errmsg);
}

/* As read_query.c's attrs_presence, for a Query. */
static int query_attrs_presence(const st_query_req *req, char *errmsg)
{
	bool any_expr =
	    req->key_condition != NULL || req->filter != NULL || req->projection != NULL;
	bool value_expr = req->key_condition != NULL || req->filter != NULL;
	if (req->attrs.names != NULL && !any_expr)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "ExpressionAttributeNames can only be specified when using expressions");
	if (req->attrs.values != NULL && !value_expr)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeValues can only be specified when using "
		               "expressions: FilterExpression and KeyConditionExpression are null");
	return SHOAL_OK;
}

int st_query_partition_key(const st_query_req *req, const st_key_schema *ks, sh_arena *a,
                           const st_value **pk, char *errmsg)
{
	*pk = NULL;
	if (req->table == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	int rc = st_read_select_check(req->select, req->projection != NULL, req->index != NULL,
	                              true, errmsg);
	if (rc == SHOAL_OK)
		rc = query_attrs_presence(req, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (req->key_condition == NULL)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "Either the KeyConditions or KeyConditionExpression parameter must be "
		    "specified in the request.");
	st_expr_ctx ctx;
	st_expr *kc_expr = NULL, *filter = NULL, *proj = NULL;
	rc = st_expr_attrs_prepare(&ctx, a, &req->attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_parse(&ctx, ST_EXPR_KEY_CONDITION, req->key_condition, &kc_expr,
		                   errmsg);
	if (rc == SHOAL_OK && req->filter != NULL)
		rc = st_expr_parse(&ctx, ST_EXPR_FILTER, req->filter, &filter, errmsg);
	if (rc == SHOAL_OK && req->projection != NULL)
		rc = st_expr_parse(&ctx, ST_EXPR_PROJECTION, req->projection, &proj, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK) {
		st_value *esk;
		rc = st_read_start_key(a, req->exclusive_start_key, &esk, errmsg);
	}
	if (rc != SHOAL_OK)
		return rc;
	st_key_cond kc;
	rc = st_expr_key_condition(kc_expr, ks, &kc, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*pk = kc.hash;
	return SHOAL_OK;
}
