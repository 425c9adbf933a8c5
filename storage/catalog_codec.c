/*
 * catalog_codec.c -- the catalog's table record: encoding and decoding.
 *
 * Table record, format version 4.  Older versions are still read: version
 * 3 lacks the metadata (META), which means no deletion protection, no
 * TableClass and no tags; version
 * 2 lacks the capacity fields (CAP, TCAP), which means PAY_PER_REQUEST with
 * no maximum and no history; version 1, written before secondary indexes
 * were maintained, also lacks the next index id, which is then the largest
 * index id + 1.  Integers are big-endian; STR is a u16
 * length followed by that many bytes (no NUL); TYPE is one byte, 1 = S,
 * 2 = N, 3 = B.
 *
 *   offset  size  field
 *   0       1     record format version, 4 (or 3, 2, 1)
 *   1       4     table id (u32)
 *   5       8     item count (u64)                } patched in place by
 *   13      8     size in bytes (u64, st_item_size) } st_table_count
 *   21      8     CreationDateTime, ms since the epoch (i64, two's complement)
 *   29      KS    the table's key schema
 *   ..      2     number of AttributeDefinitions (u16), then for each:
 *                   STR name, TYPE
 *   ..      2     number of indexes (u16), then for each:
 *                   STR  name
 *                   2    index id (u16, 1..)
 *                   1    kind: 0 = global, 1 = local
 *                   1    projection: 0 = ALL, 1 = KEYS_ONLY, 2 = INCLUDE
 *                   1    status: 0 = CREATING, 1 = ACTIVE, 2 = DELETING
 *                   4    write shards (u32, >= 1)
 *                   KS   the index's key schema
 *                   2    number of NonKeyAttributes (u16), then each as STR
 *                   CAP  the index's capacity (version 3; LSIs: zeros)
 *   ..      2     next index id (u16; version >= 2): ids below it are used
 *                 or retired, UpdateTable gives the next GSI this one
 *   ..      TCAP  the table's capacity (version >= 3)
 *   ..      META  the table's metadata (version 4)
 *   ..      EXT*  optional extensions (version >= 3), each 1 tag, 2 length
 *                 (u16), that many bytes; tags in increasing order, an
 *                 unknown tag is damage:
 *                   tag 1, 18 bytes: the stream (st_stream_spec): 1 enabled
 *                   (0/1), 1 StreamViewType (1..4), 8 label ms, 8 change ms;
 *                   absent when the table never had a stream
 *                   tag 2, 1 + 17 n bytes: the past streams (st_past_stream,
 *                   newest first): 1 count n (1..ST_STREAM_PAST_MAX), then
 *                   each: 8 label ms, 8 time it ended, 1 StreamViewType;
 *                   absent when there is none
 *   end           the record ends exactly here
 *
 *   KS := STR hash name, TYPE hash type, 1 byte has-range (0 or 1),
 *         and if has-range: STR range name, TYPE range type
 *   CAP := 8 rcu, 8 wcu (u64, provisioned; 0 when PAY_PER_REQUEST),
 *          8 max rcu, 8 max wcu (u64, OnDemandThroughput; 0: none),
 *          8 last increase, 8 last decrease (i64 ms since the epoch; 0: never),
 *          4 decreases (u32) counted in
 *          8 UTC day (i64, days since the epoch)                   = 60 bytes
 *   TCAP := 1 billing mode (0 = PAY_PER_REQUEST, 1 = PROVISIONED), CAP,
 *           8 LastUpdateToPayPerRequestDateTime (i64 ms; 0: never),
 *           8 time of the last capacity change (i64 ms, group 0's clock)
 *   META := 1 flags (bit 0: DeletionProtectionEnabled; bit 1: TTL follows
 *             the tags; other bits 0),
 *           1 TableClass (0 = not given, 1 = STANDARD,
 *             2 = STANDARD_INFREQUENT_ACCESS),
 *           8 time UpdateTable last changed the class (i64 ms; 0: never),
 *           2 number of tags (u16, <= 50), then for each: STR key, STR value,
 *           then with flags bit 1 (UpdateTimeToLive was applied once):
 *           8 time of the last UpdateTimeToLive (i64 ms, group 0's clock),
 *           STR TTL attribute name (empty: TTL disabled)
 *
 * The counters sit at a fixed offset (ST_REC_OFF_COUNT, ST_REC_OFF_BYTES in
 * catalog.h) so that the per-write counter update (st_table_count) patches 16
 * bytes instead of re-encoding the record.  Decoding checks every length and
 * enum against the bytes that are there and reports a damaged record as
 * SHOAL_E_INTERNAL, never reading past the end.
 */
#include <string.h>

#include "catalog.h"

#define EXT_STREAM     1
#define EXT_STREAM_LEN 18
#define EXT_PAST       2 /* past streams: count (1), then 17 bytes each */
#define EXT_PAST_ONE   17

/* ------------------------------------------------------------------------ */
/* Record encoding                                                           */
/* ------------------------------------------------------------------------ */

/* A writer that only counts when buf is NULL (first pass: the size). */
typedef struct wbuf {
	uint8_t *buf;
	size_t len;
} wbuf;

static void w_bytes(wbuf *w, const void *p, size_t n)
{
	if (w->buf != NULL && n > 0)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void w_u8(wbuf *w, uint8_t v)
{
	w_bytes(w, &v, 1);
}

static void w_u16(wbuf *w, uint16_t v)
{
	uint8_t b[2];
	st_put_be16(b, v);
	w_bytes(w, b, 2);
}

static void w_u32(wbuf *w, uint32_t v)
{
	uint8_t b[4];
	st_put_be32(b, v);
	w_bytes(w, b, 4);
}

static void w_u64(wbuf *w, uint64_t v)
{
	uint8_t b[8];
	st_put_be64(b, v);
	w_bytes(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
	size_t n = strlen(s); /* validated: at most 255 bytes, a tag 256 characters */
	w_u16(w, (uint16_t)n);
	w_bytes(w, s, n);
}

static uint8_t type_code(st_type t)
{
	return t == ST_S ? 1 : t == ST_N ? 2 : 3;
}

static void w_ks(wbuf *w, const st_key_schema *ks)
{
	w_str(w, ks->hash.name);
	w_u8(w, type_code(ks->hash.type));
	w_u8(w, ks->range.name != NULL);
	if (ks->range.name != NULL) {
		w_str(w, ks->range.name);
		w_u8(w, type_code(ks->range.type));
	}
}

static void w_cap(wbuf *w, const st_throughput *tp, int64_t inc, int64_t dec, uint32_t n,
                  int64_t day)
{
	w_u64(w, tp->rcu);
	w_u64(w, tp->wcu);
	w_u64(w, tp->max_rcu);
	w_u64(w, tp->max_wcu);
	w_u64(w, (uint64_t)inc);
	w_u64(w, (uint64_t)dec);
	w_u32(w, n);
	w_u64(w, (uint64_t)day);
}

static void encode_record(wbuf *w, const st_table_def *d, uint64_t items, uint64_t bytes)
{
	w_u8(w, ST_REC_VERSION);
	w_u32(w, d->id);
	w_u64(w, items);
	w_u64(w, bytes);
	w_u64(w, (uint64_t)d->created_ms);
	w_ks(w, &d->key);
	w_u16(w, (uint16_t)d->n_attrs);
	for (uint32_t i = 0; i < d->n_attrs; i++) {
		w_str(w, d->attrs[i].name);
		w_u8(w, type_code(d->attrs[i].type));
	}
	w_u16(w, (uint16_t)d->n_indexes);
	for (uint32_t i = 0; i < d->n_indexes; i++) {
		const st_index_def *x = &d->indexes[i];
		w_str(w, x->name);
		w_u16(w, x->id);
		w_u8(w, x->local ? 1 : 0);
		w_u8(w, (uint8_t)x->projection);
		w_u8(w, (uint8_t)x->status);
		w_u32(w, x->write_shards);
		w_ks(w, &x->key);
		w_u16(w, (uint16_t)x->n_include);
		for (uint32_t j = 0; j < x->n_include; j++)
			w_str(w, x->include[j]);
		w_cap(w, &x->tp, x->last_increase_ms, x->last_decrease_ms, x->decreases_today,
		      x->decreases_day);
	}
	w_u16(w, (uint16_t)st_catalog_next_index_id(d));
	w_u8(w, d->billing == ST_BILLING_PROVISIONED ? 1 : 0);
	w_cap(w, &d->tp, d->last_increase_ms, d->last_decrease_ms, d->decreases_today,
	      d->decreases_day);
	w_u64(w, (uint64_t)d->billing_changed_ms);
	w_u64(w, (uint64_t)d->capacity_ms);
	w_u8(w, (uint8_t)((d->deletion_protection ? 1 : 0) | (d->ttl_ms != 0 ? 2 : 0)));
	w_u8(w, (uint8_t)d->table_class);
	w_u64(w, (uint64_t)d->class_changed_ms);
	w_u16(w, (uint16_t)d->n_tags);
	for (uint32_t i = 0; i < d->n_tags; i++) {
		w_str(w, d->tags[i].key);
		w_str(w, d->tags[i].value);
	}
	if (d->ttl_ms != 0) {
		w_u64(w, (uint64_t)d->ttl_ms);
		w_str(w, d->ttl_attr != NULL ? d->ttl_attr : "");
	}
	if (d->stream.label_ms != 0) {
		w_u8(w, EXT_STREAM);
		w_u16(w, EXT_STREAM_LEN);
		w_u8(w, d->stream.enabled ? 1 : 0);
		w_u8(w, (uint8_t)d->stream.view);
		w_u64(w, (uint64_t)d->stream.label_ms);
		w_u64(w, (uint64_t)d->stream.changed_ms);
	}
	if (d->stream.n_past > 0) {
		w_u8(w, EXT_PAST);
		w_u16(w, (uint16_t)(1 + d->stream.n_past * EXT_PAST_ONE));
		w_u8(w, (uint8_t)d->stream.n_past);
		for (uint32_t i = 0; i < d->stream.n_past; i++) {
			w_u64(w, (uint64_t)d->stream.past[i].label_ms);
			w_u64(w, (uint64_t)d->stream.past[i].ended_ms);
			w_u8(w, (uint8_t)d->stream.past[i].view);
		}
	}
}

uint32_t st_catalog_next_index_id(const st_table_def *d)
{
	uint32_t next = d->next_index_id;
	for (uint32_t i = 0; i < d->n_indexes; i++)
		if (d->indexes[i].id >= next)
			next = (uint32_t)d->indexes[i].id + 1;
	return next != 0 ? next : 1;
}

int st_catalog_encode(sh_arena *a, const st_table_def *d, uint64_t items, uint64_t bytes,
                      uint8_t **buf, size_t *len)
{
	wbuf w = {NULL, 0};
	encode_record(&w, d, items, bytes);
	w.buf = sh_arena_alloc(a, w.len);
	if (w.buf == NULL)
		return SHOAL_E_NOMEM;
	w.len = 0;
	encode_record(&w, d, items, bytes);
	*buf = w.buf;
	*len = w.len;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Record decoding                                                           */
/* ------------------------------------------------------------------------ */

typedef struct rbuf {
	const uint8_t *p;
	const uint8_t *end;
	sh_arena *a;
	const char *bad; /* first problem found, NULL if none */
	bool nomem;
} rbuf;

static bool r_need(rbuf *r, size_t n, const char *what)
{
	if (r->bad != NULL || r->nomem)
		return false;
	if ((size_t)(r->end - r->p) < n) {
		r->bad = what;
		return false;
	}
	return true;
}

static uint8_t r_u8(rbuf *r, const char *what)
{
	if (!r_need(r, 1, what))
		return 0;
	return *r->p++;
}

static uint16_t r_u16(rbuf *r, const char *what)
{
	if (!r_need(r, 2, what))
		return 0;
	uint16_t v = st_get_be16(r->p);
	r->p += 2;
	return v;
}

static uint32_t r_u32(rbuf *r, const char *what)
{
	if (!r_need(r, 4, what))
		return 0;
	uint32_t v = st_get_be32(r->p);
	r->p += 4;
	return v;
}

static uint64_t r_u64(rbuf *r, const char *what)
{
	if (!r_need(r, 8, what))
		return 0;
	uint64_t v = st_get_be64(r->p);
	r->p += 8;
	return v;
}

static const char *r_str(rbuf *r, const char *what)
{
	uint16_t n = r_u16(r, what);
	if (!r_need(r, n, what))
		return "";
	char *s = sh_arena_strndup(r->a, (const char *)r->p, n);
	if (s == NULL) {
		r->nomem = true;
		return "";
	}
	r->p += n;
	return s;
}

static st_type r_type(rbuf *r, const char *what)
{
	uint8_t c = r_u8(r, what);
	switch (c) {
	case 1:
		return ST_S;
	case 2:
		return ST_N;
	case 3:
		return ST_B;
	default:
		if (r->bad == NULL)
			r->bad = what;
		return ST_S;
	}
}

static void r_ks(rbuf *r, st_key_schema *ks)
{
	ks->hash.name = r_str(r, "hash key name");
	ks->hash.type = r_type(r, "hash key type");
	uint8_t has_range = r_u8(r, "range flag");
	ks->range.name = NULL;
	ks->range.type = ST_NONE;
	if (has_range > 1 && r->bad == NULL)
		r->bad = "range flag";
	if (has_range == 1) {
		ks->range.name = r_str(r, "range key name");
		ks->range.type = r_type(r, "range key type");
	}
}

/* An array of count elements, each encoded in at least min_bytes: a count
 * the remaining bytes cannot hold is damage, not a reason to allocate. */
static void *r_array(rbuf *r, size_t count, size_t size, size_t min_bytes, const char *what)
{
	if (r->bad != NULL || r->nomem)
		return NULL;
	if (count > (size_t)(r->end - r->p) / min_bytes) {
		r->bad = what;
		return NULL;
	}
	void *p = sh_arena_calloc(r->a, count, size);
	if (p == NULL)
		r->nomem = true;
	return p;
}

static void r_cap(rbuf *r, st_throughput *tp, int64_t *inc, int64_t *dec, uint32_t *n, int64_t *day)
{
	tp->rcu = r_u64(r, "capacity");
	tp->wcu = r_u64(r, "capacity");
	tp->max_rcu = r_u64(r, "capacity");
	tp->max_wcu = r_u64(r, "capacity");
	*inc = (int64_t)r_u64(r, "capacity");
	*dec = (int64_t)r_u64(r, "capacity");
	*n = r_u32(r, "capacity");
	*day = (int64_t)r_u64(r, "capacity");
}

int st_catalog_decode(const char *name, const uint8_t *buf, size_t len, sh_arena *a,
                      st_table_info *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	rbuf r = {buf, buf + len, a, NULL, false};
	st_table_def *d = &out->def;

	uint8_t version = r_u8(&r, "version");
	if (r.bad == NULL && !st_catalog_version_ok(version))
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "corrupt catalog record for table %s: unknown version %u", name,
		               version);
	d->id = r_u32(&r, "table id");
	out->item_count = r_u64(&r, "item count");
	out->size_bytes = r_u64(&r, "size");
	d->created_ms = (int64_t)r_u64(&r, "creation time");
	r_ks(&r, &d->key);

	d->n_attrs = r_u16(&r, "attribute count");
	if (d->n_attrs > 0) {
		d->attrs = r_array(&r, d->n_attrs, sizeof(*d->attrs), 3, "attribute count");
		for (uint32_t i = 0; d->attrs != NULL && i < d->n_attrs; i++) {
			d->attrs[i].name = r_str(&r, "attribute name");
			d->attrs[i].type = r_type(&r, "attribute type");
		}
	}

	d->n_indexes = r_u16(&r, "index count");
	if (d->n_indexes > 0) {
		d->indexes = r_array(&r, d->n_indexes, sizeof(*d->indexes), 16, "index count");
		for (uint32_t i = 0; d->indexes != NULL && i < d->n_indexes; i++) {
			st_index_def *x = &d->indexes[i];
			x->name = r_str(&r, "index name");
			x->id = r_u16(&r, "index id");
			uint8_t kind = r_u8(&r, "index kind");
			uint8_t proj = r_u8(&r, "projection");
			uint8_t status = r_u8(&r, "index status");
			x->write_shards = r_u32(&r, "write shards");
			if (r.bad == NULL &&
			    (kind > 1 || proj > ST_PROJ_INCLUDE || status > ST_INDEX_DELETING ||
			     x->id == 0 || x->write_shards == 0))
				r.bad = "index header";
			x->local = kind == 1;
			x->projection = (st_projection_type)proj;
			x->status = (st_index_status)status;
			r_ks(&r, &x->key);
			x->n_include = r_u16(&r, "include count");
			if (x->n_include > 0) {
				x->include = r_array(&r, x->n_include, sizeof(*x->include), 2,
				                     "include count");
				for (uint32_t j = 0; x->include != NULL && j < x->n_include; j++)
					x->include[j] = r_str(&r, "include name");
			}
			if (version >= 3)
				r_cap(&r, &x->tp, &x->last_increase_ms, &x->last_decrease_ms,
				      &x->decreases_today, &x->decreases_day);
		}
	}
	d->next_index_id = 0;
	if (version >= 2)
		d->next_index_id = r_u16(&r, "next index id");
	if (version >= 3) {
		uint8_t billing = r_u8(&r, "billing mode");
		if (billing > 1 && r.bad == NULL)
			r.bad = "billing mode";
		d->billing = billing == 1 ? ST_BILLING_PROVISIONED : ST_BILLING_PAY_PER_REQUEST;
		r_cap(&r, &d->tp, &d->last_increase_ms, &d->last_decrease_ms, &d->decreases_today,
		      &d->decreases_day);
		d->billing_changed_ms = (int64_t)r_u64(&r, "billing change time");
		d->capacity_ms = (int64_t)r_u64(&r, "capacity change time");
	}
	if (version >= 4) {
		uint8_t flags = r_u8(&r, "flags");
		uint8_t cls = r_u8(&r, "table class");
		if (r.bad == NULL && (flags > 3 || cls > ST_CLASS_STANDARD_IA))
			r.bad = "flags";
		d->deletion_protection = (flags & 1) != 0;
		d->table_class = (st_table_class)cls;
		d->class_changed_ms = (int64_t)r_u64(&r, "class change time");
		d->n_tags = r_u16(&r, "tag count");
		if (r.bad == NULL && d->n_tags > ST_MAX_TAGS)
			r.bad = "tag count";
		if (d->n_tags > 0) {
			d->tags = r_array(&r, d->n_tags, sizeof(*d->tags), 5, "tag count");
			for (uint32_t i = 0; d->tags != NULL && i < d->n_tags; i++) {
				d->tags[i].key = r_str(&r, "tag key");
				d->tags[i].value = r_str(&r, "tag value");
			}
		}
		if (flags & 2) {
			d->ttl_ms = (int64_t)r_u64(&r, "TTL change time");
			d->ttl_attr = r_str(&r, "TTL attribute");
			if (d->ttl_attr != NULL && d->ttl_attr[0] == '\0')
				d->ttl_attr = NULL;
		}
	}
	/* Extensions, after everything else (version >= 3). */
	if (version >= 3) {
		uint8_t last_tag = 0;
		while (r.bad == NULL && !r.nomem && r.p < r.end) {
			uint8_t tag = r_u8(&r, "extension tag");
			uint16_t n = r_u16(&r, "extension length");
			if (r.bad == NULL && tag == EXT_PAST && tag > last_tag && n >= 1 &&
			    (size_t)(r.end - r.p) >= n) {
				last_tag = tag;
				uint8_t np = r_u8(&r, "past streams");
				if (np == 0 || np > ST_STREAM_PAST_MAX ||
				    n != 1 + np * EXT_PAST_ONE) {
					r.bad = "past streams";
					break;
				}
				for (uint8_t i = 0; i < np && r.bad == NULL; i++) {
					st_past_stream *x = &d->stream.past[i];
					x->label_ms = (int64_t)r_u64(&r, "past stream");
					x->ended_ms = (int64_t)r_u64(&r, "past stream");
					uint8_t view = r_u8(&r, "past stream");
					if (r.bad == NULL &&
					    (view < ST_VIEW_KEYS_ONLY ||
					     view > ST_VIEW_NEW_AND_OLD_IMAGES || x->label_ms == 0))
						r.bad = "past stream";
					x->view = (st_stream_view)view;
				}
				d->stream.n_past = np;
				continue;
			}
			if (r.bad == NULL && (tag <= last_tag || tag != EXT_STREAM ||
			                      n != EXT_STREAM_LEN || (size_t)(r.end - r.p) < n)) {
				r.bad = "extension";
				break;
			}
			last_tag = tag;
			uint8_t en = r_u8(&r, "stream");
			uint8_t view = r_u8(&r, "stream");
			d->stream.label_ms = (int64_t)r_u64(&r, "stream");
			d->stream.changed_ms = (int64_t)r_u64(&r, "stream");
			if (r.bad == NULL &&
			    (en > 1 || view < ST_VIEW_KEYS_ONLY ||
			     view > ST_VIEW_NEW_AND_OLD_IMAGES || d->stream.label_ms == 0))
				r.bad = "stream";
			d->stream.enabled = en == 1;
			d->stream.view = (st_stream_view)view;
		}
	}
	if (r.bad == NULL && !r.nomem)
		d->next_index_id = st_catalog_next_index_id(d);
	if (r.nomem)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "loading table %s: out of memory", name);
	if (r.bad == NULL && r.p != r.end)
		r.bad = "trailing bytes";
	if (r.bad != NULL)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s: %s",
		               name, r.bad);
	d->name = sh_arena_strndup(a, name, strlen(name));
	if (d->name == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "loading table %s: out of memory", name);
	return SHOAL_OK;
}
