/* The decode budget of proto/wire_frame.c (wire.h, "Memory a decode may
 * take"): the densest legitimate messages decode, and what protobuf-c really
 * allocates for them is measured against WIRE_DECODE_PER_BYTE; messages that
 * amplify past the budget -- millions of unknown fields, long runs of empty
 * sub-messages -- are refused with ValidationException, the first kind
 * before a single allocation, and nothing ever takes more than the budget. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_values.h"

/* ------------------------------------------------------------------------ */
/* A heap allocator that counts (as wire_frame.c counts: rounded to 16)      */
/* ------------------------------------------------------------------------ */

typedef struct counter {
	ProtobufCAllocator self;
	size_t bytes, calls;
} counter;

static void *count_alloc(void *data, size_t n)
{
	counter *c = data;
	c->bytes += (n + 15) & ~(size_t)15;
	c->calls++;
	return sh_malloc(n);
}

static void count_free(void *data, void *p)
{
	(void)data;
	sh_free(p);
}

static void counter_init(counter *c)
{
	*c = (counter){{count_alloc, count_free, NULL}, 0, 0};
	c->self.allocator_data = c;
}

/* ------------------------------------------------------------------------ */
/* Legitimate messages, built as the converters would                        */
/* ------------------------------------------------------------------------ */

enum kind { K_NULL, K_BOOL, K_NUM, K_STR, K_WORDS };

static Shoal__AttributeValue *av(enum kind k, unsigned i)
{
	Shoal__AttributeValue *v = sh_arena_alloc(&tl_arena, sizeof(*v));
	shoal__attribute_value__init(v);
	switch (k) {
	case K_NULL:
		v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_NULL;
		v->null = true;
		break;
	case K_BOOL:
		v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_BOOL;
		v->bool_ = (i & 1) != 0;
		break;
	case K_NUM:
		v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_N;
		v->n.data = (uint8_t *)"42";
		v->n.len = 2;
		break;
	case K_STR:
		v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
		v->s.data = (uint8_t *)"v";
		v->s.len = 1;
		break;
	case K_WORDS:
		v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_S;
		v->s.data = (uint8_t *)"user#00042";
		v->s.len = 10;
		break;
	}
	return v;
}

/* An item of n attributes with the shortest unique names ("a", ..., "a9z")
 * each holding a value of kind k. */
static Shoal__Item *item(unsigned n, enum kind k)
{
	Shoal__Item *it = sh_arena_alloc(&tl_arena, sizeof(*it));
	shoal__item__init(it);
	it->n_attrs = n;
	it->attrs = sh_arena_alloc(&tl_arena, n * sizeof(*it->attrs));
	static const char alpha[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	for (unsigned i = 0; i < n; i++) {
		Shoal__Attribute *at = sh_arena_alloc(&tl_arena, sizeof(*at));
		shoal__attribute__init(at);
		char name[8];
		size_t len = 0;
		unsigned x = i;
		do {
			name[len++] = alpha[x % 62];
			x /= 62;
		} while (x > 0);
		at->name.data = sh_arena_memdup(&tl_arena, name, len);
		at->name.len = len;
		at->value = av(k, i);
		it->attrs[i] = at;
	}
	return it;
}

/* An item of one attribute "l": a List of n NULLs (empty AttributeValues
 * when empty, which no valid request holds). */
static Shoal__Item *list_item_of(unsigned n, bool empty)
{
	Shoal__ListValue *l = sh_arena_alloc(&tl_arena, sizeof(*l));
	shoal__list_value__init(l);
	l->n_values = n;
	l->values = sh_arena_alloc(&tl_arena, n * sizeof(*l->values));
	for (unsigned i = 0; i < n; i++) {
		l->values[i] = av(K_NULL, i);
		if (empty)
			shoal__attribute_value__init(l->values[i]);
	}
	Shoal__AttributeValue *v = sh_arena_alloc(&tl_arena, sizeof(*v));
	shoal__attribute_value__init(v);
	v->value_case = SHOAL__ATTRIBUTE_VALUE__VALUE_L;
	v->l = l;
	Shoal__Item *it = item(1, K_NULL);
	it->attrs[0]->value = v;
	return it;
}

static Shoal__Item *list_item(unsigned n)
{
	return list_item_of(n, false);
}

/* BatchWriteItem of 25 puts of items(n, k) to table "t". */
static Shoal__Request *batch_write(unsigned n, enum kind k)
{
	Shoal__TableWriteRequests *t = sh_arena_alloc(&tl_arena, sizeof(*t));
	shoal__table_write_requests__init(t);
	t->table_name = "things";
	t->n_requests = 25;
	t->requests = sh_arena_alloc(&tl_arena, 25 * sizeof(*t->requests));
	for (unsigned i = 0; i < 25; i++) {
		Shoal__PutRequest *p = sh_arena_alloc(&tl_arena, sizeof(*p));
		shoal__put_request__init(p);
		p->item = item(n, k);
		Shoal__WriteRequest *w = sh_arena_alloc(&tl_arena, sizeof(*w));
		shoal__write_request__init(w);
		w->request_case = SHOAL__WRITE_REQUEST__REQUEST_PUT_REQUEST;
		w->put_request = p;
		t->requests[i] = w;
	}
	Shoal__BatchWriteItemRequest *b = sh_arena_alloc(&tl_arena, sizeof(*b));
	shoal__batch_write_item_request__init(b);
	b->n_request_items = 1;
	b->request_items = sh_arena_alloc(&tl_arena, sizeof(*b->request_items));
	b->request_items[0] = t;
	Shoal__Request *r = sh_arena_alloc(&tl_arena, sizeof(*r));
	shoal__request__init(r);
	r->op_case = SHOAL__REQUEST__OP_BATCH_WRITE_ITEM;
	r->batch_write_item = b;
	return r;
}

/* A Query answer of n items of m attributes of kind k. */
static Shoal__Response *query_page(unsigned n, unsigned m, enum kind k)
{
	Shoal__QueryResponse *q = sh_arena_alloc(&tl_arena, sizeof(*q));
	shoal__query_response__init(q);
	q->n_items = n;
	q->items = sh_arena_alloc(&tl_arena, n * sizeof(*q->items));
	for (unsigned i = 0; i < n; i++)
		q->items[i] = item(m, k);
	q->count = q->scanned_count = n;
	Shoal__Response *r = sh_arena_alloc(&tl_arena, sizeof(*r));
	shoal__response__init(r);
	r->result_case = SHOAL__RESPONSE__RESULT_QUERY;
	r->query = q;
	return r;
}

/* Packs m, decodes it with wire_unpack and with a counting allocator; returns
 * the bytes protobuf-c allocated per byte of message, after checking that
 * wire_unpack accepted it. */
static double decode_ratio(const char *what, const ProtobufCMessage *m)
{
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, m, &buf, &len, tl_msg), SHOAL_OK);
	counter c;
	counter_init(&c);
	ProtobufCMessage *out;
	int rc = wire_unpack(m->descriptor, &c.self, buf, len, &out, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s (%zu bytes): %s", what, len, tl_msg);
	protobuf_c_message_free_unpacked(out, &c.self);
	double r = (double)c.bytes / (double)len;
	printf("  %-52s %9zu bytes, %10zu decoded: %5.1f per byte\n", what, len, c.bytes, r);
	return r;
}

START_TEST(test_legitimate_messages_decode)
{
	/* The densest shapes a client can legitimately send or a node answer:
	 * every one must stay within the ratio, not only within the slack. */
	struct {
		const char *what;
		const ProtobufCMessage *m;
	} cases[] = {
	    {"BatchWriteItem 25 x 4000 attrs NULL", &batch_write(4000, K_NULL)->base},
	    {"BatchWriteItem 25 x 4000 attrs BOOL", &batch_write(4000, K_BOOL)->base},
	    {"BatchWriteItem 25 x 4000 attrs N \"42\"", &batch_write(4000, K_NUM)->base},
	    {"BatchWriteItem 25 x 4000 attrs S \"v\"", &batch_write(4000, K_STR)->base},
	    {"BatchWriteItem 25 x 4000 attrs S \"user#00042\"", &batch_write(4000, K_WORDS)->base},
	    {"Query page 2000 items x 17 attrs BOOL", &query_page(2000, 17, K_BOOL)->base},
	    {"Query page 2000 items x 20 attrs BOOL", &query_page(2000, 20, K_BOOL)->base},
	    {"Query page 2000 items x 20 attrs N \"42\"", &query_page(2000, 20, K_NUM)->base},
	    {"Query page 100000 items x 1 attr NULL", &query_page(100000, 1, K_NULL)->base},
	};
	double worst = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double r = decode_ratio(cases[i].what, cases[i].m);
		ck_assert_msg(r < WIRE_DECODE_PER_BYTE, "%s: %.1f bytes per byte", cases[i].what,
		              r);
		if (r > worst)
			worst = r;
	}
	ck_assert_msg(worst > 0.5 * WIRE_DECODE_PER_BYTE, "worst %.1f", worst);

	/* The densest value of all: a List of NULLs, of a length that makes
	 * protobuf-c's last scan slab (they double) almost empty: 131057 =
	 * 16 + 32 + ... + 65536 + 1, a 512 KiB item. */
	Shoal__Request *list = batch_write(1, K_NULL);
	list->batch_write_item->request_items[0]->requests[0]->put_request->item =
	    list_item(131057);
	double r = decode_ratio("BatchWriteItem, a List of 131057 NULLs", &list->base);
	ck_assert_msg(r < WIRE_DECODE_PER_BYTE, "a List of NULLs: %.1f bytes per byte", r);
	ck_assert_msg(r > 0.85 * WIRE_DECODE_PER_BYTE, "a List of NULLs: %.1f bytes per byte", r);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Amplification                                                             */
/* ------------------------------------------------------------------------ */

/* About n bytes: a request_id, then two-byte fields unknown to Request and
 * NodeRequest alike (field 9, varint 1). */
static uint8_t *unknown_fields(size_t n, size_t *len)
{
	uint8_t *b = sh_arena_alloc(&tl_arena, n + 16);
	size_t o = 0;
	b[o++] = 0x08; /* request_id = 7 */
	b[o++] = 7;
	while (o + 2 <= n) {
		b[o++] = 9 << 3;
		b[o++] = 1;
	}
	*len = o;
	return b;
}

START_TEST(test_unknown_fields_refused_before_allocating)
{
	size_t len;
	uint8_t *buf = unknown_fields(4u << 20, &len);
	counter c;
	counter_init(&c);
	ProtobufCMessage *out = (ProtobufCMessage *)1;
	int rc = wire_unpack(&shoal__request__descriptor, &c.self, buf, len, &out, tl_msg);
	ck_assert_int_eq(rc, SHOAL_E_VALIDATION);
	ck_assert_ptr_null(out);
	ck_assert_msg(strstr(tl_msg, "The Request is too complex for its size") != NULL, "%s",
	              tl_msg);
	ck_assert_uint_eq(c.calls, 0); /* refused by the walk */
	ck_assert_int_eq(wire_check_framing(&shoal__node_request__descriptor, buf, len, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(tl_msg, "NodeRequest is too complex") != NULL, "%s", tl_msg);

	/* What protobuf-c alone would have taken: far past the budget. */
	counter_init(&c);
	Shoal__Request *r = shoal__request__unpack(&c.self, len, buf);
	ck_assert_ptr_nonnull(r);
	shoal__request__free_unpacked(r, &c.self);
	ck_assert_uint_gt(c.bytes, wire_decode_budget(len));

	/* The group's own log and results are decoded without the budget. */
	buf = unknown_fields(1u << 20, &len);
	ck_assert_int_eq(wire_unpack(&shoal__request__descriptor, NULL, buf, len, &out, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_int_eq(
	    wire_unpack_local(&shoal__request__descriptor, NULL, buf, len, &out, tl_msg), SHOAL_OK);
	ck_assert_uint_gt(out->n_unknown_fields, 500000);
	protobuf_c_message_free_unpacked(out, wire_heap_allocator());

	/* A few unknown fields (a newer peer's) are kept as before. */
	buf = unknown_fields(64, &len);
	Shoal__Request *req;
	ck_assert_int_eq(wire_unpack_request(NULL, buf, len, &req, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(req->request_id, 7);
	ck_assert_uint_gt(req->base.n_unknown_fields, 10);
	wire_free_request(NULL, req);
}
END_TEST

START_TEST(test_dense_known_fields_refused)
{
	/* A List of 1,000,000 empty AttributeValues: 2 MB that protobuf-c
	 * would turn into 100 MB (a 48-byte struct, a slot and a 32-byte scan
	 * record each, the last slab half empty). */
	Shoal__Request *r = batch_write(1, K_NULL);
	r->batch_write_item->request_items[0]->requests[0]->put_request->item =
	    list_item_of(1000000, true);
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(wire_pack(&tl_arena, &r->base, &buf, &len, tl_msg), SHOAL_OK);
	counter c;
	counter_init(&c);
	ProtobufCMessage *out;
	ck_assert_int_eq(wire_unpack(&shoal__request__descriptor, &c.self, buf, len, &out, tl_msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(tl_msg, "too complex for its size") != NULL, "%s", tl_msg);
	ck_assert_uint_le(c.bytes, wire_decode_budget(len));

	counter_init(&c);
	Shoal__Request *full = shoal__request__unpack(&c.self, len, buf);
	ck_assert_ptr_nonnull(full);
	shoal__request__free_unpacked(full, &c.self);
	ck_assert_uint_gt(c.bytes, wire_decode_budget(len));

	/* Responses go through the same rule (a node's answer, the client's). */
	Shoal__Response *page = query_page(1, 1, K_NULL);
	page->query->items[0] = list_item_of(1000000, true);
	ck_assert_int_eq(wire_pack(&tl_arena, &page->base, &buf, &len, tl_msg), SHOAL_OK);
	Shoal__Response *resp;
	ck_assert_int_eq(wire_unpack_response(NULL, buf, len, &resp, tl_msg), SHOAL_E_VALIDATION);
	ck_assert_ptr_null(resp);
}
END_TEST

/* The walk refuses early only what the allocator would refuse: its figure is
 * a lower bound of what protobuf-c allocates.  Floods of unknown fields and
 * of empty AttributeValues of every length across the budget's edge. */
START_TEST(test_walk_is_a_lower_bound)
{
	int refused = 0, accepted = 0;
	for (size_t n = 32 * 1024; n <= 416 * 1024; n += 16 * 1024) {
		for (int shape = 0; shape < 2; shape++) {
			uint8_t *buf;
			size_t len;
			if (shape == 0) {
				buf = unknown_fields(n, &len);
			} else {
				Shoal__Request *r = batch_write(1, K_NULL);
				r->batch_write_item->request_items[0]
				    ->requests[0]
				    ->put_request->item = list_item_of((unsigned)(n / 2), true);
				ck_assert_int_eq(wire_pack(&tl_arena, &r->base, &buf, &len, tl_msg),
				                 SHOAL_OK);
			}
			if (wire_check_framing(&shoal__request__descriptor, buf, len, tl_msg) ==
			    SHOAL_OK) {
				accepted++;
				continue;
			}
			refused++;
			counter c;
			counter_init(&c);
			Shoal__Request *full = shoal__request__unpack(&c.self, len, buf);
			ck_assert_ptr_nonnull(full);
			shoal__request__free_unpacked(full, &c.self);
			ck_assert_msg(
			    c.bytes > wire_decode_budget(len),
			    "shape %d, %zu bytes: refused by the walk, but protobuf-c took "
			    "%zu of %zu",
			    shape, len, c.bytes, wire_decode_budget(len));
			sh_arena_reset(&tl_arena);
		}
	}
	ck_assert_int_gt(refused, 10);
	ck_assert_int_gt(accepted, 10);
}
END_TEST

START_TEST(test_budget_arithmetic)
{
	ck_assert_uint_eq(wire_decode_budget(0), WIRE_DECODE_SLACK);
	ck_assert_uint_eq(wire_decode_budget(1000),
	                  1000 * WIRE_DECODE_PER_BYTE + WIRE_DECODE_SLACK);
	ck_assert_uint_eq(wire_decode_budget(SIZE_MAX / 2), SIZE_MAX);
}
END_TEST

static Suite *budget_suite(void)
{
	return tl_suite("wire_budget", tl_arena_setup, tl_arena_teardown, 120,
	                TL_TESTS(test_legitimate_messages_decode,
	                         test_unknown_fields_refused_before_allocating,
	                         test_dense_known_fields_refused, test_walk_is_a_lower_bound,
	                         test_budget_arithmetic));
}

TL_MAIN(budget_suite)
