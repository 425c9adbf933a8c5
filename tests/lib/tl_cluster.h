/*
 * tl_cluster.h -- integration-test fixture: a real local cluster (shoal-node
 * and shoal-router processes on 127.0.0.1, started by deploy/cluster.sh, the
 * same script users run) and the real `shoal` CLI to talk to it.
 *
 * Binaries come from the build directory the test binary lives in
 * (<build>/tests/it_x -> <build>/bin).  Each cluster gets its own temporary
 * directory and a base port derived from the pid, so test binaries can run
 * side by side.  tl_cluster_down stops exactly the processes it started (by
 * pid file); a test that fails still tears down through the Check fixture.
 *
 * Credentials are on: every cluster's routers require signed requests
 * (cluster.sh up --credentials), with one random unrestricted key per test
 * process, exported as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_PROFILE
 * unset) once a cluster is up, so that libshoal clients, `shoal`, boto3,
 * the AWS CLI and the tools a test runs sign with it -- several clusters of
 * one process share it.  A test whose cluster options name credentials
 * itself ("--credentials FILE|auto", "--http-credentials") gets exactly
 * those and the environment is left alone; SHOAL_TEST_CREDENTIALS=0 runs
 * every other cluster open (no credentials), as before.
 *
 * SHOAL_TEST_TLS=1 gives every cluster TLS client ports too (cluster.sh up
 * --tls; not when the test's options say --plain or --tls): one CA per test
 * process for all its clusters, exported as AWS_CA_BUNDLE for libshoal and
 * the tools.  Traffic between the processes is TLS either way (cluster.sh's
 * default).
 */
#ifndef SHOAL_TL_CLUSTER_H
#define SHOAL_TL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct tl_cluster {
	char root[1024];    /* repository root */
	char bin[1024];     /* <build>/bin */
	char dir[1024];     /* cluster directory (pid files, logs, data) */
	char endpoint[512]; /* router endpoints, comma-separated */
	int base_port;
	int nodes, routers, groups;
	bool signed_by_test; /* started with the process's test key (above) */
} tl_cluster;

/* The process's test key (made on first use): what tl_cluster_up's clusters
 * accept and what it exports. */
const char *tl_test_key_id(void);
const char *tl_test_secret(void);
/* A copy (malloc'd, *out_len bytes) of the packed Request msg, signed with
 * the test key (the Auth field appended, proto/wire_auth.h) when c's
 * routers require it; for tests that send raw messages. */
uint8_t *tl_cluster_sign(const tl_cluster *c, const uint8_t *msg, size_t len, size_t *out_len);

/* Fills c->root and c->bin from where the test binary lives (done by the up
 * calls; for a caller that needs the script before a cluster exists). */
void tl_cluster_locate(tl_cluster *c);
/* Starts a cluster and waits until it serves; false (with the script's output
 * on stderr) if it did not. */
bool tl_cluster_up(tl_cluster *c, int nodes, int routers, int groups);
/* The same with more options of `cluster.sh up` (a shell fragment, e.g.
 * "--partition-wcu 200 --burst-secs 2"; NULL: none). */
bool tl_cluster_up_opts(tl_cluster *c, int nodes, int routers, int groups, const char *opts);
/* Stops every process and removes the directory.  A sanitizer report in any
 * process's log fails the test (tl_fail) and keeps the directory. */
void tl_cluster_down(tl_cluster *c);

bool tl_cluster_stop_node(tl_cluster *c, int id, bool hard);
/* Sends sig to process `what` ("node" or "router") id of the cluster, by the
 * pid in its pid file: kill()'s result, -1 (errno ENOENT) without a pid file.
 * SIGSTOP returns once every thread of the process is stopped (5 s at most). */
int tl_cluster_signal(const tl_cluster *c, const char *what, int id, int sig);
/* Whether every node and router the cluster started is still running (a
 * chaos test's check that none died of anything but its faults); else
 * what and id name the first one gone. */
bool tl_cluster_alive(const tl_cluster *c, const char **what, int *id);
bool tl_cluster_start_node(tl_cluster *c, int id);
/* Simulates a power loss of node id's machine: SIGKILL, then, for every
 * group's LMDB environment, what a machine crash may leave -- `pages`
 * random 4 KiB pages of data.mdb (meta pages included, one time in two)
 * overwritten with garbage (*seed advances) -- and a clean-close marker
 * rewritten with another boot id, as if the machine had rebooted
 * (storage/env_trust.c).  Raft's files are left as they are: raft_uv
 * fsyncs an entry before it counts.  Start the node again with
 * tl_cluster_start_node.  False if something could not be done. */
bool tl_cluster_power_loss(tl_cluster *c, int id, unsigned pages, unsigned *seed);
/* Moves node id's data directory onto a file system of its own (a tmpfs of
 * `mb` MiB; the node is stopped and started again), so that
 * tl_cluster_disk_fill can fill it; tl_cluster_down unmounts it.  Root. */
bool tl_cluster_node_fs(tl_cluster *c, int id, int mb);
/* Fills node id's file system (a file taking all but a page of the free
 * space), or with full false removes that file. */
bool tl_cluster_disk_fill(tl_cluster *c, int id, bool full);
bool tl_cluster_stop_router(tl_cluster *c, int id, bool hard);
bool tl_cluster_start_router(tl_cluster *c, int id);
/* `deploy/cluster.sh add-node`: one more node joins and serves.  Its output
 * (appended to <dir>/add.out) is returned (free it); the test fails if the
 * script does. */
char *tl_cluster_add_node(tl_cluster *c);

/* How many times `needle` appears in node id's log (D/node-<id>.log). */
int tl_cluster_log_count(const tl_cluster *c, int id, const char *needle);
/* The same in router id's log (D/router-<id>.log). */
int tl_cluster_router_log_count(const tl_cluster *c, int id, const char *needle);
/* The sum over the cluster's nodes (metrics addresses from D/cluster.ini;
 * nodes not answering count 0) of the samples of metric `name` whose label
 * group is `group` (-1: every sample). */
double tl_cluster_metric(const tl_cluster *c, const char *name, int group);
/* Node id's whole /metrics text (malloc'd), or NULL when it does not answer. */
char *tl_cluster_metrics_text(const tl_cluster *c, int id);

/* The number of `table` inside the cluster -- what placement hashes its keys
 * with (st_key_hash) -- from ClusterStatus (TableNumber; DescribeTable's
 * TableId is a UUID, as DynamoDB's), asked through client; 0 if no replica
 * reports the table. */
struct shoal_client;
uint32_t tl_table_number(struct shoal_client *client, const char *table);

/* The Count of every page of `op` (Query or Scan) asked through client with
 * the request's members `inner` (a JSON object's members, without braces:
 * Select COUNT is the caller's), each next page from the last one's
 * LastEvaluatedKey; a failed call fails the test. */
long long tl_count_pages(struct shoal_client *client, const char *op, const char *inner);

/* Runs `shoal --endpoint <endpoint> <args>` (args is a shell fragment, quoted
 * by the caller); captures stdout and stderr (malloc'd, caller frees; may be
 * NULL to discard).  Returns the exit code. */
int tl_shoal(const tl_cluster *c, char **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs a shell command; returns its exit code. */
int tl_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *tl_read_file(const char *path);

/* nng_dial of s to url (one of c's routers) as the cluster's clients dial
 * it: a tls+ URL with a TLS configuration that verifies the router against
 * the cluster's CA (SHOAL_TEST_TLS=1, or a test's --tls).  nng's result. */
int tl_cluster_dial(const tl_cluster *c, nng_socket s, const char *url);

/* A client that leaves a TLS listener on 127.0.0.1:port in the middle of
 * the handshake: it sends its last flight (ChangeCipherSpec, Finished) and
 * closes without reading the server's.  nng 1.5.2's TLS listener may then
 * stop accepting for good (common/tls.h sh_listen_guard; nanomsg/nng#1518);
 * in tries here it did within 3-19 such clients.  0, or mbedtls's error
 * (the connection or a handshake step failed). */
int tl_tls_leave_midway(int port);

#endif
