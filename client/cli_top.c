/*
 * cli_top.c -- `shoal top`: a live view of the cluster's load, refreshed
 * like top(1): the busiest partitions (units per second against their
 * limits, throttles per second), the hottest partition keys, and each
 * group's index lag (its change-stream outbox: deltas not yet shipped and
 * the age of the oldest).  Every screen is one ClusterStatus call, drawn by
 * cli_top_render (pure: the unit tests feed it hand-built answers) from
 * cli_load.c's views.
 *
 * The terminal.  On a terminal the view takes the alternate screen and
 * hides the cursor (plain ANSI/xterm escapes, no curses), redraws in place
 * from the top-left corner, each line cut to the width and cleared to its
 * end, and reads keys without waiting for Enter (ICANON and ECHO off; ISIG
 * stays on, so Ctrl-C is SIGINT).  `q` ends it, and so do Ctrl-C, SIGTERM
 * and SIGHUP: their handlers only set a flag, which ends the wait between
 * screens (poll(2) returns EINTR), so every way out goes through the one
 * restore -- the termios saved at start, the cursor shown, the main screen
 * back.  When stdout is not a terminal, or with `--iterations N` (for
 * scripts), screens are printed one after another, a blank line between
 * them, with no escapes; when stdin is not a terminal no key is read.
 *
 *   state     event                                   next
 *   --------  --------------------------------------  --------
 *   SHOW      ClusterStatus answered or failed; draw  WAIT (or DONE: iterations reached)
 *   WAIT      interval passed                         SHOW
 *   WAIT      `q` / signal                            DONE
 *   DONE      restore the terminal, return            -
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client/cli_int.h"

static const cli_opt top_no_opts[] = {{NULL, NULL, NULL, 0}};

const cli_cmd cli_top_cmd = {
    "top",
    "ClusterStatus",
    CLI_PAGING_NONE,
    top_no_opts,
    "live view of the busiest partitions, hot keys and index lag (Shoal's own)",
    false};

/* ------------------------------------------------------------------------ */
/* One screen                                                                */
/* ------------------------------------------------------------------------ */

/* Groups' leader reports, most behind first (oldest unshipped delta, then
 * depth). */
static int cmp_lag(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	long long d = cli_jint(y, "OutboxOldestAgeMs") - cli_jint(x, "OutboxOldestAgeMs");
	if (d == 0)
		d = cli_jint(y, "OutboxDepth") - cli_jint(x, "OutboxDepth");
	if (d == 0)
		d = cli_jint(x, "Group") - cli_jint(y, "Group");
	return d < 0 ? -1 : d > 0;
}

static void render_lag(FILE *out, const json_t *groups, size_t rows)
{
	size_t n = json_array_size(groups), k = 0, i;
	const json_t **v = malloc((n + 1) * sizeof(*v));
	if (v == NULL)
		return;
	json_t *g;
	json_array_foreach(groups, i, g) if (cli_counted_leader(groups, g)) v[k++] = g;
	qsort(v, k, sizeof(*v), cmp_lag);
	fprintf(out, "%5s %4s %10s %10s  %s\n", "GROUP", "NODE", "OUTBOX", "AGE_MS",
	        "INDEXES (last propagation lag, ms)");
	for (i = 0; i < k && (rows == 0 || i < rows); i++) {
		char idx[256] = "";
		size_t used = 0, t, x;
		json_t *tab, *ix;
		json_array_foreach(json_object_get(v[i], "Tables"), t, tab)
		{
			json_array_foreach(json_object_get(tab, "Indexes"), x, ix)
			{
				if (!json_is_true(json_object_get(ix, "LagSeen")) ||
				    used >= sizeof(idx))
					continue;
				int w = snprintf(idx + used, sizeof(idx) - used, "%s%s.%s=%lld",
				                 used ? " " : "", cli_jstr(tab, "TableName"),
				                 cli_jstr(ix, "IndexName"), cli_jint(ix, "LagMs"));
				used += w > 0 ? (size_t)w : 0;
			}
		}
		fprintf(out, "%5lld %4lld %10lld %10lld  %s\n", cli_jint(v[i], "Group"),
		        cli_jint(v[i], "Node"), cli_jint(v[i], "OutboxDepth"),
		        cli_jint(v[i], "OutboxOldestAgeMs"), idx[0] ? idx : "-");
	}
	if (k == 0)
		fputs("(no group reports a leader)\n", out);
	free(v);
}

void cli_top_render(FILE *out, const json_t *status, const cli_top_view *v)
{
	fprintf(out, "shoal top -- %s -- %s, every %.1f s -- q to quit\n",
	        v->endpoint != NULL ? v->endpoint : "", v->clock != NULL ? v->clock : "",
	        v->interval_s);
	/* Rows per section: what the height leaves after the 12 lines of
	 * titles, headers and gaps, shared by the three sections. */
	size_t rows = 20;
	if (v->height > 0)
		rows = v->height > 15 ? (size_t)(v->height - 12) / 3 : 1;
	json_t *groups = json_object_get(status, "Groups");
	json_t *loads = cli_partition_load(status);
	json_t *hot = cli_hot_keys(status);
	size_t i;
	json_t *x;
	long long rthr = 0, wthr = 0, reachable = 0;
	json_array_foreach(loads, i, x)
	{
		rthr += cli_jint(x, "ReadThrottled");
		wthr += cli_jint(x, "WriteThrottled");
	}
	json_array_foreach(json_object_get(status, "Nodes"), i, x) reachable +=
	    json_is_true(json_object_get(x, "Reachable"));
	fprintf(out,
	        "%zu nodes (%lld reachable), %zu partitions reporting load, throttled %lld "
	        "reads/s %lld writes/s\n",
	        json_array_size(json_object_get(status, "Nodes")), reachable,
	        json_array_size(loads), rthr, wthr);
	if (v->error != NULL)
		fprintf(out, "refresh failed: %s\n", v->error);

	fputs("\nBUSIEST PARTITIONS\n", out);
	cli_print_load(out, loads, rows);
	fputs("\nHOTTEST KEYS\n", out);
	cli_print_hot(out, hot, rows);
	fputs("\nINDEX LAG\n", out);
	render_lag(out, groups, rows);
	json_decref(loads);
	json_decref(hot);
}

/* ------------------------------------------------------------------------ */
/* The terminal                                                              */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t top_signal;

static void on_top_signal(int sig)
{
	top_signal = sig;
}

static int64_t top_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Draws text (lines) over the screen: from the top-left corner, each line
 * cut to width and cleared to its end, at most height lines, the rest of
 * the screen cleared. */
static void paint(FILE *out, const char *text, int width, int height)
{
	fputs("\033[H", out);
	int line = 0;
	const char *p = text;
	while (*p != '\0' && (height <= 0 || line < height)) {
		const char *nl = strchr(p, '\n');
		size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
		size_t shown = width > 0 && len > (size_t)width ? (size_t)width : len;
		if (line > 0)
			fputs("\r\n", out);
		fwrite(p, 1, shown, out);
		fputs("\033[K", out);
		line++;
		p += len + (nl != NULL);
	}
	fputs("\033[J", out);
}

/* Waits until the next screen is due: false when it is time to stop (q,
 * a signal). */
static bool wait_next(int in_fd, int64_t until)
{
	for (;;) {
		if (top_signal != 0)
			return false;
		int64_t left = until - top_now_ms();
		if (left <= 0)
			return true;
		struct pollfd pfd = {.fd = in_fd, .events = POLLIN};
		int n = poll(&pfd, in_fd >= 0 ? 1 : 0, (int)left);
		if (n < 0 && errno != EINTR)
			return true; /* cannot wait on the terminal: refresh */
		if (n > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) &&
		    !(pfd.revents & POLLIN))
			return false; /* the terminal went away */
		if (n > 0 && (pfd.revents & POLLIN)) {
			char keys[64];
			ssize_t got = read(in_fd, keys, sizeof(keys));
			if (got == 0)
				return false;
			for (ssize_t i = 0; i < got; i++)
				if (keys[i] == 'q' || keys[i] == 'Q')
					return false;
		}
	}
}

int cli_top_run(const cli_caller *c, FILE *out, FILE *err, int in_fd, const cli_top_opts *o)
{
	int out_fd = fileno(out);
	/* --iterations is for scripts: the screens stay in the output (the
	 * alternate screen would take the last one away on exit). */
	bool screen = out_fd >= 0 && isatty(out_fd) && o->iterations == 0;
	if (in_fd >= 0 && !isatty(in_fd))
		in_fd = -1;
	struct termios saved;
	bool raw = false;
	if (in_fd >= 0 && tcgetattr(in_fd, &saved) == 0) {
		struct termios t = saved;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		raw = tcsetattr(in_fd, TCSANOW, &t) == 0;
	}
	/* Signals end the wait (no SA_RESTART) and the loop, then the restore. */
	struct sigaction sa, old_int, old_term, old_hup;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_top_signal;
	sigemptyset(&sa.sa_mask);
	top_signal = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	if (screen)
		fputs("\033[?1049h\033[?25l\033[2J", out);

	json_t *body = json_object();
	json_t *last = NULL; /* the last answer, kept on the screen when a refresh fails */
	shoal_error e;
	int rc = SHOAL_OK;
	for (long done = 0;;) {
		json_t *resp = NULL;
		memset(&e, 0, sizeof(e));
		rc = cli_call(c, "ClusterStatus", body, &resp, &e);
		if (rc == SHOAL_OK) {
			json_decref(last);
			last = resp;
		}
		char clock[16] = "";
		time_t now = time(NULL);
		struct tm tm;
		if (localtime_r(&now, &tm) != NULL)
			strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
		cli_top_view v = {.endpoint = o->endpoint,
		                  .interval_s = o->interval_s,
		                  .clock = clock,
		                  .error = rc != SHOAL_OK ? e.message : NULL};
		struct winsize ws;
		if (screen && ioctl(out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
			v.width = ws.ws_col;
			v.height = ws.ws_row;
		} else if (screen) {
			v.width = 80;
			v.height = 24;
		}
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		if (mem != NULL) {
			cli_top_render(mem, last, &v);
			fclose(mem);
		}
		if (text != NULL) {
			if (screen)
				paint(out, text, v.width, v.height);
			else
				fprintf(out, "%s%s", done > 0 ? "\n" : "", text);
		}
		free(text);
		fflush(out);
		done++;
		if (o->iterations > 0 && done >= o->iterations)
			break;
		if (!wait_next(in_fd, top_now_ms() + (int64_t)(o->interval_s * 1000)))
			break;
	}

	/* The one way out: the terminal as it was. */
	if (screen)
		fputs("\033[?25h\033[?1049l", out);
	fflush(out);
	if (raw)
		tcsetattr(in_fd, TCSANOW, &saved);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	json_decref(body);
	json_decref(last);
	if (top_signal == SIGINT || top_signal == SIGTERM || top_signal == SIGHUP)
		return 128 + top_signal;
	if (rc != SHOAL_OK) {
		/* As every command reports a failed call. */
		if (e.source == SHOAL_SRC_SERVICE) {
			fprintf(
			    err,
			    "An error occurred (%s) when calling the ClusterStatus operation: %s\n",
			    e.exception, e.message);
			return CLI_EXIT_SERVICE;
		}
		fprintf(err, "%s\n", e.message);
		return CLI_EXIT_OTHER;
	}
	return CLI_EXIT_OK;
}
