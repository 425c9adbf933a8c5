/*
 * wire_table.c -- table operations from protobuf: CreateTable ->
 * st_table_def, UpdateTable -> st_table_update_req, and the DescribeTable,
 * DeleteTable and ListTables parameters (the other direction, and TableDescription, are
 * wire_desc.c).
 *
 * CreateTable is checked the way DynamoDB checks it before a table exists:
 *   1. TableName present ("The parameter 'TableName' is required but was not
 *      present in the request") and 3..255 characters ("TableName must be at
 *      least 3 characters long and at most 255 characters long");
 *   2. parameter constraints, collected (wire_check.c): AttributeDefinitions,
 *      the TableName pattern, BillingMode, ProvisionedThroughput, KeySchema
 *      (1..2 elements, HASH/RANGE), each index's name, key schema and
 *      projection;
 *   3. the rules between parameters, first failure only: billing mode and
 *      throughput, key attributes defined, HASH first and RANGE second, no
 *      unused definitions, then each LSI and GSI (DynamoDB's messages).
 * Repeated fields cannot be "null" in protobuf: an empty AttributeDefinitions
 * or KeySchema is reported as DynamoDB reports a missing one.  Plain string
 * members ("" when absent) likewise count "" as null.
 *
 * Billing: BillingMode, ProvisionedThroughput and OnDemandThroughput become
 * st_table_def's billing and tp (each GSI's tp); DynamoDB's rules between
 * them are checked here where the request alone decides, and in
 * storage/catalog_capacity.c where the table's current mode does
 * (UpdateTable).  One divergence: a table created without BillingMode and
 * without ProvisionedThroughput is PAY_PER_REQUEST instead of an error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire_int.h"

#define MSG_INVALID  "One or more parameter values were invalid: "
#define MAX_LSI      5
#define MAX_GSI      20
#define MAX_CAPACITY 1000000000000LL

static const char *const billing_set[] = {"PROVISIONED", "PAY_PER_REQUEST", NULL};
static const char *const attr_type_set[] = {"B", "N", "S", NULL};
static const char *const key_type_set[] = {"HASH", "RANGE", NULL};
static const char *const projection_set[] = {"ALL", "INCLUDE", "KEYS_ONLY", NULL};
static const char *const table_class_set[] = {"STANDARD", "STANDARD_INFREQUENT_ACCESS", NULL};

const char *wire_table_class_name(st_table_class c)
{
	return c == ST_CLASS_STANDARD_IA ? "STANDARD_INFREQUENT_ACCESS" : "STANDARD";
}

st_table_class wire_table_class_parse(const char *s)
{
	if (s == NULL)
		return ST_CLASS_NONE;
	return strcmp(s, "STANDARD") == 0                     ? ST_CLASS_STANDARD
	       : strcmp(s, "STANDARD_INFREQUENT_ACCESS") == 0 ? ST_CLASS_STANDARD_IA
	                                                      : ST_CLASS_NONE;
}

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a table request");
}

/* A plain protobuf string: NULL when empty (= absent). */
static const char *nz(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* The table name of DescribeTable/DeleteTable/CreateTable, stage 1. */
static int table_op_name(const char *name, char *errmsg)
{
	if (name == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	size_t n = wire_char_len(name);
	if (n < ST_TABLE_NAME_MIN || n > ST_TABLE_NAME_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TableName must be at least 3 characters long and at most 255 "
		               "characters long");
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* CreateTable: stage 2                                                      */
/* ------------------------------------------------------------------------ */

/* DynamoDB prints a list value the way its Java model prints it. */
static void key_schema_text(Shoal__KeySchemaElement *const *ks, size_t n, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = '\0';
	int w = snprintf(buf, cap, "[");
	len = w > 0 ? (size_t)w : 0;
	for (size_t i = 0; i < n && len < cap; i++) {
		w = snprintf(buf + len, cap - len,
		             "%sKeySchemaElement(attributeName=%s, keyType=%s)", i ? ", " : "",
		             ks[i]->attribute_name, ks[i]->key_type);
		len += w > 0 ? (size_t)w : 0;
	}
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

static void check_key_schema(wire_verrs *e, const char *path, Shoal__KeySchemaElement *const *ks,
                             size_t n, bool key_type_enum)
{
	char p[160];
	if (n == 0) {
		wire_check_present(e, path, false);
		return;
	}
	if (n > 2) {
		char text[512];
		key_schema_text(ks, n, text, sizeof(text));
		wire_verr_add(e, text, path, "Member must have length less than or equal to 2");
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s.%zu.member.attributeName", path, i + 1);
		wire_check_present(e, p, nz(ks[i]->attribute_name) != NULL);
		snprintf(p, sizeof(p), "%s.%zu.member.keyType", path, i + 1);
		wire_check_present(e, p, nz(ks[i]->key_type) != NULL);
		if (key_type_enum)
			wire_check_enum(e, p, nz(ks[i]->key_type), key_type_set);
	}
}

static void check_throughput(wire_verrs *e, const char *path, const Shoal__ProvisionedThroughput *t)
{
	if (t == NULL)
		return;
	char p[160];
	snprintf(p, sizeof(p), "%s.writeCapacityUnits", path);
	wire_check_min(e, p, true, t->write_capacity_units, 1);
	snprintf(p, sizeof(p), "%s.readCapacityUnits", path);
	wire_check_min(e, p, true, t->read_capacity_units, 1);
}

/* The constraints CreateTable and UpdateTable share, in DynamoDB's order:
 * AttributeDefinitions members, TableName's pattern, BillingMode,
 * ProvisionedThroughput. */
static void check_table_common(wire_verrs *e, Shoal__AttributeDefinition *const *defs, size_t n,
                               const char *table, const char *billing,
                               const Shoal__ProvisionedThroughput *tp)
{
	char p[160];
	for (size_t i = 0; i < n; i++) {
		const Shoal__AttributeDefinition *d = defs[i];
		snprintf(p, sizeof(p), "attributeDefinitions.%zu.member.attributeName", i + 1);
		wire_check_present(e, p, nz(d->attribute_name) != NULL);
		snprintf(p, sizeof(p), "attributeDefinitions.%zu.member.attributeType", i + 1);
		wire_check_present(e, p, nz(d->attribute_type) != NULL);
		wire_check_enum(e, p, nz(d->attribute_type), attr_type_set);
	}
	if (!wire_name_chars_ok(table))
		wire_verr_add(e, table, "tableName",
		              "Member must satisfy regular expression pattern: " WIRE_NAME_PATTERN);
	wire_check_enum(e, "billingMode", billing, billing_set);
	check_throughput(e, "provisionedThroughput", tp);
}

static void check_index(wire_verrs *e, const char *base, size_t i, const char *name,
                        Shoal__KeySchemaElement *const *ks, size_t n_ks,
                        const Shoal__Projection *proj, const Shoal__ProvisionedThroughput *tp)
{
	char p[160];
	snprintf(p, sizeof(p), "%s.%zu.member.indexName", base, i + 1);
	wire_check_name(e, p, nz(name), true);
	snprintf(p, sizeof(p), "%s.%zu.member.keySchema", base, i + 1);
	check_key_schema(e, p, ks, n_ks, false);
	snprintf(p, sizeof(p), "%s.%zu.member.projection", base, i + 1);
	wire_check_present(e, p, proj != NULL);
	if (proj != NULL) {
		snprintf(p, sizeof(p), "%s.%zu.member.projection.projectionType", base, i + 1);
		wire_check_enum(e, p, nz(proj->projection_type), projection_set);
	}
	snprintf(p, sizeof(p), "%s.%zu.member.provisionedThroughput", base, i + 1);
	check_throughput(e, p, tp);
}

/* OnDemandThroughput's values: >= 1, or -1 (remove) in an UpdateTable. */
static int check_on_demand(const Shoal__OnDemandThroughput *o, bool update, const char *index,
                           char *errmsg)
{
	if (o == NULL)
		return SHOAL_OK;
	for (int read = 1; read >= 0; read--) {
		bool has = read ? WIRE_HAS(o, max_read_request_units)
		                : WIRE_HAS(o, max_write_request_units);
		int64_t v = read ? o->max_read_request_units : o->max_write_request_units;
		if (!has || v >= 1 || (update && v == -1))
			continue;
		if (index == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "Requested %s for OnDemandThroughput for table is "
			               "outside of valid range",
			               read ? "MaxReadRequestUnits" : "MaxWriteRequestUnits");
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Requested %s for OnDemandThroughput for index : %s is "
		                           "outside of valid range",
		               read ? "MaxReadRequestUnits" : "MaxWriteRequestUnits", index);
	}
	return SHOAL_OK;
}

/* A CreateTable's (or a new GSI's) capacity into tp: units when given,
 * OnDemandThroughput maximums (checked >= 1). */
static void capacity_to_st(const Shoal__ProvisionedThroughput *p,
                           const Shoal__OnDemandThroughput *o, st_throughput *tp)
{
	memset(tp, 0, sizeof(*tp));
	if (p != NULL) {
		tp->rcu = (uint64_t)p->read_capacity_units;
		tp->wcu = (uint64_t)p->write_capacity_units;
	}
	if (o != NULL && WIRE_HAS(o, max_read_request_units))
		tp->max_rcu = (uint64_t)o->max_read_request_units;
	if (o != NULL && WIRE_HAS(o, max_write_request_units))
		tp->max_wcu = (uint64_t)o->max_write_request_units;
}

/* An UpdateTable's capacity change (table or GSI Update). */
static void capacity_req(const Shoal__ProvisionedThroughput *p, const Shoal__OnDemandThroughput *o,
                         st_capacity_req *c)
{
	memset(c, 0, sizeof(*c));
	if (p != NULL) {
		c->set_tp = true;
		c->rcu = (uint64_t)p->read_capacity_units;
		c->wcu = (uint64_t)p->write_capacity_units;
	}
	if (o != NULL && WIRE_HAS(o, max_read_request_units)) {
		c->set_max_rcu = true;
		c->max_rcu = o->max_read_request_units;
	}
	if (o != NULL && WIRE_HAS(o, max_write_request_units)) {
		c->set_max_wcu = true;
		c->max_wcu = o->max_write_request_units;
	}
}

static bool on_demand_given(const Shoal__OnDemandThroughput *o)
{
	return o != NULL &&
	       (WIRE_HAS(o, max_read_request_units) || WIRE_HAS(o, max_write_request_units));
}

/* The maximum a PROVISIONED request must not carry ("MaxReadRequestUnits"
 * first). */
static const char *on_demand_member(const Shoal__OnDemandThroughput *o)
{
	return WIRE_HAS(o, max_read_request_units) ? "MaxReadRequestUnits" : "MaxWriteRequestUnits";
}

static int create_constraints(const Shoal__CreateTableRequest *pb, char *errmsg)
{
	wire_verrs e = {0};
	wire_check_present(&e, "attributeDefinitions", pb->n_attribute_definitions > 0);
	check_table_common(&e, pb->attribute_definitions, pb->n_attribute_definitions,
	                   WIRE_OPT(pb, table_name), WIRE_OPT(pb, billing_mode),
	                   pb->provisioned_throughput);
	check_key_schema(&e, "keySchema", pb->key_schema, pb->n_key_schema, true);
	for (size_t i = 0; i < pb->n_local_secondary_indexes; i++) {
		const Shoal__LocalSecondaryIndex *x = pb->local_secondary_indexes[i];
		check_index(&e, "localSecondaryIndexes", i, x->index_name, x->key_schema,
		            x->n_key_schema, x->projection, NULL);
	}
	for (size_t i = 0; i < pb->n_global_secondary_indexes; i++) {
		const Shoal__GlobalSecondaryIndex *x = pb->global_secondary_indexes[i];
		check_index(&e, "globalSecondaryIndexes", i, x->index_name, x->key_schema,
		            x->n_key_schema, x->projection, x->provisioned_throughput);
	}
	wire_check_enum(&e, "tableClass", WIRE_OPT(pb, table_class), table_class_set);
	return wire_verr_done(&e, errmsg);
}

/* ------------------------------------------------------------------------ */
/* CreateTable: stage 3 and conversion                                       */
/* ------------------------------------------------------------------------ */

typedef struct defs {
	Shoal__AttributeDefinition *const *d;
	size_t n;
} defs;

static const Shoal__AttributeDefinition *find_def(const defs *ds, const char *name)
{
	for (size_t i = 0; i < ds->n; i++) {
		if (strcmp(ds->d[i]->attribute_name, name) == 0)
			return ds->d[i];
	}
	return NULL;
}

/* "[a, b]" of attribute names (key schema or definitions). */
static void names_text(const char *const *names, size_t n, char *buf, size_t cap)
{
	size_t len = 0;
	int w = snprintf(buf, cap, "[");
	len = w > 0 ? (size_t)w : 0;
	for (size_t i = 0; i < n && len < cap; i++) {
		w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", names[i]);
		len += w > 0 ? (size_t)w : 0;
	}
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

static void defs_text(const defs *ds, char *buf, size_t cap)
{
	const char *names[64];
	size_t n = ds->n < 64 ? ds->n : 64;
	for (size_t i = 0; i < n; i++)
		names[i] = ds->d[i]->attribute_name;
	names_text(names, n, buf, cap);
}

/* Key schema rules shared by the table and its indexes. */
static int check_keys(const defs *ds, Shoal__KeySchemaElement *const *ks, size_t n, char *errmsg)
{
	for (size_t i = 0; i < n; i++) {
		if (find_def(ds, ks[i]->attribute_name) == NULL) {
			const char *names[2] = {ks[0]->attribute_name,
			                        n > 1 ? ks[1]->attribute_name : NULL};
			char keys[300], dtext[300];
			names_text(names, n, keys, sizeof(keys));
			defs_text(ds, dtext, sizeof(dtext));
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "Some index key attributes are not defined in "
			               "AttributeDefinitions. Keys: %s, AttributeDefinitions: "
			               "%s",
			               keys, dtext);
		}
	}
	if (n == 2 && strcmp(ks[0]->attribute_name, ks[1]->attribute_name) == 0)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "Both the Hash Key and the Range Key element in the KeySchema have the "
		    "same name");
	if (strcmp(ks[0]->key_type, "HASH") != 0)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "Invalid KeySchema: The first KeySchemaElement is not a HASH key type");
	if (n == 2 && strcmp(ks[1]->key_type, "RANGE") != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid KeySchema: The second KeySchemaElement is not a RANGE key "
		               "type");
	return SHOAL_OK;
}

static st_type def_type(const defs *ds, const char *name)
{
	const Shoal__AttributeDefinition *d = find_def(ds, name);
	return d == NULL ? ST_NONE : st_type_parse(d->attribute_type, strlen(d->attribute_type));
}

static int key_schema_to_st(sh_arena *a, const defs *ds, Shoal__KeySchemaElement *const *ks,
                            size_t n, st_key_schema *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	int rc = wire_dup(a, ks[0]->attribute_name, &out->hash.name, errmsg);
	out->hash.type = def_type(ds, ks[0]->attribute_name);
	if (rc == SHOAL_OK && n > 1) {
		rc = wire_dup(a, ks[1]->attribute_name, &out->range.name, errmsg);
		out->range.type = def_type(ds, ks[1]->attribute_name);
	}
	return rc;
}

static int projection_to_st(sh_arena *a, const Shoal__Projection *p, st_index_def *out,
                            char *errmsg)
{
	const char *type = nz(p->projection_type);
	if (type == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Unknown ProjectionType: null");
	if (p->n_non_key_attributes > 0 && strcmp(type, "INCLUDE") != 0)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    MSG_INVALID "ProjectionType is %s, but NonKeyAttributes is specified", type);
	out->projection = strcmp(type, "ALL") == 0         ? ST_PROJ_ALL
	                  : strcmp(type, "KEYS_ONLY") == 0 ? ST_PROJ_KEYS_ONLY
	                                                   : ST_PROJ_INCLUDE;
	const char **inc = sh_arena_calloc(a, p->n_non_key_attributes, sizeof(*inc));
	if (inc == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < p->n_non_key_attributes; i++) {
		/* (group 0's catalog check refuses it too, one Raft entry
		 * later: the router answers before anything is proposed) */
		if (p->non_key_attributes[i] == NULL || p->non_key_attributes[i][0] == '\0')
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "NonKeyAttributes must not contain an empty name");
		int rc = wire_dup(a, p->non_key_attributes[i], &inc[i], errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->include = inc;
	out->n_include = (uint32_t)p->n_non_key_attributes;
	return SHOAL_OK;
}

/* Marks the definitions a key schema uses. */
static void mark_used(const defs *ds, Shoal__KeySchemaElement *const *ks, size_t n, bool *used)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < ds->n; i++) {
			if (strcmp(ds->d[i]->attribute_name, ks[k]->attribute_name) == 0)
				used[i] = true;
		}
	}
}

static int duplicate_index(const st_table_def *def, uint32_t upto, const char *name, char *errmsg)
{
	for (uint32_t i = 0; i < upto; i++) {
		if (strcmp(def->indexes[i].name, name) == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "Duplicate index name: %s", name);
	}
	return SHOAL_OK;
}

static int create_rules(sh_arena *a, const Shoal__CreateTableRequest *pb, st_table_def *out,
                        char *errmsg)
{
	const char *billing = WIRE_OPT(pb, billing_mode);
	const Shoal__ProvisionedThroughput *tp = pb->provisioned_throughput;
	bool on_demand = (billing != NULL && strcmp(billing, "PAY_PER_REQUEST") == 0) ||
	                 (billing == NULL && tp == NULL);
	if (billing != NULL && on_demand && tp != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
		               "specified when BillingMode is PAY_PER_REQUEST");
	if (!on_demand && tp == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "ReadCapacityUnits and WriteCapacityUnits must both be "
		                           "specified when BillingMode is PROVISIONED");
	if (tp != NULL && tp->read_capacity_units > MAX_CAPACITY)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Given value %" PRId64 " for ReadCapacityUnits is out of bounds",
		               tp->read_capacity_units);
	if (tp != NULL && tp->write_capacity_units > MAX_CAPACITY)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Given value %" PRId64 " for WriteCapacityUnits is out of bounds",
		               tp->write_capacity_units);
	if (!on_demand && on_demand_given(pb->on_demand_throughput))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "%s for OnDemandThroughput cannot be specified when table "
		               "BillingMode is PROVISIONED.",
		               on_demand_member(pb->on_demand_throughput));
	int rc = check_on_demand(pb->on_demand_throughput, false, NULL, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->billing = on_demand ? ST_BILLING_PAY_PER_REQUEST : ST_BILLING_PROVISIONED;
	capacity_to_st(tp, pb->on_demand_throughput, &out->tp);

	defs ds = {pb->attribute_definitions, pb->n_attribute_definitions};
	for (size_t i = 0; i < ds.n; i++) {
		for (size_t k = 0; k < i; k++) {
			if (strcmp(ds.d[i]->attribute_name, ds.d[k]->attribute_name) == 0)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               MSG_INVALID "Duplicate AttributeName in "
				                           "AttributeDefinitions: %s",
				               ds.d[i]->attribute_name);
		}
	}
	if (pb->n_key_schema > ds.n)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid KeySchema: Some index key attribute have no definition");
	rc = check_keys(&ds, pb->key_schema, pb->n_key_schema, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	size_t n_lsi = pb->n_local_secondary_indexes, n_gsi = pb->n_global_secondary_indexes;
	if (n_lsi == 0 && n_gsi == 0 && pb->n_key_schema != ds.n)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "Number of attributes in KeySchema does not exactly match "
		               "number of attributes defined in AttributeDefinitions");
	rc = key_schema_to_st(a, &ds, pb->key_schema, pb->n_key_schema, &out->key, errmsg);
	if (rc != SHOAL_OK)
		return rc;

	out->indexes = sh_arena_calloc(a, n_lsi + n_gsi, sizeof(st_index_def));
	bool *used = sh_arena_calloc(a, ds.n, sizeof(bool));
	if (out->indexes == NULL || used == NULL)
		return nomem(errmsg);
	mark_used(&ds, pb->key_schema, pb->n_key_schema, used);
	uint32_t k = 0;
	if (n_lsi > 0 && pb->n_key_schema != 2)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Table KeySchema does not have a range key, which is "
		                           "required when specifying a LocalSecondaryIndex");
	for (size_t i = 0; i < n_lsi; i++, k++) {
		const Shoal__LocalSecondaryIndex *x = pb->local_secondary_indexes[i];
		st_index_def *d = &out->indexes[k];
		rc = check_keys(&ds, x->key_schema, x->n_key_schema, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (x->n_key_schema != 2)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "Index KeySchema does not have a range key for "
			                           "index: %s",
			               x->index_name);
		if (strcmp(x->key_schema[0]->attribute_name, pb->key_schema[0]->attribute_name) !=
		    0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "Index KeySchema does not have the same leading "
			               "hash key as table KeySchema for index: %s. index "
			               "hash key: %s, table hash key: %s",
			               x->index_name, x->key_schema[0]->attribute_name,
			               pb->key_schema[0]->attribute_name);
		rc = projection_to_st(a, x->projection, d, errmsg);
		if (rc == SHOAL_OK)
			rc = duplicate_index(out, k, x->index_name, errmsg);
		if (rc == SHOAL_OK)
			rc = wire_dup(a, x->index_name, &d->name, errmsg);
		if (rc == SHOAL_OK)
			rc = key_schema_to_st(a, &ds, x->key_schema, x->n_key_schema, &d->key,
			                      errmsg);
		if (rc != SHOAL_OK)
			return rc;
		mark_used(&ds, x->key_schema, x->n_key_schema, used);
		d->local = true;
		d->write_shards = 1;
		d->status = ST_INDEX_ACTIVE;
	}
	if (n_lsi > MAX_LSI)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "Number of LocalSecondaryIndexes exceeds per-table limit "
		               "of %d",
		               MAX_LSI);
	for (size_t i = 0; i < n_gsi; i++, k++) {
		const Shoal__GlobalSecondaryIndex *x = pb->global_secondary_indexes[i];
		st_index_def *d = &out->indexes[k];
		rc = check_keys(&ds, x->key_schema, x->n_key_schema, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		rc = projection_to_st(a, x->projection, d, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (on_demand && billing != NULL && x->provisioned_throughput != NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "ProvisionedThroughput should not be specified for "
			               "index: %s when BillingMode is PAY_PER_REQUEST",
			               x->index_name);
		if (!on_demand && x->provisioned_throughput == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "ProvisionedThroughput is not specified for index: "
			               "%s",
			               x->index_name);
		if (!on_demand && on_demand_given(x->on_demand_throughput))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "%s for OnDemandThroughput for index : %s cannot be "
			               "specified when the table BillingMode is "
			               "PROVISIONED",
			               on_demand_member(x->on_demand_throughput), x->index_name);
		rc = check_on_demand(x->on_demand_throughput, false, x->index_name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		/* a PAY_PER_REQUEST table's GSI has no units, even when the
		 * request (without BillingMode) carried some */
		capacity_to_st(on_demand ? NULL : x->provisioned_throughput,
		               x->on_demand_throughput, &d->tp);
		rc = duplicate_index(out, k, x->index_name, errmsg);
		if (rc == SHOAL_OK)
			rc = wire_dup(a, x->index_name, &d->name, errmsg);
		if (rc == SHOAL_OK)
			rc = key_schema_to_st(a, &ds, x->key_schema, x->n_key_schema, &d->key,
			                      errmsg);
		if (rc != SHOAL_OK)
			return rc;
		mark_used(&ds, x->key_schema, x->n_key_schema, used);
		d->local = false;
		d->write_shards = x->write_shards > 0 ? x->write_shards : 1;
		d->status = ST_INDEX_ACTIVE;
	}
	if (n_gsi > MAX_GSI)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "GlobalSecondaryIndex count exceeds the per-table limit of "
		               "%d",
		               MAX_GSI);
	size_t n_used = 0, n_listed = 0;
	const char *used_names[64];
	for (size_t i = 0; i < ds.n; i++) {
		if (used[i] && n_listed < 64)
			used_names[n_listed++] = ds.d[i]->attribute_name;
		n_used += used[i];
	}
	if (n_used < ds.n) {
		char dtext[300], utext[300];
		defs_text(&ds, dtext, sizeof(dtext));
		names_text(used_names, n_listed, utext, sizeof(utext));
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "Some AttributeDefinitions are not used. "
		                           "AttributeDefinitions: %s, keys used: %s",
		               dtext, utext);
	}
	out->n_indexes = k;

	out->attrs = sh_arena_calloc(a, ds.n, sizeof(st_key_attr));
	if (out->attrs == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < ds.n; i++) {
		rc = wire_dup(a, ds.d[i]->attribute_name, &out->attrs[i].name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		out->attrs[i].type = def_type(&ds, ds.d[i]->attribute_name);
	}
	out->n_attrs = (uint32_t)ds.n;
	return SHOAL_OK;
}

int wire_create_table_from_pb(sh_arena *a, const Shoal__CreateTableRequest *pb, st_table_def *out,
                              char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	int rc = table_op_name(table, errmsg);
	if (rc == SHOAL_OK)
		rc = create_constraints(pb, errmsg);
	if (rc == SHOAL_OK)
		rc = create_rules(a, pb, out, errmsg);
	if (rc == SHOAL_OK && pb->stream_specification != NULL)
		rc = wire_stream_spec_from_pb(pb->stream_specification, &out->stream, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->name, errmsg);
	out->deletion_protection = pb->deletion_protection_enabled;
	out->table_class = wire_table_class_parse(WIRE_OPT(pb, table_class));
	if (rc == SHOAL_OK)
		rc = wire_tags_from_pb(a, pb->tags, pb->n_tags, &out->tags, &out->n_tags, errmsg);
	if (rc == SHOAL_OK)
		rc = st_tags_check(out->tags, out->n_tags, errmsg);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Rules for new indexes only                                                */
/* ------------------------------------------------------------------------ */

/* A projection as DynamoDB checks a new one: INCLUDE names its
 * NonKeyAttributes, each once.  Shoal accepted both before, so stored
 * definitions (which wire_create_table_from_pb reads too) are not held to
 * it: only requests are. */
static int new_projection(const Shoal__Projection *p, char *errmsg)
{
	if (p == NULL)
		return SHOAL_OK;
	const char *type = nz(p->projection_type);
	if (type != NULL && strcmp(type, "INCLUDE") == 0 && p->n_non_key_attributes == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "ProjectionType is INCLUDE, but NonKeyAttributes is not specified");
	for (size_t i = 0; i < p->n_non_key_attributes; i++)
		for (size_t j = 0; j < i; j++)
			if (p->non_key_attributes[i] != NULL && p->non_key_attributes[j] != NULL &&
			    strcmp(p->non_key_attributes[i], p->non_key_attributes[j]) == 0)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               MSG_INVALID "Duplicate attribute name in "
				                           "NonKeyAttributes: %s",
				               p->non_key_attributes[i]);
	return SHOAL_OK;
}

int wire_create_table_check_new(const Shoal__CreateTableRequest *pb, char *errmsg)
{
	int rc = SHOAL_OK;
	for (size_t i = 0; rc == SHOAL_OK && i < pb->n_local_secondary_indexes; i++)
		rc = new_projection(pb->local_secondary_indexes[i]->projection, errmsg);
	for (size_t i = 0; rc == SHOAL_OK && i < pb->n_global_secondary_indexes; i++)
		rc = new_projection(pb->global_secondary_indexes[i]->projection, errmsg);
	return rc;
}

int wire_update_table_check_new(const Shoal__UpdateTableRequest *pb, char *errmsg)
{
	int rc = SHOAL_OK;
	for (size_t i = 0; rc == SHOAL_OK && i < pb->n_global_secondary_index_updates; i++) {
		const Shoal__GlobalSecondaryIndexUpdate *u = pb->global_secondary_index_updates[i];
		if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE &&
		    u->create != NULL)
			rc = new_projection(u->create->projection, errmsg);
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* DescribeTable, DeleteTable, ListTables                                    */
/* ------------------------------------------------------------------------ */

static int table_name_req(sh_arena *a, const char *name, const char **out, char *errmsg)
{
	*out = NULL;
	int rc = table_op_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	wire_verrs e = {0};
	if (!wire_name_chars_ok(name))
		wire_verr_add(&e, name, "tableName",
		              "Member must satisfy regular expression pattern: " WIRE_NAME_PATTERN);
	rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, name, out, errmsg);
	return rc;
}

int wire_describe_table_from_pb(sh_arena *a, const Shoal__DescribeTableRequest *pb,
                                const char **table, char *errmsg)
{
	return table_name_req(a, WIRE_OPT(pb, table_name), table, errmsg);
}

int wire_delete_table_from_pb(sh_arena *a, const Shoal__DeleteTableRequest *pb, const char **table,
                              char *errmsg)
{
	return table_name_req(a, WIRE_OPT(pb, table_name), table, errmsg);
}

int wire_list_tables_from_pb(sh_arena *a, const Shoal__ListTablesRequest *pb,
                             const char **exclusive_start, uint32_t *limit, char *errmsg)
{
	*exclusive_start = NULL;
	*limit = 100;
	bool has_limit = WIRE_HAS(pb, limit);
	const char *start = WIRE_OPT(pb, exclusive_start_table_name);
	wire_verrs e = {0};
	wire_check_min(&e, "limit", has_limit, has_limit ? pb->limit : 0, 1);
	wire_check_max(&e, "limit", has_limit, has_limit ? pb->limit : 0, 100);
	wire_check_name(&e, "exclusiveStartTableName", start, false);
	int rc = wire_verr_done(&e, errmsg);
	if (rc == SHOAL_OK)
		rc = wire_dup(a, start, exclusive_start, errmsg);
	if (rc == SHOAL_OK && has_limit)
		*limit = (uint32_t)pb->limit;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* UpdateTable                                                               */
/* ------------------------------------------------------------------------ */

/* The index name of one GlobalSecondaryIndexUpdate ("" when it has none). */
static const char *gsi_update_name(const Shoal__GlobalSecondaryIndexUpdate *u)
{
	const char *n = NULL;
	switch (u->action_case) {
	case SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE:
		n = u->create != NULL ? u->create->index_name : NULL;
		break;
	case SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_UPDATE:
		n = u->update != NULL ? u->update->index_name : NULL;
		break;
	case SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_DELETE:
		n = u->delete_ != NULL ? u->delete_->index_name : NULL;
		break;
	default:
		break;
	}
	return n != NULL ? n : "";
}

static int update_constraints(const Shoal__UpdateTableRequest *pb, char *errmsg)
{
	wire_verrs e = {0};
	char p[160];
	check_table_common(&e, pb->attribute_definitions, pb->n_attribute_definitions,
	                   WIRE_OPT(pb, table_name), WIRE_OPT(pb, billing_mode),
	                   pb->provisioned_throughput);
	for (size_t i = 0; i < pb->n_global_secondary_index_updates; i++) {
		const Shoal__GlobalSecondaryIndexUpdate *u = pb->global_secondary_index_updates[i];
		if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE &&
		    u->create != NULL) {
			const Shoal__GlobalSecondaryIndex *x = u->create;
			char base[80];
			snprintf(base, sizeof(base),
			         "globalSecondaryIndexUpdates.%zu.member.create", i + 1);
			snprintf(p, sizeof(p), "%s.projection", base);
			wire_check_present(&e, p, x->projection != NULL);
			if (x->projection != NULL) {
				snprintf(p, sizeof(p), "%s.projection.projectionType", base);
				wire_check_enum(&e, p, nz(x->projection->projection_type),
				                projection_set);
			}
			snprintf(p, sizeof(p), "%s.indexName", base);
			wire_check_name(&e, p, nz(x->index_name), true);
			snprintf(p, sizeof(p), "%s.provisionedThroughput", base);
			check_throughput(&e, p, x->provisioned_throughput);
			snprintf(p, sizeof(p), "%s.keySchema", base);
			check_key_schema(&e, p, x->key_schema, x->n_key_schema, false);
		} else if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_UPDATE &&
		           u->update != NULL) {
			snprintf(p, sizeof(p),
			         "globalSecondaryIndexUpdates.%zu.member.update.indexName", i + 1);
			wire_check_name(&e, p, nz(u->update->index_name), true);
			snprintf(
			    p, sizeof(p),
			    "globalSecondaryIndexUpdates.%zu.member.update.provisionedThroughput",
			    i + 1);
			wire_check_present(&e, p,
			                   u->update->provisioned_throughput != NULL ||
			                       u->update->on_demand_throughput != NULL);
			check_throughput(&e, p, u->update->provisioned_throughput);
		} else if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_DELETE &&
		           u->delete_ != NULL) {
			snprintf(p, sizeof(p),
			         "globalSecondaryIndexUpdates.%zu.member.delete.indexName", i + 1);
			wire_check_name(&e, p, nz(u->delete_->index_name), true);
		}
	}
	wire_check_enum(&e, "tableClass", WIRE_OPT(pb, table_class), table_class_set);
	return wire_verr_done(&e, errmsg);
}

static int update_rules(sh_arena *a, const Shoal__UpdateTableRequest *pb, st_table_update_req *out,
                        char *errmsg)
{
	const char *billing = WIRE_OPT(pb, billing_mode);
	const Shoal__ProvisionedThroughput *tp = pb->provisioned_throughput;
	size_t n_upd = pb->n_global_secondary_index_updates;
	out->set_deletion_protection = WIRE_HAS(pb, deletion_protection_enabled);
	out->deletion_protection = pb->deletion_protection_enabled;
	out->set_table_class = WIRE_HAS(pb, table_class);
	out->table_class = wire_table_class_parse(WIRE_OPT(pb, table_class));
	if (tp == NULL && billing == NULL && n_upd == 0 && pb->on_demand_throughput == NULL &&
	    !out->set_deletion_protection && !out->set_table_class &&
	    pb->stream_specification == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "At least one of ProvisionedThroughput, BillingMode, "
		               "UpdateStreamEnabled, GlobalSecondaryIndexUpdates or "
		               "SSESpecification or ReplicaUpdates is required");
	if (billing != NULL && strcmp(billing, "PROVISIONED") == 0 && tp == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "ProvisionedThroughput must be specified when BillingMode is "
		               "PROVISIONED");
	if (billing != NULL && strcmp(billing, "PAY_PER_REQUEST") == 0 && tp != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
		               "specified when BillingMode is PAY_PER_REQUEST");
	if (tp != NULL && tp->read_capacity_units > MAX_CAPACITY)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Given value %" PRId64 " for ReadCapacityUnits is out of bounds",
		               tp->read_capacity_units);
	if (tp != NULL && tp->write_capacity_units > MAX_CAPACITY)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Given value %" PRId64 " for WriteCapacityUnits is out of bounds",
		               tp->write_capacity_units);
	if (billing != NULL && strcmp(billing, "PROVISIONED") == 0 &&
	    on_demand_given(pb->on_demand_throughput))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "%s for OnDemandThroughput cannot be specified when the "
		                           "table BillingMode is PROVISIONED",
		               on_demand_member(pb->on_demand_throughput));
	int rc = check_on_demand(pb->on_demand_throughput, true, NULL, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->set_billing = billing != NULL;
	out->billing = billing != NULL && strcmp(billing, "PROVISIONED") == 0
	                   ? ST_BILLING_PROVISIONED
	                   : ST_BILLING_PAY_PER_REQUEST;
	capacity_req(tp, pb->on_demand_throughput, &out->cap);
	size_t n_create = 0, n_drop = 0, n_update = 0;
	for (size_t i = 0; i < n_upd; i++) {
		const Shoal__GlobalSecondaryIndexUpdate *u = pb->global_secondary_index_updates[i];
		if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION__NOT_SET)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "One of GlobalSecondaryIndexUpdate.Update, "
			                           "GlobalSecondaryIndexUpdate.Create, "
			                           "GlobalSecondaryIndexUpdate.Delete must not be "
			                           "null");
		const char *name = gsi_update_name(u);
		for (size_t k = 0; k < i; k++) {
			if (strcmp(gsi_update_name(pb->global_secondary_index_updates[k]), name) ==
			    0)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               MSG_INVALID "Only one global secondary index update "
				                           "per index is allowed simultaneously. "
				                           "Index: %s",
				               name);
		}
		n_create += u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE;
		n_drop += u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_DELETE;
		n_update += u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_UPDATE;
	}

	defs ds = {pb->attribute_definitions, pb->n_attribute_definitions};
	for (size_t i = 0; i < ds.n; i++) {
		for (size_t k = 0; k < i; k++) {
			if (strcmp(ds.d[i]->attribute_name, ds.d[k]->attribute_name) == 0)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               MSG_INVALID "Duplicate AttributeName in "
				                           "AttributeDefinitions: %s",
				               ds.d[i]->attribute_name);
		}
	}
	out->create = sh_arena_calloc(a, n_create + 1, sizeof(*out->create));
	out->drop = sh_arena_calloc(a, n_drop + 1, sizeof(*out->drop));
	out->attrs = sh_arena_calloc(a, ds.n + 1, sizeof(*out->attrs));
	out->update = sh_arena_calloc(a, n_update + 1, sizeof(*out->update));
	if (out->create == NULL || out->drop == NULL || out->attrs == NULL || out->update == NULL)
		return nomem(errmsg);
	for (size_t i = 0; i < n_upd; i++) {
		const Shoal__GlobalSecondaryIndexUpdate *u = pb->global_secondary_index_updates[i];
		if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_DELETE) {
			rc = wire_dup(a, u->delete_->index_name, &out->drop[out->n_drop++], errmsg);
			if (rc != SHOAL_OK)
				return rc;
			continue;
		}
		if (u->action_case == SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_UPDATE) {
			const Shoal__UpdateGlobalSecondaryIndexAction *x = u->update;
			st_index_capacity_req *c = &out->update[out->n_update++];
			if (billing != NULL && strcmp(billing, "PROVISIONED") == 0 &&
			    on_demand_given(x->on_demand_throughput))
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    MSG_INVALID "%s for OnDemandThroughput for index : %s "
				                "cannot be specified when the table "
				                "BillingMode is PROVISIONED",
				    on_demand_member(x->on_demand_throughput), x->index_name);
			rc = check_on_demand(x->on_demand_throughput, true, x->index_name, errmsg);
			if (rc == SHOAL_OK)
				rc = wire_dup(a, x->index_name, &c->name, errmsg);
			if (rc != SHOAL_OK)
				return rc;
			capacity_req(x->provisioned_throughput, x->on_demand_throughput, &c->cap);
			continue;
		}
		if (u->action_case != SHOAL__GLOBAL_SECONDARY_INDEX_UPDATE__ACTION_CREATE)
			continue;
		const Shoal__GlobalSecondaryIndex *x = u->create;
		st_index_def *d = &out->create[out->n_create++];
		/* DynamoDB: "If you are adding a new global secondary index to the
		 * table, AttributeDefinitions must include the key element(s) of the
		 * new index." */
		rc = check_keys(&ds, x->key_schema, x->n_key_schema, errmsg);
		if (rc == SHOAL_OK)
			rc = projection_to_st(a, x->projection, d, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (billing != NULL && strcmp(billing, "PAY_PER_REQUEST") == 0 &&
		    x->provisioned_throughput != NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "ProvisionedThroughput should not be specified for "
			               "index: %s when BillingMode is PAY_PER_REQUEST",
			               x->index_name);
		rc = check_on_demand(x->on_demand_throughput, false, x->index_name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		capacity_to_st(x->provisioned_throughput, x->on_demand_throughput, &d->tp);
		rc = wire_dup(a, x->index_name, &d->name, errmsg);
		if (rc == SHOAL_OK)
			rc = key_schema_to_st(a, &ds, x->key_schema, x->n_key_schema, &d->key,
			                      errmsg);
		if (rc != SHOAL_OK)
			return rc;
		d->id = 0;
		d->local = false;
		d->write_shards = x->write_shards > 0 ? x->write_shards : 1;
		d->status = ST_INDEX_CREATING;
	}
	if (n_create + n_drop > 1)
		return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED,
		               "Subscriber limit exceeded: Only 1 online index can be created or "
		               "deleted simultaneously per table");
	for (size_t i = 0; i < ds.n; i++) {
		rc = wire_dup(a, ds.d[i]->attribute_name, &out->attrs[i].name, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		out->attrs[i].type = def_type(&ds, ds.d[i]->attribute_name);
	}
	out->n_attrs = (uint32_t)ds.n;
	return SHOAL_OK;
}

int wire_update_table_from_pb(sh_arena *a, const Shoal__UpdateTableRequest *pb,
                              st_table_update_req *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	const char *table = WIRE_OPT(pb, table_name);
	int rc = table_op_name(table, errmsg);
	if (rc == SHOAL_OK)
		rc = update_constraints(pb, errmsg);
	if (rc == SHOAL_OK)
		rc = update_rules(a, pb, out, errmsg);
	if (rc == SHOAL_OK && pb->stream_specification != NULL) {
		out->set_stream = true;
		rc = wire_stream_spec_from_pb(pb->stream_specification, &out->stream, errmsg);
	}
	if (rc == SHOAL_OK)
		rc = wire_dup(a, table, &out->name, errmsg);
	return rc;
}
