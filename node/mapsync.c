/*
 * mapsync.c -- the node follows the cluster map (issue 14; what the map
 * means is common/placement.h, where group 0 keeps it storage/clustermap.c).
 *
 * The node's map is n->place.  It starts as:
 *
 *   <dir>/cluster.map present      that map: the last one this node saw
 *                                  (written atomically -- temporary file,
 *                                  fsync, rename, fsync of the directory --
 *                                  whenever a newer one is installed)
 *   group directories, no map      the cluster file's birth map (a data
 *                                  directory of a cluster older than the map)
 *   empty directory                nothing: the map is learnt (below) before
 *                                  any group opens (map_trusted false)
 *
 * Bootstrap (safety).  raft_bootstrap writes a group's first configuration
 * into an empty Raft log.  Done anywhere but at the cluster's birth it makes
 * a voter with no memory (a node whose disk was replaced would vote again in
 * terms it already voted in, and count towards commits it never stored:
 * amnesia).  So a node bootstraps only when it has no cluster.map, no group
 * directory, was not started with --join, and none of the cluster file's
 * other nodes says it has run a cluster (map_get's map_born): it asks them
 * all (every MAPSYNC_TICK_MS until decided) and decides
 *
 *   any answer born                  not a birth: take the answer's map,
 *                                    open its groups without bootstrap
 *   a majority of the file's nodes   the birth: bootstrap the birth map's
 *   (itself included) not born       groups
 *   --join                           never a birth: the first answer with a
 *                                    map gives the map
 *
 * At a fresh `cluster.sh up` every node starts within a second or two and
 * answers not-born, so each finds its majority quickly.  map_born is true
 * when the node had a map or group directories at start, or once one of its
 * groups applied more than the bootstrap entry (a leader was elected and
 * committed: the cluster has run).  So a sibling that just bootstrapped
 * still says not born to one asking a moment later -- both then bootstrap
 * the same birth configuration, which is the birth -- while a node whose
 * directory was emptied in a running cluster is told born even if every
 * other node started fresh in the same process lifetime.  A node of the
 * birth that starts only after its siblings elected leaders is treated
 * like a replaced disk: it reports its groups lost (node.c) and the
 * executor re-creates its replicas.
 *
 * The refresher (MAPSYNC_TICK_MS, loop): a node hosting group 0 reads the
 * map its own replica has applied (node_map_load) and offers it; any other
 * node asks a voter of group 0 (map_get with the epoch it holds, through
 * the shipper's node-to-node lanes; the next voter after a failure) and
 * offers the answer -- a map only when the voter's is newer.  Offers
 * install only a higher epoch.  node_map_tick (after every loop iteration)
 * persists a newly installed map and reconciles the groups (node.c).
 *
 * Threads: answers arrive on nng callback threads, which record them under
 * sync->mu, offer maps (sh_place is thread-safe) and wake the loop;
 * decisions and reconciling happen on the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "node/ship_int.h"
#include "proto/wire.h"

#define MAPSYNC_TICK_MS   500
#define MAPSYNC_ANSWER_MS 1000
#define MAP_FILE          "cluster.map"

/* What a file node said to map_get during the birth check. */
enum { ANS_NONE, ANS_NOT_BORN, ANS_BORN };

struct node_mapsync {
	node *n;
	pthread_mutex_t mu;
	uint32_t inflight;            /* map_get exchanges on the wire (mu) */
	uint8_t answer[SH_MAX_NODES]; /* by position in conf->nodes (mu) */
	uint8_t *best;                /* the newest map an answer carried (mu) */
	size_t best_len;
	uint64_t best_epoch;
	uint32_t next_voter;        /* the refresher's rotation (loop) */
	bool timer_fired;           /* loop */
	uint64_t last_reconcile_ns; /* loop */
	bool logged_wait;
	_Atomic uint64_t hurry_until_ns; /* node_map_hurry (any thread) */
	uint64_t hurried_ns;             /* the last hurried refresh (loop) */
};

typedef struct map_msg {
	wire_lane_item item;
	struct node_mapsync *s;
	uint32_t node;
	int pos; /* conf position for the birth check, -1 for a refresh */
	uint8_t *buf;
} map_msg;

/* ------------------------------------------------------------------------ */
/* The map file                                                              */
/* ------------------------------------------------------------------------ */

static void map_path(node *n, char *buf, size_t len, const char *suffix)
{
	snprintf(buf, len, "%s/%s%s", n->dir, MAP_FILE, suffix);
}

/* Writes the placement's map to <dir>/cluster.map atomically.  Loop. */
static int map_save(node *n, char *errmsg)
{
	char path[SH_PATH_MAX + 32], tmp[SH_PATH_MAX + 32];
	uint8_t *buf;
	size_t len;
	if (sh_place_encode(n->place, &buf, &len) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	sh_map m;
	uint64_t epoch = 0;
	if (sh_map_decode(buf, len, &m, NULL) == SHOAL_OK)
		epoch = m.epoch;
	sh_map_fini(&m);
	map_path(n, path, sizeof(path), "");
	map_path(n, tmp, sizeof(tmp), ".tmp");
	int rc = SHOAL_OK;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "open %s: %s", tmp, strerror(errno));
		goto out;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = sh_errf(errmsg, errno == ENOSPC ? SHOAL_E_FULL : SHOAL_E_IO,
			             "write %s: %s", tmp, strerror(errno));
			close(fd);
			goto out;
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "fsync %s: %s", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "rename %s: %s", tmp, strerror(errno));
		goto out;
	}
	int dfd = open(n->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	n->saved_epoch = epoch;
out:
	sh_free(buf);
	return rc;
}

/* Reads <dir>/cluster.map into m (not initialised); SHOAL_E_NOT_FOUND if
 * there is none. */
static int map_read(node *n, sh_map *m, char *errmsg)
{
	char path[SH_PATH_MAX + 32];
	map_path(n, path, sizeof(path), "");
	sh_map_init(m, n->conf->replication);
	FILE *f = fopen(path, "rbe");
	if (f == NULL)
		return errno == ENOENT
		           ? SHOAL_E_NOT_FOUND
		           : sh_errf(errmsg, SHOAL_E_IO, "open %s: %s", path, strerror(errno));
	size_t cap = 4096, len = 0;
	uint8_t *buf = sh_malloc(cap);
	while (buf != NULL) {
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (len < cap)
			break;
		uint8_t *nb = sh_realloc(buf, cap * 2);
		if (nb == NULL) {
			sh_free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	fclose(f);
	if (buf == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "reading %s: out of memory", path);
	sh_map_fini(m);
	char why[SH_ERRMSG_SIZE] = "";
	int rc = sh_map_decode(buf, len, m, why);
	sh_free(buf);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_IO, "%s is not a valid cluster map: %s", path, why);
	return SHOAL_OK;
}

static bool has_group_dirs(node *n)
{
	char path[SH_PATH_MAX + 32];
	struct stat st;
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
		snprintf(path, sizeof(path), "%s/group-%u", n->dir, g);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

/* Installs the map m (moved in) as the node's; the map is then trusted. */
static int adopt(node *n, sh_map *m, char *errmsg)
{
	if (n->place == NULL) {
		if ((n->place = sh_place_new(m)) == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	} else if (sh_place_offer_map(n->place, m, errmsg) < 0) {
		return SHOAL_E_NOMEM;
	}
	sh_map_fini(m);
	n->map_trusted = true;
	return SHOAL_OK;
}

/* The birth: the cluster file's birth map, and the groups bootstrap. */
static int birth(node *n, char *errmsg)
{
	sh_map m;
	int rc = sh_map_from_conf(&m, n->conf, errmsg);
	if (rc == SHOAL_OK)
		rc = adopt(n, &m, errmsg);
	else
		sh_map_fini(&m);
	if (rc != SHOAL_OK)
		return rc;
	n->birth = true;
	node_logf(NODE_LOG_INFO,
	          "node %u: the cluster's birth: bootstrapping the birth map's "
	          "groups",
	          n->id);
	return map_save(n, errmsg);
}

int node_map_open(node *n, const node_options *opts, char *errmsg)
{
	n->join = opts->join;
	struct node_mapsync *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	s->n = n;
	pthread_mutex_init(&s->mu, NULL);
	n->sync = s;

	sh_map m;
	int rc = map_read(n, &m, errmsg);
	if (rc == SHOAL_OK) {
		uint64_t epoch = m.epoch;
		n->map_born = true;
		if ((rc = adopt(n, &m, errmsg)) != SHOAL_OK)
			return rc;
		n->saved_epoch = epoch;
		node_logf(NODE_LOG_INFO, "node %u: cluster map epoch %" PRIu64 " from %s/%s", n->id,
		          epoch, n->dir, MAP_FILE);
		/* A group directory the saved map does not place here is what
		 * a removal left when the node stopped before deleting it
		 * (maps are saved before any group opens for them). */
		for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++)
			if (!sh_place_hosts(n->place, n->id, g))
				node_remove_group_dir(n, g);
		return SHOAL_OK;
	}
	sh_map_fini(&m);
	if (rc != SHOAL_E_NOT_FOUND)
		return rc;
	if (has_group_dirs(n)) {
		/* A data directory from before the map: the cluster ran on
		 * the file's placement, the birth map. */
		n->map_born = true;
		if ((rc = sh_map_from_conf(&m, n->conf, errmsg)) != SHOAL_OK) {
			sh_map_fini(&m);
			return rc;
		}
		if ((rc = adopt(n, &m, errmsg)) != SHOAL_OK)
			return rc;
		return map_save(n, errmsg);
	}
	/* An empty directory: the map is learnt first (an empty map meanwhile,
	 * epoch 0, so that any answer installs). */
	sh_map_init(&m, n->conf->replication);
	n->place = sh_place_new(&m);
	sh_map_fini(&m);
	if (n->place == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	if (!n->join && n->conf->n_nodes == 1)
		return birth(n, errmsg); /* alone: a majority of one */
	node_logf(NODE_LOG_INFO,
	          "node %u: empty data directory%s: asking the cluster file's nodes "
	          "whether the cluster exists",
	          n->id, n->join ? " and --join" : "");
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Asking other nodes                                                        */
/* ------------------------------------------------------------------------ */

static void map_answer(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	map_msg *m = (map_msg *)it;
	struct node_mapsync *s = m->s;
	node *n = s->n;
	Shoal__NodeResponse *r = NULL;
	if (rv == WIRE_LANE_OK)
		wire_unpack_node_response(NULL, ans, len, &r, NULL);
	bool ok = r != NULL && r->response != NULL && r->response->status == 0 && r->map.len > 0;
	/* A refresh answered "nothing newer" (no map) is an answer too: the
	 * same voter is asked next time. */
	bool current = r != NULL && r->response != NULL && r->response->status == 0 &&
	               r->map.len == 0 && m->pos < 0 && r->epoch != 0 &&
	               r->epoch <= sh_place_epoch(n->place);
	if (ok) {
		char msg[SH_ERRMSG_SIZE];
		if (n->map_trusted) {
			int irc = sh_place_offer(n->place, r->map.data, r->map.len, msg);
			if (irc == 1)
				atomic_store(&n->map_dirty, true);
			else if (irc < 0)
				node_logf(NODE_LOG_WARN, "cluster map from node %u: %s", m->node,
				          msg);
		}
	}
	pthread_mutex_lock(&s->mu);
	if (ok && m->pos >= 0) {
		s->answer[m->pos] = r->map_born ? ANS_BORN : ANS_NOT_BORN;
		sh_map mm;
		if (sh_map_decode(r->map.data, r->map.len, &mm, NULL) == SHOAL_OK &&
		    mm.epoch > s->best_epoch) {
			uint8_t *copy = sh_malloc(r->map.len);
			if (copy != NULL) {
				memcpy(copy, r->map.data, r->map.len);
				sh_free(s->best);
				s->best = copy;
				s->best_len = r->map.len;
				s->best_epoch = mm.epoch;
			}
		}
		sh_map_fini(&mm);
	} else if (!ok && !current && m->pos < 0) {
		s->next_voter++; /* the next voter of group 0 next time */
	}
	s->inflight--;
	pthread_mutex_unlock(&s->mu);
	if (r != NULL)
		shoal__node_response__free_unpacked(r, wire_heap_allocator());
	if (whole != NULL)
		nng_msg_free(whole);
	sh_free(m->buf);
	sh_free(m);
	node_wake(n);
}

/* Sends map_get to node id (pos: its position in the file for the birth
 * check, -1 for a refresh).  Loop. */
static void ask(struct node_mapsync *s, uint32_t id, int pos)
{
	node *n = s->n;
	if (n->ship == NULL)
		return;
	wire_lanes *l = node_ship_lanes_to(n->ship, id);
	if (l == NULL)
		return;
	Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
	req.map_get = true;
	/* A refresh wants only a newer map; the birth check wants the map
	 * whatever it is (its epoch is 0 until then anyway). */
	if (pos < 0)
		req.map_known = sh_place_epoch(n->place);
	size_t size = shoal__node_request__get_packed_size(&req);
	map_msg *m = sh_calloc(1, sizeof(*m));
	uint8_t *buf = sh_malloc(size > 0 ? size : 1);
	if (m == NULL || buf == NULL) {
		sh_free(m);
		sh_free(buf);
		return;
	}
	m->s = s;
	m->node = id;
	m->pos = pos;
	m->buf = buf;
	m->item.part[0] = buf;
	m->item.len[0] = shoal__node_request__pack(&req, buf);
	m->item.deadline = sh_now_ms() + MAPSYNC_ANSWER_MS;
	m->item.done = map_answer;
	pthread_mutex_lock(&s->mu);
	s->inflight++;
	pthread_mutex_unlock(&s->mu);
	if (wire_lanes_submit(l, &m->item) != SHOAL_OK) {
		pthread_mutex_lock(&s->mu);
		s->inflight--;
		pthread_mutex_unlock(&s->mu);
		sh_free(buf);
		sh_free(m);
	}
}

/* Not trusted yet: decide from the answers, else ask again.  Loop. */
static void learn(struct node_mapsync *s)
{
	node *n = s->n;
	const sh_cluster_conf *c = n->conf;
	char msg[SH_ERRMSG_SIZE] = "";
	uint32_t not_born = 1, born = 0; /* this node: not born */
	uint8_t *best = NULL;
	size_t best_len = 0;
	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < c->n_nodes; i++) {
		if (c->nodes[i].id == n->id)
			continue;
		if (s->answer[i] == ANS_BORN)
			born++;
		else if (s->answer[i] == ANS_NOT_BORN)
			not_born++;
	}
	if (s->best != NULL && (born > 0 || n->join)) {
		best = s->best;
		best_len = s->best_len;
		s->best = NULL;
		s->best_epoch = 0;
	}
	bool busy = s->inflight > 0;
	pthread_mutex_unlock(&s->mu);

	if (best != NULL) {
		int rc = sh_place_offer(n->place, best, best_len, msg);
		sh_free(best);
		if (rc >= 0) {
			n->map_trusted = true;
			node_logf(NODE_LOG_INFO,
			          "node %u: the cluster exists (%s): cluster map epoch %" PRIu64
			          " learnt; its groups open without bootstrap",
			          n->id, n->join ? "--join" : "a node answered born",
			          sh_place_epoch(n->place));
			/* A group being founded with this node a founder: it
			 * may have founded it (and voted in it) before its data
			 * directory was lost -- this process started with an
			 * empty one -- so it never bootstraps it (node.c). */
			for (uint32_t g = 0; g < n->group_cap; g++)
				if (sh_place_is_founder(n->place, n->id, g)) {
					n->unfounded[g] = true;
					node_logf(
					    NODE_LOG_WARN,
					    "group %u: being founded with this node a founder, "
					    "but this node started from an empty data "
					    "directory (it may have founded the group before "
					    "losing its data): not bootstrapped here",
					    g);
				}
			atomic_store(&n->map_dirty, true);
			return;
		}
		node_logf(NODE_LOG_WARN, "cluster map from a peer: %s", msg);
	}
	if (!n->join && born == 0 && not_born >= sh_map_majority(c->n_nodes)) {
		if (birth(n, msg) != SHOAL_OK)
			node_logf(NODE_LOG_ERROR, "node %u: birth: %s", n->id, msg);
		atomic_store(&n->map_dirty, true);
		return;
	}
	if (busy)
		return;
	if (!s->logged_wait) {
		s->logged_wait = true;
		node_logf(NODE_LOG_INFO,
		          "node %u: waiting for the cluster file's nodes to say whether the "
		          "cluster exists",
		          n->id);
	}
	for (uint32_t i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].id != n->id && s->answer[i] == ANS_NONE)
			ask(s, c->nodes[i].id, (int)i);
	/* --join: the answers carry the map whether born or not. */
	for (uint32_t i = 0; n->join && i < c->n_nodes; i++)
		if (c->nodes[i].id != n->id && s->answer[i] != ANS_NONE)
			ask(s, c->nodes[i].id, (int)i);
}

/* Trusted: the newest map of group 0.  Loop. */
static void refresh(struct node_mapsync *s)
{
	node *n = s->n;
	char msg[SH_ERRMSG_SIZE] = "";
	node_group *g0 = node_group_get(n, 0);
	uint64_t term;
	if (g0 != NULL && node_group_last_applied(g0) > 0) {
		/* Loaded (copied and decoded) only when newer than the one held. */
		uint64_t stored = 0;
		if (st_cluster_map_epoch(node_group_env(g0), &stored, msg) != SHOAL_OK ||
		    stored > sh_place_epoch(n->place)) {
			sh_map m;
			if (node_map_load(n, g0, &m, msg) == SHOAL_OK &&
			    sh_place_offer_map(n->place, &m, msg) == 1)
				atomic_store(&n->map_dirty, true);
			sh_map_fini(&m);
		}
		/* A leader has applied everything committed; a follower may be
		 * behind: ask the leader too. */
		if (node_group_leading(g0, &term))
			return;
	}
	uint32_t voters[SH_MAP_GROUP_REPLICAS];
	uint32_t nv = sh_place_voters(n->place, 0, voters, SH_MAP_GROUP_REPLICAS);
	if (nv > SH_MAP_GROUP_REPLICAS)
		nv = SH_MAP_GROUP_REPLICAS;
	pthread_mutex_lock(&s->mu);
	bool busy = s->inflight > 0;
	uint32_t k = s->next_voter;
	pthread_mutex_unlock(&s->mu);
	if (busy || nv == 0)
		return;
	uint32_t dest = voters[k % nv];
	if (g0 != NULL) {
		node_group_status st;
		node_group_status_get(g0, &st);
		if (st.leader != 0 && st.leader != n->id)
			dest = st.leader;
	}
	if (dest == n->id)
		dest = voters[(k + 1) % nv];
	if (dest != n->id)
		ask(s, dest, -1);
}

static void timer_cb(uv_timer_t *t)
{
	node *n = t->data;
	n->sync->timer_fired = true; /* the check handle runs the tick after this */
}

int node_map_start(node *n, char *errmsg)
{
	(void)errmsg;
	uv_timer_init(&n->loop, &n->map_timer);
	n->map_timer.data = n;
	n->map_timer_init = true;
	/* The first look soon: an empty directory waits for its answers. */
	uv_timer_start(&n->map_timer, timer_cb, 10, MAPSYNC_TICK_MS);
	return SHOAL_OK;
}

void node_map_tick(node *n)
{
	struct node_mapsync *s = n->sync;
	if (s == NULL)
		return;
	bool timer = s->timer_fired;
	s->timer_fired = false;
	/* (A clock read only while hurried: this runs every loop iteration.) */
	uint64_t until = atomic_load(&s->hurry_until_ns), now = until != 0 ? node_now_ns() : 0;
	if (timer) {
		if (!n->map_trusted)
			learn(s);
		else
			refresh(s);
	} else if (n->map_trusted && now < until &&
	           now >= s->hurried_ns + NODE_MAP_HURRY_MS * 1000000ull) {
		s->hurried_ns = now;
		refresh(s);
	}
	bool dirty = atomic_exchange(&n->map_dirty, false);
	if (n->map_trusted && (dirty || sh_place_epoch(n->place) != n->saved_epoch)) {
		char msg[SH_ERRMSG_SIZE];
		uint64_t before = n->saved_epoch;
		if (map_save(n, msg) != SHOAL_OK)
			node_logf(NODE_LOG_WARN, "node %u: saving the cluster map: %s", n->id, msg);
		else if (n->saved_epoch != before)
			node_logf(NODE_LOG_INFO, "node %u: cluster map epoch %" PRIu64 " installed",
			          n->id, n->saved_epoch);
		node_reconcile(n);
	} else if (timer || n->graves != NULL) {
		node_reconcile(n);
	}
}

void node_map_close(node *n)
{
	if (n->map_timer_init) {
		uv_timer_stop(&n->map_timer);
		uv_close((uv_handle_t *)&n->map_timer, NULL);
		n->map_timer_init = false;
	}
}

void node_map_free(node *n)
{
	struct node_mapsync *s = n->sync;
	if (s != NULL) {
		sh_free(s->best);
		pthread_mutex_destroy(&s->mu);
		sh_free(s);
		n->sync = NULL;
	}
	sh_place_free(n->place);
	n->place = NULL;
}

void node_map_hurry(node *n, uint64_t ms)
{
	struct node_mapsync *s = n->sync;
	if (s == NULL)
		return;
	uint64_t until = node_now_ns() + ms * 1000000ull;
	uint64_t cur = atomic_load(&s->hurry_until_ns);
	while (cur < until && !atomic_compare_exchange_weak(&s->hurry_until_ns, &cur, until))
		;
}

int node_map_offer(node *n, const uint8_t *buf, size_t len, char *errmsg)
{
	int rc = sh_place_offer(n->place, buf, len, errmsg);
	if (rc == 1) {
		atomic_store(&n->map_dirty, true);
		node_wake(n);
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Handlers (node-level: no group)                                           */
/* ------------------------------------------------------------------------ */

/* Whether a group hosted here has applied more than its bootstrap entry
 * (index 1): a leader was elected and committed its first entry, so the
 * cluster has run -- a node with an empty directory asking now is not at
 * the birth.  (A node that had a map or groups at start says born anyway.) */
static bool ran(node *n)
{
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
		node_group *grp = node_group_get(n, g);
		node_group_status st;
		if (grp == NULL)
			continue;
		node_group_status_get(grp, &st);
		if (st.applied >= 2)
			return true;
	}
	return false;
}

int node_handle_map_get(node_call *c)
{
	node *n = c->node;
	uint8_t *buf;
	size_t len;
	uint64_t epoch = sh_place_epoch(n->place);
	c->nresp->epoch = epoch;
	c->nresp->map_born = n->map_born || ran(n);
	/* The asker has it (or a newer one): the epoch says so, no map. */
	if (c->req->map_known != 0 && c->req->map_known >= epoch)
		return SHOAL_OK;
	if (sh_place_encode(n->place, &buf, &len) != SHOAL_OK)
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	uint8_t *copy = sh_arena_alloc(c->arena, len);
	if (copy == NULL) {
		sh_free(buf);
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	}
	memcpy(copy, buf, len);
	sh_free(buf);
	c->nresp->map.data = copy;
	c->nresp->map.len = len;
	return SHOAL_OK;
}

int node_handle_node_status(node_call *c)
{
	node *n = c->node;
	uint32_t cap = sh_cluster_group_cap(n->conf), k = 0;
	Shoal__GroupStatus **v = sh_arena_calloc(c->arena, cap > 0 ? cap : 1, sizeof(*v));
	if (v == NULL)
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
	for (uint32_t g = 0; g < cap; g++) {
		node_group *grp = node_group_acquire(n, g);
		if (grp == NULL && node_group_lost(n, g)) {
			/* A voter with no data (node.c, lost_replica): the executor
			 * re-creates it. */
			Shoal__GroupStatus *gs = sh_arena_alloc(c->arena, sizeof(*gs));
			if (gs == NULL)
				return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
			shoal__group_status__init(gs);
			gs->group = g;
			gs->node = n->id;
			gs->role = (char *)"lost";
			gs->error =
			    (char *)"this node is a voter of the group in the cluster map but has "
			            "no data for it (its directory was empty)";
			v[k++] = gs;
			continue;
		}
		if (grp == NULL)
			continue;
		Shoal__NodeResponse sub = SHOAL__NODE_RESPONSE__INIT;
		node_call sc = *c;
		sc.group = grp;
		sc.nresp = &sub;
		sc.errmsg[0] = '\0';
		int rc = node_handle_group_status(&sc);
		Shoal__GroupStatus *gs = sub.status;
		if (gs == NULL) {
			gs = sh_arena_alloc(c->arena, sizeof(*gs));
			if (gs == NULL) {
				node_group_release(grp);
				return sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory");
			}
			shoal__group_status__init(gs);
			gs->group = g;
			gs->node = n->id;
			gs->role = (char *)"unavailable";
		}
		if (rc != SHOAL_OK && (gs->error == NULL || gs->error[0] == '\0'))
			gs->error = sh_arena_strndup(c->arena, sc.errmsg, strlen(sc.errmsg));
		rc = node_group_members(grp, c->arena, gs);
		node_group_release(grp);
		if (rc != SHOAL_OK)
			return sh_errf(c->errmsg, rc, "out of memory");
		v[k++] = gs;
	}
	c->nresp->groups = v;
	c->nresp->n_groups = k;
	c->nresp->epoch = sh_place_epoch(n->place);
	return SHOAL_OK;
}
