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
 *   and the CLI use) and in again: both must succeed.
 *
 * Input: the operation name (as after "DynamoDB_20120810." in X-Amz-Target),
 * a newline, then the body.  Without a newline the input is all body, for
 * GetItem.  Seeds: tests/fuzz/corpus/json/.
 */
#include <string.h>

#include "proto/wire_api.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
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
		/* Out and in again. */
		json_t *out = NULL;
		const char *name = NULL;
		m[0] = '\0';
		rc = wire_api_request_to_json(in, &name, &out, m);
		FZ_ASSERT(rc == SHOAL_OK, "wire_api_request_to_json of a converted request: %s", m);
		Shoal__Request *again = NULL;
		rc = wire_api_request_from_json(a, name, out, &again, m);
		FZ_ASSERT(rc == SHOAL_OK, "the JSON of a converted %s request: %s", name, m);
		json_decref(out);
	}
	fz_reset();
	return 0;
}
