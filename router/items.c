/*
 * items.c -- the single-partition operations: GetItem, PutItem, UpdateItem,
 * DeleteItem and Query (on an index: index.c).
 *
 * Each step validates the request at the API level (wire_*_req_from_pb),
 * finds the table in the catalog, takes the partition-key value (from the
 * Key or Item; for Query, the placement of the hash-key equality of its
 * KeyConditionExpression, st_query_route), finds the owning group and forwards the
 * client's request unchanged (rt_call_forward: its packed bytes inside a
 * NodeRequest written by hand).  The node checks everything again against
 * the table and answers exactly as DynamoDB would; its Response is passed on
 * as the answer without being decoded (rt_job_pass).  Eventually consistent
 * reads go to any replica, everything else to the leader.
 *
 * When the key does not match the table's key schema, the router cannot
 * place it, and the node's answer is wanted anyway (its checks come in
 * DynamoDB's order): such a request goes to the first data group, which
 * refuses it with the exact message.
 *
 *   phase  what                                           next
 *   -----  ---------------------------------------------  ------------------
 *   0      validate; the table (RT_WAIT: refresh, again)  the call: 1
 *   1      the node's answer, passed on                   done
 */
#include "router/router.h"

/* The plan of a single-partition request. */
typedef struct item_plan {
	const char *table;
	const st_value *key; /* Key or Item */
	bool item;           /* key is an Item (PutItem) */
	bool any_replica;
	st_query_req q; /* Query */
	bool query;
	rt_call *call;
} item_plan;

static uint32_t first_data_group(const rt_router *rt)
{
	return sh_cluster_partition_group(rt->conf, 0);
}

/* The group of a Key (item == false) or Item; the first data group when the
 * key does not match the schema (the node will say how). */
static uint32_t key_group(const rt_router *rt, const rt_table *t, const st_value *key, bool item)
{
	const st_value *pk;
	if (st_route_key(&t->def.key, key, item, &pk, NULL, NULL) != SHOAL_OK)
		return first_data_group(rt);
	return rt_group_of(rt, t->id, pk);
}

/* Phase 0's validation: DynamoDB's API-level checks of the request. */
static int validate(rt_job *j, item_plan *p)
{
	const Shoal__Request *in = j->in;
	int rc;
	switch (in->op_case) {
	case SHOAL__REQUEST__OP_GET_ITEM: {
		st_get_req q;
		rc = wire_get_req_from_pb(&j->arena, in->get_item, &q, j->errmsg);
		p->table = q.table;
		p->key = q.key;
		p->any_replica = !in->get_item->consistent_read;
		return rc;
	}
	case SHOAL__REQUEST__OP_PUT_ITEM: {
		st_put_req q;
		rc = wire_put_req_from_pb(&j->arena, in->put_item, &q, j->errmsg);
		p->table = q.table;
		p->key = q.item;
		p->item = true;
		return rc;
	}
	case SHOAL__REQUEST__OP_UPDATE_ITEM: {
		st_update_req q;
		rc = wire_update_req_from_pb(&j->arena, in->update_item, &q, j->errmsg);
		p->table = q.table;
		p->key = q.key;
		return rc;
	}
	case SHOAL__REQUEST__OP_DELETE_ITEM: {
		st_delete_req q;
		rc = wire_delete_req_from_pb(&j->arena, in->delete_item, &q, j->errmsg);
		p->table = q.table;
		p->key = q.key;
		return rc;
	}
	case SHOAL__REQUEST__OP_QUERY:
		rc = wire_query_req_from_pb(&j->arena, in->query, &p->q, j->errmsg);
		p->table = p->q.table;
		p->query = true;
		p->any_replica = !p->q.consistent;
		return rc;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "not a single-item operation");
	}
}

/* The step of all five (Query on an index continues in index.c). */
static int item_step(rt_job *j)
{
	item_plan *p = j->st;
	int rc;
	switch (j->phase) {
	case 0: {
		if (p == NULL) {
			if ((p = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*p))) == NULL)
				return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
			if ((rc = validate(j, p)) != SHOAL_OK)
				return rc;
		}
		const rt_table *t;
		if ((rc = rt_job_table(j, p->table, false, &t)) != SHOAL_OK)
			return rc; /* or RT_WAIT: a refresh, then this phase again */
		uint32_t group;
		if (p->query) {
			if (p->q.index != NULL) {
				j->phase = 10; /* index.c's phases */
				return rt_index_query(j, t, &p->q);
			}
			st_query_route_plan plan;
			if ((rc = st_query_route(&p->q, &t->def, NULL, &j->arena, &plan,
			                         j->errmsg)) != SHOAL_OK)
				return rc;
			group = rt_base_group(j->rt, t->id, plan.hash[0]);
		} else {
			group = key_group(j->rt, t, p->key, p->item);
		}
		if ((p->call = rt_job_call(j, group)) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		p->call->any_replica = p->any_replica;
		if ((rc = rt_call_forward(j, p->call, t, 0)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	}
	case 1:
		return rt_job_pass(j, p->call);
	default:
		return rt_index_query(j, NULL, &p->q);
	}
}

int rt_step_get_item(rt_job *j)
{
	return item_step(j);
}

int rt_step_put_item(rt_job *j)
{
	return item_step(j);
}

int rt_step_update_item(rt_job *j)
{
	return item_step(j);
}

int rt_step_delete_item(rt_job *j)
{
	return item_step(j);
}

int rt_step_query(rt_job *j)
{
	return item_step(j);
}
