/*
 * scan.c -- Scan across partitions.
 *
 * A table's partitions are contiguous ranges of placement hashes, each in one
 * storage group, and the engine orders items by hash, so a scan of the
 * whole table is the partitions scanned one after another in hash order.
 * The client's Segment/TotalSegments select a hash range [lo, hi] (the same
 * arithmetic as the engine's); the plan is the partitions intersecting it.
 * An ExclusiveStartKey says where the previous page stopped: its partition
 * key's hash names the partition to resume in, and that partition's node
 * continues after the key.
 *
 * Each partition gets the client's ScanRequest with hash_lo/hash_hi = the
 * partition's part of [lo, hi], Limit = what remains of the client's Limit,
 * and want_last_key, so that a partition that ends exactly when the Limit is
 * reached still tells which key was evaluated last.  After each partition
 * (rt_scan_after, pure):
 *
 *   partition's page was cut (it returned LastEvaluatedKey)  -> PAGE: answer it
 *   no partition left                                        -> DONE: no key
 *   Limit reached, or the answer passed 1 MB                 -> RESUME: answer
 *                                                               the partition's
 *                                                               last key
 *   otherwise                                                -> NEXT partition
 *
 * Items, Count and ScannedCount add up across partitions.  A Scan with
 * IndexName runs the same way (index entries sit at their placement hashes,
 * index.c); only an ExclusiveStartKey's hash comes from the index's keys.
 * Worker thread.
 */
#include <string.h>

#include "router/router.h"

void rt_segment_range(uint32_t segment, uint32_t total, uint64_t *lo, uint64_t *hi)
{
	*lo = 0;
	*hi = UINT64_MAX;
	if (total == 0)
		return;
	const unsigned __int128 span = (unsigned __int128)1 << 64;
	const unsigned __int128 n = total;
	*lo = (uint64_t)(((unsigned __int128)segment * span + n - 1) / n);
	*hi = (uint64_t)(((unsigned __int128)(segment + 1) * span + n - 1) / n - 1);
}

bool rt_scan_plan_init(const sh_cluster_conf *c, uint32_t segment, uint32_t total, bool has_start,
                       uint64_t start_hash, rt_scan_plan *out)
{
	rt_segment_range(segment, total, &out->lo, &out->hi);
	out->first = sh_cluster_partition_of(c, out->lo);
	out->last = sh_cluster_partition_of(c, out->hi);
	out->start = out->first;
	if (!has_start)
		return true;
	if (start_hash < out->lo || start_hash > out->hi)
		return false;
	out->start = sh_cluster_partition_of(c, start_hash);
	return true;
}

void rt_scan_part_range(const sh_cluster_conf *c, const rt_scan_plan *plan, uint32_t p,
                        uint64_t *lo, uint64_t *hi)
{
	sh_cluster_partition_range(c, p, lo, hi);
	if (*lo < plan->lo)
		*lo = plan->lo;
	if (*hi > plan->hi)
		*hi = plan->hi;
}

rt_scan_step rt_scan_after(uint32_t limit, uint32_t scanned, size_t bytes, bool page_cut, bool more)
{
	if (page_cut)
		return RT_SCAN_PAGE;
	if (!more)
		return RT_SCAN_DONE;
	if (limit != 0 && scanned >= limit)
		return RT_SCAN_RESUME;
	if (bytes >= ST_MAX_PAGE_BYTES)
		return RT_SCAN_RESUME;
	return RT_SCAN_NEXT;
}

/* ------------------------------------------------------------------------ */
/* Execution                                                                 */
/* ------------------------------------------------------------------------ */

/* Sends nr to group (repairing the table once); *resp is the node's answer. */
static int scan_call(rt_req *r, const rt_table *t, uint32_t group, Shoal__NodeRequest *nr, bool any,
                     Shoal__NodeResponse **resp)
{
	for (int round = 0;; round++) {
		rt_call c = {.group = group, .req = nr, .any_replica = any};
		rt_call_all(r->rt, r->a, &c, 1, r->deadline);
		if (c.rc != SHOAL_OK)
			return sh_errf(r->errmsg, c.rc, "%s", c.errmsg);
		if (c.resp->response == NULL)
			return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
			               "node %u answered a scan of group %u without a response",
			               c.answered_by, group);
		if (rt_resp_code(c.resp) == SHOAL_E_NOT_FOUND && round == 0) {
			int rc = rt_repair(r, group, &t, 1);
			if (rc == SHOAL_OK)
				continue;
			if (rc == SHOAL_E_NOT_FOUND)
				return rc;
		}
		*resp = c.resp;
		return SHOAL_OK;
	}
}

/* The key of the last item of a page, when the node did not send last_key
 * (only possible if the item carries the key attributes). */
static Shoal__Item *key_of_item(sh_arena *a, const rt_table *t, const Shoal__Item *item)
{
	const char *names[2] = {t->def.key.hash.name, t->def.key.range.name};
	size_t want = names[1] != NULL ? 2 : 1;
	Shoal__Item *k = sh_arena_alloc(a, sizeof(*k));
	Shoal__Attribute **attrs = sh_arena_calloc(a, 2, sizeof(*attrs));
	if (k == NULL || attrs == NULL || item == NULL)
		return NULL;
	shoal__item__init(k);
	k->attrs = attrs;
	for (size_t w = 0; w < want; w++)
		for (size_t i = 0; i < item->n_attrs; i++) {
			const Shoal__Attribute *at = item->attrs[i];
			if (at->name.len == strlen(names[w]) &&
			    memcmp(at->name.data, names[w], at->name.len) == 0) {
				attrs[k->n_attrs++] = (Shoal__Attribute *)at;
				break;
			}
		}
	return k->n_attrs == want ? k : NULL;
}

typedef struct scan_acc {
	Shoal__Item **items;
	size_t n, cap;
	uint32_t count, scanned;
	size_t bytes;
} scan_acc;

static int acc_add(sh_arena *a, scan_acc *acc, const Shoal__ScanResponse *sr)
{
	if (acc->n + sr->n_items > acc->cap) {
		size_t cap =
		    acc->cap * 2 > acc->n + sr->n_items ? acc->cap * 2 : acc->n + sr->n_items + 16;
		Shoal__Item **v = sh_arena_alloc(a, cap * sizeof(*v));
		if (v == NULL)
			return SHOAL_E_NOMEM;
		if (acc->n > 0)
			memcpy(v, acc->items, acc->n * sizeof(*v));
		acc->items = v;
		acc->cap = cap;
	}
	for (size_t i = 0; i < sr->n_items; i++) {
		acc->items[acc->n++] = sr->items[i];
		acc->bytes += protobuf_c_message_get_packed_size(&sr->items[i]->base);
	}
	acc->count += sr->count;
	acc->scanned += sr->scanned_count;
	return SHOAL_OK;
}

int rt_scan(rt_req *r)
{
	const Shoal__ScanRequest *in = r->in->scan;
	const sh_cluster_conf *conf = r->rt->conf;
	st_scan_req q;
	const rt_table *t;
	int rc = wire_scan_req_from_pb(r->a, in, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;

	/* On an index (index.c): it exists, no ConsistentRead on a GSI, not
	 * CREATING; its entries sit at their placement hashes like items. */
	const st_index_def *x = NULL;
	if (q.index != NULL &&
	    (rc = rt_index_resolve(r, &t, q.index, q.consistent, &x)) != SHOAL_OK)
		return rc;
	bool has_start = false;
	uint64_t start_hash = 0;
	const st_value *pk;
	if (q.exclusive_start_key != NULL && x != NULL) {
		has_start = rt_index_start_hash(t, x, q.exclusive_start_key, &start_hash);
	} else if (q.exclusive_start_key != NULL &&
	           st_route_key(&t->def.key, q.exclusive_start_key, false, &pk, NULL, NULL) ==
	               SHOAL_OK) {
		has_start = true;
		start_hash = st_key_hash(t->id, pk);
	}
	/* (A start key that does not match the schema goes to the first
	 * partition, whose node refuses it in DynamoDB's words.) */
	rt_scan_plan plan;
	if (!rt_scan_plan_init(conf, q.segment, q.total_segments, has_start, start_hash, &plan))
		return sh_errf(r->errmsg, SHOAL_E_VALIDATION,
		               "The provided starting key is invalid: Invalid ExclusiveStartKey. "
		               "Please use ExclusiveStartKey with correct Segment. TotalSegments: "
		               "%u Segment: %u",
		               q.total_segments, q.segment);

	scan_acc acc = {0};
	Shoal__Item *lek = NULL;
	for (uint32_t p = plan.start; p <= plan.last; p++) {
		Shoal__ScanRequest part = *in;
		if (q.limit != 0)
			WIRE_SET(&part, limit, (int32_t)(q.limit - acc.scanned));
		if (p != plan.start)
			part.exclusive_start_key = NULL;
		rt_scan_part_range(conf, &plan, p, &part.hash_lo, &part.hash_hi);
		Shoal__Request req = *r->in;
		req.scan = &part;
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.request = &req;
		nr.hash_lo = part.hash_lo;
		nr.hash_hi = part.hash_hi;
		nr.want_last_key = true;
		Shoal__NodeResponse *resp = NULL;
		rc =
		    scan_call(r, t, sh_cluster_partition_group(conf, p), &nr, !q.consistent, &resp);
		if (rc != SHOAL_OK)
			return rc;
		if (rt_resp_code(resp) != SHOAL_OK) {
			r->out = resp->response; /* the node's refusal, as it is */
			return SHOAL_OK;
		}
		const Shoal__ScanResponse *sr = resp->response->scan;
		if (resp->response->result_case != SHOAL__RESPONSE__RESULT_SCAN || sr == NULL)
			return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
			               "a node answered a Scan without a ScanResponse");
		if (acc_add(r->a, &acc, sr) != SHOAL_OK)
			return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory merging a scan");
		rt_scan_step step = rt_scan_after(q.limit, acc.scanned, acc.bytes,
		                                  sr->last_evaluated_key != NULL, p < plan.last);
		if (step == RT_SCAN_NEXT)
			continue;
		if (step == RT_SCAN_PAGE) {
			lek = sr->last_evaluated_key;
		} else if (step == RT_SCAN_RESUME) {
			lek = resp->last_key;
			if (lek == NULL && sr->n_items > 0 && x == NULL)
				lek = key_of_item(r->a, t, sr->items[sr->n_items - 1]);
			if (lek == NULL)
				return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
				               "partition %u ended the page but its node sent no "
				               "last key",
				               p);
		}
		break;
	}

	Shoal__ScanResponse *out = sh_arena_alloc(r->a, sizeof(*out));
	if (out == NULL)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory");
	shoal__scan_response__init(out);
	out->items = acc.items;
	out->n_items = acc.n;
	out->count = acc.count;
	out->scanned_count = acc.scanned;
	out->last_evaluated_key = lek;
	r->out->result_case = SHOAL__RESPONSE__RESULT_SCAN;
	r->out->scan = out;
	return SHOAL_OK;
}
