/*
 * expr_project.c -- ProjectionExpression, and the nested projection that
 * UPDATED_OLD / UPDATED_NEW also use.
 *
 * DynamoDB returns a projected path inside the structure that leads to it:
 * projecting "a.b[2].c" from an item yields {a: {b: [{c: ...}]}}.  Elements
 * of one list selected by index come back compacted, in index order
 * ("l[3], l[1]" gives [l[1], l[3]]), and paths that lead nowhere are left
 * out.  The builder first gathers the present paths into a small tree of
 * st_ptrie nodes (expr_int.h),
 * then turns the tree into st_values, deep-copying the selected values into
 * the caller's arena.  The parser has refused overlapping and conflicting
 * paths, so a node is a leaf or has children, never both, and its children
 * are all names or all indexes.
 */
#include <string.h>

#include "expr_int.h"

static int build(sh_arena *a, st_ptrie *n, st_value *out)
{
	int rc;
	if (n->value != NULL)
		return st_value_copy(a, n->value, out);
	if (n->is_list) {
		st_ptrie_sort(n);
		st_value *v = sh_arena_calloc(a, n->n, sizeof(*v));
		if (v == NULL)
			return SHOAL_E_NOMEM;
		for (uint32_t i = 0; i < n->n; i++)
			if ((rc = build(a, n->kids[i].node, &v[i])) != SHOAL_OK)
				return rc;
		out->type = ST_L;
		out->u.list.v = v;
		out->u.list.n = n->n;
		return SHOAL_OK;
	}
	st_value *m = st_new_map(a, n->n);
	if (m == NULL)
		return SHOAL_E_NOMEM;
	for (uint32_t i = 0; i < n->n; i++) {
		st_value v;
		const st_pelem *el = n->kids[i].el;
		if ((rc = build(a, n->kids[i].node, &v)) != SHOAL_OK ||
		    (rc = st_map_set(a, m, el->name, el->len, &v)) != SHOAL_OK)
			return rc;
	}
	*out = *m;
	return SHOAL_OK;
}

int st_expr_project_paths(sh_arena *a, const st_value *item, const st_path *const *paths,
                          uint32_t n, st_value **out, char *errmsg)
{
	st_ptrie root = {0};
	for (uint32_t i = 0; i < n; i++) {
		const st_path *p = paths[i];
		const st_value *v = item != NULL ? st_expr_path_get(item, p) : NULL;
		if (v == NULL)
			continue;
		st_ptrie *cur = &root;
		for (uint32_t j = 0; j < p->n; j++)
			if ((cur = st_ptrie_child(a, cur, &p->e[j])) == NULL)
				return st_expr_nomem(errmsg);
		cur->value = v;
	}
	st_value *m = sh_arena_alloc(a, sizeof(*m));
	if (m == NULL || build(a, &root, m) != SHOAL_OK)
		return st_expr_nomem(errmsg);
	*out = m;
	return SHOAL_OK;
}

int st_expr_project(const st_expr *proj, sh_arena *a, const st_value *item, st_value **out,
                    char *errmsg)
{
	if (proj == NULL || proj->kind != ST_EXPR_PROJECTION)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "st_expr_project: not a projection");
	const st_path **paths = sh_arena_alloc(a, (proj->npaths + 1) * sizeof(*paths));
	if (paths == NULL)
		return st_expr_nomem(errmsg);
	for (uint32_t i = 0; i < proj->npaths; i++)
		paths[i] = &proj->paths[i];
	return st_expr_project_paths(a, item, paths, proj->npaths, out, errmsg);
}
