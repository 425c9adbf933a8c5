/*
 * scrub.c -- the replica scrub: a background check that the replicas of
 * each group hold the same data (DynamoDB runs one continuously).
 *
 * The protocol, per group, driven by its leader:
 *
 *   1. Every [cluster] scrub_ms the leader proposes a CommandOp.scrub
 *      {proposer, seq, start, max_keys} through the group's log, start being
 *      where its previous range ended (a cursor in the leader's memory; a
 *      new leader starts at the beginning).
 *   2. Every replica applies it (fsm_apply.c, op_scrub) inside the entry's
 *      LMDB write transaction: st_txn_scrub hashes up to max_keys pairs of
 *      the environment from start -- so at exactly the same Raft index on
 *      every replica -- and the FSM keeps {seq, index, start, end, count,
 *      hash} in a small ring in memory (node_fsm_scrub_result).
 *   3. Once applied on the leader, it asks every other replica for its
 *      result of (proposer, seq) with NodeRequest.scrub_check
 *      (node_handle_scrub_check, handlers.c) over the node-to-node lanes
 *      (proto/lanes.h).  A replica that has not applied it yet answers
 *      found = false and is asked again a moment later, until
 *      NODE_SCRUB_COMPARE_MS has passed (then it counts as unanswered).
 *   4. Compare: results are equal when count, hash and end key are.  On a
 *      difference a replica is divergent when a majority of the group's
 *      replicas agree on another result (3 replicas: the odd one out);
 *      without a majority the mismatch is logged and counted only.  Every
 *      mismatch is logged at ERROR with the group, seq, index, range,
 *      replicas, hashes and counts, and counted in the metrics below.
 *   5. The divergent replica rebuilds: the leader tells it (scrub_check with
 *      diverged and the majority's hash; the replica checks that its own
 *      result differs from that) or, when the leader is the odd one out, it
 *      acts itself.  The replica marks its environment for rebuild
 *      (st_env_mark_rebuild: the next open empties it) and restarts its
 *      process in place (node_restart: graceful stop, then re-exec, same
 *      pid); raft then restores its last snapshot and replays its log
 *      (node/fsm.h).  NOTE: this rebuilds from the replica's OWN Raft
 *      snapshot and log, so it repairs damage newer than that snapshot; a
 *      snapshot taken from already damaged LMDB carries the damage.
 *      Rebuilding from a peer needs a Raft membership change (remove the
 *      replica, add a fresh one), a later issue.  Hence the guard: a replica
 *      found divergent again within NODE_SCRUB_REBUILD_GUARD_MS of a scrub
 *      rebuild (a note file, <group dir>/scrub-rebuilt, holds the time of
 *      the last one) is not rebuilt again but failed for good
 *      (node_fsm_fail_diverged: it stops serving and hands leadership away)
 *      with a message saying it needs replacing.
 *
 * Leader state per group (sc_group.state):
 *
 *   state     event                                 next      function
 *   --------  ------------------------------------  --------  -------------
 *   IDLE      leading, scrub_ms passed              PROPOSED  propose
 *   PROPOSED  applied here (waiter answered)        COMPARE   proposed_cb
 *   PROPOSED  failed / leadership lost              IDLE      proposed_cb
 *   COMPARE   every peer answered or deadline       IDLE      decide
 *   COMPARE   leadership lost / term changed        IDLE      group_tick
 *
 * A completed wrap of the cursor (a range that ran to the end of the key
 * space) is one pass.  Metrics, per group, counted by the leader that
 * compared:
 *   shoal_scrub_ranges_total{group}      ranges compared (>= 2 results)
 *   shoal_scrub_keys_total{group}        pairs in those ranges (leader's count)
 *   shoal_scrub_mismatches_total{group}  ranges whose results differed
 *   shoal_scrub_passes_total{group}      passes over the whole key space
 *   shoal_scrub_unanswered_total{group}  replicas that gave no result in time
 *
 * Threads: everything on the loop thread, except done_cb (nng's callback
 * threads: it stores a peer's answer under s->mu), node_scrub_told (the
 * server's threads: the handler records a "you diverged" under s->mu) and
 * node_scrub_metrics (any thread: atomics).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "node/node.h"
#include "node/ship_int.h"
#include "proto/lanes.h"
#include "proto/wire.h"

/* Pairs per range. */
#define NODE_SCRUB_RANGE_KEYS 1000
/* How long the leader waits for the other replicas' results of a range,
 * how often it asks one that has not applied it yet, and the answer's
 * deadline of one question. */
#define NODE_SCRUB_COMPARE_MS 3000
#define NODE_SCRUB_RETRY_MS   50
#define NODE_SCRUB_ANSWER_MS  1000
/* A replica found divergent again this soon after a scrub rebuild is
 * failed instead of rebuilt again (see the top). */
#define NODE_SCRUB_REBUILD_GUARD_MS (10 * 60 * 1000)
#define NOTE_FILE                   "scrub-rebuilt"

typedef enum sc_state { SC_IDLE, SC_PROPOSED, SC_COMPARE } sc_state;

typedef enum peer_state {
	PEER_ASK,  /* to be asked (at next_ns) */
	PEER_SENT, /* a question is on the wire */
	PEER_DONE, /* answered with its result */
} peer_state;

typedef struct sc_peer {
	uint32_t node;
	peer_state state;
	uint64_t next_ns;
	node_scrub_result res; /* with PEER_DONE */
} sc_peer;

typedef struct sc_group sc_group;

/* One question on the wire. */
typedef struct sc_msg {
	wire_lane_item item; /* first: the lanes hand it back */
	sc_group *sg;
	uint64_t gen;
	uint32_t peer;
	bool tell; /* a "you diverged": nothing to record */
	uint8_t *buf;
} sc_msg;

struct sc_group {
	node_scrub *s;
	node_group *g;
	uint32_t gid;
	sc_state state;
	uint64_t term;
	uint64_t gen; /* changes when a compare ends: late answers are dropped */
	uint64_t next_ns;
	uint8_t cursor[NODE_SCRUB_KEY_MAX];
	size_t cursor_len;
	/* The range proposed (the waiter and what its op points to). */
	node_waiter w;
	bool w_init;
	Shoal__Scrub op;
	uint8_t op_start[NODE_SCRUB_KEY_MAX];
	node_scrub_result mine;
	uint64_t compare_end_ns;
	sc_peer peers[SH_MAX_REPLICATION]; /* the other replicas (s->mu) */
	uint32_t n_peers;
	/* "You diverged" from the leader (s->mu). */
	bool told;
	uint32_t told_proposer;
	uint64_t told_seq, told_hash;
	/* Counters (metrics). */
	atomic_uint_fast64_t ranges, keys, mismatches, passes, unanswered;
};

struct node_scrub {
	node *n;
	uint32_t ms;
	bool closing;
	pthread_mutex_t mu;
	uint64_t next_seq;
	sc_group **groups; /* [sh_cluster_group_cap(conf)]; NULL where not hosted */
};

/* ------------------------------------------------------------------------ */
/* Rebuilding a divergent replica (this node's)                             */
/* ------------------------------------------------------------------------ */

static void note_path(sc_group *sg, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", node_group_dir(sg->g), NOTE_FILE);
}

/* The wall-clock ms of this group's last scrub rebuild, 0 if none. */
static int64_t note_read(sc_group *sg)
{
	char path[SH_PATH_MAX + 32];
	note_path(sg, path, sizeof(path));
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	long long t = 0;
	if (fscanf(f, "%lld", &t) != 1)
		t = 0;
	fclose(f);
	return (int64_t)t;
}

static void note_write(sc_group *sg, int64_t now_ms)
{
	char path[SH_PATH_MAX + 32];
	note_path(sg, path, sizeof(path));
	FILE *f = fopen(path, "we");
	if (f == NULL) {
		node_logf(NODE_LOG_WARN, "scrub: group %u: writing %s failed", sg->gid, path);
		return;
	}
	fprintf(f, "%lld\n", (long long)now_ms);
	fclose(f);
}

/* This replica's data differs from the majority's: rebuild it, or fail it
 * when a scrub rebuild did not help.  The one place that decides.  Loop. */
static void diverged(sc_group *sg, const char *why)
{
	node *n = sg->s->n;
	if (node_restart_requested(n))
		return; /* already on its way */
	char msg[SH_ERRMSG_SIZE];
	node_fsm *fsm = node_group_fsm(sg->g);
	if (node_fsm_failed(fsm, NULL) != SHOAL_OK)
		return;
	int64_t now = node_wall_ms(), last = note_read(sg);
	if (last != 0 && now - last >= 0 && now - last < NODE_SCRUB_REBUILD_GUARD_MS) {
		snprintf(
		    msg, sizeof(msg),
		    "group %u: the replica scrub found this replica divergent again %lld s after "
		    "it was rebuilt from its own Raft snapshot and log (%s): its snapshot "
		    "carries the damage; the replica needs replacing",
		    sg->gid, (long long)((now - last) / 1000), why);
		node_logf(NODE_LOG_ERROR, "scrub: %s", msg);
		node_fsm_fail_diverged(fsm, msg);
		return;
	}
	int rc = st_env_mark_rebuild(node_group_env(sg->g), msg);
	if (rc != SHOAL_OK) {
		char fail[SH_ERRMSG_SIZE];
		snprintf(fail, sizeof(fail),
		         "group %u: the replica scrub found this replica divergent (%s) and it "
		         "cannot be marked for rebuild: %.200s",
		         sg->gid, why, msg);
		node_logf(NODE_LOG_ERROR, "scrub: %s", fail);
		node_fsm_fail_diverged(fsm, fail);
		return;
	}
	note_write(sg, now);
	node_logf(NODE_LOG_ERROR,
	          "scrub: group %u: this replica diverged from its peers (%s): its storage is "
	          "marked for rebuild; restarting the node to rebuild it from the Raft snapshot "
	          "and log",
	          sg->gid, why);
	node_restart(n);
}

void node_scrub_told(node_scrub *s, uint32_t gid, uint32_t proposer, uint64_t seq,
                     uint64_t majority_hash)
{
	sc_group *sg = s != NULL && gid < sh_cluster_group_cap(s->n->conf)
	                   ? __atomic_load_n(&s->groups[gid], __ATOMIC_ACQUIRE)
	                   : NULL;
	if (sg == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	sg->told = true;
	sg->told_proposer = proposer;
	sg->told_seq = seq;
	sg->told_hash = majority_hash;
	pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------------ */
/* Questions to the other replicas                                           */
/* ------------------------------------------------------------------------ */

static void done_cb(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	sc_msg *m = (sc_msg *)it;
	sc_group *sg = m->sg;
	Shoal__NodeResponse *r = NULL;
	if (rv == WIRE_LANE_OK && !m->tell)
		wire_unpack_node_response(NULL, ans, len, &r, NULL);
	pthread_mutex_lock(&sg->s->mu);
	if (!m->tell && m->gen == sg->gen && sg->state == SC_COMPARE) {
		sc_peer *p = &sg->peers[m->peer];
		p->state = PEER_ASK;
		p->next_ns = node_now_ns() + (uint64_t)NODE_SCRUB_RETRY_MS * 1000000u;
		const Shoal__ScrubResult *x = r != NULL ? r->scrub : NULL;
		if (r != NULL && r->response != NULL && r->response->status != 0)
			x = NULL;
		if (x != NULL && x->found && x->start.len < NODE_SCRUB_KEY_MAX &&
		    x->end.len < NODE_SCRUB_KEY_MAX) {
			node_scrub_result *res = &p->res;
			memset(res, 0, sizeof(*res));
			res->index = x->index;
			res->count = x->count;
			res->hash = x->hash;
			res->start_len = x->start.len;
			res->end_len = x->end.len;
			if (x->start.len > 0)
				memcpy(res->start, x->start.data, x->start.len);
			if (x->end.len > 0)
				memcpy(res->end, x->end.data, x->end.len);
			p->state = PEER_DONE;
		}
	}
	pthread_mutex_unlock(&sg->s->mu);
	if (r != NULL)
		shoal__node_response__free_unpacked(r, wire_heap_allocator());
	if (whole != NULL)
		nng_msg_free(whole);
	sh_free(m->buf);
	sh_free(m);
}

/* Sends a ScrubCheck about the range in flight to peer k (tell: "you
 * diverged", the majority having `hash`).  False if it could not be sent.
 * Loop, s->mu held. */
static bool ask(sc_group *sg, uint32_t k, bool tell, uint64_t hash)
{
	node *n = sg->s->n;
	Shoal__ScrubCheck q = SHOAL__SCRUB_CHECK__INIT;
	q.proposer = n->id;
	q.seq = sg->op.seq;
	q.diverged = tell;
	q.majority_hash = tell ? hash : 0;
	Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
	req.group = sg->gid;
	req.scrub_check = &q;
	wire_lanes *l = n->ship != NULL ? node_ship_lanes_to(n->ship, sg->peers[k].node) : NULL;
	size_t size = shoal__node_request__get_packed_size(&req);
	sc_msg *m = sh_calloc(1, sizeof(*m));
	uint8_t *buf = sh_malloc(size > 0 ? size : 1);
	if (l == NULL || m == NULL || buf == NULL) {
		sh_free(m);
		sh_free(buf);
		return false;
	}
	m->sg = sg;
	m->gen = sg->gen;
	m->peer = k;
	m->tell = tell;
	m->buf = buf;
	m->item.part[0] = buf;
	m->item.len[0] = shoal__node_request__pack(&req, buf);
	m->item.deadline = sh_now_ms() + NODE_SCRUB_ANSWER_MS;
	m->item.done = done_cb;
	if (wire_lanes_submit(l, &m->item) != SHOAL_OK) {
		sh_free(buf);
		sh_free(m);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                 */
/* ------------------------------------------------------------------------ */

static bool same(const node_scrub_result *a, const node_scrub_result *b)
{
	return a->count == b->count && a->hash == b->hash && a->end_len == b->end_len &&
	       memcmp(a->end, b->end, a->end_len) == 0;
}

/* A scrub key for the log: hex of its first bytes. */
static void key_text(const uint8_t *k, size_t len, char *out, size_t n)
{
	if (len == 0) {
		snprintf(out, n, "(end)");
		return;
	}
	size_t o = 0;
	for (size_t i = 0; i < len && o + 3 < n && i < 24; i++)
		o += (size_t)snprintf(out + o, n - o, "%02x", k[i]);
	if (len > 24 && o + 4 < n)
		snprintf(out + o, n - o, "...");
}

/* Every result is in (or the deadline passed): compare, count, and act on a
 * divergent replica.  Loop, s->mu held. */
static void decide(sc_group *sg)
{
	node *n = sg->s->n;
	const node_scrub_result *res[SH_MAX_REPLICATION];
	uint32_t who[SH_MAX_REPLICATION], nr = 0;
	res[nr] = &sg->mine;
	who[nr++] = n->id;
	for (uint32_t k = 0; k < sg->n_peers; k++) {
		if (sg->peers[k].state == PEER_DONE) {
			res[nr] = &sg->peers[k].res;
			who[nr++] = sg->peers[k].node;
		} else {
			atomic_fetch_add(&sg->unanswered, 1);
		}
	}
	if (nr < 2)
		return;
	atomic_fetch_add(&sg->ranges, 1);
	atomic_fetch_add(&sg->keys, sg->mine.count);
	bool all = true;
	for (uint32_t i = 1; i < nr; i++)
		all = all && same(res[0], res[i]);
	if (all)
		return;
	atomic_fetch_add(&sg->mismatches, 1);

	/* The majority of the group's replicas (not of the answers). */
	uint32_t voters[SH_MAP_GROUP_REPLICAS];
	uint32_t nv = sh_place_voters(n->place, sg->gid, voters, SH_MAP_GROUP_REPLICAS);
	uint32_t need = sh_map_majority(nv > 0 ? nv : n->conf->replication), maj = UINT32_MAX;
	for (uint32_t i = 0; i < nr && maj == UINT32_MAX; i++) {
		uint32_t votes = 0;
		for (uint32_t j = 0; j < nr; j++)
			votes += same(res[i], res[j]);
		if (votes >= need)
			maj = i;
	}
	char from[2 * 24 + 8], to[2 * 24 + 8], list[256] = "";
	key_text(sg->mine.start, sg->mine.start_len, from, sizeof(from));
	key_text(sg->mine.end, sg->mine.end_len, to, sizeof(to));
	size_t o = 0;
	for (uint32_t i = 0; i < nr && o < sizeof(list); i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o,
		                      "%snode %u hash %016" PRIx64 " count %u", i > 0 ? ", " : "",
		                      who[i], res[i]->hash, res[i]->count);
	if (maj == UINT32_MAX) {
		node_logf(NODE_LOG_ERROR,
		          "scrub: group %u: seq %" PRIu64 " index %" PRIu64
		          ": replicas differ over range [%s, %s) with no majority: %s",
		          sg->gid, sg->op.seq, sg->mine.index, from, to, list);
		return;
	}
	for (uint32_t i = 0; i < nr; i++) {
		if (same(res[i], res[maj]))
			continue;
		node_logf(NODE_LOG_ERROR,
		          "scrub: group %u: seq %" PRIu64 " index %" PRIu64
		          ": replica on node %u diverged over range [%s, %s): hash %016" PRIx64
		          " count %u, the majority's hash %016" PRIx64 " count %u (%s)",
		          sg->gid, sg->op.seq, sg->mine.index, who[i], from, to, res[i]->hash,
		          res[i]->count, res[maj]->hash, res[maj]->count, list);
		if (who[i] == n->id) {
			char why[128];
			snprintf(why, sizeof(why), "scrub seq %" PRIu64 " at index %" PRIu64,
			         sg->op.seq, sg->mine.index);
			diverged(sg, why);
			continue;
		}
		for (uint32_t k = 0; k < sg->n_peers; k++) {
			if (sg->peers[k].node != who[i])
				continue;
			if (!ask(sg, k, true, res[maj]->hash))
				node_logf(NODE_LOG_WARN, "scrub: group %u: could not tell node %u",
				          sg->gid, who[i]);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Proposing                                                                 */
/* ------------------------------------------------------------------------ */

/* The replicas compared with: the group's other voters in the map now (a
 * non-voter may still be catching up).  s->mu held. */
static void set_peers(sc_group *sg)
{
	node *n = sg->s->n;
	uint32_t voters[SH_MAP_GROUP_REPLICAS];
	uint32_t nv = sh_place_voters(n->place, sg->gid, voters, SH_MAP_GROUP_REPLICAS);
	sg->n_peers = 0;
	for (uint32_t k = 0; k < nv && k < SH_MAP_GROUP_REPLICAS; k++)
		if (voters[k] != n->id && sg->n_peers < SH_MAX_REPLICATION)
			sg->peers[sg->n_peers++].node = voters[k];
}

static void to_idle(sc_group *sg)
{
	pthread_mutex_lock(&sg->s->mu);
	sg->state = SC_IDLE;
	sg->gen++;
	pthread_mutex_unlock(&sg->s->mu);
	sg->next_ns = node_now_ns() + (uint64_t)sg->s->ms * 1000000u;
}

static void proposed_cb(node_waiter *w)
{
	sc_group *sg = w->data;
	node_scrub *s = sg->s;
	sh_free(w->resp);
	w->resp = NULL;
	uint64_t term = 0;
	node_scrub_result mine;
	if (s->closing || w->code != SHOAL_OK || !node_group_leading(sg->g, &term) ||
	    term != sg->term ||
	    !node_fsm_scrub_result(node_group_fsm(sg->g), s->n->id, sg->op.seq, &mine)) {
		to_idle(sg);
		return;
	}
	sg->mine = mine;
	/* The cursor moves on; reaching the end of the key space ends a pass. */
	memcpy(sg->cursor, mine.end, mine.end_len);
	sg->cursor_len = mine.end_len;
	if (mine.end_len == 0)
		atomic_fetch_add(&sg->passes, 1);
	uint64_t now = node_now_ns();
	pthread_mutex_lock(&s->mu);
	sg->state = SC_COMPARE;
	sg->gen++;
	sg->compare_end_ns = now + (uint64_t)NODE_SCRUB_COMPARE_MS * 1000000u;
	set_peers(sg);
	for (uint32_t k = 0; k < sg->n_peers; k++) {
		sg->peers[k].state = PEER_ASK;
		sg->peers[k].next_ns = now;
	}
	pthread_mutex_unlock(&s->mu);
}

static void propose(sc_group *sg, uint64_t term)
{
	node_scrub *s = sg->s;
	char msg[SH_ERRMSG_SIZE];
	shoal__scrub__init(&sg->op);
	sg->op.proposer = s->n->id;
	sg->op.seq = s->next_seq++;
	memcpy(sg->op_start, sg->cursor, sg->cursor_len);
	sg->op.start.data = sg->op_start;
	sg->op.start.len = sg->cursor_len;
	sg->op.max_keys = NODE_SCRUB_RANGE_KEYS;
	node_waiter *w = &sg->w;
	w->kind = NODE_WAIT_WRITE;
	w->op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	w->op.op_case = SHOAL__COMMAND_OP__OP_SCRUB;
	w->op.scrub = &sg->op;
	w->size = 32 + sg->cursor_len;
	w->cb = proposed_cb;
	w->data = sg;
	sg->term = term;
	sg->state = SC_PROPOSED;
	if (node_group_submit(sg->g, w, msg) != SHOAL_OK)
		to_idle(sg);
}

static void group_tick(sc_group *sg, uint64_t now)
{
	node_scrub *s = sg->s;
	/* A "you diverged" from the leader, checked against our own result. */
	pthread_mutex_lock(&s->mu);
	bool told = sg->told;
	uint32_t proposer = sg->told_proposer;
	uint64_t seq = sg->told_seq, hash = sg->told_hash;
	sg->told = false;
	pthread_mutex_unlock(&s->mu);
	if (told) {
		node_scrub_result r;
		if (node_fsm_scrub_result(node_group_fsm(sg->g), proposer, seq, &r) &&
		    r.hash != hash) {
			char why[160];
			snprintf(why, sizeof(why),
			         "scrub seq %" PRIu64 " at index %" PRIu64 ": hash %016" PRIx64
			         ", the majority's %016" PRIx64 ", says the leader, node %u",
			         seq, r.index, r.hash, hash, proposer);
			diverged(sg, why);
		}
	}

	uint64_t term = 0;
	bool leading = node_group_leading(sg->g, &term) &&
	               node_fsm_failed(node_group_fsm(sg->g), NULL) == SHOAL_OK;
	if (sg->state == SC_PROPOSED)
		return; /* proposed_cb ends it */
	if (!leading || term != sg->term) {
		if (sg->state != SC_IDLE)
			to_idle(sg);
		if (!leading) {
			sg->cursor_len = 0; /* a later leadership starts afresh */
			return;
		}
	}
	if (sg->state == SC_IDLE) {
		if (now >= sg->next_ns)
			propose(sg, term);
		return;
	}
	/* SC_COMPARE */
	pthread_mutex_lock(&s->mu);
	bool pending = false;
	for (uint32_t k = 0; k < sg->n_peers; k++) {
		sc_peer *p = &sg->peers[k];
		if (p->state == PEER_DONE)
			continue;
		pending = true;
		if (p->state == PEER_ASK && now >= p->next_ns && now < sg->compare_end_ns) {
			if (ask(sg, k, false, 0))
				p->state = PEER_SENT;
			else
				p->next_ns = now + (uint64_t)NODE_SCRUB_RETRY_MS * 1000000u;
		}
	}
	if (!pending || now >= sg->compare_end_ns) {
		decide(sg);
		pthread_mutex_unlock(&s->mu);
		to_idle(sg);
		return;
	}
	pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------------ */
/* The scrubber                                                              */
/* ------------------------------------------------------------------------ */

static sc_group *group_new(node_scrub *s, uint32_t g, node_group *grp);

void node_scrub_tick(node_scrub *s)
{
	if (s == NULL || s->closing)
		return;
	uint64_t now = node_now_ns();
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->n->conf); g++) {
		/* Groups come and go with the map (node.c): follow n->groups. */
		node_group *grp = node_group_get(s->n, g);
		sc_group *sg = s->groups[g];
		if (sg == NULL && (grp == NULL || (sg = group_new(s, g, grp)) == NULL))
			continue;
		if (sg->g != grp) {
			if (sg->state == SC_PROPOSED)
				continue; /* the old group answers it as it closes */
			if (sg->state != SC_IDLE)
				to_idle(sg);
			sg->g = grp;
			sg->cursor_len = 0;
		}
		if (sg->g != NULL)
			group_tick(sg, now);
	}
}

/* The scrub state of hosted group g (kept when the group leaves: its
 * counters stay in the metrics).  NULL: out of memory. */
static sc_group *group_new(node_scrub *s, uint32_t g, node_group *grp)
{
	sc_group *sg = sh_calloc(1, sizeof(*sg));
	if (sg == NULL)
		return NULL;
	sg->s = s;
	sg->g = grp;
	sg->gid = g;
	/* the first range once the cluster had a moment to settle */
	sg->next_ns = node_now_ns() + (uint64_t)s->ms * 1000000u;
	if (node_waiter_init(&sg->w) != SHOAL_OK) {
		sh_free(sg);
		return NULL;
	}
	sg->w_init = true;
	pthread_mutex_lock(&s->mu);
	set_peers(sg);
	pthread_mutex_unlock(&s->mu);
	__atomic_store_n(&s->groups[g], sg, __ATOMIC_RELEASE); /* node_scrub_told reads it */
	return sg;
}

int node_scrub_open(node *n, node_scrub **out, char *errmsg)
{
	*out = NULL;
	uint32_t ms = n->conf->scrub_set ? n->conf->scrub_ms : SH_SCRUB_MS;
	if (ms == 0 || n->ship == NULL)
		return SHOAL_OK; /* off (or no node-to-node lanes: tests) */
	node_scrub *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "scrub: out of memory");
	s->n = n;
	s->ms = ms;
	s->next_seq = node_next_batch_id(n); /* unique per process, as batch ids */
	pthread_mutex_init(&s->mu, NULL);
	s->groups = sh_calloc(sh_cluster_group_cap(n->conf), sizeof(*s->groups));
	if (s->groups == NULL)
		goto nomem;
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
		node_group *grp = node_group_get(n, g);
		if (grp != NULL && group_new(s, g, grp) == NULL)
			goto nomem;
	}
	*out = s;
	return SHOAL_OK;

nomem:
	node_scrub_free(s);
	return sh_errf(errmsg, SHOAL_E_NOMEM, "scrub: out of memory");
}

void node_scrub_close(node_scrub *s)
{
	if (s != NULL)
		s->closing = true;
}

void node_scrub_free(node_scrub *s)
{
	if (s == NULL)
		return;
	for (uint32_t g = 0; s->groups != NULL && g < sh_cluster_group_cap(s->n->conf); g++) {
		sc_group *sg = s->groups[g];
		if (sg == NULL)
			continue;
		if (sg->w_init)
			node_waiter_fini(&sg->w);
		sh_free(sg);
	}
	sh_free(s->groups);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
}

void node_scrub_metrics(node_scrub *s, node_appendf_fn appendf, void *buf)
{
	if (s == NULL)
		return;
	static const char *const names[][2] = {
	    {"shoal_scrub_ranges_total", "Scrub ranges compared across replicas (this node led)"},
	    {"shoal_scrub_keys_total", "Pairs in the scrub ranges compared"},
	    {"shoal_scrub_mismatches_total", "Scrub ranges whose replicas' checksums differed"},
	    {"shoal_scrub_passes_total", "Scrub passes over a group's whole key space"},
	    {"shoal_scrub_unanswered_total", "Replicas that gave no scrub result in time"},
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		appendf(buf, "# HELP %s %s\n# TYPE %s counter\n", names[k][0], names[k][1],
		        names[k][0]);
		for (uint32_t g = 0; g < sh_cluster_group_cap(s->n->conf); g++) {
			sc_group *sg = s->groups[g];
			if (sg == NULL)
				continue;
			atomic_uint_fast64_t *c[] = {&sg->ranges, &sg->keys, &sg->mismatches,
			                             &sg->passes, &sg->unanswered};
			appendf(buf, "%s{group=\"%u\"} %" PRIu64 "\n", names[k][0], g,
			        (uint64_t)atomic_load(c[k]));
		}
	}
}
