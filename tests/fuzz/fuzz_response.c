/*
 * fuzz_response -- what a client decodes: a Response from the endpoint it
 * was pointed at, which it need not trust (libshoal, client/libshoal_call.c:
 * wire_unpack_response with the heap allocator, then for the CLI and
 * shoal_call_json wire_api_response_to_json for the operation and
 * wire_json_dumps), and a DynamoDB-compatible server's JSON body (the CLI's
 * wire_api_response_from_json).  A Response that converts to JSON must
 * convert back.
 *
 * Input: one byte, whose low bits pick the operation (wire_ops, modulo
 * their number) and whose high bit the form (0: a packed Response, 1: a
 * JSON body), then the bytes.  Seeds: tests/fuzz/corpus/response/ (made
 * from DynamoDB response bodies by the real encoders).
 */
#include <string.h>

#include "proto/wire_api.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

/* A decoded Response as the CLI prints it, and read back. */
static void show(const Shoal__Response *resp, const char *op)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	json_t *j = NULL;
	int rc = wire_api_response_to_json(resp, op, &j, m);
	fz_log("  wire_api_response_to_json: %s %s\n", shoal_err_name(rc), m);
	if (rc != SHOAL_OK) {
		FZ_ASSERT(rc == SHOAL_E_VALIDATION || rc == SHOAL_E_INTERNAL,
		          "wire_api_response_to_json: %s: %s", shoal_err_name(rc), m);
		FZ_ASSERT(m[0] != '\0', "wire_api_response_to_json: refused without a message");
		return;
	}
	char *text;
	rc = wire_json_dumps(a, j, true, &text, m);
	FZ_ASSERT(rc == SHOAL_OK, "wire_json_dumps: %s", m);
	Shoal__Response *back = NULL;
	rc = wire_api_response_from_json(a, op, j, &back, m);
	FZ_ASSERT(rc == SHOAL_OK, "the JSON of a %s Response does not read back: %s", op, m);
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *op = wire_ops[(data[0] & 0x7f) % SHOAL_OP__COUNT].name;
	bool json = (data[0] & 0x80) != 0;
	data++;
	size--;
	char m[SH_ERRMSG_SIZE] = "";
	int rc;
	if (!json) {
		Shoal__Response *resp = NULL;
		rc = wire_unpack_response(NULL, data, size, &resp, m);
		fz_expect(rc, m, "wire_unpack_response");
		if (rc == SHOAL_OK) {
			(void)wire_code_from_status(resp->status);
			show(resp, op);
			wire_free_response(NULL, resp);
		}
	} else {
		json_t *j = NULL;
		rc = wire_json_parse((const char *)data, size, &j, m);
		fz_expect(rc, m, "wire_json_parse");
		if (rc == SHOAL_OK) {
			Shoal__Response *resp = NULL;
			m[0] = '\0';
			rc = wire_api_response_from_json(fz_arena(), op, j, &resp, m);
			fz_expect(rc, m, "wire_api_response_from_json");
			json_decref(j);
			if (rc == SHOAL_OK)
				show(resp, op);
		}
	}
	fz_reset();
	return 0;
}
