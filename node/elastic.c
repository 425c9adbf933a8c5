/*
 * elastic.c -- the cluster's shape on the node side of group 0 (issue 14):
 * operators' changes of the cluster map (map_change), and the executor that
 * carries out the planner's steps (common/cluster_plan.h) while this node
 * leads group 0.
 *
 * map_change (shoal admin, through a router): group 0's leader reads the map
 * its replica has applied (the birth map if none is stored yet), applies the
 * change with the sh_map_* mutation (which refuses what would break the
 * map's rules, changing nothing), and proposes the whole new map as a
 * MapSet entry made from that epoch.  The apply is a compare-and-set
 * (storage/clustermap.c): if another change landed first, this one is
 * refused with SHOAL_E_WRONG_EPOCH and the caller asks again.
 *
 * Thread: node_prepare_map_change runs on a server worker.
 */
#include <inttypes.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "node/node.h"
#include "proto/wire.h"

int node_map_load(node *n, node_group *g0, sh_map *out, char *errmsg)
{
	uint8_t *buf;
	size_t len;
	uint64_t epoch;
	int rc = st_cluster_map_get(node_group_env(g0), &buf, &len, &epoch, errmsg);
	if (rc != SHOAL_OK) {
		sh_map_init(out, n->conf->replication);
		return rc;
	}
	if (buf == NULL)
		return sh_map_from_conf(out, n->conf, errmsg);
	rc = sh_map_decode(buf, len, out, errmsg);
	sh_free(buf);
	return rc;
}

/* "host:port" -> host and port (the Raft base address of a NodeSpec). */
static int parse_raft(const char *s, sh_map_node *n, char *errmsg)
{
	const char *colon = strrchr(s, ':');
	if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof(n->raft_host) - 8)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "add_node: raft address '%s' is not host:port", s);
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "add_node: raft port in '%s' is not 1..65535", s);
	memcpy(n->raft_host, s, (size_t)(colon - s));
	n->raft_host[colon - s] = '\0';
	n->raft_port = (uint16_t)port;
	return SHOAL_OK;
}

/* Applies an operator's change to m (validated by the sh_map mutation). */
static int apply_admin(sh_map *m, const Shoal__AdminRequest *a, char *errmsg)
{
	switch (a->action_case) {
	case SHOAL__ADMIN_REQUEST__ACTION_ADD_NODE: {
		const Shoal__NodeSpec *s = a->add_node;
		sh_map_node n = {.id = s->id, .state = SH_MAP_NODE_ACTIVE};
		if (s->id == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "add_node: node ids start at 1");
		if (strlen(s->rpc) == 0 || strlen(s->rpc) >= sizeof(n.rpc))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "add_node: rpc URL must be 1..%zu bytes", sizeof(n.rpc) - 1);
		int rc = parse_raft(s->raft, &n, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		memcpy(n.rpc, s->rpc, strlen(s->rpc) + 1);
		const sh_map_node *old = sh_map_node_get(m, s->id);
		if (old != NULL) {
			/* Registering again with the same addresses is done
			 * already (a retried add-node). */
			if (strcmp(old->raft_host, n.raft_host) == 0 &&
			    old->raft_port == n.raft_port && strcmp(old->rpc, n.rpc) == 0 &&
			    old->state == SH_MAP_NODE_ACTIVE)
				return SHOAL_E_IN_USE;
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "add_node: node %u is already in the cluster with other "
			               "addresses or draining",
			               s->id);
		}
		return sh_map_add_node(m, &n, errmsg);
	}
	case SHOAL__ADMIN_REQUEST__ACTION_DRAIN_NODE: {
		const sh_map_node *old = sh_map_node_get(m, a->drain_node);
		if (old == NULL)
			return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
			               "node %u is not in the cluster map", a->drain_node);
		if (old->state == SH_MAP_NODE_DRAINING)
			return SHOAL_E_IN_USE;
		return sh_map_drain_node(m, a->drain_node, errmsg);
	}
	default:
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "map_change: no action");
	}
}

int node_prepare_map_change(node_call *c, Shoal__CommandOp *op)
{
	sh_map m;
	int rc = node_map_load(c->node, c->group, &m, c->errmsg);
	if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	uint64_t prev = m.epoch;
	rc = apply_admin(&m, c->req->map_change, c->errmsg);
	if (rc == SHOAL_E_IN_USE) {
		/* Already so (a retried change): the same map under the next
		 * epoch, so the answer comes through the log like any. */
		m.epoch++;
		rc = SHOAL_OK;
	} else if (rc != SHOAL_OK) {
		sh_map_fini(&m);
		return rc;
	}
	size_t len = sh_map_encoded_size(&m);
	uint8_t *buf = sh_arena_alloc(c->arena, len);
	Shoal__MapSet *set = sh_arena_alloc(c->arena, sizeof(*set));
	if (buf == NULL || set == NULL) {
		sh_map_fini(&m);
		return sh_errf(c->errmsg, SHOAL_E_NOMEM, "map_change: out of memory");
	}
	sh_map_encode(&m, buf);
	shoal__map_set__init(set);
	set->prev_epoch = prev;
	set->map.data = buf;
	set->map.len = len;
	op->op_case = SHOAL__COMMAND_OP__OP_MAP_SET;
	op->map_set = set;
	node_logf(NODE_LOG_INFO, "cluster map: proposing epoch %" PRIu64 " (from %" PRIu64 ")",
	          m.epoch, prev);
	sh_map_fini(&m);
	return SHOAL_OK;
}
