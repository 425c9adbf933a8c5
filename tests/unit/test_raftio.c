/*
 * test_raftio -- node/raftio.c, the raft_io in front of raft_uv's: while a
 * snapshot install is written, raft gets no ticks and no vote requests or
 * TimeoutNow; everything else, and everything outside an install, passes
 * through unchanged.  The io behind it here only records what it is given
 * (the guard's contract is with the raft_io interface, not with raft_uv).
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include <raft/fixture.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

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

/* ---- raft 0.15's figure 8, on libraft's fixture -------------------------- */

/* What each server's state machine applied: entries "A" and "B". */
static int applied_a[3], applied_b[3];

static int fx_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	int i = (int)(intptr_t)fsm->data;
	if (buf->len == 8 && memcmp(buf->base, "AAAAAAAA", 8) == 0)
		applied_a[i]++;
	if (buf->len == 8 && memcmp(buf->base, "BBBBBBBB", 8) == 0)
		applied_b[i]++;
	*result = NULL;
	return 0;
}

static void fx_entry(struct raft_fixture *f, unsigned i, raft_term term, char c)
{
	struct raft_entry e;
	memset(&e, 0, sizeof(e));
	e.term = term;
	e.type = RAFT_COMMAND;
	e.buf.len = 8;
	e.buf.base = raft_malloc(8);
	ck_assert_ptr_nonnull(e.buf.base);
	memset(e.buf.base, c, 8);
	raft_fixture_add_entry(f, i, &e);
}

static bool fx_stored(struct raft_fixture *f, void *arg)
{
	return raft_fixture_get(f, 2)->last_stored >= *(raft_index *)arg;
}

static void fx_barrier_cb(struct raft_barrier *req, int status)
{
	(void)req;
	(void)status;
}

/*
 * Raft's figure 8 with three servers.  S1 (leader of term 2) holds A at
 * index 2; S2 (leader of term 3) holds B there; S3 holds neither.  S1 is
 * elected for term 4 with S3's vote (S2 down) and replicates A to S3:
 * A, an entry of an earlier term, is now on a majority.  S1 dies before it
 * stores an entry of term 4; S2 comes back and is elected with S3's vote (its
 * last entry is of a later term) and replicates B, then a barrier of its
 * term, which commits B.  Raft: A was never committed, nobody may apply it.
 * raft 0.15 alone commits A on S1 by counting S1 and S3, and S1 and S3
 * apply it, where S2 will apply B.
 * `wrapped` puts node/raftio.c between each raft and the fixture's io.
 */
static void figure8(bool wrapped)
{
	static struct raft_fixture f;
	static struct raft_fsm fsms[3];
	static node_raftio x[3];
	memset(applied_a, 0, sizeof(applied_a));
	memset(applied_b, 0, sizeof(applied_b));
	ck_assert_int_eq(raft_fixture_initialize(&f), 0);
	for (int i = 0; i < 3; i++) {
		memset(&fsms[i], 0, sizeof(fsms[i]));
		fsms[i].version = 1;
		fsms[i].data = (void *)(intptr_t)i;
		fsms[i].apply = fx_apply;
		ck_assert_int_eq(raft_fixture_grow(&f, &fsms[i]), 0);
	}
	struct raft_configuration conf;
	ck_assert_int_eq(raft_fixture_configuration(&f, 3, &conf), 0);
	ck_assert_int_eq(raft_fixture_bootstrap(&f, &conf), 0);
	raft_configuration_close(&conf);
	fx_entry(&f, 0, 2, 'A');
	fx_entry(&f, 1, 3, 'B');
	for (unsigned i = 0; i < 3; i++)
		raft_fixture_set_term(&f, i, 3);
	if (wrapped)
		for (unsigned i = 0; i < 3; i++) {
			struct raft *r = raft_fixture_get(&f, i);
			node_raftio_init(&x[i], r->io, i);
			r->io = &x[i].outer;
			x[i].outer.data = r; /* as raft_init does */
		}
	ck_assert_int_eq(raft_fixture_start(&f), 0);

	raft_fixture_kill(&f, 1); /* no message, no campaign */
	raft_fixture_elect(&f, 0);
	ck_assert_uint_eq(raft_fixture_get(&f, 0)->current_term, 4);
	raft_index two = 2;
	ck_assert(raft_fixture_step_until(&f, fx_stored, &two, 5000));
	raft_fixture_step_until_elapsed(&f, 200); /* S3's answer reaches S1 */
	raft_index s1_commit = raft_fixture_get(&f, 0)->commit_index;
	if (!wrapped) {
		/* The control: the installed raft has the bug the wrapper is
		 * for -- S1 committed A, S1 and S3 applied it (S3 would then
		 * stop for good when S2 overwrote it).  When a fixed raft
		 * ships, this says so. */
		ck_assert_msg(s1_commit == 2 && applied_a[0] == 1 && applied_a[2] == 1,
		              "raft no longer commits an entry of an earlier term by counting "
		              "(commit %llu, A applied %d/%d/%d): node/raftio.c's commit rules "
		              "may go",
		              (unsigned long long)s1_commit, applied_a[0], applied_a[1],
		              applied_a[2]);
		return;
	}
	ck_assert_msg(s1_commit < 2, "S1 committed A, of an earlier term, by counting");

	raft_fixture_kill(&f, 0);
	raft_fixture_revive(&f, 1);
	ck_assert(raft_fixture_step_until_has_no_leader(&f, 5000));
	raft_fixture_elect(&f, 1);
	ck_assert_uint_ge(raft_fixture_get(&f, 1)->current_term, 5);
	static struct raft_barrier b;
	ck_assert_int_eq(raft_barrier(raft_fixture_get(&f, 1), &b, fx_barrier_cb), 0);
	ck_assert(raft_fixture_step_until_applied(&f, 1, 3, 5000));
	ck_assert(raft_fixture_step_until_applied(&f, 2, 3, 5000));
	/* Not raft_fixture_close: raft 0.15's raft_close then frees a pointer
	 * into one of its entry batches (AddressSanitizer: "attempting free on
	 * address which was not malloc()-ed", with or without raftio.c in
	 * front) after this scenario's truncation of index 2.  What the
	 * fixture allocated stays until the test's process ends (LeakSanitizer
	 * looks away while figure8 runs). */

	for (int i = 0; i < 3; i++)
		ck_assert_msg(applied_a[i] == 0, "server %d applied A", i + 1);
	ck_assert_int_eq(applied_b[1], 1);
	ck_assert_int_eq(applied_b[2], 1);
}

static void figure8_unclosed(bool wrapped)
{
#ifdef __SANITIZE_ADDRESS__
	__lsan_disable();
#endif
	figure8(wrapped);
#ifdef __SANITIZE_ADDRESS__
	__lsan_enable();
#endif
}

START_TEST(test_figure8_raft_alone)
{
	figure8_unclosed(false);
}
END_TEST

START_TEST(test_figure8_with_raftio)
{
	figure8_unclosed(true);
}
END_TEST

static Suite *raftio_suite(void)
{
	return tl_suite("raftio", NULL, NULL, 0,
	                TL_TESTS(test_install_holds_back_elections, test_commit_rules,
	                         test_figure8_raft_alone, test_figure8_with_raftio));
}

TL_MAIN(raftio_suite)
