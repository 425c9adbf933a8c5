/*
 * placement.c -- the newest cluster map a process knows, behind a rwlock
 * (placement.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "placement.h"

struct sh_place {
	pthread_rwlock_t lock;
	sh_map map; /* lock */
};

sh_place *sh_place_new(sh_map *m)
{
	sh_place *p = sh_calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	if (pthread_rwlock_init(&p->lock, NULL) != 0) {
		sh_free(p);
		return NULL;
	}
	p->map = *m;
	sh_map_init(m, m->replication);
	return p;
}

int sh_place_from_conf(const sh_cluster_conf *c, sh_place **out, char *errmsg)
{
	sh_map m;
	*out = NULL;
	int rc = sh_map_from_conf(&m, c, errmsg);
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	if ((*out = sh_place_new(&m)) == NULL) {
		sh_map_fini(&m);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	}
	return SHOAL_OK;
}

void sh_place_free(sh_place *p)
{
	if (p == NULL)
		return;
	sh_map_fini(&p->map);
	pthread_rwlock_destroy(&p->lock);
	sh_free(p);
}

uint64_t sh_place_epoch(sh_place *p)
{
	pthread_rwlock_rdlock(&p->lock);
	uint64_t e = p->map.epoch;
	pthread_rwlock_unlock(&p->lock);
	return e;
}

/* Takes m (decoded, checked) if it is newer: 1, else 0 (m left as is). */
static int install(sh_place *p, sh_map *m)
{
	int installed = 0;
	pthread_rwlock_wrlock(&p->lock);
	if (m->epoch > p->map.epoch) {
		sh_map old = p->map;
		p->map = *m;
		sh_map_init(m, old.replication);
		sh_map_fini(&old);
		installed = 1;
	}
	pthread_rwlock_unlock(&p->lock);
	return installed;
}

int sh_place_offer(sh_place *p, const uint8_t *buf, size_t len, char *errmsg)
{
	sh_map m;
	int rc = sh_map_decode(buf, len, &m, errmsg);
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	rc = install(p, &m);
	sh_map_fini(&m);
	return rc;
}

int sh_place_offer_map(sh_place *p, const sh_map *src, char *errmsg)
{
	if (src->epoch <= sh_place_epoch(p))
		return 0;
	sh_map m;
	if (sh_map_copy(&m, src) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "cluster map: out of memory");
	int rc = install(p, &m);
	sh_map_fini(&m);
	return rc;
}

uint32_t sh_place_voters(sh_place *p, uint32_t group, uint32_t *nodes, uint32_t cap)
{
	uint32_t n = 0;
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_group *g = sh_map_group_get(&p->map, group);
	for (uint32_t k = 0; g != NULL && k < g->n_replicas; k++) {
		if (!g->replicas[k].voter)
			continue;
		if (n < cap)
			nodes[n] = g->replicas[k].node;
		n++;
	}
	pthread_rwlock_unlock(&p->lock);
	return n;
}

uint32_t sh_place_preferred(sh_place *p, uint32_t group)
{
	pthread_rwlock_rdlock(&p->lock);
	uint32_t n = sh_map_preferred(&p->map, group);
	pthread_rwlock_unlock(&p->lock);
	return n;
}

uint32_t sh_place_replicas(sh_place *p, uint32_t group, sh_map_replica *out, uint32_t cap)
{
	uint32_t n = 0;
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_group *g = sh_map_group_get(&p->map, group);
	if (g != NULL) {
		n = g->n_replicas;
		memcpy(out, g->replicas, (n < cap ? n : cap) * sizeof(*out));
	}
	pthread_rwlock_unlock(&p->lock);
	return n;
}

bool sh_place_hosts(sh_place *p, uint32_t node, uint32_t group)
{
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_group *g = sh_map_group_get(&p->map, group);
	bool yes = g != NULL && sh_map_replica_index(g, node) >= 0;
	pthread_rwlock_unlock(&p->lock);
	return yes;
}

bool sh_place_is_voter(sh_place *p, uint32_t node, uint32_t group)
{
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_group *g = sh_map_group_get(&p->map, group);
	int k = g != NULL ? sh_map_replica_index(g, node) : -1;
	bool yes = k >= 0 && g->replicas[k].voter;
	pthread_rwlock_unlock(&p->lock);
	return yes;
}

uint32_t sh_place_max_group(sh_place *p)
{
	pthread_rwlock_rdlock(&p->lock);
	uint32_t id = p->map.n_groups > 0 ? p->map.groups[p->map.n_groups - 1].id : 0;
	pthread_rwlock_unlock(&p->lock);
	return id;
}

uint32_t sh_place_data_groups(sh_place *p, uint32_t *out, uint32_t cap)
{
	uint32_t n = 0;
	pthread_rwlock_rdlock(&p->lock);
	for (uint32_t i = 0; i < p->map.n_groups; i++) {
		if (!sh_map_is_data_group(&p->map, p->map.groups[i].id))
			continue;
		if (n < cap)
			out[n] = p->map.groups[i].id;
		n++;
	}
	pthread_rwlock_unlock(&p->lock);
	return n;
}

bool sh_place_is_founder(sh_place *p, uint32_t node, uint32_t group)
{
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_group *g = sh_map_group_get(&p->map, group);
	int k = g != NULL ? sh_map_replica_index(g, node) : -1;
	bool yes = k >= 0 && g->replicas[k].voter == SH_MAP_FOUNDER;
	pthread_rwlock_unlock(&p->lock);
	return yes;
}

bool sh_place_node(sh_place *p, uint32_t id, sh_map_node *out)
{
	pthread_rwlock_rdlock(&p->lock);
	const sh_map_node *n = sh_map_node_get(&p->map, id);
	if (n != NULL)
		*out = *n;
	pthread_rwlock_unlock(&p->lock);
	return n != NULL;
}

uint32_t sh_place_nodes(sh_place *p, uint32_t *ids, uint32_t cap)
{
	pthread_rwlock_rdlock(&p->lock);
	uint32_t n = p->map.n_nodes;
	for (uint32_t i = 0; i < n && i < cap; i++)
		ids[i] = p->map.nodes[i].id;
	pthread_rwlock_unlock(&p->lock);
	return n;
}

void sh_map_raft_address(const sh_map_node *n, uint32_t group, char *buf)
{
	/* raft_host is shorter than SH_ADDR_MAX - 7, so the port always fits. */
	int len = snprintf(buf, SH_ADDR_MAX, "%.*s:%u", SH_ADDR_MAX - 8, n->raft_host,
	                   (unsigned)(n->raft_port + group) & 0xffff);
	(void)len;
}

bool sh_place_raft_address(sh_place *p, uint32_t node, uint32_t group, char *buf)
{
	sh_map_node n;
	if (!sh_place_node(p, node, &n))
		return false;
	sh_map_raft_address(&n, group, buf);
	return true;
}

void sh_place_static_part(const sh_cluster_conf *c, uint64_t hash, sh_place_part *out)
{
	uint32_t i = sh_cluster_partition_of(c, hash);
	sh_cluster_partition_range(c, i, &out->lo, &out->hi);
	out->group = sh_cluster_partition_group(c, i);
}

/* The map's partition i as an sh_place_part (lock held). */
static void map_part(const sh_map *m, uint32_t i, sh_place_part *out)
{
	out->lo = m->parts[i].lo;
	out->hi = sh_map_part_hi(m, i);
	out->group = m->parts[i].group;
}

uint32_t sh_place_route(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint64_t hash)
{
	pthread_rwlock_rdlock(&p->lock);
	uint32_t g = sh_map_route(&p->map, table, hash);
	pthread_rwlock_unlock(&p->lock);
	if (g != SH_MAP_NONE)
		return g;
	return sh_cluster_partition_group(c, sh_cluster_partition_of(c, hash));
}

void sh_place_part_of(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint64_t hash,
                      sh_place_part *out)
{
	pthread_rwlock_rdlock(&p->lock);
	uint32_t i = sh_map_part_of(&p->map, table, hash);
	if (i != SH_MAP_NONE)
		map_part(&p->map, i, out);
	pthread_rwlock_unlock(&p->lock);
	if (i == SH_MAP_NONE)
		sh_place_static_part(c, hash, out);
}

uint32_t sh_place_table_parts(sh_place *p, const sh_cluster_conf *c, uint32_t table,
                              sh_place_part *out, uint32_t cap)
{
	uint32_t n = 0;
	pthread_rwlock_rdlock(&p->lock);
	const sh_map *m = &p->map;
	uint32_t i = sh_map_part_of(m, table, 0);
	for (; i != SH_MAP_NONE && i < m->n_parts && m->parts[i].table == table; i++, n++)
		if (n < cap)
			map_part(m, i, &out[n]);
	pthread_rwlock_unlock(&p->lock);
	if (n > 0)
		return n;
	uint32_t d = sh_cluster_partitions(c);
	for (uint32_t k = 0; k < d && k < cap; k++) {
		sh_cluster_partition_range(c, k, &out[k].lo, &out[k].hi);
		out[k].group = sh_cluster_partition_group(c, k);
	}
	return d;
}

void sh_place_table_share(sh_place *p, const sh_cluster_conf *c, uint32_t table, uint32_t group,
                          uint32_t *held, double *frac, uint32_t *holders)
{
	uint32_t n = 0, k = 0, distinct = 0;
	uint64_t seen[SH_MAX_GROUPS / 64] = {0};
	double width = 0;
	pthread_rwlock_rdlock(&p->lock);
	const sh_map *m = &p->map;
	uint32_t i = sh_map_part_of(m, table, 0);
	for (; i != SH_MAP_NONE && i < m->n_parts && m->parts[i].table == table; i++, n++) {
		uint32_t g = m->parts[i].group;
		if (g < SH_MAX_GROUPS && !(seen[g / 64] & (1ull << (g % 64)))) {
			seen[g / 64] |= 1ull << (g % 64);
			distinct++;
		}
		if (g == group) {
			k++;
			width += (double)(sh_map_part_hi(m, i) - m->parts[i].lo) + 1;
		}
	}
	pthread_rwlock_unlock(&p->lock);
	if (n > 0) {
		*held = k;
		*frac = width / 18446744073709551616.0; /* 2^64 */
		if (holders != NULL)
			*holders = distinct;
		return;
	}
	uint32_t d = sh_cluster_partitions(c);
	*held = 0;
	for (uint32_t x = 0; x < d; x++)
		*held += sh_cluster_partition_group(c, x) == group;
	*frac = (double)*held / d;
	if (holders != NULL)
		*holders = c->groups > 1 ? c->groups - 1 : 1;
}

int sh_place_copy(sh_place *p, sh_map *out)
{
	pthread_rwlock_rdlock(&p->lock);
	int rc = sh_map_copy(out, &p->map);
	pthread_rwlock_unlock(&p->lock);
	return rc;
}

int sh_place_encode(sh_place *p, uint8_t **buf, size_t *len)
{
	pthread_rwlock_rdlock(&p->lock);
	size_t n = sh_map_encoded_size(&p->map);
	*buf = sh_malloc(n);
	if (*buf != NULL)
		*len = sh_map_encode(&p->map, *buf);
	pthread_rwlock_unlock(&p->lock);
	return *buf != NULL ? SHOAL_OK : SHOAL_E_NOMEM;
}
