/*
 * snapshot.c -- whole-environment views and loads for Raft snapshots, and
 * table reads inside a write transaction (storage/snapshot.h).
 *
 * A view is one LMDB read transaction (MDB_RDONLY).  Because the environment
 * is opened with MDB_NOTLS (env.c), the read transaction is tied to the
 * MDB_txn, not to the thread that began it: the state machine begins the
 * view on its loop thread (where it is consistent with the applied index)
 * and walks it on raft's worker thread.  A walk is one cursor per database,
 * MDB_FIRST then MDB_NEXT, handing LMDB's own memory to the callback.
 *
 * A load is one write transaction that first empties the three databases
 * (mdb_drop with del = 0 keeps the handles) and then appends the pairs with
 * MDB_APPEND: a snapshot carries every database in key order, so the B-trees
 * are built left to right without searching, and a key out of order is
 * refused by LMDB (MDB_KEYEXIST), which we report as a malformed input; so
 * is a load whose meta "format" is not this build's (the environment would
 * not open again).
 * Commit is followed by mdb_env_sync: a snapshot install replaces the state
 * wholesale and is rare, so it is made durable at once even under
 * MDB_NOSYNC.
 */
#include <stdio.h>
#include <string.h>

#include "../common/alloc.h"
#include "engine.h"
#include "snapshot.h"

static const char KEY_APPLIED[] = "applied"; /* as in env.c */
static const char KEY_FORMAT[] = "format";

struct st_view {
	st_env *env;
	MDB_txn *txn;
	uint64_t applied;
};

struct st_load {
	st_env *env;
	MDB_txn *txn;
	int sticky; /* first error, or SHOAL_OK */
	char sticky_msg[SH_ERRMSG_SIZE];
};

const char *st_dbi_name(st_dbi dbi)
{
	switch (dbi) {
	case ST_DBI_CATALOG:
		return "catalog";
	case ST_DBI_META:
		return "meta";
	case ST_DBI_DATA:
		return "data";
	default:
		return "?";
	}
}

static MDB_dbi dbi_handle(const st_env *env, st_dbi dbi)
{
	switch (dbi) {
	case ST_DBI_CATALOG:
		return env->catalog;
	case ST_DBI_META:
		return env->meta;
	default:
		return env->data;
	}
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------------------ */
/* Views                                                                     */
/* ------------------------------------------------------------------------ */

int st_view_begin(st_env *env, st_view **out, char *errmsg)
{
	*out = NULL;
	st_view *v = sh_calloc(1, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_view_begin: out of memory");
	int rc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, &v->txn);
	if (rc != 0) {
		sh_free(v);
		return st_lmdb_err(rc, "mdb_txn_begin(snapshot view)", errmsg);
	}
	v->env = env;
	MDB_val k = {sizeof(KEY_APPLIED) - 1, (void *)KEY_APPLIED}, val;
	if (mdb_get(v->txn, env->meta, &k, &val) == 0 && val.mv_size == 8)
		v->applied = get_be64(val.mv_data);
	*out = v;
	return SHOAL_OK;
}

uint64_t st_view_applied(const st_view *v)
{
	return v->applied;
}

int st_view_count(st_view *v, st_dbi dbi, uint64_t *n, char *errmsg)
{
	MDB_stat st;
	int rc = mdb_stat(v->txn, dbi_handle(v->env, dbi), &st);
	if (rc != 0) {
		char what[64];
		snprintf(what, sizeof(what), "mdb_stat(%s)", st_dbi_name(dbi));
		return st_lmdb_err(rc, what, errmsg);
	}
	*n = st.ms_entries;
	return SHOAL_OK;
}

int st_view_foreach(st_view *v, st_dbi dbi, st_view_fn fn, void *arg, char *errmsg)
{
	char what[64];
	MDB_cursor *c;
	int mrc = mdb_cursor_open(v->txn, dbi_handle(v->env, dbi), &c);
	if (mrc != 0) {
		snprintf(what, sizeof(what), "mdb_cursor_open(%s)", st_dbi_name(dbi));
		return st_lmdb_err(mrc, what, errmsg);
	}
	int rc = SHOAL_OK;
	MDB_val k, val;
	for (mrc = mdb_cursor_get(c, &k, &val, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
		rc = fn(arg, k.mv_data, k.mv_size, val.mv_data, val.mv_size, errmsg);
		if (rc != SHOAL_OK)
			break;
	}
	if (rc == SHOAL_OK && mrc != MDB_NOTFOUND) {
		snprintf(what, sizeof(what), "mdb_cursor_get(%s)", st_dbi_name(dbi));
		rc = st_lmdb_err(mrc, what, errmsg);
	}
	mdb_cursor_close(c);
	return rc;
}

void st_view_end(st_view *v)
{
	if (v == NULL)
		return;
	mdb_txn_abort(v->txn);
	sh_free(v);
}

/* ------------------------------------------------------------------------ */
/* Loads                                                                     */
/* ------------------------------------------------------------------------ */

int st_load_begin(st_env *env, st_load **out, char *errmsg)
{
	*out = NULL;
	st_load *l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_load_begin: out of memory");
	int code;
	int rc = mdb_txn_begin(env->env, NULL, 0, &l->txn);
	if (rc != 0) {
		code = st_lmdb_err(rc, "mdb_txn_begin(load)", errmsg);
		goto err_after_alloc;
	}
	l->env = env;
	for (int d = 0; d < ST_DBI__COUNT; d++) {
		rc = mdb_drop(l->txn, dbi_handle(env, (st_dbi)d), 0);
		if (rc != 0) {
			char what[64];
			snprintf(what, sizeof(what), "mdb_drop(%s)", st_dbi_name((st_dbi)d));
			code = st_lmdb_err(rc, what, errmsg);
			goto err_after_txn;
		}
	}
	*out = l;
	return SHOAL_OK;

err_after_txn:
	mdb_txn_abort(l->txn);
err_after_alloc:
	sh_free(l);
	return code;
}

static int load_poison(st_load *l, int code, const char *errmsg)
{
	if (l->sticky == SHOAL_OK) {
		l->sticky = code;
		snprintf(l->sticky_msg, sizeof(l->sticky_msg), "%s",
		         errmsg != NULL && errmsg[0] != '\0' ? errmsg : shoal_strerror(code));
	}
	return code;
}

int st_load_put(st_load *l, st_dbi dbi, const void *key, size_t klen, const void *val, size_t vlen,
                char *errmsg)
{
	if (l->sticky != SHOAL_OK)
		return sh_errf(errmsg, l->sticky, "%s", l->sticky_msg);
	int rc;
	if ((unsigned)dbi >= ST_DBI__COUNT) {
		rc = sh_errf(errmsg, SHOAL_E_SERIALIZATION, "load: no database %d", (int)dbi);
		return load_poison(l, rc, errmsg);
	}
	if (klen == 0 || klen > (size_t)mdb_env_get_maxkeysize(l->env->env)) {
		rc = sh_errf(errmsg, SHOAL_E_SERIALIZATION, "load(%s): invalid key length %zu",
		             st_dbi_name(dbi), klen);
		return load_poison(l, rc, errmsg);
	}
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	int mrc = mdb_put(l->txn, dbi_handle(l->env, dbi), &k, &v, MDB_APPEND);
	if (mrc == MDB_KEYEXIST) {
		rc = sh_errf(errmsg, SHOAL_E_SERIALIZATION, "load(%s): keys out of order",
		             st_dbi_name(dbi));
		return load_poison(l, rc, errmsg);
	}
	if (mrc != 0) {
		char what[64];
		snprintf(what, sizeof(what), "mdb_put(%s)", st_dbi_name(dbi));
		rc = st_lmdb_err(mrc, what, errmsg);
		return load_poison(l, rc, errmsg);
	}
	return SHOAL_OK;
}

int st_load_commit(st_load *l, char *errmsg)
{
	st_env *env = l->env;
	int code;
	if (l->sticky != SHOAL_OK) {
		code = sh_errf(errmsg, l->sticky, "%s", l->sticky_msg);
		st_load_abort(l);
		return code;
	}
	/* The environment opens again only with this build's format (env.c):
	 * a load of another is refused while nothing of it is visible. */
	MDB_val k = {sizeof(KEY_FORMAT) - 1, (void *)KEY_FORMAT}, v;
	int mrc = mdb_get(l->txn, env->meta, &k, &v);
	if (mrc != 0 && mrc != MDB_NOTFOUND) {
		code = st_lmdb_err(mrc, "mdb_get(meta format)", errmsg);
		st_load_abort(l);
		return code;
	}
	if (mrc == MDB_NOTFOUND || v.mv_size != 4 || get_be32(v.mv_data) != ST_ENV_FORMAT) {
		code =
		    sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		            "load: storage format version %u (this build reads %u)",
		            mrc == 0 && v.mv_size == 4 ? get_be32(v.mv_data) : 0u, ST_ENV_FORMAT);
		st_load_abort(l);
		return code;
	}
	if (sh_fault_check(SH_FAULT_COMMIT)) {
		st_load_abort(l);
		return sh_errf(errmsg, SHOAL_E_IO, "mdb_txn_commit(load): injected fault");
	}
	int rc = mdb_txn_commit(l->txn); /* frees the MDB_txn in every case */
	sh_free(l);
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_txn_commit(load)", errmsg);
	/* The loaded meta may hold partition-move records (or none). */
	rc = st_part_refresh(env, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return st_env_sync(env, errmsg);
}

void st_load_abort(st_load *l)
{
	if (l == NULL)
		return;
	mdb_txn_abort(l->txn);
	sh_free(l);
}

/* ------------------------------------------------------------------------ */
/* Reads inside a write transaction                                          */
/* ------------------------------------------------------------------------ */

int st_txn_table_describe(st_txn *txn, const char *name, sh_arena *a, st_table_info *out,
                          char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_txn_catalog_flush(txn, errmsg); /* its counters, up to date */
	if (rc != SHOAL_OK)
		return rc;
	return st_table_load(txn->txn, txn->env, name, a, out, errmsg);
}
