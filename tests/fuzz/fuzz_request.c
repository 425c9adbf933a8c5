/*
 * fuzz_request -- a message on the router's native client port, decoded as
 * router/server.c and router/job.c decode it:
 *
 *   rt_auth_native (router/auth.c: the Auth field at the end, found by
 *   wire_auth_find, verified against the credentials of harness.h and cut
 *   off; then, as a router without credentials does, an Auth cut off
 *   unread, so that unsigned messages go on too), wire_batch_members
 *   (Request.batch, at most
 *   RT_CLIENT_BATCH_MAX), then for the message or each member
 *   wire_unpack_request into an arena (rt_job_start), the front door's
 *   checks (a batch inside a member, no operation), authorization of the
 *   signer's grants for every table the request touches (rt_auth_authorize)
 *   and the step's API-level conversion with the request's expressions
 *   (fz_request).
 *
 * Input: the raw message body.  Seeds: tests/fuzz/corpus/request/.
 */
#include <string.h>

#include "proto/lanes.h"
#include "proto/wire_auth.h"
#include "router/http.h"
#include "tests/fuzz/harness.h"

static uint32_t f_batch;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	f_batch = wire_field_number(&shoal__request__descriptor, "batch");
	return 0;
}

static void one(const uint8_t *body, size_t len, const rt_principal *who)
{
	ProtobufCAllocator alloc;
	Shoal__Request *req = NULL;
	char m[SH_ERRMSG_SIZE] = "";
	wire_arena_allocator(&alloc, fz_arena());
	int rc = wire_unpack_request(&alloc, body, len, &req, m);
	fz_expect(rc, m, "wire_unpack_request");
	if (rc != SHOAL_OK) {
		FZ_ASSERT(req == NULL, "a refused decode left a message");
		return;
	}
	/* rt_job_start's checks before the step. */
	if (req->n_batch == 0 && wire_op_of(req->op_case) < SHOAL_OP__COUNT) {
		if (who->cred != NULL) {
			m[0] = '\0';
			rc = rt_auth_authorize(fz_router(), who, req, m);
			fz_log("  rt_auth_authorize: %s %s\n", shoal_err_name(rc), m);
			FZ_ASSERT(rc == SHOAL_OK || (rc == SHOAL_E_ACCESS_DENIED && m[0] != '\0'),
			          "rt_auth_authorize: %s: %s", shoal_err_name(rc), m);
		}
		(void)fz_request(req);
	}
	wire_free_request(&alloc, req);
}

/* rt_auth_native with the credentials: the signer, or nobody. */
static void verify(const uint8_t *data, size_t size, rt_principal *who)
{
	nng_msg *msg;
	char m[SH_ERRMSG_SIZE] = "";
	FZ_ASSERT(nng_msg_alloc(&msg, size) == 0, "nng_msg_alloc");
	if (size > 0)
		memcpy(nng_msg_body(msg), data, size);
	int rc = rt_auth_native(fz_creds(), msg, FZ_NOW_S, who, m);
	fz_log("  rt_auth_native: %s %s\n", shoal_err_name(rc), m);
	if (rc == SHOAL_OK) {
		FZ_ASSERT(who->cred != NULL, "verified without a signer");
		FZ_ASSERT(nng_msg_len(msg) < size &&
		              memcmp(nng_msg_body(msg), data, nng_msg_len(msg)) == 0,
		          "the Auth field was not cut off the end");
	} else {
		FZ_ASSERT(rc == SHOAL_E_AUTH_MISSING || rc == SHOAL_E_AUTH_INCOMPLETE ||
		              rc == SHOAL_E_AUTH_UNRECOGNIZED || rc == SHOAL_E_AUTH_SIGNATURE,
		          "rt_auth_native: %s: %s", shoal_err_name(rc), m);
		FZ_ASSERT(m[0] != '\0', "rt_auth_native: %s without a message", shoal_err_name(rc));
		who->cred = NULL;
	}
	nng_msg_free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wire_auth auth;
	rt_principal who;
	char m[SH_ERRMSG_SIZE] = "";
	verify(data, size, &who);
	int found = wire_auth_find(data, size, &auth, m);
	FZ_ASSERT(found == WIRE_AUTH_FOUND || found == WIRE_AUTH_NONE ||
	              found == WIRE_AUTH_MALFORMED,
	          "wire_auth_find: %d", found);
	if (found == WIRE_AUTH_MALFORMED) {
		FZ_ASSERT(m[0] != '\0', "wire_auth_find: malformed without a message");
	} else if (found == WIRE_AUTH_FOUND) {
		FZ_ASSERT(auth.signed_len < size, "signed_len %zu of %zu bytes", auth.signed_len,
		          size);
		FZ_ASSERT(memchr(auth.key_id, 0, sizeof(auth.key_id)) != NULL &&
		              memchr(auth.date, 0, sizeof(auth.date)) != NULL &&
		              memchr(auth.region, 0, sizeof(auth.region)) != NULL &&
		              memchr(auth.service, 0, sizeof(auth.service)) != NULL,
		          "an Auth string without its NUL");
		size = auth.signed_len; /* rt_auth_native cuts it off */
	}
	uint32_t n = 0;
	m[0] = '\0';
	int rc =
	    wire_batch_members(data, size, f_batch, RT_CLIENT_BATCH_MAX, "a Request batch", &n, m);
	fz_expect(rc, m, "wire_batch_members");
	if (rc == SHOAL_OK && n == 0) {
		one(data, size, &who);
	} else if (rc == SHOAL_OK) {
		const uint8_t *p = data, *end = data + size, *member;
		size_t len;
		uint32_t seen = 0;
		while (seen < n && wire_batch_next(&p, end, f_batch, &member, &len)) {
			FZ_ASSERT(member >= data && len <= (size_t)(end - member),
			          "member out of the message");
			one(member, len, &who);
			seen++;
		}
		FZ_ASSERT(seen == n, "wire_batch_members counted %u, wire_batch_next gave %u", n,
		          seen);
	}
	fz_reset();
	return 0;
}
