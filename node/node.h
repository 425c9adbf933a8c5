/*
 * node.h -- the internals of shoal-node (prefix node_), shared by the files
 * of node/ and by tests.  node/fsm.h is the state machine's contract; this
 * header is everything around it: the Raft transport, the Raft groups on one
 * libuv loop, the nng request server, metrics, logging and the process.
 *
 * The shape of the process:
 *
 *     router --nng REQ/REP--> server.c: nng contexts, aio state machines
 *                               |  reads (any_replica): storage, in the callback
 *                               |  writes, consistent reads: node_group_submit
 *                               v
 *                             group.c on the loop thread: group commit into
 *                             one Command per group, raft_apply / raft_barrier
 *                               |
 *                             raft (canonical/raft 0.15) + fsm.c + LMDB,
 *                             peers over transport.c (raft_uv_tcp + NODELAY)
 *                               |
 *                             ship.c on the loop: on each led group, index
 *                             deltas from the outbox --nng REQ--> the target
 *                             group's leader (index_ship, server.c there);
 *                             OutboxTrim and backfill steps through group.c
 *
 * Threads.  ONE libuv loop thread runs every raft instance of the node and
 * every function marked "loop".  nng's callback threads (the server's
 * contexts, metrics) and anything marked "any thread" may run concurrently.
 * The loop publishes each group's status through atomics; the server hands
 * work to the loop through a mutex-protected queue and uv_async_send, and
 * the loop answers through the node_waiter's completion callback.
 *
 * Ownership is stated at each declaration.  Errors are common/errors.h codes
 * with a message in errmsg (SH_ERRMSG_SIZE bytes, may be NULL); raft, uv, nng
 * and errno codes are converted where they are received.
 */
#ifndef SHOAL_NODE_NODE_H
#define SHOAL_NODE_NODE_H

#include <pthread.h>
#include <raft.h>
#include <raft/uv.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/arena.h"
#include "common/cluster.h"
#include "common/cluster_map.h"
#include "common/placement.h"
#include "common/tls.h"
#include "common/errors.h"
#include "node/fsm.h"
#include "proto/ops.h"
#include "proto/cluster.pb-c.h"
#include "proto/shoal.pb-c.h"

typedef struct node node;
typedef struct node_group node_group;
typedef struct node_server node_server;
typedef struct node_metrics node_metrics;
typedef struct node_ship node_ship;
typedef struct node_cap node_cap;
typedef struct node_scrub node_scrub;
typedef struct node_ttl node_ttl;

/* ------------------------------------------------------------------------ */
/* Raft settings (NOTES.md: rare snapshots with a long trailing log; NODELAY) */
/* ------------------------------------------------------------------------ */

#define NODE_ELECTION_TIMEOUT_MS 1000
/* The group's preferred replica (the map's first voter) campaigns
 * sooner, so that leaders spread over the nodes (group.c). */
#define NODE_ELECTION_TIMEOUT_PREFERRED_MS 700
#define NODE_HEARTBEAT_TIMEOUT_MS          100
#define NODE_SNAPSHOT_THRESHOLD            65536
#define NODE_SNAPSHOT_TRAILING             8192
/* raft 0.15 keeps every entry since the last snapshot, and the trailing ones
 * after it, in memory, and counts both in entries; a group's entries range
 * from ~100 bytes (a lone write) to megabytes (a batch).  So the counts
 * follow the entries' average size to keep each group's in-memory log near
 * these budgets (group.c, tune_snapshots), between the minimums and the
 * counts above.  A snapshot writes all of the group's data, so past 64 MiB
 * of data the log's budget is half the data, up to NODE_LOG_BUDGET_MAX: a
 * group growing to S bytes then writes ~3 S of snapshots, not S^2 / 64 MiB
 * (a snapshot's buffers hold the whole data in memory meanwhile anyway:
 * fsm_snapshot.c).  Measured with bench-move (256 MiB, 2026-11-28): with
 * the fixed 32 MiB the load's group snapshotted every ~8 s, each 1.5-5 s of
 * flushing and writing on every replica, and a move's target four times;
 * the writes' applies stalled up to 300 ms meanwhile
 * (in page faults and I/O: a fifth of it CPU). */
#define NODE_LOG_BUDGET             (32u << 20)
#define NODE_LOG_BUDGET_MAX         (256u << 20)
#define NODE_TRAILING_BUDGET        (8u << 20)
#define NODE_SNAPSHOT_THRESHOLD_MIN 256
#define NODE_SNAPSHOT_TRAILING_MIN  64
#define NODE_CONNECT_RETRY_MS       250
/* Raft log segments: raft 0.15 keeps an open segment and two prepared ones
 * per group, allocated at full size, and when a segment fills it destroys
 * the segment's kernel AIO context on the loop thread (io_destroy waits for
 * RCU grace periods: 30-45 ms here, during which every group of the node
 * stalls).  Its default, 8 MiB, did that every few seconds under load
 * (PutItem p99.9 34 ms); 32 MiB makes it four times rarer (p99.9 7-10 ms)
 * for 96 MiB of preallocated disk per group.  [cluster] raft_segment_mb. */
#define NODE_RAFT_SEGMENT_MB 32
/* A leader that is not its group's preferred replica hands leadership back
 * to it once it has led this long; after a try that left it leader it waits
 * before the next, from the first wait doubling up to the last (group.c,
 * "Preferred leaders"). */
#define NODE_REBALANCE_AFTER_MS       3000
#define NODE_REBALANCE_BACKOFF_MIN_MS 5000
#define NODE_REBALANCE_BACKOFF_MAX_MS 60000

/* Group commit: at most this many operations, and about this many bytes of
 * request, in one Raft entry (a single larger operation goes alone). */
#define NODE_BATCH_MAX_OPS   256
#define NODE_BATCH_MAX_BYTES (4u * 1024 * 1024)
/* Group commit: at most this many Commands of a group proposed and not yet
 * applied; writes arriving meanwhile accumulate into the next Command.  One:
 * on the cluster benchmark (64 puts in flight on 2 CPUs) two Commands in
 * flight made entries half as large and cost more CPU per write for no
 * more throughput (12.0-12.7k vs 13.0-13.2k puts/s, same session). */
#define NODE_MAX_INFLIGHT 1

/* nng: the largest message accepted (NNG_OPT_RECVMAXSZ) and the default
 * number of server contexts (requests handled at once; no thread each). */
#define NODE_RECV_MAX        (16u * 1024 * 1024)
#define NODE_DEFAULT_WORKERS 128
/* A reply not sent within this long is given up and its connection closed
 * (server.c): every caller's own deadline is shorter. */
#define NODE_REPLY_SEND_MS 5000
/* A NodeRequest batch holds at most this many requests; a batch member
 * whose arena grew past NODE_BATCH_ARENA_KEEP frees it when done.  Idle
 * members are pooled for the next batch: at most NODE_BATCH_POOL_KEEP of
 * them, holding at most NODE_BATCH_POOL_BYTES of arenas; those beyond are
 * freed when their batch ends. */
#define NODE_BATCH_MAX_MEMBERS 1024
#define NODE_BATCH_ARENA_KEEP  (256u * 1024)
#define NODE_BATCH_POOL_KEEP   256
#define NODE_BATCH_POOL_BYTES  (16u * 1024 * 1024)

/* ------------------------------------------------------------------------ */
/* Logging (log.c)                                                           */
/* ------------------------------------------------------------------------ */

/* Log lines go to stderr, or to the file given to node_log_open, one line per
 * call, prefixed with a UTC timestamp, the node id and the level:
 *   2024-05-01T12:00:00.123Z node 1 INFO group 2: leader (term 3)
 * Any thread. */
enum node_log_level { NODE_LOG_DEBUG, NODE_LOG_INFO, NODE_LOG_WARN, NODE_LOG_ERROR };

/* Opens `path` for appending (NULL: stderr) and remembers the node id for the
 * prefix.  Call once, before other threads log. */
int node_log_open(const char *path, uint32_t node_id, char *errmsg);
void node_log_close(void);
/* The log's file descriptor (2 without --log), for the crash report. */
int node_log_fd(void);
/* Messages below `level` are dropped (default INFO; $SHOAL_LOG_DEBUG=1 in
 * the environment enables DEBUG). */
void node_log_set_level(enum node_log_level level);
void node_logf(enum node_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line a peer can cause at will (a refused connection) is logged at most
 * once per NODE_LOG_EVERY_MS per budget, with how many were left out since:
 * a stranger must not fill the disk.  node_log_allow says whether to log now
 * (*skipped: the lines left out since the last one).  One thread per budget. */
#define NODE_LOG_EVERY_MS 10000
typedef struct node_log_budget {
	uint64_t last_ms, skipped;
	bool logged;
} node_log_budget;
bool node_log_allow(node_log_budget *b, uint64_t now_ms, uint64_t *skipped);

/* ------------------------------------------------------------------------ */
/* Raft transport (transport.c)                                              */
/* ------------------------------------------------------------------------ */

/*
 * Initialises *t as a raft_uv_transport that wraps raft's stock TCP
 * transport (raft_uv_tcp_init) and sets TCP_NODELAY on every stream it hands
 * to raft: accepted ones (the accept callback is wrapped) and connected ones
 * (each connect request is wrapped in a small request of ours).  close
 * forwards to the TCP transport.  Pass t to raft_uv_init; after raft has
 * closed (raft_close's callback fired), release it with
 * node_transport_close.  Loop thread.  Returns SHOAL_OK or SHOAL_E_NOMEM.
 *
 * With tls (the node's, not NULL when the cluster file has [tls]) the
 * transport is transport_tls.c's instead: raft's streams are socketpairs
 * whose other ends the loop moves through mutually authenticated TLS
 * connections (mbedtls), with a handshake of ours whose address length is
 * bounded before it is read; a peer's certificate must be the node's it
 * says it is.
 */
int node_transport_init(struct raft_uv_transport *t, uv_loop_t *loop, const sh_tls *tls,
                        char *errmsg);
/* "host:port" (or "[v6]:port") into host and port; 0, or -1 when it is not
 * one (transport.c, for both transports). */
int node_split_hostport(const char *address, char host[SH_ADDR_MAX], char port[8]);
/* Resolves address ("host:port", synchronously) and binds and listens on
 * listener (initialised) with cb; 0 or a libuv error, errmsg saying what. */
int node_tcp_listen(uv_tcp_t *listener, const char *address, uv_connection_cb cb, char *errmsg,
                    size_t size);
/* Both transports' TCP sockets' TCP_USER_TIMEOUT: bytes the peer has not
 * acknowledged for this long end the connection (a cut network, a peer
 * machine gone without a reset), and raft connects again -- not after
 * TCP's retransmissions have backed off to minutes apart.  Raft's
 * heartbeats keep bytes in flight, so an idle group is covered too. */
#define NODE_RAFT_UNACKED_MS 10000
/* TCP_NODELAY (Nagle and delayed ACKs: 40 ms a round trip) and the user
 * timeout above on a Raft connection's socket; a failure is logged ("what":
 * "accepted", "outgoing") and otherwise ignored.  Loop thread. */
void node_tcp_options(uv_tcp_t *tcp, const char *what);
/* transport_tls.c (node_transport_init/close call these). */
int node_transport_tls_init(struct raft_uv_transport *t, uv_loop_t *loop, const sh_tls *tls,
                            char *errmsg);
void node_transport_tls_free(struct raft_uv_transport *t);
/* Frees what node_transport_init allocated; t must be closed (its close
 * callback fired) or never have been init'ed by raft. */
void node_transport_close(struct raft_uv_transport *t);

/* ------------------------------------------------------------------------ */
/* Waiting for the loop: the hand-off between server workers and groups      */
/* ------------------------------------------------------------------------ */

typedef enum node_wait_kind {
	NODE_WAIT_WRITE,   /* propose `op` through Raft, answer with its result */
	NODE_WAIT_BARRIER, /* wait for a Raft barrier (consistent read) */
	NODE_WAIT_MEMBER,  /* one Raft membership change (member.c) */
} node_wait_kind;

/*
 * One request waiting for the loop thread.  Its owner (a server context)
 * reuses it for every request it handles.  Between node_group_submit and
 * completion the loop thread owns the fields below `op`; the owner must keep
 * everything `op` points to alive until completion (the loop packs it into
 * the Raft entry).
 *
 * Completion: with `cb` set, the loop fills the result fields and calls
 * cb(w) on the loop thread (w may be reused from inside cb); without it,
 * the owner blocks in node_waiter_wait.
 */
typedef struct node_waiter {
	node_wait_kind kind;
	Shoal__CommandOp op; /* WRITE: the operation; submessages borrowed */
	size_t size;         /* WRITE: estimate of op's encoded size */
	/* MEMBER: what to make so (Shoal__MemberChange__Action), of which
	 * node, at which Raft address ("" : from the placement). */
	int member_action;
	uint32_t member_node;
	char member_address[SH_ADDR_MAX];
	void (*cb)(struct node_waiter *w); /* loop: completion, or NULL */
	void *data;                        /* for cb */

	/* Completion (written by the loop under mu, then done = true). */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int code;        /* SHOAL_OK, or why the request failed */
	uint32_t leader; /* with SHOAL_E_NOT_LEADER: believed leader, 0 unknown */
	char msg[SH_ERRMSG_SIZE];
	uint8_t *resp; /* WRITE and SHOAL_OK: the op's packed NodeResponse
	                * (sh_malloc'd; the caller frees it with sh_free) */
	size_t resp_len;

	struct node_waiter *next; /* the group's queue (loop/queue private) */
} node_waiter;

int node_waiter_init(node_waiter *w);
void node_waiter_fini(node_waiter *w);
/* Blocks until the loop completed the request; returns w->code.  Worker
 * thread. */
int node_waiter_wait(node_waiter *w);

/* Transactions (router/txn.c has the protocol): a part prepared or a record
 * PREPARING this long after the entry that created it is recovered -- the
 * record decided ABORTED, the part asked about (txn_recover.c) -- on the
 * assumption that the router that ran it is gone.  The router gives up on
 * its prepares before this (router/txn.c, TXN_PREPARE_MS). */
#define NODE_TXN_RECOVER_MS 5000

/* What transaction recovery does in group gid (the replica leads it) at
 * now_ms, given its prepared parts and open records (pure; txn_recover.c
 * carries the actions out): */
typedef enum node_txnrec_kind {
	NODE_TXR_LOCAL_STATUS, /* propose TxnStatus here: decides ABORTED if still open */
	NODE_TXR_ASK_STATUS,   /* TxnStatus to the coordinator `target`; by its answer,
	                        * propose TxnFinish here */
	NODE_TXR_SEND_FINISH,  /* TxnFinish{commit} to participant `target`; when it
	                        * answers, propose TxnAck{target} here */
} node_txnrec_kind;

typedef struct node_txnrec_action {
	node_txnrec_kind kind;
	uint8_t id[16];
	uint32_t target;
	bool commit;
} node_txnrec_action;

/* Fills out (at most cap) and returns the count. */
uint32_t node_txnrec_plan(uint32_t gid, uint32_t groups, int64_t now_ms, const st_prepared *parts,
                          uint32_t np, const st_txn_record *recs, uint32_t nr,
                          node_txnrec_action *out, uint32_t cap);

/* ------------------------------------------------------------------------ */
/* Raft groups (group.c)                                                     */
/* ------------------------------------------------------------------------ */

/*
 * A group's status as published by the loop after every loop iteration
 * (node_group_publish), for any thread.  role is RAFT_UNAVAILABLE,
 * RAFT_FOLLOWER, RAFT_CANDIDATE or RAFT_LEADER.
 */
typedef struct node_group_status {
	int role;
	uint64_t term;
	uint64_t commit;
	uint64_t applied;
	uint32_t leader;             /* believed leader node id, 0 unknown */
	uint64_t pending;            /* writes queued or in flight */
	uint64_t snapshot_index;     /* raft's last snapshot (0: none yet) */
	uint32_t snapshot_threshold; /* entries between snapshots (tune_snapshots) */
	uint64_t entry_bytes;        /* moving average of entry sizes */
	bool failed;                 /* the FSM failed: the replica no longer serves */
	char error[SH_ERRMSG_SIZE];  /* with failed: why */
} node_group_status;

/* "leader", "follower", "candidate" or "unavailable". */
const char *node_role_name(int role);

/*
 * Opens group `gid` of node n: creates <n->dir>/group-<gid>/ and its lmdb/,
 * opens the FSM, raft_uv_init with our transport, raft_init (id = node id,
 * address = the group's Raft endpoint of this node), applies the Raft
 * settings above, bootstraps with the group's replicas on first start
 * (RAFT_CANTBOOTSTRAP: already bootstrapped), attaches the FSM and starts
 * raft.  Loop thread, before or inside uv_run.
 *
 * On success *out is the running group.  On failure, if raft was already
 * initialised *out is still set and the group must be closed
 * (node_group_close) and freed like a running one; otherwise *out is NULL.
 */
int node_group_open(node *n, uint32_t gid, node_group **out, char *errmsg);

/* As node_group_open, with `bootstrap` saying whether raft_bootstrap may
 * run (the cluster's birth only: node.c decides, see "Bootstrap" there);
 * without it raft starts with whatever its directory holds -- nothing for
 * a new replica, which then waits for its leader's entries or snapshot
 * (member.c). */
int node_group_open_ex(node *n, uint32_t gid, bool bootstrap, node_group **out, char *errmsg);

/* Begins closing (loop): fails queued requests with SHOAL_E_UNAVAILABLE,
 * refuses new ones, closes raft.  cb fires (loop) once raft has closed; the
 * group's storage stays open for readers until node_group_free. */
void node_group_close(node_group *g, void (*cb)(node_group *g));
/* Closes the FSM and frees the group.  Closed groups only, with no reader
 * left (the server stopped).  Any thread. */
void node_group_free(node_group *g);

uint32_t node_group_id(const node_group *g);
node *node_group_owner(const node_group *g);

/*
 * Lifetime of a group struct once the map moves the group away (node.c,
 * "Groups follow the map"): n->groups[g] is cleared (atomic store) when the
 * group starts closing, the struct goes to the node's graveyard and is
 * freed -- storage closed, then its directory deleted -- only once it has
 * been closed for NODE_GROUP_GRACE_MS AND no request holds it.  Requests
 * from other threads hold it between node_group_acquire and
 * node_group_release (one atomic add each); loop-side users (shipper,
 * scrub, TTL, recovery) look it up again on every tick, which the grace
 * covers.  Any thread.
 */
#define NODE_GROUP_GRACE_MS 10000
node_group *node_group_acquire(node *n, uint32_t gid);
void node_group_release(node_group *g);
/* Requests holding g (node_group_acquire). */
uint32_t node_group_users(node_group *g);
/* Loop: whether g's raft has closed (its close callback ran), and when
 * (node_now_ns). */
bool node_group_closed(const node_group *g);
uint64_t node_group_closed_ns(const node_group *g);

/* member.c (loop): starts the membership change of waiter w (kind MEMBER)
 * on g, or answers it at once. */
void node_member_start(node_group *g, node_waiter *w);
/* member.c (loop, from node_group_publish): a pending TRANSFER's outcome. */
void node_member_publish(node_group *g);
/* Any thread: fills gs->members and gs->last_index when this replica led
 * the group at its last publish (arena a). */
int node_group_members(node_group *g, sh_arena *a, Shoal__GroupStatus *gs);

/* Hands a waiter to the loop (any thread): queues it and wakes the loop.
 * SHOAL_E_UNAVAILABLE (and nothing queued) when the group is closing. */
int node_group_submit(node_group *g, node_waiter *w, char *errmsg);

/* Loop: proposes every queued write (group commit) and issues one barrier
 * for the queued consistent reads. */
void node_group_flush(node_group *g);
/* Loop: publishes the status for other threads and logs role changes. */
void node_group_publish(node_group *g);

/* Loop: whether this replica is the group's leader right now (raft_state),
 * with its term in *term; false while closing. */
bool node_group_leading(node_group *g, uint64_t *term);
/* Loop: raft_last_applied of the group (0 while closing). */
uint64_t node_group_last_applied(node_group *g);

/* Any thread: the last published status. */
void node_group_status_get(node_group *g, node_group_status *out);
/* Any thread: SHOAL_OK, or SHOAL_E_UNAVAILABLE when the replica failed or is
 * closing (with the reason in errmsg). */
int node_group_health(node_group *g, char *errmsg);
/* True while the group's storage is being rebuilt from Raft after it was
 * not trusted at open (node/fsm.h): it serves no eventually consistent
 * read.  Any thread. */
bool node_group_rebuilding(node_group *g);
/* The code its state machine failed with (SHOAL_OK: it has not).  Any thread. */
int node_group_failure(node_group *g);
/* Any thread: the group's storage, for reads (valid until node_group_free). */
st_env *node_group_env(node_group *g);
/* The group's state machine (scrub results, the scrub's sticky failure;
 * valid until node_group_free) and its directory.  Any thread. */
node_fsm *node_group_fsm(node_group *g);
const char *node_group_dir(const node_group *g);

/* ------------------------------------------------------------------------ */
/* Operations, statistics and metrics (server.c, metrics.c)                  */
/* ------------------------------------------------------------------------ */

/* Every operation a node knows, for the dispatch table and metrics: the
 * client operations of the registry (proto/ops.h, in its order; those the
 * router composes from others are not served: node_op_served), then the
 * internal ones. */
enum node_op {
#define NODE_OP_ENUM(Name, field, CONST, cli, flags, node, summary) NODE_OP_##CONST,
	SHOAL_OPS(NODE_OP_ENUM)
#undef NODE_OP_ENUM
	    NODE_OP_DEFINE_TABLE,
	NODE_OP_DROP_TABLE,
	NODE_OP_GROUP_STATUS,
	NODE_OP_LIST_CATALOG,
	NODE_OP_UPDATE_TABLE_DEF, /* group 0: UpdateTable's new definition */
	NODE_OP_ACTIVATE_INDEX,
	NODE_OP_INDEX_SHIP,
	NODE_OP_TXN_WRITE, /* a transaction's part (router/txn.c has the protocol) */
	NODE_OP_TXN_DECIDE,
	NODE_OP_TXN_FINISH,
	NODE_OP_TXN_ACK,
	NODE_OP_TXN_STATUS,
	NODE_OP_CAP_REPORT,
	NODE_OP_SCRUB_CHECK,   /* the replica scrub (scrub.c) */
	NODE_OP_MAP_CHANGE,    /* group 0: an operator's change of the cluster map (elastic.c) */
	NODE_OP_MAP_GET,       /* any node: its cluster map (mapsync.c) */
	NODE_OP_NODE_STATUS,   /* any node: every hosted group's status (mapsync.c) */
	NODE_OP_MEMBER_CHANGE, /* a group's leader: a Raft membership change (member.c) */
	NODE_OP_PART_MOVE,     /* a source group's leader: a partition move (pmove.c) */
	NODE_OP_PART_READY,    /* group 0's leader: a source's move is READY (elastic.c) */
	NODE_OP_PART_INGEST,   /* a target group's leader: a chunk of a move */
	NODE_OP_PART_OWN,      /* a target group's leader: serve the moved range */
	NODE_OP_INVALID,       /* undecodable or unknown requests */
	NODE_OP__COUNT
};

/* Whether this node serves op (metrics list only those). */
bool node_op_served(int op);
/* "get_item", ... (the metrics label); "invalid" for NODE_OP_INVALID. */
const char *node_op_name(int op);

/* Latency histogram bounds in seconds (Prometheus "le"), +Inf implied. */
#define NODE_LATENCY_BUCKETS 14

/* Lock-free request statistics, updated by the workers (any thread). */
typedef struct node_stats {
	atomic_uint_fast64_t requests[NODE_OP__COUNT];
	atomic_uint_fast64_t errors[NODE_OP__COUNT][SHOAL_E__COUNT];
	atomic_uint_fast64_t buckets[NODE_OP__COUNT][NODE_LATENCY_BUCKETS + 1];
	atomic_uint_fast64_t sum_ns[NODE_OP__COUNT];
	atomic_uint_fast64_t loop_wakes; /* node_wake's uv_async_sends */
	/* Gauges of the server's pool of idle batch members (server.c). */
	atomic_uint_fast64_t pool_members, pool_bytes;
	/* Gauges of the request server (server.c): its contexts, how many hold
	 * a message not yet answered (all of them: the node reads no more
	 * requests), and its connections (routers' and nodes'). */
	atomic_uint_fast64_t server_contexts, server_busy, server_conns;
} node_stats;

/* Counts one request of `op` answered with `code` after `ns` nanoseconds. */
void node_stats_record(node_stats *s, int op, int code, uint64_t ns);

/* The Prometheus text exposition of n's statistics and group status, in
 * sh_malloc'd memory (*text, *len; NUL-terminated): the caller sh_frees it.
 * Any thread. */
int node_metrics_render(node *n, char **text, size_t *len, char *errmsg);

/* Starts an nng HTTP server on "host:port" serving GET /metrics.  Any thread;
 * n must outlive node_metrics_stop. */
int node_metrics_start(node *n, const char *hostport, node_metrics **out, char *errmsg);
void node_metrics_stop(node_metrics *m);

/* ------------------------------------------------------------------------ */
/* The request server (server.c, handlers.c)                                 */
/* ------------------------------------------------------------------------ */

/*
 * Starts the nng REP server on `url` with `workers` contexts (0: default).
 * Requests are shoal.NodeRequest, answers shoal.NodeResponse.  n must stay
 * open until node_server_stop.  Any thread.
 */
int node_server_start(node *n, const char *url, unsigned workers, node_server **out, char *errmsg);
/* Waits until no request is being handled (the node must be stopping, so
 * every wait ends), closes the socket, stops the contexts' aios and frees s.
 * Any thread but an nng callback or the loop. */
void node_server_stop(node_server *s);

/*
 * Handing a NodeRequest to its handler.  The front door (server.c) has
 * decoded the request, found the group, checked its health and leadership
 * and, for consistent reads, waited for a Raft barrier; handlers do the work
 * and never repeat those checks.  Everything a handler builds lives in
 * `arena`.  A handler returns SHOAL_OK with the result in resp (and nresp),
 * or an error code with the message in errmsg.
 */
typedef struct node_call {
	node *node;
	node_group *group;
	const Shoal__NodeRequest *req; /* borrowed; req->request set for data ops */
	sh_arena *arena;
	Shoal__NodeResponse *nresp; /* initialised, response linked */
	Shoal__Response *resp;      /* initialised, request_id set */
	char errmsg[SH_ERRMSG_SIZE];
} node_call;

int node_handle_get_item(node_call *c);
int node_handle_transact_get_items(node_call *c);
int node_handle_query(node_call *c);
int node_handle_scan(node_call *c);
int node_handle_batch_get_item(node_call *c);
int node_handle_describe_table(node_call *c);
int node_handle_list_tables(node_call *c);
int node_handle_list_tags_of_resource(node_call *c);
int node_handle_describe_time_to_live(node_call *c);
int node_handle_group_status(node_call *c);
int node_handle_list_catalog(node_call *c);
int node_handle_cap_report(node_call *c); /* capacity.c */
int node_handle_scrub_check(node_call *c);
/* The cluster's shape (elastic.c, issue 14). */
int node_prepare_map_change(node_call *c, Shoal__CommandOp *op);
/* out (not initialised) becomes the cluster map group 0's replica g0 has
 * applied, or the cluster file's birth map when none is stored yet. */
int node_map_load(node *n, node_group *g0, sh_map *out, char *errmsg);
/* partadmin.c: an operator's move_partition / split_partition (a's action)
 * applied to m, group 0's map: the table's id from `catalog` through
 * table_id (SHOAL_E_NOT_FOUND: no such table), the table added to the map
 * with the static placement if it has no partitions there (conf's
 * partitions), then the move or split.  *already: the change is in m
 * already (a retry), m unchanged.  Errors: VALIDATION (to_group is not a
 * data group, at 0), NOT_FOUND (no such table), IN_USE (the partition is
 * moving), NOMEM; m is then unchanged.  Pure: no I/O but table_id. */
typedef int (*node_table_id_fn)(void *catalog, const char *name, uint32_t *id, char *errmsg);
int node_part_admin(sh_map *m, const sh_cluster_conf *conf, const Shoal__AdminRequest *a,
                    node_table_id_fn table_id, void *catalog, bool *already, char *errmsg);
/* A node_table_id_fn over a group's storage (catalog: its st_env). */
int node_part_catalog_id(void *catalog, const char *name, uint32_t *id, char *errmsg);
/* Table t into m with the static placement (sh_map_add_table with conf's
 * table partitions over its data groups) if it has no partitions there yet; a table in m already is
 * left as it is.  SHOAL_OK or the sh_map error (m then unchanged).  The one
 * way a table enters the map: an operator's partition change and the
 * executor's automatic split (elastic.c) both come here. */
int node_part_add_table(sh_map *m, const sh_cluster_conf *conf, uint32_t t, char *errmsg);
/* Partition moves (pmove.c). */
int node_handle_part_move(node_call *c);
/* elastic.c: a source leader's READY, pushed to group 0's leader. */
int node_handle_part_ready(node_call *c);
/* elastic.c: the keys this node's executor found too hot (or too big) for
 * a split lately, into gs->unsplit_keys (allocated in a); nothing when it
 * has none.  SHOAL_OK or SHOAL_E_NOMEM. */
int node_elastic_unsplit_status(node *n, sh_arena *a, Shoal__GroupStatus *gs);
int node_prepare_part_ingest(node_call *c, Shoal__CommandOp *op);
int node_prepare_part_own(node_call *c, Shoal__CommandOp *op);
/* mapsync.c: map_get and node_status (node-level: no group). */
int node_handle_map_get(node_call *c);
int node_handle_node_status(node_call *c);
/* DynamoDB Streams (stream.c). */
/* The static partition group g holds (has false: none): its hash range is
 * the implicit stream shard's (storage/stream.h "Shards"). */
typedef struct node_stream_static {
	bool has;
	uint32_t partition;
	uint64_t lo, hi;
} node_stream_static;
node_stream_static node_stream_static_of(const sh_cluster_conf *conf, uint32_t g);
int node_handle_describe_stream(node_call *c);
int node_handle_get_shard_iterator(node_call *c);
int node_handle_get_records(node_call *c);

/* ------------------------------------------------------------------------ */
/* The process (node.c)                                                      */
/* ------------------------------------------------------------------------ */

typedef struct node_options {
	const sh_cluster_conf *conf; /* borrowed; must outlive the node */
	uint32_t id;                 /* this node's id in conf */
	const char *dir;             /* data directory (created if missing) */
	unsigned workers;            /* server contexts, 0: NODE_DEFAULT_WORKERS */
	bool signals;                /* stop on SIGTERM and SIGINT */
	bool no_metrics;             /* do not serve the metrics address */
	/* Base writes on a leader whose group has more unshipped index deltas
	 * than this are refused with SHOAL_E_THROUGHPUT (0: the default). */
	uint64_t outbox_limit;
	bool no_ship; /* tests: do not run the index shipper */
	/* shoal-node --join: this node joins a running cluster; it never
	 * bootstraps a group and learns the map from the file's other nodes. */
	bool join;
	/* Called on the loop's thread when the node begins to stop (a signal,
	 * node_stop, a restart in place), before it closes anything: shoal-node
	 * bounds its stop from there (common/nngwatch.h).  NULL: nothing. */
	void (*stopping)(void *arg);
	void *stopping_arg;
} node_options;

#define NODE_DEFAULT_OUTBOX_LIMIT 100000

/*
 * Lifecycle of a node (node->state):
 *
 *   state      event                          next       function
 *   --------   -----------------------------  ---------  ------------------
 *   (none)     node_open succeeds             RUNNING    node_open
 *   RUNNING    node_stop / SIGTERM / SIGINT   STOPPING   shutdown_begin
 *   STOPPING   last group's raft closed       STOPPED    group_closed_cb
 *   STOPPED    node_run returns; node_close   (freed)    node_close
 *
 * While STOPPING the front door answers SHOAL_E_UNAVAILABLE, queued and
 * in-flight requests are answered SHOAL_E_UNAVAILABLE, and the raft
 * instances close; once STOPPED the loop has no handles left and uv_run
 * returns.  Storage closes last, after the server's workers have exited.
 */
enum node_state { NODE_RUNNING, NODE_STOPPING, NODE_STOPPED };

struct node {
	const sh_cluster_conf *conf;
	const sh_node_conf *self;
	uint32_t id;
	char dir[SH_PATH_MAX];
	int lock_fd; /* flock on <dir>/shoal-node.lock, held while open */
	uv_loop_t loop;

	/* [sh_cluster_group_cap]; NULL where not hosted.  Written on the loop with
	 * atomic stores (reconcile), read anywhere (node_group_get). */
	node_group **groups;
	uint32_t n_hosted;
	uint32_t n_open; /* groups whose raft is not closed yet (loop) */

	/* The cluster map this node follows (common/placement.h) and its
	 * state (mapsync.c has the design). */
	sh_place *place;
	bool map_trusted;      /* loop: the map may place groups (else: learning it) */
	bool map_born;         /* had cluster.map or group directories at start */
	bool join;             /* --join: never bootstrap */
	bool birth;            /* loop: this start is the cluster's birth: bootstrap */
	uint64_t saved_epoch;  /* loop: the epoch of <dir>/cluster.map */
	atomic_bool map_dirty; /* a newer map was offered from another thread */
	uv_timer_t map_timer;
	bool map_timer_init;
	struct node_mapsync *sync; /* mapsync.c */
	struct node_grave *graves; /* loop: closed groups waiting to be freed */
	atomic_bool *lost;         /* [group cap]: a voter here with no data (node.c) */
	/* [group cap] (loop): founding, with this node a founder, in the first
	 * map it learnt from an empty data directory: never bootstrapped by
	 * this process (mapsync.c, learn; node.c, lost_replica). */
	bool *unfounded;
	uint64_t cap_warned; /* loop: the map epoch last checked for groups past the cap */
	uint32_t group_cap;  /* sh_cluster_group_cap(conf): ids of groups[], lost[] */

	enum node_state state; /* loop */
	atomic_bool stopping;  /* state != RUNNING, for other threads */
	atomic_bool stop_requested;
	atomic_bool restart_requested; /* node_restart */
	uint64_t disk_next_ns;         /* disk.c: next look at the disk (loop) */
	bool disk_low;                 /* disk.c: the disk filled up (loop) */

	uv_async_t wake;  /* workers -> loop: queues to flush, or stop */
	uv_check_t check; /* after every loop iteration: publish status */
	uv_signal_t sigterm, sigint;
	bool signals;
	pthread_mutex_t wake_mu; /* guards wake_open against node_stop */
	bool wake_open;

	uint64_t next_batch_id; /* loop: batch ids of our Commands */

	node_stats stats;
	node_server *server;
	node_metrics *metrics;
	node_ship *ship;                /* NULL with no_ship */
	void (*stopping_cb)(void *arg); /* node_options.stopping */
	void *stopping_arg;
	uint64_t outbox_limit; /* see node_options */
	node_cap *cap;         /* capacity per partition */
	node_scrub *scrub;     /* the replica scrub; NULL when off */
	node_ttl *ttl;         /* Time to Live expiry; NULL when off */
	/* The cluster's TLS ([tls] of the cluster file): the RPC listener,
	 * the lanes to other nodes and every group's Raft transport use it.
	 * NULL: plain traffic (a warning at start says so). */
	sh_tls *tls;
	sh_tls tls_store;
};

/* Creates and locks the data directory (<dir>/shoal-node.lock: one process
 * per directory), opens the groups this node hosts, then the server and
 * metrics; ignores SIGPIPE process-wide.  On failure everything opened is
 * closed again and *out is NULL.  node_open, node_run and node_close may run
 * on different threads, one at a time (the loop is not bound to a thread).
 * Several nodes may live in one process (tests do). */
int node_open(const node_options *opts, node **out, char *errmsg);
/* Runs the loop until the node has stopped.  Returns SHOAL_OK. */
int node_run(node *n);
/* Requests a graceful stop; any thread, any number of times. */
void node_stop(node *n);
/* Requests a graceful stop after which the process starts again in place
 * (shoal-node re-executes itself, same pid: main.c), e.g. to rebuild a
 * replica's storage marked for rebuild.  Any thread. */
void node_restart(node *n);
bool node_restart_requested(node *n);
/* Stops the server and metrics, closes storage, frees n.  After node_run
 * returned; if it was never run, node_close stops the groups itself. */
void node_close(node *n);

/* The next batch id for a Command proposed by this node (loop). */
uint64_t node_next_batch_id(node *n);

/* The node's group gid, or NULL if not hosted here (any thread).  The
 * pointer stays valid for NODE_GROUP_GRACE_MS after the group leaves; hold
 * it longer only with node_group_acquire. */
node_group *node_group_get(node *n, uint32_t gid);

/* mapsync.c: the node follows the cluster map (loop unless said).
 * node_map_open: at node_open, before the groups -- loads <dir>/cluster.map
 * or decides how the map will be learnt; node_map_start: after the server
 * started (the refresher's timer); node_map_tick: after every loop
 * iteration (installs, persists, reconciles); node_map_close: when the
 * node begins stopping; node_map_free: in node_close. */
int node_map_open(node *n, const node_options *opts, char *errmsg);
int node_map_start(node *n, char *errmsg);
void node_map_tick(node *n);
void node_map_close(node *n);
void node_map_free(node *n);
/* Any thread: offers an encoded map to the node's placement; installing a
 * newer one wakes the loop to persist it and reconcile.  1 installed, 0
 * not newer, else an error code. */
int node_map_offer(node *n, const uint8_t *buf, size_t len, char *errmsg);
/* Any thread: for the next `ms`, the refresher asks group 0's leader for the
 * map every NODE_MAP_HURRY_MS instead of waiting: a follower of group 0
 * learns a commit at the leader's next heartbeat (up to
 * NODE_HEARTBEAT_TIMEOUT_MS), a node outside group 0 at its next refresh
 * (500 ms).  For a source leader waiting for a move's cutover (pmove.c):
 * the flip's news is the GSI range's own, and the handover. */
#define NODE_MAP_HURRY_MS 10
void node_map_hurry(node *n, uint64_t ms);
/* node.c (loop): opens the groups the map places here and closes the ones
 * it no longer does; frees graveyard groups past their grace. */
void node_reconcile(node *n);
/* Whether the map makes this node a voter of gid for which it has no data
 * (not opened; node_status says "lost").  Any thread. */
bool node_group_lost(node *n, uint32_t gid);
/* Deletes <dir>/group-<gid> and everything in it (loop). */
void node_remove_group_dir(node *n, uint32_t gid);

/* raftio.c: the raft_io given to raft, in front of raft_uv's, that keeps a
 * follower writing an installed snapshot from changing state (raft 0.15
 * crashes otherwise; see the file).  Loop thread. */
typedef struct node_raftio {
	struct raft_io outer; /* given to raft_init */
	struct raft_io *inner;
	raft_io_tick_cb tick;
	raft_io_recv_cb recv;
	raft_io_close_cb close_cb;
	raft_io_snapshot_put_cb put_cb; /* the install being written */
	void *put_data;
	bool installing;
	uint32_t gid;
	uint64_t ticks_withheld, messages_dropped; /* during the current install */
	/* A log write failed (see the file): held back from raft for good. */
	atomic_bool failed;
	int failed_code; /* SHOAL_E_FULL or SHOAL_E_IO; set before failed */
	char failed_msg[SH_ERRMSG_SIZE - 64];
	uint64_t appends_held;
	/* The commit rules (see the file): messages adjusted. */
	uint64_t commits_clamped, results_clamped;
} node_raftio;

/* Sets x up in front of inner (after raft_uv_init and its settings; uses
 * inner->data). */
void node_raftio_init(node_raftio *x, struct raft_io *inner, uint32_t gid);
/* SHOAL_OK, or the code and message of the log write that failed (any
 * thread). */
int node_raftio_failed(node_raftio *x, char *errmsg);

/* Wakes the loop to flush queues (any thread). */
void node_wake(node *n);
/* Between these, node_wake on this thread is put off until the release, so
 * that the writes of a NodeRequest batch are all queued before the loop
 * proposes them: one Command, not a first one with one write and the rest
 * waiting for its commit.  Nestable. */
void node_wake_hold(void);
void node_wake_release(void);

/* Monotonic clock in nanoseconds. */
uint64_t node_now_ns(void);
/* Wall clock in milliseconds since the epoch (Command.ts_ms). */
int64_t node_wall_ms(void);

/* ------------------------------------------------------------------------ */
/* Index shipping (shipq.c: pure bookkeeping; ship.c: the shipper)           */
/* ------------------------------------------------------------------------ */

/* A batch: at most this many deltas and about this many bytes. */
#define NODE_SHIP_BATCH_MAX   1000
#define NODE_SHIP_BATCH_BYTES (1u << 20)
/* Deltas buffered per source group (read from the outbox, not yet
 * acknowledged): reading pauses above either bound. */
#define NODE_SHIP_BUFFER_MAX   20000
#define NODE_SHIP_BUFFER_BYTES (32u << 20)
/* An OutboxTrim is proposed when the shipped position moved and this much
 * time passed or this many deltas were shipped since the last one. */
#define NODE_SHIP_TRIM_MS     50
#define NODE_SHIP_TRIM_DELTAS 1000
/* The shipper's timer: retries, trims, backfill polls. */
#define NODE_SHIP_TICK_MS 10
/* Deltas of a GSI range a target refused wait this long before they go
 * where the map says (the same target refuses them again until the map
 * flips; node/shipq.c). */
#define NODE_SHIP_HOLD_MS 100
/* The executor of the cluster's shape (elastic.c): the pause between rounds. */
#define NODE_ELASTIC_ROUND_MS 1000
/* Time allowed for a connection to the target's node, for its answer, and
 * the retry backoff bounds. */
/* Lanes per target node, and links' batches per message (proto/lanes.h). */
#define NODE_SHIP_LANES           2
#define NODE_SHIP_LANE_BATCH      16
#define NODE_SHIP_SEND_TIMEOUT_MS 500
#define NODE_SHIP_TIMEOUT_MS      2000
#define NODE_SHIP_BACKOFF_MIN_MS  10
#define NODE_SHIP_BACKOFF_MAX_MS  500

/* One delta held by the shipper: d's key and val point into the same
 * allocation. */
typedef struct node_sdelta {
	struct node_sdelta *next;
	st_delta d;
} node_sdelta;

/* The deltas of one source group for one target group, in seq order; the
 * first `inflight` are the batch being sent. */
#define NODE_SHIPQ_HELD_RANGES 16 /* GSI ranges refused at once, at most (then merged) */

typedef struct node_shipq_range {
	uint64_t lo, hi;
} node_shipq_range;

typedef struct node_shipq_link {
	uint32_t target;
	node_sdelta *head, *tail;
	uint32_t n;
	size_t bytes;
	uint32_t inflight;
} node_shipq_link;

struct sh_place;

typedef struct node_shipq {
	const sh_cluster_conf *conf; /* borrowed */
	struct sh_place *place;      /* borrowed: the node's map (NULL: the file's placement) */
	uint64_t read_pos;           /* highest seq pushed (or the reset position) */
	uint32_t n_buffered;
	size_t bytes_buffered;
	node_shipq_link *links; /* [sh_cluster_group_cap], by target group */
	/* Ranges of the GSI space a target refused, and every delta of them
	 * (queued when refused, or pushed since), in seq order, until
	 * node_shipq_reroute. */
	node_shipq_range held_ranges[NODE_SHIPQ_HELD_RANGES];
	uint32_t n_held_ranges;
	node_sdelta *held_head, *held_tail;
	uint32_t n_held;
	/* The map's GSI partitions as the last reset or reroute saw them: the
	 * routes until the next one (none: the cluster file's placement). */
	struct sh_place_part *routes;
	uint32_t n_routes, cap_routes;
} node_shipq;

/* The group that owns index-partition hash `hash`: the map's partition of
 * the GSI space (common/placement.h; place NULL: the cluster file's). */
uint32_t node_shipq_target(const sh_cluster_conf *conf, struct sh_place *place, uint64_t hash);
/* SHOAL_OK or SHOAL_E_NOMEM.  The queue starts empty at position 0. */
int node_shipq_init(node_shipq *q, const sh_cluster_conf *conf, struct sh_place *place);
void node_shipq_fini(node_shipq *q);
/* Drops every delta (held ones too); the read position (and so the
 * watermark) becomes pos. */
void node_shipq_reset(node_shipq *q, uint64_t pos);
/* Appends a copy of d (d->seq > read_pos) to its target's queue, or to the
 * held list when d lies in a held range. */
int node_shipq_push(node_shipq *q, const st_delta *d);
/* Marks the next batch of target's queue in flight and returns its length
 * (at most max_n deltas and about max_bytes, at least one); 0 when the queue
 * is empty or a batch is already in flight. */
uint32_t node_shipq_take(node_shipq *q, uint32_t target, uint32_t max_n, size_t max_bytes);
/* The batch in flight was applied: pops it, calling each(arg, d) per delta
 * (may be NULL). */
void node_shipq_ack(node_shipq *q, uint32_t target, void (*each)(void *arg, const st_delta *d),
                    void *arg);
/* The batch in flight failed: its deltas are unsent again. */
void node_shipq_retry(node_shipq *q, uint32_t target);
/* The batch in flight was refused for GSI range [lo, hi] (it moves or moved
 * away from target, storage/parts.h): unsent again, and every delta of the
 * range -- in target's queue, and pushed from now on -- waits in the held
 * list; the rest goes on.  Nothing of a refused batch was applied. */
void node_shipq_refused(node_shipq *q, uint32_t target, uint64_t lo, uint64_t hi);
/* Whether no batch is in flight (node_shipq_reroute's precondition). */
bool node_shipq_quiet(const node_shipq *q);
/* With no batch in flight: every queued and held delta goes, in seq order,
 * to the queue of the group that owns its hash now; the held ranges are
 * forgotten.  The one place deltas change target, so that the deltas of one
 * range reach one target in seq order (a target deduplicates a moved
 * range's deltas by a watermark of their own, storage/parts.h). */
void node_shipq_reroute(node_shipq *q);
/* The highest seq S such that every delta <= S was acknowledged. */
uint64_t node_shipq_watermark(const node_shipq *q);

/*
 * The shipper (ship.c): on every group this node leads, reads the outbox
 * after the shipped position, sends each target group's deltas to that
 * group's leader as NodeRequest.index_ship over nng, proposes OutboxTrim
 * behind the acknowledged position, and drives the backfill of new GSIs.
 * All its work runs on the loop; nng's callbacks only hand results back.
 *
 * node_ship_open: loop thread (or before node_run), after the groups are
 * open.  node_ship_tick: loop, after every loop iteration.  node_ship_close:
 * loop, when the node begins stopping (closes its handles, cancels sends).
 * node_ship_free: after the loop ended (waits for nng callbacks).
 */
int node_ship_open(node *n, node_ship **out, char *errmsg);
void node_ship_tick(node_ship *s);
void node_ship_close(node_ship *s);
void node_ship_free(node_ship *s);
/* Any thread: unshipped deltas of group gid as its leader last saw them
 * (0 on followers). */
uint64_t node_ship_backlog(node_ship *s, uint32_t gid);
/* Any thread: stops (true) or resumes sending batches; the outbox is still
 * read and the backlog published (tests of the backpressure). */
void node_ship_set_paused(node_ship *s, bool paused);
/* Any thread: count n deltas applied in group gid from a source's batch. */
void node_ship_count_applied(node_ship *s, uint32_t gid, uint64_t n);
/* Any thread: appends the shipper's metrics in Prometheus text. */
typedef void (*node_appendf_fn)(void *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void node_ship_metrics(node_ship *s, node_appendf_fn appendf, void *buf);
/* The most recent propagation lag this node's shipper measured for index
 * (table_id, index_id), in ms; false if none yet (or s is NULL).  Any
 * thread. */
bool node_ship_last_lag(node_ship *s, uint32_t table_id, uint16_t index_id, int64_t *ms);

/* ------------------------------------------------------------------------ */
/* The replica scrub (scrub.c has the protocol)                              */
/* ------------------------------------------------------------------------ */

/* node_scrub_open: after the shipper (it uses its node-to-node lanes); *out
 * stays NULL when [cluster] scrub_ms is 0 or there is no shipper.  tick:
 * loop, after every iteration.  close: loop, when the node begins stopping.
 * free: after the shipper's lanes are freed (no answer callback is left). */
int node_scrub_open(node *n, node_scrub **out, char *errmsg);
void node_scrub_tick(node_scrub *s);
void node_scrub_close(node_scrub *s);
void node_scrub_free(node_scrub *s);
/* The leader says this replica's result of scrub (proposer, seq) in group
 * gid differs from the majority's (majority_hash); the loop checks it and
 * acts.  Any thread. */
void node_scrub_told(node_scrub *s, uint32_t gid, uint32_t proposer, uint64_t seq,
                     uint64_t majority_hash);
/* Any thread: the scrub's counters in Prometheus text. */
void node_scrub_metrics(node_scrub *s, node_appendf_fn appendf, void *buf);

/* ------------------------------------------------------------------------ */
/* Time to Live expiry (ttl.c has the design)                                */
/* ------------------------------------------------------------------------ */

/* node_ttl_open: after the groups; *out stays NULL when [cluster]
 * ttl_scan_ms is 0.  tick: loop, after every iteration.  close: loop, when
 * the node begins stopping (before the groups: it proposes through them).
 * free: after the groups closed (no delete is left in flight).  metrics:
 * any thread. */
int node_ttl_open(node *n, node_ttl **out, char *errmsg);
void node_ttl_tick(node_ttl *t);
void node_ttl_close(node_ttl *t);
void node_ttl_free(node_ttl *t);
void node_ttl_metrics(node_ttl *t, node_appendf_fn appendf, void *buf);

/* ------------------------------------------------------------------------ */
/* Capacity per partition (capacity.c; the rules in capacity.h)              */
/* ------------------------------------------------------------------------ */

/* Before the groups open (their state machines charge writes). */
int node_cap_open(node *n, node_cap **out, char *errmsg);
void node_cap_free(node_cap *c);
/* Loop thread, after every iteration; does its work once a second. */
void node_cap_tick(node_cap *c);

/* disk.c: once a second, restarts the node in place when its disk, after
 * filling up, has room again (loop thread). */
void node_disk_tick(node *n);
/* Group gid's catalog changed (committed): the next tick reads its tables'
 * partitions and capacity again.  Any thread. */
void node_cap_catalog_changed(node_cap *c, uint32_t gid);
/* Whether request req for group gid may run now: SHOAL_OK, or
 * SHOAL_E_THROUGHPUT with DynamoDB's message when a bucket it draws on is
 * empty (or, for a base write, a GSI of its table is behind).  Any thread. */
int node_cap_admit(node_cap *c, uint32_t gid, const Shoal__NodeRequest *req, char *errmsg);
/* The units (CAP_READ / CAP_WRITE of capacity.h) a request of table
 * (index: a GSI's or LSI's name, or NULL) cost in group gid; item (an item
 * or key, ST_M, or the partition key value itself; may be NULL) names its
 * partition key for the hot-key sketch.
 * The same units its ConsumedCapacity reports.  Any thread. */
void node_cap_charge(node_cap *c, uint32_t gid, const char *table, const char *index, int kind,
                     double units, const st_value *item);
/* Index entries written in an index partition (group gid): units of GSI
 * (table_id, index_id), key the entry's item (its GSI partition key names the
 * hot key) or the key value itself (may be NULL); *over
 * set when the partition's write bucket is empty afterwards. */
void node_cap_charge_index(node_cap *c, uint32_t gid, uint32_t table_id, uint16_t index_id,
                           double units, const st_value *key, bool *over);
/* A GSI partition of table_id is over its limit: base writes of the table
 * in group gid are throttled for for_ms (NODE_GSI_BEHIND_MS after each
 * answer of an index partition that says so). */
#define NODE_GSI_BEHIND_MS 200
void node_cap_gsi_behind(node_cap *c, uint32_t gid, uint32_t table_id, int64_t for_ms);
/* Fills gs->load and gs->hot_keys (arena a) when this node leads gid. */
int node_cap_status(node_cap *c, uint32_t gid, sh_arena *a, Shoal__GroupStatus *gs);
void node_cap_metrics(node_cap *c, node_appendf_fn appendf, void *buf);

#endif
