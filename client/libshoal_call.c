/*
 * libshoal_call.c -- requests in and answers out, and the calls built on the
 * ops of libshoal.c (contract: shoal.h).
 *
 * A JSON request is parsed and converted to a Request on the caller's thread
 * (proto/wire_api.h: the one converter between DynamoDB's HTTP API bodies
 * and shoal.proto), given a request_id of ours, packed and copied into an
 * nng message; a protobuf request is copied as is.  The answer is decoded on
 * the thread that receives the result -- the blocking caller, or the thread
 * in shoal_poll -- not on nng's threads (which only peek at the status when
 * a retry may follow: ServiceUnavailable, throttling): the Response is unpacked with the
 * hostile-input-safe wire_unpack_response, its status becomes the result
 * code and shoal_error, and for JSON calls a successful result is converted
 * back to DynamoDB's response body.  An answer that does not decode, answers
 * another request_id, or carries another operation's result is the router's
 * fault: SHOAL_E_INTERNAL with source SHOAL_SRC_PROTOCOL, never a crash.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "client/libshoal_int.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/arena.h"
#include "proto/wire.h"
#include "proto/wire_api.h"

static void clear_err(shoal_error *err)
{
	lib_set_err(err, SHOAL_OK, SHOAL_SRC_NONE, "");
}

/* ------------------------------------------------------------------------ */
/* Requests and answers (user threads)                                       */
/* ------------------------------------------------------------------------ */

static int msg_from_bytes(const uint8_t *buf, size_t len, nng_msg **out, shoal_error *err)
{
	if (len > MAX_REQUEST) {
		char m[SH_ERRMSG_SIZE];
		sh_errf(m, SHOAL_E_VALIDATION,
		        "Request of %zu bytes exceeds the message size limit of %u bytes", len,
		        MAX_REQUEST);
		lib_set_err(err, SHOAL_E_VALIDATION, SHOAL_SRC_REQUEST, m);
		return SHOAL_E_VALIDATION;
	}
	int rv = nng_msg_alloc(out, len);
	if (rv != 0) {
		lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
		return SHOAL_E_NOMEM;
	}
	if (len > 0)
		memcpy(nng_msg_body(*out), buf, len);
	return SHOAL_OK;
}

/* JSON body -> packed Request with request_id `id`. */
static int json_request(const char *operation, const char *text, uint64_t id, nng_msg **out,
                        shoal_error *err)
{
	char m[SH_ERRMSG_SIZE] = "";
	if (operation == NULL)
		operation = "";
	if (text == NULL)
		text = "{}";
	json_t *j = NULL;
	int rc = wire_json_parse(text, strlen(text), &j, m);
	if (rc != SHOAL_OK) {
		lib_set_err(err, rc, rc == SHOAL_E_NOMEM ? SHOAL_SRC_LOCAL : SHOAL_SRC_REQUEST, m);
		return rc;
	}
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Request *req = NULL;
	rc = wire_api_request_from_json(&a, operation, j, &req, m);
	if (rc != SHOAL_OK) {
		lib_set_err(err, rc, rc == SHOAL_E_NOMEM ? SHOAL_SRC_LOCAL : SHOAL_SRC_REQUEST, m);
		goto err_after_arena;
	}
	req->request_id = id;
	uint8_t *buf;
	size_t len;
	rc = wire_pack(&a, &req->base, &buf, &len, m);
	if (rc != SHOAL_OK) {
		lib_set_err(err, rc, SHOAL_SRC_LOCAL, m);
		goto err_after_arena;
	}
	rc = msg_from_bytes(buf, len, out, err);
err_after_arena:
	sh_arena_fini(&a);
	json_decref(j);
	return rc;
}

/* Copies n bytes into a new sh_malloc'd buffer (+ NUL). */
static void *dup_bytes(const void *p, size_t n)
{
	char *d = sh_malloc(n + 1);
	if (d == NULL)
		return NULL;
	if (n > 0)
		memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

/* A successful Response -> its DynamoDB body.  Query and Scan need their
 * request to tell Select COUNT from an empty page, so it is decoded again. */
static int response_to_json(const op *o, const Shoal__Response *resp, json_t **out, char *m)
{
	if (strcmp(o->operation, "Query") != 0 && strcmp(o->operation, "Scan") != 0)
		return wire_api_response_to_json(resp, o->operation, out, m);
	Shoal__Request *req;
	int rc = wire_unpack_request(NULL, nng_msg_body(o->req), nng_msg_len(o->req), &req, m);
	if (rc != SHOAL_OK)
		return rc;
	rc = wire_api_response_to_json_for(resp, req, out, m);
	wire_free_request(NULL, req);
	return rc;
}

/*
 * User thread: the caller's view of a finished op.  Returns the code; *body
 * (sh_malloc'd, NUL-terminated; may be NULL) and *len as documented for
 * shoal_call_json / shoal_call_pb.  err is always filled.
 */
static int op_result(op *o, void **body, size_t *len, shoal_error *err)
{
	*body = NULL;
	*len = 0;
	if (o->code != SHOAL_OK) {
		lib_set_err(err, o->code, o->source, o->msg);
		return o->code;
	}
	char m[SH_ERRMSG_SIZE] = "";
	const uint8_t *bytes = nng_msg_body(o->reply);
	size_t n = nng_msg_len(o->reply);
	Shoal__Response *resp = NULL;
	int rc = wire_unpack_response(NULL, bytes, n, &resp, m);
	if (rc != SHOAL_OK) {
		char m2[SH_ERRMSG_SIZE];
		if (rc == SHOAL_E_NOMEM) {
			lib_set_err(err, rc, SHOAL_SRC_LOCAL, m);
			return rc;
		}
		snprintf(m2, sizeof(m2), "malformed response from \"%s\": %s", o->c->endpoints, m);
		lib_set_err(err, SHOAL_E_INTERNAL, SHOAL_SRC_PROTOCOL, m2);
		return SHOAL_E_INTERNAL;
	}
	int status = wire_code_from_status(resp->status);
	if (status != SHOAL_OK) {
		const char *text = resp->message != NULL && resp->message[0] != '\0'
		                       ? resp->message
		                       : shoal_strerror(status);
		lib_set_err(err, status, SHOAL_SRC_SERVICE, text);
	} else {
		clear_err(err);
	}

	if (!o->json) {
		*body = dup_bytes(bytes, n);
		if (*body == NULL) {
			lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
			rc = SHOAL_E_NOMEM;
			goto out;
		}
		*len = n;
		rc = status;
		goto out;
	}

	if (resp->request_id != 0 && resp->request_id != o->request_id) {
		snprintf(m, sizeof(m),
		         "malformed response from \"%s\": answer to request %llu, expected %llu",
		         o->c->endpoints, (unsigned long long)resp->request_id,
		         (unsigned long long)o->request_id);
		lib_set_err(err, SHOAL_E_INTERNAL, SHOAL_SRC_PROTOCOL, m);
		rc = SHOAL_E_INTERNAL;
		goto out;
	}
	if (status != SHOAL_OK) {
		rc = status;
		goto out;
	}
	json_t *j = NULL;
	rc = response_to_json(o, resp, &j, m);
	if (rc != SHOAL_OK) {
		char m2[SH_ERRMSG_SIZE];
		snprintf(m2, sizeof(m2), "malformed response from \"%s\": %s", o->c->endpoints, m);
		if (rc == SHOAL_E_NOMEM) {
			lib_set_err(err, rc, SHOAL_SRC_LOCAL, m);
		} else {
			lib_set_err(err, SHOAL_E_INTERNAL, SHOAL_SRC_PROTOCOL, m2);
			rc = SHOAL_E_INTERNAL;
		}
		goto out;
	}
	size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY;
	size_t jn = json_dumpb(j, NULL, 0, flags);
	char *text = jn > 0 ? sh_malloc(jn + 1) : NULL;
	if (text == NULL || json_dumpb(j, text, jn, flags) != jn) {
		sh_free(text);
		json_decref(j);
		lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory writing JSON");
		rc = SHOAL_E_NOMEM;
		goto out;
	}
	text[jn] = '\0';
	json_decref(j);
	*body = text;
	*len = jn;
	rc = SHOAL_OK;
out:
	wire_free_response(NULL, resp);
	return rc;
}

/* Appends Request.client_token to the packed request (a field appended to
 * a protobuf message is read as part of it): 16 bytes unique to this
 * request, the same on every resend of it. */
static int add_client_token(shoal_client *c, uint64_t id, nng_msg *req, shoal_error *err)
{
	uint8_t in[24], field[2 + 5 + 16];
	memcpy(in, c->nonce, 16);
	memcpy(in + 16, &id, 8);
	XXH128_hash_t h = XXH3_128bits(in, sizeof(in));
	size_t n = wire_put_varint(field, (uint64_t)c->f_client_token << 3 | 2);
	n += wire_put_varint(field + n, 16);
	memcpy(field + n, &h.high64, 8);
	memcpy(field + n + 8, &h.low64, 8);
	if (nng_msg_append(req, field, n + 16) != 0) {
		lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
		return SHOAL_E_NOMEM;
	}
	return SHOAL_OK;
}

/* Prepares an op for a request (JSON when operation != NULL). */
static int op_prepare(shoal_client *c, bool json, const char *operation, const char *text,
                      const uint8_t *buf, size_t len, op **out, shoal_error *err)
{
	*out = NULL;
	if (c == NULL) {
		lib_set_err(err, SHOAL_E_VALIDATION, SHOAL_SRC_LOCAL, "no client");
		return SHOAL_E_VALIDATION;
	}
	uint64_t id = atomic_fetch_add(&c->next_id, 1);
	nng_msg *req = NULL;
	int rc = json ? json_request(operation, text, id, &req, err)
	              : msg_from_bytes(buf, len, &req, err);
	if (rc != SHOAL_OK)
		return rc;
	if ((rc = add_client_token(c, id, req, err)) != SHOAL_OK) {
		nng_msg_free(req);
		return rc;
	}
	char m[SH_ERRMSG_SIZE];
	op *o;
	rc = lib_op_get(c, &o, m);
	if (rc != SHOAL_OK) {
		nng_msg_free(req);
		lib_set_err(err, rc, SHOAL_SRC_LOCAL, m);
		return rc;
	}
	o->json = json;
	o->request_id = id;
	snprintf(o->operation, sizeof(o->operation), "%s", json ? operation : "");
	o->req = req;
	*out = o;
	return SHOAL_OK;
}

/* Blocking: start, wait, convert, release. */
static int call(shoal_client *c, bool json, const char *operation, const char *text,
                const uint8_t *buf, size_t len, void **body, size_t *body_len, shoal_error *err)
{
	*body = NULL;
	*body_len = 0;
	op *o;
	int rc = op_prepare(c, json, operation, text, buf, len, &o, err);
	if (rc != SHOAL_OK)
		return rc;
	o->async = false;
	lib_op_start(o);
	pthread_mutex_lock(&c->mu);
	while (!o->done)
		pthread_cond_wait(&o->cond, &c->mu);
	pthread_mutex_unlock(&c->mu);
	rc = op_result(o, body, body_len, err);
	lib_op_release(o);
	return rc;
}

int shoal_call_json(shoal_client *c, const char *operation, const char *request_json,
                    char **response_json, shoal_error *err)
{
	void *body;
	size_t len;
	clear_err(err);
	int rc = call(c, true, operation, request_json, NULL, 0, &body, &len, err);
	*response_json = body;
	return rc;
}

int shoal_call_pb(shoal_client *c, const uint8_t *req, size_t len, uint8_t **response,
                  size_t *response_len, shoal_error *err)
{
	void *body;
	clear_err(err);
	int rc = call(c, false, NULL, NULL, req, len, &body, response_len, err);
	*response = body;
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Asynchronous calls                                                        */
/* ------------------------------------------------------------------------ */

static int submit(shoal_client *c, bool json, const char *operation, const char *text,
                  const uint8_t *buf, size_t len, shoal_done_cb cb, void *arg, shoal_error *err)
{
	clear_err(err);
	if (cb == NULL) {
		lib_set_err(err, SHOAL_E_VALIDATION, SHOAL_SRC_LOCAL, "no completion callback");
		return SHOAL_E_VALIDATION;
	}
	op *o;
	int rc = op_prepare(c, json, operation, text, buf, len, &o, err);
	if (rc != SHOAL_OK)
		return rc;
	o->async = true;
	o->cb = cb;
	o->arg = arg;
	pthread_mutex_lock(&c->mu);
	c->in_flight++;
	pthread_mutex_unlock(&c->mu);
	lib_op_start(o);
	return SHOAL_OK;
}

int shoal_submit_json(shoal_client *c, const char *operation, const char *request_json,
                      shoal_done_cb cb, void *arg, shoal_error *err)
{
	return submit(c, true, operation, request_json, NULL, 0, cb, arg, err);
}

int shoal_submit_pb(shoal_client *c, const uint8_t *req, size_t len, shoal_done_cb cb, void *arg,
                    shoal_error *err)
{
	return submit(c, false, NULL, NULL, req, len, cb, arg, err);
}

unsigned shoal_in_flight(shoal_client *c)
{
	pthread_mutex_lock(&c->mu);
	unsigned n = c->in_flight;
	pthread_mutex_unlock(&c->mu);
	return n;
}

int shoal_poll(shoal_client *c, int timeout_ms)
{
	/* A poll from inside one of c's callbacks (nested): what the callbacks
	 * submitted so far is still corked, and waiting for it unsent would
	 * never end.  Send it first. */
	lib_lanes_send_held(c);
	pthread_mutex_lock(&c->mu);
	if (c->done_head == NULL && c->in_flight > 0 && timeout_ms != 0) {
		struct timespec until;
		sh_timespec_in(CLOCK_MONOTONIC, timeout_ms > 0 ? timeout_ms : 0, &until);
		while (c->done_head == NULL && c->in_flight > 0) {
			if (timeout_ms < 0) {
				pthread_cond_wait(&c->cond, &c->mu);
			} else if (pthread_cond_timedwait(&c->cond, &c->mu, &until) == ETIMEDOUT) {
				break;
			}
		}
	}
	op *list = c->done_head;
	c->done_head = c->done_tail = NULL;
	pthread_mutex_unlock(&c->mu);

	int ran = 0;
	if (list != NULL)
		lib_lanes_cork(c);
	while (list != NULL) {
		op *o = list;
		list = o->next;
		void *body;
		size_t len;
		shoal_error err;
		int code = op_result(o, &body, &len, &err);
		shoal_done_cb cb = o->cb;
		void *arg = o->arg;
		lib_op_release(o);
		pthread_mutex_lock(&c->mu);
		c->in_flight--;
		pthread_mutex_unlock(&c->mu);
		cb(arg, code, body, len, &err);
		sh_free(body);
		ran++;
	}
	if (ran > 0)
		lib_lanes_flush(c);
	return ran;
}
