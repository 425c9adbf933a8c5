/*
 * group.c -- one storage group's Raft replica on the node's libuv loop.
 *
 * Each hosted group has a directory <node dir>/group-<g>/ with raft's files
 * (raft_uv: metadata, segments, snapshots) and lmdb/ (the FSM's environment),
 * its own raft_io over our NODELAY transport listening on the group's Raft
 * endpoint (raft_port + g), and a raft instance whose id is the node id.
 *
 * Lifecycle (g->state):
 *
 *   state     event                              next      function
 *   -------   --------------------------------   -------   -----------------
 *   (none)    raft_init succeeded                INIT      node_group_open
 *   INIT      raft_start succeeded               RUNNING   node_group_open
 *   INIT      close requested                    CLOSING   node_group_close
 *   RUNNING   close requested                    CLOSING   node_group_close
 *   CLOSING   raft's close callback              CLOSED    raft_closed_cb
 *   CLOSED    storage closed, memory freed       (freed)   node_group_free
 *
 * Requests from the server's workers (node_group_submit, any thread) wait in
 * two queues under g->mu: writes and consistent-read barriers.  The worker
 * wakes the loop (uv_async); the loop (node_group_flush) takes both queues
 * at once:
 *
 *  - Writes are group-committed: consecutive writes are packed into one
 *    shoal.Command of at most NODE_BATCH_MAX_OPS operations (and about
 *    NODE_BATCH_MAX_BYTES) and proposed with ONE raft_apply.  Before the
 *    apply the Command's batch is registered with the FSM, which stores each
 *    operation's packed NodeResponse in it when the entry is applied here
 *    (node/fsm.h).  At most NODE_MAX_INFLIGHT Commands per group are in
 *    flight; writes arriving meanwhile wait in the queue and are proposed
 *    together when an apply callback frees a slot (at the end of that loop
 *    iteration, node_group_publish), so the busier the group, the bigger
 *    its entries, and fewer entries mean fewer log writes and fsyncs on
 *    every replica.
 *  - Consistent reads share ONE raft_barrier per flush.  When the barrier
 *    entry has been applied, every write committed before the reads arrived
 *    is visible in LMDB and this node was leader at a point after the reads
 *    arrived (the barrier committed in its term): a read served now is
 *    linearizable.  A barrier issued earlier cannot serve reads that arrived
 *    after it was issued, so every flush issues its own.
 *
 * Answers to writes whose proposal failed:
 *  - raft_apply refused (not leader): the write was never proposed, so
 *    SHOAL_E_NOT_LEADER with the leader hint; the router retries safely.
 *  - the apply callback reports failure (RAFT_LEADERSHIPLOST when this node
 *    stepped down or closed): the entry is in the log and MAY still commit
 *    under the next leader.  Answering NOT_LEADER would invite the router to
 *    retry a write that may already have been applied (harmless for puts and
 *    deletes of the same value, not for ADD or a conditional write), so we
 *    answer SHOAL_E_OUTCOME_UNKNOWN, which the router passes on without retrying.  DynamoDB
 *    has the same ambiguity for a retried non-idempotent write; conditional
 *    writes and ClientRequestToken are the user's tools.
 *
 * Batch ids must never repeat for this node id, not even across restarts:
 * an entry proposed by a previous incarnation may be applied after this
 * process registered a batch with the same id (node.c starts the counter at
 * a random 63-bit value).
 *
 * Status: raft's fields may only be read on the loop, so after every loop
 * iteration node_group_publish copies role, term, commit and applied index,
 * leader and the FSM's sticky failure into atomics for the workers, the
 * metrics and GroupStatus, and logs role changes.  A replica whose FSM
 * failed stops serving (node_group_health) and, if leader, hands leadership
 * to another voter (raft_transfer), since it can no longer apply anything.
 *
 * Threads: node_group_submit, node_group_status_get, node_group_health,
 * node_group_env, node_group_id: any thread.  Everything else: loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "node/group_int.h"

/* A Command in flight: raft's request, the FSM batch, and the waiters of
 * its operations (chained by next, in operation order). */
typedef struct proposal {
	struct raft_apply req;
	node_group *g;
	node_batch batch;
	node_waiter *head;
	uint32_t n;
} proposal;

/* A barrier in flight and the consistent reads waiting for it. */
typedef struct barrier {
	struct raft_barrier req;
	node_group *g;
	node_waiter *head;
} barrier;

const char *node_role_name(int role)
{
	switch (role) {
	case RAFT_LEADER:
		return "leader";
	case RAFT_FOLLOWER:
		return "follower";
	case RAFT_CANDIDATE:
		return "candidate";
	default:
		return "unavailable";
	}
}

uint32_t node_group_id(const node_group *g)
{
	return g->id;
}

node *node_group_owner(const node_group *g)
{
	return g->node;
}

st_env *node_group_env(node_group *g)
{
	return node_fsm_env(g->fsm);
}

node_fsm *node_group_fsm(node_group *g)
{
	return g->fsm;
}

const char *node_group_dir(const node_group *g)
{
	return g->dir;
}

/* ------------------------------------------------------------------------ */
/* Waiters                                                                   */
/* ------------------------------------------------------------------------ */

int node_waiter_init(node_waiter *w)
{
	memset(w, 0, sizeof(*w));
	if (pthread_mutex_init(&w->mu, NULL) != 0)
		return SHOAL_E_NOMEM;
	if (pthread_cond_init(&w->cv, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		return SHOAL_E_NOMEM;
	}
	return SHOAL_OK;
}

void node_waiter_fini(node_waiter *w)
{
	sh_free(w->resp);
	w->resp = NULL;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

int node_waiter_wait(node_waiter *w)
{
	pthread_mutex_lock(&w->mu);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->mu);
	int code = w->code;
	pthread_mutex_unlock(&w->mu);
	return code;
}

/* Completes a waiter (loop).  After the unlock the worker may reuse w at
 * once: callers read w->next before calling this. */
void node_group_finish(node_group *g, node_waiter *w, int code, uint32_t leader, const char *msg,
                       uint8_t *resp, size_t resp_len)
{
	if (w->kind == NODE_WAIT_WRITE)
		atomic_fetch_sub(&g->pending, 1);
	if (w->cb != NULL) {
		w->code = code;
		w->leader = leader;
		snprintf(w->msg, sizeof(w->msg), "%s", msg != NULL ? msg : "");
		w->resp = resp;
		w->resp_len = resp_len;
		w->done = true;
		w->cb(w);
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->code = code;
	w->leader = leader;
	snprintf(w->msg, sizeof(w->msg), "%s", msg != NULL ? msg : "");
	w->resp = resp;
	w->resp_len = resp_len;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Completes a chain of waiters with the same failure. */
static void fail_chain(node_group *g, node_waiter *w, int code, uint32_t leader, const char *msg)
{
	while (w != NULL) {
		node_waiter *next = w->next;
		node_group_finish(g, w, code, leader, msg, NULL, 0);
		w = next;
	}
}

uint32_t node_group_current_leader(node_group *g)
{
	raft_id id = 0;
	const char *address = NULL;
	if (g->state == GROUP_RUNNING)
		raft_leader(&g->raft, &id, &address);
	return (uint32_t)id;
}

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                       */
/* ------------------------------------------------------------------------ */

/* The most specific text raft left about error rv: raft's own message, else
 * its io's, else the transport's, else the code's description. */
static const char *raft_error(node_group *g, int rv)
{
	const char *m = raft_errmsg(&g->raft);
	if (m != NULL && m[0] != '\0')
		return m;
	if (g->io_init && g->io.errmsg[0] != '\0')
		return g->io.errmsg;
	if (g->transport_init && g->transport.errmsg[0] != '\0')
		return g->transport.errmsg;
	return raft_strerror(rv);
}

static void set_snapshot_counts(node_group *g, size_t avg, size_t budget);

static int make_dir(const char *path, char *errmsg)
{
	/* Only the node reads its data: 0700, tightened if it was looser. */
	struct stat st;
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return sh_errf(errmsg, SHOAL_E_IO, "mkdir %s: %s", path, strerror(errno));
	if (stat(path, &st) == 0 && (st.st_mode & 077) != 0 && chmod(path, st.st_mode & 0700) != 0)
		return sh_errf(errmsg, SHOAL_E_IO, "chmod 0700 %s: %s", path, strerror(errno));
	return SHOAL_OK;
}

/* The cluster's birth only (node.c, "Bootstrap"): the group's first
 * configuration is the birth map's voters -- the map the node follows is
 * the birth map then. */
static int bootstrap(node_group *g, char *errmsg)
{
	uint32_t replicas[SH_MAP_GROUP_REPLICAS];
	struct raft_configuration configuration;
	int rc = SHOAL_OK;

	uint32_t nr = sh_place_voters(g->node->place, g->id, replicas, SH_MAP_GROUP_REPLICAS);
	if (nr > SH_MAP_GROUP_REPLICAS)
		nr = SH_MAP_GROUP_REPLICAS;
	raft_configuration_init(&configuration);
	for (uint32_t k = 0; k < nr; k++) {
		char address[SH_ADDR_MAX];
		if (!sh_place_raft_address(g->node->place, replicas[k], g->id, address)) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "group %u: replica node %u unknown",
			             g->id, replicas[k]);
			goto out;
		}
		int rv = raft_configuration_add(&configuration, replicas[k], address, RAFT_VOTER);
		if (rv != 0) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: raft_configuration_add: %s",
			             g->id, raft_strerror(rv));
			goto out;
		}
	}
	int rv = raft_bootstrap(&g->raft, &configuration);
	if (rv == 0)
		node_logf(NODE_LOG_INFO, "group %u: bootstrapped with %u replicas", g->id, nr);
	else if (rv != RAFT_CANTBOOTSTRAP)
		rc = sh_errf(errmsg, SHOAL_E_IO, "group %u: raft_bootstrap: %s", g->id,
		             raft_error(g, rv));
out:
	raft_configuration_close(&configuration);
	return rc;
}

/* Frees a group whose raft was never initialised (or has closed). */
static void group_destroy(node_group *g)
{
	if (g->fsm != NULL)
		node_fsm_close(g->fsm);
	if (g->io_init)
		raft_uv_close(&g->io);
	if (g->transport_init)
		node_transport_close(&g->transport);
	pthread_mutex_destroy(&g->err_mu);
	pthread_mutex_destroy(&g->members_mu);
	pthread_mutex_destroy(&g->mu);
	sh_free(g);
}

/* Group 0's applied maps go to the node's own map at once (node_fsm.h). */
static void map_applied(void *arg, const uint8_t *map, size_t len)
{
	char msg[SH_ERRMSG_SIZE];
	if (node_map_offer(arg, map, len, msg) < 0)
		node_logf(NODE_LOG_WARN, "cluster map applied by group 0: %s", msg);
}

int node_group_open(node *n, uint32_t gid, node_group **out, char *errmsg)
{
	return node_group_open_ex(n, gid, true, out, errmsg);
}

int node_group_open_ex(node *n, uint32_t gid, bool boot, node_group **out, char *errmsg)
{
	char lmdb[SH_PATH_MAX + 16];
	int rc, rv;

	*out = NULL;
	node_group *g = sh_calloc(1, sizeof(*g));
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: out of memory", gid);
	g->node = n;
	g->id = gid;
	g->bootstrap = boot;
	atomic_init(&g->users, 0);
	g->seen_role = RAFT_UNAVAILABLE;
	atomic_init(&g->role, RAFT_UNAVAILABLE);
	if (pthread_mutex_init(&g->mu, NULL) != 0) {
		sh_free(g);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: pthread_mutex_init", gid);
	}
	if (pthread_mutex_init(&g->err_mu, NULL) != 0) {
		pthread_mutex_destroy(&g->mu);
		sh_free(g);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: pthread_mutex_init", gid);
	}
	if (pthread_mutex_init(&g->members_mu, NULL) != 0) {
		pthread_mutex_destroy(&g->err_mu);
		pthread_mutex_destroy(&g->mu);
		sh_free(g);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: pthread_mutex_init", gid);
	}
	if ((size_t)snprintf(g->dir, sizeof(g->dir), "%s/group-%u", n->dir, gid) >=
	    sizeof(g->dir)) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u: data directory path too long",
		             gid);
		goto err_after_alloc;
	}
	snprintf(lmdb, sizeof(lmdb), "%s/lmdb", g->dir);
	if ((rc = make_dir(g->dir, errmsg)) != SHOAL_OK ||
	    (rc = make_dir(lmdb, errmsg)) != SHOAL_OK)
		goto err_after_alloc;

	char fsm_msg[SH_ERRMSG_SIZE] = "";
	rc = node_fsm_open(lmdb, gid, n->id, &g->fsm, fsm_msg);
	if (rc != SHOAL_OK) {
		g->fsm = NULL;
		rc = sh_errf(errmsg, rc, "group %u: opening storage in %s: %s", gid, lmdb, fsm_msg);
		goto err_after_alloc;
	}
	node_fsm_set_cap(g->fsm, n->cap);
	node_stream_static st = node_stream_static_of(n->conf, gid);
	node_fsm_set_static(g->fsm, st.has, st.lo, st.hi);
	if (gid == 0)
		node_fsm_set_map_hook(g->fsm, map_applied, n);
	st_env_set_stream_retention(node_fsm_env(g->fsm),
	                            (int64_t)n->conf->stream_retention_s * 1000);
	st_env_set_ttl_change_interval(
	    node_fsm_env(g->fsm),
	    n->conf->ttl_change_interval_set ? (int64_t)n->conf->ttl_change_interval_ms : -1);
	atomic_store(&g->rebuilding, st_env_rebuilt(node_fsm_env(g->fsm)) != NULL);

	rc = node_transport_init(&g->transport, &n->loop, n->tls, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_alloc;
	g->transport_init = true;

	rv = raft_uv_init(&g->io, &n->loop, g->dir, &g->transport);
	if (rv != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "group %u: raft_uv_init(%s): %s", gid, g->dir,
		             g->io.errmsg);
		goto err_after_alloc;
	}
	g->io_init = true;
	raft_uv_set_connect_retry_delay(&g->io, NODE_CONNECT_RETRY_MS);
	uint32_t segment_mb =
	    n->conf->raft_segment_mb != 0 ? n->conf->raft_segment_mb : NODE_RAFT_SEGMENT_MB;
	raft_uv_set_segment_size(&g->io, (size_t)segment_mb << 20);
	/* raft 0.15's raft_uv_init implements async_work (version 2 of
	 * raft_io) but still says version 1, and raft_init then refuses our
	 * version-3 FSM ("async snapshot requires io->version > 1"); later
	 * releases set 2.  Say what the io really is. */
	if (g->io.version < 2 && g->io.async_work != NULL)
		g->io.version = 2;

	sh_map_node self = {0};
	snprintf(self.raft_host, sizeof(self.raft_host), "%s", n->self->raft_host);
	self.raft_port = n->self->raft_port;
	sh_map_raft_address(&self, gid, g->address);
	node_raftio_init(&g->raftio, &g->io, gid);
	rv = raft_init(&g->raft, &g->raftio.outer, node_fsm_raft(g->fsm), n->id, g->address);
	if (rv != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "group %u: raft_init(%s): %s", gid, g->address,
		             raft_error(g, rv));
		goto err_after_alloc;
	}
	/* From here on raft owns resources on the loop: failures leave the
	 * group in INIT for the caller to close. */
	g->raft.data = g;
	g->state = GROUP_INIT;
	*out = g;

	/* Leader balance by election bias: the group's preferred replica (the
	 * first voter of the map, which spreads over the nodes) times out
	 * first (raft randomises in [T, 2T]), so it usually wins elections
	 * and leaders spread over the nodes instead of piling up on whichever
	 * node started first; rebalance() hands back what it did not win. */
	g->preferred = sh_place_preferred(n->place, gid);
	raft_set_election_timeout(&g->raft, g->preferred == n->id
	                                        ? NODE_ELECTION_TIMEOUT_PREFERRED_MS
	                                        : NODE_ELECTION_TIMEOUT_MS);
	raft_set_heartbeat_timeout(&g->raft, NODE_HEARTBEAT_TIMEOUT_MS);
	set_snapshot_counts(g, 0, NODE_LOG_BUDGET);
	raft_set_pre_vote(&g->raft, true);

	/* Without bootstrap a new replica starts with an empty configuration:
	 * raft 0.15 then neither campaigns (tick.c: "we didn't receive one
	 * yet, just stay follower") nor grants a vote (election.c,
	 * electionVote: "local server is not voting") until its leader's
	 * entries or snapshot bring it a configuration naming it a voter. */
	if (g->bootstrap && (rc = bootstrap(g, errmsg)) != SHOAL_OK)
		return rc;
	node_fsm_attach(g->fsm, &g->raft);
	rv = raft_start(&g->raft);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_IO, "group %u: raft_start on %s: %s", gid,
		               g->address, raft_error(g, rv));
	g->state = GROUP_RUNNING;
	node_logf(NODE_LOG_INFO, "group %u: started, raft %s, dir %s", gid, g->address, g->dir);
	return SHOAL_OK;

err_after_alloc:
	group_destroy(g);
	return rc;
}

static void raft_closed_cb(struct raft *r)
{
	node_group *g = r->data;
	g->state = GROUP_CLOSED;
	g->closed_ns = node_now_ns();
	atomic_store(&g->role, RAFT_UNAVAILABLE);
	atomic_store(&g->leader, 0);
	node_logf(NODE_LOG_INFO, "group %u: raft closed", g->id);
	if (g->close_cb != NULL)
		g->close_cb(g);
}

void node_group_close(node_group *g, void (*cb)(node_group *g))
{
	char msg[SH_ERRMSG_SIZE];

	pthread_mutex_lock(&g->mu);
	g->closing = true;
	node_waiter *writes = g->wq_head, *reads = g->bq_head, *members = g->mq_head;
	g->wq_head = g->wq_tail = g->bq_head = g->bq_tail = NULL;
	g->mq_head = g->mq_tail = NULL;
	pthread_mutex_unlock(&g->mu);
	pthread_mutex_lock(&g->members_mu);
	g->members_n = 0;
	pthread_mutex_unlock(&g->members_mu);

	snprintf(msg, sizeof(msg), "node %u is shutting down (group %u)", g->node->id, g->id);
	fail_chain(g, writes, SHOAL_E_UNAVAILABLE, 0, msg);
	fail_chain(g, reads, SHOAL_E_UNAVAILABLE, 0, msg);
	fail_chain(g, members, SHOAL_E_UNAVAILABLE, 0, msg);
	/* A membership change in flight is answered by raft_close (its
	 * change callback, RAFT_LEADERSHIPLOST: member.c); a TRANSFER waiting
	 * for the new leader is answered here. */
	if (g->member_w != NULL && g->member_transfer_wait) {
		node_waiter *w = g->member_w;
		g->member_w = NULL;
		g->member_transfer_wait = false;
		node_group_finish(g, w, SHOAL_E_UNAVAILABLE, 0, msg, NULL, 0);
	}

	g->close_cb = cb;
	if (g->state == GROUP_INIT || g->state == GROUP_RUNNING) {
		g->state = GROUP_CLOSING;
		/* In-flight proposals and barriers fail from inside raft_close
		 * (RAFT_LEADERSHIPLOST): apply_cb and barrier_cb answer them. */
		raft_close(&g->raft, raft_closed_cb);
	}
}

void node_group_free(node_group *g)
{
	if (g == NULL)
		return;
	group_destroy(g);
}

/* ------------------------------------------------------------------------ */
/* Submitting work (any thread)                                              */
/* ------------------------------------------------------------------------ */

int node_group_submit(node_group *g, node_waiter *w, char *errmsg)
{
	w->done = false;
	w->code = SHOAL_OK;
	w->leader = 0;
	w->msg[0] = '\0';
	w->resp = NULL;
	w->resp_len = 0;
	w->next = NULL;

	pthread_mutex_lock(&g->mu);
	if (g->closing) {
		pthread_mutex_unlock(&g->mu);
		return sh_errf(errmsg, SHOAL_E_UNAVAILABLE, "node %u is shutting down (group %u)",
		               g->node->id, g->id);
	}
	bool wake = true;
	if (w->kind == NODE_WAIT_WRITE) {
		atomic_fetch_add(&g->pending, 1);
		if (g->wq_tail != NULL)
			g->wq_tail->next = w;
		else
			g->wq_head = w;
		g->wq_tail = w;
		/* Every slot is taken: the next apply_cb flushes the queue
		 * (it takes it under mu after this), so waking the loop now
		 * would only cost a thread hop for nothing. */
		wake = g->inflight < NODE_MAX_INFLIGHT;
	} else if (w->kind == NODE_WAIT_MEMBER) {
		if (g->mq_tail != NULL)
			g->mq_tail->next = w;
		else
			g->mq_head = w;
		g->mq_tail = w;
	} else {
		if (g->bq_tail != NULL)
			g->bq_tail->next = w;
		else
			g->bq_head = w;
		g->bq_tail = w;
	}
	pthread_mutex_unlock(&g->mu);
	if (wake)
		node_wake(g->node);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Group commit (loop)                                                       */
/* ------------------------------------------------------------------------ */

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	proposal *p = req->data;
	node_group *g = p->g;
	(void)result;

	node_fsm_unregister(g->fsm, &p->batch);
	pthread_mutex_lock(&g->mu);
	g->inflight--;
	pthread_mutex_unlock(&g->mu);
	if (status == 0) {
		node_waiter *w = p->head;
		for (uint32_t i = 0; i < p->n && w != NULL; i++) {
			node_waiter *next = w->next;
			uint8_t *resp = p->batch.results != NULL ? p->batch.results[i] : NULL;
			if (resp != NULL) {
				size_t len = p->batch.result_lens[i];
				p->batch.results[i] = NULL; /* now the waiter's */
				node_group_finish(g, w, SHOAL_OK, 0, NULL, resp, len);
			} else {
				char msg[SH_ERRMSG_SIZE];
				snprintf(msg, sizeof(msg),
				         "group %u: batch %" PRIu64 " committed but operation %u "
				         "has no result",
				         g->id, p->batch.id, i);
				node_logf(NODE_LOG_ERROR, "%s", msg);
				node_group_finish(g, w, SHOAL_E_INTERNAL, 0, msg, NULL, 0);
			}
			w = next;
		}
	} else {
		char msg[SH_ERRMSG_SIZE];
		if (g->state != GROUP_RUNNING)
			snprintf(msg, sizeof(msg),
			         "node %u is shutting down (group %u): the write's outcome is "
			         "unknown",
			         g->node->id, g->id);
		else
			snprintf(msg, sizeof(msg),
			         "group %u: leadership lost, the write's outcome is unknown (%s)",
			         g->id, raft_strerror(status));
		node_logf(g->state == GROUP_RUNNING ? NODE_LOG_INFO : NODE_LOG_DEBUG,
		          "%s: %u writes answered OUTCOME_UNKNOWN", msg, p->n);
		/* Proposed, then leadership was lost: the entry may still commit
		 * under the next leader.  Not retryable, unlike UNAVAILABLE. */
		fail_chain(g, p->head, SHOAL_E_OUTCOME_UNKNOWN, node_group_current_leader(g), msg);
	}
	node_batch_fini(&p->batch);
	sh_free(p);
	/* A slot is free: what accumulated meanwhile goes as one Command,
	 * proposed from node_group_publish at the end of this loop iteration
	 * (not from inside raft's apply loop). */
	g->flush_due = true;
	node_wake(g->node); /* in case this iteration's poll would block */
}

/* Proposes the chain head (n waiters) as one Command; answers them all if
 * it cannot. */
static void propose(node_group *g, node_waiter *head, uint32_t n)
{
	char errmsg[SH_ERRMSG_SIZE] = "";
	Shoal__CommandOp **ops = NULL;
	proposal *p = NULL;
	struct raft_buffer buf = {NULL, 0};
	int code;
	int rc;

	if (raft_state(&g->raft) != RAFT_LEADER) {
		uint32_t leader = node_group_current_leader(g);
		snprintf(errmsg, sizeof(errmsg), "node %u is not the leader of group %u",
		         g->node->id, g->id);
		fail_chain(g, head, SHOAL_E_NOT_LEADER, leader, errmsg);
		return;
	}

	p = sh_calloc(1, sizeof(*p));
	ops = sh_malloc(n * sizeof(*ops));
	if (p == NULL || ops == NULL) {
		code = sh_errf(errmsg, SHOAL_E_NOMEM, "group %u: out of memory proposing", g->id);
		goto err_after_alloc;
	}
	p->g = g;
	p->head = head;
	p->n = n;
	uint32_t i = 0;
	for (node_waiter *w = head; w != NULL; w = w->next)
		ops[i++] = &w->op;

	Shoal__Command cmd = SHOAL__COMMAND__INIT;
	cmd.proposer = g->node->id;
	cmd.batch_id = node_next_batch_id(g->node);
	/* Every replica stamps this into the index deltas it appends
	 * (propagation lag), so it is fixed here, once, by the proposer. */
	cmd.ts_ms = node_wall_ms();
	cmd.n_ops = n;
	cmd.ops = ops;
	if ((rc = node_batch_init(&p->batch, cmd.batch_id, n)) != SHOAL_OK) {
		code = sh_errf(errmsg, rc, "group %u: out of memory proposing", g->id);
		goto err_after_alloc;
	}
	if ((rc = node_fsm_encode(&cmd, &buf, errmsg)) != SHOAL_OK) {
		code = rc;
		goto err_after_batch;
	}
	sh_free(ops);
	ops = NULL;

	p->batch.user = p;
	p->req.data = p;
	node_fsm_register(g->fsm, &p->batch);
	int rv = raft_apply(&g->raft, &p->req, &buf, 1, apply_cb);
	if (rv != 0) {
		/* Never proposed: safe to retry anywhere. */
		node_fsm_unregister(g->fsm, &p->batch);
		raft_free(buf.base);
		code = rv == RAFT_NOTLEADER ? SHOAL_E_NOT_LEADER : SHOAL_E_UNAVAILABLE;
		snprintf(errmsg, sizeof(errmsg), "group %u: raft_apply: %s", g->id,
		         raft_strerror(rv));
		goto err_after_batch;
	}
	pthread_mutex_lock(&g->mu);
	g->inflight++;
	pthread_mutex_unlock(&g->mu);
	return;

err_after_batch:
	node_batch_fini(&p->batch);
err_after_alloc:
	sh_free(ops);
	sh_free(p);
	node_logf(NODE_LOG_WARN, "%s", errmsg);
	fail_chain(g, head, code, node_group_current_leader(g), errmsg);
}

/* Takes the next Command's worth of writes off the queue (mu held): at
 * most NODE_BATCH_MAX_OPS operations and about NODE_BATCH_MAX_BYTES (a
 * single larger operation goes alone).  NULL when the queue is empty. */
static node_waiter *take_batch(node_group *g, uint32_t *n_out)
{
	node_waiter *head = g->wq_head;
	if (head == NULL)
		return NULL;
	node_waiter *last = head, *w = head->next;
	uint32_t n = 1;
	size_t bytes = head->size;
	while (w != NULL && n < NODE_BATCH_MAX_OPS && bytes + w->size <= NODE_BATCH_MAX_BYTES) {
		bytes += w->size;
		n++;
		last = w;
		w = w->next;
	}
	last->next = NULL;
	g->wq_head = w;
	if (w == NULL)
		g->wq_tail = NULL;
	*n_out = n;
	return head;
}

static void barrier_cb(struct raft_barrier *req, int status)
{
	barrier *b = req->data;
	node_group *g = b->g;
	g->barriers--;
	if (status == 0) {
		fail_chain(g, b->head, SHOAL_OK, 0, NULL);
	} else {
		char msg[SH_ERRMSG_SIZE];
		int code = g->state == GROUP_RUNNING ? SHOAL_E_NOT_LEADER : SHOAL_E_UNAVAILABLE;
		snprintf(msg, sizeof(msg), "group %u: read barrier failed: %s", g->id,
		         raft_strerror(status));
		fail_chain(g, b->head, code, node_group_current_leader(g), msg);
	}
	sh_free(b);
}

static void issue_barrier(node_group *g, node_waiter *head)
{
	char msg[SH_ERRMSG_SIZE];
	if (raft_state(&g->raft) != RAFT_LEADER) {
		snprintf(msg, sizeof(msg), "node %u is not the leader of group %u", g->node->id,
		         g->id);
		fail_chain(g, head, SHOAL_E_NOT_LEADER, node_group_current_leader(g), msg);
		return;
	}
	barrier *b = sh_calloc(1, sizeof(*b));
	if (b == NULL) {
		snprintf(msg, sizeof(msg), "group %u: out of memory", g->id);
		fail_chain(g, head, SHOAL_E_NOMEM, 0, msg);
		return;
	}
	b->g = g;
	b->head = head;
	b->req.data = b;
	int rv = raft_barrier(&g->raft, &b->req, barrier_cb);
	if (rv == 0)
		g->barriers++;
	if (rv != 0) {
		snprintf(msg, sizeof(msg), "group %u: raft_barrier: %s", g->id, raft_strerror(rv));
		sh_free(b);
		fail_chain(g, head, rv == RAFT_NOTLEADER ? SHOAL_E_NOT_LEADER : SHOAL_E_UNAVAILABLE,
		           node_group_current_leader(g), msg);
	}
}

void node_group_flush(node_group *g)
{
	if (g->state != GROUP_RUNNING)
		return; /* closing: node_group_close drained the queues */
	pthread_mutex_lock(&g->mu);
	node_waiter *reads = g->bq_head, *members = g->mq_head;
	g->bq_head = g->bq_tail = NULL;
	g->mq_head = g->mq_tail = NULL;
	pthread_mutex_unlock(&g->mu);
	while (members != NULL) {
		node_waiter *next = members->next;
		members->next = NULL;
		node_member_start(g, members);
		members = next;
	}
	/* Group commit: at most NODE_MAX_INFLIGHT Commands in flight; writes
	 * arriving meanwhile wait in the queue and leave together when
	 * apply_cb frees a slot.  A refused proposal takes no slot, so a
	 * non-leader drains the whole queue with NOT_LEADER at once. */
	while (g->inflight < NODE_MAX_INFLIGHT && g->state == GROUP_RUNNING) {
		uint32_t n = 0;
		pthread_mutex_lock(&g->mu);
		node_waiter *head = take_batch(g, &n);
		pthread_mutex_unlock(&g->mu);
		if (head == NULL)
			break;
		propose(g, head, n);
	}
	if (reads != NULL)
		issue_barrier(g, reads);
}

/* ------------------------------------------------------------------------ */
/* Status (publish: loop; read: any thread)                                  */
/* ------------------------------------------------------------------------ */

static void transfer_cb(struct raft_transfer *req)
{
	node_group *g = req->data;
	g->transferring = false;
}

/* Whether replica `id` has every entry of the leader's log and was heard
 * from recently (leader only). */
static bool caught_up(node_group *g, uint32_t id)
{
	struct raft *r = &g->raft;
	for (unsigned i = 0; i < r->configuration.n; i++)
		if (r->configuration.servers[i].id == id) {
			const struct raft_progress *p = &r->leader_state.progress[i];
			return p->recent_recv && p->match_index >= raft_last_index(r);
		}
	return false;
}

/*
 * Preferred leaders.  Each group's first replica in placement order
 * (sh_place_preferred: the map's first voter not draining or being
 * replaced, common/placement.h) is its preferred leader, and placement spreads those
 * over the nodes, so that every node leads its share of the groups and the
 * write load (and the leader's nng and apply work) is spread too.  Its
 * shorter election timeout makes it win most elections, but not all: a node
 * that starts or restarts after its peers finds them already led.  So a
 * leader that is not the preferred replica hands leadership back to it
 * (raft_transfer, which raft 0.15 does by sending TimeoutNow once the target
 * has the whole log) after it has led for NODE_REBALANCE_AFTER_MS and only
 * while the preferred replica is caught up and heard from; a transfer that
 * did not make it leader waits 5 s before the next try, doubling up to a
 * minute while it keeps failing.  Writes proposed during the transfer are refused with NOT_LEADER
 * and the router retries them at the new leader.  Loop thread.
 */
static void rebalance(node_group *g, int role)
{
	uint64_t now = node_now_ns();
	if (role != RAFT_LEADER) {
		g->leading_since_ns = 0;
		return;
	}
	if (g->leading_since_ns == 0) {
		g->leading_since_ns = now;
		g->rebalance_wait_ms = NODE_REBALANCE_BACKOFF_MIN_MS;
	}
	uint32_t preferred = sh_place_preferred(g->node->place, g->id);
	if (preferred != 0)
		g->preferred = preferred; /* the map moves: so does the preferred replica */
	if (g->transferring || g->seen_failed || g->preferred == g->node->id ||
	    g->member_w != NULL || g->raft.transfer != NULL ||
	    now - g->leading_since_ns < (uint64_t)NODE_REBALANCE_AFTER_MS * 1000000 ||
	    now < g->next_rebalance_ns || !caught_up(g, g->preferred))
		return;
	g->transfer.data = g;
	if (raft_transfer(&g->raft, &g->transfer, g->preferred, transfer_cb) == 0) {
		g->transferring = true;
		g->next_rebalance_ns = now + (uint64_t)g->rebalance_wait_ms * 1000000;
		g->rebalance_wait_ms = g->rebalance_wait_ms * 2 > NODE_REBALANCE_BACKOFF_MAX_MS
		                           ? NODE_REBALANCE_BACKOFF_MAX_MS
		                           : g->rebalance_wait_ms * 2;
		node_logf(NODE_LOG_INFO, "group %u: handing leadership back to node %u", g->id,
		          g->preferred);
	}
}

static unsigned clamp_count(size_t budget, size_t entry, unsigned min, unsigned max)
{
	size_t n = budget / (entry > 0 ? entry : 1);
	return n < min ? min : n > max ? max : (unsigned)n;
}

/* Sets the snapshot counts for entries of `avg` bytes (0: unknown) and an
 * in-memory log of `budget` bytes, never above the cluster file's
 * snapshot_entries. */
static void set_snapshot_counts(node_group *g, size_t avg, size_t budget)
{
	uint32_t cap = g->node->conf->snapshot_entries;
	unsigned threshold = avg == 0 ? NODE_SNAPSHOT_THRESHOLD
	                              : clamp_count(budget, avg, NODE_SNAPSHOT_THRESHOLD_MIN,
	                                            NODE_SNAPSHOT_THRESHOLD);
	unsigned trailing = avg == 0
	                        ? NODE_SNAPSHOT_TRAILING
	                        : clamp_count(NODE_TRAILING_BUDGET, avg, NODE_SNAPSHOT_TRAILING_MIN,
	                                      NODE_SNAPSHOT_TRAILING);
	if (cap != 0 && threshold > cap)
		threshold = cap;
	if (trailing > threshold / 2)
		trailing = threshold / 2;
	raft_set_snapshot_threshold(&g->raft, threshold);
	raft_set_snapshot_trailing(&g->raft, trailing);
}

/* The in-memory log's budget of a group whose LMDB holds `data` bytes
 * (node.h, NODE_LOG_BUDGET): half its data, within the bounds. */
static size_t log_budget(uint64_t data)
{
	uint64_t half = data / 2;
	return half < NODE_LOG_BUDGET       ? NODE_LOG_BUDGET
	       : half > NODE_LOG_BUDGET_MAX ? NODE_LOG_BUDGET_MAX
	                                    : (size_t)half;
}

/* b within a quarter of a (a != 0). */
static bool near(size_t a, size_t b)
{
	return b * 4 > a * 3 && b * 4 < a * 5;
}

/*
 * The snapshot counts follow the entries' size and the group's data
 * (node.h, NODE_LOG_BUDGET): raft holds up to threshold + trailing entries
 * of the group in memory, so with batches of writes (kilobytes an entry)
 * the fixed counts of 65536 and 8192 let a node's resident memory grow by
 * hundreds of megabytes between snapshots; and a snapshot writes the whole
 * of the group's data, so a fixed budget makes a growing group's snapshots
 * cost the square of its size.  Reset when the average or the budget moved
 * by a quarter.  Loop thread.
 */
static void tune_snapshots(node_group *g)
{
	size_t avg = node_fsm_entry_bytes(g->fsm);
	if (avg == 0)
		return;
	size_t budget = log_budget(st_env_used(node_fsm_env(g->fsm)));
	if (g->tuned_for != 0 && near(g->tuned_for, avg) && near(g->tuned_budget, budget))
		return;
	g->tuned_for = avg;
	g->tuned_budget = budget;
	set_snapshot_counts(g, avg, budget);
}

static void log_role(node_group *g, int role, uint64_t term, uint32_t leader, bool prevote)
{
	bool changed = role != g->seen_role;
	switch (role) {
	case RAFT_LEADER:
		if (changed || term != g->seen_term)
			node_logf(NODE_LOG_INFO, "group %u: leader (term %" PRIu64 ")", g->id,
			          term);
		break;
	case RAFT_FOLLOWER:
		if (changed || leader != g->seen_leader) {
			if (leader != 0)
				node_logf(NODE_LOG_INFO,
				          "group %u: follower, leader node %u (term %" PRIu64 ")",
				          g->id, leader, term);
			else
				node_logf(NODE_LOG_INFO,
				          "group %u: follower, no leader known (term %" PRIu64 ")",
				          g->id, term);
		}
		break;
	case RAFT_CANDIDATE:
		/* With pre-vote the term moves only once a majority agreed. */
		if (prevote && (changed || !g->seen_prevote || term != g->seen_term))
			node_logf(NODE_LOG_INFO, "group %u: candidate, pre-vote for term %" PRIu64,
			          g->id, term + 1);
		else if (!prevote && (changed || g->seen_prevote || term != g->seen_term))
			node_logf(NODE_LOG_INFO, "group %u: candidate, election for term %" PRIu64,
			          g->id, term);
		break;
	default:
		break;
	}
	g->seen_role = role;
	g->seen_term = term;
	g->seen_leader = leader;
	g->seen_prevote = prevote;
}

/* The leader's configuration and each member's progress, for node_status
 * (node_group_members) on other threads.  Addresses are copied only when
 * the configuration changed.  Loop. */
static void publish_members(node_group *g, int role)
{
	struct raft *r = &g->raft;
	pthread_mutex_lock(&g->members_mu);
	if (role != RAFT_LEADER) {
		g->members_n = 0;
		pthread_mutex_unlock(&g->members_mu);
		return;
	}
	uint64_t cfg = r->configuration_uncommitted_index != 0 ? r->configuration_uncommitted_index
	                                                       : r->configuration_index;
	uint32_t n = r->configuration.n;
	if (n > sizeof(g->members) / sizeof(g->members[0]))
		n = sizeof(g->members) / sizeof(g->members[0]);
	bool fresh = g->members_n != n || g->members_cfg_index != cfg;
	for (uint32_t i = 0; i < n; i++) {
		const struct raft_server *sv = &r->configuration.servers[i];
		struct group_member *m = &g->members[i];
		if (fresh || m->id != sv->id) {
			m->id = (uint32_t)sv->id;
			snprintf(m->address, sizeof(m->address), "%s",
			         sv->address != NULL ? sv->address : "");
		}
		m->role = sv->role;
		m->match =
		    sv->id == r->id ? raft_last_index(r) : r->leader_state.progress[i].match_index;
	}
	g->members_n = n;
	g->members_cfg_index = cfg;
	g->members_last_index = raft_last_index(r);
	pthread_mutex_unlock(&g->members_mu);
}

void node_group_publish(node_group *g)
{
	if (g->state != GROUP_RUNNING)
		return;
	if (g->flush_due) {
		g->flush_due = false;
		node_group_flush(g);
	}
	struct raft *r = &g->raft;
	int role = raft_state(r);
	uint64_t term = r->current_term;
	uint32_t leader = node_group_current_leader(g);
	atomic_store_explicit(&g->role, role, memory_order_relaxed);
	atomic_store_explicit(&g->term, term, memory_order_relaxed);
	atomic_store_explicit(&g->commit, r->commit_index, memory_order_relaxed);
	atomic_store_explicit(&g->applied, raft_last_applied(r), memory_order_relaxed);
	atomic_store_explicit(&g->snapshot_index, r->log.snapshot.last_index, memory_order_relaxed);
	atomic_store_explicit(&g->snapshot_threshold, r->snapshot.threshold, memory_order_relaxed);
	atomic_store_explicit(&g->entry_bytes, node_fsm_entry_bytes(g->fsm), memory_order_relaxed);
	atomic_store_explicit(&g->leader, leader, memory_order_release);
	/* A new leader's barrier: its first entry of its term, whose commit
	 * commits the entries of earlier terms it holds (raftio.c, "The
	 * commit rules": until then none of those commits). */
	if (role == RAFT_LEADER && (g->seen_role != RAFT_LEADER || term != g->seen_term))
		issue_barrier(g, NULL);
	bool prevote = role == RAFT_CANDIDATE && r->candidate_state.in_pre_vote;
	if (role != g->seen_role || term != g->seen_term || leader != g->seen_leader ||
	    prevote != g->seen_prevote)
		log_role(g, role, term, leader, prevote);

	if (!g->seen_failed) {
		char msg[SH_ERRMSG_SIZE] = "";
		int code = node_fsm_failed(g->fsm, msg);
		if (code == SHOAL_OK)
			code = node_raftio_failed(&g->raftio, msg); /* raftio.c */
		if (code != SHOAL_OK) {
			g->seen_failed = true;
			atomic_store(&g->failed_code, code);
			pthread_mutex_lock(&g->err_mu);
			snprintf(g->error, sizeof(g->error), "%s", msg);
			pthread_mutex_unlock(&g->err_mu);
			atomic_store(&g->failed, true);
			node_logf(NODE_LOG_ERROR, "group %u: replica failed, it stops serving: %s",
			          g->id, msg);
		}
	}
	/* A failed replica cannot apply: let a healthy one lead. */
	if (g->seen_failed && role == RAFT_LEADER && !g->transferring) {
		g->transfer.data = g;
		int rv = raft_transfer(r, &g->transfer, 0, transfer_cb);
		if (rv == 0) {
			g->transferring = true;
			node_logf(NODE_LOG_WARN, "group %u: transferring leadership away", g->id);
		}
	}
	/* A rebuilt replica has caught up once it has heard from a leader (a
	 * follower knows one only after an AppendEntries of its term, which
	 * also brings the commit index) and applied everything it knows to be
	 * committed.  (A follower whose log is still shorter than the
	 * leader's may pass this a moment early: its commit index is capped
	 * at its last entry; it is then behind as any lagging follower is.) */
	if (atomic_load_explicit(&g->rebuilding, memory_order_relaxed) && leader != 0 &&
	    r->commit_index > 0 && raft_last_applied(r) >= r->commit_index) {
		atomic_store(&g->rebuilding, false);
		node_logf(NODE_LOG_INFO,
		          "group %u: storage rebuilt from Raft up to index %" PRIu64 ", serving",
		          g->id, (uint64_t)raft_last_applied(r));
	}
	rebalance(g, role);
	tune_snapshots(g);
	publish_members(g, role);
	node_member_publish(g);
}

int node_group_failure(node_group *g)
{
	return atomic_load(&g->failed_code);
}

bool node_group_rebuilding(node_group *g)
{
	return atomic_load_explicit(&g->rebuilding, memory_order_relaxed);
}

bool node_group_leading(node_group *g, uint64_t *term)
{
	if (g->state != GROUP_RUNNING || raft_state(&g->raft) != RAFT_LEADER)
		return false;
	*term = g->raft.current_term;
	return true;
}

uint64_t node_group_last_applied(node_group *g)
{
	return g->state == GROUP_RUNNING ? raft_last_applied(&g->raft) : 0;
}

void node_group_status_get(node_group *g, node_group_status *out)
{
	memset(out, 0, sizeof(*out));
	out->role = atomic_load_explicit(&g->role, memory_order_relaxed);
	out->term = atomic_load_explicit(&g->term, memory_order_relaxed);
	out->commit = atomic_load_explicit(&g->commit, memory_order_relaxed);
	out->applied = atomic_load_explicit(&g->applied, memory_order_relaxed);
	out->leader = atomic_load_explicit(&g->leader, memory_order_acquire);
	out->pending = atomic_load_explicit(&g->pending, memory_order_relaxed);
	out->snapshot_index = atomic_load_explicit(&g->snapshot_index, memory_order_relaxed);
	out->snapshot_threshold =
	    atomic_load_explicit(&g->snapshot_threshold, memory_order_relaxed);
	out->entry_bytes = atomic_load_explicit(&g->entry_bytes, memory_order_relaxed);
	out->failed = atomic_load(&g->failed);
	if (out->failed) {
		pthread_mutex_lock(&g->err_mu);
		snprintf(out->error, sizeof(out->error), "%s", g->error);
		pthread_mutex_unlock(&g->err_mu);
	}
}

int node_group_health(node_group *g, char *errmsg)
{
	if (atomic_load(&g->failed)) {
		pthread_mutex_lock(&g->err_mu);
		int rc = sh_errf(errmsg, SHOAL_E_UNAVAILABLE,
		                 "group %u on node %u is unavailable: the replica failed: %s",
		                 g->id, g->node->id, g->error);
		pthread_mutex_unlock(&g->err_mu);
		return rc;
	}
	if (atomic_load(&g->node->stopping))
		return sh_errf(errmsg, SHOAL_E_UNAVAILABLE, "node %u is shutting down",
		               g->node->id);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Holding a group (any thread)                                              */
/* ------------------------------------------------------------------------ */

node_group *node_group_acquire(node *n, uint32_t gid)
{
	node_group *g = node_group_get(n, gid);
	if (g != NULL)
		atomic_fetch_add_explicit(&g->users, 1, memory_order_acq_rel);
	return g;
}

void node_group_release(node_group *g)
{
	if (g != NULL)
		atomic_fetch_sub_explicit(&g->users, 1, memory_order_acq_rel);
}

uint32_t node_group_users(node_group *g)
{
	return atomic_load(&g->users);
}

bool node_group_closed(const node_group *g)
{
	return g->state == GROUP_CLOSED;
}

uint64_t node_group_closed_ns(const node_group *g)
{
	return g->closed_ns;
}

static const char *member_role_name(int role)
{
	switch (role) {
	case RAFT_VOTER:
		return "voter";
	case RAFT_STANDBY:
		return "standby";
	default:
		return "spare";
	}
}

int node_group_members(node_group *g, sh_arena *a, Shoal__GroupStatus *gs)
{
	pthread_mutex_lock(&g->members_mu);
	uint32_t n = g->members_n;
	int rc = SHOAL_OK;
	if (n > 0) {
		gs->members = sh_arena_calloc(a, n, sizeof(*gs->members));
		Shoal__RaftMember *m = sh_arena_calloc(a, n, sizeof(*m));
		if (gs->members == NULL || m == NULL) {
			rc = SHOAL_E_NOMEM;
			n = 0;
		}
		for (uint32_t i = 0; i < n; i++) {
			shoal__raft_member__init(&m[i]);
			m[i].node = g->members[i].id;
			m[i].role = (char *)member_role_name(g->members[i].role);
			m[i].match_index = g->members[i].match;
			m[i].address = sh_arena_strndup(a, g->members[i].address,
			                                strlen(g->members[i].address));
			if (m[i].address == NULL) {
				rc = SHOAL_E_NOMEM;
				break;
			}
			gs->members[i] = &m[i];
		}
		gs->n_members = rc == SHOAL_OK ? n : 0;
		gs->last_index = g->members_last_index;
	}
	pthread_mutex_unlock(&g->members_mu);
	return rc;
}
