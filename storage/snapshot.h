/*
 * snapshot.h -- whole-environment access for the replicated state machine
 * (prefix st_).  An addition to the storage contract (storage.h), used only by
 * node/fsm*.c: everything here works on the environment as a whole, below the
 * level of tables and items, so that the state machine can take and install
 * Raft snapshots without reaching into storage/'s private engine.h.
 *
 *   views   st_view_*: a consistent, read-only view of the whole environment
 *           (one LMDB read transaction) whose databases are walked in key
 *           order.  The environment is opened with MDB_NOTLS, so a view may
 *           be begun on one thread and walked on another (raft's snapshot
 *           worker), as long as one thread at a time uses it.  Writers are
 *           not blocked by a view; a long-lived view keeps the pages it sees
 *           from being reused, so the file may grow while it is open.
 *   loads   st_load_*: replaces the whole content of the environment in one
 *           write transaction (snapshot install): all-or-nothing.
 *   reads   st_txn_table_describe: a table as an open write transaction sees
 *           it (st_table_describe sees only committed state).
 *   scrub   st_txn_scrub: a checksum of a range of the whole environment as
 *           an open write transaction sees it (the replica scrub,
 *           node/scrub.c; format at the top of storage/scrub.c).
 *
 * The databases are named by st_dbi; their contents are opaque here (formats
 * at the top of storage/env.c, catalog_codec.c, keyenc.c, codec.c).  A view or a
 * load copies nothing it does not have to: the key and value pointers passed
 * to an st_view_fn point into LMDB's map and are valid only during the call.
 *
 * Errors: codes from common/errors.h with a message in errmsg (SH_ERRMSG_SIZE
 * bytes, may be NULL); LMDB failures become SHOAL_E_IO, SHOAL_E_FULL or
 * SHOAL_E_NOMEM.
 */
#ifndef SHOAL_STORAGE_SNAPSHOT_H
#define SHOAL_STORAGE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "storage.h"

/* The environment's databases, in the order snapshots carry them. */
typedef enum st_dbi { ST_DBI_CATALOG = 0, ST_DBI_META, ST_DBI_DATA, ST_DBI__COUNT } st_dbi;

/* "catalog", "meta", "data". */
const char *st_dbi_name(st_dbi dbi);

/* ------------------------------------------------------------------------ */
/* Views                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct st_view st_view;

/* Opens a read transaction on env. *out is owned by the caller until
 * st_view_end; env must outlive it. */
int st_view_begin(st_env *env, st_view **out, char *errmsg);
/* The applied Raft index as the view sees it (0 if none). */
uint64_t st_view_applied(const st_view *v);
/* The number of (key, value) pairs of a database in the view. */
int st_view_count(st_view *v, st_dbi dbi, uint64_t *n, char *errmsg);

/* Called for every pair in key order; key and value are valid during the
 * call only.  A non-zero return (a code from errors.h, message in errmsg)
 * stops the walk, and st_view_foreach returns it. */
typedef int (*st_view_fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                          char *errmsg);
int st_view_foreach(st_view *v, st_dbi dbi, st_view_fn fn, void *arg, char *errmsg);
/* Ends the read transaction and frees v (NULL is a no-op). */
void st_view_end(st_view *v);

/* ------------------------------------------------------------------------ */
/* Loads                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct st_load st_load;

/* Begins a write transaction and empties every database in it (nothing is
 * visible until st_load_commit). */
int st_load_begin(st_env *env, st_load **out, char *errmsg);
/* Adds a pair.  Keys of one database must come in strictly ascending
 * (memcmp) order: a key out of order is SHOAL_E_SERIALIZATION.  On any
 * error the load is poisoned: later calls fail and commit aborts. */
int st_load_put(st_load *l, st_dbi dbi, const void *key, size_t klen, const void *val, size_t vlen,
                char *errmsg);
/* Commits, then flushes the environment to disk (st_env_sync).  Frees l in
 * every case; on failure nothing of the load is visible.  SHOAL_E_SERIALIZATION
 * when the loaded meta does not hold this build's "format".  The SH_FAULT_COMMIT
 * fault point guards it, as it guards st_txn_commit. */
int st_load_commit(st_load *l, char *errmsg);
/* Abandons the load (NULL is a no-op): the environment is unchanged. */
void st_load_abort(st_load *l);

/* ------------------------------------------------------------------------ */
/* Reads inside a write transaction                                          */
/* ------------------------------------------------------------------------ */

/* st_table_describe as txn sees it, uncommitted changes included.  Memory
 * from a.  SHOAL_E_NOT_FOUND ("Requested resource not found: Table: <name>
 * not found") when there is no such table. */
int st_txn_table_describe(st_txn *txn, const char *name, sh_arena *a, st_table_info *out,
                          char *errmsg);

/* ------------------------------------------------------------------------ */
/* Scrub (scrub.c)                                                           */
/* ------------------------------------------------------------------------ */

/* The result of st_txn_scrub.  A scrub key is one byte, the st_dbi, then the
 * LMDB key; the key space is catalog, then meta, then data, each in LMDB
 * order. */
typedef struct st_scrub {
	uint32_t count; /* pairs hashed */
	uint64_t hash;  /* XXH64 over them (format at the top of scrub.c) */
	/* The first scrub key after the range (in the arena), where the next
	 * range starts; end_len 0 when the range ran to the end of the key
	 * space (the next range starts at the beginning again). */
	const uint8_t *end;
	size_t end_len;
} st_scrub;

/* Hashes up to max_keys (>= 1) pairs from scrub key `start` (start_len 0:
 * the beginning) on, as txn sees them (its uncommitted writes included;
 * meta's "applied" key, different at every entry, is left out).  Writes
 * nothing, but flushes txn's pending catalog counters first
 * (st_txn_catalog_flush), so that every replica hashes the same bytes.
 * out->end is allocated in a. */
int st_txn_scrub(st_txn *txn, const void *start, size_t start_len, uint32_t max_keys, sh_arena *a,
                 st_scrub *out, char *errmsg);

#endif
