/*
 * router.h -- internals of shoal-router (router/, prefix rt_).  Private to
 * router/ and its unit tests.
 *
 * The router is stateless: clients send it shoal.Request over nng REQ/REP
 * (or DynamoDB JSON over HTTP), it finds the storage group that owns each
 * key (st_key_hash -> the table's partition in the cluster map -> group:
 * rt_base_group; a GSI's hash keeps the static placement), sends
 * shoal.NodeRequest to that group's leader (or any replica for eventually
 * consistent reads), follows NOT_LEADER hints, retries with backoff until a
 * deadline, and merges what several groups answer (Scan across partitions,
 * write shards, batches, table operations, cluster status).  The only state
 * it keeps is a cache: the catalog (table name -> id and key schema, from
 * group 0) and the believed leader of each group.
 *
 * One pipeline for every request (README "Layout" has the picture):
 *
 *   server.c / http.c   a request arrives (native bytes or DynamoDB JSON)
 *        |                 -> an rt_job
 *   job.c               decode -> step (the operation's plan) -> answer,
 *        |                 the job's state machine; one table of steps,
 *        |                 derived from the registry (proto/ops.h)
 *   items.c scan.c ...  the steps: validate, plan (which groups), issue
 *        |                 calls, collect their answers, merge
 *   call.c              one call to one group: target (leader cache),
 *        |                 attempts, retries (common/retry.h), backoff
 *   proto/lanes.c       the batching transport: per node and class, lanes
 *                          carrying NodeRequest batches
 *
 * Nothing blocks: a step that needs node answers (or a catalog refresh)
 * issues them and returns RT_WAIT; the last answer runs the step again, on
 * whichever nng callback thread delivered it.  A step is re-entered at its
 * own phase (j->phase), so the steps are small switch statements.
 *
 * Files, by responsibility:
 *   job.c        the job state machine, its table of steps, the answer,
 *                repair of a group that lost a table, table-recreated restarts
 *   call.c       node connections and lanes, calls and their retries,
 *                the leader cache
 *   catalog.c    catalog snapshots (pure), their asynchronous refresh from
 *                group 0, table lookup for a job
 *   items.c      GetItem, PutItem, UpdateItem, DeleteItem, Query (+ index.c)
 *   index.c      reads of secondary indexes: resolution, write-shard fan-out
 *                and its merge (pure)
 *   scan.c       Scan across partitions: planning (pure) and its step
 *   batch.c      BatchGetItem / BatchWriteItem: checks, split by group
 *                (pure), parts in parallel, merge
 *   tables.c     CreateTable, UpdateTable, DescribeTable, ListTables,
 *                DeleteTable, ClusterStatus, activation of backfilled GSIs
 *   server.c     the native listener: REP contexts, client batches
 *   http.c       the DynamoDB-compatible HTTP API (http.h)
 *   sigv4.c      AWS SigV4 verification and the credentials file (http.h)
 *   auth.c       native message signatures (proto/wire_auth.h), the
 *                derived-key cache, and authorization: the one check of what
 *                a principal may do, run by job.c's front door for both ports
 *   metrics.c    counters, Prometheus text, its HTTP endpoint
 *   log.c        timestamped lines on stderr
 *   main.c       command line, signals, start and stop
 *
 * Memory: each job has an arena that holds the decoded request, the calls,
 * every unpacked node answer and the answer being built; it is reset when
 * the job is recycled.  Messages built by steps point into other decoded
 * messages freely, since all of them die together with the arena.  The
 * arena is used only by the step (one thread at a time); call completions,
 * which may run concurrently on several threads, touch only their own call.
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
#include "common/placement.h"
#include "common/tls.h"
#include "common/errors.h"
#include "common/retry.h"
#include "proto/cluster.pb-c.h"
#include "proto/lanes.h"
#include "proto/ops.h"
#include "proto/wire.h"
#include "router/httpd.h"
#include "storage/route.h"
#include "storage/storage.h"

typedef struct rt_router rt_router;
typedef struct rt_job rt_job;
typedef struct rt_call rt_call;
struct rt_cred;
struct rt_creds; /* the credentials file (http.h) */

/* Who sent a request: the key whose signature verified, and the region of
 * its credential scope (for the ARNs of AccessDenied).  cred NULL: nobody
 * (no signature, or the router has no credentials file). */
typedef struct rt_principal {
	const struct rt_cred *cred;
	char region[64];
} rt_principal;

/* ------------------------------------------------------------------------ */
/* Options (main.c fills them; defaults from rt_options_default)             */
/* ------------------------------------------------------------------------ */

typedef struct rt_options {
	uint32_t contexts;         /* REP contexts: client messages in progress at once (256) */
	uint32_t attempt_ms;       /* answer timeout of one attempt at a node (2000) */
	uint32_t send_ms;          /* how long to wait for a connection to a node (500) */
	uint32_t deadline_ms;      /* per client request (10000) */
	uint32_t status_ms;        /* ClusterStatus / DescribeTable per-node timeout (1000) */
	uint32_t http_workers;     /* HTTP endpoint: threads for signatures and large JSON (4) */
	uint32_t http_head_ms;     /* HTTP: a request head must arrive within this (10000) */
	uint32_t http_body_ms;     /* HTTP: a body or answer may stall this long (30000) */
	uint32_t http_body_rate;   /* HTTP: a body's bytes a second, on average, at least (500) */
	uint32_t https_handshakes; /* HTTPS: connections one address may begin a second (100;
	                              0: no limit) */
} rt_options;

void rt_options_default(rt_options *o);

/* ------------------------------------------------------------------------ */
/* Time and logging (log.c)                                                  */
/* ------------------------------------------------------------------------ */

/* Monotonic milliseconds (deadlines) and microseconds (latencies). */
int64_t rt_now_ms(void);
int64_t rt_now_us(void);
/* Wall-clock milliseconds since the epoch (CreationDateTime). */
int64_t rt_wall_ms(void);
/* "2024-05-01T12:00:00.123Z shoal-router: <message>" on stderr. Any thread. */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Backoff between rounds of attempts at a group's replicas. */
#define RT_BACKOFF_MIN_MS 10
#define RT_BACKOFF_MAX_MS 200

/* ------------------------------------------------------------------------ */
/* Metrics (metrics.c)                                                       */
/* ------------------------------------------------------------------------ */

/* Per-operation series: one slot per registry operation, and "Unknown"
 * (requests that name none) in slot SHOAL_OP__COUNT. */
#define RT_OPS_MAX     (SHOAL_OP__COUNT + 1)
#define RT_LAT_BUCKETS 14 /* latency histogram bucket bounds (seconds), +Inf extra */

typedef struct rt_metrics {
	_Atomic uint64_t requests[RT_OPS_MAX];
	_Atomic uint64_t errors[RT_OPS_MAX][SHOAL_E__COUNT];
	_Atomic uint64_t lat_bucket[RT_OPS_MAX][RT_LAT_BUCKETS + 1];
	_Atomic uint64_t lat_sum_us[RT_OPS_MAX];
	_Atomic uint64_t retries[SH_OUT__COUNT]; /* by the outcome that caused them */
	_Atomic uint64_t repairs;                /* define_table re-sent to a data group */
	_Atomic uint64_t restarts;               /* jobs run again after "table recreated" */
	_Atomic uint64_t wrong_group;            /* node answers WRONG_GROUP (a partition moved) */
	_Atomic uint64_t leader_changes;
	_Atomic uint64_t client_batches; /* client messages carrying several requests */
	_Atomic uint64_t client_batched; /* ... and the requests they carried */
	_Atomic uint64_t txn_single;     /* TransactWriteItems in one group */
	_Atomic uint64_t txn_2pc;        /* ... across groups */
	_Atomic uint64_t txn_get_rounds; /* TransactGetItems rounds across groups */
	_Atomic uint64_t txn_get_waits;  /* ... pauses for held items */
	rt_httpd_stats http;             /* the HTTP endpoint's server (httpd.h) */
} rt_metrics;

/* Records one finished request of operation slot `slot` (any thread). */
void rt_metrics_request(rt_metrics *m, uint32_t slot, int code, int64_t micros);
/* The name of a slot ("GetItem", ..., "Unknown"). */
const char *rt_slot_name(uint32_t slot);
/* Writes the Prometheus text exposition of rt (its metrics and its lanes'
 * counters) into buf (at most cap bytes, NUL terminated); returns the
 * length it needed (like snprintf).  rt may be NULL (metrics only). */
size_t rt_metrics_render(const rt_metrics *m, const rt_router *rt, char *buf, size_t cap);
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
	int64_t dropped_ms;           /* in rt_catalog_snap.dropped: the deletion's time */
} rt_table;

/* An immutable catalog version: readers hold a reference while they use it,
 * so a refresh never frees what a request still points into. */
typedef struct rt_catalog_snap {
	atomic_int refs;
	sh_arena arena;   /* owns everything below */
	rt_table *tables; /* sorted by name (strcmp) */
	uint32_t n;
	/* Deleted tables whose streams are kept (TableDefine.dropped_ms): for
	 * the Streams operations only (router/stream.c). */
	rt_table *dropped;
	uint32_t n_dropped;
} rt_catalog_snap;

/* The cache and its refresh.  Refreshes are asynchronous and coalesced:
 * a job that needs "a catalog loaded after now" waits for the next refresh
 * that starts after it asked (rt_job_refresh). */
typedef struct rt_catalog {
	pthread_mutex_t mu;   /* guards everything below */
	rt_catalog_snap *cur; /* NULL until the first load */
	bool in_flight;       /* a refresh call is out */
	uint64_t started;     /* refreshes started */
	rt_job *waiters;      /* jobs waiting for a refresh (refresh_next) */
	rt_call *call;        /* the refresh in flight */
	sh_arena call_arena;  /* its memory */
} rt_catalog;

int rt_catalog_init(rt_catalog *c);
void rt_catalog_fini(rt_catalog *c);

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
/* Job j waits for a refresh that starts after this call; rt_job_refreshed
 * runs when it has finished (on another thread, never inside this call). */
void rt_catalog_refresh_for(rt_router *rt, rt_job *j);

/* ------------------------------------------------------------------------ */
/* Nodes, lanes and calls (call.c)                                           */
/* ------------------------------------------------------------------------ */

/* The classes of node requests, each with its own lanes per node:
 * eventually consistent reads (answered at once) and everything else
 * (writes and consistent reads, which wait for Raft), so that reads never
 * wait behind a commit.  Few lanes make large batches: 8 write lanes cost
 * more CPU and gave fewer puts per second than 4, and 2 no fewer than 4, on
 * the cluster benchmark. */
enum { RT_CLASS_READ = 0, RT_CLASS_WAIT, RT_CLASS__COUNT };
#define RT_LANES_READ  2
#define RT_LANES_WAIT  2
#define RT_BATCH_MAX   64
#define RT_BATCH_BYTES (1u << 20)

typedef struct rt_node {
	uint32_t id;
	char url[SH_ADDR_MAX];
	nng_socket sock; /* REQ, dialled without blocking; nng redials by itself */
	bool open;
	wire_lane_io io;
	wire_lanes lanes[RT_CLASS__COUNT];
	bool lanes_init[RT_CLASS__COUNT];
	/* Monotonic ms until which any-replica reads avoid this node: set when
	 * it could not be reached, so that reads do not pay a send timeout each
	 * (leader-bound calls still go where the leader is believed to be). */
	_Atomic int64_t down_until;
	/* Connections to it now (0 or 1: one dialer), counted by pipe events
	 * (call.c conn_cb); shoal_router_node_connections{node}. */
	atomic_int conns;
} rt_node;

/* Field numbers the router writes by hand around a client's packed Request
 * (no re-encoding), from the generated descriptors. */
typedef struct rt_fields {
	uint32_t nreq_group, nreq_request, nreq_any_replica, nreq_index_shard, nreq_table_id;
	uint32_t nreq_write_token;
	uint32_t nreq_batch, nresp_batch, nresp_response, nresp_leader;
	uint32_t resp_status, req_batch, resp_batch;
} rt_fields;

struct rt_router {
	sh_cluster_conf *conf; /* owned: partitions, options; never placement */
	/* The cluster map the router routes with (common/placement.h; map.c
	 * keeps it fresh): which nodes hold each group, where nodes listen.
	 * Starts as the cluster file's birth map. */
	sh_place *place;
	rt_options opt;
	rt_fields f;
	/* One entry per node of the map, ever: append-only (the file's nodes
	 * first, then nodes that joined, rt_node_add), never moved, so a
	 * pointer to one stays valid until rt_router_fini.  Entries
	 * [0, n_nodes) are fully built: n_nodes is stored with release order
	 * after the entry is, and readers load it with acquire order. */
	rt_node nodes[SH_MAX_NODES];
	_Atomic uint32_t n_nodes;
	pthread_mutex_t nodes_mu; /* serialises rt_node_add and rt_router_close */
	bool nodes_mu_init;
	struct rt_mapper *mapper;        /* the map refresher (map.c) */
	_Atomic uint32_t *leader;        /* per group: node believed to lead it */
	_Atomic uint32_t rr;             /* round robin for any-replica reads */
	uint8_t nonce[16];               /* random, at start: ids are unique to this router */
	_Atomic(struct rt_ackq *) *ackq; /* per coordinator group: acks to send (txn.c) */
	_Atomic uint64_t ids;            /* ids handed out (rt_new_id) */
	rt_catalog catalog;
	/* DescribeEndpoints' Address (limits.c): "host:port" of the client
	 * endpoint, set by main.c before any listener starts. */
	char endpoint[SH_ADDR_MAX];
	rt_metrics metrics;
	nng_http_server *http; /* metrics endpoint, or NULL */
	/* The credentials file (main.c owns it; set before any listener
	 * starts): every request on every port must be signed by one of its
	 * keys and is authorized against its grants (auth.c).  NULL: local
	 * development, anyone may do anything. */
	const struct rt_creds *creds;
	/* The cluster's TLS ([tls] of the cluster file; common/tls.h): the
	 * router dials nodes with router.pem, and a tls+tcp:// client
	 * listener presents it.  NULL: plain (a warning at start). */
	sh_tls *tls;
	sh_tls tls_store;
	_Atomic bool stopping;
	/* Jobs and catalog refreshes in progress (rt_router_fini waits). */
	atomic_uint busy;
	/* Idle jobs (rt_job_get / rt_job_put): at most RT_JOB_POOL_KEEP of
	 * them holding at most RT_JOB_POOL_BYTES of arenas. */
	pthread_mutex_t pool_mu;
	bool pool_init;
	rt_job *pool;
	uint32_t n_pool;
	size_t pool_bytes;
};

/* How the router talks to the nodes (TLS or plain), for `shoal status`. */
const char *rt_traffic_describe(const rt_router *rt);

/* Initialises the router's connections, lanes and leader cache for conf
 * (taken over), with options o. */
int rt_router_init(rt_router *rt, sh_cluster_conf *conf, const rt_options *o, char *errmsg);
/* Stops sending: calls in flight and new ones fail at once (so every job
 * ends soon).  Idempotent; any thread. */
void rt_router_close(rt_router *rt);
/* rt_router_close, waits for jobs to end, frees. */
void rt_router_fini(rt_router *rt);

rt_node *rt_node_by_id(rt_router *rt, uint32_t id);
/* Adds (and dials, TLS as the others) an rt_node for a node that appeared
 * in the map; nothing if it has one.  SHOAL_E_LIMIT_EXCEEDED past SH_MAX_NODES,
 * SHOAL_E_UNAVAILABLE when the router is stopping, or nng's failure.  Any
 * thread (serialised by nodes_mu). */
int rt_node_add(rt_router *rt, uint32_t id, const char *rpc, char *errmsg);
/* Group g's voters from the map, the preferred leader first, into
 * nodes[SH_MAX_REPLICATION]; returns how many (0: no such group). */
uint32_t rt_voters(rt_router *rt, uint32_t group, uint32_t *nodes);
/* A fresh 16-byte id, unique across routers and restarts (a write's
 * idempotency token, a transaction's id).  Any thread. */
void rt_new_id(rt_router *rt, uint8_t out[16]);
/* Placement: the one answer to "which group serves this hash".
 *   rt_base_group  a table's base hash (st_key_hash: its items and their
 *                  LSI entries): the map's partitions of the table, or the
 *                  static placement when the map has none
 *                  (sh_place_route); a partition being moved is still
 *                  served by its group until the cutover.
 *   rt_gsi_group   a GSI hash (st_index_hash): the map's partitions of the
 *                  GSI space (SH_MAP_GSI_SPACE), static until one moves
 *                  (sh_cluster_partition_*), never the table's partitions.
 *   rt_group_of    partition-key value pk of a table: rt_base_group of its
 *                  hash. */
uint32_t rt_base_group(const rt_router *rt, uint32_t table_id, uint64_t h);
uint32_t rt_gsi_group(const rt_router *rt, uint64_t h);
uint32_t rt_group_of(const rt_router *rt, uint32_t table_id, const st_value *pk);
/* Every data group of the router's cluster map (the birth's and those added
 * since: what may hold a table's partitions), ascending, into groups (room
 * for SH_MAX_GROUPS); returns the count. */
uint32_t rt_data_groups(rt_router *rt, uint32_t *groups);

/*
 * One request to one storage group.  A step creates it with rt_job_call (in
 * the job's arena), sets its request with rt_call_forward or
 * rt_call_request, and the job starts it when the step returns RT_WAIT.
 *
 *   state    event                                   next     (function)
 *   -------  --------------------------------------  -------  ------------
 *   ATTEMPT  plain answer (any status but below)     DONE     call_answer
 *   ATTEMPT  NOT_LEADER / UNAVAILABLE / timeout /
 *            unreachable / bad answer, time left     ATTEMPT  call_failed: next
 *                                                             replica at once, or
 *                                                    BACKOFF  after a full round
 *   ATTEMPT  ... no time left                        DONE     rc UNAVAILABLE
 *   BACKOFF  the wait ended                          ATTEMPT  call_attempt
 *   (only_node calls make one attempt: any failure is DONE, rc UNAVAILABLE)
 */
struct rt_call {
	wire_lane_item item; /* the attempt in a lane */
	rt_router *rt;
	rt_job *job;                    /* NULL: the catalog's own refresh */
	void (*done)(struct rt_call *); /* when DONE (set by rt_job_call) */
	struct rt_call *next;           /* the job's current wave, in order */
	struct rt_call *all_next;       /* every call of the job */
	struct rt_call *resend_next;    /* job.c: calls sent again after a repair */
	/* In: the target. */
	uint32_t group;
	bool any_replica;    /* eventually consistent read: any replica serves */
	uint32_t only_node;  /* nonzero: ask this node once, no retries */
	uint32_t attempt_ms; /* one attempt's timeout (0: the router's) */
	int64_t deadline;    /* monotonic ms (0: the job's) */
	bool table_checked;  /* carries table_id: WRONG_EPOCH restarts the job */
	/* Sending it twice does no harm (a write with a token, a transaction
	 * message): a write whose outcome is unknown (leadership lost after
	 * it was proposed) is sent again instead of failing. */
	bool idempotent;
	uint32_t sleep_ms; /* nonzero: no request, a pause (rt_job_sleep) */
	/* A pause that a newer map than wake_epoch ends early (job.c's wrong
	 * group); listed: in the map's sleepers (map.c, its sleep_mu). */
	bool wake_on_map, listed;
	uint64_t wake_epoch;
	struct rt_call *sleep_prev, *sleep_next;
	/* Tables whose ResourceNotFound the job repairs (once) and sends again. */
	const rt_table **tables;
	uint32_t n_tables;
	bool repaired;
	/* In: the NodeRequest's bytes (hdr, then body). */
	uint8_t hdr[64];
	size_t hdr_len;
	const uint8_t *body;
	size_t body_len;
	/* Progress. */
	int state;
	atomic_bool starting; /* inside rt_call_start */
	sh_retry retry;
	rt_node *node;  /* the attempt's target */
	uint64_t epoch; /* the map's epoch its replicas came from */
	nng_aio *timer;
	/* Out (valid when DONE). */
	int rc; /* SHOAL_OK: answered (ans set); else errmsg */
	char errmsg[SH_ERRMSG_SIZE];
	nng_msg *ans;              /* the NodeResponse's bytes (owned) */
	int code;                  /* the Response's status code (SHOAL_OK if none) */
	bool has_response;         /* the NodeResponse carries a Response */
	uint32_t answered_by;      /* node id */
	Shoal__NodeResponse *resp; /* rt_call_resp: unpacked into the job's arena */
};

/* The node a call to `group` tries first: its believed leader, or for an
 * eventually consistent read (any_replica) the leader when it is up, else
 * a live replica in round-robin order.  reps/n: the group's replicas. */
uint32_t rt_first_target(rt_router *rt, uint32_t group, bool any_replica, const uint32_t *reps,
                         uint32_t n);
/* What an attempt's failure teaches: an unreachable node is skipped by
 * any-replica reads for a while; a NOT_LEADER hint inside the group becomes
 * the believed leader. */
void rt_note_failure(rt_router *rt, uint32_t group, sh_outcome o, uint32_t tried, uint32_t hint);
/* What an answer from node `from` (node: its record, or NULL) teaches: the
 * node is up; unless any_replica, it leads. */
void rt_note_answer(rt_router *rt, rt_node *node, uint32_t group, uint32_t from, bool any_replica);

/* Starts a call whose request and `done` are set (the job does this for
 * its calls; catalog.c for its refresh).  done runs once, on any thread. */
void rt_call_start(rt_call *c);
/* The answer, unpacked into the job's arena on first use (step only);
 * NULL when the call failed or its bytes do not decode (c->rc, c->errmsg
 * say why then). */
Shoal__NodeResponse *rt_call_resp(rt_call *c, sh_arena *a);
/* Sends nr to group with retries for up to ms, answered to nobody (a
 * message whose loss only delays something: the transaction's acks).  nr
 * is packed at once.  SHOAL_E_NOMEM, SHOAL_E_UNAVAILABLE (stopping). */
int rt_call_detached(rt_router *rt, uint32_t group, Shoal__NodeRequest *nr, uint32_t ms);
/* Frees what a finished call holds (its answer message, its timer). */
void rt_call_release(rt_call *c);

/* ------------------------------------------------------------------------ */
/* The cluster map (map.c)                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The router's map (rt->place) moves forward three ways, all through
 * rt_map_offer: the refresher asks a node for map_get about once a second
 * (group 0's believed leader first, then the map's nodes in turn; with the
 * router's epoch, so that only a newer map is sent), and at
 * once when poked (a NOT_LEADER naming a node that is not a voter of the
 * group in the router's map, a node that could not be reached, a
 * WRONG_GROUP answer: a partition moved); an admin
 * change's answer carries the new map; ClusterStatus asks group 0 first.
 * An installed map gives each of its nodes an rt_node (rt_node_add).
 */

/* Creates rt->place from the file's birth map (rt_router_init). */
int rt_map_init(rt_router *rt, char *errmsg);
/* Starts the refresher (after the nodes are open); stops and joins it. */
int rt_map_start(rt_router *rt, char *errmsg);
void rt_map_stop(rt_router *rt);
void rt_map_fini(rt_router *rt);
/* Installs an encoded map if it is newer (1), else 0, or an error (bytes
 * that do not decode: SHOAL_E_SERIALIZATION); then adds the rt_nodes of
 * nodes it names that the router lacks.  Any thread. */
int rt_map_offer(rt_router *rt, const uint8_t *buf, size_t len, char *errmsg);
/* Asks the refresher for a refresh now (at most one each RT_MAP_MIN_MS). */
void rt_map_poke(rt_router *rt);
/* The same for a WRONG_GROUP answer (a partition is being cut over: its
 * range is refused until the router has the map that moved it), at most one
 * each RT_MAP_MOVED_MS -- kept apart from the other pokes (nodes down,
 * leaders unknown) so that a partitioned network never polls this fast. */
void rt_map_poke_moved(rt_router *rt);
/* Refreshes done and maps installed (metrics, tests). */
uint64_t rt_map_refreshes(const rt_router *rt);
/* A pause after a WRONG_GROUP (job.c) ends early when a map newer than
 * `epoch` is installed: the call (a sleep_ms call, before its timer starts)
 * is listed, and rt_map_offer aborts the timers of those listed -- *now
 * true instead if such a map is installed already.  call.c unlists it when
 * its timer ends (any thread). */
void rt_map_sleeper_add(rt_router *rt, rt_call *c, uint64_t epoch, bool *now);
void rt_map_sleeper_remove(rt_router *rt, rt_call *c);

#define RT_MAP_EVERY_MS 1000
#define RT_MAP_MIN_MS   100
#define RT_MAP_MOVED_MS 20
/* A step refused with WRONG_GROUP runs again after RT_MOVED_MIN_MS,
 * doubling up to RT_MOVED_MAX_MS: the range is refused only for its
 * cutover, and each rerun finds the map the last refresh brought. */
#define RT_MOVED_MIN_MS 5
#define RT_MOVED_MAX_MS 40
/* ... or as soon as a newer map is installed (rt_map_sleeper_add). */

/* ------------------------------------------------------------------------ */
/* Jobs (job.c)                                                              */
/* ------------------------------------------------------------------------ */

/* A step's "not yet": it issued calls (or a catalog refresh) and runs again
 * when they have finished.  Never a SHOAL_E_* code. */
#define RT_WAIT (-1)

typedef int (*rt_step)(rt_job *j);

/* Where a finished job's answer goes: the owner's callback (any thread).
 * It takes the answer with rt_job_answer_msg or rt_job_answer_pb and then
 * gives the job back (rt_job_put), or keeps it until it has sent. */
typedef void (*rt_job_done_fn)(rt_job *j);

/*
 * One client request, from decoding to its answer.
 *
 *   state    event                                       next     (function)
 *   -------  ------------------------------------------  -------  -------------
 *   NEW      rt_job_start: decodes, finds the step       STEP     job_step
 *   NEW      undecodable / unknown operation             ANSWER   job_finish
 *   STEP     step returns SHOAL_OK or an error           ANSWER   job_finish
 *   STEP     step returns RT_WAIT: calls issued          WAIT     job_launch
 *   STEP     step returns RT_WAIT: catalog refresh       REFRESH  rt_job_refresh
 *   WAIT     last call done, nothing to repair           STEP     job_resume
 *   WAIT     a call answered ResourceNotFound for a
 *            table the catalog has (first time)          REPAIR   repair_start
 *   WAIT     a call answered WRONG_EPOCH (the table
 *            was recreated; first time)                  REFRESH  restart
 *   STEP     step ends with WRONG_GROUP (a partition
 *            moved), time left                           WAIT     wrong_group:
 *                                                                 a pause, then
 *                                                                 STEP, phase 0
 *   STEP     ... no time left                            ANSWER   UNAVAILABLE
 *   REPAIR   catalog refreshed, definitions re-sent      WAIT     repair_resend
 *   REFRESH  the catalog refresh finished                STEP     job_refreshed
 *   ANSWER   the owner's done callback                   (owner)
 *
 * Invariants: a step runs on one thread at a time and only while nothing
 * of its job is in flight (pending == 0); the job's arena is touched only
 * by the step, job.c and the owner; every call of a wave runs its done
 * exactly once.
 */
struct rt_job {
	rt_router *rt;
	sh_arena arena;
	/* The request. */
	nng_msg *msg;             /* native: the packed Request (owned), else NULL */
	const uint8_t *req_bytes; /* the packed Request (rt_job_request_bytes) */
	size_t req_len;
	const Shoal__Request *in; /* decoded, in the arena */
	uint32_t slot;            /* the operation's registry index (metrics slot) */
	rt_step step;
	int64_t t0_us;    /* received */
	int64_t deadline; /* monotonic ms */
	/* Who sent it: set by the front door that verified its signature
	 * (server.c, http.c) before rt_job_start, which authorizes it. */
	rt_principal who;
	/* Progress. */
	int state;
	int phase; /* the step's own */
	void *st;  /* the step's state, in the arena */
	void *sub; /* a continuation's state (index.c's query), in the arena */
	uint32_t restarts;
	uint32_t wrong_group_ms; /* the wait before the next WRONG_GROUP rerun (0: none yet) */
	atomic_uint pending;
	rt_call *calls; /* the current wave, in order */
	rt_call *calls_tail;
	rt_call *all_calls; /* every call of the job (released at the end) */
	rt_call *resend;    /* REPAIR: the calls to send again */
	bool fresh;         /* the catalog was refreshed for this step */
	bool want_refresh;  /* the step asked for a refresh (rt_job_refresh) */
	int refresh_rc;
	char refresh_msg[SH_ERRMSG_SIZE];
	uint64_t refresh_need; /* catalog.c: the refresh this job waits for */
	rt_job *refresh_next;
	rt_catalog_snap *snap; /* newest catalog seen (referenced) */
	rt_catalog_snap *old_snaps[8];
	uint32_t n_old;
	/* The answer. */
	int code;
	char errmsg[SH_ERRMSG_SIZE];
	Shoal__Response *out; /* built by the step, or NULL ... */
	nng_msg *out_msg;     /* ... a node's Response passed on as it is */
	/* The owner. */
	rt_job_done_fn done;
	void *done_arg;
	nng_msg *answer; /* owners' use (a batch member's answer) */
	rt_job *pool_next;
	size_t pool_held; /* arena bytes it holds while in the pool */
};

/*
 * Idle jobs kept for reuse, so that the hot path allocates nothing: at most
 * RT_JOB_POOL_KEEP jobs (a client's batch may hold RT_CLIENT_BATCH_MAX
 * members: those beyond are freed when their batch ends) holding at most
 * RT_JOB_POOL_BYTES of arenas (a job returned past it keeps no arena); an
 * arena that grew past RT_JOB_ARENA_KEEP is freed instead of kept.  With
 * 64 requests in flight the pool serves every job; after six batches of
 * 1024 large members it used to hold 1024 jobs and their arenas (666 MB).
 */
#define RT_JOB_POOL_KEEP  256
#define RT_JOB_POOL_BYTES (16u * 1024 * 1024)
#define RT_JOB_ARENA_KEEP (256u * 1024)

/* A job from the router's pool (NULL: out of memory), and back. */
rt_job *rt_job_get(rt_router *rt);
void rt_job_put(rt_job *j);
/* Runs the request: the native bytes in msg (taken over), or a decoded
 * Request in (which must live in j's arena or outlive the job).  t0_us and
 * deadline: when it arrived and when it must be answered.  done runs once
 * with the answer, on any thread, possibly before this returns. */
void rt_job_start(rt_job *j, nng_msg *msg, const Shoal__Request *in, int64_t t0_us,
                  int64_t deadline, rt_job_done_fn done, void *done_arg);
/* The answer as a packed Response (taken over by the caller; NULL when
 * out of memory), or as a decoded one (in j's arena; NULL when out of
 * memory).  Once, after done. */
nng_msg *rt_job_answer_msg(rt_job *j);
Shoal__Response *rt_job_answer_pb(rt_job *j);
/* The answer's status code (after done). */
int rt_job_code(const rt_job *j);

/* For steps. */

/* A new call to `group` in this step's wave (NULL: out of memory).  It
 * starts when the step returns RT_WAIT. */
rt_call *rt_job_call(rt_job *j, uint32_t group);
/* The call carries the client's request unchanged (as packed), with the
 * table's id for the node's check (t may be NULL) and the write shard of an
 * index query; a ResourceNotFound for t is repaired once.  A single-item
 * write gets an idempotency token (rt_new_id): the call is idempotent. */
int rt_call_forward(rt_job *j, rt_call *c, const rt_table *t, uint32_t index_shard);
/* The call carries nr (packed now into the job's arena; nr's group and
 * any_replica are taken from the call).  Tables to repair: rt_call_repairs. */
int rt_call_request(rt_job *j, rt_call *c, Shoal__NodeRequest *nr);
void rt_call_repairs(rt_call *c, const rt_table **tables, uint32_t n);
/* The packed Request of the job (packed from j->in once when it came
 * decoded).  SHOAL_E_NOMEM. */
int rt_job_request_bytes(rt_job *j);
/* The step's answer is call c's Response as it is (success or the node's
 * refusal): returns SHOAL_OK, or c's failure (rc and errmsg). */
int rt_job_pass(rt_job *j, rt_call *c);
/* A step that reads group 0 and answers with what it answers (ListTables,
 * ListTagsOfResource, DescribeTimeToLive): phase 0 sends the request to
 * group 0 once `checked` (the request's own validation) is SHOAL_OK, or
 * fails with it; phase 1 passes group 0's answer on (rt_job_pass). */
int rt_job_forward0(rt_job *j, int checked);
/* The answer of call c for a step that reads its result: true with *resp
 * (an OK answer, unpacked into the job's arena); false when the step ends
 * here with *rc: c's failure, or the node's refusal passed on as the
 * answer (rt_job_pass). */
bool rt_call_ok(rt_job *j, rt_call *c, Shoal__NodeResponse **resp, int *rc);
/* The step pauses ms milliseconds (a call that sends nothing) and returns
 * RT_WAIT, or fails with NOMEM. */
int rt_job_sleep(rt_job *j, uint32_t ms);
/* The same, ended early by a map newer than epoch (rt_map_sleeper_add). */
int rt_job_sleep_for_map(rt_job *j, uint32_t ms, uint64_t epoch);
/* Fails the step with code and a message (returns code). */
int rt_job_fail(rt_job *j, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets the built answer's result (the step fills j->out, allocated by the
 * job) -- j->out is always there for the step to fill. */

/* Finds a table: the cached catalog first, a refresh from group 0 when the
 * name is unknown (or force) -- RT_WAIT while it refreshes (the step runs
 * again at the same phase and asks again).  SHOAL_E_NOT_FOUND "Requested
 * resource not found: Table: X not found". */
int rt_job_table(rt_job *j, const char *name, bool force, const rt_table **out);
/* Asks for a catalog refresh and returns RT_WAIT; the step runs again with
 * the new catalog (rt_job_table then looks there without asking again). */
int rt_job_refresh(rt_job *j);
/* catalog.c, when the refresh a job waited for has finished. */
void rt_job_refreshed(rt_job *j, int rc, const char *msg);

/* ------------------------------------------------------------------------ */
/* Authentication and authorization (auth.c)                                 */
/* ------------------------------------------------------------------------ */

/* A native message's signature (proto/wire_auth.h): verifies the Auth field
 * at the end of msg against c at wall-clock now_s and takes it off msg, so
 * that everything after reads the message the client signed.  SHOAL_OK
 * with *who set, or SHOAL_E_AUTH_* (the exception SigV4 would give, with
 * its message).  c NULL (no credentials file): an Auth is taken off
 * unchecked, and *who is nobody. */
int rt_auth_native(const struct rt_creds *c, nng_msg *msg, int64_t now_s, rt_principal *who,
                   char *errmsg);
/* Whether who may run request in (every table it touches: batches and
 * transactions check each), under rt->creds; SHOAL_OK when rt has no
 * credentials.  SHOAL_E_ACCESS_DENIED with DynamoDB's message ("User:
 * arn:aws:iam::<account>:user/<key> is not authorized to perform:
 * dynamodb:PutItem on resource: arn:aws:dynamodb:<region>:<account>:
 * table/<T> ..."), SHOAL_E_AUTH_MISSING when who is nobody.  Pure. */
int rt_auth_authorize(const rt_router *rt, const rt_principal *who, const Shoal__Request *in,
                      char *errmsg);
/* One line for the log and ClusterStatus: whether clients must sign. */
const char *rt_auth_describe(const rt_router *rt);

/* Builds an error response for code/msg in the arena. */
Shoal__Response *rt_error_response(sh_arena *a, int code, const char *msg);

/* A blocking front door for tests and tools: runs the packed Request buf and
 * packs the answer into *out (in a).  SHOAL_E_NOMEM only. */
int rt_handle(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, uint8_t **out,
              size_t *out_len);

/* ------------------------------------------------------------------------ */
/* The steps (one per registry operation: rt_step_<field>)                   */
/* ------------------------------------------------------------------------ */

#define RT_STEP_DECL(Name, field, CONST, cli, flags, node, summary) int rt_step_##field(rt_job *j);
SHOAL_OPS(RT_STEP_DECL)
#undef RT_STEP_DECL

/* ------------------------------------------------------------------------ */
/* Transactions (txn.c)                                                      */
/* ------------------------------------------------------------------------ */

typedef struct rt_ackq rt_ackq;

/* The acknowledgement that these participants of transaction id finished,
 * for its coordinator group: gathered with others of the same group and
 * sent as one TxnAcks when 64 are waiting or the oldest waited 5 ms (an
 * acknowledgement left waiting when traffic stops only delays the record's
 * expiry: recovery acknowledges for it).  Any thread. */
void rt_txn_ack(rt_router *rt, uint32_t coord, const uint8_t id[16], const uint32_t *groups,
                uint32_t n);
int rt_txn_init(rt_router *rt); /* rt_router_init; SHOAL_E_NOMEM */
void rt_txn_fini(rt_router *rt);

/* ------------------------------------------------------------------------ */
/* Secondary indexes (index.c; activation in tables.c)                       */
/* ------------------------------------------------------------------------ */

/* The checks every read of index `index` of a table makes, in order: the
 * index exists (after a catalog refresh: "The table does not have the
 * specified index: X"), no ConsistentRead on a GSI ("Consistent reads are
 * not supported on global secondary indexes"), and a CREATING GSI is
 * activated if its backfill is complete, else "Cannot read from
 * backfilling global secondary index: X".  A sub-step: call it at the same
 * phase until it returns something other than RT_WAIT; then r->t (maybe a
 * newer catalog entry) and r->x are set. */
typedef struct rt_resolve_sub rt_resolve_sub;
typedef struct rt_resolve {
	const rt_table *t;
	const st_index_def *x;
	const char *index;
	bool consistent;
	int phase;
	rt_resolve_sub *sub;
} rt_resolve;
int rt_index_resolve(rt_job *j, rt_resolve *r);

/* Query with IndexName: the step of a Query once its table is known. */
int rt_index_query(rt_job *j, const rt_table *t, const st_query_req *q);

/* ReturnConsumedCapacity of a read the router assembled from several node
 * answers (scan partitions, write shards): `bytes` is the sum of their
 * NodeResponse.read_bytes, charged once to the table or to index x (NULL:
 * the table).  *out is NULL when rcc is NONE.  SHOAL_E_NOMEM only. */
int rt_read_capacity(sh_arena *a, wire_rcc rcc, const rt_table *t, const st_index_def *x,
                     uint64_t bytes, bool consistent, Shoal__ConsumedCapacity **out);

/* Activation of a CREATING GSI (a sub-step, as rt_index_resolve): asks
 * every data group's leader for its GroupStatus; when each reports the
 * index backfill_done with outbox_shipped >= backfill_seq, sends
 * activate_index to group 0, the new definition to every data group, and
 * refreshes the catalog; a->active tells whether the index is ACTIVE now.
 * A data group whose copy of the table does not know the index yet gets
 * the definition again. */
/* Sub-step (tables.c): every data group's believed leader asked for its
 * GroupStatus in parallel with the short status timeout; a follower's
 * answer (stale leader cache) is followed by a question to the leader it
 * names.  Called again at the caller's phase until it returns something
 * other than RT_WAIT (zeroed first); then calls[0..n) hold the answers:
 * rt_status_of gives a call's GroupStatus (NULL: no answer), and
 * rt_table_stats a table's entry in it (NULL: the group lacks the table). */
typedef struct rt_statuses {
	int phase;
	uint32_t n;
	uint32_t groups[SH_MAX_GROUPS];
	rt_call *calls[SH_MAX_GROUPS];
	rt_call *again[SH_MAX_GROUPS];
	uint32_t slot[SH_MAX_GROUPS];
	uint32_t n_again;
} rt_statuses;
int rt_statuses_step(rt_job *j, rt_statuses *st);
/* A short deadline for status questions (the router's status_ms, within
 * the job's deadline), and a group_status call to group (only_node: that
 * replica, once; 0: the group's leader) -- ClusterStatus and DescribeTable. */
int64_t rt_status_deadline(const rt_job *j);
int rt_status_call(rt_job *j, uint32_t group, uint32_t only_node, rt_call **out);
const Shoal__GroupStatus *rt_status_of(rt_job *j, rt_call *c);
const Shoal__TableStats *rt_table_stats(const Shoal__GroupStatus *gs, const char *table);

/* Sub-step (tables.c): group 0's stored definition of a table sent to every
 * data group in parallel (define_table: creates the table there, or
 * redefines it with the same id), then the catalog refreshed.  A data group
 * that cannot be reached now is repaired later, on its first
 * ResourceNotFound (and for indexes, by rt_index_activate).  Called again at
 * the caller's phase until it returns something other than RT_WAIT; set
 * stored, op and name first (phase 0). */
typedef struct rt_define_all {
	int phase;
	const Shoal__TableDefine *stored;
	const char *op, *name;
	rt_call *calls[SH_MAX_GROUPS];
	uint32_t n;
} rt_define_all;
int rt_define_all_step(rt_job *j, rt_define_all *d);

typedef struct rt_activate_sub rt_activate_sub;
typedef struct rt_activate {
	const rt_table *t; /* may be NULL (no repair of a data group then) */
	const char *table, *index;
	bool active;
	int phase;
	rt_activate_sub *sub;
} rt_activate;
int rt_index_activate(rt_job *j, rt_activate *a);

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

/* A scan walks hash space: it reads the partition holding `start`, then
 * the one holding the hash after that partition's end, and so on up to hi,
 * looking each one up when it gets there (rt_base_group's partitions for
 * a table or an LSI, the static ones for a GSI) -- so partitions of any
 * size, and a map that changes between two pages, leave no gap. */
typedef struct rt_scan_plan {
	uint64_t lo, hi; /* the hashes the scan covers */
	uint64_t start;  /* where it begins: lo, or the start key's hash */
} rt_scan_plan;

/* Plans a scan of segment/total; with a start key, begins at its hash.
 * False if that hash lies outside the segment. */
bool rt_scan_plan_init(uint32_t segment, uint32_t total, bool has_start, uint64_t start_hash,
                       rt_scan_plan *out);
/* The hashes of partition part that the scan covers (part intersects
 * [plan->lo, plan->hi]); returns whether partitions follow it in the scan
 * (the next one holds *hi + 1). */
bool rt_scan_part_range(const rt_scan_plan *plan, const sh_place_part *part, uint64_t *lo,
                        uint64_t *hi);

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

/* ------------------------------------------------------------------------ */
/* The native listener (server.c)                                            */
/* ------------------------------------------------------------------------ */

typedef struct rt_server rt_server;
typedef struct rt_rctx rt_rctx;

struct rt_server {
	rt_router *rt;
	nng_socket sock;           /* REP */
	sh_listen_guard *listener; /* the listener, kept accepting (common/tls.h) */
	bool open;
	rt_rctx *ctxs;
	uint32_t n_ctxs;
	atomic_uint busy; /* messages received and not yet answered */
	/* Contexts whose answer waits to be sent (server.c: a connection may
	 * hold at most n_ctxs / RT_PIPE_SHARE of them). */
	atomic_uint sending;
	_Atomic uint64_t pipe_drops; /* messages dropped for their connection's share */
};

/* A client's Request batch holds at most this many requests. */
#define RT_CLIENT_BATCH_MAX 1024

/* Listens on url and posts a receive on rt->opt.contexts REP contexts. */
int rt_server_start(rt_server *s, rt_router *rt, const char *url, char *errmsg);
/* Stops accepting connections, waits up to drain_ms for requests in
 * progress, then closes the socket and stops every aio (main thread). */
void rt_server_stop(rt_server *s, uint32_t drain_ms);

#endif
