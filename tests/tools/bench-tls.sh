#!/usr/bin/env bash
# bench-tls.sh ROUNDS CONFIG... -- what TLS costs, configurations interleaved.
#
# The README's "TLS cost" table: each CONFIG is LABEL=BINDIR:MODE, MODE one of
#   plain   cluster.sh up --plain (no TLS anywhere)
#   tls     cluster.sh up (mutual TLS between the processes, the default)
#   ctls    cluster.sh up --tls (and on the router's client port)
#   ctlse   the same, with shoal_bench's nng TLS on Shoal's engine too
#           (SHOAL_BENCH_TLS_ENGINE=shoal) instead of nng's own
# with the programs of BINDIR (shoal-node, shoal-router, shoal, shoal_bench).
# Each round starts a fresh 3-node, 1-router, 4-group cluster per
# configuration, in the order given, and runs shoal_bench: PutItem then
# GetItem (eventually consistent, over BENCH_KEYS loaded keys), 64 in flight,
# BENCH_SECS measured seconds each after 2 of warmup, partitions unthrottled.
# Rounds alternate configurations so that a noisy neighbour hits all alike;
# the table gives every round's ops/s and the mean, and each mean's ratio to
# the first configuration's.  Figures only (exit 0 unless a run fails).
#
#   tests/tools/bench-tls.sh 3 plain=build/bin:plain tls=build/bin:tls
#
# Environment: BENCH_SECS (default 8), BENCH_KEYS (default 20000),
# BENCH_BASE_PORT (default 9300), BENCH_DIR (default /tmp/shoal-bench-tls).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:?usage: bench-tls.sh ROUNDS LABEL=BINDIR:MODE...}
shift
(($# > 0)) || { echo "bench-tls: no configuration" >&2; exit 1; }
secs=${BENCH_SECS:-8}
keys=${BENCH_KEYS:-20000}
base=${BENCH_BASE_PORT:-9300}
dir=${BENCH_DIR:-/tmp/shoal-bench-tls}

cur=
cleanup() { [[ -n $cur ]] && SHOAL_BIN=$cur deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

declare -A put get
labels=()
for c in "$@"; do labels+=("${c%%=*}"); done

ops() { awk '/^RESULT / { for (i = 2; i <= NF; i++) if ($i ~ /^ops_s=/) { sub(/ops_s=/, "", $i); v = $i } } END { printf "%d", v }' "$1"; }

for ((r = 1; r <= rounds; r++)); do
	for c in "$@"; do
		label=${c%%=*} rest=${c#*=}
		bin=$(cd "${rest%%:*}" && pwd) mode=${rest##*:}
		case $mode in
		plain) opt=(--plain) ;;
		tls) opt=() ;;
		ctls | ctlse) opt=(--tls) ;;
		*) echo "bench-tls: mode $mode: plain, tls, ctls or ctlse" >&2; exit 1 ;;
		esac
		engine=
		[[ $mode == ctlse ]] && engine=shoal
		cur=$bin
		SHOAL_BIN=$bin deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
		rm -rf "$dir"
		SHOAL_BIN=$bin deploy/cluster.sh up --dir "$dir" --base-port "$base" "${opt[@]}" \
			--partition-rcu 1000000000 --partition-wcu 1000000000 >/dev/null
		ep=file://$dir/router.endpoint
		SHOAL_BENCH_TLS_ENGINE=$engine "$bin/shoal_bench" --endpoint "$ep" --workload put \
			--concurrency 64 --duration "$secs" --warmup 2 --keys "$keys" >"$dir.put.out"
		"$bin/shoal_bench" --endpoint "$ep" --workload get --load-only --keys "$keys" >/dev/null
		SHOAL_BENCH_TLS_ENGINE=$engine "$bin/shoal_bench" --endpoint "$ep" --workload get \
			--load no --concurrency 64 --duration "$secs" --warmup 2 --keys "$keys" >"$dir.get.out"
		p=$(ops "$dir.put.out") g=$(ops "$dir.get.out")
		put[$label]+="$p " get[$label]+="$g "
		echo "round $r $label: PutItem $p ops/s, GetItem $g ops/s"
		SHOAL_BIN=$bin deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
		cur=
	done
done

echo
printf '%-24s %-40s %-40s\n' configuration "PutItem ops/s (rounds = mean, ratio)" "GetItem ops/s (rounds = mean, ratio)"
p0= g0=
for l in "${labels[@]}"; do
	line() { awk -v xs="$1" -v base="$2" 'BEGIN { n = split(xs, x, " "); s = 0; out = ""
		for (i = 1; i <= n; i++) { s += x[i]; out = out (i > 1 ? " / " : "") x[i] }
		m = s / n; printf "%s = %d", out, m; if (base > 0) printf " = %.2f", m / base; print "" }'; }
	mean() { awk -v xs="$1" 'BEGIN { n = split(xs, x, " "); s = 0; for (i = 1; i <= n; i++) s += x[i]; print s / n }'; }
	pl=$(line "${put[$l]}" "${p0:-0}") gl=$(line "${get[$l]}" "${g0:-0}")
	printf '%-24s %-40s %-40s\n' "$l" "$pl" "$gl"
	[[ -z $p0 ]] && p0=$(mean "${put[$l]}") g0=$(mean "${get[$l]}")
done
