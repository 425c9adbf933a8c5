/*
 * capacity.c -- capacity per partition, the node's side: partitions,
 * admission, charging, hot keys (the rules are in capacity.h, their
 * arithmetic in capacity_math.c; the tick, reports between nodes, status and
 * metrics in capacity_load.c).
 *
 * State: one cap_group per hosted group, under its own mutex (requests of
 * different groups never contend), holding one cap_part per table or GSI
 * -- its share of that group: one static partition, or the table's map
 * partitions there, whose count and hash space set its limits at each tick
 * (cap_limits) -- and the group's hot-key sketch.
 *
 *   who                         does what                            thread
 *   --------------------------  -----------------------------------  ----------
 *   server.c dispatch           node_cap_admit: every bucket the     nng callback
 *                               request may draw on holds tokens, or
 *                               ProvisionedThroughputExceeded at once
 *   handlers.c, fsm_apply.c,    node_cap_charge: the units a request  nng callback /
 *   fsm_txn.c                   really cost (the same figure as its   loop
 *                               ConsumedCapacity), and its key
 *   ship.c (index answers)      node_cap_gsi_behind: a GSI partition  loop
 *                               of the table is over its limit; the
 *                               table's base writes in the group are
 *                               throttled for a while (that table only)
 *   node.c check                node_cap_tick, once a second: catalog  loop
 *                               (tables, GSIs, their capacity) read
 *                               again, rates recomputed, per-second
 *                               figures and the sketch rolled
 *   handlers.c group_status,    node_cap_status / node_cap_metrics    any
 *   metrics.c
 *
 * Partitions unknown at admission (a table created less than a tick ago) are
 * admitted; a partition appears at the next tick.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "node/capacity_int.h"
#include "node/node.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* The node's partitions                                                     */
/* ------------------------------------------------------------------------ */

const char *const cap_kind_name[2] = {"read", "write"};

int node_cap_open(node *n, node_cap **out, char *errmsg)
{
	*out = NULL;
	node_cap *c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "capacity: out of memory");
	c->n = n;
	c->groups = sh_cluster_group_cap(n->conf);
	c->part_max[CAP_READ] =
	    (double)(n->conf->partition_rcu != 0 ? n->conf->partition_rcu : SH_PARTITION_RCU);
	c->part_max[CAP_WRITE] =
	    (double)(n->conf->partition_wcu != 0 ? n->conf->partition_wcu : SH_PARTITION_WCU);
	c->burst_secs = n->conf->burst_set ? n->conf->burst_secs : SH_BURST_SECS;
	sh_arena_init(&c->scratch);
	pthread_mutex_init(&c->rmu, NULL);
	c->g = sh_calloc(c->groups, sizeof(*c->g));
	if (c->g == NULL)
		goto nomem;
	/* Every group, hosted here or not: the groups a node hosts follow the
	 * cluster map (issue 14), and the tick skips those not open here. */
	for (uint32_t g = 0; g < c->groups; g++) {
		cap_group *cg = sh_calloc(1, sizeof(*cg));
		if (cg == NULL)
			goto nomem;
		pthread_mutex_init(&cg->mu, NULL);
		atomic_init(&cg->catalog_changed, true);
		c->g[g] = cg;
	}
	*out = c;
	return SHOAL_OK;
nomem:
	node_cap_free(c);
	return sh_errf(errmsg, SHOAL_E_NOMEM, "capacity: out of memory");
}

void node_cap_free(node_cap *c)
{
	if (c == NULL)
		return;
	for (uint32_t g = 0; c->g != NULL && g < c->groups; g++) {
		cap_group *cg = c->g[g];
		if (cg == NULL)
			continue;
		pthread_mutex_destroy(&cg->mu);
		sh_free(cg->parts);
		sh_free(cg);
	}
	sh_free(c->g);
	sh_free(c->remote);
	pthread_mutex_destroy(&c->rmu);
	sh_arena_fini(&c->scratch);
	sh_free(c);
}

cap_group *cap_group_of(node_cap *c, uint32_t gid)
{
	return c != NULL && gid < c->groups ? c->g[gid] : NULL;
}

/* The partition of (table, index) in cg: a GSI's own, else the table's (an
 * LSI reads and writes the table's partition).  NULL when unknown.
 * Under cg->mu. */
static cap_part *find_named(cap_group *cg, const char *table, const char *index)
{
	cap_part *base = NULL;
	for (uint32_t i = 0; i < cg->n; i++) {
		cap_part *p = &cg->parts[i];
		if (strcmp(p->table, table) != 0)
			continue;
		if (p->index_id == 0)
			base = p;
		else if (index != NULL && strcmp(p->index, index) == 0)
			return p;
	}
	return base;
}

cap_part *cap_find_id(cap_group *cg, uint32_t table_id, uint16_t index_id)
{
	for (uint32_t i = 0; i < cg->n; i++)
		if (cg->parts[i].table_id == table_id && cg->parts[i].index_id == index_id)
			return &cg->parts[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

/* A key attribute's type letter, bytes and length; false if v is not S/N/B. */
static bool key_bytes(const st_value *v, char *type, const char **p, uint32_t *len)
{
	if (v == NULL)
		return false;
	switch (v->type) {
	case ST_S:
		*type = 'S';
		break;
	case ST_N:
		*type = 'N';
		break;
	case ST_B:
		*type = 'B';
		break;
	default:
		return false;
	}
	*p = v->u.str.ptr;
	*len = v->u.str.len;
	return true;
}

static uint64_t key_id(const cap_part *p, char type, const char *k, uint32_t len)
{
	uint64_t seed = (uint64_t)p->table_id << 16 | p->index_id;
	XXH64_hash_t h = XXH64(k, len, seed ^ (uint64_t)(unsigned char)type);
	return h != 0 ? h : 1;
}

/* Counts units (or a throttled request, units 0) of a key in the sketch.
 * Under cg->mu. */
static void note_key(cap_group *cg, const cap_part *p, int kind, char type, const char *k,
                     uint32_t len, double units, bool throttled)
{
	bool fresh;
	cap_hot *h = cap_sketch_add(&cg->hot, key_id(p, type, k, len), kind, units, &fresh);
	if (fresh) {
		h->table_id = p->table_id;
		h->index_id = p->index_id;
		cap_hot_set_key(h, type, k, len);
	}
	if (throttled)
		h->throttled++;
}

/* The partition key value of an item or key (an ST_M) for partition p. */
static bool item_key(const cap_part *p, const st_value *item, char *type, const char **k,
                     uint32_t *len)
{
	if (item != NULL && item->type != ST_M)
		return key_bytes(item, type, k, len); /* the key value itself */
	if (item == NULL || p->hash_attr[0] == '\0')
		return false;
	return key_bytes(st_map_get(item, p->hash_attr, strlen(p->hash_attr)), type, k, len);
}

/* The same from a protobuf Item (at admission, before any conversion). */
static bool pb_item_key(const cap_part *p, const Shoal__Item *item, char *type, const char **k,
                        uint32_t *len)
{
	if (item == NULL || p->hash_attr[0] == '\0')
		return false;
	size_t nl = strlen(p->hash_attr);
	for (size_t i = 0; i < item->n_attrs; i++) {
		const Shoal__Attribute *a = item->attrs[i];
		if (a == NULL || a->value == NULL || a->name.len != nl ||
		    memcmp(a->name.data, p->hash_attr, nl) != 0)
			continue;
		const Shoal__AttributeValue *v = a->value;
		const ProtobufCBinaryData *d;
		if (v->value_case == SHOAL__ATTRIBUTE_VALUE__VALUE_S)
			*type = 'S', d = &v->s;
		else if (v->value_case == SHOAL__ATTRIBUTE_VALUE__VALUE_N)
			*type = 'N', d = &v->n;
		else if (v->value_case == SHOAL__ATTRIBUTE_VALUE__VALUE_B)
			*type = 'B', d = &v->b;
		else
			return false;
		*k = (const char *)d->data;
		*len = (uint32_t)d->len;
		return true;
	}
	return false;
}

/* ------------------------------------------------------------------------ */
/* Charging                                                                  */
/* ------------------------------------------------------------------------ */

static void charge_part(cap_group *cg, cap_part *p, int kind, double units, const st_value *item,
                        int64_t now)
{
	cap_bucket_take(&p->b[kind], units, now);
	p->total[kind] += units;
	p->win[kind] += units;
	char type;
	const char *k;
	uint32_t len;
	if (item_key(p, item, &type, &k, &len))
		note_key(cg, p, kind, type, k, len, units, false);
}

void node_cap_charge(node_cap *c, uint32_t gid, const char *table, const char *index, int kind,
                     double units, const st_value *item)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg == NULL || table == NULL || units <= 0)
		return;
	int64_t now = cap_now_ms();
	pthread_mutex_lock(&cg->mu);
	cap_part *p = find_named(cg, table, index);
	if (p != NULL)
		charge_part(cg, p, kind, units, item, now);
	pthread_mutex_unlock(&cg->mu);
}

void node_cap_charge_index(node_cap *c, uint32_t gid, uint32_t table_id, uint16_t index_id,
                           double units, const st_value *key, bool *over)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg == NULL || units <= 0)
		return;
	int64_t now = cap_now_ms();
	pthread_mutex_lock(&cg->mu);
	cap_part *p = cap_find_id(cg, table_id, index_id);
	if (p != NULL) {
		charge_part(cg, p, CAP_WRITE, units, key, now);
		bool in_debt = p->b[CAP_WRITE].tokens <= 0;
		if (over != NULL && in_debt)
			*over = true;
		/* An index partition refuses nothing itself (its base table's
		 * writes are held back for it): each entry applied in debt at
		 * the partitions' limit counts as a request it would have
		 * throttled -- what its split for heat relieves. */
		if (in_debt && cap_at_partition_limit(&p->lim[CAP_WRITE], p->b[CAP_WRITE].rate))
			p->thr_split_win[CAP_WRITE]++;
	}
	pthread_mutex_unlock(&cg->mu);
}

void node_cap_catalog_changed(node_cap *c, uint32_t gid)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg != NULL)
		atomic_store(&cg->catalog_changed, true);
}

void node_cap_gsi_behind(node_cap *c, uint32_t gid, uint32_t table_id, int64_t for_ms)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg == NULL)
		return;
	int64_t until = cap_now_ms() + for_ms;
	pthread_mutex_lock(&cg->mu);
	cap_part *p = cap_find_id(cg, table_id, 0);
	if (p != NULL && p->gsi_behind_until_ms < until)
		p->gsi_behind_until_ms = until;
	pthread_mutex_unlock(&cg->mu);
}

/* ------------------------------------------------------------------------ */
/* Admission                                                                 */
/* ------------------------------------------------------------------------ */

/* DynamoDB's messages (ProvisionedThroughputExceededException), with the
 * partition that refused after them. */
static int throttled(cap_part *p, int kind, bool gsi, uint32_t gid, char *errmsg)
{
	const char *what;
	if (gsi)
		what = "The level of configured provisioned throughput for one or more global "
		       "secondary indexes of the table was exceeded. Consider increasing your "
		       "provisioning level for the under-provisioned global secondary indexes "
		       "with the UpdateTable API";
	else if (p->provisioned)
		what = "The level of configured provisioned throughput for the table was "
		       "exceeded. Consider increasing your provisioning level with the "
		       "UpdateTable API.";
	else
		what = "Throughput exceeds the current capacity of your table or index. DynamoDB "
		       "is automatically scaling your table or index so please try again "
		       "shortly. If exceptions persist, check if you have a hot key: "
		       "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
		       "bp-partition-key-design.html";
	return sh_errf(errmsg, SHOAL_E_THROUGHPUT,
	               "%s (%s%s%s partition in group %u: %.0f %s units/s)", what, p->table,
	               p->index_id != 0 ? " index " : "", p->index, gid, p->b[kind].rate,
	               cap_kind_name[kind]);
}

/* One table's (and index's) bucket of `kind`; `key` the request's item or
 * key (protobuf) for the hot-key sketch when refused. Under cg->mu. */
static int admit_one(cap_group *cg, uint32_t gid, const char *table, const char *index, int kind,
                     const Shoal__Item *key, int64_t now, char *errmsg)
{
	if (table == NULL)
		return SHOAL_OK;
	cap_part *p = find_named(cg, table, index);
	if (p == NULL)
		return SHOAL_OK;
	bool gsi = kind == CAP_WRITE && p->index_id == 0 && p->gsi_behind_until_ms > now;
	if (!gsi && cap_bucket_admit(&p->b[kind], now))
		return SHOAL_OK;
	p->thr_total[kind]++;
	p->thr_win[kind]++;
	if (!gsi && cap_at_partition_limit(&p->lim[kind], p->b[kind].rate))
		p->thr_split_win[kind]++;
	char type;
	const char *k;
	uint32_t len;
	if (pb_item_key(p, key, &type, &k, &len))
		note_key(cg, p, kind, type, k, len, 0, true);
	return throttled(p, kind, gsi, gid, errmsg);
}

/* The table and key (or item) of a transaction's action. */
static bool txn_action(const Shoal__TransactWriteItem *a, const char **table,
                       const Shoal__Item **key)
{
	if (a == NULL)
		return false;
	switch (a->action_case) {
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_CONDITION_CHECK:
		*table = a->condition_check->table_name, *key = a->condition_check->key;
		return true;
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_PUT:
		*table = a->put->table_name, *key = a->put->item;
		return true;
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_UPDATE:
		*table = a->update->table_name, *key = a->update->key;
		return true;
	case SHOAL__TRANSACT_WRITE_ITEM__ACTION_DELETE:
		*table = a->delete_->table_name, *key = a->delete_->key;
		return true;
	default:
		return false;
	}
}

int node_cap_admit(node_cap *c, uint32_t gid, const Shoal__NodeRequest *req, char *errmsg)
{
	cap_group *cg = cap_group_of(c, gid);
	if (cg == NULL)
		return SHOAL_OK;
	int64_t now = cap_now_ms();
	int rc = SHOAL_OK;
	pthread_mutex_lock(&cg->mu);
	if (cg->n == 0)
		goto out;
	const Shoal__Request *r = req->request;
	if (r != NULL) {
		switch (r->op_case) {
		case SHOAL__REQUEST__OP_GET_ITEM:
			rc = admit_one(cg, gid, WIRE_OPT(r->get_item, table_name), NULL, CAP_READ,
			               r->get_item->key, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_PUT_ITEM:
			rc = admit_one(cg, gid, WIRE_OPT(r->put_item, table_name), NULL, CAP_WRITE,
			               r->put_item->item, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_UPDATE_ITEM:
			rc = admit_one(cg, gid, WIRE_OPT(r->update_item, table_name), NULL,
			               CAP_WRITE, r->update_item->key, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_DELETE_ITEM:
			rc = admit_one(cg, gid, WIRE_OPT(r->delete_item, table_name), NULL,
			               CAP_WRITE, r->delete_item->key, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_QUERY:
			rc = admit_one(cg, gid, WIRE_OPT(r->query, table_name),
			               WIRE_OPT(r->query, index_name), CAP_READ, NULL, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_SCAN:
			rc = admit_one(cg, gid, WIRE_OPT(r->scan, table_name),
			               WIRE_OPT(r->scan, index_name), CAP_READ, NULL, now, errmsg);
			break;
		case SHOAL__REQUEST__OP_BATCH_GET_ITEM:
			for (size_t i = 0; rc == SHOAL_OK && i < r->batch_get_item->n_request_items;
			     i++) {
				const Shoal__TableKeysAndAttributes *t =
				    r->batch_get_item->request_items[i];
				rc = admit_one(cg, gid, t->table_name, NULL, CAP_READ,
				               t->n_keys > 0 ? t->keys[0] : NULL, now, errmsg);
			}
			break;
		case SHOAL__REQUEST__OP_BATCH_WRITE_ITEM:
			for (size_t i = 0;
			     rc == SHOAL_OK && i < r->batch_write_item->n_request_items; i++) {
				const Shoal__TableWriteRequests *t =
				    r->batch_write_item->request_items[i];
				rc = admit_one(cg, gid, t->table_name, NULL, CAP_WRITE, NULL, now,
				               errmsg);
			}
			break;
		case SHOAL__REQUEST__OP_TRANSACT_GET_ITEMS:
			for (size_t i = 0;
			     rc == SHOAL_OK && i < r->transact_get_items->n_transact_items; i++) {
				const Shoal__TransactGetItem *g =
				    r->transact_get_items->transact_items[i];
				if (g != NULL && g->get != NULL)
					rc = admit_one(cg, gid, g->get->table_name, NULL, CAP_READ,
					               g->get->key, now, errmsg);
			}
			break;
		default:
			break;
		}
	}
	/* A transaction's part: its writes' tables (a decision or a finish is
	 * never refused: other groups hold locks waiting for it). */
	if (rc == SHOAL_OK && req->txn_write != NULL && !req->txn_write->decide &&
	    !req->txn_write->check_only) {
		const Shoal__TxnWrite *t = req->txn_write;
		for (size_t i = 0; rc == SHOAL_OK && i < t->n_actions; i++) {
			const char *table;
			const Shoal__Item *key;
			if (txn_action(t->actions[i], &table, &key))
				rc = admit_one(cg, gid, table, NULL, CAP_WRITE, key, now, errmsg);
		}
	}
out:
	pthread_mutex_unlock(&cg->mu);
	return rc;
}
