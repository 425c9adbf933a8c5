/*
 * expr_ctx.c -- expression contexts: the ExpressionAttributeNames and
 * ExpressionAttributeValues shared by the expressions of one request.
 *
 * st_expr_ctx_init validates the maps themselves (DynamoDB's messages: a map
 * given empty, a key that is not "#" or ":" followed by [A-Za-z0-9_]+, a name
 * that maps to nothing) and allocates one "used" flag per entry in the
 * arena.  The checks of st_expr_parse (expr_check.c) set a flag whenever
 * they resolve a placeholder, and st_expr_ctx_check_unused reports the
 * entries no expression used: names first, then values, each as one list in
 * map order.
 */
#include <stdio.h>
#include <string.h>

#include "expr_int.h"

const char *st_expr_kind_name(st_expr_kind kind)
{
	switch (kind) {
	case ST_EXPR_CONDITION:
		return "ConditionExpression";
	case ST_EXPR_FILTER:
		return "FilterExpression";
	case ST_EXPR_KEY_CONDITION:
		return "KeyConditionExpression";
	case ST_EXPR_UPDATE:
		return "UpdateExpression";
	case ST_EXPR_PROJECTION:
		return "ProjectionExpression";
	}
	return "Expression";
}

int st_expr_nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
}

static bool valid_key(const st_attr *at, char sigil)
{
	if (at->name_len < 2 || at->name[0] != sigil)
		return false;
	for (uint32_t i = 1; i < at->name_len; i++) {
		char c = at->name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

int st_expr_ctx_init(st_expr_ctx *ctx, sh_arena *a, const st_expr_attrs *attrs, char *errmsg)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->arena = a;
	if (attrs == NULL)
		return SHOAL_OK;
	const st_value *names = attrs->names, *values = attrs->values;
	if (names != NULL) {
		if (names->type != ST_M || names->u.map.n == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "ExpressionAttributeNames must not be empty");
		for (uint32_t i = 0; i < names->u.map.n; i++) {
			const st_attr *at = &names->u.map.a[i];
			if (!valid_key(at, '#'))
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "ExpressionAttributeNames contains invalid key: Syntax "
				    "error; key: \"%.*s\"",
				    (int)at->name_len, at->name);
			if (at->value.type != ST_S || at->value.u.str.len == 0)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "ExpressionAttributeNames contains invalid value: Empty "
				    "attribute name for key %.*s",
				    (int)at->name_len, at->name);
		}
		ctx->names_used = sh_arena_calloc(a, names->u.map.n, 1);
		if (ctx->names_used == NULL)
			return st_expr_nomem(errmsg);
		ctx->names = names;
	}
	if (values != NULL) {
		if (values->type != ST_M || values->u.map.n == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "ExpressionAttributeValues must not be empty");
		for (uint32_t i = 0; i < values->u.map.n; i++) {
			const st_attr *at = &values->u.map.a[i];
			if (!valid_key(at, ':'))
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "ExpressionAttributeValues contains invalid key: Syntax "
				    "error; key: \"%.*s\"",
				    (int)at->name_len, at->name);
		}
		ctx->values_used = sh_arena_calloc(a, values->u.map.n, 1);
		if (ctx->values_used == NULL)
			return st_expr_nomem(errmsg);
		ctx->values = values;
	}
	return SHOAL_OK;
}

/* "Value provided in ExpressionAttribute<what> unused in expressions: keys: {#a, #b}" */
static int report_unused(const st_value *m, const uint8_t *used, const char *what, char *errmsg)
{
	char keys[SH_ERRMSG_SIZE];
	size_t off = 0;
	bool any = false;
	keys[0] = '\0';
	for (uint32_t i = 0; i < m->u.map.n; i++) {
		if (used[i])
			continue;
		const st_attr *at = &m->u.map.a[i];
		if (off < sizeof(keys)) {
			int w = snprintf(keys + off, sizeof(keys) - off, "%s%.*s", any ? ", " : "",
			                 (int)at->name_len, at->name);
			off += w > 0 ? (size_t)w : 0;
		}
		any = true;
	}
	if (!any)
		return SHOAL_OK;
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "Value provided in ExpressionAttribute%s unused in expressions: keys: {%s}",
	               what, keys);
}

int st_expr_ctx_check_unused(const st_expr_ctx *ctx, char *errmsg)
{
	int rc;
	if (ctx->names != NULL &&
	    (rc = report_unused(ctx->names, ctx->names_used, "Names", errmsg)) != SHOAL_OK)
		return rc;
	if (ctx->values != NULL &&
	    (rc = report_unused(ctx->values, ctx->values_used, "Values", errmsg)) != SHOAL_OK)
		return rc;
	return SHOAL_OK;
}
