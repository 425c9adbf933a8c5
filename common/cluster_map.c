/*
 * cluster_map.c -- the cluster map: construction, lookups, invariants and
 * mutations (contract in cluster_map.h; the encoding is cluster_map_codec.c).
 *
 * Every mutation has the same shape: find what it names, check every rule
 * it could break, make room (the only step that can fail afterwards, and it
 * changes nothing visible), then write and bump the epoch.
 */
#include "cluster_map.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"

void sh_map_init(sh_map *m, uint32_t replication)
{
	memset(m, 0, sizeof(*m));
	m->replication = replication;
}

void sh_map_fini(sh_map *m)
{
	sh_free(m->nodes);
	sh_free(m->groups);
	sh_free(m->parts);
	memset(m, 0, sizeof(*m));
}

/* Grows an array to hold `need` elements (doubling). */
static int reserve(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return SHOAL_OK;
	uint32_t n = *cap ? *cap : 16;
	while (n < need)
		n = n > UINT32_MAX / 2 ? need : n * 2;
	void *p = sh_realloc(*arr, (size_t)n * size);
	if (p == NULL)
		return SHOAL_E_NOMEM;
	*arr = p;
	*cap = n;
	return SHOAL_OK;
}

static void *dup_array(const void *src, uint32_t n, size_t size)
{
	if (n == 0)
		return NULL;
	void *p = sh_malloc((size_t)n * size);
	if (p != NULL)
		memcpy(p, src, (size_t)n * size);
	return p;
}

int sh_map_copy(sh_map *dst, const sh_map *src)
{
	sh_map_init(dst, src->replication);
	dst->epoch = src->epoch;
	dst->nodes = dup_array(src->nodes, src->n_nodes, sizeof(sh_map_node));
	dst->groups = dup_array(src->groups, src->n_groups, sizeof(sh_map_group));
	dst->parts = dup_array(src->parts, src->n_parts, sizeof(sh_map_part));
	if ((src->n_nodes && !dst->nodes) || (src->n_groups && !dst->groups) ||
	    (src->n_parts && !dst->parts)) {
		sh_map_fini(dst);
		sh_map_init(dst, src->replication);
		return SHOAL_E_NOMEM;
	}
	dst->n_nodes = dst->cap_nodes = src->n_nodes;
	dst->n_groups = dst->cap_groups = src->n_groups;
	dst->n_parts = dst->cap_parts = src->n_parts;
	return SHOAL_OK;
}

bool sh_map_equal(const sh_map *a, const sh_map *b)
{
	if (a->epoch != b->epoch || a->replication != b->replication || a->n_nodes != b->n_nodes ||
	    a->n_groups != b->n_groups || a->n_parts != b->n_parts)
		return false;
	for (uint32_t i = 0; i < a->n_nodes; i++) {
		const sh_map_node *x = &a->nodes[i], *y = &b->nodes[i];
		if (x->id != y->id || x->state != y->state || x->raft_port != y->raft_port ||
		    strcmp(x->raft_host, y->raft_host) != 0 || strcmp(x->rpc, y->rpc) != 0)
			return false;
	}
	for (uint32_t i = 0; i < a->n_groups; i++) {
		const sh_map_group *x = &a->groups[i], *y = &b->groups[i];
		if (x->id != y->id || x->n_replicas != y->n_replicas)
			return false;
		for (uint32_t k = 0; k < x->n_replicas; k++)
			if (x->replicas[k].node != y->replicas[k].node ||
			    x->replicas[k].voter != y->replicas[k].voter ||
			    x->replicas[k].replaces != y->replicas[k].replaces)
				return false;
	}
	for (uint32_t i = 0; i < a->n_parts; i++) {
		const sh_map_part *x = &a->parts[i], *y = &b->parts[i];
		if (x->table != y->table || x->lo != y->lo || x->group != y->group ||
		    x->to_group != y->to_group)
			return false;
	}
	return true;
}

/* --- lookups ------------------------------------------------------------- */

/* Index of the first element with id >= `id` in an array sorted by id (of
 * n elements of `size` bytes, each with its uint32_t id at `off`). */
static uint32_t lower_by_id(const void *base, uint32_t n, size_t size, size_t off, uint32_t id)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint32_t at;
		memcpy(&at, (const char *)base + (size_t)mid * size + off, sizeof(at));
		if (at < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint32_t node_lower(const sh_map *m, uint32_t id)
{
	return lower_by_id(m->nodes, m->n_nodes, sizeof(*m->nodes), offsetof(sh_map_node, id), id);
}

static uint32_t group_lower(const sh_map *m, uint32_t id)
{
	return lower_by_id(m->groups, m->n_groups, sizeof(*m->groups), offsetof(sh_map_group, id),
	                   id);
}

/* Index of the first partition > (table, hash), by (table, lo). */
static uint32_t part_upper(const sh_map *m, uint32_t table, uint64_t hash)
{
	uint32_t lo = 0, hi = m->n_parts;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const sh_map_part *p = &m->parts[mid];
		if (p->table < table || (p->table == table && p->lo <= hash))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const sh_map_node *sh_map_node_get(const sh_map *m, uint32_t id)
{
	uint32_t i = node_lower(m, id);
	return i < m->n_nodes && m->nodes[i].id == id ? &m->nodes[i] : NULL;
}

const sh_map_group *sh_map_group_get(const sh_map *m, uint32_t id)
{
	uint32_t i = group_lower(m, id);
	return i < m->n_groups && m->groups[i].id == id ? &m->groups[i] : NULL;
}

const char *sh_map_table_label(uint32_t table, char *buf)
{
	if (table == SH_MAP_GSI_SPACE)
		return "the GSI space";
	snprintf(buf, SH_MAP_TABLE_LABEL, "table %u", table);
	return buf;
}

uint32_t sh_map_part_of(const sh_map *m, uint32_t table, uint64_t hash)
{
	uint32_t i = part_upper(m, table, hash);
	/* Every table has a partition at lo = 0, so the one before is ours. */
	return i > 0 && m->parts[i - 1].table == table ? i - 1 : SH_MAP_NONE;
}

uint32_t sh_map_part_find(const sh_map *m, uint32_t table, uint64_t lo)
{
	uint32_t i = sh_map_part_of(m, table, lo);
	return i != SH_MAP_NONE && m->parts[i].lo == lo ? i : SH_MAP_NONE;
}

uint64_t sh_map_part_hi(const sh_map *m, uint32_t i)
{
	if (i + 1 < m->n_parts && m->parts[i + 1].table == m->parts[i].table)
		return m->parts[i + 1].lo - 1;
	return UINT64_MAX;
}

uint32_t sh_map_route(const sh_map *m, uint32_t table, uint64_t hash)
{
	uint32_t i = sh_map_part_of(m, table, hash);
	return i == SH_MAP_NONE ? SH_MAP_NONE : m->parts[i].group;
}

int sh_map_replica_index(const sh_map_group *g, uint32_t node)
{
	for (uint32_t k = 0; k < g->n_replicas; k++)
		if (g->replicas[k].node == node)
			return (int)k;
	return -1;
}

uint32_t sh_map_voters(const sh_map_group *g)
{
	uint32_t v = 0;
	for (uint32_t k = 0; k < g->n_replicas; k++)
		v += g->replicas[k].voter != 0;
	return v;
}

bool sh_map_is_data_group(const sh_map *m, uint32_t group)
{
	return group != 0 || m->n_groups == 1;
}

uint32_t sh_map_node_groups(const sh_map *m, uint32_t node, uint32_t *groups, uint32_t cap)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->n_groups; i++)
		if (sh_map_replica_index(&m->groups[i], node) >= 0) {
			if (n < cap)
				groups[n] = m->groups[i].id;
			n++;
		}
	return n;
}

/* --- invariants ---------------------------------------------------------- */

bool sh_map_check(const sh_map *m, char *errmsg)
{
	if (m->replication < 1 || m->replication > SH_MAX_REPLICATION)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "replication %u", m->replication), false;
	for (uint32_t i = 0; i < m->n_nodes; i++) {
		const sh_map_node *n = &m->nodes[i];
		if (n->id == 0 || (i > 0 && m->nodes[i - 1].id >= n->id))
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u: ids not ascending",
			               n->id),
			       false;
		if (n->state > SH_MAP_NODE_DRAINING)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u: state %u", n->id,
			               n->state),
			       false;
		if (memchr(n->raft_host, 0, sizeof(n->raft_host)) == NULL ||
		    memchr(n->rpc, 0, sizeof(n->rpc)) == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u: address too long",
			               n->id),
			       false;
	}
	uint32_t need = sh_map_majority(m->replication);
	for (uint32_t i = 0; i < m->n_groups; i++) {
		const sh_map_group *g = &m->groups[i];
		if (i > 0 && m->groups[i - 1].id >= g->id)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u: ids not ascending",
			               g->id),
			       false;
		if (g->n_replicas == 0 || g->n_replicas > SH_MAP_GROUP_REPLICAS)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u: %u replicas", g->id,
			               g->n_replicas),
			       false;
		uint32_t v = sh_map_voters(g);
		if (v < need || v > m->replication + 1)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "group %u: %u voters (replication %u)", g->id, v,
			               m->replication),
			       false;
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			const sh_map_replica *r = &g->replicas[k];
			if (r->voter > SH_MAP_FOUNDER || sh_map_node_get(m, r->node) == NULL)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               "group %u: replica on unknown node %u", g->id,
				               r->node),
				       false;
			if ((r->voter == SH_MAP_FOUNDER) !=
			        (g->replicas[0].voter == SH_MAP_FOUNDER) ||
			    (r->voter == SH_MAP_FOUNDER && r->replaces != 0))
				return sh_errf(
				           errmsg, SHOAL_E_VALIDATION,
				           "group %u: founders mixed with other replicas (node %u)",
				           g->id, r->node),
				       false;
			for (uint32_t j = 0; j < k; j++)
				if (g->replicas[j].node == r->node)
					return sh_errf(errmsg, SHOAL_E_VALIDATION,
					               "group %u: two replicas on node %u", g->id,
					               r->node),
					       false;
			if (r->replaces != 0 &&
			    (r->replaces == r->node || sh_map_replica_index(g, r->replaces) < 0))
				return sh_errf(
				           errmsg, SHOAL_E_VALIDATION,
				           "group %u: replica on %u replaces %u, not in the group",
				           g->id, r->node, r->replaces),
				       false;
		}
	}
	for (uint32_t i = 0; i < m->n_parts; i++) {
		const sh_map_part *p = &m->parts[i];
		/* A table's first partition starts at 0, after the previous
		 * table's (ids ascending); the others after their predecessor. */
		bool first = i == 0 || m->parts[i - 1].table != p->table;
		if (first ? p->lo != 0 || (i > 0 && m->parts[i - 1].table > p->table)
		          : m->parts[i - 1].lo >= p->lo)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "table %u: partition at %llu out of order or leaves a gap",
			               p->table, (unsigned long long)p->lo),
			       false;
		if (sh_map_group_get(m, p->group) == NULL ||
		    (p->to_group != SH_MAP_NONE &&
		     (p->to_group == p->group || sh_map_group_get(m, p->to_group) == NULL)))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "table %u: partition at %llu in unknown group", p->table,
			               (unsigned long long)p->lo),
			       false;
	}
	return true;
}

/* --- construction -------------------------------------------------------- */

int sh_map_from_conf(sh_map *m, const sh_cluster_conf *c, char *errmsg)
{
	sh_map_init(m, c->replication);
	if (c->n_nodes == 0 || c->replication > c->n_nodes || c->groups == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "cluster file: %u nodes, %u groups",
		               c->n_nodes, c->groups);
	m->nodes = sh_calloc(c->n_nodes, sizeof(sh_map_node));
	m->groups = sh_calloc(c->groups, sizeof(sh_map_group));
	if (m->nodes == NULL || m->groups == NULL) {
		sh_map_fini(m);
		sh_map_init(m, c->replication);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	}
	m->cap_nodes = c->n_nodes;
	m->cap_groups = c->groups;
	/* The file's order decides placement (position k); the map keeps nodes
	 * by id, and groups name nodes by id, so the order is not needed after. */
	for (uint32_t i = 0; i < c->n_nodes; i++) {
		sh_map_node n = {.id = c->nodes[i].id, .raft_port = c->nodes[i].raft_port};
		memcpy(n.raft_host, c->nodes[i].raft_host, sizeof(n.raft_host));
		memcpy(n.rpc, c->nodes[i].rpc, sizeof(n.rpc));
		uint32_t at = node_lower(m, n.id);
		memmove(&m->nodes[at + 1], &m->nodes[at], (m->n_nodes - at) * sizeof(n));
		m->nodes[at] = n;
		m->n_nodes++;
	}
	for (uint32_t g = 0; g < c->groups; g++) {
		uint32_t ids[SH_MAX_REPLICATION];
		sh_cluster_replicas(c, g, ids);
		sh_map_group *grp = &m->groups[g];
		grp->id = g;
		grp->n_replicas = c->replication;
		for (uint32_t k = 0; k < c->replication; k++)
			grp->replicas[k] = (sh_map_replica){.node = ids[k], .voter = 1};
	}
	m->n_groups = c->groups;
	m->epoch = 1;
	if (!sh_map_check(m, errmsg)) { /* duplicate node ids in the file */
		sh_map_fini(m);
		sh_map_init(m, c->replication);
		return SHOAL_E_VALIDATION;
	}
	return SHOAL_OK;
}

/* --- mutations: tables --------------------------------------------------- */

/* ceil(i * 2^64 / n), as cluster.c's boundary (the same ranges by contract). */
static uint64_t boundary(uint32_t i, uint32_t n)
{
	return (uint64_t)((((unsigned __int128)i << 64) + n - 1) / n);
}

uint32_t sh_map_data_groups(const sh_map *m)
{
	if (m->n_groups == 0)
		return 0;
	return m->n_groups - (sh_map_is_data_group(m, m->groups[0].id) ? 0 : 1);
}

int sh_map_add_table(sh_map *m, uint32_t table, uint32_t n, uint32_t d, char *errmsg)
{
	if (n == 0 || n > SH_MAP_MAX_PARTS - m->n_parts)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "table %u: %u partitions", table, n);
	if (sh_map_part_of(m, table, 0) != SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_IN_USE, "table %u has partitions already", table);
	if (m->n_groups == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "no groups");
	if (d == 0 || d > sh_map_data_groups(m))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: placed over %u data groups, the map has %u", table, d,
		               sh_map_data_groups(m));
	int rc = reserve((void **)&m->parts, &m->cap_parts, m->n_parts + n, sizeof(sh_map_part));
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "table %u: out of memory", table);
	uint32_t first = sh_map_is_data_group(m, m->groups[0].id) ? 0 : 1;
	uint32_t at = part_upper(m, table, UINT64_MAX);
	memmove(&m->parts[at + n], &m->parts[at], (m->n_parts - at) * sizeof(sh_map_part));
	for (uint32_t i = 0; i < n; i++)
		m->parts[at + i] =
		    (sh_map_part){.table = table,
		                  .lo = boundary(i, n),
		                  .group = m->groups[first + (uint32_t)((uint64_t)i * d / n)].id,
		                  .to_group = SH_MAP_NONE};
	m->n_parts += n;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_drop_table(sh_map *m, uint32_t table, char *errmsg)
{
	uint32_t a = sh_map_part_of(m, table, 0);
	if (a == SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "table %u has no partitions", table);
	uint32_t b = part_upper(m, table, UINT64_MAX);
	memmove(&m->parts[a], &m->parts[b], (m->n_parts - b) * sizeof(sh_map_part));
	m->n_parts -= b - a;
	m->epoch++;
	return SHOAL_OK;
}

/* --- mutations: nodes ---------------------------------------------------- */

int sh_map_add_node(sh_map *m, const sh_map_node *n, char *errmsg)
{
	if (n->id == 0 || sh_map_node_get(m, n->id) != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u exists (or id 0)", n->id);
	if (m->n_nodes == SH_MAP_MAX_NODES)
		return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED, "more than %u nodes",
		               SH_MAP_MAX_NODES);
	if (memchr(n->raft_host, 0, sizeof(n->raft_host)) == NULL ||
	    memchr(n->rpc, 0, sizeof(n->rpc)) == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u: address too long", n->id);
	int rc = reserve((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof(sh_map_node));
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "node %u: out of memory", n->id);
	uint32_t at = node_lower(m, n->id);
	memmove(&m->nodes[at + 1], &m->nodes[at], (m->n_nodes - at) * sizeof(*n));
	m->nodes[at] = *n;
	m->nodes[at].state = SH_MAP_NODE_ACTIVE;
	m->n_nodes++;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_drain_node(sh_map *m, uint32_t node, char *errmsg)
{
	sh_map_node *n = (sh_map_node *)sh_map_node_get(m, node);
	if (n == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no node %u", node);
	if (n->state == SH_MAP_NODE_DRAINING)
		return sh_errf(errmsg, SHOAL_E_IN_USE, "node %u is draining already", node);
	n->state = SH_MAP_NODE_DRAINING;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_remove_node(sh_map *m, uint32_t node, char *errmsg)
{
	const sh_map_node *n = sh_map_node_get(m, node);
	if (n == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no node %u", node);
	uint32_t g;
	if (sh_map_node_groups(m, node, &g, 1) > 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "node %u still holds group %u", node, g);
	uint32_t at = (uint32_t)(n - m->nodes);
	memmove(&m->nodes[at], &m->nodes[at + 1], (m->n_nodes - at - 1) * sizeof(*n));
	m->n_nodes--;
	m->epoch++;
	return SHOAL_OK;
}

/* --- mutations: groups and replicas -------------------------------------- */

/* Checks that node can take a new replica of g (g NULL: a new group). */
static int check_new_replica(const sh_map *m, const sh_map_group *g, uint32_t gid, uint32_t node,
                             char *errmsg)
{
	const sh_map_node *n = sh_map_node_get(m, node);
	if (n == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "group %u: no node %u", gid, node);
	if (n->state != SH_MAP_NODE_ACTIVE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "group %u: node %u is draining and takes no replica", gid, node);
	if (g != NULL && sh_map_replica_index(g, node) >= 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u has a replica on node %u", gid,
		               node);
	return SHOAL_OK;
}

int sh_map_add_group(sh_map *m, uint32_t group, const uint32_t *nodes, uint32_t n, char *errmsg)
{
	if (sh_map_group_get(m, group) != NULL || group == SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u exists", group);
	if (n < sh_map_majority(m->replication) || n > m->replication)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u: %u voters (replication %u)",
		               group, n, m->replication);
	if (m->n_groups == SH_MAP_MAX_GROUPS)
		return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED, "more than %u groups",
		               SH_MAP_MAX_GROUPS);
	sh_map_group g = {.id = group};
	for (uint32_t k = 0; k < n; k++) {
		int rc = check_new_replica(m, &g, group, nodes[k], errmsg);
		if (rc != SHOAL_OK)
			return rc;
		g.replicas[g.n_replicas++] = (sh_map_replica){.node = nodes[k], .voter = 1};
	}
	int rc = reserve((void **)&m->groups, &m->cap_groups, m->n_groups + 1, sizeof(g));
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "group %u: out of memory", group);
	uint32_t at = group_lower(m, group);
	memmove(&m->groups[at + 1], &m->groups[at], (m->n_groups - at) * sizeof(g));
	m->groups[at] = g;
	m->n_groups++;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_create_group(sh_map *m, uint32_t group, const uint32_t *nodes, uint32_t n, char *errmsg)
{
	int rc = sh_map_add_group(m, group, nodes, n, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	for (uint32_t k = 0; k < g->n_replicas; k++)
		g->replicas[k].voter = SH_MAP_FOUNDER;
	return SHOAL_OK;
}

uint32_t sh_map_emptiest_nodes(const sh_map *m, uint32_t want, uint32_t *out)
{
	uint32_t n = 0;
	uint32_t *reps = sh_calloc(2 * (size_t)m->n_nodes + 1, sizeof(*reps));
	if (reps == NULL)
		return 0;
	uint32_t *leads = reps + m->n_nodes;
	for (uint32_t gi = 0; gi < m->n_groups; gi++) {
		const sh_map_group *g = &m->groups[gi];
		for (uint32_t k = 0; k < g->n_replicas; k++)
			reps[sh_map_node_get(m, g->replicas[k].node) - m->nodes]++;
		const sh_map_node *pl = sh_map_node_get(m, sh_map_preferred(m, g->id));
		if (pl != NULL)
			leads[pl - m->nodes]++;
	}
	for (; n < want; n++) {
		uint32_t best = UINT32_MAX;
		for (uint32_t i = 0; i < m->n_nodes; i++) {
			if (m->nodes[i].state != SH_MAP_NODE_ACTIVE || reps[i] == UINT32_MAX)
				continue;
			if (best == UINT32_MAX || reps[i] < reps[best] ||
			    (reps[i] == reps[best] && leads[i] < leads[best]))
				best = i;
		}
		if (best == UINT32_MAX)
			break;
		out[n] = m->nodes[best].id;
		reps[best] = UINT32_MAX; /* taken */
	}
	sh_free(reps);
	return n;
}

bool sh_map_group_founding(const sh_map_group *g)
{
	return g != NULL && g->n_replicas > 0 && g->replicas[0].voter == SH_MAP_FOUNDER;
}

int sh_map_group_founded(sh_map *m, uint32_t group, char *errmsg)
{
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", group);
	if (!sh_map_group_founding(g))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u is not being founded", group);
	for (uint32_t k = 0; k < g->n_replicas; k++)
		g->replicas[k].voter = 1;
	m->epoch++;
	return SHOAL_OK;
}

/* Membership changes wait until a new group is founded: its founders
 * bootstrap it from the map's replicas, which must stay as they were. */
static int check_not_founding(const sh_map_group *g, char *errmsg)
{
	if (sh_map_group_founding(g))
		return sh_errf(
		    errmsg, SHOAL_E_IN_USE,
		    "group %u is being founded: its replicas change once it has a leader", g->id);
	return SHOAL_OK;
}

int sh_map_add_replica(sh_map *m, uint32_t group, uint32_t node, uint32_t replaces, char *errmsg)
{
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", group);
	if (check_not_founding(g, errmsg) != SHOAL_OK)
		return SHOAL_E_IN_USE;
	int rc = check_new_replica(m, g, group, node, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (g->n_replicas == SH_MAP_GROUP_REPLICAS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u has %u replicas", group,
		               g->n_replicas);
	if (replaces != 0 && sh_map_replica_index(g, replaces) < 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "group %u has no replica on node %u",
		               group, replaces);
	g->replicas[g->n_replicas++] =
	    (sh_map_replica){.node = node, .voter = 0, .replaces = replaces};
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_promote(sh_map *m, uint32_t group, uint32_t node, char *errmsg)
{
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", group);
	int k = sh_map_replica_index(g, node);
	if (check_not_founding(g, errmsg) != SHOAL_OK)
		return SHOAL_E_IN_USE;
	if (k < 0 || g->replicas[k].voter)
		return sh_errf(errmsg, k < 0 ? SHOAL_E_NOT_FOUND : SHOAL_E_VALIDATION,
		               "group %u: node %u is not a non-voter", group, node);
	if (sh_map_voters(g) >= m->replication + 1)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "group %u has %u voters: remove one before promoting", group,
		               sh_map_voters(g));
	g->replicas[k].voter = 1;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_remove_replica(sh_map *m, uint32_t group, uint32_t node, char *errmsg)
{
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", group);
	int k = sh_map_replica_index(g, node);
	if (k < 0)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "group %u has no replica on node %u",
		               group, node);
	if (check_not_founding(g, errmsg) != SHOAL_OK)
		return SHOAL_E_IN_USE;
	if (g->replicas[k].voter && sh_map_voters(g) - 1 < sh_map_majority(m->replication))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "group %u: removing node %u leaves %u voters, fewer than a "
		               "majority of %u",
		               group, node, sh_map_voters(g) - 1, m->replication);
	/* The replica that replaces it takes its place in the order (the first
	 * voter is the group's preferred leader: a move keeps the preference
	 * on the slot, so leaders stay spread as placement spread them). */
	int heir = -1;
	for (uint32_t j = 0; j < g->n_replicas && heir < 0; j++)
		if (g->replicas[j].replaces == node && g->replicas[j].voter)
			heir = (int)j;
	if (heir >= 0) {
		g->replicas[k] = g->replicas[heir];
		g->replicas[k].replaces = 0;
		k = heir;
	}
	memmove(&g->replicas[k], &g->replicas[k + 1],
	        (g->n_replicas - (uint32_t)k - 1) * sizeof(sh_map_replica));
	g->n_replicas--;
	for (uint32_t j = 0; j < g->n_replicas; j++)
		if (g->replicas[j].replaces == node)
			g->replicas[j].replaces = 0;
	m->epoch++;
	return SHOAL_OK;
}

uint32_t sh_map_preferred(const sh_map *m, uint32_t group)
{
	uint32_t first = 0;
	const sh_map_group *g = sh_map_group_get(m, group);
	for (uint32_t k = 0; g != NULL && k < g->n_replicas; k++) {
		const sh_map_replica *r = &g->replicas[k];
		if (!r->voter)
			continue;
		if (first == 0)
			first = r->node;
		const sh_map_node *n = sh_map_node_get(m, r->node);
		bool going = n == NULL || n->state != SH_MAP_NODE_ACTIVE;
		for (uint32_t j = 0; j < g->n_replicas && !going; j++)
			going = g->replicas[j].replaces == r->node;
		if (!going)
			return r->node;
	}
	return first;
}

int sh_map_prefer(sh_map *m, uint32_t group, uint32_t node, char *errmsg)
{
	sh_map_group *g = (sh_map_group *)sh_map_group_get(m, group);
	if (g == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", group);
	int k = sh_map_replica_index(g, node);
	if (k < 0 || !g->replicas[k].voter)
		return sh_errf(errmsg, k < 0 ? SHOAL_E_NOT_FOUND : SHOAL_E_VALIDATION,
		               "group %u: node %u is not a voter", group, node);
	if (k == 0)
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "group %u: node %u is its first replica already", group, node);
	sh_map_replica r = g->replicas[k];
	memmove(&g->replicas[1], &g->replicas[0], (size_t)k * sizeof(sh_map_replica));
	g->replicas[0] = r;
	m->epoch++;
	return SHOAL_OK;
}

/* --- mutations: partitions ----------------------------------------------- */

/* The partition starting at lo, idle (no pending move) unless `pending_ok`. */
static int find_part(sh_map *m, uint32_t table, uint64_t lo, bool pending_ok, uint32_t *out,
                     char *errmsg)
{
	uint32_t i = sh_map_part_find(m, table, lo);
	if (i == SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "table %u: no partition starts at %llu",
		               table, (unsigned long long)lo);
	if (!pending_ok && m->parts[i].to_group != SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_IN_USE,
		               "table %u: partition at %llu is moving to group %u", table,
		               (unsigned long long)lo, m->parts[i].to_group);
	*out = i;
	return SHOAL_OK;
}

int sh_map_split(sh_map *m, uint32_t table, uint64_t lo, uint64_t at, uint32_t to_group,
                 char *errmsg)
{
	uint32_t i = 0;
	int rc = find_part(m, table, lo, false, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (at <= lo || at > sh_map_part_hi(m, i))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: split point %llu outside partition (%llu, %llu]", table,
		               (unsigned long long)at, (unsigned long long)lo,
		               (unsigned long long)sh_map_part_hi(m, i));
	if (sh_map_group_get(m, to_group) == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", to_group);
	if (m->n_parts == SH_MAP_MAX_PARTS)
		return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED, "more than %u partitions",
		               SH_MAP_MAX_PARTS);
	rc = reserve((void **)&m->parts, &m->cap_parts, m->n_parts + 1, sizeof(sh_map_part));
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "split: out of memory");
	memmove(&m->parts[i + 2], &m->parts[i + 1], (m->n_parts - i - 1) * sizeof(sh_map_part));
	m->parts[i + 1] =
	    (sh_map_part){.table = table, .lo = at, .group = to_group, .to_group = SH_MAP_NONE};
	m->n_parts++;
	m->epoch++;
	return SHOAL_OK;
}

/* The partition (table, lo) at *i, which may move to group to_group: it
 * exists, is not moving, and is not there already. */
static int move_checked(sh_map *m, uint32_t table, uint64_t lo, uint32_t to_group, uint32_t *i,
                        char *errmsg)
{
	int rc = find_part(m, table, lo, false, i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (sh_map_group_get(m, to_group) == NULL)
		return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no group %u", to_group);
	if (m->parts[*i].group == to_group)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: partition at %llu is in group %u already", table,
		               (unsigned long long)lo, to_group);
	return SHOAL_OK;
}

int sh_map_move_partition(sh_map *m, uint32_t table, uint64_t lo, uint32_t to_group, char *errmsg)
{
	uint32_t i = 0;
	int rc = move_checked(m, table, lo, to_group, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	m->parts[i].group = to_group;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_begin_move(sh_map *m, uint32_t table, uint64_t lo, uint32_t to_group, char *errmsg)
{
	uint32_t i = 0;
	int rc = move_checked(m, table, lo, to_group, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	m->parts[i].to_group = to_group;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_finish_move(sh_map *m, uint32_t table, uint64_t lo, char *errmsg)
{
	uint32_t i = 0;
	int rc = find_part(m, table, lo, true, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (m->parts[i].to_group == SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: partition at %llu is not moving", table,
		               (unsigned long long)lo);
	m->parts[i].group = m->parts[i].to_group;
	m->parts[i].to_group = SH_MAP_NONE;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_abort_move(sh_map *m, uint32_t table, uint64_t lo, char *errmsg)
{
	uint32_t i = 0;
	int rc = find_part(m, table, lo, true, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (m->parts[i].to_group == SH_MAP_NONE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: partition at %llu is not moving", table,
		               (unsigned long long)lo);
	m->parts[i].to_group = SH_MAP_NONE;
	m->epoch++;
	return SHOAL_OK;
}

int sh_map_merge(sh_map *m, uint32_t table, uint64_t lo, char *errmsg)
{
	uint32_t i = 0;
	int rc = find_part(m, table, lo, false, &i, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (i + 1 >= m->n_parts || m->parts[i + 1].table != table)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "table %u: partition at %llu is the table's last", table,
		               (unsigned long long)lo);
	const sh_map_part *next = &m->parts[i + 1];
	if (next->to_group != SH_MAP_NONE || next->group != m->parts[i].group)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "table %u: partitions at %llu and %llu are not both idle in group %u", table,
		    (unsigned long long)lo, (unsigned long long)next->lo, m->parts[i].group);
	memmove(&m->parts[i + 1], &m->parts[i + 2], (m->n_parts - i - 2) * sizeof(sh_map_part));
	m->n_parts--;
	m->epoch++;
	return SHOAL_OK;
}
