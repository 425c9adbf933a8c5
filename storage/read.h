/*
 * read.h -- shared by the files of the read path (private to storage/):
 *
 * read.c        ordered iteration over a key range (truncated-key runs
 *               re-sorted), key-condition ranges, one page of results
 * read_get.c    st_get_item, st_select_parse and the request preparation
 *               shared by the three reads (placeholders, ExclusiveStartKey)
 * read_query.c  st_query, st_scan
 *
 * Ownership: an st_read_iter belongs to its LMDB read transaction and must be
 * freed (st_read_iter_free) before the transaction ends; the MDB_vals it hands out
 * are valid until then.
 */
#ifndef SHOAL_STORAGE_READ_H
#define SHOAL_STORAGE_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "expr.h"
#include "keyenc.h"

/* Bytes shared by the keys of one run of truncated keys (see read.c). */
#define ST_READ_RUN_PREFIX (ST_KEY_MAX - 16)

typedef struct st_read_range {
	st_key lo; /* first key (inclusive) */
	st_key hi; /* end (exclusive), when has_hi */
	bool has_hi;
	bool forward;
	const st_key_schema *ks; /* whose sort key orders runs of truncated keys */
} st_read_range;

/* The superset range of a key condition on one partition of (table, index);
 * sets lo, hi and has_hi. */
void st_read_query_range(uint32_t table, uint16_t index, const st_key_cond *kc, st_read_range *r);
/* The same on the partition whose 22-byte key header is h (a GSI index
 * partition: st_key_gsi_partition). */
void st_read_query_range_at(const st_key *h, const st_key_cond *kc, st_read_range *r);
/* Whether a sort-key value satisfies the condition (op NONE: always). */
bool st_read_sk_match(const st_key_cond *kc, const st_value *sk);

typedef struct st_read_iter st_read_iter;

int st_read_iter_new(MDB_txn *txn, st_env *env, const st_read_range *r, st_read_iter **out,
                     char *errmsg);
void st_read_iter_free(st_read_iter *it);
/* Positions the walk at the start of the range, or right after `start` (the
 * LMDB key of an ExclusiveStartKey whose sort-key value is start_sk; both may
 * be NULL). Call once, before st_read_iter_next. */
int st_read_iter_start(st_read_iter *it, const st_key *start, const st_value *start_sk,
                       char *errmsg);
/* The next raw entry (an encoded item) in order; *have false at the end. */
int st_read_iter_next(st_read_iter *it, MDB_val *data, bool *have, char *errmsg);

typedef struct st_read_page_spec {
	const st_key_schema *ks;      /* key of the entries: LastEvaluatedKey, key condition */
	const st_key_schema *base_ks; /* base-table key also in LastEvaluatedKey, or NULL */
	const st_key_cond *kc;        /* Query's key condition; NULL for Scan */
	const st_expr *filter;        /* or NULL */
	const st_expr *proj;          /* or NULL */
	bool count_only;              /* Select COUNT */
	uint32_t limit;               /* 0: none */
	size_t page_bytes;
	/* LSI whose projection lacks what the request wants: evaluate the base
	 * item (key base_ks, table table_id, read in txn) instead of the entry. */
	bool fetch_base;
	uint32_t table_id;
	MDB_txn *txn;
	st_env *env;
} st_read_page_spec;

/* Reads one page from a started iterator into out (items, counts and
 * LastEvaluatedKey allocated in a). */
int st_read_page(st_read_iter *it, const st_read_page_spec *ps, sh_arena *a, st_page *out,
                 char *errmsg);

/* The same page loop over n decoded items (borrowed) instead of an
 * iterator: st_page_finish. */
int st_read_page_items(const st_value *items, uint32_t n, const st_read_page_spec *ps, sh_arena *a,
                       st_page *out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Request preparation (read_get.c)                                          */
/* ------------------------------------------------------------------------ */

/* Copies and normalises an ExclusiveStartKey into ra. */
int st_read_start_key(sh_arena *ra, const st_value *in, st_value **out, char *errmsg);

/* Checks an ExclusiveStartKey against a key schema (errors prefixed with
 * "The provided starting key is invalid: "). */
int st_read_start_key_check(const st_key_schema *ks, const st_value *esk, const st_value **pk,
                            const st_value **sk, char *errmsg);

/* Select against ProjectionExpression and IndexName, with DynamoDB's
 * messages (Query's carry the "1 validation error detected: " envelope where
 * DynamoDB's do). */
int st_read_select_check(st_select select, bool has_projection, bool has_index, bool query,
                         char *errmsg);

/* GetItem inside read transaction txn: *item (projected, copied into a)
 * or NULL, *size as st_get_item_sized, *k the item's key; scratch in ra. */
int st_get_in(MDB_txn *txn, st_env *env, const st_get_req *req, sh_arena *ra, sh_arena *a,
              st_value **item, size_t *size, st_key *k, char *errmsg);

/* Begins a read-only transaction. */
int st_read_txn_begin(st_env *env, MDB_txn **txn, char *errmsg);

/* Page limit of the environment. */
size_t st_read_page_bytes(const st_env *env);

#endif
