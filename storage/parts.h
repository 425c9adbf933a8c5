/*
 * parts.h -- partition moves, the storage side (prefix st_part_; issue 14,
 * the contract is pmove-contract.md).  An addition to the storage contract
 * (storage.h) used by node/'s state machine and the source leader's mover.
 *
 * A table's base items (index id 0) and their LSI entries live in a hash
 * range; moving [lo, hi] of table t from this group (the source) to another
 * (the target) goes:
 *
 *   source, state of its range record:
 *
 *     (none) --st_part_out--> OUT --st_part_fence--> FENCED --st_part_purge
 *        ^                     |                       |     (until empty)--> AWAY
 *        +----st_part_abort----+-----------------------+
 *
 *   OUT     served as before; every base write of the range also appends a
 *           move-log record (st_part_log, from write.c) in the same LMDB
 *           transaction, which the source leader ships after its copy.
 *   FENCED  reads and writes of the range are refused (SHOAL_E_WRONG_GROUP);
 *           the log still takes the move's own writes (none: purge skips it).
 *   AWAY    refused forever (until st_part_own of a move back removes it);
 *           the items and the log are gone.
 *
 *   target: st_part_ingest chunks (the first with reset, which records the
 *   attempt), then st_part_own of that attempt, which removes any AWAY
 *   record over the range (the range comes back) and ends the attempt.
 *
 * Layout in the meta DBI under prefix 0x05 (0x01 index machinery, 0x02
 * transactions, 0x03 streams; 0x04 unused), integers big-endian:
 *
 *   0x05 'R' | table (4) | lo (8)            -> hi (8) | state (1) |
 *                                               to_group (4) | attempt (8) |
 *                                               counted (1) | held items (8) |
 *                                               held bytes (8) (the last three
 *                                               absent in records written
 *                                               before 2026-11-28: not
 *                                               counted)
 *   0x05 'L' | table (4) | lo (8) | seq (8)  -> klen (4) | data key |
 *                                               vlen (4) | encoded item
 *                                               (vlen 0: deleted)
 *   0x05 'N' | table (4) | lo (8)            -> u64 last log seq (absent: 0)
 *   0x05 'I' | table (4) | lo (8)            -> target side: attempt (8) of
 *                                               the latest ingest reset |
 *                                               owned (1): st_part_own took it |
 *                                               the table's next index id
 *                                               here at that reset (4; absent
 *                                               in records written before
 *                                               2026-11-27)
 *   0x05 'W' | table (4) | lo (8)            -> n x txn id (16): transactions
 *                                               prepared when the range went
 *                                               OUT (until its fence)
 *   0x05 'X' | table (4) | lo (8) | id (16)  -> (empty): transaction id,
 *                                               prepared while the range was
 *                                               OUT, holds items of it
 *   0x05 'H' | table (4) | lo (8) |          -> items (8) | bytes (8): index
 *        ix table (4) | ix index (2)            entries the counted record at
 *                                               (table, lo) holds (Counting;
 *                                               absent: none)
 *   0x05 'Y' | id (16)                       -> n x (table (4) | lo (8)): the
 *                                               'X' records of transaction id
 *                                               (st_txn_prepare writes them,
 *                                               st_txn_release deletes them)
 *
 * Counting (ItemCount, TableSizeBytes, the planner's bytes): a range is
 * counted by the group that serves it, so that a table's figures summed
 * over its groups count a moving range once.  The table's counters
 * (storage.h st_table_count) count every base item stored in the group;
 * st_part_uncount takes away the items the group holds but does not count,
 * which a record keeps ("held", meaningful when `counted`):
 *
 *   target  from its ingest reset until st_part_own, the range's AWAY
 *           record counts what the ingest chunks stored (the copy is not
 *           served yet); st_part_own removes the record: the items count.
 *   source  counts the range while OUT and FENCED, until the target owns
 *           it: then the handover entry (st_part_handover) records the
 *           range's items as held -- the figures the target's last ingest
 *           answered (the copy is complete: the same items), carried by the
 *           entry to every replica -- and each purge entry takes away what
 *           it deleted.  (The purge's first entry does the handover if none
 *           did -- a leader that changed in between -- with figures the
 *           leader counts itself, st_part_held_count: a scan.)  The handover
 *           comes after the target's own, not before: an entry between the
 *           map's flip and the own would lengthen the cutover.
 *
 * So a moving range is counted once, except for the moment between the
 * target's own and the source's handover (one Raft entry's commit), when
 * both count it.  A record that loses part of its range
 * (an AWAY record carved by another move) has its held figures counted
 * again for what is left.
 *
 * Index entries the same way (since 2026-11-28, later): a counted record
 * also holds, per (table, index), the entries of the range stored here and
 * not counted -- a table's range its LSI entries, a range of the GSI space
 * (below) its GSI entries -- in 'H' records (layout above), which
 * st_part_uncount_indexes takes from the index counters (IndexStats,
 * DescribeTable's index ItemCount, the planner's GSI bytes).  The target's
 * ingest keeps them (the change of the index counters a chunk makes), its
 * answer and the handover carry them (st_part_held.ix), the purge takes
 * away what it deletes.  A handover without them (ix_known false: more
 * (table, index) pairs than ST_PART_HELD_IX, or figures not known) leaves
 * the source counting its entries until purged.
 *
 * Records are replicated state: they travel in Raft snapshots with the rest
 * of meta.  The environment keeps in memory whether any 'R' record may exist
 * (set at open, after a snapshot load and when one is written), so that the
 * request path's checks cost one branch when none does.
 *
 * Determinism: every function taking an st_txn runs in the state machine's
 * write transaction and is a function of (state, arguments) only.  Errors
 * as storage.h: client-class codes leave the transaction untouched;
 * environmental ones poison it.
 *
 * Memory: arrays and bytes handed out are in the caller's arena; arrays
 * handed in are borrowed for the call.
 *
 * The GSI space
 * -------------
 * GSI entries live in the index partition of their st_index_hash (index.h),
 * one hash space for every table's GSIs, in which "table" ST_PART_GSI (0,
 * never a table's id) names ranges.  A range of it moves with the same
 * records and calls as a table's, applied to the GSI entries of every
 * table and GSI whose hash is in it (not base items, not LSI entries):
 *
 *   OUT     deltas applied by st_index_apply in the range are logged;
 *   FENCED, AWAY (and the target's AWAY from its reset until own):
 *           st_index_apply refuses a whole batch holding a delta of the
 *           range (SHOAL_E_WRONG_GROUP, the range handed out): nothing of
 *           it is applied, so the source ships none of the range's deltas
 *           here again and holds them until its map names another group;
 *   copy, ingest, purge: GSI entries with their index counters.
 *
 * Deduplication.  A target skips a delta whose seq is at or below the last
 * it applied from the delta's source (index.h).  That single watermark per
 * source is not the target's to give away: the range's new owner has its
 * own, moved by deltas of other ranges.  So the fence *pins* the range's:
 * it writes marks tiling the range, each with the per-source watermarks
 * its deltas were deduplicated by until then (the group's own, or those of
 * marks already there).  Exact, because a source ships each target's
 * deltas in seq order one batch at a time and holds a range's deltas only
 * once refused: every delta of the range at or below a pinned watermark
 * was applied before the fence, none above it was.  The marks travel to
 * the target with its own (st_part_gsi_marks at the source,
 * st_part_gsi_mark_set at the target), and st_index_apply deduplicates a
 * delta in a mark by the mark's watermark for its source (advanced by it),
 * not the group's (not advanced by it).  A source aborting the move keeps
 * its marks, which stay exact; the purge's end (AWAY) drops them.
 *
 * Layout of the marks: parts_gsi.c.
 */
#ifndef SHOAL_STORAGE_PARTS_H
#define SHOAL_STORAGE_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage.h"

#define ST_PART_GSI 0u /* the "table" of the GSI space's ranges */

typedef enum { ST_PART_OUT = 1, ST_PART_FENCED = 2, ST_PART_AWAY = 3 } st_part_state;

typedef struct st_part_rec {
	uint32_t table;
	uint64_t lo, hi; /* hash range, inclusive */
	uint8_t state;   /* st_part_state */
	uint32_t to_group;
	uint64_t attempt;
	/* Counting (above): whether held_* are kept, and the base items of the
	 * range stored here that the group does not count as its own. */
	bool counted;
	uint64_t held_items, held_bytes;
} st_part_rec;

/* Index entries of one (table, index) and their bytes (st_item_size). */
typedef struct st_part_held_ix {
	uint32_t table;
	uint16_t index;
	uint64_t items, bytes;
} st_part_held_ix;

#define ST_PART_HELD_IX 64 /* (table, index) pairs a st_part_held carries */

/* Base items and their bytes (st_item_size) of a range, and (ix_known) its
 * index entries: ix[0 .. n_ix-1], one per (table, index) holding any. */
typedef struct st_part_held {
	uint64_t items, bytes;
	bool ix_known;
	uint32_t n_ix;
	st_part_held_ix ix[ST_PART_HELD_IX];
} st_part_held;

/* "OUT", "FENCED", "AWAY" ("?" otherwise). */
const char *st_part_state_name(uint8_t state);

/* Whether the environment may hold a range record (the in-memory flag): the
 * node may skip its own work when false. */
bool st_part_any(const st_env *env);

/* ------------------------------------------------------------------------ */
/* Request path                                                              */
/* ------------------------------------------------------------------------ */

/* SHOAL_E_WRONG_GROUP (the message names the table, the hash and the state)
 * if (table, hash) lies in a FENCED or AWAY range, as txn sees it.  One
 * branch when the environment has no record.  The write planning (st_plan_*,
 * so also transactions and TTL deletes) and the reads (GetItem, Query and
 * Scan of the base table or an LSI, TransactGetItems) call it themselves. */
int st_part_check(st_txn *txn, uint32_t table, uint64_t hash, char *errmsg);

/* The same for hashes [lo, hi] of table's base items, in a read transaction
 * of its own (refused if the range overlaps a FENCED or AWAY one): for the
 * node's own reads outside the storage read paths (which check already).
 * No transaction is opened when the environment has no record. */
int st_part_check_env(st_env *env, uint32_t table, uint64_t lo, uint64_t hi, char *errmsg);

/* The write hook (write.c, applying a base write): when (table, hash) is in
 * an OUT or FENCED range, appends a log record (key, and the encoded new
 * item or vlen 0 for a delete).  One branch when the environment has no
 * record. */
int st_part_log(st_txn *txn, uint32_t table, uint64_t hash, const uint8_t *key, size_t klen,
                const uint8_t *val, size_t vlen, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Apply side (the state machine's write transaction)                        */
/* ------------------------------------------------------------------------ */

/* Source: records [lo, hi] as OUT toward to_group.  Idempotent for the same
 * range (a new attempt updates attempt and to_group, and drops the log
 * records of the earlier attempt, keeping the seq); SHOAL_E_IN_USE if the
 * range overlaps another record; SHOAL_E_VALIDATION if lo > hi or the
 * range's record is past OUT. */
int st_part_out(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint32_t to_group,
                uint64_t attempt, char *errmsg);

/* Source: OUT -> FENCED (idempotent when FENCED).  SHOAL_E_IN_USE while a
 * prepared transaction may hold items of the range -- one prepared before
 * the range went OUT (the 'W' list st_part_out wrote), or one that noted the
 * range since ('X') -- the leader tries again; SHOAL_E_VALIDATION
 * without an OUT or FENCED record at (table, lo).  *fenced_now: this call
 * made the change (false when FENCED already, or on error), so that the
 * caller hooks what follows a fence (the stream's shards, stream.h) once
 * although the entry may be applied again. */
int st_part_fence(st_txn *txn, uint32_t table, uint64_t lo, bool *fenced_now, char *errmsg);

/* Source: the FENCED range stops counting here (Counting, above): it holds
 * `range` (the target's last ingest answer, or st_part_held_count; NULL: not
 * known, so it counts here until purged).  Nothing changes if it did so already or is AWAY;
 * SHOAL_E_VALIDATION without a record at (table, lo) or if it is OUT. */
int st_part_handover(st_txn *txn, uint32_t table, uint64_t lo, const st_part_held *range,
                     char *errmsg);

/* Source: deletes up to max_items base items of the FENCED range (with LSI
 * entries, counters, collection sizes; no GSI delta, stream or log record).
 * When none is left the record becomes AWAY, the log and 'N' are deleted
 * and *done is true (also when it was AWAY already).  SHOAL_E_VALIDATION
 * without a FENCED or AWAY record at (table, lo).  range: as for
 * st_part_handover, which the first entry does if none did (later entries
 * ignore it). */
int st_part_purge(st_txn *txn, uint32_t table, uint64_t lo, uint32_t max_items,
                  const st_part_held *range, bool *done, char *errmsg);

/* Source: an OUT or FENCED record and its log are removed (the range is
 * served again).  No record: SHOAL_OK; AWAY: SHOAL_E_VALIDATION.  *was: the
 * state this call removed (ST_PART_OUT or ST_PART_FENCED; 0 when there was
 * no record, or on error): only the abort of a FENCED range gives it back
 * to this group's stream (a repeated abort finds no record). */
int st_part_abort(st_txn *txn, uint32_t table, uint64_t lo, uint8_t *was, char *errmsg);

/* Target: the range is this group's.  SHOAL_E_VALIDATION unless the latest
 * ingest reset at (table, lo) was `attempt`; removes the overlap of AWAY
 * records with [lo, hi] (what is left of a larger one stays AWAY) and marks
 * the attempt owned, after which ingests of it are stale.  A second own of
 * the same attempt is SHOAL_OK and changes nothing.  SHOAL_E_IN_USE if an
 * OUT or FENCED record overlaps the range.  *owned_now: this call marked the
 * attempt owned (false for a repeated own, or on error).  The backfill of
 * each GSI of the table being created, or created since the attempt's reset
 * (ACTIVE or not), starts again from the table's start: it passed over the
 * range while it was not owned, and the source did not index the range for
 * an index created after the move began. */
int st_part_own(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint64_t attempt,
                bool *owned_now, char *errmsg);

/* Target: one chunk of the copy or of the log: n data keys, each with an
 * encoded item (vlen > 0: put) or none (vlen 0: delete), applied through the
 * write path with their LSI entries, item counters and collection sizes,
 * but no GSI delta, stream record, move log or fence check.  reset: first
 * delete every base item of [lo, hi] and record `attempt`; else a chunk of
 * another attempt than the recorded one (or of an owned one) is stale:
 * SHOAL_E_WRONG_EPOCH.  Every key must be a base key of `table` with its
 * hash in [lo, hi], every item must decode and carry that key (else
 * SHOAL_E_VALIDATION and nothing written).  SHOAL_E_NOT_FOUND if there is
 * no such table.  Scratch memory from a.  *held (may be NULL): what the
 * range's AWAY record holds after the chunk, base items and index entries
 * (Counting, above; zero if it keeps no figures), which the source's
 * handover takes once the copy is complete.  A range of the GSI space:
 * st_part_gsi_check's entries instead of items. */
int st_part_ingest(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, uint64_t attempt,
                   bool reset, size_t n, const uint8_t *const *keys, const size_t *klens,
                   const uint8_t *const *vals, const size_t *vlens, sh_arena *a, st_part_held *held,
                   char *errmsg);

/* ------------------------------------------------------------------------ */
/* Source leader's reads (each in a read transaction of its own)             */
/* ------------------------------------------------------------------------ */

/* The items of the range recorded at (table, lo), for a purge's handover:
 * *counted true (and *out zero) when the record keeps its figures
 * already or is not FENCED (nothing to count), else *out counts the range's
 * base items and index entries (its LSI entries; a GSI range's entries) --
 * every one read and decoded, in one read transaction with the record.
 * SHOAL_E_NOT_FOUND without a record. */
int st_part_held_count(st_env *env, uint32_t table, uint64_t lo, st_part_held *out, bool *counted,
                       char *errmsg);

/* Takes away from info's item_count and size_bytes what the group holds of
 * the table without counting it (Counting, above): the figures DescribeTable
 * and GroupStatus give.  One branch when the environment has no record. */
int st_part_uncount(st_env *env, st_table_info *info, char *errmsg);

/* The same for index entries (Counting, above): takes away from p[0 .. n-1]
 * (st_index_progress_list's) the entries each index holds here without
 * counting them.  One branch when the environment has no record. */
struct st_index_progress;
int st_part_uncount_indexes(st_env *env, struct st_index_progress *p, uint32_t n, char *errmsg);

/* Every range record, in (table, lo) order; *out in a (NULL when n is 0). */
int st_part_list(st_env *env, sh_arena *a, st_part_rec **out, size_t *n, char *errmsg);

/* One chunk of the copy: base items (data keys and encoded values) of table
 * with hashes in [lo, hi], in key order, after the data key `after`
 * (after_len 0: from lo), at least one and then as many as fit in max_bytes
 * (keys and values).  *more: items follow.  *log_last: the move log's last
 * seq at (table, lo) in the same read transaction (the first chunk's is the
 * watermark after which the log is shipped). */
int st_part_copy_chunk(st_env *env, uint32_t table, uint64_t lo, uint64_t hi, const uint8_t *after,
                       size_t after_len, size_t max_bytes, sh_arena *a, uint8_t ***keys,
                       size_t **klens, uint8_t ***vals, size_t **vlens, size_t *n, bool *more,
                       uint64_t *log_last, char *errmsg);

/* Move-log records of (table, lo) with seq > after_seq, in seq order, at
 * least one (if any) and then as many as fit in max_bytes, max_records at
 * most (0: no bound) -- a record's replay is a write at a random key, so
 * their count, more than their bytes, sets how long a chunk's apply holds
 * the target's loop.  vlens[i] 0: a delete.  *last_seq: the seq of the
 * last returned (after_seq when none). */
int st_part_log_read(st_env *env, uint32_t table, uint64_t lo, uint64_t after_seq, size_t max_bytes,
                     size_t max_records, sh_arena *a, uint8_t ***keys, size_t **klens,
                     uint8_t ***vals, size_t **vlens, uint64_t *last_seq, size_t *n, char *errmsg);

/* The move log's last seq at (table, lo) (0: none yet). */
int st_part_log_last(st_env *env, uint32_t table, uint64_t lo, uint64_t *seq, char *errmsg);

/* ------------------------------------------------------------------------ */
/* The GSI space's marks (above)                                             */
/* ------------------------------------------------------------------------ */

/* A mark: hashes [lo, hi] of the GSI space with n per-source watermarks. */
typedef struct st_part_mark {
	uint64_t lo, hi;
	uint32_t n;
	uint32_t *sources;
	uint64_t *seqs;
} st_part_mark;

/* Source leader: the marks over [lo, hi] (a fenced range's tile it), cut to
 * the range, in lo order; arrays in a. */
int st_part_gsi_marks(st_env *env, uint64_t lo, uint64_t hi, sh_arena *a, st_part_mark **out,
                      size_t *n, char *errmsg);

/* Whether m[0 .. n-1] tile [lo, hi] in order (SHOAL_E_VALIDATION if not):
 * the check st_part_gsi_mark_set makes first, for a caller that must refuse
 * before it writes anything else. */
int st_part_gsi_marks_check(uint64_t lo, uint64_t hi, const st_part_mark *m, size_t n,
                            char *errmsg);
/* Target, with its own of a GSI range (same transaction): the marks of
 * [lo, hi] become m[0 .. n-1], which must tile it in order
 * (SHOAL_E_VALIDATION otherwise, nothing written). */
int st_part_gsi_mark_set(st_txn *txn, uint64_t lo, uint64_t hi, const st_part_mark *m, size_t n,
                         char *errmsg);

#endif
