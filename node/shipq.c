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
 * smallest head seq over all queues and the held list, or the read position
 * when all are empty.  Invariants (asserted): seqs strictly increase within
 * a queue, within the held list and overall; in flight <= queued; the
 * watermark never exceeds read_pos.
 *
 * Moves of the GSI space (storage/parts.h, "The GSI space").  A target
 * deduplicates the deltas of a range that moved to it by the range's own
 * watermark per source, so each range's deltas must reach their target in
 * seq order -- also across a change of target.  Two rules give that:
 *   - a target refuses a whole batch holding a delta of a range moving or
 *     moved away from it (node_shipq_refused): every delta of that range,
 *     queued or pushed later, waits in the held list, while the rest goes
 *     on (the target's own watermark passes the held seqs, which the
 *     range's pinned watermarks make harmless);
 *   - deltas change target only in node_shipq_reroute, with no batch in
 *     flight: every queued and held delta goes again, in seq order, where
 *     the map says.  The shipper calls it when the map's GSI partitions
 *     changed and a moment after a refusal.  Between two reroutes, deltas
 *     are routed by the map as the last one saw it (q->routes), not by
 *     the current one.
 */
#include <assert.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "common/placement.h"
#include "node/node.h"

/* Bytes a delta adds to a batch besides its key and value (the protobuf
 * framing and fixed fields of one IndexDelta, roughly). */
#define DELTA_OVERHEAD 40

static size_t delta_cost(const node_sdelta *x)
{
	return x->d.key_len + x->d.val_len + DELTA_OVERHEAD;
}

uint32_t node_shipq_target(const sh_cluster_conf *conf, struct sh_place *place, uint64_t hash)
{
	uint32_t g = place != NULL
	                 ? sh_place_route(place, conf, SH_MAP_GSI_SPACE, hash)
	                 : sh_cluster_partition_group(conf, sh_cluster_partition_of(conf, hash));
	return g < sh_cluster_group_cap(conf) ? g : 0;
}

/* q->routes: the map's GSI partitions as of now (kept as they were when
 * they cannot be read: out of memory). */
static void routes_snap(node_shipq *q)
{
	if (q->place == NULL)
		return;
	for (;;) {
		uint32_t n = sh_place_table_parts(q->place, q->conf, SH_MAP_GSI_SPACE, q->routes,
		                                  q->cap_routes);
		if (n <= q->cap_routes) {
			q->n_routes = n;
			return;
		}
		sh_place_part *grown = sh_realloc(q->routes, n * sizeof(*grown));
		if (grown == NULL)
			return;
		q->routes = grown;
		q->cap_routes = n;
	}
}

/* The target of hash by q->routes (the file's placement without them). */
static uint32_t route(const node_shipq *q, uint64_t hash)
{
	if (q->n_routes == 0)
		return node_shipq_target(q->conf, NULL, hash);
	uint32_t lo = 0, hi = q->n_routes - 1;
	while (lo < hi) { /* the last partition starting at or below hash */
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (q->routes[mid].lo <= hash)
			lo = mid;
		else
			hi = mid - 1;
	}
	uint32_t g = q->routes[lo].group;
	return g < sh_cluster_group_cap(q->conf) ? g : 0;
}

int node_shipq_init(node_shipq *q, const sh_cluster_conf *conf, struct sh_place *place)
{
	memset(q, 0, sizeof(*q));
	q->conf = conf;
	q->place = place;
	q->links = sh_calloc(sh_cluster_group_cap(conf), sizeof(*q->links));
	if (q->links == NULL)
		return SHOAL_E_NOMEM;
	for (uint32_t t = 0; t < sh_cluster_group_cap(conf); t++)
		q->links[t].target = t;
	return SHOAL_OK;
}

/* Frees a list of deltas. */
static void list_free(node_sdelta *x)
{
	while (x != NULL) {
		node_sdelta *next = x->next;
		sh_free(x);
		x = next;
	}
}

static void link_clear(node_shipq_link *l)
{
	list_free(l->head);
	l->head = l->tail = NULL;
	l->n = 0;
	l->bytes = 0;
	l->inflight = 0;
}

static void held_clear(node_shipq *q)
{
	list_free(q->held_head);
	q->held_head = q->held_tail = NULL;
	q->n_held = 0;
	q->n_held_ranges = 0;
}

void node_shipq_reset(node_shipq *q, uint64_t pos)
{
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++)
		link_clear(&q->links[t]);
	held_clear(q);
	routes_snap(q);
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
	sh_free(q->routes);
	q->routes = NULL;
	q->n_routes = q->cap_routes = 0;
}

/* Appends x (its seq above the list's last) to the list (*head, *tail). */
static void list_append(node_sdelta **head, node_sdelta **tail, node_sdelta *x)
{
	assert(*tail == NULL || (*tail)->d.seq < x->d.seq);
	x->next = NULL;
	if (*tail != NULL)
		(*tail)->next = x;
	else
		*head = x;
	*tail = x;
}

static void link_append(node_shipq_link *l, node_sdelta *x)
{
	list_append(&l->head, &l->tail, x);
	l->n++;
	l->bytes += delta_cost(x);
}

static bool in_held_range(const node_shipq *q, uint64_t hash)
{
	for (uint32_t i = 0; i < q->n_held_ranges; i++)
		if (q->held_ranges[i].lo <= hash && hash <= q->held_ranges[i].hi)
			return true;
	return false;
}

static void held_append(node_shipq *q, node_sdelta *x)
{
	list_append(&q->held_head, &q->held_tail, x);
	q->n_held++;
}

/* Inserts x into the seq-ordered list (*head, *tail). */
static void insert_sorted(node_sdelta **head, node_sdelta **tail, node_sdelta *x)
{
	node_sdelta **at = head;
	while (*at != NULL && (*at)->d.seq < x->d.seq)
		at = &(*at)->next;
	assert(*at == NULL || (*at)->d.seq != x->d.seq);
	x->next = *at;
	*at = x;
	if (x->next == NULL)
		*tail = x;
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

	node_shipq_link *l = &q->links[route(q, d->hash)];
	q->n_buffered++;
	q->read_pos = d->seq;
	if (in_held_range(q, d->hash)) {
		held_append(q, x);
		q->bytes_buffered += delta_cost(x);
		return SHOAL_OK;
	}
	link_append(l, x);
	q->bytes_buffered += delta_cost(x);
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

void node_shipq_refused(node_shipq *q, uint32_t target, uint64_t lo, uint64_t hi)
{
	node_shipq_link *l = &q->links[target];
	l->inflight = 0;
	if (lo > hi)
		return;
	if (q->n_held_ranges == NODE_SHIPQ_HELD_RANGES) {
		/* Full: the last one grows to cover this one too (holding
		 * more than needed only delays it to the next reroute). */
		node_shipq_range *r = &q->held_ranges[NODE_SHIPQ_HELD_RANGES - 1];
		r->lo = lo < r->lo ? lo : r->lo;
		r->hi = hi > r->hi ? hi : r->hi;
	} else {
		q->held_ranges[q->n_held_ranges++] = (node_shipq_range){lo, hi};
	}
	node_sdelta **at = &l->head;
	l->tail = NULL;
	while (*at != NULL) {
		node_sdelta *x = *at;
		if (!in_held_range(q, x->d.hash)) {
			l->tail = x;
			at = &x->next;
			continue;
		}
		*at = x->next;
		l->n--;
		l->bytes -= delta_cost(x);
		insert_sorted(&q->held_head, &q->held_tail, x);
		q->n_held++;
	}
}

bool node_shipq_quiet(const node_shipq *q)
{
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++)
		if (q->links[t].inflight > 0)
			return false;
	return true;
}

/* Merges two seq-ordered lists. */
static node_sdelta *merge(node_sdelta *a, node_sdelta *b)
{
	node_sdelta head = {.next = NULL}, *t = &head;
	while (a != NULL && b != NULL) {
		node_sdelta **min = a->d.seq < b->d.seq ? &a : &b;
		t->next = *min;
		t = *min;
		*min = (*min)->next;
	}
	t->next = a != NULL ? a : b;
	return head.next;
}

void node_shipq_reroute(node_shipq *q)
{
	assert(node_shipq_quiet(q));
	routes_snap(q);
	node_sdelta *all = q->held_head;
	q->held_head = q->held_tail = NULL;
	q->n_held = 0;
	q->n_held_ranges = 0;
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++) {
		node_shipq_link *l = &q->links[t];
		all = merge(all, l->head);
		l->head = l->tail = NULL;
		l->n = 0;
		l->bytes = 0;
	}
	while (all != NULL) {
		node_sdelta *x = all;
		all = x->next;
		x->next = NULL;
		link_append(&q->links[route(q, x->d.hash)], x);
	}
}

uint64_t node_shipq_watermark(const node_shipq *q)
{
	uint64_t w = q->read_pos;
	if (q->held_head != NULL && q->held_head->d.seq - 1 < w)
		w = q->held_head->d.seq - 1;
	for (uint32_t t = 0; t < sh_cluster_group_cap(q->conf); t++) {
		const node_sdelta *h = q->links[t].head;
		if (h != NULL && h->d.seq - 1 < w)
			w = h->d.seq - 1;
	}
	assert(w <= q->read_pos);
	return w;
}
