/*
 * stream_shards.c -- a stream's shards: hash ranges of a table held by this
 * group over spans of its log ("Shards" at the top of stream.h, which also
 * has the 'S' record's layout).
 *
 * A table has few 'S' records in a group (one per range change that
 * happened here since their spans were trimmed), so every operation reads
 * them all into an array and decides on it: one place that walks them
 * (shards_load), and no index to keep.
 */
#include <string.h>

#include "index_int.h"
#include "stream_int.h"

#define SHARD_KEY 22 /* 0x03 'S' | table (4) | lo (8) | start (8) */
#define SHARD_VAL 37 /* hi | end | has_parent | parent_group | parent_lo | parent_start */

static void shard_key(uint8_t k[SHARD_KEY], uint32_t table, uint64_t lo, uint64_t start)
{
	st_stream_meta_key(k, KIND_SHARD, table);
	st_put_be64(k + 6, lo);
	st_put_be64(k + 14, start);
}

static bool shard_decode(const MDB_val *k, const MDB_val *v, st_shard *s)
{
	const uint8_t *kp = k->mv_data, *p = v->mv_data;
	if (k->mv_size != SHARD_KEY || v->mv_size != SHARD_VAL || p[16] > 1)
		return false;
	s->lo = st_get_be64(kp + 6);
	s->start = st_get_be64(kp + 14);
	s->hi = st_get_be64(p);
	s->end = st_get_be64(p + 8);
	s->has_parent = p[16] != 0;
	s->parent_group = st_get_be32(p + 17);
	s->parent_lo = st_get_be64(p + 21);
	s->parent_start = st_get_be64(p + 29);
	return s->lo <= s->hi && (s->end == 0 || s->end > s->start);
}

static int corrupt(uint32_t table, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt stream shard record of table %u", table);
}

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "stream shards: out of memory");
}

/* Every 'S' record of table as txn sees it, in (lo, start) order; *out in
 * a (NULL when *n is 0). */
static int shards_load(MDB_txn *txn, st_env *env, uint32_t table, sh_arena *a, st_shard **out,
                       uint32_t *n, char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta stream shards)", errmsg);
	uint8_t prefix[6];
	st_stream_meta_key(prefix, KIND_SHARD, table);
	MDB_val k = {sizeof(prefix), prefix}, v;
	uint32_t cap = 0;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < sizeof(prefix) || memcmp(k.mv_data, prefix, sizeof(prefix)) != 0)
			break;
		if (*n == cap) {
			uint32_t ncap = cap != 0 ? cap * 2 : 8;
			st_shard *s2 = sh_arena_calloc(a, ncap, sizeof(*s2));
			if (s2 == NULL) {
				rc = nomem(errmsg);
				break;
			}
			if (*n > 0)
				memcpy(s2, *out, *n * sizeof(*s2));
			*out = s2;
			cap = ncap;
		}
		if (!shard_decode(&k, &v, &(*out)[*n])) {
			rc = corrupt(table, errmsg);
			break;
		}
		(*n)++;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta stream shards)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* Whether the static shard is implicit: held, and never closed (no record
 * at (static_lo, 0) among s). */
static bool static_implicit(const st_shard *s, uint32_t n, bool has_static, uint64_t static_lo)
{
	if (!has_static)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (s[i].lo == static_lo && s[i].start == 0)
			return false;
	return true;
}

static st_shard static_shard(uint64_t static_lo, uint64_t static_hi)
{
	return (st_shard){.lo = static_lo, .hi = static_hi};
}

static bool contains(const st_shard *s, uint64_t lo, uint64_t hi)
{
	return s->lo <= lo && hi <= s->hi;
}

static int shard_put(st_txn *txn, uint32_t table, const st_shard *s, char *errmsg)
{
	uint8_t kb[SHARD_KEY], vb[SHARD_VAL];
	shard_key(kb, table, s->lo, s->start);
	st_put_be64(vb, s->hi);
	st_put_be64(vb + 8, s->end);
	vb[16] = s->has_parent ? 1 : 0;
	st_put_be32(vb + 17, s->parent_group);
	st_put_be64(vb + 21, s->parent_lo);
	st_put_be64(vb + 29, s->parent_start);
	MDB_val k = {sizeof(kb), kb}, v = {sizeof(vb), vb};
	int mrc = mdb_put(txn->txn, txn->env->meta, &k, &v, 0);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_put(meta stream shard)", errmsg);
}

/* Returns rc, poisoning txn first (every error that reaches it is
 * environmental: the client-class ones are returned before). */
static int fail(st_txn *txn, int rc, char *errmsg)
{
	return st_txn_poison(txn, rc, errmsg);
}

static int sticky(const st_txn *txn, char *errmsg)
{
	return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
}

static int empty_range(uint64_t lo, uint64_t hi, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION, "stream shard range [%016llx, %016llx] is empty",
	               (unsigned long long)lo, (unsigned long long)hi);
}

/* ------------------------------------------------------------------------ */
/* Apply side                                                                */
/* ------------------------------------------------------------------------ */

/* Disk for n shard records and the counter, reserved before the first
 * write (an operation is whole or not at all). */
static int reserve(st_txn *txn, uint32_t n, char *errmsg)
{
	return st_txn_reserve(
	    txn, n * (SHARD_KEY + SHARD_VAL + ST_RESERVE_PER_KEY) + 14 + ST_RESERVE_PER_KEY,
	    errmsg);
}

int st_stream_shard_leave(st_txn *txn, uint32_t group, uint32_t table, uint64_t mlo, uint64_t mhi,
                          bool has_static, uint64_t static_lo, uint64_t static_hi, st_shard *closed,
                          bool *found, char *errmsg)
{
	*found = false;
	memset(closed, 0, sizeof(*closed));
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	if (mlo > mhi)
		return empty_range(mlo, mhi, errmsg);
	sh_arena a;
	sh_arena_init(&a);
	st_shard *s;
	uint32_t n;
	int rc = shards_load(txn->txn, txn->env, table, &a, &s, &n, errmsg);
	/* Open shards are disjoint: at most one contains the range. */
	bool hit = false;
	for (uint32_t i = 0; rc == SHOAL_OK && i < n && !hit; i++)
		if (s[i].end == 0 && contains(&s[i], mlo, mhi)) {
			*closed = s[i];
			hit = true;
		}
	if (rc == SHOAL_OK && !hit && static_implicit(s, n, has_static, static_lo)) {
		st_shard st = static_shard(static_lo, static_hi);
		if (contains(&st, mlo, mhi)) {
			*closed = st;
			hit = true;
		}
	}
	sh_arena_fini(&a);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	if (!hit)
		return SHOAL_OK;
	uint64_t seq;
	rc = reserve(txn, 3, errmsg);
	if (rc == SHOAL_OK)
		rc = st_stream_seq_reserve(txn, table, &seq, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	/* The closed shard's record (the static shard gets its first: it is no
	 * longer implicit), then the remainders, its children. */
	closed->end = seq;
	st_shard child = {.start = seq,
	                  .has_parent = true,
	                  .parent_group = group,
	                  .parent_lo = closed->lo,
	                  .parent_start = closed->start};
	rc = shard_put(txn, table, closed, errmsg);
	if (rc == SHOAL_OK && closed->lo < mlo) {
		child.lo = closed->lo;
		child.hi = mlo - 1;
		rc = shard_put(txn, table, &child, errmsg);
	}
	if (rc == SHOAL_OK && mhi < closed->hi) {
		child.lo = mhi + 1;
		child.hi = closed->hi;
		rc = shard_put(txn, table, &child, errmsg);
	}
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	*found = true;
	return SHOAL_OK;
}

static bool same_parent(const st_shard *s, bool has_parent, uint32_t group, uint64_t lo,
                        uint64_t start)
{
	if (s->has_parent != has_parent)
		return false;
	return !has_parent ||
	       (s->parent_group == group && s->parent_lo == lo && s->parent_start == start);
}

int st_stream_shard_arrive(st_txn *txn, uint32_t table, uint64_t lo, uint64_t hi, bool has_parent,
                           uint32_t parent_group, uint64_t parent_lo, uint64_t parent_start,
                           char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	if (lo > hi)
		return empty_range(lo, hi, errmsg);
	sh_arena a;
	sh_arena_init(&a);
	st_shard *s;
	uint32_t n;
	int rc = shards_load(txn->txn, txn->env, table, &a, &s, &n, errmsg);
	bool again = false;
	for (uint32_t i = 0; rc == SHOAL_OK && i < n && !again; i++)
		again = s[i].end == 0 && s[i].lo == lo && s[i].hi == hi &&
		        same_parent(&s[i], has_parent, parent_group, parent_lo, parent_start);
	sh_arena_fini(&a);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	if (again)
		return SHOAL_OK; /* the same entry applied again */
	st_shard sh = {.lo = lo, .hi = hi, .has_parent = has_parent};
	if (has_parent) {
		sh.parent_group = parent_group;
		sh.parent_lo = parent_lo;
		sh.parent_start = parent_start;
	}
	rc = reserve(txn, 1, errmsg);
	if (rc == SHOAL_OK)
		rc = st_stream_seq_reserve(txn, table, &sh.start, errmsg);
	if (rc == SHOAL_OK)
		rc = shard_put(txn, table, &sh, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : fail(txn, rc, errmsg);
}

int st_stream_shards_trimmed(st_txn *txn, uint32_t table, uint64_t trimmed, char *errmsg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_shard *s;
	uint32_t n;
	int rc = shards_load(txn->txn, txn->env, table, &a, &s, &n, errmsg);
	/* The static shard's record stays: without it the shard would be
	 * implicit, hence open, again. */
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++) {
		if (s[i].end == 0 || s[i].start == 0 || s[i].end - 1 > trimmed)
			continue;
		uint8_t kb[SHARD_KEY];
		shard_key(kb, table, s[i].lo, s[i].start);
		MDB_val k = {sizeof(kb), kb};
		int mrc = mdb_del(txn->txn, txn->env->meta, &k, NULL);
		if (mrc != 0)
			rc = st_lmdb_err(mrc, "mdb_del(meta stream shard)", errmsg);
	}
	sh_arena_fini(&a);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                     */
/* ------------------------------------------------------------------------ */

static int read_begin(st_env *env, MDB_txn **txn, char *errmsg)
{
	int mrc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, txn);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_txn_begin(read)", errmsg);
}

int st_stream_shard_list(st_env *env, uint32_t table, bool has_static, uint64_t static_lo,
                         uint64_t static_hi, sh_arena *a, st_shard **out, uint32_t *n, char *errmsg)
{
	*out = NULL;
	*n = 0;
	MDB_txn *txn;
	int rc = read_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_shard *s;
	uint32_t m;
	rc = shards_load(txn, env, table, a, &s, &m, errmsg);
	mdb_txn_abort(txn);
	if (rc != SHOAL_OK)
		return rc;
	if (!static_implicit(s, m, has_static, static_lo)) {
		*out = s;
		*n = m;
		return SHOAL_OK;
	}
	st_shard *all = sh_arena_calloc(a, m + 1, sizeof(*all));
	if (all == NULL)
		return nomem(errmsg);
	/* In (lo, start) order: before the first record past (static_lo, 0),
	 * i.e. the first with a higher lo or the same lo (start > 0 then). */
	uint32_t at = 0;
	while (at < m && s[at].lo < static_lo)
		at++;
	if (at > 0)
		memcpy(all, s, at * sizeof(*all));
	all[at] = static_shard(static_lo, static_hi);
	if (m > at)
		memcpy(all + at + 1, s + at, (m - at) * sizeof(*all));
	*out = all;
	*n = m + 1;
	return SHOAL_OK;
}

int st_stream_shard_get(st_env *env, uint32_t table, uint64_t lo, uint64_t start, bool has_static,
                        uint64_t static_lo, uint64_t static_hi, st_shard *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	MDB_txn *txn;
	int rc = read_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint8_t kb[SHARD_KEY];
	shard_key(kb, table, lo, start);
	MDB_val k = {sizeof(kb), kb}, v;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	if (mrc == 0 && !shard_decode(&k, &v, out))
		rc = corrupt(table, errmsg);
	else if (mrc == MDB_NOTFOUND && has_static && lo == static_lo && start == 0)
		*out = static_shard(static_lo, static_hi);
	else if (mrc == MDB_NOTFOUND)
		rc = sh_errf(errmsg, SHOAL_E_NOT_FOUND,
		             "Requested resource not found: Shard does not exist");
	else if (mrc != 0)
		rc = st_lmdb_err(mrc, "mdb_get(meta stream shard)", errmsg);
	mdb_txn_abort(txn);
	return rc;
}

static int last_closed(MDB_txn *txn, st_env *env, uint32_t table, uint64_t mlo, uint64_t mhi,
                       st_shard *out, bool *found, char *errmsg)
{
	*found = false;
	memset(out, 0, sizeof(*out));
	sh_arena a;
	sh_arena_init(&a);
	st_shard *s;
	uint32_t n;
	int rc = shards_load(txn, env, table, &a, &s, &n, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++)
		if (s[i].end != 0 && contains(&s[i], mlo, mhi) &&
		    (!*found || s[i].end > out->end)) {
			*out = s[i];
			*found = true;
		}
	sh_arena_fini(&a);
	return rc;
}

int st_stream_shard_last_closed(st_env *env, uint32_t table, uint64_t mlo, uint64_t mhi,
                                st_shard *out, bool *found, char *errmsg)
{
	MDB_txn *txn;
	int rc = read_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = last_closed(txn, env, table, mlo, mhi, out, found, errmsg);
	mdb_txn_abort(txn);
	return rc;
}

int st_stream_shard_last_closed_txn(st_txn *txn, uint32_t table, uint64_t mlo, uint64_t mhi,
                                    st_shard *out, bool *found, char *errmsg)
{
	*found = false;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	int rc = last_closed(txn->txn, txn->env, table, mlo, mhi, out, found, errmsg);
	return rc == SHOAL_OK ? SHOAL_OK : fail(txn, rc, errmsg);
}
