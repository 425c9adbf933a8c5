#!/usr/bin/env bash
# cut-recovery.sh -- how long a GSI takes to catch up after a long cut
# between two nodes (a figure, not a test).
#
#   tests/tools/cut-recovery.sh [BUILD]     (root: network namespaces)
#
# A 3-node cluster in network namespaces (cluster.sh up --netns), a table
# with a GSI, a writer putting items through the router, then node A (the
# leader of group 1) and node B (the leader of another group) cut from
# each other for CUT_SECS (default 45) seconds -- the router still reaches
# both -- while the writer goes on: index deltas shipped between A and B
# wait in TCP, whose retransmissions back off to tens of seconds apart.
# After the heal the writer stops and the script prints how long until the
# index holds every item of the table (a Scan of each, Select COUNT), and
# the nodes' log lines about renewed connections ("dialer of").
# CUT_SECS, ITEMS_PER_S (default 20) and SHOAL_BIN (default BUILD/bin) can
# be set.  The cluster and its namespaces are removed at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
export SHOAL_BIN=${SHOAL_BIN:-$build/bin}
cut_secs=${CUT_SECS:-45}
rate=${ITEMS_PER_S:-20}
dir=$(mktemp -d /tmp/shoal-cutrec-XXXXXX)
prefix=cr$((RANDOM % 900 + 100))
cluster() { "$root/deploy/cluster.sh" "$@" --dir "$dir"; }
shoal() { "$SHOAL_BIN/shoal" --endpoint "file://$dir/router.endpoint" "$@"; }
now_ms() { date +%s%3N; }
writer_pid=
cleanup() {
	[[ -n $writer_pid ]] && kill "$writer_pid" 2>/dev/null || true
	cluster down >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

cluster up --netns "$prefix" --nodes 3 --groups 4 >/dev/null
shoal create-table --table-name cutrec --billing-mode PAY_PER_REQUEST \
	--attribute-definitions AttributeName=pk,AttributeType=S AttributeName=gk,AttributeType=S \
	--key-schema AttributeName=pk,KeyType=HASH \
	--global-secondary-indexes \
	'IndexName=gsi1,KeySchema=[{AttributeName=gk,KeyType=HASH},{AttributeName=pk,KeyType=RANGE}],Projection={ProjectionType=KEYS_ONLY}' \
	>/dev/null

# The leaders of groups 1..3 (shoal status --output json: a Groups row per replica).
leaders=$(shoal status --output json | python3 -c '
import json, sys
s = json.load(sys.stdin)
for r in s["Groups"]:
    if r.get("Group") in (1, 2, 3) and r.get("Role") == "leader":
        print(r["Group"], r["Node"])
')
a=$(awk '$1 == 1 {print $2}' <<<"$leaders")
b=$(awk -v a="$a" '$2 != a {print $2; exit}' <<<"$leaders")
[[ -n $a && -n $b ]] || { echo "cut-recovery: leaders not found: $leaders" >&2; exit 1; }

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
echo "cut-recovery: cutting node $a (leader of group 1) from node $b for $cut_secs s"
cluster cut "$a" "$b" >/dev/null
sleep "$cut_secs"
cluster heal "$a" "$b" >/dev/null
t_heal=$(now_ms)
kill "$writer_pid"
wait "$writer_pid" 2>/dev/null || true
writer_pid=
count() { # scan arguments...
	shoal scan --table-name cutrec --select COUNT "$@" --output json 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["Count"])' 2>/dev/null || echo -1
}
want=$(count --consistent-read)
got=-1
deadline=$((t_heal + 300000))
while :; do
	got=$(count --index-name gsi1)
	[[ $got == "$want" ]] && break
	(($(now_ms) < deadline)) || break
	sleep 0.2
done
t_done=$(now_ms)
if [[ $got == "$want" ]]; then
	echo "cut-recovery: the index held all $want items $((t_done - t_heal)) ms after the heal"
else
	echo "cut-recovery: the index held $got of $want items 300 s after the heal"
fi
renewed=$(cat "$dir"/node-*.log | grep -c "stopped carrying messages" || true)
redialled=$(cat "$dir"/node-*.log | grep -c "had no connection and did nothing" || true)
echo "cut-recovery: the nodes' logs: $renewed stalled connections renewed, $redialled hung" \
	"connects redialled (\"dialer of\" lines, at most one a minute per dialer)"
