/*
 * limits.c -- DescribeLimits and DescribeEndpoints: what the router knows
 * without asking a node.
 *
 * DescribeLimits answers the capacity Shoal enforces.  A new table has one
 * partition per data group, or [cluster] table_partitions rounded up to a
 * multiple of them (sh_cluster_table_partitions), and each partition serves
 * at most the cluster file's partition_rcu / partition_wcu units per second
 * (node/capacity.c, DynamoDB's 3000 / 1000 by default), so a new table gets
 * at most that many units times its partitions, whatever it is provisioned
 * with: TableMax*CapacityUnits (a table that splits later serves more, as
 * in DynamoDB).  Shoal has no account-wide limit beyond that (every table
 * spans every data group), so the account maxima are the same figures.
 *
 * DescribeEndpoints answers this router's client endpoint (rt->endpoint,
 * set by main.c: the HTTP(S) address when it serves DynamoDB's HTTP API,
 * else its native listen address) with DynamoDB's cache period of 1440
 * minutes.
 */
#include "router/router.h"

#define ENDPOINT_CACHE_MINUTES 1440

int rt_step_describe_limits(rt_job *j)
{
	const sh_cluster_conf *conf = j->rt->conf;
	uint32_t parts = sh_cluster_table_partitions(conf);
	uint64_t rcu = conf->partition_rcu != 0 ? conf->partition_rcu : SH_PARTITION_RCU;
	uint64_t wcu = conf->partition_wcu != 0 ? conf->partition_wcu : SH_PARTITION_WCU;
	Shoal__DescribeLimitsResponse *r = sh_arena_alloc(&j->arena, sizeof(*r));
	if (r == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	shoal__describe_limits_response__init(r);
	r->table_max_read_capacity_units = (int64_t)(rcu * parts);
	r->table_max_write_capacity_units = (int64_t)(wcu * parts);
	r->account_max_read_capacity_units = r->table_max_read_capacity_units;
	r->account_max_write_capacity_units = r->table_max_write_capacity_units;
	j->out->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_LIMITS;
	j->out->describe_limits = r;
	return SHOAL_OK;
}

int rt_step_describe_endpoints(rt_job *j)
{
	Shoal__DescribeEndpointsResponse *r = sh_arena_alloc(&j->arena, sizeof(*r));
	Shoal__Endpoint *e = sh_arena_alloc(&j->arena, sizeof(*e));
	Shoal__Endpoint **list = sh_arena_alloc(&j->arena, sizeof(*list));
	if (r == NULL || e == NULL || list == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	shoal__describe_endpoints_response__init(r);
	shoal__endpoint__init(e);
	e->address = j->rt->endpoint;
	e->cache_period_in_minutes = ENDPOINT_CACHE_MINUTES;
	list[0] = e;
	r->endpoints = list;
	r->n_endpoints = 1;
	j->out->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_ENDPOINTS;
	j->out->describe_endpoints = r;
	return SHOAL_OK;
}
