/*
 * Seed 002: the edtech-platform single table (students, courses, modules,
 * lessons and enrollments as an adjacency list with composite sort keys) and
 * its base-table access patterns AP1, AP2, AP5, AP6 and AP7, checked item by
 * item and in order.  (AP3 and AP4 read GSI1, which Query does not serve yet.)
 */
#include <check.h>
#include <string.h>

#include "common/arena.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

static const char TABLE[] = "edtech-platform";

/* The table of the seed, with its items (and neighbours that no access
 * pattern may return).  Returns the items by sort key for the checks. */
static st_value *g_profile, *g_enr_c10, *g_enr_c20, *g_m1, *g_m1l1, *g_m1l2, *g_m2, *g_m2l3;

static void setup(void)
{
	tl_store_open("seed002", &(st_env_options){.map_size = 1ull << 30, .nosync = true});

	tl_create_table_gsi(TABLE, (st_key_schema){{"PK", ST_S}, {"SK", ST_S}}, "GSI1",
	                    (st_key_schema){{"GSI1PK", ST_S}, {"GSI1SK", ST_S}});

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
	tl_put(TABLE, g_m2l3);
	tl_put(TABLE, g_enr_c20);
	tl_put(TABLE,
	       map("PK", S("COURSE#c10"), "SK", S("ENROLLMENT#STUDENT#s2"), "GSI1PK",
	           S("COURSE#c10"), "GSI1SK", S("STUDENT#s2"), "entity_type", S("ENROLLMENT"),
	           "progress", N("75"), "last_seen", S("2024-11-01T09:00:00+00:00"), NULL));
	tl_put(TABLE, g_m1l2);
	tl_put(TABLE, g_profile);
	tl_put(TABLE,
	       map("PK", S("COURSE#c10"), "SK", S("METADATA"), "GSI1PK", S("INSTRUCTOR#i5"),
	           "GSI1SK", S("COURSE#c10"), "entity_type", S("COURSE"), "title",
	           S("DynamoDB modelling"), "description", S("Access patterns first"), NULL));
	tl_put(TABLE, g_m2);
	tl_put(TABLE, g_m1l1);
	tl_put(TABLE, g_enr_c10);
	tl_put(TABLE,
	       map("PK", S("COURSE#c10"), "SK", S("ENROLLMENT#STUDENT#s1"), "GSI1PK",
	           S("COURSE#c10"), "GSI1SK", S("STUDENT#s1"), "entity_type", S("ENROLLMENT"),
	           "progress", N("40"), "last_seen", S("2024-10-30T18:00:00+00:00"), NULL));
	tl_put(TABLE, g_m1);
	/* Neighbours: another student and another course with the same shapes. */
	tl_put(TABLE, map("PK", S("STUDENT#s2"), "SK", S("PROFILE"), "GSI1PK", S("STUDENT"),
	                  "GSI1SK", S("2024-09-05"), "name", S("Bruno Lima"), "email",
	                  S("bruno@example.com"), NULL));
	tl_put(TABLE, map("PK", S("STUDENT#s2"), "SK", S("ENROLLMENT#c10"), "GSI1PK",
	                  S("COURSE#c10"), "GSI1SK", S("STUDENT#s2"), "progress", N("75"), NULL));
	tl_put(TABLE, map("PK", S("COURSE#c20"), "SK", S("METADATA"), "GSI1PK", S("INSTRUCTOR#i5"),
	                  "GSI1SK", S("COURSE#c20"), "title", S("Streams"), NULL));
	tl_put(TABLE, map("PK", S("COURSE#c20"), "SK", S("MODULE#m1"), "title", S("Intro"),
	                  "order_num", N("1"), NULL));
	tl_put(TABLE, map("PK", S("COURSE#c20"), "SK", S("MODULE#m1#LESSON#l1"), "lesson_id",
	                  S("l1"), "title", S("Shards"), "duration_min", N("9"), NULL));
}

/* Runs a query to the end (following LastEvaluatedKey) and checks the items
 * against want[0..n-1], in order. */
static void check_query(st_query_req *r, st_value *const *want, uint32_t n, uint32_t scanned)
{
	uint32_t got, pages, total_scanned;
	st_value *items = tl_query_all(r, &got, &pages, &total_scanned);
	ck_assert_uint_eq(got, n);
	for (uint32_t i = 0; i < got; i++)
		ck_assert_msg(st_value_equal(&items[i], want[i]), "item %u differs", i);
	ck_assert_uint_eq(total_scanned, scanned);
}

START_TEST(test_ap1_student_profile)
{
	st_get_req r = {.table = TABLE,
	                .key = map("PK", S("STUDENT#s1"), "SK", S("PROFILE"), NULL)};
	st_value *item;
	ck_assert_msg(st_get_item(tl_env, &r, &tl_arena, &item, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_ptr_nonnull(item);
	ck_assert(st_value_equal(item, g_profile));
	r.projection = "#n, email";
	r.names = map("#n", S("name"), NULL);
	ck_assert_int_eq(st_get_item(tl_env, &r, &tl_arena, &item, tl_msg), SHOAL_OK);
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
	ck_assert_int_eq(st_query(tl_env, &r, &tl_arena, &p, tl_msg), SHOAL_OK);
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
	return tl_suite("seed002", setup, tl_store_close, 0,
	                TL_TESTS(test_ap1_student_profile, test_ap2_student_enrollments,
	                         test_ap5_course_structure, test_ap6_modules_only,
	                         test_ap7_module_lessons));
}

TL_MAIN(seed002_suite)
