/*
 * txn_recover.c -- finishes the transactions whose router is gone: the
 * "recovery" column of the protocol in router/txn.c.
 *
 * Once a second (NODE_TXN_SCAN_MS), on every group this replica leads, on
 * the loop thread:
 *
 *   found (replicated state)           older than    does
 *   ---------------------------------  ------------  -------------------------
 *   a prepared part, coordinator       RECOVER_MS    TxnStatus to the
 *   elsewhere                                        coordinator group; its
 *                                                    answer COMMITTED/ABORTED
 *                                                    -> TxnFinish proposed here
 *   a prepared part, coordinator here  RECOVER_MS    TxnStatus proposed here
 *                                                    (decides ABORTED)
 *   a record PREPARING                 RECOVER_MS    TxnStatus proposed here
 *                                                    (decides ABORTED)
 *   a record decided, participants     RECOVER_MS    TxnFinish to each; each
 *   not acknowledged                                 that answers -> TxnAck
 *                                                    proposed here
 *   records or tokens past their       -             txn_expire proposed here
 *   expiry
 *   a stream record past the           -             stream_trim proposed here
 *   retention (storage/stream.h)
 *
 * (RECOVER_MS is NODE_TXN_RECOVER_MS (node.h), counted from the entry that created
 * the part or record, by the proposer's clock.)  Every message is
 * idempotent, so a task done twice (by two leaders in turn, or by recovery
 * and a slow router) changes nothing.  At most one task per (group,
 * transaction, kind) is in flight; a task that fails is simply found again
 * at the next scan.
 *
 * Messages to other groups go through the shipper's lanes to the node
 * believed to lead the group (what this node knows when it hosts a replica
 * of it, the leader hint of its last answer, else its replicas in turn),
 * one attempt each.  The answer arrives on an nng thread, which proposes
 * the local follow-up (node_group_submit is thread-safe); the waiter's
 * callback frees the task on the loop.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "node/ship_int.h"
#include "proto/wire.h"
#include "storage/stream.h"

/* Scan period, the most tasks in flight, one attempt's timeout. */
#define REC_SCAN_MS    1000
#define REC_MAX_TASKS  512
#define REC_ATTEMPT_MS 1000

enum task_kind {
	T_STATUS_REMOTE, /* TxnStatus to the coordinator, then TxnFinish here */
	T_FINISH_REMOTE, /* TxnFinish to a participant, then TxnAck here */
	T_LOCAL,         /* a proposal here only (TxnStatus, txn_expire, stream_trim) */
};

typedef struct rec_task {
	wire_lane_item item; /* first: the lanes hand it back */
	node_txnrec *r;
	uint32_t gid;    /* the group this replica leads */
	uint32_t target; /* the group asked (remote kinds) */
	int kind;
	uint8_t id[16];
	bool commit;     /* T_FINISH_REMOTE: the decision */
	uint32_t dest;   /* the node asked */
	uint8_t req[96]; /* the packed NodeRequest */
	size_t req_len;
	/* The local proposal and what it points to. */
	node_waiter w;
	bool w_init;
	Shoal__TxnStatus status;
	Shoal__TxnFinish finish;
	Shoal__TxnAck ack;
	Shoal__TxnAcks acks;
	Shoal__TxnAck *ackp;
	uint32_t ack_group;
	struct rec_task *next; /* in flight (r->mu) */
} rec_task;

struct node_txnrec {
	node_ship *s;
	uint64_t next_ns; /* the next scan (loop) */
	pthread_mutex_t mu;
	rec_task *tasks; /* in flight */
	uint32_t n_tasks;
	_Atomic uint32_t *hint; /* per group: the leader its last answer named */
	_Atomic uint32_t rr;
	sh_arena scratch; /* loop: a scan's lists */
	/* Statistics. */
	atomic_uint_fast64_t finished, aborted, acked;
};

/* ------------------------------------------------------------------------ */
/* Tasks                                                                     */
/* ------------------------------------------------------------------------ */

/* A new task, unless one of the same (group, id, kind) is in flight or
 * there are too many.  Loop. */
static rec_task *task_new(node_txnrec *r, uint32_t gid, const uint8_t id[16], int kind,
                          uint32_t target)
{
	pthread_mutex_lock(&r->mu);
	bool busy = r->n_tasks >= REC_MAX_TASKS;
	for (rec_task *t = r->tasks; t != NULL && !busy; t = t->next)
		busy = t->gid == gid && t->kind == kind && t->target == target &&
		       memcmp(t->id, id, 16) == 0;
	rec_task *t = busy ? NULL : sh_calloc(1, sizeof(*t));
	if (t != NULL && node_waiter_init(&t->w) != SHOAL_OK) {
		sh_free(t);
		t = NULL;
	}
	if (t != NULL) {
		t->w_init = true;
		t->r = r;
		t->gid = gid;
		t->kind = kind;
		t->target = target;
		memcpy(t->id, id, 16);
		t->next = r->tasks;
		r->tasks = t;
		r->n_tasks++;
	}
	pthread_mutex_unlock(&r->mu);
	return t;
}

static void task_free(rec_task *t)
{
	node_txnrec *r = t->r;
	pthread_mutex_lock(&r->mu);
	for (rec_task **p = &r->tasks; *p != NULL; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			r->n_tasks--;
			break;
		}
	pthread_mutex_unlock(&r->mu);
	if (t->w_init)
		node_waiter_fini(&t->w);
	sh_free(t);
}

static void proposed(node_waiter *w)
{
	rec_task *t = w->data;
	if (w->code != SHOAL_OK && w->code != SHOAL_E_NOT_LEADER &&
	    w->code != SHOAL_E_UNAVAILABLE && w->code != SHOAL_E_OUTCOME_UNKNOWN)
		node_logf(NODE_LOG_WARN, "txn recovery: group %u: %s: %s", t->gid,
		          shoal_err_name(w->code), w->msg);
	sh_free(w->resp);
	w->resp = NULL;
	task_free(t);
}

/* Proposes t's local operation (t->w.op set) on its group; on failure the
 * task ends (found again at the next scan).  Any thread. */
static void propose(rec_task *t)
{
	node_group *g = node_group_get(t->r->s->n, t->gid);
	char msg[SH_ERRMSG_SIZE];
	if (g == NULL) {
		task_free(t);
		return;
	}
	t->w.kind = NODE_WAIT_WRITE;
	t->w.size = 64;
	t->w.cb = proposed;
	t->w.data = t;
	if (node_group_submit(g, &t->w, msg) != SHOAL_OK)
		task_free(t);
}

static void propose_status(rec_task *t)
{
	shoal__txn_status__init(&t->status);
	t->status.id = (ProtobufCBinaryData){16, t->id};
	t->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	t->w.op.op_case = SHOAL__COMMAND_OP__OP_TXN_STATUS;
	t->w.op.txn_status = &t->status;
	propose(t);
}

static void propose_finish(rec_task *t, bool commit)
{
	shoal__txn_finish__init(&t->finish);
	t->finish.id = (ProtobufCBinaryData){16, t->id};
	t->finish.commit = commit;
	t->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	t->w.op.op_case = SHOAL__COMMAND_OP__OP_TXN_FINISH;
	t->w.op.txn_finish = &t->finish;
	atomic_fetch_add(commit ? &t->r->finished : &t->r->aborted, 1);
	propose(t);
}

static void propose_ack(rec_task *t)
{
	shoal__txn_ack__init(&t->ack);
	t->ack.id = (ProtobufCBinaryData){16, t->id};
	t->ack_group = t->target;
	t->ack.groups = &t->ack_group;
	t->ack.n_groups = 1;
	shoal__txn_acks__init(&t->acks);
	t->ackp = &t->ack;
	t->acks.acks = &t->ackp;
	t->acks.n_acks = 1;
	t->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	t->w.op.op_case = SHOAL__COMMAND_OP__OP_TXN_ACKS;
	t->w.op.txn_acks = &t->acks;
	atomic_fetch_add(&t->r->acked, 1);
	propose(t);
}

/* ------------------------------------------------------------------------ */
/* Messages to other groups                                                  */
/* ------------------------------------------------------------------------ */

/* The node to ask about group g. */
static uint32_t dest_for(node_txnrec *r, uint32_t g)
{
	node *n = r->s->n;
	node_group *grp = node_group_get(n, g);
	if (grp != NULL) {
		node_group_status st;
		node_group_status_get(grp, &st);
		if (st.role == RAFT_LEADER)
			return n->id;
		if (st.leader != 0)
			return st.leader;
	}
	uint32_t h = atomic_load(&r->hint[g]);
	if (h != 0)
		return h;
	uint32_t reps[SH_MAP_GROUP_REPLICAS];
	uint32_t nr = sh_place_voters(n->place, g, reps, SH_MAP_GROUP_REPLICAS);
	if (nr > SH_MAP_GROUP_REPLICAS)
		nr = SH_MAP_GROUP_REPLICAS;
	return nr > 0 ? reps[atomic_fetch_add(&r->rr, 1) % nr] : n->id;
}

/* The answer of a remote task.  nng callback thread. */
static void remote_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	rec_task *t = (rec_task *)it;
	node_txnrec *r = t->r;
	Shoal__NodeResponse *nr = NULL;
	if (rv == WIRE_LANE_OK)
		wire_unpack_node_response(NULL, ans, len, &nr, NULL);
	if (whole != NULL)
		nng_msg_free(whole);
	int code = nr == NULL             ? SHOAL_E_UNAVAILABLE
	           : nr->response == NULL ? SHOAL_E_INTERNAL
	                                  : wire_code_from_status(nr->response->status);
	uint32_t state = nr != NULL ? nr->txn_state : 0;
	if (nr != NULL && code == SHOAL_E_NOT_LEADER)
		atomic_store(&r->hint[t->target], nr->leader_node);
	else if (code != SHOAL_OK)
		atomic_store(&r->hint[t->target], 0);
	if (nr != NULL)
		shoal__node_response__free_unpacked(nr, wire_heap_allocator());
	if (code != SHOAL_OK) {
		task_free(t); /* found again at the next scan */
		return;
	}
	if (t->kind == T_STATUS_REMOTE) {
		if (state == ST_TXN_COMMITTED || state == ST_TXN_ABORTED)
			propose_finish(t, state == ST_TXN_COMMITTED);
		else
			task_free(t); /* still PREPARING there: not yet */
		return;
	}
	propose_ack(t); /* the participant finished */
}

/* Sends t's request (packed in t->req) to the group t->target. */
static void send_remote(rec_task *t, Shoal__NodeRequest *nr)
{
	nr->group = t->target;
	size_t n = shoal__node_request__get_packed_size(nr);
	if (n > sizeof(t->req)) {
		task_free(t);
		return;
	}
	t->req_len = shoal__node_request__pack(nr, t->req);
	t->dest = dest_for(t->r, t->target);
	wire_lanes *l = node_ship_lanes_to(t->r->s, t->dest);
	t->item.part[0] = t->req;
	t->item.len[0] = t->req_len;
	t->item.part[1] = NULL;
	t->item.len[1] = 0;
	t->item.deadline = sh_now_ms() + REC_ATTEMPT_MS;
	t->item.done = remote_done;
	if (l == NULL || wire_lanes_submit(l, &t->item) != SHOAL_OK)
		task_free(t);
}

static void ask_status(node_txnrec *r, uint32_t gid, const uint8_t id[16], uint32_t coord)
{
	rec_task *t = task_new(r, gid, id, T_STATUS_REMOTE, coord);
	if (t == NULL)
		return;
	Shoal__TxnStatus st = SHOAL__TXN_STATUS__INIT;
	st.id = (ProtobufCBinaryData){16, t->id};
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.txn_status = &st;
	send_remote(t, &nr);
}

static void send_finish(node_txnrec *r, uint32_t gid, const uint8_t id[16], uint32_t target,
                        bool commit)
{
	rec_task *t = task_new(r, gid, id, T_FINISH_REMOTE, target);
	if (t == NULL)
		return;
	t->commit = commit;
	Shoal__TxnFinish f = SHOAL__TXN_FINISH__INIT;
	f.id = (ProtobufCBinaryData){16, t->id};
	f.commit = t->commit;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.txn_finish = &f;
	send_remote(t, &nr);
}

static void local_status(node_txnrec *r, uint32_t gid, const uint8_t id[16])
{
	rec_task *t = task_new(r, gid, id, T_LOCAL, gid);
	if (t != NULL)
		propose_status(t);
}

/* ------------------------------------------------------------------------ */
/* The scan                                                                  */
/* ------------------------------------------------------------------------ */

uint32_t node_txnrec_plan(uint32_t gid, uint32_t groups, int64_t now_ms, const st_prepared *parts,
                          uint32_t np, const st_txn_record *recs, uint32_t nr,
                          node_txnrec_action *out, uint32_t cap)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < np && n < cap; i++) {
		const st_prepared *p = &parts[i];
		if (now_ms - p->created_ms < NODE_TXN_RECOVER_MS || p->coord_group >= groups)
			continue;
		node_txnrec_action *x = &out[n++];
		memset(x, 0, sizeof(*x));
		memcpy(x->id, p->id, 16);
		x->kind = p->coord_group == gid ? NODE_TXR_LOCAL_STATUS : NODE_TXR_ASK_STATUS;
		x->target = p->coord_group;
	}
	for (uint32_t i = 0; i < nr && n < cap; i++) {
		const st_txn_record *rec = &recs[i];
		if (now_ms - rec->created_ms < NODE_TXN_RECOVER_MS)
			continue;
		if (rec->state == ST_TXN_PREPARING) {
			node_txnrec_action *x = &out[n++];
			memset(x, 0, sizeof(*x));
			memcpy(x->id, rec->id, 16);
			x->kind = NODE_TXR_LOCAL_STATUS;
			x->target = gid;
			continue;
		}
		for (uint32_t k = 0; k < rec->n_parts && n < cap; k++) {
			if (rec->acked[k] || rec->parts[k] == gid || rec->parts[k] >= groups)
				continue;
			node_txnrec_action *x = &out[n++];
			memset(x, 0, sizeof(*x));
			memcpy(x->id, rec->id, 16);
			x->kind = NODE_TXR_SEND_FINISH;
			x->target = rec->parts[k];
			x->commit = rec->state == ST_TXN_COMMITTED;
		}
	}
	return n;
}

static void scan_group(node_txnrec *r, node_group *g, uint32_t gid, int64_t now_ms)
{
	char msg[SH_ERRMSG_SIZE];
	st_env *env = node_group_env(g);
	sh_arena_reset(&r->scratch);
	st_prepared *parts;
	st_txn_record *recs;
	uint32_t np, nr;
	if (st_txn_prepared_list(env, &r->scratch, &parts, &np, msg) != SHOAL_OK ||
	    st_txn_record_list(env, &r->scratch, &recs, &nr, msg) != SHOAL_OK) {
		node_logf(NODE_LOG_WARN, "txn recovery: group %u: %s", gid, msg);
		return;
	}
	uint32_t cap = np + nr * (sh_cluster_group_cap(r->s->conf) < ST_TXN_MAX_PARTS
	                              ? sh_cluster_group_cap(r->s->conf)
	                              : ST_TXN_MAX_PARTS);
	if (cap > REC_MAX_TASKS)
		cap = REC_MAX_TASKS;
	node_txnrec_action *acts = sh_arena_calloc(&r->scratch, cap + 1, sizeof(*acts));
	uint32_t n = acts == NULL ? 0
	                          : node_txnrec_plan(gid, sh_cluster_group_cap(r->s->conf), now_ms,
	                                             parts, np, recs, nr, acts, cap);
	for (uint32_t i = 0; i < n; i++) {
		const node_txnrec_action *x = &acts[i];
		switch (x->kind) {
		case NODE_TXR_LOCAL_STATUS:
			local_status(r, gid, x->id);
			break;
		case NODE_TXR_ASK_STATUS:
			ask_status(r, gid, x->id, x->target);
			break;
		case NODE_TXR_SEND_FINISH:
			send_finish(r, gid, x->id, x->target, x->commit);
			break;
		}
	}
	int64_t next;
	bool any;
	if (st_txn_next_expiry(env, &next, &any, msg) == SHOAL_OK && any && next <= now_ms) {
		static const uint8_t expire_id[16] = {0xff};
		rec_task *t = task_new(r, gid, expire_id, T_LOCAL, gid);
		if (t != NULL) {
			t->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
			t->w.op.op_case = SHOAL__COMMAND_OP__OP_TXN_EXPIRE;
			t->w.op.txn_expire = true;
			propose(t);
		}
	}
	/* Stream records past the retention go even when nothing is written
	 * (an append trims only its own table's head). */
	int64_t oldest;
	if (st_stream_oldest(env, &oldest, &any, msg) == SHOAL_OK && any &&
	    st_stream_expired(env, oldest, now_ms)) {
		static const uint8_t trim_id[16] = {0xfe};
		rec_task *t = task_new(r, gid, trim_id, T_LOCAL, gid);
		if (t != NULL) {
			t->w.op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
			t->w.op.op_case = SHOAL__COMMAND_OP__OP_STREAM_TRIM;
			t->w.op.stream_trim = true;
			propose(t);
		}
	}
}

void node_txnrec_tick(node_txnrec *r, uint64_t now_ns)
{
	if (r == NULL || now_ns < r->next_ns)
		return;
	r->next_ns = now_ns + (uint64_t)REC_SCAN_MS * 1000000u;
	node *n = r->s->n;
	int64_t now_ms = node_wall_ms();
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
		node_group *grp = node_group_get(n, g);
		if (grp == NULL)
			continue;
		node_group_status st;
		node_group_status_get(grp, &st);
		if (st.role == RAFT_LEADER && !st.failed)
			scan_group(r, grp, g, now_ms);
	}
}

int node_txnrec_open(node_ship *s, node_txnrec **out, char *errmsg)
{
	node_txnrec *r = sh_calloc(1, sizeof(*r));
	if (r != NULL)
		r->hint = sh_calloc(sh_cluster_group_cap(s->conf), sizeof(*r->hint));
	if (r == NULL || r->hint == NULL) {
		sh_free(r);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "txn recovery: out of memory");
	}
	r->s = s;
	pthread_mutex_init(&r->mu, NULL);
	sh_arena_init(&r->scratch);
	r->next_ns = node_now_ns() + (uint64_t)REC_SCAN_MS * 1000000u;
	*out = r;
	return SHOAL_OK;
}

void node_txnrec_free(node_txnrec *r)
{
	if (r == NULL)
		return;
	/* The lanes are closed and the groups answered every waiter: a task
	 * left was dropped on a path that could not free it; free it now. */
	while (r->tasks != NULL) {
		rec_task *t = r->tasks;
		r->tasks = t->next;
		if (t->w_init)
			node_waiter_fini(&t->w);
		sh_free(t);
	}
	sh_arena_fini(&r->scratch);
	pthread_mutex_destroy(&r->mu);
	sh_free(r->hint);
	sh_free(r);
}

void node_txnrec_metrics(node_txnrec *r, node_appendf_fn appendf, void *buf)
{
	if (r == NULL)
		return;
	appendf(buf,
	        "# HELP shoal_txn_recovered_total Transaction parts finished by recovery "
	        "(the router that ran them was gone), and acknowledgements it collected.\n"
	        "# TYPE shoal_txn_recovered_total counter\n"
	        "shoal_txn_recovered_total{action=\"commit\"} %" PRIu64 "\n"
	        "shoal_txn_recovered_total{action=\"abort\"} %" PRIu64 "\n"
	        "shoal_txn_recovered_total{action=\"ack\"} %" PRIu64 "\n",
	        (uint64_t)atomic_load(&r->finished), (uint64_t)atomic_load(&r->aborted),
	        (uint64_t)atomic_load(&r->acked));
}
