/*
 * fsm_int.h -- internals shared by node/fsm.c, fsm_apply.c and
 * fsm_snapshot.c (private to the state machine; node/fsm.h is the contract).
 *
 * fsm.c          open/close, the raft_fsm table, the batch registry,
 *                node_fsm_encode, the sticky failure
 * fsm_apply.c    apply: one Raft entry (a shoal.Command) -> one st_txn
 * fsm_snapshot.c snapshot, snapshot_async, snapshot_finalize, restore, and
 *                the snapshot format
 */
#ifndef SHOAL_NODE_FSM_INT_H
#define SHOAL_NODE_FSM_INT_H

#include <pthread.h>

#include "common/arena.h"
#include "common/errors.h"
#include "node/fsm.h"
#include "storage/snapshot.h"
#include "storage/storage.h"

struct node_fsm {
	struct raft_fsm rf; /* rf.data == this */
	st_env *env;        /* owned */
	struct raft *raft;  /* borrowed (node_fsm_attach); gives the entry index */
	uint32_t group;
	uint32_t node_id;
	uint64_t applied; /* == st_env_applied(env), cached; loop thread only */
	size_t entry_avg; /* moving average of entry sizes (node_fsm_entry_bytes) */
	int failed;       /* SHOAL_OK, or the code of the apply that failed */
	char failed_msg[SH_ERRMSG_SIZE];
	node_batch *batches; /* registered batches (proposer side), newest first */
	sh_arena scratch;    /* apply: reset per operation */
	sh_arena entry;      /* apply: the unpacked Command, reset per entry */
	/* Snapshot in progress: the view opened by snapshot() and walked by
	 * snapshot_async(); ended by snapshot_finalize().  Only the worker
	 * thread touches it between those two calls. */
	st_view *snap;
	struct node_cap *cap; /* node_fsm_set_cap */
	/* The static partition this group holds (node_fsm_set_static): its
	 * stream shard is the implicit one (storage/stream.h "Shards"). */
	bool static_has;
	uint64_t static_lo, static_hi;
	/* Group 0: told every cluster map this replica applies
	 * (node_fsm_set_map_hook). */
	node_fsm_map_fn map_hook;
	void *map_hook_arg;
	/* Scrub results, newest at scrub_next - 1 (apply writes on the loop,
	 * node_fsm_scrub_result reads from any thread: scrub_mu). */
	pthread_mutex_t scrub_mu;
	node_scrub_result scrub[NODE_SCRUB_RING];
	uint32_t scrub_next, scrub_n;
};

/* One operation being applied (fsm_apply.c, fsm_txn.c). */
typedef struct op_ctx {
	node_fsm *f;
	st_txn *txn;
	sh_arena *a;              /* f->scratch, reset per operation */
	Shoal__Response *r;       /* NULL: no result wanted (not the proposer) */
	Shoal__NodeResponse *nr;  /* holds r */
	const st_value *old_item; /* with SHOAL_E_CONDITION_FAILED */
	int result_code;          /* a failure building the result of a done write */
	const uint8_t *raw;       /* the result is these recorded bytes (a retry) */
	size_t raw_len;
	char msg[SH_ERRMSG_SIZE]; /* the operation's error text */
} op_ctx;

/* How long a transaction's record is kept after every participant applied
 * the decision: with a ClientRequestToken DynamoDB's 10 minutes (a retry
 * gets the recorded answer); without one -- and a participant's marker that
 * it finished, a tombstone, a single-item write's token with its first
 * answer -- long enough to outlive every resend: the router's retries end
 * within its 10 s deadline, libshoal's within its 30 s, and a prepare is
 * refused 14 s after it was sent.  (A write token for every write kept 10
 * minutes would be millions of records at full write rate.) */
#define NODE_TXN_TOKEN_MS   (10 * 60 * 1000)
#define NODE_TXN_KEEP_MS    (60 * 1000)
#define NODE_WRITE_TOKEN_MS NODE_TXN_KEEP_MS

/* The proposer charges a write's units (wire_write_partition_units, `times`
 * over: 2 for a transaction's) to its table's partition (capacity.c); key
 * is the request's item or key, for the hot-key sketch.  No-op elsewhere. */
void node_fsm_charge_write(op_ctx *c, const char *table, const st_write_result *res,
                           const st_value *key, double times);

/* fsm_txn.c: the transaction operations (router/txn.c has the protocol). */
int node_op_txn_write(op_ctx *c, const Shoal__TxnWrite *w);
/* pmove.c: part_out, part_fence, part_ingest, part_own, part_purge,
 * part_abort (storage/parts.h). */
int node_op_part(op_ctx *c, const Shoal__CommandOp *op);
int node_op_txn_decide(op_ctx *c, const Shoal__TxnDecide *d);
int node_op_txn_finish(op_ctx *c, const Shoal__TxnFinish *x);
int node_op_txn_acks(op_ctx *c, const Shoal__TxnAcks *x);
int node_op_txn_status(op_ctx *c, const Shoal__TxnStatus *x);
int node_op_txn_expire(op_ctx *c);
/* Whether op's answer is built on every replica (it is recorded). */
bool node_op_txn_answers(const Shoal__CommandOp *op);

/* Makes the FSM fail for good (sticky) with code and a message; returns the
 * raft error code that apply/restore should return.  Loop thread. */
int node_fsm_fail(node_fsm *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Keeps r as the newest scrub result (the oldest of the ring goes).  Loop. */
void node_fsm_scrub_record(node_fsm *f, const node_scrub_result *r);

/* A Shoal code as a raft error code (for apply/snapshot/restore returns). */
int node_fsm_raft_code(int code);

/* True for the codes that mean "the environment failed" (out of memory, I/O,
 * map full, internal damage) as opposed to a client's error. */
bool node_fsm_env_error(int code);

/* The raft_fsm callbacks (fsm_apply.c, fsm_snapshot.c). */
int node_fsm_apply_cb(struct raft_fsm *rf, const struct raft_buffer *buf, void **result);
int node_fsm_snapshot_cb(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n_bufs);
int node_fsm_snapshot_async_cb(struct raft_fsm *rf, struct raft_buffer *bufs[], unsigned *n_bufs);
int node_fsm_snapshot_finalize_cb(struct raft_fsm *rf, struct raft_buffer *bufs[],
                                  unsigned *n_bufs);
int node_fsm_restore_cb(struct raft_fsm *rf, struct raft_buffer *buf);

#endif
