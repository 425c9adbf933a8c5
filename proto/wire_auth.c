/*
 * wire_auth.c -- the native message signature (contract: wire_auth.h).
 * SHA-256 and HMAC come from nettle.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include "common/errors.h"
#include "proto/wire.h"
#include "proto/wire_auth.h"

static void hmac(const uint8_t *key, size_t klen, const void *msg, size_t len, uint8_t out[32])
{
	struct hmac_sha256_ctx c;
	hmac_sha256_set_key(&c, klen, key);
	hmac_sha256_update(&c, len, msg);
	hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

static void hmac_str(const uint8_t *key, size_t klen, const char *msg, uint8_t out[32])
{
	hmac(key, klen, msg, strlen(msg), out);
}

void wire_auth_signing_key(const char *secret, const char *date8, const char *region,
                           const char *service, uint8_t key[32])
{
	/* HMAC keys longer than the block are hashed first; HMAC-SHA256 of
	 * "AWS4" + secret is computed with nettle's own handling of that. */
	struct hmac_sha256_ctx c;
	uint8_t k0[4 + 256];
	size_t sl = strlen(secret);
	if (sl > sizeof(k0) - 4)
		sl = sizeof(k0) - 4; /* the credentials file refuses longer secrets */
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, secret, sl);
	hmac_sha256_set_key(&c, sl + 4, k0);
	hmac_sha256_update(&c, strlen(date8), (const uint8_t *)date8);
	hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, key);
	memset(k0, 0, sizeof(k0));
	hmac_str(key, 32, region, key);
	hmac_str(key, 32, service, key);
	hmac_str(key, 32, "aws4_request", key);
}

void wire_auth_signature(const uint8_t key[32], const char *amz_date, const char *region,
                         const char *service, const void *body, size_t len, uint8_t sig[32])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];
	struct sha256_ctx s;
	sha256_init(&s);
	sha256_update(&s, len, body);
	sha256_digest(&s, sizeof(d), d);
	char sts[sizeof(WIRE_AUTH_ALG) + 17 + 9 + 2 * WIRE_AUTH_SCOPE_MAX + 16 + 65 + 8];
	int n = snprintf(sts, sizeof(sts), WIRE_AUTH_ALG "\n%s\n%.8s/%s/%s/aws4_request\n",
	                 amz_date, amz_date, region, service);
	if (n < 0 || (size_t)n + 65 > sizeof(sts)) { /* scope too long: matches nothing */
		memset(sig, 0, 32);
		return;
	}
	for (size_t i = 0; i < sizeof(d); i++) {
		sts[n++] = digits[d[i] >> 4];
		sts[n++] = digits[d[i] & 15];
	}
	hmac(key, 32, sts, (size_t)n, sig);
}

void wire_auth_amz_date(int64_t t, char out[17])
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* Appends a length-delimited field (number, data) at out[*n]. */
static bool put_bytes(uint8_t *out, size_t cap, size_t *n, uint32_t number, const void *data,
                      size_t len)
{
	if (*n + 20 + len > cap)
		return false;
	*n += wire_put_varint(out + *n, (uint64_t)number << 3 | 2);
	*n += wire_put_varint(out + *n, len);
	memcpy(out + *n, data, len);
	*n += len;
	return true;
}

size_t wire_auth_encode(uint8_t *out, size_t cap, const char *key_id, const char *amz_date,
                        const char *region, const char *service, const uint8_t sig[32])
{
	uint8_t inner[WIRE_AUTH_KEY_MAX + 17 + 2 * WIRE_AUTH_SCOPE_MAX + 32 + 5 * 3];
	size_t n = 0;
	if (!put_bytes(inner, sizeof(inner), &n, 1, key_id, strlen(key_id)) ||
	    !put_bytes(inner, sizeof(inner), &n, 2, amz_date, strlen(amz_date)) ||
	    !put_bytes(inner, sizeof(inner), &n, 3, region, strlen(region)) ||
	    !put_bytes(inner, sizeof(inner), &n, 4, service, strlen(service)) ||
	    !put_bytes(inner, sizeof(inner), &n, 5, sig, 32))
		return 0;
	size_t m = 0;
	if (!put_bytes(out, cap, &m, WIRE_AUTH_FIELD, inner, n))
		return 0;
	return m;
}

/* Copies a string field into buf (cap bytes with its NUL). */
static bool take_str(const wire_field *f, char *buf, size_t cap)
{
	if (f->type != 2 || f->len >= cap || memchr(f->data, '\0', f->len) != NULL)
		return false;
	memcpy(buf, f->data, f->len);
	buf[f->len] = '\0';
	return true;
}

int wire_auth_find(const uint8_t *body, size_t len, wire_auth *a, char *errmsg)
{
	memset(a, 0, sizeof(*a));
	const uint8_t *p = body, *end = body + len, *last_at = NULL;
	wire_field f, last = {0};
	bool seen = false;
	while (p < end) {
		const uint8_t *at = p;
		if (!wire_next_field(&p, end, &f))
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "the message does not decode"),
			       WIRE_AUTH_MALFORMED;
		if (f.number == WIRE_AUTH_FIELD) {
			if (seen)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               "the message carries its Auth twice"),
				       WIRE_AUTH_MALFORMED;
			seen = true;
		}
		last = f;
		last_at = at;
	}
	if (!seen)
		return WIRE_AUTH_NONE;
	if (last.number != WIRE_AUTH_FIELD || last.type != 2)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Auth must be the last field of the message"),
		       WIRE_AUTH_MALFORMED;
	a->signed_len = (size_t)(last_at - body);
	const uint8_t *q = last.data, *qend = last.data + last.len;
	while (q < qend) {
		if (!wire_next_field(&q, qend, &f))
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "Auth does not decode"),
			       WIRE_AUTH_MALFORMED;
		bool ok = true;
		switch (f.number) {
		case 1:
			ok = take_str(&f, a->key_id, sizeof(a->key_id));
			break;
		case 2:
			ok = take_str(&f, a->date, sizeof(a->date));
			break;
		case 3:
			ok = take_str(&f, a->region, sizeof(a->region));
			break;
		case 4:
			ok = take_str(&f, a->service, sizeof(a->service));
			break;
		case 5:
			ok = f.type == 2 && f.len == 32;
			if (ok) {
				memcpy(a->signature, f.data, 32);
				a->has_signature = true;
			}
			break;
		default:
			break; /* a later version's field */
		}
		if (!ok)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "Auth field %u is malformed or too long", f.number),
			       WIRE_AUTH_MALFORMED;
	}
	return WIRE_AUTH_FOUND;
}
