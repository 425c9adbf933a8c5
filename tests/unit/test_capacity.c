/* ReturnConsumedCapacity: the unit arithmetic and ConsumedCapacity messages
 * of proto/wire_capacity.c, and the size figures the storage engine hands
 * out for it (write results, GetItem, Query/Scan pages). */
#include <check.h>
#include <string.h>

#include "proto/wire.h"
#define TL_VALUE_NAMES
#include "tests/lib/testlib.h"
#include "tests/lib/tl_store.h"

/* ------------------------------------------------------------------------ */
/* Arithmetic                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_units)
{
	ck_assert_int_eq(wire_rcc_parse("TOTAL"), WIRE_RCC_TOTAL);
	ck_assert_int_eq(wire_rcc_parse("INDEXES"), WIRE_RCC_INDEXES);
	ck_assert_int_eq(wire_rcc_parse("NONE"), WIRE_RCC_NONE);
	ck_assert_int_eq(wire_rcc_parse(NULL), WIRE_RCC_NONE);

	/* Reads: 4 KB units, at least one, halved when eventually consistent. */
	ck_assert_double_eq(wire_read_units(0, true), 1.0);
	ck_assert_double_eq(wire_read_units(0, false), 0.5);
	ck_assert_double_eq(wire_read_units(4096, true), 1.0);
	ck_assert_double_eq(wire_read_units(4097, true), 2.0);
	ck_assert_double_eq(wire_read_units(5 * 1024, true), 2.0);
	ck_assert_double_eq(wire_read_units(5 * 1024, false), 1.0);
	ck_assert_double_eq(wire_read_units(3 * 4096 + 1, false), 2.0);
	/* Writes: 1 KB units, at least one. */
	ck_assert_double_eq(wire_write_units(0), 1.0);
	ck_assert_double_eq(wire_write_units(1), 1.0);
	ck_assert_double_eq(wire_write_units(1024), 1.0);
	ck_assert_double_eq(wire_write_units(1025), 2.0);
	ck_assert_double_eq(wire_write_units(5 * 1024), 5.0);
}
END_TEST

START_TEST(test_messages)
{
	Shoal__ConsumedCapacity *none, *total, *ix;
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_NONE, "t", &none), SHOAL_OK);
	ck_assert_ptr_null(none);
	wire_capacity_charge_table(none, 3); /* NULL: nothing */

	/* TOTAL: the table name and the total, nothing else. */
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_TOTAL, "t", &total), SHOAL_OK);
	wire_capacity_charge_table(total, 2);
	ck_assert_int_eq(wire_capacity_charge_index(&tl_arena, total, "g", false, 1), SHOAL_OK);
	ck_assert_str_eq(total->table_name, "t");
	ck_assert_double_eq(total->capacity_units, 3);
	ck_assert_ptr_null(total->table);
	ck_assert_uint_eq(total->n_global_secondary_indexes, 0);

	/* INDEXES: the table's share and each index's, the total of all. */
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_INDEXES, "t", &ix), SHOAL_OK);
	st_index_write w[2] = {{"g", false, true, true, 100, 1500},
	                       {"l", true, false, true, 0, 10}};
	st_write_result res = {
	    .old_size = 900, .new_size = 2100, .index_writes = w, .n_index_writes = 2};
	ck_assert_int_eq(wire_capacity_charge_write(&tl_arena, ix, &res), SHOAL_OK);
	ck_assert_double_eq(ix->capacity_units, 3 + 3 + 1);
	ck_assert_ptr_nonnull(ix->table);
	ck_assert_double_eq(ix->table->capacity_units, 3);
	ck_assert_uint_eq(ix->n_global_secondary_indexes, 1);
	ck_assert_str_eq(ix->global_secondary_indexes[0]->index_name, "g");
	ck_assert_double_eq(ix->global_secondary_indexes[0]->capacity->capacity_units, 3);
	ck_assert_uint_eq(ix->n_local_secondary_indexes, 1);
	ck_assert_double_eq(ix->local_secondary_indexes[0]->capacity->capacity_units, 1);

	/* Adding: shares add up per table and per index. */
	Shoal__ConsumedCapacity *ix2;
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_INDEXES, "t", &ix2), SHOAL_OK);
	wire_capacity_charge_table(ix2, 1);
	ck_assert_int_eq(wire_capacity_charge_index(&tl_arena, ix2, "g", false, 2), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_charge_index(&tl_arena, ix2, "h", false, 0.5), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_add(&tl_arena, ix, ix2), SHOAL_OK);
	ck_assert_double_eq(ix->capacity_units, 7 + 3.5);
	ck_assert_double_eq(ix->table->capacity_units, 4);
	ck_assert_uint_eq(ix->n_global_secondary_indexes, 2);
	ck_assert_double_eq(ix->global_secondary_indexes[0]->capacity->capacity_units, 5);
	ck_assert_double_eq(ix->global_secondary_indexes[1]->capacity->capacity_units, 0.5);

	/* Lists: one entry per table, copies (the inputs are not changed). */
	Shoal__ConsumedCapacity **list = NULL, *other;
	size_t n = 0;
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_TOTAL, "u", &other), SHOAL_OK);
	wire_capacity_charge_table(other, 0.5);
	ck_assert_int_eq(wire_capacity_list_add(&tl_arena, &list, &n, total), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_list_add(&tl_arena, &list, &n, other), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_list_add(&tl_arena, &list, &n, total), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_list_add(&tl_arena, &list, &n, NULL), SHOAL_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0]->table_name, "t");
	ck_assert_double_eq(list[0]->capacity_units, 6);
	ck_assert_ptr_null(list[0]->table);
	ck_assert_str_eq(list[1]->table_name, "u");
	ck_assert_double_eq(list[1]->capacity_units, 0.5);
	ck_assert_double_eq(total->capacity_units, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sizes from the storage engine                                             */
/* ------------------------------------------------------------------------ */

static void setup(void)
{
	tl_store_open("capacity", NULL);
	st_key_schema key = {{"pk", ST_S}, {NULL, ST_NONE}};
	st_key_schema gkey = {{"g", ST_S}, {NULL, ST_NONE}};
	tl_create_table_gsi("cap", key, "gsi", gkey);
}

/* An item of exactly `size` bytes: pk "a" (3), g "x" (2) when with_g, and
 * "data" (4 + its length). */
static st_value *item_of(size_t size, bool with_g, const char *g)
{
	size_t fixed = 3 + 4 + (with_g ? 1 + strlen(g) : 0);
	st_value *it = with_g ? map("pk", S("a"), "g", S(g), "data", Sn(size - fixed, 'd'), NULL)
	                      : map("pk", S("a"), "data", Sn(size - fixed, 'd'), NULL);
	ck_assert_uint_eq(st_item_size(it), size);
	return it;
}

START_TEST(test_write_sizes)
{
	st_write_result res;
	/* A new 5 KB item with a GSI entry: 5 units + the entry's 5. */
	st_put_req p = {.table = "cap", .item = item_of(5 * 1024, true, "x")};
	ck_assert_int_eq(st_put_item(tl_env, &p, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.old_size, 0);
	ck_assert_uint_eq(res.new_size, 5 * 1024);
	ck_assert_uint_eq(res.n_index_writes, 1);
	ck_assert_str_eq(res.index_writes[0].name, "gsi");
	ck_assert(!res.index_writes[0].local);
	ck_assert(!res.index_writes[0].del && res.index_writes[0].put);
	ck_assert_uint_eq(res.index_writes[0].put_size, 5 * 1024);
	Shoal__ConsumedCapacity *cc;
	ck_assert_int_eq(wire_capacity_new(&tl_arena, WIRE_RCC_INDEXES, "t", &cc), SHOAL_OK);
	ck_assert_int_eq(wire_capacity_charge_write(&tl_arena, cc, &res), SHOAL_OK);
	ck_assert_double_eq(cc->capacity_units, 10);
	ck_assert_double_eq(cc->table->capacity_units, 5);

	/* Replaced by a 1 KB item whose GSI key moved: the larger size counts,
	 * the entry is a delete and a put. */
	p.item = item_of(1024, true, "y");
	ck_assert_int_eq(st_put_item(tl_env, &p, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.old_size, 5 * 1024);
	ck_assert_uint_eq(res.new_size, 1024);
	ck_assert_uint_eq(res.n_index_writes, 1);
	ck_assert(res.index_writes[0].del && res.index_writes[0].put);
	ck_assert_uint_eq(res.index_writes[0].del_size, 5 * 1024);

	/* UpdateItem that drops the GSI key: a delete of the entry only. */
	st_update_req u = {.table = "cap", .key = map("pk", S("a"), NULL), .update = "REMOVE g"};
	ck_assert_int_eq(st_update_item(tl_env, &u, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.old_size, 1024);
	ck_assert_uint_eq(res.new_size, 1024 - 2);
	ck_assert_uint_eq(res.n_index_writes, 1);
	ck_assert(res.index_writes[0].del && !res.index_writes[0].put);

	/* DeleteItem: the old item's size, no index entry left to delete. */
	st_delete_req d = {.table = "cap", .key = map("pk", S("a"), NULL)};
	ck_assert_int_eq(st_delete_item(tl_env, &d, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.old_size, 1024 - 2);
	ck_assert_uint_eq(res.new_size, 0);
	ck_assert_uint_eq(res.n_index_writes, 0);
	/* ... and of a missing item: nothing, charged the minimum. */
	ck_assert_int_eq(st_delete_item(tl_env, &d, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.old_size, 0);
	ck_assert_double_eq(wire_write_units(res.old_size), 1);
}
END_TEST

START_TEST(test_read_sizes)
{
	tl_put("cap", item_of(5 * 1024, false, NULL));
	st_value *item;
	size_t size;
	/* The whole item's size, also when a projection returns less. */
	st_get_req g = {.table = "cap", .key = map("pk", S("a"), NULL), .projection = "pk"};
	ck_assert_int_eq(st_get_item_sized(tl_env, &g, &tl_arena, &item, &size, tl_msg), SHOAL_OK);
	ck_assert_ptr_nonnull(item);
	ck_assert_uint_eq(size, 5 * 1024);
	ck_assert_double_eq(wire_read_units(size, true), 2);
	ck_assert_double_eq(wire_read_units(size, false), 1);
	g.key = map("pk", S("b"), NULL);
	ck_assert_int_eq(st_get_item_sized(tl_env, &g, &tl_arena, &item, &size, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(item);
	ck_assert_uint_eq(size, 0);

	/* Pages: every item evaluated counts, filtered out or not. */
	st_value *b = map("pk", S("b"), "data", Sn(3000, 'd'), NULL);
	tl_put("cap", b);
	st_scan_req s = {
	    .table = "cap", .filter = "pk = :none", .attrs = {NULL, map(":none", S("zzz"), NULL)}};
	st_page page;
	tl_scan_ok(&s, &page);
	ck_assert_uint_eq(page.count, 0);
	ck_assert_uint_eq(page.scanned, 2);
	ck_assert_uint_eq(page.bytes_read, 5 * 1024 + st_item_size(b));
	st_query_req q = {.table = "cap",
	                  .key_condition = "pk = :a",
	                  .attrs = {NULL, map(":a", S("a"), NULL)},
	                  .forward = true};
	tl_query_ok(&q, &page);
	ck_assert_uint_eq(page.bytes_read, 5 * 1024);
}
END_TEST

static Suite *capacity_suite(void)
{
	Suite *s = tl_suite("capacity", tl_arena_setup, tl_arena_teardown, 30,
	                    TL_TESTS(test_units, test_messages));
	TCase *tc = tcase_create("storage");
	tcase_add_checked_fixture(tc, setup, tl_store_close);
	tcase_add_test(tc, test_write_sizes);
	tcase_add_test(tc, test_read_sizes);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(capacity_suite)
