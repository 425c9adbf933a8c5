/*
 * auth.c -- who may do what (contract: router.h "Authentication and
 * authorization"; the credentials file and SigV4: http.h, sigv4.c).
 *
 * Two front doors authenticate, one place authorizes:
 *
 *   native (server.c)  rt_auth_native: the Auth field at the end of the
 *                      message (proto/wire_auth.h), verified and cut off
 *   HTTP (http.c)      rt_sigv4_verify_as: the Authorization header
 *        |                 -> the job's principal (rt_job.who)
 *   job.c              rt_job_start -> rt_auth_authorize: the request's
 *                      action on every table it touches, against the key's
 *                      grants; AccessDeniedException as DynamoDB words it
 *
 * Both protocols check the key, the date and its skew with the same
 * function (rt_auth_check_key) and give the same exceptions (rt_auth_code).
 *
 * The derived signing key (four HMACs) is cached per thread, keyed by the
 * credentials file's load, the key, the day and the scope: a request then
 * costs one SHA-256 of its bytes and one HMAC (README "Authentication").
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire_auth.h"
#include "router/http.h"
#include "router/router.h"

/* ------------------------------------------------------------------------ */
/* Derived signing keys                                                      */
/* ------------------------------------------------------------------------ */

#define KEY_CACHE 4

typedef struct key_slot {
	uint64_t gen; /* rt_creds.gen; 0: empty */
	uint32_t index;
	char date8[9];
	char region[WIRE_AUTH_SCOPE_MAX];
	char service[WIRE_AUTH_SCOPE_MAX];
	uint8_t key[32];
} key_slot;

static __thread key_slot cache[KEY_CACHE];
static __thread uint32_t cache_next;

void rt_auth_signing_key(const rt_creds *c, const rt_cred *k, const char *date8, const char *region,
                         const char *service, uint8_t key[32])
{
	uint32_t index = (uint32_t)(k - c->v);
	for (uint32_t i = 0; i < KEY_CACHE; i++) {
		key_slot *s = &cache[i];
		if (s->gen == c->gen && s->index == index && strcmp(s->date8, date8) == 0 &&
		    strcmp(s->region, region) == 0 && strcmp(s->service, service) == 0) {
			memcpy(key, s->key, 32);
			return;
		}
	}
	wire_auth_signing_key(k->secret, date8, region, service, key);
	if (strlen(date8) >= sizeof(cache[0].date8) || strlen(region) >= WIRE_AUTH_SCOPE_MAX ||
	    strlen(service) >= WIRE_AUTH_SCOPE_MAX)
		return; /* not cached */
	key_slot *s = &cache[cache_next++ % KEY_CACHE];
	s->gen = c->gen;
	s->index = index;
	strcpy(s->date8, date8);
	strcpy(s->region, region);
	strcpy(s->service, service);
	memcpy(s->key, key, 32);
}

/* ------------------------------------------------------------------------ */
/* Native signatures                                                         */
/* ------------------------------------------------------------------------ */

static bool equal_ct(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

int rt_auth_native(const rt_creds *c, nng_msg *msg, int64_t now_s, rt_principal *who, char *errmsg)
{
	memset(who, 0, sizeof(*who));
	const uint8_t *body = nng_msg_body(msg);
	size_t len = nng_msg_len(msg);
	wire_auth a;
	char m[SH_ERRMSG_SIZE];
	int found = wire_auth_find(body, len, &a, m);
	if (c == NULL) { /* nothing to check: a signature is cut off unread */
		if (found == WIRE_AUTH_FOUND)
			nng_msg_chop(msg, len - a.signed_len);
		return SHOAL_OK;
	}
	switch (found) {
	case WIRE_AUTH_NONE:
		sh_errf(errmsg, SHOAL_E_VALIDATION, "Request is missing Authentication Token");
		return rt_auth_code(RT_AUTH_MISSING);
	case WIRE_AUTH_MALFORMED:
		sh_errf(errmsg, SHOAL_E_VALIDATION, "The request's Auth is malformed: %s", m);
		return rt_auth_code(RT_AUTH_INCOMPLETE);
	default:
		break;
	}
	if (a.key_id[0] == '\0' || a.region[0] == '\0' || a.service[0] == '\0' ||
	    !a.has_signature) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "The request's Auth requires a key id, a date, a region, a service and a "
		        "signature");
		return rt_auth_code(RT_AUTH_INCOMPLETE);
	}
	/* The scope's day is the date's own (the message carries no other). */
	char date8[9];
	snprintf(date8, sizeof(date8), "%.8s", a.date);
	const rt_cred *k;
	rt_auth_result r = rt_auth_check_key(c, a.key_id, a.date, date8, now_s, &k, errmsg);
	if (r != RT_AUTH_OK)
		return rt_auth_code(r);
	uint8_t key[32], sig[32];
	rt_auth_signing_key(c, k, date8, a.region, a.service, key);
	wire_auth_signature(key, a.date, a.region, a.service, body, a.signed_len, sig);
	if (!equal_ct(sig, a.signature, 32)) {
		sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", RT_AUTH_MISMATCH_MSG);
		return rt_auth_code(RT_AUTH_SIGNATURE);
	}
	nng_msg_chop(msg, len - a.signed_len);
	who->cred = k;
	snprintf(who->region, sizeof(who->region), "%s", a.region);
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Authorization                                                             */
/* ------------------------------------------------------------------------ */

const char *rt_auth_describe(const rt_router *rt)
{
	if (rt->creds != NULL)
		return "clients must sign (SigV4 over HTTP, signed messages natively) with a key "
		       "of the credentials file; tables are authorized by its grants";
	return "WARNING: NO AUTHENTICATION: any client may do anything (no --credentials "
	       "file; local development only)";
}

static bool pattern_matches(const char *pattern, const char *table)
{
	size_t n = strlen(pattern);
	if (n > 0 && pattern[n - 1] == '*')
		return strncmp(pattern, table, n - 1) == 0;
	return strcmp(pattern, table) == 0;
}

/* Whether k holds perm on table ("*": a grant on every table). */
static bool allowed(const rt_cred *k, unsigned perm, const char *table)
{
	if (k->all)
		return true;
	for (uint32_t i = 0; i < k->n_grants; i++)
		if ((k->grants[i].perms & perm) == perm &&
		    (strcmp(table, "*") == 0 ? strcmp(k->grants[i].table, "*") == 0
		                             : pattern_matches(k->grants[i].table, table)))
			return true;
	return false;
}

/* One check: AccessDeniedException unless who may do `action` (perm) on
 * table (and index, for the resource's ARN).  A missing table name is left
 * to the step's validation (ValidationException): no table, no access. */
static int check(const rt_principal *who, unsigned perm, const char *action, const char *table,
                 const char *index, char *errmsg)
{
	if (table == NULL || table[0] == '\0')
		return SHOAL_OK;
	const rt_cred *k = who->cred;
	if (allowed(k, perm, table))
		return SHOAL_OK;
	const char *region = who->region[0] != '\0' ? who->region : "us-east-1";
	char res[400];
	if (index != NULL && index[0] != '\0')
		snprintf(res, sizeof(res), "table/%.255s/index/%.100s", table, index);
	else
		snprintf(res, sizeof(res), "table/%.255s", table);
	return sh_errf(errmsg, SHOAL_E_ACCESS_DENIED,
	               "User: arn:aws:iam::%s:user/%s is not authorized to perform: dynamodb:%s "
	               "on resource: arn:aws:dynamodb:%s:%s:%s because no identity-based policy "
	               "allows the dynamodb:%s action",
	               k->account, k->key_id, action, region, k->account, res, action);
}

/* A read of the table a StreamArn (or shard iterator) names. */
static int check_stream(const rt_principal *who, const char *action, const char *arn, char *errmsg)
{
	char table[256];
	if (!wire_stream_table_of(arn, table, sizeof(table)))
		return SHOAL_OK; /* the step's validation refuses it */
	return check(who, RT_PERM_READ, action, table, NULL, errmsg);
}

int rt_auth_authorize(const rt_router *rt, const rt_principal *who, const Shoal__Request *in,
                      char *errmsg)
{
	if (rt->creds == NULL)
		return SHOAL_OK;
	if (who->cred == NULL)
		return sh_errf(errmsg, SHOAL_E_AUTH_MISSING,
		               "Request is missing Authentication Token");
	const rt_cred *k = who->cred;
	if (k->all)
		return SHOAL_OK;
	int rc = SHOAL_OK;
	const char *op = wire_op_name(in->op_case);
	switch (in->op_case) {
	case SHOAL__REQUEST__OP_GET_ITEM:
		return check(who, RT_PERM_READ, op, in->get_item->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_QUERY:
		return check(who, RT_PERM_READ, op, in->query->table_name, in->query->index_name,
		             errmsg);
	case SHOAL__REQUEST__OP_SCAN:
		return check(who, RT_PERM_READ, op, in->scan->table_name, in->scan->index_name,
		             errmsg);
	case SHOAL__REQUEST__OP_DESCRIBE_TABLE:
		return check(who, RT_PERM_READ, op, in->describe_table->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_LIST_TABLES:
		if (allowed(k, RT_PERM_READ, "*"))
			return SHOAL_OK;
		return check(who, RT_PERM_READ, op, "*", NULL, errmsg);
	case SHOAL__REQUEST__OP_PUT_ITEM:
		return check(who, RT_PERM_WRITE, op, in->put_item->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_UPDATE_ITEM:
		return check(who, RT_PERM_WRITE, op, in->update_item->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_DELETE_ITEM:
		return check(who, RT_PERM_WRITE, op, in->delete_item->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_CREATE_TABLE:
		return check(who, RT_PERM_DDL, op, in->create_table->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_UPDATE_TABLE:
		return check(who, RT_PERM_DDL, op, in->update_table->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_DELETE_TABLE:
		return check(who, RT_PERM_DDL, op, in->delete_table->table_name, NULL, errmsg);
	case SHOAL__REQUEST__OP_UPDATE_TIME_TO_LIVE:
		return check(who, RT_PERM_DDL, op, in->update_time_to_live->table_name, NULL,
		             errmsg);
	case SHOAL__REQUEST__OP_DESCRIBE_TIME_TO_LIVE:
		return check(who, RT_PERM_READ, op, in->describe_time_to_live->table_name, NULL,
		             errmsg);
	case SHOAL__REQUEST__OP_BATCH_GET_ITEM:
		for (size_t i = 0; rc == SHOAL_OK && i < in->batch_get_item->n_request_items; i++)
			rc = check(who, RT_PERM_READ, op,
			           in->batch_get_item->request_items[i]->table_name, NULL, errmsg);
		return rc;
	case SHOAL__REQUEST__OP_BATCH_WRITE_ITEM:
		for (size_t i = 0; rc == SHOAL_OK && i < in->batch_write_item->n_request_items; i++)
			rc =
			    check(who, RT_PERM_WRITE, op,
			          in->batch_write_item->request_items[i]->table_name, NULL, errmsg);
		return rc;
	case SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS:
		/* IAM checks TransactGetItems as GetItem on each table. */
		for (size_t i = 0; rc == SHOAL_OK && i < in->transact_get_items->n_transact_items;
		     i++) {
			const Shoal__TransactGetItem *t = in->transact_get_items->transact_items[i];
			if (t->get != NULL)
				rc = check(who, RT_PERM_READ, "GetItem", t->get->table_name, NULL,
				           errmsg);
		}
		return rc;
	case SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS:
		/* ... and TransactWriteItems as each action on its table. */
		for (size_t i = 0; rc == SHOAL_OK && i < in->transact_write_items->n_transact_items;
		     i++) {
			const Shoal__TransactWriteItem *t =
			    in->transact_write_items->transact_items[i];
			switch (t->action_case) {
			case SHOAL__TRANSACT_WRITE_ITEM__ACTION_CONDITION_CHECK:
				rc = check(who, RT_PERM_READ, "ConditionCheckItem",
				           t->condition_check->table_name, NULL, errmsg);
				break;
			case SHOAL__TRANSACT_WRITE_ITEM__ACTION_PUT:
				rc = check(who, RT_PERM_WRITE, "PutItem", t->put->table_name, NULL,
				           errmsg);
				break;
			case SHOAL__TRANSACT_WRITE_ITEM__ACTION_UPDATE:
				rc = check(who, RT_PERM_WRITE, "UpdateItem", t->update->table_name,
				           NULL, errmsg);
				break;
			case SHOAL__TRANSACT_WRITE_ITEM__ACTION_DELETE:
				rc = check(who, RT_PERM_WRITE, "DeleteItem", t->delete_->table_name,
				           NULL, errmsg);
				break;
			default:
				break; /* refused by the step's validation */
			}
		}
		return rc;
	case SHOAL__REQUEST__OP_TAG_RESOURCE:
	case SHOAL__REQUEST__OP_UNTAG_RESOURCE:
	case SHOAL__REQUEST__OP_LIST_TAGS_OF_RESOURCE: {
		/* The table of the ARN (an ARN that names none: the step's
		 * ValidationException). */
		const char *arn = in->op_case == SHOAL__REQUEST__OP_TAG_RESOURCE
		                      ? WIRE_OPT(in->tag_resource, resource_arn)
		                  : in->op_case == SHOAL__REQUEST__OP_UNTAG_RESOURCE
		                      ? WIRE_OPT(in->untag_resource, resource_arn)
		                      : WIRE_OPT(in->list_tags_of_resource, resource_arn);
		sh_arena a;
		sh_arena_init(&a);
		const char *table = NULL;
		char msg[SH_ERRMSG_SIZE];
		if (wire_table_arn_parse(&a, arn, &table, msg) == SHOAL_OK)
			rc = check(who,
			           in->op_case == SHOAL__REQUEST__OP_LIST_TAGS_OF_RESOURCE
			               ? RT_PERM_READ
			               : RT_PERM_DDL,
			           op, table, NULL, errmsg);
		sh_arena_fini(&a);
		return rc;
	}
	case SHOAL__REQUEST__OP_DESCRIBE_LIMITS:
	case SHOAL__REQUEST__OP_DESCRIBE_ENDPOINTS:
		return SHOAL_OK; /* about the service, no table's data */
	/* DynamoDB Streams: reading a stream is reading its table. */
	case SHOAL__REQUEST__OP_LIST_STREAMS:
		if (WIRE_OPT(in->list_streams, table_name) != NULL)
			return check(who, RT_PERM_READ, op, in->list_streams->table_name, NULL,
			             errmsg);
		if (allowed(k, RT_PERM_READ, "*"))
			return SHOAL_OK;
		return check(who, RT_PERM_READ, op, "*", NULL, errmsg);
	case SHOAL__REQUEST__OP_DESCRIBE_STREAM:
		return check_stream(who, op, WIRE_OPT(in->describe_stream, stream_arn), errmsg);
	case SHOAL__REQUEST__OP_GET_SHARD_ITERATOR:
		return check_stream(who, op, WIRE_OPT(in->get_shard_iterator, stream_arn), errmsg);
	case SHOAL__REQUEST__OP_GET_RECORDS:
		return check_stream(who, op, WIRE_OPT(in->get_records, shard_iterator), errmsg);
	case SHOAL__REQUEST__OP_CLUSTER_STATUS:
		if (k->admin)
			return SHOAL_OK;
		return sh_errf(errmsg, SHOAL_E_ACCESS_DENIED,
		               "User: arn:aws:iam::%s:user/%s is not authorized to perform: "
		               "shoal:ClusterStatus (the key needs the admin grant)",
		               k->account, k->key_id);
	case SHOAL__REQUEST__OP_ADMIN:
		/* Changing the cluster's shape: an unrestricted key only (those
		 * returned above), not even the admin grant (which reads). */
		return sh_errf(errmsg, SHOAL_E_ACCESS_DENIED,
		               "User: arn:aws:iam::%s:user/%s is not authorized to perform: "
		               "shoal:Admin (only a key without grants may change the cluster)",
		               k->account, k->key_id);
	case SHOAL__REQUEST__OP__NOT_SET:
		return SHOAL_OK; /* the step answers UnknownOperationException */
	default:
		/* An operation added to the protocol without a line here is
		 * refused, not let through. */
		return sh_errf(errmsg, SHOAL_E_ACCESS_DENIED,
		               "User: arn:aws:iam::%s:user/%s is not authorized to perform: "
		               "dynamodb:%s (the router has no grant that covers it)",
		               k->account, k->key_id, op);
	}
}
