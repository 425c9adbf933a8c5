/*
 * Seed 002: the edtech-platform single table (students, courses, modules,
 * lessons and enrollments as an adjacency list with composite sort keys) and
 * its base-table access patterns AP1, AP2, AP5, AP6 and AP7, checked item by
 * item and in order.  (AP3 and AP4 read GSI1, which Query does not serve yet.)
 */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/arena.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

static char g_dir[PATH_MAX];
static st_env *g_env;
static sh_arena g_a;
static char g_msg[SH_ERRMSG_SIZE];

static st_value *S(const char *s)
{
	st_value *v = st_new_s(&g_a, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

static st_value *N(const char *s)
{
	st_value *v = st_new_n(&g_a, s);
	ck_assert_ptr_nonnull(v);
	return v;
}

/* map("a", v1, "b", v2, NULL) */
static st_value *map(const char *name, ...)
{
	st_value *m = st_new_map(&g_a, 8);
	ck_assert_ptr_nonnull(m);
	va_list ap;
	va_start(ap, name);
	for (const char *n = name; n != NULL; n = va_arg(ap, const char *)) {
		st_value *v = va_arg(ap, st_value *);
		ck_assert_int_eq(st_map_set(&g_a, m, n, strlen(n), v), SHOAL_OK);
	}
	va_end(ap);
	return m;
}

static const char TABLE[] = "edtech-platform";

/* The table of the seed, with its items (and neighbours that no access
 * pattern may return).  Returns the items by sort key for the checks. */
static st_value *g_profile, *g_enr_c10, *g_enr_c20, *g_m1, *g_m1l1, *g_m1l2, *g_m2, *g_m2l3;

static void put(st_value *item)
{
	st_put_req r = {.table = TABLE, .item = item};
	st_write_result res;
	ck_assert_msg(st_put_item(g_env, &r, &g_a, &res, g_msg) == SHOAL_OK, "%s", g_msg);
}

static void setup(void)
{
	snprintf(g_dir, sizeof(g_dir), "%s", tl_tmpdir("seed002"));
	st_env_options o = {.map_size = 1ull << 30, .nosync = true};
	ck_assert_msg(st_env_open(g_dir, &o, &g_env, g_msg) == SHOAL_OK, "%s", g_msg);
	sh_arena_init(&g_a);

	st_key_attr attrs[4] = {{"PK", ST_S}, {"SK", ST_S}, {"GSI1PK", ST_S}, {"GSI1SK", ST_S}};
	st_index_def gsi1 = {.name = "GSI1",
	                     .key = {{"GSI1PK", ST_S}, {"GSI1SK", ST_S}},
	                     .projection = ST_PROJ_ALL,
	                     .write_shards = 1,
	                     .status = ST_INDEX_ACTIVE};
	st_table_def d = {.name = TABLE,
	                  .key = {{"PK", ST_S}, {"SK", ST_S}},
	                  .attrs = attrs,
	                  .n_attrs = 4,
	                  .indexes = &gsi1,
	                  .n_indexes = 1};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(g_env, &t, g_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, g_msg) == SHOAL_OK, "%s", g_msg);
	ck_assert_msg(st_txn_commit(t, g_msg) == SHOAL_OK, "%s", g_msg);

	g_profile = map("PK", S("STUDENT#s1"), "SK", S("PROFILE"), "GSI1PK", S("STUDENT"), "GSI1SK",
	                S("2024-09-01"), "entity_type", S("STUDENT"), "name", S("Ana Souza"),
	                "email", S("ana@example.com"), NULL);
	g_enr_c10 = map("PK", S("STUDENT#s1"), "SK", S("ENROLLMENT#c10"), "GSI1PK", S("COURSE#c10"),
	                "GSI1SK", S("STUDENT#s1"), "entity_type", S("ENROLLMENT"), "enrolled_at",
	                S("2024-09-02T10:00:00+00:00"), "progress", N("40"), NULL);
	g_enr_c20 = map("PK", S("STUDENT#s1"), "SK", S("ENROLLMENT#c20"), "GSI1PK", S("COURSE#c20"),
	                "GSI1SK", S("STUDENT#s1"), "entity_type", S("ENROLLMENT"), "enrolled_at",
	                S("2024-10-15T08:30:00+00:00"), "progress", N("0"), NULL);
	g_m1 = map("PK", S("COURSE#c10"), "SK", S("MODULE#m1"), "entity_type", S("MODULE"), "title",
	           S("Foundations"), "order_num", N("1"), NULL);
	g_m1l1 =
	    map("PK", S("COURSE#c10"), "SK", S("MODULE#m1#LESSON#l1"), "entity_type", S("LESSON"),
	        "lesson_id", S("l1"), "title", S("Keys and items"), "duration_min", N("12"), NULL);
	g_m1l2 = map("PK", S("COURSE#c10"), "SK", S("MODULE#m1#LESSON#l2"), "entity_type",
	             S("LESSON"), "lesson_id", S("l2"), "title", S("Item collections"),
	             "duration_min", N("18.5"), NULL);
	g_m2 = map("PK", S("COURSE#c10"), "SK", S("MODULE#m2"), "entity_type", S("MODULE"), "title",
	           S("Single-table design"), "order_num", N("2"), NULL);
	g_m2l3 =
	    map("PK", S("COURSE#c10"), "SK", S("MODULE#m2#LESSON#l3"), "entity_type", S("LESSON"),
	        "lesson_id", S("l3"), "title", S("Adjacency lists"), "duration_min", N("25"), NULL);

	/* Inserted out of order on purpose. */
	put(g_m2l3);
	put(g_enr_c20);
	put(map("PK", S("COURSE#c10"), "SK", S("ENROLLMENT#STUDENT#s2"), "GSI1PK", S("COURSE#c10"),
	        "GSI1SK", S("STUDENT#s2"), "entity_type", S("ENROLLMENT"), "progress", N("75"),
	        "last_seen", S("2024-11-01T09:00:00+00:00"), NULL));
	put(g_m1l2);
	put(g_profile);
	put(map("PK", S("COURSE#c10"), "SK", S("METADATA"), "GSI1PK", S("INSTRUCTOR#i5"), "GSI1SK",
	        S("COURSE#c10"), "entity_type", S("COURSE"), "title", S("DynamoDB modelling"),
	        "description", S("Access patterns first"), NULL));
	put(g_m2);
	put(g_m1l1);
	put(g_enr_c10);
	put(map("PK", S("COURSE#c10"), "SK", S("ENROLLMENT#STUDENT#s1"), "GSI1PK", S("COURSE#c10"),
	        "GSI1SK", S("STUDENT#s1"), "entity_type", S("ENROLLMENT"), "progress", N("40"),
	        "last_seen", S("2024-10-30T18:00:00+00:00"), NULL));
	put(g_m1);
	/* Neighbours: another student and another course with the same shapes. */
	put(map("PK", S("STUDENT#s2"), "SK", S("PROFILE"), "GSI1PK", S("STUDENT"), "GSI1SK",
	        S("2024-09-05"), "name", S("Bruno Lima"), "email", S("bruno@example.com"), NULL));
	put(map("PK", S("STUDENT#s2"), "SK", S("ENROLLMENT#c10"), "GSI1PK", S("COURSE#c10"),
	        "GSI1SK", S("STUDENT#s2"), "progress", N("75"), NULL));
	put(map("PK", S("COURSE#c20"), "SK", S("METADATA"), "GSI1PK", S("INSTRUCTOR#i5"), "GSI1SK",
	        S("COURSE#c20"), "title", S("Streams"), NULL));
	put(map("PK", S("COURSE#c20"), "SK", S("MODULE#m1"), "title", S("Intro"), "order_num",
	        N("1"), NULL));
	put(map("PK", S("COURSE#c20"), "SK", S("MODULE#m1#LESSON#l1"), "lesson_id", S("l1"),
	        "title", S("Shards"), "duration_min", N("9"), NULL));
}

static void teardown(void)
{
	st_env_close(g_env);
	tl_rmtree(g_dir);
	sh_arena_fini(&g_a);
}

/* Runs a query to the end (following LastEvaluatedKey) and checks the items
 * against want[0..n-1], in order. */
static void check_query(st_query_req *r, st_value *const *want, uint32_t n, uint32_t scanned)
{
	uint32_t got = 0, total_scanned = 0;
	const st_value *start = NULL;
	do {
		st_page p;
		r->exclusive_start_key = start;
		ck_assert_msg(st_query(g_env, r, &g_a, &p, g_msg) == SHOAL_OK, "%s", g_msg);
		for (uint32_t i = 0; i < p.count; i++, got++) {
			ck_assert_uint_lt(got, n);
			ck_assert_msg(st_value_equal(&p.items[i], want[got]), "item %u differs",
			              got);
		}
		total_scanned += p.scanned;
		start = p.last_evaluated_key;
	} while (start != NULL);
	ck_assert_uint_eq(got, n);
	ck_assert_uint_eq(total_scanned, scanned);
}

START_TEST(test_ap1_student_profile)
{
	st_get_req r = {.table = TABLE,
	                .key = map("PK", S("STUDENT#s1"), "SK", S("PROFILE"), NULL)};
	st_value *item;
	ck_assert_msg(st_get_item(g_env, &r, &g_a, &item, g_msg) == SHOAL_OK, "%s", g_msg);
	ck_assert_ptr_nonnull(item);
	ck_assert(st_value_equal(item, g_profile));
	r.projection = "#n, email";
	r.names = map("#n", S("name"), NULL);
	ck_assert_int_eq(st_get_item(g_env, &r, &g_a, &item, g_msg), SHOAL_OK);
	ck_assert(
	    st_value_equal(item, map("name", S("Ana Souza"), "email", S("ana@example.com"), NULL)));
}
END_TEST

START_TEST(test_ap2_student_enrollments)
{
	st_value *want[] = {g_enr_c10, g_enr_c20};
	for (uint32_t limit = 0; limit <= 3; limit++) {
		st_query_req r = {
		    .table = TABLE,
		    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
		    .attrs = {NULL, map(":pk", S("STUDENT#s1"), ":prefix", S("ENROLLMENT#"), NULL)},
		    .forward = true,
		    .limit = limit};
		check_query(&r, want, 2, 2);
	}
	st_value *back[] = {g_enr_c20, g_enr_c10};
	st_query_req r = {
	    .table = TABLE,
	    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
	    .attrs = {NULL, map(":pk", S("STUDENT#s1"), ":prefix", S("ENROLLMENT#"), NULL)},
	    .forward = false};
	check_query(&r, back, 2, 2);
}
END_TEST

START_TEST(test_ap5_course_structure)
{
	st_value *want[] = {g_m1, g_m1l1, g_m1l2, g_m2, g_m2l3};
	for (uint32_t limit = 0; limit <= 6; limit++) {
		st_query_req r = {
		    .table = TABLE,
		    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
		    .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix", S("MODULE#"), NULL)},
		    .forward = true,
		    .limit = limit};
		check_query(&r, want, 5, 5);
	}
	st_value *back[] = {g_m2l3, g_m2, g_m1l2, g_m1l1, g_m1};
	st_query_req r = {
	    .table = TABLE,
	    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
	    .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix", S("MODULE#"), NULL)},
	    .forward = false,
	    .limit = 2};
	check_query(&r, back, 5, 5);
}
END_TEST

START_TEST(test_ap6_modules_only)
{
	/* The filter reads every module and lesson and returns the modules. */
	st_value *want[] = {g_m1, g_m2};
	for (uint32_t limit = 0; limit <= 6; limit++) {
		st_query_req r = {
		    .table = TABLE,
		    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
		    .filter = "attribute_not_exists(lesson_id)",
		    .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix", S("MODULE#"), NULL)},
		    .forward = true,
		    .limit = limit};
		check_query(&r, want, 2, 5);
	}
	st_query_req r = {
	    .table = TABLE,
	    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
	    .filter = "attribute_not_exists(lesson_id)",
	    .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix", S("MODULE#"), NULL)},
	    .forward = true,
	    .select = ST_SELECT_COUNT};
	st_page p;
	ck_assert_int_eq(st_query(g_env, &r, &g_a, &p, g_msg), SHOAL_OK);
	ck_assert_uint_eq(p.count, 2);
	ck_assert_uint_eq(p.scanned, 5);
	ck_assert_ptr_null(p.items);
}
END_TEST

START_TEST(test_ap7_module_lessons)
{
	st_value *want[] = {g_m1l1, g_m1l2};
	for (uint32_t limit = 0; limit <= 3; limit++) {
		st_query_req r = {.table = TABLE,
		                  .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
		                  .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix",
		                                      S("MODULE#m1#LESSON#"), NULL)},
		                  .forward = true,
		                  .limit = limit};
		check_query(&r, want, 2, 2);
	}
	/* The same lessons, projected as the course page shows them. */
	st_query_req r = {
	    .table = TABLE,
	    .key_condition = "PK = :pk AND begins_with(SK, :prefix)",
	    .projection = "lesson_id, title, duration_min",
	    .attrs = {NULL, map(":pk", S("COURSE#c10"), ":prefix", S("MODULE#m1#LESSON#"), NULL)},
	    .forward = true};
	st_value *proj[] = {
	    map("lesson_id", S("l1"), "title", S("Keys and items"), "duration_min", N("12"), NULL),
	    map("lesson_id", S("l2"), "title", S("Item collections"), "duration_min", N("18.5"),
	        NULL)};
	check_query(&r, proj, 2, 2);
}
END_TEST

static Suite *seed002_suite(void)
{
	Suite *s = suite_create("seed002");
	TCase *tc = tcase_create("edtech-platform");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ap1_student_profile);
	tcase_add_test(tc, test_ap2_student_enrollments);
	tcase_add_test(tc, test_ap5_course_structure);
	tcase_add_test(tc, test_ap6_modules_only);
	tcase_add_test(tc, test_ap7_module_lessons);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(seed002_suite)
