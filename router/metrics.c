/*
 * metrics.c -- the router's counters and their Prometheus text exposition,
 * served by nng's HTTP server at GET /metrics.
 *
 * Counters are relaxed atomics bumped by the worker threads; the HTTP
 * callback (an nng thread) reads them without locks, so a scrape may see one
 * request's counter before its histogram bucket -- harmless for monitoring.
 *
 * Series:
 *   shoal_router_requests_total{op}                     counter
 *   shoal_router_errors_total{op,exception}             counter (DynamoDB names)
 *   shoal_router_request_duration_seconds{op}           histogram
 *   shoal_router_retries_total{reason}                  counter (not_leader, timeout, ...)
 *   shoal_router_repairs_total                          counter
 *   shoal_router_leader_changes_total                   counter
 *   shoal_router_restarts_total                         counter (table recreated)
 *   shoal_router_wrong_group_total                      counter (partition moved)
 *   shoal_router_node_messages_total{class}             counter (messages to nodes)
 *   shoal_router_node_connections{node}                 gauge (0: not connected)
 *   shoal_router_node_batches_total / _batched_requests_total (NodeRequest batches)
 *   shoal_router_client_batches_total / _batched_requests_total (Request batches)
 *   shoal_router_job_pool_jobs, _bytes                  gauge (idle jobs kept, their arenas)
 *   shoal_router_txn_total{path}                        counter (single group, two-phase)
 *   shoal_router_txn_get_rounds_total, _waits_total     counter (TransactGetItems)
 *   shoal_router_https_connections_total{result}        counter (begun, refused: httpd.h)
 *   shoal_router_listener_relistens_total               counter (common/tls.h's guard)
 *   shoal_router_dialer_redials_total                   counter (common/tls.h's keeper)
 *   shoal_router_reaper_probes_total, _probe_longest_seconds  nng's reaper (common/nngwatch.h)
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/nngwatch.h"
#include "common/tls.h"
#include "router/router.h"

static const double lat_bounds[RT_LAT_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};

void rt_metrics_request(rt_metrics *m, uint32_t slot, int code, int64_t micros)
{
	if (slot >= RT_OPS_MAX)
		slot = RT_OPS_MAX - 1;
	if (micros < 0)
		micros = 0;
	atomic_fetch_add_explicit(&m->requests[slot], 1, memory_order_relaxed);
	if (code != SHOAL_OK && code >= 0 && code < SHOAL_E__COUNT)
		atomic_fetch_add_explicit(&m->errors[slot][code], 1, memory_order_relaxed);
	uint32_t b = 0;
	while (b < RT_LAT_BUCKETS && (double)micros / 1e6 > lat_bounds[b])
		b++;
	atomic_fetch_add_explicit(&m->lat_bucket[slot][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->lat_sum_us[slot], (uint64_t)micros, memory_order_relaxed);
}

typedef struct out {
	char *buf;
	size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->cap ? o->cap - o->len : 0;
	int w = vsnprintf(room > 0 ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->len += (size_t)w;
}

static uint64_t get(const _Atomic uint64_t *x)
{
	return atomic_load_explicit(x, memory_order_relaxed);
}

const char *rt_slot_name(uint32_t slot)
{
	return slot < SHOAL_OP__COUNT ? wire_ops[slot].name : "Unknown";
}

/* Slots that appear in the output: the registry's operations, and
 * "Unknown" if anything was counted there. */
static bool slot_shown(const rt_metrics *m, uint32_t s)
{
	return s < SHOAL_OP__COUNT || (s == RT_OPS_MAX - 1 && get(&m->requests[s]) > 0);
}

size_t rt_metrics_render(const rt_metrics *m, const rt_router *rt, char *buf, size_t cap)
{
	out o = {buf, cap, 0};
	if (cap > 0)
		buf[0] = '\0';
	put(&o, "# HELP shoal_router_requests_total Client requests by operation.\n"
	        "# TYPE shoal_router_requests_total counter\n");
	for (uint32_t s = 0; s < RT_OPS_MAX; s++)
		if (slot_shown(m, s))
			put(&o, "shoal_router_requests_total{op=\"%s\"} %llu\n", rt_slot_name(s),
			    (unsigned long long)get(&m->requests[s]));

	put(&o, "# HELP shoal_router_errors_total Failed client requests by operation and "
	        "exception.\n"
	        "# TYPE shoal_router_errors_total counter\n");
	for (uint32_t s = 0; s < RT_OPS_MAX; s++) {
		if (!slot_shown(m, s))
			continue;
		/* Several codes share an exception name: sum them, first code
		 * of each name prints. */
		for (int c = 1; c < SHOAL_E__COUNT; c++) {
			const char *name = shoal_exception_name(c);
			bool first = true;
			for (int d = 1; d < c && first; d++)
				first = strcmp(shoal_exception_name(d), name) != 0;
			if (!first)
				continue;
			uint64_t n = 0;
			for (int d = c; d < SHOAL_E__COUNT; d++)
				if (strcmp(shoal_exception_name(d), name) == 0)
					n += get(&m->errors[s][d]);
			if (n > 0)
				put(&o,
				    "shoal_router_errors_total{op=\"%s\",exception=\"%s\"} %llu\n",
				    rt_slot_name(s), name, (unsigned long long)n);
		}
	}

	put(&o, "# HELP shoal_router_request_duration_seconds Client request latency.\n"
	        "# TYPE shoal_router_request_duration_seconds histogram\n");
	for (uint32_t s = 0; s < RT_OPS_MAX; s++) {
		if (!slot_shown(m, s) || get(&m->requests[s]) == 0)
			continue;
		uint64_t cum = 0;
		for (uint32_t b = 0; b <= RT_LAT_BUCKETS; b++) {
			cum += get(&m->lat_bucket[s][b]);
			if (b < RT_LAT_BUCKETS)
				put(&o,
				    "shoal_router_request_duration_seconds_bucket{op=\"%s\",le=\"%"
				    "g\"} "
				    "%llu\n",
				    rt_slot_name(s), lat_bounds[b], (unsigned long long)cum);
			else
				put(&o,
				    "shoal_router_request_duration_seconds_bucket{op=\"%s\",le=\"+"
				    "Inf\"} "
				    "%llu\n",
				    rt_slot_name(s), (unsigned long long)cum);
		}
		put(&o, "shoal_router_request_duration_seconds_sum{op=\"%s\"} %.6f\n",
		    rt_slot_name(s), (double)get(&m->lat_sum_us[s]) / 1e6);
		put(&o, "shoal_router_request_duration_seconds_count{op=\"%s\"} %llu\n",
		    rt_slot_name(s), (unsigned long long)cum);
	}

	put(&o, "# HELP shoal_router_retries_total Node requests retried, by the reason.\n"
	        "# TYPE shoal_router_retries_total counter\n");
	for (int k = 1; k < SH_OUT__COUNT; k++)
		put(&o, "shoal_router_retries_total{reason=\"%s\"} %llu\n",
		    sh_outcome_name((sh_outcome)k), (unsigned long long)get(&m->retries[k]));
	put(&o,
	    "# HELP shoal_router_repairs_total Table definitions re-sent to a data group.\n"
	    "# TYPE shoal_router_repairs_total counter\n"
	    "shoal_router_repairs_total %llu\n",
	    (unsigned long long)get(&m->repairs));
	put(&o,
	    "# HELP shoal_router_https_connections_total HTTPS connections accepted (begun) and "
	    "closed at once for their address's handshake rate (refused).\n"
	    "# TYPE shoal_router_https_connections_total counter\n"
	    "shoal_router_https_connections_total{result=\"begun\"} %llu\n"
	    "shoal_router_https_connections_total{result=\"refused\"} %llu\n",
	    (unsigned long long)get(&m->http.https_begun),
	    (unsigned long long)get(&m->http.https_refused));
	put(&o,
	    "# HELP shoal_router_listener_relistens_total TLS listeners found stopped and "
	    "listening again (nng 1.5.2, common/tls.h sh_listen_guard).\n"
	    "# TYPE shoal_router_listener_relistens_total counter\n"
	    "shoal_router_listener_relistens_total %llu\n",
	    (unsigned long long)sh_listen_guard_relistens());
	put(&o,
	    "# HELP shoal_router_dialer_redials_total TLS dialers found stopped or hung and "
	    "dialled "
	    "again (nng 1.5.2, common/tls.h's dial keeper).\n"
	    "# TYPE shoal_router_dialer_redials_total counter\n"
	    "shoal_router_dialer_redials_total %llu\n",
	    (unsigned long long)sh_dial_keeper_redials());
	uint64_t probes;
	unsigned longest_ms;
	sh_watch_stats(&probes, &longest_ms);
	put(&o,
	    "# HELP shoal_router_reaper_probes_total Probes of nng's reaper finished "
	    "(common/nngwatch.h; one stuck for 30 s exits the router).\n"
	    "# TYPE shoal_router_reaper_probes_total counter\n"
	    "shoal_router_reaper_probes_total %llu\n"
	    "# HELP shoal_router_reaper_probe_longest_seconds The longest of them.\n"
	    "# TYPE shoal_router_reaper_probe_longest_seconds gauge\n"
	    "shoal_router_reaper_probe_longest_seconds %.3f\n",
	    (unsigned long long)probes, longest_ms / 1000.0);
	put(&o,
	    "# HELP shoal_router_leader_changes_total Changes of a group's believed leader.\n"
	    "# TYPE shoal_router_leader_changes_total counter\n"
	    "shoal_router_leader_changes_total %llu\n",
	    (unsigned long long)get(&m->leader_changes));
	put(&o,
	    "# HELP shoal_router_restarts_total Requests run again because their table was "
	    "recreated through another router while they were routed.\n"
	    "# TYPE shoal_router_restarts_total counter\n"
	    "shoal_router_restarts_total %llu\n",
	    (unsigned long long)get(&m->restarts));
	put(&o,
	    "# HELP shoal_router_wrong_group_total Node answers WRONG_GROUP: the group no longer "
	    "serves a partition (moved or being moved); the request is run again on a new "
	    "map.\n"
	    "# TYPE shoal_router_wrong_group_total counter\n"
	    "shoal_router_wrong_group_total %llu\n",
	    (unsigned long long)get(&m->wrong_group));
	if (rt != NULL && rt->place != NULL)
		put(&o,
		    "# HELP shoal_router_map_epoch The epoch of the cluster map the router routes "
		    "with.\n"
		    "# TYPE shoal_router_map_epoch gauge\n"
		    "shoal_router_map_epoch %llu\n"
		    "# HELP shoal_router_map_refreshes_total Refreshes of the cluster map "
		    "(map_get).\n"
		    "# TYPE shoal_router_map_refreshes_total counter\n"
		    "shoal_router_map_refreshes_total %llu\n",
		    (unsigned long long)sh_place_epoch(rt->place),
		    (unsigned long long)rt_map_refreshes(rt));
	uint64_t msgs[RT_CLASS__COUNT] = {0}, batches = 0, batched = 0;
	uint32_t n_nodes = rt != NULL && rt->conf != NULL
	                       ? atomic_load_explicit(&rt->n_nodes, memory_order_acquire)
	                       : 0;
	for (uint32_t i = 0; i < n_nodes; i++)
		for (int k = 0; k < RT_CLASS__COUNT; k++) {
			const wire_lanes *l = &rt->nodes[i].lanes[k];
			msgs[k] += atomic_load_explicit(&l->messages, memory_order_relaxed);
			batches += atomic_load_explicit(&l->batches, memory_order_relaxed);
			batched += atomic_load_explicit(&l->batched, memory_order_relaxed);
		}
	put(&o,
	    "# HELP shoal_router_node_messages_total Messages sent to nodes, by lane class "
	    "(eventually consistent reads; writes and consistent reads).\n"
	    "# TYPE shoal_router_node_messages_total counter\n"
	    "shoal_router_node_messages_total{class=\"read\"} %llu\n"
	    "shoal_router_node_messages_total{class=\"wait\"} %llu\n",
	    (unsigned long long)msgs[RT_CLASS_READ], (unsigned long long)msgs[RT_CLASS_WAIT]);
	put(&o, "# HELP shoal_router_node_connections Connections to each node (0: not "
	        "connected; nng redials).\n# TYPE shoal_router_node_connections gauge\n");
	for (uint32_t i = 0; i < n_nodes; i++)
		put(&o, "shoal_router_node_connections{node=\"%u\"} %d\n", rt->nodes[i].id,
		    atomic_load(&rt->nodes[i].conns));
	put(&o,
	    "# HELP shoal_router_node_batches_total Messages to a node that carried several "
	    "requests (a NodeRequest batch), and the requests they carried.\n"
	    "# TYPE shoal_router_node_batches_total counter\n"
	    "shoal_router_node_batches_total %llu\n"
	    "# TYPE shoal_router_node_batched_requests_total counter\n"
	    "shoal_router_node_batched_requests_total %llu\n",
	    (unsigned long long)batches, (unsigned long long)batched);
	put(&o,
	    "# HELP shoal_router_client_batches_total Client messages that carried several "
	    "requests (a Request batch), and the requests they carried.\n"
	    "# TYPE shoal_router_client_batches_total counter\n"
	    "shoal_router_client_batches_total %llu\n"
	    "# TYPE shoal_router_client_batched_requests_total counter\n"
	    "shoal_router_client_batched_requests_total %llu\n",
	    (unsigned long long)get(&m->client_batches),
	    (unsigned long long)get(&m->client_batched));
	uint32_t pooled = 0;
	size_t pooled_bytes = 0;
	if (rt != NULL && rt->pool_init) {
		pthread_mutex_t *pool_mu = (pthread_mutex_t *)&rt->pool_mu; /* read only */
		pthread_mutex_lock(pool_mu);
		pooled = rt->n_pool;
		pooled_bytes = rt->pool_bytes;
		pthread_mutex_unlock(pool_mu);
	}
	put(&o,
	    "# HELP shoal_router_job_pool_jobs Idle jobs kept for reuse (at most %u), and the "
	    "bytes of arenas they hold (at most %u).\n"
	    "# TYPE shoal_router_job_pool_jobs gauge\n"
	    "shoal_router_job_pool_jobs %u\n"
	    "# TYPE shoal_router_job_pool_bytes gauge\n"
	    "shoal_router_job_pool_bytes %zu\n",
	    RT_JOB_POOL_KEEP, RT_JOB_POOL_BYTES, pooled, pooled_bytes);
	put(&o,
	    "# HELP shoal_router_txn_total TransactWriteItems run in one group (one Raft "
	    "entry) and across groups (two-phase commit).\n"
	    "# TYPE shoal_router_txn_total counter\n"
	    "shoal_router_txn_total{path=\"single\"} %llu\n"
	    "shoal_router_txn_total{path=\"two_phase\"} %llu\n",
	    (unsigned long long)get(&m->txn_single), (unsigned long long)get(&m->txn_2pc));
	put(&o,
	    "# HELP shoal_router_txn_get_rounds_total Rounds of reads of TransactGetItems "
	    "across groups (2 when nothing interfered), and the pauses for items held by a "
	    "transaction in progress.\n"
	    "# TYPE shoal_router_txn_get_rounds_total counter\n"
	    "shoal_router_txn_get_rounds_total %llu\n"
	    "# TYPE shoal_router_txn_get_waits_total counter\n"
	    "shoal_router_txn_get_waits_total %llu\n",
	    (unsigned long long)get(&m->txn_get_rounds),
	    (unsigned long long)get(&m->txn_get_waits));
	return o.len;
}

/* nng HTTP thread. */
static void metrics_cb(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	rt_router *rt = nng_http_handler_get_data(h);
	size_t cap = 64 * 1024;
	char *buf = sh_malloc(cap);
	size_t need = buf != NULL ? rt_metrics_render(&rt->metrics, rt, buf, cap) : 0;
	if (buf != NULL && need >= cap) {
		sh_free(buf);
		cap = need + 1;
		buf = sh_malloc(cap);
		if (buf != NULL)
			need = rt_metrics_render(&rt->metrics, rt, buf, cap);
	}
	nng_http_res *res;
	int rv = buf != NULL ? nng_http_res_alloc(&res) : NNG_ENOMEM;
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", "text/plain; version=0.0.4");
	if (rv == 0)
		rv = nng_http_res_copy_data(res, buf, need < cap ? need : cap - 1);
	sh_free(buf);
	if (rv != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

int rt_metrics_start(rt_router *rt, const char *hostport, char *errmsg)
{
	char urlbuf[SH_ADDR_MAX + 16];
	snprintf(urlbuf, sizeof(urlbuf), "http://%s", hostport);
	nng_url *url;
	nng_http_handler *h;
	int rv = nng_url_parse(&url, urlbuf);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "metrics address %s: %s", hostport,
		               nng_strerror(rv));
	rv = nng_http_server_hold(&rt->http, url);
	nng_url_free(url);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "metrics server %s: %s", hostport,
		               nng_strerror(rv));
	if ((rv = nng_http_handler_alloc(&h, "/metrics", metrics_cb)) != 0)
		goto err_after_server;
	if ((rv = nng_http_handler_set_method(h, "GET")) != 0 ||
	    (rv = nng_http_handler_set_data(h, rt, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(rt->http, h)) != 0) {
		nng_http_handler_free(h);
		goto err_after_server;
	}
	if ((rv = nng_http_server_start(rt->http)) != 0)
		goto err_after_server;
	return SHOAL_OK;

err_after_server:
	nng_http_server_release(rt->http);
	rt->http = NULL;
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "metrics server %s: %s", hostport,
	               nng_strerror(rv));
}

void rt_metrics_stop(rt_router *rt)
{
	if (rt->http == NULL)
		return;
	nng_http_server_stop(rt->http);
	nng_http_server_release(rt->http);
	rt->http = NULL;
}
