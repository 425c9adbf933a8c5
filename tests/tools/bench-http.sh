#!/usr/bin/env bash
# bench-http.sh BUILD -- `make bench-http`: the DynamoDB HTTP endpoint next to
# the native protocol, on the same cluster in the same run.
#
# Starts a fresh local cluster (deploy/cluster.sh: 3 nodes, 1 router, 4
# groups, replication 3, HTTP API on) in BUILD/bench-http on a free base port,
# then, alternating transports so that drift hits both alike:
#   PutItem, 64 in flight:   shoal_bench (native)  vs  http_bench (HTTP)
#   GetItem, 64 in flight:   same, over the keys shoal_bench loaded
#   PutItem, GetItem with one request in flight (latency)
# and prints ops/s, p50, p99 and the ratio HTTP / native.  Both clients are
# single processes keeping C requests in flight; both share the 2 cores with
# the cluster, as in make bench-cluster.
#
# Environment: BENCH_SECS (default 10), BENCH_WARMUP (2), BENCH_KEYS (100000),
# BENCH_CONC (64), BENCH_BASE_PORT (first free of 4500, 5500, 6500, 9500), BENCH_KEEP=1 (leave the cluster).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
root=$PWD
export SHOAL_BIN=$root/$build/bin
dir=${BENCH_DIR:-$root/$build/bench-http}
# The first window of 400 ports with nothing listening (other clusters may
# run on the machine), unless BENCH_BASE_PORT names one.
window_free() { ! ss -ltnH 2>/dev/null | awk -v lo="$1" '{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p < lo + 400) f = 1 } END { exit !f }'; }
base=${BENCH_BASE_PORT:-}
if [[ -z $base ]]; then
	for b in 4500 5500 6500 9500; do window_free "$b" && { base=$b; break; }; done
	[[ -n $base ]] || { echo "bench-http: no free port window" >&2; exit 1; }
fi
secs=${BENCH_SECS:-10}
warm=${BENCH_WARMUP:-2}
keys=${BENCH_KEYS:-100000}
conc=${BENCH_CONC:-64}
for b in shoal_bench http_bench; do
	[[ -x $SHOAL_BIN/$b ]] || { echo "bench-http: $SHOAL_BIN/$b not found" >&2; exit 1; }
done

cleanup() { [[ ${BENCH_KEEP:-0} == 1 ]] || deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
deploy/cluster.sh up --dir "$dir" --base-port "$base" --http-port $((base + 60))
ep=file://$dir/router.endpoint
url=$(cat "$dir/http.endpoint")

declare -A R
run() { # name transport workload conc
	local name=$1 tr=$2 wl=$3 c=$4 out=$dir/$1.out
	if [[ $tr == native ]]; then
		"$SHOAL_BIN/shoal_bench" --endpoint "$ep" --workload "$wl" --concurrency "$c" \
			--duration "$secs" --warmup "$warm" --keys "$keys" --load no >"$out" 2>&1
	else
		"$SHOAL_BIN/http_bench" --url "$url" --workload "$wl" --concurrency "$c" \
			--duration "$secs" --warmup "$warm" --keys "$keys" >"$out" 2>&1
	fi
	local line
	line=$(grep '^RESULT' "$out" | tail -n 1)
	[[ -n $line ]] || { echo "bench-http: $name produced no RESULT:"; cat "$out"; exit 1; }
	for k in ops_s p50_us p99_us errors; do
		R[$name.$k]=$(sed -n "s/.* $k=\([0-9.]*\).*/\1/p" <<<"$line")
	done
	echo "$name: ${R[$name.ops_s]} ops/s, p50 ${R[$name.p50_us]} us, p99 ${R[$name.p99_us]} us, errors ${R[$name.errors]}"
}

echo "loading $keys keys with shoal_bench (BatchWriteItem)..."
"$SHOAL_BIN/shoal_bench" --endpoint "$ep" --workload get --keys "$keys" --load-only >"$dir/load.out" 2>&1 ||
	{ cat "$dir/load.out"; exit 1; }
run put-native native put "$conc"
run put-http http put "$conc"
run get-native native get "$conc"
run get-http http get "$conc"
run put1-native native put 1
run put1-http http put 1
run get1-native native get 1
run get1-http http get 1

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
echo
printf '| %-24s | %10s | %10s | %12s | %12s | %8s | %8s |\n' operation native_ops/s http_ops/s "native p50/p99" "http p50/p99" "ops ratio" "p50 ratio"
printf '|%s|\n' "--------------------------|------------|------------|--------------|--------------|----------|----------"
row() { # label key
	local n=$2-native h=$2-http
	printf '| %-24s | %10s | %10s | %5.2f/%5.2f ms | %5.2f/%5.2f ms | %8s | %8s |\n' "$1" \
		"${R[$n.ops_s]}" "${R[$h.ops_s]}" \
		"$(awk -v x="${R[$n.p50_us]}" 'BEGIN{print x/1000}')" "$(awk -v x="${R[$n.p99_us]}" 'BEGIN{print x/1000}')" \
		"$(awk -v x="${R[$h.p50_us]}" 'BEGIN{print x/1000}')" "$(awk -v x="${R[$h.p99_us]}" 'BEGIN{print x/1000}')" \
		"$(ratio "${R[$h.ops_s]}" "${R[$n.ops_s]}")" "$(ratio "${R[$h.p50_us]}" "${R[$n.p50_us]}")"
}
row "PutItem, $conc in flight" put
row "GetItem, $conc in flight" get
row "PutItem, 1 in flight" put1
row "GetItem, 1 in flight" get1
echo "(ops ratio = HTTP / native throughput; p50 ratio = HTTP / native median latency)"
