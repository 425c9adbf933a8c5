/*
 * cli_main.c -- `shoal [options] <command> [parameters]`: the command line
 * read as the AWS CLI reads `aws dynamodb <command>`, then one call (or the
 * pages of a paginated command) through libshoal, then the output.
 *
 * Reading argv (argparse's rules as the AWS CLI uses them):
 *   - global options may come before the command or among its options:
 *     --endpoint URL (also --endpoint-url; else $SHOAL_ENDPOINT, else
 *     tcp://127.0.0.1:8100; "file://<dir>/router.endpoint" reads the URL
 *     list from that file), --output json|text, --no-paginate, --debug,
 *     --cli-read-timeout S, --cli-connect-timeout S;
 *   - "dynamodb" before the command is skipped, so lines pasted from AWS
 *     docs work after replacing "aws" by "shoal";
 *   - --opt value or --opt=value; list options take every word up to the
 *     next --option; --x / --no-x for boolean flags; the last one wins;
 *   - `shoal help`, `shoal <command> help` print help;
 *   - the CLI's own options, which shape the output and never reach the
 *     request: `status --hot`, `top --interval S --iterations N`;
 *   - `shoal admin <subcommand>`: the Admin operation's subcommands
 *     (cli_admin.c), each with options of its own.
 *
 * Retries: libshoal's (client/shoal.h): throttling errors with exponential
 * backoff and full jitter, ServiceUnavailable with a backoff.  As the AWS
 * CLI reads AWS_MAX_ATTEMPTS, $SHOAL_MAX_ATTEMPTS (else $AWS_MAX_ATTEMPTS)
 * sets the attempts of a call, the first included, for both.
 *
 * Exit codes and messages (AWS CLI v2): 0; 252 for the command line
 * ("shoal: error: the following arguments are required: --table-name",
 * "Unknown options: --bogus", "Error parsing parameter ..."); 254 when the
 * service answered an error, printed as "An error occurred (<Exception>) when
 * calling the <Operation> operation: <message>"; 255 when no router could be
 * reached ("Could not connect to the endpoint URL: \"tcp://...\"") or
 * answered in time.
 */
#include <stdlib.h>
#include <string.h>

#include "client/cli_int.h"
#include "client/libshoal_int.h"

#define USAGE_BANNER                                                                               \
	"usage: shoal [options] <command> [parameters]\n"                                          \
	"To see help text, you can run:\n"                                                         \
	"\n"                                                                                       \
	"  shoal help\n"                                                                           \
	"  shoal <command> help\n"                                                                 \
	"\n"

typedef struct run {
	const cli_env *env;
	const cli_cmd *cmd;
	const char *endpoint;
	const char *profile, *region; /* --profile, --region: NULL when not given */
	bool no_sign;                 /* --no-sign-request */
	const char *ca_bundle;        /* --ca-bundle: NULL when not given */
	char ca_found[1024];          /* file://D/router.endpoint: D/tls/ca.pem */
	char creds_found[1024];       /* and D/aws-credentials (libshoal's order) */
	const char *output;           /* NULL: default */
	bool no_paginate, debug, help;
	long long read_timeout, connect_timeout; /* seconds; -1: not given */
	const char *cli_input_json;
	const char *starting_token;
	long long page_size, max_items;
	bool has_page_size, has_max_items, paging_member;
	bool hot;         /* status --hot */
	cli_top_opts top; /* top --interval, --iterations */
	json_t *body;     /* members set by options */
	char unknown[1024];
	cli_fail fail;
} run;

static void add_unknown(run *r, const char *word)
{
	size_t n = strlen(r->unknown);
	snprintf(r->unknown + n, sizeof(r->unknown) - n, "%s%s", n ? ", " : "", word);
}

/* ------------------------------------------------------------------------ */
/* Help                                                                      */
/* ------------------------------------------------------------------------ */

/* The commands in alphabetical order, as the AWS CLI lists them (cli_cmds
 * is in the registry's order); ends with NULL. */
static int cmd_cmp(const void *a, const void *b)
{
	return strcmp((*(const cli_cmd *const *)a)->name, (*(const cli_cmd *const *)b)->name);
}

/* Room for every command: the registry's and the CLI's own (top). */
#define N_CMDS (SHOAL_OP__COUNT + 2)

static const cli_cmd **sorted_cmds(const cli_cmd **out, size_t cap)
{
	size_t n = 0;
	for (const cli_cmd *c = cli_cmds; c->name != NULL && n + 2 < cap; c++)
		out[n++] = c;
	out[n++] = &cli_top_cmd;
	qsort(out, n, sizeof(*out), cmd_cmp);
	out[n] = NULL;
	return out;
}

static void print_help(FILE *out)
{
	fputs("shoal -- the command line of Shoal, a DynamoDB-style database.\n"
	      "It mirrors `aws dynamodb`: the same commands, options, JSON and exit codes.\n\n"
	      "usage: shoal [options] <command> [parameters]\n\n"
	      "Commands:\n",
	      out);
	const cli_cmd *cmds[N_CMDS];
	for (const cli_cmd **c = sorted_cmds(cmds, N_CMDS); *c != NULL; c++)
		if ((*c)->streams) /* `shoal dynamodbstreams <name>` */
			fprintf(out, "  dynamodbstreams %s\n  %-22s %s\n", (*c)->name, "",
			        (*c)->summary);
		else
			fprintf(out, "  %-22s %s\n", (*c)->name, (*c)->summary);
	fputs("\nGlobal options:\n"
	      "  --endpoint URL[,URL...]  routers (also --endpoint-url, $SHOAL_ENDPOINT,\n"
	      "                           file://<cluster dir>/router.endpoint);\n"
	      "                           default " SHOAL_DEFAULT_ENDPOINT "\n"
	      "  --output json|text       output format (default json)\n"
	      "  --no-paginate            one page only (query, scan, list-tables)\n"
	      "  --cli-read-timeout S     give up after S seconds (default 30)\n"
	      "  --cli-connect-timeout S  give up after S seconds without a router (default 2)\n"
	      "  --debug                  log request and response bodies to stderr\n"
	      "  --profile NAME           credentials of this profile of ~/.aws/credentials\n"
	      "  --region REGION          the region requests are signed for\n"
	      "  --no-sign-request        send requests unsigned\n"
	      "  --ca-bundle FILE         CA certificates a tls+tcp:// router must be signed\n"
	      "                           by (else AWS_CA_BUNDLE; for file://D/router.endpoint,\n"
	      "                           D/tls/ca.pem)\n"
	      "\nValues: JSON inline or file://path; structures also in the AWS CLI shorthand\n"
	      "syntax (AttributeName=PK,AttributeType=S).  See `shoal <command> help`.\n"
	      "\nEnvironment:\n"
	      "  SHOAL_ENDPOINT           routers, as --endpoint\n"
	      "  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY\n"
	      "                           the key requests are signed with (else the\n"
	      "                           profile's, as the AWS CLI: AWS_PROFILE,\n"
	      "                           AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE);\n"
	      "                           none: requests go unsigned\n"
	      "  AWS_REGION, AWS_DEFAULT_REGION  the region, as --region\n"
	      "  SHOAL_MAX_ATTEMPTS       attempts of a call, the first included (else\n"
	      "                           AWS_MAX_ATTEMPTS, as the AWS CLI): throttling errors\n"
	      "                           (ProvisionedThroughputExceededException, ...) are\n"
	      "                           retried with exponential backoff and full jitter,\n"
	      "                           ServiceUnavailable with a backoff; default 10 for\n"
	      "                           throttling (botocore's for DynamoDB), 3 otherwise;\n"
	      "                           1 turns retries off\n",
	      out);
}

static const char *kind_name(const cli_shape *s)
{
	switch (s->kind) {
	case CLI_STRING:
		return "string";
	case CLI_INT:
	case CLI_LONG:
		return "integer";
	case CLI_BOOL:
		return "boolean";
	case CLI_BLOB:
		return "blob";
	case CLI_LIST:
		return "list";
	case CLI_MAP:
		return "map";
	case CLI_STRUCT:
		return "structure";
	default:
		return "JSON";
	}
}

static void print_cmd_help(FILE *out, const cli_cmd *c)
{
	if (cli_is_admin_sub(c))
		fprintf(out, "shoal admin %s -- %s (Shoal %s)\n\nOptions:\n", c->name, c->summary,
		        c->operation);
	else
		fprintf(out, "shoal %s%s -- %s (%s %s)\n\n%sOptions:\n",
		        c->streams ? "dynamodbstreams " : "", c->name, c->summary,
		        c->streams ? "DynamoDB Streams" : "DynamoDB", c->operation,
		        strcmp(c->operation, "Admin") == 0
		            ? "Subcommands (`shoal admin <subcommand> help`):\n"
		              "  add-node --node-id N --raft HOST:PORT --rpc URL\n"
		              "  remove-node --node-id N [--no-wait] [--timeout-secs S] "
		              "[--poll-interval-ms M]\n"
		              "  add-group [--group-id G] [--nodes 1,2,3] [--no-wait]\n\nRaw "
		            : "");
	for (const cli_opt *o = c->opts; o->name != NULL; o++) {
		char flag[128];
		if (o->flags & CLI_OPT_BOOL_PAIR)
			snprintf(flag, sizeof(flag), "--%s | --no-%s", o->name, o->name);
		else
			snprintf(flag, sizeof(flag), "--%s <%s>", o->name, kind_name(o->shape));
		fprintf(out, "  %-52s %s%s\n", flag, o->member,
		        (o->flags & CLI_OPT_REQUIRED) ? " (required)" : "");
	}
	if (c->opts != NULL && c->opts[0].name != NULL)
		fprintf(out, "  %-52s %s\n", "--cli-input-json <JSON or file://>",
		        "the request body; options override its members");
	if (c == &cli_top_cmd)
		fputs("  --interval <seconds>                                 refresh every S "
		      "seconds "
		      "(default 1)\n"
		      "  --iterations <integer>                               stop after N screens "
		      "(default: until q or Ctrl-C)\n",
		      out);
	if (strcmp(c->name, "status") == 0)
		fputs(
		    "  --hot                                                the heaviest partition "
		    "keys of the cluster, heaviest first\n",
		    out);
	if (c->paging != CLI_PAGING_NONE)
		fputs(
		    "  --starting-token <string>                            resume from a "
		    "NextToken\n"
		    "  --page-size <integer>                                Limit of each "
		    "underlying call\n"
		    "  --max-items <integer>                                stop after this many, "
		    "print NextToken\n",
		    out);
}

/* ------------------------------------------------------------------------ */
/* argv                                                                      */
/* ------------------------------------------------------------------------ */

enum gopt {
	G_NONE,
	G_ENDPOINT,
	G_OUTPUT,
	G_NO_PAGINATE,
	G_DEBUG,
	G_READ_TIMEOUT,
	G_CONNECT_TIMEOUT,
	G_PROFILE,
	G_REGION,
	G_NO_SIGN,
	G_CA_BUNDLE,
};

static enum gopt global_opt(const char *name, bool *takes_value)
{
	static const struct {
		const char *name;
		enum gopt g;
		bool value;
	} g[] = {
	    {"endpoint", G_ENDPOINT, true},
	    {"endpoint-url", G_ENDPOINT, true},
	    {"output", G_OUTPUT, true},
	    {"no-paginate", G_NO_PAGINATE, false},
	    {"debug", G_DEBUG, false},
	    {"cli-read-timeout", G_READ_TIMEOUT, true},
	    {"cli-connect-timeout", G_CONNECT_TIMEOUT, true},
	    {"profile", G_PROFILE, true},
	    {"region", G_REGION, true},
	    {"no-sign-request", G_NO_SIGN, false},
	    {"ca-bundle", G_CA_BUNDLE, true},
	};
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		if (strcmp(g[i].name, name) == 0) {
			*takes_value = g[i].value;
			return g[i].g;
		}
	}
	*takes_value = false;
	return G_NONE;
}

static int parse_seconds(run *r, const char *opt, const char *v, long long *out)
{
	char *end;
	long long s = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || s < 0)
		return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
		                 "argument --%s: invalid int value: '%s'", opt, v);
	*out = s;
	return 0;
}

static int set_global(run *r, enum gopt g, const char *name, const char *v)
{
	switch (g) {
	case G_ENDPOINT:
		r->endpoint = v;
		return 0;
	case G_PROFILE:
		r->profile = v;
		return 0;
	case G_REGION:
		r->region = v;
		return 0;
	case G_NO_SIGN:
		r->no_sign = true;
		return 0;
	case G_CA_BUNDLE:
		r->ca_bundle = v;
		return 0;
	case G_OUTPUT:
		if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0)
			return cli_failf(
			    &r->fail, CLI_EXIT_USAGE, true,
			    "argument --output: Invalid choice, valid choices are:\n\njson | "
			    "text");
		r->output = v;
		return 0;
	case G_NO_PAGINATE:
		r->no_paginate = true;
		return 0;
	case G_DEBUG:
		r->debug = true;
		return 0;
	case G_READ_TIMEOUT:
		return parse_seconds(r, name, v, &r->read_timeout);
	case G_CONNECT_TIMEOUT:
		return parse_seconds(r, name, v, &r->connect_timeout);
	case G_NONE:
		break;
	}
	return 0;
}

/* The words after argv[*i] that are values of the option (up to the next
 * --option): at most `max`. */
static int take_values(int argc, char **argv, int i, int max)
{
	int n = 0;
	while (i + 1 + n < argc && n < max && strncmp(argv[i + 1 + n], "--", 2) != 0)
		n++;
	return n;
}

static int parse_paging_int(run *r, const char *name, const char *v, long long *out)
{
	char *end;
	long long x = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0')
		return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
		                 "argument --%s: invalid int value: '%s'", name, v);
	*out = x;
	return 0;
}

/* The CLI's own options of a command (they shape the output and never
 * reach the request): true when `name` is one (r->fail set on a bad value). */
static bool local_option(run *r, const char *name, const char *inline_value, int argc, char **argv,
                         int *i)
{
	if (r->cmd == NULL)
		return false;
	bool top = r->cmd == &cli_top_cmd;
	if (strcmp(r->cmd->name, "status") == 0 && strcmp(name, "hot") == 0) {
		if (inline_value != NULL)
			cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			          "argument --hot: ignored explicit argument '%s'", inline_value);
		r->hot = true;
		return true;
	}
	if (!top || (strcmp(name, "interval") != 0 && strcmp(name, "iterations") != 0))
		return false;
	const char *v = inline_value;
	if (v == NULL) {
		if (take_values(argc, argv, *i, 1) == 0) {
			cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			          "argument --%s: expected one argument", name);
			return true;
		}
		v = argv[++*i];
	}
	char *end;
	if (strcmp(name, "interval") == 0) {
		double s = strtod(v, &end);
		if (*v == '\0' || *end != '\0' || !(s >= 0.05 && s <= 3600))
			cli_failf(
			    &r->fail, CLI_EXIT_USAGE, true,
			    "argument --interval: invalid value: '%s' (seconds, 0.05 .. 3600)", v);
		else
			r->top.interval_s = s;
	} else {
		long n = strtol(v, &end, 10);
		if (*v == '\0' || *end != '\0' || n < 0)
			cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			          "argument --iterations: invalid int value: '%s'", v);
		else
			r->top.iterations = n;
	}
	return true;
}

/* One command option (argv[*i] is "--name[=value]"). */
static int command_option(run *r, int argc, char **argv, int *i)
{
	char name[128];
	const char *arg = argv[*i] + 2;
	const char *eq = strchr(arg, '=');
	const char *inline_value = NULL;
	size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
	if (len >= sizeof(name)) {
		add_unknown(r, argv[*i]);
		return 0;
	}
	memcpy(name, arg, len);
	name[len] = '\0';
	if (eq != NULL)
		inline_value = eq + 1;

	/* How many values the option takes, and where they are. */
	bool takes_value;
	enum gopt g = global_opt(name, &takes_value);
	const cli_opt *o = r->cmd != NULL ? cli_find_opt(r->cmd, name) : NULL;
	bool negated = false;
	if (o == NULL && r->cmd != NULL && strncmp(name, "no-", 3) == 0) {
		o = cli_find_opt(r->cmd, name + 3);
		if (o != NULL && !(o->flags & CLI_OPT_BOOL_PAIR))
			o = NULL;
		negated = o != NULL;
	}
	bool paging = r->cmd != NULL && r->cmd->paging != CLI_PAGING_NONE &&
	              (strcmp(name, "starting-token") == 0 || strcmp(name, "page-size") == 0 ||
	               strcmp(name, "max-items") == 0);
	bool input_json = r->cmd != NULL && strcmp(name, "cli-input-json") == 0;
	if (g == G_NONE && o == NULL && local_option(r, name, inline_value, argc, argv, i))
		return r->fail.exit_code != 0 ? -1 : 0;

	if (g == G_NONE && o == NULL && !paging && !input_json) {
		add_unknown(r, argv[*i]);
		/* After the command, the words that follow are reported with it
		 * (argparse's "remaining" arguments). */
		if (r->cmd != NULL && inline_value == NULL) {
			int n = take_values(argc, argv, *i, 1 << 20);
			for (int k = 1; k <= n; k++)
				add_unknown(r, argv[*i + k]);
			*i += n;
		}
		return 0;
	}

	bool flag = (g != G_NONE && !takes_value) || (o != NULL && (o->flags & CLI_OPT_BOOL_PAIR));
	if (flag) {
		if (inline_value != NULL)
			return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			                 "argument --%s: ignored explicit argument '%s'", name,
			                 inline_value);
		if (g != G_NONE)
			return set_global(r, g, name, NULL);
		json_object_set_new(r->body, o->member, json_boolean(!negated));
		return 0;
	}

	bool list = o != NULL && o->shape->kind == CLI_LIST;
	char *one[1];
	char **vals;
	int n;
	if (inline_value != NULL) {
		one[0] = (char *)inline_value;
		vals = one;
		n = 1;
	} else {
		n = take_values(argc, argv, *i, list ? 1 << 20 : 1);
		vals = argv + *i + 1;
		*i += n;
	}
	if (n == 0)
		return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
		                 "argument --%s: expected %s argument", name,
		                 list ? "at least one" : "one");

	if (g != G_NONE)
		return set_global(r, g, name, vals[0]);
	if (input_json) {
		r->cli_input_json = vals[0];
		return 0;
	}
	if (paging) {
		if (strcmp(name, "starting-token") == 0) {
			r->starting_token = vals[0];
			return 0;
		}
		if (strcmp(name, "page-size") == 0) {
			r->has_page_size = true;
			return parse_paging_int(r, name, vals[0], &r->page_size);
		}
		r->has_max_items = true;
		return parse_paging_int(r, name, vals[0], &r->max_items);
	}
	char dashed[140];
	snprintf(dashed, sizeof(dashed), "--%s", name);
	json_t *v;
	if (cli_option_json(dashed, o->member, o->shape, vals, n, &v, &r->fail) < 0)
		return -1;
	json_object_set_new(r->body, o->member, v);
	if (o->flags & CLI_OPT_PAGING)
		r->paging_member = true;
	return 0;
}

static int parse_argv(run *r, int argc, char **argv)
{
	int i = 1;
	/* Global options before the command. */
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			r->help = true;
			continue;
		}
		if (command_option(r, argc, argv, &i) < 0)
			return -1;
	}
	/* `shoal dynamodb <command>` / `shoal dynamodbstreams <command>`, as the
	 * AWS CLI's services; plain `shoal <command>` is dynamodb. */
	bool streams = false;
	if (i < argc && strcmp(argv[i], "dynamodb") == 0)
		i++;
	else if (i < argc && strcmp(argv[i], "dynamodbstreams") == 0)
		streams = true, i++;
	if (i >= argc) {
		if (r->help)
			return 0;
		return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
		                 "the following arguments are required: command");
	}
	if (strcmp(argv[i], "help") == 0 || strcmp(argv[i], "-h") == 0) {
		r->help = true;
		return 0;
	}
	r->cmd = cli_find_cmd(argv[i]);
	if (r->cmd == NULL && strcmp(argv[i], cli_top_cmd.name) == 0)
		r->cmd = &cli_top_cmd;
	if (r->cmd != NULL && r->cmd->streams != streams)
		r->cmd = NULL;
	/* `shoal admin <subcommand>` (cli_admin.c); `shoal admin --x` is the
	 * raw operation. */
	if (r->cmd != NULL && strcmp(r->cmd->operation, "Admin") == 0 && i + 1 < argc &&
	    strncmp(argv[i + 1], "--", 2) != 0 && strcmp(argv[i + 1], "help") != 0) {
		const cli_cmd *sub = cli_admin_find(argv[i + 1]);
		if (sub == NULL) {
			char list[256];
			size_t n = 0;
			for (const cli_cmd *c = cli_admin_cmds; c->name != NULL; c++)
				n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
				                      c == cli_admin_cmds ? "" : " | ", c->name);
			return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			                 "argument subcommand: Invalid choice, valid choices "
			                 "are:\n\n%s",
			                 list);
		}
		r->cmd = sub;
		i++;
	}
	if (r->cmd == NULL) {
		char list[2048];
		size_t n = 0;
		const cli_cmd *cmds[N_CMDS];
		sorted_cmds(cmds, N_CMDS);
		for (const cli_cmd **c = cmds; *c != NULL; c++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
			                      c == cmds ? "" : " | ", (*c)->name);
		return cli_failf(&r->fail, CLI_EXIT_USAGE, true,
		                 "argument command: Invalid choice, valid choices are:\n\n%s",
		                 list);
	}
	for (i++; i < argc; i++) {
		if (strcmp(argv[i], "help") == 0 || strcmp(argv[i], "--help") == 0) {
			r->help = true;
			continue;
		}
		if (strncmp(argv[i], "--", 2) != 0 || argv[i][2] == '\0') {
			add_unknown(r, argv[i]);
			continue;
		}
		if (command_option(r, argc, argv, &i) < 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The request                                                               */
/* ------------------------------------------------------------------------ */

/* --cli-input-json, then the options over it; then the checks argparse and
 * botocore make. */
static int build_body(run *r, json_t **out)
{
	*out = NULL;
	json_t *body;
	if (r->cli_input_json != NULL) {
		char *text;
		if (cli_param_text("--cli-input-json", r->cli_input_json, &text, &r->fail) < 0)
			return -1;
		json_error_t je;
		body = json_loads(text, 0, &je);
		if (body == NULL || !json_is_object(body)) {
			cli_failf(
			    &r->fail, CLI_EXIT_USAGE, false,
			    "Error parsing parameter '--cli-input-json': Invalid JSON: %s\nJSON "
			    "received: %s",
			    body == NULL ? je.text : "a JSON object is expected", text);
			json_decref(body);
			free(text);
			return -1;
		}
		free(text);
		json_object_update(body, r->body);
	} else {
		body = json_incref(r->body);
	}

	/* Required options. */
	char missing[1024] = "";
	size_t n = 0;
	for (const cli_opt *o = r->cmd->opts; o->name != NULL; o++) {
		if (!(o->flags & CLI_OPT_REQUIRED) || json_object_get(body, o->member) != NULL)
			continue;
		if (r->cli_input_json != NULL)
			n += (size_t)snprintf(missing + n, sizeof(missing) - n,
			                      "%sMissing required parameter in input: \"%s\"",
			                      n ? "\n" : "", o->member);
		else
			n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s--%s",
			                      n ? ", " : "", o->name);
	}
	if (n > 0) {
		if (r->cli_input_json != NULL)
			cli_failf(&r->fail, CLI_EXIT_USAGE, false,
			          "Parameter validation failed:\n%s", missing);
		else
			cli_failf(&r->fail, CLI_EXIT_USAGE, true,
			          "the following arguments are required: %s", missing);
		json_decref(body);
		return -1;
	}
	if (cli_validate_body(r->cmd, body, &r->fail) < 0) {
		json_decref(body);
		return -1;
	}
	/* Paging members in the input JSON turn pagination off, as options do. */
	for (const cli_opt *o = r->cmd->opts; o->name != NULL; o++)
		if ((o->flags & CLI_OPT_PAGING) && json_object_get(body, o->member) != NULL)
			r->paging_member = true;
	*out = body;
	return 0;
}

/* The endpoint list: --endpoint, $SHOAL_ENDPOINT or the default; file://
 * reads it from a file (deploy/cluster.sh writes <dir>/router.endpoint). */
static int resolve_endpoint(run *r, char **out)
{
	const char *e = r->endpoint;
	if (e == NULL)
		e = r->env->endpoint_env;
	if (e == NULL || e[0] == '\0')
		e = SHOAL_DEFAULT_ENDPOINT;
	char *text;
	if (cli_param_text("--endpoint", e, &text, &r->fail) < 0)
		return -1;
	/* Whitespace and newlines around and between URLs: commas. */
	size_t w = 0;
	bool sep = false;
	for (size_t i = 0; text[i] != '\0'; i++) {
		char c = text[i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
			sep = w > 0;
			continue;
		}
		if (sep) {
			text[w++] = ',';
			sep = false;
		}
		text[w++] = c;
	}
	text[w] = '\0';
	if (w == 0) {
		free(text);
		return cli_failf(&r->fail, CLI_EXIT_OTHER, false,
		                 "Invalid endpoint: \"%s\" is empty", e);
	}
	*out = text;
	return 0;
}

/* libshoal's options for the command line: the defaults, with the
 * attempts of $SHOAL_MAX_ATTEMPTS (else $AWS_MAX_ATTEMPTS) for both kinds of
 * retries (throttling, ServiceUnavailable). */
static int client_options(run *r, shoal_options *o)
{
	shoal_options_init(o);
	o->profile = r->profile; /* credentials: libshoal finds them as the AWS CLI does */
	o->region = r->region;
	o->no_sign = r->no_sign;
	o->ca_bundle = r->ca_bundle;
	/* Endpoints from a cluster's file: that cluster's CA and key (libshoal
	 * does the same for its own file:// endpoints). */
	const char *e = r->endpoint != NULL ? r->endpoint : r->env->endpoint_env;
	if (o->ca_bundle == NULL && e != NULL && strncmp(e, "file://", 7) == 0 &&
	    lib_endpoint_ca(e + 7, r->ca_found, sizeof(r->ca_found)))
		o->ca_bundle = r->ca_found;
	if (e != NULL && strncmp(e, "file://", 7) == 0)
		lib_endpoint_creds(e + 7, r->creds_found, sizeof(r->creds_found));
	const char *name = "SHOAL_MAX_ATTEMPTS", *v = r->env->max_attempts_env;
	if (v == NULL) {
		name = "AWS_MAX_ATTEMPTS";
		v = r->env->aws_max_attempts_env;
	}
	if (v == NULL || v[0] == '\0')
		return 0;
	char *end;
	long n = strtol(v, &end, 10);
	if (*end != '\0' || n < 1 || n > 100)
		return cli_failf(
		    &r->fail, CLI_EXIT_USAGE, false,
		    "Invalid value for %s: '%s' (an integer 1 .. 100: the attempts of a "
		    "call, the first included)",
		    name, v);
	o->retries = (int)n - 1;
	o->throttle_retries = (int)n - 1;
	return 0;
}

static int client_call(void *ctx, const char *operation, const char *body, char **response,
                       shoal_error *err)
{
	return shoal_call_json(ctx, operation, body, response, err);
}

/* Prints the failure of a call; returns the exit code. */
static int report_call_error(run *r, int rc, const shoal_error *err)
{
	FILE *e = r->env->err;
	switch (err->source) {
	case SHOAL_SRC_CONNECT:
	case SHOAL_SRC_TIMEOUT:
	case SHOAL_SRC_LOCAL:
		fprintf(e, "%s\n", err->message);
		return CLI_EXIT_OTHER;
	default:
		fprintf(e, "An error occurred (%s) when calling the %s operation: %s\n",
		        err->exception[0] ? err->exception : shoal_exception_name(rc),
		        r->cmd->operation, err->message);
		return CLI_EXIT_SERVICE;
	}
}

static int report_fail(run *r)
{
	FILE *e = r->env->err;
	if (r->fail.usage)
		fprintf(e, USAGE_BANNER "shoal: error: %s\n", r->fail.text);
	else
		fprintf(e, "%s\n", r->fail.text);
	return r->fail.exit_code;
}

static int execute(run *r)
{
	json_t *body;
	if (build_body(r, &body) < 0)
		return report_fail(r);

	bool paginate = r->cmd->paging != CLI_PAGING_NONE && !r->no_paginate && !r->paging_member;
	if (r->cmd->paging != CLI_PAGING_NONE && !paginate) {
		char used[128] = "";
		size_t n = 0;
		if (r->starting_token != NULL)
			n += (size_t)snprintf(used + n, sizeof(used) - n, "--starting-token");
		if (r->has_page_size && r->page_size != 0)
			n += (size_t)snprintf(used + n, sizeof(used) - n, "%s--page-size",
			                      n ? ", " : "");
		if (r->has_max_items && r->max_items != 0)
			n += (size_t)snprintf(used + n, sizeof(used) - n, "%s--max-items",
			                      n ? ", " : "");
		if (n > 0) {
			json_decref(body);
			cli_failf(
			    &r->fail, CLI_EXIT_USAGE, false,
			    "Cannot specify --no-paginate along with pagination arguments: %s",
			    used);
			return report_fail(r);
		}
	}

	cli_caller caller = {
	    .call = r->env->call, .ctx = r->env->call_ctx, .debug = r->debug ? r->env->err : NULL};
	shoal_client *client = NULL;
	int code = CLI_EXIT_OK;
	if (caller.call == NULL) {
		char *endpoints = NULL;
		if (resolve_endpoint(r, &endpoints) < 0) {
			json_decref(body);
			return report_fail(r);
		}
		shoal_options o;
		if (client_options(r, &o) < 0) {
			free(endpoints);
			json_decref(body);
			return report_fail(r);
		}
		if (r->read_timeout > 0)
			o.deadline_ms =
			    (int)(r->read_timeout > 86400 ? 86400000 : r->read_timeout * 1000);
		else if (r->read_timeout == 0)
			o.deadline_ms = 86400000; /* AWS: 0 means no timeout */
		if (r->connect_timeout > 0)
			o.connect_timeout_ms =
			    (int)(r->connect_timeout > 86400 ? 86400000
			                                     : r->connect_timeout * 1000);
		else if (r->connect_timeout == 0)
			o.connect_timeout_ms = o.deadline_ms;
		/* top: a screen waits for its answer at most 5 s (then shows the
		 * failure and asks again at the next one). */
		if (r->cmd == &cli_top_cmd && r->read_timeout < 0)
			o.deadline_ms = 5000;
		char msg[SH_ERRMSG_SIZE];
		int rc = lib_client_new(endpoints, &o, r->creds_found, &client, msg);
		free(endpoints);
		if (rc != SHOAL_OK) {
			fprintf(r->env->err, "%s\n", msg);
			json_decref(body);
			return CLI_EXIT_OTHER;
		}
		caller.call = client_call;
		caller.ctx = client;
	}

	json_t *resp = NULL;
	shoal_error err;
	memset(&err, 0, sizeof(err));
	int rc;
	if (r->cmd == &cli_top_cmd) {
		char *shown = NULL;
		if (r->env->call == NULL && resolve_endpoint(r, &shown) < 0)
			shown = NULL;
		r->top.endpoint = shown != NULL ? shown : "";
		code = cli_top_run(&caller, r->env->out, r->env->err, r->env->in_fd, &r->top);
		free(shown);
		goto out;
	}
	if (cli_is_admin_sub(r->cmd)) {
		r->fail.exit_code = 0;
		rc = cli_admin_run(&caller, r->cmd, body, r->env->err, &resp, &err, &r->fail);
		if (rc < 0) {
			code = report_fail(r);
			goto out;
		}
	} else if (paginate) {
		cli_paging_opts po = {.max_items = r->max_items,
		                      .page_size = r->page_size,
		                      .starting_token = r->starting_token};
		r->fail.exit_code = 0;
		rc = cli_paginate(&caller, r->cmd, body, &po, &resp, &err, &r->fail);
		if (rc < 0) {
			code = report_fail(r);
			goto out;
		}
	} else {
		rc = cli_call(&caller, r->cmd->operation, body, &resp, &err);
	}
	if (rc != SHOAL_OK) {
		code = report_call_error(r, rc, &err);
		goto out;
	}
	bool status = strcmp(r->cmd->name, "status") == 0;
	if (status && r->hot) {
		/* status --hot: the hot keys alone, gathered across the cluster. */
		json_t *hot = json_pack("{s:o}", "HotKeys", cli_hot_keys(resp));
		json_decref(resp);
		resp = hot;
		if (r->output == NULL) {
			cli_print_hot(r->env->out, json_object_get(resp, "HotKeys"), 0);
			fflush(r->env->out);
			goto out;
		}
	}
	if (r->output != NULL && strcmp(r->output, "text") == 0 && paginate) {
		/* As the AWS CLI: the result members, then NEXTTOKEN on its own. */
		json_t *tok = json_incref(json_object_get(resp, "NextToken"));
		json_object_del(resp, "NextToken");
		if (json_is_null(json_object_get(resp, "ConsumedCapacity")))
			json_object_del(resp, "ConsumedCapacity");
		cli_print_text(r->env->out, resp);
		if (tok != NULL)
			fprintf(r->env->out, "NEXTTOKEN\t%s\n", json_string_value(tok));
		json_decref(tok);
	} else if (r->output != NULL && strcmp(r->output, "text") == 0)
		cli_print_text(r->env->out, resp);
	else if (status && r->output == NULL)
		cli_print_status(r->env->out, resp);
	else
		cli_print_json(r->env->out, resp);
	fflush(r->env->out);
out:
	json_decref(resp);
	json_decref(body);
	shoal_client_free(client);
	return code;
}

int cli_main(const cli_env *env, int argc, char **argv)
{
	run r;
	memset(&r, 0, sizeof(r));
	r.env = env;
	r.read_timeout = r.connect_timeout = -1;
	r.top.interval_s = 1.0;
	r.body = json_object();
	int code;
	if (parse_argv(&r, argc, argv) < 0) {
		code = report_fail(&r);
		goto out;
	}
	if (r.help) {
		if (r.cmd != NULL)
			print_cmd_help(env->out, r.cmd);
		else
			print_help(env->out);
		code = CLI_EXIT_OK;
		goto out;
	}
	if (r.unknown[0] != '\0') {
		cli_failf(&r.fail, CLI_EXIT_USAGE, true, "Unknown options: %s", r.unknown);
		code = report_fail(&r);
		goto out;
	}
	code = execute(&r);
out:
	json_decref(r.body);
	return code;
}
