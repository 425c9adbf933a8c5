/*
 * st_bench -- the storage engine next to raw LMDB, same data, same run.
 *
 * Loads N items (default 1,000,000) through the engine (st_put, 1000 per
 * write transaction, MDB_NOSYNC and MDB_WRITEMAP as the replicated state
 * machine runs it) and the same keys and values through raw LMDB (mdb_put of
 * the engine's own encoded key and value bytes, 1000 per transaction, the
 * same flags, but a sparse file the engine would preallocate); then random
 * point reads through st_get_item and raw mdb_get; then Query returning 100
 * items (one item collection) through st_query.  Prints throughput and the
 * engine/raw ratios.  A benchmark prints figures; it asserts nothing.
 *
 * Usage: st_bench [-n items] [-g gets] [-q queries] [-d dir]
 * Item shape: PK "USER#<n/100>", SK "ITEM#<n%100, 4 digits>", plus a string
 * (64 B), a number, a boolean and a string set: ~160 B by DynamoDB's rules.
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage/codec.h"
#include "storage/keyenc.h"
#include "storage/storage.h"
#include "tests/lib/testlib.h"

#define PER_TXN    1000
#define COLLECTION 100

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "st_bench: %s: %s (%s)\n", what, msg ? msg : "", shoal_err_name(rc));
	exit(1);
}

/* Builds item number i in arena a. */
static st_value *make_item(sh_arena *a, uint64_t i)
{
	char pk[32], sk[32], blob[65], num[32];
	snprintf(pk, sizeof(pk), "USER#%llu", (unsigned long long)(i / COLLECTION));
	snprintf(sk, sizeof(sk), "ITEM#%04llu", (unsigned long long)(i % COLLECTION));
	for (int k = 0; k < 64; k++)
		blob[k] = (char)('a' + (i * 7 + (uint64_t)k) % 26);
	blob[64] = '\0';
	snprintf(num, sizeof(num), "%llu.25", (unsigned long long)(i * 31 % 100000));
	st_value *item = st_new_map(a, 8);
	st_value b = {.type = ST_BOOL, .u.boolean = (i & 1) != 0};
	st_value *tags = sh_arena_alloc(a, sizeof(*tags));
	st_value *members = sh_arena_alloc(a, 2 * sizeof(*members));
	members[0] = *st_new_s(a, "blue");
	members[1] = *st_new_s(a, "green");
	tags->type = ST_SS;
	tags->u.list.v = members;
	tags->u.list.n = 2;
	st_map_set(a, item, "PK", 2, st_new_s(a, pk));
	st_map_set(a, item, "SK", 2, st_new_s(a, sk));
	st_map_set(a, item, "payload", 7, st_new_s(a, blob));
	st_map_set(a, item, "score", 5, st_new_n(a, num));
	st_map_set(a, item, "active", 6, &b);
	st_map_set(a, item, "tags", 4, tags);
	return item;
}

static st_value *make_key(sh_arena *a, uint64_t i)
{
	char pk[32], sk[32];
	snprintf(pk, sizeof(pk), "USER#%llu", (unsigned long long)(i / COLLECTION));
	snprintf(sk, sizeof(sk), "ITEM#%04llu", (unsigned long long)(i % COLLECTION));
	st_value *key = st_new_map(a, 2);
	st_map_set(a, key, "PK", 2, st_new_s(a, pk));
	st_map_set(a, key, "SK", 2, st_new_s(a, sk));
	return key;
}

static void report(const char *what, uint64_t n, double secs)
{
	printf("  %-28s %9llu ops in %6.2f s = %10.0f ops/s\n", what, (unsigned long long)n, secs,
	       (double)n / secs);
}

int main(int argc, char **argv)
{
	uint64_t n = 1000000, gets = 500000, queries = 50000;
	const char *base = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "n:g:q:d:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoull(optarg, NULL, 10);
			break;
		case 'g':
			gets = strtoull(optarg, NULL, 10);
			break;
		case 'q':
			queries = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			base = optarg;
			break;
		default:
			fprintf(stderr,
			        "usage: st_bench [-n items] [-g gets] [-q queries] [-d dir]\n");
			return 2;
		}
	}
	if (n < COLLECTION)
		n = COLLECTION;
	char dir[4096], engdir[4200], rawdir[4200];
	snprintf(dir, sizeof(dir), "%s", base ? base : tl_tmpdir("bench"));
	snprintf(engdir, sizeof(engdir), "%s/engine", dir);
	snprintf(rawdir, sizeof(rawdir), "%s/raw", dir);
	if (mkdir(engdir, 0755) != 0 || mkdir(rawdir, 0755) != 0) {
		perror("mkdir");
		return 1;
	}
	uint64_t seed = tl_seed();
	char msg[SH_ERRMSG_SIZE];
	int rc;

	printf("st_bench: %llu items (~%d B each), %llu gets, %llu queries of %d items\n",
	       (unsigned long long)n, 160, (unsigned long long)gets, (unsigned long long)queries,
	       COLLECTION);

	/* ---- engine ---- */
	st_env *env;
	st_env_options eo = {.nosync = true};
	if ((rc = st_env_open(engdir, &eo, &env, msg)) != 0)
		die("st_env_open", rc, msg);
	st_txn *txn;
	if ((rc = st_txn_begin(env, &txn, msg)) != 0)
		die("st_txn_begin", rc, msg);
	st_key_attr attrs[2] = {{"PK", ST_S}, {"SK", ST_S}};
	st_table_def def = {.name = "bench",
	                    .key = {.hash = {"PK", ST_S}, .range = {"SK", ST_S}},
	                    .attrs = attrs,
	                    .n_attrs = 2};
	if ((rc = st_table_create(txn, &def, msg)) != 0)
		die("st_table_create", rc, msg);
	if ((rc = st_txn_commit(txn, msg)) != 0)
		die("commit", rc, msg);

	sh_arena a;
	sh_arena_init(&a);
	/* Request values are built outside the timed section: decoding a request
	 * is the wire layer's work; the engine is timed from st_put on. */
	static st_value *batch[PER_TXN];
	double eng_put = 0, t0;
	for (uint64_t i = 0; i < n; i += PER_TXN) {
		uint64_t end = i + PER_TXN < n ? i + PER_TXN : n;
		for (uint64_t j = i; j < end; j++)
			batch[j - i] = make_item(&a, j);
		t0 = now_s();
		if ((rc = st_txn_begin(env, &txn, msg)) != 0)
			die("st_txn_begin", rc, msg);
		for (uint64_t j = i; j < end; j++) {
			st_put_req req = {.table = "bench", .item = batch[j - i]};
			st_write_result res;
			if ((rc = st_put(txn, &req, &a, &res, msg)) != 0)
				die("st_put", rc, msg);
		}
		if ((rc = st_txn_commit(txn, msg)) != 0)
			die("commit", rc, msg);
		eng_put += now_s() - t0;
		sh_arena_reset(&a);
	}

	/* ---- raw LMDB: the same encoded keys and values ---- */
	st_table_info info;
	if ((rc = st_table_describe(env, "bench", &a, &info, msg)) != 0)
		die("describe", rc, msg);
	uint32_t table_id = info.def.id;
	MDB_env *raw;
	MDB_dbi dbi;
	MDB_txn *rt;
	mdb_env_create(&raw);
	mdb_env_set_mapsize(raw, (size_t)64 << 30);
	if ((rc = mdb_env_open(raw, rawdir, MDB_NOSYNC | MDB_WRITEMAP | MDB_NOTLS, 0644)) != 0) {
		fprintf(stderr, "mdb_env_open: %s\n", mdb_strerror(rc));
		return 1;
	}
	mdb_txn_begin(raw, NULL, 0, &rt);
	mdb_dbi_open(rt, NULL, 0, &dbi);
	mdb_txn_commit(rt);
	/* Encode outside the timed loop: raw LMDB is timed on put alone. */
	double raw_put = 0;
	for (uint64_t i = 0; i < n; i += PER_TXN) {
		uint64_t end = i + PER_TXN < n ? i + PER_TXN : n;
		static st_key keys[PER_TXN];
		static uint8_t *vals[PER_TXN];
		static size_t lens[PER_TXN];
		for (uint64_t j = i; j < end; j++) {
			st_value *item = make_item(&a, j);
			st_key_item(&keys[j - i], table_id, 0, st_map_get(item, "PK", 2),
			            st_map_get(item, "SK", 2));
			if (st_codec_encode(&a, item, &vals[j - i], &lens[j - i]) != 0)
				die("encode", SHOAL_E_NOMEM, "");
		}
		double s = now_s();
		mdb_txn_begin(raw, NULL, 0, &rt);
		for (uint64_t j = i; j < end; j++) {
			MDB_val k = {keys[j - i].len, keys[j - i].b},
			        v = {lens[j - i], vals[j - i]};
			if ((rc = mdb_put(rt, dbi, &k, &v, 0)) != 0) {
				fprintf(stderr, "mdb_put: %s\n", mdb_strerror(rc));
				return 1;
			}
		}
		mdb_txn_commit(rt);
		raw_put += now_s() - s;
		sh_arena_reset(&a);
	}

	/* ---- random gets ---- */
	uint64_t rs = seed;
	double eng_get = 0;
	for (uint64_t g = 0; g < gets; g += 1000) {
		uint64_t end = g + 1000 < gets ? g + 1000 : gets;
		for (uint64_t j = g; j < end; j++)
			batch[j - g] = make_key(&a, tl_rand(&rs) % n);
		t0 = now_s();
		for (uint64_t j = g; j < end; j++) {
			st_get_req req = {.table = "bench", .key = batch[j - g]};
			st_value *item;
			if ((rc = st_get_item(env, &req, &a, &item, msg)) != 0 || item == NULL)
				die("st_get_item", rc ? rc : SHOAL_E_INTERNAL,
				    rc ? msg : "missing item");
		}
		eng_get += now_s() - t0;
		sh_arena_reset(&a);
	}

	rs = seed;
	double raw_get = 0;
	mdb_txn_begin(raw, NULL, MDB_RDONLY, &rt);
	for (uint64_t g = 0; g < gets; g += 1000) {
		static st_key keys[1000];
		uint64_t end = g + 1000 < gets ? g + 1000 : gets;
		for (uint64_t j = g; j < end; j++) {
			st_value *key = make_key(&a, tl_rand(&rs) % n);
			st_key_item(&keys[j - g], table_id, 0, st_map_get(key, "PK", 2),
			            st_map_get(key, "SK", 2));
		}
		double s = now_s();
		for (uint64_t j = g; j < end; j++) {
			/* One read txn per get, as the engine does. */
			mdb_txn_reset(rt);
			mdb_txn_renew(rt);
			MDB_val k = {keys[j - g].len, keys[j - g].b}, v;
			if (mdb_get(rt, dbi, &k, &v) != 0) {
				fprintf(stderr, "raw get: missing\n");
				return 1;
			}
		}
		raw_get += now_s() - s;
		sh_arena_reset(&a);
	}
	mdb_txn_abort(rt);

	/* ---- query: one collection of 100 items ---- */
	uint64_t returned = 0;
	t0 = now_s();
	for (uint64_t q = 0; q < queries; q++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "USER#%llu",
		         (unsigned long long)(tl_rand(&rs) % (n / COLLECTION)));
		st_value *vals = st_new_map(&a, 1);
		st_map_set(&a, vals, ":pk", 3, st_new_s(&a, pk));
		st_query_req req = {.table = "bench",
		                    .key_condition = "PK = :pk",
		                    .attrs = {.values = vals},
		                    .forward = true};
		st_page page;
		if ((rc = st_query(env, &req, &a, &page, msg)) != 0)
			die("st_query", rc, msg);
		returned += page.count;
		sh_arena_reset(&a);
	}
	double eng_query = now_s() - t0;
	if (returned != queries * COLLECTION)
		die("st_query", SHOAL_E_INTERNAL, "wrong number of items returned");

	printf("engine (st_*):\n");
	report("put (1000 per txn)", n, eng_put);
	report("get (random)", gets, eng_get);
	report("query (100 items each)", queries, eng_query);
	printf("  query items returned: %.0f items/s\n", (double)returned / eng_query);
	printf("raw LMDB (same keys and values):\n");
	report("put (1000 per txn)", n, raw_put);
	report("get (random)", gets, raw_get);
	printf("ratios engine/raw: put %.2f, get %.2f\n", (n / eng_put) / (n / raw_put),
	       (gets / eng_get) / (gets / raw_get));

	sh_arena_fini(&a);
	mdb_env_close(raw);
	st_env_close(env);
	if (base == NULL)
		tl_rmtree(dir);
	return 0;
}
