/*
 * testlib.h -- helpers shared by Shoal's tests: temporary directories, the
 * seed of randomised tests, and the main() of a Check test binary.
 */
#ifndef SHOAL_TESTLIB_H
#define SHOAL_TESTLIB_H

#include <check.h>
#include <stdint.h>

/* Creates a fresh directory under $TMPDIR (or /tmp) and returns its path
 * (static storage, valid until the next call from this process). */
const char *tl_tmpdir(const char *tag);
/* Removes a directory tree made by tl_tmpdir. */
void tl_rmtree(const char *path);

/* The seed for randomised tests: $SHOAL_SEED if set, else time-based.
 * Printed once ("seed: N (rerun with SHOAL_SEED=N)") on first use. */
uint64_t tl_seed(void);
/* A small fast PRNG (splitmix64) for tests. */
uint64_t tl_rand(uint64_t *state);

/* Runs one suite, prints Check's summary, returns the process exit code.
 * Inline so that tools linking testlib.c need not link Check. */
static inline int tl_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

#define TL_MAIN(suite_fn)                                                                         \
	int main(void)                                                                            \
	{                                                                                         \
		return tl_run_suite(suite_fn());                                                  \
	}

#endif
