/*
 * test_lanes.c -- the batching transport (proto/lanes.h) on a recording I/O:
 * no sockets, no threads; the test answers each message by hand.
 */
#include <check.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "proto/lanes.h"
#include "proto/wire.h"
#include "tests/lib/testlib.h"

/* ------------------------------------------------------------------------ */
/* A recording I/O                                                           */
/* ------------------------------------------------------------------------ */

#define MAX_CHANS 8

typedef struct rec_chan {
	wire_lane_io_cb cb;
	void *arg;
	nng_msg *sent; /* the message in flight (NULL: idle) */
	int64_t send_by, answer_by;
	bool stopped;
} rec_chan;

static rec_chan chans[MAX_CHANS];
static int n_chans;

static int rec_open(void *impl, wire_lane_io_cb cb, void *arg, void **out)
{
	ck_assert_int_lt(n_chans, MAX_CHANS);
	rec_chan *c = &chans[n_chans++];
	memset(c, 0, sizeof(*c));
	c->cb = cb;
	c->arg = arg;
	*out = c;
	return SHOAL_OK;
}

static void rec_send(void *chan, nng_msg *msg, int64_t send_by, int64_t answer_by)
{
	rec_chan *c = chan;
	ck_assert_ptr_null(c->sent); /* one exchange at a time */
	c->sent = msg;
	c->send_by = send_by;
	c->answer_by = answer_by;
}

static void answer_chan(rec_chan *c, int rv, nng_msg *reply);

static void rec_stop(void *chan)
{
	rec_chan *c = chan;
	c->stopped = true;
	if (c->sent != NULL)
		answer_chan(c, WIRE_LANE_CLOSED, NULL);
}

static void rec_free(void *chan)
{
	rec_chan *c = chan;
	if (c->sent != NULL)
		nng_msg_free(c->sent);
	c->sent = NULL;
}

static int renewals; /* rec_renew's calls */

static void rec_renew(void *impl)
{
	(void)impl;
	renewals++;
}

static wire_lane_io rec_io = {NULL, rec_open, rec_send, rec_stop, rec_free, rec_renew};

/* Ends c's exchange: its message is dropped, the callback runs. */
static void answer_chan(rec_chan *c, int rv, nng_msg *reply)
{
	nng_msg_free(c->sent);
	c->sent = NULL;
	c->cb(c->arg, rv, reply);
}

/* The channels with a message in flight. */
static int busy(void)
{
	int n = 0;
	for (int i = 0; i < n_chans; i++)
		n += chans[i].sent != NULL;
	return n;
}

static rec_chan *busy_chan(void)
{
	for (int i = 0; i < n_chans; i++)
		if (chans[i].sent != NULL)
			return &chans[i];
	ck_abort_msg("no message in flight");
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Items                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct item {
	wire_lane_item it;
	char body[32];
	int done; /* times done ran */
	int rv;
	char answer[64];
	bool whole;
} item;

static void item_done(wire_lane_item *wi, int rv, nng_msg *whole, const uint8_t *ans, size_t len)
{
	item *x = (item *)wi;
	x->done++;
	x->rv = rv;
	x->whole = whole != NULL;
	if (rv == WIRE_LANE_OK) {
		ck_assert_uint_lt(len, sizeof(x->answer));
		memcpy(x->answer, ans, len);
		x->answer[len] = '\0';
	}
	if (whole != NULL)
		nng_msg_free(whole);
}

static void item_init(item *x, const char *body)
{
	memset(x, 0, sizeof(*x));
	snprintf(x->body, sizeof(x->body), "%s", body);
	x->it.part[0] = (const uint8_t *)"<";
	x->it.len[0] = 1;
	x->it.part[1] = (const uint8_t *)x->body;
	x->it.len[1] = strlen(x->body);
	x->it.deadline = sh_now_ms() + 5000;
	x->it.done = item_done;
}

/* Request batch field 50, answer field 8, as the protocols use. */
static wire_lanes lanes;

#define STALL_MS 40

static void setup_lanes(uint32_t n_lanes, uint32_t max_items, size_t max_bytes)
{
	n_chans = 0;
	renewals = 0;
	wire_lanes_conf c = {.io = &rec_io,
	                     .n_lanes = n_lanes,
	                     .max_items = max_items,
	                     .max_bytes = max_bytes,
	                     .req_field = 50,
	                     .resp_field = 8,
	                     .send_ms = 200,
	                     .stall_ms = STALL_MS};
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(wire_lanes_init(&lanes, &c, msg), SHOAL_OK);
}

static void teardown_lanes(void)
{
	wire_lanes_close(&lanes);
	wire_lanes_fini(&lanes);
}

/* The members (field 50) of a sent batch, as strings. */
static int members(nng_msg *m, char out[][32], int max)
{
	const uint8_t *p = nng_msg_body(m), *end = p + nng_msg_len(m), *d;
	size_t len;
	int n = 0;
	while (n < max && wire_batch_next(&p, end, 50, &d, &len)) {
		memcpy(out[n], d, len);
		out[n][len] = '\0';
		n++;
	}
	return n;
}

static nng_msg *batch_answer(const char **answers, uint32_t n)
{
	const uint8_t *d[16];
	size_t len[16];
	for (uint32_t i = 0; i < n; i++) {
		d[i] = (const uint8_t *)answers[i];
		len[i] = strlen(answers[i]);
	}
	nng_msg *m = wire_batch_answer(8, d, len, n);
	ck_assert_ptr_nonnull(m);
	return m;
}

static nng_msg *plain(const char *s)
{
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, strlen(s)), 0);
	memcpy(nng_msg_body(m), s, strlen(s));
	return m;
}

/* ------------------------------------------------------------------------ */

START_TEST(test_alone_then_batch)
{
	setup_lanes(1, 64, 1 << 20);
	item a, b, c, d;
	item_init(&a, "a");
	item_init(&b, "b");
	item_init(&c, "c");
	item_init(&d, "d");
	/* A lone item goes at once, as its own bytes. */
	ck_assert_int_eq(wire_lanes_submit(&lanes, &a.it), SHOAL_OK);
	ck_assert_int_eq(busy(), 1);
	rec_chan *ch = busy_chan();
	ck_assert_uint_eq(nng_msg_len(ch->sent), 2);
	ck_assert_int_eq(memcmp(nng_msg_body(ch->sent), "<a", 2), 0);
	ck_assert_int_le(ch->send_by, ch->answer_by);
	/* While the lane is busy the others queue ... */
	wire_lanes_submit(&lanes, &b.it);
	wire_lanes_submit(&lanes, &c.it);
	wire_lanes_submit(&lanes, &d.it);
	ck_assert_int_eq(busy(), 1);
	/* ... and leave together when the answer frees the lane. */
	answer_chan(ch, WIRE_LANE_OK, plain("A"));
	ck_assert_int_eq(a.done, 1);
	ck_assert_int_eq(a.rv, WIRE_LANE_OK);
	ck_assert(a.whole); /* alone: the reply message was handed over */
	ck_assert_str_eq(a.answer, "A");
	ck_assert_int_eq(busy(), 1);
	char got[8][32];
	ck_assert_int_eq(members(busy_chan()->sent, got, 8), 3);
	ck_assert_str_eq(got[0], "<b");
	ck_assert_str_eq(got[2], "<d");
	ck_assert_uint_eq(atomic_load(&lanes.batches), 1);
	ck_assert_uint_eq(atomic_load(&lanes.batched), 3);
	/* Each gets its own answer, in order; one missing answer: BAD. */
	const char *ans[] = {"B", "C"};
	answer_chan(busy_chan(), WIRE_LANE_OK, batch_answer(ans, 2));
	ck_assert_str_eq(b.answer, "B");
	ck_assert(!b.whole);
	ck_assert_str_eq(c.answer, "C");
	ck_assert_int_eq(d.done, 1);
	ck_assert_int_eq(d.rv, WIRE_LANE_BAD);
	ck_assert_int_eq(busy(), 0);
	teardown_lanes();
}
END_TEST

START_TEST(test_cork_and_limits)
{
	setup_lanes(2, 3, 1 << 20);
	item x[7];
	wire_lanes_cork();
	for (int i = 0; i < 7; i++) {
		char name[4];
		snprintf(name, sizeof(name), "%d", i);
		item_init(&x[i], name);
		wire_lanes_submit(&lanes, &x[i].it);
	}
	ck_assert_int_eq(busy(), 0); /* corked: nothing left yet */
	wire_lanes_uncork();
	/* Two lanes, at most three items each: 3 + 3 out, 1 queued. */
	ck_assert_int_eq(busy(), 2);
	char got[8][32];
	ck_assert_int_eq(members(chans[0].sent, got, 8), 3);
	rec_chan *first = &chans[strcmp(got[0], "<0") == 0 ? 0 : 1];
	ck_assert_int_eq(members(first->sent, got, 8), 3);
	ck_assert_str_eq(got[0], "<0");
	ck_assert_str_eq(got[2], "<2");
	ck_assert_int_eq(members(chans[first == &chans[0] ? 1 : 0].sent, got, 8), 3);
	ck_assert_str_eq(got[0], "<3");
	/* A failure ends each of the message's items with its reason; the lane
	 * then takes what was queued. */
	answer_chan(first, WIRE_LANE_TIMEOUT, NULL);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(x[i].done, 1);
		ck_assert_int_eq(x[i].rv, WIRE_LANE_TIMEOUT);
	}
	ck_assert_int_eq(busy(), 2);
	ck_assert_uint_eq(nng_msg_len(first->sent), 2); /* "<6", alone */
	teardown_lanes();
	/* Close: the in-flight ones are done CLOSED. */
	for (int i = 3; i < 7; i++) {
		ck_assert_int_eq(x[i].done, 1);
		ck_assert_int_eq(x[i].rv, WIRE_LANE_CLOSED);
	}
}
END_TEST

START_TEST(test_bytes_limit_and_close)
{
	setup_lanes(1, 64, 5);
	item x[4];
	wire_lanes_cork();
	for (int i = 0; i < 4; i++) {
		item_init(&x[i], "12"); /* 3 bytes each */
		wire_lanes_submit(&lanes, &x[i].it);
	}
	wire_lanes_uncork();
	ck_assert_int_eq(busy(), 1);
	ck_assert_uint_eq(nng_msg_len(busy_chan()->sent), 3); /* 3 + 3 > 5: alone */
	wire_lanes_close(&lanes);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(x[i].rv, WIRE_LANE_CLOSED);
	item late;
	item_init(&late, "z");
	ck_assert_int_eq(wire_lanes_submit(&lanes, &late.it), SHOAL_E_UNAVAILABLE);
	ck_assert_int_eq(late.done, 0);
	wire_lanes_fini(&lanes);
}
END_TEST

START_TEST(test_batch_framing)
{
	char msg[SH_ERRMSG_SIZE];
	uint32_t n;
	const char *ans[] = {"x", "", "yz"};
	nng_msg *m = batch_answer(ans, 3);
	/* Field 8 members: a batch of 3 for field 8, a plain message for 50. */
	ck_assert_int_eq(
	    wire_batch_members(nng_msg_body(m), nng_msg_len(m), 8, 10, "a batch", &n, msg),
	    SHOAL_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(
	    wire_batch_members(nng_msg_body(m), nng_msg_len(m), 8, 2, "a batch", &n, msg),
	    SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "a batch of 3 requests (at most 2)");
	/* No member of field 50: a plain message. */
	ck_assert_int_eq(
	    wire_batch_members(nng_msg_body(m), nng_msg_len(m), 50, 10, "a batch", &n, msg),
	    SHOAL_OK);
	ck_assert_uint_eq(n, 0);
	nng_msg_free(m);
	/* Members mixed with anything else: refused. */
	const uint8_t mixed[] = {8 << 3 | 2, 1, 'x', 1 << 3 | 0, 7};
	ck_assert_int_eq(wire_batch_members(mixed, sizeof(mixed), 8, 10, "a batch", &n, msg),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "a batch carries nothing but its requests");
	ck_assert_uint_eq(wire_field_number(&shoal__request__descriptor, "batch"), 50);
	ck_assert_uint_eq(wire_field_number(&shoal__response__descriptor, "batch"), 50);
	ck_assert_uint_eq(wire_field_number(&shoal__request__descriptor, "no_such_field"), 0);
}
END_TEST

/* One item sent and its exchange ended with rv (OK: answered "a"). */
static void exchange(int rv)
{
	item x;
	item_init(&x, "x");
	ck_assert_int_eq(wire_lanes_submit(&lanes, &x.it), SHOAL_OK);
	answer_chan(busy_chan(), rv, rv == WIRE_LANE_OK ? plain("a") : NULL);
	ck_assert_int_eq(x.rv, rv);
}

static void pause_past_stall(void)
{
	nanosleep(&(struct timespec){0, (STALL_MS + 10) * 1000000L}, NULL);
}

/* "Stalled connections": failures without an answer (no answer, no room to
 * send) spanning stall_ms ask the io to renew the connection, once per
 * stall_ms; an answer starts the count again; a reset or a close is not a
 * stall (the connection ended by itself). */
START_TEST(test_stall_renews)
{
	setup_lanes(1, 1, 1 << 20);
	exchange(WIRE_LANE_TIMEOUT); /* the first failure: the stall begins */
	ck_assert_int_eq(renewals, 0);
	exchange(WIRE_LANE_UNREACHABLE);
	ck_assert_int_eq(renewals, 0); /* not for stall_ms yet */
	pause_past_stall();
	exchange(WIRE_LANE_UNREACHABLE);
	ck_assert_int_eq(renewals, 1);
	exchange(WIRE_LANE_TIMEOUT);
	ck_assert_int_eq(renewals, 1); /* once per stall_ms */
	pause_past_stall();
	exchange(WIRE_LANE_RESET);
	exchange(WIRE_LANE_BAD);
	ck_assert_int_eq(renewals, 1); /* not stalls */
	exchange(WIRE_LANE_TIMEOUT);
	ck_assert_int_eq(renewals, 2); /* still stalled, stall_ms since the renewal */
	/* An answer ends the stall: the next failure begins another. */
	exchange(WIRE_LANE_OK);
	pause_past_stall();
	exchange(WIRE_LANE_UNREACHABLE);
	ck_assert_int_eq(renewals, 2);
	pause_past_stall();
	exchange(WIRE_LANE_OK);
	exchange(WIRE_LANE_TIMEOUT);
	ck_assert_int_eq(renewals, 2);
	ck_assert_uint_eq(atomic_load(&lanes.stall.renewals), 2);
	teardown_lanes();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lanes");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_alone_then_batch);
	tcase_add_test(tc, test_cork_and_limits);
	tcase_add_test(tc, test_bytes_limit_and_close);
	tcase_add_test(tc, test_batch_framing);
	tcase_add_test(tc, test_stall_renews);
	suite_add_tcase(s, tc);
	return tl_run_suite(s);
}
