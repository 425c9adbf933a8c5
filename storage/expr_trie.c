/*
 * expr_trie.c -- the path trie shared by projections and updates (see
 * st_ptrie in expr_int.h).
 */
#include <string.h>

#include "expr_int.h"

st_ptrie *st_ptrie_child(sh_arena *a, st_ptrie *parent, const st_pelem *el)
{
	for (uint32_t i = 0; i < parent->n; i++) {
		const st_pelem *k = parent->kids[i].el;
		if (el->is_index ? k->index == el->index
		                 : (k->len == el->len && memcmp(k->name, el->name, el->len) == 0))
			return parent->kids[i].node;
	}
	if (parent->n == parent->cap) {
		uint32_t cap = parent->cap == 0 ? 4 : parent->cap * 2;
		st_ptrie_kid *nk = sh_arena_alloc(a, cap * sizeof(*nk));
		if (nk == NULL)
			return NULL;
		if (parent->n > 0)
			memcpy(nk, parent->kids, parent->n * sizeof(*nk));
		parent->kids = nk;
		parent->cap = cap;
	}
	st_ptrie *n = sh_arena_calloc(a, 1, sizeof(*n));
	if (n == NULL)
		return NULL;
	parent->is_list = el->is_index;
	parent->kids[parent->n++] = (st_ptrie_kid){.el = el, .node = n};
	return n;
}

void st_ptrie_sort(st_ptrie *list)
{
	st_ptrie_kid *k = list->kids;
	for (uint32_t i = 1; i < list->n; i++) {
		st_ptrie_kid x = k[i];
		uint32_t j = i;
		while (j > 0 && k[j - 1].el->index > x.el->index) {
			k[j] = k[j - 1];
			j--;
		}
		k[j] = x;
	}
}
