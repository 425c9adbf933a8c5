/*
 * tables.c -- table operations (ClusterStatus is in cluster.c).
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
 *
 *   UpdateTable    update_table to group 0, which validates it against the
 *                table, assigns new GSIs their ids (CREATING), applies billing
 *                mode and throughput changes (their times from group 0's
 *                replicated clock) and answers the new TableDefine; then
 *                that definition to every data group (define_table with the
 *                same id redefines: a new GSI starts its backfill there, a
 *                deleted one loses its entries, newer capacity replaces the
 *                old).
 *   Activation     a CREATING GSI becomes ACTIVE when every data group's
 *                leader reports its backfill done and shipped
 *                (rt_index_activate, from DescribeTable and from reads
 *                of the index): activate_index to group 0, then the new
 *                definition everywhere.
 *
 * For a table with indexes DescribeTable takes ItemCount, TableSizeBytes
 * and each index's ItemCount/IndexSizeBytes from the data groups' leaders'
 * GroupStatus (TableStats and its IndexStats).
 *
 * The catalog cache is refreshed after CreateTable, UpdateTable, activation
 * and DeleteTable.
 *
 * Every operation here is a step with phases (each a wave of calls); the
 * pieces several share -- the data groups' leaders' statuses, the
 * definition sent everywhere, activation -- are sub-steps: structures with
 * their own phase, called again at the caller's phase until they return
 * something other than RT_WAIT.
 */
#include <stdio.h>
#include <string.h>

#include "router/router.h"

/* Time CreateTable keeps, after defining the table in the data groups, for
 * refreshing the catalog. */
#define DEFINE_RESERVE_MS 2000

static int nomem(rt_job *j)
{
	return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
}

/* A call of nr to the leader of group 0 in this step's wave. */
static int call_group0(rt_job *j, Shoal__NodeRequest *nr, rt_call **out)
{
	rt_call *c = rt_job_call(j, 0);
	if (c == NULL)
		return nomem(j);
	*out = c;
	return rt_call_request(j, c, nr);
}

/* Group 0's answer: SHOAL_OK with *resp, or the call's failure. */
static int answer0(rt_job *j, rt_call *c, Shoal__NodeResponse **resp)
{
	if (c->rc != SHOAL_OK)
		return rt_job_fail(j, c->rc, "%s", c->errmsg);
	if ((*resp = rt_call_resp(c, &j->arena)) == NULL)
		return rt_job_fail(j, c->rc, "%s", c->errmsg);
	if ((*resp)->response == NULL && c->code != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_INTERNAL, "group 0 answered without a status");
	return SHOAL_OK;
}

int64_t rt_status_deadline(const rt_job *j)
{
	int64_t d = rt_now_ms() + j->rt->opt.status_ms;
	return d < j->deadline ? d : j->deadline;
}

/* ------------------------------------------------------------------------ */
/* Sub-step: the data groups' leaders' GroupStatus                           */
/* ------------------------------------------------------------------------ */

const Shoal__GroupStatus *rt_status_of(rt_job *j, rt_call *c)
{
	if (c == NULL || c->rc != SHOAL_OK)
		return NULL;
	Shoal__NodeResponse *resp = rt_call_resp(c, &j->arena);
	return resp != NULL ? resp->status : NULL;
}

int rt_status_call(rt_job *j, uint32_t group, uint32_t only_node, rt_call **out)
{
	Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
	rt_call *c = rt_job_call(j, group);
	if (nr == NULL || c == NULL)
		return nomem(j);
	shoal__node_request__init(nr);
	nr->group_status = true;
	c->only_node = only_node;
	c->deadline = rt_status_deadline(j);
	*out = c;
	return rt_call_request(j, c, nr);
}

int rt_statuses_step(rt_job *j, rt_statuses *st)
{
	int rc;
	switch (st->phase) {
	case 0:
		st->n = rt_data_groups(j->rt, st->groups);
		for (uint32_t i = 0; i < st->n; i++)
			if ((rc = rt_status_call(j, st->groups[i], 0, &st->calls[i])) != SHOAL_OK)
				return rc;
		st->phase = 1;
		return RT_WAIT;
	case 1:
		st->n_again = 0;
		for (uint32_t i = 0; i < st->n; i++) {
			rt_call *c = st->calls[i];
			const Shoal__GroupStatus *gs = rt_status_of(j, c);
			if (gs == NULL || gs->role == NULL || strcmp(gs->role, "leader") == 0 ||
			    gs->leader_node == 0 || gs->leader_node == c->answered_by)
				continue;
			rc = rt_status_call(j, st->groups[i], gs->leader_node,
			                    &st->again[st->n_again]);
			if (rc != SHOAL_OK)
				return rc;
			st->slot[st->n_again++] = i;
		}
		st->phase = 2;
		if (st->n_again > 0)
			return RT_WAIT;
		/* fall through */
	case 2:
		for (uint32_t k = 0; k < st->n_again; k++)
			if (rt_status_of(j, st->again[k]) != NULL)
				st->calls[st->slot[k]] = st->again[k];
		st->phase = 3;
		/* fall through */
	default:
		return SHOAL_OK;
	}
}

const Shoal__TableStats *rt_table_stats(const Shoal__GroupStatus *gs, const char *table)
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
	const Shoal__TableStats *ts = rt_table_stats(gs, table);
	for (size_t i = 0; ts != NULL && i < ts->n_indexes; i++)
		if (ts->indexes[i]->index_name != NULL &&
		    strcmp(ts->indexes[i]->index_name, index) == 0)
			return ts->indexes[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Sub-step: a definition sent to every data group                           */
/* ------------------------------------------------------------------------ */

/* rt_define_all_step (router.h). */
int rt_define_all_step(rt_job *j, rt_define_all *d)
{
	switch (d->phase) {
	case 0: {
		uint32_t groups[SH_MAX_GROUPS];
		uint32_t ng = rt_data_groups(j->rt, groups);
		/* Keep time for the catalog refresh: a data group that is down
		 * now is repaired on first use anyway. */
		int64_t deadline = j->deadline - DEFINE_RESERVE_MS;
		if (deadline < rt_now_ms() + DEFINE_RESERVE_MS)
			deadline = rt_now_ms() + DEFINE_RESERVE_MS;
		d->n = 0;
		for (uint32_t i = 0; i < ng; i++) {
			if (groups[i] == 0)
				continue;
			Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
			rt_call *c = rt_job_call(j, groups[i]);
			if (nr == NULL || c == NULL)
				return nomem(j);
			shoal__node_request__init(nr);
			nr->define_table = (Shoal__TableDefine *)d->stored;
			c->deadline = deadline;
			int rc = rt_call_request(j, c, nr);
			if (rc != SHOAL_OK)
				return rc;
			d->calls[d->n++] = c;
		}
		d->phase = 1;
		if (d->n > 0)
			return RT_WAIT;
	}
		/* fall through */
	case 1:
		for (uint32_t i = 0; i < d->n; i++) {
			rt_call *c = d->calls[i];
			int code = c->rc != SHOAL_OK ? c->rc : c->code;
			if (code != SHOAL_OK && code != SHOAL_E_IN_USE)
				rt_log("%s %s: group %u not defined yet (%s); it will be repaired "
				       "on first use",
				       d->op, d->name, c->group,
				       c->rc != SHOAL_OK ? c->errmsg : shoal_exception_name(code));
		}
		d->phase = 2;
		return rt_job_refresh(j);
	case 2:
		if (j->refresh_rc != SHOAL_OK)
			rt_log("%s %s: catalog refresh failed: %s", d->op, d->name, j->refresh_msg);
		d->phase = 3;
		/* fall through */
	default:
		return SHOAL_OK;
	}
}

/* ------------------------------------------------------------------------ */
/* Sub-step: activation of a backfilled GSI                                  */
/* ------------------------------------------------------------------------ */

struct rt_activate_sub {
	rt_statuses st;
	rt_call *defs[SH_MAX_GROUPS];
	uint32_t n_defs;
	rt_call *act;
	rt_define_all all;
};

/* Has every data group's leader finished the backfill of GSI `index` and
 * shipped it (outbox_shipped >= backfill_seq: every target applied it)?  A
 * leader whose copy of the table lacks the index gets the catalog's
 * definition again (a call of this wave: s->defs). */
static int backfill_complete(rt_job *j, rt_activate *a, bool *done)
{
	rt_activate_sub *s = a->sub;
	*done = true;
	for (uint32_t i = 0; i < s->st.n; i++) {
		rt_call *c = s->st.calls[i];
		const Shoal__GroupStatus *gs = rt_status_of(j, c);
		if (gs == NULL || gs->role == NULL || strcmp(gs->role, "leader") != 0) {
			*done = false;
			continue;
		}
		const Shoal__IndexStats *is = index_stats(gs, a->table, a->index);
		/* A group that has no definition of the table holds none of its
		 * items, so nothing to backfill (a group added since the table
		 * was made, not given a partition of it yet): whatever reaches
		 * it later comes with group 0's definition of the index
		 * (router/job.c's repair, node/pmove.c's define_at_target). */
		if (is == NULL && rt_table_stats(gs, a->table) == NULL)
			continue;
		if (is == NULL) {
			*done = false;
			if (a->t != NULL && a->t->pb != NULL && c->group != 0 &&
			    rt_table_stats(gs, a->table) != NULL) {
				Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
				rt_call *d = rt_job_call(j, c->group);
				if (nr == NULL || d == NULL)
					return nomem(j);
				shoal__node_request__init(nr);
				nr->define_table = (Shoal__TableDefine *)a->t->pb;
				int rc = rt_call_request(j, d, nr);
				if (rc != SHOAL_OK)
					return rc;
				s->defs[s->n_defs++] = d;
				rt_log(
				    "index %s of %s: group %u does not know it; definition re-sent",
				    a->index, a->table, c->group);
			}
			continue;
		}
		if (!is->backfill_done || gs->outbox_shipped < is->backfill_seq)
			*done = false;
	}
	return SHOAL_OK;
}

int rt_index_activate(rt_job *j, rt_activate *a)
{
	rt_activate_sub *s = a->sub;
	int rc;
	if (s == NULL && (s = a->sub = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
		return nomem(j);
	switch (a->phase) {
	case 0:
		if ((rc = rt_statuses_step(j, &s->st)) != SHOAL_OK)
			return rc;
		a->phase = 1;
		/* fall through */
	case 1: {
		bool done;
		if ((rc = backfill_complete(j, a, &done)) != SHOAL_OK)
			return rc;
		if (s->n_defs > 0) {
			a->phase = 2;
			return RT_WAIT;
		}
		if (!done)
			return SHOAL_OK;
		Shoal__IndexActivate *ia = sh_arena_alloc(&j->arena, sizeof(*ia));
		Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
		if (ia == NULL || nr == NULL)
			return nomem(j);
		shoal__index_activate__init(ia);
		ia->table_name = (char *)a->table;
		ia->index_name = (char *)a->index;
		shoal__node_request__init(nr);
		nr->activate_index = ia;
		if ((rc = call_group0(j, nr, &s->act)) != SHOAL_OK)
			return rc;
		a->phase = 3;
		return RT_WAIT;
	}
	case 2:
		for (uint32_t i = 0; i < s->n_defs; i++)
			atomic_fetch_add(&j->rt->metrics.repairs, 1);
		return SHOAL_OK; /* not active yet */
	case 3: {
		Shoal__NodeResponse *resp;
		if ((rc = answer0(j, s->act, &resp)) != SHOAL_OK)
			return rc;
		if (s->act->code != SHOAL_OK) {
			rt_log("activating index %s of %s: %s", a->index, a->table,
			       resp->response != NULL && resp->response->message != NULL
			           ? resp->response->message
			           : "refused");
			return SHOAL_OK;
		}
		const Shoal__TableDefine *stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
		a->phase = 5;
		if (stored != NULL && stored->def != NULL) {
			s->all.stored = stored;
			s->all.op = "activation of";
			s->all.name = a->index;
			a->phase = 4;
		}
	}
		/* fall through */
	case 4:
		if (a->phase == 4 && (rc = rt_define_all_step(j, &s->all)) != SHOAL_OK)
			return rc;
		/* fall through */
	case 5:
		if (!a->active)
			rt_log("index %s of %s is ACTIVE", a->index, a->table);
		a->active = true;
		a->phase = 5;
		return SHOAL_OK;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "activation: phase %d", a->phase);
	}
}

/* ------------------------------------------------------------------------ */
/* CreateTable                                                               */
/* ------------------------------------------------------------------------ */

typedef struct create_st {
	st_table_def def;
	rt_call *c;
	const Shoal__TableDefine *stored;
	rt_define_all all;
} create_st;

int rt_step_create_table(rt_job *j)
{
	create_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0: {
		const Shoal__CreateTableRequest *in = j->in->create_table;
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		if ((rc = wire_create_table_from_pb(&j->arena, in, &s->def, j->errmsg)) !=
		        SHOAL_OK ||
		    (rc = wire_create_table_check_new(in, j->errmsg)) != SHOAL_OK)
			return rc;
		Shoal__TableDefine *td = sh_arena_alloc(&j->arena, sizeof(*td));
		Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
		if (td == NULL || nr == NULL)
			return nomem(j);
		shoal__table_define__init(td);
		td->def = (Shoal__CreateTableRequest *)in;
		td->created_ms = rt_wall_ms();
		shoal__node_request__init(nr);
		nr->define_table = td;
		if ((rc = call_group0(j, nr, &s->c)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	}
	case 1: {
		Shoal__NodeResponse *resp;
		if ((rc = answer0(j, s->c, &resp)) != SHOAL_OK)
			return rc;
		if (s->c->code != SHOAL_OK)
			return rt_job_pass(j, s->c); /* e.g. ResourceInUseException */
		s->stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
		if (s->stored == NULL || s->stored->def == NULL || s->stored->table_id == 0)
			return rt_job_fail(
			    j, SHOAL_E_INTERNAL,
			    "group 0 created table %s but did not answer its definition",
			    s->def.name);
		s->all.stored = s->stored;
		s->all.op = "CreateTable";
		s->all.name = s->def.name;
		j->phase = 2;
	}
		/* fall through */
	case 2: {
		if ((rc = rt_define_all_step(j, &s->all)) != SHOAL_OK)
			return rc;
		st_table_info info = {0};
		if ((rc = wire_table_define_from_pb(&j->arena, s->stored, &info.def, j->errmsg)) !=
		    SHOAL_OK)
			return rc;
		Shoal__CreateTableResponse *cr = sh_arena_alloc(&j->arena, sizeof(*cr));
		if (cr == NULL)
			return nomem(j);
		shoal__create_table_response__init(cr);
		if ((rc = wire_table_desc_to_pb(&j->arena, &info, "ACTIVE", &cr->table_description,
		                                j->errmsg)) != SHOAL_OK)
			return rc;
		j->out->result_case = SHOAL__RESPONSE__RESULT_CREATE_TABLE;
		j->out->create_table = cr;
		return SHOAL_OK;
	}
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "CreateTable: phase %d", j->phase);
	}
}

/* ------------------------------------------------------------------------ */
/* DescribeTable                                                             */
/* ------------------------------------------------------------------------ */

/* A call of group 0's DescribeTable for `name` (the client's request id). */
static int describe0(rt_job *j, const char *name, rt_call **out)
{
	Shoal__DescribeTableRequest *dt = sh_arena_alloc(&j->arena, sizeof(*dt));
	Shoal__Request *req = sh_arena_alloc(&j->arena, sizeof(*req));
	Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
	if (dt == NULL || req == NULL || nr == NULL)
		return nomem(j);
	shoal__describe_table_request__init(dt);
	WIRE_SET(dt, table_name, (char *)name);
	shoal__request__init(req);
	req->request_id = j->in->request_id;
	req->op_case = SHOAL__REQUEST__OP_DESCRIBE_TABLE;
	req->describe_table = dt;
	shoal__node_request__init(nr);
	nr->request = req;
	return call_group0(j, nr, out);
}

static Shoal__TableDescription *description_of(const Shoal__NodeResponse *resp)
{
	const Shoal__Response *x = resp->response;
	if (x == NULL || x->result_case != SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE ||
	    x->describe_table == NULL)
		return NULL;
	return x->describe_table->table;
}

typedef struct describe_st {
	const char *name;
	rt_call *c;
	Shoal__NodeResponse *resp;
	Shoal__TableDescription *desc;
	rt_call *calls[SH_MAX_GROUPS];
	uint32_t n;
	rt_statuses st;
	size_t k; /* the GSI being looked at (activation) */
	rt_activate act;
	bool act_started;
} describe_st;

/* Counts from the data groups' leaders' GroupStatus (the table's and each
 * index's entries). */
static void describe_counts(rt_job *j, describe_st *s)
{
	Shoal__TableDescription *desc = s->desc;
	const char *table = desc->table_name;
	int64_t items = 0, bytes = 0;
	for (uint32_t i = 0; i < s->st.n; i++) {
		const Shoal__TableStats *ts =
		    rt_table_stats(rt_status_of(j, s->st.calls[i]), table);
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
		for (uint32_t i = 0; i < s->st.n; i++) {
			const Shoal__IndexStats *is =
			    index_stats(rt_status_of(j, s->st.calls[i]), table, l->index_name);
			if (is != NULL) {
				l->item_count += (int64_t)is->item_count;
				l->index_size_bytes += (int64_t)is->size_bytes;
			}
		}
	}
	for (size_t k = 0; k < desc->n_global_secondary_indexes; k++) {
		Shoal__GlobalSecondaryIndexDescription *g = desc->global_secondary_indexes[k];
		g->item_count = g->index_size_bytes = 0;
		for (uint32_t i = 0; i < s->st.n; i++) {
			const Shoal__IndexStats *is =
			    index_stats(rt_status_of(j, s->st.calls[i]), table, g->index_name);
			if (is != NULL) {
				g->item_count += (int64_t)is->item_count;
				g->index_size_bytes += (int64_t)is->size_bytes;
			}
		}
	}
}

/* Phase 11: each CREATING GSI whose backfill is complete everywhere is
 * activated, one after the other. */
static int describe_activate(rt_job *j, describe_st *s)
{
	Shoal__TableDescription *desc = s->desc;
	int rc;
	for (; s->k < desc->n_global_secondary_indexes; s->k++) {
		Shoal__GlobalSecondaryIndexDescription *g = desc->global_secondary_indexes[s->k];
		if (g->index_status == NULL || strcmp(g->index_status, "CREATING") != 0)
			continue;
		if (!s->act_started) {
			const rt_table *t;
			rc = rt_job_table(j, desc->table_name, false, &t);
			if (rc == RT_WAIT)
				return rc;
			memset(&s->act, 0, sizeof(s->act));
			s->act.t = rc == SHOAL_OK ? t : NULL;
			s->act.table = desc->table_name;
			s->act.index = g->index_name;
			s->act_started = true;
		}
		if ((rc = rt_index_activate(j, &s->act)) != SHOAL_OK)
			return rc;
		if (s->act.active) {
			g->index_status = "ACTIVE";
			g->backfilling = false;
		}
		s->act_started = false;
	}
	j->out = s->resp->response;
	return SHOAL_OK;
}

int rt_step_describe_table(rt_job *j)
{
	describe_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0:
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		if ((rc = wire_describe_table_from_pb(&j->arena, j->in->describe_table, &s->name,
		                                      j->errmsg)) != SHOAL_OK)
			return rc;
		if ((rc = describe0(j, s->name, &s->c)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	case 1: {
		if ((rc = answer0(j, s->c, &s->resp)) != SHOAL_OK)
			return rc;
		s->desc = description_of(s->resp);
		if (s->c->code != SHOAL_OK || s->desc == NULL || j->rt->conf->groups == 1)
			return rt_job_pass(j, s->c);
		if (s->desc->n_global_secondary_indexes + s->desc->n_local_secondary_indexes > 0) {
			j->phase = 10;
			return rt_step_describe_table(j);
		}
		uint32_t groups[SH_MAX_GROUPS];
		uint32_t ng = rt_data_groups(j->rt, groups);
		s->n = 0;
		for (uint32_t i = 0; i < ng; i++) {
			if (groups[i] == 0)
				continue;
			Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
			rt_call *c = rt_job_call(j, groups[i]);
			if (nr == NULL || c == NULL)
				return nomem(j);
			shoal__node_request__init(nr);
			nr->request = (Shoal__Request *)j->in;
			c->any_replica = true;
			c->deadline = rt_status_deadline(j);
			if ((rc = rt_call_request(j, c, nr)) != SHOAL_OK)
				return rc;
			s->calls[s->n++] = c;
		}
		j->phase = 2;
		if (s->n > 0)
			return RT_WAIT;
	}
		/* fall through */
	case 2: {
		int64_t items = 0, bytes = 0;
		for (uint32_t i = 0; i < s->n; i++) {
			rt_call *c = s->calls[i];
			Shoal__NodeResponse *r =
			    c->rc == SHOAL_OK ? rt_call_resp(c, &j->arena) : NULL;
			const Shoal__TableDescription *d = r != NULL ? description_of(r) : NULL;
			if (d == NULL || c->code != SHOAL_OK)
				continue;
			items += d->item_count;
			bytes += d->table_size_bytes;
		}
		s->desc->item_count = items;
		s->desc->table_size_bytes = bytes;
		j->out = s->resp->response;
		return SHOAL_OK;
	}
	case 10:
		if ((rc = rt_statuses_step(j, &s->st)) != SHOAL_OK)
			return rc;
		describe_counts(j, s);
		j->phase = 11;
		/* fall through */
	case 11:
		return describe_activate(j, s);
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "DescribeTable: phase %d", j->phase);
	}
}

/* ------------------------------------------------------------------------ */
/* ListTables, DeleteTable                                                   */
/* ------------------------------------------------------------------------ */

int rt_step_list_tables(rt_job *j)
{
	const char *start;
	uint32_t limit;
	return rt_job_forward0(j, j->phase == 0
	                              ? wire_list_tables_from_pb(&j->arena, j->in->list_tables,
	                                                         &start, &limit, j->errmsg)
	                              : SHOAL_OK);
}

typedef struct delete_st {
	const char *name;
	rt_call *describe, *drop;
	Shoal__TableDescription *desc;
	Shoal__NodeRequest nr;
	Shoal__TableDrop td;
	rt_call *calls[SH_MAX_GROUPS];
	uint32_t n;
} delete_st;

int rt_step_delete_table(rt_job *j)
{
	delete_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0:
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		if ((rc = wire_delete_table_from_pb(&j->arena, j->in->delete_table, &s->name,
		                                    j->errmsg)) != SHOAL_OK)
			return rc;
		if ((rc = describe0(j, s->name, &s->describe)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	case 1: {
		Shoal__NodeResponse *resp;
		if ((rc = answer0(j, s->describe, &resp)) != SHOAL_OK)
			return rc;
		s->desc = description_of(resp);
		if (s->describe->code != SHOAL_OK || s->desc == NULL)
			return rt_job_pass(j, s->describe); /* ResourceNotFoundException */
		shoal__table_drop__init(&s->td);
		s->td.table_name = (char *)s->name;
		shoal__node_request__init(&s->nr);
		s->nr.drop_table = &s->td;
		if ((rc = call_group0(j, &s->nr, &s->drop)) != SHOAL_OK)
			return rc;
		j->phase = 2;
		return RT_WAIT;
	}
	case 2: {
		Shoal__NodeResponse *resp;
		if ((rc = answer0(j, s->drop, &resp)) != SHOAL_OK)
			return rc;
		if (s->drop->code != SHOAL_OK)
			return rt_job_pass(j, s->drop);
		uint32_t groups[SH_MAX_GROUPS];
		uint32_t ng = rt_data_groups(j->rt, groups);
		for (uint32_t i = 0; i < ng; i++) {
			if (groups[i] == 0)
				continue;
			Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
			rt_call *c = rt_job_call(j, groups[i]);
			if (nr == NULL || c == NULL)
				return nomem(j);
			*nr = s->nr;
			if ((rc = rt_call_request(j, c, nr)) != SHOAL_OK)
				return rc;
			s->calls[s->n++] = c;
		}
		j->phase = 3;
		if (s->n > 0)
			return RT_WAIT;
	}
		/* fall through */
	case 3:
		for (uint32_t i = 0; i < s->n; i++) {
			rt_call *c = s->calls[i];
			int code = c->rc != SHOAL_OK ? c->rc : c->code;
			if (code != SHOAL_OK && code != SHOAL_E_NOT_FOUND)
				rt_log("DeleteTable %s: group %u did not drop it (%s)", s->name,
				       c->group,
				       c->rc != SHOAL_OK ? c->errmsg : shoal_exception_name(code));
		}
		j->phase = 4;
		return rt_job_refresh(j);
	case 4: {
		if (j->refresh_rc != SHOAL_OK)
			rt_log("DeleteTable %s: catalog refresh failed: %s", s->name,
			       j->refresh_msg);
		s->desc->table_status = "DELETING";
		Shoal__DeleteTableResponse *dr = sh_arena_alloc(&j->arena, sizeof(*dr));
		if (dr == NULL)
			return nomem(j);
		shoal__delete_table_response__init(dr);
		dr->table_description = s->desc;
		j->out->result_case = SHOAL__RESPONSE__RESULT_DELETE_TABLE;
		j->out->delete_table = dr;
		return SHOAL_OK;
	}
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "DeleteTable: phase %d", j->phase);
	}
}

/* ------------------------------------------------------------------------ */
/* UpdateTable                                                               */
/* ------------------------------------------------------------------------ */

/* UpdateTable's TableDescription: the new definition; an index being
 * deleted still shown, DELETING; UPDATING while an index is not ACTIVE. */
static int update_desc(rt_job *j, const Shoal__TableDefine *stored, const rt_table *before,
                       const st_table_update_req *u, Shoal__TableDescription **out)
{
	st_table_info info = {0};
	int rc = wire_table_define_from_pb(&j->arena, stored, &info.def, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_index_def *all =
	    sh_arena_calloc(&j->arena, info.def.n_indexes + u->n_drop + 1, sizeof(*all));
	if (all == NULL)
		return nomem(j);
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
	return wire_table_desc_to_pb(&j->arena, &info, updating ? "UPDATING" : "ACTIVE", out,
	                             j->errmsg);
}

typedef struct update_st {
	st_table_update_req u;
	const rt_table *before;
	rt_call *c;
	const Shoal__TableDefine *stored;
	rt_define_all all;
} update_st;

int rt_step_update_table(rt_job *j)
{
	update_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0: {
		if (s == NULL) {
			if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
				return nomem(j);
			if ((rc = wire_update_table_from_pb(&j->arena, j->in->update_table, &s->u,
			                                    j->errmsg)) != SHOAL_OK ||
			    (rc = wire_update_table_check_new(j->in->update_table, j->errmsg)) !=
			        SHOAL_OK)
				return rc;
		}
		/* The definition before (for the DELETING index in the answer). */
		if (s->u.n_drop > 0) {
			rc = rt_job_table(j, s->u.name, false, &s->before);
			if (rc == RT_WAIT)
				return rc;
			if (rc != SHOAL_OK)
				s->before = NULL;
		}
		Shoal__TableUpdate *tu = sh_arena_alloc(&j->arena, sizeof(*tu));
		Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
		if (tu == NULL || nr == NULL)
			return nomem(j);
		shoal__table_update__init(tu);
		tu->update = j->in->update_table;
		shoal__node_request__init(nr);
		nr->update_table = tu;
		if ((rc = call_group0(j, nr, &s->c)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	}
	case 1: {
		Shoal__NodeResponse *resp;
		if ((rc = answer0(j, s->c, &resp)) != SHOAL_OK)
			return rc;
		if (s->c->code != SHOAL_OK)
			return rt_job_pass(j, s->c); /* ResourceNotFound, index exists, ... */
		s->stored = resp->n_catalog > 0 ? resp->catalog[0] : NULL;
		if (s->stored == NULL || s->stored->def == NULL || s->stored->table_id == 0)
			return rt_job_fail(
			    j, SHOAL_E_INTERNAL,
			    "group 0 updated table %s but did not answer its definition",
			    s->u.name);
		s->all.stored = s->stored;
		s->all.op = "UpdateTable";
		s->all.name = s->u.name;
		/* Every UpdateTable changes indexes or capacity: the data groups
		 * need the new definition (their leaders enforce its capacity). */
		j->phase = 2;
	}
		/* fall through */
	case 2:
		if (j->phase == 2 && (rc = rt_define_all_step(j, &s->all)) != SHOAL_OK)
			return rc;
		/* fall through */
	case 3: {
		if (j->phase == 3 && j->refresh_rc != SHOAL_OK)
			rt_log("UpdateTable %s: catalog refresh failed: %s", s->u.name,
			       j->refresh_msg);
		Shoal__UpdateTableResponse *ur = sh_arena_alloc(&j->arena, sizeof(*ur));
		if (ur == NULL)
			return nomem(j);
		shoal__update_table_response__init(ur);
		if ((rc = update_desc(j, s->stored, s->before, &s->u, &ur->table_description)) !=
		    SHOAL_OK)
			return rc;
		j->out->result_case = SHOAL__RESPONSE__RESULT_UPDATE_TABLE;
		j->out->update_table = ur;
		return SHOAL_OK;
	}
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "UpdateTable: phase %d", j->phase);
	}
}
