/*
 * cluster.h -- the cluster configuration file, placement and partitioning,
 * shared by shoal-node and shoal-router (prefix sh_).
 *
 * The file is INI (parsed with inih); example in deploy/cluster.example.ini:
 *
 *   [cluster]
 *   groups = 4              ; storage groups; group 0 is the metadata group
 *   max_groups = 80         ; group ids may grow to 79 (shoal admin add-group)
 *   replication = 3         ; replicas per group (<= number of nodes)
 *   partition_rcu = 3000    ; read / write units per second of one partition
 *   partition_wcu = 1000    ;   at most (a table's or GSI's; DynamoDB's limits)
 *   burst_secs = 300        ; unused capacity a partition keeps for bursts
 *
 *   [node.1]
 *   raft = 127.0.0.1:7100   ; Raft base address: group g listens on port + g
 *   rpc = tcp://127.0.0.1:7200     ; nng REP socket for routers
 *   metrics = 127.0.0.1:7300       ; Prometheus text over HTTP (optional)
 *   dir = /var/lib/shoal/node1     ; data directory (optional, overridable)
 *
 *   [router]
 *   listen = tcp://127.0.0.1:8100  ; client endpoint (one per router: --listen overrides)
 *   metrics = 127.0.0.1:8101
 *
 *   [tls]
 *   dir = /etc/shoal/tls    ; mutual TLS on every node RPC and Raft port (tls.h)
 *
 * Placement is a pure function of the file, so every process computes the same
 * answer without asking anyone: group g's replicas are nodes (g + k) mod N for
 * k = 0 .. replication-1 (by position in the file), which spreads groups and
 * their first replicas evenly over the nodes.
 *
 * Partitioning: every table is split into D = groups - 1 partitions (group 0
 * only holds the catalog; with groups == 1 the single group holds data too).
 * Partition i covers the placement hashes [ceil(i * 2^64 / D),
 * ceil((i + 1) * 2^64 / D) - 1] and lives in group 1 + i.  The map is thus
 * fixed by the configuration; its epoch is the configuration's (a later issue
 * adds splitting and moving partitions, with epochs in the catalog).
 */
#ifndef SHOAL_COMMON_CLUSTER_H
#define SHOAL_COMMON_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#define SH_MAX_NODES            64
#define SH_MAX_GROUPS           1024
#define SH_MAX_REPLICATION      7
#define SH_ADDR_MAX             128
#define SH_PATH_MAX             1024
#define SH_PARTITION_RCU        3000
#define SH_PARTITION_WCU        1000
#define SH_BURST_SECS           300
#define SH_SCRUB_MS             10000         /* [cluster] scrub_ms by default */
#define SH_TTL_SCAN_MS          60000         /* [cluster] ttl_scan_ms by default */
#define SH_TTL_SHARE            10            /* [cluster] ttl_share by default (percent) */
#define SH_DEAD_AFTER_MS        300000        /* [cluster] dead_after_ms by default (5 minutes) */
#define SH_SPLIT_BYTES          (10ull << 30) /* [cluster] split_bytes by default (10 GiB) */
#define SH_TABLE_PARTITIONS_MAX 4096          /* [cluster] table_partitions at most */
#define SH_SPLIT_THROTTLED      10            /* [cluster] split_throttled by default */

typedef struct sh_node_conf {
	uint32_t id;                 /* from the section name [node.<id>], >= 1 */
	char raft_host[SH_ADDR_MAX]; /* "127.0.0.1" */
	uint16_t raft_port;          /* base port: group g uses raft_port + g */
	char rpc[SH_ADDR_MAX];       /* nng URL, "tcp://127.0.0.1:7200" */
	char metrics[SH_ADDR_MAX];   /* "host:port" or "" */
	char dir[SH_PATH_MAX];       /* "" if not given */
} sh_node_conf;

typedef struct sh_cluster_conf {
	uint32_t groups;
	/* [cluster] max_groups: the ids groups may have, 0 .. max_groups-1,
	 * counting the groups created after the birth (shoal admin add-group,
	 * the planner); each node's Raft ports raft_port .. raft_port +
	 * max_groups - 1 are the cluster's.  0 or <= groups: no group beyond
	 * the file's (sh_cluster_group_cap). */
	uint32_t max_groups;
	/* [cluster] auto_groups = 1: group 0's executor creates groups itself
	 * (below max_groups) while the cluster has fewer data groups than
	 * active nodes, and fills each new one with a partition
	 * (common/cluster_plan.h, step 7).  Off by default: each group costs
	 * every replica's node its Raft log segments (~100 MiB) and a move. */
	bool auto_groups;
	uint32_t replication;
	/* [cluster] outbox_limit: index deltas a group may hold unshipped before
	 * its base writes are throttled (0: the node's default; shoal-node
	 * --outbox-limit overrides it). */
	uint64_t outbox_limit;
	/* [cluster] raft_segment_mb: size of each group's Raft log segments in
	 * MiB (0: the node's default, NODE_RAFT_SEGMENT_MB). */
	uint32_t raft_segment_mb;
	/* [cluster] snapshot_entries: the most Raft entries a group's log takes
	 * between snapshots (0: the node's default, NODE_SNAPSHOT_THRESHOLD;
	 * the node takes fewer when entries are large).  Small in tests that
	 * need snapshots to be taken and installed. */
	uint32_t snapshot_entries;
	/* [cluster] scrub_ms: how often each group's leader proposes the next
	 * range of the replica scrub (node/scrub.c), in ms; 0: no scrub.
	 * Without scrub_set, the default SH_SCRUB_MS. */
	uint32_t scrub_ms;
	bool scrub_set;
	/* [cluster] stream_retention_s: how long DynamoDB Streams records are
	 * kept (0: 24 hours, DynamoDB's). */
	uint32_t stream_retention_s;
	/* [cluster] ttl_scan_ms: the pause between two passes of a group's
	 * leader over its tables with Time to Live (node/ttl.c), in ms; 0: no
	 * expiry.  Without ttl_scan_set, SH_TTL_SCAN_MS.  [cluster] ttl_share:
	 * the percentage (1..100) of a partition's write limit (partition_wcu)
	 * that expiry may use; 0 in the struct: SH_TTL_SHARE. */
	uint32_t ttl_scan_ms;
	bool ttl_scan_set;
	uint32_t ttl_share;
	/* [cluster] dead_after_ms: how long a node of the cluster map must be
	 * unreachable before group 0's executor re-creates its replicas
	 * elsewhere (node/elastic.c); 0 in the struct: SH_DEAD_AFTER_MS (as
	 * CockroachDB's 5 minutes: a restart or a short partition moves
	 * nothing).  At least 1000. */
	uint32_t dead_after_ms;
	/* [cluster] ttl_change_interval_ms: how long after a table's TTL
	 * setting changed another UpdateTimeToLive is refused (0: never);
	 * without ttl_change_interval_set, DynamoDB's hour
	 * (ST_TTL_CHANGE_INTERVAL_MS).  Short in tests. */
	uint32_t ttl_change_interval_ms;
	bool ttl_change_interval_set;
	/* [cluster] partition_rcu / partition_wcu: the most read / write units
	 * per second one partition (of a table or a GSI) serves, whatever the
	 * table's capacity (DynamoDB: 3000 / 1000).  0 in the struct: the
	 * defaults SH_PARTITION_RCU / SH_PARTITION_WCU. */
	uint64_t partition_rcu, partition_wcu;
	/* [cluster] burst_secs: how many seconds of unused capacity a
	 * partition keeps for bursts (DynamoDB: 300; 0: none).  Without
	 * burst_set, the default SH_BURST_SECS. */
	uint32_t burst_secs;
	bool burst_set;
	/* Automatic splits by group 0's executor (node/elastic.c):
	 * [cluster] split_bytes: a map partition larger than this is split
	 *   (0: no size splits); without split_bytes_set, SH_SPLIT_BYTES,
	 *   DynamoDB's 10 GiB partitions.
	 * [cluster] split_units: read + write units per second, averaged over
	 *   the executor's window, above which a partition is split for heat
	 *   (0, the default: off -- a partition's limits are partition_rcu
	 *   for reads and partition_wcu for writes, so one sum cannot say when
	 *   it is at its limit; split_throttled does).
	 * [cluster] split_throttled: requests per second throttled at the
	 *   partitions' limit (partition_rcu / partition_wcu times the
	 *   partitions a group holds; not at a provisioned table's rate, which a
	 *   split does not raise), averaged over the window, above which a
	 *   partition is split for heat, as DynamoDB splits for heat by itself
	 *   (0: off); without split_throttled_set, SH_SPLIT_THROTTLED. */
	uint64_t split_bytes;
	bool split_bytes_set;
	uint64_t split_units;
	uint32_t split_throttled;
	bool split_throttled_set;
	/* [cluster] table_partitions: how many partitions a new table starts
	 *   with (0, the default: D, placed statically until a split needs the
	 *   map).  Rounded up to a multiple of D, each static range cut into
	 *   equal parts that stay in its group (sh_cluster_table_partitions),
	 *   so nothing moves; group 0's executor writes them into the cluster
	 *   map as the table appears, and the planner moves and splits them one
	 *   by one. */
	uint32_t table_partitions;
	uint32_t n_nodes;
	sh_node_conf nodes[SH_MAX_NODES]; /* in file order */
	char router_listen[SH_ADDR_MAX];
	char router_metrics[SH_ADDR_MAX];
	/* [tls] dir: the cluster's certificates (common/tls.h); "" for plain
	 * traffic between the cluster's processes. */
	char tls_dir[SH_PATH_MAX];
} sh_cluster_conf;

/* Parses the file; errors name the line and the problem. */
int sh_cluster_load(const char *path, sh_cluster_conf *out, char *errmsg);

/* One more than the largest group id the cluster may use: max(groups,
 * max_groups).  Arrays indexed by group id are this long. */
uint32_t sh_cluster_group_cap(const sh_cluster_conf *c);

/* The node with this id, or NULL. */
const sh_node_conf *sh_cluster_node(const sh_cluster_conf *c, uint32_t id);

/* Fills nodes[0 .. replication-1] with the ids of group g's replicas. */
void sh_cluster_replicas(const sh_cluster_conf *c, uint32_t group, uint32_t *nodes);

/* Whether node id hosts a replica of group g. */
bool sh_cluster_hosts(const sh_cluster_conf *c, uint32_t node, uint32_t group);

/* [cluster] split_bytes / split_throttled with their defaults (0: off). */
uint64_t sh_cluster_split_bytes(const sh_cluster_conf *c);
uint32_t sh_cluster_split_throttled(const sh_cluster_conf *c);

/* Number of partitions of every table (D above). */
uint32_t sh_cluster_partitions(const sh_cluster_conf *c);
/* How many partitions a new table starts with: table_partitions rounded up
 * to a multiple of D (D when unset or smaller). */
uint32_t sh_cluster_table_partitions(const sh_cluster_conf *c);
/* [cluster] stream_retention_s in ms, or DynamoDB's 24 hours when unset. */
int64_t sh_cluster_stream_retention_ms(const sh_cluster_conf *c);
/* Partition index of a placement hash. */
uint32_t sh_cluster_partition_of(const sh_cluster_conf *c, uint64_t hash);
/* Inclusive hash range of partition p. */
void sh_cluster_partition_range(const sh_cluster_conf *c, uint32_t p, uint64_t *lo, uint64_t *hi);
/* The storage group holding partition p. */
uint32_t sh_cluster_partition_group(const sh_cluster_conf *c, uint32_t p);
/* The static partition group g holds (the inverse of the above): false for
 * a group that holds none (group 0 of a cluster with data groups). */
bool sh_cluster_group_partition(const sh_cluster_conf *c, uint32_t g, uint32_t *p);

#endif
