/*
 * tables.c -- table operations and ClusterStatus.
 *
 * Group 0 holds the catalog; every data group holds a copy of each table's
 * definition (the engine needs it to check keys and count items).
 *
 *   CreateTable    define_table{def, id 0, created_ms now} to group 0, which
 *                  assigns the id and answers the stored TableDefine; then
 *                  the same definition with that id to every data group in
 *                  parallel (a group that cannot be reached now is repaired
 *                  later, on its first ResourceNotFound); then ACTIVE.
 *   DescribeTable  group 0's description, with ItemCount and TableSizeBytes
 *                  summed over the data groups (any replica, short timeout;
 *                  an unreachable group's share is missing, not an error).
 *   ListTables     group 0, paging as the engine does.
 *   DeleteTable    group 0's description, drop in group 0, then in every
 *                  data group; answers the description as DELETING.
 *   ClusterStatus  group_status from every node for every group it hosts, in
 *                  parallel with a short timeout; a node that does not answer
 *                  is reachable = false and its groups "unreachable".
 *
 * The catalog cache is refreshed after CreateTable and DeleteTable.  Worker
 * thread.
 */
#include <stdio.h>
#include <string.h>

#include "router/router.h"

/* Time CreateTable keeps, after defining the table in the data groups, for
 * refreshing the catalog. */
#define DEFINE_RESERVE_MS 2000

static int nomem(rt_req *r)
{
	return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory");
}

/* One call to the leader of group 0; *resp is the node's answer. */
static int call_group0(rt_req *r, Shoal__NodeRequest *nr, Shoal__NodeResponse **resp)
{
	rt_call c = {.group = 0, .req = nr};
	rt_call_all(r->rt, r->a, &c, 1, r->deadline);
	if (c.rc != SHOAL_OK)
		return sh_errf(r->errmsg, c.rc, "%s", c.errmsg);
	if (c.resp->response == NULL && rt_resp_code(c.resp) != SHOAL_OK)
		return sh_errf(r->errmsg, SHOAL_E_INTERNAL, "group 0 answered without a status");
	*resp = c.resp;
	return SHOAL_OK;
}

/* Sends one NodeRequest per data group other than 0 (reqs[i] for group i),
 * in parallel; calls[] receive the answers.  Returns the number of calls. */
static uint32_t to_data_groups(rt_req *r, Shoal__NodeRequest *proto, rt_call *calls,
                               Shoal__NodeRequest *reqs, bool any, int64_t deadline)
{
	uint32_t groups[SH_MAX_GROUPS];
	uint32_t ng = rt_data_groups(r->rt->conf, groups), n = 0;
	for (uint32_t i = 0; i < ng; i++) {
		if (groups[i] == 0)
			continue;
		reqs[n] = *proto;
		memset(&calls[n], 0, sizeof(calls[n]));
		calls[n].group = groups[i];
		calls[n].req = &reqs[n];
		calls[n].any_replica = any;
		n++;
	}
	rt_call_all(r->rt, r->a, calls, n, deadline);
	return n;
}

static int alloc_calls(rt_req *r, rt_call **calls, Shoal__NodeRequest **reqs, uint32_t n)
{
	*calls = sh_arena_calloc(r->a, n + 1, sizeof(**calls));
	*reqs = sh_arena_calloc(r->a, n + 1, sizeof(**reqs));
	return *calls != NULL && *reqs != NULL ? SHOAL_OK : nomem(r);
}

int rt_create_table(rt_req *r)
{
	const Shoal__CreateTableRequest *in = r->in->create_table;
	st_table_def def;
	int rc = wire_create_table_from_pb(r->a, in, &def, r->errmsg);
	if (rc != SHOAL_OK)
		return rc;

	Shoal__TableDefine td = SHOAL__TABLE_DEFINE__INIT;
	td.def = (Shoal__CreateTableRequest *)in;
	td.created_ms = rt_wall_ms();
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.define_table = &td;
	Shoal__NodeResponse *resp;
	if ((rc = call_group0(r, &nr, &resp)) != SHOAL_OK)
		return rc;
	if (rt_resp_code(resp) != SHOAL_OK) {
		r->out = resp->response; /* e.g. ResourceInUseException */
		return SHOAL_OK;
	}
	const Shoal__TableDefine *stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
	if (stored == NULL || stored->def == NULL || stored->table_id == 0)
		return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
		               "group 0 created table %s but did not answer its definition",
		               def.name);

	rt_call *calls;
	Shoal__NodeRequest *reqs;
	if ((rc = alloc_calls(r, &calls, &reqs, r->rt->conf->groups)) != SHOAL_OK)
		return rc;
	Shoal__NodeRequest dnr = SHOAL__NODE_REQUEST__INIT;
	dnr.define_table = (Shoal__TableDefine *)stored;
	/* Keep time for the catalog refresh: a data group that is down now is
	 * repaired on first use anyway. */
	int64_t deadline = r->deadline - DEFINE_RESERVE_MS;
	if (deadline < rt_now_ms() + DEFINE_RESERVE_MS)
		deadline = rt_now_ms() + DEFINE_RESERVE_MS;
	uint32_t n = to_data_groups(r, &dnr, calls, reqs, false, deadline);
	for (uint32_t i = 0; i < n; i++) {
		int code = calls[i].rc != SHOAL_OK ? calls[i].rc : rt_resp_code(calls[i].resp);
		if (code != SHOAL_OK && code != SHOAL_E_IN_USE)
			rt_log("CreateTable %s: group %u not defined yet (%s); it will be repaired "
			       "on first use",
			       def.name, calls[i].group,
			       calls[i].rc != SHOAL_OK ? calls[i].errmsg
			                               : calls[i].resp->response->message);
	}
	char msg[SH_ERRMSG_SIZE];
	if (rt_catalog_refresh(r->rt, r->deadline, msg) != SHOAL_OK)
		rt_log("CreateTable %s: catalog refresh failed: %s", def.name, msg);

	st_table_info info = {0};
	if ((rc = wire_create_table_from_pb(r->a, stored->def, &info.def, r->errmsg)) != SHOAL_OK)
		return rc;
	info.def.id = stored->table_id;
	info.def.created_ms = stored->created_ms;
	Shoal__CreateTableResponse *cr = sh_arena_alloc(r->a, sizeof(*cr));
	if (cr == NULL)
		return nomem(r);
	shoal__create_table_response__init(cr);
	if ((rc = wire_table_desc_to_pb(r->a, &info, "ACTIVE", &cr->table_description,
	                                r->errmsg)) != SHOAL_OK)
		return rc;
	r->out->result_case = SHOAL__RESPONSE__RESULT_CREATE_TABLE;
	r->out->create_table = cr;
	return SHOAL_OK;
}

/* Group 0's DescribeTable answer for `name` (the client's request when it
 * is one). */
static int describe0(rt_req *r, const char *name, Shoal__NodeResponse **resp)
{
	Shoal__DescribeTableRequest *dt = sh_arena_alloc(r->a, sizeof(*dt));
	Shoal__Request *req = sh_arena_alloc(r->a, sizeof(*req));
	if (dt == NULL || req == NULL)
		return nomem(r);
	shoal__describe_table_request__init(dt);
	WIRE_SET(dt, table_name, (char *)name);
	shoal__request__init(req);
	req->request_id = r->in->request_id;
	req->op_case = SHOAL__REQUEST__OP_DESCRIBE_TABLE;
	req->describe_table = dt;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.request = req;
	return call_group0(r, &nr, resp);
}

static Shoal__TableDescription *description_of(const Shoal__NodeResponse *resp)
{
	const Shoal__Response *x = resp->response;
	if (x == NULL || x->result_case != SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE ||
	    x->describe_table == NULL)
		return NULL;
	return x->describe_table->table;
}

int rt_describe_table(rt_req *r)
{
	const char *name;
	int rc = wire_describe_table_from_pb(r->a, r->in->describe_table, &name, r->errmsg);
	Shoal__NodeResponse *resp;
	if (rc == SHOAL_OK)
		rc = describe0(r, name, &resp);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__TableDescription *desc = description_of(resp);
	if (rt_resp_code(resp) != SHOAL_OK || desc == NULL || r->rt->conf->groups == 1) {
		r->out = resp->response;
		return SHOAL_OK;
	}
	rt_call *calls;
	Shoal__NodeRequest *reqs;
	if ((rc = alloc_calls(r, &calls, &reqs, r->rt->conf->groups)) != SHOAL_OK)
		return rc;
	Shoal__NodeRequest dnr = SHOAL__NODE_REQUEST__INIT;
	Shoal__Request req = *r->in;
	dnr.request = &req;
	int64_t deadline = rt_now_ms() + r->rt->opt.status_ms;
	if (deadline > r->deadline)
		deadline = r->deadline;
	uint32_t n = to_data_groups(r, &dnr, calls, reqs, true, deadline);
	int64_t items = 0, bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		const Shoal__TableDescription *d =
		    calls[i].rc == SHOAL_OK ? description_of(calls[i].resp) : NULL;
		if (d == NULL || rt_resp_code(calls[i].resp) != SHOAL_OK)
			continue;
		items += d->item_count;
		bytes += d->table_size_bytes;
	}
	desc->item_count = items;
	desc->table_size_bytes = bytes;
	r->out = resp->response;
	return SHOAL_OK;
}

int rt_list_tables(rt_req *r)
{
	const char *start;
	uint32_t limit;
	int rc = wire_list_tables_from_pb(r->a, r->in->list_tables, &start, &limit, r->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.request = (Shoal__Request *)r->in;
	Shoal__NodeResponse *resp;
	if ((rc = call_group0(r, &nr, &resp)) != SHOAL_OK)
		return rc;
	if (resp->response == NULL)
		return sh_errf(r->errmsg, SHOAL_E_INTERNAL, "group 0 answered without a response");
	r->out = resp->response;
	return SHOAL_OK;
}

int rt_delete_table(rt_req *r)
{
	const char *name;
	int rc = wire_delete_table_from_pb(r->a, r->in->delete_table, &name, r->errmsg);
	Shoal__NodeResponse *resp;
	if (rc == SHOAL_OK)
		rc = describe0(r, name, &resp);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__TableDescription *desc = description_of(resp);
	if (rt_resp_code(resp) != SHOAL_OK || desc == NULL) {
		r->out = resp->response; /* ResourceNotFoundException */
		return SHOAL_OK;
	}
	Shoal__TableDrop drop = SHOAL__TABLE_DROP__INIT;
	drop.table_name = (char *)name;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.drop_table = &drop;
	Shoal__NodeResponse *dresp;
	if ((rc = call_group0(r, &nr, &dresp)) != SHOAL_OK)
		return rc;
	if (rt_resp_code(dresp) != SHOAL_OK) {
		r->out = dresp->response;
		return SHOAL_OK;
	}
	rt_call *calls;
	Shoal__NodeRequest *reqs;
	if ((rc = alloc_calls(r, &calls, &reqs, r->rt->conf->groups)) != SHOAL_OK)
		return rc;
	uint32_t n = to_data_groups(r, &nr, calls, reqs, false, r->deadline);
	for (uint32_t i = 0; i < n; i++) {
		int code = calls[i].rc != SHOAL_OK ? calls[i].rc : rt_resp_code(calls[i].resp);
		if (code != SHOAL_OK && code != SHOAL_E_NOT_FOUND)
			rt_log("DeleteTable %s: group %u did not drop it (%s)", name,
			       calls[i].group,
			       calls[i].rc != SHOAL_OK ? calls[i].errmsg
			                               : calls[i].resp->response->message);
	}
	char msg[SH_ERRMSG_SIZE];
	if (rt_catalog_refresh(r->rt, r->deadline, msg) != SHOAL_OK)
		rt_log("DeleteTable %s: catalog refresh failed: %s", name, msg);

	desc->table_status = "DELETING";
	Shoal__DeleteTableResponse *dr = sh_arena_alloc(r->a, sizeof(*dr));
	if (dr == NULL)
		return nomem(r);
	shoal__delete_table_response__init(dr);
	dr->table_description = desc;
	r->out->result_case = SHOAL__RESPONSE__RESULT_DELETE_TABLE;
	r->out->delete_table = dr;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* ClusterStatus                                                             */
/* ------------------------------------------------------------------------ */

static Shoal__GroupStatus *status_row(rt_req *r, uint32_t group, uint32_t node, const char *role,
                                      const char *error)
{
	Shoal__GroupStatus *gs = sh_arena_alloc(r->a, sizeof(*gs));
	if (gs == NULL)
		return NULL;
	shoal__group_status__init(gs);
	gs->group = group;
	gs->node = node;
	gs->role = (char *)role;
	gs->error = sh_arena_strndup(r->a, error, strlen(error));
	return gs->error != NULL ? gs : NULL;
}

int rt_cluster_status(rt_req *r)
{
	const sh_cluster_conf *conf = r->rt->conf;
	uint32_t n = 0;
	for (uint32_t i = 0; i < conf->n_nodes; i++)
		for (uint32_t g = 0; g < conf->groups; g++)
			n += sh_cluster_hosts(conf, conf->nodes[i].id, g);
	rt_call *calls;
	Shoal__NodeRequest *reqs;
	int rc = alloc_calls(r, &calls, &reqs, n);
	if (rc != SHOAL_OK)
		return rc;
	n = 0;
	for (uint32_t i = 0; i < conf->n_nodes; i++)
		for (uint32_t g = 0; g < conf->groups; g++) {
			if (!sh_cluster_hosts(conf, conf->nodes[i].id, g))
				continue;
			shoal__node_request__init(&reqs[n]);
			reqs[n].group_status = true;
			calls[n].group = g;
			calls[n].req = &reqs[n];
			calls[n].only_node = conf->nodes[i].id;
			n++;
		}
	int64_t deadline = rt_now_ms() + r->rt->opt.status_ms;
	rt_call_all(r->rt, r->a, calls, n, deadline);

	Shoal__ClusterStatusResponse *out = sh_arena_alloc(r->a, sizeof(*out));
	if (out == NULL)
		return nomem(r);
	shoal__cluster_status_response__init(out);
	out->partitions = sh_cluster_partitions(conf);
	out->nodes = sh_arena_calloc(r->a, conf->n_nodes + 1, sizeof(*out->nodes));
	out->groups = sh_arena_calloc(r->a, n + 1, sizeof(*out->groups));
	if (out->nodes == NULL || out->groups == NULL)
		return nomem(r);
	for (uint32_t i = 0; i < n; i++) {
		const rt_call *c = &calls[i];
		Shoal__GroupStatus *gs;
		if (c->rc != SHOAL_OK)
			gs = status_row(r, c->group, c->only_node, "unreachable", c->errmsg);
		else if (c->resp->status != NULL)
			gs = c->resp->status;
		else
			gs = status_row(r, c->group, c->only_node, "unavailable",
			                c->resp->response != NULL ? c->resp->response->message
			                                          : "no status");
		if (gs == NULL)
			return nomem(r);
		gs->group = c->group;
		gs->node = c->only_node;
		out->groups[out->n_groups++] = gs;
	}
	for (uint32_t i = 0; i < conf->n_nodes; i++) {
		const sh_node_conf *nc = &conf->nodes[i];
		Shoal__NodeInfo *ni = sh_arena_alloc(r->a, sizeof(*ni));
		char raft[SH_ADDR_MAX + 8];
		snprintf(raft, sizeof(raft), "%s:%u", nc->raft_host, nc->raft_port);
		if (ni == NULL)
			return nomem(r);
		shoal__node_info__init(ni);
		ni->id = nc->id;
		ni->rpc = (char *)nc->rpc;
		ni->raft = sh_arena_strndup(r->a, raft, strlen(raft));
		if (ni->raft == NULL)
			return nomem(r);
		for (uint32_t k = 0; k < n; k++)
			if (calls[k].only_node == nc->id && calls[k].rc == SHOAL_OK)
				ni->reachable = true;
		out->nodes[out->n_nodes++] = ni;
	}
	r->out->result_case = SHOAL__RESPONSE__RESULT_CLUSTER_STATUS;
	r->out->cluster_status = out;
	return SHOAL_OK;
}
