/*
 * call.c -- the router's connections to the nodes, and calls: one request
 * to one storage group, with its attempts and retries (the state machine is
 * in router.h, above struct rt_call).
 *
 * One nng REQ socket per node, dialled with NNG_FLAG_NONBLOCK so that a node
 * that is down does not hold up startup (nng keeps redialling by itself).
 * The socket's resend time is 0: nng must never resend a request by itself
 * (a write could then be proposed twice); a lost connection fails the
 * attempt at once and the retry policy (common/retry.h) moves on.  On each
 * socket, lanes per class (proto/lanes.h): RT_LANES_READ for eventually
 * consistent reads, RT_LANES_WAIT for writes and consistent reads; the
 * requests queued for a node leave together as one NodeRequest batch.
 *
 * An attempt: the call's NodeRequest bytes go into the target node's lane
 * queue with the attempt's deadline (the call's, or now + attempt_ms if
 * sooner).  Its answer is checked (wire_check_framing) and read without
 * unpacking: the Response's status and the NOT_LEADER hint decide, with the
 * retry policy, whether the call is done or goes again.  Failed attempts
 * teach the leader cache (rt_note_failure) and count in the retry metrics.
 *
 * A call's done never runs inside rt_call_start: a failure found before
 * anything is sent comes back through the call's timer (a 0 ms sleep).
 */
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "router/router.h"

#include <nng/protocol/reqrep0/req.h>

#define RT_RECVMAXSZ (16u * 1024 * 1024)
/* How long a node that could not be reached is skipped by any-replica reads. */
#define RT_DOWN_MS 1000

enum call_state { CALL_IDLE = 0, CALL_ATTEMPT, CALL_BACKOFF, CALL_FAIL, CALL_DONE };

void rt_options_default(rt_options *o)
{
	o->contexts = 256;
	o->attempt_ms = 2000;
	o->send_ms = 500;
	o->deadline_ms = 10000;
	o->status_ms = 1000;
	o->http_workers = 4;
	o->http_head_ms = 10000;
	o->http_body_ms = 30000;
	o->http_body_rate = 500;
	o->https_handshakes = RT_HTTPD_HANDSHAKES_PEER;
}

/* ------------------------------------------------------------------------ */
/* The router's nodes                                                        */
/* ------------------------------------------------------------------------ */

static void fields_init(rt_fields *f)
{
	const ProtobufCMessageDescriptor *nreq = &shoal__node_request__descriptor;
	const ProtobufCMessageDescriptor *nresp = &shoal__node_response__descriptor;
	f->nreq_group = wire_field_number(nreq, "group");
	f->nreq_request = wire_field_number(nreq, "request");
	f->nreq_any_replica = wire_field_number(nreq, "any_replica");
	f->nreq_index_shard = wire_field_number(nreq, "index_shard");
	f->nreq_table_id = wire_field_number(nreq, "table_id");
	f->nreq_write_token = wire_field_number(nreq, "write_token");
	f->nreq_batch = wire_field_number(nreq, "batch");
	f->nresp_batch = wire_field_number(nresp, "batch");
	f->nresp_response = wire_field_number(nresp, "response");
	f->nresp_leader = wire_field_number(nresp, "leader_node");
	f->resp_status = wire_field_number(&shoal__response__descriptor, "status");
	f->req_batch = wire_field_number(&shoal__request__descriptor, "batch");
	f->resp_batch = wire_field_number(&shoal__response__descriptor, "batch");
}

void rt_new_id(rt_router *rt, uint8_t out[16])
{
	uint8_t in[24];
	uint64_t n = atomic_fetch_add_explicit(&rt->ids, 1, memory_order_relaxed);
	memcpy(in, rt->nonce, 16);
	memcpy(in + 16, &n, 8);
	XXH128_hash_t h = XXH3_128bits(in, sizeof(in));
	memcpy(out, &h.high64, 8);
	memcpy(out + 8, &h.low64, 8);
}

/* Counts and logs the router's connection to a node: nng calls REM_POST
 * for exactly the pipes it called ADD_PRE for (nng 1.5.2 pipe.c). */
static void conn_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	rt_node *n = arg;
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		atomic_fetch_add(&n->conns, 1);
		rt_log("connected to node %u (%s, connection %d)", n->id, n->url, nng_pipe_id(p));
	} else {
		atomic_fetch_sub(&n->conns, 1);
		rt_log("connection %d to node %u closed", nng_pipe_id(p), n->id);
	}
}

/*
 * A connection can stop carrying answers with no error on either side: a
 * node whose machine died without a reset (TCP retransmits for minutes
 * before giving up), a cut network, a stall anywhere under the pipe.  nng
 * keeps such a pipe and the dialer does not redial, so every request to the
 * node would time out for minutes.  The lanes' rule (proto/lanes.h,
 * "Stalled connections") calls this when the node's requests have failed
 * -- no answer, no room to send -- for WIRE_LANE_STALL_MS without one
 * answered: the dial keeper closes the connection, if there is one, and
 * dials again at once.  A live node is back within a connection's setup; a
 * node really gone costs a connection attempt every WIRE_LANE_STALL_MS.
 * Requests in flight on the closed connection end as a lost connection
 * (the retry policy's, as when a node restarts).  Any thread.
 */
static void node_renew(void *impl)
{
	rt_node *n = (rt_node *)(void *)((char *)impl - offsetof(rt_node, sock));
	if (atomic_load(&n->conns) > 0)
		rt_log("node %u: no answer for %d ms or more over its connection: closing it to "
		       "connect again",
		       n->id, WIRE_LANE_STALL_MS);
	sh_dial_renew(n->sock);
}

static int node_open(rt_router *rt, rt_node *n, char *errmsg)
{
	/* TLS: only node n->id's certificate answers as node n->id. */
	nng_tls_config *cfg = NULL;
	if (rt->tls != NULL && (cfg = sh_tls_client_for(rt->tls, n->id, errmsg)) == NULL)
		return SHOAL_E_INTERNAL;
	int nrv = nng_req0_open(&n->sock);
	if (nrv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_req0_open(node %u): %s", n->id,
		               nng_strerror(nrv));
	n->open = true;
	nrv = nng_socket_set_size(n->sock, NNG_OPT_RECVMAXSZ, RT_RECVMAXSZ);
	if (nrv == 0)
		nrv = nng_socket_set_ms(n->sock, NNG_OPT_REQ_RESENDTIME, 0);
	if (nrv == 0)
		nrv = nng_socket_set_ms(n->sock, NNG_OPT_RECONNMINT, 50);
	if (nrv == 0)
		nrv = nng_socket_set_ms(n->sock, NNG_OPT_RECONNMAXT, 1000);
	if (nrv == 0)
		nrv = nng_pipe_notify(n->sock, NNG_PIPE_EV_ADD_PRE, conn_cb, n);
	if (nrv == 0)
		nrv = nng_pipe_notify(n->sock, NNG_PIPE_EV_REM_POST, conn_cb, n);
	if (nrv == 0)
		nrv = sh_tls_dial(n->sock, n->url, cfg, NNG_FLAG_NONBLOCK);
	if (nrv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "node %u (%s): %s", n->id, n->url,
		               nng_strerror(nrv));
	wire_lane_nng_io(&n->io, &n->sock);
	n->io.renew = node_renew;
	static const uint32_t lanes[RT_CLASS__COUNT] = {RT_LANES_READ, RT_LANES_WAIT};
	for (int k = 0; k < RT_CLASS__COUNT; k++) {
		wire_lanes_conf lc = {.io = &n->io,
		                      .n_lanes = lanes[k],
		                      .max_items = RT_BATCH_MAX,
		                      .max_bytes = RT_BATCH_BYTES,
		                      .req_field = rt->f.nreq_batch,
		                      .resp_field = rt->f.nresp_batch,
		                      .send_ms = rt->opt.send_ms};
		int rc = wire_lanes_init(&n->lanes[k], &lc, errmsg);
		n->lanes_init[k] = true;
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static void node_close(rt_node *n)
{
	for (int k = 0; k < RT_CLASS__COUNT; k++)
		if (n->lanes_init[k])
			wire_lanes_close(&n->lanes[k]);
}

static void node_free(rt_node *n)
{
	if (n->open) {
		nng_close(n->sock);
		n->open = false;
	}
	for (int k = 0; k < RT_CLASS__COUNT; k++)
		if (n->lanes_init[k]) {
			wire_lanes_fini(&n->lanes[k]);
			n->lanes_init[k] = false;
		}
}

const char *rt_traffic_describe(const rt_router *rt)
{
	if (rt->tls != NULL)
		return "mutual TLS between routers and nodes and between nodes (Raft, RPC): "
		       "members hold a certificate of the cluster CA";
	return "WARNING: PLAIN: traffic between routers and nodes and between nodes is neither "
	       "encrypted nor authenticated (no [tls] in the cluster file)";
}

static void tls_warn(const char *msg)
{
	rt_log("%s", msg);
}

int rt_router_init(rt_router *rt, sh_cluster_conf *conf, const rt_options *o, char *errmsg)
{
	memset(rt, 0, sizeof(*rt));
	rt->conf = conf;
	rt->opt = *o;
	fields_init(&rt->f);
	atomic_init(&rt->busy, 0);
	atomic_init(&rt->n_nodes, 0);
	if (pthread_mutex_init(&rt->nodes_mu, NULL) != 0) {
		rt->conf = NULL;
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the nodes lock");
	}
	rt->nodes_mu_init = true;
	int rc = rt_map_init(rt, errmsg);
	if (rc != SHOAL_OK) {
		pthread_mutex_destroy(&rt->nodes_mu);
		rt->nodes_mu_init = false;
		rt->conf = NULL;
		return rc;
	}
	rc = rt_catalog_init(&rt->catalog);
	if (rc != SHOAL_OK) {
		rt_map_fini(rt);
		pthread_mutex_destroy(&rt->nodes_mu);
		rt->nodes_mu_init = false;
		rt->conf = NULL;
		return sh_errf(errmsg, rc, "catalog: cannot initialise it");
	}
	if (pthread_mutex_init(&rt->pool_mu, NULL) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the job pool lock");
		goto err_after_catalog;
	}
	rt->pool_init = true;
	/* Every group id a cluster file may allow, whatever this router's own
	 * max_groups: a router started with an older file still calls the
	 * groups the map has. */
	rt->leader = sh_calloc(SH_MAX_GROUPS, sizeof(*rt->leader));
	if (rt->leader == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_pool;
	}
	if (getrandom(rt->nonce, sizeof(rt->nonce), 0) != (ssize_t)sizeof(rt->nonce)) {
		/* No entropy (very early boot?): the clock and the pid. */
		uint64_t x[2] = {(uint64_t)sh_now_ns(),
		                 (uint64_t)getpid() ^ (uint64_t)rt_wall_ms()};
		memcpy(rt->nonce, x, sizeof(x));
	}
	for (uint32_t g = 0; g < SH_MAX_GROUPS; g++) {
		uint32_t reps[SH_MAX_REPLICATION];
		atomic_store(&rt->leader[g], rt_voters(rt, g, reps) > 0 ? reps[0] : 0);
	}
	if (conf->tls_dir[0] == '\0') {
		rt_log("router: no [tls] in the cluster file: traffic to the nodes is plain and "
		       "unauthenticated (deploy/certs.sh makes certificates)");
	} else {
		/* Shoal's engine under nng: dials reach nodes only, one record
		 * per message. */
		if ((rc = sh_tls_engine_register(tls_warn, errmsg)) != SHOAL_OK ||
		    (rc = sh_tls_load(&rt->tls_store, conf->tls_dir, "router", tls_warn, errmsg)) !=
		        SHOAL_OK)
			goto err_after_nodes;
		rt->tls = &rt->tls_store;
	}
	if ((rc = rt_txn_init(rt)) != SHOAL_OK) {
		sh_errf(errmsg, rc, "out of memory");
		goto err_after_nodes;
	}
	/* The map's nodes (the birth map's: the file's). */
	uint32_t ids[SH_MAX_NODES];
	uint32_t nn = sh_place_nodes(rt->place, ids, SH_MAX_NODES);
	for (uint32_t i = 0; i < nn && i < SH_MAX_NODES; i++) {
		sh_map_node mn;
		if (sh_place_node(rt->place, ids[i], &mn) &&
		    (rc = rt_node_add(rt, mn.id, mn.rpc, errmsg)) != SHOAL_OK)
			goto err_after_nodes;
	}
	if ((rc = rt_map_start(rt, errmsg)) != SHOAL_OK)
		goto err_after_nodes;
	return SHOAL_OK;

err_after_nodes:
	for (uint32_t i = 0; i < atomic_load(&rt->n_nodes); i++)
		node_close(&rt->nodes[i]);
	for (uint32_t i = 0; i < atomic_load(&rt->n_nodes); i++)
		node_free(&rt->nodes[i]);
	if (rt->tls != NULL)
		sh_tls_free(rt->tls);
	rt->tls = NULL;
	rt_txn_fini(rt);
	sh_free((void *)rt->leader);
err_after_pool:
	pthread_mutex_destroy(&rt->pool_mu);
	rt->pool_init = false;
err_after_catalog:
	rt_catalog_fini(&rt->catalog);
	rt_map_fini(rt);
	pthread_mutex_destroy(&rt->nodes_mu);
	rt->nodes_mu_init = false;
	rt->conf = NULL;
	return rc;
}

void rt_router_close(rt_router *rt)
{
	if (rt->conf == NULL)
		return;
	pthread_mutex_lock(&rt->nodes_mu);
	bool was = atomic_exchange(&rt->stopping, true);
	/* Calls in flight fail; calls in backoff find the lanes closed. */
	for (uint32_t i = 0; !was && i < atomic_load(&rt->n_nodes); i++)
		node_close(&rt->nodes[i]);
	pthread_mutex_unlock(&rt->nodes_mu);
	if (!was)
		rt_map_poke(rt); /* the refresher sees `stopping` */
}

void rt_router_fini(rt_router *rt)
{
	if (rt->conf == NULL)
		return;
	rt_router_close(rt);
	int64_t until = rt_now_ms() + 5000;
	while (atomic_load(&rt->busy) > 0 && rt_now_ms() < until)
		nng_msleep(5);
	if (atomic_load(&rt->busy) > 0)
		rt_log("router: %u requests still in progress at stop", atomic_load(&rt->busy));
	rt_map_stop(rt);
	for (uint32_t i = 0; i < atomic_load(&rt->n_nodes); i++)
		node_free(&rt->nodes[i]);
	for (rt_job *j = rt->pool, *next; j != NULL; j = next) {
		next = j->pool_next;
		sh_arena_fini(&j->arena);
		sh_free(j);
	}
	rt->pool = NULL;
	rt->n_pool = 0;
	if (rt->pool_init)
		pthread_mutex_destroy(&rt->pool_mu);
	rt->pool_init = false;
	sh_free((void *)rt->leader);
	rt->leader = NULL;
	if (rt->tls != NULL)
		sh_tls_free(rt->tls);
	rt->tls = NULL;
	rt_txn_fini(rt);
	rt_catalog_fini(&rt->catalog);
	rt_map_fini(rt);
	if (rt->nodes_mu_init)
		pthread_mutex_destroy(&rt->nodes_mu);
	rt->nodes_mu_init = false;
	sh_free(rt->conf);
	rt->conf = NULL;
}

rt_node *rt_node_by_id(rt_router *rt, uint32_t id)
{
	uint32_t n = atomic_load_explicit(&rt->n_nodes, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++)
		if (rt->nodes[i].id == id)
			return &rt->nodes[i];
	return NULL;
}

int rt_node_add(rt_router *rt, uint32_t id, const char *rpc, char *errmsg)
{
	int rc = SHOAL_OK;
	pthread_mutex_lock(&rt->nodes_mu);
	uint32_t n = atomic_load_explicit(&rt->n_nodes, memory_order_relaxed);
	if (rt_node_by_id(rt, id) != NULL)
		goto out;
	if (atomic_load(&rt->stopping)) {
		rc = sh_errf(errmsg, SHOAL_E_UNAVAILABLE, "node %u: the router is stopping", id);
		goto out;
	}
	if (n >= SH_MAX_NODES) {
		rc = sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED,
		             "node %u: the router serves at most %d nodes", id, SH_MAX_NODES);
		goto out;
	}
	/* Built in place past the published count: no reader looks there. */
	rt_node *nd = &rt->nodes[n];
	memset(nd, 0, sizeof(*nd));
	nd->id = id;
	if (!sh_tls_url(rt->tls != NULL, rpc, nd->url, sizeof(nd->url))) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u: URL too long: %s", id, rpc);
		memset(nd, 0, sizeof(*nd));
		goto out;
	}
	if ((rc = node_open(rt, nd, errmsg)) != SHOAL_OK) {
		node_close(nd);
		node_free(nd);
		memset(nd, 0, sizeof(*nd));
		goto out;
	}
	atomic_store_explicit(&rt->n_nodes, n + 1, memory_order_release);
out:
	pthread_mutex_unlock(&rt->nodes_mu);
	return rc;
}

uint32_t rt_voters(rt_router *rt, uint32_t group, uint32_t *nodes)
{
	uint32_t n = sh_place_voters(rt->place, group, nodes, SH_MAX_REPLICATION);
	return n < SH_MAX_REPLICATION ? n : SH_MAX_REPLICATION;
}

uint32_t rt_base_group(const rt_router *rt, uint32_t table_id, uint64_t h)
{
	return sh_place_route(rt->place, rt->conf, table_id, h);
}

uint32_t rt_gsi_group(const rt_router *rt, uint64_t h)
{
	return sh_place_route(rt->place, rt->conf, SH_MAP_GSI_SPACE, h);
}

uint32_t rt_group_of(const rt_router *rt, uint32_t table_id, const st_value *pk)
{
	return rt_base_group(rt, table_id, st_key_hash(table_id, pk));
}

uint32_t rt_data_groups(rt_router *rt, uint32_t *groups)
{
	uint32_t n = sh_place_data_groups(rt->place, groups, SH_MAX_GROUPS);
	return n < SH_MAX_GROUPS ? n : SH_MAX_GROUPS;
}

/* ------------------------------------------------------------------------ */
/* The leader cache                                                          */
/* ------------------------------------------------------------------------ */

static void set_leader(rt_router *rt, uint32_t group, uint32_t node)
{
	if (group >= SH_MAX_GROUPS || node == 0)
		return;
	uint32_t old = atomic_exchange(&rt->leader[group], node);
	if (old != node)
		atomic_fetch_add(&rt->metrics.leader_changes, 1);
}

static void mark_down(rt_router *rt, uint32_t node)
{
	rt_node *n = rt_node_by_id(rt, node);
	if (n != NULL)
		atomic_store(&n->down_until, rt_now_ms() + RT_DOWN_MS);
}

void rt_note_failure(rt_router *rt, uint32_t group, sh_outcome o, uint32_t tried, uint32_t hint)
{
	if (o == SH_OUT_UNREACHABLE) {
		mark_down(rt, tried);
		rt_map_poke(rt); /* removed from the map? */
	}
	if (o == SH_OUT_NOT_LEADER && hint != 0 && hint != tried) {
		if (sh_place_is_voter(rt->place, hint, group))
			set_leader(rt, group, hint);
		else
			rt_map_poke(rt); /* a leader the map does not know: it is old */
	}
}

void rt_note_answer(rt_router *rt, rt_node *node, uint32_t group, uint32_t from, bool any_replica)
{
	if (node != NULL && atomic_load_explicit(&node->down_until, memory_order_relaxed) != 0)
		atomic_store(&node->down_until, 0);
	if (!any_replica)
		set_leader(rt, group, from);
}

uint32_t rt_first_target(rt_router *rt, uint32_t group, bool any_replica, const uint32_t *reps,
                         uint32_t n)
{
	if (any_replica) {
		/* Eventually consistent reads go to the leader when it is known
		 * and up: it has applied every acknowledged write, while a
		 * follower learns the commit index only with the next heartbeat,
		 * so reading there would usually miss a write made a moment
		 * earlier.  Followers serve when the leader is unknown or down.
		 * (Leaders of different groups sit on different nodes, so reads
		 * still spread over the cluster.) */
		int64_t now = rt_now_ms();
		uint32_t leader = atomic_load(&rt->leader[group]);
		rt_node *ln = leader != 0 ? rt_node_by_id(rt, leader) : NULL;
		if (ln != NULL && atomic_load(&ln->down_until) <= now)
			return leader;
		uint32_t start = atomic_fetch_add(&rt->rr, 1) % n;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t id = reps[(start + k) % n];
			rt_node *node = rt_node_by_id(rt, id);
			if (node != NULL && atomic_load(&node->down_until) <= now)
				return id;
		}
		return reps[start];
	}
	return atomic_load(&rt->leader[group]);
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */
/* ------------------------------------------------------------------------ */

static void call_attempt(rt_call *c);

static void call_fail_later(rt_call *c, int rc);

static void call_finish(rt_call *c, int rc)
{
	if (atomic_load(&c->starting)) {
		call_fail_later(c, rc); /* not on rt_call_start's stack */
		return;
	}
	c->rc = rc;
	c->state = CALL_DONE;
	c->done(c); /* c is not touched after this */
}

static void timer_cb(void *arg)
{
	rt_call *c = arg;
	if (c->state == CALL_FAIL) {
		if (c->wake_on_map) /* expired, or ended by a newer map */
			rt_map_sleeper_remove(c->rt, c);
		c->state = CALL_DONE;
		c->done(c);
		return;
	}
	call_attempt(c); /* BACKOFF -> ATTEMPT */
}

/* Ends the call with rc/errmsg through its timer, off the caller's stack. */
static void call_fail_later(rt_call *c, int rc)
{
	c->rc = rc;
	c->state = CALL_FAIL;
	if (c->timer == NULL && nng_aio_alloc(&c->timer, timer_cb, c) != 0) {
		c->timer = NULL;
		call_finish(c, rc); /* out of memory: on this stack after all */
		return;
	}
	nng_sleep_aio(0, c->timer);
}

/* The attempt failed with outcome o (hint: a NOT_LEADER's leader): next
 * replica, at once or after a backoff, or the end of the call. */
static void call_failed(rt_call *c, sh_outcome o, uint32_t hint, const char *what)
{
	rt_router *rt = c->rt;
	uint32_t tried = c->retry.target;
	if (c->only_node != 0) {
		if (o == SH_OUT_UNREACHABLE)
			mark_down(rt, tried);
		sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE, "node %u: %s", tried, what);
		call_finish(c, SHOAL_E_UNAVAILABLE);
		return;
	}
	rt_note_failure(rt, c->group, o, tried, hint);
	/* A newer map since the call started: its retries go to the group's
	 * voters now (a hint names one of them). */
	uint64_t epoch = sh_place_epoch(rt->place);
	if (epoch != c->epoch) {
		uint32_t reps[SH_MAX_REPLICATION];
		uint32_t n = rt_voters(rt, c->group, reps);
		if (n > 0) {
			memcpy(c->retry.replicas, reps, n * sizeof(reps[0]));
			c->retry.n = n;
			c->retry.round = c->retry.round < n ? c->retry.round : 0;
		}
		c->epoch = epoch;
	}
	int64_t now = rt_now_ms();
	uint32_t delay;
	if (!sh_retry_next(&c->retry, o, hint, now, c->deadline, &delay)) {
		sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
		        "Service unavailable: storage group %u did not answer within the deadline "
		        "(%u attempts; last: node %u, %s)",
		        c->group, c->retry.attempts, tried, what);
		call_finish(c, SHOAL_E_UNAVAILABLE);
		return;
	}
	atomic_fetch_add(&rt->metrics.retries[o], 1);
	if (delay == 0) {
		call_attempt(c);
		return;
	}
	if (c->timer == NULL && nng_aio_alloc(&c->timer, timer_cb, c) != 0) {
		c->timer = NULL;
		sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a retry timer");
		call_finish(c, SHOAL_E_NOMEM);
		return;
	}
	c->state = CALL_BACKOFF;
	nng_sleep_aio((nng_duration)delay, c->timer);
}

/* What a NodeResponse says without unpacking it: the Response's status, its
 * presence, and the leader hint.  False if the bytes do not parse, or carry
 * the Response in more than one piece: a node packs it once, and protobuf-c
 * merges pieces otherwise than "the last status counts" (fuzz_node_response
 * found an answer whose status was an error here and OK once unpacked). */
static bool read_answer(const rt_fields *f, const uint8_t *buf, size_t len, int *code,
                        bool *has_response, uint32_t *leader)
{
	const uint8_t *p = buf, *end = buf + len, *resp = NULL;
	size_t rlen = 0;
	wire_field fl;
	*leader = 0;
	*code = SHOAL_OK;
	*has_response = false;
	while (p < end) {
		if (!wire_next_field(&p, end, &fl))
			return false;
		if (fl.type == 0 && fl.number == f->nresp_leader)
			*leader = (uint32_t)fl.value;
		if (fl.type == 2 && fl.number == f->nresp_response) {
			if (*has_response)
				return false;
			resp = fl.data;
			rlen = fl.len;
			*has_response = true;
			const uint8_t *q = resp, *qend = resp + rlen;
			wire_field g;
			while (q < qend) {
				if (!wire_next_field(&q, qend, &g))
					return false;
				if (g.type == 0 && g.number == f->resp_status)
					*code = wire_code_from_status((int)g.value);
			}
		}
	}
	return true;
}

/* The lane's end of an attempt.  Any thread. */
static void item_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	rt_call *c = (rt_call *)it;
	rt_router *rt = c->rt;
	uint32_t from = c->retry.target;
	rt_node *n = rt_node_by_id(rt, from);
	if (rv != WIRE_LANE_OK) {
		switch (rv) {
		case WIRE_LANE_TIMEOUT:
			call_failed(c, SH_OUT_TIMEOUT, 0, "timed out");
			return;
		case WIRE_LANE_BAD:
			call_failed(c, SH_OUT_BAD_ANSWER, 0,
			            "a batch answer without this request's");
			return;
		case WIRE_LANE_CLOSED:
			sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
			        "Service unavailable: the router is stopping");
			call_finish(c, SHOAL_E_UNAVAILABLE);
			return;
		case WIRE_LANE_NOMEM:
			sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a node request");
			call_finish(c, SHOAL_E_NOMEM);
			return;
		default:
			call_failed(c, SH_OUT_UNREACHABLE, 0,
			            rv == WIRE_LANE_RESET ? "connection lost" : "unreachable");
			return;
		}
	}
	char msg[SH_ERRMSG_SIZE];
	int code;
	bool has_response;
	uint32_t leader;
	if (wire_check_framing(&shoal__node_response__descriptor, ans, len, msg) != SHOAL_OK ||
	    !read_answer(&rt->f, ans, len, &code, &has_response, &leader)) {
		if (whole != NULL)
			nng_msg_free(whole);
		rt_log("node %u, group %u: bad answer: %s", from, c->group, msg);
		call_failed(c, SH_OUT_BAD_ANSWER, 0, "an answer that does not decode");
		return;
	}
	if (c->only_node == 0 && c->idempotent && code == SHOAL_E_OUTCOME_UNKNOWN) {
		/* Proposed, then leadership was lost: sent again, the write is
		 * applied once (its token) -- or answered as it was. */
		if (whole != NULL)
			nng_msg_free(whole);
		call_failed(c, SH_OUT_NOT_LEADER, leader, "outcome unknown (leadership lost)");
		return;
	}
	if (c->only_node == 0 && (code == SHOAL_E_NOT_LEADER || code == SHOAL_E_UNAVAILABLE)) {
		if (whole != NULL)
			nng_msg_free(whole);
		call_failed(c, code == SHOAL_E_NOT_LEADER ? SH_OUT_NOT_LEADER : SH_OUT_UNAVAILABLE,
		            leader, code == SHOAL_E_NOT_LEADER ? "not the leader" : "unavailable");
		return;
	}
	if (code == SHOAL_E_WRONG_GROUP) {
		/* The group does not serve the range any more (a partition
		 * moved): an answer, which the job retries after a new map
		 * (job.c); the map is asked for now. */
		atomic_fetch_add(&rt->metrics.wrong_group, 1);
		rt_map_poke_moved(rt);
	}
	rt_note_answer(rt, n, c->group, from, c->only_node != 0 || c->any_replica);
	if (whole == NULL) {
		if (nng_msg_alloc(&whole, len) != 0) {
			sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a node's answer");
			call_finish(c, SHOAL_E_NOMEM);
			return;
		}
		memcpy(nng_msg_body(whole), ans, len);
	}
	c->ans = whole;
	c->code = code;
	c->has_response = has_response;
	c->answered_by = from;
	call_finish(c, SHOAL_OK);
}

/* One attempt at c->retry.target. */
static void call_attempt(rt_call *c)
{
	rt_router *rt = c->rt;
	rt_node *n = rt_node_by_id(rt, c->retry.target);
	c->state = CALL_ATTEMPT;
	if (c->body == NULL && c->hdr_len == 0) {
		sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a node request");
		call_fail_later(c, SHOAL_E_NOMEM);
		return;
	}
	if (n == NULL || !n->open) {
		call_failed(c, SH_OUT_UNREACHABLE, 0, "no such node");
		return;
	}
	c->node = n;
	int64_t now = rt_now_ms();
	uint32_t attempt = c->attempt_ms != 0 ? c->attempt_ms : rt->opt.attempt_ms;
	c->item.part[0] = c->hdr;
	c->item.len[0] = c->hdr_len;
	c->item.part[1] = c->body;
	c->item.len[1] = c->body_len;
	c->item.deadline = now + attempt < c->deadline ? now + attempt : c->deadline;
	c->item.done = item_done;
	wire_lanes *l = &n->lanes[c->any_replica ? RT_CLASS_READ : RT_CLASS_WAIT];
	if (wire_lanes_submit(l, &c->item) != SHOAL_OK) {
		sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
		        "Service unavailable: the router is stopping");
		call_fail_later(c, SHOAL_E_UNAVAILABLE);
	}
}

void rt_call_start(rt_call *c)
{
	rt_router *rt = c->rt;
	c->rc = SHOAL_OK;
	c->errmsg[0] = '\0';
	c->ans = NULL;
	c->resp = NULL;
	c->code = SHOAL_OK;
	c->has_response = false;
	c->answered_by = 0;
	if (c->group >= SH_MAX_GROUPS) {
		sh_errf(c->errmsg, SHOAL_E_INTERNAL, "no storage group %u", c->group);
		call_fail_later(c, SHOAL_E_INTERNAL);
		return;
	}
	if (c->sleep_ms != 0) {
		/* A pause in the job's wave: done, successfully, after it. */
		c->state = CALL_FAIL;
		if (c->timer == NULL && nng_aio_alloc(&c->timer, timer_cb, c) != 0) {
			c->timer = NULL;
			sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a timer");
			c->rc = SHOAL_E_NOMEM;
			c->state = CALL_DONE;
			c->done(c);
			return;
		}
		bool now = false;
		if (c->wake_on_map) /* listed before its timer starts: see map.c */
			rt_map_sleeper_add(rt, c, c->wake_epoch, &now);
		nng_sleep_aio(now ? 0 : (nng_duration)c->sleep_ms, c->timer);
		return;
	}
	uint32_t reps[SH_MAX_REPLICATION];
	uint32_t nrep;
	uint32_t first;
	if (c->only_node != 0) {
		reps[0] = c->only_node;
		nrep = 1;
		first = c->only_node;
	} else {
		c->epoch = sh_place_epoch(rt->place);
		nrep = rt_voters(rt, c->group, reps);
		if (nrep == 0) {
			sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
			        "Service unavailable: storage group %u has no voter in the cluster "
			        "map (epoch %llu)",
			        c->group, (unsigned long long)c->epoch);
			call_fail_later(c, SHOAL_E_UNAVAILABLE);
			return;
		}
		first = rt_first_target(rt, c->group, c->any_replica, reps, nrep);
	}
	sh_retry_init(&c->retry, reps, nrep, first, RT_BACKOFF_MIN_MS, RT_BACKOFF_MAX_MS);
	/* A call that ends while this runs (no node, no time left) ends
	 * through its timer instead: call_finish sees `starting`. */
	atomic_store(&c->starting, true);
	call_attempt(c);
	atomic_store(&c->starting, false);
}

/* A call that no job waits for (rt_call_detached): it owns its memory. */
typedef struct detached {
	rt_call c;
	sh_arena a;
} detached;

static void detached_done(rt_call *c)
{
	detached *d = (detached *)c;
	rt_router *rt = c->rt;
	int code = c->rc != SHOAL_OK ? c->rc : c->code;
	if (code != SHOAL_OK && code != SHOAL_E_UNAVAILABLE)
		rt_log("group %u: a detached call failed: %s: %s", c->group, shoal_err_name(code),
		       c->rc != SHOAL_OK ? c->errmsg : "refused");
	rt_call_release(c);
	sh_arena_fini(&d->a);
	sh_free(d);
	atomic_fetch_sub(&rt->busy, 1);
}

int rt_call_detached(rt_router *rt, uint32_t group, Shoal__NodeRequest *nr, uint32_t ms)
{
	if (atomic_load(&rt->stopping))
		return SHOAL_E_UNAVAILABLE;
	detached *d = sh_calloc(1, sizeof(*d));
	if (d == NULL)
		return SHOAL_E_NOMEM;
	sh_arena_init(&d->a);
	nr->group = group;
	uint8_t *buf;
	size_t len;
	char msg[SH_ERRMSG_SIZE];
	if (wire_pack(&d->a, &nr->base, &buf, &len, msg) != SHOAL_OK) {
		sh_arena_fini(&d->a);
		sh_free(d);
		return SHOAL_E_NOMEM;
	}
	rt_call *c = &d->c;
	c->rt = rt;
	c->done = detached_done;
	c->group = group;
	c->idempotent = true;
	c->deadline = rt_now_ms() + ms;
	c->body = buf;
	c->body_len = len;
	atomic_fetch_add(&rt->busy, 1);
	rt_call_start(c);
	return SHOAL_OK;
}

Shoal__NodeResponse *rt_call_resp(rt_call *c, sh_arena *a)
{
	if (c->resp != NULL || c->rc != SHOAL_OK || c->ans == NULL)
		return c->resp;
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	char why[SH_ERRMSG_SIZE];
	if (wire_unpack_node_response(&alloc, nng_msg_body(c->ans), nng_msg_len(c->ans), &c->resp,
	                              why) != SHOAL_OK) {
		sh_errf(c->errmsg, SHOAL_E_INTERNAL, "node %u: undecodable NodeResponse: %s",
		        c->answered_by, why);
		c->rc = SHOAL_E_INTERNAL;
	}
	return c->resp;
}

void rt_call_release(rt_call *c)
{
	if (c->ans != NULL) {
		nng_msg_free(c->ans);
		c->ans = NULL;
	}
	if (c->timer != NULL) {
		nng_aio_reap(c->timer);
		c->timer = NULL;
	}
	c->resp = NULL;
	c->state = CALL_IDLE;
}
