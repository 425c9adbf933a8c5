/*
 * httpd_parse.c -- the HTTP/1.1 request head parser of the router's HTTP
 * server (contract: httpd.h).  Pure: no I/O, no allocation.
 *
 * Strict where leniency would let two parsers disagree about where a
 * request ends (request smuggling): a Content-Length is one decimal number
 * (repeats must agree), a Transfer-Encoding of any value is reported so
 * that the endpoint refuses the request and closes, obsolete line folding
 * and whitespace before a header's colon are errors, and control bytes
 * (NUL, bare CR) are refused anywhere.  Lenient where RFC 9112 allows it:
 * lines may end in LF alone, and blank lines before a request line are
 * skipped.
 */
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "router/httpd.h"

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	switch (c) {
	case '!':
	case '#':
	case '$':
	case '%':
	case '&':
	case '\'':
	case '*':
	case '+':
	case '-':
	case '.':
	case '^':
	case '_':
	case '`':
	case '|':
	case '~':
		return true;
	default:
		return false;
	}
}

/* A byte allowed in a header value or the request target: visible ASCII,
 * obs-text, and (values only) space and tab. */
static bool is_vchar(unsigned char c)
{
	return (c > 0x20 && c < 0x7f) || c >= 0x80;
}

/* Does a comma-separated header value hold `token` (case-insensitive)? */
static bool has_token(const char *v, const char *token)
{
	size_t n = strlen(token);
	while (*v != '\0') {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		const char *e = v;
		while (*e != '\0' && *e != ',')
			e++;
		const char *t = e;
		while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		if ((size_t)(t - v) == n && strncasecmp(v, token, n) == 0)
			return true;
		v = e;
	}
	return false;
}

/* Content-Length: 1*DIGIT, at most 19 digits (no overflow). */
static bool parse_length(const char *v, uint64_t *out)
{
	uint64_t n = 0;
	size_t i = 0;
	for (; v[i] >= '0' && v[i] <= '9'; i++) {
		if (i == 19)
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	if (i == 0 || v[i] != '\0')
		return false;
	*out = n;
	return true;
}

/* The end of line p (its '\n'), and where its content ends (before "\r\n"
 * or "\n"). */
static char *line_end(char *p, char *end, char **content_end)
{
	char *nl = memchr(p, '\n', (size_t)(end - p));
	assert(nl != NULL); /* the head ends with a blank line */
	*content_end = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
	return nl;
}

static rt_httpd_parse_rc parse_request_line(char *p, char *eol, rt_httpd_head *out)
{
	char *m = p;
	while (p < eol && is_tchar((unsigned char)*p))
		p++;
	if (p == m || p == eol || *p != ' ')
		return RT_HTTPD_BAD;
	*p++ = '\0';
	char *t = p;
	while (p < eol && is_vchar((unsigned char)*p))
		p++;
	if (p == t || p == eol || *p != ' ')
		return RT_HTTPD_BAD;
	*p++ = '\0';
	size_t vlen = (size_t)(eol - p);
	if (vlen != 8 || memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' ||
	    p[7] < '0' || p[7] > '9')
		return RT_HTTPD_BAD;
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return RT_HTTPD_VERSION;
	out->method = m;
	out->target = t;
	out->minor = p[7] - '0';
	return RT_HTTPD_DONE;
}

/* What the headers say about framing and the connection. */
static rt_httpd_parse_rc head_derive(rt_httpd_head *out)
{
	bool ka = false, close = false, have_len = false;
	uint32_t n_te = 0;
	bool te_chunked = false;
	for (uint32_t i = 0; i < out->n; i++) {
		const char *name = out->h[i].name, *v = out->h[i].value;
		switch (strlen(name)) {
		case 6:
			if (strcasecmp(name, "Expect") == 0 && strcasecmp(v, "100-continue") == 0)
				out->expect_continue = out->minor >= 1;
			break;
		case 10:
			if (strcasecmp(name, "Connection") == 0) {
				close |= has_token(v, "close");
				ka |= has_token(v, "keep-alive");
			}
			break;
		case 14:
			if (strcasecmp(name, "Content-Length") == 0) {
				uint64_t n;
				if (!parse_length(v, &n) || (have_len && n != out->content_length))
					out->bad_length = true;
				else
					out->content_length = n;
				have_len = true;
			}
			break;
		case 17:
			if (strcasecmp(name, "Transfer-Encoding") == 0) {
				out->chunked = true;
				n_te++;
				te_chunked = strcasecmp(v, "chunked") == 0;
			}
			break;
		default:
			break;
		}
	}
	if (out->bad_length)
		out->content_length = 0;
	/* Decodable: "chunked" alone, once, and no Content-Length beside it (a
	 * message with both is how requests are smuggled past proxies). */
	out->chunked_body = n_te == 1 && te_chunked && !have_len;
	out->keep_alive = !close && (out->minor >= 1 || ka);
	return RT_HTTPD_DONE;
}

rt_httpd_parse_rc rt_httpd_parse(char *buf, size_t len, size_t *scanned, rt_httpd_head *out)
{
	/* Leading blank lines (a client's stray CRLF after a body) are skipped. */
	size_t start = 0;
	while (start < len && (buf[start] == '\n' ||
	                       (buf[start] == '\r' && start + 1 < len && buf[start + 1] == '\n')))
		start += buf[start] == '\r' ? 2 : 1;
	if (start < len && buf[start] == '\r' && start + 1 == len)
		return RT_HTTPD_INCOMPLETE; /* "\r" of a leading CRLF, maybe */

	/* The blank line ending the head: a '\n' right after another line's
	 * '\n' (CR optional). */
	size_t i = *scanned > start ? *scanned : start, end = 0;
	while (i < len) {
		char *nl = memchr(buf + i, '\n', len - i);
		if (nl == NULL) {
			i = len;
			break;
		}
		size_t k = (size_t)(nl - buf);
		if ((k >= start + 1 && buf[k - 1] == '\n') ||
		    (k >= start + 2 && buf[k - 1] == '\r' && buf[k - 2] == '\n')) {
			end = k + 1;
			break;
		}
		i = k + 1;
	}
	*scanned = i;
	if (end == 0)
		return len >= RT_HTTPD_MAX_HEAD ? RT_HTTPD_TOO_LARGE : RT_HTTPD_INCOMPLETE;
	if (end > RT_HTTPD_MAX_HEAD)
		return RT_HTTPD_TOO_LARGE;

	out->n = 0;
	out->content_length = 0;
	out->bad_length = out->chunked = out->chunked_body = out->keep_alive =
	    out->expect_continue = false;
	out->len = end;
	char *p = buf + start, *e = buf + end, *ce;
	char *nl = line_end(p, e, &ce);
	rt_httpd_parse_rc rc = parse_request_line(p, ce, out);
	if (rc != RT_HTTPD_DONE)
		return rc;
	for (p = nl + 1;; p = nl + 1) {
		nl = line_end(p, e, &ce);
		if (ce == p)
			break; /* the blank line */
		if (*p == ' ' || *p == '\t')
			return RT_HTTPD_BAD; /* obsolete line folding */
		char *name = p;
		while (p < ce && is_tchar((unsigned char)*p))
			p++;
		if (p == name || p == ce || *p != ':')
			return RT_HTTPD_BAD;
		*p++ = '\0';
		while (p < ce && (*p == ' ' || *p == '\t'))
			p++;
		char *v = p, *ve = ce;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (char *q = v; q < ve; q++)
			if (!is_vchar((unsigned char)*q) && *q != ' ' && *q != '\t')
				return RT_HTTPD_BAD;
		if (out->n == RT_HTTPD_MAX_HEADERS)
			return RT_HTTPD_TOO_LARGE;
		*ve = '\0';
		out->h[out->n].name = name;
		out->h[out->n].value = v;
		out->n++;
	}
	return head_derive(out);
}

const char *rt_httpd_header_get(const rt_httpd_head *h, const char *name)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (strcasecmp(h->h[i].name, name) == 0)
			return h->h[i].value;
	return NULL;
}

const char *rt_httpd_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 411:
		return "Length Required";
	case 413:
		return "Payload Too Large";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}
