/*
 * fsm.h -- the replicated state machine of one storage group (node/, prefix
 * node_).  It is the only code that writes a group's LMDB environment.
 *
 * A Raft entry is a packed shoal.Command (proto/cluster.proto): a batch of
 * operations from one proposer.  Applying an entry runs every operation
 * through the storage engine inside ONE st_txn and records the entry's Raft
 * index in the same LMDB transaction ("the applied index is stored with the
 * data, so replay after a crash is idempotent": an entry whose index is at or
 * below the stored applied index is skipped).  The entry's index is
 * raft_last_applied(raft) + 1 at apply time (raft 0.15 increments
 * last_applied only after fsm->apply returns).
 *
 * Operations that fail with a client error (condition failed, validation,
 * ...) produce that error as their result and change nothing; the batch goes
 * on.  An environmental failure (LMDB full, I/O error, out of memory) aborts
 * the transaction and makes the FSM fail for good (sticky error, as LMDB's
 * MDB_TXN_ERROR): every later apply fails, and the node stops serving the
 * group rather than drift from its peers.
 *
 * The environment runs with MDB_NOSYNC (and MDB_WRITEMAP): the Raft log is
 * the durable record.  After a process crash LMDB holds every commit (the
 * page cache kept them) and may only be behind the log; Raft restores the
 * last snapshot and replays the entries after it, and the applied-index check
 * makes the replay exact (restore() skips the load when the local environment
 * is already at or past the snapshot's index).  After a machine crash LMDB
 * may be torn -- pages flushed in any order, a meta page pointing at pages
 * never written -- so it is not trusted: the environment is opened
 * rebuildable (storage/env_trust.c detects the crash by the kernel's boot id
 * and a clean-close marker), comes up empty, and the same restore-and-replay
 * fills it from Raft's fsynced files.  Until it has caught up with the
 * leader the group refuses eventually consistent reads (node_group_rebuilding).
 *
 * Snapshots (raft_fsm version 3): snapshot() opens an LMDB read transaction
 * (a consistent view at the current applied index) on the loop thread;
 * snapshot_async() serialises the catalog, meta and data databases from that
 * view on a worker thread; snapshot_finalize() frees the buffers and ends the
 * read transaction.  The format is documented at the top of fsm_snapshot.c.
 *
 * Results: only the proposer needs them.  Before raft_apply the proposer
 * registers a node_batch under the Command's batch_id; when the entry is
 * applied on the proposer, apply finds the batch and stores each operation's
 * packed shoal.NodeResponse in it.  Other replicas compute and drop them.
 *
 * Threads: every function here runs on the group's libuv loop thread, except
 * node_fsm_env (any thread: LMDB read transactions are thread-safe with
 * MDB_NOTLS) and snapshot_async (raft's worker thread).
 */
#ifndef SHOAL_NODE_FSM_H
#define SHOAL_NODE_FSM_H

#include <raft.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "proto/cluster.pb-c.h"
#include "storage/index.h"
#include "storage/storage.h"

typedef struct node_fsm node_fsm;

typedef struct node_batch {
	uint64_t id;    /* the Command's batch_id */
	uint32_t n_ops; /* operations in the Command */
	/* Filled by apply on the proposer: results[i] is a packed
	 * shoal.NodeResponse (sh_malloc'd, owned by the batch: free with
	 * node_batch_fini), NULL if the entry was never applied here. */
	uint8_t **results;
	size_t *result_lens;
	bool applied;            /* apply ran for this batch on this node */
	struct node_batch *next; /* the FSM's registry (private) */
	void *user;              /* the proposer's */
} node_batch;

/* Allocates the result slots of a batch of n_ops operations. */
int node_batch_init(node_batch *b, uint64_t id, uint32_t n_ops);
void node_batch_fini(node_batch *b);

/* Opens (creating) the LMDB environment in dir (which must exist) for group
 * `group` on node `node_id`. */
int node_fsm_open(const char *dir, uint32_t group, uint32_t node_id, node_fsm **out, char *errmsg);
struct node_cap;
/* Where the proposer's applies charge the units of its writes (capacity.c;
 * NULL: nowhere, as in unit tests without a node). */
void node_fsm_set_cap(node_fsm *f, struct node_cap *cap);
/* The hash range of the static partition the group holds (has false:
 * none), for the stream shards' bookkeeping at a move's fence.  Before the
 * first apply. */
void node_fsm_set_static(node_fsm *f, bool has, uint64_t lo, uint64_t hi);
/* Group 0: fn(arg, map, len) is called with each cluster map the replica
 * applies (the encoded map, valid during the call), on the applying thread:
 * the node's own map follows its replica at once rather than at its next
 * look (mapsync.c), so that a map_get right after a change has it.  Before
 * the first apply. */
typedef void (*node_fsm_map_fn)(void *arg, const uint8_t *map, size_t len);
void node_fsm_set_map_hook(node_fsm *f, node_fsm_map_fn fn, void *arg);
/* Closes the environment. Raft must be closed first. */
void node_fsm_close(node_fsm *f);

/* The struct raft_fsm (version 3) to pass to raft_init / raft_fixture_grow. */
struct raft_fsm *node_fsm_raft(node_fsm *f);
/* Tells the FSM which raft instance drives it (for the entry index). Call
 * before raft_start. */
void node_fsm_attach(node_fsm *f, struct raft *r);

/* The storage environment, for reads. */
st_env *node_fsm_env(node_fsm *f);

/* SHOAL_OK while healthy; after an apply failed, its code and message. */
int node_fsm_failed(node_fsm *f, char *errmsg);

/* A moving average of the sizes of the entries applied (bytes; 0 before
 * the first).  Loop thread. */
size_t node_fsm_entry_bytes(const node_fsm *f);

/* Packs a Command into a buffer for raft_apply (memory from raft_malloc:
 * raft takes ownership on a successful raft_apply). */
int node_fsm_encode(const Shoal__Command *cmd, struct raft_buffer *buf, char *errmsg);

/* Proposer side (loop thread): register a batch before raft_apply of its
 * Command; unregister after the apply callback fired or raft_apply failed. */
void node_fsm_register(node_fsm *f, node_batch *b);
void node_fsm_unregister(node_fsm *f, node_batch *b);

/* ------------------------------------------------------------------------ */
/* The replica scrub (node/scrub.c has the protocol)                         */
/* ------------------------------------------------------------------------ */

/* Applying a Scrub op hashes a range of the environment inside the entry's
 * transaction (st_txn_scrub), so every replica hashes the same state at the
 * same Raft index; the FSM keeps the last NODE_SCRUB_RING results in memory.
 * Entries skipped as replay (already in LMDB) compute nothing. */
#define NODE_SCRUB_RING    16
#define NODE_SCRUB_KEY_MAX 520 /* a scrub key: 1 byte + an LMDB key (<= 511) */

typedef struct node_scrub_result {
	uint32_t proposer;
	uint64_t seq;
	uint64_t index; /* the Raft index it was applied at */
	uint32_t count;
	uint64_t hash;
	uint8_t start[NODE_SCRUB_KEY_MAX], end[NODE_SCRUB_KEY_MAX];
	size_t start_len, end_len; /* end_len 0: the end of the key space */
} node_scrub_result;

/* This replica's result of scrub (proposer, seq) into *out; false if it has
 * none.  Any thread. */
bool node_fsm_scrub_result(node_fsm *f, uint32_t proposer, uint64_t seq, node_scrub_result *out);
/* The scrub found this replica diverged from its peers and it cannot be
 * rebuilt: the FSM fails for good (sticky) with msg, so the replica stops
 * serving and hands leadership away (node_group_publish).  Loop thread. */
void node_fsm_fail_diverged(node_fsm *f, const char *msg);

/* ------------------------------------------------------------------------ */
/* Catalog and index messages (shared with the request handlers)             */
/* ------------------------------------------------------------------------ */

/* Items per IndexBackfill step when the operation does not say. */
#define NODE_BACKFILL_STEP 256

/* IndexApply -> st_delta[ia->n_deltas] (d: room for them), borrowing the
 * message's bytes.  SHOAL_E_VALIDATION unless every delta has a key, an index
 * id in 1..65535 and a seq above the previous one's (and above 0); then d
 * is left as it was. */
int node_index_deltas_from_pb(const Shoal__IndexApply *ia, st_delta *d, char *errmsg);

/* An index batch refused for a GSI range (st_index_apply, or the leader's
 * st_index_apply_check) into nr->refused, from a: the source holds the
 * range's deltas back (node/shipq.c).  SHOAL_E_NOMEM. */
int node_index_refused_to_pb(sh_arena *a, const st_index_refusal *ref, Shoal__NodeResponse *nr,
                             char *errmsg);

#endif
