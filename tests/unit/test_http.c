/*
 * The HTTP endpoint's pure parts (router/http.h): X-Amz-Target parsing,
 * x-amz-crc32, Content-Type, the credentials file, and SigV4 against AWS's
 * published Signature Version 4 test-suite vectors (get-vanilla,
 * get-vanilla-query-order-key-case, post-x-www-form-urlencoded; credentials
 * AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830T123600Z,
 * us-east-1, service "service").
 *
 * And the router's HTTP server (router/httpd.h): its request head parser
 * (test_parse_*), then the server itself on 127.0.0.1 with a test endpoint
 * that answers from its own thread, as the router's pipeline does
 * (test_srv_*): keep-alive, pipelining, Expect: 100-continue, HTTP/1.0,
 * answers larger than the socket buffers, the limits and timeouts, and
 * stopping with a request in the endpoint's hands.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/ssl.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "router/http.h"
#include "router/httpd.h"
#include "tests/lib/testlib.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define T0     1440938160 /* 2015-08-30T12:36:00Z */

START_TEST(test_target)
{
	ck_assert_str_eq(rt_http_target_op("DynamoDB_20120810.PutItem"), "PutItem");
	ck_assert_str_eq(rt_http_target_op("DynamoDB_20120810.TransactWriteItems"),
	                 "TransactWriteItems");
	ck_assert_ptr_null(rt_http_target_op(NULL));
	ck_assert_ptr_null(rt_http_target_op(""));
	ck_assert_ptr_null(rt_http_target_op("DynamoDB_20120810."));
	/* DynamoDB Streams' operations under their own service's prefix only. */
	ck_assert_str_eq(rt_http_target_op("DynamoDBStreams_20120810.GetRecords"), "GetRecords");
	ck_assert_ptr_null(rt_http_target_op("DynamoDB_20120810.GetRecords"));
	ck_assert_ptr_null(rt_http_target_op("DynamoDBStreams_20120810.PutItem"));
	ck_assert_ptr_null(rt_http_target_op("DynamoDBStreams_20120810."));
	ck_assert_ptr_null(rt_http_target_op("PutItem"));
}
END_TEST

START_TEST(test_crc32)
{
	char c[11];
	rt_http_crc32("123456789", 9, c); /* the CRC-32 check value 0xCBF43926 */
	ck_assert_str_eq(c, "3421780262");
	rt_http_crc32("{}", 2, c);
	ck_assert_str_eq(c, "2745614147");
	rt_http_crc32("", 0, c);
	ck_assert_str_eq(c, "0");
}
END_TEST

START_TEST(test_content_type)
{
	ck_assert(rt_http_content_type_ok(NULL));
	ck_assert(rt_http_content_type_ok("application/x-amz-json-1.0"));
	ck_assert(rt_http_content_type_ok("application/x-amz-json-1.1"));
	ck_assert(rt_http_content_type_ok("application/x-amz-json-1.0; charset=utf-8"));
	ck_assert(rt_http_content_type_ok("Application/JSON"));
	ck_assert(!rt_http_content_type_ok("text/plain"));
	ck_assert(!rt_http_content_type_ok("application/x-amz-json-1.00"));
	ck_assert(!rt_http_content_type_ok("application/x-www-form-urlencoded"));
}
END_TEST

/* Text of n copies of unit, separated by sep, between pre and post
 * (sh_malloc'd). */
static char *repeat(const char *pre, const char *unit, const char *sep, const char *post, size_t n)
{
	size_t ul = strlen(unit), sl = strlen(sep);
	char *t = sh_malloc(strlen(pre) + n * (ul + sl) + strlen(post) + 1), *p = t;
	ck_assert_ptr_nonnull(t);
	p = stpcpy(p, pre);
	for (size_t i = 0; i < n; i++) {
		p = stpcpy(p, unit);
		if (i + 1 < n)
			p = stpcpy(p, sep);
	}
	strcpy(p, post);
	return t;
}

START_TEST(test_json_budget)
{
	/* A JSON body's decode may allocate at most 40 bytes per byte of text
	 * (proto/wire_json.c): an array of empty objects (72 per byte with
	 * jansson; a 16 MiB body of them added 1.1 GB to the router) is
	 * refused as too complex by the count of its tokens, before anything
	 * is allocated; one of empty arrays (40 per byte, at least 35 by the
	 * count) by the allocation budget, having allocated at most the
	 * budget; the densest realistic shape measured, a list of numbers (32
	 * per byte), decodes. */
	char m[SH_ERRMSG_SIZE];
	json_t *j = NULL;
	char *flood =
	    repeat("{\"TableName\":\"t\",\"Item\":{\"l\":{\"L\":[", "{}", ",", "]}}}", 700000);
	ck_assert_int_eq(wire_json_parse(flood, strlen(flood), &j, m), SHOAL_E_VALIDATION);
	ck_assert_ptr_null(j);
	ck_assert_msg(strstr(m, "Request too complex") != NULL, "%s", m);
	sh_free(flood);
	flood = repeat("[", "[]", ",", "]", 700000);
	ck_assert_int_eq(wire_json_parse(flood, strlen(flood), &j, m), SHOAL_E_VALIDATION);
	sh_free(flood);
	char *nums = repeat("{\"TableName\":\"t\",\"Item\":{\"l\":{\"L\":[", "{\"N\":\"1\"}", ",",
	                    "]}}}", 100000);
	ck_assert_int_eq(wire_json_parse(nums, strlen(nums), &j, m), SHOAL_OK);
	ck_assert_ptr_nonnull(j);
	json_decref(j);
	sh_free(nums);
	/* Small texts have 1 MiB of room whatever their ratio. */
	const char *small = "[{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]";
	ck_assert_int_eq(wire_json_parse(small, strlen(small), &j, m), SHOAL_OK);
	json_decref(j);
}
END_TEST

/* A request's headers for the SigV4 tests. */
typedef struct hdrs {
	const char *names[8];
	const char *values[8];
} hdrs;

static const char *get_hdr(void *ctx, const char *name)
{
	hdrs *h = ctx;
	for (int i = 0; i < 8 && h->names[i] != NULL; i++)
		if (strcasecmp(h->names[i], name) == 0)
			return h->values[i];
	return NULL;
}

static void check_vector(const char *method, const char *uri, hdrs *h, const char *body,
                         const char *signed_headers, const char *want_canon, const char *want_sts,
                         const char *want_sig)
{
	rt_sigv4_req r = {method, uri, get_hdr, h, body, body != NULL ? strlen(body) : 0};
	char *canon, *sts, m[SH_ERRMSG_SIZE], sig[65];
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, signed_headers, &canon, m), SHOAL_OK);
	ck_assert_str_eq(canon, want_canon);
	ck_assert_int_eq(rt_sigv4_string_to_sign("20150830T123600Z",
	                                         "20150830/us-east-1/service/aws4_request", canon,
	                                         &sts),
	                 SHOAL_OK);
	ck_assert_str_eq(sts, want_sts);
	rt_sigv4_sign(SECRET, "20150830", "us-east-1", "service", sts, sig);
	ck_assert_str_eq(sig, want_sig);
	sh_free(canon);
	sh_free(sts);
}

START_TEST(test_sigv4_get_vanilla)
{
	hdrs h = {{"Host", "X-Amz-Date"}, {"example.amazonaws.com", "20150830T123600Z"}};
	check_vector("GET", "/", &h, NULL, "host;x-amz-date",
	             "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
	             "host;x-amz-date\n"
	             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	             "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
	             "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
	             "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}
END_TEST

START_TEST(test_sigv4_query_order)
{
	/* get-vanilla-query-order-key-case: parameters sorted by name. */
	hdrs h = {{"Host", "X-Amz-Date"}, {"example.amazonaws.com", "20150830T123600Z"}};
	rt_sigv4_req r = {"GET", "/?Param2=value2&Param1=value1", get_hdr, &h, NULL, 0};
	char *canon, *sts, m[SH_ERRMSG_SIZE], sig[65];
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, "host;x-amz-date", &canon, m), SHOAL_OK);
	ck_assert_str_eq(canon, "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
	                        "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
	                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	ck_assert_int_eq(rt_sigv4_string_to_sign("20150830T123600Z",
	                                         "20150830/us-east-1/service/aws4_request", canon,
	                                         &sts),
	                 SHOAL_OK);
	rt_sigv4_sign(SECRET, "20150830", "us-east-1", "service", sts, sig);
	ck_assert_str_eq(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	sh_free(canon);
	sh_free(sts);
}
END_TEST

START_TEST(test_sigv4_post_form)
{
	/* post-x-www-form-urlencoded: a signed Content-Type and a body. */
	hdrs h = {
	    {"Content-Type", "Host", "X-Amz-Date"},
	    {"application/x-www-form-urlencoded", "example.amazonaws.com", "20150830T123600Z"}};
	rt_sigv4_req r = {"POST", "/", get_hdr, &h, "Param1=value1", 13};
	char *canon, *sts, m[SH_ERRMSG_SIZE], sig[65];
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, "content-type;host;x-amz-date", &canon, m),
	                 SHOAL_OK);
	ck_assert_int_eq(rt_sigv4_string_to_sign("20150830T123600Z",
	                                         "20150830/us-east-1/service/aws4_request", canon,
	                                         &sts),
	                 SHOAL_OK);
	rt_sigv4_sign(SECRET, "20150830", "us-east-1", "service", sts, sig);
	ck_assert_str_eq(sig, "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
	sh_free(canon);
	sh_free(sts);
}
END_TEST

START_TEST(test_sigv4_header_values)
{
	/* Values are trimmed and inner runs of spaces collapse to one. */
	hdrs h = {{"Host", "My-Header1"}, {"example.amazonaws.com", "  value1   value2  "}};
	rt_sigv4_req r = {"GET", "", get_hdr, &h, NULL, 0};
	char *canon, m[SH_ERRMSG_SIZE];
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, "host;my-header1", &canon, m), SHOAL_OK);
	ck_assert_ptr_nonnull(strstr(canon, "\nmy-header1:value1 value2\n"));
	ck_assert(strncmp(canon, "GET\n/\n\n", 7) == 0);
	sh_free(canon);
	/* A signed header that is absent cannot verify. */
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, "host;x-amz-date", &canon, m),
	                 SHOAL_E_VALIDATION);
	/* Path bytes outside the unreserved set are percent-encoded. */
	r.uri = "/a b/~c";
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, "host", &canon, m), SHOAL_OK);
	ck_assert(strncmp(canon, "GET\n/a%20b/~c\n", 14) == 0);
	sh_free(canon);
}
END_TEST

START_TEST(test_sigv4_parse_auth)
{
	rt_sigv4_auth a;
	char m[SH_ERRMSG_SIZE];
	ck_assert(rt_sigv4_parse_auth(
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/dynamodb/aws4_request, "
	    "SignedHeaders=host;x-amz-date, "
	    "Signature=5FA00FA31553B73EBF1942676E86291E8372FF2A2260956D9B8AAE1D763FBF31",
	    &a, m));
	ck_assert_str_eq(a.key_id, "AKIDEXAMPLE");
	ck_assert_str_eq(a.date, "20150830");
	ck_assert_str_eq(a.region, "us-east-1");
	ck_assert_str_eq(a.service, "dynamodb");
	ck_assert_str_eq(a.signed_headers, "host;x-amz-date");
	ck_assert_str_eq(a.signature,
	                 "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	ck_assert(!rt_sigv4_parse_auth("Basic dXNlcjpwYXNz", &a, m));
	ck_assert(!rt_sigv4_parse_auth("AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/x/"
	                               "aws4_request, SignedHeaders=host",
	                               &a, m));
	ck_assert(!rt_sigv4_parse_auth("AWS4-HMAC-SHA256 Credential=AKID/2015/us-east-1, "
	                               "SignedHeaders=host, Signature=" SECRET,
	                               &a, m));
}
END_TEST

static char cred_dir[1024], cred_path[1100];

static void write_creds(const char *text)
{
	if (cred_dir[0] == '\0')
		snprintf(cred_dir, sizeof(cred_dir), "%s", tl_tmpdir("http"));
	snprintf(cred_path, sizeof(cred_path), "%s/creds", cred_dir);
	FILE *f = fopen(cred_path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Signs a POST of `body` with the given headers (names[0..] with values)
 * over `signed_headers`, into auth. */
static void sign_post(hdrs *h, const char *body, const char *signed_headers, char *auth, size_t n)
{
	rt_sigv4_req r = {"POST", "/", get_hdr, h, body, strlen(body)};
	char *canon, *sts, m[SH_ERRMSG_SIZE], sig[65];
	ck_assert_int_eq(rt_sigv4_canonical_request(&r, signed_headers, &canon, m), SHOAL_OK);
	ck_assert_int_eq(rt_sigv4_string_to_sign("20150830T123600Z",
	                                         "20150830/us-east-1/dynamodb/aws4_request", canon,
	                                         &sts),
	                 SHOAL_OK);
	rt_sigv4_sign(SECRET, "20150830", "us-east-1", "dynamodb", sts, sig);
	sh_free(canon);
	sh_free(sts);
	snprintf(
	    auth, n,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/dynamodb/aws4_request, "
	    "SignedHeaders=%s, Signature=%s",
	    signed_headers, sig);
}

/* The signature must cover the host, the date and the operation: a
 * captured GetItem replayed as a DeleteItem (issue 15) is refused. */
START_TEST(test_sigv4_signed_headers)
{
	write_creds("AKIDEXAMPLE " SECRET "\n");
	rt_creds c;
	char m[SH_ERRMSG_SIZE], auth[512];
	ck_assert_int_eq(rt_creds_load(cred_path, &c, m), SHOAL_OK);
	const char *body = "{\"TableName\":\"t\",\"Key\":{\"pk\":{\"S\":\"a\"}}}";
	hdrs h = {{"Host", "X-Amz-Date", "X-Amz-Target", "Authorization"},
	          {"localhost:8000", "20150830T123600Z", "DynamoDB_20120810.GetItem", auth}};
	rt_sigv4_req r = {"POST", "/", get_hdr, &h, body, strlen(body)};

	sign_post(&h, body, "host;x-amz-date;x-amz-target", auth, sizeof(auth));
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_OK);
	h.values[2] = "DynamoDB_20120810.DeleteItem"; /* the replay */
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);

	/* Signed without the target: refused before the signature is even
	 * checked, whatever the target says. */
	h.values[2] = "DynamoDB_20120810.GetItem";
	sign_post(&h, body, "host;x-amz-date", auth, sizeof(auth));
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_INCOMPLETE);
	ck_assert_str_eq(m, "'X-Amz-Target' must be a 'SignedHeader' in the AWS Authorization.");
	sign_post(&h, body, "x-amz-date;x-amz-target", auth, sizeof(auth));
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_INCOMPLETE);
	ck_assert_str_eq(
	    m, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
	sign_post(&h, body, "host;x-amz-target", auth, sizeof(auth));
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_INCOMPLETE);
	ck_assert_str_eq(m, "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.");
	rt_creds_free(&c);
	tl_rmtree(cred_dir);
	cred_dir[0] = '\0';
}
END_TEST

START_TEST(test_sigv4_verify)
{
	write_creds("# test credentials\n\nAKIDEXAMPLE " SECRET "\nother  s3cr3t\n");
	rt_creds c;
	char m[SH_ERRMSG_SIZE];
	ck_assert_int_eq(rt_creds_load(cred_path, &c, m), SHOAL_OK);
	ck_assert_uint_eq(c.n, 2);
	ck_assert_str_eq(rt_creds_find(&c, "other"), "s3cr3t");
	ck_assert_ptr_null(rt_creds_find(&c, "nobody"));

	char auth[512];
	snprintf(auth, sizeof(auth),
	         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
	         "SignedHeaders=host;x-amz-date, "
	         "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	hdrs h = {{"Host", "X-Amz-Date", "Authorization"},
	          {"example.amazonaws.com", "20150830T123600Z", auth}};
	rt_sigv4_req r = {"GET", "/", get_hdr, &h, NULL, 0};
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_OK);
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0 + 14 * 60, m), RT_AUTH_OK);
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0 - 14 * 60, m), RT_AUTH_OK);

	/* More than 15 minutes of skew either way. */
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0 + 16 * 60, m), RT_AUTH_SIGNATURE);
	ck_assert_ptr_nonnull(strstr(m, "Signature expired: 20150830T123600Z is now earlier than"));
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0 - 16 * 60, m), RT_AUTH_SIGNATURE);

	/* A changed body, method or header breaks the signature. */
	r.body = "x";
	r.body_len = 1;
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);
	ck_assert_ptr_nonnull(strstr(m, "The request signature we calculated does not match"));
	r.body = NULL;
	r.body_len = 0;
	r.method = "POST";
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);
	r.method = "GET";
	h.values[0] = "example.amazonaws.com:80";
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);
	h.values[0] = "example.amazonaws.com";
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_OK);

	/* The right signature by an unknown key id; a wrong secret. */
	snprintf(auth, sizeof(auth),
	         "AWS4-HMAC-SHA256 Credential=NOBODY/20150830/us-east-1/service/aws4_request, "
	         "SignedHeaders=host;x-amz-date, "
	         "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_UNRECOGNIZED);
	ck_assert_str_eq(m, "The security token included in the request is invalid.");
	snprintf(auth, sizeof(auth),
	         "AWS4-HMAC-SHA256 Credential=other/20150830/us-east-1/service/aws4_request, "
	         "SignedHeaders=host;x-amz-date, "
	         "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);

	/* A scope date other than the request's. */
	snprintf(auth, sizeof(auth),
	         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150831/us-east-1/service/aws4_request, "
	         "SignedHeaders=host;x-amz-date, "
	         "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_SIGNATURE);

	/* Malformed and missing. */
	snprintf(auth, sizeof(auth), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE");
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_INCOMPLETE);
	h.names[2] = "X-Other";
	ck_assert_int_eq(rt_sigv4_verify(&c, &r, T0, m), RT_AUTH_MISSING);
	ck_assert_str_eq(m, "Request is missing Authentication Token");
	ck_assert_str_eq(rt_auth_error_type(RT_AUTH_UNRECOGNIZED),
	                 "com.amazon.coral.service#UnrecognizedClientException");
	rt_creds_free(&c);
	tl_rmtree(cred_dir);
	cred_dir[0] = '\0';
}
END_TEST

START_TEST(test_creds_bad)
{
	rt_creds c;
	char m[SH_ERRMSG_SIZE];
	write_creds("# nothing\n");
	ck_assert_int_eq(rt_creds_load(cred_path, &c, m), SHOAL_E_VALIDATION);
	write_creds("a b c\n");
	ck_assert_int_eq(rt_creds_load(cred_path, &c, m), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(m, "line 1"));
	write_creds("a b\na c\n");
	ck_assert_int_eq(rt_creds_load(cred_path, &c, m), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(m, "repeated"));
	ck_assert_int_eq(rt_creds_load("/nonexistent/creds", &c, m), SHOAL_E_VALIDATION);
	tl_rmtree(cred_dir);
	cred_dir[0] = '\0';
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The request head parser (router/httpd_parse.c)                            */
/* ------------------------------------------------------------------------ */

/* Parses text (copied: the parser writes into its buffer) in one call. */
static rt_httpd_parse_rc parse_text(const char *text, char *buf, size_t cap, rt_httpd_head *h)
{
	size_t n = strlen(text), scanned = 0;
	ck_assert_uint_lt(n, cap);
	memcpy(buf, text, n + 1);
	return rt_httpd_parse(buf, n, &scanned, h);
}

START_TEST(test_parse_basic)
{
	char buf[1024];
	rt_httpd_head h;
	const char *req = "POST /?a=b HTTP/1.1\r\nHost: x:8000\r\n"
	                  "x-amz-target: DynamoDB_20120810.GetItem\r\n"
	                  "CONTENT-TYPE:application/x-amz-json-1.0  \r\n"
	                  "Content-Length: 2\r\n\r\n{}";
	ck_assert_int_eq(parse_text(req, buf, sizeof(buf), &h), RT_HTTPD_DONE);
	ck_assert_str_eq(h.method, "POST");
	ck_assert_str_eq(h.target, "/?a=b");
	ck_assert_int_eq(h.minor, 1);
	ck_assert_uint_eq(h.n, 4);
	ck_assert_uint_eq(h.len, strlen(req) - 2);
	ck_assert_uint_eq(h.content_length, 2);
	ck_assert(h.keep_alive && !h.bad_length && !h.chunked && !h.expect_continue);
	/* Header names in any case; values trimmed. */
	ck_assert_str_eq(rt_httpd_header_get(&h, "X-Amz-Target"), "DynamoDB_20120810.GetItem");
	ck_assert_str_eq(rt_httpd_header_get(&h, "content-type"), "application/x-amz-json-1.0");
	ck_assert_str_eq(rt_httpd_header_get(&h, "HOST"), "x:8000");
	ck_assert_ptr_null(rt_httpd_header_get(&h, "Authorization"));
	/* A POST without Content-Length has an empty body. */
	ck_assert_int_eq(parse_text("POST / HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert_uint_eq(h.content_length, 0);
	ck_assert(!h.bad_length);
	/* Lines ending in LF alone; blank lines before the request line. */
	ck_assert_int_eq(parse_text("\r\n\nGET / HTTP/1.1\nHost: y\n\n", buf, sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert_str_eq(h.method, "GET");
	ck_assert_str_eq(rt_httpd_header_get(&h, "host"), "y");
	ck_assert_uint_eq(h.len, strlen("\r\n\nGET / HTTP/1.1\nHost: y\n\n"));
	/* An empty value. */
	ck_assert_int_eq(parse_text("GET / HTTP/1.1\r\nX-Empty:\r\n\r\n", buf, sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert_str_eq(rt_httpd_header_get(&h, "x-empty"), "");
}
END_TEST

START_TEST(test_parse_bytewise)
{
	/* A head arriving one byte at a time is found at its last byte, and
	 * each call only looks at what is new (scanned moves on). */
	const char *req = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
	                  "Expect: 100-continue\r\n\r\nhello";
	size_t head = strstr(req, "\r\n\r\n") + 4 - req;
	char buf[256];
	rt_httpd_head h;
	size_t scanned = 0;
	for (size_t n = 1; n <= head; n++) {
		memcpy(buf, req, n);
		rt_httpd_parse_rc rc = rt_httpd_parse(buf, n, &scanned, &h);
		if (n < head) {
			ck_assert_int_eq(rc, RT_HTTPD_INCOMPLETE);
			ck_assert_uint_le(scanned, n);
		} else {
			ck_assert_int_eq(rc, RT_HTTPD_DONE);
		}
	}
	ck_assert_uint_eq(h.len, head);
	ck_assert_uint_eq(h.content_length, 5);
	ck_assert(h.expect_continue);
}
END_TEST

START_TEST(test_parse_pipelined)
{
	/* Two requests in one read: the first head's length says where its
	 * body starts, and the second is parsed after that body. */
	char buf[512];
	const char *two = "POST / HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc"
	                  "POST /next HTTP/1.1\r\nCONTENT-LENGTH: 2\r\n\r\nde";
	size_t n = strlen(two), scanned = 0;
	memcpy(buf, two, n);
	rt_httpd_head h;
	ck_assert_int_eq(rt_httpd_parse(buf, n, &scanned, &h), RT_HTTPD_DONE);
	ck_assert_uint_eq(h.content_length, 3);
	ck_assert(memcmp(buf + h.len, "abc", 3) == 0);
	size_t off = h.len + 3;
	scanned = 0;
	ck_assert_int_eq(rt_httpd_parse(buf + off, n - off, &scanned, &h), RT_HTTPD_DONE);
	ck_assert_str_eq(h.target, "/next");
	ck_assert_uint_eq(h.content_length, 2);
	ck_assert_uint_eq(off + h.len + 2, n);
}
END_TEST

START_TEST(test_parse_limits)
{
	/* A head without its end at RT_HTTPD_MAX_HEAD bytes is too large; so
	 * is one that ends past it, and one with too many headers. */
	size_t cap = RT_HTTPD_MAX_HEAD + 1024;
	char *buf = sh_malloc(cap);
	ck_assert_ptr_nonnull(buf);
	size_t n = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\n");
	while (n + 32 < RT_HTTPD_MAX_HEAD)
		n += (size_t)snprintf(buf + n, cap - n, "X-Pad: %024d\r\n", 7);
	rt_httpd_head h;
	size_t scanned = 0;
	ck_assert_int_eq(rt_httpd_parse(buf, n, &scanned, &h), RT_HTTPD_INCOMPLETE);
	while (n < RT_HTTPD_MAX_HEAD)
		buf[n++] = 'x';
	ck_assert_int_eq(rt_httpd_parse(buf, n, &scanned, &h), RT_HTTPD_TOO_LARGE);
	memcpy(buf + n, "\r\n\r\n", 4);
	scanned = 0;
	ck_assert_int_eq(rt_httpd_parse(buf, n + 4, &scanned, &h), RT_HTTPD_TOO_LARGE);
	n = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < RT_HTTPD_MAX_HEADERS; i++)
		n += (size_t)snprintf(buf + n, cap - n, "X-%d: v\r\n", i);
	memcpy(buf + n, "\r\n", 3);
	scanned = 0;
	ck_assert_int_eq(rt_httpd_parse(buf, n + 2, &scanned, &h), RT_HTTPD_DONE);
	ck_assert_uint_eq(h.n, RT_HTTPD_MAX_HEADERS);
	/* (Rewritten: a parse that is DONE has cut the head into strings.) */
	n = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= RT_HTTPD_MAX_HEADERS; i++)
		n += (size_t)snprintf(buf + n, cap - n, "X-%d: v\r\n", i);
	n += (size_t)snprintf(buf + n, cap - n, "\r\n");
	scanned = 0;
	ck_assert_int_eq(rt_httpd_parse(buf, n, &scanned, &h), RT_HTTPD_TOO_LARGE);
	sh_free(buf);
}
END_TEST

START_TEST(test_parse_bad)
{
	char buf[512];
	rt_httpd_head h;
	/* Content-Length: one decimal number, repeated only with the same value. */
	static const char *bad_len[] = {"abc",  "-1", "+5",  "1 2",
	                                "0x10", "",   "1,1", "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++) {
		char req[128];
		snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nContent-Length: %s\r\n\r\n",
		         bad_len[i]);
		ck_assert_int_eq(parse_text(req, buf, sizeof(buf), &h), RT_HTTPD_DONE);
		ck_assert_msg(h.bad_length, "Content-Length: %s", bad_len[i]);
		ck_assert_uint_eq(h.content_length, 0);
	}
	ck_assert_int_eq(
	    parse_text("POST / HTTP/1.1\r\nContent-Length: 4\r\ncontent-length: 5\r\n\r\n", buf,
	               sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(h.bad_length);
	ck_assert_int_eq(
	    parse_text("POST / HTTP/1.1\r\nContent-Length: 4\r\ncontent-length: 4\r\n\r\n", buf,
	               sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(!h.bad_length);
	ck_assert_uint_eq(h.content_length, 4);
	ck_assert_int_eq(
	    parse_text("POST / HTTP/1.1\r\nContent-Length: 007\r\n\r\n", buf, sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert_uint_eq(h.content_length, 7);
	/* Any Transfer-Encoding is reported. */
	ck_assert_int_eq(parse_text("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", buf,
	                            sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert(h.chunked && h.chunked_body);
	/* A body the server decodes: "chunked" alone, once, no Content-Length. */
	static const char *not_decoded[] = {
	    "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(not_decoded) / sizeof(not_decoded[0]); i++) {
		ck_assert_int_eq(parse_text(not_decoded[i], buf, sizeof(buf), &h), RT_HTTPD_DONE);
		ck_assert_msg(h.chunked && !h.chunked_body, "%s", not_decoded[i]);
	}
	ck_assert_int_eq(parse_text("POST / HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n", buf,
	                            sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert(h.chunked_body);
	/* Malformed heads. */
	static const char *bad[] = {
	    "\x01\x02 garbage\r\n\r\n",
	    "GET\r\n\r\n",
	    "GET /\r\n\r\n",
	    "GET  / HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1 \r\n\r\n",
	    "G(T / HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.x\r\n\r\n",
	    "GET / http/1.1\r\n\r\n",
	    "GET /a\rb HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	    "GET / HTTP/1.1\r\n: x\r\n\r\n",
	    "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
	    "GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
	    "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
	    "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = strlen(bad[i]), scanned = 0;
		memcpy(buf, bad[i], n);
		ck_assert_msg(rt_httpd_parse(buf, n, &scanned, &h) == RT_HTTPD_BAD, "case %zu", i);
	}
	/* A NUL inside a header value. */
	char nul[] = "GET / HTTP/1.1\r\nX: a_b\r\n\r\n";
	size_t scanned = 0;
	nul[20] = '\0';
	ck_assert_int_eq(rt_httpd_parse(nul, sizeof(nul) - 1, &scanned, &h), RT_HTTPD_BAD);
	/* Versions other than 1.0 and 1.1. */
	ck_assert_int_eq(parse_text("GET / HTTP/2.0\r\n\r\n", buf, sizeof(buf), &h),
	                 RT_HTTPD_VERSION);
	ck_assert_int_eq(parse_text("GET / HTTP/1.2\r\n\r\n", buf, sizeof(buf), &h),
	                 RT_HTTPD_VERSION);
}
END_TEST

START_TEST(test_parse_connection)
{
	char buf[512];
	rt_httpd_head h;
	/* HTTP/1.0 closes unless it asks for keep-alive; 1.1 keeps unless it
	 * asks to close.  Expect: 100-continue counts in 1.1 only. */
	ck_assert_int_eq(parse_text("GET / HTTP/1.0\r\n\r\n", buf, sizeof(buf), &h), RT_HTTPD_DONE);
	ck_assert(h.minor == 0 && !h.keep_alive);
	ck_assert_int_eq(
	    parse_text("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", buf, sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(h.keep_alive);
	ck_assert_int_eq(parse_text("GET / HTTP/1.1\r\nconnection: Upgrade, close\r\n\r\n", buf,
	                            sizeof(buf), &h),
	                 RT_HTTPD_DONE);
	ck_assert(!h.keep_alive);
	ck_assert_int_eq(
	    parse_text("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", buf, sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(h.keep_alive);
	ck_assert_int_eq(
	    parse_text("POST / HTTP/1.1\r\nexpect: 100-Continue\r\n\r\n", buf, sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(h.expect_continue);
	ck_assert_int_eq(
	    parse_text("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", buf, sizeof(buf), &h),
	    RT_HTTPD_DONE);
	ck_assert(!h.expect_continue);
}
END_TEST

START_TEST(test_parse_fuzz)
{
	/* Mutated and truncated heads, and random bytes: the parser answers
	 * something and never reads or writes outside its buffer (ASan). */
	static const char *seeds[] = {
	    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nExpect: 100-continue\r\n\r\n",
	    "GET /?a=b HTTP/1.0\nConnection: keep-alive\n\n",
	    "\r\nPUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nX:  y \r\n\r\n",
	};
	uint64_t rng = tl_seed();
	for (int round = 0; round < 20000; round++) {
		const char *sd = seeds[round % 3];
		size_t n = strlen(sd);
		char *buf = sh_malloc(n + 8);
		ck_assert_ptr_nonnull(buf);
		if (round % 7 == 6) {
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)tl_rand(&rng);
		} else {
			memcpy(buf, sd, n);
			int edits = 1 + (int)(tl_rand(&rng) % 4);
			for (int e = 0; e < edits; e++) {
				static const char pick[] = "\r\n :\t\0\x7f"
				                           "aZ0-";
				buf[tl_rand(&rng) % n] = pick[tl_rand(&rng) % (sizeof(pick) - 1)];
			}
			n = 1 + tl_rand(&rng) % n;
		}
		rt_httpd_head h;
		size_t scanned = 0;
		rt_httpd_parse_rc rc = rt_httpd_parse(buf, n, &scanned, &h);
		ck_assert_int_le(rc, RT_HTTPD_VERSION);
		ck_assert_uint_le(scanned, n);
		if (rc == RT_HTTPD_DONE) {
			ck_assert_uint_le(h.len, n);
			for (uint32_t i = 0; i < h.n; i++)
				ck_assert_ptr_nonnull(rt_httpd_header_get(&h, h.h[i].name));
		}
		sh_free(buf);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The server (router/httpd.c)                                               */
/* ------------------------------------------------------------------------ */

/*
 * The test endpoint.  GET is answered in ops.head; a POST to /inline is
 * answered in ops.request (the I/O thread, as http.c answers a bad request);
 * any other POST goes to the answer thread (as a router job's answer comes
 * from an nng thread), which echoes the body after "echo:", sends BIG bytes
 * for /big, and keeps a /hold request until the test lets it go.
 */
#define BIG (24u * 1024 * 1024)

static struct tsrv {
	rt_httpd *s;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rt_httpd_req *q[64];
	int nq;
	bool stop;
	pthread_t th;
	rt_httpd_req *held; /* a /hold request */
	bool release;       /* answer it */
	char *big;
	atomic_int busy_calls;
	bool in_slow, slow_go; /* /slow holds the I/O thread until slow_go */
} T;

static void echo(rt_httpd_req *r)
{
	char *out = sh_malloc(r->len + 5);
	ck_assert_ptr_nonnull(out);
	memcpy(out, "echo:", 5);
	if (r->len > 0)
		memcpy(out + 5, r->body, r->len);
	rt_httpd_respond(r, 200, "Content-Type: text/plain\r\n", out, r->len + 5, false);
	sh_free(out);
}

static void *t_answerer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&T.mu);
	for (;;) {
		while (T.nq == 0 && !T.stop && !(T.held != NULL && T.release))
			pthread_cond_wait(&T.cv, &T.mu);
		if (T.held != NULL && T.release) {
			rt_httpd_req *r = T.held;
			T.held = NULL;
			pthread_cond_broadcast(&T.cv);
			pthread_mutex_unlock(&T.mu);
			echo(r);
			pthread_mutex_lock(&T.mu);
			continue;
		}
		if (T.nq == 0)
			break;
		rt_httpd_req *r = T.q[0];
		memmove(T.q, T.q + 1, (size_t)--T.nq * sizeof(T.q[0]));
		if (strcmp(r->head->target, "/hold") == 0) {
			T.held = r;
			pthread_cond_broadcast(&T.cv);
			continue;
		}
		pthread_mutex_unlock(&T.mu);
		if (strcmp(r->head->target, "/big") == 0)
			rt_httpd_respond(r, 200, NULL, T.big, BIG, false);
		else
			echo(r);
		pthread_mutex_lock(&T.mu);
	}
	pthread_mutex_unlock(&T.mu);
	return NULL;
}

static bool t_head(void *arg, rt_httpd_req *r)
{
	(void)arg;
	if (strcmp(r->head->method, "GET") == 0 || strcmp(r->head->method, "HEAD") == 0) {
		char text[128];
		int n = snprintf(text, sizeof(text), "get %s", r->head->target);
		rt_httpd_respond(r, 200, "Content-Type: text/plain\r\n", text, (size_t)n, false);
		return false;
	}
	return true;
}

static void t_request(void *arg, rt_httpd_req *r)
{
	(void)arg;
	if (strcmp(r->head->target, "/inline") == 0) {
		echo(r);
		return;
	}
	if (strcmp(r->head->target, "/slow") == 0) { /* the I/O thread waits for the test */
		pthread_mutex_lock(&T.mu);
		T.in_slow = true;
		pthread_cond_broadcast(&T.cv);
		while (!T.slow_go)
			pthread_cond_wait(&T.cv, &T.mu);
		pthread_mutex_unlock(&T.mu);
		echo(r);
		return;
	}
	pthread_mutex_lock(&T.mu);
	ck_assert_int_lt(T.nq, 64);
	T.q[T.nq++] = r;
	pthread_cond_broadcast(&T.cv); /* (the test waits on T.cv too) */
	pthread_mutex_unlock(&T.mu);
}

static void t_busy(void *arg, rt_httpd_req *r)
{
	(void)arg;
	atomic_fetch_add(&T.busy_calls, 1);
	rt_httpd_respond(r, 503, NULL, "busy", 4, true);
}

/* The test server with conf's limits (the ops, address and threads are
 * the test's). */
static void srv_start_conf(rt_httpd_conf c)
{
	memset(&T, 0, sizeof(T));
	pthread_mutex_init(&T.mu, NULL);
	pthread_cond_init(&T.cv, NULL);
	c.hostport = "127.0.0.1:0";
	c.threads = 1;
	c.ops = (rt_httpd_ops){.head = t_head, .request = t_request, .busy = t_busy};
	char m[SH_ERRMSG_SIZE];
	ck_assert_int_eq(rt_httpd_start(&T.s, &c, m), SHOAL_OK);
	T.port = rt_httpd_port(T.s);
	ck_assert_int_gt(T.port, 0);
	ck_assert_int_eq(pthread_create(&T.th, NULL, t_answerer, NULL), 0);
}

static void srv_start(uint32_t max_conns, size_t max_held, uint32_t timeout_ms)
{
	srv_start_conf((rt_httpd_conf){.max_conns = max_conns,
	                               .max_held = max_held,
	                               .head_ms = timeout_ms,
	                               .timeout_ms = timeout_ms,
	                               .idle_ms = timeout_ms});
}

static void srv_stop(void)
{
	rt_httpd_stop(T.s);
	pthread_mutex_lock(&T.mu);
	T.stop = true;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	pthread_join(T.th, NULL);
	sh_free(T.big);
}

/* A client connection with what it has read and not yet used. */
typedef struct cli {
	int fd;
	char *buf;
	size_t len, cap;
	size_t used; /* by the last response cli_resp returned */
} cli;

typedef struct resp {
	int status;
	char head[4096];
	char *body; /* (the client's buffer: valid until the next read) */
	size_t len;
} resp;

/* A connection from 127.0.0.<from> (Linux routes all of 127/8 to lo): the
 * server sees another peer address; to its port `port`. */
static cli cli_open_to(int from, int port)
{
	cli c = {.fd = socket(AF_INET, SOCK_STREAM, 0), .cap = 1 << 16};
	ck_assert_int_ge(c.fd, 0);
	if (from != 1) {
		struct sockaddr_in b = {.sin_family = AF_INET,
		                        .sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)from)};
		ck_assert_int_eq(bind(c.fd, (struct sockaddr *)&b, sizeof(b)), 0);
	}
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(connect(c.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int one = 1;
	setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c.buf = sh_malloc(c.cap);
	ck_assert_ptr_nonnull(c.buf);
	return c;
}

static cli cli_open_from(int from)
{
	return cli_open_to(from, T.port);
}

static cli cli_open(void)
{
	return cli_open_from(1);
}

static void cli_close(cli *c)
{
	close(c->fd);
	sh_free(c->buf);
}

static void cli_send(cli *c, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
		ck_assert_int_gt(w, 0);
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void cli_sends(cli *c, const char *s)
{
	cli_send(c, s, strlen(s));
}

/* Reads more; false at EOF (or a reset: the server closed). */
static bool cli_fill(cli *c)
{
	if (c->len == c->cap) {
		c->cap *= 2;
		c->buf = sh_realloc(c->buf, c->cap);
		ck_assert_ptr_nonnull(c->buf);
	}
	ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	ck_assert_msg(n >= 0 || errno == ECONNRESET, "recv: %s", strerror(errno));
	if (n <= 0)
		return false;
	c->len += (size_t)n;
	return true;
}

/* The server closes the connection (without sending anything more). */
static void cli_expect_eof(cli *c)
{
	ck_assert_msg(!cli_fill(c), "more bytes: %.*s", (int)c->len, c->buf);
}

/* The next response (body per Content-Length; none for HEAD or 1xx). */
static bool cli_resp(cli *c, resp *r, bool head_only)
{
	if (c->used > 0) { /* drop the previous response */
		memmove(c->buf, c->buf + c->used, c->len - c->used);
		c->len -= c->used;
		c->used = 0;
	}
	char *end;
	while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL)
		if (!cli_fill(c))
			return false;
	size_t hl = (size_t)(end - c->buf) + 4;
	ck_assert_uint_lt(hl, sizeof(r->head));
	memcpy(r->head, c->buf, hl);
	r->head[hl] = '\0';
	ck_assert_int_eq(sscanf(r->head, "HTTP/1.1 %d ", &r->status), 1);
	const char *cl = strcasestr(r->head, "\r\nContent-Length: ");
	size_t n = 0;
	if (r->status >= 200 && !head_only) {
		ck_assert_ptr_nonnull(cl);
		n = strtoull(cl + 18, NULL, 10);
	}
	while (c->len < hl + n)
		ck_assert(cli_fill(c));
	r->body = c->buf + hl;
	r->len = n;
	c->used = hl + n;
	return true;
}

static bool has_header(const resp *r, const char *line)
{
	return strcasestr(r->head, line) != NULL;
}

static void expect_echo(cli *c, const char *body)
{
	resp r;
	ck_assert(cli_resp(c, &r, false));
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, strlen(body) + 5);
	ck_assert(memcmp(r.body, "echo:", 5) == 0 && memcmp(r.body + 5, body, strlen(body)) == 0);
	ck_assert(!has_header(&r, "Connection:"));
}

static void post(cli *c, const char *target, const char *body, const char *extra)
{
	char head[512];
	snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: %zu\r\n\r\n",
	         target, extra, strlen(body));
	cli_sends(c, head);
	cli_sends(c, body);
}

START_TEST(test_srv_keepalive)
{
	srv_start(100, 1 << 20, 0);
	cli c = cli_open();
	resp r;
	/* One connection, answers from ops.head, the I/O thread and the
	 * answer thread, in turn. */
	for (int i = 0; i < 3; i++) {
		cli_sends(&c, "GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
		ck_assert(cli_resp(&c, &r, false));
		ck_assert_int_eq(r.status, 200);
		ck_assert(r.len == 11 && memcmp(r.body, "get /health", 11) == 0);
		post(&c, "/", "{\"a\":1}", "");
		expect_echo(&c, "{\"a\":1}");
		post(&c, "/inline", "x", "");
		expect_echo(&c, "x");
		post(&c, "/", "", "");
		expect_echo(&c, "");
	}
	/* HEAD: the headers of GET, no body. */
	cli_sends(&c, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
	ck_assert(cli_resp(&c, &r, true));
	ck_assert(r.status == 200 && has_header(&r, "\r\nContent-Length: 5\r\n"));
	/* A request sent byte by byte. */
	const char *slow = "POST / HTTP/1.1\r\nhost: t\r\nCONTENT-LENGTH: 4\r\n\r\nabcd";
	for (const char *p = slow; *p != '\0'; p++)
		cli_send(&c, p, 1);
	expect_echo(&c, "abcd");
	/* Connection: close is honoured. */
	post(&c, "/", "z", "Connection: close\r\n");
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 200 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&c);
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_pipelined)
{
	srv_start(100, 1 << 20, 0);
	cli c = cli_open();
	/* Four requests in one write, answered by different threads: in order. */
	char all[1024];
	snprintf(all, sizeof(all),
	         "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\none"
	         "POST /inline HTTP/1.1\r\nContent-Length: 3\r\n\r\ntwo"
	         "GET /three HTTP/1.1\r\n\r\n"
	         "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nfour");
	cli_sends(&c, all);
	expect_echo(&c, "one");
	expect_echo(&c, "two");
	resp r;
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 200 && r.len == 10 && memcmp(r.body, "get /three", 10) == 0);
	expect_echo(&c, "four");
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_continue)
{
	/* Expect: 100-continue: "100 Continue" comes before the client sends
	 * its body (curl waits a second for it otherwise). */
	srv_start(100, 1 << 20, 0);
	cli c = cli_open();
	cli_sends(&c, "POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
	              "Content-Length: 5\r\n\r\n");
	resp r;
	ck_assert(cli_resp(&c, &r, false));
	ck_assert_int_eq(r.status, 100);
	cli_sends(&c, "hello");
	expect_echo(&c, "hello");
	/* A body larger than the in-buffer limit, in two parts. */
	size_t n = 100000;
	char *body = sh_malloc(n + 1);
	ck_assert_ptr_nonnull(body);
	for (size_t i = 0; i < n; i++)
		body[i] = (char)('a' + i % 26);
	body[n] = '\0';
	char head[256];
	snprintf(head, sizeof(head),
	         "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: %zu\r\n\r\n", n);
	cli_sends(&c, head);
	ck_assert(cli_resp(&c, &r, false));
	ck_assert_int_eq(r.status, 100);
	cli_send(&c, body, n / 3);
	cli_send(&c, body + n / 3, n - n / 3);
	expect_echo(&c, body);
	sh_free(body);
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_http10)
{
	srv_start(100, 1 << 20, 0);
	resp r;
	/* HTTP/1.0 closes after the answer... */
	cli c = cli_open();
	cli_sends(&c, "POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi");
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 200 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&c);
	cli_close(&c);
	/* ... unless it asks for keep-alive, which the answer confirms. */
	c = cli_open();
	for (int i = 0; i < 2; i++) {
		cli_sends(&c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
		ck_assert(cli_resp(&c, &r, false));
		ck_assert(r.status == 200 && has_header(&r, "\r\nConnection: keep-alive\r\n"));
	}
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_errors)
{
	srv_start(100, 1 << 20, 0);
	resp r;
	/* Malformed: 400 and close; another version: 505. */
	cli c = cli_open();
	cli_sends(&c, "\x01\x02 garbage\r\n\r\n");
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 400 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&c);
	cli_close(&c);
	c = cli_open();
	cli_sends(&c, "GET / HTTP/2.0\r\n\r\n");
	ck_assert(cli_resp(&c, &r, false));
	ck_assert_int_eq(r.status, 505);
	cli_expect_eof(&c);
	cli_close(&c);
	/* A head over 64 KiB: 431, then close. */
	c = cli_open();
	cli_sends(&c, "GET / HTTP/1.1\r\nX-Big: ");
	char pad[4096];
	memset(pad, 'p', sizeof(pad));
	for (size_t sent = 0; sent < RT_HTTPD_MAX_HEAD; sent += sizeof(pad))
		cli_send(&c, pad, sizeof(pad));
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 431 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&c);
	cli_close(&c);
	/* An answer given from ops.head with a body unread closes the
	 * connection (the body would be taken for the next request). */
	c = cli_open();
	cli_sends(&c, "GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 200 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&c);
	cli_close(&c);
	srv_stop();
}
END_TEST

/* Chunked bodies: decoded, pipelined after, byte by byte, with 100-continue;
 * malformed ones 400, those decoding past max_chunked 413, and the
 * connection closes after either. */
START_TEST(test_srv_chunked)
{
	srv_start_conf((rt_httpd_conf){.max_conns = 100, .max_held = 1 << 20, .max_chunked = 1000});
	cli c = cli_open();
	const char *te = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
	cli_sends(&c, te);
	cli_sends(&c, "4\r\nWiki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n"
	              "0\r\nX-Trailer: ignored\r\n\r\n"
	              "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nnext");
	expect_echo(&c, "Wikipedia in\r\n\r\nchunks.");
	expect_echo(&c, "next");
	/* Empty, then one sent byte by byte. */
	cli_sends(&c, te);
	cli_sends(&c, "0\r\n\r\n");
	expect_echo(&c, "");
	char one[256];
	snprintf(one, sizeof(one), "%s%s", te, "3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n");
	for (const char *p = one; *p != '\0'; p++)
		cli_send(&c, p, 1);
	expect_echo(&c, "abc0123456789");
	/* Exactly the limit: 1000 bytes in 3 chunks. */
	char big[1200];
	memset(big, 'x', sizeof(big));
	cli_sends(&c, te);
	cli_sends(&c, "1f4\r\n");
	cli_send(&c, big, 500);
	cli_sends(&c, "\r\n1f3\r\n");
	cli_send(&c, big, 499);
	cli_sends(&c, "\r\n1\r\nx\r\n0\r\n\r\n");
	resp r;
	ck_assert(cli_resp(&c, &r, false));
	ck_assert(r.status == 200 && r.len == 1005);
	/* 100-continue. */
	cli_sends(&c,
	          "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
	ck_assert(cli_resp(&c, &r, true));
	ck_assert_int_eq(r.status, 100);
	cli_sends(&c, "2\r\nok\r\n0\r\n\r\n");
	expect_echo(&c, "ok");
	cli_close(&c);

	/* One byte past the limit, announced by a size: 413 at once. */
	static const char *over[] = {"3e9\r\n", "1f4\r\n", "ffffffffffffffffffffffff\r\n"};
	for (size_t i = 0; i < 3; i++) {
		c = cli_open();
		cli_sends(&c, te);
		if (i == 1) { /* 500 + 500 + 1 */
			cli_sends(&c, over[i]);
			cli_send(&c, big, 500);
			cli_sends(&c, "\r\n1f4\r\n");
			cli_send(&c, big, 500);
			cli_sends(&c, "\r\n1\r\n");
		} else {
			cli_sends(&c, over[i]);
		}
		ck_assert(cli_resp(&c, &r, false));
		ck_assert_msg(r.status == 413 && has_header(&r, "\r\nConnection: close\r\n"),
		              "case %zu: %d", i, r.status);
		cli_expect_eof(&c);
		cli_close(&c);
	}
	/* Malformed: 400 and close. */
	static const char *bad[] = {
	    "zz\r\n",                     /* not hex */
	    "\r\n",                       /* no digits */
	    "3\r\nabcX\r\n",              /* data not followed by CRLF */
	    "3\nabc\r\n0\r\n\r\n",        /* bare LF after the size */
	    "0\r\nX: y\nZ\r\n\r\n",       /* bare LF in the trailer */
	    "3;a\0b\r\nabc\r\n0\r\n\r\n", /* NUL in an extension */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = cli_open();
		cli_sends(&c, te);
		cli_send(&c, bad[i], i == 5 ? 17 : strlen(bad[i]));
		ck_assert(cli_resp(&c, &r, false));
		ck_assert_msg(r.status == 400, "case %zu: %d", i, r.status);
		cli_expect_eof(&c);
		cli_close(&c);
	}
	/* A size line that never ends: 400 once it passes 4096 bytes. */
	c = cli_open();
	cli_sends(&c, te);
	cli_sends(&c, "1;");
	char ext[1024];
	memset(ext, 'e', sizeof(ext));
	for (int i = 0; i < 5; i++)
		cli_send(&c, ext, sizeof(ext));
	ck_assert(cli_resp(&c, &r, false));
	ck_assert_int_eq(r.status, 400);
	cli_expect_eof(&c);
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_big_answer)
{
	/* An answer larger than the socket buffers: what the socket does not
	 * take is queued and written on EPOLLOUT while the client reads; the
	 * connection then serves the next request. */
	srv_start(100, 1 << 20, 0);
	T.big = sh_malloc(BIG);
	ck_assert_ptr_nonnull(T.big);
	for (size_t i = 0; i < BIG; i++)
		T.big[i] = (char)(i * 7 + i / 4096);
	cli c = cli_open();
	post(&c, "/big", "", "");
	post(&c, "/", "after", "");
	resp r;
	ck_assert(cli_resp(&c, &r, false));
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, BIG);
	ck_assert(memcmp(r.body, T.big, BIG) == 0);
	expect_echo(&c, "after");
	cli_close(&c);
	srv_stop();
}
END_TEST

START_TEST(test_srv_limits)
{
	/* At most 2 connections: a third is answered 503 and closed at once,
	 * the others work. */
	srv_start(2, 100000, 0);
	cli a = cli_open(), b = cli_open(), x = cli_open();
	resp r;
	ck_assert(cli_resp(&x, &r, false));
	ck_assert(r.status == 503 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&x);
	cli_close(&x);
	post(&a, "/", "a", "");
	expect_echo(&a, "a");
	post(&b, "/", "b", "");
	expect_echo(&b, "b");
	/* Bodies held at once: a 1 MB body grows past 100 KB as it arrives,
	 * and is refused then (503, close), not when announced. */
	cli_sends(&a, "POST / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
	char chunk[16384];
	memset(chunk, 'c', sizeof(chunk));
	for (int i = 0; i < 3; i++)
		cli_send(&a, chunk, sizeof(chunk));
	post(&b, "/", "still served", "");
	expect_echo(&b, "still served");
	ck_assert_int_eq(atomic_load(&T.busy_calls), 0);
	for (int i = 0; i < 6; i++)
		send(a.fd, chunk, sizeof(chunk), MSG_NOSIGNAL);
	ck_assert(cli_resp(&a, &r, false));
	ck_assert(r.status == 503 && has_header(&r, "\r\nConnection: close\r\n"));
	ck_assert_int_eq(atomic_load(&T.busy_calls), 1);
	cli_close(&a);
	cli_close(&b);
	srv_stop();
}
END_TEST

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(test_srv_timeouts)
{
	/* A head, a body and an idle connection that make no progress for
	 * timeout_ms are dropped (the scan runs every second). */
	srv_start(100, 1 << 20, 300);
	cli h = cli_open(), b = cli_open(), i = cli_open();
	cli_sends(&h, "POST / HTTP/1.1\r\nX-Amz-Tar");
	cli_sends(&b, "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"");
	int64_t t0 = now_ms();
	cli_expect_eof(&h);
	cli_expect_eof(&b);
	cli_expect_eof(&i);
	ck_assert_int_lt(now_ms() - t0, 5000);
	cli_close(&h);
	cli_close(&b);
	cli_close(&i);
	srv_stop();
}
END_TEST

/* Waits up to ms for the server to close c (EOF or reset, nothing read
 * first); sends *trickle, a byte at a time, one per 100 ms of waiting, so
 * that the connection keeps making progress (*trickle advances).  True if
 * closed in time. */
static bool closed_within(cli *c, int64_t ms, const char **trickle)
{
	int64_t end = now_ms() + ms;
	while (now_ms() < end) {
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, 100) == 1) {
			char b[256];
			ssize_t n = recv(c->fd, b, sizeof(b), 0);
			ck_assert_msg(n <= 0, "bytes from the server: %.*s", (int)n, b);
			return true;
		}
		if (**trickle != '\0')
			send(c->fd, (*trickle)++, 1, MSG_NOSIGNAL);
	}
	return false;
}

START_TEST(test_srv_head_timeout)
{
	/* Slowloris: a head whose bytes keep coming, one per 100 ms, is still
	 * dropped head_ms after it started: the head's timeout is a total,
	 * not an idle one (which each byte would renew).  A body's is an idle
	 * one: a body that keeps coming is read to its end. */
	srv_start_conf((rt_httpd_conf){
	    .max_conns = 100, .max_held = 1 << 20, .head_ms = 600, .timeout_ms = 5000});
	static const char head[] = "POST / HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	cli h = cli_open();
	int64_t t0 = now_ms();
	const char *p = head;
	ck_assert_msg(closed_within(&h, 4000, &p), "a trickled head was kept");
	ck_assert_int_ge(now_ms() - t0, 500);
	cli_close(&h);
	/* A kept-alive connection: the head's clock starts at its first byte,
	 * not at the end of the previous answer. */
	cli k = cli_open();
	post(&k, "/", "one", "");
	expect_echo(&k, "one");
	p = head;
	ck_assert_msg(closed_within(&k, 4000, &p), "a trickled second head was kept");
	cli_close(&k);
	/* A body sent slowly but steadily, for longer than head_ms. */
	cli b = cli_open();
	static const char body[] = "a body sent slowly, byte by byte";
	cli_sends(&b, "POST / HTTP/1.1\r\nContent-Length: 32\r\n\r\n");
	p = body;
	ck_assert(!closed_within(&b, 1200, &p));
	cli_sends(&b, p);
	expect_echo(&b, body);
	cli_close(&b);
	srv_stop();
}
END_TEST

START_TEST(test_srv_body_min_rate)
{
	/* A body trickled a byte per 100 ms never stalls for timeout_ms (800),
	 * but at 10 bytes a second it is under min_rate (100): it is dropped
	 * once timeout_ms + 1 s per min_rate bytes received have passed (about
	 * 0.9 s here), not kept for as long as the trickle goes on. */
	srv_start_conf((rt_httpd_conf){.max_conns = 100,
	                               .max_held = 1 << 20,
	                               .head_ms = 5000,
	                               .timeout_ms = 800,
	                               .min_rate = 100});
	static const char body[] = "0123456789012345678901234567890123456789"
	                           "0123456789012345678901234567890123456789"
	                           "01234567890123456789";
	cli b = cli_open();
	cli_sends(&b, "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n");
	const char *p = body;
	int64_t t0 = now_ms();
	ck_assert_msg(closed_within(&b, 6000, &p), "a body under the minimum rate was kept");
	ck_assert_int_ge(now_ms() - t0, 800);
	cli_close(&b);
	/* The same body at its own pace, all at once: served. */
	cli ok = cli_open();
	post(&ok, "/", body, "");
	expect_echo(&ok, body);
	cli_close(&ok);
	srv_stop();
}
END_TEST

START_TEST(test_srv_announced_body)
{
	/* A body's memory is reserved as it arrives, not as announced: 48
	 * connections announcing 16 MiB and sending nothing hold 16 KiB each,
	 * so the server's 1 MiB of bodies still takes another client's
	 * request (with 64 KiB each, 16 of them filled it). */
	srv_start(100, 1 << 20, 0);
	cli a[48];
	for (int i = 0; i < 48; i++) {
		a[i] = cli_open();
		cli_sends(&a[i], "POST / HTTP/1.1\r\nContent-Length: 16777216\r\n\r\n{");
	}
	cli v = cli_open();
	post(&v, "/", "served", "");
	expect_echo(&v, "served");
	ck_assert_int_eq(atomic_load(&T.busy_calls), 0);
	for (int i = 0; i < 48; i++)
		cli_close(&a[i]);
	cli_close(&v);
	srv_stop();
}
END_TEST

START_TEST(test_srv_peer_held)
{
	/* One address may hold at most max_held_peer bytes of bodies: an
	 * attacker at 127.0.0.2 sending four large bodies it never finishes
	 * gets 503 (peer_busy) past 1 MiB, and the server's 3 MiB keep room
	 * for a client at 127.0.0.1 (without the per-address bound the four
	 * took it all and the client got 503). */
	srv_start_conf((rt_httpd_conf){.max_conns = 100,
	                               .max_held = 3u << 20,
	                               .max_held_peer = 1u << 20,
	                               .head_ms = 10000,
	                               .timeout_ms = 10000});
	size_t part = 700000;
	char *pad = sh_malloc(part);
	ck_assert_ptr_nonnull(pad);
	memset(pad, 'x', part);
	cli a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = cli_open_from(2);
		cli_sends(&a[i], "POST / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
		for (size_t off = 0; off < part;) { /* (refused ones stop reading) */
			ssize_t w = send(a[i].fd, pad + off, part - off, MSG_NOSIGNAL);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	/* Another address is served, with a body that must be held. */
	cli v = cli_open();
	char *body = sh_malloc(200001);
	ck_assert_ptr_nonnull(body);
	memset(body, 'v', 200000);
	body[200000] = '\0';
	post(&v, "/", body, "");
	expect_echo(&v, body);
	/* One of the attacker's bodies is still being read (whichever the
	 * server took first); the other three were refused. */
	int refused = 0;
	bool answered[4] = {false};
	int64_t end = now_ms() + 5000;
	while (refused < 3 && now_ms() < end) {
		struct pollfd p[4];
		for (int i = 0; i < 4; i++)
			p[i] = (struct pollfd){.fd = answered[i] ? -1 : a[i].fd, .events = POLLIN};
		if (poll(p, 4, 100) <= 0)
			continue;
		for (int i = 0; i < 4; i++) {
			if (answered[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			resp r;
			ck_assert(cli_resp(&a[i], &r, false));
			ck_assert_int_eq(r.status, 503);
			answered[i] = true;
			refused++;
		}
	}
	ck_assert_int_eq(refused, 3);
	ck_assert_int_eq(atomic_load(&T.busy_calls), 3);
	for (int i = 0; i < 4; i++)
		cli_close(&a[i]);
	cli_close(&v);
	sh_free(body);
	sh_free(pad);
	srv_stop();
}
END_TEST

START_TEST(test_srv_peer_conns)
{
	/* One address may hold max_conns_peer connections: the next one from
	 * it gets 503 and is closed, another address is served, and a
	 * connection closed makes room again. */
	srv_start_conf((rt_httpd_conf){.max_conns = 100,
	                               .max_conns_peer = 3,
	                               .max_held = 1 << 20,
	                               .head_ms = 10000,
	                               .timeout_ms = 10000});
	cli a[3];
	for (int i = 0; i < 3; i++) {
		a[i] = cli_open_from(2);
		post(&a[i], "/", "mine", "");
		expect_echo(&a[i], "mine");
	}
	cli x = cli_open_from(2);
	resp r;
	ck_assert(cli_resp(&x, &r, false));
	ck_assert(r.status == 503 && has_header(&r, "\r\nConnection: close\r\n"));
	cli_expect_eof(&x);
	cli_close(&x);
	cli v = cli_open();
	post(&v, "/", "other address", "");
	expect_echo(&v, "other address");
	cli_close(&a[0]);
	/* The server notices the close at its next event: poll for the room. */
	int64_t end = now_ms() + 5000;
	bool served = false;
	while (!served && now_ms() < end) {
		cli y = cli_open_from(2);
		/* (a refused connection may be closed under the send) */
		static const char req[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nagain";
		ssize_t w = send(y.fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
		(void)w;
		served = cli_resp(&y, &r, false) && r.status == 200;
		cli_close(&y);
	}
	ck_assert(served);
	for (int i = 1; i < 3; i++)
		cli_close(&a[i]);
	cli_close(&v);
	srv_stop();
}
END_TEST

/* HTTPS connections begun and refused so far; polls (deadline 10 s) until
 * their sum is `total`. */
static rt_httpd_stats hs_stats;

static void hs_wait(uint64_t total, uint64_t *begun, uint64_t *refused)
{
	for (int64_t until = now_ms() + 10000;; usleep(2000)) {
		*begun = atomic_load(&hs_stats.https_begun);
		*refused = atomic_load(&hs_stats.https_refused);
		if (*begun + *refused >= total)
			break;
		ck_assert_msg(now_ms() < until, "%llu of %llu connections seen",
		              (unsigned long long)(*begun + *refused), (unsigned long long)total);
	}
	ck_assert_uint_eq(*begun + *refused, total);
}

/* Whether the server closed c (its EOF, waited for up to 10 s) -- else it
 * still waits for a handshake. */
static bool closed_by_server(cli *c, bool wait)
{
	char b;
	ssize_t r = recv(c->fd, &b, 1, wait ? 0 : MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Starts the server with an HTTPS listener only (tls: a server config
 * without a certificate -- the limits act at accept, before any handshake)
 * and one address's handshakes limited to rate a second; hs_stats zeroed.
 * The HTTPS port. */
static int https_limited(mbedtls_ssl_config *tls, uint32_t rate)
{
	mbedtls_ssl_config_init(tls);
	ck_assert_int_eq(mbedtls_ssl_config_defaults(tls, MBEDTLS_SSL_IS_SERVER,
	                                             MBEDTLS_SSL_TRANSPORT_STREAM,
	                                             MBEDTLS_SSL_PRESET_DEFAULT),
	                 0);
	atomic_store(&hs_stats.https_begun, 0);
	atomic_store(&hs_stats.https_refused, 0);
	srv_start_conf((rt_httpd_conf){.tls_hostport = "127.0.0.1:0",
	                               .tls = tls,
	                               .max_conns = 100,
	                               .max_held = 1 << 20,
	                               .handshakes_peer = rate,
	                               .stats = &hs_stats});
	int port = rt_httpd_tls_port(T.s);
	ck_assert_int_gt(port, 0);
	return port;
}

START_TEST(test_srv_handshake_rate)
{
	/* One address may begin 5 HTTPS connections a second, 10 at once: the
	 * 11th is closed unread, another address and plain HTTP are not held
	 * back, and the address may begin one again once its bucket refills.
	 * (No handshake is made: the limit acts at accept.) */
	mbedtls_ssl_config tls;
	int port = https_limited(&tls, 5);
	cli a[12];
	uint64_t begun, refused;
	for (int i = 0; i < 11; i++)
		a[i] = cli_open_to(1, port);
	hs_wait(11, &begun, &refused);
	ck_assert_uint_eq(begun, 10);
	ck_assert_uint_eq(refused, 1);
	ck_assert(closed_by_server(&a[10], true));
	for (int i = 0; i < 10; i++)
		ck_assert_msg(!closed_by_server(&a[i], false), "connection %d closed", i);
	/* Another address has a bucket of its own. */
	a[11] = cli_open_to(2, port);
	hs_wait(12, &begun, &refused);
	ck_assert_uint_eq(begun, 11);
	ck_assert(!closed_by_server(&a[11], false));
	/* Plain HTTP from the first address is served. */
	cli h = cli_open();
	post(&h, "/", "plain", "");
	expect_echo(&h, "plain");
	cli_close(&h);
	/* A token comes back after 200 ms: the address begins one again. */
	int64_t t0 = now_ms();
	uint64_t total = 12, tries = 0;
	for (bool ok = false; !ok; tries++) {
		ck_assert_msg(now_ms() - t0 < 5000, "no connection begun in 5 s");
		cli x = cli_open_to(1, port);
		uint64_t b0 = begun;
		hs_wait(++total, &begun, &refused);
		ok = begun > b0;
		ck_assert(closed_by_server(&x, !ok) == !ok);
		cli_close(&x);
		if (!ok)
			usleep(20000);
	}
	printf("handshake rate: the address began a connection again %lld ms after its burst "
	       "(%llu refused meanwhile)\n",
	       (long long)(now_ms() - t0), (unsigned long long)(tries - 1));
	for (int i = 0; i < 12; i++)
		cli_close(&a[i]);
	srv_stop();
	mbedtls_ssl_config_free(&tls);
}
END_TEST

/* 127.0.0.0/8 address `from` (cli_open_to's) as a sockaddr_storage. */
static struct sockaddr_storage loop_addr(uint32_t from)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(0x7f000000u | from);
	return ss;
}

START_TEST(test_srv_handshake_slot_shared)
{
	/* Two addresses whose hashes share a handshake slot share its bucket:
	 * once one has spent its burst, the other cannot begin a connection
	 * either (with a bucket per slot owner, the second took the slot over
	 * with a full bucket, and two alternating addresses had a burst each
	 * time).  Rate 1 a second, bursts of 2. */
	struct sockaddr_storage one = loop_addr(1), two = loop_addr(2);
	int slot = rt_httpd_handshake_slot(&one);
	ck_assert_int_ge(slot, 0);
	ck_assert_int_lt(slot, RT_HTTPD_HANDSHAKE_SLOTS);
	/* test_srv_handshake_rate's "another address" has a slot of its own. */
	ck_assert_int_ne(rt_httpd_handshake_slot(&two), slot);
	uint32_t twin = 3;
	for (; twin < (1u << 24); twin++) {
		struct sockaddr_storage x = loop_addr(twin);
		if (rt_httpd_handshake_slot(&x) == slot)
			break;
	}
	ck_assert_uint_lt(twin, 1u << 24);
	mbedtls_ssl_config tls;
	int port = https_limited(&tls, 1);
	uint64_t begun, refused;
	int64_t t0 = now_ms();
	cli a = cli_open_to(1, port), b = cli_open_to(1, port);
	hs_wait(2, &begun, &refused);
	ck_assert_uint_eq(begun, 2);
	cli c = cli_open_to(twin, port);
	hs_wait(3, &begun, &refused);
	int64_t took = now_ms() - t0;
	printf("handshake slot %d: 127.%u.%u.%u shares it with 127.0.0.1; the twin's connection "
	       "came %lld ms after the first\n",
	       slot, (twin >> 16) & 255, (twin >> 8) & 255, twin & 255, (long long)took);
	if (took < 900) { /* else a token had come back: nothing to judge */
		ck_assert_uint_eq(refused, 1);
		ck_assert(closed_by_server(&c, true));
	}
	cli_close(&a);
	cli_close(&b);
	cli_close(&c);
	srv_stop();
	mbedtls_ssl_config_free(&tls);
}
END_TEST

START_TEST(test_srv_emfile)
{
	/* Out of descriptors, accept(2) fails: the server pauses accepting
	 * instead of spinning, and accepts again once descriptors are free. */
	srv_start(100, 1 << 20, 0);
	cli a = cli_open();
	cli x = {.fd = socket(AF_INET, SOCK_STREAM, 0), .cap = 1 << 16};
	ck_assert_int_ge(x.fd, 0);
	x.buf = sh_malloc(x.cap);
	ck_assert_ptr_nonnull(x.buf);
	struct rlimit old, low;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 0;
	for (int fd = 0; fd < 65536; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			low.rlim_cur = (rlim_t)fd + 1; /* the highest descriptor open */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)T.port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(connect(x.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(x.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* Half a second of EMFILE costs the process little CPU. */
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	usleep(500 * 1000);
	getrusage(RUSAGE_SELF, &r1);
	int64_t cpu_us = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1000000 +
	                 (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
	                 (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000000 +
	                 (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
	ck_assert_int_lt(cpu_us, 150 * 1000);
	post(&a, "/", "meanwhile", "");
	expect_echo(&a, "meanwhile");
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	post(&x, "/", "accepted", "");
	expect_echo(&x, "accepted");
	cli_close(&a);
	cli_close(&x);
	srv_stop();
}
END_TEST

START_TEST(test_srv_reset_storm)
{
	/* Clients that pipeline and reset at once: a connection whose next
	 * request was posted back to its I/O thread by the answering thread
	 * is closed before that resume runs (it is then on two lists). */
	srv_start(1000, 1 << 20, 0);
	const char *three = "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\na"
	                    "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nb"
	                    "POST /inline HTTP/1.1\r\nContent-Length: 1\r\n\r\nc";
	for (int i = 0; i < 300; i++) {
		cli c = cli_open();
		cli_sends(&c, three);
		if (i % 2 == 1) { /* after the first answer, sometimes */
			resp r;
			ck_assert(cli_resp(&c, &r, false));
		}
		struct linger lg = {.l_onoff = 1, .l_linger = 0};
		setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		cli_close(&c);
	}
	cli d = cli_open();
	post(&d, "/", "alive", "");
	expect_echo(&d, "alive");
	cli_close(&d);
	srv_stop();
}
END_TEST

static void reset_close(cli *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	cli_close(c);
}

START_TEST(test_srv_closed_while_posted)
{
	/* A connection posted back to its I/O thread (an answer written by
	 * another thread, a pipelined request behind it) and reset before
	 * that thread gets to it, in the same batch as another closed one:
	 * it is on the resume list and the closed list at once. */
	srv_start(100, 1 << 20, 0);
	cli a = cli_open(), x = cli_open(), b = cli_open();
	cli_sends(&a, "POST /hold HTTP/1.1\r\nContent-Length: 1\r\n\r\na"
	              "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nb");
	pthread_mutex_lock(&T.mu);
	while (T.held == NULL)
		pthread_cond_wait(&T.cv, &T.mu);
	pthread_mutex_unlock(&T.mu);
	/* b's /slow comes after an answer written by the answering thread, so
	 * the I/O thread runs it while resuming b, after it took its list of
	 * posted connections: a's post waits for the next round. */
	cli_sends(&b, "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\n1"
	              "POST /slow HTTP/1.1\r\nContent-Length: 1\r\n\r\ns");
	pthread_mutex_lock(&T.mu);
	while (!T.in_slow)
		pthread_cond_wait(&T.cv, &T.mu);
	T.release = true; /* a's first answer, written by the answering thread */
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	resp r;
	ck_assert(cli_resp(&a, &r, false));
	ck_assert_int_eq(r.status, 200);
	reset_close(&x);
	reset_close(&a);
	pthread_mutex_lock(&T.mu);
	T.slow_go = true;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	expect_echo(&b, "1");
	expect_echo(&b, "s");
	post(&b, "/", "alive", "");
	expect_echo(&b, "alive");
	cli_close(&b);
	srv_stop();
}
END_TEST

static void *stop_thread(void *arg)
{
	rt_httpd_stop(T.s);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

START_TEST(test_srv_stop)
{
	/* Stopping closes every connection and waits for the requests in the
	 * endpoint's hands; their answers go nowhere. */
	srv_start(100, 1 << 20, 0);
	cli c = cli_open(), idle = cli_open(), part = cli_open();
	cli_sends(&part, "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
	post(&c, "/hold", "held", "");
	pthread_mutex_lock(&T.mu);
	while (T.held == NULL)
		pthread_cond_wait(&T.cv, &T.mu);
	pthread_mutex_unlock(&T.mu);
	atomic_bool stopped = false;
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, stop_thread, &stopped), 0);
	cli_expect_eof(&idle);
	cli_expect_eof(&part);
	cli_expect_eof(&c); /* its request is still held */
	ck_assert(!atomic_load(&stopped));
	pthread_mutex_lock(&T.mu);
	T.release = true;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	pthread_join(th, NULL);
	ck_assert(atomic_load(&stopped));
	pthread_mutex_lock(&T.mu);
	T.stop = true;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	pthread_join(T.th, NULL);
	cli_close(&c);
	cli_close(&idle);
	cli_close(&part);
}
END_TEST

START_TEST(test_srv_peer_gone)
{
	/* The client goes away while its request is in the endpoint's hands:
	 * the answer is dropped, the connection freed, the server unharmed. */
	srv_start(100, 1 << 20, 0);
	cli c = cli_open();
	post(&c, "/hold", "gone", "");
	pthread_mutex_lock(&T.mu);
	while (T.held == NULL)
		pthread_cond_wait(&T.cv, &T.mu);
	pthread_mutex_unlock(&T.mu);
	struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* a reset */
	setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	cli_close(&c);
	cli d = cli_open(); /* served meanwhile */
	post(&d, "/", "other", "");
	expect_echo(&d, "other");
	pthread_mutex_lock(&T.mu);
	T.release = true;
	pthread_cond_broadcast(&T.cv);
	while (T.held != NULL)
		pthread_cond_wait(&T.cv, &T.mu);
	pthread_mutex_unlock(&T.mu);
	post(&d, "/", "again", "");
	expect_echo(&d, "again");
	cli_close(&d);
	srv_stop();
}
END_TEST

static Suite *http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_target);
	tcase_add_test(tc, test_crc32);
	tcase_add_test(tc, test_content_type);
	tcase_add_test(tc, test_json_budget);
	tcase_add_test(tc, test_sigv4_get_vanilla);
	tcase_add_test(tc, test_sigv4_query_order);
	tcase_add_test(tc, test_sigv4_post_form);
	tcase_add_test(tc, test_sigv4_header_values);
	tcase_add_test(tc, test_sigv4_parse_auth);
	tcase_add_test(tc, test_sigv4_verify);
	tcase_add_test(tc, test_sigv4_signed_headers);
	tcase_add_test(tc, test_creds_bad);
	tcase_add_test(tc, test_parse_basic);
	tcase_add_test(tc, test_parse_bytewise);
	tcase_add_test(tc, test_parse_pipelined);
	tcase_add_test(tc, test_parse_limits);
	tcase_add_test(tc, test_parse_bad);
	tcase_add_test(tc, test_parse_connection);
	tcase_add_test(tc, test_parse_fuzz);
	suite_add_tcase(s, tc);
	/* The server over sockets on 127.0.0.1 (a few seconds each at most;
	 * the timeout test waits for the once-a-second scan). */
	TCase *srv = tcase_create("server");
	tcase_set_timeout(srv, 120);
	tcase_add_test(srv, test_srv_keepalive);
	tcase_add_test(srv, test_srv_pipelined);
	tcase_add_test(srv, test_srv_continue);
	tcase_add_test(srv, test_srv_http10);
	tcase_add_test(srv, test_srv_errors);
	tcase_add_test(srv, test_srv_chunked);
	tcase_add_test(srv, test_srv_big_answer);
	tcase_add_test(srv, test_srv_limits);
	tcase_add_test(srv, test_srv_timeouts);
	tcase_add_test(srv, test_srv_head_timeout);
	tcase_add_test(srv, test_srv_body_min_rate);
	tcase_add_test(srv, test_srv_announced_body);
	tcase_add_test(srv, test_srv_peer_held);
	tcase_add_test(srv, test_srv_peer_conns);
	tcase_add_test(srv, test_srv_emfile);
	tcase_add_test(srv, test_srv_handshake_rate);
	tcase_add_test(srv, test_srv_handshake_slot_shared);
	tcase_add_test(srv, test_srv_stop);
	tcase_add_test(srv, test_srv_peer_gone);
	tcase_add_test(srv, test_srv_reset_storm);
	tcase_add_test(srv, test_srv_closed_while_posted);
	suite_add_tcase(s, srv);
	return s;
}

TL_MAIN(http_suite)
