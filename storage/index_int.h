/*
 * index_int.h -- internals shared by the secondary-index files (private to
 * storage/).
 *
 * index_entry.c   projections and entries (key, value, placement) of an item,
 *                 st_index_entry_cmp, st_index_last_key
 * index_write.c   the write path's maintenance: LSI entries and the item
 *                 collection limit, GSI deltas into the outbox
 * outbox.c        the outbox (append, info, read, trim) and st_index_apply
 * index_meta.c    per-index state (backfill, entry counters), backfill steps,
 *                 st_index_progress_list
 * index_ddl.c     UpdateTable (group 0), activation, redefinition (data groups)
 * read_index.c    st_page_finish
 *
 * Everything the index machinery stores besides entries lives in the meta DBI
 * under binary keys that start with IX_META (0x01; the named meta keys are
 * ASCII letters, so the spaces never meet), all integers big-endian:
 *
 *   0x01 'L'                       -> u64 outbox last_seq (0/absent: none yet)
 *   0x01 'W'                       -> u64 outbox shipped watermark
 *   0x01 'O' | seq (8)             -> one delta (format in outbox.c)
 *   0x01 'A' | source group (4)    -> u64 last seq applied from that group
 *   0x01 'X' | table (4) | index (2) -> index state (format in index_meta.c)
 *   0x01 'C' | table (4) | pk digest (16) -> u64 item collection size (tables
 *                                     with LSIs: base items + LSI entries)
 *
 * Entries themselves live in the data DBI (keyenc.c), values in the item
 * codec (codec.c).
 */
#ifndef SHOAL_STORAGE_INDEX_INT_H
#define SHOAL_STORAGE_INDEX_INT_H

#include "catalog.h"
#include "index.h"

#define IX_META         0x01
#define IX_META_LAST    'L'
#define IX_META_SHIPPED 'W'
#define IX_META_OUTBOX  'O'
#define IX_META_APPLIED 'A'
#define IX_META_STATE   'X'
#define IX_META_COLL    'C'

/* Default item collection limit: 10 GB, as DynamoDB. */
#define IX_COLLECTION_LIMIT (10ull * 1024 * 1024 * 1024)

/* ------------------------------------------------------------------------ */
/* Entries (index_entry.c)                                                   */
/* ------------------------------------------------------------------------ */

typedef struct st_ix_entry {
	bool present; /* the item has the index's key attributes */
	st_key key;   /* LMDB key in the data DBI */
	uint8_t *val; /* the projected item, encoded (arena) */
	size_t val_len;
	uint64_t hash; /* GSI: st_index_hash; LSI: st_key_hash of the base pk */
	size_t size;   /* st_item_size of the projected item */
} st_ix_entry;

/* The projection of item in index x (ALL: item itself). */
int st_ix_project(const st_table_def *t, const st_index_def *x, const st_value *item, sh_arena *a,
                  const st_value **out);

/* The entry of item (NULL: none) in index x of table t.  Sparse: absent when
 * an index key attribute is missing or of another type.  SHOAL_E_NOMEM only. */
int st_ix_entry_of(const st_table_def *t, const st_index_def *x, const st_value *item, sh_arena *a,
                   st_ix_entry *out);

/* The entry key of a start key (table keys + index keys, checked) in index
 * x; shard is used for a GSI (the shard read). */
void st_ix_entry_key(const st_table_def *t, const st_index_def *x, uint32_t shard,
                     const st_value *ipk, const st_value *isk, const st_value *bpk,
                     const st_value *bsk, st_key *k);

/* ------------------------------------------------------------------------ */
/* Meta keys and state (index_meta.c, outbox.c)                              */
/* ------------------------------------------------------------------------ */

/* Per-index state of this group. */
typedef struct st_ix_state {
	bool backfill_done;
	uint64_t backfill_seq;
	uint64_t item_count; /* entries stored in this group */
	uint64_t size_bytes;
	uint16_t cursor_len; /* backfill cursor: last base key processed (0: none) */
	uint8_t cursor[ST_KEY_MAX];
} st_ix_state;

/* Reads the state (absent: backfill done, counters zero). */
int st_ix_state_get(MDB_txn *txn, st_env *env, uint32_t table, uint16_t index, st_ix_state *out,
                    char *errmsg);
int st_ix_state_put(st_txn *txn, uint32_t table, uint16_t index, const st_ix_state *s,
                    char *errmsg);
/* Adds to the entry counters of an index. */
int st_ix_state_count(st_txn *txn, uint32_t table, uint16_t index, int64_t items, int64_t bytes,
                      char *errmsg);
/* Deletes every meta key of a table (states, collection sizes). */
int st_ix_forget_table(st_txn *txn, uint32_t table, char *errmsg);
/* Deletes every data key of (table, index) and the index's state. */
int st_ix_drop_index(st_txn *txn, uint32_t table, uint16_t index, char *errmsg);

/* Reads / writes a u64 meta value (absent: 0). */
int st_ix_meta_get_u64(MDB_txn *txn, st_env *env, const uint8_t *key, size_t klen, uint64_t *out,
                       char *errmsg);
int st_ix_meta_put_u64(st_txn *txn, const uint8_t *key, size_t klen, uint64_t v, char *errmsg);

/* Appends one delta (seq assigned: last_seq + 1; ts_ms from the txn). */
int st_outbox_append(st_txn *txn, uint64_t hash, uint32_t table, uint16_t index, bool del,
                     const st_key *k, const uint8_t *val, size_t val_len, char *errmsg);

/* The outbox's last_seq as txn sees it. */
int st_outbox_last(st_txn *txn, uint64_t *out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Write path (index_write.c)                                                */
/* ------------------------------------------------------------------------ */

typedef struct st_ix_plan st_ix_plan;

/* Computes the index changes of replacing old_item by new_item (either may be
 * NULL) in table t, checking the item collection limit: SHOAL_E_COLLECTION_SIZE
 * (a client error; nothing written).  *plan is NULL when there is nothing to
 * do (a table with LSIs always gets one: it carries the collection's size).
 * Reads only. */
int st_ix_plan_write(st_txn *txn, const st_table_info *t, const st_value *old_item,
                     const st_value *new_item, sh_arena *a, st_ix_plan **plan, char *errmsg);
/* The index entry writes of a plan (NULL plan: none), for the write's
 * result; *writes lives in the plan's arena. */
void st_ix_plan_writes(const st_ix_plan *plan, st_index_write **writes, uint32_t *n);
/* The item collection of a plan, for ReturnItemCollectionMetrics: false
 * unless the table has LSIs; else the partition key attribute's name (the
 * plan's arena) and the collection's size in bytes once the plan is
 * applied. */
bool st_ix_plan_collection(const st_ix_plan *plan, const char **attr, uint64_t *size);
/* Writes a plan (environmental errors only).  The collection counter gets
 * the plan's delta on its current value (another write of the same
 * transaction may have changed it since planning); the plan's collection
 * size becomes the value written. */
int st_ix_plan_apply(st_txn *txn, st_ix_plan *plan, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Applying index entries (outbox.c; also the GSI space's moves, parts_gsi.c) */
/* ------------------------------------------------------------------------ */

/* Whether this group keeps the entries of index id of table table_id, whose
 * catalog record is t (NULL: none here).  A table this group has not been
 * told about yet (id >= next_table_id: its define may arrive after the
 * source group's) keeps its entries, as does an index id at or above the
 * table's next_index_id; a dropped table or a deleted (DELETING) index does
 * not.  LSIs are wanted: callers that mean GSIs only check `local`. */
bool st_ix_index_wanted(const st_table_info *t, uint32_t table_id, uint32_t next_table_id,
                        uint16_t id);

/* Per (table, index) changes of the entry counters, summed over a batch. */
typedef struct st_ix_count_acc {
	uint32_t table;
	uint16_t index;
	int64_t items, bytes;
} st_ix_count_acc;

/* The slot of (table, index) in acc[0 .. *n-1], appended if absent (acc
 * has room for one more). */
st_ix_count_acc *st_ix_count_slot(st_ix_count_acc *acc, uint32_t *n, uint32_t table,
                                  uint16_t index);
/* Adds the sums to the indexes' counters (st_ix_state_count). */
int st_ix_count_flush(st_txn *txn, const st_ix_count_acc *acc, uint32_t n, char *errmsg);

/* Writes one index entry as a delta says (upsert d->key = d->val, or delete
 * it), adding the change of entries and bytes to *acc.  Environmental
 * errors only (the delta is checked already). */
struct st_delta;
int st_ix_entry_apply(st_txn *txn, const struct st_delta *d, sh_arena *tmp, st_ix_count_acc *acc,
                      char *errmsg);

/* Every table record in the catalog, decoded (for lookups by id). */
int st_ix_tables(MDB_txn *txn, st_env *env, sh_arena *a, st_table_info **out, uint32_t *n,
                 char *errmsg);

#endif
