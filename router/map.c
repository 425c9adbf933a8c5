/*
 * map.c -- the cluster map the router routes with (rt->place), kept fresh
 * (contract: router.h "The cluster map").
 *
 * The refresher is one thread that sleeps on a condition variable: every
 * RT_MAP_EVERY_MS, or at once when poked (rt_map_poke: a NOT_LEADER that
 * names a node the map does not have as a voter of that group, a node that
 * could not be reached; rt_map_poke_moved: a WRONG_GROUP answer -- a
 * table's partition is being cut over), at most once per RT_MAP_MIN_MS
 * (RT_MAP_MOVED_MS after a WRONG_GROUP's), it asks a node for
 * map_get -- group 0's believed leader first (it applied every change),
 * then, if that one gives no map, the next node of the map in turn -- and
 * offers the answer.  Its call goes through the ordinary call machinery
 * (call.c, only_node: one attempt, the status timeout) and the thread waits
 * for it on the same condition variable.
 *
 *   state    event                                   next
 *   -------  --------------------------------------  --------
 *   SLEEP    poke (and RT_MAP_MIN_MS since the last)  ASK
 *   SLEEP    poke_moved (RT_MAP_MOVED_MS since)       ASK
 *   SLEEP    RT_MAP_EVERY_MS since the last           ASK
 *   ASK      an answer with a map (offered) or none   SLEEP
 *   any      the router stops (rt_map_stop)           (joined)
 *
 * Whatever offers a map (the refresher, an admin change's answer,
 * ClusterStatus) goes through rt_map_offer: sh_place_offer keeps only a
 * newer epoch, and every node the map names gets an rt_node
 * (rt_node_add, append-only) before the function returns, so a call routed
 * by the new map finds its node.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "router/router.h"

typedef struct rt_mapper {
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* poke, stop, the refresh call's end */
	bool poke;         /* mu */
	bool poke_moved;   /* mu: a WRONG_GROUP's poke (RT_MAP_MOVED_MS) */
	bool stop;         /* mu */
	bool call_done;    /* mu */
	uint32_t next;     /* the refresher's turn among the map's nodes */
	_Atomic uint64_t refreshes;
	pthread_mutex_t sleep_mu; /* the sleepers' list (not mu: offers come under it) */
	rt_call *sleepers;        /* rt_map_sleeper_add */
	/* How many are listed: while any is, the refresher asks every
	 * RT_MAP_MOVED_MS without waiting for the next WRONG_GROUP's poke
	 * (their pauses grow to RT_MOVED_MAX_MS, and so would its period). */
	_Atomic uint32_t n_sleepers;
} rt_mapper;

int rt_map_init(rt_router *rt, char *errmsg)
{
	int rc = sh_place_from_conf(rt->conf, &rt->place, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rt_mapper *m = sh_calloc(1, sizeof(*m));
	if (m == NULL)
		goto err_after_place;
	if (pthread_mutex_init(&m->mu, NULL) != 0)
		goto err_after_mapper;
	if (sh_cond_init_monotonic(&m->cv) != 0)
		goto err_after_mu;
	if (pthread_mutex_init(&m->sleep_mu, NULL) != 0)
		goto err_after_cv;
	atomic_init(&m->refreshes, 0);
	atomic_init(&m->n_sleepers, 0);
	rt->mapper = m;
	return SHOAL_OK;

err_after_cv:
	pthread_cond_destroy(&m->cv);
err_after_mu:
	pthread_mutex_destroy(&m->mu);
err_after_mapper:
	sh_free(m);
err_after_place:
	sh_place_free(rt->place);
	rt->place = NULL;
	return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: cannot set up its refresher");
}

void rt_map_fini(rt_router *rt)
{
	rt_map_stop(rt);
	if (rt->mapper != NULL) {
		pthread_cond_destroy(&rt->mapper->cv);
		pthread_mutex_destroy(&rt->mapper->mu);
		pthread_mutex_destroy(&rt->mapper->sleep_mu);
		sh_free(rt->mapper);
		rt->mapper = NULL;
	}
	sh_place_free(rt->place);
	rt->place = NULL;
}

uint64_t rt_map_refreshes(const rt_router *rt)
{
	return rt->mapper != NULL ? atomic_load(&rt->mapper->refreshes) : 0;
}

static void poke(rt_router *rt, bool moved)
{
	rt_mapper *m = rt->mapper;
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	m->poke = true;
	m->poke_moved |= moved;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

void rt_map_poke(rt_router *rt)
{
	poke(rt, false);
}

void rt_map_poke_moved(rt_router *rt)
{
	poke(rt, true);
}

/* Every node of the map gets an rt_node. */
static void sync_nodes(rt_router *rt)
{
	uint32_t ids[SH_MAX_NODES];
	uint32_t n = sh_place_nodes(rt->place, ids, SH_MAX_NODES);
	for (uint32_t i = 0; i < n && i < SH_MAX_NODES; i++) {
		if (rt_node_by_id(rt, ids[i]) != NULL)
			continue;
		sh_map_node mn;
		char msg[SH_ERRMSG_SIZE];
		if (!sh_place_node(rt->place, ids[i], &mn))
			continue;
		if (rt_node_add(rt, mn.id, mn.rpc, msg) == SHOAL_OK)
			rt_log("cluster map: node %u joined (rpc %s)", mn.id, mn.rpc);
		else if (!atomic_load(&rt->stopping))
			rt_log("cluster map: node %u: %s", mn.id, msg);
	}
	if (n > SH_MAX_NODES)
		rt_log("cluster map: %u nodes; this router serves the first %d", n, SH_MAX_NODES);
}

/* Unlinks c from the sleepers (sleep_mu held). */
static void sleeper_unlink(rt_mapper *m, rt_call *c)
{
	if (c->sleep_prev != NULL)
		c->sleep_prev->sleep_next = c->sleep_next;
	else
		m->sleepers = c->sleep_next;
	if (c->sleep_next != NULL)
		c->sleep_next->sleep_prev = c->sleep_prev;
	c->sleep_prev = c->sleep_next = NULL;
	c->listed = false;
	atomic_fetch_sub(&m->n_sleepers, 1);
}

void rt_map_sleeper_add(rt_router *rt, rt_call *c, uint64_t epoch, bool *now)
{
	rt_mapper *m = rt->mapper;
	pthread_mutex_lock(&m->sleep_mu);
	*now = sh_place_epoch(rt->place) > epoch;
	if (!*now) {
		c->sleep_prev = NULL;
		c->sleep_next = m->sleepers;
		if (m->sleepers != NULL)
			m->sleepers->sleep_prev = c;
		m->sleepers = c;
		c->listed = true;
		atomic_fetch_add(&m->n_sleepers, 1);
	}
	pthread_mutex_unlock(&m->sleep_mu);
}

void rt_map_sleeper_remove(rt_router *rt, rt_call *c)
{
	rt_mapper *m = rt->mapper;
	pthread_mutex_lock(&m->sleep_mu);
	if (c->listed)
		sleeper_unlink(m, c);
	pthread_mutex_unlock(&m->sleep_mu);
}

/* A newer map: the pauses waiting for one end now.  A timer aborted ends
 * its call as its expiry would (call.c timer_cb); the call stays valid
 * until then, since its callback takes sleep_mu before it ends it. */
static void wake_sleepers(rt_router *rt)
{
	rt_mapper *m = rt->mapper;
	uint64_t epoch = sh_place_epoch(rt->place);
	pthread_mutex_lock(&m->sleep_mu);
	for (rt_call *c = m->sleepers, *next; c != NULL; c = next) {
		next = c->sleep_next;
		if (c->wake_epoch >= epoch)
			continue;
		sleeper_unlink(m, c);
		nng_aio_abort(c->timer, NNG_ECANCELED);
	}
	pthread_mutex_unlock(&m->sleep_mu);
}

int rt_map_offer(rt_router *rt, const uint8_t *buf, size_t len, char *errmsg)
{
	int rc = sh_place_offer(rt->place, buf, len, errmsg);
	if (rc < 0 || rc > 1)
		return rc;
	if (rc == 1)
		rt_log("cluster map: epoch %" PRIu64 " installed", sh_place_epoch(rt->place));
	sync_nodes(rt);
	if (rc == 1)
		wake_sleepers(rt);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The refresher                                                             */
/* ------------------------------------------------------------------------ */

static void ask_done(rt_call *c)
{
	rt_mapper *m = c->rt->mapper;
	pthread_mutex_lock(&m->mu);
	m->call_done = true;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* map_get at one node; true when it answered with a map (offered). */
static bool ask(rt_router *rt, uint32_t node)
{
	rt_mapper *m = rt->mapper;
	rt_call c;
	sh_arena a;
	memset(&c, 0, sizeof(c));
	sh_arena_init(&a);
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.map_get = true;
	nr.map_known = sh_place_epoch(rt->place); /* answered with a map only if newer */
	uint8_t *buf;
	size_t len;
	char msg[SH_ERRMSG_SIZE];
	if (wire_pack(&a, &nr.base, &buf, &len, msg) != SHOAL_OK) {
		sh_arena_fini(&a);
		return false;
	}
	c.rt = rt;
	c.done = ask_done;
	c.group = 0;
	c.only_node = node;
	c.attempt_ms = rt->opt.status_ms;
	c.deadline = rt_now_ms() + rt->opt.status_ms;
	c.body = buf;
	c.body_len = len;
	pthread_mutex_lock(&m->mu);
	m->call_done = false;
	pthread_mutex_unlock(&m->mu);
	rt_call_start(&c);
	pthread_mutex_lock(&m->mu);
	while (!m->call_done)
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
	bool got = false;
	Shoal__NodeResponse *resp = c.rc == SHOAL_OK ? rt_call_resp(&c, &a) : NULL;
	if (resp != NULL && c.code == SHOAL_OK && resp->map.len > 0) {
		int rc = rt_map_offer(rt, resp->map.data, resp->map.len, msg);
		if (rc < 0)
			rt_log("cluster map from node %u: %s", node, msg);
		got = rc >= 0;
	} else if (resp != NULL && c.code == SHOAL_OK && resp->epoch != 0 &&
	           resp->epoch <= nr.map_known) {
		got = true;     /* nothing newer there */
		sync_nodes(rt); /* as an offer would: a node not added before is tried again */
	}
	rt_call_release(&c);
	sh_arena_fini(&a);
	return got;
}

static void refresh_once(rt_router *rt)
{
	rt_mapper *m = rt->mapper;
	uint32_t lead = atomic_load(&rt->leader[0]);
	if (lead != 0 && ask(rt, lead))
		goto out;
	uint32_t ids[SH_MAX_NODES];
	uint32_t n = sh_place_nodes(rt->place, ids, SH_MAX_NODES);
	n = n < SH_MAX_NODES ? n : SH_MAX_NODES;
	int64_t now = rt_now_ms();
	for (uint32_t k = 0; k < n && !atomic_load(&rt->stopping); k++) {
		uint32_t id = ids[m->next++ % n];
		rt_node *nd = rt_node_by_id(rt, id);
		if (id == lead || nd == NULL || atomic_load(&nd->down_until) > now)
			continue;
		ask(rt, id);
		break;
	}
out:
	atomic_fetch_add(&m->refreshes, 1);
}

static void *refresher(void *arg)
{
	rt_router *rt = arg;
	rt_mapper *m = rt->mapper;
	int64_t last = rt_now_ms();
	pthread_mutex_lock(&m->mu);
	while (!m->stop && !atomic_load(&rt->stopping)) {
		int64_t now = rt_now_ms();
		bool waited_for = atomic_load(&m->n_sleepers) > 0;
		int64_t due = last + (m->poke_moved || waited_for ? RT_MAP_MOVED_MS
		                      : m->poke                   ? RT_MAP_MIN_MS
		                                                  : RT_MAP_EVERY_MS);
		if (now < due) {
			struct timespec ts;
			sh_timespec_in(CLOCK_MONOTONIC, due - now, &ts);
			int rc = pthread_cond_timedwait(&m->cv, &m->mu, &ts);
			if (rc != 0 && rc != ETIMEDOUT)
				break;
			continue; /* poked, stopped or due: look again */
		}
		m->poke = m->poke_moved = false;
		pthread_mutex_unlock(&m->mu);
		refresh_once(rt);
		last = rt_now_ms();
		pthread_mutex_lock(&m->mu);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

int rt_map_start(rt_router *rt, char *errmsg)
{
	rt_mapper *m = rt->mapper;
	if (pthread_create(&m->thread, NULL, refresher, rt) != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "cluster map: cannot start its refresher");
	m->started = true;
	return SHOAL_OK;
}

void rt_map_stop(rt_router *rt)
{
	rt_mapper *m = rt->mapper;
	if (m == NULL || !m->started)
		return;
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	pthread_join(m->thread, NULL);
	m->started = false;
}
