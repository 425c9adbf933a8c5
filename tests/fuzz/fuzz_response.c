/*
 * fuzz_response -- what a client decodes: a Response from the endpoint it
 * was pointed at, which it need not trust (libshoal, client/libshoal_call.c:
 * wire_unpack_response with the heap allocator, then for the CLI and
 * shoal_call_json wire_api_response_to_json for the operation and
 * wire_json_dumps), and a DynamoDB-compatible server's JSON body (the CLI's
 * wire_api_response_from_json).  A Response that converts to JSON must
 * convert back, and converting that to JSON and back must change nothing.
 *
 * Input: one byte, whose low bits pick the operation (wire_ops, modulo
 * their number) and whose high bit the form (0: a packed Response, 1: a
 * JSON body), then the bytes.  Seeds: tests/fuzz/corpus/response/ (made
 * from DynamoDB response bodies by the real encoders).
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
	/* To JSON and back reaches a fixed point after one more trip (the
	 * first may differ: a Response without a result prints {}, while
	 * one read from {} has an empty result, printed with the members
	 * DynamoDB always sends). */
	json_t *j2 = NULL, *j3 = NULL;
	Shoal__Response *back = NULL;
	rc = wire_api_response_from_json(a, op, j, &back, m);
	FZ_ASSERT(rc == SHOAL_OK, "the JSON of a %s Response does not read back: %s", op, m);
	rc = wire_api_response_to_json(back, op, &j2, m);
	FZ_ASSERT(rc == SHOAL_OK, "a %s Response read from JSON does not convert: %s", op, m);
	rc = wire_api_response_from_json(a, op, j2, &back, m);
	FZ_ASSERT(rc == SHOAL_OK, "second trip: %s", m);
	rc = wire_api_response_to_json(back, op, &j3, m);
	FZ_ASSERT(rc == SHOAL_OK, "second trip: %s", m);
	if (!same_json(j2, j3)) {
		char *t2 = json_dumps(j2, JSON_COMPACT), *t3 = json_dumps(j3, JSON_COMPACT);
		FZ_ASSERT(0, "%s: JSON -> Response -> JSON is not stable:\n%s\n%s", op, t2, t3);
	}
	json_decref(j2);
	json_decref(j3);
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
