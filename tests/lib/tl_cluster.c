#include "tl_cluster.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <nng/supplemental/tls/tls.h>

#include "client/shoal.h"
#include "common/clock.h"
#include "common/tls.h"
#include "common/tls_mbed.h"
#include "proto/wire_auth.h"
#include "testlib.h"
#include "tl_metrics.h"

char *tl_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len - 1 == 0) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

static int vsh(const char *fmt, va_list ap)
{
	char cmd[16384];
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int tl_sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vsh(fmt, ap);
	va_end(ap);
	return rc;
}

void tl_cluster_locate(tl_cluster *c)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		perror("readlink /proc/self/exe");
		abort();
	}
	exe[n] = '\0';
	char *tests = dirname(exe);   /* <build>/tests */
	char *build = dirname(tests); /* <build> */
	snprintf(c->bin, sizeof(c->bin), "%s/bin", build);
	char *root = dirname(build);
	snprintf(c->root, sizeof(c->root), "%s", root);
}

static bool script(tl_cluster *c, const char *fmt, ...)
{
	char args[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	return tl_sh("SHOAL_BIN='%s' '%s/deploy/cluster.sh' %s --dir '%s' --base-port %d", c->bin,
	             c->root, args, c->dir, c->base_port) == 0;
}

/* The clusters this process started and has not stopped: stopped at exit,
 * so a test that fails (Check's forked child exits through exit()) never
 * leaves processes behind holding ports. */
#define MAX_LIVE 8
static tl_cluster *live[MAX_LIVE];
static pid_t live_owner[MAX_LIVE]; /* forked test children inherit the list */

static bool exiting; /* stop_live: a test already failed, report nothing more */

static void stop_live(void)
{
	exiting = true;
	for (int i = 0; i < MAX_LIVE; i++)
		if (live[i] != NULL && live_owner[i] == getpid())
			tl_cluster_down(live[i]);
}

static void track(tl_cluster *c, bool on)
{
	static bool registered;
	if (!registered) {
		atexit(stop_live);
		registered = true;
	}
	for (int i = 0; i < MAX_LIVE; i++) {
		if (on && live[i] == NULL) {
			live[i] = c;
			live_owner[i] = getpid();
			return;
		}
		if (!on && live[i] == c)
			live[i] = NULL;
	}
}

/* ------------------------------------------------------------------------ */
/* The test key                                                              */
/* ------------------------------------------------------------------------ */

static char test_key[32], test_secret[48];

static void make_test_key(void)
{
	if (test_key[0] != '\0')
		return;
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char r[8 + 40];
	FILE *f = fopen("/dev/urandom", "rb");
	if (f == NULL || fread(r, 1, sizeof(r), f) != sizeof(r)) {
		perror("/dev/urandom");
		abort();
	}
	fclose(f);
	int n = snprintf(test_key, sizeof(test_key), "AKIDTEST");
	for (int i = 0; i < 8; i++)
		n += snprintf(test_key + n, sizeof(test_key) - (size_t)n, "%02X", r[i]);
	for (int i = 0; i < 40; i++)
		test_secret[i] = b64[r[8 + i] % 64];
	test_secret[40] = '\0';
}

const char *tl_test_key_id(void)
{
	make_test_key();
	return test_key;
}

const char *tl_test_secret(void)
{
	make_test_key();
	return test_secret;
}

/* Whether a cluster gets the test key: not when the test names credentials
 * itself, nor with SHOAL_TEST_CREDENTIALS=0. */
static bool use_test_key(const char *opts)
{
	const char *v = getenv("SHOAL_TEST_CREDENTIALS");
	if (v != NULL && strcmp(v, "0") == 0)
		return false;
	return opts == NULL || strstr(opts, "-credentials") == NULL;
}

/* Writes the test key as D/test.credentials (0600), in the format of
 * router/sigv4.c: one unrestricted key. */
static bool write_test_key(const tl_cluster *c, char *path, size_t cap)
{
	snprintf(path, cap, "%s/test.credentials", c->dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	char line[128];
	int n = snprintf(line, sizeof(line), "%s %s\n", tl_test_key_id(), tl_test_secret());
	bool ok = write(fd, line, (size_t)n) == n;
	return close(fd) == 0 && ok;
}

uint8_t *tl_cluster_sign(const tl_cluster *c, const uint8_t *msg, size_t len, size_t *out_len)
{
	uint8_t field[512];
	size_t n = 0;
	if (c->signed_by_test) {
		char date[17], day[9];
		uint8_t key[32], sig[32];
		wire_auth_amz_date((int64_t)time(NULL), date);
		snprintf(day, sizeof(day), "%.8s", date);
		wire_auth_signing_key(tl_test_secret(), day, "us-east-1", "dynamodb", key);
		wire_auth_signature(key, date, "us-east-1", "dynamodb", msg, len, sig);
		n = wire_auth_encode(field, sizeof(field), tl_test_key_id(), date, "us-east-1",
		                     "dynamodb", sig);
	}
	uint8_t *out = malloc(len + n);
	if (out == NULL)
		return NULL;
	memcpy(out, msg, len);
	memcpy(out + len, field, n);
	*out_len = len + n;
	return out;
}

/* ------------------------------------------------------------------------ */
/* TLS client ports (SHOAL_TEST_TLS=1)                                       */
/* ------------------------------------------------------------------------ */

/* The process's CA (made on first use, in a directory of its own): every
 * cluster of the process is given it (cluster.sh reuses a CA it finds in
 * D/tls), so that one AWS_CA_BUNDLE serves clients of all of them. */
static char test_ca_dir[1024];
static pid_t test_ca_pid;

/* Whether a cluster gets TLS client ports: with SHOAL_TEST_TLS=1, unless
 * the test chose (--plain, --tls). */
static bool use_test_tls(const char *opts)
{
	const char *v = getenv("SHOAL_TEST_TLS");
	if (v == NULL || strcmp(v, "1") != 0)
		return false;
	return opts == NULL || (strstr(opts, "--plain") == NULL && strstr(opts, "--tls") == NULL);
}

/* D/tls holding the process's CA, made first if need be (certs.sh makes
 * certificates for at least one member; only the CA is copied). */
static bool give_test_ca(const tl_cluster *c)
{
	if (test_ca_pid != getpid()) {
		snprintf(test_ca_dir, sizeof(test_ca_dir), "%s", tl_tmpdir("ca"));
		if (tl_sh("'%s/deploy/certs.sh' --dir '%s' --nodes 1 >/dev/null", c->root,
		          test_ca_dir) != 0)
			return false;
		test_ca_pid = getpid();
	}
	return tl_sh("mkdir -p -m 700 '%s/tls' && cp '%s/ca.pem' '%s/ca.key' '%s/tls/'", c->dir,
	             test_ca_dir, test_ca_dir, c->dir) == 0;
}

int tl_cluster_dial(const tl_cluster *c, nng_socket s, const char *url)
{
	if (!sh_tls_is_tls(url))
		return nng_dial(s, url, NULL, 0);
	char ca[1100];
	snprintf(ca, sizeof(ca), "%s/tls/ca.pem", c->dir);
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return rv;
	if ((rv = nng_tls_config_ca_file(cfg, ca)) == 0 &&
	    (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) == 0)
		rv = sh_tls_dial(s, url, cfg, 0);
	nng_tls_config_free(cfg); /* a dialer holds its own reference */
	return rv;
}

int tl_tls_leave_midway(int port)
{
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	mbedtls_net_context net;
	mbedtls_ssl_config conf;
	mbedtls_ssl_context ssl;
	mbedtls_net_init(&net);
	mbedtls_ssl_config_init(&conf);
	mbedtls_ssl_init(&ssl);
	int rv = mbedtls_net_connect(&net, "127.0.0.1", ps, MBEDTLS_NET_PROTO_TCP);
	if (rv == 0)
		rv = sh_tls_conf_defaults(&conf, MBEDTLS_SSL_IS_CLIENT);
	if (rv == 0) {
		/* It leaves before it would look at the server's certificate. */
		mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE);
		rv = mbedtls_ssl_setup(&ssl, &conf);
	}
	if (rv == 0) {
		mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, NULL);
		/* Our last flight (ChangeCipherSpec, Finished) is sent once the
		 * state is the server's ChangeCipherSpec. */
		while (rv == 0 && ssl.state != MBEDTLS_SSL_SERVER_CHANGE_CIPHER_SPEC &&
		       ssl.state != MBEDTLS_SSL_HANDSHAKE_OVER)
			rv = mbedtls_ssl_handshake_step(&ssl);
	}
	mbedtls_ssl_free(&ssl);
	mbedtls_ssl_config_free(&conf);
	mbedtls_net_free(&net); /* closes the socket: no close_notify */
	return rv;
}

#define CLUSTER_PORTS 800

bool tl_cluster_up(tl_cluster *c, int nodes, int routers, int groups)
{
	return tl_cluster_up_opts(c, nodes, routers, groups, NULL);
}

bool tl_cluster_up_opts(tl_cluster *c, int nodes, int routers, int groups, const char *opts)
{
	memset(c, 0, sizeof(*c));
	tl_cluster_locate(c);
	snprintf(c->dir, sizeof(c->dir), "%s", tl_tmpdir("cluster"));

	/* cluster.sh places router r on P + 2(r-1) and node i on P + 100 i
	 * .. P + 100 i + 90, so 800 ports hold a cluster grown to 7 nodes by
	 * `cluster.sh add-node` (it_elastic grows to 5, it_admin to 4).  Stay
	 * below Linux's ephemeral range (32768-60999): an outgoing
	 * connection's local port there would make a later listen on it fail
	 * with "address in use".  Blocks in use or claimed (another test's
	 * cluster, maybe not listening yet) are skipped; the block is claimed
	 * until tl_cluster_down. */
	c->base_port = 10000 + (int)(getpid() % 55) * 400;
	for (int tries = 0; tries < 55 && !(tl_ports_free(c->base_port, CLUSTER_PORTS) &&
	                                    tl_ports_claim(c->base_port, CLUSTER_PORTS));
	     tries++)
		c->base_port = 10000 + (c->base_port - 10000 + 400) % (55 * 400);
	c->nodes = nodes;
	c->routers = routers;
	c->groups = groups;
	track(c, true);
	char creds[1200] = "", creds_opt[1300] = "";
	if (use_test_key(opts)) {
		if (!write_test_key(c, creds, sizeof(creds)))
			return false;
		snprintf(creds_opt, sizeof(creds_opt), "--credentials '%s'", creds);
		c->signed_by_test = true;
	}
	bool tls = use_test_tls(opts);
	if (tls && !give_test_ca(c))
		return false;
	/* Partitions are not throttled unless a test asks (capacity tests
	 * pass --partition-rcu/--partition-wcu in opts, which come later and
	 * win): the other tests' loads exceed DynamoDB's 1000 WCU default. */
	if (!script(c,
	            "up --nodes %d --routers %d --groups %d --partition-rcu 1000000000 "
	            "--partition-wcu 1000000000 %s %s %s",
	            nodes, routers, groups, tls ? "--tls" : "", creds_opt,
	            opts != NULL ? opts : ""))
		return false;
	if (tls) {
		/* libshoal's clients verify the routers with it (the AWS CLI's
		 * variable); tl_cluster_cli passes --ca-bundle itself. */
		char ca[1100];
		snprintf(ca, sizeof(ca), "%s/ca.pem", test_ca_dir);
		setenv("AWS_CA_BUNDLE", ca, 1);
	}
	if (c->signed_by_test) {
		/* For every client of the test: libshoal and the tools it runs. */
		setenv("AWS_ACCESS_KEY_ID", tl_test_key_id(), 1);
		setenv("AWS_SECRET_ACCESS_KEY", tl_test_secret(), 1);
		unsetenv("AWS_PROFILE");
	}
	char path[1100];
	snprintf(path, sizeof(path), "%s/router.endpoint", c->dir);
	char *ep = tl_read_file(path);
	if (ep == NULL)
		return false;
	ep[strcspn(ep, "\n")] = '\0';
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", ep);
	free(ep);
	return true;
}

void tl_cluster_down(tl_cluster *c)
{
	track(c, false);
	if (c->dir[0] == '\0')
		return;
	script(c, "down");
	tl_ports_unclaim(c->base_port, CLUSTER_PORTS);
	/* File systems of tl_cluster_node_fs: a post-mortem (SHOAL_KEEP_CLUSTER)
	 * keeps a copy of what they hold. */
	const char *keep = getenv("SHOAL_KEEP_CLUSTER");
	bool keeping = keep != NULL && keep[0] == '1';
	if (keeping)
		tl_sh("findmnt -rn -o TARGET | grep -F '%s/node-' | "
		      "while read -r m; do cp -a --sparse=always \"$m\" \"$m.kept\"; done",
		      c->dir);
	tl_sh("findmnt -rn -o TARGET | grep -F '%s/node-' | xargs -r -n1 umount -l", c->dir);
	/* Every process has exited (LeakSanitizer reports at exit): a
	 * sanitizer report in any log fails the test, whatever it asserted,
	 * since a node that died of one during a test that kills nodes anyway
	 * could otherwise go unnoticed.  The directory is kept then. */
	bool reported = tl_sh("grep -qsE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "
	                      "'%s'/*.log",
	                      c->dir) == 0;
	if (reported)
		tl_sh("grep -sE -A30 'ERROR: (Address|Leak)Sanitizer|runtime error:' '%s'/*.log "
		      "| head -120 >&2",
		      c->dir);
	/* SHOAL_KEEP_CLUSTER=1 keeps logs and data for a post-mortem; a test
	 * that failed (stop_live) keeps its processes' logs. */
	if (keeping || reported) {
		tl_tmpdir_keep(c->dir);
		fprintf(stderr, "tl_cluster: kept %s\n", c->dir);
	} else {
		if (exiting && tl_sh("mkdir -p '%s.logs' && cp '%s'/*.log '%s.logs/'", c->dir,
		                     c->dir, c->dir) == 0)
			fprintf(stderr, "tl_cluster: the logs of the failed test are in %s.logs\n",
			        c->dir);
		tl_rmtree(c->dir);
	}
	char dir[sizeof(c->dir)];
	snprintf(dir, sizeof(dir), "%s", c->dir);
	c->dir[0] = '\0';
	if (reported && !exiting)
		tl_fail(__FILE__, __LINE__, "a sanitizer report in the logs of the cluster in %s",
		        dir);
}

bool tl_cluster_stop_node(tl_cluster *c, int id, bool hard)
{
	return script(c, "stop-node %d%s", id, hard ? " --hard" : "");
}

bool tl_cluster_start_node(tl_cluster *c, int id)
{
	return script(c, "start-node %d", id);
}

/* What a machine crash may leave of one environment directory. */
static bool power_loss_env(const char *dir, unsigned pages, unsigned *seed)
{
	char path[1500];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT; /* never opened: nothing to lose */
	struct stat st;
	bool ok = fstat(fd, &st) == 0;
	/* LMDB's file is as large as its map (sparse): scramble within the
	 * allocated part, where the data is. */
	off_t used = ok ? (off_t)st.st_blocks * 512 : 0;
	off_t npages = used / 4096 > 2 ? used / 4096 : 2;
	for (unsigned k = 0; ok && k < pages; k++) {
		unsigned char junk[4096];
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)rand_r(seed);
		off_t page = k < 2 && rand_r(seed) % 2 == 0 ? (off_t)k /* a meta page */
		                                            : (off_t)(rand_r(seed) % npages);
		ok = pwrite(fd, junk, sizeof(junk), page * 4096) == (ssize_t)sizeof(junk);
	}
	ok = close(fd) == 0 && ok;
	snprintf(path, sizeof(path), "%s/shoal-state", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return false;
	fprintf(f, "shoal-state 1\nstate open\nboot power-loss-%08x\n", rand_r(seed));
	return fclose(f) == 0 && ok;
}

bool tl_cluster_power_loss(tl_cluster *c, int id, unsigned pages, unsigned *seed)
{
	if (!tl_cluster_stop_node(c, id, true))
		return false;
	char node_dir[1100];
	snprintf(node_dir, sizeof(node_dir), "%s/node-%d", c->dir, id);
	DIR *d = opendir(node_dir);
	if (d == NULL)
		return false;
	bool ok = true;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "group-", 6) == 0) {
			char env[1400];
			snprintf(env, sizeof(env), "%s/%s/lmdb", node_dir, e->d_name);
			ok = power_loss_env(env, pages, seed) && ok;
		}
	closedir(d);
	return ok;
}

bool tl_cluster_node_fs(tl_cluster *c, int id, int mb)
{
	if (!tl_cluster_stop_node(c, id, false))
		return false;
	bool ok = tl_sh("d='%s/node-%d' && mv \"$d\" \"$d.move\" && mkdir \"$d\" && "
	                "mount -t tmpfs -o size=%dm,mode=0700 shoal-test \"$d\" && "
	                "cp -a \"$d.move/.\" \"$d/\" && rm -rf \"$d.move\"",
	                c->dir, id, mb) == 0;
	return tl_cluster_start_node(c, id) && ok;
}

bool tl_cluster_disk_fill(tl_cluster *c, int id, bool full)
{
	if (!full)
		return tl_sh("rm -f '%s/node-%d/filler'", c->dir, id) == 0;
	/* All of it but a page: the next allocation of any size fails.  The
	 * node writes meanwhile, so a few tries, each leaving a little more;
	 * a disk with under 64 KiB left is full already.  (it_jepsen once saw
	 * four tries, up to 4 MiB, all fail, with nothing on stderr to say
	 * why: a failure now says what df and fallocate said.) */
	return tl_sh("d='%s/node-%d' && for slack in 4096 65536 1048576 4194304 16777216 "
	             "67108864; do a=$(df -B1 --output=avail \"$d\" | tail -n 1); "
	             "[ \"$a\" -le 65536 ] && exit 0; "
	             "e=$(fallocate -l $((a > slack + 4096 ? a - slack : 4096)) "
	             "\"$d/filler\" 2>&1) && exit 0; rm -f \"$d/filler\"; done; "
	             "echo \"tl_cluster_disk_fill: $d: $a bytes free, fallocate: $e\" >&2; exit 1",
	             c->dir, id) == 0;
}

bool tl_cluster_stop_router(tl_cluster *c, int id, bool hard)
{
	return script(c, "stop-router %d%s", id, hard ? " --hard" : "");
}

char *tl_cluster_add_node(tl_cluster *c)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/add.out", c->dir);
	unlink(path);
	int rc = tl_sh("SHOAL_BIN='%s' '%s/deploy/cluster.sh' add-node --dir '%s' >'%s' 2>&1",
	               c->bin, c->root, c->dir, path);
	char *text = tl_read_file(path);
	tl_assert_msg(rc == 0, "cluster.sh add-node: %s", text != NULL ? text : "");
	return text;
}

bool tl_cluster_start_router(tl_cluster *c, int id)
{
	return script(c, "start-router %d", id);
}

int tl_shoal(const tl_cluster *c, char **out, char **err, const char *fmt, ...)
{
	char args[12288];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	char outp[1100], errp[1100];
	snprintf(outp, sizeof(outp), "%s/cli.out", c->dir);
	snprintf(errp, sizeof(errp), "%s/cli.err", c->dir);
	/* A cluster with TLS client ports (cluster.sh up --tls): its CA. */
	char ca[1100] = "";
	if (strncmp(c->endpoint, "tls+", 4) == 0)
		snprintf(ca, sizeof(ca), "--ca-bundle '%s/tls/ca.pem'", c->dir);
	int rc = tl_sh("'%s/shoal' --endpoint '%s' %s %s >'%s' 2>'%s'", c->bin, c->endpoint, ca,
	               args, outp, errp);
	if (out != NULL)
		*out = tl_read_file(outp);
	if (err != NULL)
		*err = tl_read_file(errp);
	return rc;
}

/* Polls (5 s at most) until every thread of process pid is stopped ('T' in
 * /proc/pid/task/<tid>/stat): kill() returns before a multi-threaded
 * process has stopped, and one of its threads may still answer a request
 * sent right after (it_failover saw a SIGSTOPped node answer one). */
static void wait_stopped(long pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%ld/task", pid);
	for (int64_t end = sh_now_ms() + 5000; sh_now_ms() < end; usleep(1000)) {
		DIR *d = opendir(dir);
		if (d == NULL)
			return; /* gone */
		bool all = true;
		struct dirent *e;
		while (all && (e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char path[400], buf[512];
			snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
			FILE *f = fopen(path, "r");
			size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
			if (f != NULL)
				fclose(f);
			buf[n] = '\0';
			const char *p = strrchr(buf, ')'); /* the state follows the name */
			all = p == NULL || (p[1] == ' ' && (p[2] == 'T' || p[2] == 't'));
		}
		closedir(d);
		if (all)
			return;
	}
}

int tl_cluster_signal(const tl_cluster *c, const char *what, int id, int sig)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s-%d.pid", c->dir, what, id);
	char *text = tl_read_file(path);
	long pid = text != NULL ? atol(text) : 0;
	free(text);
	if (pid <= 1) {
		errno = ENOENT;
		return -1;
	}
	int rc = kill((pid_t)pid, sig);
	if (rc == 0 && sig == SIGSTOP)
		wait_stopped(pid);
	return rc;
}

bool tl_cluster_alive(const tl_cluster *c, const char **what, int *id)
{
	static const char *const kinds[2] = {"node", "router"};
	for (int k = 0; k < 2; k++)
		for (int i = 1; i <= (k == 0 ? c->nodes : c->routers); i++)
			if (tl_cluster_signal(c, kinds[k], i, 0) != 0) {
				*what = kinds[k];
				*id = i;
				return false;
			}
	return true;
}

/* How many times needle is in D/<what>-<id>.log. */
static int log_count(const tl_cluster *c, const char *what, int id, const char *needle)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s-%d.log", c->dir, what, id);
	char *text = tl_read_file(path);
	int n = 0;
	for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(text);
	return n;
}

int tl_cluster_log_count(const tl_cluster *c, int id, const char *needle)
{
	return log_count(c, "node", id, needle);
}

int tl_cluster_router_log_count(const tl_cluster *c, int id, const char *needle)
{
	return log_count(c, "router", id, needle);
}

/* Node id's metrics address ("metrics = host:port" of [node.<id>]). */
static bool metrics_addr(const tl_cluster *c, int id, char *out, size_t n)
{
	char path[1200], section[32], line[256];
	snprintf(path, sizeof(path), "%s/cluster.ini", c->dir);
	snprintf(section, sizeof(section), "[node.%d]", id);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	bool in = false, found = false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '[')
			in = strcmp(line, section) == 0;
		else if (in && sscanf(line, "metrics = %255s", line) == 1) {
			snprintf(out, n, "%s", line);
			found = true;
		}
	}
	fclose(f);
	return found;
}

typedef struct metric_sum {
	const char *name;
	int group;
	double sum;
} metric_sum;

static void metric_each(void *arg, const char *name, size_t name_len, const char *labels,
                        double value)
{
	metric_sum *m = arg;
	char g[16];
	if (strlen(m->name) != name_len || strncmp(name, m->name, name_len) != 0)
		return;
	if (m->group >= 0 &&
	    (!tl_metrics_label(labels, "group", g, sizeof(g)) || atoi(g) != m->group))
		return;
	m->sum += value;
}

char *tl_cluster_metrics_text(const tl_cluster *c, int id)
{
	char hp[300];
	return metrics_addr(c, id, hp, sizeof(hp)) ? tl_metrics_get(hp) : NULL;
}

double tl_cluster_metric(const tl_cluster *c, const char *name, int group)
{
	metric_sum m = {name, group, 0};
	for (int id = 1; id <= c->nodes; id++) {
		char *text = tl_cluster_metrics_text(c, id);
		if (text != NULL)
			tl_metrics_each(text, metric_each, &m);
		free(text);
	}
	return m.sum;
}

long long tl_count_pages(struct shoal_client *client, const char *op, const char *inner)
{
	long long total = 0;
	char *start = NULL;
	do {
		char body[4096], *out = NULL;
		snprintf(body, sizeof(body), "{%s%s%s}", inner,
		         start != NULL ? ",\"ExclusiveStartKey\":" : "",
		         start != NULL ? start : "");
		free(start);
		start = NULL;
		shoal_error err;
		int rc = shoal_call_json(client, op, body, &out, &err);
		tl_assert_msg(rc == SHOAL_OK, "%s: %s: %s", op, err.exception, err.message);
		json_t *j = json_loads(out, 0, NULL);
		shoal_free(out);
		tl_assert_msg(j != NULL, "%s: an unreadable answer", op);
		total += json_integer_value(json_object_get(j, "Count"));
		json_t *lek = json_object_get(j, "LastEvaluatedKey");
		if (lek != NULL)
			start = json_dumps(lek, JSON_COMPACT);
		json_decref(j);
	} while (start != NULL);
	return total;
}

uint32_t tl_table_number(struct shoal_client *client, const char *table)
{
	char *out = NULL;
	shoal_error err;
	if (shoal_call_json(client, "ClusterStatus", "{}", &out, &err) != SHOAL_OK)
		return 0;
	json_t *j = json_loads(out, 0, NULL);
	shoal_free(out);
	uint32_t number = 0;
	size_t i, k;
	json_t *g, *t;
	json_array_foreach(json_object_get(j, "Groups"), i, g)
	{
		json_array_foreach(json_object_get(g, "Tables"), k, t)
		{
			const char *name = json_string_value(json_object_get(t, "TableName"));
			if (number == 0 && name != NULL && strcmp(name, table) == 0)
				number =
				    (uint32_t)json_integer_value(json_object_get(t, "TableNumber"));
		}
	}
	json_decref(j);
	return number;
}
