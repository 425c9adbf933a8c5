/*
 * The retry policy (common/retry.h): pure, no clock, no I/O.
 */
#include <check.h>
#include <stdint.h>

#include "common/errors.h"
#include "common/retry.h"
#include "tests/lib/testlib.h"

/* ------------------------------------------------------------------------ */
/* Retry policy                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_retry_follows_hints)
{
	uint32_t reps[3] = {4, 5, 6};
	sh_retry r;
	uint32_t delay;
	sh_retry_init(&r, reps, 3, 5, 10, 200);
	ck_assert_uint_eq(r.target, 5);
	/* A hint inside the group is followed at once. */
	ck_assert(sh_retry_next(&r, SH_OUT_NOT_LEADER, 6, 0, 10000, &delay));
	ck_assert_uint_eq(r.target, 6);
	ck_assert_uint_eq(delay, 0);
	/* No hint: the next replica in ring order, still without a wait. */
	ck_assert(sh_retry_next(&r, SH_OUT_NOT_LEADER, 0, 0, 10000, &delay));
	ck_assert_uint_eq(r.target, 4);
	ck_assert_uint_eq(delay, 0);
	/* A hint outside the group is ignored (next replica); a full round
	 * without an answer: back off. */
	ck_assert(sh_retry_next(&r, SH_OUT_NOT_LEADER, 9, 0, 10000, &delay));
	ck_assert_uint_eq(r.target, 5);
	ck_assert_uint_eq(delay, 10);
	/* Unknown first target: the first replica. */
	sh_retry_init(&r, reps, 3, 77, 10, 200);
	ck_assert_uint_eq(r.target, 4);
}
END_TEST

START_TEST(test_retry_backoff_and_deadline)
{
	uint32_t reps[3] = {1, 2, 3};
	sh_retry r;
	sh_retry_init(&r, reps, 3, 1, 10, 200);
	uint32_t expect[] = {10, 20, 40, 80, 160, 200, 200};
	int64_t now = 0;
	for (size_t round = 0; round < sizeof(expect) / sizeof(expect[0]); round++) {
		uint32_t delay = 99;
		for (int k = 0; k < 2; k++) {
			ck_assert(sh_retry_next(&r, SH_OUT_TIMEOUT, 0, now, 100000, &delay));
			ck_assert_uint_eq(delay, 0);
		}
		ck_assert(sh_retry_next(&r, SH_OUT_UNREACHABLE, 0, now, 100000, &delay));
		ck_assert_uint_eq(delay, expect[round]);
		now += delay;
	}
	ck_assert_uint_eq(r.attempts, 21);
	/* The deadline: no attempt whose wait would reach it. */
	sh_retry_init(&r, reps, 1, 1, 10, 200);
	uint32_t delay;
	ck_assert(!sh_retry_next(&r, SH_OUT_TIMEOUT, 0, 995, 1000, &delay));
	sh_retry_init(&r, reps, 1, 1, 10, 200);
	ck_assert(sh_retry_next(&r, SH_OUT_TIMEOUT, 0, 900, 1000, &delay));
	ck_assert_uint_eq(delay, 10);
	ck_assert_str_eq(sh_outcome_name(SH_OUT_NOT_LEADER), "not_leader");
}
END_TEST

START_TEST(test_retry_attempts_limit)
{
	/* A group of one (libshoal's socket): every failure waits, and a
	 * limit on attempts ends it before the deadline would. */
	uint32_t one = 1, delay;
	sh_retry r;
	sh_retry_init(&r, &one, 1, 1, 50, 1000);
	r.max_attempts = 3;
	ck_assert(sh_retry_next(&r, SH_OUT_UNAVAILABLE, 0, 0, 100000, &delay));
	ck_assert_uint_eq(delay, 50);
	ck_assert(sh_retry_next(&r, SH_OUT_UNAVAILABLE, 0, 0, 100000, &delay));
	ck_assert_uint_eq(delay, 100);
	ck_assert(!sh_retry_next(&r, SH_OUT_UNAVAILABLE, 0, 0, 100000, &delay));
	ck_assert_uint_eq(r.target, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Throttling: exponential backoff with full jitter                          */
/* ------------------------------------------------------------------------ */

START_TEST(test_retry_throttle_jitter)
{
	/* libshoal's defaults: 9 retries (10 attempts), 50 ms doubling to 20 s.
	 * Time is injected: the test walks the clock by each wait. */
	uint32_t one = 1;
	uint32_t caps[] = {50, 100, 200, 400, 800, 1600, 3200, 6400, 12800};
	double sum[9] = {0};
	const int runs = 2000;
	for (int seed = 0; seed < runs; seed++) {
		sh_retry r;
		sh_retry_init(&r, &one, 1, 1, 50, 1000);
		sh_retry_throttle_init(&r, 9, 50, 20000, (uint64_t)seed);
		int64_t now = 0;
		for (uint32_t k = 1; k <= 9; k++) {
			uint32_t delay;
			ck_assert_uint_eq(sh_retry_throttle_cap(&r, k), caps[k - 1]);
			ck_assert(sh_retry_throttled(&r, now, INT64_MAX, &delay));
			/* Within [0, cap]; the target stays. */
			ck_assert_uint_le(delay, caps[k - 1]);
			ck_assert_uint_eq(r.target, 1);
			sum[k - 1] += delay;
			now += delay;
		}
		/* The 10th throttled answer is the result: no more retries. */
		uint32_t delay = 7;
		ck_assert(!sh_retry_throttled(&r, now, INT64_MAX, &delay));
		ck_assert_uint_eq(delay, 0);
		ck_assert_uint_eq(r.throttled, 9);
		/* Failures are counted apart. */
		ck_assert_uint_eq(r.attempts, 0);
	}
	/* Jittered: the mean of each wait is about half its cap (full jitter),
	 * so the waits grow by about 2x a step, and they are not all equal. */
	for (int k = 0; k < 9; k++) {
		double mean = sum[k] / runs;
		ck_assert_msg(mean > 0.45 * caps[k] && mean < 0.55 * caps[k],
		              "wait %d: mean %.1f for cap %u", k + 1, mean, caps[k]);
		if (k > 0)
			ck_assert_msg(mean > 1.6 * (sum[k - 1] / runs), "wait %d does not grow",
			              k + 1);
	}
	/* Different seeds, different waits; the same seed, the same waits. */
	sh_retry a, b;
	sh_retry_init(&a, &one, 1, 1, 50, 1000);
	sh_retry_init(&b, &one, 1, 1, 50, 1000);
	sh_retry_throttle_init(&a, 9, 50, 20000, 42);
	sh_retry_throttle_init(&b, 9, 50, 20000, 42);
	int distinct = 0;
	uint32_t prev = UINT32_MAX;
	for (int k = 0; k < 9; k++) {
		uint32_t da, db;
		ck_assert(sh_retry_throttled(&a, 0, INT64_MAX, &da));
		ck_assert(sh_retry_throttled(&b, 0, INT64_MAX, &db));
		ck_assert_uint_eq(da, db);
		distinct += da != prev;
		prev = da;
	}
	ck_assert_int_gt(distinct, 5);
}
END_TEST

START_TEST(test_retry_throttle_limits)
{
	uint32_t one = 1, delay;
	sh_retry r;
	/* Off after sh_retry_init. */
	sh_retry_init(&r, &one, 1, 1, 50, 1000);
	ck_assert(!sh_retry_throttled(&r, 0, 100000, &delay));
	/* The cap stops at max_ms. */
	sh_retry_throttle_init(&r, 100, 50, 300, 1);
	ck_assert_uint_eq(sh_retry_throttle_cap(&r, 1), 50);
	ck_assert_uint_eq(sh_retry_throttle_cap(&r, 3), 200);
	ck_assert_uint_eq(sh_retry_throttle_cap(&r, 4), 300);
	ck_assert_uint_eq(sh_retry_throttle_cap(&r, 99), 300);
	for (int i = 0; i < 100; i++) {
		ck_assert(sh_retry_throttled(&r, 0, 100000, &delay));
		ck_assert_uint_le(delay, 300);
	}
	ck_assert(!sh_retry_throttled(&r, 0, 100000, &delay));
	/* The deadline: a wait that would reach it ends the retries (the
	 * throttled answer is the result).  Cap 1000 ms, 1 ms left: only a wait
	 * of 0 fits; over many seeds most give up. */
	int gave_up = 0;
	for (int seed = 0; seed < 200; seed++) {
		sh_retry_init(&r, &one, 1, 1, 50, 1000);
		sh_retry_throttle_init(&r, 5, 1000, 1000, (uint64_t)seed);
		bool again = sh_retry_throttled(&r, 999, 1000, &delay);
		ck_assert(again == (delay < 1));
		gave_up += !again;
	}
	ck_assert_int_gt(gave_up, 190);
	/* Which answers are throttling. */
	ck_assert(sh_retry_is_throttling(SHOAL_E_THROUGHPUT));
	ck_assert(sh_retry_is_throttling(SHOAL_E_REQUEST_LIMIT));
	ck_assert(sh_retry_is_throttling(SHOAL_E_TXN_IN_PROGRESS));
	ck_assert(!sh_retry_is_throttling(SHOAL_E_LIMIT_EXCEEDED));
	ck_assert(!sh_retry_is_throttling(SHOAL_E_UNAVAILABLE));
	ck_assert(!sh_retry_is_throttling(SHOAL_OK));
}
END_TEST

static Suite *retry_suite(void)
{
	Suite *s = suite_create("retry");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_retry_follows_hints);
	tcase_add_test(tc, test_retry_backoff_and_deadline);
	tcase_add_test(tc, test_retry_attempts_limit);
	tcase_add_test(tc, test_retry_throttle_jitter);
	tcase_add_test(tc, test_retry_throttle_limits);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(retry_suite)
