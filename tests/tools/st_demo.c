/*
 * st_demo -- the storage engine on the seed 002 edtech-platform table.
 *
 * Creates the table in a fresh LMDB environment, loads the items of
 * deploy/demo/edtech-items.json (a BatchWriteItem request in DynamoDB JSON),
 * and runs the access patterns the seed document lists (AP1, AP2, AP5, AP6,
 * AP7), then a conditional enrollment (idempotent put) and an atomic counter,
 * printing each request and its result the way `aws dynamodb` prints them.
 * AP3/AP4 need GSI1, which arrives with secondary indexes (issue 4).
 *
 * Usage: st_demo ITEMS.json [DIR]   (DIR: keep the environment there)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

#define TABLE "edtech-platform"

static sh_arena arena;
static char msg[SH_ERRMSG_SIZE];

/* Prints one item as compact DynamoDB JSON on one line. */
static void print_item(const char *indent, const st_value *item, const char *sep)
{
	json_t *j = NULL;
	if (wire_item_to_json(item, &j, msg) != 0) {
		fprintf(stderr, "st_demo: %s\n", msg);
		exit(1);
	}
	char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("%s%s%s\n", indent, text ? text : "?", sep);
	free(text);
	json_decref(j);
}

/* Prints a result the way the CLI shapes it, one item per line. */
static void print_json(const char *field, const st_value *v, const st_page *page)
{
	if (page == NULL) {
		printf("{\"%s\":\n", field);
		if (v != NULL)
			print_item("    ", v, "");
		printf("}\n");
		return;
	}
	printf("{\"Items\": [\n");
	for (uint32_t i = 0; i < page->count; i++)
		print_item("    ", &page->items[i], i + 1 < page->count ? "," : "");
	printf("], \"Count\": %u, \"ScannedCount\": %u", page->count, page->scanned);
	if (page->last_evaluated_key != NULL) {
		printf(", \"LastEvaluatedKey\":\n");
		print_item("    ", page->last_evaluated_key, "");
	}
	printf("}\n");
}

static void print_error(const char *op, int rc)
{
	printf("An error occurred (%s) when calling the %s operation: %s\n",
	       shoal_exception_name(rc), op, msg);
}

static st_value *values(const char *json)
{
	st_value *v = sh_arena_alloc(&arena, sizeof(*v));
	if (v == NULL || wire_item_from_text(&arena, json, strlen(json), v, msg) != 0) {
		fprintf(stderr, "st_demo: bad demo values %s: %s\n", json, msg);
		exit(1);
	}
	return v;
}

static void heading(const char *title, const char *cli)
{
	printf("\n== %s\n$ %s\n", title, cli);
}

static void query(st_env *env, const char *title, const char *kce, const char *vals,
                  const char *filter)
{
	char cli[1024];
	snprintf(cli, sizeof(cli),
	         "shoal query --table-name " TABLE " --key-condition-expression \"%s\"%s%s%s "
	         "--expression-attribute-values '%s'",
	         kce, filter ? " --filter-expression \"" : "", filter ? filter : "",
	         filter ? "\"" : "", vals);
	heading(title, cli);
	st_query_req req = {.table = TABLE,
	                    .key_condition = kce,
	                    .filter = filter,
	                    .attrs = {.values = values(vals)},
	                    .forward = true};
	st_page page;
	int rc = st_query(env, &req, &arena, &page, msg);
	if (rc != 0)
		print_error("Query", rc);
	else
		print_json(NULL, NULL, &page);
}

static void enroll(st_env *env, const char *student, const char *course)
{
	char item[1024];
	snprintf(item, sizeof(item),
	         "{\"PK\":{\"S\":\"STUDENT#%s\"},\"SK\":{\"S\":\"ENROLLMENT#%s\"},"
	         "\"GSI1PK\":{\"S\":\"COURSE#%s\"},\"GSI1SK\":{\"S\":\"STUDENT#%s\"},"
	         "\"entity_type\":{\"S\":\"ENROLLMENT\"},\"progress\":{\"N\":\"0\"}}",
	         student, course, course, student);
	char cli[1400];
	snprintf(cli, sizeof(cli),
	         "shoal put-item --table-name " TABLE " --item '%s' "
	         "--condition-expression \"attribute_not_exists(PK)\"",
	         item);
	heading("Enroll a student, idempotently (conditional put)", cli);
	st_put_req req = {
	    .table = TABLE, .item = values(item), .condition = "attribute_not_exists(PK)"};
	st_write_result res;
	int rc = st_put_item(env, &req, &arena, &res, msg);
	if (rc != 0)
		print_error("PutItem", rc);
	else
		printf("(ok: enrolled %s in %s)\n", student, course);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: st_demo ITEMS.json [DIR]\n");
		return 2;
	}
	sh_arena_init(&arena);
	const char *dir = argc > 2 ? argv[2] : tl_tmpdir("demo");
	char dirbuf[4096];
	snprintf(dirbuf, sizeof(dirbuf), "%s", dir);
	st_env *env;
	int rc = st_env_open(dirbuf, NULL, &env, msg);
	if (rc != 0) {
		fprintf(stderr, "st_demo: %s\n", msg);
		return 1;
	}

	/* The table of seed 002, with its overloaded GSI1 declared. */
	st_key_attr attrs[] = {{"PK", ST_S}, {"SK", ST_S}, {"GSI1PK", ST_S}, {"GSI1SK", ST_S}};
	st_index_def gsi1 = {.name = "GSI1",
	                     .key = {.hash = {"GSI1PK", ST_S}, .range = {"GSI1SK", ST_S}},
	                     .projection = ST_PROJ_ALL,
	                     .write_shards = 1};
	st_table_def def = {.name = TABLE,
	                    .key = {.hash = {"PK", ST_S}, .range = {"SK", ST_S}},
	                    .attrs = attrs,
	                    .n_attrs = 4,
	                    .indexes = &gsi1,
	                    .n_indexes = 1};
	st_txn *txn;
	if ((rc = st_txn_begin(env, &txn, msg)) != 0 ||
	    (rc = st_table_create(txn, &def, msg)) != 0 || (rc = st_txn_commit(txn, msg)) != 0) {
		fprintf(stderr, "st_demo: create table: %s\n", msg);
		return 1;
	}
	printf("Created table %s (PK, SK; GSI1 on GSI1PK, GSI1SK) in %s\n", TABLE, dirbuf);

	/* Load the items: a BatchWriteItem request body. */
	json_error_t jerr;
	json_t *doc = json_load_file(argv[1], 0, &jerr);
	json_t *reqs = doc ? json_object_get(doc, TABLE) : NULL;
	if (!json_is_array(reqs)) {
		fprintf(stderr, "st_demo: %s: %s\n", argv[1],
		        doc ? "no " TABLE " array" : jerr.text);
		return 1;
	}
	size_t i;
	json_t *r;
	json_array_foreach(reqs, i, r)
	{
		st_value item;
		const json_t *ji = json_object_get(json_object_get(r, "PutRequest"), "Item");
		if ((rc = wire_item_from_json(&arena, ji, &item, msg)) != 0) {
			fprintf(stderr, "st_demo: item %zu: %s\n", i, msg);
			return 1;
		}
		st_put_req req = {.table = TABLE, .item = &item};
		st_write_result res;
		if ((rc = st_put_item(env, &req, &arena, &res, msg)) != 0) {
			print_error("PutItem", rc);
			return 1;
		}
	}
	json_decref(doc);
	st_table_info info;
	if (st_table_describe(env, TABLE, &arena, &info, msg) == 0)
		printf("Loaded %llu items (%llu bytes by DynamoDB's size rules) from %s\n",
		       (unsigned long long)info.item_count, (unsigned long long)info.size_bytes,
		       argv[1]);

	heading("AP1: profile of student s1 (GetItem)",
	        "shoal get-item --table-name " TABLE
	        " --key '{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"PROFILE\"}}'");
	st_get_req get = {.table = TABLE,
	                  .key =
	                      values("{\"PK\":{\"S\":\"STUDENT#s1\"},\"SK\":{\"S\":\"PROFILE\"}}")};
	st_value *item;
	if ((rc = st_get_item(env, &get, &arena, &item, msg)) != 0)
		print_error("GetItem", rc);
	else
		print_json("Item", item, NULL);

	query(env, "AP2: every course student s1 is enrolled in",
	      "PK = :pk AND begins_with(SK, :prefix)",
	      "{\":pk\":{\"S\":\"STUDENT#s1\"},\":prefix\":{\"S\":\"ENROLLMENT#\"}}", NULL);
	query(env, "AP5: structure of course c10 (modules and lessons, in order)",
	      "PK = :pk AND begins_with(SK, :prefix)",
	      "{\":pk\":{\"S\":\"COURSE#c10\"},\":prefix\":{\"S\":\"MODULE#\"}}", NULL);
	query(env, "AP6: only the modules of course c10 (lessons filtered out)",
	      "PK = :pk AND begins_with(SK, :prefix)",
	      "{\":pk\":{\"S\":\"COURSE#c10\"},\":prefix\":{\"S\":\"MODULE#\"}}",
	      "attribute_not_exists(lesson_id)");
	query(env, "AP7: lessons of module m1 of course c10",
	      "PK = :pk AND begins_with(SK, :prefix)",
	      "{\":pk\":{\"S\":\"COURSE#c10\"},\":prefix\":{\"S\":\"MODULE#m1#LESSON#\"}}", NULL);

	enroll(env, "s2", "c20");
	enroll(env, "s2", "c20");

	heading("Record progress atomically (UpdateItem ADD, ReturnValues UPDATED_NEW)",
	        "shoal update-item --table-name " TABLE
	        " --key '{\"PK\":{\"S\":\"STUDENT#s2\"},\"SK\":{\"S\":\"ENROLLMENT#c20\"}}'"
	        " --update-expression \"ADD progress :d SET last_lesson = :l\""
	        " --expression-attribute-values '{\":d\":{\"N\":\"15\"},\":l\":{\"S\":\"l1\"}}'"
	        " --return-values UPDATED_NEW");
	st_update_req upd = {
	    .table = TABLE,
	    .key = values("{\"PK\":{\"S\":\"STUDENT#s2\"},\"SK\":{\"S\":\"ENROLLMENT#c20\"}}"),
	    .update = "ADD progress :d SET last_lesson = :l",
	    .attrs = {.values = values("{\":d\":{\"N\":\"15\"},\":l\":{\"S\":\"l1\"}}")},
	    .return_values = ST_RV_UPDATED_NEW};
	st_write_result res;
	if ((rc = st_update_item(env, &upd, &arena, &res, msg)) != 0)
		print_error("UpdateItem", rc);
	else
		print_json("Attributes", res.attributes, NULL);

	heading("A mistake gets DynamoDB's error (reserved word used bare)",
	        "shoal query --table-name " TABLE
	        " --key-condition-expression \"PK = :pk\" --filter-expression \"status = :s\" ...");
	st_query_req bad = {
	    .table = TABLE,
	    .key_condition = "PK = :pk",
	    .filter = "status = :s",
	    .attrs = {.values = values("{\":pk\":{\"S\":\"COURSE#c10\"},\":s\":{\"S\":\"x\"}}")},
	    .forward = true};
	st_page page;
	if ((rc = st_query(env, &bad, &arena, &page, msg)) != 0)
		print_error("Query", rc);

	printf("\nAP3/AP4 query GSI1, which secondary indexes (issue 4) will serve.\n");
	st_env_close(env);
	if (argc <= 2)
		tl_rmtree(dirbuf);
	sh_arena_fini(&arena);
	return 0;
}
