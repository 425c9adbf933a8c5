#!/usr/bin/env bash
# bench-http.sh BUILD -- `make bench-http`: the DynamoDB HTTP endpoint next to
# the native protocol, on the same cluster in the same run.
#
# Starts a fresh local cluster (deploy/cluster.sh: 3 nodes, 1 router, 4
# groups, replication 3, HTTP API on) in BUILD/bench-http on a free base port,
# loads the keys with shoal_bench (BatchWriteItem), then, alternating
# transports so that drift hits both alike:
#   PutItem, 64 in flight:   shoal_bench (native)  vs  wrk (HTTP)
#   GetItem, 64 in flight:   same, over the keys loaded
#   PutItem, GetItem with one request in flight (latency)
# Native: shoal_bench (libshoal: protobuf over nng, pipelined).  HTTP: Debian's
# wrk with tests/tools/bench-http.lua (keep-alive HTTP/1.1, one request in
# flight per connection, -t2 -c64; -t1 -c1 for one in flight).  Both are
# efficient C clients, so the ratio is the servers'; nng's HTTP client
# (http_bench) spent ~22 us of CPU per request on these 2 cores, more than
# the router it measured.  Each run is a warm-up, then the measured run, for
# which it prints ops/s, p50/p99 and the CPU the router, the nodes and the
# client spent per request, and how busy the machine was (in brackets:
# processes other than these).  ops/s and CPU are taken over a window that
# starts BENCH_LEAD seconds into the client's run and lasts BENCH_SECS (the
# router's request counter and /proc), so that they are the cost of a request
# on open connections: the client's first moments are its 64 connections
# and, over TLS, their handshakes (64 of them are a few tenths of a second of
# the router's CPU, which a whole-run figure spreads over the requests; the
# whole run's ops/s, as the client counts them, is printed beside).
# p50/p99 are the client's, over its whole run.  Every client and
# cluster process shares the same cores, as in make bench-cluster.
#
# Before/after in one run: BENCH_ROUTER_BEFORE=/path/to/an/older/shoal-router
# runs everything with that router as well (router 1 restarted with it; same
# nodes, same keys), the two routers alternating per workload.
#
# Environment: BENCH_SECS (default 10), BENCH_WARMUP (2), BENCH_LEAD (2), BENCH_KEYS (100000),
# BENCH_CONC (64), BENCH_BASE_PORT (first free of 4500, 5500, 6500, 9500),
# BENCH_ROUNDS (1: how many times the whole sequence runs; a table row per
# round), BENCH_ROUTER_BEFORE, BENCH_HTTP_BENCH=1 (also http_bench, nng's HTTP
# client, at BENCH_CONC), BENCH_KEEP=1 (leave the cluster running),
# BENCH_TLS=1 (the cluster up with --tls: HTTPS, and TLS on the native port;
# wrk does not verify the certificate), BENCH_TLS=both (what TLS on the
# client ports costs, in one run on one cluster: up with --tls, router 1
# restarted with plain client ports (cluster.sh start-router --client-plain)
# and with TLS ones, alternating per workload like BENCH_ROUTER_BEFORE's
# routers; a last table gives TLS / plain for each transport: ops/s, and the
# CPU the router and nodes spent per request, which is the ratio a client on
# another machine would see -- wrk's own TLS, OpenSSL's, costs it ~25 us per
# request more on these shared cores).  Traffic between the processes is
# mutually authenticated TLS in every mode (cluster.sh's default).
# BENCH_PIN=1: the cluster's processes on CPU 0, the clients on CPU 1
# (taskset), so that a client's own costs -- wrk's TLS above all -- take
# nothing from the servers: the cluster's throughput on one core with its
# clients elsewhere, as in a deployment (every mode; the figures then are
# one core's).  Needs wrk: installed here with deploy/install-deps.sh
# --bench when missing.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
root=$PWD
[[ $build == /* ]] || build=$root/$build
export SHOAL_BIN=$build/bin
dir=${BENCH_DIR:-$build/bench-http}
lua=$root/tests/tools/bench-http.lua
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
lead=${BENCH_LEAD:-2}
keys=${BENCH_KEYS:-100000}
conc=${BENCH_CONC:-64}
before=${BENCH_ROUTER_BEFORE:-}
rounds=${BENCH_ROUNDS:-1}
hz=$(getconf CLK_TCK)
for b in shoal_bench http_bench shoal-router; do
	[[ -x $SHOAL_BIN/$b ]] || { echo "bench-http: $SHOAL_BIN/$b not found" >&2; exit 1; }
done
[[ -z $before || -x $before ]] || { echo "bench-http: BENCH_ROUTER_BEFORE=$before is not executable" >&2; exit 1; }
tls_mode=${BENCH_TLS:-0}
[[ $tls_mode == 0 || $tls_mode == 1 || $tls_mode == both ]] ||
	{ echo "bench-http: BENCH_TLS must be 0, 1 or both" >&2; exit 1; }
pin=${BENCH_PIN:-0}
[[ $pin == 0 || $pin == 1 ]] || { echo "bench-http: BENCH_PIN must be 0 or 1" >&2; exit 1; }
srv=() cli=()
if [[ $pin == 1 ]]; then
	(($(nproc) >= 2)) || { echo "bench-http: BENCH_PIN=1 needs 2 CPUs" >&2; exit 1; }
	srv=(taskset -c 0) cli=(taskset -c 1)
fi
[[ $tls_mode != both || -z $before ]] ||
	{ echo "bench-http: BENCH_TLS=both and BENCH_ROUTER_BEFORE compare different things: one at a time" >&2; exit 1; }
command -v wrk >/dev/null || deploy/install-deps.sh --bench
command -v wrk >/dev/null || { echo "bench-http: wrk not found (deploy/install-deps.sh --bench)" >&2; exit 1; }

cleanup() { [[ ${BENCH_KEEP:-0} == 1 ]] || deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
# Raw behaviour: partitions unthrottled (make hot measures throttling).
tls=()
[[ $tls_mode != 0 ]] && tls=(--tls)
"${srv[@]}" deploy/cluster.sh up --dir "$dir" --base-port "$base" --http-port $((base + 60)) "${tls[@]}" \
	--partition-rcu 1000000000 --partition-wcu 1000000000
declare -A EP URL RARGS
EP[after]=file://$dir/router.endpoint URL[after]=$(cat "$dir/http.endpoint")

# Router binaries: "after" is BUILD's; "before" runs from a directory of
# links to BUILD's programs with its own shoal-router.
declare -A bindir=([after]=$SHOAL_BIN)
variants=(after)
current=after
if [[ -n $before ]]; then
	bindir[before]=$dir/bin-before
	mkdir -p "$dir/bin-before"
	for f in "$SHOAL_BIN"/*; do ln -sf "$f" "$dir/bin-before/"; done
	rm -f "$dir/bin-before/shoal-router"
	cp "$before" "$dir/bin-before/shoal-router"
	EP[before]=${EP[after]} URL[before]=${URL[after]}
	variants=(before after)
elif [[ $tls_mode == both ]]; then
	# The same programs; client ports plain, then TLS (as `up --tls` left them).
	bindir=([plain]=$SHOAL_BIN [tls]=$SHOAL_BIN)
	EP[tls]=${EP[after]} URL[tls]=${URL[after]}
	EP[plain]=tcp://127.0.0.1:$base URL[plain]=http://127.0.0.1:$((base + 60))
	RARGS[plain]=--client-plain
	variants=(plain tls)
	current=tls
fi
use_router() { # variant: restart router 1 with its binary, wait until both ports serve
	[[ $current == "$1" ]] && return 0
	SHOAL_BIN=${bindir[$1]} deploy/cluster.sh stop-router 1 --dir "$dir" >/dev/null
	SHOAL_BIN=${bindir[$1]} "${srv[@]}" deploy/cluster.sh start-router 1 --dir "$dir" ${RARGS[$1]:-} >/dev/null
	local deadline=$((SECONDS + 30))
	until curl -s -k -o /dev/null "${URL[$1]}/" && "$SHOAL_BIN/shoal" --endpoint "${EP[$1]}" list-tables >/dev/null 2>&1; do
		((SECONDS < deadline)) || { echo "bench-http: router ($1) did not serve within 30 s" >&2; exit 1; }
		sleep 0.1
	done
	current=$1
}

# CPU ticks (user + system) of processes; busy and total ticks of the machine.
ticks() { local p s=0; for p in "$@"; do s=$((s + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$s"; }
machine() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
node_pids() { cat "$dir"/node-*.pid; }
# Requests router 1 has answered (its metrics port: cluster.sh's router port + 1).
requests() { curl -s "http://127.0.0.1:$((base + 1))/metrics" | awk '/^shoal_router_requests_total/ { s += $2 } END { printf "%d\n", s }'; }

declare -A R
client() { # transport workload conc duration out (the current router's ports); CLIENT_EXEC=exec: become the client
	local tr=$1 wl=$2 c=$3 d=$4 out=$5 ep=${EP[$current]} url=${URL[$current]} x=${CLIENT_EXEC:-}
	case $tr in
	native)
		$x "${cli[@]}" "$SHOAL_BIN/shoal_bench" --endpoint "$ep" --workload "$wl" --concurrency "$c" \
			--duration "$d" --warmup 0 --keys "$keys" --load no >"$out" 2>&1 ;;
	http)
		local t=2
		((c < t)) && t=$c
		$x "${cli[@]}" wrk -t"$t" -c"$c" -d"${d}s" --latency -s "$lua" "$url" -- "$wl" "$keys" >"$out" 2>&1 ;;
	http_bench)
		$x "${cli[@]}" "$SHOAL_BIN/http_bench" --url "$url" --workload "$wl" --concurrency "$c" \
			--duration "$d" --warmup 0 --keys "$keys" >"$out" 2>&1 ;;
	esac
}
run() { # round variant transport workload conc
	local r=$1
	shift
	local v=$1 tr=$2 wl=$3 c=$4 name=$r-$1-$2-$3-$4
	local out=$dir/$name.out
	use_router "$v"
	client "$tr" "$wl" "$c" "$warm" "$dir/$name.warm.out" || true
	local rp np cp r0 n0 c0 m0 t0 q0 r1 n1 c1 m1 t1 q1
	rp=$(cat "$dir/router-1.pid")
	read -ra np <<<"$(node_pids | tr '\n' ' ')"
	# The window: from lead seconds into the client's run (its connections,
	# and their TLS handshakes, made) for secs seconds.
	CLIENT_EXEC=exec client "$tr" "$wl" "$c" $((lead + secs + 1)) "$out" &
	cp=$!
	sleep "$lead"
	q0=$(requests) r0=$(ticks "$rp") n0=$(ticks "${np[@]}") c0=$(ticks "$cp") m0=$(machine) t0=$(date +%s.%N)
	sleep "$secs"
	t1=$(date +%s.%N) c1=$(ticks "$cp") r1=$(ticks "$rp") n1=$(ticks "${np[@]}") m1=$(machine) q1=$(requests)
	wait "$cp" || true
	local line
	line=$(grep '^RESULT' "$out" | tail -n 1 || true)
	[[ -n $line ]] || { echo "bench-http: $name produced no RESULT:"; cat "$out"; exit 1; }
	local -A kv
	local x
	for x in $line; do [[ $x == *=* ]] && kv[${x%%=*}]=${x#*=}; done
	R[$name.whole]=${kv[ops_s]}
	kv[ops_s]=$(awk -v q0="$q0" -v q1="$q1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.0f", (q1 - q0) / (t1 - t0) }')
	R[$name.ops]=${kv[ops_s]} R[$name.p50]=${kv[p50_us]} R[$name.p99]=${kv[p99_us]}
	R[$name.err]=${kv[errors]:-0}
	# CPU per request (us) of the router, the nodes, the client; machine busy % (others %).
	local cpu
	cpu=$(awk \
		-v r0="$r0" -v r1="$r1" -v n0="$n0" -v n1="$n1" -v c0="$c0" -v c1="$c1" -v m0="$m0" -v m1="$m1" \
		-v t0="$t0" -v t1="$t1" -v hz="$hz" -v ops="${kv[ops_s]}" 'BEGIN {
			el = t1 - t0; n = ops * el; if (n < 1) n = 1
			split(m0, a, " "); split(m1, b, " "); tot = b[2] - a[2]; if (tot < 1) tot = 1
			bz = b[1] - a[1]; o = bz - (r1 - r0) - (n1 - n0) - (c1 - c0); if (o < 0) o = 0
			printf "%.1f %.1f %.1f %d %d\n", (r1 - r0) / hz * 1e6 / n, (n1 - n0) / hz * 1e6 / n,
				(c1 - c0) / hz * 1e6 / n, 100 * bz / tot, 100 * o / tot }')
	read -r "R[$name.rcpu]" "R[$name.ncpu]" "R[$name.ccpu]" "R[$name.busy]" "R[$name.others]" <<<"$cpu"
	printf 'round %s %-6s %-10s %-3s %2s in flight: %7s ops/s (whole run %s), p50 %6.2f ms, p99 %6.2f ms, errors %s; CPU us/op router %s, nodes %s, client %s; machine %s%% busy (others %s%%)\n' \
		"$r" "$v" "$tr" "$wl" "$c" "${kv[ops_s]}" "${R[$name.whole]}" "$(awk -v x="${kv[p50_us]}" 'BEGIN { print x / 1000 }')" \
		"$(awk -v x="${kv[p99_us]}" 'BEGIN { print x / 1000 }')" "${R[$name.err]}" \
		"${R[$name.rcpu]}" "${R[$name.ncpu]}" "${R[$name.ccpu]}" "${R[$name.busy]}" "${R[$name.others]}"
	[[ ${R[$name.err]} == 0 ]] || echo "!! $name: ${R[$name.err]} errors"
}

ep=${EP[$current]} url=${URL[$current]}
echo "loading $keys keys with shoal_bench (BatchWriteItem)..."
"$SHOAL_BIN/shoal_bench" --endpoint "$ep" --workload get --keys "$keys" --load-only >"$dir/load.out" 2>&1 ||
	{ cat "$dir/load.out"; exit 1; }
# Every GetItem finds its item (a short checked run).
wrk -t1 -c4 -d1s -s "$lua" "$url" -- get "$keys" check >"$dir/check.out" 2>&1 || true
grep -q '^RESULT.* errors=0 misses=0 ' "$dir/check.out" ||
	{ echo "bench-http: the checked GetItem run failed:"; cat "$dir/check.out"; exit 1; }

workloads=("put $conc" "get $conc" "put 1" "get 1")
order=("${variants[@]}")
for ((r = 1; r <= rounds; r++)); do
	for w in "${workloads[@]}"; do
		read -r wl c <<<"$w"
		for v in "${order[@]}"; do
			run "$r" "$v" native "$wl" "$c"
			run "$r" "$v" http "$wl" "$c"
			[[ ${BENCH_HTTP_BENCH:-0} == 1 && $c == "$conc" ]] && run "$r" "$v" http_bench "$wl" "$c"
		done
		# The next workload starts with the router the last one ended with.
		if ((${#order[@]} == 2)); then order=("${order[1]}" "${order[0]}"); fi
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
ms() { awk -v x="$1" 'BEGIN { printf "%.2f", x / 1000 }'; }
echo
echo "HTTP: wrk (tests/tools/bench-http.lua); native: shoal_bench.  CPU: us per request."
printf '| %-8s | %-24s | %10s | %10s | %6s | %15s | %15s | %21s | %13s |\n' router workload \
	"native/s" "HTTP/s" ratio "native p50/p99" "HTTP p50/p99" "router CPU nat./HTTP" "busy (others)"
printf '|%s|\n' "----------|--------------------------|------------|------------|--------|-----------------|-----------------|-----------------------|---------------"
for w in "${workloads[@]}"; do
	read -r wl c <<<"$w"
	label=$([[ $wl == put ]] && echo PutItem || echo GetItem)", $c in flight"
	for ((r = 1; r <= rounds; r++)); do
		for v in "${variants[@]}"; do
			n=$r-$v-native-$wl-$c h=$r-$v-http-$wl-$c
			printf '| %-8s | %-24s | %10s | %10s | %6s | %15s | %15s | %21s | %13s |\n' \
				"$v$( ((rounds > 1)) && echo " $r")" "$label" \
				"${R[$n.ops]}" "${R[$h.ops]}" "$(ratio "${R[$h.ops]}" "${R[$n.ops]}")" \
				"$(ms "${R[$n.p50]}") / $(ms "${R[$n.p99]}")" "$(ms "${R[$h.p50]}") / $(ms "${R[$h.p99]}")" \
				"${R[$n.rcpu]} / ${R[$h.rcpu]}" "${R[$h.busy]}% (${R[$h.others]}%)"
		done
	done
done
if [[ ${BENCH_HTTP_BENCH:-0} == 1 ]]; then
	for wl in put get; do
		for ((r = 1; r <= rounds; r++)); do
			for v in "${variants[@]}"; do
				b=$r-$v-http_bench-$wl-$conc
				echo "http_bench (nng's HTTP client), round $r, $v, $wl $conc in flight: ${R[$b.ops]} ops/s, client CPU ${R[$b.ccpu]} us/op, router ${R[$b.rcpu]} us/op"
			done
		done
	done
fi
echo "(ratio = HTTP / native ops/s; busy = the machine during the HTTP run; others = processes other than the cluster and the client)"
if [[ $tls_mode == both ]]; then
	# Means over the rounds; server CPU = router + nodes per request.
	mean() { # key suffix: the mean over rounds of R[r-KEY.SUFFIX]
		local r s=0
		for ((r = 1; r <= rounds; r++)); do s=$(awk -v a="$s" -v b="${R[$r-$1.$2]}" 'BEGIN { print a + b }'); done
		awk -v s="$s" -v n="$rounds" 'BEGIN { printf "%.1f", s / n }'
	}
	echo
	echo "TLS on the client ports / plain, same cluster and run (means of $rounds round(s)):"
	printf '| %-24s | %-9s | %10s | %10s | %9s | %21s | %16s |\n' workload transport "plain/s" "TLS/s" "ops ratio" "server CPU plain/TLS" "server CPU ratio"
	printf '|%s|\n' "--------------------------|-----------|------------|------------|-----------|-----------------------|-----------------"
	for w in "${workloads[@]}"; do
		read -r wl c <<<"$w"
		label=$([[ $wl == put ]] && echo PutItem || echo GetItem)", $c in flight"
		for tr in native http; do
			po=$(mean "plain-$tr-$wl-$c" ops) to=$(mean "tls-$tr-$wl-$c" ops)
			pc=$(awk -v a="$(mean "plain-$tr-$wl-$c" rcpu)" -v b="$(mean "plain-$tr-$wl-$c" ncpu)" 'BEGIN { printf "%.1f", a + b }')
			tc=$(awk -v a="$(mean "tls-$tr-$wl-$c" rcpu)" -v b="$(mean "tls-$tr-$wl-$c" ncpu)" 'BEGIN { printf "%.1f", a + b }')
			printf '| %-24s | %-9s | %10s | %10s | %9s | %21s | %16s |\n' "$label" "$tr" "$po" "$to" \
				"$(ratio "$to" "$po")" "$pc / $tc us" "$(ratio "$pc" "$tc")"
		done
	done
	if [[ $pin == 1 ]]; then
		echo "(ops ratio: TLS / plain ops/s, the cluster on CPU 0 and the clients on CPU 1; server CPU ratio: plain / TLS"
	else
		echo "(ops ratio: TLS / plain ops/s with the client on the same cores; server CPU ratio: plain / TLS"
	fi
	echo " CPU of the router and nodes per request, the throughput ratio of a CPU-bound cluster whose"
	echo " clients run elsewhere)"
fi
