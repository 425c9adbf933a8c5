/*
 * index_ddl.c -- changes to a table's indexes: UpdateTable (group 0),
 * activation of a built GSI (group 0) and redefinition (data groups).
 *
 * Index ids are never reused: the table record carries next_index_id
 * (catalog_codec.c); a GSI created by UpdateTable takes it and raises it.  A
 * deleted GSI disappears from the definition at once (DynamoDB shows it
 * DELETING for a while; Shoal has nothing to wait for: data groups drop its
 * entries when they learn the new definition, and deltas still in flight are
 * dropped by st_index_apply because the id is below next_index_id).
 *
 * Lifecycle of a GSI added to a table with data:
 *
 *   st_table_update (group 0)       -> CREATING, id = next_index_id++
 *   st_table_redefine (each group)  -> state "backfill not done", cursor empty
 *   st_backfill_step (each group)   -> upserts of existing items, cursor moves,
 *                                      done: backfill_seq = outbox last_seq
 *   (node: every group done and shipped past backfill_seq)
 *   st_index_activate (group 0)     -> ACTIVE, then redefine in each group
 */
#include <string.h>

#include "index_int.h"

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

static int nomem(char *errmsg, const char *what)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "%s: out of memory", what);
}

/* The table's record as it stands, to be rewritten: the transaction's
 * pending counter changes are written first, so the rewrite keeps them. */
static int load_for_rewrite(st_txn *txn, const char *name, sh_arena *a, st_table_info *t,
                            char *errmsg)
{
	int rc = st_txn_catalog_flush(txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return st_table_load(txn->txn, txn->env, name, a, t, errmsg);
}

/* Writes the record of def (validated, normalised) with counters. */
static int put_record(st_txn *txn, const st_table_def *def, uint64_t items, uint64_t bytes,
                      sh_arena *a, char *errmsg)
{
	uint8_t *rec;
	size_t len;
	if (st_catalog_encode(a, def, items, bytes, &rec, &len) != SHOAL_OK)
		return nomem(errmsg, "catalog");
	MDB_val k = {strlen(def->name), (void *)def->name}, v = {len, rec};
	int mrc = mdb_put(txn->txn, txn->env->catalog, &k, &v, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(catalog)", errmsg);
	return SHOAL_OK;
}

static const st_key_attr *find_attr(const st_key_attr *attrs, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (attrs[i].name != NULL && strcmp(attrs[i].name, name) == 0)
			return &attrs[i];
	return NULL;
}

static bool ks_uses(const st_key_schema *ks, const char *name)
{
	return strcmp(ks->hash.name, name) == 0 ||
	       (ks->range.name != NULL && strcmp(ks->range.name, name) == 0);
}

static bool def_uses(const st_table_def *d, const char *name)
{
	if (ks_uses(&d->key, name))
		return true;
	for (uint32_t i = 0; i < d->n_indexes; i++)
		if (ks_uses(&d->indexes[i].key, name))
			return true;
	return false;
}

/* ------------------------------------------------------------------------ */
/* UpdateTable (group 0)                                                     */
/* ------------------------------------------------------------------------ */

/* A new stream replaces the latest (disabled) one of d: that one becomes
 * the newest past stream; past streams whose records are all past the
 * retention (ended more than retention_ms before now_ms), and the oldest
 * beyond ST_STREAM_PAST_MAX, are forgotten. */
static void retire_stream(st_stream_spec *s, int64_t now_ms, int64_t retention_ms)
{
	st_past_stream keep[ST_STREAM_PAST_MAX];
	uint32_t n = 0;
	keep[n++] = (st_past_stream){s->label_ms, s->changed_ms, s->view};
	for (uint32_t i = 0; i < s->n_past && n < ST_STREAM_PAST_MAX; i++)
		if (s->past[i].ended_ms >= now_ms - retention_ms)
			keep[n++] = s->past[i];
	memcpy(s->past, keep, n * sizeof(keep[0]));
	s->n_past = n;
}

/* UpdateTable's StreamSpecification on d: enabling creates a new stream
 * (its label is now_ms, kept increasing; the one it replaces stays
 * readable: retire_stream), disabling ends the current one; both need the
 * other state (DynamoDB's rule). */
static int updated_stream(const st_table_def *old, const st_table_update_req *req, int64_t now_ms,
                          int64_t retention_ms, st_table_def *d, char *errmsg)
{
	if (req->stream.enabled && old->stream.enabled)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Table already has an enabled stream: TableName: %s", old->name);
	if (!req->stream.enabled && !old->stream.enabled)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Table does not have an enabled stream: TableName: %s", old->name);
	int64_t t = now_ms;
	if (t <= old->stream.label_ms)
		t = old->stream.label_ms + 1;
	if (t <= old->stream.changed_ms)
		t = old->stream.changed_ms + 1;
	if (req->stream.enabled && old->stream.label_ms != 0)
		retire_stream(&d->stream, now_ms, retention_ms);
	d->stream.enabled = req->stream.enabled;
	d->stream.changed_ms = t;
	if (req->stream.enabled) {
		d->stream.view = req->stream.view;
		d->stream.label_ms = t;
	}
	return SHOAL_OK;
}

/* The table's definition with req applied, validated; SHOAL_E_VALIDATION,
 * SHOAL_E_NOT_FOUND or SHOAL_E_NOMEM. */
/* UpdateTimeToLive on d (a copy of old), with DynamoDB's refusals: the
 * request that would change nothing first (its wording is the more
 * useful), then a change within interval_ms of the previous one (0: no
 * limit; old->ttl_ms 0: never changed). */
static int ttl_change(const st_table_def *old, const st_table_update_req *req, int64_t now_ms,
                      int64_t interval_ms, st_table_def *d, char *errmsg)
{
	if (req->ttl_enabled && old->ttl_attr != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TimeToLive is already enabled");
	if (!req->ttl_enabled && old->ttl_attr == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TimeToLive is already disabled");
	if (!req->ttl_enabled &&
	    (req->ttl_attr == NULL || strcmp(req->ttl_attr, old->ttl_attr) != 0))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TimeToLive is active on a different AttributeName: current "
		               "AttributeName is %s",
		               old->ttl_attr);
	if (interval_ms > 0 && old->ttl_ms != 0 && now_ms - old->ttl_ms < interval_ms)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Time to live has been modified multiple times within a fixed "
		               "interval");
	d->ttl_attr = req->ttl_enabled ? req->ttl_attr : NULL;
	d->ttl_ms = now_ms;
	return SHOAL_OK;
}

static int updated_def(const st_table_def *old, const st_table_update_req *req, int64_t now_ms,
                       const st_env *env, sh_arena *a, st_table_def *d, bool *cap_changed,
                       char *errmsg)
{
	*d = *old;
	if (req->n_create + req->n_drop > 1)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "One or more parameter values were invalid: Cannot perform more than "
		    "one GSI creation or deletion in a single update");
	uint32_t cap = old->n_indexes + req->n_create;
	d->indexes = sh_arena_calloc(a, cap + 1, sizeof(*d->indexes));
	if (d->indexes == NULL)
		return nomem(errmsg, "UpdateTable");
	d->n_indexes = 0;
	for (uint32_t i = 0; i < old->n_indexes; i++) {
		const st_index_def *x = &old->indexes[i];
		bool dropped = false;
		for (uint32_t j = 0; j < req->n_drop; j++)
			dropped = dropped || (!x->local && strcmp(req->drop[j], x->name) == 0);
		if (!dropped)
			d->indexes[d->n_indexes++] = *x;
	}
	for (uint32_t j = 0; j < req->n_drop; j++)
		if (req->drop[j] == NULL || st_table_index(old, req->drop[j]) == NULL)
			return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
			               "Requested resource not found: Index: %s not found",
			               req->drop[j]);
	for (uint32_t j = 0; j < req->n_drop; j++) {
		const st_index_def *x = st_table_index(old, req->drop[j]);
		if (x != NULL && x->local)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Local secondary "
			               "index %s cannot be deleted",
			               x->name);
	}

	/* AttributeDefinitions: the table's (those still used), then the
	 * request's; a name defined twice must keep its type. */
	d->attrs = sh_arena_calloc(a, old->n_attrs + req->n_attrs + 1, sizeof(*d->attrs));
	if (d->attrs == NULL)
		return nomem(errmsg, "UpdateTable");
	d->n_attrs = 0;
	for (uint32_t i = 0; i < old->n_attrs; i++)
		if (def_uses(d, old->attrs[i].name))
			d->attrs[d->n_attrs++] = old->attrs[i];
	for (uint32_t i = 0; i < req->n_attrs; i++) {
		const st_key_attr *r = &req->attrs[i];
		if (r->name == NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "1 validation error detected: Value null at "
			               "'attributeDefinitions.%u.member.attributeName' failed to "
			               "satisfy constraint: Member must not be null",
			               i + 1);
		const st_key_attr *have = find_attr(d->attrs, d->n_attrs, r->name);
		if (have != NULL && have->type != r->type)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "One or more parameter values were invalid: Cannot change the "
			    "type of attribute %s from %s to %s",
			    r->name, st_type_name(have->type), st_type_name(r->type));
		if (have == NULL)
			d->attrs[d->n_attrs++] = *r;
	}

	for (uint32_t j = 0; j < req->n_create; j++) {
		const st_index_def *c = &req->create[j];
		if (c->name != NULL && st_table_index(old, c->name) != NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Index already "
			               "exists");
		if (c->key.hash.name != NULL &&
		    find_attr(d->attrs, d->n_attrs, c->key.hash.name) == NULL)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "One or more parameter values were invalid: Global Secondary "
			    "Index hash key not specified in Attribute Definitions.Type "
			    "unknown.");
		if (c->key.range.name != NULL &&
		    find_attr(d->attrs, d->n_attrs, c->key.range.name) == NULL)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "One or more parameter values were invalid: Global Secondary "
			    "Index range key not specified in Attribute Definitions.Type "
			    "unknown.");
		st_index_def *x = &d->indexes[d->n_indexes++];
		*x = *c;
		x->local = false;
		x->status = ST_INDEX_CREATING;
		if (x->write_shards == 0)
			x->write_shards = 1;
		if (d->next_index_id > UINT16_MAX)
			return sh_errf(errmsg, SHOAL_E_LIMIT_EXCEEDED,
			               "Index ids of table %s are exhausted", old->name);
		x->id = (uint16_t)d->next_index_id++;
	}
	int rc = st_catalog_update_capacity(old, req, now_ms, d, cap_changed, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (req->set_deletion_protection)
		d->deletion_protection = req->deletion_protection;
	if (req->set_table_class && req->table_class != old->table_class) {
		d->table_class = req->table_class;
		d->class_changed_ms = now_ms;
	}
	if (req->n_tag_set + req->n_tag_remove > 0 &&
	    (rc = st_tags_change(old->tags, old->n_tags, req->tag_set, req->n_tag_set,
	                         req->tag_remove, req->n_tag_remove, a, &d->tags, &d->n_tags,
	                         errmsg)) != SHOAL_OK)
		return rc;
	if (req->set_stream && (rc = updated_stream(old, req, now_ms, env->stream_retention_ms, d,
	                                            errmsg)) != SHOAL_OK)
		return rc;
	if (req->set_ttl &&
	    (rc = ttl_change(old, req, now_ms, env->ttl_change_interval_ms, d, errmsg)) != SHOAL_OK)
		return rc;
	rc = st_catalog_check_def(d, a, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_table_def n;
	if (st_catalog_normalise_def(d, a, &n) != SHOAL_OK)
		return nomem(errmsg, "UpdateTable");
	*d = n;
	return SHOAL_OK;
}

int st_table_update(st_txn *txn, const st_table_update_req *req, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	st_table_def d;
	bool cap_changed = false;
	int rc = load_for_rewrite(txn, req->name, &a, &t, errmsg);
	if (rc == SHOAL_OK)
		rc = updated_def(&t.def, req, st_txn_time(txn), txn->env, &a, &d, &cap_changed,
		                 errmsg);
	/* A GSI's backfill never overlaps a move of the table's partitions
	 * (st_cluster_map_moving): creating one waits until none moves. */
	bool moving = false;
	if (rc == SHOAL_OK && req->n_create > 0)
		rc = st_cluster_map_moving(txn, t.def.id, &moving, errmsg);
	if (rc == SHOAL_OK && moving)
		rc = sh_errf(errmsg, SHOAL_E_IN_USE,
		             "Attempt to change a resource which is still in use: a partition of "
		             "table %s is moving to another storage group; create the index once "
		             "the move is done (shoal status shows it)",
		             req->name);
	bool meta = req->set_deletion_protection || req->set_table_class ||
	            req->n_tag_set + req->n_tag_remove > 0 || req->set_stream || req->set_ttl;
	if (rc == SHOAL_OK &&
	    (req->n_create + req->n_drop + req->n_attrs > 0 || cap_changed || meta))
		rc = put_record(txn, &d, t.item_count, t.size_bytes, &a, errmsg);
	sh_arena_fini(&a);
	if (rc != SHOAL_OK && env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

int st_index_activate(st_txn *txn, const char *table, const char *index, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	int rc = load_for_rewrite(txn, table, &a, &t, errmsg);
	const st_index_def *x = rc == SHOAL_OK ? st_table_index(&t.def, index) : NULL;
	if (rc == SHOAL_OK && x == NULL)
		rc = sh_errf(errmsg, SHOAL_E_NOT_FOUND,
		             "Requested resource not found: Index: %s not found", index);
	if (rc == SHOAL_OK && x->status != ST_INDEX_ACTIVE) {
		((st_index_def *)x)->status = ST_INDEX_ACTIVE;
		rc = put_record(txn, &t.def, t.item_count, t.size_bytes, &a, errmsg);
	}
	sh_arena_fini(&a);
	if (rc != SHOAL_OK && env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Redefinition (data groups)                                                */
/* ------------------------------------------------------------------------ */

static const st_index_def *by_id(const st_table_def *t, uint16_t id)
{
	for (uint32_t i = 0; i < t->n_indexes; i++)
		if (t->indexes[i].id == id)
			return &t->indexes[i];
	return NULL;
}

/* Deletes the entries (and state) of every index id stored under the table
 * that d does not define and that lies below its next_index_id. */
static int drop_unknown(st_txn *txn, const st_table_def *d, char *errmsg)
{
	uint32_t id = 1;
	while (id <= UINT16_MAX) {
		st_key k;
		st_key_table(&k, d->id, (uint16_t)id);
		MDB_cursor *c;
		int mrc = mdb_cursor_open(txn->txn, txn->env->data, &c);
		if (mrc != 0)
			return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
		MDB_val mk = {k.len, k.b}, mv;
		mrc = mdb_cursor_get(c, &mk, &mv, MDB_SET_RANGE);
		uint32_t found = 0;
		bool more = mrc == 0 && mk.mv_size >= 6 && memcmp(mk.mv_data, k.b, 4) == 0;
		if (more)
			found = st_get_be16((const uint8_t *)mk.mv_data + 4);
		mdb_cursor_close(c);
		if (mrc != 0 && mrc != MDB_NOTFOUND)
			return st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
		if (!more)
			break;
		if (found < d->next_index_id && by_id(d, (uint16_t)found) == NULL) {
			int rc = st_ix_drop_index(txn, d->id, (uint16_t)found, errmsg);
			if (rc != SHOAL_OK)
				return rc;
		}
		id = found + 1;
	}
	return SHOAL_OK;
}

/* d's billing mode, throughput and their history replaced by those of
 * `newer` (table and each GSI of the same id). */
static void keep_capacity(st_table_def *d, const st_table_def *newer)
{
	d->billing = newer->billing;
	d->tp = newer->tp;
	d->last_increase_ms = newer->last_increase_ms;
	d->last_decrease_ms = newer->last_decrease_ms;
	d->decreases_today = newer->decreases_today;
	d->decreases_day = newer->decreases_day;
	d->billing_changed_ms = newer->billing_changed_ms;
	d->capacity_ms = newer->capacity_ms;
	for (uint32_t i = 0; i < d->n_indexes; i++) {
		st_index_def *x = &d->indexes[i];
		const st_index_def *y = by_id(newer, x->id);
		if (y == NULL || x->local)
			continue;
		x->tp = y->tp;
		x->last_increase_ms = y->last_increase_ms;
		x->last_decrease_ms = y->last_decrease_ms;
		x->decreases_today = y->decreases_today;
		x->decreases_day = y->decreases_day;
	}
}

int st_table_redefine(st_txn *txn, const st_table_def *def, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
	sh_arena a;
	sh_arena_init(&a);
	st_table_info t;
	st_table_def d;
	int rc = load_for_rewrite(txn, def->name, &a, &t, errmsg);
	if (rc == SHOAL_OK && (t.def.id != def->id || t.def.created_ms != def->created_ms))
		rc = sh_errf(errmsg, SHOAL_E_IN_USE,
		             "Table %s exists with another id or creation time (id %u, not %u)",
		             def->name, t.def.id, def->id);
	if (rc == SHOAL_OK)
		rc = st_catalog_check_def(def, &a, errmsg);
	if (rc == SHOAL_OK && st_catalog_normalise_def(def, &a, &d) != SHOAL_OK)
		rc = nomem(errmsg, "st_table_redefine");
	if (rc != SHOAL_OK)
		goto out;
	d.id = t.def.id;
	if (t.def.capacity_ms > d.capacity_ms) /* an older define: keep our capacity */
		keep_capacity(&d, &t.def);
	if (t.def.stream.changed_ms > d.stream.changed_ms) /* ... and our stream */
		d.stream = t.def.stream;
	if (t.def.ttl_ms > d.ttl_ms) { /* ... and our TTL setting */
		d.ttl_attr = t.def.ttl_attr;
		d.ttl_ms = t.def.ttl_ms;
	}
	if (t.def.next_index_id > d.next_index_id)
		d.next_index_id = t.def.next_index_id;
	for (uint32_t i = 0; i < t.def.n_indexes; i++)
		if (t.def.indexes[i].id >= d.next_index_id)
			d.next_index_id = (uint32_t)t.def.indexes[i].id + 1;

	/* From here on the transaction changes. */
	rc = drop_unknown(txn, &d, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < t.def.n_indexes; i++) {
		const st_index_def *x = &t.def.indexes[i];
		if (by_id(&d, x->id) == NULL) /* entries below next: gone already; state */
			rc = st_ix_drop_index(txn, d.id, x->id, errmsg);
	}
	for (uint32_t i = 0; rc == SHOAL_OK && i < d.n_indexes; i++) {
		const st_index_def *x = &d.indexes[i];
		if (x->local || by_id(&t.def, x->id) != NULL)
			continue;
		st_ix_state s;
		rc = st_ix_state_get(txn->txn, txn->env, d.id, x->id, &s, errmsg);
		if (rc == SHOAL_OK) {
			s.backfill_done = false;
			s.backfill_seq = 0;
			s.cursor_len = 0;
			rc = st_ix_state_put(txn, d.id, x->id, &s, errmsg);
		}
	}
	if (rc == SHOAL_OK)
		rc = put_record(txn, &d, t.item_count, t.size_bytes, &a, errmsg);
out:
	sh_arena_fini(&a);
	if (rc != SHOAL_OK && env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}
