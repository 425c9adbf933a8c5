/*
 * raftframe.c -- raft 0.15's messages checked before raft reads them
 * (contract and rules: raftframe.h).
 *
 * An incremental reader of raft's framing: the stream is a sequence of
 * parts, each either a field of up to 16 bytes (gathered in acc, then
 * judged), a skip to a header offset, or an address (bytes up to a NUL).
 * Every byte is judged before node_rf_feed returns 0 for the buffer holding
 * it, so the caller forwards only bytes that passed.
 */
#include "node/raftframe.h"

#include <string.h>

#include <raft.h>

enum { RF_PRE, RF_HDR, RF_PAY, RF_BAD };

enum {
	P_FIELD_PRE, /* the preamble: type, header length */
	P_SKIP,      /* header bytes up to f->until, then f->after */
	P_COUNT,     /* AppendEntries: the entry count */
	P_ENTRY,     /* an entry's header */
	P_CONF_LEN,  /* InstallSnapshot: the configuration's length */
	P_VERSION,
	P_SERVERS,
	P_ID,
	P_ADDR,
	P_ROLE,
	P_PAD, /* (no bytes: checks where the servers ended) */
	P_DATA_LEN,
	P_END, /* (no bytes: the header is over) */
};

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int bad(node_rf *f, const char *why)
{
	f->state = RF_BAD;
	f->why = why;
	return -1;
}

static void field(node_rf *f, int part, uint32_t need)
{
	f->part = part;
	f->acc_need = need;
	f->acc_len = 0;
}

static void skip_to(node_rf *f, uint64_t until, int after)
{
	f->part = P_SKIP;
	f->until = until;
	f->after = after;
}

/* A field of the configuration starting at f->hoff must end inside it. */
static int conf_field(node_rf *f, int part, uint32_t need)
{
	if (f->hoff + need > f->conf_end)
		return bad(f, "install snapshot: configuration longer than its length");
	field(f, part, need);
	return 0;
}

static void next_message(node_rf *f)
{
	f->state = RF_PRE;
	f->messages++;
	field(f, P_FIELD_PRE, 16);
}

/* The header is whole: on to the payload, or the next message. */
static void header_done(node_rf *f)
{
	if (f->payload == 0) {
		next_message(f);
		return;
	}
	f->state = RF_PAY;
}

/* Parts that take no bytes (P_PAD, P_END) run at once. */
static int settle(node_rf *f)
{
	for (;;) {
		if (f->state != RF_HDR)
			return 0;
		if (f->part == P_SKIP && f->hoff == f->until) {
			int a = f->after;
			if (a == P_END) {
				header_done(f);
				return 0;
			}
			if (a == P_PAD)
				f->part = P_PAD;
			else /* P_COUNT, P_CONF_LEN, P_DATA_LEN: every skip ends at a u64 */
				field(f, a, 8);
			continue;
		}
		if (f->part == P_PAD) {
			if (f->conf_end - f->hoff >= 8)
				return bad(
				    f, "install snapshot: configuration longer than its servers");
			skip_to(f, f->conf_end, P_DATA_LEN);
			continue;
		}
		return 0;
	}
}

/* The preamble: which message, how long its header. */
static int preamble(node_rf *f)
{
	f->type = get64(f->acc);
	f->hlen = get64(f->acc + 8);
	f->hoff = 0;
	f->payload = 0;
	f->state = RF_HDR;
	uint64_t h = f->hlen;
	switch (f->type) {
	case RAFT_IO_APPEND_ENTRIES:
		if (h < 48 || (h - 48) % 16 != 0 || (h - 48) / 16 > NODE_RF_ENTRIES_MAX)
			return bad(f, "append entries: bad header length");
		skip_to(f, 32, P_COUNT);
		return 0;
	case RAFT_IO_APPEND_ENTRIES_RESULT:
	case RAFT_IO_TIMEOUT_NOW:
		if (h != 24)
			return bad(f, "bad header length");
		break;
	case RAFT_IO_REQUEST_VOTE:
		if (h != 40 && h != 32)
			return bad(f, "request vote: bad header length");
		break;
	case RAFT_IO_REQUEST_VOTE_RESULT:
		if (h != 24 && h != 16)
			return bad(f, "request vote result: bad header length");
		break;
	case RAFT_IO_INSTALL_SNAPSHOT:
		if (h < 56 + 9 || h > 56 + NODE_RF_CONF_MAX)
			return bad(f, "install snapshot: bad header length");
		skip_to(f, 32, P_CONF_LEN);
		return 0;
	default:
		return bad(f, "unknown message type");
	}
	skip_to(f, h, P_END);
	return 0;
}

/* A whole field in f->acc. */
static int judge(node_rf *f)
{
	const uint8_t *a = f->acc;
	uint64_t v;
	switch (f->part) {
	case P_FIELD_PRE:
		return preamble(f);
	case P_COUNT:
		f->n = get64(a);
		if (f->n != (f->hlen - 48) / 16)
			return bad(f,
			           "append entries: entry count does not match the header length");
		f->i = 0;
		if (f->n > 0)
			field(f, P_ENTRY, 16);
		else
			skip_to(f, f->hlen, P_END);
		return 0;
	case P_ENTRY: {
		uint8_t type = a[8];
		uint32_t len = get32(a + 12);
		if (type != RAFT_COMMAND && type != RAFT_BARRIER && type != RAFT_CHANGE)
			return bad(f, "append entries: unknown entry type");
		if (len % 8 != 0)
			return bad(f, "append entries: entry length not a multiple of 8");
		f->payload += len;
		if (f->payload > NODE_RF_PAYLOAD_MAX)
			return bad(f, "append entries: payload too large");
		if (++f->i < f->n)
			field(f, P_ENTRY, 16);
		else
			skip_to(f, f->hlen, P_END);
		return 0;
	}
	case P_CONF_LEN:
		v = get64(a);
		if (v != f->hlen - 56)
			return bad(
			    f, "install snapshot: configuration length does not match the header");
		f->conf_end = 40 + v;
		return conf_field(f, P_VERSION, 1);
	case P_VERSION:
		if (a[0] != 1)
			return bad(f, "install snapshot: unknown configuration format");
		return conf_field(f, P_SERVERS, 8);
	case P_SERVERS:
		f->servers = get64(a);
		f->server = 0;
		/* Each server takes 10 bytes at least (id, NUL, role). */
		if (f->servers > (f->conf_end - f->hoff) / 10)
			return bad(f,
			           "install snapshot: more servers than the configuration holds");
		if (f->servers == 0) {
			f->part = P_PAD;
			return 0;
		}
		return conf_field(f, P_ID, 8);
	case P_ID:
		if (get64(a) == 0)
			return bad(f, "install snapshot: server id 0");
		f->part = P_ADDR;
		return 0;
	case P_ROLE:
		if (a[0] != RAFT_STANDBY && a[0] != RAFT_VOTER && a[0] != RAFT_SPARE)
			return bad(f, "install snapshot: unknown server role");
		if (++f->server < f->servers)
			return conf_field(f, P_ID, 8);
		f->part = P_PAD;
		return 0;
	case P_DATA_LEN:
		f->payload = get64(a);
		if (f->payload > NODE_RF_PAYLOAD_MAX)
			return bad(f, "install snapshot: payload too large");
		skip_to(f, f->hlen, P_END);
		return 0;
	}
	return bad(f, "internal: unknown part");
}

void node_rf_init(node_rf *f)
{
	memset(f, 0, sizeof(*f));
	field(f, P_FIELD_PRE, 16);
}

int node_rf_feed(node_rf *f, const uint8_t *p, size_t len, const char **why)
{
	size_t off = 0;
	while (off < len && f->state != RF_BAD) {
		size_t left = len - off, k;
		if (f->state == RF_PAY) {
			k = f->payload < left ? (size_t)f->payload : left;
			f->payload -= k;
			off += k;
			if (f->payload == 0)
				next_message(f);
			continue;
		}
		if (f->part == P_SKIP) {
			uint64_t rest = f->until - f->hoff;
			k = rest < left ? (size_t)rest : left;
			f->hoff += k;
			off += k;
			settle(f);
			continue;
		}
		if (f->part == P_ADDR) {
			/* Up to the NUL, inside the configuration. */
			uint8_t c = p[off++];
			if (++f->hoff > f->conf_end - 1 && c != 0) {
				bad(f, "install snapshot: server address not terminated");
				break;
			}
			if (c == 0)
				conf_field(f, P_ROLE, 1);
			continue;
		}
		k = f->acc_need - f->acc_len;
		if (k > left)
			k = left;
		memcpy(f->acc + f->acc_len, p + off, k);
		f->acc_len += (uint32_t)k;
		off += k;
		if (f->state == RF_HDR)
			f->hoff += k;
		if (f->acc_len < f->acc_need)
			continue;
		if (judge(f) == 0)
			settle(f);
	}
	if (f->state == RF_BAD) {
		*why = f->why;
		return -1;
	}
	return 0;
}
