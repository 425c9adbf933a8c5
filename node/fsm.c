/*
 * fsm.c -- the replicated state machine of one storage group: lifecycle,
 * the raft_fsm table, the proposer's batch registry, entry encoding and the
 * sticky failure.  Applying entries is fsm_apply.c; snapshots fsm_snapshot.c.
 *
 * Health is a two-state machine (enum-less: f->failed holds the code):
 *
 *   state      event                               next      function
 *   HEALTHY    apply/restore hit an environmental  FAILED    node_fsm_fail
 *              error or a malformed entry
 *   HEALTHY    anything else                       HEALTHY
 *   FAILED     anything                            FAILED    (apply, snapshot and
 *                                                             restore return the
 *                                                             raft code at once)
 *
 * Invariant: once FAILED, the LMDB environment is never written again, so
 * this replica's state stays a prefix of its peers' (it never drifts).
 *
 * What raft 0.15 does with a non-zero return from fsm->apply (read in
 * src/replication.c and src/recv.c of v0.15.0): replicationApply stops at
 * that entry and does NOT advance last_applied, so the entry is offered again
 * on the next commit-index change (our sticky error answers it at once).  On
 * a leader the error is dropped ("TODO: just log the error?") and the server
 * stays leader, committing but no longer applying; on a follower that learns
 * the commit index from a heartbeat, recvAppendEntries returns the error and
 * raft converts the server to RAFT_UNAVAILABLE.  The raft_apply callback of
 * the failed entry does not fire until raft_close (RAFT_SHUTDOWN) or a
 * leadership loss.  So the caller of this module must watch node_fsm_failed
 * (after each apply callback and on a timer) and stop serving the group --
 * raft will not do it for us.
 *
 * raft 0.15 and snapshot_async: raft_init refuses a version-3 FSM whose
 * snapshot_async is set unless io->version >= 2 (ioFsmCompat in src/raft.c),
 * but raft_uv_init sets io->version = 1 although it implements async_work
 * (UvAsyncWork, src/uv_work.c).  Whoever calls raft_uv_init must set
 * io.version = 2 before raft_init (upstream made the same change in 0.17.1,
 * commit 269e541 "uv: set io version to 2"); raft_fixture_grow's in-memory
 * io needs the same (see tests/unit/test_fsm.c).
 *
 * Threads: everything here runs on the group's loop thread, except
 * node_fsm_env (any thread) and node_batch_init/fini (the caller's).
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "node/fsm_int.h"
#include "node/node.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */
/* ------------------------------------------------------------------------ */

int node_batch_init(node_batch *b, uint64_t id, uint32_t n_ops)
{
	memset(b, 0, sizeof(*b));
	b->id = id;
	b->n_ops = n_ops;
	if (n_ops == 0)
		return SHOAL_OK;
	b->results = sh_calloc(n_ops, sizeof(*b->results));
	b->result_lens = sh_calloc(n_ops, sizeof(*b->result_lens));
	if (b->results == NULL || b->result_lens == NULL) {
		sh_free(b->results);
		sh_free(b->result_lens);
		b->results = NULL;
		b->result_lens = NULL;
		return SHOAL_E_NOMEM;
	}
	return SHOAL_OK;
}

void node_batch_fini(node_batch *b)
{
	if (b->results != NULL)
		for (uint32_t i = 0; i < b->n_ops; i++)
			sh_free(b->results[i]);
	sh_free(b->results);
	sh_free(b->result_lens);
	b->results = NULL;
	b->result_lens = NULL;
	b->n_ops = 0;
	b->applied = false;
}

void node_fsm_register(node_fsm *f, node_batch *b)
{
	b->next = f->batches;
	f->batches = b;
}

void node_fsm_unregister(node_fsm *f, node_batch *b)
{
	for (node_batch **p = &f->batches; *p != NULL; p = &(*p)->next) {
		if (*p == b) {
			*p = b->next;
			b->next = NULL;
			return;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Failure                                                                   */
/* ------------------------------------------------------------------------ */

bool node_fsm_env_error(int code)
{
	return code == SHOAL_E_NOMEM || code == SHOAL_E_IO || code == SHOAL_E_FULL ||
	       code == SHOAL_E_INTERNAL;
}

int node_fsm_raft_code(int code)
{
	switch (code) {
	case SHOAL_OK:
		return 0;
	case SHOAL_E_NOMEM:
		return RAFT_NOMEM;
	case SHOAL_E_FULL:
		return RAFT_NOSPACE;
	case SHOAL_E_SERIALIZATION:
		return RAFT_MALFORMED;
	default:
		return RAFT_IOERR;
	}
}

int node_fsm_fail(node_fsm *f, int code, const char *fmt, ...)
{
	assert(code != SHOAL_OK);
	if (f->failed == SHOAL_OK) {
		f->failed = code;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(f->failed_msg, sizeof(f->failed_msg), fmt, ap);
		va_end(ap);
	}
	return node_fsm_raft_code(f->failed);
}

int node_fsm_failed(node_fsm *f, char *errmsg)
{
	if (f->failed != SHOAL_OK && errmsg != NULL)
		snprintf(errmsg, SH_ERRMSG_SIZE, "%s", f->failed_msg);
	return f->failed;
}

void node_fsm_fail_diverged(node_fsm *f, const char *msg)
{
	node_fsm_fail(f, SHOAL_E_INTERNAL, "%s", msg);
}

/* ------------------------------------------------------------------------ */
/* Scrub results                                                             */
/* ------------------------------------------------------------------------ */

void node_fsm_scrub_record(node_fsm *f, const node_scrub_result *r)
{
	pthread_mutex_lock(&f->scrub_mu);
	f->scrub[f->scrub_next] = *r;
	f->scrub_next = (f->scrub_next + 1) % NODE_SCRUB_RING;
	if (f->scrub_n < NODE_SCRUB_RING)
		f->scrub_n++;
	pthread_mutex_unlock(&f->scrub_mu);
}

bool node_fsm_scrub_result(node_fsm *f, uint32_t proposer, uint64_t seq, node_scrub_result *out)
{
	bool found = false;
	pthread_mutex_lock(&f->scrub_mu);
	for (uint32_t i = 0; i < f->scrub_n && !found; i++) {
		const node_scrub_result *r = &f->scrub[i];
		if (r->proposer == proposer && r->seq == seq) {
			*out = *r;
			found = true;
		}
	}
	pthread_mutex_unlock(&f->scrub_mu);
	return found;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

void node_fsm_set_cap(node_fsm *f, struct node_cap *cap)
{
	f->cap = cap;
}

void node_fsm_set_map_hook(node_fsm *f, node_fsm_map_fn fn, void *arg)
{
	f->map_hook = fn;
	f->map_hook_arg = arg;
}

void node_fsm_set_static(node_fsm *f, bool has, uint64_t lo, uint64_t hi)
{
	f->static_has = has;
	f->static_lo = lo;
	f->static_hi = hi;
}

int node_fsm_open(const char *dir, uint32_t group, uint32_t node_id, node_fsm **out, char *errmsg)
{
	*out = NULL;
	node_fsm *f = sh_calloc(1, sizeof(*f));
	if (f == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "node_fsm_open(group %u): out of memory",
		               group);
	/* The Raft log is the durable record, and after a machine crash the
	 * environment is rebuilt from it: see fsm.h. */
	st_env_options opts = {.nosync = true, .rebuildable = true};
	char msg[SH_ERRMSG_SIZE];
	int rc = st_env_open(dir, &opts, &f->env, msg);
	if (rc != SHOAL_OK) {
		sh_free(f);
		return sh_errf(errmsg, rc, "group %u: %s", group, msg);
	}
	f->group = group;
	f->node_id = node_id;
	f->applied = st_env_applied(f->env);
	if (st_env_rebuilt(f->env) != NULL)
		node_logf(
		    NODE_LOG_WARN,
		    "group %u: storage in %s not trusted and emptied (%s): it is rebuilt from "
		    "the Raft snapshot and log, and serves no eventually consistent read "
		    "until it has caught up",
		    group, dir, st_env_rebuilt(f->env));
	f->failed = SHOAL_OK;
	pthread_mutex_init(&f->scrub_mu, NULL);
	sh_arena_init(&f->scratch);
	sh_arena_init(&f->entry);
	f->rf.version = 3;
	f->rf.data = f;
	f->rf.apply = node_fsm_apply_cb;
	f->rf.snapshot = node_fsm_snapshot_cb;
	f->rf.restore = node_fsm_restore_cb;
	f->rf.snapshot_finalize = node_fsm_snapshot_finalize_cb;
	f->rf.snapshot_async = node_fsm_snapshot_async_cb;
	*out = f;
	return SHOAL_OK;
}

void node_fsm_close(node_fsm *f)
{
	if (f == NULL)
		return;
	/* raft_close finalises any snapshot it started; this is a backstop. */
	st_view_end(f->snap);
	/* Registered batches belong to their proposers (who may have freed
	 * them by now): only forget them. */
	f->batches = NULL;
	sh_arena_fini(&f->scratch);
	sh_arena_fini(&f->entry);
	pthread_mutex_destroy(&f->scrub_mu);
	st_env_close(f->env);
	sh_free(f);
}

struct raft_fsm *node_fsm_raft(node_fsm *f)
{
	return &f->rf;
}

void node_fsm_attach(node_fsm *f, struct raft *r)
{
	f->raft = r;
}

size_t node_fsm_entry_bytes(const node_fsm *f)
{
	return f->entry_avg;
}

st_env *node_fsm_env(node_fsm *f)
{
	return f->env;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * raft 0.15's libuv log (src/uv_encoding.c, uv_segment.c) pads every entry to
 * a multiple of 8 bytes when it writes a segment but does not skip the
 * padding when it loads a closed segment: an entry whose length is not a
 * multiple of 8 makes the segment unreadable after a restart, and with
 * auto-recovery raft renames it "corrupt-..." and starts without those
 * committed entries (measured: 30 entries of 4 bytes, restart, the segment
 * was set aside).  0.16 refuses such entries (commit cd3bd28, "uv_append:
 * Check that entry bufs are 8-byte aligned").  So every encoded Command is
 * padded to a multiple of 8 bytes (and at least 8) with Command's `pad`
 * field (PAD_FIELD, wire type 2, holding zeros), which exists only for this:
 * the padded bytes decode to the same operations.
 * A padding field is 2 + n bytes (n <= 127): padding of 1 byte is done with
 * 9.
 */
#define PAD_FIELD 15 /* cluster.proto: Command.pad */
#define PAD_TAG   ((PAD_FIELD << 3) | 2)

static size_t pad_bytes(size_t len)
{
	size_t need = (8 - len % 8) % 8;
	if (len == 0)
		need = 8;
	return need == 1 ? 9 : need;
}

int node_fsm_encode(const Shoal__Command *cmd, struct raft_buffer *buf, char *errmsg)
{
	size_t len = shoal__command__get_packed_size(cmd);
	size_t pad = pad_bytes(len);
	uint8_t *p = raft_malloc(len + pad);
	if (p == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "node_fsm_encode: out of memory (%zu bytes)",
		               len + pad);
	size_t n = shoal__command__pack(cmd, p);
	assert(n == len);
	if (pad > 0) {
		p[n] = PAD_TAG;
		p[n + 1] = (uint8_t)(pad - 2);
		memset(p + n + 2, 0, pad - 2);
	}
	buf->base = p;
	buf->len = len + pad;
	assert(buf->len % 8 == 0);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Catalog and index messages                                                */
/* ------------------------------------------------------------------------ */

/* Every delta is checked before the first is converted, so a refusal leaves
 * d as it was: a caller never holds a half-converted list. */
int node_index_deltas_from_pb(const Shoal__IndexApply *ia, st_delta *d, char *errmsg)
{
	uint64_t prev = 0;
	for (size_t i = 0; i < ia->n_deltas; i++) {
		const Shoal__IndexDelta *x = ia->deltas[i];
		if (x->seq <= prev)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "index deltas out of order: seq %" PRIu64 " after %" PRIu64,
			               x->seq, prev);
		if (x->index_id == 0 || x->index_id > UINT16_MAX || x->key.len == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "index delta %" PRIu64 ": bad index id %u or empty key",
			               x->seq, x->index_id);
		prev = x->seq;
	}
	for (size_t i = 0; i < ia->n_deltas; i++) {
		const Shoal__IndexDelta *x = ia->deltas[i];
		d[i] = (st_delta){
		    .seq = x->seq,
		    .hash = x->hash,
		    .table_id = x->table_id,
		    .index_id = (uint16_t)x->index_id,
		    .del = x->del,
		    .key = x->key.data,
		    .key_len = x->key.len,
		    .val = x->value.data,
		    .val_len = x->value.len,
		    .ts_ms = x->ts_ms,
		};
	}
	return SHOAL_OK;
}

int node_index_refused_to_pb(sh_arena *a, const st_index_refusal *ref, Shoal__NodeResponse *nr,
                             char *errmsg)
{
	Shoal__PartRange *r = sh_arena_alloc(a, sizeof(*r));
	if (r == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "index_apply: out of memory");
	shoal__part_range__init(r);
	r->lo = ref->lo;
	r->hi = ref->hi;
	r->to_group = ref->to_group;
	nr->refused = r;
	return SHOAL_OK;
}
