/* Randomised robustness of the expression module: random token soup from
 * the grammar's alphabet, and mutations and truncations of valid
 * expressions of every kind.  st_expr_parse must answer SHOAL_OK or
 * SHOAL_E_VALIDATION with a message, and whatever parses must evaluate,
 * update, project and match key schemas without crashing.  Run under ASan
 * and UBSan (make SANITIZE=address,undefined) for memory errors and leaks;
 * all memory is arena memory, reset every round and freed at the end. */
#include <check.h>
#include <string.h>

#include "storage/expr.h"
#include "tests/lib/tl_values.h"

#define NAMES "{\"#a\": \"a\", \"#b\": \"b\", \"#k\": \"pk\", \"#d\": \"a.b\"}"
#define VALUES                                                                                     \
	"{\":s\": {\"S\": \"x\"}, \":s2\": {\"S\": \"xy\"}, \":n\": {\"N\": \"5\"}, \":n2\": "     \
	"{\"N\": \"-1.5\"}, \":b\": {\"B\": \"ab\"}, \":t\": {\"S\": \"S\"}, \":l\": {\"L\": "     \
	"[{\"N\": \"1\"}]}, \":m\": {\"M\": {\"a\": {\"N\": \"1\"}}}, \":ss\": {\"SS\": "          \
	"[\"x\"]}, "                                                                               \
	"\":ns\": {\"NS\": [\"1\"]}, \":bs\": {\"BS\": [\"ab\"]}, \":bool\": {\"BOOL\": true}, "   \
	"\":null\": {\"NULL\": true}, \":big\": {\"N\": \"9E125\"}}"
#define ITEM                                                                                       \
	"{\"pk\": {\"S\": \"k\"}, \"a\": {\"M\": {\"b\": {\"L\": [{\"N\": \"1\"}, {\"S\": "        \
	"\"x\"}]}, \"c\": {\"N\": \"9E125\"}}}, \"b\": {\"S\": \"xyz\"}, \"c\": {\"SS\": [\"x\", " \
	"\"y\"]}, \"d\": {\"L\": [{\"L\": [{\"N\": \"2\"}]}, {\"M\": {}}]}, \"e\": {\"N\": "       \
	"\"3\"}, "                                                                                 \
	"\"a.b\": {\"B\": \"ab\"}}"

static const char *const alphabet[] = {
    "a",
    "b",
    "c",
    "d",
    "e",
    "pk",
    "x1_",
    "size",
    "contains",
    "begins_with",
    "attribute_exists",
    "attribute_not_exists",
    "attribute_type",
    "if_not_exists",
    "list_append",
    "foo",
    "status",
    "#a",
    "#b",
    "#k",
    "#d",
    "#zz",
    ":s",
    ":s2",
    ":n",
    ":n2",
    ":b",
    ":t",
    ":l",
    ":m",
    ":ss",
    ":ns",
    ":bs",
    ":bool",
    ":null",
    ":big",
    ":zz",
    "AND",
    "OR",
    "NOT",
    "BETWEEN",
    "IN",
    "and",
    "not",
    "SET",
    "REMOVE",
    "ADD",
    "DELETE",
    "set",
    "(",
    ")",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "0",
    "1",
    "12",
    "007",
    " ",
    "  ",
    "\t",
    "\n",
    "#",
    ":",
    "_",
    "\"",
    "'",
    "\"q\"",
    "!",
    "\xc3\xa9",
    "\xff",
    "*",
    "/",
    "{",
    "$",
};
#define NALPHA (sizeof(alphabet) / sizeof(alphabet[0]))

static const struct {
	st_expr_kind kind;
	const char *text;
} corpus[] = {
    {ST_EXPR_CONDITION, "#a.b[1] = :s AND (c IN (:s, :n, d) OR NOT begins_with(b, :s))"},
    {ST_EXPR_CONDITION, "attribute_not_exists(pk) OR size(a.b) BETWEEN :n2 AND :n"},
    {ST_EXPR_CONDITION, "contains(c, :s) AND attribute_type(e, :t) AND e <> :n"},
    {ST_EXPR_FILTER, "(a.c > :n) AND NOT (b < :s2 OR size(c) >= :n) AND d[0][0] = :n"},
    {ST_EXPR_FILTER, "#d = :b AND a.b[0] IN (:n, :n2) AND begins_with(#d, :b)"},
    {ST_EXPR_KEY_CONDITION, "#k = :s AND b BETWEEN :s AND :s2"},
    {ST_EXPR_KEY_CONDITION, "pk = :s AND begins_with(e, :s)"},
    {ST_EXPR_KEY_CONDITION, ":s = pk AND e <= :n"},
    {ST_EXPR_UPDATE, "SET a.b[1] = :s, e = e + :n, f = list_append(if_not_exists(f, :l), :l) "
                     "REMOVE d[0], b ADD g :ns, h :n DELETE c :ss"},
    {ST_EXPR_UPDATE, "SET x = if_not_exists(y, :n) - :n2, a.c = a.c + :big, d[5] = :m"},
    {ST_EXPR_UPDATE, "REMOVE a.b[0], a.b[1] SET #d = :b ADD c :ss"},
    {ST_EXPR_PROJECTION, "pk, a.b[1], #d, d[1], d[0][0], zz.y"},
    {ST_EXPR_PROJECTION, "#a.c, b, c"},
};
#define NCORPUS (sizeof(corpus) / sizeof(corpus[0]))

typedef struct fuzz {
	sh_arena a;     /* reset every round */
	sh_arena fixed; /* the maps and items, for the whole test */
	st_expr_attrs attrs;
	st_value *item, *key;
	uint64_t rng;
	long parsed, refused;
} fuzz;

static void fuzz_init(fuzz *f, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	f->rng = seed;
	sh_arena_init(&f->a);
	sh_arena_init(&f->fixed);
	f->attrs.names = tl_json_names(&f->fixed, NAMES);
	f->attrs.values = tl_json_item(&f->fixed, VALUES);
	f->item = tl_json_item(&f->fixed, ITEM);
	f->key = tl_json_item(&f->fixed, "{\"pk\": {\"S\": \"k\"}}");
}

static void fuzz_fini(fuzz *f)
{
	sh_arena_fini(&f->a);
	sh_arena_fini(&f->fixed);
}

static unsigned rnd(fuzz *f, unsigned n)
{
	return (unsigned)(tl_rand(&f->rng) % n);
}

/* Parses text as kind and uses whatever parses. */
static void exercise(fuzz *f, st_expr_kind kind, const char *text)
{
	const st_value *item = f->item, *key = f->key;
	st_expr_ctx ctx;
	char msg[SH_ERRMSG_SIZE];
	st_expr *e = NULL;
	ck_assert_int_eq(st_expr_ctx_init(&ctx, &f->a, &f->attrs, msg), SHOAL_OK);
	msg[0] = '\0';
	int rc = st_expr_parse(&ctx, kind, text, &e, msg);
	if (rc != SHOAL_OK) {
		ck_assert_msg(rc == SHOAL_E_VALIDATION, "[%s] rc %d: %s", text, rc, msg);
		ck_assert_msg(msg[0] != '\0' && strlen(msg) < SH_ERRMSG_SIZE, "[%s] no message",
		              text);
		ck_assert_ptr_null(e);
		f->refused++;
		return;
	}
	f->parsed++;
	ck_assert_ptr_nonnull(e);
	(void)st_expr_ctx_check_unused(&ctx, msg);
	bool r;
	st_value *out, *proj;
	st_key_cond kc;
	st_key_schema ks = {.hash = {"pk", ST_S}, .range = {"e", ST_N}};
	switch (kind) {
	case ST_EXPR_CONDITION:
	case ST_EXPR_FILTER:
		ck_assert_int_eq(st_expr_eval(e, item, &r, msg), SHOAL_OK);
		ck_assert_int_eq(st_expr_eval(e, NULL, &r, msg), SHOAL_OK);
		break;
	case ST_EXPR_KEY_CONDITION:
		rc = st_expr_key_condition(e, &ks, &kc, msg);
		ck_assert_msg(rc == SHOAL_OK || (rc == SHOAL_E_VALIDATION && msg[0] != '\0'),
		              "[%s] %d %s", text, rc, msg);
		break;
	case ST_EXPR_UPDATE:
		for (int i = 0; i < 2; i++) {
			msg[0] = '\0';
			rc = st_expr_update(e, &f->a, i ? NULL : item, key, &out, msg);
			ck_assert_msg(rc == SHOAL_OK ||
			                  (rc == SHOAL_E_VALIDATION && msg[0] != '\0'),
			              "[%s] %d %s", text, rc, msg);
			if (rc == SHOAL_OK) {
				ck_assert_int_eq(out->type, ST_M);
				ck_assert_int_eq(st_expr_update_project(e, &f->a, out, &proj, msg),
				                 SHOAL_OK);
			}
		}
		ck_assert_int_eq(st_expr_update_project(e, &f->a, item, &proj, msg), SHOAL_OK);
		break;
	case ST_EXPR_PROJECTION:
		ck_assert_int_eq(st_expr_project(e, &f->a, item, &out, msg), SHOAL_OK);
		ck_assert_int_eq(out->type, ST_M);
		break;
	}
	(void)st_expr_refs_attr(e, "a", 1);
}

static st_expr_kind random_kind(fuzz *f)
{
	return (st_expr_kind)rnd(f, 5);
}

START_TEST(test_token_soup)
{
	fuzz f;
	fuzz_init(&f, tl_seed());
	char buf[ST_MAX_EXPR_SIZE + 64];
	for (int i = 0; i < 20000; i++) {
		size_t off = 0;
		unsigned n = 1 + rnd(&f, i % 100 == 0 ? 2000 : 24);
		for (unsigned j = 0; j < n && off < ST_MAX_EXPR_SIZE + 16; j++) {
			const char *t = alphabet[rnd(&f, NALPHA)];
			size_t len = strlen(t);
			memcpy(buf + off, t, len);
			off += len;
			if (rnd(&f, 3) == 0)
				buf[off++] = ' ';
		}
		buf[off] = '\0';
		exercise(&f, random_kind(&f), buf);
		sh_arena_reset(&f.a);
	}
	/* Both outcomes happen, or the generator is broken. */
	ck_assert_int_gt(f.refused, 0);
	fuzz_fini(&f);
}
END_TEST

START_TEST(test_mutations)
{
	fuzz f;
	fuzz_init(&f, tl_seed() ^ 0x5eed);
	char buf[2 * ST_MAX_EXPR_SIZE];
	/* The corpus itself is valid. */
	for (size_t i = 0; i < NCORPUS; i++) {
		long before = f.parsed;
		exercise(&f, corpus[i].kind, corpus[i].text);
		ck_assert_msg(f.parsed == before + 1, "corpus entry %zu does not parse", i);
	}
	for (int i = 0; i < 40000; i++) {
		unsigned c = rnd(&f, NCORPUS);
		size_t len = strlen(corpus[c].text);
		memcpy(buf, corpus[c].text, len + 1);
		unsigned rounds = 1 + rnd(&f, 3);
		for (unsigned r = 0; r < rounds; r++) {
			len = strlen(buf);
			size_t at = len ? rnd(&f, (unsigned)len + 1) : 0;
			switch (rnd(&f, 6)) {
			case 0: /* truncate */
				buf[at] = '\0';
				break;
			case 1: { /* delete a range */
				size_t n = 1 + rnd(&f, 8);
				if (at + n > len)
					n = len - at;
				memmove(buf + at, buf + at + n, len - at - n + 1);
				break;
			}
			case 2: { /* insert a token */
				const char *t = alphabet[rnd(&f, NALPHA)];
				size_t n = strlen(t);
				memmove(buf + at + n, buf + at, len - at + 1);
				memcpy(buf + at, t, n);
				break;
			}
			case 3: /* replace a byte */
				if (at < len)
					buf[at] = (char)(1 + rnd(&f, 255));
				break;
			case 4: { /* duplicate a chunk */
				size_t n = rnd(&f, 16);
				if (at + n > len)
					n = len - at;
				if (len + n < sizeof(buf) / 2) {
					memmove(buf + at + n, buf + at, len - at + 1);
					memcpy(buf + at + n, buf + at, n);
				}
				break;
			}
			default: { /* swap two bytes */
				size_t b = len ? rnd(&f, (unsigned)len) : 0;
				if (at < len && b < len) {
					char t = buf[at];
					buf[at] = buf[b];
					buf[b] = t;
				}
				break;
			}
			}
		}
		/* Usually as its own kind, sometimes as another. */
		st_expr_kind kind = rnd(&f, 4) ? corpus[c].kind : random_kind(&f);
		exercise(&f, kind, buf);
		sh_arena_reset(&f.a);
	}
	ck_assert_int_gt(f.parsed, (long)NCORPUS);
	ck_assert_int_gt(f.refused, 0);
	fuzz_fini(&f);
}
END_TEST

static Suite *expr_fuzz_suite(void)
{
	return tl_suite("expr_fuzz", NULL, NULL, 60, TL_TESTS(test_token_soup, test_mutations));
}

TL_MAIN(expr_fuzz_suite)
