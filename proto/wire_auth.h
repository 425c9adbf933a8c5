/*
 * wire_auth.h -- the signature of a native message (shoal.proto Request.auth),
 * shared by libshoal (which signs) and the router (which verifies,
 * router/auth.c).  Prefix wire_auth.
 *
 * The algorithm is SigV4's, over the message's bytes instead of an HTTP
 * request, under its own algorithm name so that a signature made for one
 * protocol is never valid in the other:
 *
 *   kSigning     = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, YYYYMMDD), region),
 *                  service), "aws4_request")              (SigV4's, cacheable per day)
 *   StringToSign = "SHOAL1-HMAC-SHA256" \n YYYYMMDDTHHMMSSZ \n
 *                  YYYYMMDD/region/service/aws4_request \n hex(SHA256(signed bytes))
 *   signature    = HMAC(kSigning, StringToSign)           (32 raw bytes)
 *
 * The signed bytes are the whole packed message up to the Auth field, which
 * is appended last (field WIRE_AUTH_FIELD, length-delimited): protobuf
 * concatenates fields, so "message || auth" is still a Request, and the
 * verifier needs no re-encoding -- it finds the last field, checks it is
 * Auth and that no other Auth comes before it, and verifies every byte
 * before it.  A batch (Request.batch) is signed once as a whole.
 *
 * What it gives: the secret never travels; a changed byte (operation,
 * table, key, a batch member) breaks the signature; a signature is good for
 * 15 minutes either side of the router's clock (SigV4's window).  What it
 * does not: confidentiality (TLS's job), or protection against a replay of
 * a captured message within the window (as SigV4 -- writes carry a
 * client_token, so a replayed write is answered from the dedup record, but
 * a replayed read is served again).
 */
#ifndef SHOAL_PROTO_WIRE_AUTH_H
#define SHOAL_PROTO_WIRE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_AUTH_ALG       "SHOAL1-HMAC-SHA256"
#define WIRE_AUTH_FIELD     60 /* Request.auth */
#define WIRE_AUTH_SKEW_S    (15 * 60)
#define WIRE_AUTH_KEY_MAX   128 /* longest access key id */
#define WIRE_AUTH_SCOPE_MAX 64  /* longest region / service */

/* SigV4's derived signing key of secret for a day ("YYYYMMDD"), region and
 * service. */
void wire_auth_signing_key(const char *secret, const char *date8, const char *region,
                           const char *service, uint8_t key[32]);

/* The signature of body[0..len) at amz_date ("YYYYMMDDTHHMMSSZ") under a
 * key from wire_auth_signing_key (for amz_date's day, region, service). */
void wire_auth_signature(const uint8_t key[32], const char *amz_date, const char *region,
                         const char *service, const void *body, size_t len, uint8_t sig[32]);

/* "YYYYMMDDTHHMMSSZ" of t (seconds since the epoch, UTC). */
void wire_auth_amz_date(int64_t t, char out[17]);

/* The Auth field to append to a message: tag, length and the Auth message
 * (key_id, amz_date, region, service, sig).  Returns its length, or 0 when
 * out (cap bytes) is too small. */
size_t wire_auth_encode(uint8_t *out, size_t cap, const char *key_id, const char *amz_date,
                        const char *region, const char *service, const uint8_t sig[32]);

/* A message's Auth, as found at its end. */
typedef struct wire_auth {
	char key_id[WIRE_AUTH_KEY_MAX];
	char date[17];
	char region[WIRE_AUTH_SCOPE_MAX];
	char service[WIRE_AUTH_SCOPE_MAX];
	uint8_t signature[32];
	bool has_signature;
	size_t signed_len; /* bytes before the Auth field: what the signature covers */
} wire_auth;

enum wire_auth_find {
	WIRE_AUTH_FOUND = 0,
	WIRE_AUTH_NONE,      /* the message carries no Auth */
	WIRE_AUTH_MALFORMED, /* not last, twice, fields too long, or the message does not frame */
};

/* Looks for the Auth field at the end of body (top-level fields only;
 * batch members are not looked into).  Fills *a on WIRE_AUTH_FOUND;
 * WIRE_AUTH_MALFORMED says why in errmsg (SH_ERRMSG_SIZE). */
int wire_auth_find(const uint8_t *body, size_t len, wire_auth *a, char *errmsg);

#endif
