/*
 * read_get.c -- GetItem, and the request preparation shared by GetItem, Query
 * and Scan: normalised copies of the client's placeholders and
 * ExclusiveStartKey, the Select rules, the read transaction.
 *
 * Everything a request needs besides its results lives in a private arena
 * (ra) that the operation frees before it returns.
 */
#include <string.h>

#include "catalog.h"
#include "read.h"

/* ------------------------------------------------------------------------ */
/* Request preparation                                                       */
/* ------------------------------------------------------------------------ */

/* A copy of map `in` rebuilt with st_map_set (so sorted as st_map_get
 * expects), each value normalised; `what` names the parameter in messages. */
static int norm_map(sh_arena *ra, const st_value *in, bool values, st_value **out, char *errmsg)
{
	const char *what = values ? "ExpressionAttributeValues" : "ExpressionAttributeNames";
	*out = NULL;
	if (in == NULL)
		return SHOAL_OK;
	if (in->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s must be a map", what);
	st_value *m = st_new_map(ra, in->u.map.n);
	if (m == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	for (uint32_t i = 0; i < in->u.map.n; i++) {
		const st_attr *at = &in->u.map.a[i];
		if (st_map_get(m, at->name, at->name_len) != NULL)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%s contains duplicate key: %.*s", what, (int)at->name_len,
			               at->name);
		st_value v;
		if (st_value_copy(ra, &at->value, &v) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
		if (values) {
			char msg[SH_ERRMSG_SIZE];
			int rc = st_value_normalize(ra, &v, msg);
			if (rc == SHOAL_E_VALIDATION)
				return sh_errf(errmsg, rc,
				               "%s contains invalid value: %s for key %.*s", what,
				               msg, (int)at->name_len, at->name);
			if (rc != SHOAL_OK)
				return sh_errf(errmsg, rc, "%s", msg);
		}
		if (st_map_set(ra, m, at->name, at->name_len, &v) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	}
	*out = m;
	return SHOAL_OK;
}

int st_expr_attrs_prepare(st_expr_ctx *ctx, sh_arena *ra, const st_expr_attrs *attrs, char *errmsg)
{
	st_expr_attrs copy = {NULL, NULL};
	st_value *names, *values;
	int rc = norm_map(ra, attrs->names, false, &names, errmsg);
	if (rc == SHOAL_OK)
		rc = norm_map(ra, attrs->values, true, &values, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	copy.names = names;
	copy.values = values;
	return st_expr_ctx_init(ctx, ra, &copy, errmsg);
}

int st_read_start_key(sh_arena *ra, const st_value *in, st_value **out, char *errmsg)
{
	*out = NULL;
	if (in == NULL)
		return SHOAL_OK;
	st_value *v = sh_arena_alloc(ra, sizeof(*v));
	if (v == NULL || st_value_copy(ra, in, v) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	char msg[SH_ERRMSG_SIZE];
	int rc = st_value_normalize(ra, v, msg);
	if (rc == SHOAL_E_VALIDATION) {
		/* DynamoDB prefixes the starting-key context to most value errors,
		 * but not to its number and set ones. */
		static const char *const bare[] = {"contains duplicates", "number set",
		                                   "numeric value", "significant digits",
		                                   "number with magnitude"};
		for (size_t i = 0; i < sizeof(bare) / sizeof(bare[0]); i++)
			if (strstr(msg, bare[i]) != NULL)
				return sh_errf(errmsg, rc, "%s", msg);
		return sh_errf(errmsg, rc, "The provided starting key is invalid: %s", msg);
	}
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "%s", msg);
	*out = v;
	return SHOAL_OK;
}

int st_read_start_key_check(const st_key_schema *ks, const st_value *esk, const st_value **pk,
                            const st_value **sk, char *errmsg)
{
	char msg[SH_ERRMSG_SIZE];
	int rc = st_key_check(ks, esk, ST_KEYCHECK_KEY, pk, sk, msg);
	if (rc == SHOAL_E_VALIDATION)
		return sh_errf(errmsg, rc, "The provided starting key is invalid: %s", msg);
	if (rc != SHOAL_OK)
		return sh_errf(errmsg, rc, "%s", msg);
	return SHOAL_OK;
}

int st_read_select_check(st_select select, bool has_projection, bool has_index, bool query,
                         char *errmsg)
{
	/* DynamoDB wraps these in the validation envelope for Query, not Scan. */
	const char *env = query ? "1 validation error detected: " : "";
	const char *what = NULL;
	switch (select) {
	case ST_SELECT_DEFAULT:
		break;
	case ST_SELECT_ALL_ATTRIBUTES:
		what = "ALL_ATTRIBUTES";
		break;
	case ST_SELECT_ALL_PROJECTED_ATTRIBUTES:
		what = "ALL_PROJECTED_ATTRIBUTES";
		break;
	case ST_SELECT_COUNT:
		what = "only the Count";
		break;
	case ST_SELECT_SPECIFIC_ATTRIBUTES:
		if (!has_projection)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%sMust specify the AttributesToGet or ProjectionExpression "
			               "when choosing to get SPECIFIC_ATTRIBUTES",
			               env);
		break;
	default:
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '%d' at 'select' failed to "
		    "satisfy constraint: Member must satisfy enum value set: "
		    "[SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]",
		    (int)select);
	}
	if (has_projection && what != NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "%sCannot specify the ProjectionExpression when choosing to get %s",
		               env, what);
	if (select == ST_SELECT_ALL_PROJECTED_ATTRIBUTES && !has_index)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an "
		               "IndexName");
	return SHOAL_OK;
}

int st_read_txn_begin(st_env *env, MDB_txn **txn, char *errmsg)
{
	int rc = mdb_txn_begin(env->env, NULL, MDB_RDONLY, txn);
	if (rc != 0)
		return st_lmdb_err(rc, "mdb_txn_begin(read)", errmsg);
	return SHOAL_OK;
}

size_t st_read_page_bytes(const st_env *env)
{
	return env->page_bytes != 0 ? env->page_bytes : ST_MAX_PAGE_BYTES;
}

int st_select_parse(const char *s)
{
	static const struct {
		const char *name;
		st_select value;
	} names[] = {
	    {"ALL_ATTRIBUTES", ST_SELECT_ALL_ATTRIBUTES},
	    {"ALL_PROJECTED_ATTRIBUTES", ST_SELECT_ALL_PROJECTED_ATTRIBUTES},
	    {"SPECIFIC_ATTRIBUTES", ST_SELECT_SPECIFIC_ATTRIBUTES},
	    {"COUNT", ST_SELECT_COUNT},
	};
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return (int)names[i].value;
	return -1;
}

/* ------------------------------------------------------------------------ */
/* GetItem                                                                   */
/* ------------------------------------------------------------------------ */

/* Parses the request's projection and copies its key, outside the txn. */
static int get_prepare(const st_get_req *req, sh_arena *ra, st_expr **proj, st_value **key,
                       char *errmsg)
{
	if (req->table == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The parameter 'TableName' is required but was not present in the "
		               "request");
	if (req->key == NULL)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "The parameter 'Key' is required but was not present in the request");
	if (req->names != NULL && req->projection == NULL)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "ExpressionAttributeNames can only be specified when using expressions");
	st_expr_ctx ctx;
	st_expr_attrs attrs = {req->names, NULL};
	int rc = st_expr_attrs_prepare(&ctx, ra, &attrs, errmsg);
	if (rc == SHOAL_OK && req->projection != NULL)
		rc = st_expr_parse(&ctx, ST_EXPR_PROJECTION, req->projection, proj, errmsg);
	if (rc == SHOAL_OK)
		rc = st_expr_ctx_check_unused(&ctx, errmsg);
	if (rc != SHOAL_OK)
		return rc;

	*key = sh_arena_alloc(ra, sizeof(**key));
	if (*key == NULL || st_value_copy(ra, req->key, *key) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	return st_value_normalize(ra, *key, errmsg);
}

int st_get_item(st_env *env, const st_get_req *req, sh_arena *a, st_value **item, char *errmsg)
{
	size_t size;
	return st_get_item_sized(env, req, a, item, &size, errmsg);
}

int st_get_in(MDB_txn *txn, st_env *env, const st_get_req *req, sh_arena *ra, sh_arena *a,
              st_value **item, size_t *size, st_key *k, char *errmsg)
{
	*item = NULL;
	*size = 0;
	st_expr *proj = NULL;
	st_value *key = NULL;
	int rc = get_prepare(req, ra, &proj, &key, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_table_info t;
	const st_value *pk, *sk;
	st_value *found = NULL;
	rc = st_table_load(txn, env, req->table, ra, &t, errmsg);
	if (rc == SHOAL_OK)
		rc = st_key_check(&t.def.key, key, ST_KEYCHECK_KEY, &pk, &sk, errmsg);
	if (rc == SHOAL_OK) {
		st_key_item(k, t.def.id, 0, pk, sk);
		/* Not served here while its range moves away (parts.c). */
		uint64_t h = st_get_be64(k->b + 6);
		rc = st_part_check_range(txn, env, t.def.id, h, h, errmsg);
	}
	if (rc == SHOAL_OK)
		rc = st_item_read(txn, env, k, ra, &found, errmsg);
	if (rc != SHOAL_OK || found == NULL)
		return rc;
	*size = st_item_size(found);
	if (proj != NULL) {
		st_value *p;
		rc = st_expr_project(proj, ra, found, &p, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		found = p;
	}
	st_value *copy = sh_arena_alloc(a, sizeof(*copy));
	if (copy == NULL || st_value_copy(a, found, copy) != SHOAL_OK)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "read: out of memory");
	*item = copy;
	return SHOAL_OK;
}

int st_get_item_sized(st_env *env, const st_get_req *req, sh_arena *a, st_value **item,
                      size_t *size, char *errmsg)
{
	*item = NULL;
	*size = 0;
	MDB_txn *txn;
	int rc = st_read_txn_begin(env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	sh_arena ra;
	sh_arena_init(&ra);
	st_key k;
	rc = st_get_in(txn, env, req, &ra, a, item, size, &k, errmsg);
	mdb_txn_abort(txn);
	sh_arena_fini(&ra);
	return rc;
}
