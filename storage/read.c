/*
 * read.c -- the engine's read path: ordered iteration over LMDB and paging.
 *
 * GetItem (read_get.c), Query and Scan (read_query.c) each run inside one
 * LMDB read transaction (MDB_RDONLY; the environment is MDB_NOTLS, so the
 * transaction may live on any thread), which gives them a consistent
 * snapshot.  Request memory (normalised copies of the client's values, parsed
 * expressions, the table definition) lives in a private arena freed before
 * returning; only results are copied into the caller's arena, so nothing
 * handed out points into LMDB memory or into scratch space.
 *
 * Iteration.  An item collection is one contiguous range of LMDB keys
 * (keyenc.h): Query reads [partition header + lower sort-key bound, upper
 * bound) and Scan reads [table | index | hash lo, table | index | hash hi + 1).
 * The iterator (st_read_iter) walks that range forwards (MDB_SET_RANGE on the
 * first key, then MDB_NEXT) or backwards (MDB_SET_RANGE on the exclusive end
 * then MDB_PREV, or MDB_LAST when the end lies past the last key), and
 * hands out raw entries one at a time.  The range is only a superset of what
 * the request asks for: Query decodes every entry and applies the exact
 * sort-key condition (st_value_cmp on the item's sort key, begins_with as a
 * byte prefix) before the entry counts for anything.
 *
 * Truncated keys.  A sort key whose encoding is longer than ST_KEY_SK_INLINE
 * bytes is stored as its first ST_KEY_SK_INLINE bytes plus a digest, so every
 * such key is ST_KEY_MAX bytes long, and keys that share their first
 * ST_KEY_MAX - 16 bytes (the "run prefix") sit in digest order, not value
 * order.  Every other pair of keys is in value order: the sort-key encoding is
 * prefix-free, so a key that is not truncated differs from any other key
 * within its own length.  So when the iterator meets a truncated key it reads
 * the whole run of consecutive keys with that run prefix, decodes each entry's
 * sort key, sorts the run by real value in the direction of the walk, and then
 * hands the run out in that order (a run is held as LMDB value pointers, valid
 * for the transaction, plus decoded sort keys; each item is decoded again when
 * handed out).  To keep runs whole, range bounds are never
 * longer than the run prefix: a bound whose encoding would be longer is cut to
 * ST_KEY_MAX - 16 bytes (a lower bound then starts at the run, an upper bound
 * becomes the end of every key with that prefix), and the exact condition on
 * decoded items removes what the wider range lets in.
 *
 * Pagination (DynamoDB's rules).  An item is "evaluated" when it has been read
 * and matches the key condition; Limit counts evaluated items.  The page's
 * data size is the sum of st_item_size of evaluated items: an item is
 * evaluated if the sum including it stays within env->page_bytes (1 MiB), or
 * if it is the first of the page, otherwise the page stops before it.  The
 * FilterExpression is applied after evaluation (a page may come back empty),
 * then the projection.  Count is the number of items returned, ScannedCount
 * the number evaluated.  LastEvaluatedKey holds the key attributes of the last
 * evaluated item, and is returned when the page stopped because of Limit or
 * size and at least one more raw entry lies in the range (a peek, so a page
 * that stops exactly at the end of the range has none).
 *
 * Resuming.  An ExclusiveStartKey is turned into its LMDB key K.  If K is not
 * truncated, it is in value order with every other key and the walk starts
 * right after it (forwards: the first key >= K | 0x00; backwards: the last key
 * < K).  If K is truncated, the walk starts at the beginning of K's run in the
 * walk's direction, and when that run has been sorted its entries up to and
 * including the start key's sort value are dropped.
 */
#include "read.h"

#include <stdlib.h>
#include <string.h>

#include "../common/alloc.h"
#include "codec.h"

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

/* memcmp order of two keys (a proper prefix sorts first). */
static int key_cmp(const st_key *a, const st_key *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n > 0 ? memcmp(a->b, b->b, n) : 0;
	if (c != 0)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static int raw_cmp(const MDB_val *v, const st_key *k)
{
	size_t n = v->mv_size < k->len ? v->mv_size : k->len;
	int c = n > 0 ? memcmp(v->mv_data, k->b, n) : 0;
	if (c != 0)
		return c;
	return v->mv_size < k->len ? -1 : v->mv_size > k->len;
}

/* Cuts a range bound to at most ST_READ_RUN_PREFIX bytes so it never splits a
 * run of truncated keys. */
static void key_cut(st_key *k)
{
	if (k->len > ST_READ_RUN_PREFIX)
		k->len = ST_READ_RUN_PREFIX;
}

/* ------------------------------------------------------------------------ */
/* The iterator                                                              */
/* ------------------------------------------------------------------------ */

typedef struct run_entry {
	MDB_val data;       /* the encoded item (LMDB memory, valid for the txn) */
	const st_value *sk; /* its decoded sort key, in the run arena */
	uint8_t tail[16];   /* the key's last 16 bytes: ties of index entries */
} run_entry;

struct st_read_iter {
	MDB_cursor *cur;
	bool forward;
	st_key lo; /* first key of the range (inclusive) */
	st_key hi; /* end of the range (exclusive), when has_hi */
	bool has_hi;
	const char *sk_name; /* sort-key attribute, to order runs */
	size_t sk_len;
	st_type sk_type;

	bool done;      /* no raw entry left under the cursor */
	MDB_val ck, cd; /* the raw entry under the cursor, when !done */

	run_entry *run; /* the current run, sorted in walk order */
	size_t run_n, run_cap, run_pos;
	sh_arena run_arena; /* sort keys of the run */
	sh_arena tmp;       /* one decoded item at a time */

	bool start_in_run; /* the ExclusiveStartKey is a truncated key */
	uint8_t start_prefix[ST_READ_RUN_PREFIX];
	const st_value *start_sk;
	uint8_t start_tail[16];
};

static bool in_range(const st_read_iter *it, const MDB_val *k)
{
	if (it->forward)
		return !it->has_hi || raw_cmp(k, &it->hi) < 0;
	return raw_cmp(k, &it->lo) >= 0;
}

static int cur_get(st_read_iter *it, const st_key *k, MDB_cursor_op op, char *errmsg)
{
	MDB_val key = {0, NULL}, data = {0, NULL};
	if (k != NULL) {
		key.mv_size = k->len;
		key.mv_data = (void *)k->b;
	}
	int rc = mdb_cursor_get(it->cur, &key, &data, op);
	if (rc == MDB_NOTFOUND) {
		it->done = true;
		return SHOAL_OK;
	}
	if (rc != 0) {
		it->done = true;
		return st_lmdb_err(rc, "mdb_cursor_get(data)", errmsg);
	}
	it->ck = key;
	it->cd = data;
	it->done = false;
	return SHOAL_OK;
}

/* Moves to the next raw entry in walk order, or marks the walk done when it
 * leaves the range. */
static int cur_step(st_read_iter *it, char *errmsg)
{
	int rc = cur_get(it, NULL, it->forward ? MDB_NEXT : MDB_PREV, errmsg);
	if (rc == SHOAL_OK && !it->done && !in_range(it, &it->ck))
		it->done = true;
	return rc;
}

int st_read_iter_new(MDB_txn *txn, st_env *env, const st_read_range *r, st_read_iter **out,
                     char *errmsg)
{
	*out = NULL;
	st_read_iter *it = sh_calloc(1, sizeof(*it));
	if (it == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	int rc = mdb_cursor_open(txn, env->data, &it->cur);
	if (rc != 0) {
		sh_free(it);
		return st_lmdb_err(rc, "mdb_cursor_open(data)", errmsg);
	}
	it->forward = r->forward;
	it->lo = r->lo;
	it->hi = r->hi;
	it->has_hi = r->has_hi;
	if (r->ks != NULL && r->ks->range.name != NULL) {
		it->sk_name = r->ks->range.name;
		it->sk_len = strlen(r->ks->range.name);
		it->sk_type = r->ks->range.type;
	}
	it->done = true;
	sh_arena_init(&it->run_arena);
	sh_arena_init(&it->tmp);
	*out = it;
	return SHOAL_OK;
}

void st_read_iter_free(st_read_iter *it)
{
	if (it == NULL)
		return;
	mdb_cursor_close(it->cur);
	sh_free(it->run);
	sh_arena_fini(&it->run_arena);
	sh_arena_fini(&it->tmp);
	sh_free(it);
}

int st_read_iter_start(st_read_iter *it, const st_key *start, const st_value *start_sk,
                       char *errmsg)
{
	st_key from;
	bool has_from;
	if (it->forward) {
		from = it->lo;
		has_from = true;
	} else {
		from = it->hi;
		has_from = it->has_hi;
	}
	if (start != NULL) {
		st_key cand = *start;
		bool has_cand = true;
		if (st_key_truncated(start->b, start->len)) {
			it->start_in_run = true;
			memcpy(it->start_prefix, start->b, ST_READ_RUN_PREFIX);
			it->start_sk = start_sk;
			memcpy(it->start_tail, start->b + ST_KEY_MAX - 16, 16);
			cand.len = ST_READ_RUN_PREFIX;
			if (!it->forward)
				has_cand = st_key_prefix_end(&cand);
		} else if (it->forward) {
			cand.b[cand.len++] = 0x00; /* the smallest key after *start */
		}
		if (has_cand) {
			int c = has_from ? key_cmp(&cand, &from) : 0;
			if (!has_from || (it->forward ? c > 0 : c < 0)) {
				from = cand;
				has_from = true;
			}
		}
	}

	int rc;
	if (it->forward) {
		rc = cur_get(it, &from, MDB_SET_RANGE, errmsg);
	} else {
		it->done = true;
		rc = SHOAL_OK;
		if (has_from) {
			rc = cur_get(it, &from, MDB_SET_RANGE, errmsg);
			if (rc == SHOAL_OK && !it->done)
				rc = cur_get(it, NULL, MDB_PREV, errmsg);
			else if (rc == SHOAL_OK)
				rc = cur_get(it, NULL, MDB_LAST, errmsg);
		} else {
			rc = cur_get(it, NULL, MDB_LAST, errmsg);
		}
	}
	if (rc == SHOAL_OK && !it->done && !in_range(it, &it->ck))
		it->done = true;
	return rc;
}

/* Run order: sort-key value, then the key's last 16 bytes (a base item's
 * sort-key digest, equal for equal values; an index entry's base-key digest,
 * the order st_index_entry_cmp gives). */
static int sk_cmp_fwd(const void *a, const void *b)
{
	const run_entry *x = a, *y = b;
	int c = st_value_cmp(x->sk, y->sk);
	return c != 0 ? c : memcmp(x->tail, y->tail, 16);
}

static int sk_cmp_bwd(const void *a, const void *b)
{
	return -sk_cmp_fwd(a, b);
}

/* Decodes an entry just far enough to find its sort key (in it->tmp). */
static int entry_sk(st_read_iter *it, const MDB_val *data, const st_value **sk, char *errmsg)
{
	st_value item;
	sh_arena_reset(&it->tmp);
	int rc = st_codec_decode(&it->tmp, data->mv_data, data->mv_size, &item, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	*sk = it->sk_name != NULL ? st_map_get(&item, it->sk_name, it->sk_len) : NULL;
	if (*sk == NULL || (*sk)->type != it->sk_type)
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "corrupt item: truncated key without a sort key of type %s",
		               st_type_name(it->sk_type));
	return SHOAL_OK;
}

/* Reads the run of truncated keys that starts under the cursor, sorts it by
 * sort-key value in walk order and drops what lies at or before the
 * ExclusiveStartKey. The cursor ends on the first entry after the run. */
static int run_build(st_read_iter *it, char *errmsg)
{
	uint8_t prefix[ST_READ_RUN_PREFIX];
	memcpy(prefix, it->ck.mv_data, ST_READ_RUN_PREFIX);
	sh_arena_reset(&it->run_arena);
	it->run_n = 0;
	it->run_pos = 0;
	int rc = SHOAL_OK;
	while (!it->done && st_key_truncated(it->ck.mv_data, it->ck.mv_size) &&
	       memcmp(it->ck.mv_data, prefix, ST_READ_RUN_PREFIX) == 0) {
		if (it->run_n == it->run_cap) {
			size_t cap = it->run_cap != 0 ? it->run_cap * 2 : 16;
			run_entry *r = sh_realloc(it->run, cap * sizeof(*r));
			if (r == NULL)
				return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
			it->run = r;
			it->run_cap = cap;
		}
		const st_value *sk;
		rc = entry_sk(it, &it->cd, &sk, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		st_value *copy = sh_arena_alloc(&it->run_arena, sizeof(*copy));
		if (copy == NULL || st_value_copy(&it->run_arena, sk, copy) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
		it->run[it->run_n].data = it->cd;
		it->run[it->run_n].sk = copy;
		memcpy(it->run[it->run_n].tail, (const uint8_t *)it->ck.mv_data + ST_KEY_MAX - 16,
		       16);
		it->run_n++;
		rc = cur_step(it, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	qsort(it->run, it->run_n, sizeof(*it->run), it->forward ? sk_cmp_fwd : sk_cmp_bwd);
	if (it->start_in_run && memcmp(prefix, it->start_prefix, ST_READ_RUN_PREFIX) == 0) {
		while (it->run_pos < it->run_n) {
			const run_entry *e = &it->run[it->run_pos];
			int c = st_value_cmp(e->sk, it->start_sk);
			if (c == 0)
				c = memcmp(e->tail, it->start_tail, 16);
			if (it->forward ? c > 0 : c < 0)
				break;
			it->run_pos++;
		}
	}
	return SHOAL_OK;
}

int st_read_iter_next(st_read_iter *it, MDB_val *data, bool *have, char *errmsg)
{
	for (;;) {
		if (it->run_pos < it->run_n) {
			*data = it->run[it->run_pos++].data;
			*have = true;
			return SHOAL_OK;
		}
		if (it->done) {
			*have = false;
			return SHOAL_OK;
		}
		if (st_key_truncated(it->ck.mv_data, it->ck.mv_size)) {
			int rc = run_build(it, errmsg);
			if (rc != SHOAL_OK)
				return rc;
			continue;
		}
		*data = it->cd;
		*have = true;
		return cur_step(it, errmsg);
	}
}

/* Whether a raw entry remains in the range. */
static bool iter_more(const st_read_iter *it)
{
	return it->run_pos < it->run_n || !it->done;
}

/* ------------------------------------------------------------------------ */
/* Key conditions                                                            */
/* ------------------------------------------------------------------------ */

bool st_read_sk_match(const st_key_cond *kc, const st_value *sk)
{
	if (kc->op == ST_KC_NONE)
		return true;
	if (sk == NULL || sk->type != kc->lo->type)
		return false;
	switch (kc->op) {
	case ST_KC_EQ:
		return st_value_cmp(sk, kc->lo) == 0;
	case ST_KC_LT:
		return st_value_cmp(sk, kc->lo) < 0;
	case ST_KC_LE:
		return st_value_cmp(sk, kc->lo) <= 0;
	case ST_KC_GT:
		return st_value_cmp(sk, kc->lo) > 0;
	case ST_KC_GE:
		return st_value_cmp(sk, kc->lo) >= 0;
	case ST_KC_BETWEEN:
		return st_value_cmp(sk, kc->lo) >= 0 && sk->type == kc->hi->type &&
		       st_value_cmp(sk, kc->hi) <= 0;
	case ST_KC_BEGINS_WITH:
		return (sk->type == ST_S || sk->type == ST_B) &&
		       sk->u.str.len >= kc->lo->u.str.len &&
		       (kc->lo->u.str.len == 0 ||
		        memcmp(sk->u.str.ptr, kc->lo->u.str.ptr, kc->lo->u.str.len) == 0);
	case ST_KC_NONE:
		break;
	}
	return true;
}

static bool item_match(const st_key_cond *kc, const st_key_schema *ks, const st_value *item)
{
	const st_value *pk = st_map_get(item, ks->hash.name, strlen(ks->hash.name));
	if (pk == NULL || !st_value_equal(pk, kc->hash))
		return false;
	if (kc->op == ST_KC_NONE)
		return true;
	return st_read_sk_match(kc, st_map_get(item, ks->range.name, strlen(ks->range.name)));
}

/* The range [lo, hi) of LMDB keys that holds every item of partition kc->hash
 * satisfying the sort-key condition (and possibly more: see the top). */
void st_read_query_range(uint32_t table, uint16_t index, const st_key_cond *kc, st_read_range *r)
{
	st_key h;
	st_key_partition(&h, table, index, kc->hash);
	st_read_query_range_at(&h, kc, r);
}

void st_read_query_range_at(const st_key *hdr, const st_key_cond *kc, st_read_range *r)
{
	st_key h = *hdr;
	st_key end = h;
	r->has_hi = st_key_prefix_end(&end);
	r->hi = end;
	r->lo = h;
	st_key b;
	switch (kc->op) {
	case ST_KC_NONE:
		break;
	case ST_KC_EQ:
	case ST_KC_BEGINS_WITH:
		b = h;
		st_key_append_scalar(&b, kc->lo, kc->op == ST_KC_BEGINS_WITH);
		key_cut(&b);
		r->lo = b;
		if (st_key_prefix_end(&b)) {
			r->hi = b;
			r->has_hi = true;
		}
		break;
	case ST_KC_LT:
		b = h;
		if (!st_key_append_scalar(&b, kc->lo, false) || b.len > ST_READ_RUN_PREFIX) {
			key_cut(&b);
			if (!st_key_prefix_end(&b))
				break;
		}
		r->hi = b;
		r->has_hi = true;
		break;
	case ST_KC_LE:
		b = h;
		st_key_append_scalar(&b, kc->lo, false);
		key_cut(&b);
		if (st_key_prefix_end(&b)) {
			r->hi = b;
			r->has_hi = true;
		}
		break;
	case ST_KC_GT:
	case ST_KC_GE:
		b = h;
		st_key_append_scalar(&b, kc->lo, false);
		key_cut(&b);
		r->lo = b;
		break;
	case ST_KC_BETWEEN:
		b = h;
		st_key_append_scalar(&b, kc->lo, false);
		key_cut(&b);
		r->lo = b;
		b = h;
		st_key_append_scalar(&b, kc->hi, false);
		key_cut(&b);
		if (st_key_prefix_end(&b)) {
			r->hi = b;
			r->has_hi = true;
		}
		break;
	}
}

/* ------------------------------------------------------------------------ */
/* One page                                                                  */
/* ------------------------------------------------------------------------ */

/* Builds LastEvaluatedKey from an item: its key attributes under every schema
 * of the page (an index query will add the base table's key), copied into a. */
static int page_lek(const st_read_page_spec *ps, sh_arena *tmp, const st_value *item, sh_arena *a,
                    st_value **out, char *errmsg)
{
	st_value *k;
	int rc = st_key_extract(tmp, ps->ks, item, &k);
	if (rc == SHOAL_OK && ps->base_ks != NULL) {
		st_value *bk;
		rc = st_key_extract(tmp, ps->base_ks, item, &bk);
		for (uint32_t i = 0; rc == SHOAL_OK && i < bk->u.map.n; i++)
			rc = st_map_set(tmp, k, bk->u.map.a[i].name, bk->u.map.a[i].name_len,
			                &bk->u.map.a[i].value);
	}
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "read: building LastEvaluatedKey: %s",
		               shoal_strerror(rc));
	st_value *copy = sh_arena_alloc(a, sizeof(*copy));
	if (copy == NULL || st_value_copy(a, k, copy) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	*out = copy;
	return SHOAL_OK;
}

/* Where a page's entries come from: an iterator over LMDB (Query, Scan) or
 * an array of decoded items (st_read_page_items: the router's merge). */
typedef struct page_src {
	st_read_iter *it;
	const st_value *items;
	uint32_t n, pos;
} page_src;

/* The next entry, decoded into tmp (or borrowed from the array); *raw is its
 * encoded form for an iterator. */
static int src_next(page_src *src, sh_arena *tmp, st_value *item, MDB_val *raw, bool *have,
                    char *errmsg)
{
	if (src->it == NULL) {
		*have = src->pos < src->n;
		if (*have)
			*item = src->items[src->pos++];
		return SHOAL_OK;
	}
	int rc = st_read_iter_next(src->it, raw, have, errmsg);
	if (rc != SHOAL_OK || !*have)
		return rc;
	sh_arena_reset(tmp);
	return st_codec_decode(tmp, raw->mv_data, raw->mv_size, item, errmsg);
}

static bool src_more(const page_src *src)
{
	return src->it != NULL ? iter_more(src->it) : src->pos < src->n;
}

/* LSI entries with a partial projection: the base item instead (DynamoDB
 * fetches it from the table).  *item is replaced; false if it is gone. */
static int fetch_base(const st_read_page_spec *ps, sh_arena *tmp, st_value *item, bool *found,
                      char *errmsg)
{
	const st_value *pk, *sk;
	*found = false;
	if (st_key_check(ps->base_ks, item, ST_KEYCHECK_ITEM, &pk, &sk, NULL) != SHOAL_OK)
		return SHOAL_OK;
	st_key k;
	st_key_item(&k, ps->table_id, 0, pk, sk);
	st_value *base;
	int rc = st_item_read(ps->txn, ps->env, &k, tmp, &base, errmsg);
	if (rc == SHOAL_OK && base != NULL) {
		*item = *base;
		*found = true;
	}
	return rc;
}

static int page_loop(page_src *in, const st_read_page_spec *ps, sh_arena *a, st_page *out,
                     char *errmsg)
{
	sh_arena tmp;
	sh_arena_init(&tmp);
	st_value *vec = NULL;
	size_t cap = 0;
	uint32_t evaluated = 0, count = 0;
	size_t bytes = 0;
	MDB_val last = {0, NULL};
	st_value last_item = {0};
	bool stopped = false, more = false;
	int rc = SHOAL_OK;

	for (;;) {
		if (ps->limit != 0 && evaluated == ps->limit) {
			stopped = true;
			break;
		}
		MDB_val data;
		bool have;
		st_value item;
		rc = src_next(in, &tmp, &item, &data, &have, errmsg);
		if (rc != SHOAL_OK || !have)
			break;
		if (ps->kc != NULL && !item_match(ps->kc, ps->ks, &item))
			continue;
		st_value entry = item;
		if (ps->fetch_base) {
			bool found;
			rc = fetch_base(ps, &tmp, &item, &found, errmsg);
			if (rc != SHOAL_OK)
				break;
			if (!found)
				continue;
		}
		size_t size = st_item_size(&item);
		if (evaluated > 0 && bytes + size > ps->page_bytes) {
			stopped = true;
			more = true; /* this item is the next page's first */
			break;
		}
		evaluated++;
		bytes += size;
		last = data;
		last_item = entry;
		bool pass = true;
		if (ps->filter != NULL) {
			rc = st_expr_eval(ps->filter, &item, &pass, errmsg);
			if (rc != SHOAL_OK)
				break;
		}
		if (!pass)
			continue;
		count++;
		if (ps->count_only)
			continue;
		if (count > cap) {
			size_t ncap = cap != 0 ? cap * 2 : 16;
			st_value *v = sh_realloc(vec, ncap * sizeof(*v));
			if (v == NULL) {
				rc = sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
				break;
			}
			vec = v;
			cap = ncap;
		}
		const st_value *src = &item;
		if (ps->proj != NULL) {
			st_value *p;
			rc = st_expr_project(ps->proj, &tmp, &item, &p, errmsg);
			if (rc != SHOAL_OK)
				break;
			src = p;
		}
		if (st_value_copy(a, src, &vec[count - 1]) != SHOAL_OK) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
			break;
		}
	}

	if (rc == SHOAL_OK && stopped && (more || src_more(in))) {
		st_value item = last_item;
		if (in->it != NULL) {
			sh_arena_reset(&tmp);
			rc = st_codec_decode(&tmp, last.mv_data, last.mv_size, &item, errmsg);
		}
		if (rc == SHOAL_OK)
			rc = page_lek(ps, &tmp, &item, a, &out->last_evaluated_key, errmsg);
	}
	if (rc == SHOAL_OK && !ps->count_only) {
		out->items = sh_arena_memdup(a, vec, count * sizeof(*vec));
		if (out->items == NULL)
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	}
	if (rc == SHOAL_OK) {
		out->count = count;
		out->scanned = evaluated;
	} else {
		memset(out, 0, sizeof(*out));
	}
	sh_free(vec);
	sh_arena_fini(&tmp);
	return rc;
}

int st_read_page(st_read_iter *it, const st_read_page_spec *ps, sh_arena *a, st_page *out,
                 char *errmsg)
{
	page_src src = {.it = it};
	return page_loop(&src, ps, a, out, errmsg);
}

int st_read_page_items(const st_value *items, uint32_t n, const st_read_page_spec *ps, sh_arena *a,
                       st_page *out, char *errmsg)
{
	page_src src = {.items = items, .n = n};
	return page_loop(&src, ps, a, out, errmsg);
}
