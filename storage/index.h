/*
 * index.h -- secondary indexes: placement of index entries, the outbox of
 * index deltas (change stream), applying shipped deltas, backfill, UpdateTable,
 * and the order of index entries.  Used by node/ (FSM, shipper) and router/
 * (placement, merge of write-sharded queries).  DESIGN.md, "Secondary indexes".
 *
 * The model
 * ---------
 * A table's indexes are LSIs (entries in the base item's own group, written
 * in the base write's LMDB transaction) and GSIs (entries in the group that
 * owns the *index partition*: the placement hash st_index_hash of (table,
 * index, write shard, GSI partition-key value), mapped to a partition and a
 * group exactly as a base item's st_key_hash is).
 *
 * Every write applied through st_put/st_update/st_delete/st_batch (and a
 * backfill step) that changes an item's entry in a GSI -- the entry appears,
 * disappears, moves (GSI key changed) or its projected attributes change --
 * appends deltas to the group's *outbox* in the same LMDB transaction: a
 * delete of the old entry and/or an upsert of the new one.  Deltas carry a
 * sequence number (1, 2, 3, ... per group, never reused), the index-partition
 * hash (so the shipper knows the target group), and the entry's LMDB key and
 * value, fully computed: the target stores them without knowing the schema.
 * Outbox contents are a deterministic function of the applied log, so every
 * replica of a group has the same outbox.  Writes that do not change an entry
 * (an unprojected attribute changed) append nothing.
 *
 * The source group's leader reads the outbox (st_outbox_read) after the
 * replicated watermark, ships deltas per target group, and when every target
 * has applied them, proposes an outbox trim (st_outbox_trim) through its own
 * log.  The target applies a shipped batch through ITS log with
 * st_index_apply, which skips deltas whose seq is <= the last seq it applied
 * from that source group (stored in the target's LMDB, same transaction), so
 * redelivery is harmless.
 *
 * Index entry keys (keyenc.c documents the bytes):
 *   GSI: table | index id | XXH3-128(table, index, shard, GSI pk) |
 *        enc(GSI sk) (absent without a GSI sort key) | 16-byte digest of the
 *        base item's key (table pk, table sk)
 *        -- bytes 6..13 are st_index_hash(...), so a hash range of index
 *        partitions is one contiguous key range, as for base items.
 *   LSI: table | index id | the base item's 16-byte pk digest (same as the
 *        base key's: bytes 6..13 are st_key_hash) | enc(LSI sk) | 16-byte
 *        digest of the base item's key
 * Entry values are the projected item in the item codec (codec.h): ALL: the
 * whole item; KEYS_ONLY: table keys + index keys; INCLUDE: those + the listed
 * NonKeyAttributes.  The order of entries of one index partition-key value is
 * (index sort key, then base-key digest): st_index_entry_cmp gives the same
 * order on two items so the router can merge write shards.
 */
#ifndef SHOAL_STORAGE_INDEX_H
#define SHOAL_STORAGE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "storage.h"

/* ------------------------------------------------------------------------ */
/* Placement                                                                 */
/* ------------------------------------------------------------------------ */

/* Placement hash of a GSI entry's index partition: the high 64 bits of the
 * 16-byte digest in the entry key (see above).  shard is 0 for an index with
 * one write shard. */
uint64_t st_index_hash(uint32_t table_id, uint16_t index_id, uint32_t shard,
                       const st_value *gsi_pk);

/* The write shard of a base item in an index with n >= 1 shards:
 * hash(base pk, base sk) mod n (0 when n == 1).  base_sk NULL for a table
 * without a sort key. */
uint32_t st_index_shard(uint32_t table_id, const st_value *base_pk, const st_value *base_sk,
                        uint32_t n);

/* Order of two items (each holding the table's and the index's key
 * attributes, as every projection does) in index x of table t: by index sort
 * key (st_value order; equal if the index has none), then by the base-key
 * digest.  <0, 0, >0.  Used to merge the pages of write shards. */
int st_index_entry_cmp(const st_table_def *t, const st_index_def *x, const st_value *a,
                       const st_value *b);

/* The router's half of a Query on a GSI with WriteShards > 1: it asks every
 * shard for up to Limit entries with no filter and ALL_PROJECTED_ATTRIBUTES,
 * merges them with st_index_entry_cmp and cuts the list at Limit; this
 * applies the request's FilterExpression, ProjectionExpression and Select
 * (COUNT) to those n evaluated items and fills out (items, count, scanned =
 * n; last_evaluated_key is left NULL: the router sets it).  Validates the
 * expressions as st_query does, with the same messages. */
int st_page_finish(const st_table_def *t, const st_query_req *req, const st_value *items,
                   uint32_t n, sh_arena *a, st_page *out, char *errmsg);

/* The LastEvaluatedKey of an index entry item (table keys + index keys), as
 * st_query returns it for index x.  Router: the key of the last merged item. */
int st_index_last_key(const st_table_def *t, const st_index_def *x, const st_value *item,
                      sh_arena *a, st_value **out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Time of the entry being applied                                           */
/* ------------------------------------------------------------------------ */

/* The proposer's wall clock (ms) of the Raft entry being applied: stamped
 * into every delta the transaction appends (propagation lag).  0 if unset. */
void st_txn_set_time(st_txn *txn, int64_t ms);

/* ------------------------------------------------------------------------ */
/* Outbox (source group)                                                     */
/* ------------------------------------------------------------------------ */

typedef struct st_delta {
	uint64_t seq;  /* per source group, from 1 */
	uint64_t hash; /* st_index_hash of the entry: the target's partition */
	uint32_t table_id;
	uint16_t index_id;
	bool del;           /* delete the entry (key only), else upsert */
	const uint8_t *key; /* the entry's LMDB key */
	size_t key_len;
	const uint8_t *val; /* the entry's value (upsert) */
	size_t val_len;
	int64_t ts_ms; /* st_txn_set_time of the write that appended it */
} st_delta;

typedef struct st_outbox_info {
	uint64_t last_seq;    /* seq of the newest delta ever appended (0: none) */
	uint64_t shipped;     /* replicated watermark: deltas <= it are trimmed */
	uint64_t depth;       /* deltas in the outbox (last_seq - shipped) */
	int64_t oldest_ts_ms; /* ts_ms of the oldest delta in the outbox, 0 if empty */
} st_outbox_info;

int st_outbox_get_info(st_env *env, st_outbox_info *out, char *errmsg);

/* The projected item an upsert delta writes (its index keys among its
 * attributes), decoded into arena a; SHOAL_E_NOT_FOUND for a delete.  Used
 * to name the hot keys of index partitions (node/capacity.c). */
int st_delta_item(const st_delta *d, sh_arena *a, st_value *item, char *errmsg);

/* Up to max_n deltas (and about max_bytes of keys and values; at least one)
 * with seq > after, in seq order, copied into a. */
int st_outbox_read(st_env *env, uint64_t after, uint32_t max_n, size_t max_bytes, sh_arena *a,
                   st_delta **out, uint32_t *n, char *errmsg);

/* In a write transaction (an OutboxTrim entry): sets the watermark to upto
 * (ignored if <= the current one; clamped to last_seq) and deletes the
 * deltas at or below it. */
int st_outbox_trim(st_txn *txn, uint64_t upto, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Applying shipped deltas (target group)                                    */
/* ------------------------------------------------------------------------ */

/* A range of the GSI space a batch was refused for (st_index_apply). */
typedef struct st_index_refusal {
	uint64_t lo, hi;   /* the range: its deltas are not this group's to apply */
	uint8_t state;     /* storage/parts.h: ST_PART_FENCED or ST_PART_AWAY */
	uint32_t to_group; /* where it moves or moved (0: not known here) */
} st_index_refusal;

/* Applies the deltas of one source group, in order, skipping every delta
 * with seq <= the last seq applied from source_group (recorded in the same
 * transaction) -- or, for a delta in a mark of the GSI space
 * (storage/parts.h, "The GSI space"), at or below the mark's watermark for
 * source_group, which it advances instead.  Deltas of an index this group's
 * catalog knows was deleted (index id below the table's next index id but
 * absent) are dropped.  Maintains per-index entry counts and sizes; logs
 * the deltas of a range moving out (OUT).  A batch holding a delta of a
 * range FENCED or AWAY here is refused whole: SHOAL_E_WRONG_GROUP, nothing
 * written, the first such range in *refused (may be NULL). */
int st_index_apply(st_txn *txn, uint32_t source_group, const st_delta *d, uint32_t n,
                   st_index_refusal *refused, char *errmsg);

/* The refusal st_index_apply would make of these deltas, as the committed
 * state says (a read transaction of its own; one branch when the group has
 * no range record): a leader checks before it proposes a batch that its
 * state machine would refuse.  The apply decides. */
int st_index_apply_check(st_env *env, const st_delta *d, uint32_t n, st_index_refusal *refused,
                         char *errmsg);

/* The last seq this group applied from source_group (0: none). */
uint64_t st_index_applied_seq(st_env *env, uint32_t source_group);

/* ------------------------------------------------------------------------ */
/* Backfill (source group)                                                   */
/* ------------------------------------------------------------------------ */

/* One step of the backfill of GSI index_id of table: reads up to max_items
 * base items after the replicated cursor, appends an upsert delta for each
 * item that has the index's keys, advances the cursor; *done when the table
 * is exhausted (then records the outbox's last_seq as the index's
 * backfill_seq).  Items of a range FENCED or AWAY here (storage/parts.h:
 * moving out, moved and being purged, copied in and not owned yet) are
 * passed over: they are the owner's to index (st_part_own restarts the
 * backfill of a GSI being created).  Deterministic: every replica appends
 * the same deltas.
 * A step for an index that is gone or already done is a no-op (*done true). */
int st_backfill_step(st_txn *txn, const char *table, uint16_t index_id, uint32_t max_items,
                     bool *done, char *errmsg);

/* What this group knows of each index of each table. */
typedef struct st_index_progress {
	const char *table;
	uint32_t table_id;
	const char *index;
	uint16_t index_id;
	bool local;
	uint32_t write_shards;  /* a GSI's, >= 1 */
	st_index_status status; /* as this group's catalog copy has it */
	bool backfill_done;     /* LSIs and indexes created with the table: true */
	uint64_t backfill_seq;  /* outbox last_seq when the backfill finished */
	uint64_t item_count;    /* entries of the index stored in this group */
	uint64_t size_bytes;    /* their st_item_size sum */
} st_index_progress;

int st_index_progress_list(st_env *env, sh_arena *a, st_index_progress **out, uint32_t *n,
                           char *errmsg);

/* ------------------------------------------------------------------------ */
/* UpdateTable (catalog)                                                     */
/* ------------------------------------------------------------------------ */

/* A change of capacity asked for by UpdateTable, of the table or of one GSI
 * (GlobalSecondaryIndexUpdates.Update).  OnDemandThroughput maximums: set_
 * false leaves it, -1 removes it, >= 1 sets it (the converter has checked
 * the range). */
typedef struct st_capacity_req {
	bool set_tp; /* ProvisionedThroughput given */
	uint64_t rcu, wcu;
	bool set_max_rcu, set_max_wcu;
	int64_t max_rcu, max_wcu;
} st_capacity_req;

typedef struct st_index_capacity_req {
	const char *name;
	st_capacity_req cap;
} st_index_capacity_req;

typedef struct st_table_update_req {
	const char *name;
	st_key_attr *attrs; /* AttributeDefinitions for new GSI keys (merged) */
	uint32_t n_attrs;
	st_index_def *create; /* GSIs to create (id 0: assigned; status CREATING);
	                       * tp as requested (0: not given) */
	uint32_t n_create;
	const char **drop; /* GSI names to delete */
	uint32_t n_drop;
	/* Capacity: BillingMode (set_billing false: unchanged), the table's
	 * ProvisionedThroughput / OnDemandThroughput, and GSI Updates. */
	bool set_billing;
	st_billing billing;
	st_capacity_req cap;
	st_index_capacity_req *update;
	uint32_t n_update;
	/* Metadata: DeletionProtectionEnabled and TableClass (set_ false:
	 * unchanged); TagResource's tags (added, or replacing the value of a
	 * key) and UntagResource's keys (removed; absent ones are no error). */
	bool set_deletion_protection;
	bool deletion_protection;
	bool set_table_class;
	st_table_class table_class;
	const st_tag *tag_set;
	uint32_t n_tag_set;
	const char *const *tag_remove;
	uint32_t n_tag_remove;
	/* StreamSpecification (set_stream false: unchanged): enable with a view
	 * type, or disable.  label_ms and changed_ms are set by st_table_update. */
	bool set_stream;
	st_stream_spec stream;
	/* UpdateTimeToLive (set_ttl): enable with attribute ttl_attr, or
	 * disable (ttl_attr: the request's AttributeName, which must be the
	 * enabled one).  DynamoDB's refusals: enabling what is enabled,
	 * disabling what is disabled. */
	bool set_ttl;
	bool ttl_enabled;
	const char *ttl_attr;
} st_table_update_req;

/* Group 0: validates and applies an UpdateTable with DynamoDB's rules and
 * messages (ResourceNotFound, a GSI that exists / does not exist, 20 GSIs,
 * key attributes defined, one index change per call, billing mode and
 * throughput: st_catalog_update_capacity).  New GSIs get the table's next
 * index id (ids are never reused) and status CREATING.  The time of the
 * capacity changes is the transaction's replicated time (st_txn_set_time:
 * the proposer's clock), so every replica stores the same. */
int st_table_update(st_txn *txn, const st_table_update_req *req, char *errmsg);

/* The capacity part of UpdateTable, without storage: d (old with the index
 * changes of req applied, indexes and strings in a or shared with old) gets
 * req's billing mode and throughput at now_ms (ms since the epoch), with
 * DynamoDB's rules: a switch to PROVISIONED needs ProvisionedThroughput for
 * the table and every GSI; a switch to PAY_PER_REQUEST clears them and sets
 * LastUpdateToPayPerRequestDateTime; equal values are "will not change";
 * throughput on a PAY_PER_REQUEST table and OnDemandThroughput on a
 * PROVISIONED one are refused; decreases are limited per UTC day (4, then
 * one an hour: SHOAL_E_LIMIT_EXCEEDED).  *changed: whether anything of the
 * capacity changed (capacity_ms is then now_ms, kept increasing).
 * SHOAL_E_VALIDATION, SHOAL_E_NOT_FOUND, SHOAL_E_LIMIT_EXCEEDED. */
int st_catalog_update_capacity(const st_table_def *old, const st_table_update_req *req,
                               int64_t now_ms, st_table_def *d, bool *changed, char *errmsg);

/* NumberOfDecreasesToday as DescribeTable reports it at now_ms: the count if
 * it is of now's UTC day, else 0. */
uint32_t st_decreases_today(uint32_t count, int64_t day, int64_t now_ms);

/* Group 0: marks GSI `index` ACTIVE (no-op if it already is; ResourceNotFound
 * if the table or index is gone). */
int st_index_activate(st_txn *txn, const char *table, const char *index, char *errmsg);

/* Data groups: replaces the definition of an existing table with def, which
 * has the same id and created_ms (an UpdateTable or activation forwarded by
 * group 0; index ids fixed by group 0).  Indexes that disappeared have their
 * entries deleted from this group; new GSIs start their backfill here
 * (st_backfill_step).  SHOAL_E_NOT_FOUND if the table is absent,
 * SHOAL_E_IN_USE if the id or created_ms differ. */
int st_table_redefine(st_txn *txn, const st_table_def *def, char *errmsg);

#endif
