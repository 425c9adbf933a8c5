/* Scan: every item once, segments, hash ranges, Limit, filters, long sort keys. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static void setup(void)
{
	tl_store_open("scan", &(st_env_options){.map_size = 1ull << 30, .nosync = true});
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static long num_attr(const st_value *item, const char *name)
{
	const st_value *v = attr(item, name);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, ST_N);
	char buf[64];
	snprintf(buf, sizeof(buf), "%.*s", (int)v->u.str.len, v->u.str.ptr);
	return strtol(buf, NULL, 10);
}

/* Segment s of n covers hashes [seg_lo, seg_hi], by DynamoDB-style equal split. */
static uint64_t seg_lo(uint32_t s, uint32_t n)
{
	unsigned __int128 span = (unsigned __int128)1 << 64;
	return (uint64_t)(((unsigned __int128)s * span + n - 1) / n);
}

static uint64_t seg_hi(uint32_t s, uint32_t n)
{
	return s + 1 == n ? UINT64_MAX : seg_lo(s + 1, n) - 1;
}

enum { NPART = 60, PER_PART = 5, NITEMS = NPART * PER_PART };

static uint32_t g_tid;
static uint64_t g_hash[NPART]; /* placement hash of partition i */

/* Table T: NPART partitions "p<i>" of PER_PART items each, every item with a
 * unique "id" 0..NITEMS-1; tables A (before) and Z (after) around it. */
static void load(void)
{
	tl_create_table("before", "PK", ST_S, "SK", ST_N);
	g_tid = tl_create_table("tbl", "PK", ST_S, "SK", ST_N);
	tl_create_table("zafter", "PK", ST_S, "SK", ST_N);
	for (int p = 0; p < NPART; p++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "p%d", p);
		g_hash[p] = st_key_hash(g_tid, S(pk));
		for (int s = 0; s < PER_PART; s++) {
			tl_put("tbl", map("PK", S(pk), "SK", Ni(s - 2), "id", Ni(p * PER_PART + s),
			                  "part", Ni(p), NULL));
			tl_put("before", map("PK", S(pk), "SK", Ni(s), "id", Ni(-1), NULL));
			tl_put("zafter", map("PK", S(pk), "SK", Ni(s), "id", Ni(-1), NULL));
		}
	}
}

/* Asserts every id appears at most once (exactly once if all), returns the count. */
static uint32_t check_ids(const st_value *items, uint32_t n, uint8_t *seen)
{
	for (uint32_t i = 0; i < n; i++) {
		long id = num_attr(&items[i], "id");
		ck_assert_int_ge(id, 0);
		ck_assert_int_lt(id, NITEMS);
		ck_assert_msg(seen[id] == 0, "item %ld returned twice", id);
		seen[id] = 1;
	}
	return n;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_every_item_once)
{
	load();
	static const uint32_t limits[] = {0, 1, 2, 7, 50, 299, 300, 301};
	for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		st_scan_req r = {.table = "tbl", .limit = limits[l]};
		uint32_t n, pages, scanned;
		st_value *items = tl_scan_all(&r, &n, &pages, &scanned);
		uint8_t seen[NITEMS] = {0};
		ck_assert_uint_eq(check_ids(items, n, seen), NITEMS);
		ck_assert_uint_eq(scanned, NITEMS);
		uint32_t lim = limits[l] != 0 ? limits[l] : NITEMS;
		ck_assert_uint_eq(pages, (NITEMS + lim - 1) / lim);
		/* Items come in placement-hash order, a partition's in sort-key order. */
		for (uint32_t i = 1; i < n; i++) {
			long pa = num_attr(&items[i - 1], "part"), pb = num_attr(&items[i], "part");
			if (pa == pb)
				ck_assert_int_lt(num_attr(&items[i - 1], "SK"),
				                 num_attr(&items[i], "SK"));
			else
				ck_assert(g_hash[pa] < g_hash[pb]);
		}
	}
}
END_TEST

START_TEST(test_segments_partition_the_table)
{
	load();
	for (uint32_t total = 1; total <= 7; total++) {
		uint8_t seen[NITEMS] = {0};
		uint32_t sum = 0;
		for (uint32_t seg = 0; seg < total; seg++) {
			st_scan_req r = {.table = "tbl",
			                 .segment = seg,
			                 .total_segments = total,
			                 .limit = 1 + seg * 3};
			uint32_t n, pages, scanned;
			st_value *items = tl_scan_all(&r, &n, &pages, &scanned);
			sum += check_ids(items, n, seen);
			for (uint32_t i = 0; i < n; i++) {
				uint64_t h = g_hash[num_attr(&items[i], "part")];
				ck_assert(h >= seg_lo(seg, total) && h <= seg_hi(seg, total));
			}
		}
		ck_assert_uint_eq(sum, NITEMS);
	}
	/* The segment bounds tile the hash space exactly. */
	ck_assert_uint_eq(seg_lo(0, 7), 0);
	ck_assert_uint_eq(seg_hi(6, 7), UINT64_MAX);
	ck_assert_uint_eq(seg_hi(0, 2), UINT64_C(0x7fffffffffffffff));
	ck_assert_uint_eq(seg_lo(1, 2), UINT64_C(0x8000000000000000));
}
END_TEST

START_TEST(test_hash_range)
{
	load();
	uint64_t sorted[NPART];
	memcpy(sorted, g_hash, sizeof(sorted));
	for (int i = 1; i < NPART; i++)
		for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
			uint64_t t = sorted[j];
			sorted[j] = sorted[j - 1];
			sorted[j - 1] = t;
		}
	struct {
		uint64_t lo, hi;
	} ranges[] = {
	    {sorted[10], sorted[30]}, {sorted[10] + 1, sorted[30] - 1}, {sorted[5], sorted[5]},
	    {0, sorted[0]},           {sorted[NPART - 1], UINT64_MAX},  {1, UINT64_MAX},
	};
	for (size_t c = 0; c < sizeof(ranges) / sizeof(ranges[0]); c++) {
		for (uint32_t total = 1; total <= 3; total++) {
			uint8_t seen[NITEMS] = {0};
			uint32_t sum = 0;
			for (uint32_t seg = 0; seg < total; seg++) {
				st_scan_req r = {.table = "tbl",
				                 .hash_lo = ranges[c].lo,
				                 .hash_hi = ranges[c].hi,
				                 .segment = seg,
				                 .total_segments = total == 1 ? 0 : total,
				                 .limit = 4};
				uint32_t n, pages, scanned;
				st_value *items = tl_scan_all(&r, &n, &pages, &scanned);
				sum += check_ids(items, n, seen);
				for (uint32_t i = 0; i < n; i++) {
					uint64_t h = g_hash[num_attr(&items[i], "part")];
					ck_assert(h >= ranges[c].lo && h <= ranges[c].hi);
				}
			}
			uint32_t want = 0;
			for (int p = 0; p < NPART; p++)
				if (g_hash[p] >= ranges[c].lo && g_hash[p] <= ranges[c].hi)
					want += PER_PART;
			ck_assert_uint_eq(sum, want);
		}
	}
	/* A hash range outside the segment: an empty page without a key. */
	st_scan_req r = {.table = "tbl",
	                 .hash_lo = UINT64_C(0x8000000000000000),
	                 .hash_hi = UINT64_MAX,
	                 .segment = 0,
	                 .total_segments = 2};
	st_page p;
	tl_scan_ok(&r, &p);
	ck_assert_uint_eq(p.count, 0);
	ck_assert_uint_eq(p.scanned, 0);
	ck_assert_ptr_null(p.last_evaluated_key);
}
END_TEST

START_TEST(test_filter_count_projection)
{
	load();
	st_scan_req r = {
	    .table = "tbl",
	    .filter = "SK = :z AND #p < :ten",
	    .attrs = {map("#p", S("part"), NULL), map(":z", N("0"), ":ten", N("10"), NULL)},
	    .limit = 7};
	uint32_t n, pages, scanned;
	st_value *items = tl_scan_all(&r, &n, &pages, &scanned);
	ck_assert_uint_eq(n, 10);
	ck_assert_uint_eq(scanned, NITEMS);
	ck_assert_uint_eq(pages, (NITEMS + 6) / 7);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(num_attr(&items[i], "SK"), 0);

	r.select = ST_SELECT_COUNT;
	r.limit = 0;
	st_page p;
	tl_scan_ok(&r, &p);
	ck_assert_ptr_null(p.items);
	ck_assert_uint_eq(p.count, 10);
	ck_assert_uint_eq(p.scanned, NITEMS);

	st_scan_req pr = {.table = "tbl", .projection = "id, nothing", .limit = 3};
	tl_scan_ok(&pr, &p);
	ck_assert_uint_eq(p.count, 3);
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(p.items[i].u.map.n, 1);
		ck_assert_ptr_nonnull(attr(&p.items[i], "id"));
	}
	/* LastEvaluatedKey is the full key, whatever the projection. */
	ck_assert_uint_eq(p.last_evaluated_key->u.map.n, 2);
	ck_assert_ptr_nonnull(attr(p.last_evaluated_key, "PK"));
	ck_assert_ptr_nonnull(attr(p.last_evaluated_key, "SK"));
}
END_TEST

START_TEST(test_request_errors)
{
	load();
	st_scan_req r = {.table = "tbl", .segment = 3, .total_segments = 3};
	tl_scan_err(&r, SHOAL_E_VALIDATION,
	            "The Segment parameter is zero-based and must be less than parameter "
	            "TotalSegments: Segment: 3 is not less than TotalSegments: 3");
	r.total_segments = 0;
	tl_scan_err(
	    &r, SHOAL_E_VALIDATION,
	    "The TotalSegments parameter is required but was not present in the request when "
	    "Segment parameter is present");
	r.segment = 0;
	r.total_segments = 1000001;
	tl_scan_err(&r, SHOAL_E_VALIDATION,
	            "1 validation error detected: Value '1000001' at 'totalSegments' failed to "
	            "satisfy constraint: Member must have value less than or equal to 1000000");
	r.segment = 1000000;
	tl_scan_err(
	    &r, SHOAL_E_VALIDATION,
	    "2 validation errors detected: Value '1000000' at 'segment' failed to satisfy "
	    "constraint: Member must have value less than or equal to 999999; Value '1000001' "
	    "at 'totalSegments' failed to satisfy constraint: Member must have value less than "
	    "or equal to 1000000");
	r.segment = 999999;
	r.total_segments = 1000000;
	st_page p;
	tl_scan_ok(&r, &p); /* the largest segmentation is fine */

	/* A start key from another segment. */
	int p0 = 0;
	while (g_hash[p0] < seg_lo(1, 2))
		p0++;
	char pk[32];
	snprintf(pk, sizeof(pk), "p%d", p0);
	st_scan_req s = {.table = "tbl",
	                 .segment = 0,
	                 .total_segments = 2,
	                 .exclusive_start_key = map("PK", S(pk), "SK", N("0"), NULL)};
	tl_scan_err(&s, SHOAL_E_VALIDATION,
	            "The provided starting key is invalid: Invalid ExclusiveStartKey. Please use "
	            "ExclusiveStartKey with correct Segment. TotalSegments: 2 Segment: 0");
	s.segment = 1;
	tl_scan_ok(&s, &p);
	s.exclusive_start_key = map("PK", S(pk), NULL);
	tl_scan_err(&s, SHOAL_E_VALIDATION,
	            "The provided starting key is invalid: The provided key element does not match "
	            "the schema");
	s.exclusive_start_key = map("PK", S(pk), "SK", S("0"), NULL);
	tl_scan_err(&s, SHOAL_E_VALIDATION,
	            "The provided starting key is invalid: The provided key element does not match "
	            "the schema");

	st_scan_req e = {.table = "tbl", .attrs = {map("#a", S("a"), NULL), NULL}};
	tl_scan_err(&e, SHOAL_E_VALIDATION,
	            "ExpressionAttributeNames can only be specified when using expressions");
	e.attrs.names = NULL;
	e.attrs.values = map(":a", S("a"), NULL);
	e.projection = "id";
	tl_scan_err(&e, SHOAL_E_VALIDATION,
	            "ExpressionAttributeValues can only be specified when using expressions: "
	            "FilterExpression is null");
	e.attrs.values = NULL;
	e.select = ST_SELECT_COUNT;
	tl_scan_err(&e, SHOAL_E_VALIDATION,
	            "Cannot specify the ProjectionExpression when choosing to get only the Count");
	e.select = ST_SELECT_DEFAULT;
	e.filter = "id = :a";
	e.attrs.values = map(":a", N("1"), ":b", N("2"), NULL);
	tl_scan_err(
	    &e, SHOAL_E_VALIDATION,
	    "Value provided in ExpressionAttributeValues unused in expressions: keys: {:b}");
	st_scan_req u = {.table = "Nope"};
	tl_scan_err(&u, SHOAL_E_NOT_FOUND, "Requested resource not found: Table: Nope not found");
	u.table = "tbl";
	u.index = "GSI";
	tl_scan_err(&u, SHOAL_E_VALIDATION, "The table does not have the specified index: GSI");
}
END_TEST

START_TEST(test_long_sort_keys)
{
	tl_create_table("long_keys", "PK", ST_S, "SK", ST_S);
	uint64_t seed = tl_seed();
	enum { NL = 30 };
	char *sks[NL];
	for (int i = 0; i < NL; i++) {
		size_t len = 500 + tl_rand(&seed) % 300;
		sks[i] = sh_arena_alloc(&tl_arena, len + 1);
		memset(sks[i], 'k', len);
		sks[i][len - 1] = (char)('a' + i % 26);
		sks[i][len - 2] = (char)('a' + i / 26);
		sks[i][len] = '\0';
		tl_put("long_keys", map("PK", S("p"), "SK", S(sks[i]), "id", Ni(i), NULL));
		tl_put("long_keys", map("PK", S("q"), "SK", S(sks[i]), "id", Ni(NL + i), NULL));
	}
	for (uint32_t limit = 0; limit <= 2 * NL + 1; limit++) {
		st_scan_req r = {.table = "long_keys", .limit = limit};
		uint32_t n, pages, scanned;
		st_value *items = tl_scan_all(&r, &n, &pages, &scanned);
		ck_assert_uint_eq(n, 2 * NL);
		uint8_t seen[2 * NL] = {0};
		for (uint32_t i = 0; i < n; i++) {
			long id = num_attr(&items[i], "id");
			ck_assert(!seen[id]);
			seen[id] = 1;
			if (i > 0 &&
			    st_value_equal(attr(&items[i], "PK"), attr(&items[i - 1], "PK")))
				ck_assert_int_lt(
				    st_value_cmp(attr(&items[i - 1], "SK"), attr(&items[i], "SK")),
				    0);
		}
	}
}
END_TEST

START_TEST(test_out_of_memory)
{
	load();
	st_scan_req r = {.table = "tbl",
	                 .filter = "id >= :z",
	                 .projection = "id, SK",
	                 .attrs = {NULL, map(":z", N("0"), NULL)},
	                 .limit = 20};
	for (long n = 1;; n++) {
		sh_arena a;
		sh_arena_init(&a);
		st_page p;
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = st_scan(tl_env, &r, &a, &p, tl_msg);
		bool fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		sh_arena_fini(&a);
		/* A failed allocation is reported, or survived with a full result. */
		ck_assert_msg(rc == SHOAL_OK || (fired && rc == SHOAL_E_NOMEM),
		              "allocation %ld: %s (%s)", n, shoal_err_name(rc), tl_msg);
		if (rc == SHOAL_OK)
			ck_assert_uint_eq(p.count, 20);
		if (!fired)
			break;
		ck_assert_int_lt(n, 100000);
	}
}
END_TEST

static Suite *scan_suite(void)
{
	return tl_suite("scan", setup, tl_store_close, 120,
	                TL_TESTS(test_every_item_once, test_segments_partition_the_table,
	                         test_hash_range, test_filter_count_projection, test_request_errors,
	                         test_long_sort_keys, test_out_of_memory));
}

TL_MAIN(scan_suite)
