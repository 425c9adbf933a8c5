/*
 * tl_history.h -- histories of concurrent operations and their checkers, for
 * Jepsen-style tests (issue 17): a recorder cheap enough for libshoal's
 * completion callbacks, a text form (one operation per line) to save, print
 * and re-check a history offline, a linearizability checker for registers
 * with read / write / compare-and-set, and a checker for append-only lists.
 *
 * Operations (Jepsen's vocabulary).  Each operation has a process, a
 * function, a key, its arguments, an outcome and two monotonic times in ns:
 *
 *   kind    meaning                                         complete time
 *   invoke  still pending (recorded, never completed)       none (+inf)
 *   ok      happened, with the result recorded              t_complete
 *   fail    certainly did not happen: ignored by checkers   t_complete
 *   info    unknown: may have happened at any time after    none (+inf)
 *           its invocation, or not at all (a timeout)
 *
 *   fn         args              result (ok only)
 *   read       -                 value (TL_NIL: the item is absent)
 *   write      value             -
 *   cas        expected new      1: swapped; 0: the condition was false (a
 *                                ConditionalCheckFailed: definite, no effect).
 *                                expected TL_NIL: "attribute_not_exists".
 *   append     element           -
 *   read-list  -                 the whole list, in order
 *
 * A register maps DynamoDB's PutItem (write), ConsistentRead GetItem (read)
 * and a conditional PutItem / UpdateItem on a version attribute (cas).  The
 * list workload appends unique elements to a list attribute (list_append)
 * and reads it whole.  Values are int64; every key starts absent (TL_NIL).
 *
 * Text form, one operation per line, fields separated by spaces:
 *
 *   <t_invoke> <t_complete|-> <proc> <kind> <fn> <key> [args...] [= result]
 *
 *   100 250 3 ok write k1 5
 *   110 300 4 ok read k1 = 5
 *   120 - 2 info cas k1 5 6
 *   130 400 1 ok cas k1 nil 6 = 0
 *   140 500 1 ok append l1 17
 *   150 600 2 ok read-list l1 = [1,5,17]
 *
 * Values are decimal or `nil`; keys are printed with '%', spaces, tabs and
 * newlines percent-encoded ("%20"); lines starting with '#' and blank lines
 * are skipped on load.
 *
 * Threads: tl_history_invoke, tl_history_complete*, tl_history_add and
 * tl_history_len may be called from any thread at once (one mutex; an
 * append-only array).  Everything else reads or frees the history and must
 * not run concurrently with a writer.
 */
#ifndef SHOAL_TL_HISTORY_H
#define SHOAL_TL_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TL_NIL     INT64_MIN /* an absent value: the key's initial state */
#define TL_NO_TIME UINT64_MAX

typedef enum { TL_INVOKE, TL_OK, TL_FAIL, TL_INFO } tl_kind;
typedef enum { TL_READ, TL_WRITE, TL_CAS, TL_APPEND, TL_READ_LIST } tl_fn;

typedef struct tl_op {
	uint64_t t_invoke, t_complete; /* monotonic ns; t_complete TL_NO_TIME if pending/info */
	int proc;
	tl_kind kind;
	tl_fn fn;
	char *key;     /* owned by the history */
	int64_t arg;   /* write: value; cas: expected; append: element */
	int64_t arg2;  /* cas: new value */
	int64_t value; /* ok read: value read; ok cas: 1 swapped, 0 condition false */
	int64_t *list; /* ok read-list: elements (owned by the history), nlist of them */
	size_t nlist;
} tl_op;

typedef struct tl_history tl_history;

tl_history *tl_history_new(void);
void tl_history_free(tl_history *h);

/* Monotonic clock in ns (CLOCK_MONOTONIC), the recorder's time base. */
uint64_t tl_history_now(void);

/*
 * Recording.  tl_history_invoke stamps the time, copies `key` and returns the
 * operation's id (its index) for the matching completion; an operation never
 * completed stays `invoke` (pending), which checkers treat as `info`.
 * tl_history_complete stamps the completion: kind TL_OK, TL_FAIL or TL_INFO
 * (info records no completion time); `value` is the result of an ok read
 * or cas, ignored otherwise.  tl_history_complete_list is the ok read-list's
 * (copies n elements).  Completing an id twice is a programming error.
 */
size_t tl_history_invoke(tl_history *h, int proc, tl_fn fn, const char *key, int64_t arg,
                         int64_t arg2);
void tl_history_complete(tl_history *h, size_t id, tl_kind kind, int64_t value);
void tl_history_complete_list(tl_history *h, size_t id, tl_kind kind, const int64_t *list,
                              size_t n);
/* Adds a whole operation with its own times (tests, loading): key and list
 * are copied.  Returns its id. */
size_t tl_history_add(tl_history *h, const tl_op *op);

size_t tl_history_len(const tl_history *h);
/* Operation `id`; valid until the next write to the history. */
const tl_op *tl_history_op(const tl_history *h, size_t id);

/* Writes the history (every operation, in id order) in the text form. */
void tl_history_dump(const tl_history *h, FILE *f);
/* One operation's line (no newline) into buf; returns what snprintf does. */
int tl_history_format_op(const tl_op *op, char *buf, size_t size);
/* Reads a history in the text form.  NULL on a malformed line, with the
 * line number and reason in err (err_size bytes). */
tl_history *tl_history_load(FILE *f, char *err, size_t err_size);
/* The same, from and to files; dump_file returns 0 or -1 (errno set). */
int tl_history_dump_file(const tl_history *h, const char *path);
tl_history *tl_history_load_file(const char *path, char *err, size_t err_size);

/*
 * Checking.  Verdicts:
 *   TL_LINEARIZABLE      every key passed
 *   TL_NOT_LINEARIZABLE  a key failed: `key`, `msg` and a witness history
 *   TL_UNKNOWN           no key failed, but some key's search ran out of
 *                        budget (`key` names the first such key)
 * For lists "linearizable" means "passed every list check".
 */
typedef enum { TL_LINEARIZABLE, TL_NOT_LINEARIZABLE, TL_UNKNOWN } tl_verdict;

const char *tl_verdict_name(tl_verdict v);

typedef struct tl_check_result {
	tl_verdict verdict;
	char key[256];       /* the failing (or first unknown) key */
	char msg[1024];      /* what failed, for humans */
	tl_history *witness; /* owned by the result: the failing sub-history, or NULL */
	size_t keys;         /* keys checked */
	size_t keys_failed;  /* keys that failed */
	size_t keys_unknown; /* keys whose search ran out of budget */
	uint64_t states;     /* search states explored (registers), all keys */
} tl_check_result;

/* Frees the witness; the result may be reused. */
void tl_check_result_fini(tl_check_result *r);

/* The default budget: search states (configurations) per search. */
#define TL_LINEAR_MAX_STATES 1000000

/*
 * Linearizability of the register operations (read, write, cas) per key
 * (P-compositionality: a history is linearizable iff each key's sub-history
 * is), by Wing & Gong's search with Lowe's memoization of (set of linearized
 * operations, register value), plus exact reductions described in
 * tl_history_linear.c.  Fail operations are ignored; info and pending ones
 * may take effect at any point after their invocation or not at all; info
 * and pending reads say nothing and are dropped.  Touching intervals (one
 * completes at the time the other is invoked) count as concurrent.
 *
 * Cost: a linearizable history takes about one search state per operation.
 * Proving a violation explores every partial linearization before it, about
 * (operations of the key before the violation) x 2^(operations of that key
 * overlapping each other), so keep keys' histories short (as Jepsen's
 * independent keys do: a few hundred operations per key).
 *
 * Each search stops after max_states configurations (0: the default,
 * TL_LINEAR_MAX_STATES; each costs about 40 + n / 8 bytes for a key of n
 * operations) and its key counts as unknown.  On a violation the witness
 * is the shortest prefix of that key's sub-history (in event order:
 * invocations and completions by time) that is already not linearizable;
 * operations pending at the cut are shown as `invoke`, fail operations and
 * unknown reads are left out.  Finding it re-runs the search on O(log n)
 * prefixes; a prefix whose search runs out of budget is treated as
 * passing, so the witness is then a failing prefix, not always the
 * shortest.  r->states counts the states of every search.  Returns
 * r->verdict.
 */
tl_verdict tl_check_registers(const tl_history *h, uint64_t max_states, tl_check_result *r);

/*
 * The append-only lists (append, read-list) per key, appended elements being
 * unique per key.  Every ok read-list must:
 *   - hold no element twice,
 *   - hold only elements of append operations that are ok, info or pending
 *     and were invoked before the read completed (not a failed append, not
 *     one from the future),
 *   - be a prefix of the longest read of its key (one total order),
 *   - be at least as long as every read that completed before it began,
 *   - hold every ok append that completed before the read began (lost),
 * and the longest read must order appends as real time does (an ok append
 * that completed before the append of one of its elements began is in it,
 * before that element).  The first violation found
 * is reported with the operations involved as the witness.  Returns
 * r->verdict (never TL_UNKNOWN).
 */
tl_verdict tl_check_lists(const tl_history *h, tl_check_result *r);

#endif
