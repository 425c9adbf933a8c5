/*
 * index.c -- reads of secondary indexes: Query and Scan with IndexName.
 *
 * Where an index's entries live (storage/index.h):
 *   LSI  in the base item's own group, under the base partition key's hash:
 *        a Query on an LSI is routed exactly as a Query on the table (the
 *        key condition's hash key is the table's), ConsistentRead allowed.
 *   GSI  in the group owning st_index_hash(table, index, shard, GSI pk): the
 *        index partition of one write shard of one GSI partition-key value.
 *        Eventually consistent only.
 *
 * A Query on a GSI with WriteShards 1 goes, unchanged, to any replica of the
 * one index partition (NodeRequest.index_shard 0).  With WriteShards N > 1 an
 * index key's entries are spread over N index partitions, each sorted by
 * (index sort key, base-key digest) -- st_index_entry_cmp's order -- so the
 * router reads all N in parallel and merges:
 *
 *   1. every shard gets the client's Query with the same Limit, without
 *      FilterExpression and ProjectionExpression, Select
 *      ALL_PROJECTED_ATTRIBUTES, and only the ExpressionAttributeNames/Values
 *      the key condition uses (DynamoDB refuses unused ones);
 *   2. rt_shard_merge (pure) merges the pages in the query's order and cuts
 *      the list where it stops being complete -- at the first (in query
 *      order) LastEvaluatedKey any shard returned: entries of the other
 *      shards past that point may come before entries that shard has not
 *      sent yet -- and at Limit, or once the kept items reach 1 MB;
 *   3. st_page_finish applies the client's filter, projection and Select to
 *      the kept items (Count after the filter, ScannedCount = kept);
 *   4. ReturnConsumedCapacity is the sum of what the shards read (their
 *      read_bytes), charged to the index, eventually consistent;
 *   5. LastEvaluatedKey, when anything may follow, is st_index_last_key of
 *      the last kept item.  Resuming with it, every shard starts strictly
 *      after that (index sort key, base-key digest) position, so pages chain
 *      without gaps or repeats.
 *
 * A Scan on an index covers every partition like a base Scan: an index
 * entry's key carries its placement hash where a base item's does (bytes
 * 6..13), so partition hash ranges apply unchanged; only the position of an
 * ExclusiveStartKey is computed from the index's keys.
 *
 * An index that is CREATING (being backfilled) cannot be read, as in
 * DynamoDB; before refusing, the router checks whether the backfill has
 * finished everywhere and activates the index (rt_index_activate).
 *
 * Query on an index, the steps (continuing items.c's Query at phase 10):
 *
 *   phase  what                                          next
 *   -----  --------------------------------------------  -------------------
 *   10     resolve the index (sub-step: refresh,         LSI / unsharded GSI:
 *          activation)                                   one call, 11;
 *                                                        sharded: N calls, 12
 *   11     the node's answer, passed on                  done
 *   12     merge the shards' pages                       done
 */
#include <string.h>

#include "router/router.h"
#include "storage/index.h"

/* ------------------------------------------------------------------------ */
/* Merging write shards (pure)                                               */
/* ------------------------------------------------------------------------ */

/* <0 when a comes first in the query's order. */
static int ord(rt_entry_cmp cmp, const void *ctx, bool forward, const st_value *a,
               const st_value *b)
{
	int c = cmp(ctx, a, b);
	return forward ? c : -c;
}

int rt_shard_merge(const rt_shard_page *pages, uint32_t n_pages, rt_entry_cmp cmp, const void *ctx,
                   bool forward, uint32_t limit, size_t max_bytes, sh_arena *a, rt_merge *out)
{
	memset(out, 0, sizeof(*out));
	size_t total = 0, bytes = 0;
	const st_value *bound = NULL;
	for (uint32_t s = 0; s < n_pages; s++) {
		total += pages[s].n;
		const st_value *lk = pages[s].last_key;
		if (lk != NULL && (bound == NULL || ord(cmp, ctx, forward, lk, bound) < 0))
			bound = lk;
	}
	uint32_t *pos = sh_arena_calloc(a, n_pages + 1, sizeof(*pos));
	out->items = sh_arena_calloc(a, total + 1, sizeof(*out->items));
	if (pos == NULL || out->items == NULL)
		return SHOAL_E_NOMEM;
	for (;;) {
		int best = -1;
		for (uint32_t s = 0; s < n_pages; s++) {
			if (pos[s] >= pages[s].n)
				continue;
			if (best < 0 || ord(cmp, ctx, forward, &pages[s].items[pos[s]],
			                    &pages[best].items[pos[best]]) < 0)
				best = (int)s;
		}
		if (best < 0) {
			/* Everything sent is kept; a shard that was cut has more. */
			out->more = bound != NULL;
			break;
		}
		const st_value *head = &pages[best].items[pos[best]];
		if (bound != NULL && ord(cmp, ctx, forward, head, bound) > 0) {
			out->more = true; /* the order is not complete past bound */
			break;
		}
		if ((limit != 0 && out->n >= limit) || (max_bytes != 0 && bytes >= max_bytes)) {
			out->more = true;
			break;
		}
		out->items[out->n++] = head;
		bytes += st_item_size(head);
		pos[best]++;
	}
	if (out->more && out->n == 0)
		out->resume = bound;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Placement                                                                 */
/* ------------------------------------------------------------------------ */

bool rt_index_start_hash(const rt_table *t, const st_index_def *x, const st_value *key,
                         uint64_t *hash)
{
	const st_value *pk, *sk;
	if (key == NULL || key->type != ST_M ||
	    st_route_key(&t->def.key, key, true, &pk, &sk, NULL) != SHOAL_OK)
		return false;
	if (x->local) {
		*hash = st_key_hash(t->id, pk);
		return true;
	}
	const char *h = x->key.hash.name;
	const st_value *gpk = st_map_get(key, h, strlen(h));
	if (gpk == NULL || gpk->type != x->key.hash.type)
		return false;
	uint32_t n = x->write_shards > 0 ? x->write_shards : 1;
	uint32_t shard = st_index_shard(t->id, pk, sk, n);
	*hash = st_index_hash(t->id, x->id, shard, gpk);
	return true;
}

/* ------------------------------------------------------------------------ */
/* Checks shared by Query and Scan (a sub-step)                              */
/* ------------------------------------------------------------------------ */

struct rt_resolve_sub {
	rt_activate act;
};

static int no_index(rt_job *j, const char *index)
{
	return rt_job_fail(j, SHOAL_E_VALIDATION, "The table does not have the specified index: %s",
	                   index);
}

int rt_index_resolve(rt_job *j, rt_resolve *r)
{
	const rt_table *t;
	int rc;
	switch (r->phase) {
	case 0:
		r->x = rt_index_find(r->t, r->index);
		if (r->x != NULL)
			break;
		r->phase = 1; /* created through another router since the last load? */
		              /* fall through */
	case 1:
		if ((rc = rt_job_table(j, r->t->name, true, &t)) != SHOAL_OK)
			return rc;
		r->t = t;
		if ((r->x = rt_index_find(r->t, r->index)) == NULL)
			return no_index(j, r->index);
		break;
	case 2:
		if ((rc = rt_index_activate(j, &r->sub->act)) != SHOAL_OK)
			return rc;
		if (!r->sub->act.active)
			return rt_job_fail(
			    j, SHOAL_E_VALIDATION,
			    "Cannot read from backfilling global secondary index: %s", r->index);
		r->phase = 3;
		/* fall through */
	case 3:
		if ((rc = rt_job_table(j, r->t->name, true, &t)) != SHOAL_OK)
			return rc;
		r->t = t;
		if ((r->x = rt_index_find(r->t, r->index)) == NULL)
			return no_index(j, r->index);
		if (!r->x->local && r->x->status == ST_INDEX_CREATING)
			return rt_job_fail(
			    j, SHOAL_E_VALIDATION,
			    "Cannot read from backfilling global secondary index: %s", r->index);
		return SHOAL_OK;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "index resolution: phase %d", r->phase);
	}
	/* The index is known: the checks of a read. */
	if (!r->x->local && r->consistent)
		return rt_job_fail(
		    j, SHOAL_E_VALIDATION,
		    "Consistent reads are not supported on global secondary indexes");
	if (r->x->local || r->x->status != ST_INDEX_CREATING)
		return SHOAL_OK;
	if ((r->sub = sh_arena_calloc(&j->arena, 1, sizeof(*r->sub))) == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	r->sub->act.t = r->t;
	r->sub->act.table = r->t->name;
	r->sub->act.index = r->x->name;
	r->phase = 2;
	return rt_index_resolve(j, r);
}

/* ------------------------------------------------------------------------ */
/* Query on a GSI                                                            */
/* ------------------------------------------------------------------------ */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

bool rt_expr_mentions(const char *expr, const uint8_t *tok, size_t len)
{
	if (expr == NULL || len == 0)
		return false;
	for (const char *p = expr; (p = memchr(p, tok[0], strlen(p))) != NULL; p++) {
		if (strncmp(p, (const char *)tok, len) == 0 && !name_char(p[len]))
			return true;
	}
	return false;
}

/* The shard request: the client's Query without what st_page_finish
 * applies afterwards. */
static int shard_query(rt_job *j, const Shoal__QueryRequest *in, Shoal__QueryRequest **out)
{
	Shoal__QueryRequest *q = sh_arena_alloc(&j->arena, sizeof(*q));
	if (q == NULL)
		return SHOAL_E_NOMEM;
	*q = *in;
	WIRE_CLEAR(q, filter_expression);
	WIRE_CLEAR(q, projection_expression);
	WIRE_SET(q, select, "ALL_PROJECTED_ATTRIBUTES");
	const char *kc =
	    WIRE_HAS(in, key_condition_expression) ? in->key_condition_expression : NULL;
	q->expression_attribute_names = NULL;
	q->expression_attribute_values = NULL;
	const Shoal__ExpressionAttributeNames *names = in->expression_attribute_names;
	if (names != NULL && names->n_entries > 0) {
		Shoal__ExpressionAttributeNames *n = sh_arena_alloc(&j->arena, sizeof(*n));
		Shoal__ExpressionAttributeName **e =
		    sh_arena_calloc(&j->arena, names->n_entries, sizeof(*e));
		if (n == NULL || e == NULL)
			return SHOAL_E_NOMEM;
		shoal__expression_attribute_names__init(n);
		n->entries = e;
		for (size_t i = 0; i < names->n_entries; i++) {
			const ProtobufCBinaryData *ph = &names->entries[i]->placeholder;
			if (rt_expr_mentions(kc, ph->data, ph->len))
				e[n->n_entries++] = names->entries[i];
		}
		if (n->n_entries > 0)
			q->expression_attribute_names = n;
	}
	const Shoal__Item *values = in->expression_attribute_values;
	if (values != NULL && values->n_attrs > 0) {
		Shoal__Item *v = sh_arena_alloc(&j->arena, sizeof(*v));
		Shoal__Attribute **at = sh_arena_calloc(&j->arena, values->n_attrs, sizeof(*at));
		if (v == NULL || at == NULL)
			return SHOAL_E_NOMEM;
		shoal__item__init(v);
		v->attrs = at;
		for (size_t i = 0; i < values->n_attrs; i++) {
			const ProtobufCBinaryData *ph = &values->attrs[i]->name;
			if (rt_expr_mentions(kc, ph->data, ph->len))
				at[v->n_attrs++] = values->attrs[i];
		}
		if (v->n_attrs > 0)
			q->expression_attribute_values = v;
	}
	*out = q;
	return SHOAL_OK;
}

typedef struct cmp_ctx {
	const st_table_def *t;
	const st_index_def *x;
} cmp_ctx;

static int entry_cmp(const void *ctx, const st_value *a, const st_value *b)
{
	const cmp_ctx *c = ctx;
	return st_index_entry_cmp(c->t, c->x, a, b);
}

/* A shard's page as normalised values (sorted maps, as st_map_get needs). */
static int shard_page(rt_job *j, const Shoal__QueryResponse *qr, rt_shard_page *out)
{
	st_page p;
	int rc = wire_query_resp_from_pb(&j->arena, qr, &p, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < p.count && p.items != NULL; i++)
		if ((rc = st_value_normalize(&j->arena, &p.items[i], j->errmsg)) != SHOAL_OK)
			return rc;
	if (p.last_evaluated_key != NULL &&
	    (rc = st_value_normalize(&j->arena, p.last_evaluated_key, j->errmsg)) != SHOAL_OK)
		return rc;
	out->items = p.items;
	out->n = p.items != NULL ? p.count : 0;
	out->last_key = p.last_evaluated_key;
	return SHOAL_OK;
}

/* The state of a Query on an index (j->sub). */
typedef struct iq_st {
	const st_query_req *q;
	rt_resolve res;
	rt_call *one;     /* LSI, unsharded GSI */
	rt_call **shards; /* sharded GSI */
	uint32_t n;
} iq_st;

/* Issues the N shard reads of a sharded GSI Query (phase 12 next). */
static int sharded_issue(rt_job *j, iq_st *s, const st_query_route_plan *plan)
{
	uint32_t n = plan->n;
	Shoal__QueryRequest *sq;
	if (shard_query(j, j->in->query, &sq) != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	Shoal__Request *req = sh_arena_alloc(&j->arena, sizeof(*req));
	s->shards = sh_arena_calloc(&j->arena, n, sizeof(*s->shards));
	if (req == NULL || s->shards == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	*req = *j->in;
	req->query = sq;
	s->n = n;
	for (uint32_t k = 0; k < n; k++) {
		Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
		rt_call *c = rt_job_call(j, rt_gsi_group(j->rt, plan->hash[k]));
		if (nr == NULL || c == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		shoal__node_request__init(nr);
		nr->request = req;
		nr->index_shard = k;
		c->any_replica = true;
		int rc = rt_call_request(j, c, nr);
		if (rc != SHOAL_OK)
			return rc;
		s->shards[k] = c;
	}
	j->phase = 12;
	return RT_WAIT;
}

/* Phase 12: the shards' pages merged into one. */
static int sharded_merge(rt_job *j, iq_st *s)
{
	const rt_table *t = s->res.t;
	const st_index_def *x = s->res.x;
	const st_query_req *q = s->q;
	uint32_t n = s->n;
	rt_shard_page *pages = sh_arena_calloc(&j->arena, n, sizeof(*pages));
	if (pages == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	uint64_t read_bytes = 0; /* what the shards read: ReturnConsumedCapacity */
	for (uint32_t k = 0; k < n; k++) {
		Shoal__NodeResponse *resp;
		int rc;
		if (!rt_call_ok(j, s->shards[k], &resp, &rc))
			return rc;
		const Shoal__QueryResponse *qr =
		    resp->response != NULL ? resp->response->query : NULL;
		if (resp->response == NULL ||
		    resp->response->result_case != SHOAL__RESPONSE__RESULT_QUERY || qr == NULL)
			return rt_job_fail(j, SHOAL_E_INTERNAL,
			                   "a node answered a Query without a QueryResponse");
		if ((rc = shard_page(j, qr, &pages[k])) != SHOAL_OK)
			return rc;
		read_bytes += resp->read_bytes;
	}
	cmp_ctx ctx = {&t->def, x};
	rt_merge m;
	if (rt_shard_merge(pages, n, entry_cmp, &ctx, q->forward, q->limit, ST_MAX_PAGE_BYTES,
	                   &j->arena, &m) != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	st_value *kept = sh_arena_calloc(&j->arena, m.n + 1, sizeof(*kept));
	if (kept == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < m.n; i++)
		kept[i] = *m.items[i];
	st_page page;
	int rc = st_page_finish(&t->def, q, kept, m.n, &j->arena, &page, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	page.last_evaluated_key = NULL;
	if (m.more && m.n > 0) {
		rc = st_index_last_key(&t->def, x, &kept[m.n - 1], &j->arena,
		                       &page.last_evaluated_key, j->errmsg);
		if (rc != SHOAL_OK)
			return rc;
	} else if (m.more) {
		page.last_evaluated_key = (st_value *)m.resume;
	}
	Shoal__QueryResponse *out;
	if ((rc = wire_query_resp_to_pb(&j->arena, &page, &out, j->errmsg)) != SHOAL_OK)
		return rc;
	const Shoal__QueryRequest *in = j->in->query;
	if (rt_read_capacity(&j->arena, WIRE_RCC(in), t, x, read_bytes, false,
	                     &out->consumed_capacity) != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	j->out->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	j->out->query = out;
	return SHOAL_OK;
}

int rt_index_query(rt_job *j, const rt_table *t, const st_query_req *q)
{
	iq_st *s = j->sub;
	int rc;
	if (s == NULL) {
		if ((s = j->sub = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		s->q = q;
		s->res.t = t;
		s->res.index = q->index;
		s->res.consistent = q->consistent;
	}
	switch (j->phase) {
	case 10: {
		if ((rc = rt_index_resolve(j, &s->res)) != SHOAL_OK)
			return rc;
		const rt_table *tt = s->res.t;
		const st_index_def *x = s->res.x;
		st_query_route_plan plan;
		rc = st_query_route(s->q, &tt->def, x, &j->arena, &plan, j->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (plan.n > 1)
			return sharded_issue(j, s, &plan);
		/* An LSI's entries live with the base items (the table's
		 * partitions); a GSI's at its own hash (the GSI space's partitions). */
		uint32_t group = x->local ? rt_base_group(j->rt, tt->id, plan.hash[0])
		                          : rt_gsi_group(j->rt, plan.hash[0]);
		if ((s->one = rt_job_call(j, group)) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		s->one->any_replica = x->local ? !s->q->consistent : true;
		if ((rc = rt_call_forward(j, s->one, tt, 0)) != SHOAL_OK)
			return rc;
		j->phase = 11;
		return RT_WAIT;
	}
	case 11:
		return rt_job_pass(j, s->one);
	case 12:
		return sharded_merge(j, s);
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "index query: phase %d", j->phase);
	}
}
