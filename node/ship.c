/*
 * ship.c -- the index shipper: moves the deltas of each group's outbox to
 * the groups that hold the index partitions (DESIGN.md, "Secondary
 * indexes"; storage/index.h for the outbox and its dedup rule).
 *
 * Everything here runs on the node's loop thread except the nng aio
 * callback (ship_link.c), which only records the exchange's result on a list
 * and wakes the loop with uv_async; the loop works the list off in
 * node_ship_tick, which runs after every loop iteration (node.c's check
 * handle) and, through a NODE_SHIP_TICK_MS timer, at least that often.
 *
 * Per hosted group (a *source*), the shipper is a small state machine:
 *
 *   state     event                                   next      function
 *   --------  --------------------------------------  --------  -------------
 *   IDLE      this replica leads (term T)             ACTIVE    src_activate
 *   ACTIVE    leadership lost / term changed          IDLE/     src_deactivate
 *                                                     ACTIVE    (+ activate)
 *   ACTIVE    applied index moved, or room in buffer  ACTIVE    src_read
 *   ACTIVE    a target's queue has deltas, idle link  ACTIVE    node_ship_link_send
 *   ACTIVE    a target acknowledged a batch           ACTIVE    node_ship_drain
 *   ACTIVE    shipped position moved (50 ms / 1000)   ACTIVE    src_trim
 *   ACTIVE    a GSI of this group is not backfilled   ACTIVE    src_backfill
 *
 * Activation starts at the replicated watermark (st_outbox_get_info's
 * shipped, set by applied OutboxTrims), so a new leader re-sends what the
 * old one may not have finished; targets skip seqs they already applied.
 * Beyond it the position lives in memory (node_shipq, shipq.c): deltas read
 * and queued per target group, one batch in flight per (source, target)
 * link, the shipped position = everything acknowledged by every target.
 * Deactivation drops the queues (a batch still on the wire is forgotten:
 * its answer is recognised by the link's generation and ignored).
 *
 * A link sends NodeRequest{group = target, index_ship = IndexApply} to the
 * node it believes leads the target group (ship_link.c: where to send,
 * retries, the nng exchange); the target proposes the batch through its own
 * log and answers once it is applied.
 *
 * Invariants: at most one batch in flight per link (node_shipq_take); the
 * trim proposed never exceeds the acknowledged position; the shipper never
 * blocks the loop (every nng call here is asynchronous or non-blocking).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "common/placement.h"
#include "node/ship_int.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* Sources                                                                   */
/* ------------------------------------------------------------------------ */

/* A digest of the map's partitions of the GSI space (where deltas go). */
static uint64_t gsi_signature(node *n)
{
	sh_place_part parts[256];
	uint32_t k = sh_place_table_parts(n->place, n->conf, SH_MAP_GSI_SPACE, parts, 256);
	uint64_t h = 1469598103934665603ull ^ k;
	for (uint32_t i = 0; i < k && i < 256; i++) {
		uint64_t v[3] = {parts[i].lo, parts[i].hi, parts[i].group};
		for (int j = 0; j < 3; j++)
			h = (h ^ v[j]) * 1099511628211ull;
	}
	return h;
}

/* Whether the GSI partitions of the node's map changed since the last look
 * (looked at when the map's epoch moved). */
static bool gsi_map_changed(ship_src *src)
{
	node *n = src->s->n;
	if (n->place == NULL)
		return false;
	uint64_t epoch = sh_place_epoch(n->place);
	if (epoch == src->map_epoch)
		return false;
	src->map_epoch = epoch;
	uint64_t sig = gsi_signature(n);
	bool changed = sig != src->gsi_sig;
	src->gsi_sig = sig;
	return changed;
}

static void src_activate(ship_src *src, uint64_t term)
{
	char msg[SH_ERRMSG_SIZE];
	st_outbox_info info;
	if (st_outbox_get_info(node_group_env(src->g), &info, msg) != SHOAL_OK) {
		node_logf(NODE_LOG_WARN, "ship: group %u: %s", src->gid, msg);
		return; /* tried again next tick */
	}
	src->gen++;
	src->active = true;
	src->term = term;
	node_shipq_reset(&src->q, info.shipped);
	src->acked = info.shipped;
	src->trim_sent = info.shipped;
	src->last_seq = info.last_seq;
	src->trim_ns = node_now_ns();
	src->want_read = true;
	src->kick = true;
	src->bf_next_ns = 0;
	src->reroute = false;
	(void)gsi_map_changed(src); /* the queues start from the map as it is */
	for (uint32_t t = 0; t < sh_cluster_group_cap(src->s->conf); t++) {
		if (src->links[t] != NULL)
			node_ship_link_reset(src->links[t]);
	}
	if (info.depth > 0)
		node_logf(NODE_LOG_INFO,
		          "ship: group %u: leader (term %" PRIu64 "), shipping from seq %" PRIu64
		          " (%" PRIu64 " deltas waiting)",
		          src->gid, term, info.shipped, info.depth);
}

static void src_deactivate(ship_src *src)
{
	src->gen++;
	src->active = false;
	node_shipq_reset(&src->q, 0);
	atomic_store(&src->backlog, 0);
}

/* Reads new deltas into the queues.  Loop. */
static void src_read(ship_src *src)
{
	char msg[SH_ERRMSG_SIZE];
	st_env *env = node_group_env(src->g);
	st_outbox_info info;
	if (st_outbox_get_info(env, &info, msg) != SHOAL_OK) {
		node_logf(NODE_LOG_WARN, "ship: group %u: %s", src->gid, msg);
		return;
	}
	src->last_seq = info.last_seq;
	/* A trim applied meanwhile (ours, or a predecessor's still in the
	 * log) moved the watermark past what we hold: nothing to re-send. */
	if (info.shipped > src->q.read_pos && src->q.n_buffered == 0) {
		node_shipq_reset(&src->q, info.shipped);
		if (info.shipped > src->trim_sent)
			src->trim_sent = info.shipped;
	}
	src->want_read = false;
	while (src->q.read_pos < info.last_seq && src->q.n_buffered < NODE_SHIP_BUFFER_MAX &&
	       src->q.bytes_buffered < NODE_SHIP_BUFFER_BYTES) {
		st_delta *d;
		uint32_t n = 0;
		sh_arena_reset(&src->scratch);
		int rc = st_outbox_read(env, src->q.read_pos, NODE_SHIP_BATCH_MAX,
		                        NODE_SHIP_BATCH_BYTES, &src->scratch, &d, &n, msg);
		if (rc != SHOAL_OK) {
			node_logf(NODE_LOG_WARN, "ship: group %u: reading the outbox: %s", src->gid,
			          msg);
			break;
		}
		if (n == 0)
			break;
		for (uint32_t i = 0; i < n; i++) {
			if (d[i].seq <= src->q.read_pos)
				continue; /* not expected: the read is "after read_pos" */
			if (node_shipq_push(&src->q, &d[i]) != SHOAL_OK) {
				node_logf(NODE_LOG_WARN, "ship: group %u: out of memory", src->gid);
				src->want_read = true;
				goto out;
			}
		}
		src->kick = true;
	}
	if (src->q.read_pos < info.last_seq)
		src->want_read = true; /* the buffer is full: read more after acks */
out:
	sh_arena_reset(&src->scratch);
}

static void trim_done(node_waiter *w)
{
	ship_src *src = w->data;
	src->trim_busy = false;
	int code = w->code;
	if (code == SHOAL_OK && w->resp != NULL) {
		Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, w->resp_len, w->resp);
		code = r == NULL || r->response == NULL
		           ? SHOAL_E_INTERNAL
		           : wire_code_from_status(r->response->status);
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
	}
	sh_free(w->resp);
	w->resp = NULL;
	if (code == SHOAL_OK) {
		if (src->trim_op.upto > src->trim_sent)
			src->trim_sent = src->trim_op.upto;
	} else if (code != SHOAL_E_NOT_LEADER && code != SHOAL_E_UNAVAILABLE &&
	           code != SHOAL_E_OUTCOME_UNKNOWN) {
		node_logf(NODE_LOG_WARN, "ship: group %u: outbox trim to %" PRIu64 ": %s: %s",
		          src->gid, src->trim_op.upto, shoal_err_name(code), w->msg);
	}
}

/* Proposes an OutboxTrim behind the acknowledged position.  Loop. */
static void src_trim(ship_src *src, uint64_t now)
{
	if (src->trim_busy || src->acked <= src->trim_sent)
		return;
	if (src->acked - src->trim_sent < NODE_SHIP_TRIM_DELTAS &&
	    now - src->trim_ns < (uint64_t)NODE_SHIP_TRIM_MS * 1000000u)
		return;
	char msg[SH_ERRMSG_SIZE];
	node_waiter *w = &src->trim_w;
	shoal__outbox_trim__init(&src->trim_op);
	src->trim_op.upto = src->acked;
	w->kind = NODE_WAIT_WRITE;
	w->op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	w->op.op_case = SHOAL__COMMAND_OP__OP_OUTBOX_TRIM;
	w->op.outbox_trim = &src->trim_op;
	w->size = 16;
	w->cb = trim_done;
	w->data = src;
	src->trim_ns = now;
	if (node_group_submit(src->g, w, msg) == SHOAL_OK)
		src->trim_busy = true;
}

static void bf_done(node_waiter *w)
{
	ship_src *src = w->data;
	src->bf_busy = false;
	int code = w->code;
	const char *text = w->msg;
	char buf[SH_ERRMSG_SIZE] = "";
	if (code == SHOAL_OK && w->resp != NULL) {
		Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, w->resp_len, w->resp);
		code = r == NULL || r->response == NULL
		           ? SHOAL_E_INTERNAL
		           : wire_code_from_status(r->response->status);
		if (r != NULL && r->response != NULL && r->response->message != NULL)
			snprintf(buf, sizeof(buf), "%s", r->response->message);
		text = buf;
		if (r != NULL)
			shoal__node_response__free_unpacked(r, NULL);
	}
	sh_free(w->resp);
	w->resp = NULL;
	uint64_t now = node_now_ns();
	if (code == SHOAL_OK) {
		src->bf_next_ns = now; /* the next step at once */
	} else {
		src->bf_next_ns = now + 500u * 1000000u;
		if (code != SHOAL_E_NOT_LEADER && code != SHOAL_E_UNAVAILABLE &&
		    code != SHOAL_E_OUTCOME_UNKNOWN)
			node_logf(NODE_LOG_WARN, "ship: group %u: backfill of %s index %u: %s: %s",
			          src->gid, src->bf_table, src->bf_op.index_id,
			          shoal_err_name(code), text);
	}
}

/* Proposes the next backfill step of a GSI this group has not finished.
 * Paused while the outbox is far behind, so that a backfill never pushes
 * base writes into the outbox limit.  Loop. */
static void src_backfill(ship_src *src, uint64_t now)
{
	node *n = src->s->n;
	if (src->bf_busy || now < src->bf_next_ns)
		return;
	if (atomic_load(&src->backlog) > n->outbox_limit / 2) {
		src->bf_next_ns = now + 20u * 1000000u;
		return;
	}
	char msg[SH_ERRMSG_SIZE];
	st_index_progress *p;
	uint32_t np = 0;
	sh_arena_reset(&src->scratch);
	if (st_index_progress_list(node_group_env(src->g), &src->scratch, &p, &np, msg) !=
	    SHOAL_OK) {
		node_logf(NODE_LOG_WARN, "ship: group %u: index progress: %s", src->gid, msg);
		src->bf_next_ns = now + 1000u * 1000000u;
		return;
	}
	const st_index_progress *x = NULL;
	for (uint32_t i = 0; i < np && x == NULL; i++)
		if (!p[i].local && !p[i].backfill_done && p[i].status != ST_INDEX_DELETING)
			x = &p[i];
	if (x == NULL || strlen(x->table) >= sizeof(src->bf_table)) {
		src->bf_next_ns = now + 100u * 1000000u;
		sh_arena_reset(&src->scratch);
		return;
	}
	snprintf(src->bf_table, sizeof(src->bf_table), "%s", x->table);
	shoal__index_backfill__init(&src->bf_op);
	src->bf_op.table_name = src->bf_table;
	src->bf_op.index_id = x->index_id;
	src->bf_op.max_items = NODE_BACKFILL_STEP;
	sh_arena_reset(&src->scratch);
	node_waiter *w = &src->bf_w;
	w->kind = NODE_WAIT_WRITE;
	w->op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	w->op.op_case = SHOAL__COMMAND_OP__OP_BACKFILL;
	w->op.backfill = &src->bf_op;
	w->size = 64;
	w->cb = bf_done;
	w->data = src;
	if (node_group_submit(src->g, w, msg) == SHOAL_OK)
		src->bf_busy = true;
	else
		src->bf_next_ns = now + 100u * 1000000u;
}

/* A source for hosted group g (grp), or NULL (out of memory). */
static void src_free(node_ship *s, ship_src *src);

static ship_src *src_new(node_ship *s, node_group *grp, uint32_t g)
{
	ship_src *src = sh_calloc(1, sizeof(*src));
	if (src == NULL)
		return NULL;
	src->s = s;
	src->g = grp;
	src->gid = g;
	sh_arena_init(&src->scratch);
	if (node_shipq_init(&src->q, s->conf, s->n->place) != SHOAL_OK)
		goto nomem;
	src->q_init = true;
	src->links = sh_calloc(sh_cluster_group_cap(s->conf), sizeof(*src->links));
	if (src->links == NULL)
		goto nomem;
	if (node_waiter_init(&src->trim_w) != SHOAL_OK)
		goto nomem;
	src->trim_w_init = true;
	if (node_waiter_init(&src->bf_w) != SHOAL_OK)
		goto nomem;
	src->bf_w_init = true;
	return src;
nomem:
	src_free(s, src);
	return NULL;
}

/* Frees a source whose links are idle for good (the lanes are stopped) and
 * whose waiters were answered (its group closed). */
static void src_free(node_ship *s, ship_src *src)
{
	if (src == NULL)
		return;
	for (uint32_t t = 0; src->links != NULL && t < sh_cluster_group_cap(s->conf); t++) {
		if (src->links[t] != NULL)
			node_ship_link_free(src->links[t]);
	}
	sh_free(src->links);
	if (src->q_init)
		node_shipq_fini(&src->q);
	/* The groups answered our trim/backfill waiters when they closed; a
	 * response they carried is ours to free. */
	if (src->trim_w_init)
		node_waiter_fini(&src->trim_w);
	if (src->bf_w_init)
		node_waiter_fini(&src->bf_w);
	sh_arena_fini(&src->scratch);
	sh_free(src);
}

/* The groups this node hosts change with the cluster map (issue 14): a
 * group opened since gets a source; a group closed or reopened (a new
 * replica, a new struct) has its source retired -- kept, never ticked, until
 * the shipper is freed, since exchanges in flight still point at it.  Loop. */
static void srcs_follow_groups(node_ship *s)
{
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->conf); g++) {
		node_group *grp = node_group_get(s->n, g);
		ship_src *src = s->srcs[g];
		if (src != NULL && src->g == grp)
			continue;
		if (src != NULL) {
			if (src->active)
				src_deactivate(src);
			src->retired_next = s->retired;
			s->retired = src;
			s->srcs[g] = NULL;
		}
		if (grp != NULL)
			s->srcs[g] = src_new(s, grp, g); /* NULL: tried again next tick */
	}
}

static void src_tick(ship_src *src, uint64_t now, bool timer)
{
	uint64_t term = 0;
	bool leading = node_group_leading(src->g, &term);
	if (!leading) {
		if (src->active)
			src_deactivate(src);
		return;
	}
	if (!src->active || term != src->term) {
		if (src->active)
			src_deactivate(src);
		src_activate(src, term);
		if (!src->active)
			return;
	}
	uint64_t applied = node_group_last_applied(src->g);
	if (applied != src->seen_applied || src->want_read) {
		src->seen_applied = applied;
		src_read(src);
	}
	/* Deltas change target only with nothing in flight (node/shipq.c): when
	 * the map's GSI partitions changed, and a moment after a refusal. */
	if (gsi_map_changed(src))
		src->reroute = true;
	if (src->q.n_held > 0 && now >= src->hold_ns + (uint64_t)NODE_SHIP_HOLD_MS * 1000000u)
		src->reroute = true;
	if (src->reroute && node_shipq_quiet(&src->q)) {
		node_shipq_reroute(&src->q);
		src->reroute = false;
		src->hold_ns = now;
		src->kick = true;
	}
	if ((src->kick || timer) && !src->reroute && !atomic_load(&src->s->paused)) {
		src->kick = false;
		for (uint32_t t = 0; t < sh_cluster_group_cap(src->s->conf); t++)
			if (src->q.links[t].head != NULL)
				node_ship_link_send(src, t, now);
	}
	src->acked = node_shipq_watermark(&src->q);
	uint64_t backlog = src->last_seq > src->acked ? src->last_seq - src->acked : 0;
	atomic_store_explicit(&src->backlog, backlog, memory_order_relaxed);
	src_trim(src, now);
	src_backfill(src, now);
}

/* ------------------------------------------------------------------------ */
/* The shipper                                                               */
/* ------------------------------------------------------------------------ */

static void timer_cb(uv_timer_t *t)
{
	node_ship *s = t->data;
	s->timer_fired = true; /* the check handle runs the tick after this */
}

static void async_cb(uv_async_t *a)
{
	(void)a; /* woken for the done list: the check handle drains it */
}

void node_ship_tick(node_ship *s)
{
	if (s->closing)
		return;
	bool timer = s->timer_fired;
	s->timer_fired = false;
	node_ship_drain(s);
	uint64_t now = node_now_ns();
	srcs_follow_groups(s);
	for (uint32_t g = 0; g < sh_cluster_group_cap(s->conf); g++)
		if (s->srcs[g] != NULL)
			src_tick(s->srcs[g], now, timer);
	node_txnrec_tick(s->rec, now);
	node_elastic_tick(s->elastic, now);
	if (s->n->place != NULL && sh_place_epoch(s->n->place) != s->map_epoch) {
		s->map_epoch = sh_place_epoch(s->n->place);
		node_pmove_kick(s->pmove);
	}
}

int node_ship_open(node *n, node_ship **out, char *errmsg)
{
	*out = NULL;
	node_ship *s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "ship: out of memory");
	s->n = n;
	s->conf = n->conf;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->lag_mu, NULL);
	s->srcs = sh_calloc(sh_cluster_group_cap(n->conf), sizeof(*s->srcs));
	if (s->srcs == NULL)
		goto nomem;
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
		node_group *grp = node_group_get(n, g);
		if (grp != NULL && (s->srcs[g] = src_new(s, grp, g)) == NULL)
			goto nomem;
	}
	if (node_txnrec_open(s, &s->rec, errmsg) != SHOAL_OK)
		goto nomem;
	if (node_elastic_open(s, &s->elastic, errmsg) != SHOAL_OK)
		goto nomem;
	if (node_pmove_open(s, &s->pmove, errmsg) != SHOAL_OK)
		goto nomem;
	uv_timer_init(&n->loop, &s->timer);
	s->timer.data = s;
	s->timer_init = true;
	uv_timer_start(&s->timer, timer_cb, NODE_SHIP_TICK_MS, NODE_SHIP_TICK_MS);
	uv_async_init(&n->loop, &s->async, async_cb);
	s->async.data = s;
	s->async_init = true;
	s->async_open = true;
	*out = s;
	return SHOAL_OK;

nomem:
	node_ship_free(s);
	return sh_errf(errmsg, SHOAL_E_NOMEM, "ship: out of memory");
}

void node_ship_close(node_ship *s)
{
	if (s == NULL || s->closing)
		return;
	s->closing = true;
	node_elastic_close(s->elastic);
	node_pmove_close(s->pmove);
	pthread_mutex_lock(&s->mu);
	s->async_open = false;
	pthread_mutex_unlock(&s->mu);
	if (s->timer_init) {
		uv_timer_stop(&s->timer);
		uv_close((uv_handle_t *)&s->timer, NULL);
	}
	if (s->async_init)
		uv_close((uv_handle_t *)&s->async, NULL);
	/* Exchanges on the wire end now (their results reach the done list,
	 * which nobody works off any more). */
	node_ship_lanes_close(s);
}

void node_ship_free(node_ship *s)
{
	if (s == NULL)
		return;
	/* The loop has ended (or never ran): the lanes stop (waiting for
	 * their callbacks), then nothing touches the links any more.  The
	 * move driver first: it may still be sending on them. */
	node_pmove_free(s->pmove);
	node_ship_lanes_free(s);
	node_txnrec_free(s->rec);
	node_elastic_free(s->elastic);
	for (uint32_t g = 0; s->srcs != NULL && g < sh_cluster_group_cap(s->conf); g++)
		src_free(s, s->srcs[g]);
	while (s->retired != NULL) {
		ship_src *src = s->retired;
		s->retired = src->retired_next;
		src_free(s, src);
	}
	for (uint32_t i = 0; i < SH_MAX_NODES; i++)
		if (s->sock_open[i])
			nng_close(s->socks[i]);
	sh_free(s->srcs);
	pthread_mutex_destroy(&s->lag_mu);
	pthread_mutex_destroy(&s->mu);
	sh_free(s);
}

void node_ship_set_paused(node_ship *s, bool paused)
{
	atomic_store(&s->paused, paused);
}

uint64_t node_ship_backlog(node_ship *s, uint32_t gid)
{
	if (s == NULL || gid >= sh_cluster_group_cap(s->conf) || s->srcs[gid] == NULL)
		return 0;
	return atomic_load_explicit(&s->srcs[gid]->backlog, memory_order_relaxed);
}

void node_ship_count_applied(node_ship *s, uint32_t gid, uint64_t n)
{
	if (s == NULL || gid >= sh_cluster_group_cap(s->conf) || s->srcs[gid] == NULL)
		return;
	atomic_fetch_add_explicit(&s->srcs[gid]->applied_total, n, memory_order_relaxed);
}
