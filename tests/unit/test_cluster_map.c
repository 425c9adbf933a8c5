/* The cluster map as data (common/cluster_map.c, cluster_map_codec.c). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster.h"
#include "common/cluster_map.h"
#include "common/errors.h"
#include "tests/lib/testlib.h"

/* A cluster file's contents, without the file: n nodes with ids in a
 * non-sorted order (placement follows file order, the map sorts by id). */
static void make_conf(sh_cluster_conf *c, uint32_t n, uint32_t groups, uint32_t replication)
{
	memset(c, 0, sizeof(*c));
	c->groups = groups;
	c->replication = replication;
	c->n_nodes = n;
	for (uint32_t i = 0; i < n; i++) {
		sh_node_conf *x = &c->nodes[i];
		x->id = (i * 5 + 3) % n + 1; /* a permutation of 1..n when gcd(5, n) = 1 */
		if (n % 5 == 0)
			x->id = n - i;
		snprintf(x->raft_host, sizeof(x->raft_host), "10.0.0.%u", x->id);
		x->raft_port = (uint16_t)(7100 + 10 * x->id);
		snprintf(x->rpc, sizeof(x->rpc), "tcp://10.0.0.%u:7200", x->id);
	}
}

/* The map built from a file places exactly as cluster.h does. */
START_TEST(test_from_conf_is_todays_placement)
{
	char msg[SH_ERRMSG_SIZE];
	for (uint32_t n = 1; n <= 7; n++)
		for (uint32_t groups = 1; groups <= 9; groups++)
			for (uint32_t r = 1; r <= n && r <= 5; r++) {
				sh_cluster_conf c;
				make_conf(&c, n, groups, r);
				sh_map m;
				ck_assert_int_eq(sh_map_from_conf(&m, &c, msg), SHOAL_OK);
				ck_assert_uint_eq(m.epoch, 1);
				ck_assert_uint_eq(m.n_groups, groups);
				for (uint32_t g = 0; g < groups; g++) {
					uint32_t want[SH_MAX_REPLICATION];
					sh_cluster_replicas(&c, g, want);
					const sh_map_group *grp = sh_map_group_get(&m, g);
					ck_assert_ptr_nonnull(grp);
					ck_assert_uint_eq(grp->n_replicas, r);
					for (uint32_t k = 0; k < r; k++) {
						ck_assert_uint_eq(grp->replicas[k].node, want[k]);
						ck_assert(grp->replicas[k].voter);
					}
				}
				for (uint32_t i = 0; i < n; i++) {
					const sh_node_conf *x = &c.nodes[i];
					const sh_map_node *y = sh_map_node_get(&m, x->id);
					ck_assert_ptr_nonnull(y);
					ck_assert_str_eq(y->rpc, x->rpc);
					ck_assert_uint_eq(y->raft_port, x->raft_port);
					uint32_t gs[SH_MAX_GROUPS];
					uint32_t k =
					    sh_map_node_groups(&m, x->id, gs, SH_MAX_GROUPS);
					for (uint32_t g = 0, j = 0; g < groups; g++)
						if (sh_cluster_hosts(&c, x->id, g))
							ck_assert_uint_eq(gs[j++], g);
					uint32_t hosted = 0;
					for (uint32_t g = 0; g < groups; g++)
						hosted += sh_cluster_hosts(&c, x->id, g);
					ck_assert_uint_eq(k, hosted);
				}
				uint32_t d = sh_cluster_partitions(&c);
				for (uint32_t t = 1; t <= 3; t++)
					ck_assert_int_eq(sh_map_add_table(&m, t * 7, d, d, msg),
					                 SHOAL_OK);
				ck_assert(sh_map_check(&m, msg));
				uint64_t seed = tl_seed() + n * 100 + groups * 10 + r;
				for (uint32_t t = 1; t <= 3; t++)
					for (uint32_t p = 0; p < d; p++) {
						uint64_t lo, hi;
						sh_cluster_partition_range(&c, p, &lo, &hi);
						uint32_t i = sh_map_part_find(&m, t * 7, lo);
						ck_assert_uint_ne(i, SH_MAP_NONE);
						ck_assert_uint_eq(sh_map_part_hi(&m, i), hi);
						ck_assert_uint_eq(
						    m.parts[i].group,
						    sh_cluster_partition_group(&c, p));
						uint64_t any = tl_rand(&seed);
						if (hi - lo < UINT64_MAX)
							any = lo + any % (hi - lo + 1);
						uint64_t probes[] = {lo, hi, lo + (hi - lo) / 2,
						                     any};
						for (int k = 0; k < 4; k++) {
							uint64_t h = probes[k];
							ck_assert_uint_eq(
							    sh_map_route(&m, t * 7, h),
							    sh_cluster_partition_group(
							        &c,
							        sh_cluster_partition_of(&c, h)));
						}
					}
				ck_assert_uint_eq(sh_map_route(&m, 8, 5), SH_MAP_NONE);
				/* [cluster] table_partitions: more partitions, each
				 * inside its group's static range, so any hash
				 * routes as statically. */
				c.table_partitions = 2 * d + 1; /* rounds up to 3 d */
				uint32_t tp = sh_cluster_table_partitions(&c);
				ck_assert_uint_eq(tp, 3 * d);
				ck_assert_int_eq(sh_map_add_table(&m, 50, tp, d, msg), SHOAL_OK);
				ck_assert(sh_map_check(&m, msg));
				for (uint32_t i = sh_map_part_of(&m, 50, 0), k = 0; k < tp;
				     k++, i++) {
					ck_assert_uint_eq(m.parts[i].table, 50);
					uint64_t ends[2] = {m.parts[i].lo, sh_map_part_hi(&m, i)};
					for (int e = 0; e < 2; e++)
						ck_assert_uint_eq(
						    m.parts[i].group,
						    sh_cluster_partition_group(
						        &c, sh_cluster_partition_of(&c, ends[e])));
				}
				sh_map_fini(&m);
			}
}
END_TEST

static void base_map(sh_map *m)
{
	sh_cluster_conf c;
	char msg[SH_ERRMSG_SIZE];
	make_conf(&c, 5, 5, 3);
	ck_assert_int_eq(sh_map_from_conf(m, &c, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_add_table(m, 1, 4, sh_map_data_groups(m), msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_add_table(m, 2, 4, sh_map_data_groups(m), msg), SHOAL_OK);
}

/* rc is a refusal that changed nothing. */
#define REFUSED(call, code)                                                                        \
	do {                                                                                       \
		sh_map before_;                                                                    \
		ck_assert_int_eq(sh_map_copy(&before_, &m), SHOAL_OK);                             \
		msg[0] = '\0';                                                                     \
		ck_assert_int_eq((call), (code));                                                  \
		ck_assert_msg(msg[0] != '\0', "refused without a message");                        \
		ck_assert(sh_map_equal(&before_, &m));                                             \
		sh_map_fini(&before_);                                                             \
	} while (0)

#define DONE(call)                                                                                 \
	do {                                                                                       \
		uint64_t e_ = m.epoch;                                                             \
		ck_assert_int_eq((call), SHOAL_OK);                                                \
		ck_assert_uint_eq(m.epoch, e_ + 1);                                                \
		ck_assert_msg(sh_map_check(&m, msg), "%s", msg);                                   \
	} while (0)

START_TEST(test_replica_mutations)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	base_map(&m);
	const sh_map_group *g = sh_map_group_get(&m, 1);
	uint32_t a = g->replicas[0].node, b = g->replicas[1].node, c = g->replicas[2].node;
	uint32_t out = 0; /* a node not in group 1 */
	for (uint32_t i = 1; i <= 5; i++)
		if (sh_map_replica_index(g, i) < 0)
			out = i;
	ck_assert_uint_ne(out, 0);

	REFUSED(sh_map_add_replica(&m, 1, a, 0, msg), SHOAL_E_VALIDATION); /* already there */
	REFUSED(sh_map_add_replica(&m, 1, 99, 0, msg), SHOAL_E_NOT_FOUND);
	REFUSED(sh_map_add_replica(&m, 77, out, 0, msg), SHOAL_E_NOT_FOUND);
	REFUSED(sh_map_add_replica(&m, 1, out, 99, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_promote(&m, 1, a, msg), SHOAL_E_VALIDATION); /* a voter */
	REFUSED(sh_map_remove_replica(&m, 1, out, msg), SHOAL_E_NOT_FOUND);
	/* 3 voters -> 2 is allowed (majority of 3), 2 -> 1 is not. */
	DONE(sh_map_remove_replica(&m, 1, c, msg));
	REFUSED(sh_map_remove_replica(&m, 1, b, msg), SHOAL_E_VALIDATION);
	/* A move: add as non-voter replacing b, promote, remove b. */
	DONE(sh_map_add_replica(&m, 1, c, b, msg));
	g = sh_map_group_get(&m, 1);
	ck_assert_uint_eq(sh_map_voters(g), 2);
	REFUSED(sh_map_remove_replica(&m, 1, b, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_promote(&m, 1, c, msg));
	DONE(sh_map_add_replica(&m, 1, out, 0, msg));
	DONE(sh_map_promote(&m, 1, out, msg)); /* 4 voters = replication + 1 */
	uint32_t fifth = 0;
	for (uint32_t i = 1; i <= 5; i++)
		if (sh_map_replica_index(sh_map_group_get(&m, 1), i) < 0)
			fifth = i;
	DONE(sh_map_add_replica(&m, 1, fifth, 0, msg));
	REFUSED(sh_map_promote(&m, 1, fifth, msg), SHOAL_E_VALIDATION); /* would be 5 */
	DONE(sh_map_remove_replica(&m, 1, fifth, msg));                 /* non-voter: always */
	DONE(sh_map_remove_replica(&m, 1, b, msg));
	g = sh_map_group_get(&m, 1);
	ck_assert_int_eq(g->replicas[sh_map_replica_index(g, c)].replaces, 0); /* cleared */
	ck_assert_uint_eq(sh_map_voters(g), 3);

	/* A replacement takes the replaced replica's place in the order: the
	 * first voter (the preferred leader) hands its slot to its heir. */
	uint32_t first = g->replicas[0].node, heir = 0;
	for (uint32_t i = 1; i <= 5 && heir == 0; i++)
		if (sh_map_replica_index(g, i) < 0)
			heir = i;
	DONE(sh_map_add_replica(&m, 1, heir, first, msg));
	DONE(sh_map_promote(&m, 1, heir, msg));
	DONE(sh_map_remove_replica(&m, 1, first, msg));
	g = sh_map_group_get(&m, 1);
	ck_assert_uint_eq(g->replicas[0].node, heir);
	ck_assert_int_eq(g->replicas[0].replaces, 0);
	ck_assert_uint_eq(g->n_replicas, 3);
	ck_assert_int_lt(sh_map_replica_index(g, first), 0);

	/* prefer: a voter becomes the first replica, the others keep their order. */
	uint32_t r1 = g->replicas[1].node, r0 = g->replicas[0].node, r2 = g->replicas[2].node;
	DONE(sh_map_prefer(&m, 1, r2, msg));
	g = sh_map_group_get(&m, 1);
	ck_assert_uint_eq(g->replicas[0].node, r2);
	ck_assert_uint_eq(g->replicas[1].node, r0);
	ck_assert_uint_eq(g->replicas[2].node, r1);
	REFUSED(sh_map_prefer(&m, 1, r2, msg), SHOAL_E_IN_USE);
	REFUSED(sh_map_prefer(&m, 1, first, msg), SHOAL_E_NOT_FOUND);
	REFUSED(sh_map_prefer(&m, 77, r2, msg), SHOAL_E_NOT_FOUND);

	/* Nodes: a draining node takes no replica; removal only when empty. */
	sh_map_node n = {.id = 9, .raft_port = 7190};
	strcpy(n.raft_host, "10.0.0.9");
	strcpy(n.rpc, "tcp://10.0.0.9:7200");
	DONE(sh_map_add_node(&m, &n, msg));
	REFUSED(sh_map_add_node(&m, &n, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_drain_node(&m, 9, msg));
	REFUSED(sh_map_drain_node(&m, 9, msg), SHOAL_E_IN_USE);
	REFUSED(sh_map_add_replica(&m, 2, 9, 0, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_remove_node(&m, a, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_remove_node(&m, 9, msg));
	ck_assert_ptr_null(sh_map_node_get(&m, 9));

	/* Groups. */
	uint32_t three[] = {1, 2, 3}, dup[] = {1, 1}, one[] = {1};
	REFUSED(sh_map_add_group(&m, 1, three, 3, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_add_group(&m, 8, dup, 2, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_add_group(&m, 8, one, 1, msg), SHOAL_E_VALIDATION); /* < majority */
	DONE(sh_map_add_group(&m, 8, three, 3, msg));
	sh_map_fini(&m);
}
END_TEST

START_TEST(test_partition_mutations)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	base_map(&m);
	REFUSED(sh_map_add_table(&m, 1, 4, sh_map_data_groups(&m), msg), SHOAL_E_IN_USE);
	uint32_t i = sh_map_part_of(&m, 1, 5);
	ck_assert_uint_eq(m.parts[i].lo, 0);
	uint64_t hi = sh_map_part_hi(&m, i);
	uint32_t grp = m.parts[i].group;
	REFUSED(sh_map_split(&m, 1, 0, 0, 2, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_split(&m, 1, 0, hi + 1, 2, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_split(&m, 1, 7, 100, 2, msg), SHOAL_E_NOT_FOUND);
	REFUSED(sh_map_split(&m, 1, 0, 100, 42, msg), SHOAL_E_NOT_FOUND);
	DONE(sh_map_split(&m, 1, 0, 1000, 3, msg)); /* [0, 999] stays, [1000, hi] -> 3 */
	ck_assert_uint_eq(sh_map_route(&m, 1, 999), grp);
	ck_assert_uint_eq(sh_map_route(&m, 1, 1000), 3);
	ck_assert_uint_eq(sh_map_route(&m, 1, hi), 3);
	ck_assert_uint_eq(sh_map_part_hi(&m, sh_map_part_of(&m, 1, 0)), 999);
	DONE(sh_map_split(&m, 1, 1000, hi, 3, msg)); /* the last hash alone: in place */
	ck_assert_uint_eq(m.parts[sh_map_part_of(&m, 1, hi)].lo, hi);
	REFUSED(sh_map_merge(&m, 1, 0, msg), SHOAL_E_VALIDATION); /* groups differ */
	DONE(sh_map_merge(&m, 1, 1000, msg));
	ck_assert_uint_eq(sh_map_part_hi(&m, sh_map_part_find(&m, 1, 1000)), hi);
	DONE(sh_map_move_partition(&m, 1, 1000, grp, msg));
	REFUSED(sh_map_move_partition(&m, 1, 1000, grp, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_merge(&m, 1, 0, msg));
	ck_assert_uint_eq(sh_map_part_hi(&m, sh_map_part_find(&m, 1, 0)), hi);
	/* Two-step move: routing keeps the old group until the cutover. */
	DONE(sh_map_begin_move(&m, 1, 0, 4, msg));
	ck_assert_uint_eq(sh_map_route(&m, 1, 5), grp);
	REFUSED(sh_map_split(&m, 1, 0, 10, grp, msg), SHOAL_E_IN_USE);
	REFUSED(sh_map_begin_move(&m, 1, 0, 3, msg), SHOAL_E_IN_USE);
	DONE(sh_map_abort_move(&m, 1, 0, msg));
	REFUSED(sh_map_finish_move(&m, 1, 0, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_begin_move(&m, 1, 0, 4, msg));
	DONE(sh_map_finish_move(&m, 1, 0, msg));
	ck_assert_uint_eq(sh_map_route(&m, 1, 5), 4);
	/* Last partition of a table cannot merge with the next table's first. */
	uint32_t last = sh_map_part_of(&m, 1, UINT64_MAX);
	REFUSED(sh_map_merge(&m, 1, m.parts[last].lo, msg), SHOAL_E_VALIDATION);
	DONE(sh_map_drop_table(&m, 1, msg));
	ck_assert_uint_eq(sh_map_route(&m, 1, 5), SH_MAP_NONE);
	ck_assert_uint_ne(sh_map_route(&m, 2, 5), SH_MAP_NONE);
	REFUSED(sh_map_drop_table(&m, 1, msg), SHOAL_E_NOT_FOUND);
	sh_map_fini(&m);
}
END_TEST

/* Random splits and moves: lookups agree with a linear scan. */
START_TEST(test_lookups_random)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	base_map(&m);
	uint64_t s = tl_seed();
	for (int k = 0; k < 2000; k++) {
		uint32_t i = (uint32_t)(tl_rand(&s) % m.n_parts);
		uint64_t lo = m.parts[i].lo, hi = sh_map_part_hi(&m, i);
		if (hi > lo) {
			uint64_t at = lo + 1 + tl_rand(&s) % (hi - lo);
			uint32_t to = (uint32_t)(tl_rand(&s) % 5);
			DONE(sh_map_split(&m, m.parts[i].table, lo, at, to, msg));
		}
	}
	for (int k = 0; k < 20000; k++) {
		uint32_t t = 1 + (uint32_t)(tl_rand(&s) % 2);
		uint64_t h = tl_rand(&s);
		if (k % 3 == 0)
			h = m.parts[tl_rand(&s) % m.n_parts].lo - (k % 2);
		uint32_t want = SH_MAP_NONE;
		for (uint32_t i = 0; i < m.n_parts; i++)
			if (m.parts[i].table == t && m.parts[i].lo <= h &&
			    h <= sh_map_part_hi(&m, i))
				want = i;
		ck_assert_uint_eq(sh_map_part_of(&m, t, h), want);
	}
	sh_map_fini(&m);
}
END_TEST

START_TEST(test_codec)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	base_map(&m);
	ck_assert_int_eq(sh_map_split(&m, 1, 0, 77, 2, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&m, 2, 0, 3, msg), SHOAL_OK);
	uint32_t out = 0;
	for (uint32_t i = 1; i <= 5; i++)
		if (sh_map_replica_index(sh_map_group_get(&m, 2), i) < 0)
			out = i;
	ck_assert_int_eq(
	    sh_map_add_replica(&m, 2, out, sh_map_group_get(&m, 2)->replicas[0].node, msg),
	    SHOAL_OK);
	ck_assert_int_eq(sh_map_drain_node(&m, 4, msg), SHOAL_OK);
	size_t n = sh_map_encoded_size(&m);
	uint8_t *buf = sh_malloc(n), *again = sh_malloc(n);
	ck_assert_uint_eq(sh_map_encode(&m, buf), n);
	sh_map d;
	ck_assert_int_eq(sh_map_decode(buf, n, &d, msg), SHOAL_OK);
	ck_assert(sh_map_equal(&m, &d));
	ck_assert_uint_eq(sh_map_encode(&d, again), n);
	ck_assert_int_eq(memcmp(buf, again, n), 0);
	sh_map_fini(&d);
	/* The header's epoch alone; 0 for what is not a map's header. */
	ck_assert_uint_gt(m.epoch, 1);
	ck_assert_uint_eq(sh_map_peek_epoch(buf, n), m.epoch);
	ck_assert_uint_eq(sh_map_peek_epoch(buf, 17), m.epoch);
	ck_assert_uint_eq(sh_map_peek_epoch(buf, 16), 0);
	again[0] = 'X';
	memcpy(again + 1, buf + 1, n - 1);
	ck_assert_uint_eq(sh_map_peek_epoch(again, n), 0);

	/* Every truncation and one trailing byte are refused. */
	for (size_t len = 0; len < n; len++) {
		ck_assert_int_eq(sh_map_decode(buf, len, &d, msg), SHOAL_E_SERIALIZATION);
		ck_assert_uint_eq(d.n_nodes + d.n_groups + d.n_parts, 0);
		sh_map_fini(&d);
	}
	uint8_t *longer = sh_malloc(n + 1);
	memcpy(longer, buf, n);
	longer[n] = 0;
	ck_assert_int_eq(sh_map_decode(longer, n + 1, &d, msg), SHOAL_E_SERIALIZATION);
	ck_assert_ptr_nonnull(strstr(msg, "trailing"));
	sh_map_fini(&d);
	sh_free(longer);

	/* A huge count in a short input is refused before any allocation. */
	uint8_t huge[17 + 4];
	memcpy(huge, buf, 17);
	memset(huge + 17, 0xff, 4);
	ck_assert_int_eq(sh_map_decode(huge, sizeof(huge), &d, msg), SHOAL_E_SERIALIZATION);
	sh_map_fini(&d);

	/* Mutated inputs: refused, or a valid map that encodes back to the same bytes. */
	uint64_t s = tl_seed();
	for (int k = 0; k < 20000; k++) {
		memcpy(again, buf, n);
		int flips = 1 + (int)(tl_rand(&s) % 3);
		for (int f = 0; f < flips; f++)
			again[tl_rand(&s) % n] ^= (uint8_t)(1u << (tl_rand(&s) % 8));
		int rc = sh_map_decode(again, n, &d, msg);
		if (rc == SHOAL_OK) {
			ck_assert(sh_map_check(&d, msg));
			ck_assert_uint_eq(sh_map_encoded_size(&d), n);
			uint8_t *re = sh_malloc(n);
			sh_map_encode(&d, re);
			ck_assert_int_eq(memcmp(re, again, n), 0);
			sh_free(re);
		} else {
			ck_assert_int_eq(rc, SHOAL_E_SERIALIZATION);
		}
		sh_map_fini(&d);
	}
	/* Tables out of order, each block starting at 0 (fuzz_cluster_map
	 * found that sh_map_check let it through and routing then missed). */
	sh_map bad;
	ck_assert_int_eq(sh_map_copy(&bad, &m), SHOAL_OK);
	for (uint32_t i = 0; i < bad.n_parts; i++)
		bad.parts[i].table = bad.parts[i].table == 1 ? 2 : 1;
	ck_assert(!sh_map_check(&bad, msg));
	size_t bn = sh_map_encoded_size(&bad);
	uint8_t *bb = sh_malloc(bn);
	sh_map_encode(&bad, bb);
	ck_assert_int_eq(sh_map_decode(bb, bn, &d, msg), SHOAL_E_SERIALIZATION);
	sh_map_fini(&d);
	sh_free(bb);
	sh_map_fini(&bad);
	sh_free(buf);
	sh_free(again);
	sh_map_fini(&m);
}
END_TEST

/* The first allocation of call fails: refused, map unchanged. */
#define NOMEM(call)                                                                                \
	do {                                                                                       \
		sh_map before_;                                                                    \
		ck_assert_int_eq(sh_map_copy(&before_, &m), SHOAL_OK);                             \
		sh_fault_arm(SH_FAULT_ALLOC, 1, false);                                            \
		int rc_ = (call);                                                                  \
		sh_fault_reset();                                                                  \
		ck_assert_int_eq(rc_, SHOAL_E_NOMEM);                                              \
		ck_assert(sh_map_equal(&before_, &m));                                             \
		sh_map_fini(&before_);                                                             \
	} while (0)

/* Out of memory in a mutation that allocates: refused, map unchanged. */
START_TEST(test_nomem)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	sh_map_init(&m, 3);
	uint32_t three[] = {1, 2, 3};
	for (uint32_t id = 1; id <= 3; id++) {
		sh_map_node n = {.id = id};
		if (id == 1) /* the first allocation; later ones fit */
			NOMEM(sh_map_add_node(&m, &n, msg));
		ck_assert_int_eq(sh_map_add_node(&m, &n, msg), SHOAL_OK);
	}
	NOMEM(sh_map_add_group(&m, 0, three, 3, msg));
	ck_assert_int_eq(sh_map_add_group(&m, 0, three, 3, msg), SHOAL_OK);
	NOMEM(sh_map_add_table(&m, 1, 3, sh_map_data_groups(&m), msg));
	ck_assert_int_eq(sh_map_add_table(&m, 1, 16, sh_map_data_groups(&m), msg),
	                 SHOAL_OK); /* fills the capacity */
	NOMEM(sh_map_split(&m, 1, 0, 5, 0, msg));
	ck_assert_int_eq(sh_map_split(&m, 1, 0, 5, 0, msg), SHOAL_OK);
	sh_map_fini(&m);
}
END_TEST

/* A group made after the birth: its founders are marked until it is
 * founded, its replicas cannot change meanwhile, the marks survive the
 * codec, and a map mixing founders and voters in a group is refused. */
START_TEST(test_founding_group)
{
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	base_map(&m);
	uint32_t three[] = {1, 2, 3};
	REFUSED(sh_map_create_group(&m, 2, three, 3, msg), SHOAL_E_VALIDATION); /* exists */
	DONE(sh_map_create_group(&m, 9, three, 3, msg));
	const sh_map_group *g = sh_map_group_get(&m, 9);
	ck_assert(sh_map_group_founding(g));
	ck_assert_uint_eq(sh_map_voters(g), 3);
	for (uint32_t k = 0; k < 3; k++)
		ck_assert_uint_eq(g->replicas[k].voter, SH_MAP_FOUNDER);
	ck_assert(!sh_map_group_founding(sh_map_group_get(&m, 2)));
	REFUSED(sh_map_add_replica(&m, 9, 4, 0, msg), SHOAL_E_IN_USE);
	REFUSED(sh_map_remove_replica(&m, 9, 1, msg), SHOAL_E_IN_USE);
	REFUSED(sh_map_group_founded(&m, 2, msg), SHOAL_E_VALIDATION);
	REFUSED(sh_map_group_founded(&m, 42, msg), SHOAL_E_NOT_FOUND);

	/* Encoded and decoded as it is. */
	size_t n = sh_map_encoded_size(&m);
	uint8_t *buf = sh_malloc(n);
	ck_assert_uint_eq(sh_map_encode(&m, buf), n);
	sh_map d;
	ck_assert_int_eq(sh_map_decode(buf, n, &d, msg), SHOAL_OK);
	ck_assert(sh_map_equal(&m, &d));
	ck_assert(sh_map_group_founding(sh_map_group_get(&d, 9)));
	sh_map_fini(&d);
	/* One founder among voters: refused by the check (and the decoder). */
	sh_map_group *mg = (sh_map_group *)sh_map_group_get(&m, 9);
	mg->replicas[1].voter = 1;
	ck_assert(!sh_map_check(&m, msg));
	ck_assert_uint_eq(sh_map_encode(&m, buf), n);
	ck_assert_int_eq(sh_map_decode(buf, n, &d, msg), SHOAL_E_SERIALIZATION);
	sh_map_fini(&d);
	mg->replicas[1].voter = SH_MAP_FOUNDER;
	sh_free(buf);

	DONE(sh_map_group_founded(&m, 9, msg));
	ck_assert(!sh_map_group_founding(sh_map_group_get(&m, 9)));
	ck_assert_uint_eq(sh_map_group_get(&m, 9)->replicas[0].voter, 1);
	DONE(sh_map_add_replica(&m, 9, 4, 1, msg));
	sh_map_fini(&m);
}
END_TEST

/* A table enters the map placed as it was placed statically -- where its
 * items already are -- also once groups were added since the birth (shoal
 * admin add-group, auto_groups): those hold none of a statically placed
 * table's items. */
START_TEST(test_add_table_after_new_groups)
{
	char msg[SH_ERRMSG_SIZE];
	for (uint32_t groups = 2; groups <= 5; groups++)
		for (uint32_t added = 1; added <= 3; added++) {
			sh_cluster_conf c;
			make_conf(&c, 5, groups, 3);
			sh_map m;
			ck_assert_int_eq(sh_map_from_conf(&m, &c, msg), SHOAL_OK);
			uint32_t three[] = {1, 2, 3};
			for (uint32_t k = 0; k < added; k++)
				DONE(sh_map_create_group(&m, groups + k, three, 3, msg));
			uint32_t d = sh_cluster_partitions(&c);
			for (uint32_t mult = 1; mult <= 3; mult++) {
				uint32_t t = 10 * groups + mult;
				c.table_partitions = mult * d;
				DONE(sh_map_add_table(&m, t, sh_cluster_table_partitions(&c), d,
				                      msg));
				ck_assert(sh_map_check(&m, msg));
				uint64_t seed = tl_seed() + t;
				for (int k = 0; k < 1000; k++) {
					uint64_t h = tl_rand(&seed);
					ck_assert_msg(
					    sh_map_route(&m, t, h) ==
					        sh_cluster_partition_group(
					            &c, sh_cluster_partition_of(&c, h)),
					    "groups %u + %u added, %u partitions: hash %016llx "
					    "in group %u, statically %u",
					    groups, added, mult * d, (unsigned long long)h,
					    sh_map_route(&m, t, h),
					    sh_cluster_partition_group(
					        &c, sh_cluster_partition_of(&c, h)));
				}
			}
			sh_map_fini(&m);
		}
}
END_TEST

static Suite *cluster_map_suite(void)
{
	return tl_suite("cluster_map", NULL, NULL, 0,
	                TL_TESTS(test_from_conf_is_todays_placement, test_replica_mutations,
	                         test_partition_mutations, test_lookups_random, test_codec,
	                         test_nomem, test_founding_group, test_add_table_after_new_groups));
}

TL_MAIN(cluster_map_suite)
