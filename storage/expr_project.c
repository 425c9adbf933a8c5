/*
 * expr_project.c -- ProjectionExpression, and the nested projection that
 * UPDATED_OLD / UPDATED_NEW also use.
 *
 * DynamoDB returns a projected path inside the structure that leads to it:
 * projecting "a.b[2].c" from an item yields {a: {b: [{c: ...}]}}.  Elements
 * of one list selected by index come back compacted, in index order
 * ("l[3], l[1]" gives [l[1], l[3]]), and paths that lead nowhere are left
 * out.  The builder first gathers the present paths into a small tree of
 * pnodes (one per map or list on the way, children in first-seen order),
 * then turns the tree into st_values, deep-copying the selected values into
 * the caller's arena.  The parser has refused overlapping and conflicting
 * paths, so a node is a leaf or has children, never both, and its children
 * are all names or all indexes.
 */
#include <string.h>

#include "expr_int.h"

typedef struct pnode pnode;

typedef struct pchild {
	const st_pelem *el;
	pnode *node;
} pchild;

struct pnode {
	const st_value *value; /* a leaf: the value selected */
	bool is_list;
	pchild *kids;
	uint32_t n, cap;
};

static pnode *child(sh_arena *a, pnode *parent, const st_pelem *el)
{
	for (uint32_t i = 0; i < parent->n; i++) {
		const st_pelem *k = parent->kids[i].el;
		if (el->is_index ? k->index == el->index
		                 : (k->len == el->len && memcmp(k->name, el->name, el->len) == 0))
			return parent->kids[i].node;
	}
	if (parent->n == parent->cap) {
		uint32_t cap = parent->cap == 0 ? 4 : parent->cap * 2;
		pchild *nk = sh_arena_alloc(a, cap * sizeof(*nk));
		if (nk == NULL)
			return NULL;
		if (parent->n > 0)
			memcpy(nk, parent->kids, parent->n * sizeof(*nk));
		parent->kids = nk;
		parent->cap = cap;
	}
	pnode *n = sh_arena_calloc(a, 1, sizeof(*n));
	if (n == NULL)
		return NULL;
	parent->is_list = el->is_index;
	parent->kids[parent->n++] = (pchild){.el = el, .node = n};
	return n;
}

/* Insertion sort by index (libc's qsort may call malloc behind the
 * allocator's back; a list here has at most a few hundred selected
 * elements, bounded by the expression's 4 KB). */
static void sort_by_index(pchild *k, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		pchild x = k[i];
		uint32_t j = i;
		while (j > 0 && k[j - 1].el->index > x.el->index) {
			k[j] = k[j - 1];
			j--;
		}
		k[j] = x;
	}
}

static int build(sh_arena *a, pnode *n, st_value *out)
{
	int rc;
	if (n->value != NULL)
		return st_value_copy(a, n->value, out);
	if (n->is_list) {
		sort_by_index(n->kids, n->n);
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
	pnode root = {0};
	for (uint32_t i = 0; i < n; i++) {
		const st_path *p = paths[i];
		const st_value *v = item != NULL ? st_expr_path_get(item, p) : NULL;
		if (v == NULL)
			continue;
		pnode *cur = &root;
		for (uint32_t j = 0; j < p->n; j++)
			if ((cur = child(a, cur, &p->e[j])) == NULL)
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
