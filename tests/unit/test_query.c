/* Query: key conditions, order, pagination, page size, filters, long sort keys. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static void open_env(uint32_t page_bytes)
{
	st_env_options o = {.map_size = 1ull << 30, .nosync = true, .page_bytes = page_bytes};
	tl_store_open("query", &o);
}

static void setup(void)
{
	open_env(0);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* The S attribute `name` of an item as a NUL-terminated string. */
static const char *str_attr(const st_value *item, const char *name)
{
	const st_value *v = attr(item, name);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, ST_S);
	return sh_arena_strndup(&tl_arena, v->u.str.ptr, v->u.str.len);
}

static int query(st_query_req *r, st_page *p)
{
	return st_query(tl_env, r, &tl_arena, p, tl_msg);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ------------------------------------------------------------------------ */
/* Operators on S sort keys                                                  */
/* ------------------------------------------------------------------------ */

static const char *const SKS[] = {"a", "ab", "abc", "abd",       "b", "ba", "bb", "c", "ca", "d",
                                  "e", "ee", "eee", "f\xc3\xa9", "z", "zz", "A",  "Z", "0",  "9"};
#define NSKS (sizeof(SKS) / sizeof(SKS[0]))

static void load_s(void)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	for (size_t i = 0; i < NSKS; i++) {
		tl_put("tbl", map("PK", S("p"), "SK", S(SKS[i]), "i", N("1"), NULL));
		/* Neighbouring partitions with the same sort keys must never leak in. */
		tl_put("tbl", map("PK", S("o"), "SK", S(SKS[i]), NULL));
		tl_put("tbl", map("PK", S("q"), "SK", S(SKS[i]), NULL));
	}
}

enum op { OP_NONE, OP_EQ, OP_LT, OP_LE, OP_GT, OP_GE, OP_BETWEEN, OP_BEGINS };

static bool s_match(enum op op, const char *sk, const char *a, const char *b)
{
	switch (op) {
	case OP_NONE:
		return true;
	case OP_EQ:
		return strcmp(sk, a) == 0;
	case OP_LT:
		return strcmp(sk, a) < 0;
	case OP_LE:
		return strcmp(sk, a) <= 0;
	case OP_GT:
		return strcmp(sk, a) > 0;
	case OP_GE:
		return strcmp(sk, a) >= 0;
	case OP_BETWEEN:
		return strcmp(sk, a) >= 0 && strcmp(sk, b) <= 0;
	case OP_BEGINS:
		return strncmp(sk, a, strlen(a)) == 0;
	}
	return false;
}

static const char *kc_text(enum op op)
{
	switch (op) {
	case OP_NONE:
		return "PK = :p";
	case OP_EQ:
		return "PK = :p AND SK = :a";
	case OP_LT:
		return "PK = :p AND SK < :a";
	case OP_LE:
		return "PK = :p AND SK <= :a";
	case OP_GT:
		return "PK = :p AND SK > :a";
	case OP_GE:
		return "PK = :p AND SK >= :a";
	case OP_BETWEEN:
		return "PK = :p AND SK BETWEEN :a AND :b";
	case OP_BEGINS:
		return "PK = :p AND begins_with(SK, :a)";
	}
	return NULL;
}

static st_value *kc_values(enum op op, st_value *p, st_value *a, st_value *b)
{
	if (op == OP_NONE)
		return map(":p", p, NULL);
	if (op == OP_BETWEEN)
		return map(":p", p, ":a", a, ":b", b, NULL);
	return map(":p", p, ":a", a, NULL);
}

/* Checks one string query, whole and page by page, against the oracle. */
static void check_s_query(enum op op, const char *a, const char *b, bool forward)
{
	const char *sorted[NSKS];
	memcpy(sorted, SKS, sizeof(sorted));
	qsort(sorted, NSKS, sizeof(sorted[0]), cmp_str);
	const char *want[NSKS];
	size_t nwant = 0;
	for (size_t i = 0; i < NSKS; i++) {
		size_t j = forward ? i : NSKS - 1 - i;
		if (s_match(op, sorted[j], a, b))
			want[nwant++] = sorted[j];
	}
	for (uint32_t limit = 0; limit <= 3; limit++) {
		st_query_req r = {
		    .table = "tbl",
		    .key_condition = kc_text(op),
		    .attrs = {NULL, kc_values(op, S("p"), S(a), S(b != NULL ? b : a))},
		    .forward = forward,
		    .limit = limit};
		uint32_t n, pages;
		st_value *items = tl_query_all(&r, &n, &pages, NULL);
		ck_assert_msg(n == nwant, "%s a=%s b=%s fwd=%d limit=%u: %u items, want %zu",
		              kc_text(op), a, b != NULL ? b : "", forward, limit, n, nwant);
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_str_eq(str_attr(&items[i], "PK"), "p");
			ck_assert_str_eq(str_attr(&items[i], "SK"), want[i]);
		}
		if (limit == 0)
			ck_assert_uint_eq(pages, 1);
	}
}

START_TEST(test_s_operators)
{
	load_s();
	static const char *const operands[] = {"",  "0", "a",  "ab", "abc", "abz", "b",   "bz",
	                                       "c", "e", "ee", "f",  "z",   "zzz", "\x7f"};
	for (int fwd = 0; fwd < 2; fwd++) {
		check_s_query(OP_NONE, "", NULL, fwd);
		for (size_t i = 0; i < sizeof(operands) / sizeof(operands[0]); i++) {
			const char *o = operands[i];
			if (o[0] == '\0')
				continue; /* an empty key value is refused */
			check_s_query(OP_EQ, o, NULL, fwd);
			check_s_query(OP_LT, o, NULL, fwd);
			check_s_query(OP_LE, o, NULL, fwd);
			check_s_query(OP_GT, o, NULL, fwd);
			check_s_query(OP_GE, o, NULL, fwd);
			check_s_query(OP_BEGINS, o, NULL, fwd);
			for (size_t j = 0; j < sizeof(operands) / sizeof(operands[0]); j++)
				if (operands[j][0] != '\0' && strcmp(o, operands[j]) <= 0)
					check_s_query(OP_BETWEEN, o, operands[j], fwd);
		}
	}
}
END_TEST

START_TEST(test_missing_partition)
{
	load_s();
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, map(":p", S("nothing"), NULL)},
	                  .forward = true};
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
	ck_assert_uint_eq(p.scanned, 0);
	ck_assert_ptr_nonnull(p.items);
	ck_assert_ptr_null(p.last_evaluated_key);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Number and binary sort keys                                               */
/* ------------------------------------------------------------------------ */

/* In numeric order. */
static const char *const NUMS[] = {
    "-9.9999999999999999999999999999999999999E+125",
    "-1e10",
    "-123.456",
    "-100",
    "-99.99",
    "-10.5",
    "-10",
    "-1",
    "-0.5",
    "-0.001",
    "-1E-130",
    "0",
    "1E-130",
    "0.001",
    "0.0011",
    "0.5",
    "1",
    "1.5",
    "2",
    "9.99",
    "10",
    "10.01",
    "99",
    "100",
    "1e10",
    "12345678901234567890123456789012345678",
    "9.9999999999999999999999999999999999999E+125",
};
#define NNUMS (sizeof(NUMS) / sizeof(NUMS[0]))

START_TEST(test_number_order)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	uint64_t seed = tl_seed();
	/* Insert in a shuffled order. */
	size_t order[NNUMS];
	for (size_t i = 0; i < NNUMS; i++)
		order[i] = i;
	for (size_t i = NNUMS - 1; i > 0; i--) {
		size_t j = tl_rand(&seed) % (i + 1);
		size_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < NNUMS; i++) {
		char idx[32];
		snprintf(idx, sizeof(idx), "%zu", order[i]);
		tl_put("tbl", map("PK", S("n"), "SK", N(NUMS[order[i]]), "idx", N(idx), NULL));
	}
	for (int fwd = 0; fwd < 2; fwd++) {
		st_query_req r = {.table = "tbl",
		                  .key_condition = "PK = :p",
		                  .attrs = {NULL, map(":p", S("n"), NULL)},
		                  .forward = fwd};
		st_page p;
		tl_query_ok(&r, &p);
		ck_assert_uint_eq(p.count, NNUMS);
		for (size_t i = 0; i < NNUMS; i++) {
			size_t want = fwd ? i : NNUMS - 1 - i;
			ck_assert_msg(st_value_equal(attr(&p.items[i], "SK"), N(NUMS[want])),
			              "position %zu: want %s", i, NUMS[want]);
		}
	}
	/* Numeric, not textual, bounds: -10.5 <= SK < 2 and SK BETWEEN -1 AND 10. */
	struct {
		const char *kc;
		const char *a, *b;
		size_t first, last; /* indexes into NUMS, inclusive */
	} cases[] = {
	    {"PK = :p AND SK BETWEEN :a AND :b", "-1", "10", 7, 20},
	    {"PK = :p AND SK BETWEEN :a AND :b", "-1.0", "1e1", 7, 20},
	    {"PK = :p AND SK >= :a", "-10.5", NULL, 5, NNUMS - 1},
	    {"PK = :p AND SK > :a", "-10.5", NULL, 6, NNUMS - 1},
	    {"PK = :p AND SK < :a", "0", NULL, 0, 10},
	    {"PK = :p AND SK <= :a", "0.00", NULL, 0, 11},
	    {"PK = :p AND SK = :a", "1.50", NULL, 17, 17},
	    {"PK = :p AND SK > :a", "0.00105", NULL, 14, NNUMS - 1},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (int fwd = 0; fwd < 2; fwd++) {
			st_value *vals =
			    cases[c].b != NULL
			        ? map(":p", S("n"), ":a", N(cases[c].a), ":b", N(cases[c].b), NULL)
			        : map(":p", S("n"), ":a", N(cases[c].a), NULL);
			st_query_req r = {.table = "tbl",
			                  .key_condition = cases[c].kc,
			                  .attrs = {NULL, vals},
			                  .forward = fwd,
			                  .limit = 2};
			uint32_t n, pages;
			st_value *items = tl_query_all(&r, &n, &pages, NULL);
			ck_assert_uint_eq(n, cases[c].last - cases[c].first + 1);
			for (uint32_t i = 0; i < n; i++) {
				size_t want = fwd ? cases[c].first + i : cases[c].last - i;
				ck_assert_msg(st_value_equal(attr(&items[i], "SK"), N(NUMS[want])),
				              "%s %s: position %u", cases[c].kc, cases[c].a, i);
			}
		}
	}
}
END_TEST

START_TEST(test_binary_order)
{
	tl_create_table("tbl", "PK", ST_B, "SK", ST_B);
	/* In unsigned byte order. */
	static const struct {
		const char *b;
		size_t n;
	} bins[] = {
	    {"\x00", 1},     {"\x00\x00", 2}, {"\x00\x01", 2},     {"\x00\xff", 2},     {"\x01", 1},
	    {"\x01\x00", 2}, {"\x7f", 1},     {"\x80", 1},         {"\xfe\xff\xff", 3}, {"\xff", 1},
	    {"\xff\x00", 2}, {"\xff\xff", 2}, {"\xff\xff\x00", 3}, {"\xff\xff\xff", 3},
	};
	size_t nb = sizeof(bins) / sizeof(bins[0]);
	for (size_t i = nb; i-- > 0;)
		tl_put("tbl", map("PK", B("k\0y", 3), "SK", B(bins[i].b, bins[i].n), NULL));
	tl_put("tbl", map("PK", B("k", 1), "SK", B("\x00", 1), NULL));
	tl_put("tbl", map("PK", B("k\0z", 3), "SK", B("\x00", 1), NULL));
	for (int fwd = 0; fwd < 2; fwd++) {
		st_query_req r = {.table = "tbl",
		                  .key_condition = "PK = :p",
		                  .attrs = {NULL, map(":p", B("k\0y", 3), NULL)},
		                  .forward = fwd};
		st_page p;
		tl_query_ok(&r, &p);
		ck_assert_uint_eq(p.count, nb);
		for (size_t i = 0; i < nb; i++) {
			size_t w = fwd ? i : nb - 1 - i;
			ck_assert(st_value_equal(attr(&p.items[i], "SK"), B(bins[w].b, bins[w].n)));
		}
	}
	/* begins_with on bytes, including a zero byte and 0xff. */
	struct {
		const char *pre;
		size_t n;
		size_t first, last;
	} pres[] = {
	    {"\x00", 1, 0, 3}, {"\xff", 1, 9, 13}, {"\xff\xff", 2, 11, 13}, {"\x00\x00", 2, 1, 1}};
	for (size_t c = 0; c < sizeof(pres) / sizeof(pres[0]); c++) {
		for (int fwd = 0; fwd < 2; fwd++) {
			st_query_req r = {.table = "tbl",
			                  .key_condition = "PK = :p AND begins_with(SK, :a)",
			                  .attrs = {NULL, map(":p", B("k\0y", 3), ":a",
			                                      B(pres[c].pre, pres[c].n), NULL)},
			                  .forward = fwd};
			st_page p;
			tl_query_ok(&r, &p);
			ck_assert_uint_eq(p.count, pres[c].last - pres[c].first + 1);
			for (uint32_t i = 0; i < p.count; i++) {
				size_t w = fwd ? pres[c].first + i : pres[c].last - i;
				ck_assert(st_value_equal(attr(&p.items[i], "SK"),
				                         B(bins[w].b, bins[w].n)));
			}
		}
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Pagination                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_limit_every_page_size)
{
	enum { NITEMS = 23 };
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	for (int i = 0; i < NITEMS; i++) {
		char n[32];
		snprintf(n, sizeof(n), "%d", i * 3 - 30);
		tl_put("tbl", map("PK", S("p"), "SK", N(n), NULL));
	}
	tl_put("tbl", map("PK", S("p0"), "SK", N("1"), NULL));
	for (int fwd = 0; fwd < 2; fwd++) {
		for (uint32_t limit = 1; limit <= NITEMS + 1; limit++) {
			st_query_req r = {.table = "tbl",
			                  .key_condition = "PK = :p",
			                  .attrs = {NULL, map(":p", S("p"), NULL)},
			                  .forward = fwd,
			                  .limit = limit};
			uint32_t n, pages, scanned;
			st_value *items = tl_query_all(&r, &n, &pages, &scanned);
			ck_assert_uint_eq(n, NITEMS);
			ck_assert_uint_eq(scanned, NITEMS);
			/* The range is exact: no trailing empty page. */
			ck_assert_uint_eq(pages, (NITEMS + limit - 1) / limit);
			for (int i = 0; i < NITEMS; i++) {
				char want[32];
				snprintf(want, sizeof(want), "%d",
				         (fwd ? i : NITEMS - 1 - i) * 3 - 30);
				ck_assert(st_value_equal(attr(&items[i], "SK"), N(want)));
			}
		}
	}
}
END_TEST

START_TEST(test_limit_with_sort_condition)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	for (char c = 'a'; c <= 'z'; c++) {
		char sk[3] = {c, c, 0};
		tl_put("tbl", map("PK", S("p"), "SK", S(sk), NULL));
	}
	/* SK > "ff" AND SK <= "pp" both ways, every Limit. */
	const char *kcs[] = {"PK = :p AND SK BETWEEN :a AND :b", "PK = :p AND SK > :a",
	                     "PK = :p AND SK < :b"};
	size_t firsts[] = {5, 6, 0}, lasts[] = {15, 25, 14};
	for (size_t c = 0; c < 3; c++) {
		for (int fwd = 0; fwd < 2; fwd++) {
			for (uint32_t limit = 1; limit <= 27; limit++) {
				st_value *vals =
				    c == 0   ? map(":p", S("p"), ":a", S("ff"), ":b", S("pp"), NULL)
				    : c == 1 ? map(":p", S("p"), ":a", S("ff"), NULL)
				             : map(":p", S("p"), ":b", S("pp"), NULL);
				st_query_req r = {.table = "tbl",
				                  .key_condition = kcs[c],
				                  .attrs = {NULL, vals},
				                  .forward = fwd,
				                  .limit = limit};
				uint32_t n, pages;
				st_value *items = tl_query_all(&r, &n, &pages, NULL);
				ck_assert_uint_eq(n, lasts[c] - firsts[c] + 1);
				for (uint32_t i = 0; i < n; i++) {
					char want =
					    (char)('a' + (fwd ? firsts[c] + i : lasts[c] - i));
					char sk[3] = {want, want, 0};
					ck_assert_str_eq(str_attr(&items[i], "SK"), sk);
				}
			}
		}
	}
}
END_TEST

/* An item of exactly `size` bytes by st_item_size. */
static st_value *sized_item(const char *pk, const char *sk, size_t size)
{
	st_value *it = map("PK", S(pk), "SK", S(sk), NULL);
	size_t base = st_item_size(it) + strlen("data");
	ck_assert_uint_gt(size, base);
	char *data = malloc(size - base + 1);
	memset(data, 'x', size - base);
	data[size - base] = '\0';
	ck_assert_int_eq(st_map_set(&tl_arena, it, "data", 4, S(data)), SHOAL_OK);
	free(data);
	ck_assert_uint_eq(st_item_size(it), size);
	return it;
}

START_TEST(test_page_size_exact)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	/* Three items adding up to exactly 1 MiB fit one page. */
	size_t sizes[3] = {349525, 349525, 349526};
	ck_assert_uint_eq(sizes[0] + sizes[1] + sizes[2], ST_MAX_PAGE_BYTES);
	tl_put("tbl", sized_item("p", "a", sizes[0]));
	tl_put("tbl", sized_item("p", "b", sizes[1]));
	tl_put("tbl", sized_item("p", "c", sizes[2]));
	for (int fwd = 0; fwd < 2; fwd++) {
		st_query_req r = {.table = "tbl",
		                  .key_condition = "PK = :p",
		                  .attrs = {NULL, map(":p", S("p"), NULL)},
		                  .forward = fwd};
		st_page p;
		tl_query_ok(&r, &p);
		ck_assert_uint_eq(p.count, 3);
		ck_assert_uint_eq(p.scanned, 3);
		ck_assert_ptr_null(p.last_evaluated_key);
	}
	/* One more byte in the last item splits the page after two. */
	tl_put("tbl", sized_item("p", "c", sizes[2] + 1));
	for (int fwd = 0; fwd < 2; fwd++) {
		st_query_req r = {.table = "tbl",
		                  .key_condition = "PK = :p",
		                  .attrs = {NULL, map(":p", S("p"), NULL)},
		                  .forward = fwd};
		st_page p;
		tl_query_ok(&r, &p);
		ck_assert_uint_eq(p.count, 2);
		ck_assert_uint_eq(p.scanned, 2);
		ck_assert_ptr_nonnull(p.last_evaluated_key);
		ck_assert_str_eq(str_attr(p.last_evaluated_key, "SK"), "b");
		ck_assert_uint_eq(p.last_evaluated_key->u.map.n, 2);
		r.exclusive_start_key = p.last_evaluated_key;
		tl_query_ok(&r, &p);
		ck_assert_uint_eq(p.count, 1);
		ck_assert_str_eq(str_attr(&p.items[0], "SK"), fwd ? "c" : "a");
		ck_assert_ptr_null(p.last_evaluated_key);
	}
	/* Select COUNT and a filter do not change what a page reads. */
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .filter = "attribute_not_exists(nothing)",
	                  .attrs = {NULL, map(":p", S("p"), NULL)},
	                  .forward = true,
	                  .select = ST_SELECT_COUNT};
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 2);
	ck_assert_uint_eq(p.scanned, 2);
	ck_assert_ptr_null(p.items);
	ck_assert_ptr_nonnull(p.last_evaluated_key);
}
END_TEST

START_TEST(test_page_bytes_small)
{
	/* With a 100-byte page, a 150-byte item still makes a page of one. */
	tl_store_close();
	open_env(100);
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	tl_put("tbl", sized_item("p", "a", 150));
	tl_put("tbl", sized_item("p", "b", 40));
	tl_put("tbl", sized_item("p", "c", 40));
	tl_put("tbl", sized_item("p", "d", 20));
	tl_put("tbl", sized_item("p", "e", 150));
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, map(":p", S("p"), NULL)},
	                  .forward = true};
	/* Pages: {a}, {b, c, d} (100 bytes), {e}. */
	const char *want[][3] = {{"a", NULL, NULL}, {"b", "c", "d"}, {"e", NULL, NULL}};
	for (int pg = 0; pg < 3; pg++) {
		st_page p;
		tl_query_ok(&r, &p);
		for (uint32_t i = 0; i < 3; i++) {
			if (want[pg][i] == NULL) {
				ck_assert_uint_eq(p.count, i);
				break;
			}
			ck_assert_str_eq(str_attr(&p.items[i], "SK"), want[pg][i]);
		}
		if (pg < 2)
			ck_assert_ptr_nonnull(p.last_evaluated_key);
		else
			ck_assert_ptr_null(p.last_evaluated_key);
		r.exclusive_start_key = p.last_evaluated_key;
	}
}
END_TEST

START_TEST(test_filter_empty_pages)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	for (int i = 1; i <= 30; i++) {
		char n[32];
		snprintf(n, sizeof(n), "%d", i);
		tl_put("tbl",
		       map("PK", S("p"), "SK", N(n), "n", N(n), "odd", N(i % 2 ? "1" : "0"), NULL));
	}
	for (int fwd = 0; fwd < 2; fwd++) {
		for (uint32_t limit = 1; limit <= 31; limit++) {
			/* Only 3 items pass: most pages are empty but carry a key. */
			st_query_req r = {
			    .table = "tbl",
			    .key_condition = "PK = :p",
			    .filter = "n > :x OR n = :one",
			    .attrs = {NULL, map(":p", S("p"), ":x", N("28"), ":one", N("1"), NULL)},
			    .forward = fwd,
			    .limit = limit};
			uint32_t n, pages, scanned;
			st_value *items = tl_query_all(&r, &n, &pages, &scanned);
			ck_assert_uint_eq(scanned, 30);
			ck_assert_uint_eq(pages, (30 + limit - 1) / limit);
			ck_assert_uint_eq(n, 3);
			const char *want[3] = {"1", "29", "30"};
			for (int i = 0; i < 3; i++)
				ck_assert(st_value_equal(attr(&items[i], "SK"),
				                         N(want[fwd ? i : 2 - i])));
		}
	}
	/* A single page with Limit: Count counts matches, ScannedCount reads. */
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .filter = "odd = :one",
	                  .attrs = {NULL, map(":p", S("p"), ":one", N("1"), NULL)},
	                  .forward = true,
	                  .limit = 10};
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.scanned, 10);
	ck_assert_uint_eq(p.count, 5);
	ck_assert(st_value_equal(attr(p.last_evaluated_key, "SK"), N("10")));
	r.select = ST_SELECT_COUNT;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.scanned, 10);
	ck_assert_uint_eq(p.count, 5);
	ck_assert_ptr_null(p.items);
	r.limit = 0;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.scanned, 30);
	ck_assert_uint_eq(p.count, 15);
	ck_assert_ptr_null(p.last_evaluated_key);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Projection and Select                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_projection)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	st_value elems[3] = {*S("zero"), *S("one"), *S("two")};
	st_value l = {.type = ST_L, .u.list = {elems, 3}};
	tl_put("tbl", map("PK", S("p"), "SK", S("a"), "name", S("n1"), "size", N("3"), "m",
	                  map("x", N("1"), "y", S("why"), NULL), "l", &l, NULL));
	tl_put("tbl", map("PK", S("p"), "SK", S("b"), "name", S("n2"), NULL));
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .projection = "#n, m.y, l[2], SK",
	                  .attrs = {map("#n", S("name"), NULL), map(":p", S("p"), NULL)},
	                  .forward = true};
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 2);
	const st_value *a = &p.items[0];
	ck_assert_uint_eq(a->u.map.n, 4);
	ck_assert_str_eq(str_attr(a, "name"), "n1");
	ck_assert_str_eq(str_attr(a, "SK"), "a");
	ck_assert_ptr_null(attr(a, "PK"));
	ck_assert_ptr_null(attr(a, "size"));
	const st_value *m = attr(a, "m");
	ck_assert_uint_eq(m->u.map.n, 1);
	ck_assert_str_eq(str_attr(m, "y"), "why");
	const st_value *pl = attr(a, "l");
	ck_assert_uint_eq(pl->u.list.n, 1);
	ck_assert(st_value_equal(&pl->u.list.v[0], S("two")));
	ck_assert_uint_eq(p.items[1].u.map.n, 2);
	/* SPECIFIC_ATTRIBUTES with a projection is the same request. */
	r.select = ST_SELECT_SPECIFIC_ATTRIBUTES;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 2);
	ck_assert_uint_eq(p.items[0].u.map.n, 4);
	/* ALL_ATTRIBUTES without one returns whole items. */
	r.select = ST_SELECT_ALL_ATTRIBUTES;
	r.projection = NULL;
	r.attrs.names = NULL;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.items[0].u.map.n, 6);
}
END_TEST

START_TEST(test_select_rules)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, map(":p", S("p"), NULL)},
	                  .forward = true,
	                  .projection = "SK"};
	r.select = ST_SELECT_COUNT;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "1 validation error detected: Cannot specify the ProjectionExpression when "
	             "choosing to get only the Count");
	r.select = ST_SELECT_ALL_ATTRIBUTES;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "1 validation error detected: Cannot specify the ProjectionExpression when "
	             "choosing to get ALL_ATTRIBUTES");
	r.select = ST_SELECT_ALL_PROJECTED_ATTRIBUTES;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "1 validation error detected: Cannot specify the ProjectionExpression when "
	             "choosing to get ALL_PROJECTED_ATTRIBUTES");
	r.projection = NULL;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName");
	r.select = ST_SELECT_SPECIFIC_ATTRIBUTES;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "1 validation error detected: Must specify the AttributesToGet or "
	             "ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES");
	ck_assert_int_eq(st_select_parse("COUNT"), ST_SELECT_COUNT);
	ck_assert_int_eq(st_select_parse("ALL_ATTRIBUTES"), ST_SELECT_ALL_ATTRIBUTES);
	ck_assert_int_eq(st_select_parse("ALL_PROJECTED_ATTRIBUTES"),
	                 ST_SELECT_ALL_PROJECTED_ATTRIBUTES);
	ck_assert_int_eq(st_select_parse("SPECIFIC_ATTRIBUTES"), ST_SELECT_SPECIFIC_ATTRIBUTES);
	ck_assert_int_eq(st_select_parse("count"), -1);
	ck_assert_int_eq(st_select_parse(NULL), -1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Request errors                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_request_errors)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	st_query_req r = {.table = "tbl", .forward = true};
	tl_query_err(
	    &r, SHOAL_E_VALIDATION,
	    "Either the KeyConditions or KeyConditionExpression parameter must be specified "
	    "in the request.");
	r.key_condition = "PK = :p";
	r.attrs.values = map(":p", S("p"), ":unused", S("u"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "Value provided in ExpressionAttributeValues unused in expressions: keys: "
	             "{:unused}");
	r.attrs.values = map(":p", S("p"), NULL);
	r.filter = "SK = :p";
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "Filter Expression can only contain non-primary key attributes: Primary key "
	             "attribute: SK");
	r.filter = "#k = :p";
	r.attrs.names = map("#k", S("PK"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "Filter Expression can only contain non-primary key attributes: Primary key "
	             "attribute: PK");
	r.filter = NULL;
	r.attrs.names = NULL;
	r.index = "nope";
	tl_query_err(&r, SHOAL_E_VALIDATION, "The table does not have the specified index: nope");
	r.index = NULL;
	r.table = "Missing";
	tl_query_err(&r, SHOAL_E_NOT_FOUND,
	             "Requested resource not found: Table: Missing not found");
	r.table = "tbl";
	r.attrs.values = map(":p", N("1"), NULL);
	st_page p;
	ck_assert_int_eq(query(&r, &p), SHOAL_E_VALIDATION); /* PK is S */
	r.attrs.values = map(":p", S("p"), ":n", N("1"), NULL);
	r.key_condition = "PK = :p AND SK > :n";
	ck_assert_int_eq(query(&r, &p), SHOAL_E_VALIDATION); /* SK is S */
	/* A values map given with no expression that could use it. */
	r.key_condition = NULL;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "ExpressionAttributeValues can only be specified when using expressions: "
	             "FilterExpression and KeyConditionExpression are null");
}
END_TEST

START_TEST(test_index_errors)
{
	tl_create_table_gsi("tbl", (st_key_schema){{"PK", ST_S}, {"SK", ST_S}}, "GSI1",
	                    (st_key_schema){{"G", ST_S}, {"H", ST_S}});
	st_query_req r = {.table = "tbl",
	                  .index = "GSI1",
	                  .key_condition = "G = :g",
	                  .attrs = {NULL, map(":g", S("g"), NULL)},
	                  .forward = true};
	r.consistent = true;
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "Consistent reads are not supported on global secondary indexes");
	r.index = "GSI2";
	tl_query_err(&r, SHOAL_E_VALIDATION, "The table does not have the specified index: GSI2");
}
END_TEST

START_TEST(test_start_key_errors)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	tl_put("tbl", map("PK", S("p"), "SK", S("m"), NULL));
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p AND SK > :a",
	                  .attrs = {NULL, map(":p", S("p"), ":a", S("c"), NULL)},
	                  .forward = true};
	r.exclusive_start_key = map("PK", S("p"), NULL);
	tl_query_err(
	    &r, SHOAL_E_VALIDATION,
	    "The provided starting key is invalid: The provided key element does not match "
	    "the schema");
	r.exclusive_start_key = map("PK", S("p"), "SK", S("d"), "x", S("x"), NULL);
	tl_query_err(
	    &r, SHOAL_E_VALIDATION,
	    "The provided starting key is invalid: The provided key element does not match "
	    "the schema");
	r.exclusive_start_key = map("PK", S("p"), "SK", N("4"), NULL);
	tl_query_err(
	    &r, SHOAL_E_VALIDATION,
	    "The provided starting key is invalid: The provided key element does not match "
	    "the schema");
	r.exclusive_start_key = map("PK", S("p"), "SK", S("a"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "The provided starting key does not match the range key predicate");
	r.exclusive_start_key = map("PK", S("other"), "SK", S("d"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "The query can return at most one row and cannot be restarted");
	r.key_condition = "PK = :p";
	r.attrs.values = map(":p", S("p"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "The provided starting key is outside query boundaries based on provided "
	             "conditions");
	/* A start key that names no stored item is fine: resume after its position. */
	r.exclusive_start_key = map("PK", S("p"), "SK", S("l"), NULL);
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 1);
	r.exclusive_start_key = map("PK", S("p"), "SK", S("m"), NULL);
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
	r.forward = false;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
	r.exclusive_start_key = map("PK", S("p"), "SK", S("n"), NULL);
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 1);
}
END_TEST

START_TEST(test_table_without_sort_key)
{
	tl_create_table("hash_only", "id", ST_N, NULL, ST_NONE);
	for (int i = 0; i < 20; i++) {
		char n[32];
		snprintf(n, sizeof(n), "%d", i);
		tl_put("hash_only", map("id", N(n), "v", S(n), NULL));
	}
	st_query_req r = {.table = "hash_only",
	                  .key_condition = "id = :v",
	                  .attrs = {NULL, map(":v", N("7.0"), NULL)},
	                  .forward = true,
	                  .limit = 1};
	st_page p;
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 1);
	ck_assert_str_eq(str_attr(&p.items[0], "v"), "7");
	ck_assert_ptr_null(p.last_evaluated_key); /* the partition holds one item */
	r.exclusive_start_key = map("id", N("7"), NULL);
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
	r.exclusive_start_key = map("id", N("8"), NULL);
	tl_query_err(&r, SHOAL_E_VALIDATION,
	             "The provided starting key is outside query boundaries based on provided "
	             "conditions");
	r.exclusive_start_key = NULL;
	r.key_condition = "id = :v AND x = :v";
	ck_assert_int_eq(query(&r, &p), SHOAL_E_VALIDATION);
	r.key_condition = "id = :v";
	r.attrs.values = map(":v", N("100"), NULL);
	tl_query_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Long sort keys (truncated LMDB keys)                                      */
/* ------------------------------------------------------------------------ */

#define LONG_PREFIX 600

/* A sort key: n copies of 'x' then the suffix. */
static char *long_sk(size_t n, const char *suffix)
{
	size_t sl = strlen(suffix);
	char *s = sh_arena_alloc(&tl_arena, n + sl + 1);
	memset(s, 'x', n);
	memcpy(s + n, suffix, sl + 1);
	return s;
}

/* Loads partition "p" with long sort keys sharing a 600-byte prefix (and some
 * short or differently-prefixed ones around them); returns them sorted. */
static const char **load_long(size_t *count, uint64_t *seed)
{
	enum { NLONG = 40 };
	const char **sks = sh_arena_alloc(&tl_arena, (NLONG + 8) * sizeof(*sks));
	size_t n = 0;
	for (int i = 0; i < NLONG; i++) {
		/* Suffixes of random length and content: digest order != value order. */
		char suf[80];
		size_t len = 1 + tl_rand(seed) % 60;
		for (size_t j = 0; j < len; j++)
			suf[j] = (char)('a' + tl_rand(seed) % 4);
		suf[len] = '\0';
		const char *sk = long_sk(LONG_PREFIX, suf);
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup |= strcmp(sks[k], sk) == 0;
		if (!dup)
			sks[n++] = sk;
	}
	sks[n++] = long_sk(LONG_PREFIX, "");      /* the prefix itself */
	sks[n++] = long_sk(LONG_PREFIX - 1, "w"); /* sorts before the run */
	sks[n++] = long_sk(LONG_PREFIX - 1, "y"); /* sorts after it */
	sks[n++] = long_sk(480, "");              /* around the inline limit */
	sks[n++] = long_sk(470, "z");
	sks[n++] = "a";
	sks[n++] = "zzz";
	sks[n++] = long_sk(1000, "b"); /* 1001 bytes, near the 1024 limit */
	tl_create_table("tbl", "PK", ST_S, "SK", ST_S);
	for (size_t i = 0; i < n; i++) {
		char idx[32];
		snprintf(idx, sizeof(idx), "%zu", i);
		tl_put("tbl", map("PK", S("p"), "SK", S(sks[i]), "i", N(idx), NULL));
		tl_put("tbl", map("PK", S("o"), "SK", S(sks[i]), NULL));
	}
	qsort(sks, n, sizeof(*sks), cmp_str);
	*count = n;
	return sks;
}

static void check_long_query(const char **sorted, size_t n, enum op op, const char *a,
                             const char *b, bool forward, uint32_t limit, const st_value *start)
{
	const char **want = malloc(n * sizeof(*want));
	size_t nwant = 0;
	bool started = start == NULL;
	const char *start_sk = start != NULL ? str_attr(start, "SK") : NULL;
	for (size_t i = 0; i < n; i++) {
		const char *sk = sorted[forward ? i : n - 1 - i];
		if (!started) {
			started = strcmp(sk, start_sk) == 0;
			continue;
		}
		if (s_match(op, sk, a, b))
			want[nwant++] = sk;
	}
	st_query_req r = {
	    .table = "tbl",
	    .key_condition = kc_text(op),
	    .attrs = {NULL, kc_values(op, S("p"), S(a != NULL ? a : "a"), S(b != NULL ? b : "a"))},
	    .forward = forward,
	    .limit = limit,
	    .exclusive_start_key = start};
	uint32_t got, pages;
	st_value *items = tl_query_all(&r, &got, &pages, NULL);
	ck_assert_msg(got == nwant, "op %d fwd %d limit %u: %u items, want %zu", op, forward, limit,
	              got, nwant);
	for (uint32_t i = 0; i < got; i++)
		ck_assert_msg(strcmp(str_attr(&items[i], "SK"), want[i]) == 0,
		              "op %d fwd %d limit %u: item %u out of order", op, forward, limit, i);
	free(want);
}

START_TEST(test_long_sort_keys)
{
	uint64_t seed = tl_seed();
	size_t n;
	const char **sorted = load_long(&n, &seed);
	for (int fwd = 0; fwd < 2; fwd++) {
		for (uint32_t limit = 0; limit <= n + 1; limit++)
			check_long_query(sorted, n, OP_NONE, NULL, NULL, fwd, limit, NULL);
		/* Bounds inside the run: the LMDB range must still hold all of it. */
		const char *mid = sorted[n / 2];
		for (uint32_t limit = 0; limit <= 5; limit++) {
			check_long_query(sorted, n, OP_GT, mid, NULL, fwd, limit, NULL);
			check_long_query(sorted, n, OP_GE, mid, NULL, fwd, limit, NULL);
			check_long_query(sorted, n, OP_LT, mid, NULL, fwd, limit, NULL);
			check_long_query(sorted, n, OP_LE, mid, NULL, fwd, limit, NULL);
			check_long_query(sorted, n, OP_EQ, mid, NULL, fwd, limit, NULL);
			check_long_query(sorted, n, OP_BETWEEN, sorted[3], sorted[n - 4], fwd,
			                 limit, NULL);
			check_long_query(sorted, n, OP_BETWEEN, long_sk(LONG_PREFIX, "b"),
			                 long_sk(LONG_PREFIX, "c"), fwd, limit, NULL);
			check_long_query(sorted, n, OP_BEGINS, long_sk(LONG_PREFIX, "a"), NULL, fwd,
			                 limit, NULL);
			check_long_query(sorted, n, OP_BEGINS, long_sk(LONG_PREFIX, "ca"), NULL,
			                 fwd, limit, NULL);
			check_long_query(sorted, n, OP_BEGINS, long_sk(100, ""), NULL, fwd, limit,
			                 NULL);
		}
		/* Resuming from a start key inside the run, stored or not. */
		for (size_t i = 0; i < n; i += 3) {
			st_value *start = map("PK", S("p"), "SK", S(sorted[i]), NULL);
			check_long_query(sorted, n, OP_NONE, NULL, NULL, fwd, 4, start);
		}
	}
	/* A start key that is not an item, between two run members. */
	const char *absent = long_sk(LONG_PREFIX, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
	size_t after = 0;
	while (after < n && strcmp(sorted[after], absent) <= 0)
		after++;
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, map(":p", S("p"), NULL)},
	                  .forward = true,
	                  .exclusive_start_key = map("PK", S("p"), "SK", S(absent), NULL)};
	uint32_t got, pages;
	st_value *items = tl_query_all(&r, &got, &pages, NULL);
	ck_assert_uint_eq(got, n - after);
	if (got > 0)
		ck_assert_str_eq(str_attr(&items[0], "SK"), sorted[after]);
	r.forward = false;
	items = tl_query_all(&r, &got, &pages, NULL);
	ck_assert_uint_eq(got, after);
	if (got > 0)
		ck_assert_str_eq(str_attr(&items[0], "SK"), sorted[after - 1]);
}
END_TEST

START_TEST(test_long_binary_sort_keys)
{
	tl_create_table("tbl", "PK", ST_S, "SK", ST_B);
	uint64_t seed = tl_seed();
	enum { NB = 30, LEN = 700 };
	static uint8_t keys[NB][LEN];
	for (int i = 0; i < NB; i++) {
		memset(keys[i], 0, LEN); /* zero bytes grow the escaped encoding */
		keys[i][LEN - 2] = (uint8_t)(tl_rand(&seed) % 256);
		keys[i][LEN - 1] = (uint8_t)i;
		tl_put("tbl", map("PK", S("p"), "SK", B(keys[i], LEN), NULL));
	}
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p",
	                  .attrs = {NULL, map(":p", S("p"), NULL)},
	                  .forward = true,
	                  .limit = 7};
	uint32_t got, pages;
	st_value *items = tl_query_all(&r, &got, &pages, NULL);
	ck_assert_uint_eq(got, NB);
	for (uint32_t i = 1; i < got; i++)
		ck_assert_int_lt(st_value_cmp(attr(&items[i - 1], "SK"), attr(&items[i], "SK")), 0);
	r.forward = false;
	items = tl_query_all(&r, &got, &pages, NULL);
	ck_assert_uint_eq(got, NB);
	for (uint32_t i = 1; i < got; i++)
		ck_assert_int_gt(st_value_cmp(attr(&items[i - 1], "SK"), attr(&items[i], "SK")), 0);
}
END_TEST

START_TEST(test_out_of_memory)
{
	uint64_t seed = tl_seed();
	size_t n;
	load_long(&n, &seed);
	st_query_req r = {.table = "tbl",
	                  .key_condition = "PK = :p AND begins_with(SK, :x)",
	                  .filter = "i >= :z",
	                  .projection = "SK, i",
	                  .attrs = {NULL, map(":p", S("p"), ":x", S("xxx"), ":z", N("0"), NULL)},
	                  .forward = false,
	                  .limit = 10,
	                  .exclusive_start_key =
	                      map("PK", S("p"), "SK", S(long_sk(LONG_PREFIX, "e")), NULL)};
	for (long k = 1;; k++) {
		sh_arena a;
		sh_arena_init(&a);
		st_page p;
		sh_fault_arm(SH_FAULT_ALLOC, k, false);
		int rc = st_query(tl_env, &r, &a, &p, tl_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		/* A failed allocation is reported, or survived with a full result. */
		ck_assert_msg(rc == SHOAL_OK || (fired && rc == SHOAL_E_NOMEM),
		              "allocation %ld: %s (%s)", k, shoal_err_name(rc), tl_msg);
		if (rc == SHOAL_OK) {
			ck_assert_uint_eq(p.count, 10);
			ck_assert_ptr_nonnull(p.last_evaluated_key);
		}
		sh_arena_fini(&a);
		if (!fired)
			break;
		ck_assert_int_lt(k, 100000);
	}
}
END_TEST

static Suite *query_suite(void)
{
	return tl_suite(
	    "query", setup, tl_store_close, 120,
	    TL_TESTS(test_s_operators, test_missing_partition, test_number_order, test_binary_order,
	             test_limit_every_page_size, test_limit_with_sort_condition,
	             test_page_size_exact, test_page_bytes_small, test_filter_empty_pages,
	             test_projection, test_select_rules, test_request_errors, test_index_errors,
	             test_start_key_errors, test_table_without_sort_key, test_long_sort_keys,
	             test_long_binary_sort_keys, test_out_of_memory));
}

TL_MAIN(query_suite)
