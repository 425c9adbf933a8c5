/*
 * front.c -- the operation table and the front door.
 *
 * As Redis's processCommand: one table of operations, one function that
 * every request goes through.  rt_handle decodes the packed shoal.Request
 * (wire_unpack_request: bounded framing check, then protobuf-c, into the
 * request's arena), looks the operation up, runs its handler, and packs the
 * answer with the request's id.  Handlers validate their request with the
 * wire_*_from_pb conversions (DynamoDB's API-level checks, so a PutItem
 * without TableName is refused here, without a node), route, and fill the
 * answer; they never repeat the front door's work.  Operations present in
 * the protocol but not implemented yet answer UnknownOperationException
 * "<Operation> is not supported yet".
 *
 * Metrics: every request counts once under its operation's slot, with its
 * outcome's exception name when it failed, and its latency.
 *
 * Two doors, one pipeline: rt_handle takes a packed Request (the native
 * protocol, server.c); rt_handle_request takes a decoded one (the DynamoDB
 * HTTP endpoint, http.c, which converts JSON bodies with proto/wire_api.h).
 * Both dispatch through the same table and count the same metrics.
 *
 * Runs on a worker thread (server.c, http.c).
 */
#include <string.h>
#include <time.h>

#include "router/router.h"

const rt_op rt_ops[] = {
    {SHOAL__REQUEST__OP_GET_ITEM, "GetItem", rt_get_item},
    {SHOAL__REQUEST__OP_PUT_ITEM, "PutItem", rt_put_item},
    {SHOAL__REQUEST__OP_UPDATE_ITEM, "UpdateItem", rt_update_item},
    {SHOAL__REQUEST__OP_DELETE_ITEM, "DeleteItem", rt_delete_item},
    {SHOAL__REQUEST__OP_QUERY, "Query", rt_query},
    {SHOAL__REQUEST__OP_SCAN, "Scan", rt_scan},
    {SHOAL__REQUEST__OP_BATCH_GET_ITEM, "BatchGetItem", rt_batch_get_item},
    {SHOAL__REQUEST__OP_BATCH_WRITE_ITEM, "BatchWriteItem", rt_batch_write_item},
    {SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS, "TransactWriteItems", NULL},
    {SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS, "TransactGetItems", NULL},
    {SHOAL__REQUEST__OP_CREATE_TABLE, "CreateTable", rt_create_table},
    {SHOAL__REQUEST__OP_DESCRIBE_TABLE, "DescribeTable", rt_describe_table},
    {SHOAL__REQUEST__OP_LIST_TABLES, "ListTables", rt_list_tables},
    {SHOAL__REQUEST__OP_DELETE_TABLE, "DeleteTable", rt_delete_table},
    {SHOAL__REQUEST__OP_UPDATE_TABLE, "UpdateTable", rt_update_table},
    {SHOAL__REQUEST__OP_CLUSTER_STATUS, "ClusterStatus", rt_cluster_status},
};
const uint32_t rt_n_ops = sizeof(rt_ops) / sizeof(rt_ops[0]);

_Static_assert(sizeof(rt_ops) / sizeof(rt_ops[0]) < RT_OPS_MAX, "RT_OPS_MAX too small");

uint32_t rt_op_slot(Shoal__Request__OpCase op)
{
	for (uint32_t i = 0; i < rt_n_ops; i++)
		if (rt_ops[i].op == op)
			return i;
	return RT_OPS_MAX - 1;
}

const char *rt_slot_name(uint32_t slot)
{
	return slot < rt_n_ops ? rt_ops[slot].name : "Unknown";
}

uint32_t rt_group_of(const rt_router *rt, uint32_t table_id, const st_value *pk)
{
	uint64_t h = st_key_hash(table_id, pk);
	return sh_cluster_partition_group(rt->conf, sh_cluster_partition_of(rt->conf, h));
}

uint32_t rt_data_groups(const sh_cluster_conf *c, uint32_t *groups)
{
	uint32_t n = 0;
	uint32_t parts = sh_cluster_partitions(c);
	for (uint32_t p = 0; p < parts; p++) {
		uint32_t g = sh_cluster_partition_group(c, p);
		if (n == 0 || groups[n - 1] != g)
			groups[n++] = g;
	}
	return n;
}

Shoal__Response *rt_error_response(sh_arena *a, int code, const char *msg)
{
	Shoal__Response *resp = sh_arena_alloc(a, sizeof(*resp));
	if (resp == NULL)
		return NULL;
	shoal__response__init(resp);
	if (wire_response_set_error(a, resp, code, msg, NULL, NULL) != SHOAL_OK)
		return NULL;
	return resp;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static Shoal__Response *dispatch(rt_router *rt, sh_arena *a, const Shoal__Request *in,
                                 int64_t deadline)
{
	uint32_t slot = rt_op_slot(in->op_case);
	if (in->n_batch > 0) /* a batch reaches here only as a member (server.c) */
		return rt_error_response(
		    a, SHOAL_E_VALIDATION,
		    in->op_case == SHOAL__REQUEST__OP__NOT_SET
		        ? "A request of a Request batch cannot be a batch itself"
		        : "A Request batch carries nothing but its requests");
	if (slot >= rt_n_ops || rt_ops[slot].handler == NULL) {
		char msg[SH_ERRMSG_SIZE];
		const char *name = wire_op_name(in->op_case);
		if (name[0] == '\0')
			snprintf(msg, sizeof(msg), "The request names no operation");
		else
			snprintf(msg, sizeof(msg), "%s is not supported yet", name);
		return rt_error_response(a, SHOAL_E_UNKNOWN_OPERATION, msg);
	}
	rt_req r = {.rt = rt, .a = a, .in = in};
	r.deadline = deadline;
	r.out = sh_arena_alloc(a, sizeof(*r.out));
	if (r.out == NULL)
		return rt_error_response(a, SHOAL_E_NOMEM, "out of memory");
	shoal__response__init(r.out);
	int rc = rt_ops[slot].handler(&r);
	if (rc == SHOAL_E_WRONG_EPOCH) {
		/* A node's table id differed from the cached one (the table was
		 * recreated through another router) and nothing was done; the
		 * handler refreshed the catalog: run it once more. */
		shoal__response__init(r.out);
		rc = rt_ops[slot].handler(&r);
		if (rc == SHOAL_E_WRONG_EPOCH) /* e.g. a replica still behind */
			rc = SHOAL_E_UNAVAILABLE;
	}
	rt_req_release(&r);
	if (rc != SHOAL_OK) {
		if (rc == SHOAL_E_INTERNAL || rc == SHOAL_E_NOMEM)
			rt_log("%s failed: %s", rt_ops[slot].name, r.errmsg);
		return rt_error_response(a, rc, r.errmsg);
	}
	return r.out;
}

/* The request started at t0 (monotonic us) and must be answered by deadline
 * (monotonic ms): the fast path hands requests over with both. */
static Shoal__Response *handle_request_at(rt_router *rt, sh_arena *a, const Shoal__Request *in,
                                          int64_t t0, int64_t deadline)
{
	Shoal__Response *resp = dispatch(rt, a, in, deadline);
	if (resp == NULL)
		return NULL;
	resp->request_id = in->request_id;
	rt_metrics_request(&rt->metrics, rt_op_slot(in->op_case),
	                   wire_code_from_status((int)resp->status), now_us() - t0);
	return resp;
}

Shoal__Response *rt_handle_request(rt_router *rt, sh_arena *a, const Shoal__Request *in)
{
	return handle_request_at(rt, a, in, now_us(), rt_now_ms() + rt->opt.deadline_ms);
}

int rt_handle(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, uint8_t **out,
              size_t *out_len)
{
	return rt_handle_at(rt, a, buf, len, now_us(), rt_now_ms() + rt->opt.deadline_ms, out,
	                    out_len);
}

int rt_handle_at(rt_router *rt, sh_arena *a, const uint8_t *buf, size_t len, int64_t t0,
                 int64_t deadline, uint8_t **out, size_t *out_len)
{
	char msg[SH_ERRMSG_SIZE];
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	Shoal__Request *in = NULL;
	Shoal__Response *resp;
	int rc = wire_unpack_request(&alloc, buf, len, &in, msg);
	if (rc != SHOAL_OK) {
		resp = rt_error_response(a, rc, msg);
		if (resp != NULL)
			rt_metrics_request(&rt->metrics, RT_OPS_MAX - 1, rc, now_us() - t0);
	} else {
		resp = handle_request_at(rt, a, in, t0, deadline);
	}
	if (resp == NULL)
		return SHOAL_E_NOMEM;
	rc = wire_pack(a, &resp->base, out, out_len, msg);
	if (rc != SHOAL_OK) {
		rt_log("packing the answer: %s", msg);
		Shoal__Response *err = rt_error_response(a, rc, msg);
		if (err == NULL)
			return SHOAL_E_NOMEM;
		err->request_id = resp->request_id;
		rc = wire_pack(a, &err->base, out, out_len, msg);
	}
	return rc;
}
