/*
 * wire_ttl.c -- UpdateTimeToLive and DescribeTimeToLive between protobuf
 * and the storage engine's types.
 *
 * UpdateTimeToLive becomes an st_table_update_req carrying only the TTL
 * change (set_ttl), applied by group 0 as any UpdateTable is (one
 * replicated catalog write, st_table_update, which holds DynamoDB's
 * refusals: already enabled, already disabled).  The order of the checks
 * is DynamoDB's: the table name, the specification's members, then (group
 * 0) the table and its state.
 */
#include <string.h>

#include "proto/wire_int.h"

#define TTL_ATTR_MAX 255 /* bytes (TimeToLiveSpecification.AttributeName) */

static int table_name(sh_arena *a, const char *name, const char **out, char *errmsg)
{
	Shoal__DescribeTableRequest d = SHOAL__DESCRIBE_TABLE_REQUEST__INIT;
	if (name != NULL)
		WIRE_SET(&d, table_name, (char *)name);
	return wire_describe_table_from_pb(a, &d, out, errmsg);
}

int wire_update_ttl_from_pb(sh_arena *a, const Shoal__UpdateTimeToLiveRequest *pb,
                            st_table_update_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc = table_name(a, WIRE_OPT(pb, table_name), &out->name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	const Shoal__TimeToLiveSpecification *spec = pb->time_to_live_specification;
	wire_verrs e = {0};
	wire_check_present(&e, "timeToLiveSpecification", spec != NULL);
	const char *attr = spec != NULL ? WIRE_OPT(spec, attribute_name) : NULL;
	if (spec != NULL) {
		wire_check_present(&e, "timeToLiveSpecification.enabled", WIRE_HAS(spec, enabled));
		wire_check_present(&e, "timeToLiveSpecification.attributeName", attr != NULL);
		if (attr != NULL && strlen(attr) > TTL_ATTR_MAX)
			wire_verr_add(&e, attr, "timeToLiveSpecification.attributeName",
			              "Member must have length less than or equal to %d",
			              TTL_ATTR_MAX);
	}
	if ((rc = wire_verr_done(&e, errmsg)) != SHOAL_OK)
		return rc;
	if (attr[0] == '\0')
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TimeToLiveSpecification.AttributeName must be non empty");
	out->set_ttl = true;
	out->ttl_enabled = spec->enabled;
	return wire_dup(a, attr, &out->ttl_attr, errmsg);
}

int wire_update_ttl_resp_to_pb(sh_arena *a, const Shoal__UpdateTimeToLiveRequest *pb,
                               Shoal__UpdateTimeToLiveResponse **out, char *errmsg)
{
	Shoal__UpdateTimeToLiveResponse *r = sh_arena_alloc(a, sizeof(*r));
	Shoal__TimeToLiveSpecification *s = sh_arena_alloc(a, sizeof(*s));
	if (r == NULL || s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "UpdateTimeToLive: out of memory");
	shoal__update_time_to_live_response__init(r);
	shoal__time_to_live_specification__init(s);
	const Shoal__TimeToLiveSpecification *in = pb->time_to_live_specification;
	WIRE_SET(s, enabled, in->enabled);
	WIRE_SET(s, attribute_name, in->attribute_name);
	r->time_to_live_specification = s;
	*out = r;
	return SHOAL_OK;
}

int wire_describe_ttl_from_pb(sh_arena *a, const Shoal__DescribeTimeToLiveRequest *pb,
                              const char **table, char *errmsg)
{
	return table_name(a, WIRE_OPT(pb, table_name), table, errmsg);
}

int wire_describe_ttl_resp_to_pb(sh_arena *a, const st_table_def *def,
                                 Shoal__DescribeTimeToLiveResponse **out, char *errmsg)
{
	Shoal__DescribeTimeToLiveResponse *r = sh_arena_alloc(a, sizeof(*r));
	Shoal__TimeToLiveDescription *d = sh_arena_alloc(a, sizeof(*d));
	if (r == NULL || d == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "DescribeTimeToLive: out of memory");
	shoal__describe_time_to_live_response__init(r);
	shoal__time_to_live_description__init(d);
	d->time_to_live_status = def->ttl_attr != NULL ? "ENABLED" : "DISABLED";
	if (def->ttl_attr != NULL)
		WIRE_SET(d, attribute_name, (char *)def->ttl_attr);
	d->changed_ms = def->ttl_ms;
	r->time_to_live_description = d;
	*out = r;
	return SHOAL_OK;
}

const char *wire_ttl_status(bool enabled, bool in_force)
{
	if (enabled)
		return in_force ? "ENABLED" : "ENABLING";
	return in_force ? "DISABLED" : "DISABLING";
}
