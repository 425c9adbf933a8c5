/*
 * pmove.c -- partition moves on the node side (issue 14): a hash range of a
 * table's base items moves from its group (the source) to another (the
 * target) while it keeps being served, then cuts over under a new map epoch.
 *
 * Who does what
 * -------------
 *   group 0's executor (elastic.c)  begins a move in the map
 *                                   (sh_map_begin_move: routing stays on the
 *                                   source), asks the source's leader
 *                                   `part_move` every round, and once it
 *                                   answers READY flips the map
 *                                   (sh_map_finish_move: routers go to the
 *                                   target from then on); for a table's
 *                                   range it also tells the target to serve
 *                                   it (part_own), while the flip is
 *                                   proposed and again after it.
 *   the source's leader (here)      everything else, from a thread of its
 *                                   own (the driver), one move at a time:
 *
 *   phase    what the driver does                               replicated by
 *   -------  ---------------------------------------------------  ------------------
 *   OUT      records the range as moving out: from that entry on  part_out
 *            every base write in it also appends to the range's
 *            move log (storage/parts.h), in the write's LMDB txn
 *   COPYING  a new attempt (a random id): the range's items in    part_ingest on the
 *            chunks (a fresh read txn each, resuming after the     target (its first
 *            last key) to the target, the first with `reset`;     chunk resets the
 *            then the log's records after W, the log's last seq   range there)
 *            seen in the first chunk's read txn (whatever
 *            changed after W is in the log; a chunk read later
 *            holds states newer than W, replaying the log in
 *            order after it converges on the source's)
 *   FENCED   once the log's backlog is small: reads and writes of  part_fence
 *            the range are refused (SHOAL_E_WRONG_GROUP: routers
 *            refresh their map and retry); the rest of the log
 *            goes; then the wait for the GSI outbox to be shipped
 *            up to the fence (the target's later deltas for those
 *            items must not overtake the source's)
 *   READY    reported to the executor, which flips the map
 *   OWN      seeing the flip, the driver tells the target to       part_own on the
 *            serve the range (with the attempt whose data is       target
 *            complete: a target that took a later reset refuses;
 *            the executor has told it already, unless lost)
 *   HANDOVER then the range stops counting in the source's        part_purge with
 *            ItemCount/TableSizeBytes, with the figures the        handover
 *            target's last ingest answered (storage/parts.h,
 *            "Counting")
 *   PURGE    the range's items are deleted from the source in     part_purge
 *            chunks; the range stays refused for good (AWAY)
 *
 * The target refuses client requests for the range from its first reset
 * until part_own (storage/parts.h), so a router with a map older than some
 * earlier move cannot read or write a half-copied range; after part_own it
 * refuses further ingest, so a late attempt can never reset data it serves.
 *
 * Failures: every step is "make it so" and the state is in the source's
 * records and the map.  A new source leader finds the OUT/FENCED record,
 * starts a new attempt (the target's reset throws away the old one's
 * chunks, and refuses any that arrive late), and goes on.  A move the map
 * aborted (sh_map_abort_move) is forgotten by the source (part_abort: the
 * range is served as before); what the target had received stays refused
 * there and is reset by the next move into it.
 *
 * The GSI space ("table" 0: the index partitions of every GSI, by
 * st_index_hash) moves the same way, its entries copied, logged and purged
 * instead of items (storage/parts.h, "The GSI space"), with three
 * differences: a fence pins the range's per-source watermarks, and the own
 * -- sent by this driver only, not by the executor -- carries them to the
 * target; there is no GSI outbox to drain after the fence (entries make no
 * deltas); and the range keeps being read until its handover (its entries
 * do not change once fenced).  Meanwhile the base groups' shippers hold the
 * range's deltas back (node/shipq.c).  Only an operator moves it (`shoal
 * admin move-partition --gsi-space`): the planner leaves it alone.
 *
 * Not moved: DynamoDB Streams records (the source's stream log keeps the
 * range's records from before the cutover, the target's has those after).
 * A base move leaves its GSI entries where the GSI space places them.
 *
 * GSI backfills: a move of a table and the backfill of a GSI of it being
 * created never overlap -- group 0 refuses a map beginning the move while
 * one is being created, and the GSI while a move is under way
 * (st_cluster_map_moving) -- and a backfill indexes only the ranges its
 * group serves (not a FENCED or AWAY one: index_meta.c), the target's
 * starting again when it owns a range (st_part_own).  Otherwise a source's
 * upsert of an item that has moved could reach the index after the new
 * owner's newer delta of the same entry.
 *
 * Threads: the driver is one thread per node (it blocks on proposals and on
 * the target's answers); node_handle_part_move runs on nng threads; they
 * meet under pm->mu.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/cluster_map.h"
#include "common/placement.h"
#include "node/fsm_int.h"
#include "node/node.h"
#include "node/ship_int.h"
#include "proto/lanes.h"
#include "proto/wire.h"
#include "storage/index.h"
#include "storage/parts.h"
#include "storage/stream.h"

#define PM_MAX_MOVES 16
/* A part_ingest's size.  Its apply holds the target's replicas' loops --
 * every group of those nodes waits -- so it is kept to tens of
 * milliseconds under load: measured with bench-move (2026-11-28), a 1 MiB
 * copy chunk (1,020 items) took 60-150 ms to apply, and a log chunk of
 * 2,894 records (135 KB: each a write at a random key) 270-330 ms, which
 * held the writes of the source's group just before its fence. */
#define PM_CHUNK_BYTES    (256u << 10) /* items (bytes) per part_ingest, about */
#define PM_LOG_RECORDS    256          /* move-log records per part_ingest, at most */
#define PM_PURGE_ITEMS    500          /* items per part_purge entry */
#define PM_PURGE_PACE_MS  100          /* a purge entry's pause after it, at most */
#define PM_FENCE_BACKLOG  64           /* log records left when the fence goes up */
#define PM_RPC_MS         10000        /* a part_ingest / part_own answer, at most */
#define PM_IDLE_MS        100          /* the driver's pause between passes */
#define PM_WANT_MS        10000        /* a move the executor stopped asking about */
#define PM_OUTBOX_WAIT_MS 500          /* a pass's wait for the GSI outbox after the fence */

typedef struct pm_move {
	uint32_t group, table, to_group;
	uint64_t lo, hi;
	uint64_t map_epoch; /* the executor's map when it asked */
	uint64_t want_ns;   /* when the executor last asked (0: found in a record) */
	/* The driver's progress (this node's leadership only). */
	int phase; /* Shoal__PartStatus__Phase */
	uint64_t attempt, copied, log_acked, log_last;
	uint64_t fence_outbox; /* the outbox's last seq once fenced (0: not yet) */
	uint64_t fenced_ns;    /* when this driver fenced it (0: a pass of an earlier one) */
	/* What the target said it holds of the range after this attempt's
	 * last ingest (the handover's figures once the copy is complete). */
	bool held_known;
	st_part_held held;
	uint64_t term; /* the leadership the progress belongs to */
} pm_move;

struct node_pmove {
	node *n;
	node_ship *s;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool kicked; /* node_pmove_kick since the driver's last wait (mu) */
	pm_move moves[PM_MAX_MOVES];
	uint32_t n_moves;
	node_waiter w; /* the driver's proposals */
	/* $SHOAL_PMOVE_TEST_PAUSE_MS (tests only: 0 otherwise): 4 KiB chunks and
	 * this pause after each and before the fence, so that a test can act
	 * in the middle of a copy. */
	uint32_t test_pause_ms;
	/* $SHOAL_PMOVE_TEST_FENCED_MS (tests only: 0 otherwise): how long each
	 * attempt holds the range FENCED before it drains the GSI outbox and
	 * reports READY, so that a test can act between fence and cutover. */
	uint32_t test_fenced_ms;
	/* A part_ingest's items (or log records), about: PM_CHUNK_BYTES, 4 KiB
	 * with test pauses (so that a copy of a test's few items takes many
	 * chunks and a fault can land in its middle). */
	size_t chunk_bytes;
	atomic_uint_fast64_t done, copied, purged, attempts;
	node_log_budget list_log; /* the driver's: a failed listing of the records */
};

/* --- the wire: requests to the target ---------------------------------------- */

typedef struct pm_rpc {
	wire_lane_item item; /* first */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	Shoal__NodeResponse *nr;
} pm_rpc;

static void rpc_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	pm_rpc *r = (pm_rpc *)it;
	Shoal__NodeResponse *nr = NULL;
	if (rv == WIRE_LANE_OK)
		wire_unpack_node_response(NULL, ans, len, &nr, NULL);
	if (whole != NULL)
		nng_msg_free(whole);
	pthread_mutex_lock(&r->mu);
	r->nr = nr;
	r->done = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* What an answer's PartStatus says the target holds of the range. */
typedef struct pm_held {
	bool known;
	st_part_held held;
} pm_held;

/* Held figures off the wire (a PartStatus's, a PartRange's): index entries
 * known only if every one is well formed and they fit (else the source
 * counts its entries until purged: storage/parts.h, Counting). */
static void held_from_pb(st_part_held *h, uint64_t items, uint64_t bytes, bool ix_known, size_t n,
                         Shoal__HeldIndex *const *ix)
{
	h->items = items;
	h->bytes = bytes;
	h->ix_known = ix_known && n <= ST_PART_HELD_IX;
	h->n_ix = 0;
	for (size_t i = 0; h->ix_known && i < n; i++) {
		if (ix[i] == NULL || ix[i]->index == 0 || ix[i]->index > UINT16_MAX) {
			h->ix_known = false;
			break;
		}
		h->ix[h->n_ix++] = (st_part_held_ix){ix[i]->table, (uint16_t)ix[i]->index,
		                                     ix[i]->items, ix[i]->bytes};
	}
	if (!h->ix_known)
		h->n_ix = 0;
}

/* h's index entries as wire messages in x and p (ST_PART_HELD_IX each):
 * *n of them, *known as h says. */
static void held_to_pb(const st_part_held *h, Shoal__HeldIndex *x, Shoal__HeldIndex **p,
                       protobuf_c_boolean *known, size_t *n)
{
	*known = h->ix_known;
	*n = 0;
	for (uint32_t i = 0; h->ix_known && i < h->n_ix && i < ST_PART_HELD_IX; i++) {
		shoal__held_index__init(&x[i]);
		x[i].table = h->ix[i].table;
		x[i].index = h->ix[i].index;
		x[i].items = h->ix[i].items;
		x[i].bytes = h->ix[i].bytes;
		p[(*n)++] = &x[i];
	}
}

/* Sends nr to node dest and waits for the answer; the code of the answer
 * (SHOAL_E_UNAVAILABLE: none), *leader the NOT_LEADER hint, *held (may be
 * NULL) the answer's held figures. */
static int rpc(node_pmove *pm, uint32_t dest, Shoal__NodeRequest *nr, uint32_t *leader,
               pm_held *held, char *msg)
{
	*leader = 0;
	if (held != NULL)
		held->known = false;
	wire_lanes *l = node_ship_lanes_to(pm->s, dest);
	size_t len = shoal__node_request__get_packed_size(nr);
	uint8_t *buf = sh_malloc(len > 0 ? len : 1);
	if (l == NULL || buf == NULL) {
		sh_free(buf);
		return sh_errf(msg, SHOAL_E_UNAVAILABLE, "no lane to node %u", dest);
	}
	pm_rpc r;
	memset(&r, 0, sizeof(r));
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	r.item.part[0] = buf;
	r.item.len[0] = shoal__node_request__pack(nr, buf);
	r.item.deadline = sh_now_ms() + PM_RPC_MS;
	r.item.done = rpc_done;
	int rc = wire_lanes_submit(l, &r.item);
	if (rc == SHOAL_OK) {
		pthread_mutex_lock(&r.mu);
		while (!r.done)
			pthread_cond_wait(&r.cv, &r.mu);
		pthread_mutex_unlock(&r.mu);
	}
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
	sh_free(buf);
	if (rc != SHOAL_OK || r.nr == NULL) {
		if (r.nr != NULL)
			shoal__node_response__free_unpacked(r.nr, wire_heap_allocator());
		return sh_errf(msg, SHOAL_E_UNAVAILABLE, "node %u did not answer", dest);
	}
	int code = SHOAL_E_INTERNAL;
	if (r.nr->response != NULL) {
		code = wire_code_from_status(r.nr->response->status);
		snprintf(msg, SH_ERRMSG_SIZE, "%s",
		         r.nr->response->message != NULL ? r.nr->response->message : "");
	}
	*leader = r.nr->leader_node;
	const Shoal__PartStatus *ps = r.nr->part_status;
	if (held != NULL && code == SHOAL_OK && ps != NULL && ps->held_known) {
		held->known = true;
		held_from_pb(&held->held, ps->held_items, ps->held_bytes, ps->held_indexes_known,
		             ps->n_held_indexes, ps->held_indexes);
	}
	shoal__node_response__free_unpacked(r.nr, wire_heap_allocator());
	return code;
}

static bool stopping(node_pmove *pm)
{
	pthread_mutex_lock(&pm->mu);
	bool s = pm->stop;
	pthread_mutex_unlock(&pm->mu);
	return s;
}

/* Sends nr to group g's leader: the preferred voter first, then the leader
 * each NOT_LEADER names, then every voter in turn. */
static int rpc_leader(node_pmove *pm, uint32_t g, Shoal__NodeRequest *nr, pm_held *held, char *msg)
{
	uint32_t voters[SH_MAP_GROUP_REPLICAS];
	uint32_t nv = sh_place_voters(pm->n->place, g, voters, SH_MAP_GROUP_REPLICAS);
	if (nv == 0)
		return sh_errf(msg, SHOAL_E_UNAVAILABLE, "group %u has no voters in the map", g);
	uint32_t dest = sh_place_preferred(pm->n->place, g);
	int rc = SHOAL_E_UNAVAILABLE;
	for (uint32_t tries = 0; tries < 2 * nv + 2 && !stopping(pm); tries++) {
		nr->group = g;
		uint32_t leader;
		rc = rpc(pm, dest, nr, &leader, held, msg);
		if (rc != SHOAL_E_NOT_LEADER && rc != SHOAL_E_UNAVAILABLE)
			return rc;
		dest = leader != 0 ? leader : voters[tries % nv];
	}
	return rc;
}

/* --- proposals on the source -------------------------------------------------- */

/* Proposes op on g and waits; the operation's own code (its response's). */
static int propose(node_pmove *pm, node_group *g, Shoal__CommandOp *op, size_t size,
                   Shoal__PartStatus__Phase *phase, char *msg)
{
	node_waiter *w = &pm->w;
	w->kind = NODE_WAIT_WRITE;
	w->op = *op;
	w->size = size + 64;
	w->cb = NULL;
	w->data = NULL;
	w->done = false;
	int rc = node_group_submit(g, w, msg);
	if (rc != SHOAL_OK)
		return rc;
	rc = node_waiter_wait(w);
	if (rc != SHOAL_OK) {
		snprintf(msg, SH_ERRMSG_SIZE, "%s", w->msg);
		sh_free(w->resp);
		w->resp = NULL;
		return rc;
	}
	Shoal__NodeResponse *nr = NULL;
	if (w->resp != NULL)
		wire_unpack_node_response(NULL, w->resp, w->resp_len, &nr, NULL);
	sh_free(w->resp);
	w->resp = NULL;
	if (nr == NULL)
		return sh_errf(msg, SHOAL_E_INTERNAL, "an unreadable result");
	if (nr->response != NULL) {
		rc = wire_code_from_status(nr->response->status);
		snprintf(msg, SH_ERRMSG_SIZE, "%s",
		         nr->response->message != NULL ? nr->response->message : "");
	}
	if (phase != NULL && nr->part_status != NULL)
		*phase = nr->part_status->phase;
	shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	return rc;
}

/* held: a part_purge's count of the range (NULL: none); with handover, the
 * handover only. */
static int propose_range(node_pmove *pm, node_group *g, Shoal__CommandOp__OpCase kind,
                         const pm_move *m, uint64_t attempt, const st_part_held *held,
                         bool handover, Shoal__PartStatus__Phase *phase, char *msg)
{
	Shoal__PartRange r = SHOAL__PART_RANGE__INIT;
	r.table = m->table;
	r.lo = m->lo;
	r.hi = m->hi;
	r.to_group = m->to_group;
	r.attempt = attempt;
	Shoal__HeldIndex hx[ST_PART_HELD_IX], *hp[ST_PART_HELD_IX];
	if (held != NULL) {
		r.held_known = true;
		r.held_items = held->items;
		r.held_bytes = held->bytes;
		held_to_pb(held, hx, hp, &r.held_indexes_known, &r.n_held_indexes);
		r.held_indexes = hp;
	}
	r.handover = handover;
	Shoal__CommandOp op = SHOAL__COMMAND_OP__INIT;
	op.op_case = kind;
	switch (kind) {
	case SHOAL__COMMAND_OP__OP_PART_OUT:
		op.part_out = &r;
		break;
	case SHOAL__COMMAND_OP__OP_PART_FENCE:
		op.part_fence = &r;
		break;
	case SHOAL__COMMAND_OP__OP_PART_PURGE:
		op.part_purge = &r;
		break;
	case SHOAL__COMMAND_OP__OP_PART_ABORT:
		op.part_abort = &r;
		break;
	default:
		return SHOAL_E_INTERNAL;
	}
	return propose(pm, g, &op, 64, phase, msg);
}

/* --- the driver's steps --------------------------------------------------------- */

/* Whether this node still leads g in the term the move's progress is from. */
static bool still_leading(node_group *g, const pm_move *m)
{
	uint64_t term;
	return node_group_leading(g, &term) && term == m->term;
}

/* Sends one PartIngest to the target. */
static int send_ingest(node_pmove *pm, pm_move *m, bool reset, uint8_t **keys, size_t *klens,
                       uint8_t **vals, size_t *vlens, size_t n, char *msg)
{
	Shoal__PartRange r = SHOAL__PART_RANGE__INIT;
	r.table = m->table;
	r.lo = m->lo;
	r.hi = m->hi;
	r.to_group = m->to_group;
	r.attempt = m->attempt;
	Shoal__PartIngest pi = SHOAL__PART_INGEST__INIT;
	pi.range = &r;
	pi.reset = reset;
	ProtobufCBinaryData *k = NULL, *v = NULL;
	if (n > 0) {
		k = sh_calloc(n, sizeof(*k));
		v = sh_calloc(n, sizeof(*v));
		if (k == NULL || v == NULL) {
			sh_free(k);
			sh_free(v);
			return sh_errf(msg, SHOAL_E_NOMEM, "out of memory");
		}
		for (size_t i = 0; i < n; i++) {
			k[i] = (ProtobufCBinaryData){klens[i], keys[i]};
			v[i] = (ProtobufCBinaryData){vlens[i], vals[i]};
		}
	}
	pi.n_keys = pi.n_values = n;
	pi.keys = k;
	pi.values = v;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.part_ingest = &pi;
	pm_held held = {.known = false};
	int rc = rpc_leader(pm, m->to_group, &nr, &held, msg);
	sh_free(k);
	sh_free(v);
	m->held_known = rc == SHOAL_OK && held.known;
	m->held = held.held;
	return rc;
}

/*
 * The target group has no definition of the table (a group created after
 * the table, or one that lost it): the source's own definition goes there
 * first, as a router repairs a data group (router/job.c, "Repair") -- the
 * same TableDefine, id and creation time fixed by group 0, so defining it
 * twice changes nothing.
 */
static int define_at_target(node_pmove *pm, node_group *g, const pm_move *m, char *msg)
{
	sh_arena a;
	sh_arena_init(&a);
	st_table_info info;
	Shoal__TableDefine *d = NULL;
	int rc = st_table_describe_id(node_group_env(g), m->table, &a, &info, msg);
	if (rc == SHOAL_OK)
		rc = wire_table_define_to_pb(&a, &info.def, &d, msg);
	if (rc == SHOAL_OK) {
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.define_table = d;
		rc = rpc_leader(pm, m->to_group, &nr, NULL, msg);
	}
	node_logf(rc == SHOAL_OK ? NODE_LOG_INFO : NODE_LOG_WARN,
	          "pmove: group %u %s: defined at group %u, which did not have it%s%s", m->group,
	          SH_MAP_TABLE(m->table), m->to_group, rc == SHOAL_OK ? "" : ": ",
	          rc == SHOAL_OK ? "" : msg);
	sh_arena_fini(&a);
	return rc;
}

/* Waits ms, or less: until the node stops or cv is signalled (the
 * executor's asks signal it). */
static void wait_ms(node_pmove *pm, uint64_t ms)
{
	if (ms == 0)
		return;
	pthread_mutex_lock(&pm->mu);
	if (!pm->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + ms * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&pm->cv, &pm->mu, &ts);
	}
	pthread_mutex_unlock(&pm->mu);
}

static void test_pause(node_pmove *pm)
{
	wait_ms(pm, pm->test_pause_ms);
}

/* The test hold in FENCED: the whole of test_fenced_ms (the executor's
 * asks signal cv, so test_pause's single wait would end early), or until
 * the node stops. */
static void test_hold_fenced(node_pmove *pm, const pm_move *m)
{
	if (pm->test_fenced_ms == 0)
		return;
	node_logf(NODE_LOG_WARN,
	          "pmove: group %u %s [%016" PRIx64 "]: test hold of %u ms in FENCED", m->group,
	          SH_MAP_TABLE(m->table), m->lo, pm->test_fenced_ms);
	int64_t until = sh_now_ms() + (int64_t)pm->test_fenced_ms;
	pthread_mutex_lock(&pm->mu);
	while (!pm->stop && sh_now_ms() < until) {
		struct timespec ts;
		sh_timespec_in(CLOCK_REALTIME, 20, &ts);
		pthread_cond_timedwait(&pm->cv, &pm->mu, &ts);
	}
	pthread_mutex_unlock(&pm->mu);
}

/* Copies the range to the target: a new attempt from its reset.  Leaves
 * m->log_acked at the watermark W. */
static int copy_range(node_pmove *pm, node_group *g, pm_move *m, char *msg)
{
	st_env *env = node_group_env(g);
	m->attempt = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 2) ^ node_now_ns();
	if (m->attempt == 0)
		m->attempt = 1;
	m->copied = 0;
	m->log_acked = 0;
	m->held_known = false;
	atomic_fetch_add(&pm->attempts, 1);
	uint8_t *after = NULL;
	size_t after_len = 0;
	bool first = true, more = true;
	int rc = SHOAL_OK;
	sh_arena a;
	sh_arena_init(&a);
	while (more && rc == SHOAL_OK) {
		if (stopping(pm) || !still_leading(g, m)) {
			rc = sh_errf(msg, SHOAL_E_NOT_LEADER, "no longer leading");
			break;
		}
		sh_arena_reset(&a);
		uint8_t **keys, **vals;
		size_t *klens, *vlens, n;
		uint64_t log_last;
		rc = st_part_copy_chunk(env, m->table, m->lo, m->hi, after, after_len,
		                        pm->chunk_bytes, &a, &keys, &klens, &vals, &vlens, &n,
		                        &more, &log_last, msg);
		if (rc != SHOAL_OK)
			break;
		if (first)
			m->log_acked = log_last;
		rc = send_ingest(pm, m, first, keys, klens, vals, vlens, n, msg);
		if (rc == SHOAL_E_NOT_FOUND && first &&
		    (rc = define_at_target(pm, g, m, msg)) == SHOAL_OK)
			rc = send_ingest(pm, m, first, keys, klens, vals, vlens, n, msg);
		if (rc != SHOAL_OK)
			break;
		first = false;
		test_pause(pm);
		m->copied += n;
		atomic_fetch_add(&pm->copied, n);
		if (n > 0) {
			uint8_t *nk = sh_malloc(klens[n - 1]);
			if (nk == NULL) {
				rc = sh_errf(msg, SHOAL_E_NOMEM, "out of memory");
				break;
			}
			memcpy(nk, keys[n - 1], klens[n - 1]);
			sh_free(after);
			after = nk;
			after_len = klens[n - 1];
		}
	}
	sh_free(after);
	sh_arena_fini(&a);
	return rc;
}

/* Ships the log after m->log_acked until it is drained (or `max` records
 * are left when not fenced). */
static int ship_log(node_pmove *pm, node_group *g, pm_move *m, uint64_t max_left, char *msg)
{
	st_env *env = node_group_env(g);
	sh_arena a;
	sh_arena_init(&a);
	int rc = SHOAL_OK;
	for (;;) {
		if (stopping(pm) || !still_leading(g, m)) {
			rc = sh_errf(msg, SHOAL_E_NOT_LEADER, "no longer leading");
			break;
		}
		if ((rc = st_part_log_last(env, m->table, m->lo, &m->log_last, msg)) != SHOAL_OK)
			break;
		if (m->log_last <= m->log_acked + max_left)
			break;
		sh_arena_reset(&a);
		uint8_t **keys, **vals;
		size_t *klens, *vlens, n;
		uint64_t last;
		rc = st_part_log_read(env, m->table, m->lo, m->log_acked, pm->chunk_bytes,
		                      PM_LOG_RECORDS, &a, &keys, &klens, &vals, &vlens, &last, &n,
		                      msg);
		if (rc != SHOAL_OK || n == 0)
			break;
		if ((rc = send_ingest(pm, m, false, keys, klens, vals, vlens, n, msg)) != SHOAL_OK)
			break;
		m->log_acked = last;
	}
	sh_arena_fini(&a);
	return rc;
}

static void set_phase(node_pmove *pm, pm_move *m, int phase)
{
	pthread_mutex_lock(&pm->mu);
	m->phase = phase;
	pthread_mutex_unlock(&pm->mu);
}

/* The map's view of the move: 1 pending (begun, to m->to_group), 2 done
 * (the partition holding m->lo is served by the target, whatever happened
 * to it since), 0 neither (aborted, or the map is older than the move). */
static int map_view(node_pmove *pm, const pm_move *m, uint64_t *epoch)
{
	sh_map map;
	if (sh_place_copy(pm->n->place, &map) != SHOAL_OK)
		return -1;
	*epoch = map.epoch;
	int v = 0;
	uint32_t i = sh_map_part_of(&map, m->table, m->lo);
	if (i != SH_MAP_NONE) {
		const sh_map_part *p = &map.parts[i];
		if (p->group == m->group && p->to_group == m->to_group && p->lo == m->lo &&
		    sh_map_part_hi(&map, i) == m->hi)
			v = 1;
		else if (p->group == m->to_group)
			v = 2;
	}
	sh_map_fini(&map);
	return v;
}

/* The stream shard group gid's fence closed for [lo, hi] of table (the
 * target's new shard names it as its parent): false if none (or it cannot be
 * read: the child is then listed without a parent). */
static bool closed_shard(uint32_t gid, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                         Shoal__StreamShardRef *out)
{
	st_shard sh;
	bool found = false;
	char msg[SH_ERRMSG_SIZE];
	if (st_stream_shard_last_closed(env, table, lo, hi, &sh, &found, msg) != SHOAL_OK || !found)
		return false;
	shoal__stream_shard_ref__init(out);
	out->group = gid;
	out->lo = sh.lo;
	out->start = sh.start;
	return true;
}

/* The move as its data is complete (part_ready to group 0, part_own to the
 * target): range, source, target, attempt, and the stream shard the fence
 * closed (in *parent, which r then points to). */
static void complete_range(node_group *g, const pm_move *m, Shoal__PartRange *r,
                           Shoal__StreamShardRef *parent)
{
	shoal__part_range__init(r);
	r->table = m->table;
	r->lo = m->lo;
	r->hi = m->hi;
	r->to_group = m->to_group;
	r->from_group = m->group;
	r->attempt = m->attempt;
	if (closed_shard(m->group, node_group_env(g), m->table, m->lo, m->hi, parent))
		r->stream_parent = parent;
}

/* Copy, log, fence, drain: up to READY.  SHOAL_OK also when it has to wait
 * (the next pass goes on); SHOAL_E_IN_USE: the target already serves the
 * range (it refused the reset). */
static int advance(node_pmove *pm, node_group *g, pm_move *m, const st_part_rec *rec, char *msg)
{
	int rc;
	if (m->phase == SHOAL__PART_STATUS__PHASE__NONE) {
		set_phase(pm, m, SHOAL__PART_STATUS__PHASE__COPYING);
		m->fence_outbox = 0;
		m->fenced_ns = 0;
		if ((rc = copy_range(pm, g, m, msg)) != SHOAL_OK)
			return rc;
		node_logf(NODE_LOG_INFO,
		          "pmove: group %u %s [%016" PRIx64 ", %016" PRIx64 "]: copied %" PRIu64
		          " items to group %u (attempt %016" PRIx64 ")",
		          m->group, SH_MAP_TABLE(m->table), m->lo, m->hi, m->copied, m->to_group,
		          m->attempt);
	}
	if (rec->state == ST_PART_OUT && m->phase == SHOAL__PART_STATUS__PHASE__COPYING) {
		if ((rc = ship_log(pm, g, m, PM_FENCE_BACKLOG, msg)) != SHOAL_OK)
			return rc;
		test_pause(pm);
		rc = propose_range(pm, g, SHOAL__COMMAND_OP__OP_PART_FENCE, m, 0, NULL, false, NULL,
		                   msg);
		if (rc == SHOAL_E_IN_USE) /* a prepared transaction: the next pass */
			return SHOAL_OK;
		if (rc != SHOAL_OK)
			return rc;
		m->fenced_ns = node_now_ns();
		node_logf(NODE_LOG_INFO,
		          "pmove: group %u %s [%016" PRIx64 "]: fenced (reads and writes of the "
		          "range refused until the cutover)",
		          m->group, SH_MAP_TABLE(m->table), m->lo);
	}
	set_phase(pm, m, SHOAL__PART_STATUS__PHASE__FENCED);
	uint64_t tail_from = m->log_acked, pass_ns = node_now_ns();
	if ((rc = ship_log(pm, g, m, 0, msg)) != SHOAL_OK)
		return rc;
	uint64_t tail_ns = node_now_ns();
	/* The GSI deltas of the range's writes before the fence must reach
	 * their index partitions before the target's later ones can (a range
	 * of the GSI space writes no delta). */
	if (m->fence_outbox == 0)
		test_hold_fenced(pm, m); /* once per attempt */
	if (m->table == ST_PART_GSI)
		m->fence_outbox = 1; /* held once */
	st_outbox_info oi;
	for (int64_t until = sh_now_ms() + PM_OUTBOX_WAIT_MS; m->table != ST_PART_GSI;
	     usleep(2000)) {
		if ((rc = st_outbox_get_info(node_group_env(g), &oi, msg)) != SHOAL_OK)
			return rc;
		if (m->fence_outbox == 0)
			m->fence_outbox = oi.last_seq + 1;
		if (oi.shipped + 1 >= m->fence_outbox)
			break;
		if (sh_now_ms() >= until || stopping(pm))
			return SHOAL_OK; /* the next pass looks again */
	}
	set_phase(pm, m, SHOAL__PART_STATUS__PHASE__READY);
	/* What the range's refusal waited for (this pass's steps; the fence's
	 * age when this driver fenced it). */
	uint64_t ready_ns = node_now_ns();
	char since[48] = "";
	if (m->fenced_ns != 0)
		snprintf(since, sizeof(since), " %.1f ms after the fence",
		         (double)(ready_ns - m->fenced_ns) / 1e6);
	node_logf(NODE_LOG_INFO,
	          "pmove: group %u %s [%016" PRIx64 "]: fenced and drained, ready for the "
	          "cutover to group %u%s (the log's tail: %" PRIu64 " records in %.1f ms; "
	          "the GSI outbox: %.1f ms)",
	          m->group, SH_MAP_TABLE(m->table), m->lo, m->to_group, since,
	          m->log_acked - tail_from, (double)(tail_ns - pass_ns) / 1e6,
	          (double)(ready_ns - tail_ns) / 1e6);
	/* The range is refused until the cutover: tell the executor now
	 * rather than at its next poll (a lost push costs only that poll). */
	Shoal__PartRange r;
	Shoal__StreamShardRef parent;
	complete_range(g, m, &r, &parent);
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.part_ready = &r;
	char why[SH_ERRMSG_SIZE];
	if (rpc_leader(pm, 0, &nr, NULL, why) != SHOAL_OK)
		node_logf(NODE_LOG_DEBUG, "pmove: group %u %s [%016" PRIx64 "]: part_ready: %s",
		          m->group, SH_MAP_TABLE(m->table), m->lo, why);
	return SHOAL_OK;
}

/* The marks of a fenced GSI range (the source's, pinned at its fence) into
 * r->marks, from a. */
static int own_marks_pb(node_group *g, const pm_move *m, sh_arena *a, Shoal__PartRange *r,
                        char *msg)
{
	st_part_mark *mk;
	size_t n;
	int rc = st_part_gsi_marks(node_group_env(g), m->lo, m->hi, a, &mk, &n, msg);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__GsiMark **v = sh_arena_calloc(a, n > 0 ? n : 1, sizeof(*v));
	Shoal__GsiMark *x = sh_arena_calloc(a, n > 0 ? n : 1, sizeof(*x));
	if (v == NULL || x == NULL)
		return sh_errf(msg, SHOAL_E_NOMEM, "part_own: out of memory");
	for (size_t i = 0; i < n; i++) {
		shoal__gsi_mark__init(&x[i]);
		x[i].lo = mk[i].lo;
		x[i].hi = mk[i].hi;
		x[i].n_sources = mk[i].n;
		x[i].sources = mk[i].sources;
		x[i].n_seqs = mk[i].n;
		x[i].seqs = mk[i].seqs;
		v[i] = &x[i];
	}
	r->n_marks = n;
	r->marks = v;
	return SHOAL_OK;
}

/* Tells the target to serve the range (the attempt's data is complete). */
static int own(node_pmove *pm, node_group *g, const pm_move *m, char *msg)
{
	Shoal__PartRange r;
	Shoal__StreamShardRef parent;
	complete_range(g, m, &r, &parent);
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.part_own = &r;
	sh_arena a;
	sh_arena_init(&a);
	int rc = m->table == ST_PART_GSI ? own_marks_pb(g, m, &a, &r, msg) : SHOAL_OK;
	if (rc == SHOAL_OK)
		rc = rpc_leader(pm, m->to_group, &nr, NULL, msg);
	sh_arena_fini(&a);
	return rc;
}

/* For a purge without a handover: whether the range still counts here
 * (storage/parts.h, Counting), with its items in *held, counted off the
 * state machine's loop (the range is fenced: nothing changes it).  A failed
 * count is logged and the range counts here until purged. */
static bool range_count(node_group *g, const pm_move *m, st_part_held *held)
{
	char msg[SH_ERRMSG_SIZE];
	bool counted;
	if (st_part_held_count(node_group_env(g), m->table, m->lo, held, &counted, msg) == SHOAL_OK)
		return !counted;
	node_logf(NODE_LOG_WARN,
	          "pmove: group %u %s [%016" PRIx64 "]: counting the range: %s (it counts "
	          "here until purged)",
	          m->group, SH_MAP_TABLE(m->table), m->lo, msg);
	return false;
}

/* The target serves the range: it stops counting here, with what the
 * target's last ingest said it holds (the copy is complete: no scan).  Done
 * after part_own, not before: a Raft entry between the map's flip and
 * part_own would lengthen the cutover (the range is refused meanwhile), so
 * the range counts at both groups for this one entry's commit instead.
 * Without those figures (a leader that changed after the copy), or if it
 * fails (logged), the purge's first entry does it. */
static void handover(node_pmove *pm, node_group *g, const pm_move *m, const st_part_rec *rec)
{
	char msg[SH_ERRMSG_SIZE] = "";
	if (!m->held_known || rec->counted) /* (counted: an earlier pass did it) */
		return;
	if (propose_range(pm, g, SHOAL__COMMAND_OP__OP_PART_PURGE, m, 0, &m->held, true, NULL,
	                  msg) != SHOAL_OK)
		node_logf(NODE_LOG_WARN, "pmove: group %u %s [%016" PRIx64 "]: handover: %s",
		          m->group, SH_MAP_TABLE(m->table), m->lo, msg);
	else {
		uint64_t entries = 0;
		for (uint32_t i = 0; i < m->held.n_ix; i++)
			entries += m->held.ix[i].items;
		node_logf(NODE_LOG_INFO,
		          "pmove: group %u %s [%016" PRIx64 "]: handed over to group %u: "
		          "%" PRIu64 " items, %" PRIu64 " bytes, %s%" PRIu64
		          " index entries no longer counted here",
		          m->group, SH_MAP_TABLE(m->table), m->lo, m->to_group, m->held.items,
		          m->held.bytes,
		          m->held.ix_known ? "" : "(not known: counted until purged) ", entries);
	}
}

/* Deletes the range here, chunk by chunk, until it is AWAY.  Each chunk
 * is applied by every replica's loop, which every group of its node shares,
 * right when the moved range's writes start at the target (often on the
 * same nodes): so chunks are small, and each is followed by a pause as long
 * as it took (PM_PURGE_PACE_MS at most) -- the purge is nobody's wait, the
 * writes beside it are. */
static void purge(node_pmove *pm, node_group *g, pm_move *m)
{
	char msg[SH_ERRMSG_SIZE] = "";
	Shoal__PartStatus__Phase ph = SHOAL__PART_STATUS__PHASE__FENCED;
	/* Without a handover (a leader that changed after the map's flip),
	 * the first entry does it. */
	st_part_held held;
	bool counted = !range_count(g, m, &held);
	while (ph != SHOAL__PART_STATUS__PHASE__AWAY && !stopping(pm) && still_leading(g, m)) {
		int64_t t0 = sh_now_ms();
		int rc = propose_range(pm, g, SHOAL__COMMAND_OP__OP_PART_PURGE, m, 0,
		                       counted ? NULL : &held, false, &ph, msg);
		counted = true; /* the first entry records it; later ones ignore it */
		if (rc != SHOAL_OK) {
			node_logf(NODE_LOG_WARN, "pmove: group %u %s [%016" PRIx64 "]: purge: %s",
			          m->group, SH_MAP_TABLE(m->table), m->lo, msg);
			return;
		}
		int64_t took = sh_now_ms() - t0;
		if (ph != SHOAL__PART_STATUS__PHASE__AWAY && took > 0)
			wait_ms(pm, (uint64_t)(took < PM_PURGE_PACE_MS ? took : PM_PURGE_PACE_MS));
	}
	if (ph != SHOAL__PART_STATUS__PHASE__AWAY)
		return;
	/* The move is over here: its slot leaves the table at the next pass
	 * (its record is AWAY, and it counts as not asked), so that a later
	 * move of the same range starts from a slot of its own. */
	pthread_mutex_lock(&pm->mu);
	m->phase = SHOAL__PART_STATUS__PHASE__AWAY;
	m->want_ns = 0;
	pthread_mutex_unlock(&pm->mu);
	atomic_fetch_add(&pm->done, 1);
	node_logf(NODE_LOG_INFO,
	          "pmove: group %u %s [%016" PRIx64 ", %016" PRIx64
	          "]: moved to group %u, purged here",
	          m->group, SH_MAP_TABLE(m->table), m->lo, m->hi, m->to_group);
}

/* One pass over one move whose source this node leads. */
static void drive(node_pmove *pm, node_group *g, pm_move *m, const st_part_rec *rec)
{
	char msg[SH_ERRMSG_SIZE] = "";
	uint64_t epoch;
	int view = map_view(pm, m, &epoch);
	if (view < 0)
		return;
	int rc;
	if (rec == NULL) {
		/* Asked to move, nothing recorded yet: the range starts
		 * moving out (its record keeps the executor's map epoch). */
		if (view != 1)
			return;
		rc = propose_range(pm, g, SHOAL__COMMAND_OP__OP_PART_OUT, m, m->map_epoch, NULL,
		                   false, NULL, msg);
		if (rc != SHOAL_OK)
			node_logf(NODE_LOG_WARN, "pmove: group %u %s [%016" PRIx64 "]: out: %s",
			          m->group, SH_MAP_TABLE(m->table), m->lo, msg);
		return;
	}
	if (rec->state == ST_PART_AWAY)
		return;
	if (rec->state == ST_PART_OUT && m->phase >= SHOAL__PART_STATUS__PHASE__FENCED) {
		/* Progress past the fence while the record says the range is
		 * only moving out belongs to an earlier move of this range
		 * (moved away and back under this leadership): this move
		 * copies and fences from the start. */
		pthread_mutex_lock(&pm->mu);
		m->phase = SHOAL__PART_STATUS__PHASE__NONE;
		m->attempt = 0;
		pthread_mutex_unlock(&pm->mu);
	}
	if (view == 0) {
		/* Only a map at least as new as the move's beginning that
		 * neither moves the range nor gave it to the target says the
		 * move was aborted: forget it, serve the range again.  A
		 * fenced range never goes back (the target may have served it). */
		if (epoch < rec->attempt || rec->state != ST_PART_OUT)
			return;
		rc = propose_range(pm, g, SHOAL__COMMAND_OP__OP_PART_ABORT, m, 0, NULL, false, NULL,
		                   msg);
		node_logf(rc == SHOAL_OK ? NODE_LOG_INFO : NODE_LOG_WARN,
		          "pmove: group %u %s [%016" PRIx64 "]: the map aborted the move: %s",
		          m->group, SH_MAP_TABLE(m->table), m->lo,
		          rc == SHOAL_OK ? "forgotten" : msg);
		return;
	}
	if (view == 2 && m->phase == SHOAL__PART_STATUS__PHASE__AWAY) {
		purge(pm, g, m); /* owned by the target: only the purge is left */
		return;
	}
	if (m->phase != SHOAL__PART_STATUS__PHASE__READY) {
		rc = advance(pm, g, m, rec, msg);
		if (rc == SHOAL_E_IN_USE && view == 2) {
			/* The target refused the reset: it serves the range
			 * already (a previous leader's attempt was owned). */
			set_phase(pm, m, SHOAL__PART_STATUS__PHASE__AWAY);
			purge(pm, g, m);
			return;
		}
		if (rc != SHOAL_OK) {
			node_logf(NODE_LOG_WARN,
			          "pmove: group %u %s [%016" PRIx64 "]: attempt stopped: %s",
			          m->group, SH_MAP_TABLE(m->table), m->lo, msg);
			set_phase(pm, m, SHOAL__PART_STATUS__PHASE__NONE);
			return;
		}
		if (m->phase != SHOAL__PART_STATUS__PHASE__READY)
			return;
	}
	if (view == 1) {
		/* READY: the executor flips the map, which this node learns
		 * late by itself (node.h, node_map_hurry). */
		node_map_hurry(pm->n, 1000);
		return;
	}
	rc = own(pm, g, m, msg);
	if (rc == SHOAL_OK || rc == SHOAL_E_IN_USE) {
		handover(pm, g, m, rec);
		set_phase(pm, m, SHOAL__PART_STATUS__PHASE__AWAY);
		purge(pm, g, m);
		return;
	}
	node_logf(NODE_LOG_WARN, "pmove: group %u %s [%016" PRIx64 "]: own on group %u: %s",
	          m->group, SH_MAP_TABLE(m->table), m->lo, m->to_group, msg);
	if (rc == SHOAL_E_VALIDATION) /* another attempt's data there: copy again */
		set_phase(pm, m, SHOAL__PART_STATUS__PHASE__NONE);
}

/* The move slot for (group, table, lo), created if asked (mu held). */
static pm_move *slot(node_pmove *pm, uint32_t group, uint32_t table, uint64_t lo, bool create)
{
	for (uint32_t i = 0; i < pm->n_moves; i++)
		if (pm->moves[i].group == group && pm->moves[i].table == table &&
		    pm->moves[i].lo == lo)
			return &pm->moves[i];
	if (!create || pm->n_moves == PM_MAX_MOVES)
		return NULL;
	pm_move *m = &pm->moves[pm->n_moves++];
	memset(m, 0, sizeof(*m));
	m->group = group;
	m->table = table;
	m->lo = lo;
	return m;
}

static void pass_group(node_pmove *pm, uint32_t gid)
{
	node_group *g = node_group_acquire(pm->n, gid);
	if (g == NULL)
		return;
	uint64_t term;
	if (!node_group_leading(g, &term)) {
		node_group_release(g);
		return;
	}
	sh_arena a;
	sh_arena_init(&a);
	st_part_rec *recs = NULL;
	size_t n = 0;
	char msg[SH_ERRMSG_SIZE];
	if (st_part_list(node_group_env(g), &a, &recs, &n, msg) != SHOAL_OK) {
		/* Nothing is driven this pass: say so (a move would go quiet). */
		uint64_t skipped;
		if (node_log_allow(&pm->list_log, (uint64_t)sh_now_ms(), &skipped))
			node_logf(NODE_LOG_WARN,
			          "pmove: group %u: its range records could not be read: %s "
			          "(moves wait; %" PRIu64 " such passes not logged)",
			          gid, msg, skipped);
		n = 0;
	}
	/* Records this leadership has not seen yet become moves to drive;
	 * moves asked for get their record's state. */
	pthread_mutex_lock(&pm->mu);
	for (size_t i = 0; i < n; i++) {
		if (recs[i].state == ST_PART_AWAY)
			continue;
		pm_move *m = slot(pm, gid, recs[i].table, recs[i].lo, true);
		if (m == NULL)
			continue;
		m->hi = recs[i].hi;
		m->to_group = recs[i].to_group;
	}
	for (uint32_t i = 0; i < pm->n_moves; i++)
		if (pm->moves[i].group == gid && pm->moves[i].term != term) {
			/* A new leadership: its own attempt from the start.
			 * (Logged: a move that goes quiet after a leader change
			 * shows where it was picked up.) */
			node_logf(NODE_LOG_INFO,
			          "pmove: group %u %s [%016" PRIx64
			          "]: driving the move to group %u from term %" PRIu64,
			          gid, SH_MAP_TABLE(pm->moves[i].table), pm->moves[i].lo,
			          pm->moves[i].to_group, term);
			pm->moves[i].term = term;
			pm->moves[i].phase = SHOAL__PART_STATUS__PHASE__NONE;
			pm->moves[i].attempt = 0;
		}
	pthread_mutex_unlock(&pm->mu);
	for (uint32_t i = 0; i < PM_MAX_MOVES && !stopping(pm); i++) {
		pthread_mutex_lock(&pm->mu);
		if (i >= pm->n_moves) {
			pthread_mutex_unlock(&pm->mu);
			break;
		}
		pm_move *m = &pm->moves[i];
		bool mine = m->group == gid;
		pthread_mutex_unlock(&pm->mu);
		if (!mine)
			continue;
		const st_part_rec *rec = NULL;
		for (size_t k = 0; k < n; k++)
			if (recs[k].table == m->table && recs[k].lo == m->lo)
				rec = &recs[k];
		drive(pm, g, m, rec);
	}
	/* Moves that are over (AWAY here, or neither asked nor recorded)
	 * leave the table. */
	pthread_mutex_lock(&pm->mu);
	uint64_t now = node_now_ns();
	for (uint32_t i = 0; i < pm->n_moves;) {
		pm_move *m = &pm->moves[i];
		bool recorded = false;
		for (size_t k = 0; k < n; k++)
			if (m->group == gid && recs[k].table == m->table && recs[k].lo == m->lo &&
			    recs[k].state != ST_PART_AWAY)
				recorded = true;
		bool asked = m->want_ns != 0 && now < m->want_ns + PM_WANT_MS * 1000000ull;
		if (m->group == gid && !recorded && !asked &&
		    m->phase != SHOAL__PART_STATUS__PHASE__READY)
			pm->moves[i] = pm->moves[--pm->n_moves];
		else
			i++;
	}
	pthread_mutex_unlock(&pm->mu);
	sh_arena_fini(&a);
	node_group_release(g);
}

static void *driver(void *arg)
{
	node_pmove *pm = arg;
	for (;;) {
		pthread_mutex_lock(&pm->mu);
		if (!pm->stop && !pm->kicked) {
			struct timespec ts;
			sh_timespec_in(CLOCK_REALTIME, PM_IDLE_MS, &ts);
			pthread_cond_timedwait(&pm->cv, &pm->mu, &ts);
		}
		pm->kicked = false;
		bool stop = pm->stop;
		pthread_mutex_unlock(&pm->mu);
		if (stop)
			break;
		for (uint32_t gid = 1; gid < sh_cluster_group_cap(pm->n->conf); gid++)
			pass_group(pm, gid);
	}
	return NULL;
}

/* --- requests ------------------------------------------------------------------- */

int node_handle_part_move(node_call *c)
{
	const Shoal__PartRange *r = c->req->part_move;
	node_pmove *pm = c->node->ship != NULL ? c->node->ship->pmove : NULL;
	if (pm == NULL)
		return sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE, "this node moves no partitions");
	uint32_t gid = node_group_id(c->group);
	if (r->to_group == gid || r->to_group >= sh_cluster_group_cap(c->node->conf) ||
	    r->lo > r->hi)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "part_move: bad range or target group %u", r->to_group);
	uint64_t term;
	if (!node_group_leading(c->group, &term)) {
		node_group_status st;
		node_group_status_get(c->group, &st);
		c->nresp->leader_node = st.leader;
		return sh_errf(c->errmsg, SHOAL_E_NOT_LEADER, "not the leader of group %u", gid);
	}
	Shoal__PartStatus *ps = sh_arena_alloc(c->arena, sizeof(*ps));
	if (ps == NULL)
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	shoal__part_status__init(ps);
	pthread_mutex_lock(&pm->mu);
	pm_move *m = slot(pm, gid, r->table, r->lo, true);
	if (m != NULL) {
		if (m->to_group != r->to_group || m->hi != r->hi) {
			/* Another move of the range than the one in progress
			 * (the map aborted it and began this one). */
			m->to_group = r->to_group;
			m->hi = r->hi;
			m->phase = SHOAL__PART_STATUS__PHASE__NONE;
			m->attempt = 0;
		}
		m->map_epoch = r->attempt;
		m->want_ns = node_now_ns();
		ps->phase = (Shoal__PartStatus__Phase)m->phase;
		ps->attempt = m->attempt;
		ps->copied = m->copied;
		ps->log_pending = m->log_last > m->log_acked ? m->log_last - m->log_acked : 0;
	}
	pthread_cond_signal(&pm->cv);
	pthread_mutex_unlock(&pm->mu);
	if (m == NULL)
		return sh_errf(c->errmsg, SHOAL_E_LIMIT_EXCEEDED,
		               "group %u is already moving %d partitions", gid, PM_MAX_MOVES);
	Shoal__StreamShardRef *sc = sh_arena_alloc(c->arena, sizeof(*sc));
	if (ps->phase == SHOAL__PART_STATUS__PHASE__READY && sc != NULL &&
	    closed_shard(gid, node_group_env(c->group), r->table, r->lo, r->hi, sc))
		ps->stream_closed = sc;
	c->nresp->part_status = ps;
	return SHOAL_OK;
}

static int check_range(node_call *c, const Shoal__PartRange *r)
{
	if (r == NULL || r->lo > r->hi || r->attempt == 0)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "a partition move needs a range (lo <= hi) and an attempt");
	if (r->to_group != node_group_id(c->group))
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "the move's target is group %u, this is group %u", r->to_group,
		               node_group_id(c->group));
	return SHOAL_OK;
}

int node_prepare_part_ingest(node_call *c, Shoal__CommandOp *op)
{
	const Shoal__PartIngest *pi = c->req->part_ingest;
	int rc = check_range(c, pi->range);
	if (rc != SHOAL_OK)
		return rc;
	if (pi->n_keys != pi->n_values)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "part_ingest: %zu keys and %zu values", pi->n_keys, pi->n_values);
	op->op_case = SHOAL__COMMAND_OP__OP_PART_INGEST;
	op->part_ingest = (Shoal__PartIngest *)pi;
	return SHOAL_OK;
}

int node_prepare_part_own(node_call *c, Shoal__CommandOp *op)
{
	int rc = check_range(c, c->req->part_own);
	if (rc != SHOAL_OK)
		return rc;
	op->op_case = SHOAL__COMMAND_OP__OP_PART_OWN;
	op->part_own = (Shoal__PartRange *)c->req->part_own;
	return SHOAL_OK;
}

/* --- apply (fsm_apply.c's run_op) ------------------------------------------------ */

/* The marks of a GSI range's own (the watermarks its source's fence
 * pinned, storage/parts.h "The GSI space"), checked before anything is
 * written: an own without them would leave the range deduplicated by this
 * group's own watermarks, which drop the deltas its sources held back. */
static int own_marks(op_ctx *c, const Shoal__PartRange *r, st_part_mark **out)
{
	st_part_mark *m = sh_arena_calloc(c->a, r->n_marks > 0 ? r->n_marks : 1, sizeof(*m));
	if (m == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "part_own: out of memory");
	for (size_t i = 0; i < r->n_marks; i++) {
		const Shoal__GsiMark *g = r->marks[i];
		if (g == NULL || g->n_sources != g->n_seqs || g->n_sources > UINT32_MAX)
			return sh_errf(c->msg, SHOAL_E_VALIDATION,
			               "part_own: mark %zu has %zu sources and %zu seqs", i,
			               g != NULL ? g->n_sources : 0, g != NULL ? g->n_seqs : 0);
		m[i] = (st_part_mark){.lo = g->lo,
		                      .hi = g->hi,
		                      .n = (uint32_t)g->n_sources,
		                      .sources = g->sources,
		                      .seqs = g->seqs};
	}
	*out = m;
	return st_part_gsi_marks_check(r->lo, r->hi, m, r->n_marks, c->msg);
}

int node_op_part(op_ctx *c, const Shoal__CommandOp *op)
{
	switch (op->op_case) {
	case SHOAL__COMMAND_OP__OP_PART_OUT: {
		const Shoal__PartRange *r = op->part_out;
		return st_part_out(c->txn, r->table, r->lo, r->hi, r->to_group, r->attempt, c->msg);
	}
	case SHOAL__COMMAND_OP__OP_PART_FENCE: {
		/* The range's stream shard here closes where the fence is in the
		 * log: no write of the range comes after it in this group. */
		const Shoal__PartRange *r = op->part_fence;
		bool now = false, found;
		int rc = st_part_fence(c->txn, r->table, r->lo, &now, c->msg);
		if (rc != SHOAL_OK || !now || r->table == ST_PART_GSI) /* no stream there */
			return rc;
		const node_fsm *f = c->f;
		st_shard closed;
		return st_stream_shard_leave(c->txn, f->group, r->table, r->lo, r->hi,
		                             f->static_has, f->static_lo, f->static_hi, &closed,
		                             &found, c->msg);
	}
	case SHOAL__COMMAND_OP__OP_PART_ABORT: {
		/* Only an OUT range is aborted (a fenced one never goes back:
		 * the driver's rule), so no stream shard was closed. */
		uint8_t was;
		return st_part_abort(c->txn, op->part_abort->table, op->part_abort->lo, &was,
		                     c->msg);
	}
	case SHOAL__COMMAND_OP__OP_PART_OWN: {
		/* The range's stream shard here begins where the own is in the
		 * log, a child of the one the source's fence closed. */
		const Shoal__PartRange *r = op->part_own;
		const Shoal__StreamShardRef *p = r->stream_parent;
		bool now = false;
		st_part_mark *m = NULL;
		int rc = r->table == ST_PART_GSI ? own_marks(c, r, &m) : SHOAL_OK;
		if (rc == SHOAL_OK)
			rc = st_part_own(c->txn, r->table, r->lo, r->hi, r->attempt, &now, c->msg);
		if (rc != SHOAL_OK || !now)
			return rc;
		if (r->table == ST_PART_GSI)
			return st_part_gsi_mark_set(c->txn, r->lo, r->hi, m, r->n_marks, c->msg);
		return st_stream_shard_arrive(c->txn, r->table, r->lo, r->hi, p != NULL,
		                              p != NULL ? p->group : 0, p != NULL ? p->lo : 0,
		                              p != NULL ? p->start : 0, c->msg);
	}
	case SHOAL__COMMAND_OP__OP_PART_PURGE: {
		bool done = false;
		const Shoal__PartRange *r = op->part_purge;
		st_part_held held;
		held_from_pb(&held, r->held_items, r->held_bytes, r->held_indexes_known,
		             r->n_held_indexes, r->held_indexes);
		int rc = r->handover ? st_part_handover(c->txn, r->table, r->lo,
		                                        r->held_known ? &held : NULL, c->msg)
		                     : st_part_purge(c->txn, r->table, r->lo, PM_PURGE_ITEMS,
		                                     r->held_known ? &held : NULL, &done, c->msg);
		/* Every replica says when the range is gone, as it applies the
		 * last purge entry (once: applied entries are not applied
		 * again): the driver's own "purged here" is not logged when its
		 * leader dies after proposing that entry and the next leader
		 * commits it (it then finds the range AWAY: nothing to drive). */
		if (rc == SHOAL_OK && done)
			node_logf(NODE_LOG_INFO,
			          "pmove: group %u %s [%016" PRIx64 "]: purge applied, the range "
			          "is gone from this replica",
			          c->f->group, SH_MAP_TABLE(r->table), r->lo);
		if (rc == SHOAL_OK && c->r != NULL) {
			Shoal__PartStatus *ps = sh_arena_alloc(c->a, sizeof(*ps));
			if (ps == NULL)
				return sh_errf(c->msg, SHOAL_E_NOMEM, "out of memory");
			shoal__part_status__init(ps);
			ps->phase = done ? SHOAL__PART_STATUS__PHASE__AWAY
			                 : SHOAL__PART_STATUS__PHASE__FENCED;
			c->nr->part_status = ps;
		}
		return rc;
	}
	case SHOAL__COMMAND_OP__OP_PART_INGEST: {
		const Shoal__PartIngest *pi = op->part_ingest;
		const Shoal__PartRange *r = pi->range;
		if (r == NULL || pi->n_keys != pi->n_values)
			return sh_errf(c->msg, SHOAL_E_VALIDATION, "part_ingest: malformed");
		size_t n = pi->n_keys;
		const uint8_t **k = sh_arena_calloc(c->a, n + 1, sizeof(*k));
		const uint8_t **v = sh_arena_calloc(c->a, n + 1, sizeof(*v));
		size_t *kl = sh_arena_calloc(c->a, n + 1, sizeof(*kl));
		size_t *vl = sh_arena_calloc(c->a, n + 1, sizeof(*vl));
		if (k == NULL || v == NULL || kl == NULL || vl == NULL)
			return sh_errf(c->msg, SHOAL_E_NOMEM, "out of memory");
		for (size_t i = 0; i < n; i++) {
			k[i] = pi->keys[i].data;
			kl[i] = pi->keys[i].len;
			v[i] = pi->values[i].data;
			vl[i] = pi->values[i].len;
		}
		st_part_held held;
		int rc = st_part_ingest(c->txn, r->table, r->lo, r->hi, r->attempt, pi->reset, n, k,
		                        kl, v, vl, c->a, &held, c->msg);
		if (rc == SHOAL_OK && c->r != NULL) {
			/* The source's handover takes the figures (parts.h). */
			Shoal__PartStatus *ps = sh_arena_alloc(c->a, sizeof(*ps));
			if (ps == NULL)
				return sh_errf(c->msg, SHOAL_E_NOMEM, "out of memory");
			shoal__part_status__init(ps);
			ps->phase = SHOAL__PART_STATUS__PHASE__NONE;
			ps->held_known = true;
			ps->held_items = held.items;
			ps->held_bytes = held.bytes;
			Shoal__HeldIndex *x = sh_arena_calloc(c->a, ST_PART_HELD_IX, sizeof(*x));
			Shoal__HeldIndex **p = sh_arena_calloc(c->a, ST_PART_HELD_IX, sizeof(*p));
			if (x == NULL || p == NULL)
				return sh_errf(c->msg, SHOAL_E_NOMEM, "out of memory");
			held_to_pb(&held, x, p, &ps->held_indexes_known, &ps->n_held_indexes);
			ps->held_indexes = p;
			c->nr->part_status = ps;
		}
		return rc;
	}
	default:
		return sh_errf(c->msg, SHOAL_E_INTERNAL, "not a partition operation");
	}
}

/* --- lifecycle ------------------------------------------------------------------- */

int node_pmove_open(node_ship *s, node_pmove **out, char *errmsg)
{
	*out = NULL;
	node_pmove *pm = sh_calloc(1, sizeof(*pm));
	if (pm == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "pmove: out of memory");
	pm->n = s->n;
	pm->s = s;
	pthread_mutex_init(&pm->mu, NULL);
	pthread_cond_init(&pm->cv, NULL);
	pm->chunk_bytes = PM_CHUNK_BYTES;
	const char *pause = getenv("SHOAL_PMOVE_TEST_PAUSE_MS");
	if (pause != NULL && atoi(pause) > 0) {
		pm->test_pause_ms = (uint32_t)atoi(pause);
		pm->chunk_bytes = 4096;
		node_logf(NODE_LOG_WARN, "pmove: test pauses of %u ms in every partition move",
		          pm->test_pause_ms);
	}
	const char *fenced = getenv("SHOAL_PMOVE_TEST_FENCED_MS");
	if (fenced != NULL && atoi(fenced) > 0) {
		pm->test_fenced_ms = (uint32_t)atoi(fenced);
		node_logf(NODE_LOG_WARN,
		          "pmove: test holds of %u ms in FENCED in every partition move",
		          pm->test_fenced_ms);
	}
	if (node_waiter_init(&pm->w) != SHOAL_OK) {
		node_pmove_free(pm);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "pmove: out of memory");
	}
	if (pthread_create(&pm->th, NULL, driver, pm) != 0) {
		node_pmove_free(pm);
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "pmove: cannot start its thread");
	}
	pm->started = true;
	*out = pm;
	return SHOAL_OK;
}

void node_pmove_kick(node_pmove *pm)
{
	if (pm == NULL)
		return;
	pthread_mutex_lock(&pm->mu);
	pm->kicked = true; /* seen even if the driver is in a pass now */
	pthread_cond_signal(&pm->cv);
	pthread_mutex_unlock(&pm->mu);
}

void node_pmove_close(node_pmove *pm)
{
	if (pm == NULL)
		return;
	pthread_mutex_lock(&pm->mu);
	pm->stop = true;
	pthread_cond_signal(&pm->cv);
	pthread_mutex_unlock(&pm->mu);
}

void node_pmove_free(node_pmove *pm)
{
	if (pm == NULL)
		return;
	node_pmove_close(pm);
	if (pm->started)
		pthread_join(pm->th, NULL);
	node_waiter_fini(&pm->w);
	pthread_mutex_destroy(&pm->mu);
	pthread_cond_destroy(&pm->cv);
	sh_free(pm);
}

void node_pmove_metrics(node_pmove *pm, node_appendf_fn appendf, void *buf)
{
	if (pm == NULL)
		return;
	appendf(buf,
	        "# HELP shoal_node_partition_moves_total Partition moves this node finished as "
	        "the source group's leader.\n"
	        "# TYPE shoal_node_partition_moves_total counter\n"
	        "shoal_node_partition_moves_total %" PRIu64 "\n"
	        "# HELP shoal_node_partition_move_attempts_total Copy attempts begun (a new "
	        "source leader, or a failed attempt, begins another).\n"
	        "# TYPE shoal_node_partition_move_attempts_total counter\n"
	        "shoal_node_partition_move_attempts_total %" PRIu64 "\n"
	        "# HELP shoal_node_partition_items_copied_total Items sent to target groups.\n"
	        "# TYPE shoal_node_partition_items_copied_total counter\n"
	        "shoal_node_partition_items_copied_total %" PRIu64 "\n",
	        (uint64_t)atomic_load(&pm->done), (uint64_t)atomic_load(&pm->attempts),
	        (uint64_t)atomic_load(&pm->copied));
}
