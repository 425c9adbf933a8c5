/*
 * job.c -- one client request's way through the router: the job state
 * machine (its table is in router.h, above struct rt_job), the table of
 * steps derived from the operation registry, the answer, and the two
 * things every step would otherwise repeat: repairing a data group that
 * lost a table definition, and running a request again when its table was
 * recreated under it.
 *
 * As Redis's processCommand: every request goes through one front door
 * (rt_job_start): it is decoded once (wire_unpack_request into the job's
 * arena, or it arrives decoded from the HTTP endpoint), its operation is
 * looked up in the registry, and its step runs.  Steps validate their
 * request with the wire_*_from_pb conversions (DynamoDB's API-level checks,
 * so a PutItem without TableName is refused here, without a node), plan,
 * issue calls, and build or pass on the answer; they never repeat the front
 * door's work.  Operations present in the protocol but not implemented yet
 * answer UnknownOperationException "<Operation> is not supported yet".
 *
 * Waves.  A step that returns RT_WAIT has added calls with rt_job_call;
 * job_launch starts them all (corked, so those for one node leave in one
 * message) with `pending` = calls + 1, drops its own count last, and the
 * call that brings pending to 0 runs job_resume on its thread.  The step
 * then finds every call of the wave finished.
 *
 * Repair.  A data group that lost a table definition (it was unreachable
 * during CreateTable, or was rebuilt) answers ResourceNotFound for a table
 * group 0 knows.  Calls that carry tables (rt_call_forward, rt_call_repairs)
 * get, once: a catalog refresh (the table may really be gone, dropped
 * through another router: then the request fails with ResourceNotFound),
 * the stored TableDefine re-sent to that group, and the call sent again --
 * before the step sees anything.
 *
 * Restart.  A node whose table of the request's name has another id than
 * the router routed with (the table was dropped and recreated through
 * another router) answers WRONG_EPOCH without doing anything; the job
 * refreshes the catalog and runs its step again from the start, once.
 *
 * Wrong group.  A group that no longer serves a hash range of a table (the
 * partition was fenced for a move, or moved away: common/placement.h)
 * refuses with WRONG_GROUP, having done nothing; call.c counts the answer
 * and asks the map refresher for a new map at once.  The step ends with
 * that answer as it would with any refusal -- after its own cleanup (a
 * transaction's aborts and finishes; batches count such a part as
 * unprocessed, so a batch ends with WRONG_GROUP only when no part was
 * applied) -- and here, the one place that decides, the job pauses (5 ms,
 * doubling up to 40 ms: RT_MOVED_*) and runs its step again from the
 * start, placed by the map it has then, until the request's deadline; then
 * it fails with ServiceUnavailable.  Not per call, as NOT_LEADER is: a call
 * cannot re-place itself, since the step chose its group from keys or a
 * hash range that the new map may split over several groups (a batch part,
 * a scan's partition, a transaction's participants).
 *
 * Metrics: every request counts once under its operation's slot, with its
 * outcome's exception name when it failed, and its latency.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "router/router.h"

enum job_state {
	J_NEW = 0,
	J_STEP,
	J_WAIT,
	J_REFRESH,
	J_REPAIR_REFRESH,
	J_REPAIR_DEFINE,
	J_ANSWER
};

/* The table of steps: one per registry operation. */
static const rt_step steps[SHOAL_OP__COUNT] = {
#define STEP_ENTRY(Name, field, CONST, cli, flags, node, summary)                                  \
	[SHOAL_OP_##CONST] = rt_step_##field,
    SHOAL_OPS(STEP_ENTRY)
#undef STEP_ENTRY
};

Shoal__Response *rt_error_response(sh_arena *a, int code, const char *msg)
{
	Shoal__Response *resp = sh_arena_alloc(a, sizeof(*resp));
	if (resp == NULL)
		return NULL;
	shoal__response__init(resp);
	if (wire_response_set_error(a, resp, code, msg, NULL, NULL) != SHOAL_OK)
		return NULL;
	return resp;
}

int rt_job_fail(rt_job *j, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->errmsg, sizeof(j->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                  */
/* ------------------------------------------------------------------------ */

rt_job *rt_job_get(rt_router *rt)
{
	pthread_mutex_lock(&rt->pool_mu);
	rt_job *j = rt->pool;
	if (j != NULL) {
		rt->pool = j->pool_next;
		rt->n_pool--;
		rt->pool_bytes -= j->pool_held;
	}
	pthread_mutex_unlock(&rt->pool_mu);
	if (j == NULL) {
		j = sh_calloc(1, sizeof(*j));
		if (j == NULL)
			return NULL;
		sh_arena_init(&j->arena);
	}
	j->rt = rt;
	return j;
}

static void release_snaps(rt_job *j)
{
	for (uint32_t i = 0; i < j->n_old; i++)
		rt_catalog_release(j->old_snaps[i]);
	j->n_old = 0;
	rt_catalog_release(j->snap);
	j->snap = NULL;
}

void rt_job_put(rt_job *j)
{
	rt_router *rt = j->rt;
	for (rt_call *c = j->all_calls; c != NULL; c = c->all_next)
		rt_call_release(c);
	release_snaps(j);
	if (j->msg != NULL)
		nng_msg_free(j->msg);
	if (j->out_msg != NULL)
		nng_msg_free(j->out_msg);
	if (j->answer != NULL)
		nng_msg_free(j->answer);
	bool keep_arena = j->arena.used <= RT_JOB_ARENA_KEEP;
	sh_arena arena = j->arena;
	memset(j, 0, sizeof(*j));
	if (keep_arena) {
		j->arena = arena;
		sh_arena_reset(&j->arena);
	} else {
		sh_arena_fini(&arena);
		sh_arena_init(&j->arena);
	}
	size_t held = sh_arena_held(&j->arena);
	pthread_mutex_lock(&rt->pool_mu);
	if (rt->n_pool < RT_JOB_POOL_KEEP) {
		if (rt->pool_bytes + held > RT_JOB_POOL_BYTES) {
			sh_arena_fini(&j->arena); /* rare: many large arenas returned */
			held = 0;
		}
		j->pool_held = held;
		j->pool_next = rt->pool;
		rt->pool = j;
		rt->n_pool++;
		rt->pool_bytes += held;
		j = NULL;
	}
	pthread_mutex_unlock(&rt->pool_mu);
	if (j != NULL) {
		sh_arena_fini(&j->arena);
		sh_free(j);
		sh_arena_released(sizeof(*j) + held);
	}
}

/* ------------------------------------------------------------------------ */
/* The answer                                                                */
/* ------------------------------------------------------------------------ */

/* ANSWER: the step is over with code (SHOAL_OK: j->out or j->out_msg holds
 * the answer; else j->errmsg says why). */
static void job_finish(rt_job *j, int code)
{
	rt_router *rt = j->rt;
	if (code != SHOAL_OK || (j->out == NULL && j->out_msg == NULL)) {
		if (code == SHOAL_OK)
			code = rt_job_fail(j, SHOAL_E_INTERNAL, "the operation produced no answer");
		if (code == SHOAL_E_INTERNAL || code == SHOAL_E_NOMEM)
			rt_log("%s failed: %s", rt_slot_name(j->slot), j->errmsg);
		if (j->out_msg != NULL) {
			nng_msg_free(j->out_msg);
			j->out_msg = NULL;
		}
		j->out = rt_error_response(&j->arena, code, j->errmsg);
		j->code = code;
	} else if (j->out_msg == NULL) {
		j->code = wire_code_from_status((int)j->out->status);
	}
	if (j->out_msg == NULL && j->out != NULL && j->in != NULL)
		j->out->request_id = j->in->request_id;
	rt_metrics_request(&rt->metrics, j->slot, j->code, sh_now_us() - j->t0_us);
	j->state = J_ANSWER;
	atomic_fetch_sub(&rt->busy, 1);
	j->done(j);
}

int rt_job_code(const rt_job *j)
{
	return j->code;
}

nng_msg *rt_job_answer_msg(rt_job *j)
{
	if (j->out_msg != NULL) {
		nng_msg *m = j->out_msg;
		j->out_msg = NULL;
		return m;
	}
	if (j->out == NULL)
		return NULL; /* out of memory building the error */
	size_t n = shoal__response__get_packed_size(j->out);
	nng_msg *m;
	if (nng_msg_alloc(&m, n) != 0)
		return NULL;
	shoal__response__pack(j->out, nng_msg_body(m));
	return m;
}

Shoal__Response *rt_job_answer_pb(rt_job *j)
{
	if (j->out_msg == NULL)
		return j->out;
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, &j->arena);
	char msg[SH_ERRMSG_SIZE];
	Shoal__Response *resp;
	if (wire_unpack_response(&alloc, nng_msg_body(j->out_msg), nng_msg_len(j->out_msg), &resp,
	                         msg) != SHOAL_OK) {
		rt_log("%s: a node's answer does not decode: %s", rt_slot_name(j->slot), msg);
		resp = rt_error_response(&j->arena, SHOAL_E_INTERNAL, msg);
	}
	nng_msg_free(j->out_msg);
	j->out_msg = NULL;
	j->out = resp;
	return resp;
}

int rt_job_pass(rt_job *j, rt_call *c)
{
	if (c->rc != SHOAL_OK)
		return rt_job_fail(j, c->rc, "%s", c->errmsg);
	if (!c->has_response)
		return rt_job_fail(j, SHOAL_E_INTERNAL,
		                   "node %u answered group %u without a response", c->answered_by,
		                   c->group);
	/* The Response's bytes, sliced out of the NodeResponse in place. */
	const uint8_t *p = nng_msg_body(c->ans), *end = p + nng_msg_len(c->ans), *data = NULL;
	size_t len = 0;
	if (!wire_batch_next(&p, end, j->rt->f.nresp_response, &data, &len))
		return rt_job_fail(j, SHOAL_E_INTERNAL, "node %u: no response in its answer",
		                   c->answered_by);
	size_t off = (size_t)(data - (const uint8_t *)nng_msg_body(c->ans));
	size_t total = nng_msg_len(c->ans);
	nng_msg *m = c->ans;
	c->ans = NULL;
	nng_msg_header_clear(m);
	nng_msg_chop(m, total - off - len);
	nng_msg_trim(m, off);
	j->out_msg = m;
	j->code = c->code;
	return SHOAL_OK;
}

int rt_job_forward0(rt_job *j, int checked)
{
	rt_call **c = (rt_call **)&j->st;
	if (j->phase != 0)
		return rt_job_pass(j, *c);
	if (checked != SHOAL_OK)
		return checked;
	if ((*c = rt_job_call(j, 0)) == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	int rc = rt_call_forward(j, *c, NULL, 0);
	if (rc != SHOAL_OK)
		return rc;
	j->phase = 1;
	return RT_WAIT;
}

bool rt_call_ok(rt_job *j, rt_call *c, Shoal__NodeResponse **resp, int *rc)
{
	*resp = NULL;
	if (c->rc != SHOAL_OK) {
		*rc = rt_job_fail(j, c->rc, "%s", c->errmsg);
		return false;
	}
	if (c->code != SHOAL_OK) {
		*rc = rt_job_pass(j, c); /* the node's refusal, as it is */
		return false;
	}
	if ((*resp = rt_call_resp(c, &j->arena)) == NULL) {
		*rc = rt_job_fail(j, c->rc, "%s", c->errmsg);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Calls of a step                                                           */
/* ------------------------------------------------------------------------ */

static void job_call_done(rt_call *c);

rt_call *rt_job_call(rt_job *j, uint32_t group)
{
	rt_call *c = sh_arena_calloc(&j->arena, 1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->rt = j->rt;
	c->job = j;
	c->done = job_call_done;
	c->group = group;
	c->all_next = j->all_calls;
	j->all_calls = c;
	if (j->calls_tail != NULL)
		j->calls_tail->next = c;
	else
		j->calls = c;
	j->calls_tail = c;
	return c;
}

int rt_job_request_bytes(rt_job *j)
{
	if (j->req_bytes != NULL)
		return SHOAL_OK;
	uint8_t *buf;
	size_t len;
	int rc = wire_pack(&j->arena, &j->in->base, &buf, &len, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	j->req_bytes = buf;
	j->req_len = len;
	return SHOAL_OK;
}

/* Appends a varint field / a length-delimited field header to c->hdr. */
static void hdr_varint(rt_call *c, uint32_t field, uint64_t v)
{
	c->hdr_len += wire_put_varint(c->hdr + c->hdr_len, (uint64_t)field << 3 | 0);
	c->hdr_len += wire_put_varint(c->hdr + c->hdr_len, v);
}

int rt_call_forward(rt_job *j, rt_call *c, const rt_table *t, uint32_t index_shard)
{
	int rc = rt_job_request_bytes(j);
	if (rc != SHOAL_OK)
		return rc;
	const rt_fields *f = &j->rt->f;
	/* NodeRequest{group, any_replica, index_shard, table_id} and the
	 * client's packed Request as field `request`: written by hand, since
	 * protobuf fields may come in any order (no re-encoding). */
	c->hdr_len = 0;
	if (c->group != 0)
		hdr_varint(c, f->nreq_group, c->group);
	if (c->any_replica)
		hdr_varint(c, f->nreq_any_replica, 1);
	if (index_shard != 0)
		hdr_varint(c, f->nreq_index_shard, index_shard);
	unsigned flags = j->slot < SHOAL_OP__COUNT ? wire_ops[j->slot].flags : 0;
	if ((flags & SHOAL_OPF_WRITE) && (flags & SHOAL_OPF_ITEM)) {
		c->hdr_len +=
		    wire_put_varint(c->hdr + c->hdr_len, (uint64_t)f->nreq_write_token << 3 | 2);
		c->hdr_len += wire_put_varint(c->hdr + c->hdr_len, 16);
		/* The client's token (the same on its resends), else ours. */
		if (j->in != NULL && j->in->client_token.len == 16)
			memcpy(c->hdr + c->hdr_len, j->in->client_token.data, 16);
		else
			rt_new_id(j->rt, c->hdr + c->hdr_len);
		c->hdr_len += 16;
		c->idempotent = true;
	}
	if (t != NULL) {
		hdr_varint(c, f->nreq_table_id, t->id);
		c->table_checked = true;
		c->tables = sh_arena_alloc(&j->arena, sizeof(*c->tables));
		if (c->tables == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		c->tables[0] = t;
		c->n_tables = 1;
	}
	c->hdr_len += wire_put_varint(c->hdr + c->hdr_len, (uint64_t)f->nreq_request << 3 | 2);
	c->hdr_len += wire_put_varint(c->hdr + c->hdr_len, j->req_len);
	c->body = j->req_bytes;
	c->body_len = j->req_len;
	return SHOAL_OK;
}

int rt_call_request(rt_job *j, rt_call *c, Shoal__NodeRequest *nr)
{
	nr->group = c->group;
	nr->any_replica = c->any_replica;
	uint8_t *buf;
	size_t len;
	int rc = wire_pack(&j->arena, &nr->base, &buf, &len, j->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	c->hdr_len = 0;
	c->body = buf;
	c->body_len = len;
	return SHOAL_OK;
}

int rt_job_sleep(rt_job *j, uint32_t ms)
{
	rt_call *c = rt_job_call(j, 0);
	if (c == NULL)
		return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
	c->sleep_ms = ms > 0 ? ms : 1;
	return RT_WAIT;
}

int rt_job_sleep_for_map(rt_job *j, uint32_t ms, uint64_t epoch)
{
	int rc = rt_job_sleep(j, ms);
	if (rc == RT_WAIT) {
		j->calls_tail->wake_on_map = true;
		j->calls_tail->wake_epoch = epoch;
	}
	return rc;
}

void rt_call_repairs(rt_call *c, const rt_table **tables, uint32_t n)
{
	c->tables = tables;
	c->n_tables = n;
}

/* ------------------------------------------------------------------------ */
/* The state machine                                                         */
/* ------------------------------------------------------------------------ */

static void job_step(rt_job *j);
static void job_resume(rt_job *j);
static void start_refresh(rt_job *j, int state);

/* WAIT: starts the wave (the step's calls), corked so that the calls for
 * one node leave in one message. */
static void job_launch(rt_job *j)
{
	uint32_t n = 0;
	for (rt_call *c = j->calls; c != NULL; c = c->next)
		n++;
	j->state = j->state == J_REPAIR_DEFINE ? J_REPAIR_DEFINE : J_WAIT;
	j->fresh = false;
	atomic_store(&j->pending, n + 1);
	wire_lanes_cork();
	for (rt_call *c = j->calls, *next; c != NULL; c = next) {
		next = c->next; /* c may be done (and resumed past) at once */
		if (c->deadline == 0 || c->deadline > j->deadline)
			c->deadline = j->deadline;
		rt_call_start(c);
	}
	wire_lanes_uncork();
	if (atomic_fetch_sub(&j->pending, 1) == 1)
		job_resume(j);
}

static void job_call_done(rt_call *c)
{
	rt_job *j = c->job;
	if (atomic_fetch_sub(&j->pending, 1) == 1)
		job_resume(j);
}

/* Forgets the step's progress: it runs again from phase 0. */
static void step_reset(rt_job *j)
{
	j->phase = 0;
	j->st = NULL;
	j->sub = NULL;
	shoal__response__init(j->out);
	if (j->out_msg != NULL) {
		nng_msg_free(j->out_msg);
		j->out_msg = NULL;
	}
	j->code = SHOAL_OK;
	j->errmsg[0] = '\0';
}

/* The code a finished step answers with (rc: what it returned). */
static int step_code(const rt_job *j, int rc)
{
	if (rc != SHOAL_OK)
		return rc;
	if (j->out_msg != NULL)
		return j->code; /* a node's Response passed on (rt_job_pass) */
	return j->out != NULL ? wire_code_from_status((int)j->out->status) : SHOAL_OK;
}

/* The step ended with a WRONG_GROUP (the file's header: "Wrong group"):
 * a pause, then the step from the start -- or ServiceUnavailable. */
static void wrong_group(rt_job *j)
{
	uint32_t wait = j->wrong_group_ms != 0 ? j->wrong_group_ms : RT_MOVED_MIN_MS;
	if (rt_now_ms() + wait >= j->deadline) {
		step_reset(j);
		job_finish(j, rt_job_fail(j, SHOAL_E_UNAVAILABLE,
		                          "Service unavailable: a partition of this request is "
		                          "moving between storage groups, and its new group was "
		                          "not known within the deadline (cluster map epoch %llu)",
		                          (unsigned long long)sh_place_epoch(j->rt->place)));
		return;
	}
	j->wrong_group_ms = wait * 2 < RT_MOVED_MAX_MS ? wait * 2 : RT_MOVED_MAX_MS;
	/* ... ended early by a map newer than the one the step was routed by
	 * (map.c): at once if it came meanwhile.  That map is the newest any
	 * of the job's calls went by (a pause's call has none). */
	uint64_t routed = 0;
	for (const rt_call *c = j->all_calls; c != NULL; c = c->all_next)
		if (c->epoch > routed)
			routed = c->epoch;
	if (routed == 0)
		routed = sh_place_epoch(j->rt->place);
	step_reset(j);
	j->calls = j->calls_tail = NULL;
	if (rt_job_sleep_for_map(j, wait, routed) != RT_WAIT) {
		job_finish(j, SHOAL_E_NOMEM);
		return;
	}
	job_launch(j); /* the pause's end: job_resume -> job_step, phase 0 */
}

/* STEP: runs the step until it waits or ends. */
static void job_step(rt_job *j)
{
	j->state = J_STEP;
	j->calls = j->calls_tail = NULL;
	j->want_refresh = false;
	int rc = j->step(j);
	if (rc != RT_WAIT) {
		if (step_code(j, rc) == SHOAL_E_WRONG_GROUP) {
			wrong_group(j);
			return;
		}
		job_finish(j, rc);
		return;
	}
	if (j->want_refresh) {
		start_refresh(j, J_REFRESH); /* rt_job_refreshed continues */
		return;
	}
	if (j->calls == NULL) {
		job_finish(j, rt_job_fail(j, SHOAL_E_INTERNAL, "%s waits for nothing (phase %d)",
		                          rt_slot_name(j->slot), j->phase));
		return;
	}
	job_launch(j);
}

/* Whether call c answered "this table is not here" for tables the job can
 * repair. */
static bool needs_repair(const rt_call *c)
{
	return c->rc == SHOAL_OK && c->code == SHOAL_E_NOT_FOUND && c->n_tables > 0 && !c->repaired;
}

/* The definitions of the tables of the calls to repair, re-sent to their
 * groups (after the catalog refresh): the define wave. */
static void repair_define(rt_job *j)
{
	if (j->refresh_rc != SHOAL_OK) {
		/* Cannot check the catalog now: the step sees the answers. */
		rt_log("repair: catalog refresh failed: %s", j->refresh_msg);
		for (rt_call *c = j->resend; c != NULL; c = c->resend_next)
			c->repaired = true;
		j->resend = NULL;
		job_step(j);
		return;
	}
	j->calls = j->calls_tail = NULL;
	for (rt_call *c = j->resend; c != NULL; c = c->resend_next) {
		c->repaired = true;
		for (uint32_t i = 0; i < c->n_tables; i++) {
			const rt_table *was = c->tables[i];
			const rt_table *now = rt_catalog_find(j->snap, was->name);
			if (now == NULL || now->id != was->id) {
				job_finish(
				    j,
				    rt_job_fail(j, SHOAL_E_NOT_FOUND,
				                "Requested resource not found: Table: %s not found",
				                was->name));
				return;
			}
			Shoal__NodeRequest *nr = sh_arena_alloc(&j->arena, sizeof(*nr));
			rt_call *d = rt_job_call(j, c->group);
			if (nr == NULL || d == NULL) {
				job_finish(j, rt_job_fail(j, SHOAL_E_NOMEM, "out of memory"));
				return;
			}
			shoal__node_request__init(nr);
			nr->define_table = (Shoal__TableDefine *)now->pb;
			int rc = rt_call_request(j, d, nr);
			if (rc != SHOAL_OK) {
				job_finish(j, rc);
				return;
			}
		}
	}
	j->state = J_REPAIR_DEFINE;
	job_launch(j);
}

/* After the define wave: the repaired calls go again (a fresh wave). */
static void repair_resend(rt_job *j)
{
	for (rt_call *d = j->calls; d != NULL; d = d->next) {
		int code = d->rc != SHOAL_OK ? d->rc : d->code;
		if (code == SHOAL_OK || code == SHOAL_E_IN_USE) {
			atomic_fetch_add(&j->rt->metrics.repairs, 1);
			rt_log("repaired a table definition in group %u", d->group);
		} else {
			rt_log("repairing a table definition in group %u failed: %s", d->group,
			       d->rc != SHOAL_OK ? d->errmsg : "refused");
		}
	}
	j->calls = j->calls_tail = NULL;
	for (rt_call *c = j->resend; c != NULL; c = c->resend_next) {
		rt_call_release(c);
		c->next = NULL;
		if (j->calls_tail != NULL)
			j->calls_tail->next = c;
		else
			j->calls = c;
		j->calls_tail = c;
	}
	j->resend = NULL;
	j->state = J_WAIT;
	job_launch(j);
}

/* Every call of the wave has finished. */
static void job_resume(rt_job *j)
{
	if (j->state == J_REPAIR_DEFINE) {
		repair_resend(j);
		return;
	}
	/* A table recreated under the request: refresh, run the step again. */
	for (rt_call *c = j->calls; c != NULL; c = c->next) {
		if (c->rc != SHOAL_OK || c->code != SHOAL_E_WRONG_EPOCH || !c->table_checked)
			continue;
		if (j->restarts > 0) {
			job_finish(j,
			           rt_job_fail(j, SHOAL_E_UNAVAILABLE,
			                       "Service unavailable: the table was recreated while "
			                       "this request was routed"));
			return;
		}
		j->restarts++;
		atomic_fetch_add(&j->rt->metrics.restarts, 1);
		step_reset(j);
		start_refresh(j, J_REFRESH);
		return;
	}
	/* A group that lost a table definition: repair it, send again. */
	j->resend = NULL;
	rt_call **tail = &j->resend;
	for (rt_call *c = j->calls; c != NULL; c = c->next)
		if (needs_repair(c)) {
			c->resend_next = NULL;
			*tail = c;
			tail = &c->resend_next;
		}
	if (j->resend != NULL) {
		start_refresh(j, J_REPAIR_REFRESH);
		return;
	}
	job_step(j);
}

int rt_job_refresh(rt_job *j)
{
	j->want_refresh = true; /* job_step starts it once the step has returned */
	return RT_WAIT;
}

/* REFRESH (or REPAIR_REFRESH): waits for the next catalog refresh.  The
 * last thing its caller does with j: the refresh may finish, and the job
 * go on, on another thread at once. */
static void start_refresh(rt_job *j, int state)
{
	j->state = state;
	j->want_refresh = false;
	rt_catalog_refresh_for(j->rt, j);
}

/* Keeps the newest snapshot referenced by the job (all of them stay
 * referenced until the job ends: steps may still point into older ones). */
static int hold_current(rt_job *j)
{
	rt_catalog_snap *s = rt_catalog_acquire(&j->rt->catalog);
	if (s == NULL)
		return SHOAL_OK;
	if (s == j->snap) {
		rt_catalog_release(s);
		return SHOAL_OK;
	}
	if (j->snap != NULL) {
		if (j->n_old >= sizeof(j->old_snaps) / sizeof(j->old_snaps[0])) {
			rt_catalog_release(s);
			return rt_job_fail(j, SHOAL_E_UNAVAILABLE,
			                   "Service unavailable: the catalog is changing too fast");
		}
		j->old_snaps[j->n_old++] = j->snap;
	}
	j->snap = s;
	return SHOAL_OK;
}

void rt_job_refreshed(rt_job *j, int rc, const char *msg)
{
	j->refresh_rc = rc;
	snprintf(j->refresh_msg, sizeof(j->refresh_msg), "%s", msg != NULL ? msg : "");
	if (rc == SHOAL_OK && hold_current(j) != SHOAL_OK) {
		j->refresh_rc = SHOAL_E_UNAVAILABLE;
		snprintf(j->refresh_msg, sizeof(j->refresh_msg), "%s", j->errmsg);
	}
	if (j->state == J_REPAIR_REFRESH) {
		repair_define(j);
		return;
	}
	j->fresh = true;
	job_step(j);
}

int rt_job_table(rt_job *j, const char *name, bool force, const rt_table **out)
{
	*out = NULL;
	int rc;
	if (j->fresh && j->refresh_rc != SHOAL_OK)
		return rt_job_fail(j, j->refresh_rc, "%s", j->refresh_msg);
	if (!force || j->fresh) {
		if ((rc = hold_current(j)) != SHOAL_OK)
			return rc;
		if ((*out = rt_catalog_find(j->snap, name)) != NULL)
			return SHOAL_OK;
		if (j->fresh)
			return rt_job_fail(j, SHOAL_E_NOT_FOUND,
			                   "Requested resource not found: Table: %s not found",
			                   name != NULL ? name : "");
	}
	return rt_job_refresh(j);
}

/* ------------------------------------------------------------------------ */
/* The front door                                                            */
/* ------------------------------------------------------------------------ */

void rt_job_start(rt_job *j, nng_msg *msg, const Shoal__Request *in, int64_t t0_us,
                  int64_t deadline, rt_job_done_fn done, void *done_arg)
{
	rt_router *rt = j->rt;
	atomic_fetch_add(&rt->busy, 1);
	j->msg = msg;
	j->in = in;
	j->t0_us = t0_us;
	j->deadline = deadline;
	j->done = done;
	j->done_arg = done_arg;
	j->slot = SHOAL_OP__COUNT;
	j->state = J_NEW;
	j->out = sh_arena_alloc(&j->arena, sizeof(*j->out));
	if (j->out == NULL) {
		job_finish(j, rt_job_fail(j, SHOAL_E_NOMEM, "out of memory"));
		return;
	}
	shoal__response__init(j->out);
	if (msg != NULL) {
		ProtobufCAllocator alloc;
		wire_arena_allocator(&alloc, &j->arena);
		Shoal__Request *req;
		int rc = wire_unpack_request(&alloc, nng_msg_body(msg), nng_msg_len(msg), &req,
		                             j->errmsg);
		if (rc != SHOAL_OK) {
			job_finish(j, rc);
			return;
		}
		j->in = req;
		j->req_bytes = nng_msg_body(msg);
		j->req_len = nng_msg_len(msg);
	}
	in = j->in;
	shoal_op op = wire_op_of(in->op_case);
	j->slot = op;
	if (in->n_batch > 0) { /* a batch reaches here only as a member (server.c) */
		job_finish(j,
		           rt_job_fail(j, SHOAL_E_VALIDATION, "%s",
		                       in->op_case == SHOAL__REQUEST__OP__NOT_SET
		                           ? "A request of a Request batch cannot be a batch itself"
		                           : "A Request batch carries nothing but its requests"));
		return;
	}
	if (op >= SHOAL_OP__COUNT) {
		job_finish(
		    j, rt_job_fail(j, SHOAL_E_UNKNOWN_OPERATION, "The request names no operation"));
		return;
	}
	/* Authorization, for both ports: the principal was set by the front
	 * door that verified the signature (server.c, http.c). */
	int rc = rt_auth_authorize(rt, &j->who, in, j->errmsg);
	if (rc != SHOAL_OK) {
		job_finish(j, rc);
		return;
	}
	j->step = steps[op];
	job_step(j);
}

/* ------------------------------------------------------------------------ */
/* A blocking front door (tests, tools)                                      */
/* ------------------------------------------------------------------------ */

typedef struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
} waiter;

static void wake(rt_job *j)
{
	waiter *w = j->done_arg;
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int rt_handle(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, uint8_t **out,
              size_t *out_len)
{
	rt_job *j = rt_job_get(rt);
	nng_msg *msg;
	if (j == NULL)
		return SHOAL_E_NOMEM;
	if (nng_msg_alloc(&msg, len) != 0) {
		rt_job_put(j);
		return SHOAL_E_NOMEM;
	}
	memcpy(nng_msg_body(msg), buf, len);
	waiter w = {.done = false};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	int64_t now = sh_now_us();
	rt_job_start(j, msg, NULL, now, now / 1000 + rt->opt.deadline_ms, wake, &w);
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	nng_msg *ans = rt_job_answer_msg(j);
	int rc = SHOAL_E_NOMEM;
	if (ans != NULL && (*out = sh_arena_alloc(a, nng_msg_len(ans) + 1)) != NULL) {
		memcpy(*out, nng_msg_body(ans), nng_msg_len(ans));
		*out_len = nng_msg_len(ans);
		rc = SHOAL_OK;
	}
	if (ans != NULL)
		nng_msg_free(ans);
	rt_job_put(j);
	return rc;
}
