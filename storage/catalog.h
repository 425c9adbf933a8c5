/*
 * catalog.h -- internals shared by the catalog's files (private to storage/).
 *
 * catalog.c        the operations: st_table_create, _delete, _describe, _list,
 *                  _load, _count, _index (declared in storage.h and engine.h)
 * catalog_codec.c  the table record: its format (byte by byte at the top of the
 *                  file), st_catalog_encode and st_catalog_decode
 * catalog_check.c  validation of table names and definitions with DynamoDB's
 *                  messages, and the stored form of a valid definition
 */
#ifndef SHOAL_STORAGE_CATALOG_H
#define SHOAL_STORAGE_CATALOG_H

#include "engine.h"

/* The fixed header of a table record (see catalog_codec.c). The counters sit
 * at fixed offsets so that st_table_count patches them in place. */
#define ST_REC_VERSION     4 /* versions 1, 2 and 3 are still read */
#define ST_REC_OFF_ID      1
#define ST_REC_OFF_COUNT   5
#define ST_REC_OFF_BYTES   13
#define ST_REC_OFF_CREATED 21
#define ST_REC_HEADER      29

/* Big-endian integers. */
static inline void st_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void st_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void st_put_be64(uint8_t *p, uint64_t v)
{
	st_put_be32(p, (uint32_t)(v >> 32));
	st_put_be32(p + 4, (uint32_t)v);
}

static inline uint16_t st_get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t st_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t st_get_be64(const uint8_t *p)
{
	return (uint64_t)st_get_be32(p) << 32 | st_get_be32(p + 4);
}

/* v + d for a counter: never below 0 nor past UINT64_MAX. */
static inline uint64_t st_add_clamped(uint64_t v, int64_t d)
{
	if (d >= 0)
		return v + (uint64_t)d >= v ? v + (uint64_t)d : UINT64_MAX;
	uint64_t m = (uint64_t)(-(d + 1)) + 1; /* |d|, INT64_MIN included */
	return v > m ? v - m : 0;
}

/* The id the next table created without an explicit id would get: every
 * table id this group has ever defined is below it (1 when none). */
int st_catalog_next_table_id(MDB_txn *txn, st_env *env, uint32_t *next, char *errmsg);

/* ------------------------------------------------------------------------ */
/* The table record (catalog_codec.c)                                        */
/* ------------------------------------------------------------------------ */

/* Encodes the record of a validated, normalised definition d with the given
 * counters into arena memory: *buf (*len bytes).  SHOAL_E_NOMEM (no message)
 * when the arena cannot hold it. */
int st_catalog_encode(sh_arena *a, const st_table_def *d, uint64_t items, uint64_t bytes,
                      uint8_t **buf, size_t *len);

/* The next index id of d: its next_index_id, raised past every index id. */
uint32_t st_catalog_next_index_id(const st_table_def *d);

/* Whether a record's first byte is a version this build reads. */
static inline bool st_catalog_version_ok(uint8_t v)
{
	return v >= 1 && v <= ST_REC_VERSION;
}

/* Decodes the record of table `name` (buf, len bytes; borrowed) into *out,
 * strings and arrays allocated in a.  A damaged record is SHOAL_E_INTERNAL
 * ("corrupt catalog record for table <name>: <what>"), never a read past the
 * end; SHOAL_E_NOMEM when out of memory. */
int st_catalog_decode(const char *name, const uint8_t *buf, size_t len, sh_arena *a,
                      st_table_info *out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Validation (catalog_check.c)                                              */
/* ------------------------------------------------------------------------ */

/* TableName as every table operation checks it: required, 3..255 bytes,
 * [a-zA-Z0-9_.-]+.  SHOAL_E_VALIDATION with DynamoDB's message. */
int st_catalog_check_name(const char *name, char *errmsg);

/* A CreateTable definition, as DynamoDB checks it: the TableName, then the
 * field constraints reported together ("N validation errors detected: ..."),
 * then the semantic rules in DynamoDB's order.  Scratch memory from a.
 * SHOAL_E_VALIDATION, or SHOAL_E_NOMEM. */
int st_catalog_check_def(const st_table_def *d, sh_arena *a, char *errmsg);

/* ListTables' parameters: ExclusiveStartTableName (NULL: none) and Limit
 * (1..100), reported together as DynamoDB does.  SHOAL_E_VALIDATION. */
int st_catalog_check_list(const char *exclusive_start, uint32_t limit, char *errmsg);

/* A copy of the definition src (valid by st_catalog_check_def) in the form it
 * is stored: key types taken from AttributeDefinitions, index ids assigned,
 * LSIs with one write shard.  The copy shares src's strings; its index array
 * is in a.  SHOAL_E_NOMEM (no message). */
int st_catalog_normalise_def(const st_table_def *src, sh_arena *a, st_table_def *d);

#endif
