/* What group 0's executor knows of load (node/elastic_load.c): a group
 * leader's figures from its GroupStatus, and the book of keys found too hot
 * to split -- with time passed in (no clock, no sleeps). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/elastic_int.h"
#include "tests/lib/testlib.h"

#define S_NS 1000000000ull

/* A leader's GroupStatus of group 2: table "t" (number 7) throttled by
 * its partitions' limit (3 reads, 4 writes a second) and by other causes
 * (the rest of read_/write_throttled), an index of it that must not count,
 * and two hot keys of "t". */
static void figures(el_figures *f)
{
	Shoal__TableStats ts = SHOAL__TABLE_STATS__INIT;
	ts.table_name = "t", ts.table_number = 7, ts.size_bytes = 5000;
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
	Shoal__HotKey *hs[] = {&h1, &h2};
	Shoal__GroupStatus gs = SHOAL__GROUP_STATUS__INIT;
	gs.group = 2, gs.role = "leader";
	gs.n_tables = 1, gs.tables = tss;
	gs.n_load = 2, gs.load = ls;
	gs.n_hot_keys = 2, gs.hot_keys = hs;
	el_figures_of(&gs, f);
}

START_TEST(test_figures)
{
	el_figures f = {0};
	figures(&f);
	ck_assert_uint_eq(f.n_tables, 1);
	ck_assert_uint_eq(f.tables[0].table, 7);
	ck_assert_uint_eq(f.tables[0].group, 2);
	ck_assert_uint_eq(f.tables[0].bytes, 5000);
	ck_assert_double_eq(f.tables[0].units, 30);
	/* Only what a split relieves: the throttled at the partitions'
	 * limit, of the base table. */
	ck_assert_double_eq(f.tables[0].throttled, 7);
	ck_assert_uint_eq(f.n_keys, 2);
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

static Suite *elastic_load_suite(void)
{
	Suite *s = suite_create("elastic_load");
	TCase *tc = tcase_create("elastic_load");
	tcase_add_test(tc, test_figures);
	tcase_add_test(tc, test_unsplit_book);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(elastic_load_suite)
