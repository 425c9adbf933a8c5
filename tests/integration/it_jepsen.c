/*
 * it_jepsen -- a Jepsen-style run (issue 17): a cluster on a real network
 * (every shoal-node and the router in its own network namespace,
 * cluster.sh up --netns), concurrent clients in the root namespace whose
 * operations are recorded as a history (tests/lib/tl_history.h), a seeded
 * nemesis of kernel and process faults, and the checkers:
 *
 *  - registers: item {PK "r<slot>.<gen>", v N}; ConsistentRead GetItem
 *    (read), PutItem of a fresh unique value (write), UpdateItem SET v with
 *    ConditionExpression on the current value (cas; expected nil:
 *    attribute_not_exists(PK)).  Linearizable per key.
 *  - lists: item {PK "l<slot>.<gen>", l L}; UpdateItem
 *    SET l = list_append(if_not_exists(l, :empty), :x) of a unique element
 *    (append) and ConsistentRead GetItem (read-list): no lost, duplicated or
 *    reordered append.
 *
 * Outcomes are raw (client retries 0, throttle_retries 0, one attempt per
 * call: attempt_timeout_ms = deadline_ms so nng never resends): ok;
 * ConditionalCheckFailedException is an ok cas that did not swap; a
 * ValidationException (refused before anything could apply) is fail; any
 * other error (timeout, ServiceUnavailable, InternalServerError) is info.
 * A failed read is fail (a read changes nothing).
 *
 * Each key takes at most PER_KEY operations, then its slot moves on to a
 * fresh key (the next generation), as Jepsen's independent keys do: the
 * checker's search grows with the overlap in one key's history.
 *
 * The nemesis, every 1-3 s, one fault -- or, one time in three, two at once
 * (process faults then on different nodes, so two can take a majority
 * down) -- held 1-4 s then healed: isolate a node (two times in three the
 * leader of a random group, found with ClusterStatus) from the other nodes
 * (the router still reaches it), cut two nodes from each other, a one-way
 * cut, a flapping link (two nodes cut and healed every 100-400 ms), 30%
 * packet loss on a node, a slow link (1 Mbit/s both ways, packets
 * queued up to 2 s: tc tbf), SIGKILL of a node and a restart, SIGSTOP
 * of a node and SIGCONT, and power loss of a node (tl_cluster_power_loss:
 * SIGKILL, pages of its LMDB files scrambled, a new boot id; two times in
 * three a leader), after which its groups must rebuild their storage from
 * Raft (checked in its log) before the checkers judge what they serve.  At
 * the end: heal everything, wait until every key can be read, read every
 * key.  Figures per fault kind: the longest a slot (a stream of keys) went
 * without an ok operation from the fault until it recovered, and the
 * longest recovery after the heal.
 *
 * CHAOS_SECS sets the duration (default 30); SHOAL_SEED replays the fault
 * schedule (the workload's interleaving is the machine's).  On a violation
 * the history is saved to a file (path printed) and the checker's witness is
 * printed; `build/bin/history_check FILE` re-checks it.  JEPSEN_HISTORY=FILE
 * saves every run's history there.  JEPSEN_FAULTS="disk full,30% loss" draws
 * the nemesis's faults from the kinds named only.  The cluster is made and removed by the
 * parent process, as in it_netns (Check's child _exits on a failed
 * assertion, so only the parent can be trusted to remove the namespaces).
 * Without namespaces the test prints SKIP and passes.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_history.h"
#include "tests/lib/tl_netns.h"

#define NODES      3
#define GROUPS     3
#define WORKERS    8
#define REG_SLOTS  6
#define LIST_SLOTS 3
#define SLOTS      (REG_SLOTS + LIST_SLOTS)
#define PER_KEY    200  /* operations per key before its slot moves on */
#define MAX_GENS   4096 /* generations per slot */
#define CALL_MS    2000 /* one attempt, no resend; faults leave some ops info */
#define FINAL_PROC 1000 /* the process of the final reads */

static tl_cluster C;
static char prefix[16];
static bool skipped;
static char skip_why[512];
static unsigned seed;
static shoal_client *client;
static tl_history *H;
static atomic_bool stop;
static atomic_llong next_value = 1;

/* A slot is a sequence of keys (generations); its current key takes
 * PER_KEY operations.  `last` is a value recently seen in the register, a
 * plausible expectation for a cas. */
typedef struct {
	int gen, ops;
	int64_t last;
} slot;
static slot slots[SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

enum {
	F_ISOLATE,
	F_CUT,
	F_ONEWAY,
	F_FLAP,
	F_LOSS,
	F_SLOW,
	F_KILL,
	F_PAUSE,
	F_POWER,
	F_DISK,
	F_KINDS
};
static const char *fault_name[F_KINDS] = {"isolate",    "cut",       "one-way cut", "flapping link",
                                          "30% loss",   "slow link", "kill -9",     "SIGSTOP",
                                          "power loss", "disk full"};
#define NODE_FS_MB 1024 /* each node's own file system, for disk full */

/* The kinds the nemesis draws from: all of them, or JEPSEN_FAULTS's (names as
 * above, comma-separated: "disk full,30% loss"), to hunt one fault's bug. */
static int kinds[F_KINDS], n_kinds;

/* name is one of list's comma-separated entries. */
static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = list; p != NULL; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
			return true;
	}
	return false;
}

static void kinds_init(void)
{
	const char *only = getenv("JEPSEN_FAULTS");
	for (int k = 0; k < F_KINDS; k++)
		if (only == NULL || only[0] == '\0' || listed(only, fault_name[k]))
			kinds[n_kinds++] = k;
}

/* Faults of the run: kinds (a bit each), when injected and healed. */
#define MAX_EPISODES 4096
typedef struct {
	unsigned kinds;
	int n;                    /* faults at once */
	uint64_t t_fault, t_heal; /* tl_history_now() */
} episode;
static episode episodes[MAX_EPISODES];
static int n_episodes;
static int power_losses[NODES + 1]; /* per node */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The nemesis's schedule, and pauses between polls of a condition. */
static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void key_name(char *buf, size_t n, int s, int gen)
{
	snprintf(buf, n, "%c%d.%d", s < REG_SLOTS ? 'r' : 'l', s < REG_SLOTS ? s : s - REG_SLOTS,
	         gen);
}

static void setup(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	skipped = !tl_netns_available(skip_why, sizeof(skip_why));
	if (skipped)
		return;
	snprintf(prefix, sizeof(prefix), "sj%d", (int)(getpid() % 100000));
	/* Snapshots every 256 entries and 1 MiB log segments: a rebuild after
	 * power loss goes through a snapshot, and a full disk soon stops
	 * raft's writes too (a new segment every few seconds), not only
	 * LMDB's. */
	if (!tl_netns_up_opts(&C, prefix, NODES, 1, GROUPS,
	                      "--snapshot-entries 256 --raft-segment-mb 1 --scrub-ms 100")) {
		fprintf(stderr, "it_jepsen: the namespaced cluster did not start\n");
		C.endpoint[0] = '\0';
		return;
	}
	for (int id = 1; id <= NODES; id++)
		if (!tl_cluster_node_fs(&C, id, NODE_FS_MB)) {
			fprintf(stderr,
			        "it_jepsen: node %d could not move to its own file system\n", id);
			C.endpoint[0] = '\0';
		}
}

static void teardown(void)
{
	if (skipped)
		return;
	tl_netns_heal_all(&C);
	tl_cluster_down(&C);
}

/* What a failed GSI check leaves for the post-mortem, in the test's output
 * (CI keeps nothing else): the groups' replicas and leaders, every node's
 * outbox and shipping figures, and the node log lines about shipping and
 * replicas that failed, restarted or were rebuilt. */
/* The kernel's view of every TCP connection (queues, retransmissions) in
 * each node's namespace, and the router's when router. */
static void tcp_postmortem(bool router)
{
	const char *where[] = {"r1", "n1", "n2", "n3"};
	for (size_t i = router ? 0 : 1; i < sizeof(where) / sizeof(where[0]); i++) {
		printf("it_jepsen: post-mortem: TCP in %s (ss -tnoi):\n", where[i]);
		fflush(stdout);
		tl_sh("'%s/deploy/netns.sh' exec %s ss -tnoi --dir '%s' 2>&1 | head -n 60", C.root,
		      where[i], C.dir);
	}
}

static void index_postmortem(void)
{
	char *out = NULL;
	shoal_error err;
	if (shoal_call_json(client, "ClusterStatus", NULL, &out, &err) == SHOAL_OK)
		printf("it_jepsen: post-mortem: ClusterStatus %s\n", out);
	shoal_free(out);
	for (int id = 1; id <= NODES; id++) {
		char *text = tl_cluster_metrics_text(&C, id);
		for (char *line = text != NULL ? strtok(text, "\n") : NULL; line != NULL;
		     line = strtok(NULL, "\n"))
			if (strncmp(line, "shoal_outbox_", 13) == 0 ||
			    strncmp(line, "shoal_index_backlog", 19) == 0 ||
			    strncmp(line, "shoal_index_deltas_", 19) == 0 ||
			    strncmp(line, "shoal_node_dialer_", 18) == 0 ||
			    strncmp(line, "shoal_node_listener_", 20) == 0)
				printf("it_jepsen: post-mortem: node %d: %s\n", id, line);
		free(text);
	}
	fflush(stdout);
	tl_sh("grep -HE 'ship:|replica failed|disk full|restarting|rebuilt|trusted|diverge|"
	      "leader|dialer of|listening again|raft transport' '%s'/node-*.log | tail -n 150",
	      C.dir);
}

/* ---- operations -------------------------------------------------------- */

/* The outcome of a write-like call that did not succeed. */
static tl_kind error_kind(int rc, const shoal_error *err)
{
	if (err->source == SHOAL_SRC_REQUEST || rc == SHOAL_E_VALIDATION)
		return TL_FAIL;
	return TL_INFO;
}

/* GetItem with ConsistentRead of key; SHOAL_OK with *item (or NULL when
 * absent; json_decref it). */
static int get_item(const char *key, json_t **item, shoal_error *err)
{
	char body[256], *out = NULL;
	snprintf(
	    body, sizeof(body),
	    "{\"TableName\":\"jepsen\",\"Key\":{\"PK\":{\"S\":\"%s\"}},\"ConsistentRead\":true}",
	    key);
	*item = NULL;
	int rc = shoal_call_json(client, "GetItem", body, &out, err);
	if (rc != SHOAL_OK)
		return rc;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	if (j == NULL) {
		err->source = SHOAL_SRC_PROTOCOL;
		snprintf(err->message, sizeof(err->message), "GetItem: unparsable answer");
		return SHOAL_E_INTERNAL;
	}
	json_t *it = json_object_get(j, "Item");
	if (it != NULL)
		*item = json_incref(it);
	json_decref(j);
	return SHOAL_OK;
}

static int64_t num_attr(json_t *item, const char *name)
{
	const char *n = json_string_value(json_object_get(json_object_get(item, name), "N"));
	return n != NULL ? strtoll(n, NULL, 10) : TL_NIL;
}

/* A read of register key; true if ok (its value in *v). */
/* The last failed final read's error (their failure names it; only the
 * final reads' process writes it, after the workers stopped). */
static char last_read_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8];

static void read_failed(int proc, const shoal_error *err)
{
	if (proc == FINAL_PROC)
		snprintf(last_read_error, sizeof(last_read_error), "%s: %s", err->exception,
		         err->message);
}

static bool do_read(int proc, const char *key, int64_t *v)
{
	size_t id = tl_history_invoke(H, proc, TL_READ, key, 0, 0);
	json_t *item;
	shoal_error err;
	int rc = get_item(key, &item, &err);
	if (rc != SHOAL_OK) {
		read_failed(proc, &err);
		tl_history_complete(H, id, TL_FAIL, 0);
		return false;
	}
	*v = item != NULL ? num_attr(item, "v") : TL_NIL;
	json_decref(item);
	tl_history_complete(H, id, TL_OK, *v);
	return true;
}

static void do_write(int proc, const char *key, int64_t v)
{
	char body[256];
	snprintf(
	    body, sizeof(body),
	    "{\"TableName\":\"jepsen\",\"Item\":{\"PK\":{\"S\":\"%s\"},\"v\":{\"N\":\"%lld\"}}}",
	    key, (long long)v);
	size_t id = tl_history_invoke(H, proc, TL_WRITE, key, v, 0);
	shoal_error err;
	char *out = NULL;
	int rc = shoal_call_json(client, "PutItem", body, &out, &err);
	shoal_free(out);
	tl_history_complete(H, id, rc == SHOAL_OK ? TL_OK : error_kind(rc, &err), 0);
}

static void do_cas(int proc, const char *key, int64_t expected, int64_t v)
{
	char body[512];
	if (expected == TL_NIL)
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"jepsen\",\"Key\":{\"PK\":{\"S\":\"%s\"}},"
		         "\"UpdateExpression\":\"SET v = :n\","
		         "\"ConditionExpression\":\"attribute_not_exists(PK)\","
		         "\"ExpressionAttributeValues\":{\":n\":{\"N\":\"%lld\"}}}",
		         key, (long long)v);
	else
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"jepsen\",\"Key\":{\"PK\":{\"S\":\"%s\"}},"
		         "\"UpdateExpression\":\"SET v = :n\",\"ConditionExpression\":\"v = :e\","
		         "\"ExpressionAttributeValues\":{\":n\":{\"N\":\"%lld\"},"
		         "\":e\":{\"N\":\"%lld\"}}}",
		         key, (long long)v, (long long)expected);
	size_t id = tl_history_invoke(H, proc, TL_CAS, key, expected, v);
	shoal_error err;
	char *out = NULL;
	int rc = shoal_call_json(client, "UpdateItem", body, &out, &err);
	shoal_free(out);
	if (rc == SHOAL_OK)
		tl_history_complete(H, id, TL_OK, 1);
	else if (rc == SHOAL_E_CONDITION_FAILED)
		tl_history_complete(H, id, TL_OK, 0);
	else
		tl_history_complete(H, id, error_kind(rc, &err), 0);
}

static void do_append(int proc, const char *key, int64_t x)
{
	char body[512];
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"jepsen\",\"Key\":{\"PK\":{\"S\":\"%s\"}},"
	         "\"UpdateExpression\":\"SET l = list_append(if_not_exists(l, :empty), :x)\","
	         "\"ExpressionAttributeValues\":{\":empty\":{\"L\":[]},"
	         "\":x\":{\"L\":[{\"N\":\"%lld\"}]}}}",
	         key, (long long)x);
	size_t id = tl_history_invoke(H, proc, TL_APPEND, key, x, 0);
	shoal_error err;
	char *out = NULL;
	int rc = shoal_call_json(client, "UpdateItem", body, &out, &err);
	shoal_free(out);
	tl_history_complete(H, id, rc == SHOAL_OK ? TL_OK : error_kind(rc, &err), 0);
}

static bool do_read_list(int proc, const char *key)
{
	size_t id = tl_history_invoke(H, proc, TL_READ_LIST, key, 0, 0);
	json_t *item;
	shoal_error err;
	if (get_item(key, &item, &err) != SHOAL_OK) {
		read_failed(proc, &err);
		tl_history_complete(H, id, TL_FAIL, 0);
		return false;
	}
	json_t *l = json_object_get(json_object_get(item, "l"), "L");
	size_t n = json_array_size(l), i;
	int64_t *xs = calloc(n + 1, sizeof(*xs));
	ck_assert_ptr_nonnull(xs);
	json_t *e;
	json_array_foreach(l, i, e)
	{
		const char *x = json_string_value(json_object_get(e, "N"));
		xs[i] = x != NULL ? strtoll(x, NULL, 10) : TL_NIL;
	}
	json_decref(item);
	tl_history_complete_list(H, id, TL_OK, xs, n);
	free(xs);
	return true;
}

static void *worker(void *arg)
{
	int proc = (int)(intptr_t)arg;
	unsigned rng = seed * 31u + (unsigned)proc;
	while (!atomic_load(&stop)) {
		int s = (int)(rand_r(&rng) % SLOTS);
		char key[32];
		pthread_mutex_lock(&slots_mu);
		if (slots[s].ops >= PER_KEY && slots[s].gen + 1 < MAX_GENS) {
			slots[s].gen++;
			slots[s].ops = 0;
			slots[s].last = TL_NIL;
		}
		slots[s].ops++;
		int gen = slots[s].gen;
		int64_t expected = slots[s].last;
		pthread_mutex_unlock(&slots_mu);
		key_name(key, sizeof(key), s, gen);
		int64_t v = atomic_fetch_add(&next_value, 1);
		unsigned dice = rand_r(&rng) % 10;
		if (s >= REG_SLOTS) {
			if (dice < 5)
				do_append(proc, key, v);
			else
				do_read_list(proc, key);
			continue;
		}
		int64_t seen;
		if (dice < 4) {
			if (do_read(proc, key, &seen)) {
				pthread_mutex_lock(&slots_mu);
				if (slots[s].gen == gen)
					slots[s].last = seen;
				pthread_mutex_unlock(&slots_mu);
			}
		} else if (dice < 6) {
			do_write(proc, key, v);
		} else {
			do_cas(proc, key, expected, v);
			pthread_mutex_lock(&slots_mu);
			if (slots[s].gen == gen)
				slots[s].last = v; /* a guess: right if it swapped */
			pthread_mutex_unlock(&slots_mu);
		}
	}
	return NULL;
}

/* ---- the nemesis ------------------------------------------------------- */

static pid_t node_pid(int id)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/node-%d.pid", C.dir, id);
	char *text = tl_read_file(path);
	ck_assert_msg(text != NULL, "no pid file for node %d", id);
	pid_t pid = (pid_t)atol(text);
	free(text);
	ck_assert_int_gt(pid, 1);
	return pid;
}

/* Why a scrub pass did not come (a CI run of 2026-11-28 ended with node 2
 * unreachable after its disk-full restart and isolation, its log gone with
 * the cluster's directory): whether each node's process lives, and the end
 * of its log. */
static void scrub_postmortem(void)
{
	for (int id = 1; id <= NODES; id++) {
		pid_t pid = node_pid(id);
		printf("it_jepsen: post-mortem: node %d: pid %d %s; its log's last lines:\n", id,
		       (int)pid, pid > 0 && kill(pid, 0) == 0 ? "alive" : "NOT running");
		fflush(stdout);
		tl_sh("tail -n 25 '%s'/node-%d.log", C.dir, id);
	}
}

/* For a post-mortem of a cluster that stopped answering: every thread's
 * stack of every node and of the router (gdb, when installed), into
 * <dir>/<process>.stacks, and the nodes' metrics into <dir>/node-<id>.metrics;
 * prints where they are, and the router's stacks themselves (the cluster's
 * directory goes with the test: a 600 s run of 2026-11-27 ended with the
 * router holding no connection to any node and logging nothing for its last
 * seven minutes, and its stacks were lost). */
static void stacks_postmortem(void)
{
	if (tl_sh("command -v gdb >/dev/null 2>&1") != 0) {
		printf("it_jepsen: no gdb: no stacks for the post-mortem\n");
		return;
	}
	const char *what[] = {"node-1", "node-2", "node-3", "router-1"};
	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		tl_sh(
		    "p=$(cat '%s/%s.pid' 2>/dev/null) && [ -n \"$p\" ] && timeout 60 gdb -p \"$p\" "
		    "-batch -ex 'thread apply all bt' >'%s/%s.stacks' 2>&1",
		    C.dir, what[i], C.dir, what[i]);
		printf("it_jepsen: post-mortem: %s/%s.stacks\n", C.dir, what[i]);
	}
	fflush(stdout);
	tl_sh("echo 'it_jepsen: post-mortem: threads of the router:'; "
	      "grep -E '^(Thread|#)' '%s/router-1.stacks' | cut -c1-200",
	      C.dir);
}

/* Why the router cannot reach a node: its connections as the router counts
 * them and logs them, each node's request server (contexts busy, its
 * connections), and the kernel's view of every TCP connection (queues,
 * retransmissions) in each namespace. */
static void net_postmortem(void)
{
	for (int id = 1; id <= NODES; id++) {
		char *text = tl_cluster_metrics_text(&C, id);
		for (char *line = text != NULL ? strtok(text, "\n") : NULL; line != NULL;
		     line = strtok(NULL, "\n"))
			if (strncmp(line, "shoal_node_server_", 18) == 0)
				printf("it_jepsen: post-mortem: node %d: %s\n", id, line);
		free(text);
	}
	fflush(stdout);
	tl_sh("grep -HE 'connected to node|to node [0-9]+ closed|no answer for|dialer of' "
	      "'%s'/router-1.log | tail -n 40; echo 'it_jepsen: post-mortem: router-1.log, "
	      "last lines:'; tail -n 15 '%s'/router-1.log",
	      C.dir, C.dir);
	tcp_postmortem(true);
}

/* Every replica's row of ClusterStatus in one line (group, node, role,
 * term, commit and applied index, state when not ok), for a failure's
 * message: CI shows a long log's head and tail only, and the failed check's
 * line is repeated at the tail. */
static void groups_brief(char *buf, size_t size)
{
	char *out = NULL;
	shoal_error err;
	size_t len = 0;
	buf[0] = '\0';
	if (shoal_call_json(client, "ClusterStatus", NULL, &out, &err) != SHOAL_OK) {
		snprintf(buf, size, "ClusterStatus: %s: %s", err.exception, err.message);
		return;
	}
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(j, "Groups"), i, e)
	{
		const char *role = json_string_value(json_object_get(e, "Role"));
		const char *state = json_string_value(json_object_get(e, "State"));
		int w = snprintf(buf + len, size - len, "%sg%lldn%lld %s t%lld c%lld a%lld%s%s",
		                 i > 0 ? "; " : "", json_integer_value(json_object_get(e, "Group")),
		                 json_integer_value(json_object_get(e, "Node")),
		                 role != NULL ? role : "?",
		                 json_integer_value(json_object_get(e, "Term")),
		                 json_integer_value(json_object_get(e, "CommitIndex")),
		                 json_integer_value(json_object_get(e, "AppliedIndex")),
		                 state != NULL && strcmp(state, "ok") != 0 ? " " : "",
		                 state != NULL && strcmp(state, "ok") != 0 ? state : "");
		if (w < 0 || (size_t)w >= size - len)
			break;
		len += (size_t)w;
	}
	json_decref(j);
}

/* The node that leads group g according to ClusterStatus, or 0. */
static int leader_of(int g)
{
	char *out = NULL;
	shoal_error err;
	if (shoal_call_json(client, "ClusterStatus", NULL, &out, &err) != SHOAL_OK)
		return 0;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	int leader = 0;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(j, "Groups"), i, e)
	{
		const char *role = json_string_value(json_object_get(e, "Role"));
		if (json_integer_value(json_object_get(e, "Group")) == g && role != NULL &&
		    strcmp(role, "leader") == 0)
			leader = (int)json_integer_value(json_object_get(e, "Node"));
	}
	json_decref(j);
	return leader >= 1 && leader <= NODES ? leader : 0;
}

static bool process_fault(int kind)
{
	return kind == F_KILL || kind == F_PAUSE || kind == F_POWER || kind == F_DISK;
}

/* node/disk.c's log lines, counted before a disk-full fault. */
#define DISK_FULL    "disk full in"
#define DISK_RESTART "restarting in place to recover"
static int full_before[NODES + 1], restart_before[NODES + 1];
static int disk_restarts;

/* Injects one fault of `kind` on node a (b: the other end of a cut). */
static void inject(int kind, int a, int b, unsigned *rng)
{
	char as[8], bs[8];
	snprintf(as, sizeof(as), "%d", a);
	snprintf(bs, sizeof(bs), "%d", b);
	switch (kind) {
	case F_ISOLATE:
		ck_assert(tl_netns_isolate(&C, as));
		break;
	case F_CUT:
	case F_FLAP: /* cut now; fault() flaps it */
		ck_assert(tl_netns_cut(&C, as, bs));
		break;
	case F_ONEWAY:
		ck_assert(tl_netns_oneway(&C, as, bs));
		break;
	case F_LOSS:
		ck_assert(tl_netns_loss(&C, as, 30));
		break;
	case F_SLOW:
		ck_assert(tl_netns_slow(&C, as, "1mbit"));
		break;
	case F_KILL:
		ck_assert(tl_cluster_stop_node(&C, a, true));
		break;
	case F_PAUSE:
		ck_assert_int_eq(kill(node_pid(a), SIGSTOP), 0);
		break;
	case F_POWER:
		/* SIGKILL, pages of every LMDB file scrambled, a new boot id. */
		ck_assert(tl_cluster_power_loss(&C, a, 32, rng));
		power_losses[a]++;
		break;
	case F_DISK:
		full_before[a] = tl_cluster_log_count(&C, a, DISK_FULL);
		restart_before[a] = tl_cluster_log_count(&C, a, DISK_RESTART);
		ck_assert(tl_cluster_disk_fill(&C, a, true));
		break;
	}
}

/* Heals what inject did (network faults: all of them at once). */
static void heal(int kind, int a)
{
	char as[8];
	snprintf(as, sizeof(as), "%d", a);
	switch (kind) {
	case F_LOSS:
		ck_assert(tl_netns_loss(&C, as, 0));
		break;
	case F_KILL:
	case F_POWER:
		ck_assert_msg(tl_cluster_start_node(&C, a), "node %d did not restart (seed %u)", a,
		              seed);
		break;
	case F_PAUSE:
		ck_assert_int_eq(kill(node_pid(a), SIGCONT), 0);
		break;
	case F_DISK:
		/* Room again.  A node that saw its disk full restarts itself in
		 * place once there is room (node/disk.c): wait for that. */
		ck_assert(tl_cluster_disk_fill(&C, a, false));
		if (tl_cluster_log_count(&C, a, DISK_FULL) > full_before[a]) {
			int64_t deadline = now_ms() + 30000;
			while (tl_cluster_log_count(&C, a, DISK_RESTART) <= restart_before[a]) {
				ck_assert_msg(
				    now_ms() < deadline,
				    "node %d did not restart itself within 30 s of its disk "
				    "having room again (seed %u)",
				    a, seed);
				pause_ms(50);
			}
			disk_restarts++;
			printf("it_jepsen: node %d: disk was full; it restarted itself\n", a);
		}
		break;
	default:
		break; /* cuts: fault() heals them all at once */
	}
}

/* One episode: one fault, or (one time in three) two at once -- on
 * different nodes when both are process faults -- held `hold` ms, then
 * healed.  Adds the kinds injected to faults[]. */
static void fault(unsigned *rng, int64_t t0, int faults[F_KINDS])
{
	int n = rand_r(rng) % 3 == 0 ? 2 : 1;
	int hold = 1000 + (int)(rand_r(rng) % 3000);
	int kind[2], a[2], b[2];
	episode *ep = n_episodes < MAX_EPISODES ? &episodes[n_episodes++] : NULL;
	printf("it_jepsen: +%.1fs", (now_ms() - t0) / 1000.0);
	for (int i = 0; i < n; i++) {
		kind[i] = kinds[rand_r(rng) % n_kinds];
		a[i] = 1 + (int)(rand_r(rng) % NODES);
		b[i] = 1 + (a[i] + (int)(rand_r(rng) % (NODES - 1))) % NODES;
		int g = 1 + (int)(rand_r(rng) % GROUPS);
		bool leader = rand_r(rng) % 3 != 0;
		if (i == 1 && process_fault(kind[0]) && process_fault(kind[1]) && a[1] == a[0])
			a[1] = 1 + a[0] % NODES;
		if ((kind[i] == F_ISOLATE || kind[i] == F_POWER) && leader) {
			int l = leader_of(g);
			if (l != 0 && !(i == 1 && process_fault(kind[0]) && l == a[0]))
				a[i] = l;
		}
		bool pair = kind[i] == F_CUT || kind[i] == F_ONEWAY || kind[i] == F_FLAP;
		printf("%s %s node %d", i > 0 ? " +" : "", fault_name[kind[i]], a[i]);
		if (pair)
			printf(" / node %d", b[i]);
		faults[kind[i]]++;
	}
	printf(", held %d ms\n", hold);
	if (ep != NULL) {
		ep->t_fault = tl_history_now();
		ep->n = n;
	}
	for (int i = 0; i < n; i++) {
		inject(kind[i], a[i], b[i], rng);
		if (ep != NULL)
			ep->kinds |= 1u << kind[i];
	}
	/* A flapping link is cut and healed every 100-400 ms while the fault
	 * holds (its own generator: how many flips fit in `hold` depends on
	 * the machine, and the schedule must replay). */
	unsigned flap_rng = (unsigned)rand_r(rng);
	int flap = kind[0] == F_FLAP ? 0 : n > 1 && kind[1] == F_FLAP ? 1 : -1;
	int64_t until = now_ms() + hold;
	bool cut = true;
	while (flap >= 0 && now_ms() < until) {
		pause_ms(100 + (int)(rand_r(&flap_rng) % 300));
		char as[8], bs[8];
		snprintf(as, sizeof(as), "%d", a[flap]);
		snprintf(bs, sizeof(bs), "%d", b[flap]);
		ck_assert(cut ? tl_netns_heal(&C, as, bs) : tl_netns_cut(&C, as, bs));
		cut = !cut;
	}
	if (now_ms() < until)
		pause_ms((int)(until - now_ms()));
	for (int i = n - 1; i >= 0; i--)
		heal(kind[i], a[i]);
	ck_assert(tl_netns_heal_all(&C));
	if (ep != NULL)
		ep->t_heal = tl_history_now();
}

/* ---- figures ----------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The longest time in [from, to] with no operation completing ok. */
static uint64_t longest_gap(uint64_t from, uint64_t to)
{
	size_t n = tl_history_len(H), k = 0;
	uint64_t *t = malloc((n + 2) * sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t[k++] = from;
	for (size_t i = 0; i < n; i++) {
		const tl_op *op = tl_history_op(H, i);
		if (op->kind == TL_OK && op->t_complete > from && op->t_complete < to)
			t[k++] = op->t_complete;
	}
	t[k++] = to;
	qsort(t, k, sizeof(*t), cmp_u64);
	uint64_t gap = 0;
	for (size_t i = 1; i < k; i++)
		if (t[i] - t[i - 1] > gap)
			gap = t[i] - t[i - 1];
	free(t);
	return gap;
}

/* Per slot (a client's stream of keys), the completion times of its ok
 * operations, sorted: what the per-fault figures are read from. */
typedef struct {
	uint64_t *t;
	size_t n;
} slot_oks;
static slot_oks oks[SLOTS];

static int slot_of(const char *key)
{
	int s = atoi(key + 1);
	return key[0] == 'r' ? s : REG_SLOTS + s;
}

static void index_oks(void)
{
	size_t n = tl_history_len(H);
	for (int s = 0; s < SLOTS; s++) {
		oks[s].t = malloc((n + 1) * sizeof(uint64_t));
		ck_assert_ptr_nonnull(oks[s].t);
		oks[s].n = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const tl_op *op = tl_history_op(H, i);
		if (op->kind != TL_OK || op->proc == FINAL_PROC)
			continue;
		slot_oks *o = &oks[slot_of(op->key)];
		o->t[o->n++] = op->t_complete;
	}
	for (int s = 0; s < SLOTS; s++)
		qsort(oks[s].t, oks[s].n, sizeof(uint64_t), cmp_u64);
}

/* First ok completion of slot s at or after t (UINT64_MAX: none). */
static uint64_t first_ok(int s, uint64_t t)
{
	size_t lo = 0, hi = oks[s].n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (oks[s].t[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < oks[s].n ? oks[s].t[lo] : UINT64_MAX;
}

/* The longest time in [from, to] any one slot went without an ok
 * operation: how long some clients could not get through. */
static uint64_t unavailable(uint64_t from, uint64_t to)
{
	uint64_t worst = 0;
	for (int s = 0; s < SLOTS; s++) {
		uint64_t prev = from;
		for (uint64_t t = first_ok(s, from); t <= to; t = first_ok(s, t + 1)) {
			if (t - prev > worst)
				worst = t - prev;
			prev = t;
		}
		if (to - prev > worst)
			worst = to - prev;
	}
	return worst;
}

/* Reports a checker's result; true if it found a violation. */
static bool report(const char *what, tl_check_result *r)
{
	printf("it_jepsen: %s: %s (%zu keys, %zu failed, %zu unknown, %llu states)\n", what,
	       tl_verdict_name(r->verdict), r->keys, r->keys_failed, r->keys_unknown,
	       (unsigned long long)r->states);
	if (r->verdict == TL_UNKNOWN)
		printf("it_jepsen: %s: the search ran out of budget on key %s\n", what, r->key);
	if (r->verdict != TL_NOT_LINEARIZABLE)
		return false;
	char path[256];
	snprintf(path, sizeof(path), "/tmp/it_jepsen-%u-%d.history", seed, (int)getpid());
	int rc = tl_history_dump_file(H, path);
	printf("it_jepsen: VIOLATION (%s) on key %s (seed %u): %s\n", what, r->key, seed, r->msg);
	printf("it_jepsen: history %s %s (re-check: build/bin/history_check %s)\n",
	       rc == 0 ? "saved to" : "NOT saved to", path, path);
	if (r->witness != NULL) {
		printf("it_jepsen: witness:\n");
		tl_history_dump(r->witness, stdout);
	}
	return true;
}

START_TEST(test_jepsen)
{
	if (skipped) {
		printf("SKIP it_jepsen: %s\n", skip_why);
		return;
	}
	ck_assert_msg(C.endpoint[0] != '\0', "no cluster");
	int secs = 30;
	const char *e = getenv("CHAOS_SECS");
	if (e != NULL && atoi(e) > 0)
		secs = atoi(e);
	printf("it_jepsen: seed %u (SHOAL_SEED=%u replays the fault schedule), %d s\n", seed, seed,
	       secs);

	shoal_options o;
	shoal_options_init(&o);
	o.attempt_timeout_ms = CALL_MS;
	o.deadline_ms = CALL_MS;
	o.retries = 0;
	o.throttle_retries = 0;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, &o, &client, msg) == SHOAL_OK, "%s", msg);
	/* A CreateTable that timed out may have applied: then the next one
	 * finds the table (ResourceInUse). */
	shoal_error err;
	int rc;
	int64_t deadline = now_ms() + 30000;
	do {
		char *out = NULL;
		rc = shoal_call_json(
		    client, "CreateTable",
		    "{\"TableName\":\"jepsen\",\"AttributeDefinitions\":[{\"AttributeName\":"
		    "\"PK\",\"AttributeType\":\"S\"},{\"AttributeName\":\"v\",\"AttributeType\":"
		    "\"N\"}],\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"}],"
		    "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"by_v\",\"KeySchema\":[{"
		    "\"AttributeName\":\"v\",\"KeyType\":\"HASH\"}],\"Projection\":{"
		    "\"ProjectionType\":\"KEYS_ONLY\"}}],\"BillingMode\":\"PAY_PER_REQUEST\"}",
		    &out, &err);
		shoal_free(out);
		if (rc != SHOAL_OK && rc != SHOAL_E_IN_USE)
			pause_ms(200);
	} while (rc != SHOAL_OK && rc != SHOAL_E_IN_USE && now_ms() < deadline);
	ck_assert_msg(rc == SHOAL_OK || rc == SHOAL_E_IN_USE, "CreateTable: %s: %s", err.exception,
	              err.message);

	H = tl_history_new();
	for (int s = 0; s < SLOTS; s++)
		slots[s].last = TL_NIL;
	pthread_t th[WORKERS];
	uint64_t t_start = tl_history_now();
	int64_t t0 = now_ms(), end = t0 + (int64_t)secs * 1000;
	for (int i = 0; i < WORKERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)(i + 1)),
		                 0);

	unsigned rng = seed;
	int faults[F_KINDS] = {0};
	n_episodes = 0;
	pause_ms(1000);
	while (now_ms() < end) {
		fault(&rng, t0, faults);
		pause_ms(1000 + (int)(rand_r(&rng) % 2000));
	}
	ck_assert(tl_netns_heal_all(&C));
	/* Every node runs: none died on its own. */
	for (int id = 1; id <= NODES; id++)
		ck_assert_msg(kill(node_pid(id), 0) == 0, "node %d died on its own (seed %u)", id,
		              seed);
	int64_t t_heal = now_ms();
	/* Every power loss made each of the node's groups distrust and
	 * rebuild its storage (the rebuild is what the checkers then test). */
	for (int id = 1; id <= NODES; id++) {
		int n = tl_cluster_log_count(&C, id, "not trusted and emptied");
		ck_assert_msg(n == GROUPS * power_losses[id],
		              "node %d: %d storage rebuilds logged after %d power losses (seed %u)",
		              id, n, power_losses[id], seed);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	uint64_t t_stop = tl_history_now();

	/* Final reads of every key, each retried until it is ok (60 s). */
	deadline = now_ms() + 60000;
	int keys = 0, first_ok_ms = -1;
	for (int s = 0; s < SLOTS; s++)
		for (int gen = 0; gen <= slots[s].gen; gen++) {
			char key[32];
			key_name(key, sizeof(key), s, gen);
			int64_t v;
			bool ok = false;
			while (!ok && now_ms() < deadline) {
				ok = s < REG_SLOTS ? do_read(FINAL_PROC, key, &v)
				                   : do_read_list(FINAL_PROC, key);
				if (!ok)
					pause_ms(200);
			}
			static char brief[2048];
			if (!ok) {
				groups_brief(brief, sizeof(brief));
				stacks_postmortem();
				net_postmortem();
				index_postmortem();
			}
			ck_assert_msg(
			    ok,
			    "key %s could not be read within 60 s of healing (seed %u; the "
			    "last error: %s; replicas: %s)",
			    key, seed, last_read_error, brief);
			if (first_ok_ms < 0)
				first_ok_ms = (int)(now_ms() - t_heal);
			keys++;
		}
	printf("it_jepsen: healed; first final read ok %d ms later; %d keys read in %lld ms\n",
	       first_ok_ms, keys, (long long)(now_ms() - t_heal));
	{
		char brief[2048];
		groups_brief(brief, sizeof(brief));
		printf("it_jepsen: replicas after the final reads: %s\n", brief);
	}

	/* The GSI (by_v: every register's value) converges to the table
	 * after the faults (index_check recomputes it from a Scan). */
	char path[1200];
	snprintf(path, sizeof(path), "%s/index_check.out", C.dir);
	int64_t t_index = now_ms();
	deadline = t_index + 60000;
	int irc;
	while ((irc = tl_sh("'%s/index_check' --endpoint '%s' --table-name jepsen >'%s' 2>&1",
	                    C.bin, C.endpoint, path)) != 0 &&
	       now_ms() < deadline)
		pause_ms(200);
	char *irep = tl_read_file(path);
	printf("it_jepsen: the GSI %s %lld ms after the final reads\n",
	       irc == 0 ? "converged" : "did NOT converge", (long long)(now_ms() - t_index));
	/* Shipping goes node to node: a shipper that cannot reach a group's
	 * leader (its lane says "unreachable": no connection within the send
	 * deadline) is a connection the kernel shows, or does not, between the
	 * two nodes' namespaces (a 30 s run of 2026-11-27 ended with node 3
	 * unable to ship to node 2 for 60 s after the heal). */
	if (irc != 0) {
		index_postmortem();
		tcp_postmortem(false);
	}
	ck_assert_msg(irc == 0, "the GSI differs from the table (seed %u):\n%s", seed,
	              irep != NULL ? irep : "");
	free(irep);

	/* The replicas agree: one more full scrub pass of every group ends
	 * after the final reads, and no scrub (during the run or now) found a
	 * replica that differs from its peers.  (A pass takes seconds here:
	 * the 60 s of write tokens are most of the key space.) */
	int64_t t_scrub = now_ms();
	for (int g = 0; g < GROUPS; g++) {
		double base = tl_cluster_metric(&C, "shoal_scrub_passes_total", g);
		deadline = now_ms() + 60000;
		while (tl_cluster_metric(&C, "shoal_scrub_passes_total", g) < base + 1) {
			if (now_ms() >= deadline)
				scrub_postmortem();
			ck_assert_msg(now_ms() < deadline,
			              "group %d: the replica scrub made no pass in 60 s (seed %u)",
			              g, seed);
			pause_ms(100);
		}
	}
	int diverged = 0;
	for (int id = 1; id <= NODES; id++)
		diverged += tl_cluster_log_count(&C, id, "diverged") +
		            tl_cluster_log_count(&C, id, "replicas differ over range");
	printf("it_jepsen: replica scrub: another pass of every group in %lld ms; divergences "
	       "logged during the run: %d\n",
	       (long long)(now_ms() - t_scrub), diverged);
	ck_assert_msg(diverged == 0, "the replica scrub found replicas that differ (seed %u)",
	              seed);

	/* Figures. */
	int n_double = 0;
	for (int ei = 0; ei < n_episodes; ei++)
		n_double += episodes[ei].n > 1;
	size_t n = tl_history_len(H);
	size_t by[5][4] = {{0}}, swapped = 0; /* by fn, by kind */
	for (size_t i = 0; i < n; i++) {
		const tl_op *op = tl_history_op(H, i);
		by[op->fn][op->kind]++;
		swapped += op->fn == TL_CAS && op->kind == TL_OK && op->value == 1;
	}
	static const char *fns[5] = {"read", "write", "cas", "append", "read-list"};
	size_t tot[4] = {0};
	for (int f = 0; f < 5; f++) {
		printf("it_jepsen: %-9s ok %zu, fail %zu, info %zu, pending %zu\n", fns[f],
		       by[f][TL_OK], by[f][TL_FAIL], by[f][TL_INFO], by[f][TL_INVOKE]);
		for (int k = 0; k < 4; k++)
			tot[k] += by[f][k];
	}
	printf("it_jepsen: cas ok: %zu swapped, %zu condition false\n", swapped,
	       by[TL_CAS][TL_OK] - swapped);
	printf("it_jepsen: %zu operations: ok %zu, fail %zu, info %zu\n", n, tot[TL_OK],
	       tot[TL_FAIL], tot[TL_INFO] + tot[TL_INVOKE]);
	printf("it_jepsen: %d fault episodes (%d with two faults at once); faults:", n_episodes,
	       n_double);
	for (int k = 0; k < F_KINDS; k++)
		printf(" %s %d%s", fault_name[k], faults[k], k + 1 < F_KINDS ? "," : "\n");
	printf("it_jepsen: nodes that restarted themselves after their disk had room again: %d\n",
	       disk_restarts);
	printf("it_jepsen: longest window without any ok operation: %.2f s\n",
	       longest_gap(t_start, t_stop) / 1e9);
	/* Per fault kind (an episode of two faults counts for both): the
	 * longest a slot went without an ok operation from the fault until it
	 * recovered, and the longest recovery -- from the heal until every
	 * slot had an ok operation again. */
	index_oks();
	uint64_t unav[F_KINDS] = {0}, recov[F_KINDS] = {0};
	for (int ei = 0; ei < n_episodes; ei++) {
		const episode *ep = &episodes[ei];
		uint64_t back = ep->t_heal;
		for (int sl = 0; sl < SLOTS; sl++) {
			uint64_t t = first_ok(sl, ep->t_heal);
			if (t != UINT64_MAX && t > back)
				back = t;
		}
		uint64_t u = unavailable(ep->t_fault, back), r = back - ep->t_heal;
		for (int k = 0; k < F_KINDS; k++)
			if (ep->kinds & (1u << k)) {
				unav[k] = u > unav[k] ? u : unav[k];
				recov[k] = r > recov[k] ? r : recov[k];
			}
	}
	printf("it_jepsen: %-12s %8s %22s %22s\n", "fault", "injected", "longest unavailable s",
	       "longest recovery s");
	for (int k = 0; k < F_KINDS; k++)
		printf("it_jepsen: %-12s %8d %22.2f %22.2f\n", fault_name[k], faults[k],
		       unav[k] / 1e9, recov[k] / 1e9);
	for (int sl = 0; sl < SLOTS; sl++)
		free(oks[sl].t);

	/* Checks. */
	tl_check_result r;
	memset(&r, 0, sizeof(r));
	int64_t tc = now_ms();
	tl_check_registers(H, 0, &r);
	bool bad_reg = report("registers", &r);
	tl_check_result_fini(&r);
	memset(&r, 0, sizeof(r));
	tl_check_lists(H, &r);
	bool bad_list = report("lists", &r);
	tl_check_result_fini(&r);
	const char *save = getenv("JEPSEN_HISTORY");
	if (save != NULL)
		printf("it_jepsen: history %s %s\n",
		       tl_history_dump_file(H, save) == 0 ? "saved to" : "NOT saved to", save);
	printf("it_jepsen: violations: %d (checked in %lld ms)\n", bad_reg + bad_list,
	       (long long)(now_ms() - tc));
	ck_assert_msg(!bad_reg && !bad_list, "linearizability violation (seed %u)", seed);
	ck_assert_msg(tot[TL_OK] > 0, "no operation succeeded");
	tl_history_free(H);
	H = NULL;
	shoal_client_free(client);
	client = NULL;
}
END_TEST

int main(void)
{
	tl_fail_hook = tl_fail_check;
	const char *s = getenv("SHOAL_SEED");
	seed =
	    s != NULL ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL) ^ (unsigned)getpid();
	int secs = getenv("CHAOS_SECS") != NULL ? atoi(getenv("CHAOS_SECS")) : 30;
	kinds_init();
	if (n_kinds == 0) {
		fprintf(stderr, "it_jepsen: JEPSEN_FAULTS names no fault kind of:");
		for (int k = 0; k < F_KINDS; k++)
			fprintf(stderr, "%s \"%s\"", k > 0 ? "," : "", fault_name[k]);
		fprintf(stderr, "\n");
		return 2;
	}
	Suite *su = suite_create("jepsen");
	TCase *tc = tcase_create("core");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, (secs > 0 ? secs : 30) + 300);
	tcase_add_test(tc, test_jepsen);
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (!skipped && tl_sh("ip netns list | grep -E '^%s-' ; ip -o link show | grep -E ': %s-'",
	                      prefix, prefix) == 0) {
		printf("it_jepsen: namespaces or links %s-* left behind (listed above)\n", prefix);
		failed++;
	}
	if (failed != 0)
		printf("it_jepsen: FAILED with seed %u (SHOAL_SEED=%u to replay)\n", seed, seed);
	return failed == 0 ? 0 : 1;
}
