/*
 * wire_desc.c -- table definitions and descriptions as protobuf:
 * st_table_def -> CreateTableRequest (what a client sends), st_table_info ->
 * TableDescription (what CreateTable, DescribeTable, DeleteTable and
 * UpdateTable return), TableDescription -> st_table_info (router and client,
 * which cache table schemas), and the ListTables response.
 *
 * Capacity is described as DynamoDB describes it: ProvisionedThroughput
 * always (zeros and NumberOfDecreasesToday 0 on a PAY_PER_REQUEST table and
 * its GSIs; LastIncreaseDateTime/LastDecreaseDateTime when there was one);
 * BillingModeSummary on a table that is or was PAY_PER_REQUEST (a table
 * created PROVISIONED and never switched has none, as in DynamoDB), with
 * LastUpdateToPayPerRequestDateTime (the creation time of a table created
 * PAY_PER_REQUEST); OnDemandThroughput on a PAY_PER_REQUEST table and its
 * GSIs, -1 for a maximum not set.  NumberOfDecreasesToday counts the
 * current UTC day's (the describing process's clock).  Fields Shoal has no
 * source for: index ItemCount/IndexSizeBytes 0.  ARNs are
 * "arn:aws:dynamodb:shoal:000000000000:table/<name>[/index/<index>]" so that
 * tools which split ARNs keep working (wire_table_arn_parse reads them back).
 * TableId is a name-based UUID (RFC 4122 version 5, SHA-1) of the table's
 * id, CreationDateTime and name in Shoal's own namespace: every component
 * derives the same one, it never changes while the table exists, and a table
 * deleted and created again gets another (ids are never reused).
 * DeletionProtectionEnabled is always written; TableClassSummary when
 * CreateTable or UpdateTable named a TableClass.
 * GSIs being backfilled are CREATING with Backfilling true.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/sha1.h>

#include "proto/wire_int.h"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a table description");
}

/* ------------------------------------------------------------------------ */
/* st_table_def / st_table_info -> protobuf                                  */
/* ------------------------------------------------------------------------ */

/* An arena copy as protobuf-c wants strings (never NULL: "" instead). */
static char *pbstr(sh_arena *a, const char *s)
{
	if (s == NULL)
		s = "";
	return sh_arena_strndup(a, s, strlen(s));
}

static int key_schema_to_pb(sh_arena *a, const st_key_schema *k, Shoal__KeySchemaElement ***out,
                            size_t *n, char *errmsg)
{
	size_t cnt = k->range.name != NULL ? 2 : 1;
	Shoal__KeySchemaElement **arr = sh_arena_calloc(a, cnt, sizeof(*arr));
	Shoal__KeySchemaElement *slab = sh_arena_calloc(a, cnt, sizeof(*slab));
	if (arr == NULL || slab == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < cnt; i++) {
		shoal__key_schema_element__init(&slab[i]);
		slab[i].attribute_name = pbstr(a, i == 0 ? k->hash.name : k->range.name);
		slab[i].key_type = i == 0 ? "HASH" : "RANGE";
		if (slab[i].attribute_name == NULL)
			return nomem(errmsg);
		arr[i] = &slab[i];
	}
	*out = arr;
	*n = cnt;
	return SHOAL_OK;
}

static int attr_defs_to_pb(sh_arena *a, const st_table_def *def, Shoal__AttributeDefinition ***out,
                           size_t *n, char *errmsg)
{
	Shoal__AttributeDefinition **arr = sh_arena_calloc(a, def->n_attrs, sizeof(*arr));
	Shoal__AttributeDefinition *slab = sh_arena_calloc(a, def->n_attrs, sizeof(*slab));
	if (arr == NULL || slab == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < def->n_attrs; i++) {
		shoal__attribute_definition__init(&slab[i]);
		slab[i].attribute_name = pbstr(a, def->attrs[i].name);
		slab[i].attribute_type = (char *)st_type_name(def->attrs[i].type);
		if (slab[i].attribute_name == NULL)
			return nomem(errmsg);
		arr[i] = &slab[i];
	}
	*out = arr;
	*n = def->n_attrs;
	return SHOAL_OK;
}

static const char *projection_name(st_projection_type p)
{
	return p == ST_PROJ_KEYS_ONLY ? "KEYS_ONLY" : p == ST_PROJ_INCLUDE ? "INCLUDE" : "ALL";
}

static int projection_to_pb(sh_arena *a, const st_index_def *x, Shoal__Projection **out,
                            char *errmsg)
{
	Shoal__Projection *p = sh_arena_alloc(a, sizeof(*p));
	char **inc = sh_arena_calloc(a, x->n_include, sizeof(*inc));
	if (p == NULL || inc == NULL)
		return nomem(errmsg);
	shoal__projection__init(p);
	p->projection_type = (char *)projection_name(x->projection);
	for (uint32_t i = 0; i < x->n_include; i++) {
		if ((inc[i] = pbstr(a, x->include[i])) == NULL)
			return nomem(errmsg);
	}
	p->non_key_attributes = inc;
	p->n_non_key_attributes = x->n_include;
	*out = p;
	return SHOAL_OK;
}

/* A table's or GSI's capacity as a request carries it: units when
 * PROVISIONED, maximums when set. */
static int capacity_to_pb(sh_arena *a, bool prov, const st_throughput *tp,
                          Shoal__ProvisionedThroughput **pt, Shoal__OnDemandThroughput **odt,
                          char *errmsg)
{
	*pt = NULL;
	*odt = NULL;
	if (prov) {
		Shoal__ProvisionedThroughput *p = sh_arena_alloc(a, sizeof(*p));
		if (p == NULL)
			return nomem(errmsg);
		shoal__provisioned_throughput__init(p);
		p->read_capacity_units = (int64_t)tp->rcu;
		p->write_capacity_units = (int64_t)tp->wcu;
		*pt = p;
	}
	if (tp->max_rcu != 0 || tp->max_wcu != 0) {
		Shoal__OnDemandThroughput *o = sh_arena_alloc(a, sizeof(*o));
		if (o == NULL)
			return nomem(errmsg);
		shoal__on_demand_throughput__init(o);
		if (tp->max_rcu != 0)
			WIRE_SET(o, max_read_request_units, (int64_t)tp->max_rcu);
		if (tp->max_wcu != 0)
			WIRE_SET(o, max_write_request_units, (int64_t)tp->max_wcu);
		*odt = o;
	}
	return SHOAL_OK;
}

int wire_create_table_to_pb(sh_arena *a, const st_table_def *def, Shoal__CreateTableRequest **out,
                            char *errmsg)
{
	Shoal__CreateTableRequest *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__create_table_request__init(pb);
	char *name = pbstr(a, def->name);
	if (name == NULL)
		return nomem(errmsg);
	WIRE_SET(pb, table_name, name);
	bool prov = def->billing == ST_BILLING_PROVISIONED;
	WIRE_SET(pb, billing_mode, prov ? "PROVISIONED" : "PAY_PER_REQUEST");
	if (def->stream.label_ms != 0 &&
	    (pb->stream_specification = wire_stream_spec_to_pb(a, &def->stream)) == NULL)
		return nomem(errmsg);
	int rc = capacity_to_pb(a, prov, &def->tp, &pb->provisioned_throughput,
	                        &pb->on_demand_throughput, errmsg);
	if (rc == SHOAL_OK)
		rc = attr_defs_to_pb(a, def, &pb->attribute_definitions,
		                     &pb->n_attribute_definitions, errmsg);
	if (rc == SHOAL_OK)
		rc = key_schema_to_pb(a, &def->key, &pb->key_schema, &pb->n_key_schema, errmsg);
	uint32_t n_lsi = 0, n_gsi = 0;
	for (uint32_t i = 0; i < def->n_indexes; i++)
		def->indexes[i].local ? n_lsi++ : n_gsi++;
	Shoal__LocalSecondaryIndex **lsi = sh_arena_calloc(a, n_lsi, sizeof(*lsi));
	Shoal__GlobalSecondaryIndex **gsi = sh_arena_calloc(a, n_gsi, sizeof(*gsi));
	if (rc == SHOAL_OK && (lsi == NULL || gsi == NULL))
		rc = nomem(errmsg);
	for (uint32_t i = 0; i < def->n_indexes && rc == SHOAL_OK; i++) {
		const st_index_def *x = &def->indexes[i];
		if (x->local) {
			Shoal__LocalSecondaryIndex *l = sh_arena_alloc(a, sizeof(*l));
			if (l == NULL)
				return nomem(errmsg);
			shoal__local_secondary_index__init(l);
			l->index_name = pbstr(a, x->name);
			rc = key_schema_to_pb(a, &x->key, &l->key_schema, &l->n_key_schema, errmsg);
			if (rc == SHOAL_OK)
				rc = projection_to_pb(a, x, &l->projection, errmsg);
			if (rc == SHOAL_OK && l->index_name == NULL)
				rc = nomem(errmsg);
			lsi[pb->n_local_secondary_indexes++] = l;
		} else {
			Shoal__GlobalSecondaryIndex *g = sh_arena_alloc(a, sizeof(*g));
			if (g == NULL)
				return nomem(errmsg);
			shoal__global_secondary_index__init(g);
			g->index_name = pbstr(a, x->name);
			g->write_shards = x->write_shards;
			rc = capacity_to_pb(a, prov, &x->tp, &g->provisioned_throughput,
			                    &g->on_demand_throughput, errmsg);
			if (rc == SHOAL_OK)
				rc = key_schema_to_pb(a, &x->key, &g->key_schema, &g->n_key_schema,
				                      errmsg);
			if (rc == SHOAL_OK)
				rc = projection_to_pb(a, x, &g->projection, errmsg);
			if (rc == SHOAL_OK && g->index_name == NULL)
				rc = nomem(errmsg);
			gsi[pb->n_global_secondary_indexes++] = g;
		}
	}
	pb->local_secondary_indexes = lsi;
	pb->global_secondary_indexes = gsi;
	if (def->deletion_protection)
		WIRE_SET(pb, deletion_protection_enabled, true);
	if (def->table_class != ST_CLASS_NONE)
		WIRE_SET(pb, table_class, (char *)wire_table_class_name(def->table_class));
	if (rc == SHOAL_OK && def->n_tags > 0) {
		pb->tags = sh_arena_calloc(a, def->n_tags, sizeof(*pb->tags));
		Shoal__Tag *slab = sh_arena_calloc(a, def->n_tags, sizeof(*slab));
		if (pb->tags == NULL || slab == NULL)
			return nomem(errmsg);
		for (uint32_t i = 0; i < def->n_tags; i++) {
			shoal__tag__init(&slab[i]);
			slab[i].key = (char *)def->tags[i].key;
			slab[i].value = (char *)def->tags[i].value;
			pb->tags[i] = &slab[i];
		}
		pb->n_tags = def->n_tags;
	}
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

#define ARN_PREFIX "arn:aws:dynamodb:shoal:000000000000:table/"

static char *arn(sh_arena *a, const char *table, const char *index)
{
	char buf[600];
	if (index == NULL)
		snprintf(buf, sizeof(buf), ARN_PREFIX "%s", table);
	else
		snprintf(buf, sizeof(buf), ARN_PREFIX "%s/index/%s", table, index);
	return pbstr(a, buf);
}

/* TableName's pattern and length ([a-zA-Z0-9_.-]{3,255}). */
static bool table_name_ok(const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && strchr("_.-", s[i]) == NULL)
			return false;
	return n >= 3 && n <= 255;
}

int wire_table_arn_parse(sh_arena *a, const char *arn_text, const char **table, char *errmsg)
{
	if (arn_text == NULL || arn_text[0] == '\0')
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "Invalid TableArn");
	/* arn:<partition>:dynamodb:<region>:<account>:table/<name>: any
	 * partition, region and account (a client may build the ARN from its
	 * own configuration), exactly one path element after "table/". */
	const char *p = arn_text;
	int colons = 0;
	if (strncmp(p, "arn:", 4) == 0) {
		const char *q = p;
		for (; *q != '\0' && colons < 5; q++)
			colons += *q == ':';
		p = q;
	}
	const char *slash = strchr(p, '/');
	if (colons == 5 && strstr(arn_text, ":dynamodb:") != NULL && strncmp(p, "table/", 6) == 0 &&
	    slash != NULL && strchr(slash + 1, '/') == NULL && slash[1] != '\0' &&
	    table_name_ok(slash + 1)) {
		*table = sh_arena_strndup(a, slash + 1, strlen(slash + 1));
		if (*table == NULL)
			return nomem(errmsg);
		return SHOAL_OK;
	}
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "Invalid TableArn: Invalid ResourceArn provided as input %.1283s", arn_text);
}

/* The TableId: a version 5 UUID (RFC 4122 4.3) of "<id>/<created_ms>/<name>"
 * in Shoal's namespace (itself a random UUID, fixed forever). */
static void table_uuid(const st_table_def *def, char out[37])
{
	static const uint8_t ns[16] = {0x6f, 0x3c, 0x0b, 0x5e, 0x1a, 0x2d, 0x4e, 0x8f,
	                               0x9b, 0x47, 0xc2, 0x61, 0xd0, 0x35, 0x7a, 0x94};
	char name[320];
	int n = snprintf(name, sizeof(name), "%" PRIu32 "/%" PRId64 "/%s", def->id, def->created_ms,
	                 def->name != NULL ? def->name : "");
	struct sha1_ctx ctx;
	uint8_t d[SHA1_DIGEST_SIZE];
	sha1_init(&ctx);
	sha1_update(&ctx, sizeof(ns), ns);
	sha1_update(&ctx, (size_t)(n < (int)sizeof(name) ? n : (int)sizeof(name) - 1),
	            (const uint8_t *)name);
	sha1_digest(&ctx, sizeof(d), d);
	d[6] = (uint8_t)((d[6] & 0x0f) | 0x50); /* version 5 */
	d[8] = (uint8_t)((d[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	char *o = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		o += sprintf(o, "%02x", d[i]);
	}
}

char *wire_stream_arn(sh_arena *a, const char *table, int64_t label_ms)
{
	char label[WIRE_STREAM_LABEL_MAX], buf[700];
	const char *t = arn(a, table, NULL);
	if (t == NULL)
		return NULL;
	wire_stream_label(label_ms, label);
	snprintf(buf, sizeof(buf), "%s/stream/%s", t, label);
	return pbstr(a, buf);
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ProvisionedThroughput of a table or GSI: its units when PROVISIONED (else
 * 0), the day's decreases, the times of the last changes. */
static Shoal__ProvisionedThroughputDescription *throughput_desc(sh_arena *a, bool prov,
                                                                const st_throughput *tp,
                                                                int64_t inc, int64_t dec,
                                                                uint32_t count, int64_t day)
{
	Shoal__ProvisionedThroughputDescription *t = sh_arena_alloc(a, sizeof(*t));
	if (t == NULL)
		return NULL;
	shoal__provisioned_throughput_description__init(t);
	if (prov) {
		t->read_capacity_units = (int64_t)tp->rcu;
		t->write_capacity_units = (int64_t)tp->wcu;
		t->number_of_decreases_today = st_decreases_today(count, day, wall_ms());
	}
	t->last_increase_date_time = inc;
	t->last_decrease_date_time = dec;
	return t;
}

/* OnDemandThroughput of a PAY_PER_REQUEST table or GSI (-1: no maximum);
 * NULL with *err false when PROVISIONED. */
static Shoal__OnDemandThroughput *on_demand_desc(sh_arena *a, bool prov, const st_throughput *tp,
                                                 bool *err)
{
	*err = false;
	if (prov)
		return NULL;
	Shoal__OnDemandThroughput *o = sh_arena_alloc(a, sizeof(*o));
	if (o == NULL) {
		*err = true;
		return NULL;
	}
	shoal__on_demand_throughput__init(o);
	WIRE_SET(o, max_read_request_units, tp->max_rcu != 0 ? (int64_t)tp->max_rcu : -1);
	WIRE_SET(o, max_write_request_units, tp->max_wcu != 0 ? (int64_t)tp->max_wcu : -1);
	return o;
}

static int index_desc_to_pb(sh_arena *a, const st_table_def *def, const st_index_def *x,
                            Shoal__TableDescription *td, char *errmsg)
{
	int rc;
	if (x->local) {
		Shoal__LocalSecondaryIndexDescription *l = sh_arena_alloc(a, sizeof(*l));
		if (l == NULL)
			return nomem(errmsg);
		shoal__local_secondary_index_description__init(l);
		l->index_name = pbstr(a, x->name);
		l->index_arn = arn(a, def->name, x->name);
		rc = key_schema_to_pb(a, &x->key, &l->key_schema, &l->n_key_schema, errmsg);
		if (rc == SHOAL_OK)
			rc = projection_to_pb(a, x, &l->projection, errmsg);
		if (rc == SHOAL_OK && (l->index_name == NULL || l->index_arn == NULL))
			rc = nomem(errmsg);
		td->local_secondary_indexes[td->n_local_secondary_indexes++] = l;
		return rc;
	}
	Shoal__GlobalSecondaryIndexDescription *g = sh_arena_alloc(a, sizeof(*g));
	if (g == NULL)
		return nomem(errmsg);
	shoal__global_secondary_index_description__init(g);
	g->index_name = pbstr(a, x->name);
	g->index_arn = arn(a, def->name, x->name);
	g->index_status = (char *)wire_index_status_name(x->status);
	g->backfilling = x->status == ST_INDEX_CREATING;
	g->write_shards = x->write_shards > 0 ? x->write_shards : 1;
	bool prov = def->billing == ST_BILLING_PROVISIONED, odt_err;
	g->provisioned_throughput =
	    throughput_desc(a, prov, &x->tp, x->last_increase_ms, x->last_decrease_ms,
	                    x->decreases_today, x->decreases_day);
	g->on_demand_throughput = on_demand_desc(a, prov, &x->tp, &odt_err);
	if (odt_err)
		return nomem(errmsg);
	rc = key_schema_to_pb(a, &x->key, &g->key_schema, &g->n_key_schema, errmsg);
	if (rc == SHOAL_OK)
		rc = projection_to_pb(a, x, &g->projection, errmsg);
	if (rc == SHOAL_OK &&
	    (g->index_name == NULL || g->index_arn == NULL || g->provisioned_throughput == NULL))
		rc = nomem(errmsg);
	td->global_secondary_indexes[td->n_global_secondary_indexes++] = g;
	return rc;
}

int wire_table_desc_to_pb(sh_arena *a, const st_table_info *info, const char *status,
                          Shoal__TableDescription **out, char *errmsg)
{
	const st_table_def *def = &info->def;
	Shoal__TableDescription *td = sh_arena_alloc(a, sizeof(*td));
	Shoal__BillingModeSummary *bm = sh_arena_alloc(a, sizeof(*bm));
	char id[37];
	table_uuid(def, id);
	if (td == NULL || bm == NULL)
		return nomem(errmsg);
	shoal__table_description__init(td);
	shoal__billing_mode_summary__init(bm);
	bool prov = def->billing == ST_BILLING_PROVISIONED, odt_err;
	bm->billing_mode = prov ? "PROVISIONED" : "PAY_PER_REQUEST";
	bm->last_update_to_pay_per_request_date_time = def->billing_changed_ms != 0
	                                                   ? def->billing_changed_ms
	                                               : prov ? 0
	                                                      : def->created_ms;
	if (!prov || def->billing_changed_ms != 0)
		td->billing_mode_summary = bm;
	td->on_demand_throughput = on_demand_desc(a, prov, &def->tp, &odt_err);
	if (odt_err)
		return nomem(errmsg);
	td->table_name = pbstr(a, def->name);
	td->table_status = pbstr(a, status != NULL ? status : "ACTIVE");
	td->table_arn = arn(a, def->name, NULL);
	td->table_id = pbstr(a, id);
	td->provisioned_throughput =
	    throughput_desc(a, prov, &def->tp, def->last_increase_ms, def->last_decrease_ms,
	                    def->decreases_today, def->decreases_day);
	td->item_count = info->item_count > INT64_MAX ? INT64_MAX : (int64_t)info->item_count;
	td->table_size_bytes = info->size_bytes > INT64_MAX ? INT64_MAX : (int64_t)info->size_bytes;
	td->creation_date_time = def->created_ms;
	td->deletion_protection_enabled = def->deletion_protection;
	if (def->table_class != ST_CLASS_NONE) {
		Shoal__TableClassSummary *tc = sh_arena_alloc(a, sizeof(*tc));
		if (tc == NULL)
			return nomem(errmsg);
		shoal__table_class_summary__init(tc);
		tc->table_class = (char *)wire_table_class_name(def->table_class);
		tc->last_update_date_time = def->class_changed_ms;
		td->table_class_summary = tc;
	}
	if (def->stream.label_ms != 0) {
		char label[WIRE_STREAM_LABEL_MAX];
		wire_stream_label(def->stream.label_ms, label);
		td->stream_specification = wire_stream_spec_to_pb(a, &def->stream);
		td->latest_stream_arn = wire_stream_arn(a, def->name, def->stream.label_ms);
		td->latest_stream_label = pbstr(a, label);
		if (td->stream_specification == NULL || td->latest_stream_arn == NULL ||
		    td->latest_stream_label == NULL)
			return nomem(errmsg);
	}
	if (td->table_name == NULL || td->table_status == NULL || td->table_arn == NULL ||
	    td->table_id == NULL || td->provisioned_throughput == NULL)
		return nomem(errmsg);
	int rc = key_schema_to_pb(a, &def->key, &td->key_schema, &td->n_key_schema, errmsg);
	if (rc == SHOAL_OK)
		rc = attr_defs_to_pb(a, def, &td->attribute_definitions,
		                     &td->n_attribute_definitions, errmsg);
	td->local_secondary_indexes =
	    sh_arena_calloc(a, def->n_indexes, sizeof(*td->local_secondary_indexes));
	td->global_secondary_indexes =
	    sh_arena_calloc(a, def->n_indexes, sizeof(*td->global_secondary_indexes));
	if (rc == SHOAL_OK &&
	    (td->local_secondary_indexes == NULL || td->global_secondary_indexes == NULL))
		rc = nomem(errmsg);
	for (uint32_t i = 0; i < def->n_indexes && rc == SHOAL_OK; i++)
		rc = index_desc_to_pb(a, def, &def->indexes[i], td, errmsg);
	*out = rc == SHOAL_OK ? td : NULL;
	return rc;
}

int wire_list_tables_resp_to_pb(sh_arena *a, const char *const *names, uint32_t n, const char *last,
                                Shoal__ListTablesResponse **out, char *errmsg)
{
	Shoal__ListTablesResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	char **arr = sh_arena_calloc(a, n, sizeof(*arr));
	if (pb == NULL || arr == NULL)
		return nomem(errmsg);
	shoal__list_tables_response__init(pb);
	for (uint32_t i = 0; i < n; i++) {
		if ((arr[i] = pbstr(a, names[i])) == NULL)
			return nomem(errmsg);
	}
	pb->table_names = arr;
	pb->n_table_names = n;
	if (last != NULL && (pb->last_evaluated_table_name = pbstr(a, last)) == NULL)
		return nomem(errmsg);
	*out = pb;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* TableDescription -> st_table_info                                         */
/* ------------------------------------------------------------------------ */

typedef struct attr_types {
	Shoal__AttributeDefinition *const *d;
	size_t n;
} attr_types;

static st_type lookup_type(const attr_types *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++) {
		const Shoal__AttributeDefinition *d = t->d[i];
		if (d->attribute_name != NULL && strcmp(d->attribute_name, name) == 0)
			return st_type_parse(d->attribute_type, strlen(d->attribute_type));
	}
	return ST_NONE;
}

static int key_schema_from_desc(sh_arena *a, const attr_types *t,
                                Shoal__KeySchemaElement *const *ks, size_t n, st_key_schema *out,
                                char *errmsg)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		const char *name = ks[i]->attribute_name;
		bool range = ks[i]->key_type != NULL && strcmp(ks[i]->key_type, "RANGE") == 0;
		st_key_attr *k = range ? &out->range : &out->hash;
		int rc = wire_dup(a, name, &k->name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		k->type = lookup_type(t, name);
	}
	if (out->hash.name == NULL)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "TableDescription without a HASH key");
	return SHOAL_OK;
}

static int projection_from_desc(sh_arena *a, const Shoal__Projection *p, st_index_def *x,
                                char *errmsg)
{
	x->projection = ST_PROJ_ALL;
	if (p == NULL)
		return SHOAL_OK;
	const char *t = p->projection_type != NULL ? p->projection_type : "";
	x->projection = strcmp(t, "KEYS_ONLY") == 0 ? ST_PROJ_KEYS_ONLY
	                : strcmp(t, "INCLUDE") == 0 ? ST_PROJ_INCLUDE
	                                            : ST_PROJ_ALL;
	const char **inc = sh_arena_calloc(a, p->n_non_key_attributes, sizeof(*inc));
	if (inc == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < p->n_non_key_attributes; i++) {
		int rc = wire_dup(a, p->non_key_attributes[i], &inc[i], errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	x->include = inc;
	x->n_include = (uint32_t)p->n_non_key_attributes;
	return SHOAL_OK;
}

/* A DynamoDB TableDescription's IndexStatus: besides Shoal's three,
 * DynamoDB's UPDATING (throughput changes) reads as ACTIVE -- the index
 * serves.  (TableDefine, internal, is strict: wire_define.c.) */
static st_index_status index_status_parse(const char *s)
{
	st_index_status st;
	return wire_index_status_parse(s, &st) == SHOAL_OK ? st : ST_INDEX_ACTIVE;
}

static uint64_t units(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

/* Billing mode and capacity from a description: the BillingModeSummary's
 * mode, or (none, as DynamoDB describes a table created PROVISIONED)
 * PROVISIONED when the table has units. */
static void capacity_from_desc(const Shoal__BillingModeSummary *bm,
                               const Shoal__ProvisionedThroughputDescription *pt,
                               const Shoal__OnDemandThroughput *odt, st_billing *billing,
                               st_throughput *tp)
{
	memset(tp, 0, sizeof(*tp));
	if (bm != NULL && bm->billing_mode != NULL && bm->billing_mode[0] != '\0')
		*billing = strcmp(bm->billing_mode, "PROVISIONED") == 0
		               ? ST_BILLING_PROVISIONED
		               : ST_BILLING_PAY_PER_REQUEST;
	else
		*billing = pt != NULL && pt->read_capacity_units > 0 ? ST_BILLING_PROVISIONED
		                                                     : ST_BILLING_PAY_PER_REQUEST;
	if (pt != NULL) {
		tp->rcu = units(pt->read_capacity_units);
		tp->wcu = units(pt->write_capacity_units);
	}
	if (odt != NULL && WIRE_HAS(odt, max_read_request_units))
		tp->max_rcu = units(odt->max_read_request_units);
	if (odt != NULL && WIRE_HAS(odt, max_write_request_units))
		tp->max_wcu = units(odt->max_write_request_units);
}

int wire_table_desc_from_pb(sh_arena *a, const Shoal__TableDescription *pb, st_table_info *out,
                            const char **status, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	st_table_def *def = &out->def;
	attr_types t = {pb->attribute_definitions, pb->n_attribute_definitions};
	int rc = wire_dup(a, pb->table_name, &def->name, errmsg);
	if (rc == SHOAL_OK)
		rc = key_schema_from_desc(a, &t, pb->key_schema, pb->n_key_schema, &def->key,
		                          errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* TableId is a UUID, not the table's number: id 0 (unknown) unless a
	 * description from an older build carries the decimal id. */
	char *end = NULL;
	unsigned long id = pb->table_id != NULL ? strtoul(pb->table_id, &end, 10) : 0;
	def->id = end != NULL && end != pb->table_id && *end == '\0' && id <= UINT32_MAX
	              ? (uint32_t)id
	              : 0;
	def->created_ms = pb->creation_date_time;
	capacity_from_desc(pb->billing_mode_summary, pb->provisioned_throughput,
	                   pb->on_demand_throughput, &def->billing, &def->tp);
	if (pb->provisioned_throughput != NULL) {
		const Shoal__ProvisionedThroughputDescription *ptd = pb->provisioned_throughput;
		def->last_increase_ms = ptd->last_increase_date_time;
		def->last_decrease_ms = ptd->last_decrease_date_time;
		def->decreases_today = (uint32_t)ptd->number_of_decreases_today;
	}
	if (pb->billing_mode_summary != NULL)
		def->billing_changed_ms =
		    pb->billing_mode_summary->last_update_to_pay_per_request_date_time;
	out->item_count = pb->item_count > 0 ? (uint64_t)pb->item_count : 0;
	out->size_bytes = pb->table_size_bytes > 0 ? (uint64_t)pb->table_size_bytes : 0;
	def->attrs = sh_arena_calloc(a, t.n, sizeof(st_key_attr));
	size_t n_idx = pb->n_local_secondary_indexes + pb->n_global_secondary_indexes;
	def->indexes = sh_arena_calloc(a, n_idx, sizeof(st_index_def));
	if (def->attrs == NULL || def->indexes == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < t.n; i++) {
		rc = wire_dup(a, t.d[i]->attribute_name, &def->attrs[i].name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		def->attrs[i].type = lookup_type(&t, t.d[i]->attribute_name);
	}
	def->n_attrs = (uint32_t)t.n;
	uint32_t k = 0;
	for (size_t i = 0; i < pb->n_local_secondary_indexes; i++, k++) {
		const Shoal__LocalSecondaryIndexDescription *l = pb->local_secondary_indexes[i];
		st_index_def *x = &def->indexes[k];
		x->local = true;
		x->write_shards = 1;
		x->status = ST_INDEX_ACTIVE;
		rc = wire_dup(a, l->index_name, &x->name, errmsg);
		if (rc == SHOAL_OK)
			rc = key_schema_from_desc(a, &t, l->key_schema, l->n_key_schema, &x->key,
			                          errmsg);
		if (rc == SHOAL_OK)
			rc = projection_from_desc(a, l->projection, x, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	for (size_t i = 0; i < pb->n_global_secondary_indexes; i++, k++) {
		const Shoal__GlobalSecondaryIndexDescription *g = pb->global_secondary_indexes[i];
		st_index_def *x = &def->indexes[k];
		x->local = false;
		x->write_shards = g->write_shards > 0 ? g->write_shards : 1;
		x->status = index_status_parse(g->index_status);
		st_billing b;
		capacity_from_desc(pb->billing_mode_summary, g->provisioned_throughput,
		                   g->on_demand_throughput, &b, &x->tp);
		if (g->provisioned_throughput != NULL) {
			x->last_increase_ms = g->provisioned_throughput->last_increase_date_time;
			x->last_decrease_ms = g->provisioned_throughput->last_decrease_date_time;
		}
		rc = wire_dup(a, g->index_name, &x->name, errmsg);
		if (rc == SHOAL_OK)
			rc = key_schema_from_desc(a, &t, g->key_schema, g->n_key_schema, &x->key,
			                          errmsg);
		if (rc == SHOAL_OK)
			rc = projection_from_desc(a, g->projection, x, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	def->n_indexes = k;
	if (status != NULL)
		return wire_dup(a, pb->table_status, status, errmsg);
	return SHOAL_OK;
}
