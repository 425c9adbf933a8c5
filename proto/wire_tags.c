/*
 * wire_tags.c -- TagResource, UntagResource and ListTagsOfResource between
 * protobuf and the storage engine's types.
 *
 * TagResource and UntagResource become an st_table_update_req that carries
 * only the tag change, applied by group 0 as any UpdateTable is (one
 * replicated catalog write: concurrent taggings serialise there, and the
 * limit of 50 tags is checked against the tags the table has at that
 * moment).  The order of the checks is DynamoDB's: the ARN, then the tags,
 * then (group 0) the table.
 */
#include <string.h>

#include "proto/wire_int.h"

#define MAX_ARN 1283

int wire_tags_from_pb(sh_arena *a, Shoal__Tag *const *pb, size_t n, st_tag **out, uint32_t *n_out,
                      char *errmsg)
{
	*out = NULL;
	*n_out = 0;
	if (n == 0)
		return SHOAL_OK;
	if (n > UINT32_MAX / 2)
		n = UINT32_MAX / 2; /* far past the limit: st_tags_check refuses it */
	st_tag *t = sh_arena_calloc(a, n, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "tags: out of memory");
	for (size_t i = 0; i < n; i++) {
		t[i].key = pb[i] != NULL ? pb[i]->key : NULL;
		t[i].value = pb[i] != NULL ? pb[i]->value : NULL;
	}
	*out = t;
	*n_out = (uint32_t)n;
	return SHOAL_OK;
}

/* ResourceArn: required, at most 1283 characters, a table's ARN. */
static int resource(sh_arena *a, const char *arn, const char **table, char *errmsg)
{
	if (arn != NULL && wire_char_len(arn) > MAX_ARN)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%.64s...' at 'resourceArn' "
		               "failed to satisfy constraint: Member must have length less than or "
		               "equal to %d",
		               arn, MAX_ARN);
	return wire_table_arn_parse(a, arn, table, errmsg);
}

int wire_tag_resource_from_pb(sh_arena *a, const Shoal__TagResourceRequest *pb,
                              st_table_update_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	st_tag *tags;
	uint32_t n;
	int rc = resource(a, WIRE_OPT(pb, resource_arn), &out->name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (pb->n_tags == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Atleast one Tag needs to be provided as Input.");
	if ((rc = wire_tags_from_pb(a, pb->tags, pb->n_tags, &tags, &n, errmsg)) != SHOAL_OK)
		return rc;
	if ((rc = st_tags_check(tags, n, errmsg)) != SHOAL_OK)
		return rc;
	out->tag_set = tags;
	out->n_tag_set = n;
	return SHOAL_OK;
}

int wire_untag_resource_from_pb(sh_arena *a, const Shoal__UntagResourceRequest *pb,
                                st_table_update_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc = resource(a, WIRE_OPT(pb, resource_arn), &out->name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (pb->n_tag_keys == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Atleast one Tag Key needs to be provided as Input.");
	for (size_t i = 0; i < pb->n_tag_keys; i++) {
		const char *k = pb->tag_keys[i];
		size_t len = k != NULL ? wire_char_len(k) : 0;
		if (len < 1 || len > ST_TAG_KEY_MAX)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "1 validation error detected: Value '%.40s' at "
			               "'tagKeys.%zu.member' failed to satisfy constraint: Member "
			               "must have length %s",
			               k != NULL ? k : "", i + 1,
			               len < 1 ? "greater than or equal to 1"
			                       : "less than or equal to 128");
	}
	out->tag_remove = (const char *const *)pb->tag_keys;
	out->n_tag_remove = pb->n_tag_keys > UINT32_MAX ? UINT32_MAX : (uint32_t)pb->n_tag_keys;
	return SHOAL_OK;
}

int wire_list_tags_from_pb(sh_arena *a, const Shoal__ListTagsOfResourceRequest *pb,
                           const char **table, char *errmsg)
{
	return resource(a, WIRE_OPT(pb, resource_arn), table, errmsg);
}

int wire_list_tags_resp_to_pb(sh_arena *a, const st_table_def *def,
                              Shoal__ListTagsOfResourceResponse **out, char *errmsg)
{
	Shoal__ListTagsOfResourceResponse *r = sh_arena_alloc(a, sizeof(*r));
	Shoal__Tag **list = sh_arena_calloc(a, def->n_tags + 1, sizeof(*list));
	Shoal__Tag *slab = sh_arena_calloc(a, def->n_tags + 1, sizeof(*slab));
	if (r == NULL || list == NULL || slab == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "ListTagsOfResource: out of memory");
	shoal__list_tags_of_resource_response__init(r);
	for (uint32_t i = 0; i < def->n_tags; i++) {
		shoal__tag__init(&slab[i]);
		slab[i].key = (char *)def->tags[i].key;
		slab[i].value = (char *)def->tags[i].value;
		list[i] = &slab[i];
	}
	r->tags = list;
	r->n_tags = def->n_tags;
	*out = r;
	return SHOAL_OK;
}

int wire_table_update_from_pb(sh_arena *a, const Shoal__TableUpdate *tu, st_table_update_req *out,
                              char *errmsg)
{
	int set =
	    (tu->update != NULL) + (tu->tag != NULL) + (tu->untag != NULL) + (tu->ttl != NULL);
	if (set != 1)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "a TableUpdate carries exactly one of an UpdateTable, a TagResource, "
		    "an UntagResource or an UpdateTimeToLive (found %d)",
		    set);
	if (tu->ttl != NULL)
		return wire_update_ttl_from_pb(a, tu->ttl, out, errmsg);
	if (tu->tag != NULL)
		return wire_tag_resource_from_pb(a, tu->tag, out, errmsg);
	if (tu->untag != NULL)
		return wire_untag_resource_from_pb(a, tu->untag, out, errmsg);
	return wire_update_table_from_pb(a, tu->update, out, errmsg);
}
