/*
 * ttl.c -- Time to Live: each group's leader deletes the expired items of
 * its tables (DynamoDB's TTL service).
 *
 * What is expired is decided in one place, st_ttl_expired (storage/ttl.c):
 * the item's TTL attribute (the table's definition names it, in every data
 * group: router/ttl.c) is a Number of epoch seconds in the past, and not
 * more than five years in the past.
 *
 * Per group, driven by its leader on the loop thread:
 *
 *   1. A pass walks the group's tables in name order; for a table with TTL
 *      enabled, a step reads at most TTL_STEP_ITEMS items of it (st_scan
 *      from a cursor: the table's name, the hash range being read and the
 *      last key read), so a large table never holds the loop for long.  It
 *      reads the table's hash ranges that the cluster map places in this
 *      group, one at a time (a partition moved away leaves a range that
 *      the storage refuses to scan for good: storage/parts.h).
 *   2. The expired items the step found (by the leader's clock) are deleted
 *      through Raft, at most TTL_INFLIGHT at once: a CommandOp.delete with
 *      ttl_expire, which every replica applies only if the item is expired
 *      at the entry's time (Command.ts_ms, the proposer's clock) by the
 *      table's setting then (st_delete_req.ttl).  An update that moved the
 *      TTL into the future before the delete applied wins; every replica
 *      decides alike from the entry alone.  The delete is an ordinary one
 *      otherwise: LSIs change in the same transaction, GSIs through the
 *      outbox.
 *   3. Pacing: the deletes draw on a token bucket (capacity.h's cap_bucket)
 *      refilled at [cluster] ttl_share percent of the write capacity of the
 *      partition being expired (capacity.h's cap_share: the table's
 *      provisioned or on-demand maximum write units over its partitions, at
 *      most partition_wcu, which is also the share of a PAY_PER_REQUEST
 *      table without a maximum), each delete taking its write units (1 per
 *      KB of the item, rounded up).  The bucket is the group's: its rate
 *      follows the table the pass is in.  An empty bucket pauses the pass
 *      where it is.  The
 *      delete's units are also charged to the table's partition like any
 *      write (node_fsm_charge_write), so they show in its consumption.
 *   4. When the last table is done the pass is counted and the next begins
 *      [cluster] ttl_scan_ms later.  A new leader starts a pass afresh.
 *
 * State per group (tt_group.state):
 *
 *   state   event                                 next    function
 *   ------  ------------------------------------  ------  ------------
 *   IDLE    leading, next_ns passed, tokens left  IDLE    step (no delete)
 *   IDLE    ... expired items found               BUSY    step -> submit
 *   BUSY    every delete answered                 IDLE    deleted_cb
 *   any     leadership lost                       IDLE    group_tick
 *           (cursor cleared: the pass restarts)
 *
 * Metrics, per group: shoal_ttl_expired_total (items deleted by TTL),
 * shoal_ttl_passes_total (passes over every table), shoal_ttl_skipped_total
 * (deletes refused at apply: the item changed or TTL was disabled).
 *
 * Expired items that are not deleted yet are still read, queried and
 * scanned, as in DynamoDB.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "node/capacity.h"
#include "node/node.h"
#include "proto/wire.h"

/* Items read per step, deletes in flight per group, and the pause between
 * two steps of a pass (keeps the loop responsive on a table with no
 * expired items). */
#define TTL_STEP_ITEMS    100
#define TTL_INFLIGHT      16
#define TTL_STEP_GAP_MS   5
#define TTL_EMPTY_WAIT_MS 50   /* an empty bucket: look again after */
#define TTL_SKIP_PARTS    1024 /* partitions served elsewhere passed over per step */

typedef enum tt_state { TT_IDLE, TT_BUSY } tt_state;

typedef struct tt_group tt_group;

typedef struct tt_del {
	node_waiter w;
	tt_group *tg;
	Shoal__DeleteItemRequest req;
} tt_del;

struct tt_group {
	node_ttl *t;
	node_group *g;
	uint32_t gid;
	tt_state state;
	uint64_t term;
	uint64_t next_ns;
	uint32_t in_flight;
	/* The cursor: the table being read ("" before the first), the first
	 * hash of the range being read in it (the hashes below are done), the
	 * last key read in that range (NULL: from its start; in ar[cur]), and
	 * whether the table is done (the next step lists the tables after
	 * it). */
	char table[ST_TABLE_NAME_MAX * 4 + 1];
	uint64_t lo;
	st_value *key;
	bool done;
	sh_arena ar[2];
	int cur;
	sh_arena step_a; /* the deletes in flight */
	cap_bucket bucket;
	tt_del del[TTL_INFLIGHT];
	uint32_t n_init;
	atomic_uint_fast64_t expired, passes, skipped;
	struct tt_group *retired_next; /* node_ttl.retired */
};

struct node_ttl {
	node *n;
	uint32_t ms;
	double share;    /* ttl_share as a fraction */
	double part_wcu; /* the partition write limit */
	bool closing;
	tt_group **groups; /* [sh_cluster_group_cap(conf)]; NULL where not hosted */
	double rate;       /* a new group's bucket rate, until a table says */
	/* Groups closed or reopened since (the map moved a replica): kept until
	 * node_ttl_free, since their deletes in flight point at them. */
	tt_group *retired;
};

/* ------------------------------------------------------------------------ */
/* Deletes                                                                   */
/* ------------------------------------------------------------------------ */

static void deleted_cb(node_waiter *w)
{
	tt_del *d = w->data;
	tt_group *tg = d->tg;
	bool ok = false;
	if (w->code == SHOAL_OK && w->resp != NULL) {
		Shoal__NodeResponse *r = NULL;
		if (wire_unpack_node_response(NULL, w->resp, w->resp_len, &r, NULL) == SHOAL_OK &&
		    r != NULL) {
			ok = r->response != NULL && r->response->status == 0;
			shoal__node_response__free_unpacked(r, wire_heap_allocator());
		}
	}
	sh_free(w->resp);
	w->resp = NULL;
	atomic_fetch_add(ok ? &tg->expired : &tg->skipped, 1);
	if (--tg->in_flight == 0) {
		tg->state = TT_IDLE;
		sh_arena_reset(&tg->step_a);
	}
}

/* Item's primary key (key schema ks) in a; NULL when out of memory. */
static st_value *key_of(sh_arena *a, const st_key_schema *ks, const st_value *item)
{
	st_value *key = st_new_map(a, 2);
	const st_value *h = st_map_get(item, ks->hash.name, strlen(ks->hash.name));
	const st_value *r = ks->range.name != NULL
	                        ? st_map_get(item, ks->range.name, strlen(ks->range.name))
	                        : NULL;
	if (key == NULL || h == NULL || (ks->range.name != NULL && r == NULL))
		return NULL;
	if (st_map_set(a, key, ks->hash.name, strlen(ks->hash.name), h) != SHOAL_OK ||
	    (r != NULL &&
	     st_map_set(a, key, ks->range.name, strlen(ks->range.name), r) != SHOAL_OK))
		return NULL;
	return key;
}

/* Proposes the TTL delete of `item`'s key (key schema ks) in `table`.
 * False when it could not be queued. */
static bool submit(tt_group *tg, const char *table, const st_key_schema *ks, const st_value *item)
{
	tt_del *d = &tg->del[tg->in_flight];
	sh_arena *a = &tg->step_a;
	st_value *key = key_of(a, ks, item);
	char msg[SH_ERRMSG_SIZE];
	shoal__delete_item_request__init(&d->req);
	char *name = sh_arena_memdup(a, table, strlen(table) + 1);
	if (key == NULL || name == NULL || wire_item_to_pb(a, key, &d->req.key, msg) != SHOAL_OK)
		return false;
	WIRE_SET(&d->req, table_name, name);
	node_waiter *w = &d->w;
	w->kind = NODE_WAIT_WRITE;
	w->op = (Shoal__CommandOp)SHOAL__COMMAND_OP__INIT;
	w->op.op_case = SHOAL__COMMAND_OP__OP_DELETE;
	w->op.delete_ = &d->req;
	w->op.ttl_expire = true;
	w->size = 64 + strlen(table) + st_item_size(key);
	w->cb = deleted_cb;
	w->data = d;
	d->tg = tg;
	if (node_group_submit(tg->g, w, msg) != SHOAL_OK)
		return false;
	tg->in_flight++;
	tg->state = TT_BUSY;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Steps of a pass                                                           */
/* ------------------------------------------------------------------------ */

/* The cursor moves to `key` (NULL: the start of the range from hash lo) of
 * `table`; done: past the table's end. */
static void set_cursor(tt_group *tg, const char *table, uint64_t lo, const st_value *key, bool done)
{
	sh_arena *a = &tg->ar[!tg->cur];
	sh_arena_reset(a);
	st_value *copy = NULL;
	if (key != NULL) {
		copy = sh_arena_alloc(a, sizeof(*copy));
		if (copy == NULL || st_value_copy(a, key, copy) != SHOAL_OK)
			copy = NULL; /* out of memory: this table again from its start */
	}
	tg->cur = !tg->cur;
	tg->lo = lo;
	tg->key = copy;
	tg->done = done;
	if (table != tg->table)
		snprintf(tg->table, sizeof(tg->table), "%s", table);
}

static void pass_done(tt_group *tg, uint64_t now)
{
	atomic_fetch_add(&tg->passes, 1);
	set_cursor(tg, "", 0, NULL, false);
	tg->next_ns = now + (uint64_t)tg->t->ms * 1000000u;
}

/* The next table of the group with TTL enabled from the cursor's (itself
 * included when the cursor is inside it): *def in a, or false when none is
 * left in this pass. */
static bool table_at_cursor(tt_group *tg, sh_arena *a, st_table_info *info)
{
	st_env *env = node_group_env(tg->g);
	char msg[SH_ERRMSG_SIZE];
	if (tg->table[0] != '\0' && !tg->done &&
	    st_table_describe(env, tg->table, a, info, msg) == SHOAL_OK &&
	    info->def.ttl_attr != NULL)
		return true;
	const char *start = tg->table[0] != '\0' ? tg->table : NULL;
	for (;;) {
		const char **names, *last;
		uint32_t n;
		if (st_table_list(env, start, 100, a, &names, &n, &last, msg) != SHOAL_OK)
			return false;
		for (uint32_t i = 0; i < n; i++)
			if (st_table_describe(env, names[i], a, info, msg) == SHOAL_OK &&
			    info->def.ttl_attr != NULL) {
				set_cursor(tg, names[i], 0, NULL, false);
				return true;
			}
		if (last == NULL)
			return false;
		start = last;
	}
}

/* The rate expiry may use in table d's partition (units per second). */
static double table_rate(const node_ttl *t, const st_table_def *d)
{
	cap_limits l = {
	    .table_rate =
	        (double)(d->billing == ST_BILLING_PROVISIONED ? d->tp.wcu : d->tp.max_wcu),
	    .frac = 1.0 / sh_cluster_partitions(t->n->conf),
	    .held = 1,
	    .part_max = t->part_wcu,
	    .others = -1};
	return cap_share(&l) * t->share;
}

/* One step: read up to TTL_STEP_ITEMS items from the cursor and propose the
 * deletes of the expired ones the bucket pays for. */
static void step(tt_group *tg, uint64_t now)
{
	int64_t wall = node_wall_ms();
	cap_bucket_refill(&tg->bucket, wall);
	if (!cap_bucket_admit(&tg->bucket, wall)) {
		tg->next_ns = now + (uint64_t)TTL_EMPTY_WAIT_MS * 1000000u;
		return;
	}
	sh_arena a;
	sh_arena_init(&a);
	st_table_info info;
	if (!table_at_cursor(tg, &a, &info)) {
		pass_done(tg, now);
		goto out;
	}
	double rate = table_rate(tg->t, &info.def);
	if (rate != tg->bucket.rate)
		cap_bucket_set(&tg->bucket, rate, rate, wall);
	if (!cap_bucket_admit(&tg->bucket, wall)) {
		tg->next_ns = now + (uint64_t)TTL_EMPTY_WAIT_MS * 1000000u;
		goto out;
	}
	/* The table's ranges that the map places in this group, one at a time:
	 * a scan of the whole table is refused once a range of it has moved
	 * away (its AWAY record, storage/parts.h), so a pass reads only what is
	 * served here.  A range the storage refuses anyway -- fenced for a
	 * move, or moved away before this node's map says so -- is passed over
	 * in this pass; a range moved in before the map says so, in the next. */
	node *n = tg->t->n;
	sh_place_part part;
	for (uint32_t skips = 0;; skips++) {
		sh_place_part_of(n->place, n->conf, info.def.id, tg->lo, &part);
		if (part.group == tg->gid && !(tg->lo == 0 && part.hi == 0))
			break; /* ([0, 0] cannot be asked for: 0 and 0 is the whole table) */
		if (part.hi == UINT64_MAX) {
			set_cursor(tg, info.def.name, 0, NULL, true); /* the table is done */
			tg->next_ns = now + (uint64_t)TTL_STEP_GAP_MS * 1000000u;
			goto out;
		}
		set_cursor(tg, info.def.name, part.hi + 1, NULL, false);
		if (skips == TTL_SKIP_PARTS) {
			tg->next_ns = now + (uint64_t)TTL_STEP_GAP_MS * 1000000u;
			goto out;
		}
	}
	char msg[SH_ERRMSG_SIZE];
	st_scan_req req = {.table = info.def.name,
	                   .limit = TTL_STEP_ITEMS,
	                   .exclusive_start_key = tg->key,
	                   .hash_lo = tg->lo,
	                   .hash_hi = part.hi};
	st_page page;
	int rc = st_scan(node_group_env(tg->g), &req, &a, &page, msg);
	if (rc == SHOAL_E_VALIDATION && tg->key != NULL) {
		/* The range was split below the cursor's key: read it again from
		 * its start (deleting is idempotent). */
		set_cursor(tg, info.def.name, tg->lo, NULL, false);
		tg->next_ns = now + (uint64_t)TTL_STEP_GAP_MS * 1000000u;
		goto out;
	}
	if (rc != SHOAL_OK) {
		if (rc != SHOAL_E_WRONG_GROUP)
			node_logf(NODE_LOG_WARN, "ttl: group %u: scanning %s: %s", tg->gid,
			          info.def.name, msg);
		if (rc == SHOAL_E_WRONG_GROUP && part.hi != UINT64_MAX)
			set_cursor(tg, info.def.name, part.hi + 1, NULL,
			           false); /* the next range */
		else
			set_cursor(tg, info.def.name, 0, NULL, true); /* the next table */
		tg->next_ns = now + (uint64_t)TTL_EMPTY_WAIT_MS * 1000000u;
		goto out;
	}
	const st_value *resume = page.last_evaluated_key;
	bool stopped = false;
	uint64_t gap_ms = TTL_STEP_GAP_MS;
	for (uint32_t i = 0; i < page.count; i++) {
		const st_value *item = &page.items[i];
		if (!st_ttl_item_expired(item, info.def.ttl_attr, wall))
			continue;
		bool room = tg->in_flight < TTL_INFLIGHT && cap_bucket_admit(&tg->bucket, wall);
		if (!room || !submit(tg, info.def.name, &info.def.key, item)) {
			/* Resume at this item: after the one before it. */
			stopped = true;
			resume = i > 0 ? key_of(&a, &info.def.key, &page.items[i - 1]) : tg->key;
			if (!room && tg->in_flight == 0)
				gap_ms = TTL_EMPTY_WAIT_MS;
			break;
		}
		cap_bucket_take(&tg->bucket, ceil((double)st_item_size(item) / 1024.0), wall);
	}
	if (!stopped && resume == NULL) {
		if (part.hi == UINT64_MAX)
			set_cursor(tg, info.def.name, 0, NULL, true); /* the table is done */
		else
			set_cursor(tg, info.def.name, part.hi + 1, NULL,
			           false); /* the next range */
	} else if (resume != tg->key) {
		set_cursor(tg, info.def.name, tg->lo, resume, false);
	} else if (tg->in_flight == 0) {
		gap_ms = TTL_EMPTY_WAIT_MS; /* no progress possible now */
	}
	tg->next_ns = now + gap_ms * 1000000u;
out:
	sh_arena_fini(&a);
}

static void group_tick(tt_group *tg, uint64_t now)
{
	uint64_t term = 0;
	bool leading = node_group_leading(tg->g, &term) &&
	               node_fsm_failed(node_group_fsm(tg->g), NULL) == SHOAL_OK;
	if (tg->state == TT_BUSY)
		return; /* deleted_cb ends it */
	if (!leading || term != tg->term) {
		tg->term = term;
		if (tg->table[0] != '\0' || tg->key != NULL)
			set_cursor(tg, "", 0, NULL, false); /* a later leadership starts afresh */
		if (!leading)
			return;
	}
	if (now >= tg->next_ns)
		step(tg, now);
}

/* ------------------------------------------------------------------------ */
/* The expirer                                                               */
/* ------------------------------------------------------------------------ */

/* Group 0 holds items only when it is the only group. */
static bool tt_holds_items(node *n, uint32_t g)
{
	return g > 0 || n->conf->groups == 1;
}

static void tg_free(tt_group *tg)
{
	if (tg == NULL)
		return;
	for (uint32_t i = 0; i < tg->n_init; i++)
		node_waiter_fini(&tg->del[i].w);
	sh_arena_fini(&tg->ar[0]);
	sh_arena_fini(&tg->ar[1]);
	sh_arena_fini(&tg->step_a);
	sh_free(tg);
}

static tt_group *tg_new(node_ttl *t, node_group *grp, uint32_t g)
{
	tt_group *tg = sh_calloc(1, sizeof(*tg));
	if (tg == NULL)
		return NULL;
	tg->t = t;
	tg->g = grp;
	tg->gid = g;
	sh_arena_init(&tg->ar[0]);
	sh_arena_init(&tg->ar[1]);
	sh_arena_init(&tg->step_a);
	cap_bucket_init(&tg->bucket, t->rate, t->rate, node_wall_ms());
	for (; tg->n_init < TTL_INFLIGHT; tg->n_init++)
		if (node_waiter_init(&tg->del[tg->n_init].w) != SHOAL_OK) {
			tg_free(tg);
			return NULL;
		}
	return tg;
}

/* The groups hosted here follow the cluster map (issue 14): a group opened
 * since gets an expirer, one closed or reopened has its own retired. */
static void follow_groups(node_ttl *t)
{
	for (uint32_t g = 0; g < sh_cluster_group_cap(t->n->conf); g++) {
		node_group *grp = tt_holds_items(t->n, g) ? node_group_get(t->n, g) : NULL;
		tt_group *tg = t->groups[g];
		if (tg != NULL && tg->g == grp)
			continue;
		if (tg != NULL) {
			tg->retired_next = t->retired;
			t->retired = tg;
			t->groups[g] = NULL;
		}
		if (grp != NULL)
			t->groups[g] = tg_new(t, grp, g); /* NULL: tried again next tick */
	}
}

void node_ttl_tick(node_ttl *t)
{
	if (t == NULL || t->closing)
		return;
	uint64_t now = node_now_ns();
	follow_groups(t);
	for (uint32_t g = 0; g < sh_cluster_group_cap(t->n->conf); g++)
		if (t->groups[g] != NULL)
			group_tick(t->groups[g], now);
}

int node_ttl_open(node *n, node_ttl **out, char *errmsg)
{
	*out = NULL;
	const sh_cluster_conf *conf = n->conf;
	uint32_t ms = conf->ttl_scan_set ? conf->ttl_scan_ms : SH_TTL_SCAN_MS;
	if (ms == 0)
		return SHOAL_OK;
	node_ttl *t = sh_calloc(1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "ttl: out of memory");
	t->n = n;
	t->ms = ms;
	t->groups = sh_calloc(sh_cluster_group_cap(conf), sizeof(*t->groups));
	if (t->groups == NULL)
		goto nomem;
	t->part_wcu = (double)(conf->partition_wcu != 0 ? conf->partition_wcu : SH_PARTITION_WCU);
	t->share = (conf->ttl_share != 0 ? conf->ttl_share : SH_TTL_SHARE) / 100.0;
	t->rate = t->part_wcu * t->share; /* until the first table says otherwise */
	for (uint32_t g = 0; g < sh_cluster_group_cap(conf); g++) {
		node_group *grp = node_group_get(n, g);
		if (grp != NULL && tt_holds_items(n, g) &&
		    (t->groups[g] = tg_new(t, grp, g)) == NULL)
			goto nomem;
	}
	*out = t;
	return SHOAL_OK;
nomem:
	node_ttl_free(t);
	return sh_errf(errmsg, SHOAL_E_NOMEM, "ttl: out of memory");
}

void node_ttl_close(node_ttl *t)
{
	if (t != NULL)
		t->closing = true;
}

void node_ttl_free(node_ttl *t)
{
	if (t == NULL)
		return;
	for (uint32_t g = 0; t->groups != NULL && g < sh_cluster_group_cap(t->n->conf); g++)
		tg_free(t->groups[g]);
	while (t->retired != NULL) {
		tt_group *tg = t->retired;
		t->retired = tg->retired_next;
		tg_free(tg);
	}
	sh_free(t->groups);
	sh_free(t);
}

void node_ttl_metrics(node_ttl *t, node_appendf_fn appendf, void *buf)
{
	if (t == NULL)
		return;
	static const char *const names[][2] = {
	    {"shoal_ttl_expired_total", "Items deleted by Time to Live (this node led)"},
	    {"shoal_ttl_passes_total", "Time to Live passes over a group's tables"},
	    {"shoal_ttl_skipped_total",
	     "Time to Live deletes refused at apply (item changed, or TTL disabled)"},
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		appendf(buf, "# HELP %s %s\n# TYPE %s counter\n", names[k][0], names[k][1],
		        names[k][0]);
		for (uint32_t g = 0; g < sh_cluster_group_cap(t->n->conf); g++) {
			tt_group *tg = t->groups[g];
			if (tg == NULL)
				continue;
			atomic_uint_fast64_t *c[] = {&tg->expired, &tg->passes, &tg->skipped};
			appendf(buf, "%s{group=\"%u\"} %" PRIu64 "\n", names[k][0], g,
			        (uint64_t)atomic_load(c[k]));
		}
	}
}
