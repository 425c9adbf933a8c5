/*
 * keyenc.c -- LMDB key layout and the order-preserving encoding of sort keys.
 *
 * Every LMDB key of an item (or index entry) is, byte by byte:
 *
 *   offset  size  field
 *   0       4     table id, unsigned 32-bit big-endian
 *   4       2     index id, unsigned 16-bit big-endian (0 = the base table)
 *   6       16    partition-key digest: XXH3-128 (xxhash 0.8, XXH3_128bits_withSeed,
 *                 seed PK_SEED below) of (table id as 4 big-endian bytes ||
 *                 the partition key's canonical bytes), written high64 then
 *                 low64, each big-endian.  Bytes 6..13 are therefore the
 *                 placement hash st_key_hash: items of one partition-key value
 *                 are contiguous and a hash range is a contiguous key range.
 *   22      *     the sort key's order-preserving encoding (absent for a table
 *                 without a sort key), possibly truncated, see below.
 *
 * Canonical partition-key bytes: S -> its UTF-8 bytes, B -> its bytes,
 * N -> its canonical text (st_num_format), so "1.0" and "1" are one key.
 *
 * Sort-key encoding (memcmp order of encodings == st_value_cmp order of values
 * of one type; every encoding is self-delimiting, so no encoding is a proper
 * prefix of another):
 *
 *   S, B: each byte as is, except 0x00 written as 0x00 0xFF; then the
 *         terminator 0x00 0x00.  A value's encoding without the terminator is
 *         a prefix of the encoding of every value that starts with it
 *         (begins_with).  Length: up to 2 * len + 2.
 *
 *   N:    zero:     0x02
 *         positive: 0x03, E, D...
 *         negative: 0x01, 255 - E, then every byte of D as 255 - byte
 *         where E = exp + 129 (exp in [-129, 126] as in st_num, so 0..255)
 *         and D packs the digits two per byte: the pair (a, b) (b = 0 when
 *         the last pair is a single digit) becomes 2 * (10a + b) + 1 when more
 *         pairs follow and 2 * (10a + b) for the last pair.  Digits have no
 *         trailing zeros, so at equal exponents the digit strings compare as
 *         the numbers do, with a proper prefix smaller; the odd/even last bit
 *         makes a shorter string's final byte sort below a longer string's
 *         continuing byte with the same digits.  Negatives invert every byte
 *         after the tag so larger magnitudes sort first.  Length: 1 or 2 + up
 *         to 19 bytes.
 *
 * Truncation: LMDB keys are at most ST_KEY_MAX (511) bytes.  When the sort key
 * encoding is longer than ST_KEY_SK_INLINE (473) bytes, the key holds its
 * first ST_KEY_SK_INLINE bytes and then a 16-byte XXH3-128 digest of the whole
 * encoding (seed SK_SEED, high64 then low64 big-endian), so a truncated key is
 * exactly ST_KEY_MAX bytes and an untruncated one at most 22 + 473 = 495.
 * An untruncated encoding is never a prefix of another (self-delimiting), so
 * truncated keys order correctly against every other key except truncated
 * keys sharing the same 473-byte prefix, which are ordered by digest: readers
 * re-sort such runs by the real value (keyenc.h, st_key_truncated).
 *
 * Secondary-index entries (index.h) use the same 22-byte header shape:
 *
 *   GSI entry key:
 *   0       4     table id
 *   4       2     index id (1..)
 *   6       16    index-partition digest: XXH3-128 (seed IX_SEED) of
 *                 (table id BE4 || index id BE2 || write shard BE4 || the GSI
 *                 partition key's canonical bytes), high64 then low64.  Bytes
 *                 6..13 are st_index_hash: a hash range of index partitions is
 *                 one contiguous key range.
 *   22      *     enc(GSI sort key), as a base sort key (absent without one)
 *   ..      16    base-key digest (below)
 *
 *   LSI entry key:
 *   0       4     table id
 *   4       2     index id (1..)
 *   6       16    the base item's partition-key digest (as its own key:
 *                 bytes 6..13 are st_key_hash of the base pk)
 *   22      *     enc(LSI sort key)
 *   ..      16    base-key digest
 *
 *   Base-key digest: XXH3-128 (seed BK_SEED) of (table id BE4 || u32 BE
 *   length of the base pk's canonical bytes || those bytes || enc(base sort
 *   key), absent without one), high64 then low64.  The write shard of a GSI
 *   entry is its high64 mod WriteShards (st_index_shard).
 *
 *   When the sort-key encoding does not fit (22 + enc + 16 > 511), the entry
 *   key holds the first ST_KEY_SK_INLINE (473) bytes of enc and then the
 *   base-key digest: exactly ST_KEY_MAX bytes, a truncated key like a base
 *   item's.  A run of truncated keys sharing their first 495 bytes is
 *   re-sorted by readers by (sort-key value, last 16 key bytes): for base
 *   items those bytes are the sort-key digest (equal values have equal
 *   keys), for index entries the base-key digest, which is the order
 *   st_index_entry_cmp gives.
 */
#include <assert.h>
#include <string.h>

/* For XXH3_state_t on the stack (XXH3_INITSTATE); no heap allocation. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "index.h"
#include "keyenc.h"

/* Fixed seeds: changing either changes every key on disk. */
#define PK_SEED UINT64_C(0x53686f616c504b31) /* "ShoalPK1" */
#define SK_SEED UINT64_C(0x53686f616c534b31) /* "ShoalSK1" */
#define IX_SEED UINT64_C(0x53686f616c495831) /* "ShoalIX1" */
#define BK_SEED UINT64_C(0x53686f616c424b31) /* "ShoalBK1" */

#define N_NEG  0x01
#define N_ZERO 0x02
#define N_POS  0x03

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static void put_digest(uint8_t *p, XXH128_hash_t h)
{
	put_be64(p, h.high64);
	put_be64(p + 8, h.low64);
}

void st_key_table(st_key *k, uint32_t table, uint16_t index)
{
	k->b[0] = (uint8_t)(table >> 24);
	k->b[1] = (uint8_t)(table >> 16);
	k->b[2] = (uint8_t)(table >> 8);
	k->b[3] = (uint8_t)table;
	k->b[4] = (uint8_t)(index >> 8);
	k->b[5] = (uint8_t)index;
	k->len = 6;
}

void st_key_hash_bound(st_key *k, uint32_t table, uint16_t index, uint64_t hash)
{
	st_key_table(k, table, index);
	put_be64(k->b + 6, hash);
	k->len = 14;
}

/* The canonical bytes of a partition-key value (buf: ST_NUM_MAX_TEXT bytes
 * of room for a number's text). */
static const void *pk_bytes(const st_value *pk, char *buf, size_t *len)
{
	assert(pk->type == ST_S || pk->type == ST_N || pk->type == ST_B);
	*len = pk->u.str.len;
	if (pk->type == ST_N) {
		/* Normalised numbers are canonical already; re-format anyway so a
		 * non-canonical spelling can never address a different partition. */
		st_num n;
		if (st_num_parse(pk->u.str.ptr, pk->u.str.len, &n, NULL) == SHOAL_OK) {
			*len = st_num_format(&n, buf);
			return buf;
		}
	}
	return pk->u.str.ptr;
}

/* The partition-key digest over (table id BE || canonical key bytes). */
static XXH128_hash_t pk_digest(uint32_t table, const st_value *pk)
{
	uint8_t tid[4] = {(uint8_t)(table >> 24), (uint8_t)(table >> 16), (uint8_t)(table >> 8),
	                  (uint8_t)table};
	char buf[ST_NUM_MAX_TEXT];
	size_t len;
	const void *p = pk_bytes(pk, buf, &len);
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset_withSeed(&st, PK_SEED);
	XXH3_128bits_update(&st, tid, sizeof(tid));
	if (len > 0)
		XXH3_128bits_update(&st, p, len);
	return XXH3_128bits_digest(&st);
}

/* The index-partition digest of a GSI entry. */
static XXH128_hash_t ix_digest(uint32_t table, uint16_t index, uint32_t shard, const st_value *pk)
{
	uint8_t hdr[10];
	st_key k;
	st_key_table(&k, table, index);
	memcpy(hdr, k.b, 6);
	hdr[6] = (uint8_t)(shard >> 24);
	hdr[7] = (uint8_t)(shard >> 16);
	hdr[8] = (uint8_t)(shard >> 8);
	hdr[9] = (uint8_t)shard;
	char buf[ST_NUM_MAX_TEXT];
	size_t len;
	const void *p = pk_bytes(pk, buf, &len);
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset_withSeed(&st, IX_SEED);
	XXH3_128bits_update(&st, hdr, sizeof(hdr));
	if (len > 0)
		XXH3_128bits_update(&st, p, len);
	return XXH3_128bits_digest(&st);
}

uint64_t st_index_hash(uint32_t table_id, uint16_t index_id, uint32_t shard, const st_value *gsi_pk)
{
	return ix_digest(table_id, index_id, shard, gsi_pk).high64;
}

uint64_t st_key_hash(uint32_t table_id, const st_value *pk)
{
	return pk_digest(table_id, pk).high64;
}

void st_key_partition(st_key *k, uint32_t table, uint16_t index, const st_value *pk)
{
	st_key_table(k, table, index);
	put_digest(k->b + 6, pk_digest(table, pk));
	k->len = ST_KEY_HEADER;
}

/* Encodes number text into out (at least 21 bytes); returns the length.
 * Text that does not parse (never the case for normalised values) encodes as
 * zero rather than failing. */
static size_t encode_number(uint8_t *out, const st_value *v)
{
	st_num n;
	if (st_num_parse(v->u.str.ptr, v->u.str.len, &n, NULL) != SHOAL_OK || n.sign == 0) {
		out[0] = N_ZERO;
		return 1;
	}
	bool neg = n.sign < 0;
	uint8_t flip = neg ? 0xff : 0x00;
	size_t len = 0;
	out[len++] = neg ? N_NEG : N_POS;
	out[len++] = (uint8_t)((n.exp + 129) ^ flip);
	for (int i = 0; i < n.ndigits; i += 2) {
		int pair = n.d[i] * 10 + (i + 1 < n.ndigits ? n.d[i + 1] : 0);
		bool more = i + 2 < n.ndigits;
		out[len++] = (uint8_t)((2 * pair + (more ? 1 : 0)) ^ flip);
	}
	return len;
}

/* Appends at most cap - *len bytes; returns false if it had to stop. */
static bool put(uint8_t *buf, size_t cap, size_t *len, const uint8_t *p, size_t n)
{
	size_t room = cap - *len;
	bool fits = n <= room;
	if (!fits)
		n = room;
	memcpy(buf + *len, p, n);
	*len += n;
	return fits;
}

/* Writes the encoding of v into buf (cap bytes) from *len; false if it did
 * not fit (buf then holds as much as fitted). */
static bool encode(uint8_t *buf, size_t cap, size_t *len, const st_value *v, bool as_prefix)
{
	assert(v->type == ST_S || v->type == ST_N || v->type == ST_B);
	if (v->type == ST_N) {
		uint8_t tmp[24];
		size_t n = encode_number(tmp, v);
		return put(buf, cap, len, tmp, n);
	}
	const uint8_t *p = (const uint8_t *)v->u.str.ptr;
	size_t n = v->u.str.len;
	static const uint8_t esc[2] = {0x00, 0xff}, term[2] = {0x00, 0x00};
	size_t i = 0;
	while (i < n) {
		/* Copy the run up to the next 0x00 in one go. */
		const uint8_t *z = memchr(p + i, 0, n - i);
		size_t run = z == NULL ? n - i : (size_t)(z - (p + i));
		if (!put(buf, cap, len, p + i, run))
			return false;
		i += run;
		if (i < n) {
			if (!put(buf, cap, len, esc, 2))
				return false;
			i++;
		}
	}
	return as_prefix || put(buf, cap, len, term, 2);
}

size_t st_key_encode_scalar(uint8_t *buf, size_t cap, const st_value *v)
{
	size_t len = 0;
	if (!encode(buf, cap, &len, v, false))
		return 0;
	return len;
}

bool st_key_append_scalar(st_key *k, const st_value *v, bool as_prefix)
{
	size_t len = k->len;
	assert(len <= ST_KEY_MAX);
	bool ok = encode(k->b, ST_KEY_MAX, &len, v, as_prefix);
	k->len = (uint16_t)len;
	return ok;
}

/* Length of v's full encoding. */
static size_t encoded_len(const st_value *v)
{
	if (v->type == ST_N) {
		uint8_t tmp[24];
		return encode_number(tmp, v);
	}
	size_t zeros = 0;
	const uint8_t *p = (const uint8_t *)v->u.str.ptr;
	for (size_t i = 0; i < v->u.str.len; i++)
		zeros += p[i] == 0;
	return (size_t)v->u.str.len + zeros + 2;
}

/* Feeds the order-preserving encoding of an S or B value to st without
 * building it: runs of bytes, 0x00 escaped as 0x00 0xFF, the terminator. */
static void digest_update_encoding(XXH3_state_t *st, const st_value *v)
{
	static const uint8_t esc[2] = {0x00, 0xff}, term[2] = {0x00, 0x00};
	const uint8_t *p = (const uint8_t *)v->u.str.ptr;
	size_t n = v->u.str.len, i = 0;
	while (i < n) {
		const uint8_t *z = memchr(p + i, 0, n - i);
		size_t run = z == NULL ? n - i : (size_t)(z - (p + i));
		XXH3_128bits_update(st, p + i, run);
		i += run;
		if (i < n) {
			XXH3_128bits_update(st, esc, 2);
			i++;
		}
	}
	XXH3_128bits_update(st, term, 2);
}

/* XXH3-128 of v's full encoding, computed as a stream (S and B only). */
static XXH128_hash_t encoding_digest(const st_value *v)
{
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset_withSeed(&st, SK_SEED);
	digest_update_encoding(&st, v);
	return XXH3_128bits_digest(&st);
}

void st_key_item(st_key *k, uint32_t table, uint16_t index, const st_value *pk, const st_value *sk)
{
	st_key_partition(k, table, index, pk);
	if (sk == NULL)
		return;
	size_t len = ST_KEY_HEADER;
	if (encoded_len(sk) <= ST_KEY_SK_INLINE) {
		bool ok = encode(k->b, ST_KEY_MAX, &len, sk, false);
		assert(ok);
		(void)ok;
		k->len = (uint16_t)len;
		return;
	}
	/* Only S and B get this long: inline prefix, then the digest. */
	encode(k->b, ST_KEY_HEADER + ST_KEY_SK_INLINE, &len, sk, false);
	assert(len == ST_KEY_HEADER + ST_KEY_SK_INLINE);
	put_digest(k->b + ST_KEY_HEADER + ST_KEY_SK_INLINE, encoding_digest(sk));
	k->len = ST_KEY_MAX;
}

bool st_key_prefix_end(st_key *k)
{
	size_t n = k->len;
	while (n > 0 && k->b[n - 1] == 0xff)
		n--;
	if (n == 0)
		return false;
	k->b[n - 1]++;
	k->len = (uint16_t)n;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Index entry keys                                                          */
/* ------------------------------------------------------------------------ */

static XXH128_hash_t base_digest(uint32_t table, const st_value *pk, const st_value *sk)
{
	uint8_t hdr[8] = {(uint8_t)(table >> 24), (uint8_t)(table >> 16), (uint8_t)(table >> 8),
	                  (uint8_t)table};
	char buf[ST_NUM_MAX_TEXT];
	size_t len;
	const void *p = pk_bytes(pk, buf, &len);
	hdr[4] = (uint8_t)(len >> 24);
	hdr[5] = (uint8_t)(len >> 16);
	hdr[6] = (uint8_t)(len >> 8);
	hdr[7] = (uint8_t)len;
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset_withSeed(&st, BK_SEED);
	XXH3_128bits_update(&st, hdr, sizeof(hdr));
	if (len > 0)
		XXH3_128bits_update(&st, p, len);
	if (sk != NULL) {
		if (sk->type == ST_N) {
			uint8_t tmp[24];
			size_t n = encode_number(tmp, sk);
			XXH3_128bits_update(&st, tmp, n);
		} else {
			digest_update_encoding(&st, sk);
		}
	}
	return XXH3_128bits_digest(&st);
}

void st_key_base_digest(uint8_t out[16], uint32_t table, const st_value *pk, const st_value *sk)
{
	put_digest(out, base_digest(table, pk, sk));
}

uint32_t st_index_shard(uint32_t table_id, const st_value *base_pk, const st_value *base_sk,
                        uint32_t n)
{
	if (n <= 1)
		return 0;
	return (uint32_t)(base_digest(table_id, base_pk, base_sk).high64 % n);
}

/* header (22 bytes, already in k) | enc(sk), cut to fit | base digest. */
static void entry_tail(st_key *k, const st_value *sk, const uint8_t digest[16])
{
	size_t len = ST_KEY_HEADER;
	if (sk != NULL && !encode(k->b, ST_KEY_HEADER + ST_KEY_SK_INLINE, &len, sk, false))
		assert(len == ST_KEY_HEADER + ST_KEY_SK_INLINE); /* truncated */
	memcpy(k->b + len, digest, 16);
	k->len = (uint16_t)(len + 16);
}

void st_key_gsi_entry(st_key *k, uint32_t table, uint16_t index, uint32_t shard,
                      const st_value *gsi_pk, const st_value *gsi_sk, const uint8_t digest[16])
{
	st_key_gsi_partition(k, table, index, shard, gsi_pk);
	entry_tail(k, gsi_sk, digest);
}

void st_key_gsi_partition(st_key *k, uint32_t table, uint16_t index, uint32_t shard,
                          const st_value *gsi_pk)
{
	st_key_table(k, table, index);
	put_digest(k->b + 6, ix_digest(table, index, shard, gsi_pk));
	k->len = ST_KEY_HEADER;
}

void st_key_lsi_entry(st_key *k, uint32_t table, uint16_t index, const st_value *base_pk,
                      const st_value *lsi_sk, const uint8_t digest[16])
{
	st_key_partition(k, table, index, base_pk);
	entry_tail(k, lsi_sk, digest);
}
