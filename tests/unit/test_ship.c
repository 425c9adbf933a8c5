/*
 * The index shipper's pure bookkeeping (node/shipq.c): deltas grouped by
 * target group, batches bounded by count and bytes with one in flight per
 * target, acknowledgements and retries, and the shipped watermark -- the
 * position behind which the source may trim its outbox.  A randomised run
 * checks the watermark against a model: the highest S such that every delta
 * <= S was acknowledged.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/node.h"
#include "tests/lib/testlib.h"

static sh_cluster_conf conf; /* 4 groups: partitions in groups 1..3 */
static node_shipq Q;
static uint8_t keybuf[4096];

/* A placement hash inside the partition of group g (1..3). */
static uint64_t hash_in(uint32_t g, uint64_t salt)
{
	uint64_t lo, hi;
	sh_cluster_partition_range(&conf, g - 1, &lo, &hi);
	return lo + salt % (hi - lo);
}

static void push(uint64_t seq, uint32_t target, size_t key_len)
{
	st_delta d = {
	    .seq = seq,
	    .hash = hash_in(target, seq * 7919),
	    .table_id = 3,
	    .index_id = 1,
	    .key = keybuf,
	    .key_len = key_len,
	    .val = keybuf,
	    .val_len = 10,
	    .ts_ms = (int64_t)seq,
	};
	memset(keybuf, (int)(seq & 0xff), key_len);
	ck_assert_int_eq(node_shipq_push(&Q, &d), SHOAL_OK);
}

static void setup(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.groups = 4;
	conf.replication = 3;
	conf.n_nodes = 3;
	ck_assert_int_eq(node_shipq_init(&Q, &conf, NULL), SHOAL_OK);
}

static void teardown(void)
{
	node_shipq_fini(&Q);
}

START_TEST(test_target)
{
	/* Partition i of 3 covers [ceil(i 2^64 / 3), ...] and lives in group
	 * i + 1: the ends and the boundaries of the hash space. */
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, 0), 1);
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, 0x5555555555555555ull), 1);
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, 0x5555555555555556ull), 2);
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, 1ull << 63), 2);
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, 0xaaaaaaaaaaaaaaabull), 3);
	ck_assert_uint_eq(node_shipq_target(&conf, NULL, UINT64_MAX), 3);
	/* With one group, everything stays in it. */
	sh_cluster_conf one = conf;
	one.groups = 1;
	ck_assert_uint_eq(node_shipq_target(&one, NULL, UINT64_MAX), 0);
	ck_assert_uint_eq(node_shipq_target(&one, NULL, 12345), 0);
}
END_TEST

/* Deltas go to their target's queue in seq order, with their bytes copied. */
START_TEST(test_grouping)
{
	for (uint64_t s = 1; s <= 9; s++)
		push(s, (uint32_t)(s % 3) + 1, 5);
	ck_assert_uint_eq(Q.read_pos, 9);
	ck_assert_uint_eq(Q.n_buffered, 9);
	ck_assert_uint_eq(Q.links[0].n, 0);
	for (uint32_t g = 1; g <= 3; g++) {
		ck_assert_uint_eq(Q.links[g].n, 3);
		uint64_t prev = 0;
		for (const node_sdelta *x = Q.links[g].head; x != NULL; x = x->next) {
			ck_assert_uint_gt(x->d.seq, prev);
			ck_assert_uint_eq(x->d.seq % 3 + 1, g);
			ck_assert_uint_eq(node_shipq_target(&conf, NULL, x->d.hash), g);
			/* A copy: the caller's buffer has been overwritten since. */
			ck_assert_ptr_ne(x->d.key, keybuf);
			ck_assert_uint_eq(x->d.key[0], x->d.seq & 0xff);
			ck_assert_uint_eq(x->d.key_len, 5);
			ck_assert_uint_eq(x->d.val_len, 10);
			prev = x->d.seq;
		}
	}
}
END_TEST

/* Batches: at most max_n deltas and about max_bytes, never empty, one in
 * flight per target. */
START_TEST(test_batches)
{
	for (uint64_t s = 1; s <= 25; s++)
		push(s, 2, 100);                                   /* 100 + 10 + overhead each */
	ck_assert_uint_eq(node_shipq_take(&Q, 1, 10, 1 << 20), 0); /* empty queue */
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 10, 1 << 20), 10);
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 10, 1 << 20), 0); /* in flight */
	ck_assert_uint_eq(node_shipq_watermark(&Q), 0);
	node_shipq_ack(&Q, 2, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 10);
	ck_assert_uint_eq(Q.links[2].n, 15);

	/* Byte bound: 500 bytes hold 3 deltas of ~150. */
	uint32_t k = node_shipq_take(&Q, 2, 1000, 500);
	ck_assert_uint_ge(k, 2);
	ck_assert_uint_le(k, 4);
	/* A failure makes them unsent; the retry takes them again (and more). */
	node_shipq_retry(&Q, 2);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 10);
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 1000, 1 << 20), 15);
	node_shipq_ack(&Q, 2, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 25);
	ck_assert_uint_eq(Q.n_buffered, 0);
	ck_assert_uint_eq(Q.bytes_buffered, 0);

	/* One delta bigger than the byte bound still goes, alone. */
	push(26, 3, 3000);
	push(27, 3, 10);
	ck_assert_uint_eq(node_shipq_take(&Q, 3, 1000, 1000), 1);
}
END_TEST

/* A GSI range refused by its target (storage/parts.h, "The GSI space"):
 * its deltas leave the queue for the held list, later ones of the range go
 * there directly, the rest of the queue goes on, the watermark stays below
 * the held ones; a reroute (nothing in flight) puts everything back in seq
 * order. */
START_TEST(test_refused_range)
{
	for (uint64_t s = 1; s <= 12; s++)
		push(s, 2, 5);
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 100, 1 << 20), 12);
	ck_assert(!node_shipq_quiet(&Q));
	/* The range: from the smallest to the largest hash of seqs 4, 7, 10. */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (const node_sdelta *x = Q.links[2].head; x != NULL; x = x->next)
		if (x->d.seq == 4 || x->d.seq == 7 || x->d.seq == 10) {
			lo = x->d.hash < lo ? x->d.hash : lo;
			hi = x->d.hash > hi ? x->d.hash : hi;
		}
	ck_assert_uint_le(lo, hi);
	uint32_t in_range = 0;
	for (const node_sdelta *x = Q.links[2].head; x != NULL; x = x->next)
		in_range += x->d.hash >= lo && x->d.hash <= hi;
	ck_assert_uint_ge(in_range, 3);
	node_shipq_refused(&Q, 2, lo, hi);
	ck_assert(node_shipq_quiet(&Q));
	ck_assert_uint_eq(Q.n_held, in_range);
	ck_assert_uint_eq(Q.links[2].n, 12 - in_range);
	ck_assert_uint_eq(Q.n_buffered, 12);
	uint64_t prev = 0;
	for (const node_sdelta *x = Q.links[2].head; x != NULL; x = x->next) {
		ck_assert(x->d.hash < lo || x->d.hash > hi);
		ck_assert_uint_gt(x->d.seq, prev);
		prev = x->d.seq;
	}
	/* The rest goes and is acknowledged; the held deltas hold the
	 * watermark. */
	uint64_t first_held = Q.held_head->d.seq;
	if (Q.links[2].n > 0) {
		ck_assert_uint_eq(node_shipq_take(&Q, 2, 100, 1 << 20), 12 - in_range);
		node_shipq_ack(&Q, 2, NULL, NULL);
	}
	ck_assert_uint_eq(node_shipq_watermark(&Q), first_held - 1);
	/* A later delta of the range waits with them, whatever its target. */
	st_delta d = {.seq = 13,
	              .hash = lo,
	              .table_id = 3,
	              .index_id = 1,
	              .key = keybuf,
	              .key_len = 5,
	              .val = keybuf,
	              .val_len = 10};
	ck_assert_int_eq(node_shipq_push(&Q, &d), SHOAL_OK);
	ck_assert_uint_eq(Q.n_held, in_range + 1);
	/* The reroute puts them back, in seq order, and forgets the range. */
	node_shipq_reroute(&Q);
	ck_assert_uint_eq(Q.n_held, 0);
	ck_assert_uint_eq(Q.n_held_ranges, 0);
	ck_assert_ptr_null(Q.held_head);
	ck_assert_uint_eq(Q.links[2].n, in_range + 1);
	prev = 0;
	for (const node_sdelta *x = Q.links[2].head; x != NULL; x = x->next) {
		ck_assert_uint_gt(x->d.seq, prev);
		prev = x->d.seq;
	}
	ck_assert_uint_eq(Q.links[2].tail->d.seq, 13);
	ck_assert_uint_eq(node_shipq_watermark(&Q), first_held - 1);
	d.seq = 14; /* no longer held */
	ck_assert_int_eq(node_shipq_push(&Q, &d), SHOAL_OK);
	ck_assert_uint_eq(Q.n_held, 0);
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 100, 1 << 20), in_range + 2);
	node_shipq_ack(&Q, 2, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 14);
	ck_assert_uint_eq(Q.n_buffered, 0);
	ck_assert_uint_eq(Q.bytes_buffered, 0);
}
END_TEST

static uint64_t acked_sum;
static void sum_each(void *arg, const st_delta *d)
{
	(void)arg;
	acked_sum += d->seq;
}

/* The watermark waits for the slowest target. */
START_TEST(test_watermark)
{
	/* seq: 1->g1 2->g2 3->g3 4->g1 5->g2 6->g3 7->g1 */
	for (uint64_t s = 1; s <= 7; s++)
		push(s, (uint32_t)((s - 1) % 3) + 1, 8);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 0);
	ck_assert_uint_eq(node_shipq_take(&Q, 2, 100, 1 << 20), 2);
	node_shipq_ack(&Q, 2, sum_each, NULL);
	ck_assert_uint_eq(acked_sum, 2 + 5);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 0); /* g1 still holds 1 */
	ck_assert_uint_eq(node_shipq_take(&Q, 1, 1, 1 << 20), 1);
	node_shipq_ack(&Q, 1, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 2); /* g3 holds 3 */
	ck_assert_uint_eq(node_shipq_take(&Q, 3, 100, 1 << 20), 2);
	node_shipq_ack(&Q, 3, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 3); /* g1 holds 4, 7 */
	ck_assert_uint_eq(node_shipq_take(&Q, 1, 100, 1 << 20), 2);
	node_shipq_ack(&Q, 1, NULL, NULL);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 7);

	/* Leadership changes: the queue restarts at the replicated watermark. */
	push(8, 1, 8);
	node_shipq_reset(&Q, 5);
	ck_assert_uint_eq(Q.n_buffered, 0);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 5);
	push(6, 2, 8);
	ck_assert_uint_eq(node_shipq_watermark(&Q), 5);
}
END_TEST

/* Random pushes, takes, acks and retries against a model. */
START_TEST(test_random_model)
{
	uint64_t seed = tl_seed();
	uint64_t st = seed;
	enum { N = 3000 };
	static bool acked[N + 1];
	memset(acked, 0, sizeof(acked));
	uint64_t next = 1;
	uint32_t inflight[4] = {0};
	for (int step = 0; step < 40000; step++) {
		uint64_t r = tl_rand(&st) % 10;
		if (r < 4 && next <= N) {
			uint32_t g = (uint32_t)(tl_rand(&st) % 3) + 1;
			push(next++, g, (size_t)(tl_rand(&st) % 64));
		} else {
			uint32_t g = (uint32_t)(tl_rand(&st) % 3) + 1;
			if (inflight[g] == 0) {
				inflight[g] =
				    node_shipq_take(&Q, g, (uint32_t)(tl_rand(&st) % 20) + 1,
				                    (size_t)(tl_rand(&st) % 2000));
			} else if (r < 8) {
				/* The in-flight deltas are the queue's first ones. */
				uint32_t i = 0;
				for (const node_sdelta *x = Q.links[g].head; i < inflight[g];
				     x = x->next, i++)
					acked[x->d.seq] = true;
				node_shipq_ack(&Q, g, NULL, NULL);
				inflight[g] = 0;
			} else {
				node_shipq_retry(&Q, g);
				inflight[g] = 0;
			}
		}
		uint64_t model = 0;
		while (model + 1 < next && acked[model + 1])
			model++;
		ck_assert_msg(
		    node_shipq_watermark(&Q) == model,
		    "seed %llu step %d: watermark %llu, model %llu", (unsigned long long)seed, step,
		    (unsigned long long)node_shipq_watermark(&Q), (unsigned long long)model);
	}
	ck_assert_uint_gt(next, 1000); /* the run exercised a real stream */
}
END_TEST

static Suite *ship_suite(void)
{
	return tl_suite("ship", setup, teardown, 60,
	                TL_TESTS(test_target, test_grouping, test_batches, test_refused_range,
	                         test_watermark, test_random_model));
}

TL_MAIN(ship_suite)
