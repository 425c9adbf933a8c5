/*
 * scrub.c -- st_txn_scrub: a checksum of a range of a whole environment, the
 * storage half of the replica scrub (node/scrub.c has the protocol).
 *
 * Every replica applies the same scrub operation at the same Raft index
 * inside its apply's write transaction, so replicas that hold the same data
 * compute the same result, and a replica whose LMDB file differs from its
 * peers' (a flipped bit, a bug that wrote without Raft) computes another.
 *
 * The key space.  A scrub key is one byte, the database (st_dbi: 0 catalog,
 * 1 meta, 2 data), followed by the LMDB key.  Ranges walk catalog, then
 * meta, then data, each in LMDB's key order; meta's "applied" key (the Raft
 * index, different at every entry) is skipped.
 *
 * The hash.  XXH64 (seed 0) over, for every pair of the range in order:
 *
 *     offset  size   field
 *     0       1      database (st_dbi)
 *     1       4      key length (u32, little-endian)
 *     5       klen   key bytes
 *     5+klen  4      value length (u32, little-endian)
 *     9+klen  vlen   value bytes
 *
 * A range ends after max_keys pairs (its end is the next pair's scrub key)
 * or at the end of the key space (end_len 0).
 */
#include <string.h>

#include <xxhash.h>

#include "engine.h"
#include "snapshot.h"

static const char KEY_APPLIED[] = "applied";

static MDB_dbi dbi_of(const st_env *env, int d)
{
	return d == ST_DBI_CATALOG ? env->catalog : d == ST_DBI_META ? env->meta : env->data;
}

static void put_le32(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static bool skipped(int d, const MDB_val *k)
{
	return d == ST_DBI_META && k->mv_size == sizeof(KEY_APPLIED) - 1 &&
	       memcmp(k->mv_data, KEY_APPLIED, k->mv_size) == 0;
}

int st_txn_scrub(st_txn *txn, const void *start, size_t start_len, uint32_t max_keys, sh_arena *a,
                 st_scrub *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	int rc = st_txn_catalog_flush(txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (max_keys == 0)
		max_keys = 1;
	const uint8_t *s = start;
	int first = start_len > 0 ? s[0] : 0;
	XXH64_state_t *xxh = XXH64_createState();
	if (xxh == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "scrub: out of memory");
	XXH64_reset(xxh, 0);
	rc = SHOAL_OK;
	for (int d = first; d < ST_DBI__COUNT && rc == SHOAL_OK; d++) {
		MDB_cursor *c;
		int mrc = mdb_cursor_open(txn->txn, dbi_of(txn->env, d), &c);
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "scrub: mdb_cursor_open", errmsg);
			break;
		}
		MDB_val k = {0, NULL}, v;
		MDB_cursor_op op = MDB_FIRST;
		if (d == first && start_len > 1) {
			k.mv_size = start_len - 1;
			k.mv_data = (void *)(s + 1);
			op = MDB_SET_RANGE;
		}
		for (mrc = mdb_cursor_get(c, &k, &v, op); mrc == 0;
		     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			if (skipped(d, &k))
				continue;
			if (out->count == max_keys) {
				uint8_t *e = sh_arena_alloc(a, k.mv_size + 1);
				if (e == NULL) {
					rc = sh_errf(errmsg, SHOAL_E_NOMEM, "scrub: out of memory");
				} else {
					e[0] = (uint8_t)d;
					memcpy(e + 1, k.mv_data, k.mv_size);
					out->end = e;
					out->end_len = k.mv_size + 1;
				}
				break;
			}
			uint8_t hdr[5] = {(uint8_t)d};
			put_le32(hdr + 1, k.mv_size);
			XXH64_update(xxh, hdr, sizeof(hdr));
			XXH64_update(xxh, k.mv_data, k.mv_size);
			put_le32(hdr, v.mv_size);
			XXH64_update(xxh, hdr, 4);
			XXH64_update(xxh, v.mv_data, v.mv_size);
			out->count++;
		}
		if (rc == SHOAL_OK && out->end == NULL && mrc != MDB_NOTFOUND)
			rc = st_lmdb_err(mrc, "scrub: mdb_cursor_get", errmsg);
		mdb_cursor_close(c);
		if (out->end != NULL)
			break;
	}
	out->hash = XXH64_digest(xxh);
	XXH64_freeState(xxh);
	return rc;
}
