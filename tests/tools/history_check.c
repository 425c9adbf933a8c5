/*
 * history_check -- re-checks saved histories offline (the text form of
 * tests/lib/tl_history.h): linearizability of the register operations per
 * key, and the append-only list checks.
 *
 *   history_check [--max-states N] FILE...
 *
 * Prints one line per file ("FILE: registers LINEARIZABLE, lists
 * LINEARIZABLE, N ops, T ms") and, on a violation, what failed and the
 * failing sub-history.  Exit status: 0 every file passed, 1 a violation,
 * 3 a search ran out of budget (and nothing failed), 2 a file could not be
 * read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/tl_history.h"

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

static void report(const char *what, const tl_check_result *r)
{
	if (r->verdict == TL_LINEARIZABLE)
		return;
	printf("  %s: %s\n", what, r->msg);
	if (r->witness != NULL) {
		printf("  failing sub-history:\n");
		tl_history_dump(r->witness, stdout);
	}
}

int main(int argc, char **argv)
{
	unsigned long long max_states = 0;
	int status = 0, i = 1;
	if (i + 1 < argc && strcmp(argv[i], "--max-states") == 0) {
		max_states = strtoull(argv[i + 1], NULL, 10);
		i += 2;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: history_check [--max-states N] FILE...\n");
		return 2;
	}
	for (; i < argc; i++) {
		char err[256];
		tl_history *h = tl_history_load_file(argv[i], err, sizeof(err));
		if (h == NULL) {
			fprintf(stderr, "%s\n", err);
			status = 2;
			continue;
		}
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		tl_check_result reg, lst;
		tl_check_registers(h, max_states, &reg);
		tl_check_lists(h, &lst);
		printf("%s: registers %s (%zu keys, %llu states), lists %s (%zu keys), %zu ops, "
		       "%.1f ms\n",
		       argv[i], tl_verdict_name(reg.verdict), reg.keys,
		       (unsigned long long)reg.states, tl_verdict_name(lst.verdict), lst.keys,
		       tl_history_len(h), ms_since(&t0));
		report("registers", &reg);
		report("lists", &lst);
		if (reg.verdict == TL_NOT_LINEARIZABLE || lst.verdict == TL_NOT_LINEARIZABLE)
			status = status == 2 ? 2 : 1;
		else if (reg.verdict == TL_UNKNOWN && status == 0)
			status = 3;
		tl_check_result_fini(&reg);
		tl_check_result_fini(&lst);
		tl_history_free(h);
	}
	return status;
}
