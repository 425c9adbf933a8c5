#include "tl_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tl_cluster.h" /* tl_read_file */

char *tl_metrics_get(const char *hostport)
{
	char host[64];
	int port;
	if (sscanf(hostport, "%63[^:]:%d", host, &port) != 2)
		return NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return NULL;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return NULL;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	char *buf = NULL;
	size_t cap = 65536, len = 0;
	const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto out;
	buf = malloc(cap);
	while (buf != NULL) {
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL)
				break;
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (n == 0) {
			buf[len] = '\0';
			char *body = strstr(buf, "\r\n\r\n");
			if (strncmp(buf, "HTTP/1.", 7) != 0 || strstr(buf, " 200 ") == NULL ||
			    body == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			memmove(buf, body + 4, len - (size_t)(body + 4 - buf) + 1);
			break;
		}
		len += (size_t)n;
	}
out:
	close(fd);
	return buf;
}

void tl_metrics_each(const char *text, tl_metrics_fn fn, void *arg)
{
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *end = strchr(line, '\n');
		if (end == NULL)
			end = line + strlen(line);
		if (*line != '#' && *line != '\n') {
			size_t nl = strcspn(line, "{ \n");
			const char *p = line + nl, *labels = "";
			if (*p == '{') {
				labels = p;
				/* the set ends at the first '}' outside quotes */
				bool q = false;
				for (; p < end; p++) {
					if (*p == '\\' && q && p + 1 < end)
						p++;
					else if (*p == '"')
						q = !q;
					else if (*p == '}' && !q)
						break;
				}
				if (p < end)
					p++;
			}
			if (p < end && nl > 0)
				fn(arg, line, nl, labels, strtod(p, NULL));
		}
		line = *end != '\0' ? end + 1 : NULL;
	}
}

bool tl_metrics_label(const char *set, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p = set;
	while (*p != '\0' && *p != '}' && *p != '\n') {
		if (*p == '{' || *p == ',' || *p == ' ') {
			p++;
			continue;
		}
		const char *eq = strchr(p, '=');
		if (eq == NULL || eq[1] != '"')
			return false;
		bool match = (size_t)(eq - p) == nl && strncmp(p, name, nl) == 0;
		size_t o = 0;
		p = eq + 2;
		while (*p != '\0' && *p != '"') {
			char ch = *p++;
			if (ch == '\\' && *p != '\0') {
				ch = *p++;
				if (ch == 'n')
					ch = '\n';
			}
			if (match && o + 1 < cap)
				out[o++] = ch;
		}
		if (*p == '"')
			p++;
		if (match) {
			if (cap > 0)
				out[o] = '\0';
			return true;
		}
	}
	return false;
}

bool tl_proc_rss(const char *pidfile, double *anon_mib, double *vm_mib)
{
	*anon_mib = *vm_mib = 0;
	char *pid = tl_read_file(pidfile);
	if (pid == NULL)
		return false;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", atoi(pid));
	free(pid);
	char *st = tl_read_file(path);
	if (st == NULL)
		return false;
	const char *a = strstr(st, "\nRssAnon:"), *v = strstr(st, "\nVmRSS:");
	if (a != NULL)
		*anon_mib = atof(a + 9) / 1024.0;
	if (v != NULL)
		*vm_mib = atof(v + 7) / 1024.0;
	free(st);
	return a != NULL && v != NULL;
}

bool tl_proc_cpu(const char *pidfile, double *cpu_secs)
{
	*cpu_secs = 0;
	char *pid = tl_read_file(pidfile);
	if (pid == NULL)
		return false;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", atoi(pid));
	free(pid);
	char *st = tl_read_file(path);
	if (st == NULL)
		return false;
	/* after "pid (comm) ": state is field 3, utime 14, stime 15 */
	const char *p = strrchr(st, ')');
	unsigned long long ut = 0, stt = 0;
	bool ok =
	    p != NULL &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) == 2;
	free(st);
	if (ok)
		*cpu_secs = (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
	return ok;
}

bool tl_machine_cpu(double *busy_secs, double *total_secs)
{
	*busy_secs = *total_secs = 0;
	char *st = tl_read_file("/proc/stat");
	if (st == NULL)
		return false;
	unsigned long long v[10] = {0};
	int n = sscanf(st, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
	               &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	free(st);
	if (n < 5)
		return false;
	/* user nice system idle iowait irq softirq steal (guest counted in user) */
	unsigned long long total = 0;
	for (int i = 0; i < 8 && i < n; i++)
		total += v[i];
	double hz = (double)sysconf(_SC_CLK_TCK);
	*total_secs = (double)total / hz;
	*busy_secs = (double)(total - v[3] - v[4]) / hz;
	return true;
}
