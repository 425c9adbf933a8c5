/*
 * The retry policy (common/retry.h): pure, no clock, no I/O.
 */
#include <check.h>

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

static Suite *retry_suite(void)
{
	Suite *s = suite_create("retry");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_retry_follows_hints);
	tcase_add_test(tc, test_retry_backoff_and_deadline);
	tcase_add_test(tc, test_retry_attempts_limit);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(retry_suite)
