/*
 * wire_metrics.c -- ReturnItemCollectionMetrics: the ItemCollectionMetrics
 * of a write result, and the per-table lists of BatchWriteItem and
 * TransactWriteItems (contract in wire.h).
 *
 * The storage engine already knows each write's item collection size (the
 * counter behind the 10 GB limit, storage/index_write.c); this file only
 * turns it into DynamoDB's shape, and only when the request asked for SIZE.
 */
#include <math.h>
#include <string.h>

#include "proto/wire_int.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

bool wire_ricm_parse(const char *s)
{
	return s != NULL && strcmp(s, "SIZE") == 0;
}

void wire_icm_range(uint64_t bytes, double range[2])
{
	range[0] = floor((double)bytes / GIB);
	range[1] = range[0] + 1;
}

int wire_icm_new(sh_arena *a, const st_write_result *res, Shoal__ItemCollectionMetrics **out,
                 char *errmsg)
{
	*out = NULL;
	if (res->coll_attr == NULL || res->coll_pk == NULL)
		return SHOAL_OK;
	Shoal__ItemCollectionMetrics *m = sh_arena_alloc(a, sizeof(*m));
	Shoal__Item *key = sh_arena_alloc(a, sizeof(*key));
	Shoal__Attribute *attr = sh_arena_alloc(a, sizeof(*attr));
	Shoal__Attribute **attrs = sh_arena_alloc(a, sizeof(*attrs));
	double *range = sh_arena_alloc(a, 2 * sizeof(*range));
	if (m == NULL || key == NULL || attr == NULL || attrs == NULL || range == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "item collection metrics: out of memory");
	shoal__item_collection_metrics__init(m);
	shoal__item__init(key);
	shoal__attribute__init(attr);
	attr->name.data = (uint8_t *)res->coll_attr;
	attr->name.len = strlen(res->coll_attr);
	int rc = wire_value_to_pb(a, res->coll_pk, &attr->value, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	attrs[0] = attr;
	key->attrs = attrs;
	key->n_attrs = 1;
	wire_icm_range(res->coll_size, range);
	m->item_collection_key = key;
	m->size_estimate_range_gb = range;
	m->n_size_estimate_range_gb = 2;
	*out = m;
	return SHOAL_OK;
}

static bool same_key(const Shoal__Item *x, const Shoal__Item *y)
{
	if (x == NULL || y == NULL || x->n_attrs != 1 || y->n_attrs != 1)
		return false;
	const Shoal__Attribute *p = x->attrs[0], *q = y->attrs[0];
	if (p->name.len != q->name.len || memcmp(p->name.data, q->name.data, p->name.len) != 0)
		return false;
	/* Key values are S, N or B: their packed forms compare exactly (N in
	 * the canonical text the storage engine keeps). */
	size_t lp = protobuf_c_message_get_packed_size(&p->value->base);
	size_t lq = protobuf_c_message_get_packed_size(&q->value->base);
	if (lp != lq || lp > 4096)
		return false;
	uint8_t bp[4096], bq[4096];
	protobuf_c_message_pack(&p->value->base, bp);
	protobuf_c_message_pack(&q->value->base, bq);
	return memcmp(bp, bq, lp) == 0;
}

/* A new array of n + 1 pointers in a, the n first copied from v. */
static void **grow(sh_arena *a, void *const *v, size_t n)
{
	void **w = sh_arena_alloc(a, (n + 1) * sizeof(*w));
	if (w != NULL && n > 0)
		memcpy(w, v, n * sizeof(*w));
	return w;
}

int wire_icm_list_add(sh_arena *a, Shoal__TableItemCollectionMetrics ***list, size_t *n,
                      const char *table, Shoal__ItemCollectionMetrics *m)
{
	if (m == NULL)
		return SHOAL_OK;
	Shoal__TableItemCollectionMetrics *t = NULL;
	for (size_t i = 0; i < *n && t == NULL; i++)
		if (strcmp((*list)[i]->table_name, table) == 0)
			t = (*list)[i];
	if (t == NULL) {
		void **v = grow(a, (void *const *)*list, *n);
		t = sh_arena_alloc(a, sizeof(*t));
		if (v == NULL || t == NULL)
			return SHOAL_E_NOMEM;
		shoal__table_item_collection_metrics__init(t);
		t->table_name = sh_arena_strndup(a, table, strlen(table));
		if (t->table_name == NULL)
			return SHOAL_E_NOMEM;
		v[(*n)++] = t;
		*list = (Shoal__TableItemCollectionMetrics **)v;
	}
	/* One entry per collection: a later write's figure is the newer. */
	for (size_t i = 0; i < t->n_metrics; i++)
		if (same_key(t->metrics[i]->item_collection_key, m->item_collection_key)) {
			t->metrics[i] = m;
			return SHOAL_OK;
		}
	void **v = grow(a, (void *const *)t->metrics, t->n_metrics);
	if (v == NULL)
		return SHOAL_E_NOMEM;
	v[t->n_metrics++] = m;
	t->metrics = (Shoal__ItemCollectionMetrics **)v;
	return SHOAL_OK;
}

int wire_icm_list_merge(sh_arena *a, Shoal__TableItemCollectionMetrics ***list, size_t *n,
                        Shoal__TableItemCollectionMetrics *const *from, size_t n_from)
{
	for (size_t i = 0; i < n_from; i++)
		for (size_t j = 0; j < from[i]->n_metrics; j++) {
			int rc =
			    wire_icm_list_add(a, list, n, from[i]->table_name, from[i]->metrics[j]);
			if (rc != SHOAL_OK)
				return rc;
		}
	return SHOAL_OK;
}
