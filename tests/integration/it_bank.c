/*
 * it_bank -- transactions under faults: a bank on a real cluster of 3 nodes,
 * 2 routers and 4 groups (TransactWriteItems and TransactGetItems, the
 * protocol in router/txn.c, recovery in node/txn_recover.c).
 *
 * Accounts.  ACCOUNTS items {pk: "acct#i", balance: INITIAL, nx: 0} in table
 * "bank" (hash key pk only), spread over the three data groups: the test
 * computes each account's group (st_key_hash of the table's number,
 * the cluster file's partitions) and checks the computation against the
 * item counts ClusterStatus reports.  The accounts are split into two sets
 * closed under transfers: CLOSED accounts, the same number from each data
 * group, transfer only among themselves; the others only among themselves.
 * So the balances of the closed set always sum to CLOSED * INITIAL, and
 * most transfers inside it cross groups (a two-phase commit).
 *
 * Movers (one libshoal client each, listing both routers) run transfers:
 * one TransactWriteItems of
 *   Put    xfer#<id> {from, to, amount}   attribute_not_exists(pk)
 *   Update acct#from  SET balance = balance - :a ADD nx :one   balance >= :a
 *   Update acct#to    SET balance = balance + :a ADD nx :one   attribute_exists(balance)
 * with the marker first or last (the coordinator group is the first
 * action's).  Three transfers in four carry a ClientRequestToken (a resent
 * request finds the first run's record); the others take the path without
 * one (every prepare at once).  Each transfer's outcome is recorded:
 * acknowledged, cancelled (TransactionCanceledException: with a token, the
 * recorded answer of the only run, so it must leave no trace), or unknown
 * (any other error; also a cancellation without a token, since libshoal
 * resends a request whose router died and a second run may be cancelled by
 * the first one's marker or locks).
 *
 * Readers run TransactGetItems of: every closed account (their balances must
 * sum to the closed total and their nx to an even number -- every transfer
 * adds 1 to two accounts of one set), every account (the whole total, nx
 * even), or 2..10 random accounts (present, nothing negative).  A
 * cancellation (TransactionConflict: the items kept moving or stayed
 * locked) is counted, not a failure.
 *
 * A chaos thread, every 0.5-2.5 s, does one of: SIGKILL the node leading a
 * random data group (as ClusterStatus says; any node if none is known) and
 * restart it later; SIGTERM a node and restart it; SIGSTOP a group's leader
 * for 0.5-3 s; SIGKILL a router and restart it (most often: a router dying
 * in the middle of two-phase commits is what recovery is for).  Never more
 * than one node down at once.  Where network namespaces can be made (root,
 * ip, nft: tests/lib/tl_netns.h) the cluster runs on a real network, every
 * node and router in a namespace of its own, and the schedule also has
 * network faults, each held 0.5-3 s then healed: a group's leader isolated
 * from the other nodes (the routers still reach it: it may go on taking
 * prepares it can no longer commit), a one-way cut from a group's leader to
 * another node, 30% packet loss on a node.  The cluster is made and removed
 * by the parent process (Check's child _exits on a failed assertion).
 *
 * After the run, recovery is waited for (polled, RECOVERY_MS at most): a
 * no-op conditional write (SET probe) must succeed on every account -- a
 * single-item write to an item a prepared transaction holds is refused with
 * TransactionConflictException -- and on the marker of every transfer
 * (ConditionalCheckFailed: no marker, also an answer), and a
 * TransactGetItems of every account must succeed.  Then, from a
 * TransactGetItems of every account and a ConsistentRead Scan:
 *   1. balances sum to ACCOUNTS * INITIAL, none is negative;
 *   2. every acknowledged transfer has its marker (with its from, to and
 *      amount), every cancelled one (with a token) has none, no marker
 *      exists that no transfer wrote, the probes agree with the scan;
 *   3. each account's balance and nx are exactly what the applied transfers
 *      (the markers) make them: every transfer applied all or nothing, once;
 *   4. every TransactGetItems during the run saw the right totals;
 *   5. no item stayed locked (the probes above);
 *   6. after SIGKILL of every process and a restart, the same state.
 * Figures (transfers by outcome, reads, faults, the recovery wait) are
 * printed, not asserted.
 *
 * BANK_SECS sets the run (default 20 for `make test`; `make chaos` runs it
 * as long as it_chaos).  SHOAL_SEED replays the schedule of faults (the
 * seed is printed); the interleaving with the workload is not replayed.
 * Faults are printed as they end, each with the time it began (a SIGKILL
 * is sent by pid, at that time), in ms since the workload started, as are
 * the send and answer times of transfers in a report.  A failing check
 * prints the transfers, balances and reads involved.  The cluster's
 * directory (printed at the start) holds node-N.log, router-N.log and
 * bank-transfers.log (every transfer: outcome, times, markers found); it is
 * kept with SHOAL_KEEP_CLUSTER=1 (the parent removes it after the test).
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/shoal.h"
#include "common/arena.h"
#include "common/cluster.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_netns.h"

#define NODES        3
#define ROUTERS      2
#define GROUPS       4
#define ACCOUNTS     64
#define CLOSED       9 /* the closed set: 3 accounts from each data group */
#define INITIAL      100
#define MAX_AMOUNT   40 /* sometimes more than a balance: ConditionalCheckFailed */
#define MOVERS       3
#define READERS      2
#define ID_BASE      10000000u /* transfer id: (mover + 1) * ID_BASE + seq */
#define RECOVERY_MS  60000
#define DEFAULT_SECS 20

static tl_cluster C;
static bool netns; /* the cluster runs in network namespaces */
static bool cluster_up;
static char ns_prefix[16];
static unsigned seed;
static int64_t t_base; /* the run's start: every time printed is since then */
static atomic_bool stop_work;

static int group_of[ACCOUNTS];
static int closed_set[CLOSED], open_set[ACCOUNTS - CLOSED];
static int n_open;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t since(void)
{
	return now_ms() - t_base;
}

static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int bank_secs(void)
{
	const char *s = getenv("BANK_SECS");
	int v = s != NULL ? atoi(s) : DEFAULT_SECS;
	return v > 0 ? v : DEFAULT_SECS;
}

/* A JSON number, or a number written as a string ("N" values, uint64). */
static long long jnum(const json_t *v)
{
	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_string(v))
		return atoll(json_string_value(v));
	return -1;
}

/* Attribute attr of an item as a number; false if absent. */
static bool item_n(const json_t *item, const char *attr, long long *out)
{
	json_t *n = json_object_get(json_object_get(item, attr), "N");
	if (!json_is_string(n))
		return false;
	*out = atoll(json_string_value(n));
	return true;
}

static const char *item_s(const json_t *item, const char *attr)
{
	json_t *s = json_object_get(json_object_get(item, attr), "S");
	return json_is_string(s) ? json_string_value(s) : NULL;
}

static shoal_client *client(int deadline_ms)
{
	shoal_options o;
	shoal_options_init(&o);
	if (deadline_ms > 0)
		o.deadline_ms = deadline_ms;
	char msg[SH_ERRMSG_SIZE];
	shoal_client *c;
	ck_assert_msg(shoal_client_new(C.endpoint, &o, &c, msg) == SHOAL_OK, "%s", msg);
	return c;
}

/* Problems found by the checks after the run: each printed, then counted. */
static int problems;

__attribute__((format(printf, 1, 2))) static void problem(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (problems++ < 50) {
		printf("it_bank: PROBLEM: ");
		vprintf(fmt, ap);
		printf("\n");
	}
	va_end(ap);
	fflush(stdout);
}

/* ======================================================================== */
/* Transfers                                                                 */
/* ======================================================================== */

/* Outcomes.  X_CANCELLED_NT: cancelled without a token -- either way, as
 * X_UNKNOWN (a resent request's second run may be cancelled by the first
 * run's marker or locks), but counted apart. */
enum { X_ACKED = 1, X_CANCELLED, X_UNKNOWN, X_CANCELLED_NT, X_OUTCOMES };
enum { P_PENDING = 0, P_EXISTS, P_ABSENT };

typedef struct xfer {
	uint32_t id;
	uint8_t from, to;
	uint16_t amount;
	uint8_t outcome;
	bool token;        /* carried a ClientRequestToken */
	bool marker_first; /* the marker was the first action (the coordinator) */
	int64_t t0, t1;    /* sent, answered (ms since t_base) */
	char *error;       /* unknown: "Exception: message" (malloc'd) */
	/* After the run. */
	int found;  /* markers of this id the scan returned */
	int probed; /* P_EXISTS / P_ABSENT */
} xfer;

typedef struct mover {
	pthread_t thread;
	int id;
	unsigned rng;
	shoal_client *c;
	xfer *x;
	size_t n, cap;
	int acked, cancelled, cancel_funds, cancel_conflict, unknown, cancelled_no_token;
	int64_t worst_ms;
} mover;

static mover M[MOVERS];

/* The reason codes of a cancellation, from DynamoDB's message "... [None,
 * ConditionalCheckFailed, ...]": the code of action i into code (size n). */
static void cancel_reason(const char *message, int i, char *code, size_t n)
{
	code[0] = '\0';
	const char *p = strchr(message, '[');
	for (int k = 0; p != NULL; k++) {
		p++;
		while (*p == ' ')
			p++;
		size_t len = strcspn(p, ",]");
		if (k == i) {
			snprintf(code, n, "%.*s", (int)len, p);
			return;
		}
		p = strchr(p, ',');
	}
}

static void one_transfer(mover *m)
{
	if (m->n == m->cap) {
		m->cap = m->cap != 0 ? m->cap * 2 : 1024;
		m->x = realloc(m->x, m->cap * sizeof(*m->x));
		ck_assert(m->x != NULL);
	}
	xfer *x = &m->x[m->n];
	memset(x, 0, sizeof(*x));
	x->id = (uint32_t)(m->id + 1) * ID_BASE + (uint32_t)m->n;
	/* Half the transfers inside the closed set, half outside it. */
	const int *set = rand_r(&m->rng) % 2 == 0 ? closed_set : open_set;
	int size = set == closed_set ? CLOSED : n_open;
	int a = (int)(rand_r(&m->rng) % (unsigned)size);
	int b = (int)(rand_r(&m->rng) % (unsigned)(size - 1));
	if (b >= a)
		b++;
	x->from = (uint8_t)set[a];
	x->to = (uint8_t)set[b];
	x->amount = (uint16_t)(1 + rand_r(&m->rng) % MAX_AMOUNT);
	x->token = rand_r(&m->rng) % 4 != 0;
	x->marker_first = rand_r(&m->rng) % 2 == 0;

	char marker[256], debit[512], credit[512], token[64] = "", body[2048];
	snprintf(marker, sizeof(marker),
	         "{\"Put\":{\"TableName\":\"bank\",\"Item\":{\"pk\":{\"S\":\"xfer#%u\"},"
	         "\"from\":{\"N\":\"%d\"},\"to\":{\"N\":\"%d\"},\"amount\":{\"N\":\"%d\"}},"
	         "\"ConditionExpression\":\"attribute_not_exists(pk)\"}}",
	         x->id, x->from, x->to, x->amount);
	snprintf(debit, sizeof(debit),
	         "{\"Update\":{\"TableName\":\"bank\",\"Key\":{\"pk\":{\"S\":\"acct#%d\"}},"
	         "\"UpdateExpression\":\"SET balance = balance - :a ADD nx :one\","
	         "\"ConditionExpression\":\"balance >= :a\",\"ExpressionAttributeValues\":"
	         "{\":a\":{\"N\":\"%d\"},\":one\":{\"N\":\"1\"}}}}",
	         x->from, x->amount);
	snprintf(credit, sizeof(credit),
	         "{\"Update\":{\"TableName\":\"bank\",\"Key\":{\"pk\":{\"S\":\"acct#%d\"}},"
	         "\"UpdateExpression\":\"SET balance = balance + :a ADD nx :one\","
	         "\"ConditionExpression\":\"attribute_exists(balance)\","
	         "\"ExpressionAttributeValues\":{\":a\":{\"N\":\"%d\"},\":one\":{\"N\":\"1\"}}}}",
	         x->to, x->amount);
	if (x->token)
		snprintf(token, sizeof(token), ",\"ClientRequestToken\":\"bank-%u\"", x->id);
	if (x->marker_first)
		snprintf(body, sizeof(body), "{\"TransactItems\":[%s,%s,%s]%s}", marker, debit,
		         credit, token);
	else
		snprintf(body, sizeof(body), "{\"TransactItems\":[%s,%s,%s]%s}", debit, credit,
		         marker, token);

	char *out = NULL;
	shoal_error err;
	x->t0 = since();
	int rc = shoal_call_json(m->c, "TransactWriteItems", body, &out, &err);
	x->t1 = since();
	shoal_free(out);
	if (x->t1 - x->t0 > m->worst_ms)
		m->worst_ms = x->t1 - x->t0;
	m->n++;
	if (rc == SHOAL_OK) {
		x->outcome = X_ACKED;
		m->acked++;
		return;
	}
	if (rc == SHOAL_E_TXN_CANCELED && err.source == SHOAL_SRC_SERVICE) {
		if (strstr(err.message, "TransactionConflict") != NULL)
			m->cancel_conflict++;
		else if (strstr(err.message, "ConditionalCheckFailed") != NULL)
			m->cancel_funds++;
		if (x->token) {
			x->outcome = X_CANCELLED;
			m->cancelled++;
			/* The marker's own condition can fail only if the marker
			 * exists: the check after the run reports it. */
			char code[64];
			cancel_reason(err.message, x->marker_first ? 0 : 2, code, sizeof(code));
			if (strcmp(code, "ConditionalCheckFailed") == 0)
				printf("it_bank: +%lld ms transfer %u (token) cancelled by its "
				       "marker's condition: %s\n",
				       (long long)x->t1, x->id, err.message);
			return;
		}
		m->cancelled_no_token++;
		x->outcome = X_CANCELLED_NT;
	} else {
		x->outcome = X_UNKNOWN;
		m->unknown++;
	}
	size_t len = strlen(err.exception) + strlen(err.message) + 3;
	x->error = malloc(len);
	if (x->error != NULL)
		snprintf(x->error, len, "%s: %s", err.exception, err.message);
}

static void *transfer_loop(void *arg)
{
	mover *m = arg;
	while (!atomic_load(&stop_work))
		one_transfer(m);
	return NULL;
}

static const char *outcome_name(int o)
{
	return o == X_ACKED          ? "acknowledged"
	       : o == X_CANCELLED    ? "cancelled"
	       : o == X_CANCELLED_NT ? "cancelled-without-token"
	                             : "unknown";
}

static void print_xfer(const char *why, const xfer *x)
{
	printf("it_bank:   transfer %u: %d from acct#%d (group %d) to acct#%d (group %d), %s, "
	       "marker %s, %s, sent +%lld ms, answered +%lld ms%s%s; markers found %d\n",
	       x->id, x->amount, x->from, group_of[x->from], x->to, group_of[x->to],
	       x->token ? "token" : "no token", x->marker_first ? "first" : "last",
	       outcome_name(x->outcome), (long long)x->t0, (long long)x->t1,
	       x->error != NULL ? ": " : "", x->error != NULL ? x->error : "", x->found);
	printf("it_bank:     (%s)\n", why);
}

/* The record of transfer id, or NULL. */
static xfer *find_xfer(unsigned long id)
{
	unsigned long m = id / ID_BASE, seq = id % ID_BASE;
	if (m < 1 || m > MOVERS || seq >= M[m - 1].n)
		return NULL;
	return &M[m - 1].x[seq];
}

/* ======================================================================== */
/* Readers                                                                   */
/* ======================================================================== */

enum { R_CLOSED = 0, R_ALL, R_RANDOM, R_KINDS };
static const char *const READ_KIND[R_KINDS] = {"closed set", "every account", "random"};

typedef struct reader {
	pthread_t thread;
	int id;
	unsigned rng;
	shoal_client *c;
	int ok[R_KINDS], conflicted, failed;
	int bad;            /* reads that saw an impossible state */
	char bad_msg[2048]; /* the first of them */
	char last_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 8];
} reader;

static reader R[READERS];

static void tget_body(const int *accts, int n, char *body, size_t cap)
{
	size_t used = (size_t)snprintf(body, cap, "{\"TransactItems\":[");
	for (int i = 0; i < n; i++)
		used +=
		    (size_t)snprintf(body + used, cap - used,
		                     "%s{\"Get\":{\"TableName\":\"bank\",\"Key\":{\"pk\":{\"S\":"
		                     "\"acct#%d\"}}}}",
		                     i > 0 ? "," : "", accts[i]);
	snprintf(body + used, cap - used, "]}");
}

/* A TransactGetItems of accounts accts[0..n-1]: the balances and nx into
 * bal / nx (-1: the item is absent or lacks it).  Returns the call's code
 * (err filled). */
static int tget(shoal_client *c, const int *accts, int n, long long *bal, long long *nx,
                shoal_error *err)
{
	char body[ACCOUNTS * 96 + 64];
	tget_body(accts, n, body, sizeof(body));
	char *out = NULL;
	int rc = shoal_call_json(c, "TransactGetItems", body, &out, err);
	if (rc != SHOAL_OK)
		return rc;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	json_t *resp = json_object_get(j, "Responses");
	if (json_array_size(resp) != (size_t)n) {
		json_decref(j);
		err->code = SHOAL_E_INTERNAL;
		snprintf(err->exception, sizeof(err->exception), "(test)");
		snprintf(err->message, sizeof(err->message),
		         "TransactGetItems answered %zu responses for %d gets",
		         json_array_size(resp), n);
		return SHOAL_E_INTERNAL;
	}
	for (int i = 0; i < n; i++) {
		json_t *item = json_object_get(json_array_get(resp, (size_t)i), "Item");
		const char *pk = item_s(item, "pk");
		char want[32];
		snprintf(want, sizeof(want), "acct#%d", accts[i]);
		bal[i] = nx[i] = -1;
		if (pk != NULL && strcmp(pk, want) != 0) {
			json_decref(j);
			err->code = SHOAL_E_INTERNAL;
			snprintf(err->exception, sizeof(err->exception), "(test)");
			snprintf(err->message, sizeof(err->message),
			         "TransactGetItems answered %s for %s", pk, want);
			return SHOAL_E_INTERNAL;
		}
		if (pk != NULL) {
			item_n(item, "balance", &bal[i]);
			item_n(item, "nx", &nx[i]);
		}
	}
	json_decref(j);
	return SHOAL_OK;
}

static void one_read(reader *r)
{
	int kind, accts[ACCOUNTS], n;
	unsigned k = rand_r(&r->rng) % 8;
	if (k < 4) {
		kind = R_CLOSED;
		n = CLOSED;
		memcpy(accts, closed_set, sizeof(closed_set));
	} else if (k < 5) {
		kind = R_ALL;
		n = ACCOUNTS;
		for (int i = 0; i < n; i++)
			accts[i] = i;
	} else {
		kind = R_RANDOM;
		n = 2 + (int)(rand_r(&r->rng) % 9);
		int all[ACCOUNTS];
		for (int i = 0; i < ACCOUNTS; i++)
			all[i] = i;
		for (int i = 0; i < n; i++) { /* a partial Fisher-Yates */
			int p = i + (int)(rand_r(&r->rng) % (unsigned)(ACCOUNTS - i));
			int t = all[i];
			all[i] = all[p];
			all[p] = t;
		}
		memcpy(accts, all, (size_t)n * sizeof(int));
	}
	/* The order of the gets does not matter: shuffle it. */
	for (int i = n - 1; i > 0; i--) {
		int p = (int)(rand_r(&r->rng) % (unsigned)(i + 1));
		int t = accts[i];
		accts[i] = accts[p];
		accts[p] = t;
	}
	long long bal[ACCOUNTS], nx[ACCOUNTS];
	shoal_error err;
	int64_t t0 = since();
	int rc = tget(r->c, accts, n, bal, nx, &err);
	int64_t t1 = since();
	if (rc == SHOAL_E_TXN_CANCELED) {
		r->conflicted++;
		return;
	}
	if (rc != SHOAL_OK) {
		r->failed++;
		snprintf(r->last_error, sizeof(r->last_error), "%s: %s", err.exception,
		         err.message);
		return;
	}
	r->ok[kind]++;
	long long sum = 0, nxs = 0;
	bool bad = false;
	for (int i = 0; i < n; i++) {
		bad |= bal[i] < 0 || nx[i] < 0;
		sum += bal[i];
		nxs += nx[i];
	}
	if (kind != R_RANDOM)
		bad |= sum != (long long)n * INITIAL || nxs % 2 != 0;
	if (!bad)
		return;
	if (r->bad++ == 0) {
		size_t used = (size_t)snprintf(
		    r->bad_msg, sizeof(r->bad_msg),
		    "reader %d: TransactGetItems of %s (%d accounts) sent +%lld ms, answered "
		    "+%lld ms: balances sum to %lld (want %lld), nx to %lld:",
		    r->id, READ_KIND[kind], n, (long long)t0, (long long)t1, sum,
		    kind == R_RANDOM ? sum : (long long)n * INITIAL, nxs);
		for (int i = 0; i < n && used < sizeof(r->bad_msg); i++)
			used += (size_t)snprintf(r->bad_msg + used, sizeof(r->bad_msg) - used,
			                         " acct#%d(g%d)=%lld/%lld", accts[i],
			                         group_of[accts[i]], bal[i], nx[i]);
	}
	printf("it_bank: +%lld ms BAD READ by reader %d (%s)\n", (long long)t1, r->id,
	       READ_KIND[kind]);
	fflush(stdout);
}

static void *read_loop(void *arg)
{
	reader *r = arg;
	while (!atomic_load(&stop_work))
		one_read(r);
	return NULL;
}

/* ======================================================================== */
/* Faults                                                                    */
/* ======================================================================== */

/* Every node and router is running: none died of anything but our faults
 * (a crash would otherwise pass for one of them). */
static void check_alive(void)
{
	const char *what;
	int id;
	ck_assert_msg(tl_cluster_alive(&C, &what, &id),
	              "%s %d died on its own (seed %u); see %s-%d.log", what, id, seed, what, id);
}

/* The node leading group g as ClusterStatus says (the replica that calls
 * itself leader with the highest term), or 0. */
static int leader_of(shoal_client *admin, int g)
{
	char *out = NULL;
	shoal_error err;
	if (shoal_call_json(admin, "ClusterStatus", "{}", &out, &err) != SHOAL_OK)
		return 0;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	int leader = 0;
	long long term = -1;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(j, "Groups"), i, v)
	{
		const char *role = json_string_value(json_object_get(v, "Role"));
		if (jnum(json_object_get(v, "Group")) != g || role == NULL ||
		    strcmp(role, "leader") != 0)
			continue;
		long long t = jnum(json_object_get(v, "Term"));
		if (t > term) {
			term = t;
			leader = (int)jnum(json_object_get(v, "Node"));
		}
	}
	json_decref(j);
	return leader >= 1 && leader <= NODES ? leader : 0;
}

/* A node to hit: the leader of a random data group, else any. The random
 * draws do not depend on the cluster's answer (the schedule replays). */
static int pick_node(shoal_client *admin, unsigned *rng, int *group)
{
	*group = 1 + (int)(rand_r(rng) % (GROUPS - 1));
	int any = 1 + (int)(rand_r(rng) % NODES);
	int l = leader_of(admin, *group);
	if (l == 0)
		*group = -1;
	return l != 0 ? l : any;
}

static void leader_text(int group, char *buf, size_t n)
{
	if (group > 0)
		snprintf(buf, n, " (leader of group %d)", group);
	else
		snprintf(buf, n, " (no leader known)");
}

/* SIGKILL of a node or a router by its pid, at once (the time printed is
 * the kill's); then cluster.sh reaps it (pid file). */
static void kill_now(const char *what, int id)
{
	ck_assert_int_eq(tl_cluster_signal(&C, what, id, SIGKILL), 0);
	bool node = strcmp(what, "node") == 0;
	ck_assert_msg(node ? tl_cluster_stop_node(&C, id, true)
	                   : tl_cluster_stop_router(&C, id, true),
	              "reaping %s %d", what, id);
}

/* The fault schedule; returns how many faults it injected. */
static int run_chaos(int secs, unsigned *rng)
{
	shoal_client *admin = client(2000);
	int64_t end = now_ms() + (int64_t)secs * 1000;
	int faults = 0;
	while (now_ms() < end) {
		pause_ms(500 + (int)(rand_r(rng) % 2000));
		check_alive();
		int kind = (int)(rand_r(rng) % (netns ? 11 : 8));
		char who[64] = "";
		int g, id;
		int64_t t;
		if (kind < 2) { /* SIGKILL a group's leader */
			id = pick_node(admin, rng, &g);
			leader_text(g, who, sizeof(who));
			t = since();
			kill_now("node", id);
			pause_ms(200 + (int)(rand_r(rng) % 2500));
			ck_assert_msg(tl_cluster_start_node(&C, id), "restarting node %d", id);
			printf("it_bank: +%lld ms node %d%s SIGKILL, back at +%lld ms\n",
			       (long long)t, id, who, (long long)since());
		} else if (kind < 3) { /* SIGTERM any node */
			id = 1 + (int)(rand_r(rng) % NODES);
			t = since();
			ck_assert_msg(tl_cluster_stop_node(&C, id, false), "stopping node %d", id);
			int64_t down = since();
			pause_ms(200 + (int)(rand_r(rng) % 2500));
			ck_assert_msg(tl_cluster_start_node(&C, id), "restarting node %d", id);
			printf("it_bank: +%lld ms node %d SIGTERM, exited by +%lld, back at +%lld "
			       "ms\n",
			       (long long)t, id, (long long)down, (long long)since());
		} else if (kind < 5) { /* a group's leader stops answering */
			id = pick_node(admin, rng, &g);
			leader_text(g, who, sizeof(who));
			t = since();
			ck_assert_int_eq(tl_cluster_signal(&C, "node", id, SIGSTOP), 0);
			pause_ms(500 + (int)(rand_r(rng) % 2500));
			ck_assert_int_eq(tl_cluster_signal(&C, "node", id, SIGCONT), 0);
			printf("it_bank: +%lld ms node %d%s SIGSTOP, SIGCONT at +%lld ms\n",
			       (long long)t, id, who, (long long)since());
		} else if (kind >= 8) { /* a network fault (netns) */
			char as[16], bs[16];
			id = pick_node(admin, rng, &g);
			int other = 1 + (id + (int)(rand_r(rng) % (NODES - 1))) % NODES;
			int hold = 500 + (int)(rand_r(rng) % 2500);
			snprintf(as, sizeof(as), "%d", id);
			snprintf(bs, sizeof(bs), "%d", other);
			leader_text(g, who, sizeof(who));
			t = since();
			const char *what = kind == 8   ? "isolated"
			                   : kind == 9 ? "one-way cut to node"
			                               : "30% loss";
			if (kind == 8)
				ck_assert(tl_netns_isolate(&C, as));
			else if (kind == 9)
				ck_assert(tl_netns_oneway(&C, as, bs));
			else
				ck_assert(tl_netns_loss(&C, as, 30));
			pause_ms(hold);
			if (kind == 10)
				ck_assert(tl_netns_loss(&C, as, 0));
			ck_assert(tl_netns_heal_all(&C));
			printf("it_bank: +%lld ms node %d%s %s%s, healed at +%lld ms\n",
			       (long long)t, id, who, what, kind == 9 ? bs : "",
			       (long long)since());
		} else { /* SIGKILL a router */
			id = 1 + (int)(rand_r(rng) % ROUTERS);
			t = since();
			kill_now("router", id);
			pause_ms(200 + (int)(rand_r(rng) % 1500));
			ck_assert_msg(tl_cluster_start_router(&C, id), "restarting router %d", id);
			printf("it_bank: +%lld ms router %d SIGKILL, back at +%lld ms\n",
			       (long long)t, id, (long long)since());
		}
		fflush(stdout);
		faults++;
	}
	shoal_client_free(admin);
	check_alive();
	return faults;
}

/* ======================================================================== */
/* After the run                                                             */
/* ======================================================================== */

/* A no-op conditional write to one item: SHOAL_OK, the item exists and no
 * transaction holds it; ConditionalCheckFailed, it does not exist (and none
 * holds it); anything else (TransactionConflictException: locked), ask
 * again. */
typedef struct probe {
	char key[32];
	int state; /* P_PENDING, P_EXISTS, P_ABSENT */
	int refusals;
	char last[SHOAL_EXCEPTION_MAX + 160];
} probe;

static void probe_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	probe *p = arg;
	if (code == SHOAL_OK) {
		p->state = P_EXISTS;
	} else if (code == SHOAL_E_CONDITION_FAILED) {
		p->state = P_ABSENT;
	} else {
		p->refusals++;
		snprintf(p->last, sizeof(p->last), "%s: %.150s", err->exception, err->message);
	}
}

/* Probes until every one has answered or the deadline; returns how many
 * have not. */
static size_t probe_all(shoal_client *c, probe *p, size_t n, int64_t deadline)
{
	size_t pending = n;
	while (pending > 0 && now_ms() < deadline) {
		for (size_t i = 0; i < n; i++) {
			if (p[i].state != P_PENDING)
				continue;
			while (shoal_in_flight(c) >= 64)
				shoal_poll(c, 100);
			char body[512];
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"bank\",\"Key\":{\"pk\":{\"S\":\"%s\"}},"
			         "\"UpdateExpression\":\"SET probe = :p\",\"ConditionExpression\":"
			         "\"attribute_exists(pk)\",\"ExpressionAttributeValues\":{\":p\":"
			         "{\"N\":\"1\"}}}",
			         p[i].key);
			shoal_error err;
			if (shoal_submit_json(c, "UpdateItem", body, probe_done, &p[i], &err) !=
			    SHOAL_OK) {
				snprintf(p[i].last, sizeof(p[i].last), "submit: %.150s",
				         err.message);
			}
		}
		while (shoal_in_flight(c) > 0)
			shoal_poll(c, 100);
		pending = 0;
		for (size_t i = 0; i < n; i++)
			pending += p[i].state == P_PENDING;
		if (pending > 0)
			pause_ms(100);
	}
	return pending;
}

/* The bank as read after the run. */
typedef struct bank {
	long long balance[ACCOUNTS], nx[ACCOUNTS];
	size_t markers;
	uint32_t *marker_ids; /* sorted, malloc'd */
} bank;

/* Every account by one TransactGetItems, retried until the deadline. */
static bool read_accounts(shoal_client *c, bank *b, int64_t deadline, char *why, size_t n)
{
	int all[ACCOUNTS];
	for (int i = 0; i < ACCOUNTS; i++)
		all[i] = i;
	for (;;) {
		shoal_error err;
		int rc = tget(c, all, ACCOUNTS, b->balance, b->nx, &err);
		if (rc == SHOAL_OK)
			return true;
		snprintf(why, n, "%s: %s", err.exception, err.message);
		if (now_ms() > deadline)
			return false;
		pause_ms(100);
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Every marker by a ConsistentRead Scan (checked against the transfers:
 * found counts, from / to / amount); the accounts it returns must hold
 * what b has.  Pages retried until the deadline. */
static bool scan_markers(shoal_client *c, bank *b, bool count, int64_t deadline, char *why,
                         size_t n)
{
	json_t *start = NULL;
	size_t cap = 1024;
	b->markers = 0;
	free(b->marker_ids);
	b->marker_ids = malloc(cap * sizeof(uint32_t));
	ck_assert(b->marker_ids != NULL);
	int accounts = 0;
	for (;;) {
		json_t *req = json_pack("{s:s,s:b}", "TableName", "bank", "ConsistentRead", 1);
		if (start != NULL)
			json_object_set(req, "ExclusiveStartKey", start);
		char *body = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		char *out = NULL;
		shoal_error err;
		int rc = shoal_call_json(c, "Scan", body, &out, &err);
		free(body);
		if (rc != SHOAL_OK) {
			snprintf(why, n, "Scan: %s: %s", err.exception, err.message);
			if (now_ms() > deadline) {
				json_decref(start);
				return false;
			}
			pause_ms(100);
			continue;
		}
		json_t *j = json_loads(out, 0, NULL);
		shoal_free(out);
		size_t i;
		json_t *item;
		json_array_foreach(json_object_get(j, "Items"), i, item)
		{
			const char *pk = item_s(item, "pk");
			long long v = -1, nx = -1;
			if (pk != NULL && strncmp(pk, "acct#", 5) == 0) {
				int a = atoi(pk + 5);
				item_n(item, "balance", &v);
				item_n(item, "nx", &nx);
				if (a < 0 || a >= ACCOUNTS)
					problem("the scan returned an unknown account %s", pk);
				else if (v != b->balance[a] || nx != b->nx[a])
					problem("acct#%d: the scan says balance %lld nx %lld, "
					        "TransactGetItems %lld / %lld",
					        a, v, nx, b->balance[a], b->nx[a]);
				accounts++;
				continue;
			}
			if (pk == NULL || strncmp(pk, "xfer#", 5) != 0) {
				problem("the scan returned an item nobody wrote: %s",
				        pk != NULL ? pk : "(no pk)");
				continue;
			}
			unsigned long id = strtoul(pk + 5, NULL, 10);
			xfer *x = find_xfer(id);
			long long from = -1, to = -1, amount = -1;
			item_n(item, "from", &from);
			item_n(item, "to", &to);
			item_n(item, "amount", &amount);
			if (x == NULL) {
				problem("marker %s: no transfer has this id", pk);
				continue;
			}
			if (from != x->from || to != x->to || amount != x->amount)
				problem("marker %s holds from %lld to %lld amount %lld; transfer "
				        "%u was %d from %d to %d",
				        pk, from, to, amount, x->id, x->amount, x->from, x->to);
			if (count)
				x->found++;
			if (b->markers == cap) {
				cap *= 2;
				b->marker_ids = realloc(b->marker_ids, cap * sizeof(uint32_t));
				ck_assert(b->marker_ids != NULL);
			}
			b->marker_ids[b->markers++] = (uint32_t)id;
		}
		json_decref(start);
		start = json_incref(json_object_get(j, "LastEvaluatedKey"));
		json_decref(j);
		if (start == NULL)
			break;
	}
	if (accounts != ACCOUNTS)
		problem("the scan returned %d accounts, not %d", accounts, ACCOUNTS);
	qsort(b->marker_ids, b->markers, sizeof(uint32_t), cmp_u32);
	return true;
}

/* Recovery: every account and every transfer's marker takes a write (no
 * lock left), and every account reads in one TransactGetItems.  Returns the
 * ms it took. */
static int64_t wait_recovery(shoal_client *c, const char *when, bool markers)
{
	int64_t t0 = now_ms(), deadline = t0 + RECOVERY_MS;
	size_t n = ACCOUNTS;
	if (markers)
		for (int m = 0; m < MOVERS; m++)
			n += M[m].n;
	probe *p = calloc(n, sizeof(*p));
	ck_assert(p != NULL);
	for (int i = 0; i < ACCOUNTS; i++)
		snprintf(p[i].key, sizeof(p[i].key), "acct#%d", i);
	size_t k = ACCOUNTS;
	for (int m = 0; markers && m < MOVERS; m++)
		for (size_t i = 0; i < M[m].n; i++, k++)
			snprintf(p[k].key, sizeof(p[k].key), "xfer#%u", M[m].x[i].id);
	size_t left = probe_all(c, p, n, deadline);
	int64_t probed = now_ms() - t0;
	int refused = 0, refusals = 0;
	for (size_t i = 0; i < n; i++) {
		refused += p[i].refusals > 0;
		refusals += p[i].refusals;
		if (p[i].state == P_PENDING)
			problem("%s: %s still refuses a write after %d s: %s", when, p[i].key,
			        RECOVERY_MS / 1000, p[i].last);
	}
	for (int i = 0; i < ACCOUNTS; i++)
		if (p[i].state == P_ABSENT)
			problem("%s: acct#%d does not exist", when, i);
	k = ACCOUNTS;
	for (int m = 0; markers && m < MOVERS; m++)
		for (size_t i = 0; i < M[m].n; i++)
			M[m].x[i].probed = p[k++].state;
	/* The first refusal of each refused item, for the record. */
	int shown = 0;
	for (size_t i = 0; i < n && shown < 5; i++)
		if (p[i].refusals > 0 && p[i].state != P_PENDING) {
			printf("it_bank: %s: %s refused %d time(s) before it took a write, the "
			       "last: %s\n",
			       when, p[i].key, p[i].refusals, p[i].last);
			shown++;
		}
	free(p);
	ck_assert_msg(left == 0, "%s: %zu items still locked or unreachable after %d s (seed %u)",
	              when, left, RECOVERY_MS / 1000, seed);
	bank b;
	char why[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 16] = "";
	ck_assert_msg(read_accounts(c, &b, deadline, why, sizeof(why)),
	              "%s: no TransactGetItems of every account succeeded in %d s (seed %u): %s",
	              when, RECOVERY_MS / 1000, seed, why);
	int64_t took = now_ms() - t0;
	printf("it_bank: %s: recovered in %lld ms (%zu items took a no-op write in %lld ms, %d "
	       "of them refused first, %d refusals)\n",
	       when, (long long)took, n, (long long)probed, refused, refusals);
	fflush(stdout);
	return took;
}

/* Reads the bank (every account in one TransactGetItems, every marker by
 * a Scan). */
static void read_bank(shoal_client *c, bank *b, bool count)
{
	char why[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 16] = "";
	int64_t deadline = now_ms() + RECOVERY_MS;
	ck_assert_msg(read_accounts(c, b, deadline, why, sizeof(why)),
	              "no TransactGetItems of every account (seed %u): %s", seed, why);
	ck_assert_msg(scan_markers(c, b, count, deadline, why, sizeof(why)),
	              "no Scan of the table (seed %u): %s", seed, why);
}

/* Every transfer, one a line, into <cluster dir>/bank-transfers.log (kept
 * with the processes' logs when the test fails). */
static void dump_transfers(void)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/bank-transfers.log", C.dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f, "# id from(group) to(group) amount token marker outcome sent_ms answered_ms "
	           "markers_found probe error\n");
	for (int m = 0; m < MOVERS; m++)
		for (size_t i = 0; i < M[m].n; i++) {
			const xfer *x = &M[m].x[i];
			fprintf(f, "%u %d(%d) %d(%d) %d %s %s %s %lld %lld %d %s %s\n", x->id,
			        x->from, group_of[x->from], x->to, group_of[x->to], x->amount,
			        x->token ? "token" : "-", x->marker_first ? "first" : "last",
			        outcome_name(x->outcome), (long long)x->t0, (long long)x->t1,
			        x->found,
			        x->probed == P_EXISTS   ? "exists"
			        : x->probed == P_ABSENT ? "absent"
			                                : "-",
			        x->error != NULL ? x->error : "");
		}
	fclose(f);
}

/* Checks 1-3. */
static void check_bank(const bank *b)
{
	long long total = 0;
	for (int i = 0; i < ACCOUNTS; i++) {
		total += b->balance[i];
		if (b->balance[i] < 0)
			problem("acct#%d: balance %lld", i, b->balance[i]);
	}
	if (total != (long long)ACCOUNTS * INITIAL)
		problem("the balances sum to %lld, not %lld", total, (long long)ACCOUNTS * INITIAL);

	long long want[ACCOUNTS], want_nx[ACCOUNTS];
	for (int i = 0; i < ACCOUNTS; i++) {
		want[i] = INITIAL;
		want_nx[i] = 0;
	}
	int applied[X_OUTCOMES] = {0}, all[X_OUTCOMES] = {0};
	for (int m = 0; m < MOVERS; m++) {
		for (size_t i = 0; i < M[m].n; i++) {
			xfer *x = &M[m].x[i];
			all[x->outcome]++;
			if (x->found > 1)
				problem("transfer %u: %d markers", x->id, x->found);
			if ((x->found > 0) != (x->probed == P_EXISTS)) {
				problem("transfer %u: the scan found %d markers, the probe %s",
				        x->id, x->found, x->probed == P_EXISTS ? "one" : "none");
				print_xfer("scan and probe disagree", x);
			}
			if (x->outcome == X_ACKED && x->found == 0) {
				problem("transfer %u was acknowledged but is not applied", x->id);
				print_xfer("acknowledged, no marker", x);
			}
			if (x->outcome == X_CANCELLED && x->found > 0) {
				problem("transfer %u was cancelled but is applied", x->id);
				print_xfer("cancelled, marker found", x);
			}
			if (x->found == 0)
				continue;
			applied[x->outcome]++;
			want[x->from] -= x->amount;
			want[x->to] += x->amount;
			want_nx[x->from]++;
			want_nx[x->to]++;
		}
	}
	int wrong = 0;
	for (int i = 0; i < ACCOUNTS; i++) {
		if (want[i] == b->balance[i] && want_nx[i] == b->nx[i])
			continue;
		wrong++;
		problem("acct#%d (group %d) holds balance %lld nx %lld; its applied transfers "
		        "make it %lld / %lld",
		        i, group_of[i], b->balance[i], b->nx[i], want[i], want_nx[i]);
	}
	if (wrong > 0) { /* the transfers of doubtful outcome that touched one */
		int shown = 0;
		for (int m = 0; m < MOVERS; m++)
			for (size_t i = 0; i < M[m].n && shown < 40; i++) {
				xfer *x = &M[m].x[i];
				bool w = want[x->from] != b->balance[x->from] ||
				         want[x->to] != b->balance[x->to] ||
				         want_nx[x->from] != b->nx[x->from] ||
				         want_nx[x->to] != b->nx[x->to];
				bool plain = (x->outcome == X_ACKED && x->found == 1) ||
				             (x->outcome == X_CANCELLED && x->found == 0);
				if (w && !plain) {
					print_xfer("touches an account that does not add up", x);
					shown++;
				}
			}
	}
	printf("it_bank: %zu markers: %d of %d acknowledged transfers applied, %d of %d "
	       "cancelled, %d of %d with an unknown outcome, %d of %d cancelled without a "
	       "token\n",
	       b->markers, applied[X_ACKED], all[X_ACKED], applied[X_CANCELLED], all[X_CANCELLED],
	       applied[X_UNKNOWN], all[X_UNKNOWN], applied[X_CANCELLED_NT], all[X_CANCELLED_NT]);
	/* A cancellation without a token that was applied: a resent request
	 * (its router died, or no answer in 12 s) cancelled by its own first
	 * run.  Shown with its times, to set beside the router faults. */
	int shown = 0;
	for (int m = 0; m < MOVERS; m++)
		for (size_t i = 0; i < M[m].n && shown < 10; i++)
			if (M[m].x[i].outcome == X_CANCELLED_NT && M[m].x[i].found > 0) {
				print_xfer("cancelled without a token, yet applied", &M[m].x[i]);
				shown++;
			}
	fflush(stdout);
}

/* ======================================================================== */
/* Setup                                                                     */
/* ======================================================================== */

static const char *TABLE_DEF = "{\"TableName\":\"bank\","
                               "\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
                               "\"AttributeType\":\"S\"}],"
                               "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"}],"
                               "\"BillingMode\":\"PAY_PER_REQUEST\"}";

/* The group of every account, computed as the router does, and checked
 * against the item counts the group leaders report.  The closed set: the
 * first CLOSED / 3 accounts of each data group. */
static void place_accounts(shoal_client *c)
{
	char *out = NULL;
	shoal_error err;
	uint32_t table_id = tl_table_number(c, "bank");
	ck_assert_msg(table_id > 0, "ClusterStatus gave no TableNumber for bank");

	static sh_cluster_conf conf;
	char path[1100], msg[SH_ERRMSG_SIZE];
	snprintf(path, sizeof(path), "%s/cluster.ini", C.dir);
	ck_assert_msg(sh_cluster_load(path, &conf, msg) == SHOAL_OK, "%s", msg);
	ck_assert_int_eq(conf.groups, GROUPS);
	sh_arena a;
	sh_arena_init(&a);
	int per_group[GROUPS] = {0};
	for (int i = 0; i < ACCOUNTS; i++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "acct#%d", i);
		st_value *v = st_new_s(&a, pk);
		ck_assert(v != NULL);
		uint64_t h = st_key_hash(table_id, v);
		group_of[i] =
		    (int)sh_cluster_partition_group(&conf, sh_cluster_partition_of(&conf, h));
		ck_assert(group_of[i] >= 1 && group_of[i] < GROUPS);
		per_group[group_of[i]]++;
	}
	sh_arena_fini(&a);

	/* The leaders' item counts must be ours (polled: a count is read
	 * from each replica as it has applied). */
	int64_t deadline = now_ms() + 20000;
	char seen[256] = "";
	for (;;) {
		int got[GROUPS] = {0};
		out = NULL;
		if (shoal_call_json(c, "ClusterStatus", "{}", &out, &err) == SHOAL_OK) {
			json_t *j = json_loads(out, 0, NULL);
			shoal_free(out);
			size_t i, k;
			json_t *v, *t;
			json_array_foreach(json_object_get(j, "Groups"), i, v)
			{
				const char *role = json_string_value(json_object_get(v, "Role"));
				long long g = jnum(json_object_get(v, "Group"));
				if (role == NULL || strcmp(role, "leader") != 0 || g < 0 ||
				    g >= GROUPS)
					continue;
				json_array_foreach(json_object_get(v, "Tables"), k, t)
				{
					const char *name =
					    json_string_value(json_object_get(t, "TableName"));
					if (name != NULL && strcmp(name, "bank") == 0)
						got[g] = (int)jnum(json_object_get(t, "ItemCount"));
				}
			}
			json_decref(j);
		}
		bool same = true;
		size_t used = 0;
		for (int g = 0; g < GROUPS; g++) {
			same &= got[g] == per_group[g];
			used += (size_t)snprintf(seen + used, sizeof(seen) - used, " g%d:%d/%d", g,
			                         got[g], per_group[g]);
		}
		if (same)
			break;
		ck_assert_msg(now_ms() < deadline,
		              "the accounts' groups as computed differ from the item counts "
		              "ClusterStatus reports (reported/computed):%s",
		              seen);
		pause_ms(100);
	}

	int in_closed[GROUPS] = {0}, nc = 0;
	n_open = 0;
	for (int i = 0; i < ACCOUNTS; i++) {
		int g = group_of[i];
		if (in_closed[g] < CLOSED / (GROUPS - 1)) {
			in_closed[g]++;
			closed_set[nc++] = i;
		} else {
			open_set[n_open++] = i;
		}
	}
	ck_assert_msg(nc == CLOSED,
	              "only %d accounts for the closed set: some data group holds "
	              "fewer than %d accounts",
	              nc, CLOSED / (GROUPS - 1));
	ck_assert(n_open >= 2);
	char list[256];
	size_t used = 0;
	for (int i = 0; i < CLOSED; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, " acct#%d(g%d)",
		                         closed_set[i], group_of[closed_set[i]]);
	printf("it_bank: table number %u; accounts per data group:%s; closed set:%s\n", table_id,
	       seen, list);
	fflush(stdout);
}

static void create_bank(void)
{
	shoal_client *c = client(0);
	char *out = NULL;
	shoal_error err;
	int rc = shoal_call_json(c, "CreateTable", TABLE_DEF, &out, &err);
	ck_assert_msg(rc == SHOAL_OK, "CreateTable: %s: %s", err.exception, err.message);
	shoal_free(out);
	for (int i = 0; i < ACCOUNTS; i++) {
		char body[256];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"bank\",\"Item\":{\"pk\":{\"S\":\"acct#%d\"},\"balance\":"
		         "{\"N\":\"%d\"},\"nx\":{\"N\":\"0\"}}}",
		         i, INITIAL);
		rc = shoal_call_json(c, "PutItem", body, &out, &err);
		ck_assert_msg(rc == SHOAL_OK, "PutItem acct#%d: %s: %s", i, err.exception,
		              err.message);
		shoal_free(out);
	}
	place_accounts(c);
	shoal_client_free(c);
}

/* ======================================================================== */
/* The test                                                                  */
/* ======================================================================== */

START_TEST(test_transfers_are_atomic_under_chaos)
{
	const char *s = getenv("SHOAL_SEED");
	seed = s != NULL ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
	int secs = bank_secs();
	printf("it_bank: seed %u (SHOAL_SEED=%u to replay the fault schedule), %d s of "
	       "transfers under faults\n",
	       seed, seed, secs);
	fflush(stdout);

	ck_assert_msg(cluster_up, "the cluster did not start");
	printf("it_bank: cluster in %s (logs node-N.log, router-N.log)%s\n", C.dir,
	       netns ? ", every process in a network namespace of its own" : "");
	create_bank();

	t_base = now_ms();
	atomic_store(&stop_work, false);
	for (int i = 0; i < MOVERS; i++) {
		memset(&M[i], 0, sizeof(M[i]));
		M[i].id = i;
		M[i].rng = seed + 7919u * (unsigned)(i + 1);
		M[i].c = client(0);
		ck_assert_int_eq(pthread_create(&M[i].thread, NULL, transfer_loop, &M[i]), 0);
	}
	for (int i = 0; i < READERS; i++) {
		memset(&R[i], 0, sizeof(R[i]));
		R[i].id = i;
		R[i].rng = seed + 104729u * (unsigned)(i + 1);
		R[i].c = client(0);
		ck_assert_int_eq(pthread_create(&R[i].thread, NULL, read_loop, &R[i]), 0);
	}
	unsigned rng = seed;
	int faults = run_chaos(secs, &rng);
	atomic_store(&stop_work, true);
	int64_t stopped = since();

	int acked = 0, cancelled = 0, funds = 0, conflict = 0, unknown = 0, no_token = 0;
	int64_t worst = 0;
	for (int i = 0; i < MOVERS; i++) {
		pthread_join(M[i].thread, NULL);
		shoal_client_free(M[i].c);
		acked += M[i].acked;
		cancelled += M[i].cancelled;
		funds += M[i].cancel_funds;
		conflict += M[i].cancel_conflict;
		unknown += M[i].unknown;
		no_token += M[i].cancelled_no_token;
		if (M[i].worst_ms > worst)
			worst = M[i].worst_ms;
	}
	int reads[R_KINDS] = {0}, conflicted = 0, read_failed = 0, bad = 0;
	const char *bad_msg = "";
	for (int i = 0; i < READERS; i++) {
		pthread_join(R[i].thread, NULL);
		shoal_client_free(R[i].c);
		for (int k = 0; k < R_KINDS; k++)
			reads[k] += R[i].ok[k];
		conflicted += R[i].conflicted;
		read_failed += R[i].failed;
		if (R[i].bad > 0 && bad == 0)
			bad_msg = R[i].bad_msg;
		bad += R[i].bad;
	}
	printf("it_bank: %d faults in %d s; the last call returned at +%lld ms (stop at +%lld)\n",
	       faults, secs, (long long)since(), (long long)stopped);
	printf("it_bank: transfers: %d acknowledged, %d cancelled with a token, %d cancelled "
	       "without one, %d unknown; cancellations: %d for funds or a condition, %d for a "
	       "conflict; worst latency %lld ms\n",
	       acked, cancelled, no_token, unknown, funds, conflict, (long long)worst);
	printf("it_bank: TransactGetItems: %d of the closed set, %d of every account, %d random "
	       "ok; %d cancelled (conflict), %d failed; %d saw an impossible state\n",
	       reads[R_CLOSED], reads[R_ALL], reads[R_RANDOM], conflicted, read_failed, bad);
	for (int i = 0; i < READERS; i++)
		if (R[i].failed > 0)
			printf("it_bank: reader %d: the last failure: %s\n", i, R[i].last_error);
	/* The unknown outcomes, by error. */
	for (int m = 0, shown = 0; m < MOVERS; m++)
		for (size_t i = 0; i < M[m].n && shown < 8; i++)
			if (M[m].x[i].outcome == X_UNKNOWN) {
				printf("it_bank: unknown: transfer %u at +%lld..+%lld ms: %.200s\n",
				       M[m].x[i].id, (long long)M[m].x[i].t0,
				       (long long)M[m].x[i].t1,
				       M[m].x[i].error != NULL ? M[m].x[i].error : "?");
				shown++;
			}
	fflush(stdout);
	dump_transfers();
	ck_assert_msg(acked > 0, "no transfer was acknowledged");
	if (bad > 0)
		problem("%d TransactGetItems saw an impossible state (seed %u), the first: %s", bad,
		        seed, bad_msg);

	check_alive();
	shoal_client *c = client(0);
	int64_t rec = wait_recovery(c, "after the run", true);
	static bank b1, b2;
	read_bank(c, &b1, true);
	check_bank(&b1);
	dump_transfers();
	shoal_client_free(c);
	ck_assert_msg(problems == 0, "%d problems after the run (seed %u): see above", problems,
	              seed);

	/* Every process dies at once and comes back: the same bank. */
	for (int id = 1; id <= NODES; id++)
		ck_assert(tl_cluster_stop_node(&C, id, true));
	for (int id = 1; id <= ROUTERS; id++)
		ck_assert(tl_cluster_stop_router(&C, id, true));
	int64_t t0 = now_ms();
	for (int id = 1; id <= NODES; id++)
		ck_assert_msg(tl_cluster_start_node(&C, id), "restarting node %d", id);
	for (int id = 1; id <= ROUTERS; id++)
		ck_assert_msg(tl_cluster_start_router(&C, id), "restarting router %d", id);
	printf("it_bank: every process SIGKILLed and restarted in %lld ms\n",
	       (long long)(now_ms() - t0));
	c = client(0);
	wait_recovery(c, "after a restart of every process", false);
	read_bank(c, &b2, false);
	shoal_client_free(c);
	for (int i = 0; i < ACCOUNTS; i++)
		if (b1.balance[i] != b2.balance[i] || b1.nx[i] != b2.nx[i])
			problem("after the restart acct#%d holds %lld / %lld, before %lld / %lld",
			        i, b2.balance[i], b2.nx[i], b1.balance[i], b1.nx[i]);
	if (b1.markers != b2.markers ||
	    memcmp(b1.marker_ids, b2.marker_ids, b1.markers * sizeof(uint32_t)) != 0)
		problem("after the restart %zu markers, before %zu (or other ones)", b2.markers,
		        b1.markers);
	printf("it_bank: after the restart: the same %zu markers and balances; recovery after "
	       "the run took %lld ms\n",
	       b2.markers, (long long)rec);
	fflush(stdout);
	free(b1.marker_ids);
	free(b2.marker_ids);
	for (int m = 0; m < MOVERS; m++) {
		for (size_t i = 0; i < M[m].n; i++)
			free(M[m].x[i].error);
		free(M[m].x);
	}
	ck_assert_msg(problems == 0, "%d problems after the restart (seed %u): see above", problems,
	              seed);
}
END_TEST

/* The cluster, in the parent process (see the top). */
static void setup(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char why[512];
	netns = tl_netns_available(why, sizeof(why));
	if (netns) {
		snprintf(ns_prefix, sizeof(ns_prefix), "sb%d", (int)(getpid() % 100000));
		cluster_up = tl_netns_up(&C, ns_prefix, NODES, ROUTERS, GROUPS);
	} else {
		printf("it_bank: no network namespaces (%s): process faults only\n", why);
		cluster_up = tl_cluster_up(&C, NODES, ROUTERS, GROUPS);
	}
}

static void teardown(void)
{
	if (netns && cluster_up)
		tl_netns_heal_all(&C);
	tl_cluster_down(&C);
}

static Suite *bank_suite(void)
{
	Suite *s = suite_create("bank");
	TCase *tc = tcase_create("bank");
	tcase_set_timeout(tc, bank_secs() + 600);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_transfers_are_atomic_under_chaos);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(bank_suite)
