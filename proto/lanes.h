/*
 * lanes.h -- the one batching transport (prefix wire_lane): libshoal ->
 * router, router -> node and node -> node (index shipping) all send their
 * requests through it.
 *
 * Every message costs both ends a poller wakeup and task hand-offs, more
 * than a small request's own work, so requests for one destination share
 * messages.  A destination (wire_lanes) has a FIFO queue and a few lanes; a
 * lane is one channel (an nng REQ context) with one message in flight.  A
 * submitted item is queued; an idle lane takes everything queued (up to
 * max_items and about max_bytes) and sends it: a lone item as its own bytes,
 * several as one batch message whose repeated field `req_field` holds each
 * item's bytes (shoal.proto Request.batch, cluster.proto NodeRequest.batch);
 * the answer carries each answer in order in `resp_field`.  When the answer
 * comes, the lane takes the next batch off the queue, or goes idle.  An item
 * never waits while a lane is idle, so one client alone sees no added
 * latency, and the busier a destination the more each message carries.
 *
 * Corking: between wire_lanes_cork and wire_lanes_uncork (nestable, per
 * thread) submitted items are queued without starting a lane; the uncork
 * starts idle lanes of the destinations that were corked, so the members of
 * a burst (a client's batch, a poll's callbacks, the calls of a
 * scatter-gather step) leave together instead of the first alone.
 *
 * Lane state machine (each lane; the I/O's callback drives it):
 *
 *   state  event                                  next   function
 *   -----  -------------------------------------  -----  ----------------------
 *   IDLE   items taken off the queue              BUSY   lane_send (io->send)
 *   BUSY   answer                                 IDLE*  lane_cb: done(OK) each
 *   BUSY   not sent / timed out / reset / closed  IDLE*  lane_cb: done(rv) each
 *   (* or BUSY again at once when items are queued: lane_next, before the
 *   finished items' done callbacks run, so that the destination is not
 *   left waiting while they are handled)
 *
 * Failures are the caller's to handle: an item whose message failed is
 * done with the reason, and the caller decides (retry policy: common/
 * retry.h) whether and where it goes again.
 *
 * Stalled connections: a destination whose exchanges keep failing with no
 * answer (WIRE_LANE_TIMEOUT) or no room to send (WIRE_LANE_UNREACHABLE) --
 * the first such failure since the last answer at least stall_ms ago --
 * asks its I/O to renew the connection (io->renew, at most once per
 * stall_ms).  A connection to a peer that went without closing it carries
 * nothing until the kernel gives it up (minutes), and nng dials again only
 * then; the nng I/O's renew closes and redials the socket's connection
 * (sh_dial_renew, common/tls.h), which leaves a socket without one as it
 * is.  A slow peer that answers some exchanges is never renewed; a hung
 * one is, every stall_ms, at the cost of a connection attempt.
 *
 * The I/O seam (wire_lane_io): what sends a message and delivers its reply,
 * as canonical/raft keeps its I/O behind raft_io.  wire_lane_nng_io is the
 * real one (nng REQ contexts on a socket); tests drive the lanes with a
 * recording io and answer messages by hand, without sockets or threads.
 *
 * Also here: the receiving end's framing of batches (wire_batch_*), used by
 * the router and the node servers.
 *
 * Threads: any thread may submit; done callbacks run on the I/O's threads
 * (nng's callback threads), never inside wire_lanes_submit, and may submit
 * again.
 */
#ifndef SHOAL_PROTO_LANES_H
#define SHOAL_PROTO_LANES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <protobuf-c/protobuf-c.h>

/* How an item's exchange ended. */
enum wire_lane_rv {
	WIRE_LANE_OK = 0,      /* answered */
	WIRE_LANE_UNREACHABLE, /* not sent: no connection in time */
	WIRE_LANE_TIMEOUT,     /* sent; no answer by the deadline */
	WIRE_LANE_RESET,       /* sent; the connection broke before the answer */
	WIRE_LANE_BAD,         /* the answer does not hold this item's */
	WIRE_LANE_CLOSED,      /* the destination is closing */
	WIRE_LANE_NOMEM,       /* out of memory building the message */
};

/* "ok", "unreachable", "timeout", ... (logs). */
const char *wire_lane_rv_name(int rv);

typedef struct wire_lane_item wire_lane_item;

/*
 * The end of an item's exchange.  rv WIRE_LANE_OK: ans/len is its answer.
 * `whole` is the reply message when the item travelled alone: the callee
 * owns it then (and ans points into it); for a batch member whole is NULL
 * and ans points into a message freed after done returns (copy what you
 * keep).  Any thread; the item is not touched after done is called.
 */
typedef void (*wire_lane_done)(wire_lane_item *it, int rv, nng_msg *whole, const uint8_t *ans,
                               size_t len);

/* A request, embedded in its owner's record.  The bytes are borrowed until
 * done runs. */
struct wire_lane_item {
	const uint8_t *part[2]; /* the request: part[0] then part[1] (len 0: none) */
	size_t len[2];
	int64_t deadline; /* monotonic ms (sh_now_ms): the answer is due by then */
	wire_lane_done done;
	wire_lane_item *next; /* private: the queue, then the lane's message */
};

/* The I/O seam.  A channel carries one exchange at a time; its callback
 * reports each exchange once: cb(arg, WIRE_LANE_OK, reply) (reply taken
 * over) or cb(arg, rv, NULL), on any thread but never inside send. */
typedef void (*wire_lane_io_cb)(void *arg, int rv, nng_msg *reply);

typedef struct wire_lane_io {
	void *impl;
	/* A new channel whose exchanges end with cb(arg, ...). */
	int (*open)(void *impl, wire_lane_io_cb cb, void *arg, void **chan);
	/* Sends msg (taken over); it must be handed to a connection by send_by
	 * and answered by answer_by (monotonic ms). */
	void (*send)(void *chan, nng_msg *msg, int64_t send_by, int64_t answer_by);
	/* Cancels the exchange in flight (its cb runs, with a failure), waits
	 * for that cb, and makes every later send end at once with a failure
	 * (its cb runs, never inside send). */
	void (*stop)(void *chan);
	void (*free)(void *chan);
	/* Optional: the destination's connection seems dead (see "Stalled
	 * connections"): make a new one.  Any thread, never blocking. */
	void (*renew)(void *impl);
} wire_lane_io;

/* The real I/O: REQ contexts on `sock` (a REQ socket whose resend time is
 * 0 or long: the caller owns retries).  The io lives as long as its lanes;
 * the socket must outlive them.  A context whose exchange failed is closed
 * and a fresh one opened for the next (a REQ context with an unanswered
 * request must not be reused). */
void wire_lane_nng_io(wire_lane_io *io, nng_socket *sock);

/* The rule of "Stalled connections", for any sender of exchanges (the
 * lanes, and libshoal's lone calls).  Zeroed to start. */
typedef struct wire_stall {
	_Atomic int64_t since;      /* the first failure since the last answer (0: none) */
	_Atomic int64_t renewed_at; /* monotonic ms (0: never) */
	atomic_uint_fast64_t renewals;
} wire_stall;

/* An exchange ended with rv (WIRE_LANE_*): true when the caller should
 * renew the connection now (counted in s->renewals).  Any thread. */
bool wire_stall_note(wire_stall *s, int rv, uint32_t stall_ms);

typedef struct wire_lanes_conf {
	wire_lane_io *io;
	uint32_t n_lanes;   /* messages in flight at once, >= 1 */
	uint32_t max_items; /* per message, >= 1 */
	size_t max_bytes;   /* per message, about (an item alone may exceed it) */
	uint32_t req_field; /* batch fields: of the request and of the answer */
	uint32_t resp_field;
	uint32_t send_ms;  /* how long a message may wait for a connection */
	uint32_t stall_ms; /* see "Stalled connections" (0: WIRE_LANE_STALL_MS) */
} wire_lanes_conf;

/* Failures without an answer for this long renew a connection: longer than
 * a healthy peer's pause (an fsync stall of seconds on a loaded disk), far
 * shorter than a dead connection's minutes. */
#define WIRE_LANE_STALL_MS 3000

typedef struct wire_lane wire_lane;

/* One destination's queue and lanes. */
typedef struct wire_lanes {
	wire_lanes_conf conf;
	pthread_mutex_t mu;
	bool mu_init;
	bool closing;
	wire_lane_item *head, *tail; /* queued */
	wire_lane *lanes;
	wire_lane **idle;
	uint32_t n_lanes, n_idle;
	/* Statistics (relaxed atomics). */
	atomic_uint_fast64_t messages; /* sent */
	atomic_uint_fast64_t batches;  /* messages carrying several items */
	atomic_uint_fast64_t batched;  /* items in those */
	wire_stall stall;
} wire_lanes;

int wire_lanes_init(wire_lanes *l, const wire_lanes_conf *conf, char *errmsg);
/* Queues it; an idle lane sends it at once (with whatever else is queued)
 * unless this thread is corked.  SHOAL_E_UNAVAILABLE when the lanes are
 * closing (done is not called then). */
int wire_lanes_submit(wire_lanes *l, wire_lane_item *it);
void wire_lanes_cork(void);
void wire_lanes_uncork(void);
/* Sends what this thread holds back now, staying corked (a caller about to
 * wait for those answers inside a cork). */
void wire_lanes_flush(void);
/* No new sends: queued items are done with WIRE_LANE_CLOSED, exchanges in
 * flight are cancelled (their items done with a failure); returns when
 * their callbacks have run -- but for a lane that was taking its next
 * message as the close came, whose items end WIRE_LANE_CLOSED right after.
 * Every item ends: wire_lanes_fini waits for the last callback. */
void wire_lanes_close(wire_lanes *l);
/* Frees what init allocated (after close). */
void wire_lanes_fini(wire_lanes *l);

/* ------------------------------------------------------------------------ */
/* Batches at the receiving end                                              */
/* ------------------------------------------------------------------------ */

/* The number of field `name` of a message type (from the generated
 * descriptors: no field number is written by hand); 0 if none. */
uint32_t wire_field_number(const ProtobufCMessageDescriptor *d, const char *name);

/*
 * Whether body is a batch: *n its members (fields `field`), 0 for a plain
 * message (or bytes that do not parse: the receiver's decoder says what is
 * wrong).  SHOAL_E_VALIDATION, with `what` ("a Request batch") in the
 * message, when it mixes members with anything else or has more than max.
 */
int wire_batch_members(const uint8_t *body, size_t len, uint32_t field, uint32_t max,
                       const char *what, uint32_t *n, char *errmsg);
/* The next member of a batch at *p (fields other than `field` are skipped);
 * false at the end. */
bool wire_batch_next(const uint8_t **p, const uint8_t *end, uint32_t field, const uint8_t **data,
                     size_t *len);
/* The answer to a batch: n answers (data[i], len[i]) as fields `field`, in
 * order; NULL when out of memory. */
nng_msg *wire_batch_answer(uint32_t field, const uint8_t *const *data, const size_t *len,
                           uint32_t n);

#endif
