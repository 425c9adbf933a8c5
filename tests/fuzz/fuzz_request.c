/*
 * fuzz_request -- a message on the router's native client port, decoded as
 * router/server.c and router/job.c decode it:
 *
 *   wire_auth_find (the Auth field at the end, proto/wire_auth.h; the router
 *   cuts it off: without credentials unread, with credentials after
 *   verifying it), wire_batch_members (Request.batch, at most
 *   RT_CLIENT_BATCH_MAX), then for the message or each member
 *   wire_unpack_request into an arena (rt_job_start), the front door's
 *   checks (a batch inside a member, no operation), and the step's API-level
 *   conversion with the request's expressions (fz_request).
 *
 * Input: the raw message body.  Seeds: tests/fuzz/corpus/request/.
 */
#include <string.h>

#include "proto/lanes.h"
#include "proto/wire_auth.h"
#include "router/router.h"
#include "tests/fuzz/harness.h"

static uint32_t f_batch;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	f_batch = wire_field_number(&shoal__request__descriptor, "batch");
	return 0;
}

static void one(const uint8_t *body, size_t len)
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
	if (req->n_batch == 0 && wire_op_of(req->op_case) < SHOAL_OP__COUNT)
		(void)fz_request(req);
	wire_free_request(&alloc, req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wire_auth auth;
	char m[SH_ERRMSG_SIZE] = "";
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
		one(data, size);
	} else if (rc == SHOAL_OK) {
		const uint8_t *p = data, *end = data + size, *member;
		size_t len;
		uint32_t seen = 0;
		while (seen < n && wire_batch_next(&p, end, f_batch, &member, &len)) {
			FZ_ASSERT(member >= data && len <= (size_t)(end - member),
			          "member out of the message");
			one(member, len);
			seen++;
		}
		FZ_ASSERT(seen == n, "wire_batch_members counted %u, wire_batch_next gave %u", n,
		          seen);
	}
	fz_reset();
	return 0;
}
