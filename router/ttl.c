/*
 * ttl.c -- UpdateTimeToLive and DescribeTimeToLive.
 *
 * The setting lives in the table's definition (storage/catalog_codec.c), so
 * it is replicated, durable and gone with the table, and every data group
 * holds a copy: their leaders expire items by it (node/ttl.c).
 *
 *   UpdateTimeToLive
 *                 checked here as group 0 will check it (the name, the
 *                 specification: wire_update_ttl_from_pb), then update_table
 *                 to group 0 carrying the request (cluster.proto TableUpdate),
 *                 which applies it in one Raft entry against the setting the
 *                 table has then (already enabled / disabled), stamped with
 *                 group 0's time; then group 0's new definition to every
 *                 data group (rt_define_all_step: a data group takes the
 *                 setting when it is newer than its own).  The answer echoes
 *                 the specification.  Group 0 refuses a change within
 *                 [cluster] ttl_change_interval_ms of the previous one
 *                 (DynamoDB's hour; storage/index_ddl.c, ttl_change).
 *   DescribeTimeToLive
 *                 the client's request to group 0's leader, which reads its
 *                 catalog (node_handle_describe_time_to_live) and adds the
 *                 time of the last change (changed_ms, internal); when there
 *                 was one, every data group's leader's GroupStatus
 *                 (rt_statuses_step): the change has "taken effect" when
 *                 every data group's leader has applied it (TableStats.ttl_ms
 *                 >= changed_ms), for only then do all leaders expire (or
 *                 stop expiring) by it.  Until then the answer is ENABLING /
 *                 DISABLING, and a leader that answered with an older copy
 *                 is sent the cached definition again (a repair, as index
 *                 activation does), so a group that missed UpdateTimeToLive's
 *                 wave catches up; a group that does not answer keeps the
 *                 status pending.  UpdateTimeToLive waits for its own wave,
 *                 so right after it the status is already ENABLED / DISABLED
 *                 unless a group was unreachable or slow.
 */
#include <string.h>

#include "router/router.h"

typedef struct ttl_st {
	rt_call *c;
	Shoal__TableUpdate tu;
	Shoal__NodeRequest nr;
	rt_define_all all;
} ttl_st;

int rt_step_update_time_to_live(rt_job *j)
{
	ttl_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0: {
		st_table_update_req u;
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		if ((rc = wire_update_ttl_from_pb(&j->arena, j->in->update_time_to_live, &u,
		                                  j->errmsg)) != SHOAL_OK)
			return rc;
		shoal__table_update__init(&s->tu);
		s->tu.ttl = j->in->update_time_to_live;
		shoal__node_request__init(&s->nr);
		s->nr.update_table = &s->tu;
		s->all.op = "UpdateTimeToLive";
		s->all.name = u.name;
		if ((s->c = rt_job_call(j, 0)) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		if ((rc = rt_call_request(j, s->c, &s->nr)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	}
	case 1: {
		if (s->c->rc != SHOAL_OK || s->c->code != SHOAL_OK)
			return rt_job_pass(j, s->c); /* ResourceNotFound, already enabled, ... */
		Shoal__NodeResponse *resp = rt_call_resp(s->c, &j->arena);
		if (resp == NULL || resp->n_catalog == 0 || resp->catalog[0]->def == NULL)
			return rt_job_fail(j, SHOAL_E_INTERNAL,
			                   "group 0 changed the TTL of table %s but did not answer "
			                   "its definition",
			                   s->all.name);
		s->all.stored = resp->catalog[0];
		j->phase = 2;
	}
		/* fall through */
	case 2: {
		if ((rc = rt_define_all_step(j, &s->all)) != SHOAL_OK)
			return rc;
		Shoal__UpdateTimeToLiveResponse *r;
		if ((rc = wire_update_ttl_resp_to_pb(&j->arena, j->in->update_time_to_live, &r,
		                                     j->errmsg)) != SHOAL_OK)
			return rc;
		j->out->result_case = SHOAL__RESPONSE__RESULT_UPDATE_TIME_TO_LIVE;
		j->out->update_time_to_live = r;
		return SHOAL_OK;
	}
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "UpdateTimeToLive: phase %d", j->phase);
	}
}

typedef struct describe_ttl_st {
	const char *name;
	rt_call *c;
	Shoal__DescribeTimeToLiveResponse *r;
	rt_statuses st;
	uint32_t n_repairs;
} describe_ttl_st;

/* Whether the data group of call c has applied the change of changed_ms:
 * 1 yes, 0 no (its leader answered with an older copy, or none), -1 not
 * known (no answer from a leader). */
static int applied(rt_job *j, const describe_ttl_st *s, rt_call *c, int64_t changed_ms)
{
	const Shoal__GroupStatus *gs = rt_status_of(j, c);
	if (gs == NULL || gs->role == NULL || strcmp(gs->role, "leader") != 0)
		return -1;
	const Shoal__TableStats *ts = rt_table_stats(gs, s->name);
	return ts != NULL && ts->ttl_ms >= changed_ms ? 1 : 0;
}

/* *all: whether every data group's leader has applied the change of
 * changed_ms.  A leader whose copy is older gets the cached definition
 * again when the cache has the change (calls of this wave, counted in
 * s->n_repairs).  RT_WAIT (before any call) while the catalog refreshes. */
static int in_force(rt_job *j, describe_ttl_st *s, int64_t changed_ms, bool *all)
{
	const rt_table *t = NULL;
	bool behind = false;
	*all = true;
	for (uint32_t i = 0; i < s->st.n; i++) {
		int a = applied(j, s, s->st.calls[i], changed_ms);
		*all = *all && a == 1;
		behind = behind || a == 0;
	}
	if (!behind)
		return SHOAL_OK;
	int rc = rt_job_table(j, s->name, false, &t);
	if (rc != SHOAL_OK)
		return rc; /* RT_WAIT, or the table is gone */
	if (t->pb == NULL || t->pb->ttl_ms < changed_ms)
		return SHOAL_OK; /* a cache older than the change: no repair this time */
	for (uint32_t i = 0; i < s->st.n; i++) {
		rt_call *c = s->st.calls[i];
		if (c->group == 0 || applied(j, s, c, changed_ms) != 0)
			continue;
		Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
		rt_call *d = rt_job_call(j, c->group);
		if (nr == NULL || d == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		shoal__node_request__init(nr);
		nr->define_table = (Shoal__TableDefine *)t->pb;
		if ((rc = rt_call_request(j, d, nr)) != SHOAL_OK)
			return rc;
		s->n_repairs++;
		atomic_fetch_add(&j->rt->metrics.repairs, 1);
		rt_log("DescribeTimeToLive %s: group %u has not applied the TTL change of %lld; "
		       "definition re-sent",
		       s->name, c->group, (long long)changed_ms);
	}
	return SHOAL_OK;
}

int rt_step_describe_time_to_live(rt_job *j)
{
	describe_ttl_st *s = j->st;
	int rc;
	switch (j->phase) {
	case 0:
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		if ((rc = wire_describe_ttl_from_pb(&j->arena, j->in->describe_time_to_live,
		                                    &s->name, j->errmsg)) != SHOAL_OK)
			return rc;
		if ((s->c = rt_job_call(j, 0)) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		if ((rc = rt_call_forward(j, s->c, NULL, 0)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	case 1: {
		Shoal__NodeResponse *resp;
		if (!rt_call_ok(j, s->c, &resp, &rc))
			return rc; /* ResourceNotFound, ... as group 0 said */
		if (resp->response == NULL || resp->response->describe_time_to_live == NULL ||
		    resp->response->describe_time_to_live->time_to_live_description == NULL)
			return rt_job_fail(
			    j, SHOAL_E_INTERNAL,
			    "group 0 answered DescribeTimeToLive without a description");
		s->r = resp->response->describe_time_to_live;
		j->phase = 2;
	}
		/* fall through */
	case 2: {
		Shoal__TimeToLiveDescription *d = s->r->time_to_live_description;
		bool all = true;
		if (d->changed_ms != 0) {
			if ((rc = rt_statuses_step(j, &s->st)) != SHOAL_OK)
				return rc;
			if ((rc = in_force(j, s, d->changed_ms, &all)) != SHOAL_OK)
				return rc;
		}
		d->time_to_live_status = (char *)wire_ttl_status(
		    d->_attribute_name_case != 0 && d->attribute_name != NULL, all);
		d->changed_ms = 0; /* internal */
		j->out->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TIME_TO_LIVE;
		j->out->describe_time_to_live = s->r;
		j->phase = 3;
		if (s->n_repairs > 0)
			return RT_WAIT; /* the repairs' answers, then the answer */
	}
		/* fall through */
	case 3:
		return SHOAL_OK;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "DescribeTimeToLive: phase %d", j->phase);
	}
}
