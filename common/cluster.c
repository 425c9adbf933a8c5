/*
 * cluster.c -- parsing the cluster file (inih) and the placement functions.
 * The rules are documented in cluster.h.
 */
#include "cluster.h"

#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

typedef struct parse_state {
	sh_cluster_conf *c;
	char *errmsg;
	int rc;
} parse_state;

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return false;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

static bool copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

static sh_node_conf *node_for(sh_cluster_conf *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].id == id)
			return &c->nodes[i];
	if (c->n_nodes == SH_MAX_NODES)
		return NULL;
	sh_node_conf *n = &c->nodes[c->n_nodes++];
	memset(n, 0, sizeof(*n));
	n->id = id;
	return n;
}

/* inih handler: returns 0 to stop with an error (inih then reports the line). */
static int on_entry(void *user, const char *section, const char *name, const char *value)
{
	parse_state *st = user;
	sh_cluster_conf *c = st->c;
	unsigned long v;
	if (strcmp(section, "cluster") == 0) {
		if (strcmp(name, "groups") == 0 && parse_uint(value, SH_MAX_GROUPS, &v) && v >= 1)
			c->groups = (uint32_t)v;
		else if (strcmp(name, "max_groups") == 0 && parse_uint(value, SH_MAX_GROUPS, &v) &&
		         v >= 1)
			c->max_groups = (uint32_t)v;
		else if (strcmp(name, "auto_groups") == 0 && parse_uint(value, 1, &v))
			c->auto_groups = v == 1;
		else if (strcmp(name, "replication") == 0 &&
		         parse_uint(value, SH_MAX_REPLICATION, &v) && v >= 1)
			c->replication = (uint32_t)v;
		else if (strcmp(name, "outbox_limit") == 0 && parse_uint(value, 1000000000UL, &v) &&
		         v >= 1)
			c->outbox_limit = (uint64_t)v;
		else if (strcmp(name, "partition_rcu") == 0 &&
		         parse_uint(value, 1000000000UL, &v) && v >= 1)
			c->partition_rcu = (uint64_t)v;
		else if (strcmp(name, "partition_wcu") == 0 &&
		         parse_uint(value, 1000000000UL, &v) && v >= 1)
			c->partition_wcu = (uint64_t)v;
		else if (strcmp(name, "burst_secs") == 0 && parse_uint(value, 86400, &v))
			c->burst_secs = (uint32_t)v, c->burst_set = true;
		else if (strcmp(name, "raft_segment_mb") == 0 && parse_uint(value, 1024, &v) &&
		         v >= 1)
			c->raft_segment_mb = (uint32_t)v;
		else if (strcmp(name, "snapshot_entries") == 0 && parse_uint(value, 1u << 30, &v) &&
		         v >= 2)
			c->snapshot_entries = (uint32_t)v;
		else if (strcmp(name, "scrub_ms") == 0 && parse_uint(value, 86400000UL, &v))
			c->scrub_ms = (uint32_t)v, c->scrub_set = true;
		else if (strcmp(name, "stream_retention_s") == 0 &&
		         parse_uint(value, 365UL * 86400, &v))
			c->stream_retention_s = (uint32_t)v;
		else if (strcmp(name, "ttl_scan_ms") == 0 && parse_uint(value, 86400000UL, &v))
			c->ttl_scan_ms = (uint32_t)v, c->ttl_scan_set = true;
		else if (strcmp(name, "ttl_change_interval_ms") == 0 &&
		         parse_uint(value, 7UL * 86400000, &v))
			c->ttl_change_interval_ms = (uint32_t)v, c->ttl_change_interval_set = true;
		else if (strcmp(name, "ttl_share") == 0 && parse_uint(value, 100, &v) && v >= 1)
			c->ttl_share = (uint32_t)v;
		else if (strcmp(name, "dead_after_ms") == 0 &&
		         parse_uint(value, 7UL * 86400000, &v) && v >= 1000)
			c->dead_after_ms = (uint32_t)v;
		else if (strcmp(name, "split_bytes") == 0 && parse_uint(value, 1UL << 50, &v))
			c->split_bytes = (uint64_t)v, c->split_bytes_set = true;
		else if (strcmp(name, "split_units") == 0 && parse_uint(value, 1000000000UL, &v))
			c->split_units = (uint64_t)v;
		else if (strcmp(name, "table_partitions") == 0 &&
		         parse_uint(value, SH_TABLE_PARTITIONS_MAX, &v))
			c->table_partitions = (uint32_t)v;
		else if (strcmp(name, "split_throttled") == 0 &&
		         parse_uint(value, 1000000000UL, &v))
			c->split_throttled = (uint32_t)v, c->split_throttled_set = true;
		else
			goto bad;
		return 1;
	}
	if (strcmp(section, "router") == 0) {
		if (strcmp(name, "listen") == 0 &&
		    copy_str(c->router_listen, sizeof(c->router_listen), value))
			return 1;
		if (strcmp(name, "metrics") == 0 &&
		    copy_str(c->router_metrics, sizeof(c->router_metrics), value))
			return 1;
		goto bad;
	}
	if (strcmp(section, "tls") == 0) {
		if (strcmp(name, "dir") == 0 && value[0] != '\0' &&
		    copy_str(c->tls_dir, sizeof(c->tls_dir), value))
			return 1;
		goto bad;
	}
	if (strncmp(section, "node.", 5) == 0) {
		if (!parse_uint(section + 5, UINT32_MAX, &v) || v == 0) {
			sh_errf(st->errmsg, SHOAL_E_VALIDATION,
			        "section [%s]: node ids are integers >= 1", section);
			st->rc = SHOAL_E_VALIDATION;
			return 0;
		}
		sh_node_conf *n = node_for(c, (uint32_t)v);
		if (n == NULL) {
			sh_errf(st->errmsg, SHOAL_E_VALIDATION, "more than %d nodes", SH_MAX_NODES);
			st->rc = SHOAL_E_VALIDATION;
			return 0;
		}
		if (strcmp(name, "raft") == 0) {
			const char *colon = strrchr(value, ':');
			unsigned long port;
			if (colon == NULL || colon == value ||
			    (size_t)(colon - value) >= sizeof(n->raft_host) - 8 ||
			    !parse_uint(colon + 1, 65535, &port) || port == 0)
				goto bad;
			memcpy(n->raft_host, value, (size_t)(colon - value));
			n->raft_host[colon - value] = '\0';
			n->raft_port = (uint16_t)port;
			return 1;
		}
		if (strcmp(name, "rpc") == 0 && copy_str(n->rpc, sizeof(n->rpc), value))
			return 1;
		if (strcmp(name, "metrics") == 0 && copy_str(n->metrics, sizeof(n->metrics), value))
			return 1;
		if (strcmp(name, "dir") == 0 && copy_str(n->dir, sizeof(n->dir), value))
			return 1;
		goto bad;
	}
	sh_errf(st->errmsg, SHOAL_E_VALIDATION, "unknown section [%s]", section);
	st->rc = SHOAL_E_VALIDATION;
	return 0;
bad:
	sh_errf(st->errmsg, SHOAL_E_VALIDATION, "[%s] %s = %s: invalid or unknown setting", section,
	        name, value);
	st->rc = SHOAL_E_VALIDATION;
	return 0;
}

int sh_cluster_load(const char *path, sh_cluster_conf *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	out->groups = 1;
	out->replication = 3;
	parse_state st = {.c = out, .errmsg = errmsg, .rc = SHOAL_OK};
	int line = ini_parse(path, on_entry, &st);
	if (line < 0)
		return sh_errf(errmsg, SHOAL_E_IO, "%s: cannot open", path);
	if (line > 0) {
		if (st.rc == SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s:%d: syntax error", path,
			               line);
		char inner[SH_ERRMSG_SIZE];
		snprintf(inner, sizeof(inner), "%s", errmsg ? errmsg : "");
		return sh_errf(errmsg, st.rc, "%s:%d: %s", path, line, inner);
	}
	if (out->n_nodes == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s: no [node.N] sections", path);
	if (out->replication > out->n_nodes)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "%s: replication %u needs at least %u nodes, the file has %u", path,
		               out->replication, out->replication, out->n_nodes);
	for (uint32_t i = 0; i < out->n_nodes; i++) {
		const sh_node_conf *n = &out->nodes[i];
		if (n->raft_port == 0 || n->rpc[0] == '\0')
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%s: [node.%u] needs raft and rpc addresses", path, n->id);
		if ((uint32_t)n->raft_port + sh_cluster_group_cap(out) > 65536)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%s: [node.%u] raft port %u + %u groups exceeds 65535", path,
			               n->id, n->raft_port, sh_cluster_group_cap(out));
	}
	return SHOAL_OK;
}

uint32_t sh_cluster_group_cap(const sh_cluster_conf *c)
{
	return c->max_groups > c->groups ? c->max_groups : c->groups;
}

const sh_node_conf *sh_cluster_node(const sh_cluster_conf *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].id == id)
			return &c->nodes[i];
	return NULL;
}

void sh_cluster_replicas(const sh_cluster_conf *c, uint32_t group, uint32_t *nodes)
{
	for (uint32_t k = 0; k < c->replication; k++)
		nodes[k] = c->nodes[(group + k) % c->n_nodes].id;
}

bool sh_cluster_hosts(const sh_cluster_conf *c, uint32_t node, uint32_t group)
{
	uint32_t r[SH_MAX_REPLICATION];
	sh_cluster_replicas(c, group, r);
	for (uint32_t k = 0; k < c->replication; k++)
		if (r[k] == node)
			return true;
	return false;
}

int64_t sh_cluster_stream_retention_ms(const sh_cluster_conf *c)
{
	return c->stream_retention_s != 0 ? (int64_t)c->stream_retention_s * 1000
	                                  : 24LL * 3600 * 1000;
}

uint64_t sh_cluster_split_bytes(const sh_cluster_conf *c)
{
	return c->split_bytes_set ? c->split_bytes : SH_SPLIT_BYTES;
}

uint32_t sh_cluster_split_throttled(const sh_cluster_conf *c)
{
	return c->split_throttled_set ? c->split_throttled : SH_SPLIT_THROTTLED;
}

uint32_t sh_cluster_partitions(const sh_cluster_conf *c)
{
	return c->groups > 1 ? c->groups - 1 : 1;
}

uint32_t sh_cluster_table_partitions(const sh_cluster_conf *c)
{
	uint32_t d = sh_cluster_partitions(c);
	uint32_t per = c->table_partitions > d ? (c->table_partitions + d - 1) / d : 1;
	return d * per;
}

/* ceil(i * 2^64 / d) for 0 <= i <= d, as a 128-bit value (2^64 when i == d). */
static unsigned __int128 boundary(uint32_t i, uint32_t d)
{
	unsigned __int128 num = (unsigned __int128)i << 64;
	return (num + d - 1) / d;
}

uint32_t sh_cluster_partition_of(const sh_cluster_conf *c, uint64_t hash)
{
	uint32_t d = sh_cluster_partitions(c);
	/* The largest p with boundary(p) <= hash. */
	uint32_t p = (uint32_t)(((unsigned __int128)hash * d) >> 64);
	while (p + 1 < d && boundary(p + 1, d) <= hash)
		p++;
	while (p > 0 && boundary(p, d) > hash)
		p--;
	return p;
}

void sh_cluster_partition_range(const sh_cluster_conf *c, uint32_t p, uint64_t *lo, uint64_t *hi)
{
	uint32_t d = sh_cluster_partitions(c);
	*lo = (uint64_t)boundary(p, d);
	*hi = (uint64_t)(boundary(p + 1, d) - 1);
}

uint32_t sh_cluster_partition_group(const sh_cluster_conf *c, uint32_t p)
{
	return c->groups > 1 ? 1 + p : 0;
}

bool sh_cluster_group_partition(const sh_cluster_conf *c, uint32_t g, uint32_t *p)
{
	uint32_t k = c->groups > 1 ? g - 1 : g;
	if ((c->groups > 1 && g == 0) || k >= sh_cluster_partitions(c))
		return false;
	*p = k;
	return true;
}
