/*
 * fuzz_snapshot -- a snapshot a leader sends (raft InstallSnapshot: bytes
 * from a peer), installed by the real state machine into a real LMDB
 * environment:
 *
 *   node_fsm_restore_cb (node/fsm_snapshot.c): the header, checksum and
 *   section structure checked without touching LMDB, then (when the
 *   snapshot is newer than the environment) one write transaction that
 *   empties the databases and loads every pair (storage/snapshot.c,
 *   st_load_*), committed and synced.
 *
 * The buffer is handed over as raft 0.15 does (src/replication.c,
 * src/snapshot.c): raft_malloc'd; on a zero return the FSM owns it and has
 * freed it, on a non-zero return raft frees it (here: the harness).  A free
 * too many or too few is an ASan/LeakSanitizer report.
 *
 * What is asserted, besides no crash, leak or undefined behaviour -- what
 * fsm_snapshot.c promises:
 *   - refused (non-zero): either RAFT_CORRUPT with the FSM healthy and the
 *     environment exactly as before (its own snapshot is byte for byte the
 *     one taken before the restore), or the FSM failed for good (sticky)
 *     with a message and the code of a failing environment (out of memory,
 *     disk or map full, I/O);
 *   - accepted with an applied index at or below the environment's: the load
 *     is skipped, the environment is exactly as before;
 *   - accepted and loaded: the FSM is healthy, the environment's applied
 *     index is the snapshot's (header), and the FSM's own snapshot of it is
 *     the input byte for byte ("a restored environment is exactly the
 *     snapshotted one"), so it restores to the same state; installing it
 *     again is skipped, and it opens again after a restart (node_fsm_close,
 *     node_fsm_open) with the same applied index.  Then everything a node reads from a newly
 * installed environment is read: every table of the catalog listed, described and scanned to the
 * end (each of its indexes too), the outbox and its deltas' items, the index progress, transaction
 * records and prepared transactions, stream bounds and records of every table with a stream,
 *     dropped tables' streams, group 0's cluster map (decoded) -- each may
 *     refuse what it cannot read (a code and a message), never crash.  And
 *     the entry raft applies next (a scrub of the whole environment, the
 *     transaction expiry, the stream trim, an outbox trim) applies, or
 *     stops the replica with a message and the code of a failing or
 *     corrupt environment (INTERNAL).
 *
 * A snapshot carries an XXH64 of its bytes; mutated bytes would almost
 * never get past it, so the custom mutator recomputes the trailer of 15 of
 * 16 mutants (the 16th keeps libFuzzer's bytes, for the checksum's own
 * refusal).  Half its mutations change one pair's value or key, resized
 * with its length field kept right, so that records of any size and
 * content get past the structure checks to the load and the readers.  The files in the corpus and
 * the crashes are therefore the exact bytes the callback saw: a crash replays with `fuzz_snapshot
 * FILE`.
 *
 * The environment: one node_fsm (node 1) over an LMDB environment in a
 * directory of /dev/shm, of group 0 when the snapshot's header names group
 * 0, else of group 1 (a snapshot of another group is refused by its
 * header).  Before an input it holds a base state -- one entry applied at
 * index 1 (a table Base with an item) -- whose snapshot is taken once per
 * group.  The environment is reset (closed, files removed, opened, the base
 * entry applied) whenever the previous input changed it, so an outcome never
 * depends on earlier inputs; an input that left it unchanged (checked
 * against the base snapshot) needs no reset.
 *
 * Input: the snapshot's bytes.  Seeds: tests/fuzz/corpus/snapshot/ (taken by
 * the real code after applying fsm/'s Commands: tests/fuzz/seeds.c).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "node/fsm.h"
#include "node/node.h"
#include "proto/wire_api.h"
#include "storage/snapshot.h"
#include "storage/stream.h"
#include "tests/fuzz/harness.h"

#define NODE_ID      1
#define SNAP_HEADER  24
#define SNAP_TRAILER 8
#define ENTRY_TS     1795000000000

static char dir[256];
static node_fsm *fsm;
static uint32_t group = 1;
static bool dirty = true; /* the environment may differ from the base state */
static struct raft fake_raft;
static struct raft_buffer base_entry, next_entry;
static struct {
	uint8_t *buf;
	size_t len;
} base_snap[2];

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* ------------------------------------------------------------------------ */
/* The custom mutator: libFuzzer's mutation, then (mostly) a valid checksum  */
/* ------------------------------------------------------------------------ */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* Where the pairs of a well-formed snapshot are: key/value offsets and
 * lengths, in order; false if data is not one. */
typedef struct pair_at {
	size_t off; /* of the key's length field */
	uint32_t klen, vlen;
} pair_at;

static bool find_pairs(const uint8_t *data, size_t size, pair_at *pairs, size_t cap, size_t *n)
{
	*n = 0;
	if (size < SNAP_HEADER + 3 * 9 + SNAP_TRAILER)
		return false;
	size_t p = SNAP_HEADER, end = size - SNAP_TRAILER;
	for (int d = 0; d < 3; d++) {
		if (end - p < 9)
			return false;
		uint64_t count = be64(data + p + 1);
		p += 9;
		for (uint64_t i = 0; i < count; i++) {
			if (end - p < 4 || *n == cap)
				return false;
			uint32_t klen = be32(data + p);
			if (end - p - 4 < (size_t)klen + 4)
				return false;
			uint32_t vlen = be32(data + p + 4 + klen);
			if (end - p - 8 - klen < vlen)
				return false;
			pairs[(*n)++] = (pair_at){p, klen, vlen};
			p += 8 + (size_t)klen + vlen;
		}
	}
	return p == end;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* Half the time, when data is a well-formed snapshot: one pair's value
 * (or, a quarter of those times, its key) mutated by libFuzzer with its
 * length changing as it likes, the length fields kept right -- a snapshot
 * that gets past the structure checks with a record of another size. */
static size_t mutate_pair(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	static pair_at pairs[4096];
	static uint8_t field[8192];
	size_t n;
	if (!find_pairs(data, size, pairs, 4096, &n) || n == 0)
		return 0;
	pair_at *pa = &pairs[seed % n];
	bool key = (seed >> 16) % 4 == 0;
	size_t off = pa->off + 4 + (key ? 0 : 4 + (size_t)pa->klen);
	size_t len = key ? pa->klen : pa->vlen;
	if (len > sizeof(field) / 2)
		return 0;
	memcpy(field, data + off, len);
	size_t room = max_size - size + len; /* the most the field may grow to */
	if (room > sizeof(field))
		room = sizeof(field);
	size_t nlen = LLVMFuzzerMutate(field, len, room);
	if (key && nlen == 0)
		return 0;
	memmove(data + off + nlen, data + off + len, size - off - len);
	memcpy(data + off, field, nlen);
	put32(data + off - 4, (uint32_t)nlen);
	return size - len + nlen;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	size_t pair = seed % 2 == 0 ? mutate_pair(data, size, max_size, seed / 2) : 0;
	size = pair > 0 ? pair : LLVMFuzzerMutate(data, size, max_size);
	if (size >= SNAP_HEADER + SNAP_TRAILER && seed % 16 != 0) {
		uint64_t sum = XXH64(data, size - SNAP_TRAILER, 0);
		for (int i = 0; i < 8; i++)
			data[size - SNAP_TRAILER + i] = (uint8_t)(sum >> (56 - 8 * i));
	}
	return size;
}

/* ------------------------------------------------------------------------ */
/* The environment                                                           */
/* ------------------------------------------------------------------------ */

/* Applies buf as the entry at index; returns apply's raft code. */
static int apply_at(uint64_t index, const struct raft_buffer *buf)
{
	struct raft_fsm *rf = node_fsm_raft(fsm);
	fake_raft.last_applied = index - 1;
	void *res = (void *)1;
	int rv = rf->apply(rf, buf, &res);
	FZ_ASSERT(res == NULL, "apply set a result");
	return rv;
}

/* The FSM's own snapshot (its raft_fsm callbacks, as raft takes one), as one
 * sh_malloc'd buffer. */
static uint8_t *take_snapshot(size_t *len)
{
	struct raft_fsm *rf = node_fsm_raft(fsm);
	struct raft_buffer *bufs = NULL;
	unsigned n = 0;
	int rv = rf->snapshot(rf, &bufs, &n);
	FZ_ASSERT(rv == 0, "snapshot: raft code %d", rv);
	rv = rf->snapshot_async(rf, &bufs, &n);
	FZ_ASSERT(rv == 0, "snapshot_async: raft code %d", rv);
	size_t total = 0;
	for (unsigned i = 0; i < n; i++)
		total += bufs[i].len;
	uint8_t *out = sh_malloc(total > 0 ? total : 1), *p = out;
	FZ_ASSERT(out != NULL, "out of memory");
	for (unsigned i = 0; i < n; i++) {
		memcpy(p, bufs[i].base, bufs[i].len);
		p += bufs[i].len;
	}
	rv = rf->snapshot_finalize(rf, &bufs, &n);
	FZ_ASSERT(rv == 0 && bufs == NULL, "snapshot_finalize: raft code %d", rv);
	*len = total;
	return out;
}

static bool same_as(const uint8_t *buf, size_t len, const uint8_t *want, size_t want_len)
{
	return len == want_len && memcmp(buf, want, len) == 0;
}

static void remove_files(void)
{
	DIR *d = opendir(dir);
	FZ_ASSERT(d != NULL, "opendir(%s)", dir);
	struct dirent *e;
	char p[512];
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		FZ_ASSERT(unlink(p) == 0, "unlink(%s)", p);
	}
	closedir(d);
}

/* The base state of group g: an empty environment, the base entry applied
 * at index 1. */
static void fsm_reset(uint32_t g)
{
	node_fsm_close(fsm);
	fsm = NULL;
	remove_files();
	group = g;
	char m[SH_ERRMSG_SIZE] = "";
	int rc = node_fsm_open(dir, group, NODE_ID, &fsm, m);
	FZ_ASSERT(rc == SHOAL_OK, "node_fsm_open(%s): %s", dir, m);
	node_fsm_attach(fsm, &fake_raft);
	FZ_ASSERT(apply_at(1, &base_entry) == 0 && node_fsm_failed(fsm, m) == SHOAL_OK,
	          "the base entry: %s", m);
	dirty = false;
}

static void cleanup(void)
{
	node_fsm_close(fsm);
	fsm = NULL;
	remove_files();
	rmdir(dir);
}

/* A Command of ops as node_fsm_encode makes it (raft_malloc'd). */
static struct raft_buffer encode(Shoal__CommandOp **ops, size_t n)
{
	Shoal__Command cmd = SHOAL__COMMAND__INIT;
	cmd.proposer = 2; /* not this node: no results wanted */
	cmd.batch_id = 1;
	cmd.ts_ms = ENTRY_TS;
	cmd.n_ops = n;
	cmd.ops = ops;
	struct raft_buffer buf;
	char m[SH_ERRMSG_SIZE] = "";
	FZ_ASSERT(node_fsm_encode(&cmd, &buf, m) == SHOAL_OK, "node_fsm_encode: %s", m);
	return buf;
}

static Shoal__Request *convert(const char *op, const char *json)
{
	char m[SH_ERRMSG_SIZE] = "";
	json_t *j = NULL;
	Shoal__Request *r = NULL;
	FZ_ASSERT(wire_json_parse(json, strlen(json), &j, m) == SHOAL_OK, "%s", m);
	FZ_ASSERT(wire_api_request_from_json(fz_arena(), op, j, &r, m) == SHOAL_OK, "%s", m);
	json_decref(j);
	return r;
}

/* The base entry (table Base, id 3, and one item) and the entry applied
 * after an install (scrub, expiry, trims: they walk every record). */
static void make_entries(void)
{
	Shoal__Request *ct =
	    convert("CreateTable",
	            "{\"TableName\": \"Base\", \"KeySchema\": [{\"AttributeName\": \"k\", "
	            "\"KeyType\": \"HASH\"}], \"AttributeDefinitions\": [{\"AttributeName\": "
	            "\"k\", \"AttributeType\": \"S\"}]}");
	Shoal__Request *put =
	    convert("PutItem", "{\"TableName\": \"Base\", \"Item\": {\"k\": {\"S\": \"base\"}, "
	                       "\"v\": {\"N\": \"1\"}}}");
	Shoal__TableDefine td = SHOAL__TABLE_DEFINE__INIT;
	td.def = ct->create_table;
	td.table_id = 3;
	td.created_ms = ENTRY_TS - 1000;
	Shoal__CommandOp o0 = SHOAL__COMMAND_OP__INIT, o1 = SHOAL__COMMAND_OP__INIT;
	o0.op_case = SHOAL__COMMAND_OP__OP_DEFINE_TABLE;
	o0.define_table = &td;
	o1.op_case = SHOAL__COMMAND_OP__OP_PUT;
	o1.put = put->put_item;
	Shoal__CommandOp *base[] = {&o0, &o1};
	base_entry = encode(base, 2);

	Shoal__Scrub scrub = SHOAL__SCRUB__INIT;
	scrub.proposer = 2;
	scrub.seq = 1;
	scrub.max_keys = 100000;
	Shoal__OutboxTrim trim = SHOAL__OUTBOX_TRIM__INIT;
	trim.upto = 2;
	Shoal__CommandOp n0 = SHOAL__COMMAND_OP__INIT, n1 = SHOAL__COMMAND_OP__INIT,
	                 n2 = SHOAL__COMMAND_OP__INIT, n3 = SHOAL__COMMAND_OP__INIT;
	n0.op_case = SHOAL__COMMAND_OP__OP_SCRUB;
	n0.scrub = &scrub;
	n1.op_case = SHOAL__COMMAND_OP__OP_TXN_EXPIRE;
	n1.txn_expire = true;
	n2.op_case = SHOAL__COMMAND_OP__OP_STREAM_TRIM;
	n2.stream_trim = true;
	n3.op_case = SHOAL__COMMAND_OP__OP_OUTBOX_TRIM;
	n3.outbox_trim = &trim;
	Shoal__CommandOp *next[] = {&n0, &n1, &n2, &n3};
	next_entry = encode(next, 4);
	fz_reset();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/shoal-fuzz-snapshot.XXXXXX", base != NULL ? base : "/tmp");
	FZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp(%s)", dir);
	node_log_set_level(NODE_LOG_ERROR);
	make_entries();
	for (uint32_t g = 0; g < 2; g++) {
		fsm_reset(g);
		base_snap[g].buf = take_snapshot(&base_snap[g].len);
	}
	atexit(cleanup);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading an installed environment as a node does                           */
/* ------------------------------------------------------------------------ */

/* A read's outcome: fine, or a refusal with a message. */
static void check(int rc, const char *errmsg, const char *what)
{
	fz_log("  %s: %s %s\n", what, shoal_err_name(rc), rc != SHOAL_OK ? errmsg : "");
	FZ_ASSERT(rc == SHOAL_OK || errmsg[0] != '\0', "%s: %s without a message", what,
	          shoal_err_name(rc));
}

/* Scans a table or one of its indexes to the end (at most 64 pages). */
static void scan_all(st_env *env, const char *table, const char *index)
{
	sh_arena *a = fz_arena();
	st_scan_req q = {.table = table, .index = index};
	for (int page = 0; page < 64; page++) {
		char m[SH_ERRMSG_SIZE] = "";
		st_page p;
		int rc = st_scan(env, &q, a, &p, m);
		check(rc, m, index != NULL ? "st_scan(index)" : "st_scan");
		if (rc != SHOAL_OK || p.last_evaluated_key == NULL)
			return;
		FZ_ASSERT(p.scanned > 0, "a page of nothing with a LastEvaluatedKey");
		q.exclusive_start_key = p.last_evaluated_key;
	}
}

static void read_streams(st_env *env, const st_table_def *d)
{
	sh_arena *a = fz_arena();
	int64_t labels[1 + ST_STREAM_PAST_MAX];
	uint32_t n = 0;
	if (d->stream.label_ms != 0)
		labels[n++] = d->stream.label_ms;
	for (uint32_t i = 0; i < d->stream.n_past && i < ST_STREAM_PAST_MAX; i++)
		labels[n++] = d->stream.past[i].label_ms;
	for (uint32_t i = 0; i < n; i++) {
		char m[SH_ERRMSG_SIZE] = "";
		st_stream_bounds b;
		int rc = st_stream_bounds_get(env, d->id, labels[i], &b, m);
		check(rc, m, "st_stream_bounds_get");
		if (rc != SHOAL_OK)
			continue;
		(void)st_stream_latest(&b);
		uint64_t from = b.trimmed + 1;
		for (int page = 0; page < 16; page++) {
			st_stream_rec *recs;
			uint32_t nr;
			uint64_t next;
			m[0] = '\0';
			rc = st_stream_read(env, d->id, labels[i], from, 64, 1 << 20, a, &recs, &nr,
			                    &next, m);
			check(rc, m, "st_stream_read");
			if (rc != SHOAL_OK || nr == 0 || next <= from)
				break;
			from = next;
		}
	}
}

static void read_tables(st_env *env)
{
	sh_arena *a = fz_arena();
	const char *start = NULL;
	for (int round = 0; round < 16; round++) {
		char m[SH_ERRMSG_SIZE] = "";
		const char **names, *last;
		uint32_t n;
		int rc = st_table_list(env, start, 100, a, &names, &n, &last, m);
		check(rc, m, "st_table_list");
		if (rc != SHOAL_OK)
			return;
		for (uint32_t i = 0; i < n; i++) {
			st_table_info info;
			m[0] = '\0';
			rc = st_table_describe(env, names[i], a, &info, m);
			check(rc, m, "st_table_describe");
			if (rc != SHOAL_OK)
				continue;
			scan_all(env, names[i], NULL);
			for (uint32_t x = 0; x < info.def.n_indexes; x++)
				scan_all(env, names[i], info.def.indexes[x].name);
			read_streams(env, &info.def);
		}
		if (last == NULL)
			return;
		start = last;
	}
}

static void read_internal(st_env *env)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	st_outbox_info oi;
	check(st_outbox_get_info(env, &oi, m), m, "st_outbox_get_info");
	st_delta *d;
	uint32_t n;
	m[0] = '\0';
	int rc = st_outbox_read(env, 0, 64, 1 << 20, a, &d, &n, m);
	check(rc, m, "st_outbox_read");
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++) {
		st_value item;
		m[0] = '\0';
		int r2 = st_delta_item(&d[i], a, &item, m);
		check(r2 == SHOAL_E_NOT_FOUND ? SHOAL_OK : r2, m, "st_delta_item");
	}
	st_index_progress *ip;
	m[0] = '\0';
	check(st_index_progress_list(env, a, &ip, &n, m), m, "st_index_progress_list");
	st_txn_record *tr;
	m[0] = '\0';
	check(st_txn_record_list(env, a, &tr, &n, m), m, "st_txn_record_list");
	st_prepared *pp;
	m[0] = '\0';
	check(st_txn_prepared_list(env, a, &pp, &n, m), m, "st_txn_prepared_list");
	int64_t ms;
	bool any;
	m[0] = '\0';
	check(st_txn_next_expiry(env, &ms, &any, m), m, "st_txn_next_expiry");
	m[0] = '\0';
	check(st_stream_oldest(env, &ms, &any, m), m, "st_stream_oldest");
	st_table_def *defs;
	int64_t *deleted;
	m[0] = '\0';
	rc = st_stream_dropped_list(env, a, &defs, &deleted, &n, m);
	check(rc, m, "st_stream_dropped_list");
	for (uint32_t i = 0; rc == SHOAL_OK && i < n; i++)
		read_streams(env, &defs[i]);
	sh_map sm;
	bool found;
	uint64_t epoch;
	m[0] = '\0';
	rc = st_cluster_map_load(env, &sm, &found, m);
	check(rc, m, "st_cluster_map_load");
	if (rc == SHOAL_OK && found) {
		m[0] = '\0';
		rc = st_cluster_map_epoch(env, &epoch, m);
		check(rc, m, "st_cluster_map_epoch");
		FZ_ASSERT(rc != SHOAL_OK || sm.epoch == epoch,
		          "map epoch %llu, st_cluster_map_epoch said %llu",
		          (unsigned long long)sm.epoch, (unsigned long long)epoch);
		sh_map_fini(&sm);
	}
}

/* ------------------------------------------------------------------------ */
/* One input                                                                 */
/* ------------------------------------------------------------------------ */

static bool env_code(int code)
{
	return code == SHOAL_E_NOMEM || code == SHOAL_E_FULL || code == SHOAL_E_IO;
}

/* The environment is the base state of its group, byte for byte. */
static void assert_base(const char *what)
{
	size_t len;
	uint8_t *now = take_snapshot(&len);
	FZ_ASSERT(same_as(now, len, base_snap[group].buf, base_snap[group].len),
	          "%s changed the environment", what);
	sh_free(now);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t g = size >= SNAP_HEADER && be32(data + 12) == 0 ? 0 : 1;
	if (dirty || g != group)
		fsm_reset(g);
	st_env *env = node_fsm_env(fsm);
	uint64_t before = st_env_applied(env);
	struct raft_fsm *rf = node_fsm_raft(fsm);

	/* Handed over as raft hands it: raft_malloc'd, the FSM's on success. */
	struct raft_buffer buf = {.base = raft_malloc(size > 0 ? size : 1), .len = size};
	FZ_ASSERT(buf.base != NULL, "raft_malloc(%zu)", size);
	if (size > 0)
		memcpy(buf.base, data, size);
	int rv = rf->restore(rf, &buf);
	char why[SH_ERRMSG_SIZE] = "";
	int failed = node_fsm_failed(fsm, why);
	fz_log("  restore: raft code %d, FSM %s%s%s\n", rv, shoal_err_name(failed),
	       failed ? ": " : "", failed ? why : "");

	if (rv != 0) {
		raft_free(buf.base); /* raft's on failure */
		if (failed == SHOAL_OK) {
			FZ_ASSERT(rv == RAFT_CORRUPT, "restore refused with raft code %d", rv);
			FZ_ASSERT(st_env_applied(env) == before,
			          "a refused snapshot moved the index");
			assert_base("a refused snapshot");
		} else {
			dirty = true;
			FZ_ASSERT(why[0] != '\0', "the FSM failed without a message");
			FZ_ASSERT(env_code(failed), "a snapshot stopped the replica with %s: %s",
			          shoal_err_name(failed), why);
		}
		fz_reset();
		return 0;
	}
	FZ_ASSERT(failed == SHOAL_OK, "restore returned 0 with the FSM %s: %s",
	          shoal_err_name(failed), why);
	FZ_ASSERT(size >= SNAP_HEADER + SNAP_TRAILER, "a snapshot of %zu bytes accepted", size);
	uint64_t applied = be64(data + 16);
	if (applied <= before) {
		/* The environment already holds it: skipped. */
		FZ_ASSERT(st_env_applied(env) == before, "a skipped snapshot moved the index");
		assert_base("a skipped snapshot");
		fz_reset();
		return 0;
	}
	dirty = true;
	FZ_ASSERT(st_env_applied(env) == applied,
	          "snapshot of index %llu installed, the environment's applied index is %llu",
	          (unsigned long long)applied, (unsigned long long)st_env_applied(env));

	/* Exactly the snapshotted environment: its snapshot is the input. */
	size_t len;
	uint8_t *again = take_snapshot(&len);
	FZ_ASSERT(same_as(again, len, data, size),
	          "the installed environment snapshots to other bytes (%zu, input %zu)", len, size);
	/* Installing it again (raft after a restart) is skipped. */
	struct raft_buffer buf2 = {.base = raft_malloc(len > 0 ? len : 1), .len = len};
	FZ_ASSERT(buf2.base != NULL, "raft_malloc(%zu)", len);
	memcpy(buf2.base, again, len);
	sh_free(again);
	rv = rf->restore(rf, &buf2);
	FZ_ASSERT(rv == 0, "the same snapshot again: raft code %d", rv);
	FZ_ASSERT(st_env_applied(env) == applied, "the same snapshot again moved the index");

	/* A restart: the installed environment opens again as it was. */
	node_fsm_close(fsm);
	fsm = NULL;
	char m[SH_ERRMSG_SIZE] = "";
	int rc = node_fsm_open(dir, group, NODE_ID, &fsm, m);
	FZ_ASSERT(rc == SHOAL_OK, "the installed environment does not open again: %s", m);
	node_fsm_attach(fsm, &fake_raft);
	env = node_fsm_env(fsm);
	FZ_ASSERT(st_env_applied(env) == applied, "after a restart the applied index is %llu",
	          (unsigned long long)st_env_applied(env));

	read_tables(env);
	read_internal(env);

	/* The next entry raft applies. */
	rv = apply_at(applied + 1, &next_entry);
	failed = node_fsm_failed(fsm, why);
	fz_log("  next entry: raft code %d, FSM %s%s%s\n", rv, shoal_err_name(failed),
	       failed ? ": " : "", failed ? why : "");
	FZ_ASSERT((rv == 0) == (failed == SHOAL_OK), "apply returned %d with the FSM %s", rv,
	          shoal_err_name(failed));
	if (rv == 0)
		FZ_ASSERT(st_env_applied(env) == applied + 1, "the next entry was not recorded");
	else
		FZ_ASSERT(why[0] != '\0' && (env_code(failed) || failed == SHOAL_E_INTERNAL),
		          "the next entry stopped the replica with %s: %s", shoal_err_name(failed),
		          why);
	fz_reset();
	return 0;
}
