/*
 * write.c -- PutItem, UpdateItem, DeleteItem (and a transaction's
 * ConditionCheck) inside an st_txn.
 *
 * Every operation is planned, then applied (st_plan_* then st_plan_apply;
 * st_put / st_update / st_delete do both).  Planning writes nothing:
 *
 * 1. Validation, in DynamoDB's order: expression
 *    parameters without expressions; the request's item/key and placeholder
 *    values, copied into the caller's arena and normalised (the request is
 *    const); ReturnValues; PutItem's item size; the expressions (parsed with
 *    one st_expr_ctx, then unused placeholders); the table (ResourceNotFound);
 *    the key against the key schema; PutItem's index key types; an
 *    UpdateExpression that targets a key attribute.  Any failure here is a
 *    client error and leaves the transaction exactly as it was.
 *
 * 2. The item: a transaction in progress on it (a lock, txn.c) is a
 *    TransactionConflictException; read the old image, evaluate the
 *    condition on it (an absent item is NULL, so attribute_not_exists(PK)
 *    holds), compute the new image (UpdateItem: st_expr_update; the size
 *    limit and index key types are checked on the result), plan the index
 *    changes (index_write.c: LSI entries, the item collection limit, GSI
 *    outbox deltas).
 *
 * Partition moves (parts.c): before the item's turn, a key whose hash lies
 * in a range being handed to another group (FENCED) or handed over (AWAY)
 * is refused with SHOAL_E_WRONG_GROUP -- the whole request's error, so a
 * transaction is refused as a whole and the router sends it again.
 *
 * Applying writes the item, the index changes, the table's stream record
 * (stream.c, when it has an enabled stream), the move-log record (parts.c,
 * when the key lies in a range being moved out) and the table's counters
 * (item count, size bytes) in the same LMDB transaction.  A partition
 * move's own writes (st_plan_raw, txn->part_raw) take the same path for
 * the item, its LSI entries and the counters, without the GSI deltas, the
 * stream record, the move log and the fence check.  A transaction
 * (txn.c) plans all of its actions before it applies any, so that one
 * failing action leaves nothing written.
 *
 * The result is a function of (old state, request) only: no clocks, no
 * randomness, so every replica that applies the same Raft entry computes the
 * same bytes.
 *
 * Errors: client errors (validation, condition failed, not found) return
 * without touching the transaction.  Environmental errors (NOMEM, IO, FULL,
 * INTERNAL: allocation, LMDB, a corrupt record) poison it with st_txn_poison,
 * whether or not anything was written yet: the caller must abort, and every
 * later call on the transaction returns the same error.
 *
 * Memory: everything, results included, is allocated in the caller's arena.
 */
#include <assert.h>
#include <string.h>

#include "codec.h"
#include "engine.h"
#include "expr.h"
#include "index_int.h"
#include "parts.h"
#include "stream.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

/* Returns rc, poisoning txn first if rc is environmental. */
static int fail(st_txn *txn, int rc, char *errmsg)
{
	if (env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

static int nomem(char *errmsg, const char *op)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "%s: out of memory", op);
}

int st_return_values_parse(const char *s)
{
	static const struct {
		const char *name;
		st_return_values value;
	} names[] = {
	    {"NONE", ST_RV_NONE},
	    {"ALL_OLD", ST_RV_ALL_OLD},
	    {"UPDATED_OLD", ST_RV_UPDATED_OLD},
	    {"ALL_NEW", ST_RV_ALL_NEW},
	    {"UPDATED_NEW", ST_RV_UPDATED_NEW},
	};
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return (int)names[i].value;
	return -1;
}

/* "ExpressionAttributeNames can only be specified when using expressions",
 * DynamoDB's check of placeholders sent without any expression. */
static int check_expr_params(const st_expr_attrs *attrs, bool has_expr, const char *exprs_null,
                             char *errmsg)
{
	if (has_expr)
		return SHOAL_OK;
	if (attrs->names != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeNames can only be specified when using "
		               "expressions");
	if (attrs->values != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeValues can only be specified when using "
		               "expressions: %s",
		               exprs_null);
	return SHOAL_OK;
}

/* A normalised copy in a of a client map (an Item or a Key). */
static int copy_map(sh_arena *a, const st_value *in, const char *field, st_value **out,
                    char *errmsg)
{
	*out = NULL;
	if (in == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at '%s' failed to satisfy "
		               "constraint: Member must not be null",
		               field);
	if (in->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s must be a map of attributes", field);
	st_value *v = sh_arena_alloc(a, sizeof(*v));
	if (v == NULL || st_value_copy(a, in, v) != SHOAL_OK)
		return nomem(errmsg, "write");
	int rc = st_value_normalize(a, v, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*out = v;
	return SHOAL_OK;
}

static int check_rv_old_or_none(st_return_values rv, char *errmsg)
{
	if (rv != ST_RV_NONE && rv != ST_RV_ALL_OLD)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ReturnValues can only be ALL_OLD or NONE");
	return SHOAL_OK;
}

static int parse_opt(st_expr_ctx *ctx, st_expr_kind kind, const char *text, st_expr **out,
                     char *errmsg)
{
	*out = NULL;
	if (text == NULL)
		return SHOAL_OK;
	return st_expr_parse(ctx, kind, text, out, errmsg);
}

/*
 * The key attributes may not be targets of an UpdateExpression (SET, REMOVE,
 * ADD, DELETE), though they may be read ("SET copy = PK").  st_expr_refs_attr
 * also counts reads, so a name it reports is confirmed with
 * st_expr_update_project on the key itself: the key attributes that the
 * update's target paths select.
 */
static int check_update_keys(const st_key_schema *ks, const st_expr *upd, const st_value *key,
                             sh_arena *a, char *errmsg)
{
	if (upd == NULL)
		return SHOAL_OK;
	const char *names[2] = {ks->hash.name, ks->range.name};
	st_value *targets = NULL;
	for (int i = 0; i < 2; i++) {
		if (names[i] == NULL || !st_expr_refs_attr(upd, names[i], strlen(names[i])))
			continue;
		if (targets == NULL) {
			int rc = st_expr_update_project(upd, a, key, &targets, errmsg);
			if (rc != SHOAL_OK)
				return rc;
		}
		if (targets != NULL && st_map_get(targets, names[i], strlen(names[i])) != NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "One or more parameter values were invalid: Cannot update "
			               "attribute %s. This attribute is part of the key",
			               names[i]);
	}
	return SHOAL_OK;
}

/*
 * The key attributes of the table's indexes, where an item has them, must
 * have the type of their AttributeDefinition and, for S and B, be non-empty
 * (DynamoDB checks this even while an index is being built).
 */
static int check_index_keys(const st_table_def *t, const st_value *item, char *errmsg)
{
	for (uint32_t i = 0; i < t->n_indexes; i++) {
		const st_index_def *x = &t->indexes[i];
		const st_key_attr *ka[2] = {&x->key.hash, &x->key.range};
		for (int j = 0; j < 2; j++) {
			if (ka[j]->name == NULL)
				continue;
			const st_value *v = st_map_get(item, ka[j]->name, strlen(ka[j]->name));
			if (v == NULL)
				continue;
			if (v->type != ka[j]->type)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               "One or more parameter values were invalid: Type "
				               "mismatch for Index Key %s Expected: %s Actual: %s "
				               "IndexName: %s",
				               ka[j]->name, st_type_name(ka[j]->type),
				               st_type_name(v->type), x->name);
			if (v->type != ST_N && v->u.str.len == 0)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "One or more parameter values are not valid. A value "
				    "specified for a secondary index key is not supported. "
				    "The AttributeValue for a key attribute cannot contain an "
				    "empty %s value. IndexName: %s, IndexKey: %s",
				    v->type == ST_S ? "string" : "binary", x->name, ka[j]->name);
			/* Index keys have the table's key limits (DynamoDB: 2048 bytes
			 * for a partition key, 1024 for a sort key).  The message is
			 * modelled on the table key's; DynamoDB's own text for index
			 * keys is not documented. */
			size_t limit = j == 0 ? 2048 : 1024;
			if (v->type != ST_N && v->u.str.len > limit)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "One or more parameter values were invalid: Size of %s "
				    "has exceeded the maximum size limit of %zu bytes. "
				    "IndexName: %s, IndexKey: %s",
				    j == 0 ? "hashkey" : "rangekey", limit, x->name, ka[j]->name);
		}
	}
	return SHOAL_OK;
}

/* Reserves disk for writing (or deleting) an item of item_bytes in table t:
 * the item and, per index, an LSI entry or up to two GSI deltas (an entry
 * that moves), each on pages that may be half empty. */
static int reserve_item(st_txn *txn, const st_table_info *t, size_t item_bytes, char *errmsg)
{
	uint64_t copies = 1 + 2 * (uint64_t)t->def.n_indexes;
	/* A stream record holds up to two images (callers pass the larger of
	 * the old and new sizes then) and its append trims old records. */
	if (t->def.stream.enabled)
		copies += 2 + ST_STREAM_TRIM_PER_APPEND;
	return st_txn_reserve(txn, copies * (2 * (uint64_t)item_bytes + ST_RESERVE_PER_KEY),
	                      errmsg);
}

static int sticky(const st_txn *txn, char *errmsg)
{
	return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
}

/* UPDATED_OLD / UPDATED_NEW: the updated paths of item, NULL if none. */
static int updated_part(const st_expr *upd, sh_arena *a, const st_value *item, st_value **out,
                        char *errmsg)
{
	*out = NULL;
	if (upd == NULL || item == NULL)
		return SHOAL_OK;
	st_value *part;
	int rc = st_expr_update_project(upd, a, item, &part, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (part != NULL && part->u.map.n > 0)
		*out = part;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum plan_kind { PLAN_PUT, PLAN_UPDATE, PLAN_DELETE, PLAN_CHECK } plan_kind;

struct st_write_plan {
	plan_kind kind;
	st_table_info t;
	st_key k;
	st_value *old_item; /* the current image (NULL: none) */
	st_value *new_item; /* PUT / UPDATE: the new image */
	bool writes;        /* something to write (not a no-op update, an absent delete) */
	st_ix_plan *ix;     /* the index changes (tables with LSIs: also without a write) */
	const st_value *pk; /* the partition key value (ReturnItemCollectionMetrics) */
	st_value *key;      /* DELETE / CHECK: the key asked for */
	const st_expr *upd; /* UPDATE: for UPDATED_OLD / UPDATED_NEW */
	st_return_values rv;
	bool by_ttl; /* DELETE by the Time to Live service (its stream record says so) */
};

/* The item collection's key and size, for ReturnItemCollectionMetrics. */
static void plan_collection(const st_write_plan *p, st_write_result *res)
{
	if (p->kind != PLAN_CHECK && st_ix_plan_collection(p->ix, &res->coll_attr, &res->coll_size))
		res->coll_pk = p->pk;
}

void st_plan_sizes(const st_write_plan *p, st_write_result *res)
{
	plan_collection(p, res);
	if (!p->writes)
		return;
	st_ix_plan_writes(p->ix, &res->index_writes, &res->n_index_writes);
	res->old_size = p->old_item != NULL ? st_item_size(p->old_item) : 0;
	res->new_size =
	    p->kind == PLAN_PUT || p->kind == PLAN_UPDATE ? st_item_size(p->new_item) : 0;
}

const st_key *st_plan_key(const st_write_plan *p)
{
	return &p->k;
}

const char *st_plan_table(const st_write_plan *p)
{
	return p->t.def.name;
}

/* The placement hash of an item key (bytes 6..13, keyenc.c). */
static uint64_t key_hash(const st_key *k)
{
	return st_get_be64(k->b + 6);
}

void st_plan_place(const st_write_plan *p, uint32_t *table, uint64_t *hash)
{
	*table = p->t.def.id;
	*hash = key_hash(&p->k);
}

/* The item's turn: its range served here (else the request's error), no
 * transaction in progress on it, its old image, the condition on it. */
static int read_and_check(st_txn *txn, st_write_plan *p, const st_expr *cond, bool return_old,
                          sh_arena *a, st_write_result *res, char *errmsg)
{
	int rc = st_part_check(txn, p->t.def.id, key_hash(&p->k), errmsg);
	if (rc != SHOAL_OK)
		return rc;
	res->item_stage = true;
	rc = st_lock_check(txn, &p->k, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_item_read(txn->txn, txn->env, &p->k, a, &p->old_item, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (cond == NULL)
		return SHOAL_OK;
	bool ok = false;
	rc = st_expr_eval(cond, p->old_item, &ok, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (!ok) {
		if (return_old && p->old_item != NULL)
			res->old_item = p->old_item;
		return sh_errf(errmsg, SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	}
	return SHOAL_OK;
}

static bool has_lsi(const st_table_def *d)
{
	for (uint32_t i = 0; i < d->n_indexes; i++)
		if (d->indexes[i].local)
			return true;
	return false;
}

/* A new plan in a (*out), its result cleared. */
static int plan_new(st_txn *txn, plan_kind kind, sh_arena *a, st_write_plan **out,
                    st_write_result *res, char *errmsg)
{
	*res = (st_write_result){0};
	*out = NULL;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_write_plan *p = sh_arena_calloc(a, 1, sizeof(*p));
	if (p == NULL)
		return fail(txn, nomem(errmsg, "write plan"), errmsg);
	p->kind = kind;
	*out = p;
	return SHOAL_OK;
}

int st_plan_put(st_txn *txn, const st_put_req *req, sh_arena *a, st_write_plan **out,
                st_write_result *res, char *errmsg)
{
	st_write_plan *p;
	int rc = plan_new(txn, PLAN_PUT, a, out, res, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	p = *out;
	rc = check_expr_params(&req->attrs, req->condition != NULL, "ConditionExpression is null",
	                       errmsg);
	st_value *item;
	if (rc == SHOAL_OK)
		rc = copy_map(a, req->item, "item", &item, errmsg);
	if (rc == SHOAL_OK)
		rc = check_rv_old_or_none(req->return_values, errmsg);
	if (rc == SHOAL_OK && st_item_size(item) > ST_MAX_ITEM_SIZE)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "Item size has exceeded the maximum allowed size");
	st_expr_ctx ctx;
	st_expr *cond = NULL;
	if (rc == SHOAL_OK)
		rc = st_expr_attrs_prepare(&ctx, a, &req->attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_CONDITION, req->condition, &cond, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_table(txn, req->table, &p->t, errmsg);
	const st_value *pk, *sk;
	if (rc == SHOAL_OK)
		rc = st_key_check(&p->t.def.key, item, ST_KEYCHECK_ITEM, &pk, &sk, errmsg);
	if (rc == SHOAL_OK)
		rc = check_index_keys(&p->t.def, item, errmsg);
	if (rc == SHOAL_OK) {
		st_key_item(&p->k, p->t.def.id, 0, pk, sk);
		rc =
		    read_and_check(txn, p, cond, req->return_old_on_condition_fail, a, res, errmsg);
	}
	if (rc == SHOAL_OK)
		rc = st_ix_plan_write(txn, &p->t, p->old_item, item, a, &p->ix, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	p->pk = pk;
	p->new_item = item;
	p->writes = true;
	p->rv = req->return_values;
	return SHOAL_OK;
}

int st_plan_update(st_txn *txn, const st_update_req *req, sh_arena *a, st_write_plan **out,
                   st_write_result *res, char *errmsg)
{
	st_write_plan *p;
	int rc = plan_new(txn, PLAN_UPDATE, a, out, res, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	p = *out;
	rc = check_expr_params(&req->attrs, req->update != NULL || req->condition != NULL,
	                       "UpdateExpression and ConditionExpression are null", errmsg);
	st_value *key;
	if (rc == SHOAL_OK)
		rc = copy_map(a, req->key, "key", &key, errmsg);
	if (rc == SHOAL_OK && (unsigned)req->return_values > ST_RV_UPDATED_NEW)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "1 validation error detected: Value '%d' at 'returnValues' failed to "
		             "satisfy constraint: Member must satisfy enum value set: [ALL_NEW, "
		             "UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]",
		             (int)req->return_values);
	st_expr_ctx ctx;
	st_expr *upd = NULL, *cond = NULL;
	if (rc == SHOAL_OK)
		rc = st_expr_attrs_prepare(&ctx, a, &req->attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_UPDATE, req->update, &upd, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_CONDITION, req->condition, &cond, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_table(txn, req->table, &p->t, errmsg);
	const st_value *pk, *sk;
	if (rc == SHOAL_OK)
		rc = st_key_check(&p->t.def.key, key, ST_KEYCHECK_KEY, &pk, &sk, errmsg);
	if (rc == SHOAL_OK)
		rc = check_update_keys(&p->t.def.key, upd, key, a, errmsg);
	if (rc == SHOAL_OK) {
		st_key_item(&p->k, p->t.def.id, 0, pk, sk);
		rc =
		    read_and_check(txn, p, cond, req->return_old_on_condition_fail, a, res, errmsg);
	}
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);

	/* The new image: the update applied to the old item, or to the key
	 * alone when there is none; without an UpdateExpression, the old item
	 * as it is or the key-only item. */
	st_value *new_item;
	if (upd != NULL)
		rc = st_expr_update(upd, a, p->old_item, key, &new_item, errmsg);
	else
		new_item = p->old_item != NULL ? p->old_item : key;
	if (rc == SHOAL_OK && st_item_size(new_item) > ST_MAX_ITEM_SIZE)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "Item size to update has exceeded the maximum allowed size");
	if (rc == SHOAL_OK)
		rc = check_index_keys(&p->t.def, new_item, errmsg);
	p->writes = new_item != p->old_item;
	/* Without a write, a table with LSIs still plans: nothing changes but
	 * the plan carries the item collection's size. */
	if (rc == SHOAL_OK && (p->writes || has_lsi(&p->t.def)))
		rc = st_ix_plan_write(txn, &p->t, p->old_item, new_item, a, &p->ix, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	p->pk = pk;
	p->new_item = new_item;
	p->upd = upd;
	p->rv = req->return_values;
	return SHOAL_OK;
}

/* DeleteItem and ConditionCheck: the key, the condition, the old image. */
static int plan_keyed(st_txn *txn, st_write_plan *p, const char *table, const st_value *req_key,
                      const char *condition, const st_expr_attrs *attrs, bool return_old,
                      sh_arena *a, st_write_result *res, char *errmsg)
{
	st_value *key;
	int rc = copy_map(a, req_key, "key", &key, errmsg);
	st_expr_ctx ctx;
	st_expr *cond = NULL;
	if (rc == SHOAL_OK)
		rc = st_expr_attrs_prepare(&ctx, a, attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_CONDITION, condition, &cond, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK)
		rc = st_txn_table(txn, table, &p->t, errmsg);
	const st_value *pk, *sk;
	if (rc == SHOAL_OK)
		rc = st_key_check(&p->t.def.key, key, ST_KEYCHECK_KEY, &pk, &sk, errmsg);
	if (rc == SHOAL_OK) {
		st_key_item(&p->k, p->t.def.id, 0, pk, sk);
		p->key = key;
		p->pk = pk;
		rc = read_and_check(txn, p, cond, return_old, a, res, errmsg);
	}
	return rc;
}

int st_plan_delete(st_txn *txn, const st_delete_req *req, sh_arena *a, st_write_plan **out,
                   st_write_result *res, char *errmsg)
{
	st_write_plan *p;
	int rc = plan_new(txn, PLAN_DELETE, a, out, res, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	p = *out;
	rc = check_expr_params(&req->attrs, req->condition != NULL, "ConditionExpression is null",
	                       errmsg);
	if (rc == SHOAL_OK)
		rc = check_rv_old_or_none(req->return_values, errmsg);
	if (rc == SHOAL_OK)
		rc = plan_keyed(txn, p, req->table, req->key, req->condition, &req->attrs,
		                req->return_old_on_condition_fail, a, res, errmsg);
	/* The TTL service's delete: the item must be expired now, by the
	 * table's setting now (an update that moved the TTL, or TTL disabled
	 * since the scan, wins). */
	if (rc == SHOAL_OK && req->ttl &&
	    !st_ttl_item_expired(p->old_item, p->t.def.ttl_attr, st_txn_time(txn)))
		rc = sh_errf(errmsg, SHOAL_E_CONDITION_FAILED, "The conditional request failed");
	p->by_ttl = req->ttl;
	p->writes = rc == SHOAL_OK && p->old_item != NULL;
	if (rc == SHOAL_OK && p->writes)
		rc = st_ix_plan_write(txn, &p->t, p->old_item, NULL, a, &p->ix, errmsg);
	else if (rc == SHOAL_OK && has_lsi(&p->t.def)) /* no item: the key sizes nothing */
		rc = st_ix_plan_write(txn, &p->t, p->key, p->key, a, &p->ix, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	p->rv = req->return_values;
	return SHOAL_OK;
}

int st_plan_check(st_txn *txn, const st_check_req *req, sh_arena *a, st_write_plan **out,
                  st_write_result *res, char *errmsg)
{
	st_write_plan *p;
	int rc = plan_new(txn, PLAN_CHECK, a, out, res, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	p = *out;
	if (req->condition == NULL)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
		             "1 validation error detected: Value null at "
		             "'conditionExpression' failed to satisfy constraint: Member must "
		             "not be null");
	if (rc == SHOAL_OK)
		rc = plan_keyed(txn, p, req->table, req->key, req->condition, &req->attrs,
		                req->return_old_on_condition_fail, a, res, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	return SHOAL_OK;
}

int st_plan_raw(st_txn *txn, const st_table_info *t, const st_key *k, st_value *new_item,
                sh_arena *a, st_write_plan **out, char *errmsg)
{
	assert(txn->part_raw);
	st_write_result res;
	st_write_plan *p;
	int rc = plan_new(txn, new_item != NULL ? PLAN_PUT : PLAN_DELETE, a, out, &res, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	p = *out;
	p->t = *t;
	p->k = *k;
	rc = st_item_read(txn->txn, txn->env, &p->k, a, &p->old_item, errmsg);
	p->new_item = new_item;
	p->writes = new_item != NULL || p->old_item != NULL;
	if (rc == SHOAL_OK && p->writes)
		rc = st_ix_plan_write(txn, &p->t, p->old_item, new_item, a, &p->ix, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Applying a plan                                                           */
/* ------------------------------------------------------------------------ */

/* Stores the plan's new image with its index changes and counters. */
static int store_item(st_txn *txn, const st_write_plan *p, sh_arena *a, char *errmsg)
{
	size_t size = st_item_size(p->new_item);
	if (p->t.def.stream.enabled && p->old_item != NULL && st_item_size(p->old_item) > size)
		size = st_item_size(p->old_item);
	int rc = reserve_item(txn, &p->t, size, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	uint8_t *buf;
	size_t len;
	if (st_codec_encode(a, p->new_item, &buf, &len) != SHOAL_OK)
		return nomem(errmsg, "st_codec_encode");
	MDB_val kv = {p->k.len, (void *)p->k.b}, vv = {len, buf};
	int mrc = mdb_put(txn->txn, txn->env->data, &kv, &vv, 0);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_put(data)", errmsg);
	rc = st_ix_plan_apply(txn, p->ix, errmsg);
	if (rc == SHOAL_OK && !txn->part_raw)
		rc = st_stream_append(txn, &p->t.def, &p->k, p->old_item, p->new_item, false, a,
		                      errmsg);
	if (rc == SHOAL_OK && !txn->part_raw)
		rc = st_part_log(txn, p->t.def.id, key_hash(&p->k), p->k.b, p->k.len, buf, len,
		                 errmsg);
	if (rc != SHOAL_OK)
		return rc;
	int64_t bytes = (int64_t)st_item_size(p->new_item);
	if (p->old_item != NULL)
		bytes -= (int64_t)st_item_size(p->old_item);
	return st_table_count(txn, p->t.def.name, p->old_item == NULL ? 1 : 0, bytes, errmsg);
}

/* Deletes the plan's item with its index changes and counters. */
static int delete_item(st_txn *txn, const st_write_plan *p, sh_arena *a, char *errmsg)
{
	int rc = reserve_item(txn, &p->t, st_item_size(p->old_item), errmsg);
	MDB_val kv = {p->k.len, (void *)p->k.b};
	int mrc = rc == SHOAL_OK ? mdb_del(txn->txn, txn->env->data, &kv, NULL) : 0;
	if (mrc != 0)
		rc = st_lmdb_err(mrc, "mdb_del(data)", errmsg);
	if (rc == SHOAL_OK)
		rc = st_ix_plan_apply(txn, p->ix, errmsg);
	if (rc == SHOAL_OK && !txn->part_raw)
		rc = st_stream_append(txn, &p->t.def, &p->k, p->old_item, NULL, p->by_ttl, a,
		                      errmsg);
	if (rc == SHOAL_OK && !txn->part_raw)
		rc = st_part_log(txn, p->t.def.id, key_hash(&p->k), p->k.b, p->k.len, NULL, 0,
		                 errmsg);
	if (rc == SHOAL_OK)
		rc = st_table_count(txn, p->t.def.name, -1, -(int64_t)st_item_size(p->old_item),
		                    errmsg);
	return rc;
}

int st_plan_apply(st_txn *txn, const st_write_plan *p, sh_arena *a, st_write_result *res,
                  char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	int rc = SHOAL_OK;
	if (p->writes)
		rc = p->kind == PLAN_DELETE ? delete_item(txn, p, a, errmsg)
		                            : store_item(txn, p, a, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	if (p->writes)
		st_wver_bump(txn->env, &p->k);
	st_ix_plan_writes(p->ix, &res->index_writes, &res->n_index_writes);
	plan_collection(p, res);
	res->old_size = p->old_item != NULL ? st_item_size(p->old_item) : 0;
	res->new_size =
	    p->kind == PLAN_PUT || p->kind == PLAN_UPDATE ? st_item_size(p->new_item) : 0;
	switch (p->rv) {
	case ST_RV_ALL_OLD:
		res->attributes = p->old_item;
		break;
	case ST_RV_ALL_NEW:
		res->attributes = p->new_item;
		break;
	case ST_RV_UPDATED_OLD:
		rc = updated_part(p->upd, a, p->old_item, &res->attributes, errmsg);
		break;
	case ST_RV_UPDATED_NEW:
		rc = updated_part(p->upd, a, p->new_item, &res->attributes, errmsg);
		break;
	case ST_RV_NONE:
		break;
	}
	if (rc != SHOAL_OK) /* the write is done: only an environmental error here */
		return fail(txn, rc, errmsg);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* PutItem, UpdateItem, DeleteItem: a plan, applied                          */
/* ------------------------------------------------------------------------ */

int st_put(st_txn *txn, const st_put_req *req, sh_arena *a, st_write_result *res, char *errmsg)
{
	st_write_result ignored;
	st_write_plan *p = NULL;
	if (res == NULL)
		res = &ignored;
	int rc = st_plan_put(txn, req, a, &p, res, errmsg);
	return rc == SHOAL_OK ? st_plan_apply(txn, p, a, res, errmsg) : rc;
}

int st_update(st_txn *txn, const st_update_req *req, sh_arena *a, st_write_result *res,
              char *errmsg)
{
	st_write_result ignored;
	st_write_plan *p = NULL;
	if (res == NULL)
		res = &ignored;
	int rc = st_plan_update(txn, req, a, &p, res, errmsg);
	return rc == SHOAL_OK ? st_plan_apply(txn, p, a, res, errmsg) : rc;
}

int st_delete(st_txn *txn, const st_delete_req *req, sh_arena *a, st_write_result *res,
              char *errmsg)
{
	st_write_result ignored;
	st_write_plan *p = NULL;
	if (res == NULL)
		res = &ignored;
	int rc = st_plan_delete(txn, req, a, &p, res, errmsg);
	return rc == SHOAL_OK ? st_plan_apply(txn, p, a, res, errmsg) : rc;
}

/* ------------------------------------------------------------------------ */
/* One-shot forms                                                            */
/* ------------------------------------------------------------------------ */

/* Commits txn after a successful write; on failure of either, nothing of it
 * is visible and no result is returned. */
static int finish(st_txn *txn, int rc, st_write_result *res, char *errmsg)
{
	if (rc != SHOAL_OK) {
		st_txn_abort(txn);
		return rc;
	}
	rc = st_txn_commit(txn, errmsg);
	if (rc != SHOAL_OK && res != NULL)
		*res = (st_write_result){0};
	return rc;
}

int st_put_item(st_env *env, const st_put_req *req, sh_arena *a, st_write_result *res, char *errmsg)
{
	st_txn *txn;
	int rc = st_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return finish(txn, st_put(txn, req, a, res, errmsg), res, errmsg);
}

int st_update_item(st_env *env, const st_update_req *req, sh_arena *a, st_write_result *res,
                   char *errmsg)
{
	st_txn *txn;
	int rc = st_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return finish(txn, st_update(txn, req, a, res, errmsg), res, errmsg);
}

int st_delete_item(st_env *env, const st_delete_req *req, sh_arena *a, st_write_result *res,
                   char *errmsg)
{
	st_txn *txn;
	int rc = st_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return finish(txn, st_delete(txn, req, a, res, errmsg), res, errmsg);
}
