/* The cluster file, placement and partitioning (common/cluster.c). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/cluster.h"
#include "common/errors.h"
#include "common/placement.h"
#include "tests/lib/testlib.h"

static const char *write_file(const char *text)
{
	static char path[4200];
	snprintf(path, sizeof(path), "%s/cluster.ini", tl_tmpdir("cluster"));
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static const char *three_nodes = "[cluster]\ngroups = 4\nreplication = 3\n"
                                 "[node.1]\nraft = 127.0.0.1:7100\nrpc = tcp://127.0.0.1:7200\n"
                                 "[node.2]\nraft = 127.0.0.1:7110\nrpc = tcp://127.0.0.1:7201\n"
                                 "[node.3]\nraft = 127.0.0.1:7120\nrpc = tcp://127.0.0.1:7202\n"
                                 "metrics = 127.0.0.1:7302\ndir = /tmp/x\n"
                                 "[router]\nlisten = tcp://127.0.0.1:8100\n";

START_TEST(test_load)
{
	sh_cluster_conf c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_cluster_load(write_file(three_nodes), &c, msg), SHOAL_OK);
	ck_assert_uint_eq(c.groups, 4);
	ck_assert_uint_eq(c.replication, 3);
	ck_assert_uint_eq(c.outbox_limit, 0); /* not set: the node's default */
	ck_assert_uint_eq(c.n_nodes, 3);
	const sh_node_conf *n = sh_cluster_node(&c, 3);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->raft_host, "127.0.0.1");
	ck_assert_uint_eq(n->raft_port, 7120);
	ck_assert_str_eq(n->rpc, "tcp://127.0.0.1:7202");
	ck_assert_str_eq(n->metrics, "127.0.0.1:7302");
	ck_assert_str_eq(n->dir, "/tmp/x");
	ck_assert_str_eq(c.router_listen, "tcp://127.0.0.1:8100");
	char addr[SH_ADDR_MAX];
	sh_map_node mn = {.id = n->id, .raft_port = n->raft_port};
	memcpy(mn.raft_host, n->raft_host, sizeof(mn.raft_host));
	sh_map_raft_address(&mn, 2, addr);
	ck_assert_str_eq(addr, "127.0.0.1:7122");
	ck_assert_ptr_null(sh_cluster_node(&c, 4));
}
END_TEST

START_TEST(test_errors)
{
	sh_cluster_conf c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_cluster_load("/nonexistent/x.ini", &c, msg), SHOAL_E_IO);
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\ngroups = 0\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, ":2: [cluster] groups = 0"));
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nreplication = 3\n[node.1]\n"
	                                            "raft = h:1\nrpc = tcp://h:2\n"),
	                                 &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "replication 3 needs at least 3 nodes"));
	ck_assert_int_eq(sh_cluster_load(write_file("[node.x]\nraft = h:1\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_int_eq(sh_cluster_load(write_file("[bogus]\na = b\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "unknown section [bogus]"));
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\noutbox_limit = 0\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_int_eq(
	    sh_cluster_load(write_file("[cluster]\nreplication = 1\noutbox_limit = "
	                               "5000\n[node.1]\nraft = h:1\nrpc = tcp://h:2\n"),
	                    &c, msg),
	    SHOAL_OK);
	ck_assert_uint_eq(c.outbox_limit, 5000);
	ck_assert_uint_eq(c.raft_segment_mb, 0); /* not set: the node's default */
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nreplication = 1\nraft_segment_mb = "
	                                            "64\n[node.1]\nraft = h:1\nrpc = tcp://h:2\n"),
	                                 &c, msg),
	                 SHOAL_OK);
	ck_assert_uint_eq(c.raft_segment_mb, 64);
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nraft_segment_mb = 0\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "raft_segment_mb"));
	ck_assert_int_eq(
	    sh_cluster_load(write_file("[cluster]\nraft_segment_mb = 4096\n"), &c, msg),
	    SHOAL_E_VALIDATION);
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nreplication = 1\n[node.1]\n"
	                                            "raft = h:99999\nrpc = tcp://h:2\n"),
	                                 &c, msg),
	                 SHOAL_E_VALIDATION);
	/* Time to Live: unset is the defaults (node/ttl.c), 0 ms turns expiry
	 * off, the share is a percentage of 1..100. */
	const char *one = "[node.1]\nraft = h:1\nrpc = tcp://h:2\n";
	char buf[256];
	snprintf(buf, sizeof(buf), "[cluster]\nreplication = 1\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert(!c.ttl_scan_set);
	ck_assert_uint_eq(c.ttl_share, 0);
	snprintf(buf, sizeof(buf),
	         "[cluster]\nreplication = 1\nttl_scan_ms = 0\nttl_share = 25\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert(c.ttl_scan_set);
	ck_assert_uint_eq(c.ttl_scan_ms, 0);
	ck_assert_uint_eq(c.ttl_share, 25);
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nttl_share = 0\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "ttl_share"));
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nttl_share = 101\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_int_eq(sh_cluster_load(write_file("[cluster]\nttl_scan_ms = -5\n"), &c, msg),
	                 SHOAL_E_VALIDATION);
	/* Automatic splits: unset is DynamoDB's 10 GiB and a few throttled
	 * requests a second, heat by units off; 0 turns each off; anything
	 * but a non-negative integer is refused, naming the key. */
	snprintf(buf, sizeof(buf), "[cluster]\nreplication = 1\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert_uint_eq(sh_cluster_split_bytes(&c), 10ull << 30);
	ck_assert_uint_eq(sh_cluster_split_throttled(&c), SH_SPLIT_THROTTLED);
	ck_assert_uint_eq(c.split_units, 0);
	snprintf(buf, sizeof(buf),
	         "[cluster]\nreplication = 1\nsplit_bytes = 0\nsplit_units = 2500\n"
	         "split_throttled = 7\n%s",
	         one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert_uint_eq(sh_cluster_split_bytes(&c), 0);
	ck_assert_uint_eq(sh_cluster_split_throttled(&c), 7);
	ck_assert_uint_eq(c.split_units, 2500);
	/* table_partitions: unset is D (groups - 1), else rounded up to a
	 * multiple of it. */
	ck_assert_uint_eq(c.table_partitions, 0);
	snprintf(buf, sizeof(buf),
	         "[cluster]\ngroups = 4\nreplication = 1\ntable_partitions = 7\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert_uint_eq(sh_cluster_table_partitions(&c), 9);
	c.table_partitions = 0;
	ck_assert_uint_eq(sh_cluster_table_partitions(&c), 3);
	c.table_partitions = 2;
	ck_assert_uint_eq(sh_cluster_table_partitions(&c), 3);
	snprintf(buf, sizeof(buf), "[cluster]\ntable_partitions = 5000\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_nonnull(strstr(msg, "table_partitions"));
	snprintf(buf, sizeof(buf), "[cluster]\nreplication = 1\nsplit_bytes = 300000\n%s", one);
	ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_OK);
	ck_assert_uint_eq(sh_cluster_split_bytes(&c), 300000);
	const char *bad[] = {"split_bytes = -1",    "split_bytes = 10G",
	                     "split_bytes = ",      "split_units = 1.5",
	                     "split_throttled = x", "split_bytes = 99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "[cluster]\n%s\n", bad[i]);
		ck_assert_int_eq(sh_cluster_load(write_file(buf), &c, msg), SHOAL_E_VALIDATION);
		ck_assert_ptr_nonnull(strstr(msg, "split_"));
	}
}
END_TEST

START_TEST(test_placement)
{
	sh_cluster_conf c;
	ck_assert_int_eq(sh_cluster_load(write_file(three_nodes), &c, NULL), SHOAL_OK);
	/* Every group has 3 distinct replicas; first replicas rotate over nodes. */
	unsigned first[4] = {0};
	for (uint32_t g = 0; g < c.groups; g++) {
		uint32_t r[SH_MAX_REPLICATION];
		sh_cluster_replicas(&c, g, r);
		ck_assert_uint_ne(r[0], r[1]);
		ck_assert_uint_ne(r[1], r[2]);
		ck_assert_uint_ne(r[0], r[2]);
		first[r[0]]++;
		for (uint32_t k = 0; k < 3; k++)
			ck_assert(sh_cluster_hosts(&c, r[k], g));
	}
	ck_assert_uint_ge(first[1], 1);
	ck_assert_uint_ge(first[2], 1);
	ck_assert_uint_ge(first[3], 1);
}
END_TEST

START_TEST(test_partitions)
{
	sh_cluster_conf c;
	ck_assert_int_eq(sh_cluster_load(write_file(three_nodes), &c, NULL), SHOAL_OK);
	for (uint32_t groups = 1; groups <= 9; groups++) {
		c.groups = groups;
		uint32_t d = sh_cluster_partitions(&c);
		ck_assert_uint_eq(d, groups > 1 ? groups - 1 : 1);
		/* The ranges tile the hash space exactly and agree with partition_of. */
		uint64_t expect_lo = 0;
		for (uint32_t p = 0; p < d; p++) {
			uint64_t lo, hi;
			sh_cluster_partition_range(&c, p, &lo, &hi);
			ck_assert_uint_eq(lo, expect_lo);
			ck_assert_uint_ge(hi, lo);
			ck_assert_uint_eq(sh_cluster_partition_of(&c, lo), p);
			ck_assert_uint_eq(sh_cluster_partition_of(&c, hi), p);
			ck_assert_uint_eq(sh_cluster_partition_of(&c, lo + (hi - lo) / 2), p);
			ck_assert_uint_eq(sh_cluster_partition_group(&c, p),
			                  groups > 1 ? p + 1 : 0);
			expect_lo = hi + 1;
			if (p + 1 == d)
				ck_assert_uint_eq(hi, UINT64_MAX);
		}
	}
}
END_TEST

static Suite *cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_load);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_placement);
	tcase_add_test(tc, test_partitions);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(cluster_suite)
