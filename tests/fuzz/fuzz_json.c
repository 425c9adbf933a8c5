/*
 * fuzz_json -- a request body on the DynamoDB HTTP endpoint, taken as
 * router/http.c takes it once the head is accepted:
 *
 *   wire_json_parse (jansson under the decode budget of proto/wire_json.c;
 *   an empty body is {}), wire_api_request_from_json for the X-Amz-Target's
 *   operation (proto/wire_api_*.c: the descriptor-driven conversion, the
 *   DynamoDB JSON value codec), then what the router does with the Request
 *   (fz_request: the step's conversion, the expressions).  A Request that
 *   converted is also converted back (wire_api_request_to_json, what libshoal
 *   and the CLI use), in and out again: every step must succeed, and the
 *   second trip must give the JSON of the first.
 *
 * Input: the operation name (as after "DynamoDB_20120810." in X-Amz-Target),
 * a newline, then the body.  Without a newline the input is all body, for
 * GetItem.  Seeds: tests/fuzz/corpus/json/.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/wire_api.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

/* The same JSON, compared as text: json_equal looks keys up as C strings,
 * so two objects with a key holding U+0000 (an attribute name from
 * protobuf may) compare unequal to themselves. */
static bool same_json(const json_t *x, const json_t *y)
{
	size_t flags = JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY;
	char *tx = json_dumps(x, flags), *ty = json_dumps(y, flags);
	FZ_ASSERT(tx != NULL && ty != NULL, "json_dumps");
	bool same = strcmp(tx, ty) == 0;
	free(tx);
	free(ty);
	return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char op[64] = "GetItem";
	const uint8_t *nl = memchr(data, '\n', size < sizeof(op) ? size : sizeof(op));
	if (nl != NULL) {
		memcpy(op, data, (size_t)(nl - data));
		op[nl - data] = '\0';
		size -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	json_t *body = NULL;
	int rc = SHOAL_OK;
	if (size > 0) {
		rc = wire_json_parse((const char *)data, size, &body, m);
		fz_expect(rc, m, "wire_json_parse");
		FZ_ASSERT(rc != SHOAL_OK || body != NULL, "parsed to nothing");
	}
	Shoal__Request *in = NULL;
	if (rc == SHOAL_OK) {
		m[0] = '\0';
		rc = wire_api_request_from_json(a, op, body, &in, m);
		fz_expect(rc, m, "wire_api_request_from_json");
	}
	json_decref(body);
	if (rc == SHOAL_OK) {
		FZ_ASSERT(in != NULL, "converted to nothing");
		(void)fz_request(in);
		/* Out and in again: the second trip changes nothing (the first
		 * may drop members spelled at their defaults). */
		json_t *out = NULL, *out2 = NULL;
		const char *name = NULL;
		m[0] = '\0';
		rc = wire_api_request_to_json(in, &name, &out, m);
		FZ_ASSERT(rc == SHOAL_OK, "wire_api_request_to_json of a converted request: %s", m);
		Shoal__Request *again = NULL;
		rc = wire_api_request_from_json(a, name, out, &again, m);
		FZ_ASSERT(rc == SHOAL_OK, "the JSON of a converted %s request: %s", name, m);
		rc = wire_api_request_to_json(again, NULL, &out2, m);
		FZ_ASSERT(rc == SHOAL_OK, "wire_api_request_to_json, second trip: %s", m);
		if (!same_json(out, out2)) {
			char *t1 = json_dumps(out, JSON_COMPACT),
			     *t2 = json_dumps(out2, JSON_COMPACT);
			FZ_ASSERT(0, "%s: JSON -> Request -> JSON is not stable:\n%s\n%s", name, t1,
			          t2);
		}
		json_decref(out);
		json_decref(out2);
	}
	fz_reset();
	return 0;
}
