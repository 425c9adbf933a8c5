/*
 * capacity.c -- capacity per partition: token buckets, admission, hot keys
 * (the rules are in capacity.h; the node's side of them is here).
 *
 * State: one cap_group per hosted group, under its own mutex (requests of
 * different groups never contend), holding one cap_part per partition of a
 * table or GSI in that group and the group's hot-key sketch.
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
#include "node/capacity.h"
#include "node/node.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* Buckets                                                                   */
/* ------------------------------------------------------------------------ */

static double max_of(double rate, double burst)
{
	return burst > rate ? burst : rate;
}

void cap_bucket_init(cap_bucket *b, double rate, double burst, int64_t now_ms)
{
	b->rate = rate;
	b->max = max_of(rate, burst);
	b->tokens = rate;
	b->last_ms = now_ms;
}

void cap_bucket_refill(cap_bucket *b, int64_t now_ms)
{
	if (now_ms <= b->last_ms)
		return;
	b->tokens += b->rate * (double)(now_ms - b->last_ms) / 1000.0;
	if (b->tokens > b->max)
		b->tokens = b->max;
	b->last_ms = now_ms;
}

void cap_bucket_set(cap_bucket *b, double rate, double burst, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	b->rate = rate;
	b->max = max_of(rate, burst);
	if (b->tokens > b->max)
		b->tokens = b->max;
	if (b->tokens < -rate)
		b->tokens = -rate;
}

bool cap_bucket_admit(cap_bucket *b, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	return b->tokens > 0;
}

void cap_bucket_take(cap_bucket *b, double units, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	b->tokens -= units;
	if (b->tokens < -b->rate)
		b->tokens = -b->rate;
}

double cap_share(const cap_limits *l)
{
	if (l->table_rate <= 0)
		return l->part_max;
	double s = l->table_rate / (l->parts > 0 ? l->parts : 1);
	return s < l->part_max ? s : l->part_max;
}

double cap_adaptive_rate(const cap_limits *l)
{
	double share = cap_share(l);
	if (l->table_rate <= 0 || l->others < 0)
		return share;
	double spare = l->table_rate - l->others;
	double r = spare > share ? spare : share;
	return r < l->part_max ? r : l->part_max;
}

/* ------------------------------------------------------------------------ */
/* Hot keys                                                                  */
/* ------------------------------------------------------------------------ */

cap_hot *cap_sketch_add(cap_sketch *s, uint64_t id, int kind, double units, bool *fresh)
{
	cap_hot *min = NULL;
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		cap_hot *h = &s->slot[i];
		if (h->id == id) {
			h->count += units;
			h->win[kind] += units;
			*fresh = false;
			return h;
		}
		if (min == NULL || h->count < min->count || (min->id != 0 && h->id == 0))
			min = h;
	}
	/* Space-Saving: the new key takes the smallest counter and inherits
	 * its count (an overestimate bounded by that count). */
	double inherited = min->id != 0 ? min->count : 0;
	memset(min, 0, sizeof(*min));
	min->id = id;
	min->count = inherited + units;
	min->win[kind] = units;
	*fresh = true;
	return min;
}

void cap_sketch_roll(cap_sketch *s, double dt)
{
	if (dt <= 0)
		return;
	/* Averages over about CAP_HOT_HALF_LIFE_S seconds. */
	double keep = pow(0.5, dt / CAP_HOT_HALF_LIFE_S);
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		cap_hot *h = &s->slot[i];
		if (h->id == 0)
			continue;
		for (int k = 0; k < 2; k++) {
			h->rate[k] = keep * h->rate[k] + (1 - keep) * (h->win[k] / dt);
			h->win[k] = 0;
		}
		h->count *= keep;
	}
}

static double hot_rate(const cap_hot *h)
{
	return h->rate[0] + h->rate[1];
}

uint32_t cap_sketch_top(const cap_sketch *s, uint32_t *idx, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		const cap_hot *h = &s->slot[i];
		if (h->id == 0 || (hot_rate(h) < 0.005 && h->throttled == 0))
			continue;
		/* insertion into idx[0..n), heaviest first, keeping max */
		uint32_t j = n < max ? n++ : max;
		while (j > 0 && hot_rate(&s->slot[idx[j - 1]]) < hot_rate(h)) {
			if (j < max)
				idx[j] = idx[j - 1];
			j--;
		}
		if (j < max)
			idx[j] = i;
	}
	return n;
}

void cap_key_json(char type, const char *p, uint32_t len, char *buf, size_t size)
{
	/* {"S":"...."} -- room for the frame and one escape */
	size_t o = (size_t)snprintf(buf, size, "{\"%c\":\"", type);
	size_t room = size > o + 3 ? size - o - 3 : 0;
	if (type == 'B') {
		char enc[CAP_HOT_KEY_MAX];
		uint32_t n = len;
		while (n > 0 && wire_b64_encoded_len(n) >= sizeof(enc))
			n--;
		wire_b64_encode(p, n, enc);
		size_t el = strlen(enc);
		if (el > room)
			el = room - room % 4;
		memcpy(buf + o, enc, el);
		o += el;
	} else {
		for (uint32_t i = 0; i < len; i++) {
			unsigned char ch = (unsigned char)p[i];
			const char *esc = NULL;
			char tmp[8];
			if (ch == '"')
				esc = "\\\"";
			else if (ch == '\\')
				esc = "\\\\";
			else if (ch < 0x20) {
				snprintf(tmp, sizeof(tmp), "\\u%04x", ch);
				esc = tmp;
			}
			size_t need = esc != NULL ? strlen(esc) : 1;
			if (need > room)
				break;
			/* never cut a UTF-8 sequence: stop before a lead byte whose
			 * sequence does not fit */
			if (ch >= 0xC0) {
				uint32_t seq = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
				if (seq > room || i + seq > len)
					break;
			}
			if (esc != NULL)
				memcpy(buf + o, esc, need);
			else
				buf[o] = (char)ch;
			o += need;
			room -= need;
		}
	}
	buf[o++] = '"';
	buf[o++] = '}';
	buf[o] = '\0';
}

/* ------------------------------------------------------------------------ */
/* The node's partitions                                                     */
/* ------------------------------------------------------------------------ */

typedef struct cap_part {
	uint32_t table_id;
	uint16_t index_id; /* 0: the base table (and its LSIs) */
	char table[ST_TABLE_NAME_MAX + 1];
	char index[ST_TABLE_NAME_MAX + 1];
	char hash_attr[256]; /* partition key attribute, for hot keys */
	bool provisioned;
	cap_limits lim[2];
	cap_bucket b[2];
	double total[2];       /* units since the node started */
	uint64_t thr_total[2]; /* throttled requests since the node started */
	double win[2];         /* since the last tick */
	uint64_t thr_win[2];
	double last[2]; /* the last tick's figures, per second */
	double thr_last[2];
	int64_t gsi_behind_until_ms; /* base: a GSI partition of the table is over */
	bool seen;
} cap_part;

typedef struct cap_group {
	pthread_mutex_t mu;
	cap_part *parts;
	uint32_t n, size;
	cap_sketch hot;
	bool leading;
} cap_group;

struct node_cap {
	node *n;
	uint32_t groups;
	cap_group **g; /* [groups]; NULL where not hosted */
	double part_max[2];
	double burst_secs;
	int64_t last_tick_ms;
	sh_arena scratch; /* the tick's */
};

static const char *const kind_name[2] = {"read", "write"};

static int64_t now_ms(void)
{
	return (int64_t)(node_now_ns() / 1000000u);
}

int node_cap_open(node *n, node_cap **out, char *errmsg)
{
	*out = NULL;
	node_cap *c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "capacity: out of memory");
	c->n = n;
	c->groups = n->conf->groups;
	c->part_max[CAP_READ] =
	    (double)(n->conf->partition_rcu != 0 ? n->conf->partition_rcu : SH_PARTITION_RCU);
	c->part_max[CAP_WRITE] =
	    (double)(n->conf->partition_wcu != 0 ? n->conf->partition_wcu : SH_PARTITION_WCU);
	c->burst_secs = n->conf->burst_set ? n->conf->burst_secs : SH_BURST_SECS;
	sh_arena_init(&c->scratch);
	c->g = sh_calloc(c->groups, sizeof(*c->g));
	if (c->g == NULL)
		goto nomem;
	for (uint32_t g = 0; g < c->groups; g++) {
		if (!sh_cluster_hosts(n->conf, n->id, g))
			continue;
		cap_group *cg = sh_calloc(1, sizeof(*cg));
		if (cg == NULL)
			goto nomem;
		pthread_mutex_init(&cg->mu, NULL);
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
	sh_arena_fini(&c->scratch);
	sh_free(c);
}

static cap_group *group_of(node_cap *c, uint32_t gid)
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

static cap_part *find_id(cap_group *cg, uint32_t table_id, uint16_t index_id)
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
		cap_key_json(type, k, len, h->key, sizeof(h->key));
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
	cap_group *cg = group_of(c, gid);
	if (cg == NULL || table == NULL || units <= 0)
		return;
	int64_t now = now_ms();
	pthread_mutex_lock(&cg->mu);
	cap_part *p = find_named(cg, table, index);
	if (p != NULL)
		charge_part(cg, p, kind, units, item, now);
	pthread_mutex_unlock(&cg->mu);
}

void node_cap_charge_index(node_cap *c, uint32_t gid, uint32_t table_id, uint16_t index_id,
                           double units, const st_value *key, bool *over)
{
	cap_group *cg = group_of(c, gid);
	if (cg == NULL || units <= 0)
		return;
	int64_t now = now_ms();
	pthread_mutex_lock(&cg->mu);
	cap_part *p = find_id(cg, table_id, index_id);
	if (p != NULL) {
		cap_bucket_take(&p->b[CAP_WRITE], units, now);
		p->total[CAP_WRITE] += units;
		p->win[CAP_WRITE] += units;
		char type;
		const char *k;
		uint32_t len;
		if (key_bytes(key, &type, &k, &len))
			note_key(cg, p, CAP_WRITE, type, k, len, units, false);
		if (over != NULL && p->b[CAP_WRITE].tokens <= 0)
			*over = true;
	}
	pthread_mutex_unlock(&cg->mu);
}

void node_cap_gsi_behind(node_cap *c, uint32_t gid, uint32_t table_id, int64_t for_ms)
{
	cap_group *cg = group_of(c, gid);
	if (cg == NULL)
		return;
	int64_t until = now_ms() + for_ms;
	pthread_mutex_lock(&cg->mu);
	cap_part *p = find_id(cg, table_id, 0);
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
	               kind_name[kind]);
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
	cap_group *cg = group_of(c, gid);
	if (cg == NULL)
		return SHOAL_OK;
	int64_t now = now_ms();
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

/* ------------------------------------------------------------------------ */
/* The tick                                                                  */
/* ------------------------------------------------------------------------ */

/* What the catalog says of one partition (read outside the group's lock). */
typedef struct cap_def {
	uint32_t table_id;
	uint16_t index_id;
	const char *table, *index, *hash_attr;
	bool provisioned;
	double table_rate[2];
} cap_def;

static void def_rates(cap_def *d, st_billing billing, const st_throughput *tp)
{
	d->provisioned = billing == ST_BILLING_PROVISIONED;
	d->table_rate[CAP_READ] = (double)(d->provisioned ? tp->rcu : tp->max_rcu);
	d->table_rate[CAP_WRITE] = (double)(d->provisioned ? tp->wcu : tp->max_wcu);
}

/* Every partition of group grp's catalog into *defs (arena a). */
static int read_defs(node_cap *c, node_group *grp, sh_arena *a, cap_def **defs, uint32_t *n)
{
	char errmsg[SH_ERRMSG_SIZE];
	st_env *env = node_group_env(grp);
	uint32_t size = 0;
	*defs = NULL;
	*n = 0;
	const char *start = NULL;
	for (;;) {
		const char **names, *last;
		uint32_t nn;
		int rc = st_table_list(env, start, 100, a, &names, &nn, &last, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		for (uint32_t i = 0; i < nn; i++) {
			st_table_info info;
			if (st_table_describe(env, names[i], a, &info, errmsg) != SHOAL_OK)
				continue;
			uint32_t need = *n + 1 + info.def.n_indexes;
			if (need > size) {
				uint32_t ns = need * 2;
				cap_def *nd = sh_arena_alloc(a, ns * sizeof(*nd));
				if (nd == NULL)
					return SHOAL_E_NOMEM;
				if (*n > 0)
					memcpy(nd, *defs, *n * sizeof(*nd));
				*defs = nd;
				size = ns;
			}
			cap_def *d = &(*defs)[(*n)++];
			memset(d, 0, sizeof(*d));
			d->table_id = info.def.id;
			d->table = info.def.name;
			d->index = "";
			d->hash_attr = info.def.key.hash.name;
			def_rates(d, info.def.billing, &info.def.tp);
			for (uint32_t x = 0; x < info.def.n_indexes; x++) {
				const st_index_def *ix = &info.def.indexes[x];
				if (ix->local)
					continue;
				cap_def *e = &(*defs)[(*n)++];
				memset(e, 0, sizeof(*e));
				e->table_id = info.def.id;
				e->index_id = ix->id;
				e->table = info.def.name;
				e->index = ix->name;
				e->hash_attr = ix->key.hash.name;
				def_rates(e, info.def.billing, &ix->tp);
			}
		}
		if (last == NULL || nn == 0)
			break;
		start = last;
	}
	(void)c;
	return SHOAL_OK;
}

static void copy_name(char *dst, size_t size, const char *src)
{
	size_t l = src != NULL ? strlen(src) : 0;
	if (l >= size)
		l = size - 1;
	memcpy(dst, src != NULL ? src : "", l);
	dst[l] = '\0';
}

/* Merges the catalog's partitions into cg (new ones get full one-second
 * buckets, gone ones are dropped) and closes the second: per-second
 * figures from the windows.  Under cg->mu. */
static int merge_defs(node_cap *c, cap_group *cg, const cap_def *defs, uint32_t n, int64_t now,
                      double dt)
{
	for (uint32_t i = 0; i < cg->n; i++)
		cg->parts[i].seen = false;
	for (uint32_t i = 0; i < n; i++) {
		const cap_def *d = &defs[i];
		cap_part *p = find_id(cg, d->table_id, d->index_id);
		if (p == NULL) {
			if (cg->n == cg->size) {
				uint32_t ns = cg->size != 0 ? cg->size * 2 : 8;
				cap_part *np = sh_realloc(cg->parts, ns * sizeof(*np));
				if (np == NULL)
					return SHOAL_E_NOMEM;
				cg->parts = np;
				cg->size = ns;
			}
			p = &cg->parts[cg->n++];
			memset(p, 0, sizeof(*p));
			p->table_id = d->table_id;
			p->index_id = d->index_id;
			for (int k = 0; k < 2; k++) {
				p->lim[k].part_max = c->part_max[k];
				p->lim[k].parts = sh_cluster_partitions(c->n->conf);
				p->lim[k].table_rate = d->table_rate[k];
				p->lim[k].others = -1;
				double share = cap_share(&p->lim[k]);
				cap_bucket_init(&p->b[k], share, share * c->burst_secs, now);
			}
		}
		copy_name(p->table, sizeof(p->table), d->table);
		copy_name(p->index, sizeof(p->index), d->index);
		copy_name(p->hash_attr, sizeof(p->hash_attr), d->hash_attr);
		p->provisioned = d->provisioned;
		for (int k = 0; k < 2; k++)
			p->lim[k].table_rate = d->table_rate[k];
		p->seen = true;
	}
	uint32_t w = 0;
	for (uint32_t i = 0; i < cg->n; i++) {
		cap_part *p = &cg->parts[i];
		if (!p->seen)
			continue;
		for (int k = 0; k < 2; k++) {
			p->last[k] = p->win[k] / dt;
			p->thr_last[k] = (double)p->thr_win[k] / dt;
			p->win[k] = 0;
			p->thr_win[k] = 0;
		}
		if (w != i)
			cg->parts[w] = *p;
		w++;
	}
	cg->n = w;
	cap_sketch_roll(&cg->hot, dt);
	return SHOAL_OK;
}

/* The last second's consumption of every partition of this node's leading
 * groups, for adaptive capacity. */
typedef struct cap_use {
	uint32_t gid, table_id;
	uint16_t index_id;
	double last[2];
} cap_use;

void node_cap_tick(node_cap *c)
{
	if (c == NULL)
		return;
	int64_t now = now_ms();
	if (c->last_tick_ms != 0 && now - c->last_tick_ms < 1000)
		return;
	double dt = c->last_tick_ms != 0 ? (double)(now - c->last_tick_ms) / 1000.0 : 1.0;
	c->last_tick_ms = now;
	const sh_cluster_conf *conf = c->n->conf;
	uint32_t first_data = conf->groups > 1 ? 1 : 0;
	uint32_t data_groups = conf->groups - first_data;

	sh_arena_reset(&c->scratch);
	cap_use *use = NULL;
	uint32_t n_use = 0, size_use = 0;
	bool *lead = sh_arena_calloc(&c->scratch, c->groups, sizeof(*lead));
	if (lead == NULL)
		return;
	for (uint32_t g = first_data; g < c->groups; g++) {
		cap_group *cg = c->g[g];
		node_group *grp = node_group_get(c->n, g);
		if (cg == NULL || grp == NULL)
			continue;
		node_group_status st;
		node_group_status_get(grp, &st);
		lead[g] = st.role == RAFT_LEADER;
		cap_def *defs;
		uint32_t n;
		if (node_group_health(grp, NULL) != SHOAL_OK ||
		    read_defs(c, grp, &c->scratch, &defs, &n) != SHOAL_OK)
			continue;
		pthread_mutex_lock(&cg->mu);
		cg->leading = lead[g];
		int rc = merge_defs(c, cg, defs, n, now, dt);
		if (rc == SHOAL_OK && n_use + cg->n > size_use) {
			uint32_t ns = (n_use + cg->n) * 2;
			cap_use *nu = sh_arena_alloc(&c->scratch, ns * sizeof(*nu));
			if (nu != NULL) {
				if (n_use > 0)
					memcpy(nu, use, n_use * sizeof(*nu));
				use = nu;
				size_use = ns;
			}
		}
		for (uint32_t i = 0; rc == SHOAL_OK && lead[g] && i < cg->n && n_use < size_use;
		     i++) {
			cap_use *u = &use[n_use++];
			u->gid = g;
			u->table_id = cg->parts[i].table_id;
			u->index_id = cg->parts[i].index_id;
			u->last[0] = cg->parts[i].last[0];
			u->last[1] = cg->parts[i].last[1];
		}
		pthread_mutex_unlock(&cg->mu);
	}

	/* Rates: adaptive capacity knows the other partitions' consumption
	 * only when this node leads all of them. */
	for (uint32_t g = first_data; g < c->groups; g++) {
		cap_group *cg = c->g[g];
		if (cg == NULL)
			continue;
		pthread_mutex_lock(&cg->mu);
		for (uint32_t i = 0; i < cg->n; i++) {
			cap_part *p = &cg->parts[i];
			double others[2] = {0, 0};
			uint32_t known = 0;
			for (uint32_t u = 0; u < n_use; u++) {
				if (use[u].gid == g || use[u].table_id != p->table_id ||
				    use[u].index_id != p->index_id)
					continue;
				known++;
				others[0] += use[u].last[0];
				others[1] += use[u].last[1];
			}
			bool all = known + 1 >= data_groups;
			for (int k = 0; k < 2; k++) {
				p->lim[k].parts = data_groups > 0 ? data_groups : 1;
				p->lim[k].others = all ? others[k] : -1;
				double share = cap_share(&p->lim[k]);
				cap_bucket_set(&p->b[k], cap_adaptive_rate(&p->lim[k]),
				               share * c->burst_secs, now);
			}
		}
		pthread_mutex_unlock(&cg->mu);
	}
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */
/* ------------------------------------------------------------------------ */

static const cap_part *part_by_id(const cap_group *cg, uint32_t table_id, uint16_t index_id)
{
	for (uint32_t i = 0; i < cg->n; i++)
		if (cg->parts[i].table_id == table_id && cg->parts[i].index_id == index_id)
			return &cg->parts[i];
	return NULL;
}

int node_cap_status(node_cap *c, uint32_t gid, sh_arena *a, Shoal__GroupStatus *gs)
{
	cap_group *cg = group_of(c, gid);
	if (cg == NULL)
		return SHOAL_OK;
	int rc = SHOAL_OK;
	int64_t now = now_ms();
	pthread_mutex_lock(&cg->mu);
	if (!cg->leading || cg->n == 0)
		goto out;
	gs->load = sh_arena_calloc(a, cg->n, sizeof(*gs->load));
	if (gs->load == NULL)
		goto nomem;
	for (uint32_t i = 0; i < cg->n; i++) {
		cap_part *p = &cg->parts[i];
		Shoal__PartitionLoad *l = sh_arena_alloc(a, sizeof(*l));
		if (l == NULL)
			goto nomem;
		shoal__partition_load__init(l);
		l->table = sh_arena_strndup(a, p->table, strlen(p->table));
		l->index = sh_arena_strndup(a, p->index, strlen(p->index));
		if (l->table == NULL || l->index == NULL)
			goto nomem;
		l->read_units = p->last[CAP_READ];
		l->write_units = p->last[CAP_WRITE];
		l->read_throttled = (uint64_t)llround(p->thr_last[CAP_READ]);
		l->write_throttled = (uint64_t)llround(p->thr_last[CAP_WRITE]);
		cap_bucket_refill(&p->b[CAP_READ], now);
		cap_bucket_refill(&p->b[CAP_WRITE], now);
		l->read_limit = p->b[CAP_READ].rate;
		l->write_limit = p->b[CAP_WRITE].rate;
		l->read_tokens = p->b[CAP_READ].tokens;
		l->write_tokens = p->b[CAP_WRITE].tokens;
		gs->load[gs->n_load++] = l;
	}
	uint32_t idx[8];
	uint32_t n = cap_sketch_top(&cg->hot, idx, 8);
	if (n > 0 && (gs->hot_keys = sh_arena_calloc(a, n, sizeof(*gs->hot_keys))) == NULL)
		goto nomem;
	for (uint32_t i = 0; i < n; i++) {
		const cap_hot *h = &cg->hot.slot[idx[i]];
		const cap_part *p = part_by_id(cg, h->table_id, h->index_id);
		if (p == NULL)
			continue;
		Shoal__HotKey *k = sh_arena_alloc(a, sizeof(*k));
		if (k == NULL)
			goto nomem;
		shoal__hot_key__init(k);
		k->table = sh_arena_strndup(a, p->table, strlen(p->table));
		k->index = sh_arena_strndup(a, p->index, strlen(p->index));
		k->key = sh_arena_strndup(a, h->key, strlen(h->key));
		if (k->table == NULL || k->index == NULL || k->key == NULL)
			goto nomem;
		k->read_units = h->rate[CAP_READ];
		k->write_units = h->rate[CAP_WRITE];
		k->throttled = h->throttled;
		gs->hot_keys[gs->n_hot_keys++] = k;
	}
out:
	pthread_mutex_unlock(&cg->mu);
	return rc;
nomem:
	rc = SHOAL_E_NOMEM;
	goto out;
}

/* A Prometheus label value: \ " and newline escaped. */
static void label_escape(const char *s, char *out, size_t size)
{
	size_t o = 0;
	for (; *s != '\0' && o + 3 < size; s++) {
		if (*s == '\\' || *s == '"')
			out[o++] = '\\', out[o++] = *s;
		else if (*s == '\n')
			out[o++] = '\\', out[o++] = 'n';
		else
			out[o++] = *s;
	}
	out[o] = '\0';
}

static const char *const metric[4][2] = {
    {"shoal_partition_consumed_units_total",
     "capacity units consumed by the partition (its group's leader counts)"},
    {"shoal_partition_throttled_total", "requests refused with ProvisionedThroughputExceeded"},
    {"shoal_partition_limit_units", "units per second the partition's bucket refills at now"},
    {"shoal_hot_key_units", "units per second of the heaviest partition keys (decaying)"},
};

void node_cap_metrics(node_cap *c, node_appendf_fn appendf, void *buf)
{
	if (c == NULL)
		return;
	static const char *const type[4] = {"counter", "counter", "gauge", "gauge"};
	for (int m = 0; m < 4; m++) {
		appendf(buf, "# HELP %s %s\n# TYPE %s %s\n", metric[m][0], metric[m][1],
		        metric[m][0], type[m]);
		for (uint32_t g = 0; g < c->groups; g++) {
			cap_group *cg = c->g[g];
			if (cg == NULL)
				continue;
			pthread_mutex_lock(&cg->mu);
			if (!cg->leading) {
				pthread_mutex_unlock(&cg->mu);
				continue;
			}
			if (m < 3) {
				for (uint32_t i = 0; i < cg->n; i++) {
					const cap_part *p = &cg->parts[i];
					for (int k = 0; k < 2; k++) {
						double v = m == 0   ? p->total[k]
						           : m == 1 ? (double)p->thr_total[k]
						                    : p->b[k].rate;
						appendf(buf,
						        "%s{group=\"%u\",table=\"%s\",index=\"%s\","
						        "kind=\"%s\"} %.1f\n",
						        metric[m][0], g, p->table, p->index,
						        kind_name[k], v);
					}
				}
			} else {
				uint32_t idx[8];
				uint32_t n = cap_sketch_top(&cg->hot, idx, 8);
				for (uint32_t i = 0; i < n; i++) {
					const cap_hot *h = &cg->hot.slot[idx[i]];
					const cap_part *p =
					    part_by_id(cg, h->table_id, h->index_id);
					if (p == NULL)
						continue;
					char key[2 * CAP_HOT_KEY_MAX + 4];
					label_escape(h->key, key, sizeof(key));
					for (int k = 0; k < 2; k++)
						appendf(buf,
						        "%s{group=\"%u\",table=\"%s\",index=\"%s\","
						        "key=\"%s\",kind=\"%s\"} %.1f\n",
						        metric[m][0], g, p->table, p->index, key,
						        kind_name[k], h->rate[k]);
				}
			}
			pthread_mutex_unlock(&cg->mu);
		}
	}
}
