/*
 * fuzz_node_response -- a NodeResponse a router or a node reads back from a
 * node (bytes from a peer), through the decoders and the consumers that can
 * be called without sockets:
 *
 *   - the router's fast path (router/call.c item_done, proto/lanes.c): the
 *     answer's framing checked (wire_check_framing) and walked field by
 *     field without unpacking (wire_next_field, read_answer's rules) for
 *     its Response status and leader hint, and a batched answer split
 *     among the lane's items (wire_batch_members, wire_batch_next);
 *   - the router's full decode, rt_call_resp on a call holding the bytes
 *     (wire_unpack_node_response with the decode budget into the job's
 *     arena; a refusal becomes the call's INTERNAL with a message), as the
 *     nodes' callers (ship_link.c, scrub.c, txn_recover.c, elastic.c, ttl.c)
 *     decode theirs with the same function;
 *   - each member of a batched answer decoded again, as each item's call
 *     does with its slice;
 *   - the Response's status as a code (wire_code_from_status) and the
 *     Response as the HTTP endpoint writes it (wire_api_response_to_json for
 *     the operation the first byte picks);
 *   - group 0's list_catalog answer turned into the router's catalog
 *     (rt_catalog_snap_build: every definition converted or skipped), in
 *     which every table is then found by name (rt_catalog_find);
 *   - a cluster map answer (map_get, map_change: sh_map_decode).
 *
 * What is asserted, besides no crash, leak or undefined behaviour:
 *   - wire_unpack_node_response refuses only with the codes of its contract
 *     (fz_expect), with a message; rt_call_resp turns that into the call's
 *     INTERNAL with a message and no NodeResponse;
 *   - the hand-written walkers agree with protobuf-c: when the answer
 *     decodes and the fast path lets it through, the walk finds the same
 *     Response presence, status and leader as the unpacked message (it
 *     found they differed: read_answer now refuses a Response in pieces),
 *     and the batch split yields exactly the decoded batch members, in
 *     order and byte for byte (the router must not read another answer
 *     than the node sent);
 *   - a catalog snapshot holds no more tables than the answer had
 *     definitions, each with a name, and finds each by its name.
 *
 * Not reachable without a running router or node (their consumers are
 * static parts of job steps or nng callbacks): the scan/query page merge
 * (router/scan.c acc_add), the TransactGetItems comparison of txn_items
 * (router/txn.c), the GroupStatus rows of ClusterStatus/DescribeTable
 * (router/tables.c), the scrub comparison (node/scrub.c done_cb) and the
 * shipper's gsi_behind (node/ship_link.c).  What they read is decoded
 * here; their own bounds are checked by reading, not fuzzing.
 *
 * Input: one byte whose low 7 bits pick the operation (wire_ops, modulo
 * their number) for the Response's JSON, then the NodeResponse's bytes.
 * Seeds: tests/fuzz/corpus/node_response/ (answers made by the real
 * encoders: tests/fuzz/seeds.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "proto/lanes.h"
#include "proto/wire_api.h"
#include "router/router.h"
#include "tests/fuzz/harness.h"

static uint32_t f_batch, f_response, f_leader, f_status;

/*
 * router/log.c's functions, defined here so that the linker never takes
 * log.o: rt_catalog_snap_build logs every definition it skips, and a line
 * on stderr per input would slow the target down and bury libFuzzer's
 * report.  With FUZZ_VERBOSE the lines are printed (fz_log).
 */
static int64_t clock_ms(clockid_t id, int64_t per_s)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * per_s + ts.tv_nsec / (1000000000 / per_s);
}
int64_t rt_now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC, 1000);
}
int64_t rt_now_us(void)
{
	return clock_ms(CLOCK_MONOTONIC, 1000000);
}
int64_t rt_wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME, 1000);
}
void rt_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fz_log("  rt_log: %s\n", line);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	f_batch = wire_field_number(&shoal__node_response__descriptor, "batch");
	f_response = wire_field_number(&shoal__node_response__descriptor, "response");
	f_leader = wire_field_number(&shoal__node_response__descriptor, "leader_node");
	f_status = wire_field_number(&shoal__response__descriptor, "status");
	FZ_ASSERT(f_batch && f_response && f_leader && f_status, "field numbers");
	return 0;
}

/* The router's walk of an answer: router/call.c read_answer's rules,
 * repeated here because it is static (a change there needs the same change
 * here: the assertions below then say which). */
static bool walk(const uint8_t *buf, size_t len, int *code, bool *has_response, uint32_t *leader)
{
	const uint8_t *p = buf, *end = buf + len;
	wire_field fl;
	*leader = 0;
	*code = SHOAL_OK;
	*has_response = false;
	while (p < end) {
		if (!wire_next_field(&p, end, &fl))
			return false;
		FZ_ASSERT(p <= end, "wire_next_field moved past the end");
		if (fl.type == 0 && fl.number == f_leader)
			*leader = (uint32_t)fl.value;
		if (fl.type == 2 && fl.number == f_response) {
			if (*has_response)
				return false; /* the Response in pieces */
			FZ_ASSERT(fl.data >= buf && fl.data + fl.len <= end, "a field outside");
			*has_response = true;
			const uint8_t *q = fl.data, *qend = fl.data + fl.len;
			wire_field g;
			while (q < qend) {
				if (!wire_next_field(&q, qend, &g))
					return false;
				if (g.type == 0 && g.number == f_status)
					*code = wire_code_from_status((int)g.value);
			}
		}
	}
	return true;
}

static void catalog(sh_arena *a, const Shoal__NodeResponse *nr)
{
	rt_catalog_snap *s = NULL;
	char m[SH_ERRMSG_SIZE] = "";
	int rc = rt_catalog_snap_build(a, nr->catalog, nr->n_catalog, &s, m);
	FZ_ASSERT(rc == SHOAL_OK, "rt_catalog_snap_build: %s: %s", shoal_err_name(rc), m);
	FZ_ASSERT(s->n + s->n_dropped <= nr->n_catalog, "%u tables of %zu definitions", s->n,
	          nr->n_catalog);
	for (uint32_t i = 0; i < s->n; i++) {
		FZ_ASSERT(s->tables[i].name != NULL, "a table without a name");
		const rt_table *t = rt_catalog_find(s, s->tables[i].name);
		FZ_ASSERT(t != NULL && strcmp(t->name, s->tables[i].name) == 0,
		          "table %u (%s) not found by its name", i, s->tables[i].name);
	}
	rt_catalog_snap_free(s);
}

/* One answer as the router reads it; depth 0 for the lane's whole answer,
 * 1 for a batch member. */
static void answer(const uint8_t *data, size_t size, const char *op, int depth)
{
	static const uint8_t none[1];
	if (data == NULL) /* protobuf-c's empty bytes; nng's body never is NULL */
		data = none;
	/* Decoded in an arena of its own: the catalog snapshot takes it. */
	sh_arena a;
	sh_arena_init(&a);
	rt_call c;
	memset(&c, 0, sizeof(c));
	c.answered_by = 2;
	FZ_ASSERT(nng_msg_alloc(&c.ans, size) == 0, "nng_msg_alloc(%zu)", size);
	if (size > 0)
		memcpy(nng_msg_body(c.ans), data, size);
	Shoal__NodeResponse *nr = rt_call_resp(&c, &a);
	fz_log("  %*srt_call_resp: %s %s\n", 2 * depth, "", shoal_err_name(c.rc), c.errmsg);

	/* The same decode, for its code (rt_call_resp says INTERNAL). */
	Shoal__NodeResponse *again = NULL;
	char m[SH_ERRMSG_SIZE] = "";
	int rc = wire_unpack_node_response(NULL, data, size, &again, m);
	fz_expect(rc, m, "wire_unpack_node_response");
	if (again != NULL)
		shoal__node_response__free_unpacked(again, NULL);
	FZ_ASSERT((rc == SHOAL_OK) == (nr != NULL), "rt_call_resp and the decoder disagree");
	if (nr == NULL) {
		FZ_ASSERT(c.rc == SHOAL_E_INTERNAL && c.errmsg[0] != '\0',
		          "an undecodable answer: call code %s, \"%s\"", shoal_err_name(c.rc),
		          c.errmsg);
	} else {
		FZ_ASSERT(c.rc == SHOAL_OK, "a decoded answer failed the call");
		/* What the fast path lets through, it reads as protobuf-c does. */
		int code;
		bool has_response;
		uint32_t leader;
		m[0] = '\0';
		if (wire_check_framing(&shoal__node_response__descriptor, data, size, m) ==
		        SHOAL_OK &&
		    walk(data, size, &code, &has_response, &leader)) {
			FZ_ASSERT(has_response == (nr->response != NULL),
			          "Response present: walk %d", has_response);
			FZ_ASSERT(leader == nr->leader_node, "leader: walk %u, decoded %u", leader,
			          nr->leader_node);
			if (nr->response != NULL)
				FZ_ASSERT(code == wire_code_from_status(nr->response->status),
				          "status: walk %s, decoded %d", shoal_err_name(code),
				          (int)nr->response->status);
		}
		/* The lanes' split of a batch is the decoded batch. */
		uint32_t n = 0;
		m[0] = '\0';
		rc = wire_batch_members(data, size, f_batch, UINT32_MAX, "a NodeResponse batch", &n,
		                        m);
		if (rc == SHOAL_OK && n > 0)
			FZ_ASSERT(n == nr->n_batch, "wire_batch_members %u, decoded %zu", n,
			          nr->n_batch);
		const uint8_t *p = data, *end = data + size, *d;
		size_t len, i = 0;
		while (wire_batch_next(&p, end, f_batch, &d, &len)) {
			FZ_ASSERT(i < nr->n_batch, "the split yields more than %zu members",
			          nr->n_batch);
			FZ_ASSERT(len == nr->batch[i].len &&
			              (len == 0 || memcmp(d, nr->batch[i].data, len) == 0),
			          "batch member %zu differs", i);
			i++;
		}
		FZ_ASSERT(i == nr->n_batch, "the split yields %zu of %zu members", i, nr->n_batch);
		for (size_t k = 0; depth == 0 && k < nr->n_batch; k++)
			answer(nr->batch[k].data, nr->batch[k].len, op, 1);

		if (nr->response != NULL) {
			(void)wire_code_from_status(nr->response->status);
			json_t *j = NULL;
			m[0] = '\0';
			rc = wire_api_response_to_json(nr->response, op, &j, m);
			fz_log("  %*swire_api_response_to_json: %s %s\n", 2 * depth, "",
			       shoal_err_name(rc), m);
			if (rc != SHOAL_OK)
				FZ_ASSERT((rc == SHOAL_E_VALIDATION || rc == SHOAL_E_INTERNAL) &&
				              m[0] != '\0',
				          "wire_api_response_to_json: %s: %s", shoal_err_name(rc),
				          m);
			json_decref(j);
		}
		if (nr->map.len > 0) {
			sh_map map;
			m[0] = '\0';
			if (sh_map_decode(nr->map.data, nr->map.len, &map, m) == SHOAL_OK)
				sh_map_fini(&map);
			else
				FZ_ASSERT(m[0] != '\0', "sh_map_decode refused without a message");
		}
		if (nr->n_catalog > 0) {
			catalog(&a, nr); /* takes a over */
			nr = NULL;
		}
	}
	c.resp = NULL;
	nng_msg_free(c.ans);
	sh_arena_fini(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *op = wire_ops[(data[0] & 0x7f) % SHOAL_OP__COUNT].name;
	answer(data + 1, size - 1, op, 0);
	fz_reset();
	return 0;
}
