/*
 * it_top -- the client side of hot partitions on a real 3-node cluster:
 * `shoal top` used as a person uses it, in a real terminal (tmux), `shoal
 * status --hot` naming the hot key, and libshoal's retries of throttled
 * requests.
 *
 * The terminal is a detached tmux session on a private server (-L, so a
 * user's own tmux is never touched), 120 x 40.  The pane runs a shell line
 * that saves the terminal's settings (stty -g), runs `shoal top`, writes its
 * exit code and the settings again, then waits on `cat` so the pane stays
 * for inspection.  The test polls the screen (tmux capture-pane) with a
 * deadline while it keeps one partition key hot, presses q (or Ctrl-C), and
 * checks that top ended, that the settings are the ones it found, that the
 * main screen is back (tmux's alternate_on) and the cursor shown
 * (cursor_flag).  tmux is a dependency (deploy/install-deps.sh): without it
 * the test fails, it does not skip.
 *
 * The cluster limits every partition to 40 WCU with 1 s of burst, so a few
 * hundred writes to one key are throttled: the load rows, the hot key and
 * the throttles are real.
 */
#include <check.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/shoal.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_cluster.h"

#define TABLE "top_hot"

static tl_cluster C;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cluster_up(void)
{
	if (!tl_cluster_up_opts(&C, 3, 1, 3, "--partition-wcu 40 --burst-secs 1")) {
		tl_cluster_down(&C);
		ck_abort_msg("the cluster did not start");
	}
	char *err = NULL;
	int rc = tl_shoal(&C, NULL, &err,
	                  "create-table --table-name " TABLE
	                  " --attribute-definitions AttributeName=PK,AttributeType=S"
	                  " --key-schema AttributeName=PK,KeyType=HASH"
	                  " --billing-mode PAY_PER_REQUEST");
	ck_assert_msg(rc == 0, "create-table: %s", err ? err : "");
	free(err);
}

static void cluster_down(void)
{
	tl_cluster_down(&C);
}

static shoal_client *client(int throttle_retries)
{
	shoal_options o;
	shoal_options_init(&o);
	o.throttle_retries = throttle_retries;
	shoal_client *c;
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(shoal_client_new(C.endpoint, &o, &c, msg) == SHOAL_OK, "%s", msg);
	return c;
}

/* Asynchronous PutItems of key `key` (NULL: key k<i>): how many ended in
 * which way. */
typedef struct tally {
	int done, ok, throttled, other;
	char other_msg[SHOAL_MESSAGE_MAX + SHOAL_EXCEPTION_MAX + 8];
} tally;

static void on_put(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	tally *t = arg;
	t->done++;
	if (code == SHOAL_OK) {
		t->ok++;
	} else if (code == SHOAL_E_THROUGHPUT) {
		t->throttled++;
	} else {
		t->other++;
		snprintf(t->other_msg, sizeof(t->other_msg), "%s: %s", err->exception,
		         err->message);
	}
}

/* n writes, every third to key k<seq> and the others to `hot`, all in
 * flight at once; waits for them (deadline 60 s). */
static tally put_burst(shoal_client *c, int n, const char *hot, int *seq)
{
	tally t = {0};
	for (int i = 0; i < n; i++) {
		char body[256], key[32];
		if (i % 3 == 2)
			snprintf(key, sizeof(key), "k%d", (*seq)++);
		else
			snprintf(key, sizeof(key), "%s", hot);
		snprintf(body, sizeof(body),
		         "{\"TableName\":\"" TABLE "\",\"Item\":{\"PK\":{\"S\":\"%s\"},"
		         "\"v\":{\"N\":\"%d\"}}}",
		         key, i);
		shoal_error err;
		ck_assert_int_eq(shoal_submit_json(c, "PutItem", body, on_put, &t, &err), SHOAL_OK);
	}
	for (int64_t until = now_ms() + 60000; t.done < n && now_ms() < until;)
		shoal_poll(c, 200);
	ck_assert_int_eq(t.done, n);
	return t;
}

/* ------------------------------------------------------------------------ */
/* tmux                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct term {
	char sock[64]; /* tmux -L name: a private server */
	char dir[1024];
} term;

static void require_tmux(void)
{
	ck_assert_msg(tl_sh("command -v tmux >/dev/null 2>&1") == 0,
	              "tmux is not installed: it_top drives `shoal top` in tmux; "
	              "deploy/install-deps.sh installs it (Debian package tmux)");
}

/* Output of a shell command (malloc'd; "" when none). */
static char *capture(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *capture(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, m);
	pclose(p);
	fclose(m);
	return buf;
}

static char *screen(const term *t)
{
	return capture("tmux -L %s capture-pane -p -t top 2>/dev/null", t->sock);
}

static char *pane_flags(const term *t)
{
	return capture("tmux -L %s display-message -p -t top '#{alternate_on} #{cursor_flag}'",
	               t->sock);
}

/* Starts `shoal top` in a 120 x 40 tmux pane. */
static void term_start(term *t, const char *tag)
{
	require_tmux();
	snprintf(t->sock, sizeof(t->sock), "shoal-it-top-%d-%s", (int)getpid(), tag);
	snprintf(t->dir, sizeof(t->dir), "%s", tl_tmpdir("top"));
	int rc = tl_sh("tmux -L %s -f /dev/null new-session -d -x 120 -y 40 -s top "
	               "\"stty -g > %s/before; %s/shoal --endpoint '%s' top --interval 0.3; "
	               "echo \\$? > %s/rc.tmp; stty -g > %s/after; mv %s/rc.tmp %s/rc; exec cat\"",
	               t->sock, t->dir, C.bin, C.endpoint, t->dir, t->dir, t->dir, t->dir);
	ck_assert_msg(rc == 0, "tmux new-session failed (%d)", rc);
}

static void term_stop(term *t)
{
	tl_sh("tmux -L %s kill-server >/dev/null 2>&1", t->sock);
}

/* Waits (deadline) for top to end; returns its exit code. */
static int wait_exit(const term *t)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/rc", t->dir);
	char *rc = NULL;
	for (int64_t until = now_ms() + 10000; rc == NULL && now_ms() < until;) {
		rc = tl_read_file(path);
		if (rc == NULL)
			usleep(20000); /* polling interval, not a wait for a condition */
	}
	ck_assert_msg(rc != NULL, "shoal top did not end after the key; screen:\n%s", screen(t));
	int code = atoi(rc);
	free(rc);
	return code;
}

/* The terminal as top found it: same settings, main screen, cursor shown. */
static void assert_restored(const term *t)
{
	char p1[1100], p2[1100];
	snprintf(p1, sizeof(p1), "%s/before", t->dir);
	snprintf(p2, sizeof(p2), "%s/after", t->dir);
	char *before = tl_read_file(p1), *after = tl_read_file(p2);
	ck_assert_ptr_nonnull(before);
	ck_assert_ptr_nonnull(after);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	char *flags = pane_flags(t);
	ck_assert_msg(strncmp(flags, "0 1", 3) == 0,
	              "alternate screen / cursor after exit: \"%s\" (want \"0 1\")", flags);
	free(flags);
	char *s = screen(t);
	ck_assert_msg(strstr(s, "BUSIEST PARTITIONS") == NULL, "top's screen is still shown:\n%s",
	              s);
	free(s);
}

START_TEST(test_top_in_tmux)
{
	term t;
	term_start(&t, "q");
	shoal_client *c = client(0);
	int seq = 0;
	/* Keep the key hot while watching the screen: until the table's
	 * partitions and the hot key are on it, or the deadline. */
	char *s = NULL;
	bool seen = false;
	for (int64_t until = now_ms() + 45000; !seen && now_ms() < until;) {
		tally b = put_burst(c, 150, "hot", &seq);
		ck_assert_msg(b.other == 0, "unexpected failure: %s", b.other_msg);
		free(s);
		s = screen(&t);
		const char *parts = strstr(s, "BUSIEST PARTITIONS");
		const char *hot = strstr(s, "HOTTEST KEYS");
		const char *lag = strstr(s, "INDEX LAG");
		seen = parts != NULL && hot != NULL && lag != NULL;
		/* A partition row of the table between the two titles, and the hot
		 * key first among the keys. */
		const char *row = seen ? strstr(parts, TABLE " ") : NULL;
		seen = seen && row != NULL && row < hot;
		const char *key = seen ? strstr(hot, "{\"S\":\"hot\"}") : NULL;
		seen = seen && key != NULL && key < lag;
	}
	ck_assert_msg(seen, "the screen never showed " TABLE "'s partitions and its hot key:\n%s",
	              s ? s : "");
	/* While it runs: the alternate screen, the cursor hidden. */
	char *flags = pane_flags(&t);
	ck_assert_msg(strncmp(flags, "1 0", 3) == 0, "while running: \"%s\" (want \"1 0\")", flags);
	free(flags);
	/* The screen fits the terminal: 40 lines at most, none wider than 120. */
	int lines = 0;
	for (const char *p = s; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
		ck_assert_uint_le(len, 120);
		lines++;
		p += len + (nl != NULL);
	}
	ck_assert_int_le(lines, 40);
	free(s);

	tl_sh("tmux -L %s send-keys -t top q", t.sock);
	ck_assert_int_eq(wait_exit(&t), 0);
	assert_restored(&t);
	term_stop(&t);

	/* status --hot names the key, heaviest first (the JSON form).  Hot keys
	 * come from each group's leader report, so a report taken while the
	 * key's group has no leader lacks it: burst and ask again, until a
	 * deadline (CI once saw a key of one write first). */
	char *out = NULL, *err = NULL, *first_key = NULL;
	for (int64_t until = now_ms() + 30000;;) {
		put_burst(c, 150, "hot", &seq);
		int rc = tl_shoal(&C, &out, &err, "status --hot --output json");
		ck_assert_msg(rc == 0, "status --hot: %s", err ? err : "");
		json_t *j = json_loads(out, 0, NULL);
		ck_assert_msg(j != NULL, "%s", out);
		json_t *first = json_array_get(json_object_get(j, "HotKeys"), 0);
		ck_assert_msg(first != NULL, "no hot keys: %s", out);
		ck_assert_str_eq(json_string_value(json_object_get(first, "Table")), TABLE);
		free(first_key);
		first_key = strdup(json_string_value(json_object_get(first, "Key")));
		json_decref(j);
		bool done = strcmp(first_key, "{\"S\":\"hot\"}") == 0 || now_ms() >= until;
		if (!done) {
			free(out);
			free(err);
		}
		if (done)
			break;
	}
	ck_assert_msg(strcmp(first_key, "{\"S\":\"hot\"}") == 0,
	              "status --hot names %s first, not the hot key: %s", first_key, out);
	free(first_key);
	free(out);
	free(err);
	shoal_client_free(c);
}
END_TEST

START_TEST(test_top_ctrl_c)
{
	term t;
	term_start(&t, "c");
	char *s = NULL;
	for (int64_t until = now_ms() + 15000; now_ms() < until;) {
		free(s);
		s = screen(&t);
		if (strstr(s, "INDEX LAG") != NULL)
			break;
		usleep(50000); /* polling interval */
	}
	ck_assert_msg(strstr(s, "INDEX LAG") != NULL, "no screen:\n%s", s);
	free(s);
	tl_sh("tmux -L %s send-keys -t top C-c", t.sock);
	ck_assert_int_eq(wait_exit(&t), 130);
	assert_restored(&t);
	term_stop(&t);
}
END_TEST

/* libshoal's retries against real throttling: a burst to one key far over
 * its partition's 40 WCU is throttled without retries, and the same burst
 * with the default retries (exponential backoff, full jitter, 10 attempts)
 * all succeeds. */
START_TEST(test_throttled_retried)
{
	int seq = 100000;
	shoal_client *raw = client(0);
	tally a = put_burst(raw, 300, "burst-raw", &seq);
	ck_assert_msg(a.other == 0, "%s", a.other_msg);
	ck_assert_msg(a.throttled > 0, "300 writes at once to a 40 WCU partition: none throttled");
	shoal_client_free(raw);

	shoal_client *c = client(9);
	tally b = put_burst(c, 60, "burst-retried", &seq);
	ck_assert_msg(b.other == 0, "%s", b.other_msg);
	ck_assert_msg(b.ok == 60, "%d of 60 writes succeeded with retries (%d throttled)", b.ok,
	              b.throttled);
	shoal_client_free(c);
}
END_TEST

static Suite *top_suite(void)
{
	Suite *s = suite_create("top");
	TCase *tc = tcase_create("top");
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_top_in_tmux);
	tcase_add_test(tc, test_top_ctrl_c);
	tcase_add_test(tc, test_throttled_retried);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(top_suite)
