/*
 * raftio.c -- a raft_io in front of raft_uv's that works around bugs of raft
 * 0.15 (Debian 12 ships 0.15): a crash (canonical/raft issue #339, fixed
 * upstream in 0.17 by PRs #342 and #367), a failed disk write mishandled,
 * and two commit rules broken (below).
 *
 * The bug.  When a follower finishes writing a snapshot sent by its leader
 * (InstallSnapshot), installSnapshotCb answers that leader with
 * sendAppendEntriesResult, which reads r->follower_state.current_leader --
 * without checking that the server is still a follower.  If meanwhile its
 * election timer fired (it is a candidate: the union holds candidate_state,
 * and the "address" is 0x100) or a RequestVote of a higher term made it a
 * follower with no known leader (address NULL), raft_uv's send calls
 * strlen on that address: SIGSEGV on the Raft loop.  It happens when a node
 * that restarted is catching up by snapshot and the leader dies; it_chaos
 * hit it twice in twenty minutes of faults (kernel log: "segfault at 100 ...
 * __strlen_evex").  appendFollowerCb, the other caller, checks the state in
 * 0.15 already.
 *
 * The workaround.  While a snapshot install is being written (raft calls
 * snapshot_put with trailing 0 for an install; its own snapshots have
 * trailing > 0 here, node/group.c), nothing may move this server out of
 * "follower of the leader that sent it":
 *   - ticks are withheld (no election timeout; raft's clock keeps running,
 *     so the first tick after the write sees the elapsed time and starts an
 *     election if the leader is still silent);
 *   - RequestVote (pre-votes too: whatever raft does with them, nothing
 *     needs them now) and TimeoutNow messages are dropped: Raft tolerates
 *     lost messages, and candidates ask again after their timeout.
 * AppendEntries and InstallSnapshot of a newer leader still pass: they make
 * this server a follower *with* a leader, and the answer goes to it.  A
 * write of a snapshot takes milliseconds to a second, the only delay this
 * adds to an election.
 *
 * A failed write is never reported to raft, and after one nothing more is
 * written: appends, snapshots and truncations are taken and never answered,
 * so the files stay as they were at the failure, as after a crash there.
 * raft 0.15's leader, told that an append failed (a full disk: ENOSPC),
 * truncates its in-memory log from that entry -- entries it may already
 * have sent to followers, which may commit them -- and stays leader; with
 * two failed appends in flight the second truncation runs past the log's
 * end and frees entries twice (AddressSanitizer caught it in it_jepsen's
 * disk-full fault: a double free of an entry's buffer from appendLeaderCb;
 * fixed upstream by 0cac59c and 8b9c95c, raft 0.16/0.17).  And a follower
 * whose install of the leader's snapshot fails goes on appending after the
 * snapshot's index all the same (raft_uv moved its next index at the
 * install's barrier), leaving a log raft_uv refuses to load at the next
 * start ("closed segment ... is past last snapshot", seen after a full
 * disk).  Holding the failure back, the replica stops acknowledging
 * entries, as if its disk hung, which Raft tolerates: what was committed
 * was committed by the other replicas.  node_raftio_failed tells the group
 * (group.c fails the replica: it stops serving and hands leadership away),
 * and node/disk.c restarts the node in place once its disk has room again.
 *
 * The commit rules.  raft 0.15 breaks two of Raft's rules about what may be
 * committed (the first is fixed upstream in 0.17.1 by 524f735, "Don't
 * commit entries from old terms by counting"):
 *   - a leader commits its last stored entry once a majority holds it, even
 *     when that entry is of an earlier term (Raft's figure 8: such an entry
 *     can still be overwritten by a later leader, after replicas applied
 *     it -- replicas that then differ for good, an acknowledged write lost
 *     or an index delta dropped);
 *   - a follower sets its commit index to min(leaderCommit, its last stored
 *     entry), not the last entry the AppendEntries proved it shares with
 *     the leader: entries of an earlier term past those can be applied.
 * Both are kept here by what raft is told: an AppendEntries' leaderCommit is
 * lowered to the message's last entry (prevLogIndex + its entries); and
 * while a leader's last stored entry is of an earlier term, a follower's
 * successful result reports one entry less than that, so no majority forms
 * on it.  group.c has every new leader propose a barrier at once: committing
 * it commits everything before it, as Raft does.
 *
 * Everything else is forwarded to raft_uv's io unchanged; callbacks that
 * carry the io (tick, recv, close) are handed raft's io (the outer one,
 * whose data raft set), the others carry raft's own request objects.
 *
 * Threads: the loop thread, like raft.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#include "node/node.h"

static node_raftio *of_inner(struct raft_io *inner)
{
	return inner->data;
}

static node_raftio *of_outer(struct raft_io *outer)
{
	return outer->impl;
}

/* raft reads io->errmsg after a failed call: give it raft_uv's. */
static int ret(node_raftio *x, int rv)
{
	if (rv != 0)
		memcpy(x->outer.errmsg, x->inner->errmsg, sizeof(x->outer.errmsg));
	return rv;
}

static void on_tick(struct raft_io *inner)
{
	node_raftio *x = of_inner(inner);
	if (x->installing) {
		x->ticks_withheld++;
		return;
	}
	x->tick(&x->outer);
}

/* The term of the entry at index in raft's in-memory log, 0 if it is not
 * there (raft 0.15's logTermOf, over the public struct raft_log). */
static raft_term log_term_of(const struct raft_log *l, raft_index index)
{
	if (index == 0)
		return 0;
	if (index == l->snapshot.last_index)
		return l->snapshot.last_term;
	size_t n = l->front <= l->back ? l->back - l->front : l->size - l->front + l->back;
	if (index <= l->offset || index > l->offset + n)
		return 0;
	return l->entries[(l->front + (size_t)(index - 1 - l->offset)) % l->size].term;
}

/* The two commit rules of Raft that raft 0.15 breaks (see the top), kept by
 * adjusting what it is told.  r: the raft this io belongs to. */
static void commit_rules(node_raftio *x, const struct raft *r, struct raft_message *m)
{
	if (m->type == RAFT_IO_APPEND_ENTRIES) {
		/* A follower commits only what the message proved it holds: up
		 * to the last entry the message carries or matched. */
		struct raft_append_entries *a = &m->append_entries;
		raft_index verified = a->prev_log_index + a->n_entries;
		if (a->leader_commit > verified) {
			a->leader_commit = verified;
			x->commits_clamped++;
		}
		return;
	}
	if (m->type != RAFT_IO_APPEND_ENTRIES_RESULT || r->state != RAFT_LEADER)
		return;
	/* A leader commits an entry of an earlier term only by committing one
	 * of its own term after it.  raft 0.15 commits its last stored entry
	 * once a majority holds it, whatever its term: while that entry is of
	 * an earlier term, a follower's progress is reported one short of it,
	 * so that no majority forms until this leader's own barrier (group.c
	 * proposes one at once) is stored. */
	struct raft_append_entries_result *res = &m->append_entries_result;
	if (res->rejected != 0 || res->term != r->current_term || r->last_stored == 0 ||
	    log_term_of(&r->log, r->last_stored) >= r->current_term)
		return;
	if (res->last_log_index >= r->last_stored) {
		res->last_log_index = r->last_stored - 1;
		x->results_clamped++;
	}
}

static void on_recv(struct raft_io *inner, struct raft_message *m)
{
	node_raftio *x = of_inner(inner);
	if (x->installing && (m->type == RAFT_IO_REQUEST_VOTE || m->type == RAFT_IO_TIMEOUT_NOW)) {
		x->messages_dropped++;
		return;
	}
	if (x->outer.data != NULL) /* raft_init sets it */
		commit_rules(x, x->outer.data, m);
	x->recv(&x->outer, m);
}

static void on_close(struct raft_io *inner)
{
	node_raftio *x = of_inner(inner);
	if (x->close_cb != NULL)
		x->close_cb(&x->outer);
}

/* The first failed write: the replica stops here (see the top). */
static void fail(node_raftio *x, int status, const char *what)
{
	if (atomic_load(&x->failed))
		return;
	/* (raft_uv's errmsg may still hold an older message: the status is
	 * what this failure was.) */
	snprintf(x->failed_msg, sizeof(x->failed_msg), "%s: %s", what, raft_strerror(status));
	x->failed_code = status == RAFT_NOSPACE ? SHOAL_E_FULL : SHOAL_E_IO;
	atomic_store(&x->failed, true);
	node_logf(NODE_LOG_ERROR,
	          "group %u: %s; the failure is not reported to raft (0.15 mishandles it): this "
	          "replica writes and acknowledges nothing more until the node restarts",
	          x->gid, x->failed_msg);
}

/* An install's write finished: raft's callback runs with its own data back,
 * and only then are ticks and votes let through again (raft answers the
 * leader inside the callback). */
static void on_install_put(struct raft_io_snapshot_put *req, int status)
{
	node_raftio *x = req->data;
	req->data = x->put_data;
	raft_io_snapshot_put_cb cb = x->put_cb;
	x->put_cb = NULL;
	x->put_data = NULL;
	if (status != 0) {
		/* raft_uv has already moved its next index past the snapshot:
		 * raft, told, would go on writing entries after a snapshot that
		 * is not there (a log raft_uv then refuses to load: "closed
		 * segment ... is past last snapshot", seen after a full disk).
		 * Held back; the install stays "in progress" for good. */
		fail(x, status, "a snapshot from the leader could not be written");
		return;
	}
	cb(req, status);
	x->installing = false;
	node_logf(NODE_LOG_INFO,
	          "group %u: snapshot from the leader %s; meanwhile %" PRIu64
	          " ticks withheld, %" PRIu64 " votes dropped (raft 0.15 workaround)",
	          x->gid, status == 0 ? "installed" : "not installed", x->ticks_withheld,
	          x->messages_dropped);
	x->ticks_withheld = x->messages_dropped = 0;
}

static int f_init(struct raft_io *io, raft_id id, const char *address)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->init(x->inner, id, address));
}

static void f_close(struct raft_io *io, raft_io_close_cb cb)
{
	node_raftio *x = of_outer(io);
	x->close_cb = cb;
	x->inner->close(x->inner, on_close);
}

static int f_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                  struct raft_snapshot **snapshot, raft_index *start_index,
                  struct raft_entry *entries[], size_t *n_entries)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->load(x->inner, term, voted_for, snapshot, start_index, entries,
	                        n_entries));
}

static int f_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	node_raftio *x = of_outer(io);
	x->tick = tick;
	x->recv = recv;
	return ret(x, x->inner->start(x->inner, msecs, on_tick, on_recv));
}

static int f_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->bootstrap(x->inner, conf));
}

static int f_recover(struct raft_io *io, const struct raft_configuration *conf)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->recover(x->inner, conf));
}

static int f_set_term(struct raft_io *io, raft_term term)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->set_term(x->inner, term));
}

static int f_set_vote(struct raft_io *io, raft_id server_id)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->set_vote(x->inner, server_id));
}

static int f_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *message,
                  raft_io_send_cb cb)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->send(x->inner, req, message, cb));
}

/* An append in flight: raft's callback and request data, restored before
 * raft's callback runs (raft_uv keeps only the request). */
typedef struct raftio_append {
	node_raftio *x;
	void *data;
	raft_io_append_cb cb;
} raftio_append;

static void on_append(struct raft_io_append *req, int status)
{
	raftio_append *a = req->data;
	node_raftio *x = a->x;
	raft_io_append_cb cb = a->cb;
	req->data = a->data;
	sh_free(a);
	if (status == 0) {
		cb(req, status);
		return;
	}
	fail(x, status, "its Raft log could not be written");
	x->appends_held++; /* raft's request and its entries' references: held for good */
}

static int f_append(struct raft_io *io, struct raft_io_append *req,
                    const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	node_raftio *x = of_outer(io);
	if (atomic_load(&x->failed)) {
		x->appends_held++; /* never written, never answered */
		return 0;
	}
	raftio_append *a = sh_malloc(sizeof(*a));
	if (a == NULL) {
		snprintf(x->outer.errmsg, sizeof(x->outer.errmsg), "out of memory");
		return RAFT_NOMEM;
	}
	*a = (raftio_append){x, req->data, cb};
	req->data = a;
	int rv = ret(x, x->inner->append(x->inner, req, entries, n, on_append));
	if (rv != 0) {
		req->data = a->data;
		sh_free(a);
	}
	return rv;
}

int node_raftio_failed(node_raftio *x, char *errmsg)
{
	if (!atomic_load(&x->failed))
		return SHOAL_OK;
	return sh_errf(errmsg, x->failed_code, "%s", x->failed_msg);
}

static int f_truncate(struct raft_io *io, raft_index index)
{
	node_raftio *x = of_outer(io);
	if (atomic_load(&x->failed))
		return 0; /* nothing is written any more (see the top) */
	return ret(x, x->inner->truncate(x->inner, index));
}

static int f_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
	node_raftio *x = of_outer(io);
	if (atomic_load(&x->failed))
		return 0; /* never written, never answered */
	if (trailing != 0 || x->installing) /* our own snapshot (see the top) */
		return ret(x, x->inner->snapshot_put(x->inner, trailing, req, snapshot, cb));
	x->put_cb = cb;
	x->put_data = req->data;
	req->data = x;
	x->installing = true;
	int rv = ret(x, x->inner->snapshot_put(x->inner, trailing, req, snapshot, on_install_put));
	if (rv != 0) {
		req->data = x->put_data;
		x->put_cb = NULL;
		x->put_data = NULL;
		x->installing = false;
	}
	return rv;
}

static int f_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                          raft_io_snapshot_get_cb cb)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->snapshot_get(x->inner, req, cb));
}

static raft_time f_time(struct raft_io *io)
{
	node_raftio *x = of_outer(io);
	return x->inner->time(x->inner);
}

static int f_random(struct raft_io *io, int min, int max)
{
	node_raftio *x = of_outer(io);
	return x->inner->random(x->inner, min, max);
}

static int f_async_work(struct raft_io *io, struct raft_io_async_work *req,
                        raft_io_async_work_cb cb)
{
	node_raftio *x = of_outer(io);
	return ret(x, x->inner->async_work(x->inner, req, cb));
}

void node_raftio_init(node_raftio *x, struct raft_io *inner, uint32_t gid)
{
	memset(x, 0, sizeof(*x));
	x->gid = gid;
	x->inner = inner;
	inner->data = x;
	struct raft_io *o = &x->outer;
	o->version = inner->version;
	o->impl = x;
	o->init = f_init;
	o->close = f_close;
	o->load = f_load;
	o->start = f_start;
	o->bootstrap = f_bootstrap;
	o->recover = f_recover;
	o->set_term = f_set_term;
	o->set_vote = f_set_vote;
	o->send = f_send;
	o->append = f_append;
	o->truncate = f_truncate;
	o->snapshot_put = f_snapshot_put;
	o->snapshot_get = f_snapshot_get;
	o->time = f_time;
	o->random = f_random;
	o->async_work = inner->async_work != NULL ? f_async_work : NULL;
}
