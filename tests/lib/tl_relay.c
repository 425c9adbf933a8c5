/* tl_relay.c -- a TCP relay that can freeze its connections (tl_relay.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "tests/lib/tl_relay.h"

#define RELAY_MAX 16

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	a.sin_port = htons((uint16_t)port);
	return a;
}

static void *relay_main(void *arg)
{
	tl_relay *r = arg;
	int fd[RELAY_MAX][2], small = 8192, n = 0;
	bool frozen[RELAY_MAX];
	while (!atomic_load(&r->stop)) {
		bool freeze = atomic_exchange(&r->freeze, false); /* the ones there now */
		struct pollfd p[1 + 2 * RELAY_MAX];
		int np = 0;
		p[np++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
		for (int i = 0; i < n; i++) {
			frozen[i] = frozen[i] || freeze;
			for (int s = 0; s < 2; s++)
				p[np++] = (struct pollfd){.fd = fd[i][s],
				                          .events = frozen[i] ? 0 : POLLIN};
		}
		if (poll(p, (nfds_t)np, 20) <= 0)
			continue;
		if ((p[0].revents & POLLIN) && n < RELAY_MAX) {
			int c = accept(r->lfd, NULL, NULL), u = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in b = loopback(r->to);
			if (c >= 0 && u >= 0 && connect(u, (struct sockaddr *)&b, sizeof(b)) == 0) {
				setsockopt(u, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
				fd[n][0] = c, fd[n][1] = u, frozen[n] = false;
				n++;
				atomic_fetch_add(&r->conns, 1);
			} else {
				if (c >= 0)
					close(c);
				if (u >= 0)
					close(u);
			}
		}
		for (int i = 0; i < n; i++)
			for (int s = 0; s < 2; s++) {
				if (frozen[i] ||
				    !(p[1 + 2 * i + s].revents & (POLLIN | POLLHUP | POLLERR)))
					continue;
				char buf[16384];
				ssize_t got = read(fd[i][s], buf, sizeof(buf));
				if (got <= 0) { /* one end went: both go (the pair stays, idle) */
					shutdown(fd[i][!s], SHUT_RDWR);
					frozen[i] = true;
					continue;
				}
				for (ssize_t off = 0; off < got;) {
					ssize_t w =
					    write(fd[i][!s], buf + off, (size_t)(got - off));
					if (w <= 0)
						break;
					off += w;
				}
			}
	}
	for (int i = 0; i < n; i++)
		close(fd[i][0]), close(fd[i][1]);
	close(r->lfd);
	return NULL;
}

void tl_relay_start(tl_relay *r, int from, int to)
{
	r->from = from;
	r->to = to;
	atomic_init(&r->freeze, false);
	atomic_init(&r->stop, false);
	atomic_init(&r->conns, 0);
	int one = 1, small = 8192;
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(from);
	setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* (Inherited by accepted connections; set before listen, so that the
	 * window offered is small from the start.) */
	setsockopt(r->lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	tl_assert_msg(r->lfd >= 0 && bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	                  listen(r->lfd, 8) == 0,
	              "relay: cannot listen on port %d", from);
	tl_assert_msg(pthread_create(&r->th, NULL, relay_main, r) == 0, "relay: no thread");
}

void tl_relay_freeze(tl_relay *r)
{
	atomic_store(&r->freeze, true);
}

void tl_relay_stop(tl_relay *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->th, NULL);
}
