/*
 * handlers.c -- the operations a node serves from its own LMDB: reads
 * (GetItem, Query, Scan, BatchGetItem of one group's keys, DescribeTable,
 * ListTables, the catalog), GroupStatus and the replica scrub's questions
 * (scrub_check: this replica's result of a scrub, from memory).
 *
 * The front door (server.c) has decoded the request, checked that the group
 * is hosted and healthy and, for consistent reads, waited for a Raft barrier
 * on the leader; a handler converts the protobuf request with proto/wire.h
 * (which validates it as DynamoDB does), calls the storage engine and
 * converts the result back.  Everything it builds lives in the call's arena.
 *
 * Scan with want_last_key: the router scans a table partition by partition
 * and, when a partition is exhausted just as the caller's Limit is reached,
 * needs the key of the last item evaluated to hand the client a
 * LastEvaluatedKey.  The storage engine returns LastEvaluatedKey only when
 * more items may follow, so in that case we re-read the same `scanned` items
 * without filter or projection and take the key attributes of the last one
 * (a second read transaction: under concurrent writes the key may be off by
 * the items written in between, which eventually consistent Scan allows).
 *
 * ReturnConsumedCapacity: GetItem and BatchGetItem charge each item's whole
 * size (st_get_item_sized, before projection); Query and Scan the page's
 * bytes_read, also returned as NodeResponse.read_bytes so that a router
 * adding up partitions or write shards rounds the sum once (proto/wire.h).
 *
 * Threads: server worker threads (storage reads are thread-safe).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "node/capacity.h"
#include "node/node.h"
#include "proto/wire.h"
#include "storage/parts.h"
#include "storage/stream.h"

/* BatchGetItem: stop adding items past this many bytes of item data and
 * return the remaining keys as UnprocessedKeys (DynamoDB: 16 MB per
 * response; our messages are capped at NODE_RECV_MAX). */
#define BATCH_GET_MAX_BYTES (12u * 1024 * 1024)

static int nomem(node_call *c)
{
	return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
}

/* Read units a request cost: charged to its partition's bucket (capacity.c)
 * and, the same figure, reported in its ConsumedCapacity. */
static void charge_read(node_call *c, const char *table, const char *index, double units,
                        const st_value *key)
{
	node_cap_charge(c->node->cap, node_group_id(c->group), table, index, CAP_READ, units, key);
}

/* The units of a Query or Scan page (the bytes read), charged to the table
 * or to the index read (a Query's partition key names its hot key); its
 * ConsumedCapacity (*out NULL for NONE). */
static int page_capacity(node_call *c, wire_rcc rcc, const char *table, const char *index,
                         bool consistent, const st_page *page, Shoal__ConsumedCapacity **out)
{
	double units = wire_read_units(page->bytes_read, consistent);
	charge_read(c, table, index, units, page->pk);
	int rc = wire_capacity_new(c->arena, rcc, table, out);
	if (rc != SHOAL_OK || *out == NULL)
		return rc != SHOAL_OK ? nomem(c) : SHOAL_OK;
	if (index == NULL) {
		wire_capacity_charge_table(*out, units);
		return SHOAL_OK;
	}
	bool local = false;
	if (rcc == WIRE_RCC_INDEXES) {
		st_table_info info;
		rc = st_table_describe(node_group_env(c->group), table, c->arena, &info, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		for (uint32_t i = 0; i < info.def.n_indexes; i++)
			if (strcmp(info.def.indexes[i].name, index) == 0)
				local = info.def.indexes[i].local;
	}
	if (wire_capacity_charge_index(c->arena, *out, index, local, units) != SHOAL_OK)
		return nomem(c);
	return SHOAL_OK;
}

int node_handle_get_item(node_call *c)
{
	const Shoal__GetItemRequest *in = c->req->request->get_item;
	st_get_req r;
	st_value *item = NULL;
	size_t size = 0;
	Shoal__GetItemResponse *out;
	int rc = wire_get_req_from_pb(c->arena, in, &r, c->errmsg);
	if (rc == SHOAL_OK)
		rc = st_get_item_sized(node_group_env(c->group), &r, c->arena, &item, &size,
		                       c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_get_item_resp_to_pb(c->arena, item, &out, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	double units = wire_read_units(size, in->consistent_read);
	charge_read(c, r.table, NULL, units, r.key);
	if (wire_capacity_new(c->arena, WIRE_RCC(in), r.table, &out->consumed_capacity) != SHOAL_OK)
		return nomem(c);
	wire_capacity_charge_table(out->consumed_capacity, units);
	c->resp->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
	c->resp->get_item = out;
	return SHOAL_OK;
}

/* One group's share of a TransactGetItems (the router's two rounds: router/
 * txn.c).  Served as a consistent read, on the loop thread after a barrier,
 * so that no write applies while the items and their versions are read. */
int node_handle_transact_get_items(node_call *c)
{
	const Shoal__TransactGetItemsRequest *in = c->req->request->transact_get_items;
	size_t n = in->n_transact_items;
	if (n == 0 || n > ST_MAX_TXN_ITEMS)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION, "a TransactGetItems part of %zu gets",
		               n);
	st_txn_get *g = sh_arena_calloc(c->arena, n, sizeof(*g));
	Shoal__TransactGetItemsResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	Shoal__ItemResponse **items = sh_arena_calloc(c->arena, n, sizeof(*items));
	Shoal__TxnItemState **states = sh_arena_calloc(c->arena, n, sizeof(*states));
	if (g == NULL || out == NULL || items == NULL || states == NULL)
		return nomem(c);
	shoal__transact_get_items_response__init(out);
	for (size_t i = 0; i < n; i++) {
		const Shoal__TransactGetItem *ti = in->transact_items[i];
		if (ti == NULL || ti->get == NULL)
			return sh_errf(
			    c->errmsg, SHOAL_E_VALIDATION,
			    "1 validation error detected: Value null at "
			    "'transactItems.%zu.member.get' failed to satisfy constraint: "
			    "Member must not be null",
			    i + 1);
		int rc = wire_txn_get_from_pb(c->arena, ti->get, &g[i].req, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	uint64_t instance;
	int rc = st_txn_get_items(node_group_env(c->group), g, (uint32_t)n, c->arena, &instance,
	                          c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	wire_rcc rcc = WIRE_RCC(in);
	for (size_t i = 0; i < n; i++) {
		Shoal__ItemResponse *ir = sh_arena_alloc(c->arena, sizeof(*ir));
		Shoal__TxnItemState *st = sh_arena_alloc(c->arena, sizeof(*st));
		if (ir == NULL || st == NULL)
			return nomem(c);
		shoal__item_response__init(ir);
		shoal__txn_item_state__init(st);
		/* A projection that leaves nothing of a present item answers
		 * no Item, as for an absent one (DynamoDB's TransactGetItems;
		 * GetItem and BatchGetItem answer an empty map instead). */
		if (g[i].item != NULL && g[i].item->u.map.n > 0 &&
		    (rc = wire_item_to_pb(c->arena, g[i].item, &ir->item, c->errmsg)) != SHOAL_OK)
			return rc;
		st->locked = g[i].locked;
		st->version = g[i].version;
		items[i] = ir;
		states[i] = st;
		/* A transactional read costs twice a consistent read's units. */
		double units = 2 * wire_read_units(g[i].size, true);
		charge_read(c, g[i].req.table, NULL, units, g[i].req.key);
		if (rcc == WIRE_RCC_NONE)
			continue;
		Shoal__ConsumedCapacity *cc;
		if (wire_capacity_new(c->arena, rcc, g[i].req.table, &cc) != SHOAL_OK)
			return nomem(c);
		wire_capacity_charge_table(cc, units);
		if (wire_capacity_list_add(c->arena, &out->consumed_capacity,
		                           &out->n_consumed_capacity, cc) != SHOAL_OK)
			return nomem(c);
	}
	out->responses = items;
	out->n_responses = n;
	c->nresp->txn_items = states;
	c->nresp->n_txn_items = n;
	c->nresp->txn_instance = instance;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_GET_ITEMS;
	c->resp->transact_get_items = out;
	return SHOAL_OK;
}

int node_handle_query(node_call *c)
{
	st_query_req r;
	st_page page;
	Shoal__QueryResponse *out;
	int rc = wire_query_req_from_pb(c->arena, c->req->request->query, &r, c->errmsg);
	r.shard = c->req->index_shard; /* the router's choice for a write-sharded GSI */
	if (rc == SHOAL_OK)
		rc = st_query(node_group_env(c->group), &r, c->arena, &page, c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_query_resp_to_pb(c->arena, &page, &out, c->errmsg);
	if (rc == SHOAL_OK)
		rc = page_capacity(c, WIRE_RCC(c->req->request->query), r.table, r.index,
		                   r.consistent, &page, &out->consumed_capacity);
	if (rc != SHOAL_OK)
		return rc;
	c->nresp->read_bytes = page.bytes_read;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	c->resp->query = out;
	return SHOAL_OK;
}

/* The key schema(s) of a scan: the table's, and for an index the index's
 * followed by the table's (as LastEvaluatedKey holds both). */
static int scan_key_names(node_call *c, const st_scan_req *r, const char *names[4])
{
	st_table_info info;
	int rc = st_table_describe(node_group_env(c->group), r->table, c->arena, &info, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	memset(names, 0, 4 * sizeof(*names));
	names[0] = info.def.key.hash.name;
	names[1] = info.def.key.range.name;
	if (r->index != NULL) {
		for (uint32_t i = 0; i < info.def.n_indexes; i++) {
			const st_index_def *x = &info.def.indexes[i];
			if (strcmp(x->name, r->index) == 0) {
				names[2] = x->key.hash.name;
				names[3] = x->key.range.name;
				break;
			}
		}
	}
	return SHOAL_OK;
}

/* The key of the last item the scan `r` evaluated (page: its result, which
 * ended with the range exhausted after evaluating page->scanned items). */
static int scan_last_key(node_call *c, const st_scan_req *r, const st_page *page, st_value **key)
{
	st_scan_req again = *r;
	st_page p2;
	const char *names[4];

	*key = NULL;
	again.filter = NULL;
	again.projection = NULL;
	again.attrs.names = NULL;
	again.attrs.values = NULL;
	again.select = r->index != NULL ? ST_SELECT_ALL_PROJECTED_ATTRIBUTES : ST_SELECT_DEFAULT;
	again.limit = page->scanned;
	int rc = st_scan(node_group_env(c->group), &again, c->arena, &p2, c->errmsg);
	if (rc != SHOAL_OK || p2.count == 0 || p2.items == NULL)
		return rc;
	if ((rc = scan_key_names(c, r, names)) != SHOAL_OK)
		return rc;
	const st_value *last = &p2.items[p2.count - 1];
	st_value *k = st_new_map(c->arena, 4);
	if (k == NULL)
		return nomem(c);
	for (int i = 0; i < 4; i++) {
		if (names[i] == NULL)
			continue;
		const st_value *v = st_map_get(last, names[i], strlen(names[i]));
		if (v != NULL && st_map_set(c->arena, k, names[i], strlen(names[i]), v) != SHOAL_OK)
			return nomem(c);
	}
	*key = k;
	return SHOAL_OK;
}

int node_handle_scan(node_call *c)
{
	st_scan_req r;
	st_page page;
	Shoal__ScanResponse *out;
	int rc = wire_scan_req_from_pb(c->arena, c->req->request->scan, &r, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (c->req->hash_lo != 0 || c->req->hash_hi != 0) {
		r.hash_lo = c->req->hash_lo;
		r.hash_hi = c->req->hash_hi;
	}
	if ((rc = st_scan(node_group_env(c->group), &r, c->arena, &page, c->errmsg)) != SHOAL_OK)
		return rc;
	if ((rc = wire_scan_resp_to_pb(c->arena, &page, &out, c->errmsg)) != SHOAL_OK)
		return rc;
	if ((rc = page_capacity(c, WIRE_RCC(c->req->request->scan), r.table, r.index, r.consistent,
	                        &page, &out->consumed_capacity)) != SHOAL_OK)
		return rc;
	c->nresp->read_bytes = page.bytes_read;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_SCAN;
	c->resp->scan = out;
	if (c->req->want_last_key && page.scanned > 0) {
		st_value *key = page.last_evaluated_key;
		if (key == NULL && (rc = scan_last_key(c, &r, &page, &key)) != SHOAL_OK)
			return rc;
		if (key != NULL && (rc = wire_item_to_pb(c->arena, key, &c->nresp->last_key,
		                                         c->errmsg)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

/* One table's part of a BatchGetItem response, found or added. */
static Shoal__TableItems *batch_table(node_call *c, Shoal__BatchGetItemResponse *out,
                                      const char *table, size_t cap)
{
	for (size_t i = 0; i < out->n_responses; i++)
		if (strcmp(out->responses[i]->table_name, table) == 0)
			return out->responses[i];
	Shoal__TableItems *t = sh_arena_alloc(c->arena, sizeof(*t));
	if (t == NULL)
		return NULL;
	shoal__table_items__init(t);
	t->table_name = (char *)table;
	t->items = sh_arena_calloc(c->arena, cap, sizeof(*t->items));
	if (t->items == NULL)
		return NULL;
	out->responses[out->n_responses++] = t;
	return t;
}

int node_handle_batch_get_item(node_call *c)
{
	const Shoal__BatchGetItemRequest *b = c->req->request->batch_get_item;
	st_env *env = node_group_env(c->group);
	size_t total = 0, bytes = 0;
	int rc;

	for (size_t i = 0; i < b->n_request_items; i++)
		total += b->request_items[i] != NULL ? b->request_items[i]->n_keys : 0;
	if (total == 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'requestItems' failed "
		               "to satisfy constraint: Member must have length greater than or "
		               "equal to 1");
	if (total > 100)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "Too many items requested for the BatchGetItem call");

	Shoal__BatchGetItemResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	if (out == NULL)
		return nomem(c);
	shoal__batch_get_item_response__init(out);
	out->responses = sh_arena_calloc(c->arena, b->n_request_items, sizeof(*out->responses));
	out->unprocessed_keys =
	    sh_arena_calloc(c->arena, b->n_request_items, sizeof(*out->unprocessed_keys));
	if (out->responses == NULL || out->unprocessed_keys == NULL)
		return nomem(c);
	wire_rcc rcc = WIRE_RCC(b);

	for (size_t i = 0; i < b->n_request_items; i++) {
		const Shoal__TableKeysAndAttributes *tka = b->request_items[i];
		if (tka == NULL)
			continue;
		Shoal__TableKeysAndAttributes *unproc = NULL;
		Shoal__ConsumedCapacity *cc = NULL;
		for (size_t k = 0; k < tka->n_keys; k++) {
			if (bytes >= BATCH_GET_MAX_BYTES) {
				/* The rest of this table's keys are unprocessed. */
				if (unproc == NULL) {
					unproc = sh_arena_alloc(c->arena, sizeof(*unproc));
					if (unproc == NULL)
						return nomem(c);
					*unproc = *tka;
					unproc->keys = sh_arena_calloc(c->arena, tka->n_keys,
					                               sizeof(*unproc->keys));
					if (unproc->keys == NULL)
						return nomem(c);
					unproc->n_keys = 0;
					out->unprocessed_keys[out->n_unprocessed_keys++] = unproc;
				}
				unproc->keys[unproc->n_keys++] = tka->keys[k];
				continue;
			}
			/* The same checks as a GetItem of this key. */
			Shoal__GetItemRequest g = SHOAL__GET_ITEM_REQUEST__INIT;
			if (tka->table_name != NULL && tka->table_name[0] != '\0')
				WIRE_SET(&g, table_name, tka->table_name);
			g.key = tka->keys[k];
			if (WIRE_HAS(tka, projection_expression))
				WIRE_SET(&g, projection_expression, tka->projection_expression);
			g.expression_attribute_names = tka->expression_attribute_names;
			st_get_req r;
			st_value *item = NULL;
			size_t size = 0;
			rc = wire_get_req_from_pb(c->arena, &g, &r, c->errmsg);
			if (rc == SHOAL_OK)
				rc = st_get_item_sized(env, &r, c->arena, &item, &size, c->errmsg);
			if (rc != SHOAL_OK)
				return rc;
			double units = wire_read_units(size, tka->consistent_read);
			charge_read(c, tka->table_name, NULL, units, r.key);
			if (cc == NULL && rcc != WIRE_RCC_NONE &&
			    wire_capacity_new(c->arena, rcc, tka->table_name, &cc) != SHOAL_OK)
				return nomem(c);
			wire_capacity_charge_table(cc, units);
			if (item == NULL)
				continue;
			Shoal__TableItems *t = batch_table(c, out, tka->table_name, tka->n_keys);
			if (t == NULL)
				return nomem(c);
			if ((rc = wire_item_to_pb(c->arena, item, &t->items[t->n_items],
			                          c->errmsg)) != SHOAL_OK)
				return rc;
			t->n_items++;
			bytes += st_item_size(item);
		}
		if (wire_capacity_list_add(c->arena, &out->consumed_capacity,
		                           &out->n_consumed_capacity, cc) != SHOAL_OK)
			return nomem(c);
	}
	c->resp->result_case = SHOAL__RESPONSE__RESULT_BATCH_GET_ITEM;
	c->resp->batch_get_item = out;
	return SHOAL_OK;
}

int node_handle_describe_table(node_call *c)
{
	const char *name;
	st_table_info info;
	Shoal__TableDescription *desc;
	int rc = wire_describe_table_from_pb(c->arena, c->req->request->describe_table, &name,
	                                     c->errmsg);
	if (rc == SHOAL_OK)
		rc = st_table_describe(node_group_env(c->group), name, c->arena, &info, c->errmsg);
	if (rc == SHOAL_OK) /* the counts of what this group serves */
		rc = st_part_uncount(node_group_env(c->group), &info, c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_table_desc_to_pb(c->arena, &info, "ACTIVE", &desc, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__DescribeTableResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	if (out == NULL)
		return nomem(c);
	shoal__describe_table_response__init(out);
	out->table = desc;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE;
	c->resp->describe_table = out;
	return SHOAL_OK;
}

/* Group 0 (the router sends it there): the tags of the table of the ARN. */
int node_handle_list_tags_of_resource(node_call *c)
{
	const char *name;
	st_table_info info;
	Shoal__ListTagsOfResourceResponse *out;
	int rc = wire_list_tags_from_pb(c->arena, c->req->request->list_tags_of_resource, &name,
	                                c->errmsg);
	if (rc == SHOAL_OK)
		rc = st_table_describe(node_group_env(c->group), name, c->arena, &info, c->errmsg);
	if (rc == SHOAL_E_NOT_FOUND)
		return sh_errf(c->errmsg, SHOAL_E_NOT_FOUND,
		               "Requested resource not found: ResourcArn: %s not found",
		               c->req->request->list_tags_of_resource->resource_arn);
	if (rc == SHOAL_OK)
		rc = wire_list_tags_resp_to_pb(c->arena, &info.def, &out, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_LIST_TAGS_OF_RESOURCE;
	c->resp->list_tags_of_resource = out;
	return SHOAL_OK;
}

/* Group 0 (the router sends it there): the table's TTL setting. */
int node_handle_describe_time_to_live(node_call *c)
{
	const char *name;
	st_table_info info;
	Shoal__DescribeTimeToLiveResponse *out;
	int rc = wire_describe_ttl_from_pb(c->arena, c->req->request->describe_time_to_live, &name,
	                                   c->errmsg);
	if (rc == SHOAL_OK)
		rc = st_table_describe(node_group_env(c->group), name, c->arena, &info, c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_describe_ttl_resp_to_pb(c->arena, &info.def, &out, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TIME_TO_LIVE;
	c->resp->describe_time_to_live = out;
	return SHOAL_OK;
}

int node_handle_list_tables(node_call *c)
{
	const char *start, **names, *last;
	uint32_t limit, n;
	Shoal__ListTablesResponse *out;
	int rc = wire_list_tables_from_pb(c->arena, c->req->request->list_tables, &start, &limit,
	                                  c->errmsg);
	if (rc == SHOAL_OK)
		rc = st_table_list(node_group_env(c->group), start, limit, c->arena, &names, &n,
		                   &last, c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_list_tables_resp_to_pb(c->arena, names, n, last, &out, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_LIST_TABLES;
	c->resp->list_tables = out;
	return SHOAL_OK;
}

/* Every table name of the group's storage, in name order (arena memory). */
static int all_tables(node_call *c, const char ***out, uint32_t *count)
{
	st_env *env = node_group_env(c->group);
	const char *start = NULL;
	const char **all = NULL;
	uint32_t n_all = 0, cap = 0;
	for (;;) {
		const char **names, *last;
		uint32_t n;
		int rc = st_table_list(env, start, 100, c->arena, &names, &n, &last, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (n_all + n > cap) {
			uint32_t ncap = cap == 0 ? 128 : cap * 2;
			while (ncap < n_all + n)
				ncap *= 2;
			const char **v = sh_arena_alloc(c->arena, ncap * sizeof(*v));
			if (v == NULL)
				return nomem(c);
			if (n_all > 0)
				memcpy(v, all, n_all * sizeof(*v));
			all = v;
			cap = ncap;
		}
		if (n > 0)
			memcpy(all + n_all, names, n * sizeof(*names));
		n_all += n;
		if (last == NULL || n == 0)
			break;
		start = last;
	}
	*out = all;
	*count = n_all;
	return SHOAL_OK;
}

/* TableStats.indexes: this replica's progress entries of table `name`. */
static int index_stats(node_call *c, const char *name, const st_index_progress *p, uint32_t n,
                       Shoal__TableStats *t)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += strcmp(p[i].table, name) == 0;
	if (k == 0)
		return SHOAL_OK;
	t->indexes = sh_arena_calloc(c->arena, k, sizeof(*t->indexes));
	Shoal__IndexStats *x = sh_arena_calloc(c->arena, k, sizeof(*x));
	if (t->indexes == NULL || x == NULL)
		return nomem(c);
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(p[i].table, name) != 0)
			continue;
		Shoal__IndexStats *s = &x[t->n_indexes];
		shoal__index_stats__init(s);
		s->index_name = (char *)p[i].index;
		s->index_id = p[i].index_id;
		s->item_count = p[i].item_count;
		s->size_bytes = p[i].size_bytes;
		s->local = p[i].local;
		s->write_shards = p[i].write_shards;
		s->backfill_done = p[i].backfill_done;
		s->backfill_seq = p[i].backfill_seq;
		int64_t lag;
		if (node_ship_last_lag(c->node->ship, p[i].table_id, p[i].index_id, &lag)) {
			s->lag_ms = lag;
			s->lag_seen = true;
		}
		s->status = (char *)wire_index_status_name(p[i].status);
		t->indexes[t->n_indexes++] = s;
	}
	return SHOAL_OK;
}

int node_handle_group_status(node_call *c)
{
	node_group_status st;
	node_group_status_get(c->group, &st);
	Shoal__GroupStatus *gs = sh_arena_alloc(c->arena, sizeof(*gs));
	if (gs == NULL)
		return nomem(c);
	shoal__group_status__init(gs);
	gs->group = node_group_id(c->group);
	gs->node = c->node->id;
	gs->role = (char *)(st.failed ? "unavailable" : node_role_name(st.role));
	gs->term = st.term;
	gs->commit_index = st.commit;
	gs->applied_index = st.applied;
	gs->leader_node = st.leader;
	c->nresp->status = gs;
	if (st.failed) {
		gs->error = sh_arena_strndup(c->arena, st.error, strlen(st.error));
		return gs->error != NULL ? SHOAL_OK : nomem(c);
	}

	const char **names;
	uint32_t n;
	st_env *env = node_group_env(c->group);
	st_outbox_info ob;
	int rc = st_outbox_get_info(env, &ob, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = node_cap_status(c->node->cap, gs->group, c->arena, gs)) != SHOAL_OK)
		return nomem(c);
	/* The executor's findings, in group 0's row of its leader (the one
	 * that runs it). */
	uint64_t term;
	if (gs->group == 0 && node_group_leading(c->group, &term) &&
	    node_elastic_unsplit_status(c->node, c->arena, gs) != SHOAL_OK)
		return nomem(c);
	gs->outbox_depth = ob.depth;
	gs->outbox_last_seq = ob.last_seq;
	gs->outbox_shipped = ob.shipped;
	if (ob.depth > 0 && ob.oldest_ts_ms > 0) {
		int64_t age = node_wall_ms() - ob.oldest_ts_ms;
		gs->outbox_oldest_age_ms = age > 0 ? age : 0;
	}
	st_index_progress *prog;
	uint32_t n_prog;
	if ((rc = st_index_progress_list(env, c->arena, &prog, &n_prog, c->errmsg)) != SHOAL_OK)
		return rc;
	/* The entries of what this group serves (storage/parts.h, Counting). */
	if ((rc = st_part_uncount_indexes(env, prog, n_prog, c->errmsg)) != SHOAL_OK)
		return rc;
	if ((rc = all_tables(c, &names, &n)) != SHOAL_OK)
		return rc;
	gs->tables = sh_arena_calloc(c->arena, n, sizeof(*gs->tables));
	if (gs->tables == NULL)
		return nomem(c);
	for (uint32_t i = 0; i < n; i++) {
		st_table_info info;
		rc = st_table_describe(env, names[i], c->arena, &info, c->errmsg);
		if (rc == SHOAL_E_NOT_FOUND)
			continue; /* dropped meanwhile */
		/* The counts of what this group serves. */
		if (rc == SHOAL_OK)
			rc = st_part_uncount(env, &info, c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		Shoal__TableStats *t = sh_arena_alloc(c->arena, sizeof(*t));
		if (t == NULL)
			return nomem(c);
		shoal__table_stats__init(t);
		t->table_name = (char *)names[i];
		t->item_count = info.item_count;
		t->size_bytes = info.size_bytes;
		t->table_number = info.def.id;
		t->ttl_ms = info.def.ttl_ms;
		if ((rc = index_stats(c, names[i], prog, n_prog, t)) != SHOAL_OK)
			return rc;
		gs->tables[gs->n_tables++] = t;
	}
	return SHOAL_OK;
}

int node_handle_list_catalog(node_call *c)
{
	const char **names;
	uint32_t n;
	st_env *env = node_group_env(c->group);
	Shoal__NodeResponse *nr = c->nresp;
	int rc = all_tables(c, &names, &n);
	if (rc != SHOAL_OK)
		return rc;
	nr->catalog = sh_arena_calloc(c->arena, n, sizeof(*nr->catalog));
	if (nr->catalog == NULL)
		return nomem(c);
	for (uint32_t i = 0; i < n; i++) {
		st_table_info info;
		rc = st_table_describe(env, names[i], c->arena, &info, c->errmsg);
		if (rc == SHOAL_E_NOT_FOUND)
			continue;
		if (rc != SHOAL_OK)
			return rc;
		Shoal__TableDefine *d;
		if ((rc = wire_table_define_to_pb(c->arena, &info.def, &d, c->errmsg)) != SHOAL_OK)
			return rc;
		nr->catalog[nr->n_catalog++] = d;
	}
	/* Deleted tables whose streams are kept: ListStreams and the routing of
	 * their streams (router/stream.c). */
	st_table_def *dropped;
	int64_t *when;
	uint32_t nd;
	if ((rc = st_stream_dropped_list(env, c->arena, &dropped, &when, &nd, c->errmsg)) !=
	    SHOAL_OK)
		return rc;
	if (nd > 0) {
		Shoal__TableDefine **all =
		    sh_arena_calloc(c->arena, nr->n_catalog + nd, sizeof(*all));
		if (all == NULL)
			return nomem(c);
		memcpy(all, nr->catalog, nr->n_catalog * sizeof(*all));
		nr->catalog = all;
	}
	for (uint32_t i = 0; i < nd; i++) {
		Shoal__TableDefine *d;
		if ((rc = wire_table_define_to_pb(c->arena, &dropped[i], &d, c->errmsg)) !=
		    SHOAL_OK)
			return rc;
		d->dropped_ms = when[i];
		nr->catalog[nr->n_catalog++] = d;
	}
	return SHOAL_OK;
}

/* The replica scrub (scrub.c has the protocol): this replica's result of
 * scrub (proposer, seq); with diverged, the leader says it differs from the
 * majority's, and the scrub's loop checks that and rebuilds. */
int node_handle_scrub_check(node_call *c)
{
	const Shoal__ScrubCheck *q = c->req->scrub_check;
	node_scrub_result r;
	Shoal__ScrubResult *out = sh_arena_alloc(c->arena, sizeof(*out));
	if (out == NULL)
		return nomem(c);
	shoal__scrub_result__init(out);
	c->nresp->scrub = out;
	if (!node_fsm_scrub_result(node_group_fsm(c->group), q->proposer, q->seq, &r))
		return SHOAL_OK; /* found = false: not applied here (yet) */
	if (q->diverged) {
		node_scrub_told(c->node->scrub, node_group_id(c->group), q->proposer, q->seq,
		                q->majority_hash);
		return SHOAL_OK;
	}
	out->found = true;
	out->index = r.index;
	out->count = r.count;
	out->hash = r.hash;
	out->start.len = r.start_len;
	out->end.len = r.end_len;
	out->start.data = sh_arena_memdup(c->arena, r.start, r.start_len > 0 ? r.start_len : 1);
	out->end.data = sh_arena_memdup(c->arena, r.end, r.end_len > 0 ? r.end_len : 1);
	if (out->start.data == NULL || out->end.data == NULL)
		return nomem(c);
	return SHOAL_OK;
}
