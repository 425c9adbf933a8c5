/* An operator's partition changes applied to group 0's map (node/partadmin.c). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cluster.h"
#include "common/cluster_map.h"
#include "common/errors.h"
#include "node/node.h"
#include "tests/lib/testlib.h"

#define ORDERS 7 /* table ids of the fake catalog */
#define USERS  9

/* The catalog: two tables; "broken" fails as storage would. */
static int fake_catalog(void *ctx, const char *name, uint32_t *id, char *errmsg)
{
	(void)ctx;
	if (strcmp(name, "orders") == 0)
		return *id = ORDERS, SHOAL_OK;
	if (strcmp(name, "users") == 0)
		return *id = USERS, SHOAL_OK;
	if (strcmp(name, "broken") == 0)
		return sh_errf(errmsg, SHOAL_E_IO, "mdb_get: Input/output error");
	return sh_errf(errmsg, SHOAL_E_NOT_FOUND, "no table %s", name);
}

/* n nodes, `groups` groups, replication 1. */
static void make_conf(sh_cluster_conf *c, uint32_t n, uint32_t groups)
{
	memset(c, 0, sizeof(*c));
	c->groups = groups;
	c->replication = 1;
	c->n_nodes = n;
	for (uint32_t i = 0; i < n; i++) {
		sh_node_conf *x = &c->nodes[i];
		x->id = i + 1;
		snprintf(x->raft_host, sizeof(x->raft_host), "10.0.0.%u", x->id);
		x->raft_port = (uint16_t)(7100 + 10 * x->id);
		snprintf(x->rpc, sizeof(x->rpc), "tcp://10.0.0.%u:7200", x->id);
	}
}

typedef struct fixture {
	sh_cluster_conf conf;
	sh_map m;
	Shoal__AdminRequest req;
	Shoal__PartitionChange pc;
	char msg[SH_ERRMSG_SIZE];
	bool already;
} fixture;

static void fx_init(fixture *f, uint32_t groups)
{
	make_conf(&f->conf, 3, groups);
	ck_assert_int_eq(sh_map_from_conf(&f->m, &f->conf, f->msg), SHOAL_OK);
	shoal__admin_request__init(&f->req);
	shoal__partition_change__init(&f->pc);
}

static int run(fixture *f, bool split, const char *table, uint64_t h, uint32_t to_group)
{
	f->pc.table_name = (char *)table;
	f->pc.hash = split ? 0 : h;
	f->pc.at = split ? h : 0;
	f->pc.to_group = to_group;
	f->req.action_case = split ? SHOAL__ADMIN_REQUEST__ACTION_SPLIT_PARTITION
	                           : SHOAL__ADMIN_REQUEST__ACTION_MOVE_PARTITION;
	if (split)
		f->req.split_partition = &f->pc;
	else
		f->req.move_partition = &f->pc;
	f->msg[0] = '\0';
	f->already = true; /* must be reset */
	int rc = node_part_admin(&f->m, &f->conf, &f->req, fake_catalog, NULL, &f->already, f->msg);
	ck_assert_msg(sh_map_check(&f->m, f->msg), "%s", f->msg);
	return rc;
}

/* A refused change: code, the message names the reason, the map is as it was. */
static void refused(fixture *f, bool split, const char *table, uint64_t h, uint32_t to_group,
                    int code, const char *text)
{
	sh_map before;
	ck_assert_int_eq(sh_map_copy(&before, &f->m), SHOAL_OK);
	ck_assert_int_eq(run(f, split, table, h, to_group), code);
	ck_assert_msg(strstr(f->msg, text) != NULL, "message '%s' lacks '%s'", f->msg, text);
	ck_assert(sh_map_equal(&before, &f->m));
	sh_map_fini(&before);
}

/* A retried change: OK, already, the map is as it was. */
static void already(fixture *f, bool split, const char *table, uint64_t h, uint32_t to_group)
{
	sh_map before;
	ck_assert_int_eq(sh_map_copy(&before, &f->m), SHOAL_OK);
	ck_assert_int_eq(run(f, split, table, h, to_group), SHOAL_OK);
	ck_assert(f->already);
	ck_assert(sh_map_equal(&before, &f->m));
	sh_map_fini(&before);
}

static const sh_map_part *part_at(const sh_map *m, uint32_t t, uint64_t h)
{
	uint32_t i = sh_map_part_of(m, t, h);
	ck_assert_uint_ne(i, SH_MAP_NONE);
	return &m->parts[i];
}

/* The first change of a table adds it with the static placement, then
 * splits; the placement of every other hash is unchanged. */
START_TEST(test_add_table_then_split)
{
	fixture f;
	fx_init(&f, 4); /* groups 0..3: 3 partitions per table, in groups 1, 2, 3 */
	uint32_t d = sh_cluster_partitions(&f.conf);
	ck_assert_uint_eq(sh_map_part_of(&f.m, ORDERS, 0), SH_MAP_NONE);
	uint64_t epoch = f.m.epoch;
	const uint64_t at = 0x2000000000000000ull;

	ck_assert_int_eq(run(&f, true, "orders", at, 3), SHOAL_OK);
	ck_assert(!f.already);
	ck_assert_uint_gt(f.m.epoch, epoch);
	ck_assert_uint_eq(f.m.n_parts, d + 1);
	const sh_map_part *lo = part_at(&f.m, ORDERS, 0);
	ck_assert_uint_eq(lo->lo, 0);
	ck_assert_uint_eq(lo->group, 1);
	ck_assert_uint_eq(lo->to_group, SH_MAP_NONE);
	uint32_t i = sh_map_part_of(&f.m, ORDERS, at);
	ck_assert_uint_eq(f.m.parts[i].lo, at);
	ck_assert_uint_eq(sh_map_part_hi(&f.m, i), 0x5555555555555555ull);
	ck_assert_uint_eq(f.m.parts[i].group, 1); /* still served by its group */
	ck_assert_uint_eq(f.m.parts[i].to_group, 3);
	/* Routing is still the static placement for every hash. */
	for (uint64_t h = 0; h < 64; h++) {
		uint64_t x = h * 0x0400000000000000ull + h;
		ck_assert_uint_eq(
		    sh_map_route(&f.m, ORDERS, x),
		    sh_cluster_partition_group(&f.conf, sh_cluster_partition_of(&f.conf, x)));
	}
	/* The same split again (a router's retry): already so. */
	already(&f, true, "orders", at, 3);
	already(&f, true, "orders", at, 0);

	/* A split in place of another table: no move; a retry is already. */
	ck_assert_int_eq(run(&f, true, "users", 0x9000000000000000ull, 0), SHOAL_OK);
	ck_assert(!f.already);
	ck_assert_uint_eq(f.m.n_parts, 2 * d + 2);
	const sh_map_part *p = part_at(&f.m, USERS, 0x9000000000000000ull);
	ck_assert_uint_eq(p->lo, 0x9000000000000000ull);
	ck_assert_uint_eq(p->group, 2);
	ck_assert_uint_eq(p->to_group, SH_MAP_NONE);
	already(&f, true, "users", 0x9000000000000000ull, 0);
	already(&f, true, "users", 0x9000000000000000ull, 2); /* its own group */
	/* A split naming its own group moves nothing either. */
	ck_assert_int_eq(run(&f, true, "users", 0x9100000000000000ull, 2), SHOAL_OK);
	ck_assert_uint_eq(part_at(&f.m, USERS, 0x9100000000000000ull)->to_group, SH_MAP_NONE);
	/* At an existing boundary with another group: the upper half moves. */
	ck_assert_int_eq(run(&f, true, "users", 0x9000000000000000ull, 1), SHOAL_OK);
	ck_assert(!f.already);
	ck_assert_uint_eq(part_at(&f.m, USERS, 0x9000000000000000ull)->to_group, 1);
	/* The last partition splits up to 2^64-1. */
	ck_assert_int_eq(run(&f, true, "users", UINT64_MAX, 0), SHOAL_OK);
	i = sh_map_part_of(&f.m, USERS, UINT64_MAX);
	ck_assert_uint_eq(f.m.parts[i].lo, UINT64_MAX);
	ck_assert_uint_eq(sh_map_part_hi(&f.m, i), UINT64_MAX);
	sh_map_fini(&f.m);
}
END_TEST

/* Groups made since the birth (shoal admin add-group) hold none of a
 * statically placed table: its first change adds it where its items are, in
 * the file's data groups, not spread over the new ones. */
START_TEST(test_add_table_after_new_groups)
{
	fixture f;
	fx_init(&f, 4); /* data groups 1..3 */
	uint32_t one[] = {1};
	ck_assert_int_eq(sh_map_create_group(&f.m, 4, one, 1, f.msg), SHOAL_OK);
	ck_assert_int_eq(sh_map_create_group(&f.m, 5, one, 1, f.msg), SHOAL_OK);
	const uint64_t at = 0x2000000000000000ull;
	ck_assert_int_eq(run(&f, true, "orders", at, 0), SHOAL_OK); /* a split in place */
	for (uint64_t h = 0; h < 64; h++) {
		uint64_t x = h * 0x0400000000000000ull + h;
		ck_assert_uint_eq(
		    sh_map_route(&f.m, ORDERS, x),
		    sh_cluster_partition_group(&f.conf, sh_cluster_partition_of(&f.conf, x)));
	}
	ck_assert_uint_eq(sh_map_route(&f.m, ORDERS, UINT64_MAX), 3);
	sh_map_fini(&f.m);
}
END_TEST

START_TEST(test_move)
{
	fixture f;
	fx_init(&f, 4);
	const uint64_t h = 0xC000000000000000ull; /* third partition, group 3 */
	ck_assert_int_eq(run(&f, false, "orders", h, 1), SHOAL_OK);
	ck_assert(!f.already);
	const sh_map_part *p = part_at(&f.m, ORDERS, h);
	ck_assert_uint_eq(p->lo, 0xAAAAAAAAAAAAAAABull);
	ck_assert_uint_eq(p->group, 3);
	ck_assert_uint_eq(p->to_group, 1);
	ck_assert_uint_eq(sh_map_route(&f.m, ORDERS, h), 3); /* pending: still group 3 */
	/* Again, by any hash of the partition: already. */
	already(&f, false, "orders", h, 1);
	already(&f, false, "orders", UINT64_MAX, 1);
	/* Elsewhere while it moves: in use, and no split of it either. */
	refused(&f, false, "orders", h, 2, SHOAL_E_IN_USE, "is moving to group 1");
	refused(&f, true, "orders", h, 0, SHOAL_E_IN_USE, "split it once the move is done");
	/* A partition moved to where it is: already (nothing to do). */
	already(&f, false, "orders", 0, 1);
	/* A table's first change that is already so leaves the map alone (the
	 * table is not even added). */
	already(&f, false, "users", 0, 1);
	ck_assert_uint_eq(sh_map_part_of(&f.m, USERS, 0), SH_MAP_NONE);
	/* The executor finishes the move: the partition is group 1's; moving
	 * it back is a new move. */
	ck_assert_int_eq(sh_map_finish_move(&f.m, ORDERS, 0xAAAAAAAAAAAAAAABull, f.msg), SHOAL_OK);
	already(&f, false, "orders", h, 1);
	ck_assert_int_eq(run(&f, false, "orders", h, 3), SHOAL_OK);
	ck_assert_uint_eq(part_at(&f.m, ORDERS, h)->to_group, 3);
	sh_map_fini(&f.m);
}
END_TEST

/* The GSI space (GsiSpace, no table name) moves and splits as a table does,
 * under "table" SH_MAP_GSI_SPACE; a name and GsiSpace together, or neither,
 * are refused. */
START_TEST(test_gsi_space)
{
	fixture f;
	fx_init(&f, 4);
	f.pc.gsi_space = true;
	const uint64_t h = 0xC000000000000000ull; /* third partition, group 3 */
	ck_assert_msg(run(&f, false, NULL, h, 1) == SHOAL_OK, "%s", f.msg);
	ck_assert(!f.already);
	const sh_map_part *p = part_at(&f.m, SH_MAP_GSI_SPACE, h);
	ck_assert_uint_eq(p->group, 3);
	ck_assert_uint_eq(p->to_group, 1);
	ck_assert_uint_eq(sh_map_part_of(&f.m, ORDERS, 0), SH_MAP_NONE); /* no table added */
	refused(&f, false, NULL, h, 2, SHOAL_E_IN_USE, "the GSI space: partition");
	ck_assert_msg(run(&f, true, NULL, 0x2000000000000000ull, 2) == SHOAL_OK, "%s", f.msg);
	ck_assert_uint_eq(part_at(&f.m, SH_MAP_GSI_SPACE, 0x2000000000000000ull)->to_group, 2);
	ck_assert_uint_eq(part_at(&f.m, SH_MAP_GSI_SPACE, 0)->group, 1);
	refused(&f, false, "orders", h, 1, SHOAL_E_VALIDATION, "not both");
	f.pc.gsi_space = false;
	refused(&f, false, NULL, h, 1, SHOAL_E_VALIDATION, "TableName is required");
	sh_map_fini(&f.m);
}
END_TEST

START_TEST(test_errors)
{
	fixture f;
	fx_init(&f, 4);
	refused(&f, false, "nope", 1, 1, SHOAL_E_NOT_FOUND,
	        "Requested resource not found: Table: nope not found");
	refused(&f, true, "nope", 1, 0, SHOAL_E_NOT_FOUND,
	        "Requested resource not found: Table: nope not found");
	refused(&f, false, "broken", 1, 1, SHOAL_E_IO, "Input/output error");
	refused(&f, false, "", 1, 1, SHOAL_E_VALIDATION, "TableName is required");
	/* Group 0 keeps the catalog; group 9 does not exist. */
	refused(&f, false, "orders", 1, 0, SHOAL_E_VALIDATION,
	        "ToGroup 0 is not a data group of the cluster map (data groups: 1 2 3)");
	refused(&f, false, "orders", 1, 9, SHOAL_E_VALIDATION, "ToGroup 9 is not a data group");
	refused(&f, true, "orders", 1, 9, SHOAL_E_VALIDATION, "ToGroup 9 is not a data group");
	refused(&f, true, "orders", 0, 2, SHOAL_E_VALIDATION, "At must be 1 or more");
	refused(&f, true, "orders", 0, 0, SHOAL_E_VALIDATION, "At must be 1 or more");
	/* A split at a partition's start with no target: already so. */
	already(&f, true, "orders", 0x5555555555555556ull, 0);
	/* Not a partition change at all. */
	f.req.action_case = SHOAL__ADMIN_REQUEST__ACTION_DRAIN_NODE;
	ck_assert_int_eq(
	    node_part_admin(&f.m, &f.conf, &f.req, fake_catalog, NULL, &f.already, f.msg),
	    SHOAL_E_VALIDATION);
	sh_map_fini(&f.m);

	/* One group: group 0 holds the data, and is the only place to be. */
	fx_init(&f, 1);
	already(&f, false, "orders", 5, 0);
	refused(&f, false, "orders", 5, 1, SHOAL_E_VALIDATION, "(data groups: 0)");
	ck_assert_int_eq(run(&f, true, "orders", 5, 0), SHOAL_OK);
	ck_assert_uint_eq(part_at(&f.m, ORDERS, 5)->group, 0);
	sh_map_fini(&f.m);
}
END_TEST

/* Out of memory anywhere: the error, and the map as it was. */
START_TEST(test_nomem)
{
	fixture f;
	fx_init(&f, 4);
	sh_map before;
	ck_assert_int_eq(sh_map_copy(&before, &f.m), SHOAL_OK);
	int rc = SHOAL_E_NOMEM;
	long n = 1;
	for (bool fired = true; fired; n++) {
		sh_fault_arm(SH_FAULT_ALLOC, n, false);
		rc = run(&f, true, "orders", 0x100, 2);
		fired = sh_fault_fired(SH_FAULT_ALLOC) > 0;
		sh_fault_reset();
		if (fired) {
			ck_assert_int_eq(rc, SHOAL_E_NOMEM);
			ck_assert(sh_map_equal(&before, &f.m));
		}
	}
	ck_assert_int_gt(n, 2); /* at least one allocation was failed */
	ck_assert_int_eq(rc, SHOAL_OK);
	ck_assert_uint_eq(part_at(&f.m, ORDERS, 0x100)->to_group, 2);
	sh_map_fini(&before);
	sh_map_fini(&f.m);
}
END_TEST

static Suite *partadmin_suite(void)
{
	return tl_suite("partadmin", NULL, NULL, 0,
	                TL_TESTS(test_add_table_then_split, test_add_table_after_new_groups,
	                         test_move, test_gsi_space, test_errors, test_nomem));
}

TL_MAIN(partadmin_suite)
