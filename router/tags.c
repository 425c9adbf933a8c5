/*
 * tags.c -- TagResource, UntagResource and ListTagsOfResource.
 *
 * Tags live in the table's record in group 0's catalog (storage/
 * catalog_codec.c), so they are replicated and durable as every definition
 * is, and go away with the table.
 *
 *   TagResource, UntagResource
 *                 checked here as group 0 will check them (the ARN, the
 *                 tags: wire_tag_resource_from_pb), then update_table to
 *                 group 0 carrying the request (cluster.proto TableUpdate),
 *                 which applies it in one Raft entry against the tags the
 *                 table has then (the limit of 50).  Data groups never read
 *                 tags: nothing is sent to them, the router's catalog cache
 *                 is not refreshed.  The answer is empty.
 *   ListTagsOfResource
 *                 the client's request to group 0's leader, which reads its
 *                 catalog (node_handle_list_tags_of_resource): a tag set a
 *                 moment ago through another router is there.
 */
#include "router/router.h"

typedef struct tag_st {
	rt_call *c;
	Shoal__TableUpdate tu;
	Shoal__NodeRequest nr;
} tag_st;

/* Phase 0: the change to group 0; phase 1: its answer. */
static int tag_step(rt_job *j, bool untag)
{
	tag_st *s = j->st;
	int rc;
	if (j->phase == 0) {
		st_table_update_req u;
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		shoal__table_update__init(&s->tu);
		if (untag) {
			rc = wire_untag_resource_from_pb(&j->arena, j->in->untag_resource, &u,
			                                 j->errmsg);
			s->tu.untag = j->in->untag_resource;
		} else {
			rc = wire_tag_resource_from_pb(&j->arena, j->in->tag_resource, &u,
			                               j->errmsg);
			s->tu.tag = j->in->tag_resource;
		}
		if (rc != SHOAL_OK)
			return rc;
		shoal__node_request__init(&s->nr);
		s->nr.update_table = &s->tu;
		if ((s->c = rt_job_call(j, 0)) == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		if ((rc = rt_call_request(j, s->c, &s->nr)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	}
	if (s->c->rc != SHOAL_OK || s->c->code != SHOAL_OK)
		return rt_job_pass(j, s->c); /* ResourceNotFound, the tag limit, ... */
	if (untag) {
		Shoal__UntagResourceResponse *r = sh_arena_alloc(&j->arena, sizeof(*r));
		if (r == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		shoal__untag_resource_response__init(r);
		j->out->result_case = SHOAL__RESPONSE__RESULT_UNTAG_RESOURCE;
		j->out->untag_resource = r;
	} else {
		Shoal__TagResourceResponse *r = sh_arena_alloc(&j->arena, sizeof(*r));
		if (r == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		shoal__tag_resource_response__init(r);
		j->out->result_case = SHOAL__RESPONSE__RESULT_TAG_RESOURCE;
		j->out->tag_resource = r;
	}
	return SHOAL_OK;
}

int rt_step_tag_resource(rt_job *j)
{
	return tag_step(j, false);
}

int rt_step_untag_resource(rt_job *j)
{
	return tag_step(j, true);
}

int rt_step_list_tags_of_resource(rt_job *j)
{
	const char *table;
	return rt_job_forward0(
	    j, j->phase == 0 ? wire_list_tags_from_pb(&j->arena, j->in->list_tags_of_resource,
	                                              &table, j->errmsg)
	                     : SHOAL_OK);
}
