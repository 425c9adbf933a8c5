/*
 * index_check -- compares every secondary index of a table with the index
 * recomputed from the table's items, through a router, and prints the
 * differences.  DESIGN.md's invariant: once writes stop (and propagation has
 * drained), every GSI and LSI equals the index computed from its base table.
 *
 *   index_check [--endpoint E] --table-name T [--index-name I] [--max-diffs N]
 *
 * How: DescribeTable gives the indexes (key schema, projection); a
 * consistent Scan of the table gives the items; for each index the expected
 * entries are the items that carry the index's key attributes with the
 * defined types (sparse indexes), projected as the index says (ALL, KEYS_ONLY:
 * table and index keys, INCLUDE: those and NonKeyAttributes); a Scan of the
 * index gives the actual entries.  Entries are matched by the table key.
 *
 * Exit status: 0 every index matches, 1 differences (printed on stdout),
 * 2 the check could not run (printed on stderr).  Tests poll it until it
 * returns 0 or a deadline passes.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/shoal.h"

typedef struct checker {
	shoal_client *c;
	const char *table;
	json_t *desc;             /* Table of DescribeTable */
	json_t *attr_type;        /* attribute name -> "S" | "N" | "B" */
	const char *hash, *range; /* the table's key attributes (range may be NULL) */
	unsigned max_diffs;
} checker;

static json_t *call(checker *k, const char *op, json_t *req)
{
	char *body = json_dumps(req, JSON_COMPACT);
	char *resp = NULL;
	shoal_error err;
	int rc = body == NULL ? SHOAL_E_NOMEM : shoal_call_json(k->c, op, body, &resp, &err);
	free(body);
	if (rc != SHOAL_OK) {
		fprintf(stderr, "index_check: %s: %s: %s\n", op, err.exception, err.message);
		return NULL;
	}
	json_error_t jerr;
	json_t *out = json_loads(resp, 0, &jerr);
	shoal_free(resp);
	if (out == NULL)
		fprintf(stderr, "index_check: %s: unparsable answer: %s\n", op, jerr.text);
	return out;
}

/* Every item of the table (index NULL) or of an index, all pages. */
static json_t *scan_all(checker *k, const char *index)
{
	json_t *items = json_array();
	json_t *start = NULL;
	for (;;) {
		json_t *req = json_pack("{s:s}", "TableName", k->table);
		if (index != NULL)
			json_object_set_new(req, "IndexName", json_string(index));
		else
			json_object_set_new(req, "ConsistentRead", json_true());
		if (start != NULL)
			json_object_set(req, "ExclusiveStartKey", start);
		json_t *resp = call(k, "Scan", req);
		json_decref(req);
		json_decref(start);
		start = NULL;
		if (resp == NULL) {
			json_decref(items);
			return NULL;
		}
		json_array_extend(items, json_object_get(resp, "Items"));
		start = json_object_get(resp, "LastEvaluatedKey");
		json_incref(start);
		json_decref(resp);
		if (start == NULL)
			return items;
	}
}

/* The key schema's HASH and RANGE attribute names. */
static void key_schema(json_t *ks, const char **hash, const char **range)
{
	*hash = *range = NULL;
	size_t i;
	json_t *e;
	json_array_foreach(ks, i, e)
	{
		const char *type = json_string_value(json_object_get(e, "KeyType"));
		const char *name = json_string_value(json_object_get(e, "AttributeName"));
		if (type != NULL && strcmp(type, "HASH") == 0)
			*hash = name;
		else if (type != NULL && strcmp(type, "RANGE") == 0)
			*range = name;
	}
}

/* Whether item has attribute name with its defined scalar type. */
static bool has_key(checker *k, json_t *item, const char *name)
{
	json_t *v = json_object_get(item, name);
	const char *type = json_string_value(json_object_get(k->attr_type, name));
	return v != NULL && type != NULL && json_object_get(v, type) != NULL;
}

/* The table key of an item as a canonical string (map key). */
static char *table_key(checker *k, json_t *item)
{
	json_t *key = json_object();
	json_object_set(key, k->hash, json_object_get(item, k->hash));
	if (k->range != NULL)
		json_object_set(key, k->range, json_object_get(item, k->range));
	char *s = json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(key);
	return s;
}

/* The entry index `x` should hold for item, or NULL when it has none. */
static json_t *expected_entry(checker *k, json_t *x, json_t *item)
{
	const char *ih, *ir;
	key_schema(json_object_get(x, "KeySchema"), &ih, &ir);
	if (ih == NULL || !has_key(k, item, ih) || (ir != NULL && !has_key(k, item, ir)))
		return NULL;
	json_t *proj = json_object_get(x, "Projection");
	const char *ptype = json_string_value(json_object_get(proj, "ProjectionType"));
	if (ptype == NULL || strcmp(ptype, "ALL") == 0)
		return json_deep_copy(item);
	json_t *e = json_object();
	const char *keys[] = {k->hash, k->range, ih, ir};
	for (size_t i = 0; i < 4; i++)
		if (keys[i] != NULL && json_object_get(item, keys[i]) != NULL)
			json_object_set(e, keys[i], json_object_get(item, keys[i]));
	if (strcmp(ptype, "INCLUDE") == 0) {
		size_t i;
		json_t *n;
		json_array_foreach(json_object_get(proj, "NonKeyAttributes"), i, n)
		{
			json_t *v = json_object_get(item, json_string_value(n));
			if (v != NULL)
				json_object_set(e, json_string_value(n), v);
		}
	}
	return e;
}

/* Compares one index; returns the number of differences (printed). */
static long check_index(checker *k, json_t *x, json_t *items, bool *failed)
{
	const char *name = json_string_value(json_object_get(x, "IndexName"));
	json_t *want = json_object();
	size_t i;
	json_t *item;
	json_array_foreach(items, i, item)
	{
		json_t *e = expected_entry(k, x, item);
		if (e == NULL)
			continue;
		char *key = table_key(k, item);
		json_object_set_new(want, key, e);
		free(key);
	}
	json_t *got = scan_all(k, name);
	if (got == NULL) {
		json_decref(want);
		*failed = true;
		return 0;
	}
	long diffs = 0;
	unsigned shown = 0;
#define DIFF(...)                                                                                  \
	do {                                                                                       \
		diffs++;                                                                           \
		if (shown++ < k->max_diffs)                                                        \
			printf(__VA_ARGS__);                                                       \
	} while (0)
	json_t *seen = json_object();
	json_array_foreach(got, i, item)
	{
		char *key = table_key(k, item);
		json_t *w = json_object_get(want, key);
		if (json_object_get(seen, key) != NULL) {
			DIFF("%s: duplicate entry for %s\n", name, key);
		} else if (w == NULL) {
			char *s = json_dumps(item, JSON_COMPACT | JSON_SORT_KEYS);
			DIFF("%s: unexpected entry %s\n", name, s);
			free(s);
		} else if (!json_equal(w, item)) {
			char *a = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
			char *b = json_dumps(item, JSON_COMPACT | JSON_SORT_KEYS);
			DIFF("%s: entry for %s differs:\n  want %s\n  got  %s\n", name, key, a, b);
			free(a);
			free(b);
		}
		json_object_set_new(seen, key, json_true());
		free(key);
	}
	const char *key;
	json_t *w;
	json_object_foreach(want, key, w)
	{
		if (json_object_get(seen, key) == NULL)
			DIFF("%s: missing entry for %s\n", name, key);
	}
	printf("%s: %zu expected, %zu found, %ld difference%s\n", name, json_object_size(want),
	       json_array_size(got), diffs, diffs == 1 ? "" : "s");
	json_decref(seen);
	json_decref(got);
	json_decref(want);
	return diffs;
}

int main(int argc, char **argv)
{
	const char *endpoint = getenv("SHOAL_ENDPOINT");
	const char *only = NULL;
	checker k = {.max_diffs = 20};
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--endpoint") == 0 && i + 1 < argc)
			endpoint = argv[++i];
		else if (strcmp(argv[i], "--table-name") == 0 && i + 1 < argc)
			k.table = argv[++i];
		else if (strcmp(argv[i], "--index-name") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--max-diffs") == 0 && i + 1 < argc)
			k.max_diffs = (unsigned)strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: index_check [--endpoint E] --table-name T "
			                "[--index-name I] [--max-diffs N]\n");
			return 2;
		}
	}
	if (k.table == NULL) {
		fprintf(stderr, "index_check: --table-name is required\n");
		return 2;
	}
	char errmsg[SH_ERRMSG_SIZE];
	if (shoal_client_new(endpoint, NULL, &k.c, errmsg) != SHOAL_OK) {
		fprintf(stderr, "index_check: %s\n", errmsg);
		return 2;
	}
	int status = 2;
	json_t *req = json_pack("{s:s}", "TableName", k.table);
	json_t *d = call(&k, "DescribeTable", req);
	json_decref(req);
	json_t *items = NULL;
	if (d == NULL)
		goto out;
	k.desc = json_object_get(d, "Table");
	k.attr_type = json_object();
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(k.desc, "AttributeDefinitions"), i, a)
	    json_object_set(k.attr_type, json_string_value(json_object_get(a, "AttributeName")),
	                    json_object_get(a, "AttributeType"));
	key_schema(json_object_get(k.desc, "KeySchema"), &k.hash, &k.range);
	if (k.hash == NULL) {
		fprintf(stderr, "index_check: DescribeTable gave no HASH key\n");
		goto out;
	}
	items = scan_all(&k, NULL);
	if (items == NULL)
		goto out;
	printf("%s: %zu items\n", k.table, json_array_size(items));
	long diffs = 0;
	unsigned checked = 0;
	bool failed = false;
	const char *kinds[] = {"GlobalSecondaryIndexes", "LocalSecondaryIndexes"};
	for (size_t n = 0; n < 2; n++) {
		json_t *x;
		json_array_foreach(json_object_get(k.desc, kinds[n]), i, x)
		{
			const char *name = json_string_value(json_object_get(x, "IndexName"));
			if (only != NULL && (name == NULL || strcmp(name, only) != 0))
				continue;
			checked++;
			diffs += check_index(&k, x, items, &failed);
		}
	}
	if (only != NULL && checked == 0) {
		fprintf(stderr, "index_check: table %s has no index %s\n", k.table, only);
		goto out;
	}
	status = failed ? 2 : diffs > 0 ? 1 : 0;
out:
	json_decref(items);
	json_decref(k.attr_type);
	json_decref(d);
	shoal_client_free(k.c);
	return status;
}
