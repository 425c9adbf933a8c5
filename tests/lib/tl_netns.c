#include "tl_netns.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* Runs `deploy/cluster.sh <args> --dir D`; its output goes to the test's
 * stdout (what each fault did is part of the test's log).  Exit code. */
static int run(const tl_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(const tl_cluster *c, const char *fmt, ...)
{
	char args[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	fflush(stdout);
	return tl_sh("'%s/deploy/cluster.sh' %s --dir '%s'", c->root, args, c->dir);
}

bool tl_netns_available(char *why, size_t n)
{
	tl_cluster c;
	memset(&c, 0, sizeof(c));
	tl_cluster_locate(&c);
	char path[1100];
	const char *tmp = tl_tmpdir("netns-check");
	snprintf(path, sizeof(path), "%s/why", tmp);
	int rc = tl_sh("'%s/deploy/netns.sh' check >'%s' 2>&1", c.root, path);
	char *text = tl_read_file(path);
	tl_rmtree(tmp);
	if (rc == 0) {
		free(text);
		return true;
	}
	snprintf(why, n, "%s", text != NULL && text[0] != '\0' ? text : "netns.sh check failed");
	why[strcspn(why, "\n")] = '\0';
	free(text);
	return false;
}

bool tl_netns_up(tl_cluster *c, const char *prefix, int nodes, int routers, int groups)
{
	return tl_netns_up_opts(c, prefix, nodes, routers, groups, NULL);
}

bool tl_netns_up_opts(tl_cluster *c, const char *prefix, int nodes, int routers, int groups,
                      const char *opts)
{
	char all[512];
	snprintf(all, sizeof(all), "--netns %s %s", prefix, opts != NULL ? opts : "");
	return tl_cluster_up_opts(c, nodes, routers, groups, all);
}

bool tl_netns_cut(const tl_cluster *c, const char *a, const char *b)
{
	return run(c, "cut %s %s", a, b) == 0;
}

bool tl_netns_oneway(const tl_cluster *c, const char *a, const char *b)
{
	return run(c, "oneway %s %s", a, b) == 0;
}

bool tl_netns_isolate(const tl_cluster *c, const char *a)
{
	return run(c, "isolate %s", a) == 0;
}

bool tl_netns_heal(const tl_cluster *c, const char *a, const char *b)
{
	return run(c, "heal %s %s", a, b) == 0;
}

bool tl_netns_heal_all(const tl_cluster *c)
{
	return run(c, "heal-all") == 0;
}

bool tl_netns_loss(const tl_cluster *c, const char *a, int pct)
{
	return run(c, "loss %s %d", a, pct) == 0;
}

bool tl_netns_slow(const tl_cluster *c, const char *a, const char *rate)
{
	return run(c, "slow %s %s", a, rate) == 0;
}

int tl_netns_netem(const tl_cluster *c, const char *a, const char *args)
{
	return run(c, "netem %s %s", a, args);
}

static int probe(const tl_cluster *c, const char *kind, const char *a, const char *b, int port)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/probe.out", c->dir);
	int rc = tl_sh("'%s/deploy/cluster.sh' %s %s %s %d --dir '%s' >'%s' 2>&1", c->root, kind, a,
	               b, port, c->dir, path);
	char *out = tl_read_file(path);
	int r = -1;
	if (rc == 0 && out != NULL)
		r = strncmp(out, "reachable", 9) == 0      ? 1
		    : strncmp(out, "unreachable", 11) == 0 ? 0
		                                           : -1;
	printf("%s", out != NULL ? out : "(no probe output)\n");
	fflush(stdout);
	free(out);
	return r;
}

int tl_netns_probe(const tl_cluster *c, const char *a, const char *b, int port)
{
	return probe(c, "probe", a, b, port);
}

int tl_netns_probe_udp(const tl_cluster *c, const char *a, const char *b, int port)
{
	return probe(c, "probe-udp", a, b, port);
}
