/*
 * cli_out.c -- what `shoal` prints.
 *
 * JSON (the default) is what the AWS CLI v2 prints: nothing for an empty
 * response ({} -- put-item without ReturnValues, get-item of a missing item),
 * otherwise the response indented by four spaces in the service's member
 * order, UTF-8 as is, with timestamps (members named ...DateTime, sent as
 * epoch seconds) as ISO 8601 in the local time zone, Python's isoformat():
 * "2024-05-01T10:00:00.123000+00:00".
 *
 * Text is awscli/text.py's format: a dict prints its scalar members on one
 * tab-separated line (sorted by key, led by the UPPERCASE name it hangs
 * from), then recurses into its lists and dicts, each identified by its key.
 *
 * `shoal status` prints the ClusterStatus response as tables: nodes, one
 * line per (group, replica) with role, term, commit and applied indexes and
 * the leader it believes in, then item counts per table and group.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/cli_int.h"

void cli_iso_time(double secs, char *buf, size_t size)
{
	double whole = floor(secs);
	long long us = llround((secs - whole) * 1e6);
	time_t t = (time_t)whole;
	if (us >= 1000000) {
		t++;
		us -= 1000000;
	}
	struct tm tm;
	localtime_r(&t, &tm);
	char date[32];
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	long off = tm.tm_gmtoff;
	char sign = off < 0 ? '-' : '+';
	if (off < 0)
		off = -off;
	if (us != 0)
		snprintf(buf, size, "%s.%06lld%c%02ld:%02ld", date, us, sign, off / 3600,
		         off / 60 % 60);
	else
		snprintf(buf, size, "%s%c%02ld:%02ld", date, sign, off / 3600, off / 60 % 60);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A copy of j with epoch-second *DateTime members as ISO 8601 strings. */
static json_t *with_times(const json_t *j)
{
	if (json_is_array(j)) {
		json_t *a = json_array();
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v) json_array_append_new(a, with_times(v));
		return a;
	}
	if (!json_is_object(j))
		return json_deep_copy(j);
	json_t *o = json_object();
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)j, k, v)
	{
		if (json_is_number(v) && ends_with(k, "DateTime")) {
			char buf[64];
			cli_iso_time(json_number_value(v), buf, sizeof(buf));
			json_object_set_new(o, k, json_string(buf));
		} else {
			json_object_set_new(o, k, with_times(v));
		}
	}
	return o;
}

void cli_print_json(FILE *out, const json_t *resp)
{
	if (resp == NULL || (json_is_object(resp) && json_object_size(resp) == 0))
		return;
	json_t *t = with_times(resp);
	json_dumpf(t, out, JSON_INDENT(4) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
	fputc('\n', out);
	json_decref(t);
}

/* ------------------------------------------------------------------------ */
/* Text (awscli/text.py)                                                     */
/* ------------------------------------------------------------------------ */

static bool is_scalar(const json_t *v)
{
	return !json_is_object(v) && !json_is_array(v);
}

/* Python's cli_jstr() of a scalar. */
static void put_scalar(FILE *out, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		fwrite(json_string_value(v), 1, json_string_length(v), out);
		break;
	case JSON_INTEGER:
		fprintf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: {
		char buf[64];
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
		/* Shortest form that reads back the same, as Python prints. */
		for (int p = 1; p <= 17; p++) {
			snprintf(buf, sizeof(buf), "%.*g", p, json_real_value(v));
			if (strtod(buf, NULL) == json_real_value(v))
				break;
		}
		fputs(buf, out);
		if (strpbrk(buf, ".eEn") == NULL)
			fputs(".0", out);
		break;
	}
	case JSON_TRUE:
		fputs("True", out);
		break;
	case JSON_FALSE:
		fputs("False", out);
		break;
	default:
		fputs("None", out);
		break;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of obj, sorted (a malloc'd array of n borrowed strings). */
static const char **sorted_keys(const json_t *obj, size_t *n)
{
	*n = json_object_size(obj);
	const char **keys = malloc((*n + 1) * sizeof(*keys));
	if (keys == NULL) {
		*n = 0;
		return NULL;
	}
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)obj, k, v) keys[i++] = k;
	qsort(keys, *n, sizeof(*keys), cmp_str);
	return keys;
}

static void put_upper(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') ? *s - 32 : *s, out);
}

static void text_value(FILE *out, const json_t *v, const char *ident, const char **scalar_keys,
                       size_t n_scalar_keys);

static void text_dict(FILE *out, const json_t *obj, const char *ident, const char **scalar_keys,
                      size_t n_scalar_keys)
{
	size_t n;
	const char **keys = sorted_keys(obj, &n);
	bool any = false;
	if (scalar_keys != NULL) {
		for (size_t i = 0; i < n_scalar_keys; i++) {
			if (i == 0 && ident != NULL) {
				put_upper(out, ident);
				fputc('\t', out);
			} else if (i > 0) {
				fputc('\t', out);
			}
			json_t *v = json_object_get(obj, scalar_keys[i]);
			if (v != NULL && is_scalar(v))
				put_scalar(out, v);
			else
				fputs("None", out);
			any = true;
		}
	} else {
		for (size_t i = 0; i < n; i++) {
			json_t *v = json_object_get(obj, keys[i]);
			if (!is_scalar(v))
				continue;
			if (!any && ident != NULL) {
				put_upper(out, ident);
				fputc('\t', out);
			} else if (any) {
				fputc('\t', out);
			}
			put_scalar(out, v);
			any = true;
		}
	}
	if (any)
		fputc('\n', out);
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_object_get(obj, keys[i]);
		if (!is_scalar(v))
			text_value(out, v, keys[i], NULL, 0);
	}
	free(keys);
}

static void text_list(FILE *out, const json_t *arr, const char *ident)
{
	size_t n = json_array_size(arr);
	if (n == 0)
		return;
	bool has_dict = false, has_list = false;
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		has_dict |= json_is_object(v);
		has_list |= json_is_array(v);
	}
	if (has_dict) {
		/* Scalar keys of all the dicts, sorted: one column each. */
		json_t *seen = json_object();
		json_array_foreach(arr, i, v)
		{
			if (!json_is_object(v))
				continue;
			const char *k;
			json_t *x;
			json_object_foreach(v, k, x) if (is_scalar(x))
			    json_object_set(seen, k, json_null());
		}
		size_t nk;
		const char **keys = sorted_keys(seen, &nk);
		json_array_foreach(arr, i, v) text_value(out, v, ident, keys, nk);
		free(keys);
		json_decref(seen);
		return;
	}
	/* Scalars first (one line each when identified), then nested lists. */
	bool any = false;
	json_array_foreach(arr, i, v)
	{
		if (!is_scalar(v))
			continue;
		if (ident != NULL) {
			put_upper(out, ident);
			fputc('\t', out);
			put_scalar(out, v);
			fputc('\n', out);
		} else {
			if (any)
				fputc('\t', out);
			put_scalar(out, v);
			any = true;
		}
	}
	if (any)
		fputc('\n', out);
	if (has_list)
		json_array_foreach(arr, i, v) if (!is_scalar(v)) text_value(out, v, ident, NULL, 0);
}

static void text_value(FILE *out, const json_t *v, const char *ident, const char **scalar_keys,
                       size_t n_scalar_keys)
{
	if (json_is_object(v)) {
		text_dict(out, v, ident, scalar_keys, n_scalar_keys);
	} else if (json_is_array(v)) {
		text_list(out, v, ident);
	} else {
		put_scalar(out, v);
		fputc('\n', out);
	}
}

void cli_print_text(FILE *out, const json_t *resp)
{
	if (resp == NULL || (json_is_object(resp) && json_object_size(resp) == 0))
		return;
	json_t *t = with_times(resp);
	text_value(out, t, NULL, NULL, 0);
	json_decref(t);
}

/* ------------------------------------------------------------------------ */
/* shoal status                                                              */
/* ------------------------------------------------------------------------ */

double cli_jnum(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_number(v) ? json_number_value(v) : 0.0;
}

long long cli_jint(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

const char *cli_jstr(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : "";
}

/* The replica whose counts a table line uses for group g: the leader's if
 * it reported, else the replica with the highest applied index. */
static const json_t *counting_replica(const json_t *groups, long long g)
{
	const json_t *best = NULL;
	size_t i;
	json_t *r;
	json_array_foreach(groups, i, r)
	{
		if (cli_jint(r, "Group") != g || !json_is_array(json_object_get(r, "Tables")))
			continue;
		if (strcmp(cli_jstr(r, "Role"), "leader") == 0)
			return r;
		if (best == NULL || cli_jint(r, "AppliedIndex") > cli_jint(best, "AppliedIndex"))
			best = r;
	}
	return best;
}

static int cmp_replica(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	long long d = cli_jint(x, "Group") - cli_jint(y, "Group");
	if (d == 0)
		d = cli_jint(x, "Node") - cli_jint(y, "Node");
	return d < 0 ? -1 : d > 0;
}

void cli_replica_role(const json_t *map_groups, long long group, long long node, char *buf,
                      size_t cap)
{
	size_t i, k;
	json_t *g, *r;
	snprintf(buf, cap, "-");
	json_array_foreach(map_groups, i, g)
	{
		if (cli_jint(g, "Group") != group)
			continue;
		json_array_foreach(json_object_get(g, "Replicas"), k, r)
		{
			if (cli_jint(r, "Node") != node)
				continue;
			bool voter = json_is_true(json_object_get(r, "Voter"));
			long long repl = cli_jint(r, "Replaces");
			if (json_is_true(json_object_get(g, "Founding")))
				snprintf(buf, cap, "founder"); /* a new group, not led yet */
			else if (repl > 0)
				snprintf(buf, cap, "%s->%lld", voter ? "voter" : "non-voter", repl);
			else
				snprintf(buf, cap, "%s", voter ? "voter" : "non-voter");
		}
	}
}

void cli_print_status(FILE *out, const json_t *resp)
{
	json_t *nodes = json_object_get(resp, "Nodes");
	json_t *groups = json_object_get(resp, "Groups");
	size_t i;
	json_t *v;
	long long max_group = -1;
	json_array_foreach(groups, i, v) if (cli_jint(v, "Group") > max_group) max_group =
	    cli_jint(v, "Group");
	json_t *map_groups = json_object_get(resp, "MapGroups");
	json_array_foreach(map_groups, i, v) if (cli_jint(v, "Group") > max_group) max_group =
	    cli_jint(v, "Group");
	/* Groups added since the birth may leave gaps in the ids: the map's
	 * count when it has one. */
	long long n_groups_all = json_array_size(map_groups) > 0
	                             ? (long long)json_array_size(map_groups)
	                             : max_group + 1;
	fprintf(out, "Cluster: %zu nodes, %lld storage groups, %lld partitions per table",
	        json_array_size(nodes), n_groups_all, cli_jint(resp, "Partitions"));
	if (cli_jint(resp, "MapEpoch") > 0)
		fprintf(out, ", cluster map epoch %lld", cli_jint(resp, "MapEpoch"));
	fputc('\n', out);
	if (cli_jstr(resp, "RouterAuth")[0] != '\0')
		fprintf(out, "Router: %s\n", cli_jstr(resp, "RouterAuth"));
	if (cli_jstr(resp, "RouterTraffic")[0] != '\0')
		fprintf(out, "Traffic: %s\n", cli_jstr(resp, "RouterTraffic"));
	fputc('\n', out);

	fprintf(out, "%-5s %-28s %-22s %-9s %s\n", "NODE", "RPC", "RAFT", "REACHABLE", "STATE");
	json_array_foreach(nodes, i, v)
	{
		const char *state = cli_jstr(v, "State");
		fprintf(out, "%-5lld %-28s %-22s %-9s %s\n", cli_jint(v, "Id"), cli_jstr(v, "Rpc"),
		        cli_jstr(v, "Raft"),
		        json_is_true(json_object_get(v, "Reachable")) ? "yes" : "NO",
		        state[0] != '\0' ? state : "-");
	}

	/* REPLICA: voter or non-voter in the cluster map (a non-voter is being
	 * caught up; "->N": it replaces node N's replica once a voter).
	 * OUTBOX: index deltas not yet shipped; AGE_MS: age of the oldest. */
	fprintf(out, "\n%-6s %-5s %-11s %-13s %-6s %-10s %-10s %-7s %-8s %-8s %s\n", "GROUP",
	        "NODE", "ROLE", "REPLICA", "TERM", "COMMIT", "APPLIED", "LEADER", "OUTBOX",
	        "AGE_MS", "ERROR");
	/* By group, then by node. */
	size_t n_groups = json_array_size(groups);
	const json_t **sorted = malloc((n_groups + 1) * sizeof(*sorted));
	json_array_foreach(groups, i, v) if (sorted != NULL) sorted[i] = v;
	if (sorted != NULL)
		qsort(sorted, n_groups, sizeof(*sorted), cmp_replica);
	for (i = 0; sorted != NULL && i < n_groups; i++) {
		v = (json_t *)sorted[i];
		char leader[24];
		long long l = cli_jint(v, "LeaderNode");
		if (l > 0)
			snprintf(leader, sizeof(leader), "%lld", l);
		else
			snprintf(leader, sizeof(leader), "-");
		const char *role = cli_jstr(v, "Role");
		char replica[32];
		cli_replica_role(map_groups, cli_jint(v, "Group"), cli_jint(v, "Node"), replica,
		                 sizeof(replica));
		char line[1024];
		int n = snprintf(
		    line, sizeof(line),
		    "%-6lld %-5lld %-11s %-13s %-6lld %-10lld %-10lld %-7s %-8lld %-8lld %s",
		    cli_jint(v, "Group"), cli_jint(v, "Node"), role[0] ? role : "?", replica,
		    cli_jint(v, "Term"), cli_jint(v, "CommitIndex"), cli_jint(v, "AppliedIndex"),
		    leader, cli_jint(v, "OutboxDepth"), cli_jint(v, "OutboxOldestAgeMs"),
		    cli_jstr(v, "Error"));
		size_t len = n < 0 ? 0 : (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
		while (len > 0 && line[len - 1] == ' ')
			len--;
		fprintf(out, "%.*s\n", (int)len, line);
	}
	free(sorted);

	/* The cluster map's table partitions: tables that were split or moved
	 * (the others are placed statically, Partitions per table). */
	json_t *parts = json_object_get(resp, "MapPartitions");
	if (json_array_size(parts) > 0)
		fprintf(out, "\nPartitions (cluster map)\n%-32s %-18s %-18s %-6s %s\n", "TABLE",
		        "LO", "HI", "GROUP", "MOVING_TO");
	json_array_foreach(parts, i, v)
	{
		char name[48], moving[24] = "-";
		if (cli_jstr(v, "TableName")[0] != '\0')
			snprintf(name, sizeof(name), "%s", cli_jstr(v, "TableName"));
		else if (cli_jint(v, "TableId") == 0)
			snprintf(name, sizeof(name), "(GSI space)");
		else
			snprintf(name, sizeof(name), "#%lld", cli_jint(v, "TableId"));
		if (cli_jint(v, "MovingTo") != 0)
			snprintf(moving, sizeof(moving), "%lld", cli_jint(v, "MovingTo"));
		fprintf(out, "%-32s %-18s %-18s %-6lld %s\n", name, cli_jstr(v, "Lo"),
		        cli_jstr(v, "Hi"), cli_jint(v, "Group"), moving);
	}

	/* Item counts: every table, every group that reports it. */
	json_t *tables = json_object(); /* name -> total items */
	bool header = false;
	for (long long g = 0; g <= max_group; g++) {
		const json_t *r = counting_replica(groups, g);
		if (r == NULL)
			continue;
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(r, "Tables"), j, t)
		{
			if (!header) {
				fprintf(out, "\n%-32s %-6s %-5s %-12s %s\n", "TABLE", "GROUP",
				        "NODE", "ITEMS", "BYTES");
				header = true;
			}
			const char *name = cli_jstr(t, "TableName");
			fprintf(out, "%-32s %-6lld %-5lld %-12lld %lld\n", name, g,
			        cli_jint(r, "Node"), cli_jint(t, "ItemCount"),
			        cli_jint(t, "SizeBytes"));
			json_object_set_new(
			    tables, name,
			    json_integer(cli_jint(tables, name) + cli_jint(t, "ItemCount")));
		}
	}
	if (json_object_size(tables) > 0) {
		fprintf(out, "\n%-32s %s\n", "TABLE", "ITEMS (all groups)");
		const char *k;
		json_object_foreach(tables, k, v)
		    fprintf(out, "%-32s %lld\n", k, cli_jint(tables, k));
	}
	json_decref(tables);

	/* Index entries per group (GSI entries live in their index
	 * partitions' groups), with each group's backfill state. */
	header = false;
	for (long long g = 0; g <= max_group; g++) {
		const json_t *r = counting_replica(groups, g);
		if (r == NULL)
			continue;
		size_t j, k;
		json_t *t, *x;
		json_array_foreach(json_object_get(r, "Tables"), j, t)
		{
			json_array_foreach(json_object_get(t, "Indexes"), k, x)
			{
				if (!header) {
					fprintf(
					    out,
					    "\n%-32s %-24s %-6s %-5s %-12s %-12s %-9s %-8s %s\n",
					    "TABLE", "INDEX", "GROUP", "NODE", "ENTRIES", "BYTES",
					    "STATUS", "BACKFILL", "LAG_MS");
					header = true;
				}
				/* The last propagation lag the group's leader measured
				 * for this index (deltas it shipped), "-" if none. */
				char lag[24] = "-";
				if (json_is_true(json_object_get(x, "LagSeen")))
					snprintf(lag, sizeof(lag), "%lld", cli_jint(x, "LagMs"));
				fprintf(
				    out, "%-32s %-24s %-6lld %-5lld %-12lld %-12lld %-9s %-8s %s\n",
				    cli_jstr(t, "TableName"), cli_jstr(x, "IndexName"), g,
				    cli_jint(r, "Node"), cli_jint(x, "ItemCount"),
				    cli_jint(x, "SizeBytes"),
				    cli_jstr(x, "Status")[0] ? cli_jstr(x, "Status") : "?",
				    json_is_true(json_object_get(x, "BackfillDone")) ? "done"
				                                                     : "running",
				    lag);
			}
		}
	}

	/* Capacity: each partition's consumption, throttles and limits over
	 * the last second, busiest first, as the group leaders report it
	 * (cli_load.c); the hot keys are `shoal status --hot`. */
	json_t *loads = cli_partition_load(resp);
	if (json_array_size(loads) > 0) {
		json_t *hot = cli_hot_keys(resp);
		fprintf(out,
		        "\nPartition load (units/s over the last second; %zu hot keys: shoal "
		        "status --hot)\n",
		        json_array_size(hot));
		cli_print_load(out, loads, 0);
		json_decref(hot);
	}
	json_decref(loads);
	json_t *unsplit = cli_unsplit_keys(resp);
	if (json_array_size(unsplit) > 0) {
		fprintf(out, "\nNot split: a single key carries most of its partition's load (or "
		             "size), which a split cannot divide\n");
		cli_print_unsplit(out, unsplit);
	}
	json_decref(unsplit);
}
