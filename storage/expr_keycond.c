/*
 * expr_keycond.c -- KeyConditionExpression: its shape, and its match with a
 * key schema.
 *
 * A key condition is parsed as a condition (same grammar, same checks), then
 * st_expr_check_key_condition walks it the way DynamoDB does, pre-order, and
 * refuses what a Query cannot use: OR, NOT, IN, <>, the functions other
 * than begins_with, size() anywhere, nested paths, two attributes in one
 * condition, two conditions on one attribute.  What remains is at most two
 * conditions "attribute op value" (flipped when written "value op
 * attribute"), kept in e->kc.
 *
 * st_expr_key_condition then checks them against the key schema of the table
 * or index being queried, in DynamoDB's order (hash key first, then sort
 * key), and hands them out as an st_key_cond.
 */
#include <string.h>

#include "expr_int.h"

static int kc_err(char *errmsg, const char *msg)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", msg);
}

static int kc_walk(st_expr *e, const st_node *n, char *errmsg)
{
	const char *t = st_expr_tok_text(e, n->tok);
	int tl = (int)e->toks[n->tok].len;
	int rc;
	switch (n->kind) {
	case N_OR:
		return kc_err(errmsg, "Invalid operator used in KeyConditionExpression: OR");
	case N_NOT:
		return kc_err(errmsg, "Invalid operator used in KeyConditionExpression: NOT");
	case N_IN:
		return kc_err(errmsg, "Invalid operator used in KeyConditionExpression: IN");
	case N_CMP:
		if (n->op == CMP_NE)
			return kc_err(errmsg,
			              "Invalid operator used in KeyConditionExpression: <>");
		break;
	case N_FUNC:
		if (n->op == FN_SIZE)
			return kc_err(errmsg,
			              "KeyConditionExpressions cannot contain nested operations");
		if (n->op != FN_BEGINS_WITH)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Invalid operator used in KeyConditionExpression: %.*s", tl,
			               t);
		if (n->args[0]->kind != N_PATH)
			return kc_err(errmsg,
			              "Invalid condition in KeyConditionExpression: begins_with "
			              "operator must have the key attribute as its first operand");
		break;
	case N_BETWEEN:
		if (n->args[0]->kind != N_PATH)
			return kc_err(errmsg,
			              "Invalid condition in KeyConditionExpression: BETWEEN "
			              "operator must have the key attribute as its first operand");
		break;
	default:
		break;
	}
	const st_path *attr = NULL;
	uint32_t attr_ix = 0;
	for (uint32_t i = 0; i < n->nargs; i++) {
		const st_node *a = n->args[i];
		if (a->kind == N_PATH) {
			if (attr != NULL)
				return kc_err(errmsg,
				              "Invalid condition in KeyConditionExpression: "
				              "Multiple attribute names used in one condition");
			if (a->path.n > 1)
				return kc_err(errmsg,
				              "KeyConditionExpressions cannot have conditions on "
				              "nested attributes");
			attr = &a->path;
			attr_ix = i;
		} else if (a->kind != N_VALUE && (rc = kc_walk(e, a, errmsg)) != SHOAL_OK) {
			return rc;
		}
	}
	if (n->kind == N_AND)
		return SHOAL_OK;
	if (attr == NULL)
		return kc_err(
		    errmsg,
		    "Invalid condition in KeyConditionExpression: No key attribute specified");
	for (uint32_t i = 0; i < e->nkc; i++)
		if (e->kc[i].len == attr->e[0].len &&
		    memcmp(e->kc[i].name, attr->e[0].name, attr->e[0].len) == 0)
			return kc_err(
			    errmsg,
			    "KeyConditionExpressions must only contain one condition per key");
	if (e->nkc == 2)
		return kc_err(errmsg, "Conditions can be of length 1 or 2 only");
	st_kc_term *k = &e->kc[e->nkc++];
	k->name = attr->e[0].name;
	k->len = attr->e[0].len;
	if (n->kind == N_BETWEEN) {
		k->op = ST_KC_BETWEEN;
		k->v[0] = n->args[1]->value;
		k->v[1] = n->args[2]->value;
	} else if (n->kind == N_FUNC) {
		k->op = ST_KC_BEGINS_WITH;
		k->v[0] = n->args[1]->value;
	} else {
		/* "value op key" is "key op' value" with op' the mirror of op. */
		static const st_kc_op ops[] = {[CMP_EQ] = ST_KC_EQ,
		                               [CMP_LT] = ST_KC_LT,
		                               [CMP_LE] = ST_KC_LE,
		                               [CMP_GT] = ST_KC_GT,
		                               [CMP_GE] = ST_KC_GE};
		static const st_kc_op mirror[] = {[CMP_EQ] = ST_KC_EQ,
		                                  [CMP_LT] = ST_KC_GT,
		                                  [CMP_LE] = ST_KC_GE,
		                                  [CMP_GT] = ST_KC_LT,
		                                  [CMP_GE] = ST_KC_LE};
		k->op = attr_ix == 0 ? ops[n->op] : mirror[n->op];
		k->v[0] = n->args[1 - attr_ix]->value;
	}
	return SHOAL_OK;
}

int st_expr_check_key_condition(st_expr *e, char *errmsg)
{
	e->nkc = 0;
	return kc_walk(e, e->cond, errmsg);
}

static const st_kc_term *find_term(const st_expr *e, const char *name)
{
	size_t len = strlen(name);
	for (uint32_t i = 0; i < e->nkc; i++)
		if (e->kc[i].len == len && memcmp(e->kc[i].name, name, len) == 0)
			return &e->kc[i];
	return NULL;
}

static bool types_match(const st_kc_term *t, st_type type)
{
	if (t->v[0]->type != type)
		return false;
	return t->op != ST_KC_BETWEEN || t->v[1]->type == type;
}

#define MSG_NOT_SUPPORTED "Query key condition not supported"
#define MSG_TYPE                                                                                   \
	"One or more parameter values were invalid: Condition parameter type does not match "      \
	"schema type"

int st_expr_key_condition(const st_expr *e, const st_key_schema *ks, st_key_cond *out, char *errmsg)
{
	if (e == NULL || e->kind != ST_EXPR_KEY_CONDITION)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "not a KeyConditionExpression");
	memset(out, 0, sizeof(*out));
	if (ks->range.name == NULL && e->nkc > 1)
		return kc_err(errmsg, MSG_NOT_SUPPORTED);
	const st_kc_term *h = find_term(e, ks->hash.name);
	if (h == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Query condition missed key schema element: %s", ks->hash.name);
	if (!types_match(h, ks->hash.type))
		return kc_err(errmsg, MSG_TYPE);
	if (h->op != ST_KC_EQ)
		return kc_err(errmsg, MSG_NOT_SUPPORTED);
	out->hash = h->v[0];
	out->op = ST_KC_NONE;
	if (ks->range.name == NULL)
		return SHOAL_OK;
	const st_kc_term *r = find_term(e, ks->range.name);
	if (r == NULL) {
		if (e->nkc > 1)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Query condition missed key schema element: %s",
			               ks->range.name);
		return SHOAL_OK;
	}
	if (!types_match(r, ks->range.type))
		return kc_err(errmsg, MSG_TYPE);
	out->op = r->op;
	out->lo = r->v[0];
	out->hi = r->op == ST_KC_BETWEEN ? r->v[1] : NULL;
	return SHOAL_OK;
}
