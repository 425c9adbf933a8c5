/* Capacity per partition: the token-bucket, burst and adaptive-capacity
 * arithmetic and the hot-key sketch of node/capacity.h, with time passed
 * in (no clock, no sleeps). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/capacity.h"
#include "tests/lib/testlib.h"

START_TEST(test_bucket_rate)
{
	/* 100 units/s, one second of burst: offered 1 unit every ms for 10 s
	 * (10x the rate), admitted = the first second's tokens + 100/s. */
	cap_bucket b;
	cap_bucket_init(&b, 100, 0, 0);
	ck_assert_double_eq(b.tokens, 100);
	int admitted = 0;
	for (int64_t t = 0; t < 10000; t++)
		if (cap_bucket_admit(&b, t)) {
			cap_bucket_take(&b, 1, t);
			admitted++;
		}
	ck_assert_int_ge(admitted, 1095);
	ck_assert_int_le(admitted, 1101);
}
END_TEST

START_TEST(test_bucket_burst)
{
	/* Unused capacity is kept up to the burst (5 s of 100/s), no more. */
	cap_bucket b;
	cap_bucket_init(&b, 100, 500, 0);
	cap_bucket_refill(&b, 60000);
	ck_assert_double_eq(b.tokens, 500);
	/* A burst of 600 one-unit requests at once: 500 pass. */
	int admitted = 0;
	for (int i = 0; i < 600; i++)
		if (cap_bucket_admit(&b, 60000)) {
			cap_bucket_take(&b, 1, 60000);
			admitted++;
		}
	ck_assert_int_eq(admitted, 500);
	/* Half a second later, 50 more. */
	ck_assert(cap_bucket_admit(&b, 60500));
	ck_assert_double_eq_tol(b.tokens, 50, 1e-9);
	/* A burst smaller than a second's rate is raised to one second. */
	cap_bucket_init(&b, 100, 10, 0);
	ck_assert_double_eq(b.max, 100);
}
END_TEST

START_TEST(test_bucket_debt)
{
	/* A cost known only afterwards may overdraw the bucket, by at most a
	 * second of rate; nothing is admitted until it is repaid. */
	cap_bucket b;
	cap_bucket_init(&b, 100, 0, 0);
	ck_assert(cap_bucket_admit(&b, 0));
	cap_bucket_take(&b, 1000, 0); /* a 1 MB scan page, say */
	ck_assert_double_eq(b.tokens, -100);
	ck_assert(!cap_bucket_admit(&b, 500));
	ck_assert(!cap_bucket_admit(&b, 990));
	ck_assert(cap_bucket_admit(&b, 1010));
	/* Changing the rate keeps the tokens, cut to the new maximum. */
	cap_bucket_refill(&b, 5000);
	ck_assert_double_eq(b.tokens, 100);
	cap_bucket_set(&b, 40, 0, 5000);
	ck_assert_double_eq(b.tokens, 40);
	ck_assert_double_eq(b.rate, 40);
	/* Time going backwards (another thread's older reading) adds nothing. */
	cap_bucket_take(&b, 10, 5000);
	cap_bucket_refill(&b, 4000);
	ck_assert_double_eq(b.tokens, 30);
}
END_TEST

START_TEST(test_share_adaptive)
{
	/* PROVISIONED 300 WCU over 3 partitions: 100 each. */
	cap_limits l = {
	    .table_rate = 300, .frac = 1.0 / 3, .held = 1, .part_max = 1000, .others = -1};
	ck_assert_double_eq(cap_share(&l), 100);
	/* Others unknown: nothing is lent. */
	ck_assert_double_eq(cap_adaptive_rate(&l), 100);
	/* The others use 50: this partition may use the other 250. */
	l.others = 50;
	ck_assert_double_eq(cap_adaptive_rate(&l), 250);
	/* The others use more than their share: the share stays. */
	l.others = 290;
	ck_assert_double_eq(cap_adaptive_rate(&l), 100);
	/* Never above the partition limit. */
	l.others = 0;
	l.part_max = 200;
	ck_assert_double_eq(cap_adaptive_rate(&l), 200);
	/* A big table: every partition at the limit. */
	cap_limits big = {
	    .table_rate = 90000, .frac = 1.0 / 3, .held = 1, .part_max = 1000, .others = 0};
	ck_assert_double_eq(cap_share(&big), 1000);
	ck_assert_double_eq(cap_adaptive_rate(&big), 1000);
	/* PAY_PER_REQUEST without a maximum: the partition limit. */
	cap_limits od = {
	    .table_rate = 0, .frac = 1.0 / 3, .held = 1, .part_max = 3000, .others = 10};
	ck_assert_double_eq(cap_share(&od), 3000);
	ck_assert_double_eq(cap_adaptive_rate(&od), 3000);
	/* A group holding two of the table's partitions (a split, or
	 * table_partitions): twice the partition limit, and the table's rate
	 * by the hash space they cover. */
	od.held = 2;
	ck_assert_double_eq(cap_share(&od), 6000);
	ck_assert_double_eq(cap_adaptive_rate(&od), 6000);
	big.held = 2;
	ck_assert_double_eq(cap_share(&big), 2000);
	big.others = 89000;
	ck_assert_double_eq(cap_adaptive_rate(&big), 2000);
	cap_limits half = {
	    .table_rate = 3000, .frac = 0.5, .held = 2, .part_max = 1000, .others = -1};
	ck_assert_double_eq(cap_share(&half), 1500);
	/* Throttling a split would relieve (split_throttled): the bucket is
	 * at the partitions' limit -- not at the table's rate, which no split
	 * raises. */
	ck_assert(!cap_at_partition_limit(&half, cap_adaptive_rate(&half)));
	ck_assert(cap_at_partition_limit(&big, cap_adaptive_rate(&big)));
	ck_assert(cap_at_partition_limit(&od, cap_adaptive_rate(&od)));
	ck_assert(!cap_at_partition_limit(&l, 100));
	half.held = 1;
	ck_assert(cap_at_partition_limit(&half, cap_adaptive_rate(&half)));
}
END_TEST

START_TEST(test_sketch_heavy)
{
	/* One key with 20 % of the units among 5,000 others, each rare: the
	 * sketch keeps it and ranks it first (Space-Saving keeps every key
	 * above total / slots). */
	uint64_t seed = tl_seed();
	printf("test_sketch_heavy seed %llu\n", (unsigned long long)seed);
	srand((unsigned)seed);
	cap_sketch s;
	memset(&s, 0, sizeof(s));
	bool fresh;
	for (int i = 0; i < 50000; i++) {
		uint64_t id = i % 5 == 0 ? 42 : 1000 + (uint64_t)(rand() % 5000);
		cap_hot *h = cap_sketch_add(&s, id, CAP_WRITE, 1, &fresh);
		if (fresh) {
			char k[32];
			int kl = snprintf(k, sizeof(k), "k%llu", (unsigned long long)id);
			cap_hot_set_key(h, 'S', k, (uint32_t)kl);
		}
	}
	cap_sketch_roll(&s, 10.0); /* 50,000 units in 10 s */
	uint32_t idx[4];
	uint32_t n = cap_sketch_top(&s, idx, 4);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_eq(s.slot[idx[0]].id, 42);
	char json[CAP_HOT_KEY_MAX];
	cap_hot_json(&s.slot[idx[0]], json, sizeof(json));
	ck_assert_str_eq(json, "{\"S\":\"k42\"}");
	/* rate: one roll of 10 s at 1,000 units/s, weighted by 1 - 0.5^(10/5) */
	ck_assert_double_eq_tol(s.slot[idx[0]].rate[CAP_WRITE], 1000 * 0.75, 1);
	/* Idle for a minute: the rates decay towards zero. */
	for (int i = 0; i < 60; i++)
		cap_sketch_roll(&s, 1.0);
	ck_assert_double_lt(s.slot[idx[0]].rate[CAP_WRITE], 1);
}
END_TEST

START_TEST(test_key_json)
{
	char buf[CAP_HOT_KEY_MAX];
	cap_key_json('S', "a\"b\\c\n", 6, buf, sizeof(buf));
	ck_assert_str_eq(buf, "{\"S\":\"a\\\"b\\\\c\\u000a\"}");
	cap_key_json('N', "-1.5", 4, buf, sizeof(buf));
	ck_assert_str_eq(buf, "{\"N\":\"-1.5\"}");
	cap_key_json('B', "\x01\x02\x03", 3, buf, sizeof(buf));
	ck_assert_str_eq(buf, "{\"B\":\"AQID\"}");
	/* A long key is cut, still JSON, never inside a UTF-8 sequence. */
	char longkey[600];
	for (int i = 0; i < 300; i++)
		memcpy(longkey + 2 * i, "\xc3\xa9", 2); /* é */
	cap_key_json('S', longkey, 600, buf, sizeof(buf));
	size_t l = strlen(buf);
	ck_assert_uint_lt(l, sizeof(buf));
	ck_assert_str_eq(buf + l - 2, "\"}");
	ck_assert_uint_eq((l - strlen("{\"S\":\"\"}")) % 2, 0);
	/* A key kept in a slot is cut at CAP_HOT_RAW_MAX bytes, before a UTF-8
	 * sequence that does not fit. */
	cap_hot h;
	cap_hot_set_key(&h, 'S', "x", 1);
	cap_hot_json(&h, buf, sizeof(buf));
	ck_assert_str_eq(buf, "{\"S\":\"x\"}");
	cap_hot_set_key(&h, 'S', longkey + 1, 599); /* starts mid-sequence, ends cut */
	ck_assert_uint_le(h.len, CAP_HOT_RAW_MAX);
	ck_assert_uint_eq(h.len % 2, 1); /* the stray byte + whole sequences */
	char longb[400];
	memset(longb, 7, sizeof(longb));
	cap_key_json('B', longb, sizeof(longb), buf, sizeof(buf));
	l = strlen(buf);
	ck_assert_uint_eq((l - strlen("{\"B\":\"\"}")) % 4, 0);
}
END_TEST

static Suite *buckets_suite(void)
{
	Suite *s = suite_create("buckets");
	TCase *tc = tcase_create("buckets");
	tcase_add_test(tc, test_bucket_rate);
	tcase_add_test(tc, test_bucket_burst);
	tcase_add_test(tc, test_bucket_debt);
	tcase_add_test(tc, test_share_adaptive);
	tcase_add_test(tc, test_sketch_heavy);
	tcase_add_test(tc, test_key_json);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(buckets_suite)
