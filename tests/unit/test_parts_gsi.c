/* Moves of the GSI space, the storage side (storage/parts_gsi.c, parts.h "The
 * GSI space"): a range of index partitions moves from group T to group U
 * while two base groups keep writing and shipping their deltas through a
 * model of the shipper (per target in seq order, one batch at a time, a
 * refused range held back until the map names another group, a source
 * leader's restart re-sending everything after its acknowledged prefix).
 * The copy, the move log, the fence pinning the watermarks, the target
 * refusing until its own, the marks handed over, the purge -- and an abort
 * after the fence -- must end with every group's GSI entries equal to those
 * of a reference group that applied every delta with no move at all (seed
 * printed; SHOAL_SEED=n replays it).  Also: ingest's refusals. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "storage/catalog.h"
#include "storage/codec.h"
#include "storage/engine.h"
#include "storage/index.h"
#include "storage/index_int.h"
#include "storage/parts.h"
#include "storage/parts_int.h"
#include "storage/snapshot.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_store.h"

#define TID   7
#define LABEL 1700000000123ll

enum { B1, B2, T, U, REF, N_ENVS };
static const uint32_t group_id[N_ENVS] = {1, 2, 3, 4, 5};
static st_env *env[N_ENVS];
static uint16_t gsi_id; /* byG's id (the engine assigns it) */

/* The GSI space: [0, R_LO - 1] stays at T, [R_LO, R_HI] moves T -> U,
 * [R_HI + 1, 2^64-1] is U's from the start. */
#define R_LO 0x5555555555555556ull
#define R_HI 0xaaaaaaaaaaaaaaaaull

/* Table "Tab" (id TID) with an LSI byL (PK, L) and a GSI byG (G). */
static void create_table(st_env *e)
{
	st_key_attr attrs[4] = {{"PK", ST_S}, {"SK", ST_S}, {"L", ST_N}, {"G", ST_S}};
	st_index_def ix[2] = {{.name = "byL",
	                       .local = true,
	                       .key = {{"PK", ST_S}, {"L", ST_N}},
	                       .projection = ST_PROJ_ALL,
	                       .write_shards = 1,
	                       .status = ST_INDEX_ACTIVE},
	                      {.name = "byG",
	                       .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                       .projection = ST_PROJ_ALL,
	                       .write_shards = 1,
	                       .status = ST_INDEX_ACTIVE}};
	st_table_def d = {.name = "Tab",
	                  .id = TID,
	                  .key = {{"PK", ST_S}, {"SK", ST_S}},
	                  .attrs = attrs,
	                  .n_attrs = 4,
	                  .indexes = ix,
	                  .n_indexes = 2,
	                  .created_ms = LABEL};
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_table_create(t, &d, tl_msg) == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
}

static void setup(void)
{
	tl_arena_setup();
	for (int i = 0; i < N_ENVS; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "parts-gsi-%d", i);
		ck_assert_int_eq(st_env_open(tl_tmpdir(tag), NULL, &env[i], tl_msg), SHOAL_OK);
		create_table(env[i]);
	}
}

static void teardown(void)
{
	for (int i = 0; i < N_ENVS; i++) {
		st_env_close(env[i]);
		env[i] = NULL;
	}
	tl_arena_teardown();
}

static int finish(st_txn *t, int rc)
{
	if (rc == SHOAL_OK)
		ck_assert_msg(st_txn_commit(t, tl_msg) == SHOAL_OK, "%s", tl_msg);
	else
		st_txn_abort(t);
	return rc;
}

static void put(st_env *e, const char *pk, const char *sk, long l, const char *g)
{
	st_value *it = tl_map("PK", tl_s(pk), "SK", tl_s(sk), "L", tl_ni(l), NULL);
	if (g != NULL)
		st_map_set(&tl_arena, it, "G", 1, tl_s(g));
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	st_txn_set_time(t, LABEL);
	st_put_req r = {.table = "Tab", .item = it};
	st_write_result res;
	ck_assert_msg(finish(t, st_put(t, &r, &tl_arena, &res, tl_msg)) == SHOAL_OK, "%s", tl_msg);
}

static void del(st_env *e, const char *pk, const char *sk)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(e, &t, tl_msg), SHOAL_OK);
	st_txn_set_time(t, LABEL);
	st_delete_req r = {.table = "Tab", .key = tl_map("PK", tl_s(pk), "SK", tl_s(sk), NULL)};
	st_write_result res;
	ck_assert_msg(finish(t, st_delete(t, &r, &tl_arena, &res, tl_msg)) == SHOAL_OK, "%s",
	              tl_msg);
}

/* --- the model of the shipper --------------------------------------------- */

typedef struct range {
	uint64_t lo, hi;
} range;

typedef struct source {
	int e;                 /* B1 or B2 */
	sh_arena a;            /* the deltas */
	st_delta *d;           /* every delta read from the outbox, seq order */
	bool *acked;           /* acknowledged by the group it was routed to */
	size_t n, cap;         /* deltas read */
	range held[N_ENVS][8]; /* ranges a target refused: not sent there */
	int n_held[N_ENVS];
	size_t ref_next; /* deltas applied at REF so far */
} source;

static source src[2];
static bool flipped; /* the map routes [R_LO, R_HI] to U */
static uint64_t rng;
static int refusals[N_ENVS], redeliveries;

static int route(uint64_t h)
{
	if (h > R_HI)
		return U;
	if (h >= R_LO)
		return flipped ? U : T;
	return T;
}

static void read_outbox(source *s)
{
	uint64_t after = s->n > 0 ? s->d[s->n - 1].seq : 0;
	for (;;) {
		st_delta *d;
		uint32_t n;
		ck_assert_msg(st_outbox_read(env[s->e], after, 1000, SIZE_MAX, &s->a, &d, &n,
		                             tl_msg) == SHOAL_OK,
		              "%s", tl_msg);
		if (n == 0)
			return;
		if (s->n + n > s->cap) {
			size_t cap = 2 * (s->n + n);
			s->d = sh_realloc(s->d, cap * sizeof(*s->d));
			s->acked = sh_realloc(s->acked, cap * sizeof(*s->acked));
			ck_assert(s->d != NULL && s->acked != NULL);
			s->cap = cap;
		}
		memcpy(s->d + s->n, d, n * sizeof(*d));
		memset(s->acked + s->n, 0, n * sizeof(*s->acked));
		s->n += n;
		after = d[n - 1].seq;
	}
}

static bool held_at(const source *s, int g, uint64_t h)
{
	for (int i = 0; i < s->n_held[g]; i++)
		if (s->held[g][i].lo <= h && h <= s->held[g][i].hi)
			return true;
	return false;
}

/* One batch of up to max deltas from s to group g: those routed there, not
 * acknowledged, not held, in seq order.  Returns how many were acknowledged. */
static size_t ship(source *s, int g, size_t max)
{
	read_outbox(s);
	st_delta *b = sh_arena_alloc(&tl_arena, (max > 0 ? max : 1) * sizeof(*b));
	size_t *idx = sh_arena_alloc(&tl_arena, (max > 0 ? max : 1) * sizeof(*idx));
	ck_assert(b != NULL && idx != NULL);
	size_t n = 0;
	for (size_t i = 0; i < s->n && n < max; i++) {
		if (s->acked[i] || route(s->d[i].hash) != g || held_at(s, g, s->d[i].hash))
			continue;
		idx[n] = i;
		b[n++] = s->d[i];
	}
	if (n == 0)
		return 0;
	/* The leader's check before proposing says what the apply does. */
	st_index_refusal pre = {0};
	int pre_rc = st_index_apply_check(env[g], b, (uint32_t)n, &pre, tl_msg);
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[g], &t, tl_msg), SHOAL_OK);
	st_index_refusal ref = {0};
	int rc = st_index_apply(t, group_id[s->e], b, (uint32_t)n, &ref, tl_msg);
	ck_assert_int_eq(pre_rc, rc == SHOAL_E_WRONG_GROUP ? SHOAL_E_WRONG_GROUP : SHOAL_OK);
	ck_assert(pre.lo == ref.lo && pre.hi == ref.hi && pre.state == ref.state);
	if (rc == SHOAL_E_WRONG_GROUP) {
		st_txn_abort(t);
		ck_assert(ref.state == ST_PART_FENCED || ref.state == ST_PART_AWAY);
		ck_assert_int_lt(s->n_held[g], 8);
		s->held[g][s->n_held[g]++] = (range){ref.lo, ref.hi};
		refusals[g]++;
		return 0;
	}
	ck_assert_msg(rc == SHOAL_OK, "apply at %d: %s", g, tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	for (size_t i = 0; i < n; i++)
		s->acked[idx[i]] = true;
	return n;
}

/* The reference group applies every delta of s, in order, no move. */
static void ship_ref(source *s)
{
	read_outbox(s);
	if (s->ref_next == s->n)
		return;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[REF], &t, tl_msg), SHOAL_OK);
	ck_assert_msg(st_index_apply(t, group_id[s->e], s->d + s->ref_next,
	                             (uint32_t)(s->n - s->ref_next), NULL, tl_msg) == SHOAL_OK,
	              "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
	s->ref_next = s->n;
}

/* A new leader of s: what it knows acknowledged is the prefix of deltas all
 * acknowledged; it sends everything after it again and knows no refusal. */
static void new_leader(source *s)
{
	size_t p = 0;
	while (p < s->n && s->acked[p])
		p++;
	for (size_t i = p; i < s->n; i++) {
		redeliveries += s->acked[i];
		s->acked[i] = false;
	}
	memset(s->n_held, 0, sizeof(s->n_held));
}

/* The map changed: a source drops what it held for groups no longer
 * routed to (the real shipper: until its map names another group). */
static void forget_held(int g)
{
	for (int i = 0; i < 2; i++)
		src[i].n_held[g] = 0;
}

/* Random writes at the base groups, and random shipping. */
static void work(int rounds)
{
	for (int r = 0; r < rounds; r++) {
		source *s = &src[tl_rand(&rng) % 2];
		char pk[16], g[16];
		snprintf(pk, sizeof(pk), "%c%02d", s->e == B1 ? 'a' : 'b',
		         (int)(tl_rand(&rng) % 100));
		snprintf(g, sizeof(g), "g%03d", (int)(tl_rand(&rng) % 300));
		uint64_t op = tl_rand(&rng) % 10;
		if (op < 6)
			put(env[s->e], pk, "s", (long)r, g);
		else if (op < 8)
			put(env[s->e], pk, "s", (long)r, NULL); /* the entry goes */
		else
			del(env[s->e], pk, "s");
		if (tl_rand(&rng) % 3 == 0)
			ship(s, tl_rand(&rng) % 2 ? T : U, 1 + tl_rand(&rng) % 12);
		if (tl_rand(&rng) % 40 == 0)
			new_leader(s);
	}
}

/* Ships until every delta is acknowledged (held ones excepted). */
static void drain(void)
{
	for (int round = 0; round < 1000; round++) {
		size_t moved = 0;
		for (int i = 0; i < 2; i++)
			moved += ship(&src[i], T, 50) + ship(&src[i], U, 50);
		if (moved == 0)
			return;
	}
	ck_abort_msg("shipping does not end");
}

/* --- comparing GSI entries ------------------------------------------------ */

typedef struct dump_arg {
	uint64_t lo, hi;
	uint8_t *buf;
	size_t len, cap, n;
	uint64_t base; /* base items of the table seen */
} dump_arg;

static void dump_add(dump_arg *d, const void *p, size_t n)
{
	if (d->len + n + sizeof(size_t) > d->cap) {
		d->cap = 2 * (d->len + n + sizeof(size_t)) + 4096;
		d->buf = realloc(d->buf, d->cap);
		ck_assert_ptr_nonnull(d->buf);
	}
	memcpy(d->buf + d->len, &n, sizeof(n));
	memcpy(d->buf + d->len + sizeof(n), p, n);
	d->len += sizeof(n) + n;
}

static int dump_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl, char *errmsg)
{
	(void)errmsg;
	dump_arg *d = arg;
	const uint8_t *b = k;
	if (kl < ST_KEY_HEADER || st_get_be32(b) != TID)
		return SHOAL_OK;
	if (st_get_be16(b + 4) == 0)
		d->base++;
	uint64_t h = st_get_be64(b + 6);
	if (st_get_be16(b + 4) != gsi_id || h < d->lo || h > d->hi)
		return SHOAL_OK;
	dump_add(d, k, kl);
	dump_add(d, v, vl);
	d->n++;
	return SHOAL_OK;
}

static dump_arg dump(int e, uint64_t lo, uint64_t hi)
{
	st_view *v;
	ck_assert_int_eq(st_view_begin(env[e], &v, tl_msg), SHOAL_OK);
	dump_arg d = {.lo = lo, .hi = hi};
	ck_assert_int_eq(st_view_foreach(v, ST_DBI_DATA, dump_fn, &d, tl_msg), SHOAL_OK);
	st_view_end(v);
	return d;
}

static void assert_same(int e, uint64_t lo, uint64_t hi, const char *what)
{
	dump_arg a = dump(e, lo, hi), r = dump(REF, lo, hi);
	ck_assert_msg(a.len == r.len && (a.len == 0 || memcmp(a.buf, r.buf, a.len) == 0),
	              "%s: %zu entries, the reference has %zu", what, a.n, r.n);
	free(a.buf);
	free(r.buf);
}

static uint64_t entries(int e, uint64_t lo, uint64_t hi)
{
	dump_arg d = dump(e, lo, hi);
	free(d.buf);
	return d.n;
}

static uint64_t counted(int e)
{
	MDB_txn *txn;
	ck_assert_int_eq(st_read_txn_begin(env[e], &txn, tl_msg), SHOAL_OK);
	st_ix_state s;
	ck_assert_int_eq(st_ix_state_get(txn, env[e], TID, gsi_id, &s, tl_msg), SHOAL_OK);
	mdb_txn_abort(txn);
	return s.item_count;
}

/* The GSI's entries e counts (IndexStats): those of the ranges it serves
 * (storage/parts.h, Counting). */
static uint64_t served(int e)
{
	st_index_progress *p;
	uint32_t n;
	ck_assert_int_eq(st_index_progress_list(env[e], &tl_arena, &p, &n, tl_msg), SHOAL_OK);
	ck_assert_msg(st_part_uncount_indexes(env[e], p, n, tl_msg) == SHOAL_OK, "%s", tl_msg);
	for (uint32_t i = 0; i < n; i++)
		if (p[i].table_id == TID && p[i].index_id == gsi_id)
			return p[i].item_count;
	ck_abort_msg("no progress entry of the GSI");
	return 0;
}

/* e counts every entry it holds, except those of the moving range unless
 * with_range. */
static void check_served(int e, bool with_range, const char *when)
{
	uint64_t want = entries(e, 0, UINT64_MAX) - (with_range ? 0 : entries(e, R_LO, R_HI));
	uint64_t got = served(e);
	ck_assert_msg(got == want, "%s: group %d counts %" PRIu64 " entries, serves %" PRIu64, when,
	              e, got, want);
}

/* --- the move --------------------------------------------------------------- */

static int p_call(int e, int (*fn)(st_txn *, void *), void *arg)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[e], &t, tl_msg), SHOAL_OK);
	return finish(t, fn(t, arg));
}

static int do_out(st_txn *t, void *arg)
{
	(void)arg;
	return st_part_out(t, ST_PART_GSI, R_LO, R_HI, group_id[U], 1, tl_msg);
}

static int do_fence(st_txn *t, void *arg)
{
	bool now;
	(void)arg;
	return st_part_fence(t, ST_PART_GSI, R_LO, &now, tl_msg);
}

static int do_abort(st_txn *t, void *arg)
{
	uint8_t was;
	(void)arg;
	return st_part_abort(t, ST_PART_GSI, R_LO, &was, tl_msg);
}

static int do_purge(st_txn *t, void *arg)
{
	return st_part_purge(t, ST_PART_GSI, R_LO, 5, NULL, arg, tl_msg);
}

static int do_handover(st_txn *t, void *arg)
{
	return st_part_handover(t, ST_PART_GSI, R_LO, arg, tl_msg);
}

/* What U's last ingest answered it holds of the range. */
static st_part_held last_held;

typedef struct own_arg {
	st_part_mark *m;
	size_t n;
} own_arg;

static int do_own(st_txn *t, void *arg)
{
	own_arg *o = arg;
	bool now;
	int rc = st_part_own(t, ST_PART_GSI, R_LO, R_HI, 1, &now, tl_msg);
	if (rc == SHOAL_OK)
		rc = st_part_gsi_mark_set(t, R_LO, R_HI, o->m, o->n, tl_msg);
	return rc;
}

/* One chunk of the copy (after the key in cursor) or of the log (after
 * *log_seq) into U. */
static int ingest(bool reset, size_t n, uint8_t **k, size_t *kl, uint8_t **v, size_t *vl)
{
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[U], &t, tl_msg), SHOAL_OK);
	return finish(t, st_part_ingest(t, ST_PART_GSI, R_LO, R_HI, 1, reset, n,
	                                (const uint8_t *const *)k, kl, (const uint8_t *const *)v,
	                                vl, &tl_arena, &last_held, tl_msg));
}

static void copy(uint64_t *log_seq)
{
	uint8_t cursor[ST_KEY_MAX];
	size_t cursor_len = 0;
	bool more = true, first = true;
	int chunks = 0;
	while (more) {
		uint8_t **k, **v;
		size_t *kl, *vl, n;
		uint64_t log_last;
		ck_assert_msg(st_part_copy_chunk(env[T], ST_PART_GSI, R_LO, R_HI, cursor,
		                                 cursor_len, 600, &tl_arena, &k, &kl, &v, &vl, &n,
		                                 &more, &log_last, tl_msg) == SHOAL_OK,
		              "%s", tl_msg);
		if (first)
			*log_seq = log_last;
		for (size_t i = 0; i < n; i++) {
			uint16_t x = st_get_be16(k[i] + 4);
			uint64_t h = st_get_be64(k[i] + 6);
			ck_assert_msg(st_get_be32(k[i]) == TID && x == gsi_id && h >= R_LO &&
			                  h <= R_HI,
			              "the copy holds a key that is no GSI entry of the range");
		}
		ck_assert_msg(ingest(first, n, k, kl, v, vl) == SHOAL_OK, "%s", tl_msg);
		first = false;
		if (n > 0) {
			cursor_len = kl[n - 1];
			memcpy(cursor, k[n - 1], cursor_len);
		}
		chunks++;
		work(3); /* writes and shipping go on */
	}
	printf("copy: %d chunks\n", chunks);
}

static void replay(uint64_t *log_seq)
{
	for (;;) {
		uint8_t **k, **v;
		size_t *kl, *vl, n;
		uint64_t last;
		ck_assert_int_eq(st_part_log_read(env[T], ST_PART_GSI, R_LO, *log_seq, 800, 0,
		                                  &tl_arena, &k, &kl, &v, &vl, &last, &n, tl_msg),
		                 SHOAL_OK);
		if (n == 0)
			return;
		ck_assert_msg(ingest(false, n, k, kl, v, vl) == SHOAL_OK, "%s", tl_msg);
		*log_seq = last;
	}
}

static void run(bool aborted)
{
	rng = tl_seed() ^ (aborted ? 0x9e3779b97f4a7c15ull : 0);
	flipped = false;
	redeliveries = 0;
	memset(refusals, 0, sizeof(refusals));
	for (int i = 0; i < 2; i++) {
		src[i] = (source){.e = i == 0 ? B1 : B2};
		sh_arena_init(&src[i].a);
	}
	/* T also serves base items of the table (and their LSI entries):
	 * the copy and the purge must leave them alone. */
	for (int i = 0; i < 30; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "t%02d", i);
		put(env[T], pk, "s", i, "g000");
	}
	work(200);
	read_outbox(&src[0]);
	ck_assert_uint_gt(src[0].n, 0);
	gsi_id = src[0].d[0].index_id;
	uint64_t log_seq = 0;

	ck_assert_msg(p_call(T, do_out, NULL) == SHOAL_OK, "out: %s", tl_msg);
	work(40);
	copy(&log_seq);
	work(40);
	replay(&log_seq);
	work(20);
	check_served(T, true, "copied");
	check_served(U, false, "copied"); /* held until owned */
	ck_assert_msg(p_call(T, do_fence, NULL) == SHOAL_OK, "fence: %s", tl_msg);
	work(60); /* deltas of the range refused at T from now on */
	replay(&log_seq);
	ck_assert_uint_gt(refusals[T], 0);
	check_served(T, true, "fenced");
	check_served(U, false, "fenced");
	/* U's last ingest answered the range's entries, which T holds too. */
	ck_assert(last_held.ix_known);
	ck_assert_uint_eq(last_held.n_ix, 1);
	ck_assert_uint_eq(last_held.ix[0].table, TID);
	ck_assert_uint_eq(last_held.ix[0].index, gsi_id);
	ck_assert_uint_eq(last_held.ix[0].items, entries(U, R_LO, R_HI));
	ck_assert_uint_eq(last_held.ix[0].items, entries(T, R_LO, R_HI));
	ck_assert_uint_gt(last_held.ix[0].items, 0);

	if (aborted) {
		/* The move is given up: T serves the range again, with the
		 * watermarks its fence pinned (held deltas are applied, though
		 * T's own watermarks went past them meanwhile). */
		ck_assert_msg(p_call(T, do_abort, NULL) == SHOAL_OK, "abort: %s", tl_msg);
		forget_held(T);
		work(100);
	} else {
		flipped = true;
		forget_held(T);
		work(40); /* U refuses the range until it owns it */
		ck_assert_uint_gt(refusals[U], 0);
		own_arg o;
		ck_assert_int_eq(
		    st_part_gsi_marks(env[T], R_LO, R_HI, &tl_arena, &o.m, &o.n, tl_msg), SHOAL_OK);
		ck_assert_uint_gt(o.n, 0);
		ck_assert_msg(p_call(U, do_own, &o) == SHOAL_OK, "own: %s", tl_msg);
		check_served(U, true, "owned");
		/* The source's handover, as pmove.c does it after the own. */
		st_part_held h = last_held;
		ck_assert_msg(p_call(T, do_handover, &h) == SHOAL_OK, "handover: %s", tl_msg);
		check_served(T, false, "handed over");
		forget_held(U);
		work(60);
		check_served(U, true, "owned");
		bool done = false;
		int purges = 0;
		while (!done) {
			ck_assert_msg(p_call(T, do_purge, &done) == SHOAL_OK, "purge: %s", tl_msg);
			check_served(T, false, "purging");
			purges++;
			work(5);
		}
		printf("purge: %d entries\n", purges);
		work(60);
	}
	new_leader(&src[0]);
	new_leader(&src[1]);
	drain();
	for (int i = 0; i < 2; i++) {
		ship_ref(&src[i]);
		size_t p = 0;
		while (p < src[i].n && src[i].acked[p])
			p++;
		ck_assert_msg(p == src[i].n, "source %d: delta %zu of %zu never acknowledged", i, p,
		              src[i].n);
	}

	int owner = aborted ? T : U;
	assert_same(T, 0, R_LO - 1, "T's own range");
	assert_same(owner, R_LO, R_HI, "the moved range at its owner");
	assert_same(U, R_HI + 1, UINT64_MAX, "U's own range");
	if (!aborted)
		ck_assert_uint_eq(entries(T, R_LO, R_HI), 0); /* purged */
	ck_assert_uint_eq(dump(U, 0, 0).base, 0);             /* nothing but GSI entries came */
	uint64_t at_t = entries(T, 0, UINT64_MAX), at_u = entries(U, 0, UINT64_MAX);
	ck_assert_uint_eq(counted(T), at_t);
	ck_assert_uint_eq(counted(U), at_u);
	check_served(T, true, "at the end");
	check_served(U, !aborted, "at the end"); /* aborted: U holds the copy */
	printf("%s: %" PRIu64 " entries at T, %" PRIu64 " at U, %" PRIu64
	       " in the range; refusals T %d, U %d; %d deltas sent again\n",
	       aborted ? "aborted" : "moved", at_t, at_u, entries(REF, R_LO, R_HI), refusals[T],
	       refusals[U], redeliveries);
	for (int i = 0; i < 2; i++) {
		sh_free(src[i].d);
		sh_free(src[i].acked);
		sh_arena_fini(&src[i].a);
	}
}

START_TEST(test_move_random)
{
	run(false);
}
END_TEST

START_TEST(test_abort_after_fence_random)
{
	run(true);
}
END_TEST

/* One ingest chunk into U of the put deltas of src[0] with hashes in
 * [lo, hi] (reset: the attempt's first). */
static void ingest_deltas(uint64_t lo, uint64_t hi, uint64_t attempt, bool reset)
{
	size_t n = 0;
	uint8_t **k = sh_arena_calloc(&tl_arena, src[0].n + 1, sizeof(*k));
	uint8_t **v = sh_arena_calloc(&tl_arena, src[0].n + 1, sizeof(*v));
	size_t *kl = sh_arena_calloc(&tl_arena, src[0].n + 1, sizeof(*kl));
	size_t *vl = sh_arena_calloc(&tl_arena, src[0].n + 1, sizeof(*vl));
	ck_assert(k != NULL && v != NULL && kl != NULL && vl != NULL);
	for (size_t i = 0; i < src[0].n; i++) {
		const st_delta *d = &src[0].d[i];
		if (d->del || d->hash < lo || d->hash > hi)
			continue;
		k[n] = (uint8_t *)d->key, kl[n] = d->key_len;
		v[n] = (uint8_t *)d->val, vl[n] = d->val_len;
		n++;
	}
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[U], &t, tl_msg), SHOAL_OK);
	ck_assert_msg(
	    finish(t, st_part_ingest(t, ST_PART_GSI, lo, hi, attempt, reset, n,
	                             (const uint8_t *const *)k, kl, (const uint8_t *const *)v, vl,
	                             &tl_arena, &last_held, tl_msg)) == SHOAL_OK,
	    "%s", tl_msg);
}

/* Counting the entries of a GSI range held without being served (parts.h,
 * Counting): an attempt's copy is held until owned; when another move's
 * reset carves its record, the piece left holds (counted again) the entries
 * of its own range, and the new range's own makes only its entries count. */
START_TEST(test_carve_counts)
{
	src[0] = (source){.e = B1};
	sh_arena_init(&src[0].a);
	for (int i = 0; i < 40; i++) {
		char pk[16], g[16];
		snprintf(pk, sizeof(pk), "a%02d", i);
		snprintf(g, sizeof(g), "g%03d", i);
		put(env[B1], pk, "s", i, g);
	}
	read_outbox(&src[0]);
	gsi_id = src[0].d[0].index_id;
	const uint64_t mid = UINT64_MAX / 2;
	ingest_deltas(0, UINT64_MAX, 1, true); /* attempt 1, never owned */
	ck_assert_uint_eq(entries(U, 0, UINT64_MAX), 40);
	ck_assert_uint_eq(served(U), 0);
	ck_assert_uint_eq(last_held.ix[0].items, 40);
	/* Attempt 2 over [mid, 2^64-1]: its reset carves attempt 1's record
	 * (the piece [0, mid - 1] is left) and deletes the range's entries. */
	ingest_deltas(mid, UINT64_MAX, 2, true);
	uint64_t below = entries(U, 0, mid - 1), above = entries(U, mid, UINT64_MAX);
	ck_assert_uint_gt(below, 0);
	ck_assert_uint_gt(above, 0);
	ck_assert_uint_eq(below + above, 40);
	ck_assert_uint_eq(last_held.ix[0].items, above);
	ck_assert_uint_eq(served(U), 0);
	own_arg o = {NULL, 0};
	st_part_mark m = {.lo = mid, .hi = UINT64_MAX};
	o.m = &m, o.n = 1;
	st_txn *t;
	ck_assert_int_eq(st_txn_begin(env[U], &t, tl_msg), SHOAL_OK);
	bool now;
	int rc = st_part_own(t, ST_PART_GSI, mid, UINT64_MAX, 2, &now, tl_msg);
	if (rc == SHOAL_OK)
		rc = st_part_gsi_mark_set(t, mid, UINT64_MAX, o.m, o.n, tl_msg);
	ck_assert_msg(finish(t, rc) == SHOAL_OK, "own: %s", tl_msg);
	ck_assert_uint_eq(served(U), above); /* the piece's entries stay held */
	sh_free(src[0].d);
	sh_free(src[0].acked);
	sh_arena_fini(&src[0].a);
}
END_TEST

/* Ingest checks every key and entry first: nothing is written from a chunk
 * with one bad key. */
START_TEST(test_ingest_refusals)
{
	put(env[B1], "a1", "s", 1, "g1");
	src[0] = (source){.e = B1};
	sh_arena_init(&src[0].a);
	read_outbox(&src[0]);
	gsi_id = src[0].d[0].index_id;
	st_delta d = src[0].d[0];
	uint64_t lo = d.hash, hi = d.hash;
	uint8_t *k[2] = {(uint8_t *)d.key, NULL};
	size_t kl[2] = {d.key_len, 0};
	uint8_t *v[2] = {(uint8_t *)d.val, NULL};
	size_t vl[2] = {d.val_len, 0};
	st_key base;
	st_key_item(&base, TID, 0, tl_s("a1"), tl_s("s"));
	uint8_t bad_val[3] = {0xff, 0xff, 0xff};
	struct {
		uint8_t *key;
		size_t klen;
		uint8_t *val;
		size_t vlen;
		uint64_t lo, hi;
		const char *want;
	} cases[] = {
	    {base.b, base.len, NULL, 0, 0, UINT64_MAX, "is not a GSI entry key"},
	    {(uint8_t *)d.key, d.key_len, NULL, 0, 0, lo > 0 ? lo - 1 : 0, "outside"},
	    {(uint8_t *)d.key, d.key_len, bad_val, sizeof(bad_val), lo, hi, "entry 1"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (i == 1 && lo == 0) /* no range below the hash */
			continue;
		k[1] = cases[i].key, kl[1] = cases[i].klen, v[1] = cases[i].val,
		vl[1] = cases[i].vlen;
		st_txn *t;
		ck_assert_int_eq(st_txn_begin(env[U], &t, tl_msg), SHOAL_OK);
		int rc = st_part_ingest(t, ST_PART_GSI, cases[i].lo, cases[i].hi, 1, true, 2,
		                        (const uint8_t *const *)k, kl, (const uint8_t *const *)v,
		                        vl, &tl_arena, NULL, tl_msg);
		ck_assert_int_eq(rc, SHOAL_E_VALIDATION);
		ck_assert_msg(strstr(tl_msg, cases[i].want) != NULL, "case %zu: %s", i, tl_msg);
		/* The transaction is still usable and nothing was written. */
		ck_assert_int_eq(st_txn_commit(t, tl_msg), SHOAL_OK);
		ck_assert_uint_eq(entries(U, 0, UINT64_MAX), 0);
		ck_assert(!st_part_any(env[U]));
	}
	sh_free(src[0].d);
	sh_free(src[0].acked);
	sh_arena_fini(&src[0].a);
}
END_TEST

static Suite *parts_gsi_suite(void)
{
	return tl_suite("parts_gsi", setup, teardown, 120,
	                TL_TESTS(test_move_random, test_abort_after_fence_random,
	                         test_ingest_refusals, test_carve_counts));
}

TL_MAIN(parts_gsi_suite)
