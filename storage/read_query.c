/*
 * read_query.c -- Query and Scan: request checks in DynamoDB's order, then one
 * page read by the iterator of read.c inside one LMDB read transaction.
 *
 * Each operation is split the same way: *_prepare checks what needs no table
 * (Select, placeholders, expression syntax, the ExclusiveStartKey's values)
 * outside the transaction; *_run loads the table and resolves IndexName
 * (resolve_index: DynamoDB's index checks); then query_exec / scan_exec read
 * one key range of the base table or of the index (a GSI Query reads one
 * write shard: req->shard).  Index reads use the index's key schema for the
 * key condition and runs of truncated keys, put table keys + index keys in
 * LastEvaluatedKey, and resume strictly after the entry key an
 * ExclusiveStartKey names, whether or not that entry still exists.
 * st_page_finish (the router's merge of write shards) runs the same page loop
 * over the merged items.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "index_int.h"
#include "read.h"
#include "route.h"

typedef struct read_plan {
	st_expr *kc;     /* Query only */
	st_expr *filter; /* or NULL */
	st_expr *proj;   /* or NULL */
	st_value *esk;   /* normalised ExclusiveStartKey, or NULL */
} read_plan;

/* DynamoDB's rules on ExpressionAttributeNames / Values given without an
 * expression that could use them. */
static int attrs_presence(const st_expr_attrs *attrs, bool has_expr, bool has_value_expr,
                          const char *value_exprs, char *errmsg)
{
	if (attrs->names != NULL && !has_expr)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "ExpressionAttributeNames can only be specified when using expressions");
	if (attrs->values != NULL && !has_value_expr)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeValues can only be specified when using "
		               "expressions: %s",
		               value_exprs);
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

/* IndexName: the index, with DynamoDB's checks of the request against it
 * (unknown index, ConsistentRead on a GSI, Select ALL_ATTRIBUTES on a GSI
 * that does not project everything, a GSI still backfilling); *x stays NULL
 * without an IndexName. */
static int resolve_index(const st_table_def *t, const char *index, bool consistent,
                         st_select select, const st_index_def **x, char *errmsg)
{
	*x = NULL;
	if (index == NULL)
		return SHOAL_OK;
	const st_index_def *idx = st_table_index(t, index);
	if (idx == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The table does not have the specified index: %s", index);
	if (!idx->local && consistent)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Consistent reads are not supported on global secondary indexes");
	if (!idx->local && select == ST_SELECT_ALL_ATTRIBUTES && idx->projection != ST_PROJ_ALL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Select type "
		               "ALL_ATTRIBUTES is not supported for global secondary index %s "
		               "because its projection type is not ALL",
		               index);
	if (!idx->local && idx->status == ST_INDEX_CREATING)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Cannot read from backfilling global secondary index: %s", index);
	*x = idx;
	return SHOAL_OK;
}

/* An LSI read evaluates base items when the entries may lack what the
 * request wants (DynamoDB fetches them from the table). */
static bool lsi_fetch(const st_index_def *x, st_select select, const read_plan *p)
{
	return x != NULL && x->local && x->projection != ST_PROJ_ALL &&
	       (select == ST_SELECT_ALL_ATTRIBUTES || p->proj != NULL || p->filter != NULL);
}

/* An ExclusiveStartKey of an index read: exactly the table's and the
 * index's key attributes, with their types. */
static int index_start_check(const st_table_def *t, const st_index_def *x, const st_value *esk,
                             sh_arena *ra, const st_value **ipk, const st_value **isk,
                             const st_value **bpk, const st_value **bsk, char *errmsg)
{
	const char *names[4] = {t->key.hash.name, t->key.range.name, x->key.hash.name,
	                        x->key.range.name};
	uint32_t want = 0;
	for (int i = 0; i < 4; i++) {
		bool dup = names[i] == NULL;
		for (int j = 0; j < i && !dup; j++)
			dup = names[j] != NULL && strcmp(names[i], names[j]) == 0;
		want += dup ? 0 : 1;
	}
	if (esk->type != ST_M || esk->u.map.n != want)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provided starting key is invalid: The provided key element "
		               "does not match the schema");
	st_value *ik, *bk;
	if (st_key_extract(ra, &x->key, esk, &ik) != SHOAL_OK ||
	    st_key_extract(ra, &t->key, esk, &bk) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	int rc = st_read_start_key_check(&x->key, ik, ipk, isk, errmsg);
	if (rc == SHOAL_OK)
		rc = st_read_start_key_check(&t->key, bk, bpk, bsk, errmsg);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Query                                                                     */
/* ------------------------------------------------------------------------ */

static int query_prepare(const st_query_req *req, sh_arena *ra, read_plan *p, char *errmsg)
{
	if (req->table == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	int rc = st_read_select_check(req->select, req->projection != NULL, req->index != NULL,
	                              true, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = attrs_presence(&req->attrs,
	                    req->key_condition != NULL || req->filter != NULL ||
	                        req->projection != NULL,
	                    req->key_condition != NULL || req->filter != NULL,
	                    "FilterExpression and KeyConditionExpression are null", errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (req->key_condition == NULL)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "Either the KeyConditions or KeyConditionExpression parameter must be "
		    "specified in the request.");
	st_expr_ctx ctx;
	rc = st_expr_attrs_prepare(&ctx, ra, &req->attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_parse(&ctx, ST_EXPR_KEY_CONDITION, req->key_condition, &p->kc, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_FILTER, req->filter, &p->filter, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_PROJECTION, req->projection, &p->proj, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK)
		rc = st_read_start_key(ra, req->exclusive_start_key, &p->esk, errmsg);
	return rc;
}

/* Checks that a start key's (pk, sk) lies in the queried range (DynamoDB's
 * messages and order: sort-key predicate first, then the partition). */
static int query_start_range(const st_key_cond *kc, const st_value *pk, const st_value *sk,
                             char *errmsg)
{
	if (kc->op != ST_KC_NONE && !st_read_sk_match(kc, sk))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provided starting key does not match the range key predicate");
	if (!st_value_equal(pk, kc->hash)) {
		if (kc->op != ST_KC_NONE)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "The query can return at most one row and cannot be "
			               "restarted");
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provided starting key is outside query boundaries based on "
		               "provided conditions");
	}
	return SHOAL_OK;
}

/* Checks that the ExclusiveStartKey lies in the queried range. */
static int query_start(const st_key_schema *ks, const st_key_cond *kc, const st_value *esk,
                       const st_value **pk, const st_value **sk, char *errmsg)
{
	int rc = st_read_start_key_check(ks, esk, pk, sk, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	return query_start_range(kc, *pk, *sk, errmsg);
}

/* Reads one page from range r (Query and Scan alike): positions after the
 * start key if any, then evaluates items under the key condition kc (NULL for
 * Scan), the plan's filter and projection, Limit and the page-size limit. */
/* What a read is over: the base table (x NULL) or index x of table t. */
typedef struct read_target {
	const st_table_def *t;
	const st_index_def *x;
} read_target;

static int range_page(MDB_txn *txn, st_env *env, st_read_range *r, const read_target *rt,
                      const read_plan *p, const st_key *start, const st_value *start_sk,
                      const st_key_cond *kc, st_select select, uint32_t limit, sh_arena *a,
                      st_page *out, char *errmsg)
{
	const st_key_schema *ks = rt->x != NULL ? &rt->x->key : &rt->t->key;
	r->ks = ks;
	st_read_iter *it;
	int rc = st_read_iter_new(txn, env, r, &it, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_read_iter_start(it, start, start_sk, errmsg);
	if (rc == SHOAL_OK) {
		st_read_page_spec ps = {
		    .ks = ks,
		    .base_ks = rt->x != NULL ? &rt->t->key : NULL,
		    .kc = kc,
		    .filter = p->filter,
		    .proj = p->proj,
		    .count_only = select == ST_SELECT_COUNT,
		    .limit = limit,
		    .page_bytes = st_read_page_bytes(env),
		    .fetch_base = lsi_fetch(rt->x, select, p),
		    .table_id = rt->t->id,
		    .txn = txn,
		    .env = env,
		};
		rc = st_read_page(it, &ps, a, out, errmsg);
	}
	st_read_iter_free(it);
	return rc;
}

/* The key condition against ks, and no key attribute of ks in the filter. */
static int query_cond(const read_plan *p, const st_key_schema *ks, st_key_cond *kc, char *errmsg)
{
	int rc = st_expr_key_condition(p->kc, ks, kc, errmsg);
	if (rc != SHOAL_OK || p->filter == NULL)
		return rc;
	const char *keys[2] = {ks->hash.name, ks->range.name};
	for (int i = 0; i < 2; i++)
		if (keys[i] != NULL && st_expr_refs_attr(p->filter, keys[i], strlen(keys[i])))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Filter Expression can only contain non-primary key "
			               "attributes: Primary key attribute: %s",
			               keys[i]);
	return SHOAL_OK;
}

/* Reads one page of a Query on the base table or an index: one partition
 * (a GSI's: of write shard req->shard). */
static int query_exec(MDB_txn *txn, st_env *env, const st_query_req *req, const read_plan *p,
                      const read_target *rt, sh_arena *ra, sh_arena *a, st_page *out, char *errmsg)
{
	const st_table_def *t = rt->t;
	const st_index_def *x = rt->x;
	const st_key_schema *ks = x != NULL ? &x->key : &t->key;
	uint32_t shard = x != NULL && !x->local ? req->shard : 0;
	if (x != NULL && !x->local && shard >= x->write_shards)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Write shard %u of index %s does not exist (WriteShards: %u)", shard,
		               x->name, x->write_shards);
	st_key_cond kc;
	int rc = query_cond(p, ks, &kc, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_key start;
	const st_value *start_sk = NULL;
	if (p->esk != NULL) {
		const st_value *start_pk, *bpk = NULL, *bsk = NULL;
		if (x == NULL) {
			rc = query_start(ks, &kc, p->esk, &start_pk, &start_sk, errmsg);
		} else {
			rc = index_start_check(t, x, p->esk, ra, &start_pk, &start_sk, &bpk, &bsk,
			                       errmsg);
			if (rc == SHOAL_OK)
				rc = query_start_range(&kc, start_pk, start_sk, errmsg);
		}
		if (rc != SHOAL_OK)
			return rc;
		if (x == NULL)
			st_key_item(&start, t->id, 0, start_pk, start_sk);
		else
			st_ix_entry_key(t, x, shard, start_pk, start_sk, bpk, bsk, &start);
	}

	st_read_range r;
	if (x == NULL || x->local) {
		st_read_query_range(t->id, x != NULL ? x->id : 0, &kc, &r);
	} else {
		st_key h;
		st_key_gsi_partition(&h, t->id, x->id, shard, kc.hash);
		st_read_query_range_at(&h, &kc, &r);
	}
	r.forward = req->forward;
	{
		/* The partition's hash (bytes 6..13 of its header) is not
		 * served here while its range moves away (parts.c): a table's
		 * from its fence, a range of the GSI space from its handover
		 * (its entries stay whole until then). */
		uint64_t h = st_get_be64(r.lo.b + 6);
		rc = x == NULL || x->local ? st_part_check_range(txn, env, t->id, h, h, errmsg)
		                           : st_part_check_gsi_read(txn, env, h, h, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	rc = range_page(txn, env, &r, rt, p, p->esk != NULL ? &start : NULL, start_sk, &kc,
	                req->select, req->limit, a, out, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* The partition key value read, for the caller's accounting. */
	st_value *pk = sh_arena_alloc(a, sizeof(*pk));
	if (pk == NULL || st_value_copy(a, kc.hash, pk) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "query: out of memory");
	out->pk = pk;
	return SHOAL_OK;
}

int st_query_route(const st_query_req *req, const st_table_def *t, const st_index_def *x,
                   sh_arena *a, st_query_route_plan *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	read_plan p = {0};
	int rc = query_prepare(req, a, &p, errmsg);
	st_key_cond kc;
	if (rc == SHOAL_OK)
		rc = st_expr_key_condition(p.kc, x != NULL ? &x->key : &t->key, &kc, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	out->pk = kc.hash;
	out->n = x != NULL && !x->local && x->write_shards > 1 ? x->write_shards : 1;
	out->hash = sh_arena_calloc(a, out->n, sizeof(*out->hash));
	if (out->hash == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "query: out of memory");
	for (uint32_t s = 0; s < out->n; s++)
		out->hash[s] = x == NULL || x->local ? st_key_hash(t->id, kc.hash)
		                                     : st_index_hash(t->id, x->id, s, kc.hash);
	return SHOAL_OK;
}

int st_query(st_env *env, const st_query_req *req, sh_arena *a, st_page *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	sh_arena ra;
	sh_arena_init(&ra);
	read_plan p = {0};
	MDB_txn *txn;
	int rc = query_prepare(req, &ra, &p, errmsg);
	if (rc == SHOAL_OK)
		rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		goto out;
	st_table_info t;
	rc = st_table_load(txn, env, req->table, &ra, &t, errmsg);
	read_target rt = {&t.def, NULL};
	if (rc == SHOAL_OK)
		rc = resolve_index(&t.def, req->index, req->consistent, req->select, &rt.x, errmsg);
	if (rc == SHOAL_OK)
		rc = query_exec(txn, env, req, &p, &rt, &ra, a, out, errmsg);
	mdb_txn_abort(txn);
out:
	sh_arena_fini(&ra);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Scan                                                                      */
/* ------------------------------------------------------------------------ */

static int scan_segments(const st_scan_req *req, char *errmsg)
{
	char detail[2][160];
	int n = 0;
	if (req->segment > 999999)
		snprintf(detail[n++], sizeof(detail[0]),
		         "Value '%u' at 'segment' failed to satisfy constraint: Member must have "
		         "value less than or equal to 999999",
		         req->segment);
	if (req->total_segments > 1000000)
		snprintf(detail[n++], sizeof(detail[0]),
		         "Value '%u' at 'totalSegments' failed to satisfy constraint: Member must "
		         "have value less than or equal to 1000000",
		         req->total_segments);
	if (n == 1)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "1 validation error detected: %s",
		               detail[0]);
	if (n == 2)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "2 validation errors detected: %s; %s",
		               detail[0], detail[1]);
	/* total_segments 0 means "absent"; a Segment of 0 cannot be told from
	 * an absent one. */
	if (req->segment != 0 && req->total_segments == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The TotalSegments parameter is required but was not present in the "
		               "request when Segment parameter is present");
	if (req->total_segments != 0 && req->segment >= req->total_segments)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "The Segment parameter is zero-based and must be less than parameter "
		    "TotalSegments: Segment: %u is not less than TotalSegments: %u",
		    req->segment, req->total_segments);
	return SHOAL_OK;
}

static int scan_prepare(const st_scan_req *req, sh_arena *ra, read_plan *p, char *errmsg)
{
	if (req->table == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	int rc = st_read_select_check(req->select, req->projection != NULL, req->index != NULL,
	                              false, errmsg);
	if (rc == SHOAL_OK)
		rc = attrs_presence(&req->attrs, req->filter != NULL || req->projection != NULL,
		                    req->filter != NULL, "FilterExpression is null", errmsg);
	if (rc == SHOAL_OK)
		rc = scan_segments(req, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_expr_ctx ctx;
	rc = st_expr_attrs_prepare(&ctx, ra, &req->attrs, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_FILTER, req->filter, &p->filter, errmsg);
	if (rc == SHOAL_OK)
		rc = parse_opt(&ctx, ST_EXPR_PROJECTION, req->projection, &p->proj, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc == SHOAL_OK)
		rc = st_read_start_key(ra, req->exclusive_start_key, &p->esk, errmsg);
	return rc;
}

/* The placement hashes [*lo, *hi] a scan covers: segment s of n is
 * [ceil(s * 2^64 / n), ceil((s + 1) * 2^64 / n) - 1], so the segments tile
 * the hash space exactly; intersected with the request's hash range.  False
 * if the intersection is empty. */
static bool scan_hashes(const st_scan_req *req, uint64_t *lo, uint64_t *hi)
{
	*lo = 0;
	*hi = UINT64_MAX;
	if (req->total_segments != 0) {
		const unsigned __int128 span = (unsigned __int128)1 << 64;
		const unsigned __int128 n = req->total_segments;
		*lo = (uint64_t)(((unsigned __int128)req->segment * span + n - 1) / n);
		*hi = (uint64_t)(((unsigned __int128)(req->segment + 1) * span + n - 1) / n - 1);
	}
	if (req->hash_lo != 0 || req->hash_hi != 0) {
		if (req->hash_lo > *lo)
			*lo = req->hash_lo;
		if (req->hash_hi < *hi)
			*hi = req->hash_hi;
	}
	return *lo <= *hi;
}

/* One page of a Scan of the base table or an index, in this group: the keys
 * whose bytes 6..13 (st_key_hash; a GSI's st_index_hash) lie in the range. */
static int scan_exec(MDB_txn *txn, st_env *env, const st_scan_req *req, const read_plan *p,
                     const read_target *rt, sh_arena *ra, sh_arena *a, st_page *out, char *errmsg)
{
	uint32_t table = rt->t->id;
	const st_index_def *x = rt->x;
	uint16_t index = x != NULL ? x->id : 0;
	uint64_t lo, hi;
	bool any = scan_hashes(req, &lo, &hi);
	st_key start;
	const st_value *start_sk = NULL;
	if (p->esk != NULL) {
		const st_value *start_pk, *bpk = NULL, *bsk = NULL;
		int rc;
		if (x == NULL)
			rc = st_read_start_key_check(&rt->t->key, p->esk, &start_pk, &start_sk,
			                             errmsg);
		else
			rc = index_start_check(rt->t, x, p->esk, ra, &start_pk, &start_sk, &bpk,
			                       &bsk, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		uint64_t h;
		uint32_t shard = 0;
		if (x == NULL) {
			h = st_key_hash(table, start_pk);
		} else if (x->local) {
			h = st_key_hash(table, bpk);
		} else {
			shard = st_index_shard(table, bpk, bsk, x->write_shards);
			h = st_index_hash(table, index, shard, start_pk);
		}
		if (!any || h < lo || h > hi) {
			if (req->total_segments != 0)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "The provided starting key is invalid: Invalid "
				    "ExclusiveStartKey. Please use ExclusiveStartKey with "
				    "correct Segment. TotalSegments: %u Segment: %u",
				    req->total_segments, req->segment);
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "The provided starting key is invalid: its partition key lies "
			    "outside the scanned hash range");
		}
		if (x == NULL)
			st_key_item(&start, table, 0, start_pk, start_sk);
		else
			st_ix_entry_key(rt->t, x, shard, start_pk, start_sk, bpk, bsk, &start);
	}
	if (!any) {
		out->items = req->select == ST_SELECT_COUNT ? NULL : sh_arena_alloc(a, 0);
		if (req->select != ST_SELECT_COUNT && out->items == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
		return SHOAL_OK;
	}

	/* The hashes are refused where they overlap a range moving away
	 * (parts.c): a table's from its fence, the GSI space's from its
	 * handover. */
	{
		int rc = x == NULL || x->local
		             ? st_part_check_range(txn, env, table, lo, hi, errmsg)
		             : st_part_check_gsi_read(txn, env, lo, hi, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	st_read_range r;
	st_key_hash_bound(&r.lo, table, index, lo);
	if (hi != UINT64_MAX) {
		st_key_hash_bound(&r.hi, table, index, hi + 1);
		r.has_hi = true;
	} else {
		st_key_table(&r.hi, table, index);
		r.has_hi = st_key_prefix_end(&r.hi);
	}
	r.forward = true;
	return range_page(txn, env, &r, rt, p, p->esk != NULL ? &start : NULL, start_sk, NULL,
	                  req->select, req->limit, a, out, errmsg);
}

int st_scan(st_env *env, const st_scan_req *req, sh_arena *a, st_page *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	sh_arena ra;
	sh_arena_init(&ra);
	read_plan p = {0};
	MDB_txn *txn;
	int rc = scan_prepare(req, &ra, &p, errmsg);
	if (rc == SHOAL_OK)
		rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		goto out;
	st_table_info t;
	rc = st_table_load(txn, env, req->table, &ra, &t, errmsg);
	read_target rt = {&t.def, NULL};
	if (rc == SHOAL_OK)
		rc = resolve_index(&t.def, req->index, req->consistent, req->select, &rt.x, errmsg);
	if (rc == SHOAL_OK)
		rc = scan_exec(txn, env, req, &p, &rt, &ra, a, out, errmsg);
	mdb_txn_abort(txn);
out:
	sh_arena_fini(&ra);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The router's half of a write-sharded GSI Query (index.h)                  */
/* ------------------------------------------------------------------------ */

int st_page_finish(const st_table_def *t, const st_query_req *req, const st_value *items,
                   uint32_t n, sh_arena *a, st_page *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	sh_arena ra;
	sh_arena_init(&ra);
	read_plan p = {0};
	int rc = query_prepare(req, &ra, &p, errmsg);
	read_target rt = {t, NULL};
	if (rc == SHOAL_OK)
		rc = resolve_index(t, req->index, req->consistent, req->select, &rt.x, errmsg);
	st_key_cond kc;
	if (rc == SHOAL_OK)
		rc = query_cond(&p, rt.x != NULL ? &rt.x->key : &t->key, &kc, errmsg);
	if (rc == SHOAL_OK) {
		st_read_page_spec ps = {
		    .ks = rt.x != NULL ? &rt.x->key : &t->key,
		    .base_ks = rt.x != NULL ? &t->key : NULL,
		    .kc = NULL, /* the shards matched the key condition */
		    .filter = p.filter,
		    .proj = p.proj,
		    .count_only = req->select == ST_SELECT_COUNT,
		    .limit = 0,
		    .page_bytes = SIZE_MAX,
		    .table_id = t->id,
		};
		rc = st_read_page_items(items, n, &ps, a, out, errmsg);
	}
	if (rc == SHOAL_OK) {
		out->scanned = n;
		out->last_evaluated_key = NULL;
	}
	sh_arena_fini(&ra);
	return rc;
}
