#!/usr/bin/env bash
# cut-recovery.sh -- how long a cluster takes to catch up after a long cut
# between two nodes (figures, not a test).
#
#   tests/tools/cut-recovery.sh [BUILD]     (root: network namespaces)
#
# Each measurement on a fresh 3-node cluster in network namespaces
# (cluster.sh up --netns); MEASURE=gsi or raft runs one of them (default:
# both).
#  gsi   4 groups, a table with a GSI, a writer putting ITEMS_PER_S (20)
#        items a second through the router; node A (the leader of group 1)
#        and node B (the leader of another group) cut from each other for
#        CUT_SECS (45) -- the router still reaches both -- while the writer
#        goes on: index deltas shipped between A and B wait in TCP, whose
#        retransmissions back off to tens of seconds apart.  After the heal
#        the writer stops; printed: how long until the index holds every
#        item of the table (a Scan of each, Select COUNT), and the nodes'
#        log lines about renewed connections.
#  raft  2 groups (group 1 holds every item), group 1's leader cut from one
#        of its followers for RAFT_CUT_SECS (30) with no writes -- heartbeats
#        only, too little to fill a send buffer -- then one write after the
#        heal; printed: how long until that follower has applied it (shoal
#        status's AppliedIndex).
# SHOAL_BIN (default BUILD/bin) picks the binaries.  Each cluster and its
# namespaces are removed at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
export SHOAL_BIN=${SHOAL_BIN:-$build/bin}
measure=${MEASURE:-both}
cut_secs=${CUT_SECS:-45}
raft_cut_secs=${RAFT_CUT_SECS:-30}
rate=${ITEMS_PER_S:-20}
dir=
writer_pid=
cluster() { "$root/deploy/cluster.sh" "$@" --dir "$dir"; }
shoal() { "$SHOAL_BIN/shoal" --endpoint "file://$dir/router.endpoint" "$@"; }
now_ms() { date +%s%3N; }
down() {
	[[ -n $writer_pid ]] && kill "$writer_pid" 2>/dev/null || true
	writer_pid=
	[[ -n $dir ]] && { cluster down >/dev/null 2>&1 || true; rm -rf "$dir"; }
	dir=
}
trap down EXIT
up() { # groups
	dir=$(mktemp -d /tmp/shoal-cutrec-XXXXXX)
	cluster up --netns "cr$((RANDOM % 900 + 100))" --nodes 3 --groups "$1" >/dev/null
}
# The leader of group g (shoal status --output json: a Groups row per replica).
leader_of() {
	shoal status --output json | python3 -c '
import json, sys
for r in json.load(sys.stdin)["Groups"]:
    if r.get("Group") == int(sys.argv[1]) and r.get("Role") == "leader":
        print(r["Node"])' "$1"
}
applied() { # group node -> its AppliedIndex (-1: not listed)
	shoal status --output json | python3 -c '
import json, sys
g, n = int(sys.argv[1]), int(sys.argv[2])
for r in json.load(sys.stdin)["Groups"]:
    if r.get("Group") == g and r.get("Node") == n:
        print(r.get("AppliedIndex", -1)); break
else:
    print(-1)' "$1" "$2"
}

measure_gsi() {
	up 4
	shoal create-table --table-name cutrec --billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=pk,AttributeType=S AttributeName=gk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH \
		--global-secondary-indexes \
		'IndexName=gsi1,KeySchema=[{AttributeName=gk,KeyType=HASH},{AttributeName=pk,KeyType=RANGE}],Projection={ProjectionType=KEYS_ONLY}' \
		>/dev/null
	local a b
	a=$(leader_of 1)
	b=$(for g in 2 3; do leader_of "$g"; done | awk -v a="$a" '$1 != a {print; exit}')
	[[ -n $a && -n $b ]] || { echo "cut-recovery: leaders not found" >&2; exit 1; }
	(
		i=0
		while :; do
			i=$((i + 1))
			shoal put-item --table-name cutrec \
				--item "{\"pk\":{\"S\":\"k$i\"},\"gk\":{\"S\":\"g$((i % 16))\"}}" >/dev/null 2>&1 || true
			sleep "$(awk -v r="$rate" 'BEGIN {printf "%.3f", 1 / r}')"
		done
	) &
	writer_pid=$!
	sleep 5
	echo "cut-recovery: gsi: cutting node $a (leader of group 1) from node $b for $cut_secs s"
	cluster cut "$a" "$b" >/dev/null
	sleep "$cut_secs"
	cluster heal "$a" "$b" >/dev/null
	local t_heal
	t_heal=$(now_ms)
	kill "$writer_pid"
	wait "$writer_pid" 2>/dev/null || true
	writer_pid=
	count() { # scan arguments...
		shoal scan --table-name cutrec --select COUNT "$@" --output json 2>/dev/null |
			python3 -c 'import json, sys; print(json.load(sys.stdin)["Count"])' 2>/dev/null || echo -1
	}
	local want got=-1
	want=$(count --consistent-read)
	while :; do
		got=$(count --index-name gsi1)
		[[ $got == "$want" ]] && break
		(($(now_ms) < t_heal + 300000)) || break
		sleep 0.2
	done
	if [[ $got == "$want" ]]; then
		echo "cut-recovery: gsi: the index held all $want items $(($(now_ms) - t_heal)) ms after the heal"
	else
		echo "cut-recovery: gsi: the index held $got of $want items 300 s after the heal"
	fi
	local renewed redialled
	renewed=$(cat "$dir"/node-*.log | grep -c "stopped carrying messages" || true)
	redialled=$(cat "$dir"/node-*.log | grep -c "had no connection and did nothing" || true)
	echo "cut-recovery: gsi: the nodes' logs: $renewed stalled connections renewed, $redialled hung" \
		"connects redialled (\"dialer of\" lines, at most one a minute per dialer)"
	down
}

measure_raft() {
	up 2
	shoal create-table --table-name cutrec --billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=pk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH >/dev/null
	local leader follower t_heal want got=-1
	leader=$(leader_of 1)
	follower=$((leader % 3 + 1))
	echo "cut-recovery: raft: cutting node $follower from node $leader (group 1's leader) for" \
		"$raft_cut_secs s, no writes"
	cluster cut "$leader" "$follower" >/dev/null
	sleep "$raft_cut_secs"
	cluster heal "$leader" "$follower" >/dev/null
	t_heal=$(now_ms)
	shoal put-item --table-name cutrec --item '{"pk":{"S":"after"}}' >/dev/null
	want=$(applied 1 "$leader")
	while :; do
		got=$(applied 1 "$follower")
		((got >= want)) && break
		(($(now_ms) - t_heal < 300000)) || break
		sleep 0.2
	done
	if ((got >= want)); then
		echo "cut-recovery: raft: node $follower applied the write $(($(now_ms) - t_heal)) ms after the heal"
	else
		echo "cut-recovery: raft: node $follower at $got of $want 300 s after the heal"
	fi
	down
}

case $measure in
gsi) measure_gsi ;;
raft) measure_raft ;;
both) measure_gsi; measure_raft ;;
*) echo "cut-recovery: MEASURE is gsi, raft or both" >&2; exit 2 ;;
esac
