/*
 * main.c -- shoal-router: command line, signals, start and stop.
 *
 *   shoal-router --config FILE [--listen URL] [--metrics HOST:PORT]
 *                [--contexts N] [--deadline-ms N]
 *                [--credentials FILE] [--http HOST:PORT] [--https HOST:PORT] [--workers N]
 *
 * --http serves DynamoDB's HTTP API (router/http.h) next to the native
 * protocol; --https serves it over TLS (https.c; the certificate is the
 * cluster's router.pem, so the cluster file needs [tls]).  --credentials (or its old name
 * --http-credentials) makes both ports require signatures by a key of FILE ("ACCESS_KEY_ID SECRET
 * [GRANT ...]" lines, http.h): SigV4 over HTTP, signed messages natively
 * (proto/wire_auth.h), each request authorized by the key's grants
 * (auth.c).  Without it any client may do anything, which the log says
 * loudly at start (and `shoal status` repeats).
 *
 * The listen URL and metrics address default to the cluster file's [router]
 * section.  "ready" goes to stdout once the listener is up; logs go to
 * stderr.  SIGTERM and SIGINT stop it gracefully: no new connections,
 * requests in progress finish (up to 5 s), then exit 0.  nng's reaper is
 * watched (common/nngwatch.h): if nng 1.5.2 loses a send and the reaper
 * stays stuck for 30 s, or a stop has not finished 15 s after the signal,
 * the router logs it and exits with status 70 (SH_EXIT_NNG_STUCK) for its
 * supervisor to start it again.
 *
 * --workers sets the HTTP endpoint's threads (signatures, JSON); every
 * request then runs in nng's callback threads (router.h: nothing blocks).
 * --http-head-timeout-ms (10000) and --http-body-timeout-ms (30000) are the
 * HTTP server's: the time a whole request head may take, and how long a
 * body or an answer may make no progress (router/httpd.h);
 * --http-body-min-rate (500) the bytes a second a body must average;
 * --https-handshake-rate (100) the HTTPS connections one address may begin a
 * second (0: no limit).
 *
 * Threads: signals are blocked before any thread starts, and the main thread
 * takes them with sigwait, so no handler ever runs inside a worker.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crash.h"
#include "common/alloc.h"
#include "common/nngwatch.h"
#include "router/http.h"
#include "router/router.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: shoal-router --config FILE [--listen URL] [--metrics HOST:PORT]\n"
	        "                    [--contexts N] [--deadline-ms N]\n"
	        "                    [--credentials FILE] [--http HOST:PORT] [--https HOST:PORT]\n"
	        "                    [--workers N]\n"
	        "                    [--http-head-timeout-ms N] [--http-body-timeout-ms N]\n"
	        "                    [--http-body-min-rate BYTES_PER_S]\n"
	        "                    [--https-handshake-rate PER_S_PER_ADDRESS]\n");
}

static bool parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < min || v > max)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* How long a graceful stop may take before the router exits anyway. */
#define ROUTER_STOP_MS 15000

static void reaper_stuck(void *unused, unsigned waited_ms)
{
	(void)unused;
	rt_log("nng's reaper has been stuck for %u ms (nng 1.5.2 lost a send: closed connections "
	       "are no longer freed nor dialled again; README, TLS): exiting with status %d for "
	       "the supervisor to start the router again",
	       waited_ms, SH_EXIT_NNG_STUCK);
	_exit(SH_EXIT_NNG_STUCK);
}

static void stop_late(void *unused)
{
	(void)unused;
	rt_log("the stop has not finished after %d ms (nng's reaper stuck?): exiting with "
	       "status %d",
	       ROUTER_STOP_MS, SH_EXIT_NNG_STUCK);
	_exit(SH_EXIT_NNG_STUCK);
}

int main(int argc, char **argv)
{
	const char *config = NULL, *listen = NULL, *metrics = NULL;
	const char *http = NULL, *https = NULL, *http_creds = NULL;
	rt_options opt;
	rt_options_default(&opt);
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"listen", required_argument, NULL, 'l'},
	    {"metrics", required_argument, NULL, 'm'},
	    {"workers", required_argument, NULL, 'w'},
	    {"contexts", required_argument, NULL, 'C'},
	    {"deadline-ms", required_argument, NULL, 'd'},
	    {"http", required_argument, NULL, 'H'},
	    {"https", required_argument, NULL, 'S'},
	    {"credentials", required_argument, NULL, 'K'},
	    {"http-credentials", required_argument, NULL, 'K'}, /* its old name */
	    {"http-head-timeout-ms", required_argument, NULL, 'T'},
	    {"http-body-timeout-ms", required_argument, NULL, 'B'},
	    {"http-body-min-rate", required_argument, NULL, 'M'},
	    {"https-handshake-rate", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "c:l:m:w:C:d:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			config = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'm':
			metrics = optarg;
			break;
		case 'w':
			if (!parse_u32(optarg, 1, 4096, &opt.http_workers)) {
				fprintf(stderr, "shoal-router: --workers must be 1..4096\n");
				return 2;
			}
			break;
		case 'C':
			if (!parse_u32(optarg, 1, 65536, &opt.contexts)) {
				fprintf(stderr, "shoal-router: --contexts must be 1..65536\n");
				return 2;
			}
			break;
		case 'd':
			if (!parse_u32(optarg, 100, 3600000, &opt.deadline_ms)) {
				fprintf(stderr,
				        "shoal-router: --deadline-ms must be 100..3600000\n");
				return 2;
			}
			break;
		case 'H':
			http = optarg;
			break;
		case 'S':
			https = optarg;
			break;
		case 'K':
			http_creds = optarg;
			break;
		case 'T': /* HTTP timeouts (router/httpd.h) */
		case 'B':
			if (!parse_u32(optarg, 100, 3600000,
			               ch == 'T' ? &opt.http_head_ms : &opt.http_body_ms)) {
				fprintf(stderr,
				        "shoal-router: --http-%s-timeout-ms must be 100..3600000\n",
				        ch == 'T' ? "head" : "body");
				return 2;
			}
			break;
		case 'M':
			if (!parse_u32(optarg, 1, 1u << 30, &opt.http_body_rate)) {
				fprintf(stderr,
				        "shoal-router: --http-body-min-rate must be 1..%u "
				        "(bytes a second)\n",
				        1u << 30);
				return 2;
			}
			break;
		case 'R':
			if (!parse_u32(optarg, 0, 1000000, &opt.https_handshakes)) {
				fprintf(stderr,
				        "shoal-router: --https-handshake-rate must be "
				        "0..1000000 (connections a second from one address; "
				        "0: no limit)\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (config == NULL || optind != argc) {
		usage(stderr);
		return 2;
	}

	char errmsg[SH_ERRMSG_SIZE];
	sh_cluster_conf *conf = sh_malloc(sizeof(*conf));
	if (conf == NULL) {
		fprintf(stderr, "shoal-router: out of memory\n");
		return 1;
	}
	if (sh_cluster_load(config, conf, errmsg) != SHOAL_OK) {
		fprintf(stderr, "shoal-router: %s\n", errmsg);
		sh_free(conf);
		return 1;
	}
	if (listen == NULL)
		listen = conf->router_listen[0] != '\0' ? conf->router_listen : NULL;
	if (listen == NULL) {
		fprintf(stderr, "shoal-router: no listen address (--listen or [router] listen)\n");
		sh_free(conf);
		return 1;
	}
	if (metrics == NULL && conf->router_metrics[0] != '\0')
		metrics = conf->router_metrics;

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sh_crash_install(2, "shoal-router");

	static rt_router rt;
	static rt_server srv;
	rt_http *web = NULL;
	rt_creds creds = {0};
	int status = 1;
	char listen_copy[SH_ADDR_MAX];
	snprintf(listen_copy, sizeof(listen_copy), "%s", listen);
	char metrics_copy[SH_ADDR_MAX] = "";
	if (metrics != NULL)
		snprintf(metrics_copy, sizeof(metrics_copy), "%s", metrics);
	if (rt_router_init(&rt, conf, &opt, errmsg) != SHOAL_OK) {
		fprintf(stderr, "shoal-router: %s\n", errmsg);
		sh_free(conf);
		return 1;
	}
	if (metrics_copy[0] != '\0' && rt_metrics_start(&rt, metrics_copy, errmsg) != SHOAL_OK) {
		rt_log("%s", errmsg);
		goto err_after_router;
	}
	if (http_creds != NULL) {
		if (rt_creds_load(http_creds, &creds, errmsg) != SHOAL_OK) {
			rt_log("%s", errmsg);
			goto err_after_metrics;
		}
		if (creds.others_can_read)
			rt_log("WARNING: credentials file %s is readable by its group or others: "
			       "chmod 600 it",
			       http_creds);
		rt.creds = &creds; /* before any listener: every request sees it */
		rt_log("authentication: %u keys from %s", creds.n, http_creds);
	}
	rt_log("%s", rt_auth_describe(&rt));
	/* DescribeEndpoints: the HTTP API's address when served, else the
	 * native one ("tcp://h:p" -> "h:p"). */
	const char *ep = https != NULL ? https : http != NULL ? http : listen_copy;
	const char *scheme = strstr(ep, "://");
	snprintf(rt.endpoint, sizeof(rt.endpoint), "%s", scheme != NULL ? scheme + 3 : ep);
	if (rt_server_start(&srv, &rt, listen_copy, errmsg) != SHOAL_OK) {
		rt_log("%s", errmsg);
		goto err_after_creds;
	}
	if ((http != NULL || https != NULL) &&
	    rt_http_start(&web, &rt, http, https, errmsg) != SHOAL_OK) {
		rt_log("%s", errmsg);
		goto err_after_server;
	}
	if (http != NULL)
		rt_log("DynamoDB HTTP API on http://%s (%s)", http,
		       http_creds != NULL ? "SigV4 verified" : "any credentials accepted");
	if (https != NULL)
		rt_log("DynamoDB HTTP API on https://%s (%s)", https,
		       http_creds != NULL ? "SigV4 verified" : "any credentials accepted");
	rt_log("listening on %s (%u contexts, %u nodes, %u groups)%s%s", listen_copy, opt.contexts,
	       rt.conf->n_nodes, rt.conf->groups, metrics_copy[0] ? ", metrics on " : "",
	       metrics_copy);
	sh_watch_conf watch = {.stuck = reaper_stuck};
	if (sh_watch_start(&watch, errmsg) != SHOAL_OK)
		rt_log("%s: nng's reaper is not watched", errmsg);
	printf("ready\n");
	fflush(stdout);

	int sig = 0;
	sigwait(&sigs, &sig);
	rt_log("signal %d: stopping", sig);
	sh_watch_stop();
	sh_watch_deadline(ROUTER_STOP_MS, stop_late, NULL);
	rt_http_stop(web);
	status = 0;
err_after_server:
	rt_server_stop(&srv, 5000);
err_after_creds:
err_after_metrics:
	rt_metrics_stop(&rt);
err_after_router:
	rt_router_fini(&rt);
	rt_creds_free(&creds); /* jobs read them until the router is freed */
	if (status == 0)
		rt_log("stopped");
	return status;
}
