/*
 * fuzz_expr -- DynamoDB's expression language as the storage engine parses
 * it (storage/expr_lex.c, expr_parse.c, expr_check.c: st_expr_parse), and
 * what parses used as the engine uses it: evaluated (condition, filter),
 * applied (update, projection) to an item, or matched against a key schema
 * (key condition) -- fz_expr_one.  The names and values are fixed (those of
 * tests/unit/test_expr_fuzz.c, the random test this complements); the
 * request fuzzers (fuzz_request, fuzz_json) vary them too.
 *
 * Input: one byte for the kind (mod 5: condition, filter, key condition,
 * update, projection), then the expression text (up to the first NUL).
 * Seeds: tests/fuzz/corpus/expr/.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/harness.h"

#define NAMES "{\"#a\": \"a\", \"#b\": \"b\", \"#k\": \"pk\", \"#d\": \"a.b\"}"
#define VALUES                                                                                     \
	"{\":s\": {\"S\": \"x\"}, \":s2\": {\"S\": \"xy\"}, \":n\": {\"N\": \"5\"}, \":n2\": "     \
	"{\"N\": \"-1.5\"}, \":b\": {\"B\": \"YWI=\"}, \":t\": {\"S\": \"S\"}, \":l\": {\"L\": "   \
	"[{\"N\": \"1\"}]}, \":m\": {\"M\": {\"a\": {\"N\": \"1\"}}}, \":ss\": {\"SS\": "          \
	"[\"x\"]}, \":ns\": {\"NS\": [\"1\"]}, \":bs\": {\"BS\": [\"YWI=\"]}, \":bool\": "         \
	"{\"BOOL\": true}, \":null\": {\"NULL\": true}, \":big\": {\"N\": \"9E125\"}}"
#define ITEM                                                                                       \
	"{\"pk\": {\"S\": \"k\"}, \"sk\": {\"N\": \"3\"}, \"a\": {\"M\": {\"b\": {\"L\": "         \
	"[{\"N\": "                                                                                \
	"\"1\"}, {\"S\": \"x\"}]}, \"c\": {\"N\": \"9E125\"}}}, \"b\": {\"S\": \"xyz\"}, \"c\": "  \
	"{\"SS\": [\"x\", \"y\"]}, \"d\": {\"L\": [{\"L\": [{\"N\": \"2\"}]}, {\"M\": {}}]}, "     \
	"\"e\": {\"N\": \"3\"}, \"a.b\": {\"B\": \"YWI=\"}}"
#define KEY "{\"pk\": {\"S\": \"k\"}, \"sk\": {\"N\": \"3\"}}"

static sh_arena fixed;
static st_value names, values, item, key;

static void load(int (*conv)(sh_arena *, const char *, size_t, st_value *, char *),
                 const char *text, st_value *out)
{
	char m[SH_ERRMSG_SIZE] = "";
	int rc = conv(&fixed, text, strlen(text), out, m);
	FZ_ASSERT(rc == SHOAL_OK, "fixed value %s: %s", text, m);
	rc = st_value_normalize(&fixed, out, m);
	FZ_ASSERT(rc == SHOAL_OK, "fixed value %s: %s", text, m);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	sh_arena_init(&fixed);
	load(wire_names_from_text, NAMES, &names);
	load(wire_item_from_text, VALUES, &values);
	load(wire_item_from_text, ITEM, &item);
	load(wire_item_from_text, KEY, &key);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	st_expr_kind kind = (st_expr_kind)(data[0] % 5);
	char *text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	st_expr_attrs attrs = {.names = &names, .values = &values};
	(void)fz_expr_one(&attrs, kind, text, &item, &key);
	free(text);
	fz_reset();
	return 0;
}
