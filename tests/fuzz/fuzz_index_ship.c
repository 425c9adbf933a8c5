/*
 * fuzz_index_ship -- index deltas shipped by a peer node (NodeRequest.
 * index_ship, a shoal.IndexApply: node/ship.c sends them, node/server.c's
 * prepare_index_ship takes them), decoded as node/server.c decodes a
 * NodeRequest from a peer:
 *
 *   wire_unpack of the IndexApply (framing pre-walk, the same decode budget
 *   for its length, protobuf-c unpack into an arena), the checks of
 *   prepare_index_ship (at least one delta), then node_index_deltas_from_pb
 *   (node/fsm.c) into st_delta[n_deltas] -- the conversion both the front
 *   door and the FSM's index_apply make.
 *
 * Asserts, besides no crash, leak or undefined behaviour: a refusal is a
 * ValidationException with a message and leaves the output array as it was
 * (all zero here: nothing half converted for a caller to use); an accepted
 * list has seqs rising from above 0, index ids in 1..65535, non-empty keys,
 * and every key and value inside the message's own memory.
 *
 * Input: the IndexApply's bytes.  Seeds: tests/fuzz/corpus/index_ship/.
 */
#include <string.h>

#include "node/fsm.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

/* Whether p[0..len) is the decoded message's binary field b itself. */
static bool same_bytes(const uint8_t *p, size_t len, ProtobufCBinaryData b)
{
	return p == b.data && len == b.len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sh_arena *a = fz_arena();
	ProtobufCAllocator alloc;
	ProtobufCMessage *m = NULL;
	char msg[SH_ERRMSG_SIZE] = "";
	wire_arena_allocator(&alloc, a);
	int rc = wire_unpack(&shoal__index_apply__descriptor, &alloc, data, size, &m, msg);
	fz_expect(rc, msg, "wire_unpack(IndexApply)");
	if (rc != SHOAL_OK) {
		FZ_ASSERT(m == NULL, "a refused decode left a message");
		fz_reset();
		return 0;
	}
	const Shoal__IndexApply *ia = (const Shoal__IndexApply *)m;
	if (ia->n_deltas == 0) /* prepare_index_ship: "index_ship without deltas" */
		goto out;
	st_delta *d = sh_arena_calloc(a, ia->n_deltas, sizeof(*d));
	FZ_ASSERT(d != NULL, "out of memory for %zu deltas", ia->n_deltas);
	rc = node_index_deltas_from_pb(ia, d, msg);
	fz_expect(rc, msg, "node_index_deltas_from_pb");
	if (rc != SHOAL_OK) {
		FZ_ASSERT(rc == SHOAL_E_VALIDATION, "node_index_deltas_from_pb: %s", msg);
		static const st_delta zero;
		for (size_t i = 0; i < ia->n_deltas; i++)
			FZ_ASSERT(memcmp(&d[i], &zero, sizeof(zero)) == 0,
			          "a refusal left delta %zu of %zu filled in", i, ia->n_deltas);
		goto out;
	}
	uint64_t prev = 0;
	for (size_t i = 0; i < ia->n_deltas; i++) {
		const Shoal__IndexDelta *x = ia->deltas[i];
		FZ_ASSERT(d[i].seq > prev, "delta %zu: seq %llu after %llu", i,
		          (unsigned long long)d[i].seq, (unsigned long long)prev);
		prev = d[i].seq;
		FZ_ASSERT(d[i].index_id != 0 && d[i].index_id == x->index_id,
		          "delta %zu: index id %u from %u", i, d[i].index_id, x->index_id);
		FZ_ASSERT(d[i].key_len > 0 && same_bytes(d[i].key, d[i].key_len, x->key),
		          "delta %zu: key not the message's", i);
		FZ_ASSERT(same_bytes(d[i].val, d[i].val_len, x->value),
		          "delta %zu: value not the message's", i);
		FZ_ASSERT(d[i].table_id == x->table_id && d[i].hash == x->hash &&
		              d[i].del == x->del && d[i].ts_ms == x->ts_ms,
		          "delta %zu: a field changed in the conversion", i);
	}
out:
	protobuf_c_message_free_unpacked(m, &alloc);
	fz_reset();
	return 0;
}
