/* Secondary indexes: entries, outbox, apply, backfill, UpdateTable, index reads. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/engine.h"
#include "storage/index.h"
#include "storage/storage.h"
#define TL_VALUE_NAMES
#include "tests/lib/tl_store.h"

/* ------------------------------------------------------------------------ */
/* Fixture: env "src" (tl_env) and a second env "dst" with the same table     */
/*   T: PK S, SK S; GSIs byG (G S, R N, ALL), byK (G S, KEYS_ONLY),            */
/*      byI (H S, INCLUDE a), byW (W S, R N, ALL, 4 write shards)              */
/* ------------------------------------------------------------------------ */

static st_env *dst;
static char dst_dir[PATH_MAX];
static const char *inc_a[] = {"a"};

static st_index_def gsis[4];

static void t_def(st_table_def *d, st_key_attr *attrs, st_index_def *x, uint32_t nx)
{
	attrs[0] = (st_key_attr){"PK", ST_S};
	attrs[1] = (st_key_attr){"SK", ST_S};
	attrs[2] = (st_key_attr){"G", ST_S};
	attrs[3] = (st_key_attr){"R", ST_N};
	attrs[4] = (st_key_attr){"H", ST_S};
	attrs[5] = (st_key_attr){"W", ST_S};
	gsis[0] = (st_index_def){.name = "byG",
	                         .key = {{"G", ST_S}, {"R", ST_N}},
	                         .projection = ST_PROJ_ALL,
	                         .write_shards = 1,
	                         .status = ST_INDEX_ACTIVE};
	gsis[1] = (st_index_def){.name = "byK",
	                         .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                         .projection = ST_PROJ_KEYS_ONLY,
	                         .write_shards = 1,
	                         .status = ST_INDEX_ACTIVE};
	gsis[2] = (st_index_def){.name = "byI",
	                         .key = {{"H", ST_S}, {NULL, ST_NONE}},
	                         .projection = ST_PROJ_INCLUDE,
	                         .include = inc_a,
	                         .n_include = 1,
	                         .write_shards = 1,
	                         .status = ST_INDEX_ACTIVE};
	gsis[3] = (st_index_def){.name = "byW",
	                         .key = {{"W", ST_S}, {"R", ST_N}},
	                         .projection = ST_PROJ_ALL,
	                         .write_shards = 4,
	                         .status = ST_INDEX_ACTIVE};
	memcpy(x, gsis, nx * sizeof(*x));
	*d = (st_table_def){.name = "Tbl",
	                    .key = {{"PK", ST_S}, {"SK", ST_S}},
	                    .attrs = attrs,
	                    .n_attrs = nx == 0 ? 2 : 6,
	                    .indexes = x,
	                    .n_indexes = nx};
	if (nx == 1) /* byG only */
		d->n_attrs = 4;
}

static void create_in(st_env *e, uint32_t nx)
{
	st_key_attr attrs[6];
	st_index_def x[4];
	st_table_def d;
	t_def(&d, attrs, x, nx);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

static st_env *open_env(char *dir, const char *tag, const st_env_options *o)
{
	snprintf(dir, PATH_MAX, "%s", tl_tmpdir(tag));
	st_env *e;
	ck_assert_msg(st_env_open(dir, o, &e, tl_msg) == SHOAL_OK, "%s", tl_msg);
	return e;
}

static void setup_bare(void)
{
	tl_store_open("index", &(st_env_options){.map_size = 1ull << 30});
	dst = open_env(dst_dir, "index-dst", &(st_env_options){.map_size = 1ull << 30});
}

static void setup(void)
{
	setup_bare();
	create_in(tl_env, 4);
	create_in(dst, 4);
}

static void teardown(void)
{
	st_env_close(dst);
	dst = NULL;
	tl_rmtree(dst_dir);
	tl_store_close();
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static st_table_def table_def(st_env *e, const char *name)
{
	st_table_info info;
	ck_assert_msg(st_table_describe(e, name, &tl_arena, &info, tl_msg) == SHOAL_OK, "%s",
	              tl_msg);
	return info.def;
}

static void put_in(st_env *e, const char *table, const st_value *item)
{
	st_put_req r = {.table = table, .item = item};
	ck_assert_msg(st_put_item(e, &r, &tl_arena, NULL, tl_msg) == SHOAL_OK, "put: %s", tl_msg);
}

static void update_in(st_env *e, const char *table, const st_value *key, const char *upd,
                      const st_value *values)
{
	st_update_req r = {.table = table, .key = key, .update = upd, .attrs = {NULL, values}};
	ck_assert_msg(st_update_item(e, &r, &tl_arena, NULL, tl_msg) == SHOAL_OK, "update: %s",
	              tl_msg);
}

static void delete_in(st_env *e, const char *table, const st_value *key)
{
	st_delete_req r = {.table = table, .key = key};
	ck_assert_msg(st_delete_item(e, &r, &tl_arena, NULL, tl_msg) == SHOAL_OK, "delete: %s",
	              tl_msg);
}

static st_delta *outbox(st_env *e, uint64_t after, uint32_t *n)
{
	st_delta *d;
	ck_assert_msg(st_outbox_read(e, after, 100000, SIZE_MAX, &tl_arena, &d, n, tl_msg) ==
	                  SHOAL_OK,
	              "%s", tl_msg);
	return d;
}

static uint64_t last_seq(st_env *e)
{
	st_outbox_info info;
	ck_assert_int_eq(st_outbox_get_info(e, &info, tl_msg), SHOAL_OK);
	return info.last_seq;
}

static void apply_in(st_env *e, uint32_t group, const st_delta *d, uint32_t n)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_index_apply(t, group, d, n, NULL, tl_msg) == SHOAL_OK, "apply: %s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

/* Ships every delta of src after what dst applied from group 1. */
static void ship(st_env *src, st_env *to)
{
	uint32_t n;
	st_delta *d = outbox(src, st_index_applied_seq(to, 1), &n);
	if (n > 0)
		apply_in(to, 1, d, n);
}

/* Every entry of index `index` in env e (Scan with IndexName). */
static st_value *index_entries(st_env *e, const char *table, const char *index, uint32_t *n)
{
	st_env *save = tl_env;
	tl_env = e;
	st_scan_req r = {.table = table, .index = index};
	uint32_t pages;
	st_value *v = tl_scan_all(&r, n, &pages, NULL);
	tl_env = save;
	return v;
}

/* The entries the index should hold, recomputed from the base table of e. */
static st_value *recompute(st_env *e, const char *table, const char *index, uint32_t *n)
{
	st_env *save = tl_env;
	tl_env = e;
	st_table_def t = table_def(e, table);
	const st_index_def *x = NULL;
	for (uint32_t i = 0; i < t.n_indexes; i++)
		if (strcmp(t.indexes[i].name, index) == 0)
			x = &t.indexes[i];
	ck_assert_ptr_nonnull(x);
	st_scan_req r = {.table = table};
	uint32_t nb, pages;
	st_value *base = tl_scan_all(&r, &nb, &pages, NULL);
	tl_env = save;
	st_value *out = sh_arena_calloc(&tl_arena, nb + 1, sizeof(*out));
	*n = 0;
	for (uint32_t i = 0; i < nb; i++) {
		const st_value *it = &base[i];
		const st_value *h = attr(it, x->key.hash.name);
		const st_value *s = x->key.range.name ? attr(it, x->key.range.name) : NULL;
		if (h == NULL || h->type != x->key.hash.type ||
		    (x->key.range.name != NULL && (s == NULL || s->type != x->key.range.type)))
			continue;
		if (x->projection == ST_PROJ_ALL) {
			out[(*n)++] = *it;
			continue;
		}
		st_value *m = map(NULL);
		const char *names[5] = {t.key.hash.name, t.key.range.name, x->key.hash.name,
		                        x->key.range.name,
		                        x->projection == ST_PROJ_INCLUDE ? x->include[0] : NULL};
		for (int k = 0; k < 5; k++)
			if (names[k] != NULL && attr(it, names[k]) != NULL)
				st_map_set(&tl_arena, m, names[k], strlen(names[k]),
				           attr(it, names[k]));
		out[(*n)++] = *m;
	}
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Asserts that two lists of items are equal as multisets. */
static void assert_same_set(const st_value *a, uint32_t na, const st_value *b, uint32_t nb,
                            const char *what)
{
	ck_assert_msg(na == nb, "%s: %u entries, want %u", what, na, nb);
	const char **sa = sh_arena_calloc(&tl_arena, na + 1, sizeof(char *));
	const char **sb = sh_arena_calloc(&tl_arena, nb + 1, sizeof(char *));
	for (uint32_t i = 0; i < na; i++) {
		sa[i] = tl_show(&tl_arena, &a[i]);
		sb[i] = tl_show(&tl_arena, &b[i]);
	}
	qsort(sa, na, sizeof(char *), cmp_str);
	qsort(sb, nb, sizeof(char *), cmp_str);
	for (uint32_t i = 0; i < na; i++)
		ck_assert_msg(strcmp(sa[i], sb[i]) == 0, "%s: entry %u: %s, want %s", what, i,
		              sa[i], sb[i]);
}

static void assert_index_ok(st_env *base, st_env *idx, const char *index)
{
	uint32_t ne, nr;
	st_value *e = index_entries(idx, "Tbl", index, &ne);
	st_value *r = recompute(base, "Tbl", index, &nr);
	assert_same_set(e, ne, r, nr, index);
}

static uint16_t index_id(const char *name)
{
	st_table_def t = table_def(tl_env, "Tbl");
	for (uint32_t i = 0; i < t.n_indexes; i++)
		if (strcmp(t.indexes[i].name, name) == 0)
			return t.indexes[i].id;
	ck_abort_msg("no index %s", name);
	return 0;
}

static uint32_t count_deltas(const st_delta *d, uint32_t n, uint16_t index, bool del)
{
	uint32_t c = 0;
	for (uint32_t i = 0; i < n; i++)
		c += d[i].index_id == index && d[i].del == del;
	return c;
}

/* ------------------------------------------------------------------------ */
/* Write path                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_sparse_and_moves)
{
	uint16_t g = index_id("byG"), k = index_id("byK"), h = index_id("byI");
	/* No index key attributes: nothing. */
	put_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), "x", S("x"), NULL));
	ck_assert_uint_eq(last_seq(tl_env), 0);
	/* G without R: byK only (byG needs R). */
	put_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), "G", S("g1"), NULL));
	uint32_t n;
	st_delta *d = outbox(tl_env, 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(d[0].seq, 1);
	ck_assert_uint_eq(d[0].index_id, k);
	ck_assert(!d[0].del);
	st_table_def t = table_def(tl_env, "Tbl");
	ck_assert_uint_eq(d[0].table_id, t.id);
	ck_assert_uint_eq(d[0].hash, st_index_hash(t.id, k, 0, S("g1")));
	ck_assert_uint_eq(d[0].hash >> 56, d[0].key[6]); /* bytes 6..13 are the hash */
	/* R appears: byG gets an entry; byK's projection (keys only) is unchanged. */
	update_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), NULL), "SET R = :r",
	          map(":r", N("5"), NULL));
	d = outbox(tl_env, 1, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(d[0].index_id, g);
	/* An unprojected attribute: only the ALL index changes. */
	update_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), NULL), "SET y = :y",
	          map(":y", S("y"), NULL));
	d = outbox(tl_env, 2, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(d[0].index_id, g);
	ck_assert(!d[0].del);
	/* The index key changes: delete + upsert in both G indexes. */
	update_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), NULL), "SET G = :g",
	          map(":g", S("g2"), NULL));
	d = outbox(tl_env, 3, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(count_deltas(d, n, g, true), 1);
	ck_assert_uint_eq(count_deltas(d, n, g, false), 1);
	ck_assert_uint_eq(count_deltas(d, n, k, true), 1);
	ck_assert_uint_eq(count_deltas(d, n, k, false), 1);
	for (uint32_t i = 0; i < n; i++)
		if (d[i].index_id == k)
			ck_assert_uint_eq(d[i].hash,
			                  st_index_hash(t.id, k, 0, d[i].del ? S("g1") : S("g2")));
	/* Removing the attribute removes the entries. */
	update_in(tl_env, "Tbl", map("PK", S("p"), "SK", S("1"), NULL), "REMOVE G", NULL);
	d = outbox(tl_env, 7, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(count_deltas(d, n, g, true) + count_deltas(d, n, k, true), 2);
	/* INCLUDE: a change of the included attribute is a delta, others not. */
	put_in(tl_env, "Tbl", map("PK", S("q"), "SK", S("1"), "H", S("h"), NULL));
	update_in(tl_env, "Tbl", map("PK", S("q"), "SK", S("1"), NULL), "SET b = :b",
	          map(":b", S("b"), NULL));
	ck_assert_uint_eq(last_seq(tl_env), 10);
	update_in(tl_env, "Tbl", map("PK", S("q"), "SK", S("1"), NULL), "SET a = :a",
	          map(":a", S("a"), NULL));
	d = outbox(tl_env, 10, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(d[0].index_id, h);
	/* A delete of an indexed item deletes its entry. */
	delete_in(tl_env, "Tbl", map("PK", S("q"), "SK", S("1"), NULL));
	d = outbox(tl_env, 11, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert(d[0].del);
	ship(tl_env, dst);
	for (int i = 0; i < 4; i++)
		assert_index_ok(tl_env, dst, gsis[i].name);
}
END_TEST

START_TEST(test_projections)
{
	put_in(tl_env, "Tbl",
	       map("PK", S("p"), "SK", S("1"), "G", S("g"), "R", N("1"), "H", S("h"), "W", S("w"),
	           "a", S("A"), "b", S("B"), NULL));
	ship(tl_env, dst);
	uint32_t n;
	st_value *e = index_entries(dst, "Tbl", "byG", &n);
	ck_assert_uint_eq(n, 1);
	tl_assert_item(&tl_arena, &e[0],
	               "{\"PK\":{\"S\":\"p\"},\"SK\":{\"S\":\"1\"},\"G\":{\"S\":\"g\"},"
	               "\"R\":{\"N\":\"1\"},\"H\":{\"S\":\"h\"},\"W\":{\"S\":\"w\"},"
	               "\"a\":{\"S\":\"A\"},\"b\":{\"S\":\"B\"}}");
	e = index_entries(dst, "Tbl", "byK", &n);
	ck_assert_uint_eq(n, 1);
	tl_assert_item(&tl_arena, &e[0],
	               "{\"PK\":{\"S\":\"p\"},\"SK\":{\"S\":\"1\"},\"G\":{\"S\":\"g\"}}");
	e = index_entries(dst, "Tbl", "byI", &n);
	ck_assert_uint_eq(n, 1);
	tl_assert_item(&tl_arena, &e[0],
	               "{\"PK\":{\"S\":\"p\"},\"SK\":{\"S\":\"1\"},\"H\":{\"S\":\"h\"},"
	               "\"a\":{\"S\":\"A\"}}");
	/* Progress: counts of entries in the target. */
	st_index_progress *p;
	uint32_t np;
	ck_assert_int_eq(st_index_progress_list(dst, &tl_arena, &p, &np, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(np, 4);
	for (uint32_t i = 0; i < np; i++) {
		ck_assert_uint_eq(p[i].item_count, 1);
		ck_assert(p[i].backfill_done);
		ck_assert_uint_gt(p[i].size_bytes, 0);
	}
	/* Select ALL_ATTRIBUTES on a KEYS_ONLY GSI is refused; ConsistentRead too. */
	st_env *save = tl_env;
	tl_env = dst;
	st_query_req q = {.table = "Tbl",
	                  .index = "byK",
	                  .key_condition = "G = :g",
	                  .attrs = {NULL, map(":g", S("g"), NULL)},
	                  .forward = true,
	                  .select = ST_SELECT_ALL_ATTRIBUTES};
	tl_query_err(&q, SHOAL_E_VALIDATION,
	             "One or more parameter values were invalid: Select type ALL_ATTRIBUTES is "
	             "not supported for global secondary index byK because its projection type "
	             "is not ALL");
	q.select = ST_SELECT_ALL_PROJECTED_ATTRIBUTES;
	q.consistent = true;
	tl_query_err(&q, SHOAL_E_VALIDATION,
	             "Consistent reads are not supported on global secondary indexes");
	q.consistent = false;
	q.index = "nope";
	tl_query_err(&q, SHOAL_E_VALIDATION, "The table does not have the specified index: nope");
	q.index = "byK";
	st_page pg;
	tl_query_ok(&q, &pg);
	ck_assert_uint_eq(pg.count, 1);
	tl_env = save;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Outbox and apply                                                          */
/* ------------------------------------------------------------------------ */

static void some_ops(st_env *e)
{
	for (int i = 0; i < 20; i++) {
		char pk[16], g[16];
		snprintf(pk, sizeof(pk), "p%d", i % 7);
		snprintf(g, sizeof(g), "g%d", i % 3);
		st_txn *t;
		ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
		st_txn_set_time(t, 1000 + i);
		st_put_req r = {.table = "Tbl",
		                .item = map("PK", S(pk), "SK", Ni(i % 2), "G", S(g), "R", Ni(i),
		                            "W", S("w"), NULL)};
		r.item = map("PK", S(pk), "SK", S(i % 2 ? "a" : "b"), "G", S(g), "R", Ni(i), "W",
		             S("w"), NULL);
		ck_assert_msg(st_put(t, &r, &tl_arena, NULL, tl_msg) == SHOAL_OK, "%s", tl_msg);
		ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	}
	delete_in(e, "Tbl", map("PK", S("p1"), "SK", S("a"), NULL));
}

START_TEST(test_outbox_deterministic_and_trim)
{
	some_ops(tl_env);
	some_ops(dst);
	uint32_t na, nb;
	st_delta *a = outbox(tl_env, 0, &na);
	st_delta *b = outbox(dst, 0, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_uint_gt(na, 20);
	for (uint32_t i = 0; i < na; i++) {
		ck_assert_uint_eq(a[i].seq, i + 1);
		ck_assert_uint_eq(a[i].seq, b[i].seq);
		ck_assert_uint_eq(a[i].hash, b[i].hash);
		ck_assert_uint_eq(a[i].index_id, b[i].index_id);
		ck_assert_int_eq(a[i].del, b[i].del);
		ck_assert_int_eq(a[i].ts_ms, b[i].ts_ms);
		ck_assert_uint_eq(a[i].key_len, b[i].key_len);
		ck_assert_uint_eq(a[i].val_len, b[i].val_len);
		ck_assert(memcmp(a[i].key, b[i].key, a[i].key_len) == 0);
		ck_assert(a[i].val_len == 0 || memcmp(a[i].val, b[i].val, a[i].val_len) == 0);
	}
	ck_assert_int_eq(a[0].ts_ms, 1000);
	ck_assert_int_eq(a[na - 1].ts_ms, 0); /* the one-shot delete has no time */
	/* max_n and max_bytes. */
	uint32_t n;
	st_delta *d;
	ck_assert_int_eq(st_outbox_read(tl_env, 3, 2, SIZE_MAX, &tl_arena, &d, &n, tl_msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(d[0].seq, 4);
	ck_assert_int_eq(st_outbox_read(tl_env, 0, 100, 1, &tl_arena, &d, &n, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(n, 1); /* at least one */
	/* Trim. */
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_outbox_trim(t, 5, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_outbox_trim(t, 3, tl_msg), SHOAL_OK); /* ignored */
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	st_outbox_info info;
	ck_assert_int_eq(st_outbox_get_info(tl_env, &info, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(info.shipped, 5);
	ck_assert_uint_eq(info.last_seq, na);
	ck_assert_uint_eq(info.depth, na - 5);
	ck_assert_int_eq(info.oldest_ts_ms, a[5].ts_ms);
	d = outbox(tl_env, 0, &n);
	ck_assert_uint_eq(n, na - 5);
	ck_assert_uint_eq(d[0].seq, 6);
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_outbox_trim(t, na + 100, tl_msg), SHOAL_OK); /* clamped */
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_outbox_get_info(tl_env, &info, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(info.shipped, na);
	ck_assert_uint_eq(info.depth, 0);
	ck_assert_int_eq(info.oldest_ts_ms, 0);
	/* Seqs continue after a trim. */
	put_in(tl_env, "Tbl", map("PK", S("z"), "SK", S("z"), "G", S("z"), NULL));
	ck_assert_uint_eq(last_seq(tl_env), na + 1);
	d = outbox(tl_env, 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(d[0].seq, na + 1);
}
END_TEST

START_TEST(test_apply_dedup)
{
	/* dst is the target only: its own table gets no writes. */
	some_ops(tl_env);
	uint32_t n;
	st_delta *d = outbox(tl_env, 0, &n);
	/* Deliver in pieces, with overlaps and repeats. */
	apply_in(dst, 1, d, n / 2);
	ck_assert_uint_eq(st_index_applied_seq(dst, 1), d[n / 2 - 1].seq);
	ck_assert_uint_eq(st_index_applied_seq(dst, 2), 0);
	apply_in(dst, 1, d, n / 2 + 3);
	size_t l1;
	uint8_t *before = tl_store_dump(dst, true, &l1);
	apply_in(dst, 1, d, n / 2 + 3); /* a full redelivery changes nothing */
	size_t l2;
	uint8_t *after = tl_store_dump(dst, true, &l2);
	ck_assert(l1 == l2 && memcmp(before, after, l1) == 0);
	free(before);
	free(after);
	apply_in(dst, 1, d + 2, n - 2);
	apply_in(dst, 1, d, n);
	ck_assert_uint_eq(st_index_applied_seq(dst, 1), n);
	for (int i = 0; i < 4; i++)
		assert_index_ok(tl_env, dst, gsis[i].name);
	/* A malformed batch changes nothing and leaves the transaction usable. */
	st_delta bad = d[0];
	bad.seq = n + 1;
	bad.key_len = 3;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(dst, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_apply(t, 1, &bad, 1, NULL, tl_msg), SHOAL_E_SERIALIZATION);
	put_in(tl_env, "Tbl", map("PK", S("x"), "SK", S("x"), "G", S("x"), NULL));
	d = outbox(tl_env, n, &n);
	ck_assert_int_eq(st_index_apply(t, 1, d, n, NULL, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	assert_index_ok(tl_env, dst, "byG");
	assert_index_ok(tl_env, dst, "byK");
}
END_TEST

START_TEST(test_deleted_index_dropped)
{
	some_ops(tl_env);
	ship(tl_env, dst);
	uint32_t n;
	index_entries(dst, "Tbl", "byK", &n);
	ck_assert_uint_gt(n, 0);
	/* dst learns that byK was deleted: its entries go. */
	st_table_def t = table_def(dst, "Tbl");
	uint16_t k = index_id("byK");
	st_index_def x[4];
	uint32_t nx = 0;
	for (uint32_t i = 0; i < t.n_indexes; i++)
		if (t.indexes[i].id != k)
			x[nx++] = t.indexes[i];
	t.indexes = x;
	t.n_indexes = nx;
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(dst, &txn, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_redefine(txn, &t, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	st_table_def t2 = table_def(dst, "Tbl");
	ck_assert_uint_eq(t2.n_indexes, 3);
	ck_assert_uint_eq(t2.next_index_id, 5);
	/* The source still maintains it: its deltas are dropped at dst. */
	update_in(tl_env, "Tbl", map("PK", S("p2"), "SK", S("a"), NULL), "SET G = :g",
	          map(":g", S("new"), NULL));
	uint64_t before = st_index_applied_seq(dst, 1);
	ship(tl_env, dst);
	ck_assert_uint_gt(st_index_applied_seq(dst, 1), before);
	st_scan_req r = {.table = "Tbl"};
	uint32_t nb, pages;
	st_env *save = tl_env;
	tl_env = dst;
	tl_scan_all(&r, &nb, &pages, NULL);
	tl_env = save;
	/* Nothing of index k is stored in dst: the data keys under (T, k) are gone. */
	uint8_t *dump;
	size_t len;
	dump = tl_store_dump(dst, false, &len);
	size_t off = 0;
	uint32_t under_k = 0;
	while (off < len) {
		size_t kl, vl;
		memcpy(&kl, dump + off, sizeof(size_t));
		off += sizeof(size_t);
		const uint8_t *key = dump + off;
		off += kl;
		memcpy(&vl, dump + off, sizeof(size_t));
		off += sizeof(size_t) + vl;
		if (kl >= 6 && key[0] == 0 && key[1] == 0 && key[2] == 0 && key[3] == t.id &&
		    key[4] == 0 && key[5] == k)
			under_k++;
	}
	free(dump);
	ck_assert_uint_eq(under_k, 0);
	assert_index_ok(tl_env, dst, "byG");
}
END_TEST

/* Index key attributes have the table's key size limits. */
START_TEST(test_index_key_size)
{
	char *big = malloc(2050);
	memset(big, 'k', 2049);
	big[2049] = '\0';
	st_put_req r = {.table = "Tbl", .item = map("PK", S("p"), "SK", S("1"), "G", S(big), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &r, &tl_arena, NULL, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(tl_msg, "Size of hashkey has exceeded the maximum size limit of 2048 "
	                             "bytes") != NULL,
	              "%s", tl_msg);
	ck_assert_uint_eq(last_seq(tl_env), 0); /* nothing written, no delta */
	big[2048] = '\0';
	r.item = map("PK", S("p"), "SK", S("1"), "G", S(big), NULL);
	ck_assert_msg(st_put_item(tl_env, &r, &tl_arena, NULL, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_uint_eq(last_seq(tl_env), 1);
	free(big);
}
END_TEST

/* The router defines a new table group by group (and repairs a missed
 * define later), so deltas may reach a target before it knows the table:
 * they are kept, and the define that arrives later finds them.  Deltas of a
 * table the target has dropped are dropped. */
START_TEST(test_table_defined_late_and_dropped)
{
	/* A fresh target that has never heard of Tbl. */
	st_env_close(dst);
	tl_rmtree(dst_dir);
	dst = open_env(dst_dir, "index-late", &(st_env_options){.map_size = 1ull << 30});
	some_ops(tl_env);
	ship(tl_env, dst);
	create_in(dst, 4); /* the define arrives */
	for (int i = 0; i < 4; i++)
		assert_index_ok(tl_env, dst, gsis[i].name);

	/* dst drops the table; the source's late deltas leave nothing behind. */
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(dst, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_delete(t, "Tbl", tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	size_t l1, l2;
	uint8_t *before = tl_store_dump(dst, false, &l1);
	update_in(tl_env, "Tbl", map("PK", S("p2"), "SK", S("a"), NULL), "SET G = :g",
	          map(":g", S("late"), NULL));
	ship(tl_env, dst);
	uint8_t *after = tl_store_dump(dst, false, &l2);
	ck_assert(l1 == l2 && memcmp(before, after, l1) == 0);
	free(before);
	free(after);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Backfill and UpdateTable                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_backfill)
{
	/* src starts without indexes; dst (the target) already has byG. */
	st_env *envs[2] = {tl_env, dst};
	for (int i = 0; i < 2; i++) {
		st_txn *t;
		ck_assert_int_eq(st_txn_begin(envs[i], &t, tl_msg), SHOAL_OK);
		ck_assert_int_eq(st_table_delete(t, "Tbl", tl_msg), SHOAL_OK);
		ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	}
	create_in(tl_env, 0);
	create_in(dst, 1);
	for (int i = 0; i < 25; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "p%d", i);
		st_value *it = map("PK", S(pk), "SK", S("s"), "R", Ni(i), NULL);
		if (i % 3 != 0)
			st_map_set(&tl_arena, it, "G", 1, S(i % 2 ? "odd" : "even"));
		put_in(tl_env, "Tbl", it);
	}
	ck_assert_uint_eq(last_seq(tl_env), 0);
	/* UpdateTable in a group-0 env of its own; then the redefinition here. */
	char g0_dir[PATH_MAX];
	st_env *g0 = open_env(g0_dir, "index-g0", &(st_env_options){.map_size = 1ull << 28});
	create_in(g0, 0);
	st_key_attr attrs[2] = {{"G", ST_S}, {"R", ST_N}};
	st_index_def c = gsis[0];
	c.id = 0;
	st_table_update_req u = {
	    .name = "Tbl", .attrs = attrs, .n_attrs = 2, .create = &c, .n_create = 1};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(g0, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_update(t, &u, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	st_table_def d = table_def(g0, "Tbl");
	ck_assert_uint_eq(d.n_indexes, 1);
	ck_assert_uint_eq(d.indexes[0].id, 1);
	ck_assert_int_eq(d.indexes[0].status, ST_INDEX_CREATING);
	ck_assert_uint_eq(d.next_index_id, 2);
	st_table_def here = table_def(tl_env, "Tbl");
	d.id = here.id; /* group 0 fixes ids: the test stands in for it */
	d.created_ms = here.created_ms;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_redefine(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	st_index_progress *p;
	uint32_t np;
	ck_assert_int_eq(st_index_progress_list(tl_env, &tl_arena, &p, &np, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(np, 1);
	ck_assert(!p[0].backfill_done);
	/* A write during the backfill appends its own delta. */
	put_in(tl_env, "Tbl", map("PK", S("p3"), "SK", S("s"), "R", Ni(3), "G", S("late"), NULL));
	ck_assert_uint_eq(last_seq(tl_env), 1);
	bool done = false;
	int steps = 0;
	while (!done) {
		ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
		ck_assert_msg(st_backfill_step(t, "Tbl", 1, 4, &done, tl_msg) == SHOAL_OK, "%s",
		              tl_msg);
		ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
		ck_assert_int_lt(++steps, 100);
	}
	ck_assert_int_ge(steps, 7); /* 25 items, 4 a step */
	ck_assert_int_eq(st_index_progress_list(tl_env, &tl_arena, &p, &np, tl_msg), SHOAL_OK);
	ck_assert(p[0].backfill_done);
	ck_assert_uint_eq(p[0].backfill_seq, last_seq(tl_env));
	ck_assert_uint_eq(last_seq(tl_env), 1 + 17); /* 16 + p3 with G now */
	/* Another step is a no-op. */
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_backfill_step(t, "Tbl", 1, 4, &done, tl_msg), SHOAL_OK);
	ck_assert(done);
	ck_assert_int_eq(st_backfill_step(t, "Tbl", 9, 4, &done, tl_msg), SHOAL_OK);
	ck_assert(done);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(last_seq(tl_env), 18);
	ship(tl_env, dst);
	/* Activate (group 0), then read dst's index against the recomputation. */
	ck_assert_int_eq(st_txn_begin(g0, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tbl", "byG", tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tbl", "byG", tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_index_activate(t, "Tbl", "nope", tl_msg), SHOAL_E_NOT_FOUND);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(table_def(g0, "Tbl").indexes[0].status, ST_INDEX_ACTIVE);
	st_env_close(g0);
	tl_rmtree(g0_dir);
	assert_index_ok(tl_env, dst, "byG");
}
END_TEST

static void update_err(const st_table_update_req *u, int code, const char *msg)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	int rc = st_table_update(t, u, tl_msg);
	ck_assert_msg(rc == code, "got %s (%s)", shoal_err_name(rc), tl_msg);
	ck_assert_str_eq(tl_msg, msg);
	/* The transaction stays usable. */
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

START_TEST(test_update_table)
{
	st_index_def c = {.name = "byNew",
	                  .key = {{"N1", ST_S}, {"N2", ST_N}},
	                  .projection = ST_PROJ_KEYS_ONLY,
	                  .write_shards = 1};
	st_key_attr a1[1] = {{"N1", ST_S}};
	st_table_update_req u = {.name = "Nope", .create = &c, .n_create = 1};
	update_err(&u, SHOAL_E_NOT_FOUND, "Requested resource not found: Table: Nope not found");
	u.name = "Tbl";
	update_err(&u, SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Global Secondary Index hash key "
	           "not specified in Attribute Definitions.Type unknown.");
	u.attrs = a1;
	u.n_attrs = 1;
	update_err(&u, SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Global Secondary Index range key "
	           "not specified in Attribute Definitions.Type unknown.");
	c.name = "byG";
	update_err(&u, SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Index already exists");
	const char *drop[1] = {"missing"};
	st_table_update_req dr = {.name = "Tbl", .drop = drop, .n_drop = 1};
	update_err(&dr, SHOAL_E_NOT_FOUND,
	           "Requested resource not found: Index: missing not found");
	st_table_update_req two = u;
	two.drop = drop;
	two.n_drop = 1;
	update_err(&two, SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Cannot perform more than one GSI "
	           "creation or deletion in a single update");
	st_key_attr bad[1] = {{"G", ST_N}};
	st_table_update_req chg = {
	    .name = "Tbl", .attrs = bad, .n_attrs = 1, .create = &c, .n_create = 1};
	c.name = "byNew2";
	c.key = (st_key_schema){{"G", ST_N}, {NULL, ST_NONE}};
	update_err(&chg, SHOAL_E_VALIDATION,
	           "One or more parameter values were invalid: Cannot change the type of attribute "
	           "G from S to N");

	/* Delete byK, then create: the new index takes id 5 (ids never reused). */
	drop[0] = "byK";
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_update(t, &dr, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	st_table_def d = table_def(tl_env, "Tbl");
	ck_assert_uint_eq(d.n_indexes, 3);
	ck_assert_ptr_null(st_table_index(&d, "byK"));
	st_key_attr a2[2] = {{"N1", ST_S}, {"N2", ST_N}};
	c = (st_index_def){
	    .name = "byNew", .key = {{"N1", ST_S}, {"N2", ST_N}}, .projection = ST_PROJ_KEYS_ONLY};
	st_table_update_req ok = {
	    .name = "Tbl", .attrs = a2, .n_attrs = 2, .create = &c, .n_create = 1};
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_update(t, &ok, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	d = table_def(tl_env, "Tbl");
	const st_index_def *x = st_table_index(&d, "byNew");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->id, 5);
	ck_assert_int_eq(x->status, ST_INDEX_CREATING);
	ck_assert_uint_eq(x->write_shards, 1);
	ck_assert_uint_eq(d.next_index_id, 6);
	ck_assert_uint_eq(d.n_attrs, 8); /* PK SK G R H W N1 N2 */
	/* A query on a backfilling index is refused. */
	st_query_req q = {.table = "Tbl",
	                  .index = "byNew",
	                  .key_condition = "N1 = :v",
	                  .attrs = {NULL, map(":v", S("v"), NULL)},
	                  .forward = true};
	tl_query_err(&q, SHOAL_E_VALIDATION,
	             "Cannot read from backfilling global secondary index: byNew");
	/* Deleting the table forgets its index state. */
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_table_redefine(t, &d, tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_table_delete(t, "Tbl", tl_msg), SHOAL_OK);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	size_t len;
	uint8_t *dump = tl_store_dump(tl_env, true, &len);
	size_t off = 0;
	while (off < len) {
		size_t kl, vl;
		memcpy(&kl, dump + off, sizeof(size_t));
		off += sizeof(size_t);
		ck_assert_msg(!(kl > 1 && dump[off] == 0x01 && dump[off + 1] == 'X'),
		              "index state left after DeleteTable");
		off += kl;
		memcpy(&vl, dump + off, sizeof(size_t));
		off += sizeof(size_t) + vl;
	}
	free(dump);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Index reads                                                               */
/* ------------------------------------------------------------------------ */

static const st_table_def *sort_t;
static const st_index_def *sort_x;

static int entry_cmp(const void *a, const void *b)
{
	return st_index_entry_cmp(sort_t, sort_x, a, b);
}

/* Loads items with W in {"hot", "cold"} and ships them to dst. */
static void load_w(int n)
{
	for (int i = 0; i < n; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "u%03d", i);
		put_in(tl_env, "Tbl",
		       map("PK", S(pk), "SK", S(i % 2 ? "x" : "y"), "W", S(i % 5 ? "hot" : "cold"),
		           "R", Ni(i % 7), "v", Ni(i), NULL));
	}
	ship(tl_env, dst);
}

START_TEST(test_sharded_query_merge)
{
	load_w(120);
	st_table_def t = table_def(dst, "Tbl");
	const st_index_def *x = st_table_index(&t, "byW");
	ck_assert_uint_eq(x->write_shards, 4);
	sort_t = &t;
	sort_x = x;
	st_env *save = tl_env;
	tl_env = dst;
	/* Every entry lies in the shard its base key hashes to, in index order. */
	uint32_t total = 0;
	st_value *all = sh_arena_calloc(&tl_arena, 200, sizeof(*all));
	for (uint32_t s = 0; s < 4; s++) {
		st_query_req q = {.table = "Tbl",
		                  .index = "byW",
		                  .key_condition = "W = :w",
		                  .attrs = {NULL, map(":w", S("hot"), NULL)},
		                  .forward = true,
		                  .limit = 7,
		                  .shard = s};
		uint32_t n, pages;
		st_value *v = tl_query_all(&q, &n, &pages, NULL);
		ck_assert_uint_gt(n, 0);
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_uint_eq(
			    st_index_shard(t.id, attr(&v[i], "PK"), attr(&v[i], "SK"), 4), s);
			if (i > 0)
				ck_assert_int_lt(st_index_entry_cmp(&t, x, &v[i - 1], &v[i]), 0);
			all[total++] = v[i];
		}
	}
	ck_assert_uint_eq(total, 96);
	st_query_req bad = {.table = "Tbl",
	                    .index = "byW",
	                    .key_condition = "W = :w",
	                    .attrs = {NULL, map(":w", S("hot"), NULL)},
	                    .forward = true,
	                    .shard = 4};
	tl_query_err(&bad, SHOAL_E_VALIDATION,
	             "Write shard 4 of index byW does not exist (WriteShards: 4)");
	qsort(all, total, sizeof(*all), entry_cmp);

	/* The router's merge, page by page (Limit 10, a filter, backwards too). */
	for (int fwd = 0; fwd < 2; fwd++) {
		st_value *cursor = NULL;
		uint32_t got = 0, pages = 0, scanned = 0;
		st_value *want = all;
		for (;;) {
			st_value *merged = sh_arena_calloc(&tl_arena, 40, sizeof(*merged));
			uint32_t nm = 0;
			bool more = false;
			for (uint32_t s = 0; s < 4; s++) {
				st_query_req q = {.table = "Tbl",
				                  .index = "byW",
				                  .key_condition = "W = :w",
				                  .attrs = {NULL, map(":w", S("hot"), NULL)},
				                  .forward = fwd,
				                  .limit = 10,
				                  .select = ST_SELECT_ALL_PROJECTED_ATTRIBUTES,
				                  .exclusive_start_key = cursor,
				                  .shard = s};
				st_page p;
				tl_query_ok(&q, &p);
				for (uint32_t i = 0; i < p.count; i++)
					merged[nm++] = p.items[i];
				more = more || p.last_evaluated_key != NULL;
			}
			qsort(merged, nm, sizeof(*merged), entry_cmp);
			if (!fwd)
				for (uint32_t i = 0; i < nm / 2; i++) {
					st_value tmp = merged[i];
					merged[i] = merged[nm - 1 - i];
					merged[nm - 1 - i] = tmp;
				}
			uint32_t cut = nm < 10 ? nm : 10;
			st_query_req fin = {
			    .table = "Tbl",
			    .index = "byW",
			    .key_condition = "W = :w",
			    .filter = "v >= :min",
			    .projection = "PK, v",
			    .attrs = {NULL, map(":w", S("hot"), ":min", N("0"), NULL)},
			    .forward = fwd};
			st_page p;
			int rc = st_page_finish(&t, &fin, merged, cut, &tl_arena, &p, tl_msg);
			ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
			ck_assert_uint_eq(p.scanned, cut);
			ck_assert_uint_eq(p.count, cut);
			for (uint32_t i = 0; i < p.count; i++) {
				const st_value *w =
				    fwd ? &want[got + i] : &want[total - 1 - got - i];
				ck_assert(st_value_equal(attr(&p.items[i], "v"), attr(w, "v")));
				ck_assert_ptr_null(attr(&p.items[i], "W"));
			}
			got += p.count;
			scanned += cut;
			pages++;
			ck_assert_int_lt(pages, 50);
			if (cut == nm && !more)
				break;
			ck_assert_int_eq(
			    st_index_last_key(&t, x, &merged[cut - 1], &tl_arena, &cursor, tl_msg),
			    SHOAL_OK);
			ck_assert_uint_eq(cursor->u.map.n, 4);
		}
		ck_assert_uint_eq(got, total);
	}
	/* st_page_finish validates as st_query does. */
	st_query_req fin = {.table = "Tbl",
	                    .index = "byW",
	                    .key_condition = "W = :w",
	                    .filter = "W = :w",
	                    .attrs = {NULL, map(":w", S("hot"), NULL)},
	                    .forward = true};
	st_page p;
	ck_assert_int_eq(st_page_finish(&t, &fin, all, 3, &tl_arena, &p, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(tl_msg, "Filter Expression can only contain non-primary key attributes: "
	                         "Primary key attribute: W");
	fin.filter = NULL;
	fin.select = ST_SELECT_COUNT;
	ck_assert_int_eq(st_page_finish(&t, &fin, all, 3, &tl_arena, &p, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(p.count, 3);
	ck_assert_ptr_null(p.items);
	tl_env = save;
}
END_TEST

START_TEST(test_index_start_key)
{
	load_w(30);
	st_env *save = tl_env;
	tl_env = dst;
	st_query_req q = {.table = "Tbl",
	                  .index = "byG",
	                  .key_condition = "G = :g",
	                  .attrs = {NULL, map(":g", S("g"), NULL)},
	                  .forward = true};
	tl_env = save;
	for (int i = 0; i < 10; i++) {
		char pk[8];
		snprintf(pk, sizeof(pk), "k%d", i);
		put_in(tl_env, "Tbl",
		       map("PK", S(pk), "SK", S("s"), "G", S("g"), "R", Ni(i / 2), NULL));
	}
	ship(tl_env, dst);
	tl_env = dst;
	uint32_t n, pages;
	q.limit = 3;
	st_value *all = tl_query_all(&q, &n, &pages, NULL);
	ck_assert_uint_eq(n, 10);
	ck_assert_uint_eq(pages, 4);
	/* LastEvaluatedKey: table keys + index keys. */
	st_page p;
	tl_query_ok(&q, &p);
	ck_assert_ptr_nonnull(p.last_evaluated_key);
	ck_assert_uint_eq(p.last_evaluated_key->u.map.n, 4);
	/* Resume strictly after an entry that no longer exists. */
	st_value *gone = &all[4];
	st_value *esk = map("PK", attr(gone, "PK"), "SK", attr(gone, "SK"), "G", S("g"), "R",
	                    attr(gone, "R"), NULL);
	tl_env = save;
	delete_in(tl_env, "Tbl", map("PK", attr(gone, "PK"), "SK", S("s"), NULL));
	ship(tl_env, dst);
	tl_env = dst;
	q.limit = 0;
	q.exclusive_start_key = esk;
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 5);
	for (uint32_t i = 0; i < 5; i++)
		ck_assert(st_value_equal(&p.items[i], &all[5 + i]));
	q.forward = false;
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 4);
	ck_assert(st_value_equal(&p.items[0], &all[3]));
	/* A start key without the table keys is refused. */
	q.exclusive_start_key = map("G", S("g"), "R", N("1"), NULL);
	tl_query_err(&q, SHOAL_E_VALIDATION,
	             "The provided starting key is invalid: The provided key element does not "
	             "match the schema");
	/* Scan of an index resumes too. */
	st_scan_req r = {.table = "Tbl", .index = "byG", .limit = 4};
	uint32_t ns;
	tl_scan_all(&r, &ns, &pages, NULL);
	ck_assert_uint_eq(ns, 9);
	ck_assert_uint_eq(pages, 3);
	tl_env = save;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Local secondary indexes                                                   */
/* ------------------------------------------------------------------------ */

static void create_lsi_table(st_env *e)
{
	st_key_attr attrs[3] = {{"PK", ST_S}, {"SK", ST_S}, {"L", ST_N}};
	st_index_def lsi = {.name = "byL",
	                    .local = true,
	                    .key = {{"PK", ST_S}, {"L", ST_N}},
	                    .projection = ST_PROJ_KEYS_ONLY,
	                    .write_shards = 1,
	                    .status = ST_INDEX_ACTIVE};
	st_table_def d = {.name = "Lsi",
	                  .key = {{"PK", ST_S}, {"SK", ST_S}},
	                  .attrs = attrs,
	                  .n_attrs = 3,
	                  .indexes = &lsi,
	                  .n_indexes = 1};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

START_TEST(test_lsi)
{
	st_env_close(tl_env);
	tl_rmtree(tl_dir);
	tl_env_open("index-lsi",
	            &(st_env_options){.map_size = 1ull << 30, .collection_limit = 400});
	create_lsi_table(tl_env);
	for (int i = 0; i < 4; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "s%d", i);
		put_in(tl_env, "Lsi",
		       map("PK", S("p"), "SK", S(sk), "L", Ni(10 - i), "x", S("x"), NULL));
	}
	put_in(tl_env, "Lsi", map("PK", S("p"), "SK", S("nol"), NULL)); /* sparse */
	ck_assert_uint_eq(last_seq(tl_env), 0);                         /* no outbox for LSIs */
	st_query_req q = {.table = "Lsi",
	                  .index = "byL",
	                  .key_condition = "PK = :p AND L > :l",
	                  .attrs = {NULL, map(":p", S("p"), ":l", N("7"), NULL)},
	                  .forward = true,
	                  .consistent = true};
	st_page p;
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 3);
	ck_assert(tl_str_is(attr(&p.items[0], "SK"), "s2"));
	ck_assert(tl_str_is(attr(&p.items[2], "SK"), "s0"));
	ck_assert_ptr_null(attr(&p.items[0], "x")); /* KEYS_ONLY */
	q.select = ST_SELECT_ALL_ATTRIBUTES;        /* fetched from the table */
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 3);
	ck_assert(tl_str_is(attr(&p.items[0], "x"), "x"));
	/* The sort key moves. */
	update_in(tl_env, "Lsi", map("PK", S("p"), "SK", S("s0"), NULL), "SET L = :l",
	          map(":l", N("1"), NULL));
	q.select = ST_SELECT_DEFAULT;
	tl_query_ok(&q, &p);
	ck_assert_uint_eq(p.count, 2);
	/* The item collection limit: a write that grows it past 400 bytes. */
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	size_t before_len;
	st_put_req big = {
	    .table = "Lsi",
	    .item = map("PK", S("p"), "SK", S("big"), "L", N("3"), "pad", Sn(300, 'z'), NULL)};
	int rc = st_put(t, &big, &tl_arena, NULL, tl_msg);
	ck_assert_int_eq(rc, SHOAL_E_COLLECTION_SIZE);
	ck_assert_msg(strncmp(tl_msg, "Item collection size limit exceeded", 35) == 0, "%s",
	              tl_msg);
	/* The transaction is usable; another collection has room. */
	big.item = map("PK", S("q"), "SK", S("big"), "L", N("3"), "pad", Sn(300, 'z'), NULL);
	ck_assert_msg(st_put(t, &big, &tl_arena, NULL, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	/* Shrinking is always allowed; then it fits again. */
	delete_in(tl_env, "Lsi", map("PK", S("q"), "SK", S("big"), NULL));
	for (int i = 0; i < 4; i++) {
		char sk[8];
		snprintf(sk, sizeof(sk), "s%d", i);
		delete_in(tl_env, "Lsi", map("PK", S("p"), "SK", S(sk), NULL));
	}
	big.item = map("PK", S("p"), "SK", S("big"), "L", N("3"), "pad", Sn(300, 'z'), NULL);
	ck_assert_int_eq(st_put_item(tl_env, &big, &tl_arena, NULL, tl_msg), SHOAL_OK);
	size_t l;
	uint8_t *dump = tl_store_dump(tl_env, false, &l);
	before_len = l;
	free(dump);
	ck_assert_uint_gt(before_len, 0);
	st_index_progress *pr;
	uint32_t np;
	ck_assert_int_eq(st_index_progress_list(tl_env, &tl_arena, &pr, &np, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(np, 1);
	ck_assert(pr[0].local);
	ck_assert_uint_eq(pr[0].item_count, 1);
	/* Scan of the LSI. */
	st_scan_req r = {.table = "Lsi", .index = "byL"};
	tl_scan_ok(&r, &p);
	ck_assert_uint_eq(p.count, 1);

	/* ReturnItemCollectionMetrics' figures: the collection's key and its
	 * size (base item + LSI entry) after each write, also after writes
	 * that change nothing. */
	st_write_result res;
	st_put_req pr_r = {.table = "Lsi",
	                   .item = map("PK", S("r"), "SK", S("a"), "L", N("1"), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &pr_r, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_str_eq(res.coll_attr, "PK");
	ck_assert(tl_str_is(res.coll_pk, "r"));
	ck_assert_uint_eq(res.n_index_writes, 1);
	uint64_t full = res.new_size + res.index_writes[0].put_size;
	ck_assert_uint_eq(res.coll_size, full);
	st_delete_req absent = {.table = "Lsi", .key = map("PK", S("r"), "SK", S("zz"), NULL)};
	ck_assert_int_eq(st_delete_item(tl_env, &absent, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_str_eq(res.coll_attr, "PK");
	ck_assert(tl_str_is(res.coll_pk, "r"));
	ck_assert_uint_eq(res.coll_size, full);
	st_update_req same = {.table = "Lsi", .key = map("PK", S("r"), "SK", S("a"), NULL)};
	ck_assert_int_eq(st_update_item(tl_env, &same, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.coll_size, full);
	/* Without its LSI attribute the item has no entry: the collection
	 * shrinks by it. */
	st_put_req nol = {.table = "Lsi", .item = map("PK", S("r"), "SK", S("a"), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &nol, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.coll_size, res.new_size);
	st_delete_req gone = {.table = "Lsi", .key = map("PK", S("r"), "SK", S("a"), NULL)};
	ck_assert_int_eq(st_delete_item(tl_env, &gone, &tl_arena, &res, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(res.coll_size, 0);
	ck_assert(tl_str_is(res.coll_pk, "r"));

	/* A transaction plans every write before it applies any: two writes in
	 * one collection must both count against the limit afterwards. */
	st_txn_action acts[2] = {
	    {.kind = ST_TXA_PUT,
	     .u.put = {.table = "Lsi", .item = map("PK", S("t"), "SK", S("a"), "L", N("1"), NULL)}},
	    {.kind = ST_TXA_PUT,
	     .u.put = {.table = "Lsi",
	               .item = map("PK", S("t"), "SK", S("b"), "L", N("2"), NULL)}}};
	st_txn_result tr[2];
	ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_transact(t, acts, 2, &tl_arena, tr, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	uint64_t sum = 0;
	for (int i = 0; i < 2; i++)
		sum += tr[i].res.new_size + tr[i].res.index_writes[0].put_size;
	uint64_t one = tr[1].res.new_size + tr[1].res.index_writes[0].put_size;
	ck_assert_uint_eq(tr[1].res.coll_size, sum); /* the last write reports both */
	/* What an item with a 1-byte pad adds (measured in another collection);
	 * a longer pad adds its extra bytes to the item only (KEYS_ONLY). */
	st_put_req probe = {.table = "Lsi",
	                    .item =
	                        map("PK", S("u"), "SK", S("c"), "L", N("3"), "pad", S("z"), NULL)};
	ck_assert_msg(st_put_item(tl_env, &probe, &tl_arena, &res, tl_msg) == SHOAL_OK, "%s",
	              tl_msg);
	uint64_t add1 = res.new_size + res.index_writes[0].put_size;
	ck_assert_uint_lt(one + add1, 400);
	/* Adds 400 - one: room if only the last write had counted, over the
	 * limit with both. */
	st_put_req over = {.table = "Lsi",
	                   .item = map("PK", S("t"), "SK", S("c"), "L", N("3"), "pad",
	                               Sn(400 - one - add1 + 1, 'z'), NULL)};
	ck_assert_int_eq(st_put_item(tl_env, &over, &tl_arena, NULL, tl_msg),
	                 SHOAL_E_COLLECTION_SIZE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Property: random writes, deltas shipped (some twice), index == recomputed  */
/* ------------------------------------------------------------------------ */

START_TEST(test_property_convergence)
{
	uint64_t seed = tl_seed();
	uint64_t rs = seed;
	uint64_t shipped = 0;
	for (int op = 0; op < 600; op++) {
		char pk[8], sk[8], g[8], h[8], w[8];
		snprintf(pk, sizeof(pk), "p%d", (int)(tl_rand(&rs) % 12));
		snprintf(sk, sizeof(sk), "s%d", (int)(tl_rand(&rs) % 3));
		snprintf(g, sizeof(g), "g%d", (int)(tl_rand(&rs) % 4));
		snprintf(h, sizeof(h), "h%d", (int)(tl_rand(&rs) % 2));
		snprintf(w, sizeof(w), "w%d", (int)(tl_rand(&rs) % 2));
		st_value *key = map("PK", S(pk), "SK", S(sk), NULL);
		switch (tl_rand(&rs) % 5) {
		case 0:
		case 1: {
			st_value *it =
			    map("PK", S(pk), "SK", S(sk), "v", Ni((long)(tl_rand(&rs) % 9)), NULL);
			if (tl_rand(&rs) % 3)
				st_map_set(&tl_arena, it, "G", 1, S(g));
			if (tl_rand(&rs) % 2)
				st_map_set(&tl_arena, it, "R", 1, Ni((long)(tl_rand(&rs) % 5)));
			if (tl_rand(&rs) % 2)
				st_map_set(&tl_arena, it, "H", 1, S(h));
			if (tl_rand(&rs) % 2)
				st_map_set(&tl_arena, it, "W", 1, S(w));
			if (tl_rand(&rs) % 2)
				st_map_set(&tl_arena, it, "a", 1, S(g));
			put_in(tl_env, "Tbl", it);
			break;
		}
		case 2:
			update_in(tl_env, "Tbl", key, "SET G = :g, a = :a",
			          map(":g", S(g), ":a", Ni((long)(tl_rand(&rs) % 3)), NULL));
			break;
		case 3:
			if (tl_rand(&rs) % 2)
				update_in(tl_env, "Tbl", key, "REMOVE G, W", NULL);
			else
				update_in(tl_env, "Tbl", key, "SET R = :r, b = :r",
				          map(":r", Ni((long)(tl_rand(&rs) % 5)), NULL));
			break;
		default:
			delete_in(tl_env, "Tbl", key);
			break;
		}
		if (tl_rand(&rs) % 10 == 0) {
			/* Ship a random prefix, sometimes redelivering from further back. */
			uint32_t n;
			uint64_t from = shipped;
			if (from > 0 && tl_rand(&rs) % 2)
				from -= tl_rand(&rs) % (from + 1);
			st_delta *d = outbox(tl_env, from, &n);
			uint32_t take = n > 0 ? 1 + (uint32_t)(tl_rand(&rs) % n) : 0;
			if (take > 0) {
				apply_in(dst, 1, d, take);
				if (d[take - 1].seq > shipped)
					shipped = d[take - 1].seq;
				if (tl_rand(&rs) % 3 == 0)
					apply_in(dst, 1, d, take); /* delivered twice */
			}
			if (tl_rand(&rs) % 4 == 0) {
				st_txn *t;
				ck_assert_int_eq(st_txn_begin(tl_env, &t, tl_msg), SHOAL_OK);
				ck_assert_int_eq(st_outbox_trim(t, shipped, tl_msg), SHOAL_OK);
				ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
			}
		}
	}
	ship(tl_env, dst);
	for (int i = 0; i < 4; i++) {
		uint32_t ne, nr;
		st_value *e = index_entries(dst, "Tbl", gsis[i].name, &ne);
		st_value *r = recompute(tl_env, "Tbl", gsis[i].name, &nr);
		if (ne != nr)
			fprintf(stderr, "seed %llu: index %s differs\n", (unsigned long long)seed,
			        gsis[i].name);
		assert_same_set(e, ne, r, nr, gsis[i].name);
	}
	/* Counters in the target match. */
	st_index_progress *p;
	uint32_t np;
	ck_assert_int_eq(st_index_progress_list(dst, &tl_arena, &p, &np, tl_msg), SHOAL_OK);
	for (uint32_t i = 0; i < np; i++) {
		uint32_t ne;
		index_entries(dst, "Tbl", p[i].index, &ne);
		ck_assert_msg(p[i].item_count == ne, "seed %llu: %s count %llu, entries %u",
		              (unsigned long long)seed, p[i].index,
		              (unsigned long long)p[i].item_count, ne);
	}
}
END_TEST

static Suite *index_suite(void)
{
	return tl_suite("index", setup, teardown, 120,
	                TL_TESTS(test_sparse_and_moves, test_projections,
	                         test_outbox_deterministic_and_trim, test_apply_dedup,
	                         test_deleted_index_dropped, test_backfill, test_update_table,
	                         test_sharded_query_merge, test_index_start_key, test_lsi,
	                         test_property_convergence, test_table_defined_late_and_dropped,
	                         test_index_key_size));
}

TL_MAIN(index_suite)
