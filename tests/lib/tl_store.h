/*
 * tl_store.h -- the storage-engine fixture of the unit tests: one st_env in a
 * fresh temporary directory, tables, and the usual calls with their results
 * asserted.
 *
 * The fixture is process-wide (each Check test runs in its own process):
 * tl_env, tl_dir and the tl_arena / tl_msg of tl_values.h.  Every helper
 * that fails asserts (tl_assert) with the engine's message; items and pages
 * handed out live in tl_arena.
 */
#ifndef SHOAL_TL_STORE_H
#define SHOAL_TL_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/storage.h"
#include "tl_values.h"

extern char tl_dir[PATH_MAX];
extern st_env *tl_env;

/* Opens tl_env in a fresh tl_tmpdir(tag) with opts (NULL: the defaults). */
void tl_env_open(const char *tag, const st_env_options *opts);
/* Closes tl_env (NULL is fine) and removes tl_dir. */
void tl_env_close(void);

/* tl_arena_setup, then tl_env_open; tl_store_close undoes both and is a
 * Check teardown. */
void tl_store_open(const char *tag, const st_env_options *opts);
void tl_store_close(void);

/* Creates a table in a transaction of its own. */
void tl_create_table_def(const st_table_def *def);
/* ... with just a key schema (sk NULL: no sort key); returns the table id. */
uint32_t tl_create_table(const char *name, const char *pk, st_type pk_type, const char *sk,
                         st_type sk_type);

/* ... with a key schema and one global secondary index `index` on its own key
 * schema (projection ALL, one write shard, ACTIVE); the AttributeDefinitions
 * are the key attributes of both, each once. */
void tl_create_table_gsi(const char *name, st_key_schema key, const char *index,
                         st_key_schema index_key);

/* PutItem and GetItem (the item, or NULL when there is none). */
void tl_put(const char *table, const st_value *item);
st_value *tl_get(const char *table, const st_value *key);

/* Query and Scan: one page that must succeed, or the error they must give
 * (code and exact message). */
void tl_query_ok(st_query_req *r, st_page *p);
void tl_query_err(st_query_req *r, int code, const char *msg);
void tl_scan_ok(st_scan_req *r, st_page *p);
void tl_scan_err(st_scan_req *r, int code, const char *msg);

/*
 * Reads every page, following LastEvaluatedKey from the request's
 * ExclusiveStartKey (restored on return), and returns the items of all pages
 * in order (*n of them), the number of pages and the items read (scanned may
 * be NULL).  Asserts on every page: at most Limit items read, no more items
 * returned than read, items present when a page is not the last, and fewer
 * than 100000 pages.
 */
st_value *tl_query_all(st_query_req *r, uint32_t *n, uint32_t *pages, uint32_t *scanned);
st_value *tl_scan_all(st_scan_req *r, uint32_t *n, uint32_t *pages, uint32_t *scanned);

/* Every key and value of the catalog and data DBIs (and first the meta DBI
 * when with_meta), in order, as one malloc'd buffer (*len bytes) for byte
 * comparisons of whole stores: each key and value as its size_t length and
 * its bytes.  The caller frees it. */
uint8_t *tl_store_dump(st_env *env, bool with_meta, size_t *len);

#endif
