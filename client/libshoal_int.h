/*
 * libshoal_int.h -- private to libshoal (client/lib*.c; prefix lib_ for
 * functions shared between its files).  The public contract is shoal.h.
 *
 *   libshoal.c       the client, its nng REQ socket and pipes, and the
 *                    per-request state machine (ops) run by nng's callbacks
 *   libshoal_call.c  requests in (JSON or protobuf -> packed Request),
 *                    answers out (Response -> JSON / bytes / shoal_error),
 *                    the blocking calls, submit and shoal_poll
 *   libshoal_auth.c  credentials as the AWS CLI finds them, and the
 *                    signature of every message sent (proto/wire_auth.h)
 *
 * Ownership: an op belongs to the client (c->all) for the client's life;
 * between lib_op_get and lib_op_release it belongs to one request, and its
 * req / reply messages to the op.
 */
#ifndef SHOAL_CLIENT_LIBSHOAL_INT_H
#define SHOAL_CLIENT_LIBSHOAL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "client/shoal.h"
#include "common/retry.h"
#include "proto/lanes.h"

/* Largest message either side accepts (NNG_OPT_RECVMAXSZ everywhere). */
#define MAX_MSG (16u << 20)
/* What libshoal appends to an encoded request: the client token (23 bytes)
 * and, when signing, the Auth field (at most WIRE_AUTH_KEY_MAX + 2 *
 * WIRE_AUTH_SCOPE_MAX + 128).  A request is refused here if it would not
 * fit under MAX_MSG with them: the router's nng drops a larger message
 * without an answer, and the caller would only see a timeout. */
#define MSG_ROOM    512u
#define MAX_REQUEST (MAX_MSG - MSG_ROOM)

#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS   1000

enum op_state {
	OP_IDLE,
	OP_SENDING,
	OP_RECEIVING,
	OP_BACKOFF,
	OP_PIPELINED, /* queued for, or carried by, a lane (libshoal.c) */
	OP_DONE,
};

/* Pipelining: at most this many requests, and about this many bytes, in one
 * lane's message. */
#define LANE_MAX_OPS   64
#define LANE_MAX_BYTES (4u << 20)

typedef struct op op;
struct op {
	wire_lane_item item; /* while it travels in a lane */
	shoal_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	pthread_cond_t cond; /* blocking waiter (under c->mu) */
	enum op_state state;

	/* The request. */
	nng_msg *req; /* packed Request; each send sends a copy */
	bool json;    /* JSON in and out (else packed protobuf) */
	char operation[40];
	uint64_t request_id; /* JSON requests: the id we chose; checked on the answer */
	int64_t deadline;    /* sh_now_ms() clock */
	sh_retry retry;      /* ServiceUnavailable and throttled answers: again after a backoff */

	/* The outcome (valid in DONE). */
	nng_msg *reply; /* the answer, or NULL with `code` set */
	int code;       /* transport outcome: SHOAL_OK when a reply arrived */
	int source;
	char msg[SH_ERRMSG_SIZE];

	/* Completion. */
	bool async;
	bool done; /* blocking: set with cond signalled */
	shoal_done_cb cb;
	void *arg;

	op *next;     /* free list or completion queue */
	op *all_next; /* every op of the client, for shoal_client_free */
};

/* For an endpoint file D/router.endpoint (deploy/cluster.sh's): whether
 * D/tls/ca.pem, the cluster's CA, exists; its path in out (else ""). */
bool lib_endpoint_ca(const char *endpoint_file, char *out, size_t cap);
/* The same for D/aws-credentials, the key deploy/cluster.sh up --credentials
 * writes for clients (an AWS shared credentials file, profile [default]). */
bool lib_endpoint_creds(const char *endpoint_file, char *out, size_t cap);

/* shoal_client_new with the cluster credentials file lib_creds_find uses
 * after the environment and a named profile (NULL or "": none); the CLI
 * passes what lib_endpoint_creds found for its own file:// endpoints. */
int lib_client_new(const char *endpoints, const shoal_options *opts, const char *cluster_creds,
                   shoal_client **out, char *errmsg);

struct shoal_client {
	nng_socket sock;
	shoal_options opts;
	/* TLS endpoints: the CA file (shoal_options.ca_bundle, found) and the
	 * configuration made from it on the first tls+tcp:// URL. */
	char ca_bundle[1024];
	nng_tls_config *tls;
	char *endpoints; /* normalised "a,b" */

	pthread_mutex_t mu;
	pthread_cond_t cond; /* completions for shoal_poll */
	op *all;
	op *free_ops;
	op *done_head, *done_tail;
	unsigned in_flight; /* async ops whose callbacks have not run */
	bool closing;

	pthread_mutex_t pmu;  /* pipes */
	pthread_cond_t pcond; /* a pipe came (settle_dials) */
	uint32_t *pipes;
	unsigned n_pipes, cap_pipes;
	unsigned n_dials; /* dialers started (settle_dials) */
	bool tls_dials;   /* some of them dial tls+ URLs */

	atomic_uint_fast64_t next_id;
	/* Random at creation: with the request id, each request's client_token
	 * (shoal.proto Request.client_token: a resend is applied once). */
	uint8_t nonce[16];
	uint32_t f_client_token;
	uint32_t f_status; /* Response.status, read by libshoal.c's reply_status */

	/* Signing (libshoal_auth.c): the credentials shoal_client_new found;
	 * sign false: requests go unsigned. */
	bool sign;
	char key_id[128];
	char secret[256];
	char region[64];
	const char *creds_source;
	char cluster_creds[1024]; /* lib_client_new's file, or "" */
	pthread_mutex_t kmu;      /* the derived key of kdate */
	char kdate[9];
	uint8_t kkey[32];

	/* Pipelining (libshoal.c): the lanes to the routers (proto/lanes.h),
	 * when shoal_options.pipeline > 0; their io signs each message (io
	 * wraps nng_io). */
	wire_lane_io nng_io;
	wire_lane_io io;
	wire_lanes lanes;
	bool lanes_on;
	/* Lone calls' "Stalled connections" (proto/lanes.h): their sends that
	 * find no room and answers that do not come renew the connections. */
	wire_stall stall;
};

/* shoal_client_new: finds the credentials (shoal.h's order, with
 * c->cluster_creds) for c->opts into c (c->sign, key_id, secret, region,
 * creds_source).  SHOAL_E_VALIDATION
 * with the AWS CLI's message for a missing profile or partial credentials. */
int lib_creds_find(shoal_client *c, char *errmsg);
/* Any thread: appends the Auth field signing m's bytes as they are now
 * (nothing when c signs nothing).  SHOAL_E_NOMEM. */
int lib_sign(shoal_client *c, nng_msg *m);
/* c->io: c->nng_io whose every message is signed first. */
void lib_signing_io(shoal_client *c);

/* Any thread: fills err (may be NULL) with code, source, the exception name
 * of code and msg. */
void lib_set_err(shoal_error *err, int code, int source, const char *msg);

/* Any thread: a pooled op, or a new one (SHOAL_E_UNAVAILABLE when the client
 * is closing, SHOAL_E_NOMEM, ... with the text in msg). */
int lib_op_get(shoal_client *c, op **out, char *msg);

/* Submitter: starts the op (o->req, o->async and the rest set by the caller);
 * an asynchronous op goes through the pipelining lanes when there are any. */
void lib_op_start(op *o);

/* User thread: back to the pool once the caller has its result. */
void lib_op_release(op *o);

/* shoal_poll's thread: asynchronous requests submitted between these (by
 * the callbacks it runs) are queued, then sent together by the flush. */
void lib_lanes_cork(shoal_client *c);
void lib_lanes_flush(shoal_client *c);
/* Whether this thread is inside shoal_poll's callbacks of c. */
bool lib_lanes_corked(const shoal_client *c);
/* Inside them (a nested poll): what they submitted so far leaves now. */
void lib_lanes_send_held(shoal_client *c);

#endif
