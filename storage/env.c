/*
 * env.c -- the LMDB environment and Shoal's write transactions.
 *
 * One LMDB environment per storage group, holding three named databases:
 *
 *   "meta"     fixed keys, big-endian integers:
 *                "format"        -> u32  on-disk format version (ST_ENV_FORMAT)
 *                "applied"       -> u64  Raft index of the last applied entry
 *                "next_table_id" -> u32  next table id to hand out (catalog.c)
 *                0x01 ...        the outbox and per-index state (index_int.h)
 *                0x02 / 0x03 ... transactions (txn.c), stream records (stream.h)
 *                0x05 ...        partition moves (parts.h)
 *   "catalog"  table name -> table record (format at the top of catalog_codec.c)
 *   "data"     items and index entries (keyenc.c / codec.c)
 *
 * The environment is opened with MDB_NOTLS so that a read transaction belongs
 * to its MDB_txn and not to the thread that began it: readers (GetItem, Query,
 * Scan) may run on any thread of a pool.  With opts->nosync the environment
 * uses MDB_NOSYNC: a commit reaches the OS page cache but is not flushed.  The
 * Raft log is then the durable record; st_env_sync flushes LMDB at a clean
 * close and after a snapshot is installed (a snapshot taken does not: after a
 * machine crash an environment left open is rebuilt anyway, env_trust.c).
 *
 * Writable map.  With nosync the environment also uses MDB_WRITEMAP: a
 * transaction writes its pages straight into the shared mapping and commit
 * costs no system call, where without it LMDB copies every dirty page into
 * the page cache with pwrite at each commit (a third of the replicated
 * apply's CPU, measured on the cluster benchmark).  Durability is unchanged:
 * the mapping is the page cache, a process crash (kill -9) loses nothing
 * that was committed, and st_env_sync (msync) makes it durable.  The price is
 * that LMDB's file is sparse (ftruncate'd to the map size) and a store into
 * a hole of a full disk raises SIGBUS instead of failing the write.  So the
 * blocks are preallocated (fallocate) ahead of LMDB's last used page: every
 * write transaction begins with at least ENV_HEADROOM (plus 1/64 of the data
 * for the free-page lists of large deletes) allocated past it, and each write
 * reserves, before it writes, what it may add (st_txn_reserve: an item and a
 * copy per index on half-full pages, a batch of deltas, a backfill step),
 * counted from the start of its transaction; a snapshot load reserves twice
 * the snapshot (st_env_reserve).  So the file holds at most the data, the
 * largest single transaction's estimate and a few MiB.  A disk that cannot
 * give the room makes the write fail with SHOAL_E_FULL before anything of it
 * is written.  Where fallocate is not supported (probed when opening) the
 * environment runs without MDB_WRITEMAP.
 *
 * Applied index: st_txn_commit writes the index given to st_txn_set_applied
 * into "meta" inside the same LMDB transaction as the data it describes, so
 * the data and the applied index are always consistent in the environment.
 * After a process crash the node replays the Raft log from st_env_applied()
 * + 1; entries at or below it are already in LMDB, which makes replay
 * idempotent.  After a machine crash a MDB_NOSYNC file may be torn (pages
 * flushed in any order), so a rebuildable environment is then emptied at
 * open instead (env_trust.c) and the node rebuilds it from Raft.
 *
 * Write transactions (st_txn) carry a sticky error: the first environmental
 * failure (out of memory, I/O, map full) inside a write operation may have
 * left part of that operation written, so the transaction is poisoned
 * (st_txn_poison) and refuses further work; its commit aborts and returns the
 * error.  This is LMDB's own MDB_TXN_ERROR rule lifted to Shoal's level.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/alloc.h"
#include "engine.h"
#include "stream.h"
#include "index.h"

#define ENV_MAXDBS           8 /* meta, catalog, data, and room for the outbox and later DBIs */
#define ENV_DEFAULT_MAP_SIZE (64ull << 30)
/* Writable map: allocated space kept past LMDB's last page before every
 * write transaction (on top of what its writes reserve), and the step in
 * which the allocation grows. */
#define ENV_HEADROOM     (4ull << 20)
#define ENV_RESERVE_STEP (4ull << 20)

static const char KEY_FORMAT[] = "format";
static const char KEY_APPLIED[] = "applied";

int st_lmdb_err(int rc, const char *what, char *errmsg)
{
	int code;
	if (rc == MDB_MAP_FULL)
		code = SHOAL_E_FULL;
	else if (rc == ENOMEM)
		code = SHOAL_E_NOMEM;
	else
		code = SHOAL_E_IO;
	return sh_errf(errmsg, code, "%s: %s", what, mdb_strerror(rc));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* Opens the three DBIs and checks (or, in a new environment, writes) the
 * format version, in one write transaction. */
static int env_init_dbis(st_env *env, const char *path, char *errmsg)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(env->env, NULL, 0, &txn);
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_txn_begin", errmsg);
	const char *what = "mdb_dbi_open(meta)";
	rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &env->meta);
	if (rc == 0) {
		what = "mdb_dbi_open(catalog)";
		rc = mdb_dbi_open(txn, "catalog", MDB_CREATE, &env->catalog);
	}
	if (rc == 0) {
		what = "mdb_dbi_open(data)";
		rc = mdb_dbi_open(txn, "data", MDB_CREATE, &env->data);
	}
	if (rc != 0)
		goto err_after_txn;

	MDB_val k = {sizeof(KEY_FORMAT) - 1, (void *)KEY_FORMAT};
	MDB_val v;
	what = "mdb_get(meta format)";
	rc = mdb_get(txn, env->meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		uint8_t buf[4];
		put_be32(buf, ST_ENV_FORMAT);
		v.mv_size = sizeof(buf);
		v.mv_data = buf;
		what = "mdb_put(meta format)";
		rc = mdb_put(txn, env->meta, &k, &v, 0);
		if (rc != 0)
			goto err_after_txn;
	} else if (rc != 0) {
		goto err_after_txn;
	} else if (v.mv_size != 4 || get_be32(v.mv_data) != ST_ENV_FORMAT) {
		mdb_txn_abort(txn);
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "%s: unsupported storage format version %u (this build reads %u)",
		               path, v.mv_size == 4 ? get_be32(v.mv_data) : 0u, ST_ENV_FORMAT);
	}
	what = "mdb_txn_commit";
	rc = mdb_txn_commit(txn);
	if (rc != 0)
		return st_lmdb_err(rc, what, errmsg);
	return SHOAL_OK;

err_after_txn:
	mdb_txn_abort(txn);
	return st_lmdb_err(rc, what, errmsg);
}

/* Whether files in directory `path` can be preallocated (fallocate). */
static bool can_fallocate(const char *path)
{
	char probe[4096];
	if ((size_t)snprintf(probe, sizeof(probe), "%s/.fallocate-probe", path) >= sizeof(probe))
		return false;
	int fd = open(probe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	bool ok = fallocate(fd, 0, 0, 4096) == 0;
	close(fd);
	unlink(probe);
	return ok;
}

/* The bytes up to LMDB's last used page (free pages inside included). */
static int env_used(st_env *env, uint64_t *used)
{
	MDB_envinfo info;
	MDB_stat st;
	int rc = mdb_env_info(env->env, &info);
	if (rc == 0)
		rc = mdb_env_stat(env->env, &st);
	*used = rc == 0 ? ((uint64_t)info.me_last_pgno + 1) * st.ms_psize : 0;
	return rc;
}

uint64_t st_env_used(st_env *env)
{
	uint64_t used;
	env_used(env, &used);
	return used;
}

/* Writable map: makes sure the data file has `headroom` bytes, and 1/64 of
 * what is used, allocated past LMDB's last used page (see the top of this
 * file). */
static int env_reserve(st_env *env, uint64_t headroom, char *errmsg)
{
	if (!env->writemap)
		return SHOAL_OK;
	uint64_t used;
	int rc = env_used(env, &used);
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_env_info", errmsg);
	headroom += used / 64;
	if (headroom > env->map_size || used > env->map_size - headroom)
		headroom = env->map_size - (used < env->map_size ? used : env->map_size);
	uint64_t need = used + headroom;
	if (need <= env->reserved)
		return SHOAL_OK;
	uint64_t end = (need + ENV_RESERVE_STEP - 1) / ENV_RESERVE_STEP * ENV_RESERVE_STEP;
	if (end > env->map_size)
		end = env->map_size;
	if (fallocate(env->fd, 0, (off_t)env->reserved, (off_t)(end - env->reserved)) != 0) {
		int e = errno;
		return sh_errf(errmsg, e == ENOSPC || e == EDQUOT ? SHOAL_E_FULL : SHOAL_E_IO,
		               "preallocating the LMDB data file to %llu MB: %s",
		               (unsigned long long)(end >> 20), strerror(e));
	}
	env->reserved = end;
	return SHOAL_OK;
}

int st_env_reserve(st_env *env, uint64_t bytes, char *errmsg)
{
	return env_reserve(env, bytes, errmsg);
}

/* The headroom every write transaction begins with. */
/* A number telling this env's lifetime from any other's (write versions:
 * st_txn_get_items): the clock, the process and the address, mixed. */
static uint64_t st_env_instance_new(const st_env *env)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)env;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x | 1;
}

static int txn_reserve(st_env *env, char *errmsg)
{
	return env_reserve(env, ENV_HEADROOM, errmsg);
}

int st_txn_reserve(st_txn *txn, uint64_t bytes, char *errmsg)
{
	if (!txn->env->writemap)
		return SHOAL_OK;
	txn->growth += bytes;
	return env_reserve(txn->env, ENV_HEADROOM + txn->growth, errmsg);
}

/* data.mdb and lock.mdb made by an earlier build with mode 0644: 0600. */
static void tighten(const char *dir)
{
	static const char *const files[] = {"data.mdb", "lock.mdb"};
	for (size_t i = 0; i < 2; i++) {
		char p[ST_PATH_MAX + 16];
		struct stat st;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, files[i]) < sizeof(p) &&
		    stat(p, &st) == 0 && (st.st_mode & 077) != 0)
			(void)chmod(p, st.st_mode & 0600);
	}
}

void st_env_set_stream_retention(st_env *env, int64_t ms)
{
	env->stream_retention_ms = ms > 0 ? ms : ST_STREAM_RETENTION_MS;
}

void st_env_set_ttl_change_interval(st_env *env, int64_t ms)
{
	env->ttl_change_interval_ms = ms >= 0 ? ms : ST_TTL_CHANGE_INTERVAL_MS;
}

int st_env_open(const char *path, const st_env_options *opts, st_env **out, char *errmsg)
{
	st_env_options defaults = {0};
	if (opts == NULL)
		opts = &defaults;
	*out = NULL;

	st_env *env = sh_calloc(1, sizeof(*env));
	if (env == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_env_open(%s): out of memory", path);
	env->page_bytes = opts->page_bytes != 0 ? opts->page_bytes : ST_MAX_PAGE_BYTES;
	env->nosync = opts->nosync;
	env->collection_limit =
	    opts->collection_limit != 0 ? opts->collection_limit : 10ull * 1024 * 1024 * 1024;
	env->stream_retention_ms = ST_STREAM_RETENTION_MS;
	env->ttl_change_interval_ms = ST_TTL_CHANGE_INTERVAL_MS;
	env->wver = sh_calloc(ST_WVER_SLOTS, sizeof(*env->wver));
	if (env->wver == NULL) {
		sh_free(env);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_env_open(%s): out of memory", path);
	}
	env->instance = st_env_instance_new(env);

	int code;
	if (opts->rebuildable) {
		if (!opts->nosync) {
			code = sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "st_env_open(%s): rebuildable needs nosync", path);
			goto err_after_alloc;
		}
		if ((size_t)snprintf(env->path, sizeof(env->path), "%s", path) >=
		    sizeof(env->path)) {
			code = sh_errf(errmsg, SHOAL_E_VALIDATION, "st_env_open: path too long");
			goto err_after_alloc;
		}
		env->rebuildable = true;
		code = st_env_trust_check(path, env->rebuilt, sizeof(env->rebuilt), errmsg);
		if (code != SHOAL_OK)
			goto err_after_alloc;
	}
	int rc = mdb_env_create(&env->env);
	if (rc != 0) {
		code = st_lmdb_err(rc, "mdb_env_create", errmsg);
		goto err_after_alloc;
	}
	rc = mdb_env_set_maxdbs(env->env, ENV_MAXDBS);
	if (rc != 0) {
		code = st_lmdb_err(rc, "mdb_env_set_maxdbs", errmsg);
		goto err_after_env;
	}
	rc = mdb_env_set_mapsize(env->env,
	                         opts->map_size != 0 ? opts->map_size : ENV_DEFAULT_MAP_SIZE);
	if (rc != 0) {
		code = st_lmdb_err(rc, "mdb_env_set_mapsize", errmsg);
		goto err_after_env;
	}
	env->map_size = opts->map_size != 0 ? opts->map_size : ENV_DEFAULT_MAP_SIZE;
	env->writemap = opts->nosync && can_fallocate(path);
	unsigned flags = MDB_NOTLS | MDB_NORDAHEAD | (opts->nosync ? MDB_NOSYNC : 0) |
	                 (env->writemap ? MDB_WRITEMAP : 0);
	/* 0600: the data is the owner's alone (files made earlier with looser
	 * modes are tightened below). */
	rc = mdb_env_open(env->env, path, flags, 0600);
	if (rc != 0) {
		char what[SH_ERRMSG_SIZE / 2];
		snprintf(what, sizeof(what), "mdb_env_open(%s)", path);
		code = st_lmdb_err(rc, what, errmsg);
		goto err_after_env;
	}
	tighten(path);
	if (env->writemap) {
		mdb_filehandle_t fd;
		rc = mdb_env_get_fd(env->env, &fd);
		if (rc != 0) {
			code = st_lmdb_err(rc, "mdb_env_get_fd", errmsg);
			goto err_after_env;
		}
		env->fd = fd;
		code = txn_reserve(env, errmsg);
		if (code != SHOAL_OK)
			goto err_after_env;
	}
	code = env_init_dbis(env, path, errmsg);
	if (code != SHOAL_OK)
		goto err_after_env;
	code = st_part_refresh(env, errmsg);
	if (code != SHOAL_OK)
		goto err_after_env;
	*out = env;
	return SHOAL_OK;

err_after_env:
	mdb_env_close(env->env);
err_after_alloc:
	sh_free(env->wver);
	sh_free(env);
	return code;
}

void st_env_close(st_env *env)
{
	if (env == NULL)
		return;
	/* A rebuildable environment closed after a successful flush is
	 * complete on disk whatever happens to the machine next. */
	char msg[SH_ERRMSG_SIZE];
	if (env->rebuildable && !env->rebuild_asked &&
	    (mdb_env_sync(env->env, 1) != 0 || st_env_trust_clean(env->path, msg) != SHOAL_OK))
		fprintf(stderr, "st_env_close(%s): not marked clean: it will be rebuilt at open\n",
		        env->path);
	mdb_env_close(env->env);
	sh_free(env->wver);
	sh_free(env);
}

int st_env_sync(st_env *env, char *errmsg)
{
	int rc = mdb_env_sync(env->env, 1);
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_env_sync", errmsg);
	return SHOAL_OK;
}

const char *st_env_rebuilt(const st_env *env)
{
	return env->rebuilt[0] != '\0' ? env->rebuilt : NULL;
}

uint64_t st_env_applied(st_env *env)
{
	MDB_txn *txn;
	if (mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn) != 0)
		return 0;
	uint64_t applied = 0;
	MDB_val k = {sizeof(KEY_APPLIED) - 1, (void *)KEY_APPLIED};
	MDB_val v;
	if (mdb_get(txn, env->meta, &k, &v) == 0 && v.mv_size == 8)
		applied = get_be64(v.mv_data);
	mdb_txn_abort(txn);
	return applied;
}

int st_meta_has_prefix(MDB_txn *txn, st_env *env, const uint8_t *prefix, size_t len, bool *any,
                       char *errmsg)
{
	*any = false;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	MDB_val k = {len, (void *)prefix}, v;
	mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (mrc == 0)
		*any = k.mv_size >= len && memcmp(k.mv_data, prefix, len) == 0;
	mdb_cursor_close(c);
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		return st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	return SHOAL_OK;
}

int st_delete_prefix(st_txn *txn, MDB_dbi dbi, const uint8_t *prefix, size_t plen, const char *what,
                     char *errmsg)
{
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, dbi, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, what, errmsg);
	int rc = SHOAL_OK;
	for (;;) {
		MDB_val k = {plen, (void *)prefix}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc == 0 && (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0))
			break;
		if (mrc == 0)
			mrc = mdb_cursor_del(c, 0);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, what, errmsg);
			break;
		}
	}
	mdb_cursor_close(c);
	return rc;
}

int st_txn_begin(st_env *env, st_txn **out, char *errmsg)
{
	*out = NULL;
	int code = txn_reserve(env, errmsg);
	if (code != SHOAL_OK)
		return code;
	st_txn *txn = sh_calloc(1, sizeof(*txn));
	if (txn == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "st_txn_begin: out of memory");
	int rc = mdb_txn_begin(env->env, NULL, 0, &txn->txn);
	if (rc != 0) {
		sh_free(txn);
		return st_lmdb_err(rc, "mdb_txn_begin", errmsg);
	}
	txn->env = env;
	txn->sticky = SHOAL_OK;
	txn->applied = 0;
	txn->growth = 0;
	txn->tables = NULL;
	sh_arena_init(&txn->arena);
	*out = txn;
	return SHOAL_OK;
}

void st_txn_set_applied(st_txn *txn, uint64_t index)
{
	txn->applied = index;
}

void st_txn_set_time(st_txn *txn, int64_t ms)
{
	txn->ts_ms = ms;
}

int st_txn_poison(st_txn *txn, int code, const char *errmsg)
{
	if (txn->sticky == SHOAL_OK) {
		txn->sticky = code;
		snprintf(txn->sticky_msg, sizeof(txn->sticky_msg), "%s",
		         errmsg != NULL && errmsg[0] != '\0' ? errmsg : shoal_strerror(code));
	}
	return txn->sticky;
}

static void txn_free(st_txn *txn)
{
	sh_arena_fini(&txn->arena);
	sh_free(txn);
}

void st_txn_abort(st_txn *txn)
{
	if (txn == NULL)
		return;
	mdb_txn_abort(txn->txn);
	txn_free(txn);
}

int st_txn_commit(st_txn *txn, char *errmsg)
{
	int code;
	if (txn->sticky != SHOAL_OK) {
		code = sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
		goto err_after_txn;
	}
	if ((code = st_txn_catalog_flush(txn, errmsg)) != SHOAL_OK)
		goto err_after_txn;
	if (txn->applied != 0) {
		/* Same LMDB transaction as the data: see the top of this file. */
		uint8_t buf[8];
		put_be64(buf, txn->applied);
		MDB_val k = {sizeof(KEY_APPLIED) - 1, (void *)KEY_APPLIED};
		MDB_val v = {sizeof(buf), buf};
		int rc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
		if (rc != 0) {
			code = st_lmdb_err(rc, "mdb_put(meta applied)", errmsg);
			goto err_after_txn;
		}
	}
	if (sh_fault_check(SH_FAULT_COMMIT)) {
		code = sh_errf(errmsg, SHOAL_E_IO, "mdb_txn_commit: injected fault");
		goto err_after_txn;
	}
	int rc = mdb_txn_commit(txn->txn);
	txn_free(txn); /* mdb_txn_commit frees the MDB_txn on success and failure */
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_txn_commit", errmsg);
	return SHOAL_OK;

err_after_txn:
	st_txn_abort(txn);
	return code;
}
