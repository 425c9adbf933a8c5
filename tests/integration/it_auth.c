/*
 * it_auth -- client authentication and per-table authorization on a real
 * cluster (issue 15): the native port refuses unsigned, badly signed and
 * tampered messages and they change nothing; `shoal` signs with the AWS
 * CLI's environment variables and profiles; a read-only key is denied
 * PutItem and allowed GetItem on both the native and the HTTP port (the
 * HTTP side with the real AWS CLI); a router without credentials says so in
 * its log and in `shoal status`.
 *
 * One 1-node cluster started by deploy/cluster.sh --credentials, plus two
 * routers this test starts on the cluster's config (one with --http and
 * the same credentials, one with none), killed by PID.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "client/shoal.h"
#include "proto/shoal.pb-c.h"
#include "proto/wire_auth.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define T_ORDERS "Orders"
#define T_OTHER  "Other"

static tl_cluster C;
static char creds_path[1200];
static char extra_dir[1100];
static int extra_port;    /* router 2: native extra_port, HTTP +1, metrics +3; router 3: +2, +4 */
static char open_url[64]; /* router 3: no credentials, native extra_port + 2 */
static char http_url[64];

static const char CREDS[] = "# the first key is the one deploy/cluster.sh signs with\n"
                            "ADMIN admin/secret\n"
                            "RO ro-secret read:" T_ORDERS "\n"
                            "RW rw-secret write:" T_ORDERS " account:123456789012\n";

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts shoal-router `name` with extra arguments; waits for "ready". */
static void start_router(const char *name, const char *args)
{
	char log[1200];
	snprintf(log, sizeof(log), "%s/%s.log", extra_dir, name);
	int rc = tl_sh("'%s/shoal-router' --config '%s/cluster.ini' %s >'%s' 2>&1 </dev/null & "
	               "echo $! >'%s/%s.pid'",
	               C.bin, C.dir, args, log, extra_dir, name);
	ck_assert_int_eq(rc, 0);
	int64_t until = now_ms() + 20000;
	for (;;) {
		char *text = tl_read_file(log);
		bool ready = text != NULL && strstr(text, "ready\n") != NULL;
		free(text);
		if (ready)
			return;
		ck_assert_msg(now_ms() < until, "router %s did not start; see %s", name, log);
		usleep(20000);
	}
}

static void stop_router(const char *name)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s.pid", extra_dir, name);
	char *text = tl_read_file(path);
	long pid = text != NULL ? atol(text) : 0;
	free(text);
	if (pid > 1)
		kill((pid_t)pid, SIGKILL);
}

static void cluster_up(void)
{
	const char *dir = tl_tmpdir("auth");
	snprintf(extra_dir, sizeof(extra_dir), "%s", dir);
	snprintf(creds_path, sizeof(creds_path), "%s/creds", extra_dir);
	FILE *f = fopen(creds_path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(CREDS, f);
	fclose(f);
	chmod(creds_path, 0644); /* the router warns about this */
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	char opts[1400];
	snprintf(opts, sizeof(opts), "--credentials '%s'", creds_path);
	if (!tl_cluster_up_opts(&C, 1, 1, 2, opts)) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
	extra_port = tl_free_ports(5);
	snprintf(http_url, sizeof(http_url), "http://127.0.0.1:%d", extra_port + 1);
	snprintf(open_url, sizeof(open_url), "tcp://127.0.0.1:%d", extra_port + 2);
	char args[1600];
	snprintf(args, sizeof(args),
	         "--listen tcp://127.0.0.1:%d --http 127.0.0.1:%d --credentials '%s' "
	         "--metrics 127.0.0.1:%d",
	         extra_port, extra_port + 1, creds_path, extra_port + 3);
	start_router("signed", args);
	snprintf(args, sizeof(args), "--listen %s --metrics 127.0.0.1:%d", open_url,
	         extra_port + 4);
	start_router("open", args);
	/* Two tables, made by the unrestricted key (cluster.sh's own). */
	setenv("AWS_ACCESS_KEY_ID", "ADMIN", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "admin/secret", 1);
	const char *tables[] = {T_ORDERS, T_OTHER};
	for (int i = 0; i < 2; i++) {
		char *err = NULL;
		int rc = tl_shoal(&C, NULL, &err,
		                  "create-table --table-name %s"
		                  " --attribute-definitions AttributeName=pk,AttributeType=S"
		                  " --key-schema AttributeName=pk,KeyType=HASH"
		                  " --billing-mode PAY_PER_REQUEST",
		                  tables[i]);
		ck_assert_msg(rc == 0, "create-table %s: %s", tables[i], err ? err : "");
		free(err);
	}
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

static void cluster_down(void)
{
	stop_router("signed");
	stop_router("open");
	tl_cluster_down(&C);
}

/* A client of the cluster's router signing with key/secret (NULL: none). */
static shoal_client *client(const char *url, const char *key, const char *secret, int pipeline)
{
	shoal_options o;
	shoal_options_init(&o);
	o.pipeline = pipeline;
	o.retries = 0;
	o.deadline_ms = 10000;
	o.access_key_id = key;
	o.secret_access_key = secret;
	o.no_sign = key == NULL;
	shoal_client *c = NULL;
	char m[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(url != NULL ? url : C.endpoint, &o, &c, m) == SHOAL_OK, "%s",
	              m);
	return c;
}

static int call(shoal_client *c, const char *op, const char *json, shoal_error *e)
{
	char *out = NULL;
	memset(e, 0, sizeof(*e));
	int rc = shoal_call_json(c, op, json, &out, e);
	shoal_free(out);
	return rc;
}

/* Whether the admin key sees item pk in table t. */
static bool item_exists(const char *t, const char *pk)
{
	shoal_client *c = client(NULL, "ADMIN", "admin/secret", 0);
	char req[256], *out = NULL;
	snprintf(req, sizeof(req), "{\"TableName\":\"%s\",\"Key\":{\"pk\":{\"S\":\"%s\"}}}", t, pk);
	shoal_error e;
	int rc = shoal_call_json(c, "GetItem", req, &out, &e);
	ck_assert_msg(rc == SHOAL_OK, "admin GetItem: %s", e.message);
	bool found = strstr(out, "\"Item\"") != NULL;
	shoal_free(out);
	shoal_client_free(c);
	return found;
}

#define PUT(pk) "{\"TableName\":\"" T_ORDERS "\",\"Item\":{\"pk\":{\"S\":\"" pk "\"}}}"

/* A raw exchange on the native port: msg's bytes, the Response's status
 * and message back. */
static int raw_call(const uint8_t *msg, size_t len, char *text, size_t cap)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	ck_assert_int_eq(tl_cluster_dial(&C, s, C.endpoint), 0);
	ck_assert_int_eq(nng_send(s, (void *)msg, len, 0), 0);
	void *ans = NULL;
	size_t alen = 0;
	ck_assert_int_eq(nng_recv(s, &ans, &alen, NNG_FLAG_ALLOC), 0);
	Shoal__Response *r = shoal__response__unpack(NULL, alen, ans);
	ck_assert_ptr_nonnull(r);
	int st = (int)r->status;
	snprintf(text, cap, "%s", r->message != NULL ? r->message : "");
	shoal__response__free_unpacked(r, NULL);
	nng_free(ans, alen);
	nng_close(s);
	return st;
}

/* The packed PutItem of pk, signed by key/secret at time t when key. */
static size_t signed_put(uint8_t *buf, size_t cap, const char *pk, const char *key,
                         const char *secret, int64_t t)
{
	Shoal__Request req = SHOAL__REQUEST__INIT;
	Shoal__PutItemRequest put = SHOAL__PUT_ITEM_REQUEST__INIT;
	Shoal__Item item = SHOAL__ITEM__INIT;
	Shoal__Attribute a = SHOAL__ATTRIBUTE__INIT, *ap = &a;
	Shoal__AttributeValue v = SHOAL__ATTRIBUTE_VALUE__INIT;
	v.value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
	v.s.data = (uint8_t *)pk;
	v.s.len = strlen(pk);
	a.name.data = (uint8_t *)"pk";
	a.name.len = 2;
	a.value = &v;
	item.n_attrs = 1;
	item.attrs = &ap;
	put._table_name_case = SHOAL__PUT_ITEM_REQUEST___TABLE_NAME_TABLE_NAME;
	put.table_name = T_ORDERS;
	put.item = &item;
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	req.put_item = &put;
	size_t n = shoal__request__get_packed_size(&req);
	ck_assert(n + 400 < cap);
	shoal__request__pack(&req, buf);
	if (key == NULL)
		return n;
	char date[17];
	wire_auth_amz_date(t, date);
	char d8[9];
	snprintf(d8, sizeof(d8), "%.8s", date);
	uint8_t k[32], sig[32];
	wire_auth_signing_key(secret, d8, "us-east-1", "dynamodb", k);
	wire_auth_signature(k, date, "us-east-1", "dynamodb", buf, n, sig);
	size_t m = wire_auth_encode(buf + n, cap - n, key, date, "us-east-1", "dynamodb", sig);
	ck_assert(m > 0);
	return n + m;
}

/* Native: no signature, a wrong secret, an unknown key, a tampered byte,
 * an expired date -- each refused with SigV4's exception, and nothing
 * written; the same message correctly signed is applied. */
START_TEST(test_native_refused)
{
	shoal_error e;
	shoal_client *c = client(NULL, NULL, NULL, 0);
	ck_assert_int_eq(call(c, "PutItem", PUT("n1"), &e), SHOAL_E_AUTH_MISSING);
	ck_assert_str_eq(e.exception, "MissingAuthenticationTokenException");
	ck_assert_str_eq(e.message, "Request is missing Authentication Token");
	shoal_client_free(c);

	c = client(NULL, "ADMIN", "wrong", 0);
	ck_assert_int_eq(call(c, "PutItem", PUT("n1"), &e), SHOAL_E_AUTH_SIGNATURE);
	ck_assert_str_eq(e.exception, "InvalidSignatureException");
	ck_assert_msg(strstr(e.message, "does not match the signature you provided") != NULL, "%s",
	              e.message);
	shoal_client_free(c);

	c = client(NULL, "NOBODY", "admin/secret", 0);
	ck_assert_int_eq(call(c, "PutItem", PUT("n1"), &e), SHOAL_E_AUTH_UNRECOGNIZED);
	ck_assert_str_eq(e.exception, "UnrecognizedClientException");
	ck_assert_str_eq(e.message, "The security token included in the request is invalid.");
	shoal_client_free(c);

	/* Raw messages: one byte of a signed request changed (the key "n2"
	 * becomes "n3"), and a signature 20 minutes old. */
	uint8_t buf[1024];
	char text[SH_ERRMSG_SIZE];
	size_t n = signed_put(buf, sizeof(buf), "n2", "ADMIN", "admin/secret", time(NULL));
	uint8_t *p = memmem(buf, n, "n2", 2);
	ck_assert_ptr_nonnull(p);
	p[1] = '3';
	ck_assert_int_eq(raw_call(buf, n, text, sizeof(text)),
	                 SHOAL__STATUS__STATUS_AUTH_SIGNATURE);
	n = signed_put(buf, sizeof(buf), "n2", "ADMIN", "admin/secret", time(NULL) - 20 * 60);
	ck_assert_int_eq(raw_call(buf, n, text, sizeof(text)),
	                 SHOAL__STATUS__STATUS_AUTH_SIGNATURE);
	ck_assert_msg(strstr(text, "Signature expired") != NULL, "%s", text);
	n = signed_put(buf, sizeof(buf), "n2", NULL, NULL, 0);
	ck_assert_int_eq(raw_call(buf, n, text, sizeof(text)), SHOAL__STATUS__STATUS_AUTH_MISSING);

	ck_assert(!item_exists(T_ORDERS, "n1"));
	ck_assert(!item_exists(T_ORDERS, "n2"));
	ck_assert(!item_exists(T_ORDERS, "n3"));

	/* The same message signed right is applied. */
	n = signed_put(buf, sizeof(buf), "n2", "ADMIN", "admin/secret", time(NULL));
	ck_assert_int_eq(raw_call(buf, n, text, sizeof(text)), SHOAL__STATUS__STATUS_OK);
	ck_assert(item_exists(T_ORDERS, "n2"));
}
END_TEST

/* Batches (libshoal's pipelining): signed once as a whole and applied; the
 * same unsigned are refused member by member. */
typedef struct tally {
	int ok, missing, other;
} tally;

static void count(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	(void)body;
	(void)len;
	(void)err;
	tally *t = arg;
	if (code == SHOAL_OK)
		t->ok++;
	else if (code == SHOAL_E_AUTH_MISSING)
		t->missing++;
	else
		t->other++;
}

static tally burst(shoal_client *c, const char *prefix, int n)
{
	tally t = {0};
	for (int i = 0; i < n; i++) {
		char req[200];
		snprintf(req, sizeof(req),
		         "{\"TableName\":\"" T_ORDERS "\",\"Item\":{\"pk\":{\"S\":\"%s%d\"}}}",
		         prefix, i);
		shoal_error e;
		ck_assert_int_eq(shoal_submit_json(c, "PutItem", req, count, &t, &e), SHOAL_OK);
	}
	int64_t until = now_ms() + 20000;
	while (shoal_in_flight(c) > 0 && now_ms() < until)
		shoal_poll(c, 100);
	ck_assert_int_eq(shoal_in_flight(c), 0);
	return t;
}

START_TEST(test_native_batches)
{
	shoal_client *c = client(NULL, NULL, NULL, 1);
	tally t = burst(c, "u", 40);
	ck_assert_msg(t.missing == 40, "unsigned: %d refused, %d ok, %d other", t.missing, t.ok,
	              t.other);
	shoal_client_free(c);
	ck_assert(!item_exists(T_ORDERS, "u0"));
	ck_assert(!item_exists(T_ORDERS, "u39"));

	c = client(NULL, "RW", "rw-secret", 1);
	t = burst(c, "s", 40);
	ck_assert_msg(t.ok == 40, "signed: %d ok, %d refused, %d other", t.ok, t.missing, t.other);
	shoal_client_free(c);
	ck_assert(item_exists(T_ORDERS, "s39"));
}
END_TEST

/* Per-table grants on the native port: RO reads Orders and nothing else,
 * RW writes Orders only; a batch touching a table the key may not write is
 * refused whole; ClusterStatus needs admin. */
START_TEST(test_native_grants)
{
	shoal_error e;
	shoal_client *rw = client(NULL, "RW", "rw-secret", 0);
	ck_assert_int_eq(call(rw, "PutItem", PUT("g1"), &e), SHOAL_OK);
	ck_assert_int_eq(call(rw, "PutItem",
	                      "{\"TableName\":\"" T_OTHER "\",\"Item\":{\"pk\":{\"S\":\"g1\"}}}",
	                      &e),
	                 SHOAL_E_ACCESS_DENIED);
	ck_assert_str_eq(e.message, "User: arn:aws:iam::123456789012:user/RW is not authorized to "
	                            "perform: dynamodb:PutItem on resource: arn:aws:dynamodb:"
	                            "us-east-1:123456789012:table/" T_OTHER
	                            " because no identity-based policy allows the dynamodb:PutItem "
	                            "action");
	ck_assert_int_eq(call(rw, "BatchWriteItem",
	                      "{\"RequestItems\":{\"" T_ORDERS
	                      "\":[{\"PutRequest\":{\"Item\":{\"pk\":{\"S\":"
	                      "\"g2\"}}}}],\"" T_OTHER
	                      "\":[{\"PutRequest\":{\"Item\":{\"pk\":{\"S\":\"g2\"}}}}]}}",
	                      &e),
	                 SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(e.message, "dynamodb:BatchWriteItem on resource") != NULL, "%s",
	              e.message);
	ck_assert_int_eq(
	    call(rw, "TransactWriteItems",
	         "{\"TransactItems\":[{\"Put\":{\"TableName\":\"" T_ORDERS
	         "\",\"Item\":{\"pk\":{\"S\":\"g3\"}}}},{\"Delete\":{\"TableName\":\"" T_OTHER
	         "\",\"Key\":{\"pk\":{\"S\":\"g3\"}}}}]}",
	         &e),
	    SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(e.message, "dynamodb:DeleteItem on resource") != NULL, "%s",
	              e.message);
	ck_assert_int_eq(call(rw, "ClusterStatus", "{}", &e), SHOAL_E_ACCESS_DENIED);
	shoal_client_free(rw);
	ck_assert(!item_exists(T_ORDERS, "g2"));
	ck_assert(!item_exists(T_OTHER, "g2"));
	ck_assert(!item_exists(T_ORDERS, "g3"));

	shoal_client *ro = client(NULL, "RO", "ro-secret", 0);
	ck_assert_int_eq(call(ro, "PutItem", PUT("g4"), &e), SHOAL_E_ACCESS_DENIED);
	ck_assert_str_eq(e.exception, "AccessDeniedException");
	ck_assert_msg(strstr(e.message,
	                     "user/RO is not authorized to perform: dynamodb:PutItem on "
	                     "resource: arn:aws:dynamodb:us-east-1:000000000000:table/" T_ORDERS) !=
	                  NULL,
	              "%s", e.message);
	ck_assert_int_eq(call(ro, "GetItem",
	                      "{\"TableName\":\"" T_ORDERS "\",\"Key\":{\"pk\":{\"S\":\"g1\"}}}",
	                      &e),
	                 SHOAL_OK);
	ck_assert_int_eq(call(ro, "GetItem",
	                      "{\"TableName\":\"" T_OTHER "\",\"Key\":{\"pk\":{\"S\":\"g1\"}}}",
	                      &e),
	                 SHOAL_E_ACCESS_DENIED);
	ck_assert_int_eq(call(ro, "ListTables", "{}", &e), SHOAL_E_ACCESS_DENIED);
	shoal_client_free(ro);
	ck_assert(!item_exists(T_ORDERS, "g4"));
}
END_TEST

/* `shoal` takes credentials as the AWS CLI: the environment, a profile of
 * the shared credentials file (--profile or AWS_PROFILE); without any it is
 * refused. */
START_TEST(test_cli_credentials)
{
	char *out = NULL, *err = NULL;
	int rc = tl_shoal(&C, NULL, &err,
	                  "put-item --table-name " T_ORDERS " --item '{\"pk\":{\"S\":\"c1\"}}'");
	ck_assert_msg(rc == 254 &&
	                  strstr(err, "An error occurred (MissingAuthenticationToken"
	                              "Exception) when calling the PutItem operation") != NULL,
	              "rc %d: %s", rc, err);
	free(err);
	ck_assert(!item_exists(T_ORDERS, "c1"));

	setenv("AWS_ACCESS_KEY_ID", "RW", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "rw-secret", 1);
	rc = tl_shoal(&C, NULL, &err,
	              "put-item --table-name " T_ORDERS " --item '{\"pk\":{\"S\":\"c1\"}}'");
	ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
	free(err);
	ck_assert(item_exists(T_ORDERS, "c1"));
	setenv("AWS_SECRET_ACCESS_KEY", "not-it", 1);
	rc = tl_shoal(&C, NULL, &err,
	              "get-item --table-name " T_ORDERS " --key '{\"pk\":{\"S\":\"c1\"}}'");
	ck_assert_msg(rc == 254 && strstr(err, "InvalidSignatureException") != NULL, "rc %d: %s",
	              rc, err);
	free(err);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");

	/* A profile file: [ro] is the read-only key. */
	char prof[1200];
	snprintf(prof, sizeof(prof), "%s/aws-credentials", extra_dir);
	FILE *f = fopen(prof, "w");
	ck_assert_ptr_nonnull(f);
	fputs("[default]\naws_access_key_id = NOBODY\naws_secret_access_key = x\n\n"
	      "[ro]\naws_access_key_id = RO\naws_secret_access_key = ro-secret\n",
	      f);
	fclose(f);
	setenv("AWS_SHARED_CREDENTIALS_FILE", prof, 1);
	rc = tl_shoal(&C, &out, &err,
	              "--profile ro get-item --table-name " T_ORDERS
	              " --key '{\"pk\":{\"S\":\"c1\"}}'");
	ck_assert_msg(rc == 0 && strstr(out, "\"c1\"") != NULL, "rc %d: %s", rc, err);
	free(out);
	free(err);
	setenv("AWS_PROFILE", "ro", 1);
	rc = tl_shoal(&C, NULL, &err,
	              "put-item --table-name " T_ORDERS " --item '{\"pk\":{\"S\":\"c2\"}}'");
	ck_assert_msg(rc == 254 && strstr(err, "AccessDeniedException") != NULL, "rc %d: %s", rc,
	              err);
	free(err);
	setenv("AWS_PROFILE", "missing", 1);
	rc = tl_shoal(&C, NULL, &err, "list-tables");
	ck_assert_msg(rc != 0 && strstr(err, "The config profile (missing) could not be found"),
	              "rc %d: %s", rc, err);
	free(err);
	unsetenv("AWS_PROFILE");
	rc = tl_shoal(&C, NULL, &err, "list-tables"); /* [default]: an unknown key */
	ck_assert_msg(rc == 254 && strstr(err, "UnrecognizedClientException"), "rc %d: %s", rc,
	              err);
	free(err);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	ck_assert(!item_exists(T_ORDERS, "c2"));
}
END_TEST

/* The HTTP port enforces the same grants (the AWS CLI, SigV4). */
START_TEST(test_http_grants)
{
	ck_assert_msg(access("/usr/bin/aws", X_OK) == 0,
	              "awscli is missing (deploy/install-deps.sh installs it)");
	char out[1200], err[1200];
	snprintf(out, sizeof(out), "%s/aws.out", extra_dir);
	snprintf(err, sizeof(err), "%s/aws.err", extra_dir);
#define AWS_RO                                                                                     \
	"AWS_ACCESS_KEY_ID=RO AWS_SECRET_ACCESS_KEY=ro-secret AWS_DEFAULT_REGION=eu-west-1 "       \
	"/usr/bin/aws --endpoint-url %s dynamodb "
	int rc = tl_sh(AWS_RO "put-item --table-name " T_ORDERS
	                      " --item '{\"pk\":{\"S\":\"h1\"}}' >'%s' 2>'%s'",
	               http_url, out, err);
	char *e = tl_read_file(err);
	ck_assert_msg(rc != 0 && e != NULL &&
	                  strstr(e, "An error occurred (AccessDeniedException) when calling the "
	                            "PutItem operation") != NULL &&
	                  strstr(e,
	                         "User: arn:aws:iam::000000000000:user/RO is not authorized to "
	                         "perform: dynamodb:PutItem on resource: "
	                         "arn:aws:dynamodb:eu-west-1:000000000000:table/" T_ORDERS) != NULL,
	              "rc %d: %s", rc, e);
	free(e);
	ck_assert(!item_exists(T_ORDERS, "h1"));
	rc = tl_sh(AWS_RO "get-item --table-name " T_ORDERS
	                  " --key '{\"pk\":{\"S\":\"g1\"}}' --output json >'%s' 2>'%s'",
	           http_url, out, err);
	char *o = tl_read_file(out);
	ck_assert_msg(rc == 0 && o != NULL && strstr(o, "\"g1\"") != NULL, "rc %d: %s", rc, o);
	free(o);
#undef AWS_RO
}
END_TEST

/* A router without credentials says so: in its log, and in `shoal status`;
 * a signed client still works against it (the signature is ignored). */
START_TEST(test_open_router_warns)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/open.log", extra_dir);
	char *log = tl_read_file(path);
	ck_assert_msg(log != NULL && strstr(log, "WARNING: NO AUTHENTICATION") != NULL, "%s", log);
	free(log);
	snprintf(path, sizeof(path), "%s/signed.log", extra_dir);
	log = tl_read_file(path);
	ck_assert_msg(log != NULL && strstr(log, "is readable by its group or others") != NULL &&
	                  strstr(log, "NO AUTHENTICATION") == NULL,
	              "%s", log);
	free(log);
	char *out = NULL;
	int rc = tl_sh("'%s/shoal' --endpoint %s status >'%s/status.out' 2>&1", C.bin, open_url,
	               extra_dir);
	snprintf(path, sizeof(path), "%s/status.out", extra_dir);
	out = tl_read_file(path);
	ck_assert_msg(rc == 0 && strstr(out, "Router: WARNING: NO AUTHENTICATION") != NULL, "%s",
	              out);
	free(out);
	shoal_client *c = client(open_url, "RO", "ro-secret", 1);
	tally t = burst(c, "open", 10); /* signed batches, an open router: accepted */
	ck_assert_msg(t.ok == 10, "%d ok, %d refused, %d other", t.ok, t.missing, t.other);
	shoal_client_free(c);
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("auth");
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_native_refused);
	tcase_add_test(tc, test_native_batches);
	tcase_add_test(tc, test_native_grants);
	tcase_add_test(tc, test_cli_credentials);
	tcase_add_test(tc, test_http_grants);
	tcase_add_test(tc, test_open_router_warns);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(auth_suite)
