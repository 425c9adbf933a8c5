/*
 * stream.h -- DynamoDB Streams in the storage engine: the per-group stream
 * log of a table's changes (prefix st_stream_).  Used by storage/write.c (the
 * append), node/ (GetShardIterator, GetRecords, DescribeStream) and tests.
 *
 * The design
 * ----------
 * A table with an enabled stream (st_table_def.stream) gets one stream
 * record per committed change of one of its items: the base write that
 * st_plan_apply applies (PutItem, UpdateItem, DeleteItem, BatchWriteItem,
 * a transaction's actions; later TTL deletions) appends it in the SAME LMDB
 * transaction as the item, so the log is part of the replicated state: a
 * deterministic function of the applied Raft log (the time stamped is the
 * entry's proposer time, st_txn_set_time, as the outbox's), identical on
 * every replica, included in Raft snapshots and in the replica scrub's
 * checksums (both cover the whole meta DBI).  Any replica can serve reads.
 *
 * Not the outbox: the outbox (outbox.c) is trimmed as soon as its deltas
 * are shipped and holds index entries, not item images; a stream keeps
 * whole records for a retention period and is read by clients at their own
 * pace.  The two share only the idea (an append in the write's transaction).
 *
 * One record per change: a write that changes nothing (an UpdateItem or
 * PutItem whose new image equals the old one, a DeleteItem of an absent
 * item) appends nothing -- DynamoDB's documented behaviour ("If you perform
 * a PutItem or UpdateItem operation that does not change any data in an
 * item, DynamoDB Streams does not write a stream record for that
 * operation").  INSERT: no old image; MODIFY: both; REMOVE: no new image.
 *
 * Sequence numbers are per (group, table): 1, 2, 3, ... never reused, in
 * apply order, hence in per-item order (one item lives in one group).  The
 * records of a group's log are those of the stream's label (a table
 * re-enabled later gets a new stream whose records carry another label).
 *
 * Shards (stream_shards.c).  A shard is one hash range [lo, hi] of the table
 * held by this group over a span [start, end) of this group's log: its
 * records are the log's records with seq in the span and hash in the range
 * (st_stream_read_shard).  A group holding a static partition of the table
 * has its static shard {that range, start 0, open} without any record of it
 * (the caller says whether it holds one: has_static).  Partitions move
 * between groups (parts.h), and DynamoDB's model for it is the split: the
 * shard closes and child shards name it as their parent.  So when a range
 * leaves (the source's fence) the open shard holding it closes and what is
 * left of its range opens again as new shards, children of the closed one
 * (st_stream_shard_leave); when a range arrives (the target's own, or an
 * aborted fence on the source) it opens as a new shard whose parent is the
 * shard that range last closed in, in whichever group (st_stream_shard_arrive).
 * Each change reserves a seq of the table's counter, which no record gets:
 * span bounds are then unique and strictly increasing even with no record
 * between two changes, so (lo, start) names a shard in its group for good.
 * A closed shard's record goes when its whole span is trimmed (the static
 * shard's excepted: without it the static shard would be open again).
 *
 * Retention: each append first deletes up to ST_STREAM_TRIM_PER_APPEND
 * records of the same table older than (entry time - retention) from the
 * head of its log -- deterministic, since both come from the log and the
 * cluster file -- and remembers the highest seq trimmed, so a reader
 * positioned before it gets TrimmedDataAccessException.  A log that is no
 * longer written is trimmed too: about once a second the group's leader
 * checks its oldest record (st_stream_oldest) and, when it is past the
 * retention, proposes a stream_trim entry whose apply runs
 * st_stream_trim_expired with that entry's time on every replica.
 *
 * DeleteTable (st_table_delete, in group 0 and in every data group) of a
 * table that has or had a stream keeps its log and writes a 'D' record: the
 * table's definition and the deletion time.  Its streams stay readable
 * (DISABLED) for the retention after the deletion, as DynamoDB's do
 * (st_stream_dropped_find, st_stream_dropped_list); its records are trimmed
 * by age like any; the stream_trim that finds the 'D' record older than
 * the retention and the log empty forgets the table's counters and the
 * record.  Table ids are never reused (group 0's counter), so a kept log
 * never meets a new table's.
 *
 * Layout in the meta DBI under prefix ST_STREAM_META (0x03; the index
 * machinery uses 0x01, transactions 0x02), integers big-endian:
 *
 *   0x03 'N' | table (4)            -> u64 last seq given to a record
 *   0x03 'H' | table (4)            -> u64 highest seq trimmed (0: none)
 *   0x03 'D' | table (4)            -> a deleted table whose stream is kept:
 *                                      8 deletion time (i64, the entry's),
 *                                      2 name length, the name, then its
 *                                      catalog record as it was (catalog.h)
 *   0x03 'F' | table (4) | label (8) -> u64 first seq given to a record of the
 *                                      stream of that label (written by its
 *                                      first append; st_stream_bounds_get)
 *   0x03 'S' | table (4) | lo (8) | start (8)
 *                                   -> a shard of this group (st_shard):
 *                                      hi (8) | end (8) | has_parent (1) |
 *                                      parent_group (4) | parent_lo (8) |
 *                                      parent_start (8)
 *   0x03 'R' | table (4) | seq (8)  -> one record:
 *
 *   offset  size  field
 *   0       1     record version, 1
 *   1       1     event: 1 INSERT, 2 MODIFY, 3 REMOVE; bit 7 (0x80) with
 *                 REMOVE: a deletion by the Time to Live service
 *   2       1     StreamViewType (st_stream_view, 1..4)
 *   3       8     ts_ms (i64): st_txn_set_time of the write
 *   11      8     label_ms (i64): the stream it belongs to
 *   19      8     placement hash of the item (its partition)
 *   27      4     SizeBytes (u32)
 *   31      4     K: length of the keys (item codec), then K bytes
 *   ..      4     O: length of the old image (0: none), then O bytes
 *   ..      4     W: length of the new image (0: none), then W bytes
 *   end           the record ends exactly here
 *
 * Memory: results live in the caller's arena.
 */
#ifndef SHOAL_STORAGE_STREAM_H
#define SHOAL_STORAGE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "storage.h"

/* Retention when none is configured: DynamoDB's 24 hours. */
#define ST_STREAM_RETENTION_MS (24ll * 3600 * 1000)
/* Old records an append deletes at most (more than one, so that the log
 * shrinks when writes slow down). */
#define ST_STREAM_TRIM_PER_APPEND 4
/* Old records a stream_trim entry deletes at most (over all tables). */
#define ST_STREAM_TRIM_PER_ENTRY 4096

typedef enum st_stream_event {
	ST_EV_INSERT = 1,
	ST_EV_MODIFY = 2,
	ST_EV_REMOVE = 3,
} st_stream_event;

typedef struct st_stream_rec {
	uint64_t seq;
	st_stream_event event;
	st_stream_view view;
	int64_t ts_ms;
	int64_t label_ms;
	uint64_t hash;
	uint32_t size_bytes;
	st_value keys;       /* ST_M: the key attributes */
	st_value *old_image; /* NULL: none (INSERT, or not in the view) */
	st_value *new_image; /* NULL: none (REMOVE, or not in the view) */
	bool by_ttl;         /* REMOVE by Time to Live (userIdentity: the TTL service) */
} st_stream_rec;

struct st_key;

/* The write path (write.c): the record of a change of the item under key k
 * of table t (old NULL: INSERT; new NULL: REMOVE; by_ttl: a REMOVE by the
 * Time to Live service), when t has an enabled stream and the change changed
 * something; then trims.  Environmental errors only. */
int st_stream_append(st_txn *txn, const st_table_def *t, const struct st_key *k,
                     const st_value *old_item, const st_value *new_item, bool by_ttl, sh_arena *a,
                     char *errmsg);

/* Deletes up to max records of table from the head of its log whose time is
 * before before_ms; *removed says how many.  (st_stream_append calls it.) */
int st_stream_trim(st_txn *txn, uint32_t table, int64_t before_ms, uint32_t max, uint32_t *removed,
                   char *errmsg);

/* The time of the oldest record of any table's log in env (*any false:
 * no records): whether a stream_trim is due (node/txn_recover.c). */
int st_stream_oldest(st_env *env, int64_t *ts_ms, bool *any, char *errmsg);
/* Whether a record written at ts_ms is past env's retention at now_ms. */
bool st_stream_expired(const st_env *env, int64_t ts_ms, int64_t now_ms);
/* The apply of stream_trim: up to max records of every table's log older
 * than txn's time minus the retention go (st_stream_trim per table). */
int st_stream_trim_expired(st_txn *txn, uint32_t max, uint32_t *removed, char *errmsg);

/* DeleteTable: the table's whole log and its counters go, in txn. */
int st_stream_forget_table(st_txn *txn, uint32_t table, char *errmsg);
/* DeleteTable of table `name` (id, its catalog record rec, len bytes): a
 * table that has or had a stream keeps it (*kept true: the 'D' record is
 * written and the log stays), else nothing is written. */
int st_stream_table_dropped(st_txn *txn, const char *name, uint32_t id, const uint8_t *rec,
                            size_t len, bool *kept, char *errmsg);
/* The deleted table `name` that has a stream of label_ms still within the
 * retention at now_ms: its definition (stream disabled) in a, and the
 * deletion time; SHOAL_E_NOT_FOUND if none. */
int st_stream_dropped_find(st_env *env, const char *name, int64_t label_ms, int64_t now_ms,
                           sh_arena *a, st_table_def *def, int64_t *deleted_ms, char *errmsg);
/* Every deleted table whose streams are kept (defs and deletion times in
 * a), for ListStreams (group 0, list_catalog). */
int st_stream_dropped_list(st_env *env, sh_arena *a, st_table_def **defs, int64_t **deleted_ms,
                           uint32_t *n, char *errmsg);

/* The shape of a table's log in this group for the stream of label_ms. */
typedef struct st_stream_bounds {
	uint64_t first;   /* oldest record of the stream (0: none) */
	uint64_t last;    /* newest record of the stream (0: none) */
	uint64_t newest;  /* the last seq given to any record of the table (0: none) */
	uint64_t trimmed; /* every seq <= trimmed is gone */
} st_stream_bounds;
int st_stream_bounds_get(st_env *env, uint32_t table, int64_t label_ms, st_stream_bounds *out,
                         char *errmsg);
/*
 * Where a LATEST iterator starts: just after the newest record of the
 * table's log in this replica (b's), i.e. the seq the next record appended
 * here will get.  Safe on a replica that lags its leader: every replica's
 * log is a prefix of the same committed sequence (records are appended at
 * apply, and only committed entries are applied, in log order), so a
 * record committed after the iterator was issued has a seq above every
 * replica's newest when it was issued, and the iterator's position is at
 * or before it -- never skipped.  A lagging replica's LATEST may start
 * earlier than the leader's would, so it can also return records committed
 * shortly before the call (DynamoDB's LATEST is "the most recent", no
 * stronger).  A replica behind the position simply has nothing there yet:
 * st_stream_read returns no record and leaves *next at the position.
 */
uint64_t st_stream_latest(const st_stream_bounds *b);

/*
 * Up to max_n records (and about max_bytes of encoded records; at least one)
 * of the stream of label_ms with seq >= from, in seq order, decoded into a.
 * *next is where the next read starts: after the last record examined
 * (records of other streams are skipped over), and past the newest seq when
 * the read reached the log's end (seqs reserved by shard changes have no
 * record).  SHOAL_E_TRIMMED when from <= the highest trimmed seq (the
 * records there are gone).
 */
int st_stream_read(st_env *env, uint32_t table, int64_t label_ms, uint64_t from, uint32_t max_n,
                   size_t max_bytes, sh_arena *a, st_stream_rec **out, uint32_t *n, uint64_t *next,
                   char *errmsg);

/* ------------------------------------------------------------------------ */
/* Shards                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct st_shard {
	uint64_t lo, hi; /* hash range, inclusive */
	uint64_t start;  /* first seq of the span; 0: from the log's beginning (the static shard) */
	uint64_t end;    /* first seq NOT in the span (exclusive); 0: open */
	bool has_parent;
	uint32_t parent_group; /* the parent's (group, lo, start) */
	uint64_t parent_lo, parent_start;
} st_shard;

/*
 * st_stream_read restricted to one shard: records with seq in
 * [max(from, s->start), s->end or unbounded) and hash in [s->lo, s->hi]
 * (s NULL: no restriction, st_stream_read's behaviour).  Records outside the
 * range count toward the examined bound like other streams' do (at least
 * 1024 are examined per call with s), and *next moves past them; a closed
 * shard read to its end leaves *next == s->end (done: *next >= s->end).
 * from >= s->end of a closed shard: no record, no error.
 */
int st_stream_read_shard(st_env *env, uint32_t table, int64_t label_ms, const st_shard *s,
                         uint64_t from, uint32_t max_n, size_t max_bytes, sh_arena *a,
                         st_stream_rec **out, uint32_t *n, uint64_t *next, char *errmsg);

/*
 * The apply side: each runs in the state machine's write transaction and is
 * a deterministic function of (state, arguments).  Errors as storage.h:
 * SHOAL_E_VALIDATION (an empty range) leaves txn untouched; environmental
 * ones poison it.  Each change reserves one seq of the table's counter
 * first (see "Shards" above); nothing is reserved when nothing is written.
 */

/* The range [mlo, mhi] of table stops being this group's here (a move's
 * fence): the open shard containing it (an 'S' record with end 0 and
 * [lo, hi] containing [mlo, mhi], else the implicit static shard if
 * has_static and [static_lo, static_hi] contains it) is closed at the
 * reserved seq, and what is left of its range ([lo, mlo - 1] and/or
 * [mhi + 1, hi], each only if non-empty) opens at the same seq as new
 * shard(s) whose parent is the closed one (parent_group = group, this
 * group's id).  *closed: the closed shard, with its end.  *found false
 * (nothing written) when no open shard contains the range. */
int st_stream_shard_leave(st_txn *txn, uint32_t group, uint32_t table, uint64_t mlo, uint64_t mhi,
                          bool has_static, uint64_t static_lo, uint64_t static_hi, st_shard *closed,
                          bool *found, char *errmsg);

/* The range [lo, hi] of table becomes this group's here (a move's own on
 * the target, or an aborted fence on the source): a new open shard at
 * (lo, reserved seq) with the given parent (has_parent false: none; the
 * parent is what st_stream_shard_last_closed finds in the source group).
 * Idempotent: if an open shard with the same lo, hi and parent exists,
 * nothing is written. */
int st_stream_shard_arrive(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, bool has_parent,
                           uint32_t parent_group, uint64_t parent_lo, uint64_t parent_start,
                           char *errmsg);

/* The reads, each in a read transaction of its own (but the _txn form). */

/* Every shard of table in this group: the 'S' records, plus the implicit
 * static shard, in (lo, start) order; *out in a (NULL when *n is 0). */
int st_stream_shard_list(st_env *env, uint32_t table, bool has_static, uint64_t static_lo,
                         uint64_t static_hi, sh_arena *a, st_shard **out, uint32_t *n,
                         char *errmsg);
/* The shard at (lo, start) (the implicit static one included);
 * SHOAL_E_NOT_FOUND if none. */
int st_stream_shard_get(st_env *env, uint32_t table, uint64_t lo, uint64_t start, bool has_static,
                        uint64_t static_lo, uint64_t static_hi, st_shard *out, char *errmsg);
/* The closed shard containing [mlo, mhi] with the largest end (what a leave
 * closed last): the parent a target names when it owns the range.  *found
 * false if none.  The _txn form reads in the caller's write transaction
 * (and poisons it on an environmental error). */
int st_stream_shard_last_closed(st_env *env, uint32_t table, uint64_t mlo, uint64_t mhi,
                                st_shard *out, bool *found, char *errmsg);
int st_stream_shard_last_closed_txn(st_txn *txn, uint32_t table, uint64_t mlo, uint64_t mhi,
                                    st_shard *out, bool *found, char *errmsg);

#endif
