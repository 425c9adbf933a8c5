/*
 * base64.c -- RFC 4648 base64 (standard alphabet "A-Za-z0-9+/", '=' padding)
 * for the B and BS values of DynamoDB JSON.
 *
 * The decoder is strict, as DynamoDB's is: a B value that does not decode to
 * exactly one byte string is refused rather than guessed at.  It checks, in
 * this order (so the message names the first problem DynamoDB would name):
 *   1. the length is a multiple of 4 ("Base64 encoded length is expected a
 *      multiple of 4 bytes but found: N");
 *   2. every character is in the alphabet, and '=' appears only as the last
 *      one or two characters ("Invalid Base64 character: 'c'");
 *   3. the bits of the last character that fall past the data are zero
 *      ("Invalid last non-pad Base64 character dectected" -- DynamoDB's
 *      spelling), so that every byte string has exactly one encoding.
 * The empty string decodes to zero bytes.
 */
#include "proto/wire.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t wire_b64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

void wire_b64_encode(const void *src, size_t n, char *dst)
{
	const unsigned char *s = src;
	size_t i = 0;
	char *d = dst;
	for (; i + 3 <= n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = alphabet[(v >> 6) & 63];
		*d++ = alphabet[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)s[i] << 16;
		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = '=';
		*d++ = '=';
	} else if (n - i == 2) {
		unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8;
		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = alphabet[(v >> 6) & 63];
		*d++ = '=';
	}
	*d = '\0';
}

/* 0..63, or -1 for a character outside the alphabet. */
static int sextet(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int bad_char(unsigned char c, char *errmsg)
{
	if (c >= 0x20 && c < 0x7f)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "Invalid Base64 character: '%c'", c);
	return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "Invalid Base64 character: '\\x%02x'", c);
}

int wire_b64_decode(sh_arena *a, const char *src, size_t n, uint8_t **out, size_t *len,
                    char *errmsg)
{
	const unsigned char *s = (const unsigned char *)src;
	if (n % 4 != 0)
		return sh_errf(
		    errmsg, SHOAL_E_SERIALIZATION,
		    "Base64 encoded length is expected a multiple of 4 bytes but found: %zu", n);
	size_t pad = 0;
	if (n >= 4 && s[n - 1] == '=')
		pad = s[n - 2] == '=' ? 2 : 1;
	for (size_t i = 0; i < n - pad; i++) {
		if (sextet(s[i]) < 0)
			return bad_char(s[i], errmsg);
	}
	size_t dlen = n / 4 * 3 - pad;
	uint8_t *d = sh_arena_alloc(a, dlen + 1);
	if (d == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory decoding base64");
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int c0 = sextet(s[i]), c1 = sextet(s[i + 1]);
		int c2 = last && pad == 2 ? 0 : sextet(s[i + 2]);
		int c3 = last && pad >= 1 ? 0 : sextet(s[i + 3]);
		unsigned v =
		    (unsigned)c0 << 18 | (unsigned)c1 << 12 | (unsigned)c2 << 6 | (unsigned)c3;
		d[o++] = (uint8_t)(v >> 16);
		if (last && pad == 2) {
			if (c1 & 0x0f)
				return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
				               "Invalid last non-pad Base64 character dectected");
			break;
		}
		d[o++] = (uint8_t)(v >> 8);
		if (last && pad == 1) {
			if (c2 & 0x03)
				return sh_errf(errmsg, SHOAL_E_SERIALIZATION,
				               "Invalid last non-pad Base64 character dectected");
			break;
		}
		d[o++] = (uint8_t)v;
	}
	d[o] = '\0';
	*out = d;
	*len = o;
	return SHOAL_OK;
}
