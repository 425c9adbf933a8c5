/*
 * libshoal (client/libshoal.c) against tiny fake routers.
 *
 * A fake router here is an nng REP socket on 127.0.0.1 served by one thread
 * that answers every Request with a canned Response chosen by its mode: it
 * is not a model of the real router, only a way to make the transport
 * misbehave on purpose (silence, garbage, wrong ids, errors, dying) so that
 * timeouts, failover between two endpoints, many requests in flight and
 * malformed answers can be checked.  The fake uses plain malloc (protobuf-c's
 * default allocator), never sh_malloc, so that allocation fault loops hit the
 * client only.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

#include "client/shoal.h"
#include "common/alloc.h"
#include "proto/shoal.pb-c.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_relay.h"

/* ------------------------------------------------------------------------ */
/* Fake routers                                                              */
/* ------------------------------------------------------------------------ */

enum fake_mode {
	FAKE_OK,          /* canned success for the request's operation */
	FAKE_SILENT,      /* receive and never answer */
	FAKE_GARBAGE,     /* bytes that are not a Response */
	FAKE_WRONG_ID,    /* success, but for another request_id */
	FAKE_WRONG_OP,    /* success carrying another operation's result */
	FAKE_ERROR,       /* STATUS_VALIDATION with a message */
	FAKE_UNAVAILABLE, /* STATUS_UNAVAILABLE for the first `unavailable` requests, then OK */
	FAKE_DIE,         /* close the socket on the first request (a router exit) */
	FAKE_THROTTLED,   /* STATUS_THROUGHPUT for the first `throttled` requests, then OK */
};

typedef struct fake {
	char url[64];
	nng_socket sock;
	pthread_t thread;
	enum fake_mode mode;
	atomic_int received;  /* requests (each member of a batch counts) */
	atomic_int batches;   /* Request batches (libshoal's pipelining) */
	atomic_int max_batch; /* the largest of them */
	atomic_int unavailable;
	atomic_int throttled;
	atomic_bool stop;
	bool running;
} fake;

static int next_port(void)
{
	static int port;
	if (port == 0)
		port = 20000 + (int)(getpid() % 20000);
	return port++;
}

/* A port nobody listens on: one the kernel just handed out and took back. */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Packs resp into a new nng message. */
static nng_msg *pack_response(const Shoal__Response *resp)
{
	size_t n = shoal__response__get_packed_size(resp);
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, n), 0);
	shoal__response__pack(resp, nng_msg_body(m));
	return m;
}

/* The canned answer to req in mode `mode` (NULL: send nothing). */
static nng_msg *answer(fake *f, const Shoal__Request *req)
{
	Shoal__Response resp = SHOAL__RESPONSE__INIT;
	resp.request_id = req->request_id;
	Shoal__GetItemResponse get = SHOAL__GET_ITEM_RESPONSE__INIT;
	Shoal__PutItemResponse put = SHOAL__PUT_ITEM_RESPONSE__INIT;
	Shoal__QueryResponse query = SHOAL__QUERY_RESPONSE__INIT;
	Shoal__Item item = SHOAL__ITEM__INIT;
	Shoal__Attribute attr = SHOAL__ATTRIBUTE__INIT;
	Shoal__Attribute *attrs[1] = {&attr};
	Shoal__AttributeValue val = SHOAL__ATTRIBUTE_VALUE__INIT;
	Shoal__Item *items[1] = {&item};
	attr.name.data = (uint8_t *)"pk";
	attr.name.len = 2;
	attr.value = &val;
	val.value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
	val.s.data = (uint8_t *)"a";
	val.s.len = 1;
	item.n_attrs = 1;
	item.attrs = attrs;

	enum fake_mode mode = f->mode;
	if (mode == FAKE_UNAVAILABLE) {
		if (atomic_fetch_sub(&f->unavailable, 1) > 0) {
			resp.status = SHOAL__STATUS__STATUS_UNAVAILABLE;
			resp.message = "Service unavailable: group 3 has no leader";
			return pack_response(&resp);
		}
		mode = FAKE_OK;
	}
	if (mode == FAKE_THROTTLED) {
		if (atomic_fetch_sub(&f->throttled, 1) > 0) {
			resp.status = SHOAL__STATUS__STATUS_THROUGHPUT;
			resp.message =
			    "The level of configured provisioned throughput for the table "
			    "was exceeded. Consider increasing your provisioning level with "
			    "the UpdateTable API.";
			return pack_response(&resp);
		}
		mode = FAKE_OK;
	}
	switch (mode) {
	case FAKE_SILENT:
	case FAKE_DIE:
		return NULL;
	case FAKE_GARBAGE: {
		nng_msg *m;
		ck_assert_int_eq(nng_msg_alloc(&m, 4), 0);
		memcpy(nng_msg_body(m), "\xff\xff\xff\xff", 4);
		return m;
	}
	case FAKE_ERROR:
		resp.status = SHOAL__STATUS__STATUS_VALIDATION;
		resp.message = "One or more parameter values were invalid: bad key";
		return pack_response(&resp);
	case FAKE_WRONG_ID:
		resp.request_id = req->request_id + 1000;
		break;
	default:
		break;
	}
	Shoal__Request__OpCase op = req->op_case;
	if (mode == FAKE_WRONG_OP)
		op = op == SHOAL__REQUEST__OP_GET_ITEM ? SHOAL__REQUEST__OP_PUT_ITEM
		                                       : SHOAL__REQUEST__OP_GET_ITEM;
	switch (op) {
	case SHOAL__REQUEST__OP_GET_ITEM:
		get.item = &item;
		resp.result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
		resp.get_item = &get;
		break;
	case SHOAL__REQUEST__OP_QUERY:
		query.n_items = 1;
		query.items = items;
		query.count = 1;
		query.scanned_count = 1;
		resp.result_case = SHOAL__RESPONSE__RESULT_QUERY;
		resp.query = &query;
		break;
	default:
		resp.result_case = SHOAL__RESPONSE__RESULT_PUT_ITEM;
		resp.put_item = &put;
		break;
	}
	return pack_response(&resp);
}

/* A Request batch: each member answered as `answer` would, in order, in one
 * Response (silent modes stay silent as a whole). */
static nng_msg *answer_batch(fake *f, const Shoal__Request *req)
{
	atomic_fetch_add(&f->batches, 1);
	atomic_fetch_add(&f->received, (int)req->n_batch);
	if ((int)req->n_batch > atomic_load(&f->max_batch))
		atomic_store(&f->max_batch, (int)req->n_batch);
	if (f->mode == FAKE_SILENT)
		return NULL;
	Shoal__Response whole = SHOAL__RESPONSE__INIT;
	whole.n_batch = req->n_batch;
	whole.batch = calloc(req->n_batch, sizeof(*whole.batch));
	nng_msg **parts = calloc(req->n_batch, sizeof(*parts));
	for (size_t i = 0; i < req->n_batch; i++) {
		Shoal__Request *one =
		    shoal__request__unpack(NULL, req->batch[i].len, req->batch[i].data);
		ck_assert_ptr_nonnull(one);
		parts[i] = answer(f, one);
		ck_assert_ptr_nonnull(parts[i]);
		whole.batch[i].data = nng_msg_body(parts[i]);
		whole.batch[i].len = nng_msg_len(parts[i]);
		shoal__request__free_unpacked(one, NULL);
	}
	nng_msg *m = pack_response(&whole);
	for (size_t i = 0; i < req->n_batch; i++)
		nng_msg_free(parts[i]);
	free(parts);
	free(whole.batch);
	return m;
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	while (!atomic_load(&f->stop)) {
		nng_msg *m;
		int rv = nng_recvmsg(f->sock, &m, 0);
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv != 0)
			break;
		if (f->mode == FAKE_DIE) {
			atomic_fetch_add(&f->received, 1);
			nng_msg_free(m);
			nng_close(f->sock);
			break;
		}
		Shoal__Request *req = shoal__request__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		if (req == NULL) {
			atomic_fetch_add(&f->received, 1);
			continue;
		}
		nng_msg *reply = req->n_batch > 0 ? answer_batch(f, req) : answer(f, req);
		if (req->n_batch == 0)
			atomic_fetch_add(&f->received, 1);
		shoal__request__free_unpacked(req, NULL);
		if (reply != NULL && nng_sendmsg(f->sock, reply, 0) != 0)
			nng_msg_free(reply);
	}
	return NULL;
}

/* Starts a fake router on f->url (a new port unless one is set). */
static void fake_start(fake *f, enum fake_mode mode)
{
	bool fresh = f->url[0] == '\0';
	if (fresh)
		snprintf(f->url, sizeof(f->url), "tcp://127.0.0.1:%d", next_port());
	f->mode = mode;
	atomic_store(&f->received, 0);
	atomic_store(&f->batches, 0);
	atomic_store(&f->max_batch, 0);
	atomic_store(&f->stop, false);
	ck_assert_int_eq(nng_rep0_open(&f->sock), 0);
	ck_assert_int_eq(nng_socket_set_ms(f->sock, NNG_OPT_RECVTIMEO, 20), 0);
	int rv = NNG_EADDRINUSE;
	/* A fresh fake moves on to the next port when one is taken (another
	 * test process); a restarted one waits for its own port to be free. */
	for (int64_t until = now_ms() + 5000; rv == NNG_EADDRINUSE && now_ms() < until;) {
		rv = nng_listen(f->sock, f->url, NULL, 0);
		if (rv == NNG_EADDRINUSE && fresh)
			snprintf(f->url, sizeof(f->url), "tcp://127.0.0.1:%d", next_port());
	}
	ck_assert_msg(rv == 0, "listen %s: %s", f->url, nng_strerror(rv));
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
	f->running = true;
}

static void fake_stop(fake *f)
{
	if (!f->running)
		return;
	atomic_store(&f->stop, true);
	pthread_join(f->thread, NULL);
	nng_close(f->sock); /* ECLOSED if FAKE_DIE closed it already */
	f->running = false;
}

/* Waits (with a deadline) until the client has n routers connected. */
static void wait_connected(shoal_client *c, unsigned n)
{
	int64_t until = now_ms() + 5000;
	while (shoal_connected(c) != n && now_ms() < until)
		nng_msleep(5);
	ck_assert_uint_eq(shoal_connected(c), n);
}

static shoal_client *client(const char *endpoints, int attempt, int deadline, int connect,
                            int retries)
{
	shoal_options o;
	shoal_options_init(&o);
	if (attempt)
		o.attempt_timeout_ms = attempt;
	if (deadline)
		o.deadline_ms = deadline;
	if (connect)
		o.connect_timeout_ms = connect;
	if (retries >= 0)
		o.retries = retries;
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	int rc = shoal_client_new(endpoints, &o, &c, msg);
	ck_assert_msg(rc == SHOAL_OK, "shoal_client_new: %s", msg);
	return c;
}

/* A packed GetItem Request with request_id id (malloc'd). */
static uint8_t *get_request(uint64_t id, size_t *len)
{
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__GetItemRequest get = SHOAL__GET_ITEM_REQUEST__INIT;
	get.table_name = "t1_table";
	get._table_name_case = SHOAL__GET_ITEM_REQUEST___TABLE_NAME_TABLE_NAME;
	req.request_id = id;
	req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	req.get_item = &get;
	*len = shoal__request__get_packed_size(&req);
	uint8_t *buf = malloc(*len);
	shoal__request__pack(&req, buf);
	return buf;
}

static const char *get_json = "{\"TableName\":\"t1_table\",\"Key\":{\"pk\":{\"S\":\"a\"}}}";

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_new_errors)
{
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(shoal_client_new("bogus://x", NULL, &c, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(msg, "Invalid endpoint: \"bogus://x\""));
	ck_assert_int_eq(shoal_client_new("tcp://127.0.0.1:1,,tcp://127.0.0.1:2", NULL, &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "empty endpoint"));
	shoal_options o;
	shoal_options_init(&o);
	o.deadline_ms = 0;
	ck_assert_int_eq(shoal_client_new(NULL, &o, &c, msg), SHOAL_E_VALIDATION);
	o.deadline_ms = 10;
	o.retries = -1;
	ck_assert_int_eq(shoal_client_new(NULL, &o, &c, msg), SHOAL_E_VALIDATION);

	ck_assert_int_eq(
	    shoal_client_new(" tcp://127.0.0.1:1 , tcp://127.0.0.1:2\n", NULL, &c, msg), SHOAL_OK);
	ck_assert_str_eq(shoal_endpoints(c), "tcp://127.0.0.1:1,tcp://127.0.0.1:2");
	shoal_client_free(c);
	ck_assert_int_eq(shoal_client_new(NULL, NULL, &c, msg), SHOAL_OK);
	ck_assert_str_eq(shoal_endpoints(c), SHOAL_DEFAULT_ENDPOINT);
	shoal_client_free(c);
	shoal_client_free(NULL);

	/* file://: the list is read from a file (deploy/cluster.sh's
	 * router.endpoint), one URL per line. */
	char path[PATH_MAX], url[PATH_MAX + 32];
	snprintf(path, sizeof(path) - 16, "%s/router.endpoint", tl_tmpdir("client-endpoint"));
	snprintf(url, sizeof(url), "file://%s", path);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("tcp://127.0.0.1:1\n\ntcp://127.0.0.1:2\n", f);
	fclose(f);
	ck_assert_int_eq(shoal_client_new(url, NULL, &c, msg), SHOAL_OK);
	ck_assert_str_eq(shoal_endpoints(c), "tcp://127.0.0.1:1,tcp://127.0.0.1:2");
	shoal_client_free(c);
	f = fopen(path, "w");
	fclose(f);
	ck_assert_int_eq(shoal_client_new(url, NULL, &c, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "is empty"));
	snprintf(url, sizeof(url), "file://%s.missing", path);
	ck_assert_int_eq(shoal_client_new(url, NULL, &c, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "cannot read"));
}
END_TEST

START_TEST(test_call_pb)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	size_t len;
	uint8_t *req = get_request(77, &len);
	uint8_t *resp;
	size_t resp_len;
	shoal_error err;
	ck_assert_int_eq(shoal_call_pb(c, req, len, &resp, &resp_len, &err), SHOAL_OK);
	ck_assert_int_eq(err.code, SHOAL_OK);
	ck_assert_int_eq(err.source, SHOAL_SRC_NONE);
	Shoal__Response *r = shoal__response__unpack(NULL, resp_len, resp);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->request_id, 77); /* the caller's id, sent as is */
	ck_assert_int_eq(r->result_case, SHOAL__RESPONSE__RESULT_GET_ITEM);
	shoal__response__free_unpacked(r, NULL);
	shoal_free(resp);
	free(req);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_call_json)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	char *out;
	shoal_error err;
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
	ck_assert_str_eq(out, "{\"Item\":{\"pk\":{\"S\":\"a\"}}}");
	shoal_free(out);
	ck_assert_int_eq(
	    shoal_call_json(c, "PutItem",
	                    "{\"TableName\":\"t1_table\",\"Item\":{\"pk\":{\"S\":\"a\"}}}", &out,
	                    &err),
	    SHOAL_OK);
	ck_assert_str_eq(out, "{}");
	shoal_free(out);
	ck_assert_int_eq(shoal_call_json(c, "Query", "{\"TableName\":\"t1_table\"}", &out, &err),
	                 SHOAL_OK);
	ck_assert_str_eq(out,
	                 "{\"Items\":[{\"pk\":{\"S\":\"a\"}}],\"Count\":1,\"ScannedCount\":1}");
	shoal_free(out);
	ck_assert_int_eq(atomic_load(&f.received), 3);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_request_errors)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	char *out = (char *)"x";
	shoal_error err;
	/* Malformed JSON: nothing is sent. */
	ck_assert_int_eq(shoal_call_json(c, "GetItem", "{\"TableName\":", &out, &err),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(err.source, SHOAL_SRC_REQUEST);
	ck_assert_str_eq(err.exception, "SerializationException");
	/* A JSON type that does not fit the model. */
	ck_assert_int_eq(shoal_call_json(c, "GetItem", "{\"TableName\":5}", &out, &err),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_str_eq(err.message, "NUMBER_VALUE cannot be converted to String");
	ck_assert_int_eq(shoal_call_json(c, "Frobnicate", "{}", &out, &err),
	                 SHOAL_E_UNKNOWN_OPERATION);
	ck_assert_str_eq(err.exception, "UnknownOperationException");
	/* A request that would not fit under the routers' 16 MiB limit with
	 * what libshoal appends (client token, signature) is refused here:
	 * the router's nng would drop it unanswered and the call time out. */
	size_t big_len = (16u << 20) - 16;
	uint8_t *big = calloc(1, big_len), *resp = NULL;
	size_t resp_len = 0;
	ck_assert_int_eq(shoal_call_pb(c, big, big_len, &resp, &resp_len, &err),
	                 SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(err.message, "exceeds the message size limit") != NULL, "%s",
	              err.message);
	free(big);
	ck_assert_int_eq(atomic_load(&f.received), 0);
	/* Async submits refuse the same way and never call back. */
	ck_assert_int_eq(shoal_submit_json(c, "GetItem", "[", (shoal_done_cb)abort, NULL, &err),
	                 SHOAL_E_SERIALIZATION);
	ck_assert_uint_eq(shoal_in_flight(c), 0);
	ck_assert_int_eq(shoal_poll(c, 100), 0);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_service_error)
{
	fake f = {0};
	fake_start(&f, FAKE_ERROR);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	char *out;
	shoal_error err;
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_VALIDATION);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(err.code, SHOAL_E_VALIDATION);
	ck_assert_int_eq(err.source, SHOAL_SRC_SERVICE);
	ck_assert_str_eq(err.exception, "ValidationException");
	ck_assert_str_eq(err.message, "One or more parameter values were invalid: bad key");
	/* The protobuf call returns the Response too. */
	size_t len;
	uint8_t *req = get_request(5, &len);
	uint8_t *resp;
	size_t resp_len;
	ck_assert_int_eq(shoal_call_pb(c, req, len, &resp, &resp_len, &err), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(resp);
	ck_assert_str_eq(err.exception, "ValidationException");
	Shoal__Response *r = shoal__response__unpack(NULL, resp_len, resp);
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_VALIDATION);
	shoal__response__free_unpacked(r, NULL);
	shoal_free(resp);
	free(req);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_connect_error)
{
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", closed_port()); /* nobody listens */
	shoal_client *c = client(url, 0, 10000, 200, -1);
	char *out;
	shoal_error err;
	int64_t t0 = now_ms();
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_UNAVAILABLE);
	int64_t took = now_ms() - t0;
	ck_assert_int_eq(err.source, SHOAL_SRC_CONNECT);
	ck_assert_str_eq(err.exception, "ServiceUnavailable");
	char want[128];
	snprintf(want, sizeof(want), "Could not connect to the endpoint URL: \"%s\"", url);
	ck_assert_str_eq(err.message, want);
	ck_assert_msg(took >= 150 && took < 5000, "took %lld ms", (long long)took);
	shoal_client_free(c);
}
END_TEST

START_TEST(test_timeout)
{
	fake f = {0};
	fake_start(&f, FAKE_SILENT);
	shoal_client *c = client(f.url, 100, 500, 0, -1);
	wait_connected(c, 1);
	char *out;
	shoal_error err;
	int64_t t0 = now_ms();
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_TIMEOUT);
	int64_t took = now_ms() - t0;
	ck_assert_int_eq(err.source, SHOAL_SRC_TIMEOUT);
	ck_assert_ptr_nonnull(strstr(err.message, "Read timeout on endpoint URL"));
	ck_assert_msg(took >= 450 && took < 5000, "took %lld ms", (long long)took);
	/* The attempt timeout resent the request: the router saw several. */
	ck_assert_int_ge(atomic_load(&f.received), 3);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

/* A hung router next to a healthy one: every call still succeeds, by the
 * attempt timeout's resend. */
START_TEST(test_failover_hung)
{
	fake a = {0}, b = {0};
	fake_start(&a, FAKE_SILENT);
	fake_start(&b, FAKE_OK);
	char eps[160];
	snprintf(eps, sizeof(eps), "%s,%s", a.url, b.url);
	shoal_client *c = client(eps, 100, 5000, 0, -1);
	wait_connected(c, 2);
	for (int i = 0; i < 6; i++) {
		char *out;
		shoal_error err;
		ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
		shoal_free(out);
	}
	ck_assert_int_ge(atomic_load(&a.received), 1); /* the hung one was tried */
	ck_assert_int_ge(atomic_load(&b.received), 6);
	shoal_client_free(c);
	fake_stop(&a);
	fake_stop(&b);
}
END_TEST

/* A connection to the router that stops carrying bytes without closing
 * (the router's machine died, or a cut network, while this kernel keeps
 * the connection): blocking calls time out, find no room to send, and once
 * that has gone on for WIRE_LANE_STALL_MS the client renews the connection
 * (proto/lanes.h, "Stalled connections") -- nng alone would keep it until
 * the kernel gave up, minutes later.  tests/lib/tl_relay.h freezes it. */
START_TEST(test_stuck_connection)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	int to = 0, from = tl_free_ports(1);
	ck_assert_int_eq(sscanf(f.url, "tcp://127.0.0.1:%d", &to), 1);
	tl_relay r;
	tl_relay_start(&r, from, to);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", from);
	shoal_client *c = client(url, 300, 1000, 200, -1);
	wait_connected(c, 1);
	char *out;
	shoal_error err;
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
	shoal_free(out);
	/* Requests bigger than the buffers on the way: the frozen connection
	 * soon has no room for another. */
	size_t big = 300 * 1024;
	char *put = malloc(big + 128);
	ck_assert_ptr_nonnull(put);
	int len =
	    snprintf(put, big + 128, "{\"TableName\":\"t1_table\",\"Item\":{\"pk\":{\"S\":\"");
	memset(put + len, 'x', big);
	snprintf(put + len + big, 128, "\"}}}");
	tl_relay_freeze(&r);
	int64_t t0 = now_ms(), until = t0 + 30000;
	int rc = -1, failed = 0;
	while (rc != SHOAL_OK && now_ms() < until) {
		rc = shoal_call_json(c, "PutItem", put, &out, &err);
		if (rc == SHOAL_OK)
			shoal_free(out);
		else
			failed++;
	}
	printf("test_stuck_connection: answered again %lld ms after the freeze, %d calls failed "
	       "before; %d connections relayed\n",
	       (long long)(now_ms() - t0), failed, atomic_load(&r.conns));
	fflush(stdout);
	ck_assert_msg(rc == SHOAL_OK,
	              "no call answered within 30 s of the connection freezing (%d failed; the "
	              "last: %s): the dead connection was kept",
	              failed, err.message);
	ck_assert_int_ge(failed, 1);
	ck_assert_int_ge(atomic_load(&r.conns), 2);
	free(put);
	shoal_client_free(c);
	tl_relay_stop(&r);
	fake_stop(&f);
}
END_TEST

/* A router that exits holding a request, then restarts: the request is
 * resent at once to the other router (well before the attempt timeout),
 * and the client reconnects to the restarted one. */
START_TEST(test_failover_restart)
{
	fake a = {0}, b = {0};
	fake_start(&a, FAKE_DIE);
	fake_start(&b, FAKE_OK);
	char eps[160];
	snprintf(eps, sizeof(eps), "%s,%s", a.url, b.url);
	shoal_client *c = client(eps, 20000, 30000, 0, -1);
	wait_connected(c, 2);
	int64_t t0 = now_ms();
	for (int i = 0; i < 4; i++) {
		char *out;
		shoal_error err;
		ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
		shoal_free(out);
	}
	ck_assert_msg(now_ms() - t0 < 10000, "failover waited for the attempt timeout");
	ck_assert_int_eq(atomic_load(&a.received), 1); /* a died holding one */
	wait_connected(c, 1);
	fake_stop(&a);
	fake_start(&a, FAKE_OK); /* restart on the same port */
	wait_connected(c, 2);
	for (int i = 0; i < 8; i++) {
		char *out;
		shoal_error err;
		ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
		shoal_free(out);
	}
	ck_assert_int_ge(atomic_load(&a.received), 1); /* served again after the restart */
	shoal_client_free(c);
	fake_stop(&a);
	fake_stop(&b);
}
END_TEST

START_TEST(test_malformed)
{
	enum fake_mode modes[] = {FAKE_GARBAGE, FAKE_WRONG_ID, FAKE_WRONG_OP};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		fake f = {0};
		fake_start(&f, modes[i]);
		shoal_client *c = client(f.url, 0, 0, 0, -1);
		char *out;
		shoal_error err;
		ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err),
		                 SHOAL_E_INTERNAL);
		ck_assert_ptr_null(out);
		ck_assert_int_eq(err.source, SHOAL_SRC_PROTOCOL);
		ck_assert_str_eq(err.exception, "InternalServerError");
		ck_assert_msg(strstr(err.message, "malformed response") != NULL, "mode %zu: %s", i,
		              err.message);
		if (modes[i] == FAKE_GARBAGE) {
			size_t len;
			uint8_t *req = get_request(1, &len), *resp = (uint8_t *)"x";
			size_t rl;
			ck_assert_int_eq(shoal_call_pb(c, req, len, &resp, &rl, &err),
			                 SHOAL_E_INTERNAL);
			ck_assert_ptr_null(resp);
			ck_assert_int_eq(err.source, SHOAL_SRC_PROTOCOL);
			free(req);
		}
		shoal_client_free(c);
		fake_stop(&f);
	}
}
END_TEST

START_TEST(test_retry_unavailable)
{
	fake f = {0};
	fake_start(&f, FAKE_UNAVAILABLE);
	atomic_store(&f.unavailable, 2);
	shoal_client *c = client(f.url, 0, 0, 0, 2);
	char *out;
	shoal_error err;
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
	shoal_free(out);
	ck_assert_int_eq(atomic_load(&f.received), 3);
	shoal_client_free(c);

	/* Without retries the router's answer is the result. */
	atomic_store(&f.unavailable, 1);
	c = client(f.url, 0, 0, 0, 0);
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_UNAVAILABLE);
	ck_assert_int_eq(err.source, SHOAL_SRC_SERVICE);
	ck_assert_str_eq(err.exception, "ServiceUnavailable");
	ck_assert_str_eq(err.message, "Service unavailable: group 3 has no leader");
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

/* A client for the throttling tests: retries of throttled answers with
 * these settings, none of ServiceUnavailable. */
static shoal_client *throttle_client(const char *url, int retries, int base_ms, int max_ms,
                                     int deadline_ms)
{
	shoal_options o;
	shoal_options_init(&o);
	o.retries = 0;
	o.throttle_retries = retries;
	o.throttle_base_ms = base_ms;
	o.throttle_max_ms = max_ms;
	if (deadline_ms > 0)
		o.deadline_ms = deadline_ms;
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(url, &o, &c, msg) == SHOAL_OK, "%s", msg);
	return c;
}

START_TEST(test_retry_throttled)
{
	fake f = {0};
	fake_start(&f, FAKE_THROTTLED);
	char *out;
	shoal_error err;

	/* The defaults are botocore's for DynamoDB. */
	shoal_options d;
	shoal_options_init(&d);
	ck_assert_int_eq(d.throttle_retries, 9);
	ck_assert_int_eq(d.throttle_base_ms, 50);
	ck_assert_int_eq(d.throttle_max_ms, 20000);

	/* Throttled three times, then served: four attempts, success. */
	atomic_store(&f.throttled, 3);
	shoal_client *c = throttle_client(f.url, 5, 1, 8, 0);
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
	ck_assert_str_eq(out, "{\"Item\":{\"pk\":{\"S\":\"a\"}}}");
	shoal_free(out);
	ck_assert_int_eq(atomic_load(&f.received), 4);

	/* Always throttled: 1 + throttle_retries attempts, then the throttled
	 * answer is the result, as the service gave it. */
	atomic_store(&f.received, 0);
	atomic_store(&f.throttled, 1000);
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_THROUGHPUT);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(atomic_load(&f.received), 6);
	ck_assert_int_eq(err.source, SHOAL_SRC_SERVICE);
	ck_assert_str_eq(err.exception, "ProvisionedThroughputExceededException");
	ck_assert_ptr_nonnull(strstr(err.message, "provisioned throughput"));
	/* The protobuf call retries the same way. */
	atomic_store(&f.received, 0);
	size_t len, rlen;
	uint8_t *req = get_request(7, &len), *resp;
	ck_assert_int_eq(shoal_call_pb(c, req, len, &resp, &rlen, &err), SHOAL_E_THROUGHPUT);
	ck_assert_ptr_nonnull(resp);
	shoal_free(resp);
	free(req);
	ck_assert_int_eq(atomic_load(&f.received), 6);
	shoal_client_free(c);

	/* throttle_retries 0: the raw behaviour, one attempt. */
	atomic_store(&f.received, 0);
	c = throttle_client(f.url, 0, 1, 1, 0);
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_THROUGHPUT);
	ck_assert_int_eq(atomic_load(&f.received), 1);
	shoal_client_free(c);

	/* Within the deadline: waits capped at 2 s against a 300 ms deadline
	 * end in the throttled answer (not a timeout), before the deadline,
	 * whatever the jitter drew. */
	atomic_store(&f.received, 0);
	c = throttle_client(f.url, 50, 2000, 2000, 300);
	int64_t t0 = now_ms();
	ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_E_THROUGHPUT);
	ck_assert_int_lt(now_ms() - t0, 300);
	ck_assert_int_ge(atomic_load(&f.received), 1);
	ck_assert_int_lt(atomic_load(&f.received), 50);
	shoal_client_free(c);

	/* Bad options. */
	shoal_options o;
	shoal_options_init(&o);
	char msg[SH_ERRMSG_SIZE];
	o.throttle_retries = -1;
	ck_assert_int_eq(shoal_client_new(f.url, &o, &c, msg), SHOAL_E_VALIDATION);
	shoal_options_init(&o);
	o.throttle_max_ms = o.throttle_base_ms - 1;
	ck_assert_int_eq(shoal_client_new(f.url, &o, &c, msg), SHOAL_E_VALIDATION);
	fake_stop(&f);
}
END_TEST

/* Asynchronous requests back off on timers: 40 requests each throttled once
 * with waits of up to 400 ms (200 on average) all finish in about one wait,
 * not in the 8 s that waiting for them one after another would take. */
typedef struct throttle_async {
	int done, ok;
} throttle_async;

static void on_throttle_done(void *arg, int code, const void *body, size_t len,
                             const shoal_error *err)
{
	throttle_async *t = arg;
	t->done++;
	t->ok += code == SHOAL_OK;
}

START_TEST(test_retry_throttled_async)
{
	fake f = {0};
	fake_start(&f, FAKE_THROTTLED);
	atomic_store(&f.throttled, 40);
	shoal_client *c = throttle_client(f.url, 3, 400, 400, 0);
	throttle_async t = {0};
	shoal_error err;
	int64_t t0 = now_ms();
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(
		    shoal_submit_json(c, "GetItem", get_json, on_throttle_done, &t, &err),
		    SHOAL_OK);
	int64_t until = t0 + 10000;
	while (t.done < 40 && now_ms() < until)
		shoal_poll(c, 100);
	int64_t took = now_ms() - t0;
	ck_assert_int_eq(t.done, 40);
	ck_assert_int_eq(t.ok, 40);
	ck_assert_int_eq(atomic_load(&f.received), 80);
	ck_assert_msg(took < 2500, "40 throttled requests took %lld ms", (long long)took);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

typedef struct async_state {
	shoal_client *c;
	int submitted, completed, failures;
	int total, window;
	bool seen[256];
	bool json;
} async_state;

static void submit_next(async_state *s);

static void on_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	async_state *s = arg;
	s->completed++;
	if (code != SHOAL_OK || err->code != code) {
		s->failures++;
	} else if (s->json) {
		if (strcmp(body, "{\"Item\":{\"pk\":{\"S\":\"a\"}}}") != 0 || len != strlen(body))
			s->failures++;
	} else {
		Shoal__Response *r = shoal__response__unpack(NULL, len, body);
		if (r == NULL || r->request_id >= 256 || s->seen[r->request_id])
			s->failures++;
		else
			s->seen[r->request_id] = true;
		if (r != NULL)
			shoal__response__free_unpacked(r, NULL);
	}
	submit_next(s); /* callbacks may submit */
}

static void submit_next(async_state *s)
{
	if (s->submitted == s->total)
		return;
	shoal_error err;
	int rc;
	if (s->json) {
		rc = shoal_submit_json(s->c, "GetItem", get_json, on_done, s, &err);
	} else {
		size_t len;
		uint8_t *req = get_request((uint64_t)s->submitted, &len);
		rc = shoal_submit_pb(s->c, req, len, on_done, s, &err);
		free(req); /* the library copied it */
	}
	ck_assert_int_eq(rc, SHOAL_OK);
	s->submitted++;
}

START_TEST(test_async_many)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	for (int json = 0; json <= 1; json++) {
		shoal_client *c = client(f.url, 0, 0, 0, -1);
		int batches = atomic_load(&f.batches);
		async_state s = {.c = c, .total = 256, .window = 64, .json = json};
		for (int i = 0; i < s.window; i++)
			submit_next(&s);
		ck_assert_uint_eq(shoal_in_flight(c), 64);
		int64_t until = now_ms() + 20000;
		while (s.completed < s.total && now_ms() < until) {
			int n = shoal_poll(c, 1000);
			ck_assert_int_ge(n, 0);
			/* Never more than the window in flight. */
			ck_assert_uint_le(shoal_in_flight(c), 64);
		}
		ck_assert_int_eq(s.completed, 256);
		ck_assert_int_eq(s.failures, 0);
		ck_assert_uint_eq(shoal_in_flight(c), 0);
		ck_assert_int_eq(shoal_poll(c, 1000), 0); /* nothing in flight: returns at once */
		/* 64 submitted at once, 4 lanes: most shared a message. */
		ck_assert_int_gt(atomic_load(&f.batches), batches);
		shoal_client_free(c);
	}
	ck_assert_int_eq(atomic_load(&f.received), 512);
	fake_stop(&f);
}
END_TEST

static void count_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	int *counts = arg; /* [0] completions, [1] successes, [2] timeouts */
	(void)body;
	(void)len;
	counts[0]++;
	counts[1] += code == SHOAL_OK && err->code == SHOAL_OK;
	counts[2] += code == SHOAL_E_TIMEOUT && err->source == SHOAL_SRC_TIMEOUT;
}

/* Pipelined requests and failure: a batch held by a hung router is resent
 * whole to the other one after the attempt timeout; with no router
 * answering, every request ends at its deadline. */
START_TEST(test_async_pipeline_failures)
{
	fake a = {0}, b = {0};
	fake_start(&a, FAKE_SILENT);
	fake_start(&b, FAKE_OK);
	char eps[160];
	snprintf(eps, sizeof(eps), "%s,%s", a.url, b.url);
	shoal_client *c = client(eps, 100, 5000, 0, -1);
	wait_connected(c, 2);
	int counts[3] = {0};
	shoal_error err;
	for (int i = 0; i < 64; i++) {
		size_t len;
		uint8_t *req = get_request((uint64_t)i, &len);
		ck_assert_int_eq(shoal_submit_pb(c, req, len, count_done, counts, &err), SHOAL_OK);
		free(req);
	}
	int64_t until = now_ms() + 10000;
	while (counts[0] < 64 && now_ms() < until)
		shoal_poll(c, 1000);
	ck_assert_int_eq(counts[1], 64);
	ck_assert_int_ge(atomic_load(&b.batches), 1);
	shoal_client_free(c);
	fake_stop(&b);

	c = client(a.url, 100, 500, 0, -1);
	wait_connected(c, 1);
	memset(counts, 0, sizeof(counts));
	int64_t t0 = now_ms();
	for (int i = 0; i < 20; i++) {
		size_t len;
		uint8_t *req = get_request((uint64_t)i, &len);
		ck_assert_int_eq(shoal_submit_pb(c, req, len, count_done, counts, &err), SHOAL_OK);
		free(req);
	}
	until = now_ms() + 10000;
	while (counts[0] < 20 && now_ms() < until)
		shoal_poll(c, 1000);
	ck_assert_int_eq(counts[2], 20);
	ck_assert_int_lt(now_ms() - t0, 5000);
	shoal_client_free(c);
	fake_stop(&a);
}
END_TEST

/* Counts a completion into the async_state. */
static void tally_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	async_state *s = arg;
	(void)body;
	(void)len;
	(void)err;
	s->completed++;
	s->failures += code != SHOAL_OK;
}

/* A callback that submits a burst: shoal_poll sends it when its callbacks
 * are done, as one message, not the first alone on the lane that just came
 * back and the rest behind it. */
static void burst_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	async_state *s = arg;
	tally_done(arg, code, body, len, err);
	if (s->completed == 1)
		for (int i = 0; i < 20; i++) {
			size_t n;
			uint8_t *req = get_request(100 + (uint64_t)i, &n);
			shoal_error e;
			ck_assert_int_eq(shoal_submit_pb(s->c, req, n, tally_done, s, &e),
			                 SHOAL_OK);
			free(req);
		}
}

/* A callback that submits a request and then polls for it (a nested
 * shoal_poll): the request is sent although the outer poll is corking. */
static void nested_done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	async_state *s = arg;
	tally_done(arg, code, body, len, err);
	size_t n;
	uint8_t *req = get_request(200, &n);
	shoal_error e;
	ck_assert_int_eq(shoal_submit_pb(s->c, req, n, tally_done, s, &e), SHOAL_OK);
	free(req);
	int64_t until = now_ms() + 10000;
	while (s->completed < 2 && now_ms() < until)
		shoal_poll(s->c, 1000);
}

/* Submits one request whose callback is `first`, polls until `want`
 * completions (10 s at most) and checks that they all succeeded. */
static void run_from_callback(fake *f, shoal_done_cb first, int want)
{
	shoal_client *c = client(f->url, 0, 0, 0, -1);
	async_state s = {.c = c};
	size_t n;
	uint8_t *req = get_request(1, &n);
	shoal_error err;
	ck_assert_int_eq(shoal_submit_pb(c, req, n, first, &s, &err), SHOAL_OK);
	free(req);
	int64_t until = now_ms() + 10000;
	while (s.completed < want && now_ms() < until)
		shoal_poll(c, 1000);
	ck_assert_int_eq(s.completed, want);
	ck_assert_int_eq(s.failures, 0);
	shoal_client_free(c);
}

START_TEST(test_async_nested_poll)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	run_from_callback(&f, nested_done, 2);
	fake_stop(&f);
}
END_TEST

START_TEST(test_async_burst_from_callback)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	run_from_callback(&f, burst_done, 21);
	ck_assert_int_eq(atomic_load(&f.max_batch), 20);
	fake_stop(&f);
}
END_TEST

/* Pipelining off: every asynchronous request is its own message. */
START_TEST(test_async_no_pipeline)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	shoal_options o;
	shoal_options_init(&o);
	o.pipeline = 0;
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(shoal_client_new(f.url, &o, &c, msg), SHOAL_OK);
	async_state s = {.c = c, .total = 128, .window = 32};
	for (int i = 0; i < s.window; i++)
		submit_next(&s);
	int64_t until = now_ms() + 20000;
	while (s.completed < s.total && now_ms() < until)
		shoal_poll(c, 1000);
	ck_assert_int_eq(s.completed, 128);
	ck_assert_int_eq(s.failures, 0);
	ck_assert_int_eq(atomic_load(&f.batches), 0);
	ck_assert_int_eq(atomic_load(&f.received), 128);
	shoal_client_free(c);
	/* Out of range. */
	o.pipeline = -1;
	ck_assert_int_eq(shoal_client_new(f.url, &o, &c, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "pipeline"));
	fake_stop(&f);
}
END_TEST

typedef struct blocking_arg {
	shoal_client *c;
	int ok;
} blocking_arg;

static void *blocking_thread(void *arg)
{
	blocking_arg *b = arg;
	for (int i = 0; i < 50; i++) {
		char *out;
		shoal_error err;
		if (shoal_call_json(b->c, "GetItem", get_json, &out, &err) == SHOAL_OK)
			b->ok++;
		shoal_free(out);
	}
	return NULL;
}

/* Blocking calls from several threads share one client. */
START_TEST(test_threads)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	pthread_t t[4];
	blocking_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (blocking_arg){.c = c};
		ck_assert_int_eq(pthread_create(&t[i], NULL, blocking_thread, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(args[i].ok, 50);
	}
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

/* Freeing a client with requests in flight abandons them: no callback, no
 * leak (the sanitizer build checks the latter). */
START_TEST(test_free_in_flight)
{
	fake f = {0};
	fake_start(&f, FAKE_SILENT);
	shoal_client *c = client(f.url, 0, 0, 0, -1);
	shoal_error err;
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(
		    shoal_submit_json(c, "GetItem", get_json, (shoal_done_cb)abort, NULL, &err),
		    SHOAL_OK);
	int64_t until = now_ms() + 5000;
	while (atomic_load(&f.received) == 0 && now_ms() < until)
		nng_msleep(5);
	ck_assert_uint_eq(shoal_in_flight(c), 8);
	ck_assert_int_eq(shoal_poll(c, 0), 0);
	shoal_client_free(c);
	fake_stop(&f);
}
END_TEST

/* Allocation failures anywhere in the client: the right error, no leak.  A
 * first call without faults warms the JSON walker's per-descriptor facts
 * (built once per message type; failing to build them only means computing
 * them each time), so that every counted allocation is the call's own. */
START_TEST(test_alloc_faults)
{
	fake f = {0};
	fake_start(&f, FAKE_OK);
	{
		shoal_client *c = NULL;
		char msg[SH_ERRMSG_SIZE];
		shoal_options o;
		shoal_options_init(&o);
		o.retries = 0;
		ck_assert_int_eq(shoal_client_new(f.url, &o, &c, msg), SHOAL_OK);
		wait_connected(c, 1);
		char *out = NULL;
		shoal_error err;
		ck_assert_int_eq(shoal_call_json(c, "GetItem", get_json, &out, &err), SHOAL_OK);
		shoal_free(out);
		shoal_client_free(c);
	}
	int done = 0;
	for (long n = 1; n < 500 && !done; n++) {
		shoal_client *c = NULL;
		char msg[SH_ERRMSG_SIZE];
		shoal_options o;
		shoal_options_init(&o);
		o.retries = 0; /* no decoding on nng's threads */
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		int rc = shoal_client_new(f.url, &o, &c, msg);
		char *out = NULL;
		shoal_error err;
		if (rc == SHOAL_OK) {
			/* nng 1.5.2 leaks a pipe when a socket is closed while its
			 * connection is still being negotiated: let it connect. */
			wait_connected(c, 1);
			rc = shoal_call_json(c, "GetItem", get_json, &out, &err);
		}
		long fired = sh_fault_fired(SH_FAULT_ALLOC);
		sh_fault_reset();
		if (fired == 0) {
			ck_assert_int_eq(rc, SHOAL_OK);
			ck_assert_str_eq(out, "{\"Item\":{\"pk\":{\"S\":\"a\"}}}");
			done = 1;
		} else {
			ck_assert_msg(rc == SHOAL_E_NOMEM, "n=%ld: rc %s", n, shoal_err_name(rc));
			ck_assert_ptr_null(out);
		}
		shoal_free(out);
		shoal_client_free(c);
	}
	ck_assert_int_eq(done, 1);
	fake_stop(&f);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("client");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_new_errors);
	tcase_add_test(tc, test_call_pb);
	tcase_add_test(tc, test_call_json);
	tcase_add_test(tc, test_request_errors);
	tcase_add_test(tc, test_service_error);
	tcase_add_test(tc, test_connect_error);
	tcase_add_test(tc, test_timeout);
	tcase_add_test(tc, test_failover_hung);
	tcase_add_test(tc, test_failover_restart);
	tcase_add_test(tc, test_stuck_connection);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_retry_unavailable);
	tcase_add_test(tc, test_retry_throttled);
	tcase_add_test(tc, test_retry_throttled_async);
	tcase_add_test(tc, test_async_many);
	tcase_add_test(tc, test_async_no_pipeline);
	tcase_add_test(tc, test_async_pipeline_failures);
	tcase_add_test(tc, test_async_burst_from_callback);
	tcase_add_test(tc, test_async_nested_poll);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_free_in_flight);
	tcase_add_test(tc, test_alloc_faults);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(client_suite)
