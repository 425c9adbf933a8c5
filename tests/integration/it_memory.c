/*
 * it_memory -- a process's memory under amplification attacks and after
 * large batches, on a real cluster (3 nodes, 1 router).
 *
 *  - Four 16 MiB Requests of two-byte unknown fields at once on the
 *    router's native port (raw nng REQ sockets), and two NodeRequests of the
 *    same on a node's RPC port: each is answered ValidationException "...
 *    too complex for its size" and the process's peak RSS (VmHWM, reset
 *    through /proc/PID/clear_refs first) grows by less than BOUND_ATTACK_MIB
 *    (protobuf-c alone took ~590 MB for each).
 *  - A legitimate dense BatchWriteItem (25 items of 1500 attributes) and the
 *    Query that reads it back still work.
 *  - Four Request batches of 1024 PutItems of 8 KiB at once: afterwards
 *    the router's job pool and the nodes' batch-member pools hold at most
 *    their retained counts and bytes (gauges), and the router's RSS is back
 *    under a bound.
 *
 * One cluster serves the suite (started in the parent, shared by the
 * forked test cases).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/arena.h"
#include "proto/wire.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_metrics.h"

/* Peak RSS growth allowed while four 16 MiB attack messages are handled at
 * once: the messages themselves (nng holds each whole) and nothing decoded. */
#define BOUND_ATTACK_MIB 200
#define ATTACK_LEN       (16u * 1024 * 1024 - 64)

/* What the pools may keep when idle (router.h RT_JOB_POOL_KEEP / _BYTES,
 * node.h NODE_BATCH_POOL_KEEP / _BYTES), and what the router may hold after
 * large batches beyond what it held before them. */
#define POOL_KEEP      256
#define POOL_BYTES     (16.0 * 1024 * 1024)
#define BOUND_POOL_MIB 64

static tl_cluster C;

static void cluster_up(void)
{
	/* Plain TCP between the processes (when the cluster would use TLS by
	 * default), so that a raw socket reaches a node's decoder: the bound
	 * is the decoder's, whoever the peer is. */
	tl_cluster_locate(&C);
	bool has_plain = tl_sh("grep -q -- '--plain)' '%s/deploy/cluster.sh'", C.root) == 0;
	const char *opts = "--partition-rcu 1000000000 --partition-wcu 1000000000";
	char with_plain[256];
	snprintf(with_plain, sizeof(with_plain), "%s --plain", opts);
	if (!tl_cluster_up_opts(&C, 3, 1, 2, has_plain ? with_plain : opts)) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
	char *err = NULL;
	int rc = tl_shoal(&C, NULL, &err,
	                  "create-table --table-name mem --attribute-definitions "
	                  "AttributeName=pk,AttributeType=S --key-schema "
	                  "AttributeName=pk,KeyType=HASH --billing-mode PAY_PER_REQUEST");
	ck_assert_msg(rc == 0, "create-table: %s", err ? err : "");
	free(err);
}

static void cluster_down(void)
{
	tl_cluster_down(&C);
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                 */
/* ------------------------------------------------------------------------ */

static int pid_of(const char *what, int id)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s-%d.pid", C.dir, what, id);
	char *s = tl_read_file(path);
	ck_assert_msg(s != NULL, "no pid file %s", path);
	int pid = atoi(s);
	free(s);
	return pid;
}

/* A field of /proc/PID/status in MiB ("VmHWM", "VmRSS"). */
static double status_mib(int pid, const char *field)
{
	char path[64], key[32];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	snprintf(key, sizeof(key), "\n%s:", field);
	char *st = tl_read_file(path);
	ck_assert_ptr_nonnull(st);
	const char *p = strstr(st, key);
	ck_assert_ptr_nonnull(p);
	double v = atof(p + strlen(key)) / 1024.0;
	free(st);
	return v;
}

/* Resets the process's VmHWM to its VmRSS (Linux: clear_refs 5). */
static void reset_peak(int pid)
{
	ck_assert_int_eq(tl_sh("echo 5 > /proc/%d/clear_refs", pid), 0);
}

/* Key `key` ("rpc", "raft") of node id's section of D/cluster.ini. */
static void node_key(int id, const char *key, char *out, size_t cap)
{
	char path[1200], head[32], k[32];
	snprintf(path, sizeof(path), "%s/cluster.ini", C.dir);
	snprintf(head, sizeof(head), "[node.%d]", id);
	snprintf(k, sizeof(k), "\n%s = ", key);
	char *ini = tl_read_file(path);
	ck_assert_ptr_nonnull(ini);
	const char *sec = strstr(ini, head);
	ck_assert_ptr_nonnull(sec);
	const char *r = strstr(sec, k);
	ck_assert_ptr_nonnull(r);
	r += strlen(k);
	size_t n = strcspn(r, "\r\n");
	ck_assert_uint_lt(n, cap);
	memcpy(out, r, n);
	out[n] = '\0';
	free(ini);
}

static void node_rpc(int id, char *out, size_t cap)
{
	node_key(id, "rpc", out, cap);
}

/* A metric of the router (its metrics address is the next port). */
static double router_metric(const char *name)
{
	int port = atoi(strrchr(C.endpoint, ':') + 1);
	char hp[64];
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", port + 1);
	char *text = tl_metrics_get(hp);
	ck_assert_msg(text != NULL, "no metrics from %s", hp);
	char key[128];
	snprintf(key, sizeof(key), "\n%s ", name);
	const char *p = strstr(text, key);
	ck_assert_msg(p != NULL, "no %s in the router's metrics", name);
	double v = atof(p + strlen(key));
	free(text);
	return v;
}

/* ------------------------------------------------------------------------ */
/* Raw messages                                                              */
/* ------------------------------------------------------------------------ */

/* Sends each of n messages on a socket of its own to url, all before
 * receiving any answer; answers[i] gets each answer (malloc'd) or NULL. */
static void exchange(const char *url, uint8_t *const *msgs, const size_t *lens, int n,
                     uint8_t **answers, size_t *answer_lens)
{
	nng_socket socks[8];
	ck_assert_int_le(n, 8);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(nng_req0_open(&socks[i]), 0);
		nng_socket_set_ms(socks[i], NNG_OPT_RECVTIMEO, 60000);
		nng_socket_set_ms(socks[i], NNG_OPT_SENDTIMEO, 60000);
		nng_socket_set_size(socks[i], NNG_OPT_RECVMAXSZ, 0);
		ck_assert_int_eq(nng_dial(socks[i], url, NULL, 0), 0);
	}
	for (int i = 0; i < n; i++) {
		nng_msg *m;
		ck_assert_int_eq(nng_msg_alloc(&m, lens[i]), 0);
		memcpy(nng_msg_body(m), msgs[i], lens[i]);
		int rv = nng_sendmsg(socks[i], m, 0);
		ck_assert_msg(rv == 0, "send to %s: %s", url, nng_strerror(rv));
	}
	for (int i = 0; i < n; i++) {
		nng_msg *m = NULL;
		int rv = nng_recvmsg(socks[i], &m, 0);
		ck_assert_msg(rv == 0, "answer from %s: %s", url, nng_strerror(rv));
		answer_lens[i] = nng_msg_len(m);
		answers[i] = malloc(answer_lens[i] + 1);
		memcpy(answers[i], nng_msg_body(m), answer_lens[i]);
		nng_msg_free(m);
		nng_close(socks[i]);
	}
}

/* A request_id, then ~len bytes of two-byte fields unknown to Request and
 * NodeRequest (field 9, varint 1). */
static uint8_t *unknown_flood(size_t len, size_t *out_len)
{
	uint8_t *b = malloc(len);
	ck_assert_ptr_nonnull(b);
	size_t o = 0;
	b[o++] = 0x08;
	b[o++] = 7;
	while (o + 2 <= len) {
		b[o++] = 9 << 3;
		b[o++] = 1;
	}
	*out_len = o;
	return b;
}

static void assert_too_complex(const Shoal__Response *r)
{
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_msg(r->message != NULL && strstr(r->message, "too complex for its size") != NULL,
	              "message: %s", r->message ? r->message : "(none)");
}

/* The peak RSS growth, in MiB, of process pid while n copies of the flood
 * are sent to url at once; every answer is checked. */
static double flood(int pid, const char *url, int n, bool node)
{
	size_t len;
	/* Room for the Auth field: a router takes messages of at most 16 MiB. */
	uint8_t *msg = unknown_flood(node ? ATTACK_LEN : ATTACK_LEN - 256, &len);
	if (!node) {
		/* Signed when the router requires it (tl_cluster's key): an
		 * authenticated client's flood reaches the decoder. */
		size_t slen;
		uint8_t *s = tl_cluster_sign(&C, msg, len, &slen);
		ck_assert_ptr_nonnull(s);
		free(msg);
		msg = s;
		len = slen;
	}
	uint8_t *msgs[8], *ans[8];
	size_t lens[8], ans_lens[8];
	for (int i = 0; i < n; i++) {
		msgs[i] = msg;
		lens[i] = len;
	}
	double before = status_mib(pid, "VmRSS");
	reset_peak(pid);
	exchange(url, msgs, lens, n, ans, ans_lens);
	double peak = status_mib(pid, "VmHWM");
	printf("  %d x %zu-byte flood to %s: RSS %.0f MiB before, peak %.0f MiB (+%.0f)\n", n, len,
	       url, before, peak, peak - before);
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		char why[SH_ERRMSG_SIZE];
		if (node) {
			Shoal__NodeResponse *r;
			ck_assert_int_eq(
			    wire_unpack_node_response(NULL, ans[i], ans_lens[i], &r, why),
			    SHOAL_OK);
			assert_too_complex(r->response);
			protobuf_c_message_free_unpacked(&r->base, wire_heap_allocator());
		} else {
			Shoal__Response *r;
			ck_assert_int_eq(wire_unpack_response(NULL, ans[i], ans_lens[i], &r, why),
			                 SHOAL_OK);
			assert_too_complex(r);
			wire_free_response(NULL, r);
		}
		free(ans[i]);
	}
	free(msg);
	return peak - before;
}

START_TEST(test_router_unknown_field_flood)
{
	int pid = pid_of("router", 1);
	double grew = flood(pid, C.endpoint, 4, false);
	ck_assert_msg(grew < BOUND_ATTACK_MIB, "the router grew by %.0f MiB", grew);
	if (C.signed_by_test) {
		/* Unsigned, the same flood is refused before any decode. */
		size_t len, alen;
		uint8_t *msg = unknown_flood(ATTACK_LEN, &len), *ans;
		exchange(C.endpoint, &msg, &len, 1, &ans, &alen);
		Shoal__Response *r;
		char why[SH_ERRMSG_SIZE];
		ck_assert_int_eq(wire_unpack_response(NULL, ans, alen, &r, why), SHOAL_OK);
		ck_assert_int_eq(r->status, SHOAL__STATUS__STATUS_AUTH_MISSING);
		wire_free_response(NULL, r);
		free(ans);
		free(msg);
	}
	/* And it still serves. */
	ck_assert_int_eq(tl_shoal(&C, NULL, NULL, "list-tables"), 0);
}
END_TEST

START_TEST(test_node_unknown_field_flood)
{
	char url[256];
	node_rpc(1, url, sizeof(url));
	int pid = pid_of("node", 1);
	double grew = flood(pid, url, 2, true);
	ck_assert_msg(grew < BOUND_ATTACK_MIB, "the node grew by %.0f MiB", grew);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Raft's port (plain: raft-uv's handshake, read by node/transport.c)        */
/* ------------------------------------------------------------------------ */

/* A TCP connection to node 1's Raft port of group 1 (the node's raft
 * address is group 0's; group g listens g ports above). */
static int raft_conn(void)
{
	char hp[256];
	node_key(1, "raft", hp, sizeof(hp));
	char *colon = strrchr(hp, ':');
	ck_assert_ptr_nonnull(colon);
	*colon = '\0';
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1) + 1)};
	ck_assert_int_eq(inet_pton(AF_INET, hp, &a.sin_addr), 1);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the node closed fd within ms (polled; what it sends is read). */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t end = now_ms() + ms;
	for (int64_t now = now_ms(); now < end; now = now_ms()) {
		if (poll(&p, 1, (int)(end - now)) <= 0)
			continue;
		char b[64];
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
	return false;
}

/* Issue 15: raft-uv's own listener allocated whatever address length a
 * handshake announced (8 GiB raised a node's virtual size by 8 GiB) and
 * waited for a handshake forever.  On a plain cluster the node's listener
 * (node/transport.c) refuses the length before reading it, drops a
 * handshake not done in 5 s, and past 64 handshakes at once closes new
 * connections at once; Raft keeps working through all of it. */
START_TEST(test_raft_handshake_bounds)
{
	int pid = pid_of("node", 1);
	double size0 = status_mib(pid, "VmSize");
	/* Protocol 1, id 2, an address of 2^33 bytes. */
	uint8_t hs[24] = {1, [8] = 2, [16 + 4] = 2};
	int fd = raft_conn();
	ck_assert_int_eq(send(fd, hs, sizeof(hs), 0), (ssize_t)sizeof(hs));
	ck_assert_msg(closed_within(fd, 5000), "an 8 GiB address was not refused");
	close(fd);
	double size1 = status_mib(pid, "VmSize");
	ck_assert_msg(size1 < size0 + 256, "VmSize %.0f -> %.0f MiB", size0, size1);
	/* Three more at once: refused, and logged with the first at most
	 * (one line per 10 s: a stranger must not fill the disk). */
	for (int i = 0; i < 3; i++) {
		fd = raft_conn();
		ck_assert_int_eq(send(fd, hs, sizeof(hs), 0), (ssize_t)sizeof(hs));
		ck_assert_msg(closed_within(fd, 5000), "an 8 GiB address was not refused");
		close(fd);
	}
	ck_assert_int_eq(tl_cluster_log_count(&C, 1, "address refused"), 1);

	/* 70 connections that send nothing: past 64 closed at once, the
	 * rest when their 5 s are up. */
	int fds[70], early = 0;
	for (int i = 0; i < 70; i++)
		fds[i] = raft_conn();
	for (int i = 0; i < 70; i++)
		early += closed_within(fds[i], 10);
	printf("  raft port: %d of 70 silent connections closed at once\n", early);
	ck_assert_int_ge(early, 70 - 64);
	for (int i = 0; i < 70; i++) {
		ck_assert_msg(closed_within(fds[i], 15000), "a silent connection was kept");
		close(fds[i]);
	}
	/* Raft still replicates (a write needs a majority of group 1). */
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(tl_shoal(&C, NULL, NULL,
		                          "put-item --table-name mem --item "
		                          "'{\"pk\":{\"S\":\"raft-%d\"}}'",
		                          i),
		                 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Legitimate dense messages                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_dense_batch_still_works)
{
	/* 25 items of 1500 attributes of BOOL with two-character names: a
	 * 480 KB message that decodes to ~15 times its size. */
	json_t *puts = json_array();
	for (int i = 0; i < 25; i++) {
		json_t *it = json_object();
		char pk[32];
		snprintf(pk, sizeof(pk), "dense#%02d", i);
		json_object_set_new(it, "pk", json_pack("{s:s}", "S", pk));
		for (int a = 0; a < 1500; a++) {
			char name[8];
			snprintf(name, sizeof(name), "%c%c", 'A' + a % 50, 'A' + a / 50);
			json_object_set_new(it, name, json_pack("{s:b}", "BOOL", a & 1));
		}
		json_array_append_new(puts, json_pack("{s:{s:o}}", "PutRequest", "Item", it));
	}
	char path[1200];
	snprintf(path, sizeof(path), "%s/dense.json", C.dir);
	json_t *req = json_pack("{s:o}", "mem", puts);
	ck_assert_int_eq(json_dump_file(req, path, JSON_COMPACT), 0);
	json_decref(req);
	char *err = NULL;
	int rc = tl_shoal(&C, NULL, &err, "batch-write-item --request-items file://%s", path);
	ck_assert_msg(rc == 0, "batch-write-item: %s", err ? err : "");
	free(err);
	char *out = NULL;
	rc = tl_shoal(&C, &out, &err,
	              "get-item --table-name mem --key '{\"pk\":{\"S\":\"dense#07\"}}'");
	ck_assert_msg(rc == 0, "get-item: %s", err ? err : "");
	json_error_t je;
	json_t *got = json_loads(out, 0, &je);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(json_object_size(json_object_get(got, "Item")), 1501);
	json_decref(got);
	free(out);
	free(err);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

/* A Request batch of n PutItems of items with a `size`-byte B attribute. */
static uint8_t *put_batch(int n, size_t size, int salt, size_t *len)
{
	sh_arena a;
	sh_arena_init(&a);
	uint8_t *blob = sh_arena_alloc(&a, size);
	memset(blob, 'x', size);
	Shoal__Request batch = SHOAL__REQUEST__INIT;
	batch.n_batch = (size_t)n;
	batch.batch = sh_arena_alloc(&a, (size_t)n * sizeof(*batch.batch));
	for (int i = 0; i < n; i++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "pool#%d#%d", salt, i);
		Shoal__AttributeValue k = SHOAL__ATTRIBUTE_VALUE__INIT,
		                      v = SHOAL__ATTRIBUTE_VALUE__INIT;
		k.value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
		k.s.data = (uint8_t *)pk;
		k.s.len = strlen(pk);
		v.value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_B;
		v.b.data = blob;
		v.b.len = size;
		Shoal__Attribute ak = SHOAL__ATTRIBUTE__INIT, av = SHOAL__ATTRIBUTE__INIT;
		ak.name.data = (uint8_t *)"pk";
		ak.name.len = 2;
		ak.value = &k;
		av.name.data = (uint8_t *)"blob";
		av.name.len = 4;
		av.value = &v;
		Shoal__Attribute *attrs[] = {&ak, &av};
		Shoal__Item item = SHOAL__ITEM__INIT;
		item.n_attrs = 2;
		item.attrs = attrs;
		Shoal__PutItemRequest put = SHOAL__PUT_ITEM_REQUEST__INIT;
		WIRE_SET(&put, table_name, "mem");
		put.item = &item;
		Shoal__Request r = SHOAL__REQUEST__INIT;
		r.request_id = (uint64_t)i + 1;
		r.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
		r.put_item = &put;
		char msg[SH_ERRMSG_SIZE];
		ck_assert_int_eq(
		    wire_pack(&a, &r.base, &batch.batch[i].data, &batch.batch[i].len, msg),
		    SHOAL_OK);
	}
	*len = shoal__request__get_packed_size(&batch);
	uint8_t *out = malloc(*len);
	shoal__request__pack(&batch, out);
	sh_arena_fini(&a);
	return out;
}

START_TEST(test_pools_shrink_after_large_batches)
{
	int pid = pid_of("router", 1);
	double rss0 = status_mib(pid, "VmRSS");
	uint8_t *msgs[4], *ans[4];
	size_t lens[4], ans_lens[4];
	for (int i = 0; i < 4; i++) {
		size_t len;
		uint8_t *b = put_batch(1024, 8 * 1024, i, &len);
		msgs[i] = tl_cluster_sign(&C, b, len, &lens[i]); /* as the router requires */
		ck_assert_ptr_nonnull(msgs[i]);
		free(b);
	}
	exchange(C.endpoint, msgs, lens, 4, ans, ans_lens);
	for (int i = 0; i < 4; i++) {
		Shoal__Response *r;
		char why[SH_ERRMSG_SIZE];
		ck_assert_int_eq(wire_unpack_response(NULL, ans[i], ans_lens[i], &r, why),
		                 SHOAL_OK);
		ck_assert_uint_eq(r->n_batch, 1024);
		int ok = 0, shown = 0;
		for (size_t m = 0; m < r->n_batch; m++) {
			Shoal__Response *one;
			ck_assert_int_eq(wire_unpack_response(NULL, r->batch[m].data,
			                                      r->batch[m].len, &one, why),
			                 SHOAL_OK);
			if (one->status == SHOAL__STATUS__STATUS_OK)
				ok++;
			else if (shown++ == 0)
				printf("  member %zu: status %d: %s\n", m, one->status,
				       one->message ? one->message : "");
			wire_free_response(NULL, one);
		}
		ck_assert_int_eq(ok, 1024);
		wire_free_response(NULL, r);
		free(ans[i]);
		free(msgs[i]);
	}
	double rss1 = status_mib(pid, "VmRSS"), peak = status_mib(pid, "VmHWM");
	printf("  router after 4 batches of 1024 x 8 KiB: RSS %.0f -> %.0f MiB (peak %.0f)\n", rss0,
	       rss1, peak);
	double pooled = router_metric("shoal_router_job_pool_jobs");
	double pooled_bytes = router_metric("shoal_router_job_pool_bytes");
	double node_pooled = tl_cluster_metric(&C, "shoal_node_batch_pool_members", -1);
	double node_bytes = tl_cluster_metric(&C, "shoal_node_batch_pool_bytes", -1);
	printf("  pooled: router %.0f jobs, %.1f MiB; nodes %.0f members, %.1f MiB\n", pooled,
	       pooled_bytes / (1 << 20), node_pooled, node_bytes / (1 << 20));
	ck_assert_double_le(pooled, POOL_KEEP);
	ck_assert_double_le(pooled_bytes, POOL_BYTES);
	ck_assert_double_le(node_pooled, 3 * POOL_KEEP);
	ck_assert_double_le(node_bytes, 3 * POOL_BYTES);
#ifndef __SANITIZE_ADDRESS__
	/* (Under ASan freed memory waits in its quarantine: only the gauges
	 * tell then.) */
	ck_assert_msg(rss1 < rss0 + BOUND_POOL_MIB, "the router holds %.0f MiB more than before",
	              rss1 - rss0);
#endif
}
END_TEST

static Suite *memory_suite(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("core");
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_router_unknown_field_flood);
	tcase_add_test(tc, test_node_unknown_field_flood);
	tcase_add_test(tc, test_raft_handshake_bounds);
	tcase_add_test(tc, test_dense_batch_still_works);
	tcase_add_test(tc, test_pools_shrink_after_large_batches);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(memory_suite)
