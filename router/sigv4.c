/*
 * sigv4.c -- AWS Signature Version 4 verification for the HTTP endpoint
 * (contract: http.h), and the credentials file.
 *
 * The algorithm, as AWS documents it ("Create a signed AWS API request"):
 *
 *   CanonicalRequest = Method \n CanonicalURI \n CanonicalQueryString \n
 *                      CanonicalHeaders \n SignedHeaders \n hex(SHA256(body))
 *   StringToSign     = "AWS4-HMAC-SHA256" \n X-Amz-Date \n
 *                      date/region/service/aws4_request \n hex(SHA256(CanonicalRequest))
 *   kSigning         = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service),
 *                      "aws4_request")
 *   Signature        = hex(HMAC(kSigning, StringToSign))
 *
 * The server recomputes the signature from what it received and compares.
 * Region and service are taken from the client's credential scope (any
 * region is accepted, as DynamoDB Local does).  SHA-256 and HMAC come from
 * nettle.  Not covered: presigned URLs (X-Amz-Signature in the query),
 * session tokens (X-Amz-Security-Token is signed like any header but not
 * checked against anything), SigV4A, and chunked (streaming) payloads --
 * DynamoDB clients use none of them.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include <sys/stat.h>

#include "common/alloc.h"
#include "proto/wire_api.h"
#include "proto/wire_auth.h"
#include "router/http.h"

#define MAX_SKEW_S     WIRE_AUTH_SKEW_S
#define PATH_MAX_SHOWN 400

/* ------------------------------------------------------------------------ */
/* A growing string                                                          */
/* ------------------------------------------------------------------------ */

typedef struct sb {
	char *p;
	size_t len, cap;
	bool failed;
} sb;

static void sb_add(sb *s, const char *p, size_t n)
{
	if (s->failed)
		return;
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->len + n + 1)
			cap *= 2;
		char *q = sh_realloc(s->p, cap);
		if (q == NULL) {
			s->failed = true;
			return;
		}
		s->p = q;
		s->cap = cap;
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = '\0';
}

static void sb_str(sb *s, const char *p)
{
	sb_add(s, p, strlen(p));
}

static void sb_chr(sb *s, char c)
{
	sb_add(s, &c, 1);
}

/* Returns the string (caller frees) or NULL when out of memory. */
static char *sb_take(sb *s)
{
	if (s->failed || s->p == NULL) {
		sh_free(s->p);
		s->p = NULL;
		if (!s->failed) {
			char *e = sh_malloc(1);
			if (e != NULL)
				e[0] = '\0';
			return e;
		}
		return NULL;
	}
	return s->p;
}

/* ------------------------------------------------------------------------ */
/* Hashes                                                                    */
/* ------------------------------------------------------------------------ */

static void hex(const uint8_t *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, sizeof(d), d);
	hex(d, sizeof(d), out);
}

static void hmac(const uint8_t *key, size_t klen, const char *msg, uint8_t out[32])
{
	struct hmac_sha256_ctx c;
	hmac_sha256_set_key(&c, klen, key);
	hmac_sha256_update(&c, strlen(msg), (const uint8_t *)msg);
	hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

void rt_sigv4_sign(const char *secret, const char *date, const char *region, const char *service,
                   const char *string_to_sign, char out[65])
{
	uint8_t k[32], sig[32];
	wire_auth_signing_key(secret, date, region, service, k);
	hmac(k, 32, string_to_sign, sig);
	hex(sig, 32, out);
}

/* ------------------------------------------------------------------------ */
/* Canonical request                                                         */
/* ------------------------------------------------------------------------ */

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

static void encode(sb *s, const char *p, size_t n, bool keep_slash)
{
	static const char digits[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (unreserved(c) || (keep_slash && c == '/')) {
			sb_chr(s, (char)c);
		} else {
			char e[3] = {'%', digits[c >> 4], digits[c & 15]};
			sb_add(s, e, 3);
		}
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes p[0..n) into a new string ('+' stays '+'). */
static char *decode(const char *p, size_t n)
{
	char *d = sh_malloc(n + 1);
	if (d == NULL)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int h, l;
		if (p[i] == '%' && i + 2 < n && (h = hexval(p[i + 1])) >= 0 &&
		    (l = hexval(p[i + 2])) >= 0) {
			d[k++] = (char)(h * 16 + l);
			i += 2;
		} else {
			d[k++] = p[i];
		}
	}
	d[k] = '\0';
	return d;
}

typedef struct qparam {
	char *enc; /* "name=value", both encoded */
	size_t name_len;
} qparam;

static int qparam_cmp(const void *a, const void *b)
{
	const qparam *x = a, *y = b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->enc, y->enc, n);
	if (c != 0)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return strcmp(x->enc + x->name_len, y->enc + y->name_len);
}

/* The canonical query string of q[0..n) (without the '?'). */
static int canonical_query(sb *out, const char *q, size_t n)
{
	size_t count = 1;
	for (size_t i = 0; i < n; i++)
		count += q[i] == '&';
	qparam *ps = sh_calloc(count, sizeof(*ps));
	if (ps == NULL)
		return SHOAL_E_NOMEM;
	size_t np = 0;
	int rc = SHOAL_OK;
	const char *p = q, *end = q + n;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *e = amp != NULL ? amp : end;
		if (e > p) {
			const char *eq = memchr(p, '=', (size_t)(e - p));
			const char *ne = eq != NULL ? eq : e;
			char *name = decode(p, (size_t)(ne - p));
			char *val =
			    eq != NULL ? decode(eq + 1, (size_t)(e - eq - 1)) : decode("", 0);
			sb s = {0};
			if (name != NULL && val != NULL) {
				encode(&s, name, strlen(name), false);
				size_t nl = s.len;
				sb_chr(&s, '=');
				encode(&s, val, strlen(val), false);
				ps[np].enc = sb_take(&s);
				ps[np].name_len = nl;
			}
			sh_free(name);
			sh_free(val);
			if (ps[np].enc == NULL) {
				rc = SHOAL_E_NOMEM;
				break;
			}
			np++;
		}
		p = e + (amp != NULL ? 1 : 0);
	}
	if (rc == SHOAL_OK) {
		qsort(ps, np, sizeof(*ps), qparam_cmp);
		for (size_t i = 0; i < np; i++) {
			if (i > 0)
				sb_chr(out, '&');
			sb_str(out, ps[i].enc);
		}
	}
	for (size_t i = 0; i < np; i++)
		sh_free(ps[i].enc);
	sh_free(ps);
	return rc;
}

/* A header value as SigV4 canonicalises it: trimmed, runs of spaces one. */
static void header_value(sb *out, const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	bool space = false;
	for (size_t i = 0; i < n; i++) {
		if (v[i] == ' ' || v[i] == '\t') {
			space = true;
			continue;
		}
		if (space)
			sb_chr(out, ' ');
		space = false;
		sb_chr(out, v[i]);
	}
}

int rt_sigv4_canonical_request(const rt_sigv4_req *r, const char *signed_headers, char **out,
                               char *errmsg)
{
	*out = NULL;
	sb s = {0};
	sb_str(&s, r->method);
	sb_chr(&s, '\n');
	const char *uri = r->uri != NULL ? r->uri : "/";
	const char *qm = strchr(uri, '?');
	size_t plen = qm != NULL ? (size_t)(qm - uri) : strlen(uri);
	if (plen == 0)
		sb_chr(&s, '/');
	else
		encode(&s, uri, plen, true);
	sb_chr(&s, '\n');
	if (qm != NULL && canonical_query(&s, qm + 1, strlen(qm + 1)) != SHOAL_OK)
		s.failed = true;
	sb_chr(&s, '\n');
	const char *p = signed_headers;
	while (*p != '\0') {
		const char *semi = strchr(p, ';');
		size_t n = semi != NULL ? (size_t)(semi - p) : strlen(p);
		char name[256];
		if (n == 0 || n >= sizeof(name)) {
			sh_free(s.p);
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "bad SignedHeaders");
		}
		memcpy(name, p, n);
		name[n] = '\0';
		const char *v = r->header(r->ctx, name);
		if (v == NULL) {
			sh_free(s.p);
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "signed header %s is missing",
			               name);
		}
		sb_str(&s, name);
		sb_chr(&s, ':');
		header_value(&s, v);
		sb_chr(&s, '\n');
		p += n + (semi != NULL ? 1 : 0);
	}
	sb_chr(&s, '\n');
	sb_str(&s, signed_headers);
	sb_chr(&s, '\n');
	char h[65];
	sha256_hex(r->body != NULL ? r->body : "", r->body != NULL ? r->body_len : 0, h);
	sb_str(&s, h);
	*out = sb_take(&s);
	if (*out == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
	return SHOAL_OK;
}

int rt_sigv4_string_to_sign(const char *amz_date, const char *scope, const char *canonical,
                            char **out)
{
	char h[65];
	sha256_hex(canonical, strlen(canonical), h);
	sb s = {0};
	sb_str(&s, "AWS4-HMAC-SHA256\n");
	sb_str(&s, amz_date);
	sb_chr(&s, '\n');
	sb_str(&s, scope);
	sb_chr(&s, '\n');
	sb_str(&s, h);
	*out = sb_take(&s);
	return *out != NULL ? SHOAL_OK : SHOAL_E_NOMEM;
}

/* ------------------------------------------------------------------------ */
/* The Authorization header                                                  */
/* ------------------------------------------------------------------------ */

/* Copies the value of "key=" in the comma-separated list after the
 * algorithm (up to ',' or end) into out. */
static bool auth_field(const char *list, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	const char *p = list;
	while (*p != '\0') {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = strchr(p, ',');
		size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = n - kl - 1;
			if (vl == 0 || vl >= cap)
				return false;
			memcpy(out, p + kl + 1, vl);
			out[vl] = '\0';
			return true;
		}
		if (e == NULL)
			break;
		p = e + 1;
	}
	return false;
}

/* Splits "a/b/c/d/e" at '/' into exactly n parts copied into bufs. */
static bool split_scope(const char *cred, char *const *bufs, const size_t *caps, int n)
{
	const char *p = cred;
	for (int i = 0; i < n; i++) {
		const char *e = i < n - 1 ? strchr(p, '/') : p + strlen(p);
		if (e == NULL)
			return false;
		size_t len = (size_t)(e - p);
		if (len == 0 || len >= caps[i])
			return false;
		memcpy(bufs[i], p, len);
		bufs[i][len] = '\0';
		p = *e == '/' ? e + 1 : e;
	}
	return true;
}

bool rt_sigv4_parse_auth(const char *h, rt_sigv4_auth *out, char *errmsg)
{
	static const char alg[] = "AWS4-HMAC-SHA256";
	memset(out, 0, sizeof(*out));
	while (*h == ' ')
		h++;
	if (strncmp(h, alg, sizeof(alg) - 1) != 0 || h[sizeof(alg) - 1] != ' ') {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Authorization header requires 'AWS4-HMAC-SHA256' algorithm");
		return false;
	}
	const char *list = h + sizeof(alg);
	char cred[512], term[32];
	if (!auth_field(list, "Credential", cred, sizeof(cred))) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Authorization header requires 'Credential' parameter. Authorization=%s",
		        h);
		return false;
	}
	if (!auth_field(list, "SignedHeaders", out->signed_headers, sizeof(out->signed_headers))) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Authorization header requires 'SignedHeaders' parameter. "
		        "Authorization=%s",
		        h);
		return false;
	}
	if (!auth_field(list, "Signature", out->signature, sizeof(out->signature)) ||
	    strlen(out->signature) != 64) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Authorization header requires 'Signature' parameter. Authorization=%s", h);
		return false;
	}
	for (char *c = out->signature; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	char *bufs[] = {out->key_id, out->date, out->region, out->service, term};
	size_t caps[] = {sizeof(out->key_id), sizeof(out->date), sizeof(out->region),
	                 sizeof(out->service), sizeof(term)};
	if (!split_scope(cred, bufs, caps, 5) || strcmp(term, "aws4_request") != 0 ||
	    strlen(out->date) != 8) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Credential should be scoped to a valid region, not '%s'. ", cred);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Verification                                                              */
/* ------------------------------------------------------------------------ */

/* Whether `name` (lower case) is in a SignedHeaders list ("a;b;c"). */
static bool signed_has(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p != '\0';) {
		const char *e = strchr(p, ';');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		if (len == n && strncasecmp(p, name, n) == 0)
			return true;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return false;
}

int rt_auth_code(rt_auth_result r)
{
	switch (r) {
	case RT_AUTH_OK:
		return SHOAL_OK;
	case RT_AUTH_MISSING:
		return SHOAL_E_AUTH_MISSING;
	case RT_AUTH_INCOMPLETE:
		return SHOAL_E_AUTH_INCOMPLETE;
	case RT_AUTH_UNRECOGNIZED:
		return SHOAL_E_AUTH_UNRECOGNIZED;
	default:
		return SHOAL_E_AUTH_SIGNATURE;
	}
}

const char *rt_auth_error_type(rt_auth_result r)
{
	return r == RT_AUTH_OK ? "" : wire_api_error_type(rt_auth_code(r));
}

/* "YYYYMMDDTHHMMSSZ" -> seconds since the epoch, or -1. */
static int64_t parse_amz_date(const char *s)
{
	if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return -1;
	for (int i = 0; i < 15; i++)
		if (i != 8 && !isdigit((unsigned char)s[i]))
			return -1;
	struct tm tm = {0};
	tm.tm_year =
	    (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0') - 1900;
	tm.tm_mon = (s[4] - '0') * 10 + (s[5] - '0') - 1;
	tm.tm_mday = (s[6] - '0') * 10 + (s[7] - '0');
	tm.tm_hour = (s[9] - '0') * 10 + (s[10] - '0');
	tm.tm_min = (s[11] - '0') * 10 + (s[12] - '0');
	tm.tm_sec = (s[13] - '0') * 10 + (s[14] - '0');
	if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60)
		return -1;
	return (int64_t)timegm(&tm);
}

static void fmt_amz_date(int64_t t, char out[17])
{
	wire_auth_amz_date(t, out);
}

static bool equal_ct(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

rt_auth_result rt_auth_check_key(const rt_creds *c, const char *key_id, const char *amz_date,
                                 const char *scope_date8, int64_t now_s, const rt_cred **key,
                                 char *errmsg)
{
	*key = NULL;
	int64_t t = parse_amz_date(amz_date);
	if (t < 0) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Date must be in ISO-8601 'basic format'. Got '%s'", amz_date);
		return RT_AUTH_INCOMPLETE;
	}
	const rt_cred *k = rt_creds_key(c, key_id);
	if (k == NULL) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "The security token included in the request is invalid.");
		return RT_AUTH_UNRECOGNIZED;
	}
	if (t < now_s - MAX_SKEW_S || t > now_s + MAX_SKEW_S) {
		char nb[17], lim[17];
		fmt_amz_date(now_s, nb);
		if (t < now_s) {
			fmt_amz_date(now_s - MAX_SKEW_S, lim);
			sh_errf(errmsg, SHOAL_E_VALIDATION,
			        "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			        amz_date, lim, nb);
		} else {
			fmt_amz_date(now_s + MAX_SKEW_S, lim);
			sh_errf(errmsg, SHOAL_E_VALIDATION,
			        "Signature not yet current: %s is still later than %s (%s + 15 "
			        "min.)",
			        amz_date, lim, nb);
		}
		return RT_AUTH_SIGNATURE;
	}
	if (strncmp(amz_date, scope_date8, 8) != 0 || strlen(scope_date8) != 8) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
		        "date from HTTP: '%s' != '%.8s', from '%s'.",
		        scope_date8, amz_date, amz_date);
		return RT_AUTH_SIGNATURE;
	}
	*key = k;
	return RT_AUTH_OK;
}

rt_auth_result rt_sigv4_verify(const rt_creds *c, const rt_sigv4_req *r, int64_t now_s,
                               char *errmsg)
{
	rt_principal who;
	return rt_sigv4_verify_as(c, r, now_s, &who, errmsg);
}

rt_auth_result rt_sigv4_verify_as(const rt_creds *c, const rt_sigv4_req *r, int64_t now_s,
                                  rt_principal *who, char *errmsg)
{
	memset(who, 0, sizeof(*who));
	const char *h = r->header(r->ctx, "Authorization");
	if (h == NULL || h[0] == '\0') {
		sh_errf(errmsg, SHOAL_E_VALIDATION, "Request is missing Authentication Token");
		return RT_AUTH_MISSING;
	}
	rt_sigv4_auth au;
	if (!rt_sigv4_parse_auth(h, &au, errmsg))
		return RT_AUTH_INCOMPLETE;
	/* What the signature must cover: the host, the date, and the
	 * operation.  Without X-Amz-Target among them a captured GetItem could
	 * be replayed as a DeleteItem of the same key (the body is signed, the
	 * operation would not be). */
	static const struct {
		const char *name, *shown;
		bool if_present;
	} must[] = {
	    {"host", "'Host' or ':authority'", false},
	    {"x-amz-date", "'X-Amz-Date'", false},
	    {"x-amz-target", "'X-Amz-Target'", true},
	};
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
		if ((!must[i].if_present || r->header(r->ctx, must[i].name) != NULL) &&
		    !signed_has(au.signed_headers, must[i].name)) {
			sh_errf(errmsg, SHOAL_E_VALIDATION,
			        "%s must be a 'SignedHeader' in the AWS Authorization.",
			        must[i].shown);
			return RT_AUTH_INCOMPLETE;
		}
	const char *date = r->header(r->ctx, "X-Amz-Date");
	if (date == NULL) {
		sh_errf(errmsg, SHOAL_E_VALIDATION,
		        "Authorization header requires existence of either a 'X-Amz-Date' or a "
		        "'Date' header. Authorization=%s",
		        h);
		return RT_AUTH_INCOMPLETE;
	}
	const rt_cred *k;
	rt_auth_result res = rt_auth_check_key(c, au.key_id, date, au.date, now_s, &k, errmsg);
	if (res != RT_AUTH_OK)
		return res;
	char *canon = NULL, *sts = NULL;
	char m[SH_ERRMSG_SIZE];
	if (rt_sigv4_canonical_request(r, au.signed_headers, &canon, m) != SHOAL_OK) {
		sh_errf(errmsg, SHOAL_E_VALIDATION, "%s (%s)", RT_AUTH_MISMATCH_MSG, m);
		return RT_AUTH_SIGNATURE;
	}
	char scope[300];
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", au.date, au.region, au.service);
	char sig[65];
	bool ok = false;
	if (rt_sigv4_string_to_sign(date, scope, canon, &sts) == SHOAL_OK) {
		uint8_t key[32], raw[32];
		rt_auth_signing_key(c, k, au.date, au.region, au.service, key);
		hmac(key, 32, sts, raw);
		hex(raw, 32, sig);
		ok = equal_ct(sig, au.signature, 64);
	}
	sh_free(canon);
	sh_free(sts);
	if (!ok) {
		sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", RT_AUTH_MISMATCH_MSG);
		return RT_AUTH_SIGNATURE;
	}
	who->cred = k;
	snprintf(who->region, sizeof(who->region), "%s", au.region);
	return RT_AUTH_OK;
}

/* ------------------------------------------------------------------------ */
/* Credentials file                                                          */
/* ------------------------------------------------------------------------ */

void rt_creds_free(rt_creds *c)
{
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		sh_free(c->v[i].key_id);
		if (c->v[i].secret != NULL)
			memset(c->v[i].secret, 0, strlen(c->v[i].secret));
		sh_free(c->v[i].secret);
		for (uint32_t g = 0; g < c->v[i].n_grants; g++)
			sh_free(c->v[i].grants[g].table);
		sh_free(c->v[i].grants);
	}
	sh_free(c->v);
	c->v = NULL;
	c->n = 0;
}

const rt_cred *rt_creds_key(const rt_creds *c, const char *key_id)
{
	for (uint32_t i = 0; c != NULL && i < c->n; i++)
		if (strcmp(c->v[i].key_id, key_id) == 0)
			return &c->v[i];
	return NULL;
}

const char *rt_creds_find(const rt_creds *c, const char *key_id)
{
	const rt_cred *k = rt_creds_key(c, key_id);
	return k != NULL ? k->secret : NULL;
}

/* A table name or pattern of a grant: DynamoDB's table name characters
 * ([a-zA-Z0-9_.-], 3..255), optionally ending in '*', or "*". */
static bool table_pattern_ok(const char *t)
{
	size_t n = strlen(t);
	if (n > 0 && t[n - 1] == '*')
		n--;
	if (n > 255 || (n == 0 && t[0] != '*'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)t[i]) && t[i] != '_' && t[i] != '.' && t[i] != '-')
			return false;
	return true;
}

/* Adds one grant word ("read:A,B", "admin", ...) to k. */
static int add_grant(rt_cred *k, char *word, const char *where, char *errmsg)
{
	if (strcmp(word, "admin") == 0) {
		k->admin = true;
		return SHOAL_OK;
	}
	if (strncmp(word, "account:", 8) == 0) {
		const char *a = word + 8;
		bool ok = strlen(a) == 12;
		for (size_t i = 0; ok && i < 12; i++)
			ok = isdigit((unsigned char)a[i]);
		if (!ok)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%s: account:%s is not a 12-digit account id", where, a);
		memcpy(k->account, a, 13);
		return SHOAL_OK;
	}
	static const struct {
		const char *name;
		unsigned perms;
	} kinds[] = {
	    {"read:", RT_PERM_READ},
	    {"write:", RT_PERM_READ | RT_PERM_WRITE},
	    {"ddl:", RT_PERM_DDL},
	};
	unsigned perms = 0;
	char *list = NULL;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(word, kinds[i].name, strlen(kinds[i].name)) == 0) {
			perms = kinds[i].perms;
			list = word + strlen(kinds[i].name);
		}
	if (perms == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "%s: unknown grant '%s' (read:TABLES, write:TABLES, ddl:TABLES, "
		               "admin or account:ID)",
		               where, word);
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (!table_pattern_ok(t))
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "%s: '%s' is not a table name, a prefix* or *", where, t);
		rt_grant *g = sh_realloc(k->grants, (k->n_grants + 1) * sizeof(*g));
		if (g == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		k->grants = g;
		g[k->n_grants].perms = perms;
		g[k->n_grants].table = sh_strndup(t, strlen(t));
		if (g[k->n_grants].table == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		k->n_grants++;
	}
	if (list[0] == '\0')
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s: '%s' names no table", where, word);
	return SHOAL_OK;
}

int rt_creds_load(const char *path, rt_creds *c, char *errmsg)
{
	static _Atomic uint64_t gens;
	memset(c, 0, sizeof(*c));
	c->gen = atomic_fetch_add(&gens, 1) + 1;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "credentials file %s: cannot open",
		               path);
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0)
		c->others_can_read = true;
	char line[4096];
	int lineno = 0, rc = SHOAL_OK;
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "credentials file %s line %d: longer than %zu bytes", path,
			             lineno, sizeof(line) - 2);
			break;
		}
		char *words[64];
		int n = 0;
		char *save = NULL;
		for (char *w = strtok_r(line, " \t\r\n", &save); w != NULL;
		     w = strtok_r(NULL, " \t\r\n", &save)) {
			if (n < 64)
				words[n] = w;
			n++; /* more than 64: refused below */
		}
		if (n == 0 || words[0][0] == '#')
			continue;
		char where[PATH_MAX_SHOWN];
		snprintf(where, sizeof(where), "credentials file %s line %d", path, lineno);
		if (n > 64) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "%s: at most 62 grants (list tables with commas)", where);
			break;
		}
		if (n < 2) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "%s: expected ACCESS_KEY_ID SECRET [GRANT ...]", where);
			break;
		}
		if (strlen(words[0]) >= WIRE_AUTH_KEY_MAX || strlen(words[1]) > 200) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION,
			             "%s: key id (< %d bytes) or secret (<= 200 bytes) too long",
			             where, WIRE_AUTH_KEY_MAX);
			break;
		}
		if (rt_creds_find(c, words[0]) != NULL) {
			rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "%s: key id %s repeated", where,
			             words[0]);
			break;
		}
		rt_cred *v = sh_realloc(c->v, (c->n + 1) * sizeof(*v));
		if (v == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
			break;
		}
		c->v = v;
		rt_cred *k = &v[c->n++];
		memset(k, 0, sizeof(*k));
		memcpy(k->account, "000000000000", 13);
		k->key_id = sh_strndup(words[0], strlen(words[0]));
		k->secret = sh_strndup(words[1], strlen(words[1]));
		if (k->key_id == NULL || k->secret == NULL) {
			rc = sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
			break;
		}
		bool grants = false;
		for (int i = 2; i < n && rc == SHOAL_OK; i++) {
			rc = add_grant(k, words[i], where, errmsg);
			grants = grants || strncmp(words[i], "account:", 8) != 0;
		}
		if (rc != SHOAL_OK)
			break;
		k->all = !grants;
	}
	memset(line, 0, sizeof(line));
	fclose(f);
	if (rc == SHOAL_OK && c->n == 0)
		rc = sh_errf(errmsg, SHOAL_E_VALIDATION, "credentials file %s: no credentials",
		             path);
	if (rc != SHOAL_OK)
		rt_creds_free(c);
	return rc;
}
