/*
 * harness.c -- the checks the fuzz targets share: a decoded request taken
 * further the way the router and the node take it (harness.h).
 *
 * The API-level conversions are the servers' own functions (proto/wire.h);
 * what is repeated here is only the choice of which one to call for an
 * operation, which the router makes in its steps (router/items.c, batch.c,
 * tables.c, txn.c: file-static, behind a running router) and the node in its
 * dispatch table (node/server.c, behind a running node).  The expression
 * checks are what the storage engine does before it touches LMDB: one
 * st_expr_ctx per request, every expression parsed, unused names and values
 * reported; then, beyond what a server does before a write, each parsed
 * expression is applied to the request's own item or key, so that the
 * evaluator meets the fuzzer's values too, and every item that results is
 * stored and loaded with the storage codec (store_and_load).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/fsm.h"
#include "storage/codec.h"
#include "storage/expr.h"
#include "tests/fuzz/harness.h"

static sh_arena arena;
static int arena_ready;

sh_arena *fz_arena(void)
{
	if (!arena_ready) {
		sh_arena_init(&arena);
		arena_ready = 1;
	}
	return &arena;
}

void fz_reset(void)
{
	/* Give large arenas back, so a big input does not hide leaks later. */
	if (arena_ready)
		sh_arena_fini(&arena);
	arena_ready = 0;
}

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s:%d: fuzz check failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static bool verbose(void)
{
	static int v = -1;
	if (v < 0)
		v = getenv("FUZZ_VERBOSE") != NULL;
	return v;
}

void fz_log(const char *fmt, ...)
{
	va_list ap;
	if (!verbose())
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void fz_expect(int rc, const char *errmsg, const char *what)
{
	if (verbose())
		fprintf(stderr, "  %s: %s%s%s\n", what, shoal_err_name(rc), rc ? ": " : "",
		        rc ? errmsg : "");
	if (rc == SHOAL_OK)
		return;
	FZ_ASSERT(rc == SHOAL_E_VALIDATION || rc == SHOAL_E_SERIALIZATION ||
	              rc == SHOAL_E_UNKNOWN_OPERATION || rc == SHOAL_E_LIMIT_EXCEEDED,
	          "%s: unexpected %s: %s", what, shoal_err_name(rc), errmsg);
	FZ_ASSERT(errmsg[0] != '\0' && strnlen(errmsg, SH_ERRMSG_SIZE) < SH_ERRMSG_SIZE,
	          "%s: %s without a message", what, shoal_err_name(rc));
}

/* ------------------------------------------------------------------------ */
/* Credentials                                                               */
/* ------------------------------------------------------------------------ */

static rt_grant grants[] = {
    {RT_PERM_READ, (char *)"Music"},
    {RT_PERM_READ | RT_PERM_WRITE, (char *)"Accounts"},
    {RT_PERM_READ | RT_PERM_WRITE, (char *)"Ledger*"},
    {RT_PERM_DDL, (char *)"Fans"},
};
static rt_cred keys[] = {
    {.key_id = (char *)"AKIDEXAMPLE",
     .secret = (char *)FZ_SECRET,
     .admin = true,
     .account = "123456789012",
     .grants = grants,
     .n_grants = sizeof(grants) / sizeof(grants[0])},
    {.key_id = (char *)"AKIDALL", .secret = (char *)"all", .all = true, .account = "000000000000"},
};
static const rt_creds creds = {.v = keys, .n = 2, .gen = 1};
static rt_router router;

const rt_creds *fz_creds(void)
{
	return &creds;
}

const rt_router *fz_router(void)
{
	router.creds = &creds;
	return &router;
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                               */
/* ------------------------------------------------------------------------ */

typedef struct fz_expr {
	st_expr_kind kind;
	const char *text; /* NULL: absent */
} fz_expr;

/* An item the API accepted (normalised) is stored and read back unchanged
 * (storage/codec.h: the LMDB value format), and normalising it again
 * changes nothing. */
static void store_and_load(const st_value *item)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	uint8_t *buf;
	size_t len;
	FZ_ASSERT(item->type == ST_M, "an item of type %d", (int)item->type);
	int rc = st_codec_encode(a, item, &buf, &len);
	FZ_ASSERT(rc == SHOAL_OK, "st_codec_encode: %s", shoal_err_name(rc));
	st_value back;
	rc = st_codec_decode(a, buf, len, &back, m);
	FZ_ASSERT(rc == SHOAL_OK, "st_codec_decode of st_codec_encode: %s", m);
	FZ_ASSERT(st_value_equal(item, &back), "an item changed through the codec");
	FZ_ASSERT(st_item_size(item) == st_item_size(&back), "size changed through the codec");
	st_value again = back;
	rc = st_value_normalize(a, &again, m);
	FZ_ASSERT(rc == SHOAL_OK, "normalising a normalised item: %s", m);
	FZ_ASSERT(st_value_equal(&again, item), "normalising a normalised item changed it");
}

/* Uses a parsed expression on item (may be NULL) and key (may be NULL). */
static void use_expr(const st_expr *e, st_expr_kind kind, const st_value *item, const st_value *key)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	st_value *out, *proj;
	bool b;
	int rc;
	switch (kind) {
	case ST_EXPR_CONDITION:
	case ST_EXPR_FILTER:
		fz_expect(st_expr_eval(e, item, &b, m), m, "st_expr_eval");
		m[0] = '\0';
		fz_expect(st_expr_eval(e, NULL, &b, m), m, "st_expr_eval(no item)");
		break;
	case ST_EXPR_KEY_CONDITION: {
		st_key_schema ks = {.hash = {"pk", ST_S}, .range = {"sk", ST_N}};
		st_key_cond kc;
		fz_expect(st_expr_key_condition(e, &ks, &kc, m), m, "st_expr_key_condition");
		break;
	}
	case ST_EXPR_UPDATE: {
		static const st_value empty = {.type = ST_M};
		const st_value *k = key != NULL ? key : &empty;
		for (int i = 0; i < 2; i++) {
			m[0] = '\0';
			rc = st_expr_update(e, a, i ? NULL : item, k, &out, m);
			fz_expect(rc, m, "st_expr_update");
			if (rc == SHOAL_OK) {
				FZ_ASSERT(out != NULL && out->type == ST_M, "update made no map");
				store_and_load(out);
				fz_expect(st_expr_update_project(e, a, out, &proj, m), m,
				          "st_expr_update_project");
			}
		}
		if (item != NULL)
			fz_expect(st_expr_update_project(e, a, item, &proj, m), m,
			          "st_expr_update_project(old)");
		break;
	}
	case ST_EXPR_PROJECTION:
		if (item != NULL) {
			rc = st_expr_project(e, a, item, &out, m);
			fz_expect(rc, m, "st_expr_project");
			FZ_ASSERT(rc != SHOAL_OK || out->type == ST_M, "projection made no map");
		}
		break;
	}
	(void)st_expr_refs_attr(e, "pk", 2);
}

/* One request's expressions, as the storage engine checks them. */
static int exprs(const st_expr_attrs *attrs, const fz_expr *ex, int n, const st_value *item,
                 const st_value *key)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	st_expr_ctx ctx;
	int rc = st_expr_ctx_init(&ctx, a, attrs, m);
	fz_expect(rc, m, "st_expr_ctx_init");
	if (rc != SHOAL_OK)
		return rc;
	for (int i = 0; i < n; i++) {
		if (ex[i].text == NULL)
			continue;
		st_expr *e = NULL;
		m[0] = '\0';
		rc = st_expr_parse(&ctx, ex[i].kind, ex[i].text, &e, m);
		fz_expect(rc, m, "st_expr_parse");
		if (rc != SHOAL_OK) {
			FZ_ASSERT(rc == SHOAL_E_VALIDATION, "st_expr_parse: %s", m);
			return rc;
		}
		FZ_ASSERT(e != NULL, "st_expr_parse: OK without an expression");
		use_expr(e, ex[i].kind, item, key);
	}
	m[0] = '\0';
	rc = st_expr_ctx_check_unused(&ctx, m);
	fz_expect(rc, m, "st_expr_ctx_check_unused");
	return rc;
}

int fz_expr_one(const st_expr_attrs *attrs, st_expr_kind kind, const char *text,
                const st_value *item, const st_value *key)
{
	fz_expr ex = {kind, text};
	return exprs(attrs, &ex, 1, item, key);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static int put(const Shoal__PutItemRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_put_req q;
	int rc = wire_put_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_put_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	store_and_load(q.item);
	fz_expr ex[] = {{ST_EXPR_CONDITION, q.condition}};
	return exprs(&q.attrs, ex, 1, q.item, NULL);
}

static int update(const Shoal__UpdateItemRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_update_req q;
	int rc = wire_update_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_update_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	fz_expr ex[] = {{ST_EXPR_UPDATE, q.update}, {ST_EXPR_CONDITION, q.condition}};
	return exprs(&q.attrs, ex, 2, q.key, q.key);
}

static int del(const Shoal__DeleteItemRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_delete_req q;
	int rc = wire_delete_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_delete_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	fz_expr ex[] = {{ST_EXPR_CONDITION, q.condition}};
	return exprs(&q.attrs, ex, 1, q.key, q.key);
}

static int get(const Shoal__GetItemRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_get_req q;
	int rc = wire_get_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_get_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	st_expr_attrs attrs = {.names = q.names};
	fz_expr ex[] = {{ST_EXPR_PROJECTION, q.projection}};
	return exprs(&attrs, ex, 1, q.key, q.key);
}

static int query(const Shoal__QueryRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_query_req q;
	int rc = wire_query_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_query_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	fz_expr ex[] = {{ST_EXPR_KEY_CONDITION, q.key_condition},
	                {ST_EXPR_FILTER, q.filter},
	                {ST_EXPR_PROJECTION, q.projection}};
	return exprs(&q.attrs, ex, 3, q.exclusive_start_key, q.exclusive_start_key);
}

static int scan(const Shoal__ScanRequest *pb)
{
	char m[SH_ERRMSG_SIZE] = "";
	st_scan_req q;
	int rc = wire_scan_req_from_pb(fz_arena(), pb, &q, m);
	fz_expect(rc, m, "wire_scan_req_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	fz_expr ex[] = {{ST_EXPR_FILTER, q.filter}, {ST_EXPR_PROJECTION, q.projection}};
	return exprs(&q.attrs, ex, 2, q.exclusive_start_key, q.exclusive_start_key);
}

/* Each member as its single-item operation (router/batch.c, stage 1). */
static int batch_write(const Shoal__BatchWriteItemRequest *in)
{
	int rc = SHOAL_OK;
	for (size_t i = 0; i < in->n_request_items && rc == SHOAL_OK; i++) {
		const Shoal__TableWriteRequests *t = in->request_items[i];
		for (size_t k = 0; k < t->n_requests && rc == SHOAL_OK; k++) {
			const Shoal__WriteRequest *w = t->requests[k];
			if (w->request_case == SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST) {
				Shoal__PutItemRequest f = SHOAL__PUT_ITEM_REQUEST__INIT;
				WIRE_SET(&f, table_name, t->table_name);
				f.item = w->put_request->item;
				rc = put(&f);
			} else if (w->request_case ==
			           SHOAL__WRITE_REQUEST__REQUEST_DELETE_REQUEST) {
				Shoal__DeleteItemRequest f = SHOAL__DELETE_ITEM_REQUEST__INIT;
				WIRE_SET(&f, table_name, t->table_name);
				f.key = w->delete_request->key;
				rc = del(&f);
			}
		}
	}
	return rc;
}

static int batch_get(const Shoal__BatchGetItemRequest *in)
{
	int rc = SHOAL_OK;
	for (size_t i = 0; i < in->n_request_items && rc == SHOAL_OK; i++) {
		const Shoal__TableKeysAndAttributes *ka = in->request_items[i];
		for (size_t k = 0; k < ka->n_keys && rc == SHOAL_OK; k++) {
			Shoal__GetItemRequest f = SHOAL__GET_ITEM_REQUEST__INIT;
			WIRE_SET(&f, table_name, ka->table_name);
			f.key = ka->keys[k];
			if (WIRE_HAS(ka, projection_expression))
				WIRE_SET(&f, projection_expression, ka->projection_expression);
			f.expression_attribute_names = ka->expression_attribute_names;
			f.consistent_read = ka->consistent_read;
			rc = get(&f);
		}
	}
	return rc;
}

static int txn_action(const st_txn_action *act)
{
	switch (act->kind) {
	case ST_TXA_CHECK: {
		fz_expr ex[] = {{ST_EXPR_CONDITION, act->u.check.condition}};
		return exprs(&act->u.check.attrs, ex, 1, act->u.check.key, act->u.check.key);
	}
	case ST_TXA_PUT: {
		fz_expr ex[] = {{ST_EXPR_CONDITION, act->u.put.condition}};
		return exprs(&act->u.put.attrs, ex, 1, act->u.put.item, NULL);
	}
	case ST_TXA_UPDATE: {
		fz_expr ex[] = {{ST_EXPR_UPDATE, act->u.update.update},
		                {ST_EXPR_CONDITION, act->u.update.condition}};
		return exprs(&act->u.update.attrs, ex, 2, act->u.update.key, act->u.update.key);
	}
	case ST_TXA_DELETE: {
		fz_expr ex[] = {{ST_EXPR_CONDITION, act->u.del.condition}};
		return exprs(&act->u.del.attrs, ex, 1, act->u.del.key, act->u.del.key);
	}
	}
	FZ_ASSERT(0, "transaction action of kind %d", (int)act->kind);
}

static int transact_write(const Shoal__TransactWriteItemsRequest *in)
{
	char m[SH_ERRMSG_SIZE] = "";
	int rc = wire_txn_write_check(in, m);
	fz_expect(rc, m, "wire_txn_write_check");
	if (rc != SHOAL_OK)
		return rc;
	uint8_t digest[16];
	wire_txn_digest(in, digest);
	for (size_t i = 0; i < in->n_transact_items; i++) {
		st_txn_action act;
		m[0] = '\0';
		rc = wire_txn_action_from_pb(fz_arena(), in->transact_items[i], i + 1, &act, m);
		fz_expect(rc, m, "wire_txn_action_from_pb");
		if (rc != SHOAL_OK)
			return rc;
		const char *table;
		const st_value *key;
		bool item;
		wire_txn_action_target(&act, &table, &key, &item);
		if ((rc = txn_action(&act)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int transact_get(const Shoal__TransactGetItemsRequest *in)
{
	char m[SH_ERRMSG_SIZE] = "";
	int rc = wire_txn_get_check(in, m);
	fz_expect(rc, m, "wire_txn_get_check");
	if (rc != SHOAL_OK)
		return rc;
	for (size_t i = 0; i < in->n_transact_items; i++) {
		st_get_req g;
		m[0] = '\0';
		rc = wire_txn_get_from_pb(fz_arena(), in->transact_items[i]->get, &g, m);
		fz_expect(rc, m, "wire_txn_get_from_pb");
		if (rc != SHOAL_OK)
			return rc;
		st_expr_attrs attrs = {.names = g.names};
		fz_expr ex[] = {{ST_EXPR_PROJECTION, g.projection}};
		if ((rc = exprs(&attrs, ex, 1, g.key, g.key)) != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

/* CreateTable as the router converts it, then as group 0 stores it and
 * every group reads it back (wire_table_define_*: the FSM's path).  The
 * router's conversion does not make every check the catalog makes
 * (st_catalog_check_def, e.g. an empty NonKeyAttributes name): those are
 * refused by group 0's apply, as a ValidationException, one Raft entry
 * later -- allowed here, since that is how the servers behave. */
static int create_table(const Shoal__CreateTableRequest *in)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	st_table_def def;
	int rc = wire_create_table_from_pb(a, in, &def, m);
	fz_expect(rc, m, "wire_create_table_from_pb");
	if (rc != SHOAL_OK)
		return rc;
	Shoal__TableDefine *td;
	rc = wire_table_define_to_pb(a, &def, &td, m);
	FZ_ASSERT(rc == SHOAL_OK, "wire_table_define_to_pb of a converted table: %s", m);
	st_table_def back;
	m[0] = '\0';
	rc = wire_table_define_from_pb(a, td, &back, m);
	fz_expect(rc, m, "wire_table_define_from_pb (group 0's check)");
	return rc;
}

int fz_request(const Shoal__Request *r)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	const char *s;
	uint32_t limit;
	int rc;
	(void)wire_request_table(r);
	(void)wire_op_name(r->op_case);
	switch (r->op_case) {
	case SHOAL__REQUEST__OP_GET_ITEM:
		return get(r->get_item);
	case SHOAL__REQUEST__OP_PUT_ITEM:
		return put(r->put_item);
	case SHOAL__REQUEST__OP_UPDATE_ITEM:
		return update(r->update_item);
	case SHOAL__REQUEST__OP_DELETE_ITEM:
		return del(r->delete_item);
	case SHOAL__REQUEST__OP_QUERY:
		return query(r->query);
	case SHOAL__REQUEST__OP_SCAN:
		return scan(r->scan);
	case SHOAL__REQUEST__OP_BATCH_GET_ITEM:
		return batch_get(r->batch_get_item);
	case SHOAL__REQUEST__OP_BATCH_WRITE_ITEM:
		return batch_write(r->batch_write_item);
	case SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS:
		return transact_write(r->transact_write_items);
	case SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS:
		return transact_get(r->transact_get_items);
	case SHOAL__REQUEST__OP_CREATE_TABLE:
		return create_table(r->create_table);
	case SHOAL__REQUEST__OP_DESCRIBE_TABLE:
		rc = wire_describe_table_from_pb(a, r->describe_table, &s, m);
		fz_expect(rc, m, "wire_describe_table_from_pb");
		return rc;
	case SHOAL__REQUEST__OP_LIST_TABLES:
		rc = wire_list_tables_from_pb(a, r->list_tables, &s, &limit, m);
		fz_expect(rc, m, "wire_list_tables_from_pb");
		return rc;
	case SHOAL__REQUEST__OP_DELETE_TABLE:
		rc = wire_delete_table_from_pb(a, r->delete_table, &s, m);
		fz_expect(rc, m, "wire_delete_table_from_pb");
		return rc;
	case SHOAL__REQUEST__OP_UPDATE_TABLE: {
		st_table_update_req u;
		rc = wire_update_table_from_pb(a, r->update_table, &u, m);
		fz_expect(rc, m, "wire_update_table_from_pb");
		return rc;
	}
	default:
		return SHOAL_OK; /* ClusterStatus, no operation: nothing to convert */
	}
}

int fz_node_request(const Shoal__NodeRequest *nr)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	int rc;
	int set = (nr->request != NULL) + (nr->define_table != NULL) + (nr->drop_table != NULL) +
	          (nr->group_status != 0) + (nr->list_catalog != 0) + (nr->update_table != NULL) +
	          (nr->activate_index != NULL) + (nr->index_ship != NULL) +
	          (nr->txn_write != NULL) + (nr->txn_decide != NULL) + (nr->txn_finish != NULL) +
	          (nr->txn_acks != NULL) + (nr->txn_status != NULL) + (nr->cap_report != NULL) +
	          (nr->scrub_check != NULL);
	if (set != 1 || nr->n_batch > 0)
		return SHOAL_E_VALIDATION; /* classify() refuses it */
	if (nr->request != NULL)
		return fz_request(nr->request);
	if (nr->define_table != NULL) {
		const Shoal__TableDefine *d = nr->define_table;
		if (d->def == NULL)
			return SHOAL_E_VALIDATION;
		st_table_def def;
		rc = wire_create_table_from_pb(a, d->def, &def, m);
		fz_expect(rc, m, "wire_create_table_from_pb(define_table)");
		if (rc != SHOAL_OK)
			return rc;
		/* What the FSM does with it once it is in the log. */
		m[0] = '\0';
		rc = wire_table_define_from_pb(a, d, &def, m);
		fz_expect(rc, m, "wire_table_define_from_pb");
		return rc;
	}
	if (nr->update_table != NULL) {
		if (nr->update_table->update == NULL)
			return SHOAL_E_VALIDATION;
		st_table_update_req u;
		rc = wire_update_table_from_pb(a, nr->update_table->update, &u, m);
		fz_expect(rc, m, "wire_update_table_from_pb(update_table)");
		return rc;
	}
	if (nr->index_ship != NULL) {
		/* prepare_index_ship's conversion (fuzz_index_ship has more). */
		const Shoal__IndexApply *ia = nr->index_ship;
		if (ia->n_deltas == 0)
			return SHOAL_E_VALIDATION;
		st_delta *d = sh_arena_calloc(a, ia->n_deltas, sizeof(*d));
		FZ_ASSERT(d != NULL, "out of memory for %zu deltas", ia->n_deltas);
		rc = node_index_deltas_from_pb(ia, d, m);
		fz_expect(rc, m, "node_index_deltas_from_pb");
		return rc;
	}
	/* Transactions: checked by the FSM when applied (fuzz_fsm). */
	return SHOAL_OK;
}
