/*
 * tl_history_list.c -- the append-only list checks (the list is documented
 * in tl_history.h), per key, each in O(n log n):
 *
 *   1. a read holds no element twice (sort a copy);
 *   2. every element read was appended, by an append not failed and
 *      invoked before the read completed (binary search by element);
 *   3. every read is a prefix of the longest read L;
 *   4. reads grow in real time: a read that began after another completed
 *      is at least as long (sweep reads by invocation against reads by
 *      completion, keeping the longest completed so far);
 *   5. nothing acknowledged is lost: given 3, a read of length k holds
 *      exactly L[0..k), so an ok append that completed before a read began
 *      must sit in L below the read's length (the same sweep, keeping the
 *      highest position in L, absent = infinity, of completed appends);
 *   6. L orders appends as real time does: an acknowledged append that
 *      completed before the append of an element of L began is in L, before
 *      that element (sweep L's elements by invocation against acknowledged
 *      appends by completion, keeping the highest position, absent =
 *      infinity).
 */
#include "tests/lib/tl_history.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"

typedef struct {
	const tl_op *const *ops; /* the key's list operations */
	size_t n;
	const tl_op **appends; /* sorted by element */
	size_t nappends;
	const tl_op **reads; /* ok read-lists */
	size_t nreads;
	const tl_op *longest;
	tl_check_result *r;
} keyctx;

static int cmp_by_key(const void *a, const void *b)
{
	const tl_op *x = *(const tl_op *const *)a, *y = *(const tl_op *const *)b;
	int c = strcmp(x->key, y->key);
	if (c != 0)
		return c;
	return x < y ? -1 : x > y;
}

static int cmp_by_elem(const void *a, const void *b)
{
	const tl_op *x = *(const tl_op *const *)a, *y = *(const tl_op *const *)b;
	return x->arg < y->arg ? -1 : x->arg > y->arg;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_by_invoke(const void *a, const void *b)
{
	const tl_op *x = *(const tl_op *const *)a, *y = *(const tl_op *const *)b;
	return x->t_invoke < y->t_invoke ? -1 : x->t_invoke > y->t_invoke;
}

static int cmp_by_complete(const void *a, const void *b)
{
	const tl_op *x = *(const tl_op *const *)a, *y = *(const tl_op *const *)b;
	return x->t_complete < y->t_complete ? -1 : x->t_complete > y->t_complete;
}

/* The index in k->appends of elem's append, SIZE_MAX if none. */
static size_t find_index(const keyctx *k, int64_t elem)
{
	size_t lo = 0, hi = k->nappends;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->appends[mid]->arg < elem)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->nappends && k->appends[lo]->arg == elem ? lo : SIZE_MAX;
}

static const tl_op *find_append(const keyctx *k, int64_t elem)
{
	size_t i = find_index(k, elem);
	return i == SIZE_MAX ? NULL : k->appends[i];
}

/* Records the violation: message and the operations involved (NULLs
 * skipped).  Only the first violation of a run is kept. */
static void violation(keyctx *k, const tl_op *a, const tl_op *b, const tl_op *c, const tl_op *d,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#include <stdarg.h>
static void violation(keyctx *k, const tl_op *a, const tl_op *b, const tl_op *c, const tl_op *d,
                      const char *fmt, ...)
{
	tl_check_result *r = k->r;
	if (r->keys_failed++ > 0)
		return;
	snprintf(r->key, sizeof(r->key), "%s", k->ops[0]->key);
	int len = snprintf(r->msg, sizeof(r->msg), "key %s: ", k->ops[0]->key);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg + len, sizeof(r->msg) - (size_t)len, fmt, ap);
	va_end(ap);
	r->witness = tl_history_new();
	const tl_op *ops[] = {a, b, c, d};
	for (int i = 0; i < 4; i++) {
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup = dup || ops[j] == ops[i];
		if (ops[i] != NULL && !dup)
			tl_history_add(r->witness, ops[i]);
	}
}

/* 1 and 2. */
static bool check_elements(keyctx *k)
{
	for (size_t i = 0; i < k->nreads; i++) {
		const tl_op *rd = k->reads[i];
		int64_t *copy = malloc((rd->nlist + 1) * sizeof(*copy));
		tl_assert(copy != NULL);
		if (rd->nlist > 0)
			memcpy(copy, rd->list, rd->nlist * sizeof(*copy));
		qsort(copy, rd->nlist, sizeof(*copy), cmp_i64);
		for (size_t j = 1; j < rd->nlist; j++) {
			if (copy[j] == copy[j - 1]) {
				violation(
				    k, rd, find_append(k, copy[j]), NULL, NULL,
				    "element %lld appears twice in one read (duplicated append)",
				    (long long)copy[j]);
				free(copy);
				return false;
			}
		}
		free(copy);
		for (size_t j = 0; j < rd->nlist; j++) {
			const tl_op *a = find_append(k, rd->list[j]);
			if (a == NULL) {
				violation(k, rd, NULL, NULL, NULL,
				          "element %lld was never appended",
				          (long long)rd->list[j]);
				return false;
			}
			if (a->kind == TL_FAIL) {
				violation(k, a, rd, NULL, NULL,
				          "element %lld is read but its append failed (certainly "
				          "did not happen)",
				          (long long)rd->list[j]);
				return false;
			}
			if (a->t_invoke > rd->t_complete) {
				violation(k, rd, a, NULL, NULL,
				          "element %lld is read before its append was invoked",
				          (long long)rd->list[j]);
				return false;
			}
		}
	}
	return true;
}

/* 3. */
static bool check_prefixes(keyctx *k)
{
	const tl_op *l = k->longest;
	for (size_t i = 0; i < k->nreads; i++) {
		const tl_op *rd = k->reads[i];
		for (size_t j = 0; j < rd->nlist; j++) {
			if (rd->list[j] != l->list[j]) {
				violation(
				    k, rd, l, find_append(k, rd->list[j]),
				    find_append(k, l->list[j]),
				    "reads disagree on the order of appends: position %zu holds "
				    "%lld in one and %lld in the longest read",
				    j, (long long)rd->list[j], (long long)l->list[j]);
				return false;
			}
		}
	}
	return true;
}

/* Position of each append's element in the longest read (SIZE_MAX: absent),
 * indexed like k->appends. */
static size_t *positions(const keyctx *k)
{
	size_t *pos = malloc((k->nappends + 1) * sizeof(*pos));
	tl_assert(pos != NULL);
	for (size_t i = 0; i < k->nappends; i++)
		pos[i] = SIZE_MAX;
	for (size_t j = 0; k->longest != NULL && j < k->longest->nlist; j++)
		pos[find_index(k, k->longest->list[j])] = j; /* present: check_elements */
	return pos;
}

/* 4 and 5: one sweep of reads by invocation against completed reads and
 * completed ok appends. */
static bool check_realtime(keyctx *k, const size_t *pos)
{
	size_t nr = k->nreads;
	const tl_op **by_inv = malloc((nr + 1) * sizeof(*by_inv));
	const tl_op **by_done = malloc((nr + 1) * sizeof(*by_done));
	const tl_op **oks = malloc((k->nappends + 1) * sizeof(*oks));
	size_t *okpos = malloc((k->nappends + 1) * sizeof(*okpos));
	tl_assert(by_inv != NULL && by_done != NULL && oks != NULL && okpos != NULL);
	memcpy(by_inv, k->reads, nr * sizeof(*by_inv));
	memcpy(by_done, k->reads, nr * sizeof(*by_done));
	qsort(by_inv, nr, sizeof(*by_inv), cmp_by_invoke);
	qsort(by_done, nr, sizeof(*by_done), cmp_by_complete);
	size_t nok = 0;
	for (size_t i = 0; i < k->nappends; i++)
		if (k->appends[i]->kind == TL_OK)
			oks[nok++] = k->appends[i];
	qsort(oks, nok, sizeof(*oks), cmp_by_complete);
	for (size_t i = 0; i < nok; i++)
		okpos[i] = pos[find_index(k, oks[i]->arg)];
	bool ok = true;
	size_t d = 0, a = 0;
	const tl_op *longest_done = NULL, *highest = NULL;
	size_t highest_pos = 0;
	for (size_t i = 0; i < nr && ok; i++) {
		const tl_op *rd = by_inv[i];
		for (; d < nr && by_done[d]->t_complete < rd->t_invoke; d++)
			if (longest_done == NULL || by_done[d]->nlist > longest_done->nlist)
				longest_done = by_done[d];
		for (; a < nok && oks[a]->t_complete < rd->t_invoke; a++)
			if (highest == NULL || okpos[a] > highest_pos) {
				highest = oks[a];
				highest_pos = okpos[a];
			}
		if (longest_done != NULL && longest_done->nlist > rd->nlist) {
			violation(k, longest_done, rd, NULL, NULL,
			          "a read of %zu elements began after a read of %zu had completed "
			          "(stale read)",
			          rd->nlist, longest_done->nlist);
			ok = false;
		} else if (highest != NULL && highest_pos >= rd->nlist) {
			violation(k, highest, rd, NULL, NULL,
			          "element %lld was acknowledged before a read began and the read "
			          "lacks it (%s)",
			          (long long)highest->arg,
			          highest_pos == SIZE_MAX ? "lost: no read holds it"
			                                  : "a later read has it");
			ok = false;
		}
	}
	free(okpos);
	free(oks);
	free(by_done);
	free(by_inv);
	return ok;
}

/* 6: for each element of L by its append's invocation, the acknowledged
 * appends completed before that invocation, highest position first. */
static bool check_order(keyctx *k, const size_t *pos)
{
	const tl_op *l = k->longest;
	size_t n = l->nlist, nok = 0;
	const tl_op **by_inv = malloc((n + 1) * sizeof(*by_inv));
	const tl_op **oks = malloc((k->nappends + 1) * sizeof(*oks));
	tl_assert(by_inv != NULL && oks != NULL);
	for (size_t j = 0; j < n; j++)
		by_inv[j] = find_append(k, l->list[j]);
	qsort(by_inv, n, sizeof(*by_inv), cmp_by_invoke);
	for (size_t i = 0; i < k->nappends; i++)
		if (k->appends[i]->kind == TL_OK)
			oks[nok++] = k->appends[i];
	qsort(oks, nok, sizeof(*oks), cmp_by_complete);
	bool ok = true;
	const tl_op *highest = NULL;
	size_t highest_pos = 0, a = 0;
	for (size_t j = 0; j < n && ok; j++) {
		const tl_op *e = by_inv[j];
		for (; a < nok && oks[a]->t_complete < e->t_invoke; a++) {
			size_t p = pos[find_index(k, oks[a]->arg)];
			if (highest == NULL || p > highest_pos) {
				highest = oks[a];
				highest_pos = p;
			}
		}
		size_t pe = pos[find_index(k, e->arg)];
		if (highest != NULL && highest_pos > pe) {
			violation(k, highest, e, l, NULL,
			          "element %lld is in the list %s %lld, whose append began after "
			          "its own was acknowledged",
			          (long long)highest->arg,
			          highest_pos == SIZE_MAX ? "(lost) but not" : "after",
			          (long long)e->arg);
			ok = false;
		}
	}
	free(oks);
	free(by_inv);
	return ok;
}

static void check_key(const tl_op *const *ops, size_t n, tl_check_result *r)
{
	keyctx k = {.ops = ops, .n = n, .r = r};
	k.appends = malloc((n + 1) * sizeof(*k.appends));
	k.reads = malloc((n + 1) * sizeof(*k.reads));
	tl_assert(k.appends != NULL && k.reads != NULL);
	for (size_t i = 0; i < n; i++) {
		if (ops[i]->fn == TL_APPEND)
			k.appends[k.nappends++] = ops[i];
		else if (ops[i]->kind == TL_OK) {
			k.reads[k.nreads++] = ops[i];
			if (k.longest == NULL || ops[i]->nlist > k.longest->nlist)
				k.longest = ops[i];
		}
	}
	qsort(k.appends, k.nappends, sizeof(*k.appends), cmp_by_elem);
	r->keys++;
	bool ok = true;
	for (size_t i = 1; i < k.nappends && ok; i++) {
		if (k.appends[i]->arg == k.appends[i - 1]->arg) {
			violation(&k, k.appends[i - 1], k.appends[i], NULL, NULL,
			          "element %lld appended twice (the workload must append unique "
			          "elements)",
			          (long long)k.appends[i]->arg);
			ok = false;
		}
	}
	ok = ok && check_elements(&k) && check_prefixes(&k);
	if (ok && k.nreads > 0) {
		size_t *pos = positions(&k);
		ok = check_realtime(&k, pos) && check_order(&k, pos);
		free(pos);
	}
	free(k.reads);
	free(k.appends);
}

tl_verdict tl_check_lists(const tl_history *h, tl_check_result *r)
{
	memset(r, 0, sizeof(*r));
	size_t total = tl_history_len(h), len = 0;
	const tl_op **sorted = malloc((total + 1) * sizeof(*sorted));
	tl_assert(sorted != NULL);
	for (size_t i = 0; i < total; i++) {
		const tl_op *op = tl_history_op(h, i);
		if (op->fn == TL_APPEND || op->fn == TL_READ_LIST)
			sorted[len++] = op;
	}
	qsort(sorted, len, sizeof(*sorted), cmp_by_key);
	for (size_t i = 0; i < len;) {
		size_t j = i + 1;
		while (j < len && strcmp(sorted[j]->key, sorted[i]->key) == 0)
			j++;
		check_key(sorted + i, j - i, r);
		i = j;
	}
	free(sorted);
	r->verdict = r->keys_failed > 0 ? TL_NOT_LINEARIZABLE : TL_LINEARIZABLE;
	if (r->keys_failed > 1) {
		size_t l = strlen(r->msg);
		snprintf(r->msg + l, sizeof(r->msg) - l, " (%zu keys failed)", r->keys_failed);
	}
	return r->verdict;
}
