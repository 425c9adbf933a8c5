/*
 * catalog.c -- tables: create, delete, describe, list, and their counters.
 *
 * The catalog DBI maps a table name (its UTF-8 bytes, no NUL; LMDB's default
 * memcmp order is the order of ListTables) to one table record.  The table's
 * items and index entries live in the data DBI under keys that start with the
 * table id (keyenc.h), so deleting a table is one prefix-range delete.
 *
 * Table record, format version 1.  Integers are big-endian; STR is a u16
 * length followed by that many bytes (no NUL); TYPE is one byte, 1 = S,
 * 2 = N, 3 = B.
 *
 *   offset  size  field
 *   0       1     record format version, 1
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
 *   end           the record ends exactly here
 *
 *   KS := STR hash name, TYPE hash type, 1 byte has-range (0 or 1),
 *         and if has-range: STR range name, TYPE range type
 *
 * The counters sit at a fixed offset so that the per-write counter update
 * (st_table_count) patches 16 bytes instead of re-encoding the record.
 * Decoding checks every length and enum against the bytes that are there and
 * reports a damaged record as SHOAL_E_INTERNAL, never reading past the end.
 *
 * Table ids come from the meta key "next_table_id" (u32) when the definition
 * leaves the id at 0; a definition that carries an id (assigned by the
 * metadata group, so that every storage group uses the same one) raises
 * next_table_id past it.
 *
 * Validation follows DynamoDB's CreateTable: first the TableName checks,
 * then the field constraints, reported together as "N validation errors
 * detected: ...", then the semantic checks in DynamoDB's order (local indexes
 * before global ones), each with DynamoDB's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/alloc.h"
#include "engine.h"

#define REC_VERSION     1
#define REC_OFF_ID      1
#define REC_OFF_COUNT   5
#define REC_OFF_BYTES   13
#define REC_OFF_CREATED 21
#define REC_HEADER      29

#define MAX_GSI          20
#define MAX_LSI          5
#define MAX_PROJECTED    100 /* NonKeyAttributes over all indexes of a table */
#define MAX_WRITE_SHARDS 1000
#define MAX_ATTR_NAME    255 /* key attribute and NonKeyAttributes names */
#define MAX_VERRS        10  /* as DynamoDB, at most 10 constraint messages */

static const char KEY_NEXT_ID[] = "next_table_id";
static const char NAME_PATTERN[] = "[a-zA-Z0-9_.-]+";

/* ------------------------------------------------------------------------ */
/* Big-endian helpers                                                        */
/* ------------------------------------------------------------------------ */

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static bool name_chars_ok(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

/* DynamoDB's "N validation errors detected: a; b" accumulator. */
typedef struct verrs {
	int n;
	size_t len;
	char text[SH_ERRMSG_SIZE];
} verrs;

static void verr_add(verrs *e, const char *value, const char *where, const char *constraint)
{
	if (e->n >= MAX_VERRS)
		return;
	char one[SH_ERRMSG_SIZE];
	if (value != NULL)
		snprintf(one, sizeof(one), "Value '%s' at '%s' failed to satisfy constraint: %s",
		         value, where, constraint);
	else
		snprintf(one, sizeof(one), "Value null at '%s' failed to satisfy constraint: %s",
		         where, constraint);
	int w = snprintf(e->text + e->len, sizeof(e->text) - e->len, "%s%s", e->n ? "; " : "", one);
	if (w > 0)
		e->len += (size_t)w;
	if (e->len >= sizeof(e->text))
		e->len = sizeof(e->text) - 1;
	e->n++;
}

static int verr_report(const verrs *e, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION, "%d validation error%s detected: %s", e->n,
	               e->n > 1 ? "s" : "", e->text);
}

/* Length and pattern constraints of an IndexName-like field. */
static void check_index_name(verrs *e, const char *name, const char *where)
{
	if (name == NULL) {
		verr_add(e, NULL, where, "Member must not be null");
		return;
	}
	size_t len = strlen(name);
	if (!name_chars_ok(name, len)) {
		char c[64];
		snprintf(c, sizeof(c), "Member must satisfy regular expression pattern: %s",
		         NAME_PATTERN);
		verr_add(e, name, where, c);
	}
	if (len < ST_TABLE_NAME_MIN)
		verr_add(e, name, where, "Member must have length greater than or equal to 3");
	if (len > ST_TABLE_NAME_MAX)
		verr_add(e, name, where, "Member must have length less than or equal to 255");
}

/* Length constraints of an AttributeName field (1..255 bytes). */
static void check_attr_name(verrs *e, const char *name, const char *where)
{
	if (name == NULL) {
		verr_add(e, NULL, where, "Member must not be null");
		return;
	}
	size_t len = strlen(name);
	if (len < 1)
		verr_add(e, name, where, "Member must have length greater than or equal to 1");
	if (len > MAX_ATTR_NAME)
		verr_add(e, name, where, "Member must have length less than or equal to 255");
}

/* TableName as every operation checks it: required, 3..255, the pattern. */
static int check_table_name(const char *name, char *errmsg)
{
	if (name == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	size_t len = strlen(name);
	if (len < ST_TABLE_NAME_MIN || len > ST_TABLE_NAME_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TableName must be at least 3 characters long and at most 255 "
		               "characters long");
	if (!name_chars_ok(name, len)) {
		verrs e = {0};
		verr_add(&e, name, "tableName",
		         "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+");
		return verr_report(&e, errmsg);
	}
	return SHOAL_OK;
}

static int not_found(const char *name, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
	               "Requested resource not found: Table: %s not found", name);
}

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
	put_be16(b, v);
	w_bytes(w, b, 2);
}

static void w_u32(wbuf *w, uint32_t v)
{
	uint8_t b[4];
	put_be32(b, v);
	w_bytes(w, b, 4);
}

static void w_u64(wbuf *w, uint64_t v)
{
	uint8_t b[8];
	put_be64(b, v);
	w_bytes(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
	size_t n = strlen(s); /* validated: at most 255 */
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

static void encode_record(wbuf *w, const st_table_def *d, uint64_t items, uint64_t bytes)
{
	w_u8(w, REC_VERSION);
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
	}
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
	uint16_t v = get_be16(r->p);
	r->p += 2;
	return v;
}

static uint32_t r_u32(rbuf *r, const char *what)
{
	if (!r_need(r, 4, what))
		return 0;
	uint32_t v = get_be32(r->p);
	r->p += 4;
	return v;
}

static uint64_t r_u64(rbuf *r, const char *what)
{
	if (!r_need(r, 8, what))
		return 0;
	uint64_t v = get_be64(r->p);
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

static int decode_record(const char *name, const uint8_t *buf, size_t len, sh_arena *a,
                         st_table_info *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	rbuf r = {buf, buf + len, a, NULL, false};
	st_table_def *d = &out->def;

	uint8_t version = r_u8(&r, "version");
	if (r.bad == NULL && version != REC_VERSION)
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
		}
	}
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

/* ------------------------------------------------------------------------ */
/* Validation of a new table                                                 */
/* ------------------------------------------------------------------------ */

static const st_key_attr *find_attr(const st_table_def *d, const char *name)
{
	for (uint32_t i = 0; i < d->n_attrs; i++)
		if (d->attrs[i].name != NULL && strcmp(d->attrs[i].name, name) == 0)
			return &d->attrs[i];
	return NULL;
}

/* "[a, b]" into buf. */
static void name_list(char *buf, size_t cap, const char **names, uint32_t n)
{
	size_t len = 0;
	int w = snprintf(buf, cap, "[");
	len = w > 0 ? (size_t)w : 0;
	for (uint32_t i = 0; i < n && len < cap; i++) {
		w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", names[i]);
		if (w > 0)
			len += (size_t)w;
	}
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Key names of one key schema that have no AttributeDefinition. */
static int check_ks_defined(const st_table_def *d, const st_key_schema *ks, bool with_indexes,
                            char *errmsg)
{
	bool ok = find_attr(d, ks->hash.name) != NULL &&
	          (ks->range.name == NULL || find_attr(d, ks->range.name) != NULL);
	if (ok)
		return SHOAL_OK;
	uint32_t nkeys = ks->range.name != NULL ? 2 : 1;
	if (!with_indexes && nkeys > d->n_attrs)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid KeySchema: Some index key attribute have no definition");
	const char *keys[2] = {ks->hash.name, ks->range.name};
	char klist[SH_ERRMSG_SIZE / 4], dlist[SH_ERRMSG_SIZE / 2];
	name_list(klist, sizeof(klist), keys, nkeys);
	const char *defs[64];
	uint32_t nd = d->n_attrs < 64 ? d->n_attrs : 64;
	for (uint32_t i = 0; i < nd; i++)
		defs[i] = d->attrs[i].name;
	name_list(dlist, sizeof(dlist), defs, nd);
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "One or more parameter values were invalid: Some index key attributes are "
	               "not defined in AttributeDefinitions. Keys: %s, AttributeDefinitions: %s",
	               klist, dlist);
}

static int check_ks_shape(const st_key_schema *ks)
{
	if (ks->range.name != NULL && strcmp(ks->hash.name, ks->range.name) == 0)
		return SHOAL_E_VALIDATION;
	return SHOAL_OK;
}

/* The field constraints, reported together. */
static int check_fields(const st_table_def *d, char *errmsg)
{
	verrs e = {0};
	char where[128];
	/* DynamoDB's field order: AttributeDefinitions, TableName, KeySchema,
	 * LocalSecondaryIndexes, GlobalSecondaryIndexes. */
	for (uint32_t i = 0; i < d->n_attrs; i++) {
		snprintf(where, sizeof(where), "attributeDefinitions.%u.member.attributeName",
		         i + 1);
		check_attr_name(&e, d->attrs[i].name, where);
		st_type t = d->attrs[i].type;
		if (t != ST_S && t != ST_N && t != ST_B) {
			snprintf(where, sizeof(where),
			         "attributeDefinitions.%u.member.attributeType", i + 1);
			verr_add(&e, t == ST_NONE ? NULL : st_type_name(t), where,
			         "Member must satisfy enum value set: [B, N, S]");
		}
	}
	if (!name_chars_ok(d->name, strlen(d->name))) {
		char c[64];
		snprintf(c, sizeof(c), "Member must satisfy regular expression pattern: %s",
		         NAME_PATTERN);
		verr_add(&e, d->name, "tableName", c);
	}
	if (d->key.hash.name == NULL)
		verr_add(&e, NULL, "keySchema", "Member must not be null");
	else
		check_attr_name(&e, d->key.hash.name, "keySchema.1.member.attributeName");
	if (d->key.range.name != NULL)
		check_attr_name(&e, d->key.range.name, "keySchema.2.member.attributeName");

	uint32_t nth[2] = {0, 0}; /* position among GSIs / LSIs */
	for (uint32_t i = 0; i < 2 * d->n_indexes; i++) {
		/* local indexes in the first pass, global ones in the second */
		const st_index_def *x = &d->indexes[i % d->n_indexes];
		if (x->local != (i < d->n_indexes))
			continue;
		const char *list = x->local ? "localSecondaryIndexes" : "globalSecondaryIndexes";
		uint32_t pos = ++nth[x->local];
		snprintf(where, sizeof(where), "%s.%u.member.indexName", list, pos);
		check_index_name(&e, x->name, where);
		if (x->key.hash.name == NULL) {
			snprintf(where, sizeof(where), "%s.%u.member.keySchema", list, pos);
			verr_add(&e, NULL, where, "Member must not be null");
		} else {
			snprintf(where, sizeof(where),
			         "%s.%u.member.keySchema.1.member.attributeName", list, pos);
			check_attr_name(&e, x->key.hash.name, where);
		}
		if (x->key.range.name != NULL) {
			snprintf(where, sizeof(where),
			         "%s.%u.member.keySchema.2.member.attributeName", list, pos);
			check_attr_name(&e, x->key.range.name, where);
		}
		if ((unsigned)x->projection > ST_PROJ_INCLUDE) {
			snprintf(where, sizeof(where), "%s.%u.member.projection.projectionType",
			         list, pos);
			verr_add(&e, NULL, where,
			         "Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]");
		}
		for (uint32_t j = 0; j < x->n_include; j++) {
			snprintf(where, sizeof(where),
			         "%s.%u.member.projection.nonKeyAttributes.%u.member", list, pos,
			         j + 1);
			check_attr_name(&e, x->include[j], where);
		}
		if (!x->local) {
			char v[16];
			snprintf(v, sizeof(v), "%u", x->write_shards);
			snprintf(where, sizeof(where), "%s.%u.member.writeShards", list, pos);
			if (x->write_shards < 1)
				verr_add(&e, v, where,
				         "Member must have value greater than or equal to 1");
			else if (x->write_shards > MAX_WRITE_SHARDS)
				verr_add(&e, v, where,
				         "Member must have value less than or equal to 1000");
		}
	}
	if (e.n > 0)
		return verr_report(&e, errmsg);
	return SHOAL_OK;
}

static int check_index(const st_table_def *d, const st_index_def *x, char *errmsg)
{
	static const char *proj_names[] = {"ALL", "KEYS_ONLY", "INCLUDE"};
	int rc = check_ks_defined(d, &x->key, true, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (check_ks_shape(&x->key) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Both the Hash Key and the Range Key element in the KeySchema have "
		               "the same name");
	if (x->local) {
		if (x->key.range.name == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Index KeySchema "
			               "does not have a range key for index: %s",
			               x->name);
		if (strcmp(x->key.hash.name, d->key.hash.name) != 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Index KeySchema "
			               "does not have the same leading hash key as table KeySchema "
			               "for index: %s. index hash key: %s, table hash key: %s",
			               x->name, x->key.hash.name, d->key.hash.name);
		if (x->write_shards > 1)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: WriteShards can "
			               "only be specified for a global secondary index: %s",
			               x->name);
	}
	if (x->n_include > 0 && x->projection != ST_PROJ_INCLUDE)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "One or more parameter values were invalid: ProjectionType is %s, but "
		    "NonKeyAttributes is specified",
		    proj_names[x->projection]);
	for (const st_index_def *y = d->indexes; y < x; y++)
		if (strcmp(y->name, x->name) == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Duplicate index "
			               "name: %s",
			               x->name);
	return SHOAL_OK;
}

/* Every AttributeDefinition must be used by some key schema. */
static int check_attrs_used(const st_table_def *d, sh_arena *a, char *errmsg)
{
	uint32_t cap = 2 + 2 * d->n_indexes;
	const char **used = sh_arena_calloc(a, cap, sizeof(*used));
	const char **defs = sh_arena_calloc(a, d->n_attrs + 1, sizeof(*defs));
	if (used == NULL || defs == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_create: out of memory");
	uint32_t nu = 0;
	const st_key_schema *schemas_first = &d->key;
	for (uint32_t s = 0; s <= d->n_indexes; s++) {
		const st_key_schema *ks = s == 0 ? schemas_first : &d->indexes[s - 1].key;
		const char *names[2] = {ks->hash.name, ks->range.name};
		for (int k = 0; k < 2; k++) {
			if (names[k] == NULL)
				continue;
			bool seen = false;
			for (uint32_t i = 0; i < nu; i++)
				seen = seen || strcmp(used[i], names[k]) == 0;
			if (!seen)
				used[nu++] = names[k];
		}
	}
	if (d->n_attrs <= nu)
		return SHOAL_OK; /* all defined (checked before) and no duplicates */
	if (d->n_indexes == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Number of attributes in "
		               "KeySchema does not exactly match number of attributes defined in "
		               "AttributeDefinitions");
	for (uint32_t i = 0; i < d->n_attrs; i++)
		defs[i] = d->attrs[i].name;
	qsort(defs, d->n_attrs, sizeof(*defs), cmp_str);
	qsort(used, nu, sizeof(*used), cmp_str);
	char dlist[SH_ERRMSG_SIZE / 2], ulist[SH_ERRMSG_SIZE / 4];
	name_list(dlist, sizeof(dlist), defs, d->n_attrs);
	name_list(ulist, sizeof(ulist), used, nu);
	return sh_errf(
	    errmsg, SHOAL_E_VALIDATION,
	    "One or more parameter values were invalid: Some AttributeDefinitions are not "
	    "used. AttributeDefinitions: %s, keys used: %s",
	    dlist, ulist);
}

static int validate_def(const st_table_def *d, sh_arena *a, char *errmsg)
{
	int rc = check_table_name(d->name, errmsg);
	if (rc != SHOAL_OK && d->name != NULL && strlen(d->name) >= ST_TABLE_NAME_MIN &&
	    strlen(d->name) <= ST_TABLE_NAME_MAX)
		rc = SHOAL_OK; /* the pattern is reported with the other fields */
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = check_fields(d, errmsg)) != SHOAL_OK)
		return rc;

	for (uint32_t i = 0; i < d->n_attrs; i++)
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(d->attrs[i].name, d->attrs[j].name) == 0)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               "Duplicate AttributeName=%s in AttributeDefinitions",
				               d->attrs[i].name);
	if ((rc = check_ks_defined(d, &d->key, d->n_indexes > 0, errmsg)) != SHOAL_OK)
		return rc;
	if (check_ks_shape(&d->key) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Both the Hash Key and the Range Key element in the KeySchema have "
		               "the same name");

	uint32_t n_lsi = 0, n_gsi = 0, n_projected = 0;
	for (int pass = 1; pass >= 0; pass--) { /* local indexes first, as DynamoDB */
		for (uint32_t i = 0; i < d->n_indexes; i++) {
			const st_index_def *x = &d->indexes[i];
			if (x->local != (pass == 1))
				continue;
			if (x->local && n_lsi == 0 && d->key.range.name == NULL)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "One or more parameter values were invalid: Table "
				    "KeySchema does not have a range key, which is required "
				    "when specifying a LocalSecondaryIndex");
			if ((rc = check_index(d, x, errmsg)) != SHOAL_OK)
				return rc;
			if (x->local)
				n_lsi++;
			else
				n_gsi++;
			n_projected += x->n_include;
		}
		if (pass == 1 && n_lsi > MAX_LSI)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Number of "
			               "LocalSecondaryIndexes exceeds per-table limit of 5");
		if (pass == 0 && n_gsi > MAX_GSI)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "One or more parameter values were invalid: GlobalSecondaryIndex "
			    "count exceeds the per-table limit of 20");
	}
	if (n_projected > MAX_PROJECTED)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Number of projected "
		               "attributes in all indexes exceeds limit of 100");
	for (uint32_t i = 0; i < d->n_indexes; i++)
		for (uint32_t j = 0; j < i; j++)
			if (d->indexes[i].id != 0 && d->indexes[i].id == d->indexes[j].id)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "One or more parameter values were invalid: Duplicate "
				    "index id %u",
				    d->indexes[i].id);
	return check_attrs_used(d, a, errmsg);
}

/* A copy of the (validated) definition in the form it is stored: key types
 * taken from AttributeDefinitions, index ids assigned, LSIs with 1 shard. */
static int normalise_def(const st_table_def *src, sh_arena *a, st_table_def *d)
{
	*d = *src;
	if (src->n_indexes > 0) {
		d->indexes = sh_arena_memdup(a, src->indexes, src->n_indexes * sizeof(*d->indexes));
		if (d->indexes == NULL)
			return SHOAL_E_NOMEM;
	}
	d->key.hash.type = find_attr(src, d->key.hash.name)->type;
	if (d->key.range.name != NULL)
		d->key.range.type = find_attr(src, d->key.range.name)->type;
	for (uint32_t i = 0; i < d->n_indexes; i++) {
		st_index_def *x = &d->indexes[i];
		x->key.hash.type = find_attr(src, x->key.hash.name)->type;
		if (x->key.range.name != NULL)
			x->key.range.type = find_attr(src, x->key.range.name)->type;
		if (x->local)
			x->write_shards = 1;
		if (x->id == 0) { /* the smallest id no other index uses */
			uint16_t id = 0;
			bool clash;
			do {
				id++;
				clash = false;
				for (uint32_t j = 0; j < d->n_indexes; j++)
					clash = clash || d->indexes[j].id == id;
			} while (clash);
			x->id = id;
		}
	}
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Catalog operations                                                        */
/* ------------------------------------------------------------------------ */

static MDB_val name_val(const char *name)
{
	MDB_val v = {strlen(name), (void *)name};
	return v;
}

int st_table_load(MDB_txn *txn, st_env *env, const char *name, sh_arena *a, st_table_info *out,
                  char *errmsg)
{
	int rc = check_table_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn, env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return not_found(name, errmsg);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
	return decode_record(name, v.mv_data, v.mv_size, a, out, errmsg);
}

/* Reads next_table_id (1 when absent) and checks that `id`, if given, is not
 * already some table's id. */
static int pick_table_id(st_txn *txn, uint32_t want, uint32_t *id, uint32_t *next_out, char *errmsg)
{
	MDB_val k = {sizeof(KEY_NEXT_ID) - 1, (void *)KEY_NEXT_ID}, v;
	uint32_t next = 1;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == 0 && v.mv_size == 4)
		next = get_be32(v.mv_data);
	else if (mrc == 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record next_table_id");
	else if (mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_get(meta next_table_id)", errmsg);
	*next_out = next;
	if (want == 0) {
		if (next == 0)
			return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED, "table ids exhausted");
		*id = next;
		return SHOAL_OK;
	}
	/* An explicit id: refuse one that a live table already uses. */
	MDB_cursor *c;
	mrc = mdb_cursor_open(txn->txn, txn->env->catalog, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
	MDB_val ck, cv;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT)) {
		if (cv.mv_size >= REC_HEADER &&
		    get_be32((const uint8_t *)cv.mv_data + REC_OFF_ID) == want) {
			rc = sh_errf(errmsg, SHOAL_E_IN_USE,
			             "Table id %u is already used by table %.*s", want,
			             (int)ck.mv_size, (const char *)ck.mv_data);
			break;
		}
	}
	if (rc == SHOAL_OK && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
	mdb_cursor_close(c);
	*id = want;
	return rc;
}

static int put_next_id(st_txn *txn, uint32_t next, char *errmsg)
{
	uint8_t buf[4];
	put_be32(buf, next);
	MDB_val k = {sizeof(KEY_NEXT_ID) - 1, (void *)KEY_NEXT_ID}, v = {4, buf};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta next_table_id)", errmsg);
	return SHOAL_OK;
}

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

int st_table_create(st_txn *txn, const st_table_def *def, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	sh_arena a;
	sh_arena_init(&a);
	int rc = validate_def(def, &a, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_arena;

	MDB_val k = name_val(def->name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == 0) {
		rc = sh_errf(errmsg, SHOAL_E_IN_USE, "Table already exists: %s", def->name);
		goto err_after_arena;
	}
	if (mrc != MDB_NOTFOUND) {
		rc = st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
		goto err_after_arena;
	}

	st_table_def d;
	if (normalise_def(def, &a, &d) != SHOAL_OK) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_create: out of memory");
		goto err_after_arena;
	}
	uint32_t next = 1;
	if ((rc = pick_table_id(txn, def->id, &d.id, &next, errmsg)) != SHOAL_OK)
		goto err_after_arena;

	wbuf w = {NULL, 0};
	encode_record(&w, &d, 0, 0);
	w.buf = sh_arena_alloc(&a, w.len);
	if (w.buf == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_create: out of memory");
		goto err_after_arena;
	}
	w.len = 0;
	encode_record(&w, &d, 0, 0);

	/* From here on the transaction changes: failures poison it. */
	v.mv_size = w.len;
	v.mv_data = w.buf;
	mrc = mdb_put(txn->txn, txn->env->catalog, &k, &v, MDB_NOOVERWRITE);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_put(catalog)", errmsg);
		goto err_after_arena;
	}
	if (d.id >= next) { /* the next automatic id is past every id in use */
		if ((rc = put_next_id(txn, d.id + 1, errmsg)) != SHOAL_OK)
			goto err_after_arena;
	}
	sh_arena_fini(&a);
	return SHOAL_OK;

err_after_arena:
	sh_arena_fini(&a);
	if (env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

/* Deletes every data key that starts with the table id. */
static int delete_table_data(st_txn *txn, uint32_t table_id, char *errmsg)
{
	st_key prefix;
	st_key_table(&prefix, table_id, 0);
	prefix.len = 4; /* table id only: the base table and all its indexes */
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	int rc = SHOAL_OK;
	for (;;) {
		MDB_val k = {prefix.len, prefix.b}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
			break;
		}
		if (k.mv_size < prefix.len || memcmp(k.mv_data, prefix.b, prefix.len) != 0)
			break;
		mrc = mdb_cursor_del(c, 0);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_del(data)", errmsg);
			break;
		}
	}
	mdb_cursor_close(c);
	return rc;
}

int st_table_delete(st_txn *txn, const char *name, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = check_table_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return not_found(name, errmsg);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
		goto err;
	}
	if (v.mv_size < REC_HEADER || ((const uint8_t *)v.mv_data)[0] != REC_VERSION) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s", name);
		goto err;
	}
	uint32_t id = get_be32((const uint8_t *)v.mv_data + REC_OFF_ID);
	mrc = mdb_del(txn->txn, txn->env->catalog, &k, NULL);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_del(catalog)", errmsg);
		goto err;
	}
	if ((rc = delete_table_data(txn, id, errmsg)) != SHOAL_OK)
		goto err;
	return SHOAL_OK;

err:
	st_txn_poison(txn, rc, errmsg);
	return rc;
}

static uint64_t add_saturating(uint64_t v, int64_t delta)
{
	if (delta >= 0)
		return v + (uint64_t)delta >= v ? v + (uint64_t)delta : UINT64_MAX;
	uint64_t d = (uint64_t)(-(delta + 1)) + 1;
	return v > d ? v - d : 0;
}

int st_table_count(st_txn *txn, const char *name, int64_t items, int64_t bytes, char *errmsg)
{
	if (items == 0 && bytes == 0)
		return SHOAL_OK;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return not_found(name, errmsg);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
	if (v.mv_size < REC_HEADER || ((const uint8_t *)v.mv_data)[0] != REC_VERSION)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s",
		               name);
	/* The value may live in the read-only map: patch a private copy. */
	uint8_t *rec = sh_malloc(v.mv_size);
	if (rec == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_count(%s): out of memory", name);
	memcpy(rec, v.mv_data, v.mv_size);
	put_be64(rec + REC_OFF_COUNT, add_saturating(get_be64(rec + REC_OFF_COUNT), items));
	put_be64(rec + REC_OFF_BYTES, add_saturating(get_be64(rec + REC_OFF_BYTES), bytes));
	MDB_val nv = {v.mv_size, rec};
	mrc = mdb_put(txn->txn, txn->env->catalog, &k, &nv, 0);
	sh_free(rec);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(catalog)", errmsg);
	return SHOAL_OK;
}

const st_index_def *st_table_index(const st_table_def *t, const char *index_name)
{
	if (index_name == NULL)
		return NULL;
	for (uint32_t i = 0; i < t->n_indexes; i++)
		if (strcmp(t->indexes[i].name, index_name) == 0)
			return &t->indexes[i];
	return NULL;
}

int st_table_describe(st_env *env, const char *name, sh_arena *a, st_table_info *out, char *errmsg)
{
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	int rc = st_table_load(txn, env, name, a, out, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

int st_table_list(st_env *env, const char *exclusive_start, uint32_t limit, sh_arena *a,
                  const char ***names, uint32_t *n, const char **last, char *errmsg)
{
	*names = NULL;
	*n = 0;
	*last = NULL;
	verrs e = {0};
	if (exclusive_start != NULL) {
		size_t len = strlen(exclusive_start);
		if (!name_chars_ok(exclusive_start, len))
			verr_add(&e, exclusive_start, "exclusiveStartTableName",
			         "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+");
		if (len < ST_TABLE_NAME_MIN)
			verr_add(&e, exclusive_start, "exclusiveStartTableName",
			         "Member must have length greater than or equal to 3");
		if (len > ST_TABLE_NAME_MAX)
			verr_add(&e, exclusive_start, "exclusiveStartTableName",
			         "Member must have length less than or equal to 255");
	}
	char lv[16];
	snprintf(lv, sizeof(lv), "%u", limit);
	if (limit < 1)
		verr_add(&e, lv, "limit", "Member must have value greater than or equal to 1");
	if (limit > 100)
		verr_add(&e, lv, "limit", "Member must have value less than or equal to 100");
	if (e.n > 0)
		return verr_report(&e, errmsg);

	const char **out = sh_arena_calloc(a, limit, sizeof(*out));
	if (out == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_list: out of memory");
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	MDB_cursor *c;
	int rc = SHOAL_OK;
	mrc = mdb_cursor_open(txn, env->catalog, &c);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
		goto err_after_txn;
	}
	MDB_val k, v;
	if (exclusive_start != NULL) {
		k = name_val(exclusive_start);
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == strlen(exclusive_start) &&
		    memcmp(k.mv_data, exclusive_start, k.mv_size) == 0)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	} else {
		mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	}
	uint32_t count = 0;
	while (mrc == 0 && count < limit) {
		out[count] = sh_arena_strndup(a, k.mv_data, k.mv_size);
		if (out[count] == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_list: out of memory");
			goto err_after_cursor;
		}
		count++;
		mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	if (mrc != 0 && mrc != MDB_NOTFOUND) {
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
		goto err_after_cursor;
	}
	*names = out;
	*n = count;
	if (mrc == 0 && count > 0) /* limit reached and another name follows */
		*last = out[count - 1];

err_after_cursor:
	mdb_cursor_close(c);
err_after_txn:
	mdb_txn_abort(txn);
	return rc;
}
