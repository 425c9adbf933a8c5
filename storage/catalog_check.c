/*
 * catalog_check.c -- validation of table definitions and table names.
 *
 * Validation follows DynamoDB's CreateTable: first the TableName checks,
 * then the field constraints, reported together as "N validation errors
 * detected: ...", then the semantic checks in DynamoDB's order (local indexes
 * before global ones), each with DynamoDB's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

#define MAX_GSI          20
#define MAX_LSI          5
#define MAX_PROJECTED    100 /* NonKeyAttributes over all indexes of a table */
#define MAX_WRITE_SHARDS 1000
#define MAX_ATTR_NAME    255 /* key attribute and NonKeyAttributes names */
#define MAX_VERRS        10  /* as DynamoDB, at most 10 constraint messages */

static const char NAME_PATTERN[] = "[a-zA-Z0-9_.-]+";

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
int st_catalog_check_name(const char *name, char *errmsg)
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

/* Billing mode and throughput agree (DynamoDB's CreateTable messages): a
 * PROVISIONED table and each of its GSIs have both units and no on-demand
 * maximum; a PAY_PER_REQUEST one has no units. */
static int check_capacity(const st_table_def *d, char *errmsg)
{
	bool prov = d->billing == ST_BILLING_PROVISIONED;
	if ((unsigned)d->billing > ST_BILLING_PROVISIONED)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value at 'billingMode' failed to "
		               "satisfy constraint: Member must satisfy enum value set: "
		               "[PROVISIONED, PAY_PER_REQUEST]");
	if (prov && (d->tp.rcu == 0 || d->tp.wcu == 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: ReadCapacityUnits and "
		               "WriteCapacityUnits must both be specified when BillingMode is "
		               "PROVISIONED");
	if (!prov && (d->tp.rcu != 0 || d->tp.wcu != 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Neither "
		               "ReadCapacityUnits nor WriteCapacityUnits can be specified when "
		               "BillingMode is PAY_PER_REQUEST");
	if (prov && (d->tp.max_rcu != 0 || d->tp.max_wcu != 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: %s for "
		               "OnDemandThroughput cannot be specified when table BillingMode is "
		               "PROVISIONED.",
		               d->tp.max_rcu != 0 ? "MaxReadRequestUnits" : "MaxWriteRequestUnits");
	for (uint32_t i = 0; i < d->n_indexes; i++) {
		const st_index_def *x = &d->indexes[i];
		if (x->local)
			continue;
		if (prov && (x->tp.rcu == 0 || x->tp.wcu == 0))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: "
			               "ProvisionedThroughput is not specified for index: %s",
			               x->name);
		if (!prov && (x->tp.rcu != 0 || x->tp.wcu != 0))
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "One or more parameter values were invalid: "
			    "ProvisionedThroughput should not be specified for index: %s "
			    "when BillingMode is PAY_PER_REQUEST",
			    x->name);
		if (prov && (x->tp.max_rcu != 0 || x->tp.max_wcu != 0))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: %s for "
			               "OnDemandThroughput for index : %s cannot be specified when "
			               "the table BillingMode is PROVISIONED",
			               x->tp.max_rcu != 0 ? "MaxReadRequestUnits"
			                                  : "MaxWriteRequestUnits",
			               x->name);
	}
	return SHOAL_OK;
}

int st_catalog_check_def(const st_table_def *d, sh_arena *a, char *errmsg)
{
	int rc = st_catalog_check_name(d->name, errmsg);
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
	if ((rc = check_attrs_used(d, a, errmsg)) != SHOAL_OK)
		return rc;
	if ((rc = check_capacity(d, errmsg)) != SHOAL_OK)
		return rc;
	return st_tags_check(d->tags, d->n_tags, errmsg);
}

/* A copy of the (validated) definition in the form it is stored: key types
 * taken from AttributeDefinitions, index ids that are 0 assigned (ids already
 * set, e.g. fixed by group 0, are kept), next_index_id past every id, LSIs
 * with 1 shard. */
int st_catalog_normalise_def(const st_table_def *src, sh_arena *a, st_table_def *d)
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
		if (x->local) { /* LSIs share the table's capacity */
			x->write_shards = 1;
			memset(&x->tp, 0, sizeof(x->tp));
			x->last_increase_ms = x->last_decrease_ms = 0;
			x->decreases_today = 0;
			x->decreases_day = 0;
		}
		if (x->id == 0) { /* the smallest id no index uses nor used */
			uint16_t id =
			    src->next_index_id > 1 ? (uint16_t)(src->next_index_id - 1) : 0;
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
	d->next_index_id = st_catalog_next_index_id(d);
	return SHOAL_OK;
}

int st_catalog_check_list(const char *exclusive_start, uint32_t limit, char *errmsg)
{
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
	return SHOAL_OK;
}
