/*
 * capacity_load.c -- what a node learns and tells of its partitions' load:
 * the tick (catalog read again, per-second figures, rates with adaptive
 * capacity), reports to and from the other nodes, GroupStatus and metrics.
 * The rules are in capacity.h, the threads in capacity.c's header.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "node/capacity_int.h"
#include "node/ship_int.h"
#include "proto/lanes.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* The tick                                                                  */
/* ------------------------------------------------------------------------ */

/* What the catalog says of one partition (read outside the group's lock). */
typedef struct cap_def {
	uint32_t table_id;
	uint16_t index_id;
	const char *table, *index, *hash_attr;
	bool provisioned;
	double table_rate[2];
} cap_def;

static void def_rates(cap_def *d, st_billing billing, const st_throughput *tp)
{
	d->provisioned = billing == ST_BILLING_PROVISIONED;
	d->table_rate[CAP_READ] = (double)(d->provisioned ? tp->rcu : tp->max_rcu);
	d->table_rate[CAP_WRITE] = (double)(d->provisioned ? tp->wcu : tp->max_wcu);
}

/* Every partition of group grp's catalog into *defs (arena a). */
static int read_defs(node_cap *c, node_group *grp, sh_arena *a, cap_def **defs, uint32_t *n)
{
	char errmsg[SH_ERRMSG_SIZE];
	st_env *env = node_group_env(grp);
	uint32_t size = 0;
	*defs = NULL;
	*n = 0;
	const char *start = NULL;
	for (;;) {
		const char **names, *last;
		uint32_t nn;
		int rc = st_table_list(env, start, 100, a, &names, &nn, &last, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		for (uint32_t i = 0; i < nn; i++) {
			st_table_info info;
			if (st_table_describe(env, names[i], a, &info, errmsg) != SHOAL_OK)
				continue;
			uint32_t need = *n + 1 + info.def.n_indexes;
			if (need > size) {
				uint32_t ns = need * 2;
				cap_def *nd = sh_arena_alloc(a, ns * sizeof(*nd));
				if (nd == NULL)
					return SHOAL_E_NOMEM;
				if (*n > 0)
					memcpy(nd, *defs, *n * sizeof(*nd));
				*defs = nd;
				size = ns;
			}
			cap_def *d = &(*defs)[(*n)++];
			memset(d, 0, sizeof(*d));
			d->table_id = info.def.id;
			d->table = info.def.name;
			d->index = "";
			d->hash_attr = info.def.key.hash.name;
			def_rates(d, info.def.billing, &info.def.tp);
			for (uint32_t x = 0; x < info.def.n_indexes; x++) {
				const st_index_def *ix = &info.def.indexes[x];
				if (ix->local)
					continue;
				cap_def *e = &(*defs)[(*n)++];
				memset(e, 0, sizeof(*e));
				e->table_id = info.def.id;
				e->index_id = ix->id;
				e->table = info.def.name;
				e->index = ix->name;
				e->hash_attr = ix->key.hash.name;
				def_rates(e, info.def.billing, &ix->tp);
			}
		}
		if (last == NULL || nn == 0)
			break;
		start = last;
	}
	(void)c;
	return SHOAL_OK;
}

static void copy_name(char *dst, size_t size, const char *src)
{
	size_t l = src != NULL ? strlen(src) : 0;
	if (l >= size)
		l = size - 1;
	memcpy(dst, src != NULL ? src : "", l);
	dst[l] = '\0';
}

/* Merges the catalog's partitions into cg: new ones get one-second
 * buckets, gone ones are dropped.  Under cg->mu. */
static int merge_defs(node_cap *c, cap_group *cg, const cap_def *defs, uint32_t n, int64_t now)
{
	for (uint32_t i = 0; i < cg->n; i++)
		cg->parts[i].seen = false;
	for (uint32_t i = 0; i < n; i++) {
		const cap_def *d = &defs[i];
		cap_part *p = cap_find_id(cg, d->table_id, d->index_id);
		if (p == NULL) {
			if (cg->n == cg->size) {
				uint32_t ns = cg->size != 0 ? cg->size * 2 : 8;
				cap_part *np = sh_realloc(cg->parts, ns * sizeof(*np));
				if (np == NULL)
					return SHOAL_E_NOMEM;
				cg->parts = np;
				cg->size = ns;
			}
			p = &cg->parts[cg->n++];
			memset(p, 0, sizeof(*p));
			p->table_id = d->table_id;
			p->index_id = d->index_id;
			for (int k = 0; k < 2; k++) {
				p->lim[k].part_max = c->part_max[k];
				p->lim[k].frac = 1.0 / sh_cluster_partitions(c->n->conf);
				p->lim[k].held = 1;
				p->lim[k].table_rate = d->table_rate[k];
				p->lim[k].others = -1;
				double share = cap_share(&p->lim[k]);
				cap_bucket_init(&p->b[k], share, share * c->burst_secs, now);
			}
		}
		copy_name(p->table, sizeof(p->table), d->table);
		copy_name(p->index, sizeof(p->index), d->index);
		copy_name(p->hash_attr, sizeof(p->hash_attr), d->hash_attr);
		p->provisioned = d->provisioned;
		for (int k = 0; k < 2; k++)
			p->lim[k].table_rate = d->table_rate[k];
		p->seen = true;
	}
	uint32_t w = 0;
	for (uint32_t i = 0; i < cg->n; i++) {
		if (!cg->parts[i].seen)
			continue;
		if (w != i)
			cg->parts[w] = cg->parts[i];
		w++;
	}
	cg->n = w;
	return SHOAL_OK;
}

/* Closes a second of dt: per-second figures from the windows, the sketch
 * rolled.  Under cg->mu. */
static void roll_group(cap_group *cg, double dt)
{
	for (uint32_t i = 0; i < cg->n; i++) {
		cap_part *p = &cg->parts[i];
		for (int k = 0; k < 2; k++) {
			p->last[k] = p->win[k] / dt;
			p->thr_last[k] = (double)p->thr_win[k] / dt;
			p->thr_split_last[k] = (double)p->thr_split_win[k] / dt;
			p->win[k] = 0;
			p->thr_win[k] = 0;
			p->thr_split_win[k] = 0;
		}
	}
	cap_sketch_roll(&cg->hot, dt);
}

/* ------------------------------------------------------------------------ */
/* Reports between nodes                                                     */
/* ------------------------------------------------------------------------ */

typedef struct cap_msg {
	wire_lane_item item; /* first: the lanes hand it back */
	uint8_t *buf;
} cap_msg;

static void report_done(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	(void)rv, (void)ans, (void)len;
	cap_msg *m = (cap_msg *)it;
	if (whole != NULL)
		nng_msg_free(whole);
	sh_free(m->buf);
	sh_free(m);
}

/* Tells every other node what the partitions led here used in the last
 * second (a lost report only makes adaptive capacity wait).  Loop. */
static void send_reports(node_cap *c, const cap_use *use, uint32_t n_use)
{
	node *n = c->n;
	if (n->ship == NULL || n_use == 0)
		return;
	if (n_use > CAP_REMOTE_MAX)
		n_use = CAP_REMOTE_MAX;
	Shoal__PartUse *parts = sh_calloc(n_use, sizeof(*parts));
	Shoal__PartUse **pp = sh_calloc(n_use, sizeof(*pp));
	if (parts == NULL || pp == NULL)
		goto out;
	for (uint32_t i = 0; i < n_use; i++) {
		shoal__part_use__init(&parts[i]);
		parts[i].group = use[i].gid;
		parts[i].table_id = use[i].table_id;
		parts[i].index_id = use[i].index_id;
		parts[i].read_units = use[i].last[CAP_READ];
		parts[i].write_units = use[i].last[CAP_WRITE];
		pp[i] = &parts[i];
	}
	Shoal__CapReport rep = SHOAL__CAP_REPORT__INIT;
	rep.node = n->id;
	rep.parts = pp;
	rep.n_parts = n_use;
	Shoal__NodeRequest req = SHOAL__NODE_REQUEST__INIT;
	req.cap_report = &rep;
	uint32_t ids[SH_MAX_NODES];
	uint32_t n_ids = sh_place_nodes(n->place, ids, SH_MAX_NODES);
	for (uint32_t k = 0; k < n_ids && k < SH_MAX_NODES; k++) {
		uint32_t dest = ids[k];
		if (dest == n->id)
			continue;
		/* addressed to a group the destination hosts (its front door
		 * checks that), any one */
		uint32_t g = 0;
		while (g < sh_cluster_group_cap(n->conf) && !sh_place_hosts(n->place, dest, g))
			g++;
		if (g == sh_cluster_group_cap(n->conf))
			continue;
		req.group = g;
		size_t size = shoal__node_request__get_packed_size(&req);
		cap_msg *m = sh_calloc(1, sizeof(*m));
		uint8_t *buf = sh_malloc(size > 0 ? size : 1);
		wire_lanes *l = node_ship_lanes_to(n->ship, dest);
		if (m == NULL || buf == NULL || l == NULL) {
			sh_free(m);
			sh_free(buf);
			continue;
		}
		m->buf = buf;
		m->item.part[0] = buf;
		m->item.len[0] = shoal__node_request__pack(&req, buf);
		m->item.deadline = sh_now_ms() + 1000;
		m->item.done = report_done;
		if (wire_lanes_submit(l, &m->item) != SHOAL_OK) {
			sh_free(buf);
			sh_free(m);
		}
	}
out:
	sh_free(parts);
	sh_free(pp);
}

int node_handle_cap_report(node_call *c)
{
	node_cap *cap = c->node->cap;
	const Shoal__CapReport *r = c->req->cap_report;
	if (r->n_parts > CAP_REMOTE_MAX)
		return sh_errf(c->errmsg, SHOAL_E_VALIDATION,
		               "a capacity report of %zu partitions (at most %d)", r->n_parts,
		               CAP_REMOTE_MAX);
	int64_t now = cap_now_ms();
	pthread_mutex_lock(&cap->rmu);
	for (size_t i = 0; i < r->n_parts; i++) {
		const Shoal__PartUse *u = r->parts[i];
		if (u == NULL || u->group >= cap->groups || u->index_id > UINT16_MAX ||
		    !isfinite(u->read_units) || !isfinite(u->write_units) || u->read_units < 0 ||
		    u->write_units < 0)
			continue;
		cap_remote *e = NULL;
		for (uint32_t k = 0; k < cap->n_remote && e == NULL; k++)
			if (cap->remote[k].gid == u->group &&
			    cap->remote[k].table_id == u->table_id &&
			    cap->remote[k].index_id == u->index_id)
				e = &cap->remote[k];
		if (e == NULL) {
			/* the oldest entry makes room when full */
			if (cap->n_remote == CAP_REMOTE_MAX) {
				e = &cap->remote[0];
				for (uint32_t k = 1; k < cap->n_remote; k++)
					if (cap->remote[k].at_ms < e->at_ms)
						e = &cap->remote[k];
			} else {
				if (cap->n_remote == cap->size_remote) {
					uint32_t ns =
					    cap->size_remote != 0 ? cap->size_remote * 2 : 64;
					cap_remote *nr = sh_realloc(cap->remote, ns * sizeof(*nr));
					if (nr == NULL)
						break;
					cap->remote = nr;
					cap->size_remote = ns;
				}
				e = &cap->remote[cap->n_remote++];
			}
			e->gid = u->group;
			e->table_id = u->table_id;
			e->index_id = (uint16_t)u->index_id;
		}
		e->last[CAP_READ] = u->read_units;
		e->last[CAP_WRITE] = u->write_units;
		e->at_ms = now;
	}
	pthread_mutex_unlock(&cap->rmu);
	return SHOAL_OK;
}

void node_cap_tick(node_cap *c)
{
	if (c == NULL)
		return;
	int64_t now = cap_now_ms();
	if (c->last_tick_ms != 0 && now - c->last_tick_ms < 1000)
		return;
	double dt = c->last_tick_ms != 0 ? (double)(now - c->last_tick_ms) / 1000.0 : 1.0;
	c->last_tick_ms = now;
	const sh_cluster_conf *conf = c->n->conf;
	uint32_t first_data = conf->groups > 1 ? 1 : 0;
	uint32_t data_groups = conf->groups - first_data;

	sh_arena_reset(&c->scratch);
	cap_use *use = NULL;
	uint32_t n_use = 0, size_use = 0;
	bool *lead = sh_arena_calloc(&c->scratch, c->groups, sizeof(*lead));
	if (lead == NULL)
		return;
	for (uint32_t g = first_data; g < c->groups; g++) {
		cap_group *cg = c->g[g];
		node_group *grp = node_group_get(c->n, g);
		if (cg == NULL || grp == NULL)
			continue;
		node_group_status st;
		node_group_status_get(grp, &st);
		lead[g] = st.role == RAFT_LEADER;
		if (node_group_health(grp, NULL) != SHOAL_OK)
			continue;
		/* The catalog is read again only when it changed (a DDL entry
		 * or a snapshot applied: node_cap_catalog_changed); taken
		 * before the read, so a change during it is read next time. */
		cap_def *defs = NULL;
		uint32_t n = 0;
		bool reread = atomic_exchange(&cg->catalog_changed, false);
		if (reread && read_defs(c, grp, &c->scratch, &defs, &n) != SHOAL_OK) {
			atomic_store(&cg->catalog_changed, true);
			reread = false;
		}
		pthread_mutex_lock(&cg->mu);
		cg->leading = lead[g];
		int rc = reread ? merge_defs(c, cg, defs, n, now) : SHOAL_OK;
		roll_group(cg, dt);
		if (rc == SHOAL_OK && n_use + cg->n > size_use) {
			uint32_t ns = (n_use + cg->n) * 2;
			cap_use *nu = sh_arena_alloc(&c->scratch, ns * sizeof(*nu));
			if (nu != NULL) {
				if (n_use > 0)
					memcpy(nu, use, n_use * sizeof(*nu));
				use = nu;
				size_use = ns;
			}
		}
		for (uint32_t i = 0; rc == SHOAL_OK && lead[g] && i < cg->n && n_use < size_use;
		     i++) {
			cap_use *u = &use[n_use++];
			u->gid = g;
			u->table_id = cg->parts[i].table_id;
			u->index_id = cg->parts[i].index_id;
			u->last[0] = cg->parts[i].last[0];
			u->last[1] = cg->parts[i].last[1];
		}
		pthread_mutex_unlock(&cg->mu);
	}

	send_reports(c, use, n_use);
	/* The partitions other nodes lead, as they last reported them. */
	pthread_mutex_lock(&c->rmu);
	for (uint32_t i = 0; i < c->n_remote; i++) {
		const cap_remote *r = &c->remote[i];
		if (r->gid >= c->groups || lead[r->gid] || now - r->at_ms > CAP_REMOTE_FRESH_MS)
			continue;
		if (n_use == size_use) {
			uint32_t ns = size_use * 2 + 16;
			cap_use *nu = sh_arena_alloc(&c->scratch, ns * sizeof(*nu));
			if (nu == NULL)
				break;
			if (n_use > 0)
				memcpy(nu, use, n_use * sizeof(*nu));
			use = nu;
			size_use = ns;
		}
		cap_use *u = &use[n_use++];
		u->gid = r->gid;
		u->table_id = r->table_id;
		u->index_id = r->index_id;
		u->last[0] = r->last[0];
		u->last[1] = r->last[1];
	}
	pthread_mutex_unlock(&c->rmu);

	/* Rates: adaptive capacity knows the other partitions' consumption
	 * when every one of them is led here or was reported lately. */
	for (uint32_t g = first_data; g < c->groups; g++) {
		cap_group *cg = c->g[g];
		if (cg == NULL)
			continue;
		pthread_mutex_lock(&cg->mu);
		for (uint32_t i = 0; i < cg->n; i++) {
			cap_part *p = &cg->parts[i];
			double others[2] = {0, 0};
			uint32_t known = 0;
			for (uint32_t u = 0; u < n_use; u++) {
				if (use[u].gid == g || use[u].table_id != p->table_id ||
				    use[u].index_id != p->index_id)
					continue;
				known++;
				others[0] += use[u].last[0];
				others[1] += use[u].last[1];
			}
			/* A table's share here follows the cluster map (its
			 * partitions in this group, and the groups holding the
			 * others, new groups included), a GSI's the map's
			 * partitions of the GSI space (every GSI's entries spread
			 * over it alike); a group that holds none (a request
			 * routed on an old map), one static partition's. */
			uint32_t held = 0, holders = data_groups;
			double frac = 0;
			sh_place_table_share(c->n->place, c->n->conf,
			                     p->index_id == 0 ? p->table_id : SH_MAP_GSI_SPACE, g,
			                     &held, &frac, &holders);
			bool all = known + 1 >= (held > 0 ? holders : data_groups);
			if (held == 0)
				held = 1, frac = 1.0 / (data_groups > 0 ? data_groups : 1);
			for (int k = 0; k < 2; k++) {
				p->lim[k].frac = frac;
				p->lim[k].held = held;
				p->lim[k].others = all ? others[k] : -1;
				double share = cap_share(&p->lim[k]);
				cap_bucket_set(&p->b[k], cap_adaptive_rate(&p->lim[k]),
				               share * c->burst_secs, now);
				/* A follower's buckets do not save up: a new leader
				 * starts with one second of tokens, not a burst its
				 * partition never left unused. */
				if (!cg->leading && p->b[k].tokens > p->b[k].rate)
					p->b[k].tokens = p->b[k].rate;
			}
		}
		pthread_mutex_unlock(&cg->mu);
	}
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */
/* ------------------------------------------------------------------------ */

int node_cap_status(node_cap *c, uint32_t gid, sh_arena *a, Shoal__GroupStatus *gs)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg == NULL)
		return SHOAL_OK;
	int rc = SHOAL_OK;
	int64_t now = cap_now_ms();
	pthread_mutex_lock(&cg->mu);
	if (!cg->leading || cg->n == 0)
		goto out;
	gs->load = sh_arena_calloc(a, cg->n, sizeof(*gs->load));
	if (gs->load == NULL)
		goto nomem;
	for (uint32_t i = 0; i < cg->n; i++) {
		cap_part *p = &cg->parts[i];
		Shoal__PartitionLoad *l = sh_arena_alloc(a, sizeof(*l));
		if (l == NULL)
			goto nomem;
		shoal__partition_load__init(l);
		l->table = sh_arena_strndup(a, p->table, strlen(p->table));
		l->index = sh_arena_strndup(a, p->index, strlen(p->index));
		if (l->table == NULL || l->index == NULL)
			goto nomem;
		l->read_units = p->last[CAP_READ];
		l->write_units = p->last[CAP_WRITE];
		l->read_throttled = (uint64_t)llround(p->thr_last[CAP_READ]);
		l->write_throttled = (uint64_t)llround(p->thr_last[CAP_WRITE]);
		l->read_throttled_at_limit = (uint64_t)llround(p->thr_split_last[CAP_READ]);
		l->write_throttled_at_limit = (uint64_t)llround(p->thr_split_last[CAP_WRITE]);
		cap_bucket_refill(&p->b[CAP_READ], now);
		cap_bucket_refill(&p->b[CAP_WRITE], now);
		l->read_limit = p->b[CAP_READ].rate;
		l->write_limit = p->b[CAP_WRITE].rate;
		l->read_tokens = p->b[CAP_READ].tokens;
		l->write_tokens = p->b[CAP_WRITE].tokens;
		gs->load[gs->n_load++] = l;
	}
	uint32_t idx[8];
	uint32_t n = cap_sketch_top(&cg->hot, idx, 8);
	if (n > 0 && (gs->hot_keys = sh_arena_calloc(a, n, sizeof(*gs->hot_keys))) == NULL)
		goto nomem;
	for (uint32_t i = 0; i < n; i++) {
		const cap_hot *h = &cg->hot.slot[idx[i]];
		const cap_part *p = cap_find_id(cg, h->table_id, h->index_id);
		if (p == NULL)
			continue;
		Shoal__HotKey *k = sh_arena_alloc(a, sizeof(*k));
		if (k == NULL)
			goto nomem;
		shoal__hot_key__init(k);
		k->table = sh_arena_strndup(a, p->table, strlen(p->table));
		k->index = sh_arena_strndup(a, p->index, strlen(p->index));
		char json[CAP_HOT_KEY_MAX];
		cap_hot_json(h, json, sizeof(json));
		k->key = sh_arena_strndup(a, json, strlen(json));
		if (k->table == NULL || k->index == NULL || k->key == NULL)
			goto nomem;
		k->read_units = h->rate[CAP_READ];
		k->write_units = h->rate[CAP_WRITE];
		k->throttled = h->throttled;
		gs->hot_keys[gs->n_hot_keys++] = k;
	}
out:
	pthread_mutex_unlock(&cg->mu);
	return rc;
nomem:
	rc = SHOAL_E_NOMEM;
	goto out;
}

/* A Prometheus label value: \ " and newline escaped. */
static void label_escape(const char *s, char *out, size_t size)
{
	size_t o = 0;
	for (; *s != '\0' && o + 3 < size; s++) {
		if (*s == '\\' || *s == '"')
			out[o++] = '\\', out[o++] = *s;
		else if (*s == '\n')
			out[o++] = '\\', out[o++] = 'n';
		else
			out[o++] = *s;
	}
	out[o] = '\0';
}

static const char *const metric[4][2] = {
    {"shoal_partition_consumed_units_total",
     "capacity units consumed by the partition (its group's leader counts)"},
    {"shoal_partition_throttled_total", "requests refused with ProvisionedThroughputExceeded"},
    {"shoal_partition_limit_units", "units per second the partition's bucket refills at now"},
    {"shoal_hot_key_units", "units per second of the heaviest partition keys (decaying)"},
};

void node_cap_metrics(node_cap *c, node_appendf_fn appendf, void *buf)
{
	if (c == NULL)
		return;
	static const char *const type[4] = {"counter", "counter", "gauge", "gauge"};
	for (int m = 0; m < 4; m++) {
		appendf(buf, "# HELP %s %s\n# TYPE %s %s\n", metric[m][0], metric[m][1],
		        metric[m][0], type[m]);
		for (uint32_t g = 0; g < c->groups; g++) {
			cap_group *cg = c->g[g];
			if (cg == NULL)
				continue;
			pthread_mutex_lock(&cg->mu);
			if (!cg->leading) {
				pthread_mutex_unlock(&cg->mu);
				continue;
			}
			if (m < 3) {
				for (uint32_t i = 0; i < cg->n; i++) {
					const cap_part *p = &cg->parts[i];
					for (int k = 0; k < 2; k++) {
						double v = m == 0   ? p->total[k]
						           : m == 1 ? (double)p->thr_total[k]
						                    : p->b[k].rate;
						appendf(buf,
						        "%s{group=\"%u\",table=\"%s\",index=\"%s\","
						        "kind=\"%s\"} %.1f\n",
						        metric[m][0], g, p->table, p->index,
						        cap_kind_name[k], v);
					}
				}
			} else {
				uint32_t idx[8];
				uint32_t n = cap_sketch_top(&cg->hot, idx, 8);
				for (uint32_t i = 0; i < n; i++) {
					const cap_hot *h = &cg->hot.slot[idx[i]];
					const cap_part *p =
					    cap_find_id(cg, h->table_id, h->index_id);
					if (p == NULL)
						continue;
					char json[CAP_HOT_KEY_MAX], key[2 * CAP_HOT_KEY_MAX + 4];
					cap_hot_json(h, json, sizeof(json));
					label_escape(json, key, sizeof(key));
					for (int k = 0; k < 2; k++)
						appendf(buf,
						        "%s{group=\"%u\",table=\"%s\",index=\"%s\","
						        "key=\"%s\",kind=\"%s\"} %.1f\n",
						        metric[m][0], g, p->table, p->index, key,
						        cap_kind_name[k], h->rate[k]);
				}
			}
			pthread_mutex_unlock(&cg->mu);
		}
	}
}
