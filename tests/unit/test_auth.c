/*
 * Authentication and authorization without a cluster: the credentials
 * file's grants (router/sigv4.c), the native signature (proto/wire_auth.h)
 * verified and cut off by router/auth.c's rt_auth_native, the
 * authorization matrix of rt_auth_authorize, the derived-key cache, and
 * libshoal's credential lookup (client/libshoal_auth.c) from options, the
 * environment and AWS profile files.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client/libshoal_int.h"
#include "common/alloc.h"
#include "proto/wire_auth.h"
#include "router/http.h"
#include "router/router.h"
#include "tests/lib/testlib.h"

static char dir[1024];

static const char *write_file(const char *name, const char *text, int mode)
{
	static char path[1200];
	if (dir[0] == '\0')
		snprintf(dir, sizeof(dir), "%s", tl_tmpdir("auth"));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, (mode_t)mode);
	return path;
}

static const char CREDS[] = "# comment\n"
                            "ADMIN s1\n"
                            "RO s2 read:Orders,Logs*\n"
                            "RW s3 write:Orders ddl:Orders account:123456789012\n"
                            "ALL s4 read:* admin\n";

static void load(rt_creds *c)
{
	char m[SH_ERRMSG_SIZE];
	ck_assert_msg(rt_creds_load(write_file("creds", CREDS, 0600), c, m) == SHOAL_OK, "%s", m);
}

/* ------------------------------------------------------------------------ */
/* The credentials file                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_creds_grants)
{
	rt_creds c;
	load(&c);
	ck_assert_uint_eq(c.n, 4);
	ck_assert(!c.others_can_read);
	const rt_cred *k = rt_creds_key(&c, "ADMIN");
	ck_assert(k != NULL && k->all && k->n_grants == 0);
	ck_assert_str_eq(k->account, "000000000000");
	k = rt_creds_key(&c, "RO");
	ck_assert(k != NULL && !k->all && !k->admin && k->n_grants == 2);
	ck_assert_str_eq(k->grants[1].table, "Logs*");
	ck_assert_uint_eq(k->grants[0].perms, RT_PERM_READ);
	k = rt_creds_key(&c, "RW");
	ck_assert_str_eq(k->account, "123456789012");
	ck_assert_uint_eq(k->grants[0].perms, RT_PERM_READ | RT_PERM_WRITE);
	ck_assert_uint_eq(k->grants[1].perms, RT_PERM_DDL);
	ck_assert(rt_creds_key(&c, "ALL")->admin);
	ck_assert_str_eq(rt_creds_find(&c, "RW"), "s3");
	rt_creds_free(&c);

	char m[SH_ERRMSG_SIZE];
	char long_line[5000];
	memset(long_line, 'x', sizeof(long_line) - 2);
	memcpy(long_line, "A b read:", 9);
	long_line[sizeof(long_line) - 2] = '\n';
	long_line[sizeof(long_line) - 1] = '\0';
	ck_assert_int_eq(rt_creds_load(write_file("c4", long_line, 0600), &c, m),
	                 SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(m, "line 1: longer than") != NULL, "%s", m);
	ck_assert_int_eq(rt_creds_load(write_file("c2", "A b\n", 0644), &c, m), SHOAL_OK);
	ck_assert(c.others_can_read);
	rt_creds_free(&c);
	static const struct {
		const char *text, *says;
	} bad[] = {
	    {"A b wrote:T\n", "unknown grant 'wrote:T'"},
	    {"A b read:\n", "names no table"},
	    {"A b read:bad/name\n", "'bad/name' is not a table name"},
	    {"A b account:12\n", "not a 12-digit account id"},
	    {"A\n", "expected ACCESS_KEY_ID SECRET [GRANT ...]"},
	    {"A b\nA c\n", "repeated"},
	    {"A b admin admin admin admin admin admin admin admin admin admin admin admin admin "
	     "admin admin admin admin admin admin admin admin admin admin admin admin admin admin "
	     "admin admin admin admin admin admin admin admin admin admin admin admin admin admin "
	     "admin admin admin admin admin admin admin admin admin admin admin admin admin admin "
	     "admin admin admin admin admin admin admin admin\n",
	     "at most 62 grants"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(rt_creds_load(write_file("c3", bad[i].text, 0600), &c, m),
		                 SHOAL_E_VALIDATION);
		ck_assert_msg(strstr(m, bad[i].says) != NULL && strstr(m, "line ") != NULL,
		              "%s: %s", bad[i].text, m);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Native signatures                                                         */
/* ------------------------------------------------------------------------ */

/* A message (some protobuf bytes), signed by key/secret at t. */
static nng_msg *signed_msg(const char *key, const char *secret, int64_t t)
{
	nng_msg *m;
	static const uint8_t body[] = {0x08, 0x2a, 0x5a, 0x03, 'a', 'b', 'c'}; /* 1:42, 11:"abc" */
	ck_assert_int_eq(nng_msg_alloc(&m, 0), 0);
	ck_assert_int_eq(nng_msg_append(m, body, sizeof(body)), 0);
	if (key == NULL)
		return m;
	char date[17], d8[9];
	wire_auth_amz_date(t, date);
	snprintf(d8, sizeof(d8), "%.8s", date);
	uint8_t k[32], sig[32], field[400];
	wire_auth_signing_key(secret, d8, "eu-west-1", "dynamodb", k);
	wire_auth_signature(k, date, "eu-west-1", "dynamodb", body, sizeof(body), sig);
	size_t n = wire_auth_encode(field, sizeof(field), key, date, "eu-west-1", "dynamodb", sig);
	ck_assert(n > 0);
	ck_assert_int_eq(nng_msg_append(m, field, n), 0);
	return m;
}

START_TEST(test_native_verify)
{
	rt_creds c;
	load(&c);
	char m[SH_ERRMSG_SIZE];
	rt_principal who;
	int64_t now = time(NULL);

	nng_msg *msg = signed_msg("RO", "s2", now);
	ck_assert_int_eq(rt_auth_native(&c, msg, now, &who, m), SHOAL_OK);
	ck_assert_uint_eq(nng_msg_len(msg), 7); /* the Auth is cut off */
	ck_assert_ptr_eq(who.cred, rt_creds_key(&c, "RO"));
	ck_assert_str_eq(who.region, "eu-west-1");
	nng_msg_free(msg);

	struct {
		const char *key, *secret;
		int64_t t;
		int code;
		const char *says;
	} cases[] = {
	    {NULL, NULL, 0, SHOAL_E_AUTH_MISSING, "Request is missing Authentication Token"},
	    {"RO", "wrong", now, SHOAL_E_AUTH_SIGNATURE, "does not match the signature"},
	    {"NOBODY", "s2", now, SHOAL_E_AUTH_UNRECOGNIZED, "security token included"},
	    {"RO", "s2", now - 16 * 60, SHOAL_E_AUTH_SIGNATURE, "Signature expired"},
	    {"RO", "s2", now + 16 * 60, SHOAL_E_AUTH_SIGNATURE, "Signature not yet current"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msg = signed_msg(cases[i].key, cases[i].secret, cases[i].t);
		size_t len = nng_msg_len(msg);
		ck_assert_int_eq(rt_auth_native(&c, msg, now, &who, m), cases[i].code);
		ck_assert_msg(strstr(m, cases[i].says) != NULL, "case %zu: %s", i, m);
		ck_assert_ptr_null(who.cred);
		ck_assert_uint_eq(nng_msg_len(msg), len);
		nng_msg_free(msg);
	}

	/* A byte changed, a field after the Auth, two Auths. */
	msg = signed_msg("RO", "s2", now);
	((uint8_t *)nng_msg_body(msg))[1] = 0x2b;
	ck_assert_int_eq(rt_auth_native(&c, msg, now, &who, m), SHOAL_E_AUTH_SIGNATURE);
	nng_msg_free(msg);
	msg = signed_msg("RO", "s2", now);
	static const uint8_t extra[] = {0x08, 0x01};
	nng_msg_append(msg, extra, sizeof(extra));
	ck_assert_int_eq(rt_auth_native(&c, msg, now, &who, m), SHOAL_E_AUTH_INCOMPLETE);
	ck_assert_msg(strstr(m, "Auth must be the last field") != NULL, "%s", m);
	nng_msg_free(msg);
	msg = signed_msg("RO", "s2", now);
	nng_msg *twice = signed_msg("RO", "s2", now);
	nng_msg_append(twice, (uint8_t *)nng_msg_body(msg) + 7, nng_msg_len(msg) - 7);
	ck_assert_int_eq(rt_auth_native(&c, twice, now, &who, m), SHOAL_E_AUTH_INCOMPLETE);
	nng_msg_free(twice);

	/* No credentials: the Auth is cut off unchecked. */
	ck_assert_int_eq(rt_auth_native(NULL, msg, now, &who, m), SHOAL_OK);
	ck_assert_uint_eq(nng_msg_len(msg), 7);
	ck_assert_ptr_null(who.cred);
	nng_msg_free(msg);

	/* The derived-key cache gives SigV4's key, the second time too. */
	const char *d8 = "20261125";
	uint8_t want[32], got[32];
	wire_auth_signing_key("s2", d8, "eu-west-1", "dynamodb", want);
	for (int i = 0; i < 2; i++) {
		rt_auth_signing_key(&c, rt_creds_key(&c, "RO"), d8, "eu-west-1", "dynamodb", got);
		ck_assert(memcmp(want, got, 32) == 0);
	}
	rt_auth_signing_key(&c, rt_creds_key(&c, "RW"), d8, "eu-west-1", "dynamodb", got);
	ck_assert(memcmp(want, got, 32) != 0);
	rt_creds_free(&c);
}
END_TEST

/* The derived key is SigV4's: AWS's documented example (secret
 * wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830, us-east-1, iam). */
START_TEST(test_signing_key_vector)
{
	uint8_t k[32];
	wire_auth_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1",
	                      "iam", k);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", k[i]);
	ck_assert_str_eq(hex, "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Authorization                                                             */
/* ------------------------------------------------------------------------ */

static int authorize(const rt_creds *c, const char *key, const Shoal__Request *in, char *m)
{
	rt_router rt;
	memset(&rt, 0, sizeof(rt));
	rt.creds = c;
	rt_principal who = {.cred = key != NULL ? rt_creds_key(c, key) : NULL};
	snprintf(who.region, sizeof(who.region), "eu-west-1");
	return rt_auth_authorize(&rt, &who, in, m);
}

START_TEST(test_authorize)
{
	rt_creds c;
	load(&c);
	char m[SH_ERRMSG_SIZE];
	Shoal__Request in = SHOAL__REQUEST__INIT;
	Shoal__GetItemRequest get = SHOAL__GET_ITEM_REQUEST__INIT;
	Shoal__PutItemRequest put = SHOAL__PUT_ITEM_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	in.get_item = &get;
	get.table_name = "Orders";
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "ADMIN", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, NULL, &in, m), SHOAL_E_AUTH_MISSING);
	get.table_name = "Logs2026"; /* RO's prefix grant */
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_str_eq(m, "User: arn:aws:iam::123456789012:user/RW is not authorized to perform: "
	                    "dynamodb:GetItem on resource: arn:aws:dynamodb:eu-west-1:123456789012:"
	                    "table/Logs2026 because no identity-based policy allows the "
	                    "dynamodb:GetItem action");
	get.table_name = NULL; /* left to validation */
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);

	in.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	in.put_item = &put;
	put.table_name = "Orders";
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, "dynamodb:PutItem on resource: arn:aws:dynamodb:eu-west-1:"
	                        "000000000000:table/Orders") != NULL,
	              "%s", m);
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "ALL", &in, m), SHOAL_E_ACCESS_DENIED);

	/* Query on an index: the ARN names it. */
	Shoal__QueryRequest q = SHOAL__QUERY_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_QUERY;
	in.query = &q;
	q.table_name = "Other";
	q.index_name = "byDate";
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, ":table/Other/index/byDate because") != NULL, "%s", m);
	ck_assert_int_eq(authorize(&c, "ALL", &in, m), SHOAL_OK);

	/* Every table of a batch. */
	Shoal__BatchWriteItemRequest bw = SHOAL__BATCH_WRITE_ITEM_REQUEST__INIT;
	Shoal__TableWriteRequests t1 = SHOAL__TABLE_WRITE_REQUESTS__INIT, t2 = t1;
	Shoal__TableWriteRequests *ts[] = {&t1, &t2};
	t1.table_name = "Orders";
	t2.table_name = "Other";
	bw.request_items = ts;
	bw.n_request_items = 1;
	in.op_case = SHOAL__REQUEST__OP_BATCH_WRITE_ITEM;
	in.batch_write_item = &bw;
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	bw.n_request_items = 2;
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, "dynamodb:BatchWriteItem on resource") && strstr(m, "table/Other"),
	              "%s", m);

	/* Every action of a transaction, as its own IAM action. */
	Shoal__TransactWriteItemsRequest tw = SHOAL__TRANSACT_WRITE_ITEMS_REQUEST__INIT;
	Shoal__TransactWriteItem a1 = SHOAL__TRANSACT_WRITE_ITEM__INIT, a2 = a1;
	Shoal__ConditionCheck cc = SHOAL__CONDITION_CHECK__INIT;
	Shoal__Delete del = SHOAL__DELETE__INIT;
	Shoal__TransactWriteItem *as[] = {&a1, &a2};
	a1.action_case = SHOAL__TRANSACT_WRITE_ITEM__ACTION_CONDITION_CHECK;
	a1.condition_check = &cc;
	cc.table_name = "Logs1";
	a2.action_case = SHOAL__TRANSACT_WRITE_ITEM__ACTION_DELETE;
	a2.delete_ = &del;
	del.table_name = "Logs1";
	tw.transact_items = as;
	tw.n_transact_items = 1;
	in.op_case = SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS;
	in.transact_write_items = &tw;
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK); /* a condition check reads */
	tw.n_transact_items = 2;
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, "dynamodb:DeleteItem on resource") != NULL, "%s", m);

	/* DDL, ListTables, ClusterStatus. */
	Shoal__CreateTableRequest ct = SHOAL__CREATE_TABLE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_CREATE_TABLE;
	in.create_table = &ct;
	ct.table_name = "Orders";
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	ct.table_name = "Orders2";
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_int_eq(authorize(&c, "ALL", &in, m), SHOAL_E_ACCESS_DENIED);
	Shoal__ListTablesRequest lt = SHOAL__LIST_TABLES_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_LIST_TABLES;
	in.list_tables = &lt;
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, ":table/* because") != NULL, "%s", m);
	ck_assert_int_eq(authorize(&c, "ALL", &in, m), SHOAL_OK);
	Shoal__ClusterStatusRequest cs = SHOAL__CLUSTER_STATUS_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_CLUSTER_STATUS;
	in.cluster_status = &cs;
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_int_eq(authorize(&c, "ALL", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "ADMIN", &in, m), SHOAL_OK);

	/* Tags: the ARN's table, DDL to change them, read to list them; an
	 * ARN that names no table is left to validation.  Limits and
	 * endpoints: any key. */
	Shoal__TagResourceRequest tr = SHOAL__TAG_RESOURCE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_TAG_RESOURCE;
	in.tag_resource = &tr;
	WIRE_SET(&tr, resource_arn, "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders");
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, "dynamodb:TagResource on resource: arn:aws:dynamodb:eu-west-1:"
	                        "000000000000:table/Orders because") != NULL,
	              "%s", m);
	WIRE_SET(&tr, resource_arn, "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders/index/x");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	Shoal__UntagResourceRequest ur = SHOAL__UNTAG_RESOURCE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_UNTAG_RESOURCE;
	in.untag_resource = &ur;
	WIRE_SET(&ur, resource_arn, "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	Shoal__ListTagsOfResourceRequest lr = SHOAL__LIST_TAGS_OF_RESOURCE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_LIST_TAGS_OF_RESOURCE;
	in.list_tags_of_resource = &lr;
	WIRE_SET(&lr, resource_arn, "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	WIRE_SET(&lr, resource_arn, "arn:aws:dynamodb:eu-west-1:123456789012:table/Other");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	Shoal__DescribeLimitsRequest dl = SHOAL__DESCRIBE_LIMITS_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_DESCRIBE_LIMITS;
	in.describe_limits = &dl;
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, NULL, &in, m), SHOAL_E_AUTH_MISSING);

	/* Time to Live: DDL to change it, read to describe it, on the table. */
	Shoal__UpdateTimeToLiveRequest ut = SHOAL__UPDATE_TIME_TO_LIVE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_UPDATE_TIME_TO_LIVE;
	in.update_time_to_live = &ut;
	WIRE_SET(&ut, table_name, "Orders");
	ck_assert_int_eq(authorize(&c, "RW", &in, m), SHOAL_OK);
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);
	ck_assert_msg(strstr(m, "dynamodb:UpdateTimeToLive") != NULL, "%s", m);
	Shoal__DescribeTimeToLiveRequest dt = SHOAL__DESCRIBE_TIME_TO_LIVE_REQUEST__INIT;
	in.op_case = SHOAL__REQUEST__OP_DESCRIBE_TIME_TO_LIVE;
	in.describe_time_to_live = &dt;
	WIRE_SET(&dt, table_name, "Orders");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_OK);
	WIRE_SET(&dt, table_name, "Other");
	ck_assert_int_eq(authorize(&c, "RO", &in, m), SHOAL_E_ACCESS_DENIED);

	/* No credentials file: everything, by anyone. */
	rt_router rt;
	memset(&rt, 0, sizeof(rt));
	rt_principal nobody = {0};
	ck_assert_int_eq(rt_auth_authorize(&rt, &nobody, &in, m), SHOAL_OK);
	ck_assert_msg(strstr(rt_auth_describe(&rt), "NO AUTHENTICATION") != NULL, "%s",
	              rt_auth_describe(&rt));
	rt_creds_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* libshoal's credentials                                                    */
/* ------------------------------------------------------------------------ */

static int find(shoal_client *c, const shoal_options *o, char *m)
{
	memset(c, 0, sizeof(*c));
	c->opts = *o;
	return lib_creds_find(c, m);
}

/* The same for a client of file://D/router.endpoint with D/aws-credentials
 * (lib_client_new's cluster_creds). */
static int find_cluster(shoal_client *c, const shoal_options *o, const char *cluster, char *m)
{
	memset(c, 0, sizeof(*c));
	c->opts = *o;
	snprintf(c->cluster_creds, sizeof(c->cluster_creds), "%s", cluster);
	return lib_creds_find(c, m);
}

START_TEST(test_client_creds)
{
	shoal_client c;
	shoal_options o;
	char m[SH_ERRMSG_SIZE];
	shoal_options_init(&o);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert(!c.sign); /* nothing anywhere: unsigned */

	setenv("AWS_ACCESS_KEY_ID", "EK", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_E_VALIDATION);
	ck_assert_str_eq(m, "Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY");
	setenv("AWS_SECRET_ACCESS_KEY", "es", 1);
	setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert(c.sign);
	ck_assert_str_eq(c.key_id, "EK");
	ck_assert_str_eq(c.secret, "es");
	ck_assert_str_eq(c.region, "ap-south-1");
	ck_assert_str_eq(shoal_credentials_source(&c), "environment");
	o.access_key_id = "OK";
	o.secret_access_key = "os";
	o.region = "eu-north-1";
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert_str_eq(shoal_access_key_id(&c), "OK");
	ck_assert_str_eq(c.region, "eu-north-1");
	o.no_sign = 1;
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert_ptr_null(shoal_access_key_id(&c));
	shoal_options_init(&o);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_DEFAULT_REGION");

	/* Profiles. */
	setenv("AWS_SHARED_CREDENTIALS_FILE",
	       write_file("aws-creds",
	                  "[default]\naws_access_key_id = DK\naws_secret_access_key = ds\n"
	                  "[work]\naws_access_key_id=WK\naws_secret_access_key=ws\n"
	                  "[half]\naws_access_key_id=HK\n",
	                  0600),
	       1);
	setenv("AWS_CONFIG_FILE",
	       write_file("aws-config",
	                  "[default]\nregion = us-west-2\n[profile work]\nregion = "
	                  "eu-central-1\n",
	                  0600),
	       1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "DK");
	ck_assert_str_eq(c.region, "us-west-2");
	ck_assert_str_eq(shoal_credentials_source(&c), "shared-credentials-file");
	o.profile = "work";
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "WK");
	ck_assert_str_eq(c.secret, "ws");
	ck_assert_str_eq(c.region, "eu-central-1");
	o.profile = NULL;
	setenv("AWS_PROFILE", "work", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "WK");
	setenv("AWS_PROFILE", "nope", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_E_VALIDATION);
	ck_assert_str_eq(m, "The config profile (nope) could not be found");
	setenv("AWS_PROFILE", "half", 1);
	ck_assert_int_eq(find(&c, &o, m), SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(m, "Partial credentials") != NULL, "%s", m);
	unsetenv("AWS_PROFILE");

	/* The cluster's key (D/aws-credentials of a file:// endpoint): before
	 * the default profile, after a named profile and the environment. */
	const char *cluster =
	    write_file("cluster-creds",
	               "[default]\naws_access_key_id = CK\naws_secret_access_key = cs\n", 0600);
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "CK");
	ck_assert_str_eq(c.secret, "cs");
	ck_assert_str_eq(c.region, "us-west-2"); /* the default profile's region still */
	ck_assert_str_eq(shoal_credentials_source(&c), "cluster-credentials-file");
	o.profile = "work";
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "WK");
	o.profile = NULL;
	setenv("AWS_PROFILE", "work", 1);
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "WK");
	unsetenv("AWS_PROFILE");
	setenv("AWS_ACCESS_KEY_ID", "EK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "es", 1);
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "EK");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	o.no_sign = 1;
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_OK);
	ck_assert(!c.sign);
	o.no_sign = 0;
	/* Missing: the default profile; half a key: an error. */
	ck_assert_int_eq(find_cluster(&c, &o, "/nonexistent", m), SHOAL_OK);
	ck_assert_str_eq(c.key_id, "DK");
	cluster = write_file("cluster-half", "[default]\naws_access_key_id = CK\n", 0600);
	ck_assert_int_eq(find_cluster(&c, &o, cluster, m), SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(m, "Partial credentials found in the cluster's") != NULL, "%s", m);
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("auth");
	tcase_add_test(tc, test_creds_grants);
	tcase_add_test(tc, test_native_verify);
	tcase_add_test(tc, test_signing_key_vector);
	tcase_add_test(tc, test_authorize);
	tcase_add_test(tc, test_client_creds);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(auth_suite)
