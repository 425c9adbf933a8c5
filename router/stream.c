/*
 * stream.c -- the router's steps of DynamoDB Streams (design: storage/
 * stream.h; the node's half: node/stream.c).
 *
 *   ListStreams       from the catalog (a fresh one): every table whose
 *                     definition names a stream (enabled or not), by name
 *   DescribeStream    the table from the catalog, then every data group's
 *                     shards, read from any replica, merged in group order;
 *                     ShardFilter (CHILD_SHARDS) keeps a shard's children,
 *                     Limit / ExclusiveStartShardId page the result
 *   GetShardIterator  the shard -> the group whose log holds it (shard_group:
 *                     a static partition's is its cluster-file group for
 *                     good, a span names its group), any replica
 *   GetRecords        the iterator's shard -> its group, the same way
 *
 * A stream is named by its table and label: the table's latest stream or
 * one it replaced within the retention (st_stream_spec_find); a label
 * that is neither in the cached catalog gets one catalog refresh before
 * it is ResourceNotFound (the stream may have been enabled just now).
 * ListStreams lists both kinds.  A deleted table's streams stay for the
 * retention after DeleteTable (DISABLED), as DynamoDB's do: group 0's
 * list_catalog sends them apart (TableDefine.dropped_ms, kept in
 * rt_catalog_snap.dropped), and routing finds them there when the live
 * table (if one of that name exists again) has no such stream.
 */
#include <string.h>

#include "router/router.h"

static int nomem(rt_job *j)
{
	return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
}

static int stream_not_found(rt_job *j, const char *arn)
{
	return rt_job_fail(j, SHOAL_E_NOT_FOUND,
	                   "Requested resource not found: Stream: %s not found", arn);
}

/* A deleted table of snap's named `table` that has a stream of label_ms
 * still within the retention (router.h: rt_catalog_snap.dropped). */
static const rt_table *dropped_stream(rt_job *j, const rt_catalog_snap *snap, const char *table,
                                      int64_t label_ms)
{
	st_stream_view view;
	for (uint32_t i = 0; snap != NULL && i < snap->n_dropped; i++) {
		const rt_table *t = &snap->dropped[i];
		if (strcmp(t->name, table) == 0 &&
		    st_stream_spec_find_dropped(&t->def.stream, t->dropped_ms, label_ms,
		                                rt_wall_ms(),
		                                sh_cluster_stream_retention_ms(j->rt->conf), &view))
			return t;
	}
	return NULL;
}

/* The table of a stream, which has a stream of label_ms (a live table's,
 * or a deleted one's kept for the retention): RT_WAIT while the catalog
 * refreshes, SHOAL_OK with *t, or the job's failure. */
static int stream_table(rt_job *j, const char *arn, const char *table, int64_t label_ms,
                        const rt_table **t)
{
	int rc = rt_job_table(j, table, false, t);
	if (rc == RT_WAIT)
		return rc;
	if (rc != SHOAL_OK && rc != SHOAL_E_NOT_FOUND)
		return rc;
	bool enabled;
	st_stream_view view;
	if (rc == SHOAL_OK &&
	    st_stream_spec_find(&(*t)->def.stream, label_ms, rt_wall_ms(),
	                        sh_cluster_stream_retention_ms(j->rt->conf), &enabled, &view))
		return SHOAL_OK;
	if ((*t = dropped_stream(j, j->snap, table, label_ms)) != NULL)
		return SHOAL_OK;
	if (!j->fresh)
		return rt_job_refresh(j);
	return stream_not_found(j, arn);
}

/* The group whose log holds a stream's shard (a static partition's: the
 * partition's group from the cluster file, for good -- a move closes the
 * shard there; a span's: the group it names), or ResourceNotFound. */
static int shard_group(rt_job *j, const wire_shard *s, uint32_t *group)
{
	const sh_cluster_conf *conf = j->rt->conf;
	uint32_t p, voters[SH_MAP_GROUP_REPLICAS];
	/* A span's group: one of the birth's data groups, or one added since
	 * (any group of the map but group 0: groups are never removed). */
	bool known =
	    s->is_static
	        ? s->partition < sh_cluster_partitions(conf)
	        : sh_cluster_group_partition(conf, s->group, &p) ||
	              (s->group != 0 && s->group < SH_MAX_GROUPS &&
	               sh_place_voters(j->rt->place, s->group, voters, SH_MAP_GROUP_REPLICAS) > 0);
	if (!known)
		return rt_job_fail(j, SHOAL_E_NOT_FOUND,
		                   "Requested resource not found: Shard does not exist");
	*group = s->is_static ? sh_cluster_partition_group(conf, s->partition) : s->group;
	return SHOAL_OK;
}

/* Phase 1 of a one-group step: the call issued in phase 0, passed on. */
static int forward(rt_job *j, uint32_t group)
{
	rt_call *c = rt_job_call(j, group);
	if (c == NULL)
		return nomem(j);
	c->any_replica = true;
	int rc = rt_call_forward(j, c, NULL, 0);
	if (rc != SHOAL_OK)
		return rc;
	j->st = c;
	j->phase = 1;
	return RT_WAIT;
}

int rt_step_get_shard_iterator(rt_job *j)
{
	if (j->phase == 1)
		return rt_job_pass(j, j->st);
	wire_shard_iter_req r;
	const rt_table *t;
	uint32_t group = 0;
	int rc =
	    wire_get_shard_iterator_from_pb(&j->arena, j->in->get_shard_iterator, &r, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = stream_table(j, r.stream_arn, r.table, r.label_ms, &t)) != SHOAL_OK)
		return rc;
	if ((rc = shard_group(j, &r.shard, &group)) != SHOAL_OK)
		return rc;
	return forward(j, group);
}

int rt_step_get_records(rt_job *j)
{
	if (j->phase == 1)
		return rt_job_pass(j, j->st);
	wire_iter it;
	uint32_t limit, group = 0;
	int rc = wire_get_records_from_pb(&j->arena, j->in->get_records, &it, &limit, j->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_iter_check_age(&it, rt_wall_ms(), j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = shard_group(j, &it.shard, &group)) != SHOAL_OK)
		return rc;
	return forward(j, group);
}

typedef struct describe_st {
	wire_describe_stream_req r;
	rt_call *calls[SH_MAX_GROUPS];
	uint32_t n;
} describe_st;

int rt_step_describe_stream(rt_job *j)
{
	describe_st *s = j->st;
	int rc;
	if (j->phase == 0) {
		if (s == NULL && (s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		if ((rc = wire_describe_stream_from_pb(&j->arena, j->in->describe_stream, &s->r,
		                                       j->errmsg)) != SHOAL_OK)
			return rc;
		const rt_table *t;
		if ((rc = stream_table(j, s->r.stream_arn, s->r.table, s->r.label_ms, &t)) !=
		    SHOAL_OK)
			return rc;
		uint32_t groups[SH_MAX_GROUPS];
		uint32_t ng = rt_data_groups(j->rt, groups);
		for (uint32_t i = 0; i < ng; i++) {
			rt_call *c = rt_job_call(j, groups[i]);
			if (c == NULL)
				return nomem(j);
			c->any_replica = true;
			if ((rc = rt_call_forward(j, c, NULL, 0)) != SHOAL_OK)
				return rc;
			s->calls[s->n++] = c;
		}
		j->phase = 1;
		return RT_WAIT;
	}
	/* Every group's shards (groups in order: rt_data_groups; each group's
	 * in (lo, start) order), the ShardFilter, then the page. */
	Shoal__StreamDescription *d = NULL;
	Shoal__Shard **all = NULL;
	size_t n_all = 0, cap = 0;
	Shoal__NodeResponse *resps[SH_MAX_GROUPS];
	for (uint32_t i = 0; i < s->n; i++) {
		/* A group that knows neither the table nor a stream of it kept
		 * after a DeleteTable holds none of its shards: a group made
		 * since the table, not given a partition of it (the stream is
		 * ResourceNotFound only if no group knows it, below). */
		const rt_call *c = s->calls[i];
		if (c->rc == SHOAL_OK && c->code == SHOAL_E_NOT_FOUND) {
			resps[i] = NULL;
			continue;
		}
		if (!rt_call_ok(j, s->calls[i], &resps[i], &rc))
			return rc;
		const Shoal__Response *r = resps[i]->response;
		if (r != NULL && r->describe_stream != NULL &&
		    r->describe_stream->stream_description != NULL)
			cap += r->describe_stream->stream_description->n_shards;
	}
	for (uint32_t i = 0; i < s->n; i++) {
		if (resps[i] == NULL)
			continue;
		const Shoal__Response *r = resps[i]->response;
		if (r == NULL || r->describe_stream == NULL ||
		    r->describe_stream->stream_description == NULL)
			return rt_job_fail(j, SHOAL_E_INTERNAL, "group %u answered no description",
			                   s->calls[i]->group);
		const Shoal__StreamDescription *g = r->describe_stream->stream_description;
		if (d == NULL) {
			d = r->describe_stream->stream_description;
			if ((all = sh_arena_calloc(&j->arena, cap + 1, sizeof(*all))) == NULL)
				return nomem(j);
		}
		for (size_t k = 0; k < g->n_shards && n_all < cap; k++) {
			const Shoal__Shard *x = g->shards[k];
			const char *parent = WIRE_OPT(x, parent_shard_id);
			if (s->r.child_of == NULL ||
			    (parent != NULL && strcmp(parent, s->r.child_of) == 0))
				all[n_all++] = g->shards[k];
		}
	}
	if (d == NULL)
		return stream_not_found(j, s->r.stream_arn);
	size_t from = 0;
	for (size_t k = 0; s->r.start_id != NULL && k < n_all; k++)
		if (strcmp(all[k]->shard_id, s->r.start_id) == 0)
			from = k + 1;
	size_t n = n_all - from < s->r.limit ? n_all - from : s->r.limit;
	d->shards = all + from;
	d->n_shards = n;
	if (from + n < n_all)
		WIRE_SET(d, last_evaluated_shard_id, d->shards[n - 1]->shard_id);
	Shoal__DescribeStreamResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	if (out == NULL)
		return nomem(j);
	shoal__describe_stream_response__init(out);
	out->stream_description = d;
	/* The key schema comes from the catalog's definition (a deleted
	 * table's kept one, for its stream). */
	const rt_table *t = rt_catalog_find(j->snap, s->r.table);
	bool enabled;
	st_stream_view view;
	if (t == NULL ||
	    !st_stream_spec_find(&t->def.stream, s->r.label_ms, rt_wall_ms(),
	                         sh_cluster_stream_retention_ms(j->rt->conf), &enabled, &view))
		t = dropped_stream(j, j->snap, s->r.table, s->r.label_ms);
	if (t != NULL) {
		Shoal__KeySchemaElement **ks = sh_arena_calloc(&j->arena, 2, sizeof(*ks));
		Shoal__KeySchemaElement *e = sh_arena_calloc(&j->arena, 2, sizeof(*e));
		if (ks == NULL || e == NULL)
			return nomem(j);
		for (int k = 0; k < 2; k++)
			shoal__key_schema_element__init(&e[k]);
		e[0].attribute_name = (char *)t->def.key.hash.name;
		e[0].key_type = "HASH";
		ks[0] = &e[0];
		d->n_key_schema = 1;
		if (t->def.key.range.name != NULL) {
			e[1].attribute_name = (char *)t->def.key.range.name;
			e[1].key_type = "RANGE";
			ks[1] = &e[1];
			d->n_key_schema = 2;
		}
		d->key_schema = ks;
	}
	j->out->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_STREAM;
	j->out->describe_stream = out;
	return SHOAL_OK;
}

int rt_step_list_streams(rt_job *j)
{
	const char *table, *start;
	uint32_t limit;
	int rc = wire_list_streams_from_pb(j->in->list_streams, &table, &start, &limit, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (j->phase == 0) {
		j->phase = 1;
		return rt_job_refresh(j);
	}
	if (j->refresh_rc != SHOAL_OK)
		return rt_job_fail(j, j->refresh_rc, "%s", j->refresh_msg);
	rt_catalog_snap *snap = rt_catalog_acquire(&j->rt->catalog);
	Shoal__ListStreamsResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	Shoal__StreamSummary **v = sh_arena_calloc(
	    &j->arena,
	    (snap != NULL ? snap->n + snap->n_dropped : 0) * (ST_STREAM_PAST_MAX + 1) + 1,
	    sizeof(*v));
	bool done = false;
	int64_t now = rt_wall_ms(), retention = sh_cluster_stream_retention_ms(j->rt->conf);
	if (out == NULL || v == NULL) {
		rt_catalog_release(snap);
		return nomem(j);
	}
	shoal__list_streams_response__init(out);
	out->streams = v;
	bool past_start = start == NULL;
	/* Live tables by name, then deleted ones whose streams are kept. */
	uint32_t n_all = snap != NULL ? snap->n + snap->n_dropped : 0;
	for (uint32_t i = 0; i < n_all && rc == SHOAL_OK; i++) {
		const rt_table *t = i < snap->n ? &snap->tables[i] : &snap->dropped[i - snap->n];
		if (t->def.stream.label_ms == 0 || (table != NULL && strcmp(table, t->name) != 0))
			continue;
		/* The latest stream, then the ones it replaced, newest first. */
		for (uint32_t k = 0; k <= t->def.stream.n_past; k++) {
			int64_t label_ms =
			    k == 0 ? t->def.stream.label_ms : t->def.stream.past[k - 1].label_ms;
			bool enabled;
			st_stream_view view;
			if (t->dropped_ms != 0
			        ? !st_stream_spec_find_dropped(&t->def.stream, t->dropped_ms,
			                                       label_ms, now, retention, &view)
			        : !st_stream_spec_find(&t->def.stream, label_ms, now, retention,
			                               &enabled, &view))
				continue; /* a replaced stream past the retention */
			char *arn = wire_stream_arn(&j->arena, t->name, label_ms);
			char *label = sh_arena_alloc(&j->arena, WIRE_STREAM_LABEL_MAX);
			char *name = sh_arena_strndup(&j->arena, t->name, strlen(t->name));
			Shoal__StreamSummary *e = sh_arena_alloc(&j->arena, sizeof(*e));
			if (arn == NULL || label == NULL || name == NULL || e == NULL) {
				rc = nomem(j);
				break;
			}
			if (!past_start) {
				past_start = strcmp(arn, start) == 0;
				continue;
			}
			if (out->n_streams == limit) {
				WIRE_SET(out, last_evaluated_stream_arn, v[limit - 1]->stream_arn);
				done = true;
				break;
			}
			wire_stream_label(label_ms, label);
			shoal__stream_summary__init(e);
			e->stream_arn = arn;
			e->table_name = name;
			e->stream_label = label;
			v[out->n_streams++] = e;
		}
		if (done)
			break;
	}
	bool exists = table == NULL || (snap != NULL && rt_catalog_find(snap, table) != NULL);
	for (uint32_t i = 0; !exists && snap != NULL && i < snap->n_dropped; i++)
		exists = strcmp(snap->dropped[i].name, table) == 0;
	rt_catalog_release(snap);
	if (rc != SHOAL_OK)
		return rc;
	if (!exists)
		return rt_job_fail(j, SHOAL_E_NOT_FOUND,
		                   "Requested resource not found: Table: %s not found", table);
	j->out->result_case = SHOAL__RESPONSE__RESULT_LIST_STREAMS;
	j->out->list_streams = out;
	return SHOAL_OK;
}
