/*
 * fuzz_fsm -- a Raft log entry of a storage group, applied by the real state
 * machine (node/fsm_apply.c, fsm_txn.c) to a real LMDB environment:
 *
 *   node_fsm_apply_cb: wire_unpack_local of a shoal.Command (framing
 *   pre-walk, no decode budget: log entries passed the front door's), then
 *   every operation converted and checked (wire_*_from_pb, the TableDefine
 *   and index checks, the transaction records) and run through the storage
 *   engine in one LMDB transaction, the results packed for the proposer.
 *
 * Entries are written by the group after the front door checked them, but
 * a malformed or adversarial one must still never crash a replica.  What is
 * asserted, besides no crash, leak or undefined behaviour:
 *   - bytes that are not a Command make the FSM fail for good (sticky, with a
 *     message) before anything is written: the stored applied index stays;
 *   - a Command that decodes is applied: apply returns 0, the FSM stays
 *     healthy, the applied index is the entry's -- each operation's own
 *     refusal is its result, not the replica's failure.  Only the codes of
 *     a failing environment (out of memory, disk or map full, I/O) may stop
 *     the FSM instead; an InternalServerError from a decodable entry fails
 *     the target (a replica that stops on a bad operation stops the group);
 *   - the entry applied again at the same index is a replay: nothing done;
 *   - when the Command names this node as its proposer, every operation's
 *     result (a packed NodeResponse) decodes.
 *
 * The environment: one node_fsm (node 1) over an LMDB environment in
 * a directory of /dev/shm (tmpfs: no disk I/O; $TMPDIR when there is no
 * /dev/shm), made in LLVMFuzzerInitialize, driven by direct raft_fsm calls
 * with a struct raft whose last_applied gives the entry's index (as
 * tests/unit/test_fsm.c does): no raft instance, loop or thread.  It is
 * reset -- closed, its files removed, opened again empty -- before every
 * input, so an input's outcome never depends on the ones before it (a crash
 * replays from its file alone) and the environment cannot grow without
 * bound.  A reset costs about 3 ms (mostly the kernel: LMDB's 4 MiB
 * preallocation and the first touch of its pages), so the target runs a few
 * hundred entries a second.  Each seed defines the tables it writes to in
 * its own entry.  The FSM is group 0's (the metadata group: UpdateTable,
 * index activation, id-assigning defines) for a Command whose batch_id is
 * even, a data group's (1) otherwise and for bytes that do not decode.
 *
 * Input: the entry's bytes.  Seeds: tests/fuzz/corpus/fsm/ (tests/fuzz/seeds.c).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/fsm.h"
#include "node/node.h"
#include "tests/fuzz/harness.h"

#define NODE_ID 1

static char dir[256];
static node_fsm *fsm;
static uint32_t group = 1;
static struct raft fake_raft;

static void fsm_open(void)
{
	char m[SH_ERRMSG_SIZE] = "";
	int rc = node_fsm_open(dir, group, NODE_ID, &fsm, m);
	FZ_ASSERT(rc == SHOAL_OK, "node_fsm_open(%s): %s", dir, m);
	node_fsm_attach(fsm, &fake_raft);
}

static void remove_files(void)
{
	DIR *d = opendir(dir);
	FZ_ASSERT(d != NULL, "opendir(%s)", dir);
	struct dirent *e;
	char p[512];
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		FZ_ASSERT(unlink(p) == 0, "unlink(%s)", p);
	}
	closedir(d);
}

/* Closes the FSM, removes its files, opens it again empty for group g. */
static void fsm_reset(uint32_t g)
{
	node_fsm_close(fsm);
	group = g;
	fsm = NULL;
	remove_files();
	fsm_open();
}

static void cleanup(void)
{
	node_fsm_close(fsm);
	fsm = NULL;
	remove_files();
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/shoal-fuzz-fsm.XXXXXX", base != NULL ? base : "/tmp");
	FZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp(%s)", dir);
	node_log_set_level(NODE_LOG_ERROR);
	fsm_open();
	atexit(cleanup);
	return 0;
}

/* Applies buf as the entry at index; returns apply's raft code. */
static int apply_at(uint64_t index, const uint8_t *data, size_t size)
{
	struct raft_fsm *rf = node_fsm_raft(fsm);
	struct raft_buffer buf = {.base = (void *)data, .len = size};
	fake_raft.last_applied = index - 1;
	void *res = (void *)1;
	int rv = rf->apply(rf, &buf, &res);
	FZ_ASSERT(res == NULL, "apply set a result");
	return rv;
}

static bool env_code(int code)
{
	return code == SHOAL_E_NOMEM || code == SHOAL_E_FULL || code == SHOAL_E_IO;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sh_arena *a = fz_arena();
	ProtobufCAllocator alloc;
	ProtobufCMessage *m = NULL;
	char msg[SH_ERRMSG_SIZE] = "";
	wire_arena_allocator(&alloc, a);

	/* The same decode as the FSM's, to know what to expect. */
	int dec = wire_unpack_local(&shoal__command__descriptor, &alloc, data, size, &m, msg);
	const Shoal__Command *cmd = (const Shoal__Command *)m;
	fsm_reset(dec == SHOAL_OK && cmd->batch_id % 2 == 0 ? 0 : 1);
	st_env *env = node_fsm_env(fsm);
	uint64_t before = st_env_applied(env);
	uint64_t index = before + 1;
	node_batch b;
	bool registered = false;
	if (dec == SHOAL_OK && cmd->proposer == NODE_ID) {
		FZ_ASSERT(node_batch_init(&b, cmd->batch_id, (uint32_t)cmd->n_ops) == SHOAL_OK,
		          "node_batch_init(%zu)", cmd->n_ops);
		node_fsm_register(fsm, &b);
		registered = true;
	}

	int rv = apply_at(index, data, size);
	char why[SH_ERRMSG_SIZE] = "";
	int failed = node_fsm_failed(fsm, why);
	fz_log("  apply: raft code %d, FSM %s%s%s\n", rv, shoal_err_name(failed),
	       failed ? ": " : "", failed ? why : "");
	FZ_ASSERT((rv == 0) == (failed == SHOAL_OK), "apply returned %d with the FSM %s", rv,
	          shoal_err_name(failed));
	if (dec != SHOAL_OK) {
		FZ_ASSERT(rv != 0, "bytes wire_unpack_local refused (%s) were applied", msg);
		FZ_ASSERT(why[0] != '\0', "a refused entry without a message");
		FZ_ASSERT(st_env_applied(env) == before, "a refused entry moved the applied index");
	} else if (rv != 0) {
		FZ_ASSERT(env_code(failed), "a decodable entry stopped the replica: %s: %s",
		          shoal_err_name(failed), why);
		FZ_ASSERT(st_env_applied(env) == before, "a failed entry moved the applied index");
	} else {
		FZ_ASSERT(st_env_applied(env) == index, "applied index %llu after entry %llu",
		          (unsigned long long)st_env_applied(env), (unsigned long long)index);
		/* Replay (raft offers it again after a restart): skipped. */
		FZ_ASSERT(apply_at(index, data, size) == 0,
		          "the replay of an applied entry failed");
		FZ_ASSERT(st_env_applied(env) == index, "a replay moved the applied index");
	}

	if (registered) {
		node_fsm_unregister(fsm, &b);
		FZ_ASSERT(b.applied == (rv == 0), "batch applied %d after raft code %d", b.applied,
		          rv);
		for (uint32_t i = 0; b.applied && i < b.n_ops; i++) {
			FZ_ASSERT(b.results[i] != NULL, "operation %u of %u without a result", i,
			          b.n_ops);
			Shoal__NodeResponse *nr;
			msg[0] = '\0';
			int rc = wire_unpack_node_response(&alloc, b.results[i], b.result_lens[i],
			                                   &nr, msg);
			FZ_ASSERT(rc == SHOAL_OK, "the result of operation %u does not decode: %s",
			          i, msg);
			if (nr->response != NULL)
				fz_log("  op %u: status %d %s\n", i, (int)nr->response->status,
				       nr->response->message != NULL ? nr->response->message : "");
			shoal__node_response__free_unpacked(nr, &alloc);
		}
		node_batch_fini(&b);
	}
	if (m != NULL)
		protobuf_c_message_free_unpacked(m, &alloc);
	fz_reset();
	return 0;
}
