/*
 * engine.h -- internals shared by the engine's files (private to storage/).
 *
 * env.c      st_env_*, st_txn_*, LMDB error mapping
 * catalog.c  st_table_* (create, delete, describe, list), st_table_load,
 *            per-table counters; catalog_check.c validates definitions and
 *            catalog_codec.c encodes them (private header catalog.h)
 * write.c    st_put, st_update, st_delete and their one-shot forms
 * read.c     st_get_item, st_query, st_scan (ordered iteration, pagination)
 * keycheck.c st_key_check / st_key_extract: a key or item against a key schema
 * item.c     st_item_read: one stored item by its key
 *
 * LMDB layout (one environment per storage group):
 *   DBI "meta"     fixed keys: "format" -> u32 version, "applied" -> u64 Raft
 *                  index (big-endian), "next_table_id" -> u32; binary keys
 *                  starting with 0x01: the outbox and index state
 *                  (index_int.h), 0x02 transactions (txn.c), 0x03 stream
 *                  records (stream.h), 0x05 partition moves (parts.h)
 *   DBI "catalog"  table name -> encoded table definition and counters
 *                  (format at the top of catalog_codec.c)
 *   DBI "data"     items and index entries, keys as in keyenc.h, values as
 *                  in codec.h
 */
#ifndef SHOAL_STORAGE_ENGINE_H
#define SHOAL_STORAGE_ENGINE_H

#include <lmdb.h>
#include <stdatomic.h>

#include "expr.h"
#include "keyenc.h"
#include "storage.h"

#define ST_PATH_MAX 1024

/* The on-disk format version, meta's "format" (env.c checks it at open,
 * snapshot.c when a load commits). */
#define ST_ENV_FORMAT 1u

struct st_env {
	MDB_env *env;
	MDB_dbi meta;
	MDB_dbi catalog;
	MDB_dbi data;
	uint32_t page_bytes; /* Query/Scan page limit */
	bool nosync;
	uint64_t collection_limit;      /* item collection limit of tables with LSIs */
	int64_t stream_retention_ms;    /* stream records older than this are trimmed */
	int64_t ttl_change_interval_ms; /* st_env_set_ttl_change_interval */
	/* MDB_WRITEMAP (with nosync, where the file system can preallocate):
	 * the data file's blocks are preallocated ahead of LMDB's last page
	 * (env.c, "Writable map"), `reserved` bytes from its start so far. */
	bool writemap;
	int fd;
	uint64_t reserved;
	uint64_t map_size;
	/* Write versions (txn.c, st_txn_get_items): per slot of item-key
	 * digests, the value of `wseq` at the last write applied to a key of
	 * that slot.  In memory only, valid for this env's lifetime (`instance`
	 * tells two lifetimes apart); a slot shared by several keys only makes
	 * a change look likelier than it is. */
	_Atomic uint64_t *wver;
	_Atomic uint64_t wseq;
	uint64_t instance;
	/* Partition moves (parts.c): whether the meta DBI may hold a range
	 * record (0x05 'R').  False means none exists, so the request path's
	 * checks are one load and one branch.  Set to the truth at open and
	 * after a snapshot load (st_part_refresh), set to true when a write
	 * transaction writes a record (even one that then aborts: true only
	 * costs a lookup); never cleared otherwise. */
	_Atomic bool parts_any;
	/* Rebuildable environments (env_trust.c): the directory, why the data
	 * found at open was not trusted ("" if it was), and whether a rebuild
	 * was asked for since. */
	bool rebuildable;
	bool rebuild_asked;
	char path[ST_PATH_MAX];
	char rebuilt[256];
};

/* env_trust.c: the trust decision at open (empties the directory's LMDB
 * files when they cannot be trusted, the reason in `why`; then marks the
 * environment open), and the mark written after a clean close. */
int st_env_trust_check(const char *dir, char *why, size_t why_n, char *errmsg);
int st_env_trust_clean(const char *dir, char *errmsg);

#define ST_WVER_SLOTS (1u << 14)

/* txn.c: a write of the item of key k was applied (its slot's version
 * moves on). */
void st_wver_bump(st_env *env, const struct st_key *k);

struct st_txn {
	st_env *env;
	MDB_txn *txn;
	int sticky; /* first environmental error, or SHOAL_OK */
	char sticky_msg[SH_ERRMSG_SIZE];
	uint64_t applied; /* set by st_txn_set_applied, 0 if none */
	int64_t ts_ms;    /* set by st_txn_set_time: stamped into outbox deltas */
	sh_arena arena;   /* scratch memory that lives as long as the txn */
	/* catalog.c: table definitions loaded by this transaction's writes, and
	 * the counter changes not yet written to their records (both in arena;
	 * see st_txn_table and st_txn_catalog_flush). */
	struct st_txn_table *tables;
	uint64_t growth; /* bytes its writes reserved (st_txn_reserve) */
	/* Partition moves (parts.c): the writes of st_part_ingest and
	 * st_part_purge, which go through the write path (st_plan_raw,
	 * st_plan_apply) for the item, its LSI entries and the counters, but
	 * append no GSI outbox delta, no stream record, no move-log record
	 * and skip the range fence check.  Set only for the duration of those
	 * calls. */
	bool part_raw;
};

/* What writing one key may add besides its bytes (the pages it touches and
 * splits), for st_txn_reserve estimates. */
#define ST_RESERVE_PER_KEY (16u << 10)

/* Writable map (env.c): makes sure `bytes` more, on top of what this
 * transaction reserved already, can be written without touching
 * unallocated disk.  Call before writing.  SHOAL_E_FULL when the disk
 * cannot hold it (the caller has written nothing of its operation yet); a
 * no-op without the writable map. */
int st_txn_reserve(st_txn *txn, uint64_t bytes, char *errmsg);

/* Converts an LMDB return code into a Shoal code (MDB_MAP_FULL -> SHOAL_E_FULL,
 * ENOMEM -> SHOAL_E_NOMEM, anything else -> SHOAL_E_IO) with a message naming
 * the operation: "mdb_put(data): MDB_MAP_FULL: Environment mapsize limit reached". */
int st_lmdb_err(int rc, const char *what, char *errmsg);

/* Marks a transaction poisoned by an environmental error (see storage.h) and
 * returns the code; later calls on txn return it too. */
int st_txn_poison(st_txn *txn, int code, const char *errmsg);

/* Loads a table's definition and counters by name, in any LMDB transaction
 * (read or write).  SHOAL_E_NOT_FOUND: "Requested resource not found: Table:
 * <name> not found". Strings and arrays are allocated in a. */
int st_table_load(MDB_txn *txn, st_env *env, const char *name, sh_arena *a, st_table_info *out,
                  char *errmsg);

/*
 * st_table_load for the writes of a transaction: a table's definition is
 * read and decoded once per transaction (a Raft entry's writes usually all
 * go to one table), into txn's arena, valid until the transaction ends or
 * the catalog changes in it.  *out's counters are those of the last flush.
 */
int st_txn_table(st_txn *txn, const char *name, st_table_info *out, char *errmsg);

/* Adds delta items and delta bytes to a table's counters, in the write txn.
 * The change is kept in the transaction and written to the table's record
 * once, by st_txn_catalog_flush. */
int st_table_count(st_txn *txn, const char *name, int64_t items, int64_t bytes, char *errmsg);

/* Writes the counter changes kept by st_table_count and forgets the tables
 * st_txn_table loaded.  Called before anything that reads counters or
 * writes the catalog in a write transaction, and by st_txn_commit. */
int st_txn_catalog_flush(st_txn *txn, char *errmsg);

/* Finds an index by name; NULL if the table has none of that name. */
const st_index_def *st_table_index(const st_table_def *t, const char *index_name);

/*
 * Checks a key map (GetItem/UpdateItem/DeleteItem Key, ExclusiveStartKey) or
 * an item (PutItem Item) against a key schema, with DynamoDB's messages:
 *  - ST_KEYCHECK_KEY: exactly the key attributes must be present
 *    ("The provided key element does not match the schema");
 *  - ST_KEYCHECK_ITEM: the key attributes must be present ("One or more
 *    parameter values were invalid: Missing the key PK in the item"), other
 *    attributes are allowed;
 * types must match: in ST_KEYCHECK_ITEM mode "One or more parameter values
 * were invalid: Type mismatch for key PK expected: S actual: N", in
 * ST_KEYCHECK_KEY mode the schema message above; in both, key strings and binaries must
 * not be empty ("One or more parameter values are not valid. The
 * AttributeValue for a key attribute cannot contain an empty string value.
 * Key: PK"), and sizes must be within ST_MAX_PK_SIZE / ST_MAX_SK_SIZE.
 * On success *pk and *sk point at the key values inside `key` (*sk NULL for a
 * table without a sort key).
 */
typedef enum st_keycheck_mode {
	ST_KEYCHECK_KEY = 0,
	ST_KEYCHECK_ITEM,
} st_keycheck_mode;

int st_key_check(const st_key_schema *ks, const st_value *key, st_keycheck_mode mode,
                 const st_value **pk, const st_value **sk, char *errmsg);

/* Builds the ST_M holding just the key attributes of item (values shared). */
int st_key_extract(sh_arena *a, const st_key_schema *ks, const st_value *item, st_value **out);

/* Copies and normalises a request's ExpressionAttributeNames / Values into a
 * (value errors get DynamoDB's "ExpressionAttributeValues contains invalid
 * value: ... for key :v" form) and initialises ctx over the copies; shared by
 * every read and write (defined in read_get.c). */
int st_expr_attrs_prepare(st_expr_ctx *ctx, sh_arena *a, const st_expr_attrs *attrs, char *errmsg);

/* Reads and decodes the item stored under key k in the data DBI; *item is
 * NULL when there is none.  Memory comes from a. */
/* write.c: a write planned (checked, its new image and index changes
 * computed), not yet applied; st_plan_apply applies it in the same
 * transaction as long as nothing else changed its item meanwhile.
 * st_put / st_update / st_delete are plan + apply; a transaction plans all
 * its actions first (txn.c).  Results as st_put's; memory from a. */
typedef struct st_write_plan st_write_plan;
int st_plan_put(st_txn *txn, const st_put_req *req, sh_arena *a, st_write_plan **out,
                st_write_result *res, char *errmsg);
int st_plan_update(st_txn *txn, const st_update_req *req, sh_arena *a, st_write_plan **out,
                   st_write_result *res, char *errmsg);
int st_plan_delete(st_txn *txn, const st_delete_req *req, sh_arena *a, st_write_plan **out,
                   st_write_result *res, char *errmsg);
int st_plan_check(st_txn *txn, const st_check_req *req, sh_arena *a, st_write_plan **out,
                  st_write_result *res, char *errmsg);
int st_plan_apply(st_txn *txn, const st_write_plan *p, sh_arena *a, st_write_result *res,
                  char *errmsg);
const struct st_key *st_plan_key(const st_write_plan *p);
/* The table id and placement hash of p's item. */
void st_plan_place(const st_write_plan *p, uint32_t *table, uint64_t *hash);
/* What applying p would report in res: sizes and index writes (a prepared
 * transaction's capacity, before it applies). */
void st_plan_sizes(const st_write_plan *p, st_write_result *res);
const char *st_plan_table(const st_write_plan *p);

/* A write of the item of key k to new_item (NULL: delete it) in table t,
 * planned for a partition move (txn->part_raw set by the caller): no
 * request, no condition, no lock check, no fence check; the old image is
 * read and the LSI changes planned as for any write.  Apply with
 * st_plan_apply. */
int st_plan_raw(st_txn *txn, const st_table_info *t, const st_key *k, st_value *new_item,
                sh_arena *a, st_write_plan **out, char *errmsg);

/* txn.c: SHOAL_E_TXN_CONFLICT when a prepared transaction holds a lock on
 * the item of key k. */
int st_lock_check(st_txn *txn, const struct st_key *k, char *errmsg);

int st_item_read(MDB_txn *txn, st_env *env, const st_key *k, sh_arena *a, st_value **item,
                 char *errmsg);

/* txn.c: whether any prepared transaction ('P' record) exists. */
int st_txn_prepared_any(MDB_txn *txn, st_env *env, bool *any, char *errmsg);
/* The ids of the transactions prepared in txn's view (16 bytes each, in a). */
int st_txn_prepared_ids(MDB_txn *txn, st_env *env, sh_arena *a, uint8_t **ids, uint32_t *n,
                        char *errmsg);
/* Whether transaction id is prepared in txn's view. */
int st_txn_is_prepared(MDB_txn *txn, st_env *env, const uint8_t id[16], bool *prepared,
                       char *errmsg);

/* env.c: deletes every key of dbi that starts with prefix, in txn (an
 * LMDB error is returned with `what`; the caller poisons). */
int st_delete_prefix(st_txn *txn, MDB_dbi dbi, const uint8_t *prefix, size_t plen, const char *what,
                     char *errmsg);
/* env.c: whether the meta DBI has a key starting with prefix. */
int st_meta_has_prefix(MDB_txn *txn, st_env *env, const uint8_t *prefix, size_t len, bool *any,
                       char *errmsg);

/* parts.c, the read path's fence check: SHOAL_E_WRONG_GROUP when a hash of
 * [lo, hi] of table's base items lies in a FENCED or AWAY range, as txn sees
 * it (a read transaction or a write transaction's MDB_txn).  One branch when
 * env->parts_any is false. */
int st_part_check_range(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                        char *errmsg);
/* parts.c, the read path's check of a GSI Query or Scan: SHOAL_E_WRONG_GROUP
 * when hashes [lo, hi] of the GSI space overlap a range AWAY here (moved, or
 * copied in and not owned yet), or FENCED and handed over (its purge may
 * have begun). */
int st_part_check_gsi_read(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, char *errmsg);
/* parts.c: sets env->parts_any from the committed meta DBI (open, snapshot
 * load). */
int st_part_refresh(st_env *env, char *errmsg);

#endif
