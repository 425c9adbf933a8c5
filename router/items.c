/*
 * items.c -- the single-partition operations: GetItem, PutItem, UpdateItem,
 * DeleteItem and Query (on an index: index.c).
 *
 * Each handler validates the request at the API level (wire_*_req_from_pb),
 * finds the table in the catalog, takes the partition-key value (from the
 * Key or Item; for Query, the hash-key equality of KeyConditionExpression via
 * st_query_partition_key), hashes it to the owning group and forwards the
 * client's request unchanged in a NodeRequest.  The node checks everything
 * again against the table and answers exactly as DynamoDB would; its
 * Response is passed through as the answer.  Eventually consistent reads go
 * to any replica, everything else to the leader.
 *
 * When the key does not match the table's key schema, the router cannot
 * place it, and the node's answer is wanted anyway (its checks come in
 * DynamoDB's order): such a request goes to the first data group, which
 * refuses it with the exact message.
 *
 * A data group answering ResourceNotFound for a table the catalog has gets
 * its definition re-sent (rt_repair) and the request is retried once.
 *
 * Worker thread.  Most of these requests never get here: fast.c routes them
 * the same way in nng callbacks and hands over only what it cannot finish
 * (unknown table, unplaceable key, Query on an index, retries, repair) --
 * a change to the routing here needs the same change there.
 */
#include "router/router.h"

int rt_forward(rt_req *r, const rt_table *t, uint32_t group, bool any_replica, uint32_t shard)
{
	for (int round = 0;; round++) {
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.request = (Shoal__Request *)r->in;
		nr.index_shard = shard;
		nr.table_id = t != NULL ? t->id : 0;
		rt_call c = {.group = group, .req = &nr, .any_replica = any_replica};
		rt_call_all(r->rt, r->a, &c, 1, r->deadline);
		if (c.rc != SHOAL_OK)
			return sh_errf(r->errmsg, c.rc, "%s", c.errmsg);
		if (c.resp->response == NULL)
			return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
			               "node %u answered group %u without a response",
			               c.answered_by, group);
		if (rt_resp_code(c.resp) == SHOAL_E_WRONG_EPOCH && t != NULL) {
			/* The table was dropped and recreated through another router:
			 * this cache placed the key by the old table's hash, and the
			 * node did nothing.  Refresh; the front door runs the handler
			 * again with the new definition (once). */
			const rt_table *fresh;
			int rc = rt_table_lookup(r, t->name, true, &fresh);
			if (rc != SHOAL_OK)
				return rc;
			return sh_errf(r->errmsg, SHOAL_E_WRONG_EPOCH,
			               "Table %s was recreated while this request was routed (%s)",
			               t->name, c.resp->response->message);
		}
		if (rt_resp_code(c.resp) == SHOAL_E_NOT_FOUND && round == 0 && t != NULL) {
			int rc = rt_repair(r, group, &t, 1);
			if (rc == SHOAL_OK)
				continue;
			if (rc == SHOAL_E_NOT_FOUND)
				return rc;
			rt_log("repair of %s in group %u failed: %s", t->name, group, r->errmsg);
		}
		r->out = c.resp->response;
		return SHOAL_OK;
	}
}

static uint32_t first_data_group(const rt_router *rt)
{
	return sh_cluster_partition_group(rt->conf, 0);
}

/* The group of a Key (item == false) or Item; the first data group when the
 * key does not match the schema (the node will say how). */
static uint32_t key_group(const rt_req *r, const rt_table *t, const st_value *key, bool item)
{
	const st_value *pk;
	if (st_route_key(&t->def.key, key, item, &pk, NULL, NULL) != SHOAL_OK)
		return first_data_group(r->rt);
	return rt_group_of(r->rt, t->id, pk);
}

int rt_get_item(rt_req *r)
{
	st_get_req q;
	const rt_table *t;
	int rc = wire_get_req_from_pb(r->a, r->in->get_item, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;
	return rt_forward(r, t, key_group(r, t, q.key, false), !r->in->get_item->consistent_read,
	                  0);
}

int rt_put_item(rt_req *r)
{
	st_put_req q;
	const rt_table *t;
	int rc = wire_put_req_from_pb(r->a, r->in->put_item, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;
	return rt_forward(r, t, key_group(r, t, q.item, true), false, 0);
}

int rt_update_item(rt_req *r)
{
	st_update_req q;
	const rt_table *t;
	int rc = wire_update_req_from_pb(r->a, r->in->update_item, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;
	return rt_forward(r, t, key_group(r, t, q.key, false), false, 0);
}

int rt_delete_item(rt_req *r)
{
	st_delete_req q;
	const rt_table *t;
	int rc = wire_delete_req_from_pb(r->a, r->in->delete_item, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;
	return rt_forward(r, t, key_group(r, t, q.key, false), false, 0);
}

int rt_query(rt_req *r)
{
	st_query_req q;
	const rt_table *t;
	int rc = wire_query_req_from_pb(r->a, r->in->query, &q, r->errmsg);
	if (rc == SHOAL_OK)
		rc = rt_table_lookup(r, q.table, false, &t);
	if (rc != SHOAL_OK)
		return rc;
	if (q.index != NULL)
		return rt_index_query(r, t, &q); /* index.c */
	const st_value *pk;
	rc = st_query_partition_key(&q, &t->def.key, r->a, &pk, r->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return rt_forward(r, t, rt_group_of(r->rt, t->id, pk), !q.consistent, 0);
}
