/*
 * metrics.c -- request statistics and the Prometheus endpoint of a node.
 *
 * Statistics are plain atomic counters (relaxed increments: each counter is
 * exact, a scrape may see counters of one request a moment apart):
 *   shoal_node_requests_total{op}                 requests answered
 *   shoal_node_errors_total{op,code}              of which failed, by status
 *   shoal_node_request_seconds{op} (histogram)    time from receive to reply
 *   shoal_node_loop_wakes_total                   request threads waking the loop
 *   shoal_node_listener_relistens_total           TLS listeners restarted (common/tls.h)
 *   shoal_node_dialer_redials_total               TLS dialers restarted (common/tls.h)
 *   shoal_node_reaper_probes_total, _probe_longest_seconds  nng's reaper (common/nngwatch.h)
 *   shoal_node_batch_pool_members, _bytes         gauges: idle batch members kept
 *   shoal_node_server_contexts, _busy, _connections  gauges: the request server
 * and per hosted group, from the status the loop publishes:
 *   shoal_raft_role{group}          0 unavailable, 1 follower, 2 candidate, 3 leader
 *   shoal_raft_term{group}, shoal_raft_commit_index{group},
 *   shoal_raft_applied_index{group}, shoal_group_pending_writes{group},
 *   shoal_group_failed{group}       1 once the replica's state machine failed
 *   shoal_raft_snapshot_index{group}, shoal_raft_snapshot_threshold{group},
 *   shoal_raft_entry_bytes{group}   snapshots and what sizes their spacing
 * the outbox (change stream) of each hosted replica:
 *   shoal_outbox_depth{group}, shoal_outbox_last_seq{group},
 *   shoal_outbox_shipped_seq{group}, shoal_outbox_oldest_age_seconds{group}
 * and the shipper's (ship.c, node_ship_metrics):
 *   shoal_index_deltas_shipped_total{group}   acknowledged by targets
 *   shoal_index_deltas_applied_total{group}   received as a target
 *   shoal_index_backlog{group}                unshipped, as the leader sees it
 *   shoal_index_propagation_seconds{table_id,index_id} (histogram) from a
 *       base write's proposal to its delta applied in the target group
 * and the replica scrub's (scrub.c, node_scrub_metrics):
 *   shoal_scrub_ranges_total{group}, shoal_scrub_keys_total{group},
 *   shoal_scrub_mismatches_total{group}, shoal_scrub_passes_total{group},
 *   shoal_scrub_unanswered_total{group}
 *
 * The endpoint is nng's HTTP server (GET /metrics on the node's metrics
 * "host:port"); the handler renders the text on an nng thread.
 *
 * Threads: node_stats_record and node_metrics_render from any thread;
 * node_metrics_start/stop from the main thread.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "common/alloc.h"
#include "common/nngwatch.h"
#include "common/tls.h"
#include "node/node.h"
#include "storage/index.h"

/* Upper bounds of the latency buckets, seconds. */
static const double bucket_le[NODE_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
};

struct node_metrics {
	node *node;
	nng_http_server *server;
	nng_url *url;
};

void node_stats_record(node_stats *s, int op, int code, uint64_t ns)
{
	if (op < 0 || op >= NODE_OP__COUNT)
		op = NODE_OP_INVALID;
	atomic_fetch_add_explicit(&s->requests[op], 1, memory_order_relaxed);
	if (code != SHOAL_OK) {
		if (code < 0 || code >= SHOAL_E__COUNT)
			code = SHOAL_E_INTERNAL;
		atomic_fetch_add_explicit(&s->errors[op][code], 1, memory_order_relaxed);
	}
	double sec = (double)ns / 1e9;
	int b = 0;
	while (b < NODE_LATENCY_BUCKETS && sec > bucket_le[b])
		b++;
	atomic_fetch_add_explicit(&s->buckets[op][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->sum_ns[op], ns, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* Rendering                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct buf {
	char *p;
	size_t len, cap;
	bool oom;
} buf;

static void vappendf(buf *b, const char *fmt, va_list ap0)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_copy(ap, ap0);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = b->cap * 2 + (size_t)n + 1;
		char *np = sh_realloc(b->p, ncap);
		if (np == NULL) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
}

static void appendf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf(buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappendf(b, fmt, ap);
	va_end(ap);
}

/* appendf for other files (node_appendf_fn). */
static void appendf_any(void *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf_any(void *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappendf(b, fmt, ap);
	va_end(ap);
}

/* "SHOAL_E_NOT_LEADER" -> "not_leader"; "SHOAL_OK" -> "ok". */
static void code_label(int code, char *out, size_t size)
{
	const char *name = shoal_err_name(code);
	if (strncmp(name, "SHOAL_E_", 8) == 0)
		name += 8;
	else if (strncmp(name, "SHOAL_", 6) == 0)
		name += 6;
	size_t i = 0;
	for (; name[i] != '\0' && i + 1 < size; i++)
		out[i] = (char)tolower((unsigned char)name[i]);
	out[i] = '\0';
}

static uint64_t load(atomic_uint_fast64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

int node_metrics_render(node *n, char **text, size_t *len, char *errmsg)
{
	node_stats *s = &n->stats;
	buf b = {sh_malloc(16384), 0, 16384, false};
	if (b.p == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "metrics: out of memory");
	b.p[0] = '\0';

	appendf(&b, "# HELP shoal_node_requests_total Requests answered by this node, by "
	            "operation.\n# TYPE shoal_node_requests_total counter\n");
	for (int op = 0; op < NODE_OP__COUNT; op++)
		if (node_op_served(op))
			appendf(&b, "shoal_node_requests_total{op=\"%s\"} %" PRIu64 "\n",
			        node_op_name(op), load(&s->requests[op]));

	appendf(&b, "# HELP shoal_node_errors_total Requests answered with an error, by "
	            "operation and status.\n# TYPE shoal_node_errors_total counter\n");
	for (int op = 0; op < NODE_OP__COUNT; op++) {
		for (int code = 1; code < SHOAL_E__COUNT; code++) {
			uint64_t v = load(&s->errors[op][code]);
			if (v == 0)
				continue;
			char label[64];
			code_label(code, label, sizeof(label));
			appendf(&b, "shoal_node_errors_total{op=\"%s\",code=\"%s\"} %" PRIu64 "\n",
			        node_op_name(op), label, v);
		}
	}

	appendf(&b, "# HELP shoal_node_request_seconds Time from receiving a request to "
	            "sending its answer.\n# TYPE shoal_node_request_seconds histogram\n");
	for (int op = 0; op < NODE_OP__COUNT; op++) {
		if (!node_op_served(op))
			continue;
		uint64_t cum = 0;
		for (int i = 0; i < NODE_LATENCY_BUCKETS; i++) {
			cum += load(&s->buckets[op][i]);
			appendf(&b,
			        "shoal_node_request_seconds_bucket{op=\"%s\",le=\"%g\"} %" PRIu64
			        "\n",
			        node_op_name(op), bucket_le[i], cum);
		}
		cum += load(&s->buckets[op][NODE_LATENCY_BUCKETS]);
		appendf(&b,
		        "shoal_node_request_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
		        node_op_name(op), cum);
		appendf(&b, "shoal_node_request_seconds_sum{op=\"%s\"} %.9f\n", node_op_name(op),
		        (double)load(&s->sum_ns[op]) / 1e9);
		appendf(&b, "shoal_node_request_seconds_count{op=\"%s\"} %" PRIu64 "\n",
		        node_op_name(op), cum);
	}

	appendf(&b,
	        "# HELP shoal_node_loop_wakes_total Wake-ups of the Raft loop asked for by "
	        "request threads.\n# TYPE shoal_node_loop_wakes_total counter\n"
	        "shoal_node_loop_wakes_total %" PRIu64 "\n",
	        load(&s->loop_wakes));
	appendf(&b,
	        "# HELP shoal_node_listener_relistens_total TLS listeners found stopped and "
	        "listening again (nng 1.5.2, common/tls.h sh_listen_guard).\n"
	        "# TYPE shoal_node_listener_relistens_total counter\n"
	        "shoal_node_listener_relistens_total %" PRIu64 "\n",
	        sh_listen_guard_relistens());
	appendf(
	    &b,
	    "# HELP shoal_node_dialer_redials_total TLS dialers found stopped or hung and dialled "
	    "again (nng 1.5.2, common/tls.h's dial keeper).\n"
	    "# TYPE shoal_node_dialer_redials_total counter\n"
	    "shoal_node_dialer_redials_total %" PRIu64 "\n",
	    sh_dial_keeper_redials());
	uint64_t probes;
	unsigned longest_ms;
	sh_watch_stats(&probes, &longest_ms);
	appendf(&b,
	        "# HELP shoal_node_reaper_probes_total Probes of nng's reaper finished "
	        "(common/nngwatch.h; one stuck for 30 s exits the node).\n"
	        "# TYPE shoal_node_reaper_probes_total counter\n"
	        "shoal_node_reaper_probes_total %" PRIu64 "\n"
	        "# HELP shoal_node_reaper_probe_longest_seconds The longest of them.\n"
	        "# TYPE shoal_node_reaper_probe_longest_seconds gauge\n"
	        "shoal_node_reaper_probe_longest_seconds %.3f\n",
	        probes, longest_ms / 1000.0);
	appendf(&b,
	        "# HELP shoal_node_batch_pool_members Idle batch members kept for reuse (at most "
	        "%u), and the bytes of arenas they hold (at most %u).\n"
	        "# TYPE shoal_node_batch_pool_members gauge\nshoal_node_batch_pool_members %" PRIu64
	        "\n# TYPE shoal_node_batch_pool_bytes gauge\nshoal_node_batch_pool_bytes %" PRIu64
	        "\n",
	        NODE_BATCH_POOL_KEEP, NODE_BATCH_POOL_BYTES, load(&s->pool_members),
	        load(&s->pool_bytes));

	appendf(&b,
	        "# HELP shoal_node_server_contexts The request server's contexts (--workers).\n"
	        "# TYPE shoal_node_server_contexts gauge\nshoal_node_server_contexts %" PRIu64 "\n"
	        "# HELP shoal_node_server_busy Contexts holding a request not yet answered (all of "
	        "them: no more requests are read).\n"
	        "# TYPE shoal_node_server_busy gauge\nshoal_node_server_busy %" PRIu64 "\n"
	        "# HELP shoal_node_server_connections Connections to the request server (routers' "
	        "and nodes').\n"
	        "# TYPE shoal_node_server_connections gauge\nshoal_node_server_connections %" PRIu64
	        "\n",
	        load(&s->server_contexts), load(&s->server_busy), load(&s->server_conns));

	static const struct {
		const char *name, *help;
	} gauges[] = {
	    {"shoal_raft_role", "Raft role: 0 unavailable, 1 follower, 2 candidate, 3 leader."},
	    {"shoal_raft_term", "Current Raft term."},
	    {"shoal_raft_commit_index", "Highest Raft log index known committed."},
	    {"shoal_raft_applied_index", "Highest Raft log index applied to storage."},
	    {"shoal_group_pending_writes", "Writes queued or in flight through Raft."},
	    {"shoal_group_failed", "1 when the replica's state machine failed."},
	    {"shoal_raft_snapshot_index", "Raft log index of the replica's last snapshot."},
	    {"shoal_raft_snapshot_threshold",
	     "Entries between snapshots, set from the average entry size."},
	    {"shoal_raft_entry_bytes", "Moving average of the size of the entries applied."},
	};
	for (size_t k = 0; k < sizeof(gauges) / sizeof(gauges[0]); k++) {
		appendf(&b, "# HELP %s %s\n# TYPE %s gauge\n", gauges[k].name, gauges[k].help,
		        gauges[k].name);
		for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
			node_group *grp = node_group_get(n, g);
			if (grp == NULL)
				continue;
			node_group_status st;
			node_group_status_get(grp, &st);
			uint64_t v = 0;
			switch (k) {
			case 0:
				v = (uint64_t)st.role;
				break;
			case 1:
				v = st.term;
				break;
			case 2:
				v = st.commit;
				break;
			case 3:
				v = st.applied;
				break;
			case 4:
				v = st.pending;
				break;
			case 5:
				v = st.failed ? 1 : 0;
				break;
			case 6:
				v = st.snapshot_index;
				break;
			case 7:
				v = st.snapshot_threshold;
				break;
			default:
				v = st.entry_bytes;
				break;
			}
			appendf(&b, "%s{group=\"%u\"} %" PRIu64 "\n", gauges[k].name, g, v);
		}
	}

	/* Change streams: each hosted replica's outbox (every replica has the
	 * same one; the leader ships it), read from LMDB. */
	static const char *const ob_names[][2] = {
	    {"shoal_outbox_depth", "Index deltas in the group's outbox (not yet trimmed)."},
	    {"shoal_outbox_last_seq", "Seq of the newest index delta appended to the outbox."},
	    {"shoal_outbox_shipped_seq", "Replicated shipped watermark of the outbox."},
	    {"shoal_outbox_oldest_age_seconds", "Age of the oldest delta in the outbox."},
	};
	st_outbox_info *ob = sh_calloc(sh_cluster_group_cap(n->conf), sizeof(*ob));
	bool *have = sh_calloc(sh_cluster_group_cap(n->conf), sizeof(*have));
	if (ob == NULL || have == NULL)
		b.oom = true;
	int64_t now_ms = node_wall_ms();
	for (uint32_t g = 0; !b.oom && g < sh_cluster_group_cap(n->conf); g++) {
		node_group *grp = node_group_acquire(n, g); /* reads its storage */
		have[g] = grp != NULL &&
		          st_outbox_get_info(node_group_env(grp), &ob[g], NULL) == SHOAL_OK;
		node_group_release(grp);
	}
	for (size_t k = 0; k < 4 && !b.oom; k++) {
		appendf(&b, "# HELP %s %s\n# TYPE %s gauge\n", ob_names[k][0], ob_names[k][1],
		        ob_names[k][0]);
		for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++) {
			if (!have[g])
				continue;
			if (k == 3) {
				double age = ob[g].depth > 0 && ob[g].oldest_ts_ms > 0 &&
				                     now_ms > ob[g].oldest_ts_ms
				                 ? (double)(now_ms - ob[g].oldest_ts_ms) / 1000.0
				                 : 0.0;
				appendf(&b, "%s{group=\"%u\"} %.3f\n", ob_names[k][0], g, age);
				continue;
			}
			uint64_t v = k == 0 ? ob[g].depth : k == 1 ? ob[g].last_seq : ob[g].shipped;
			appendf(&b, "%s{group=\"%u\"} %" PRIu64 "\n", ob_names[k][0], g, v);
		}
	}
	sh_free(ob);
	sh_free(have);
	node_ship_metrics(n->ship, appendf_any, &b);
	node_cap_metrics(n->cap, appendf_any, &b);
	node_scrub_metrics(n->scrub, appendf_any, &b);
	node_ttl_metrics(n->ttl, appendf_any, &b);

	if (b.oom) {
		sh_free(b.p);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "metrics: out of memory");
	}
	*text = b.p;
	*len = b.len;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* HTTP endpoint                                                             */
/* ------------------------------------------------------------------------ */

/* nng HTTP handler: GET /metrics (runs on an nng thread). */
static void metrics_cb(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	node *n = nng_http_handler_get_data(h);
	nng_http_res *res = NULL;
	char *text = NULL;
	size_t len = 0;
	int rv;

	if (node_metrics_render(n, &text, &len, NULL) != SHOAL_OK) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	if ((rv = nng_http_res_alloc(&res)) != 0 ||
	    (rv = nng_http_res_set_header(res, "Content-Type",
	                                  "text/plain; version=0.0.4; charset=utf-8")) != 0 ||
	    (rv = nng_http_res_copy_data(res, text, len)) != 0) {
		if (res != NULL)
			nng_http_res_free(res);
		sh_free(text);
		nng_aio_finish(aio, rv);
		return;
	}
	sh_free(text);
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

int node_metrics_start(node *n, const char *hostport, node_metrics **out, char *errmsg)
{
	char urltext[SH_ADDR_MAX + 32];
	nng_http_handler *h = NULL;
	int rv, rc;

	*out = NULL;
	node_metrics *m = sh_calloc(1, sizeof(*m));
	if (m == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "metrics: out of memory");
	m->node = n;
	snprintf(urltext, sizeof(urltext), "http://%s/", hostport);
	if ((rv = nng_url_parse(&m->url, urltext)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "metrics: bad address %s: %s", hostport,
		             nng_strerror(rv));
		goto err_after_alloc;
	}
	if ((rv = nng_http_server_hold(&m->server, m->url)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "metrics: HTTP server on %s: %s", hostport,
		             nng_strerror(rv));
		goto err_after_url;
	}
	if ((rv = nng_http_handler_alloc(&h, "/metrics", metrics_cb)) != 0 ||
	    (rv = nng_http_handler_set_method(h, "GET")) != 0 ||
	    (rv = nng_http_handler_set_data(h, n, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(m->server, h)) != 0) {
		if (h != NULL)
			nng_http_handler_free(h);
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "metrics: handler: %s", nng_strerror(rv));
		goto err_after_server;
	}
	if ((rv = nng_http_server_start(m->server)) != 0) {
		rc = sh_errf(errmsg, SHOAL_E_IO, "metrics: listen on %s: %s", hostport,
		             nng_strerror(rv));
		goto err_after_server;
	}
	node_logf(NODE_LOG_INFO, "metrics: serving http://%s/metrics", hostport);
	*out = m;
	return SHOAL_OK;

err_after_server:
	nng_http_server_release(m->server);
err_after_url:
	nng_url_free(m->url);
err_after_alloc:
	sh_free(m);
	return rc;
}

void node_metrics_stop(node_metrics *m)
{
	if (m == NULL)
		return;
	nng_http_server_stop(m->server);
	nng_http_server_release(m->server);
	nng_url_free(m->url);
	sh_free(m);
}
