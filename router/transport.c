/*
 * transport.c -- the router's connections to the nodes and rt_call_all.
 *
 * One nng REQ socket per node, dialled with NNG_FLAG_NONBLOCK so that a node
 * that is down does not hold up startup (nng keeps redialling by itself).
 * Each attempt uses its own REQ context on the node's socket: contexts let
 * any number of requests share one connection, and closing the context
 * cancels whatever is left of the attempt.  Contexts and aios are pooled
 * (ctx_get/ctx_put per node, aio_get/aio_put per router, each under a
 * mutex held for a few instructions): a context goes back to its node's
 * pool only after its attempt got a reply (nothing is outstanding on it
 * then); a context whose attempt got no reply (send failure, timeout,
 * reset) is closed, as before, which cancels what is left of it.  The socket's resend time is 0:
 * nng must never resend a request by itself (a write could then be proposed
 * twice); instead, when the connection drops, the outstanding receive fails
 * with NNG_ECONNRESET at once and the retry policy moves on.
 *
 * rt_call_all runs many calls in parallel on the calling worker thread
 * without callbacks, in rounds:
 *
 *   state      event                          next       (function)
 *   IDLE       due (not_before <= now)        SENDING    attempt_send
 *   SENDING    send aio ok                    RECEIVING  attempt_recv
 *   SENDING    send aio failed / timed out    IDLE|DONE  attempt_failed(UNREACHABLE)
 *   RECEIVING  answer NOT_LEADER/UNAVAILABLE  IDLE|DONE  attempt_failed(...)
 *   RECEIVING  other answer                   DONE       attempt_answered
 *   RECEIVING  timeout / reset / bad bytes    IDLE|DONE  attempt_failed(...)
 *
 * A round starts every due call's send, then waits for each send, starts
 * the receives, then waits for each receive, so the calls of a round travel
 * together; between rounds the thread sleeps until the earliest backoff ends.
 * attempt_failed asks retry.c for the next target and delay, and ends the
 * call with ServiceUnavailable when the deadline does not allow another.
 */
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

#include <nng/protocol/reqrep0/req.h>

#define RT_RECVMAXSZ (16u * 1024 * 1024)

enum call_state { CS_IDLE = 0, CS_SENDING, CS_RECEIVING, CS_DONE };

void rt_options_default(rt_options *o)
{
	o->workers = 64;
	o->contexts = 256;
	o->fast_path = true;
	o->attempt_ms = 2000;
	o->send_ms = 500;
	o->deadline_ms = 10000;
	o->status_ms = 1000;
}

int rt_router_init(rt_router *rt, sh_cluster_conf *conf, const rt_options *o, char *errmsg)
{
	memset(rt, 0, sizeof(*rt));
	rt->conf = conf;
	rt->opt = *o;
	int rc = rt_catalog_init(&rt->catalog);
	if (rc != SHOAL_OK) {
		rt->conf = NULL;
		return sh_errf(errmsg, rc, "catalog: cannot initialise its locks");
	}
	if (pthread_mutex_init(&rt->aio_mu, NULL) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise the aio pool lock");
		goto err_after_catalog;
	}
	rt->aio_mu_init = true;
	rt->leader = sh_calloc(conf->groups, sizeof(*rt->leader));
	if (rt->leader == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_aio_mu;
	}
	for (uint32_t g = 0; g < conf->groups; g++) {
		uint32_t reps[SH_MAX_REPLICATION];
		sh_cluster_replicas(conf, g, reps);
		atomic_store(&rt->leader[g], reps[0]);
	}
	for (uint32_t i = 0; i < conf->n_nodes; i++) {
		rt_node *n = &rt->nodes[i];
		n->id = conf->nodes[i].id;
		snprintf(n->url, sizeof(n->url), "%s", conf->nodes[i].rpc);
		if (pthread_mutex_init(&n->pool_mu, NULL) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot initialise a pool lock");
			goto err_after_sockets;
		}
		n->pool_init = true;
		int nrv = nng_req0_open(&n->sock);
		if (nrv != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_req0_open(node %u): %s", n->id,
			             nng_strerror(nrv));
			goto err_after_sockets;
		}
		n->open = true;
		nrv = nng_socket_set_size(n->sock, NNG_OPT_RECVMAXSZ, RT_RECVMAXSZ);
		if (nrv == 0)
			nrv = nng_socket_set_ms(n->sock, NNG_OPT_REQ_RESENDTIME, 0);
		if (nrv == 0)
			nrv = nng_socket_set_ms(n->sock, NNG_OPT_RECONNMINT, 50);
		if (nrv == 0)
			nrv = nng_socket_set_ms(n->sock, NNG_OPT_RECONNMAXT, 1000);
		if (nrv == 0)
			nrv = nng_dial(n->sock, n->url, NULL, NNG_FLAG_NONBLOCK);
		if (nrv != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "node %u (%s): %s", n->id, n->url,
			             nng_strerror(nrv));
			goto err_after_sockets;
		}
	}
	return SHOAL_OK;

err_after_sockets:
	for (uint32_t i = 0; i < conf->n_nodes; i++) {
		if (rt->nodes[i].open)
			nng_close(rt->nodes[i].sock);
		if (rt->nodes[i].pool_init)
			pthread_mutex_destroy(&rt->nodes[i].pool_mu);
	}
	sh_free((void *)rt->leader);
err_after_aio_mu:
	pthread_mutex_destroy(&rt->aio_mu);
	rt->aio_mu_init = false;
err_after_catalog:
	rt_catalog_fini(&rt->catalog);
	rt->conf = NULL;
	return rc;
}

void rt_router_fini(rt_router *rt)
{
	if (rt->conf == NULL)
		return;
	for (uint32_t i = 0; i < rt->conf->n_nodes; i++) {
		rt_node *n = &rt->nodes[i];
		for (uint32_t k = 0; k < n->n_pool; k++)
			nng_ctx_close(n->pool[k]);
		n->n_pool = 0;
		if (n->open) {
			nng_close(n->sock);
			n->open = false;
		}
		if (n->pool_init) {
			pthread_mutex_destroy(&n->pool_mu);
			n->pool_init = false;
		}
	}
	for (uint32_t k = 0; k < rt->n_aio_pool; k++)
		nng_aio_free(rt->aio_pool[k]);
	rt->n_aio_pool = 0;
	if (rt->aio_mu_init) {
		pthread_mutex_destroy(&rt->aio_mu);
		rt->aio_mu_init = false;
	}
	sh_free((void *)rt->leader);
	rt->leader = NULL;
	rt_catalog_fini(&rt->catalog);
	sh_free(rt->conf);
	rt->conf = NULL;
}

int rt_resp_code(const Shoal__NodeResponse *resp)
{
	if (resp == NULL || resp->response == NULL)
		return SHOAL_OK;
	return wire_code_from_status((int)resp->response->status);
}

rt_node *rt_node_by_id(rt_router *rt, uint32_t id)
{
	for (uint32_t i = 0; i < rt->conf->n_nodes; i++)
		if (rt->nodes[i].id == id)
			return &rt->nodes[i];
	return NULL;
}

static void set_leader(rt_router *rt, uint32_t group, uint32_t node)
{
	if (group >= rt->conf->groups || node == 0)
		return;
	uint32_t old = atomic_exchange(&rt->leader[group], node);
	if (old != node)
		atomic_fetch_add(&rt->metrics.leader_changes, 1);
}

/* A context on node n's socket: an idle pooled one, or a new one.  Any
 * thread. */
int rt_node_ctx_get(rt_node *n, nng_ctx *out)
{
	pthread_mutex_lock(&n->pool_mu);
	if (n->n_pool > 0) {
		*out = n->pool[--n->n_pool];
		pthread_mutex_unlock(&n->pool_mu);
		return 0;
	}
	pthread_mutex_unlock(&n->pool_mu);
	return nng_ctx_open(out, n->sock);
}

/* Returns an idle context (its last request was answered) to n's pool, or
 * closes it when the pool is full. */
void rt_node_ctx_put(rt_node *n, nng_ctx ctx)
{
	bool kept = false;
	pthread_mutex_lock(&n->pool_mu);
	if (n->n_pool < RT_POOL_MAX) {
		n->pool[n->n_pool++] = ctx;
		kept = true;
	}
	pthread_mutex_unlock(&n->pool_mu);
	if (!kept)
		nng_ctx_close(ctx);
}

static int aio_get(rt_router *rt, nng_aio **out)
{
	pthread_mutex_lock(&rt->aio_mu);
	if (rt->n_aio_pool > 0) {
		*out = rt->aio_pool[--rt->n_aio_pool];
		pthread_mutex_unlock(&rt->aio_mu);
		return 0;
	}
	pthread_mutex_unlock(&rt->aio_mu);
	return nng_aio_alloc(out, NULL, NULL);
}

/* aio must be idle (waited for) and hold no message. */
static void aio_put(rt_router *rt, nng_aio *aio)
{
	pthread_mutex_lock(&rt->aio_mu);
	if (rt->n_aio_pool < RT_POOL_MAX) {
		rt->aio_pool[rt->n_aio_pool++] = aio;
		aio = NULL;
	}
	pthread_mutex_unlock(&rt->aio_mu);
	if (aio != NULL)
		nng_aio_free(aio);
}

static void close_ctx(rt_call *c)
{
	if (c->ctx_open) {
		nng_ctx_close(c->ctx);
		c->ctx_open = false;
	}
}

static void finish(rt_call *c, int rc)
{
	close_ctx(c);
	c->rc = rc;
	c->state = CS_DONE;
}

/* How long a node that could not be reached is skipped by any-replica reads. */
#define RT_DOWN_MS 1000

static void mark_down(rt_router *rt, uint32_t node)
{
	rt_node *n = rt_node_by_id(rt, node);
	if (n != NULL)
		atomic_store(&n->down_until, rt_now_ms() + RT_DOWN_MS);
}

void rt_note_failure(rt_router *rt, uint32_t group, rt_outcome o, uint32_t tried, uint32_t hint)
{
	if (o == RT_OUT_UNREACHABLE)
		mark_down(rt, tried);
	if (o == RT_OUT_NOT_LEADER && hint != 0 && hint != tried &&
	    sh_cluster_hosts(rt->conf, hint, group))
		set_leader(rt, group, hint);
}

void rt_note_answer(rt_router *rt, uint32_t group, uint32_t from, bool any_replica)
{
	rt_node *node = rt_node_by_id(rt, from);
	if (node != NULL && atomic_load_explicit(&node->down_until, memory_order_relaxed) != 0)
		atomic_store(&node->down_until, 0);
	if (!any_replica)
		set_leader(rt, group, from);
}

static void attempt_failed(rt_router *rt, rt_call *c, rt_outcome o, uint32_t hint, const char *what,
                           int64_t deadline)
{
	close_ctx(c);
	uint32_t tried = c->retry.target;
	if (c->only_node != 0) {
		if (o == RT_OUT_UNREACHABLE)
			mark_down(rt, tried);
		sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE, "node %u: %s", tried, what);
		finish(c, SHOAL_E_UNAVAILABLE);
		return;
	}
	rt_note_failure(rt, c->group, o, tried, hint);
	int64_t now = rt_now_ms();
	uint32_t delay;
	if (!rt_retry_next(&c->retry, o, hint, now, deadline, &delay)) {
		sh_errf(c->errmsg, SHOAL_E_UNAVAILABLE,
		        "Service unavailable: storage group %u did not answer within the deadline "
		        "(%u attempts; last: node %u, %s)",
		        c->group, c->retry.attempts, tried, what);
		finish(c, SHOAL_E_UNAVAILABLE);
		return;
	}
	atomic_fetch_add(&rt->metrics.retries[o], 1);
	c->not_before = now + delay;
	c->state = CS_IDLE;
}

static void attempt_send(rt_router *rt, rt_call *c, int64_t deadline)
{
	rt_node *n = rt_node_by_id(rt, c->retry.target);
	int nrv;
	if (n == NULL || !n->open) {
		attempt_failed(rt, c, RT_OUT_UNREACHABLE, 0, "no such node", deadline);
		return;
	}
	if ((nrv = rt_node_ctx_get(n, &c->ctx)) != 0) {
		attempt_failed(rt, c, RT_OUT_UNREACHABLE, 0, nng_strerror(nrv), deadline);
		return;
	}
	c->ctx_open = true;
	c->ctx_node = n;
	nng_msg *m;
	if ((nrv = nng_msg_alloc(&m, c->len)) != 0) {
		sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory for a node request");
		finish(c, SHOAL_E_NOMEM);
		return;
	}
	memcpy(nng_msg_body(m), c->buf, c->len);
	int64_t left = deadline - rt_now_ms();
	if (left < 1)
		left = 1;
	nng_aio_set_msg(c->aio, m);
	nng_aio_set_timeout(c->aio,
	                    (nng_duration)(left < rt->opt.send_ms ? left : rt->opt.send_ms));
	nng_ctx_send(c->ctx, c->aio);
	c->state = CS_SENDING;
}

static void attempt_recv(rt_router *rt, rt_call *c, int64_t deadline)
{
	int nrv = nng_aio_result(c->aio);
	if (nrv != 0) {
		nng_msg *m = nng_aio_get_msg(c->aio);
		if (m != NULL)
			nng_msg_free(m);
		nng_aio_set_msg(c->aio, NULL);
		attempt_failed(rt, c, RT_OUT_UNREACHABLE, 0, nng_strerror(nrv), deadline);
		return;
	}
	int64_t left = deadline - rt_now_ms();
	if (left < 1)
		left = 1;
	nng_aio_set_timeout(c->aio,
	                    (nng_duration)(left < rt->opt.attempt_ms ? left : rt->opt.attempt_ms));
	nng_ctx_recv(c->ctx, c->aio);
	c->state = CS_RECEIVING;
}

static void attempt_answered(rt_router *rt, sh_arena *a, rt_call *c, int64_t deadline)
{
	int nrv = nng_aio_result(c->aio);
	if (nrv != 0) {
		attempt_failed(rt, c, nrv == NNG_ETIMEDOUT ? RT_OUT_TIMEOUT : RT_OUT_UNREACHABLE, 0,
		               nng_strerror(nrv), deadline);
		return;
	}
	nng_msg *m = nng_aio_get_msg(c->aio);
	nng_aio_set_msg(c->aio, NULL);
	char msg[SH_ERRMSG_SIZE];
	Shoal__NodeResponse *resp = NULL;
	int rc = wire_check_framing(&shoal__node_response__descriptor, nng_msg_body(m),
	                            nng_msg_len(m), msg);
	if (rc == SHOAL_OK) {
		ProtobufCAllocator alloc;
		wire_arena_allocator(&alloc, a);
		resp = shoal__node_response__unpack(&alloc, nng_msg_len(m), nng_msg_body(m));
		if (resp == NULL)
			snprintf(msg, sizeof(msg), "undecodable NodeResponse");
	}
	nng_msg_free(m);
	/* A reply came: nothing is outstanding on the context; keep it. */
	if (c->ctx_open && c->ctx_node != NULL) {
		rt_node_ctx_put(c->ctx_node, c->ctx);
		c->ctx_open = false;
	}
	uint32_t from = c->retry.target;
	if (resp == NULL) {
		rt_log("node %u, group %u: bad answer: %s", from, c->group, msg);
		attempt_failed(rt, c, RT_OUT_BAD_ANSWER, 0, msg, deadline);
		return;
	}
	int code = rt_resp_code(resp);
	if (c->only_node == 0 && code == SHOAL_E_NOT_LEADER) {
		attempt_failed(rt, c, RT_OUT_NOT_LEADER, resp->leader_node, "not the leader",
		               deadline);
		return;
	}
	if (c->only_node == 0 && code == SHOAL_E_UNAVAILABLE) {
		attempt_failed(rt, c, RT_OUT_UNAVAILABLE, 0,
		               resp->response->message != NULL ? resp->response->message
		                                               : "unavailable",
		               deadline);
		return;
	}
	rt_note_answer(rt, c->group, from, c->only_node != 0 || c->any_replica);
	c->resp = resp;
	c->answered_by = from;
	finish(c, SHOAL_OK);
}

static uint32_t first_target(rt_router *rt, const rt_call *c, const uint32_t *reps, uint32_t n)
{
	if (c->only_node != 0)
		return c->only_node;
	return rt_first_target(rt, c->group, c->any_replica, reps, n);
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

void rt_call_all(rt_router *rt, sh_arena *a, rt_call *calls, uint32_t n, int64_t deadline)
{
	uint32_t pending = 0;
	for (uint32_t i = 0; i < n; i++) {
		rt_call *c = &calls[i];
		c->rc = SHOAL_OK;
		c->resp = NULL;
		c->answered_by = 0;
		c->errmsg[0] = '\0';
		c->aio = NULL;
		c->ctx_open = false;
		c->ctx_node = NULL;
		c->not_before = 0;
		c->state = CS_IDLE;
		if (c->group >= rt->conf->groups) {
			sh_errf(c->errmsg, SHOAL_E_INTERNAL, "no storage group %u", c->group);
			c->rc = SHOAL_E_INTERNAL;
			c->state = CS_DONE;
			continue;
		}
		uint32_t reps[SH_MAX_REPLICATION];
		sh_cluster_replicas(rt->conf, c->group, reps);
		uint32_t nrep = rt->conf->replication;
		if (c->only_node != 0) {
			reps[0] = c->only_node;
			nrep = 1;
		}
		rt_retry_init(&c->retry, reps, nrep, first_target(rt, c, reps, nrep));
		c->req->group = c->group;
		c->req->any_replica = c->any_replica;
		int rc = wire_pack(a, &c->req->base, &c->buf, &c->len, c->errmsg);
		if (rc == SHOAL_OK && aio_get(rt, &c->aio) != 0) {
			c->aio = NULL;
			rc = sh_errf(c->errmsg, SHOAL_E_NOMEM, "out of memory (nng_aio)");
		}
		if (rc != SHOAL_OK) {
			c->rc = rc;
			c->state = CS_DONE;
			continue;
		}
		pending++;
	}

	while (pending > 0) {
		int64_t now = rt_now_ms();
		for (uint32_t i = 0; i < n; i++)
			if (calls[i].state == CS_IDLE && calls[i].not_before <= now)
				attempt_send(rt, &calls[i], deadline);
		for (uint32_t i = 0; i < n; i++)
			if (calls[i].state == CS_SENDING) {
				nng_aio_wait(calls[i].aio);
				attempt_recv(rt, &calls[i], deadline);
			}
		for (uint32_t i = 0; i < n; i++)
			if (calls[i].state == CS_RECEIVING) {
				nng_aio_wait(calls[i].aio);
				attempt_answered(rt, a, &calls[i], deadline);
			}
		pending = 0;
		int64_t wake = INT64_MAX;
		for (uint32_t i = 0; i < n; i++)
			if (calls[i].state != CS_DONE) {
				pending++;
				if (calls[i].not_before < wake)
					wake = calls[i].not_before;
			}
		now = rt_now_ms();
		if (pending > 0 && wake > now)
			nng_msleep((nng_duration)(wake - now));
	}
	for (uint32_t i = 0; i < n; i++)
		if (calls[i].aio != NULL) {
			aio_put(rt, calls[i].aio);
			calls[i].aio = NULL;
		}
}
