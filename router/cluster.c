/*
 * cluster.c -- Shoal's own operations on the cluster: ClusterStatus (`shoal
 * status`) and Admin (`shoal admin ...`), both answered from and about the
 * cluster map (common/placement.h, map.c).
 *
 *   ClusterStatus  phase 0: map_get to group 0 (its leader has applied every
 *                  change), so that the answer shows the newest map; phase
 *                  1: the answer offered, then group_status from every
 *                  replica of every group of the map (voters and
 *                  non-voters), and map_get from each node of the map that
 *                  holds no replica (is it up?), all in parallel with the
 *                  short status timeout; phase 2: the answer -- the map's
 *                  epoch, nodes (active / draining, reachable) and each
 *                  group's replicas, its table partitions (named from the
 *                  catalog), and the rows the nodes reported (a node that
 *                  does not answer: "unreachable").
 *   Admin          the AdminRequest to group 0's leader as map_change (the
 *                  node applies it to the stored map, node/elastic.c); a
 *                  WRONG_EPOCH (another change landed first) is asked again;
 *                  the answer's map is offered, so this router routes with
 *                  it at once, and AdminResponse.map_epoch is its epoch.
 *                  Only an unrestricted key may call it (auth.c).
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

/* Attempts at a map_change that lost a race with another change. */
#define ADMIN_EPOCH_RETRIES 8

static int nomem(rt_job *j)
{
	return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
}

/* A map_get (group 0's replicas, any of them; only_node: that node, once). */
static int map_get_call(rt_job *j, uint32_t only_node, rt_call **out)
{
	Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
	rt_call *c = rt_job_call(j, 0);
	if (nr == NULL || c == NULL)
		return nomem(j);
	shoal__node_request__init(nr);
	nr->map_get = true;
	/* Every user of the answer reads the router's map after offering it:
	 * a node whose map is not newer need not send it. */
	nr->map_known = sh_place_epoch(j->rt->place);
	/* Any node answers map_get: its answer says nothing of who leads. */
	c->any_replica = true;
	c->only_node = only_node;
	c->deadline = rt_status_deadline(j);
	*out = c;
	return rt_call_request(j, c, nr);
}

/* Offers the map of a call's answer, if it carries one (a node that does
 * not serve map_get yet, or whose map is not newer than ours, answers
 * without). */
static void offer_answer(rt_job *j, rt_call *c)
{
	if (c == NULL || c->rc != SHOAL_OK || c->code != SHOAL_OK)
		return;
	Shoal__NodeResponse *resp = rt_call_resp(c, &j->arena);
	char msg[SH_ERRMSG_SIZE];
	if (resp != NULL && resp->map.len > 0 &&
	    rt_map_offer(j->rt, resp->map.data, resp->map.len, msg) < 0)
		rt_log("cluster map from node %u: %s", c->answered_by, msg);
}

/* ------------------------------------------------------------------------ */
/* ClusterStatus                                                             */
/* ------------------------------------------------------------------------ */

static Shoal__GroupStatus *status_row(rt_job *j, uint32_t group, uint32_t node, const char *role,
                                      const char *error)
{
	Shoal__GroupStatus *gs = sh_arena_alloc(&j->arena, sizeof(*gs));
	if (gs == NULL)
		return NULL;
	shoal__group_status__init(gs);
	gs->group = group;
	gs->node = node;
	gs->role = (char *)role;
	gs->error = sh_arena_strndup(&j->arena, error, strlen(error));
	return gs->error != NULL ? gs : NULL;
}

typedef struct cluster_st {
	rt_call *map;    /* phase 0's map_get */
	rt_call **calls; /* group_status, one per (group, replica) */
	uint32_t n;
	rt_call **probes; /* map_get to the nodes without a replica */
	uint32_t n_probes;
} cluster_st;

/* Phase 1: the calls, from the map as it is now. */
static int status_calls(rt_job *j, cluster_st *s, const sh_map *m)
{
	uint32_t n = 0;
	for (uint32_t g = 0; g < m->n_groups; g++)
		n += m->groups[g].n_replicas;
	if ((s->calls = sh_arena_calloc(&j->arena, n + 1, sizeof(*s->calls))) == NULL ||
	    (s->probes = sh_arena_calloc(&j->arena, m->n_nodes + 1, sizeof(*s->probes))) == NULL)
		return nomem(j);
	int rc;
	for (uint32_t g = 0; g < m->n_groups; g++) {
		const sh_map_group *grp = &m->groups[g];
		if (grp->id >= SH_MAX_GROUPS)
			continue; /* a group this router cannot call (not in this step) */
		for (uint32_t k = 0; k < grp->n_replicas; k++)
			if ((rc = rt_status_call(j, grp->id, grp->replicas[k].node,
			                         &s->calls[s->n++])) != SHOAL_OK)
				return rc;
	}
	for (uint32_t i = 0; i < m->n_nodes; i++) {
		uint32_t one;
		if (sh_map_node_groups(m, m->nodes[i].id, &one, 1) > 0)
			continue;
		if ((rc = map_get_call(j, m->nodes[i].id, &s->probes[s->n_probes++])) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

/* The map's table partitions, named from the router's catalog (a table it
 * does not know, dropped or not loaded yet: no name). */
static int status_partitions(rt_job *j, const sh_map *m, Shoal__ClusterStatusResponse *out)
{
	out->map_partitions =
	    sh_arena_calloc(&j->arena, m->n_parts + 1, sizeof(*out->map_partitions));
	Shoal__MapPartition *slab = sh_arena_calloc(&j->arena, m->n_parts + 1, sizeof(*slab));
	if (out->map_partitions == NULL || slab == NULL)
		return nomem(j);
	rt_catalog_snap *cat = rt_catalog_acquire(&j->rt->catalog);
	const char *name = "";
	for (uint32_t i = 0; i < m->n_parts; i++) {
		const sh_map_part *p = &m->parts[i];
		if (i == 0 || m->parts[i - 1].table != p->table) {
			name = "";
			for (uint32_t k = 0; cat != NULL && k < cat->n; k++)
				if (cat->tables[k].id == p->table)
					name = cat->tables[k].name;
			if ((name = sh_arena_strndup(&j->arena, name, strlen(name))) == NULL)
				break;
		}
		Shoal__MapPartition *mp = &slab[i];
		shoal__map_partition__init(mp);
		mp->table_id = p->table;
		mp->table_name = (char *)name;
		mp->lo = p->lo;
		mp->hi = sh_map_part_hi(m, i);
		mp->group = p->group;
		mp->to_group = p->to_group == SH_MAP_NONE ? 0 : p->to_group;
		out->map_partitions[out->n_map_partitions++] = mp;
	}
	if (cat != NULL)
		rt_catalog_release(cat);
	return name != NULL ? SHOAL_OK : nomem(j);
}

/* Phase 2: the answer. */
static int status_answer(rt_job *j, cluster_st *s, const sh_map *m)
{
	Shoal__ClusterStatusResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	if (out == NULL)
		return nomem(j);
	shoal__cluster_status_response__init(out);
	out->partitions = sh_cluster_partitions(j->rt->conf);
	out->router_auth = (char *)rt_auth_describe(j->rt);
	out->router_traffic = (char *)rt_traffic_describe(j->rt);
	out->map_epoch = m->epoch;
	out->nodes = sh_arena_calloc(&j->arena, m->n_nodes + 1, sizeof(*out->nodes));
	out->groups = sh_arena_calloc(&j->arena, s->n + 1, sizeof(*out->groups));
	out->map_groups = sh_arena_calloc(&j->arena, m->n_groups + 1, sizeof(*out->map_groups));
	if (out->nodes == NULL || out->groups == NULL || out->map_groups == NULL)
		return nomem(j);
	for (uint32_t i = 0; i < s->n; i++) {
		rt_call *c = s->calls[i];
		Shoal__NodeResponse *resp = c->rc == SHOAL_OK ? rt_call_resp(c, &j->arena) : NULL;
		Shoal__GroupStatus *gs;
		if (c->rc != SHOAL_OK)
			gs = status_row(j, c->group, c->only_node, "unreachable", c->errmsg);
		else if (resp != NULL && resp->status != NULL)
			gs = resp->status;
		else
			gs = status_row(j, c->group, c->only_node, "unavailable",
			                resp != NULL && resp->response != NULL &&
			                        resp->response->message != NULL
			                    ? resp->response->message
			                    : "no status");
		if (gs == NULL)
			return nomem(j);
		gs->group = c->group;
		gs->node = c->only_node;
		out->groups[out->n_groups++] = gs;
	}
	for (uint32_t g = 0; g < m->n_groups; g++) {
		const sh_map_group *grp = &m->groups[g];
		Shoal__MapGroup *mg = sh_arena_alloc(&j->arena, sizeof(*mg));
		Shoal__MapReplica **reps =
		    sh_arena_calloc(&j->arena, grp->n_replicas + 1, sizeof(*reps));
		if (mg == NULL || reps == NULL)
			return nomem(j);
		shoal__map_group__init(mg);
		mg->group = grp->id;
		mg->founding = sh_map_group_founding(grp);
		mg->replicas = reps;
		for (uint32_t k = 0; k < grp->n_replicas; k++) {
			Shoal__MapReplica *r = sh_arena_alloc(&j->arena, sizeof(*r));
			if (r == NULL)
				return nomem(j);
			shoal__map_replica__init(r);
			r->node = grp->replicas[k].node;
			r->voter = grp->replicas[k].voter != 0;
			r->replaces = grp->replicas[k].replaces;
			mg->replicas[mg->n_replicas++] = r;
		}
		out->map_groups[out->n_map_groups++] = mg;
	}
	int rc = status_partitions(j, m, out);
	if (rc != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < m->n_nodes; i++) {
		const sh_map_node *mn = &m->nodes[i];
		Shoal__NodeInfo *ni = sh_arena_alloc(&j->arena, sizeof(*ni));
		char raft[SH_ADDR_MAX];
		if (ni == NULL)
			return nomem(j);
		sh_map_raft_address(mn, 0, raft);
		shoal__node_info__init(ni);
		ni->id = mn->id;
		ni->rpc = sh_arena_strndup(&j->arena, mn->rpc, strlen(mn->rpc));
		ni->raft = sh_arena_strndup(&j->arena, raft, strlen(raft));
		ni->state = (char *)(mn->state == SH_MAP_NODE_DRAINING ? "draining" : "active");
		if (ni->rpc == NULL || ni->raft == NULL)
			return nomem(j);
		for (uint32_t k = 0; k < s->n && !ni->reachable; k++)
			ni->reachable =
			    s->calls[k]->only_node == mn->id && s->calls[k]->rc == SHOAL_OK;
		for (uint32_t k = 0; k < s->n_probes && !ni->reachable; k++)
			ni->reachable =
			    s->probes[k]->only_node == mn->id && s->probes[k]->rc == SHOAL_OK;
		out->nodes[out->n_nodes++] = ni;
	}
	j->out->result_case = SHOAL__RESPONSE__RESULT_CLUSTER_STATUS;
	j->out->cluster_status = out;
	return SHOAL_OK;
}

int rt_step_cluster_status(rt_job *j)
{
	cluster_st *s = j->st;
	int rc = SHOAL_OK;
	sh_map m;
	switch (j->phase) {
	case 0:
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		if ((rc = map_get_call(j, 0, &s->map)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return RT_WAIT;
	case 1:
		offer_answer(j, s->map);
		if (sh_place_copy(j->rt->place, &m) != SHOAL_OK) {
			sh_map_fini(&m);
			return nomem(j);
		}
		rc = status_calls(j, s, &m);
		sh_map_fini(&m);
		if (rc != SHOAL_OK)
			return rc;
		j->phase = 2;
		if (s->n + s->n_probes > 0)
			return RT_WAIT;
		/* fall through */
	case 2:
		/* The map now (maybe newer than phase 1's: the rows are the
		 * nodes' own words either way). */
		if (sh_place_copy(j->rt->place, &m) != SHOAL_OK) {
			sh_map_fini(&m);
			return nomem(j);
		}
		rc = status_answer(j, s, &m);
		sh_map_fini(&m);
		return rc;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "ClusterStatus: phase %d", j->phase);
	}
}

/* ------------------------------------------------------------------------ */
/* Admin                                                                     */
/* ------------------------------------------------------------------------ */

/* The router's own checks (the node checks again, against the map). */
static int admin_check(rt_job *j, const Shoal__AdminRequest *a)
{
	if (a == NULL || a->action_case == SHOAL__ADMIN_REQUEST__ACTION__NOT_SET)
		return rt_job_fail(
		    j, SHOAL_E_VALIDATION,
		    "1 validation error detected: Admin needs exactly one of AddNode, "
		    "DrainNode, MovePartition, SplitPartition and AddGroup");
	if (a->action_case == SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION ||
	    a->action_case == SHOAL__ADMIN_REQUEST__ACTION_SPLIT_PARTITION) {
		/* Group 0 checks the rest against its catalog and map. */
		const Shoal__PartitionChange *pc =
		    a->action_case == SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION
		        ? a->move_partition
		        : a->split_partition;
		if (pc == NULL ||
		    ((pc->table_name == NULL || pc->table_name[0] == '\0') && !pc->gsi_space))
			return rt_job_fail(j, SHOAL_E_VALIDATION,
			                   "1 validation error detected: Value null at 'tableName' "
			                   "failed to satisfy constraint: Member must not be null "
			                   "(or GsiSpace: the index partitions of every GSI)");
		return SHOAL_OK;
	}
	if (a->action_case == SHOAL__ADMIN_REQUEST__ACTION_ADD_GROUP) {
		const Shoal__GroupSpec *g = a->add_group;
		uint32_t cap = sh_cluster_group_cap(j->rt->conf);
		if (g == NULL)
			return rt_job_fail(j, SHOAL_E_VALIDATION,
			                   "AddGroup: a GroupSpec is required");
		if (g->group_id >= cap)
			return rt_job_fail(j, SHOAL_E_VALIDATION,
			                   "AddGroup: GroupId %u is past the cluster's group ids "
			                   "0..%u ([cluster] max_groups in the cluster file)",
			                   g->group_id, cap - 1);
		if (g->n_nodes > SH_MAX_REPLICATION)
			return rt_job_fail(j, SHOAL_E_VALIDATION, "AddGroup: %zu nodes named",
			                   g->n_nodes);
		for (size_t k = 0; k < g->n_nodes; k++)
			for (size_t i = 0; i < k; i++)
				if (g->nodes[i] == g->nodes[k])
					return rt_job_fail(j, SHOAL_E_VALIDATION,
					                   "AddGroup: node %u named twice",
					                   g->nodes[k]);
		return SHOAL_OK;
	}
	if (a->action_case == SHOAL__ADMIN_REQUEST__ACTION_DRAIN_NODE) {
		if (a->drain_node == 0)
			return rt_job_fail(j, SHOAL_E_VALIDATION,
			                   "DrainNode: node ids start at 1 (got 0)");
		return SHOAL_OK;
	}
	const Shoal__NodeSpec *n = a->add_node;
	if (n == NULL || n->id == 0)
		return rt_job_fail(j, SHOAL_E_VALIDATION, "AddNode: Id must be 1 or more");
	if (n->raft == NULL || strchr(n->raft, ':') == NULL)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "AddNode: Raft must be the node's Raft base address, host:port");
	if (n->rpc == NULL || strstr(n->rpc, "://") == NULL)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "AddNode: Rpc must be the node's RPC URL (tcp://host:port)");
	if (strlen(n->rpc) >= SH_ADDR_MAX || strlen(n->raft) >= SH_ADDR_MAX - 8)
		return rt_job_fail(j, SHOAL_E_VALIDATION, "AddNode: an address is too long");
	return SHOAL_OK;
}

typedef struct admin_st {
	rt_call *c;
	uint32_t tries;
	const Shoal__AdminRequest *req; /* the request, its AddGroup's id filled */
} admin_st;

/* AddGroup without a GroupId: the lowest id (1 or more) the map, fresh
 * from group 0, leaves free; 0 if every id below max_groups is taken. */
static uint32_t free_group_id(rt_job *j)
{
	sh_map m;
	uint32_t cap = sh_cluster_group_cap(j->rt->conf), id = 0;
	if (sh_place_copy(j->rt->place, &m) != SHOAL_OK) {
		sh_map_fini(&m);
		return 0;
	}
	for (uint32_t g = 1; g < cap && id == 0; g++)
		if (sh_map_group_get(&m, g) == NULL)
			id = g;
	sh_map_fini(&m);
	return id;
}

/* The request with its AddGroup's GroupId filled (an arena copy). */
static int admin_fill_group(rt_job *j, admin_st *s)
{
	uint32_t id = free_group_id(j);
	if (id == 0)
		return rt_job_fail(j, SHOAL_E_LIMIT_EXCEEDED,
		                   "AddGroup: every group id below max_groups (%u) is in use; "
		                   "raise [cluster] max_groups in the cluster file",
		                   sh_cluster_group_cap(j->rt->conf));
	Shoal__AdminRequest *a = sh_arena_alloc(&j->arena, sizeof(*a));
	Shoal__GroupSpec *g = sh_arena_alloc(&j->arena, sizeof(*g));
	if (a == NULL || g == NULL)
		return nomem(j);
	*a = *j->in->admin;
	*g = *j->in->admin->add_group;
	g->group_id = id;
	a->add_group = g;
	s->req = a;
	return SHOAL_OK;
}

static int admin_send(rt_job *j, admin_st *s)
{
	Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
	rt_call *c = rt_job_call(j, 0);
	if (nr == NULL || c == NULL)
		return nomem(j);
	shoal__node_request__init(nr);
	nr->map_change = (Shoal__AdminRequest *)s->req;
	/* "Make it so": the same change asked twice answers OK. */
	c->idempotent = true;
	s->c = c;
	s->tries++;
	int rc = rt_call_request(j, c, nr);
	return rc != SHOAL_OK ? rc : RT_WAIT;
}

int rt_step_admin(rt_job *j)
{
	admin_st *s = j->st;
	int rc;
	Shoal__NodeResponse *resp;
	switch (j->phase) {
	case 0:
		if ((rc = admin_check(j, j->in->admin)) != SHOAL_OK)
			return rc;
		if ((s = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*s))) == NULL)
			return nomem(j);
		s->req = j->in->admin;
		if (s->req->action_case == SHOAL__ADMIN_REQUEST__ACTION_ADD_GROUP &&
		    s->req->add_group->group_id == 0) {
			/* The id from the newest map: ask group 0 for it first. */
			j->phase = 2;
			if ((rc = map_get_call(j, 0, &s->c)) != SHOAL_OK)
				return rc;
			return RT_WAIT;
		}
		j->phase = 1;
		return admin_send(j, s);
	case 2:
		offer_answer(j, s->c);
		if ((rc = admin_fill_group(j, s)) != SHOAL_OK)
			return rc;
		j->phase = 1;
		return admin_send(j, s);
	case 1:
		if (s->c->rc == SHOAL_OK && s->c->code == SHOAL_E_WRONG_EPOCH &&
		    s->tries < ADMIN_EPOCH_RETRIES)
			return admin_send(j, s); /* another change landed first */
		if (!rt_call_ok(j, s->c, &resp, &rc))
			return rc;
		offer_answer(j, s->c);
		Shoal__AdminResponse *ar = sh_arena_alloc(&j->arena, sizeof(*ar));
		if (ar == NULL)
			return nomem(j);
		shoal__admin_response__init(ar);
		ar->map_epoch = resp->epoch != 0 ? resp->epoch : sh_place_epoch(j->rt->place);
		if (s->req->action_case == SHOAL__ADMIN_REQUEST__ACTION_ADD_GROUP)
			ar->group_id = s->req->add_group->group_id;
		j->out->result_case = SHOAL__RESPONSE__RESULT_ADMIN;
		j->out->admin = ar;
		return SHOAL_OK;
	default:
		return rt_job_fail(j, SHOAL_E_INTERNAL, "Admin: phase %d", j->phase);
	}
}
