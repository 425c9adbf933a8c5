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
 *                 the specification.  Expiry is in force in a data group
 *                 once it applied the definition, which is before the answer
 *                 unless the group was unreachable (repaired on first use),
 *                 so DescribeTimeToLive answers ENABLED / DISABLED, never
 *                 ENABLING / DISABLING.
 *   DescribeTimeToLive
 *                 the client's request to group 0's leader, which reads its
 *                 catalog (node_handle_describe_time_to_live).
 */
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

int rt_step_describe_time_to_live(rt_job *j)
{
	const char *table;
	return rt_job_forward0(
	    j, j->phase == 0 ? wire_describe_ttl_from_pb(&j->arena, j->in->describe_time_to_live,
	                                                 &table, j->errmsg)
	                     : SHOAL_OK);
}
