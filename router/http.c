/*
 * http.c -- the DynamoDB-compatible HTTP endpoint (contract: http.h).
 *
 * A request's way through:
 *
 *   nng HTTP server (its threads)          endpoint workers (ours)
 *   ---------------------------------      ----------------------------------
 *   on_request: method, Content-Length,
 *     limits; start reading the body  -->  (queue)  --> serve: SigV4, target,
 *   on_body: queue the job                             JSON -> Request (wire_api)
 *                                                      into a router job,
 *                                                      rt_job_start (job.c)
 *                                    the router's pipeline, exactly as for a
 *                                    native request (steps, calls, lanes)
 *                                      |  http_done: small answers converted
 *                                      v  right there; large ones queued
 *                                                      finish: Response -> JSON,
 *                                                      headers,
 *   writes the response, reads the next  <-- nng_aio_finish(handler aio)
 *   request on the connection (keep-alive)
 *
 * So an HTTP request and a native one share one pipeline (one set of
 * semantics, metrics, batching) and no endpoint worker waits for a node:
 * workers only check and convert.  The Request is decoded once (from JSON,
 * into the job's arena) and never packed unless a step forwards it.
 *
 * nng's server hands the handler an aio whose inputs are the request (0),
 * the handler (1) and the connection (2); it does not touch the request or
 * read from the connection until that aio finishes, so the worker reads the
 * request's headers in place and the handler reads the body itself with
 * nng_http_conn_read_all (the handler does not use nng's body collection,
 * so that an oversized body is refused with a DynamoDB error before a byte
 * of it is buffered).  Finishing the aio with an error makes nng close the
 * connection without an answer: used only when reading the body failed.
 *
 * When the server stops, nng closes every connection and waits for handler
 * aios still in progress; the workers are still running then and finish
 * them, so rt_http_stop stops the server first and the workers after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <zlib.h>

#include "common/alloc.h"
#include "proto/wire_api.h"
#include "router/http.h"

/* ------------------------------------------------------------------------ */
/* Pure helpers                                                              */
/* ------------------------------------------------------------------------ */

const char *rt_http_target_op(const char *target)
{
	static const char prefix[] = RT_HTTP_TARGET_PREFIX;
	if (target == NULL || strncmp(target, prefix, sizeof(prefix) - 1) != 0)
		return NULL;
	const char *op = target + sizeof(prefix) - 1;
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
	snprintf(out, 11, "%lu", (unsigned long)(c & 0xffffffffu));
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
	nng_aio *aio; /* the handler's: finish it to answer */
	nng_http_req *req;
	nng_aio *rd; /* reads the body; NULL without one */
	uint8_t *body;
	size_t len;
	bool failed; /* reading the body failed: close the connection */
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
	nng_http_server *server;
	rt_creds creds;
	bool verify;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	job *head, *tail; /* guarded by mu */
	uint32_t queued;
	bool stop;
	pthread_t *threads;
	uint32_t n_threads;
	_Atomic uint64_t inflight; /* body bytes held */
	_Atomic uint64_t seq;      /* request ids */
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

/* A finished response with body text (copied) and the DynamoDB headers. */
static nng_http_res *make_res(uint16_t status, const char *ctype, const char *rid, const char *body,
                              size_t len, bool close)
{
	nng_http_res *res;
	if (nng_http_res_alloc(&res) != 0)
		return NULL;
	char crc[11];
	rt_http_crc32(body, len, crc);
	if (nng_http_res_set_status(res, status) != 0 ||
	    nng_http_res_set_header(res, "Content-Type", ctype) != 0 ||
	    (rid != NULL && nng_http_res_set_header(res, "x-amzn-RequestId", rid) != 0) ||
	    nng_http_res_set_header(res, "x-amz-crc32", crc) != 0 ||
	    (close && nng_http_res_set_header(res, "Connection", "close") != 0) ||
	    nng_http_res_copy_data(res, body, len) != 0) {
		nng_http_res_free(res);
		return NULL;
	}
	return res;
}

/* An error body {"__type": type, "<key>": message}. */
static nng_http_res *error_res(rt_http *h, uint16_t status, const char *type, const char *key,
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
	nng_http_res *res = NULL;
	if (text != NULL) {
		res =
		    make_res(status, "application/x-amz-json-1.0", rid, text, strlen(text), close);
		free(text);
	}
	return res;
}

static void answer_res(nng_aio *aio, nng_http_res *res)
{
	if (res == NULL) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static const char *req_header(void *ctx, const char *name)
{
	return nng_http_req_get_header(ctx, name);
}

/* A JSON value to the response, with the status DynamoDB uses. */
static nng_http_res *json_res(uint16_t status, const char *ctype, const char *rid, json_t *j)
{
	size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
	size_t n = json_dumpb(j, NULL, 0, flags);
	char *buf = n > 0 ? sh_malloc(n) : NULL;
	if (buf == NULL)
		return NULL;
	json_dumpb(j, buf, n, flags);
	nng_http_res *res = make_res(status, ctype, rid, buf, n, false);
	sh_free(buf);
	return res;
}

/* A Response to its DynamoDB JSON answer (worker thread). */
static nng_http_res *respond(job *jb, const Shoal__Response *resp)
{
	char m[SH_ERRMSG_SIZE] = "";
	json_t *out = NULL;
	int status = wire_code_from_status((int)resp->status);
	int code = wire_api_response_to_json_for(resp, jb->in, &out, m);
	if (code != SHOAL_OK) {
		rt_log("http: %s answer does not convert to JSON: %s",
		       wire_op_name(jb->in->op_case), m);
		if (code != SHOAL_E_NOMEM)
			code = SHOAL_E_INTERNAL;
		if (wire_api_error_to_json(code, m, &out, NULL) != SHOAL_OK)
			return NULL;
		status = code;
	}
	nng_http_res *res =
	    json_res((uint16_t)wire_api_http_status(status), jb->out_ctype, jb->rid, out);
	json_decref(out);
	return res;
}

static void http_done(rt_job *rj);

/* The request pipeline for one POST (worker thread): checks and decodes
 * the request into a router job and starts it (rt_job_start), whose answer
 * comes back through http_done and finish; *pending then, and nothing to
 * send yet. */
static nng_http_res *serve(rt_http *h, job *jb, bool *pending)
{
	char m[SH_ERRMSG_SIZE] = "";
	nng_http_req *req = jb->req;
	json_t *body = NULL;
	Shoal__Request *in = NULL;
	*pending = false;
	request_id(h, jb->rid);
	const char *ctype = nng_http_req_get_header(req, "Content-Type");
	jb->out_ctype = ctype != NULL && strstr(ctype, "x-amz-json-1.1") != NULL
	                    ? "application/x-amz-json-1.1"
	                    : "application/x-amz-json-1.0";
	if (h->verify) {
		rt_sigv4_req sr = {
		    .method = nng_http_req_get_method(req),
		    .uri = nng_http_req_get_uri(req),
		    .header = req_header,
		    .ctx = req,
		    .body = jb->body,
		    .body_len = jb->len,
		};
		rt_auth_result ar = rt_sigv4_verify(&h->creds, &sr, rt_wall_ms() / 1000, m);
		if (ar != RT_AUTH_OK)
			return error_res(h, 400, rt_auth_error_type(ar), "message", m, false);
	}
	int code;
	if (!rt_http_content_type_ok(ctype)) {
		snprintf(m, sizeof(m),
		         "Unsupported Content-Type %s: use application/x-amz-json-1.0", ctype);
		code = SHOAL_E_SERIALIZATION;
		goto err;
	}
	const char *op = rt_http_target_op(nng_http_req_get_header(req, "X-Amz-Target"));
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
	if (jb->len > 0 &&
	    (code = wire_json_parse((const char *)jb->body, jb->len, &body, m)) != SHOAL_OK)
		goto err;
	code = wire_api_request_from_json(&jb->rj->arena, op, body, &in, m);
	json_decref(body);
	if (code != SHOAL_OK)
		goto err;
	jb->in = in;
	*pending = true;
	int64_t t0 = rt_now_us();
	rt_job_start(jb->rj, NULL, in, t0, t0 / 1000 + h->rt->opt.deadline_ms, http_done, jb);
	return NULL;

err:;
	if (jb->rj != NULL) {
		rt_job_put(jb->rj);
		jb->rj = NULL;
	}
	json_t *out = NULL;
	if (wire_api_error_to_json(code, m, &out, NULL) != SHOAL_OK)
		return NULL;
	nng_http_res *res =
	    json_res((uint16_t)wire_api_http_status(code), jb->out_ctype, jb->rid, out);
	json_decref(out);
	return res;
}

static bool enqueue(rt_http *h, job *jb, bool force);
static void run(rt_http *h, job *jb);

static nng_http_res *finish(rt_http *h, job *jb);
static void job_free(job *jb);

/* The router's pipeline answered (an nng callback thread).  A small
 * answer is converted and sent right here, which saves waking an endpoint
 * worker; a large one (a Query page, a batch) goes to a worker, so that an
 * nng thread is not held converting a megabyte. */
static void http_done(rt_job *rj)
{
	job *jb = rj->done_arg;
	jb->answered = true;
	size_t size = rj->out_msg != NULL ? nng_msg_len(rj->out_msg)
	              : rj->out != NULL   ? protobuf_c_message_get_packed_size(&rj->out->base)
	                                  : 0;
	if (size <= RT_HTTP_INLINE_ANSWER) {
		answer_res(jb->aio, finish(jb->h, jb));
		job_free(jb);
		return;
	}
	enqueue(jb->h, jb, true);
}

/* The answer to a request that went through the pipeline. */
static nng_http_res *finish(rt_http *h, job *jb)
{
	(void)h;
	Shoal__Response *resp = rt_job_answer_pb(jb->rj);
	if (resp != NULL)
		return respond(jb, resp);
	json_t *out = NULL;
	if (wire_api_error_to_json(SHOAL_E_NOMEM,
	                           "the router could not build this request's answer", &out,
	                           NULL) != SHOAL_OK)
		return NULL;
	nng_http_res *res =
	    json_res((uint16_t)wire_api_http_status(SHOAL_E_NOMEM), jb->out_ctype, jb->rid, out);
	json_decref(out);
	return res;
}

static void job_free(job *jb)
{
	if (jb->rd != NULL)
		nng_aio_reap(jb->rd); /* maybe from within its own callback (on_body) */
	if (jb->rj != NULL)
		rt_job_put(jb->rj);
	if (jb->body != NULL) {
		sh_free(jb->body);
		atomic_fetch_sub(&jb->h->inflight, jb->len);
	}
	sh_free(jb);
}

/* One step of a job: a failed read closes the connection; an answered job
 * is converted and sent; a new one is served (and, unless it went to the
 * pipeline, answered).  An endpoint worker, or the nng thread that read a
 * small body. */
static void run(rt_http *h, job *jb)
{
	if (jb->failed) {
		nng_aio_finish(jb->aio, NNG_ECLOSED);
	} else if (jb->answered) {
		answer_res(jb->aio, finish(h, jb));
	} else {
		bool pending;
		nng_http_res *res = serve(h, jb, &pending);
		if (pending)
			return; /* http_done answers it */
		answer_res(jb->aio, res);
	}
	job_free(jb);
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
 * force: queue even then (a failed read must reach a worker to be freed). */
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

static nng_http_res *busy_res(rt_http *h, bool close)
{
	return error_res(h, 503, "com.amazonaws.dynamodb.v20120810#ServiceUnavailable", "message",
	                 "The router has too many HTTP requests in progress", close);
}

/* nng thread: the body has been read (or reading it failed). */
static void on_body(void *arg)
{
	job *jb = arg;
	if (nng_aio_result(jb->rd) != 0)
		jb->failed = true;
	/* A small request is served right here: a hand-off to a worker and
	 * back costs more than its signature check and JSON. */
	if (jb->failed || jb->len <= RT_HTTP_INLINE_BODY)
		run(jb->h, jb);
	else
		enqueue(jb->h, jb, true);
}

/* nng thread: a request's headers are in. */
static void on_request(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *hd = nng_aio_get_input(aio, 1);
	nng_http_conn *conn = nng_aio_get_input(aio, 2);
	rt_http *h = nng_http_handler_get_data(hd);
	const char *method = nng_http_req_get_method(req);

	/* A body the endpoint does not read (GET, other methods) would be
	 * taken for the next request: such connections are closed after the
	 * answer. */
	const char *cl0 = nng_http_req_get_header(req, "Content-Length");
	bool unread_body = (cl0 != NULL && strspn(cl0, "0") != strlen(cl0)) ||
	                   nng_http_req_get_header(req, "Transfer-Encoding") != NULL;
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
		const char *host = nng_http_req_get_header(req, "Host");
		char text[300];
		int n =
		    snprintf(text, sizeof(text), "healthy: %s", host != NULL ? host : "localhost");
		if (n < 0 || (size_t)n >= sizeof(text))
			n = (int)sizeof(text) - 1;
		answer_res(aio, make_res(200, "text/plain", NULL, text, (size_t)n, unread_body));
		return;
	}
	if (strcmp(method, "POST") != 0) {
		answer_res(aio,
		           error_res(h, 405, "com.amazon.coral.service#UnknownOperationException",
		                     "Message", "Only POST / (and GET / for health) are served",
		                     unread_body));
		return;
	}
	if (nng_http_req_get_header(req, "Transfer-Encoding") != NULL) {
		answer_res(aio,
		           error_res(h, 411, "com.amazon.coral.service#SerializationException",
		                     "Message", "Chunked request bodies are not supported", true));
		return;
	}
	const char *cl = nng_http_req_get_header(req, "Content-Length");
	uint64_t len = 0;
	if (cl != NULL) {
		char *end;
		len = strtoull(cl, &end, 10);
		if (cl[0] < '0' || cl[0] > '9' || *end != '\0') {
			answer_res(aio, error_res(h, 400,
			                          "com.amazon.coral.service#SerializationException",
			                          "Message", "Invalid Content-Length", true));
			return;
		}
	}
	if (len > RT_HTTP_MAX_BODY) {
		char m[128];
		snprintf(m, sizeof(m), "Request body of %llu bytes exceeds the limit of %u bytes",
		         (unsigned long long)len, RT_HTTP_MAX_BODY);
		answer_res(aio, error_res(h, 413, "com.amazon.coral.validate#ValidationException",
		                          "message", m, true));
		return;
	}
	if (atomic_fetch_add(&h->inflight, len) + len > RT_HTTP_MAX_INFLIGHT) {
		atomic_fetch_sub(&h->inflight, len);
		answer_res(aio, busy_res(h, true));
		return;
	}
	job *jb = sh_calloc(1, sizeof(*jb));
	if (jb == NULL) {
		atomic_fetch_sub(&h->inflight, len);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	jb->h = h;
	jb->aio = aio;
	jb->req = req;
	if (len == 0) {
		run(h, jb);
		return;
	}
	jb->len = (size_t)len;
	jb->body = sh_malloc(jb->len);
	if (jb->body == NULL || nng_aio_alloc(&jb->rd, on_body, jb) != 0) {
		if (jb->body == NULL)
			atomic_fetch_sub(&h->inflight, len);
		job_free(jb);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_iov iov = {.iov_buf = jb->body, .iov_len = jb->len};
	nng_aio_set_iov(jb->rd, 1, &iov);
	nng_http_conn_read_all(conn, jb->rd);
}

int rt_http_start(rt_http **out, rt_router *rt, const char *hostport, rt_creds *creds, char *errmsg)
{
	*out = NULL;
	rt_http *h = sh_calloc(1, sizeof(*h));
	if (h == NULL) {
		rt_creds_free(creds);
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	}
	h->rt = rt;
	if (creds != NULL) {
		h->creds = *creds;
		memset(creds, 0, sizeof(*creds));
		h->verify = true;
	}
	if (getrandom(&h->seed, sizeof(h->seed), 0) != sizeof(h->seed))
		h->seed = (uint64_t)rt_wall_ms();
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);

	char urlbuf[SH_ADDR_MAX + 16];
	snprintf(urlbuf, sizeof(urlbuf), "http://%s", hostport);
	nng_url *url;
	nng_http_handler *hd;
	int rc = SHOAL_E_INTERNAL;
	int rv = nng_url_parse(&url, urlbuf);
	if (rv != 0) {
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "http address %s: %s", hostport,
		             nng_strerror(rv));
		goto err_after_h;
	}
	rv = nng_http_server_hold(&h->server, url);
	nng_url_free(url);
	if (rv != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "http server %s: %s", hostport, nng_strerror(rv));
		goto err_after_h;
	}
	if ((rv = nng_http_handler_alloc(&hd, "/", on_request)) != 0)
		goto err_after_server;
	if ((rv = nng_http_handler_set_method(hd, NULL)) != 0 ||
	    (rv = nng_http_handler_collect_body(hd, false, 0)) != 0 ||
	    (rv = nng_http_handler_set_data(hd, h, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(h->server, hd)) != 0) {
		nng_http_handler_free(hd);
		goto err_after_server;
	}
	h->threads = sh_calloc(rt->opt.http_workers, sizeof(*h->threads));
	if (h->threads == NULL) {
		rv = NNG_ENOMEM;
		goto err_after_server;
	}
	for (uint32_t i = 0; i < rt->opt.http_workers; i++) {
		if (pthread_create(&h->threads[i], NULL, worker, h) != 0) {
			sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot start http worker thread %u", i);
			goto err_after_threads;
		}
		h->n_threads++;
	}
	if ((rv = nng_http_server_start(h->server)) != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "http server %s: %s", hostport, nng_strerror(rv));
		goto err_after_threads;
	}
	*out = h;
	return SHOAL_OK;

err_after_threads:
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	for (uint32_t i = 0; i < h->n_threads; i++)
		pthread_join(h->threads[i], NULL);
	sh_free(h->threads);
	nng_http_server_release(h->server);
	goto err_after_h;
err_after_server:
	sh_errf(errmsg, SHOAL_E_INTERNAL, "http server %s: %s", hostport, nng_strerror(rv));
	nng_http_server_release(h->server);
err_after_h:
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	rt_creds_free(&h->creds);
	sh_free(h);
	return rc;
}

void rt_http_stop(rt_http *h)
{
	if (h == NULL)
		return;
	/* Closes the connections and waits for handlers in progress, which
	 * the still-running workers finish. */
	nng_http_server_stop(h->server);
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	for (uint32_t i = 0; i < h->n_threads; i++)
		pthread_join(h->threads[i], NULL);
	sh_free(h->threads);
	nng_http_server_release(h->server);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	rt_creds_free(&h->creds);
	sh_free(h);
}
