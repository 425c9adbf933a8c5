/*
 * router.h -- internals of shoal-router (router/, prefix rt_).  Private to
 * router/ and its unit test (tests/unit/test_router.c).
 *
 * The router is stateless: clients send it shoal.Request over nng REQ/REP,
 * it finds the storage group that owns each key (st_key_hash -> partition ->
 * group, common/cluster.h), sends shoal.NodeRequest to that group's leader
 * (or any replica for eventually consistent reads), follows NOT_LEADER hints,
 * retries with backoff until a deadline, and merges what several groups
 * answer (Scan across partitions, batches, table operations, cluster status).
 * The only state it keeps is a cache: the catalog (table name -> id and key
 * schema, from group 0) and the believed leader of each group.
 *
 * Files, by responsibility:
 *   front.c      the operation table and the front door (decode, validate,
 *                dispatch, answer, metrics): rt_handle
 *   server.c     nng REP listener: REP context state machines, worker threads
 *   fast.c       the asynchronous fast path of single-item operations
 *   transport.c  node connections and rt_call_all: one attempt after another
 *                per call, calls in parallel, leader cache
 *   retry.c      the retry policy (pure): which replica next, how long to wait
 *   catalog.c    catalog snapshots (pure) and their refresh from group 0
 *   items.c      GetItem, PutItem, UpdateItem, DeleteItem, Query
 *   index.c      Query and Scan on secondary indexes: LSI and GSI routing,
 *                the write-shard fan-out and its merge (pure)
 *   scan.c       Scan across partitions: planning (pure) and execution
 *   batch.c      BatchGetItem / BatchWriteItem: checks, split by group (pure),
 *                parallel parts, merge
 *   tables.c     CreateTable, UpdateTable, DescribeTable, ListTables,
 *                DeleteTable, ClusterStatus, activation of backfilled GSIs
 *   metrics.c    counters, Prometheus text, the HTTP endpoint
 *   http.c       the DynamoDB-compatible HTTP API (http.h): JSON bodies via
 *                proto/wire_api.h into rt_handle_request
 *   sigv4.c      AWS SigV4 verification and the credentials file (http.h)
 *   log.c        timestamped lines on stderr
 *   main.c       command line, signals, start and stop
 *
 * Threads: GetItem, PutItem, UpdateItem, DeleteItem and single-partition
 * Query normally run entirely in nng's aio callbacks (fast.c: decode, route,
 * one attempt at a node, pass its answer on).  Everything else -- other
 * operations, a table missing from the cached catalog, and any attempt that
 * did not simply answer (NOT_LEADER, unavailable, timeout, ResourceNotFound)
 * -- is handed to a worker thread (server.c), where rt_handle and everything
 * it calls run with blocking node calls, retries and backoff.  Both share
 * only the rt_router, whose mutable parts are atomics (leader cache,
 * metrics, round-robin counter) or guarded by mutexes (catalog, pools).
 * nng's own threads also run the metrics HTTP callback.
 *
 * Memory: each request has an arena (sh_arena) that holds the decoded client
 * request, every NodeResponse (unpacked with an arena allocator) and the
 * response being built; the front door resets it after the answer is sent.
 * Protobuf messages built by handlers point into other decoded messages
 * freely, since all of them die together with the arena.
 */
#ifndef SHOAL_ROUTER_H
#define SHOAL_ROUTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>

#include "common/arena.h"
#include "common/cluster.h"
#include "common/errors.h"
#include "proto/cluster.pb-c.h"
#include "proto/wire.h"
#include "storage/route.h"
#include "storage/storage.h"

typedef struct rt_router rt_router;

/* ------------------------------------------------------------------------ */
/* Options (main.c fills them; defaults from rt_options_default)             */
/* ------------------------------------------------------------------------ */

typedef struct rt_options {
	uint32_t workers;     /* worker threads: requests off the fast path at once (64) */
	uint32_t contexts;    /* REP contexts: client requests in progress at once (256) */
	bool fast_path;       /* single-item operations in nng callbacks (fast.c; true) */
	uint32_t attempt_ms;  /* answer timeout of one attempt at a node (2000) */
	uint32_t send_ms;     /* how long to wait for a connection to a node (500) */
	uint32_t deadline_ms; /* per client request (10000) */
	uint32_t status_ms;   /* ClusterStatus / DescribeTable per-node timeout (1000) */
} rt_options;

void rt_options_default(rt_options *o);

/* ------------------------------------------------------------------------ */
/* Time and logging (log.c)                                                  */
/* ------------------------------------------------------------------------ */

/* Monotonic milliseconds (deadlines). */
int64_t rt_now_ms(void);
/* Monotonic microseconds (latency metrics; the same clock). */
int64_t rt_now_us(void);
/* Wall-clock milliseconds since the epoch (CreationDateTime). */
int64_t rt_wall_ms(void);
/* "2024-05-01T12:00:00.123Z shoal-router: <message>" on stderr. Any thread. */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------------ */
/* Retry policy (retry.c, pure)                                              */
/* ------------------------------------------------------------------------ */

#define RT_BACKOFF_MIN_MS 10
#define RT_BACKOFF_MAX_MS 200

/* How one attempt at a node ended. */
typedef enum rt_outcome {
	RT_OUT_DONE = 0,    /* an answer to pass on (success or a client error) */
	RT_OUT_NOT_LEADER,  /* the node is not the leader; hint = leader_node (0: unknown) */
	RT_OUT_UNAVAILABLE, /* the node does not serve the group now (not hosted, stopping) */
	RT_OUT_TIMEOUT,     /* sent, but no answer within the attempt timeout */
	RT_OUT_UNREACHABLE, /* could not send: no connection to the node */
	RT_OUT_BAD_ANSWER,  /* an answer that does not decode */
	RT_OUT__COUNT
} rt_outcome;

/* Name of an outcome for metrics and messages ("not_leader", "timeout", ...). */
const char *rt_outcome_name(rt_outcome o);

/*
 * The retries of one call to one group.  Rules:
 *  - NOT_LEADER with a hint naming another replica: try the hint next;
 *  - any other failure, or a hint of 0 / outside the group: the next replica
 *    in ring order after the one just tried;
 *  - no wait while the replicas tried since the last wait are fewer than the
 *    group's size (so a dead leader costs one attempt, not a backoff); after a
 *    full round without an answer, wait backoff_ms, which starts at
 *    RT_BACKOFF_MIN_MS and doubles up to RT_BACKOFF_MAX_MS;
 *  - give up when the wait would reach the deadline.
 */
typedef struct rt_retry {
	uint32_t replicas[SH_MAX_REPLICATION];
	uint32_t n;          /* replicas in the group, >= 1 */
	uint32_t target;     /* node id to try now */
	uint32_t attempts;   /* attempts made so far */
	uint32_t round;      /* attempts since the last wait */
	uint32_t backoff_ms; /* the next wait */
	rt_outcome last;     /* outcome of the last failed attempt */
} rt_retry;

/* first: the node to try first (must be one of replicas; else replicas[0]). */
void rt_retry_init(rt_retry *r, const uint32_t *replicas, uint32_t n, uint32_t first);
/* After a failed attempt (outcome != RT_OUT_DONE): sets r->target and *delay_ms
 * and returns true, or returns false when now + delay would pass the
 * deadline. */
bool rt_retry_next(rt_retry *r, rt_outcome o, uint32_t hint, int64_t now_ms, int64_t deadline_ms,
                   uint32_t *delay_ms);

/* ------------------------------------------------------------------------ */
/* Metrics (metrics.c)                                                       */
/* ------------------------------------------------------------------------ */

#define RT_OPS_MAX     24 /* slots for per-operation series (rt_op_slot) */
#define RT_LAT_BUCKETS 14 /* latency histogram bucket bounds (seconds), +Inf extra */

typedef struct rt_metrics {
	_Atomic uint64_t requests[RT_OPS_MAX];
	_Atomic uint64_t errors[RT_OPS_MAX][SHOAL_E__COUNT];
	_Atomic uint64_t lat_bucket[RT_OPS_MAX][RT_LAT_BUCKETS + 1];
	_Atomic uint64_t lat_sum_us[RT_OPS_MAX];
	_Atomic uint64_t retries[RT_OUT__COUNT]; /* by the outcome that caused them */
	_Atomic uint64_t repairs;                /* define_table re-sent to a data group */
	_Atomic uint64_t leader_changes;
	_Atomic uint64_t fast_answered;  /* requests the fast path answered */
	_Atomic uint64_t fast_deferred;  /* ... sent to a node, then handed to a worker */
	_Atomic uint64_t fast_batches;   /* node messages carrying several requests */
	_Atomic uint64_t fast_batched;   /* ... and the requests they carried */
	_Atomic uint64_t client_batches; /* client messages carrying several requests */
	_Atomic uint64_t client_batched; /* ... and the requests they carried */
} rt_metrics;

/* Records one finished request of operation slot `slot` (any thread). */
void rt_metrics_request(rt_metrics *m, uint32_t slot, int code, int64_t micros);
/* Writes the Prometheus text exposition into buf (at most cap bytes, NUL
 * terminated); returns the length it needed (like snprintf). */
size_t rt_metrics_render(const rt_metrics *m, char *buf, size_t cap);
/* Serves GET /metrics on "host:port" with nng's HTTP server. */
int rt_metrics_start(rt_router *rt, const char *hostport, char *errmsg);
void rt_metrics_stop(rt_router *rt);

/* ------------------------------------------------------------------------ */
/* Catalog (catalog.c)                                                       */
/* ------------------------------------------------------------------------ */

/* One table as group 0 defines it. */
typedef struct rt_table {
	const char *name;
	uint32_t id;
	st_table_def def;             /* key schema, indexes, id, created_ms */
	const Shoal__TableDefine *pb; /* as stored: re-sent to repair a data group */
} rt_table;

/* An immutable catalog version: readers hold a reference while they use it,
 * so a refresh never frees what a request still points into. */
typedef struct rt_catalog_snap {
	atomic_int refs;
	sh_arena arena;   /* owns everything below */
	rt_table *tables; /* sorted by name (strcmp) */
	uint32_t n;
} rt_catalog_snap;

typedef struct rt_catalog {
	pthread_mutex_t mu;           /* guards cur */
	rt_catalog_snap *cur;         /* NULL until the first load */
	pthread_mutex_t refresh_mu;   /* one refresh at a time */
	atomic_uint_fast64_t started; /* refreshes started */
	uint64_t done; /* sequence number of the last finished refresh (refresh_mu) */
} rt_catalog;

int rt_catalog_init(rt_catalog *c);
void rt_catalog_fini(rt_catalog *c);

/* A TableDefine as the router uses it (pure): the CreateTableRequest it
 * carries, converted as CreateTable converts it, with group 0's table id,
 * created_ms, and each index's id and status (TableDefine.indexes). */
int rt_table_def_from_pb(sh_arena *a, const Shoal__TableDefine *d, st_table_def *out, char *errmsg);
/* Index `name` of a table, or NULL. */
const st_index_def *rt_index_find(const rt_table *t, const char *name);

/* Builds a snapshot from group 0's list_catalog answer (pure).  Takes over
 * `arena` (which must hold defs) on success and on failure alike.  A
 * definition that does not convert is skipped and logged. */
int rt_catalog_snap_build(sh_arena *arena, Shoal__TableDefine *const *defs, size_t n,
                          rt_catalog_snap **out, char *errmsg);
void rt_catalog_snap_free(rt_catalog_snap *s);
/* Binary search by name (pure); NULL if absent. */
const rt_table *rt_catalog_find(const rt_catalog_snap *s, const char *name);
/* Current snapshot with a reference (NULL if never loaded); release it. */
rt_catalog_snap *rt_catalog_acquire(rt_catalog *c);
void rt_catalog_release(rt_catalog_snap *s);
/* Replaces the current snapshot (takes ownership of s). */
void rt_catalog_install(rt_catalog *c, rt_catalog_snap *s);

/* ------------------------------------------------------------------------ */
/* Node transport (transport.c)                                              */
/* ------------------------------------------------------------------------ */

/* Idle node contexts kept per node, and idle aios kept per router. */
#define RT_POOL_MAX 256

typedef struct rt_node {
	uint32_t id;
	char url[SH_ADDR_MAX];
	nng_socket sock; /* REQ, dialled without blocking; nng redials by itself */
	bool open;
	/* Monotonic ms until which any-replica reads avoid this node: set when
	 * it could not be reached, so that reads do not pay a send timeout each
	 * (leader-bound calls still go where the leader is believed to be). */
	_Atomic int64_t down_until;
	/* Idle REQ contexts on sock, reused by later calls (transport.c): a
	 * context whose last attempt ended with an answer has no request
	 * outstanding, so opening a new one per attempt is wasted work.
	 * Contexts whose attempt failed are closed, never pooled. */
	pthread_mutex_t pool_mu;
	bool pool_init;
	nng_ctx pool[RT_POOL_MAX];
	uint32_t n_pool;
} rt_node;

struct rt_router {
	sh_cluster_conf *conf; /* owned */
	rt_options opt;
	rt_node nodes[SH_MAX_NODES]; /* conf order */
	_Atomic uint32_t *leader;    /* per group: node believed to lead it */
	_Atomic uint32_t rr;         /* round robin for any-replica reads */
	rt_catalog catalog;
	rt_metrics metrics;
	nng_http_server *http; /* metrics endpoint, or NULL */
	_Atomic bool stopping;
	/* Idle aios (no callback) reused by rt_call_all instead of allocating
	 * and freeing one per call. */
	pthread_mutex_t aio_mu;
	bool aio_mu_init;
	nng_aio *aio_pool[RT_POOL_MAX];
	uint32_t n_aio_pool;
};

/* One request to one storage group. */
typedef struct rt_call {
	/* In. */
	uint32_t group;
	Shoal__NodeRequest *req; /* group and any_replica are filled in from here */
	bool any_replica;        /* eventually consistent read: any replica serves */
	uint32_t only_node;      /* nonzero: ask this node once, no retries */
	/* Out. */
	int rc;                    /* SHOAL_OK: resp is set; else errmsg */
	Shoal__NodeResponse *resp; /* in the arena given to rt_call_all */
	uint32_t answered_by;      /* node id */
	char errmsg[SH_ERRMSG_SIZE];
	/* Private to transport.c. */
	rt_retry retry;
	nng_aio *aio;
	nng_ctx ctx;
	bool ctx_open;
	rt_node *ctx_node; /* the node whose socket ctx is on */
	int state;
	int64_t not_before;
	uint8_t *buf;
	size_t len;
} rt_call;

/* Initialises the router's connections and leader cache for conf (taken
 * over), with options o. */
int rt_router_init(rt_router *rt, sh_cluster_conf *conf, const rt_options *o, char *errmsg);
void rt_router_fini(rt_router *rt);

/* Runs every call to completion (an answer or the deadline), in parallel:
 * each round sends one attempt of every call that is due, then waits for
 * them.  Responses are unpacked into a.  rc SHOAL_E_UNAVAILABLE when no
 * replica answered before the deadline; the leader cache is updated from
 * answers and hints.  Worker thread. */
void rt_call_all(rt_router *rt, sh_arena *a, rt_call *calls, uint32_t n, int64_t deadline_ms);

/* The status code carried by a node's answer (SHOAL_OK if it has none). */
int rt_resp_code(const Shoal__NodeResponse *resp);

/* The pieces of rt_call_all that the fast path (fast.c) shares, so that both
 * paths pick targets, pool contexts and learn from answers alike. */
rt_node *rt_node_by_id(rt_router *rt, uint32_t id);
/* The node a call to `group` tries first: its believed leader, or for an
 * eventually consistent read (any_replica) the leader when it is up, else
 * a live replica in round-robin order.  reps/n: the group's replicas. */
uint32_t rt_first_target(rt_router *rt, uint32_t group, bool any_replica, const uint32_t *reps,
                         uint32_t n);
/* Node contexts: an idle pooled one or a new one; back into the pool only
 * after an answer (nothing outstanding), else close it instead. */
int rt_node_ctx_get(rt_node *n, nng_ctx *out);
void rt_node_ctx_put(rt_node *n, nng_ctx ctx);
/* What an attempt's failure teaches: an unreachable node is skipped by
 * any-replica reads for a while; a NOT_LEADER hint inside the group becomes
 * the believed leader. */
void rt_note_failure(rt_router *rt, uint32_t group, rt_outcome o, uint32_t tried, uint32_t hint);
/* What an answer teaches: the node is up; unless any_replica, it leads. */
void rt_note_answer(rt_router *rt, uint32_t group, uint32_t from, bool any_replica);

/* ------------------------------------------------------------------------ */
/* The client listener (server.c)                                            */
/* ------------------------------------------------------------------------ */

typedef struct rt_server rt_server;
typedef struct rt_lanes rt_lanes;

/* The fast path's state for one request (fast.c). */
typedef struct rt_fast {
	rt_node *node; /* the node it is sent to */
	uint32_t group;
	uint32_t slot; /* the operation's metrics slot */
	bool any_replica;
	uint8_t hdr[40]; /* its NodeRequest's fields before the client's Request */
	uint8_t hdr_len;
	struct rt_rctx *next; /* the node's queue, then the lane's message */
} rt_fast;

/* One REP context and the request it is handling (server.c's state
 * machine; fast.c drives the RC_NODE part). */
typedef struct rt_rctx {
	rt_server *s;
	nng_ctx ctx;
	nng_aio *aio; /* callback: server.c's rctx_cb */
	int state;    /* server.c's enum */
	sh_arena arena;
	nng_msg *msg;         /* the client's request, while in hand */
	int64_t t0_us;        /* received (latency metrics) */
	int64_t deadline;     /* monotonic ms: the request's deadline on both paths */
	struct rt_rctx *next; /* worker queue */
	rt_fast fast;
	/* A record without a REP context of its own (rt_server_record: a member
	 * of a client's Request batch, an HTTP request): where its answer goes
	 * instead (done(x, answer), answer NULL when none could be built), and
	 * a member's answer until the batch's is sent. */
	void (*done)(struct rt_rctx *x, nng_msg *answer);
	void *done_arg;
	nng_msg *answer;
	struct rt_rctx *pool_next, *all_next; /* the server's record pool */
	/* A REP context answering a batch: its members, and how many have
	 * not answered yet. */
	struct rt_rctx **members;
	uint32_t n_members;
	atomic_uint pending;
} rt_rctx;

struct rt_server {
	rt_router *rt;
	nng_socket sock; /* REP */
	nng_listener listener;
	bool open;
	rt_rctx *ctxs;
	uint32_t n_ctxs;
	pthread_t *threads;
	uint32_t n_threads;
	/* Requests handed to the workers (FIFO), under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rt_rctx *head, *tail;
	bool quit;
	atomic_uint busy; /* requests received and not yet answered */
	rt_lanes *lanes;  /* the fast path's node queues and lanes (fast.c) */
	/* Records (rt_server_record): idle ones, and every one allocated. */
	pthread_mutex_t pool_mu;
	rt_rctx *pool, *all;
};

/* A client's Request batch holds at most this many requests; a member whose
 * arena grew past RT_MEMBER_ARENA_KEEP frees it when done. */
#define RT_CLIENT_BATCH_MAX  1024
#define RT_MEMBER_ARENA_KEEP (256u * 1024)

/* Listens on url, starts rt->opt.workers worker threads and posts a receive
 * on rt->opt.contexts REP contexts (main thread). */
int rt_server_start(rt_server *s, rt_router *rt, const char *url, char *errmsg);
/* Stops accepting connections, waits up to drain_ms for requests in
 * progress, then closes the socket, joins the workers and stops every aio
 * (main thread). */
void rt_server_stop(rt_server *s, uint32_t drain_ms);
/* For fast.c: answer the request in hand with `reply` (taken over) ... */
void rt_server_reply(rt_rctx *x, nng_msg *reply);
/* ... or hand it to a worker thread, which runs it through rt_handle_at from
 * the start, with the request's own start time and deadline. */
void rt_server_defer(rt_rctx *x);

/*
 * Requests that did not arrive on one of s's REP contexts -- the members of
 * a client's Request batch, and requests of the HTTP endpoint -- run in
 * records from s's pool, exactly as a REP context's request runs (fast
 * path, or a worker), with their answer handed to x->done instead of sent.
 * rt_server_record: a record with x->s set (NULL: out of memory); the
 * caller sets msg (a packed Request, taken over), t0_us, deadline, done and
 * done_arg, then rt_server_run(x).  done runs once, on whichever thread
 * answered (an nng callback or a worker), and may give x back with
 * rt_server_record_free (x is not touched after done returns).  Any thread.
 */
rt_rctx *rt_server_record(rt_server *s);
void rt_server_run(rt_rctx *x);
void rt_server_record_free(rt_server *s, rt_rctx *x);

/* ------------------------------------------------------------------------ */
/* The fast path (fast.c)                                                    */
/* ------------------------------------------------------------------------ */

/* Lanes per node for eventually consistent reads and for the rest (writes,
 * consistent reads); requests in one message and its bytes, at most.  Few
 * lanes make large batches: 8 write lanes cost more CPU and gave fewer puts
 * per second than 4, and 2 no fewer than 4, on the cluster benchmark. */
#define RT_LANES_READ  2
#define RT_LANES_WAIT  2
#define RT_LANES_MAX   4
#define RT_BATCH_MAX   64
#define RT_BATCH_BYTES (1u << 20)

/* Sets up s's node queues and lanes (before the listener starts); s->lanes
 * stays NULL when the fast path is off. */
int rt_fast_open(rt_server *s, char *errmsg);
/* Tries to run x's request on the fast path: true if it was taken (it ends
 * with rt_server_reply or rt_server_defer, maybe on another thread before
 * this returns), false if it is not for the fast path (the caller defers
 * it).  nng callback thread. */
bool rt_fast_start(rt_rctx *x);
/* Between these, rt_fast_start on this thread queues requests without
 * starting a lane; the uncork starts idle lanes on what was queued, so the
 * members of a client's batch for one node leave in one message.
 * Nestable. */
void rt_fast_cork(void);
void rt_fast_uncork(void);
/* Stops every lane (waits for their callbacks) and frees them; requests
 * still queued are dropped.  After the listener closed and requests
 * drained, before the REP contexts stop. */
void rt_fast_close(rt_server *s);

/* ------------------------------------------------------------------------ */
/* Requests and the front door (front.c)                                     */
/* ------------------------------------------------------------------------ */

#define RT_MAX_OLD_SNAPS 8

typedef struct rt_req {
	rt_router *rt;
	sh_arena *a;
	const Shoal__Request *in;
	Shoal__Response *out;  /* the answer; handlers fill it or point it at a node's */
	int64_t deadline;      /* monotonic ms */
	rt_catalog_snap *snap; /* newest catalog seen by this request (referenced) */
	rt_catalog_snap *old_snaps[RT_MAX_OLD_SNAPS]; /* older ones still pointed into */
	uint32_t n_old;
	char errmsg[SH_ERRMSG_SIZE];
} rt_req;

/* Drops the request's catalog references (the front door, at the end). */
void rt_req_release(rt_req *r);

/* A handler returns SHOAL_OK with r->out filled, or an error code with
 * r->errmsg (the front door turns it into the answer). */
typedef int (*rt_handler)(rt_req *r);

typedef struct rt_op {
	Shoal__Request__OpCase op;
	const char *name;
	rt_handler handler; /* NULL: UnknownOperationException "X is not supported yet" */
} rt_op;

/* The operation table and the slot of an op in it (RT_OPS_MAX - 1 for ops
 * not in it). */
extern const rt_op rt_ops[];
extern const uint32_t rt_n_ops;
uint32_t rt_op_slot(Shoal__Request__OpCase op);
const char *rt_slot_name(uint32_t slot);

/* The front door: decodes buf (a packed shoal.Request), dispatches, and
 * packs the shoal.Response into *out (allocated in a).  Never fails to
 * produce an answer unless out of memory (then SHOAL_E_NOMEM and no
 * answer).  Worker thread. */
int rt_handle(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, uint8_t **out,
              size_t *out_len);
/* rt_handle for a request received at t0_us (rt_now_us) with its deadline
 * (rt_now_ms clock) already set: the fast path's fallback. */
int rt_handle_at(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, int64_t t0_us,
                 int64_t deadline_ms, uint8_t **out, size_t *out_len);
/* The same front door for a decoded Request (borrowed; it must live in a or
 * outlive the call): dispatch, metrics, and the answer (in a, request_id
 * copied), or NULL when out of memory.  rt_handle is unpack + this + pack.
 * Worker thread. */
Shoal__Response *rt_handle_request(rt_router *rt, sh_arena *a, const Shoal__Request *in);

/* Finds a table: the cached catalog first, a refresh from group 0 when the
 * name is unknown (or force).  SHOAL_E_NOT_FOUND "Requested resource not
 * found: Table: X not found". */
int rt_table_lookup(rt_req *r, const char *name, bool force, const rt_table **out);
/* Reloads the catalog from group 0 unless a reload that started after this
 * call's start has already finished. */
int rt_catalog_refresh(rt_router *rt, int64_t deadline, char *errmsg);

/* Repair: a data group answered ResourceNotFound for `tables` (as the
 * request routed them).  Refreshes the catalog; if every table still exists
 * with the same id, re-sends its definition to `group` and returns SHOAL_OK
 * (the caller retries once); else SHOAL_E_NOT_FOUND. */
int rt_repair(rt_req *r, uint32_t group, const rt_table *const *tables, uint32_t n);

/* The group owning partition-key value pk of a table. */
uint32_t rt_group_of(const rt_router *rt, uint32_t table_id, const st_value *pk);
/* Every data group (those holding partitions), in order; returns the count. */
uint32_t rt_data_groups(const sh_cluster_conf *c, uint32_t *groups);
/* Builds an error response for code/msg in the arena. */
Shoal__Response *rt_error_response(sh_arena *a, int code, const char *msg);

/* Forwards the client's request unchanged to `group` (NodeRequest with
 * index_shard = shard); the node's Response becomes the answer.  A
 * ResourceNotFound for table t (may be NULL) repairs the group and retries
 * once.  items.c. */
int rt_forward(rt_req *r, const rt_table *t, uint32_t group, bool any_replica, uint32_t shard);

/* Handlers. */
int rt_get_item(rt_req *r);
int rt_put_item(rt_req *r);
int rt_update_item(rt_req *r);
int rt_delete_item(rt_req *r);
int rt_query(rt_req *r);
int rt_scan(rt_req *r);
int rt_batch_get_item(rt_req *r);
int rt_batch_write_item(rt_req *r);
int rt_create_table(rt_req *r);
int rt_describe_table(rt_req *r);
int rt_list_tables(rt_req *r);
int rt_delete_table(rt_req *r);
int rt_cluster_status(rt_req *r);
int rt_update_table(rt_req *r);

/* ------------------------------------------------------------------------ */
/* Secondary indexes (index.c; activation in tables.c)                       */
/* ------------------------------------------------------------------------ */

/* Query with IndexName (q validated by wire_query_req_from_pb, t found). */
int rt_index_query(rt_req *r, const rt_table *t, const st_query_req *q);

/* The checks every read of index `index` of *t makes, in order: the index
 * exists (after a catalog refresh: "The table does not have the specified
 * index: X"), no ConsistentRead on a GSI ("Consistent reads are not
 * supported on global secondary indexes"), and a CREATING GSI is activated
 * if its backfill is complete, else "Cannot read from backfilling global
 * secondary index: X".  *t may be replaced by a newer catalog entry. */
int rt_index_resolve(rt_req *r, const rt_table **t, const char *index, bool consistent,
                     const st_index_def **out);

/* ReturnConsumedCapacity of a read the router assembled from several node
 * answers (scan partitions, write shards): `bytes` is the sum of their
 * NodeResponse.read_bytes, charged once to the table or to index x (NULL:
 * the table).  *out is NULL when rcc is NONE.  SHOAL_E_NOMEM only (scan.c). */
int rt_read_capacity(rt_req *r, wire_rcc rcc, const rt_table *t, const st_index_def *x,
                     uint64_t bytes, bool consistent, Shoal__ConsumedCapacity **out);

/* Activation of a CREATING GSI: asks every data group's leader for its
 * GroupStatus; when each reports the index backfill_done with
 * outbox_shipped >= backfill_seq, sends activate_index to group 0, the new
 * definition to every data group, and refreshes the catalog; *active tells
 * whether the index is ACTIVE now.  A data group whose copy of the table
 * does not know the index yet gets the definition again. */
int rt_index_try_activate(rt_req *r, const rt_table *t, const char *index, bool *active);

/* The group of write shard `shard` of GSI x's partition-key value gsi_pk. */
uint32_t rt_index_group(const rt_router *rt, uint32_t table_id, const st_index_def *x,
                        uint32_t shard, const st_value *gsi_pk);
/* The placement hash at which a Scan of index x resumes after `key` (an
 * ExclusiveStartKey with the table's and the index's keys); false if key
 * does not hold them (the node then refuses it in DynamoDB's words). */
bool rt_index_start_hash(const rt_table *t, const st_index_def *x, const st_value *key,
                         uint64_t *hash);
/* Does expression text expr use placeholder tok ("#n", ":v") (pure)? */
bool rt_expr_mentions(const char *expr, const uint8_t *tok, size_t len);

/* Merging the pages of a write-sharded GSI Query (pure).  Each page holds a
 * shard's items in the query's order and its LastEvaluatedKey (NULL: the
 * shard is exhausted).  cmp orders two entries as st_index_entry_cmp does
 * (ascending).  The result keeps, in the query's order (ascending when
 * forward), every item up to the first LastEvaluatedKey position any shard
 * returned (past it the merged order is incomplete), at most limit items
 * (0: no limit), and no item after the kept ones reach max_bytes (by
 * st_item_size; 0: no bound).  more: entries may follow the kept ones (the answer needs a
 * LastEvaluatedKey); resume: when more and nothing was kept, the position to
 * resume at (that first LastEvaluatedKey).  Memory from a; SHOAL_E_NOMEM. */
typedef struct rt_shard_page {
	const st_value *items;
	uint32_t n;
	const st_value *last_key;
} rt_shard_page;

typedef int (*rt_entry_cmp)(const void *ctx, const st_value *a, const st_value *b);

typedef struct rt_merge {
	const st_value **items;
	uint32_t n;
	bool more;
	const st_value *resume;
} rt_merge;

int rt_shard_merge(const rt_shard_page *pages, uint32_t n_pages, rt_entry_cmp cmp, const void *ctx,
                   bool forward, uint32_t limit, size_t max_bytes, sh_arena *a, rt_merge *out);

/* ------------------------------------------------------------------------ */
/* Scan planning (scan.c, pure)                                              */
/* ------------------------------------------------------------------------ */

/* Segment s of n covers [ceil(s * 2^64 / n), ceil((s + 1) * 2^64 / n) - 1];
 * n == 0 (not segmented) covers everything. */
void rt_segment_range(uint32_t segment, uint32_t total, uint64_t *lo, uint64_t *hi);

typedef struct rt_scan_plan {
	uint64_t lo, hi;      /* the hashes the scan covers */
	uint32_t first, last; /* partitions intersecting [lo, hi], in hash order */
	uint32_t start;       /* partition to begin with (the start key's, or first) */
} rt_scan_plan;

/* Plans a scan of segment/total; with a start key, begins in the partition
 * of its hash.  False if that hash lies outside the segment. */
bool rt_scan_plan_init(const sh_cluster_conf *c, uint32_t segment, uint32_t total, bool has_start,
                       uint64_t start_hash, rt_scan_plan *out);
/* The hashes of partition p that the scan covers (p in [first, last]). */
void rt_scan_part_range(const sh_cluster_conf *c, const rt_scan_plan *plan, uint32_t p,
                        uint64_t *lo, uint64_t *hi);

/* What to do after one partition's page. */
typedef enum rt_scan_step {
	RT_SCAN_NEXT = 0, /* go on with the next partition */
	RT_SCAN_DONE,     /* the scan is complete: no LastEvaluatedKey */
	RT_SCAN_PAGE,     /* the partition's page was cut: its LastEvaluatedKey */
	RT_SCAN_RESUME,   /* stop here; LastEvaluatedKey = the partition's last key */
} rt_scan_step;

/* limit: 0 for none; scanned: items evaluated so far in total; bytes: size of
 * what was accumulated; page_cut: the partition returned LastEvaluatedKey;
 * more: partitions remain after this one. */
rt_scan_step rt_scan_after(uint32_t limit, uint32_t scanned, size_t bytes, bool page_cut,
                           bool more);

/* ------------------------------------------------------------------------ */
/* Batches (batch.c, pure parts)                                             */
/* ------------------------------------------------------------------------ */

/* One key of a batch: its table (index in the request), where it goes, and
 * its key values for the duplicate check. */
typedef struct rt_batch_key {
	uint32_t table;
	uint32_t group;
	const st_value *pk;
	const st_value *sk; /* NULL without a sort key */
} rt_batch_key;

/* Index of the first key that repeats an earlier one of the same table, or
 * -1 if none. */
int rt_batch_find_duplicate(const rt_batch_key *keys, uint32_t n);
/* Splits keys by group: part_of[i] is the part of key i; groups[p] the group
 * of part p, parts in order of first appearance; returns the number of
 * parts. */
uint32_t rt_batch_split(const rt_batch_key *keys, uint32_t n, uint32_t *part_of, uint32_t *groups);

#endif
