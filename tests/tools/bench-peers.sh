#!/usr/bin/env bash
# bench-peers.sh BUILD -- `make bench-peers`: Shoal beside etcd and dynalite,
# with the same HTTP load tool, on the same machine, in the same run.
#
# Starts, all on 127.0.0.1 and all at once:
#   - etcd: 3 members of Debian's etcd-server (3.4), data in BUILD/peers/etcd;
#     the load goes to the leader's JSON gateway (/v3/kv/put, /v3/kv/range
#     with serializable reads);
#   - dynalite: the npm package (pinned, installed into BUILD/peers/npm, never
#     into the tree), in memory, one Node.js process: what many developers
#     run locally instead of DynamoDB;
#   - Shoal: deploy/cluster.sh up (3 nodes, 1 router, 4 groups, replication
#     3, the DynamoDB HTTP endpoint on), data in BUILD/peers/shoal.
# Creates a table "bench" (hash key PK, a string) on dynalite and Shoal, loads
# the same KEYS keys into all three (etcd: one put per key, see peers.lua;
# DynamoDB: BatchWriteItem of 25), then runs Debian's wrk (tests/tools/peers/peers.lua) for
# ROUNDS rounds, each: put on every system, then read on every system, the
# systems in turn (round 1 etcd, dynalite, Shoal; round 2 the reverse, so
# drift hits all alike), each run a warm-up then the measured run, at the
# same concurrency.  Puts overwrite random keys with 100-byte values (etcd
# put / PutItem); reads are etcd serializable ranges / eventually consistent
# GetItems of random keys.  Prints ops/s, p99 and Shoal's ratios per round,
# the CPU each run used and how busy the machine was (and how much of that
# was processes other than these), then stops everything it started, by
# PID.  Raw wrk output of every run: BUILD/peers/runs/.
#
# Checks that the work was done: a run counts only HTTP 200 answers as
# operations; non-2xx answers and socket errors are counted, and a run where
# more than 1% of requests failed (or, for reads, more than 1% of 200
# answers lacked the item) is flagged FAILED in the table and below it.
# After each put run, 20 sampled keys are read back (strongly consistent) and
# the number carrying the run's value is printed (flagged if none does).
#
# Environment: PEERS_SECS (measured seconds per run, default 10),
# PEERS_WARMUP (2), PEERS_CONNS (wrk -c, 64), PEERS_THREADS (wrk -t, 2),
# PEERS_KEYS (100000, at most 1000000), PEERS_ROUNDS (2), PEERS_BASE_PORT
# (first free window of 430 ports among 7500 and 3500: Shoal uses base..+390,
# HTTP on base+60, etcd base+410..415, dynalite base+420; below the range
# tl_cluster uses, 10000-32000, and away from make demo's 8100, make
# bench-cluster's 9100, bench-http's 4500/5500/6500/9500 and the HTTP test's
# 4100-7499), PEERS_DIR (BUILD/peers), PEERS_DYNALITE (the npm version,
# default 4.0.0, or 3.2.2 with Node.js < 20; "skip" leaves dynalite out),
# PEERS_KEEP=1 (leave everything running; stop it with this script's
# printed commands).
# Needs etcd, wrk, node and npm: `deploy/install-deps.sh --peers` installs
# them (make bench-peers does).  Figures only: the exit status is 0 whether
# or not a system is fast (non-zero only when the benchmark cannot run).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
root=$PWD
[[ $build == /* ]] || build=$root/$build
export SHOAL_BIN=$build/bin
dir=${PEERS_DIR:-$build/peers}
secs=${PEERS_SECS:-10}
warm=${PEERS_WARMUP:-2}
conns=${PEERS_CONNS:-64}
threads=${PEERS_THREADS:-2}
keys=${PEERS_KEYS:-100000}
rounds=${PEERS_ROUNDS:-2}
lua=$root/tests/tools/peers/peers.lua
hz=$(getconf CLK_TCK)

die() { echo "bench-peers: $*" >&2; exit 1; }
for t in etcd etcdctl wrk curl node npm; do
	command -v "$t" >/dev/null || die "$t not found (deploy/install-deps.sh --peers installs it)"
done
[[ -x $SHOAL_BIN/shoal-node ]] || die "$SHOAL_BIN/shoal-node not found (run make first)"
((keys >= 1 && keys <= 1000000)) || die "PEERS_KEYS must be 1..1000000"

# Ports: the first window with nothing listening, unless PEERS_BASE_PORT names one.
window_free() { ! ss -ltnH 2>/dev/null | awk -v lo="$1" '{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p < lo + 430) f = 1 } END { exit !f }'; }
base=${PEERS_BASE_PORT:-}
if [[ -z $base ]]; then
	for b in 7500 3500; do window_free "$b" && { base=$b; break; }; done
	[[ -n $base ]] || die "no free port window (set PEERS_BASE_PORT)"
else
	window_free "$base" || die "something already listens in $base..$((base + 429))"
fi
((base + 430 <= 32768)) || die "PEERS_BASE_PORT must leave its ports below 32768 (the ephemeral range)"
http_port=$((base + 60))
dyn_port=$((base + 420))
etcd_client() { echo $((base + 410 + 2 * ($1 - 1))); }
etcd_peer() { echo $((base + 411 + 2 * ($1 - 1))); }

# ---------------------------------------------------------------------------
# Everything started here is tracked by PID and stopped on exit.
etcd_pids=() dyn_pid='' wrk_pid='' shoal_up=0
stop_pids() { # signal-then-kill: pids...
	local p deadline
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	deadline=$((SECONDS + 15))
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ ${PEERS_KEEP:-0} == 1 ]]; then
		echo "PEERS_KEEP=1: left running: etcd pids ${etcd_pids[*]:-none}, dynalite pid ${dyn_pid:-none};" \
			"Shoal in $dir/shoal (deploy/cluster.sh down --dir $dir/shoal)"
		exit "$rc"
	fi
	[[ -n $wrk_pid ]] && stop_pids "$wrk_pid"
	[[ -n $dyn_pid ]] && stop_pids "$dyn_pid"
	((${#etcd_pids[@]})) && stop_pids "${etcd_pids[@]}"
	((shoal_up)) && { deploy/cluster.sh down --dir "$dir/shoal" >/dev/null 2>&1 || true; }
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A previous run's Shoal cluster (if one was left behind) goes first; the
# npm directory is kept between runs.
[[ -d $dir/shoal ]] && { deploy/cluster.sh down --dir "$dir/shoal" >/dev/null 2>&1 || true; }
mkdir -p "$dir"
rm -rf "$dir/runs" "$dir/etcd" "$dir/shoal" "$dir/dynalite.log" "$dir/npm-install.log"
mkdir -p "$dir/runs" "$dir/etcd"

problems=()
flag() { problems+=("$*"); echo "!! $*"; }

# ---------------------------------------------------------------------------
# dynalite: pinned version from the npm registry into $dir/npm.
node_major=$(node -p 'process.versions.node.split(".")[0]')
dyn_version=${PEERS_DYNALITE:-$( ((node_major >= 20)) && echo 4.0.0 || echo 3.2.2)}
dyn_ok=0 dyn_why=
if [[ $dyn_version == skip ]]; then
	dyn_why="skipped (PEERS_DYNALITE=skip)"
else
	dynjs=$dir/npm/node_modules/dynalite/cli.js
	have=$(node -p "require('$dir/npm/node_modules/dynalite/package.json').version" 2>/dev/null || true)
	if [[ $have != "$dyn_version" ]]; then
		echo "installing dynalite@$dyn_version into $dir/npm (npm registry)..."
		if ! npm install --prefix "$dir/npm" --no-save --no-package-lock --no-audit --no-fund \
			"dynalite@$dyn_version" >"$dir/npm-install.log" 2>&1; then
			dyn_why="npm install dynalite@$dyn_version failed (see $dir/npm-install.log)"
		fi
	fi
	if [[ -z $dyn_why && ! -f $dynjs ]]; then dyn_why="$dynjs missing after npm install"; fi
	if [[ -z $dyn_why ]]; then
		# In memory (no --path); tables are ACTIVE at once.
		node "$dynjs" --host 127.0.0.1 --port "$dyn_port" --createTableMs 0 --deleteTableMs 0 \
			>"$dir/dynalite.log" 2>&1 </dev/null &
		dyn_pid=$!
		dyn_ok=1
	fi
fi

# ---------------------------------------------------------------------------
# etcd: 3 members.
cluster=
for i in 1 2 3; do cluster+="${cluster:+,}m$i=http://127.0.0.1:$(etcd_peer "$i")"; done
for i in 1 2 3; do
	etcd --name "m$i" --data-dir "$dir/etcd/m$i" \
		--listen-client-urls "http://127.0.0.1:$(etcd_client "$i")" \
		--advertise-client-urls "http://127.0.0.1:$(etcd_client "$i")" \
		--listen-peer-urls "http://127.0.0.1:$(etcd_peer "$i")" \
		--initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer "$i")" \
		--initial-cluster "$cluster" --initial-cluster-token "shoal-bench-peers-$$" \
		--initial-cluster-state new --logger zap --log-outputs stderr \
		>"$dir/etcd/m$i.log" 2>&1 </dev/null &
	etcd_pids+=($!)
done
etcd_eps="127.0.0.1:$(etcd_client 1),127.0.0.1:$(etcd_client 2),127.0.0.1:$(etcd_client 3)"

# ---------------------------------------------------------------------------
# Shoal.
shoal_up=1 # (before up: a cluster that fails to start is stopped too)
deploy/cluster.sh up --nodes 3 --dir "$dir/shoal" --base-port "$base" --http-port "$http_port" \
	--partition-rcu 1000000000 --partition-wcu 1000000000 # raw behaviour, as dynalite
shoal_url=$(cat "$dir/shoal/http.endpoint")
shoal_pids=()
for f in "$dir"/shoal/node-*.pid "$dir"/shoal/router-*.pid; do shoal_pids+=("$(cat "$f")"); done

# etcd ready: every member healthy, then the leader's client URL.
deadline=$((SECONDS + 30))
until ETCDCTL_API=3 etcdctl --endpoints "$etcd_eps" endpoint health >/dev/null 2>&1; do
	((SECONDS < deadline)) || die "etcd did not become healthy within 30 s; logs in $dir/etcd"
	for p in "${etcd_pids[@]}"; do kill -0 "$p" 2>/dev/null || die "an etcd member exited; logs in $dir/etcd"; done
	sleep 0.2
done
leader=$(ETCDCTL_API=3 etcdctl --endpoints "$etcd_eps" endpoint status 2>/dev/null |
	awk -F', ' '$5 == "true" { print $1 }')
[[ -n $leader ]] || die "no etcd leader"
etcd_url=http://$leader
echo "etcd up: 3 members (pids ${etcd_pids[*]}), leader $leader, $(etcd --version | head -n 1)"

dyn_url=http://127.0.0.1:$dyn_port
date_hdr() { date -u +%Y%m%dT%H%M%SZ; }
# One DynamoDB JSON request with curl: url op body -> the answer's body.
ddb() {
	local d
	d=$(date_hdr)
	curl -sS --max-time 10 -X POST "$1/" -H "X-Amz-Target: DynamoDB_20120810.$2" \
		-H 'Content-Type: application/x-amz-json-1.0' -H "X-Amz-Date: $d" \
		-H "Authorization: AWS4-HMAC-SHA256 Credential=bench/${d:0:8}/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=0000" \
		-d "$3"
}
create_table() { # url: table "bench", hash key PK, until ACTIVE
	local out deadline=$((SECONDS + 30))
	out=$(ddb "$1" CreateTable '{"TableName":"bench","AttributeDefinitions":[{"AttributeName":"PK","AttributeType":"S"}],"KeySchema":[{"AttributeName":"PK","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}' 2>&1) || true
	grep -q '"TableDescription"' <<<"$out" || { echo "CreateTable on $1: $out"; return 1; }
	until ddb "$1" DescribeTable '{"TableName":"bench"}' 2>/dev/null | grep -q '"TableStatus" *: *"ACTIVE"'; do
		((SECONDS < deadline)) || { echo "table bench on $1 not ACTIVE after 30 s"; return 1; }
		sleep 0.1
	done
}
if ((dyn_ok)); then
	deadline=$((SECONDS + 20))
	until curl -s -o /dev/null "$dyn_url/" 2>/dev/null; do
		if ! kill -0 "$dyn_pid" 2>/dev/null || ((SECONDS >= deadline)); then
			dyn_ok=0 dyn_why="dynalite did not start: $(tail -n 3 "$dir/dynalite.log" | tr '\n' ' ')"
			break
		fi
		sleep 0.2
	done
	((dyn_ok)) && echo "dynalite up: $dyn_version, in memory, pid $dyn_pid, $dyn_url (Node.js $(node --version))"
fi
if ((dyn_ok)) && ! why=$(create_table "$dyn_url"); then dyn_ok=0 dyn_why="dynalite: $why"; fi
why=$(create_table "$shoal_url") || die "could not create the table on Shoal: $why"
if ((!dyn_ok)); then
	flag "dynalite NOT RUN: $dyn_why -- its column is empty"
	[[ -n $dyn_pid ]] && { stop_pids "$dyn_pid"; dyn_pid=; }
fi

systems=(etcd shoal)
((dyn_ok)) && systems=(etcd dynalite shoal)
declare -A url=([etcd]=$etcd_url [dynalite]=$dyn_url [shoal]=$shoal_url)
declare -A proto=([etcd]=etcd [dynalite]=dynamodb [shoal]=dynamodb)
declare -A name=([etcd]=etcd [dynalite]=dynalite [shoal]=Shoal)
pids_of() {
	case $1 in
	etcd) echo "${etcd_pids[*]}" ;;
	dynalite) echo "${dyn_pid:-}" ;;
	shoal) echo "${shoal_pids[*]}" ;;
	esac
}
all_pids() { echo "${etcd_pids[*]} ${dyn_pid:-} ${shoal_pids[*]}"; }

# CPU ticks (user + system) of processes; of this shell's waited-for
# children (wrk); busy and total ticks of the whole machine.
ticks() { local p s=0; for p in "$@"; do s=$((s + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$s"; }
child_ticks() { local -a f; read -ra f <"/proc/$$/stat"; echo $((f[15] + f[16])); }
machine() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

# wrk in the background (so cleanup can stop it), waited for here.
run_wrk() { # out args...
	local out=$1
	shift
	wrk "$@" >"$out" 2>&1 &
	wrk_pid=$!
	local rc=0
	wait "$wrk_pid" || rc=$?
	wrk_pid=
	return $rc
}

# ---------------------------------------------------------------------------
# Load every key into every system.
for s in "${systems[@]}"; do
	out=$dir/runs/load-$s.out
	rm -f "$dir/runs/load-$s.done".*
	t0=$SECONDS
	wrk -t"$threads" -c"$conns" -d600s -s "$lua" "${url[$s]}" -- "${proto[$s]}" load "$keys" "$threads" \
		"$dir/runs/load-$s.done" >"$out" 2>&1 &
	wrk_pid=$!
	while kill -0 "$wrk_pid" 2>/dev/null; do
		n=$(find "$dir/runs" -name "load-$s.done.*" | wc -l)
		((n >= threads)) && break
		((SECONDS - t0 < 300)) || { flag "loading ${name[$s]}: not done after 300 s"; break; }
		sleep 0.1
	done
	kill -INT "$wrk_pid" 2>/dev/null || true
	wait "$wrk_pid" || true
	wrk_pid=
	line=$(grep '^RESULT' "$out" || true)
	[[ -n $line ]] || die "loading ${name[$s]} failed: $(tail -n 5 "$out")"
	bad=$(sed -n 's/.* non2xx=\([0-9]*\) socket_errors=\([0-9]*\) misses=[0-9]* unprocessed=\([0-9]*\).*/\1 \2 \3/p' <<<"$line")
	echo "loaded $keys keys into ${name[$s]} in $((SECONDS - t0)) s (failed requests / socket errors / batches with unprocessed items: ${bad// / \/ })"
	[[ $bad == "0 0 0" ]] || flag "loading ${name[$s]}: $bad failed/unprocessed batches ($(grep '^FIRST_ERROR' "$out" || true))"
done

# ---------------------------------------------------------------------------
# Put check: read back 20 sampled keys (strongly consistent) and count those
# carrying the put run's value.
b64() { printf '%s' "$1" | base64 -w0; }
put_check() { # system tag -> "hits/20"
	local s=$1 tag=$2 hits=0 i n k body
	for ((i = 0; i < 20; i++)); do
		n=$(((RANDOM * 32768 + RANDOM) % keys))
		k=$(printf 'key%06d' "$n")
		if [[ $s == etcd ]]; then
			body=$(curl -sS --max-time 10 -X POST "${url[$s]}/v3/kv/range" -d "{\"key\":\"$(b64 "$k")\"}" 2>/dev/null |
				sed -n 's/.*"value":"\([^"]*\)".*/\1/p' | base64 -d 2>/dev/null || true)
		else
			body=$(ddb "${url[$s]}" GetItem "{\"TableName\":\"bench\",\"Key\":{\"PK\":{\"S\":\"$k\"}},\"ConsistentRead\":true}" 2>/dev/null || true)
		fi
		[[ $body == *"$tag"* ]] && hits=$((hits + 1))
	done
	echo "$hits"
}

declare -A R
# One run: warm-up, then the measured run with CPU accounting.
run() { # round workload system
	local r=$1 wl=$2 s=$3 id=r$1-$2-$3
	local out=$dir/runs/$id.out tag=put-$id
	local args=(-t"$threads" -c"$conns" -s "$lua" --latency "${url[$s]}" -- "${proto[$s]}" "$wl" "$keys" "$threads")
	[[ $wl == put ]] && args+=("warm-$id")
	run_wrk "$dir/runs/$id.warm.out" -d"${warm}s" "${args[@]}" || true
	[[ $wl == put ]] && args[-1]=$tag
	local -a sp ap
	read -ra sp <<<"$(pids_of "$s")"
	read -ra ap <<<"$(all_pids)"
	local st0 at0 ct0 m0 t0 st1 at1 ct1 m1 t1
	st0=$(ticks "${sp[@]}") at0=$(ticks "${ap[@]}") ct0=$(child_ticks) m0=$(machine) t0=$(date +%s.%N)
	run_wrk "$out" -d"${secs}s" "${args[@]}" || true
	ct1=$(child_ticks) t1=$(date +%s.%N) st1=$(ticks "${sp[@]}") at1=$(ticks "${ap[@]}") m1=$(machine)
	local line
	line=$(grep '^RESULT' "$out" | tail -n 1 || true)
	if [[ -z $line ]]; then
		R[$id]="failed"
		flag "round $r ${name[$s]} $wl: wrk produced no result ($(tail -n 2 "$out" | tr '\n' ' '))"
		return 0
	fi
	local -A v
	local kv
	for kv in $line; do [[ $kv == *=* ]] && v[${kv%%=*}]=${kv#*=}; done
	# CPU as % of one core: the system under test, wrk; the machine busy % (others %).
	local cpu
	cpu=$(awk -v s0="$st0" -v s1="$st1" -v a0="$at0" -v a1="$at1" -v c0="$ct0" -v c1="$ct1" \
		-v m0="$m0" -v m1="$m1" -v t0="$t0" -v t1="$t1" -v hz="$hz" 'BEGIN {
			el = t1 - t0; if (el <= 0) el = 1
			split(m0, a, " "); split(m1, b, " "); tot = b[2] - a[2]; if (tot < 1) tot = 1
			bz = b[1] - a[1]; o = bz - (a1 - a0) - (c1 - c0); if (o < 0) o = 0
			printf "%d %d %d %d", 100 * (s1 - s0) / hz / el, 100 * (c1 - c0) / hz / el, 100 * bz / tot, 100 * o / tot }')
	local -a c
	read -ra c <<<"$cpu"
	local fail miss
	fail=$(awk -v r="${v[requests]}" -v e="${v[non2xx]}" -v x="${v[socket_errors]}" 'BEGIN { printf "%.2f", (r + x > 0 ? 100 * (e + x) / (r + x) : 100) }')
	miss=$(awk -v ok="${v[ok]}" -v m="${v[misses]}" 'BEGIN { printf "%.2f", (ok > 0 ? 100 * m / ok : 0) }')
	local mark=""
	if awk -v f="$fail" 'BEGIN { exit !(f > 1) }'; then
		mark=" FAILED"
		flag "round $r ${name[$s]} $wl: $fail% of requests failed (${v[non2xx]} non-2xx, ${v[socket_errors]} socket errors; $(grep '^FIRST_ERROR' "$out" | cut -c13-200 || true))"
	fi
	if awk -v f="$miss" 'BEGIN { exit !(f > 1) }'; then
		mark=" FAILED"
		flag "round $r ${name[$s]} $wl: $miss% of reads found no item (${v[misses]} of ${v[ok]})"
	fi
	local check=""
	if [[ $wl == put ]]; then
		local hits expect
		hits=$(put_check "$s" "$tag")
		expect=$(awk -v n="${v[ok]}" -v k="$keys" 'BEGIN { printf "%d", 100 * (1 - exp(-n / k)) }')
		check=", read back: $hits/20 sampled keys carry this run's value (~$expect% expected)"
		if ((hits == 0 && expect >= 20)); then
			mark=" FAILED"
			flag "round $r ${name[$s]} put: none of 20 sampled keys reads back this run's value"
		fi
	fi
	R[$id]=$(printf '%s %s %s%s' "${v[ops_s]}" "${v[p99_us]}" "$cpu" "$mark")
	printf '%-9s %-4s round %d: %6s ops/s, p50 %6.2f ms, p99 %6.2f ms, non-2xx %s, socket errors %s%s, cpu %s%% (wrk %s%%), machine %s%% busy (others %s%%)%s%s\n' \
		"${name[$s]}" "$wl" "$r" "${v[ops_s]}" "$(awk -v x="${v[p50_us]}" 'BEGIN { print x / 1000 }')" \
		"$(awk -v x="${v[p99_us]}" 'BEGIN { print x / 1000 }')" "${v[non2xx]}" "${v[socket_errors]}" \
		"$([[ $wl == read ]] && echo ", misses ${v[misses]}")" "${c[0]}" "${c[1]}" "${c[2]}" "${c[3]}" "$check" "$mark"
}

echo
echo "== $rounds rounds: wrk -t$threads -c$conns, ${warm} s warm-up + ${secs} s per run, $keys keys, 100-byte values"
for ((r = 1; r <= rounds; r++)); do
	order=("${systems[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[$i]}"); done
	fi
	for wl in put read; do
		for s in "${order[@]}"; do run "$r" "$wl" "$s"; done
	done
done

# ---------------------------------------------------------------------------
# The table.
cell() { # id -> "ops/s (p99 ms)"
	local x=${R[$1]:-}
	[[ -z $x ]] && { echo "-"; return; }
	[[ $x == failed ]] && { echo "FAILED"; return; }
	awk -v x="$x" 'BEGIN { split(x, a, " "); f = (x ~ /FAILED/) ? " FAILED" : ""
		printf "%d (%.1f ms)%s", a[1], a[2] / 1000, f }'
}
ratio() { # id-a id-b
	local a=${R[$1]:-} b=${R[$2]:-}
	[[ -z $a || -z $b || $a == failed || $b == failed ]] && { echo "-"; return; }
	awk -v a="${a%% *}" -v b="${b%% *}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
}
busy() { # id -> "B% (O%)"
	local x=${R[$1]:-}
	[[ -z $x || $x == failed ]] && { echo "-"; return; }
	awk -v x="$x" 'BEGIN { split(x, a, " "); printf "%d%% (%d%%)", a[5], a[6] }'
}
srv() { local x=${R[$1]:-}; [[ -z $x || $x == failed ]] && { echo "-"; return; }; awk -v x="$x" 'BEGIN { split(x, a, " "); printf "%d/%d", a[3], a[4] }'; }

echo
echo "Shoal beside etcd and dynalite ($(date -u +%Y-%m-%d), $(nproc) CPUs, load average now $(cut -d' ' -f1-3 /proc/loadavg);" \
	"wrk -t$threads -c$conns, $secs s per run after $warm s of warm-up, $keys keys, 100-byte values)"
echo "etcd $(etcd --version | sed -n 's/etcd Version: //p') (3 members, JSON gateway of the leader; reads serializable);" \
	"dynalite $( ((dyn_ok)) && echo "$dyn_version" || echo "NOT RUN") (in memory, 1 Node.js $(node --version) process);" \
	"Shoal (3 nodes, 1 router, 4 groups, replication 3; GetItem eventually consistent)"
echo
# Aligns "|"-separated rows into a Markdown table (a rule after the header).
mdtable() {
	awk -F'|' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
	             if (NF > nf) nf = NF; n = NR }
	     END { for (r = 1; r <= n; r++) { line = "|"
	             for (i = 1; i <= nf; i++) line = line sprintf(" %-" w[i] "s |", c[r, i])
	             print line
	             if (r == 1) { line = "|"; for (i = 1; i <= nf; i++) { d = ""; for (k = 0; k < w[i] + 2; k++) d = d "-"; line = line d "|" }; print line } } }'
}
{
	echo "round|workload|etcd ops/s (p99)|dynalite ops/s (p99)|Shoal ops/s (p99)|Shoal/etcd|Shoal/dynalite|machine busy (others): etcd, dynalite, Shoal"
	for ((r = 1; r <= rounds; r++)); do
		for wl in put read; do
			echo "$r|$wl|$(cell "r$r-$wl-etcd")|$(cell "r$r-$wl-dynalite")|$(cell "r$r-$wl-shoal")|$(ratio "r$r-$wl-shoal" "r$r-$wl-etcd")|$(ratio "r$r-$wl-shoal" "r$r-$wl-dynalite")|$(busy "r$r-$wl-etcd"), $(busy "r$r-$wl-dynalite"), $(busy "r$r-$wl-shoal")"
		done
	done
} | mdtable
echo
echo "CPU of the system under test / of wrk during each run, % of one core:"
for ((r = 1; r <= rounds; r++)); do
	for wl in put read; do
		echo "  round $r $wl: etcd $(srv "r$r-$wl-etcd"), dynalite $(srv "r$r-$wl-dynalite"), Shoal $(srv "r$r-$wl-shoal")"
	done
done
echo "(put: etcd put / PutItem overwriting random keys; read: etcd serializable range / GetItem; ops/s count" \
	"only HTTP 200 answers. Raw wrk output: $dir/runs/)"
if ((${#problems[@]})); then
	echo
	echo "!!!!!!!! PROBLEMS (${#problems[@]}); figures marked FAILED above are not throughput:"
	for p in "${problems[@]}"; do echo "!! $p"; done
fi
