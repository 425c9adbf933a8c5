/*
 * parts_held.c -- the index entries a range record holds without counting
 * them (contract: parts.h, "Counting"; layout: the 'H' records at the top of
 * parts.h).
 *
 * A move's writes (ingest chunks, the ingest's reset, purge entries) go
 * through the write path, which keeps the index counters; what they changed
 * in those counters is what the range's record holds more or less.  So the
 * held figures follow the counters' change around the move's own writes
 * (st_part_ixsnap_take before, st_part_held_ix_moved after) rather than a
 * second count inside the write path: one place counts entries.
 */
#include <inttypes.h>
#include <string.h>

#include "codec.h"
#include "parts_int.h"

#define PT_HELD_KEY (PT_KEY + 6) /* 0x05 'H' | table | lo | ix table (4) | ix index (2) */
#define PT_HELD_VAL 16           /* items (8) | bytes (8) */

static void held_key(uint8_t k[PT_HELD_KEY], uint32_t table, uint64_t lo, uint32_t ix_table,
                     uint16_t ix_index)
{
	st_part_key(k, PT_HELD, table, lo);
	st_put_be32(k + PT_KEY, ix_table);
	st_put_be16(k + PT_KEY + 4, ix_index);
}

/* Whether index x of table t has its entries in ranges of `table` (a
 * table's LSIs in its own, every GSI in the GSI space's). */
static bool of_ranges(uint32_t table, const st_table_info *t, const st_index_def *x)
{
	return table == ST_PART_GSI ? !x->local : x->local && t->def.id == table;
}

int st_part_ixsnap_take(MDB_txn *txn, st_env *env, uint32_t table, sh_arena *a, st_part_ixsnap *s,
                        char *errmsg)
{
	*s = (st_part_ixsnap){0, NULL};
	st_table_info *t;
	uint32_t nt;
	int rc = st_ix_tables(txn, env, a, &t, &nt, errmsg);
	uint32_t total = 0;
	for (uint32_t i = 0; rc == SHOAL_OK && i < nt; i++)
		for (uint32_t j = 0; j < t[i].def.n_indexes; j++)
			total += of_ranges(table, &t[i], &t[i].def.indexes[j]);
	if (rc != SHOAL_OK || total == 0)
		return rc;
	if ((s->v = sh_arena_calloc(a, total, sizeof(*s->v))) == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "index counters: out of memory");
	for (uint32_t i = 0; rc == SHOAL_OK && i < nt; i++)
		for (uint32_t j = 0; rc == SHOAL_OK && j < t[i].def.n_indexes; j++) {
			const st_index_def *x = &t[i].def.indexes[j];
			if (!of_ranges(table, &t[i], x))
				continue;
			st_ix_state st;
			rc = st_ix_state_get(txn, env, t[i].def.id, x->id, &st, errmsg);
			s->v[s->n++] =
			    (st_part_held_ix){t[i].def.id, x->id, st.item_count, st.size_bytes};
		}
	return rc;
}

/* The 'H' record of (table, lo) for (ix_table, ix_index): 0 when absent. */
static int held_get(MDB_txn *txn, st_env *env, const uint8_t k[PT_HELD_KEY], uint64_t *items,
                    uint64_t *bytes, char *errmsg)
{
	MDB_val key = {PT_HELD_KEY, (void *)k}, v;
	*items = *bytes = 0;
	int mrc = mdb_get(txn, env->meta, &key, &v);
	if (mrc == MDB_NOTFOUND)
		return SHOAL_OK;
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_get(meta held entries)", errmsg);
	if (v.mv_size != PT_HELD_VAL)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt held index entries record");
	*items = st_get_be64(v.mv_data);
	*bytes = st_get_be64((const uint8_t *)v.mv_data + 8);
	return SHOAL_OK;
}

/* Stores the 'H' record k (deleted when both are 0). */
static int held_store(st_txn *txn, const uint8_t k[PT_HELD_KEY], uint64_t items, uint64_t bytes,
                      char *errmsg)
{
	MDB_val key = {PT_HELD_KEY, (void *)k};
	int mrc;
	if (items == 0 && bytes == 0) {
		mrc = mdb_del(txn->txn, txn->env->meta, &key, NULL);
		if (mrc == MDB_NOTFOUND)
			mrc = 0;
	} else {
		uint8_t b[PT_HELD_VAL];
		st_put_be64(b, items);
		st_put_be64(b + 8, bytes);
		MDB_val v = {sizeof(b), b};
		mrc = mdb_put(txn->txn, txn->env->meta, &key, &v, 0);
	}
	return mrc == 0 ? SHOAL_OK : st_lmdb_err(mrc, "mdb_put(meta held entries)", errmsg);
}

int st_part_held_ix_moved(st_txn *txn, const st_part_rec *r, const st_part_ixsnap *before,
                          sh_arena *a, char *errmsg)
{
	if (!r->counted)
		return SHOAL_OK;
	st_part_ixsnap now;
	int rc = st_part_ixsnap_take(txn->txn, txn->env, r->table, a, &now, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && i < now.n; i++) {
		const st_part_held_ix *x = &now.v[i];
		uint64_t items0 = 0, bytes0 = 0; /* an index new since: none before */
		for (uint32_t j = 0; j < before->n; j++)
			if (before->v[j].table == x->table && before->v[j].index == x->index) {
				items0 = before->v[j].items;
				bytes0 = before->v[j].bytes;
				break;
			}
		int64_t di = (int64_t)(x->items - items0), db = (int64_t)(x->bytes - bytes0);
		if (di == 0 && db == 0)
			continue;
		uint8_t k[PT_HELD_KEY];
		held_key(k, r->table, r->lo, x->table, x->index);
		uint64_t items, bytes;
		rc = held_get(txn->txn, txn->env, k, &items, &bytes, errmsg);
		if (rc == SHOAL_OK)
			rc = held_store(txn, k, st_add_clamped(items, di),
			                st_add_clamped(bytes, db), errmsg);
	}
	return rc;
}

int st_part_held_ix_drop(st_txn *txn, uint32_t table, uint64_t lo, char *errmsg)
{
	uint8_t k[PT_KEY];
	st_part_key(k, PT_HELD, table, lo);
	return st_delete_prefix(txn, txn->env->meta, k, sizeof(k), "delete(meta held entries)",
	                        errmsg);
}

int st_part_held_ix_set(st_txn *txn, uint32_t table, uint64_t lo, const st_part_held *h,
                        char *errmsg)
{
	int rc = st_part_held_ix_drop(txn, table, lo, errmsg);
	for (uint32_t i = 0; rc == SHOAL_OK && h != NULL && h->ix_known && i < h->n_ix; i++) {
		uint8_t k[PT_HELD_KEY];
		held_key(k, table, lo, h->ix[i].table, h->ix[i].index);
		rc = held_store(txn, k, h->ix[i].items, h->ix[i].bytes, errmsg);
	}
	return rc;
}

/* Calls fn for each 'H' record under prefix p (plen bytes). */
typedef int (*held_fn)(void *arg, uint32_t table, uint64_t lo, const st_part_held_ix *x,
                       char *errmsg);

static int held_each(MDB_txn *txn, st_env *env, const uint8_t *p, size_t plen, held_fn fn,
                     void *arg, char *errmsg)
{
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->meta, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(meta)", errmsg);
	int rc = SHOAL_OK;
	MDB_val k = {plen, (void *)p}, v;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, p, plen) == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const uint8_t *b = k.mv_data;
		if (k.mv_size != PT_HELD_KEY || v.mv_size != PT_HELD_VAL) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "corrupt held index entries record");
			break;
		}
		st_part_held_ix x = {st_get_be32(b + PT_KEY), st_get_be16(b + PT_KEY + 4),
		                     st_get_be64(v.mv_data),
		                     st_get_be64((const uint8_t *)v.mv_data + 8)};
		if ((rc = fn(arg, st_get_be32(b + 2), st_get_be64(b + 6), &x, errmsg)) != SHOAL_OK)
			break;
	}
	if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = st_lmdb_err(mrc, "mdb_cursor_get(meta held entries)", errmsg);
	mdb_cursor_close(c);
	return rc;
}

/* Adds x to h's list (ix_known false once it is full). */
static void held_add_ix(st_part_held *h, const st_part_held_ix *x)
{
	for (uint32_t i = 0; i < h->n_ix; i++)
		if (h->ix[i].table == x->table && h->ix[i].index == x->index) {
			h->ix[i].items += x->items;
			h->ix[i].bytes += x->bytes;
			return;
		}
	if (h->n_ix == ST_PART_HELD_IX) {
		h->ix_known = false;
		return;
	}
	h->ix[h->n_ix++] = *x;
}

static int get_fn(void *arg, uint32_t table, uint64_t lo, const st_part_held_ix *x, char *errmsg)
{
	(void)table, (void)lo, (void)errmsg;
	held_add_ix(arg, x);
	return SHOAL_OK;
}

int st_part_held_ix_get(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, st_part_held *h,
                        char *errmsg)
{
	h->ix_known = true;
	h->n_ix = 0;
	uint8_t p[PT_KEY];
	st_part_key(p, PT_HELD, table, lo);
	return held_each(txn, env, p, sizeof(p), get_fn, h, errmsg);
}

/* Counts entry (k, v) of (table, index) into h. */
static int count_entry(st_part_held *h, const MDB_val *k, const MDB_val *v, sh_arena *a,
                       char *errmsg)
{
	const uint8_t *b = k->mv_data;
	st_value e;
	char why[SH_ERRMSG_SIZE];
	sh_arena_reset(a);
	int rc = st_codec_decode(a, v->mv_data, v->mv_size, &e, why);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc == SHOAL_E_NOMEM ? rc : SHOAL_E_INTERNAL,
		               "counting the entries of index %u of table %" PRIu32 ": %s",
		               st_get_be16(b + 4), st_get_be32(b), why);
	st_part_held_ix x = {st_get_be32(b), st_get_be16(b + 4), 1, st_item_size(&e)};
	held_add_ix(h, &x);
	return SHOAL_OK;
}

/* The LSI entries of table's [lo, hi] into h. */
static int count_lsis(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                      sh_arena *a, st_part_held *h, char *errmsg)
{
	st_table_info *t;
	uint32_t nt;
	int rc = st_ix_tables(txn, env, a, &t, &nt, errmsg);
	const st_table_info *tab = NULL;
	for (uint32_t i = 0; rc == SHOAL_OK && i < nt && tab == NULL; i++)
		if (t[i].def.id == table)
			tab = &t[i];
	if (rc != SHOAL_OK || tab == NULL) /* a dropped table's entries went with it */
		return rc;
	MDB_cursor *c;
	int mrc = mdb_cursor_open(txn, env->data, &c);
	if (mrc != 0)
		return st_lmdb_err(mrc, "mdb_cursor_open(data)", errmsg);
	sh_arena tmp;
	sh_arena_init(&tmp);
	for (uint32_t j = 0; rc == SHOAL_OK && j < tab->def.n_indexes; j++) {
		const st_index_def *x = &tab->def.indexes[j];
		if (!x->local)
			continue;
		st_key from, to;
		bool has_to;
		st_part_index_range(table, x->id, lo, hi, &from, &to, &has_to);
		MDB_val k = {from.len, from.b}, v;
		for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		     mrc == 0 && st_part_key_before(&k, &to, has_to) && rc == SHOAL_OK;
		     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
			rc = count_entry(h, &k, &v, &tmp, errmsg);
		if (rc == SHOAL_OK && mrc != 0 && mrc != MDB_NOTFOUND)
			rc = st_lmdb_err(mrc, "mdb_cursor_get(data)", errmsg);
	}
	sh_arena_fini(&tmp);
	mdb_cursor_close(c);
	return rc;
}

/* count_gsis' scan. */
typedef struct gsis_arg {
	st_part_held *h;
	sh_arena tmp;
} gsis_arg;

static int gsis_fn(void *arg, const MDB_val *k, const MDB_val *v, bool *stop, char *errmsg)
{
	(void)stop;
	gsis_arg *g = arg;
	return count_entry(g->h, k, v, &g->tmp, errmsg);
}

/* The GSI entries of [lo, hi] of the GSI space into h. */
static int count_gsis(MDB_txn *txn, st_env *env, uint64_t lo, uint64_t hi, sh_arena *a,
                      st_part_held *h, char *errmsg)
{
	gsis_arg g = {.h = h};
	sh_arena_init(&g.tmp);
	int rc = st_part_gsi_each(txn, env, a, lo, hi, NULL, 0, gsis_fn, &g, errmsg);
	sh_arena_fini(&g.tmp);
	return rc;
}

int st_part_range_entries(MDB_txn *txn, st_env *env, uint32_t table, uint64_t lo, uint64_t hi,
                          st_part_held *h, char *errmsg)
{
	h->ix_known = true;
	h->n_ix = 0;
	sh_arena a;
	sh_arena_init(&a);
	int rc = table == ST_PART_GSI ? count_gsis(txn, env, lo, hi, &a, h, errmsg)
	                              : count_lsis(txn, env, table, lo, hi, &a, h, errmsg);
	sh_arena_fini(&a);
	return rc;
}

/* st_part_uncount_indexes: takes x from the matching progress entry. */
typedef struct uncount_arg {
	st_index_progress *p;
	uint32_t n;
} uncount_arg;

static int uncount_fn(void *arg, uint32_t table, uint64_t lo, const st_part_held_ix *x,
                      char *errmsg)
{
	(void)table, (void)lo, (void)errmsg;
	uncount_arg *u = arg;
	for (uint32_t i = 0; i < u->n; i++) {
		st_index_progress *p = &u->p[i];
		if (p->table_id == x->table && p->index_id == x->index) {
			p->item_count = x->items < p->item_count ? p->item_count - x->items : 0;
			p->size_bytes = x->bytes < p->size_bytes ? p->size_bytes - x->bytes : 0;
		}
	}
	return SHOAL_OK;
}

int st_part_uncount_indexes(st_env *env, st_index_progress *p, uint32_t n, char *errmsg)
{
	if (!st_part_any(env) || n == 0)
		return SHOAL_OK;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	const uint8_t prefix[2] = {PT_META, PT_HELD};
	uncount_arg u = {p, n};
	rc = held_each(txn, env, prefix, sizeof(prefix), uncount_fn, &u, errmsg);
	mdb_txn_abort(txn);
	return rc;
}
