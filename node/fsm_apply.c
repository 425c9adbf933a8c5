/*
 * fsm_apply.c -- applying one Raft entry of a storage group.
 *
 * An entry is a packed shoal.Command: a batch of operations from one
 * proposer (group commit).  node_fsm_apply_cb runs it as follows:
 *
 *   1. index = raft_last_applied(raft) + 1 (raft 0.15 advances last_applied
 *      only after fsm->apply returns).  If index <= the applied index stored
 *      in LMDB, the entry is already in the environment -- replay after a
 *      restart or after a snapshot restore that was skipped -- and nothing is
 *      done.  This is what makes replay exact: "the applied index is stored
 *      in the same LMDB transaction as the data".
 *   2. The bytes are checked (wire_check_framing: bounded depth, no protobuf-c
 *      recursion on hostile nesting) and unpacked into the FSM's entry arena,
 *      reset before returning.  Bytes that are not a Command are
 *      an environmental failure: every replica sees the same bytes, so the
 *      group cannot make progress past them and must stop, not guess.
 *   3. One st_txn: every operation in order, through the storage engine.  A
 *      client error (condition failed, validation, no such table, ...) is
 *      that operation's result and changes nothing; the batch goes on.  An
 *      environmental error (NOMEM, IO, FULL, INTERNAL) aborts the
 *      transaction and fails the FSM for good (fsm.c).  The entry's index is
 *      recorded with st_txn_set_applied and the transaction commits.  The
 *      proposer's clock (Command.ts_ms) is handed to st_txn_set_time first:
 *      every replica stamps the same time into the index deltas it appends,
 *      so outboxes stay identical.
 *   4. Results: only when this node proposed the entry (Command.proposer)
 *      and the proposer registered a node_batch under Command.batch_id.  Each
 *      operation's shoal.NodeResponse is packed into sh_malloc'd memory that
 *      the batch owns, and batch->applied is set -- after the commit, so a
 *      batch never holds results of a transaction that did not happen.  On
 *      every other replica no response is built at all.
 *
 * Operations and their results (NodeResponse.response):
 *   put / update / delete   st_put / st_update / st_delete; result put_item /
 *                           update_item / delete_item.  A delete with
 *                           CommandOp.ttl_expire is the TTL service's
 *                           (st_delete_req.ttl: deleted only if expired at
 *                           the entry's ts_ms, else ConditionalCheckFailed).
 *                           On a failed condition
 *                           with ReturnValuesOnConditionCheckFailure ALL_OLD,
 *                           Response.item is the old item.  With
 *                           ReturnConsumedCapacity, consumed_capacity from the
 *                           write result's sizes (wire_capacity_charge_write);
 *                           only the proposer builds it, so replicas stay
 *                           byte-identical.  With ReturnItemCollectionMetrics
 *                           SIZE on a table with an LSI, item_collection_metrics
 *                           from the write result (wire_icm_new), likewise.
 *   define_table            st_table_create with TableDefine's id and
 *                           created_ms.  table_id 0 ("assign") is accepted in
 *                           group 0 only.  A table of that name that already
 *                           exists with the same non-zero id is success (the
 *                           router's repair re-sends must be idempotent); with
 *                           another id it is ResourceInUse.
 *                           TableDefine.indexes (ids and statuses fixed by
 *                           group 0) are applied onto the definition.  When
 *                           the table exists with the same id and created_ms
 *                           but another index list or status, a data group
 *                           redefines it (st_table_redefine: UpdateTable or
 *                           an activation forwarded by the router) unless the
 *                           define is older than what is stored (a lower
 *                           next_index_id, or an index status going back).
 *                           Result: catalog[0] is the stored TableDefine with
 *                           indexes and next_index_id (wire_table_define_to_pb).
 *   drop_table              st_table_delete; ResourceNotFound if absent.
 *                           Group 0: st_table_delete_unprotected (a table
 *                           with deletion protection stays).
 *   update_table            group 0: st_table_update of an UpdateTable, a
 *                           TagResource or an UntagResource
 *                           (wire_table_update_from_pb); result catalog[0]
 *                           as define_table's.
 *   activate_index          group 0: st_index_activate; result as above.
 *   index_apply             a target group: the shipped deltas of one source
 *                           group (st_index_apply dedups by (source, seq) in
 *                           this same transaction, so redelivery is a no-op).
 *   outbox_trim             a source group: st_outbox_trim (the replicated
 *                           shipped watermark).
 *   backfill                a source group: one st_backfill_step.
 *   stream_trim             any group: st_stream_trim_expired, stream records
 *                           older than this entry's time minus the retention
 *                           (proposed by the leader, node/txn_recover.c), so
 *                           trimming does not wait for the table's next write.
 *   map_set                 group 0: st_cluster_map_set, the cluster map
 *                           replaced if it is still prev_epoch's (issue 14;
 *                           node/elastic.c proposes it).
 *   part_out, part_fence,   a partition move's steps on its source and
 *   part_ingest, part_own,  target groups (node/pmove.c has the protocol;
 *   part_purge, part_abort  storage/parts.h the records).  part_purge's
 *                           result: part_status AWAY once the range is
 *                           empty, FENCED while items are left.
 *   scrub                   any group: st_txn_scrub of up to max_keys pairs
 *                           from `start`, at this entry's index; the result
 *                           is kept in memory (node_fsm_scrub_record), never
 *                           written: the replica scrub (node/scrub.c).
 *   batch_write             first every write is converted (a malformed one
 *                           fails the whole operation, nothing written), then
 *                           the puts and deletes are applied in order; a client
 *                           error from the storage engine stops the batch there
 *                           and is the operation's status -- the writes before
 *                           it stay (BatchWriteItem is not atomic).  Result: a
 *                           BatchWriteItemResponse without UnprocessedItems,
 *                           with one ConsumedCapacity per table when asked, and
 *                           with ReturnItemCollectionMetrics SIZE one
 *                           ItemCollectionMetrics per collection written.
 *
 * Thread: the group's loop thread (raft calls apply from it).
 */
#include <assert.h>
#include <string.h>

#include "common/alloc.h"
#include "node/capacity.h"
#include "node/fsm_int.h"
#include "storage/stream.h"
#include "node/node.h"
#include "proto/wire.h"
#include "storage/index.h"

/* ------------------------------------------------------------------------ */
/* Unpacking                                                                 */
/* ------------------------------------------------------------------------ */

/* The entry's Command, unpacked into f->entry (reset per entry): one
 * arena instead of a malloc and a free per field of every operation. */
static int unpack_command(node_fsm *f, const struct raft_buffer *buf, Shoal__Command **out,
                          char *errmsg)
{
	ProtobufCAllocator alloc;
	ProtobufCMessage *m;
	sh_arena_reset(&f->entry);
	wire_arena_allocator(&alloc, &f->entry);
	int rc =
	    wire_unpack_local(&shoal__command__descriptor, &alloc, buf->base, buf->len, &m, errmsg);
	*out = (Shoal__Command *)m;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/* After a write succeeded: a failure to build its result must not turn into
 * the write's status.  Out of memory is environmental as everywhere; any
 * other failure (none is expected: stored items convert) is reported as an
 * internal error in the response while the write stands. */
static int result_built(op_ctx *c, int rc)
{
	if (rc == SHOAL_OK || rc == SHOAL_E_NOMEM)
		return rc;
	c->result_code = SHOAL_E_INTERNAL;
	return SHOAL_OK;
}

void node_fsm_charge_write(op_ctx *c, const char *table, const st_write_result *res,
                           const st_value *key, double times)
{
	if (c->r == NULL || c->f->cap == NULL)
		return;
	node_cap_charge(c->f->cap, c->f->group, table, NULL, CAP_WRITE,
	                times * wire_write_partition_units(res), key);
}

/* A successful write's units, charged; its ConsumedCapacity, *out NULL
 * unless asked for. */
static int write_capacity(op_ctx *c, wire_rcc rcc, const char *table, const st_write_result *res,
                          const st_value *key, Shoal__ConsumedCapacity **out)
{
	node_fsm_charge_write(c, table, res, key, 1);
	int rc = wire_capacity_new(c->a, rcc, table, out);
	if (rc == SHOAL_OK)
		rc = wire_capacity_charge_write(c->a, *out, res);
	if (rc != SHOAL_OK)
		return sh_errf(c->msg, rc, "write capacity: out of memory");
	return SHOAL_OK;
}

static int op_put(op_ctx *c, const Shoal__PutItemRequest *pb)
{
	st_put_req req;
	int rc = wire_put_req_from_pb(c->a, pb, &req, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	st_write_result res = {0};
	rc = st_put(c->txn, &req, c->a, &res, c->msg);
	if (rc != SHOAL_OK) {
		c->old_item = res.old_item;
		return rc;
	}
	if (c->r == NULL)
		return SHOAL_OK;
	rc = wire_put_item_resp_to_pb(c->a, &res, &c->r->put_item, c->msg);
	if (rc == SHOAL_OK)
		rc = write_capacity(c, WIRE_RCC(pb), req.table, &res, req.item,
		                    &c->r->put_item->consumed_capacity);
	if (rc == SHOAL_OK && WIRE_RICM(pb))
		rc = wire_icm_new(c->a, &res, &c->r->put_item->item_collection_metrics, c->msg);
	if (rc == SHOAL_OK)
		c->r->result_case = SHOAL__RESPONSE__RESULT_PUT_ITEM;
	return result_built(c, rc);
}

static int op_update(op_ctx *c, const Shoal__UpdateItemRequest *pb)
{
	st_update_req req;
	int rc = wire_update_req_from_pb(c->a, pb, &req, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	st_write_result res = {0};
	rc = st_update(c->txn, &req, c->a, &res, c->msg);
	if (rc != SHOAL_OK) {
		c->old_item = res.old_item;
		return rc;
	}
	if (c->r == NULL)
		return SHOAL_OK;
	rc = wire_update_item_resp_to_pb(c->a, &res, &c->r->update_item, c->msg);
	if (rc == SHOAL_OK)
		rc = write_capacity(c, WIRE_RCC(pb), req.table, &res, req.key,
		                    &c->r->update_item->consumed_capacity);
	if (rc == SHOAL_OK && WIRE_RICM(pb))
		rc = wire_icm_new(c->a, &res, &c->r->update_item->item_collection_metrics, c->msg);
	if (rc == SHOAL_OK)
		c->r->result_case = SHOAL__RESPONSE__RESULT_UPDATE_ITEM;
	return result_built(c, rc);
}

static int op_delete(op_ctx *c, const Shoal__DeleteItemRequest *pb, bool ttl)
{
	st_delete_req req;
	int rc = wire_delete_req_from_pb(c->a, pb, &req, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	req.ttl = ttl; /* the TTL service's (node/ttl.c): expired at this entry's time */
	st_write_result res = {0};
	rc = st_delete(c->txn, &req, c->a, &res, c->msg);
	if (rc != SHOAL_OK) {
		c->old_item = res.old_item;
		return rc;
	}
	if (c->r == NULL)
		return SHOAL_OK;
	rc = wire_delete_item_resp_to_pb(c->a, &res, &c->r->delete_item, c->msg);
	if (rc == SHOAL_OK)
		rc = write_capacity(c, WIRE_RCC(pb), req.table, &res, req.key,
		                    &c->r->delete_item->consumed_capacity);
	if (rc == SHOAL_OK && WIRE_RICM(pb))
		rc = wire_icm_new(c->a, &res, &c->r->delete_item->item_collection_metrics, c->msg);
	if (rc == SHOAL_OK)
		c->r->result_case = SHOAL__RESPONSE__RESULT_DELETE_ITEM;
	return result_built(c, rc);
}

/* catalog[0] of the result: the table as this transaction now stores it. */
static int answer_table(op_ctx *c, const char *name)
{
	if (c->r == NULL)
		return SHOAL_OK;
	st_table_info info;
	int rc = st_txn_table_describe(c->txn, name, c->a, &info, c->msg);
	if (rc != SHOAL_OK) /* just written: only an environmental error */
		return node_fsm_env_error(rc) ? rc : result_built(c, rc);
	Shoal__TableDefine **list = sh_arena_alloc(c->a, sizeof(*list));
	if (list == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "table result: out of memory");
	rc = wire_table_define_to_pb(c->a, &info.def, &list[0], c->msg);
	if (rc != SHOAL_OK)
		return result_built(c, rc);
	c->nr->n_catalog = 1;
	c->nr->catalog = list;
	return SHOAL_OK;
}

static int status_rank(st_index_status s)
{
	return s == ST_INDEX_CREATING ? 0 : s == ST_INDEX_ACTIVE ? 1 : 2;
}

static const st_index_def *find_index_id(const st_table_def *d, uint16_t id)
{
	for (uint32_t i = 0; i < d->n_indexes; i++)
		if (d->indexes[i].id == id)
			return &d->indexes[i];
	return NULL;
}

/* Whether `in` (a forwarded definition, its next_index_id or 0) describes
 * other indexes than `stored` does, and whether it is newer: a define the
 * router re-sends from an older cache must not take an UpdateTable back. */
static void compare_indexes(const st_table_def *in, uint32_t in_next, const st_table_def *stored,
                            bool *differ, bool *stale)
{
	*differ = in->n_indexes != stored->n_indexes;
	*stale = in_next != 0 && in_next < st_table_def_next_index_id(stored);
	for (uint32_t i = 0; i < in->n_indexes; i++) {
		const st_index_def *x = &in->indexes[i];
		const st_index_def *y = find_index_id(stored, x->id);
		if (y == NULL || strcmp(x->name, y->name) != 0) {
			*differ = true;
			continue;
		}
		if (x->status != y->status) {
			*differ = true;
			if (status_rank(x->status) < status_rank(y->status))
				*stale = true;
		}
	}
	/* A newer capacity (UpdateTable of billing or throughput) differs too;
	 * st_table_redefine keeps the newer of the two capacities. */
	if (in->capacity_ms > stored->capacity_ms || in->ttl_ms > stored->ttl_ms)
		*differ = true; /* ... and so does a newer TTL setting */
	/* So does a newer StreamSpecification. */
	if (in->stream.changed_ms > stored->stream.changed_ms)
		*differ = true;
}

static int op_define(op_ctx *c, const Shoal__TableDefine *td)
{
	if (td->def == NULL)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "TableDefine without a table definition");
	if (td->table_id == 0 && c->f->group != 0)
		return sh_errf(
		    c->msg, SHOAL_E_VALIDATION,
		    "TableDefine with table_id 0 (assign an id) is only valid in group 0, "
		    "not in group %u",
		    c->f->group);
	st_table_def def;
	int rc = wire_table_define_from_pb(c->a, td, &def, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	rc = st_table_create(c->txn, &def, c->msg);

	if (rc == SHOAL_E_IN_USE) {
		/* A re-sent define (repair, or a router retrying after a lost
		 * answer): the same table is already there -- under the same id,
		 * or, for an id-assigning define in group 0, created by the same
		 * CreateTable (the proposer fixed created_ms once for all tries). */
		char msg2[SH_ERRMSG_SIZE];
		st_table_info info;
		int rc2 = st_txn_table_describe(c->txn, def.name, c->a, &info, msg2);
		if (node_fsm_env_error(rc2)) {
			memcpy(c->msg, msg2, sizeof(c->msg));
			return rc2;
		}
		if (rc2 == SHOAL_OK && (td->table_id != 0 ? info.def.id == td->table_id
		                                          : info.def.created_ms == td->created_ms))
			rc = SHOAL_OK;
		/* The same table with another index list: group 0's new
		 * definition forwarded to a data group (it says so by carrying
		 * group 0's index states or counter; a CreateTable's first
		 * define carries neither).  Group 0 changes its own definition
		 * only through update_table / activate_index. */
		if (rc == SHOAL_OK && td->table_id != 0 && c->f->group != 0 &&
		    (td->n_indexes > 0 || td->next_index_id > 0) &&
		    info.def.created_ms == td->created_ms) {
			bool differ, stale;
			compare_indexes(&def, td->next_index_id, &info.def, &differ, &stale);
			if (differ && !stale)
				rc = st_table_redefine(c->txn, &def, c->msg);
		}
	}
	if (rc != SHOAL_OK)
		return rc;
	return answer_table(c, def.name);
}

static int op_update_table(op_ctx *c, const Shoal__TableUpdate *tu)
{
	if (c->f->group != 0)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "update_table is applied by group 0 only, not group %u",
		               c->f->group);
	st_table_update_req req;
	int rc = wire_table_update_from_pb(c->a, tu, &req, c->msg);
	if (rc == SHOAL_OK)
		rc = st_table_update(c->txn, &req, c->msg);
	if (rc == SHOAL_E_NOT_FOUND && (tu->tag != NULL || tu->untag != NULL))
		return sh_errf(c->msg, SHOAL_E_NOT_FOUND,
		               "Requested resource not found: ResourcArn: %s not found",
		               tu->tag != NULL ? tu->tag->resource_arn : tu->untag->resource_arn);
	if (rc != SHOAL_OK)
		return rc;
	return answer_table(c, req.name);
}

static int op_activate_index(op_ctx *c, const Shoal__IndexActivate *ia)
{
	if (c->f->group != 0)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "activate_index is applied by group 0 only, not group %u",
		               c->f->group);
	if (ia->table_name == NULL || ia->table_name[0] == '\0' || ia->index_name == NULL ||
	    ia->index_name[0] == '\0')
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "activate_index needs a table name and an index name");
	int rc = st_index_activate(c->txn, ia->table_name, ia->index_name, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	return answer_table(c, ia->table_name);
}

/* The proposer charges shipped index entries to their GSI partitions: an
 * upsert's units by its entry's size, a delete one unit (as the base
 * write's ConsumedCapacity counts them, up to the key bytes); the answer
 * names the tables whose GSI partitions here are now over capacity.
 * (Duplicates that st_index_apply skipped are charged again: rare.) */
static int charge_index(op_ctx *c, const st_delta *d, size_t n)
{
	if (c->r == NULL || c->f->cap == NULL)
		return SHOAL_OK;
	uint32_t *behind = NULL;
	size_t nb = 0;
	for (size_t i = 0; i < n; i++) {
		bool over = false;
		double units = d[i].del ? wire_write_units(0) : wire_write_units(d[i].val_len);
		/* the entry's item names its index partition key (hot keys) */
		st_value item;
		char msg[SH_ERRMSG_SIZE];
		bool named = st_delta_item(&d[i], c->a, &item, msg) == SHOAL_OK;
		node_cap_charge_index(c->f->cap, c->f->group, d[i].table_id, d[i].index_id, units,
		                      named ? &item : NULL, &over);
		if (!over)
			continue;
		bool dup = false;
		for (size_t k = 0; k < nb; k++)
			dup = dup || behind[k] == d[i].table_id;
		if (dup)
			continue;
		if (behind == NULL && (behind = sh_arena_calloc(c->a, n, sizeof(*behind))) == NULL)
			return sh_errf(c->msg, SHOAL_E_NOMEM, "index_apply: out of memory");
		behind[nb++] = d[i].table_id;
	}
	c->nr->gsi_behind = behind;
	c->nr->n_gsi_behind = nb;
	return SHOAL_OK;
}

static int op_index_apply(op_ctx *c, const Shoal__IndexApply *ia)
{
	size_t n = ia->n_deltas;
	st_delta *d = sh_arena_calloc(c->a, n > 0 ? n : 1, sizeof(*d));
	if (d == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "index_apply: out of memory");
	int rc = node_index_deltas_from_pb(ia, d, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	if (n == 0)
		return SHOAL_OK;
	st_index_refusal ref;
	rc = st_index_apply(c->txn, ia->source_group, d, (uint32_t)n, &ref, c->msg);
	if (rc == SHOAL_OK)
		rc = charge_index(c, d, n);
	if (rc == SHOAL_E_WRONG_GROUP && c->nr != NULL &&
	    node_index_refused_to_pb(c->a, &ref, c->nr, c->msg) != SHOAL_OK)
		return SHOAL_E_NOMEM;
	return rc;
}

static int op_outbox_trim(op_ctx *c, const Shoal__OutboxTrim *ot)
{
	return st_outbox_trim(c->txn, ot->upto, c->msg);
}

static int op_backfill(op_ctx *c, const Shoal__IndexBackfill *bf)
{
	if (bf->table_name == NULL || bf->table_name[0] == '\0' || bf->index_id == 0 ||
	    bf->index_id > UINT16_MAX)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "backfill needs a table name and an index id in 1..65535");
	bool done = false;
	uint32_t max = bf->max_items > 0 ? bf->max_items : NODE_BACKFILL_STEP;
	return st_backfill_step(c->txn, bf->table_name, (uint16_t)bf->index_id, max, &done, c->msg);
}

/* Bounded: one range costs at most NODE_SCRUB_MAX_KEYS pairs read. */
#define NODE_SCRUB_MAX_KEYS 10000

static int op_scrub(op_ctx *c, const Shoal__Scrub *sc)
{
	if (sc->start.len >= NODE_SCRUB_KEY_MAX || sc->max_keys == 0 ||
	    sc->max_keys > NODE_SCRUB_MAX_KEYS)
		return sh_errf(c->msg, SHOAL_E_VALIDATION,
		               "scrub: start key of %zu bytes, max_keys %u (1..%d)", sc->start.len,
		               sc->max_keys, NODE_SCRUB_MAX_KEYS);
	st_scrub res;
	int rc =
	    st_txn_scrub(c->txn, sc->start.data, sc->start.len, sc->max_keys, c->a, &res, c->msg);
	if (rc != SHOAL_OK)
		return rc;
	node_scrub_result r = {
	    .proposer = sc->proposer,
	    .seq = sc->seq,
	    .index = raft_last_applied(c->f->raft) + 1, /* this entry's (fsm.h) */
	    .count = res.count,
	    .hash = res.hash,
	    .start_len = sc->start.len,
	    .end_len = res.end_len < NODE_SCRUB_KEY_MAX ? res.end_len : 0,
	};
	if (sc->start.len > 0)
		memcpy(r.start, sc->start.data, sc->start.len);
	if (r.end_len > 0)
		memcpy(r.end, res.end, r.end_len);
	node_fsm_scrub_record(c->f, &r);
	return SHOAL_OK;
}

static int op_drop(op_ctx *c, const Shoal__TableDrop *td)
{
	const char *name =
	    td->table_name != NULL && td->table_name[0] != '\0' ? td->table_name : NULL;
	/* Deletion protection is group 0's (its copy is the one UpdateTable
	 * changes); a data group drops what group 0 has dropped. */
	if (c->f->group == 0)
		return st_table_delete_unprotected(c->txn, name, c->msg);
	return st_table_delete(c->txn, name, c->msg);
}

/* One write of a BatchWriteItem, converted. */
typedef struct bw_write {
	bool is_put;
	st_put_req put;
	st_delete_req del;
} bw_write;

static int op_batch_write(op_ctx *c, const Shoal__BatchWriteItemRequest *pb)
{
	size_t n = 0;
	for (size_t i = 0; i < pb->n_request_items; i++)
		n += pb->request_items[i]->n_requests;
	bw_write *w = sh_arena_calloc(c->a, n > 0 ? n : 1, sizeof(*w));
	if (w == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "batch_write: out of memory");

	/* Pass 1: convert and validate every write; nothing is written yet. */
	size_t k = 0;
	for (size_t i = 0; i < pb->n_request_items; i++) {
		const Shoal__TableWriteRequests *tw = pb->request_items[i];
		for (size_t j = 0; j < tw->n_requests; j++, k++) {
			const Shoal__WriteRequest *wr = tw->requests[j];
			int rc;
			if (wr->request_case == SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST) {
				Shoal__PutItemRequest p = SHOAL__PUT_ITEM_REQUEST__INIT;
				WIRE_SET(&p, table_name, tw->table_name);
				p.item = wr->put_request->item;
				w[k].is_put = true;
				rc = wire_put_req_from_pb(c->a, &p, &w[k].put, c->msg);
			} else if (wr->request_case ==
			           SHOAL__WRITE_REQUEST__REQUEST_DELETE_REQUEST) {
				Shoal__DeleteItemRequest d = SHOAL__DELETE_ITEM_REQUEST__INIT;
				WIRE_SET(&d, table_name, tw->table_name);
				d.key = wr->delete_request->key;
				rc = wire_delete_req_from_pb(c->a, &d, &w[k].del, c->msg);
			} else {
				rc = sh_errf(c->msg, SHOAL_E_VALIDATION,
				             "Supplied WriteRequest is empty, must contain exactly "
				             "one of PutRequest or DeleteRequest");
			}
			if (rc != SHOAL_OK)
				return rc;
		}
	}

	/* Pass 2: apply in order, adding up each table's capacity when asked. */
	wire_rcc rcc = c->r != NULL ? WIRE_RCC(pb) : WIRE_RCC_NONE;
	bool ricm = c->r != NULL && WIRE_RICM(pb);
	Shoal__BatchWriteItemResponse *out = sh_arena_alloc(c->a, sizeof(*out));
	if (out == NULL)
		return sh_errf(c->msg, SHOAL_E_NOMEM, "batch_write result: out of memory");
	shoal__batch_write_item_response__init(out);
	for (k = 0; k < n; k++) {
		st_write_result res = {0};
		int rc = w[k].is_put ? st_put(c->txn, &w[k].put, c->a, &res, c->msg)
		                     : st_delete(c->txn, &w[k].del, c->a, &res, c->msg);
		if (rc != SHOAL_OK)
			return rc;
		const char *table = w[k].is_put ? w[k].put.table : w[k].del.table;
		const st_value *key = w[k].is_put ? w[k].put.item : w[k].del.key;
		if (ricm) {
			Shoal__ItemCollectionMetrics *m;
			rc = wire_icm_new(c->a, &res, &m, c->msg);
			if (rc == SHOAL_OK && wire_icm_list_add(c->a, &out->item_collection_metrics,
			                                        &out->n_item_collection_metrics,
			                                        table, m) != SHOAL_OK)
				rc = sh_errf(c->msg, SHOAL_E_NOMEM,
				             "batch_write metrics: out of memory");
			if (rc != SHOAL_OK)
				return rc;
		}
		if (rcc == WIRE_RCC_NONE) {
			node_fsm_charge_write(c, table, &res, key, 1);
			continue;
		}
		Shoal__ConsumedCapacity *cc;
		rc = write_capacity(c, rcc, table, &res, key, &cc);
		if (rc == SHOAL_OK &&
		    wire_capacity_list_add(c->a, &out->consumed_capacity, &out->n_consumed_capacity,
		                           cc) != SHOAL_OK)
			rc = sh_errf(c->msg, SHOAL_E_NOMEM, "batch_write capacity: out of memory");
		if (rc != SHOAL_OK)
			return rc;
	}
	if (c->r == NULL)
		return SHOAL_OK;
	c->r->batch_write_item = out;
	c->r->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
	return SHOAL_OK;
}

/* Builds (when c->r) the error response of a failed operation. */
static int error_result(op_ctx *c, int code, char *errmsg)
{
	int rc = wire_response_set_error(c->a, c->r, code, c->msg, c->old_item, errmsg);
	if (rc != SHOAL_OK && rc != SHOAL_E_NOMEM) /* the old item did not convert */
		rc = wire_response_set_error(c->a, c->r, code, c->msg, NULL, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	/* wire_response_set_error leaves the catalog alone: clear it. */
	c->nr->n_catalog = 0;
	c->nr->catalog = NULL;
	return SHOAL_OK;
}

static int run_op(op_ctx *c, const Shoal__CommandOp *op)
{
	switch (op->op_case) {
	case SHOAL__COMMAND_OP__OP_PUT:
		return op_put(c, op->put);
	case SHOAL__COMMAND_OP__OP_UPDATE:
		return op_update(c, op->update);
	case SHOAL__COMMAND_OP__OP_DELETE:
		return op_delete(c, op->delete_, op->ttl_expire);
	case SHOAL__COMMAND_OP__OP_DEFINE_TABLE:
		return op_define(c, op->define_table);
	case SHOAL__COMMAND_OP__OP_DROP_TABLE:
		return op_drop(c, op->drop_table);
	case SHOAL__COMMAND_OP__OP_BATCH_WRITE:
		return op_batch_write(c, op->batch_write);
	case SHOAL__COMMAND_OP__OP_UPDATE_TABLE:
		return op_update_table(c, op->update_table);
	case SHOAL__COMMAND_OP__OP_ACTIVATE_INDEX:
		return op_activate_index(c, op->activate_index);
	case SHOAL__COMMAND_OP__OP_INDEX_APPLY:
		return op_index_apply(c, op->index_apply);
	case SHOAL__COMMAND_OP__OP_OUTBOX_TRIM:
		return op_outbox_trim(c, op->outbox_trim);
	case SHOAL__COMMAND_OP__OP_BACKFILL:
		return op_backfill(c, op->backfill);
	case SHOAL__COMMAND_OP__OP_TXN_WRITE:
		return node_op_txn_write(c, op->txn_write);
	case SHOAL__COMMAND_OP__OP_TXN_DECIDE:
		return node_op_txn_decide(c, op->txn_decide);
	case SHOAL__COMMAND_OP__OP_TXN_FINISH:
		return node_op_txn_finish(c, op->txn_finish);
	case SHOAL__COMMAND_OP__OP_TXN_ACKS:
		return node_op_txn_acks(c, op->txn_acks);
	case SHOAL__COMMAND_OP__OP_TXN_STATUS:
		return node_op_txn_status(c, op->txn_status);
	case SHOAL__COMMAND_OP__OP_TXN_EXPIRE:
		return node_op_txn_expire(c);
	case SHOAL__COMMAND_OP__OP_SCRUB:
		return op_scrub(c, op->scrub);
	case SHOAL__COMMAND_OP__OP_STREAM_TRIM: {
		uint32_t removed;
		return st_stream_trim_expired(c->txn, ST_STREAM_TRIM_PER_ENTRY, &removed, c->msg);
	}
	case SHOAL__COMMAND_OP__OP_MAP_SET: {
		int rc = st_cluster_map_set(c->txn, op->map_set->prev_epoch, op->map_set->map.data,
		                            op->map_set->map.len, c->msg);
		if (rc == SHOAL_OK && c->r != NULL) {
			c->nr->map = op->map_set->map;
			c->nr->epoch = op->map_set->prev_epoch + 1;
		}
		if (rc == SHOAL_OK && c->f->map_hook != NULL)
			c->f->map_hook(c->f->map_hook_arg, op->map_set->map.data,
			               op->map_set->map.len);
		return rc;
	}
	case SHOAL__COMMAND_OP__OP_PART_OUT:
	case SHOAL__COMMAND_OP__OP_PART_FENCE:
	case SHOAL__COMMAND_OP__OP_PART_INGEST:
	case SHOAL__COMMAND_OP__OP_PART_OWN:
	case SHOAL__COMMAND_OP__OP_PART_PURGE:
	case SHOAL__COMMAND_OP__OP_PART_ABORT:
		return node_op_part(c, op);
	default:
		/* Unset, or an operation of a newer build: the same on every
		 * replica, so a per-operation error, not a failure. */
		return sh_errf(c->msg, SHOAL_E_VALIDATION, "unknown Command operation %d",
		               (int)op->op_case);
	}
}

/* Whether cmd holds an operation that may change the group's catalog. */
static bool changes_catalog(const Shoal__Command *cmd)
{
	for (size_t i = 0; i < cmd->n_ops; i++)
		switch (cmd->ops[i]->op_case) {
		case SHOAL__COMMAND_OP__OP_DEFINE_TABLE:
		case SHOAL__COMMAND_OP__OP_DROP_TABLE:
		case SHOAL__COMMAND_OP__OP_UPDATE_TABLE:
		case SHOAL__COMMAND_OP__OP_ACTIVATE_INDEX:
			return true;
		default:
			break;
		}
	return false;
}

static int pack_response(const Shoal__NodeResponse *nr, uint8_t **buf, size_t *len, char *errmsg)
{
	size_t n = shoal__node_response__get_packed_size(nr);
	uint8_t *p = sh_malloc(n > 0 ? n : 1);
	if (p == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "apply: out of memory packing a result");
	*len = shoal__node_response__pack(nr, p);
	*buf = p;
	return SHOAL_OK;
}

/* A copy of outcome bytes as an operation's result (sh_malloc'd). */
static int copy_result(const uint8_t *bytes, size_t len, uint8_t **buf, size_t *out_len,
                       char *errmsg)
{
	uint8_t *p = sh_malloc(len > 0 ? len : 1);
	if (p == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "apply: out of memory copying a result");
	if (len > 0)
		memcpy(p, bytes, len);
	*buf = p;
	*out_len = len;
	return SHOAL_OK;
}

/* Whether op is a single-item write carrying an idempotency token. */
static bool tokened(const Shoal__CommandOp *op)
{
	return op->write_token.len == ST_TXN_ID_LEN &&
	       (op->op_case == SHOAL__COMMAND_OP__OP_PUT ||
	        op->op_case == SHOAL__COMMAND_OP__OP_UPDATE ||
	        op->op_case == SHOAL__COMMAND_OP__OP_DELETE);
}

/*
 * Applies one operation.  Returns SHOAL_OK when the operation ran (its
 * client error, if any, is in its result) and an environmental code (message
 * in errmsg) when the transaction must be aborted.  With want, *buf (*len
 * bytes, sh_malloc'd) is the packed NodeResponse.
 *
 * A write with a token: if the token's record is there, the write is a
 * retry -- nothing is applied and the result is the first answer, as
 * recorded.  Otherwise the write runs, and its answer is built on every
 * replica (not only the proposer: the record must be the same everywhere);
 * when the write was applied, the answer is recorded with the token until
 * NODE_WRITE_TOKEN_MS from the entry's time.  A write that failed (its
 * condition, a table not there yet) changed nothing: a retry runs it
 * afresh, as if the first had never been sent.
 */
static int apply_op(node_fsm *f, st_txn *txn, const Shoal__CommandOp *op, bool want, uint8_t **buf,
                    size_t *len, char *errmsg)
{
	op_ctx c = {.f = f, .txn = txn, .a = &f->scratch};
	c.msg[0] = '\0';
	*buf = NULL;
	bool tok = tokened(op);
	if (tok) {
		const uint8_t *first;
		size_t first_len;
		bool found;
		int rc = st_write_token_get(txn, op->write_token.data, c.a, &first, &first_len,
		                            &found, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		if (found)
			return want ? copy_result(first, first_len, buf, len, errmsg) : SHOAL_OK;
	}
	if (want || tok || node_op_txn_answers(op)) {
		c.nr = sh_arena_alloc(c.a, sizeof(*c.nr));
		c.r = sh_arena_alloc(c.a, sizeof(*c.r));
		if (c.nr == NULL || c.r == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "apply: out of memory");
		shoal__node_response__init(c.nr);
		shoal__response__init(c.r);
		c.nr->response = c.r;
	}
	int code = run_op(&c, op);
	if (node_fsm_env_error(code))
		return sh_errf(errmsg, code, "%s", c.msg);
	if (c.r == NULL)
		return SHOAL_OK;
	if (code == SHOAL_OK && c.result_code != SHOAL_OK)
		code = c.result_code;
	int rc = SHOAL_OK;
	if (c.raw != NULL) /* the op answered with recorded bytes */
		return want ? copy_result(c.raw, c.raw_len, buf, len, errmsg) : SHOAL_OK;
	if (code != SHOAL_OK && (rc = error_result(&c, code, errmsg)) != SHOAL_OK)
		return rc;
	uint8_t *out = NULL;
	size_t out_len = 0;
	if ((rc = pack_response(c.nr, &out, &out_len, errmsg)) != SHOAL_OK)
		return rc;
	if (tok && code == SHOAL_OK)
		rc = st_write_token_put(txn, op->write_token.data,
		                        st_txn_time(txn) + NODE_WRITE_TOKEN_MS, out, out_len,
		                        errmsg);
	if (rc == SHOAL_OK && want) {
		*buf = out;
		*len = out_len;
		return SHOAL_OK;
	}
	sh_free(out);
	return rc;
}

static void batch_clear(node_batch *b)
{
	for (uint32_t i = 0; i < b->n_ops && b->results != NULL; i++) {
		sh_free(b->results[i]);
		b->results[i] = NULL;
		b->result_lens[i] = 0;
	}
	b->applied = false;
}

static int apply_command(node_fsm *f, const Shoal__Command *cmd, uint64_t index, node_batch *b,
                         char *errmsg)
{
	st_txn *txn;
	int rc = st_txn_begin(f->env, &txn, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_txn_set_time(txn, cmd->ts_ms);
	if (b != NULL)
		batch_clear(b); /* a batch id is proposed once; be safe anyway */
	size_t n_res = b != NULL && b->results != NULL ? b->n_ops : 0;
	if (n_res > cmd->n_ops)
		n_res = cmd->n_ops;

	for (size_t i = 0; i < cmd->n_ops; i++) {
		sh_arena_reset(&f->scratch);
		uint8_t *buf = NULL;
		size_t len = 0;
		rc = apply_op(f, txn, cmd->ops[i], i < n_res, &buf, &len, errmsg);
		if (rc == SHOAL_OK && buf != NULL) {
			b->results[i] = buf;
			b->result_lens[i] = len;
		}
		if (rc != SHOAL_OK)
			goto err_after_txn;
	}
	sh_arena_reset(&f->scratch);
	st_txn_set_applied(txn, index);
	rc = st_txn_commit(txn, errmsg);
	if (rc != SHOAL_OK)
		goto err_after_results;
	if (b != NULL)
		b->applied = true;
	if (f->cap != NULL && changes_catalog(cmd))
		node_cap_catalog_changed(f->cap, f->group);
	return SHOAL_OK;

err_after_txn:
	sh_arena_reset(&f->scratch);
	st_txn_abort(txn);
err_after_results:
	if (b != NULL)
		batch_clear(b);
	return rc;
}

static node_batch *find_batch(node_fsm *f, uint64_t id)
{
	for (node_batch *b = f->batches; b != NULL; b = b->next)
		if (b->id == id)
			return b;
	return NULL;
}

int node_fsm_apply_cb(struct raft_fsm *rf, const struct raft_buffer *buf, void **result)
{
	node_fsm *f = rf->data;
	*result = NULL;
	if (f->failed != SHOAL_OK)
		return node_fsm_raft_code(f->failed);
	assert(f->raft != NULL); /* node_fsm_attach before raft_start */
	uint64_t index = raft_last_applied(f->raft) + 1;
	/* Every entry raft holds counts, replayed ones too (group.c sizes the
	 * in-memory log by it). */
	f->entry_avg = f->entry_avg == 0 ? buf->len : (f->entry_avg * 31 + buf->len) / 32;
	if (index <= f->applied)
		return 0; /* already in LMDB: replay */

	char msg[SH_ERRMSG_SIZE];
	Shoal__Command *cmd;
	int rc = unpack_command(f, buf, &cmd, msg);
	if (rc != SHOAL_OK)
		return node_fsm_fail(f, rc, "group %u: entry %llu: %s", f->group,
		                     (unsigned long long)index, msg);
	node_batch *b = cmd->proposer == f->node_id ? find_batch(f, cmd->batch_id) : NULL;
	rc = apply_command(f, cmd, index, b, msg);
	sh_arena_reset(&f->entry);
	if (rc != SHOAL_OK)
		return node_fsm_fail(f, rc, "group %u: applying entry %llu: %s", f->group,
		                     (unsigned long long)index, msg);
	f->applied = index;
	return 0;
}
