/*
 * main.c -- shoal-node: hosts this node's replicas of the cluster's storage
 * groups and serves routers.
 *
 *   shoal-node --config FILE --id N [--dir DIR] [--log FILE] [--workers W]
 *              [--outbox-limit N] [--join]
 *
 * Loads the cluster file (common/cluster.h), opens every group the cluster
 * map places on node N under DIR (default: the node's `dir =`; the map is
 * DIR/cluster.map, or learnt from the file's other nodes: node/mapsync.c),
 * serves NodeRequests
 * on the node's rpc URL and Prometheus metrics on its metrics address, and
 * stops gracefully on SIGTERM or SIGINT (exit status 0).  Logs go to stderr
 * (or FILE) with timestamps; stdout carries exactly one line, "ready", once
 * the node serves, so that launchers can wait for it.
 *
 * --outbox-limit N: a group whose leader has more than N index deltas not
 * yet shipped to their index partitions refuses base writes with
 * ProvisionedThroughputExceededException until it catches up (default
 * 100000, or the cluster file's [cluster] outbox_limit).
 *
 * --join: the node joins a running cluster (deploy/cluster.sh add-node
 * appends its [node.N] section to the file and starts it so): it never
 * bootstraps a Raft group, learns the cluster map from the file's other
 * nodes, and opens the groups the map gives it as they are given, empty,
 * for their leaders to fill (node/member.c).  Its own addresses are its
 * [node.N] section's, as without --join.
 *
 * Restart in place: when the node asks for it (node_restart: the replica
 * scrub marked a divergent replica's storage for rebuild, node/scrub.c), it
 * stops gracefully and then re-executes itself (/proc/self/exe) with the
 * same arguments, so that its pid -- and the pid file launchers keep --
 * stays the same; the new image opens the marked environment empty and
 * raft rebuilds it.  Every descriptor has been closed by then (the log's
 * too), the signal mask is cleared, and "ready" is printed again.
 *
 * nng's reaper is watched (common/nngwatch.h): if nng 1.5.2 loses a send and
 * its reaper stays stuck for 30 s, the node logs it and exits with status 70
 * for its supervisor to start it again; a stop that has not finished 25 s
 * after it began exits the same way.
 *
 * Exit status: 0 after a graceful stop, 1 if the node could not start, 2 for
 * a usage or configuration error, 70 (SH_EXIT_NNG_STUCK) as above.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crash.h"
#include "common/cluster.h"
#include "common/nngwatch.h"
#include "node/node.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: shoal-node --config FILE --id N [--dir DIR] [--log FILE] "
	           "[--workers W] [--outbox-limit N] [--join]\n");
}

/* How long a graceful stop may take before the node exits anyway: under
 * shoal-node.service's TimeoutStopSec (30 s), over deploy/cluster.sh's wait
 * before its SIGKILL (20 s), and long enough for a stop that waits for a
 * Raft snapshot being written. */
#define NODE_STOP_MS 25000

static void reaper_stuck(void *unused, unsigned waited_ms)
{
	(void)unused;
	node_logf(NODE_LOG_ERROR,
	          "nng's reaper has been stuck for %u ms (nng 1.5.2 lost a send: closed "
	          "connections are no longer freed nor dialled again; README, TLS): exiting "
	          "with status %d for the supervisor to start the node again",
	          waited_ms, SH_EXIT_NNG_STUCK);
	_exit(SH_EXIT_NNG_STUCK);
}

static void stop_late(void *unused)
{
	(void)unused;
	node_logf(NODE_LOG_ERROR,
	          "the stop has not finished after %d ms (nng's reaper stuck?): exiting "
	          "with status %d",
	          NODE_STOP_MS, SH_EXIT_NNG_STUCK);
	_exit(SH_EXIT_NNG_STUCK);
}

/* The node begins to stop: the watch ends, and the stop gets its deadline. */
static void stopping(void *unused)
{
	(void)unused;
	sh_watch_stop();
	sh_watch_deadline(NODE_STOP_MS, stop_late, NULL);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	if (s == NULL || *s == '\0' || *s == '-')
		return -1;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v > max)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static sh_cluster_conf conf; /* large: not on the stack */
	static const struct option long_opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"id", required_argument, NULL, 'i'},
	    {"dir", required_argument, NULL, 'd'},
	    {"log", required_argument, NULL, 'l'},
	    {"workers", required_argument, NULL, 'w'},
	    {"outbox-limit", required_argument, NULL, 'o'},
	    {"join", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *config = NULL, *dir = NULL, *log = NULL;
	unsigned long id = 0, workers = 0, outbox_limit = 0;
	bool join = false;
	char errmsg[SH_ERRMSG_SIZE] = "";
	int c;

	while ((c = getopt_long(argc, argv, "c:i:d:l:w:o:jh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'i':
			if (parse_uint(optarg, SH_MAX_NODES * 1000UL, &id) != 0 || id == 0) {
				fprintf(stderr, "shoal-node: --id wants a node id >= 1\n");
				return 2;
			}
			break;
		case 'd':
			dir = optarg;
			break;
		case 'l':
			log = optarg;
			break;
		case 'w':
			if (parse_uint(optarg, 1024, &workers) != 0 || workers == 0) {
				fprintf(stderr, "shoal-node: --workers wants 1..1024\n");
				return 2;
			}
			break;
		case 'o':
			if (parse_uint(optarg, 1000000000UL, &outbox_limit) != 0 ||
			    outbox_limit == 0) {
				fprintf(stderr, "shoal-node: --outbox-limit wants 1..1000000000\n");
				return 2;
			}
			break;
		case 'j':
			join = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (config == NULL || id == 0 || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (node_log_open(log, (uint32_t)id, errmsg) != SHOAL_OK) {
		fprintf(stderr, "shoal-node: --log: %s\n", errmsg);
		return 2;
	}
	/* A peer closing a connection must not kill us (libuv and nng write
	 * to sockets that may have been closed). */
	signal(SIGPIPE, SIG_IGN);
	char who[32];
	snprintf(who, sizeof(who), "shoal-node %lu", id);
	sh_crash_install(node_log_fd(), who);

	if (sh_cluster_load(config, &conf, errmsg) != SHOAL_OK) {
		node_logf(NODE_LOG_ERROR, "cluster file %s: %s", config, errmsg);
		return 2;
	}
	const sh_node_conf *self = sh_cluster_node(&conf, (uint32_t)id);
	if (self == NULL) {
		node_logf(NODE_LOG_ERROR, "cluster file %s has no [node.%lu]", config, id);
		return 2;
	}
	if (dir == NULL && self->dir[0] != '\0')
		dir = self->dir;
	if (dir == NULL) {
		node_logf(NODE_LOG_ERROR,
		          "no data directory: pass --dir or set dir = in [node.%lu] of %s", id,
		          config);
		return 2;
	}

	node_options opts = {
	    .conf = &conf,
	    .id = (uint32_t)id,
	    .dir = dir,
	    .workers = (unsigned)workers,
	    .outbox_limit = outbox_limit != 0 ? outbox_limit : conf.outbox_limit,
	    .signals = true,
	    .join = join,
	    .stopping = stopping,
	};
	node *n;
	if (node_open(&opts, &n, errmsg) != SHOAL_OK) {
		node_logf(NODE_LOG_ERROR, "could not start: %s", errmsg);
		node_log_close();
		return 1;
	}
	sh_watch_conf watch = {.stuck = reaper_stuck};
	if (sh_watch_start(&watch, errmsg) != SHOAL_OK)
		node_logf(NODE_LOG_WARN, "%s: nng's reaper is not watched", errmsg);
	printf("ready\n");
	fflush(stdout);
	node_run(n);
	bool restart = node_restart_requested(n);
	stopping(NULL); /* node.c called it as the stop began (idempotent) */
	node_close(n);
	if (restart) {
		node_logf(NODE_LOG_INFO, "restarting in place (same pid)");
		node_log_close();
		fflush(NULL);
		sigset_t none;
		sigemptyset(&none);
		pthread_sigmask(SIG_SETMASK, &none, NULL);
		execv("/proc/self/exe", argv);
		/* Only on failure: say so where the log goes, then exit. */
		int e = errno;
		if (node_log_open(log, (uint32_t)id, errmsg) == SHOAL_OK) {
			node_logf(NODE_LOG_ERROR, "restart: execv(/proc/self/exe): %s",
			          strerror(e));
			node_log_close();
		}
		return 1;
	}
	node_logf(NODE_LOG_INFO, "exit");
	node_log_close();
	return 0;
}
