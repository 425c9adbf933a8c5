/*
 * fuzz_node_request -- a message on a node's RPC port (router -> node,
 * node -> node), decoded as node/server.c decodes it:
 *
 *   wire_batch_members (NodeRequest.batch, at most NODE_BATCH_MAX_MEMBERS),
 *   then for the message or each member: wire_unpack_node_request (framing
 *   pre-walk, decode budget, protobuf-c unpack into an arena), exactly one
 *   operation (classify), and the conversion its preparation makes
 *   (fz_node_request: wire_*_from_pb for a data-plane Request, the table
 *   definition converters for define_table / update_table, expressions).
 *
 * Input: the raw message body.  Seeds: tests/fuzz/corpus/node_request/.
 */
#include <string.h>

#include "node/node.h"
#include "proto/lanes.h"
#include "tests/fuzz/harness.h"

static uint32_t f_batch;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	f_batch = wire_field_number(&shoal__node_request__descriptor, "batch");
	return 0;
}

static void one(const uint8_t *body, size_t len)
{
	ProtobufCAllocator alloc;
	Shoal__NodeRequest *req = NULL;
	char m[SH_ERRMSG_SIZE] = "";
	wire_arena_allocator(&alloc, fz_arena());
	int rc = wire_unpack_node_request(&alloc, body, len, &req, m);
	fz_expect(rc, m, "wire_unpack_node_request");
	if (rc != SHOAL_OK) {
		FZ_ASSERT(req == NULL, "a refused decode left a message");
		return;
	}
	(void)fz_node_request(req);
	shoal__node_request__free_unpacked(req, &alloc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t n = 0;
	char m[SH_ERRMSG_SIZE] = "";
	int rc = wire_batch_members(data, size, f_batch, NODE_BATCH_MAX_MEMBERS,
	                            "a NodeRequest batch", &n, m);
	fz_expect(rc, m, "wire_batch_members");
	if (rc == SHOAL_OK && n == 0) {
		one(data, size);
	} else if (rc == SHOAL_OK) {
		FZ_ASSERT(n <= NODE_BATCH_MAX_MEMBERS, "%u members", n);
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
