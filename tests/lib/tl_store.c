#include "tl_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/engine.h"

char tl_dir[PATH_MAX];
st_env *tl_env;

void tl_env_open(const char *tag, const st_env_options *opts)
{
	snprintf(tl_dir, sizeof(tl_dir), "%s", tl_tmpdir(tag));
	int rc = st_env_open(tl_dir, opts, &tl_env, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "st_env_open(%s): %s", tl_dir, tl_msg);
}

void tl_env_close(void)
{
	st_env_close(tl_env);
	tl_env = NULL;
	tl_rmtree(tl_dir);
}

void tl_store_open(const char *tag, const st_env_options *opts)
{
	tl_arena_setup();
	tl_env_open(tag, opts);
}

void tl_store_close(void)
{
	tl_env_close();
	tl_arena_teardown();
}

void tl_create_table_def(const st_table_def *def)
{
	st_txn *t;
	int rc = st_txn_begin(tl_env, &t, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	rc = st_table_create(t, def, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	rc = st_txn_commit(t, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
}

uint32_t tl_create_table(const char *name, const char *pk, st_type pk_type, const char *sk,
                         st_type sk_type)
{
	st_key_attr attrs[2] = {{pk, pk_type}, {sk, sk_type}};
	st_table_def d = {.name = name,
	                  .key = {{pk, pk_type}, {sk, sk_type}},
	                  .attrs = attrs,
	                  .n_attrs = sk != NULL ? 2 : 1};
	tl_create_table_def(&d);
	st_table_info info;
	int rc = st_table_describe(tl_env, name, &tl_arena, &info, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	return info.def.id;
}

void tl_create_table_gsi(const char *name, st_key_schema key, const char *index,
                         st_key_schema index_key)
{
	const st_key_attr *keys[4] = {&key.hash, &key.range, &index_key.hash, &index_key.range};
	st_key_attr attrs[4];
	uint32_t n = 0;
	for (int i = 0; i < 4; i++) {
		bool seen = keys[i]->name == NULL;
		for (uint32_t j = 0; j < n && !seen; j++)
			seen = strcmp(attrs[j].name, keys[i]->name) == 0;
		if (!seen)
			attrs[n++] = *keys[i];
	}
	st_index_def gsi = {.name = index,
	                    .key = index_key,
	                    .projection = ST_PROJ_ALL,
	                    .write_shards = 1,
	                    .status = ST_INDEX_ACTIVE};
	st_table_def d = {.name = name,
	                  .key = key,
	                  .attrs = attrs,
	                  .n_attrs = n,
	                  .indexes = &gsi,
	                  .n_indexes = 1};
	tl_create_table_def(&d);
}

void tl_put(const char *table, const st_value *item)
{
	st_put_req r = {.table = table, .item = item};
	st_write_result res;
	int rc = st_put_item(tl_env, &r, &tl_arena, &res, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "put: %s", tl_msg);
}

st_value *tl_get(const char *table, const st_value *key)
{
	st_get_req r = {.table = table, .key = key};
	st_value *item = NULL;
	int rc = st_get_item(tl_env, &r, &tl_arena, &item, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "get: %s", tl_msg);
	return item;
}

void tl_query_ok(st_query_req *r, st_page *p)
{
	int rc = st_query(tl_env, r, &tl_arena, p, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "query %s: %s", r->key_condition, tl_msg);
}

void tl_scan_ok(st_scan_req *r, st_page *p)
{
	int rc = st_scan(tl_env, r, &tl_arena, p, tl_msg);
	tl_assert_msg(rc == SHOAL_OK, "scan: %s", tl_msg);
}

static void expect_err(int rc, int code, const char *msg)
{
	tl_assert_msg(rc == code, "expected %s, got %s (%s)", shoal_err_name(code),
	              shoal_err_name(rc), tl_msg);
	tl_assert_msg(strcmp(tl_msg, msg) == 0, "message \"%s\", want \"%s\"", tl_msg, msg);
}

void tl_query_err(st_query_req *r, int code, const char *msg)
{
	st_page p;
	expect_err(st_query(tl_env, r, &tl_arena, &p, tl_msg), code, msg);
}

void tl_scan_err(st_scan_req *r, int code, const char *msg)
{
	st_page p;
	expect_err(st_scan(tl_env, r, &tl_arena, &p, tl_msg), code, msg);
}

/* One page of a Query (q) or a Scan (s), whichever is not NULL. */
static void read_page(st_query_req *q, st_scan_req *s, const st_value *start, st_page *p)
{
	if (q != NULL) {
		q->exclusive_start_key = start;
		tl_query_ok(q, p);
	} else {
		s->exclusive_start_key = start;
		tl_scan_ok(s, p);
	}
}

static st_value *read_all(st_query_req *q, st_scan_req *s, uint32_t *n, uint32_t *pages,
                          uint32_t *scanned)
{
	const st_value *first = q != NULL ? q->exclusive_start_key : s->exclusive_start_key;
	const st_value *start = first;
	uint32_t limit = q != NULL ? q->limit : s->limit;
	size_t cap = 64;
	st_value *all = malloc(cap * sizeof(*all));
	tl_assert(all != NULL);
	*n = 0;
	*pages = 0;
	if (scanned != NULL)
		*scanned = 0;
	for (;;) {
		st_page p;
		read_page(q, s, start, &p);
		(*pages)++;
		tl_assert(*pages < 100000);
		if (limit != 0)
			tl_assert_msg(p.scanned <= limit, "%u items read, Limit %u", p.scanned,
			              limit);
		tl_assert_msg(p.count <= p.scanned, "%u items returned, %u read", p.count,
		              p.scanned);
		if (scanned != NULL)
			*scanned += p.scanned;
		for (uint32_t i = 0; i < p.count; i++) {
			if (*n == cap) {
				cap *= 2;
				all = realloc(all, cap * sizeof(*all));
				tl_assert(all != NULL);
			}
			all[(*n)++] = p.items[i];
		}
		if (p.last_evaluated_key == NULL)
			break;
		tl_assert(p.items != NULL);
		start = p.last_evaluated_key;
	}
	if (q != NULL)
		q->exclusive_start_key = first;
	else
		s->exclusive_start_key = first;
	st_value *copy = sh_arena_memdup(&tl_arena, all, *n * sizeof(*all));
	tl_assert(copy != NULL);
	free(all);
	return copy;
}

st_value *tl_query_all(st_query_req *r, uint32_t *n, uint32_t *pages, uint32_t *scanned)
{
	return read_all(r, NULL, n, pages, scanned);
}

st_value *tl_scan_all(st_scan_req *r, uint32_t *n, uint32_t *pages, uint32_t *scanned)
{
	return read_all(NULL, r, n, pages, scanned);
}

uint8_t *tl_store_dump(st_env *env, bool with_meta, size_t *len)
{
	size_t cap = 1 << 16, used = 0;
	uint8_t *buf = malloc(cap);
	tl_assert(buf != NULL);
	MDB_txn *txn;
	tl_assert(mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn) == 0);
	MDB_dbi dbis[3] = {env->meta, env->catalog, env->data};
	for (int i = with_meta ? 0 : 1; i < 3; i++) {
		MDB_cursor *c;
		tl_assert(mdb_cursor_open(txn, dbis[i], &c) == 0);
		MDB_val k, v;
		for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
		     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			size_t need = used + k.mv_size + v.mv_size + 2 * sizeof(size_t);
			while (need > cap) {
				buf = realloc(buf, cap *= 2);
				tl_assert(buf != NULL);
			}
			memcpy(buf + used, &k.mv_size, sizeof(size_t));
			used += sizeof(size_t);
			memcpy(buf + used, k.mv_data, k.mv_size);
			used += k.mv_size;
			memcpy(buf + used, &v.mv_size, sizeof(size_t));
			used += sizeof(size_t);
			memcpy(buf + used, v.mv_data, v.mv_size);
			used += v.mv_size;
		}
		mdb_cursor_close(c);
	}
	mdb_txn_abort(txn);
	*len = used;
	return buf;
}
