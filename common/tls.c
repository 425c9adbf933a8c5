/*
 * tls.c -- nng URLs, listeners and dials with TLS, and streams pumped into
 * descriptors (contract: tls.h; a member's configurations: tls_load.c; the
 * engine: tls_engine.c).
 */
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"

#define PUMP_BUF     (64u * 1024)
#define THREAD_STACK (256u * 1024)
#define PUMP_SEND_MS 10000

bool sh_tls_is_tls(const char *url)
{
	return strncmp(url, "tls+", 4) == 0;
}

bool sh_tls_url(bool tls, const char *url, char *out, size_t cap)
{
	const char *prefix = tls && strncmp(url, "tcp", 3) == 0 ? "tls+" : "";
	return (size_t)snprintf(out, cap, "%s%s", prefix, url) < cap;
}

int sh_tls_listen(nng_socket sock, const char *url, nng_tls_config *cfg, nng_listener *out)
{
	nng_listener l;
	int rv = nng_listener_create(&l, sock, url);
	if (rv != 0)
		return rv;
	if (sh_tls_is_tls(url))
		rv = cfg == NULL ? NNG_EINVAL : nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
	if (rv == 0)
		rv = nng_listener_start(l, 0);
	if (rv != 0) {
		nng_listener_close(l);
		return rv;
	}
	if (out != NULL)
		*out = l;
	return 0;
}

int sh_tls_dial(nng_socket sock, const char *url, nng_tls_config *cfg, int flags)
{
	nng_dialer d;
	int rv = nng_dialer_create(&d, sock, url);
	if (rv != 0)
		return rv;
	if (sh_tls_is_tls(url))
		rv = cfg == NULL ? NNG_EINVAL : nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
	if (rv == 0)
		rv = nng_dialer_start(d, flags);
	if (rv != 0)
		nng_dialer_close(d);
	return rv;
}

/* ------------------------------------------------------------------------ */
/* Blocking steps on a stream                                                */
/* ------------------------------------------------------------------------ */

static int stream_io(nng_stream *s, nng_aio *aio, bool send, void *buf, size_t len, size_t *done)
{
	nng_iov iov = {.iov_buf = buf, .iov_len = len};
	nng_aio_set_iov(aio, 1, &iov);
	if (send)
		nng_stream_send(s, aio);
	else
		nng_stream_recv(s, aio);
	nng_aio_wait(aio);
	*done = nng_aio_count(aio);
	return nng_aio_result(aio);
}

/* Sends or receives exactly len bytes on s with aio (which may carry a
 * timeout); 0 or an nng error (NNG_ECLOSED for a stream that ended). */
static int stream_all(nng_stream *s, nng_aio *aio, bool send, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len > 0) {
		size_t n = 0;
		int rv = stream_io(s, aio, send, p, len, &n);
		if (rv != 0)
			return rv;
		if (n == 0)
			return NNG_ECLOSED;
		p += n, len -= n;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Pumps                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct pump {
	nng_stream *s;
	int fd; /* our end of the socketpair (blocking) */
	atomic_int refs;
} pump;

static void pump_release(pump *p)
{
	if (atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	close(p->fd);
	nng_stream_free(p->s);
	sh_free(p);
}

/* raft -> peer */
static void *pump_up(void *arg)
{
	pump *p = arg;
	uint8_t *buf = sh_malloc(PUMP_BUF);
	nng_aio *aio = NULL;
	if (buf != NULL && nng_aio_alloc(&aio, NULL, NULL) == 0) {
		/* A peer that takes nothing for this long (a partition, a
		 * hung process) ends the connection: else this thread would
		 * wait in the send for TCP to give up (many minutes), deaf to
		 * our side closing. */
		nng_aio_set_timeout(aio, PUMP_SEND_MS);
		for (;;) {
			ssize_t n = read(p->fd, buf, PUMP_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || stream_all(p->s, aio, true, buf, (size_t)n) != 0)
				break;
		}
	}
	/* Fails the down thread's receive; raft's end sees EOF. */
	nng_stream_close(p->s);
	shutdown(p->fd, SHUT_RDWR);
	if (aio != NULL)
		nng_aio_free(aio);
	sh_free(buf);
	pump_release(p);
	return NULL;
}

/* peer -> raft */
static void *pump_down(void *arg)
{
	pump *p = arg;
	uint8_t *buf = sh_malloc(PUMP_BUF);
	nng_aio *aio = NULL;
	if (buf != NULL && nng_aio_alloc(&aio, NULL, NULL) == 0) {
		for (;;) {
			size_t n = 0;
			if (stream_io(p->s, aio, false, buf, PUMP_BUF, &n) != 0 || n == 0)
				break;
			const uint8_t *q = buf;
			while (n > 0) {
				/* (send: no SIGPIPE when our side closed first) */
				ssize_t w = send(p->fd, q, n, MSG_NOSIGNAL);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					goto out;
				q += w, n -= (size_t)w;
			}
		}
	}
out:
	/* raft's end reads EOF; the up thread's read returns 0. */
	shutdown(p->fd, SHUT_RDWR);
	nng_stream_close(p->s);
	if (aio != NULL)
		nng_aio_free(aio);
	sh_free(buf);
	pump_release(p);
	return NULL;
}

/* pthread_create with a small stack (THREAD_STACK), detached or joinable. */
static int thread_start(pthread_t *th, void *(*fn)(void *), void *arg, bool detached)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rv = pthread_create(th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rv;
}

/* Starts pumping s; returns raft's end of the socketpair, or -1 (s is then
 * closed and freed). */
int sh_tls_pump(nng_stream *s)
{
	int fds[2];
	pump *p = sh_calloc(1, sizeof(*p));
	if (p == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
		sh_free(p);
		nng_stream_close(s);
		nng_stream_free(s);
		return -1;
	}
	p->s = s;
	p->fd = fds[1];
	atomic_init(&p->refs, 2);
	pthread_t th;
	if (thread_start(&th, pump_up, p, true) != 0) {
		atomic_store(&p->refs, 1);
		pump_release(p);
		close(fds[0]);
		return -1;
	}
	if (thread_start(&th, pump_down, p, true) != 0) {
		/* The up thread ends when raft's end closes. */
		pump_release(p);
		close(fds[0]);
		return -1;
	}
	return fds[0];
}
