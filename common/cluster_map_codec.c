/*
 * cluster_map_codec.c -- the cluster map's binary encoding, version 1: what
 * group 0 will put in Raft entries and snapshots (contract in cluster_map.h).
 *
 * All integers little-endian, fixed width; no padding; strings are a length
 * byte (< SH_ADDR_MAX) and that many bytes, none of them NUL.
 *
 *   header   "SHMP" | version u16 (1) | flags u16 (0) | epoch u64 | replication u8
 *   nodes    count u32, then each:
 *              id u32 | state u8 | raft_port u16 | raft_host str | rpc str
 *   groups   count u32, then each:
 *              id u32 | n u8, then n replicas: node u32 | voter u8 | replaces u32
 *              (voter: 0 non-voter, 1 voter, 2 founder of a new group)
 *   parts    count u32, then each:
 *              table u32 | lo u64 | group u32 | to_group u32 (0xffffffff: none)
 *
 * The decoder trusts nothing: a count is refused before anything is
 * allocated when it exceeds its SH_MAP_MAX_* bound or the bytes left could
 * not hold that many records; every field is read through one bounds-checked
 * cursor; no trailing bytes; then sh_map_check verifies every invariant.
 * Since the records are in the map's own sorted order, with no optional
 * fields and no slack, one map has exactly one encoding.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cluster_map.h"
#include "errors.h"

static const uint8_t MAGIC[4] = {'S', 'H', 'M', 'P'};
#define HEADER_SIZE 17
#define NODE_MIN    (4 + 1 + 2 + 1 + 1)
#define GROUP_MIN   (4 + 1)
#define REPLICA     (4 + 1 + 4)
#define PART_SIZE   (4 + 8 + 4 + 4)

size_t sh_map_encoded_size(const sh_map *m)
{
	size_t n = HEADER_SIZE + 12;
	for (uint32_t i = 0; i < m->n_nodes; i++)
		n += NODE_MIN + strlen(m->nodes[i].raft_host) + strlen(m->nodes[i].rpc);
	for (uint32_t i = 0; i < m->n_groups; i++)
		n += GROUP_MIN + (size_t)m->groups[i].n_replicas * REPLICA;
	return n + (size_t)m->n_parts * PART_SIZE;
}

static uint8_t *put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint8_t *put_str(uint8_t *p, const char *s)
{
	size_t n = strlen(s);
	*p++ = (uint8_t)n;
	memcpy(p, s, n);
	return p + n;
}

size_t sh_map_encode(const sh_map *m, uint8_t *buf)
{
	uint8_t *p = buf;
	memcpy(p, MAGIC, 4);
	p = put(p + 4, SH_MAP_VERSION, 2);
	p = put(p, 0, 2);
	p = put(p, m->epoch, 8);
	p = put(p, m->replication, 1);
	p = put(p, m->n_nodes, 4);
	for (uint32_t i = 0; i < m->n_nodes; i++) {
		const sh_map_node *n = &m->nodes[i];
		p = put(p, n->id, 4);
		p = put(p, n->state, 1);
		p = put(p, n->raft_port, 2);
		p = put_str(p, n->raft_host);
		p = put_str(p, n->rpc);
	}
	p = put(p, m->n_groups, 4);
	for (uint32_t i = 0; i < m->n_groups; i++) {
		const sh_map_group *g = &m->groups[i];
		p = put(p, g->id, 4);
		p = put(p, g->n_replicas, 1);
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			p = put(p, g->replicas[k].node, 4);
			p = put(p, g->replicas[k].voter, 1);
			p = put(p, g->replicas[k].replaces, 4);
		}
	}
	p = put(p, m->n_parts, 4);
	for (uint32_t i = 0; i < m->n_parts; i++) {
		const sh_map_part *x = &m->parts[i];
		p = put(p, x->table, 4);
		p = put(p, x->lo, 8);
		p = put(p, x->group, 4);
		p = put(p, x->to_group, 4);
	}
	return (size_t)(p - buf);
}

/* The one bounds-checked reader: after a short read, ok is false and every
 * later read returns 0. */
typedef struct cursor {
	const uint8_t *p;
	size_t left;
	bool ok;
} cursor;

static uint64_t get(cursor *c, int bytes)
{
	if (!c->ok || c->left < (size_t)bytes) {
		c->ok = false;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += bytes;
	c->left -= (size_t)bytes;
	return v;
}

static bool get_str(cursor *c, char *dst)
{
	size_t n = (size_t)get(c, 1);
	if (!c->ok || n >= SH_ADDR_MAX || c->left < n || memchr(c->p, 0, n) != NULL)
		return c->ok = false;
	memcpy(dst, c->p, n);
	dst[n] = '\0';
	c->p += n;
	c->left -= n;
	return true;
}

/* A count of records of at least `min` bytes each, bounded by max. */
static bool get_count(cursor *c, uint32_t max, size_t min, uint32_t *out)
{
	uint64_t n = get(c, 4);
	if (!c->ok || n > max || n * min > c->left)
		return c->ok = false;
	*out = (uint32_t)n;
	return true;
}

static int malformed(sh_map *out, uint32_t replication, char *errmsg, const char *what)
{
	sh_map_fini(out);
	sh_map_init(out, replication);
	return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "cluster map: %s", what);
}

uint64_t sh_map_peek_epoch(const uint8_t *buf, size_t len)
{
	if (len < HEADER_SIZE || memcmp(buf, MAGIC, 4) != 0)
		return 0;
	cursor c = {.p = buf + 4, .left = len - 4, .ok = true};
	uint64_t version = get(&c, 2), flags = get(&c, 2);
	if (version != SH_MAP_VERSION || flags != 0)
		return 0;
	return get(&c, 8);
}

int sh_map_decode(const uint8_t *buf, size_t len, sh_map *out, char *errmsg)
{
	sh_map_init(out, 0);
	cursor c = {.p = buf, .left = len, .ok = true};
	if (len < HEADER_SIZE || memcmp(buf, MAGIC, 4) != 0)
		return malformed(out, 0, errmsg, "not a map (bad magic)");
	c.p += 4, c.left -= 4;
	uint64_t version = get(&c, 2), flags = get(&c, 2);
	if (version != SH_MAP_VERSION || flags != 0)
		return malformed(out, 0, errmsg, "unknown version or flags");
	out->epoch = get(&c, 8);
	out->replication = (uint32_t)get(&c, 1);

	uint32_t n;
	if (!get_count(&c, SH_MAP_MAX_NODES, NODE_MIN, &n))
		return malformed(out, 0, errmsg, "bad node count");
	if (n > 0 && (out->nodes = sh_calloc(n, sizeof(sh_map_node))) == NULL)
		return malformed(out, 0, errmsg,
		                 "out of memory"); /* small inputs cannot get here */
	out->cap_nodes = n;
	for (uint32_t i = 0; i < n && c.ok; i++) {
		sh_map_node *x = &out->nodes[i];
		x->id = (uint32_t)get(&c, 4);
		x->state = (uint8_t)get(&c, 1);
		x->raft_port = (uint16_t)get(&c, 2);
		if (get_str(&c, x->raft_host))
			get_str(&c, x->rpc);
		out->n_nodes = i + 1;
	}
	if (!c.ok || !get_count(&c, SH_MAP_MAX_GROUPS, GROUP_MIN, &n))
		return malformed(out, 0, errmsg, "truncated nodes or bad group count");
	if (n > 0 && (out->groups = sh_calloc(n, sizeof(sh_map_group))) == NULL)
		return malformed(out, 0, errmsg, "out of memory");
	out->cap_groups = n;
	for (uint32_t i = 0; i < n && c.ok; i++) {
		sh_map_group *g = &out->groups[i];
		g->id = (uint32_t)get(&c, 4);
		g->n_replicas = (uint32_t)get(&c, 1);
		if (g->n_replicas > SH_MAP_GROUP_REPLICAS)
			return malformed(out, 0, errmsg, "too many replicas in a group");
		for (uint32_t k = 0; k < g->n_replicas; k++) {
			g->replicas[k].node = (uint32_t)get(&c, 4);
			g->replicas[k].voter = (uint8_t)get(&c, 1);
			g->replicas[k].replaces = (uint32_t)get(&c, 4);
		}
		out->n_groups = i + 1;
	}
	if (!c.ok || !get_count(&c, SH_MAP_MAX_PARTS, PART_SIZE, &n))
		return malformed(out, 0, errmsg, "truncated groups or bad partition count");
	if (n > 0 && (out->parts = sh_calloc(n, sizeof(sh_map_part))) == NULL)
		return malformed(out, 0, errmsg, "out of memory");
	out->cap_parts = out->n_parts = n;
	for (uint32_t i = 0; i < n; i++) {
		sh_map_part *x = &out->parts[i];
		x->table = (uint32_t)get(&c, 4);
		x->lo = get(&c, 8);
		x->group = (uint32_t)get(&c, 4);
		x->to_group = (uint32_t)get(&c, 4);
	}
	if (!c.ok)
		return malformed(out, 0, errmsg, "truncated partitions");
	if (c.left != 0)
		return malformed(out, 0, errmsg, "trailing bytes");
	char why[SH_ERRMSG_SIZE];
	if (!sh_map_check(out, why)) {
		char what[SH_ERRMSG_SIZE + 16];
		snprintf(what, sizeof(what), "invalid: %s", why);
		return malformed(out, 0, errmsg, what);
	}
	return SHOAL_OK;
}
