/*
 * cli_admin.c -- `shoal admin add-node | remove-node | add-group |
 * move-partition | split-partition`: Shoal's own operation Admin (the
 * cluster's shape, issue 14) with options in the CLI's style, and the waits
 * that follow: for remove-node, until the node is emptied and leaves the
 * cluster map; for add-group, until the new group has a leader; for
 * the partition commands, until the partition is served by its target
 * group with no move pending (both read from ClusterStatus; contract:
 * cli_int.h).
 *
 * Progress goes to stderr, one line each time it changes, so that stdout
 * keeps the answer's JSON alone:
 *
 *   node 4: draining, 3 replicas left (groups 1 2 3)
 *   node 4: holds no replica; waiting for it to leave the cluster map
 *   node 4: removed from the cluster map (epoch 12)
 *
 *   orders [0x4000000000000000, 0x7fffffffffffffff]: group 2, moving to group 3
 *   orders [0x4000000000000000, 0x7fffffffffffffff]: served by group 3
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/cli_int.h"

#define DEFAULT_TIMEOUT_S 600
#define DEFAULT_POLL_MS   1000

static const cli_shape adm_str = {CLI_STRING, NULL, NULL};
static const cli_shape adm_int = {CLI_INT, NULL, NULL};
static const cli_shape adm_bool = {CLI_BOOL, NULL, NULL};

static const cli_opt o_add_node[] = {
    {"node-id", "NodeId", &adm_int, CLI_OPT_REQUIRED},
    {"raft", "Raft", &adm_str, CLI_OPT_REQUIRED},
    {"rpc", "Rpc", &adm_str, CLI_OPT_REQUIRED},
    {NULL, NULL, NULL, 0},
};

static const cli_opt o_remove_node[] = {
    {"node-id", "NodeId", &adm_int, CLI_OPT_REQUIRED},
    {"wait", "Wait", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"timeout-secs", "TimeoutSecs", &adm_int, 0},
    {"poll-interval-ms", "PollIntervalMs", &adm_int, 0},
    {NULL, NULL, NULL, 0},
};

static const cli_opt o_add_group[] = {
    {"group-id", "GroupId", &adm_int, 0},
    {"nodes", "Nodes", &adm_str, 0},
    {"wait", "Wait", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"timeout-secs", "TimeoutSecs", &adm_int, 0},
    {"poll-interval-ms", "PollIntervalMs", &adm_int, 0},
    {NULL, NULL, NULL, 0},
};

static const cli_opt o_move_partition[] = {
    {"table-name", "TableName", &adm_str, 0},
    {"gsi-space", "GsiSpace", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"hash", "Hash", &adm_str, CLI_OPT_REQUIRED},
    {"to-group", "ToGroup", &adm_int, CLI_OPT_REQUIRED},
    {"wait", "Wait", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"timeout-secs", "TimeoutSecs", &adm_int, 0},
    {"poll-interval-ms", "PollIntervalMs", &adm_int, 0},
    {NULL, NULL, NULL, 0},
};

static const cli_opt o_split_partition[] = {
    {"table-name", "TableName", &adm_str, 0},
    {"gsi-space", "GsiSpace", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"at", "At", &adm_str, CLI_OPT_REQUIRED},
    {"to-group", "ToGroup", &adm_int, 0},
    {"wait", "Wait", &adm_bool, CLI_OPT_BOOL_PAIR},
    {"timeout-secs", "TimeoutSecs", &adm_int, 0},
    {"poll-interval-ms", "PollIntervalMs", &adm_int, 0},
    {NULL, NULL, NULL, 0},
};

const cli_cmd cli_admin_cmds[] = {
    {"add-node", "Admin", CLI_PAGING_NONE, o_add_node,
     "register a new node in the cluster map (deploy/cluster.sh add-node runs it)", false},
    {"remove-node", "Admin", CLI_PAGING_NONE, o_remove_node,
     "decommission a node: its replicas move away, then it leaves the map", false},
    {"add-group", "Admin", CLI_PAGING_NONE, o_add_group,
     "create a storage group on the given nodes (or the emptiest ones)", false},
    {"move-partition", "Admin", CLI_PAGING_NONE, o_move_partition,
     "move the table partition (or, with --gsi-space, the GSI partition) holding a hash to "
     "another group",
     false},
    {"split-partition", "Admin", CLI_PAGING_NONE, o_split_partition,
     "split a table (or --gsi-space) partition at a hash, optionally moving the upper half", false},
    {NULL, NULL, CLI_PAGING_NONE, NULL, NULL, false},
};

const cli_cmd *cli_admin_find(const char *name)
{
	for (const cli_cmd *c = cli_admin_cmds; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

bool cli_is_admin_sub(const cli_cmd *cmd)
{
	for (const cli_cmd *c = cli_admin_cmds; c->name != NULL; c++)
		if (c == cmd)
			return true;
	return false;
}

int cli_node_replicas(const json_t *status, long long node, long long *groups, int cap,
                      bool *listed)
{
	int n = 0;
	size_t i, k;
	json_t *g, *r, *nd;
	json_array_foreach(json_object_get(status, "MapGroups"), i, g){json_array_foreach(
	    json_object_get(g, "Replicas"), k, r){if (cli_jint(r, "Node") != node) continue;
	if (n < cap)
		groups[n] = cli_jint(g, "Group");
	n++;
}
}
*listed = false;
json_array_foreach(json_object_get(status, "Nodes"), i, nd)
{
	if (cli_jint(nd, "Id") == node)
		*listed = true;
}
return n;
}

static long long adm_opt_int(const json_t *opts, const char *key, long long dflt)
{
	json_t *v = json_object_get(opts, key);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static double adm_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void adm_pause_ms(long long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* "(groups 1 2 3)" */
static void groups_text(const long long *groups, int n, char *buf, size_t cap)
{
	size_t len = (size_t)snprintf(buf, cap, "(group%s", n == 1 ? "" : "s");
	for (int i = 0; i < n && i < 16 && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, " %lld", groups[i]);
	if (len < cap)
		snprintf(buf + len, cap - len, "%s)", n > 16 ? " ..." : "");
}

/* Until node holds no replica and the map no longer lists it. */
static int wait_removed(const cli_caller *c, long long node, const json_t *opts, FILE *progress,
                        shoal_error *err, cli_fail *f)
{
	long long timeout = adm_opt_int(opts, "TimeoutSecs", DEFAULT_TIMEOUT_S);
	long long poll = adm_opt_int(opts, "PollIntervalMs", DEFAULT_POLL_MS);
	if (poll < 10)
		poll = 10;
	double until = adm_now_s() + (double)timeout;
	char last[512] = "", line[512], gtext[256];
	json_t *empty = json_object();
	int left = -1;
	for (;;) {
		json_t *st = NULL;
		shoal_error e;
		memset(&e, 0, sizeof(e));
		int rc = cli_call(c, "ClusterStatus", empty, &st, &e);
		if (rc == SHOAL_OK) {
			long long groups[64];
			bool listed;
			left = cli_node_replicas(st, node, groups, 64, &listed);
			groups_text(groups, left, gtext, sizeof(gtext));
			if (left == 0 && !listed)
				snprintf(line, sizeof(line),
				         "node %lld: removed from the cluster map (epoch %lld)",
				         node, cli_jint(st, "MapEpoch"));
			else if (left == 0)
				snprintf(line, sizeof(line),
				         "node %lld: holds no replica; waiting for it to leave the "
				         "cluster map",
				         node);
			else
				snprintf(line, sizeof(line),
				         "node %lld: draining, %d replica%s left %s", node, left,
				         left == 1 ? "" : "s", gtext);
			json_decref(st);
			if (strcmp(line, last) != 0) {
				fprintf(progress, "%s\n", line);
				fflush(progress);
				snprintf(last, sizeof(last), "%s", line);
			}
			if (left == 0 && !listed) {
				json_decref(empty);
				return SHOAL_OK;
			}
		} else if (strncmp(e.message, last, 500) != 0) {
			/* A failed status (a router restarting): keep asking. */
			fprintf(progress, "node %lld: ClusterStatus failed: %s\n", node, e.message);
			snprintf(last, sizeof(last), "%.500s", e.message);
		}
		if (adm_now_s() + (double)poll / 1000.0 > until)
			break;
		adm_pause_ms(poll);
	}
	json_decref(empty);
	(void)err;
	if (left > 0)
		return cli_failf(
		    f, CLI_EXIT_OTHER, false,
		    "Timed out after %lld seconds waiting for node %lld to be removed: "
		    "it still holds %d replica%s %s",
		    timeout, node, left, left == 1 ? "" : "s", gtext);
	return cli_failf(f, CLI_EXIT_OTHER, false,
	                 "Timed out after %lld seconds waiting for node %lld to leave the cluster "
	                 "map%s",
	                 timeout, node, left == 0 ? " (it holds no replica)" : "");
}

/* ------------------------------------------------------------------------ */
/* move-partition, split-partition                                           */
/* ------------------------------------------------------------------------ */

int cli_parse_hash(const char *opt, const char *text, uint64_t *out, cli_fail *f)
{
	bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
	const char *d = hex ? text + 2 : text;
	char *end = NULL;
	errno = 0;
	unsigned long long v = (*d >= '0' && *d <= '9') || (hex && isxdigit((unsigned char)*d))
	                           ? strtoull(d, &end, hex ? 16 : 10)
	                           : 0;
	if (end == NULL || end == d || *end != '\0' || errno == ERANGE)
		return cli_failf(
		    f, CLI_EXIT_USAGE, false,
		    "argument --%s: a hash is a decimal or 0x hexadecimal number from 0 "
		    "to 0xffffffffffffffff (got '%s')",
		    opt, text);
	*out = (uint64_t)v;
	return SHOAL_OK;
}

/* "0x..." text of a status row -> the hash (0 when absent). */
static uint64_t row_hash(const json_t *row, const char *key)
{
	uint64_t v = 0;
	cli_fail ignored;
	const char *s = cli_jstr(row, key);
	if (s[0] != '\0' && cli_parse_hash(key, s, &v, &ignored) != SHOAL_OK)
		v = 0;
	return v;
}

const json_t *cli_map_partition(const json_t *status, const char *table, uint64_t hash)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(status, "MapPartitions"), i, p)
	{
		bool mine = table[0] != '\0' ? strcmp(cli_jstr(p, "TableName"), table) == 0
		                             : cli_jint(p, "TableId") == 0; /* the GSI space */
		if (mine && row_hash(p, "Lo") <= hash && hash <= row_hash(p, "Hi"))
			return p;
	}
	return NULL;
}

/* What the wait is for: the partition of `table` holding `hash` (starting
 * at it when `starts`) served by `group` (-1: its own) with no move pending. */
typedef struct part_goal {
	const char *table;
	uint64_t hash;
	bool starts;
	long long group;
} part_goal;

/* The goal's table, for messages. */
#define GOAL_NAME(g) ((g)->table[0] != '\0' ? (g)->table : "(GSI space)")

/* One status answer against the goal: the progress line, whether it is
 * reached, and whether a move to the group was seen and then abandoned. */
static bool part_reached(const json_t *st, const part_goal *g, bool *seen_moving, bool *abandoned,
                         char *line, size_t cap)
{
	const json_t *p = cli_map_partition(st, g->table, g->hash);
	if (p == NULL || (g->starts && row_hash(p, "Lo") != g->hash)) {
		snprintf(line, cap, "%s: no partition of the cluster map %s 0x%016" PRIx64 " yet",
		         GOAL_NAME(g), g->starts ? "starts at" : "holds", g->hash);
		return false;
	}
	long long grp = cli_jint(p, "Group"), to = cli_jint(p, "MovingTo");
	int n = snprintf(line, cap, "%s [%s, %s]: ", GOAL_NAME(g), cli_jstr(p, "Lo"),
	                 cli_jstr(p, "Hi"));
	if (n < 0 || (size_t)n >= cap)
		n = 0;
	if (to != 0) {
		snprintf(line + n, cap - (size_t)n, "group %lld, moving to group %lld", grp, to);
		*seen_moving = *seen_moving || to == g->group;
		return false;
	}
	snprintf(line + n, cap - (size_t)n, "served by group %lld", grp);
	if (g->group < 0 || grp == g->group)
		return true;
	*abandoned = *seen_moving;
	return false;
}

static int wait_partition(const cli_caller *c, const part_goal *g, const json_t *opts,
                          FILE *progress, cli_fail *f)
{
	long long timeout = adm_opt_int(opts, "TimeoutSecs", DEFAULT_TIMEOUT_S);
	long long poll = adm_opt_int(opts, "PollIntervalMs", DEFAULT_POLL_MS);
	if (poll < 10)
		poll = 10;
	double until = adm_now_s() + (double)timeout;
	char last[512] = "", line[512] = "";
	json_t *empty = json_object();
	bool seen_moving = false, abandoned = false;
	for (;;) {
		json_t *st = NULL;
		shoal_error e;
		memset(&e, 0, sizeof(e));
		if (cli_call(c, "ClusterStatus", empty, &st, &e) == SHOAL_OK) {
			bool done =
			    part_reached(st, g, &seen_moving, &abandoned, line, sizeof(line));
			json_decref(st);
			if (strcmp(line, last) != 0) {
				fprintf(progress, "%s\n", line);
				fflush(progress);
				snprintf(last, sizeof(last), "%s", line);
			}
			if (done || abandoned)
				break;
		} else if (strncmp(e.message, last, 500) != 0) {
			/* A failed status (a router restarting): keep asking. */
			fprintf(progress, "%s: ClusterStatus failed: %s\n", GOAL_NAME(g),
			        e.message);
			snprintf(last, sizeof(last), "%.500s", e.message);
		}
		if (adm_now_s() + (double)poll / 1000.0 > until) {
			json_decref(empty);
			return cli_failf(
			    f, CLI_EXIT_OTHER, false,
			    "Timed out after %lld seconds waiting for the partition of "
			    "table %s holding 0x%016" PRIx64 " to be served by group "
			    "%lld with no move pending: %s",
			    timeout, GOAL_NAME(g), g->hash, g->group,
			    line[0] != '\0' ? line : "no status");
		}
		adm_pause_ms(poll);
	}
	json_decref(empty);
	if (abandoned)
		return cli_failf(f, CLI_EXIT_OTHER, false,
		                 "The move to group %lld was abandoned: %s (group 0's leader logs "
		                 "why)",
		                 g->group, line);
	return SHOAL_OK;
}

static int partition_run(const cli_caller *c, const cli_cmd *cmd, const json_t *opts,
                         FILE *progress, json_t **out, shoal_error *err, cli_fail *f)
{
	bool split = strcmp(cmd->name, "split-partition") == 0;
	const char *hkey = split ? "At" : "Hash";
	const char *table = cli_jstr(opts, "TableName");
	bool gsi = json_is_true(json_object_get(opts, "GsiSpace"));
	if ((table[0] != '\0') == gsi)
		return cli_failf(
		    f, CLI_EXIT_USAGE, false,
		    "one of --table-name and --gsi-space (the index partitions of every "
		    "GSI) is required, not both");
	part_goal g = {.table = table, .starts = split, .group = adm_opt_int(opts, "ToGroup", -1)};
	if (cli_parse_hash(split ? "at" : "hash", cli_jstr(opts, hkey), &g.hash, f) != SHOAL_OK)
		return -1;
	if (g.group > 0xffffffffLL || (g.group < 0 && json_object_get(opts, "ToGroup") != NULL))
		return cli_failf(f, CLI_EXIT_USAGE, false,
		                 "argument --to-group: a group id is 0 to 4294967295 (got %lld)",
		                 g.group);
	if (split && g.group == 0)
		g.group = -1; /* no target: the upper half stays */
	if (split && g.hash == 0)
		return cli_failf(f, CLI_EXIT_USAGE, false,
		                 "argument --at: must be 1 or more (hash 0 starts the first "
		                 "partition)");
	char hex[24];
	snprintf(hex, sizeof(hex), "0x%016" PRIx64, g.hash);
	json_t *change = gsi ? json_pack("{s:b,s:s}", "GsiSpace", 1, hkey, hex)
	                     : json_pack("{s:s,s:s}", "TableName", table, hkey, hex);
	if (change != NULL && g.group >= 0)
		json_object_set_new(change, "ToGroup", json_integer(g.group));
	json_t *body = json_pack("{s:o}", split ? "SplitPartition" : "MovePartition", change);
	if (body == NULL)
		return cli_failf(f, CLI_EXIT_OTHER, false, "out of memory");
	int rc = cli_call(c, "Admin", body, out, err);
	json_decref(body);
	if (rc != SHOAL_OK || json_is_false(json_object_get(opts, "Wait")))
		return rc;
	rc = wait_partition(c, &g, opts, progress, f);
	if (rc != SHOAL_OK) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* add-group                                                                 */
/* ------------------------------------------------------------------------ */

/* "1,2,3" (or "1 2 3") -> a JSON array of node ids. */
static int parse_nodes(const char *text, json_t *out, cli_fail *f)
{
	const char *p = text;
	while (*p != '\0') {
		while (*p == ',' || *p == ' ')
			p++;
		if (*p == '\0')
			break;
		char *end;
		errno = 0;
		unsigned long v = (*p >= '0' && *p <= '9') ? strtoul(p, &end, 10) : 0;
		if (v == 0 || v > 0xffffffffUL || errno == ERANGE ||
		    (*end != '\0' && *end != ',' && *end != ' '))
			return cli_failf(
			    f, CLI_EXIT_USAGE, false,
			    "argument --nodes: node ids (1 or more) separated by commas "
			    "(got '%s')",
			    text);
		json_array_append_new(out, json_integer((json_int_t)v));
		p = end;
	}
	return SHOAL_OK;
}

/* The MapGroups row of group id in a ClusterStatus answer, or NULL. */
static const json_t *map_group(const json_t *st, long long id)
{
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(st, "MapGroups"), i,
	                   g) if (cli_jint(g, "Group") == id) return g;
	return NULL;
}

/* Until the new group is founded (its founders elected a leader and group
 * 0's executor marked it: its replicas may move from then on). */
static int wait_founded(const cli_caller *c, long long id, const json_t *opts, FILE *progress,
                        cli_fail *f)
{
	long long timeout = adm_opt_int(opts, "TimeoutSecs", DEFAULT_TIMEOUT_S);
	long long poll = adm_opt_int(opts, "PollIntervalMs", DEFAULT_POLL_MS);
	if (poll < 10)
		poll = 10;
	double until = adm_now_s() + (double)timeout;
	char last[512] = "", line[512];
	json_t *empty = json_object();
	for (;;) {
		json_t *st = NULL;
		shoal_error e;
		memset(&e, 0, sizeof(e));
		if (cli_call(c, "ClusterStatus", empty, &st, &e) == SHOAL_OK) {
			const json_t *g = map_group(st, id);
			bool done = g != NULL && !json_is_true(json_object_get(g, "Founding"));
			snprintf(line, sizeof(line), "group %lld: %s", id,
			         g == NULL ? "not in the cluster map yet"
			         : done    ? "has a leader; serving"
			                   : "founding: its replicas are electing a leader");
			json_decref(st);
			if (strcmp(line, last) != 0) {
				fprintf(progress, "%s\n", line);
				fflush(progress);
				snprintf(last, sizeof(last), "%s", line);
			}
			if (done) {
				json_decref(empty);
				return SHOAL_OK;
			}
		}
		if (adm_now_s() + (double)poll / 1000.0 > until)
			break;
		adm_pause_ms(poll);
	}
	json_decref(empty);
	return cli_failf(f, CLI_EXIT_OTHER, false,
	                 "Timed out after %lld seconds waiting for group %lld to elect a leader "
	                 "(shoal status; the founders' logs say why)",
	                 timeout, id);
}

static int group_run(const cli_caller *c, const json_t *opts, FILE *progress, json_t **out,
                     shoal_error *err, cli_fail *f)
{
	long long id = adm_opt_int(opts, "GroupId", 0);
	if (id < 0 || id > 0xffffffffLL)
		return cli_failf(f, CLI_EXIT_USAGE, false,
		                 "argument --group-id: a group id is 1 or more (got %lld)", id);
	json_t *spec = json_object();
	json_t *nodes = json_array();
	json_t *body = json_pack("{s:o}", "AddGroup", spec);
	if (spec == NULL || nodes == NULL || body == NULL) {
		json_decref(nodes);
		json_decref(body);
		return cli_failf(f, CLI_EXIT_OTHER, false, "out of memory");
	}
	if (id > 0)
		json_object_set_new(spec, "GroupId", json_integer(id));
	int rc = parse_nodes(cli_jstr(opts, "Nodes"), nodes, f);
	if (rc != SHOAL_OK) {
		json_decref(nodes);
		json_decref(body);
		return rc;
	}
	if (json_array_size(nodes) > 0)
		json_object_set(spec, "Nodes", nodes);
	json_decref(nodes);
	rc = cli_call(c, "Admin", body, out, err);
	json_decref(body);
	if (rc != SHOAL_OK || json_is_false(json_object_get(opts, "Wait")))
		return rc;
	rc = wait_founded(c, cli_jint(*out, "GroupId"), opts, progress, f);
	if (rc != SHOAL_OK) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The front door                                                            */
/* ------------------------------------------------------------------------ */

int cli_admin_run(const cli_caller *c, const cli_cmd *cmd, const json_t *opts, FILE *progress,
                  json_t **out, shoal_error *err, cli_fail *f)
{
	*out = NULL;
	if (adm_opt_int(opts, "TimeoutSecs", 0) < 0 || adm_opt_int(opts, "PollIntervalMs", 0) < 0)
		return cli_failf(
		    f, CLI_EXIT_USAGE, false,
		    "argument --timeout-secs / --poll-interval-ms: must not be negative");
	if (cmd->opts == o_move_partition || cmd->opts == o_split_partition)
		return partition_run(c, cmd, opts, progress, out, err, f);
	if (cmd->opts == o_add_group)
		return group_run(c, opts, progress, out, err, f);
	long long node = adm_opt_int(opts, "NodeId", 0);
	if (node < 1 || node > 0xffffffffLL)
		return cli_failf(f, CLI_EXIT_USAGE, false,
		                 "argument --node-id: a node id is 1 or more (got %lld)", node);
	json_t *body;
	bool add = strcmp(cmd->name, "add-node") == 0;
	if (add)
		body =
		    json_pack("{s:{s:I,s:O,s:O}}", "AddNode", "Id", (json_int_t)node, "Raft",
		              json_object_get(opts, "Raft"), "Rpc", json_object_get(opts, "Rpc"));
	else
		body = json_pack("{s:I}", "DrainNode", (json_int_t)node);
	if (body == NULL)
		return cli_failf(f, CLI_EXIT_OTHER, false, "out of memory");
	int rc = cli_call(c, "Admin", body, out, err);
	json_decref(body);
	if (rc != SHOAL_OK || add || json_is_false(json_object_get(opts, "Wait")))
		return rc;
	rc = wait_removed(c, node, opts, progress, err, f);
	if (rc != SHOAL_OK) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}
