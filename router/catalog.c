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
 * Refreshes are asynchronous, one at a time, and coalesced: a job that
 * needs "a catalog loaded after now" joins the waiters with the number of
 * refreshes started so far, and is woken by the first refresh that started
 * after that (its answer was produced after the job's need arose); jobs
 * that came while a refresh was in flight get the next one, which starts
 * as soon as that one ends.  The cache is loaded lazily, refreshed when a
 * request names an unknown table, and after CreateTable / DeleteTable /
 * UpdateTable.  (Repair of a data group that lost a table: job.c.)
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

int rt_catalog_init(rt_catalog *c)
{
	memset(c, 0, sizeof(*c));
	c->call = sh_calloc(1, sizeof(*c->call));
	if (c->call == NULL)
		return SHOAL_E_NOMEM;
	if (pthread_mutex_init(&c->mu, NULL) != 0) {
		sh_free(c->call);
		return SHOAL_E_INTERNAL;
	}
	return SHOAL_OK;
}

void rt_catalog_fini(rt_catalog *c)
{
	if (c->cur != NULL)
		rt_catalog_release(c->cur);
	c->cur = NULL;
	sh_free(c->call);
	c->call = NULL;
	pthread_mutex_destroy(&c->mu);
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
	s->dropped = sh_arena_calloc(&s->arena, n + 1, sizeof(*s->dropped));
	if (s->tables == NULL || s->dropped == NULL) {
		rt_catalog_snap_free(s);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "catalog: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const Shoal__TableDefine *d = defs[i];
		rt_table *t =
		    d != NULL && d->dropped_ms != 0 ? &s->dropped[s->n_dropped] : &s->tables[s->n];
		char msg[SH_ERRMSG_SIZE];
		if (d == NULL || d->def == NULL) {
			rt_log("catalog: entry %zu has no definition; skipped", i);
			continue;
		}
		int rc = wire_table_define_from_pb(&s->arena, d, &t->def, msg);
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
		t->dropped_ms = d->dropped_ms;
		if (d->dropped_ms != 0)
			s->n_dropped++;
		else
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
/* Refresh (any thread)                                                      */
/* ------------------------------------------------------------------------ */

static void refresh_done(rt_call *call);

/* Sends list_catalog to group 0 (c->in_flight set by the caller). */
static void refresh_start(rt_router *rt)
{
	rt_catalog *c = &rt->catalog;
	atomic_fetch_add(&rt->busy, 1);
	sh_arena_init(&c->call_arena);
	rt_call *call = c->call;
	memset(call, 0, sizeof(*call));
	call->rt = rt;
	call->done = refresh_done;
	call->group = 0;
	call->deadline = rt_now_ms() + rt->opt.deadline_ms;
	Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
	nr.list_catalog = true;
	uint8_t *buf;
	size_t len;
	char msg[SH_ERRMSG_SIZE];
	if (wire_pack(&c->call_arena, &nr.base, &buf, &len, msg) != SHOAL_OK) {
		/* Out of memory: fail it through the call's own path. */
		buf = NULL;
		len = 0;
	}
	call->body = buf;
	call->body_len = len;
	rt_call_start(call);
}

void rt_catalog_refresh_for(rt_router *rt, rt_job *j)
{
	rt_catalog *c = &rt->catalog;
	pthread_mutex_lock(&c->mu);
	j->refresh_need = c->started; /* a refresh numbered above this one */
	j->refresh_next = c->waiters;
	c->waiters = j;
	bool start = !c->in_flight;
	if (start) {
		c->in_flight = true;
		c->started++;
	}
	pthread_mutex_unlock(&c->mu);
	if (start)
		refresh_start(rt);
}

/* The refresh's answer: install the new snapshot, wake the jobs that
 * waited for this refresh, start another for those that came meanwhile. */
static void refresh_done(rt_call *call)
{
	rt_router *rt = call->rt;
	rt_catalog *c = &rt->catalog;
	char msg[SH_ERRMSG_SIZE] = "";
	int rc = call->rc;
	if (rc != SHOAL_OK) {
		snprintf(msg, sizeof(msg), "%s", call->errmsg);
		sh_arena_fini(&c->call_arena);
	} else {
		Shoal__NodeResponse *resp = rt_call_resp(call, &c->call_arena);
		rc = resp == NULL ? SHOAL_E_INTERNAL : call->code;
		if (resp == NULL)
			snprintf(msg, sizeof(msg), "catalog (group 0): %.480s", call->errmsg);
		else if (rc != SHOAL_OK)
			snprintf(msg, sizeof(msg), "catalog (group 0): %s",
			         resp->response != NULL && resp->response->message != NULL
			             ? resp->response->message
			             : "refused");
		rt_catalog_snap *snap;
		if (rc == SHOAL_OK)
			rc = rt_catalog_snap_build(&c->call_arena, resp->catalog, resp->n_catalog,
			                           &snap, msg);
		else
			sh_arena_fini(&c->call_arena);
		if (rc == SHOAL_OK)
			rt_catalog_install(c, snap);
	}
	rt_call_release(call);
	pthread_mutex_lock(&c->mu);
	uint64_t seq = c->started;
	rt_job *woken = NULL, *keep = NULL;
	for (rt_job *j = c->waiters, *next; j != NULL; j = next) {
		next = j->refresh_next;
		if (j->refresh_need < seq) {
			j->refresh_next = woken;
			woken = j;
		} else {
			j->refresh_next = keep;
			keep = j;
		}
	}
	c->waiters = keep;
	c->in_flight = keep != NULL;
	if (c->in_flight)
		c->started++;
	pthread_mutex_unlock(&c->mu);
	if (keep != NULL)
		refresh_start(rt);
	for (rt_job *j = woken, *next; j != NULL; j = next) {
		next = j->refresh_next;
		rt_job_refreshed(j, rc, msg);
	}
	atomic_fetch_sub(&rt->busy, 1);
}
