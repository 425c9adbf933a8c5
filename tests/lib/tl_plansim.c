/*
 * tl_plansim.c -- the planner's simulation (contract in tl_plansim.h).
 */
#include "tl_plansim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/errors.h"
#include "testlib.h"

typedef struct sim_part {
	uint32_t n;
	sh_plan_sample s[TL_PLANSIM_SAMPLES];
	uint64_t bytes;
	double units;
	double move_done; /* when its pending move's copy is done */
} sim_part;

struct tl_plansim {
	tl_plansim_conf c;
	sh_map map;
	uint64_t rng;
	bool *alive_by_id; /* index: node id */
	uint32_t cap_ids;
	uint32_t next_id;
	uint32_t gcap;    /* group ids below this: groups, or plan.max_groups */
	uint32_t *leader; /* by group id */
	double *catchup;  /* by group id: when its non-voter has caught up; 0 none */
	double *gbytes;   /* by group id, this step */
	sim_part *parts;  /* parallel to map.parts */
	uint32_t cap_parts;
	/* The planner's input, rebuilt every step. */
	bool *alive;
	sh_plan_group_load *gl;
	sh_plan_part_load *pl;
	uint32_t *per_node;
	sh_plan_action *acts;
	uint32_t cap_acts;
	tl_plansim_stats st;
	bool trace; /* SHOAL_PLANSIM_TRACE set: every applied step printed */
};

static double uniform(tl_plansim *s)
{
	return (double)(tl_rand(&s->rng) >> 11) / (double)(1ULL << 53);
}

/* exp(N(0, 0.5)), from the sum of 4 uniforms: a spread with a tail. */
static double spread(tl_plansim *s)
{
	double z = uniform(s) + uniform(s) + uniform(s) + uniform(s) - 2.0; /* var 1/3 */
	return exp(z * 0.87);
}

static void fill_part(tl_plansim *s, sim_part *p, uint64_t lo, uint64_t hi, bool hot, bool key)
{
	uint32_t n = s->c.samples;
	p->n = n;
	double bytes = s->c.part_bytes * spread(s), units = s->c.part_units * spread(s);
	if (hot)
		units *= 20;
	/* A hot key carries 20x a mean partition, without the spread's tail: a
	 * key hotter than a node's band leaves its leader over the band (see
	 * cluster_plan.h: what the planner cannot do). */
	if (key)
		units = s->c.part_units * 20;
	double wb[TL_PLANSIM_SAMPLES], wu[TL_PLANSIM_SAMPLES], sb = 0, su = 0;
	for (uint32_t j = 0; j < n; j++) {
		wb[j] = 0.2 + uniform(s), wu[j] = 0.2 + uniform(s);
		sb += wb[j], su += wu[j];
	}
	uint64_t slot = (hi - lo) / n;
	p->bytes = 0;
	p->units = 0;
	for (uint32_t j = 0; j < n; j++) {
		p->s[j].hash = lo + slot * j + (slot > 1 ? tl_rand(&s->rng) % (slot / 2) : 0);
		p->s[j].bytes = (uint64_t)(bytes * wb[j] / sb);
		p->s[j].units =
		    key ? (j == n / 2 ? units * 0.9 : units * 0.1 / (n - 1)) : units * wu[j] / su;
		p->bytes += p->s[j].bytes;
		p->units += p->s[j].units;
	}
	p->move_done = 0;
}

static void grow_ids(tl_plansim *s, uint32_t id)
{
	if (id < s->cap_ids)
		return;
	uint32_t cap = s->cap_ids ? s->cap_ids : 64;
	while (cap <= id)
		cap *= 2;
	s->alive_by_id = realloc(s->alive_by_id, cap * sizeof(bool));
	tl_assert(s->alive_by_id != NULL);
	memset(s->alive_by_id + s->cap_ids, 0, (cap - s->cap_ids) * sizeof(bool));
	s->cap_ids = cap;
}

tl_plansim *tl_plansim_new(const tl_plansim_conf *c)
{
	tl_plansim *s = calloc(1, sizeof(*s));
	tl_assert(s != NULL && c->samples >= 1 && c->samples <= TL_PLANSIM_SAMPLES);
	s->c = *c;
	s->rng = c->seed;
	s->trace = getenv("SHOAL_PLANSIM_TRACE") != NULL;
	char msg[SH_ERRMSG_SIZE];
	sh_map_init(&s->map, c->replication);
	for (uint32_t i = 0; i < c->nodes; i++)
		tl_plansim_join(s);
	for (uint32_t g = 0; g < c->groups; g++) {
		uint32_t ids[SH_MAX_REPLICATION];
		for (uint32_t k = 0; k < c->replication; k++)
			ids[k] = (g + k) % c->nodes + 1;
		tl_assert_msg(sh_map_add_group(&s->map, g, ids, c->replication, msg) == SHOAL_OK,
		              "%s", msg);
	}
	for (uint32_t t = 1; t <= c->tables; t++)
		tl_assert(sh_map_add_table(&s->map, t, c->parts_per_table,
		                           sh_map_data_groups(&s->map), msg) == SHOAL_OK);
	s->gcap = c->plan.max_groups > c->groups ? c->plan.max_groups : c->groups;
	s->leader = calloc(s->gcap, sizeof(uint32_t));
	s->catchup = calloc(s->gcap, sizeof(double));
	s->gbytes = calloc(s->gcap, sizeof(double));
	s->cap_parts = s->map.n_parts * 2;
	s->parts = calloc(s->cap_parts, sizeof(sim_part));
	tl_assert(s->leader && s->catchup && s->gbytes && s->parts);
	for (uint32_t g = 0; g < c->groups; g++)
		s->leader[g] = s->map.groups[g].replicas[0].node;
	uint32_t hot = 0, keys = 0;
	for (uint32_t i = 0; i < s->map.n_parts; i++) {
		bool is_hot = uniform(s) < c->hot_share;
		bool key = is_hot && keys < c->hot_keys;
		hot += is_hot, keys += key;
		fill_part(s, &s->parts[i], s->map.parts[i].lo, sh_map_part_hi(&s->map, i), is_hot,
		          key);
	}
	return s;
}

void tl_plansim_free(tl_plansim *s)
{
	sh_map_fini(&s->map);
	free(s->alive_by_id);
	free(s->leader);
	free(s->catchup);
	free(s->gbytes);
	free(s->parts);
	free(s->alive);
	free(s->gl);
	free(s->pl);
	free(s->per_node);
	free(s->acts);
	free(s);
}

uint32_t tl_plansim_join(tl_plansim *s)
{
	char msg[SH_ERRMSG_SIZE];
	uint32_t id = ++s->next_id;
	sh_map_node n = {.id = id, .raft_port = 7100};
	snprintf(n.raft_host, sizeof(n.raft_host), "10.%u.%u.%u", id >> 16, (id >> 8) & 255,
	         id & 255);
	snprintf(n.rpc, sizeof(n.rpc), "tcp://%.40s:7200", n.raft_host);
	tl_assert_msg(sh_map_add_node(&s->map, &n, msg) == SHOAL_OK, "%s", msg);
	grow_ids(s, id);
	s->alive_by_id[id] = true;
	return id;
}

void tl_plansim_drain(tl_plansim *s, uint32_t node)
{
	char msg[SH_ERRMSG_SIZE];
	tl_assert_msg(sh_map_drain_node(&s->map, node, msg) == SHOAL_OK, "%s", msg);
}

void tl_plansim_fail(tl_plansim *s, uint32_t node)
{
	tl_assert(node < s->cap_ids && s->alive_by_id[node]);
	s->alive_by_id[node] = false;
}

static bool alive(const tl_plansim *s, uint32_t id)
{
	return id < s->cap_ids && s->alive_by_id[id];
}

/* Live voters of a group, and whether they are a majority of its voters. */
static bool has_quorum(const tl_plansim *s, const sh_map_group *g)
{
	uint32_t lv = 0;
	for (uint32_t k = 0; k < g->n_replicas; k++)
		lv += g->replicas[k].voter && alive(s, g->replicas[k].node);
	return lv >= sh_map_majority(sh_map_voters(g));
}

/* Raft's part: a group without a live leader elects its first live voter. */
static void elect(tl_plansim *s)
{
	for (uint32_t g = 0; g < s->map.n_groups; g++) {
		const sh_map_group *grp = &s->map.groups[g];
		uint32_t l = s->leader[grp->id];
		int k = l ? sh_map_replica_index(grp, l) : -1;
		if (l && alive(s, l) && k >= 0 && grp->replicas[k].voter)
			continue;
		s->leader[grp->id] = 0;
		if (!has_quorum(s, grp))
			continue;
		for (uint32_t j = 0; j < grp->n_replicas; j++)
			if (grp->replicas[j].voter && alive(s, grp->replicas[j].node)) {
				s->leader[grp->id] = grp->replicas[j].node;
				break;
			}
	}
}

static void build_input(tl_plansim *s, sh_plan_input *in)
{
	const sh_map *m = &s->map;
	s->alive = realloc(s->alive, (m->n_nodes + 1) * sizeof(bool));
	s->per_node = realloc(s->per_node, (m->n_nodes + 1) * sizeof(uint32_t));
	s->gl = realloc(s->gl, (m->n_groups + 1) * sizeof(*s->gl));
	s->pl = realloc(s->pl, (m->n_parts + 1) * sizeof(*s->pl));
	tl_assert(s->alive && s->per_node && s->gl && s->pl);
	for (uint32_t i = 0; i < m->n_nodes; i++)
		s->alive[i] = alive(s, m->nodes[i].id);
	memset(s->gbytes, 0, s->gcap * sizeof(double));
	for (uint32_t i = 0; i < m->n_parts; i++) {
		s->pl[i] = (sh_plan_part_load){.bytes = s->parts[i].bytes,
		                               .units = s->parts[i].units,
		                               .samples = s->parts[i].s,
		                               .n_samples = s->parts[i].n};
		s->gbytes[m->parts[i].group] += (double)s->parts[i].bytes;
	}
	for (uint32_t g = 0; g < m->n_groups; g++) {
		uint32_t id = m->groups[g].id;
		s->gl[g] = (sh_plan_group_load){.leader = s->leader[id],
		                                .caught_up = s->catchup[id] > 0 &&
		                                             s->st.now >= s->catchup[id]};
	}
	*in = (sh_plan_input){.map = m, .alive = s->alive, .groups = s->gl, .parts = s->pl};
}

static void split(tl_plansim *s, const sh_plan_action *a)
{
	char msg[SH_ERRMSG_SIZE];
	uint32_t i = sh_map_part_find(&s->map, a->table, a->lo);
	tl_assert(i != SH_MAP_NONE);
	tl_assert_msg(sh_map_split(&s->map, a->table, a->lo, a->at, a->to_group, msg) == SHOAL_OK,
	              "split: %s", msg);
	if (s->map.n_parts > s->cap_parts) {
		s->cap_parts *= 2;
		s->parts = realloc(s->parts, s->cap_parts * sizeof(sim_part));
		tl_assert(s->parts != NULL);
	}
	memmove(&s->parts[i + 2], &s->parts[i + 1], (s->map.n_parts - i - 2) * sizeof(sim_part));
	sim_part *lo = &s->parts[i], *hi = &s->parts[i + 1];
	*hi = (sim_part){0};
	uint32_t keep = 0;
	lo->bytes = hi->bytes = 0;
	lo->units = hi->units = 0;
	for (uint32_t j = 0; j < lo->n; j++) {
		sim_part *to = lo->s[j].hash < a->at ? lo : hi;
		sh_plan_sample x = lo->s[j];
		if (to == lo)
			lo->s[keep++] = x;
		else
			hi->s[hi->n++] = x;
		to->bytes += x.bytes;
		to->units += x.units;
	}
	lo->n = keep;
}

static void apply(tl_plansim *s, const sh_plan_action *a)
{
	char msg[SH_ERRMSG_SIZE] = "";
	sh_map *m = &s->map;
	int rc = SHOAL_OK;
	s->st.actions[a->kind]++;
	switch (a->kind) {
	case SH_PLAN_ADD_REPLICA:
		tl_assert_msg(alive(s, a->node), "add-replica on dead node %u", a->node);
		rc = sh_map_add_replica(m, a->group, a->node, a->replaces, msg);
		s->catchup[a->group] = s->st.now + s->gbytes[a->group] / s->c.bandwidth;
		if (s->catchup[a->group] <= s->st.now)
			s->catchup[a->group] = s->st.now + 1e-9;
		break;
	case SH_PLAN_PROMOTE:
		rc = sh_map_promote(m, a->group, a->node, msg);
		s->catchup[a->group] = 0;
		break;
	case SH_PLAN_REMOVE_REPLICA:
		tl_assert_msg(s->leader[a->group] != a->node,
		              "group %u: remove-replica of its leader %u", a->group, a->node);
		rc = sh_map_remove_replica(m, a->group, a->node, msg);
		break;
	case SH_PLAN_TRANSFER_LEADER: {
		const sh_map_group *g = sh_map_group_get(m, a->group);
		int k = sh_map_replica_index(g, a->node);
		tl_assert_msg(k >= 0 && g->replicas[k].voter && alive(s, a->node),
		              "group %u: transfer to %u, not a live voter", a->group, a->node);
		s->leader[a->group] = a->node;
		break;
	}
	case SH_PLAN_SPLIT:
		split(s, a);
		break;
	case SH_PLAN_MOVE_PARTITION: {
		rc = sh_map_begin_move(m, a->table, a->lo, a->to_group, msg);
		uint32_t i = sh_map_part_find(m, a->table, a->lo);
		s->parts[i].move_done = s->st.now + (double)s->parts[i].bytes / s->c.bandwidth;
		break;
	}
	case SH_PLAN_ADD_GROUP:
		/* Its founders elect at once (elect(), next step): founded. */
		tl_assert_msg(a->group < s->gcap, "add-group %u: past max_groups", a->group);
		rc = sh_map_create_group(m, a->group, a->nodes, a->n_nodes, msg);
		if (rc == SHOAL_OK)
			rc = sh_map_group_founded(m, a->group, msg);
		break;
	case SH_PLAN_HOT_KEY:
	case SH_PLAN_NO_QUORUM:
	case SH_PLAN_KIND__COUNT:
		break;
	}
	tl_assert_msg(rc == SHOAL_OK, "%s group %u node %u: %s", sh_plan_kind_name(a->kind),
	              a->group, a->node, msg);
	if (a->kind <= SH_PLAN_TRANSFER_LEADER) {
		const sh_map_group *g = sh_map_group_get(m, a->group);
		tl_assert_msg(has_quorum(s, g), "group %u lost its majority after %s of node %u",
		              a->group, sh_plan_kind_name(a->kind), a->node);
	}
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Moves in flight, checked against the limits; returns the total. */
static uint32_t check_inflight(tl_plansim *s)
{
	sh_plan_input in;
	build_input(s, &in);
	uint32_t total = sh_plan_inflight(&in, s->per_node);
	tl_assert_msg(total <= s->c.plan.max_moves, "%u moves in flight, limit %u", total,
	              s->c.plan.max_moves);
	if (total > s->st.max_inflight)
		s->st.max_inflight = total;
	for (uint32_t i = 0; i < s->map.n_nodes; i++) {
		tl_assert_msg(s->per_node[i] <= s->c.plan.max_moves_per_node,
		              "node %u: %u moves in flight, limit %u", s->map.nodes[i].id,
		              s->per_node[i], s->c.plan.max_moves_per_node);
		if (s->per_node[i] > s->st.max_inflight_node)
			s->st.max_inflight_node = s->per_node[i];
	}
	return total;
}

uint32_t tl_plansim_step(tl_plansim *s)
{
	char msg[SH_ERRMSG_SIZE];
	sh_map *m = &s->map;
	s->st.steps++;
	s->st.now += s->c.step_secs;
	for (uint32_t i = 0; i < m->n_parts; i++)
		if (m->parts[i].to_group != SH_MAP_NONE && s->st.now >= s->parts[i].move_done)
			tl_assert_msg(sh_map_finish_move(m, m->parts[i].table, m->parts[i].lo,
			                                 msg) == SHOAL_OK,
			              "%s", msg);
	elect(s);
	sh_plan_input in;
	build_input(s, &in);
	uint32_t cap = s->c.plan.max_moves * 4 + m->n_groups + 64;
	if (cap > s->cap_acts) {
		s->acts = realloc(s->acts, cap * sizeof(sh_plan_action));
		tl_assert(s->acts != NULL);
		s->cap_acts = cap;
	}
	uint32_t n = 0;
	double t0 = cpu_now();
	int rc = sh_plan_next(&in, &s->c.plan, s->acts, cap, &n, msg);
	double t = cpu_now() - t0;
	tl_assert_msg(rc == SHOAL_OK, "sh_plan_next: %s", msg);
	s->st.plan_cpu_total += t;
	if (t > s->st.plan_cpu_max)
		s->st.plan_cpu_max = t;
	uint32_t steps = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (s->trace) {
			const sh_plan_action *a = &s->acts[i];
			printf(
			    "plansim %.0f s: %s (%s) group %u node %u table %u lo %016llx to %u\n",
			    s->st.now, sh_plan_kind_name(a->kind), sh_plan_reason_name(a->reason),
			    a->group, a->node, a->table, (unsigned long long)a->lo, a->to_group);
		}
		apply(s, &s->acts[i]);
		steps += s->acts[i].kind != SH_PLAN_HOT_KEY && s->acts[i].kind != SH_PLAN_NO_QUORUM;
	}
	check_inflight(s);
	if (steps > 0)
		s->st.last_busy = s->st.now;
	return steps;
}

bool tl_plansim_idle(tl_plansim *s)
{
	return check_inflight(s) == 0;
}

bool tl_plansim_run(tl_plansim *s, uint64_t max_steps)
{
	for (uint64_t k = 0; k < max_steps; k++)
		if (tl_plansim_step(s) == 0 && tl_plansim_idle(s))
			return true;
	return false;
}

void tl_plansim_spread(tl_plansim *s, const double *tolerance, sh_plan_spread *out)
{
	sh_plan_input in;
	elect(s);
	build_input(s, &in);
	tl_assert(sh_plan_spread_of(&in, tolerance, out) == SHOAL_OK);
}

uint32_t tl_plansim_replicas_on(const tl_plansim *s, uint32_t node)
{
	return sh_map_node_groups(&s->map, node, NULL, 0);
}

const tl_plansim_stats *tl_plansim_stats_of(const tl_plansim *s)
{
	return &s->st;
}

const sh_map *tl_plansim_map(const tl_plansim *s)
{
	return &s->map;
}

void tl_plansim_print(tl_plansim *s, const char *prefix)
{
	sh_plan_spread sp;
	tl_plansim_spread(s, s->c.plan.tolerance, &sp);
	const tl_plansim_stats *st = &s->st;
	printf(
	    "%s: %llu steps, %.0f s simulated (last move planned at %.0f s), planner CPU %.2f ms "
	    "mean / %.2f ms max per step\n",
	    prefix, (unsigned long long)st->steps, st->now, st->last_busy,
	    st->steps ? 1e3 * st->plan_cpu_total / (double)st->steps : 0, 1e3 * st->plan_cpu_max);
	printf("%s:", prefix);
	for (int k = 0; k < SH_PLAN_KIND__COUNT; k++)
		printf(" %s %llu", sh_plan_kind_name(k), (unsigned long long)st->actions[k]);
	printf("; max in flight %u (node %u); %u nodes, %u groups, %u partitions, epoch %llu\n",
	       st->max_inflight, st->max_inflight_node, s->map.n_nodes, s->map.n_groups,
	       s->map.n_parts, (unsigned long long)s->map.epoch);
	for (int d = 0; d < SH_PLAN_DIM__COUNT; d++)
		printf("%s: %-8s mean %.4g min %.4g max %.4g band %.4g %s\n", prefix,
		       sh_plan_dim_name(d), sp.mean[d], sp.min[d], sp.max[d], sp.band[d],
		       sh_plan_within(&sp, d) ? "ok" : "OUT");
	fflush(stdout);
}
