/*
 * node.c -- the shoal-node process: its libuv loop, its groups, its server.
 *
 * node_open creates the data directory, opens every group the cluster file
 * places on this node (group.c), then starts the request server and the
 * metrics endpoint; node_run runs the loop; node_stop (or SIGTERM/SIGINT)
 * begins a graceful stop; node_close releases what is left.  The lifecycle
 * table is in node.h (enum node_state).  node_restart is node_stop with a
 * note (restart_requested) for the program, which then starts itself again
 * in place (main.c): how the replica scrub rebuilds a divergent replica.
 *
 * Three loop handles tie the threads together:
 *   wake    uv_async: workers queued requests (flush every group), or a stop
 *           was requested.  Its closing is guarded by wake_mu so that
 *           node_wake/node_stop from other threads never touch a closed
 *           handle.
 *   check   runs after every loop iteration: publishes each group's raft
 *           status for other threads and logs role changes.
 *   signals SIGTERM and SIGINT, when asked for.
 *
 * Order of a graceful stop (shutdown_begin, loop):
 *   1. stopping = true: the front door answers new requests UNAVAILABLE;
 *   2. every group closes: queued requests are answered UNAVAILABLE, raft
 *      closes and fails in-flight proposals (answered UNAVAILABLE: outcome
 *      unknown) and barriers;
 *   3. when the last raft has closed the handles close and uv_run returns;
 *   4. node_close stops the server (its workers have nothing left to wait
 *      for), the metrics, then closes storage (no reader is left).
 *
 * Threads: node_stop, node_wake, node_group_get, node_now_ns from any
 * thread; the rest on the thread that runs the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "node/node.h"

uint64_t node_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t node_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

node_group *node_group_get(node *n, uint32_t gid)
{
	if (gid >= n->group_cap)
		return NULL;
	return __atomic_load_n(&n->groups[gid], __ATOMIC_ACQUIRE);
}

uint64_t node_next_batch_id(node *n)
{
	return n->next_batch_id++;
}

/* node_wake_hold / _release: wakes asked for on this thread while held. */
static __thread int wake_held;
static __thread node *wake_owed;

void node_wake_hold(void)
{
	wake_held++;
}

void node_wake_release(void)
{
	if (--wake_held > 0 || wake_owed == NULL)
		return;
	node *n = wake_owed;
	wake_owed = NULL;
	node_wake(n);
}

void node_wake(node *n)
{
	if (wake_held > 0 && (wake_owed == NULL || wake_owed == n)) {
		wake_owed = n;
		return;
	}
	atomic_fetch_add_explicit(&n->stats.loop_wakes, 1, memory_order_relaxed);
	pthread_mutex_lock(&n->wake_mu);
	if (n->wake_open)
		uv_async_send(&n->wake);
	pthread_mutex_unlock(&n->wake_mu);
}

void node_stop(node *n)
{
	atomic_store(&n->stop_requested, true);
	node_wake(n);
}

void node_restart(node *n)
{
	atomic_store(&n->restart_requested, true);
	node_stop(n);
}

bool node_restart_requested(node *n)
{
	return atomic_load(&n->restart_requested);
}

/* mkdir -p */
static int make_dirs(const char *path, char *errmsg)
{
	char tmp[SH_PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "data directory path too long");
	for (char *p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return sh_errf(errmsg, SHOAL_E_IO, "mkdir %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	/* The data directory itself is the node's alone (0700, tightened if
	 * it was made looser); its parents are whatever the system has. */
	if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
		return sh_errf(errmsg, SHOAL_E_IO, "mkdir %s: %s", tmp, strerror(errno));
	struct stat st;
	if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
		return sh_errf(errmsg, SHOAL_E_IO, "%s is not a directory", tmp);
	if ((st.st_mode & 077) != 0 && chmod(tmp, st.st_mode & 0700) != 0)
		return sh_errf(errmsg, SHOAL_E_IO, "chmod 0700 %s: %s", tmp, strerror(errno));
	return SHOAL_OK;
}

/*
 * Takes <dir>/shoal-node.lock (flock, released by the kernel even on kill -9)
 * so that two processes never share a data directory: raft_uv takes no lock
 * of its own, and a second process loading the log would finalise the open
 * segments the first one is writing.
 */
static int lock_dir(node *n, char *errmsg)
{
	char path[SH_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/shoal-node.lock", n->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return sh_errf(errmsg, SHOAL_E_IO, "open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		char pid[32] = "";
		ssize_t r = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[r > 0 ? r : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		if (e == EWOULDBLOCK)
			return sh_errf(errmsg, SHOAL_E_IO,
			               "data directory %s is in use by another shoal-node (pid %s)",
			               n->dir, pid[0] != '\0' ? pid : "?");
		return sh_errf(errmsg, SHOAL_E_IO, "flock %s: %s", path, strerror(e));
	}
	char line[32];
	int len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len)
		node_logf(NODE_LOG_WARN, "node %u: writing %s: %s", n->id, path, strerror(errno));
	n->lock_fd = fd;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Loop callbacks                                                            */
/* ------------------------------------------------------------------------ */

static void close_handles(node *n)
{
	pthread_mutex_lock(&n->wake_mu);
	n->wake_open = false;
	pthread_mutex_unlock(&n->wake_mu);
	uv_close((uv_handle_t *)&n->wake, NULL);
	uv_check_stop(&n->check);
	uv_close((uv_handle_t *)&n->check, NULL);
	n->state = NODE_STOPPED;
	node_logf(NODE_LOG_INFO, "node %u: every group closed", n->id);
}

static void group_closed_cb(node_group *g)
{
	node *n = node_group_owner(g);
	if (--n->n_open == 0 && n->state == NODE_STOPPING)
		close_handles(n);
}

/* ------------------------------------------------------------------------ */
/* Groups follow the map                                                     */
/* ------------------------------------------------------------------------ */

/*
 * node_reconcile (loop) makes the open groups what the map says: every
 * group the map lists this node in (voter or not) is opened -- before the
 * group's leader adds it to the Raft configuration, so that raft_add finds
 * it listening -- and every open group the map no longer lists it in is
 * closed, then deleted: the executor (elastic.c) removes a replica from
 * the Raft configuration before it drops it from the map, so nothing the
 * group needs is lost with it.
 *
 * Lifetime (why not a plain free): server workers read n->groups[g]
 * without a lock.  A group leaving is unpublished first (atomic store of
 * NULL: new requests find it absent), then closes; its struct waits in the
 * graveyard (struct node_grave) until it has been closed for
 * NODE_GROUP_GRACE_MS and no request holds it (node_group_acquire's
 * count): the count covers requests that wait on the loop or run long
 * (scans), the grace the nanoseconds between a worker's load of the
 * pointer and its increment, and the loop-side users (shipper, scrub, TTL,
 * recovery), which look the group up again on every tick.  Only then are
 * its storage closed (LMDB, which writes its clean-close marker into the
 * directory) and its directory deleted.  A group the map gives back to
 * this node meanwhile is reopened only after that, with a new struct.
 * Chosen over a reference count held by every user (the loop-side ones
 * keep pointers across ticks) for its single atomic add per request.
 */
struct node_grave {
	node_group *g;
	uint32_t gid;
	bool remove_dir; /* the map dropped it: delete its directory once freed */
	struct node_grave *next;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	if (remove(path) != 0)
		node_logf(NODE_LOG_WARN, "removing %s: %s", path, strerror(errno));
	return 0;
}

void node_remove_group_dir(node *n, uint32_t gid)
{
	char path[SH_PATH_MAX + 32];
	struct stat st;
	snprintf(path, sizeof(path), "%s/group-%u", n->dir, gid);
	if (stat(path, &st) != 0)
		return;
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	node_logf(NODE_LOG_INFO,
	          "group %u: directory %s deleted (the map no longer places the "
	          "group here)",
	          gid, path);
}

static bool grave_pending(node *n, uint32_t gid)
{
	for (struct node_grave *x = n->graves; x != NULL; x = x->next)
		if (x->gid == gid)
			return true;
	return false;
}

/* Unpublishes group gid and begins closing it. */
static void retire(node *n, uint32_t gid, bool remove_dir)
{
	node_group *g = n->groups[gid];
	struct node_grave *x = sh_calloc(1, sizeof(*x));
	if (x == NULL)
		return; /* tried again at the next reconcile */
	__atomic_store_n(&n->groups[gid], NULL, __ATOMIC_RELEASE);
	n->n_hosted--;
	x->g = g;
	x->gid = gid;
	x->remove_dir = remove_dir;
	x->next = n->graves;
	n->graves = x;
	node_logf(NODE_LOG_INFO, "group %u: %s", gid,
	          remove_dir ? "the cluster map no longer places it here: closing"
	                     : "closing after a failed open");
	node_group_close(g, group_closed_cb);
}

/* Frees graveyard groups past their grace (all of them with force: the
 * loop has ended). */
static void reap(node *n, bool force)
{
	uint64_t now = node_now_ns();
	for (struct node_grave **pp = &n->graves; *pp != NULL;) {
		struct node_grave *x = *pp;
		bool ripe =
		    node_group_closed(x->g) && node_group_users(x->g) == 0 &&
		    now - node_group_closed_ns(x->g) >= (uint64_t)NODE_GROUP_GRACE_MS * 1000000u;
		if (!force && !ripe) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		node_group_free(x->g);
		if (x->remove_dir)
			node_remove_group_dir(n, x->gid);
		sh_free(x);
	}
}

static bool group_dir_exists(node *n, uint32_t gid)
{
	char path[SH_PATH_MAX + 32];
	struct stat st;
	snprintf(path, sizeof(path), "%s/group-%u", n->dir, gid);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Whether group gid, which the map places here, must not be opened: the map
 * says this node is a VOTER of it, yet the node has no directory for it and
 * this is not the cluster's birth -- its disk was replaced or wiped.  Opened
 * empty it would be a voter with no memory (it may vote twice in a term it
 * forgot, and count towards commits it never stored).  It stays closed and
 * node_status reports it "lost": group 0's executor (elastic.c) then removes
 * the replica from Raft and the map, and the planner re-creates it here or
 * elsewhere as a new non-voter, caught up before it votes.  A non-voter of
 * the map (a replica being added) opens empty: that is how it starts.  So
 * does a founder of a group being founded (it bootstraps: boots), unless
 * this process started from an empty data directory and learnt the group
 * as founding already (n->unfounded): it may have founded the group, and
 * voted in it, before it lost its data.  (Group 0's executor removes such a
 * replica once the other founders have elected a leader.)
 */
static bool lost_replica(node *n, uint32_t gid)
{
	bool lost = !n->birth && sh_place_is_voter(n->place, n->id, gid) &&
	            (!sh_place_is_founder(n->place, n->id, gid) || n->unfounded[gid]) &&
	            !group_dir_exists(n, gid);
	if (lost && !atomic_load(&n->lost[gid]))
		node_logf(NODE_LOG_WARN,
		          "group %u: the cluster map has this node as a voter but it has no data "
		          "for the group (an empty or replaced directory): not opened, reported "
		          "lost so that the replica is re-created",
		          gid);
	atomic_store(&n->lost[gid], lost);
	return lost;
}

bool node_group_lost(node *n, uint32_t gid)
{
	return gid < n->group_cap && n->lost != NULL && atomic_load(&n->lost[gid]);
}

/*
 * Whether group gid starts with raft_bootstrap: at the cluster's birth
 * (every group of the birth map), and for a group created since
 * (sh_map_create_group) on its founders while the map still says it is
 * being founded and this node has no data for it -- its founders all
 * bootstrap the map's voters, the one configuration the map allows while
 * it is founding.  raft_bootstrap refuses a group that has data, so a
 * founder restarting meanwhile keeps its log.  A founder that lost its
 * directory before the executor marked the group founded comes back from an
 * empty data directory, learns the map from the others with the group still
 * founding, and does not bootstrap it (n->unfounded: lost_replica).
 */
static bool boots(node *n, uint32_t gid)
{
	if (n->birth && !n->join)
		return true;
	return sh_place_is_founder(n->place, n->id, gid) && !group_dir_exists(n, gid) &&
	       !n->unfounded[gid];
}

static void open_group(node *n, uint32_t gid)
{
	char msg[SH_ERRMSG_SIZE] = "";
	node_group *grp = NULL;
	bool boot = boots(n, gid);
	int rc = node_group_open_ex(n, gid, boot, &grp, msg);
	if (grp == NULL) {
		node_logf(NODE_LOG_ERROR, "group %u: %s", gid, msg);
		return;
	}
	n->n_open++;
	n->n_hosted++;
	__atomic_store_n(&n->groups[gid], grp, __ATOMIC_RELEASE);
	if (rc != SHOAL_OK) {
		node_logf(NODE_LOG_ERROR, "group %u: %s", gid, msg);
		retire(n, gid, false);
		return;
	}
	if (!boot)
		node_logf(NODE_LOG_INFO, "group %u: opened without bootstrap (%s)", gid,
		          n->join ? "--join" : "the cluster exists");
	else if (!n->birth)
		node_logf(NODE_LOG_INFO, "group %u: a new group founded here (bootstrapped)", gid);
}

void node_reconcile(node *n)
{
	if (n->state == NODE_RUNNING && n->map_trusted) {
		for (uint32_t g = 0; g < n->group_cap; g++) {
			bool want = sh_place_hosts(n->place, n->id, g);
			node_group *cur = n->groups[g];
			if (!want)
				atomic_store(&n->lost[g], false);
			if (want && cur == NULL && !grave_pending(n, g) && !lost_replica(n, g))
				open_group(n, g);
			else if (!want && cur != NULL)
				retire(n, g, true);
		}
		/* A group this node's cluster file does not allow (its
		 * max_groups is below the one group 0's leader used): said once
		 * per map, it cannot be opened here. */
		uint32_t top = sh_place_max_group(n->place);
		uint64_t epoch = sh_place_epoch(n->place);
		for (uint32_t g = n->group_cap; g <= top && epoch != n->cap_warned; g++)
			if (sh_place_hosts(n->place, n->id, g))
				node_logf(
				    NODE_LOG_ERROR,
				    "group %u: the cluster map places it here, but this node's "
				    "cluster file allows group ids below %u only ([cluster] "
				    "max_groups): not opened; give every process the same file "
				    "and restart this node",
				    g, n->group_cap);
		n->cap_warned = epoch;
		/* Groups opened at the birth bootstrapped; none after. */
		n->birth = false;
	}
	reap(n, false);
}

static void shutdown_begin(node *n)
{
	if (n->state != NODE_RUNNING)
		return;
	n->state = NODE_STOPPING;
	atomic_store(&n->stopping, true);
	node_logf(NODE_LOG_INFO, "node %u: stopping", n->id);
	if (n->stopping_cb != NULL)
		n->stopping_cb(n->stopping_arg);
	node_scrub_close(n->scrub); /* before the groups: it proposes through them */
	node_ttl_close(n->ttl);     /* the same */
	if (n->ship != NULL)
		node_ship_close(n->ship); /* before the groups: it proposes through them */
	node_map_close(n);                /* the refresher's timer */
	if (n->signals) {
		uv_close((uv_handle_t *)&n->sigterm, NULL);
		uv_close((uv_handle_t *)&n->sigint, NULL);
		n->signals = false;
	}
	if (n->n_open == 0) {
		close_handles(n);
		return;
	}
	for (uint32_t g = 0; g < n->group_cap; g++)
		if (n->groups[g] != NULL)
			node_group_close(n->groups[g], group_closed_cb);
}

static void wake_cb(uv_async_t *handle)
{
	node *n = handle->data;
	if (atomic_load(&n->stop_requested)) {
		shutdown_begin(n);
		return;
	}
	for (uint32_t g = 0; g < n->group_cap; g++)
		if (n->groups[g] != NULL)
			node_group_flush(n->groups[g]);
}

static void check_cb(uv_check_t *handle)
{
	node *n = handle->data;
	for (uint32_t g = 0; g < n->group_cap; g++)
		if (n->groups[g] != NULL)
			node_group_publish(n->groups[g]);
	/* After the publish: this iteration's applies are in LMDB, so the
	 * deltas they appended ship now, not a timer tick later. */
	if (n->ship != NULL && n->state == NODE_RUNNING)
		node_ship_tick(n->ship);
	if (n->state == NODE_RUNNING) {
		node_map_tick(n);
		node_cap_tick(n->cap);
		node_disk_tick(n);
		node_scrub_tick(n->scrub);
		node_ttl_tick(n->ttl);
	}
}

static void signal_cb(uv_signal_t *handle, int signum)
{
	node *n = handle->data;
	node_logf(NODE_LOG_INFO, "node %u: %s received", n->id, strsignal(signum));
	atomic_store(&n->stop_requested, true);
	shutdown_begin(n);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t first_batch_id(void)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 48);
	}
	r >>= 1; /* room to count up for ever */
	return r == 0 ? 1 : r;
}

static void tls_warn(const char *msg)
{
	node_logf(NODE_LOG_WARN, "%s", msg);
}

/* The cluster's TLS, if its file has [tls]; a loud warning if not. */
static int open_tls(node *n, char *errmsg)
{
	if (n->conf->tls_dir[0] == '\0') {
		node_logf(
		    NODE_LOG_WARN,
		    "node %u: no [tls] in the cluster file: Raft and RPC traffic is plain and "
		    "unauthenticated; anyone who can reach ports %s and %s:%u.. can read it and "
		    "send internal operations (deploy/certs.sh makes certificates)",
		    n->id, n->self->rpc, n->self->raft_host, n->self->raft_port);
		return SHOAL_OK;
	}
	char name[32];
	snprintf(name, sizeof(name), "node-%u", n->id);
	/* Shoal's engine under nng: the RPC port must tell a node from a
	 * router (server.c refuses node-only operations from routers). */
	int rc = sh_tls_engine_register(tls_warn, errmsg);
	if (rc == SHOAL_OK)
		rc = sh_tls_load(&n->tls_store, n->conf->tls_dir, name, tls_warn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (!n->tls_store.peers_checked) {
		sh_tls_free(&n->tls_store);
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "TLS: nng's engine is not Shoal's: the RPC port could not tell a "
		               "node from a router");
	}
	n->tls = &n->tls_store;
	node_logf(NODE_LOG_INFO, "node %u: mutual TLS with the cluster CA of %s on RPC and Raft",
	          n->id, n->conf->tls_dir);
	return SHOAL_OK;
}

int node_open(const node_options *opts, node **out, char *errmsg)
{
	int rc;
	*out = NULL;
	/* libuv writes raft traffic with write(2): a peer that died must cost
	 * an EPIPE, not the process (nng uses MSG_NOSIGNAL itself). */
	signal(SIGPIPE, SIG_IGN);
	node *n = sh_calloc(1, sizeof(*n));
	if (n == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	n->conf = opts->conf;
	n->id = opts->id;
	n->self = sh_cluster_node(n->conf, n->id);
	if (n->self == NULL) {
		sh_free(n);
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u is not in the cluster file",
		               opts->id);
	}
	if (opts->dir == NULL || opts->dir[0] == '\0') {
		sh_free(n);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "no data directory for node %u (--dir, or dir = in [node.%u])",
		               opts->id, opts->id);
	}
	snprintf(n->dir, sizeof(n->dir), "%s", opts->dir);
	n->lock_fd = -1;
	n->outbox_limit = opts->outbox_limit != 0 ? opts->outbox_limit : NODE_DEFAULT_OUTBOX_LIMIT;
	n->stopping_cb = opts->stopping;
	n->stopping_arg = opts->stopping_arg;
	if ((rc = make_dirs(n->dir, errmsg)) != SHOAL_OK || (rc = lock_dir(n, errmsg)) != SHOAL_OK)
		goto err_after_alloc;
	n->group_cap = sh_cluster_group_cap(n->conf);
	n->groups = sh_calloc(n->group_cap, sizeof(*n->groups));
	n->lost = sh_calloc(n->group_cap, sizeof(*n->lost));
	n->unfounded = sh_calloc(n->group_cap, sizeof(*n->unfounded));
	if (n->groups == NULL || n->lost == NULL || n->unfounded == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_alloc;
	}
	int rv = uv_loop_init(&n->loop);
	if (rv != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "uv_loop_init: %s", uv_strerror(rv));
		goto err_after_alloc;
	}
	pthread_mutex_init(&n->wake_mu, NULL);
	n->next_batch_id = first_batch_id();
	uv_async_init(&n->loop, &n->wake, wake_cb);
	n->wake.data = n;
	n->wake_open = true;
	uv_check_init(&n->loop, &n->check);
	n->check.data = n;
	uv_check_start(&n->check, check_cb);
	n->state = NODE_RUNNING;

	node_logf(NODE_LOG_INFO, "node %u: starting, dir %s, %u groups at the birth (ids below %u)",
	          n->id, n->dir, n->conf->groups, n->group_cap);
	if ((rc = open_tls(n, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = node_cap_open(n, &n->cap, errmsg)) != SHOAL_OK)
		goto err;
	/* The map this node follows (mapsync.c); with it known, the groups it
	 * places here open now, else once it has been learnt (node_reconcile
	 * from node_map_tick). */
	if ((rc = node_map_open(n, opts, errmsg)) != SHOAL_OK)
		goto err;
	for (uint32_t g = 0; n->map_trusted && g < n->group_cap; g++) {
		if (!sh_place_hosts(n->place, n->id, g) || lost_replica(n, g))
			continue;
		node_group *grp = NULL;
		rc = node_group_open_ex(n, g, boots(n, g), &grp, errmsg);
		if (grp != NULL) {
			n->groups[g] = grp;
			n->n_hosted++;
			n->n_open++;
		}
		if (rc != SHOAL_OK)
			goto err;
	}
	if (n->map_trusted)
		n->birth = false;
	if (opts->signals) {
		uv_signal_init(&n->loop, &n->sigterm);
		uv_signal_init(&n->loop, &n->sigint);
		n->sigterm.data = n->sigint.data = n;
		uv_signal_start(&n->sigterm, signal_cb, SIGTERM);
		uv_signal_start(&n->sigint, signal_cb, SIGINT);
		n->signals = true;
	}
	if (!opts->no_ship && (rc = node_ship_open(n, &n->ship, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = node_scrub_open(n, &n->scrub, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = node_ttl_open(n, &n->ttl, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = node_server_start(n, n->self->rpc, opts->workers, &n->server, errmsg)) !=
	    SHOAL_OK)
		goto err;
	if (!opts->no_metrics && n->self->metrics[0] != '\0' &&
	    (rc = node_metrics_start(n, n->self->metrics, &n->metrics, errmsg)) != SHOAL_OK)
		goto err;
	if ((rc = node_map_start(n, errmsg)) != SHOAL_OK)
		goto err;
	node_logf(NODE_LOG_INFO, "node %u: hosting %u groups, serving %s", n->id, n->n_hosted,
	          n->self->rpc);
	*out = n;
	return SHOAL_OK;

err:
	node_logf(NODE_LOG_ERROR, "node %u: %s", n->id, errmsg != NULL ? errmsg : "start failed");
	node_close(n);
	return rc;

err_after_alloc:
	if (n->lock_fd >= 0)
		close(n->lock_fd);
	sh_free(n->groups);
	sh_free(n->lost);
	sh_free(n->unfounded);
	sh_free(n);
	return rc;
}

int node_run(node *n)
{
	uv_run(&n->loop, UV_RUN_DEFAULT);
	return SHOAL_OK;
}

void node_close(node *n)
{
	if (n == NULL)
		return;
	if (n->state != NODE_STOPPED) {
		/* Not stopped yet (a failed start, or node_close without
		 * node_run): stop the groups first. */
		shutdown_begin(n);
		uv_run(&n->loop, UV_RUN_DEFAULT);
	}
	node_server_stop(n->server);
	n->server = NULL;
	node_metrics_stop(n->metrics);
	n->metrics = NULL;
	/* Its pending trim/backfill proposals were answered when the groups
	 * closed; its nng exchanges end here. */
	node_ship_free(n->ship);
	n->ship = NULL;
	/* After the lanes: no answer of a scrub question is left. */
	node_scrub_free(n->scrub);
	n->scrub = NULL;
	node_ttl_free(n->ttl); /* the groups answered its deletes when they closed */
	n->ttl = NULL;
	/* After the lanes: no map_get answer is left to arrive. */
	node_map_free(n);
	node_cap_free(n->cap);
	n->cap = NULL;
	for (uint32_t g = 0; g < n->group_cap; g++) {
		node_group_free(n->groups[g]);
		n->groups[g] = NULL;
	}
	reap(n, true); /* the server stopped: nobody holds them */
	/* After the groups: their transports' pumps hold no reference to the
	 * configurations (nng holds its own on every stream). */
	if (n->tls != NULL)
		sh_tls_free(n->tls);
	n->tls = NULL;
	/* Handles raft may still be closing (none expected) get a last run. */
	uv_run(&n->loop, UV_RUN_NOWAIT);
	int rv = uv_loop_close(&n->loop);
	if (rv != 0)
		node_logf(NODE_LOG_WARN, "node %u: uv_loop_close: %s", n->id, uv_strerror(rv));
	pthread_mutex_destroy(&n->wake_mu);
	if (n->lock_fd >= 0)
		close(n->lock_fd); /* releases the directory lock */
	node_logf(NODE_LOG_INFO, "node %u: stopped", n->id);
	sh_free(n->groups);
	sh_free(n->lost);
	sh_free(n->unfounded);
	sh_free(n);
}
