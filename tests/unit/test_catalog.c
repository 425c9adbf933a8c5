/* The environment and the catalog: tables, ids, counters, applied index. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "storage/engine.h"
#include "storage/index.h"
#include "storage/snapshot.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static void setup(void)
{
	tl_store_open("catalog", &(st_env_options){.nosync = true});
}

static void reopen(void)
{
	char msg[SH_ERRMSG_SIZE];
	st_env_close(tl_env);
	tl_env = NULL;
	st_env_options o = {.nosync = true};
	ck_assert_int_eq(st_env_open(tl_dir, &o, &tl_env, msg), SHOAL_OK);
}

/* ------------------------------------------------------------------------ */
/* Definitions                                                               */
/* ------------------------------------------------------------------------ */

typedef struct tdef {
	st_table_def def;
	st_key_attr attrs[32];
	st_index_def idx[32];
	const char *include[4];
} tdef;

/* PK (S) + SK (N). */
static void tdef_init(tdef *t, const char *name)
{
	memset(t, 0, sizeof(*t));
	t->def.name = name;
	t->def.key.hash.name = "PK";
	t->def.key.range.name = "SK";
	t->attrs[0] = (st_key_attr){"PK", ST_S};
	t->attrs[1] = (st_key_attr){"SK", ST_N};
	t->def.attrs = t->attrs;
	t->def.n_attrs = 2;
	t->def.indexes = t->idx;
	t->def.created_ms = 1700000000123;
}

static void tdef_attr(tdef *t, const char *name, st_type type)
{
	t->attrs[t->def.n_attrs++] = (st_key_attr){name, type};
}

static st_index_def *tdef_index(tdef *t, const char *name, bool local, const char *hash,
                                const char *range)
{
	st_index_def *x = &t->idx[t->def.n_indexes++];
	x->name = name;
	x->local = local;
	x->key.hash.name = hash;
	x->key.range.name = range;
	x->projection = ST_PROJ_ALL;
	x->write_shards = 1;
	x->status = ST_INDEX_ACTIVE;
	return x;
}

static int create(const st_table_def *def, char *msg)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	int rc = st_table_create(txn, def, msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, msg);
}

static void create_ok(const st_table_def *def)
{
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = create(def, msg);
	ck_assert_msg(rc == SHOAL_OK, "create %s: %s", def->name, msg);
}

static int drop(const char *name, char *msg)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	int rc = st_table_delete(txn, name, msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, msg);
}

/* ------------------------------------------------------------------------ */
/* Create and describe                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_create_describe)
{
	tdef t;
	tdef_init(&t, "Orders");
	tdef_attr(&t, "GPK", ST_B);
	tdef_attr(&t, "LSK", ST_S);
	st_index_def *g = tdef_index(&t, "byG", false, "GPK", "SK");
	g->write_shards = 4;
	g->projection = ST_PROJ_INCLUDE;
	t.include[0] = "total";
	t.include[1] = "status";
	g->include = t.include;
	g->n_include = 2;
	g->status = ST_INDEX_CREATING;
	st_index_def *l = tdef_index(&t, "byL", true, "PK", "LSK");
	l->projection = ST_PROJ_KEYS_ONLY;
	create_ok(&t.def);

	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Orders", &a, &info, msg), SHOAL_OK);
	const st_table_def *d = &info.def;
	ck_assert_str_eq(d->name, "Orders");
	ck_assert_uint_eq(d->id, 1);
	ck_assert(d->created_ms == 1700000000123);
	ck_assert_str_eq(d->key.hash.name, "PK");
	ck_assert_int_eq(d->key.hash.type, ST_S);
	ck_assert_str_eq(d->key.range.name, "SK");
	ck_assert_int_eq(d->key.range.type, ST_N);
	ck_assert_uint_eq(d->n_attrs, 4);
	ck_assert_str_eq(d->attrs[2].name, "GPK");
	ck_assert_int_eq(d->attrs[2].type, ST_B);
	ck_assert_uint_eq(d->n_indexes, 2);
	ck_assert_uint_eq(info.item_count, 0);
	ck_assert_uint_eq(info.size_bytes, 0);

	const st_index_def *x = st_table_index(d, "byG");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->id, 1);
	ck_assert(!x->local);
	ck_assert_int_eq(x->key.hash.type, ST_B);
	ck_assert_int_eq(x->key.range.type, ST_N);
	ck_assert_int_eq(x->projection, ST_PROJ_INCLUDE);
	ck_assert_uint_eq(x->n_include, 2);
	ck_assert_str_eq(x->include[0], "total");
	ck_assert_str_eq(x->include[1], "status");
	ck_assert_uint_eq(x->write_shards, 4);
	ck_assert_int_eq(x->status, ST_INDEX_CREATING);
	x = st_table_index(d, "byL");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->id, 2);
	ck_assert(x->local);
	ck_assert_int_eq(x->projection, ST_PROJ_KEYS_ONLY);
	ck_assert_int_eq(x->key.range.type, ST_S);
	ck_assert_uint_eq(x->write_shards, 1);
	ck_assert_ptr_null(st_table_index(d, "nope"));
	ck_assert_ptr_null(st_table_index(d, NULL));

	/* A second table gets the next id; a table without a sort key. */
	tdef t2;
	tdef_init(&t2, "Users");
	t2.def.key.range.name = NULL;
	t2.def.n_attrs = 1;
	create_ok(&t2.def);
	ck_assert_int_eq(st_table_describe(tl_env, "Users", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 2);
	ck_assert_ptr_null(info.def.key.range.name);
	ck_assert_uint_eq(info.def.n_indexes, 0);

	ck_assert_int_eq(st_table_describe(tl_env, "Nothing", &a, &info, msg), SHOAL_E_NOT_FOUND);
	ck_assert_str_eq(msg, "Requested resource not found: Table: Nothing not found");
	ck_assert_int_eq(st_table_describe(tl_env, "no", &a, &info, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "TableName must be at least 3 characters long and at most 255 "
	                      "characters long");
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_create_exists)
{
	tdef t;
	tdef_init(&t, "Twice");
	create_ok(&t.def);
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(create(&t.def, msg), SHOAL_E_IN_USE);
	ck_assert_str_eq(msg, "Table already exists: Twice");
}
END_TEST

START_TEST(test_explicit_ids)
{
	tdef t;
	tdef_init(&t, "Explicit");
	t.def.id = 10;
	tdef_attr(&t, "G", ST_S);
	st_index_def *x = tdef_index(&t, "gsi-a", false, "G", NULL);
	x->id = 1;
	tdef_index(&t, "gsi-b", false, "G", NULL); /* gets the smallest free id: 2 */
	x = tdef_index(&t, "gsi-c", false, "G", NULL);
	x->id = 7;
	create_ok(&t.def);
	tdef t2;
	tdef_init(&t2, "Auto");
	create_ok(&t2.def);

	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Explicit", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 10);
	ck_assert_uint_eq(st_table_index(&info.def, "gsi-a")->id, 1);
	ck_assert_uint_eq(st_table_index(&info.def, "gsi-b")->id, 2);
	ck_assert_uint_eq(st_table_index(&info.def, "gsi-c")->id, 7);
	ck_assert_int_eq(st_table_describe(tl_env, "Auto", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 11);

	/* An id in use is refused; a lower free one is accepted and does not
	 * move next_table_id back. */
	tdef t3;
	tdef_init(&t3, "Clash");
	t3.def.id = 11;
	ck_assert_int_eq(create(&t3.def, msg), SHOAL_E_IN_USE);
	ck_assert_str_eq(msg, "Table id 11 is already used by table Auto");
	t3.def.id = 5;
	create_ok(&t3.def);
	tdef t4;
	tdef_init(&t4, "After");
	create_ok(&t4.def);
	ck_assert_int_eq(st_table_describe(tl_env, "After", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 12);

	/* Duplicate explicit index ids. */
	tdef t5;
	tdef_init(&t5, "DupIds");
	tdef_attr(&t5, "G", ST_S);
	tdef_index(&t5, "one", false, "G", NULL)->id = 3;
	tdef_index(&t5, "two", false, "G", NULL)->id = 3;
	ck_assert_int_eq(create(&t5.def, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Duplicate index id 3");
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Validation messages                                                       */
/* ------------------------------------------------------------------------ */

static void expect_invalid(const tdef *t, const char *want)
{
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = create(&t->def, msg);
	ck_assert_msg(rc == SHOAL_E_VALIDATION, "want validation error \"%s\", got %s (%s)", want,
	              shoal_err_name(rc), msg);
	ck_assert_str_eq(msg, want);
	/* Nothing was created. */
	if (t->def.name != NULL) {
		const char **names;
		uint32_t n;
		const char *last;
		sh_arena a;
		sh_arena_init(&a);
		ck_assert_int_eq(st_table_list(tl_env, NULL, 100, &a, &names, &n, &last, msg),
		                 SHOAL_OK);
		ck_assert_uint_eq(n, 0);
		sh_arena_fini(&a);
	}
}

START_TEST(test_table_name_rules)
{
	tdef t;
	tdef_init(&t, NULL);
	expect_invalid(&t,
	               "The parameter 'TableName' is required but was not present in the request");
	const char *len_msg =
	    "TableName must be at least 3 characters long and at most 255 characters long";
	t.def.name = "ab";
	expect_invalid(&t, len_msg);
	char long_name[300];
	memset(long_name, 'x', 256);
	long_name[256] = '\0';
	t.def.name = long_name;
	expect_invalid(&t, len_msg);
	t.def.name = "bad name!";
	expect_invalid(&t, "1 validation error detected: Value 'bad name!' at 'tableName' failed "
	                   "to satisfy constraint: Member must satisfy regular expression pattern: "
	                   "[a-zA-Z0-9_.-]+");
	/* Constraint violations are reported together. */
	t.attrs[1].type = ST_BOOL;
	expect_invalid(&t,
	               "2 validation errors detected: Value 'BOOL' at "
	               "'attributeDefinitions.2.member.attributeType' failed to satisfy "
	               "constraint: Member must satisfy enum value set: [B, N, S]; Value 'bad "
	               "name!' at 'tableName' failed to satisfy constraint: Member must satisfy "
	               "regular expression pattern: [a-zA-Z0-9_.-]+");

	/* The bounds themselves are fine. */
	long_name[255] = '\0';
	tdef ok;
	tdef_init(&ok, long_name);
	create_ok(&ok.def);
	tdef_init(&ok, "a-.");
	create_ok(&ok.def);
	tdef_init(&ok, "Az09_.-x");
	create_ok(&ok.def);
}
END_TEST

START_TEST(test_key_schema_rules)
{
	tdef t;
	/* Fewer definitions than keys, no index. */
	tdef_init(&t, "Tb1");
	t.def.n_attrs = 1;
	expect_invalid(&t, "Invalid KeySchema: Some index key attribute have no definition");
	/* A key without a definition. */
	tdef_init(&t, "Tb1");
	t.attrs[1] = (st_key_attr){"X", ST_S};
	expect_invalid(&t, "One or more parameter values were invalid: Some index key attributes "
	                   "are not defined in AttributeDefinitions. Keys: [PK, SK], "
	                   "AttributeDefinitions: [PK, X]");
	/* An unused definition, without and with indexes. */
	tdef_init(&t, "Tb1");
	tdef_attr(&t, "X", ST_S);
	expect_invalid(&t, "One or more parameter values were invalid: Number of attributes in "
	                   "KeySchema does not exactly match number of attributes defined in "
	                   "AttributeDefinitions");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "gsi", false, "G", NULL);
	expect_invalid(&t, "One or more parameter values were invalid: Some AttributeDefinitions "
	                   "are not used. AttributeDefinitions: [G, PK, SK, X], keys used: [G, PK, "
	                   "SK]");
	/* Same name for hash and range. */
	tdef_init(&t, "Tb1");
	t.def.key.range.name = "PK";
	t.def.n_attrs = 1;
	expect_invalid(&t, "Both the Hash Key and the Range Key element in the KeySchema have the "
	                   "same name");
	/* Duplicate definitions. */
	tdef_init(&t, "Tb1");
	t.attrs[1] = (st_key_attr){"PK", ST_S};
	t.def.key.range.name = NULL;
	expect_invalid(&t, "Duplicate AttributeName=PK in AttributeDefinitions");
	/* Types. */
	tdef_init(&t, "Tb1");
	t.attrs[0].type = ST_NONE;
	expect_invalid(&t, "1 validation error detected: Value null at "
	                   "'attributeDefinitions.1.member.attributeType' failed to satisfy "
	                   "constraint: Member must satisfy enum value set: [B, N, S]");
	tdef_init(&t, "Tb1");
	t.attrs[0].type = ST_SS;
	expect_invalid(&t, "1 validation error detected: Value 'SS' at "
	                   "'attributeDefinitions.1.member.attributeType' failed to satisfy "
	                   "constraint: Member must satisfy enum value set: [B, N, S]");
	/* Missing hash key; empty attribute name. */
	tdef_init(&t, "Tb1");
	t.def.key.hash.name = NULL;
	t.def.key.range.name = NULL;
	t.def.n_attrs = 0;
	expect_invalid(&t, "1 validation error detected: Value null at 'keySchema' failed to "
	                   "satisfy constraint: Member must not be null");
	tdef_init(&t, "Tb1");
	t.attrs[1].name = "";
	t.def.key.range.name = "";
	expect_invalid(&t,
	               "2 validation errors detected: Value '' at "
	               "'attributeDefinitions.2.member.attributeName' failed to satisfy "
	               "constraint: Member must have length greater than or equal to 1; Value '' "
	               "at 'keySchema.2.member.attributeName' failed to satisfy constraint: "
	               "Member must have length greater than or equal to 1");
}
END_TEST

START_TEST(test_index_rules)
{
	tdef t;
	/* LSI on a table without a sort key. */
	tdef_init(&t, "Tb2");
	t.def.key.range.name = NULL;
	t.attrs[1] = (st_key_attr){"L", ST_S};
	tdef_index(&t, "lsi", true, "PK", "L");
	expect_invalid(&t, "One or more parameter values were invalid: Table KeySchema does not "
	                   "have a range key, which is required when specifying a "
	                   "LocalSecondaryIndex");
	/* LSI without a range key. */
	tdef_init(&t, "Tb2");
	tdef_index(&t, "lsi", true, "PK", NULL);
	expect_invalid(&t, "One or more parameter values were invalid: Index KeySchema does not "
	                   "have a range key for index: lsi");
	/* LSI with another hash key. */
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "L", ST_S);
	tdef_index(&t, "lsi", true, "L", "SK");
	expect_invalid(&t,
	               "One or more parameter values were invalid: Index KeySchema does not "
	               "have the same leading hash key as table KeySchema for index: lsi. index "
	               "hash key: L, table hash key: PK");
	/* Index key not defined (LSIs are checked before GSIs). */
	tdef_init(&t, "Tb2");
	tdef_index(&t, "gsi", false, "G", NULL);
	tdef_index(&t, "lsi", true, "PK", "M");
	expect_invalid(&t, "One or more parameter values were invalid: Some index key attributes "
	                   "are not defined in AttributeDefinitions. Keys: [PK, M], "
	                   "AttributeDefinitions: [PK, SK]");
	tdef_init(&t, "Tb2");
	tdef_index(&t, "gsi", false, "G", "SK");
	expect_invalid(&t, "One or more parameter values were invalid: Some index key attributes "
	                   "are not defined in AttributeDefinitions. Keys: [G, SK], "
	                   "AttributeDefinitions: [PK, SK]");
	/* Hash and range alike in an index. */
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "gsi", false, "G", "G");
	expect_invalid(&t, "Both the Hash Key and the Range Key element in the KeySchema have the "
	                   "same name");
	/* Duplicate names, across kinds too. */
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "idx", false, "G", NULL);
	tdef_index(&t, "idx", true, "PK", "G");
	expect_invalid(&t, "One or more parameter values were invalid: Duplicate index name: idx");
	/* NonKeyAttributes with another projection. */
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	st_index_def *x = tdef_index(&t, "gsi", false, "G", NULL);
	t.include[0] = "a";
	x->include = t.include;
	x->n_include = 1;
	x->projection = ST_PROJ_KEYS_ONLY;
	expect_invalid(&t, "One or more parameter values were invalid: ProjectionType is "
	                   "KEYS_ONLY, but NonKeyAttributes is specified");
	/* Index names and write shards. */
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "ix", false, "G", NULL);
	expect_invalid(&t, "1 validation error detected: Value 'ix' at "
	                   "'globalSecondaryIndexes.1.member.indexName' failed to satisfy "
	                   "constraint: Member must have length greater than or equal to 3");
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "lsi-ok", true, "PK", "G");
	tdef_index(&t, "gsi-ok", false, "G", NULL);
	tdef_index(&t, "l s", true, "PK", "G");
	tdef_index(&t, "gsi2", false, "G", NULL)->write_shards = 0;
	expect_invalid(&t, "2 validation errors detected: Value 'l s' at "
	                   "'localSecondaryIndexes.2.member.indexName' failed to satisfy "
	                   "constraint: Member must satisfy regular expression pattern: "
	                   "[a-zA-Z0-9_.-]+; Value '0' at "
	                   "'globalSecondaryIndexes.2.member.writeShards' failed to satisfy "
	                   "constraint: Member must have value greater than or equal to 1");
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "lsi", true, "PK", "G")->write_shards = 2;
	expect_invalid(&t, "One or more parameter values were invalid: WriteShards can only be "
	                   "specified for a global secondary index: lsi");

	/* Limits: 20 GSIs and 5 LSIs are fine, one more is not. */
	char names[32][8];
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	for (int i = 0; i < 21; i++) {
		snprintf(names[i], sizeof(names[i]), "gsi%02d", i);
		tdef_index(&t, names[i], false, "G", NULL);
	}
	expect_invalid(&t, "One or more parameter values were invalid: GlobalSecondaryIndex count "
	                   "exceeds the per-table limit of 20");
	tdef_init(&t, "Tb2");
	tdef_attr(&t, "G", ST_S);
	for (int i = 0; i < 6; i++) {
		snprintf(names[i], sizeof(names[i]), "lsi%02d", i);
		tdef_index(&t, names[i], true, "PK", "G");
	}
	expect_invalid(&t, "One or more parameter values were invalid: Number of "
	                   "LocalSecondaryIndexes exceeds per-table limit of 5");
	t.def.n_indexes = 5;
	for (int i = 0; i < 20; i++) {
		snprintf(names[6 + i], sizeof(names[6 + i]), "gsi%02d", i);
		tdef_index(&t, names[6 + i], false, "G", "SK");
	}
	create_ok(&t.def);
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Tb2", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.n_indexes, 25);
	for (uint32_t i = 0; i < 25; i++)
		ck_assert_uint_eq(info.def.indexes[i].id, i + 1);
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ListTables                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_list_paging)
{
	const char *order[] = {"c-table", "a-table", "B-table", "b-table", "a.table", "aaa", "zzz"};
	const char *sorted[] = {"B-table", "a-table", "a.table", "aaa",
	                        "b-table", "c-table", "zzz"};
	for (int i = 0; i < 7; i++) {
		tdef t;
		tdef_init(&t, order[i]);
		create_ok(&t.def);
	}
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	const char **names;
	uint32_t n;
	const char *last;
	const char *start = NULL;
	int seen = 0, pages = 0;
	do {
		ck_assert_int_eq(st_table_list(tl_env, start, 3, &a, &names, &n, &last, msg),
		                 SHOAL_OK);
		for (uint32_t i = 0; i < n; i++)
			ck_assert_str_eq(names[i], sorted[seen++]);
		pages++;
		start = last;
	} while (last != NULL);
	ck_assert_int_eq(seen, 7);
	ck_assert_int_eq(pages, 3);

	/* Exactly the remaining count: no LastEvaluatedTableName. */
	ck_assert_int_eq(st_table_list(tl_env, "b-table", 2, &a, &names, &n, &last, msg), SHOAL_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(names[1], "zzz");
	ck_assert_ptr_null(last);
	/* A start that is not a table. */
	ck_assert_int_eq(st_table_list(tl_env, "aab", 100, &a, &names, &n, &last, msg), SHOAL_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(names[0], "b-table");
	ck_assert_ptr_null(last);
	ck_assert_int_eq(st_table_list(tl_env, "zzzz", 100, &a, &names, &n, &last, msg), SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(last);

	ck_assert_int_eq(st_table_list(tl_env, NULL, 0, &a, &names, &n, &last, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "1 validation error detected: Value '0' at 'limit' failed to satisfy "
	                      "constraint: Member must have value greater than or equal to 1");
	ck_assert_int_eq(st_table_list(tl_env, NULL, 101, &a, &names, &n, &last, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg,
	                 "1 validation error detected: Value '101' at 'limit' failed to "
	                 "satisfy constraint: Member must have value less than or equal to 100");
	ck_assert_int_eq(st_table_list(tl_env, "x", 5, &a, &names, &n, &last, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "1 validation error detected: Value 'x' at 'exclusiveStartTableName' "
	                      "failed to satisfy constraint: Member must have length greater than "
	                      "or equal to 3");
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Delete, counters, reopen                                                  */
/* ------------------------------------------------------------------------ */

/* Number of data keys whose first 4 bytes are the table id. */
static size_t data_keys(uint32_t table_id)
{
	MDB_txn *txn;
	ck_assert_int_eq(mdb_txn_begin(tl_env->env, NULL, MDB_RDONLY, &txn), 0);
	MDB_cursor *c;
	ck_assert_int_eq(mdb_cursor_open(txn, tl_env->data, &c), 0);
	MDB_val k, v;
	size_t n = 0;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const uint8_t *p = k.mv_data;
		if (k.mv_size >= 4 && ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		                       (uint32_t)p[2] << 8 | p[3]) == table_id)
			n++;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return n;
}

static void put_simple(const char *table, const char *pk, const char *sk, const char *payload)
{
	tl_put(table, map("PK", S(pk), "SK", N(sk), "data", S(payload), NULL));
}

START_TEST(test_delete_table)
{
	tdef t;
	tdef_init(&t, "Doomed");
	tdef_attr(&t, "G", ST_S);
	tdef_index(&t, "gsi", false, "G", NULL);
	create_ok(&t.def);
	tdef_init(&t, "Kept");
	create_ok(&t.def);
	sh_arena a;
	sh_arena_init(&a);
	for (int i = 0; i < 50; i++) {
		char sk[16];
		snprintf(sk, sizeof(sk), "%d", i);
		put_simple("Doomed", i % 2 ? "p1" : "p2", sk, "x");
		put_simple("Kept", "p1", sk, "y");
	}
	/* Index entries (written directly: this phase maintains none) go too. */
	{
		MDB_txn *txn;
		ck_assert_int_eq(mdb_txn_begin(tl_env->env, NULL, 0, &txn), 0);
		uint8_t kb[8] = {0, 0, 0, 1, 0, 1, 9, 9}, vb[1] = {0};
		MDB_val k = {sizeof(kb), kb}, v = {1, vb};
		ck_assert_int_eq(mdb_put(txn, tl_env->data, &k, &v, 0), 0);
		ck_assert_int_eq(mdb_txn_commit(txn), 0);
	}
	ck_assert_uint_eq(data_keys(1), 51);
	ck_assert_uint_eq(data_keys(2), 50);

	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(drop("Doomed", msg), SHOAL_OK);
	ck_assert_uint_eq(data_keys(1), 0);
	ck_assert_uint_eq(data_keys(2), 50);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Doomed", &a, &info, msg), SHOAL_E_NOT_FOUND);
	ck_assert_int_eq(drop("Doomed", msg), SHOAL_E_NOT_FOUND);
	ck_assert_str_eq(msg, "Requested resource not found: Table: Doomed not found");
	ck_assert_int_eq(st_table_describe(tl_env, "Kept", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 50);

	/* A delete in an aborted transaction leaves everything. */
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete(txn, "Kept", msg), SHOAL_OK);
	st_txn_abort(txn);
	ck_assert_uint_eq(data_keys(2), 50);
	ck_assert_int_eq(st_table_describe(tl_env, "Kept", &a, &info, msg), SHOAL_OK);

	/* The name can be used again, with a new id and no items. */
	tdef_init(&t, "Doomed");
	create_ok(&t.def);
	ck_assert_int_eq(st_table_describe(tl_env, "Doomed", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 3);
	ck_assert_uint_eq(info.item_count, 0);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_counters)
{
	tdef t;
	tdef_init(&t, "Counted");
	create_ok(&t.def);
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	put_simple("Counted", "p", "1", "abc");
	/* PK(2)+"p"(1) + SK(2)+N 1 ((1+1)/2+1 = 2) + data(4)+"abc"(3) = 14 */
	ck_assert_int_eq(st_table_describe(tl_env, "Counted", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 1);
	ck_assert_uint_eq(info.size_bytes, 14);
	put_simple("Counted", "p", "1", "abcdef"); /* overwrite: +3 bytes */
	put_simple("Counted", "q", "2", "");       /* new: 11 bytes */
	ck_assert_int_eq(st_table_describe(tl_env, "Counted", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 2);
	ck_assert_uint_eq(info.size_bytes, 17 + 11);

	/* The counters live in the write transaction: an abort undoes them. */
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_count(txn, "Counted", 5, 100, msg), SHOAL_OK);
	st_txn_abort(txn);
	ck_assert_int_eq(st_table_describe(tl_env, "Counted", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 2);
	/* They never go below zero. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_count(txn, "Counted", -5, -1000, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(tl_env, "Counted", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 0);
	ck_assert_uint_eq(info.size_bytes, 0);
	/* Counting a table that is gone by the commit (dropped after its
	 * writes) counts nothing and creates nothing. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_count(txn, "Missing", 1, 1, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(tl_env, "Missing", &a, &info, msg), SHOAL_E_NOT_FOUND);

	/* One transaction's writes are counted once, at commit, and the
	 * catalog changes of the same transaction see and keep them: a
	 * describe inside it, a drop, a create of the same name. */
	tdef t2;
	tdef_init(&t2, "Churn");
	create_ok(&t2.def);
	st_write_result res;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	for (int i = 0; i < 3; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "%d", i);
		st_put_req r = {.table = "Churn", .item = map("PK", S("p"), "SK", N(sk), NULL)};
		ck_assert_int_eq(st_put(txn, &r, &a, &res, msg), SHOAL_OK);
	}
	ck_assert_int_eq(st_txn_table_describe(txn, "Churn", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 3);
	st_put_req more = {.table = "Churn", .item = map("PK", S("p"), "SK", N("9"), NULL)};
	ck_assert_int_eq(st_put(txn, &more, &a, &res, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete(txn, "Churn", msg), SHOAL_OK);
	ck_assert_int_eq(st_put(txn, &more, &a, &res, msg), SHOAL_E_NOT_FOUND);
	ck_assert_int_eq(st_table_create(txn, &t2.def, msg), SHOAL_OK);
	ck_assert_int_eq(st_put(txn, &more, &a, &res, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(tl_env, "Churn", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, 1);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_reopen)
{
	tdef t;
	tdef_init(&t, "Persist");
	tdef_attr(&t, "G", ST_N);
	tdef_index(&t, "gsi", false, "G", "SK");
	create_ok(&t.def);
	tdef_init(&t, "Second");
	create_ok(&t.def);
	sh_arena a;
	sh_arena_init(&a);
	put_simple("Persist", "k", "7", "v");
	reopen();

	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Persist", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 1);
	ck_assert_uint_eq(info.item_count, 1);
	ck_assert_uint_eq(info.def.n_indexes, 1);
	ck_assert_int_eq(info.def.indexes[0].key.hash.type, ST_N);
	const char **names;
	uint32_t n;
	const char *last;
	ck_assert_int_eq(st_table_list(tl_env, NULL, 10, &a, &names, &n, &last, msg), SHOAL_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(names[0], "Persist");
	ck_assert_str_eq(names[1], "Second");
	ck_assert_uint_eq(data_keys(1), 1);
	/* next_table_id survived. */
	tdef_init(&t, "Third");
	create_ok(&t.def);
	ck_assert_int_eq(st_table_describe(tl_env, "Third", &a, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.def.id, 3);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_applied_index)
{
	char msg[SH_ERRMSG_SIZE];
	ck_assert_uint_eq(st_env_applied(tl_env), 0);
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	tdef t;
	tdef_init(&t, "Applied");
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_OK);
	st_txn_set_applied(txn, 5);
	ck_assert_uint_eq(st_env_applied(tl_env), 0); /* not before the commit */
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_uint_eq(st_env_applied(tl_env), 5);

	/* Aborted: neither the data nor the index. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	tdef_init(&t, "Aborted");
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_OK);
	st_txn_set_applied(txn, 9);
	st_txn_abort(txn);
	ck_assert_uint_eq(st_env_applied(tl_env), 5);

	/* A failed commit: neither. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_OK);
	st_txn_set_applied(txn, 10);
	sh_fault_arm(SH_FAULT_COMMIT, 1, false);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_E_IO);
	ck_assert_str_eq(msg, "mdb_txn_commit: injected fault");
	sh_fault_reset();
	ck_assert_uint_eq(st_env_applied(tl_env), 5);

	/* A commit without set_applied keeps the last index. */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_uint_eq(st_env_applied(tl_env), 5);

	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	st_txn_set_applied(txn, 0x0102030405060708ull);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	reopen();
	ck_assert_uint_eq(st_env_applied(tl_env), 0x0102030405060708ull);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Applied", &a, &info, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(tl_env, "Aborted", &a, &info, msg), SHOAL_OK);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_poisoned_txn)
{
	char msg[SH_ERRMSG_SIZE];
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	tdef t;
	tdef_init(&t, "Before");
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_poison(txn, SHOAL_E_FULL, "mdb_put(data): full"), SHOAL_E_FULL);
	/* The first error sticks. */
	ck_assert_int_eq(st_txn_poison(txn, SHOAL_E_IO, "other"), SHOAL_E_FULL);
	tdef_init(&t, "After");
	ck_assert_int_eq(st_table_create(txn, &t.def, msg), SHOAL_E_FULL);
	ck_assert_str_eq(msg, "mdb_put(data): full");
	ck_assert_int_eq(st_table_delete(txn, "Before", msg), SHOAL_E_FULL);
	st_txn_set_applied(txn, 3);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_E_FULL);
	ck_assert_str_eq(msg, "mdb_put(data): full");
	ck_assert_uint_eq(st_env_applied(tl_env), 0);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Before", &a, &info, msg), SHOAL_E_NOT_FOUND);
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Damaged records and environments                                          */
/* ------------------------------------------------------------------------ */

static void raw_put(MDB_dbi dbi, const void *key, size_t klen, const void *val, size_t vlen)
{
	MDB_txn *txn;
	ck_assert_int_eq(mdb_txn_begin(tl_env->env, NULL, 0, &txn), 0);
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
}

START_TEST(test_corrupt_records)
{
	tdef t;
	tdef_init(&t, "Victim");
	tdef_attr(&t, "G", ST_S);
	st_index_def *x = tdef_index(&t, "gsi", false, "G", "SK");
	x->projection = ST_PROJ_INCLUDE;
	t.include[0] = "inc";
	x->include = t.include;
	x->n_include = 1;
	create_ok(&t.def);

	uint8_t good[1024];
	size_t len;
	{
		MDB_txn *txn;
		ck_assert_int_eq(mdb_txn_begin(tl_env->env, NULL, MDB_RDONLY, &txn), 0);
		MDB_val k = {6, "Victim"}, v;
		ck_assert_int_eq(mdb_get(txn, tl_env->catalog, &k, &v), 0);
		ck_assert_uint_lt(v.mv_size, sizeof(good));
		len = v.mv_size;
		memcpy(good, v.mv_data, len);
		mdb_txn_abort(txn);
	}
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_table_info info;
	/* Every truncation is detected. */
	for (size_t n = 0; n < len; n++) {
		raw_put(tl_env->catalog, "Victim", 6, good, n);
		int rc = st_table_describe(tl_env, "Victim", &a, &info, msg);
		ck_assert_msg(rc == SHOAL_E_INTERNAL, "truncated to %zu: %s", n,
		              shoal_err_name(rc));
		ck_assert_msg(strncmp(msg, "corrupt catalog record for table Victim", 39) == 0,
		              "%s", msg);
		sh_arena_reset(&a);
	}
	/* Trailing garbage too. */
	uint8_t longer[1100];
	memcpy(longer, good, len);
	longer[len] = 0;
	raw_put(tl_env->catalog, "Victim", 6, longer, len + 1);
	ck_assert_int_eq(st_table_describe(tl_env, "Victim", &a, &info, msg), SHOAL_E_INTERNAL);
	/* Random damage never crashes: either it decodes or it is refused. */
	uint64_t seed = tl_seed();
	for (int i = 0; i < 500; i++) {
		memcpy(longer, good, len);
		int flips = 1 + (int)(tl_rand(&seed) % 4);
		for (int f = 0; f < flips; f++)
			longer[tl_rand(&seed) % len] = (uint8_t)tl_rand(&seed);
		raw_put(tl_env->catalog, "Victim", 6, longer, len);
		int rc = st_table_describe(tl_env, "Victim", &a, &info, msg);
		ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_INTERNAL, "%s", shoal_err_name(rc));
		sh_arena_reset(&a);
	}
	/* A damaged record also fails the writes that need it, cleanly. */
	raw_put(tl_env->catalog, "Victim", 6, good, 3);
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_count(txn, "Victim", 1, 1, msg), SHOAL_OK); /* kept ... */
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_E_INTERNAL);          /* ... refused */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete(txn, "Victim", msg), SHOAL_E_INTERNAL);
	st_txn_abort(txn);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_format_version)
{
	uint8_t v2[4] = {0, 0, 0, 2};
	raw_put(tl_env->meta, "format", 6, v2, 4);
	st_env_close(tl_env);
	tl_env = NULL;
	char msg[SH_ERRMSG_SIZE];
	st_env *e2 = NULL;
	ck_assert_int_eq(st_env_open(tl_dir, NULL, &e2, msg), SHOAL_E_INTERNAL);
	ck_assert_ptr_null(e2);
	ck_assert_ptr_nonnull(strstr(msg, "unsupported storage format version 2"));
	/* A directory that does not exist. */
	ck_assert_int_eq(st_env_open("/nonexistent/shoal/dir", NULL, &e2, msg), SHOAL_E_IO);
	ck_assert_ptr_nonnull(strstr(msg, "mdb_env_open(/nonexistent/shoal/dir)"));
	/* Out of memory opening is reported, not fatal. */
	sh_fault_arm(SH_FAULT_ALLOC, 1, false);
	ck_assert_int_eq(st_env_open(tl_dir, NULL, &e2, msg), SHOAL_E_NOMEM);
	sh_fault_reset();
	/* teardown closes a NULL tl_env. */
}
END_TEST

START_TEST(test_lmdb_err)
{
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_lmdb_err(MDB_MAP_FULL, "mdb_put(data)", msg), SHOAL_E_FULL);
	ck_assert_str_eq(msg, "mdb_put(data): MDB_MAP_FULL: Environment mapsize limit reached");
	ck_assert_int_eq(st_lmdb_err(ENOMEM, "x", msg), SHOAL_E_NOMEM);
	ck_assert_int_eq(st_lmdb_err(MDB_CORRUPTED, "x", msg), SHOAL_E_IO);
	ck_assert_int_eq(st_lmdb_err(EIO, "x", msg), SHOAL_E_IO);
}
END_TEST

START_TEST(test_sync_and_options)
{
	char msg[SH_ERRMSG_SIZE];
	st_env_close(tl_env);
	st_env_options o = {.map_size = 1 << 24, .nosync = true, .page_bytes = 1000};
	ck_assert_int_eq(st_env_open(tl_dir, &o, &tl_env, msg), SHOAL_OK);
	ck_assert(tl_env->nosync);
	ck_assert_uint_eq(tl_env->page_bytes, 1000);
	MDB_envinfo info;
	mdb_env_info(tl_env->env, &info);
	ck_assert_uint_eq(info.me_mapsize, 1 << 24);
	unsigned flags;
	mdb_env_get_flags(tl_env->env, &flags);
	ck_assert(flags & MDB_NOSYNC);
	ck_assert(flags & MDB_NOTLS);
	tdef t;
	tdef_init(&t, "Synced");
	create_ok(&t.def);
	ck_assert_int_eq(st_env_sync(tl_env, msg), SHOAL_OK);
	st_env_close(tl_env);
	ck_assert_int_eq(st_env_open(tl_dir, NULL, &tl_env, msg), SHOAL_OK);
	ck_assert_uint_eq(tl_env->page_bytes, ST_MAX_PAGE_BYTES);
	mdb_env_info(tl_env->env, &info);
	ck_assert_uint_eq(info.me_mapsize, 64ull << 30);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info ti;
	ck_assert_int_eq(st_table_describe(tl_env, "Synced", &a, &ti, msg), SHOAL_OK);
	sh_arena_fini(&a);
}
END_TEST

/* Bytes of disk allocated to the environment's data file. */
static uint64_t data_file_blocks(void)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/data.mdb", tl_dir);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

static uint64_t used_bytes(void)
{
	MDB_envinfo info;
	MDB_stat st;
	mdb_env_info(tl_env->env, &info);
	mdb_env_stat(tl_env->env, &st);
	return ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
}

/* With nosync the map is writable and its file blocks are allocated ahead
 * of LMDB's last page, so a full disk fails a transaction at its start
 * (SHOAL_E_FULL) instead of raising SIGBUS inside it. */
START_TEST(test_writemap_reserve)
{
	char msg[SH_ERRMSG_SIZE];
	st_env_close(tl_env);
	st_env_options o = {.nosync = true};
	ck_assert_int_eq(st_env_open(tl_dir, &o, &tl_env, msg), SHOAL_OK);
	if (!tl_env->writemap) {
		/* The file system cannot preallocate: plain writes instead. */
		unsigned flags;
		mdb_env_get_flags(tl_env->env, &flags);
		ck_assert(!(flags & MDB_WRITEMAP));
		return;
	}
	unsigned flags;
	mdb_env_get_flags(tl_env->env, &flags);
	ck_assert(flags & MDB_WRITEMAP);
	ck_assert_uint_ge(data_file_blocks(), used_bytes() + (4u << 20));
	/* ... and not much more: a few MiB past the data. */
	ck_assert_uint_le(data_file_blocks(), used_bytes() + (9u << 20));

	/* A caller expecting a big transaction reserves for it. */
	ck_assert_int_eq(st_env_reserve(tl_env, 100u << 20, msg), SHOAL_OK);
	ck_assert_uint_ge(data_file_blocks(), used_bytes() + (100u << 20));
	ck_assert_uint_ge(tl_env->reserved, used_bytes() + (100u << 20));

	/* Every write transaction keeps the headroom as the data grows. */
	tdef t;
	tdef_init(&t, "Grown");
	create_ok(&t.def);
	st_value *item = tl_map("PK", tl_s("k"), "SK", tl_ni(0), "v", tl_sn(60000, 'x'), NULL);
	sh_arena a;
	sh_arena_init(&a);
	for (int i = 0; i < 3000; i++) {
		st_txn *txn;
		ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
		ck_assert_uint_ge(data_file_blocks(), used_bytes() + (4u << 20));
		st_value *sk = (st_value *)tl_attr(item, "SK");
		*sk = *tl_ni(i);
		st_put_req r = {.table = "Grown", .item = item};
		st_write_result res;
		ck_assert_int_eq(st_put(txn, &r, &a, &res, msg), SHOAL_OK);
		ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
		sh_arena_reset(&a);
	}
	ck_assert_uint_gt(used_bytes(), 150u << 20); /* past the first reservations */
	ck_assert_uint_ge(data_file_blocks(), used_bytes() + (4u << 20));

	/* A write reserves what it may add before it writes, on top of what the
	 * transaction's earlier writes reserved: a 300 KB item in a table with
	 * three GSIs, ten times in one transaction, may add 10 x 7 copies. */
	tdef g;
	tdef_init(&g, "Indexed");
	tdef_attr(&g, "a", ST_S);
	tdef_index(&g, "gsi1", false, "a", NULL);
	tdef_index(&g, "gsi2", false, "a", NULL);
	tdef_index(&g, "gsi3", false, "a", NULL);
	create_ok(&g.def);
	st_value *big =
	    tl_map("PK", tl_s("k"), "SK", tl_ni(0), "a", tl_s("x"), "v", tl_sn(300000, 'y'), NULL);
	st_txn *txn;
	uint64_t used0 = used_bytes();
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	for (int i = 0; i < 10; i++) {
		*(st_value *)tl_attr(big, "SK") = *tl_ni(i);
		st_put_req r = {.table = "Indexed", .item = big};
		st_write_result res;
		ck_assert_int_eq(st_put(txn, &r, &a, &res, msg), SHOAL_OK);
		sh_arena_reset(&a);
	}
	ck_assert_uint_ge(data_file_blocks(), used0 + 10 * 7 * 2 * st_item_size(big));
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	sh_arena_fini(&a);

	/* A reservation the map cannot hold is capped at the map's end. */
	st_env_close(tl_env);
	tl_rmtree(tl_dir);
	snprintf(tl_dir, sizeof(tl_dir), "%s", tl_tmpdir("catalog-small"));
	st_env_options small = {.nosync = true, .map_size = 8u << 20};
	ck_assert_int_eq(st_env_open(tl_dir, &small, &tl_env, msg), SHOAL_OK);
	ck_assert_int_eq(st_env_reserve(tl_env, 1u << 30, msg), SHOAL_OK);
	ck_assert_uint_le(tl_env->reserved, 8u << 20);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tags, deletion protection, table class                                    */
/* ------------------------------------------------------------------------ */

static int update(const st_table_update_req *u, char *msg)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	int rc = st_table_update(txn, u, msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, msg);
}

static st_table_def described_def(const char *name)
{
	st_table_info info;
	char msg[SH_ERRMSG_SIZE];
	int rc = st_table_describe(tl_env, name, &tl_arena, &info, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", msg);
	return info.def;
}

static const char *tag_value(const st_table_def *d, const char *key)
{
	for (uint32_t i = 0; i < d->n_tags; i++)
		if (strcmp(d->tags[i].key, key) == 0)
			return d->tags[i].value;
	return NULL;
}

START_TEST(test_tags_and_protection)
{
	char msg[SH_ERRMSG_SIZE];
	tdef t;
	tdef_init(&t, "Tagged");
	st_tag tags[] = {{"team", "edu"}, {"cost center", "a+b=c:d/e_f.g-h@i"}, {"empty", ""}};
	t.def.tags = tags;
	t.def.n_tags = 3;
	t.def.deletion_protection = true;
	t.def.table_class = ST_CLASS_STANDARD_IA;
	/* With a stream too: its extension follows the metadata in the record,
	 * and two past streams theirs. */
	t.def.stream = (st_stream_spec){.enabled = true,
	                                .view = ST_VIEW_NEW_AND_OLD_IMAGES,
	                                .label_ms = 1764100000000,
	                                .changed_ms = 1764100000000,
	                                .past = {{1764000000000, 1764050000000, ST_VIEW_KEYS_ONLY},
	                                         {1763000000000, 1763050000000, ST_VIEW_NEW_IMAGE}},
	                                .n_past = 2};
	create_ok(&t.def);

	/* Kept across a reopen of the environment (the record, not a cache). */
	reopen();
	st_table_def d = described_def("Tagged");
	ck_assert_uint_eq(d.n_tags, 3);
	ck_assert_str_eq(tag_value(&d, "cost center"), "a+b=c:d/e_f.g-h@i");
	ck_assert_str_eq(tag_value(&d, "empty"), "");
	ck_assert(d.deletion_protection);
	ck_assert_int_eq(d.table_class, ST_CLASS_STANDARD_IA);
	ck_assert(d.stream.enabled);
	ck_assert_int_eq(d.stream.view, ST_VIEW_NEW_AND_OLD_IMAGES);
	ck_assert_int_eq(d.stream.label_ms, 1764100000000);
	ck_assert_uint_eq(d.stream.n_past, 2);
	ck_assert_int_eq(d.stream.past[0].label_ms, 1764000000000);
	ck_assert_int_eq(d.stream.past[0].ended_ms, 1764050000000);
	ck_assert_int_eq(d.stream.past[0].view, ST_VIEW_KEYS_ONLY);
	ck_assert_int_eq(d.stream.past[1].label_ms, 1763000000000);
	ck_assert_int_eq(d.stream.past[1].view, ST_VIEW_NEW_IMAGE);
	bool en;
	st_stream_view view;
	ck_assert(st_stream_spec_find(&d.stream, 1763000000000, 1763050000000, 1, &en, &view));
	ck_assert(!en);
	ck_assert_int_eq(view, ST_VIEW_NEW_IMAGE);
	ck_assert(!st_stream_spec_find(&d.stream, 1763000000000, 1763050000002, 1, &en, &view));
	ck_assert(st_stream_spec_find(&d.stream, 1764100000000, 1800000000000, 1, &en, &view));
	ck_assert(en);
	ck_assert(!st_stream_spec_find(&d.stream, 1764100000001, 0, 1, &en, &view));

	/* Protected: group 0's delete refuses it and changes nothing. */
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete_unprotected(txn, "Tagged", msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Resource cannot be deleted as it is currently protected against "
	                      "deletion. Disable deletion protection first.");
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert(described_def("Tagged").deletion_protection);

	/* Tag: a new key, a changed value; untag: one present, one absent. */
	st_tag more[] = {{"team", "ops"}, {"new", "1"}};
	st_table_update_req u = {.name = "Tagged", .tag_set = more, .n_tag_set = 2};
	ck_assert_int_eq(update(&u, msg), SHOAL_OK);
	const char *gone[] = {"empty", "never-there"};
	u = (st_table_update_req){.name = "Tagged", .tag_remove = gone, .n_tag_remove = 2};
	ck_assert_int_eq(update(&u, msg), SHOAL_OK);
	d = described_def("Tagged");
	ck_assert_uint_eq(d.n_tags, 3);
	ck_assert_str_eq(tag_value(&d, "team"), "ops");
	ck_assert_str_eq(tag_value(&d, "new"), "1");
	ck_assert_ptr_null(tag_value(&d, "empty"));
	ck_assert(d.deletion_protection); /* untouched by tagging */

	/* 50 tags at most, counting those the table has: 3 + 48 is refused and
	 * leaves the tags as they were, 3 + 47 is accepted. */
	st_tag many[48];
	char keys[48][8];
	for (int i = 0; i < 48; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		many[i] = (st_tag){keys[i], "v"};
	}
	u = (st_table_update_req){.name = "Tagged", .tag_set = many, .n_tag_set = 48};
	ck_assert_int_eq(update(&u, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: The table would have 51 "
	                      "tags, more than the tag limit of 50");
	ck_assert_uint_eq(described_def("Tagged").n_tags, 3);
	u.n_tag_set = 47;
	ck_assert_int_eq(update(&u, msg), SHOAL_OK);
	ck_assert_uint_eq(described_def("Tagged").n_tags, 50);

	/* Invalid tags, each with its reason. */
	struct {
		st_tag tag;
		const char *want;
	} bad[] = {
	    {{"aws:owner", "x"},
	     "One or more parameter values were invalid: Tag key aws:owner: the prefix aws: is "
	     "reserved for AWS-assigned tags"},
	    {{"ok", "#!%"},
	     "One or more parameter values were invalid: The value of tag ok has a character that "
	     "is not allowed (allowed: letters, digits, white space and + - = . _ : / @)"},
	    {{"", "x"},
	     "1 validation error detected: Value '' at 'tags.1.member.key' failed to satisfy "
	     "constraint: Member must have length greater than or equal to 1"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		u = (st_table_update_req){.name = "Tagged", .tag_set = &bad[i].tag, .n_tag_set = 1};
		ck_assert_int_eq(update(&u, msg), SHOAL_E_VALIDATION);
		ck_assert_str_eq(msg, bad[i].want);
	}
	char key129[130], val257[258];
	memset(key129, 'k', 129);
	key129[129] = '\0';
	memset(val257, 'v', 257);
	val257[257] = '\0';
	st_tag longk = {key129, "x"}, longv = {"x", val257}, atmax = {key129 + 1, val257 + 1};
	ck_assert_int_eq(st_tags_check(&longk, 1, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "less than or equal to 128"));
	ck_assert_int_eq(st_tags_check(&longv, 1, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "less than or equal to 256"));
	ck_assert_int_eq(st_tags_check(&atmax, 1, msg), SHOAL_OK);
	/* Characters, not bytes: 128 two-byte letters are a valid key. */
	char wide[257];
	for (int i = 0; i < 128; i++)
		memcpy(wide + 2 * i, "\xd0\x96", 2);
	wide[256] = '\0';
	st_tag w = {wide, "x"};
	ck_assert_int_eq(st_tags_check(&w, 1, msg), SHOAL_OK);
	st_tag dup[] = {{"a", "1"}, {"a", "2"}};
	ck_assert_int_eq(st_tags_check(dup, 2, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Duplicate tag key: a");

	/* CreateTable refuses invalid tags: no table. */
	tdef t2;
	tdef_init(&t2, "TooMany");
	st_tag many51[51];
	char k51[51][8];
	for (int i = 0; i < 51; i++) {
		snprintf(k51[i], sizeof(k51[i]), "k%d", i);
		many51[i] = (st_tag){k51[i], ""};
	}
	t2.def.tags = many51;
	t2.def.n_tags = 51;
	ck_assert_int_eq(create(&t2.def, msg), SHOAL_E_VALIDATION);
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "TooMany", &tl_arena, &info, msg),
	                 SHOAL_E_NOT_FOUND);

	/* TableClass: its change is dated with the transaction's (replicated)
	 * time; naming the class it has already changes nothing. */
	ck_assert_int_eq(described_def("Tagged").class_changed_ms, 0);
	u = (st_table_update_req){
	    .name = "Tagged", .set_table_class = true, .table_class = ST_CLASS_STANDARD};
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	st_txn_set_time(txn, 1700000123456);
	ck_assert_int_eq(st_table_update(txn, &u, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(described_def("Tagged").class_changed_ms, 1700000123456);
	ck_assert_int_eq(described_def("Tagged").table_class, ST_CLASS_STANDARD);
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	st_txn_set_time(txn, 1700000999999);
	ck_assert_int_eq(st_table_update(txn, &u, msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(described_def("Tagged").class_changed_ms, 1700000123456);

	/* Protection off (UpdateTable), then the delete goes through. */
	u = (st_table_update_req){
	    .name = "Tagged", .set_deletion_protection = true, .deletion_protection = false};
	ck_assert_int_eq(update(&u, msg), SHOAL_OK);
	ck_assert_uint_eq(described_def("Tagged").n_tags, 50); /* untouched */
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete_unprotected(txn, "Tagged", msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	ck_assert_int_eq(st_table_describe(tl_env, "Tagged", &tl_arena, &info, msg),
	                 SHOAL_E_NOT_FOUND);
}
END_TEST

static Suite *catalog_suite(void)
{
	return tl_suite("catalog", setup, tl_store_close, 0,
	                TL_TESTS(test_create_describe, test_create_exists, test_explicit_ids,
	                         test_table_name_rules, test_key_schema_rules, test_index_rules,
	                         test_list_paging, test_delete_table, test_counters, test_reopen,
	                         test_applied_index, test_poisoned_txn, test_corrupt_records,
	                         test_format_version, test_lmdb_err, test_sync_and_options,
	                         test_writemap_reserve, test_tags_and_protection));
}

TL_MAIN(catalog_suite)
