/*
 * The router (router/): the pure logic -- retry policy, scan planning and
 * continuation, batch splitting, catalog snapshots, metrics text, the
 * partition key of a Query -- and the front door end to end against fake
 * nodes: small nng REP servers in threads that answer NodeRequests the way
 * the test scripts them (leader hints, a mini scan engine ordered by
 * placement hash, throttled batch parts, a data group that lost a table).
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "proto/wire_api.h"
#include "router/router.h"
#include "storage/index.h"
#include "tests/lib/testlib.h"

#include <nng/protocol/reqrep0/rep.h>

/* ------------------------------------------------------------------------ */
/* Cluster fixtures                                                          */
/* ------------------------------------------------------------------------ */

/* A block of 8 ports starting at the returned one, claimed as every test
 * claims its ports (tl_free_ports: the test binaries running at once stay
 * off each other's; each forked test claims its own). */
static int base_port(void)
{
	static int chosen;
	if (chosen == 0)
		chosen = tl_free_ports(8);
	return chosen;
}

/* Writes and loads a cluster file: n nodes, `groups` groups, replication
 * 3, rpc ports base + i. */
static sh_cluster_conf *make_conf(int groups, int n)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/cluster.ini", tl_tmpdir("router"));
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[cluster]\ngroups = %d\nreplication = 3\n", groups);
	for (int i = 1; i <= n; i++)
		fprintf(f, "[node.%d]\nraft = 127.0.0.1:%d\nrpc = tcp://127.0.0.1:%d\n", i,
		        base_port() + 100 * i, base_port() + i);
	fclose(f);
	sh_cluster_conf *c = sh_malloc(sizeof(*c));
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_cluster_load(path, c, msg), SHOAL_OK);
	return c;
}

/* ------------------------------------------------------------------------ */
/* Scan planning                                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_segment_ranges_tile)
{
	/* Consecutive segments meet exactly; the first starts at 0, the last
	 * ends at 2^64 - 1 (all segments for small n, samples for 10^6). */
	uint32_t totals[] = {1, 2, 3, 7, 1000, 1000000};
	for (size_t t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
		uint32_t n = totals[t];
		uint64_t lo, hi, plo, phi;
		rt_segment_range(0, n, &lo, &hi);
		ck_assert_uint_eq(lo, 0);
		rt_segment_range(n - 1, n, &lo, &hi);
		ck_assert_uint_eq(hi, UINT64_MAX);
		uint32_t step = n > 1000 ? 9973 : 1;
		for (uint32_t s = 1; s < n; s += step) {
			rt_segment_range(s - 1, n, &plo, &phi);
			rt_segment_range(s, n, &lo, &hi);
			ck_assert_uint_eq(phi + 1, lo);
			ck_assert(lo <= hi);
		}
	}
	uint64_t lo, hi;
	rt_segment_range(0, 0, &lo, &hi);
	ck_assert_uint_eq(lo, 0);
	ck_assert_uint_eq(hi, UINT64_MAX);
	/* Segment 1 of 3 is [ceil(2^64/3), ceil(2*2^64/3) - 1]. */
	rt_segment_range(1, 3, &lo, &hi);
	ck_assert_uint_eq(lo, 0x5555555555555556ull);
	ck_assert_uint_eq(hi, 0xAAAAAAAAAAAAAAAAull);
}
END_TEST

static rt_router *router_up(sh_cluster_conf *c, uint32_t deadline_ms);

/* Walks a scan plan over the partitions sh_place gives for table (the
 * scan's own walk, scan.c): checks the pieces tile [plan.lo, plan.hi] from
 * plan.start, each inside one partition, and returns how many there were;
 * groups[] gets their groups. */
static uint32_t walk_plan(rt_router *rt, uint32_t table, const rt_scan_plan *plan, uint32_t *groups,
                          uint32_t cap)
{
	uint32_t n = 0;
	uint64_t at = plan->start;
	for (;;) {
		sh_place_part part;
		sh_place_part_of(rt->place, rt->conf, table, at, &part);
		ck_assert(part.lo <= at && at <= part.hi);
		uint64_t lo, hi;
		bool more = rt_scan_part_range(plan, &part, &lo, &hi);
		ck_assert_uint_eq(lo, n == 0 ? (part.lo > plan->lo ? part.lo : plan->lo) : at);
		ck_assert(lo <= hi && hi <= part.hi && hi <= plan->hi);
		ck_assert_uint_eq(sh_place_route(rt->place, rt->conf, table, lo), part.group);
		ck_assert_uint_eq(sh_place_route(rt->place, rt->conf, table, hi), part.group);
		if (n < cap)
			groups[n] = part.group;
		n++;
		if (!more) {
			ck_assert_uint_eq(hi, plan->hi);
			return n;
		}
		at = hi + 1;
	}
}

START_TEST(test_scan_plan)
{
	sh_cluster_conf *c = make_conf(4, 3); /* 3 partitions in groups 1..3 */
	rt_router *rt = router_up(c, 400);
	rt_scan_plan p;
	/* No map partitions for table 7: the static partitions, in order. */
	ck_assert(rt_scan_plan_init(0, 0, false, 0, &p));
	ck_assert_uint_eq(p.start, 0);
	uint32_t groups[8];
	ck_assert_uint_eq(walk_plan(rt, 7, &p, groups, 8), 3);
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(groups[i], sh_cluster_partition_group(c, i));
		uint64_t lo, hi;
		sh_place_part part;
		sh_cluster_partition_range(c, i, &lo, &hi);
		sh_place_part_of(rt->place, c, 7, lo, &part);
		ck_assert_uint_eq(part.lo, lo);
		ck_assert_uint_eq(part.hi, hi);
	}

	/* Segment 1 of 2 lies in partitions 1 and 2; a start key resumes in its
	 * partition; a start key of another segment is refused. */
	ck_assert(rt_scan_plan_init(1, 2, false, 0, &p));
	ck_assert_uint_eq(p.start, 1ull << 63);
	ck_assert_uint_eq(walk_plan(rt, 7, &p, groups, 8), 2);
	ck_assert_uint_eq(groups[0], sh_cluster_partition_group(c, 1));
	ck_assert(rt_scan_plan_init(1, 2, true, UINT64_MAX - 5, &p));
	ck_assert_uint_eq(p.start, UINT64_MAX - 5);
	ck_assert_uint_eq(walk_plan(rt, 7, &p, groups, 8), 1);
	ck_assert_uint_eq(groups[0], sh_cluster_partition_group(c, 2));
	ck_assert(!rt_scan_plan_init(1, 2, true, 5, &p));

	/* Uneven partitions from the map: table 7 split three times, a piece
	 * moved to another group, one with a pending move (still served by its
	 * group); every segmentation walks them without gap or overlap. */
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_place_copy(rt->place, &m), SHOAL_OK);
	ck_assert_int_eq(
	    sh_map_add_table(&m, 7, sh_cluster_partitions(c), sh_cluster_partitions(c), msg),
	    SHOAL_OK);
	uint64_t b1 = m.parts[1].lo, b2 = m.parts[2].lo;
	ck_assert_int_eq(sh_map_split(&m, 7, 0, 1000, 3, msg), SHOAL_OK);    /* [1000, b1) -> 3 */
	ck_assert_int_eq(sh_map_split(&m, 7, 1000, 1001, 1, msg), SHOAL_OK); /* [1001, b1) -> 1 */
	ck_assert_int_eq(sh_map_split(&m, 7, b1, b1 + (1ull << 40), 2, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&m, 7, b2, 1, msg), SHOAL_OK);
	ck_assert_int_eq(sh_place_offer_map(rt->place, &m, msg), 1);
	sh_place_part parts[16];
	uint32_t np = sh_place_table_parts(rt->place, c, 7, parts, 16);
	ck_assert_uint_eq(np, 6);
	uint64_t los[] = {0, 1000, 1001, b1, b1 + (1ull << 40), b2};
	uint32_t gs[] = {1, 3, 1, 2, 2, 3};
	for (uint32_t i = 0; i < np; i++) {
		ck_assert_uint_eq(parts[i].lo, los[i]);
		ck_assert_uint_eq(parts[i].hi, i + 1 < np ? los[i + 1] - 1 : UINT64_MAX);
		ck_assert_uint_eq(parts[i].group, gs[i]);
	}
	ck_assert(rt_scan_plan_init(0, 0, false, 0, &p));
	ck_assert_uint_eq(walk_plan(rt, 7, &p, groups, 8), 6);
	ck_assert_uint_eq(groups[1], 3); /* the one-hash partition [1000, 1000] */
	ck_assert_uint_eq(groups[5], sh_cluster_partition_group(c, 2)); /* moving, not moved */
	for (uint32_t total = 1; total < 9; total++)
		for (uint32_t seg = 0; seg < total; seg++) {
			ck_assert(rt_scan_plan_init(seg, total, false, 0, &p));
			walk_plan(rt, 7, &p, groups, 8);
		}
	/* A start key in the one-hash partition resumes there. */
	ck_assert(rt_scan_plan_init(0, 1, true, 1000, &p));
	ck_assert_uint_eq(walk_plan(rt, 7, &p, groups, 8), 5);
	ck_assert_uint_eq(groups[0], 3);
	/* Another table is not affected. */
	ck_assert_uint_eq(sh_place_table_parts(rt->place, c, 8, parts, 16), 3);
	sh_map_fini(&m);
	rt_router_fini(rt);
}
END_TEST

START_TEST(test_scan_after)
{
	/* A cut page always ends the answer with the partition's key. */
	ck_assert_int_eq(rt_scan_after(0, 10, 10, true, true), RT_SCAN_PAGE);
	ck_assert_int_eq(rt_scan_after(5, 5, 10, true, false), RT_SCAN_PAGE);
	/* Last partition exhausted: done, even exactly at the limit. */
	ck_assert_int_eq(rt_scan_after(5, 5, 10, false, false), RT_SCAN_DONE);
	/* Exhausted exactly at the limit with partitions left: resume key. */
	ck_assert_int_eq(rt_scan_after(5, 5, 10, false, true), RT_SCAN_RESUME);
	ck_assert_int_eq(rt_scan_after(5, 4, 10, false, true), RT_SCAN_NEXT);
	ck_assert_int_eq(rt_scan_after(0, 4, 10, false, true), RT_SCAN_NEXT);
	/* Past 1 MB accumulated: stop after this partition. */
	ck_assert_int_eq(rt_scan_after(0, 4, ST_MAX_PAGE_BYTES, false, true), RT_SCAN_RESUME);
	ck_assert_int_eq(rt_scan_after(0, 4, ST_MAX_PAGE_BYTES - 1, false, true), RT_SCAN_NEXT);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_batch_duplicates_and_split)
{
	sh_arena a;
	sh_arena_init(&a);
	st_value *one = st_new_n(&a, "1"), *one0 = st_new_n(&a, "1.0"), *two = st_new_n(&a, "2");
	st_value *x = st_new_s(&a, "x"), *y = st_new_s(&a, "y");
	rt_batch_key k[6] = {
	    {.table = 1, .group = 3, .pk = one, .sk = x},
	    {.table = 1, .group = 1, .pk = two, .sk = x},
	    {.table = 1, .group = 3, .pk = one, .sk = y}, /* other sort key */
	    {.table = 2, .group = 2, .pk = one, .sk = x}, /* other table */
	    {.table = 1, .group = 1, .pk = two, .sk = NULL},
	};
	ck_assert_int_eq(rt_batch_find_duplicate(k, 5), -1);
	k[5] = (rt_batch_key){.table = 1, .group = 3, .pk = one0, .sk = y}; /* 1.0 == 1 */
	ck_assert_int_eq(rt_batch_find_duplicate(k, 6), 5);

	uint32_t part_of[6], groups[6];
	uint32_t np = rt_batch_split(k, 6, part_of, groups);
	ck_assert_uint_eq(np, 3);
	ck_assert_uint_eq(groups[0], 3);
	ck_assert_uint_eq(groups[1], 1);
	ck_assert_uint_eq(groups[2], 2);
	uint32_t want[6] = {0, 1, 0, 2, 1, 0};
	for (int i = 0; i < 6; i++)
		ck_assert_uint_eq(part_of[i], want[i]);
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Catalog snapshots                                                         */
/* ------------------------------------------------------------------------ */

/* A TableDefine for table `name` (hash key PK of type S, optional sort key
 * SK) in arena a. */
static Shoal__TableDefine *define(sh_arena *a, const char *name, uint32_t id, bool sort)
{
	st_key_attr attrs[2] = {{"PK", ST_S}, {"SK", ST_N}};
	st_table_def def = {
	    .name = name,
	    .key = {.hash = {"PK", ST_S}, .range = {sort ? "SK" : NULL, ST_N}},
	    .attrs = attrs,
	    .n_attrs = sort ? 2 : 1,
	};
	Shoal__TableDefine *d = sh_arena_alloc(a, sizeof(*d));
	shoal__table_define__init(d);
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_create_table_to_pb(a, &def, &d->def, msg), SHOAL_OK);
	d->table_id = id;
	d->created_ms = 1700000000000 + id;
	return d;
}

START_TEST(test_catalog_snapshots)
{
	sh_arena a;
	sh_arena_init(&a);
	Shoal__TableDefine *defs[4] = {define(&a, "zeta", 3, false), define(&a, "alpha", 1, true),
	                               NULL, define(&a, "mid", 2, false)};
	/* An entry that does not convert is skipped. */
	defs[2] = define(&a, "bad", 9, false);
	defs[2]->def->n_key_schema = 0;
	rt_catalog_snap *s;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(rt_catalog_snap_build(&a, defs, 4, &s, msg), SHOAL_OK);
	ck_assert_ptr_null(a.head); /* the arena moved into the snapshot */
	ck_assert_uint_eq(s->n, 3);
	ck_assert_str_eq(s->tables[0].name, "alpha");
	const rt_table *t = rt_catalog_find(s, "alpha");
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->id, 1);
	ck_assert_uint_eq(t->def.id, 1);
	ck_assert_str_eq(t->def.key.range.name, "SK");
	ck_assert_int_eq(t->def.created_ms, 1700000000001);
	ck_assert_ptr_eq(t->pb, defs[1]);
	ck_assert_uint_eq(rt_catalog_find(s, "zeta")->id, 3);
	ck_assert_ptr_null(rt_catalog_find(s, "bad"));
	ck_assert_ptr_null(rt_catalog_find(s, "nope"));

	/* A reader keeps its version alive across an install. */
	rt_catalog c;
	ck_assert_int_eq(rt_catalog_init(&c), SHOAL_OK);
	ck_assert_ptr_null(rt_catalog_acquire(&c));
	rt_catalog_install(&c, s);
	rt_catalog_snap *held = rt_catalog_acquire(&c);
	ck_assert_ptr_eq(held, s);
	sh_arena b;
	sh_arena_init(&b);
	Shoal__TableDefine *d2[1] = {define(&b, "other", 5, false)};
	rt_catalog_snap *s2;
	ck_assert_int_eq(rt_catalog_snap_build(&b, d2, 1, &s2, msg), SHOAL_OK);
	rt_catalog_install(&c, s2);
	ck_assert_uint_eq(rt_catalog_find(held, "mid")->id, 2); /* still readable */
	rt_catalog_release(held);
	rt_catalog_snap *now = rt_catalog_acquire(&c);
	ck_assert_ptr_eq(now, s2);
	ck_assert_ptr_null(rt_catalog_find(now, "mid"));
	rt_catalog_release(now);
	rt_catalog_fini(&c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Query partition key, key routing (storage/route.h)                        */
/* ------------------------------------------------------------------------ */

START_TEST(test_query_partition_key)
{
	sh_arena a;
	sh_arena_init(&a);
	st_key_schema ks = {.hash = {"PK", ST_S}, .range = {"SK", ST_N}};
	st_table_def t = {.name = "tbl", .id = 7, .key = ks};
	st_query_route_plan plan;
	st_value *vals = st_new_map(&a, 2);
	st_map_set(&a, vals, ":p", 2, st_new_s(&a, "user#1"));
	st_map_set(&a, vals, ":s", 2, st_new_n(&a, "5"));
	st_query_req q = {.table = "tbl", .key_condition = "SK > :s AND PK = :p", .forward = true};
	q.attrs.values = vals;
	const st_value *pk;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_OK);
	pk = plan.pk;
	ck_assert_uint_eq(plan.n, 1);
	ck_assert(plan.hash[0] == st_key_hash(7, pk));
	ck_assert_int_eq(pk->type, ST_S);
	ck_assert_int_eq(pk->u.str.len, 6);
	ck_assert(memcmp(pk->u.str.ptr, "user#1", 6) == 0);

	/* The errors the node would give, in its order: unused values before
	 * the key schema. */
	q.key_condition = "SK > :s";
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "unused in expressions: keys: {:p}"));
	st_value *only_s = st_new_map(&a, 1);
	st_map_set(&a, only_s, ":s", 2, st_new_n(&a, "5"));
	q.attrs.values = only_s;
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "Query condition missed key schema element: PK");
	q.attrs.values = vals;
	q.key_condition = "PK = :p";
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "unused in expressions"));
	q.key_condition = "PK = :p AND SK > :s";
	q.select = ST_SELECT_SPECIFIC_ATTRIBUTES;
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "SPECIFIC_ATTRIBUTES"));
	q.select = ST_SELECT_DEFAULT;
	q.key_condition = NULL;
	ck_assert_int_eq(st_query_route(&q, &t, NULL, &a, &plan, msg), SHOAL_E_VALIDATION);

	/* On a GSI with write shards: one placement hash per shard. */
	st_index_def gsi = {
	    .name = "g", .id = 3, .key = {{"SK", ST_N}, {NULL, ST_NONE}}, .write_shards = 4};
	q.key_condition = "SK = :s";
	q.index = "g";
	q.attrs.values = only_s;
	ck_assert_int_eq(st_query_route(&q, &t, &gsi, &a, &plan, msg), SHOAL_OK);
	ck_assert_uint_eq(plan.n, 4);
	for (uint32_t s = 0; s < 4; s++)
		ck_assert(plan.hash[s] == st_index_hash(7, 3, s, plan.pk));
	q.index = NULL;

	/* Keys and items against a schema. */
	st_value *key = st_new_map(&a, 2);
	st_map_set(&a, key, "PK", 2, st_new_s(&a, "k"));
	const st_value *sk;
	ck_assert_int_eq(st_route_key(&ks, key, false, &pk, &sk, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "The provided key element does not match the schema");
	ck_assert_int_eq(st_route_key(&ks, key, true, &pk, &sk, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "One or more parameter values were invalid: Missing the key SK in "
	                      "the item");
	st_map_set(&a, key, "SK", 2, st_new_n(&a, "1"));
	ck_assert_int_eq(st_route_key(&ks, key, false, &pk, &sk, msg), SHOAL_OK);
	ck_assert_int_eq(pk->type, ST_S);
	ck_assert_int_eq(sk->type, ST_N);
	sh_arena_fini(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Metrics text                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_metrics_text)
{
	static rt_metrics m; /* zeroed */
	uint32_t get = wire_op_of(SHOAL__REQUEST__OP_GET_ITEM);
	ck_assert_str_eq(rt_slot_name(get), "GetItem");
	rt_metrics_request(&m, get, SHOAL_OK, 300);       /* 0.3 ms */
	rt_metrics_request(&m, get, SHOAL_E_NOMEM, 7000); /* InternalServerError */
	rt_metrics_request(&m, get, SHOAL_E_IO, 7000);    /* InternalServerError too */
	rt_metrics_request(&m, get, SHOAL_E_VALIDATION, 20000000);
	atomic_store(&m.retries[SH_OUT_NOT_LEADER], 4);
	atomic_store(&m.leader_changes, 2);
	char buf[65536];
	size_t n = rt_metrics_render(&m, NULL, buf, sizeof(buf));
	ck_assert_uint_lt(n, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_requests_total{op=\"GetItem\"} 4\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_requests_total{op=\"PutItem\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(
	    buf,
	    "shoal_router_errors_total{op=\"GetItem\",exception=\"InternalServerError\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(
	    buf,
	    "shoal_router_errors_total{op=\"GetItem\",exception=\"ValidationException\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_request_duration_seconds_bucket{op="
	                                  "\"GetItem\",le=\"0.0005\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_request_duration_seconds_bucket{op="
	                                  "\"GetItem\",le=\"0.01\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_request_duration_seconds_bucket{op="
	                                  "\"GetItem\",le=\"10\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_request_duration_seconds_bucket{op="
	                                  "\"GetItem\",le=\"+Inf\"} 4\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_retries_total{reason=\"not_leader\"} 4\n"));
	ck_assert_ptr_nonnull(strstr(buf, "shoal_router_leader_changes_total 2\n"));
	ck_assert_ptr_null(strstr(buf, "op=\"Unknown\""));
	/* A short buffer: truncated, NUL-terminated, the needed length returned. */
	char small[64];
	ck_assert_uint_eq(rt_metrics_render(&m, NULL, small, sizeof(small)), n);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Fake nodes                                                                */
/* ------------------------------------------------------------------------ */

typedef struct fake_node fake_node;
/* Builds the answer to req in a (NULL: answer nothing, let it time out). */
typedef Shoal__NodeResponse *(*fake_fn)(fake_node *self, const Shoal__NodeRequest *req,
                                        sh_arena *a);

struct fake_node {
	uint32_t id;
	nng_socket sock;
	pthread_t th;
	fake_fn fn;
	atomic_int calls;
};

static fake_node fakes[4];
static uint32_t n_fakes;
static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;

/* One request's answer, as a node gives it (the request's id echoed);
 * NULL: no answer. */
static Shoal__NodeResponse *fake_one(fake_node *f, const Shoal__NodeRequest *req, sh_arena *a)
{
	atomic_fetch_add(&f->calls, 1);
	pthread_mutex_lock(&fake_mu);
	Shoal__NodeResponse *resp = f->fn(f, req, a);
	pthread_mutex_unlock(&fake_mu);
	if (resp != NULL && resp->response != NULL && req->request != NULL)
		resp->response->request_id = req->request->request_id;
	return resp;
}

/* A NodeRequest batch as a node answers it: every member, in order (a
 * member without an answer leaves the whole batch unanswered). */
static Shoal__NodeResponse *fake_batch(fake_node *f, const Shoal__NodeRequest *req, sh_arena *a)
{
	Shoal__NodeResponse *nr = sh_arena_alloc(a, sizeof(*nr));
	shoal__node_response__init(nr);
	nr->batch = sh_arena_calloc(a, req->n_batch, sizeof(*nr->batch));
	for (size_t i = 0; i < req->n_batch; i++) {
		ProtobufCAllocator alloc;
		wire_arena_allocator(&alloc, a);
		Shoal__NodeRequest *m =
		    shoal__node_request__unpack(&alloc, req->batch[i].len, req->batch[i].data);
		ck_assert_ptr_nonnull(m);
		Shoal__NodeResponse *r = fake_one(f, m, a);
		if (r == NULL)
			return NULL;
		ck_assert_int_eq(
		    wire_pack(a, &r->base, &nr->batch[i].data, &nr->batch[i].len, NULL), SHOAL_OK);
		nr->n_batch++;
	}
	return nr;
}

static void *fake_loop(void *arg)
{
	fake_node *f = arg;
	for (;;) {
		void *buf;
		size_t len;
		if (nng_recv(f->sock, &buf, &len, NNG_FLAG_ALLOC) != 0)
			return NULL;
		Shoal__NodeRequest *req = shoal__node_request__unpack(NULL, len, buf);
		nng_free(buf, len);
		if (req == NULL)
			continue;
		sh_arena a;
		sh_arena_init(&a);
		Shoal__NodeResponse *resp =
		    req->n_batch > 0 ? fake_batch(f, req, &a) : fake_one(f, req, &a);
		uint8_t *out;
		size_t out_len;
		if (resp != NULL && wire_pack(&a, &resp->base, &out, &out_len, NULL) == SHOAL_OK)
			nng_send(f->sock, out, out_len, 0);
		shoal__node_request__free_unpacked(req, NULL);
		sh_arena_fini(&a);
	}
}

static void fakes_start(const sh_cluster_conf *c, fake_fn fn)
{
	n_fakes = c->n_nodes;
	for (uint32_t i = 0; i < n_fakes; i++) {
		fake_node *f = &fakes[i];
		f->id = c->nodes[i].id;
		f->fn = fn;
		atomic_store(&f->calls, 0);
		ck_assert_int_eq(nng_rep0_open(&f->sock), 0);
		ck_assert_int_eq(nng_listen(f->sock, c->nodes[i].rpc, NULL, 0), 0);
		ck_assert_int_eq(pthread_create(&f->th, NULL, fake_loop, f), 0);
	}
}

static void fakes_stop(void)
{
	for (uint32_t i = 0; i < n_fakes; i++) {
		nng_close(fakes[i].sock);
		pthread_join(fakes[i].th, NULL);
	}
	n_fakes = 0;
}

static Shoal__NodeResponse *answer(sh_arena *a, int code, const char *message)
{
	Shoal__NodeResponse *nr = sh_arena_alloc(a, sizeof(*nr));
	Shoal__Response *r = sh_arena_alloc(a, sizeof(*r));
	shoal__node_response__init(nr);
	shoal__response__init(r);
	nr->response = r;
	if (code != SHOAL_OK)
		wire_response_set_error(a, r, code, message, NULL, NULL);
	return nr;
}

/* The fake catalog: table "tbl" (id 7, hash key PK of type S). */
static Shoal__NodeResponse *catalog_answer(sh_arena *a)
{
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	nr->catalog = sh_arena_alloc(a, sizeof(*nr->catalog));
	nr->catalog[0] = define(a, "tbl", 7, false);
	nr->n_catalog = 1;
	return nr;
}

static rt_router *router_up(sh_cluster_conf *c, uint32_t deadline_ms)
{
	static rt_router rt;
	rt_options o;
	rt_options_default(&o);
	o.deadline_ms = deadline_ms;
	o.attempt_ms = 300;
	o.send_ms = 200;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(rt_router_init(&rt, c, &o, msg), SHOAL_OK);
	return &rt;
}

/* Packs req, runs the front door, unpacks the answer into a. */
static Shoal__Response *roundtrip(rt_router *rt, sh_arena *a, Shoal__Request *req)
{
	uint8_t *buf, *out;
	size_t len, out_len;
	ck_assert_int_eq(wire_pack(a, &req->base, &buf, &len, NULL), SHOAL_OK);
	ck_assert_int_eq(rt_handle(rt, a, buf, len, &out, &out_len), SHOAL_OK);
	ProtobufCAllocator alloc;
	wire_arena_allocator(&alloc, a);
	Shoal__Response *resp;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_unpack_response(&alloc, out, out_len, &resp, msg), SHOAL_OK);
	ck_assert_uint_eq(resp->request_id, req->request_id);
	return resp;
}

static Shoal__Item *key_item(sh_arena *a, const char *pk)
{
	st_value *k = st_new_map(a, 1);
	st_map_set(a, k, "PK", 2, st_new_s(a, pk));
	Shoal__Item *it;
	ck_assert_int_eq(wire_item_to_pb(a, k, &it, NULL), SHOAL_OK);
	return it;
}

static Shoal__Request *get_request(sh_arena *a, const char *table, const char *pk, bool consistent)
{
	Shoal__Request *req = sh_arena_alloc(a, sizeof(*req));
	Shoal__GetItemRequest *g = sh_arena_alloc(a, sizeof(*g));
	shoal__request__init(req);
	shoal__get_item_request__init(g);
	req->request_id = 42;
	req->op_case = SHOAL__REQUEST__OP_GET_ITEM;
	req->get_item = g;
	if (table != NULL)
		WIRE_SET(g, table_name, (char *)table);
	g->key = key_item(a, pk);
	g->consistent_read = consistent;
	return req;
}

/* ------------------------------------------------------------------------ */
/* Front door without any node                                               */
/* ------------------------------------------------------------------------ */

START_TEST(test_front_door_alone)
{
	rt_router *rt = router_up(make_conf(4, 3), 400);
	sh_arena a;
	sh_arena_init(&a);

	/* Validation at the router: no node is asked. */
	Shoal__Request *req = get_request(&a, NULL, "k", false);
	Shoal__Response *resp = roundtrip(rt, &a, req);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message, "1 validation error detected: Value null at 'tableName' "
	                                "failed to satisfy constraint: Member must not be null");

	Shoal__TransactWriteItemsRequest tw = SHOAL__TRANSACT_WRITE_ITEMS_REQUEST__INIT;
	Shoal__Request treq = SHOAL__REQUEST__INIT;
	treq.request_id = 7;
	treq.op_case = SHOAL__REQUEST__OP_TRANSACT_WRITE_ITEMS;
	treq.transact_write_items = &tw;
	resp = roundtrip(rt, &a, &treq);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message,
	                 "1 validation error detected: Value '[]' at 'transactItems' failed to "
	                 "satisfy constraint: Member must have length greater than or equal to 1");
	ck_assert_uint_eq(resp->request_id, 7);

	Shoal__Request empty = SHOAL__REQUEST__INIT;
	empty.request_id = 8;
	resp = roundtrip(rt, &a, &empty);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_UNKNOWN_OPERATION);

	uint8_t junk[] = {0x0a, 0xff, 0xff}, *out;
	size_t out_len;
	ck_assert_int_eq(rt_handle(rt, &a, junk, sizeof(junk), &out, &out_len), SHOAL_OK);
	Shoal__Response *r2 = shoal__response__unpack(NULL, out_len, out);
	ck_assert_ptr_nonnull(r2);
	ck_assert_int_eq(r2->status, SHOAL__STATUS__STATUS_SERIALIZATION);
	shoal__response__free_unpacked(r2, NULL);

	/* Nothing listens: the catalog cannot load, ServiceUnavailable at the
	 * deadline (400 ms), not later. */
	int64_t t0 = rt_now_ms();
	resp = roundtrip(rt, &a, get_request(&a, "tbl", "k", false));
	int64_t took = rt_now_ms() - t0;
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_UNAVAILABLE);
	ck_assert_int_ge(took, 300);
	ck_assert_int_lt(took, 2000);
	ck_assert_uint_gt(atomic_load(&rt->metrics.retries[SH_OUT_UNREACHABLE]), 0);
	ck_assert_uint_eq(
	    atomic_load(&rt->metrics.requests[wire_op_of(SHOAL__REQUEST__OP_GET_ITEM)]), 2);
	sh_arena_fini(&a);
	rt_router_fini(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Leader hints                                                              */
/* ------------------------------------------------------------------------ */

/* Node 3 leads everything; the others point at it. */
static Shoal__NodeResponse *leader3(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (self->id != 3) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = 3;
		return nr;
	}
	if (req->list_catalog)
		return catalog_answer(a);
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__GetItemResponse *g = sh_arena_alloc(a, sizeof(*g));
	shoal__get_item_response__init(g);
	g->item = req->request->get_item->key;
	nr->response->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
	nr->response->get_item = g;
	return nr;
}

START_TEST(test_leader_hints)
{
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, leader3);
	rt_router *rt = router_up(c, 5000);
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Response *resp = roundtrip(rt, &a, get_request(&a, "tbl", "k1", true));
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_OK);
	ck_assert_int_eq(resp->result_case, SHOAL__RESPONSE__RESULT_GET_ITEM);
	ck_assert_ptr_nonnull(resp->get_item->item);
	ck_assert_uint_eq(atomic_load(&rt->leader[0]), 3);
	uint64_t retries = atomic_load(&rt->metrics.retries[SH_OUT_NOT_LEADER]);
	ck_assert_uint_gt(retries, 0);
	/* Known leaders: no more redirects. */
	for (int i = 0; i < 5; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "k%d", i);
		resp = roundtrip(rt, &a, get_request(&a, "tbl", pk, true));
		ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_OK);
	}
	/* Groups asked have learnt leader 3; the others keep their first replica. */
	for (uint32_t g = 0; g < 4; g++) {
		uint32_t reps[3];
		sh_cluster_replicas(rt->conf, g, reps);
		uint32_t l = atomic_load(&rt->leader[g]);
		ck_assert(l == 3 || l == reps[0]);
	}
	ck_assert_uint_le(atomic_load(&rt->metrics.retries[SH_OUT_NOT_LEADER]), retries + 3);
	/* With the leaders known, a request is one message to node 3. */
	uint64_t sent = atomic_load(&rt->nodes[2].lanes[RT_CLASS_WAIT].messages);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(roundtrip(rt, &a, get_request(&a, "tbl", "k1", true))->status,
		                 SHOAL__STATUS__STATUS_OK);
	ck_assert_uint_eq(atomic_load(&rt->nodes[2].lanes[RT_CLASS_WAIT].messages), sent + 5);
	/* An unknown table after a refresh. */
	resp = roundtrip(rt, &a, get_request(&a, "nope", "k", true));
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_NOT_FOUND);
	ck_assert_str_eq(resp->message, "Requested resource not found: Table: nope not found");
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The cluster map: a refresh on a stranger's leader hint, rt_nodes growing, */
/* Admin                                                                     */
/* ------------------------------------------------------------------------ */

/* What the fake cluster's map is now (map_get answers it), and the group
 * whose voters moved: node 4 leads it, the others point there. */
static uint8_t *moved_map;
static size_t moved_len;
static uint64_t moved_epoch;
static uint32_t moved_group;
static int map_changes;      /* map_change requests seen */
static int map_change_races; /* ... the first ones answered WRONG_EPOCH */

static Shoal__NodeResponse *mover(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (req->map_get) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		nr->map.data = moved_map;
		nr->map.len = moved_len;
		nr->epoch = moved_epoch;
		return nr;
	}
	if (req->map_change != NULL) {
		if (map_changes++ < map_change_races)
			return answer(a, SHOAL_E_WRONG_EPOCH, "the cluster map changed meanwhile");
		ck_assert_int_eq(req->map_change->action_case,
		                 SHOAL__ADMIN_REQUEST__ACTION_ADD_NODE);
		sh_map m;
		char msg[SH_ERRMSG_SIZE];
		ck_assert_int_eq(sh_map_decode(moved_map, moved_len, &m, msg), SHOAL_OK);
		sh_map_node n = {.id = req->map_change->add_node->id, .raft_port = 1};
		snprintf(n.raft_host, sizeof(n.raft_host), "127.0.0.1");
		snprintf(n.rpc, sizeof(n.rpc), "%s", req->map_change->add_node->rpc);
		ck_assert_int_eq(sh_map_add_node(&m, &n, msg), SHOAL_OK);
		free(moved_map);
		moved_len = sh_map_encoded_size(&m);
		moved_map = malloc(moved_len);
		sh_map_encode(&m, moved_map);
		moved_epoch = m.epoch;
		sh_map_fini(&m);
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		nr->map.data = moved_map;
		nr->map.len = moved_len;
		nr->epoch = moved_epoch;
		return nr;
	}
	if (req->list_catalog)
		return catalog_answer(a);
	if (req->group_status) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		nr->status = sh_arena_alloc(a, sizeof(*nr->status));
		shoal__group_status__init(nr->status);
		nr->status->role = (char *)(self->id == 4 ? "leader" : "follower");
		return nr;
	}
	bool leads = req->group == moved_group ? self->id == 4 : self->id == 1;
	if (!leads) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = req->group == moved_group ? 4 : 1;
		return nr;
	}
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__GetItemResponse *g = sh_arena_alloc(a, sizeof(*g));
	shoal__get_item_response__init(g);
	g->item = req->request->get_item->key;
	nr->response->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
	nr->response->get_item = g;
	return nr;
}

START_TEST(test_map_moves)
{
	sh_cluster_conf *c = make_conf(4, 3);
	/* The map after node 4 joined and took node 1's place in the group
	 * of key "k1": what the router must learn by itself. */
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_map_from_conf(&m, c, msg), SHOAL_OK);
	sh_arena a;
	sh_arena_init(&a);
	moved_group = sh_cluster_partition_group(
	    c, sh_cluster_partition_of(c, st_key_hash(7, st_new_s(&a, "k1"))));
	sh_map_node n4 = {.id = 4, .raft_port = (uint16_t)(base_port() + 400)};
	snprintf(n4.raft_host, sizeof(n4.raft_host), "127.0.0.1");
	snprintf(n4.rpc, sizeof(n4.rpc), "tcp://127.0.0.1:%d", base_port() + 4);
	const sh_map_group *g = sh_map_group_get(&m, moved_group);
	uint32_t first = g->replicas[0].node;
	ck_assert_int_eq(sh_map_add_node(&m, &n4, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_add_replica(&m, moved_group, 4, first, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_promote(&m, moved_group, 4, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_remove_replica(&m, moved_group, first, msg), SHOAL_OK);
	moved_len = sh_map_encoded_size(&m);
	moved_map = malloc(moved_len);
	sh_map_encode(&m, moved_map);
	moved_epoch = m.epoch;
	sh_map_fini(&m);

	fakes_start(c, mover);
	fake_node *f4 = &fakes[n_fakes++];
	f4->id = 4;
	f4->fn = mover;
	atomic_store(&f4->calls, 0);
	ck_assert_int_eq(nng_rep0_open(&f4->sock), 0);
	ck_assert_int_eq(nng_listen(f4->sock, n4.rpc, NULL, 0), 0);
	ck_assert_int_eq(pthread_create(&f4->th, NULL, fake_loop, f4), 0);

	rt_router *rt = router_up(c, 5000);
	ck_assert_uint_eq(atomic_load(&rt->n_nodes), 3);
	ck_assert_uint_eq(sh_place_epoch(rt->place), 1);
	ck_assert_ptr_null(rt_node_by_id(rt, 4));

	/* A consistent read of k1: the old voters point at node 4, which the
	 * router's map does not have -- it refreshes, dials node 4, and the
	 * same call goes there. */
	Shoal__Response *resp = roundtrip(rt, &a, get_request(&a, "tbl", "k1", true));
	ck_assert_msg(resp->status == SHOAL__STATUS__STATUS_OK, "%s", resp->message);
	ck_assert_uint_eq(sh_place_epoch(rt->place), moved_epoch);
	ck_assert_uint_eq(atomic_load(&rt->n_nodes), 4);
	rt_node *rn = rt_node_by_id(rt, 4);
	ck_assert_ptr_nonnull(rn);
	ck_assert_str_eq(rn->url, n4.rpc);
	ck_assert_uint_eq(atomic_load(&rt->leader[moved_group]), 4);
	ck_assert_int_gt(atomic_load(&f4->calls), 0);
	uint32_t voters[SH_MAX_REPLICATION];
	uint32_t nv = rt_voters(rt, moved_group, voters);
	ck_assert_uint_eq(nv, 3);
	bool has4 = false, has_first = false;
	for (uint32_t k = 0; k < nv; k++)
		has4 |= voters[k] == 4, has_first |= voters[k] == first;
	ck_assert(has4 && !has_first);

	/* Admin: AddNode through group 0's leader (node 1), after two
	 * WRONG_EPOCH races; the answer's map is installed at once and the
	 * new node gets its rt_node. */
	map_changes = 0;
	map_change_races = 2;
	Shoal__Request *req = sh_arena_alloc(&a, sizeof(*req));
	Shoal__AdminRequest *ad = sh_arena_alloc(&a, sizeof(*ad));
	Shoal__NodeSpec *spec = sh_arena_alloc(&a, sizeof(*spec));
	shoal__request__init(req);
	shoal__admin_request__init(ad);
	shoal__node_spec__init(spec);
	spec->id = 5;
	spec->raft = "127.0.0.1:1";
	spec->rpc = "tcp://127.0.0.1:2";
	ad->action_case = SHOAL__ADMIN_REQUEST__ACTION_ADD_NODE;
	ad->add_node = spec;
	req->request_id = 9;
	req->op_case = SHOAL__REQUEST__OP_ADMIN;
	req->admin = ad;
	resp = roundtrip(rt, &a, req);
	ck_assert_msg(resp->status == SHOAL__STATUS__STATUS_OK, "%s", resp->message);
	ck_assert_int_eq(resp->result_case, SHOAL__RESPONSE__RESULT_ADMIN);
	ck_assert_uint_eq(resp->admin->map_epoch, moved_epoch);
	ck_assert_int_eq(map_changes, 3);
	ck_assert_uint_eq(sh_place_epoch(rt->place), moved_epoch);
	ck_assert_ptr_nonnull(rt_node_by_id(rt, 5));
	ck_assert_uint_eq(atomic_load(&rt->n_nodes), 5);

	/* The router's own checks: nothing sent. */
	spec->raft = "nowhere";
	resp = roundtrip(rt, &a, req);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_int_eq(map_changes, 3);

	/* ClusterStatus: the map's nodes (5: unreachable, no replica), its
	 * epoch and replicas; a row per replica of the map. */
	Shoal__ClusterStatusRequest csr = SHOAL__CLUSTER_STATUS_REQUEST__INIT;
	Shoal__Request sreq = SHOAL__REQUEST__INIT;
	sreq.request_id = 10;
	sreq.op_case = SHOAL__REQUEST__OP_CLUSTER_STATUS;
	sreq.cluster_status = &csr;
	resp = roundtrip(rt, &a, &sreq);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_OK);
	Shoal__ClusterStatusResponse *cs = resp->cluster_status;
	ck_assert_uint_eq(cs->map_epoch, moved_epoch);
	ck_assert_uint_eq(cs->n_nodes, 5);
	ck_assert_uint_eq(cs->n_map_groups, 4);
	ck_assert_uint_eq(cs->n_groups, 12);
	for (size_t i = 0; i < cs->n_nodes; i++) {
		ck_assert_str_eq(cs->nodes[i]->state, "active");
		ck_assert(cs->nodes[i]->reachable == (cs->nodes[i]->id != 5));
	}
	for (size_t i = 0; i < cs->n_groups; i++)
		ck_assert(cs->groups[i]->group != moved_group || cs->groups[i]->node != first);

	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
	free(moved_map);
	moved_map = NULL;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Partitions that moved: what the fake cluster serves                       */
/* ------------------------------------------------------------------------ */

/* The partitions of table 7 the fake groups really serve (NULL: the static
 * placement, no check), and the map map_get hands out (NULL: none). */
static sh_map *truth;
static uint8_t *served_map;
static size_t served_len;

static Shoal__NodeResponse *map_answer(sh_arena *a)
{
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	if (served_map != NULL) {
		sh_map m;
		ck_assert_int_eq(sh_map_decode(served_map, served_len, &m, NULL), SHOAL_OK);
		nr->epoch = m.epoch;
		sh_map_fini(&m);
		nr->map.data = served_map;
		nr->map.len = served_len;
	}
	return nr;
}

static void serve_map(const sh_map *m)
{
	pthread_mutex_lock(&fake_mu);
	free(served_map);
	served_map = NULL;
	if (m != NULL) {
		served_len = sh_map_encoded_size(m);
		served_map = malloc(served_len);
		sh_map_encode(m, served_map);
	}
	pthread_mutex_unlock(&fake_mu);
}

/* Whether group serves every hash of [lo, hi] of table 7 -- in one of its
 * partitions, as a node checks a scan's range against its moved ones. */
static bool serves(uint32_t group, uint64_t lo, uint64_t hi)
{
	if (truth == NULL)
		return true;
	uint32_t p = sh_map_part_of(truth, 7, lo);
	return p != SH_MAP_NONE && truth->parts[p].group == group && sh_map_part_hi(truth, p) >= hi;
}

/* ------------------------------------------------------------------------ */
/* Scan across partitions against a mini engine                              */
/* ------------------------------------------------------------------------ */

#define SCAN_KEYS 40
static char scan_pk[SCAN_KEYS][16];
static uint64_t scan_hash[SCAN_KEYS]; /* sorted ascending, with scan_pk */

static uint64_t pk_hash(const char *s)
{
	sh_arena a;
	sh_arena_init(&a);
	uint64_t h = st_key_hash(7, st_new_s(&a, s));
	sh_arena_fini(&a);
	return h;
}

static void scan_data_init(void)
{
	for (int i = 0; i < SCAN_KEYS; i++) {
		snprintf(scan_pk[i], sizeof(scan_pk[i]), "key%d", i);
		scan_hash[i] = pk_hash(scan_pk[i]);
	}
	for (int i = 1; i < SCAN_KEYS; i++) /* insertion sort by hash */
		for (int j = i; j > 0 && scan_hash[j - 1] > scan_hash[j]; j--) {
			uint64_t h = scan_hash[j];
			scan_hash[j] = scan_hash[j - 1];
			scan_hash[j - 1] = h;
			char t[16];
			memcpy(t, scan_pk[j], 16);
			memcpy(scan_pk[j], scan_pk[j - 1], 16);
			memcpy(scan_pk[j - 1], t, 16);
		}
}

/* A storage engine in miniature: the items in [hash_lo, hash_hi], after
 * the start key, Limit, LastEvaluatedKey when more remain, last_key. */
static Shoal__NodeResponse *scanner(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (req->list_catalog)
		return catalog_answer(a);
	if (req->map_get)
		return map_answer(a);
	const Shoal__ScanRequest *s = req->request->scan;
	ck_assert_uint_eq(req->hash_lo, s->hash_lo);
	ck_assert_uint_eq(req->hash_hi, s->hash_hi);
	ck_assert(req->want_last_key);
	if (!serves(req->group, req->hash_lo, req->hash_hi))
		return answer(a, SHOAL_E_WRONG_GROUP, "partition not served by this group");
	uint64_t after = 0;
	bool has_after = false;
	if (s->exclusive_start_key != NULL) {
		char pk[64] = "";
		ProtobufCBinaryData d = s->exclusive_start_key->attrs[0]->value->s;
		memcpy(pk, d.data, d.len < 63 ? d.len : 63);
		after = pk_hash(pk);
		has_after = true;
		ck_assert(after >= req->hash_lo && after <= req->hash_hi);
	}
	uint32_t limit = WIRE_HAS(s, limit) ? (uint32_t)s->limit : 0;
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__ScanResponse *sr = sh_arena_alloc(a, sizeof(*sr));
	shoal__scan_response__init(sr);
	sr->items = sh_arena_calloc(a, SCAN_KEYS, sizeof(*sr->items));
	int last = -1;
	for (int i = 0; i < SCAN_KEYS; i++) {
		if (scan_hash[i] < req->hash_lo || scan_hash[i] > req->hash_hi)
			continue;
		if (has_after && scan_hash[i] <= after)
			continue;
		if (limit != 0 && sr->n_items == limit) {
			sr->last_evaluated_key = key_item(a, scan_pk[last]);
			break;
		}
		sr->items[sr->n_items++] = key_item(a, scan_pk[i]);
		last = i;
	}
	sr->count = sr->scanned_count = (uint32_t)sr->n_items;
	if (last >= 0)
		nr->last_key = key_item(a, scan_pk[last]);
	nr->response->result_case = SHOAL__RESPONSE__RESULT_SCAN;
	nr->response->scan = sr;
	return nr;
}

/* Pages through the whole table with Limit `limit` (0: none), segment
 * seg of total; checks every key of the segment comes exactly once, in
 * hash order. */
static void scan_all(rt_router *rt, uint32_t limit, uint32_t seg, uint32_t total)
{
	sh_arena a;
	sh_arena_init(&a);
	Shoal__ScanRequest s = SHOAL__SCAN_REQUEST__INIT;
	WIRE_SET(&s, table_name, "tbl");
	if (limit != 0)
		WIRE_SET(&s, limit, (int32_t)limit);
	if (total != 0) {
		WIRE_SET(&s, segment, (int32_t)seg);
		WIRE_SET(&s, total_segments, (int32_t)total);
	}
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_SCAN;
	req.scan = &s;
	uint64_t lo, hi;
	rt_segment_range(seg, total, &lo, &hi);
	int next = 0;
	while (next < SCAN_KEYS && scan_hash[next] < lo)
		next++;
	for (int pages = 0; pages < 100; pages++) {
		req.request_id = (uint64_t)pages + 1;
		Shoal__Response *resp = roundtrip(rt, &a, &req);
		ck_assert_msg(resp->status == 0, "scan failed: %s", resp->message);
		const Shoal__ScanResponse *sr = resp->scan;
		if (limit != 0)
			ck_assert_uint_le(sr->n_items, limit);
		ck_assert_uint_eq(sr->count, sr->n_items);
		for (size_t i = 0; i < sr->n_items; i++, next++) {
			ck_assert_int_lt(next, SCAN_KEYS);
			ProtobufCBinaryData d = sr->items[i]->attrs[0]->value->s;
			ck_assert_uint_eq(d.len, strlen(scan_pk[next]));
			ck_assert(memcmp(d.data, scan_pk[next], d.len) == 0);
		}
		if (sr->last_evaluated_key == NULL)
			break;
		s.exclusive_start_key = sr->last_evaluated_key;
	}
	int expected_end = 0;
	while (expected_end < SCAN_KEYS && scan_hash[expected_end] <= hi)
		expected_end++;
	ck_assert_int_eq(next, expected_end);
	sh_arena_fini(&a);
}

START_TEST(test_scan_across_partitions)
{
	scan_data_init();
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, scanner);
	rt_router *rt = router_up(c, 5000);
	/* Every Limit, including those that end a page exactly at a partition's
	 * end, pages through each key exactly once. */
	for (uint32_t limit = 0; limit <= SCAN_KEYS + 1; limit++)
		scan_all(rt, limit, 0, 0);
	for (uint32_t seg = 0; seg < 3; seg++) {
		scan_all(rt, 0, seg, 3);
		scan_all(rt, 2, seg, 3);
	}
	/* A start key from another segment is refused without a node. */
	sh_arena a;
	sh_arena_init(&a);
	Shoal__ScanRequest s = SHOAL__SCAN_REQUEST__INIT;
	WIRE_SET(&s, table_name, "tbl");
	WIRE_SET(&s, segment, 0);
	WIRE_SET(&s, total_segments, 2);
	s.exclusive_start_key = key_item(&a, scan_pk[SCAN_KEYS - 1]); /* highest hash */
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_SCAN;
	req.scan = &s;
	Shoal__Response *resp = roundtrip(rt, &a, &req);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_ptr_nonnull(strstr(resp->message, "Please use ExclusiveStartKey with correct "
	                                            "Segment. TotalSegments: 2 Segment: 0"));
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* Table 7 in the map (the static layout), then: partition 0 split twice at
 * key hashes so that [scan_hash[k1], scan_hash[k2] - 1] is a small
 * partition in group 3, the rest of partition 0 stays in group 1 (a split in
 * place), the last partition moved to group 1 (cut over), the middle one
 * with a pending move (still group 2). */
static sh_map *moved_truth(const sh_cluster_conf *c)
{
	static sh_map m;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_map_from_conf(&m, c, msg), SHOAL_OK);
	ck_assert_int_eq(
	    sh_map_add_table(&m, 7, sh_cluster_partitions(c), sh_cluster_partitions(c), msg),
	    SHOAL_OK);
	uint64_t b1 = m.parts[1].lo, b2 = m.parts[2].lo;
	int in0 = 0;
	while (in0 < SCAN_KEYS && scan_hash[in0] < b1)
		in0++;
	ck_assert_int_ge(in0, 4); /* ~13 of the 40 keys hash into partition 0 */
	ck_assert_int_eq(sh_map_split(&m, 7, 0, scan_hash[1], 3, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_split(&m, 7, scan_hash[1], scan_hash[3], 1, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_move_partition(&m, 7, b2, 1, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&m, 7, b1, 3, msg), SHOAL_OK);
	return &m;
}

START_TEST(test_scan_moved_partitions)
{
	/* The router starts with the file's placement; the groups serve the
	 * moved partitions and answer WRONG_GROUP elsewhere: the router learns
	 * the map and every page walks the uneven partitions exactly. */
	scan_data_init();
	sh_cluster_conf *c = make_conf(4, 3);
	truth = moved_truth(c);
	serve_map(truth);
	fakes_start(c, scanner);
	rt_router *rt = router_up(c, 5000);
	for (uint32_t limit = 0; limit <= SCAN_KEYS + 1; limit++)
		scan_all(rt, limit, 0, 0);
	for (uint32_t total = 2; total <= 5; total++)
		for (uint32_t seg = 0; seg < total; seg++) {
			scan_all(rt, 0, seg, total);
			scan_all(rt, 1, seg, total);
		}
	ck_assert_uint_eq(sh_place_epoch(rt->place), truth->epoch);
	ck_assert_uint_gt(atomic_load(&rt->metrics.wrong_group), 0);
	uint64_t wg = atomic_load(&rt->metrics.wrong_group);
	scan_all(rt, 3, 0, 0);
	ck_assert_uint_eq(atomic_load(&rt->metrics.wrong_group), wg); /* the map is known */
	rt_router_fini(rt);
	fakes_stop();
	sh_map_fini(truth);
	truth = NULL;
	serve_map(NULL);
}
END_TEST

static atomic_int placer_groups[4]; /* successful item answers, by group */

/* Items of table 7 where `truth` puts them: GetItem echoes the key,
 * BatchWriteItem succeeds; anything sent to another group: WRONG_GROUP. */
static Shoal__NodeResponse *placer(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	(void)self;
	if (req->list_catalog)
		return catalog_answer(a);
	if (req->map_get)
		return map_answer(a);
	const Shoal__Request *r = req->request;
	if (r->op_case == SHOAL__REQUEST__OP_BATCH_WRITE_ITEM) {
		const Shoal__TableWriteRequests *tw = r->batch_write_item->request_items[0];
		for (size_t i = 0; i < tw->n_requests; i++) {
			ProtobufCBinaryData d =
			    tw->requests[i]->put_request->item->attrs[0]->value->s;
			char pk[64] = "";
			memcpy(pk, d.data, d.len < 63 ? d.len : 63);
			uint64_t h = pk_hash(pk);
			if (!serves(req->group, h, h))
				return answer(a, SHOAL_E_WRONG_GROUP, "moved");
		}
		atomic_fetch_add(&placer_groups[req->group], 1);
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		Shoal__BatchWriteItemResponse *bw = sh_arena_alloc(a, sizeof(*bw));
		shoal__batch_write_item_response__init(bw);
		nr->response->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
		nr->response->batch_write_item = bw;
		return nr;
	}
	ck_assert_int_eq(r->op_case, SHOAL__REQUEST__OP_GET_ITEM);
	ProtobufCBinaryData d = r->get_item->key->attrs[0]->value->s;
	char pk[64] = "";
	memcpy(pk, d.data, d.len < 63 ? d.len : 63);
	uint64_t h = pk_hash(pk);
	if (!serves(req->group, h, h))
		return answer(a, SHOAL_E_WRONG_GROUP, "moved");
	atomic_fetch_add(&placer_groups[req->group], 1);
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__GetItemResponse *g = sh_arena_alloc(a, sizeof(*g));
	shoal__get_item_response__init(g);
	g->item = r->get_item->key;
	nr->response->result_case = SHOAL__RESPONSE__RESULT_GET_ITEM;
	nr->response->get_item = g;
	return nr;
}

static Shoal__Request *batch_write(sh_arena *a, int n, bool dup);

static Shoal__Request *batch_of(sh_arena *a, const char *const *pks, int n)
{
	Shoal__Request *req = batch_write(a, n, false);
	Shoal__TableWriteRequests *tw = req->batch_write_item->request_items[0];
	for (int i = 0; i < n; i++)
		tw->requests[i]->put_request->item = key_item(a, pks[i]);
	return req;
}

START_TEST(test_wrong_group_retry)
{
	scan_data_init();
	sh_cluster_conf *c = make_conf(4, 3);
	truth = moved_truth(c);
	/* A key of the moved partition (its group changed) and one that
	 * stays where the file put it. */
	const char *moved = NULL, *stays = NULL;
	uint32_t moved_was = 0;
	for (int i = 0; i < SCAN_KEYS && moved == NULL; i++) {
		uint32_t was =
		    sh_cluster_partition_group(c, sh_cluster_partition_of(c, scan_hash[i]));
		if (sh_map_route(truth, 7, scan_hash[i]) != was) {
			moved = scan_pk[i];
			moved_was = was;
		}
	}
	for (int i = 0; i < SCAN_KEYS && stays == NULL; i++) {
		uint32_t was =
		    sh_cluster_partition_group(c, sh_cluster_partition_of(c, scan_hash[i]));
		if (sh_map_route(truth, 7, scan_hash[i]) == was && was != moved_was)
			stays = scan_pk[i]; /* another part of a batch with `moved` */
	}
	ck_assert(moved != NULL && stays != NULL);
	serve_map(NULL); /* the router cannot learn the new map yet */
	fakes_start(c, placer);
	rt_router *rt = router_up(c, 600);
	sh_arena a;
	sh_arena_init(&a);

	/* The map never comes: retried until the deadline, then
	 * ServiceUnavailable, never the internal code. */
	int64_t t0 = rt_now_ms();
	Shoal__Response *resp = roundtrip(rt, &a, get_request(&a, "tbl", moved, true));
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_UNAVAILABLE);
	/* Said as the wrong-group pause that would pass the deadline -- or,
	 * when the deadline passes during an attempt (a loaded machine: CI
	 * once answered otherwise here), as that attempt's. */
	ck_assert_msg(strstr(resp->message, "moving between storage groups") != NULL ||
	                  strstr(resp->message, "did not answer within the deadline") != NULL,
	              "%s", resp->message);
	ck_assert_int_ge(rt_now_ms() - t0, 300);
	ck_assert_uint_gt(atomic_load(&rt->metrics.wrong_group), 3); /* 10, 20, 40 ... ms */
	static char text[1 << 17];
	rt_metrics_render(&rt->metrics, rt, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(text, "shoal_router_wrong_group_total "));

	/* A batch: the part that reached its group is applied once, the moved
	 * one comes back unprocessed (not sent again after the others). */
	const char *both[] = {stays, moved};
	resp = roundtrip(rt, &a, batch_of(&a, both, 2));
	ck_assert_msg(resp->status == SHOAL__STATUS__STATUS_OK, "%s", resp->message);
	ck_assert_uint_eq(resp->batch_write_item->n_unprocessed_items, 1);
	ck_assert_uint_eq(resp->batch_write_item->unprocessed_items[0]->n_requests, 1);
	int applied = 0;
	for (int g = 0; g < 4; g++)
		applied += atomic_load(&placer_groups[g]);
	ck_assert_int_eq(applied, 1);

	/* The map appears: the same requests succeed, at the new group. */
	serve_map(truth);
	uint32_t to = sh_map_route(truth, 7, pk_hash(moved));
	resp = roundtrip(rt, &a, get_request(&a, "tbl", moved, true));
	ck_assert_msg(resp->status == SHOAL__STATUS__STATUS_OK, "%s", resp->message);
	ck_assert_uint_eq(sh_place_epoch(rt->place), truth->epoch);
	ck_assert_int_eq(atomic_load(&placer_groups[to]), 1);
	resp = roundtrip(rt, &a, batch_of(&a, &moved, 1)); /* all moved: run again */
	ck_assert_msg(resp->status == SHOAL__STATUS__STATUS_OK, "%s", resp->message);
	ck_assert_uint_eq(resp->batch_write_item->n_unprocessed_items, 0);
	ck_assert_int_eq(atomic_load(&placer_groups[to]), 2);

	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
	sh_map_fini(truth);
	truth = NULL;
	serve_map(NULL);
}
END_TEST

/* A wrong-group pause (job.c) ends as soon as a newer map is installed,
 * not at its timer (map.c, rt_map_sleeper_add): a pause of 60 s here, which
 * a map offered while it runs ends within the poll's 10 s; the same epoch
 * again ends nothing, and a pause begun once the map is newer does not
 * wait at all. */
static atomic_bool pause_ended;

static void pause_done(rt_call *c)
{
	(void)c;
	atomic_store(&pause_ended, true);
}

static void wait_pause_ended(const char *what)
{
	for (int64_t until = rt_now_ms() + 10000; !atomic_load(&pause_ended); nng_msleep(2))
		ck_assert_msg(rt_now_ms() < until, "%s: the pause did not end", what);
}

START_TEST(test_wrong_group_pause_ends_with_map)
{
	scan_data_init();
	sh_cluster_conf *c = make_conf(4, 3);
	truth = moved_truth(c);
	serve_map(NULL);
	fakes_start(c, placer);
	rt_router *rt = router_up(c, 600);
	uint64_t e0 = sh_place_epoch(rt->place);
	ck_assert_uint_gt(truth->epoch, e0);
	rt_call *call = sh_calloc(1, sizeof(*call));
	ck_assert_ptr_nonnull(call);
	call->rt = rt;
	call->done = pause_done;
	call->sleep_ms = 60000;
	call->wake_on_map = true;
	call->wake_epoch = e0;
	atomic_store(&pause_ended, false);
	rt_call_start(call);
	ck_assert(call->listed);
	/* While a call waits for a map, the refresher asks every
	 * RT_MAP_MOVED_MS without a WRONG_GROUP's poke (none comes here): 10
	 * refreshes, where its idle period (1 s) would give 5 in the 5 s. */
	uint64_t r0 = rt_map_refreshes(rt);
	for (int64_t until = rt_now_ms() + 5000; rt_map_refreshes(rt) < r0 + 10; nng_msleep(5))
		ck_assert_msg(rt_now_ms() < until, "%llu refreshes while a call waits for a map",
		              (unsigned long long)(rt_map_refreshes(rt) - r0));
	/* The birth map again: not newer, the pause goes on. */
	sh_map birth;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_map_from_conf(&birth, c, msg), SHOAL_OK);
	uint8_t *buf = sh_malloc(sh_map_encoded_size(&birth));
	size_t len = sh_map_encode(&birth, buf);
	ck_assert_int_eq(rt_map_offer(rt, buf, len, msg), 0);
	sh_free(buf);
	sh_map_fini(&birth);
	ck_assert(call->listed);
	ck_assert(!atomic_load(&pause_ended));
	/* The map that moved the partition: the pause ends now. */
	buf = sh_malloc(sh_map_encoded_size(truth));
	len = sh_map_encode(truth, buf);
	ck_assert_int_eq(rt_map_offer(rt, buf, len, msg), 1);
	sh_free(buf);
	wait_pause_ended("a newer map installed");
	ck_assert(!call->listed);
	rt_call_release(call);
	/* Begun with the newer map in place: no wait at all. */
	memset(call, 0, sizeof(*call));
	call->rt = rt;
	call->done = pause_done;
	call->sleep_ms = 60000;
	call->wake_on_map = true;
	call->wake_epoch = e0;
	atomic_store(&pause_ended, false);
	rt_call_start(call);
	ck_assert(!call->listed);
	wait_pause_ended("the map was newer already");
	rt_call_release(call);
	sh_free(call);
	rt_router_fini(rt);
	fakes_stop();
	sh_map_fini(truth);
	truth = NULL;
	serve_map(NULL);
}
END_TEST

START_TEST(test_place_base_and_gsi)
{
	/* Without map partitions a table is placed exactly as the cluster file
	 * says, and so after sh_map_add_table; a moved partition moves its base
	 * keys only, never a GSI hash; a pending move changes nothing yet. */
	scan_data_init();
	sh_cluster_conf *c = make_conf(5, 3);
	rt_router *rt = router_up(c, 400);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 2000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t h = i < 4 ? (uint64_t[]){0, 1, UINT64_MAX, UINT64_MAX - 1}[i] : x;
		uint32_t stat = sh_cluster_partition_group(c, sh_cluster_partition_of(c, h));
		ck_assert_uint_eq(rt_base_group(rt, 7, h), stat);
		ck_assert_uint_eq(rt_gsi_group(rt, h), stat);
	}
	sh_map m;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_place_copy(rt->place, &m), SHOAL_OK);
	ck_assert_int_eq(
	    sh_map_add_table(&m, 7, sh_cluster_partitions(c), sh_cluster_partitions(c), msg),
	    SHOAL_OK);
	ck_assert_int_eq(sh_place_offer_map(rt->place, &m, msg), 1);
	x = 12345;
	for (int i = 0; i < 2000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		ck_assert_uint_eq(rt_base_group(rt, 7, x),
		                  sh_cluster_partition_group(c, sh_cluster_partition_of(c, x)));
	}
	/* Partition 1 (group 2) moved to group 4 and partition 0 (group 1)
	 * moving to group 3. */
	uint64_t lo1, hi1, lo0, hi0;
	sh_cluster_partition_range(c, 1, &lo1, &hi1);
	sh_cluster_partition_range(c, 0, &lo0, &hi0);
	ck_assert_int_eq(sh_map_move_partition(&m, 7, lo1, 4, msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_begin_move(&m, 7, lo0, 3, msg), SHOAL_OK);
	ck_assert_int_eq(sh_place_offer_map(rt->place, &m, msg), 1);
	uint64_t mid = lo1 + (hi1 - lo1) / 2;
	ck_assert_uint_eq(rt_base_group(rt, 7, lo1), 4);
	ck_assert_uint_eq(rt_base_group(rt, 7, mid), 4);
	ck_assert_uint_eq(rt_base_group(rt, 7, hi1), 4);
	ck_assert_uint_eq(rt_base_group(rt, 7, hi1 + 1), 3);
	ck_assert_uint_eq(rt_base_group(rt, 7, lo0), 1); /* pending: still its group */
	ck_assert_uint_eq(rt_base_group(rt, 8, mid), 2); /* another table */
	ck_assert_uint_eq(rt_gsi_group(rt, mid), 2);     /* a GSI hash */
	/* A key through rt_group_of, and a GSI entry's hash of the same key. */
	sh_arena a;
	sh_arena_init(&a);
	for (int i = 0; i < SCAN_KEYS; i++) {
		const st_value *pk = st_new_s(&a, scan_pk[i]);
		uint64_t h = st_key_hash(7, pk);
		ck_assert_uint_eq(rt_group_of(rt, 7, pk), sh_map_route(&m, 7, h));
		uint64_t gh = st_index_hash(7, 1, 0, pk);
		ck_assert_uint_eq(rt_gsi_group(rt, gh),
		                  sh_cluster_partition_group(c, sh_cluster_partition_of(c, gh)));
	}
	sh_arena_fini(&a);
	sh_map_fini(&m);
	rt_router_fini(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Batches and repair                                                        */
/* ------------------------------------------------------------------------ */

static atomic_int writes_seen[4];
static atomic_int defines_seen[4];
static bool group1_lost_table;

/* Group 2 is throttled; group 1 has lost table "tbl" until it is defined
 * again; node 1 leads everything. */
static Shoal__NodeResponse *batcher(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (self->id != 1) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = 1;
		return nr;
	}
	if (req->list_catalog)
		return catalog_answer(a);
	if (req->define_table != NULL) {
		ck_assert_uint_eq(req->define_table->table_id, 7);
		atomic_fetch_add(&defines_seen[req->group], 1);
		if (req->group == 1)
			group1_lost_table = false;
		return answer(a, SHOAL_OK, NULL);
	}
	if (req->group == 1 && group1_lost_table)
		return answer(a, SHOAL_E_NOT_FOUND,
		              "Requested resource not found: Table: tbl not found");
	if (req->group == 2)
		return answer(a, SHOAL_E_THROUGHPUT, "throttled");
	const Shoal__BatchWriteItemRequest *bw = req->request->batch_write_item;
	ck_assert_uint_eq(bw->n_request_items, 1);
	atomic_fetch_add(&writes_seen[req->group], (int)bw->request_items[0]->n_requests);
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__BatchWriteItemResponse *r = sh_arena_alloc(a, sizeof(*r));
	shoal__batch_write_item_response__init(r);
	nr->response->result_case = SHOAL__RESPONSE__RESULT_BATCH_WRITE_ITEM;
	nr->response->batch_write_item = r;
	return nr;
}

static Shoal__Request *batch_write(sh_arena *a, int n, bool dup)
{
	Shoal__TableWriteRequests *tw = sh_arena_alloc(a, sizeof(*tw));
	shoal__table_write_requests__init(tw);
	tw->table_name = "tbl";
	tw->requests = sh_arena_calloc(a, (size_t)n, sizeof(*tw->requests));
	for (int i = 0; i < n; i++) {
		Shoal__WriteRequest *w = sh_arena_alloc(a, sizeof(*w));
		Shoal__PutRequest *p = sh_arena_alloc(a, sizeof(*p));
		shoal__write_request__init(w);
		shoal__put_request__init(p);
		char pk[16];
		snprintf(pk, sizeof(pk), "item%d", dup && i == n - 1 ? 0 : i);
		p->item = key_item(a, pk);
		w->request_case = SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST;
		w->put_request = p;
		tw->requests[tw->n_requests++] = w;
	}
	Shoal__BatchWriteItemRequest *bw = sh_arena_alloc(a, sizeof(*bw));
	shoal__batch_write_item_request__init(bw);
	bw->request_items = sh_arena_alloc(a, sizeof(*bw->request_items));
	bw->request_items[0] = tw;
	bw->n_request_items = 1;
	Shoal__Request *req = sh_arena_alloc(a, sizeof(*req));
	shoal__request__init(req);
	req->request_id = 99;
	req->op_case = SHOAL__REQUEST__OP_BATCH_WRITE_ITEM;
	req->batch_write_item = bw;
	return req;
}

START_TEST(test_batch_write_split_unprocessed_repair)
{
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, batcher);
	rt_router *rt = router_up(c, 5000);
	sh_arena a;
	sh_arena_init(&a);
	group1_lost_table = true;
	for (int g = 0; g < 4; g++) {
		atomic_store(&writes_seen[g], 0);
		atomic_store(&defines_seen[g], 0);
	}
	/* Expected split, computed the way the router must. */
	int per_group[4] = {0};
	for (int i = 0; i < 25; i++) {
		char pk[16];
		snprintf(pk, sizeof(pk), "item%d", i);
		sh_arena t;
		sh_arena_init(&t);
		per_group[rt_group_of(rt, 7, st_new_s(&t, pk))]++;
		sh_arena_fini(&t);
	}
	ck_assert_int_gt(per_group[1], 0);
	ck_assert_int_gt(per_group[2], 0);

	/* Duplicates and too many writes fail without a node. */
	Shoal__Response *resp = roundtrip(rt, &a, batch_write(&a, 5, true));
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message, "Provided list of item keys contains duplicates");
	resp = roundtrip(rt, &a, batch_write(&a, 26, false));
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_int_eq(atomic_load(&writes_seen[1]) + atomic_load(&writes_seen[3]), 0);

	resp = roundtrip(rt, &a, batch_write(&a, 25, false));
	ck_assert_msg(resp->status == 0, "%s", resp->message);
	const Shoal__BatchWriteItemResponse *bw = resp->batch_write_item;
	/* Group 2's writes come back unprocessed; group 1 was repaired. */
	ck_assert_uint_eq(bw->n_unprocessed_items, 1);
	ck_assert_str_eq(bw->unprocessed_items[0]->table_name, "tbl");
	ck_assert_uint_eq(bw->unprocessed_items[0]->n_requests, (size_t)per_group[2]);
	for (size_t i = 0; i < bw->unprocessed_items[0]->n_requests; i++) {
		const Shoal__Item *it = bw->unprocessed_items[0]->requests[i]->put_request->item;
		char pk[64] = "";
		memcpy(pk, it->attrs[0]->value->s.data, it->attrs[0]->value->s.len);
		sh_arena t;
		sh_arena_init(&t);
		ck_assert_uint_eq(rt_group_of(rt, 7, st_new_s(&t, pk)), 2);
		sh_arena_fini(&t);
	}
	ck_assert_int_eq(atomic_load(&writes_seen[1]), per_group[1]);
	ck_assert_int_eq(atomic_load(&writes_seen[3]), per_group[3]);
	ck_assert_int_eq(atomic_load(&defines_seen[1]), 1);
	ck_assert_uint_eq(atomic_load(&rt->metrics.repairs), 1);
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* A write-sharded GSI Query through fake nodes                              */
/* ------------------------------------------------------------------------ */

/* Table "gtb" (id 8): hash key PK (S); GSI "byG" (id 3): G (S) HASH, R (N)
 * RANGE, ALL, 4 write shards; index "byG1" (id 4): the same, 1 shard; an
 * LSI-less table.  Entry i: PK "p<i>", G "hot", R = 3 i + 1 (distinct, so the
 * entry order is R's), n = i, in write shard i % 4. */
#define GSI_ITEMS 23
static atomic_int shard_calls[4];
static atomic_int gsi_single_calls;

static Shoal__TableDefine *gsi_define(sh_arena *a)
{
	st_key_attr attrs[3] = {{"PK", ST_S}, {"G", ST_S}, {"R", ST_N}};
	st_index_def idx[2] = {
	    {.name = "byG", .key = {{"G", ST_S}, {"R", ST_N}}, .write_shards = 4},
	    {.name = "byG1", .key = {{"G", ST_S}, {"R", ST_N}}, .write_shards = 1},
	};
	st_table_def def = {.name = "gtb",
	                    .key = {{"PK", ST_S}, {NULL, ST_NONE}},
	                    .attrs = attrs,
	                    .n_attrs = 3,
	                    .indexes = idx,
	                    .n_indexes = 2};
	Shoal__TableDefine *d = sh_arena_alloc(a, sizeof(*d));
	shoal__table_define__init(d);
	ck_assert_int_eq(wire_create_table_to_pb(a, &def, &d->def, NULL), SHOAL_OK);
	d->table_id = 8;
	d->created_ms = 1;
	d->indexes = sh_arena_calloc(a, 2, sizeof(*d->indexes));
	const char *names[2] = {"byG", "byG1"};
	for (int i = 0; i < 2; i++) {
		Shoal__IndexState *st = sh_arena_alloc(a, sizeof(*st));
		shoal__index_state__init(st);
		st->index_name = (char *)names[i];
		st->index_id = 3 + (uint32_t)i;
		st->status = "ACTIVE";
		d->indexes[d->n_indexes++] = st;
	}
	d->next_index_id = 5;
	return d;
}

static st_value *gsi_entry(sh_arena *a, int i, bool key_only)
{
	char pk[16], r[16], n[16];
	snprintf(pk, sizeof(pk), "p%d", i);
	snprintf(r, sizeof(r), "%d", 3 * i + 1);
	snprintf(n, sizeof(n), "%d", i);
	st_value *m = st_new_map(a, 4);
	st_map_set(a, m, "PK", 2, st_new_s(a, pk));
	st_map_set(a, m, "G", 1, st_new_s(a, "hot"));
	st_map_set(a, m, "R", 1, st_new_n(a, r));
	if (!key_only)
		st_map_set(a, m, "n", 1, st_new_n(a, n));
	return m;
}

static Shoal__NodeResponse *gsi_node(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	(void)self;
	if (req->list_catalog) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		nr->catalog = sh_arena_alloc(a, sizeof(*nr->catalog));
		nr->catalog[0] = gsi_define(a);
		nr->n_catalog = 1;
		return nr;
	}
	const Shoal__QueryRequest *q = req->request->query;
	ck_assert_ptr_nonnull(q);
	ck_assert(req->any_replica);
	bool sharded = strcmp(q->index_name, "byG") == 0;
	uint32_t shard = req->index_shard;
	if (sharded) {
		/* What the router must send every shard. */
		ck_assert_uint_lt(shard, 4);
		atomic_fetch_add(&shard_calls[shard], 1);
		ck_assert(!WIRE_HAS(q, filter_expression));
		ck_assert(!WIRE_HAS(q, projection_expression));
		ck_assert_str_eq(q->select, "ALL_PROJECTED_ATTRIBUTES");
		ck_assert_ptr_null(q->expression_attribute_names); /* #n: the filter's */
		ck_assert_uint_eq(q->expression_attribute_values->n_attrs, 1); /* :g */
	} else {
		ck_assert_uint_eq(shard, 0);
		atomic_fetch_add(&gsi_single_calls, 1);
	}
	bool forward = !WIRE_HAS(q, scan_index_forward) || q->scan_index_forward;
	uint32_t limit = WIRE_HAS(q, limit) ? (uint32_t)q->limit : 0;
	double after = forward ? -1 : 1e9;
	if (q->exclusive_start_key != NULL) {
		st_value esk;
		ck_assert_int_eq(wire_item_from_pb(a, q->exclusive_start_key, &esk, NULL),
		                 SHOAL_OK);
		ck_assert_int_eq(st_value_normalize(a, &esk, NULL), SHOAL_OK);
		const st_value *r = st_map_get(&esk, "R", 1);
		ck_assert_ptr_nonnull(r);
		ck_assert_ptr_nonnull(st_map_get(&esk, "PK", 2));
		after = atof(r->u.str.ptr);
	}
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__QueryResponse *qr = sh_arena_alloc(a, sizeof(*qr));
	shoal__query_response__init(qr);
	qr->items = sh_arena_calloc(a, GSI_ITEMS, sizeof(*qr->items));
	int last = -1;
	for (int k = 0; k < GSI_ITEMS; k++) {
		int i = forward ? k : GSI_ITEMS - 1 - k;
		double r = 3 * i + 1;
		if ((sharded && (uint32_t)(i % 4) != shard) || (forward ? r <= after : r >= after))
			continue;
		if (limit != 0 && qr->n_items == limit) {
			/* Stopped at Limit: the key of the last entry read. */
			wire_item_to_pb(a, gsi_entry(a, last, true), &qr->last_evaluated_key, NULL);
			break;
		}
		wire_item_to_pb(a, gsi_entry(a, i, false), &qr->items[qr->n_items++], NULL);
		last = i;
	}
	qr->count = qr->scanned_count = (uint32_t)qr->n_items;
	nr->response->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	nr->response->query = qr;
	return nr;
}

/* Pages through index `index` with Limit `limit`; returns the n values of
 * the items in the order received ("3,4,5"), and checks the pages. */
static char *gsi_pages(rt_router *rt, const char *index, uint32_t limit, bool forward,
                       bool filtered, sh_arena *a)
{
	Shoal__QueryRequest q = SHOAL__QUERY_REQUEST__INIT;
	WIRE_SET(&q, table_name, "gtb");
	WIRE_SET(&q, index_name, (char *)index);
	WIRE_SET(&q, key_condition_expression, "G = :g");
	WIRE_SET(&q, scan_index_forward, forward);
	st_value *vals = st_new_map(a, 2);
	st_map_set(a, vals, ":g", 2, st_new_s(a, "hot"));
	if (filtered) {
		/* Keep odd n only; project n alone (the filter's placeholders
		 * must not reach the shards). */
		WIRE_SET(&q, filter_expression,
		         "#n IN (:a, :b, :c, :d, :e, :f, :h, :i, :j, :k, :l)");
		WIRE_SET(&q, projection_expression, "#n");
		st_value *names = st_new_map(a, 1);
		st_map_set(a, names, "#n", 2, st_new_s(a, "n"));
		ck_assert_int_eq(wire_names_to_pb(a, names, &q.expression_attribute_names, NULL),
		                 SHOAL_OK);
		const char *ph[] = {":a", ":b", ":c", ":d", ":e", ":f",
		                    ":h", ":i", ":j", ":k", ":l"};
		for (int i = 0; i < 11; i++) {
			char v[8];
			snprintf(v, sizeof(v), "%d", 2 * i + 1);
			st_map_set(a, vals, ph[i], 2, st_new_n(a, v));
		}
	}
	ck_assert_int_eq(wire_item_to_pb(a, vals, &q.expression_attribute_values, NULL), SHOAL_OK);
	if (limit != 0)
		WIRE_SET(&q, limit, (int32_t)limit);
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_QUERY;
	req.query = &q;
	char *out = sh_arena_alloc(a, 4096);
	size_t len = 0;
	out[0] = '\0';
	for (int pages = 0; pages < 3 * GSI_ITEMS; pages++) {
		req.request_id = (uint64_t)pages + 1;
		Shoal__Response *resp = roundtrip(rt, a, &req);
		ck_assert_msg(resp->status == 0, "query failed: %s", resp->message);
		const Shoal__QueryResponse *qr = resp->query;
		if (limit != 0)
			ck_assert_uint_le(qr->scanned_count, limit);
		ck_assert_uint_eq(qr->count, qr->n_items);
		for (size_t i = 0; i < qr->n_items; i++) {
			st_value it;
			ck_assert_int_eq(wire_item_from_pb(a, qr->items[i], &it, NULL), SHOAL_OK);
			ck_assert_int_eq(st_value_normalize(a, &it, NULL), SHOAL_OK);
			const st_value *n = st_map_get(&it, "n", 1);
			ck_assert_ptr_nonnull(n);
			if (filtered)
				ck_assert_uint_eq(it.u.map.n, 1);
			len += (size_t)snprintf(out + len, 4096 - len, "%s%.*s", len ? "," : "",
			                        (int)n->u.str.len, n->u.str.ptr);
		}
		if (qr->last_evaluated_key == NULL)
			return out;
		q.exclusive_start_key = qr->last_evaluated_key;
	}
	ck_abort_msg("no end of the index");
	return NULL;
}

START_TEST(test_gsi_sharded_query)
{
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, gsi_node);
	rt_router *rt = router_up(c, 5000);
	sh_arena a;
	sh_arena_init(&a);
	char all_fwd[512] = "", all_back[512] = "", odd_fwd[512] = "", odd_back[512] = "";
	for (int i = 0; i < GSI_ITEMS; i++) {
		int b = GSI_ITEMS - 1 - i;
		snprintf(all_fwd + strlen(all_fwd), 16, "%s%d", i ? "," : "", i);
		snprintf(all_back + strlen(all_back), 16, "%s%d", i ? "," : "", b);
		if (i % 2 == 1)
			snprintf(odd_fwd + strlen(odd_fwd), 16, "%s%d", odd_fwd[0] ? "," : "", i);
		if (b % 2 == 1)
			snprintf(odd_back + strlen(odd_back), 16, "%s%d", odd_back[0] ? "," : "",
			         b);
	}
	const uint32_t sizes[] = {1, 2, 3, 7, 0};
	for (size_t k = 0; k < 5; k++)
		for (int fwd = 0; fwd < 2; fwd++)
			for (int f = 0; f < 2; f++) {
				const char *want =
				    f ? (fwd ? odd_fwd : odd_back) : (fwd ? all_fwd : all_back);
				for (int sh = 0; sh < 4; sh++)
					atomic_store(&shard_calls[sh], 0);
				char *got = gsi_pages(rt, "byG", sizes[k], fwd, f, &a);
				ck_assert_msg(strcmp(got, want) == 0,
				              "limit %u fwd %d filter %d:\n got %s\nwant %s",
				              sizes[k], fwd, f, got, want);
				for (int sh = 0; sh < 4; sh++)
					ck_assert_int_gt(atomic_load(&shard_calls[sh]), 0);
				/* The unsharded index answers the same (the fake node
				 * does not filter: only without a filter). */
				if (f)
					continue;
				atomic_store(&gsi_single_calls, 0);
				got = gsi_pages(rt, "byG1", sizes[k], fwd, f, &a);
				ck_assert_str_eq(got, want);
				ck_assert_int_gt(atomic_load(&gsi_single_calls), 0);
			}

	/* The router's own refusals: no node is asked. */
	Shoal__QueryRequest q = SHOAL__QUERY_REQUEST__INIT;
	WIRE_SET(&q, table_name, "gtb");
	WIRE_SET(&q, index_name, "nope");
	WIRE_SET(&q, key_condition_expression, "G = :g");
	st_value *vals = st_new_map(&a, 1);
	st_map_set(&a, vals, ":g", 2, st_new_s(&a, "hot"));
	wire_item_to_pb(&a, vals, &q.expression_attribute_values, NULL);
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_QUERY;
	req.query = &q;
	Shoal__Response *resp = roundtrip(rt, &a, &req);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message, "The table does not have the specified index: nope");
	WIRE_SET(&q, index_name, "byG");
	q.consistent_read = true;
	resp = roundtrip(rt, &a, &req);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message,
	                 "Consistent reads are not supported on global secondary indexes");
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* UpdateTable and the activation of a backfilled GSI, through fake nodes     */
/* ------------------------------------------------------------------------ */

/* Node 1 leads every group.  Table "utb" (id 5, hash key PK); UpdateTable
 * creates GSI "byG" (id 2, 3 write shards), CREATING until activate_index.
 * Data groups report the index's backfill done when ddl_done is set. */
static bool ddl_created, ddl_active, ddl_done;
static atomic_int ddl_defines[4], ddl_activations;

static st_table_def ddl_def(sh_arena *a)
{
	st_key_attr *attrs = sh_arena_calloc(a, 2, sizeof(*attrs));
	attrs[0] = (st_key_attr){"PK", ST_S};
	attrs[1] = (st_key_attr){"G", ST_S};
	st_index_def *x = sh_arena_calloc(a, 1, sizeof(*x));
	*x = (st_index_def){.name = "byG",
	                    .id = 2,
	                    .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                    .write_shards = 3,
	                    .status = ddl_active ? ST_INDEX_ACTIVE : ST_INDEX_CREATING};
	return (st_table_def){.name = "utb",
	                      .id = 5,
	                      .key = {{"PK", ST_S}, {NULL, ST_NONE}},
	                      .attrs = attrs,
	                      .n_attrs = ddl_created ? 2 : 1,
	                      .indexes = x,
	                      .n_indexes = ddl_created ? 1 : 0,
	                      .created_ms = 1};
}

static Shoal__TableDefine *ddl_define(sh_arena *a)
{
	st_table_def def = ddl_def(a);
	Shoal__TableDefine *d = sh_arena_alloc(a, sizeof(*d));
	shoal__table_define__init(d);
	ck_assert_int_eq(wire_create_table_to_pb(a, &def, &d->def, NULL), SHOAL_OK);
	d->table_id = 5;
	d->created_ms = 1;
	if (ddl_created) {
		Shoal__IndexState *st = sh_arena_alloc(a, sizeof(*st));
		shoal__index_state__init(st);
		st->index_name = "byG";
		st->index_id = 2;
		st->status = ddl_active ? "ACTIVE" : "CREATING";
		d->indexes = sh_arena_alloc(a, sizeof(*d->indexes));
		d->indexes[0] = st;
		d->n_indexes = 1;
	}
	d->next_index_id = 3;
	return d;
}

static Shoal__NodeResponse *with_define(sh_arena *a)
{
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	nr->catalog = sh_arena_alloc(a, sizeof(*nr->catalog));
	nr->catalog[0] = ddl_define(a);
	nr->n_catalog = 1;
	return nr;
}

static Shoal__NodeResponse *ddl_node(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (self->id != 1 && !req->group_status) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = 1;
		return nr;
	}
	if (req->list_catalog)
		return with_define(a);
	if (req->update_table != NULL) {
		ck_assert_uint_eq(req->group, 0);
		const Shoal__UpdateTableRequest *u = req->update_table->update;
		ck_assert_str_eq(u->table_name, "utb");
		ck_assert_uint_eq(u->n_global_secondary_index_updates, 1);
		ddl_created = true;
		return with_define(a);
	}
	if (req->activate_index != NULL) {
		ck_assert_uint_eq(req->group, 0);
		ck_assert_str_eq(req->activate_index->index_name, "byG");
		ddl_active = true;
		atomic_fetch_add(&ddl_activations, 1);
		return with_define(a);
	}
	if (req->define_table != NULL) {
		ck_assert_uint_ne(req->group, 0);
		ck_assert_uint_eq(req->define_table->n_indexes, 1);
		ck_assert_uint_eq(req->define_table->indexes[0]->index_id, 2);
		atomic_fetch_add(&ddl_defines[req->group], 1);
		return answer(a, SHOAL_OK, NULL);
	}
	if (req->group_status) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		Shoal__GroupStatus *gs = sh_arena_alloc(a, sizeof(*gs));
		shoal__group_status__init(gs);
		gs->group = req->group;
		gs->node = self->id;
		gs->role = self->id == 1 ? "leader" : "follower";
		gs->leader_node = 1;
		gs->outbox_shipped = 10;
		Shoal__TableStats *ts = sh_arena_alloc(a, sizeof(*ts));
		shoal__table_stats__init(ts);
		ts->table_name = "utb";
		ts->item_count = 4;
		ts->size_bytes = 40;
		Shoal__IndexStats *is = sh_arena_alloc(a, sizeof(*is));
		shoal__index_stats__init(is);
		is->index_name = "byG";
		is->index_id = 2;
		is->item_count = 3;
		is->size_bytes = 30;
		is->backfill_done = ddl_done;
		is->backfill_seq = 7;
		is->status = ddl_active ? "ACTIVE" : "CREATING";
		if (ddl_created) {
			ts->indexes = sh_arena_alloc(a, sizeof(*ts->indexes));
			ts->indexes[0] = is;
			ts->n_indexes = 1;
		}
		gs->tables = sh_arena_alloc(a, sizeof(*gs->tables));
		gs->tables[0] = ts;
		gs->n_tables = 1;
		nr->status = gs;
		return nr;
	}
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	if (req->request->op_case == SHOAL__REQUEST__OP_DESCRIBE_TABLE) {
		ck_assert_uint_eq(req->group, 0);
		st_table_info info = {.def = ddl_def(a)};
		Shoal__DescribeTableResponse *d = sh_arena_alloc(a, sizeof(*d));
		shoal__describe_table_response__init(d);
		ck_assert_int_eq(wire_table_desc_to_pb(a, &info, "ACTIVE", &d->table, NULL),
		                 SHOAL_OK);
		nr->response->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TABLE;
		nr->response->describe_table = d;
		return nr;
	}
	ck_assert_int_eq(req->request->op_case, SHOAL__REQUEST__OP_QUERY);
	ck_assert(ddl_active); /* never read while CREATING */
	Shoal__QueryResponse *qr = sh_arena_alloc(a, sizeof(*qr));
	shoal__query_response__init(qr);
	nr->response->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	nr->response->query = qr;
	return nr;
}

START_TEST(test_update_table_and_activation)
{
	ddl_created = ddl_active = ddl_done = false;
	atomic_store(&ddl_activations, 0);
	for (int g = 0; g < 4; g++)
		atomic_store(&ddl_defines[g], 0);
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, ddl_node);
	rt_router *rt = router_up(c, 5000);
	sh_arena a;
	sh_arena_init(&a);

	/* UpdateTable: group 0 assigns the id, every data group gets the new
	 * definition, the answer says UPDATING / CREATING. */
	Shoal__Request *req;
	char msg[SH_ERRMSG_SIZE];
	json_t *body = json_loads(
	    "{\"TableName\":\"utb\",\"AttributeDefinitions\":[{\"AttributeName\":\"G\","
	    "\"AttributeType\":\"S\"}],\"GlobalSecondaryIndexUpdates\":[{\"Create\":{"
	    "\"IndexName\":\"byG\",\"KeySchema\":[{\"AttributeName\":\"G\",\"KeyType\":\"HASH\"}],"
	    "\"Projection\":{\"ProjectionType\":\"ALL\"},\"WriteShards\":3}}]}",
	    0, NULL);
	ck_assert_int_eq(wire_api_request_from_json(&a, "UpdateTable", body, &req, msg), SHOAL_OK);
	json_decref(body);
	req->request_id = 5;
	Shoal__Response *resp = roundtrip(rt, &a, req);
	ck_assert_msg(resp->status == 0, "%s", resp->message);
	const Shoal__TableDescription *td = resp->update_table->table_description;
	ck_assert_str_eq(td->table_status, "UPDATING");
	ck_assert_uint_eq(td->n_global_secondary_indexes, 1);
	ck_assert_str_eq(td->global_secondary_indexes[0]->index_status, "CREATING");
	ck_assert(td->global_secondary_indexes[0]->backfilling);
	ck_assert_uint_eq(td->global_secondary_indexes[0]->write_shards, 3);
	for (int g = 1; g < 4; g++)
		ck_assert_int_eq(atomic_load(&ddl_defines[g]), 1);

	/* A Query while the backfill runs: refused, not activated. */
	Shoal__QueryRequest q = SHOAL__QUERY_REQUEST__INIT;
	WIRE_SET(&q, table_name, "utb");
	WIRE_SET(&q, index_name, "byG");
	WIRE_SET(&q, key_condition_expression, "G = :g");
	st_value *vals = st_new_map(&a, 1);
	st_map_set(&a, vals, ":g", 2, st_new_s(&a, "x"));
	wire_item_to_pb(&a, vals, &q.expression_attribute_values, NULL);
	Shoal__Request qreq = SHOAL__REQUEST__INIT;
	qreq.op_case = SHOAL__REQUEST__OP_QUERY;
	qreq.query = &q;
	resp = roundtrip(rt, &a, &qreq);
	ck_assert_int_eq(resp->status, SHOAL__STATUS__STATUS_VALIDATION);
	ck_assert_str_eq(resp->message, "Cannot read from backfilling global secondary index: byG");
	ck_assert_int_eq(atomic_load(&ddl_activations), 0);
	/* DescribeTable meanwhile: CREATING, counts summed over the leaders. */
	Shoal__DescribeTableRequest dt = SHOAL__DESCRIBE_TABLE_REQUEST__INIT;
	WIRE_SET(&dt, table_name, "utb");
	Shoal__Request dreq = SHOAL__REQUEST__INIT;
	dreq.op_case = SHOAL__REQUEST__OP_DESCRIBE_TABLE;
	dreq.describe_table = &dt;
	resp = roundtrip(rt, &a, &dreq);
	ck_assert_int_eq(resp->status, 0);
	const Shoal__GlobalSecondaryIndexDescription *g =
	    resp->describe_table->table->global_secondary_indexes[0];
	ck_assert_str_eq(g->index_status, "CREATING");
	ck_assert_int_eq(g->item_count, 9); /* 3 data groups x 3 */
	ck_assert_int_eq(g->index_size_bytes, 90);
	ck_assert_int_eq(resp->describe_table->table->item_count, 12);

	/* Every leader has backfilled and shipped it: the next read activates. */
	pthread_mutex_lock(&fake_mu);
	ddl_done = true;
	pthread_mutex_unlock(&fake_mu);
	resp = roundtrip(rt, &a, &qreq);
	ck_assert_msg(resp->status == 0, "%s", resp->message);
	ck_assert_int_eq(atomic_load(&ddl_activations), 1);
	for (int gr = 1; gr < 4; gr++)
		ck_assert_int_eq(atomic_load(&ddl_defines[gr]), 2);
	resp = roundtrip(rt, &a, &dreq);
	ck_assert_str_eq(resp->describe_table->table->global_secondary_indexes[0]->index_status,
	                 "ACTIVE");
	resp = roundtrip(rt, &a, &qreq);
	ck_assert_int_eq(resp->status, 0);
	ck_assert_int_eq(atomic_load(&ddl_activations), 1); /* once */
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* DescribeTimeToLive: ENABLING / DISABLING until every leader applied it    */
/* ------------------------------------------------------------------------ */

/* Group 0's change: its time and whether it enabled TTL; each data group's
 * leader's copy (TableStats.ttl_ms); definitions re-sent per group. */
static int64_t ttl_changed;
static bool ttl_enabled;
static int64_t ttl_applied[4];
static atomic_int ttl_defines[4];

static Shoal__NodeResponse *ttl_node(fake_node *self, const Shoal__NodeRequest *req, sh_arena *a)
{
	if (self->id != 1 && !req->group_status) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_E_NOT_LEADER, "not the leader");
		nr->leader_node = 1;
		return nr;
	}
	if (req->list_catalog) {
		Shoal__NodeResponse *nr = catalog_answer(a);
		nr->catalog[0]->ttl_ms = ttl_changed;
		nr->catalog[0]->ttl_attribute = ttl_enabled ? "exp" : "";
		return nr;
	}
	if (req->define_table != NULL) {
		ck_assert_uint_ne(req->group, 0);
		atomic_fetch_add(&ttl_defines[req->group], 1);
		ttl_applied[req->group] = req->define_table->ttl_ms; /* the repair */
		return answer(a, SHOAL_OK, NULL);
	}
	if (req->group_status) {
		Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
		Shoal__GroupStatus *gs = sh_arena_alloc(a, sizeof(*gs));
		shoal__group_status__init(gs);
		gs->group = req->group;
		gs->node = self->id;
		gs->role = self->id == 1 ? "leader" : "follower";
		gs->leader_node = 1;
		Shoal__TableStats *ts = sh_arena_alloc(a, sizeof(*ts));
		shoal__table_stats__init(ts);
		ts->table_name = "tbl";
		ts->ttl_ms = ttl_applied[req->group];
		gs->tables = sh_arena_alloc(a, sizeof(*gs->tables));
		gs->tables[0] = ts;
		gs->n_tables = 1;
		nr->status = gs;
		return nr;
	}
	ck_assert_int_eq(req->request->op_case, SHOAL__REQUEST__OP_DESCRIBE_TIME_TO_LIVE);
	ck_assert_uint_eq(req->group, 0);
	Shoal__NodeResponse *nr = answer(a, SHOAL_OK, NULL);
	Shoal__DescribeTimeToLiveResponse *r = sh_arena_alloc(a, sizeof(*r));
	Shoal__TimeToLiveDescription *d = sh_arena_alloc(a, sizeof(*d));
	shoal__describe_time_to_live_response__init(r);
	shoal__time_to_live_description__init(d);
	d->time_to_live_status = ttl_enabled ? "ENABLED" : "DISABLED";
	if (ttl_enabled)
		WIRE_SET(d, attribute_name, "exp");
	d->changed_ms = ttl_changed;
	r->time_to_live_description = d;
	nr->response->result_case = SHOAL__RESPONSE__RESULT_DESCRIBE_TIME_TO_LIVE;
	nr->response->describe_time_to_live = r;
	return nr;
}

static const Shoal__TimeToLiveDescription *describe_ttl(rt_router *rt, sh_arena *a)
{
	Shoal__DescribeTimeToLiveRequest dt = SHOAL__DESCRIBE_TIME_TO_LIVE_REQUEST__INIT;
	WIRE_SET(&dt, table_name, "tbl");
	Shoal__Request req = SHOAL__REQUEST__INIT;
	req.op_case = SHOAL__REQUEST__OP_DESCRIBE_TIME_TO_LIVE;
	req.describe_time_to_live = &dt;
	Shoal__Response *resp = roundtrip(rt, a, &req);
	ck_assert_msg(resp->status == 0, "%s", resp->message);
	const Shoal__TimeToLiveDescription *d =
	    resp->describe_time_to_live->time_to_live_description;
	ck_assert_int_eq(d->changed_ms, 0); /* internal: never to the client */
	return d;
}

START_TEST(test_describe_ttl_pending)
{
	ttl_changed = 1000;
	ttl_enabled = true;
	ttl_applied[1] = ttl_applied[3] = 1000;
	ttl_applied[2] = 0; /* group 2's leader missed the change */
	for (int g = 0; g < 4; g++)
		atomic_store(&ttl_defines[g], 0);
	sh_cluster_conf *c = make_conf(4, 3);
	fakes_start(c, ttl_node);
	rt_router *rt = router_up(c, 5000);
	sh_arena a;
	sh_arena_init(&a);

	/* Not in force everywhere: ENABLING, and group 2 gets the definition. */
	const Shoal__TimeToLiveDescription *d = describe_ttl(rt, &a);
	ck_assert_str_eq(d->time_to_live_status, "ENABLING");
	ck_assert_str_eq(d->attribute_name, "exp");
	ck_assert_int_eq(atomic_load(&ttl_defines[2]), 1);
	ck_assert_int_eq(atomic_load(&ttl_defines[1]) + atomic_load(&ttl_defines[3]), 0);
	/* Repaired: ENABLED, nothing re-sent. */
	d = describe_ttl(rt, &a);
	ck_assert_str_eq(d->time_to_live_status, "ENABLED");
	ck_assert_int_eq(atomic_load(&ttl_defines[2]), 1);

	/* Disabled at 2000; group 3 still has 1000: DISABLING (the router's
	 * cached catalog is older than the change: no repair from it), then
	 * DISABLED once group 3 applied it. */
	pthread_mutex_lock(&fake_mu);
	ttl_changed = 2000;
	ttl_enabled = false;
	ttl_applied[1] = ttl_applied[2] = 2000;
	pthread_mutex_unlock(&fake_mu);
	d = describe_ttl(rt, &a);
	ck_assert_str_eq(d->time_to_live_status, "DISABLING");
	ck_assert_int_eq(d->_attribute_name_case, 0);
	pthread_mutex_lock(&fake_mu);
	ttl_applied[3] = 2000;
	pthread_mutex_unlock(&fake_mu);
	d = describe_ttl(rt, &a);
	ck_assert_str_eq(d->time_to_live_status, "DISABLED");

	/* Never changed: DISABLED without asking the data groups. */
	pthread_mutex_lock(&fake_mu);
	ttl_changed = 0;
	ttl_applied[1] = ttl_applied[2] = ttl_applied[3] = 0;
	pthread_mutex_unlock(&fake_mu);
	int before = 0, after = 0;
	for (uint32_t i = 0; i < n_fakes; i++)
		before += atomic_load(&fakes[i].calls);
	d = describe_ttl(rt, &a);
	ck_assert_str_eq(d->time_to_live_status, "DISABLED");
	for (uint32_t i = 0; i < n_fakes; i++)
		after += atomic_load(&fakes[i].calls);
	ck_assert_int_eq(after - before, 1); /* group 0 alone */
	sh_arena_fini(&a);
	rt_router_fini(rt);
	fakes_stop();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Secondary indexes: catalog ids, placeholders, write-shard merge           */
/* ------------------------------------------------------------------------ */

START_TEST(test_index_catalog_overlay)
{
	sh_arena a;
	sh_arena_init(&a);
	st_key_attr attrs[4] = {{"PK", ST_S}, {"SK", ST_S}, {"G", ST_S}, {"L", ST_N}};
	st_index_def idx[3] = {
	    {.name = "lsi", .local = true, .key = {{"PK", ST_S}, {"L", ST_N}}, .write_shards = 1},
	    {.name = "gsi1", .key = {{"G", ST_S}, {"SK", ST_S}}, .write_shards = 4},
	    {.name = "gsi2", .key = {{"G", ST_S}, {NULL, ST_NONE}}, .write_shards = 1},
	};
	st_table_def def = {.name = "tbl1",
	                    .key = {{"PK", ST_S}, {"SK", ST_S}},
	                    .attrs = attrs,
	                    .n_attrs = 4,
	                    .indexes = idx,
	                    .n_indexes = 3};
	char msg[SH_ERRMSG_SIZE];
	Shoal__TableDefine d = SHOAL__TABLE_DEFINE__INIT;
	ck_assert_int_eq(wire_create_table_to_pb(&a, &def, &d.def, msg), SHOAL_OK);
	d.table_id = 7;
	d.created_ms = 123;
	/* Without IndexState: the engine's ids at creation, 1.. in order. */
	st_table_def out;
	int rc = wire_table_define_from_pb(&a, &d, &out, msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", msg);
	ck_assert_uint_eq(out.id, 7);
	ck_assert_int_eq(out.created_ms, 123);
	ck_assert_uint_eq(out.n_indexes, 3);
	ck_assert_uint_eq(out.indexes[0].id, 1);
	ck_assert_uint_eq(out.indexes[2].id, 3);
	ck_assert_uint_eq(out.indexes[1].write_shards, 4);
	/* With group 0's ids and statuses. */
	Shoal__IndexState st[3] = {SHOAL__INDEX_STATE__INIT, SHOAL__INDEX_STATE__INIT,
	                           SHOAL__INDEX_STATE__INIT};
	Shoal__IndexState *stp[3] = {&st[0], &st[1], &st[2]};
	st[0].index_name = "gsi2", st[0].index_id = 9, st[0].status = "CREATING";
	st[1].index_name = "gsi1", st[1].index_id = 4, st[1].status = "ACTIVE";
	st[2].index_name = "lsi", st[2].index_id = 2, st[2].status = "ACTIVE";
	d.indexes = stp;
	d.n_indexes = 3;
	d.next_index_id = 10;
	ck_assert_int_eq(wire_table_define_from_pb(&a, &d, &out, msg), SHOAL_OK);
	rt_table t = {.name = "tbl1", .id = 7, .def = out};
	const st_index_def *x = rt_index_find(&t, "gsi2");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->id, 9);
	ck_assert_int_eq(x->status, ST_INDEX_CREATING);
	ck_assert_uint_eq(rt_index_find(&t, "gsi1")->id, 4);
	ck_assert_int_eq(rt_index_find(&t, "gsi1")->status, ST_INDEX_ACTIVE);
	ck_assert(rt_index_find(&t, "lsi")->local);
	ck_assert_ptr_null(rt_index_find(&t, "nope"));
	/* A status this build does not know: refused, as the node refuses it
	 * (one converter, one rule). */
	st[0].status = "FROZEN";
	ck_assert_int_eq(wire_table_define_from_pb(&a, &d, &out, msg), SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "index gsi2: unknown status \"FROZEN\"");
	st[0].status = "CREATING";
	/* The catalog snapshot keeps them. */
	Shoal__TableDefine *defs[1] = {&d};
	rt_catalog_snap *snap;
	sh_arena b;
	sh_arena_init(&b);
	ck_assert_int_eq(rt_catalog_snap_build(&b, defs, 1, &snap, msg), SHOAL_OK);
	ck_assert_uint_eq(rt_index_find(rt_catalog_find(snap, "tbl1"), "gsi2")->id, 9);
	rt_catalog_snap_free(snap);
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_index_start_hash)
{
	sh_arena a;
	sh_arena_init(&a);
	st_index_def lsi = {
	    .name = "lsi", .id = 1, .local = true, .key = {{"PK", ST_S}, {"L", ST_N}}};
	st_index_def gsi = {
	    .name = "gsi", .id = 2, .key = {{"G", ST_S}, {NULL, ST_NONE}}, .write_shards = 5};
	rt_table t = {.name = "tbl", .id = 9, .def = {.key = {{"PK", ST_S}, {"SK", ST_S}}}};
	st_value *k = st_new_map(&a, 4);
	st_map_set(&a, k, "PK", 2, st_new_s(&a, "p1"));
	st_map_set(&a, k, "SK", 2, st_new_s(&a, "s1"));
	st_map_set(&a, k, "L", 1, st_new_n(&a, "4"));
	uint64_t h;
	/* An LSI entry sits at its base item's hash. */
	ck_assert(rt_index_start_hash(&t, &lsi, k, &h));
	ck_assert_uint_eq(h, st_key_hash(9, st_map_get(k, "PK", 2)));
	/* A GSI entry: without its index key, no position. */
	ck_assert(!rt_index_start_hash(&t, &gsi, k, &h));
	st_map_set(&a, k, "G", 1, st_new_s(&a, "hot"));
	ck_assert(rt_index_start_hash(&t, &gsi, k, &h));
	uint32_t shard = st_index_shard(9, st_map_get(k, "PK", 2), st_map_get(k, "SK", 2), 5);
	ck_assert_uint_lt(shard, 5);
	ck_assert_uint_eq(h, st_index_hash(9, 2, shard, st_map_get(k, "G", 1)));
	/* A wrongly typed index key, or a key without the table's keys. */
	st_map_set(&a, k, "G", 1, st_new_n(&a, "1"));
	ck_assert(!rt_index_start_hash(&t, &gsi, k, &h));
	st_map_remove(k, "SK", 2);
	ck_assert(!rt_index_start_hash(&t, &lsi, k, &h));
	sh_arena_fini(&a);
}
END_TEST

START_TEST(test_expr_mentions)
{
	const char *kc = "#pk = :pk AND begins_with(#sk, :p_1)";
	ck_assert(rt_expr_mentions(kc, (const uint8_t *)"#pk", 3));
	ck_assert(rt_expr_mentions(kc, (const uint8_t *)":pk", 3));
	ck_assert(rt_expr_mentions(kc, (const uint8_t *)":p_1", 4));
	ck_assert(rt_expr_mentions(kc, (const uint8_t *)"#sk", 3));
	ck_assert(!rt_expr_mentions(kc, (const uint8_t *)":p", 2)); /* prefix of :pk, :p_1 */
	ck_assert(!rt_expr_mentions(kc, (const uint8_t *)"#p", 2));
	ck_assert(!rt_expr_mentions(kc, (const uint8_t *)":f", 2));
	ck_assert(!rt_expr_mentions(NULL, (const uint8_t *)":f", 2));
	ck_assert(rt_expr_mentions("a=:v", (const uint8_t *)":v", 2));
}
END_TEST

/* Synthetic index entries: maps {"k": N}; the entry order is k's. */
static int k_cmp(const void *ctx, const st_value *a, const st_value *b)
{
	(void)ctx;
	const st_value *x = st_map_get(a, "k", 1), *y = st_map_get(b, "k", 1);
	ck_assert(x != NULL && y != NULL);
	return st_value_cmp(x, y);
}

static st_value entry(sh_arena *a, int k)
{
	char text[16];
	snprintf(text, sizeof(text), "%d", k);
	st_value *m = st_new_map(a, 1);
	ck_assert_int_eq(st_map_set(a, m, "k", 1, st_new_n(a, text)), SHOAL_OK);
	return *m;
}

static int k_of(const st_value *v)
{
	const st_value *k = st_map_get(v, "k", 1);
	return atoi(k->u.str.ptr);
}

START_TEST(test_shard_merge_cases)
{
	sh_arena a;
	sh_arena_init(&a);
	/* Shard 0: 1 3 5 (cut: LEK 5); shard 1: 2 4 6 8 (exhausted). */
	st_value s0[3] = {entry(&a, 1), entry(&a, 3), entry(&a, 5)};
	st_value s1[4] = {entry(&a, 2), entry(&a, 4), entry(&a, 6), entry(&a, 8)};
	rt_shard_page p[2] = {{s0, 3, &s0[2]}, {s1, 4, NULL}};
	rt_merge m;
	ck_assert_int_eq(rt_shard_merge(p, 2, k_cmp, NULL, true, 0, 0, &a, &m), SHOAL_OK);
	/* Past 5 shard 0 may hold 6.5: the order is complete up to 5 only. */
	ck_assert_uint_eq(m.n, 5);
	int want[5] = {1, 2, 3, 4, 5};
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(k_of(m.items[i]), want[i]);
	ck_assert(m.more);
	/* Limit cuts first. */
	ck_assert_int_eq(rt_shard_merge(p, 2, k_cmp, NULL, true, 3, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 3);
	ck_assert_int_eq(k_of(m.items[2]), 3);
	ck_assert(m.more);
	/* The page bound: items of 3 bytes ({"k": 1-digit N}), bound 7: the
	 * third item is the first at or past it. */
	ck_assert_int_eq(rt_shard_merge(p, 2, k_cmp, NULL, true, 0, 7, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 3);
	ck_assert(m.more);
	/* Both exhausted: everything, no LastEvaluatedKey. */
	p[0].last_key = NULL;
	ck_assert_int_eq(rt_shard_merge(p, 2, k_cmp, NULL, true, 0, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 7);
	ck_assert(!m.more);
	/* Exactly Limit items and nothing else anywhere: no LastEvaluatedKey. */
	ck_assert_int_eq(rt_shard_merge(p, 2, k_cmp, NULL, true, 7, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 7);
	ck_assert(!m.more);
	/* Backward: shard pages come in descending order. */
	st_value b0[2] = {entry(&a, 9), entry(&a, 7)};
	st_value b1[3] = {entry(&a, 8), entry(&a, 6), entry(&a, 2)};
	rt_shard_page q[2] = {{b0, 2, &b0[1]}, {b1, 3, NULL}};
	ck_assert_int_eq(rt_shard_merge(q, 2, k_cmp, NULL, false, 0, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 3);
	ck_assert_int_eq(k_of(m.items[0]), 9);
	ck_assert_int_eq(k_of(m.items[1]), 8);
	ck_assert_int_eq(k_of(m.items[2]), 7);
	ck_assert(m.more);
	/* A cut shard that sent nothing: nothing kept, resume at its key. */
	st_value lk = entry(&a, 0);
	rt_shard_page e[2] = {{NULL, 0, &lk}, {s1, 4, NULL}};
	ck_assert_int_eq(rt_shard_merge(e, 2, k_cmp, NULL, true, 0, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 0);
	ck_assert(m.more);
	ck_assert_ptr_eq(m.resume, &lk);
	/* No shards answered anything. */
	rt_shard_page z[1] = {{NULL, 0, NULL}};
	ck_assert_int_eq(rt_shard_merge(z, 1, k_cmp, NULL, true, 5, 0, &a, &m), SHOAL_OK);
	ck_assert_uint_eq(m.n, 0);
	ck_assert(!m.more);
	sh_arena_fini(&a);
}
END_TEST

/*
 * Property: N shards of a random sorted index, each answering like a node
 * (the next Limit entries strictly after the start position in the query's
 * order, sometimes fewer -- a 1 MB cut -- and a LastEvaluatedKey when it
 * stopped early or reached Limit), paged through with the merge and its
 * resume position, give exactly the whole index, in order, for every page
 * size, both directions.
 */
START_TEST(test_shard_merge_pages_equal_unsharded)
{
	uint64_t seed = tl_seed(), rs = seed;
	for (int round = 0; round < 300; round++) {
		sh_arena a;
		sh_arena_init(&a);
		uint32_t n_shards = 1 + (uint32_t)(tl_rand(&rs) % 6);
		int total = (int)(tl_rand(&rs) % 40);
		uint32_t limit = (uint32_t)(tl_rand(&rs) % 9); /* 0: none */
		bool forward = tl_rand(&rs) % 2 == 0;
		bool early = tl_rand(&rs) % 3 == 0; /* shards cut pages early */
		bool eager = tl_rand(&rs) % 2 == 0; /* LEK when Limit is reached exactly */
		/* The 1 MB bound, scaled down: entries are 3 or 4 bytes. */
		size_t max_bytes = tl_rand(&rs) % 2 == 0 ? 0 : 3 + (size_t)(tl_rand(&rs) % 20);
		/* Entry i has k = 3 i + 1; shard of each random. */
		st_value *all = sh_arena_calloc(&a, (size_t)total + 1, sizeof(*all));
		uint32_t *shard = sh_arena_calloc(&a, (size_t)total + 1, sizeof(*shard));
		for (int i = 0; i < total; i++) {
			all[i] = entry(&a, 3 * i + 1);
			shard[i] = (uint32_t)(tl_rand(&rs) % n_shards);
		}
		int got = 0, pages = 0;
		const st_value *start = NULL;
		for (;;) {
			ck_assert_msg(pages++ <= total + 2, "seed %llu: no progress",
			              (unsigned long long)seed);
			rt_shard_page *p = sh_arena_calloc(&a, n_shards, sizeof(*p));
			for (uint32_t s = 0; s < n_shards; s++) {
				st_value *items =
				    sh_arena_calloc(&a, (size_t)total + 1, sizeof(*items));
				uint32_t n = 0, cap = limit;
				if (early && limit == 0)
					cap = 1 + (uint32_t)(tl_rand(&rs) % 4);
				else if (early && limit > 1)
					cap = 1 + (uint32_t)(tl_rand(&rs) % limit);
				bool cut = false;
				for (int j = 0; j < total; j++) {
					int i = forward ? j : total - 1 - j;
					if (shard[i] != s)
						continue;
					if (start != NULL) {
						int c = k_cmp(NULL, &all[i], start);
						if (forward ? c <= 0 : c >= 0)
							continue;
					}
					if (cap != 0 && n == cap) {
						cut = true;
						break;
					}
					items[n++] = all[i];
				}
				p[s].items = items;
				p[s].n = n;
				if (n > 0 && (cut || (eager && cap != 0 && n == cap)))
					p[s].last_key = &items[n - 1];
			}
			rt_merge m;
			ck_assert_int_eq(rt_shard_merge(p, n_shards, k_cmp, NULL, forward, limit,
			                                max_bytes, &a, &m),
			                 SHOAL_OK);
			ck_assert_msg(limit == 0 || m.n <= limit, "seed %llu",
			              (unsigned long long)seed);
			for (uint32_t i = 0; i < m.n; i++, got++) {
				int want = forward ? 3 * got + 1 : 3 * (total - 1 - got) + 1;
				ck_assert_msg(got < total && k_of(m.items[i]) == want,
				              "seed %llu round %d: item %d is %d, want %d",
				              (unsigned long long)seed, round, got,
				              k_of(m.items[i]), want);
			}
			if (!m.more)
				break;
			start = m.n > 0 ? m.items[m.n - 1] : m.resume;
			ck_assert_ptr_nonnull(start);
		}
		ck_assert_msg(got == total, "seed %llu round %d: %d of %d entries",
		              (unsigned long long)seed, round, got, total);
		sh_arena_fini(&a);
	}
}
END_TEST

static Suite *router_suite(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_segment_ranges_tile);
	tcase_add_test(tc, test_scan_plan);
	tcase_add_test(tc, test_scan_after);
	tcase_add_test(tc, test_batch_duplicates_and_split);
	tcase_add_test(tc, test_catalog_snapshots);
	tcase_add_test(tc, test_query_partition_key);
	tcase_add_test(tc, test_metrics_text);
	tcase_add_test(tc, test_front_door_alone);
	tcase_add_test(tc, test_leader_hints);
	tcase_add_test(tc, test_map_moves);
	tcase_add_test(tc, test_scan_across_partitions);
	tcase_add_test(tc, test_scan_moved_partitions);
	tcase_add_test(tc, test_wrong_group_retry);
	tcase_add_test(tc, test_wrong_group_pause_ends_with_map);
	tcase_add_test(tc, test_place_base_and_gsi);
	tcase_add_test(tc, test_batch_write_split_unprocessed_repair);
	tcase_add_test(tc, test_index_catalog_overlay);
	tcase_add_test(tc, test_index_start_hash);
	tcase_add_test(tc, test_expr_mentions);
	tcase_add_test(tc, test_shard_merge_cases);
	tcase_add_test(tc, test_shard_merge_pages_equal_unsharded);
	tcase_add_test(tc, test_gsi_sharded_query);
	tcase_add_test(tc, test_update_table_and_activation);
	tcase_add_test(tc, test_describe_ttl_pending);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(router_suite)
