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
 *   UpdateTable    update_table to group 0, which validates it against the
 *                table, assigns new GSIs their ids (CREATING) and answers
 *                the new TableDefine; then that definition to every data
 *                group (define_table with the same id redefines: a new GSI
 *                starts its backfill there, a deleted one loses its entries).
 *   Activation     a CREATING GSI becomes ACTIVE when every data group's
 *                leader reports its backfill done and shipped
 *                (rt_index_try_activate, from DescribeTable and from reads
 *                of the index): activate_index to group 0, then the new
 *                definition everywhere.
 *
 * For a table with indexes DescribeTable takes ItemCount, TableSizeBytes
 * and each index's ItemCount/IndexSizeBytes from the data groups' leaders'
 * GroupStatus (TableStats and its IndexStats).
 *
 * The catalog cache is refreshed after CreateTable, UpdateTable, activation
 * and DeleteTable.  Worker thread.
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

/* Sends group 0's stored definition of a table to every data group in
 * parallel (define_table: creates the table there, or redefines it with the
 * same id), then refreshes the catalog.  A data group that cannot be reached
 * now is repaired later, on its first ResourceNotFound (and for indexes, by
 * rt_index_try_activate). */
static int define_everywhere(rt_req *r, const Shoal__TableDefine *stored, const char *op,
                             const char *name)
{
	rt_call *calls;
	Shoal__NodeRequest *reqs;
	int rc;
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
			rt_log("%s %s: group %u not defined yet (%s); it will be repaired "
			       "on first use",
			       op, name, calls[i].group,
			       calls[i].rc != SHOAL_OK           ? calls[i].errmsg
			       : calls[i].resp->response != NULL ? calls[i].resp->response->message
			                                         : "no response");
	}
	char msg[SH_ERRMSG_SIZE];
	if (rt_catalog_refresh(r->rt, r->deadline, msg) != SHOAL_OK)
		rt_log("%s %s: catalog refresh failed: %s", op, name, msg);
	return SHOAL_OK;
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

	if ((rc = define_everywhere(r, stored, "CreateTable", def.name)) != SHOAL_OK)
		return rc;

	st_table_info info = {0};
	if ((rc = rt_table_def_from_pb(r->a, stored, &info.def, r->errmsg)) != SHOAL_OK)
		return rc;
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

/* ------------------------------------------------------------------------ */
/* Index progress and activation                                             */
/* ------------------------------------------------------------------------ */

/* GroupStatus answers of the data groups' leaders. */
typedef struct statuses {
	rt_call *calls;
	uint32_t n;
} statuses;

/* Asks every data group's believed leader for its GroupStatus, in parallel
 * with the short status timeout; a follower's answer (stale leader cache)
 * is followed by a question to the leader it names. */
static int leader_statuses(rt_req *r, statuses *st)
{
	uint32_t groups[SH_MAX_GROUPS];
	uint32_t ng = rt_data_groups(r->rt->conf, groups);
	rt_call *calls;
	Shoal__NodeRequest *reqs;
	int rc = alloc_calls(r, &calls, &reqs, ng);
	if (rc != SHOAL_OK)
		return rc;
	int64_t deadline = rt_now_ms() + r->rt->opt.status_ms;
	if (deadline > r->deadline)
		deadline = r->deadline;
	for (uint32_t i = 0; i < ng; i++) {
		shoal__node_request__init(&reqs[i]);
		reqs[i].group_status = true;
		calls[i].group = groups[i];
		calls[i].req = &reqs[i];
	}
	rt_call_all(r->rt, r->a, calls, ng, deadline);
	rt_call *again;
	Shoal__NodeRequest *again_reqs;
	uint32_t n_again = 0;
	uint32_t *slot = sh_arena_calloc(r->a, ng + 1, sizeof(*slot));
	if (slot == NULL || alloc_calls(r, &again, &again_reqs, ng) != SHOAL_OK)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < ng; i++) {
		const Shoal__GroupStatus *gs =
		    calls[i].rc == SHOAL_OK ? calls[i].resp->status : NULL;
		if (gs == NULL || gs->role == NULL || strcmp(gs->role, "leader") == 0 ||
		    gs->leader_node == 0 || gs->leader_node == calls[i].answered_by)
			continue;
		shoal__node_request__init(&again_reqs[n_again]);
		again_reqs[n_again].group_status = true;
		again[n_again].group = groups[i];
		again[n_again].req = &again_reqs[n_again];
		again[n_again].only_node = gs->leader_node;
		slot[n_again++] = i;
	}
	if (n_again > 0) {
		deadline = rt_now_ms() + r->rt->opt.status_ms;
		if (deadline > r->deadline)
			deadline = r->deadline;
		rt_call_all(r->rt, r->a, again, n_again, deadline);
		for (uint32_t k = 0; k < n_again; k++)
			if (again[k].rc == SHOAL_OK && again[k].resp->status != NULL)
				calls[slot[k]] = again[k];
	}
	st->calls = calls;
	st->n = ng;
	return SHOAL_OK;
}

static const Shoal__GroupStatus *status_of(const rt_call *c)
{
	return c->rc == SHOAL_OK && c->resp != NULL ? c->resp->status : NULL;
}

static const Shoal__TableStats *table_stats(const Shoal__GroupStatus *gs, const char *table)
{
	for (size_t i = 0; gs != NULL && i < gs->n_tables; i++)
		if (gs->tables[i]->table_name != NULL &&
		    strcmp(gs->tables[i]->table_name, table) == 0)
			return gs->tables[i];
	return NULL;
}

static const Shoal__IndexStats *index_stats(const Shoal__GroupStatus *gs, const char *table,
                                            const char *index)
{
	const Shoal__TableStats *ts = table_stats(gs, table);
	for (size_t i = 0; ts != NULL && i < ts->n_indexes; i++)
		if (ts->indexes[i]->index_name != NULL &&
		    strcmp(ts->indexes[i]->index_name, index) == 0)
			return ts->indexes[i];
	return NULL;
}

/* Has every data group's leader finished the backfill of GSI `index` and
 * shipped it (outbox_shipped >= backfill_seq: every target applied it)?  A
 * leader whose copy of the table lacks the index gets the catalog's
 * definition again (t, when known). */
static bool backfill_complete(rt_req *r, const statuses *st, const rt_table *t, const char *table,
                              const char *index)
{
	bool done = true;
	for (uint32_t i = 0; i < st->n; i++) {
		const Shoal__GroupStatus *gs = status_of(&st->calls[i]);
		if (gs == NULL || gs->role == NULL || strcmp(gs->role, "leader") != 0) {
			done = false;
			continue;
		}
		const Shoal__IndexStats *is = index_stats(gs, table, index);
		if (is == NULL) {
			done = false;
			if (t != NULL && t->pb != NULL && st->calls[i].group != 0 &&
			    table_stats(gs, table) != NULL) {
				Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
				nr.define_table = (Shoal__TableDefine *)t->pb;
				rt_call c = {.group = st->calls[i].group, .req = &nr};
				rt_call_all(r->rt, r->a, &c, 1, r->deadline);
				atomic_fetch_add(&r->rt->metrics.repairs, 1);
				rt_log(
				    "index %s of %s: group %u does not know it; definition re-sent",
				    index, table, st->calls[i].group);
			}
			continue;
		}
		if (!is->backfill_done || gs->outbox_shipped < is->backfill_seq)
			done = false;
	}
	return done;
}

/* activate_index in group 0, then the new definition everywhere. */
static int activate(rt_req *r, const char *table, const char *index, bool *active)
{
	*active = false;
	Shoal__IndexActivate ia = SHOAL__INDEX_ACTIVATE__INIT;
	ia.table_name = (char *)table;
	ia.index_name = (char *)index;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.activate_index = &ia;
	Shoal__NodeResponse *resp;
	int rc = call_group0(r, &nr, &resp);
	if (rc != SHOAL_OK)
		return rc;
	if (rt_resp_code(resp) != SHOAL_OK) {
		rt_log("activating index %s of %s: %s", index, table,
		       resp->response != NULL ? resp->response->message : "refused");
		return SHOAL_OK;
	}
	const Shoal__TableDefine *stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
	if (stored != NULL && stored->def != NULL) {
		rc = define_everywhere(r, stored, "activation of", index);
		if (rc != SHOAL_OK)
			return rc;
	}
	rt_log("index %s of %s is ACTIVE", index, table);
	*active = true;
	return SHOAL_OK;
}

int rt_index_try_activate(rt_req *r, const rt_table *t, const char *index, bool *active)
{
	*active = false;
	statuses st;
	int rc = leader_statuses(r, &st);
	if (rc != SHOAL_OK)
		return rc;
	if (!backfill_complete(r, &st, t, t->name, index))
		return SHOAL_OK;
	return activate(r, t->name, index, active);
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

/* DescribeTable of a table with indexes: counts from the data groups'
 * leaders' GroupStatus (the table's and each index's entries), and a
 * CREATING GSI whose backfill is complete everywhere is activated. */
static int describe_with_indexes(rt_req *r, Shoal__NodeResponse *resp,
                                 Shoal__TableDescription *desc)
{
	statuses st;
	int rc = leader_statuses(r, &st);
	if (rc != SHOAL_OK)
		return rc;
	const char *table = desc->table_name;
	int64_t items = 0, bytes = 0;
	for (uint32_t i = 0; i < st.n; i++) {
		const Shoal__TableStats *ts = table_stats(status_of(&st.calls[i]), table);
		if (ts != NULL) {
			items += (int64_t)ts->item_count;
			bytes += (int64_t)ts->size_bytes;
		}
	}
	desc->item_count = items;
	desc->table_size_bytes = bytes;
	for (size_t k = 0; k < desc->n_local_secondary_indexes; k++) {
		Shoal__LocalSecondaryIndexDescription *l = desc->local_secondary_indexes[k];
		l->item_count = l->index_size_bytes = 0;
		for (uint32_t i = 0; i < st.n; i++) {
			const Shoal__IndexStats *is =
			    index_stats(status_of(&st.calls[i]), table, l->index_name);
			if (is != NULL) {
				l->item_count += (int64_t)is->item_count;
				l->index_size_bytes += (int64_t)is->size_bytes;
			}
		}
	}
	const rt_table *t = NULL;
	for (size_t k = 0; k < desc->n_global_secondary_indexes; k++) {
		Shoal__GlobalSecondaryIndexDescription *g = desc->global_secondary_indexes[k];
		g->item_count = g->index_size_bytes = 0;
		for (uint32_t i = 0; i < st.n; i++) {
			const Shoal__IndexStats *is =
			    index_stats(status_of(&st.calls[i]), table, g->index_name);
			if (is != NULL) {
				g->item_count += (int64_t)is->item_count;
				g->index_size_bytes += (int64_t)is->size_bytes;
			}
		}
		if (g->index_status == NULL || strcmp(g->index_status, "CREATING") != 0)
			continue;
		if (t == NULL && rt_table_lookup(r, table, false, &t) != SHOAL_OK)
			t = NULL;
		if (!backfill_complete(r, &st, t, table, g->index_name))
			continue;
		bool active;
		if ((rc = activate(r, table, g->index_name, &active)) != SHOAL_OK)
			return rc;
		if (active) {
			g->index_status = "ACTIVE";
			g->backfilling = false;
		}
	}
	r->out = resp->response;
	return SHOAL_OK;
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
	if (desc->n_global_secondary_indexes + desc->n_local_secondary_indexes > 0)
		return describe_with_indexes(r, resp, desc);
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
/* UpdateTable                                                               */
/* ------------------------------------------------------------------------ */

/* UpdateTable's TableDescription: the new definition; an index being
 * deleted still shown, DELETING; UPDATING while an index is not ACTIVE. */
static int update_desc(rt_req *r, const Shoal__TableDefine *stored, const rt_table *before,
                       const st_table_update_req *u, Shoal__TableDescription **out)
{
	st_table_info info = {0};
	int rc = rt_table_def_from_pb(r->a, stored, &info.def, r->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_index_def *all = sh_arena_calloc(r->a, info.def.n_indexes + u->n_drop + 1, sizeof(*all));
	if (all == NULL)
		return nomem(r);
	memcpy(all, info.def.indexes, info.def.n_indexes * sizeof(*all));
	for (uint32_t i = 0; i < u->n_drop && before != NULL; i++) {
		const st_index_def *x = rt_index_find(before, u->drop[i]);
		bool still = false;
		for (uint32_t k = 0; k < info.def.n_indexes; k++)
			still |= strcmp(info.def.indexes[k].name, u->drop[i]) == 0;
		if (x != NULL && !still) {
			all[info.def.n_indexes] = *x;
			all[info.def.n_indexes++].status = ST_INDEX_DELETING;
		}
	}
	info.def.indexes = all;
	bool updating = false;
	for (uint32_t i = 0; i < info.def.n_indexes; i++)
		updating |=
		    !info.def.indexes[i].local && info.def.indexes[i].status != ST_INDEX_ACTIVE;
	return wire_table_desc_to_pb(r->a, &info, updating ? "UPDATING" : "ACTIVE", out, r->errmsg);
}

int rt_update_table(rt_req *r)
{
	st_table_update_req u;
	int rc = wire_update_table_from_pb(r->a, r->in->update_table, &u, r->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* The definition before (for the DELETING index in the answer). */
	const rt_table *before = NULL;
	if (u.n_drop > 0 && rt_table_lookup(r, u.name, false, &before) != SHOAL_OK)
		before = NULL;

	Shoal__TableUpdate tu = SHOAL__TABLE_UPDATE__INIT;
	tu.update = r->in->update_table;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.update_table = &tu;
	Shoal__NodeResponse *resp;
	if ((rc = call_group0(r, &nr, &resp)) != SHOAL_OK)
		return rc;
	if (rt_resp_code(resp) != SHOAL_OK) {
		r->out = resp->response; /* ResourceNotFound, index exists, ... */
		return SHOAL_OK;
	}
	const Shoal__TableDefine *stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
	if (stored == NULL || stored->def == NULL || stored->table_id == 0)
		return sh_errf(r->errmsg, SHOAL_E_INTERNAL,
		               "group 0 updated table %s but did not answer its definition",
		               u.name);
	if (u.n_create + u.n_drop > 0) {
		if ((rc = define_everywhere(r, stored, "UpdateTable", u.name)) != SHOAL_OK)
			return rc;
	} else {
		char msg[SH_ERRMSG_SIZE];
		if (rt_catalog_refresh(r->rt, r->deadline, msg) != SHOAL_OK)
			rt_log("UpdateTable %s: catalog refresh failed: %s", u.name, msg);
	}
	Shoal__UpdateTableResponse *ur = sh_arena_alloc(r->a, sizeof(*ur));
	if (ur == NULL)
		return nomem(r);
	shoal__update_table_response__init(ur);
	if ((rc = update_desc(r, stored, before, &u, &ur->table_description)) != SHOAL_OK)
		return rc;
	r->out->result_case = SHOAL__RESPONSE__RESULT_UPDATE_TABLE;
	r->out->update_table = ur;
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
