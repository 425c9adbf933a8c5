/*
 * keyenc.h -- LMDB key layout and order-preserving encoding (private to storage/).
 * The byte-by-byte format is documented at the top of keyenc.c.
 *
 * LMDB keys are at most 511 bytes (MDB_MAXKEYSIZE in Debian's build), while a
 * partition key may be 2048 bytes and a sort key 1024.  So:
 *  - the partition key is represented by a fixed 16-byte digest (XXH3-128 of
 *    table id and key bytes), whose first 8 bytes, big-endian, are the
 *    placement hash (st_key_hash): items of one partition key are contiguous
 *    and a hash range is one contiguous key range;
 *  - the sort key is encoded order-preservingly; if its encoding is longer
 *    than ST_KEY_SK_INLINE bytes the key holds its first ST_KEY_SK_INLINE
 *    bytes followed by a 16-byte digest of the whole sort key, making the key
 *    exactly ST_KEY_MAX bytes long ("truncated key").  Truncated keys that
 *    share their inline prefix are ordered by digest in LMDB, not by value:
 *    readers must re-sort such a run by the real sort key (st_key_truncated
 *    tells them when).
 */
#ifndef SHOAL_STORAGE_KEYENC_H
#define SHOAL_STORAGE_KEYENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage.h"

#define ST_KEY_MAX       511
#define ST_KEY_HEADER    22 /* table id (4) | index id (2) | pk digest (16) */
#define ST_KEY_SK_INLINE (ST_KEY_MAX - ST_KEY_HEADER - 16) /* 473 */

typedef struct st_key {
	uint16_t len;
	uint8_t b[ST_KEY_MAX];
} st_key;

/* table id | index id (the 6-byte prefix of every key of one table index). */
void st_key_table(st_key *k, uint32_t table, uint16_t index);

/* table id | index id | hash (8 bytes): the first key at or after `hash`. */
void st_key_hash_bound(st_key *k, uint32_t table, uint16_t index, uint64_t hash);

/* The header of every key of one partition-key value (ST_KEY_HEADER bytes). */
void st_key_partition(st_key *k, uint32_t table, uint16_t index, const st_value *pk);

/* The full key of an item: partition header, then the sort key's encoding
 * (absent if sk is NULL), truncated as described above.  pk and sk are
 * normalised scalars of type S, N or B within the size limits. */
void st_key_item(st_key *k, uint32_t table, uint16_t index, const st_value *pk, const st_value *sk);

/* Appends to k the order-preserving encoding of scalar v (S, N or B), with its
 * terminator, or without it when as_prefix (the encoding of a begins_with
 * prefix: every value starting with v encodes to bytes starting with this).
 * Stops silently at ST_KEY_MAX bytes; returns false if it had to stop. */
bool st_key_append_scalar(st_key *k, const st_value *v, bool as_prefix);

/* The order-preserving encoding of a scalar into buf (cap bytes); returns its
 * length, or 0 if cap is too small.  Exposed for the property test. */
size_t st_key_encode_scalar(uint8_t *buf, size_t cap, const st_value *v);

/* ------------------------------------------------------------------------ */
/* Secondary-index entry keys (layout at the top of keyenc.c)                */
/* ------------------------------------------------------------------------ */

/* The 16-byte digest of a base item's key (pk, sk; sk NULL without one). */
void st_key_base_digest(uint8_t out[16], uint32_t table, const st_value *pk, const st_value *sk);

/* The 22-byte header of one GSI index partition (table, index, shard, GSI pk). */
void st_key_gsi_partition(st_key *k, uint32_t table, uint16_t index, uint32_t shard,
                          const st_value *gsi_pk);

/* A GSI entry key: partition header, enc(GSI sk) (none if gsi_sk is NULL),
 * the base-key digest; truncated to ST_KEY_MAX as keyenc.c describes. */
void st_key_gsi_entry(st_key *k, uint32_t table, uint16_t index, uint32_t shard,
                      const st_value *gsi_pk, const st_value *gsi_sk, const uint8_t digest[16]);

/* An LSI entry key: the base pk's partition header under the index id,
 * enc(LSI sk), the base-key digest. */
void st_key_lsi_entry(st_key *k, uint32_t table, uint16_t index, const st_value *base_pk,
                      const st_value *lsi_sk, const uint8_t digest[16]);

/* Whether an LMDB key is a truncated key (length ST_KEY_MAX). */
static inline bool st_key_truncated(const uint8_t *key, size_t len)
{
	(void)key;
	return len == ST_KEY_MAX;
}

/* Smallest key greater than every key starting with prefix k (increments the
 * last byte that is not 0xff and drops what follows).  Returns false if k is
 * all 0xff (no such key). */
bool st_key_prefix_end(st_key *k);

#endif
