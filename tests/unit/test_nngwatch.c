/*
 * The reaper watch and the stop deadline (common/nngwatch.h): nng's real
 * reaper probed, a probe that never ends reported stuck (through the probe
 * seam: nng 1.5.2's lost send cannot be made to happen on demand), and a
 * deadline that fires.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/nngwatch.h"
#include "tests/lib/testlib.h"

/* Polls cond() every 10 ms until it holds or `ms` pass. */
static bool poll_until(bool (*cond)(void), int64_t ms)
{
	int64_t end = sh_now_ms() + ms;
	while (!cond()) {
		if (sh_now_ms() > end)
			return false;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	return true;
}

static atomic_uint stuck_calls;
static atomic_uint stuck_waited;

static void on_stuck(void *arg, unsigned waited_ms)
{
	(void)arg;
	atomic_store(&stuck_waited, waited_ms);
	atomic_fetch_add(&stuck_calls, 1);
}

START_TEST(test_probe_completes)
{
	char errmsg[SH_ERRMSG_SIZE];
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(sh_watch_probe(NULL, errmsg), SHOAL_OK);
}
END_TEST

static bool five_probes(void)
{
	uint64_t n;
	unsigned longest;
	sh_watch_stats(&n, &longest);
	return n >= 5;
}

START_TEST(test_healthy_reaper_is_not_stuck)
{
	char errmsg[SH_ERRMSG_SIZE];
	atomic_store(&stuck_calls, 0);
	sh_watch_conf c = {.period_ms = 20, .stuck_ms = 5000, .stuck = on_stuck};
	ck_assert_int_eq(sh_watch_start(&c, errmsg), SHOAL_OK);
	/* One watch per process. */
	ck_assert_int_ne(sh_watch_start(&c, errmsg), SHOAL_OK);
	sh_watch_conf none = {.period_ms = 20};
	sh_watch_stop();
	ck_assert_int_ne(sh_watch_start(&none, errmsg), SHOAL_OK); /* no stuck callback */
	ck_assert_int_eq(sh_watch_start(&c, errmsg), SHOAL_OK);
	ck_assert(poll_until(five_probes, 20000));
	sh_watch_stop();
	sh_watch_stop(); /* idempotent */
	ck_assert_uint_eq(atomic_load(&stuck_calls), 0);
	uint64_t n;
	unsigned longest;
	sh_watch_stats(&n, &longest);
	ck_assert_uint_lt(longest, 5000);
}
END_TEST

/* A probe that waits until released: a reaper that never reaps. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool held, released;

static int held_probe(void *arg, char *errmsg)
{
	(void)arg;
	(void)errmsg;
	pthread_mutex_lock(&hold_mu);
	held = true;
	while (!released)
		pthread_cond_wait(&hold_cv, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
	return SHOAL_OK;
}

static bool stuck_reported(void)
{
	return atomic_load(&stuck_calls) > 0;
}

START_TEST(test_stuck_probe_is_reported)
{
	char errmsg[SH_ERRMSG_SIZE];
	atomic_store(&stuck_calls, 0);
	int64_t t0 = sh_now_ms();
	sh_watch_conf c = {
	    .period_ms = 20, .stuck_ms = 600, .stuck = on_stuck, .probe = held_probe};
	ck_assert_int_eq(sh_watch_start(&c, errmsg), SHOAL_OK);
	ck_assert(poll_until(stuck_reported, 20000));
	/* Reported once, and not before the probe had waited stuck_ms. */
	ck_assert_uint_ge(atomic_load(&stuck_waited), 600);
	ck_assert_int_ge(sh_now_ms() - t0, 600);
	pthread_mutex_lock(&hold_mu);
	ck_assert(held);
	released = true;
	pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_mu);
	sh_watch_stop();
	ck_assert_uint_eq(atomic_load(&stuck_calls), 1);
}
END_TEST

static atomic_bool late_called;
static void on_late(void *arg)
{
	(void)arg;
	atomic_store(&late_called, true);
}
static bool was_late(void)
{
	return atomic_load(&late_called);
}

START_TEST(test_stop_deadline_fires)
{
	int64_t t0 = sh_now_ms();
	sh_watch_deadline(300, on_late, NULL);
	sh_watch_deadline(1, on_late, NULL); /* ignored: one per process */
	ck_assert(poll_until(was_late, 20000));
	ck_assert_int_ge(sh_now_ms() - t0, 300);
}
END_TEST

static Suite *nngwatch_suite(void)
{
	Suite *s = suite_create("nngwatch");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_probe_completes);
	tcase_add_test(tc, test_healthy_reaper_is_not_stuck);
	tcase_add_test(tc, test_stuck_probe_is_reported);
	tcase_add_test(tc, test_stop_deadline_fires);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(nngwatch_suite)
