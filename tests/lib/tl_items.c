/*
 * tl_items.c -- the writer and the exact check of tl_items.h.
 *
 * The expected state is two arrays: pre[pk * pre_sks + sk] for the
 * preloaded items and fresh[i] for the item the writer's operation i put
 * (sk 1000 + i); each holds the last acknowledged value, or absent, or
 * uncertain once an operation on the item failed.  The writer thread is the
 * only one writing them while it runs; the check reads them after
 * tl_items_writer_stop joined it.
 */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"
#include "tests/lib/tl_items.h"

#define G_VALUES    7    /* g = "g<v % 7>" */
#define FRESH_SK    1000 /* the writer's new items: sk 1000 + op */
#define WRITER_US   2000 /* the writer's pause between operations (~300/s) */
#define GSI_WAIT_MS 60000

typedef struct item_state {
	bool present;
	bool uncertain; /* an operation on it failed: either outcome is right */
	long long v;
} item_state;

struct tl_items {
	shoal_client *c;
	char table[256];
	char tag[64];
	int pks, pre_sks, max_ops;
	bool stream;        /* created with a NEW_AND_OLD_IMAGES stream */
	int stream_parents; /* shards with a parent at the last stream check */
	long long checked;  /* items found by the last check */
	item_state *pre;    /* [pks * pre_sks] */
	item_state *fresh;  /* [max_ops] */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	atomic_int ops, failed;
	int64_t worst_ms;
	char first_error[SHOAL_EXCEPTION_MAX + SHOAL_MESSAGE_MAX + 64];
};

int64_t tl_items_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

tl_items *tl_items_new(shoal_client *c, const char *table, int pks, int pre_sks, int max_ops,
                       const char *tag)
{
	tl_assert(pks > 0 && pre_sks > 0 && pre_sks < FRESH_SK && max_ops > 0);
	tl_items *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->pre = calloc((size_t)pks * (size_t)pre_sks, sizeof(*t->pre));
	t->fresh = calloc((size_t)max_ops, sizeof(*t->fresh));
	if (t->pre == NULL || t->fresh == NULL) {
		tl_items_free(t);
		return NULL;
	}
	t->c = c;
	snprintf(t->table, sizeof(t->table), "%s", table);
	snprintf(t->tag, sizeof(t->tag), "%s", tag);
	t->pks = pks;
	t->pre_sks = pre_sks;
	t->max_ops = max_ops;
	return t;
}

void tl_items_free(tl_items *t)
{
	if (t == NULL)
		return;
	if (t->running) {
		atomic_store(&t->stop, true);
		pthread_join(t->thread, NULL);
	}
	free(t->pre);
	free(t->fresh);
	free(t);
}

static int call_rc(tl_items *t, const char *op, const char *body, json_t **out, shoal_error *err)
{
	char *o = NULL;
	int rc = shoal_call_json(t->c, op, body, &o, err);
	if (out != NULL)
		*out = rc == SHOAL_OK ? json_loads(o, 0, NULL) : NULL;
	shoal_free(o);
	return rc;
}

static json_t *call(tl_items *t, const char *op, const char *body)
{
	json_t *j;
	shoal_error err;
	int rc = call_rc(t, op, body, &j, &err);
	tl_assert_msg(rc == SHOAL_OK, "%s: %s: %s: %s", t->tag, op, err.exception, err.message);
	tl_assert_msg(j != NULL, "%s: %s: an unreadable answer", t->tag, op);
	return j;
}

void tl_items_with_stream(tl_items *t)
{
	t->stream = true;
}

void tl_items_create_table(tl_items *t)
{
	char body[4096];
	snprintf(body, sizeof(body),
	         "{\"TableName\":\"%s\",\"AttributeDefinitions\":["
	         "{\"AttributeName\":\"pk\",\"AttributeType\":\"S\"},"
	         "{\"AttributeName\":\"sk\",\"AttributeType\":\"N\"},"
	         "{\"AttributeName\":\"l\",\"AttributeType\":\"N\"},"
	         "{\"AttributeName\":\"g\",\"AttributeType\":\"S\"}],"
	         "\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},"
	         "{\"AttributeName\":\"sk\",\"KeyType\":\"RANGE\"}],"
	         "\"LocalSecondaryIndexes\":[{\"IndexName\":\"byl\",\"KeySchema\":["
	         "{\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"l\","
	         "\"KeyType\":\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}],"
	         "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"byg\",\"KeySchema\":["
	         "{\"AttributeName\":\"g\",\"KeyType\":\"HASH\"},{\"AttributeName\":\"pk\","
	         "\"KeyType\":\"RANGE\"}],\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"}}],"
	         "\"BillingMode\":\"PAY_PER_REQUEST\"%s}",
	         t->table,
	         t->stream ? ",\"StreamSpecification\":{\"StreamEnabled\":true,"
	                     "\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"}"
	                   : "");
	json_decref(call(t, "CreateTable", body));
}

/* The Item object of an item: {"pk":...,"sk":...,"v":...,"l":...,"g":...}. */
static void item_json(char *b, size_t cap, int pk, long long sk, long long v)
{
	snprintf(b, cap,
	         "{\"pk\":{\"S\":\"p%d\"},\"sk\":{\"N\":\"%lld\"},\"v\":{\"N\":\"%lld\"},"
	         "\"l\":{\"N\":\"%lld\"},\"g\":{\"S\":\"g%lld\"}}",
	         pk, sk, v, v % 10, v % G_VALUES);
}

static void put_body(const tl_items *t, char *b, size_t cap, int pk, long long sk, long long v)
{
	char item[256];
	item_json(item, sizeof(item), pk, sk, v);
	int n = snprintf(b, cap, "{\"TableName\":\"%s\",\"Item\":", t->table);
	tl_assert(n > 0 && (size_t)n < cap);
	snprintf(b + n, cap - (size_t)n, "%s}", item);
}

void tl_items_preload(tl_items *t)
{
	for (int pk = 0; pk < t->pks; pk++) {
		for (int sk0 = 0; sk0 < t->pre_sks; sk0 += 25) {
			char body[16384];
			int len =
			    snprintf(body, sizeof(body), "{\"RequestItems\":{\"%s\":[", t->table);
			for (int sk = sk0; sk < t->pre_sks && sk < sk0 + 25; sk++) {
				char item[256];
				item_json(item, sizeof(item), pk, sk, sk);
				len += snprintf(body + len, sizeof(body) - (size_t)len,
				                "%s{\"PutRequest\":{\"Item\":%s}}",
				                sk > sk0 ? "," : "", item);
				t->pre[pk * t->pre_sks + sk] =
				    (item_state){.present = true, .v = sk};
			}
			snprintf(body + len, sizeof(body) - (size_t)len, "]}}");
			json_t *r = call(t, "BatchWriteItem", body);
			tl_assert_msg(json_object_size(json_object_get(r, "UnprocessedItems")) == 0,
			              "%s: BatchWriteItem left items unprocessed", t->tag);
			json_decref(r);
		}
	}
}

/* --- the writer -------------------------------------------------------------- */

static void *writer(void *arg)
{
	tl_items *t = arg;
	while (!atomic_load(&t->stop) && atomic_load(&t->ops) < t->max_ops) {
		int i = atomic_load(&t->ops);
		char body[512];
		const char *op;
		item_state *st;
		item_state next;
		int pk = i % t->pks, sk = (i / t->pks) % t->pre_sks;
		if (i % 5 == 1) { /* delete a preloaded item */
			op = "DeleteItem";
			snprintf(body, sizeof(body),
			         "{\"TableName\":\"%s\",\"Key\":{\"pk\":{\"S\":\"p%d\"},\"sk\":"
			         "{\"N\":\"%d\"}}}",
			         t->table, pk, sk);
			st = &t->pre[pk * t->pre_sks + sk];
			next = (item_state){.present = false};
		} else if (i % 5 == 2) { /* (re)write a preloaded item */
			op = "PutItem";
			put_body(t, body, sizeof(body), pk, sk, 100000 + i);
			st = &t->pre[pk * t->pre_sks + sk];
			next = (item_state){.present = true, .v = 100000 + i};
		} else { /* a new item */
			op = "PutItem";
			put_body(t, body, sizeof(body), pk, FRESH_SK + i, i);
			st = &t->fresh[i];
			next = (item_state){.present = true, .v = i};
		}
		shoal_error err;
		int64_t t0 = tl_items_now_ms();
		int rc = call_rc(t, op, body, NULL, &err);
		int64_t ms = tl_items_now_ms() - t0;
		if (ms > t->worst_ms)
			t->worst_ms = ms;
		if (rc == SHOAL_OK) {
			*st = next;
		} else {
			st->uncertain = true;
			if (atomic_fetch_add(&t->failed, 1) == 0)
				snprintf(t->first_error, sizeof(t->first_error), "%s #%d: %s: %s",
				         op, i, err.exception, err.message);
		}
		atomic_fetch_add(&t->ops, 1);
		usleep(WRITER_US);
	}
	return NULL;
}

void tl_items_writer_start(tl_items *t)
{
	tl_assert(!t->running);
	atomic_store(&t->stop, false);
	atomic_store(&t->failed, 0);
	t->first_error[0] = '\0';
	t->worst_ms = 0;
	tl_assert(pthread_create(&t->thread, NULL, writer, t) == 0);
	t->running = true;
}

void tl_items_writer_stop(tl_items *t, const char *when)
{
	tl_assert(t->running);
	atomic_store(&t->stop, true);
	pthread_join(t->thread, NULL);
	t->running = false;
	printf("%s: writer during %s: %d operations so far, %d failed, worst latency %lld ms%s%s\n",
	       t->tag, when, atomic_load(&t->ops), atomic_load(&t->failed), (long long)t->worst_ms,
	       t->first_error[0] != '\0' ? ", first error " : "", t->first_error);
}

int tl_items_failed(const tl_items *t)
{
	return atomic_load(&((tl_items *)t)->failed);
}

int64_t tl_items_worst_ms(const tl_items *t)
{
	return t->worst_ms;
}

const char *tl_items_first_error(const tl_items *t)
{
	return t->first_error;
}

int tl_items_ops(const tl_items *t)
{
	return atomic_load(&((tl_items *)t)->ops);
}

/* --- the check ------------------------------------------------------------------ */

/* The items of partition key pk, ConsistentRead, all pages, into sks/vs;
 * returns how many. */
static int query_pk(tl_items *t, int pk, long long *sks, long long *vs, int cap)
{
	int n = 0;
	char *start = NULL;
	do {
		char body[2048];
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"%s\",\"ConsistentRead\":true,"
		         "\"KeyConditionExpression\":\"pk = :p\",\"ExpressionAttributeValues\":"
		         "{\":p\":{\"S\":\"p%d\"}}%s%s}",
		         t->table, pk, start != NULL ? ",\"ExclusiveStartKey\":" : "",
		         start != NULL ? start : "");
		free(start);
		start = NULL;
		json_t *q = call(t, "Query", body);
		size_t x;
		json_t *it;
		json_array_foreach(json_object_get(q, "Items"), x, it)
		{
			tl_assert(n < cap);
			sks[n] = atoll(
			    json_string_value(json_object_get(json_object_get(it, "sk"), "N")));
			vs[n] = atoll(
			    json_string_value(json_object_get(json_object_get(it, "v"), "N")));
			n++;
		}
		json_t *lek = json_object_get(q, "LastEvaluatedKey");
		if (lek != NULL)
			start = json_dumps(lek, JSON_COMPACT);
		json_decref(q);
	} while (start != NULL);
	return n;
}

/* The Count of op over all pages; `inner` is the body without its braces. */
void tl_items_check(tl_items *t, const char *when)
{
	tl_assert_msg(!t->running, "%s: the check runs with the writer stopped", t->tag);
	int ops = atomic_load(&t->ops);
	int cap = ops + t->pre_sks + 1;
	long long *sks = malloc((size_t)cap * sizeof(*sks));
	long long *vs = malloc((size_t)cap * sizeof(*vs));
	bool *seen_fresh = calloc((size_t)ops + 1, sizeof(*seen_fresh));
	bool *seen_pre = calloc((size_t)t->pre_sks, sizeof(*seen_pre));
	tl_assert(sks != NULL && vs != NULL && seen_fresh != NULL && seen_pre != NULL);
	long long expected = 0, certain_total = 0, uncertain = 0;
	long long gexp[G_VALUES] = {0}; /* the GSI's entries per g, from the items found */
	for (int pk = 0; pk < t->pks; pk++) {
		memset(seen_pre, 0, (size_t)t->pre_sks * sizeof(*seen_pre));
		const item_state *pre = &t->pre[pk * t->pre_sks];
		int n = query_pk(t, pk, sks, vs, cap);
		for (int k = 0; k < n; k++)
			gexp[vs[k] % G_VALUES]++;
		for (int k = 0; k < n; k++) {
			if (sks[k] < FRESH_SK) {
				tl_assert_msg(sks[k] >= 0 && sks[k] < t->pre_sks,
				              "%s: %s: p%d/%lld was never written", t->tag, when,
				              pk, sks[k]);
				const item_state *s = &pre[sks[k]];
				tl_assert_msg(!seen_pre[sks[k]], "%s: %s: p%d/%lld returned twice",
				              t->tag, when, pk, sks[k]);
				seen_pre[sks[k]] = true;
				tl_assert_msg(s->uncertain || (s->present && s->v == vs[k]),
				              "%s: %s: p%d/%lld is v=%lld, acknowledged %s%lld",
				              t->tag, when, pk, sks[k], vs[k],
				              s->present ? "v=" : "deleted ",
				              s->present ? s->v : 0);
			} else {
				long long i = sks[k] - FRESH_SK;
				tl_assert_msg(i >= 0 && i < ops && i % t->pks == pk,
				              "%s: %s: p%d/%lld was never written", t->tag, when,
				              pk, sks[k]);
				tl_assert_msg(!seen_fresh[i], "%s: %s: p%d/%lld returned twice",
				              t->tag, when, pk, sks[k]);
				seen_fresh[i] = true;
				tl_assert_msg(t->fresh[i].uncertain ||
				                  (t->fresh[i].present && t->fresh[i].v == vs[k]),
				              "%s: %s: p%d/%lld was never acknowledged", t->tag,
				              when, pk, sks[k]);
			}
		}
		for (int sk = 0; sk < t->pre_sks; sk++) {
			if (pre[sk].uncertain) {
				uncertain++;
				continue;
			}
			tl_assert_msg(seen_pre[sk] == pre[sk].present, "%s: %s: p%d/%d %s", t->tag,
			              when, pk, sk,
			              pre[sk].present ? "is missing" : "was deleted but is back");
			certain_total += pre[sk].present;
		}
		expected += n;
	}
	for (int i = 0; i < ops; i++) {
		if (t->fresh[i].uncertain) {
			uncertain++;
			continue;
		}
		if (!t->fresh[i].present)
			continue;
		tl_assert_msg(seen_fresh[i], "%s: %s: acknowledged item p%d/%d is missing", t->tag,
		              when, i % t->pks, FRESH_SK + i);
		certain_total++;
	}
	free(sks);
	free(vs);
	free(seen_fresh);
	free(seen_pre);

	char inner[1024];
	/* Scan: every item once. */
	snprintf(inner, sizeof(inner), "\"TableName\":\"%s\",\"Select\":\"COUNT\"", t->table);
	long long scanned = tl_count_pages(t->c, "Scan", inner);
	tl_assert_msg(scanned == expected, "%s: %s: Scan counts %lld items, Queries found %lld",
	              t->tag, when, scanned, expected);
	/* The LSI holds one entry per item. */
	long long lsi = 0;
	for (int pk = 0; pk < t->pks; pk++) {
		snprintf(inner, sizeof(inner),
		         "\"TableName\":\"%s\",\"IndexName\":\"byl\",\"ConsistentRead\":true,"
		         "\"KeyConditionExpression\":\"pk = :p\",\"ExpressionAttributeValues\":"
		         "{\":p\":{\"S\":\"p%d\"}},\"Select\":\"COUNT\"",
		         t->table, pk);
		lsi += tl_count_pages(t->c, "Query", inner);
	}
	tl_assert_msg(lsi == expected, "%s: %s: the LSI holds %lld entries for %lld items", t->tag,
	              when, lsi, expected);
	/* The GSI converges to the same entries per index key (g): a lost
	 * delete of one key and a lost put of another do not cancel out. */
	int64_t until = tl_items_now_ms() + GSI_WAIT_MS;
	long long gsi;
	for (;;) {
		gsi = 0;
		int off = -1;
		long long got_off = 0;
		for (int g = 0; g < G_VALUES; g++) {
			snprintf(
			    inner, sizeof(inner),
			    "\"TableName\":\"%s\",\"IndexName\":\"byg\","
			    "\"KeyConditionExpression\":\"g = :g\",\"ExpressionAttributeValues\":"
			    "{\":g\":{\"S\":\"g%d\"}},\"Select\":\"COUNT\"",
			    t->table, g);
			long long got = tl_count_pages(t->c, "Query", inner);
			gsi += got;
			if (got != gexp[g] && off < 0) {
				off = g;
				got_off = got;
			}
		}
		if (off < 0)
			break;
		tl_assert_msg(tl_items_now_ms() < until,
		              "%s: %s: the GSI holds %lld entries for %lld items after %d s (g%d: "
		              "%lld, the items say %lld)",
		              t->tag, when, gsi, expected, GSI_WAIT_MS / 1000, off, got_off,
		              gexp[off]);
		usleep(200000);
	}
	printf("%s: %s: %lld items (%lld certain, %lld uncertain), each read once, LSI and GSI "
	       "agree\n",
	       t->tag, when, expected, certain_total, uncertain);
	t->checked = expected;
}

long long tl_items_checked(const tl_items *t)
{
	return t->checked;
}

/* DescribeTable's ItemCount of the table (index NULL) or of one index. */
static long long described(tl_items *t, const char *index)
{
	char body[512];
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\"}", t->table);
	json_t *d = call(t, "DescribeTable", body);
	json_t *desc = json_object_get(d, "Table"), *n = NULL;
	if (index == NULL)
		n = json_object_get(desc, "ItemCount");
	const char *lists[2] = {"LocalSecondaryIndexes", "GlobalSecondaryIndexes"};
	for (int l = 0; index != NULL && l < 2; l++) {
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(desc, lists[l]), i, x)
		{
			const char *name = json_string_value(json_object_get(x, "IndexName"));
			if (name != NULL && strcmp(name, index) == 0)
				n = json_object_get(x, "ItemCount");
		}
	}
	tl_assert_msg(json_is_integer(n), "%s: DescribeTable: no ItemCount of %s", t->tag,
	              index != NULL ? index : "the table");
	long long count = json_integer_value(n);
	json_decref(d);
	return count;
}

long long tl_items_described(tl_items *t)
{
	return described(t, NULL);
}

long long tl_items_described_index(tl_items *t, const char *index)
{
	return described(t, index);
}

/* --- the stream ----------------------------------------------------------------- */

#define STREAM_SHARDS_MAX 256

typedef struct shard_row {
	char id[80], parent[80];
	bool done;
} shard_row;

/* The position inside a shard iterator (tl_items reads what it wrote: the
 * field before the issue time, wire_stream.c's format). */
static unsigned long long iter_pos(const char *it)
{
	const char *last = strrchr(it, '|');
	const char *p = last;
	while (p != NULL && p > it && p[-1] != '|')
		p--;
	return p != NULL ? strtoull(p, NULL, 10) : 0;
}

/* One item's chain of images: what its last record left. */
typedef struct chain {
	bool present;
	long long v;
	int records;
} chain;

static chain *chain_of(tl_items *t, chain *pre, chain *fresh, int ops, json_t *keys,
                       const char *when)
{
	const char *pk = json_string_value(json_object_get(json_object_get(keys, "pk"), "S"));
	const char *sk = json_string_value(json_object_get(json_object_get(keys, "sk"), "N"));
	tl_assert_msg(pk != NULL && sk != NULL && pk[0] == 'p', "%s: %s: a record without keys",
	              t->tag, when);
	int p = atoi(pk + 1);
	long long k = atoll(sk);
	if (k < FRESH_SK) {
		tl_assert(p >= 0 && p < t->pks && k >= 0 && k < t->pre_sks);
		return &pre[p * t->pre_sks + k];
	}
	tl_assert(k - FRESH_SK < ops);
	return &fresh[k - FRESH_SK];
}

static bool image_v(json_t *img, long long *v)
{
	if (img == NULL)
		return false;
	const char *s = json_string_value(json_object_get(json_object_get(img, "v"), "N"));
	tl_assert(s != NULL);
	*v = atoll(s);
	return true;
}

void tl_items_stream_check(tl_items *t, const char *when)
{
	tl_assert_msg(t->stream && !t->running,
	              "%s: the stream check needs the stream and the "
	              "writer stopped",
	              t->tag);
	char body[1024];
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\"}", t->table);
	json_t *dt = call(t, "DescribeTable", body);
	const char *arn0 =
	    json_string_value(json_object_get(json_object_get(dt, "Table"), "LatestStreamArn"));
	tl_assert_msg(arn0 != NULL, "%s: %s: the table has no LatestStreamArn", t->tag, when);
	char arn[512];
	snprintf(arn, sizeof(arn), "%s", arn0);
	json_decref(dt);

	/* Every shard, all pages. */
	shard_row *sh = calloc(STREAM_SHARDS_MAX, sizeof(*sh));
	tl_assert(sh != NULL);
	int n = 0, with_parent = 0, closed = 0;
	char start[80] = "";
	do {
		snprintf(body, sizeof(body), "{\"StreamArn\":\"%s\",\"Limit\":2%s%s%s}", arn,
		         start[0] != '\0' ? ",\"ExclusiveStartShardId\":\"" : "", start,
		         start[0] != '\0' ? "\"" : "");
		json_t *root = call(t, "DescribeStream", body);
		json_t *d = json_object_get(root, "StreamDescription");
		size_t i;
		json_t *row;
		json_array_foreach(json_object_get(d, "Shards"), i, row)
		{
			tl_assert(n < STREAM_SHARDS_MAX);
			const char *id = json_string_value(json_object_get(row, "ShardId"));
			const char *par = json_string_value(json_object_get(row, "ParentShardId"));
			for (int k = 0; k < n; k++)
				tl_assert_msg(strcmp(sh[k].id, id) != 0,
				              "%s: %s: shard %s listed twice", t->tag, when, id);
			snprintf(sh[n].id, sizeof(sh[n].id), "%s", id);
			snprintf(sh[n].parent, sizeof(sh[n].parent), "%s", par != NULL ? par : "");
			with_parent += par != NULL;
			closed += json_object_get(json_object_get(row, "SequenceNumberRange"),
			                          "EndingSequenceNumber") != NULL;
			n++;
		}
		const char *last = json_string_value(json_object_get(d, "LastEvaluatedShardId"));
		snprintf(start, sizeof(start), "%s", last != NULL ? last : "");
		json_decref(root);
	} while (start[0] != '\0');

	/* DescribeStream's ShardFilter CHILD_SHARDS names exactly the shards
	 * listed with that parent. */
	for (int k = 0; k < n; k++) {
		if (sh[k].parent[0] == '\0')
			continue;
		snprintf(body, sizeof(body),
		         "{\"StreamArn\":\"%s\",\"ShardFilter\":{\"Type\":\"CHILD_SHARDS\","
		         "\"ShardId\":\"%s\"}}",
		         arn, sh[k].parent);
		json_t *root = call(t, "DescribeStream", body);
		json_t *kids =
		    json_object_get(json_object_get(root, "StreamDescription"), "Shards");
		int want = 0, found = 0;
		for (int q = 0; q < n; q++)
			want += strcmp(sh[q].parent, sh[k].parent) == 0;
		size_t i;
		json_t *row;
		json_array_foreach(kids, i, row)
		{
			const char *par = json_string_value(json_object_get(row, "ParentShardId"));
			tl_assert_msg(
			    par != NULL && strcmp(par, sh[k].parent) == 0,
			    "%s: %s: ShardFilter CHILD_SHARDS of %s gave a shard of another "
			    "parent",
			    t->tag, when, sh[k].parent);
			found++;
		}
		tl_assert_msg(found == want,
		              "%s: %s: ShardFilter CHILD_SHARDS of %s: %d shards, %d "
		              "listed with that parent",
		              t->tag, when, sh[k].parent, found, want);
		json_decref(root);
	}

	int ops = atomic_load(&t->ops);
	chain *pre = calloc((size_t)t->pks * (size_t)t->pre_sks, sizeof(*pre));
	chain *fresh = calloc((size_t)ops + 1, sizeof(*fresh));
	tl_assert(pre != NULL && fresh != NULL);
	long long records = 0;
	/* Parents before children (a parent not listed -- trimmed -- counts
	 * as read), each shard from TRIM_HORIZON to its end: a closed one until
	 * it has no next iterator, an open one until a page adds nothing. */
	for (int done = 0; done < n;) {
		int pick = -1;
		for (int k = 0; k < n && pick < 0; k++) {
			if (sh[k].done)
				continue;
			bool ready = true;
			for (int q = 0; q < n; q++)
				if (!sh[q].done && strcmp(sh[q].id, sh[k].parent) == 0)
					ready = false;
			if (ready)
				pick = k;
		}
		tl_assert_msg(pick >= 0, "%s: %s: the shards' parents form a cycle", t->tag, when);
		snprintf(body, sizeof(body),
		         "{\"StreamArn\":\"%s\",\"ShardId\":\"%s\",\"ShardIteratorType\":"
		         "\"TRIM_HORIZON\"}",
		         arn, sh[pick].id);
		json_t *gi = call(t, "GetShardIterator", body);
		char *it = strdup(json_string_value(json_object_get(gi, "ShardIterator")));
		json_decref(gi);
		while (it != NULL) {
			char *rb = malloc(strlen(it) + 64);
			tl_assert(rb != NULL);
			sprintf(rb, "{\"ShardIterator\":\"%s\"}", it);
			json_t *gr = call(t, "GetRecords", rb);
			free(rb);
			size_t i;
			json_t *rec;
			json_t *recs = json_object_get(gr, "Records");
			json_array_foreach(recs, i, rec)
			{
				json_t *db = json_object_get(rec, "dynamodb");
				chain *c =
				    chain_of(t, pre, fresh, ops, json_object_get(db, "Keys"), when);
				long long ov = 0, nv = 0;
				bool has_old = image_v(json_object_get(db, "OldImage"), &ov);
				bool has_new = image_v(json_object_get(db, "NewImage"), &nv);
				const char *keys =
				    json_dumps(json_object_get(db, "Keys"), JSON_COMPACT);
				tl_assert_msg(
				    has_old == c->present && (!has_old || ov == c->v),
				    "%s: %s: shard %s: a record of %s (%s) follows %s%lld: "
				    "a record lost, repeated or out of order",
				    t->tag, when, sh[pick].id, keys,
				    json_string_value(json_object_get(rec, "eventName")),
				    c->present ? "v=" : "no item", c->present ? c->v : 0);
				free((void *)keys);
				c->present = has_new;
				c->v = nv;
				c->records++;
				records++;
			}
			const char *next =
			    json_string_value(json_object_get(gr, "NextShardIterator"));
			char *nx = next != NULL ? strdup(next) : NULL;
			bool stalled = nx != NULL && json_array_size(recs) == 0 &&
			               iter_pos(nx) == iter_pos(it);
			json_decref(gr);
			free(it);
			it = stalled ? (free(nx), NULL) : nx;
		}
		sh[pick].done = true;
		done++;
	}
	/* Every item's chain ends where the table is. */
	for (int k = 0; k < t->pks * t->pre_sks; k++)
		tl_assert_msg(t->pre[k].uncertain || (pre[k].present == t->pre[k].present &&
		                                      (!pre[k].present || pre[k].v == t->pre[k].v)),
		              "%s: %s: the stream leaves p%d/%d %s%lld, the table holds %s%lld",
		              t->tag, when, k / t->pre_sks, k % t->pre_sks,
		              pre[k].present ? "v=" : "deleted ", pre[k].v,
		              t->pre[k].present ? "v=" : "deleted ", t->pre[k].v);
	for (int i = 0; i < ops; i++)
		tl_assert_msg(t->fresh[i].uncertain ||
		                  (fresh[i].present == t->fresh[i].present &&
		                   (!fresh[i].present || fresh[i].v == t->fresh[i].v)),
		              "%s: %s: the stream leaves p%d/%d %s, the table %s", t->tag, when,
		              i % t->pks, FRESH_SK + i, fresh[i].present ? "present" : "absent",
		              t->fresh[i].present ? "holds it" : "does not");
	printf("%s: %s: stream: %lld records in %d shards (%d closed, %d with a parent), every "
	       "item's chain of images unbroken and ending at the table's state\n",
	       t->tag, when, records, n, closed, with_parent);
	t->stream_parents = with_parent;
	free(pre);
	free(fresh);
	free(sh);
}

int tl_items_stream_parents(const tl_items *t)
{
	return t->stream_parents;
}
