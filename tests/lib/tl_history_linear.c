/*
 * tl_history_linear.c -- linearizability of registers (read, write, cas),
 * one key at a time (P-compositionality, Horn & Kroening 2015), by the
 * Wing & Gong search with Lowe's memoization, in Porcupine's iterative form:
 *
 *   The key's invocations and completions, sorted by time (an invocation
 *   before a completion at the same time: touching operations count as
 *   concurrent), form a doubly linked list.  Walking it from the front, an
 *   invocation whose operation is legal in the current register value is
 *   tentatively linearized: it is pushed on a stack with the value before
 *   it, it and its completion are lifted out of the list, and the walk
 *   restarts from the front.  Reaching a completion whose operation is not
 *   linearized yet means every operation that could go before it has been
 *   tried: pop the last choice, put it back in the list, and try the entry
 *   after it.  The search succeeds when every operation with a definite
 *   outcome is linearized, and fails when it must pop an empty stack.
 *
 *   Lowe's memo: a configuration is (set of linearized operations, register
 *   value); one reached before was (or is being) explored from there, so it
 *   is never pushed twice.  The set is a bitset, hashed incrementally
 *   (Zobrist: a random word per operation, xored in and out).  The number of
 *   configurations cached is the search's budget.
 *
 * Operations of unknown outcome (info, pending) have their completion at
 * +infinity: after every definite completion.  Placing one after all the
 * definite operations is the same as its never having happened, so "may not
 * have taken effect" needs no second branch; and the search stops as soon
 * as the definite operations are all placed.  Unknown reads constrain
 * nothing and are dropped; an unknown cas swaps if its expected value is
 * there and does nothing otherwise.
 *
 * Plain WGL is exponential in the operations that stay in the window, and
 * unknown ones stay forever; four reductions keep real histories cheap, each
 * exact (it never changes the verdict; test_history checks them against a
 * brute-force search on small histories with repeated values):
 *
 *   - Reads first.  A read (or failed condition) that is legal now is
 *     linearized now and no alternative is tried: it changes nothing, and
 *     whatever must precede it already has (its invocation is in the
 *     window).
 *   - Garbage.  A value no read returned and no cas expected behaves like
 *     any other such value; writes of them all write GARBAGE
 *     (collapse_unread), fewer distinct states.
 *   - Unknown garbage writes are interchangeable within a class (all
 *     writes; the cas of one expected value): they are used in invocation
 *     order, so which subset was used is not a dimension of the search.  An
 *     unknown operation that would change nothing is not tried.
 *   - Domination.  A finished (failed) configuration with the same value and
 *     the same definite operations, having used fewer unknown operations,
 *     can do all the current one can: the current one is pruned.  Each
 *     configuration's window is scanned for definite operations before
 *     unknown ones, so those without an unknown operation finish first.
 *
 * Memory: each configuration costs 16 + n / 8 bytes for a key of n
 * operations, plus 24 for the hash tables; the budget bounds the count.
 */
#include "tests/lib/tl_history.h"

#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"

/* One operation as the search sees it. */
typedef enum {
	L_READ,      /* definite: value must equal `a` */
	L_WRITE,     /* definite or unknown: value becomes `a` */
	L_CAS,       /* definite: value must equal `a`; becomes `b` */
	L_CAS_FALSE, /* definite: value must differ from `a`; unchanged */
	L_CAS_MAYBE, /* unknown: if value equals `a` it becomes `b` */
} lkind;

/* The value of every write nobody reads (collapse_unread). */
#define GARBAGE (TL_NIL + 1)

typedef struct {
	const tl_op *src;
	lkind kind;
	int64_t a, b;
	bool definite; /* has a completion time: must be linearized before it */
} lop;

typedef struct {
	uint64_t t;
	uint32_t op;
	bool ret;
} event;

typedef struct node {
	struct node *prev, *next, *match;
	uint32_t op;
	bool call;
} node;

static bool step(const lop *o, int64_t v, int64_t *out)
{
	switch (o->kind) {
	case L_READ:
		*out = v;
		return v == o->a;
	case L_WRITE:
		*out = o->a;
		return true;
	case L_CAS:
		*out = o->b;
		return v == o->a;
	case L_CAS_FALSE:
		*out = v;
		return v != o->a;
	case L_CAS_MAYBE:
		*out = v == o->a ? o->b : v;
		return true;
	}
	return false;
}

/* ------------------------------------------------------------------------
 * The memo: configurations (bitset, value), records in one growing array
 * (value, done, bitset), in two hash tables.  `same` is keyed by the whole
 * bitset and the value: has this exact configuration been seen?  `done` is
 * keyed by the definite operations of the bitset and the value, and holds
 * the finished configurations (explored, failed): is there one that
 * dominates this one?  Its chains are scanned only DOM_SCAN deep (most
 * recent first), which bounds the cost and only loses some pruning. */

#define DOM_SCAN 16

typedef struct {
	uint32_t *heads; /* nb heads, index + 1 */
	uint32_t *next;  /* per record, index + 1 (0 ends) */
	uint64_t *hash;  /* per record */
	size_t nb, n;    /* records linked */
} table;

typedef struct {
	size_t words;            /* bitset words */
	size_t rec;              /* words per record */
	const uint64_t *unknown; /* mask of the unknown operations */
	uint64_t *recs;          /* count records */
	size_t count, cap;
	table same, done;
} memo;

enum { R_VALUE, R_DONE, R_BITS };

static void table_init(table *t)
{
	memset(t, 0, sizeof(*t));
	t->nb = 1024;
	t->heads = calloc(t->nb, sizeof(*t->heads));
	tl_assert(t->heads != NULL);
}

static void table_fini(table *t)
{
	free(t->heads);
	free(t->next);
	free(t->hash);
}

static void table_grow(table *t, size_t cap)
{
	uint32_t *next = realloc(t->next, cap * sizeof(*next));
	uint64_t *hash = realloc(t->hash, cap * sizeof(*hash));
	tl_assert_msg(next != NULL && hash != NULL, "out of memory (%zu states)", cap);
	t->next = next;
	t->hash = hash;
}

/* Links record i (allocated, its `next` UINT32_MAX: unlinked) under hash
 * h; records 0 .. count - 1 exist. */
static void table_link(table *t, size_t i, uint64_t h, size_t count)
{
	if (t->n >= t->nb) { /* load factor 1: double the heads */
		free(t->heads);
		t->nb *= 2;
		t->heads = calloc(t->nb, sizeof(*t->heads));
		tl_assert(t->heads != NULL);
		for (size_t j = 0; j < count; j++) {
			if (t->next[j] == UINT32_MAX)
				continue; /* not linked (yet) */
			size_t b = t->hash[j] & (t->nb - 1);
			t->next[j] = t->heads[b];
			t->heads[b] = (uint32_t)(j + 1);
		}
	}
	t->hash[i] = h;
	size_t b = h & (t->nb - 1);
	t->next[i] = t->heads[b];
	t->heads[b] = (uint32_t)(i + 1);
	t->n++;
}

static void memo_init(memo *m, size_t words, const uint64_t *unknown)
{
	memset(m, 0, sizeof(*m));
	m->words = words;
	m->rec = R_BITS + words;
	m->unknown = unknown;
	table_init(&m->same);
	table_init(&m->done);
}

static void memo_fini(memo *m)
{
	free(m->recs);
	table_fini(&m->same);
	table_fini(&m->done);
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t with_value(uint64_t h, int64_t value)
{
	return h ^ mix((uint64_t)value + 0x9e3779b97f4a7c15ULL);
}

/* Whether finished record r dominates configuration `bits`: the same
 * definite operations (and value: the caller's), and only some of the
 * unknown operations `bits` used.  Anything possible from `bits` is
 * possible from there, as unknown operations may be left out; it failed. */
static bool dominates(const memo *m, const uint64_t *r, const uint64_t *bits)
{
	for (size_t w = 0; w < m->words; w++) {
		uint64_t a = r[R_BITS + w], b = bits[w], u = m->unknown[w];
		if (((a ^ b) & ~u) != 0 || (a & u & ~b) != 0)
			return false;
	}
	return true;
}

/* Adds (bits, value) unless it was seen or is dominated: its index + 1, or
 * 0.  hall hashes every operation of bits, hdef the definite ones. */
static size_t memo_add(memo *m, const uint64_t *bits, uint64_t hall, uint64_t hdef, int64_t value)
{
	uint64_t hs = with_value(hall, value), hd = with_value(hdef, value);
	for (uint32_t i = m->same.heads[hs & (m->same.nb - 1)]; i != 0; i = m->same.next[i - 1]) {
		const uint64_t *r = m->recs + (size_t)(i - 1) * m->rec;
		if (m->same.hash[i - 1] == hs && (int64_t)r[R_VALUE] == value &&
		    memcmp(r + R_BITS, bits, m->words * sizeof(*bits)) == 0)
			return 0;
	}
	int depth = 0;
	for (uint32_t i = m->done.heads[hd & (m->done.nb - 1)]; i != 0 && depth < DOM_SCAN;
	     i = m->done.next[i - 1]) {
		const uint64_t *r = m->recs + (size_t)(i - 1) * m->rec;
		if (m->done.hash[i - 1] != hd || (int64_t)r[R_VALUE] != value)
			continue;
		depth++;
		if (dominates(m, r, bits))
			return 0;
	}
	if (m->count == m->cap) {
		size_t cap = m->cap == 0 ? 1024 : m->cap * 2;
		uint64_t *recs = realloc(m->recs, cap * m->rec * sizeof(*recs));
		tl_assert_msg(recs != NULL, "out of memory (%zu states)", cap);
		m->recs = recs;
		table_grow(&m->same, cap);
		table_grow(&m->done, cap);
		m->cap = cap;
	}
	size_t i = m->count++;
	uint64_t *r = m->recs + i * m->rec;
	r[R_VALUE] = (uint64_t)value;
	r[R_DONE] = hd; /* its key in `done`, once finished */
	memcpy(r + R_BITS, bits, m->words * sizeof(*bits));
	m->same.next[i] = UINT32_MAX;
	m->done.next[i] = UINT32_MAX; /* not linked in `done` until finished */
	table_link(&m->same, i, hs, m->count);
	return i + 1;
}

/* Configuration rec (index + 1) is finished: it failed. */
static void memo_done(memo *m, size_t rec)
{
	size_t i = rec - 1;
	table_link(&m->done, i, m->recs[i * m->rec + R_DONE], m->count);
}

/* ------------------------------------------------------------------------
 * The search over one key's operations, on the prefix of its first `cut`
 * events (every event: cut == nev).  Completions past the cut become
 * unknown outcomes. */

static void lift(node *call)
{
	node *ret = call->match;
	call->prev->next = call->next;
	call->next->prev = call->prev;
	ret->prev->next = ret->next;
	if (ret->next != NULL)
		ret->next->prev = ret->prev;
}

static void unlift(node *call)
{
	node *ret = call->match;
	ret->prev->next = ret;
	if (ret->next != NULL)
		ret->next->prev = ret;
	call->prev->next = call;
	call->next->prev = call;
}

typedef struct {
	node *call;
	int64_t value;
	size_t rec;  /* the memo record of the configuration it led to, + 1 */
	bool forced; /* a read that went first: no alternative to try */
	bool second; /* chosen in the second pass (unknown operations) */
} frame;

static tl_verdict search(const lop *ops0, size_t n, const event *ev, size_t nev, size_t cut,
                         uint64_t max_states, uint64_t *states)
{
	/* Which operations are in the prefix and which complete in it. */
	lop *ops = malloc((n + 1) * sizeof(*ops));
	node *nodes = calloc(2 * n + 1, sizeof(*nodes));
	uint64_t *zob = malloc((n + 1) * sizeof(*zob));
	size_t words = (n + 63) / 64 + 1;
	uint64_t *bits = calloc(words, sizeof(*bits));
	frame *stack = malloc((n + 1) * sizeof(*stack));
	tl_assert(ops != NULL && nodes != NULL && zob != NULL && bits != NULL && stack != NULL);
	memcpy(ops, ops0, n * sizeof(*ops));
	for (size_t i = 0; i < n; i++) {
		zob[i] = mix(i * 0x9e3779b97f4a7c15ULL + 12345);
		ops[i].definite = false;
	}
	for (size_t e = 0; e < cut; e++)
		if (ev[e].ret)
			ops[ev[e].op].definite = true;

	/* The list: events of the prefix in order, then the completions at
	 * +infinity (unknown outcomes, or past the cut). */
	node head = {0};
	node *tail = &head;
	size_t required = 0;
	bool *in = calloc(n + 1, sizeof(*in));
	tl_assert(in != NULL);
	for (size_t e = 0; e < cut; e++) {
		uint32_t o = ev[e].op;
		if (!ops[o].definite && ops[o].kind == L_READ)
			continue; /* pending at the cut: says nothing */
		node *x = &nodes[2 * o + (ev[e].ret ? 1 : 0)];
		x->op = o;
		x->call = !ev[e].ret;
		if (x->call) {
			in[o] = true;
			x->match = &nodes[2 * o + 1];
		} else {
			required++;
		}
		x->prev = tail;
		tail->next = x;
		tail = x;
	}
	for (size_t o = 0; o < n; o++) {
		if (!in[o] || ops[o].definite)
			continue;
		/* Pending at the cut (the witness shows it `invoke`): a cas may have
		 * swapped, whatever it answered later. */
		tl_assert(ops[o].kind != L_READ);
		if (ops[o].kind == L_CAS || ops[o].kind == L_CAS_FALSE)
			ops[o].kind = L_CAS_MAYBE;
		node *x = &nodes[2 * o + 1];
		x->op = (uint32_t)o;
		x->call = false;
		x->prev = tail;
		tail->next = x;
		tail = x;
	}
	tail->next = NULL;

	/* Unknown operations that write garbage (see collapse_unread) are
	 * interchangeable within a class -- unknown writes; unknown cas of one
	 * expected value -- so any linearization can use the ones it uses in
	 * invocation order: one is tried only once the previous of its class
	 * is linearized.  Without this, every subset of them would be a state
	 * of the search (they never leave its window: no completion time). */
	uint32_t *prev = malloc((n + 1) * sizeof(*prev));
	size_t *order = malloc((n + 1) * sizeof(*order)), nord = 0;
	tl_assert(prev != NULL && order != NULL);
	for (size_t o = 0; o < n; o++)
		prev[o] = UINT32_MAX;
	for (size_t e = 0; e < cut; e++) {
		uint32_t o = ev[e].op;
		if (ev[e].ret || !in[o] || ops[o].definite)
			continue;
		if ((ops[o].kind == L_WRITE && ops[o].a == GARBAGE) ||
		    (ops[o].kind == L_CAS_MAYBE && ops[o].b == GARBAGE))
			order[nord++] = o;
	}
	for (size_t i = 0; i < nord; i++) { /* nord is small: quadratic is fine */
		for (size_t j = i; j-- > 0;) {
			const lop *x = &ops[order[i]], *y = &ops[order[j]];
			if (x->kind == y->kind && (x->kind == L_WRITE || x->a == y->a)) {
				prev[order[i]] = (uint32_t)order[j];
				break;
			}
		}
	}
	free(order);
	free(in);

	/* Unknown operations: left out of the hash, dominated when unused. */
	uint64_t *unknown = calloc(words, sizeof(*unknown));
	tl_assert(unknown != NULL);
	for (size_t o = 0; o < n; o++)
		if (!ops[o].definite)
			unknown[o / 64] |= 1ULL << (o % 64);
	memo m;
	memo_init(&m, words, unknown);
	uint64_t hbits = 0, hall = 0; /* hashes: definite operations, all */
	int64_t value = TL_NIL;
	size_t sp = 0;
	tl_verdict verdict = TL_LINEARIZABLE;
	/* Each configuration's window is scanned twice: definite operations
	 * first, then unknown ones, so that configurations without an unknown
	 * operation tend to be finished before those with it, which they then
	 * dominate. */
	node *entry = head.next;
	bool second = false;
	bool fresh = true; /* a new configuration: look for a read first */
	while (required > 0) {
		node *pick = NULL;
		bool forced = false;
		int64_t next = 0;
		/* A read (or a failed condition) that can go now goes now, with no
		 * alternative tried: it changes nothing, and every operation that
		 * must precede it already has (its invocation is in the window),
		 * so if any linearization from here exists, one with it first does. */
		for (node *x = fresh ? head.next : NULL; x != NULL && x->call; x = x->next) {
			const lop *y = &ops[x->op];
			if ((y->kind == L_READ || y->kind == L_CAS_FALSE) &&
			    step(y, value, &next)) {
				pick = x;
				forced = true;
				break;
			}
		}
		fresh = false;
		while (pick == NULL) {
			if (!entry->call) { /* end of the window */
				if (second)
					break;
				second = true;
				entry = head.next;
				continue;
			}
			uint32_t o = entry->op;
			bool blocked = ops[o].definite == second ||
			               (prev[o] != UINT32_MAX &&
			                (bits[prev[o] / 64] & (1ULL << (prev[o] % 64))) == 0);
			/* An unknown operation that changes nothing here is as good as
			 * left out. */
			if (!blocked && step(&ops[o], value, &next) &&
			    (ops[o].definite || next != value))
				pick = entry;
			else
				entry = entry->next;
		}
		if (pick != NULL) {
			uint32_t o = pick->op;
			uint64_t h = ops[o].definite ? hbits ^ zob[o] : hbits;
			bits[o / 64] |= 1ULL << (o % 64);
			size_t rec = memo_add(&m, bits, hall ^ zob[o], h, next);
			if (rec != 0) {
				if (m.count > max_states) {
					verdict = TL_UNKNOWN;
					break;
				}
				hbits = h;
				hall ^= zob[o];
				stack[sp++] = (frame){pick, value, rec, forced, second && !forced};
				value = next;
				lift(pick);
				if (ops[o].definite)
					required--;
				entry = head.next;
				second = false;
				fresh = true;
				continue;
			}
			/* Explored before, from elsewhere, and failed. */
			bits[o / 64] &= ~(1ULL << (o % 64));
			if (!forced) {
				entry = pick->next;
				continue;
			}
		}
		/* Nothing left to try here (a definite completion not linearized,
		 * or a forced read that failed): the configuration is finished;
		 * undo the last choice that had alternatives, and try the entry
		 * after it. */
		frame f = {0};
		bool exhausted = false;
		for (;;) {
			if (sp == 0) {
				exhausted = true;
				break;
			}
			f = stack[--sp];
			memo_done(&m, f.rec);
			uint32_t o = f.call->op;
			bits[o / 64] &= ~(1ULL << (o % 64));
			hall ^= zob[o];
			if (ops[o].definite)
				hbits ^= zob[o];
			value = f.value;
			if (ops[o].definite)
				required++;
			unlift(f.call);
			if (!f.forced)
				break;
		}
		if (exhausted) {
			verdict = TL_NOT_LINEARIZABLE;
			break;
		}
		entry = f.call->next;
		second = f.second;
	}
	*states += m.count;
	memo_fini(&m);
	free(unknown);
	free(prev);
	free(stack);
	free(bits);
	free(zob);
	free(nodes);
	free(ops);
	return verdict;
}

/* ------------------------------------------------------------------------
 * The driver: group by key, translate, search, and on a failure look for
 * the shortest failing prefix. */

static int cmp_by_key(const void *a, const void *b)
{
	const tl_op *x = *(const tl_op *const *)a, *y = *(const tl_op *const *)b;
	int c = strcmp(x->key, y->key);
	if (c != 0)
		return c;
	return x < y ? -1 : x > y;
}

static int cmp_event(const void *a, const void *b)
{
	const event *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->ret != y->ret)
		return x->ret ? 1 : -1; /* invocations first */
	return x->op < y->op ? -1 : x->op > y->op;
}

static bool is_register(const tl_op *op)
{
	return op->fn == TL_READ || op->fn == TL_WRITE || op->fn == TL_CAS;
}

/* Translates one operation; false if it says nothing (fail, unknown read,
 * unknown outcome of a cas whose condition was false). */
static bool translate(const tl_op *op, lop *out)
{
	memset(out, 0, sizeof(*out));
	out->src = op;
	bool known = op->kind == TL_OK;
	if (op->kind == TL_FAIL)
		return false;
	switch (op->fn) {
	case TL_READ:
		out->kind = L_READ;
		out->a = op->value;
		return known;
	case TL_WRITE:
		out->kind = L_WRITE;
		out->a = op->arg;
		return true;
	case TL_CAS:
		out->a = op->arg;
		out->b = op->arg2;
		out->kind = !known ? L_CAS_MAYBE : op->value != 0 ? L_CAS : L_CAS_FALSE;
		return true;
	default:
		return false;
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * A value that no operation looks at -- no read returned it, no cas
 * expected it -- behaves like any other such value: in it, reads and
 * successful cas are impossible, conditions that failed hold, and writes
 * replace it.  Writes of such values all write GARBAGE instead, so the memo
 * sees one state where there were many, and unknown ones become
 * interchangeable (see search).
 */
static void collapse_unread(lop *ops, size_t n)
{
	int64_t *seen = malloc((n + 1) * sizeof(*seen));
	tl_assert(seen != NULL);
	size_t ns = 0;
	for (size_t i = 0; i < n; i++)
		if (ops[i].kind != L_WRITE)
			seen[ns++] = ops[i].a; /* read's value, cas's expected value */
	qsort(seen, ns, sizeof(*seen), cmp_i64);
	bool clash = bsearch(&(int64_t){GARBAGE}, seen, ns, sizeof(*seen), cmp_i64) != NULL;
	for (size_t i = 0; i < n && !clash; i++) {
		int64_t *v = ops[i].kind == L_WRITE                               ? &ops[i].a
		             : ops[i].kind == L_CAS || ops[i].kind == L_CAS_MAYBE ? &ops[i].b
		                                                                  : NULL;
		if (v != NULL && *v != GARBAGE &&
		    bsearch(v, seen, ns, sizeof(*seen), cmp_i64) == NULL)
			*v = GARBAGE;
	}
	free(seen);
}

/* The witness: operations invoked within the prefix of `cut` events, in
 * invocation order, those completing after it shown pending. */
static tl_history *witness(const lop *ops, const event *ev, size_t cut)
{
	tl_history *w = tl_history_new();
	size_t n = 0;
	for (size_t e = 0; e < cut; e++)
		if (ev[e].op + 1 > n)
			n = ev[e].op + 1;
	bool *done = calloc(n + 1, sizeof(*done));
	tl_assert(done != NULL);
	for (size_t e = 0; e < cut; e++)
		if (ev[e].ret)
			done[ev[e].op] = true;
	for (size_t e = 0; e < cut; e++) {
		if (ev[e].ret)
			continue;
		tl_op op = *ops[ev[e].op].src;
		if (!done[ev[e].op] && op.kind == TL_OK) {
			op.kind = TL_INVOKE;
			op.t_complete = TL_NO_TIME;
			op.list = NULL;
			op.nlist = 0;
		}
		tl_history_add(w, &op);
	}
	free(done);
	return w;
}

static void check_key(const tl_op *const *group, size_t len, uint64_t max_states,
                      tl_check_result *r)
{
	lop *ops = malloc((len + 1) * sizeof(*ops));
	event *ev = malloc((2 * len + 1) * sizeof(*ev));
	tl_assert(ops != NULL && ev != NULL);
	size_t n = 0, nev = 0;
	for (size_t i = 0; i < len; i++) {
		if (!translate(group[i], &ops[n]))
			continue;
		ev[nev++] = (event){group[i]->t_invoke, (uint32_t)n, false};
		if (group[i]->kind == TL_OK)
			ev[nev++] = (event){group[i]->t_complete, (uint32_t)n, true};
		n++;
	}
	qsort(ev, nev, sizeof(*ev), cmp_event);
	collapse_unread(ops, n);
	r->keys++;
	tl_verdict v = search(ops, n, ev, nev, nev, max_states, &r->states);
	if (v == TL_UNKNOWN) {
		if (r->keys_unknown++ == 0 && r->keys_failed == 0)
			snprintf(r->key, sizeof(r->key), "%s", group[0]->key);
	} else if (v == TL_NOT_LINEARIZABLE && r->keys_failed++ == 0) {
		/* Shortest failing prefix: it ends at a completion (an invocation
		 * adds an operation that may be left out).  hi: failing. */
		size_t *rets = malloc((nev + 1) * sizeof(*rets)), nr = 0;
		tl_assert(rets != NULL);
		for (size_t e = 0; e < nev; e++)
			if (ev[e].ret)
				rets[nr++] = e;
		size_t lo = 0, hi = nr; /* prefix up to rets[hi - 1] fails; nev if hi == nr */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2; /* try the prefix through rets[mid] */
			if (search(ops, n, ev, nev, rets[mid] + 1, max_states, &r->states) ==
			    TL_NOT_LINEARIZABLE)
				hi = mid;
			else
				lo = mid + 1;
		}
		size_t cut = hi < nr ? rets[hi] + 1 : nev;
		snprintf(r->key, sizeof(r->key), "%s", group[0]->key);
		tl_history_free(r->witness);
		r->witness = witness(ops, ev, cut);
		char line[512] = "";
		if (hi < nr)
			tl_history_format_op(ops[ev[rets[hi]].op].src, line, sizeof(line));
		snprintf(r->msg, sizeof(r->msg),
		         "key %s: not linearizable; the first %zu of its %zu operations, up to "
		         "the completion of [%s], already are not",
		         group[0]->key, tl_history_len(r->witness), n, line);
		free(rets);
	}
	free(ev);
	free(ops);
}

tl_verdict tl_check_registers(const tl_history *h, uint64_t max_states, tl_check_result *r)
{
	memset(r, 0, sizeof(*r));
	if (max_states == 0)
		max_states = TL_LINEAR_MAX_STATES;
	size_t total = tl_history_len(h), len = 0;
	const tl_op **sorted = malloc((total + 1) * sizeof(*sorted));
	tl_assert(sorted != NULL);
	for (size_t i = 0; i < total; i++)
		if (is_register(tl_history_op(h, i)))
			sorted[len++] = tl_history_op(h, i);
	qsort(sorted, len, sizeof(*sorted), cmp_by_key);
	for (size_t i = 0; i < len;) {
		size_t j = i + 1;
		while (j < len && strcmp(sorted[j]->key, sorted[i]->key) == 0)
			j++;
		check_key(sorted + i, j - i, max_states, r);
		i = j;
	}
	free(sorted);
	if (r->keys_failed > 0)
		r->verdict = TL_NOT_LINEARIZABLE;
	else if (r->keys_unknown > 0)
		r->verdict = TL_UNKNOWN;
	else
		r->verdict = TL_LINEARIZABLE;
	if (r->verdict == TL_UNKNOWN)
		snprintf(r->msg, sizeof(r->msg),
		         "%zu of %zu keys ran out of the budget of %llu states (first: %s)",
		         r->keys_unknown, r->keys, (unsigned long long)max_states, r->key);
	else if (r->verdict == TL_NOT_LINEARIZABLE && r->keys_failed > 1) {
		size_t l = strlen(r->msg);
		snprintf(r->msg + l, sizeof(r->msg) - l, " (%zu keys failed)", r->keys_failed);
	}
	return r->verdict;
}
