/*
 * wire_stream.c -- DynamoDB Streams on the wire: StreamSpecification, the
 * names and tokens a client sees (stream labels, shard ids, sequence
 * numbers, shard iterators), the ARN's parsing, and stream records as
 * protobuf.  One place for each of these: the router, the node and the
 * tests all use them.  (The stream ARN itself is built next to the table
 * ARN, wire_desc.c's wire_stream_arn.)
 *
 *   StreamLabel     the stream's creation time, ISO 8601 UTC with
 *                   milliseconds and no zone, as DynamoDB writes it:
 *                   "2026-11-26T01:41:11.123"
 *   StreamArn       <TableArn>/stream/<label>
 *   ShardId         a static partition's shard (wire_shard):
 *                     "shardId-" <label ms, 20 digits> "-" <partition, 8 hex>
 *                   a span of one group's log of one hash range (a range
 *                   that moved, or what stayed when one left):
 *                     "shardId-" <label ms, 20 digits> "-" <group, 4 hex>
 *                     <lo, 16 hex> <first seq of the span, 16 hex>
 *                   (65 characters: DynamoDB's ShardId is 28..65)
 *   SequenceNumber  "1" then the per-(group, table) seq in 20 digits: 21
 *                   characters (DynamoDB: 21..40), ordered as numbers
 *   ShardIterator   <StreamArn> "|1|" <table id> "|" <partition> "|"
 *                   <next seq to read> "|" <issue time ms> for a static
 *                   partition's shard, <StreamArn> "|2|" <table id> "|"
 *                   <group> "|" <lo> "|" <span start> "|" <next seq> "|"
 *                   <issue time ms> for a span's: opaque to
 *                   clients, checked on use (table id and label against the
 *                   catalog, expiry after 15 minutes as DynamoDB's)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/wire_int.h"

static const char *const view_names[] = {
    [ST_VIEW_KEYS_ONLY] = "KEYS_ONLY",
    [ST_VIEW_NEW_IMAGE] = "NEW_IMAGE",
    [ST_VIEW_OLD_IMAGE] = "OLD_IMAGE",
    [ST_VIEW_NEW_AND_OLD_IMAGES] = "NEW_AND_OLD_IMAGES",
};

const char *wire_stream_view_name(st_stream_view v)
{
	return v >= ST_VIEW_KEYS_ONLY && v <= ST_VIEW_NEW_AND_OLD_IMAGES ? view_names[v] : "";
}

static bool view_parse(const char *s, st_stream_view *out)
{
	for (int v = ST_VIEW_KEYS_ONLY; s != NULL && v <= ST_VIEW_NEW_AND_OLD_IMAGES; v++)
		if (strcmp(s, view_names[v]) == 0) {
			*out = (st_stream_view)v;
			return true;
		}
	return false;
}

int wire_stream_spec_from_pb(const Shoal__StreamSpecification *pb, st_stream_spec *out,
                             char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *view = WIRE_OPT(pb, stream_view_type);
	if (!WIRE_HAS(pb, stream_enabled))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at "
		               "'streamSpecification.streamEnabled' failed to satisfy constraint: "
		               "Member must not be null");
	if (view != NULL && !view_parse(view, &out->view))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%s' at "
		               "'streamSpecification.streamViewType' failed to satisfy constraint: "
		               "Member must satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, "
		               "NEW_AND_OLD_IMAGES, KEYS_ONLY]",
		               view);
	out->enabled = pb->stream_enabled;
	if (out->enabled && view == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: You must specify a "
		               "StreamViewType when enabling a stream");
	if (!out->enabled && view != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: You cannot modify the "
		               "StreamViewType when disabling a stream");
	return SHOAL_OK;
}

Shoal__StreamSpecification *wire_stream_spec_to_pb(sh_arena *a, const st_stream_spec *s)
{
	Shoal__StreamSpecification *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return NULL;
	shoal__stream_specification__init(pb);
	WIRE_SET(pb, stream_enabled, s->enabled);
	if (s->enabled)
		WIRE_SET(pb, stream_view_type, (char *)wire_stream_view_name(s->view));
	return pb;
}

/* ------------------------------------------------------------------------ */
/* Labels, shard ids, sequence numbers                                       */
/* ------------------------------------------------------------------------ */

void wire_stream_label(int64_t ms, char out[WIRE_STREAM_LABEL_MAX])
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	snprintf(out, WIRE_STREAM_LABEL_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03u",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (unsigned)((ms % 1000 + 1000) % 1000));
}

/* Digits only, exactly n of them, as an unsigned number; false otherwise. */
static bool digits(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t d = (uint64_t)(s[i] - '0');
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

bool wire_stream_label_parse(const char *s, int64_t *ms)
{
	uint64_t y, mo, d, h, mi, se, f;
	if (s == NULL || strlen(s) != 23 || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
	    s[13] != ':' || s[16] != ':' || s[19] != '.' || !digits(s, 4, &y) ||
	    !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) || !digits(s + 11, 2, &h) ||
	    !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &se) || !digits(s + 20, 3, &f))
		return false;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return false;
	struct tm tm = {0};
	tm.tm_year = (int)y - 1900;
	tm.tm_mon = (int)mo - 1;
	tm.tm_mday = (int)d;
	tm.tm_hour = (int)h;
	tm.tm_min = (int)mi;
	tm.tm_sec = (int)se;
	*ms = (int64_t)timegm(&tm) * 1000 + (int64_t)f;
	return true;
}

void wire_shard_id(int64_t label_ms, const wire_shard *s, char out[WIRE_SHARD_ID_MAX])
{
	if (s->is_static)
		snprintf(out, WIRE_SHARD_ID_MAX, "shardId-%020" PRId64 "-%08" PRIx32, label_ms,
		         s->partition);
	else
		snprintf(out, WIRE_SHARD_ID_MAX,
		         "shardId-%020" PRId64 "-%04" PRIx32 "%016" PRIx64 "%016" PRIx64, label_ms,
		         s->group, s->lo, s->start);
}

/* n lower-case hex digits (at most 16) into *v. */
static bool hex(const char *s, int n, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

bool wire_shard_id_parse(const char *s, int64_t *label_ms, wire_shard *out)
{
	uint64_t label, a, b, c;
	size_t n = s != NULL ? strlen(s) : 0;
	if ((n != 37 && n != 65) || strncmp(s, "shardId-", 8) != 0 || s[28] != '-' ||
	    !digits(s + 8, 20, &label) || label > INT64_MAX)
		return false;
	memset(out, 0, sizeof(*out));
	if (n == 37) {
		if (!hex(s + 29, 8, &a))
			return false;
		out->is_static = true;
		out->partition = (uint32_t)a;
	} else {
		if (!hex(s + 29, 4, &a) || !hex(s + 33, 16, &b) || !hex(s + 49, 16, &c) || c == 0)
			return false;
		out->group = (uint32_t)a;
		out->lo = b;
		out->start = c;
	}
	*label_ms = (int64_t)label;
	return true;
}

void wire_seqno(uint64_t seq, char out[WIRE_SEQNO_MAX])
{
	snprintf(out, WIRE_SEQNO_MAX, "1%020" PRIu64, seq);
}

bool wire_seqno_parse(const char *s, uint64_t *seq)
{
	return s != NULL && strlen(s) == 21 && s[0] == '1' && digits(s + 1, 20, seq);
}

/* ------------------------------------------------------------------------ */
/* ARNs and iterators                                                        */
/* ------------------------------------------------------------------------ */

int wire_stream_arn_parse(sh_arena *a, const char *arn, const char **table, int64_t *label_ms,
                          char *errmsg)
{
	if (arn == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'streamArn' failed to "
		               "satisfy constraint: Member must not be null");
	size_t n = strlen(arn);
	if (n < 37 || n > 1024)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '%.100s' at 'streamArn' failed "
		    "to satisfy constraint: Member must have length %s",
		    arn, n < 37 ? "greater than or equal to 37" : "less than or equal to 1024");
	const char *t = strstr(arn, ":table/");
	const char *st = t != NULL ? strstr(t, "/stream/") : NULL;
	if (strncmp(arn, "arn:", 4) != 0 || t == NULL || st == NULL || st == t + 7 ||
	    !wire_stream_label_parse(st + 8, label_ms))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid StreamArn");
	char *name = sh_arena_strndup(a, t + 7, (size_t)(st - (t + 7)));
	if (name == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	*table = name;
	return SHOAL_OK;
}

char *wire_iter_encode(sh_arena *a, const char *stream_arn, const wire_iter *it)
{
	size_t n = strlen(stream_arn) + 128;
	char *s = sh_arena_alloc(a, n);
	if (s != NULL && it->shard.is_static)
		snprintf(s, n, "%s|1|%" PRIu32 "|%" PRIu32 "|%" PRIu64 "|%" PRId64, stream_arn,
		         it->table_id, it->shard.partition, it->pos, it->issued_ms);
	else if (s != NULL)
		snprintf(s, n,
		         "%s|2|%" PRIu32 "|%" PRIu32 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64
		         "|%" PRId64,
		         stream_arn, it->table_id, it->shard.group, it->shard.lo, it->shard.start,
		         it->pos, it->issued_ms);
	return s;
}

int wire_iter_decode(sh_arena *a, const char *s, wire_iter *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'shardIterator' failed "
		               "to satisfy constraint: Member must not be null");
	size_t n = strlen(s);
	if (n < 1 || n > 2048)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value at 'shardIterator' failed to "
		               "satisfy constraint: Member must have length %s",
		               n < 1 ? "greater than or equal to 1" : "less than or equal to 2048");
	const char *bar = strchr(s, '|');
	char tail[200];
	if (bar == NULL || strlen(bar) >= sizeof(tail))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid ShardIterator");
	memcpy(tail, bar, strlen(bar) + 1);
	/* The fields after the version, all decimal: v1 table, partition, pos,
	 * issued; v2 table, group, lo, start, pos, issued. */
	char *f[8];
	uint64_t v[8];
	int nf = 0;
	for (char *p = tail + 1, *q; nf < 8; p = q + 1) {
		f[nf++] = p;
		if ((q = strchr(p, '|')) == NULL)
			break;
		*q = '\0';
	}
	bool v2 = nf == 7 && strcmp(f[0], "2") == 0;
	bool ok = v2 || (nf == 5 && strcmp(f[0], "1") == 0);
	for (int i = 1; ok && i < nf; i++)
		ok = f[i][0] != '\0' && digits(f[i], strlen(f[i]), &v[i]);
	if (!ok || v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[nf - 1] > INT64_MAX ||
	    (v2 && v[4] == 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid ShardIterator");
	char *arn = sh_arena_strndup(a, s, (size_t)(bar - s));
	if (arn == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	int rc = wire_stream_arn_parse(a, arn, &out->table, &out->label_ms, errmsg);
	if (rc != SHOAL_OK)
		return rc == SHOAL_E_VALIDATION
		           ? sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid ShardIterator")
		           : rc;
	out->stream_arn = arn;
	out->table_id = (uint32_t)v[1];
	if (v2) {
		out->shard.group = (uint32_t)v[2];
		out->shard.lo = v[3];
		out->shard.start = v[4];
	} else {
		out->shard.is_static = true;
		out->shard.partition = (uint32_t)v[2];
	}
	out->pos = v[nf - 2];
	out->issued_ms = (int64_t)v[nf - 1];
	return SHOAL_OK;
}

int wire_iter_check_age(const wire_iter *it, int64_t now_ms, char *errmsg)
{
	if (now_ms - it->issued_ms > WIRE_ITER_TTL_MS)
		return sh_errf(errmsg, SHOAL_E_EXPIRED_ITERATOR,
		               "Iterator expired. The iterator was created at time %" PRId64
		               " while right now it's %" PRId64
		               " which is further in the future than the tolerated delay of %d "
		               "milliseconds.",
		               it->issued_ms, now_ms, WIRE_ITER_TTL_MS);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const event_names[] = {
    [ST_EV_INSERT] = "INSERT",
    [ST_EV_MODIFY] = "MODIFY",
    [ST_EV_REMOVE] = "REMOVE",
};

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting stream records");
}

int wire_stream_records_to_pb(sh_arena *a, const st_stream_rec *recs, uint32_t n, uint32_t table_id,
                              uint32_t group, const char *region, Shoal__Record ***out,
                              char *errmsg)
{
	Shoal__Record **v = sh_arena_calloc(a, n + 1, sizeof(*v));
	if (v == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < n; i++) {
		const st_stream_rec *r = &recs[i];
		Shoal__Record *pb = sh_arena_alloc(a, sizeof(*pb));
		Shoal__StreamRecord *d = sh_arena_alloc(a, sizeof(*d));
		char *id = sh_arena_alloc(a, 40), *seq = sh_arena_alloc(a, WIRE_SEQNO_MAX);
		if (pb == NULL || d == NULL || id == NULL || seq == NULL)
			return nomem(errmsg);
		shoal__record__init(pb);
		shoal__stream_record__init(d);
		/* 32 hex digits, unique per record of the cluster (seqs are per
		 * (group, table)). */
		snprintf(id, 40, "%08" PRIx32 "%08" PRIx32 "%016" PRIx64, table_id, group, r->seq);
		wire_seqno(r->seq, seq);
		pb->event_id = id;
		pb->event_name = (char *)event_names[r->event];
		pb->event_version = "1.1";
		pb->event_source = "aws:dynamodb";
		pb->aws_region = (char *)region;
		d->approximate_creation_date_time = r->ts_ms - r->ts_ms % 1000;
		d->sequence_number = seq;
		d->size_bytes = r->size_bytes;
		d->stream_view_type = (char *)wire_stream_view_name(r->view);
		int rc = wire_item_to_pb(a, &r->keys, &d->keys, errmsg);
		if (rc == SHOAL_OK && r->old_image != NULL)
			rc = wire_item_to_pb(a, r->old_image, &d->old_image, errmsg);
		if (rc == SHOAL_OK && r->new_image != NULL)
			rc = wire_item_to_pb(a, r->new_image, &d->new_image, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		pb->dynamodb = d;
		if (r->by_ttl) {
			/* DynamoDB's marking of a Time to Live deletion. */
			Shoal__Identity *who = sh_arena_alloc(a, sizeof(*who));
			if (who == NULL)
				return nomem(errmsg);
			shoal__identity__init(who);
			who->principal_id = "dynamodb.amazonaws.com";
			who->type = "Service";
			pb->user_identity = who;
		}
		v[i] = pb;
	}
	*out = v;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static int limit_check(bool has, int32_t v, int32_t max, int32_t dflt, uint32_t *out, char *errmsg)
{
	if (!has) {
		*out = (uint32_t)dflt;
		return SHOAL_OK;
	}
	if (v < 1 || v > max)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '%d' at 'limit' failed to satisfy "
		    "constraint: Member must have value %s %d",
		    v, v < 1 ? "greater than or equal to" : "less than or equal to",
		    v < 1 ? 1 : max);
	*out = (uint32_t)v;
	return SHOAL_OK;
}

static const char *const iter_types[] = {
    [WIRE_ITER_TRIM_HORIZON] = "TRIM_HORIZON",
    [WIRE_ITER_LATEST] = "LATEST",
    [WIRE_ITER_AT] = "AT_SEQUENCE_NUMBER",
    [WIRE_ITER_AFTER] = "AFTER_SEQUENCE_NUMBER",
};

static int shard_check(const char *shard, const char *field, int64_t label_ms, wire_shard *out,
                       char *errmsg)
{
	if (shard == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at '%s' failed to "
		               "satisfy constraint: Member must not be null",
		               field);
	size_t n = strlen(shard);
	if (n < 28 || n > 65)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%.80s' at '%s' failed to "
		               "satisfy constraint: Member must have length %s",
		               shard, field,
		               n < 28 ? "greater than or equal to 28" : "less than or equal to 65");
	int64_t l;
	if (!wire_shard_id_parse(shard, &l, out) || l != label_ms)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
		               "Requested resource not found: Shard does not exist");
	return SHOAL_OK;
}

int wire_get_shard_iterator_from_pb(sh_arena *a, const Shoal__GetShardIteratorRequest *pb,
                                    wire_shard_iter_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc =
	    wire_stream_arn_parse(a, WIRE_OPT(pb, stream_arn), &out->table, &out->label_ms, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->stream_arn = WIRE_OPT(pb, stream_arn);
	const char *type = WIRE_OPT(pb, shard_iterator_type);
	if (type == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'shardIteratorType' "
		               "failed to satisfy constraint: Member must not be null");
	int t = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(type, iter_types[i]) == 0)
			t = i;
	if (t < 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%.80s' at 'shardIteratorType' "
		               "failed to satisfy constraint: Member must satisfy enum value set: "
		               "[AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]",
		               type);
	out->type = (wire_iter_type)t;
	if ((rc = shard_check(WIRE_OPT(pb, shard_id), "shardId", out->label_ms, &out->shard,
	                      errmsg)) != SHOAL_OK)
		return rc;
	const char *seq = WIRE_OPT(pb, sequence_number);
	bool needs = out->type == WIRE_ITER_AT || out->type == WIRE_ITER_AFTER;
	if (needs && seq == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Must specify a sequence number for iterator type %s", type);
	if (!needs && seq != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Sequence number must not be specified for iterator type %s", type);
	if (needs && (!wire_seqno_parse(seq, &out->seq) || out->seq == 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid SequenceNumber: %.80s", seq);
	return SHOAL_OK;
}

int wire_get_records_from_pb(sh_arena *a, const Shoal__GetRecordsRequest *pb, wire_iter *it,
                             uint32_t *limit, char *errmsg)
{
	int rc = limit_check(WIRE_HAS(pb, limit), pb->limit, 1000, 1000, limit, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_iter_decode(a, WIRE_OPT(pb, shard_iterator), it, errmsg);
	return rc;
}

int wire_describe_stream_from_pb(sh_arena *a, const Shoal__DescribeStreamRequest *pb,
                                 wire_describe_stream_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc =
	    wire_stream_arn_parse(a, WIRE_OPT(pb, stream_arn), &out->table, &out->label_ms, errmsg);
	if (rc == SHOAL_OK)
		rc = limit_check(WIRE_HAS(pb, limit), pb->limit, 100, 100, &out->limit, errmsg);
	out->stream_arn = WIRE_OPT(pb, stream_arn);
	const char *start = WIRE_OPT(pb, exclusive_start_shard_id);
	wire_shard sh;
	out->start_id = start;
	if (rc == SHOAL_OK && start != NULL &&
	    (rc = shard_check(start, "exclusiveStartShardId", out->label_ms, &sh, errmsg)) ==
	        SHOAL_E_NOT_FOUND)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid ExclusiveStartShardId: %.80s",
		             start);
	const Shoal__ShardFilter *f = pb->shard_filter;
	if (rc != SHOAL_OK || f == NULL)
		return rc;
	const char *type = WIRE_OPT(f, type);
	if (type == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'shardFilter.type' "
		               "failed to satisfy constraint: Member must not be null");
	if (strcmp(type, "CHILD_SHARDS") != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%.80s' at 'shardFilter.type' "
		               "failed to satisfy constraint: Member must satisfy enum value set: "
		               "[CHILD_SHARDS]",
		               type);
	out->child_of = WIRE_OPT(f, shard_id);
	if (out->child_of == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ShardFilter of type CHILD_SHARDS needs a ShardId");
	if ((rc = shard_check(out->child_of, "shardFilter.shardId", out->label_ms, &sh, errmsg)) ==
	    SHOAL_E_NOT_FOUND)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid ShardId in ShardFilter: %.80s",
		             out->child_of);
	return rc;
}

int wire_list_streams_from_pb(const Shoal__ListStreamsRequest *pb, const char **table,
                              const char **start_arn, uint32_t *limit, char *errmsg)
{
	*table = WIRE_OPT(pb, table_name);
	*start_arn = WIRE_OPT(pb, exclusive_start_stream_arn);
	if (*table != NULL && (strlen(*table) < 3 || strlen(*table) > 255))
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '%.80s' at 'tableName' failed to "
		    "satisfy constraint: Member must have length %s",
		    *table,
		    strlen(*table) < 3 ? "greater than or equal to 3"
		                       : "less than or equal to 255");
	return limit_check(WIRE_HAS(pb, limit), pb->limit, 100, 100, limit, errmsg);
}

bool wire_stream_table_of(const char *arn, char *buf, size_t n)
{
	const char *t = arn != NULL ? strstr(arn, ":table/") : NULL;
	const char *st = t != NULL ? strstr(t, "/stream/") : NULL;
	if (st == NULL || (size_t)(st - (t + 7)) >= n)
		return false;
	memcpy(buf, t + 7, (size_t)(st - (t + 7)));
	buf[st - (t + 7)] = '\0';
	return true;
}
