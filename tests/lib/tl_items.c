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
	item_state *pre;   /* [pks * pre_sks] */
	item_state *fresh; /* [max_ops] */
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
	         "\"BillingMode\":\"PAY_PER_REQUEST\"}",
	         t->table);
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
static long long count_of(tl_items *t, const char *op, const char *inner)
{
	long long total = 0;
	char *start = NULL;
	do {
		char body[2048];
		snprintf(body, sizeof(body), "{%s%s%s}", inner,
		         start != NULL ? ",\"ExclusiveStartKey\":" : "",
		         start != NULL ? start : "");
		free(start);
		start = NULL;
		json_t *q = call(t, op, body);
		total += json_integer_value(json_object_get(q, "Count"));
		json_t *lek = json_object_get(q, "LastEvaluatedKey");
		if (lek != NULL)
			start = json_dumps(lek, JSON_COMPACT);
		json_decref(q);
	} while (start != NULL);
	return total;
}

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
	for (int pk = 0; pk < t->pks; pk++) {
		memset(seen_pre, 0, (size_t)t->pre_sks * sizeof(*seen_pre));
		const item_state *pre = &t->pre[pk * t->pre_sks];
		int n = query_pk(t, pk, sks, vs, cap);
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
	long long scanned = count_of(t, "Scan", inner);
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
		lsi += count_of(t, "Query", inner);
	}
	tl_assert_msg(lsi == expected, "%s: %s: the LSI holds %lld entries for %lld items", t->tag,
	              when, lsi, expected);
	/* The GSI converges to the same count. */
	int64_t until = tl_items_now_ms() + GSI_WAIT_MS;
	long long gsi;
	for (;;) {
		gsi = 0;
		for (int g = 0; g < G_VALUES; g++) {
			snprintf(
			    inner, sizeof(inner),
			    "\"TableName\":\"%s\",\"IndexName\":\"byg\","
			    "\"KeyConditionExpression\":\"g = :g\",\"ExpressionAttributeValues\":"
			    "{\":g\":{\"S\":\"g%d\"}},\"Select\":\"COUNT\"",
			    t->table, g);
			gsi += count_of(t, "Query", inner);
		}
		if (gsi == expected)
			break;
		tl_assert_msg(tl_items_now_ms() < until,
		              "%s: %s: the GSI holds %lld entries for %lld items after %d s",
		              t->tag, when, gsi, expected, GSI_WAIT_MS / 1000);
		usleep(200000);
	}
	printf("%s: %s: %lld items (%lld certain, %lld uncertain), each read once, LSI and GSI "
	       "agree\n",
	       t->tag, when, expected, certain_total, uncertain);
}
