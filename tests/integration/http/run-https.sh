#!/usr/bin/env bash
# tests/integration/http/run-https.sh BUILD -- run.sh over HTTPS
# (SHOAL_TEST_TLS=1: cluster.sh up --tls, every client verifying the
# cluster's CA), for the suites that exercise the HTTP server itself
# (Endpoint: raw and malformed requests, pipelining, chunked bodies, slow
# and silent connections, limits) and a round trip of every API family
# (Seed002).  `SHOAL_TEST_TLS=1 run.sh BUILD` runs the whole suite over
# HTTPS (all of it passed on 2026-11-26).
here=$(cd "$(dirname "$0")" && pwd)
SHOAL_TEST_TLS=1 SHOAL_HTTP_TESTS=${SHOAL_HTTP_TESTS:-Endpoint Seed002} exec "$here/run.sh" "$@"
