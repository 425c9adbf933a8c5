/*
 * Histories and their checkers (tests/lib/tl_history.h): the text form, the
 * recorder, linearizability of registers (hand-written histories, the
 * classic examples of Porcupine's tests, the shortest failing prefix, the
 * budget), the append-only list checks, and randomized histories from a
 * real sequential execution with one injected anomaly.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/testlib.h"
#include "tests/lib/tl_history.h"

/* A history from its text form (which also exercises the loader). */
static tl_history *H(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	ck_assert(f != NULL);
	char err[256] = "";
	tl_history *h = tl_history_load(f, err, sizeof(err));
	fclose(f);
	ck_assert_msg(h != NULL, "load: %s", err);
	return h;
}

static char *dump(const tl_history *h)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert(f != NULL);
	tl_history_dump(h, f);
	fclose(f);
	return buf;
}

/* Checks the register history `text` and expects verdict v. */
static void regs(const char *text, tl_verdict v)
{
	tl_history *h = H(text);
	tl_check_result r;
	tl_verdict got = tl_check_registers(h, 0, &r);
	if (got != v) {
		char *d = dump(h);
		ck_abort_msg("expected %s, got %s (%s) for:\n%s", tl_verdict_name(v),
		             tl_verdict_name(got), r.msg, d);
	}
	tl_check_result_fini(&r);
	tl_history_free(h);
}

static void lists(const char *text, tl_verdict v, const char *msg_part)
{
	tl_history *h = H(text);
	tl_check_result r;
	tl_verdict got = tl_check_lists(h, &r);
	ck_assert_msg(got == v, "expected %s, got %s (%s) for:\n%s", tl_verdict_name(v),
	              tl_verdict_name(got), r.msg, text);
	if (msg_part != NULL)
		ck_assert_msg(strstr(r.msg, msg_part) != NULL, "message \"%s\" lacks \"%s\"", r.msg,
		              msg_part);
	if (v == TL_NOT_LINEARIZABLE)
		ck_assert(r.witness != NULL && tl_history_len(r.witness) > 0);
	tl_check_result_fini(&r);
	tl_history_free(h);
}

/* ------------------------------------------------------------------------
 * The text form and the recorder. */

START_TEST(test_text_round_trip)
{
	const char *text = "100 250 3 ok write k1 5\n"
	                   "110 300 4 ok read k1 = 5\n"
	                   "111 301 4 ok read k1 = nil\n"
	                   "120 - 2 info cas k1 5 6\n"
	                   "121 - 2 invoke write k1 -7\n"
	                   "130 400 1 ok cas k1 nil 6 = 0\n"
	                   "131 401 1 fail cas k1 1 2\n"
	                   "140 500 1 ok append l%201 17\n"
	                   "150 600 2 ok read-list l%201 = [1,5,17]\n"
	                   "151 601 2 ok read-list %25%00%0A = []\n"
	                   "152 - 2 info read-list l%201\n";
	/* "%25%00%0A" is not a valid key ("%00" only alone): fix the line. */
	const char *bad_key = "151 601 2 ok read-list %25%00%0A = []\n";
	char err[256];
	FILE *f = fmemopen((void *)bad_key, strlen(bad_key), "r");
	ck_assert_ptr_null(tl_history_load(f, err, sizeof(err)));
	fclose(f);
	ck_assert_str_eq(err, "line 1: bad key");

	char *good = strdup(text);
	char *p = strstr(good, "%25%00%0A");
	memcpy(p, "%25%20%0A", 9);
	tl_history *h = H(good);
	ck_assert_uint_eq(tl_history_len(h), 11);
	ck_assert_str_eq(tl_history_op(h, 9)->key, "% \n");
	ck_assert_uint_eq(tl_history_op(h, 8)->nlist, 3);
	ck_assert_int_eq(tl_history_op(h, 8)->list[2], 17);
	ck_assert_int_eq(tl_history_op(h, 2)->value, TL_NIL);
	ck_assert_int_eq(tl_history_op(h, 4)->arg, -7);
	ck_assert_uint_eq(tl_history_op(h, 3)->t_complete, TL_NO_TIME);
	char *out = dump(h);
	ck_assert_str_eq(out, good);

	/* Through a file, with comments and blank lines. */
	const char *dir = tl_tmpdir("history");
	char path[512];
	snprintf(path, sizeof(path), "%s/h.txt", dir);
	ck_assert_int_eq(tl_history_dump_file(h, path), 0);
	tl_history *h2 = tl_history_load_file(path, err, sizeof(err));
	ck_assert_msg(h2 != NULL, "%s", err);
	char *out2 = dump(h2);
	ck_assert_str_eq(out2, good);
	tl_history_free(h2);
	tl_history *h3 = H("# a comment\n\n  100 200 1 ok write k 1\n");
	ck_assert_uint_eq(tl_history_len(h3), 1);
	tl_history_free(h3);
	free(out2);
	free(out);
	free(good);
	tl_history_free(h);
}
END_TEST

START_TEST(test_text_errors)
{
	static const char *const cases[][2] = {
	    {"x 2 1 ok write k 1\n", "line 1: bad invoke time"},
	    {"1 2 1 maybe write k 1\n", "line 1: bad kind (invoke, ok, fail, info)"},
	    {"1 2 1 ok delete k 1\n", "line 1: bad function (read, write, cas, append, read-list)"},
	    {"1 2 1 ok write k\n", "line 1: bad argument"},
	    {"1 2 1 ok read k\n", "line 1: missing '= result'"},
	    {"1 2 1 ok read k = 1 2\n", "line 1: trailing text"},
	    {"1 - 1 ok read k = 1\n",
	     "line 1: ok and fail need a complete time, invoke and info none"},
	    {"5 2 1 ok write k 1\n", "line 1: completes before its invocation"},
	    {"# c\n1 2 1 ok read-list k = [1,,2]\n", "line 2: bad list"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		FILE *f = fmemopen((void *)cases[i][0], strlen(cases[i][0]), "r");
		tl_history *h = tl_history_load(f, err, sizeof(err));
		fclose(f);
		ck_assert_msg(h == NULL, "loaded %s", cases[i][0]);
		ck_assert_str_eq(err, cases[i][1]);
	}
}
END_TEST

#define REC_THREADS 4
#define REC_OPS     2000

static void *recorder_thread(void *arg)
{
	tl_history *h = ((void **)arg)[0];
	int proc = (int)(intptr_t)((void **)arg)[1];
	char key[16];
	snprintf(key, sizeof(key), "t%d", proc);
	for (int i = 0; i < REC_OPS; i++) {
		if (i % 2 == 0) {
			size_t id = tl_history_invoke(h, proc, TL_WRITE, key, i, 0);
			tl_history_complete(h, id, TL_OK, 0);
		} else {
			size_t id = tl_history_invoke(h, proc, TL_READ, key, 0, 0);
			tl_history_complete(h, id, TL_OK, i - 1);
		}
		size_t id = tl_history_invoke(h, proc, TL_APPEND, "list", proc * REC_OPS + i, 0);
		tl_history_complete(h, id, TL_OK, 0);
	}
	return NULL;
}

/* Threads record at once; each one's register history is sequential and
 * correct, and their appends to one list all completed. */
START_TEST(test_recorder_threads)
{
	tl_history *h = tl_history_new();
	pthread_t th[REC_THREADS];
	void *args[REC_THREADS][2];
	for (int t = 0; t < REC_THREADS; t++) {
		args[t][0] = h;
		args[t][1] = (void *)(intptr_t)t;
		ck_assert_int_eq(pthread_create(&th[t], NULL, recorder_thread, args[t]), 0);
	}
	for (int t = 0; t < REC_THREADS; t++)
		pthread_join(th[t], NULL);
	ck_assert_uint_eq(tl_history_len(h), REC_THREADS * REC_OPS * 2);
	size_t pending = tl_history_invoke(h, 9, TL_READ_LIST, "list", 0, 0);
	ck_assert_int_eq(tl_history_op(h, pending)->kind, TL_INVOKE);
	size_t id = tl_history_invoke(h, 9, TL_READ_LIST, "list", 0, 0);
	int64_t *all = malloc(REC_THREADS * REC_OPS * sizeof(*all));
	size_t n = 0;
	for (size_t i = 0; i < tl_history_len(h); i++)
		if (tl_history_op(h, i)->fn == TL_APPEND)
			all[n++] = tl_history_op(h, i)->arg; /* id order: completion order */
	tl_history_complete_list(h, id, TL_OK, all, n);
	free(all);
	for (size_t i = 0; i < tl_history_len(h); i++) {
		const tl_op *op = tl_history_op(h, i);
		if (i != pending)
			ck_assert(op->kind == TL_OK && op->t_complete >= op->t_invoke);
	}
	tl_check_result r;
	ck_assert_int_eq(tl_check_registers(h, 0, &r), TL_LINEARIZABLE);
	ck_assert_uint_eq(r.keys, REC_THREADS);
	tl_check_result_fini(&r);
	ck_assert_msg(tl_check_lists(h, &r) == TL_LINEARIZABLE, "%s", r.msg);
	ck_assert_uint_eq(r.keys, 1);
	tl_check_result_fini(&r);
	tl_history_free(h);
}
END_TEST

/* ------------------------------------------------------------------------
 * Registers, hand-written. */

START_TEST(test_register_basics)
{
	/* Sequential and correct; a key never written reads nil. */
	regs("0 10 1 ok read k = nil\n"
	     "20 30 1 ok write k 1\n"
	     "40 50 2 ok read k = 1\n"
	     "60 70 2 ok cas k 1 2 = 1\n"
	     "80 90 1 ok read k = 2\n"
	     "80 90 3 ok read other = nil\n",
	     TL_LINEARIZABLE);
	/* Stale read after an acknowledged write. */
	regs("0 10 1 ok write k 1\n"
	     "20 30 1 ok write k 2\n"
	     "40 50 2 ok read k = 1\n",
	     TL_NOT_LINEARIZABLE);
	/* A read of a value never written. */
	regs("0 10 1 ok write k 1\n"
	     "20 30 2 ok read k = 7\n",
	     TL_NOT_LINEARIZABLE);
	/* A lost CAS: acknowledged, then a read sees the value before it. */
	regs("0 10 1 ok write k 1\n"
	     "20 30 1 ok cas k 1 2 = 1\n"
	     "40 50 2 ok read k = 1\n",
	     TL_NOT_LINEARIZABLE);
	/* Two successful CAS from the same version, even concurrent. */
	regs("0 10 1 ok write k 1\n"
	     "20 40 1 ok cas k 1 2 = 1\n"
	     "25 45 2 ok cas k 1 3 = 1\n",
	     TL_NOT_LINEARIZABLE);
	/* ... but one succeeding and one failing its condition is fine, in
	 * either order of invocation. */
	regs("0 10 1 ok write k 1\n"
	     "20 40 1 ok cas k 1 2 = 0\n"
	     "25 45 2 ok cas k 1 3 = 1\n"
	     "50 60 2 ok read k = 3\n",
	     TL_LINEARIZABLE);
	/* A condition reported false while it was true. */
	regs("0 10 1 ok write k 1\n"
	     "20 30 1 ok cas k 1 2 = 0\n",
	     TL_NOT_LINEARIZABLE);
	/* Put-if-absent (expected nil): only one can win. */
	regs("0 10 1 ok cas k nil 1 = 1\n"
	     "5 15 2 ok cas k nil 2 = 0\n"
	     "20 30 2 ok read k = 1\n",
	     TL_LINEARIZABLE);
	regs("0 10 1 ok cas k nil 1 = 1\n"
	     "5 15 2 ok cas k nil 2 = 1\n",
	     TL_NOT_LINEARIZABLE);
	/* Keys are independent: k's anomaly is found among other keys' ops. */
	regs("0 10 1 ok write a 1\n"
	     "0 10 2 ok write k 1\n"
	     "20 30 1 ok write k 2\n"
	     "20 30 3 ok read a = 1\n"
	     "40 50 2 ok read k = 1\n",
	     TL_NOT_LINEARIZABLE);
}
END_TEST

START_TEST(test_register_concurrency)
{
	/* Two concurrent writes may be ordered either way... */
	regs("0 100 1 ok write k 1\n"
	     "0 100 2 ok write k 2\n"
	     "110 120 3 ok read k = 1\n",
	     TL_LINEARIZABLE);
	regs("0 100 1 ok write k 1\n"
	     "0 100 2 ok write k 2\n"
	     "110 120 3 ok read k = 2\n",
	     TL_LINEARIZABLE);
	/* ...and reads during them may see 2 then 1 (2 first, then 1)... */
	regs("0 100 1 ok write k 1\n"
	     "0 100 2 ok write k 2\n"
	     "10 20 3 ok read k = 2\n"
	     "30 40 3 ok read k = 1\n",
	     TL_LINEARIZABLE);
	/* ...but not 2, 1, 2. */
	regs("0 100 1 ok write k 1\n"
	     "0 100 2 ok write k 2\n"
	     "10 20 3 ok read k = 2\n"
	     "30 40 3 ok read k = 1\n"
	     "50 60 3 ok read k = 2\n",
	     TL_NOT_LINEARIZABLE);
	/* Once both completed, two reads cannot disagree. */
	regs("0 100 1 ok write k 1\n"
	     "0 100 2 ok write k 2\n"
	     "110 120 3 ok read k = 1\n"
	     "130 140 3 ok read k = 2\n",
	     TL_NOT_LINEARIZABLE);
	/* Touching intervals (one completes when the other begins) count as
	 * concurrent. */
	regs("0 10 1 ok write k 1\n"
	     "10 20 2 ok read k = nil\n",
	     TL_LINEARIZABLE);
	regs("0 10 1 ok write k 1\n"
	     "11 20 2 ok read k = nil\n",
	     TL_NOT_LINEARIZABLE);
}
END_TEST

START_TEST(test_register_info_and_fail)
{
	/* An info write may have happened... */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info write k 2\n"
	     "100 110 3 ok read k = 2\n",
	     TL_LINEARIZABLE);
	/* ...or not... */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info write k 2\n"
	     "100 110 3 ok read k = 1\n",
	     TL_LINEARIZABLE);
	/* ...late (pending ops count as info)... */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 invoke write k 2\n"
	     "100 110 3 ok read k = 1\n"
	     "200 210 3 ok read k = 2\n",
	     TL_LINEARIZABLE);
	/* ...but not undone once seen, */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info write k 2\n"
	     "30 40 3 ok read k = 2\n"
	     "50 60 3 ok read k = 1\n",
	     TL_NOT_LINEARIZABLE);
	/* nor seen before its invocation. */
	regs("0 10 1 ok write k 1\n"
	     "5 15 3 ok read k = 2\n"
	     "20 - 2 info write k 2\n",
	     TL_NOT_LINEARIZABLE);
	/* An info cas takes effect only if its condition held. */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info cas k 1 2\n"
	     "30 40 3 ok read k = 2\n",
	     TL_LINEARIZABLE);
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info cas k 5 2\n"
	     "30 40 3 ok read k = 2\n",
	     TL_NOT_LINEARIZABLE);
	/* An info read says nothing. */
	regs("0 10 1 ok write k 1\n"
	     "20 - 2 info read k\n",
	     TL_LINEARIZABLE);
	/* A failed write certainly did not happen: ignored... */
	regs("0 10 1 ok write k 1\n"
	     "20 30 2 fail write k 2\n"
	     "40 50 3 ok read k = 1\n",
	     TL_LINEARIZABLE);
	/* ...so seeing its value is a violation. */
	regs("0 10 1 ok write k 1\n"
	     "20 30 2 fail write k 2\n"
	     "40 50 3 ok read k = 2\n",
	     TL_NOT_LINEARIZABLE);
	regs("0 10 1 ok write k 1\n"
	     "20 30 2 fail cas k 1 2\n"
	     "40 50 3 ok read k = 2\n",
	     TL_NOT_LINEARIZABLE);
}
END_TEST

/* The register examples of Porcupine's tests (TestRegisterModel and
 * TestZeroDuration, from MIT 6.824's 2017 quiz 2): a register starting at 0
 * (nil here), a put and two concurrent gets. */
START_TEST(test_register_porcupine_examples)
{
	regs("0 100 0 ok write k 100\n"
	     "25 75 1 ok read k = 100\n"
	     "30 60 2 ok read k = nil\n",
	     TL_LINEARIZABLE);
	regs("0 100 0 ok write k 200\n"
	     "10 30 1 ok read k = 200\n"
	     "40 90 2 ok read k = nil\n",
	     TL_NOT_LINEARIZABLE);
	regs("0 100 0 ok write k 100\n"
	     "25 75 1 ok read k = 100\n"
	     "30 30 2 ok read k = nil\n"
	     "30 30 3 ok read k = nil\n",
	     TL_LINEARIZABLE);
	regs("0 100 0 ok write k 200\n"
	     "10 10 1 ok read k = 200\n"
	     "10 10 2 ok read k = 200\n"
	     "40 90 3 ok read k = nil\n",
	     TL_NOT_LINEARIZABLE);
}
END_TEST

/* The witness is the shortest failing prefix: it ends at the stale read's
 * completion, fails itself, and passes without that completion. */
START_TEST(test_register_witness)
{
	tl_history *h = tl_history_new();
	uint64_t t = 1000;
	for (int i = 1; i <= 50; i++, t += 100) {
		tl_op w = {.t_invoke = t,
		           .t_complete = t + 50,
		           .proc = 1,
		           .kind = TL_OK,
		           .fn = TL_WRITE,
		           .key = "k",
		           .arg = i};
		tl_history_add(h, &w);
		tl_op r = {.t_invoke = t + 20,
		           .t_complete = t + 80,
		           .proc = 2,
		           .kind = TL_OK,
		           .fn = TL_READ,
		           .key = "k",
		           .value = i};
		tl_history_add(h, &r);
		tl_op o = {.t_invoke = t,
		           .t_complete = t + 5,
		           .proc = 3,
		           .kind = TL_OK,
		           .fn = TL_WRITE,
		           .key = "other",
		           .arg = i};
		tl_history_add(h, &o);
	}
	/* A stale read overlapping a slow write, then more correct ops. */
	tl_op slow = {.t_invoke = t,
	              .t_complete = t + 500,
	              .proc = 4,
	              .kind = TL_OK,
	              .fn = TL_WRITE,
	              .key = "k",
	              .arg = 1000};
	tl_history_add(h, &slow);
	tl_op stale = {.t_invoke = t + 10,
	               .t_complete = t + 20,
	               .proc = 2,
	               .kind = TL_OK,
	               .fn = TL_READ,
	               .key = "k",
	               .value = 49};
	tl_history_add(h, &stale);
	for (int i = 51; i <= 80; i++) {
		t += 100;
		tl_op w = {.t_invoke = t,
		           .t_complete = t + 50,
		           .proc = 1,
		           .kind = TL_OK,
		           .fn = TL_WRITE,
		           .key = "k",
		           .arg = i};
		tl_history_add(h, &w);
	}
	tl_check_result r;
	ck_assert_int_eq(tl_check_registers(h, 0, &r), TL_NOT_LINEARIZABLE);
	ck_assert_str_eq(r.key, "k");
	ck_assert_uint_eq(r.keys, 2);
	ck_assert_uint_eq(r.keys_failed, 1);
	ck_assert_ptr_nonnull(r.witness);
	char *w = dump(r.witness);
	/* 100 ops on k before, the slow write (pending at the cut: shown
	 * `invoke`), the stale read last. */
	size_t n = tl_history_len(r.witness);
	ck_assert_uint_eq(n, 102);
	const tl_op *last = tl_history_op(r.witness, n - 1);
	ck_assert(last->fn == TL_READ && last->value == 49);
	ck_assert_int_eq(tl_history_op(r.witness, n - 2)->kind, TL_INVOKE);
	ck_assert_msg(strstr(r.msg, "ok read k = 49") != NULL, "%s", r.msg);
	tl_check_result r2;
	ck_assert_int_eq(tl_check_registers(r.witness, 0, &r2), TL_NOT_LINEARIZABLE);
	tl_check_result_fini(&r2);
	/* Without the stale read's completion the prefix passes. */
	tl_history *shorter = tl_history_new();
	for (size_t i = 0; i + 1 < n; i++)
		tl_history_add(shorter, tl_history_op(r.witness, i));
	ck_assert_int_eq(tl_check_registers(shorter, 0, &r2), TL_LINEARIZABLE);
	tl_check_result_fini(&r2);
	tl_history_free(shorter);
	free(w);
	tl_check_result_fini(&r);
	tl_history_free(h);
}
END_TEST

/* A pathological history -- 40 concurrent writes and a concurrent read of a
 * value none wrote -- makes the search try every subset: it stops at the
 * budget and says UNKNOWN, promptly. */
START_TEST(test_register_budget)
{
	tl_history *h = tl_history_new();
	for (int i = 0; i < 40; i++) {
		tl_op w = {.t_invoke = 10,
		           .t_complete = 1000,
		           .proc = i,
		           .kind = TL_OK,
		           .fn = TL_WRITE,
		           .key = "k",
		           .arg = i};
		tl_history_add(h, &w);
	}
	tl_op r0 = {.t_invoke = 10,
	            .t_complete = 1000,
	            .proc = 99,
	            .kind = TL_OK,
	            .fn = TL_READ,
	            .key = "k",
	            .value = 999};
	tl_history_add(h, &r0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	tl_check_result r;
	ck_assert_int_eq(tl_check_registers(h, 100000, &r), TL_UNKNOWN);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("budget: UNKNOWN after %llu states in %.3f s (%s)\n", (unsigned long long)r.states,
	       secs, r.msg);
	ck_assert_uint_eq(r.keys_unknown, 1);
	ck_assert_str_eq(r.key, "k");
	ck_assert_ptr_null(r.witness);
	ck_assert(secs < 5);
	tl_check_result_fini(&r);
	/* A failing key wins over an unknown one. */
	tl_op w1 = {.t_invoke = 2000,
	            .t_complete = 2010,
	            .kind = TL_OK,
	            .fn = TL_WRITE,
	            .key = "j",
	            .arg = 1};
	tl_op rd = {.t_invoke = 2020,
	            .t_complete = 2030,
	            .kind = TL_OK,
	            .fn = TL_READ,
	            .key = "j",
	            .value = 2};
	tl_history_add(h, &w1);
	tl_history_add(h, &rd);
	ck_assert_int_eq(tl_check_registers(h, 100000, &r), TL_NOT_LINEARIZABLE);
	ck_assert_str_eq(r.key, "j");
	tl_check_result_fini(&r);
	tl_history_free(h);
}
END_TEST

/* ------------------------------------------------------------------------
 * Lists, hand-written. */

START_TEST(test_lists)
{
	const char *good = "0 10 1 ok append l 1\n"
	                   "5 30 2 ok append l 2\n"
	                   "20 - 3 info append l 3\n"
	                   "21 22 3 fail append l 4\n"
	                   "25 35 4 ok read-list l = [1]\n"
	                   "36 40 4 ok read-list l = [1,2]\n"
	                   "50 60 4 ok read-list l = [1,2,3]\n"
	                   "50 60 4 ok read-list m = []\n";
	lists(good, TL_LINEARIZABLE, NULL);
	/* The info append need not appear at all. */
	lists("0 10 1 ok append l 1\n"
	      "20 - 3 info append l 3\n"
	      "50 60 4 ok read-list l = [1]\n",
	      TL_LINEARIZABLE, NULL);
	/* Lost: acknowledged, then missing from a later read. */
	lists("0 10 1 ok append l 1\n"
	      "11 20 1 ok append l 2\n"
	      "50 60 4 ok read-list l = [1]\n",
	      TL_NOT_LINEARIZABLE, "lost");
	/* Acknowledged, seen, then missing from a later read (an element lost
	 * in the middle shows as reads that disagree). */
	lists("0 10 1 ok append l 1\n"
	      "11 20 1 ok append l 2\n"
	      "21 22 1 ok append l 3\n"
	      "30 40 4 ok read-list l = [1,2,3]\n"
	      "50 60 4 ok read-list l = [1,3]\n",
	      TL_NOT_LINEARIZABLE, "disagree");
	/* Stale: a shorter read after a longer one completed. */
	lists("0 10 1 ok append l 1\n"
	      "0 100 1 ok append l 2\n"
	      "30 40 4 ok read-list l = [1,2]\n"
	      "50 60 4 ok read-list l = [1]\n",
	      TL_NOT_LINEARIZABLE, "stale");
	/* Duplicated. */
	lists("0 10 1 ok append l 1\n"
	      "11 20 1 ok append l 2\n"
	      "50 60 4 ok read-list l = [1,2,1]\n",
	      TL_NOT_LINEARIZABLE, "twice");
	/* Reordered: two reads that disagree. */
	lists("0 100 1 ok append l 1\n"
	      "0 100 2 ok append l 2\n"
	      "0 100 4 ok read-list l = [1,2]\n"
	      "0 100 5 ok read-list l = [2,1]\n",
	      TL_NOT_LINEARIZABLE, "disagree");
	/* Reordered against real time: 2 was appended after 1 completed. */
	lists("0 10 1 ok append l 1\n"
	      "20 30 2 ok append l 2\n"
	      "5 100 4 ok read-list l = [2,1]\n",
	      TL_NOT_LINEARIZABLE, "after 2");
	/* An append acknowledged before another began, missing from a read
	 * holding the later one (no read began after it completed). */
	lists("0 10 1 ok append l 1\n"
	      "20 30 2 ok append l 2\n"
	      "5 35 4 ok read-list l = [2]\n",
	      TL_NOT_LINEARIZABLE, "(lost) but not 2");
	/* A failed append's element, an element never appended, one read
	 * before its append began. */
	lists("0 10 1 fail append l 1\n"
	      "50 60 4 ok read-list l = [1]\n",
	      TL_NOT_LINEARIZABLE, "failed");
	lists("50 60 4 ok read-list l = [9]\n", TL_NOT_LINEARIZABLE, "never appended");
	lists("50 60 4 ok read-list l = [1]\n"
	      "70 80 1 ok append l 1\n",
	      TL_NOT_LINEARIZABLE, "before its append");
	/* The workload's own mistake: one element appended twice. */
	lists("0 10 1 ok append l 1\n"
	      "0 10 1 ok append l 1\n",
	      TL_NOT_LINEARIZABLE, "appended twice");
}
END_TEST

/* ------------------------------------------------------------------------
 * Randomized: histories of a real sequential execution with random
 * intervals around each operation's moment (always linearizable), then one
 * anomaly injected (always caught). */

typedef struct {
	tl_op *ops;
	size_t n, cap;
	int64_t uniq;
	uint64_t rng;
} gen;

static tl_op *gen_push(gen *g)
{
	if (g->n == g->cap) {
		g->cap = g->cap == 0 ? 1024 : g->cap * 2;
		g->ops = realloc(g->ops, g->cap * sizeof(*g->ops));
		ck_assert(g->ops != NULL);
	}
	tl_op *op = &g->ops[g->n++];
	memset(op, 0, sizeof(*op));
	op->value = TL_NIL;
	return op;
}

static uint64_t rnd(gen *g, uint64_t n)
{
	return tl_rand(&g->rng) % n;
}

static char keynames[128][16];

/* n register operations over nkeys keys, each at moment 1000 + 10 i, its
 * interval reaching up to `width` ns either side (width 0: sequential). */
static void gen_registers(gen *g, size_t n, int nkeys, uint64_t width)
{
	int64_t state[128];
	for (int k = 0; k < nkeys; k++) {
		state[k] = TL_NIL;
		snprintf(keynames[k], sizeof(keynames[k]), "k%d", k);
	}
	for (size_t i = 0; i < n; i++) {
		int k = (int)rnd(g, (uint64_t)nkeys);
		uint64_t at = 100000 + 10 * i;
		tl_op *op = gen_push(g);
		op->key = keynames[k];
		op->proc = (int)rnd(g, 16);
		op->t_invoke = at - rnd(g, width + 1);
		op->t_complete = at + rnd(g, width + 1);
		op->kind = TL_OK;
		uint64_t dice = rnd(g, 100);
		if (dice < 40) {
			op->fn = TL_READ;
			op->value = state[k];
		} else if (dice < 70) {
			op->fn = TL_WRITE;
			op->arg = state[k] = ++g->uniq;
		} else {
			op->fn = TL_CAS;
			op->arg2 = ++g->uniq;
			if (rnd(g, 3) > 0) {
				op->arg = state[k];
				op->value = 1;
				state[k] = op->arg2;
			} else {
				op->arg = state[k] == TL_NIL ? -1 : state[k] - 1; /* not there */
				op->value = 0;
				if (rnd(g, 2) == 0)
					op->kind = TL_FAIL;
			}
		}
		/* Some writes time out (they happened; the client cannot tell),
		 * some fail and never happen. */
		if (op->fn != TL_READ && op->kind == TL_OK && rnd(g, 20) == 0) {
			op->kind = TL_INFO;
			op->t_complete = TL_NO_TIME;
		} else if (op->fn == TL_READ && rnd(g, 30) == 0) {
			op->kind = rnd(g, 2) ? TL_INFO : TL_FAIL;
			if (op->kind == TL_INFO)
				op->t_complete = TL_NO_TIME;
		}
		if (rnd(g, 40) == 0) {
			tl_op *f = gen_push(g);
			*f = g->ops[g->n - 2];
			f->fn = TL_WRITE;
			f->kind = TL_FAIL;
			f->t_complete = f->t_invoke + 1 + rnd(g, width + 1);
			f->arg = ++g->uniq;
		}
	}
}

static tl_history *gen_history(const gen *g)
{
	tl_history *h = tl_history_new();
	for (size_t i = 0; i < g->n; i++)
		tl_history_add(h, &g->ops[i]);
	return h;
}

static bool ok_op(const tl_op *op, tl_fn fn)
{
	return op->kind == TL_OK && op->fn == fn;
}

/* Injects anomaly `kind` into a copy of g's operations; false if g has no
 * place for it.  Each is a certain violation given unique written values. */
static bool inject(gen *g, int kind, char *what, size_t what_size)
{
	size_t n = g->n;
	for (int tries = 0; tries < 2000; tries++) {
		tl_op *r = &g->ops[rnd(g, n)];
		if (kind == 0) { /* a read from the future */
			if (!ok_op(r, TL_READ))
				continue;
			for (size_t j = 0; j < n; j++) {
				tl_op *w = &g->ops[j];
				if (strcmp(w->key, r->key) == 0 && w->fn == TL_WRITE &&
				    w->kind != TL_FAIL && w->t_invoke > r->t_complete) {
					r->value = w->arg;
					snprintf(what, what_size, "read from the future");
					return true;
				}
			}
		} else if (kind == 1) { /* a stale read */
			if (!ok_op(r, TL_READ))
				continue;
			const tl_op *w2 = NULL;
			for (size_t j = n; j-- > 0 && w2 == NULL;) {
				tl_op *w = &g->ops[j];
				if (strcmp(w->key, r->key) == 0 && ok_op(w, TL_WRITE) &&
				    w->t_complete < r->t_invoke)
					w2 = w;
			}
			for (size_t j = n; w2 != NULL && j-- > 0;) {
				tl_op *w = &g->ops[j];
				if (strcmp(w->key, r->key) == 0 && ok_op(w, TL_WRITE) &&
				    w->t_complete < w2->t_invoke) {
					r->value = w->arg;
					snprintf(what, what_size, "stale read");
					return true;
				}
			}
		} else if (kind == 2) { /* a second successful cas from one value */
			if (!ok_op(r, TL_CAS) || r->value != 1)
				continue;
			tl_op copy = *r;
			tl_op *c = gen_push(g); /* may move g->ops */
			*c = copy;
			c->t_invoke = copy.t_complete + 1 + rnd(g, 1000);
			c->t_complete = c->t_invoke + rnd(g, 100);
			c->arg2 = ++g->uniq;
			snprintf(what, what_size, "two successful cas from one value");
			return true;
		} else { /* a read of a failed write */
			if (!ok_op(r, TL_READ))
				continue;
			for (size_t j = 0; j < n; j++) {
				tl_op *w = &g->ops[j];
				if (strcmp(w->key, r->key) == 0 && w->fn == TL_WRITE &&
				    w->kind == TL_FAIL) {
					r->value = w->arg;
					snprintf(what, what_size, "read of a failed write");
					return true;
				}
			}
		}
	}
	return false;
}

START_TEST(test_register_random)
{
	uint64_t seed = tl_seed();
	int caught = 0;
	for (int round = 0; round < 40; round++) {
		gen g = {.rng = seed * 1000 + (uint64_t)round};
		int nkeys = 1 + (int)rnd(&g, 8);
		uint64_t width = rnd(&g, 4) == 0 ? 0 : rnd(&g, 60);
		gen_registers(&g, 200 + rnd(&g, 300), nkeys, width);
		tl_history *h = gen_history(&g);
		tl_check_result r;
		tl_verdict v = tl_check_registers(h, 0, &r);
		if (v != TL_LINEARIZABLE) {
			char *d = dump(h);
			ck_abort_msg("seed %llu round %d: %s (%s) on a correct history:\n%s",
			             (unsigned long long)seed, round, tl_verdict_name(v), r.msg, d);
		}
		tl_check_result_fini(&r);
		tl_history_free(h);

		char what[64] = "";
		if (!inject(&g, round % 4, what, sizeof(what))) {
			free(g.ops);
			continue;
		}
		h = gen_history(&g);
		v = tl_check_registers(h, 0, &r);
		if (v != TL_NOT_LINEARIZABLE) {
			tl_history_dump(h, stdout);
			ck_abort_msg("seed %llu round %d: %s missed (%s, %s); history above",
			             (unsigned long long)seed, round, what, tl_verdict_name(v),
			             r.msg);
		}
		/* The witness fails on its own. */
		tl_check_result r2;
		ck_assert_int_eq(tl_check_registers(r.witness, 0, &r2), TL_NOT_LINEARIZABLE);
		tl_check_result_fini(&r2);
		caught++;
		tl_check_result_fini(&r);
		tl_history_free(h);
		free(g.ops);
	}
	ck_assert_msg(caught >= 20, "only %d anomalies injected", caught);
}
END_TEST

/* Lists: appends in moment order, each read the list at its moment; a final
 * read after everything.  Then: lose, duplicate or reorder an element. */
START_TEST(test_list_random)
{
	uint64_t seed = tl_seed();
	for (int round = 0; round < 60; round++) {
		gen g = {.rng = seed * 7919 + (uint64_t)round};
		uint64_t width = rnd(&g, 60);
		int64_t list[2000];
		size_t len = 0, n = 100 + rnd(&g, 400);
		for (size_t i = 0; i < n; i++) {
			uint64_t at = 100000 + 10 * i;
			tl_op *op = gen_push(&g);
			op->key = "l";
			op->t_invoke = at - rnd(&g, width + 1);
			op->t_complete = at + rnd(&g, width + 1);
			op->kind = TL_OK;
			if (rnd(&g, 2) == 0) {
				op->fn = TL_APPEND;
				op->arg = ++g.uniq * 3;
				if (rnd(&g, 10) == 0) {
					op->kind = TL_FAIL;
					continue;
				}
				list[len++] = op->arg;
				if (rnd(&g, 20) == 0) {
					op->kind = TL_INFO;
					op->t_complete = TL_NO_TIME;
				}
			} else {
				op->fn = TL_READ_LIST;
				op->nlist = len;
				op->list = malloc((len + 1) * sizeof(int64_t));
				memcpy(op->list, list, len * sizeof(int64_t));
			}
		}
		tl_op *fin = gen_push(&g);
		fin->key = "l";
		fin->kind = TL_OK;
		fin->fn = TL_READ_LIST;
		fin->t_invoke = 100000 + 10 * n + 100;
		fin->t_complete = fin->t_invoke + 10;
		fin->nlist = len;
		fin->list = malloc((len + 1) * sizeof(int64_t));
		memcpy(fin->list, list, len * sizeof(int64_t));

		tl_history *h = gen_history(&g);
		tl_check_result r;
		ck_assert_msg(tl_check_lists(h, &r) == TL_LINEARIZABLE, "seed %llu round %d: %s",
		              (unsigned long long)seed, round, r.msg);
		tl_check_result_fini(&r);
		tl_history_free(h);

		/* The anomaly, on reads holding at least two elements. */
		int kind = round % 3;
		for (size_t i = 0; i < g.n; i++) {
			tl_op *op = &g.ops[i];
			if (op->fn != TL_READ_LIST || op->nlist < 2)
				continue;
			size_t at = (size_t)rnd(&g, op->nlist - 1);
			if (kind == 0) { /* lost everywhere */
				int64_t e = op->list[at];
				const tl_op *a = NULL;
				for (size_t j = 0; j < g.n; j++)
					if (g.ops[j].fn == TL_APPEND && g.ops[j].arg == e)
						a = &g.ops[j];
				if (a == NULL || a->kind != TL_OK)
					continue;
				for (size_t j = 0; j < g.n; j++) {
					tl_op *rd = &g.ops[j];
					for (size_t m = 0; rd->fn == TL_READ_LIST && m < rd->nlist;
					     m++)
						if (rd->list[m] == e) {
							memmove(rd->list + m, rd->list + m + 1,
							        (rd->nlist - m - 1) *
							            sizeof(int64_t));
							rd->nlist--;
						}
				}
			} else if (kind == 1) { /* duplicated */
				op->list[at + 1] = op->list[at];
			} else { /* reordered in this read only */
				if (op == fin)
					continue;
				int64_t t = op->list[at];
				op->list[at] = op->list[at + 1];
				op->list[at + 1] = t;
			}
			break;
		}
		h = gen_history(&g);
		ck_assert_msg(tl_check_lists(h, &r) == TL_NOT_LINEARIZABLE,
		              "seed %llu round %d: anomaly %d missed", (unsigned long long)seed,
		              round, kind);
		tl_check_result_fini(&r);
		tl_history_free(h);
		for (size_t i = 0; i < g.n; i++)
			free(g.ops[i].list);
		free(g.ops);
	}
}
END_TEST

/* Check times of correct histories of 1k and 10k operations over 10 and 100
 * keys (printed; bounded loosely so that a slow machine passes). */
/* A brute-force reference for small histories: every order of the
 * operations that respects real time, each unknown one placed or left out. */
typedef struct {
	const tl_op *ops;
	size_t n;
} brute;

static bool brute_from(const brute *b, unsigned placed, int64_t value)
{
	bool all = true;
	for (size_t i = 0; i < b->n; i++)
		if (!(placed >> i & 1) && b->ops[i].kind == TL_OK)
			all = false;
	if (all)
		return true;
	for (size_t i = 0; i < b->n; i++) {
		const tl_op *x = &b->ops[i];
		if (placed >> i & 1)
			continue;
		bool ready = true; /* no unplaced definite op completed before x began */
		for (size_t j = 0; j < b->n && ready; j++)
			if (!(placed >> j & 1) && j != i && b->ops[j].kind == TL_OK &&
			    b->ops[j].t_complete < x->t_invoke)
				ready = false;
		if (!ready)
			continue;
		int64_t next = value;
		bool legal = true;
		if (x->fn == TL_READ)
			legal = value == x->value;
		else if (x->fn == TL_WRITE)
			next = x->arg;
		else if (x->kind != TL_OK)
			next = value == x->arg ? x->arg2 : value;
		else if (x->value != 0)
			legal = value == x->arg, next = x->arg2;
		else
			legal = value != x->arg;
		if (legal && brute_from(b, placed | 1u << i, next))
			return true;
	}
	return false;
}

/* Small histories (up to 7 operations, values from {1, 2, 3}: repeated
 * values, the hard case for the search's shortcuts) checked by the search
 * and by brute force: the verdicts must agree. */
START_TEST(test_register_brute_force)
{
	uint64_t seed = tl_seed();
	gen g = {.rng = seed ^ 0xb207e};
	int failing = 0;
	for (int round = 0; round < 4000; round++) {
		tl_op ops[7], kept[7];
		size_t n = 1 + rnd(&g, 7), nk = 0;
		tl_history *h = tl_history_new();
		for (size_t i = 0; i < n; i++) {
			tl_op *op = &ops[i];
			memset(op, 0, sizeof(*op));
			op->key = "k";
			op->proc = (int)i;
			op->fn = (tl_fn)rnd(&g, 3);
			op->t_invoke = rnd(&g, 20);
			op->t_complete = op->t_invoke + rnd(&g, 8);
			uint64_t k = rnd(&g, 10);
			op->kind = k < 7 ? TL_OK : k < 9 ? TL_INFO : TL_FAIL;
			if (op->kind == TL_INFO)
				op->t_complete = TL_NO_TIME;
			int64_t vals[4] = {TL_NIL, 1, 2, 3};
			op->arg = rnd(&g, 2) ? vals[rnd(&g, 4)] : 1 + (int64_t)rnd(&g, 3);
			op->arg2 = 1 + (int64_t)rnd(&g, 3);
			op->value = op->fn == TL_CAS ? (int64_t)rnd(&g, 2) : vals[rnd(&g, 4)];
			if (op->fn == TL_WRITE)
				op->arg = 1 + (int64_t)rnd(&g, 3);
			tl_history_add(h, op);
			/* The reference sees what matters: no fail, no unknown read. */
			if (op->kind != TL_FAIL && !(op->fn == TL_READ && op->kind != TL_OK))
				kept[nk++] = *op;
		}
		brute b = {kept, nk};
		bool want = brute_from(&b, 0, TL_NIL);
		tl_check_result r;
		tl_verdict v = tl_check_registers(h, 0, &r);
		if (v != (want ? TL_LINEARIZABLE : TL_NOT_LINEARIZABLE)) {
			tl_history_dump(h, stdout);
			ck_abort_msg("seed %llu round %d: search says %s, brute force %s (history "
			             "above)",
			             (unsigned long long)seed, round, tl_verdict_name(v),
			             want ? "linearizable" : "not");
		}
		if (!want) {
			/* The witness fails on its own. */
			tl_check_result r2;
			ck_assert_int_eq(tl_check_registers(r.witness, 0, &r2),
			                 TL_NOT_LINEARIZABLE);
			tl_check_result_fini(&r2);
			failing++;
		}
		tl_check_result_fini(&r);
		tl_history_free(h);
	}
	ck_assert_msg(failing > 400 && failing < 3600, "%d of 4000 failing: a poor mix", failing);
}
END_TEST

/* The same for lists: every order respecting real time, unknown appends
 * placed or left out, the list as state. */
static bool brute_list_from(const brute *b, unsigned placed, const int64_t *list, size_t len)
{
	bool all = true;
	for (size_t i = 0; i < b->n; i++)
		if (!(placed >> i & 1) && b->ops[i].kind == TL_OK)
			all = false;
	if (all)
		return true;
	for (size_t i = 0; i < b->n; i++) {
		const tl_op *x = &b->ops[i];
		if (placed >> i & 1)
			continue;
		bool ready = true;
		for (size_t j = 0; j < b->n && ready; j++)
			if (!(placed >> j & 1) && j != i && b->ops[j].kind == TL_OK &&
			    b->ops[j].t_complete < x->t_invoke)
				ready = false;
		if (!ready)
			continue;
		if (x->fn == TL_READ_LIST) {
			if (x->nlist == len &&
			    (len == 0 || memcmp(x->list, list, len * sizeof(*list)) == 0) &&
			    brute_list_from(b, placed | 1u << i, list, len))
				return true;
		} else {
			int64_t next[8];
			if (len > 0)
				memcpy(next, list, len * sizeof(*list));
			next[len] = x->arg;
			if (brute_list_from(b, placed | 1u << i, next, len + 1))
				return true;
		}
	}
	return false;
}

/* Small list histories (up to 6 operations, appends of 1..4 each at most
 * once, reads of random short lists of them) by the list checks and by
 * brute force: the verdicts must agree. */
START_TEST(test_list_brute_force)
{
	uint64_t seed = tl_seed();
	gen g = {.rng = seed ^ 0x115e};
	int failing = 0;
	for (int round = 0; round < 4000; round++) {
		tl_op ops[6], kept[6];
		int64_t lists_[6][4];
		size_t n = 1 + rnd(&g, 6), nk = 0;
		int64_t next_elem = 1;
		tl_history *h = tl_history_new();
		for (size_t i = 0; i < n; i++) {
			tl_op *op = &ops[i];
			memset(op, 0, sizeof(*op));
			op->key = "l";
			op->proc = (int)i;
			op->t_invoke = rnd(&g, 20);
			op->t_complete = op->t_invoke + rnd(&g, 8);
			if (rnd(&g, 2) == 0 && next_elem <= 4) {
				op->fn = TL_APPEND;
				op->arg = next_elem++;
				uint64_t k = rnd(&g, 10);
				op->kind = k < 7 ? TL_OK : k < 9 ? TL_INFO : TL_FAIL;
				if (op->kind == TL_INFO)
					op->t_complete = TL_NO_TIME;
			} else {
				op->fn = TL_READ_LIST;
				op->kind = TL_OK;
				/* A random list of distinct elements 1..4, short. */
				int64_t pool[4] = {1, 2, 3, 4};
				for (int a = 3; a > 0; a--) {
					int b2 = (int)rnd(&g, (uint64_t)a + 1);
					int64_t t = pool[a];
					pool[a] = pool[b2];
					pool[b2] = t;
				}
				if (rnd(&g, 2) == 0) /* often in order: more passing cases */
					for (int a = 0; a < 4; a++)
						pool[a] = a + 1;
				op->nlist = (size_t)rnd(&g, 4);
				memcpy(lists_[i], pool, sizeof(pool));
				op->list = lists_[i];
			}
		}
		for (size_t i = 0; i < n; i++) {
			tl_history_add(h, &ops[i]);
			if (ops[i].kind != TL_FAIL)
				kept[nk++] = ops[i];
		}
		/* Brute force knows nothing of elements never appended or of
		 * failed appends; the checker rejects those, and so does it, as no
		 * order produces them. */
		brute b = {kept, nk};
		bool want = brute_list_from(&b, 0, NULL, 0);
		tl_check_result r;
		tl_verdict v = tl_check_lists(h, &r);
		if (v != (want ? TL_LINEARIZABLE : TL_NOT_LINEARIZABLE)) {
			tl_history_dump(h, stdout);
			ck_abort_msg("seed %llu round %d: list checks say %s (%s), brute force %s "
			             "(history above)",
			             (unsigned long long)seed, round, tl_verdict_name(v), r.msg,
			             want ? "linearizable" : "not");
		}
		failing += !want;
		tl_check_result_fini(&r);
		tl_history_free(h);
	}
	ck_assert_msg(failing > 400 && failing < 3600, "%d of 4000 failing: a poor mix", failing);
}
END_TEST

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* Check times of histories of 1k and 10k operations over 10 and 100 keys,
 * correct and then with a stale read injected (printed; bounded loosely so
 * that a slow machine passes). */
START_TEST(test_register_timing)
{
	uint64_t seed = tl_seed();
	static const struct {
		size_t n;
		int keys;
		uint64_t width; /* ns either side; operations start every 10 ns */
	} sizes[] = {{1000, 10, 50},   {1000, 100, 50},  {10000, 10, 50},
	             {10000, 100, 50}, {10000, 10, 100}, {10000, 100, 1000}};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		gen g = {.rng = seed ^ (s * 31337)};
		gen_registers(&g, sizes[s].n, sizes[s].keys, sizes[s].width);
		tl_history *h = gen_history(&g);
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		tl_check_result r;
		tl_verdict v = tl_check_registers(h, 0, &r);
		double ms = ms_since(&t0);
		ck_assert_msg(v == TL_LINEARIZABLE, "%s", r.msg);
		uint64_t states = r.states;
		tl_check_result_fini(&r);
		tl_history_free(h);

		char what[64];
		ck_assert(inject(&g, 1, what, sizeof(what)));
		h = gen_history(&g);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		tl_verdict bad = tl_check_registers(h, 0, &r);
		double bad_ms = ms_since(&t0);
		printf("timing: %zu ops, %d keys, ~%llu ops overlap each: %s in %.1f ms (%llu "
		       "states); with a %s: %s in %.1f ms (%llu states, witness %zu ops)\n",
		       g.n, sizes[s].keys, (unsigned long long)(4 * sizes[s].width / 10),
		       tl_verdict_name(v), ms, (unsigned long long)states, what,
		       tl_verdict_name(bad), bad_ms, (unsigned long long)r.states,
		       r.witness != NULL ? tl_history_len(r.witness) : 0);
		ck_assert_msg(bad == TL_NOT_LINEARIZABLE, "%s", r.msg);
		ck_assert(ms < 5000 && bad_ms < 5000);
		tl_check_result_fini(&r);
		tl_history_free(h);
		free(g.ops);
	}
}
END_TEST

static Suite *history_suite(void)
{
	return tl_suite("history", NULL, NULL, 60,
	                TL_TESTS(test_text_round_trip, test_text_errors, test_recorder_threads,
	                         test_register_basics, test_register_concurrency,
	                         test_register_info_and_fail, test_register_porcupine_examples,
	                         test_register_witness, test_register_budget, test_lists,
	                         test_register_random, test_register_brute_force, test_list_random,
	                         test_list_brute_force, test_register_timing));
}

TL_MAIN(history_suite)
