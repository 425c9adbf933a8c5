/*
 * cli_load.c -- capacity as `shoal status`, `shoal status --hot` and
 * `shoal top` show it: the partitions' load and the hot partition keys,
 * gathered from a ClusterStatus answer (its JSON, as libshoal returns it).
 *
 * What the answer holds (proto/shoal.proto, GroupStatus.load and hot_keys):
 * only a group's leader fills Load (one PartitionLoad per partition of a
 * table or index in the group: a table has one partition per data group, so
 * a partition is named by its table, index and group) and HotKeys (the
 * group's heaviest partition keys).  Followers' reports are ignored here,
 * and if two replicas of a group both say "leader" (a report straddling an
 * election) the one with the higher term counts, so nothing is counted
 * twice.  Members at zero are absent from the JSON; they read as 0.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli_int.h"

bool cli_counted_leader(const json_t *groups, const json_t *g)
{
	if (strcmp(cli_jstr(g, "Role"), "leader") != 0)
		return false;
	size_t i;
	json_t *o;
	json_array_foreach(groups, i, o)
	{
		if (o == g || cli_jint(o, "Group") != cli_jint(g, "Group") ||
		    strcmp(cli_jstr(o, "Role"), "leader") != 0)
			continue;
		/* Another leader report of the same group: the newer term wins,
		 * and of equal ones (cannot both be leaders) the first. */
		if (cli_jint(o, "Term") > cli_jint(g, "Term"))
			return false;
		if (cli_jint(o, "Term") == cli_jint(g, "Term") && o < g)
			return false;
	}
	return true;
}

/* How busy a partition is: the larger share of its read or write limit it
 * consumed in the last second (0 when no limit is reported). */
static double use_of(const json_t *l)
{
	double r =
	    cli_jnum(l, "ReadLimit") > 0 ? cli_jnum(l, "ReadUnits") / cli_jnum(l, "ReadLimit") : 0;
	double w = cli_jnum(l, "WriteLimit") > 0
	               ? cli_jnum(l, "WriteUnits") / cli_jnum(l, "WriteLimit")
	               : 0;
	return r > w ? r : w;
}

static int cmp_str_then_group(const json_t *x, const json_t *y)
{
	int c = strcmp(cli_jstr(x, "Table"), cli_jstr(y, "Table"));
	if (c == 0)
		c = strcmp(cli_jstr(x, "Index"), cli_jstr(y, "Index"));
	if (c == 0) {
		long long d = cli_jint(x, "Group") - cli_jint(y, "Group");
		c = d < 0 ? -1 : d > 0;
	}
	return c;
}

static int dcmp_desc(double a, double b)
{
	return a > b ? -1 : a < b;
}

/* Busiest first: share of the limit, then throttles, then units. */
static int cmp_load(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int c = dcmp_desc(use_of(x), use_of(y));
	if (c == 0)
		c = dcmp_desc(cli_jnum(x, "ReadThrottled") + cli_jnum(x, "WriteThrottled"),
		              cli_jnum(y, "ReadThrottled") + cli_jnum(y, "WriteThrottled"));
	if (c == 0)
		c = dcmp_desc(cli_jnum(x, "ReadUnits") + cli_jnum(x, "WriteUnits"),
		              cli_jnum(y, "ReadUnits") + cli_jnum(y, "WriteUnits"));
	return c != 0 ? c : cmp_str_then_group(x, y);
}

/* Heaviest first: units per second, then throttles. */
static int cmp_hot(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int c = dcmp_desc(cli_jnum(x, "ReadUnits") + cli_jnum(x, "WriteUnits"),
	                  cli_jnum(y, "ReadUnits") + cli_jnum(y, "WriteUnits"));
	if (c == 0)
		c = dcmp_desc(cli_jnum(x, "Throttled"), cli_jnum(y, "Throttled"));
	if (c == 0)
		c = strcmp(cli_jstr(x, "Key"), cli_jstr(y, "Key"));
	return c != 0 ? c : cmp_str_then_group(x, y);
}

/* Every element of member `member` of the counted leader reports, copied
 * with the report's Group and Node, sorted by cmp. */
static json_t *gather(const json_t *status, const char *member,
                      int (*cmp)(const void *, const void *))
{
	json_t *groups = json_object_get(status, "Groups");
	json_t *all = json_array();
	size_t i, j;
	json_t *g, *e;
	json_array_foreach(groups, i, g)
	{
		if (!cli_counted_leader(groups, g))
			continue;
		json_array_foreach(json_object_get(g, member), j, e)
		{
			if (!json_is_object(e))
				continue;
			json_t *c = json_deep_copy(e);
			/* (An element naming its own group keeps it.) */
			if (json_object_get(c, "Group") == NULL)
				json_object_set_new(c, "Group", json_integer(cli_jint(g, "Group")));
			json_object_set_new(c, "Node", json_integer(cli_jint(g, "Node")));
			json_array_append_new(all, c);
		}
	}
	size_t n = json_array_size(all);
	if (n < 2)
		return all;
	json_t **v = malloc(n * sizeof(*v));
	if (v == NULL)
		return all; /* unsorted rather than nothing */
	for (i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(all, i));
	qsort(v, n, sizeof(*v), cmp);
	json_array_clear(all);
	for (i = 0; i < n; i++)
		json_array_append_new(all, v[i]);
	free(v);
	return all;
}

json_t *cli_partition_load(const json_t *status)
{
	return gather(status, "Load", cmp_load);
}

json_t *cli_hot_keys(const json_t *status)
{
	return gather(status, "HotKeys", cmp_hot);
}

static int cmp_unsplit(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int c = strcmp(cli_jstr(x, "Table"), cli_jstr(y, "Table"));
	if (c == 0)
		c = (cli_jint(x, "Group") > cli_jint(y, "Group")) -
		    (cli_jint(x, "Group") < cli_jint(y, "Group"));
	return c != 0 ? c : strcmp(cli_jstr(x, "Key"), cli_jstr(y, "Key"));
}

json_t *cli_unsplit_keys(const json_t *status)
{
	return gather(status, "UnsplitKeys", cmp_unsplit);
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

/* s, cut to at most w bytes with "..." when longer (w >= 4). */
static const char *fit(const char *s, size_t w, char *buf, size_t size)
{
	if (strlen(s) <= w || w < 4 || w + 1 > size)
		return s;
	snprintf(buf, size, "%.*s...", (int)(w - 3), s);
	return buf;
}

static const char *index_or_dash(const json_t *o)
{
	const char *x = cli_jstr(o, "Index");
	return x[0] != '\0' ? x : "-";
}

void cli_print_load(FILE *out, const json_t *loads, size_t max_rows)
{
	fprintf(out, "%-24s %-16s %5s %4s %9s %8s %6s %9s %8s %6s %5s\n", "TABLE", "INDEX", "GROUP",
	        "NODE", "READ/S", "RLIMIT", "RTHR/S", "WRITE/S", "WLIMIT", "WTHR/S", "USE%");
	size_t i;
	json_t *l;
	json_array_foreach(loads, i, l)
	{
		if (max_rows > 0 && i >= max_rows)
			break;
		char b1[32], b2[32];
		fprintf(out, "%-24s %-16s %5lld %4lld %9.1f %8.0f %6lld %9.1f %8.0f %6lld %5.0f\n",
		        fit(cli_jstr(l, "Table"), 24, b1, sizeof(b1)),
		        fit(index_or_dash(l), 16, b2, sizeof(b2)), cli_jint(l, "Group"),
		        cli_jint(l, "Node"), cli_jnum(l, "ReadUnits"), cli_jnum(l, "ReadLimit"),
		        cli_jint(l, "ReadThrottled"), cli_jnum(l, "WriteUnits"),
		        cli_jnum(l, "WriteLimit"), cli_jint(l, "WriteThrottled"),
		        floor(100.0 * use_of(l) + 0.5));
	}
}

void cli_print_unsplit(FILE *out, const json_t *keys)
{
	fprintf(out, "%-24s %-16s %-32s %5s %-18s %-6s %s\n", "TABLE", "INDEX", "KEY", "GROUP",
	        "PARTITION", "BY", "LAST FOUND");
	size_t i;
	json_t *k;
	json_array_foreach(keys, i, k)
	{
		char b1[32], b2[40], b3[32];
		const char *key = cli_jstr(k, "Key");
		fprintf(
		    out, "%-24s %-16s %-32s %5lld %-18s %-6s %.0f s ago (first %.0f s ago)\n",
		    fit(cli_jstr(k, "Table")[0] ? cli_jstr(k, "Table") : "?", 24, b1, sizeof(b1)),
		    fit(index_or_dash(k), 16, b3, sizeof(b3)),
		    fit(key[0] ? key : cli_jstr(k, "Hash"), 32, b2, sizeof(b2)),
		    cli_jint(k, "Group"), cli_jstr(k, "Lo"), cli_jstr(k, "Reason"),
		    cli_jint(k, "LastSeenMs") / 1000.0, cli_jint(k, "FirstSeenMs") / 1000.0);
	}
}

void cli_print_hot(FILE *out, const json_t *hot, size_t max_rows)
{
	fprintf(out, "%-24s %-16s %-32s %9s %9s %9s %5s %4s\n", "TABLE", "INDEX", "KEY", "READ/S",
	        "WRITE/S", "THROTTLED", "GROUP", "NODE");
	size_t i;
	json_t *k;
	json_array_foreach(hot, i, k)
	{
		if (max_rows > 0 && i >= max_rows)
			break;
		char b1[32], b2[32], b3[40];
		fprintf(out, "%-24s %-16s %-32s %9.1f %9.1f %9lld %5lld %4lld\n",
		        fit(cli_jstr(k, "Table"), 24, b1, sizeof(b1)),
		        fit(index_or_dash(k), 16, b2, sizeof(b2)),
		        fit(cli_jstr(k, "Key"), 32, b3, sizeof(b3)), cli_jnum(k, "ReadUnits"),
		        cli_jnum(k, "WriteUnits"), cli_jint(k, "Throttled"), cli_jint(k, "Group"),
		        cli_jint(k, "Node"));
	}
}
