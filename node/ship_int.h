/*
 * ship_int.h -- internals shared by node/ship.c (the shipper: sources, their
 * state machine, lifecycle) and node/ship_link.c (the nng side: sockets,
 * one exchange per (source, target) link, results handed to the loop, the
 * shipper's metrics).  node.h has the contract.
 */
#ifndef SHOAL_NODE_SHIP_INT_H
#define SHOAL_NODE_SHIP_INT_H

#include <nng/nng.h>

#include "common/retry.h"
#include "node/node.h"
#include "proto/lanes.h"
#include "storage/index.h"

/* Propagation lag histogram bounds, milliseconds (+Inf implied). */
#define LAG_BUCKETS 14
/* Indexes tracked by the lag histograms (beyond this they share a slot). */
#define LAG_SLOTS 64

typedef enum link_state {
	LINK_IDLE,    /* nothing on the wire */
	LINK_SENDING, /* in the target node's lanes */
	LINK_DONE,    /* result on the done list, for the loop */
} link_state;

typedef struct ship_src ship_src;
typedef struct node_txnrec node_txnrec;
typedef struct node_elastic node_elastic;

/* One (source, target) pair. */
typedef struct ship_link {
	wire_lane_item item; /* the batch in the target node's lanes */
	node_ship *s;
	ship_src *src;
	uint32_t target;
	link_state state;     /* the exchange's progress (nng thread, then s->mu) */
	bool busy;            /* loop: an exchange is under way or unprocessed */
	uint32_t gen;         /* src->gen of the exchange */
	uint32_t n_sent;      /* deltas in the batch */
	uint32_t dest;        /* the node the batch went to */
	sh_retry retry;       /* where the next batch goes, and when (common/retry.h) */
	bool retry_on;        /* retry is set up (else: choose afresh) */
	uint64_t retry_epoch; /* the cluster map's epoch it was set up with */
	uint64_t retry_ns;    /* not before (monotonic) */
	uint64_t fails;       /* consecutive, for logging */
	int rv;               /* WIRE_LANE_* */
	nng_msg *req;         /* the packed NodeRequest in flight */
	nng_msg *reply;
	struct ship_link *done_next;
} ship_link;

struct ship_src {
	node_ship *s;
	node_group *g;
	uint32_t gid;
	bool active;
	uint64_t term;
	uint32_t gen;
	node_shipq q;
	bool q_init;
	uint64_t seen_applied;
	bool want_read;                /* read the outbox at the next tick */
	bool kick;                     /* look at the links at the next tick */
	uint64_t hold_ns;              /* when deltas were last held (node_shipq_refused) */
	uint64_t refusals;             /* batches refused for a GSI range, for logging */
	bool reroute;                  /* node_shipq_reroute once nothing is in flight */
	uint64_t map_epoch, gsi_sig;   /* the map seen, and its GSI partitions' signature */
	uint64_t last_seq;             /* outbox info at the last read */
	uint64_t acked;                /* node_shipq_watermark */
	ship_link **links;             /* [groups], created on first use */
	struct ship_src *retired_next; /* node_ship.retired */

	/* OutboxTrim through this group's own log. */
	node_waiter trim_w;
	bool trim_w_init, trim_busy;
	Shoal__OutboxTrim trim_op;
	uint64_t trim_sent; /* highest upto applied (or the watermark at activation) */
	uint64_t trim_ns;   /* when the last trim was proposed */

	/* Backfill steps, one at a time. */
	node_waiter bf_w;
	bool bf_w_init, bf_busy;
	Shoal__IndexBackfill bf_op;
	char bf_table[512];
	uint64_t bf_next_ns;

	sh_arena scratch;

	/* Published for other threads. */
	_Atomic uint64_t backlog;
	atomic_uint_fast64_t shipped_total; /* deltas acknowledged by targets */
	atomic_uint_fast64_t applied_total; /* deltas this group applied as a target */
};

typedef struct lag_slot {
	uint32_t table_id;
	uint16_t index_id;
	bool used;
	uint64_t buckets[LAG_BUCKETS + 1];
	uint64_t count;
	double sum_ms;
	int64_t last_ms; /* the most recent sample */
} lag_slot;

typedef struct node_pmove node_pmove;

struct node_ship {
	node *n;
	const sh_cluster_conf *conf;
	uv_timer_t timer;
	uv_async_t async;
	bool timer_init, async_init;
	bool closing;       /* loop */
	atomic_bool paused; /* node_ship_set_paused */
	bool timer_fired;   /* loop: the timer ran since the last tick */

	pthread_mutex_t mu; /* done list, async_open */
	bool async_open;
	ship_link *done;

	/* Lane slots, by node id (slot_node[i]: the node of slot i, 0 free;
	 * taken on first use, any node of the map or the cluster file). */
	uint32_t slot_node[SH_MAX_NODES];
	nng_socket socks[SH_MAX_NODES];
	bool sock_open[SH_MAX_NODES];
	/* Per node: lanes on its socket (proto/lanes.h): batches of several
	 * links to one node share messages. */
	wire_lane_io io[SH_MAX_NODES];
	wire_lanes lanes[SH_MAX_NODES];
	bool lanes_init[SH_MAX_NODES];

	ship_src **srcs;       /* [groups]; NULL where not hosted */
	ship_src *retired;     /* sources of groups closed or reopened (loop) */
	node_txnrec *rec;      /* transaction recovery (txn_recover.c), on these lanes */
	node_elastic *elastic; /* the cluster's shape (elastic.c), on these lanes */
	node_pmove *pmove;     /* partition moves (pmove.c), on these lanes */
	uint64_t map_epoch;    /* the node's map at the last tick (pmove's wake-up) */

	pthread_mutex_t lag_mu;
	lag_slot lag[LAG_SLOTS];
};

/* txn_recover.c: transaction recovery, run from node_ship_tick (loop). */
int node_txnrec_open(node_ship *s, node_txnrec **out, char *errmsg);
void node_txnrec_tick(node_txnrec *r, uint64_t now_ns);
void node_txnrec_metrics(node_txnrec *r, node_appendf_fn appendf, void *buf);
/* After the lanes are closed and the groups have answered every waiter. */
void node_txnrec_free(node_txnrec *r);

/* elastic.c: the executor of the cluster's shape while this node leads
 * group 0, run from node_ship_tick (loop); closed with the ship, freed after
 * the lanes and the groups have answered everything. */
int node_elastic_open(node_ship *s, node_elastic **out, char *errmsg);
void node_elastic_tick(node_elastic *e, uint64_t now_ns);
void node_elastic_metrics(node_elastic *e, node_appendf_fn appendf, void *buf);
void node_elastic_close(node_elastic *e);
void node_elastic_free(node_elastic *e);

/* pmove.c: partition moves whose source group this node leads, driven by a
 * thread of their own (it blocks on proposals and on the target's answers).
 * close asks it to stop (loop, with the ship); free joins it, before the
 * lanes are freed. */
int node_pmove_open(node_ship *s, node_pmove **out, char *errmsg);
void node_pmove_metrics(node_pmove *pm, node_appendf_fn appendf, void *buf);
void node_pmove_close(node_pmove *pm);
/* The node's map changed: the driver looks at its moves now, not at its next
 * pass (a flip it waits for: the own of a GSI range, the purge). */
void node_pmove_kick(node_pmove *pm);
void node_pmove_free(node_pmove *pm);

/* The lanes to node id (opened on first use), or NULL (closing).  Loop. */
wire_lanes *node_ship_lanes_to(node_ship *s, uint32_t id);

/* ship_link.c, all on the loop thread. */

/* Sends the next batch of src's queue for `target` when its link is free
 * and not backing off. */
void node_ship_link_send(ship_src *src, uint32_t target, uint64_t now);
/* Processes the exchanges the nng callbacks finished (acknowledgements pop
 * the queues; failures make batches unsent and pick another node). */
void node_ship_drain(node_ship *s);
/* Forgets where the link sent and its backoff (a new leadership). */
void node_ship_link_reset(ship_link *l);
/* Frees a link (its node's lanes are closed: nothing of it is in flight). */
void node_ship_link_free(ship_link *l);
/* Closes every node's lanes (exchanges in flight end now; their results
 * reach the done list), and frees them (after close, loop ended). */
void node_ship_lanes_close(node_ship *s);
void node_ship_lanes_free(node_ship *s);

#endif
