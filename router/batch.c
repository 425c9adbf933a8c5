/*
 * batch.c -- BatchGetItem and BatchWriteItem.
 *
 * Both run in four steps:
 *  1. checks that fail the whole request, in DynamoDB's words: RequestItems
 *     empty, more than 100 keys / 25 writes, a table's list empty, unknown
 *     tables (ResourceNotFoundException), each key or item through the same
 *     API checks as its single-item operation (a GetItem / PutItem /
 *     DeleteItem request is built around it for wire_*_req_from_pb), the key
 *     against the table's key schema, item size, and two requests on one
 *     item ("Provided list of item keys contains duplicates");
 *  2. every key is hashed to its group and the batch split into one part per
 *     group (rt_batch_split, pure);
 *  3. the parts go out in parallel (one wave of calls), each a BatchGetItem /
 *     BatchWriteItem of just that group's keys; a part whose group answers
 *     ResourceNotFound has its tables repaired and is sent once more (job.c);
 *  4. the answers merge: items per table, and the keys or writes of parts
 *     that were throttled, whose group could not be reached, or whose group
 *     no longer serves a key (WRONG_GROUP: a partition moved) come back as
 *     UnprocessedKeys / UnprocessedItems -- not an error, as DynamoDB does,
 *     unless no part at all succeeded (then ProvisionedThroughputExceeded,
 *     ServiceUnavailable, or for a moved partition the whole batch again on
 *     a new map: job.c; a part that was applied is never sent twice).  Any other error from a part
 * (a validation only a node can make) fails the request with that error.  Each part carries the
 * request's ReturnConsumedCapacity; the parts' ConsumedCapacity lists add up per table
 * (wire_capacity_list_add).
 *
 *   phase  what                                                   next
 *   -----  -----------------------------------------------------  ----------
 *   0      stage 1; stage 2's tables (RT_WAIT: refresh, again),
 *          keys, duplicates; the parts' calls                     1
 *   1      the merge                                              done
 */
#include <string.h>

#include "router/router.h"

#define BATCH_GET_MAX   100
#define BATCH_WRITE_MAX 25

/* ------------------------------------------------------------------------ */
/* Pure parts                                                                */
/* ------------------------------------------------------------------------ */

int rt_batch_find_duplicate(const rt_batch_key *keys, uint32_t n)
{
	for (uint32_t j = 1; j < n; j++)
		for (uint32_t i = 0; i < j; i++) {
			const rt_batch_key *x = &keys[i], *y = &keys[j];
			if (x->table != y->table || !st_value_equal(x->pk, y->pk))
				continue;
			if ((x->sk == NULL) != (y->sk == NULL))
				continue;
			if (x->sk == NULL || st_value_equal(x->sk, y->sk))
				return (int)j;
		}
	return -1;
}

uint32_t rt_batch_split(const rt_batch_key *keys, uint32_t n, uint32_t *part_of, uint32_t *groups)
{
	uint32_t parts = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = 0;
		while (p < parts && groups[p] != keys[i].group)
			p++;
		if (p == parts)
			groups[parts++] = keys[i].group;
		part_of[i] = p;
	}
	return parts;
}

/* ------------------------------------------------------------------------ */
/* Running parts                                                             */
/* ------------------------------------------------------------------------ */

typedef struct part {
	rt_call *call;
	Shoal__NodeRequest nr;
	Shoal__Request req;
	const rt_table **tables; /* tables in this part (for the repair) */
	uint32_t n_tables;
} part;

static void add_table(part *p, const rt_table *t)
{
	for (uint32_t i = 0; i < p->n_tables; i++)
		if (p->tables[i] == t)
			return;
	p->tables[p->n_tables++] = t;
}

/* The parts' calls (any: eventually consistent reads). */
static int issue_parts(rt_job *j, part *parts, uint32_t n, const uint32_t *groups, const bool *any)
{
	for (uint32_t p = 0; p < n; p++) {
		rt_call *c = rt_job_call(j, groups[p]);
		if (c == NULL)
			return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
		c->any_replica = any != NULL && any[p];
		shoal__node_request__init(&parts[p].nr);
		parts[p].nr.request = &parts[p].req;
		int rc = rt_call_request(j, c, &parts[p].nr);
		if (rc != SHOAL_OK)
			return rc;
		rt_call_repairs(c, parts[p].tables, parts[p].n_tables);
		parts[p].call = c;
	}
	return RT_WAIT;
}

/* How a finished part ended, for the merge. */
typedef enum part_end { PART_OK, PART_UNPROCESSED, PART_FAILED } part_end;

static part_end part_outcome(const part *p, int *code)
{
	if (p->call->rc != SHOAL_OK) {
		*code = p->call->rc;
		return p->call->rc == SHOAL_E_UNAVAILABLE ? PART_UNPROCESSED : PART_FAILED;
	}
	*code = p->call->code;
	if (*code == SHOAL_OK)
		return PART_OK;
	/* WRONG_GROUP: the part's group no longer serves one of its keys
	 * (a partition moved) and did nothing. */
	if (*code == SHOAL_E_THROUGHPUT || *code == SHOAL_E_UNAVAILABLE ||
	    *code == SHOAL_E_REQUEST_LIMIT || *code == SHOAL_E_WRONG_GROUP)
		return PART_UNPROCESSED;
	return PART_FAILED;
}

static int fail_with_part(rt_job *j, part *p)
{
	return rt_job_pass(j, p->call);
}

/* Every part unprocessed: the whole request fails, as DynamoDB does -- or,
 * when a part met a moved partition, with WRONG_GROUP, which job.c answers
 * by running the batch again on a new map (nothing of it was applied). */
static int all_unprocessed(rt_job *j, const part *parts, uint32_t n)
{
	bool moved = false;
	for (uint32_t i = 0; i < n; i++) {
		int code;
		part_outcome(&parts[i], &code);
		if (code == SHOAL_E_THROUGHPUT)
			return rt_job_fail(
			    j, SHOAL_E_THROUGHPUT,
			    "The level of configured provisioned throughput for the table "
			    "was exceeded. Consider increasing your provisioning level "
			    "with the UpdateTable API.");
		moved |= code == SHOAL_E_WRONG_GROUP;
	}
	if (moved)
		return rt_job_fail(j, SHOAL_E_WRONG_GROUP, "a partition of the batch moved");
	const part *p = &parts[0];
	if (p->call->rc != SHOAL_OK)
		return rt_job_fail(j, SHOAL_E_UNAVAILABLE, "%s", p->call->errmsg);
	Shoal__NodeResponse *resp = rt_call_resp(p->call, &j->arena);
	return rt_job_fail(j, SHOAL_E_UNAVAILABLE, "%s",
	                   resp != NULL && resp->response != NULL && resp->response->message != NULL
	                       ? resp->response->message
	                       : "Service unavailable");
}

static int nomem(rt_job *j)
{
	return rt_job_fail(j, SHOAL_E_NOMEM, "out of memory");
}

/* ------------------------------------------------------------------------ */
/* BatchWriteItem                                                            */
/* ------------------------------------------------------------------------ */

/* Appends n writes of table `name` to a list of TableWriteRequests (one
 * entry per table; cap: room for entries and for writes per entry). */
static int add_writes(sh_arena *a, Shoal__TableWriteRequests ***list, size_t *n_list, size_t cap,
                      const char *name, Shoal__WriteRequest *const *w, size_t n)
{
	Shoal__TableWriteRequests *e = NULL;
	for (size_t i = 0; i < *n_list && e == NULL; i++)
		if (strcmp((*list)[i]->table_name, name) == 0)
			e = (*list)[i];
	if (e == NULL) {
		if (*list == NULL && (*list = sh_arena_calloc(a, cap, sizeof(**list))) == NULL)
			return SHOAL_E_NOMEM;
		if (*n_list >= cap)
			return SHOAL_E_INTERNAL;
		e = sh_arena_alloc(a, sizeof(*e));
		if (e == NULL)
			return SHOAL_E_NOMEM;
		shoal__table_write_requests__init(e);
		e->table_name = (char *)name;
		e->requests = sh_arena_calloc(a, cap, sizeof(*e->requests));
		if (e->requests == NULL)
			return SHOAL_E_NOMEM;
		(*list)[(*n_list)++] = e;
	}
	for (size_t i = 0; i < n; i++) {
		if (e->n_requests >= cap)
			return SHOAL_E_INTERNAL;
		e->requests[e->n_requests++] = w[i];
	}
	return SHOAL_OK;
}

static const char MAP_VALUE_LEN[] =
    "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map "
    "value must satisfy constraint: [Member must have length less than or equal to 25, Member "
    "must have length greater than or equal to 1]";

/* Stage 1 for one write: the API checks of its single-item operation, and
 * its normalised key or item (*item tells which). */
static int check_write(rt_job *j, const Shoal__BatchWriteItemRequest *in, const char *table,
                       const Shoal__WriteRequest *w, const st_value **key, bool *item)
{
	int rc;
	if (w->request_case == SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST) {
		Shoal__PutItemRequest f = SHOAL__PUT_ITEM_REQUEST__INIT;
		WIRE_SET(&f, table_name, (char *)table);
		f.item = w->put_request->item;
		if (WIRE_HAS(in, return_consumed_capacity))
			WIRE_SET(&f, return_consumed_capacity, in->return_consumed_capacity);
		if (WIRE_HAS(in, return_item_collection_metrics))
			WIRE_SET(&f, return_item_collection_metrics,
			         in->return_item_collection_metrics);
		st_put_req q;
		if ((rc = wire_put_req_from_pb(&j->arena, &f, &q, j->errmsg)) != SHOAL_OK)
			return rc;
		*key = q.item;
		*item = true;
		if (st_item_size(q.item) > ST_MAX_ITEM_SIZE)
			return rt_job_fail(j, SHOAL_E_VALIDATION,
			                   "Item size has exceeded the maximum allowed size");
		return SHOAL_OK;
	}
	if (w->request_case == SHOAL__WRITE_REQUEST__REQUEST_DELETE_REQUEST) {
		Shoal__DeleteItemRequest f = SHOAL__DELETE_ITEM_REQUEST__INIT;
		WIRE_SET(&f, table_name, (char *)table);
		f.key = w->delete_request->key;
		st_delete_req q;
		if ((rc = wire_delete_req_from_pb(&j->arena, &f, &q, j->errmsg)) != SHOAL_OK)
			return rc;
		*key = q.key;
		*item = false;
		return SHOAL_OK;
	}
	return rt_job_fail(j, SHOAL_E_VALIDATION,
	                   "Supplied AttributeValue has more than one datatypes set, must contain "
	                   "exactly one of the supported datatypes");
}

/* Stage 2 for one key or item: against the table's key schema. */
static int place_key(rt_job *j, const rt_table *t, const st_value *key, bool item, rt_batch_key *k)
{
	char msg[SH_ERRMSG_SIZE];
	int rc = st_route_key(&t->def.key, key, item, &k->pk, &k->sk, msg);
	/* DynamoDB words a bad key in a batch the same for puts and deletes. */
	if (rc == SHOAL_E_VALIDATION && (strstr(msg, "Missing the key") != NULL ||
	                                 strstr(msg, "Type mismatch for key") != NULL))
		return rt_job_fail(j, rc, "The provided key element does not match the schema");
	if (rc != SHOAL_OK)
		return rt_job_fail(j, rc, "%s", msg);
	k->table = t->id;
	k->group = rt_group_of(j->rt, t->id, k->pk);
	return SHOAL_OK;
}

static const char *table_name_or_null(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* The state between the phases of a batch. */
typedef struct batch_st {
	part *parts;
	uint32_t np;
} batch_st;

/* BatchWriteItem's checks and parts (phase 0). */
static int write_plan(rt_job *j)
{
	const Shoal__BatchWriteItemRequest *in = j->in->batch_write_item;
	batch_st *st;
	if (in->n_request_items == 0)
		return rt_job_fail(
		    j, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '{}' at 'requestItems' failed to "
		    "satisfy constraint: Member must have length greater than or equal "
		    "to 1");
	size_t total = 0;
	for (size_t i = 0; i < in->n_request_items; i++) {
		size_t n = in->request_items[i]->n_requests;
		if (n == 0 || n > BATCH_WRITE_MAX)
			return rt_job_fail(j, SHOAL_E_VALIDATION, "%s", MAP_VALUE_LEN);
		total += n;
	}
	if (total > BATCH_WRITE_MAX)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "Too many items requested for the BatchWriteItem call");

	/* Stage 1: every write's API checks. */
	rt_batch_key keys[BATCH_WRITE_MAX];
	const st_value *kv[BATCH_WRITE_MAX];
	bool is_item[BATCH_WRITE_MAX];
	uint32_t nk = 0;
	int rc;
	for (size_t i = 0; i < in->n_request_items; i++) {
		const Shoal__TableWriteRequests *tw = in->request_items[i];
		for (size_t w = 0; w < tw->n_requests; w++, nk++)
			if ((rc = check_write(j, in, table_name_or_null(tw->table_name),
			                      tw->requests[w], &kv[nk], &is_item[nk])) != SHOAL_OK)
				return rc;
	}
	/* Stage 2: tables, keys, duplicates. */
	const rt_table *tables[BATCH_WRITE_MAX];
	nk = 0;
	for (size_t i = 0; i < in->n_request_items; i++) {
		const Shoal__TableWriteRequests *tw = in->request_items[i];
		if ((rc = rt_job_table(j, tw->table_name, false, &tables[i])) != SHOAL_OK)
			return rc;
		for (size_t w = 0; w < tw->n_requests; w++, nk++)
			if ((rc = place_key(j, tables[i], kv[nk], is_item[nk], &keys[nk])) !=
			    SHOAL_OK)
				return rc;
	}
	if (rt_batch_find_duplicate(keys, nk) >= 0)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "Provided list of item keys contains duplicates");

	/* Split and send. */
	uint32_t part_of[BATCH_WRITE_MAX], groups[BATCH_WRITE_MAX];
	uint32_t np = rt_batch_split(keys, nk, part_of, groups);
	part *parts = sh_arena_calloc(&j->arena, np, sizeof(*parts));
	if (parts == NULL)
		return nomem(j);
	for (uint32_t p = 0; p < np; p++) {
		Shoal__BatchWriteItemRequest *bw = sh_arena_alloc(&j->arena, sizeof(*bw));
		parts[p].tables =
		    sh_arena_calloc(&j->arena, in->n_request_items, sizeof(rt_table *));
		if (bw == NULL || parts[p].tables == NULL)
			return nomem(j);
		shoal__batch_write_item_request__init(bw);
		size_t n_list = 0;
		nk = 0;
		for (size_t i = 0; i < in->n_request_items; i++) {
			const Shoal__TableWriteRequests *tw = in->request_items[i];
			for (size_t w = 0; w < tw->n_requests; w++, nk++) {
				if (part_of[nk] != p)
					continue;
				if (add_writes(&j->arena, &bw->request_items, &n_list,
				               BATCH_WRITE_MAX, tw->table_name, &tw->requests[w],
				               1) != SHOAL_OK)
					return nomem(j);
				add_table(&parts[p], tables[i]);
			}
		}
		bw->n_request_items = n_list;
		if (WIRE_HAS(in, return_consumed_capacity))
			WIRE_SET(bw, return_consumed_capacity, in->return_consumed_capacity);
		if (WIRE_HAS(in, return_item_collection_metrics))
			WIRE_SET(bw, return_item_collection_metrics,
			         in->return_item_collection_metrics);
		shoal__request__init(&parts[p].req);
		parts[p].req.request_id = j->in->request_id;
		parts[p].req.op_case = SHOAL__REQUEST__OP_BATCH_WRITE_ITEM;
		parts[p].req.batch_write_item = bw;
	}
	if ((st = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*st))) == NULL)
		return nomem(j);
	st->parts = parts;
	st->np = np;
	j->phase = 1;
	return issue_parts(j, parts, np, groups, NULL);
}

/* BatchWriteItem's merge (phase 1). */
static int write_merge(rt_job *j)
{
	const Shoal__BatchWriteItemRequest *in = j->in->batch_write_item;
	batch_st *st = j->st;
	part *parts = st->parts;
	uint32_t np = st->np;
	(void)in;

	/* Merge. */
	Shoal__BatchWriteItemResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	if (out == NULL)
		return nomem(j);
	shoal__batch_write_item_response__init(out);
	size_t n_un = 0;
	uint32_t unprocessed = 0;
	for (uint32_t p = 0; p < np; p++) {
		int code;
		part_end end = part_outcome(&parts[p], &code);
		if (end == PART_FAILED)
			return fail_with_part(j, &parts[p]);
		const Shoal__BatchWriteItemRequest *sent = parts[p].req.batch_write_item;
		Shoal__NodeResponse *resp =
		    end == PART_OK ? rt_call_resp(parts[p].call, &j->arena) : NULL;
		if (end == PART_OK && (resp == NULL || resp->response == NULL))
			return rt_job_fail(j, SHOAL_E_INTERNAL, "%s",
			                   "a node's answer does not decode");
		const Shoal__BatchWriteItemResponse *got =
		    end == PART_OK ? resp->response->batch_write_item : NULL;
		if (end == PART_UNPROCESSED)
			unprocessed++;
		else if (got == NULL ||
		         resp->response->result_case != SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM)
			continue; /* success without a body: nothing left over */
		for (size_t i = 0; got != NULL && i < got->n_consumed_capacity; i++)
			if (wire_capacity_list_add(&j->arena, &out->consumed_capacity,
			                           &out->n_consumed_capacity,
			                           got->consumed_capacity[i]) != SHOAL_OK)
				return nomem(j);
		if (got != NULL && wire_icm_list_merge(&j->arena, &out->item_collection_metrics,
		                                       &out->n_item_collection_metrics,
		                                       got->item_collection_metrics,
		                                       got->n_item_collection_metrics) != SHOAL_OK)
			return nomem(j);
		const Shoal__BatchWriteItemRequest *left = end == PART_UNPROCESSED ? sent : NULL;
		size_t nl = left != NULL ? left->n_request_items : got->n_unprocessed_items;
		for (size_t i = 0; i < nl; i++) {
			const Shoal__TableWriteRequests *tw =
			    left != NULL ? left->request_items[i] : got->unprocessed_items[i];
			if (add_writes(&j->arena, &out->unprocessed_items, &n_un, BATCH_WRITE_MAX,
			               tw->table_name, tw->requests, tw->n_requests) != SHOAL_OK)
				return nomem(j);
		}
	}
	if (unprocessed == np)
		return all_unprocessed(j, parts, np);
	out->n_unprocessed_items = n_un;
	j->out->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
	j->out->batch_write_item = out;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* BatchGetItem                                                              */
/* ------------------------------------------------------------------------ */

/* The entry for table `name` in a list of TableItems (created empty, with
 * room for cap items, when absent). */
static Shoal__TableItems *items_entry(sh_arena *a, Shoal__TableItems **list, size_t *n,
                                      const char *name, size_t cap)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(list[i]->table_name, name) == 0)
			return list[i];
	Shoal__TableItems *e = sh_arena_alloc(a, sizeof(*e));
	if (e == NULL)
		return NULL;
	shoal__table_items__init(e);
	e->table_name = (char *)name;
	e->items = sh_arena_calloc(a, cap, sizeof(*e->items));
	if (e->items == NULL)
		return NULL;
	list[(*n)++] = e;
	return e;
}

/* Adds the keys of ka to the unprocessed list, merging per table (cap:
 * room for table entries). */
static int add_keys(sh_arena *a, Shoal__TableKeysAndAttributes **list, size_t *n, size_t cap,
                    const Shoal__TableKeysAndAttributes *ka)
{
	Shoal__TableKeysAndAttributes *e = NULL;
	for (size_t i = 0; i < *n && e == NULL; i++)
		if (strcmp(list[i]->table_name, ka->table_name) == 0)
			e = list[i];
	if (e == NULL) {
		if (*n >= cap || (e = sh_arena_alloc(a, sizeof(*e))) == NULL)
			return SHOAL_E_NOMEM;
		*e = *ka;
		e->keys = sh_arena_calloc(a, BATCH_GET_MAX, sizeof(*e->keys));
		if (e->keys == NULL)
			return SHOAL_E_NOMEM;
		e->n_keys = 0;
		list[(*n)++] = e;
	}
	for (size_t i = 0; i < ka->n_keys; i++) {
		if (e->n_keys >= BATCH_GET_MAX)
			return SHOAL_E_NOMEM;
		e->keys[e->n_keys++] = ka->keys[i];
	}
	return SHOAL_OK;
}

/* BatchGetItem's checks and parts (phase 0). */
static int get_plan(rt_job *j)
{
	const Shoal__BatchGetItemRequest *in = j->in->batch_get_item;
	batch_st *st;
	if (in->n_request_items == 0)
		return rt_job_fail(
		    j, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '{}' at 'requestItems' failed to "
		    "satisfy constraint: Member must have length greater than or equal "
		    "to 1");
	/* Stage 1: the API checks of each key's GetItem. */
	rt_batch_key keys[BATCH_GET_MAX];
	const st_value *kv[BATCH_GET_MAX];
	uint32_t nk = 0;
	int rc;
	for (size_t i = 0; i < in->n_request_items; i++) {
		const Shoal__TableKeysAndAttributes *ka = in->request_items[i];
		if (ka->n_keys == 0)
			return rt_job_fail(
			    j, SHOAL_E_VALIDATION,
			    "1 validation error detected: Value '[]' at "
			    "'requestItems.%s.member.keys' failed to satisfy constraint: "
			    "Member must have length greater than or equal to 1",
			    ka->table_name);
		for (size_t w = 0; w < ka->n_keys; w++) {
			if (nk == BATCH_GET_MAX)
				return rt_job_fail(
				    j, SHOAL_E_VALIDATION,
				    "Too many items requested for the BatchGetItem call");
			Shoal__GetItemRequest f = SHOAL__GET_ITEM_REQUEST__INIT;
			WIRE_SET(&f, table_name, (char *)table_name_or_null(ka->table_name));
			f.key = ka->keys[w];
			if (WIRE_HAS(ka, projection_expression))
				WIRE_SET(&f, projection_expression, ka->projection_expression);
			f.expression_attribute_names = ka->expression_attribute_names;
			f.consistent_read = ka->consistent_read;
			if (WIRE_HAS(in, return_consumed_capacity))
				WIRE_SET(&f, return_consumed_capacity,
				         in->return_consumed_capacity);
			st_get_req q;
			if ((rc = wire_get_req_from_pb(&j->arena, &f, &q, j->errmsg)) != SHOAL_OK)
				return rc;
			kv[nk++] = q.key;
		}
	}
	/* Stage 2: tables, keys, duplicates. */
	const rt_table **tables = sh_arena_calloc(&j->arena, in->n_request_items, sizeof(*tables));
	if (tables == NULL)
		return nomem(j);
	nk = 0;
	for (size_t i = 0; i < in->n_request_items; i++) {
		const Shoal__TableKeysAndAttributes *ka = in->request_items[i];
		if ((rc = rt_job_table(j, ka->table_name, false, &tables[i])) != SHOAL_OK)
			return rc;
		for (size_t w = 0; w < ka->n_keys; w++, nk++)
			if ((rc = place_key(j, tables[i], kv[nk], false, &keys[nk])) != SHOAL_OK)
				return rc;
	}
	if (rt_batch_find_duplicate(keys, nk) >= 0)
		return rt_job_fail(j, SHOAL_E_VALIDATION,
		                   "Provided list of item keys contains duplicates");

	/* Split and send: each part keeps each table's projection, names and
	 * consistency, with that group's keys only. */
	uint32_t part_of[BATCH_GET_MAX], groups[BATCH_GET_MAX];
	uint32_t np = rt_batch_split(keys, nk, part_of, groups);
	part *parts = sh_arena_calloc(&j->arena, np, sizeof(*parts));
	bool *any_of = sh_arena_calloc(&j->arena, np, sizeof(*any_of));
	if (parts == NULL || any_of == NULL)
		return nomem(j);
	for (uint32_t p = 0; p < np; p++) {
		Shoal__BatchGetItemRequest *bg = sh_arena_alloc(&j->arena, sizeof(*bg));
		parts[p].tables =
		    sh_arena_calloc(&j->arena, in->n_request_items, sizeof(rt_table *));
		if (bg == NULL || parts[p].tables == NULL)
			return nomem(j);
		shoal__batch_get_item_request__init(bg);
		bg->request_items =
		    sh_arena_calloc(&j->arena, in->n_request_items, sizeof(*bg->request_items));
		if (bg->request_items == NULL)
			return nomem(j);
		bool any = true;
		nk = 0;
		for (size_t i = 0; i < in->n_request_items; i++) {
			const Shoal__TableKeysAndAttributes *ka = in->request_items[i];
			Shoal__TableKeysAndAttributes *mine = NULL;
			for (size_t w = 0; w < ka->n_keys; w++, nk++) {
				if (part_of[nk] != p)
					continue;
				if (mine == NULL) {
					mine = sh_arena_alloc(&j->arena, sizeof(*mine));
					if (mine == NULL)
						return nomem(j);
					*mine = *ka;
					mine->keys = sh_arena_calloc(&j->arena, ka->n_keys,
					                             sizeof(*mine->keys));
					if (mine->keys == NULL)
						return nomem(j);
					mine->n_keys = 0;
					bg->request_items[bg->n_request_items++] = mine;
					add_table(&parts[p], tables[i]);
					if (ka->consistent_read)
						any = false;
				}
				mine->keys[mine->n_keys++] = ka->keys[w];
			}
		}
		if (WIRE_HAS(in, return_consumed_capacity))
			WIRE_SET(bg, return_consumed_capacity, in->return_consumed_capacity);
		shoal__request__init(&parts[p].req);
		parts[p].req.request_id = j->in->request_id;
		parts[p].req.op_case = SHOAL__REQUEST__OP_BATCH_GET_ITEM;
		parts[p].req.batch_get_item = bg;
		any_of[p] = any;
	}
	if ((st = j->st = sh_arena_calloc(&j->arena, 1, sizeof(*st))) == NULL)
		return nomem(j);
	st->parts = parts;
	st->np = np;
	j->phase = 1;
	return issue_parts(j, parts, np, groups, any_of);
}

/* BatchGetItem's merge (phase 1). */
static int get_merge(rt_job *j)
{
	const Shoal__BatchGetItemRequest *in = j->in->batch_get_item;
	batch_st *st = j->st;
	part *parts = st->parts;
	uint32_t np = st->np;

	/* Merge: one TableItems per requested table, even if empty. */
	Shoal__BatchGetItemResponse *out = sh_arena_alloc(&j->arena, sizeof(*out));
	size_t cap_tables = in->n_request_items;
	if (out == NULL)
		return nomem(j);
	shoal__batch_get_item_response__init(out);
	out->responses = sh_arena_calloc(&j->arena, cap_tables, sizeof(*out->responses));
	out->unprocessed_keys =
	    sh_arena_calloc(&j->arena, cap_tables, sizeof(*out->unprocessed_keys));
	if (out->responses == NULL || out->unprocessed_keys == NULL)
		return nomem(j);
	for (size_t i = 0; i < in->n_request_items; i++)
		if (items_entry(&j->arena, out->responses, &out->n_responses,
		                in->request_items[i]->table_name, BATCH_GET_MAX) == NULL)
			return nomem(j);
	uint32_t unprocessed = 0;
	for (uint32_t p = 0; p < np; p++) {
		int code;
		part_end end = part_outcome(&parts[p], &code);
		if (end == PART_FAILED)
			return fail_with_part(j, &parts[p]);
		if (end == PART_UNPROCESSED) {
			unprocessed++;
			const Shoal__BatchGetItemRequest *sent = parts[p].req.batch_get_item;
			for (size_t i = 0; i < sent->n_request_items; i++)
				if (add_keys(&j->arena, out->unprocessed_keys,
				             &out->n_unprocessed_keys, cap_tables,
				             sent->request_items[i]) != SHOAL_OK)
					return nomem(j);
			continue;
		}
		Shoal__NodeResponse *nresp = rt_call_resp(parts[p].call, &j->arena);
		if (nresp == NULL || nresp->response == NULL)
			return rt_job_fail(j, SHOAL_E_INTERNAL, "%s",
			                   "a node's answer does not decode");
		const Shoal__Response *resp = nresp->response;
		if (resp->result_case != SHOAL__RESPONSE__RESULT_BATCH_GET_ITEM ||
		    resp->batch_get_item == NULL)
			continue;
		const Shoal__BatchGetItemResponse *got = resp->batch_get_item;
		for (size_t i = 0; i < got->n_responses; i++) {
			const Shoal__TableItems *ti = got->responses[i];
			Shoal__TableItems *e = NULL;
			for (size_t k = 0; k < out->n_responses && e == NULL; k++)
				if (strcmp(out->responses[k]->table_name, ti->table_name) == 0)
					e = out->responses[k];
			if (e == NULL)
				continue; /* a table nobody asked for */
			for (size_t k = 0; k < ti->n_items && e->n_items < BATCH_GET_MAX; k++)
				e->items[e->n_items++] = ti->items[k];
		}
		for (size_t i = 0; i < got->n_unprocessed_keys; i++)
			if (add_keys(&j->arena, out->unprocessed_keys, &out->n_unprocessed_keys,
			             cap_tables, got->unprocessed_keys[i]) != SHOAL_OK)
				return nomem(j);
		for (size_t i = 0; i < got->n_consumed_capacity; i++)
			if (wire_capacity_list_add(&j->arena, &out->consumed_capacity,
			                           &out->n_consumed_capacity,
			                           got->consumed_capacity[i]) != SHOAL_OK)
				return nomem(j);
	}
	if (unprocessed == np)
		return all_unprocessed(j, parts, np);
	j->out->result_case = SHOAL__RESPONSE__RESULT_BATCH_GET_ITEM;
	j->out->batch_get_item = out;
	return SHOAL_OK;
}

int rt_step_batch_write_item(rt_job *j)
{
	return j->phase == 0 ? write_plan(j) : write_merge(j);
}

int rt_step_batch_get_item(rt_job *j)
{
	return j->phase == 0 ? get_plan(j) : get_merge(j);
}
