#!/usr/bin/env bash
# tests/integration/http/run.sh BUILD [SUITE [ARGS...]] -- the DynamoDB HTTP
# endpoint against DynamoDB's own clients (Debian's python3-boto3 and awscli).
#
# Starts a 3-node cluster with deploy/cluster.sh (binaries from BUILD/bin,
# HTTP API on, credentials on: --credentials auto), runs SUITE (a python
# unittest program, default test_http.py here; tests/conformance/run.sh
# passes its run.py) with ARGS against it, and always stops it by PID
# (cluster.sh down; the extra SigV4 router the suite starts is stopped by the
# suite, and by its pid file here if the suite died).  Ports: the first free
# window of 400 among 7100, 6100, 5100, 4100 (below the range tl_cluster uses,
# 10000-32000, and away from make demo's 8100 and make bench-cluster's 9100).
# SHOAL_TEST_TLS=1: the cluster runs with --tls, so the endpoint is HTTPS
# (the HTTP server's own TLS) and every client verifies it with the
# cluster's CA (AWS_CA_BUNDLE for boto3 and the AWS CLI; sigv4.py's
# connect() for the suite's raw requests).
# Prints a Check-style summary line so tests/run-tests.sh can count it.
# Under a sanitizer build, any sanitizer report in a process log fails it.
set -uo pipefail
build=${1:?usage: run.sh BUILD [SUITE [ARGS...]]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "$build" && pwd)
suite=${2:-$here/test_http.py}
shift $(($# > 1 ? 2 : 1))
py=/usr/bin/python3 # Debian's, with python3-boto3 (not a pyenv shim)

if ! $py -c 'import boto3' 2>/dev/null || [[ ! -x /usr/bin/aws ]]; then
	echo "python3-boto3 or awscli is missing (deploy/install-deps.sh installs them)"
	echo "0%: Checks: 1, Failures: 1, Errors: 0"
	exit 1
fi

port_free() { # port: nothing listens there and we may bind it
	$py -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try: s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError: sys.exit(1)' "$1"
}
# A window is claimed as tl_ports_claim claims ports (tests/lib/testlib.h):
# an flock per 100 ports on /tmp/shoal-test-ports/<port / 100>, so that two
# suites started side by side (it_http_boto3 and it_conformance, which
# tests/run-tests.sh may run at once, or two checkouts' `make test`) never
# pick the same window before either listens.  The descriptors stay open in
# this shell and in what it starts, so the claim lasts as long as the cluster.
claim() { # base
	mkdir -p /tmp/shoal-test-ports && chmod 0777 /tmp/shoal-test-ports 2>/dev/null
	local c fd fds=()
	for ((c = $1 / 100; c < ($1 + 400) / 100; c++)); do
		exec {fd}>>"/tmp/shoal-test-ports/$c" && fds+=("$fd") && flock -n "$fd" && continue
		for fd in "${fds[@]}"; do exec {fd}>&-; done
		return 1
	done
}
base=
for b in 7100 6100 5100 4100; do
	ok=1
	for p in $b $((b + 1)) $((b + 60)) $((b + 70)) $((b + 71)) $((b + 72)) $((b + 101)) $((b + 180)) \
		$((b + 201)) $((b + 280)) $((b + 301)) $((b + 380)); do
		port_free "$p" || { ok=0; break; }
	done
	((ok)) && claim "$b" && { base=$b; break; }
done
if [[ -z $base ]]; then
	echo "no free port window for the HTTP test cluster"
	echo "0%: Checks: 1, Failures: 1, Errors: 0"
	exit 1
fi

# A TTL change may follow the previous one after 1.5 s (DynamoDB: an
# hour); stream records live 30 s (DynamoDB: 24 hours: long enough for the
# slowest reader in the suite, the CLIs), so that
# test_streams.py sees them trimmed by the timer.  The suite reads both
# from the environment.
ttl_interval_ms=1500 stream_retention_s=30
export SHOAL_TTL_CHANGE_INTERVAL_MS=$ttl_interval_ms SHOAL_STREAM_RETENTION_S=$stream_retention_s
dir=$(mktemp -d "${TMPDIR:-/tmp}/shoal-http-it-XXXXXX")
cleanup() {
	if [[ -f $dir/sigv4-router.pid ]]; then
		kill -KILL "$(cat "$dir/sigv4-router.pid")" 2>/dev/null || true
	fi
	SHOAL_BIN=$build/bin "$root/deploy/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
	if [[ ${SHOAL_KEEP_CLUSTER:-0} == 1 ]]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# Credentials on, as a secured cluster runs (cluster.sh makes the key, D/credentials):
# every request of the suite is signed with it -- boto3 and the AWS CLI from
# D/aws-credentials, `shoal` finds it next to D/router.endpoint, the requests
# the suite writes byte by byte are signed by sigv4.py.  SHOAL_TEST_CREDENTIALS=0:
# an open router (any signature, or none), as tl_cluster's clusters then.
creds=(--credentials auto)
[[ ${SHOAL_TEST_CREDENTIALS:-1} == 0 ]] && creds=()
tls=()
[[ ${SHOAL_TEST_TLS:-0} == 1 ]] && tls=(--tls)
if ! SHOAL_BIN=$build/bin "$root/deploy/cluster.sh" up --dir "$dir" --base-port "$base" \
	--http-port $((base + 60)) --ttl-scan-ms 500 \
	--ttl-change-interval-ms $ttl_interval_ms --stream-retention-s $stream_retention_s \
	"${creds[@]}" "${tls[@]}"; then
	echo "the cluster did not start"
	echo "0%: Checks: 1, Failures: 1, Errors: 0"
	exit 1
fi

unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
if ((${#creds[@]})); then
	export AWS_SHARED_CREDENTIALS_FILE=$dir/aws-credentials
else
	export AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y AWS_SHARED_CREDENTIALS_FILE=/dev/null
fi
export AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null
export AWS_PAGER= AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS=3
export SHOAL_BIN=$build/bin SHOAL_ROOT=$root SHOAL_CLUSTER_DIR=$dir SHOAL_HTTP_BASE=$base
export SHOAL_HTTP_ENDPOINT=$(cat "$dir/http.endpoint")
[[ ${SHOAL_TEST_TLS:-0} == 1 ]] && export AWS_CA_BUNDLE=$dir/tls/ca.pem
out=$dir/suite.out
# SHOAL_HTTP_TESTS: only these unittest names (e.g. "TimeToLive Streams").
# shellcheck disable=SC2086
$py "$suite" "$@" ${SHOAL_HTTP_TESTS:-} 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}

# Counts from unittest's own summary ("Ran N tests", "FAILED (failures=F,
# errors=E, skipped=S)" or "OK (skipped=S)"; "expected failures=X" are not
# failures, and an unexpected success fails the run through its exit code).
n=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$out" | tail -n 1)
f=$(sed -n 's/^FAILED (failures=\([0-9]*\).*/\1/p' "$out" | tail -n 1)
e=$(sed -n 's/^FAILED (.*\berrors=\([0-9]*\).*/\1/p' "$out" | tail -n 1)
n=${n:-1} f=${f:-0} e=${e:-0}
((rc != 0 && f + e == 0)) && e=1

# Stop everything first, so that LeakSanitizer's reports at exit are in the
# logs too, then look for sanitizer reports.
trap - EXIT
if [[ -f $dir/sigv4-router.pid ]]; then
	kill -KILL "$(cat "$dir/sigv4-router.pid")" 2>/dev/null || true
fi
SHOAL_BIN=$build/bin "$root/deploy/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
for log in "$dir"/*.log; do
	[[ -f $log ]] || continue
	if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log"; then
		echo "sanitizer report in $log:"
		grep -E -A30 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log" | head -80
		e=$((e + 1))
	fi
done
if [[ ${SHOAL_KEEP_CLUSTER:-0} == 1 ]]; then echo "kept $dir"; else rm -rf "$dir"; fi
pct=$(((n - f - e) * 100 / (n > 0 ? n : 1)))
((pct < 0)) && pct=0
echo "$pct%: Checks: $n, Failures: $f, Errors: $e"
((f + e == 0))
