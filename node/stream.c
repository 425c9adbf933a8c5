/*
 * stream.c -- a storage node's half of DynamoDB Streams: DescribeStream (this
 * group's shards), GetShardIterator and GetRecords, served by any replica
 * from its own LMDB (the stream log and its shards are replicated state:
 * storage/stream.h has the design).  A group's shards are its static
 * partition's (implicit until a move closes it) and one per range that
 * moved here or stayed when one left (written at the move's fence and own:
 * pmove.c's node_op_part).  The router (router/stream.c) routes a shard to
 * the group whose log holds it and merges DescribeStream's shards.
 *
 * Each handler checks that the stream is one of the table's (the label in
 * the ARN or iterator is the table's latest stream or one it replaced, still
 * within the retention: st_stream_spec_find; for an iterator the table id
 * too: a table dropped and created again under the same name has another
 * id), then reads st_stream_*.  A shard of a disabled stream (the latest
 * one disabled, or a replaced one) is closed: DescribeStream gives its
 * EndingSequenceNumber and GetRecords stops handing out iterators once it
 * has read to its end.
 */
#include <string.h>

#include "node/node.h"
#include "proto/wire.h"
#include "storage/stream.h"

static int nomem(node_call *c)
{
	return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
}

static int stream_not_found(node_call *c, const char *arn)
{
	return sh_errf(c->errmsg, SHOAL_E_NOT_FOUND,
	               "Requested resource not found: Stream: %s not found", arn);
}

/* The table of a stream, which must be one of the table's streams: *enabled
 * and *view are the stream's. */
static int load_stream(node_call *c, const char *arn, const char *table, int64_t label_ms,
                       st_table_info *t, bool *enabled, st_stream_view *view)
{
	int64_t now = node_wall_ms();
	int rc = st_table_describe(node_group_env(c->group), table, c->arena, t, c->errmsg);
	if (rc == SHOAL_OK &&
	    st_stream_spec_find(&t->def.stream, label_ms, now,
	                        sh_cluster_stream_retention_ms(c->node->conf), enabled, view))
		return SHOAL_OK;
	if (rc != SHOAL_OK && rc != SHOAL_E_NOT_FOUND)
		return rc;
	/* A deleted table's stream, kept for the retention. */
	int64_t deleted;
	memset(t, 0, sizeof(*t));
	rc = st_stream_dropped_find(node_group_env(c->group), table, label_ms, now, c->arena,
	                            &t->def, &deleted, c->errmsg);
	if (rc == SHOAL_E_NOT_FOUND)
		return stream_not_found(c, arn);
	if (rc == SHOAL_OK) {
		bool en;
		*enabled = false;
		if (!st_stream_spec_find(&t->def.stream, label_ms, now, INT64_MAX / 2, &en, view))
			return stream_not_found(c, arn);
	}
	return rc;
}

node_stream_static node_stream_static_of(const sh_cluster_conf *conf, uint32_t g)
{
	node_stream_static st = {0};
	if (sh_cluster_group_partition(conf, g, &st.partition)) {
		st.has = true;
		sh_cluster_partition_range(conf, st.partition, &st.lo, &st.hi);
	}
	return st;
}

/* The shard `w` names, if it is one of this group's shards of table:
 * SHOAL_OK with *out, or ResourceNotFound. */
static int shard_here(node_call *c, uint32_t table, const wire_shard *w, st_shard *out)
{
	uint32_t gid = node_group_id(c->group);
	node_stream_static st = node_stream_static_of(c->node->conf, gid);
	int rc = SHOAL_E_NOT_FOUND;
	if (w->is_static ? st.has && w->partition == st.partition : w->group == gid)
		rc = st_stream_shard_get(node_group_env(c->group), table,
		                         w->is_static ? st.lo : w->lo, w->is_static ? 0 : w->start,
		                         st.has, st.lo, st.hi, out, c->errmsg);
	if (rc == SHOAL_E_NOT_FOUND)
		return sh_errf(c->errmsg, SHOAL_E_NOT_FOUND,
		               "Requested resource not found: Shard does not exist");
	return rc;
}

/* The wire name of shard (lo, start) of group gid (start 0: the group's
 * static partition's). */
static wire_shard wire_of(const sh_cluster_conf *conf, uint32_t gid, uint64_t lo, uint64_t start)
{
	wire_shard w = {.group = gid, .lo = lo, .start = start};
	if (start == 0) /* only a static partition's shard starts at 0 */
		w.is_static = sh_cluster_group_partition(conf, gid, &w.partition);
	return w;
}

static char *shard_id(node_call *c, int64_t label_ms, uint32_t gid, uint64_t lo, uint64_t start)
{
	char *id = sh_arena_alloc(c->arena, WIRE_SHARD_ID_MAX);
	if (id != NULL) {
		wire_shard w = wire_of(c->node->conf, gid, lo, start);
		wire_shard_id(label_ms, &w, id);
	}
	return id;
}

/* The region of an ARN ("arn:aws:dynamodb:<region>:..."), in the arena. */
static const char *arn_region(sh_arena *a, const char *arn)
{
	const char *p = arn;
	for (int i = 0; i < 3 && p != NULL; i++)
		p = (p = strchr(p, ':')) != NULL ? p + 1 : NULL;
	const char *e = p != NULL ? strchr(p, ':') : NULL;
	char *r = e != NULL ? sh_arena_strndup(a, p, (size_t)(e - p)) : NULL;
	return r != NULL ? r : "";
}

static char *seqno(node_call *c, uint64_t seq)
{
	char *s = sh_arena_alloc(c->arena, WIRE_SEQNO_MAX);
	if (s != NULL)
		wire_seqno(seq, s);
	return s;
}

int node_handle_describe_stream(node_call *c)
{
	wire_describe_stream_req r;
	st_table_info t;
	bool enabled;
	st_stream_view view;
	int rc =
	    wire_describe_stream_from_pb(c->arena, c->req->request->describe_stream, &r, c->errmsg);
	if (rc == SHOAL_OK)
		rc = load_stream(c, r.stream_arn, r.table, r.label_ms, &t, &enabled, &view);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__DescribeStreamResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	Shoal__StreamDescription *d = sh_arena_alloc(c->arena, sizeof(*d));
	char *label = sh_arena_alloc(c->arena, WIRE_STREAM_LABEL_MAX);
	uint32_t gid = node_group_id(c->group);
	node_stream_static st = node_stream_static_of(c->node->conf, gid);
	st_shard *sh;
	uint32_t n_sh;
	st_stream_bounds b;
	if ((rc = st_stream_shard_list(node_group_env(c->group), t.def.id, st.has, st.lo, st.hi,
	                               c->arena, &sh, &n_sh, c->errmsg)) != SHOAL_OK ||
	    (rc = st_stream_bounds_get(node_group_env(c->group), t.def.id, r.label_ms, &b,
	                               c->errmsg)) != SHOAL_OK)
		return rc;
	Shoal__Shard **shards = sh_arena_calloc(c->arena, n_sh + 1, sizeof(*shards));
	if (out == NULL || d == NULL || label == NULL || shards == NULL)
		return nomem(c);
	shoal__describe_stream_response__init(out);
	shoal__stream_description__init(d);
	wire_stream_label(r.label_ms, label);
	d->stream_arn = (char *)r.stream_arn;
	d->stream_label = label;
	d->stream_status = enabled ? "ENABLED" : "DISABLED";
	d->stream_view_type = (char *)wire_stream_view_name(view);
	d->creation_request_date_time = r.label_ms;
	d->table_name = (char *)t.def.name;
	d->shards = shards;
	/* This group's shards: its static partition's, and a span of its log
	 * for each range that moved here or stayed when one left.  The
	 * stream's records begin at its first (else where the next one will
	 * be); a shard closed before that holds none of them and is left out. */
	uint64_t first = b.first != 0 ? b.first : st_stream_latest(&b);
	for (uint32_t i = 0; i < n_sh; i++) {
		uint64_t from = sh[i].start > first ? sh[i].start : first;
		if (sh[i].end != 0 && from >= sh[i].end)
			continue;
		Shoal__Shard *s = sh_arena_alloc(c->arena, sizeof(*s));
		Shoal__SequenceNumberRange *range = sh_arena_alloc(c->arena, sizeof(*range));
		char *id = shard_id(c, r.label_ms, gid, sh[i].lo, sh[i].start);
		char *start = seqno(c, from);
		if (s == NULL || range == NULL || id == NULL || start == NULL)
			return nomem(c);
		shoal__shard__init(s);
		shoal__sequence_number_range__init(range);
		s->shard_id = id;
		if (sh[i].has_parent) {
			char *pid = shard_id(c, r.label_ms, sh[i].parent_group, sh[i].parent_lo,
			                     sh[i].parent_start);
			if (pid == NULL)
				return nomem(c);
			WIRE_SET(s, parent_shard_id, pid);
		}
		WIRE_SET(range, starting_sequence_number, start);
		/* Closed: the shard's span ended (a move), or the stream was
		 * disabled (its last record, or where it began if none). */
		uint64_t last = 0;
		if (sh[i].end != 0)
			last = sh[i].end - 1;
		if (!enabled && (last == 0 || (b.last != 0 ? b.last : from) < last))
			last = b.last != 0 ? b.last : from;
		if (last != 0) {
			char *end = seqno(c, last < from ? from : last);
			if (end == NULL)
				return nomem(c);
			WIRE_SET(range, ending_sequence_number, end);
		}
		s->sequence_number_range = range;
		shards[d->n_shards++] = s;
	}
	out->stream_description = d;
	c->resp->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_STREAM;
	c->resp->describe_stream = out;
	return SHOAL_OK;
}

int node_handle_get_shard_iterator(node_call *c)
{
	wire_shard_iter_req r;
	st_table_info t;
	bool enabled;
	st_stream_view view;
	int rc = wire_get_shard_iterator_from_pb(c->arena, c->req->request->get_shard_iterator, &r,
	                                         c->errmsg);
	if (rc == SHOAL_OK)
		rc = load_stream(c, r.stream_arn, r.table, r.label_ms, &t, &enabled, &view);
	st_shard sh;
	if (rc == SHOAL_OK)
		rc = shard_here(c, t.def.id, &r.shard, &sh);
	st_stream_bounds b;
	if (rc == SHOAL_OK)
		rc = st_stream_bounds_get(node_group_env(c->group), t.def.id, r.label_ms, &b,
		                          c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	wire_iter it = {.table_id = t.def.id, .shard = r.shard};
	switch (r.type) {
	case WIRE_ITER_TRIM_HORIZON:
		it.pos = b.trimmed + 1 > sh.start ? b.trimmed + 1 : sh.start;
		break;
	case WIRE_ITER_LATEST: /* safe on a lagging replica: st_stream_latest */
		it.pos = sh.end != 0 ? sh.end : st_stream_latest(&b);
		break;
	case WIRE_ITER_AT:
		it.pos = r.seq;
		break;
	case WIRE_ITER_AFTER:
		it.pos = r.seq + 1;
		break;
	}
	bool at_seq = r.type == WIRE_ITER_AT || r.type == WIRE_ITER_AFTER;
	if (at_seq && (r.seq < sh.start || (sh.end != 0 && r.seq >= sh.end)))
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "Invalid SequenceNumber: %s is not in shard %s",
		               WIRE_OPT(c->req->request->get_shard_iterator, sequence_number),
		               WIRE_OPT(c->req->request->get_shard_iterator, shard_id));
	if (at_seq && it.pos <= b.trimmed)
		return sh_errf(c->errmsg, SHOAL_E_TRIMMED,
		               "Attempting to access data that has been trimmed: sequence number "
		               "%s is before the shard's oldest record",
		               WIRE_OPT(c->req->request->get_shard_iterator, sequence_number));
	it.issued_ms = node_wall_ms();
	Shoal__GetShardIteratorResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	char *s = wire_iter_encode(c->arena, r.stream_arn, &it);
	if (out == NULL || s == NULL)
		return nomem(c);
	shoal__get_shard_iterator_response__init(out);
	WIRE_SET(out, shard_iterator, s);
	c->resp->result_case = SHOAL__RESPONSE__RESULT_GET_SHARD_ITERATOR;
	c->resp->get_shard_iterator = out;
	return SHOAL_OK;
}

/* A GetRecords reply stays under DynamoDB's 1 MB: records are read up to
 * this many encoded bytes (their JSON is larger, their protobuf about the
 * same). */
#define RECORDS_MAX_BYTES (1u << 20)

int node_handle_get_records(node_call *c)
{
	wire_iter it;
	uint32_t limit;
	st_table_info t;
	bool enabled = false;
	st_stream_view view;
	int64_t now = node_wall_ms();
	int rc = wire_get_records_from_pb(c->arena, c->req->request->get_records, &it, &limit,
	                                  c->errmsg);
	if (rc == SHOAL_OK)
		rc = wire_iter_check_age(&it, now, c->errmsg);
	if (rc == SHOAL_OK)
		rc = load_stream(c, it.stream_arn, it.table, it.label_ms, &t, &enabled, &view);
	if (rc == SHOAL_OK && t.def.id != it.table_id)
		rc = stream_not_found(c, it.stream_arn);
	st_shard sh;
	if (rc == SHOAL_OK)
		rc = shard_here(c, t.def.id, &it.shard, &sh);
	st_stream_rec *recs;
	uint32_t n;
	uint64_t next;
	if (rc == SHOAL_OK)
		rc = st_stream_read_shard(node_group_env(c->group), t.def.id, it.label_ms, &sh,
		                          it.pos, limit, RECORDS_MAX_BYTES, c->arena, &recs, &n,
		                          &next, c->errmsg);
	Shoal__GetRecordsResponse *out = sh_arena_alloc(c->arena, sizeof(*out));
	if (rc == SHOAL_OK && out == NULL)
		rc = nomem(c);
	if (rc == SHOAL_OK) {
		shoal__get_records_response__init(out);
		rc = wire_stream_records_to_pb(c->arena, recs, n, t.def.id, node_group_id(c->group),
		                               arn_region(c->arena, it.stream_arn), &out->records,
		                               c->errmsg);
		out->n_records = n;
	}
	if (rc != SHOAL_OK)
		return rc;
	/* A closed shard (its span ended: a move; or the stream is disabled)
	 * read to its end has no next iterator; an open one always has. */
	bool closed = sh.end != 0 && next >= sh.end;
	if (!enabled && !closed) {
		st_stream_bounds b;
		rc = st_stream_bounds_get(node_group_env(c->group), t.def.id, it.label_ms, &b,
		                          c->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		closed = next > b.last;
	}
	if (!closed) {
		wire_iter nx = it;
		nx.pos = next;
		nx.issued_ms = now;
		char *s = wire_iter_encode(c->arena, it.stream_arn, &nx);
		if (s == NULL)
			return nomem(c);
		WIRE_SET(out, next_shard_iterator, s);
	}
	c->resp->result_case = SHOAL__RESPONSE__RESULT_GET_RECORDS;
	c->resp->get_records = out;
	return SHOAL_OK;
}
