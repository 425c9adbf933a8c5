/* raft 0.15's messages as the TLS transport checks them before raft reads
 * them (node/raftframe.h): every message raft 0.15 writes passes, whole or
 * a byte at a time; each malformed form the header names is refused, with
 * its reason, no later than the last byte of its header (raft decodes a
 * header only when it is whole). */
#include <check.h>
#include <raft.h>
#include <stdlib.h>
#include <string.h>

#include "node/raftframe.h"
#include "tests/lib/testlib.h"

/* A message being built, as raft 0.15's uv_encoding.c lays it out. */
typedef struct msg {
	uint8_t b[8192];
	size_t len;
	size_t header_end; /* offset of the header's last byte + 1 */
} msg;

static void put64(msg *m, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		m->b[m->len++] = (uint8_t)(v >> (8 * i));
}

static void put32(msg *m, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		m->b[m->len++] = (uint8_t)(v >> (8 * i));
}

static void put8(msg *m, uint8_t v)
{
	m->b[m->len++] = v;
}

static void pad_to(msg *m, size_t len)
{
	while (m->len < len)
		m->b[m->len++] = 0xa5; /* (raft leaves these bytes unwritten) */
}

/* A header of hlen bytes of type, all fields given as u64 words. */
static msg simple(uint64_t type, uint64_t hlen)
{
	msg m = {.len = 0};
	put64(&m, type);
	put64(&m, hlen);
	for (uint64_t i = 0; i < hlen / 8; i++)
		put64(&m, 1000 + i);
	m.header_end = m.len;
	return m;
}

/* A preamble announcing a header of hlen bytes, and one byte of it. */
static msg preamble(uint64_t type, uint64_t hlen)
{
	msg m = {.len = 0};
	put64(&m, type);
	put64(&m, hlen);
	put8(&m, 0);
	m.header_end = 16;
	return m;
}

/* AppendEntries with n entries of the given types and lengths, and their
 * payload. */
static msg append(unsigned n, const uint8_t *types, const uint32_t *lens)
{
	msg m = {.len = 0};
	put64(&m, RAFT_IO_APPEND_ENTRIES);
	put64(&m, 48 + 16 * (uint64_t)n);
	put64(&m, 7);  /* term */
	put64(&m, 41); /* prev index */
	put64(&m, 6);  /* prev term */
	put64(&m, 40); /* commit */
	put64(&m, n);
	for (unsigned i = 0; i < n; i++) {
		put64(&m, 7);
		put8(&m, types[i]);
		put8(&m, 0), put8(&m, 0), put8(&m, 0);
		put32(&m, lens[i]);
	}
	pad_to(&m, m.len + 8); /* the unwritten "leader id" */
	m.header_end = m.len;
	for (unsigned i = 0; i < n; i++)
		for (uint32_t k = 0; k < lens[i]; k++)
			put8(&m, (uint8_t)(i + k));
	return m;
}

typedef struct server {
	uint64_t id;
	const char *address;
	uint8_t role;
} server;

/* InstallSnapshot with the configuration's servers and data_len bytes. */
static msg snapshot(unsigned n, const server *s, uint64_t data_len)
{
	size_t conf = 1 + 8;
	for (unsigned i = 0; i < n; i++)
		conf += 8 + strlen(s[i].address) + 1 + 1;
	conf = (conf + 7) & ~(size_t)7;
	msg m = {.len = 0};
	put64(&m, RAFT_IO_INSTALL_SNAPSHOT);
	put64(&m, 56 + conf);
	put64(&m, 7);  /* term */
	put64(&m, 90); /* last index */
	put64(&m, 6);  /* last term */
	put64(&m, 80); /* conf index */
	put64(&m, conf);
	size_t start = m.len;
	put8(&m, 1);
	put64(&m, n);
	for (unsigned i = 0; i < n; i++) {
		put64(&m, s[i].id);
		size_t a = strlen(s[i].address) + 1;
		memcpy(m.b + m.len, s[i].address, a);
		m.len += a;
		put8(&m, s[i].role);
	}
	pad_to(&m, start + conf);
	put64(&m, data_len);
	pad_to(&m, m.len + 8);
	m.header_end = m.len;
	for (uint64_t k = 0; k < data_len; k++)
		put8(&m, (uint8_t)k);
	return m;
}

static const server three[] = {
    {1, "127.0.0.1:7101", RAFT_VOTER},
    {2, "127.0.0.1:7201", RAFT_VOTER},
    {3, "127.0.0.1:7301", RAFT_STANDBY},
};

/* Feeds p whole (step 0) or step bytes at a time: the end of the call that
 * refused (0 for a refusal of the whole), and why; NOT_REFUSED when none. */
#define NOT_REFUSED SIZE_MAX
static size_t feed(node_rf *f, const uint8_t *p, size_t len, size_t step, const char **why)
{
	*why = NULL;
	if (step == 0)
		return node_rf_feed(f, p, len, why) == 0 ? NOT_REFUSED : 0;
	for (size_t off = 0; off < len; off += step) {
		size_t k = len - off < step ? len - off : step;
		if (node_rf_feed(f, p + off, k, why) != 0)
			return off + k;
	}
	return NOT_REFUSED;
}

/* Every message raft writes passes, one after another in one stream. */
START_TEST(test_valid_stream)
{
	static uint8_t stream[65536];
	size_t len = 0, count = 0;
	const uint8_t types[] = {RAFT_COMMAND, RAFT_BARRIER, RAFT_CHANGE};
	const uint32_t lens[] = {24, 8, 0};
	msg all[] = {
	    simple(RAFT_IO_REQUEST_VOTE, 40),
	    simple(RAFT_IO_REQUEST_VOTE, 32),
	    simple(RAFT_IO_REQUEST_VOTE_RESULT, 24),
	    simple(RAFT_IO_REQUEST_VOTE_RESULT, 16),
	    append(0, NULL, NULL), /* a heartbeat */
	    append(3, types, lens),
	    simple(RAFT_IO_APPEND_ENTRIES_RESULT, 24),
	    snapshot(3, three, 40),
	    snapshot(0, NULL, 8),
	    simple(RAFT_IO_TIMEOUT_NOW, 24),
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		memcpy(stream + len, all[i].b, all[i].len);
		len += all[i].len;
		count++;
	}
	size_t steps[] = {0, 1, 3, 7, 16, 100};
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		node_rf f;
		node_rf_init(&f);
		const char *why;
		ck_assert_msg(feed(&f, stream, len, steps[s], &why) == NOT_REFUSED,
		              "step %zu: refused: %s", steps[s], why);
		ck_assert_uint_eq(f.messages, count);
	}
}
END_TEST

/* One malformed message, after a good one: refused, with its reason, by
 * the last byte of its header at the latest, byte by byte as whole. */
static void refused(msg bad, const char *reason)
{
	msg good = simple(RAFT_IO_TIMEOUT_NOW, 24);
	static uint8_t stream[16384];
	memcpy(stream, good.b, good.len);
	memcpy(stream + good.len, bad.b, bad.len);
	size_t len = good.len + bad.len;
	for (size_t step = 0; step <= 1; step++) {
		node_rf f;
		node_rf_init(&f);
		const char *why;
		size_t at = feed(&f, stream, len, step, &why);
		ck_assert_msg(at != NOT_REFUSED, "%s: not refused", reason);
		ck_assert_ptr_nonnull(why);
		ck_assert_msg(strstr(why, reason) != NULL, "refused as \"%s\", not \"%s\"", why,
		              reason);
		if (step == 1)
			ck_assert_msg(at <= good.len + bad.header_end,
			              "%s: refused at %zu, after %zu", reason, at,
			              good.len + bad.header_end);
		ck_assert_uint_eq(f.messages, 1);
		/* Failed for good. */
		ck_assert_int_eq(node_rf_feed(&f, good.b, good.len, &why), -1);
	}
}

START_TEST(test_refused)
{
	refused(simple(0, 8), "unknown message type");
	refused(simple(7, 8), "unknown message type");
	refused(simple(RAFT_IO_REQUEST_VOTE, 8), "request vote: bad header length");
	refused(simple(RAFT_IO_REQUEST_VOTE_RESULT, 8), "request vote result: bad header length");
	refused(simple(RAFT_IO_TIMEOUT_NOW, 16), "bad header length");
	refused(simple(RAFT_IO_APPEND_ENTRIES_RESULT, 32), "bad header length");
	refused(simple(RAFT_IO_APPEND_ENTRIES, 40), "append entries: bad header length");
	refused(simple(RAFT_IO_APPEND_ENTRIES, 56), "append entries: bad header length");

	uint8_t types[] = {RAFT_COMMAND, RAFT_COMMAND};
	uint32_t lens[] = {16, 16};
	/* A count the header's length does not hold (raft would read entry
	 * headers past its buffer). */
	msg m = append(2, types, lens);
	m.b[16 + 32] = 200;
	refused(m, "entry count does not match");
	/* An entry type raft does not know. */
	m = append(2, types, lens);
	m.b[16 + 40 + 16 + 8] = 9;
	refused(m, "unknown entry type");
	/* A length that is not a multiple of 8 (the entries after it would
	 * point past the payload). */
	m = append(2, types, lens);
	m.b[16 + 40 + 12] = 13;
	refused(m, "not a multiple of 8");
	/* InstallSnapshot: the configuration. */
	m = snapshot(3, three, 16);
	m.b[16 + 32] ^= 8; /* configuration length off by 8 */
	refused(m, "configuration length does not match");
	m = snapshot(3, three, 16);
	m.b[16 + 40] = 2; /* format */
	refused(m, "unknown configuration format");
	m = snapshot(3, three, 16);
	m.b[16 + 41] = 200; /* servers */
	refused(m, "more servers than the configuration holds");
	server zero[] = {{1, "a:1", RAFT_VOTER}, {0, "b:2", RAFT_VOTER}};
	refused(snapshot(2, zero, 16), "server id 0");
	server role[] = {{1, "a:1", RAFT_VOTER}, {2, "b:2", 7}};
	refused(snapshot(2, role, 16), "unknown server role");
	/* One server fewer than the configuration holds: more than padding left. */
	m = snapshot(3, three, 16);
	m.b[16 + 41] = 2;
	refused(m, "longer than its servers");
	/* An address with no NUL inside the configuration. */
	server one[] = {{1, "127.0.0.1:7101", RAFT_VOTER}};
	m = snapshot(1, one, 16);
	size_t conf_end = 16 + 40 + (m.b[16 + 32] | (size_t)m.b[16 + 33] << 8);
	for (size_t i = 16 + 40 + 1 + 8 + 8; i < conf_end; i++)
		m.b[i] = 'x';
	refused(m, "not terminated");
	/* A role byte past the configuration's end: the address ends at its
	 * last byte. */
	m = snapshot(1, one, 16);
	for (size_t i = 16 + 40 + 1 + 8 + 8; i < conf_end - 1; i++)
		m.b[i] = 'x';
	m.b[conf_end - 1] = 0;
	refused(m, "longer than its length");
	/* A header too short for a configuration at all. */
	refused(simple(RAFT_IO_INSTALL_SNAPSHOT, 56), "install snapshot: bad header length");
	refused(preamble(RAFT_IO_INSTALL_SNAPSHOT, 56 + NODE_RF_CONF_MAX + 8),
	        "install snapshot: bad header length");
	refused(preamble(RAFT_IO_APPEND_ENTRIES, 48 + 16 * (NODE_RF_ENTRIES_MAX + 1)),
	        "append entries: bad header length");
	refused(preamble(RAFT_IO_REQUEST_VOTE, UINT64_MAX), "request vote: bad header length");
}
END_TEST

/* Payloads past NODE_RF_PAYLOAD_MAX: refused in the header, before raft
 * would allocate them. */
START_TEST(test_payload_bounds)
{
	msg m = snapshot(1, three, 0);
	/* the data length is the u64 after the configuration */
	size_t conf = m.b[16 + 32] | (size_t)m.b[16 + 33] << 8;
	size_t at = 16 + 40 + conf;
	uint64_t v = NODE_RF_PAYLOAD_MAX + 1;
	for (int i = 0; i < 8; i++)
		m.b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
	refused(m, "install snapshot: payload too large");

	/* 257 entries of 4 GiB - 8 each: over the bound (2^40) by their sum. */
	unsigned n = 257;
	uint8_t *types = calloc(n, 1);
	uint32_t *lens = calloc(n, sizeof(*lens));
	for (unsigned i = 0; i < n; i++)
		types[i] = RAFT_COMMAND, lens[i] = 0xfffffff8u;
	msg *a = calloc(1, sizeof(*a));
	/* (built by hand: append() would write the payloads) */
	put64(a, RAFT_IO_APPEND_ENTRIES);
	put64(a, 48 + 16 * (uint64_t)n);
	for (int i = 0; i < 4; i++)
		put64(a, 1);
	put64(a, n);
	for (unsigned i = 0; i < n; i++) {
		put64(a, 1);
		put8(a, types[i]);
		put8(a, 0), put8(a, 0), put8(a, 0);
		put32(a, lens[i]);
	}
	pad_to(a, a->len + 8);
	a->header_end = a->len;
	node_rf f;
	node_rf_init(&f);
	const char *why = NULL;
	ck_assert_int_eq(node_rf_feed(&f, a->b, a->len, &why), -1);
	ck_assert_str_eq(why, "append entries: payload too large");
	free(a);
	free(lens);
	free(types);
}
END_TEST

static Suite *raftframe_suite(void)
{
	return tl_suite("raftframe", NULL, NULL, 30,
	                TL_TESTS(test_valid_stream, test_refused, test_payload_bounds));
}

TL_MAIN(raftframe_suite)
