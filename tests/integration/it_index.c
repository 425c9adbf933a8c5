/*
 * it_index -- secondary indexes on a real 3-node cluster (shoal-node and
 * shoal-router processes on 127.0.0.1, started by deploy/cluster.sh), driven
 * through the `shoal` CLI and libshoal:
 *  - seed 002's edtech-platform table with GSI1: access patterns AP3 and AP4
 *    through the overloaded inverted index, DescribeTable of the index;
 *  - seed 003's students <-> courses inverted index (INCLUDE projection);
 *  - a sparse index, and updates that move, remove and delete index keys;
 *  - a write-sharded GSI (WriteShards 4) answers exactly as an unsharded GSI
 *    with the same key schema on the same data, in order, for page sizes 1,
 *    2, 3, 7 and unlimited, both directions, with and without a filter;
 *  - UpdateTable adding a GSI to a table with data while a writer keeps
 *    writing: CREATING, then ACTIVE, and then the index holds every item;
 *    DeleteIndex through update-table;
 *  - an LSI (strongly consistent reads allowed);
 *  - the errors: ConsistentRead on a GSI, an unknown index, a CREATING index.
 *
 * GSIs are eventually consistent: every check on one polls with a deadline
 * until the index shows what the base table says.  One cluster serves the
 * whole suite (an unchecked fixture, shared by the forked test cases); each
 * test uses its own tables.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define CONVERGE_MS 60000 /* how long an index may take to show a write */

static tl_cluster C;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A short pause between two polls of a condition that has a deadline. */
static void poll_pause(void)
{
	struct timespec ts = {0, 50 * 1000000};
	nanosleep(&ts, NULL);
}

static void cluster_up(void)
{
	if (!tl_cluster_up(&C, 3, 1, 4)) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
}

static void cluster_down(void)
{
	tl_cluster_down(&C);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Runs the CLI; *rc gets its exit code, *err (may be NULL) its stderr
 * (caller frees); returns stdout parsed as JSON (NULL when empty). */
static json_t *cli(int *rc, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static json_t *cli(int *rc, char **err, const char *fmt, ...)
{
	char args[12288];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	char *out = NULL, *e = NULL;
	*rc = tl_shoal(&C, &out, &e, "%s", args);
	json_t *j = NULL;
	if (*rc == 0 && out != NULL && out[strspn(out, " \n")] != '\0') {
		json_error_t je;
		j = json_loads(out, 0, &je);
		ck_assert_msg(j != NULL, "shoal %s: stdout is not JSON (%s): %s", args, je.text,
		              out);
	}
	free(out);
	if (err != NULL)
		*err = e;
	else
		free(e);
	return j;
}

/* The CLI must succeed. */
#define RUN(...)                                                                                   \
	({                                                                                         \
		int rc_;                                                                           \
		char *err_ = NULL;                                                                 \
		json_t *j_ = cli(&rc_, &err_, __VA_ARGS__);                                        \
		ck_assert_msg(rc_ == 0, "shoal exited %d: %s", rc_, err_ ? err_ : "");             \
		free(err_);                                                                        \
		j_;                                                                                \
	})

/* The CLI must fail with exit 254 and `text` on stderr. */
#define RUN_ERR(text, ...)                                                                         \
	do {                                                                                       \
		int rc_;                                                                           \
		char *err_ = NULL;                                                                 \
		json_t *j_ = cli(&rc_, &err_, __VA_ARGS__);                                        \
		ck_assert_msg(rc_ == 254, "shoal exited %d, want 254", rc_);                       \
		ck_assert_msg(err_ != NULL && strstr(err_, text) != NULL, "stderr %s\nwant %s",    \
		              err_ ? err_ : "", text);                                             \
		free(err_);                                                                        \
		json_decref(j_);                                                                   \
	} while (0)

/* A libshoal client per thread (the library is thread-safe; one each keeps
 * the writer and the checker independent). */
static shoal_client *client_new(void)
{
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, NULL, &c, msg) == SHOAL_OK, "%s", msg);
	return c;
}

/* One call; the answer as JSON (caller decrefs), or NULL with *err set. */
static json_t *call(shoal_client *c, const char *op, const json_t *body, shoal_error *err)
{
	char *text = json_dumps(body, JSON_COMPACT);
	char *out = NULL;
	shoal_error e;
	int rc = shoal_call_json(c, op, text, &out, &e);
	free(text);
	json_t *j = NULL;
	if (rc == SHOAL_OK) {
		j = json_loads(out, 0, NULL);
		ck_assert_ptr_nonnull(j);
	}
	shoal_free(out);
	if (err != NULL)
		*err = e;
	return j;
}

/* A call that must succeed. */
static json_t *call_ok(shoal_client *c, const char *op, const json_t *body)
{
	shoal_error e;
	json_t *j = call(c, op, body, &e);
	ck_assert_msg(j != NULL, "%s: %s: %s", op, e.exception, e.message);
	return j;
}

static const char *S(const json_t *item, const char *name)
{
	return json_string_value(json_object_get(json_object_get(item, name), "S"));
}

static json_t *items_of(const json_t *page)
{
	return json_object_get(page, "Items");
}

/* Attribute `attr` (S) of an item, or with attr NULL "<PK>/<SK>". */
static void label(const json_t *it, const char *attr, char *buf, size_t cap)
{
	if (attr != NULL) {
		const char *v = S(it, attr);
		snprintf(buf, cap, "%s", v != NULL ? v : "?");
		return;
	}
	const char *pk = S(it, "PK"), *sk = S(it, "SK");
	snprintf(buf, cap, "%s/%s", pk != NULL ? pk : "?", sk != NULL ? sk : "?");
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The items' labels joined by ',' (malloc'd), sorted unless in_order. */
static char *join(const json_t *items, const char *attr, bool in_order)
{
	size_t n = json_array_size(items);
	char **v = calloc(n + 1, sizeof(*v));
	size_t len = 1;
	for (size_t i = 0; i < n; i++) {
		char buf[600];
		label(json_array_get(items, i), attr, buf, sizeof(buf));
		v[i] = strdup(buf);
		len += strlen(buf) + 1;
	}
	if (!in_order)
		qsort(v, n, sizeof(*v), label_cmp);
	char *s = malloc(len);
	s[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			strcat(s, ",");
		strcat(s, v[i]);
		free(v[i]);
	}
	free(v);
	return s;
}

/* Runs the CLI query/scan `args` until its Items' labels (see label) equal
 * `want` (in order, or as sorted lists), or fails after the deadline. */
static void await_items(const char *want, const char *attr, bool in_order, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void await_items(const char *want, const char *attr, bool in_order, const char *fmt, ...)
{
	char args[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	int64_t deadline = now_ms() + CONVERGE_MS;
	for (;;) {
		json_t *r = RUN("%s", args);
		char *got = join(items_of(r), attr, in_order);
		json_decref(r);
		bool same = strcmp(got, want) == 0;
		if (!same && now_ms() >= deadline)
			ck_abort_msg("shoal %s:\n got %s\nwant %s", args, got, want);
		free(got);
		if (same)
			return;
		poll_pause();
	}
}

/* Writes `items` (a JSON array of items) to `table` with BatchWriteItem,
 * 25 at a time, through the CLI (file:// request items).  Steals items. */
static void batch_put(const char *table, json_t *items)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/batch-%s.json", C.dir, table);
	for (size_t at = 0; at < json_array_size(items); at += 25) {
		json_t *reqs = json_array();
		for (size_t i = at; i < at + 25 && i < json_array_size(items); i++)
			json_array_append_new(reqs, json_pack("{s:{s:O}}", "PutRequest", "Item",
			                                      json_array_get(items, i)));
		json_t *ri = json_pack("{s:o}", table, reqs);
		ck_assert_int_eq(json_dump_file(ri, path, JSON_COMPACT), 0);
		json_decref(ri);
		json_t *r = RUN("batch-write-item --request-items 'file://%s'", path);
		ck_assert_int_eq((int)json_object_size(json_object_get(r, "UnprocessedItems")), 0);
		json_decref(r);
	}
	json_decref(items);
}

/* The table's description (describe-table's "Table"); *root is the answer
 * to decref. */
static json_t *describe(const char *table, json_t **root)
{
	*root = RUN("describe-table --table-name %s", table);
	return json_object_get(*root, "Table");
}

static json_t *gsi_desc(json_t *t, const char *name)
{
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(t, "GlobalSecondaryIndexes"), i, g)
	{
		if (strcmp(json_string_value(json_object_get(g, "IndexName")), name) == 0)
			return g;
	}
	return NULL;
}

static long long num(const json_t *o, const char *name)
{
	return (long long)json_integer_value(json_object_get(o, name));
}

/* Polls DescribeTable until index `index` of `table` reports `count` items. */
static void await_index_count(const char *table, const char *index, long long count)
{
	int64_t deadline = now_ms() + CONVERGE_MS;
	for (;;) {
		json_t *root;
		json_t *g = gsi_desc(describe(table, &root), index);
		ck_assert_msg(g != NULL, "%s has no index %s", table, index);
		long long n = num(g, "ItemCount");
		json_decref(root);
		if (n == count)
			return;
		ck_assert_msg(now_ms() < deadline, "%s.%s: ItemCount %lld, want %lld", table, index,
		              n, count);
		poll_pause();
	}
}

/* ------------------------------------------------------------------------ */
/* Seed 002: AP3 and AP4 through GSI1                                        */
/* ------------------------------------------------------------------------ */

#define GSI1Q                                                                                      \
	"query --table-name edtech-platform --index-name GSI1 --key-condition-expression "         \
	"'GSI1PK = :pk AND begins_with(GSI1SK, :prefix)' "

START_TEST(test_seed002_gsi1)
{
	json_decref(
	    RUN("create-table --cli-input-json 'file://%s/deploy/demo/edtech-table.json'", C.root));
	json_decref(RUN("batch-write-item --request-items "
	                "'file://%s/deploy/demo/edtech-items.json'",
	                C.root));
	/* AP3: the students of course c10.  Both directions of each enrolment
	 * edge carry GSI1PK COURSE#c10 and GSI1SK STUDENT#<s>. */
	await_items("STUDENT#s1,STUDENT#s1,STUDENT#s2,STUDENT#s2", "GSI1SK", true,
	            GSI1Q "--expression-attribute-values "
	                  "'{\":pk\":{\"S\":\"COURSE#c10\"}, \":prefix\":{\"S\":\"STUDENT#\"}}'");
	await_items("COURSE#c10/ENROLLMENT#STUDENT#s1,COURSE#c10/ENROLLMENT#STUDENT#s2,"
	            "STUDENT#s1/ENROLLMENT#c10,STUDENT#s2/ENROLLMENT#c10",
	            NULL, false,
	            GSI1Q "--expression-attribute-values "
	                  "'{\":pk\":{\"S\":\"COURSE#c10\"}, \":prefix\":{\"S\":\"STUDENT#\"}}'");
	/* AP4: the courses of instructor i5, in GSI1SK order; the projection
	 * is ALL, so the course metadata comes with them. */
	await_items("COURSE#c10,COURSE#c20", "GSI1SK", true,
	            GSI1Q "--expression-attribute-values "
	                  "'{\":pk\":{\"S\":\"INSTRUCTOR#i5\"}, \":prefix\":{\"S\":\"COURSE#\"}}'");
	json_t *r =
	    RUN(GSI1Q "--no-scan-index-forward --expression-attribute-values "
	              "'{\":pk\":{\"S\":\"INSTRUCTOR#i5\"}, \":prefix\":{\"S\":\"COURSE#\"}}'");
	json_t *items = items_of(r);
	ck_assert_int_eq((int)json_array_size(items), 2);
	ck_assert_str_eq(S(json_array_get(items, 0), "PK"), "COURSE#c20");
	ck_assert_str_eq(S(json_array_get(items, 0), "SK"), "METADATA");
	ck_assert_ptr_nonnull(json_object_get(json_array_get(items, 1), "title"));
	json_decref(r);
	/* Ten items carry GSI1 keys (profiles, metadata, enrolment edges);
	 * the five module and lesson items do not (sparse). */
	await_index_count("edtech-platform", "GSI1", 10);
	json_t *root;
	json_t *g = gsi_desc(describe("edtech-platform", &root), "GSI1");
	ck_assert_str_eq(json_string_value(json_object_get(g, "IndexStatus")), "ACTIVE");
	ck_assert_int_eq(num(g, "WriteShards"), 1);
	ck_assert_ptr_null(json_object_get(g, "Backfilling"));
	ck_assert_int_gt(num(g, "IndexSizeBytes"), 0);
	json_decref(root);
	r = RUN("scan --table-name edtech-platform --index-name GSI1");
	ck_assert_int_eq(num(r, "Count"), 10);
	json_decref(r);

	/* The errors. */
	RUN_ERR("An error occurred (ValidationException) when calling the Query operation: "
	        "Consistent reads are not supported on global secondary indexes",
	        GSI1Q "--consistent-read --expression-attribute-values "
	              "'{\":pk\":{\"S\":\"INSTRUCTOR#i5\"}, \":prefix\":{\"S\":\"COURSE#\"}}'");
	RUN_ERR("An error occurred (ValidationException) when calling the Query operation: "
	        "The table does not have the specified index: GSI9",
	        "query --table-name edtech-platform --index-name GSI9 --key-condition-expression "
	        "'GSI1PK = :pk' --expression-attribute-values '{\":pk\":{\"S\":\"x\"}}'");
	RUN_ERR("An error occurred (ValidationException) when calling the Scan operation: "
	        "The table does not have the specified index: GSI9",
	        "scan --table-name edtech-platform --index-name GSI9");
	RUN_ERR("An error occurred (ValidationException) when calling the Scan operation: "
	        "Consistent reads are not supported on global secondary indexes",
	        "scan --table-name edtech-platform --index-name GSI1 --consistent-read");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Seed 003: students <-> courses, an inverted GSI; sparse; moving keys      */
/* ------------------------------------------------------------------------ */

static void school_table(void)
{
	json_decref(RUN(
	    "create-table --table-name school --attribute-definitions "
	    "AttributeName=PK,AttributeType=S AttributeName=SK,AttributeType=S "
	    "AttributeName=GSI1PK,AttributeType=S AttributeName=GSI1SK,AttributeType=S "
	    "--key-schema AttributeName=PK,KeyType=HASH AttributeName=SK,KeyType=RANGE "
	    "--billing-mode PAY_PER_REQUEST --global-secondary-indexes "
	    "'[{\"IndexName\":\"GSI1\",\"KeySchema\":[{\"AttributeName\":\"GSI1PK\",\"KeyType\":"
	    "\"HASH\"},{\"AttributeName\":\"GSI1SK\",\"KeyType\":\"RANGE\"}],\"Projection\":{"
	    "\"ProjectionType\":\"INCLUDE\",\"NonKeyAttributes\":[\"enrolledOn\"]}}]'"));
	json_t *items = json_array();
	const char *edges[][2] = {{"a91", "math204"},
	                          {"b30", "math204"},
	                          {"a91", "cs101"},
	                          {"c77", "math204"},
	                          {"c77", "cs101"}};
	for (size_t i = 0; i < 5; i++) {
		char pk[64], sk[64], g[64], gs[64], on[32];
		snprintf(pk, sizeof(pk), "STU#%s", edges[i][0]);
		snprintf(sk, sizeof(sk), "ENROLL#CRS#%s", edges[i][1]);
		snprintf(g, sizeof(g), "CRS#%s", edges[i][1]);
		snprintf(gs, sizeof(gs), "STU#%s", edges[i][0]);
		snprintf(on, sizeof(on), "2024-09-0%zu", i + 1);
		json_array_append_new(
		    items, json_pack("{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}}", "PK", "S",
		                     pk, "SK", "S", sk, "GSI1PK", "S", g, "GSI1SK", "S", gs,
		                     "enrolledOn", "S", on, "grade", "S", "A"));
	}
	const char *students[] = {"a91", "b30", "c77"};
	for (size_t i = 0; i < 3; i++) {
		char pk[64];
		snprintf(pk, sizeof(pk), "STU#%s", students[i]);
		json_array_append_new(items,
		                      json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "PK", "S", pk, "SK",
		                                "S", "PROFILE", "name", "S", students[i]));
	}
	const char *courses[] = {"math204", "cs101"};
	for (size_t i = 0; i < 2; i++) {
		char pk[64];
		snprintf(pk, sizeof(pk), "CRS#%s", courses[i]);
		json_array_append_new(items,
		                      json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "PK", "S", pk, "SK",
		                                "S", "METADATA", "title", "S", courses[i]));
	}
	batch_put("school", items);
}

#define ROSTER(course)                                                                             \
	"query --table-name school --index-name GSI1 --key-condition-expression 'GSI1PK = :c' "    \
	"--expression-attribute-values '{\":c\":{\"S\":\"CRS#" course "\"}}'"

START_TEST(test_seed003_inverted_index)
{
	school_table();
	/* A student's courses: the base table. */
	json_t *r = RUN("query --table-name school --key-condition-expression 'PK = :s AND "
	                "begins_with(SK, :e)' --expression-attribute-values "
	                "'{\":s\":{\"S\":\"STU#a91\"},\":e\":{\"S\":\"ENROLL#\"}}'");
	ck_assert_int_eq(num(r, "Count"), 2);
	json_decref(r);
	/* A course's students: the inverted index, sorted by GSI1SK. */
	await_items("STU#a91,STU#b30,STU#c77", "GSI1SK", true, ROSTER("math204"));
	await_items("STU#a91,STU#c77", "GSI1SK", true, ROSTER("cs101"));
	/* INCLUDE projection: keys and enrolledOn, not grade. */
	r = RUN(ROSTER("cs101"));
	json_t *it = json_array_get(items_of(r), 0);
	ck_assert_str_eq(S(it, "PK"), "STU#a91");
	ck_assert_str_eq(S(it, "SK"), "ENROLL#CRS#cs101");
	ck_assert_str_eq(S(it, "GSI1PK"), "CRS#cs101");
	ck_assert_str_eq(S(it, "enrolledOn"), "2024-09-03");
	ck_assert_ptr_null(json_object_get(it, "grade"));
	json_decref(r);
	/* Sparse: profiles and metadata have no GSI1 keys. */
	await_items("STU#a91,STU#a91,STU#b30,STU#c77,STU#c77", "GSI1SK", false,
	            "scan --table-name school --index-name GSI1");
	await_index_count("school", "GSI1", 5);

	/* b30 moves from math204 to cs101: the entry moves. */
	json_decref(RUN("update-item --table-name school --key "
	                "'{\"PK\":{\"S\":\"STU#b30\"},\"SK\":{\"S\":\"ENROLL#CRS#math204\"}}' "
	                "--update-expression 'SET GSI1PK = :c' --expression-attribute-values "
	                "'{\":c\":{\"S\":\"CRS#cs101\"}}'"));
	await_items("STU#a91,STU#b30,STU#c77", "GSI1SK", true, ROSTER("cs101"));
	await_items("STU#a91,STU#c77", "GSI1SK", true, ROSTER("math204"));
	/* The sort key changes: the entry re-sorts. */
	json_decref(RUN("update-item --table-name school --key "
	                "'{\"PK\":{\"S\":\"STU#a91\"},\"SK\":{\"S\":\"ENROLL#CRS#cs101\"}}' "
	                "--update-expression 'SET GSI1SK = :s' --expression-attribute-values "
	                "'{\":s\":{\"S\":\"STU#z99\"}}'"));
	await_items("STU#b30,STU#c77,STU#z99", "GSI1SK", true, ROSTER("cs101"));
	/* REMOVE of an index key takes the item out of the index. */
	json_decref(RUN("update-item --table-name school --key "
	                "'{\"PK\":{\"S\":\"STU#c77\"},\"SK\":{\"S\":\"ENROLL#CRS#cs101\"}}' "
	                "--update-expression 'REMOVE GSI1SK'"));
	await_items("STU#b30,STU#z99", "GSI1SK", true, ROSTER("cs101"));
	/* An unprojected attribute changes: the index answers the same. */
	json_decref(
	    RUN("update-item --table-name school --key "
	        "'{\"PK\":{\"S\":\"STU#c77\"},\"SK\":{\"S\":\"ENROLL#CRS#math204\"}}' "
	        "--update-expression 'SET grade = :g, enrolledOn = :o' "
	        "--expression-attribute-values '{\":g\":{\"S\":\"B\"},\":o\":{\"S\":\"x\"}}'"));
	await_items("x", "enrolledOn", true,
	            "query --table-name school --index-name GSI1 --key-condition-expression "
	            "'GSI1PK = :c AND GSI1SK = :s' --expression-attribute-values "
	            "'{\":c\":{\"S\":\"CRS#math204\"},\":s\":{\"S\":\"STU#c77\"}}'");
	/* DeleteItem removes the entry; PutItem replacing an item without keys
	 * removes it too. */
	json_decref(RUN("delete-item --table-name school --key "
	                "'{\"PK\":{\"S\":\"STU#a91\"},\"SK\":{\"S\":\"ENROLL#CRS#math204\"}}'"));
	json_decref(RUN("put-item --table-name school --item "
	                "'{\"PK\":{\"S\":\"STU#c77\"},\"SK\":{\"S\":\"ENROLL#CRS#math204\"}}'"));
	await_items("", "GSI1SK", true, ROSTER("math204"));
	await_index_count("school", "GSI1", 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Write sharding                                                            */
/* ------------------------------------------------------------------------ */

#define SHARD_ITEMS 60

/* Pages through a Query on `index` of table hot with Limit `limit` (0:
 * none) and returns the PKs in the order they came, ',' joined. */
static char *page_through(shoal_client *c, const char *index, uint32_t limit, bool forward,
                          bool filtered, int *pages)
{
	size_t cap = 16384, len = 0;
	char *out = malloc(cap);
	out[0] = '\0';
	json_t *esk = NULL;
	*pages = 0;
	for (;;) {
		json_t *body = json_pack("{s:s,s:s,s:s,s:{s:{s:s}},s:b}", "TableName", "hot",
		                         "IndexName", index, "KeyConditionExpression", "G = :g",
		                         "ExpressionAttributeValues", ":g", "S", "HOT",
		                         "ScanIndexForward", forward);
		if (filtered) {
			/* The filter and the projection use placeholders the key
			 * condition does not: the shards must not see them. */
			json_object_set_new(body, "FilterExpression", json_string("#n >= :min"));
			json_object_set_new(body, "ProjectionExpression", json_string("PK, #n"));
			json_object_set_new(body, "ExpressionAttributeNames",
			                    json_pack("{s:s}", "#n", "n"));
			json_object_set_new(json_object_get(body, "ExpressionAttributeValues"),
			                    ":min", json_pack("{s:s}", "N", "20"));
		}
		if (limit != 0)
			json_object_set_new(body, "Limit", json_integer(limit));
		if (esk != NULL)
			json_object_set_new(body, "ExclusiveStartKey", esk);
		json_t *r = call_ok(c, "Query", body);
		json_decref(body);
		(*pages)++;
		json_t *items = items_of(r);
		ck_assert_msg(limit == 0 ||
		                  json_integer_value(json_object_get(r, "ScannedCount")) <= limit,
		              "a page evaluated more than Limit");
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it)
		{
			const char *pk = S(it, "PK");
			ck_assert_ptr_nonnull(pk);
			if (filtered) {
				ck_assert_ptr_null(json_object_get(it, "S"));
				ck_assert_ptr_nonnull(json_object_get(it, "n"));
			}
			if (len + strlen(pk) + 2 >= cap)
				out = realloc(out, cap *= 2);
			len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", pk);
		}
		esk = json_object_get(r, "LastEvaluatedKey");
		if (esk != NULL)
			json_incref(esk);
		json_decref(r);
		if (esk == NULL)
			break;
		ck_assert_int_lt(*pages, SHARD_ITEMS * 3 + 5);
	}
	return out;
}

START_TEST(test_write_sharded_equals_unsharded)
{
	/* Two GSIs with the same key schema on the same items: one spread over
	 * four write shards, one not.  One hot index key for every item; sort
	 * key values repeat (ties are ordered by the base key). */
	json_decref(RUN(
	    "create-table --table-name hot --attribute-definitions "
	    "AttributeName=PK,AttributeType=S AttributeName=G,AttributeType=S "
	    "AttributeName=S,AttributeType=S --key-schema AttributeName=PK,KeyType=HASH "
	    "--billing-mode PAY_PER_REQUEST --global-secondary-indexes "
	    "'[{\"IndexName\":\"sharded\",\"KeySchema\":[{\"AttributeName\":\"G\",\"KeyType\":"
	    "\"HASH\"},{\"AttributeName\":\"S\",\"KeyType\":\"RANGE\"}],\"Projection\":{"
	    "\"ProjectionType\":\"ALL\"},\"WriteShards\":4},{\"IndexName\":\"plain\",\"KeySchema\":"
	    "[{\"AttributeName\":\"G\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"S\",\"KeyType\":"
	    "\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"ALL\"}}]'"));
	json_t *root;
	json_t *t = describe("hot", &root);
	ck_assert_int_eq(num(gsi_desc(t, "sharded"), "WriteShards"), 4);
	ck_assert_int_eq(num(gsi_desc(t, "plain"), "WriteShards"), 1);
	json_decref(root);
	json_t *items = json_array();
	for (int i = 0; i < SHARD_ITEMS; i++) {
		char pk[32], sk[32], n[16];
		snprintf(pk, sizeof(pk), "U#%02d", i);
		snprintf(sk, sizeof(sk), "S%02d", (i * 7) % 23);
		snprintf(n, sizeof(n), "%d", i);
		json_array_append_new(items,
		                      json_pack("{s:{s:s},s:{s:s},s:{s:s},s:{s:s}}", "PK", "S", pk,
		                                "G", "S", "HOT", "S", "S", sk, "n", "N", n));
	}
	batch_put("hot", items);
	await_index_count("hot", "sharded", SHARD_ITEMS);
	await_index_count("hot", "plain", SHARD_ITEMS);

	shoal_client *c = client_new();
	/* Both complete before comparing (the counts above are per group). */
	int64_t deadline = now_ms() + CONVERGE_MS;
	for (;;) {
		int p1, p2;
		char *a = page_through(c, "sharded", 0, true, false, &p1);
		char *b = page_through(c, "plain", 0, true, false, &p2);
		int na = 0, nb = 0;
		for (char *x = a; *x; x++)
			na += *x == ',';
		for (char *x = b; *x; x++)
			nb += *x == ',';
		free(a);
		free(b);
		if (na == SHARD_ITEMS - 1 && nb == SHARD_ITEMS - 1)
			break;
		ck_assert_msg(now_ms() < deadline, "indexes hold %d and %d items", na + 1, nb + 1);
		poll_pause();
	}
	const uint32_t sizes[] = {1, 2, 3, 7, 0};
	for (int filtered = 0; filtered < 2; filtered++)
		for (int fwd = 0; fwd < 2; fwd++)
			for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
				int p1, p2;
				char *want = page_through(c, "plain", 0, fwd, filtered, &p1);
				char *a = page_through(c, "sharded", sizes[k], fwd, filtered, &p1);
				char *b = page_through(c, "plain", sizes[k], fwd, filtered, &p2);
				ck_assert_msg(strcmp(a, b) == 0 && strcmp(a, want) == 0,
				              "limit %u forward %d filtered %d:\nsharded %s\n"
				              "plain   %s\nall     %s",
				              sizes[k], fwd, filtered, a, b, want);
				if (sizes[k] != 0 && !filtered)
					ck_assert_int_ge(p1, SHARD_ITEMS / (int)sizes[k]);
				free(a);
				free(b);
				free(want);
			}
	/* A Scan of the sharded index sees every entry once. */
	json_t *sc = RUN("scan --table-name hot --index-name sharded --page-size 7");
	ck_assert_int_eq(num(sc, "Count"), SHARD_ITEMS);
	char *ids = join(items_of(sc), "PK", false);
	json_decref(sc);
	sc = RUN("scan --table-name hot");
	char *base_ids = join(items_of(sc), "PK", false);
	json_decref(sc);
	ck_assert_str_eq(ids, base_ids);
	free(ids);
	free(base_ids);
	/* A Count through the shards, and the key condition on the sort key. */
	json_t *body =
	    json_pack("{s:s,s:s,s:s,s:{s:{s:s},s:{s:s},s:{s:s}},s:s}", "TableName", "hot",
	              "IndexName", "sharded", "KeyConditionExpression",
	              "G = :g AND S BETWEEN :a AND :b", "ExpressionAttributeValues", ":g", "S",
	              "HOT", ":a", "S", "S05", ":b", "S", "S09", "Select", "COUNT");
	json_t *r1 = call_ok(c, "Query", body);
	json_object_set_new(body, "IndexName", json_string("plain"));
	json_t *r2 = call_ok(c, "Query", body);
	ck_assert_int_gt(num(r1, "Count"), 0);
	ck_assert_int_eq(num(r1, "Count"), num(r2, "Count"));
	ck_assert_ptr_null(json_object_get(r1, "Items"));
	json_decref(r1);
	json_decref(r2);
	json_decref(body);
	shoal_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* UpdateTable: a GSI added to a table with data, while writing; deleted     */
/* ------------------------------------------------------------------------ */

#define BACKFILL_ITEMS 1500

typedef struct writer {
	pthread_t thread;
	atomic_bool stop;
	atomic_int done;
	atomic_int failed;
} writer;

static void *writer_main(void *arg)
{
	writer *w = arg;
	shoal_client *c = client_new();
	for (int i = 0; !atomic_load(&w->stop); i++) {
		char body[256];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"bfill\",\"Item\":{\"id\":{\"S\":\"w%05d\"},\"X\":{\"S\":"
		         "\"x%d\"},\"Y\":{\"N\":\"%d\"}}}",
		         i, i % 5, i);
		char *out = NULL;
		shoal_error err;
		if (shoal_call_json(c, "PutItem", body, &out, &err) == SHOAL_OK)
			atomic_fetch_add(&w->done, 1);
		else
			atomic_fetch_add(&w->failed, 1);
		shoal_free(out);
	}
	shoal_client_free(c);
	return NULL;
}

/* Every id of a Scan (of the table, or of index `index`), sorted, ','
 * joined, fetched through every page. */
static char *all_ids(shoal_client *c, const char *index, int *n)
{
	json_t *esk = NULL;
	json_t *all = json_array();
	for (;;) {
		json_t *body = json_pack("{s:s}", "TableName", "bfill");
		if (index != NULL) {
			/* Pages that end inside partitions: index start keys. */
			json_object_set_new(body, "IndexName", json_string(index));
			json_object_set_new(body, "Limit", json_integer(97));
		}
		if (esk != NULL)
			json_object_set_new(body, "ExclusiveStartKey", esk);
		json_t *r = call_ok(c, "Scan", body);
		json_decref(body);
		json_array_extend(all, items_of(r));
		esk = json_object_get(r, "LastEvaluatedKey");
		if (esk != NULL)
			json_incref(esk);
		json_decref(r);
		if (esk == NULL)
			break;
	}
	*n = (int)json_array_size(all);
	char *s = join(all, "id", false);
	json_decref(all);
	return s;
}

START_TEST(test_backfill_while_writing)
{
	json_decref(RUN("create-table --table-name bfill --attribute-definitions "
	                "AttributeName=id,AttributeType=S --key-schema "
	                "AttributeName=id,KeyType=HASH --billing-mode PAY_PER_REQUEST"));
	json_t *items = json_array();
	for (int i = 0; i < BACKFILL_ITEMS; i++) {
		char id[32], x[16], y[16];
		snprintf(id, sizeof(id), "b%05d", i);
		snprintf(x, sizeof(x), "x%d", i % 5);
		snprintf(y, sizeof(y), "%d", i);
		/* Every tenth item lacks X: not indexed. */
		if (i % 10 == 9)
			json_array_append_new(
			    items, json_pack("{s:{s:s},s:{s:s}}", "id", "S", id, "Y", "N", y));
		else
			json_array_append_new(items, json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "id",
			                                       "S", id, "X", "S", x, "Y", "N", y));
	}
	batch_put("bfill", items);

	writer w = {0};
	ck_assert_int_eq(pthread_create(&w.thread, NULL, writer_main, &w), 0);
	json_t *r = RUN("update-table --table-name bfill --attribute-definitions "
	                "AttributeName=X,AttributeType=S AttributeName=Y,AttributeType=N "
	                "--global-secondary-index-updates "
	                "'[{\"Create\":{\"IndexName\":\"byX\",\"KeySchema\":[{\"AttributeName\":"
	                "\"X\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"Y\",\"KeyType\":"
	                "\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}}]'");
	json_t *td = json_object_get(r, "TableDescription");
	ck_assert_str_eq(json_string_value(json_object_get(td, "TableStatus")), "UPDATING");
	json_t *g = gsi_desc(td, "byX");
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(json_string_value(json_object_get(g, "IndexStatus")), "CREATING");
	ck_assert(json_is_true(json_object_get(g, "Backfilling")));
	json_decref(r);

	/* CREATING until every group has backfilled and shipped it; reading
	 * it meanwhile is refused. */
	bool saw_creating = false;
	int64_t deadline = now_ms() + CONVERGE_MS * 2;
	for (;;) {
		int rc;
		char *err = NULL;
		json_t *q =
		    cli(&rc, &err,
		        "query --table-name bfill --index-name byX --key-condition-expression "
		        "'X = :x' --expression-attribute-values '{\":x\":{\"S\":\"x1\"}}' "
		        "--limit 1");
		if (rc != 0) {
			ck_assert_msg(err != NULL &&
			                  strstr(err,
			                         "An error occurred (ValidationException) when "
			                         "calling the Query operation: Cannot read from "
			                         "backfilling global secondary index: byX") != NULL,
			              "%s", err ? err : "");
			saw_creating = true;
		}
		free(err);
		json_decref(q);
		json_t *root;
		json_t *gd = gsi_desc(describe("bfill", &root), "byX");
		ck_assert_ptr_nonnull(gd);
		const char *status = json_string_value(json_object_get(gd, "IndexStatus"));
		bool active = strcmp(status, "ACTIVE") == 0;
		if (!active) {
			ck_assert_str_eq(status, "CREATING");
			saw_creating = true;
		}
		json_decref(root);
		if (active)
			break;
		ck_assert_msg(now_ms() < deadline, "byX still CREATING");
		poll_pause();
	}
	printf("backfill: index was seen CREATING: %s; writer: %d puts so far\n",
	       saw_creating ? "yes" : "no", atomic_load(&w.done));
	/* Let the writer go on past the activation, then stop it. */
	int at = atomic_load(&w.done);
	deadline = now_ms() + 30000;
	while (atomic_load(&w.done) < at + 50 && now_ms() < deadline)
		poll_pause();
	atomic_store(&w.stop, true);
	pthread_join(w.thread, NULL);
	ck_assert_int_eq(atomic_load(&w.failed), 0);
	ck_assert_int_gt(atomic_load(&w.done), 0);

	/* The index converges to exactly the items that have X. */
	shoal_client *c = client_new();
	int n_base, n_index;
	char *base = all_ids(c, NULL, &n_base);
	ck_assert_int_eq(n_base, BACKFILL_ITEMS + atomic_load(&w.done));
	/* The base ids that have X: all but b....9. */
	json_t *with_x = json_array();
	for (char *p = base; *p;) {
		char *e = strchr(p, ',');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		if (!(p[0] == 'b' && p[len - 1] == '9'))
			json_array_append_new(with_x, json_pack("{s:{s:s%}}", "id", "S", p, len));
		p += len + (e != NULL);
	}
	char *want = join(with_x, "id", false);
	int n_want = (int)json_array_size(with_x);
	json_decref(with_x);
	free(base);
	deadline = now_ms() + CONVERGE_MS;
	for (;;) {
		char *got = all_ids(c, "byX", &n_index);
		bool same = strcmp(got, want) == 0;
		free(got);
		if (same)
			break;
		ck_assert_msg(now_ms() < deadline, "index byX holds %d entries, want %d", n_index,
		              n_want);
		poll_pause();
	}
	free(want);
	await_index_count("bfill", "byX", n_want);
	/* A query through it, in Y order. */
	json_t *q = RUN("query --table-name bfill --index-name byX --key-condition-expression "
	                "'X = :x AND Y < :y' --expression-attribute-values "
	                "'{\":x\":{\"S\":\"x2\"},\":y\":{\"N\":\"20\"}}'");
	/* b00002 b00007 b00012 b00017, and the writer's w00002 ... below 20. */
	int want_q = 4;
	for (int i = 0; i < 20 && i < atomic_load(&w.done); i++)
		want_q += i % 5 == 2;
	ck_assert_int_eq(num(q, "Count"), want_q);
	json_decref(q);

	/* DeleteIndex. */
	r = RUN("update-table --table-name bfill --global-secondary-index-updates "
	        "'[{\"Delete\":{\"IndexName\":\"byX\"}}]'");
	g = gsi_desc(json_object_get(r, "TableDescription"), "byX");
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(json_string_value(json_object_get(g, "IndexStatus")), "DELETING");
	json_decref(r);
	json_t *root;
	ck_assert_ptr_null(gsi_desc(describe("bfill", &root), "byX"));
	json_decref(root);
	RUN_ERR("The table does not have the specified index: byX",
	        "query --table-name bfill --index-name byX --key-condition-expression 'X = :x' "
	        "--expression-attribute-values '{\":x\":{\"S\":\"x1\"}}'");
	/* Deleting it again, or an index that never was. */
	RUN_ERR("(ResourceNotFoundException)",
	        "update-table --table-name bfill --global-secondary-index-updates "
	        "'[{\"Delete\":{\"IndexName\":\"byX\"}}]'");
	RUN_ERR("(ValidationException) when calling the UpdateTable operation: At least one of "
	        "ProvisionedThroughput, BillingMode, UpdateStreamEnabled, "
	        "GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required",
	        "update-table --table-name bfill");
	shoal_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* LSI                                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_lsi)
{
	json_decref(RUN("create-table --table-name scores --attribute-definitions "
	                "AttributeName=PK,AttributeType=S AttributeName=SK,AttributeType=S "
	                "AttributeName=score,AttributeType=N --key-schema "
	                "AttributeName=PK,KeyType=HASH AttributeName=SK,KeyType=RANGE "
	                "--billing-mode PAY_PER_REQUEST --local-secondary-indexes "
	                "'IndexName=byScore,KeySchema=[{AttributeName=PK,KeyType=HASH},"
	                "{AttributeName=score,KeyType=RANGE}],Projection={ProjectionType=ALL}'"));
	json_t *items = json_array();
	const int scores[] = {70, 95, 12, 88, 40};
	for (int i = 0; i < 5; i++) {
		char sk[16], sc[16];
		snprintf(sk, sizeof(sk), "GAME#%d", i);
		snprintf(sc, sizeof(sc), "%d", scores[i]);
		json_array_append_new(items, json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "PK", "S",
		                                       "P#1", "SK", "S", sk, "score", "N", sc));
	}
	/* One without a score: not in the LSI. */
	json_array_append_new(
	    items, json_pack("{s:{s:s},s:{s:s}}", "PK", "S", "P#1", "SK", "S", "PROFILE"));
	batch_put("scores", items);
	/* Strongly consistent, in score order, at once. */
	json_t *r = RUN("query --table-name scores --index-name byScore --consistent-read "
	                "--key-condition-expression 'PK = :p AND score > :m' "
	                "--expression-attribute-values '{\":p\":{\"S\":\"P#1\"},\":m\":{\"N\":"
	                "\"30\"}}' --no-scan-index-forward");
	char *got = join(items_of(r), "SK", true);
	ck_assert_str_eq(got, "GAME#1,GAME#3,GAME#0,GAME#4");
	free(got);
	json_decref(r);
	json_t *root;
	json_t *t = describe("scores", &root);
	json_t *l = json_array_get(json_object_get(t, "LocalSecondaryIndexes"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(l, "IndexName")), "byScore");
	ck_assert_int_eq(num(l, "ItemCount"), 5);
	ck_assert_int_eq(num(t, "ItemCount"), 6);
	json_decref(root);
	/* A Scan of the LSI. */
	r = RUN("scan --table-name scores --index-name byScore --consistent-read");
	ck_assert_int_eq(num(r, "Count"), 5);
	json_decref(r);
}
END_TEST

static Suite *index_suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("cluster");
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_seed002_gsi1);
	tcase_add_test(tc, test_seed003_inverted_index);
	tcase_add_test(tc, test_write_sharded_equals_unsharded);
	tcase_add_test(tc, test_backfill_while_writing);
	tcase_add_test(tc, test_lsi);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(index_suite)
