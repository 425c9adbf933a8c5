#!/usr/bin/python3
"""https-flood.py PORT CA PROCS [handshakes] -- what a flood of TLS handshakes
does to the requests of an established HTTPS connection, or (`handshakes`)
to another address's new connections (README, TLS).

PROCS processes open, handshake and close HTTPS connections to
127.0.0.1:PORT (verified with CA) as fast as they can for 8 s; meanwhile one
keep-alive connection sends 300 `GET /` (the health answer) and their latency
is printed (p50, p99, max), with the number of handshakes done.  With
`handshakes`, the measured client is another address (127.0.0.2) opening
100 new connections one after the other, each timed from connect to the end
of its handshake.  PROCS 0: the same without the flood.  Against a cluster
of `deploy/cluster.sh up --tls --http-port PORT` (CA: D/tls/ca.pem).  A
figure, never asserted.
"""
import http.client
import multiprocessing
import socket
import ssl
import sys
import time

port, ca, procs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)


def hammer(stop_at):
    n = 0
    while time.time() < stop_at:
        try:
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                server_hostname="127.0.0.1")
            s.close()
            n += 1
        except OSError:
            pass
    return n


def latencies(n):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    ts = []
    for _ in range(n):
        t = time.time()
        c.request("GET", "/")
        c.getresponse().read()
        ts.append((time.time() - t) * 1000)
    ts.sort()
    return ts


def handshakes(n):
    ts = []
    for _ in range(n):
        t = time.time()
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port),
                                                     source_address=("127.0.0.2", 0)),
                            server_hostname="127.0.0.1")
        ts.append((time.time() - t) * 1000)
        s.close()
    ts.sort()
    return ts


if __name__ == "__main__":
    new_conns = len(sys.argv) > 4 and sys.argv[4] == "handshakes"
    stop = time.time() + 8
    if procs:
        pool = multiprocessing.Pool(procs)
        done = pool.map_async(hammer, [stop] * procs)
    time.sleep(1)
    ts = handshakes(100) if new_conns else latencies(300)
    what = ("a new connection from another address (handshake)" if new_conns else
            "GET / on an open connection")
    print("%d handshaking processes: %s: p50 %.2f ms, p99 %.2f ms, "
          "max %.2f ms" % (procs, what, ts[len(ts) // 2], ts[int(len(ts) * .99)], ts[-1]))
    if procs:
        print("handshakes done: %d" % sum(done.get()))
