/*
 * txn.c -- TransactWriteItems and TransactGetItems: the router drives them;
 * the groups keep every state that matters (node/fsm_txn.c applies it,
 * storage/txn.c stores it).  This header is the protocol.
 *
 * TransactWriteItems
 * ==================
 *
 * The router checks the request as DynamoDB does (1..100 actions, 4 MB, each
 * action as its single-item operation, known tables, keys against their
 * schemas, no two actions on one item: ValidationException /
 * ResourceNotFoundException for the whole request), places every item, and
 * splits the actions by storage group.  A transaction has a 16-byte id: the
 * hash of its ClientRequestToken when it has one (a retry finds the same
 * id), else a fresh one (rt_new_id).  Each run of it by a router also has an
 * `attempt` id.
 *
 * One group.  Every item in one group: one TxnWrite{single} to it, one Raft
 * entry; the state machine plans every action, then applies all or none
 * (st_transact).  With a token the answer is recorded (the record: below)
 * and a retry with the same token gets it back.  No two-phase commit.
 *
 * Several groups: two-phase commit.  The coordinator group is the first
 * action's; it holds the transaction's record, whose decision is the
 * commit point.  Messages (cluster.proto), each proposed through the
 * receiving group's Raft log, each idempotent (sent again, it does nothing
 * new):
 *
 *   TxnWrite (prepare)     a participant's part.  Planned like st_transact;
 *                          if every action could go, its items are locked
 *                          and the part kept (replicated state: it survives
 *                          leader changes and restarts) -- else
 *                          TransactionCanceled with a reason per action.
 *                          A request error (a malformed expression, a key
 *                          that does not fit) refuses the whole part (at
 *                          the coordinator's decide-last part, with the
 *                          decision ABORTED recorded).
 *   TxnWrite{decide}       the coordinator's part, sent LAST, once every
 *                          other part is prepared (no token): prepared and
 *                          decided in one entry -- the record created
 *                          COMMITTED with the part applied at once, or
 *                          ABORTED with its reasons.  THE COMMIT POINT.
 *   TxnWrite (token)       with a ClientRequestToken the coordinator's part
 *                          is prepared FIRST, alone, and the same entry
 *                          creates the record PREPARING (below: why) ...
 *   TxnDecide              ... and decided at the end: PREPARING ->
 *                          COMMITTED or ABORTED, the answer recorded for a
 *                          retry with the token, the coordinator's own part
 *                          applied or dropped, one entry.  THE COMMIT POINT
 *                          of a token's transaction.
 *   TxnFinish              to every other participant: apply (commit) or
 *                          drop (abort) its part, unlock; and keep a marker
 *                          (30 s) that it finished, so that a prepare
 *                          arriving late does not lock again.
 *   TxnAcks                to the coordinator, not waited for, gathered
 *                          per group (rt_txn_ack: one message for up to 64
 *                          transactions): these participants finished; once
 *                          all have, the record expires (10 min with a
 *                          token -- a retry gets the answer --, else 30 s).
 *   TxnStatus              participant recovery -> coordinator: what was
 *                          decided?  A record still PREPARING 5 s after it
 *                          was created, or none at all, is decided ABORTED
 *                          there and then (no record: a tombstone, so that
 *                          a prepare-and-decide or a prepare arriving later
 *                          is refused).
 *
 * Every prepare carries a deadline (the router's clock + 14 s): applied
 * later it locks nothing and decides nothing, so that no message delayed
 * past the markers' and tombstones' 30 s can act (clocks within 16 s).
 *
 * The router's run:
 *
 *   phase     what                                              next
 *   --------  ------------------------------------------------  ----------
 *   PLAN      checks, placement, split; the single write; or    SINGLE /
 *             the participants' prepares (no token); or the     PARTS /
 *             coordinator's prepare alone (token)               COORD
 *   SINGLE    the group's answer, passed on (a throttled group:     done
 *             a cancellation, ProvisionedThroughputExceeded)
 *   PARTS     all prepared: the coordinator's part with         PD
 *             decide; else only checked (check_only: its
 *             reasons, nothing locked, no record)
 *   PD        the decision (COMMITTED / ABORTED) and the        FINISHED
 *             answer (capacity, or reasons placed by
 *             TxnWrite.positions); TxnFinish to the others
 *   COORD     decided already (a retry): the recorded answer;   done /
 *             in progress under another run:                    PREPARED
 *             TransactionInProgressException; cancelled: the
 *             other parts only checked; else their prepares
 *   PREPARED  all prepared: commit, else abort; the answer      DECIDED
 *             built; TxnDecide with it
 *   DECIDED   the decision as recorded (recovery may have       FINISHED
 *             aborted first); TxnFinish to the others
 *   FINISHED  the acknowledgement queued; the answer            done
 *
 * Why a token's coordinator goes first: a retry, a run of the same token
 * under way elsewhere and a token reused for another request
 * (IdempotentParameterMismatchException) are told apart at the record
 * before any other group is touched -- so a run never prepares a part of
 * another run's transaction.  Without a token the id is this run's alone,
 * the participants prepare at once and the coordinator decides last: three
 * Raft rounds in sequence (prepares, decision, finishes) and one operation
 * fewer than prepare-then-decide.  The client is answered after the
 * finishes, so a read that follows the answer sees the writes everywhere.
 *
 * Crashes (the router may die at any step; recovery is node/txn_recover.c,
 * run by each group's leader every second):
 *
 *   router dies          state left                 what happens
 *   -------------------  -------------------------  -----------------------
 *   before any prepare   nothing                    nothing (client retries)
 *   prepares sent, some  parts prepared; no record  each participant asks the
 *   applied              (token: PREPARING)         coordinator after 5 s:
 *                                                   a tombstone (or the old
 *                                                   PREPARING record) decides
 *                                                   ABORTED; parts dropped
 *   decision applied     record decided, parts      participants asking get
 *                        prepared elsewhere         the decision; coordinator
 *                                                   recovery sends TxnFinish
 *                                                   to every participant not
 *                                                   acknowledged (after 5 s)
 *                                                   and acknowledges
 *   some finished        the same, some acked       the same
 *
 *   A group's leader dies: the prepared parts and records are replicated
 *   state; the new leader's recovery carries on.  A message lost or sent
 *   twice: every message is idempotent and the router retries it until its
 *   deadline.  tests/unit/test_txn_crash.c runs every crash point of both
 *   paths, with replicas restarting and leaders changing in between.
 *
 * A moved partition (WRONG_GROUP: the group no longer serves an item, and
 * did nothing).  Before any other group is touched -- the one group's
 * write, a token's coordinator prepared alone -- the refusal is the answer,
 * and job.c runs the request again on a new map.  Once several parts are
 * out, the transaction is cancelled instead (TransactionConflict for that
 * part's items), as its id may hold prepared parts elsewhere.
 *
 * Bound: an item stays locked at most ~5 s (NODE_TXN_RECOVER_MS) plus one
 * recovery period (1 s) plus a Raft round after the router that ran its
 * transaction died, once the groups involved have leaders.
 *
 * Invariants:
 *   - a transaction is decided once, by the entry that creates its record
 *     decided or moves it out of PREPARING (or by the tombstone); nothing
 *     commits a part before that entry is committed, and every part then
 *     follows the record;
 *   - a part is prepared at most once per id in a group (the marker, the
 *     tombstone and the deadline refuse late prepares), and applied at most
 *     once;
 *   - an item locked by a prepared part takes no other write (single-item
 *     writes get TransactionConflictException, other transactions a
 *     TransactionConflict reason) until the part is finished: this is what
 *     makes transactions serializable with each other and with single-item
 *     writes;
 *   - the decision ABORTED needs no participant: recovery may take it alone
 *     once a record is old or missing, so a router's slow prepares end in
 *     an abort, not a blocked item.
 *
 * TransactGetItems
 * ================
 *
 * Up to 100 Gets, checked as GetItems.  One group: one consistent read of
 * every item in one LMDB snapshot.  Several groups: rounds of reads, each a
 * consistent read of each group's items with, per item, whether a prepared
 * transaction holds it and its write version (st_txn_get_items, read on the
 * group leader's loop thread between applies).  Two consecutive rounds in
 * which no item was locked and every version (and the instance that
 * numbers them) is the same prove that no write touched any of the items
 * between the end of the first round and the start of the second: the
 * items as read held together at that instant -- a serializable snapshot.
 * A locked item, or a version that moved, means another round after a short
 * pause (TGET_PAUSE_MS); after TGET_ROUNDS rounds the read is cancelled:
 * TransactionCanceledException with TransactionConflict for the items
 * involved.  (DynamoDB cancels at once; Shoal waits briefly first, because
 * a lock lasts about as long as a few Raft rounds.)
 */
#include <string.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "router/router.h"

/* How long the prepares may take before the router gives up and aborts
 * (below NODE_TXN_RECOVER_MS: the router decides before recovery would). */
#define TXN_PREPARE_MS 4000
/* A prepare's deadline (TxnWrite.deadline_ms): the router's prepare time
 * and a margin for the clocks of the router's and the nodes' machines;
 * it must stay well below NODE_TXN_KEEP_MS (30 s, node/fsm_int.h), how
 * long a group remembers that it finished a part. */
#define TXN_CLOCK_SLACK_MS 10000
/* How long a TxnAck is retried. */
#define TXN_ACK_MS 5000
/* TransactGetItems: rounds before a conflict is declared, pause between. */
#define TGET_ROUNDS   12
#define TGET_PAUSE_MS 2

/* st_txn_state, as NodeResponse.txn_state carries it. */
enum { TS_NONE = 0, TS_PREPARING = 1, TS_COMMITTED = 2, TS_ABORTED = 3 };

static int nomem(rt_job *j)
{
	return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
}

/* Keys of the actions or gets: tables, placement, the duplicate check. */
static int place(rt_job *j, const char *table, const st_value *key, bool item, const rt_table **t,
                 rt_batch_key *k)
{
	int rc = rt_job_table(j, table, false, t);
	if (rc != SHOAL_OK)
		return rc; /* or RT_WAIT */
	char msg[SH_ERRMSG_SIZE];
	if ((rc = st_route_key(&(*t)->def.key, key, item, &k->pk, &k->sk, msg)) != SHOAL_OK)
		return rt_job_fail(j, rc, "%s", msg);
	k->table = (*t)->id;
	k->group = rt_group_of(j->rt, (*t)->id, k->pk);
	return SHOAL_OK;
}

static void add_table(const rt_table **list, uint32_t *n, const rt_table *t)
{
	for (uint32_t i = 0; i < *n; i++)
		if (list[i] == t)
			return;
	list[(*n)++] = t;
}

/* ======================================================================== */
/* TransactWriteItems                                                        */
/* ======================================================================== */

enum {
	TXW_PLAN = 0,
	TXW_SINGLE,
	TXW_COORD,    /* token: the coordinator's prepare, alone */
	TXW_PREPARED, /* token: every prepare answered; the decision */
	TXW_PARTS,    /* no token: the participants' prepares answered */
	TXW_PD,       /* no token: the coordinator's prepare-and-decide (or check) */
	TXW_DECIDED,  /* token: the decision answered; the finishes */
	TXW_FINISHED
};

typedef struct txw_part {
	uint32_t group;
	Shoal__TxnWrite w;
	Shoal__NodeRequest nr;
	rt_call *call; /* the prepare (or the single write) */
	rt_call *finish;
	const rt_table **tables;
	uint32_t n_tables;
} txw_part;

typedef struct txw {
	st_txn_action *acts;
	uint32_t n;
	uint8_t id[16], attempt[16], digest[16];
	bool token;
	txw_part *parts;
	uint32_t np;
	bool commit;
	Shoal__Response *answer; /* the outcome, built before the decision */
	rt_call *decide;         /* TxnDecide, or the prepare-and-decide */
	Shoal__TxnDecide d;
	Shoal__NodeRequest dnr;
	/* What the parts' answers said so far (collect). */
	wire_txn_reason *reasons; /* by request position */
	Shoal__TransactWriteItemsResponse *ok;
	bool cancelled;
	int err;
	const char *err_msg;
} txw;

static int prepare_call(rt_job *j, txw_part *p)
{
	rt_call *c = rt_job_call(j, p->group);
	if (c == NULL)
		return nomem(j);
	shoal__node_request__init(&p->nr);
	p->nr.txn_write = &p->w;
	c->idempotent = true;
	if (!p->w.single) {
		int64_t by = rt_now_ms() + TXN_PREPARE_MS;
		c->deadline = by < j->deadline ? by : j->deadline;
	}
	int rc = rt_call_request(j, c, &p->nr);
	if (rc != SHOAL_OK)
		return rc;
	rt_call_repairs(c, p->tables, p->n_tables);
	p->call = c;
	return SHOAL_OK;
}

/* PLAN: checks, placement, the parts, the first calls. */
static int txw_plan(rt_job *j)
{
	const Shoal__TransactWriteItemsRequest *in = j->in->transact_write_items;
	txw *t = j->st;
	int rc;
	if (t == NULL) {
		if ((rc = wire_txn_write_check(in, j->errmsg)) != SHOAL_OK)
			return rc;
		if ((t = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*t))) == NULL)
			return nomem(j);
		t->n = (uint32_t)in->n_transact_items;
		if ((t->acts = sh_arena_calloc(&j->arena, t->n, sizeof(*t->acts))) == NULL)
			return nomem(j);
		for (uint32_t i = 0; i < t->n; i++) {
			if ((rc = wire_txn_action_from_pb(&j->arena, in->transact_items[i], i + 1,
			                                  &t->acts[i], j->errmsg)) != SHOAL_OK)
				return rc;
			/* A Put's size is the request's (an Update's result is
			 * checked where it is computed: its action's reason). */
			if (t->acts[i].kind == ST_TXA_PUT &&
			    st_item_size(t->acts[i].u.put.item) > ST_MAX_ITEM_SIZE)
				return rt_job_fail(
				    j, SHOAL_E_VALIDATION,
				    "Item size has exceeded the maximum allowed size");
		}
	}
	rt_batch_key keys[ST_MAX_TXN_ITEMS];
	const rt_table *tabs[ST_MAX_TXN_ITEMS];
	for (uint32_t i = 0; i < t->n; i++) {
		const char *table;
		const st_value *key;
		bool item;
		wire_txn_action_target(&t->acts[i], &table, &key, &item);
		if ((rc = place(j, table, key, item, &tabs[i], &keys[i])) != SHOAL_OK)
			return rc; /* or RT_WAIT: a refresh, then this phase again */
	}
	if (rt_batch_find_duplicate(keys, t->n) >= 0)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "Transaction request cannot include multiple operations on one "
		                   "item");

	uint32_t part_of[ST_MAX_TXN_ITEMS], groups[ST_MAX_TXN_ITEMS];
	t->np = rt_batch_split(keys, t->n, part_of, groups);
	if ((t->parts = sh_arena_calloc(&j->arena, t->np, sizeof(*t->parts))) == NULL)
		return nomem(j);
	const char *token = WIRE_HAS(in, client_request_token) ? in->client_request_token : NULL;
	t->token = token != NULL;
	if (t->token) {
		/* The id of a token's transaction is the token's: a retry finds
		 * the record of the first run. */
		XXH128_hash_t h = XXH3_128bits_withSeed(token, strlen(token), 0x5348 /* "SH" */);
		memcpy(t->id, &h.high64, 8);
		memcpy(t->id + 8, &h.low64, 8);
		wire_txn_digest(in, t->digest);
	} else if (j->in->client_token.len == 16) {
		/* libshoal's token, the same on a resend to another router: the
		 * runs share the id, and follow the coordinator's one record. */
		memcpy(t->id, j->in->client_token.data, 16);
	} else {
		rt_new_id(j->rt, t->id);
	}
	rt_new_id(j->rt, t->attempt);

	for (uint32_t p = 0; p < t->np; p++) {
		txw_part *pt = &t->parts[p];
		Shoal__TxnWrite *w = &pt->w;
		shoal__txn_write__init(w);
		pt->group = groups[p];
		w->id = (ProtobufCBinaryData){16, t->id};
		w->attempt = (ProtobufCBinaryData){16, t->attempt};
		w->coord_group = groups[0];
		w->single = t->np == 1;
		w->token = t->token;
		w->request_actions = t->n;
		if (t->np > 1)
			w->deadline_ms = rt_wall_ms() + TXN_PREPARE_MS + TXN_CLOCK_SLACK_MS;
		if (WIRE_HAS(in, return_consumed_capacity))
			WIRE_SET(w, return_consumed_capacity, in->return_consumed_capacity);
		if (WIRE_HAS(in, return_item_collection_metrics))
			WIRE_SET(w, return_item_collection_metrics,
			         in->return_item_collection_metrics);
		w->actions = sh_arena_calloc(&j->arena, t->n, sizeof(*w->actions));
		w->positions = sh_arena_calloc(&j->arena, t->n, sizeof(*w->positions));
		pt->tables = sh_arena_calloc(&j->arena, t->n, sizeof(*pt->tables));
		if (w->actions == NULL || w->positions == NULL || pt->tables == NULL)
			return nomem(j);
		if (p == 0) { /* the coordinator's part carries the record's data */
			w->n_participants = t->np;
			w->participants = sh_arena_alloc(&j->arena, t->np * sizeof(uint32_t));
			if (w->participants == NULL)
				return nomem(j);
			memcpy(w->participants, groups, t->np * sizeof(uint32_t));
			if (t->token)
				w->digest = (ProtobufCBinaryData){16, t->digest};
		}
	}
	for (uint32_t i = 0; i < t->n; i++) {
		txw_part *pt = &t->parts[part_of[i]];
		pt->w.actions[pt->w.n_actions] = in->transact_items[i];
		pt->w.positions[pt->w.n_positions++] = i;
		pt->w.n_actions++;
		add_table(pt->tables, &pt->n_tables, tabs[i]);
	}

	/* One group: one entry.  A token: the coordinator first.  Else every
	 * participant but the coordinator, which decides last. */
	uint32_t from = t->np == 1 || t->token ? 0 : 1, to = t->np == 1 || t->token ? 1 : t->np;
	for (uint32_t p = from; p < to; p++)
		if ((rc = prepare_call(j, &t->parts[p])) != SHOAL_OK)
			return rc;
	j->phase = t->np == 1 ? TXW_SINGLE : t->token ? TXW_COORD : TXW_PARTS;
	atomic_fetch_add_explicit(t->np == 1 ? &j->rt->metrics.txn_single : &j->rt->metrics.txn_2pc,
	                          1, memory_order_relaxed);
	return RT_WAIT;
}

/* Every action cancelled with reason code (the record was decided without
 * this run: recovery aborted it, or a marker showed a part finished). */
static int cancel_all(rt_job *j, uint32_t n, int code, Shoal__Response **out)
{
	wire_txn_reason *r = sh_arena_calloc(&j->arena, n, sizeof(*r));
	Shoal__Response *resp = sh_arena_alloc(&j->arena, sizeof(*resp));
	if (r == NULL || resp == NULL)
		return nomem(j);
	shoal__response__init(resp);
	for (uint32_t i = 0; i < n; i++)
		r[i].code = code;
	int rc = wire_txn_cancel(&j->arena, resp, r, n, j->errmsg);
	*out = resp;
	return rc;
}

static int txw_prepared(rt_job *j, txw *t);

/* COORD: the coordinator's answer to the prepare it got alone. */
static int txw_coord(rt_job *j, txw *t)
{
	rt_call *c = t->parts[0].call;
	if (c->rc != SHOAL_OK)
		return rt_job_pass(j, c); /* unknown: recovery aborts the record */
	Shoal__NodeResponse *nr = rt_call_resp(c, &j->arena);
	if (nr == NULL)
		return rt_job_fail(j, c->rc, "%s", c->errmsg);
	if (nr->txn_state == TS_COMMITTED || nr->txn_state == TS_ABORTED) {
		/* Decided by an earlier run: its answer, as recorded. */
		if (nr->response != NULL &&
		    nr->response->result_case != SHOAL__RESPONSE__RESULT__NOT_SET)
			return rt_job_pass(j, c);
		if (nr->response != NULL && nr->response->status != SHOAL__STATUS__STATUS_OK)
			return rt_job_pass(j, c);
		int rc = cancel_all(j, t->n, SHOAL_E_TXN_CONFLICT, &j->out);
		return rc;
	}
	if (c->code != SHOAL_OK && c->code != SHOAL_E_TXN_CANCELED)
		return rt_job_pass(j, c); /* in progress elsewhere, mismatch, ... */
	if (c->code == SHOAL_E_TXN_CANCELED) {
		/* Its record is PREPARING and the transaction aborts; the other
		 * parts are only checked, for their reasons (nothing locked). */
		for (uint32_t p = 1; p < t->np; p++) {
			t->parts[p].w.check_only = true;
			int rc = prepare_call(j, &t->parts[p]);
			if (rc != SHOAL_OK)
				return rc;
		}
		j->phase = TXW_PREPARED;
		return RT_WAIT;
	}
	for (uint32_t p = 1; p < t->np; p++) {
		int rc = prepare_call(j, &t->parts[p]);
		if (rc != SHOAL_OK)
			return rc;
	}
	j->phase = TXW_PREPARED;
	return RT_WAIT;
}

/* The packed NodeResponse a retry with the token gets: the answer and the
 * decision. */
static int outcome_bytes(rt_job *j, txw *t, ProtobufCBinaryData *out)
{
	Shoal__NodeResponse nr = SHOAL__NODE_RESPONSE__INIT;
	nr.response = t->answer;
	nr.txn_state = t->commit ? TS_COMMITTED : TS_ABORTED;
	uint8_t *buf;
	size_t len;
	int rc = wire_pack(&j->arena, &nr.base, &buf, &len, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*out = (ProtobufCBinaryData){len, buf};
	return SHOAL_OK;
}

static int txw_finished(rt_job *j, txw *t);

/* Reads part p's answer to its prepare (or check, or prepare-and-decide)
 * into the transaction's reasons, capacity and failure; false when the part
 * is not prepared (the transaction cannot commit). */
static bool collect(rt_job *j, txw *t, txw_part *pt)
{
	rt_call *c = pt->call;
	if (c == NULL) /* not sent: the coordinator cancelled first */
		return false;
	Shoal__NodeResponse *nr = c->rc == SHOAL_OK ? rt_call_resp(c, &j->arena) : NULL;
	if (nr == NULL || nr->response == NULL) {
		/* Unknown (no answer in time): say why unless a cancellation
		 * explains it better. */
		if (t->err == SHOAL_OK) {
			t->err = c->rc != SHOAL_OK ? c->rc : SHOAL_E_INTERNAL;
			t->err_msg =
			    c->rc != SHOAL_OK ? c->errmsg : "a node's answer without a response";
		}
		return false;
	}
	const Shoal__Response *r = nr->response;
	if (c->code == SHOAL_OK && pt->w.decide && nr->txn_state == TS_ABORTED) {
		/* Decided ABORTED: by this run for its participants (abort: no
		 * reason of its own), or already (another run, a tombstone). */
		if (!pt->w.abort) {
			t->cancelled = true;
			for (size_t i = 0; i < pt->w.n_positions; i++)
				t->reasons[pt->w.positions[i]].code = SHOAL_E_TXN_CONFLICT;
		}
		return false;
	}
	if (c->code == SHOAL_OK) {
		if (nr->txn_state == TS_ABORTED ||
		    (nr->txn_state == TS_COMMITTED && !pt->w.decide)) {
			/* A tombstone at the coordinator or a participant's
			 * marker: this transaction was ended without us. */
			t->cancelled = true;
			for (size_t i = 0; i < pt->w.n_positions; i++)
				t->reasons[pt->w.positions[i]].code = SHOAL_E_TXN_CONFLICT;
			return false;
		}
		if (r->result_case == SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS) {
			const Shoal__TransactWriteItemsResponse *tw = r->transact_write_items;
			for (size_t k = 0; k < tw->n_consumed_capacity; k++)
				if (wire_capacity_list_add(&j->arena, &t->ok->consumed_capacity,
				                           &t->ok->n_consumed_capacity,
				                           tw->consumed_capacity[k]) != SHOAL_OK)
					t->err = SHOAL_E_NOMEM;
			if (wire_icm_list_merge(&j->arena, &t->ok->item_collection_metrics,
			                        &t->ok->n_item_collection_metrics,
			                        tw->item_collection_metrics,
			                        tw->n_item_collection_metrics) != SHOAL_OK)
				t->err = SHOAL_E_NOMEM;
		}
		return true;
	}
	if (c->code == SHOAL_E_TXN_CANCELED && r->n_cancellation_reasons == pt->w.n_positions) {
		t->cancelled = true;
		for (size_t i = 0; i < pt->w.n_positions; i++) {
			const Shoal__CancellationReason *cr = r->cancellation_reasons[i];
			wire_txn_reason *x = &t->reasons[pt->w.positions[i]];
			x->code = wire_code_from_status((int)cr->status);
			x->message = cr->message;
			x->item = cr->item;
		}
		return false;
	}
	if (c->code == SHOAL_E_THROUGHPUT || c->code == SHOAL_E_TXN_CONFLICT) {
		t->cancelled = true;
		for (size_t i = 0; i < pt->w.n_positions; i++) {
			t->reasons[pt->w.positions[i]].code = c->code;
			t->reasons[pt->w.positions[i]].message = r->message;
		}
		return false;
	}
	if (c->code == SHOAL_E_WRONG_GROUP) {
		/* A part's group no longer serves one of its items (a partition
		 * moved).  Two-phase: other parts may be prepared under this id,
		 * so the transaction is not run again under another one; it is
		 * cancelled as a conflict, which the client retries. */
		t->cancelled = true;
		for (size_t i = 0; i < pt->w.n_positions; i++) {
			t->reasons[pt->w.positions[i]].code = SHOAL_E_TXN_CONFLICT;
			t->reasons[pt->w.positions[i]].message =
			    "The item's partition is moving between storage groups";
		}
		return false;
	}
	if (t->err == SHOAL_OK) {
		t->err = c->code;
		t->err_msg = r->message != NULL ? r->message : "";
	}
	return false;
}

static int collect_init(rt_job *j, txw *t)
{
	if (t->reasons != NULL)
		return SHOAL_OK;
	t->reasons = sh_arena_calloc(&j->arena, t->n, sizeof(*t->reasons));
	t->ok = sh_arena_alloc(&j->arena, sizeof(*t->ok));
	if (t->reasons == NULL || t->ok == NULL)
		return nomem(j);
	shoal__transact_write_items_response__init(t->ok);
	return SHOAL_OK;
}

/* The client's answer from what was collected and t->commit. */
static int build_answer(rt_job *j, txw *t)
{
	const Shoal__TransactWriteItemsRequest *in = j->in->transact_write_items;
	if (t->err == SHOAL_E_NOMEM)
		return nomem(j);
	if ((t->answer = sh_arena_alloc(&j->arena, sizeof(*t->answer))) == NULL)
		return nomem(j);
	shoal__response__init(t->answer);
	if (t->commit) {
		if (WIRE_RCC(in) == WIRE_RCC_NONE)
			t->ok->n_consumed_capacity = 0;
		t->answer->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS;
		t->answer->transact_write_items = t->ok;
		return SHOAL_OK;
	}
	if (t->cancelled)
		return wire_txn_cancel(&j->arena, t->answer, t->reasons, t->n, j->errmsg);
	if (t->err == SHOAL_OK) {
		t->err = SHOAL_E_INTERNAL;
		t->err_msg = "the transaction could not be prepared";
	}
	t->answer = rt_error_response(&j->arena, t->err, t->err_msg);
	return t->answer == NULL ? nomem(j) : SHOAL_OK;
}

/* TxnFinish to every participant that may hold a part (not the
 * coordinator, whose part the decision finished); then FINISHED. */
static int finish_parts(rt_job *j, txw *t)
{
	for (uint32_t p = 1; p < t->np; p++) {
		txw_part *pt = &t->parts[p];
		if (pt->call == NULL || pt->w.check_only)
			continue; /* never prepared */
		Shoal__TxnFinish *f = sh_arena_alloc(&j->arena, sizeof(*f));
		Shoal__NodeRequest *fr = sh_arena_alloc(&j->arena, sizeof(*fr));
		if (f == NULL || fr == NULL || (pt->finish = rt_job_call(j, pt->group)) == NULL)
			return nomem(j);
		shoal__txn_finish__init(f);
		f->id = (ProtobufCBinaryData){16, t->id};
		f->commit = t->commit;
		shoal__node_request__init(fr);
		fr->txn_finish = f;
		pt->finish->idempotent = true;
		int rc = rt_call_request(j, pt->finish, fr);
		if (rc != SHOAL_OK)
			return rc;
	}
	j->phase = TXW_FINISHED;
	return j->calls != NULL ? RT_WAIT : txw_finished(j, t);
}

/* PREPARED (token): every prepare has answered (or was never sent: a
 * cancelled coordinator); the decision and the answer. */
static int txw_prepared(rt_job *j, txw *t)
{
	int rc = collect_init(j, t);
	if (rc != SHOAL_OK)
		return rc;
	bool commit = true;
	for (uint32_t p = 0; p < t->np; p++)
		commit = collect(j, t, &t->parts[p]) && commit;
	t->commit = commit;
	if ((rc = build_answer(j, t)) != SHOAL_OK)
		return rc;
	/* The decision, at the coordinator, with the answer a retry gets. */
	shoal__txn_decide__init(&t->d);
	t->d.id = (ProtobufCBinaryData){16, t->id};
	t->d.commit = commit;
	if ((rc = outcome_bytes(j, t, &t->d.outcome)) != SHOAL_OK)
		return rc;
	shoal__node_request__init(&t->dnr);
	t->dnr.txn_decide = &t->d;
	if ((t->decide = rt_job_call(j, t->parts[0].group)) == NULL)
		return nomem(j);
	t->decide->idempotent = true;
	if ((rc = rt_call_request(j, t->decide, &t->dnr)) != SHOAL_OK)
		return rc;
	j->phase = TXW_DECIDED;
	return RT_WAIT;
}

/* PARTS (no token): the participants answered.  The coordinator's part
 * goes last, to prepare and decide in one entry: COMMITTED if it can go
 * and every participant prepared, else ABORTED (abort: its reasons only).
 * Either way the decision is recorded before any participant is finished:
 * another run of the same id (a resent request) follows the same record. */
static int txw_parts(rt_job *j, txw *t)
{
	int rc = collect_init(j, t);
	if (rc != SHOAL_OK)
		return rc;
	bool commit = true;
	for (uint32_t p = 1; p < t->np; p++)
		commit = collect(j, t, &t->parts[p]) && commit;
	txw_part *coord = &t->parts[0];
	coord->w.decide = true;
	coord->w.abort = !commit;
	if ((rc = prepare_call(j, coord)) != SHOAL_OK)
		return rc;
	t->decide = coord->call;
	t->commit = commit;
	j->phase = TXW_PD;
	return RT_WAIT;
}

/* PD (no token): the coordinator's recorded decision (its own, or that of
 * another run of the same id); the answer and the finishes by it. */
static int txw_pd(rt_job *j, txw *t)
{
	txw_part *coord = &t->parts[0];
	rt_call *c = coord->call;
	Shoal__NodeResponse *nr = c->rc == SHOAL_OK ? rt_call_resp(c, &j->arena) : NULL;
	if (nr == NULL || (nr->txn_state != TS_COMMITTED && nr->txn_state != TS_ABORTED)) {
		/* No decision known (no answer, or a refusal before the entry):
		 * only the coordinator's record can say, and recovery finishes
		 * the parts by it -- this run finishes nothing it has not seen
		 * recorded, since another run of the id may decide. */
		return rt_job_fail(
		    j, SHOAL_E_OUTCOME_UNKNOWN,
		    "The transaction's outcome is unknown: its decision could not be "
		    "confirmed by storage group %u (%s); it is completed or rolled "
		    "back within seconds",
		    coord->group,
		    nr != NULL && nr->response != NULL && nr->response->message != NULL
		        ? nr->response->message
		        : c->errmsg);
	}
	collect(j, t, coord); /* its capacity, or its reasons */
	t->commit = nr->txn_state == TS_COMMITTED;
	int rc = build_answer(j, t);
	if (rc != SHOAL_OK)
		return rc;
	return finish_parts(j, t);
}

/* DECIDED (token): the decision as the coordinator recorded it; the
 * finishes. */
static int txw_decided(rt_job *j, txw *t)
{
	rt_call *c = t->decide;
	Shoal__NodeResponse *nr = c->rc == SHOAL_OK ? rt_call_resp(c, &j->arena) : NULL;
	int code = nr != NULL ? c->code : c->rc != SHOAL_OK ? c->rc : SHOAL_E_INTERNAL;
	if (code != SHOAL_OK) {
		if (t->commit)
			/* The commit may or may not have been recorded: only the
			 * record knows, and recovery finishes the parts by it. */
			return rt_job_fail(
			    j, SHOAL_E_OUTCOME_UNKNOWN,
			    "The transaction's outcome is unknown: its decision could "
			    "not be confirmed by storage group %u (%s); it is "
			    "completed or rolled back within seconds",
			    t->parts[0].group,
			    nr != NULL && nr->response != NULL && nr->response->message != NULL
			        ? nr->response->message
			        : c->errmsg);
		/* Aborting: nothing can commit it (recovery aborts a PREPARING
		 * record); the parts are released below or by recovery. */
	} else if (t->commit && nr->txn_state != TS_COMMITTED) {
		/* Recovery aborted it first (our prepares were too slow). */
		t->commit = false;
		int rc = cancel_all(j, t->n, SHOAL_E_TXN_CONFLICT, &t->answer);
		if (rc != SHOAL_OK)
			return rc;
	}
	return finish_parts(j, t);
}

/* FINISHED: the acknowledgement (gathered with others: rt_txn_ack) and
 * the answer. */
static int txw_finished(rt_job *j, txw *t)
{
	uint32_t done[ST_TXN_MAX_PARTS];
	uint32_t nd = 0;
	rt_call *d = t->decide;
	bool decided = d != NULL && d->rc == SHOAL_OK && d->code == SHOAL_OK;
	for (uint32_t p = 1; p < t->np && decided; p++) {
		rt_call *f = t->parts[p].finish;
		if (f == NULL || (f->rc == SHOAL_OK && f->code == SHOAL_OK))
			done[nd++] = t->parts[p].group;
	}
	/* Lost, an acknowledgement only delays the record's expiry: recovery
	 * finishes (again, harmlessly) and acknowledges.  The record of an
	 * abort decided by a prepare-and-decide expires by itself. */
	if (decided && (t->commit || t->token) && nd > 0)
		rt_txn_ack(j->rt, t->parts[0].group, t->id, done, nd);
	j->out = t->answer;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Acknowledgements, gathered per coordinator group                         */
/* ------------------------------------------------------------------------ */

#define ACKQ_MAX    64 /* acknowledgements per message */
#define ACKQ_GROUPS 16 /* participants an acknowledgement carries inline */
#define ACKQ_AGE_MS 5  /* the oldest waits at most this long (under load) */

typedef struct ack_entry {
	uint8_t id[16];
	uint32_t n;
	uint32_t g[ACKQ_GROUPS];
} ack_entry;

struct rt_ackq {
	pthread_mutex_t mu;
	ack_entry e[ACKQ_MAX];
	uint32_t n;
	int64_t first_ms;
};

/* Sends n acknowledgements to group g in one TxnAcks (detached). */
static void ack_send(rt_router *rt, uint32_t g, const ack_entry *e, uint32_t n)
{
	Shoal__TxnAck acks[ACKQ_MAX], *ptrs[ACKQ_MAX];
	for (uint32_t i = 0; i < n; i++) {
		shoal__txn_ack__init(&acks[i]);
		acks[i].id = (ProtobufCBinaryData){16, (uint8_t *)e[i].id};
		acks[i].groups = (uint32_t *)e[i].g;
		acks[i].n_groups = e[i].n;
		ptrs[i] = &acks[i];
	}
	Shoal__TxnAcks all = SHOAL__TXN_ACKS__INIT;
	all.acks = ptrs;
	all.n_acks = n;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.txn_acks = &all;
	(void)rt_call_detached(rt, g, &nr, TXN_ACK_MS);
}

void rt_txn_ack(rt_router *rt, uint32_t coord, const uint8_t id[16], const uint32_t *groups,
                uint32_t n)
{
	ack_entry one;
	memcpy(one.id, id, 16);
	one.n = n < ACKQ_GROUPS ? n : ACKQ_GROUPS;
	memcpy(one.g, groups, one.n * sizeof(uint32_t));
	rt_ackq *q = rt->ackq != NULL && coord < SH_MAX_GROUPS ? rt->ackq[coord] : NULL;
	if (q == NULL && rt->ackq != NULL && coord < SH_MAX_GROUPS && n <= ACKQ_GROUPS) {
		rt_ackq *fresh = sh_calloc(1, sizeof(*fresh));
		if (fresh != NULL) {
			pthread_mutex_init(&fresh->mu, NULL);
			rt_ackq *expect = NULL;
			if (!atomic_compare_exchange_strong(&rt->ackq[coord], &expect, fresh)) {
				pthread_mutex_destroy(&fresh->mu);
				sh_free(fresh);
			}
			q = atomic_load(&rt->ackq[coord]);
		}
	}
	if (q == NULL || n > ACKQ_GROUPS) { /* alone (or out of memory) */
		if (n <= ACKQ_GROUPS)
			ack_send(rt, coord, &one, 1);
		else {
			Shoal__TxnAck a = SHOAL__TXN_ACK__INIT, *ap = &a;
			a.id = (ProtobufCBinaryData){16, (uint8_t *)id};
			a.groups = (uint32_t *)groups;
			a.n_groups = n;
			Shoal__TxnAcks all = SHOAL__TXN_ACKS__INIT;
			all.acks = &ap;
			all.n_acks = 1;
			Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
			nr.txn_acks = &all;
			(void)rt_call_detached(rt, coord, &nr, TXN_ACK_MS);
		}
		return;
	}
	ack_entry out[ACKQ_MAX];
	uint32_t n_out = 0;
	int64_t now = rt_now_ms();
	pthread_mutex_lock(&q->mu);
	if (q->n == 0)
		q->first_ms = now;
	q->e[q->n++] = one;
	if (q->n == ACKQ_MAX || now - q->first_ms >= ACKQ_AGE_MS) {
		n_out = q->n;
		memcpy(out, q->e, n_out * sizeof(out[0]));
		q->n = 0;
	}
	pthread_mutex_unlock(&q->mu);
	if (n_out > 0)
		ack_send(rt, coord, out, n_out);
}

int rt_txn_init(rt_router *rt)
{
	rt->ackq = sh_calloc(SH_MAX_GROUPS, sizeof(*rt->ackq));
	return rt->ackq != NULL ? SHOAL_OK : SHOAL_E_NOMEM;
}

void rt_txn_fini(rt_router *rt)
{
	for (uint32_t g = 0; rt->ackq != NULL && g < SH_MAX_GROUPS; g++) {
		rt_ackq *q = atomic_load(&rt->ackq[g]);
		if (q != NULL) {
			pthread_mutex_destroy(&q->mu);
			sh_free(q);
		}
	}
	sh_free((void *)rt->ackq);
	rt->ackq = NULL;
}

/* SINGLE: the one group's answer is the client's, except a throttled
 * group (its partition's capacity, node/capacity.c): a cancellation with
 * ProvisionedThroughputExceeded for its actions, as a throttled part of a
 * transaction across groups. */
static int txw_single(rt_job *j, txw *t)
{
	rt_call *c = t->parts[0].call;
	if (c->rc != SHOAL_OK || c->code != SHOAL_E_THROUGHPUT)
		return rt_job_pass(j, c);
	int rc = collect_init(j, t);
	if (rc != SHOAL_OK)
		return rc;
	t->commit = collect(j, t, &t->parts[0]);
	if ((rc = build_answer(j, t)) != SHOAL_OK)
		return rc;
	j->out = t->answer;
	return SHOAL_OK;
}

int rt_step_transact_write_items(rt_job *j)
{
	txw *t = j->st;
	switch (j->phase) {
	case TXW_PLAN:
		return txw_plan(j);
	case TXW_SINGLE:
		return txw_single(j, t);
	case TXW_COORD:
		return txw_coord(j, t);
	case TXW_PREPARED:
		return txw_prepared(j, t);
	case TXW_PARTS:
		return txw_parts(j, t);
	case TXW_PD:
		return txw_pd(j, t);
	case TXW_DECIDED:
		return txw_decided(j, t);
	case TXW_FINISHED:
		return txw_finished(j, t);
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "TransactWriteItems: phase %d", j->phase);
	}
}

/* ======================================================================== */
/* TransactGetItems                                                          */
/* ======================================================================== */

typedef struct tget_part {
	uint32_t group;
	Shoal__TransactGetItemsRequest req;
	Shoal__Request r;
	Shoal__NodeRequest nr;
	uint32_t *positions;
	const rt_table **tables;
	uint32_t n_tables;
	rt_call *call;
	/* The previous round's answer. */
	Shoal__NodeResponse *prev;
} tget_part;

typedef struct tget {
	uint32_t n;
	tget_part *parts;
	uint32_t np;
	uint32_t rounds;
	bool have_prev; /* a round without locks to compare with */
	/* Items found held or changed in any round: the reasons if the read
	 * is cancelled in the end. */
	wire_txn_reason *reasons;
} tget;

static int tget_round(rt_job *j, tget *t)
{
	for (uint32_t p = 0; p < t->np; p++) {
		tget_part *pt = &t->parts[p];
		rt_call *c = rt_job_call(j, pt->group);
		if (c == NULL)
			return nomem(j);
		shoal__node_request__init(&pt->nr);
		pt->nr.request = &pt->r;
		int rc = rt_call_request(j, c, &pt->nr);
		if (rc != SHOAL_OK)
			return rc;
		rt_call_repairs(c, pt->tables, pt->n_tables);
		pt->call = c;
	}
	t->rounds++;
	if (t->np > 1)
		atomic_fetch_add_explicit(&j->rt->metrics.txn_get_rounds, 1, memory_order_relaxed);
	j->phase = 1;
	return RT_WAIT;
}

static int tget_plan(rt_job *j)
{
	const Shoal__TransactGetItemsRequest *in = j->in->transact_get_items;
	tget *t = j->st;
	int rc;
	if (t == NULL) {
		if ((rc = wire_txn_get_check(in, j->errmsg)) != SHOAL_OK)
			return rc;
		if ((t = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*t))) == NULL)
			return nomem(j);
		t->n = (uint32_t)in->n_transact_items;
	}
	rt_batch_key keys[ST_MAX_TXN_ITEMS];
	const rt_table *tabs[ST_MAX_TXN_ITEMS];
	for (uint32_t i = 0; i < t->n; i++) {
		st_get_req g;
		if ((rc = wire_txn_get_from_pb(&j->arena, in->transact_items[i]->get, &g,
		                               j->errmsg)) != SHOAL_OK)
			return rc;
		if ((rc = place(j, g.table, g.key, false, &tabs[i], &keys[i])) != SHOAL_OK)
			return rc;
	}
	if (rt_batch_find_duplicate(keys, t->n) >= 0)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "Transaction request cannot include multiple operations on one "
		                   "item");
	uint32_t part_of[ST_MAX_TXN_ITEMS], groups[ST_MAX_TXN_ITEMS];
	t->np = rt_batch_split(keys, t->n, part_of, groups);
	if ((t->parts = sh_arena_calloc(&j->arena, t->np, sizeof(*t->parts))) == NULL)
		return nomem(j);
	for (uint32_t p = 0; p < t->np; p++) {
		tget_part *pt = &t->parts[p];
		pt->group = groups[p];
		shoal__transact_get_items_request__init(&pt->req);
		if (WIRE_HAS(in, return_consumed_capacity))
			WIRE_SET(&pt->req, return_consumed_capacity, in->return_consumed_capacity);
		shoal__request__init(&pt->r);
		pt->r.op_case = SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS;
		pt->r.transact_get_items = &pt->req;
		pt->req.transact_items = sh_arena_calloc(&j->arena, t->n, sizeof(void *));
		pt->positions = sh_arena_calloc(&j->arena, t->n, sizeof(*pt->positions));
		pt->tables = sh_arena_calloc(&j->arena, t->n, sizeof(*pt->tables));
		if (pt->req.transact_items == NULL || pt->positions == NULL || pt->tables == NULL)
			return nomem(j);
	}
	for (uint32_t i = 0; i < t->n; i++) {
		tget_part *pt = &t->parts[part_of[i]];
		pt->positions[pt->req.n_transact_items] = i;
		pt->req.transact_items[pt->req.n_transact_items++] = in->transact_items[i];
		add_table(pt->tables, &pt->n_tables, tabs[i]);
	}
	return tget_round(j, t);
}

/* The answer from the last round's items. */
static int tget_answer(rt_job *j, tget *t)
{
	Shoal__TransactGetItemsResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	Shoal__ItemResponse **items = sh_arena_calloc(&j->arena, t->n, sizeof(*items));
	Shoal__Response *resp = sh_arena_alloc(&j->arena, sizeof(*resp));
	if (out == NULL || items == NULL || resp == NULL)
		return nomem(j);
	shoal__transact_get_items_response__init(out);
	for (uint32_t p = 0; p < t->np; p++) {
		const Shoal__TransactGetItemsResponse *r =
		    t->parts[p].prev->response->transact_get_items;
		for (size_t k = 0; k < r->n_responses; k++)
			items[t->parts[p].positions[k]] = r->responses[k];
		for (size_t k = 0; k < r->n_consumed_capacity; k++)
			if (wire_capacity_list_add(&j->arena, &out->consumed_capacity,
			                           &out->n_consumed_capacity,
			                           r->consumed_capacity[k]) != SHOAL_OK)
				return nomem(j);
	}
	out->responses = items;
	out->n_responses = t->n;
	shoal__response__init(resp);
	resp->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_GET_ITEMS;
	resp->transact_get_items = out;
	j->out = resp;
	return SHOAL_OK;
}

/* After a round: conflicts (locks, moved versions) or the answer. */
static int tget_collect(rt_job *j, tget *t)
{
	bool locked = false, moved = !t->have_prev;
	if (t->reasons == NULL &&
	    (t->reasons = sh_arena_calloc(&j->arena, t->n, sizeof(*t->reasons))) == NULL)
		return nomem(j);
	wire_txn_reason *reasons = t->reasons;
	Shoal__NodeResponse **cur = sh_arena_calloc(&j->arena, t->np, sizeof(*cur));
	if (cur == NULL)
		return nomem(j);
	for (uint32_t p = 0; p < t->np; p++) {
		tget_part *pt = &t->parts[p];
		Shoal__NodeResponse *nr;
		int rc;
		if (!rt_call_ok(j, pt->call, &nr, &rc))
			return rc; /* a failure or a refusal: the answer */
		if (nr->response == NULL ||
		    nr->response->result_case != SHOAL__RESPONSE__RESULT_TRANSACT_GET_ITEMS ||
		    nr->response->transact_get_items->n_responses != pt->req.n_transact_items ||
		    nr->n_txn_items != pt->req.n_transact_items)
			return rt_job_fail(j, SHOAL_E_INTERNAL,
			                   "group %u answered TransactGetItems without its items",
			                   pt->group);
		for (size_t k = 0; k < nr->n_txn_items; k++) {
			if (nr->txn_items[k]->locked) {
				locked = true;
				reasons[pt->positions[k]].code = SHOAL_E_TXN_CONFLICT;
			}
			if (t->have_prev &&
			    (pt->prev->txn_instance != nr->txn_instance ||
			     pt->prev->txn_items[k]->version != nr->txn_items[k]->version)) {
				moved = true;
				reasons[pt->positions[k]].code = SHOAL_E_TXN_CONFLICT;
			}
		}
		cur[p] = nr;
	}
	for (uint32_t p = 0; p < t->np; p++)
		t->parts[p].prev = cur[p];
	/* One group: its round was one snapshot already. */
	if (!locked && (t->np == 1 || !moved))
		return tget_answer(j, t);
	t->have_prev = !locked;
	if (t->rounds >= TGET_ROUNDS) {
		Shoal__Response *resp = sh_arena_alloc(&j->arena, sizeof(*resp));
		if (resp == NULL)
			return nomem(j);
		shoal__response__init(resp);
		int rc = wire_txn_cancel(&j->arena, resp, reasons, t->n, j->errmsg);
		if (rc != SHOAL_OK)
			return rc;
		j->out = resp;
		return SHOAL_OK;
	}
	if (locked) { /* a transaction holds an item: give it a moment */
		atomic_fetch_add_explicit(&j->rt->metrics.txn_get_waits, 1, memory_order_relaxed);
		j->phase = 2;
		return rt_job_sleep(j, TGET_PAUSE_MS);
	}
	return tget_round(j, t);
}

int rt_step_transact_get_items(rt_job *j)
{
	tget *t = j->st;
	switch (j->phase) {
	case 0:
		return tget_plan(j);
	case 1:
		return tget_collect(j, t);
	case 2:
		return tget_round(j, t);
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "TransactGetItems: phase %d", j->phase);
	}
}
