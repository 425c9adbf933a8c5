#!/usr/bin/env bash
# tests/conformance/run.sh BUILD [test_query ...] -- the conformance suite
# (every test_*.py here, or the files named) on one cluster that
# tests/integration/http/run.sh starts and stops; `make test` runs it as
# it_conformance.  See conformance.py.
set -uo pipefail
build=${1:?usage: run.sh BUILD [test_file ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../integration/http/run.sh" "$build" "$here/run.py" "$@"
