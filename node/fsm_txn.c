/*
 * fsm_txn.c -- the transaction operations of a group's state machine.  The
 * protocol (who sends what, when, and what happens after a crash) is
 * router/txn.c's header; the replicated state is storage/txn.c's.
 *
 *   txn_write (single)  every item of the transaction is in this group:
 *                       st_transact, all or nothing; with a
 *                       ClientRequestToken the answer is recorded under the
 *                       transaction's id, and a retry with the same id gets
 *                       it back (a different request with the same token:
 *                       IdempotentParameterMismatchException).
 *   txn_write (prepare) this group's part of a transaction over several
 *                       groups: st_txn_prepare (locks, the part kept).  In the
 *                       coordinator group (the first action's) the
 *                       transaction's record is created PREPARING in the same
 *                       entry; a record already there answers instead (a
 *                       retry: the recorded decision; a tombstone: ABORTED;
 *                       PREPARING under another run, TxnWrite.attempt:
 *                       TransactionInProgressException).  check_only: the
 *                       part planned for its reasons, nothing written.
 *   txn_write (decide)  the coordinator's part sent last (no token): planned
 *                       and decided in one entry -- the record created
 *                       COMMITTED with the part applied at once, or ABORTED
 *                       (abort: the router asks for it; or the part cannot
 *                       go) with the part's reasons.  A record already
 *                       there answers its decision (another run of the same
 *                       id, a tombstone).
 *   txn_decide          coordinator: PREPARING -> COMMITTED or ABORTED, the
 *                       answer recorded, and the coordinator's own part
 *                       finished in the same entry.  A record already
 *                       decided answers its decision (recovery may have
 *                       aborted it first: the router then aborts too).
 *   txn_finish          participant: its part applied (commit) or dropped
 *                       (abort); a part already finished is a no-op.  A
 *                       marker (a record, decided, NODE_TXN_KEEP_MS) says
 *                       it finished: a prepare of the same id that comes
 *                       later answers the marker's state and locks nothing.
 *   txn_acks            coordinator: participants that finished, for many
 *                       transactions at once; when all of one have, its
 *                       record expires NODE_TXN_TOKEN_MS later (a
 *                       ClientRequestToken's: a retry gets the answer) or
 *                       NODE_TXN_KEEP_MS (none).
 *   txn_status          coordinator, asked by a participant's recovery: the
 *                       decision; a record still PREPARING after
 *                       NODE_TXN_RECOVER_MS, or none at all, is decided
 *                       ABORTED here (a tombstone stops a late prepare).
 *   txn_expire          any group: expired records and write tokens go.
 *
 * Answers: NodeResponse.txn_state carries the record's state where one is
 * involved; a cancelled part answers TransactionCanceledException with one
 * reason per action of this group's part, in its order (the router places
 * them by TxnWrite.positions).  Recorded answers are packed NodeResponses,
 * returned as they were.  Everything is a function of the entry and the
 * state, so every replica computes the same.
 */
#include <string.h>

#include "common/alloc.h"
#include "node/fsm_int.h"
#include "node/node.h"
#include "proto/wire.h"

static int get_id(op_ctx *c, ProtobufCBinaryData id, const uint8_t **out)
{
	if (id.len != ST_TXN_ID_LEN)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "a transaction id has %d bytes (got %zu)", ST_TXN_ID_LEN, id.len);
	*out = id.data;
	return SHOAL_OK;
}

/* The part's actions as engine actions; a conversion error is that action's
 * reason (*bad). */
static int convert(op_ctx *c, const Shoal__TxnWrite *w, st_txn_action **acts, st_txn_result **res,
                   bool *bad)
{
	size_t n = w->n_actions;
	*bad = false;
	*acts = sh_arena_calloc(c->a, n + 1, sizeof(**acts));
	*res = sh_arena_calloc(c->a, n + 1, sizeof(**res));
	if (*acts == NULL || *res == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "transaction: out of memory");
	if (n == 0 || n > ST_MAX_TXN_ITEMS)
		return sh_errf(c->msg, SHOAL_E_VALIDATION, "a transaction part of %zu actions", n);
	for (size_t i = 0; i < n; i++) {
		char msg[SH_ERRMSG_SIZE];
		/* The router checked the request first: a part's position
		 * only labels a message no client sees. */
		int rc = wire_txn_action_from_pb(c->a, w->actions[i], i + 1, &(*acts)[i], msg);
		if (rc == SHOAL_E_NOMEM)
			return sh_errf(c->msg, rc, "%s", msg);
		if (rc != SHOAL_OK) {
			(*res)[i].code = rc;
			(*res)[i].message = sh_arena_strndup(c->a, msg, strlen(msg));
			*bad = true;
		}
	}
	return SHOAL_OK;
}

/* The answer of a cancelled part: one reason per action of the part. */
static int cancel_answer(op_ctx *c, const st_txn_result *res, size_t n)
{
	/* A table this group does not know (the router's catalog does: a
	 * definition this group lost) fails the part, not an action: the
	 * router repairs the group and sends the part again. */
	for (size_t i = 0; i < n; i++)
		if (res[i].code == SHOAL_E_NOT_FOUND)
			return sh_errf(c->msg, SHOAL_E_NOT_FOUND, "%s",
			               res[i].message != NULL ? res[i].message : "table not found");
	if (c->r == NULL)
		return SHOAL_OK;
	wire_txn_reason *r = sh_arena_calloc(c->a, n + 1, sizeof(*r));
	if (r == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "cancellation: out of memory");
	for (size_t i = 0; i < n; i++) {
		r[i].code = res[i].code;
		r[i].message = res[i].message;
		if (res[i].old_item != NULL &&
		    wire_item_to_pb(c->a, res[i].old_item, &r[i].item, c->msg) != SHOAL_OK)
			r[i].item = NULL; /* a stored item always converts; be safe */
	}
	return wire_txn_cancel(c->a, c->r, r, (uint32_t)n, c->msg);
}

/* Every action of the part cancelled with the same reason. */
static int cancel_all(op_ctx *c, size_t n, int code, const char *message)
{
	st_txn_result *res = sh_arena_calloc(c->a, n + 1, sizeof(*res));
	if (res == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "cancellation: out of memory");
	for (size_t i = 0; i < n; i++) {
		res[i].code = code;
		res[i].message = message;
	}
	return cancel_answer(c, res, n);
}

/* The answer of an applied transaction: its capacity when asked (a
 * transactional write costs twice a write's units), and its item collection
 * metrics when asked. */
static int applied_answer(op_ctx *c, const Shoal__TxnWrite *w, const st_txn_action *acts,
                          const st_txn_result *res, size_t n)
{
	if (c->r == NULL)
		return SHOAL_OK;
	Shoal__TransactWriteItemsResponse *out = sh_arena_alloc(c->a, sizeof(*out));
	if (out == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "transaction: out of memory");
	shoal__transact_write_items_response__init(out);
	wire_rcc rcc = WIRE_RCC(w);
	bool ricm = WIRE_RICM(w);
	for (size_t i = 0; i < n; i++) {
		const char *table;
		const st_value *key;
		bool item;
		wire_txn_action_target(&acts[i], &table, &key, &item);
		node_fsm_charge_write(c, table, &res[i].res, key, 2);
		if (ricm && acts[i].kind != ST_TXA_CHECK) {
			Shoal__ItemCollectionMetrics *m;
			int rc = wire_icm_new(c->a, &res[i].res, &m, c->msg);
			if (rc == SHOAL_OK)
				rc = wire_icm_list_add(c->a, &out->item_collection_metrics,
				                       &out->n_item_collection_metrics, table, m);
			if (rc != SHOAL_OK)
				return sh_errf(c->msg, rc, "transaction metrics: out of memory");
		}
		if (rcc == WIRE_RCC_NONE)
			continue;
		Shoal__ConsumedCapacity *cc;
		int rc = wire_capacity_new(c->a, rcc, table, &cc);
		for (int twice = 0; twice < 2 && rc == SHOAL_OK; twice++)
			rc = wire_capacity_charge_write(c->a, cc, &res[i].res);
		if (rc == SHOAL_OK)
			rc = wire_capacity_list_add(c->a, &out->consumed_capacity,
			                            &out->n_consumed_capacity, cc);
		if (rc != SHOAL_OK)
			return sh_errf(c->msg, rc, "transaction capacity: out of memory");
	}
	c->r->result_case = SHOAL__RESPONSE__RESULT_TRANSACT_WRITE_ITEMS;
	c->r->transact_write_items = out;
	return SHOAL_OK;
}

/* The answer as recorded bytes (a packed NodeResponse). */
static int record_answer(op_ctx *c, uint8_t **out, size_t *len)
{
	size_t n = shoal__node_response__get_packed_size(c->nr);
	uint8_t *p = sh_arena_alloc(c->a, n + 1);
	if (p == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "transaction: out of memory");
	*len = shoal__node_response__pack(c->nr, p);
	*out = p;
	return SHOAL_OK;
}

/* A decided record of this group alone (a single-group transaction's with
 * a token, a tombstone, a participant's marker), expiring keep_ms from the
 * entry's time. */
static void local_record(op_ctx *c, st_txn_record *rec, const uint8_t *id, st_txn_state state,
                         int64_t keep_ms)
{
	memset(rec, 0, sizeof(*rec));
	memcpy(rec->id, id, ST_TXN_ID_LEN);
	rec->state = state;
	rec->created_ms = st_txn_time(c->txn);
	rec->expires_ms = rec->created_ms + keep_ms;
	rec->n_parts = 1;
	rec->parts[0] = c->f->group;
	rec->acked[0] = true;
}

static int mismatch(op_ctx *c)
{
	return sh_errf(c->msg, SHOAL_E_IDEMPOTENT_MISMATCH,
	               "Request cannot be retried with the same ClientRequestToken but different "
	               "parameters");
}

/* Applies (commit) or drops (abort) this group's prepared part of id, if it
 * holds one. */
static int finish_local(op_ctx *c, const uint8_t *id, bool commit)
{
	st_prepared p;
	bool found;
	int rc = st_txn_release(c->txn, id, c->a, &p, &found, c->msg);
	if (rc != SHOAL_OK || !found || !commit)
		return rc;
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, c->a);
	Shoal__TxnWrite *w = shoal__txn_write__unpack(&alloc, p.len, p.blob);
	st_txn_action *acts;
	st_txn_result *res;
	bool bad = true;
	if (w != NULL && (rc = convert(c, w, &acts, &res, &bad)) != SHOAL_OK)
		return rc;
	if (!bad)
		rc = st_transact(c->txn, acts, (uint32_t)w->n_actions, c->a, res, c->msg);
	if (node_fsm_env_error(rc))
		return rc;
	if (bad || rc != SHOAL_OK)
		/* A prepared part always applies (its items were locked since
		 * it was planned): this is a bug, said loudly, not data lost in
		 * silence. */
		node_logf(NODE_LOG_ERROR,
		          "group %u: a committed transaction's prepared part did not apply: %s",
		          c->f->group, bad ? "its actions do not decode" : c->msg);
	return SHOAL_OK;
}

static void set_state(op_ctx *c, st_txn_state s)
{
	if (c->nr != NULL)
		c->nr->txn_state = (uint32_t)s;
}

static void mark_acked(st_txn_record *rec, const uint32_t *groups, size_t n, int64_t now);

/* The coordinator's part sent last (TxnWrite.decide): every other part is
 * prepared, so this entry decides -- COMMITTED with this part applied at
 * once if it can go, else ABORTED with its reasons -- and records the
 * decision for the participants (no record existed: the caller checked; a
 * record there answered with its decision).  With abort (a participant
 * could not prepare) the decision is ABORTED and the part only planned, for
 * its reasons. */
static int prepare_and_decide(op_ctx *c, const Shoal__TxnWrite *w, const uint8_t *id,
                              st_txn_action *acts, st_txn_result *res, bool bad)
{
	uint32_t n = (uint32_t)w->n_actions;
	int64_t now = st_txn_time(c->txn);
	int rc;
	bool late = w->deadline_ms != 0 && now > w->deadline_ms; /* the router gave up */
	if (late)
		rc = SHOAL_E_TXN_CANCELED;
	else if (bad)
		rc = SHOAL_E_TXN_CANCELED;
	else if (w->abort) /* this part's reasons only */
		rc = st_txn_plan(c->txn, acts, n, c->a, res, c->msg);
	else
		rc = st_transact(c->txn, acts, n, c->a, res, c->msg);
	if (node_fsm_env_error(rc))
		return rc;
	/* A request error (this part can never go: a malformed expression) is
	 * decided ABORTED like a cancellation, so that the participants can
	 * be released by the record; the answer is the error. */
	int request_error = rc != SHOAL_OK && rc != SHOAL_E_TXN_CANCELED ? rc : SHOAL_OK;
	if (w->n_participants == 0 || w->n_participants > ST_TXN_MAX_PARTS)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "a transaction's record needs its participants (1..%d)",
		               ST_TXN_MAX_PARTS);
	st_txn_record rec;
	memset(&rec, 0, sizeof(rec));
	memcpy(rec.id, id, ST_TXN_ID_LEN);
	rec.state = rc == SHOAL_OK && !w->abort ? ST_TXN_COMMITTED : ST_TXN_ABORTED;
	rec.created_ms = now;
	rec.n_parts = (uint32_t)w->n_participants;
	for (uint32_t i = 0; i < rec.n_parts; i++)
		rec.parts[i] = w->participants[i];
	uint32_t self = c->f->group;
	mark_acked(&rec, &self, 1, now);
	if (rec.state == ST_TXN_ABORTED)
		/* Nothing to finish but prepared parts to drop, which an abort
		 * needs no acknowledgement for: the record only answers the
		 * participants that ask, for a while. */
		rec.expires_ms = now + NODE_TXN_KEEP_MS;
	set_state(c, rec.state);
	int prc = st_txn_record_put(c->txn, &rec, c->msg);
	if (prc != SHOAL_OK)
		return prc;
	if (request_error != SHOAL_OK)
		return request_error; /* c->msg holds its text */
	if (late)
		return cancel_all(c, n, SHOAL_E_TXN_CONFLICT,
		                  "the transaction's decision arrived after its deadline");
	if (rc == SHOAL_E_TXN_CANCELED)
		return cancel_answer(c, res, n);
	return w->abort ? SHOAL_OK : applied_answer(c, w, acts, res, n);
}

int node_op_txn_write(op_ctx *c, const Shoal__TxnWrite *w)
{
	const uint8_t *id = NULL;
	int rc = get_id(c, w->id, &id);
	if (rc != SHOAL_OK)
		return rc;
	if (w->digest.len != 0 && w->digest.len != 16)
		return sh_errf(c->msg, SHOAL_E_VALIDATION, "a transaction digest has 16 bytes");
	st_txn_action *acts;
	st_txn_result *res;
	bool bad;
	if ((rc = convert(c, w, &acts, &res, &bad)) != SHOAL_OK)
		return rc;
	uint32_t n = (uint32_t)w->n_actions;
	if (w->check_only) {
		rc = bad ? SHOAL_E_TXN_CANCELED : st_txn_plan(c->txn, acts, n, c->a, res, c->msg);
		return rc == SHOAL_E_TXN_CANCELED ? cancel_answer(c, res, n) : rc;
	}
	int64_t now = st_txn_time(c->txn);
	st_txn_record rec;
	bool found = false;
	bool coord = w->single || w->coord_group == c->f->group;
	if (!w->single || w->token) {
		if ((rc = st_txn_record_get(c->txn, id, c->a, &rec, &found, c->msg)) != SHOAL_OK)
			return rc;
	}
	if (found && !coord) {
		/* This participant finished the transaction already (its
		 * marker): a late or repeated prepare must not lock again. */
		set_state(c, rec.state);
		return SHOAL_OK;
	}
	if (found) {
		if (w->digest.len == 16 && memcmp(rec.digest, w->digest.data, 16) != 0)
			return mismatch(c);
		if (rec.state != ST_TXN_PREPARING) {
			/* Decided already: the recorded answer; a tombstone
			 * (decided ABORTED by recovery) has none. */
			if (rec.outcome_len > 0) {
				c->raw = rec.outcome;
				c->raw_len = rec.outcome_len;
			} else if (w->single) {
				return cancel_all(
				    c, n, SHOAL_E_TXN_CONFLICT,
				    "the transaction with this ClientRequestToken was "
				    "cancelled");
			}
			set_state(c, rec.state);
			return SHOAL_OK;
		}
		/* PREPARING: while it is, the record's outcome holds the run
		 * driving it (TxnWrite.attempt). */
		if (rec.outcome_len != w->attempt.len ||
		    memcmp(rec.outcome, w->attempt.data, w->attempt.len) != 0)
			return sh_errf(c->msg, SHOAL_E_TXN_IN_PROGRESS,
			               "The transaction with the given request token is already in "
			               "progress.");
	}

	if (w->single) {
		rc = bad ? SHOAL_E_TXN_CANCELED : st_transact(c->txn, acts, n, c->a, res, c->msg);
		if (rc == SHOAL_E_TXN_CANCELED)
			rc = cancel_answer(c, res, n);
		else if (rc == SHOAL_OK)
			rc = applied_answer(c, w, acts, res, n);
		if (rc != SHOAL_OK || !w->token)
			return rc;
		/* The answer recorded for a retry with the same token. */
		bool applied = c->r->status == SHOAL__STATUS__STATUS_OK;
		set_state(c, applied ? ST_TXN_COMMITTED : ST_TXN_ABORTED);
		local_record(c, &rec, id, applied ? ST_TXN_COMMITTED : ST_TXN_ABORTED,
		             NODE_TXN_TOKEN_MS);
		if (w->digest.len == 16)
			memcpy(rec.digest, w->digest.data, 16);
		uint8_t *out = NULL;
		if ((rc = record_answer(c, &out, &rec.outcome_len)) != SHOAL_OK)
			return rc;
		rec.outcome = out;
		return st_txn_record_put(c->txn, &rec, c->msg);
	}

	if (w->decide && coord)
		return prepare_and_decide(c, w, id, acts, res, bad);

	/* A part to prepare -- unless it comes too late to lock anything
	 * (TxnWrite.deadline_ms): the router gave up on it long ago. */
	if (w->deadline_ms != 0 && now > w->deadline_ms)
		return cancel_all(c, n, SHOAL_E_TXN_CONFLICT,
		                  "the transaction's prepare arrived after its deadline");
	if (bad)
		return cancel_answer(c, res, n);
	size_t blob_len = shoal__txn_write__get_packed_size(w);
	uint8_t *blob = sh_arena_alloc(c->a, blob_len + 1);
	if (blob == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "prepare: out of memory");
	shoal__txn_write__pack(w, blob);
	rc = st_txn_prepare(c->txn, id, w->coord_group, acts, n, blob, blob_len, c->a, res, c->msg);
	if (rc != SHOAL_OK && rc != SHOAL_E_TXN_CANCELED)
		return rc; /* the request's error (no record), or the environment's */
	/* The coordinator's record: PREPARING, with the participants (a
	 * cancelled part too: the decision, ABORTED, is recorded on it). */
	if (coord && !found) {
		memset(&rec, 0, sizeof(rec));
		memcpy(rec.id, id, ST_TXN_ID_LEN);
		rec.state = ST_TXN_PREPARING;
		rec.created_ms = now;
		if (w->digest.len == 16)
			memcpy(rec.digest, w->digest.data, 16);
		if (w->n_participants == 0 || w->n_participants > ST_TXN_MAX_PARTS)
			return sh_errf(c->msg, SHOAL_E_VALIDATION,
			               "a transaction's record needs its participants (1..%d)",
			               ST_TXN_MAX_PARTS);
		rec.n_parts = (uint32_t)w->n_participants;
		for (uint32_t i = 0; i < rec.n_parts; i++)
			rec.parts[i] = w->participants[i];
		rec.outcome = w->attempt.data;
		rec.outcome_len = w->attempt.len;
		int prc = st_txn_record_put(c->txn, &rec, c->msg);
		if (prc != SHOAL_OK)
			return prc;
		set_state(c, ST_TXN_PREPARING);
	}
	if (rc == SHOAL_E_TXN_CANCELED)
		return cancel_answer(c, res, n);
	/* Prepared: the part's capacity, as if applied (it will be, or
	 * nothing will). */
	return applied_answer(c, w, acts, res, n);
}

/* Marks the groups of list acked; when every participant has finished and
 * the transaction is decided, the record expires some time from now. */
static void mark_acked(st_txn_record *rec, const uint32_t *groups, size_t n, int64_t now)
{
	for (size_t k = 0; k < n; k++)
		for (uint32_t i = 0; i < rec->n_parts; i++)
			if (rec->parts[i] == groups[k])
				rec->acked[i] = true;
	bool all = rec->state != ST_TXN_PREPARING;
	for (uint32_t i = 0; i < rec->n_parts && all; i++)
		all = rec->acked[i];
	static const uint8_t zero[16];
	bool token = memcmp(rec->digest, zero, 16) != 0; /* only a token's has one */
	if (all && rec->expires_ms == 0)
		rec->expires_ms = now + (token ? NODE_TXN_TOKEN_MS : NODE_TXN_KEEP_MS);
}

/* The decision: the record PREPARING -> state, outcome recorded, the
 * coordinator's own part finished. */
static int decide(op_ctx *c, st_txn_record *rec, bool commit, ProtobufCBinaryData outcome)
{
	rec->state = commit ? ST_TXN_COMMITTED : ST_TXN_ABORTED;
	rec->outcome = outcome.len > 0 ? outcome.data : NULL;
	rec->outcome_len = outcome.len;
	int rc = finish_local(c, rec->id, commit);
	if (rc != SHOAL_OK)
		return rc;
	uint32_t self = c->f->group;
	mark_acked(rec, &self, 1, st_txn_time(c->txn));
	set_state(c, rec->state);
	return st_txn_record_put(c->txn, rec, c->msg);
}

/* A tombstone: an unknown transaction decided ABORTED, so that a prepare
 * that comes later fails instead of locking items for nothing. */
static int tombstone(op_ctx *c, const uint8_t *id)
{
	st_txn_record rec;
	local_record(c, &rec, id, ST_TXN_ABORTED, NODE_TXN_KEEP_MS);
	int rc = finish_local(c, id, false);
	if (rc == SHOAL_OK)
		rc = st_txn_record_put(c->txn, &rec, c->msg);
	set_state(c, ST_TXN_ABORTED);
	return rc;
}

int node_op_txn_decide(op_ctx *c, const Shoal__TxnDecide *d)
{
	const uint8_t *id = NULL;
	int rc = get_id(c, d->id, &id);
	if (rc != SHOAL_OK)
		return rc;
	st_txn_record rec;
	bool found;
	if ((rc = st_txn_record_get(c->txn, id, c->a, &rec, &found, c->msg)) != SHOAL_OK)
		return rc;
	if (!found) {
		if (d->commit)
			return sh_errf(c->msg, SHOAL_E_VALIDATION,
			               "commit of a transaction that has no record here");
		return tombstone(c, id);
	}
	if (rec.state != ST_TXN_PREPARING) {
		set_state(c, rec.state); /* decided before (a retry, or recovery) */
		return SHOAL_OK;
	}
	return decide(c, &rec, d->commit, d->outcome);
}

int node_op_txn_finish(op_ctx *c, const Shoal__TxnFinish *x)
{
	const uint8_t *id = NULL;
	int rc = get_id(c, x->id, &id);
	if (rc == SHOAL_OK)
		rc = finish_local(c, id, x->commit);
	if (rc != SHOAL_OK)
		return rc;
	/* A marker that this group finished id, so that a prepare of it that
	 * comes late (a delayed message, a retry) does not lock again; it
	 * lives as long as the coordinator may still be asked. */
	st_txn_record rec;
	bool found;
	if ((rc = st_txn_record_get(c->txn, id, c->a, &rec, &found, c->msg)) != SHOAL_OK || found)
		return rc;
	local_record(c, &rec, id, x->commit ? ST_TXN_COMMITTED : ST_TXN_ABORTED, NODE_TXN_KEEP_MS);
	set_state(c, rec.state);
	return st_txn_record_put(c->txn, &rec, c->msg);
}

int node_op_txn_acks(op_ctx *c, const Shoal__TxnAcks *x)
{
	for (size_t i = 0; i < x->n_acks; i++) {
		const uint8_t *id = NULL;
		int rc = get_id(c, x->acks[i]->id, &id);
		if (rc != SHOAL_OK)
			return rc;
		st_txn_record rec;
		bool found;
		if ((rc = st_txn_record_get(c->txn, id, c->a, &rec, &found, c->msg)) != SHOAL_OK)
			return rc;
		if (!found)
			continue; /* expired, or acknowledged twice */
		mark_acked(&rec, x->acks[i]->groups, x->acks[i]->n_groups, st_txn_time(c->txn));
		if ((rc = st_txn_record_put(c->txn, &rec, c->msg)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

int node_op_txn_status(op_ctx *c, const Shoal__TxnStatus *x)
{
	const uint8_t *id = NULL;
	int rc = get_id(c, x->id, &id);
	if (rc != SHOAL_OK)
		return rc;
	st_txn_record rec;
	bool found;
	if ((rc = st_txn_record_get(c->txn, id, c->a, &rec, &found, c->msg)) != SHOAL_OK)
		return rc;
	if (!found)
		return tombstone(c, id);
	if (rec.state == ST_TXN_PREPARING &&
	    st_txn_time(c->txn) - rec.created_ms >= NODE_TXN_RECOVER_MS)
		return decide(c, &rec, false, (ProtobufCBinaryData){0, NULL});
	set_state(c, rec.state);
	return SHOAL_OK;
}

int node_op_txn_expire(op_ctx *c)
{
	uint32_t removed;
	return st_txn_expire(c->txn, st_txn_time(c->txn), 16384, &removed, c->msg);
}

bool node_op_txn_answers(const Shoal__CommandOp *op)
{
	return op->op_case == SHOAL__COMMAND_OP__OP_TXN_WRITE && op->txn_write->single &&
	       op->txn_write->token;
}
