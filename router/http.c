/*
 * http.c -- the DynamoDB-compatible HTTP endpoint (contract: http.h), on
 * the router's own HTTP server (httpd.h).
 *
 * A request's way through:
 *
 *   I/O thread (httpd.c)                   endpoint workers (ours)
 *   ---------------------------------      ----------------------------------
 *   on_head: method, path, framing,
 *     limits, and with credentials
 *     head_auth: what of the signature
 *     the body does not change
 *     (answers refusals)
 *   on_request: the body is in;
 *     <= RT_HTTP_INLINE_BODY: serve  ...or...  (queue) --> serve
 *   serve: SigV4, target, JSON -> Request (wire_api) into a router job,
 *     rt_job_start (job.c)
 *                                    the router's pipeline, exactly as for a
 *                                    native request (steps, calls, lanes)
 *                                      |  http_done (an nng callback thread):
 *                                      v  small answers converted right there
 *                                         and written on the socket by that
 *                                         thread (rt_httpd_respond); large
 *                                         ones queued --> finish
 *
 * So an HTTP request and a native one share one pipeline (one set of
 * semantics, metrics, batching) and no endpoint worker waits for a node:
 * workers only check and convert.  The Request is decoded once (from JSON,
 * into the job's arena) and never packed unless a step forwards it.  The
 * request's head and body (httpd's, in the connection's buffers) are read
 * until the job starts; the answer needs only the job.
 *
 * Stopping: rt_httpd_stop closes the connections and waits until every
 * request handed to on_request has been answered (to nobody); the workers
 * still run then and finish what is queued to them, so rt_http_stop stops
 * the server first and the workers after.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <zlib.h>

#include "common/alloc.h"
#include "proto/lanes.h"
#include "proto/wire_api.h"
#include "router/http.h"
#include "router/httpd.h"

/* ------------------------------------------------------------------------ */
/* Pure helpers                                                              */
/* ------------------------------------------------------------------------ */

const char *rt_http_target_op(const char *target)
{
	static const char ddb[] = RT_HTTP_TARGET_PREFIX, streams[] = RT_HTTP_STREAMS_PREFIX;
	if (target == NULL)
		return NULL;
	bool is_streams = strncmp(target, streams, sizeof(streams) - 1) == 0;
	if (!is_streams && strncmp(target, ddb, sizeof(ddb) - 1) != 0)
		return NULL;
	const char *op = target + (is_streams ? sizeof(streams) : sizeof(ddb)) - 1;
	const wire_op_info *o = wire_op_by_name(op);
	if (o != NULL && ((o->flags & SHOAL_OPF_STREAMS) != 0) != is_streams)
		return NULL;
	return op[0] != '\0' ? op : NULL;
}

void rt_http_crc32(const void *body, size_t len, char *out)
{
	uLong c = crc32(0L, Z_NULL, 0);
	const Bytef *p = body;
	while (len > 0) { /* zlib takes uInt lengths */
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		c = crc32(c, p, n);
		p += n;
		len -= n;
	}
	/* In decimal, by hand: this runs once per answer. */
	uint32_t v = (uint32_t)(c & 0xffffffffu);
	char d[10];
	size_t n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (size_t i = 0; i < n; i++)
		out[i] = d[n - 1 - i];
	out[n] = '\0';
}

bool rt_http_content_type_ok(const char *ctype)
{
	if (ctype == NULL)
		return true;
	static const char *const ok[] = {"application/x-amz-json-1.0", "application/x-amz-json-1.1",
	                                 "application/json"};
	while (*ctype == ' ')
		ctype++;
	size_t n = strcspn(ctype, "; ");
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strlen(ok[i]) == n && strncasecmp(ctype, ok[i], n) == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------------------ */
/* The endpoint                                                              */
/* ------------------------------------------------------------------------ */

typedef struct job {
	rt_http *h;
	rt_httpd_req *req; /* the HTTP request: answer it once (send_answer) */
	struct job *next;
	/* The request in the router's pipeline (serve -> http_done -> finish):
	 * everything decoded lives in the router job's arena until the answer
	 * is sent. */
	rt_job *rj;
	const Shoal__Request *in; /* the decoded request (the answer's JSON needs it) */
	bool answered;            /* back from the pipeline: convert and send */
	char rid[53];
	const char *out_ctype;
} job;

struct rt_http {
	rt_router *rt;
	rt_httpd *server;
	rt_https *tls; /* HTTPS's configuration (https.c), or NULL */
	bool verify;   /* rt->creds: SigV4 required */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	job *head, *tail; /* guarded by mu */
	uint32_t queued;
	bool stop;
	pthread_t *threads;
	uint32_t n_threads;
	_Atomic uint64_t seq; /* request ids */
	uint64_t seed;
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* 52 characters from [0-9A-V], like DynamoDB's request ids. */
static void request_id(rt_http *h, char out[53])
{
	static const char al[] = "0123456789ABCDEFGHIJKLMNOPQRSTUV";
	uint64_t x = h->seed ^ atomic_fetch_add_explicit(&h->seq, 1, memory_order_relaxed);
	for (int w = 0; w < 4; w++) {
		uint64_t v = splitmix(&x);
		for (int i = 0; i < 13; i++, v >>= 5)
			out[w * 13 + i] = al[v & 31];
	}
	out[52] = '\0';
}

static char *append(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

/* CORS, as DynamoDB answers a browser (a request with an Origin header):
 * every answer allows any origin and lets the page read DynamoDB's
 * headers; a preflight (OPTIONS with Origin) is answered 200 with no body,
 * allowing the method and headers it asks for, for 172800 s. */
#define CORS_HEADERS                                                                               \
	"Access-Control-Allow-Origin: *\r\n"                                                       \
	"Access-Control-Expose-Headers: x-amzn-RequestId,x-amzn-ErrorType,x-amz-crc32\r\n"
#define CORS_MAX_AGE  "172800"
#define CORS_ECHO_MAX 512 /* bytes of Access-Control-Request-* echoed */

/* Answers r with body text and the DynamoDB headers (Content-Type,
 * x-amzn-RequestId when rid, x-amz-crc32, CORS_HEADERS for a browser); r is
 * gone after. */
static void send_answer(rt_httpd_req *r, int status, const char *ctype, const char *rid,
                        const char *body, size_t len, bool close)
{
	char crc[11], hdrs[384], *p = hdrs;
	rt_http_crc32(body, len, crc);
	assert(strlen(ctype) < 64);
	p = append(p, "Content-Type: ");
	p = append(p, ctype);
	if (rid != NULL) {
		p = append(p, "\r\nx-amzn-RequestId: ");
		p = append(p, rid);
	}
	p = append(p, "\r\nx-amz-crc32: ");
	p = append(p, crc);
	p = append(p, "\r\n");
	if (r->cors)
		p = append(p, CORS_HEADERS);
	*p = '\0';
	rt_httpd_respond(r, status, hdrs, body, len, close);
}

/* When not even an error can be built (out of memory): a bare 500, and
 * the connection closes. */
static void send_nothing(rt_httpd_req *r)
{
	rt_httpd_respond(r, 500, NULL, NULL, 0, true);
}

/* A DynamoDB error: {"__type": type, key: message}. */
static void send_error(rt_http *h, rt_httpd_req *r, int status, const char *type, const char *key,
                       const char *message, bool close)
{
	char rid[53], text_msg[SH_ERRMSG_SIZE];
	request_id(h, rid);
	/* The message may quote a client's bytes: keep it printable ASCII,
	 * which is always valid JSON text. */
	size_t i = 0;
	for (; message[i] != '\0' && i + 1 < sizeof(text_msg); i++) {
		unsigned char c = (unsigned char)message[i];
		text_msg[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	text_msg[i] = '\0';
	json_t *o = json_pack("{s:s, s:s}", "__type", type, key, text_msg);
	char *text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (text == NULL) {
		send_nothing(r);
		return;
	}
	send_answer(r, status, "application/x-amz-json-1.0", rid, text, strlen(text), close);
	free(text);
}

static const char *req_header(void *ctx, const char *name)
{
	return rt_httpd_header_get(ctx, name);
}

/* A JSON value as the answer, with the status DynamoDB uses.  Most answers
 * fit the stack buffer: one pass of json_dumpb, no allocation. */
static void send_json(rt_httpd_req *r, int status, const char *ctype, const char *rid, json_t *j)
{
	size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
	char small[8192], *buf = small;
	size_t n = json_dumpb(j, small, sizeof(small), flags);
	if (n > sizeof(small)) {
		if ((buf = sh_malloc(n)) == NULL) {
			send_nothing(r);
			return;
		}
		json_dumpb(j, buf, n, flags);
	}
	if (n == 0)
		send_nothing(r);
	else
		send_answer(r, status, ctype, rid, buf, n, false);
	if (buf != small)
		sh_free(buf);
}

/* An error code and message as DynamoDB's JSON answer. */
static void send_code(job *jb, int code, const char *m)
{
	json_t *out = NULL;
	if (wire_api_error_to_json(code, m, &out, NULL) != SHOAL_OK) {
		send_nothing(jb->req);
		return;
	}
	send_json(jb->req, wire_api_http_status(code), jb->out_ctype, jb->rid, out);
	json_decref(out);
}

/* A Response as its DynamoDB JSON answer. */
static void send_response(job *jb, const Shoal__Response *resp)
{
	char m[SH_ERRMSG_SIZE] = "";
	json_t *out = NULL;
	int status = wire_code_from_status((int)resp->status);
	int code = wire_api_response_to_json_for(resp, jb->in, &out, m);
	if (code != SHOAL_OK) {
		rt_log("http: %s answer does not convert to JSON: %s",
		       wire_op_name(jb->in->op_case), m);
		send_code(jb, code == SHOAL_E_NOMEM ? code : SHOAL_E_INTERNAL, m);
		return;
	}
	send_json(jb->req, wire_api_http_status(status), jb->out_ctype, jb->rid, out);
	json_decref(out);
}

static void job_free(job *jb)
{
	if (jb->rj != NULL)
		rt_job_put(jb->rj);
	sh_free(jb);
}

static void http_done(rt_job *rj);

/* The request pipeline for one POST: checks and decodes the request into a
 * router job and starts it (rt_job_start), whose answer comes back through
 * http_done; or answers an error at once (and frees jb). */
static void serve(rt_http *h, job *jb)
{
	char m[SH_ERRMSG_SIZE] = "";
	const rt_httpd_head *hd = jb->req->head;
	json_t *body = NULL;
	Shoal__Request *in = NULL;
	rt_principal who = {0};
	request_id(h, jb->rid);
	const char *ctype = rt_httpd_header_get(hd, "Content-Type");
	jb->out_ctype = ctype != NULL && strstr(ctype, "x-amz-json-1.1") != NULL
	                    ? "application/x-amz-json-1.1"
	                    : "application/x-amz-json-1.0";
	if (h->verify) {
		rt_sigv4_req sr = {
		    .method = hd->method,
		    .uri = hd->target,
		    .header = req_header,
		    .ctx = (void *)hd,
		    .body = jb->req->body,
		    .body_len = jb->req->len,
		};
		rt_auth_result ar =
		    rt_sigv4_verify_as(h->rt->creds, &sr, rt_wall_ms() / 1000, &who, m);
		if (ar != RT_AUTH_OK) {
			send_error(h, jb->req, 400, rt_auth_error_type(ar), "message", m, false);
			job_free(jb);
			return;
		}
	}
	int code;
	if (!rt_http_content_type_ok(ctype)) {
		snprintf(m, sizeof(m),
		         "Unsupported Content-Type %s: use application/x-amz-json-1.0", ctype);
		code = SHOAL_E_SERIALIZATION;
		goto err;
	}
	const char *op = rt_http_target_op(rt_httpd_header_get(hd, "X-Amz-Target"));
	if (op == NULL) {
		snprintf(m, sizeof(m), "An unknown operation was requested.");
		code = SHOAL_E_UNKNOWN_OPERATION;
		goto err;
	}
	if ((jb->rj = rt_job_get(h->rt)) == NULL) {
		snprintf(m, sizeof(m), "out of memory");
		code = SHOAL_E_NOMEM;
		goto err;
	}
	if (jb->req->len > 0 && (code = wire_json_parse((const char *)jb->req->body, jb->req->len,
	                                                &body, m)) != SHOAL_OK)
		goto err;
	code = wire_api_request_from_json(&jb->rj->arena, op, body, &in, m);
	json_decref(body);
	if (code != SHOAL_OK)
		goto err;
	jb->in = in;
	jb->rj->who = who; /* job.c authorizes it */
	int64_t t0 = rt_now_us();
	rt_job_start(jb->rj, NULL, in, t0, t0 / 1000 + h->rt->opt.deadline_ms, http_done, jb);
	return;

err:
	send_code(jb, code, m);
	job_free(jb);
}

/* The answer to a request that went through the pipeline. */
static void finish(job *jb)
{
	Shoal__Response *resp = rt_job_answer_pb(jb->rj);
	if (resp != NULL)
		send_response(jb, resp);
	else
		send_code(jb, SHOAL_E_NOMEM, "the router could not build this request's answer");
	job_free(jb);
}

static bool enqueue(rt_http *h, job *jb, bool force);

/* The router's pipeline answered (an nng callback thread, or the thread
 * that started the job).  A small answer is converted and written right
 * here (rt_httpd_respond writes on the socket from this thread); a large
 * one (a Query page, a batch) goes to a worker, so that an nng thread is
 * not held converting a megabyte. */
static void http_done(rt_job *rj)
{
	job *jb = rj->done_arg;
	jb->answered = true;
	size_t size = rj->out_msg != NULL ? nng_msg_len(rj->out_msg)
	              : rj->out != NULL   ? protobuf_c_message_get_packed_size(&rj->out->base)
	                                  : 0;
	if (size <= RT_HTTP_INLINE_ANSWER)
		finish(jb);
	else
		enqueue(jb->h, jb, true);
}

/* One step of a job: an answered one is converted and sent, a new one
 * served.  An endpoint worker, or the I/O thread that read a small body. */
static void run(rt_http *h, job *jb)
{
	if (jb->answered)
		finish(jb);
	else
		serve(h, jb);
}

static void *worker(void *arg)
{
	rt_http *h = arg;
	for (;;) {
		pthread_mutex_lock(&h->mu);
		while (h->head == NULL && !h->stop)
			pthread_cond_wait(&h->cv, &h->mu);
		job *jb = h->head;
		if (jb == NULL) { /* stopping and nothing left */
			pthread_mutex_unlock(&h->mu);
			break;
		}
		h->head = jb->next;
		if (h->head == NULL)
			h->tail = NULL;
		h->queued--;
		pthread_mutex_unlock(&h->mu);

		run(h, jb);
	}
	return NULL;
}

/* Queues a job; false when the queue is full (the caller answers 503).
 * force: queue even then (an answer must reach a worker to be sent). */
static bool enqueue(rt_http *h, job *jb, bool force)
{
	pthread_mutex_lock(&h->mu);
	if (!force && h->queued >= RT_HTTP_MAX_QUEUED) {
		pthread_mutex_unlock(&h->mu);
		return false;
	}
	jb->next = NULL;
	if (h->tail != NULL)
		h->tail->next = jb;
	else
		h->head = jb;
	h->tail = jb;
	h->queued++;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return true;
}

static void send_busy(rt_http *h, rt_httpd_req *r)
{
	send_error(h, r, 503, "com.amazonaws.dynamodb.v20120810#ServiceUnavailable", "message",
	           r->peer_busy ? "Too many bytes of HTTP requests in progress from this address"
	                        : "The router has too many HTTP requests in progress",
	           true);
}

/* Whether a query string carries SigV4 query authentication (a presigned
 * URL): X-Amz-Signature, X-Amz-Credential or X-Amz-Algorithm. */
static bool presigned(const char *target)
{
	const char *q = strchr(target, '?');
	static const char *const names[] = {
	    "X-Amz-Signature=", "X-Amz-Credential=", "X-Amz-Algorithm="};
	for (const char *p = q; p != NULL; p = strchr(p + 1, '&'))
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strncasecmp(p + 1, names[i], strlen(names[i])) == 0)
				return true;
	return false;
}

/* With credentials, what can be checked of a request's signature before its
 * body is read, is, so that a peer that cannot authenticate never has a
 * large body held for it (issue 15): the Authorization header's presence and
 * format, its key id, and its date (rt_auth_check_key: the same check, and
 * messages, as rt_sigv4_verify's after the body).  The signature covers the
 * body, so it is verified in serve.  Session tokens and presigned URLs,
 * which Shoal does not support, are refused here by name.  False after
 * answering (the connection then closes: the body stays unread). */
static bool head_auth(rt_http *h, rt_httpd_req *r)
{
	const rt_httpd_head *hd = r->head;
	char m[SH_ERRMSG_SIZE];
	if (rt_httpd_header_get(hd, "X-Amz-Security-Token") != NULL) {
		send_error(h, r, 400, rt_auth_error_type(RT_AUTH_UNRECOGNIZED), "message",
		           "The security token included in the request is invalid: Shoal does not "
		           "support session tokens (X-Amz-Security-Token); sign with a long-term "
		           "access key of the router's credentials file",
		           true);
		return false;
	}
	if (presigned(hd->target)) {
		send_error(h, r, 400, rt_auth_error_type(RT_AUTH_INCOMPLETE), "message",
		           "Shoal does not support presigned URLs (X-Amz-Signature, "
		           "X-Amz-Credential in the query string): sign the request in its "
		           "Authorization header",
		           true);
		return false;
	}
	/* A small body (most requests) is held at little cost and its
	 * signature checked as soon as it is in: the early check (~1.6 us:
	 * the date's parse, the key's lookup) is for bodies worth refusing
	 * before they are read. */
	if (hd->content_length <= RT_HTTP_INLINE_BODY && !hd->chunked_body)
		return true; /* (a chunked body may be large: checked as one) */
	const char *auth = rt_httpd_header_get(hd, "Authorization");
	rt_sigv4_auth au;
	rt_auth_result ar;
	if (auth == NULL || auth[0] == '\0') {
		snprintf(m, sizeof(m), "Request is missing Authentication Token");
		ar = RT_AUTH_MISSING;
	} else if (!rt_sigv4_parse_auth(auth, &au, m)) {
		ar = RT_AUTH_INCOMPLETE;
	} else {
		const char *date = rt_httpd_header_get(hd, "X-Amz-Date");
		const rt_cred *key;
		ar = rt_auth_check_key(h->rt->creds, au.key_id, date != NULL ? date : "", au.date,
		                       rt_wall_ms() / 1000, &key, m);
	}
	if (ar == RT_AUTH_OK)
		return true;
	send_error(h, r, 400, rt_auth_error_type(ar), "message", m, true);
	return false;
}

/* Appends "name: value\r\n" with value a client's header (printable
 * ASCII only, at most CORS_ECHO_MAX bytes), when it has one. */
static char *echo_header(char *p, const char *name, const char *value)
{
	if (value == NULL || value[0] == '\0')
		return p;
	p = append(p, name);
	p = append(p, ": ");
	for (size_t i = 0; value[i] != '\0' && i < CORS_ECHO_MAX; i++)
		*p++ = value[i] >= 0x20 && value[i] < 0x7f ? value[i] : ' ';
	return append(p, "\r\n");
}

/* A CORS preflight: 200, no body. */
static void preflight(rt_http *h, rt_httpd_req *r)
{
	const rt_httpd_head *hd = r->head;
	char rid[53], hdrs[2 * CORS_ECHO_MAX + 512], *p = hdrs;
	request_id(h, rid);
	p = append(p, "x-amzn-RequestId: ");
	p = append(p, rid);
	p = append(p, "\r\n" CORS_HEADERS);
	p = echo_header(p, "Access-Control-Allow-Headers",
	                rt_httpd_header_get(hd, "Access-Control-Request-Headers"));
	p = echo_header(p, "Access-Control-Allow-Methods",
	                rt_httpd_header_get(hd, "Access-Control-Request-Method"));
	p = append(p, "Access-Control-Max-Age: " CORS_MAX_AGE "\r\n");
	*p = '\0';
	rt_httpd_respond(r, 200, hdrs, NULL, 0, false);
}

/* I/O thread: a request's head is in.  Everything that can be refused
 * before reading the body is, here; the server closes the connection after
 * an answer that leaves a body unread. */
static bool on_head(void *arg, rt_httpd_req *r)
{
	rt_http *h = arg;
	const rt_httpd_head *hd = r->head;
	const char *method = hd->method;
	r->cors = rt_httpd_header_get(hd, "Origin") != NULL;
	if (r->cors && strcmp(method, "OPTIONS") == 0) {
		/* Any path, no credentials: a browser sends none here. */
		preflight(h, r);
		return false;
	}
	if (strcspn(hd->target, "?") != 1 || hd->target[0] != '/') {
		send_error(h, r, 404, "com.amazon.coral.service#UnknownOperationException",
		           "Message", "Only POST / (and GET / for health) are served", false);
		return false;
	}
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
		const char *host = rt_httpd_header_get(hd, "Host");
		char text[300];
		int n =
		    snprintf(text, sizeof(text), "healthy: %s", host != NULL ? host : "localhost");
		if (n < 0 || (size_t)n >= sizeof(text))
			n = (int)sizeof(text) - 1;
		send_answer(r, 200, "text/plain", NULL, text, (size_t)n, false);
		return false;
	}
	if (strcmp(method, "POST") != 0) {
		send_error(h, r, 405, "com.amazon.coral.service#UnknownOperationException",
		           "Message", "Only POST / (and GET / for health) are served", false);
		return false;
	}
	if (hd->chunked && !hd->chunked_body) {
		/* (a chunked body is decoded by the server, up to RT_HTTP_MAX_BODY
		 * bytes: more is 413) */
		send_error(h, r, 411, "com.amazon.coral.service#SerializationException", "Message",
		           "Only Transfer-Encoding: chunked alone, without Content-Length, is "
		           "supported",
		           true);
		return false;
	}
	if (hd->bad_length) {
		send_error(h, r, 400, "com.amazon.coral.service#SerializationException", "Message",
		           "Invalid Content-Length", true);
		return false;
	}
	if (hd->content_length > RT_HTTP_MAX_BODY) {
		char m[128];
		snprintf(m, sizeof(m), "Request body of %llu bytes exceeds the limit of %u bytes",
		         (unsigned long long)hd->content_length, RT_HTTP_MAX_BODY);
		send_error(h, r, 413, "com.amazon.coral.validate#ValidationException", "message", m,
		           true);
		return false;
	}
	return !h->verify || head_auth(h, r);
}

/* I/O thread: a POST's body is in.  A small request is served right here:
 * a hand-off to a worker and back costs more than its signature check and
 * JSON. */
static void on_request(void *arg, rt_httpd_req *r)
{
	rt_http *h = arg;
	job *jb = sh_calloc(1, sizeof(*jb));
	if (jb == NULL) {
		send_nothing(r);
		return;
	}
	jb->h = h;
	jb->req = r;
	if (r->len <= RT_HTTP_INLINE_BODY) {
		run(h, jb);
	} else if (!enqueue(h, jb, false)) {
		send_busy(h, r);
		job_free(jb);
	}
}

/* I/O thread: the server cannot hold this request's body. */
static void on_busy(void *arg, rt_httpd_req *r)
{
	send_busy(arg, r);
}

/* I/O thread: the requests one wake-up brought are started under one cork
 * (proto/lanes.h), so that those for one node leave in one message. */
static void on_burst(void *arg, bool begin)
{
	(void)arg;
	if (begin)
		wire_lanes_cork();
	else
		wire_lanes_uncork();
}

static void workers_stop(rt_http *h)
{
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	for (uint32_t i = 0; i < h->n_threads; i++)
		pthread_join(h->threads[i], NULL);
	sh_free(h->threads);
}

int rt_http_start(rt_http **out, rt_router *rt, const char *hostport, const char *https,
                  char *errmsg)
{
	*out = NULL;
	rt_http *h = sh_calloc(1, sizeof(*h));
	if (h == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	h->rt = rt;
	h->verify = rt->creds != NULL;
	if (getrandom(&h->seed, sizeof(h->seed), 0) != sizeof(h->seed))
		h->seed = (uint64_t)rt_wall_ms();
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);

	int rc;
	h->threads = sh_calloc(rt->opt.http_workers, sizeof(*h->threads));
	if (h->threads == NULL) {
		rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_h;
	}
	for (uint32_t i = 0; i < rt->opt.http_workers; i++) {
		if (pthread_create(&h->threads[i], NULL, worker, h) != 0) {
			rc = sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot start http worker thread %u",
			             i);
			goto err_after_threads;
		}
		h->n_threads++;
	}
	if (https != NULL) {
		if (rt->tls == NULL)
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "--https %s: HTTPS needs the cluster's certificates ([tls] in "
			             "the cluster file)",
			             https);
		else
			rc = rt_https_init(&h->tls, rt->tls, errmsg);
		if (rc != SHOAL_OK)
			goto err_after_threads;
	}
	rt_httpd_conf conf = {
	    .hostport = hostport,
	    .tls_hostport = https,
	    .tls = h->tls != NULL ? rt_https_conf(h->tls) : NULL,
	    .threads = RT_HTTP_IO_THREADS,
	    .max_conns = RT_HTTPD_MAX_CONNS,
	    .max_conns_peer = RT_HTTP_MAX_CONNS_PEER,
	    .max_chunked = RT_HTTP_MAX_BODY,
	    .max_held = RT_HTTP_MAX_INFLIGHT,
	    .max_held_peer = RT_HTTP_MAX_INFLIGHT_PEER,
	    .head_ms = rt->opt.http_head_ms,
	    .timeout_ms = rt->opt.http_body_ms,
	    .min_rate = rt->opt.http_body_rate,
	    .handshakes_peer = rt->opt.https_handshakes > 0 ? rt->opt.https_handshakes : UINT32_MAX,
	    .stats = &rt->metrics.http,
	    .ops = {.head = on_head, .request = on_request, .busy = on_busy, .burst = on_burst},
	    .arg = h,
	};
	if ((rc = rt_httpd_start(&h->server, &conf, errmsg)) != SHOAL_OK)
		goto err_after_threads;
	*out = h;
	return SHOAL_OK;

err_after_threads:
	rt_https_free(h->tls);
	workers_stop(h);
err_after_h:
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	sh_free(h);
	return rc;
}

void rt_http_stop(rt_http *h)
{
	if (h == NULL)
		return;
	/* Closes the connections and waits until every request has been
	 * answered: the workers still run, for the requests and answers
	 * queued to them.  HTTPS's configuration after the server. */
	rt_httpd_stop(h->server);
	rt_https_free(h->tls);
	workers_stop(h);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	sh_free(h);
}
