/*
 * ship_link.c -- the shipper's nng side (node/ship.c has the overview):
 * each (source, target) link sends one IndexApply batch at a time as a
 * NodeRequest through the lanes (proto/lanes.h, the batching transport the
 * router and libshoal use too) of the node it believes leads the target
 * group -- batches of several links for one node share a message -- and
 * hands the answer back to the loop.
 *
 * An exchange:
 *
 *   state    event                                next     where
 *   -------  -----------------------------------  -------  ---------------
 *   IDLE     a batch taken (node_shipq_take)      SENDING  link_send (loop)
 *   SENDING  answered, failed or timed out        DONE     link_done (nng)
 *   DONE     taken off the done list              IDLE     link_result (loop)
 *
 * The nng callback only stores the result, puts the link on the shipper's
 * done list under its mutex and wakes the loop (uv_async); the loop works
 * the list off (node_ship_drain) after every iteration.  `busy` (loop only)
 * is what keeps a second exchange from starting: it is set before the send
 * and cleared when the loop has processed the result.
 *
 * Where to send: first this node if it leads the target itself, else the
 * leader this node knows (when it hosts a replica), else a replica in turn;
 * then the retry policy (common/retry.h, as the router's calls): NOT_LEADER
 * hints at once, other failures the next replica, a backoff (10 ms doubling
 * to 500 ms) after a round of the group's replicas without an answer.  An
 * answer that is not OK leaves the batch unsent; it goes again, possibly
 * longer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "node/ship_int.h"
#include "proto/wire.h"

/* Propagation lag histogram bounds, milliseconds (+Inf implied). */
static const unsigned lag_le_ms[LAG_BUCKETS] = {1,   2,   5,    10,   20,   50,    100,
                                                200, 500, 1000, 2000, 5000, 10000, 30000};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* The lane slot of node id: the one it has, else a free one (taken).  -1
 * when all SH_MAX_NODES slots belong to other nodes.  Loop. */
static int node_slot(node_ship *s, uint32_t id)
{
	int free_slot = -1;
	for (uint32_t i = 0; i < SH_MAX_NODES; i++) {
		if (s->slot_node[i] == id)
			return (int)i;
		if (s->slot_node[i] == 0 && free_slot < 0)
			free_slot = (int)i;
	}
	if (free_slot >= 0)
		s->slot_node[free_slot] = id;
	return free_slot;
}

/* Node id's RPC URL: from the cluster map, else (a node still learning the
 * map asks the cluster file's nodes) from the cluster file. */
static bool node_rpc(node_ship *s, uint32_t id, char *url)
{
	sh_map_node mn;
	if (s->n->place != NULL && sh_place_node(s->n->place, id, &mn)) {
		snprintf(url, SH_ADDR_MAX, "%s", mn.rpc);
		return true;
	}
	const sh_node_conf *nc = sh_cluster_node(s->conf, id);
	if (nc == NULL)
		return false;
	snprintf(url, SH_ADDR_MAX, "%s", nc->rpc);
	return true;
}

bool node_ship_last_lag(node_ship *s, uint32_t table_id, uint16_t index_id, int64_t *ms)
{
	if (s == NULL)
		return false;
	bool found = false;
	pthread_mutex_lock(&s->lag_mu);
	for (unsigned i = 0; i < LAG_SLOTS && !found; i++) {
		const lag_slot *x = &s->lag[i];
		if (x->used && x->table_id == table_id && x->index_id == index_id) {
			*ms = x->last_ms;
			found = true;
		}
	}
	pthread_mutex_unlock(&s->lag_mu);
	return found;
}

static void lag_observe(node_ship *s, uint32_t table_id, uint16_t index_id, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	unsigned h = (table_id * 31u + index_id) % LAG_SLOTS;
	pthread_mutex_lock(&s->lag_mu);
	lag_slot *x = NULL;
	for (unsigned i = 0; i < LAG_SLOTS; i++) {
		lag_slot *y = &s->lag[(h + i) % LAG_SLOTS];
		if (!y->used || (y->table_id == table_id && y->index_id == index_id)) {
			x = y;
			break;
		}
	}
	if (x == NULL)
		x = &s->lag[h]; /* full: share a slot rather than lose the sample */
	if (!x->used) {
		x->used = true;
		x->table_id = table_id;
		x->index_id = index_id;
	}
	int b = 0;
	while (b < LAG_BUCKETS && (uint64_t)ms > lag_le_ms[b])
		b++;
	x->buckets[b]++;
	x->count++;
	x->sum_ms += (double)ms;
	x->last_ms = ms;
	pthread_mutex_unlock(&s->lag_mu);
}

/* ------------------------------------------------------------------------ */
/* The nng side                                                              */
/* ------------------------------------------------------------------------ */

static wire_lanes *lanes_for(node_ship *s, uint32_t id);

/* Hands a finished exchange to the loop.  nng callback thread. */
static void post_done(ship_link *l)
{
	node_ship *s = l->s;
	pthread_mutex_lock(&s->mu);
	l->state = LINK_DONE;
	l->done_next = s->done;
	s->done = l;
	if (s->async_open)
		uv_async_send(&s->async);
	pthread_mutex_unlock(&s->mu);
}

/* The lanes' end of an exchange: keep the answer for the loop.  nng
 * callback thread. */
static void link_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	ship_link *l = (ship_link *)it;
	if (rv == WIRE_LANE_OK && whole == NULL) {
		if (nng_msg_alloc(&whole, len) == 0)
			memcpy(nng_msg_body(whole), ans, len);
		else
			rv = WIRE_LANE_NOMEM;
	}
	l->rv = rv;
	l->reply = rv == WIRE_LANE_OK ? whole : NULL;
	post_done(l);
}

wire_lanes *node_ship_lanes_to(node_ship *s, uint32_t id)
{
	return s->closing ? NULL : lanes_for(s, id);
}

/* The lanes to node id (its socket opened and dialled, without waiting, on
 * first use), or NULL.  Loop. */
static wire_lanes *lanes_for(node_ship *s, uint32_t id)
{
	char rpc[SH_ADDR_MAX];
	if (id == 0 || !node_rpc(s, id, rpc))
		return NULL;
	int i = node_slot(s, id);
	if (i < 0)
		return NULL;
	if (s->lanes_init[i])
		return &s->lanes[i];
	if (!s->sock_open[i]) {
		/* TLS: only node id's certificate answers as node id. */
		sh_tls *tls = s->n->tls;
		nng_tls_config *cfg = NULL;
		char msg[SH_ERRMSG_SIZE];
		if (tls != NULL && (cfg = sh_tls_client_for(tls, id, msg)) == NULL) {
			node_logf(NODE_LOG_WARN, "ship: lanes to node %u: %s", id, msg);
			return NULL;
		}
		int rv = nng_req0_open(&s->socks[i]);
		if (rv != 0) {
			node_logf(NODE_LOG_WARN, "ship: nng_req0_open: %s", nng_strerror(rv));
			return NULL;
		}
		nng_socket_set_size(s->socks[i], NNG_OPT_RECVMAXSZ, NODE_RECV_MAX);
		nng_socket_set_ms(s->socks[i], NNG_OPT_RECONNMINT, 20);
		nng_socket_set_ms(s->socks[i], NNG_OPT_RECONNMAXT, 500);
		/* Our own retries decide when a batch goes again. */
		nng_socket_set_ms(s->socks[i], NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
		char url[SH_ADDR_MAX + 8];
		rv = sh_tls_url(tls != NULL, rpc, url, sizeof(url))
		         ? sh_tls_dial(s->socks[i], url, cfg, NNG_FLAG_NONBLOCK)
		         : NNG_EINVAL;
		if (rv != 0) {
			node_logf(NODE_LOG_WARN, "ship: dial %s: %s", rpc, nng_strerror(rv));
			nng_close(s->socks[i]);
			return NULL;
		}
		s->sock_open[i] = true;
	}
	wire_lane_nng_io(&s->io[i], &s->socks[i]);
	wire_lanes_conf lc = {
	    .io = &s->io[i],
	    .n_lanes = NODE_SHIP_LANES,
	    .max_items = NODE_SHIP_LANE_BATCH,
	    .max_bytes = 4 * NODE_SHIP_BATCH_BYTES,
	    .req_field = wire_field_number(&shoal__node_request__descriptor, "batch"),
	    .resp_field = wire_field_number(&shoal__node_response__descriptor, "batch"),
	    /* A send waits only for a connection to the node: when there is
	     * none (the node is down) another replica is tried soon. */
	    .send_ms = NODE_SHIP_SEND_TIMEOUT_MS,
	};
	char msg[SH_ERRMSG_SIZE];
	if (wire_lanes_init(&s->lanes[i], &lc, msg) != SHOAL_OK) {
		node_logf(NODE_LOG_WARN, "ship: lanes to node %u: %s", id, msg);
		wire_lanes_fini(&s->lanes[i]);
		return NULL;
	}
	s->lanes_init[i] = true;
	return &s->lanes[i];
}

void node_ship_lanes_close(node_ship *s)
{
	for (uint32_t i = 0; i < SH_MAX_NODES; i++)
		if (s->lanes_init[i])
			wire_lanes_close(&s->lanes[i]);
}

void node_ship_lanes_free(node_ship *s)
{
	for (uint32_t i = 0; i < SH_MAX_NODES; i++)
		if (s->lanes_init[i]) {
			wire_lanes_close(&s->lanes[i]);
			wire_lanes_fini(&s->lanes[i]);
			s->lanes_init[i] = false;
		}
}

/* ------------------------------------------------------------------------ */
/* Links                                                                     */
/* ------------------------------------------------------------------------ */

static ship_link *link_get(ship_src *src, uint32_t target)
{
	ship_link *l = src->links[target];
	if (l != NULL)
		return l;
	l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	l->s = src->s;
	l->src = src;
	l->target = target;
	src->links[target] = l;
	return l;
}

/* The node to send the target's batch to: the retry policy's target, set
 * up first with what this node knows of the target's leadership. */
static uint32_t link_dest(ship_link *l)
{
	node_ship *s = l->s;
	/* The policy holds the target's voters as the map had them: a newer
	 * map (a replica moved) sets it up afresh, or the link would keep
	 * asking nodes that left the group and never the ones that joined. */
	uint64_t epoch = sh_place_epoch(s->n->place);
	if (l->retry_on && l->retry_epoch == epoch)
		return l->retry.target;
	l->retry_epoch = epoch;
	uint32_t replicas[SH_MAP_GROUP_REPLICAS];
	uint32_t nr = sh_place_voters(s->n->place, l->target, replicas, SH_MAP_GROUP_REPLICAS);
	if (nr > SH_MAX_REPLICATION) /* what sh_retry holds */
		nr = SH_MAX_REPLICATION;
	if (nr == 0) { /* not in the map (yet): this node, which says so */
		replicas[0] = s->n->id;
		nr = 1;
	}
	uint32_t first = replicas[l->fails % nr];
	node_group *tg = node_group_get(s->n, l->target);
	if (tg != NULL) {
		node_group_status st;
		node_group_status_get(tg, &st);
		if (st.role == RAFT_LEADER)
			first = s->n->id;
		else if (st.leader != 0)
			first = st.leader;
	}
	sh_retry_init(&l->retry, replicas, nr, first, NODE_SHIP_BACKOFF_MIN_MS,
	              NODE_SHIP_BACKOFF_MAX_MS);
	l->retry_on = true;
	return l->retry.target;
}

/* After a failure: the next target and maybe a pause (the retry policy). */
static void link_failed(ship_link *l, sh_outcome o, uint32_t hint)
{
	link_dest(l);
	l->fails++;
	uint32_t delay = 0;
	sh_retry_next(&l->retry, o, hint, 0, INT64_MAX, &delay);
	l->retry_ns = delay > 0 ? node_now_ns() + (uint64_t)delay * 1000000u : 0;
}

/* Packs the first n deltas of the target's queue as a NodeRequest. */
static int pack_batch(ship_link *l, uint32_t n, nng_msg **out)
{
	ship_src *src = l->src;
	sh_arena *a = &src->scratch;
	sh_arena_reset(a);
	Shoal__IndexDelta **v = sh_arena_calloc(a, n, sizeof(*v));
	Shoal__IndexDelta *d = sh_arena_calloc(a, n, sizeof(*d));
	if (v == NULL || d == NULL)
		return SHOAL_E_NOMEM;
	const node_sdelta *x = src->q.links[l->target].head;
	for (uint32_t i = 0; i < n; i++, x = x->next) {
		shoal__index_delta__init(&d[i]);
		d[i].seq = x->d.seq;
		d[i].hash = x->d.hash;
		d[i].table_id = x->d.table_id;
		d[i].index_id = x->d.index_id;
		d[i].del = x->d.del;
		d[i].key.data = (uint8_t *)x->d.key;
		d[i].key.len = x->d.key_len;
		d[i].value.data = (uint8_t *)x->d.val;
		d[i].value.len = x->d.val_len;
		d[i].ts_ms = x->d.ts_ms;
		v[i] = &d[i];
	}
	Shoal__IndexApply ia = SHOAL__INDEX_APPLY__INIT;
	ia.source_group = src->gid;
	ia.n_deltas = n;
	ia.deltas = v;
	Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
	req.group = l->target;
	req.index_ship = &ia;
	size_t len = shoal__node_request__get_packed_size(&req);
	nng_msg *m;
	if (nng_msg_alloc(&m, len) != 0)
		return SHOAL_E_NOMEM;
	shoal__node_request__pack(&req, nng_msg_body(m));
	sh_arena_reset(a);
	*out = m;
	return SHOAL_OK;
}

/* Sends the target's next batch if the link is free.  Loop. */
void node_ship_link_send(ship_src *src, uint32_t target, uint64_t now)
{
	node_ship *s = src->s;
	ship_link *l = link_get(src, target);
	if (l == NULL)
		return;
	if (l->busy || now < l->retry_ns)
		return;
	uint32_t k = node_shipq_take(&src->q, target, NODE_SHIP_BATCH_MAX, NODE_SHIP_BATCH_BYTES);
	if (k == 0)
		return;
	nng_msg *m = NULL;
	uint32_t dest = link_dest(l);
	wire_lanes *lanes = lanes_for(s, dest);
	if (lanes == NULL || pack_batch(l, k, &m) != SHOAL_OK) {
		node_shipq_retry(&src->q, target);
		link_failed(l, SH_OUT_UNREACHABLE, 0);
		return;
	}
	l->dest = dest;
	l->gen = src->gen;
	l->n_sent = k;
	l->busy = true;
	l->state = LINK_SENDING;
	l->req = m;
	l->item.part[0] = nng_msg_body(m);
	l->item.len[0] = nng_msg_len(m);
	l->item.part[1] = NULL;
	l->item.len[1] = 0;
	l->item.deadline = sh_now_ms() + NODE_SHIP_TIMEOUT_MS;
	l->item.done = link_done;
	if (wire_lanes_submit(lanes, &l->item) != SHOAL_OK) { /* closing */
		nng_msg_free(m);
		l->req = NULL;
		l->busy = false;
		l->state = LINK_IDLE;
		node_shipq_retry(&src->q, target);
	}
}

static void ack_each(void *arg, const st_delta *d)
{
	ship_src *src = arg;
	lag_observe(src->s, d->table_id, d->index_id, node_wall_ms() - d->ts_ms);
}

/* An exchange finished (the link is on no list any more).  Loop. */
static void link_result(ship_link *l)
{
	ship_src *src = l->src;
	nng_msg *reply = l->reply;
	int rv = l->rv;
	l->reply = NULL;
	if (l->req != NULL) {
		nng_msg_free(l->req);
		l->req = NULL;
	}
	l->state = LINK_IDLE;
	l->busy = false;
	src->kick = true;
	if (l->gen != src->gen || !src->active) {
		/* Sent under an earlier leadership: the queues it came from are
		 * gone; whatever the target did with it is harmless. */
		if (reply != NULL)
			nng_msg_free(reply);
		return;
	}
	if (rv != WIRE_LANE_OK) {
		if (l->fails % 50 == 0)
			node_logf(NODE_LOG_INFO, "ship: group %u -> group %u via node %u: %s",
			          src->gid, l->target, l->dest, wire_lane_rv_name(rv));
		node_shipq_retry(&src->q, l->target);
		link_failed(l,
		            rv == WIRE_LANE_TIMEOUT ? SH_OUT_TIMEOUT
		            : rv == WIRE_LANE_BAD   ? SH_OUT_BAD_ANSWER
		                                    : SH_OUT_UNREACHABLE,
		            0);
		return;
	}
	Shoal__NodeResponse *r = NULL;
	wire_unpack_node_response(NULL, nng_msg_body(reply), nng_msg_len(reply), &r, NULL);
	nng_msg_free(reply);
	int status = r == NULL || r->response == NULL ? SHOAL__STATUS__STATUS_SERIALIZATION
	                                              : (int)r->response->status;
	int code = wire_code_from_status(status);
	if (code == SHOAL_OK) {
		/* A GSI partition there is over its capacity: its table's base
		 * writes here wait (that table only) until answers stop saying
		 * so. */
		for (size_t i = 0; i < r->n_gsi_behind; i++)
			node_cap_gsi_behind(src->s->n->cap, src->gid, r->gsi_behind[i],
			                    NODE_GSI_BEHIND_MS);
		node_shipq_ack(&src->q, l->target, ack_each, src);
		atomic_fetch_add_explicit(&src->shipped_total, l->n_sent, memory_order_relaxed);
		/* The next batch goes where this one went, with a fresh policy. */
		l->retry.round = 0;
		l->retry.backoff_ms = NODE_SHIP_BACKOFF_MIN_MS;
		l->retry_ns = 0;
		l->fails = 0;
		src->want_read = true; /* room in the buffer */
	} else if (code == SHOAL_E_WRONG_GROUP && r->refused != NULL) {
		/* A range of the GSI space moves or moved away from the target:
		 * its deltas wait, the rest goes on at once (node/shipq.c). */
		if (src->refusals++ % 50 == 0)
			node_logf(NODE_LOG_INFO,
			          "ship: group %u -> group %u: GSI range [%016" PRIx64
			          ", %016" PRIx64 "] refused (%s): its deltas wait for the map",
			          src->gid, l->target, r->refused->lo, r->refused->hi,
			          r->response->message != NULL ? r->response->message : "");
		node_shipq_refused(&src->q, l->target, r->refused->lo, r->refused->hi);
		src->hold_ns = node_now_ns();
		src->kick = true;
	} else {
		uint32_t hint = code == SHOAL_E_NOT_LEADER ? r->leader_node : 0;
		if (code != SHOAL_E_NOT_LEADER && code != SHOAL_E_UNAVAILABLE &&
		    code != SHOAL_E_OUTCOME_UNKNOWN && l->fails % 50 == 0)
			node_logf(NODE_LOG_WARN,
			          "ship: group %u -> group %u refused a batch: %s: %s", src->gid,
			          l->target, shoal_err_name(code),
			          r != NULL && r->response != NULL && r->response->message != NULL
			              ? r->response->message
			              : "");
		node_shipq_retry(&src->q, l->target);
		link_failed(l, code == SHOAL_E_NOT_LEADER ? SH_OUT_NOT_LEADER : SH_OUT_UNAVAILABLE,
		            hint);
	}
	if (r != NULL)
		shoal__node_response__free_unpacked(r, wire_heap_allocator());
}

/* Takes the finished exchanges off the done list.  Loop. */
void node_ship_drain(node_ship *s)
{
	pthread_mutex_lock(&s->mu);
	ship_link *l = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mu);
	while (l != NULL) {
		ship_link *next = l->done_next;
		l->done_next = NULL;
		link_result(l);
		l = next;
	}
}
void node_ship_link_reset(ship_link *l)
{
	l->retry_on = false;
	l->retry_ns = 0;
	l->fails = 0;
}

void node_ship_link_free(ship_link *l)
{
	if (l->reply != NULL)
		nng_msg_free(l->reply);
	if (l->req != NULL)
		nng_msg_free(l->req);
	sh_free(l);
}

void node_ship_metrics(node_ship *s, node_appendf_fn appendf, void *buf)
{
	if (s == NULL)
		return;
	node_txnrec_metrics(s->rec, appendf, buf);
	node_elastic_metrics(s->elastic, appendf, buf);
	node_pmove_metrics(s->pmove, appendf, buf);
	appendf(buf, "# HELP shoal_index_deltas_shipped_total Index deltas of this group's "
	             "outbox acknowledged by their target groups (while leader).\n"
	             "# TYPE shoal_index_deltas_shipped_total counter\n");
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->conf); g++)
		if (s->srcs[g] != NULL)
			appendf(buf, "shoal_index_deltas_shipped_total{group=\"%u\"} %" PRIu64 "\n",
			        g, (uint64_t)atomic_load(&s->srcs[g]->shipped_total));
	appendf(buf, "# HELP shoal_index_deltas_applied_total Index deltas received from "
	             "source groups and applied by this group (as leader).\n"
	             "# TYPE shoal_index_deltas_applied_total counter\n");
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->conf); g++)
		if (s->srcs[g] != NULL)
			appendf(buf, "shoal_index_deltas_applied_total{group=\"%u\"} %" PRIu64 "\n",
			        g, (uint64_t)atomic_load(&s->srcs[g]->applied_total));
	appendf(buf, "# HELP shoal_index_backlog Unshipped index deltas as this node, "
	             "leader, last saw them.\n# TYPE shoal_index_backlog gauge\n");
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->conf); g++)
		if (s->srcs[g] != NULL)
			appendf(buf, "shoal_index_backlog{group=\"%u\"} %" PRIu64 "\n", g,
			        (uint64_t)atomic_load(&s->srcs[g]->backlog));

	appendf(buf, "# HELP shoal_index_propagation_seconds Time from a base write's "
	             "proposal to its index delta applied by the target group (measured on "
	             "the source leader when the target acknowledges).\n"
	             "# TYPE shoal_index_propagation_seconds histogram\n");
	pthread_mutex_lock(&s->lag_mu);
	for (unsigned i = 0; i < LAG_SLOTS; i++) {
		const lag_slot *x = &s->lag[i];
		if (!x->used)
			continue;
		uint64_t cum = 0;
		for (int b = 0; b < LAG_BUCKETS; b++) {
			cum += x->buckets[b];
			appendf(buf,
			        "shoal_index_propagation_seconds_bucket{table_id=\"%u\",index_id="
			        "\"%u\",le=\"%g\"} %" PRIu64 "\n",
			        x->table_id, x->index_id, lag_le_ms[b] / 1000.0, cum);
		}
		cum += x->buckets[LAG_BUCKETS];
		appendf(buf,
		        "shoal_index_propagation_seconds_bucket{table_id=\"%u\",index_id=\"%u\","
		        "le=\"+Inf\"} %" PRIu64 "\n",
		        x->table_id, x->index_id, cum);
		appendf(buf,
		        "shoal_index_propagation_seconds_sum{table_id=\"%u\",index_id=\"%u\"} "
		        "%.3f\n",
		        x->table_id, x->index_id, x->sum_ms / 1000.0);
		appendf(buf,
		        "shoal_index_propagation_seconds_count{table_id=\"%u\",index_id=\"%u\"} "
		        "%" PRIu64 "\n",
		        x->table_id, x->index_id, x->count);
	}
	pthread_mutex_unlock(&s->lag_mu);
}
