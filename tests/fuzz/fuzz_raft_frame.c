/*
 * fuzz_raft_frame -- the bytes a Raft peer sends, as the TLS transport
 * checks them before raft 0.15 reads them (node/raftframe.h,
 * node_rf_feed; node/transport_tls.c feeds each buffer it decrypted).
 *
 * Asserts, besides no crash or undefined behaviour: the verdict does not
 * depend on how the stream is cut into buffers -- fed whole, cut at a point
 * the input chooses, and a byte at a time, the checker passes or refuses the
 * same stream, for the same reason, after the same number of whole
 * messages; a refusal has a reason, and a refused checker stays refused.
 *
 * Input: two bytes choosing the cut, then the stream.  Seeds:
 * tests/fuzz/corpus/raft_frame/ (each kind of message raft writes).
 */
#include <string.h>

#include "node/raftframe.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

typedef struct verdict {
	int rc;
	const char *why;
	uint64_t messages;
} verdict;

static verdict run(const uint8_t *p, size_t len, size_t step)
{
	node_rf f;
	node_rf_init(&f);
	verdict v = {0, NULL, 0};
	for (size_t off = 0; off < len && v.rc == 0; off += step) {
		size_t k = len - off < step ? len - off : step;
		v.rc = node_rf_feed(&f, p + off, k, &v.why);
	}
	if (v.rc != 0) {
		const char *again = NULL;
		uint8_t z = 0;
		FZ_ASSERT(v.why != NULL && v.why[0] != '\0', "a refusal without a reason");
		FZ_ASSERT(node_rf_feed(&f, &z, 1, &again) == -1 && again == v.why,
		          "a refused checker took more bytes");
	}
	v.messages = f.messages;
	return v;
}

static verdict cut(const uint8_t *p, size_t len, size_t at)
{
	node_rf f;
	node_rf_init(&f);
	verdict v = {0, NULL, 0};
	v.rc = node_rf_feed(&f, p, at, &v.why);
	if (v.rc == 0)
		v.rc = node_rf_feed(&f, p + at, len - at, &v.why);
	v.messages = f.messages;
	return v;
}

static void same(verdict a, verdict b, const char *how)
{
	FZ_ASSERT(a.rc == b.rc, "%s: rc %d, whole %d", how, b.rc, a.rc);
	FZ_ASSERT(a.rc == 0 || strcmp(a.why, b.why) == 0, "%s: \"%s\", whole \"%s\"", how, b.why,
	          a.why);
	/* (A refused checker stops counting where it refused; fed whole, the
	 * messages before the refusal are counted all the same.) */
	FZ_ASSERT(a.messages == b.messages, "%s: %llu messages, whole %llu", how,
	          (unsigned long long)b.messages, (unsigned long long)a.messages);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t len = size - 2, at = ((size_t)data[0] << 8 | data[1]) % (len + 1);
	const uint8_t *p = data + 2;
	verdict whole = run(p, len, len > 0 ? len : 1);
	same(whole, cut(p, len, at), "cut");
	if (len <= 4096)
		same(whole, run(p, len, 1), "byte by byte");
	fz_log("rc %d (%s), %llu messages\n", whole.rc, whole.why ? whole.why : "-",
	       (unsigned long long)whole.messages);
	return 0;
}
