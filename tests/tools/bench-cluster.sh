#!/usr/bin/env bash
# bench-cluster.sh BUILD -- `make bench-cluster`: the cluster benchmark.
#
# Starts a fresh local cluster (deploy/cluster.sh: 3 shoal-node, 1
# shoal-router, 4 groups, replication 3) in BUILD/bench-cluster on base port
# 9100, runs the target workloads with BUILD/bin/shoal_bench (each run's full
# output is kept in BUILD/bench-cluster/run-N.out) and prints two tables:
#   - per run: throughput, latency percentiles, errors, the CPU each process
#     used during the run (% of one core) and whether the target was met;
#   - where the CPU goes: CPU microseconds and context switches per operation
#     in the router, each node and the client (from /proc and getrusage), and
#     how busy the whole machine was (and how much of that was other
#     processes: on a shared machine, read the figures with that in mind).
# During the runs every node's (and the router's) resident memory is sampled once a
# second; the maxima are printed at the end.  The cluster is stopped on exit.
#
#   1 PutItem, 64 in flight                  target >= 15,000/s with p99 <= 10 ms
#   2 GetItem (eventually consistent), 64 in flight, uniform over 100k keys
#                                            target >= 25,000/s
#   3 PutItem, one synchronous client        target p50 <= 1 ms
#   4 GetItem, one synchronous client        target p50 <= 0.4 ms
#   5 Query of 100-item collections, 16 in flight
#   6 mixed 50/50 GetItem/PutItem, zipfian (theta 0.99), 64 in flight
#   resident memory of every node            target < 200 MB (anonymous: LMDB's page cache aside)
#   GSI propagation lag at half of run 1's rate   target p99 <= 100 ms
#   one hot GSI key, WriteShards 1 vs 10     (figures: gsi_bench --mode hot)
# Then transactions (runs 7-19, BENCH_TXN_SECS each; no ClientRequestToken),
# in a table of their own, the writes beside a PutItem run of the same length
# with as many in flight just before them:
#   7 PutItem, 64 in flight (the baseline of runs 8-13)
#   8 TransactWriteItems, 2 Puts in one storage group (one item collection),
#     64 in flight                           target >= 0.8 x run 7's ops/s
#   9 TransactWriteItems, 2 Puts in two groups, 64 in flight
#                                            target >= 5,000/s with p99 <= 20 ms
#  10 TransactWriteItems, 10 Puts over all groups, 64 in flight
#  11 TransactGetItems, 2 items in two groups, 64 in flight
#  12 TransactGetItems, 10 items over all groups, 64 in flight
#  13 transfers: 2 Updates (ADD, the debit conditional on balance >= :amt) in
#     two groups, accounts zipfian (theta 0.99) over 1000, 64 in flight;
#     the cancellation rate by reason, and the balances audited afterwards
#  14 PutItem, one synchronous client (the baseline of runs 15-19)
#  15-19 runs 8-12 with one synchronous client   target (run 16) p50 <= 3 ms
# (transfers are not run synchronously: one transaction at a time contends
# with nothing, and the 2-group write is run 16).
#
# Environment: BENCH_SECS (measured seconds of runs 1, 2 and 6; default 20),
# BENCH_SHORT_SECS (runs 3-5; default BENCH_SECS/2), BENCH_WARMUP (default 2),
# BENCH_KEYS (default 100000), BENCH_BASE_PORT (default 9100), BENCH_DIR,
# SHOAL_SEED (passed to shoal_bench), BENCH_KEEP=1 (leave the cluster running),
# BENCH_PLAIN=1 (no TLS between the processes), BENCH_TLS=1 (TLS on the
# client port too), BENCH_GSI=0 (skip the secondary-index runs), BENCH_TXN=0 (skip the
# transaction runs), BENCH_TXN_SECS (measured seconds of runs 7-19; default
# 2, after 0.5 s of warmup).
# Defaults take about 3 minutes.  Figures only: the exit status is 0 whether
# or not targets are met (non-zero only when the benchmark cannot run).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
root=$PWD
export SHOAL_BIN=$root/$build/bin
dir=${BENCH_DIR:-$root/$build/bench-cluster}
base=${BENCH_BASE_PORT:-9100}
secs=${BENCH_SECS:-20}
short=${BENCH_SHORT_SECS:-$(awk -v s="$secs" 'BEGIN { print s / 2 }')}
warm=${BENCH_WARMUP:-2}
keys=${BENCH_KEYS:-100000}
txn_secs=${BENCH_TXN_SECS:-2}
bench=$SHOAL_BIN/shoal_bench
hz=$(getconf CLK_TCK)

[[ -x $bench ]] || { echo "bench-cluster: $bench not found (make BUILD=$build first)" >&2; exit 1; }

sampler=
cleanup() {
	if [[ -n $sampler ]]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
	[[ ${BENCH_KEEP:-0} == 1 ]] || deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
# Raw behaviour: partitions unthrottled (make hot measures throttling).
# The cluster as `cluster.sh up` makes it: mutual TLS between its processes
# (BENCH_PLAIN=1: plain, as before 2026-11-25; BENCH_TLS=1: the client port too).
tls_opt=()
[[ ${BENCH_PLAIN:-0} == 1 ]] && tls_opt=(--plain)
[[ ${BENCH_TLS:-0} == 1 ]] && tls_opt=(--tls)
deploy/cluster.sh up --dir "$dir" --base-port "$base" "${tls_opt[@]}" --partition-rcu 1000000000 --partition-wcu 1000000000
ep=file://$dir/router.endpoint

procs=(router-1 node-1 node-2 node-3)
pid_of() { cat "$dir/$1.pid"; }

# RSS sampler: the maximum resident memory (kB) of each process, rewritten
# every second: anonymous memory (the process's own: heap, stacks) and in
# all (with the file pages it maps, which for a node are mostly LMDB's data
# file, i.e. the page cache the target leaves aside).
(
	declare -A max maxall
	while :; do
		for p in "${procs[@]}"; do
			read -r a t < <(awk '/^RssAnon:/ {a = $2} /^VmRSS:/ {t = $2} END {print a + 0, t + 0}' \
				"/proc/$(pid_of "$p")/status" 2>/dev/null) || { a=0; t=0; }
			((a > ${max[$p]:-0})) && max[$p]=$a
			((t > ${maxall[$p]:-0})) && maxall[$p]=$t
		done
		for p in "${procs[@]}"; do echo "$p ${max[$p]:-0} ${maxall[$p]:-0}"; done >"$dir/rss.max.tmp"
		mv "$dir/rss.max.tmp" "$dir/rss.max"
		sleep 1
	done
) &
sampler=$!

# CPU ticks (user + system) and context switches (all threads) of a process.
ticks() { awk '{ print $14 + $15 }' "/proc/$(pid_of "$1")/stat" 2>/dev/null || echo 0; }
switches() {
	cat "/proc/$(pid_of "$1")"/task/*/status 2>/dev/null |
		awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'
}
now() { date +%s.%N; }
# Busy and total ticks of the whole machine, all CPUs.
machine() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

leaders() {
	"$SHOAL_BIN/shoal" --endpoint "$ep" status --output json 2>/dev/null |
		jq -r '[.Groups[] | select(.Role == "leader") | "g\(.Group)=n\(.Node)"] | join(" ")' 2>/dev/null ||
		echo "?"
}

rows=()   # the main table
costs=()  # CPU and context switches per operation
declare -A last # the RESULT fields of the last run
nrun=0
ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }
# Aligns |-separated lines into columns (what column -t does, without needing it).
table() {
	awk -F'|' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
	             if (NF > nf) nf = NF; n = NR }
	     END { for (r = 1; r <= n; r++) { line = ""
	             for (i = 1; i <= nf; i++) line = line sprintf(i < nf ? "%-" w[i] "s  " : "%s", c[r, i])
	             print line } }'
}

# run LABEL TARGET-CHECK shoal_bench-args...: runs one measurement, keeps a row.
#   TARGET-CHECK: "ops>=N", "p50<=US", "ops>=N,p99<=US" or "-".
# Server CPU and context switches are counted over the whole run (warmup
# included) and divided by ops/s x run time; the client's come from
# shoal_bench itself (measured window only).
run() {
	local label=$1 check=$2
	shift 2
	local -A t0 s0
	local p out c u w
	nrun=$((nrun + 1))
	out=$dir/run-$nrun.out
	for p in "${procs[@]}"; do t0[$p]=$(ticks "$p") s0[$p]=$(switches "$p"); done
	local start m0 ours=0
	start=$(now)
	m0=$(machine)
	echo
	echo "== $label"
	if ! "$bench" --endpoint "$ep" "$@" | tee "$out" || ! grep -q '^RESULT ' "$out"; then
		echo "bench-cluster: shoal_bench failed ($label)" >&2
		rows+=("$label|-|-|-|-|-|-|-|-|failed")
		last=()
		return 0
	fi
	local elapsed m1
	elapsed=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
	m1=$(machine)
	local -A r
	local kv
	local -a kvs
	read -ra kvs < <(grep '^RESULT ' "$out" | tail -n 1)
	for kv in "${kvs[@]}"; do [[ $kv == *=* ]] && r[${kv%%=*}]=${kv#*=}; done
	last=()
	for kv in "${!r[@]}"; do last[$kv]=${r[$kv]}; done
	local cpu="" us="" cs=""
	for p in "${procs[@]}"; do
		read -r c u w < <(awk -v a="${t0[$p]}" -v b="$(ticks "$p")" -v x="${s0[$p]}" \
			-v y="$(switches "$p")" -v hz="$hz" -v s="$elapsed" -v ops="${r[ops_s]}" \
			'BEGIN { n = ops * s; if (n < 1) n = 1
			         printf "%d %d %.1f\n", 100 * (b - a) / hz / s, 1e6 * (b - a) / hz / n, (y - x) / n }')
		cpu+="$c/" us+="$u/" cs+="$w/"
		ours=$((ours + $(ticks "$p") - t0[$p]))
	done
	# The machine: busy %, and the share of it not used by the cluster or
	# the client (other tenants, kernel threads such as the disk's kworkers).
	local busy
	busy=$(awk -v m0="$m0" -v m1="$m1" -v ours="$ours" -v cl="${r[client_cpu]}" -v s="$elapsed" \
		-v hz="$hz" 'BEGIN { split(m0, a, " "); split(m1, b, " "); t = b[2] - a[2]; if (t < 1) t = 1
		               bz = b[1] - a[1]; o = bz - ours - cl * s * hz; if (o < 0) o = 0
		               printf "%d%% (%d%%)", 100 * bz / t, 100 * o / t }')
	cpu+=$(awk -v c="${r[client_cpu]}" 'BEGIN { printf "%d", 100 * c }')
	us+=${r[client_cpu_us_per_op]}
	cs+=${r[client_csw_per_op]}
	local verdict=-
	if [[ $check != - ]]; then
		verdict=met
		IFS=, read -ra cs_ <<<"$check"
		for c in "${cs_[@]}"; do
			case $c in
			ops\>=*) awk -v a="${r[ops_s]}" -v b="${c#ops>=}" 'BEGIN { exit !(a >= b) }' || verdict=MISSED ;;
			p50\<=*) awk -v a="${r[p50_us]}" -v b="${c#p50<=}" 'BEGIN { exit !(a <= b) }' || verdict=MISSED ;;
			p99\<=*) awk -v a="${r[p99_us]}" -v b="${c#p99<=}" 'BEGIN { exit !(a <= b) }' || verdict=MISSED ;;
			esac
		done
	fi
	rows+=("$label|${r[ops_s]}|$(ms "${r[p50_us]}")|$(ms "${r[p95_us]}")|$(ms "${r[p99_us]}")|$(ms "${r[p999_us]}")|$(ms "${r[max_us]}")|${r[errors]}|$cpu|$verdict")
	costs+=("${label%% (*}|$us|$cs|$busy")
}

common=(--warmup "$warm" --keys "$keys")
echo "leaders before the runs: $(leaders)"
run "1 PutItem 64 in flight (>=15k/s, p99<=10ms)" "ops>=15000,p99<=10000" \
	--workload put --concurrency 64 --duration "$secs" "${common[@]}"
echo
echo "== loading $keys items for the reads"
"$bench" --endpoint "$ep" --workload get --load-only --keys "$keys"
run "2 GetItem EC 64 in flight (>=25k/s)" "ops>=25000" \
	--workload get --load no --concurrency 64 --duration "$secs" "${common[@]}"
run "3 PutItem 1 sync client (p50<=1ms)" "p50<=1000" \
	--workload put --concurrency 1 --duration "$short" "${common[@]}"
run "4 GetItem 1 sync client (p50<=0.4ms)" "p50<=400" \
	--workload get --load no --concurrency 1 --duration "$short" "${common[@]}"
qkeys=$((keys / 2))
echo
echo "== loading $qkeys items (100-item collections) for Query"
"$bench" --endpoint "$ep" --workload query --table bench_query --load-only --keys "$qkeys" \
	--items-per-collection 100
run "5 Query 100 items 16 in flight" - \
	--workload query --table bench_query --load no --items-per-collection 100 \
	--concurrency 16 --duration "$short" --warmup "$warm" --keys "$qkeys"
run "6 mixed 50/50 zipfian 64 in flight" - \
	--workload mixed --read-ratio 0.5 --dist zipfian --load no --concurrency 64 \
	--duration "$secs" "${common[@]}"
echo
echo "leaders after the runs: $(leaders)"

# Secondary indexes (build/bin/gsi_bench): propagation lag at half the
# write rate run 1 measured, and one hot index key with WriteShards 1 vs 10.
gsi=$SHOAL_BIN/gsi_bench
gsi_rows=()
if [[ -x $gsi && ${BENCH_GSI:-1} != 0 ]]; then
	put_rate=$(awk -F'|' 'NR == 1 { print $2 }' <<<"${rows[0]}")
	half=$(awk -v r="${put_rate:-2000}" 'BEGIN { printf "%d", (r > 0 ? r : 2000) / 2 }')
	echo
	echo "== GSI propagation lag at $half puts/s (half of run 1)"
	"$gsi" --endpoint "$ep" --mode lag --rate "$half" --duration "$short" | tee "$dir/gsi-lag.out" ||
		true # a failed GSI run must not lose the tables below
	gsi_rows+=("$(grep '^gsi lag' "$dir/gsi-lag.out" || echo 'gsi lag: no result')")
	for n in 1 10; do
		echo
		echo "== one hot GSI key, WriteShards $n"
		"$gsi" --endpoint "$ep" --mode hot --shards "$n" --duration "$short" |
			tee "$dir/gsi-hot$n.out" || true
		gsi_rows+=("$(grep '^gsi hot' "$dir/gsi-hot$n.out" || echo "gsi hot $n: no result")")
	done
fi

# Transactions (shoal_bench --workload txwrite / txget / transfer): their
# own table, each write row beside the PutItem run of the same length and
# as many in flight just before it (run 7 or 14).  The TxGet runs read the
# keys run 2 loaded.
put64="" put1=""
txn_rows=()  # the transaction table
txn_notes=() # cancellation reasons, error messages, the transfer audit
# txn LABEL TARGET-CHECK shoal_bench-args...: one run (as run), then its row
# in the transaction table: committed (or read) ops/s, the ratio to run 7 or 14,
# p50, p99, the cancellation rate, errors.
txn() {
	local label=$1
	run "$@"
	local out=$dir/run-$nrun.out
	if [[ -z ${last[ops_s]:-} ]]; then
		txn_rows+=("$label|-|-|-|-|-|-|failed")
		return 0
	fi
	# writes beside the PutItem baseline with as many in flight
	local ratio=- base=$put64
	[[ ${last[conc]} == 1 ]] && base=$put1
	[[ -n $base && ${last[workload]} != put && ${last[workload]} != txget ]] &&
		ratio=$(awk -v a="${last[ops_s]}" -v b="$base" 'BEGIN { if (b > 0) printf "%.2fx", a / b }')
	local verdict
	verdict=$(awk -F'|' 'END { print $NF }' <<<"${rows[-1]}")
	txn_rows+=("$label|${last[ops_s]}|$ratio|$(ms "${last[p50_us]}")|$(ms "${last[p99_us]}")|${last[cancel_pct]:--}|${last[errors]}|$verdict")
	local line
	while IFS= read -r line; do txn_notes+=("run $nrun: $line"); done < <(grep -E '^(errors|error message|cancellations|accounts|note):' "$out" || true)
}
if [[ ${BENCH_TXN:-1} != 0 ]]; then
	tc=(--warmup 0.5 --duration "$txn_secs" --keys "$keys")
	tw=(--workload txwrite "${tc[@]}")
	tg=(--workload txget --load no "${tc[@]}")
	txn "7 PutItem 64 in flight (baseline)" - --workload put --concurrency 64 "${tc[@]}"
	put64=${last[ops_s]:-}
	put_check=-
	[[ -n $put64 ]] && put_check="ops>=$(awk -v p="$put64" 'BEGIN { printf "%d", 0.8 * p + 0.5 }')"
	txn "8 TxWrite 2 items 1 group 64 (>=0.8x run 7)" "$put_check" \
		"${tw[@]}" --txn-items 2 --txn-span collection --concurrency 64
	txn "9 TxWrite 2 items 2 groups 64 (>=5k/s, p99<=20ms)" "ops>=5000,p99<=20000" \
		"${tw[@]}" --txn-items 2 --txn-span cross --concurrency 64
	txn "10 TxWrite 10 items all groups 64" - "${tw[@]}" --txn-items 10 --txn-span cross --concurrency 64
	txn "11 TxGet 2 items 2 groups 64" - "${tg[@]}" --txn-items 2 --txn-span cross --concurrency 64
	txn "12 TxGet 10 items all groups 64" - "${tg[@]}" --txn-items 10 --txn-span cross --concurrency 64
	txn "13 transfers zipfian 1000 accounts 64" - \
		--workload transfer --dist zipfian --keys 1000 --concurrency 64 --warmup 0.5 --duration "$txn_secs"
	txn "14 PutItem 1 sync client (baseline)" - --workload put --concurrency 1 "${tc[@]}"
	put1=${last[ops_s]:-}
	txn "15 TxWrite 2 items 1 group 1 sync" - "${tw[@]}" --txn-items 2 --txn-span collection --concurrency 1
	txn "16 TxWrite 2 items 2 groups 1 sync (p50<=3ms)" "p50<=3000" \
		"${tw[@]}" --txn-items 2 --txn-span cross --concurrency 1
	txn "17 TxWrite 10 items all groups 1 sync" - "${tw[@]}" --txn-items 10 --txn-span cross --concurrency 1
	txn "18 TxGet 2 items 2 groups 1 sync" - "${tg[@]}" --txn-items 2 --txn-span cross --concurrency 1
	txn "19 TxGet 10 items all groups 1 sync" - "${tg[@]}" --txn-items 10 --txn-span cross --concurrency 1
fi

sleep 1.1 # one more RSS sample
echo
echo "Shoal cluster benchmark ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
	"3 nodes, 1 router, 4 groups, replication 3; $(date -u +%Y-%m-%d))"
{
	echo "run|ops/s|p50 ms|p95 ms|p99 ms|p99.9 ms|max ms|errors|cpu% router/n1/n2/n3/client|target"
	for row in "${rows[@]}"; do echo "$row"; done
} | table
echo
echo "where the CPU goes, per operation (router/n1/n2/n3/client):"
{
	echo "run|cpu us/op|context switches/op|machine busy (others)"
	for row in "${costs[@]}"; do echo "$row"; done
} | table
if ((${#txn_rows[@]} > 0)); then
	echo
	echo "transactions ($txn_secs s each; ops/s: committed transactions, or reads; vs PutItem:" \
		"ops/s / run 7's (64 in flight) or run 14's (1);" \
		"cancelled: TransactionCanceledException share of the answers):"
	{
		echo "run|ops/s|vs PutItem|p50 ms|p99 ms|cancelled %|errors|target"
		for row in "${txn_rows[@]}"; do echo "$row"; done
	} | table
	for row in "${txn_notes[@]}"; do echo "  $row"; done
fi
echo
echo "secondary indexes (target: GSI propagation lag p99 <= 100 ms at half the write capacity):"
for row in "${gsi_rows[@]}"; do echo "  $row"; done
echo
echo "max resident memory during the runs (target < 200 MB per node, LMDB's page cache aside):"
while read -r p kb all; do
	verdict=""
	[[ $p == node-* ]] && { ((kb < 200 * 1024)) && verdict=" (met)" || verdict=" (MISSED)"; }
	awk -v p="$p" -v kb="$kb" -v all="$all" -v v="$verdict" \
		'BEGIN { printf "  %-9s %6.1f MB anonymous, %6.1f MB with mapped files%s\n", p, kb / 1024, all / 1024, v }'
done <"$dir/rss.max"
