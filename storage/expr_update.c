/*
 * expr_update.c -- applying an UpdateExpression to an item.
 *
 * st_expr_update never touches `old`: it works on a deep copy in the
 * caller's arena, in two phases, as DynamoDB does:
 *
 *   1. every SET value is computed from the item as it was before the
 *      update (so "SET a = b, b = a" swaps): paths, :values,
 *      if_not_exists, list_append and + / - (exact, via st_num_add/sub);
 *   2. the actions are applied.  Their target paths form a tree (the parser
 *      refused overlapping and conflicting paths, so an action is always a
 *      leaf): the tree is walked together with the item, so that every
 *      index given for one list refers to the list as it was -- "REMOVE
 *      l[0], l[2]" removes the first and the third element -- and then the
 *      list is rebuilt once: elements removed, replaced, or appended when
 *      the index is past the end (in index order).
 *
 * Errors, with DynamoDB's messages:
 *   - a path in a SET value that leads nowhere: "The provided expression
 *     refers to an attribute that does not exist in the item";
 *   - + / - on a non-number, list_append on a non-list, ADD or DELETE on an
 *     attribute of another type: "An operand in the update expression has
 *     an incorrect data type";
 *   - a target whose parent does not exist or is not a map (for a name) or
 *     a list (for an index): "The document path provided in the update
 *     expression is invalid for update";
 *   - number overflow and precision, from st_num_add / st_num_sub.
 * REMOVE of an absent attribute or index, and DELETE from an absent set, do
 * nothing; ADD to an absent attribute sets it; a set emptied by DELETE is
 * removed.  Maps stay sorted (st_map_set) and sets sorted and unique (merged
 * in st_value_cmp order), so the result is normalised.
 */
#include <string.h>

#include "expr_int.h"

#define MSG_PATH    "The document path provided in the update expression is invalid for update"
#define MSG_MISSING "The provided expression refers to an attribute that does not exist in the item"
#define MSG_TYPE    "An operand in the update expression has an incorrect data type"

typedef struct upd {
	sh_arena *a;
	const st_value *base; /* the item before the update */
	char *errmsg;
} upd;

static int err(upd *u, const char *msg)
{
	return sh_errf(u->errmsg, SHOAL_E_VALIDATION, "%s", msg);
}

static int nomem(upd *u)
{
	return st_expr_nomem(u->errmsg);
}

/* ------------------------------------------------------------------------ */
/* Phase 1: SET values                                                       */
/* ------------------------------------------------------------------------ */

static int num_of(upd *u, const st_value *v, st_num *out)
{
	return st_num_parse(v->u.str.ptr, v->u.str.len, out, u->errmsg);
}

/* A number value in the arena. */
static int num_value(upd *u, const st_num *n, st_value **out)
{
	char buf[ST_NUM_MAX_TEXT];
	size_t len = st_num_format(n, buf);
	st_value *v = sh_arena_calloc(u->a, 1, sizeof(*v));
	char *s = sh_arena_strndup(u->a, buf, len);
	if (v == NULL || s == NULL)
		return nomem(u);
	v->type = ST_N;
	v->u.str.ptr = s;
	v->u.str.len = (uint32_t)len;
	*out = v;
	return SHOAL_OK;
}

static int eval_value(upd *u, const st_node *n, const st_value **out)
{
	const st_value *x, *y;
	int rc;
	switch (n->kind) {
	case N_PATH:
		if ((*out = st_expr_path_get(u->base, &n->path)) == NULL)
			return err(u, MSG_MISSING);
		return SHOAL_OK;
	case N_VALUE:
		*out = n->value;
		return SHOAL_OK;
	case N_ARITH: {
		st_num a, b, r;
		st_value *v;
		if ((rc = eval_value(u, n->args[0], &x)) != SHOAL_OK)
			return rc;
		if (x->type != ST_N)
			return err(u, MSG_TYPE);
		if ((rc = eval_value(u, n->args[1], &y)) != SHOAL_OK)
			return rc;
		if (y->type != ST_N)
			return err(u, MSG_TYPE);
		if ((rc = num_of(u, x, &a)) != SHOAL_OK || (rc = num_of(u, y, &b)) != SHOAL_OK)
			return rc;
		rc = n->op == '+' ? st_num_add(&a, &b, &r, u->errmsg)
		                  : st_num_sub(&a, &b, &r, u->errmsg);
		if (rc != SHOAL_OK || (rc = num_value(u, &r, &v)) != SHOAL_OK)
			return rc;
		*out = v;
		return SHOAL_OK;
	}
	case N_FUNC:
		if (n->op == FN_IF_NOT_EXISTS) {
			if ((*out = st_expr_path_get(u->base, &n->args[0]->path)) != NULL)
				return SHOAL_OK;
			return eval_value(u, n->args[1], out);
		}
		if (n->op == FN_LIST_APPEND) {
			if ((rc = eval_value(u, n->args[0], &x)) != SHOAL_OK)
				return rc;
			if (x->type != ST_L)
				return err(u, MSG_TYPE);
			if ((rc = eval_value(u, n->args[1], &y)) != SHOAL_OK)
				return rc;
			if (y->type != ST_L)
				return err(u, MSG_TYPE);
			uint32_t nx = x->u.list.n, ny = y->u.list.n;
			st_value *v = sh_arena_calloc(u->a, 1, sizeof(*v));
			st_value *el = sh_arena_alloc(u->a, ((size_t)nx + ny) * sizeof(*el));
			if (v == NULL || el == NULL)
				return nomem(u);
			if (nx > 0)
				memcpy(el, x->u.list.v, nx * sizeof(*el));
			if (ny > 0)
				memcpy(el + nx, y->u.list.v, ny * sizeof(*el));
			v->type = ST_L;
			v->u.list.v = el;
			v->u.list.n = nx + ny;
			*out = v;
			return SHOAL_OK;
		}
		break;
	default:
		break;
	}
	return sh_errf(u->errmsg, SHOAL_E_INTERNAL, "unexpected node in an update value");
}

/* ------------------------------------------------------------------------ */
/* Phase 2: the target tree                                                  */
/* ------------------------------------------------------------------------ */

/* Set union or difference of two sets of one type, sorted and unique. */
static int set_merge(upd *u, const st_value *x, const st_value *y, bool add, st_value *out)
{
	uint32_t nx = x->u.list.n, ny = y->u.list.n, n = 0, i = 0, j = 0;
	st_value *v = sh_arena_alloc(u->a, ((size_t)nx + ny + 1) * sizeof(*v));
	if (v == NULL)
		return nomem(u);
	while (i < nx || j < ny) {
		int c = i == nx ? 1 : j == ny ? -1 : st_value_cmp(&x->u.list.v[i], &y->u.list.v[j]);
		if (c < 0) {
			v[n++] = x->u.list.v[i++];
		} else if (c == 0) {
			if (add)
				v[n++] = x->u.list.v[i];
			i++;
			j++;
		} else {
			if (add && st_value_copy(u->a, &y->u.list.v[j], &v[n++]) != SHOAL_OK)
				return nomem(u);
			j++;
		}
	}
	out->type = x->type;
	out->u.list.v = v;
	out->u.list.n = n;
	return SHOAL_OK;
}

static bool is_set(st_type t)
{
	return t == ST_SS || t == ST_NS || t == ST_BS;
}

/*
 * The new value of a target whose current value is cur (NULL if absent):
 * *out is set and *present says whether the target has a value afterwards.
 */
static int leaf_value(upd *u, const st_ptrie *t, const st_value *cur, st_value *out, bool *present)
{
	const st_value *v = t->value;
	int rc;
	*present = true;
	switch (t->act->kind) {
	case ACT_SET:
		return st_value_copy(u->a, v, out) == SHOAL_OK ? SHOAL_OK : nomem(u);
	case ACT_REMOVE:
		*present = false;
		return SHOAL_OK;
	case ACT_ADD:
		if (cur == NULL)
			return st_value_copy(u->a, v, out) == SHOAL_OK ? SHOAL_OK : nomem(u);
		if (cur->type != v->type)
			return err(u, MSG_TYPE);
		if (v->type == ST_N) {
			st_num a, b, r;
			st_value *nv;
			if ((rc = num_of(u, cur, &a)) != SHOAL_OK ||
			    (rc = num_of(u, v, &b)) != SHOAL_OK ||
			    (rc = st_num_add(&a, &b, &r, u->errmsg)) != SHOAL_OK ||
			    (rc = num_value(u, &r, &nv)) != SHOAL_OK)
				return rc;
			*out = *nv;
			return SHOAL_OK;
		}
		if (!is_set(v->type))
			return err(u, MSG_TYPE);
		return set_merge(u, cur, v, true, out);
	default: /* ACT_DELETE */
		if (cur == NULL) {
			*present = false;
			return SHOAL_OK;
		}
		if (cur->type != v->type || !is_set(v->type))
			return err(u, MSG_TYPE);
		if ((rc = set_merge(u, cur, v, false, out)) != SHOAL_OK)
			return rc;
		*present = out->u.list.n > 0;
		return SHOAL_OK;
	}
}

static int apply(upd *u, st_value *container, st_ptrie *t);

static int apply_map(upd *u, st_value *m, st_ptrie *t)
{
	int rc;
	if (m->type != ST_M)
		return err(u, MSG_PATH);
	for (uint32_t i = 0; i < t->n; i++) {
		const st_pelem *el = t->kids[i].el;
		st_ptrie *k = t->kids[i].node;
		const st_value *cur = st_map_get(m, el->name, el->len);
		if (k->act == NULL) {
			if (cur == NULL)
				return err(u, MSG_PATH);
			/* cur is our own copy, in the arena: safe to change in place. */
			if ((rc = apply(u, (st_value *)cur, k)) != SHOAL_OK)
				return rc;
			continue;
		}
		st_value nv;
		bool present;
		if ((rc = leaf_value(u, k, cur, &nv, &present)) != SHOAL_OK)
			return rc;
		if (!present) {
			if (cur != NULL)
				st_map_remove(m, el->name, el->len);
		} else if (st_map_set(u->a, m, el->name, el->len, &nv) != SHOAL_OK) {
			return nomem(u);
		}
	}
	return SHOAL_OK;
}

static int apply_list(upd *u, st_value *l, st_ptrie *t)
{
	int rc;
	if (l->type != ST_L)
		return err(u, MSG_PATH);
	st_ptrie_sort(t);
	uint32_t old_n = l->u.list.n, n = 0, k = 0;
	st_value *v = sh_arena_alloc(u->a, ((size_t)old_n + t->n + 1) * sizeof(*v));
	if (v == NULL)
		return nomem(u);
	for (uint32_t i = 0; i < old_n; i++) {
		if (k == t->n || t->kids[k].el->index != i) {
			v[n++] = l->u.list.v[i];
			continue;
		}
		st_ptrie *kid = t->kids[k++].node;
		if (kid->act == NULL) {
			v[n] = l->u.list.v[i];
			if ((rc = apply(u, &v[n], kid)) != SHOAL_OK)
				return rc;
			n++;
			continue;
		}
		bool present;
		if ((rc = leaf_value(u, kid, &l->u.list.v[i], &v[n], &present)) != SHOAL_OK)
			return rc;
		if (present)
			n++;
	}
	for (; k < t->n; k++) { /* past the end */
		st_ptrie *kid = t->kids[k].node;
		if (kid->act == NULL)
			return err(u, MSG_PATH);
		bool present;
		if ((rc = leaf_value(u, kid, NULL, &v[n], &present)) != SHOAL_OK)
			return rc;
		if (present)
			n++;
	}
	l->u.list.v = v;
	l->u.list.n = n;
	return SHOAL_OK;
}

static int apply(upd *u, st_value *container, st_ptrie *t)
{
	return t->is_list ? apply_list(u, container, t) : apply_map(u, container, t);
}

int st_expr_update(const st_expr *e, sh_arena *a, const st_value *old, const st_value *key,
                   st_value **out, char *errmsg)
{
	upd u = {.a = a, .base = old != NULL ? old : key, .errmsg = errmsg};
	int rc;
	if (e == NULL || e->kind != ST_EXPR_UPDATE)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "st_expr_update: not an update");
	if (u.base == NULL || u.base->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "st_expr_update: no item and no key");
	st_ptrie root = {0};
	for (uint32_t i = 0; i < e->nactions; i++) {
		const st_action *act = &e->actions[i];
		st_ptrie *t = &root;
		for (uint32_t j = 0; j < act->path.n; j++)
			if ((t = st_ptrie_child(a, t, &act->path.e[j])) == NULL)
				return nomem(&u);
		t->act = act;
		if (act->kind != ACT_SET)
			t->value = act->value != NULL ? act->value->value : NULL;
		else if ((rc = eval_value(&u, act->value, &t->value)) != SHOAL_OK)
			return rc;
	}
	st_value *item = sh_arena_alloc(a, sizeof(*item));
	if (item == NULL || st_value_copy(a, u.base, item) != SHOAL_OK)
		return nomem(&u);
	if ((rc = apply(&u, item, &root)) != SHOAL_OK)
		return rc;
	*out = item;
	return SHOAL_OK;
}

int st_expr_update_project(const st_expr *update, sh_arena *a, const st_value *item, st_value **out,
                           char *errmsg)
{
	if (update == NULL || update->kind != ST_EXPR_UPDATE)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "st_expr_update_project: not an update");
	const st_path **paths = sh_arena_alloc(a, (update->nactions + 1) * sizeof(*paths));
	if (paths == NULL)
		return st_expr_nomem(errmsg);
	for (uint32_t i = 0; i < update->nactions; i++)
		paths[i] = &update->actions[i].path;
	return st_expr_project_paths(a, item, paths, update->nactions, out, errmsg);
}
