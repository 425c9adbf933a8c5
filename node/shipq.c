/*
 * shipq.c -- the shipper's bookkeeping for one source group: the deltas read
 * from the outbox and not yet acknowledged, queued per target group, and the
 * shipped position they imply.  Pure: no I/O, no clock (node.h, "Index
 * shipping", and tests/unit/test_ship.c).
 *
 * Deltas enter in seq order (node_shipq_push) and go to the queue of the
 * group that owns their index partition (hash -> partition -> group, the
 * same map base items use).  Each queue sends its head as one batch at a
 * time (node_shipq_take marks the first k deltas in flight); an
 * acknowledgement pops them (node_shipq_ack), a failure makes them unsent
 * again (node_shipq_retry), to be taken again -- possibly with more deltas
 * behind them, which is harmless: every batch starts at the queue's first
 * unacknowledged delta, so the target has applied every earlier delta meant
 * for it, and it skips the seqs it already has.
 *
 * The shipped position (node_shipq_watermark) is the highest seq S such
 * that every delta <= S has been acknowledged by its target: one below the
 * smallest head seq over all queues, or the read position when every queue
 * is empty.  Invariants (asserted): seqs strictly increase within a queue
 * and overall; in flight <= queued; the watermark never exceeds read_pos.
 */
#include <assert.h>
#include <string.h>

#include "common/alloc.h"
#include "node/node.h"

/* Bytes a delta adds to a batch besides its key and value (the protobuf
 * framing and fixed fields of one IndexDelta, roughly). */
#define DELTA_OVERHEAD 40

static size_t delta_cost(const node_sdelta *x)
{
	return x->d.key_len + x->d.val_len + DELTA_OVERHEAD;
}

uint32_t node_shipq_target(const sh_cluster_conf *conf, uint64_t hash)
{
	return sh_cluster_partition_group(conf, sh_cluster_partition_of(conf, hash));
}

int node_shipq_init(node_shipq *q, const sh_cluster_conf *conf)
{
	memset(q, 0, sizeof(*q));
	q->conf = conf;
	q->links = sh_calloc(sh_cluster_group_cap(conf), sizeof(*q->links));
	if (q->links == NULL)
		return SHOAL_E_NOMEM;
	for (uint32_t t = 0; t < sh_cluster_group_cap(conf); t++)
		q->links[t].target = t;
	return SHOAL_OK;
}

static void link_clear(node_shipq_link *l)
{
	node_sdelta *x = l->head;
	while (x != NULL) {
		node_sdelta *next = x->next;
		sh_free(x);
		x = next;
	}
	l->head = l->tail = NULL;
	l->n = 0;
	l->bytes = 0;
	l->inflight = 0;
}

void node_shipq_reset(node_shipq *q, uint64_t pos)
{
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++)
		link_clear(&q->links[t]);
	q->read_pos = pos;
	q->n_buffered = 0;
	q->bytes_buffered = 0;
}

void node_shipq_fini(node_shipq *q)
{
	if (q->links == NULL)
		return;
	node_shipq_reset(q, 0);
	sh_free(q->links);
	q->links = NULL;
}

int node_shipq_push(node_shipq *q, const st_delta *d)
{
	assert(d->seq > q->read_pos);
	size_t len = d->key_len + d->val_len;
	node_sdelta *x = sh_malloc(sizeof(*x) + (len > 0 ? len : 1));
	if (x == NULL)
		return SHOAL_E_NOMEM;
	x->next = NULL;
	x->d = *d;
	uint8_t *p = (uint8_t *)(x + 1);
	if (d->key_len > 0)
		memcpy(p, d->key, d->key_len);
	if (d->val_len > 0)
		memcpy(p + d->key_len, d->val, d->val_len);
	x->d.key = p;
	x->d.val = d->val_len > 0 ? p + d->key_len : NULL;

	node_shipq_link *l = &q->links[node_shipq_target(q->conf, d->hash)];
	assert(l->tail == NULL || l->tail->d.seq < d->seq);
	if (l->tail != NULL)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
	l->n++;
	l->bytes += delta_cost(x);
	q->n_buffered++;
	q->bytes_buffered += delta_cost(x);
	q->read_pos = d->seq;
	return SHOAL_OK;
}

uint32_t node_shipq_take(node_shipq *q, uint32_t target, uint32_t max_n, size_t max_bytes)
{
	node_shipq_link *l = &q->links[target];
	if (l->inflight > 0 || l->head == NULL)
		return 0;
	uint32_t k = 0;
	size_t bytes = 0;
	for (node_sdelta *x = l->head; x != NULL && k < max_n; x = x->next) {
		size_t c = delta_cost(x);
		if (k > 0 && bytes + c > max_bytes)
			break; /* one delta always goes, however large */
		bytes += c;
		k++;
	}
	l->inflight = k;
	return k;
}

void node_shipq_ack(node_shipq *q, uint32_t target, void (*each)(void *arg, const st_delta *d),
                    void *arg)
{
	node_shipq_link *l = &q->links[target];
	assert(l->inflight <= l->n);
	for (uint32_t i = 0; i < l->inflight; i++) {
		node_sdelta *x = l->head;
		l->head = x->next;
		if (l->head == NULL)
			l->tail = NULL;
		l->n--;
		l->bytes -= delta_cost(x);
		q->n_buffered--;
		q->bytes_buffered -= delta_cost(x);
		if (each != NULL)
			each(arg, &x->d);
		sh_free(x);
	}
	l->inflight = 0;
}

void node_shipq_retry(node_shipq *q, uint32_t target)
{
	q->links[target].inflight = 0;
}

uint64_t node_shipq_watermark(const node_shipq *q)
{
	uint64_t w = q->read_pos;
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++) {
		const node_sdelta *h = q->links[t].head;
		if (h != NULL && h->d.seq - 1 < w)
			w = h->d.seq - 1;
	}
	assert(w <= q->read_pos);
	return w;
}
