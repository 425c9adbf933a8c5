/*
 * http.h -- the router's DynamoDB-compatible HTTP endpoint (router/http.c)
 * and AWS Signature Version 4 verification (router/sigv4.c).  Private to
 * router/, main.c and the unit test tests/unit/test_http.c.
 *
 * The endpoint speaks DynamoDB's JSON 1.0 protocol, so boto3, the AWS CLI
 * and the SDKs work with nothing changed but the endpoint URL:
 *
 *   POST /  X-Amz-Target: DynamoDB_20120810.<Operation>
 *           Content-Type: application/x-amz-json-1.0 (1.1 is accepted too)
 *           body: the operation's DynamoDB JSON request
 *   -> 200 and the operation's DynamoDB JSON response, or
 *      400 / 500 / 503 and {"__type": "<namespace>#<Exception>", "message": ...}
 *      with x-amzn-RequestId and x-amz-crc32 (CRC-32 of the body) headers.
 *   GET /  -> 200 "healthy: <host>" (DynamoDB's health check)
 *
 * One request pipeline, two encodings: the body is converted to a
 * shoal.Request by proto/wire_api.h, served by the router's pipeline exactly
 * as a native request is (rt_job_start, job.c), and the Response converted
 * back.  No
 * operation has HTTP-specific semantics; operations the router does not
 * implement answer UnknownOperationException as they do natively.
 *
 * Threads.  The router's own HTTP server (httpd.h) reads every connection
 * on RT_HTTP_IO_THREADS epoll threads, so a slow or stalled client
 * (slowloris) holds only its own connection and, for at most
 * RT_HTTPD_TIMEOUT_MS without progress, its bounded buffers.  A body of at
 * most RT_HTTP_INLINE_BODY is checked (SigV4), converted and started in the
 * router's pipeline on the I/O thread that read it; a larger one is queued
 * for the endpoint's own worker threads, so that the I/O thread is never
 * held parsing megabytes.  The requests one wake-up of the I/O thread
 * brings are started under one cork of the router's lanes, so that those
 * for one node leave in one message.  Nothing waits for a node: the thread
 * that finishes the router's job converts a small answer and writes it on
 * the socket itself.
 *
 * Limits: bodies over RT_HTTP_MAX_BODY (16 MiB, DynamoDB's largest request is
 * a 16 MB BatchWriteItem) are refused with 413 before being read; at most
 * RT_HTTP_MAX_QUEUED requests wait for a worker and RT_HTTP_MAX_INFLIGHT
 * bytes of bodies are held at once, RT_HTTP_MAX_INFLIGHT_PEER of them by
 * one peer address (counted as they arrive, not as announced), past which
 * requests get 503 ServiceUnavailable (botocore retries those); one address
 * may hold RT_HTTP_MAX_CONNS_PEER connections.  With
 * credentials, a head with a session token or a presigned URL, and one
 * announcing more than RT_HTTP_INLINE_BODY that cannot be authenticated
 * whatever its body (no or malformed Authorization, unknown key, date out
 * of skew), is answered before its body is read; the signature itself,
 * which covers the body, is checked after.  A JSON body
 * is decoded under wire_json_parse's memory budget (proto/wire_json.c).
 * The server's own limits (head size, timeouts, connections, descriptors)
 * are in httpd.h; the timeouts are rt_options' http_head_ms and
 * http_body_ms (--http-head-timeout-ms, --http-body-timeout-ms).
 */
#ifndef SHOAL_ROUTER_HTTP_H
#define SHOAL_ROUTER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "router/router.h"

#define RT_HTTP_MAX_BODY     (16u * 1024 * 1024)
#define RT_HTTP_MAX_QUEUED   4096u
#define RT_HTTP_MAX_INFLIGHT (256u * 1024 * 1024)
/* ... of which one peer address may hold (two of the largest bodies). */
#define RT_HTTP_MAX_INFLIGHT_PEER (32u * 1024 * 1024)
/* Connections from one peer address: half of RT_HTTPD_MAX_CONNS (so 384
 * of 768 with the usual limit of 1024 descriptors), enough for a load
 * generator's 256, short of all of them. */
#define RT_HTTP_MAX_CONNS_PEER (RT_HTTPD_MAX_CONNS / 2)
/* Bodies and answers up to these sizes are converted on the thread that has
 * them (http.c: on_request on the I/O thread, http_done on the thread that
 * finished the job); larger ones on an endpoint worker. */
#define RT_HTTP_INLINE_BODY   (16u * 1024)
#define RT_HTTP_INLINE_ANSWER (16u * 1024)
#define RT_HTTP_TARGET_PREFIX "DynamoDB_20120810."
/* ... and DynamoDB Streams' operations (SHOAL_OPF_STREAMS in proto/ops.h). */
#define RT_HTTP_STREAMS_PREFIX "DynamoDBStreams_20120810."
/* I/O threads of the HTTP server.  One keeps up with the router's pipeline
 * on the 2-vCPU machine of the benchmarks (README "Benchmarks"). */
#define RT_HTTP_IO_THREADS 1

/* ------------------------------------------------------------------------ */
/* Pure helpers (http.c)                                                     */
/* ------------------------------------------------------------------------ */

/* The operation named by an X-Amz-Target header ("DynamoDB_20120810.PutItem"
 * -> "PutItem", pointing into target), or NULL if the header is missing, has
 * another prefix or names nothing.  A registry operation must come with its
 * service's prefix ("DynamoDBStreams_20120810.GetRecords"); a name the
 * registry does not know is returned (the caller answers it unknown). */
const char *rt_http_target_op(const char *target);

/* The x-amz-crc32 header value: CRC-32 (zlib's, IEEE) of the body in
 * decimal.  out holds at least 11 bytes. */
void rt_http_crc32(const void *body, size_t len, char *out);

/* True for the Content-Type values the endpoint accepts: none (NULL),
 * application/x-amz-json-1.0 or -1.1 (as DynamoDB Local does), and
 * application/json; parameters (";charset=...") are ignored. */
bool rt_http_content_type_ok(const char *ctype);

/* ------------------------------------------------------------------------ */
/* Credentials and SigV4 (sigv4.c)                                           */
/* ------------------------------------------------------------------------ */

/* What a key may do with a table (a grant of the credentials file). */
enum {
	RT_PERM_READ = 1 << 0,  /* GetItem Query Scan BatchGetItem TransactGetItems DescribeTable,
	                         * ConditionCheck in a transaction */
	RT_PERM_WRITE = 1 << 1, /* Put/Update/DeleteItem BatchWriteItem TransactWriteItems */
	RT_PERM_DDL = 1 << 2,   /* CreateTable UpdateTable (and its index DDL) DeleteTable */
};

typedef struct rt_grant {
	unsigned perms; /* RT_PERM_* */
	char *table;    /* a table name, "prefix*", or "*" (every table) */
} rt_grant;

typedef struct rt_cred {
	char *key_id; /* sh_malloc'd */
	char *secret;
	/* A line without grants (the original format): every operation on
	 * every table, and ClusterStatus. */
	bool all;
	bool admin;       /* "admin": ClusterStatus */
	char account[13]; /* "account:<12 digits>" (the ARNs of errors); default 000000000000 */
	rt_grant *grants; /* sh_malloc'd */
	uint32_t n_grants;
} rt_cred;

typedef struct rt_creds {
	rt_cred *v;
	uint32_t n;
	uint64_t gen;         /* unique per load: keys the derived-key cache (auth.c) */
	bool others_can_read; /* the file is readable by its group or others */
} rt_creds;

/* Reads a credentials file: one key per line,
 *
 *   ACCESS_KEY_ID SECRET [GRANT ...]
 *
 * words separated by blanks; blank lines and lines starting with '#' are
 * skipped.  Without grants the key may do everything (the original
 * format).  GRANT is one of
 *   read:T1,T2,...   reads of those tables (RT_PERM_READ)
 *   write:T1,...     reads and writes of them (read-write access)
 *   ddl:T1,...       CreateTable, UpdateTable, DeleteTable of them
 *   admin            Shoal's ClusterStatus (`shoal status`)
 *   account:DIGITS   the 12-digit account id shown in AccessDenied ARNs
 * where a table is a name, "prefix*" or "*" (every table; ListTables needs
 * read on "*").  A table's grant covers its indexes.  An empty file, a line
 * with one word, an unknown grant or a repeated key id is an error.  *c is
 * filled on success (rt_creds_free it), others_can_read set when the file
 * is readable by its group or others (main.c warns). */
int rt_creds_load(const char *path, rt_creds *c, char *errmsg);
void rt_creds_free(rt_creds *c);
/* The secret of key_id, or NULL. */
const char *rt_creds_find(const rt_creds *c, const char *key_id);
/* The key key_id, or NULL. */
const rt_cred *rt_creds_key(const rt_creds *c, const char *key_id);

/* A request as SigV4 sees it.  header(ctx, name) returns the value of a
 * header (case-insensitive name) or NULL. */
typedef struct rt_sigv4_req {
	const char *method;
	const char *uri; /* the request target: path and optional ?query */
	const char *(*header)(void *ctx, const char *name);
	void *ctx;
	const void *body;
	size_t body_len;
} rt_sigv4_req;

/* The parts of "Authorization: AWS4-HMAC-SHA256 Credential=AKID/20150830/
 * us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date,
 * Signature=<64 hex>". */
typedef struct rt_sigv4_auth {
	char key_id[128];
	char date[9]; /* YYYYMMDD */
	char region[64];
	char service[64];
	char signed_headers[1024]; /* "host;x-amz-date", lower case, ';'-separated */
	char signature[65];        /* lower-case hex */
} rt_sigv4_auth;

/* Parses an Authorization header; false (with a message) if it is not a
 * well-formed AWS4-HMAC-SHA256 one. */
bool rt_sigv4_parse_auth(const char *header, rt_sigv4_auth *out, char *errmsg);

/* The canonical request (sh_malloc'd in *out): method, canonical URI (each
 * byte outside RFC 3986's unreserved set and '/' percent-encoded, as
 * botocore does for every service but S3), canonical query string (pairs
 * decoded, re-encoded and sorted), the signed headers' "name:value" lines
 * (values trimmed, runs of spaces collapsed), the signed header list, and
 * the hex SHA-256 of the body.  SHOAL_E_VALIDATION if a signed header is
 * absent. */
int rt_sigv4_canonical_request(const rt_sigv4_req *r, const char *signed_headers, char **out,
                               char *errmsg);
/* "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256(canonical)>" (sh_malloc'd). */
int rt_sigv4_string_to_sign(const char *amz_date, const char *scope, const char *canonical,
                            char **out);
/* The hex signature of string_to_sign with the derived key
 * HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), service), "aws4_request"). */
void rt_sigv4_sign(const char *secret, const char *date, const char *region, const char *service,
                   const char *string_to_sign, char hex[65]);

/* Outcome of verifying a request, with DynamoDB's exception name. */
typedef enum rt_auth_result {
	RT_AUTH_OK = 0,
	RT_AUTH_MISSING,      /* MissingAuthenticationTokenException */
	RT_AUTH_INCOMPLETE,   /* IncompleteSignatureException: malformed header */
	RT_AUTH_UNRECOGNIZED, /* UnrecognizedClientException: unknown key id */
	RT_AUTH_SIGNATURE,    /* InvalidSignatureException: mismatch, or date skew */
} rt_auth_result;

/* The error code of a result (SHOAL_E_AUTH_*): the one mapping, which the
 * native protocol's Response.status and the HTTP error type both use. */
int rt_auth_code(rt_auth_result r);
/* "com.amazon.coral.service#<Exception>" of a result. */
const char *rt_auth_error_type(rt_auth_result r);

/* Verifies r against the credentials at wall-clock time now_s (seconds since
 * the epoch): the date (X-Amz-Date, else Date) within 15 minutes of now and
 * matching the credential scope's date, a known key id, and the signature
 * (compared in constant time).  errmsg gets DynamoDB's message.  The _as
 * form also says who signed (who->cred NULL unless RT_AUTH_OK). */
rt_auth_result rt_sigv4_verify(const rt_creds *c, const rt_sigv4_req *r, int64_t now_s,
                               char *errmsg);
rt_auth_result rt_sigv4_verify_as(const rt_creds *c, const rt_sigv4_req *r, int64_t now_s,
                                  rt_principal *who, char *errmsg);

/* What both protocols check before the signature itself (sigv4.c): the
 * date's format, the key id, the date within WIRE_AUTH_SKEW_S of now_s, and
 * the credential scope's day (scope_date8) equal to the date's.  *key is
 * the key on RT_AUTH_OK. */
rt_auth_result rt_auth_check_key(const rt_creds *c, const char *key_id, const char *amz_date,
                                 const char *scope_date8, int64_t now_s, const rt_cred **key,
                                 char *errmsg);
/* The message of a signature that does not match. */
#define RT_AUTH_MISMATCH_MSG                                                                       \
	"The request signature we calculated does not match the signature you provided. Check "    \
	"your AWS Secret Access Key and signing method. Consult the service documentation for "    \
	"details."

/* The derived signing key of a key for a day, region and service, from a
 * per-thread cache (auth.c): derived once per (key, day, scope) and thread. */
void rt_auth_signing_key(const rt_creds *c, const rt_cred *k, const char *date8, const char *region,
                         const char *service, uint8_t key[32]);

/* ------------------------------------------------------------------------ */
/* The endpoint (http.c)                                                     */
/* ------------------------------------------------------------------------ */

typedef struct rt_http rt_http;

/* Listens on "host:port" (NULL: no plain HTTP) and, when https is not NULL,
 * serves HTTPS on that "host:port" too (https.c: the cluster's router.pem,
 * rt->tls), and starts rt->opt.http_workers worker threads,
 * which check and convert requests and start them in the router's
 * pipeline (job.c).  With the router's credentials (rt->creds) requests
 * must carry a valid SigV4 signature by one of them, and the job gets the
 * signer as its principal (job.c authorizes); without, any request is
 * accepted (signed with any key, or not at all), as DynamoDB Local does.
 * Main thread. */
int rt_http_start(rt_http **out, rt_router *rt, const char *hostport, const char *https,
                  char *errmsg);
/* Stops listening, lets requests in progress finish, joins the workers and
 * frees everything (NULL is fine); before the router stops.  Main thread. */
void rt_http_stop(rt_http *h);

#endif
