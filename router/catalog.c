/*
 * catalog.c -- the router's cache of group 0's catalog: table name -> id,
 * key schema and definition.
 *
 * A catalog version is an immutable snapshot (rt_catalog_snap) built from
 * one list_catalog answer: the answer is unpacked into the snapshot's own
 * arena, each TableDefine is converted to an st_table_def once, and the
 * tables are sorted by name for binary search.  Requests take a reference
 * (rt_catalog_acquire) and keep it until they answer, so a refresh can
 * install a new snapshot at any time; the last reference frees the old one.
 *
 * Refreshes are serialised by refresh_mu and coalesced: a caller that needs
 * "a catalog at least as new as now" notes how many refreshes had started,
 * and skips its own if one that started later has finished meanwhile (its
 * answer was produced after the caller's need arose).  The cache is loaded
 * lazily, refreshed when an item operation names an unknown table, and after
 * CreateTable / DeleteTable.
 *
 * Repair: a data group that lost a table definition (it was unreachable
 * during CreateTable, or was rebuilt) answers ResourceNotFound for a table
 * group 0 knows.  rt_repair refreshes the catalog first -- the table may
 * really be gone, dropped through another router -- and only if it still
 * exists with the same id re-sends its stored TableDefine to that group.
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

int rt_catalog_init(rt_catalog *c)
{
	memset(c, 0, sizeof(*c));
	if (pthread_mutex_init(&c->mu, NULL) != 0)
		return SHOAL_E_INTERNAL;
	if (pthread_mutex_init(&c->refresh_mu, NULL) != 0) {
		pthread_mutex_destroy(&c->mu);
		return SHOAL_E_INTERNAL;
	}
	atomic_init(&c->started, 0);
	return SHOAL_OK;
}

void rt_catalog_fini(rt_catalog *c)
{
	if (c->cur != NULL)
		rt_catalog_release(c->cur);
	c->cur = NULL;
	pthread_mutex_destroy(&c->refresh_mu);
	pthread_mutex_destroy(&c->mu);
}

static st_index_status index_status_parse(const char *s)
{
	if (s != NULL && strcmp(s, "CREATING") == 0)
		return ST_INDEX_CREATING;
	if (s != NULL && strcmp(s, "DELETING") == 0)
		return ST_INDEX_DELETING;
	return ST_INDEX_ACTIVE;
}

int rt_table_def_from_pb(sh_arena *a, const Shoal__TableDefine *d, st_table_def *out, char *errmsg)
{
	if (d == NULL || d->def == NULL)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "a table definition without its request");
	int rc = wire_create_table_from_pb(a, d->def, out, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->id = d->table_id;
	out->created_ms = d->created_ms;
	for (uint32_t i = 0; i < out->n_indexes; i++) {
		st_index_def *x = &out->indexes[i];
		/* Without group 0's ids (a definition from before indexes had
		 * them): the engine's assignment at CreateTable, 1.. in order. */
		if (d->n_indexes == 0)
			x->id = (uint16_t)(i + 1);
		for (size_t k = 0; k < d->n_indexes; k++) {
			const Shoal__IndexState *st = d->indexes[k];
			if (st != NULL && st->index_name != NULL &&
			    strcmp(st->index_name, x->name) == 0) {
				x->id = (uint16_t)st->index_id;
				x->status = index_status_parse(st->status);
			}
		}
	}
	return SHOAL_OK;
}

const st_index_def *rt_index_find(const rt_table *t, const char *name)
{
	if (t == NULL || name == NULL)
		return NULL;
	for (uint32_t i = 0; i < t->def.n_indexes; i++)
		if (strcmp(t->def.indexes[i].name, name) == 0)
			return &t->def.indexes[i];
	return NULL;
}

static int table_cmp(const void *x, const void *y)
{
	return strcmp(((const rt_table *)x)->name, ((const rt_table *)y)->name);
}

int rt_catalog_snap_build(sh_arena *arena, Shoal__TableDefine *const *defs, size_t n,
                          rt_catalog_snap **out, char *errmsg)
{
	*out = NULL;
	rt_catalog_snap *s = sh_calloc(1, sizeof(*s));
	if (s == NULL) {
		sh_arena_fini(arena);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "catalog: out of memory");
	}
	s->arena = *arena; /* takes the blocks over */
	sh_arena_init(arena);
	atomic_init(&s->refs, 1);
	s->tables = sh_arena_calloc(&s->arena, n + 1, sizeof(*s->tables));
	if (s->tables == NULL) {
		rt_catalog_snap_free(s);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "catalog: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const Shoal__TableDefine *d = defs[i];
		rt_table *t = &s->tables[s->n];
		char msg[SH_ERRMSG_SIZE];
		if (d == NULL || d->def == NULL) {
			rt_log("catalog: entry %zu has no definition; skipped", i);
			continue;
		}
		int rc = rt_table_def_from_pb(&s->arena, d, &t->def, msg);
		if (rc == SHOAL_E_NOMEM) {
			rt_catalog_snap_free(s);
			return sh_errf(errmsg, rc, "catalog: out of memory");
		}
		if (rc != SHOAL_OK || t->def.name == NULL) {
			rt_log("catalog: table id %u does not convert (%s); skipped", d->table_id,
			       msg);
			continue;
		}
		t->name = t->def.name;
		t->id = d->table_id;
		t->pb = d;
		s->n++;
	}
	qsort(s->tables, s->n, sizeof(*s->tables), table_cmp);
	*out = s;
	return SHOAL_OK;
}

void rt_catalog_snap_free(rt_catalog_snap *s)
{
	if (s == NULL)
		return;
	sh_arena_fini(&s->arena);
	sh_free(s);
}

const rt_table *rt_catalog_find(const rt_catalog_snap *s, const char *name)
{
	if (s == NULL || name == NULL)
		return NULL;
	rt_table key = {.name = name};
	return bsearch(&key, s->tables, s->n, sizeof(*s->tables), table_cmp);
}

rt_catalog_snap *rt_catalog_acquire(rt_catalog *c)
{
	pthread_mutex_lock(&c->mu);
	rt_catalog_snap *s = c->cur;
	if (s != NULL)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&c->mu);
	return s;
}

void rt_catalog_release(rt_catalog_snap *s)
{
	if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1)
		rt_catalog_snap_free(s);
}

void rt_catalog_install(rt_catalog *c, rt_catalog_snap *s)
{
	pthread_mutex_lock(&c->mu);
	rt_catalog_snap *old = c->cur;
	c->cur = s;
	pthread_mutex_unlock(&c->mu);
	rt_catalog_release(old);
}

/* ------------------------------------------------------------------------ */
/* Refresh, lookup, repair (worker threads)                                  */
/* ------------------------------------------------------------------------ */

int rt_catalog_refresh(rt_router *rt, int64_t deadline, char *errmsg)
{
	rt_catalog *c = &rt->catalog;
	uint64_t want = atomic_load(&c->started);
	pthread_mutex_lock(&c->refresh_mu);
	if (c->done > want) {
		pthread_mutex_unlock(&c->refresh_mu);
		return SHOAL_OK;
	}
	uint64_t seq = atomic_fetch_add(&c->started, 1) + 1;
	sh_arena arena;
	sh_arena_init(&arena);
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.list_catalog = true;
	rt_call call = {.group = 0, .req = &nr};
	rt_call_all(rt, &arena, &call, 1, deadline);
	int rc = call.rc;
	if (rc != SHOAL_OK) {
		sh_errf(errmsg, rc, "%s", call.errmsg);
		sh_arena_fini(&arena);
		goto out;
	}
	rc = rt_resp_code(call.resp);
	if (rc != SHOAL_OK) {
		sh_errf(errmsg, rc, "catalog (group 0): %s", call.resp->response->message);
		sh_arena_fini(&arena);
		goto out;
	}
	rt_catalog_snap *s;
	rc = rt_catalog_snap_build(&arena, call.resp->catalog, call.resp->n_catalog, &s, errmsg);
	if (rc != SHOAL_OK)
		goto out;
	rt_catalog_install(c, s);
	c->done = seq;
out:
	pthread_mutex_unlock(&c->refresh_mu);
	return rc;
}

/* Keeps the newest snapshot referenced by the request (all of them stay
 * referenced until the request ends: handlers may still point into older
 * ones). */
static int hold_current(rt_req *r)
{
	rt_catalog_snap *s = rt_catalog_acquire(&r->rt->catalog);
	if (s == NULL)
		return SHOAL_OK;
	if (s == r->snap) {
		rt_catalog_release(s);
		return SHOAL_OK;
	}
	if (r->snap != NULL) {
		if (r->n_old >= RT_MAX_OLD_SNAPS) {
			rt_catalog_release(s);
			return sh_errf(r->errmsg, SHOAL_E_UNAVAILABLE,
			               "Service unavailable: the catalog is changing too fast");
		}
		r->old_snaps[r->n_old++] = r->snap;
	}
	r->snap = s;
	return SHOAL_OK;
}

void rt_req_release(rt_req *r)
{
	for (uint32_t i = 0; i < r->n_old; i++)
		rt_catalog_release(r->old_snaps[i]);
	r->n_old = 0;
	rt_catalog_release(r->snap);
	r->snap = NULL;
}

static int not_found(rt_req *r, const char *name)
{
	return sh_errf(r->errmsg, SHOAL_E_NOT_FOUND,
	               "Requested resource not found: Table: %s not found", name);
}

int rt_table_lookup(rt_req *r, const char *name, bool force, const rt_table **out)
{
	*out = NULL;
	int rc;
	if (!force) {
		if (r->snap == NULL && (rc = hold_current(r)) != SHOAL_OK)
			return rc;
		if ((*out = rt_catalog_find(r->snap, name)) != NULL)
			return SHOAL_OK;
	}
	rc = rt_catalog_refresh(r->rt, r->deadline, r->errmsg);
	if (rc == SHOAL_OK)
		rc = hold_current(r);
	if (rc != SHOAL_OK)
		return rc;
	if ((*out = rt_catalog_find(r->snap, name)) != NULL)
		return SHOAL_OK;
	return not_found(r, name);
}

int rt_repair(rt_req *r, uint32_t group, const rt_table *const *tables, uint32_t n)
{
	if (n == 0)
		return SHOAL_OK;
	int rc = rt_catalog_refresh(r->rt, r->deadline, r->errmsg);
	if (rc == SHOAL_OK)
		rc = hold_current(r);
	if (rc != SHOAL_OK)
		return rc;
	rt_call *calls = sh_arena_calloc(r->a, n, sizeof(*calls));
	Shoal__NodeRequest *reqs = sh_arena_calloc(r->a, n, sizeof(*reqs));
	if (calls == NULL || reqs == NULL)
		return sh_errf(r->errmsg, SHOAL_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		const rt_table *now = rt_catalog_find(r->snap, tables[i]->name);
		if (now == NULL || now->id != tables[i]->id)
			return not_found(r, tables[i]->name);
		shoal__node_request__init(&reqs[i]);
		reqs[i].define_table = (Shoal__TableDefine *)now->pb;
		calls[i].group = group;
		calls[i].req = &reqs[i];
	}
	rt_call_all(r->rt, r->a, calls, n, r->deadline);
	for (uint32_t i = 0; i < n; i++) {
		if (calls[i].rc != SHOAL_OK)
			return sh_errf(r->errmsg, calls[i].rc, "%s", calls[i].errmsg);
		int code = rt_resp_code(calls[i].resp);
		if (code != SHOAL_OK && code != SHOAL_E_IN_USE)
			return sh_errf(r->errmsg, code, "repairing table %s in group %u: %s",
			               tables[i]->name, group, calls[i].resp->response->message);
		atomic_fetch_add(&r->rt->metrics.repairs, 1);
		rt_log("repaired table %s (id %u) in group %u", tables[i]->name, tables[i]->id,
		       group);
	}
	return SHOAL_OK;
}
