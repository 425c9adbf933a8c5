/*
 * wire_legacy_check.c -- DynamoDB's checks of legacy parameters that come
 * before what any of them means, in DynamoDB's order:
 *   1. shapes: a JSON type that does not fit the parameter is a
 *      SerializationException in Coral's words, at once (returned);
 *   2. parameter constraints: ComparisonOperator, Action and
 *      ConditionalOperator enums, a Condition's ComparisonOperator not null,
 *      AttributesToGet's length and null members -- collected, "N
 *      validation errors detected: ...", with DynamoDB's paths
 *      ("scanFilter.a.member.comparisonOperator", under
 *      "requestItems.<table>.member." in BatchGetItem);
 *   3. expression and non-expression parameters together, then
 *      ExpressionAttributeNames / Values with no expression to use them;
 *   4. ConditionalOperator without the map it combines, or with fewer than
 *      two conditions in it.
 * Stages 2 to 4 record their first failure (wire_lg_invalid) and set
 * g->failed; wire_legacy.c then leaves the body untranslated.
 */
#include <stdio.h>
#include <string.h>

#include "proto/wire_legacy_int.h"

#define D(x) &shoal__##x##__descriptor

/* The enums, in the order DynamoDB lists them in its messages. */
#define CMP_NAME(name, min, max, types, key, kind, text) name,
static const char *const cmp_set[] = {WIRE_LG_CMP_OPS(CMP_NAME) NULL};
#undef CMP_NAME
static const char *const condop_set[] = {"OR", "AND", NULL};
static const char *const action_set[] = {"ADD", "PUT", "DELETE", NULL};

static int ser(wire_lg *g, const char *fmt, const char *arg)
{
	return sh_errf(g->c->errmsg, SHOAL_E_SERIALIZATION, fmt, arg);
}

/* "parent.<fmt>" as DynamoDB's constraint paths spell it (cut at size). */
static void path_of(wire_lg *g, char *buf, size_t size, const char *fmt, const char *a,
                    const char *b)
{
	size_t n = 0;
	if (g->c->path[0] != '\0' && (size_t)snprintf(buf, size, "%s.", g->c->path) < size)
		n = strlen(buf);
	if (snprintf(buf + n, size - n, fmt, a, b) >= (int)(size - n))
		buf[size - 1] = '\0';
}

/* ---- 1. shapes ---------------------------------------------------------- */

static int check_string(wire_lg *g, const json_t *j)
{
	return json_is_string(j) ? SHOAL_OK : wire_api_mismatch(g->c, j, "String");
}

/* A map parameter: a JSON object of objects. */
static int check_map(wire_lg *g, const json_t *j, const char *java)
{
	if (json_is_array(j))
		return ser(g, "Unrecognized collection type java.util.Map<java.lang.String, %s>",
		           java);
	if (!json_is_object(j))
		return ser(g, "%sUnexpected field type", "");
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)j, k, v)
	{
		if (json_is_null(v))
			continue;
		int rc = wire_api_object_check(g->c, v);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int check_value_shape(wire_lg *g, const json_t *j)
{
	st_value v;
	bool ok;
	return wire_lg_value_of(g, j, true, &v, &ok);
}

static int check_value_list(wire_lg *g, const json_t *j)
{
	int rc = wire_api_array_check(g->c, j);
	size_t i;
	json_t *v;
	json_array_foreach(j, i, v)
	{
		if (rc == SHOAL_OK && !json_is_null(v))
			rc = check_value_shape(g, v);
	}
	return rc;
}

/* Expected, AttributeUpdates, Conditions: each entry's members. */
static int check_entries(wire_lg *g, const json_t *map, unsigned bit)
{
	const char *k;
	json_t *e;
	json_object_foreach((json_t *)map, k, e)
	{
		if (json_is_null(e))
			continue;
		json_t *v;
		int rc = SHOAL_OK;
		protobuf_c_boolean b;
		if (rc == SHOAL_OK && (v = wire_lg_member(e, "ComparisonOperator")) != NULL &&
		    bit != WIRE_LG_UPDATES)
			rc = check_string(g, v);
		if (rc == SHOAL_OK && (v = wire_lg_member(e, "AttributeValueList")) != NULL &&
		    bit != WIRE_LG_UPDATES)
			rc = check_value_list(g, v);
		if (rc == SHOAL_OK && (v = wire_lg_member(e, "Value")) != NULL &&
		    (bit == WIRE_LG_EXPECTED || bit == WIRE_LG_UPDATES))
			rc = check_value_shape(g, v);
		if (rc == SHOAL_OK && (v = wire_lg_member(e, "Exists")) != NULL &&
		    bit == WIRE_LG_EXPECTED)
			rc = wire_api_bool_from_json(g->c, v, &b);
		if (rc == SHOAL_OK && (v = wire_lg_member(e, "Action")) != NULL &&
		    bit == WIRE_LG_UPDATES)
			rc = check_string(g, v);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

int wire_lg_check_shapes(wire_lg *g)
{
	json_t *v;
	int rc = SHOAL_OK;
	if ((v = wire_lg_member(g->in, "AttributesToGet")) != NULL && g->present & WIRE_LG_ATG) {
		rc = wire_api_array_check(g->c, v);
		size_t i;
		json_t *s;
		json_array_foreach(v, i, s)
		{
			if (rc == SHOAL_OK && !json_is_null(s))
				rc = check_string(g, s);
		}
	}
	if (rc == SHOAL_OK && g->present & WIRE_LG_CONDOP)
		rc = check_string(g, wire_lg_member(g->in, "ConditionalOperator"));
	for (const wire_lg_param *p = wire_lg_params; rc == SHOAL_OK && p->name != NULL; p++) {
		if (p->java == NULL || !(g->present & p->bit))
			continue;
		v = wire_lg_member(g->in, p->name);
		rc = check_map(g, v, p->java);
		if (rc == SHOAL_OK)
			rc = check_entries(g, v, p->bit);
	}
	return rc;
}

/* ---- 2. parameter constraints -------------------------------------------- */

static void lower_first(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s);
	if (dst[0] >= 'A' && dst[0] <= 'Z')
		dst[0] = (char)(dst[0] - 'A' + 'a');
}

/* "[a, b]", as DynamoDB prints a list in a constraint message. */
static void list_text(const json_t *list, char *buf, size_t size)
{
	size_t k = 0;
	size_t i;
	json_t *s;
	k += (size_t)snprintf(buf, size, "[");
	json_array_foreach(list, i, s)
	{
		if (k >= size)
			break;
		k += (size_t)snprintf(buf + k, size - k, "%s%s", i > 0 ? ", " : "",
		                      json_is_string(s) ? json_string_value(s) : "null");
	}
	if (k < size)
		snprintf(buf + k, size - k, "]");
}

void wire_lg_check_constraints(wire_lg *g)
{
	wire_verrs e = {0};
	char path[WIRE_API_PATH_MAX + 64];
	json_t *v;
	if ((v = wire_lg_member(g->in, "AttributesToGet")) != NULL) {
		size_t n = json_array_size(v);
		size_t i;
		json_t *s;
		json_array_foreach(v, i, s)
		{
			if (json_is_null(s)) {
				char idx[32];
				snprintf(idx, sizeof(idx), "%zu", i + 1);
				path_of(g, path, sizeof(path), "attributesToGet.%s.member%s", idx,
				        "");
				wire_check_present(&e, path, false);
			}
		}
		if (n < 1 || n > 255) {
			char text[512];
			list_text(v, text, sizeof(text));
			path_of(g, path, sizeof(path), "attributesToGet%s%s", "", "");
			wire_verr_add(&e, text, path, "Member must have length %s to %d",
			              n < 1 ? "greater than or equal" : "less than or equal",
			              n < 1 ? 1 : 255);
		}
	}
	for (const wire_lg_param *m = wire_lg_params; m->name != NULL; m++) {
		if (m->java == NULL || !(g->present & m->bit))
			continue;
		char pname[32];
		lower_first(pname, sizeof(pname), m->name);
		const char *k;
		json_t *c;
		json_object_foreach(wire_lg_member(g->in, m->name), k, c)
		{
			char base[64 + 16];
			snprintf(base, sizeof(base), "%s.%%s.member%%s", pname);
			if (json_is_null(c)) {
				path_of(g, path, sizeof(path), base, k, "");
				wire_check_present(&e, path, false);
				continue;
			}
			if (m->bit == WIRE_LG_UPDATES) {
				path_of(g, path, sizeof(path), base, k, ".action");
				wire_check_enum(&e, path,
				                json_string_value(wire_lg_member(c, "Action")),
				                action_set);
				continue;
			}
			path_of(g, path, sizeof(path), base, k, ".comparisonOperator");
			const json_t *op = wire_lg_member(c, "ComparisonOperator");
			if (op == NULL && m->bit != WIRE_LG_EXPECTED)
				wire_check_present(&e, path, false);
			else
				wire_check_enum(&e, path, json_string_value(op), cmp_set);
		}
	}
	if ((v = wire_lg_member(g->in, "ConditionalOperator")) != NULL) {
		path_of(g, path, sizeof(path), "conditionalOperator%s%s", "", "");
		wire_check_enum(&e, path, json_string_value(v), condop_set);
	}
	char msg[SH_ERRMSG_SIZE];
	if (wire_verr_done(&e, msg) != SHOAL_OK)
		wire_lg_invalid(g, "%s", msg);
}

/* ---- 3. expression and non-expression parameters ---------------------------- */

void wire_lg_check_mixing(wire_lg *g)
{
	const wire_lg_op *op = g->op;
	char exprs[256] = "", non[256] = "";
	bool any_expr = false, any_val_expr = false;
	for (const char *const *e = op->expr; *e != NULL; e++) {
		if (wire_lg_member(g->in, *e) == NULL)
			continue;
		any_expr = true;
		any_val_expr |= strcmp(*e, "ProjectionExpression") != 0;
		snprintf(exprs + strlen(exprs), sizeof(exprs) - strlen(exprs), "%s%s",
		         exprs[0] != '\0' ? ", " : "", *e);
	}
	if (any_expr) {
		/* KeyConditions may come with a FilterExpression or a
		 * ProjectionExpression, only not with KeyConditionExpression. */
		bool kce = wire_lg_member(g->in, "KeyConditionExpression") != NULL;
		for (const char *const *n = op->nonexpr; *n != NULL; n++) {
			if (!(g->present & wire_lg_param_bit(*n)))
				continue;
			if (strcmp(*n, "KeyConditions") == 0 && !kce)
				continue;
			snprintf(non + strlen(non), sizeof(non) - strlen(non), "%s%s",
			         non[0] != '\0' ? ", " : "", *n);
		}
		if (non[0] != '\0') {
			wire_lg_invalid(
			    g,
			    "Can not use both expression and non-expression parameters in the "
			    "same request: Non-expression parameters: {%s} Expression "
			    "parameters: {%s}",
			    non, exprs);
			return;
		}
	}
	/* The expressions that take values: "FilterExpression and
	 * KeyConditionExpression" (none for GetItem). */
	char val_exprs[256] = "";
	unsigned nval = 0;
	for (const char *const *e = op->expr; *e != NULL; e++) {
		if (strcmp(*e, "ProjectionExpression") == 0)
			continue;
		snprintf(val_exprs + strlen(val_exprs), sizeof(val_exprs) - strlen(val_exprs),
		         "%s%s", nval++ > 0 ? " and " : "", *e);
	}
	char msg[SH_ERRMSG_SIZE];
	if (wire_check_expr_params(wire_lg_member(g->in, "ExpressionAttributeNames") != NULL,
	                           wire_lg_member(g->in, "ExpressionAttributeValues") != NULL,
	                           any_expr, any_val_expr, nval > 0 ? val_exprs : NULL, nval > 1,
	                           msg) != SHOAL_OK)
		wire_lg_invalid(g, "%s", msg);
}

/* The map ConditionalOperator combines for this operation. */
static const char *condop_target(const wire_lg *g)
{
	if (g->op->desc == D(query_request))
		return "QueryFilter";
	if (g->op->desc == D(scan_request))
		return "ScanFilter";
	return "Expected";
}

void wire_lg_check_condop(wire_lg *g)
{
	if (!(g->present & WIRE_LG_CONDOP))
		return;
	json_t *map = wire_lg_member(g->in, condop_target(g));
	if (map == NULL)
		wire_lg_invalid(g, "ConditionalOperator cannot be used without Filter or Expected");
	else if (json_object_size(map) <= 1)
		wire_lg_invalid(
		    g, "ConditionalOperator can only be used when Filter or Expected has two or "
		       "more elements");
}
