/*
 * tl_relay.h -- a TCP relay that can freeze its connections: a peer behind a
 * cut cable, as deploy/netns.sh's silent drop makes one, without network
 * namespaces.  Connections to 127.0.0.1:from are relayed to 127.0.0.1:to,
 * both ways, by one thread; tl_relay_freeze leaves the connections it has
 * open and never reads or writes them again (nothing moves, nothing is
 * refused: the sender's kernel keeps the data and retries), while new
 * connections are relayed.  Its receive buffers are small, so a frozen
 * connection has no room for a sender's next large message.
 */
#ifndef SHOAL_TL_RELAY_H
#define SHOAL_TL_RELAY_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct tl_relay {
	int from, to;       /* ports */
	atomic_bool freeze; /* (set by tl_relay_freeze) */
	atomic_bool stop;
	atomic_int conns; /* connections relayed so far */
	int lfd;
	pthread_t th;
} tl_relay;

/* Listens on from (failing the test if it cannot) and starts the thread. */
void tl_relay_start(tl_relay *r, int from, int to);
/* The connections relayed now stop carrying bytes, for good. */
void tl_relay_freeze(tl_relay *r);
/* Stops the thread and closes every connection. */
void tl_relay_stop(tl_relay *r);

#endif
