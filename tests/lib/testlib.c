#include "testlib.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Directories made by tl_tmpdir, removed when the process that made them
 * exits (Check runs each test in a child, whose exit ends the test), so a
 * run leaves nothing behind: a test cluster's storage groups preallocate
 * megabytes each (storage/env.c), and hundreds of runs filled a disk. */
#define TMPDIRS_MAX 64
static struct {
	char path[PATH_MAX];
	pid_t owner;
} tmpdirs[TMPDIRS_MAX];
static int n_tmpdirs;

static void remove_tmpdirs(void)
{
	const char *keep = getenv("SHOAL_KEEP_TMP");
	if (keep != NULL && keep[0] == '1')
		return;
	for (int i = 0; i < n_tmpdirs; i++)
		if (tmpdirs[i].owner == getpid() && tmpdirs[i].path[0] != '\0')
			tl_rmtree(tmpdirs[i].path);
}

const char *tl_tmpdir(const char *tag)
{
	static char path[PATH_MAX];
	const char *base = getenv("TMPDIR");
	if (base == NULL || base[0] == '\0')
		base = "/tmp";
	snprintf(path, sizeof(path), "%s/shoal-%s-XXXXXX", base, tag);
	if (mkdtemp(path) == NULL) {
		perror("mkdtemp");
		abort();
	}
	static bool registered;
	if (!registered && atexit(remove_tmpdirs) == 0)
		registered = true;
	if (n_tmpdirs < TMPDIRS_MAX) {
		snprintf(tmpdirs[n_tmpdirs].path, sizeof(tmpdirs[n_tmpdirs].path), "%s", path);
		tmpdirs[n_tmpdirs].owner = getpid();
		n_tmpdirs++;
	}
	return path;
}

void tl_tmpdir_keep(const char *path)
{
	for (int i = 0; i < n_tmpdirs; i++)
		if (strcmp(tmpdirs[i].path, path) == 0)
			tmpdirs[i].path[0] = '\0';
}

void tl_rmtree(const char *path)
{
	DIR *d = opendir(path);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			char sub[PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			struct stat st;
			if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
				tl_rmtree(sub);
			else
				unlink(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

uint64_t tl_seed(void)
{
	static int printed;
	static uint64_t seed;
	if (!printed) {
		const char *s = getenv("SHOAL_SEED");
		if (s != NULL && s[0] != '\0')
			seed = strtoull(s, NULL, 10);
		else
			seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		printf("seed: %llu (rerun with SHOAL_SEED=%llu)\n", (unsigned long long)seed,
		       (unsigned long long)seed);
		fflush(stdout);
		printed = 1;
	}
	return seed;
}

uint64_t tl_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void (*tl_fail_hook)(const char *file, int line, const char *msg);

void tl_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (tl_fail_hook != NULL)
		tl_fail_hook(file, line, msg);
	fprintf(stderr, "%s:%d: %s\n", file, line, msg);
	abort();
}

bool tl_ports_free(int base, int n)
{
	for (int p = base; p < base + n; p++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return false;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (!ok)
			return false;
	}
	return true;
}

/* tl_ports_claim's locks: the descriptor + 1 of each 100-port chunk this
 * process claimed, 0 for none. */
#define PORT_CHUNK 100
static int claimed[65536 / PORT_CHUNK + 1];

void tl_ports_unclaim(int base, int n)
{
	for (int c = base / PORT_CHUNK; n > 0 && c <= (base + n - 1) / PORT_CHUNK; c++)
		if (c >= 0 && c < (int)(sizeof(claimed) / sizeof(claimed[0])) && claimed[c] != 0) {
			close(claimed[c] - 1); /* releases the flock */
			claimed[c] = 0;
		}
}

bool tl_ports_claim(int base, int n)
{
	const char *dir = "/tmp/shoal-test-ports";
	if (mkdir(dir, 0777) == 0)
		chmod(dir, 0777); /* whoever runs the next test may be another user */
	int first = base / PORT_CHUNK, last = (base + n - 1) / PORT_CHUNK;
	if (n <= 0 || first < 0 || last >= (int)(sizeof(claimed) / sizeof(claimed[0])))
		return false;
	for (int c = first; c <= last; c++) {
		char path[64];
		snprintf(path, sizeof(path), "%s/%d", dir, c);
		int fd = claimed[c] != 0 ? -1 : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd >= 0)
			(void)fchmod(fd, 0666); /* past the umask: any user's test may lock it */
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			tl_ports_unclaim(first * PORT_CHUNK, (c - first) * PORT_CHUNK);
			return false;
		}
		claimed[c] = fd + 1;
	}
	return true;
}

int tl_free_ports(int n)
{
	const int lo = 20000, span = 12000, step = 200;
	int base = lo + (int)(getpid() % (span / step)) * step;
	for (int tries = 0; tries < span / step; tries++) {
		if (tl_ports_free(base, n) && tl_ports_claim(base, n))
			return base;
		base = lo + (base - lo + step) % span;
	}
	return base; /* everything busy: let the caller's listen report it */
}
