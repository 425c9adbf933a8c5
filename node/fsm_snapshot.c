/*
 * fsm_snapshot.c -- Raft snapshots of a storage group's LMDB environment
 * (raft_fsm version 3: snapshot, snapshot_async, snapshot_finalize, restore).
 *
 * Snapshot format, version 1.  Integers are big-endian.
 *
 *   offset  size  field
 *   0       8     magic "SHOALSNP"
 *   8       4     format version (u32) = 1
 *   12      4     storage group id (u32); restore refuses another group's
 *   16      8     applied index (u64): the Raft index stored in the
 *                 environment when the view was taken (meta "applied")
 *   24      ..    three sections, in this order: catalog (tag 0), meta
 *                 (tag 1), data (tag 2).  Each section:
 *                   1   tag (u8)
 *                   8   number of pairs (u64)
 *                   then for every (key, value) of that LMDB database, in
 *                   key order (memcmp):
 *                     4   key length (u32, 1..LMDB's max key size)
 *                     k   key bytes
 *                     4   value length (u32)
 *                     v   value bytes
 *   end-8   8     XXH64 (seed 0) of every byte before it (u64)
 *
 * Keys and values are the storage engine's own encodings, copied verbatim
 * (formats at the top of storage/env.c, catalog_codec.c, keyenc.c, codec.c); the
 * meta section carries "format", "applied" and "next_table_id", so a restored
 * environment is exactly the snapshotted one, applied index included.
 *
 * Taking a snapshot.  raft calls snapshot() on the loop thread right after
 * applying up to its snapshot index: it opens an st_view (one LMDB read
 * transaction), a consistent image of the environment as of that point.
 * raft then runs snapshot_async() on a worker thread (io->async_work): it
 * serialises the view into chunks of CHUNK_SIZE bytes from raft_malloc,
 * which raft writes out as they are.  LMDB is not flushed for it: a process
 * crash loses nothing of LMDB (the page cache keeps it), and after a machine
 * crash the environment is emptied and rebuilt from this snapshot and the
 * log anyway (storage/env_trust.c).  (It used to be flushed first: up to 3
 * s of writing back a 256 MiB group's pages on every replica, in which the
 * node's applies waited -- bench-move, 2026-11-28.)
 * snapshot_finalize() (loop thread, always called after a successful
 * snapshot()) frees the chunks and ends the view.  The loop thread keeps
 * applying meanwhile: LMDB's MVCC keeps the view unchanged.  Raft's snapshot
 * index may be below the applied index inside the view (after a restart
 * raft replays entries the environment already holds); that is harmless
 * because the applied index travels with the data, see restore.
 *
 * Installing a snapshot.  restore(buf) first checks the whole buffer --
 * length, magic, version, group, checksum, then the structure of every
 * section and that meta's "applied" is the header's applied index --
 * without touching LMDB: a bad snapshot is refused with
 * RAFT_CORRUPT and nothing changes.  If the environment's applied index is
 * at or past the snapshot's, the environment already contains everything
 * the snapshot holds (committed entries are never lost, so it cannot hold a
 * different history) and the load is skipped; raft then replays the
 * entries after the snapshot and apply skips those already there.
 * Otherwise one write transaction empties the three databases and appends
 * the pairs (st_load_*), commits and syncs.
 *
 * Buffer ownership (raft 0.15, src/snapshot.c and src/replication.c): on a
 * zero return from restore the FSM owns buf->base and must raft_free it; on
 * a non-zero return raft frees it.  With snapshot_finalize set, raft never
 * frees the buffers that snapshot/snapshot_async return.
 *
 * This file uses storage/snapshot.h (views and loads) and never the storage
 * engine's private engine.h.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "node/fsm_int.h"
#include "node/node.h"

#define SNAP_MAGIC    "SHOALSNP"
#define SNAP_VERSION  1u
#define SNAP_HEADER   24u
#define SNAP_TRAILER  8u
#define SNAP_SECTION  9u /* tag + pair count */
#define SNAP_PAIR_MIN 8u /* two lengths */
#define CHUNK_SIZE    (4u << 20)

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* ------------------------------------------------------------------------ */
/* Writing (worker thread)                                                   */
/* ------------------------------------------------------------------------ */

/* Appends bytes to a list of raft_malloc'd chunks, hashing what it writes. */
typedef struct snap_writer {
	struct raft_buffer *bufs; /* raft_malloc'd array of n (room for cap) */
	unsigned n, cap;
	size_t used; /* bytes used in bufs[n - 1] */
	XXH64_state_t *xxh;
} snap_writer;

static void writer_free(snap_writer *w)
{
	for (unsigned i = 0; i < w->n; i++)
		raft_free(w->bufs[i].base);
	raft_free(w->bufs);
	w->bufs = NULL;
	w->n = w->cap = 0;
}

static int writer_raw(snap_writer *w, const void *p, size_t len, char *errmsg)
{
	const uint8_t *src = p;
	while (len > 0) {
		if (w->n == 0 || w->used == CHUNK_SIZE) {
			if (w->n == w->cap) {
				unsigned cap = w->cap ? w->cap * 2 : 8;
				void *nb = raft_realloc(w->bufs, cap * sizeof(*w->bufs));
				if (nb == NULL)
					goto nomem;
				w->bufs = nb;
				w->cap = cap;
			}
			void *chunk = raft_malloc(CHUNK_SIZE);
			if (chunk == NULL)
				goto nomem;
			w->bufs[w->n].base = chunk;
			w->bufs[w->n].len = CHUNK_SIZE;
			w->n++;
			w->used = 0;
		}
		size_t room = CHUNK_SIZE - w->used;
		size_t take = len < room ? len : room;
		memcpy((uint8_t *)w->bufs[w->n - 1].base + w->used, src, take);
		w->used += take;
		src += take;
		len -= take;
	}
	return SHOAL_OK;
nomem:
	return sh_errf(errmsg, SHOAL_E_NOMEM, "snapshot: out of memory");
}

static int writer_put(snap_writer *w, const void *p, size_t len, char *errmsg)
{
	XXH64_update(w->xxh, p, len);
	return writer_raw(w, p, len, errmsg);
}

static int write_pair(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                      char *errmsg)
{
	snap_writer *w = arg;
	if (klen > UINT32_MAX || vlen > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "snapshot: value of %zu bytes", vlen);
	uint8_t len[4];
	put_be32(len, (uint32_t)klen);
	int rc = writer_put(w, len, 4, errmsg);
	if (rc == SHOAL_OK)
		rc = writer_put(w, key, klen, errmsg);
	put_be32(len, (uint32_t)vlen);
	if (rc == SHOAL_OK)
		rc = writer_put(w, len, 4, errmsg);
	if (rc == SHOAL_OK)
		rc = writer_put(w, val, vlen, errmsg);
	return rc;
}

static int write_snapshot(snap_writer *w, st_view *v, uint32_t group, char *errmsg)
{
	uint8_t hdr[SNAP_HEADER];
	memcpy(hdr, SNAP_MAGIC, 8);
	put_be32(hdr + 8, SNAP_VERSION);
	put_be32(hdr + 12, group);
	put_be64(hdr + 16, st_view_applied(v));
	int rc = writer_put(w, hdr, sizeof(hdr), errmsg);
	for (int d = 0; rc == SHOAL_OK && d < ST_DBI__COUNT; d++) {
		uint64_t count;
		rc = st_view_count(v, (st_dbi)d, &count, errmsg);
		if (rc != SHOAL_OK)
			break;
		uint8_t sec[SNAP_SECTION];
		sec[0] = (uint8_t)d;
		put_be64(sec + 1, count);
		rc = writer_put(w, sec, sizeof(sec), errmsg);
		if (rc == SHOAL_OK)
			rc = st_view_foreach(v, (st_dbi)d, write_pair, w, errmsg);
	}
	if (rc == SHOAL_OK) {
		uint8_t sum[SNAP_TRAILER];
		put_be64(sum, XXH64_digest(w->xxh));
		rc = writer_raw(w, sum, sizeof(sum), errmsg);
	}
	if (rc == SHOAL_OK && w->n > 0) {
		/* Give back the unused tail of the last chunk. */
		struct raft_buffer *last = &w->bufs[w->n - 1];
		void *shrunk = raft_realloc(last->base, w->used > 0 ? w->used : 1);
		if (shrunk != NULL)
			last->base = shrunk;
		last->len = w->used;
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Walks the sections of a snapshot whose header and checksum were checked.
 * With l NULL it only checks the structure, and that the meta section's
 * "applied" is the header's applied index (absent: 0).  That is the index
 * the environment will have: restore decides by the header, apply skips by
 * the environment's, so they must agree -- an "applied" above the header's
 * would make the replica skip the entries after the snapshot as replays and
 * drift from its peers.  With l it loads every pair.
 */
static int walk_sections(const uint8_t *buf, size_t len, st_load *l, char *errmsg)
{
	static const char applied_key[] = "applied"; /* storage/env.c's meta key */
	const uint8_t *p = buf + SNAP_HEADER;
	const uint8_t *end = buf + len - SNAP_TRAILER;
	/* No "applied" in an environment that never applied an entry. */
	bool applied_ok = get_be64(buf + 16) == 0;
	for (unsigned d = 0; d < ST_DBI__COUNT; d++) {
		if ((size_t)(end - p) < SNAP_SECTION)
			return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
			               "snapshot: truncated before section %u", d);
		if (p[0] != d)
			return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
			               "snapshot: section %u has tag %u", d, p[0]);
		uint64_t count = get_be64(p + 1);
		p += SNAP_SECTION;
		if (count > (uint64_t)(end - p) / SNAP_PAIR_MIN)
			return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
			               "snapshot: section %s claims %llu pairs in %zu bytes",
			               st_dbi_name((st_dbi)d), (unsigned long long)count,
			               (size_t)(end - p));
		for (uint64_t i = 0; i < count; i++) {
			if ((size_t)(end - p) < 4)
				goto truncated;
			uint32_t klen = get_be32(p);
			p += 4;
			if (klen == 0 || (size_t)(end - p) < (size_t)klen + 4)
				goto truncated;
			const uint8_t *key = p;
			p += klen;
			uint32_t vlen = get_be32(p);
			p += 4;
			if ((size_t)(end - p) < vlen)
				goto truncated;
			const uint8_t *val = p;
			p += vlen;
			if (d == ST_DBI_META && klen == sizeof(applied_key) - 1 &&
			    memcmp(key, applied_key, klen) == 0)
				applied_ok = vlen == 8 && get_be64(val) == get_be64(buf + 16);
			if (l != NULL) {
				int rc = st_load_put(l, (st_dbi)d, key, klen, val, vlen, errmsg);
				if (rc != SHOAL_OK)
					return rc;
			}
			continue;
		truncated:
			return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
			               "snapshot: pair %llu of section %s is truncated",
			               (unsigned long long)i, st_dbi_name((st_dbi)d));
		}
	}
	if (p != end)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "snapshot: %zu trailing bytes after the sections",
		               (size_t)(end - p));
	if (!applied_ok)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "snapshot: its meta section does not hold its applied index %llu",
		               (unsigned long long)get_be64(buf + 16));
	return SHOAL_OK;
}

/* Checks everything about a snapshot without touching LMDB; *applied is its
 * applied index. */
static int check_snapshot(const uint8_t *buf, size_t len, uint32_t group, uint64_t *applied,
                          char *errmsg)
{
	if (buf == NULL || len < SNAP_HEADER + ST_DBI__COUNT * SNAP_SECTION + SNAP_TRAILER)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "snapshot: %zu bytes is too short",
		               len);
	if (memcmp(buf, SNAP_MAGIC, 8) != 0)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "snapshot: bad magic");
	if (get_be32(buf + 8) != SNAP_VERSION)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "snapshot: format version %u (this build reads %u)",
		               get_be32(buf + 8), SNAP_VERSION);
	if (get_be32(buf + 12) != group)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
		               "snapshot: of group %u, not of group %u", get_be32(buf + 12), group);
	uint64_t sum = get_be64(buf + len - SNAP_TRAILER);
	if (XXH64(buf, len - SNAP_TRAILER, 0) != sum)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "snapshot: checksum mismatch");
	*applied = get_be64(buf + 16);
	return walk_sections(buf, len, NULL, errmsg);
}

/* ------------------------------------------------------------------------ */
/* raft_fsm callbacks                                                        */
/* ------------------------------------------------------------------------ */

int node_fsm_snapshot_cb(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n_bufs)
{
	node_fsm *f = rf->data;
	*bufs = NULL;
	*n_bufs = 0;
	if (f->failed != SHOAL_OK)
		return node_fsm_raft_code(f->failed);
	if (f->snap != NULL)
		return RAFT_BUSY; /* raft ignores it and retries later */
	char msg[SH_ERRMSG_SIZE];
	int rc = st_view_begin(f->env, &f->snap, msg);
	if (rc != SHOAL_OK) /* nothing changed: not a reason to fail the FSM */
		return node_fsm_raft_code(rc);
	return 0;
}

/* Worker thread: touches only f->snap and f->group. */
int node_fsm_snapshot_async_cb(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n_bufs)
{
	node_fsm *f = rf->data;
	*bufs = NULL;
	*n_bufs = 0;
	if (f->snap == NULL)
		return RAFT_INVALID;
	char msg[SH_ERRMSG_SIZE];
	snap_writer w = {0};
	w.xxh = XXH64_createState();
	if (w.xxh == NULL)
		return RAFT_NOMEM;
	XXH64_reset(w.xxh, 0);
	int rc = write_snapshot(&w, f->snap, f->group, msg);
	XXH64_freeState(w.xxh);
	if (rc != SHOAL_OK) {
		writer_free(&w);
		return node_fsm_raft_code(rc);
	}
	*bufs = w.bufs;
	*n_bufs = w.n;
	return 0;
}

int node_fsm_snapshot_finalize_cb(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n_bufs)
{
	node_fsm *f = rf->data;
	if (*bufs != NULL) {
		for (unsigned i = 0; i < *n_bufs; i++)
			raft_free((*bufs)[i].base);
		raft_free(*bufs);
	}
	*bufs = NULL;
	*n_bufs = 0;
	st_view_end(f->snap);
	f->snap = NULL;
	return 0;
}

int node_fsm_restore_cb(struct raft_fsm *rf, struct raft_buffer *buf)
{
	node_fsm *f = rf->data;
	if (f->failed != SHOAL_OK)
		return node_fsm_raft_code(f->failed);
	char msg[SH_ERRMSG_SIZE];
	uint64_t applied = 0;
	int rc = check_snapshot(buf->base, buf->len, f->group, &applied, msg);
	if (rc != SHOAL_OK)
		return RAFT_CORRUPT; /* nothing changed; raft frees buf */
	if (f->applied >= applied) {
		raft_free(buf->base); /* ours on success */
		return 0;
	}
	st_load *l;
	/* The pairs fill B-tree pages at least half full: twice the
	 * snapshot's bytes, and a little for the branch pages. */
	rc = st_env_reserve(f->env, 2 * (uint64_t)buf->len + (4u << 20), msg);
	if (rc == SHOAL_OK)
		rc = st_load_begin(f->env, &l, msg);
	if (rc == SHOAL_OK) {
		rc = walk_sections(buf->base, buf->len, l, msg);
		if (rc == SHOAL_OK)
			rc = st_load_commit(l, msg);
		else
			st_load_abort(l);
	}
	if (rc == SHOAL_E_SERIALIZATION) /* refused by LMDB (key order, size) */
		return RAFT_CORRUPT;
	if (rc != SHOAL_OK)
		return node_fsm_fail(f, rc, "group %u: restoring snapshot at %llu: %s", f->group,
		                     (unsigned long long)applied, msg);
	f->applied = st_env_applied(f->env);
	if (f->cap != NULL) /* a whole new catalog */
		node_cap_catalog_changed(f->cap, f->group);
	raft_free(buf->base);
	return 0;
}
