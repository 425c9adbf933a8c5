/*
 * tl_netns.h -- a test cluster on a real network (each shoal-node and
 * shoal-router in its own network namespace, `cluster.sh up --netns`) and the
 * kernel faults of deploy/netns.sh, for integration tests.  Every call runs
 * the script, which prints what it did; the layout and the meaning of each
 * fault are documented there, once.
 *
 * Endpoints are strings: a node id ("2"), a router ("r1"), or "host" (the
 * root namespace, where the test process and its clients run: they reach the
 * routers over the bridge).  The cluster is stopped and its network removed
 * by tl_cluster_down, as for any cluster (also when a test fails).
 */
#ifndef SHOAL_TL_NETNS_H
#define SHOAL_TL_NETNS_H

#include <stdbool.h>
#include <stddef.h>

#include "tl_cluster.h"

/* Whether namespaces, veths and nftables work here (root, iproute2,
 * nftables); if not, false and the reason in why. */
bool tl_netns_available(char *why, size_t n);

/* tl_cluster_up_opts with --netns: namespaces PREFIX-n<i>, PREFIX-r<r>. */
bool tl_netns_up(tl_cluster *c, const char *prefix, int nodes, int routers, int groups);
/* The same with more options of `cluster.sh up` (NULL: none). */
bool tl_netns_up_opts(tl_cluster *c, const char *prefix, int nodes, int routers, int groups,
                      const char *opts);

/* Faults.  True if the script succeeded. */
bool tl_netns_cut(const tl_cluster *c, const char *a, const char *b);    /* both ways */
bool tl_netns_oneway(const tl_cluster *c, const char *a, const char *b); /* a cannot send to b */
bool tl_netns_isolate(const tl_cluster *c, const char *a); /* from all nodes; routers reach it */
bool tl_netns_heal(const tl_cluster *c, const char *a, const char *b);
bool tl_netns_heal_all(const tl_cluster *c);
bool tl_netns_loss(const tl_cluster *c, const char *a, int pct); /* 0 removes it */
/* A slow link (tc tbf): rate like "1mbit"; "off" removes it. */
bool tl_netns_slow(const tl_cluster *c, const char *a, const char *rate);
/* tc netem ARGS on a's veth ("off" removes it): 0 done, 3 the kernel has no
 * netem, other values failed. */
int tl_netns_netem(const tl_cluster *c, const char *a, const char *args);

/* Real traffic: a TCP connect from a to b:port within 1 s (1 packets flow
 * both ways, 0 no answer, -1 the probe failed), or one UDP datagram from a to
 * b:port (one direction). */
int tl_netns_probe(const tl_cluster *c, const char *a, const char *b, int port);
int tl_netns_probe_udp(const tl_cluster *c, const char *a, const char *b, int port);

#endif
