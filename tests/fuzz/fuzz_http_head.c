/*
 * fuzz_http_head -- the bytes of an HTTP request head on the router's
 * DynamoDB endpoint, parsed by router/httpd_parse.c (rt_httpd_parse), the
 * pure parser router/httpd.c runs on every connection's buffer before
 * anything else.
 *
 * Each input is parsed twice: in one call, and fed as the server feeds a
 * head that arrives in pieces (growing prefixes, carrying *scanned).  Both
 * must agree; a parsed head must point into the buffer, within its first
 * out->len bytes, with NUL-terminated fields, and respect the documented
 * limits.  A parsed head then goes through SigV4 as the endpoint checks it
 * (router/sigv4.c, rt_sigv4_verify_as: the Authorization header's parse,
 * the signed-header rules, the key and date, the canonical request of the
 * method, URI, query and headers, the signature) against the credentials
 * of harness.h, with the bytes after the head, up to Content-Length, as
 * the body.
 *
 * Input: the raw bytes.  Seeds: tests/fuzz/corpus/http_head/.
 */
#include <stdlib.h>
#include <string.h>

#include "router/http.h"
#include "router/httpd.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static void in_head(const char *buf, size_t len, const char *s)
{
	FZ_ASSERT(s != NULL && s >= buf && s < buf + len, "a field outside the head");
	FZ_ASSERT(memchr(s, '\0', len - (size_t)(s - buf)) != NULL, "a field without its NUL");
}

static rt_httpd_parse_rc whole(char *buf, size_t len, rt_httpd_head *h)
{
	size_t scanned = 0;
	rt_httpd_parse_rc rc = rt_httpd_parse(buf, len, &scanned, h);
	FZ_ASSERT(rc >= RT_HTTPD_INCOMPLETE && rc <= RT_HTTPD_VERSION, "rc %d", (int)rc);
	if (rc != RT_HTTPD_DONE)
		return rc;
	FZ_ASSERT(h->len > 0 && h->len <= len && h->len <= RT_HTTPD_MAX_HEAD, "head of %zu bytes",
	          h->len);
	FZ_ASSERT(h->n <= RT_HTTPD_MAX_HEADERS, "%u headers", h->n);
	FZ_ASSERT(h->minor == 0 || h->minor == 1, "HTTP/1.%d", h->minor);
	in_head(buf, h->len, h->method);
	in_head(buf, h->len, h->target);
	for (uint32_t i = 0; i < h->n; i++) {
		in_head(buf, h->len, h->h[i].name);
		in_head(buf, h->len, h->h[i].value);
		FZ_ASSERT(rt_httpd_header_get(h, h->h[i].name) != NULL, "header %s not found",
		          h->h[i].name);
	}
	(void)rt_httpd_header_get(h, "Authorization");
	(void)rt_httpd_header_get(h, "X-Amz-Target");
	return rc;
}

static const char *header(void *ctx, const char *name)
{
	return rt_httpd_header_get(ctx, name);
}

/* The endpoint's signature check of a parsed head and its body. */
static void sigv4(const rt_httpd_head *h, const char *buf, size_t size)
{
	size_t body = size - h->len;
	if (body > h->content_length)
		body = (size_t)h->content_length;
	rt_sigv4_req r = {
	    .method = h->method,
	    .uri = h->target,
	    .header = header,
	    .ctx = (void *)h,
	    .body = buf + h->len,
	    .body_len = body,
	};
	rt_principal who;
	char m[SH_ERRMSG_SIZE] = "";
	rt_auth_result ar = rt_sigv4_verify_as(fz_creds(), &r, FZ_NOW_HTTP, &who, m);
	fz_log("  rt_sigv4_verify_as: %s %s\n", rt_auth_error_type(ar), m);
	FZ_ASSERT(ar >= RT_AUTH_OK && ar <= RT_AUTH_SIGNATURE, "rt_sigv4_verify_as: %d", (int)ar);
	FZ_ASSERT(ar == RT_AUTH_OK || m[0] != '\0', "refused without a message");
	FZ_ASSERT((ar == RT_AUTH_OK) == (who.cred != NULL),
	          "a signer without a verified signature");
	(void)rt_auth_error_type(ar);
	(void)rt_auth_code(ar);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	char *buf = malloc(size), *piece = malloc(size);
	static rt_httpd_head h1, h2;
	memcpy(buf, data, size);
	rt_httpd_parse_rc rc = whole(buf, size, &h1);

	/* In pieces: prefixes growing by a step the input picks. */
	size_t step = 1 + data[0] % 61, scanned = 0, have = 0;
	rt_httpd_parse_rc rc2 = RT_HTTPD_INCOMPLETE;
	memcpy(piece, data, size);
	while (rc2 == RT_HTTPD_INCOMPLETE && have < size) {
		have = have + step < size ? have + step : size;
		rc2 = rt_httpd_parse(piece, have, &scanned, &h2);
		FZ_ASSERT(scanned <= have, "scanned %zu of %zu", scanned, have);
	}
	FZ_ASSERT(rc2 == rc, "in one piece %d, in pieces of %zu: %d", (int)rc, step, (int)rc2);
	if (rc == RT_HTTPD_DONE) {
		FZ_ASSERT(h1.len == h2.len && h1.n == h2.n &&
		              h1.content_length == h2.content_length &&
		              h1.bad_length == h2.bad_length && h1.chunked == h2.chunked &&
		              h1.keep_alive == h2.keep_alive &&
		              h1.expect_continue == h2.expect_continue && h1.minor == h2.minor,
		          "the head parsed in pieces differs");
		FZ_ASSERT(strcmp(h1.method, h2.method) == 0 && strcmp(h1.target, h2.target) == 0,
		          "request line differs");
		sigv4(&h1, buf, size);
	}
	free(buf);
	free(piece);
	return 0;
}
