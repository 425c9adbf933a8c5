/*
 * catalog.c -- tables: create, delete, describe, list, and their counters.
 *
 * The catalog DBI maps a table name (its UTF-8 bytes, no NUL; LMDB's default
 * memcmp order is the order of ListTables) to one table record (format at the
 * top of catalog_codec.c; definitions are validated by catalog_check.c).  The
 * table's items and index entries live in the data DBI under keys that start
 * with the table id (keyenc.h), so deleting a table is one prefix-range
 * delete.  The counters sit at a fixed offset of the record, so a
 * transaction's counter changes (st_table_count) are patched in place, once
 * per table, when it commits (st_txn_catalog_flush).
 *
 * Table ids come from the meta key "next_table_id" (u32) when the definition
 * leaves the id at 0; a definition that carries an id (assigned by the
 * metadata group, so that every storage group uses the same one) raises
 * next_table_id past it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/alloc.h"
#include "catalog.h"
#include "stream.h"
#include "index_int.h"

static const char KEY_NEXT_ID[] = "next_table_id";

static int not_found(const char *name, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
	               "Requested resource not found: Table: %s not found", name);
}

static MDB_val name_val(const char *name)
{
	MDB_val v = {strlen(name), (void *)name};
	return v;
}

int st_table_load(MDB_txn *txn, st_env *env, const char *name, sh_arena *a, st_table_info *out,
                  char *errmsg)
{
	int rc = st_catalog_check_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn, env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return not_found(name, errmsg);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
	return st_catalog_decode(name, v.mv_data, v.mv_size, a, out, errmsg);
}

int st_catalog_next_table_id(MDB_txn *txn, st_env *env, uint32_t *next, char *errmsg)
{
	MDB_val k = {sizeof(KEY_NEXT_ID) - 1, (void *)KEY_NEXT_ID}, v;
	*next = 1;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == 0 && v.mv_size == 4)
		*next = st_get_be32(v.mv_data);
	else if (mrc == 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record next_table_id");
	else if (mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_get(meta next_table_id)", errmsg);
	return SHOAL_OK;
}

/* Reads next_table_id (1 when absent) and checks that `id`, if given, is not
 * already some table's id. */
static int pick_table_id(st_txn *txn, uint32_t want, uint32_t *id, uint32_t *next_out, char *errmsg)
{
	MDB_val k = {sizeof(KEY_NEXT_ID) - 1, (void *)KEY_NEXT_ID}, v;
	uint32_t next = 1;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == 0 && v.mv_size == 4)
		next = st_get_be32(v.mv_data);
	else if (mrc == 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt meta record next_table_id");
	else if (mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_get(meta next_table_id)", errmsg);
	*next_out = next;
	if (want == 0) {
		if (next == 0)
			return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED, "table ids exhausted");
		*id = next;
		return SHOAL_OK;
	}
	/* An explicit id: refuse one that a live table already uses. */
	MDB_cursor *c;
	mrc = mdb_cursor_open(txn->txn, txn->env->catalog, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
	MDB_val ck, cv;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT)) {
		if (cv.mv_size >= ST_REC_HEADER &&
		    st_get_be32((const uint8_t *)cv.mv_data + ST_REC_OFF_ID) == want) {
			rc = sh_errf(errmsg, SHOAL_E_IN_USE,
			             "Table id %u is already used by table %.*s", want,
			             (int)ck.mv_size, (const char *)ck.mv_data);
			break;
		}
	}
	if (rc == SHOAL_OK && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
	mdb_cursor_close(c);
	*id = want;
	return rc;
}

static int put_next_id(st_txn *txn, uint32_t next, char *errmsg)
{
	uint8_t buf[4];
	st_put_be32(buf, next);
	MDB_val k = {sizeof(KEY_NEXT_ID) - 1, (void *)KEY_NEXT_ID}, v = {4, buf};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(meta next_table_id)", errmsg);
	return SHOAL_OK;
}

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

int st_table_def_stored(const st_table_def *src, sh_arena *a, st_table_def *out, char *errmsg)
{
	int rc = st_catalog_check_def(src, a, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (st_catalog_normalise_def(src, a, out) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "table definition: out of memory");
	return SHOAL_OK;
}

uint32_t st_table_def_next_index_id(const st_table_def *d)
{
	return st_catalog_next_index_id(d);
}

int st_table_create(st_txn *txn, const st_table_def *def, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_txn_catalog_flush(txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	sh_arena a;
	sh_arena_init(&a);
	rc = st_catalog_check_def(def, &a, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_arena;

	MDB_val k = name_val(def->name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == 0) {
		rc = sh_errf(errmsg, SHOAL_E_IN_USE, "Table already exists: %s", def->name);
		goto err_after_arena;
	}
	if (mrc != MDB_NOTFOUND) {
		rc = st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
		goto err_after_arena;
	}

	st_table_def d;
	if (st_catalog_normalise_def(def, &a, &d) != SHOAL_OK) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_create: out of memory");
		goto err_after_arena;
	}
	uint32_t next = 1;
	if ((rc = pick_table_id(txn, def->id, &d.id, &next, errmsg)) != SHOAL_OK)
		goto err_after_arena;

	uint8_t *rec;
	size_t rec_len;
	if (st_catalog_encode(&a, &d, 0, 0, &rec, &rec_len) != SHOAL_OK) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_create: out of memory");
		goto err_after_arena;
	}

	/* From here on the transaction changes: failures poison it. */
	v.mv_size = rec_len;
	v.mv_data = rec;
	mrc = mdb_put(txn->txn, txn->env->catalog, &k, &v, MDB_NOOVERWRITE);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_put(catalog)", errmsg);
		goto err_after_arena;
	}
	if (d.id >= next) { /* the next automatic id is past every id in use */
		if ((rc = put_next_id(txn, d.id + 1, errmsg)) != SHOAL_OK)
			goto err_after_arena;
	}
	sh_arena_fini(&a);
	return SHOAL_OK;

err_after_arena:
	sh_arena_fini(&a);
	if (env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

/* Deletes every data key that starts with the table id. */
static int delete_table_data(st_txn *txn, uint32_t table_id, char *errmsg)
{
	st_key prefix;
	st_key_table(&prefix, table_id, 0);
	prefix.len = 4; /* table id only: the base table and all its indexes */
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	int rc = SHOAL_OK;
	for (;;) {
		MDB_val k = {prefix.len, prefix.b}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
			break;
		}
		if (k.mv_size < prefix.len || memcmp(k.mv_data, prefix.b, prefix.len) != 0)
			break;
		mrc = mdb_cursor_del(c, 0);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_del(data)", errmsg);
			break;
		}
	}
	mdb_cursor_close(c);
	return rc;
}

int st_table_delete(st_txn *txn, const char *name, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_catalog_check_name(name, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_catalog_flush(txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return not_found(name, errmsg);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
		goto err;
	}
	if (v.mv_size < ST_REC_HEADER || !st_catalog_version_ok(((const uint8_t *)v.mv_data)[0])) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s", name);
		goto err;
	}
	uint32_t id = st_get_be32((const uint8_t *)v.mv_data + ST_REC_OFF_ID);
	bool kept = false; /* its stream stays readable (stream.h) */
	if ((rc = st_stream_table_dropped(txn, name, id, v.mv_data, v.mv_size, &kept, errmsg)) !=
	    SHOAL_OK)
		goto err;
	mrc = mdb_del(txn->txn, txn->env->catalog, &k, NULL);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_del(catalog)", errmsg);
		goto err;
	}
	if ((rc = delete_table_data(txn, id, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = st_ix_forget_table(txn, id, errmsg)) != SHOAL_OK)
		goto err;
	if (!kept && (rc = st_stream_forget_table(txn, id, errmsg)) != SHOAL_OK)
		goto err;
	return SHOAL_OK;

err:
	st_txn_poison(txn, rc, errmsg);
	return rc;
}

int st_table_delete_unprotected(st_txn *txn, const char *name, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_catalog_check_name(name, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_catalog_flush(txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	rc = st_table_load(txn->txn, txn->env, name, &a, &t, errmsg);
	bool protected_ = rc == SHOAL_OK && t.def.deletion_protection;
	sh_arena_fini(&a);
	if (rc != SHOAL_OK)
		return rc;
	if (protected_)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Resource cannot be deleted as it is currently protected against "
		               "deletion. Disable deletion protection first.");
	return st_table_delete(txn, name, errmsg);
}

static uint64_t add_saturating(uint64_t v, int64_t delta)
{
	if (delta >= 0)
		return v + (uint64_t)delta >= v ? v + (uint64_t)delta : UINT64_MAX;
	uint64_t d = (uint64_t)(-(delta + 1)) + 1;
	return v > d ? v - d : 0;
}

/*
 * Per transaction, the tables its writes used: the decoded definition (so
 * that a Raft entry of 50 puts to one table reads and decodes its catalog
 * record once, not 50 times) and the counter changes not yet written (so
 * that the record is patched once per transaction, not once per write).
 * Anything that writes the catalog, or reads counters, in the transaction
 * first calls st_txn_catalog_flush.
 */
struct st_txn_table {
	struct st_txn_table *next;
	const char *name;
	bool loaded; /* info holds the definition */
	st_table_info info;
	int64_t items, bytes; /* counter changes not written yet */
};

static struct st_txn_table *txn_table(st_txn *txn, const char *name)
{
	for (struct st_txn_table *t = txn->tables; t != NULL; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	struct st_txn_table *t = sh_arena_calloc(&txn->arena, 1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->name = sh_arena_strndup(&txn->arena, name, strlen(name));
	if (t->name == NULL)
		return NULL;
	t->next = txn->tables;
	txn->tables = t;
	return t;
}

int st_txn_table(st_txn *txn, const char *name, st_table_info *out, char *errmsg)
{
	int rc = st_catalog_check_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	struct st_txn_table *t = txn_table(txn, name);
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_txn_table(%s): out of memory", name);
	if (!t->loaded) {
		rc = st_table_load(txn->txn, txn->env, name, &txn->arena, &t->info, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		t->loaded = true;
	}
	*out = t->info;
	return SHOAL_OK;
}

int st_table_count(st_txn *txn, const char *name, int64_t items, int64_t bytes, char *errmsg)
{
	if (items == 0 && bytes == 0)
		return SHOAL_OK;
	struct st_txn_table *t = txn_table(txn, name);
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_count(%s): out of memory", name);
	t->items += items;
	t->bytes += bytes;
	return SHOAL_OK;
}

/* Writes one table's counter changes into its record. */
static int count_flush(st_txn *txn, const char *name, int64_t items, int64_t bytes, char *errmsg)
{
	if (items == 0 && bytes == 0)
		return SHOAL_OK;
	MDB_val k = name_val(name), v;
	int mrc = mdb_get(txn->txn, txn->env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK; /* dropped after its writes: nothing to count */
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
	if (v.mv_size < ST_REC_HEADER || !st_catalog_version_ok(((const uint8_t *)v.mv_data)[0]))
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s",
		               name);
	/* The value may live in the read-only map: patch a private copy. */
	uint8_t *rec = sh_malloc(v.mv_size);
	if (rec == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_count(%s): out of memory", name);
	memcpy(rec, v.mv_data, v.mv_size);
	st_put_be64(rec + ST_REC_OFF_COUNT,
	            add_saturating(st_get_be64(rec + ST_REC_OFF_COUNT), items));
	st_put_be64(rec + ST_REC_OFF_BYTES,
	            add_saturating(st_get_be64(rec + ST_REC_OFF_BYTES), bytes));
	MDB_val nv = {v.mv_size, rec};
	mrc = mdb_put(txn->txn, txn->env->catalog, &k, &nv, 0);
	sh_free(rec);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(catalog)", errmsg);
	return SHOAL_OK;
}

int st_txn_catalog_flush(st_txn *txn, char *errmsg)
{
	for (struct st_txn_table *t = txn->tables; t != NULL; t = t->next) {
		int rc = count_flush(txn, t->name, t->items, t->bytes, errmsg);
		if (rc != SHOAL_OK)
			return st_txn_poison(txn, rc, errmsg);
	}
	txn->tables = NULL; /* the arena keeps the memory until the txn ends */
	return SHOAL_OK;
}

const st_index_def *st_table_index(const st_table_def *t, const char *index_name)
{
	if (index_name == NULL)
		return NULL;
	for (uint32_t i = 0; i < t->n_indexes; i++)
		if (strcmp(t->indexes[i].name, index_name) == 0)
			return &t->indexes[i];
	return NULL;
}

int st_table_describe(st_env *env, const char *name, sh_arena *a, st_table_info *out, char *errmsg)
{
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	int rc = st_table_load(txn, env, name, a, out, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

int st_table_describe_id(st_env *env, uint32_t id, sh_arena *a, st_table_info *out, char *errmsg)
{
	MDB_txn *txn;
	MDB_cursor *c;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	if ((mrc = mdb_cursor_open(txn, env->catalog, &c)) != 0) {
		mdb_txn_abort(txn);
		return st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
	}
	int rc = sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no table of id %u", id);
	MDB_val k, v;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (v.mv_size < ST_REC_OFF_ID + 4 ||
		    st_get_be32((const uint8_t *)v.mv_data + ST_REC_OFF_ID) != id)
			continue;
		char *name = sh_arena_strndup(a, k.mv_data, k.mv_size);
		rc = name == NULL ? sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory")
		                  : st_table_load(txn, env, name, a, out, errmsg);
		break;
	}
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return rc;
}

int st_table_id(st_env *env, const char *name, uint32_t *id, char *errmsg)
{
	int rc = st_catalog_check_name(name, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	MDB_val k = name_val(name), v;
	mrc = mdb_get(txn, env->catalog, &k, &v);
	if (mrc == MDB_NOTFOUND)
		rc = not_found(name, errmsg);
	else if (mrc != 0)
		rc = st_lmdb_err(mrc, "mdb_get(catalog)", errmsg);
	else if (v.mv_size < ST_REC_OFF_ID + 4)
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt catalog record for table %s", name);
	else
		*id = st_get_be32((const uint8_t *)v.mv_data + ST_REC_OFF_ID);
	mdb_txn_abort(txn);
	return rc;
}

int st_table_list(st_env *env, const char *exclusive_start, uint32_t limit, sh_arena *a,
                  const char ***names, uint32_t *n, const char **last, char *errmsg)
{
	*names = NULL;
	*n = 0;
	*last = NULL;
	int rc = st_catalog_check_list(exclusive_start, limit, errmsg);
	if (rc != SHOAL_OK)
		return rc;

	const char **out = sh_arena_calloc(a, limit, sizeof(*out));
	if (out == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_list: out of memory");
	MDB_txn *txn;
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
	MDB_cursor *c;
	mrc = mdb_cursor_open(txn, env->catalog, &c);
	if (mrc != 0) {
		rc = st_lmdb_err(mrc, "mdb_cursor_open(catalog)", errmsg);
		goto err_after_txn;
	}
	MDB_val k, v;
	if (exclusive_start != NULL) {
		k = name_val(exclusive_start);
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == strlen(exclusive_start) &&
		    memcmp(k.mv_data, exclusive_start, k.mv_size) == 0)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	} else {
		mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	}
	uint32_t count = 0;
	while (mrc == 0 && count < limit) {
		out[count] = sh_arena_strndup(a, k.mv_data, k.mv_size);
		if (out[count] == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "st_table_list: out of memory");
			goto err_after_cursor;
		}
		count++;
		mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	if (mrc != 0 && mrc != MDB_NOTFOUND) {
		rc = st_lmdb_err(mrc, "mdb_cursor_get(catalog)", errmsg);
		goto err_after_cursor;
	}
	*names = out;
	*n = count;
	if (mrc == 0 && count > 0) /* limit reached and another name follows */
		*last = out[count - 1];

err_after_cursor:
	mdb_cursor_close(c);
err_after_txn:
	mdb_txn_abort(txn);
	return rc;
}

bool st_stream_spec_find(const st_stream_spec *s, int64_t label_ms, int64_t now_ms,
                         int64_t retention_ms, bool *enabled, st_stream_view *view)
{
	if (label_ms == 0)
		return false;
	if (s->label_ms == label_ms) {
		*enabled = s->enabled;
		*view = s->view;
		return true;
	}
	for (uint32_t i = 0; i < s->n_past; i++)
		if (s->past[i].label_ms == label_ms &&
		    s->past[i].ended_ms >= now_ms - retention_ms) {
			*enabled = false;
			*view = s->past[i].view;
			return true;
		}
	return false;
}

bool st_stream_spec_find_dropped(const st_stream_spec *s, int64_t deleted_ms, int64_t label_ms,
                                 int64_t now_ms, int64_t retention_ms, st_stream_view *view)
{
	bool enabled;
	if (deleted_ms < now_ms - retention_ms)
		return false;
	return st_stream_spec_find(s, label_ms, now_ms, retention_ms, &enabled, view);
}
