/*
 * expr_eval.c -- evaluating conditions and filters on an item.
 *
 * An operand evaluates to a value or to "absent" (NULL): a path that does
 * not lead to a value, or size() of an absent value or of a type without a
 * size (N, BOOL, NULL).  DynamoDB's rules, as its test suites pin them:
 *   - = is true only for two present operands of the same type and value
 *     (deep equality: numbers numerically, sets as sets);
 *   - <> is the negation of =, so it is true as soon as one operand is
 *     absent -- even when both are;
 *   - < <= > >= and BETWEEN compare two present operands of one type among
 *     S (UTF-8 bytes), N (numerically) and B (bytes); anything else is false;
 *   - IN is = against any of its operands;
 *   - begins_with: two S or two B, prefix; contains: a substring of an S
 *     (or B), a member of a set, an element of a list;
 *   - size(): S and B their length in bytes, sets and lists their element
 *     count, maps their attribute count.
 * The parser already refused every type error it could see without an item,
 * so evaluation itself cannot fail.  size() results are formatted into
 * buffers on the stack: evaluation allocates nothing.
 */
#include <stdio.h>
#include <string.h>

#include "expr_int.h"

const st_value *st_expr_path_get(const st_value *item, const st_path *p)
{
	const st_value *cur = item;
	for (uint32_t i = 0; i < p->n && cur != NULL; i++) {
		const st_pelem *el = &p->e[i];
		if (el->is_index)
			cur = (cur->type == ST_L && el->index < cur->u.list.n)
			          ? &cur->u.list.v[el->index]
			          : NULL;
		else
			cur = cur->type == ST_M ? st_map_get(cur, el->name, el->len) : NULL;
	}
	return cur;
}

/* Storage for one evaluated operand (size() makes a number). */
typedef struct operand {
	st_value tmp;
	char buf[24];
} operand;

static const st_value *eval_operand(const st_node *n, const st_value *item, operand *o)
{
	switch (n->kind) {
	case N_PATH:
		return st_expr_path_get(item, &n->path);
	case N_VALUE:
		return n->value;
	case N_FUNC: {
		operand inner;
		const st_value *v;
		uint64_t size;
		if (n->op != FN_SIZE || (v = eval_operand(n->args[0], item, &inner)) == NULL)
			return NULL;
		switch (v->type) {
		case ST_S:
		case ST_B:
			size = v->u.str.len;
			break;
		case ST_L:
		case ST_SS:
		case ST_NS:
		case ST_BS:
			size = v->u.list.n;
			break;
		case ST_M:
			size = v->u.map.n;
			break;
		default:
			return NULL;
		}
		int len = snprintf(o->buf, sizeof(o->buf), "%llu", (unsigned long long)size);
		o->tmp.type = ST_N;
		o->tmp.u.str.ptr = o->buf;
		o->tmp.u.str.len = (uint32_t)len;
		return &o->tmp;
	}
	default:
		return NULL;
	}
}

static bool ordered_type(st_type t)
{
	return t == ST_S || t == ST_N || t == ST_B;
}

static bool equal(const st_value *x, const st_value *y)
{
	return x != NULL && y != NULL && x->type == y->type && st_value_equal(x, y);
}

static bool compare(uint8_t op, const st_value *x, const st_value *y)
{
	if (op == CMP_NE)
		return !equal(x, y);
	if (op == CMP_EQ)
		return equal(x, y);
	if (x == NULL || y == NULL || x->type != y->type || !ordered_type(x->type))
		return false;
	int c = st_value_cmp(x, y);
	switch (op) {
	case CMP_LT:
		return c < 0;
	case CMP_LE:
		return c <= 0;
	case CMP_GT:
		return c > 0;
	default:
		return c >= 0;
	}
}

static bool begins_with(const st_value *x, const st_value *y)
{
	if (x == NULL || y == NULL || x->type != y->type || (x->type != ST_S && x->type != ST_B))
		return false;
	return x->u.str.len >= y->u.str.len &&
	       memcmp(x->u.str.ptr, y->u.str.ptr, y->u.str.len) == 0;
}

static bool contains(const st_value *x, const st_value *y)
{
	if (x == NULL || y == NULL)
		return false;
	switch (x->type) {
	case ST_S:
	case ST_B:
		if (y->type != x->type)
			return false;
		return y->u.str.len == 0 ||
		       memmem(x->u.str.ptr, x->u.str.len, y->u.str.ptr, y->u.str.len) != NULL;
	case ST_SS:
	case ST_NS:
	case ST_BS:
	case ST_L:
		for (uint32_t i = 0; i < x->u.list.n; i++)
			if (equal(&x->u.list.v[i], y))
				return true;
		return false;
	default:
		return false;
	}
}

static bool eval_cond(const st_node *n, const st_value *item)
{
	operand o[3];
	const st_value *x, *y, *z;
	switch (n->kind) {
	case N_AND:
		for (uint32_t i = 0; i < n->nargs; i++)
			if (!eval_cond(n->args[i], item))
				return false;
		return true;
	case N_OR:
		for (uint32_t i = 0; i < n->nargs; i++)
			if (eval_cond(n->args[i], item))
				return true;
		return false;
	case N_NOT:
		return !eval_cond(n->args[0], item);
	case N_CMP:
		x = eval_operand(n->args[0], item, &o[0]);
		y = eval_operand(n->args[1], item, &o[1]);
		return compare(n->op, x, y);
	case N_BETWEEN:
		x = eval_operand(n->args[0], item, &o[0]);
		y = eval_operand(n->args[1], item, &o[1]);
		z = eval_operand(n->args[2], item, &o[2]);
		return compare(CMP_GE, x, y) && compare(CMP_LE, x, z);
	case N_IN:
		x = eval_operand(n->args[0], item, &o[0]);
		if (x == NULL)
			return false;
		for (uint32_t i = 1; i < n->nargs; i++)
			if (equal(x, eval_operand(n->args[i], item, &o[1])))
				return true;
		return false;
	case N_FUNC:
		switch (n->op) {
		case FN_ATTRIBUTE_EXISTS:
			return st_expr_path_get(item, &n->args[0]->path) != NULL;
		case FN_ATTRIBUTE_NOT_EXISTS:
			return st_expr_path_get(item, &n->args[0]->path) == NULL;
		case FN_ATTRIBUTE_TYPE: {
			x = eval_operand(n->args[0], item, &o[0]);
			y = eval_operand(n->args[1], item, &o[1]);
			if (x == NULL || y == NULL || y->type != ST_S)
				return false;
			const char *tn = st_type_name(x->type);
			return strlen(tn) == y->u.str.len &&
			       memcmp(tn, y->u.str.ptr, y->u.str.len) == 0;
		}
		case FN_BEGINS_WITH:
			x = eval_operand(n->args[0], item, &o[0]);
			y = eval_operand(n->args[1], item, &o[1]);
			return begins_with(x, y);
		case FN_CONTAINS:
			x = eval_operand(n->args[0], item, &o[0]);
			y = eval_operand(n->args[1], item, &o[1]);
			return contains(x, y);
		default:
			return false;
		}
	default:
		return false;
	}
}

int st_expr_eval(const st_expr *e, const st_value *item, bool *result, char *errmsg)
{
	if (e == NULL || e->cond == NULL)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "st_expr_eval: not a condition");
	*result = eval_cond(e->cond, item);
	return SHOAL_OK;
}

static bool path_is(const st_path *p, const char *name, size_t len)
{
	return p->e[0].len == len && memcmp(p->e[0].name, name, len) == 0;
}

static bool node_refs(const st_node *n, const char *name, size_t len)
{
	if (n == NULL)
		return false;
	if (n->kind == N_PATH)
		return path_is(&n->path, name, len);
	for (uint32_t i = 0; i < n->nargs; i++)
		if (node_refs(n->args[i], name, len))
			return true;
	return false;
}

bool st_expr_refs_attr(const st_expr *e, const char *name, size_t len)
{
	if (node_refs(e->cond, name, len))
		return true;
	for (uint32_t i = 0; i < e->nactions; i++)
		if (path_is(&e->actions[i].path, name, len) ||
		    node_refs(e->actions[i].value, name, len))
			return true;
	for (uint32_t i = 0; i < e->npaths; i++)
		if (path_is(&e->paths[i], name, len))
			return true;
	return false;
}
