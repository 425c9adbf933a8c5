/*
 * log.c -- shoal-node's log: one line per event on stderr or in a file.
 *
 * Each line is formatted completely into a local buffer and written with one
 * write(2) on a file opened with O_APPEND, so lines from different threads
 * never interleave and a line is never torn by a concurrent writer (short
 * lines; PIPE_BUF-sized writes are atomic on pipes, and O_APPEND writes on
 * regular files are atomic with respect to each other on Linux).
 *
 * Threads: node_log_open/close before/after the other threads; node_logf
 * from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node/node.h"

static int log_fd = 2;
static uint32_t log_node;
static atomic_int log_level = NODE_LOG_INFO;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

int node_log_open(const char *path, uint32_t node_id, char *errmsg)
{
	log_node = node_id;
	const char *dbg = getenv("SHOAL_LOG_DEBUG");
	if (dbg != NULL && dbg[0] != '\0' && dbg[0] != '0')
		atomic_store(&log_level, NODE_LOG_DEBUG);
	if (path == NULL)
		return SHOAL_OK;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return sh_errf(errmsg, SHOAL_E_IO, "open %s: %s", path, strerror(errno));
	log_fd = fd;
	return SHOAL_OK;
}

int node_log_fd(void)
{
	return log_fd;
}

void node_log_close(void)
{
	if (log_fd > 2)
		close(log_fd);
	log_fd = 2;
}

void node_log_set_level(enum node_log_level level)
{
	atomic_store(&log_level, (int)level);
}

void node_logf(enum node_log_level level, const char *fmt, ...)
{
	if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ node %u %s ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, log_node, level_names[level]);
	if (n < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	const char *p = line;
	while (len > 0) {
		ssize_t w = write(log_fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		len -= (size_t)w;
	}
}

bool node_log_allow(node_log_budget *b, uint64_t now_ms, uint64_t *skipped)
{
	if (b->logged && now_ms - b->last_ms < NODE_LOG_EVERY_MS) {
		b->skipped++;
		return false;
	}
	*skipped = b->skipped;
	b->skipped = 0;
	b->last_ms = now_ms;
	b->logged = true;
	return true;
}
