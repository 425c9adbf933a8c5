/*
 * The `shoal` command line (client/cli*.c).
 *
 * The CLI's sources are compiled into this test (the Makefile links
 * client/cli*.c only into build/bin/shoal), so that cli_main can be run as a
 * function with memory streams and a fake service: a call function that
 * records every request body and answers canned or paged responses.  That
 * checks option parsing, shorthand syntax, file:// values, the request body
 * of every subcommand, pagination and its tokens, output and exit codes
 * without a server.  The built binary itself is run (fork/exec) for usage
 * errors and for the connection error against an endpoint nobody listens on.
 */
#include "client/cli_admin.c"
#include "client/cli_args.c"
#include "client/cli_cmds.c"
#include "client/cli_load.c"
#include "client/cli_main.c"
#include "client/cli_out.c"
#include "client/cli_page.c"
#include "client/cli_shorthand.c"
#include "client/cli_top.c"

#include <check.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/wire_api.h"
#include "tests/lib/testlib.h"

/* ------------------------------------------------------------------------ */
/* A fake service                                                            */
/* ------------------------------------------------------------------------ */

typedef struct fake_svc {
	int calls;
	char op[64];
	json_t *bodies;     /* every request body, in order */
	const char *canned; /* answer to non-paged operations ("{}" if NULL) */
	int fail_code;      /* answer every call with this error */
	int fail_source;
	const char *fail_msg;
	int n_items;  /* Query/Scan: items SK 0..n-1 of one partition */
	int page;     /* the service's page size when no Limit is given */
	int n_tables; /* ListTables: t00 .. */
	/* ClusterStatus: these answers in turn (the last one repeats). */
	const char *const *status_seq;
	int n_status, status_i;
} fake_svc;

static json_t *make_item(int i)
{
	char n[16];
	snprintf(n, sizeof(n), "%d", i);
	return json_pack("{s:{s:s},s:{s:s}}", "PK", "S", "p", "SK", "N", n);
}

static int fake_call(void *ctx, const char *operation, const char *body, char **response,
                     shoal_error *err)
{
	fake_svc *s = ctx;
	s->calls++;
	snprintf(s->op, sizeof(s->op), "%s", operation);
	json_t *b = json_loads(body, 0, NULL);
	ck_assert_ptr_nonnull(b);
	json_array_append_new(s->bodies, b);
	*response = NULL;
	if (s->fail_code != 0) {
		err->code = s->fail_code;
		err->source = s->fail_source != 0 ? s->fail_source : SHOAL_SRC_SERVICE;
		snprintf(err->exception, sizeof(err->exception), "%s",
		         shoal_exception_name(s->fail_code));
		snprintf(err->message, sizeof(err->message), "%s", s->fail_msg);
		return s->fail_code;
	}
	json_t *resp = NULL;
	if ((strcmp(operation, "Query") == 0 || strcmp(operation, "Scan") == 0) && s->n_items > 0) {
		json_t *lim = json_object_get(b, "Limit");
		int limit = lim != NULL ? (int)json_integer_value(lim) : s->page;
		int start = 0;
		json_t *esk = json_object_get(b, "ExclusiveStartKey");
		if (esk != NULL)
			start = atoi(json_string_value(
			            json_object_get(json_object_get(esk, "SK"), "N"))) +
			        1;
		json_t *items = json_array();
		int i;
		for (i = start; i < s->n_items && i < start + limit; i++)
			json_array_append_new(items, make_item(i));
		int n = i - start;
		resp = json_pack("{s:o,s:i,s:i}", "Items", items, "Count", n, "ScannedCount", n);
		if (n == limit) /* a full page: DynamoDB sends the key even at the end */
			json_object_set_new(resp, "LastEvaluatedKey", make_item(i - 1));
	} else if (strcmp(operation, "ListTables") == 0 && s->n_tables > 0) {
		json_t *lim = json_object_get(b, "Limit");
		int limit = lim != NULL ? (int)json_integer_value(lim) : s->page;
		json_t *est = json_object_get(b, "ExclusiveStartTableName");
		int start = est != NULL ? atoi(json_string_value(est) + 1) + 1 : 0;
		json_t *names = json_array();
		int i;
		for (i = start; i < s->n_tables && i < start + limit; i++) {
			char name[16];
			snprintf(name, sizeof(name), "t%02d", i);
			json_array_append_new(names, json_string(name));
		}
		resp = json_pack("{s:o}", "TableNames", names);
		if (i < s->n_tables)
			json_object_set_new(
			    resp, "LastEvaluatedTableName",
			    json_string(json_string_value(json_array_get(names, i - start - 1))));
	}
	if (strcmp(operation, "ClusterStatus") == 0 && s->n_status > 0) {
		int i = s->status_i < s->n_status ? s->status_i : s->n_status - 1;
		s->status_i++;
		*response = strdup(s->status_seq[i]);
		return SHOAL_OK;
	}
	if (resp != NULL) {
		*response = json_dumps(resp, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(resp);
	} else {
		*response = strdup(s->canned != NULL ? s->canned : "{}");
	}
	return SHOAL_OK;
}

static void svc_init(fake_svc *s)
{
	memset(s, 0, sizeof(*s));
	s->bodies = json_array();
	s->page = 3;
}

static void svc_fini(fake_svc *s)
{
	json_decref(s->bodies);
}

typedef struct result {
	int code;
	char *out, *err;
} result;

static result run_argv(fake_svc *s, const char *endpoint_env, int argc, char **argv)
{
	result r;
	size_t on, en;
	FILE *out = open_memstream(&r.out, &on);
	FILE *err = open_memstream(&r.err, &en);
	cli_env env = {.out = out,
	               .err = err,
	               .endpoint_env = endpoint_env,
	               .call = s != NULL ? fake_call : NULL,
	               .call_ctx = s,
	               .in_fd = -1};
	r.code = cli_main(&env, argc, argv);
	fclose(out);
	fclose(err);
	return r;
}

/* run_cmd(svc, "put-item", "--table-name", "t", NULL) */
static result run_cmd(fake_svc *s, ...)
{
	char *argv[64];
	int argc = 0;
	argv[argc++] = "shoal";
	va_list ap;
	va_start(ap, s);
	for (char *a; (a = va_arg(ap, char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return run_argv(s, NULL, argc, argv);
}

static void result_free(result *r)
{
	free(r->out);
	free(r->err);
}

static void assert_json_eq(const json_t *got, const char *want_text)
{
	json_error_t je;
	json_t *want = json_loads(want_text, JSON_DECODE_ANY, &je);
	ck_assert_msg(want != NULL, "bad expected JSON: %s", je.text);
	char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
	ck_assert_msg(json_equal(got, want), "got %s\nwant %s", g, want_text);
	free(g);
	json_decref(want);
}

/* The body of the last call. */
static const json_t *last_body(fake_svc *s)
{
	ck_assert_int_gt(json_array_size(s->bodies), 0);
	return json_array_get(s->bodies, json_array_size(s->bodies) - 1);
}

/* Runs one command that must succeed and checks the operation and body. */
#define CHECK_BODY(op_, want, ...)                                                                 \
	do {                                                                                       \
		fake_svc s_;                                                                       \
		svc_init(&s_);                                                                     \
		result r_ = run_cmd(&s_, __VA_ARGS__, NULL);                                       \
		ck_assert_msg(r_.code == 0, "exit %d: %s", r_.code, r_.err);                       \
		ck_assert_str_eq(s_.op, op_);                                                      \
		assert_json_eq(last_body(&s_), want);                                              \
		result_free(&r_);                                                                  \
		svc_fini(&s_);                                                                     \
	} while (0)

/* Runs a command that must fail with `code` and stderr containing `text`. */
#define CHECK_FAIL(code_, text_, ...)                                                              \
	do {                                                                                       \
		fake_svc s_;                                                                       \
		svc_init(&s_);                                                                     \
		result r_ = run_cmd(&s_, __VA_ARGS__, NULL);                                       \
		ck_assert_msg(r_.code == (code_), "exit %d, want %d: %s", r_.code, code_, r_.err); \
		ck_assert_msg(strstr(r_.err, text_) != NULL, "stderr %s\nwant %s", r_.err, text_); \
		ck_assert_int_eq(s_.calls, 0);                                                     \
		result_free(&r_);                                                                  \
		svc_fini(&s_);                                                                     \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Shorthand                                                                 */
/* ------------------------------------------------------------------------ */

static void shorthand_ok(const char *text, const char *want)
{
	json_t *j;
	cli_fail f;
	int rc = cli_shorthand_parse("--x", text, &j, &f);
	ck_assert_msg(rc == 0, "%s: %s", text, f.text);
	assert_json_eq(j, want);
	json_decref(j);
}

static void shorthand_err(const char *text, const char *want)
{
	json_t *j;
	cli_fail f;
	ck_assert_int_eq(cli_shorthand_parse("--x", text, &j, &f), -1);
	ck_assert_ptr_null(j);
	ck_assert_int_eq(f.exit_code, CLI_EXIT_USAGE);
	ck_assert_msg(strstr(f.text, want) != NULL, "%s: got %s", text, f.text);
}

START_TEST(test_shorthand_parse)
{
	shorthand_ok("AttributeName=PK,AttributeType=S",
	             "{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"}");
	/* csv lists, and backtracking when the next word is a key */
	shorthand_ok("a=b,c,d=e", "{\"a\":[\"b\",\"c\"],\"d\":\"e\"}");
	shorthand_ok("a=b,c", "{\"a\":[\"b\",\"c\"]}");
	shorthand_ok("ProjectionType=INCLUDE,NonKeyAttributes=x,y",
	             "{\"ProjectionType\":\"INCLUDE\",\"NonKeyAttributes\":[\"x\",\"y\"]}");
	/* explicit lists and hashes, nested */
	shorthand_ok("a=[1,2],b={c=d,e=[f]}",
	             "{\"a\":[\"1\",\"2\"],\"b\":{\"c\":\"d\",\"e\":[\"f\"]}}");
	shorthand_ok("a=[],b={}", "{\"a\":[],\"b\":{}}");
	shorthand_ok("PK={S=USER#1},SK={S=PROFILE}",
	             "{\"PK\":{\"S\":\"USER#1\"},\"SK\":{\"S\":\"PROFILE\"}}");
	shorthand_ok(":v={N=1},#n={S=x}", "{\":v\":{\"N\":\"1\"},\"#n\":{\"S\":\"x\"}}");
	/* quoting and escapes */
	shorthand_ok("a='x,y',b=\"q\\\"r\"", "{\"a\":\"x,y\",\"b\":\"q\\\"r\"}");
	shorthand_ok("a=x\\,y", "{\"a\":\"x,y\"}");
	shorthand_ok("a=[' s ',\"t\"]", "{\"a\":[\" s \",\"t\"]}");
	/* whitespace around '=' and ',' ; trailing spaces dropped; '=' inside */
	shorthand_ok("a = spaced value , b=c", "{\"a\":\"spaced value\",\"b\":\"c\"}");
	shorthand_ok("a=b=c", "{\"a\":\"b=c\"}");
	shorthand_ok("a=", "{\"a\":\"\"}");
	shorthand_ok("a=Song 1", "{\"a\":\"Song 1\"}");

	shorthand_err("AttributeName", "Error parsing parameter '--x': Expected: '=', received: "
	                               "'EOF' for input:\nAttributeName\n             ^");
	shorthand_err("a=b,a=c", "Second instance of key \"a\" encountered");
	shorthand_err("a={b=c", "Expected: '}', received: 'EOF'");
	shorthand_err("a=[b", "Expected: ']', received: 'EOF'");
	shorthand_err("a='b", "Expected: ''', received: 'EOF'");
	shorthand_err("a=b,", "received: 'EOF'");
	shorthand_err("a=b,,c=d", "Expected: '=', received: ','");
	shorthand_ok("a=b c=d", "{\"a\":\"b c=d\"}"); /* spaces and '=' may be in a value */
}
END_TEST

START_TEST(test_shorthand_convert)
{
	struct {
		const char *opt, *member, *text, *want;
	} ok[] = {
	    {"--provisioned-throughput", "ProvisionedThroughput",
	     "ReadCapacityUnits=5,WriteCapacityUnits=10",
	     "{\"ReadCapacityUnits\":5,\"WriteCapacityUnits\":10}"},
	    {"--stream-specification", "StreamSpecification",
	     "StreamEnabled=true,StreamViewType=NEW_IMAGE",
	     "{\"StreamEnabled\":true,\"StreamViewType\":\"NEW_IMAGE\"}"},
	    {"--key", "Key", "PK={S=a},N={N=5},F={BOOL=false},Z={NULL=True},L={L=[{S=x},{N=1}]}",
	     "{\"PK\":{\"S\":\"a\"},\"N\":{\"N\":\"5\"},\"F\":{\"BOOL\":false},"
	     "\"Z\":{\"NULL\":true},\"L\":{\"L\":[{\"S\":\"x\"},{\"N\":\"1\"}]}}"},
	    {"--key", "Key", "S={SS=[a,b]},M={M={x={S=y}}}",
	     "{\"S\":{\"SS\":[\"a\",\"b\"]},\"M\":{\"M\":{\"x\":{\"S\":\"y\"}}}}"},
	    /* a single value where a list is expected is a list of one */
	    {"--key", "Key", "S={SS=a}", "{\"S\":{\"SS\":[\"a\"]}}"},
	    {"--expression-attribute-names", "ExpressionAttributeNames", "#n=name,#y=year",
	     "{\"#n\":\"name\",\"#y\":\"year\"}"},
	};
	const cli_cmd *ct = cli_find_cmd("create-table");
	const cli_cmd *gi = cli_find_cmd("get-item");
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		const cli_opt *o = cli_find_opt(ct, ok[i].opt + 2);
		if (o == NULL)
			o = cli_find_opt(gi, ok[i].opt + 2);
		ck_assert_ptr_nonnull(o);
		char *vals[1] = {(char *)ok[i].text};
		json_t *j;
		cli_fail f;
		int rc = cli_option_json(ok[i].opt, ok[i].member, o->shape, vals, 1, &j, &f);
		ck_assert_msg(rc == 0, "%s: %s", ok[i].text, f.text);
		assert_json_eq(j, ok[i].want);
		json_decref(j);
	}

	/* Errors name the member path as botocore does. */
	const cli_opt *pt = cli_find_opt(ct, "provisioned-throughput");
	const cli_opt *ks = cli_find_opt(ct, "key-schema");
	char *bad_int[1] = {"ReadCapacityUnits=five,WriteCapacityUnits=1"};
	json_t *j;
	cli_fail f;
	ck_assert_int_eq(cli_option_json("--provisioned-throughput", "ProvisionedThroughput",
	                                 pt->shape, bad_int, 1, &j, &f),
	                 -1);
	ck_assert_str_eq(f.text, "Parameter validation failed:\nInvalid type for parameter "
	                         "ProvisionedThroughput.ReadCapacityUnits, value: five, type: "
	                         "<class 'str'>, valid types: <class 'int'>");
	char *unknown[2] = {"AttributeName=PK,KeyType=HASH", "AttributeName=SK,Kind=RANGE"};
	ck_assert_int_eq(
	    cli_option_json("--key-schema", "KeySchema", ks->shape, unknown, 2, &j, &f), -1);
	ck_assert_str_eq(f.text, "Parameter validation failed:\nUnknown parameter in "
	                         "KeySchema[1]: \"Kind\", must be one of: AttributeName, KeyType");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Request bodies                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_bodies_tables)
{
	CHECK_BODY(
	    "CreateTable",
	    "{\"TableName\":\"Music\",\"AttributeDefinitions\":[{\"AttributeName\":\"Artist\","
	    "\"AttributeType\":\"S\"},{\"AttributeName\":\"SongTitle\",\"AttributeType\":\"S\"}],"
	    "\"KeySchema\":[{\"AttributeName\":\"Artist\",\"KeyType\":\"HASH\"},{"
	    "\"AttributeName\":\"SongTitle\",\"KeyType\":\"RANGE\"}],\"ProvisionedThroughput\":"
	    "{\"ReadCapacityUnits\":5,\"WriteCapacityUnits\":5},\"BillingMode\":\"PROVISIONED\"}",
	    "create-table", "--table-name", "Music", "--attribute-definitions",
	    "AttributeName=Artist,AttributeType=S", "AttributeName=SongTitle,AttributeType=S",
	    "--key-schema", "AttributeName=Artist,KeyType=HASH",
	    "AttributeName=SongTitle,KeyType=RANGE", "--provisioned-throughput",
	    "ReadCapacityUnits=5,WriteCapacityUnits=5", "--billing-mode", "PROVISIONED");
	/* JSON lists, GSIs and LSIs with projections, Shoal's WriteShards */
	CHECK_BODY(
	    "CreateTable",
	    "{\"TableName\":\"T\",\"AttributeDefinitions\":[{\"AttributeName\":\"PK\","
	    "\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":"
	    "\"HASH\"}],\"GlobalSecondaryIndexes\":[{\"IndexName\":\"G1\",\"KeySchema\":[{"
	    "\"AttributeName\":\"GPK\",\"KeyType\":\"HASH\"}],\"Projection\":{"
	    "\"ProjectionType\":\"ALL\"},\"WriteShards\":4}],\"LocalSecondaryIndexes\":[{"
	    "\"IndexName\":\"L1\",\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":"
	    "\"HASH\"},{\"AttributeName\":\"X\",\"KeyType\":\"RANGE\"}],\"Projection\":{"
	    "\"ProjectionType\":\"KEYS_ONLY\"}}],\"BillingMode\":\"PAY_PER_REQUEST\"}",
	    "create-table", "--table-name", "T", "--attribute-definitions",
	    "[{\"AttributeName\":\"PK\",\"AttributeType\":\"S\"}]", "--key-schema",
	    "AttributeName=PK,KeyType=HASH", "--global-secondary-indexes",
	    "[{\"IndexName\":\"G1\",\"KeySchema\":[{\"AttributeName\":\"GPK\",\"KeyType\":"
	    "\"HASH\"}],\"Projection\":{\"ProjectionType\":\"ALL\"},\"WriteShards\":4}]",
	    "--local-secondary-indexes",
	    "IndexName=L1,KeySchema=[{AttributeName=PK,KeyType=HASH},{AttributeName=X,KeyType="
	    "RANGE}],Projection={ProjectionType=KEYS_ONLY}",
	    "--billing-mode", "PAY_PER_REQUEST");
	CHECK_BODY("DescribeTable", "{\"TableName\":\"Music\"}", "describe-table", "--table-name",
	           "Music");
	CHECK_BODY("DeleteTable", "{\"TableName\":\"Music\"}", "delete-table",
	           "--table-name=Music");
	CHECK_BODY("ListTables", "{\"ExclusiveStartTableName\":\"a\",\"Limit\":5}", "list-tables",
	           "--exclusive-start-table-name", "a", "--limit", "5");
	CHECK_BODY("UpdateTable",
	           "{\"TableName\":\"T\",\"AttributeDefinitions\":[{\"AttributeName\":\"G\","
	           "\"AttributeType\":\"N\"}],\"GlobalSecondaryIndexUpdates\":[{\"Create\":{"
	           "\"IndexName\":\"ByG\",\"KeySchema\":[{\"AttributeName\":\"G\",\"KeyType\":"
	           "\"HASH\"}],\"Projection\":{\"ProjectionType\":\"ALL\"}}}],"
	           "\"DeletionProtectionEnabled\":false}",
	           "update-table", "--table-name", "T", "--attribute-definitions",
	           "AttributeName=G,AttributeType=N", "--global-secondary-index-updates",
	           "[{\"Create\":{\"IndexName\":\"ByG\",\"KeySchema\":[{\"AttributeName\":\"G\","
	           "\"KeyType\":\"HASH\"}],\"Projection\":{\"ProjectionType\":\"ALL\"}}}]",
	           "--no-deletion-protection-enabled");
	/* DeleteIndex in shorthand, billing mode; WriteShards in shorthand
	 * (an integer, as botocore would read a modelled Integer member). */
	CHECK_BODY("UpdateTable",
	           "{\"TableName\":\"T\",\"BillingMode\":\"PAY_PER_REQUEST\","
	           "\"GlobalSecondaryIndexUpdates\":[{\"Delete\":{\"IndexName\":\"GSI1\"}}]}",
	           "update-table", "--table-name", "T", "--billing-mode", "PAY_PER_REQUEST",
	           "--global-secondary-index-updates", "Delete={IndexName=GSI1}");
	CHECK_BODY("UpdateTable",
	           "{\"TableName\":\"T\",\"AttributeDefinitions\":[{\"AttributeName\":\"G\","
	           "\"AttributeType\":\"S\"}],\"GlobalSecondaryIndexUpdates\":[{\"Create\":{"
	           "\"IndexName\":\"ByG\",\"KeySchema\":[{\"AttributeName\":\"G\",\"KeyType\":"
	           "\"HASH\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"},"
	           "\"WriteShards\":4}}]}",
	           "update-table", "--table-name", "T", "--attribute-definitions",
	           "AttributeName=G,AttributeType=S", "--global-secondary-index-updates",
	           "Create={IndexName=ByG,KeySchema=[{AttributeName=G,KeyType=HASH}],"
	           "Projection={ProjectionType=KEYS_ONLY},WriteShards=4}");
	CHECK_BODY("Scan", "{\"TableName\":\"T\",\"IndexName\":\"GSI1\"}", "scan", "--table-name",
	           "T", "--index-name", "GSI1", "--no-paginate");
	CHECK_BODY("ClusterStatus", "{}", "status");
}
END_TEST

START_TEST(test_bodies_items)
{
	CHECK_BODY("PutItem",
	           "{\"TableName\":\"Music\",\"Item\":{\"Artist\":{\"S\":\"A\"},\"Year\":{\"N\":"
	           "\"2015\"}},\"ConditionExpression\":\"attribute_not_exists(#a)\","
	           "\"ExpressionAttributeNames\":{\"#a\":\"Artist\"},\"ReturnValues\":\"ALL_OLD\","
	           "\"ReturnValuesOnConditionCheckFailure\":\"ALL_OLD\","
	           "\"ReturnConsumedCapacity\":\"TOTAL\"}",
	           "put-item", "--table-name", "Music", "--item",
	           "{\"Artist\":{\"S\":\"A\"},\"Year\":{\"N\":\"2015\"}}", "--condition-expression",
	           "attribute_not_exists(#a)", "--expression-attribute-names",
	           "{\"#a\":\"Artist\"}", "--return-values", "ALL_OLD",
	           "--return-values-on-condition-check-failure", "ALL_OLD",
	           "--return-consumed-capacity", "TOTAL");
	CHECK_BODY(
	    "GetItem",
	    "{\"TableName\":\"Music\",\"Key\":{\"Artist\":{\"S\":\"A\"}},\"ConsistentRead\":"
	    "true,\"ProjectionExpression\":\"#y, Title\",\"ExpressionAttributeNames\":{\"#y\":"
	    "\"Year\"}}",
	    "get-item", "--table-name", "Music", "--key", "Artist={S=A}", "--consistent-read",
	    "--projection-expression", "#y, Title", "--expression-attribute-names", "#y=Year");
	CHECK_BODY("GetItem",
	           "{\"TableName\":\"Music\",\"Key\":{\"Artist\":{\"S\":\"A\"}},\"ConsistentRead\":"
	           "false}",
	           "get-item", "--consistent-read", "--table-name", "Music", "--key",
	           "{\"Artist\":{\"S\":\"A\"}}", "--no-consistent-read");
	CHECK_BODY("UpdateItem",
	           "{\"TableName\":\"T\",\"Key\":{\"PK\":{\"S\":\"a\"}},\"UpdateExpression\":\"SET "
	           "n = n + :one\",\"ConditionExpression\":\"n < :max\","
	           "\"ExpressionAttributeValues\":{\":one\":{\"N\":\"1\"},\":max\":{\"N\":\"10\"}},"
	           "\"ReturnValues\":\"UPDATED_NEW\"}",
	           "update-item", "--table-name", "T", "--key", "PK={S=a}", "--update-expression",
	           "SET n = n + :one", "--condition-expression", "n < :max",
	           "--expression-attribute-values", ":one={N=1},:max={N=10}", "--return-values",
	           "UPDATED_NEW");
	CHECK_BODY("DeleteItem",
	           "{\"TableName\":\"T\",\"Key\":{\"PK\":{\"S\":\"a\"},\"SK\":{\"N\":\"1\"}},"
	           "\"ReturnValues\":\"ALL_OLD\",\"ReturnItemCollectionMetrics\":\"SIZE\"}",
	           "delete-item", "--table-name", "T", "--key", "PK={S=a},SK={N=1}",
	           "--return-values", "ALL_OLD", "--return-item-collection-metrics", "SIZE");
	CHECK_BODY("Query",
	           "{\"TableName\":\"T\",\"IndexName\":\"G1\",\"KeyConditionExpression\":\"PK = :p "
	           "AND begins_with(SK, :s)\",\"FilterExpression\":\"attribute_exists(x)\","
	           "\"ProjectionExpression\":\"SK\",\"ExpressionAttributeValues\":{\":p\":{\"S\":"
	           "\"a\"},\":s\":{\"S\":\"ORDER#\"}},\"ScanIndexForward\":false,\"Select\":"
	           "\"SPECIFIC_ATTRIBUTES\",\"Limit\":7}",
	           "query", "--table-name", "T", "--index-name", "G1", "--key-condition-expression",
	           "PK = :p AND begins_with(SK, :s)", "--filter-expression", "attribute_exists(x)",
	           "--projection-expression", "SK", "--expression-attribute-values",
	           "{\":p\":{\"S\":\"a\"},\":s\":{\"S\":\"ORDER#\"}}", "--no-scan-index-forward",
	           "--select", "SPECIFIC_ATTRIBUTES", "--limit", "7");
	CHECK_BODY("Scan",
	           "{\"TableName\":\"T\",\"Segment\":1,\"TotalSegments\":4,\"ConsistentRead\":true,"
	           "\"ExclusiveStartKey\":{\"PK\":{\"S\":\"k\"}}}",
	           "scan", "--table-name", "T", "--segment", "1", "--total-segments", "4",
	           "--consistent-read", "--exclusive-start-key", "PK={S=k}");
	CHECK_BODY("BatchWriteItem",
	           "{\"RequestItems\":{\"T\":[{\"PutRequest\":{\"Item\":{\"PK\":{\"S\":\"a\"}}}},{"
	           "\"DeleteRequest\":{\"Key\":{\"PK\":{\"S\":\"b\"}}}}]}}",
	           "batch-write-item", "--request-items",
	           "{\"T\":[{\"PutRequest\":{\"Item\":{\"PK\":{\"S\":\"a\"}}}},{\"DeleteRequest\":{"
	           "\"Key\":{\"PK\":{\"S\":\"b\"}}}}]}");
	CHECK_BODY(
	    "BatchGetItem",
	    "{\"RequestItems\":{\"T\":{\"Keys\":[{\"PK\":{\"S\":\"a\"}},{\"PK\":{\"S\":\"b\"}}"
	    "],\"ConsistentRead\":true}},\"ReturnConsumedCapacity\":\"TOTAL\"}",
	    "batch-get-item", "--request-items",
	    "{\"T\":{\"Keys\":[{\"PK\":{\"S\":\"a\"}},{\"PK\":{\"S\":\"b\"}}],"
	    "\"ConsistentRead\":true}}",
	    "--return-consumed-capacity", "TOTAL");
	CHECK_BODY(
	    "TransactWriteItems",
	    "{\"TransactItems\":[{\"Put\":{\"TableName\":\"T\",\"Item\":{\"PK\":{\"S\":\"a\"}}"
	    "}}],\"ClientRequestToken\":\"tok\"}",
	    "transact-write-items", "--transact-items",
	    "[{\"Put\":{\"TableName\":\"T\",\"Item\":{\"PK\":{\"S\":\"a\"}}}}]",
	    "--client-request-token", "tok");
	/* `aws dynamodb ...` lines work with the "dynamodb" word left in */
	CHECK_BODY("DescribeTable", "{\"TableName\":\"x\"}", "dynamodb", "describe-table",
	           "--table-name", "x");
}
END_TEST

/* This test's temporary directory (made on first use, removed by tmp_done). */
static char tmp[1024];

static const char *tmp_dir(void)
{
	if (tmp[0] == '\0')
		snprintf(tmp, sizeof(tmp), "%s", tl_tmpdir("cli"));
	return tmp;
}

static void tmp_done(void)
{
	if (tmp[0] != '\0')
		tl_rmtree(tmp);
	tmp[0] = '\0';
}

static char *write_temp(const char *name, const char *text)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", tmp_dir(), name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(test_file_values)
{
	char arg[PATH_MAX + 16], arg2[PATH_MAX + 16];
	snprintf(arg, sizeof(arg), "file://%s",
	         write_temp("item.json", "{\"PK\": {\"S\": \"from file\"}}\n"));
	CHECK_BODY("PutItem", "{\"TableName\":\"T\",\"Item\":{\"PK\":{\"S\":\"from file\"}}}",
	           "put-item", "--table-name", "T", "--item", arg);
	/* --cli-input-json: the body, options override its members */
	snprintf(arg, sizeof(arg), "file://%s",
	         write_temp("input.json", "{\"TableName\":\"A\",\"Key\":{\"PK\":{\"S\":\"k\"}},"
	                                  "\"ConsistentRead\":true}"));
	CHECK_BODY("GetItem",
	           "{\"TableName\":\"B\",\"Key\":{\"PK\":{\"S\":\"k\"}},\"ConsistentRead\":true}",
	           "get-item", "--cli-input-json", arg, "--table-name", "B");
	/* a shorthand value from a file, and the key schema as a file */
	snprintf(arg2, sizeof(arg2), "file://%s",
	         write_temp("ks.json", "[{\"AttributeName\":\"PK\",\"KeyType\":\"HASH\"}]"));
	CHECK_BODY("CreateTable",
	           "{\"TableName\":\"T\",\"AttributeDefinitions\":[{\"AttributeName\":\"PK\","
	           "\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"PK\",\"KeyType\":"
	           "\"HASH\"}]}",
	           "create-table", "--table-name", "T", "--attribute-definitions",
	           "AttributeName=PK,AttributeType=S", "--key-schema", arg2);

	CHECK_FAIL(CLI_EXIT_USAGE,
	           "Error parsing parameter '--item': Unable to load paramfile "
	           "file:///nonexistent/x.json: [Errno 2] No such file or directory: "
	           "'/nonexistent/x.json'",
	           "put-item", "--table-name", "T", "--item", "file:///nonexistent/x.json");
	CHECK_FAIL(CLI_EXIT_USAGE, "Error parsing parameter '--item': Invalid JSON: ", "put-item",
	           "--table-name", "T", "--item", "{\"PK\": ");
	CHECK_FAIL(CLI_EXIT_USAGE, "JSON received: {\"PK\": ", "put-item", "--table-name", "T",
	           "--item", "{\"PK\": ");
	/* Missing members of --cli-input-json are named as botocore names them. */
	snprintf(arg, sizeof(arg), "file://%s", write_temp("in2.json", "{\"TableName\":\"A\"}"));
	CHECK_FAIL(CLI_EXIT_USAGE,
	           "Parameter validation failed:\nMissing required parameter in input: \"Key\"",
	           "get-item", "--cli-input-json", arg);
	tmp_done();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Usage errors                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_usage_errors)
{
	CHECK_FAIL(CLI_EXIT_USAGE, "shoal: error: the following arguments are required: command",
	           "--output", "json");
	CHECK_FAIL(CLI_EXIT_USAGE,
	           "shoal: error: the following arguments are required: --table-name, --key",
	           "get-item");
	CHECK_FAIL(CLI_EXIT_USAGE, "usage: shoal [options] <command> [parameters]", "get-item");
	CHECK_FAIL(CLI_EXIT_USAGE, "shoal: error: Unknown options: --bogus, x", "get-item",
	           "--table-name", "t", "--key", "PK={S=a}", "--bogus", "x");
	CHECK_FAIL(CLI_EXIT_USAGE, "shoal: error: Unknown options: stray", "describe-table",
	           "--table-name", "t", "stray");
	/* an option of another command is unknown here */
	CHECK_FAIL(CLI_EXIT_USAGE, "Unknown options: --item", "describe-table", "--table-name", "t",
	           "--item", "{}");
	CHECK_FAIL(CLI_EXIT_USAGE,
	           "argument command: Invalid choice, valid choices are:", "frobnicate");
	CHECK_FAIL(CLI_EXIT_USAGE, "argument --limit: invalid int value: 'ten'", "scan",
	           "--table-name", "t", "--limit", "ten");
	CHECK_FAIL(CLI_EXIT_USAGE, "argument --table-name: expected one argument", "describe-table",
	           "--table-name");
	CHECK_FAIL(CLI_EXIT_USAGE, "argument --key-schema: expected at least one argument",
	           "create-table", "--table-name", "t", "--key-schema", "--attribute-definitions",
	           "AttributeName=a,AttributeType=S");
	CHECK_FAIL(CLI_EXIT_USAGE, "argument --output: Invalid choice", "--output", "yaml",
	           "list-tables");
	CHECK_FAIL(CLI_EXIT_USAGE, "argument --consistent-read: ignored explicit argument 'yes'",
	           "get-item", "--table-name", "t", "--key", "PK={S=a}", "--consistent-read=yes");
	/* botocore's validation of JSON values */
	CHECK_FAIL(CLI_EXIT_USAGE,
	           "Parameter validation failed:\nInvalid type for parameter Item.PK.N, value: 5, "
	           "type: <class 'int'>, valid types: <class 'str'>",
	           "put-item", "--table-name", "t", "--item", "{\"PK\":{\"N\":5}}");
	CHECK_FAIL(
	    CLI_EXIT_USAGE,
	    "Unknown parameter in Item.PK: \"X\", must be one of: S, N, B, SS, NS, BS, M, L, "
	    "NULL, BOOL",
	    "put-item", "--table-name", "t", "--item", "{\"PK\":{\"X\":\"5\"}}");
	CHECK_FAIL(
	    CLI_EXIT_USAGE,
	    "Invalid type for parameter Item, value: [1], type: <class 'list'>, valid types: "
	    "<class 'dict'>",
	    "put-item", "--table-name", "t", "--item", "[1]");
	/* pagination arguments without pagination */
	CHECK_FAIL(CLI_EXIT_USAGE,
	           "Cannot specify --no-paginate along with pagination arguments: --max-items",
	           "scan", "--table-name", "t", "--no-paginate", "--max-items", "3");
	CHECK_FAIL(
	    CLI_EXIT_USAGE,
	    "Cannot specify --no-paginate along with pagination arguments: --starting-token, "
	    "--page-size",
	    "query", "--table-name", "t", "--limit", "3", "--starting-token", "x", "--page-size",
	    "2");
	/* paging options exist only for paginated commands */
	CHECK_FAIL(CLI_EXIT_USAGE, "Unknown options: --max-items, 3", "get-item", "--table-name",
	           "t", "--key", "PK={S=a}", "--max-items", "3");

	/* help is not an error */
	fake_svc s;
	svc_init(&s);
	result r = run_cmd(&s, "help", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "create-table"));
	result_free(&r);
	r = run_cmd(&s, "query", "help", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "--key-condition-expression <string>"));
	ck_assert_ptr_nonnull(strstr(r.out, "--scan-index-forward | --no-scan-index-forward"));
	ck_assert_ptr_nonnull(strstr(r.out, "--max-items"));
	result_free(&r);
	ck_assert_int_eq(s.calls, 0);
	svc_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Service errors and output                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_service_errors)
{
	fake_svc s;
	svc_init(&s);
	s.fail_code = SHOAL_E_CONDITION_FAILED;
	s.fail_msg = "The conditional request failed";
	result r = run_cmd(&s, "put-item", "--table-name", "t", "--item", "PK={S=a}",
	                   "--condition-expression", "attribute_not_exists(PK)", NULL);
	ck_assert_int_eq(r.code, 254);
	ck_assert_str_eq(r.err, "An error occurred (ConditionalCheckFailedException) when calling "
	                        "the PutItem operation: The conditional request failed\n");
	ck_assert_str_eq(r.out, "");
	result_free(&r);

	/* An error on the second page of a paginated command. */
	s.fail_code = SHOAL_E_NOT_FOUND;
	s.fail_msg = "Requested resource not found";
	r = run_cmd(&s, "scan", "--table-name", "t", NULL);
	ck_assert_int_eq(r.code, 254);
	ck_assert_str_eq(r.err, "An error occurred (ResourceNotFoundException) when calling the "
	                        "Scan operation: Requested resource not found\n");
	result_free(&r);

	s.fail_code = SHOAL_E_UNAVAILABLE;
	s.fail_source = SHOAL_SRC_CONNECT;
	s.fail_msg = "Could not connect to the endpoint URL: \"tcp://127.0.0.1:1\"";
	r = run_cmd(&s, "list-tables", NULL);
	ck_assert_int_eq(r.code, 255);
	ck_assert_str_eq(r.err, "Could not connect to the endpoint URL: \"tcp://127.0.0.1:1\"\n");
	result_free(&r);
	svc_fini(&s);
}
END_TEST

START_TEST(test_output)
{
	fake_svc s;
	svc_init(&s);
	/* {} prints nothing */
	result r = run_cmd(&s, "put-item", "--table-name", "t", "--item", "PK={S=a}", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, "");
	result_free(&r);

	/* four-space indentation, member order kept, timestamps as ISO 8601 */
	setenv("TZ", "UTC", 1);
	tzset();
	s.canned = "{\"Table\":{\"TableName\":\"t\",\"TableStatus\":\"ACTIVE\","
	           "\"CreationDateTime\":1700000000.123,\"ItemCount\":0,\"KeySchema\":[],"
	           "\"BillingModeSummary\":{\"BillingMode\":\"PAY_PER_REQUEST\","
	           "\"LastUpdateToPayPerRequestDateTime\":1700000000}}}";
	r = run_cmd(&s, "describe-table", "--table-name", "t", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out,
	                 "{\n"
	                 "    \"Table\": {\n"
	                 "        \"TableName\": \"t\",\n"
	                 "        \"TableStatus\": \"ACTIVE\",\n"
	                 "        \"CreationDateTime\": \"2023-11-14T22:13:20.123000+00:00\",\n"
	                 "        \"ItemCount\": 0,\n"
	                 "        \"KeySchema\": [],\n"
	                 "        \"BillingModeSummary\": {\n"
	                 "            \"BillingMode\": \"PAY_PER_REQUEST\",\n"
	                 "            \"LastUpdateToPayPerRequestDateTime\": "
	                 "\"2023-11-14T22:13:20+00:00\"\n"
	                 "        }\n"
	                 "    }\n"
	                 "}\n");
	result_free(&r);

	/* text output, awscli/text.py style */
	s.canned = "{\"Item\":{\"PK\":{\"S\":\"a\"},\"n\":{\"N\":\"1\"},\"ok\":{\"BOOL\":true}}}";
	r = run_cmd(&s, "get-item", "--table-name", "t", "--key", "PK={S=a}", "--output", "text",
	            NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, "PK\ta\nN\t1\nOK\tTrue\n");
	result_free(&r);
	s.canned = "{\"TableNames\":[\"a\",\"b\"]}";
	r = run_cmd(&s, "--output", "text", "list-tables", NULL);
	ck_assert_str_eq(r.out, "TABLENAMES\ta\nTABLENAMES\tb\n");
	result_free(&r);

	/* shoal status: tables by default, JSON on request */
	s.canned =
	    "{\"Nodes\":[{\"Id\":1,\"Rpc\":\"tcp://127.0.0.1:7180\",\"Raft\":"
	    "\"127.0.0.1:7100\",\"Reachable\":true},{\"Id\":2,\"Rpc\":\"tcp://127.0.0.1:7280\","
	    "\"Raft\":\"127.0.0.1:7200\"}],\"Groups\":[{\"Group\":0,\"Node\":1,\"Role\":"
	    "\"leader\",\"Term\":3,\"CommitIndex\":12,\"AppliedIndex\":12,\"LeaderNode\":1},"
	    "{\"Group\":1,\"Node\":2,\"Role\":\"unreachable\",\"Error\":\"timed out\"},"
	    "{\"Group\":1,\"Node\":1,\"Role\":\"leader\",\"Term\":2,\"CommitIndex\":40,"
	    "\"AppliedIndex\":40,\"LeaderNode\":1,\"OutboxDepth\":5,\"OutboxOldestAgeMs\":12,"
	    "\"Tables\":[{\"TableName\":\"orders\",\"ItemCount\":17,\"SizeBytes\":900,"
	    "\"Indexes\":[{\"IndexName\":\"byCustomer\",\"IndexId\":1,\"ItemCount\":9,"
	    "\"SizeBytes\":300,\"BackfillDone\":true,\"Status\":\"ACTIVE\",\"LagMs\":23,"
	    "\"LagSeen\":true}]}]}],"
	    "\"Partitions\":8}";
	r = run_cmd(&s, "status", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "Cluster: 2 nodes, 2 storage groups, 8 partitions per table") !=
	                  NULL,
	              "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "2     tcp://127.0.0.1:7280"));
	ck_assert_msg(strstr(r.out, " NO        -\n") != NULL, "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "timed out"));
	ck_assert_ptr_nonnull(strstr(r.out, "orders                           1      1     17"));
	/* The change stream: outbox depth and age per replica, index entries. */
	ck_assert_msg(strstr(r.out, "LEADER  OUTBOX   AGE_MS   ERROR") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "1       5        12\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out,
	                     "orders                           byCustomer               1      "
	                     "1     9            300          ACTIVE    done     23\n") != NULL,
	              "%s", r.out);
	result_free(&r);
	r = run_cmd(&s, "status", "--output", "json", NULL);
	ck_assert_ptr_nonnull(strstr(r.out, "\"Partitions\": 8"));
	result_free(&r);
	svc_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* shoal admin, and the map in shoal status                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_admin)
{
	CHECK_BODY("Admin",
	           "{\"AddNode\":{\"Id\":4,\"Raft\":\"127.0.0.1:9400\",\"Rpc\":"
	           "\"tcp://127.0.0.1:9480\"}}",
	           "admin", "add-node", "--node-id", "4", "--raft", "127.0.0.1:9400", "--rpc",
	           "tcp://127.0.0.1:9480");
	CHECK_BODY("Admin", "{\"DrainNode\":4}", "admin", "remove-node", "--node-id", "4",
	           "--no-wait");
	/* The raw operation. */
	CHECK_BODY("Admin", "{\"DrainNode\":3}", "admin", "--drain-node", "3");
	CHECK_FAIL(252, "the following arguments are required: --rpc", "admin", "add-node",
	           "--node-id", "4", "--raft", "h:1");
	CHECK_FAIL(252, "valid choices are:\n\nadd-node | remove-node", "admin", "bogus");
	CHECK_FAIL(252, "a node id is 1 or more", "admin", "remove-node", "--node-id", "0");
	CHECK_FAIL(252, "Unknown options: --wait-for-it", "admin", "remove-node", "--node-id", "2",
	           "--wait-for-it");

	/* The service's refusal, as the AWS CLI prints one. */
	fake_svc s;
	svc_init(&s);
	s.fail_code = SHOAL_E_VALIDATION;
	s.fail_msg = "add_node: node 2 is already in the cluster with other addresses or draining";
	result r = run_cmd(&s, "admin", "add-node", "--node-id", "2", "--raft", "h:1", "--rpc",
	                   "tcp://h:2", NULL);
	ck_assert_int_eq(r.code, 254);
	ck_assert_str_eq(r.err, "An error occurred (ValidationException) when calling the Admin "
	                        "operation: add_node: node 2 is already in the cluster with other "
	                        "addresses or draining\n");
	result_free(&r);
	svc_fini(&s);

	/* remove-node waits: replicas move away, then the node leaves the map. */
	static const char *const seq[] = {
	    "{\"MapEpoch\":7,\"Nodes\":[{\"Id\":1},{\"Id\":4,\"State\":\"draining\"}],"
	    "\"MapGroups\":[{\"Group\":1,\"Replicas\":[{\"Node\":1,\"Voter\":true},"
	    "{\"Node\":4,\"Voter\":true}]},{\"Group\":2,\"Replicas\":[{\"Node\":4,"
	    "\"Voter\":true}]}]}",
	    "{\"MapEpoch\":9,\"Nodes\":[{\"Id\":1},{\"Id\":4,\"State\":\"draining\"}],"
	    "\"MapGroups\":[{\"Group\":1,\"Replicas\":[{\"Node\":1,\"Voter\":true}]},"
	    "{\"Group\":2,\"Replicas\":[{\"Node\":4,\"Voter\":true}]}]}",
	    "{\"MapEpoch\":10,\"Nodes\":[{\"Id\":1},{\"Id\":4,\"State\":\"draining\"}],"
	    "\"MapGroups\":[{\"Group\":1,\"Replicas\":[{\"Node\":1,\"Voter\":true}]}]}",
	    "{\"MapEpoch\":11,\"Nodes\":[{\"Id\":1}],"
	    "\"MapGroups\":[{\"Group\":1,\"Replicas\":[{\"Node\":1,\"Voter\":true}]}]}",
	};
	svc_init(&s);
	s.canned = "{\"MapEpoch\":7}";
	s.status_seq = seq;
	s.n_status = 4;
	r = run_cmd(&s, "admin", "remove-node", "--node-id", "4", "--poll-interval-ms", "10", NULL);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_int_eq(s.calls, 5); /* Admin, then ClusterStatus until gone */
	ck_assert_str_eq(r.err, "node 4: draining, 2 replicas left (groups 1 2)\n"
	                        "node 4: draining, 1 replica left (group 2)\n"
	                        "node 4: holds no replica; waiting for it to leave the cluster "
	                        "map\n"
	                        "node 4: removed from the cluster map (epoch 11)\n");
	json_t *got = json_loads(r.out, 0, NULL);
	assert_json_eq(got, "{\"MapEpoch\":7}");
	json_decref(got);
	result_free(&r);
	svc_fini(&s);

	/* ... and gives up at its timeout, non-zero. */
	svc_init(&s);
	s.status_seq = seq;
	s.n_status = 1;
	r = run_cmd(&s, "admin", "remove-node", "--node-id", "4", "--timeout-secs", "0",
	            "--poll-interval-ms", "10", NULL);
	ck_assert_int_eq(r.code, 255);
	ck_assert_msg(strstr(r.err, "Timed out after 0 seconds waiting for node 4 to be removed: "
	                            "it still holds 2 replicas (groups 1 2)") != NULL,
	              "%s", r.err);
	ck_assert_str_eq(r.out, "");
	result_free(&r);
	svc_fini(&s);

	/* move-partition / split-partition: hashes as 0x text whatever was typed. */
	CHECK_BODY("Admin",
	           "{\"MovePartition\":{\"TableName\":\"orders\",\"Hash\":\"0xffffffffffffffff\","
	           "\"ToGroup\":2}}",
	           "admin", "move-partition", "--table-name", "orders", "--hash",
	           "18446744073709551615", "--to-group", "2", "--no-wait");
	CHECK_BODY("Admin",
	           "{\"SplitPartition\":{\"TableName\":\"orders\",\"At\":\"0x8000000000000000\"}}",
	           "admin", "split-partition", "--table-name", "orders", "--at",
	           "0X8000000000000000", "--no-wait");
	CHECK_BODY("Admin",
	           "{\"SplitPartition\":{\"TableName\":\"o\",\"At\":\"0x0000000000000010\","
	           "\"ToGroup\":3}}",
	           "admin", "split-partition", "--table-name", "o", "--at", "16", "--to-group", "3",
	           "--no-wait");
	CHECK_BODY("Admin",
	           "{\"MovePartition\":{\"TableName\":\"t\",\"Hash\":\"0x10\",\"ToGroup\":2}}",
	           "admin", "--move-partition", "TableName=t,Hash=0x10,ToGroup=2");
	CHECK_FAIL(252, "argument --hash: a hash is a decimal or 0x hexadecimal number", "admin",
	           "move-partition", "--table-name", "t", "--hash", "0x1ffffffffffffffff",
	           "--to-group", "1");
	CHECK_FAIL(252, "(got '-1')", "admin", "move-partition", "--table-name", "t", "--hash",
	           "-1", "--to-group", "1");
	CHECK_FAIL(252, "(got '08z')", "admin", "split-partition", "--table-name", "t", "--at",
	           "08z");
	CHECK_FAIL(252, "argument --at: must be 1 or more", "admin", "split-partition",
	           "--table-name", "t", "--at", "0x0");
	CHECK_FAIL(252, "the following arguments are required: --to-group", "admin",
	           "move-partition", "--table-name", "t", "--hash", "1");
	CHECK_FAIL(252, "argument --to-group: a group id is 0 to 4294967295", "admin",
	           "move-partition", "--table-name", "t", "--hash", "1", "--to-group", "-2");

	/* move-partition waits until the partition is served by the target. */
#define PART_ROW(group, moving)                                                                    \
	"{\"MapEpoch\":5,\"MapPartitions\":[{\"TableId\":7,\"TableName\":\"orders\",\"Lo\":"       \
	"\"0x0000000000000000\",\"Hi\":\"0x7fffffffffffffff\",\"Group\":1,\"MovingTo\":0},"        \
	"{\"TableId\":7,\"TableName\":\"orders\",\"Lo\":\"0x8000000000000000\",\"Hi\":"            \
	"\"0xffffffffffffffff\",\"Group\":" group ",\"MovingTo\":" moving "}]}"
	static const char *const moves[] = {PART_ROW("2", "0"), PART_ROW("2", "3"),
	                                    PART_ROW("3", "0")};
	svc_init(&s);
	s.canned = "{\"MapEpoch\":5}";
	s.status_seq = moves;
	s.n_status = 3;
	r = run_cmd(&s, "admin", "move-partition", "--table-name", "orders", "--hash",
	            "0x9000000000000000", "--to-group", "3", "--poll-interval-ms", "10", NULL);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_int_eq(s.calls, 4); /* Admin, then ClusterStatus until served */
	ck_assert_str_eq(r.err,
	                 "orders [0x8000000000000000, 0xffffffffffffffff]: served by group 2\n"
	                 "orders [0x8000000000000000, 0xffffffffffffffff]: group 2, moving "
	                 "to group 3\n"
	                 "orders [0x8000000000000000, 0xffffffffffffffff]: served by group "
	                 "3\n");
	result_free(&r);
	svc_fini(&s);
	/* ... gives up at its timeout, non-zero, saying where the partition is ... */
	svc_init(&s);
	s.status_seq = moves + 1;
	s.n_status = 1;
	r = run_cmd(&s, "admin", "move-partition", "--table-name", "orders", "--hash",
	            "0x9000000000000000", "--to-group", "3", "--timeout-secs", "0", NULL);
	ck_assert_int_eq(r.code, 255);
	ck_assert_msg(strstr(r.err, "Timed out after 0 seconds waiting for the partition of table "
	                            "orders holding 0x9000000000000000 to be served by group 3 "
	                            "with no move pending: orders [0x8000000000000000, "
	                            "0xffffffffffffffff]: group 2, moving to group 3") != NULL,
	              "%s", r.err);
	ck_assert_str_eq(r.out, "");
	result_free(&r);
	svc_fini(&s);
	/* ... and stops when the move it saw is abandoned. */
	static const char *const aborted[] = {PART_ROW("2", "3"), PART_ROW("2", "0")};
	svc_init(&s);
	s.status_seq = aborted;
	s.n_status = 2;
	r = run_cmd(&s, "admin", "move-partition", "--table-name", "orders", "--hash",
	            "0x9000000000000000", "--to-group", "3", "--poll-interval-ms", "10", NULL);
	ck_assert_int_eq(r.code, 255);
	ck_assert_msg(strstr(r.err, "The move to group 3 was abandoned") != NULL, "%s", r.err);
	result_free(&r);
	svc_fini(&s);
	/* split-partition waits for the upper half, starting at At. */
	svc_init(&s);
	s.status_seq = moves;
	s.n_status = 3;
	r = run_cmd(&s, "admin", "split-partition", "--table-name", "orders", "--at",
	            "0x8000000000000000", "--to-group", "3", "--poll-interval-ms", "10", NULL);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_int_eq(s.calls, 4);
	result_free(&r);
	svc_fini(&s);
	svc_init(&s);
	s.status_seq = moves;
	s.n_status = 1;
	r = run_cmd(&s, "admin", "split-partition", "--table-name", "orders", "--at",
	            "0x9000000000000000", "--timeout-secs", "0", NULL);
	ck_assert_int_eq(r.code, 255);
	ck_assert_msg(strstr(r.err, "orders: no partition of the cluster map starts at "
	                            "0x9000000000000000 yet") != NULL,
	              "%s", r.err);
	result_free(&r);
	svc_fini(&s);

	/* shoal status lists the map's partitions. */
	svc_init(&s);
	s.canned = PART_ROW("2", "3");
	r = run_cmd(&s, "status", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "Partitions (cluster map)\nTABLE                            LO "
	                            "                HI                 GROUP  MOVING_TO\n"
	                            "orders                           0x0000000000000000 "
	                            "0x7fffffffffffffff 1      -\n"
	                            "orders                           0x8000000000000000 "
	                            "0xffffffffffffffff 2      3\n") != NULL,
	              "%s", r.out);
	result_free(&r);
	r = run_cmd(&s, "status", "--output", "json", NULL);
	ck_assert_msg(strstr(r.out, "\"Hi\": \"0xffffffffffffffff\"") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\"MovingTo\": 3") != NULL, "%s", r.out);
	result_free(&r);
	svc_fini(&s);
#undef PART_ROW

	/* shoal status: the map's epoch, each node's state, each replica's role. */
	svc_init(&s);
	s.canned = "{\"Nodes\":[{\"Id\":1,\"Rpc\":\"tcp://h:1\",\"Raft\":\"h:2\",\"Reachable\":"
	           "true,\"State\":\"active\"},{\"Id\":4,\"Rpc\":\"tcp://h:4\",\"Raft\":\"h:5\","
	           "\"State\":\"draining\"}],\"Groups\":[{\"Group\":1,\"Node\":1,\"Role\":"
	           "\"leader\",\"Term\":2},{\"Group\":1,\"Node\":4,\"Role\":\"follower\","
	           "\"Term\":2}],\"Partitions\":3,\"MapEpoch\":12,\"MapGroups\":[{\"Group\":0,"
	           "\"Replicas\":[{\"Node\":1,\"Voter\":true}]},{\"Group\":1,"
	           "\"Replicas\":[{\"Node\":1,\"Voter\":true,\"Replaces\":0},{\"Node\":4,"
	           "\"Voter\":false,\"Replaces\":2}]}]}";
	r = run_cmd(&s, "status", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "2 storage groups, 3 partitions per table, cluster map epoch "
	                            "12\n") != NULL,
	              "%s", r.out);
	ck_assert_msg(strstr(r.out, "NO        draining\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "yes       active\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "1      1     leader      voter         2 ") != NULL, "%s",
	              r.out);
	ck_assert_msg(strstr(r.out, "1      4     follower    non-voter->2  2 ") != NULL, "%s",
	              r.out);
	result_free(&r);
	r = run_cmd(&s, "status", "--output", "json", NULL);
	json_t *j = json_loads(r.out, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(cli_jint(j, "MapEpoch"), 12);
	ck_assert_int_eq(cli_jint(json_array_get(json_object_get(j, "Groups"), 1), "Node"), 4);
	json_decref(j);
	result_free(&r);
	svc_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Pagination                                                                */
/* ------------------------------------------------------------------------ */

/* The SK numbers of the printed Items. */
static void assert_items(const char *out, int from, int to)
{
	json_t *j = json_loads(out, 0, NULL);
	ck_assert_msg(j != NULL, "output is not JSON: %s", out);
	json_t *items = json_object_get(j, "Items");
	ck_assert_uint_eq(json_array_size(items), (size_t)(to - from));
	for (int i = from; i < to; i++) {
		json_t *sk = json_object_get(
		    json_object_get(json_array_get(items, (size_t)(i - from)), "SK"), "N");
		ck_assert_int_eq(atoi(json_string_value(sk)), i);
	}
	ck_assert_int_eq(json_integer_value(json_object_get(j, "Count")), to - from);
	json_decref(j);
}

static char *next_token(const char *out)
{
	json_t *j = json_loads(out, 0, NULL);
	json_t *t = json_object_get(j, "NextToken");
	char *s = t != NULL ? strdup(json_string_value(t)) : NULL;
	json_decref(j);
	return s;
}

START_TEST(test_paginate_all)
{
	fake_svc s;
	svc_init(&s);
	s.n_items = 10;
	result r = run_cmd(&s, "query", "--table-name", "t", "--key-condition-expression",
	                   "PK = :p", "--expression-attribute-values", ":p={S=p}", NULL);
	ck_assert_int_eq(r.code, 0);
	assert_items(r.out, 0, 10);
	/* pages of 3 (the service's size): 3, 3, 3, 1 */
	ck_assert_int_eq(s.calls, 4);
	/* AWS CLI's merged result: no LastEvaluatedKey, ConsumedCapacity null */
	json_t *j = json_loads(r.out, 0, NULL);
	ck_assert_ptr_null(json_object_get(j, "LastEvaluatedKey"));
	ck_assert_ptr_null(json_object_get(j, "NextToken"));
	ck_assert(json_is_null(json_object_get(j, "ConsumedCapacity")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "ScannedCount")), 10);
	const char *order[] = {"Items", "Count", "ScannedCount", "ConsumedCapacity"};
	void *it = json_object_iter(j);
	for (int i = 0; i < 4; i++, it = json_object_iter_next(j, it))
		ck_assert_str_eq(json_object_iter_key(it), order[i]);
	json_decref(j);
	/* each page asked from where the previous stopped */
	assert_json_eq(json_object_get(json_array_get(s.bodies, 1), "ExclusiveStartKey"),
	               "{\"PK\":{\"S\":\"p\"},\"SK\":{\"N\":\"2\"}}");
	ck_assert_ptr_null(json_object_get(json_array_get(s.bodies, 0), "ExclusiveStartKey"));
	result_free(&r);
	svc_fini(&s);

	/* --page-size sets Limit on every call; a full last page means one
	 * more (empty) call, as with DynamoDB */
	svc_init(&s);
	s.n_items = 10;
	r = run_cmd(&s, "scan", "--table-name", "t", "--page-size", "5", NULL);
	ck_assert_int_eq(r.code, 0);
	assert_items(r.out, 0, 10);
	ck_assert_int_eq(s.calls, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(json_integer_value(
		                     json_object_get(json_array_get(s.bodies, (size_t)i), "Limit")),
		                 5);
	result_free(&r);
	svc_fini(&s);
}
END_TEST

START_TEST(test_paginate_tokens)
{
	fake_svc s;
	svc_init(&s);
	s.n_items = 10;
	/* stop inside a page: 5 items of pages [0,1,2] [3,4,5] */
	result r =
	    run_cmd(&s, "scan", "--table-name", "t", "--page-size", "3", "--max-items", "5", NULL);
	ck_assert_int_eq(r.code, 0);
	assert_items(r.out, 0, 5);
	ck_assert_int_eq(s.calls, 2);
	char *tok = next_token(r.out);
	ck_assert_ptr_nonnull(tok);
	json_t *key;
	long long skip;
	ck_assert_int_eq(cli_token_decode(tok, "ExclusiveStartKey", &key, &skip), 0);
	assert_json_eq(key, "{\"PK\":{\"S\":\"p\"},\"SK\":{\"N\":\"2\"}}");
	ck_assert_int_eq(skip, 2);
	json_decref(key);
	result_free(&r);

	/* resume: the page from SK 2 again, skipping 2, then on */
	r = run_cmd(&s, "scan", "--table-name", "t", "--page-size", "3", "--max-items", "4",
	            "--starting-token", tok, NULL);
	ck_assert_int_eq(r.code, 0);
	assert_items(r.out, 5, 9);
	free(tok);
	tok = next_token(r.out);
	ck_assert_ptr_nonnull(tok);
	result_free(&r);
	r = run_cmd(&s, "scan", "--table-name", "t", "--page-size", "3", "--starting-token", tok,
	            NULL);
	ck_assert_int_eq(r.code, 0);
	assert_items(r.out, 9, 10);
	ck_assert_ptr_null(next_token(r.out));
	free(tok);
	result_free(&r);

	/* stop on a page boundary: the token is the page's LastEvaluatedKey */
	r = run_cmd(&s, "scan", "--table-name", "t", "--max-items", "6", NULL);
	assert_items(r.out, 0, 6);
	tok = next_token(r.out);
	ck_assert_int_eq(cli_token_decode(tok, "ExclusiveStartKey", &key, &skip), 0);
	assert_json_eq(key, "{\"PK\":{\"S\":\"p\"},\"SK\":{\"N\":\"5\"}}");
	ck_assert_int_eq(skip, 0);
	json_decref(key);
	free(tok);
	result_free(&r);

	/* --no-paginate, --limit, --exclusive-start-key: one raw page */
	int before = s.calls;
	r = run_cmd(&s, "scan", "--table-name", "t", "--no-paginate", NULL);
	ck_assert_int_eq(s.calls, before + 1);
	json_t *j = json_loads(r.out, 0, NULL);
	assert_json_eq(json_object_get(j, "LastEvaluatedKey"),
	               "{\"PK\":{\"S\":\"p\"},\"SK\":{\"N\":\"2\"}}");
	ck_assert_ptr_null(json_object_get(j, "ConsumedCapacity"));
	json_decref(j);
	result_free(&r);
	r = run_cmd(&s, "query", "--table-name", "t", "--limit", "2", "--exclusive-start-key",
	            "PK={S=p},SK={N=4}", NULL);
	ck_assert_int_eq(s.calls, before + 2);
	assert_items(r.out, 5, 7);
	ck_assert_ptr_nonnull(strstr(r.out, "\"LastEvaluatedKey\""));
	result_free(&r);

	/* bad tokens */
	r = run_cmd(&s, "scan", "--table-name", "t", "--starting-token", "not-a-token", NULL);
	ck_assert_int_eq(r.code, CLI_EXIT_USAGE);
	ck_assert_str_eq(r.err, "Bad starting token: not-a-token\n");
	result_free(&r);
	char *other = cli_token_encode("ExclusiveStartTableName", NULL, 0);
	r = run_cmd(&s, "scan", "--table-name", "t", "--starting-token", other, NULL);
	ck_assert_int_eq(r.code, CLI_EXIT_USAGE);
	free(other);
	result_free(&r);
	svc_fini(&s);
}
END_TEST

START_TEST(test_token_roundtrip)
{
	json_t *key = json_pack("{s:{s:s},s:{s:s}}", "PK", "S", "USER#ü", "SK", "B", "AAE=");
	char *t = cli_token_encode("ExclusiveStartKey", key, 7);
	json_t *back;
	long long n;
	ck_assert_int_eq(cli_token_decode(t, "ExclusiveStartKey", &back, &n), 0);
	ck_assert(json_equal(key, back));
	ck_assert_int_eq(n, 7);
	json_decref(back);
	ck_assert_int_eq(cli_token_decode(t, "ExclusiveStartTableName", &back, &n), -1);
	free(t);
	t = cli_token_encode("ExclusiveStartKey", NULL, 3); /* from the start, skip 3 */
	ck_assert_int_eq(cli_token_decode(t, "ExclusiveStartKey", &back, &n), 0);
	ck_assert(json_is_null(back));
	ck_assert_int_eq(n, 3);
	json_decref(back);
	free(t);
	ck_assert_int_eq(cli_token_decode("", "ExclusiveStartKey", &back, &n), -1);
	ck_assert_int_eq(cli_token_decode("e30=", "ExclusiveStartKey", &back, &n), -1); /* {} */
	json_decref(key);
}
END_TEST

START_TEST(test_paginate_tables)
{
	fake_svc s;
	svc_init(&s);
	s.n_tables = 5;
	s.page = 2;
	result r = run_cmd(&s, "list-tables", NULL);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, "{\n    \"TableNames\": [\n        \"t00\",\n        \"t01\",\n"
	                        "        \"t02\",\n        \"t03\",\n        \"t04\"\n    ]\n}\n");
	ck_assert_int_eq(s.calls, 3);
	result_free(&r);
	r = run_cmd(&s, "list-tables", "--max-items", "3", NULL);
	char *tok = next_token(r.out);
	ck_assert_ptr_nonnull(tok);
	result_free(&r);
	r = run_cmd(&s, "list-tables", "--starting-token", tok, NULL);
	ck_assert_str_eq(r.out, "{\n    \"TableNames\": [\n        \"t03\",\n        \"t04\"\n"
	                        "    ]\n}\n");
	free(tok);
	result_free(&r);
	svc_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The binary                                                                */
/* ------------------------------------------------------------------------ */

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

/* build/tests/test_cli -> build/bin/shoal */
static const char *shoal_binary(void)
{
	static char path[PATH_MAX];
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert_int_gt(n, 0);
	self[n] = '\0';
	snprintf(path, sizeof(path), "%s/../bin/shoal", dirname(self));
	ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
	return path;
}

/* Runs the binary; returns its exit code, stderr in err (malloc'd). */
static int exec_shoal(char **err, const char *env_endpoint, char *const *args)
{
	char errpath[PATH_MAX];
	snprintf(errpath, sizeof(errpath), "%s/stderr", tmp_dir());
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null = open("/dev/null", O_WRONLY);
		dup2(fd, 2);
		dup2(null, 1);
		if (env_endpoint != NULL)
			setenv("SHOAL_ENDPOINT", env_endpoint, 1);
		else
			unsetenv("SHOAL_ENDPOINT");
		execv(shoal_binary(), args);
		_exit(127);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	FILE *f = fopen(errpath, "r");
	ck_assert_ptr_nonnull(f);
	char *buf = calloc(1, 65536);
	size_t got = fread(buf, 1, 65535, f);
	buf[got] = '\0';
	fclose(f);
	*err = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(test_binary)
{
	char *err;
	char *usage[] = {"shoal", "put-item", "--table-name", "t", NULL};
	ck_assert_int_eq(exec_shoal(&err, NULL, usage), 252);
	ck_assert_ptr_nonnull(
	    strstr(err, "shoal: error: the following arguments are required: --item"));
	free(err);

	/* nobody listens on this port: a clear connection error, exit 255 */
	char url[64], endpoint[PATH_MAX + 16];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", closed_port());
	char *conn[] = {
	    "shoal",        "--endpoint", url, "--cli-connect-timeout", "1", "describe-table",
	    "--table-name", "t",          NULL};
	ck_assert_int_eq(exec_shoal(&err, NULL, conn), 255);
	char want[128];
	snprintf(want, sizeof(want), "Could not connect to the endpoint URL: \"%s\"\n", url);
	ck_assert_str_eq(err, want);
	free(err);

	/* the endpoint from $SHOAL_ENDPOINT, as a file:// of cluster.sh's
	 * router.endpoint (two routers, comma-separated, newline-terminated) */
	char file[2048];
	snprintf(file, sizeof(file), "%s/router.endpoint", tmp_dir());
	FILE *f = fopen(file, "w");
	fprintf(f, "%s,tcp://127.0.0.1:%d\n", url, closed_port());
	fclose(f);
	snprintf(endpoint, sizeof(endpoint), "file://%s", file);
	char *envd[] = {"shoal", "--cli-connect-timeout", "1", "list-tables", NULL};
	ck_assert_int_eq(exec_shoal(&err, endpoint, envd), 255);
	snprintf(want, sizeof(want),
	         "Could not connect to the endpoint URL: \"%s,tcp://127.0.0.1:", url);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
	free(err);

	char *missing[] = {"shoal", "--endpoint", "file:///nonexistent/router.endpoint",
	                   "list-tables", NULL};
	ck_assert_int_eq(exec_shoal(&err, NULL, missing), 252);
	ck_assert_ptr_nonnull(strstr(err, "Unable to load paramfile file:///nonexistent"));
	free(err);

	char *bad[] = {"shoal", "--endpoint", "bogus://x", "list-tables", NULL};
	ck_assert_int_eq(exec_shoal(&err, NULL, bad), 255);
	ck_assert_ptr_nonnull(strstr(err, "Invalid endpoint: \"bogus://x\""));
	free(err);
	tmp_done();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Capacity: status, status --hot, top                                       */
/* ------------------------------------------------------------------------ */

static Shoal__PartitionLoad *load_of(const char *table, const char *index, double ru, double rl,
                                     uint64_t rt, double wu, double wl, uint64_t wt)
{
	Shoal__PartitionLoad *l = calloc(1, sizeof(*l));
	shoal__partition_load__init(l);
	l->table = (char *)table;
	l->index = (char *)index;
	l->read_units = ru;
	l->read_limit = rl;
	l->read_throttled = rt;
	l->write_units = wu;
	l->write_limit = wl;
	l->write_throttled = wt;
	return l;
}

static Shoal__HotKey *hot_of(const char *table, const char *index, const char *key, double ru,
                             double wu, uint64_t thr)
{
	Shoal__HotKey *k = calloc(1, sizeof(*k));
	shoal__hot_key__init(k);
	k->table = (char *)table;
	k->index = (char *)index;
	k->key = (char *)key;
	k->read_units = ru;
	k->write_units = wu;
	k->throttled = thr;
	return k;
}

/*
 * A ClusterStatus answer built as the nodes build it (GroupStatus with
 * PartitionLoad and HotKey messages), turned into JSON by the same converter
 * libshoal uses (wire_api_response_to_json): the JSON names the CLI reads
 * are the ones the wire gives.  Group 1: leader on node 1 with a hot base
 * partition (cust#7 read at 2500/s, throttled) and a hot GSI partition
 * (STUDENT), a follower on node 2 whose load must be ignored.  Group 2: the
 * leader on node 3 (term 5), and a stale leader report from node 2 (term 4)
 * that must be ignored too.  Group 0: its leader (node 2, the executor)
 * names cust#7 as a key it does not split, in group 1's upper partition,
 * and STUDENT of GSI byCustomer, in a partition of the GSI space; a
 * follower's stale finding must be ignored.
 */
static char *capacity_status_json(void)
{
	Shoal__GroupStatus g1 = SHOAL__GROUP_STATUS__INIT, g1f = SHOAL__GROUP_STATUS__INIT,
	                   g2 = SHOAL__GROUP_STATUS__INIT, g2s = SHOAL__GROUP_STATUS__INIT;
	Shoal__PartitionLoad *l1[] = {
	    load_of("orders", "", 2900, 3000, 40, 10, 1000, 0),
	    load_of("orders", "byCustomer", 0, 3000, 0, 950, 1000, 5),
	};
	Shoal__HotKey *h1[] = {
	    hot_of("orders", "byCustomer", "{\"S\":\"STUDENT\"}", 0, 900, 5),
	    hot_of("orders", "", "{\"S\":\"cust#7\"}", 2500, 0, 40),
	};
	Shoal__PartitionLoad *l1f[] = {load_of("orders", "", 99999, 3000, 999, 0, 1000, 0)};
	Shoal__HotKey *h1f[] = {hot_of("orders", "", "{\"S\":\"follower\"}", 99999, 0, 0)};
	Shoal__PartitionLoad *l2[] = {load_of("orders", "", 100, 3000, 0, 50, 1000, 0)};
	Shoal__HotKey *h2[] = {hot_of("orders", "", "{\"N\":\"9\"}", 60, 40, 0)};
	Shoal__HotKey *h2s[] = {hot_of("orders", "", "{\"S\":\"stale\"}", 5000, 0, 0)};
	g1.group = 1, g1.node = 1, g1.role = "leader", g1.term = 3, g1.leader_node = 1;
	g1.outbox_depth = 120, g1.outbox_oldest_age_ms = 3400;
	g1.n_load = 2, g1.load = l1, g1.n_hot_keys = 2, g1.hot_keys = h1;
	g1f.group = 1, g1f.node = 2, g1f.role = "follower", g1f.term = 3, g1f.leader_node = 1;
	g1f.n_load = 1, g1f.load = l1f, g1f.n_hot_keys = 1, g1f.hot_keys = h1f;
	g2.group = 2, g2.node = 3, g2.role = "leader", g2.term = 5, g2.leader_node = 3;
	g2.n_load = 1, g2.load = l2, g2.n_hot_keys = 1, g2.hot_keys = h2;
	g2s.group = 2, g2s.node = 2, g2s.role = "leader", g2s.term = 4, g2s.leader_node = 2;
	g2s.n_hot_keys = 1, g2s.hot_keys = h2s;
	Shoal__UnsplitKey u0 = SHOAL__UNSPLIT_KEY__INIT, u0f = SHOAL__UNSPLIT_KEY__INIT;
	u0.table = "orders", u0.key = "{\"S\":\"cust#7\"}", u0.group = 1;
	u0.lo = 0x8000000000000000ull, u0.hash = 0x9abcdef012345678ull, u0.reason = "load";
	u0.first_seen_ms = 42000, u0.last_seen_ms = 900;
	u0f = u0, u0f.key = "{\"S\":\"old\"}";
	Shoal__UnsplitKey ug = u0;
	ug.index = "byCustomer", ug.key = "{\"S\":\"STUDENT\"}", ug.lo = 0x4000000000000000ull;
	Shoal__UnsplitKey *us0[] = {&u0, &ug}, *us0f[] = {&u0f};
	Shoal__GroupStatus g0 = SHOAL__GROUP_STATUS__INIT, g0f = SHOAL__GROUP_STATUS__INIT;
	g0.group = 0, g0.node = 2, g0.role = "leader", g0.term = 2, g0.leader_node = 2;
	g0.n_unsplit_keys = 2, g0.unsplit_keys = us0;
	g0f.group = 0, g0f.node = 1, g0f.role = "follower", g0f.term = 2, g0f.leader_node = 2;
	g0f.n_unsplit_keys = 1, g0f.unsplit_keys = us0f;
	Shoal__GroupStatus *gs[] = {&g0f, &g0, &g2s, &g1f, &g1, &g2};
	Shoal__NodeInfo n1 = SHOAL__NODE_INFO__INIT, *ns[] = {&n1};
	n1.id = 1, n1.rpc = "tcp://127.0.0.1:7180", n1.raft = "127.0.0.1:7100", n1.reachable = 1;
	Shoal__ClusterStatusResponse cs = SHOAL__CLUSTER_STATUS_RESPONSE__INIT;
	cs.n_nodes = 1, cs.nodes = ns, cs.n_groups = 6, cs.groups = gs, cs.partitions = 3;
	Shoal__Response resp = SHOAL__RESPONSE__INIT;
	resp.result_case = SHOAL__RESPONSE__RESULT_CLUSTER_STATUS;
	resp.cluster_status = &cs;
	json_t *j;
	char m[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_api_response_to_json(&resp, "ClusterStatus", &j, m), SHOAL_OK);
	char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	for (size_t i = 0; i < 2; i++) {
		free(l1[i]);
		free(h1[i]);
	}
	free(l1f[0]), free(h1f[0]), free(l2[0]), free(h2[0]), free(h2s[0]);
	return text;
}

/* The offset of needle in hay (fails when absent). */
static size_t at(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);
	ck_assert_msg(p != NULL, "\"%s\" not in:\n%s", needle, hay);
	return (size_t)(p - hay);
}

START_TEST(test_status_capacity)
{
	fake_svc s;
	svc_init(&s);
	char *canned = capacity_status_json();
	s.canned = canned;

	/* status: the partitions' load, busiest first, leaders only. */
	result r = run_cmd(&s, "status", NULL);
	ck_assert_int_eq(r.code, 0);
	size_t title = at(r.out, "Partition load (units/s over the last second; 3 hot keys");
	size_t base1 =
	    at(r.out, "orders                   -                    1    1    2900.0     "
	              "3000     40      10.0     1000      0    97\n");
	size_t gsi1 =
	    at(r.out, "orders                   byCustomer           1    1       0.0     "
	              "3000      0     950.0     1000      5    95\n");
	size_t base2 = at(r.out, "orders                   -                    2    3     100.0");
	ck_assert(title < base1 && base1 < gsi1 && gsi1 < base2);
	ck_assert_ptr_null(strstr(r.out, "99999"));
	/* The key the executor does not split, in its own group (1, not group
	 * 0's row it came in), the follower's ignored. */
	size_t ns0 = at(r.out, "\nNot split: a single key carries most of its partition's load");
	size_t u7 = at(r.out, "orders                   -                {\"S\":\"cust#7\"}    "
	                      "                   1 0x8000000000000000 load   1 s ago (first "
	                      "42 s ago)\n");
	size_t ug = at(r.out, "orders                   byCustomer       {\"S\":\"STUDENT\"}   "
	                      "                   1 0x4000000000000000 load   1 s ago (first "
	                      "42 s ago)\n");
	ck_assert(base2 < ns0 && ns0 < ug && ug < u7); /* by table, group, key */
	ck_assert_ptr_null(strstr(r.out, "old"));
	result_free(&r);

	/* status --hot: the heaviest keys of the cluster, heaviest first. */
	r = run_cmd(&s, "status", "--hot", NULL);
	ck_assert_int_eq(r.code, 0);
	at(r.out, "TABLE                    INDEX            KEY                                 "
	          "READ/S   WRITE/S THROTTLED GROUP NODE\n");
	size_t k7 = at(r.out, "orders                   -                {\"S\":\"cust#7\"}       "
	                      "               2500.0       0.0        40     1    1\n");
	size_t ks = at(r.out, "orders                   byCustomer       {\"S\":\"STUDENT\"}");
	size_t k9 = at(r.out, "{\"N\":\"9\"}");
	ck_assert(k7 < ks && ks < k9);
	ck_assert_ptr_null(strstr(r.out, "follower"));
	ck_assert_ptr_null(strstr(r.out, "stale"));
	result_free(&r);

	/* --output json: {"HotKeys": [...]} in the same order, with each key's
	 * group and reporting node. */
	r = run_cmd(&s, "status", "--hot", "--output", "json", NULL);
	ck_assert_int_eq(r.code, 0);
	json_t *j = json_loads(r.out, 0, NULL);
	ck_assert_msg(j != NULL, "%s", r.out);
	assert_json_eq(
	    j, "{\"HotKeys\":[{\"Table\":\"orders\",\"Key\":\"{\\\"S\\\":\\\"cust#7\\\"}\","
	       "\"ReadUnits\":2500.0,\"Throttled\":40,\"Group\":1,\"Node\":1},"
	       "{\"Table\":\"orders\",\"Index\":\"byCustomer\","
	       "\"Key\":\"{\\\"S\\\":\\\"STUDENT\\\"}\",\"WriteUnits\":900.0,\"Throttled\":5,"
	       "\"Group\":1,\"Node\":1},"
	       "{\"Table\":\"orders\",\"Key\":\"{\\\"N\\\":\\\"9\\\"}\",\"ReadUnits\":60.0,"
	       "\"WriteUnits\":40.0,\"Group\":2,\"Node\":3}]}");
	json_decref(j);
	result_free(&r);
	/* A flag takes no value. */
	r = run_cmd(&s, "status", "--hot=yes", NULL);
	ck_assert_int_eq(r.code, 252);
	result_free(&r);

	/* No load reported (before the node side fills it): no section. */
	s.canned = "{\"Nodes\":[],\"Groups\":[{\"Group\":0,\"Node\":1,\"Role\":\"leader\"}]}";
	r = run_cmd(&s, "status", NULL);
	ck_assert_ptr_null(strstr(r.out, "Partition load"));
	result_free(&r);
	r = run_cmd(&s, "status", "--hot", "--output", "json", NULL);
	ck_assert_str_eq(r.out, "{\n    \"HotKeys\": []\n}\n");
	result_free(&r);
	free(canned);
	svc_fini(&s);
}
END_TEST

START_TEST(test_top_render)
{
	char *canned = capacity_status_json();
	json_t *st = json_loads(canned, 0, NULL);
	ck_assert_ptr_nonnull(st);
	char *text;
	size_t len;
	cli_top_view v = {.endpoint = "tcp://127.0.0.1:8100", .interval_s = 1, .clock = "10:00:00"};
	FILE *f = open_memstream(&text, &len);
	cli_top_render(f, st, &v);
	fclose(f);
	at(text, "shoal top -- tcp://127.0.0.1:8100 -- 10:00:00, every 1.0 s -- q to quit\n");
	at(text, "1 nodes (1 reachable), 3 partitions reporting load, throttled 40 reads/s 5 "
	         "writes/s\n");
	size_t parts = at(text, "BUSIEST PARTITIONS\n");
	size_t p1 = at(text, "orders                   -                    1    1    2900.0");
	size_t hot = at(text, "HOTTEST KEYS\n");
	size_t k7 = at(text, "{\"S\":\"cust#7\"}");
	size_t lag = at(text, "INDEX LAG\n");
	/* The group most behind first: group 1's outbox, 120 deltas, 3.4 s. */
	size_t g1 = at(text, "    1    1        120       3400  -\n");
	size_t g2 = at(text, "    2    3          0          0  -\n");
	ck_assert(parts < p1 && p1 < hot && hot < k7 && k7 < lag && lag < g1 && g1 < g2);
	/* The stale leader report of group 2 (node 2, term 4) is not a row. */
	ck_assert_ptr_null(strstr(text, "    2    2 "));
	free(text);

	/* A small terminal: (20 - 12) / 3 = 2 rows a section. */
	v.height = 20;
	v.width = 80;
	v.error = "Could not connect to the endpoint URL: \"tcp://127.0.0.1:8100\"";
	f = open_memstream(&text, &len);
	cli_top_render(f, st, &v);
	fclose(f);
	at(text, "refresh failed: Could not connect");
	at(text, "{\"S\":\"STUDENT\"}");
	ck_assert_ptr_null(strstr(text, "{\"N\":\"9\"}"));
	ck_assert_ptr_null(strstr(text, "    2    3     100.0"));
	free(text);
	json_decref(st);

	/* Before any answer. */
	f = open_memstream(&text, &len);
	cli_top_render(f, NULL, &v);
	fclose(f);
	at(text, "0 nodes (0 reachable), 0 partitions reporting load");
	at(text, "(no group reports a leader)");
	free(text);

	/* paint: home, each line cut to the width and cleared, then the rest. */
	f = open_memstream(&text, &len);
	paint(f, "abcdef\nxy\nthird\n", 4, 2);
	fclose(f);
	ck_assert_str_eq(text, "\033[Habcd\033[K\r\nxy\033[K\033[J");
	free(text);
	free(canned);
}
END_TEST

START_TEST(test_top_command)
{
	fake_svc s;
	svc_init(&s);
	char *canned = capacity_status_json();
	s.canned = canned;
	/* Not a terminal: screens one after another, no escapes; --iterations
	 * ends it. */
	result r = run_cmd(&s, "top", "--interval", "0.05", "--iterations", "3", NULL);
	ck_assert_msg(r.code == 0, "%s", r.err);
	ck_assert_int_eq(s.calls, 3);
	ck_assert_str_eq(s.op, "ClusterStatus");
	const char *p = r.out;
	int screens = 0;
	while ((p = strstr(p, "BUSIEST PARTITIONS")) != NULL) {
		screens++;
		p++;
	}
	ck_assert_int_eq(screens, 3);
	ck_assert_ptr_null(strchr(r.out, '\033'));
	at(r.out, "{\"S\":\"cust#7\"}");
	result_free(&r);

	/* A failing service: the screen says so, the exit code as for any
	 * call. */
	s.fail_code = SHOAL_E_UNAVAILABLE;
	s.fail_source = SHOAL_SRC_CONNECT;
	s.fail_msg = "Could not connect to the endpoint URL: \"tcp://127.0.0.1:1\"";
	r = run_cmd(&s, "top", "--iterations=1", NULL);
	ck_assert_int_eq(r.code, 255);
	at(r.out, "refresh failed: Could not connect");
	at(r.err, "Could not connect");
	result_free(&r);

	/* Bad options; help lists top. */
	const char *bad[][2] = {{"--interval", "0"}, {"--interval", "x"}, {"--iterations", "-1"}};
	for (size_t i = 0; i < 3; i++) {
		r = run_cmd(&s, "top", bad[i][0], bad[i][1], NULL);
		ck_assert_int_eq(r.code, 252);
		at(r.err, "argument --");
		result_free(&r);
	}
	r = run_cmd(&s, "top", "--hot", NULL);
	ck_assert_int_eq(r.code, 252);
	at(r.err, "Unknown options: --hot");
	result_free(&r);
	r = run_cmd(&s, "help", NULL);
	at(r.out, "  top                    live view");
	at(r.out, "SHOAL_MAX_ATTEMPTS");
	result_free(&r);
	free(canned);
	svc_fini(&s);
}
END_TEST

START_TEST(test_max_attempts_env)
{
	cli_env env = {.in_fd = -1};
	run r;
	shoal_options o;
	memset(&r, 0, sizeof(r));
	r.env = &env;
	/* Unset: libshoal's defaults. */
	ck_assert_int_eq(client_options(&r, &o), 0);
	ck_assert_int_eq(o.throttle_retries, 9);
	ck_assert_int_eq(o.retries, 2);
	/* AWS_MAX_ATTEMPTS counts the first attempt, as the AWS CLI's. */
	env.aws_max_attempts_env = "4";
	ck_assert_int_eq(client_options(&r, &o), 0);
	ck_assert_int_eq(o.throttle_retries, 3);
	ck_assert_int_eq(o.retries, 3);
	/* SHOAL_MAX_ATTEMPTS first. */
	env.max_attempts_env = "1";
	ck_assert_int_eq(client_options(&r, &o), 0);
	ck_assert_int_eq(o.throttle_retries, 0);
	ck_assert_int_eq(o.retries, 0);
	env.max_attempts_env = "0";
	ck_assert_int_lt(client_options(&r, &o), 0);
	ck_assert_int_eq(r.fail.exit_code, 252);
	ck_assert_ptr_nonnull(strstr(r.fail.text, "Invalid value for SHOAL_MAX_ATTEMPTS: '0'"));
	env.max_attempts_env = NULL;
	env.aws_max_attempts_env = "3x";
	ck_assert_int_lt(client_options(&r, &o), 0);
	ck_assert_ptr_nonnull(strstr(r.fail.text, "AWS_MAX_ATTEMPTS: '3x'"));
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_shorthand_parse);
	tcase_add_test(tc, test_shorthand_convert);
	tcase_add_test(tc, test_bodies_tables);
	tcase_add_test(tc, test_bodies_items);
	tcase_add_test(tc, test_file_values);
	tcase_add_test(tc, test_usage_errors);
	tcase_add_test(tc, test_service_errors);
	tcase_add_test(tc, test_output);
	tcase_add_test(tc, test_admin);
	tcase_add_test(tc, test_paginate_all);
	tcase_add_test(tc, test_paginate_tokens);
	tcase_add_test(tc, test_token_roundtrip);
	tcase_add_test(tc, test_paginate_tables);
	tcase_add_test(tc, test_binary);
	tcase_add_test(tc, test_status_capacity);
	tcase_add_test(tc, test_top_render);
	tcase_add_test(tc, test_top_command);
	tcase_add_test(tc, test_max_attempts_env);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(cli_suite)
