/*
 * raftframe.h -- raft 0.15's messages checked before raft reads them
 * (prefix node_rf_).
 *
 * raft 0.15's uv transport trusts what a peer sends (src/uv_recv.c,
 * src/uv_encoding.c, src/configuration.c of v0.15.0): a header shorter than
 * its type's fields is read past its end; an AppendEntries' entry count is
 * believed whatever the header's length (count x 16 bytes of entry headers
 * read past the buffer, count x 24 bytes allocated); an entry whose length
 * is not a multiple of 8 makes the entries after it point past the payload
 * (our state machine would read past it); an InstallSnapshot's
 * configuration is read with an unchecked server count (ids and roles past
 * the header).  Its asserts against a type 0, a server id 0 or an empty
 * configuration check nothing: Debian's libraft is built without them.
 * The peers are authenticated members (the TLS transport checks the node
 * certificate), so this guards against a broken or compromised member, not
 * against anyone on the network -- but "a hostile peer never crashes a node"
 * is the rule, and raft cannot be mended here (Debian's libraft).
 *
 * So the TLS transport (transport_tls.c) passes every byte a peer sends
 * through node_rf_feed before raft's end of the socketpair sees it: the
 * checker follows raft's framing exactly (preamble: u64 type, u64 header
 * length; the header; the payload whose length the header gives) and
 * refuses the first byte that would break one of the rules below, so raft
 * never decodes a header that was not checked whole.  The rules, per type
 * (all integers little-endian, as raft writes them):
 *
 *   AppendEntries (1): header 48 + 16 n bytes with n the count at offset 32
 *     (raft 0.15 sizes it with a "leader id" it does not write: 8 trailing
 *     bytes), n <= NODE_RF_ENTRIES_MAX; each entry header's type RAFT_COMMAND,
 *     RAFT_BARRIER or RAFT_CHANGE and its length a multiple of 8; payload =
 *     the sum of the lengths.
 *   AppendEntriesResult (2), TimeoutNow (6): 24 bytes.  RequestVote (3): 40
 *     (or 32, raft's older form).  RequestVoteResult (4): 24 (or 16).
 *   InstallSnapshot (5): header 56 + c bytes with c the configuration length
 *     at offset 32, 9 <= c <= NODE_RF_CONF_MAX; the configuration: format 1,
 *     a server count, each server a non-zero id, a NUL-terminated address
 *     and a role (standby, voter, spare), all inside c, then fewer than 8
 *     bytes of padding; payload = the data length after it.
 *   Any payload: at most NODE_RF_PAYLOAD_MAX bytes (raft allocates it whole
 *   when the header is in: a legitimate AppendEntries carries at most the
 *   log raft keeps in memory, an InstallSnapshot the whole snapshot).
 *
 * Plain mode (no [tls]) hands raft the TCP socket itself (transport.c): its
 * messages are not checked; plain mode trusts its network (README).
 *
 * Threads: a checker belongs to one connection; no shared state.
 */
#ifndef SHOAL_NODE_RAFTFRAME_H
#define SHOAL_NODE_RAFTFRAME_H

#include <stddef.h>
#include <stdint.h>

#define NODE_RF_ENTRIES_MAX (UINT64_C(1) << 20)
#define NODE_RF_CONF_MAX    (UINT64_C(1) << 20)
#define NODE_RF_PAYLOAD_MAX (UINT64_C(1) << 40)

typedef struct node_rf {
	int state, part; /* where in the stream (raftframe.c) */
	uint8_t acc[16]; /* a field as it arrives */
	uint32_t acc_len, acc_need;
	uint64_t type, hlen, hoff; /* this message's; header bytes taken */
	uint64_t until;            /* a skip's end (header offset) */
	int after;                 /* the part after the skip */
	uint64_t n, i;             /* AppendEntries: entries, the entry being read */
	uint64_t conf_end;         /* InstallSnapshot: header offset where the configuration ends */
	uint64_t servers, server;  /* its servers, the one being read */
	uint64_t payload;          /* payload bytes still to come (or, in a header, so far) */
	uint64_t messages;         /* whole messages passed */
	const char *why;           /* set once refused */
} node_rf;

void node_rf_init(node_rf *f);

/* Checks p[0 .. len), the next bytes a peer sent, as raft will read them:
 * 0 when all of them may go on to raft, -1 when one of them breaks a rule
 * (*why, a static text, says which; nothing of p may go to raft then, and
 * every later call fails the same way). */
int node_rf_feed(node_rf *f, const uint8_t *p, size_t len, const char **why);

#endif
