/*
 * shoal.h -- libshoal, the C client library of Shoal (prefix shoal_).
 *
 * A client talks to one or more shoal-router processes over nng REQ/REP.
 * Every request and answer is one packed protobuf message (proto/shoal.proto:
 * Request / Response).  Callers use either
 *
 *   - DynamoDB's HTTP API bodies: shoal_call_json("PutItem", "{...}") sends
 *     the same JSON a DynamoDB SDK would POST and returns the same JSON body
 *     DynamoDB would answer (converted by proto/wire_api.h, both ways); or
 *   - packed protobuf: shoal_call_pb(Request bytes) -> Response bytes, for
 *     internal tools (shoal-bench) that build messages themselves.
 *
 * Both exist as a blocking call and as an asynchronous submit whose
 * completion runs a callback on the caller's thread (shoal_poll), so one
 * thread can keep many requests in flight.
 *
 * Routers and failover.  shoal_client_new takes a comma-separated list of
 * router URLs ("tcp://127.0.0.1:8100,tcp://127.0.0.1:8110").  The client
 * opens ONE nng REQ socket and dials every router in the background (a router
 * that is down is redialled every 10..200 ms).  nng's REQ protocol spreads
 * requests over the connected routers and:
 *   - when the connection carrying a request closes (a router exits or
 *     restarts), resends the request at once on another connection;
 *   - when no answer arrives within attempt_timeout_ms (a hung router),
 *     resends it to whichever router is ready.
 * So a router restart is invisible to a client that lists two routers, and a
 * client listing one router waits for it to come back (connect_timeout_ms
 * while no router is connected at all, deadline_ms overall).
 * A request may therefore reach the routers more than once, exactly as a
 * DynamoDB SDK's retries may: make writes idempotent or conditional where it
 * matters.
 *
 * Errors.  Functions return 0 (SHOAL_OK) or a code of common/errors.h
 * (enum shoal_err, shared with the server: a router's Response.status is
 * returned as is) and fill a shoal_error when one is passed:
 *   code       the same code;
 *   source     where it came from (shoal_error_source below): the service
 *              answered it, the request was refused before sending, no router
 *              could be reached, no answer came in time, the answer was
 *              malformed, or a local failure;
 *   exception  DynamoDB's exception name ("ValidationException",
 *              "ConditionalCheckFailedException", "ServiceUnavailable", ...)
 *              as shoal_exception_name(code) gives it;
 *   message    the human text: DynamoDB's message from the service, or what
 *              went wrong locally ("Could not connect to the endpoint URL:
 *              \"tcp://127.0.0.1:8100\"").
 * shoal_strerror(code) (common/errors.h) gives a short description of a code.
 *
 * Ownership.  Every input is borrowed for the duration of the call (the
 * library copies what it keeps).  Buffers the library returns
 * (*response_json, *response) are the caller's: release them with
 * shoal_free.  Buffers passed to callbacks are valid only during the callback.
 * Nothing here aborts on bad input, a misbehaving router or out of memory.
 *
 * Threads.  A shoal_client may be used from any number of threads at once:
 * blocking calls, submits and polls are all thread-safe.  nng runs the I/O on
 * its own threads; those threads never run user code.  Callbacks of
 * asynchronous requests run inside shoal_poll, on the thread that called it,
 * one at a time per poller; they may submit new requests but must not call
 * shoal_poll recursively or free the client.  shoal_client_free must be called
 * once, when no other thread uses the client any more.
 *
 * Symbols: the library is built with -fvisibility=hidden; only functions
 * marked SHOAL_API are exported.
 */
#ifndef SHOAL_CLIENT_SHOAL_H
#define SHOAL_CLIENT_SHOAL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/errors.h" /* enum shoal_err, shoal_strerror, shoal_exception_name */

#if defined(__GNUC__)
#define SHOAL_API __attribute__((visibility("default")))
#else
#define SHOAL_API
#endif

/* The default endpoint: a local cluster's first router. */
#define SHOAL_DEFAULT_ENDPOINT "tcp://127.0.0.1:8100"

/* ------------------------------------------------------------------------ */
/* Options and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef struct shoal_options {
	/* How long to wait for a router's answer before the request is resent
	 * (to whichever router is ready).  Routers retry storage groups for up
	 * to 10 s themselves, so the default, 12000 ms, only fires for a router
	 * that is hung.  > 0. */
	int attempt_timeout_ms;
	/* Total time for one call, resends and retries included, counted from
	 * the submit; then SHOAL_E_TIMEOUT ("InternalServerError", source
	 * SHOAL_SRC_TIMEOUT).  Default 30000.  > 0. */
	int deadline_ms;
	/* A call fails with SHOAL_E_UNAVAILABLE (source SHOAL_SRC_CONNECT,
	 * "Could not connect to the endpoint URL: ...") when no router at all is
	 * connected for this long while it waits to be sent.  Default 2000.
	 * > 0; values above deadline_ms act as deadline_ms. */
	int connect_timeout_ms;
	/* How many times an answer of ServiceUnavailable (the router gave up
	 * on a storage group) is retried, with a backoff of 50 ms doubling to
	 * 1 s, within the deadline.  Throttling errors: throttle_retries.
	 * Default 2.  >= 0. */
	int retries;
	/* Pipelining of asynchronous requests (shoal_submit_*): at most this
	 * many messages to the routers at once, each carrying every request
	 * submitted while the others were in flight (up to 64), answered in
	 * one message.  A lone request still goes at once, alone; many in
	 * flight cost far fewer messages (less CPU in the client and the
	 * router), while a message's answers all wait for its slowest request.
	 * 0: every request its own message.  Default 4.  >= 0.  Blocking calls
	 * always go alone. */
	int pipeline;
	/* Throttling, as the AWS SDKs retry it.  An answer of
	 * ProvisionedThroughputExceededException, RequestLimitExceeded or
	 * TransactionInProgressException (the list: common/retry.h,
	 * sh_retry_is_throttling) is sent again up to throttle_retries times,
	 * the k-th time after a wait drawn uniformly from
	 * [0, min(throttle_max_ms, throttle_base_ms * 2^(k-1))] ms
	 * ("exponential backoff with full jitter", botocore's standard mode),
	 * and never past deadline_ms: when the next wait would reach the
	 * deadline, or the retries are spent, the throttled answer is the
	 * result.  Asynchronous requests wait on a timer, not on a thread.
	 * Defaults as botocore's for DynamoDB: throttle_retries 9 (10
	 * attempts, its legacy mode's max_attempts), throttle_base_ms 50 (its
	 * legacy base, 0.05 s), throttle_max_ms 20000 (standard mode's cap,
	 * 20 s).  throttle_retries 0 turns it off (benchmarks that measure
	 * raw behaviour).  throttle_retries >= 0; throttle_base_ms >= 1;
	 * throttle_max_ms >= throttle_base_ms.  A throttled request was not
	 * applied, so resending it is safe; it carries the same client_token. */
	int throttle_retries;
	int throttle_base_ms;
	int throttle_max_ms;
	/* Credentials, found as the AWS CLI and SDKs find them.  Every request
	 * is then signed (shoal.proto Request.auth, proto/wire_auth.h: SigV4's
	 * key derivation over the message's bytes; the secret never travels),
	 * as a router with a credentials file requires.
	 *   access_key_id + secret_access_key   both, or neither; else
	 *   AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY in the environment; else
	 *   the profile `profile` (NULL: $AWS_PROFILE, else "default") of the
	 *   shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
	 *   ~/.aws/credentials: aws_access_key_id, aws_secret_access_key) --
	 *   except that when no profile is named and the endpoints are read
	 *   from file://D/router.endpoint, the cluster's key in
	 *   D/aws-credentials (deploy/cluster.sh up --credentials writes it;
	 *   same format, [default]) comes before the default profile.
	 * A profile named (here or in AWS_PROFILE) that is not there is an error
	 * (SHOAL_E_VALIDATION "The config profile (x) could not be found");
	 * nothing found at all: requests go unsigned (a router without a
	 * credentials file, a local development cluster, accepts them).
	 * region (the credential scope; routers accept any): NULL means
	 * $AWS_REGION, $AWS_DEFAULT_REGION, the profile's region in the config
	 * file ($AWS_CONFIG_FILE, else ~/.aws/config), else "us-east-1".
	 * no_sign nonzero: never sign (the AWS CLI's --no-sign-request).
	 * shoal_options_init sets all of these to NULL / 0.  The strings are
	 * copied by shoal_client_new. */
	const char *access_key_id;
	const char *secret_access_key;
	const char *profile;
	const char *region;
	int no_sign;
	/* TLS: a tls+tcp:// endpoint (a router started with a TLS --listen;
	 * deploy/cluster.sh up --tls) must show a certificate signed by one of
	 * the CA certificates (PEM) in this file -- the AWS CLI's --ca-bundle.
	 * NULL means $AWS_CA_BUNDLE, else, for endpoints read from
	 * file://D/router.endpoint, D/tls/ca.pem (the cluster's CA, which
	 * deploy/cluster.sh makes).  Copied by shoal_client_new. */
	const char *ca_bundle;
} shoal_options;

/* Fills *o with the defaults above. */
SHOAL_API void shoal_options_init(shoal_options *o);

/* Where an error came from. */
enum shoal_error_source {
	SHOAL_SRC_NONE = 0, /* no error */
	SHOAL_SRC_SERVICE,  /* a router answered with this error status */
	SHOAL_SRC_REQUEST,  /* refused before sending: the request JSON is malformed
	                     * or invalid (the exception DynamoDB would return) */
	SHOAL_SRC_CONNECT,  /* no router could be connected (connect_timeout_ms) */
	SHOAL_SRC_TIMEOUT,  /* no answer before the deadline */
	SHOAL_SRC_PROTOCOL, /* an answer arrived but could not be decoded */
	SHOAL_SRC_LOCAL,    /* out of memory, client closing, bad arguments */
};

#define SHOAL_EXCEPTION_MAX 64
#define SHOAL_MESSAGE_MAX   1024

typedef struct shoal_error {
	int code;                            /* enum shoal_err; SHOAL_OK when none */
	int source;                          /* enum shoal_error_source */
	char exception[SHOAL_EXCEPTION_MAX]; /* "ValidationException"; "" when none */
	char message[SHOAL_MESSAGE_MAX];     /* human text; "" when none */
} shoal_error;

/* ------------------------------------------------------------------------ */
/* Client                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct shoal_client shoal_client;

/*
 * Creates a client for the routers in `endpoints` (comma-separated nng URLs;
 * spaces around commas are ignored; NULL or "" means SHOAL_DEFAULT_ENDPOINT;
 * "file://PATH" reads the list from a file, one URL per line or
 * comma-separated, as deploy/cluster.sh writes <dir>/router.endpoint)
 * with `opts` (NULL: defaults).  Dialling happens in the background: this
 * succeeds even when no router is up yet.  On success *out is the client
 * (release with shoal_client_free).  Errors: SHOAL_E_VALIDATION (a URL nng
 * refuses, bad options), SHOAL_E_NOMEM, SHOAL_E_INTERNAL (nng failure); the
 * text goes to errmsg (SH_ERRMSG_SIZE bytes, may be NULL).
 */
SHOAL_API int shoal_client_new(const char *endpoints, const shoal_options *opts, shoal_client **out,
                               char *errmsg);

/*
 * Closes the connections and frees the client.  Requests still in flight are
 * abandoned: their callbacks are not called (drain with shoal_poll first if
 * they must be).  No other thread may be inside a shoal_* call on c.
 * NULL is a no-op.  With a TLS endpoint it first waits, at most 300 ms, for
 * each endpoint's connection to be up: a connection closed in the middle of
 * its handshake can stop a router's listener for ~10 s (nng 1.5.2's bug,
 * nanomsg/nng#1518), so an unreachable endpoint (no answer at all) makes
 * this take 300 ms; one that refuses connections (its router is down) is not
 * waited for.
 */
SHOAL_API void shoal_client_free(shoal_client *c);

/* How many routers are connected right now (0 .. number of endpoints). */
SHOAL_API unsigned shoal_connected(shoal_client *c);

/* The endpoint list as given to shoal_client_new, normalised ("a,b"). */
SHOAL_API const char *shoal_endpoints(const shoal_client *c);

/* The access key id requests are signed with, or NULL when they go
 * unsigned (shoal_options: no credentials found, or no_sign); and where it
 * came from ("options", "environment", "shared-credentials-file",
 * "cluster-credentials-file"). */
SHOAL_API const char *shoal_access_key_id(const shoal_client *c);
SHOAL_API const char *shoal_credentials_source(const shoal_client *c);

/* Frees a buffer returned by this library.  NULL is a no-op. */
SHOAL_API void shoal_free(void *p);

/*
 * Makes nng's TLS in this whole process Shoal's engine: the same mbedtls as
 * nng's own, sealing each message in one TLS record where nng's makes up to
 * three, as shoal-router and shoal-node do (GetItem through a --tls client
 * port measured 0.87 of plain with it, 0.76 without: README, TLS).  Opt-in,
 * because nng's engine is process-wide: call it once, before the first
 * client and before anything else in the process makes an nng TLS
 * configuration -- those made before keep nng's engine, those made after
 * (the program's own too) get Shoal's.  SHOAL_OK, or SHOAL_E_INTERNAL with
 * nng's reason in errmsg (SH_ERRMSG_SIZE bytes, may be NULL).  The shoal
 * command calls it.
 */
SHOAL_API int shoal_tls_engine_install(char *errmsg);

/* ------------------------------------------------------------------------ */
/* Blocking calls                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Runs one DynamoDB operation.  `operation` is DynamoDB's name ("PutItem",
 * "Query", "CreateTable", ... and Shoal's "ClusterStatus"); request_json is
 * the request body exactly as DynamoDB's HTTP API takes it (NULL means "{}").
 * Returns SHOAL_OK with *response_json set to the response body (compact
 * JSON, keys in DynamoDB's order; free with shoal_free), or an error code
 * with *response_json NULL and err filled (err may be NULL).
 * Blocks the calling thread until the answer, an error or the deadline.
 */
SHOAL_API int shoal_call_json(shoal_client *c, const char *operation, const char *request_json,
                              char **response_json, shoal_error *err);

/*
 * Sends a packed shoal.Request (`req`, `len` bytes; sent as is: the caller
 * chooses request_id) and returns the packed shoal.Response.  The return
 * value is the Response's status as an error code (SHOAL_OK, or e.g.
 * SHOAL_E_CONDITION_FAILED with err filled from the Response), and *response
 * / *response_len hold the packed Response whenever one arrived, whatever its
 * status (free with shoal_free); when none arrived (connect, timeout or local
 * errors) *response is NULL.  The Response is checked to be a well-formed
 * message (else SHOAL_E_INTERNAL, source SHOAL_SRC_PROTOCOL, *response NULL).
 */
SHOAL_API int shoal_call_pb(shoal_client *c, const uint8_t *req, size_t len, uint8_t **response,
                            size_t *response_len, shoal_error *err);

/* ------------------------------------------------------------------------ */
/* Asynchronous calls                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Completion of an asynchronous request, run by shoal_poll on the polling
 * thread.  code and err are as the blocking calls return them (err is never
 * NULL here; err->code == code).  body/len:
 *   - shoal_submit_json: the response JSON (NUL-terminated) on success, else
 *     NULL / 0;
 *   - shoal_submit_pb: the packed Response whenever one arrived (also with an
 *     error status), else NULL / 0.
 * body and err are valid only until the callback returns.
 */
typedef void (*shoal_done_cb)(void *arg, int code, const void *body, size_t len,
                              const shoal_error *err);

/*
 * Submits a request without waiting.  On SHOAL_OK the request is in flight
 * and cb(arg, ...) will be run exactly once by a later shoal_poll (unless the
 * client is freed first).  On an error (malformed or invalid request JSON:
 * source SHOAL_SRC_REQUEST; out of memory) nothing was sent, err is filled
 * and cb will never run.  There is no limit on requests in flight: the caller
 * bounds them (shoal_in_flight).
 */
SHOAL_API int shoal_submit_json(shoal_client *c, const char *operation, const char *request_json,
                                shoal_done_cb cb, void *arg, shoal_error *err);
SHOAL_API int shoal_submit_pb(shoal_client *c, const uint8_t *req, size_t len, shoal_done_cb cb,
                              void *arg, shoal_error *err);

/*
 * Runs the callbacks of completed asynchronous requests on this thread.
 * Waits up to timeout_ms (0: do not wait; < 0: wait without limit) for at
 * least one completion when none is ready, then runs every completion that
 * is ready and returns how many callbacks ran (0 on timeout).  Returns 0 at
 * once when nothing is in flight.
 */
SHOAL_API int shoal_poll(shoal_client *c, int timeout_ms);

/* Asynchronous requests submitted whose callbacks have not run yet. */
SHOAL_API unsigned shoal_in_flight(shoal_client *c);

/* ------------------------------------------------------------------------ */
/* Cluster administration (Shoal's Admin operation, `shoal admin`)           */
/* ------------------------------------------------------------------------ */

/*
 * Changes of the cluster's shape, applied by the metadata group (group 0)
 * to the cluster map; a router with a credentials file accepts them only
 * signed by a key without grants (else SHOAL_E_ACCESS_DENIED).  Blocking,
 * as shoal_call_json; on success *map_epoch (may be NULL) is the map's
 * epoch after the change.
 *
 * shoal_admin_add_node registers a new node: its id (>= 1, new), its Raft
 * base address "host:port" (group g listens on port + g) and its RPC URL
 * ("tcp://host:port").  Registering again with the same addresses is
 * SHOAL_OK; an id already used with other addresses is SHOAL_E_VALIDATION.
 *
 * shoal_admin_drain_node decommissions a node: it takes no new replica, its
 * replicas move away, and group 0 removes it from the map once it holds
 * none (poll ClusterStatus: `shoal admin remove-node` does).  A node the map
 * does not have is SHOAL_E_NOT_FOUND.
 *
 * shoal_admin_move_partition begins moving the partition of table_name that
 * holds placement hash `hash` to data group to_group; shoal_admin_split_
 * partition splits the partition holding `at` (>= 1) into [lo, at-1] and
 * [at, hi], and with a to_group other than 0 and the partition's own group
 * begins moving [at, hi] there.  Both return once group 0 has recorded the
 * change in the map: the move itself (copying the data) goes on in the
 * background; the partition is served by to_group once ClusterStatus lists
 * it there with ToGroup 0 (`shoal admin move-partition` waits for that).
 * table_name NULL names the GSI space instead of a table: the index
 * partitions of every GSI, by their st_index_hash (TableId 0 in
 * ClusterStatus).
 * A change already made is SHOAL_OK.  Errors: SHOAL_E_NOT_FOUND (no such
 * table), SHOAL_E_VALIDATION (to_group is not a data group, at 0),
 * SHOAL_E_IN_USE (the partition is moving already).
 *
 * shoal_admin_add_group creates a storage group: group_id 0 takes the
 * lowest id the map leaves free (below [cluster] max_groups); nodes[0 ..
 * n_nodes-1] are its voters (n_nodes 0: the `replication` active nodes with
 * the fewest replicas).  On success *group_out (may be NULL) is its id.  The
 * group is founding until its voters elect a leader (ClusterStatus's
 * MapGroups row says Founding); it holds nothing until partitions move or
 * split into it.  Errors: SHOAL_E_VALIDATION (an id past max_groups, a
 * group of that id with other replicas, unknown or draining nodes),
 * SHOAL_E_LIMIT_EXCEEDED (no id left).
 */
SHOAL_API int shoal_admin_add_group(shoal_client *c, uint32_t group_id, const uint32_t *nodes,
                                    uint32_t n_nodes, uint32_t *group_out, uint64_t *map_epoch,
                                    shoal_error *err);
SHOAL_API int shoal_admin_add_node(shoal_client *c, uint32_t node_id, const char *raft,
                                   const char *rpc, uint64_t *map_epoch, shoal_error *err);
SHOAL_API int shoal_admin_drain_node(shoal_client *c, uint32_t node_id, uint64_t *map_epoch,
                                     shoal_error *err);
SHOAL_API int shoal_admin_move_partition(shoal_client *c, const char *table_name, uint64_t hash,
                                         uint32_t to_group, uint64_t *map_epoch, shoal_error *err);
SHOAL_API int shoal_admin_split_partition(shoal_client *c, const char *table_name, uint64_t at,
                                          uint32_t to_group, uint64_t *map_epoch, shoal_error *err);

#endif
