/*
 * Fault injection on the write path: the N-th allocation fails (N = 1, 2, 3
 * ... until an operation completes without the fault firing), the commit
 * fails, the map fills up.  Every failed run must return the right error and
 * leave the store byte for byte as it was; run under ASan, none may leak.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/engine.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

/* Requests are built in tl_arena; the engine's results go to R, fresh for
 * every run. */
static sh_arena R;

/* The fault to arm, armed by each operation right before it calls the
 * engine (building the request must not hit the fault). */
static struct {
	enum sh_fault_point point;
	long n;
	bool sticky;
} fault;

/* ------------------------------------------------------------------------ */
/* Store snapshots                                                           */
/* ------------------------------------------------------------------------ */

typedef struct snap {
	uint8_t *buf;
	size_t len;
} snap;

/* Every key and value of every DBI, in order. */
static snap take(void)
{
	snap s;
	s.buf = tl_store_dump(tl_env, true, &s.len);
	return s;
}

static bool snap_eq(snap a, snap b)
{
	return a.len == b.len && memcmp(a.buf, b.buf, a.len) == 0;
}

/* ------------------------------------------------------------------------ */
/* A populated table                                                         */
/* ------------------------------------------------------------------------ */

static st_value *item(const char *pk, const char *sk)
{
	st_value *m = map("PK", S(pk), "SK", N(sk), NULL);
	st_map_set(&tl_arena, m, "a", 1, N("1"));
	st_map_set(&tl_arena, m, "m", 1, map("x", map("y", N("1"), NULL), "s", S("str"), NULL));
	st_map_set(&tl_arena, m, "l", 1, list(2, N("1"), S("two")));
	st_map_set(&tl_arena, m, "s", 1, SS(2, "a", "b"));
	/* Bulk, so that the engine's arena grows block by block at many
	 * different points of an operation. */
	static char text[3001];
	memset(text, 't', 3000);
	st_map_set(&tl_arena, m, "text", 4, S(text));
	st_value *bulk = sh_arena_calloc(&tl_arena, 1, sizeof(*bulk));
	bulk->type = ST_L;
	bulk->u.list.n = 60;
	bulk->u.list.v = sh_arena_calloc(&tl_arena, 60, sizeof(st_value));
	for (int i = 0; i < 60; i++) {
		char num[16];
		snprintf(num, sizeof(num), "%d.25", i * 1000);
		bulk->u.list.v[i] = *map("n", N(num), "s", S(num), NULL);
	}
	st_map_set(&tl_arena, m, "list", 4, bulk);
	return m;
}

static void open_populated(void)
{
	tl_env_open("faults", &(st_env_options){.map_size = 64 << 20, .nosync = true});
	char msg[SH_ERRMSG_SIZE];
	st_key_attr attrs[] = {{"PK", ST_S}, {"SK", ST_N}, {"G", ST_S}};
	st_index_def gsi = {.name = "byG",
	                    .key = {{"G", ST_S}, {"SK", ST_N}},
	                    .projection = ST_PROJ_ALL,
	                    .write_shards = 2};
	st_table_def def = {.name = "Fau",
	                    .key = {{"PK", ST_S}, {"SK", ST_N}},
	                    .attrs = attrs,
	                    .n_attrs = 3,
	                    .indexes = &gsi,
	                    .n_indexes = 1};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	ck_assert_msg(st_table_create(txn, &def, msg) == SHOAL_OK, "%s", msg);
	st_txn_set_applied(txn, 1);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_OK);
	const char *keys[][2] = {{"p", "1"}, {"p", "2"}, {"q", "1"}, {"r", "-3.5"}};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		st_put_req r = {.table = "Fau", .item = item(keys[i][0], keys[i][1])};
		ck_assert_int_eq(st_put_item(tl_env, &r, &tl_arena, NULL, msg), SHOAL_OK);
	}
	sh_arena_reset(&tl_arena);
}

static void setup(void)
{
	tl_arena_setup();
	fault.n = 0;
}

/* ------------------------------------------------------------------------ */
/* The operations under test                                                 */
/* ------------------------------------------------------------------------ */

typedef int (*op_fn)(char *msg);

static void arm(void)
{
	if (fault.n > 0)
		sh_fault_arm(fault.point, fault.n, fault.sticky);
}

static int op_put_new(char *msg)
{
	st_put_req r = {.table = "Fau",
	                .item = item("p", "3"),
	                .condition = "attribute_not_exists(PK)",
	                .return_values = ST_RV_ALL_OLD};
	st_write_result res;
	arm();
	return st_put_item(tl_env, &r, &R, &res, msg);
}

static int op_put_over(char *msg)
{
	st_value *it = item("p", "1");
	st_map_set(&tl_arena, it, "extra", 5, S("more"));
	st_put_req r = {.table = "Fau", .item = it, .return_values = ST_RV_ALL_OLD};
	st_write_result res;
	arm();
	return st_put_item(tl_env, &r, &R, &res, msg);
}

static int op_update(char *msg)
{
	st_update_req r = {.table = "Fau",
	                   .key = map("PK", S("p"), "SK", N("1"), NULL),
	                   .update = "SET m.x.z = :v, l[0] = :w, #new = :w ADD a :one, s :ss "
	                             "REMOVE m.s",
	                   .condition = "attribute_exists(m.x.y) AND a = :one",
	                   .attrs = {map("#new", S("brand_new"), NULL), NULL},
	                   .return_values = ST_RV_UPDATED_NEW};
	st_value *vals = map(":v", S("zz"), ":w", N("42"), NULL);
	st_map_set(&tl_arena, vals, ":one", 4, N("1"));
	st_map_set(&tl_arena, vals, ":ss", 3, SS(2, "c", "d"));
	r.attrs.values = vals;
	st_write_result res;
	arm();
	return st_update_item(tl_env, &r, &R, &res, msg);
}

static int op_update_absent(char *msg)
{
	st_update_req r = {.table = "Fau",
	                   .key = map("PK", S("new"), "SK", N("9"), NULL),
	                   .update = "SET n = :w ADD c :w",
	                   .attrs = {NULL, map(":w", N("5"), NULL)},
	                   .return_values = ST_RV_ALL_NEW};
	st_write_result res;
	arm();
	return st_update_item(tl_env, &r, &R, &res, msg);
}

static int op_delete(char *msg)
{
	st_delete_req r = {.table = "Fau",
	                   .key = map("PK", S("p"), "SK", N("2"), NULL),
	                   .condition = "attribute_exists(PK) AND size(l) = :two",
	                   .attrs = {NULL, map(":two", N("2"), NULL)},
	                   .return_values = ST_RV_ALL_OLD};
	st_write_result res;
	arm();
	return st_delete_item(tl_env, &r, &R, &res, msg);
}

static int op_txn_batch(char *msg)
{
	st_put_req p = {.table = "Fau", .item = item("b", "1")};
	st_delete_req d = {.table = "Fau", .key = map("PK", S("q"), "SK", N("1"), NULL)};
	st_update_req u = {.table = "Fau",
	                   .key = map("PK", S("r"), "SK", N("-3.5"), NULL),
	                   .update = "ADD a :one",
	                   .attrs = {NULL, map(":one", N("1"), NULL)}};
	st_put_req bad = {.table = "Fau", .item = map("PK", S("x"), NULL)};
	st_txn *txn;
	arm();
	int rc = st_txn_begin(tl_env, &txn, msg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_put(txn, &p, &R, NULL, msg);
	if (rc == SHOAL_OK) {
		/* A client error in the middle must not disturb anything. */
		char bmsg[SH_ERRMSG_SIZE];
		int brc = st_put(txn, &bad, &R, NULL, bmsg);
		if (brc == SHOAL_OK)
			rc = sh_errf(msg, SHOAL_E_INTERNAL, "bad put accepted");
		else if (brc != SHOAL_E_VALIDATION)
			rc = sh_errf(msg, brc, "%s", bmsg);
	}
	if (rc == SHOAL_OK)
		rc = st_delete(txn, &d, &R, NULL, msg);
	if (rc == SHOAL_OK)
		rc = st_update(txn, &u, &R, NULL, msg);
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	st_txn_set_applied(txn, 2);
	return st_txn_commit(txn, msg);
}

static int op_create_table(char *msg)
{
	st_key_attr attrs[] = {{"H", ST_B}, {"R", ST_N}, {"L", ST_S}};
	st_index_def lsi = {.name = "lsi", .local = true, .key = {{"H", ST_B}, {"L", ST_S}}};
	st_table_def def = {.name = "Other",
	                    .key = {{"H", ST_B}, {"R", ST_N}},
	                    .attrs = attrs,
	                    .n_attrs = 3,
	                    .indexes = &lsi,
	                    .n_indexes = 1};
	st_txn *txn;
	arm();
	int rc = st_txn_begin(tl_env, &txn, msg);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = st_table_create(txn, &def, msg)) != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, msg);
}

static int op_delete_table(char *msg)
{
	st_txn *txn;
	arm();
	int rc = st_txn_begin(tl_env, &txn, msg);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = st_table_delete(txn, "Fau", msg)) != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	return st_txn_commit(txn, msg);
}

static int run(size_t i, char *msg);

static const struct {
	const char *name;
	op_fn fn;
} ops[] = {
    {"put new", op_put_new},
    {"put over", op_put_over},
    {"update", op_update},
    {"update absent", op_update_absent},
    {"delete", op_delete},
    {"txn batch", op_txn_batch},
    {"create table", op_create_table},
    {"delete table", op_delete_table},
};
#define N_OPS (sizeof(ops) / sizeof(ops[0]))

static long last_fired; /* how often the fault fired in the last run */

/* Runs op i with a fresh result arena, as a request would. */
static int run(size_t i, char *msg)
{
	sh_arena_init(&R);
	/* Tiny first block: the arena then goes to sh_malloc at many more
	 * points of an operation, each one a place for the fault to hit. */
	R.block_size = 16;
	int rc = ops[i].fn(msg);
	last_fired = sh_fault_fired(fault.point);
	sh_fault_reset();
	sh_arena_fini(&R);
	return rc;
}

/* The store after a clean run of op i. */
static snap expected_after(size_t i)
{
	char msg[SH_ERRMSG_SIZE] = "";
	open_populated();
	snap before = take();
	fault.n = 0;
	int rc = run(i, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s: %s", ops[i].name, msg);
	snap after = take();
	ck_assert_msg(!snap_eq(before, after), "%s changed nothing", ops[i].name);
	free(before.buf);
	sh_arena_reset(&tl_arena);
	tl_env_close();
	return after;
}

static void alloc_loop(size_t i, bool sticky)
{
	snap want = expected_after(i);
	open_populated();
	snap before = take();
	long n;
	for (n = 1; n < 100000; n++) {
		char msg[SH_ERRMSG_SIZE] = "";
		fault.point = SH_FAULT_ALLOC;
		fault.n = n;
		fault.sticky = sticky;
		int rc = run(i, msg);
		long fired = last_fired;
		sh_arena_reset(&tl_arena);
		if (rc == SHOAL_OK) {
			snap now = take();
			ck_assert_msg(snap_eq(now, want), "%s, alloc %ld: wrong result",
			              ops[i].name, n);
			free(now.buf);
			if (fired == 0)
				break;
			/* The fault was absorbed: start again from a clean store. */
			tl_env_close();
			open_populated();
			continue;
		}
		ck_assert_msg(rc == SHOAL_E_NOMEM, "%s, alloc %ld%s: %s (%s)", ops[i].name, n,
		              sticky ? " sticky" : "", shoal_err_name(rc), msg);
		ck_assert_msg(fired > 0, "%s: NOMEM without a fault", ops[i].name);
		ck_assert(msg[0] != '\0');
		snap now = take();
		ck_assert_msg(snap_eq(now, before), "%s, alloc %ld: store changed", ops[i].name, n);
		free(now.buf);
	}
	if (getenv("FAULTS_VERBOSE"))
		printf("%s%s: %ld allocation points\n", ops[i].name, sticky ? " (sticky)" : "",
		       n - 1);
	ck_assert_msg(n > 1, "%s allocated nothing", ops[i].name);
	ck_assert_msg(n < 100000, "%s never completed", ops[i].name);
	free(want.buf);
	free(before.buf);
	tl_env_close();
}

START_TEST(test_alloc_faults)
{
	alloc_loop((size_t)_i, false);
}
END_TEST

START_TEST(test_alloc_faults_sticky)
{
	alloc_loop((size_t)_i, true);
}
END_TEST

START_TEST(test_commit_faults)
{
	size_t i = (size_t)_i;
	snap want = expected_after(i);
	open_populated();
	snap before = take();
	char msg[SH_ERRMSG_SIZE] = "";
	fault.point = SH_FAULT_COMMIT;
	fault.n = 1;
	int rc = run(i, msg);
	ck_assert_int_eq(last_fired, 1);
	ck_assert_msg(rc == SHOAL_E_IO, "%s: %s", ops[i].name, shoal_err_name(rc));
	ck_assert_str_eq(msg, "mdb_txn_commit: injected fault");
	snap now = take();
	ck_assert(snap_eq(now, before));
	free(now.buf);
	/* The next commit goes through. */
	fault.n = 2;
	rc = run(i, msg);
	ck_assert_int_eq(last_fired, 0);
	ck_assert_int_eq(rc, SHOAL_OK);
	now = take();
	ck_assert(snap_eq(now, want));
	free(now.buf);
	free(want.buf);
	free(before.buf);
	tl_env_close();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A full map                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_map_full)
{
	tl_env_open("full", &(st_env_options){.map_size = 1 << 20, .nosync = true});
	tl_create_table("Full", "PK", ST_S, NULL, ST_NONE);
	char msg[SH_ERRMSG_SIZE];

	char *payload = malloc(10001);
	memset(payload, 'x', 10000);
	payload[10000] = '\0';
	int rc = SHOAL_OK, stored = 0;
	for (int i = 0; i < 1000; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%04d", i);
		st_put_req r = {.table = "Full", .item = map("PK", S(pk), "v", S(payload), NULL)};
		rc = st_put_item(tl_env, &r, &tl_arena, NULL, msg);
		if (rc != SHOAL_OK)
			break;
		stored++;
		sh_arena_reset(&tl_arena);
	}
	ck_assert_msg(rc == SHOAL_E_FULL, "%s: %s", shoal_err_name(rc), msg);
	ck_assert_ptr_nonnull(strstr(msg, "MDB_MAP_FULL"));
	ck_assert_int_gt(stored, 10);

	/* Reads still work, and see exactly the committed items. */
	st_table_info info;
	ck_assert_int_eq(st_table_describe(tl_env, "Full", &tl_arena, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, (uint64_t)stored);
	for (int i = 0; i < stored; i += 7) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%04d", i);
		st_get_req g = {.table = "Full", .key = map("PK", S(pk), NULL)};
		st_value *it;
		ck_assert_int_eq(st_get_item(tl_env, &g, &tl_arena, &it, msg), SHOAL_OK);
		ck_assert_ptr_nonnull(it);
		ck_assert_uint_eq(st_map_get(it, "v", 1)->u.str.len, 10000);
	}
	/* A transaction that hits the limit is poisoned and commits nothing. */
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, msg), SHOAL_OK);
	st_put_req big = {.table = "Full", .item = map("PK", S("big"), "v", S(payload), NULL)};
	for (int i = 0; i < 100 && (rc = st_put(txn, &big, &tl_arena, NULL, msg)) == SHOAL_OK; i++)
		big.item = map("PK", S(i % 2 ? "big1" : "big2"), "v", S(payload), NULL);
	ck_assert_int_eq(rc, SHOAL_E_FULL);
	st_put_req small = {.table = "Full", .item = map("PK", S("small"), NULL)};
	ck_assert_int_eq(st_put(txn, &small, &tl_arena, NULL, msg), SHOAL_E_FULL);
	ck_assert_int_eq(st_txn_commit(txn, msg), SHOAL_E_FULL);
	ck_assert_int_eq(st_table_describe(tl_env, "Full", &tl_arena, &info, msg), SHOAL_OK);
	ck_assert_uint_eq(info.item_count, (uint64_t)stored);
	/* Deleting makes room again. */
	for (int i = 0; i < stored; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%04d", i);
		st_delete_req d = {.table = "Full", .key = map("PK", S(pk), NULL)};
		ck_assert_msg(st_delete_item(tl_env, &d, &tl_arena, NULL, msg) == SHOAL_OK, "%s",
		              msg);
		sh_arena_reset(&tl_arena);
	}
	st_put_req again = {.table = "Full", .item = map("PK", S("again"), "v", S(payload), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &again, &tl_arena, NULL, msg), SHOAL_OK);
	free(payload);
	tl_env_close();
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, tl_arena_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_alloc_faults, 0, (int)N_OPS);
	tcase_add_loop_test(tc, test_alloc_faults_sticky, 0, (int)N_OPS);
	tcase_add_loop_test(tc, test_commit_faults, 0, (int)N_OPS);
	tcase_add_test(tc, test_map_full);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(faults_suite)
