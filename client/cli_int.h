/*
 * cli_int.h -- the `shoal` command line, private to client/cli*.c (prefix
 * cli_).  `shoal` mirrors `aws dynamodb`: the same subcommands and options,
 * request bodies built from them, DynamoDB's JSON on stdout, AWS CLI exit
 * codes and messages.  It talks to the routers only through libshoal's
 * shoal_call_json.
 *
 *   cli.c            main(): cli_main with the real stdout/stderr/environment
 *   cli_main.c       argv -> command, global options, dispatch, errors, exit codes
 *   cli_cmds.c       the command table: each subcommand's options, their
 *                    DynamoDB member names and value shapes
 *   cli_args.c       option values -> JSON: file:// values, JSON or shorthand,
 *                    conversion and validation against the shapes
 *   cli_shorthand.c  the AWS CLI shorthand syntax (Key=Value,Key2=[a,b],...)
 *   cli_page.c       AWS CLI pagination (query, scan, list-tables) and its tokens
 *   cli_out.c        output: JSON as the AWS CLI prints it, text, `shoal status`
 *   cli_load.c       capacity in a ClusterStatus: partition load, hot keys
 *                    (status, status --hot, top)
 *   cli_top.c        `shoal top`: the live terminal view
 *   cli_admin.c      `shoal admin add-node | remove-node`: the cluster's shape
 *
 * Everything here runs on the one thread of the CLI process.  JSON values
 * are jansson references: functions that return one in *out hand the caller
 * a new reference (json_decref it); inputs are borrowed.
 */
#ifndef SHOAL_CLIENT_CLI_INT_H
#define SHOAL_CLIENT_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "client/shoal.h"
#include "proto/ops.h"

/* Exit codes of the AWS CLI (v2). */
#define CLI_EXIT_OK      0
#define CLI_EXIT_USAGE   252 /* bad command line or parameter value */
#define CLI_EXIT_SERVICE 254 /* the service answered with an error */
#define CLI_EXIT_OTHER   255 /* could not connect, timed out, anything else */

/* ------------------------------------------------------------------------ */
/* Value shapes (cli_cmds.c): the part of DynamoDB's model the CLI needs     */
/* ------------------------------------------------------------------------ */

typedef enum cli_kind {
	CLI_STRING,
	CLI_INT,  /* integer (Limit, Segment, ...) */
	CLI_LONG, /* long (capacity units) */
	CLI_BOOL,
	CLI_BLOB,   /* base64 text in JSON */
	CLI_LIST,   /* of elem */
	CLI_MAP,    /* string -> elem */
	CLI_STRUCT, /* members */
	CLI_ANY,    /* any JSON, not checked (JSON input only) */
} cli_kind;

typedef struct cli_shape cli_shape;
typedef struct cli_member {
	const char *name; /* DynamoDB's member name: "AttributeName" */
	const cli_shape *shape;
} cli_member;

struct cli_shape {
	cli_kind kind;
	const cli_shape *elem;     /* CLI_LIST element, CLI_MAP value */
	const cli_member *members; /* CLI_STRUCT, ended by {NULL, NULL} */
};

/* ------------------------------------------------------------------------ */
/* Commands (cli_cmds.c)                                                     */
/* ------------------------------------------------------------------------ */

enum {
	CLI_OPT_REQUIRED = 1 << 0,  /* --x must be given (or be in --cli-input-json) */
	CLI_OPT_BOOL_PAIR = 1 << 1, /* a flag: --x sets true, --no-x false */
	CLI_OPT_PAGING = 1 << 2,    /* Limit / Exclusive* token: giving it turns pagination off */
};

typedef struct cli_opt {
	const char *name;       /* without dashes: "table-name" */
	const char *member;     /* "TableName" */
	const cli_shape *shape; /* value shape (CLI_BOOL for flags) */
	unsigned flags;
} cli_opt;

enum cli_paging {
	CLI_PAGING_NONE = 0,
	CLI_PAGING_ITEMS,  /* Query, Scan: Items, Count, ScannedCount by ExclusiveStartKey */
	CLI_PAGING_TABLES, /* ListTables: TableNames by ExclusiveStartTableName */
};

typedef struct cli_cmd {
	const char *name;      /* "put-item" */
	const char *operation; /* "PutItem" */
	enum cli_paging paging;
	const cli_opt *opts; /* ended by {NULL} */
	const char *summary; /* one line for `shoal help` */
	bool streams;        /* `shoal dynamodbstreams <name>` (SHOAL_OPF_STREAMS) */
} cli_cmd;

/* Every command, ended by {NULL}; "status" is among them (ClusterStatus). */
extern const cli_cmd cli_cmds[];
const cli_cmd *cli_find_cmd(const char *name);
const cli_opt *cli_find_opt(const cli_cmd *cmd, const char *name);

/* ------------------------------------------------------------------------ */
/* Errors of the command line                                                */
/* ------------------------------------------------------------------------ */

/* What went wrong with the command line; the text is printed to stderr as
 * is (it already carries "Error parsing parameter ..." and the like). */
typedef struct cli_fail {
	int exit_code; /* CLI_EXIT_USAGE, ... */
	bool usage;    /* print the usage banner first ("usage: shoal ...") */
	char text[2048];
} cli_fail;

int cli_failf(cli_fail *f, int exit_code, bool usage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ------------------------------------------------------------------------ */
/* Option values -> JSON (cli_args.c, cli_shorthand.c)                       */
/* ------------------------------------------------------------------------ */

/*
 * Reads a parameter value the AWS CLI way: "file://path" is the file's text,
 * "fileb://path" its bytes (a leading ~ in the path is $HOME), anything else
 * the value itself.  *out is a new malloc'd NUL-terminated string (free()).
 * Errors: CLI_EXIT_USAGE "Error parsing parameter '--x': Unable to load
 * paramfile file://p: [Errno 2] No such file or directory: 'p'".
 */
int cli_param_text(const char *opt, const char *value, char **out, cli_fail *f);

/*
 * The JSON of one option's values (argv words after the option; n >= 1 for
 * value options) for `shape`: JSON text when it starts with '{' or '['
 * (lists), the shorthand syntax otherwise, plain conversion for scalars;
 * member (the DynamoDB name) names the value in validation messages.
 * Errors are CLI_EXIT_USAGE with the AWS CLI's messages.
 */
int cli_option_json(const char *opt, const char *member, const cli_shape *shape,
                    char *const *values, int n, json_t **out, cli_fail *f);

/*
 * Parses shorthand text (AWS CLI grammar: key=value pairs, [lists],
 * {hashes}, quoting, backslash escapes) into raw JSON: objects, arrays and
 * strings only.  Errors: CLI_EXIT_USAGE "Error parsing parameter '--x':
 * Expected: '=', received: 'EOF' for input:\n<text>\n   ^".
 */
int cli_shorthand_parse(const char *opt, const char *text, json_t **out, cli_fail *f);

/*
 * Converts raw shorthand JSON to `shape` (strings to integers and booleans,
 * a scalar where a list is expected to a one-element list) and checks the
 * member names; path names the value in messages ("KeySchema[0]").
 */
int cli_shorthand_convert(const json_t *raw, const cli_shape *shape, const char *path, json_t **out,
                          cli_fail *f);

/*
 * botocore's parameter validation of a request body against the command's
 * input shape: unknown members ("Unknown parameter in KeySchema[0]: \"Foo\",
 * must be one of: AttributeName, KeyType") and JSON types ("Invalid type for
 * parameter Limit, value: x, type: <class 'str'>, valid types: <class
 * 'int'>").  All errors are collected into one "Parameter validation failed:"
 * message.  CLI_EXIT_USAGE.
 */
int cli_validate_body(const cli_cmd *cmd, const json_t *body, cli_fail *f);

/* ------------------------------------------------------------------------ */
/* Calls and pagination (cli_page.c)                                         */
/* ------------------------------------------------------------------------ */

/* How the CLI reaches the service: shoal_call_json on a client, or a fake in
 * tests.  Same contract as shoal_call_json. */
typedef int (*cli_call_fn)(void *ctx, const char *operation, const char *body, char **response,
                           shoal_error *err);

typedef struct cli_caller {
	cli_call_fn call;
	void *ctx;
	FILE *debug; /* --debug: requests and responses are logged here (else NULL) */
} cli_caller;

/* One call with a JSON body; *out the parsed response.  Service errors come
 * back as the code with err filled. */
int cli_call(const cli_caller *c, const char *operation, const json_t *body, json_t **out,
             shoal_error *err);

typedef struct cli_paging_opts {
	long long max_items;        /* --max-items (0: none) */
	long long page_size;        /* --page-size (0: none) */
	const char *starting_token; /* --starting-token (NULL: none) */
} cli_paging_opts;

/*
 * Runs a paginated command the way the AWS CLI does (botocore's
 * PageIterator + build_full_result): every page, results merged (lists
 * concatenated, counts added), non-aggregate keys (ConsumedCapacity) from the
 * first page (null when absent), and with --max-items a "NextToken" where it
 * stopped.  body is the request of the first page (not modified).  On
 * failure *out is NULL and either err (service, code returned) or f
 * (CLI_EXIT_USAGE for a bad token: return -1) is filled.
 */
int cli_paginate(const cli_caller *c, const cli_cmd *cmd, const json_t *body,
                 const cli_paging_opts *po, json_t **out, shoal_error *err, cli_fail *f);

/* The token format: base64 of {"<input token>": value or null,
 * "boto_truncate_amount": n} (n omitted when 0).  decode returns -1 for a
 * token that is not one of ours. */
char *cli_token_encode(const char *input_token, const json_t *value, long long truncate);
int cli_token_decode(const char *token, const char *input_token, json_t **value,
                     long long *truncate);

/* ------------------------------------------------------------------------ */
/* Output (cli_out.c)                                                        */
/* ------------------------------------------------------------------------ */

/* As the AWS CLI prints a response: nothing for {}, else JSON indented by
 * four spaces with a final newline; members named *DateTime holding epoch
 * seconds become ISO 8601 local times ("2024-05-01T10:00:00.123000+00:00"). */
void cli_print_json(FILE *out, const json_t *resp);
/* The AWS CLI's text output (tab-separated, UPPERCASE row identifiers). */
void cli_print_text(FILE *out, const json_t *resp);
/* Members of a response's JSON object, 0 / "" when absent or of another
 * type (responses omit members at zero). */
double cli_jnum(const json_t *obj, const char *key);
long long cli_jint(const json_t *obj, const char *key);
const char *cli_jstr(const json_t *obj, const char *key);

/* `shoal status` as readable tables (ClusterStatus response JSON). */
void cli_print_status(FILE *out, const json_t *resp);
/* A replica's place in the cluster map (MapGroups of a ClusterStatus):
 * "voter", "non-voter", "non-voter->3" (it replaces node 3's), or "-" when
 * the map does not have it. */
void cli_replica_role(const json_t *map_groups, long long group, long long node, char *buf,
                      size_t cap);
/* ISO 8601 of epoch seconds in local time, Python's isoformat(). */
void cli_iso_time(double secs, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Capacity (cli_load.c)                                                     */
/* ------------------------------------------------------------------------ */

/* From a ClusterStatus response (its JSON): every partition's load (the
 * PartitionLoad members of the group leaders' Load, each with the report's
 * Group and Node added), busiest first (the larger share of its read or
 * write limit, then throttles, then units); and every hot key (HotKeys),
 * heaviest first (read + write units per second, then throttles).  New
 * arrays (json_decref them). */
json_t *cli_partition_load(const json_t *status);

/* Whether GroupStatus g (an element of the answer's Groups) is the one
 * leader report of its group: Role "leader", and of two such reports (one
 * straddling an election) the higher term's.  Only those carry Load and
 * HotKeys, and top's index lag reads them. */
bool cli_counted_leader(const json_t *groups, const json_t *g);
json_t *cli_hot_keys(const json_t *status);
/* The keys group 0's executor found carrying most of a partition's load or
 * size (UnsplitKeys: not split for them), by table and group. */
json_t *cli_unsplit_keys(const json_t *status);

/* Human tables of those arrays, at most max_rows rows (0: all). */
void cli_print_load(FILE *out, const json_t *loads, size_t max_rows);
void cli_print_hot(FILE *out, const json_t *hot, size_t max_rows);
void cli_print_unsplit(FILE *out, const json_t *keys);

/* ------------------------------------------------------------------------ */
/* shoal top (cli_top.c)                                                     */
/* ------------------------------------------------------------------------ */

/* `top` is the CLI's own command (no DynamoDB operation of its own: it
 * calls ClusterStatus every interval). */
extern const cli_cmd cli_top_cmd;

typedef struct cli_top_opts {
	double interval_s; /* --interval (default 1) */
	long iterations;   /* --iterations N: stop after N screens, printed one after
	                    * another (0: a live screen until q) */
	const char *endpoint;
} cli_top_opts;

/* What one screen shows and how large it may be. */
typedef struct cli_top_view {
	int width, height; /* the terminal's (0: unbounded, as when not a terminal) */
	const char *endpoint;
	double interval_s;
	const char *clock; /* "17:20:01" */
	const char *error; /* the last refresh's failure, or NULL */
} cli_top_view;

/* One screen of `shoal top` for a ClusterStatus response (may be NULL
 * before the first answer), as plain lines (no escapes). */
void cli_top_render(FILE *out, const json_t *status, const cli_top_view *v);

/* Runs the view: refreshes every interval on `out` until q (read from
 * in_fd when it is a terminal), Ctrl-C, SIGTERM or the iterations are done;
 * the terminal is restored on every way out.  Returns the exit code. */
int cli_top_run(const cli_caller *c, FILE *out, FILE *err, int in_fd, const cli_top_opts *o);

/* ------------------------------------------------------------------------ */
/* shoal admin <subcommand> (cli_admin.c)                                    */
/* ------------------------------------------------------------------------ */

/* The subcommands of `shoal admin` (operation "Admin"), ended by {NULL}:
 *   add-node --node-id N --raft HOST:PORT --rpc URL
 *   remove-node --node-id N [--no-wait] [--timeout-secs S] [--poll-interval-ms M]
 *   move-partition --table-name T --hash H --to-group G [--no-wait] [...]
 *   split-partition --table-name T --at H [--to-group G] [--no-wait] [...]
 * Their options fill a body of their own members (NodeId, Raft, Rpc,
 * TableName, Hash, At, ToGroup, Wait, TimeoutSecs, PollIntervalMs), which
 * cli_admin_run turns into the AdminRequest. */
extern const cli_cmd cli_admin_cmds[];
const cli_cmd *cli_admin_find(const char *name);
bool cli_is_admin_sub(const cli_cmd *cmd);

/* Runs an admin subcommand with its options' body `opts`.  remove-node
 * sends DrainNode and then, unless Wait is false, asks ClusterStatus every
 * PollIntervalMs (default 1000) until the node holds no replica and has
 * left the map, writing progress lines to `progress`, for at most
 * TimeoutSecs (default 600).  move-partition / split-partition send
 * MovePartition / SplitPartition and then, unless Wait is false, wait the
 * same way until the MapPartitions row holding the hash (split: starting at
 * At) is in ToGroup (split without one: exists) with MovingTo 0; a move
 * seen and then gone with the partition elsewhere is "abandoned".
 * *out: the AdminResponse ({"MapEpoch": N}).  Returns SHOAL_OK, a service
 * error (err filled), or -1 with f filled (timed out, abandoned:
 * CLI_EXIT_OTHER). */
int cli_admin_run(const cli_caller *c, const cli_cmd *cmd, const json_t *opts, FILE *progress,
                  json_t **out, shoal_error *err, cli_fail *f);

/* From a ClusterStatus response: how many replicas node holds in MapGroups
 * (their groups into groups[0 .. cap-1]), and whether Nodes lists it. */
int cli_node_replicas(const json_t *status, long long node, long long *groups, int cap,
                      bool *listed);

/* A placement hash from an option's text: decimal or 0x hex, 0 ..
 * 2^64-1 (else CLI_EXIT_USAGE naming --opt; returns -1). */
int cli_parse_hash(const char *opt, const char *text, uint64_t *out, cli_fail *f);
/* From a ClusterStatus response: the MapPartitions row of `table` whose
 * [Lo, Hi] holds hash, or NULL (borrowed from status). */
const json_t *cli_map_partition(const json_t *status, const char *table, uint64_t hash);

/* ------------------------------------------------------------------------ */
/* The program (cli_main.c)                                                  */
/* ------------------------------------------------------------------------ */

typedef struct cli_env {
	FILE *out, *err;
	const char *endpoint_env; /* $SHOAL_ENDPOINT, or NULL */
	/* $SHOAL_MAX_ATTEMPTS and $AWS_MAX_ATTEMPTS, or NULL. */
	const char *max_attempts_env, *aws_max_attempts_env;
	int in_fd; /* the keyboard of `shoal top` (stdin; -1: none) */
	/* Tests: a fake service instead of a shoal_client (NULL: the real one). */
	cli_call_fn call;
	void *call_ctx;
} cli_env;

/* Runs `shoal argv[1..]`; returns the exit code. */
int cli_main(const cli_env *env, int argc, char **argv);

#endif
