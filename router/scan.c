/*
 * scan.c -- Scan across partitions.
 *
 * A table's partitions are contiguous ranges of placement hashes, each in one
 * storage group, and the engine orders items by hash, so a scan of the
 * whole table is the partitions scanned one after another in hash order.
 * The client's Segment/TotalSegments select a hash range [lo, hi] (the same
 * arithmetic as the engine's); the plan walks the partitions intersecting
 * it.  They come from the cluster map (common/placement.h: a table's
 * partitions may be split or moved, so their sizes differ; so may the GSI
 * space's, where a GSI's entries are) and are looked up one at a time, when
 * the walk reaches them: the next partition is the one holding the hash
 * after the current one's end, so a map that changes between two pages (or
 * two partitions of one page) still leaves no gap and no overlap.
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
 * Items, Count and ScannedCount add up across partitions; so do the nodes'
 * read_bytes, from which ReturnConsumedCapacity is charged once for the
 * request (rt_read_capacity).  A Scan with
 * IndexName runs the same way (index entries sit at their placement hashes,
 * index.c); only an ExclusiveStartKey's hash comes from the index's keys.
 *
 *   phase  what                                           next
 *   -----  ---------------------------------------------  -------------------
 *   0      validate; the table (RT_WAIT: refresh, again)  1
 *   1      the index, if any (sub-step rt_index_resolve); the plan; the
 *          first partition's call                         2
 *   2      a partition's page: NEXT -> the next call      2
 *                              otherwise -> the answer    done
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

bool rt_scan_plan_init(uint32_t segment, uint32_t total, bool has_start, uint64_t start_hash,
                       rt_scan_plan *out)
{
	rt_segment_range(segment, total, &out->lo, &out->hi);
	out->start = out->lo;
	if (!has_start)
		return true;
	if (start_hash < out->lo || start_hash > out->hi)
		return false;
	out->start = start_hash;
	return true;
}

bool rt_scan_part_range(const rt_scan_plan *plan, const sh_place_part *part, uint64_t *lo,
                        uint64_t *hi)
{
	*lo = part->lo > plan->lo ? part->lo : plan->lo;
	*hi = part->hi < plan->hi ? part->hi : plan->hi;
	return *hi < plan->hi;
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

int rt_read_capacity(sh_arena *a, wire_rcc rcc, const rt_table *t, const st_index_def *x,
                     uint64_t bytes, bool consistent, Shoal__ConsumedCapacity **out)
{
	int rc = wire_capacity_new(a, rcc, t->name, out);
	if (rc != SHOAL_OK || *out == NULL)
		return rc;
	double units = wire_read_units(bytes, consistent);
	if (x == NULL) {
		wire_capacity_charge_table(*out, units);
		return SHOAL_OK;
	}
	return wire_capacity_charge_index(a, *out, x->name, x->local, units);
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
	uint64_t read_bytes; /* the nodes' read_bytes: ReturnConsumedCapacity */
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

typedef struct scan_st {
	st_scan_req q;
	rt_resolve res; /* the table and index */
	rt_scan_plan plan;
	uint64_t at;        /* a hash of the partition being read */
	bool first;         /* it is the first one (the start key's) */
	bool more;          /* partitions follow it */
	sh_place_part part; /* the partition being read */
	rt_call *call;
	scan_acc acc;
} scan_st;

/* The partition holding hash h: a GSI's entries sit at their own hashes
 * (the partitions of the GSI space), a table's items and LSI entries in the
 * table's partitions. */
static void scan_part_of(rt_job *j, const scan_st *s, uint64_t h, sh_place_part *out)
{
	const st_index_def *x = s->res.x;
	sh_place_part_of(j->rt->place, j->rt->conf,
	                 x != NULL && !x->local ? SH_MAP_GSI_SPACE : s->res.t->id, h, out);
}

/* The call for the partition holding s->at (phase 2 next). */
static int scan_issue(rt_job *j, scan_st *s)
{
	const Shoal__ScanRequest *in = j->in->scan;
	scan_part_of(j, s, s->at, &s->part);
	Shoal__ScanRequest *part = sh_arena_alloc(&j->arena, sizeof(*part));
	Shoal__Request *req = sh_arena_alloc(&j->arena, sizeof(*req));
	Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
	rt_call *c = rt_job_call(j, s->part.group);
	if (part == NULL || req == NULL || nr == NULL || c == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	*part = *in;
	if (s->q.limit != 0)
		WIRE_SET(part, limit, (int32_t)(s->q.limit - s->acc.scanned));
	if (!s->first)
		part->exclusive_start_key = NULL;
	s->more = rt_scan_part_range(&s->plan, &s->part, &part->hash_lo, &part->hash_hi);
	*req = *j->in;
	req->scan = part;
	shoal__node_request__init(nr);
	nr->request = req;
	nr->hash_lo = part->hash_lo;
	nr->hash_hi = part->hash_hi;
	nr->want_last_key = true;
	c->any_replica = !s->q.consistent;
	int rc = rt_call_request(j, c, nr);
	if (rc != SHOAL_OK)
		return rc;
	const rt_table **tables = sh_arena_alloc(&j->arena, sizeof(*tables));
	if (tables == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	tables[0] = s->res.t;
	rt_call_repairs(c, tables, 1);
	s->call = c;
	j->phase = 2;
	return RT_WAIT;
}

/* The plan, once the table and index are known. */
static int scan_plan(rt_job *j, scan_st *s)
{
	const rt_table *t = s->res.t;
	const st_index_def *x = s->res.x;
	bool has_start = false;
	uint64_t start_hash = 0;
	const st_value *pk;
	if (s->q.exclusive_start_key != NULL && x != NULL) {
		has_start = rt_index_start_hash(t, x, s->q.exclusive_start_key, &start_hash);
	} else if (s->q.exclusive_start_key != NULL &&
	           st_route_key(&t->def.key, s->q.exclusive_start_key, false, &pk, NULL, NULL) ==
	               SHOAL_OK) {
		has_start = true;
		start_hash = st_key_hash(t->id, pk);
	}
	/* (A start key that does not match the schema goes to the first
	 * partition, whose node refuses it in DynamoDB's words.) */
	if (!rt_scan_plan_init(s->q.segment, s->q.total_segments, has_start, start_hash, &s->plan))
		return rt_job_fail(
		    j, SHOAL_E_VALIDATION,
		    "The provided starting key is invalid: Invalid ExclusiveStartKey. "
		    "Please use ExclusiveStartKey with correct Segment. TotalSegments: "
		    "%u Segment: %u",
		    s->q.total_segments, s->q.segment);
	s->at = s->plan.start;
	s->first = true;
	return scan_issue(j, s);
}

/* Phase 2: a partition's page. */
static int scan_page(rt_job *j, scan_st *s)
{
	const rt_table *t = s->res.t;
	const st_index_def *x = s->res.x;
	Shoal__NodeResponse *resp;
	int rc;
	if (!rt_call_ok(j, s->call, &resp, &rc))
		return rc;
	const Shoal__ScanResponse *sr = resp->response != NULL ? resp->response->scan : NULL;
	if (resp->response == NULL || resp->response->result_case != SHOAL__RESPONSE__RESULT_SCAN ||
	    sr == NULL)
		return rt_job_fail(j, SHOAL_E_INTERNAL,
		                   "a node answered a Scan without a ScanResponse");
	if (acc_add(&j->arena, &s->acc, sr) != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory merging a scan");
	s->acc.read_bytes += resp->read_bytes;
	rt_scan_step step = rt_scan_after(s->q.limit, s->acc.scanned, s->acc.bytes,
	                                  sr->last_evaluated_key != NULL, s->more);
	if (step == RT_SCAN_NEXT) {
		s->at = s->part.hi + 1; /* more: the partition ends before plan.hi */
		s->first = false;
		return scan_issue(j, s);
	}
	Shoal__Item *lek = NULL;
	if (step == RT_SCAN_PAGE) {
		lek = sr->last_evaluated_key;
	} else if (step == RT_SCAN_RESUME) {
		lek = resp->last_key;
		if (lek == NULL && sr->n_items > 0 && x == NULL)
			lek = key_of_item(&j->arena, t, sr->items[sr->n_items - 1]);
		if (lek == NULL)
			return rt_job_fail(
			    j, SHOAL_E_INTERNAL,
			    "the partition at %016llx (group %u) ended the page but its node "
			    "sent no last key",
			    (unsigned long long)s->part.lo, s->part.group);
	}
	Shoal__ScanResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	if (out == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	shoal__scan_response__init(out);
	out->items = s->acc.items;
	out->n_items = s->acc.n;
	out->count = s->acc.count;
	out->scanned_count = s->acc.scanned;
	out->last_evaluated_key = lek;
	if (rt_read_capacity(&j->arena, WIRE_RCC(j->in->scan), t, x, s->acc.read_bytes,
	                     s->q.consistent, &out->consumed_capacity) != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	j->out->result_case = SHOAL__RESPONSE__RESULT_SCAN;
	j->out->scan = out;
	return SHOAL_OK;
}

int rt_step_scan(rt_job *j)
{
	scan_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0: {
		if (s == NULL) {
			if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
				return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
			if ((rc = wire_scan_req_from_pb(&j->arena, j->in->scan, &s->q,
			                                j->errmsg)) != SHOAL_OK)
				return rc;
		}
		const rt_table *t;
		if ((rc = rt_job_table(j, s->q.table, false, &t)) != SHOAL_OK)
			return rc;
		s->res.t = t;
		s->res.index = s->q.index;
		s->res.consistent = s->q.consistent;
		j->phase = 1;
	}
		/* fall through */
	case 1:
		/* On an index (index.c): it exists, no ConsistentRead on a GSI,
		 * not CREATING; its entries sit at their placement hashes like
		 * items. */
		if (s->q.index != NULL && (rc = rt_index_resolve(j, &s->res)) != SHOAL_OK)
			return rc;
		return scan_plan(j, s);
	case 2:
		return scan_page(j, s);
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "scan: phase %d", j->phase);
	}
}
