/* What group 0's executor knows of load (node/elastic_load.c): a group
 * leader's figures from its GroupStatus, and the book of keys found too hot
 * to split -- with time passed in (no clock, no sleeps). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "node/elastic_int.h"
#include "storage/index.h"
#include "tests/lib/testlib.h"

#define S_NS 1000000000ull

/* A leader's GroupStatus of group 2: table "t" (number 7) throttled by
 * its partitions' limit (3 reads, 4 writes a second) and by other causes
 * (the rest of read_/write_throttled), its GSI "byV" (4 write shards) as
 * loaded and 700 bytes of its entries here, its LSI's 300 bytes (the
 * table's), two hot keys of "t" and one of "byV". */
static void figures(el_figures *f)
{
	Shoal__TableStats ts = SHOAL__TABLE_STATS__INIT;
	ts.table_name = "t", ts.table_number = 7, ts.size_bytes = 5000;
	Shoal__IndexStats lsi = SHOAL__INDEX_STATS__INIT, gsix = SHOAL__INDEX_STATS__INIT;
	lsi.index_name = "byL", lsi.index_id = 1, lsi.local = true, lsi.size_bytes = 300;
	gsix.index_name = "byV", gsix.index_id = 2, gsix.write_shards = 4, gsix.size_bytes = 700;
	Shoal__IndexStats *ixs[] = {&lsi, &gsix};
	ts.n_indexes = 2, ts.indexes = ixs;
	Shoal__TableStats *tss[] = {&ts};
	Shoal__PartitionLoad base = SHOAL__PARTITION_LOAD__INIT, gsi = SHOAL__PARTITION_LOAD__INIT;
	base.table = "t", base.index = "";
	base.read_units = 10, base.write_units = 20;
	base.read_throttled = 9, base.write_throttled = 40;
	base.read_throttled_at_limit = 3, base.write_throttled_at_limit = 4;
	gsi = base, gsi.index = "byV";
	Shoal__PartitionLoad *ls[] = {&base, &gsi};
	Shoal__HotKey h1 = SHOAL__HOT_KEY__INIT, h2 = SHOAL__HOT_KEY__INIT;
	h1.table = "t", h1.index = "", h1.key = "{\"S\":\"hot\"}", h1.write_units = 15;
	h2 = h1, h2.key = "{\"N\":\"42\"}", h2.write_units = 1;
	Shoal__HotKey h3 = h1;
	h3.index = "byV", h3.key = "{\"S\":\"v\"}", h3.write_units = 8;
	Shoal__HotKey *hs[] = {&h1, &h2, &h3};
	Shoal__GroupStatus gs = SHOAL__GROUP_STATUS__INIT;
	gs.group = 2, gs.role = "leader";
	gs.n_tables = 1, gs.tables = tss;
	gs.n_load = 2, gs.load = ls;
	gs.n_hot_keys = 3, gs.hot_keys = hs;
	el_figures_of(&gs, f);
}

START_TEST(test_figures)
{
	el_figures f = {0};
	figures(&f);
	ck_assert_uint_eq(f.n_tables, 2);
	ck_assert_uint_eq(f.tables[0].table, 7);
	ck_assert_uint_eq(f.tables[0].group, 2);
	ck_assert_uint_eq(f.tables[0].bytes, 5000);
	ck_assert_double_eq(f.tables[0].units, 30);
	/* Only what a split relieves: the throttled at the partitions'
	 * limit, of the base table. */
	ck_assert_double_eq(f.tables[0].throttled, 7);
	/* The GSI space: the GSI's entries and load here, not the LSI's. */
	ck_assert_uint_eq(f.tables[1].table, SH_MAP_GSI_SPACE);
	ck_assert_uint_eq(f.tables[1].group, 2);
	ck_assert_uint_eq(f.tables[1].bytes, 700);
	ck_assert_double_eq(f.tables[1].units, 30);
	ck_assert_double_eq(f.tables[1].throttled, 7);
	/* The GSI key: one sample per write shard, at its entries' hashes,
	 * with a quarter of its units each. */
	ck_assert_uint_eq(f.n_keys, 6);
	st_value v = {.type = ST_S, .u.str = {.ptr = "v", .len = 1}};
	for (uint32_t s = 0; s < 4; s++) {
		const sh_plan_key_load *k = &f.keys[2 + s];
		ck_assert_uint_eq(k->table, SH_MAP_GSI_SPACE);
		ck_assert_uint_eq(k->hash, st_index_hash(7, 2, s, &v));
		ck_assert_double_eq(k->units, 2);
		ck_assert_str_eq(f.names[2 + s].index, "byV");
		ck_assert_str_eq(f.names[2 + s].table, "t");
	}
	ck_assert_str_eq(f.names[0].index, "");
	ck_assert_str_eq(f.names[0].table, "t");
	ck_assert_str_eq(f.names[0].key, "{\"S\":\"hot\"}");
	ck_assert_str_eq(f.names[1].key, "{\"N\":\"42\"}");
	ck_assert(f.keys[0].hash != f.keys[1].hash);
	el_figures_fini(&f);
	ck_assert_ptr_null(f.names);
}
END_TEST

START_TEST(test_unsplit_book)
{
	sh_cluster_conf conf;
	memset(&conf, 0, sizeof(conf));
	el_book *b;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(el_book_new(&conf, &b, msg), SHOAL_OK);
	el_figures f = {0};
	figures(&f);
	uint64_t hot = f.keys[0].hash, t0 = 1000 * S_NS;
	el_unsplit u[EL_HOT_SEEN];

	/* Found: logged once, then quiet for EL_HOT_QUIET_S however often it
	 * is found again; named from the leader's figures. */
	ck_assert(el_hot_key_found(b, &f, 7, hot, 2, 0x8000000000000000ull, false, t0));
	ck_assert(!el_hot_key_found(b, &f, 7, hot, 2, 0x8000000000000000ull, false, t0 + S_NS));
	ck_assert_uint_eq(el_unsplit_list(b, t0 + 2 * S_NS, u, EL_HOT_SEEN), 1);
	ck_assert_str_eq(u[0].name.table, "t");
	ck_assert_str_eq(u[0].name.key, "{\"S\":\"hot\"}");
	ck_assert_uint_eq(u[0].table, 7);
	ck_assert_uint_eq(u[0].group, 2);
	ck_assert_uint_eq(u[0].lo, 0x8000000000000000ull);
	ck_assert(!u[0].by_size);
	ck_assert_uint_eq(u[0].first_ns, t0);
	ck_assert_uint_eq(u[0].last_ns, t0 + S_NS);

	/* Shown while found in the last EL_HOT_SHOW_S, gone after. */
	uint64_t last = t0 + S_NS;
	ck_assert_uint_eq(el_unsplit_list(b, last + EL_HOT_SHOW_S * S_NS - 1, u, EL_HOT_SEEN), 1);
	ck_assert_uint_eq(el_unsplit_list(b, last + EL_HOT_SHOW_S * S_NS, u, EL_HOT_SEEN), 0);
	/* Logged again only an EL_HOT_QUIET_S after the first report. */
	ck_assert(
	    !el_hot_key_found(b, NULL, 7, hot, 2, 0, false, t0 + (EL_HOT_QUIET_S - 1) * S_NS));
	ck_assert(el_hot_key_found(b, NULL, 7, hot, 2, 0, false, t0 + EL_HOT_QUIET_S * S_NS));
	/* Without figures naming it, the name it had stays. */
	ck_assert_uint_eq(el_unsplit_list(b, t0 + EL_HOT_QUIET_S * S_NS, u, EL_HOT_SEEN), 1);
	ck_assert_str_eq(u[0].name.key, "{\"S\":\"hot\"}");

	/* A full book forgets the key found least recently: EL_HOT_SEEN
	 * other keys, each found later than `hot`, push it out. */
	uint64_t t1 = t0 + (EL_HOT_QUIET_S + 1) * S_NS;
	for (uint64_t k = 1; k <= EL_HOT_SEEN; k++)
		ck_assert(el_hot_key_found(b, NULL, 8, k, 1, 0, true, t1 + k));
	uint32_t n = el_unsplit_list(b, t1 + EL_HOT_SEEN + 1, u, EL_HOT_SEEN);
	ck_assert_uint_eq(n, EL_HOT_SEEN);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_uint_eq(u[i].table, 8);
		ck_assert(u[i].by_size);
		ck_assert_str_eq(u[i].name.key, "");
	}
	/* ... and found again it is new: logged, first found now. */
	ck_assert(el_hot_key_found(b, &f, 7, hot, 2, 0, false, t1 + S_NS));
	n = el_unsplit_list(b, t1 + S_NS, u, EL_HOT_SEEN);
	bool seen = false;
	for (uint32_t i = 0; i < n; i++)
		if (u[i].table == 7) {
			seen = true;
			ck_assert_uint_eq(u[i].first_ns, t1 + S_NS);
		}
	ck_assert(seen);
	el_figures_fini(&f);
	el_book_free(b);
}
END_TEST

/* The heat window of a (group, table): its units and throttled requests
 * averaged over EL_HEAT_WINDOW one-second samples -- and begun again when
 * the table's partitions in the group change in number (a split in place
 * raised the group's limits: what came before must not split the halves
 * again), not when the table enters the map. */
START_TEST(test_heat_window)
{
	sh_cluster_conf conf;
	memset(&conf, 0, sizeof(conf));
	el_book *b;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(el_book_new(&conf, &b, msg), SHOAL_OK);
	sh_map m;
	sh_map_init(&m, 3);
	uint32_t ids[3] = {1, 2, 3};
	for (uint32_t i = 1; i <= 3; i++) {
		sh_map_node nd = {.id = i};
		ck_assert_int_eq(sh_map_add_node(&m, &nd, msg), SHOAL_OK);
	}
	for (uint32_t g = 0; g < 3; g++)
		ck_assert_int_eq(sh_map_add_group(&m, g, ids, 3, msg), SHOAL_OK);
	el_figures figs[3] = {{0}};
	sh_plan_table_load t = {.group = 2, .table = 7, .bytes = 1, .units = 50, .throttled = 20};
	figs[2].tables = &t, figs[2].n_tables = 1;
	sh_plan_table_load *tables;
	sh_plan_part_load *parts;
	sh_plan_sample *samples;
	uint32_t n;
	uint64_t now = 1000 * S_NS;
	/* Not in the map: 1/5, 2/5, ... of the figure as the window fills. */
	for (int s = 1; s <= 3; s++, now += S_NS) {
		ck_assert_int_eq(el_round_loads(b, &m, figs, now, &tables, &n, &parts, &samples),
		                 SHOAL_OK);
		ck_assert_uint_eq(n, 1);
		ck_assert_double_eq_tol(tables[0].throttled, 20.0 * s / EL_HEAT_WINDOW, 1e-9);
		sh_free(tables), sh_free(parts), sh_free(samples);
	}
	/* Entering the map (2 groups' partitions, one in group 2) keeps it. */
	ck_assert_int_eq(sh_map_add_table(&m, 7, 2, 2, msg), SHOAL_OK);
	for (int s = 4; s <= 6; s++, now += S_NS) {
		ck_assert_int_eq(el_round_loads(b, &m, figs, now, &tables, &n, &parts, &samples),
		                 SHOAL_OK);
		double want = 20.0 * (s < EL_HEAT_WINDOW ? s : EL_HEAT_WINDOW) / EL_HEAT_WINDOW;
		ck_assert_double_eq_tol(tables[0].throttled, want, 1e-9);
		sh_free(tables), sh_free(parts), sh_free(samples);
	}
	/* Group 2's partition split in place: the window begins again, and
	 * the figures at hand (reported before the split) are not a sample:
	 * none this round nor in the next 0.9 s, the next second's is. */
	uint32_t i = m.parts[0].group == 2 ? 0 : 1;
	ck_assert_uint_eq(m.parts[i].group, 2);
	uint64_t lo = m.parts[i].lo, hi = sh_map_part_hi(&m, i);
	ck_assert_int_eq(sh_map_split(&m, 7, lo, lo + (hi - lo) / 2 + 1, 2, msg), SHOAL_OK);
	uint64_t after[3] = {now, now + S_NS / 2, now + S_NS};
	double want[3] = {0, 0, 1};
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(
		    el_round_loads(b, &m, figs, after[k], &tables, &n, &parts, &samples), SHOAL_OK);
		ck_assert_double_eq_tol(tables[0].throttled, 20.0 * want[k] / EL_HEAT_WINDOW, 1e-9);
		ck_assert_double_eq_tol(tables[0].units, 50.0 * want[k] / EL_HEAT_WINDOW, 1e-9);
		sh_free(tables), sh_free(parts), sh_free(samples);
	}
	sh_map_fini(&m);
	el_book_free(b);
}
END_TEST

static Suite *elastic_load_suite(void)
{
	Suite *s = suite_create("elastic_load");
	TCase *tc = tcase_create("elastic_load");
	tcase_add_test(tc, test_figures);
	tcase_add_test(tc, test_heat_window);
	tcase_add_test(tc, test_unsplit_book);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(elastic_load_suite)
