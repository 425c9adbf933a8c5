/*
 * testlib.h -- helpers shared by Shoal's tests: temporary directories, the
 * seed of randomised tests, assertions for the helpers in tests/lib, and the
 * suite and main() of a Check test binary.  The other helpers: tl_values.h
 * (values), tl_store.h (the storage-engine fixture), tl_wire.h (hand-encoded
 * protobuf), tl_cluster.h (a real local cluster).
 */
#ifndef SHOAL_TESTLIB_H
#define SHOAL_TESTLIB_H

#include <stdbool.h>
#include <check.h>
#include <stdint.h>

/* Creates a fresh directory $TMPDIR/shoal-<tag>-XXXXXX (or under /tmp) and
 * returns its path (static storage, valid until the next call from this
 * process).  It is removed when the process that made it exits
 * (SHOAL_KEEP_TMP=1 keeps it for a post-mortem). */
const char *tl_tmpdir(const char *tag);
/* The first of n consecutive TCP ports (n <= 200) on 127.0.0.1 that can be
 * listened on now, in 20000..31999: below the ephemeral range (32768+), where
 * a port may be the local end of some connection, and chosen from the pid so
 * that test processes running side by side (Check forks one per test) start
 * in different places; ports other processes hold or claimed are skipped.
 * The ports are claimed for this process (tl_ports_claim) until it exits. */
int tl_free_ports(int n);
/* Whether every port of base .. base + n - 1 can be listened on now. */
bool tl_ports_free(int base, int n);
/*
 * Claims ports base .. base + n - 1 for this process, or returns false if
 * another process holds a claim on any of them.  A port that is free now may
 * still be taken before whoever chose it listens (a cluster's processes start
 * seconds after the choice), so test processes running side by side --
 * tests/run-tests.sh runs two at a time, and two checkouts may run `make
 * test` at once -- claim what they choose: an flock(2) per 100 ports on
 * /tmp/shoal-test-ports/<port / 100> (tests/integration/http/run.sh takes
 * the same locks with flock(1)).  The descriptors are close-on-exec and
 * the locks last until tl_ports_unclaim or the exit of this process and of
 * the children it forked (Check's test cases share their parent's claims).
 * A block this process claimed already counts as taken.
 */
bool tl_ports_claim(int base, int n);
void tl_ports_unclaim(int base, int n);
/* Keeps a directory made by tl_tmpdir past the process's exit. */
void tl_tmpdir_keep(const char *path);
/* Removes a directory tree made by tl_tmpdir. */
void tl_rmtree(const char *path);

/* The seed for randomised tests: $SHOAL_SEED if set, else time-based.
 * Printed once ("seed: N (rerun with SHOAL_SEED=N)") on first use. */
uint64_t tl_seed(void);
/* A small fast PRNG (splitmix64) for tests. */
uint64_t tl_rand(uint64_t *state);

/*
 * Assertions for the helpers in tests/lib.  Those files are linked into tools
 * too, which do not link Check, so they fail through tl_fail: in a test binary
 * (tl_run_suite installs the hook) it fails the running test like
 * ck_assert_msg, with the file and line given; elsewhere it prints the message
 * on stderr and aborts.
 */
void tl_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
extern void (*tl_fail_hook)(const char *file, int line, const char *msg);

#define tl_assert_msg(cond, ...) ((cond) ? (void)0 : tl_fail(__FILE__, __LINE__, __VA_ARGS__))
#define tl_assert(cond)          tl_assert_msg(cond, "Assertion '%s' failed", #cond)

static inline void tl_fail_check(const char *file, int line, const char *msg)
{
	_ck_assert_failed(file, line, "Failure", "%s", msg);
}

/*
 * One suite `name` of one test case "core" that runs `tests` (a list made
 * with TL_TESTS) with the checked fixture setup/teardown (either may be NULL)
 * and a timeout in seconds (0: Check's default, CK_DEFAULT_TIMEOUT).
 */
#define TL_TESTS(...) ((const TTest *[]){__VA_ARGS__, NULL})

static inline Suite *tl_suite(const char *name, void (*setup)(void), void (*teardown)(void),
                              double timeout, const TTest **tests)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create("core");
	if (setup != NULL || teardown != NULL)
		tcase_add_checked_fixture(tc, setup, teardown);
	if (timeout > 0)
		tcase_set_timeout(tc, timeout);
	for (const TTest **t = tests; *t != NULL; t++)
		tcase_add_test(tc, *t);
	suite_add_tcase(s, tc);
	return s;
}

/* Runs one suite, prints Check's summary, returns the process exit code.
 * Inline so that tools linking testlib.c need not link Check. */
static inline int tl_run_suite(Suite *s)
{
	tl_fail_hook = tl_fail_check;
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

#define TL_MAIN(suite_fn)                                                                          \
	int main(void)                                                                             \
	{                                                                                          \
		return tl_run_suite(suite_fn());                                                   \
	}

#endif
