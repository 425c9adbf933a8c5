/*
 * parts_int.h -- internals shared by the partition-move files (private to
 * storage/): parts.c (records, the request path's checks, the move log, the
 * apply side) and parts_read.c (the source leader's reads).  The layout is
 * at the top of parts.h.
 */
#ifndef SHOAL_STORAGE_PARTS_INT_H
#define SHOAL_STORAGE_PARTS_INT_H

#include "index_int.h"
#include "parts.h"
#include "read.h"

#define PT_META    0x05
#define PT_REC     'R'
#define PT_LOG     'L'
#define PT_LAST    'N'
#define PT_INGEST  'I'
#define PT_WAITS   'W' /* | table | lo -> n x txn id (16), prepared at the OUT */
#define PT_TXN_IN  'X' /* | table | lo | txn id (16) -> (empty) */
#define PT_TXN     'Y' /* | txn id (16) -> n x (table (4) | lo (8)) */
#define PT_HELD    'H' /* | table | lo | ix table (4) | ix index (2) -> items | bytes */
#define PT_KEY     14  /* 0x05 | kind | table (4) | lo (8) */
#define PT_LOG_KEY 22  /* ... | seq (8) */
#define PT_REC_VAL                                                                                 \
	38            /* hi (8) | state (1) | to_group (4) | attempt (8) | counted (1) |           \
	                 held items (8) | held bytes (8) */
#define PT_REC_V1  21 /* a record from before 2026-11-28: not counted */
#define PT_ING_VAL 13 /* attempt (8) | owned (1) | next index id at the reset (4) */
#define PT_ING_V1  9  /* a record from before 2026-11-27: no index id */

/* 0x05 | kind | table | lo. */
static inline void st_part_key(uint8_t k[PT_KEY], char kind, uint32_t table, uint64_t lo)
{
	k[0] = PT_META;
	k[1] = (uint8_t)kind;
	st_put_be32(k + 2, table);
	st_put_be64(k + 6, lo);
}

/* 0x05 'L' | table | lo | seq. */
static inline void st_part_log_key(uint8_t k[PT_LOG_KEY], uint32_t table, uint64_t lo, uint64_t seq)
{
	st_part_key(k, PT_LOG, table, lo);
	st_put_be64(k + PT_KEY, seq);
}

/* Transactions and the fence (st_part_fence waits only for the prepared
 * transactions that may hold items of its range).  st_txn_prepare calls
 * note with its plans: for every OUT range holding one of their items, a
 * 'X' record (range, txn) and the txn's 'Y' list of them -- nothing when no
 * item is in an OUT range (the request path's one branch when there are no
 * range records).  st_txn_release calls forget, which deletes them. */
struct st_write_plan;
int st_part_txn_note(st_txn *txn, const uint8_t id[16], const struct st_write_plan *const *plans,
                     uint32_t n, char *errmsg);
int st_part_txn_forget(st_txn *txn, const uint8_t id[16], char *errmsg);

/* Decodes a range record (SHOAL_E_INTERNAL if corrupt). */
int st_part_rec_decode(const MDB_val *k, const MDB_val *v, st_part_rec *r, char *errmsg);
/* The record at (table, lo), if *found. */
int st_part_rec_get(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, st_part_rec *r,
                    bool *found, char *errmsg);

/* Counts the base items of table with hashes in [lo, hi] as txn sees them,
 * and their st_item_size (each item decoded). */
int st_part_range_items(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                        st_part_held *out, char *errmsg);

/* The data-key range of table's base items with hashes in [lo, hi]:
 * [*from, *to) (has_to false: to the end of the table's base keys). */
void st_part_base_range(uint32_t table, uint64_t lo, uint64_t hi, st_key *from, st_key *to,
                        bool *has_to);
/* The same for the keys of (table, index): an LSI's entries (index 0: the
 * base items). */
void st_part_index_range(uint32_t table, uint16_t index, uint64_t lo, uint64_t hi, st_key *from,
                         st_key *to, bool *has_to);
/* Whether LMDB key k sorts before `to` (always when !has_to). */
bool st_part_key_before(const MDB_val *k, const st_key *to, bool has_to);

/* Returns rc, poisoning txn first if rc is environmental (LMDB, memory). */
int st_part_fail(st_txn *txn, int rc, char *errmsg);

/* Appends a copy of data key k to *keys (n of cap, grown in a). */
int st_part_key_push(sh_arena *a, st_key **keys, size_t *n, size_t *cap, const MDB_val *k,
                     char *errmsg);

/* The record holding hash of table (any state), if r->state != 0. */
int st_part_rec_at(MDB_txn *txn, st_env *env, uint32_t table, uint64_t hash, st_part_rec *r,
                   char *errmsg);

/* --- index entries held (parts_held.c; parts.h, Counting) -------------- */

/* The index counters (st_ix_state) of the indexes whose entries lie in
 * ranges of `table`: its LSIs, or (ST_PART_GSI) every GSI.  Taken before a
 * move's own writes, so that st_part_held_ix_moved adds their change. */
typedef struct st_part_ixsnap {
	uint32_t n;
	st_part_held_ix *v;
} st_part_ixsnap;
int st_part_ixsnap_take(MDB_txn *txn, st_env *env, uint32_t table, sh_arena *a, st_part_ixsnap *s,
                        char *errmsg);
/* Adds what the index counters changed since `before` to the entries held
 * by r (nothing unless r is counted). */
int st_part_held_ix_moved(st_txn *txn, const st_part_rec *r, const st_part_ixsnap *before,
                          sh_arena *a, char *errmsg);
/* The entries held by the record at (table, lo) become h's (none when h is
 * NULL or !h->ix_known); drop: none. */
int st_part_held_ix_set(st_txn *txn, uint32_t table, uint64_t lo, const st_part_held *h,
                        char *errmsg);
int st_part_held_ix_drop(st_txn *txn, uint32_t table, uint64_t lo, char *errmsg);
/* h->ix (and ix_known) from the record at (table, lo)'s 'H' records. */
int st_part_held_ix_get(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, st_part_held *h,
                        char *errmsg);
/* h->ix (and ix_known) counted off the data: the index entries of ranges
 * of `table` in [lo, hi] (each decoded). */
int st_part_range_entries(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                          st_part_held *h, char *errmsg);

/* --- the GSI space (parts_gsi.c) ----------------------------------------- */

/* A scan of the GSI entries of a hash range: every data key table | index |
 * hash | ... whose index is a GSI this group keeps entries of
 * (st_part_gsi_wanted: not a base key, not an LSI entry, not of a dropped
 * table or deleted index) and whose hash is in [lo, hi].  The keys of one
 * (table, index) with hashes in a range are contiguous, so the scan seeks
 * from one (table, index) to the next. */
typedef struct st_part_gsi_scan {
	st_table_info *tables;
	uint32_t n_tables, next_table;
	uint64_t lo, hi;
	/* The last (table, index) judged, and the answer: the entries of one
	 * index come one after another. */
	bool cached, cached_wanted;
	uint32_t cached_table;
	uint16_t cached_index;
} st_part_gsi_scan;

int st_part_gsi_scan_init(MDB_txn *txn, st_env *env, sh_arena *a, uint64_t lo, uint64_t hi,
                          st_part_gsi_scan *s, char *errmsg);
bool st_part_gsi_wanted(st_part_gsi_scan *s, uint32_t table, uint16_t index);
/* The scan itself: fn for each GSI entry of [lo, hi] (data key and value)
 * in key order, after the data key `after` (after_len 0: from the first),
 * until fn sets *stop or fails (its code is returned).  Tables from a. */
typedef int (*st_part_gsi_fn)(void *arg, const MDB_val *k, const MDB_val *v, bool *stop,
                              char *errmsg);
int st_part_gsi_each(MDB_txn *txn, st_env *env, sh_arena *a, uint64_t lo, uint64_t hi,
                     const uint8_t *after, size_t after_len, st_part_gsi_fn fn, void *arg,
                     char *errmsg);

/* Deletes up to max (0: all) GSI entries of [lo, hi] with their counters;
 * *more: some remain. */
int st_part_gsi_delete(st_txn *txn, uint64_t lo, uint64_t hi, size_t max, sh_arena *a, bool *more,
                       char *errmsg);
/* Whether [lo, hi] holds a GSI entry. */
int st_part_gsi_has_entries(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, bool *any,
                            char *errmsg);
/* Target: one chunk of GSI entries (vlen 0: a delete), checked (keys of a
 * GSI entry in [lo, hi], values that decode to a map: VALIDATION) into
 * deltas of a, then written with their counters. */
struct st_delta;
int st_part_gsi_check(uint64_t lo, uint64_t hi, size_t n, const uint8_t *const *keys,
                      const size_t *klens, const uint8_t *const *vals, const size_t *vlens,
                      sh_arena *a, struct st_delta **out, char *errmsg);
int st_part_gsi_write(st_txn *txn, uint64_t lo, uint64_t hi, const struct st_delta *d, size_t n,
                      sh_arena *a, char *errmsg);
/* Source, at the fence of [lo, hi]: marks tile the range, each with the
 * watermarks its deltas were deduplicated by until then (those of the
 * marks already there; the group's own for the rest). */
int st_part_gsi_pin(st_txn *txn, uint64_t lo, uint64_t hi, char *errmsg);
/* Removes the marks of [lo, hi] (cutting those across its edges). */
int st_part_gsi_unmark(st_txn *txn, uint64_t lo, uint64_t hi, char *errmsg);

/* st_index_apply's view of the GSI space for one batch from one source:
 * *out NULL when the environment has no record or mark (one branch).
 * mark: the slot of the mark holding hash (UINT32_MAX: none), whose
 * watermark for the source is read once per batch, advanced in memory and
 * written by close. */
typedef struct st_part_gsi_view st_part_gsi_view;
int st_part_gsi_view_open(st_txn *txn, uint32_t source, sh_arena *a, st_part_gsi_view **out,
                          char *errmsg);
int st_part_gsi_mark(st_part_gsi_view *v, uint64_t hash, uint32_t *slot, char *errmsg);
uint64_t st_part_gsi_mark_seq(const st_part_gsi_view *v, uint32_t slot);
void st_part_gsi_mark_advance(st_part_gsi_view *v, uint32_t slot, uint64_t seq);
int st_part_gsi_view_close(st_part_gsi_view *v, char *errmsg);

#endif
