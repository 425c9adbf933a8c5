/*
 * test_raftio -- node/raftio.c, the raft_io in front of raft_uv's: while a
 * snapshot install is written, raft gets no ticks and no vote requests or
 * TimeoutNow; everything else, and everything outside an install, passes
 * through unchanged.  The io behind it here only records what it is given
 * (the guard's contract is with the raft_io interface, not with raft_uv).
 */
#include <check.h>
#include <string.h>

#include "node/node.h"
#include "tests/lib/testlib.h"

/* The io behind the guard. */
static raft_io_tick_cb inner_tick;
static raft_io_recv_cb inner_recv;
static raft_io_snapshot_put_cb inner_put_cb;
static unsigned inner_put_trailing;
static int inner_puts;

static int b_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	(void)io;
	(void)msecs;
	inner_tick = tick;
	inner_recv = recv;
	return 0;
}

static int b_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
	(void)io;
	(void)snapshot;
	inner_put_trailing = trailing;
	inner_put_cb = cb;
	req->cb = cb; /* as raft_uv does */
	inner_puts++;
	return 0;
}

/* What raft sees. */
static int ticks, received, puts_done;
static unsigned short last_type;
static struct raft_io *seen_io;
static void *seen_data;

static void raft_tick(struct raft_io *io)
{
	seen_io = io;
	ticks++;
}

static void raft_recv(struct raft_io *io, struct raft_message *m)
{
	seen_io = io;
	last_type = m->type;
	received++;
}

static void raft_put_done(struct raft_io_snapshot_put *req, int status)
{
	ck_assert_int_eq(status, 0);
	seen_data = req->data;
	puts_done++;
}

static void deliver(struct raft_io *inner, unsigned short type)
{
	struct raft_message m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	inner_recv(inner, &m);
}

START_TEST(test_install_holds_back_elections)
{
	struct raft_io inner;
	memset(&inner, 0, sizeof(inner));
	inner.start = b_start;
	inner.snapshot_put = b_snapshot_put;
	static node_raftio x;
	node_raftio_init(&x, &inner, 1);
	ck_assert_int_eq(x.outer.start(&x.outer, 100, raft_tick, raft_recv), 0);

	/* Outside an install everything passes, with raft's own io. */
	inner_tick(&inner);
	ck_assert_int_eq(ticks, 1);
	ck_assert_ptr_eq(seen_io, &x.outer);
	deliver(&inner, RAFT_IO_REQUEST_VOTE);
	ck_assert_int_eq(received, 1);

	/* Raft's own snapshot (trailing > 0) holds nothing back and keeps
	 * raft's callback. */
	struct raft_io_snapshot_put own = {.data = &own};
	struct raft_snapshot snap;
	memset(&snap, 0, sizeof(snap));
	ck_assert_int_eq(x.outer.snapshot_put(&x.outer, 64, &own, &snap, raft_put_done), 0);
	ck_assert_ptr_eq((void *)inner_put_cb, (void *)raft_put_done);
	inner_tick(&inner);
	ck_assert_int_eq(ticks, 2);
	inner_put_cb(&own, 0);
	ck_assert_int_eq(puts_done, 1);

	/* An install (trailing 0): no ticks, no votes, no TimeoutNow until its
	 * write is done; entries still pass. */
	int marker;
	struct raft_io_snapshot_put install = {.data = &marker};
	ck_assert_int_eq(x.outer.snapshot_put(&x.outer, 0, &install, &snap, raft_put_done), 0);
	ck_assert_uint_eq(inner_put_trailing, 0);
	inner_tick(&inner);
	inner_tick(&inner);
	deliver(&inner, RAFT_IO_REQUEST_VOTE);
	deliver(&inner, RAFT_IO_TIMEOUT_NOW);
	ck_assert_int_eq(ticks, 2);
	ck_assert_int_eq(received, 1);
	deliver(&inner, RAFT_IO_APPEND_ENTRIES);
	ck_assert_int_eq(received, 2);
	ck_assert_int_eq(last_type, RAFT_IO_APPEND_ENTRIES);
	ck_assert_uint_eq(x.ticks_withheld, 2);
	ck_assert_uint_eq(x.messages_dropped, 2);

	/* The write ends: raft's callback gets its own data back, then ticks
	 * and votes flow again. */
	inner_put_cb(&install, 0);
	ck_assert_int_eq(puts_done, 2);
	ck_assert_ptr_eq(seen_data, &marker);
	inner_tick(&inner);
	ck_assert_int_eq(ticks, 3);
	deliver(&inner, RAFT_IO_REQUEST_VOTE);
	ck_assert_int_eq(received, 3);
	ck_assert_int_eq(inner_puts, 2);
}
END_TEST

/* raft 0.15's broken commit rules (raftio.c, "The commit rules"): what raft
 * is told is adjusted so that it commits only what Raft allows. */
START_TEST(test_commit_rules)
{
	struct raft_io inner;
	memset(&inner, 0, sizeof(inner));
	inner.start = b_start;
	static node_raftio x;
	node_raftio_init(&x, &inner, 1);
	ck_assert_int_eq(x.outer.start(&x.outer, 100, raft_tick, raft_recv), 0);
	static struct raft r;
	memset(&r, 0, sizeof(r));
	x.outer.data = &r; /* as raft_init does */

	/* The log: entries 1..6, of terms 1 1 2 2 2 3 (a circular buffer
	 * that wraps: front 6 of 8 slots). */
	static struct raft_entry slots[8];
	const raft_term terms[6] = {1, 1, 2, 2, 2, 3};
	for (int i = 0; i < 6; i++)
		slots[(6 + i) % 8].term = terms[i];
	r.log.entries = slots;
	r.log.size = 8;
	r.log.front = 6;
	r.log.back = 4;
	r.log.offset = 0;

	struct raft_message m;

	/* A follower: leaderCommit is lowered to the message's last entry. */
	r.state = RAFT_FOLLOWER;
	r.current_term = 3;
	memset(&m, 0, sizeof(m));
	m.type = RAFT_IO_APPEND_ENTRIES;
	m.append_entries.term = 3;
	m.append_entries.prev_log_index = 4;
	m.append_entries.leader_commit = 6;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries.leader_commit, 4); /* a heartbeat proves 4 */
	struct raft_entry e[2];
	memset(e, 0, sizeof(e));
	m.append_entries.entries = e;
	m.append_entries.n_entries = 2;
	m.append_entries.leader_commit = 9;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries.leader_commit, 6);
	m.append_entries.leader_commit = 5;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries.leader_commit, 5); /* already within */
	ck_assert_uint_eq(x.commits_clamped, 2);

	/* A leader of term 4 whose last stored entry (6) is of term 3: a
	 * follower holding it all is reported one short, so no majority
	 * forms on entry 6; rejections and results of other terms pass. */
	r.state = RAFT_LEADER;
	r.current_term = 4;
	r.last_stored = 6;
	memset(&m, 0, sizeof(m));
	m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
	m.append_entries_result.term = 4;
	m.append_entries_result.last_log_index = 6;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 5);
	m.append_entries_result.last_log_index = 4;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 4); /* below: as is */
	m.append_entries_result.last_log_index = 6;
	m.append_entries_result.rejected = 6;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 6);
	m.append_entries_result.rejected = 0;
	m.append_entries_result.term = 3;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 6);
	ck_assert_uint_eq(x.results_clamped, 1);

	/* Once the leader stored an entry of its own term (7, its barrier),
	 * results pass unchanged: committing 7 commits what is before it. */
	slots[4].term = 4;
	r.log.back = 5;
	r.last_stored = 7;
	m.append_entries_result.term = 4;
	m.append_entries_result.last_log_index = 7;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 7);

	/* The same leader before its barrier, with entries up to 6 in a
	 * snapshot (term of 6 from the snapshot's record). */
	r.log.front = r.log.back = 0;
	r.log.offset = 6;
	r.log.snapshot.last_index = 6;
	r.log.snapshot.last_term = 3;
	r.last_stored = 6;
	m.append_entries_result.last_log_index = 6;
	inner_recv(&inner, &m);
	ck_assert_uint_eq(m.append_entries_result.last_log_index, 5);
	ck_assert_uint_eq(x.results_clamped, 2);
	ck_assert_int_eq(received, 9);
}
END_TEST

static Suite *raftio_suite(void)
{
	return tl_suite("raftio", NULL, NULL, 0,
	                TL_TESTS(test_install_holds_back_elections, test_commit_rules));
}

TL_MAIN(raftio_suite)
