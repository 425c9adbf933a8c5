/*
 * The HTTP endpoint's pure parts (router/http.h): X-Amz-Target parsing,
 * x-amz-crc32, Content-Type, the credentials file, and SigV4 against AWS's
 * published Signature Version 4 test-suite vectors (get-vanilla,
 * get-vanilla-query-order-key-case, post-x-www-form-urlencoded; credentials
 * AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830T123600Z,
 * us-east-1, service "service").
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "router/http.h"
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
	ck_assert_ptr_null(rt_http_target_op("DynamoDBStreams_20120810.GetRecords"));
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

static Suite *http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_target);
	tcase_add_test(tc, test_crc32);
	tcase_add_test(tc, test_content_type);
	tcase_add_test(tc, test_sigv4_get_vanilla);
	tcase_add_test(tc, test_sigv4_query_order);
	tcase_add_test(tc, test_sigv4_post_form);
	tcase_add_test(tc, test_sigv4_header_values);
	tcase_add_test(tc, test_sigv4_parse_auth);
	tcase_add_test(tc, test_sigv4_verify);
	tcase_add_test(tc, test_creds_bad);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(http_suite)
