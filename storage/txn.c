/*
 * txn.c -- transactions inside one storage group (contract: storage.h,
 * "Transactions").
 *
 * st_transact runs a set of writes all or nothing: every action is planned
 * (write.c: validation, the item's lock, the condition, the new image, the
 * index plan) before any is applied, so one failing action leaves nothing
 * written and the caller learns why each failed.  A TransactWriteItems whose
 * items all live in this group is one st_transact in one Raft entry.
 *
 * Across groups (two-phase commit, router/txn.c and node/fsm_txn.c) this
 * file keeps the replicated state: a participant's prepared transaction
 * (its actions, and a lock on each of its items: a lock makes every other
 * write of that item a TransactionConflict until the decision), the
 * coordinator's record of a transaction (its state, its participants and
 * which have applied the decision, the answer for a retry with the same
 * ClientRequestToken), and the records of single-item writes made
 * idempotent by a token (their first answer).  Records expire by the
 * replicated clock (st_txn_set_time), so every replica drops the same ones.
 *
 * Layout in the meta DBI, under prefix TX_META (0x02; the index machinery
 * uses 0x01, the named keys ASCII letters); integers big-endian:
 *
 *   0x02 'L' | digest (16)   -> txn id (16)            a lock; digest =
 *                                                      XXH3-128 of the item key
 *   0x02 'P' | txn id (16)   -> coord group (4) | created_ms (8) | n locks (2)
 *                               | n x lock digest (16) | actions blob
 *   0x02 'R' | txn id (16)   -> state (1) | created_ms (8) | expires_ms (8)
 *                               | request digest (16) | n parts (2)
 *                               | n x (group (4) | acked (1)) | outcome
 *   0x02 'W' | token (16)    -> expires_ms (8) | outcome
 *   0x02 'E' | expires_ms (8) | kind ('R' or 'W') | id (16) -> (empty)
 *                                                      the expiry index
 *   0x02 'O' | txn id (16)   -> (empty)                the records without an
 *                                                      expiry (PREPARING, or
 *                                                      decided and not yet
 *                                                      acknowledged by all):
 *                                                      what recovery lists
 *
 * The actions blob and the outcomes are the caller's bytes (packed
 * protobuf): storage keeps them, it does not read them.
 */
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "catalog.h"
#include "engine.h"
#include "keyenc.h"
#include "parts_int.h"
#include "read.h"

#define TX_META 0x02
#define TX_LOCK 'L'
#define TX_PREP 'P'
#define TX_REC  'R'
#define TX_TOK  'W'
#define TX_EXP  'E'
#define TX_OPEN 'O'

static const char CONFLICT_MSG[] = "Transaction is ongoing for the item";

static bool env_error(int rc)
{
	return rc == SHOAL_E_NOMEM || rc == SHOAL_E_IO || rc == SHOAL_E_FULL ||
	       rc == SHOAL_E_INTERNAL;
}

static int fail(st_txn *txn, int rc, char *errmsg)
{
	if (env_error(rc))
		st_txn_poison(txn, rc, errmsg);
	return rc;
}

static int sticky(const st_txn *txn, char *errmsg)
{
	return sh_errf(errmsg, txn->sticky, "%s", txn->sticky_msg);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

static void lock_digest(const st_key *k, uint8_t out[16])
{
	XXH128_hash_t h = XXH3_128bits(k->b, k->len);
	st_put_be64(out, h.high64);
	st_put_be64(out + 8, h.low64);
}

/* TX_META | kind | id (16). */
static MDB_val id_key(uint8_t buf[18], char kind, const uint8_t id[16])
{
	buf[0] = TX_META;
	buf[1] = (uint8_t)kind;
	memcpy(buf + 2, id, 16);
	return (MDB_val){18, buf};
}

static MDB_val exp_key(uint8_t buf[27], int64_t expires_ms, char kind, const uint8_t id[16])
{
	buf[0] = TX_META;
	buf[1] = TX_EXP;
	st_put_be64(buf + 2, (uint64_t)expires_ms);
	buf[10] = (uint8_t)kind;
	memcpy(buf + 11, id, 16);
	return (MDB_val){27, buf};
}

static int meta_put(st_txn *txn, MDB_val *k, MDB_val *v, const char *what, char *errmsg)
{
	int rc = st_txn_reserve(txn, k->mv_size + v->mv_size + ST_RESERVE_PER_KEY, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	int mrc = mdb_put(txn->txn, txn->env->meta, k, v, 0);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, what, errmsg);
}

static int meta_del(st_txn *txn, MDB_val *k, const char *what, char *errmsg)
{
	int mrc = mdb_del(txn->txn, txn->env->meta, k, NULL);
	return mrc == 0 || mrc == MDB_NOTFOUND ? SHOAL_OK : st_lmdb_err(mrc, what, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Locks                                                                     */
/* ------------------------------------------------------------------------ */

int st_lock_check(st_txn *txn, const st_key *k, char *errmsg)
{
	uint8_t d[16], kb[18];
	lock_digest(k, d);
	MDB_val key = id_key(kb, TX_LOCK, d), v;
	int mrc = mdb_get(txn->txn, txn->env->meta, &key, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(lock)", errmsg);
	return sh_errf(errmsg, SHOAL_E_TXN_CONFLICT, "%s", CONFLICT_MSG);
}

static uint32_t wver_slot(const uint8_t d[16])
{
	return (uint32_t)st_get_be64(d + 8) & (ST_WVER_SLOTS - 1);
}

void st_wver_bump(st_env *env, const st_key *k)
{
	uint8_t d[16];
	lock_digest(k, d);
	uint64_t v = atomic_fetch_add_explicit(&env->wseq, 1, memory_order_relaxed) + 1;
	atomic_store_explicit(&env->wver[wver_slot(d)], v, memory_order_release);
}

/* ------------------------------------------------------------------------ */
/* Reads of a TransactGetItems                                               */
/* ------------------------------------------------------------------------ */

int st_txn_get_items(st_env *env, st_txn_get *gets, uint32_t n, sh_arena *a, uint64_t *instance,
                     char *errmsg)
{
	*instance = env->instance;
	/* The caller serialises this with the applies of writes (a node runs
	 * it on its loop thread, between applies), so the data and the
	 * versions read here are of one instant. */
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	sh_arena ra;
	sh_arena_init(&ra);
	for (uint32_t i = 0; i < n && rc == SHOAL_OK; i++) {
		st_txn_get *g = &gets[i];
		st_key k;
		sh_arena_reset(&ra);
		rc = st_get_in(txn, env, &g->req, &ra, a, &g->item, &g->size, &k, errmsg);
		if (rc != SHOAL_OK)
			break;
		uint8_t d[16], kb[18];
		lock_digest(&k, d);
		g->version = atomic_load_explicit(&env->wver[wver_slot(d)], memory_order_acquire);
		MDB_val key = id_key(kb, TX_LOCK, d), v;
		int mrc = mdb_get(txn, env->meta, &key, &v);
		if (mrc != 0 && mrc != MDB_NOTFOUND)
			rc = st_lmdb_err(mrc, "mdb_get(lock)", errmsg);
		g->locked = mrc == 0;
	}
	sh_arena_fini(&ra);
	mdb_txn_abort(txn);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* All or nothing                                                            */
/* ------------------------------------------------------------------------ */

static int plan_action(st_txn *txn, const st_txn_action *act, sh_arena *a, st_write_plan **p,
                       st_write_result *res, char *errmsg)
{
	switch (act->kind) {
	case ST_TXA_CHECK:
		return st_plan_check(txn, &act->u.check, a, p, res, errmsg);
	case ST_TXA_PUT:
		return st_plan_put(txn, &act->u.put, a, p, res, errmsg);
	case ST_TXA_UPDATE:
		return st_plan_update(txn, &act->u.update, a, p, res, errmsg);
	case ST_TXA_DELETE:
		return st_plan_delete(txn, &act->u.del, a, p, res, errmsg);
	}
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "unknown action kind %d", (int)act->kind);
}

/* Plans every action; SHOAL_OK when all can go (plans[i] set), else
 * SHOAL_E_TXN_CANCELED with each one's reason, or an environmental error. */
static int plan_all(st_txn *txn, const st_txn_action *acts, uint32_t n, sh_arena *a,
                    st_write_plan **plans, st_txn_result *results, char *errmsg)
{
	bool cancelled = false;
	for (uint32_t i = 0; i < n; i++) {
		st_txn_result *r = &results[i];
		char msg[SH_ERRMSG_SIZE] = "";
		memset(r, 0, sizeof(*r));
		r->code = plan_action(txn, &acts[i], a, &plans[i], &r->res, msg);
		if (r->code == SHOAL_OK)
			continue;
		if (env_error(r->code))
			return sh_errf(errmsg, r->code, "%s", msg);
		cancelled = true;
		r->message = sh_arena_strndup(a, msg, strlen(msg));
		r->old_item = r->res.old_item;
		if (r->message == NULL)
			return fail(txn,
			            sh_errf(errmsg, SHOAL_E_NOMEM, "transaction: out of memory"),
			            errmsg);
	}
	/* A failure before the item (a malformed expression, an unknown
	 * table, a key that does not fit the schema) is the request's: the
	 * whole transaction is refused with it, as DynamoDB validates a
	 * request before it runs any of it. */
	for (uint32_t i = 0; i < n && cancelled; i++)
		if (results[i].code != SHOAL_OK && !results[i].res.item_stage)
			return sh_errf(errmsg, results[i].code, "%s", results[i].message);
	if (!cancelled) {
		/* Two actions on one item: refused before planning by the router
		 * (and here, for a request that did not pass there). */
		for (uint32_t i = 1; i < n; i++)
			for (uint32_t j = 0; j < i; j++)
				if (st_plan_key(plans[i])->len == st_plan_key(plans[j])->len &&
				    memcmp(st_plan_key(plans[i])->b, st_plan_key(plans[j])->b,
				           st_plan_key(plans[i])->len) == 0)
					return sh_errf(
					    errmsg, SHOAL_E_VALIDATION,
					    "Transaction request cannot include multiple "
					    "operations on one item");
	}
	return cancelled ? sh_errf(errmsg, SHOAL_E_TXN_CANCELED, "Transaction cancelled")
	                 : SHOAL_OK;
}

int st_transact(st_txn *txn, const st_txn_action *acts, uint32_t n, sh_arena *a,
                st_txn_result *results, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_write_plan **plans = sh_arena_calloc(a, n + 1, sizeof(*plans));
	if (plans == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "transaction: out of memory"),
		            errmsg);
	int rc = plan_all(txn, acts, n, a, plans, results, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		rc = st_plan_apply(txn, plans[i], a, &results[i].res, errmsg);
		if (rc != SHOAL_OK) /* after planning: only environmental (poisoned) */
			return rc;
	}
	return SHOAL_OK;
}

int st_txn_plan(st_txn *txn, const st_txn_action *acts, uint32_t n, sh_arena *a,
                st_txn_result *results, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_write_plan **plans = sh_arena_calloc(a, n + 1, sizeof(*plans));
	if (plans == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "transaction: out of memory"),
		            errmsg);
	return plan_all(txn, acts, n, a, plans, results, errmsg);
}

/* ------------------------------------------------------------------------ */
/* Two-phase commit: the participant                                         */
/* ------------------------------------------------------------------------ */

int st_txn_prepared_get(st_txn *txn, const uint8_t id[16], sh_arena *a, st_prepared *out,
                        bool *found, char *errmsg)
{
	uint8_t kb[18];
	MDB_val k = id_key(kb, TX_PREP, id), v;
	*found = false;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return fail(txn, st_lmdb_err(mrc, "mdb_get(prepared)", errmsg), errmsg);
	const uint8_t *p = v.mv_data;
	if (v.mv_size < 14 || v.mv_size < 14 + 16 * (size_t)st_get_be16(p + 12))
		return fail(
		    txn, sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt prepared transaction record"),
		    errmsg);
	memcpy(out->id, id, 16);
	out->coord_group = st_get_be32(p);
	out->created_ms = (int64_t)st_get_be64(p + 4);
	out->n_locks = st_get_be16(p + 12);
	size_t off = 14 + 16 * (size_t)out->n_locks;
	out->len = v.mv_size - off;
	out->blob = sh_arena_alloc(a, out->len + 1);
	if (out->blob == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "prepared: out of memory"), errmsg);
	memcpy((void *)out->blob, p + off, out->len);
	*found = true;
	return SHOAL_OK;
}

int st_txn_prepare(st_txn *txn, const uint8_t id[16], uint32_t coord_group,
                   const st_txn_action *acts, uint32_t n, const void *blob, size_t len, sh_arena *a,
                   st_txn_result *results, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	st_prepared old;
	bool found;
	int rc = st_txn_prepared_get(txn, id, a, &old, &found, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (found) { /* a prepare sent again: it holds */
		for (uint32_t i = 0; i < n; i++)
			memset(&results[i], 0, sizeof(results[i]));
		return SHOAL_OK;
	}
	st_write_plan **plans = sh_arena_calloc(a, n + 1, sizeof(*plans));
	if (plans == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "prepare: out of memory"), errmsg);
	if ((rc = plan_all(txn, acts, n, a, plans, results, errmsg)) != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < n; i++)
		st_plan_sizes(plans[i], &results[i].res);
	/* Items in a range that is moving out: the range's fence waits for
	 * this transaction (parts.h). */
	if ((rc = st_part_txn_note(txn, id, (const st_write_plan *const *)plans, n, errmsg)) !=
	    SHOAL_OK)
		return rc;
	/* Every item locked, the actions kept for the decision. */
	size_t vlen = 14 + 16 * (size_t)n + len;
	uint8_t *v = sh_arena_alloc(a, vlen);
	if (v == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "prepare: out of memory"), errmsg);
	st_put_be32(v, coord_group);
	st_put_be64(v + 4, (uint64_t)txn->ts_ms);
	v[12] = (uint8_t)(n >> 8);
	v[13] = (uint8_t)n;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *d = v + 14 + 16 * (size_t)i, kb[18];
		lock_digest(st_plan_key(plans[i]), d);
		MDB_val lk = id_key(kb, TX_LOCK, d), lv = {16, (void *)id};
		if ((rc = meta_put(txn, &lk, &lv, "mdb_put(lock)", errmsg)) != SHOAL_OK)
			return fail(txn, rc, errmsg);
	}
	if (len > 0)
		memcpy(v + 14 + 16 * (size_t)n, blob, len);
	uint8_t kb[18];
	MDB_val k = id_key(kb, TX_PREP, id), mv = {vlen, v};
	if ((rc = meta_put(txn, &k, &mv, "mdb_put(prepared)", errmsg)) != SHOAL_OK)
		return fail(txn, rc, errmsg);
	return SHOAL_OK;
}

int st_txn_release(st_txn *txn, const uint8_t id[16], sh_arena *a, st_prepared *out, bool *found,
                   char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	int rc = st_txn_prepared_get(txn, id, a, out, found, errmsg);
	if (rc != SHOAL_OK || !*found)
		return rc;
	uint8_t kb[18], pb[18];
	MDB_val pk = id_key(pb, TX_PREP, id), v;
	int mrc = mdb_get(txn->txn, txn->env->meta, &pk, &v);
	if (mrc != 0)
		return fail(txn, st_lmdb_err(mrc, "mdb_get(prepared)", errmsg), errmsg);
	/* The lock digests, copied: deleting changes LMDB's pages under v. */
	uint8_t *locks = sh_arena_alloc(a, 16 * (size_t)out->n_locks + 1);
	if (locks == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "release: out of memory"), errmsg);
	memcpy(locks, (const uint8_t *)v.mv_data + 14, 16 * (size_t)out->n_locks);
	for (uint32_t i = 0; i < out->n_locks; i++) {
		MDB_val lk = id_key(kb, TX_LOCK, locks + 16 * (size_t)i), lv;
		/* Only this transaction's own lock. */
		mrc = mdb_get(txn->txn, txn->env->meta, &lk, &lv);
		if (mrc == 0 && lv.mv_size == 16 && memcmp(lv.mv_data, id, 16) == 0)
			rc = meta_del(txn, &lk, "mdb_del(lock)", errmsg);
		else if (mrc != 0 && mrc != MDB_NOTFOUND)
			rc = st_lmdb_err(mrc, "mdb_get(lock)", errmsg);
		if (rc != SHOAL_OK)
			return fail(txn, rc, errmsg);
	}
	if ((rc = meta_del(txn, &pk, "mdb_del(prepared)", errmsg)) != SHOAL_OK)
		return fail(txn, rc, errmsg);
	return st_part_txn_forget(txn, id, errmsg);
}

int st_txn_prepared_any(MDB_txn *txn, st_env *env, bool *any, char *errmsg)
{
	const uint8_t prefix[2] = {TX_META, TX_PREP};
	return st_meta_has_prefix(txn, env, prefix, sizeof(prefix), any, errmsg);
}

int st_txn_prepared_ids(MDB_txn *txn, st_env *env, sh_arena *a, uint8_t **ids, uint32_t *n,
                        char *errmsg)
{
	*ids = NULL;
	*n = 0;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	uint8_t prefix[2] = {TX_META, TX_PREP};
	MDB_val k = {2, prefix}, v;
	uint32_t cap = 0;
	int rc = SHOAL_OK;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size == 18 && memcmp(k.mv_data, prefix, 2) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (*n == cap) {
			uint8_t *more = sh_arena_alloc(a, 16 * (size_t)(cap * 2 + 8));
			if (more == NULL) {
				rc = sh_errf(errmsg, SHOAL_E_NOMEM, "prepared ids: out of memory");
				break;
			}
			if (*n > 0)
				memcpy(more, *ids, 16 * (size_t)*n);
			*ids = more;
			cap = cap * 2 + 8;
		}
		memcpy(*ids + 16 * (size_t)(*n)++, (const uint8_t *)k.mv_data + 2, 16);
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

int st_txn_is_prepared(MDB_txn *txn, st_env *env, const uint8_t id[16], bool *prepared,
                       char *errmsg)
{
	uint8_t kb[18];
	MDB_val k = id_key(kb, TX_PREP, id), v;
	int mrc = mdb_get(txn, env->meta, &k, &v);
	*prepared = mrc == 0;
	return mrc == 0 || mrc == MDB_NOTFOUND ? SHOAL_OK
	                                       : st_lmdb_err(mrc, "mdb_get(prepared)", errmsg);
}

/* Calls fn for every record whose key starts with TX_META | kind, in key
 * order, with a read-only transaction of env (LMDB's memory: valid during
 * the call). */
/* Calls fn for every entry of one kind, in one read transaction (*rtx_out,
 * when not NULL, is set to it first, for fn's own lookups). */
static int scan_kind_with(st_env *env, char kind,
                          int (*fn)(void *arg, const MDB_val *k, const MDB_val *v, char *errmsg),
                          void *arg, MDB_txn **rtx_out, char *errmsg)
{
	MDB_txn *rtx;
	int rc = st_read_txn_begin(env, &rtx, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (rtx_out != NULL)
		*rtx_out = rtx;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(rtx, env->meta, &c);
	if (mrc != 0) {
		mdb_txn_abort(rtx);
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	}
	uint8_t prefix[2] = {TX_META, (uint8_t)kind};
	MDB_val k = {2, prefix}, v;
	mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (mrc == 0 && k.mv_size >= 2 && memcmp(k.mv_data, prefix, 2) == 0 && rc == SHOAL_OK) {
		rc = fn(arg, &k, &v, errmsg);
		mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta)", errmsg);
	mdb_cursor_close(c);
	mdb_txn_abort(rtx);
	return rc;
}

static int scan_kind(st_env *env, char kind,
                     int (*fn)(void *arg, const MDB_val *k, const MDB_val *v, char *errmsg),
                     void *arg, char *errmsg)
{
	return scan_kind_with(env, kind, fn, arg, NULL, errmsg);
}

typedef struct list_acc {
	sh_arena *a;
	void *items;
	uint32_t n, cap;
	size_t size;
} list_acc;

static void *list_slot(list_acc *l)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap == 0 ? 16 : l->cap * 2;
		void *items = sh_arena_alloc(l->a, cap * l->size);
		if (items == NULL)
			return NULL;
		if (l->n > 0)
			memcpy(items, l->items, l->n * l->size);
		l->items = items;
		l->cap = cap;
	}
	return (char *)l->items + l->size * l->n++;
}

static int prepared_one(void *arg, const MDB_val *k, const MDB_val *v, char *errmsg)
{
	list_acc *l = arg;
	const uint8_t *p = v->mv_data;
	if (k->mv_size != 18 || v->mv_size < 14)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt prepared transaction record");
	st_prepared *x = list_slot(l);
	if (x == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "prepared list: out of memory");
	memcpy(x->id, (const uint8_t *)k->mv_data + 2, 16);
	x->coord_group = st_get_be32(p);
	x->created_ms = (int64_t)st_get_be64(p + 4);
	x->n_locks = st_get_be16(p + 12);
	x->blob = NULL; /* the list is for recovery: ids and ages */
	x->len = 0;
	return SHOAL_OK;
}

int st_txn_prepared_list(st_env *env, sh_arena *a, st_prepared **out, uint32_t *n, char *errmsg)
{
	list_acc l = {.a = a, .size = sizeof(st_prepared)};
	int rc = scan_kind(env, TX_PREP, prepared_one, &l, errmsg);
	*out = l.items;
	*n = rc == SHOAL_OK ? l.n : 0;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Two-phase commit: the coordinator's record                                */
/* ------------------------------------------------------------------------ */

static int record_decode(sh_arena *a, const uint8_t *id, const MDB_val *v, bool copy,
                         st_txn_record *out, char *errmsg)
{
	const uint8_t *p = v->mv_data;
	if (v->mv_size < 35)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt transaction record");
	memset(out, 0, sizeof(*out));
	memcpy(out->id, id, 16);
	out->state = (st_txn_state)p[0];
	out->created_ms = (int64_t)st_get_be64(p + 1);
	out->expires_ms = (int64_t)st_get_be64(p + 9);
	memcpy(out->digest, p + 17, 16);
	out->n_parts = st_get_be16(p + 33);
	size_t off = 35 + 5 * (size_t)out->n_parts;
	if (out->n_parts > ST_TXN_MAX_PARTS || v->mv_size < off)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt transaction record");
	for (uint32_t i = 0; i < out->n_parts; i++) {
		out->parts[i] = st_get_be32(p + 35 + 5 * (size_t)i);
		out->acked[i] = p[35 + 5 * (size_t)i + 4] != 0;
	}
	out->outcome_len = v->mv_size - off;
	if (!copy || out->outcome_len == 0) {
		out->outcome = out->outcome_len > 0 ? p + off : NULL;
		return SHOAL_OK;
	}
	uint8_t *o = sh_arena_alloc(a, out->outcome_len);
	if (o == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "record: out of memory");
	memcpy(o, p + off, out->outcome_len);
	out->outcome = o;
	return SHOAL_OK;
}

int st_txn_record_get(st_txn *txn, const uint8_t id[16], sh_arena *a, st_txn_record *out,
                      bool *found, char *errmsg)
{
	uint8_t kb[18];
	MDB_val k = id_key(kb, TX_REC, id), v;
	*found = false;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return fail(txn, st_lmdb_err(mrc, "mdb_get(record)", errmsg), errmsg);
	int rc = record_decode(a, id, &v, true, out, errmsg);
	if (rc != SHOAL_OK)
		return fail(txn, rc, errmsg);
	*found = true;
	return SHOAL_OK;
}

int st_txn_record_put(st_txn *txn, const st_txn_record *r, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	if (r->n_parts > ST_TXN_MAX_PARTS)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "a transaction of %u groups (at most %u)", r->n_parts,
		               ST_TXN_MAX_PARTS);
	/* The expiry index: the old entry goes, the new one (if any) comes. */
	sh_arena a;
	sh_arena_init(&a);
	st_txn_record old;
	bool found;
	int rc = st_txn_record_get(txn, r->id, &a, &old, &found, errmsg);
	uint8_t eb[27];
	if (rc == SHOAL_OK && found && old.expires_ms != 0) {
		MDB_val ek = exp_key(eb, old.expires_ms, TX_REC, r->id);
		rc = meta_del(txn, &ek, "mdb_del(expiry)", errmsg);
	}
	if (rc == SHOAL_OK && r->expires_ms != 0) {
		MDB_val ek = exp_key(eb, r->expires_ms, TX_REC, r->id), ev = {0, ""};
		rc = meta_put(txn, &ek, &ev, "mdb_put(expiry)", errmsg);
	}
	/* The open index: records recovery has work for. */
	uint8_t ob[18];
	MDB_val ok = id_key(ob, TX_OPEN, r->id), ov = {0, ""};
	if (rc == SHOAL_OK && r->expires_ms == 0 && (!found || old.expires_ms != 0))
		rc = meta_put(txn, &ok, &ov, "mdb_put(open)", errmsg);
	if (rc == SHOAL_OK && r->expires_ms != 0 && found && old.expires_ms == 0)
		rc = meta_del(txn, &ok, "mdb_del(open)", errmsg);
	size_t vlen = 35 + 5 * (size_t)r->n_parts + r->outcome_len;
	uint8_t *v = rc == SHOAL_OK ? sh_arena_alloc(&a, vlen) : NULL;
	if (rc == SHOAL_OK && v == NULL)
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "record: out of memory");
	if (rc == SHOAL_OK) {
		v[0] = (uint8_t)r->state;
		st_put_be64(v + 1, (uint64_t)r->created_ms);
		st_put_be64(v + 9, (uint64_t)r->expires_ms);
		memcpy(v + 17, r->digest, 16);
		v[33] = (uint8_t)(r->n_parts >> 8);
		v[34] = (uint8_t)r->n_parts;
		for (uint32_t i = 0; i < r->n_parts; i++) {
			st_put_be32(v + 35 + 5 * (size_t)i, r->parts[i]);
			v[35 + 5 * (size_t)i + 4] = r->acked[i] ? 1 : 0;
		}
		if (r->outcome_len > 0)
			memcpy(v + 35 + 5 * (size_t)r->n_parts, r->outcome, r->outcome_len);
		uint8_t kb[18];
		MDB_val k = id_key(kb, TX_REC, r->id), mv = {vlen, v};
		rc = meta_put(txn, &k, &mv, "mdb_put(record)", errmsg);
	}
	sh_arena_fini(&a);
	return fail(txn, rc, errmsg);
}

typedef struct open_acc {
	list_acc l;
	MDB_txn *rtx;
	st_env *env;
} open_acc;

static int record_open(void *arg, const MDB_val *k, const MDB_val *v, char *errmsg)
{
	(void)v;
	open_acc *o = arg;
	if (k->mv_size != 18)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt open transaction key");
	const uint8_t *id = (const uint8_t *)k->mv_data + 2;
	uint8_t kb[18];
	MDB_val rk = id_key(kb, TX_REC, id), rv;
	int mrc = mdb_get(o->rtx, o->env->meta, &rk, &rv);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK; /* cannot be (they change together); skip */
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(record)", errmsg);
	st_txn_record *x = list_slot(&o->l);
	if (x == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "record list: out of memory");
	return record_decode(o->l.a, id, &rv, true, x, errmsg);
}

int st_txn_record_list(st_env *env, sh_arena *a, st_txn_record **out, uint32_t *n, char *errmsg)
{
	open_acc o = {.l = {.a = a, .size = sizeof(st_txn_record)}, .env = env};
	int rc = scan_kind_with(env, TX_OPEN, record_open, &o, &o.rtx, errmsg);
	*out = o.l.items;
	*n = rc == SHOAL_OK ? o.l.n : 0;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Idempotent single-item writes                                             */
/* ------------------------------------------------------------------------ */

int st_write_token_get(st_txn *txn, const uint8_t token[16], sh_arena *a, const uint8_t **outcome,
                       size_t *len, bool *found, char *errmsg)
{
	uint8_t kb[18];
	MDB_val k = id_key(kb, TX_TOK, token), v;
	*found = false;
	int mrc = mdb_get(txn->txn, txn->env->meta, &k, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0 || v.mv_size < 8)
		return fail(txn,
		            mrc != 0
		                ? st_lmdb_err(mrc, "mdb_get(token)", errmsg)
		                : sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt write token record"),
		            errmsg);
	*len = v.mv_size - 8;
	uint8_t *o = sh_arena_alloc(a, *len + 1);
	if (o == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "token: out of memory"), errmsg);
	memcpy(o, (const uint8_t *)v.mv_data + 8, *len);
	*outcome = o;
	*found = true;
	return SHOAL_OK;
}

int st_write_token_put(st_txn *txn, const uint8_t token[16], int64_t expires_ms,
                       const void *outcome, size_t len, char *errmsg)
{
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	uint8_t kb[18], eb[27];
	uint8_t *v = sh_arena_alloc(&txn->arena, 8 + len);
	if (v == NULL)
		return fail(txn, sh_errf(errmsg, SHOAL_E_NOMEM, "token: out of memory"), errmsg);
	st_put_be64(v, (uint64_t)expires_ms);
	if (len > 0)
		memcpy(v + 8, outcome, len);
	MDB_val k = id_key(kb, TX_TOK, token), mv = {8 + len, v};
	MDB_val ek = exp_key(eb, expires_ms, TX_TOK, token), ev = {0, ""};
	int rc = meta_put(txn, &k, &mv, "mdb_put(token)", errmsg);
	if (rc == SHOAL_OK)
		rc = meta_put(txn, &ek, &ev, "mdb_put(expiry)", errmsg);
	return fail(txn, rc, errmsg);
}

int64_t st_txn_time(const st_txn *txn)
{
	return txn->ts_ms;
}

/* ------------------------------------------------------------------------ */
/* Expiry                                                                    */
/* ------------------------------------------------------------------------ */

int st_txn_next_expiry(st_env *env, int64_t *ms, bool *any, char *errmsg)
{
	*any = false;
	MDB_txn *rtx;
	int rc = st_read_txn_begin(env, &rtx, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(rtx, env->meta, &c);
	if (mrc == 0) {
		uint8_t prefix[2] = {TX_META, TX_EXP};
		MDB_val k = {2, prefix}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == 0 && k.mv_size == 27 && memcmp(k.mv_data, prefix, 2) == 0) {
			*ms = (int64_t)st_get_be64((const uint8_t *)k.mv_data + 2);
			*any = true;
		}
		if (mrc == MDB_NOTFOUND)
			mrc = 0;
		mdb_cursor_close(c);
	}
	mdb_txn_abort(rtx);
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_cursor_get(expiry)", errmsg);
}

int st_txn_expire(st_txn *txn, int64_t now_ms, uint32_t max, uint32_t *removed, char *errmsg)
{
	*removed = 0;
	if (txn->sticky != SHOAL_OK)
		return sticky(txn, errmsg);
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn->txn, txn->env->meta, &c);
	if (mrc != 0)
		return fail(txn, st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg), errmsg);
	int rc = SHOAL_OK;
	uint8_t prefix[2] = {TX_META, TX_EXP};
	while (*removed < max) {
		MDB_val k = {2, prefix}, v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc == MDB_NOTFOUND)
			break;
		if (mrc != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_get(expiry)", errmsg);
			break;
		}
		const uint8_t *kp = k.mv_data;
		if (k.mv_size != 27 || memcmp(kp, prefix, 2) != 0 ||
		    (int64_t)st_get_be64(kp + 2) > now_ms)
			break;
		uint8_t id[16], kb[18];
		char kind = (char)kp[10];
		memcpy(id, kp + 11, 16);
		if ((mrc = mdb_cursor_del(c, 0)) != 0) {
			rc = st_lmdb_err(mrc, "mdb_cursor_del(expiry)", errmsg);
			break;
		}
		MDB_val rk = id_key(kb, kind == TX_REC ? TX_REC : TX_TOK, id);
		if ((rc = meta_del(txn, &rk, "mdb_del(expired)", errmsg)) != SHOAL_OK)
			break;
		(*removed)++;
	}
	mdb_cursor_close(c);
	return fail(txn, rc, errmsg);
}
