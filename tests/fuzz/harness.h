/*
 * harness.h -- what the libFuzzer targets in tests/fuzz/ share (harness.c).
 *
 * Each target feeds its bytes to the real decoder a server uses (see the
 * target's header comment for which), then hands whatever decoded to the
 * checks below, which continue the way the servers continue: the router's
 * API-level conversions (wire_*_from_pb, as router/items.c, batch.c,
 * tables.c and txn.c call them), the node's preparation of a write
 * (node/server.c), and the storage engine's expression parser run over the
 * request's expressions, with conditions, updates and projections applied to
 * the request's own item.  A decoder may refuse anything; what the targets
 * assert is that it never crashes, leaks, reads or writes out of bounds, hits
 * undefined behaviour (ASan, UBSan, LeakSanitizer), and that every refusal is
 * one of the codes its contract names, with a message.  And a few
 * properties: every item the API accepts (a PutItem's, an update's result)
 * goes through the storage codec and back unchanged and is already
 * normalised; a CreateTable that converts makes a TableDefine that converts
 * back; the targets add their own (fuzz_json, fuzz_http_head).
 *
 * Memory: everything lives in one arena per input, reset by fz_reset.
 */
#ifndef SHOAL_TESTS_FUZZ_HARNESS_H
#define SHOAL_TESTS_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"
#include "router/http.h"
#include "storage/expr.h"

/* libFuzzer's entry points (the targets define them). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with a message (libFuzzer records the input as a crash) unless c. */
#define FZ_ASSERT(c, ...)                                                                          \
	do {                                                                                       \
		if (!(c))                                                                          \
			fz_fail(__FILE__, __LINE__, #c, __VA_ARGS__);                              \
	} while (0)
__attribute__((noreturn, format(printf, 4, 5))) void
fz_fail(const char *file, int line, const char *cond, const char *fmt, ...);

/* The arena of the current input, reset (memory kept) by fz_reset. */
sh_arena *fz_arena(void);
void fz_reset(void);

/* rc is SHOAL_OK, or a refusal a decoder may give (ValidationException,
 * SerializationException, UnknownOperationException, LimitExceededException
 * for UpdateTable) with a message in
 * errmsg; anything else (InternalServerError, out of memory for a small
 * input, ...) aborts.  what names the call.  With FUZZ_VERBOSE set in the
 * environment every outcome is printed (to see how far a seed gets). */
void fz_expect(int rc, const char *errmsg, const char *what);
/* printf to stderr with FUZZ_VERBOSE set, else nothing. */
__attribute__((format(printf, 1, 2))) void fz_log(const char *fmt, ...);

/*
 * A decoded client Request as the router serves it: the operation's
 * API-level conversion (wire_*_from_pb, wire_txn_*; for batches each member
 * wrapped as its single-item operation, as router/batch.c does), then every
 * expression of it parsed and used (fz_exprs).  Returns the first refusal's
 * code; every code is checked with fz_expect.
 */
int fz_request(const Shoal__Request *r);

/*
 * A decoded NodeRequest as node/server.c takes it: exactly one operation,
 * then the conversion its preparation makes (a data-plane Request as
 * fz_request, define_table and update_table through their converters, the
 * stored TableDefine as the FSM reads it, index_ship's deltas through
 * node_index_deltas_from_pb).
 */
int fz_node_request(const Shoal__NodeRequest *nr);

/*
 * One expression of the given kind parsed against attrs (names and values,
 * normalised) as the storage engine parses a request's, then used: a
 * condition or filter evaluated on item and on no item, an update applied to
 * item (and to no item, from key), a projection applied to item, a key
 * condition matched against the key schema pk (S) / sk (N).
 */
int fz_expr_one(const st_expr_attrs *attrs, st_expr_kind kind, const char *text,
                const st_value *item, const st_value *key);

/*
 * The credentials the auth checks are fuzzed against (as a router's
 * --http-credentials file would give them): AKIDEXAMPLE with secret
 * FZ_SECRET, granted reads of Music, writes of Accounts and Ledger*, DDL on
 * Fans, and admin; AKIDALL with every right.  The seeds are signed by
 * AKIDEXAMPLE at FZ_NOW_S (native) and FZ_NOW_HTTP (the HTTP seeds'
 * X-Amz-Date), the wall-clock times the targets verify at.
 */
#define FZ_SECRET   "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define FZ_NOW_S    1795000000 /* 2026-11-18T11:06:40Z */
#define FZ_NOW_HTTP 1795647600 /* 2026-11-25T23:00:00Z */
const rt_creds *fz_creds(void);
/* A router with those credentials, for rt_auth_authorize (nothing else in
 * it is set). */
const rt_router *fz_router(void);

#endif
