#!/usr/bin/env bash
# cluster.sh -- run a local Shoal cluster on 127.0.0.1.
#
#   cluster.sh up [--nodes N] [--routers R] [--groups G] [--replication K]
#                 [--dir D] [--base-port P] [--http-port H] [--credentials FILE|auto]
#                 [--partition-rcu R] [--partition-wcu W] [--burst-secs S]
#                 [--plain] [--tls]
#                 [--snapshot-entries N] [--scrub-ms N] [--raft-segment-mb M]
#       writes D/cluster.ini, starts N nodes (default 3) and R routers
#       (default 1), waits until the cluster serves, and writes the routers'
#       endpoints (comma-separated) to D/router.endpoint.  With --http-port,
#       router r also serves DynamoDB's HTTP API on 127.0.0.1:H+r-1 and
#       http://127.0.0.1:H (router 1) is written to D/http.endpoint; with
#       --credentials (or --http-credentials) every router requires requests
#       signed by a key of FILE on both ports (router/main.c).  `auto`: the
#       script makes D/credentials itself (0600, one random unrestricted key;
#       an existing one is kept, as the certificates are).  The first
#       unrestricted key of the file (a line with no grants) is copied to
#       D/aws-credentials (0600, an AWS shared credentials file, [default]):
#       the script's own `shoal` calls sign with it, `shoal` and libshoal
#       clients of file://D/router.endpoint find it by themselves (after
#       AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and a named --profile or
#       AWS_PROFILE, before the default profile), and boto3 or the AWS CLI
#       take it with AWS_SHARED_CREDENTIALS_FILE=D/aws-credentials.
#       --partition-rcu/--partition-wcu set the most read/write units per
#       second one partition serves
#       (cluster.ini's partition_rcu/partition_wcu; default 3000/1000);
#       --burst-secs how many seconds of unused capacity a partition keeps
#       (default 300; 0: none).  --snapshot-entries: the most Raft entries
#       a group takes between snapshots (cluster.ini's snapshot_entries);
#       --raft-segment-mb the size of Raft's log segments (raft_segment_mb).
#       --scrub-ms: how often each group's leader checks the next range of
#       the replica scrub (cluster.ini's scrub_ms; default 10000; 0: off).
#       --ttl-scan-ms: the pause between two Time to Live passes of a
#       group's leader (cluster.ini's ttl_scan_ms; default 60000; 0: off).
#       --ttl-change-interval-ms: how long after a TTL change another is
#       refused (ttl_change_interval_ms; default DynamoDB's hour; 0: never).
#       --stream-retention-s: how long stream records are kept
#       (stream_retention_s; default 86400).
#       --dead-after-ms: how long a node must be unreachable before its
#       replicas are re-created on other nodes (dead_after_ms; default
#       300000).
#       --split-bytes: the size at which group 0's executor splits a
#       partition (split_bytes; default 10 GiB; 0: no size splits);
#       --split-units / --split-throttled: units/s and requests/s throttled
#       at the partition limit, over 5 s, at which it splits for heat
#       (split_units, default 0: off; split_throttled, default 10).
#   --auto-groups: group 0's executor creates storage groups itself while the
#       cluster has fewer data groups than active nodes (ids up to 79), and
#       gives each new one a partition ([cluster] auto_groups; off: only
#       `shoal admin add-group` makes groups).
#       --table-partitions: how many partitions a new table starts with
#       (table_partitions; default: one per data group; rounded up to a
#       multiple of the data groups).
#       Traffic between nodes and routers (Raft, node RPC) is mutually
#       authenticated TLS: `up` makes a CA and certificates in D/tls with
#       deploy/certs.sh (kept across runs) and names it in cluster.ini's
#       [tls]; --plain turns that off.  --tls also encrypts the routers'
#       client ports: their endpoints become tls+tcp:// (in
#       D/router.endpoint) and clients verify them with D/tls/ca.pem
#       (`shoal --endpoint file://D/router.endpoint` finds it by itself);
#       with --http-port, the routers serve HTTPS there instead of HTTP
#       (D/http.endpoint says https://; the AWS CLI needs
#       --ca-bundle D/tls/ca.pem).
#   cluster.sh status [--dir D]           processes, then `shoal status`
#   cluster.sh stop-node ID [--hard] [--dir D]   SIGTERM (or SIGKILL) one node
#   cluster.sh start-node ID [--dir D]    start one node again; returns once it
#                                         listens (its groups may still be electing)
#   cluster.sh wait [--dir D]             until every group has a leader and every
#                                         replica answers
#   cluster.sh stop-router ID [--hard] [--dir D] / start-router ID [--dir D]
#       [--client-plain] (this start serves plain client ports on a --tls
#       cluster: bench-http's TLS/plain comparison on one cluster; the
#       endpoint files keep naming TLS)
#   cluster.sh add-node [--dir D]         one more node joins the running cluster
#       (issue 14): the next id (one past the highest [node.N] of D/cluster.ini)
#       and its port block as `up` places them (checked free, below 32768); a
#       [node.N] section appended to D/cluster.ini; its certificate made with
#       the cluster CA when the cluster has TLS (deploy/certs.sh keeps the
#       others); `shoal-node --join` started like the others (D/node-N.pid,
#       D/node-N.log, D/node-N/); registered with `shoal admin add-node`
#       (signed with D/aws-credentials, as the script's other calls); returns
#       once its RPC port serves and `shoal status` lists it.  Prints the id.
#       `status`, `stop-node`, `start-node` and `down` take added nodes as
#       any (start-node restarts one with --join).  Not with --netns.
#   cluster.sh down [--dir D]             stop exactly the processes started here
#                                         (and, with --netns, remove the network)
#
# A real network: `up --netns PREFIX [--netns-subnet 10.X.Y]` runs node i in
# the network namespace PREFIX-ni at 10.X.Y.i and router r in PREFIX-rr at
# 10.X.Y.(100+r), each with one veth on a bridge PREFIX-br in the root
# namespace, which holds 10.X.Y.254 (deploy/netns.sh makes and removes all of
# it; the subnet is derived from PREFIX unless given).  Clients, including
# this script's `shoal status`, run in the root namespace and reach the
# routers over the bridge; the endpoint files name the routers' addresses.
# Ports are as below, on those addresses.  Needs root, iproute2 and nftables.
# An `up` that fails removes what it made; `down` removes the processes,
# then the namespaces, veths, bridge and nftables table.  Faults between the
# processes (deploy/netns.sh explains each):
#   cluster.sh cut|oneway A B / isolate A / heal A B / heal-all / loss A PCT /
#              netem A ARGS... / probe A B PORT / probe-udp A B PORT / addr A  [--dir D]
#       A, B: a node id (2 or n2), a router (r1), or host (the root namespace).
#
# Ports (P = --base-port, default 8100, where the CLI looks by default): router r listens on P + 2(r-1) and
# serves metrics on P + 2(r-1) + 1; node i uses the block P + 100 i: Raft for
# group g on block + g, rpc on block + 80, metrics on block + 90.  Different
# --dir and --base-port values let several clusters run side by side.  Keep
# every port below the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
# usually 32768-60999): a port there may already be some connection's local
# port, and listening on it then fails.
# Processes are tracked by pid files in D and stopped by PID, never by name.
# Binaries come from $SHOAL_BIN (default: build/bin next to this script).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${SHOAL_BIN:-$here/../build/bin}
dir=${SHOAL_CLUSTER_DIR:-/tmp/shoal-cluster-$(id -un)}
nodes=3 routers=1 groups=4 replication=3 part_rcu= part_wcu= burst= snap_entries= scrub_ms= ttl_scan_ms= ttl_interval_ms= dead_after_ms= split_bytes= table_partitions= split_units= split_throttled= auto_groups= stream_retention_s= segment_mb= base=8100 hard=0 http_port=0 http_creds= wait_secs=${SHOAL_WAIT_SECS:-60}
netns= netns_subnet= plain=0 client_tls=0 client_plain=0

die() { echo "cluster.sh: $*" >&2; exit 1; }

# The network faults of a --netns cluster are deploy/netns.sh's.
case ${1:-} in
cut | oneway | isolate | heal | heal-all | loss | netem | slow | probe | probe-udp | addr)
	[[ $* == *--dir* ]] || set -- "$@" --dir "$dir"
	exec "$here/netns.sh" "$@" ;;
esac

cmd=${1:-}; [[ -n $cmd ]] || die "usage: cluster.sh up|status|wait|stop-node|start-node|stop-router|start-router|add-node|down [options]"
shift
target=
args=()
while (($#)); do
	case $1 in
	--nodes) nodes=$2; shift 2 ;;
	--routers) routers=$2; shift 2 ;;
	--groups) groups=$2; shift 2 ;;
	--replication) replication=$2; shift 2 ;;
	--partition-rcu) part_rcu=$2; shift 2 ;;
	--partition-wcu) part_wcu=$2; shift 2 ;;
	--burst-secs) burst=$2; shift 2 ;;
	--snapshot-entries) snap_entries=$2; shift 2 ;;
	--raft-segment-mb) segment_mb=$2; shift 2 ;;
	--scrub-ms) scrub_ms=$2; shift 2 ;;
	--ttl-scan-ms) ttl_scan_ms=$2; shift 2 ;;
	--ttl-change-interval-ms) ttl_interval_ms=$2; shift 2 ;;
	--dead-after-ms) dead_after_ms=$2; shift 2 ;;
	--split-bytes) split_bytes=$2; shift 2 ;;
	--table-partitions) table_partitions=$2; shift 2 ;;
	--split-units) split_units=$2; shift 2 ;;
	--split-throttled) split_throttled=$2; shift 2 ;;
	--auto-groups) auto_groups=1; shift ;;
	--stream-retention-s) stream_retention_s=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--base-port) base=$2; shift 2 ;;
	--http-port) http_port=$2; shift 2 ;;
	--credentials | --http-credentials)
		if [[ $2 == auto ]]; then http_creds=auto; else http_creds=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); fi
		shift 2 ;;
	--hard) hard=1; shift ;;
	--plain) plain=1; shift ;;
	--tls) client_tls=1; shift ;;
	--client-plain) client_plain=1; shift ;;
	--netns) netns=$2; shift 2 ;;
	--netns-subnet) netns_subnet=$2; shift 2 ;;
	-*) die "unknown option $1" ;;
	*) target=$1; shift ;;
	esac
done
((replication <= nodes)) || replication=$nodes

conf=$dir/cluster.ini
# Commands after `up` reuse the shape it recorded (node/router counts, ports).
if [[ $cmd != up && -f $dir/shape ]]; then
	read -r nodes routers base http_port client_tls <"$dir/shape"
	http_port=${http_port:-0} client_tls=${client_tls:-0}
	((client_plain)) && client_tls=0
	[[ -f $dir/http.credentials ]] && http_creds=$(cat "$dir/http.credentials")
fi
# A --netns cluster: D/netns is "PREFIX SUBNET NODES ROUTERS" (deploy/netns.sh).
[[ $cmd != up && -f $dir/netns ]] && read -r netns netns_subnet _ <"$dir/netns"

# This script's own `shoal` calls: with credentials they sign with the
# cluster's unrestricted key (D/aws-credentials, written by `up`), whatever
# the caller's environment holds -- a key of the caller's may be restricted,
# or AWS's.
own_shoal() {
	local key='' secret=''
	if [[ -f $dir/aws-credentials ]]; then
		key=$(sed -n 's/^aws_access_key_id = //p' "$dir/aws-credentials")
		secret=$(sed -n 's/^aws_secret_access_key = //p' "$dir/aws-credentials")
		env -u AWS_PROFILE AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" \
			"$bin/shoal" --endpoint "file://$dir/router.endpoint" "$@"
	else
		"$bin/shoal" --endpoint "file://$dir/router.endpoint" "$@"
	fi
}

# --credentials auto: D/credentials, made once -- ACCESS_KEY_ID SECRET with
# no grants (router/auth.c's format).  Random: AKID and 16 hex digits (as
# AWS's ids look), a secret of 30 random bytes in base64 (40 characters).
make_credentials() {
	local f=$dir/credentials key secret
	mkdir -p "$dir"
	if [[ ! -s $f ]]; then
		key=AKID$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
		secret=$(head -c 30 /dev/urandom | base64)
		(umask 077 && printf '%s\n' "# made by deploy/cluster.sh up --credentials auto" \
			"# ACCESS_KEY_ID SECRET [GRANT ...]   (no grants: everything)" \
			"$key $secret" >"$f")
	fi
	chmod 600 "$f"
	echo "$f"
}

# D/aws-credentials from the first key of $http_creds without grants.
write_client_credentials() {
	local key secret
	read -r key secret < <(awk '$1 !~ /^#/ && NF == 2' "$http_creds" | head -n 1) || true
	[[ -n ${key:-} && -n ${secret:-} ]] ||
		die "$http_creds has no unrestricted key (a line 'ACCESS_KEY_ID SECRET' without grants); this script's own calls (shoal status, list-tables) need one"
	(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$key" "$secret" >"$dir/aws-credentials")
	chmod 600 "$dir/aws-credentials"
}

# Where a process listens, and how it is started: 127.0.0.1 and directly, or
# its namespace's address and `ip netns exec`.
node_addr() { if [[ -n $netns ]]; then echo "$netns_subnet.$1"; else echo 127.0.0.1; fi; }
router_addr() { if [[ -n $netns ]]; then echo "$netns_subnet.$((100 + $1))"; else echo 127.0.0.1; fi; }
run_in() { # namespace command...
	local ns=$1; shift
	if [[ -n $netns ]]; then exec ip netns exec "$netns-$ns" "$@"; else exec "$@"; fi
}

# A process that has exited but is not reaped yet (a zombie: its parent, the
# shell that started it, is gone, and some inits reap orphans only every
# couple of seconds) holds no port, file or lock: it counts as gone -- once
# its main thread is a zombie and no other thread is still exiting (they
# share the files and locks until the last one is done).
alive() {
	[[ -f $1 ]] || return 1
	local pid key val state='' threads=''
	pid=$(<"$1")
	kill -0 "$pid" 2>/dev/null || return 1
	while read -r key val _; do
		case $key in
		State:) state=$val ;;
		Threads:) threads=$val ;;
		esac
	done <"/proc/$pid/status" 2>/dev/null
	[[ -n $state ]] || return 1
	! [[ $state == Z && $threads == 1 ]]
}

# Waits until the process in pid file $1 has exited (deadline $2 seconds).
wait_exit() {
	local pidfile=$1 deadline=$((SECONDS + $2))
	while alive "$pidfile"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

stop_pid() { # pidfile hard
	local pidfile=$1 sig=TERM
	alive "$pidfile" || { rm -f "$pidfile"; return 0; }
	(($2)) && sig=KILL
	kill -"$sig" "$(cat "$pidfile")" 2>/dev/null || true
	if ! wait_exit "$pidfile" 20; then
		kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
		wait_exit "$pidfile" 5 || die "process $(cat "$pidfile") did not exit"
	fi
	rm -f "$pidfile"
}

# Waits (at most $2 s) until no process holds the data directory lock of
# node directory $1 (shoal-node's flock): a node killed while busy may keep
# it a little after its process looks gone (seen with AddressSanitizer
# builds: the restart found the directory "in use by another shoal-node").
wait_unlocked() { # node-dir secs
	local lock=$1/shoal-node.lock deadline=$((SECONDS + $2))
	[[ -f $lock ]] && command -v flock >/dev/null || return 0
	until flock -n "$lock" true 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.05
	done
}

router_port() { echo $((base + 2 * ($1 - 1))); }

start_node() { # id [extra shoal-node arguments...]
	local id=$1 pidfile=$dir/node-$1.pid
	shift
	alive "$pidfile" && die "node $id is already running (pid $(cat "$pidfile"))"
	# A node added after `up` (D/node-N.joined) never bootstraps: --join.
	local extra=("$@")
	[[ -f $dir/node-$id.joined && ! " ${extra[*]} " == *" --join "* ]] && extra+=(--join)
	mkdir -p "$dir/node-$id"
	(run_in "n$id" "$bin/shoal-node" --config "$conf" --id "$id" --dir "$dir/node-$id" "${extra[@]}") \
		>>"$dir/node-$id.log" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

# Whether nothing listens on 127.0.0.1:$1.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# One past the highest [node.N] of the cluster file.
next_node_id() {
	awk '/^[[:space:]]*\[node\.[0-9]+\]/ { match($0, /[0-9]+/); v = substr($0, RSTART, RLENGTH) + 0; if (v > m) m = v }
		END { print m + 1 }' "$conf"
}

# cluster.sh add-node: see the top of this file.
add_node() {
	[[ -f $conf && -f $dir/router.endpoint ]] || die "no cluster in $dir (cluster.sh up first)"
	[[ -z $netns ]] || die "add-node does not support --netns clusters yet"
	local id block groups_now max_now g p ip=127.0.0.1 from
	id=$(next_node_id)
	block=$((base + 100 * id))
	groups_now=$(sed -n 's/^groups *= *//p' "$conf" | head -n 1)
	# Every group id the cluster may use ([cluster] max_groups): groups
	# added since the birth may move to the new node.
	max_now=$(sed -n 's/^max_groups *= *//p' "$conf" | head -n 1)
	((${max_now:-0} > ${groups_now:-1})) && groups_now=$max_now
	((block + 90 < 32768)) ||
		die "node $id's ports ($block..$((block + 90))) reach the ephemeral range; start the cluster with a lower --base-port"
	for ((g = 0; g < ${groups_now:-1}; g++)); do port_free $((block + g)) || die "port $((block + g)) (node $id, Raft group $g) is in use"; done
	for p in $((block + 80)) $((block + 90)); do port_free "$p" || die "port $p (node $id) is in use"; done
	cp "$conf" "$conf.before-add"
	{
		echo
		echo "[node.$id]"
		echo "raft = $ip:$block"
		echo "rpc = tcp://$ip:$((block + 80))"
		echo "metrics = $ip:$((block + 90))"
	} >>"$conf"
	# Until it is registered, a failure leaves the cluster file as it was.
	trap 'mv -f "$conf.before-add" "$conf"; rm -f "$dir/node-$id.joined"; alive "$dir/node-$id.pid" || rm -f "$dir/node-$id.pid"' EXIT
	if grep -q '^\[tls\]' "$conf"; then
		"$here/certs.sh" --dir "$dir/tls" --config "$conf" >/dev/null ||
			die "making node $id's certificate failed"
	fi
	touch "$dir/node-$id.joined"
	from=$(stat -c %s "$dir/node-$id.log" 2>/dev/null || echo 0)
	start_node "$id" --join
	# The process must not die at once (an old shoal-node without --join).
	sleep 0.2
	alive "$dir/node-$id.pid" || die "node $id exited at start; see $dir/node-$id.log: $(tail -c +$((from + 1)) "$dir/node-$id.log" | tail -n 3)"
	own_shoal admin add-node --node-id "$id" --raft "$ip:$block" --rpc "tcp://$ip:$((block + 80))" >/dev/null ||
		{ stop_pid "$dir/node-$id.pid" 1; die "registering node $id failed"; }
	trap - EXIT
	rm -f "$conf.before-add"
	read -r _ routers_s base_s http_s tls_s <"$dir/shape"
	echo "$id $routers_s $base_s $http_s $tls_s" >"$dir/shape"
	local deadline=$((SECONDS + wait_secs))
	while ((SECONDS < deadline)); do
		alive "$dir/node-$id.pid" || die "node $id exited; see $dir/node-$id.log"
		if ! port_free $((block + 80)) && own_shoal status --output json >"$dir/status.json" 2>/dev/null &&
			grep -q "\"Id\": $id,\?\$" "$dir/status.json"; then
			echo "node $id added: raft $ip:$block, rpc tcp://$ip:$((block + 80)) (log $dir/node-$id.log)"
			return 0
		fi
		sleep 0.2
	done
	die "node $id did not serve within ${wait_secs}s; see $dir/node-$id.log"
}

# Waits until node `id` (just started, its log `from` bytes long before)
# has opened its groups and listens: it prints "ready".
# A process judged gone is looked at again 0.2 s later before this gives up:
# once, it_jepsen saw a node judged exited while it was starting (its log
# says "ready" 0.1 s later; the teardown then found it alive and stopped it).
# (tail's SIGPIPE when grep -q is done early is not a failure: pipefail.)
wait_node_ready() { # id from
	local id=$1 from=$2 log=$dir/node-$1.log deadline=$((SECONDS + wait_secs))
	while ((SECONDS < deadline)); do
		{ tail -c +$((from + 1)) "$log" 2>/dev/null || true; } | grep -q '^ready$' && return 0
		if ! alive "$dir/node-$id.pid"; then
			sleep 0.2
			{ tail -c +$((from + 1)) "$log" 2>/dev/null || true; } | grep -q '^ready$' && return 0
			alive "$dir/node-$id.pid" || die "node $id exited while starting; see $log"
			echo "cluster.sh: node $id looked gone while starting, then alive (pid $(cat "$dir/node-$id.pid"))" >&2
		fi
		sleep 0.05
	done
	die "node $id did not start within ${wait_secs}s; see $log"
}

start_router() { # id
	local id=$1 pidfile=$dir/router-$1.pid port
	alive "$pidfile" && die "router $id is already running (pid $(cat "$pidfile"))"
	port=$(router_port "$id")
	local http=()
	((http_port > 0)) && http=(--"$(http_scheme)" "$(router_addr "$id"):$((http_port + id - 1))")
	[[ -n $http_creds ]] && http+=(--credentials "$http_creds") # both ports
	(run_in "r$id" "$bin/shoal-router" --config "$conf" --listen "$(client_scheme)://$(router_addr "$id"):$port" \
		--metrics "$(router_addr "$id"):$((port + 1))" "${http[@]}") >>"$dir/router-$id.log" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

client_scheme() { if ((client_tls)); then echo tls+tcp; else echo tcp; fi; }
http_scheme() { if ((client_tls)); then echo https; else echo http; fi; }

write_config() {
	mkdir -p "$dir"
	{
		echo "; written by deploy/cluster.sh"
		echo "[cluster]"
		echo "groups = $groups"
		# Raft ports block + 0 .. 79 are the node's (rpc is block + 80):
		# shoal admin add-group may use group ids up to 79.
		echo "max_groups = 80"
		echo "replication = $replication"
		[[ -z $part_rcu ]] || echo "partition_rcu = $part_rcu"
		[[ -z $part_wcu ]] || echo "partition_wcu = $part_wcu"
		[[ -z $burst ]] || echo "burst_secs = $burst"
		[[ -z $snap_entries ]] || echo "snapshot_entries = $snap_entries"
		[[ -z $segment_mb ]] || echo "raft_segment_mb = $segment_mb"
		[[ -z $scrub_ms ]] || echo "scrub_ms = $scrub_ms"
		[[ -z $ttl_scan_ms ]] || echo "ttl_scan_ms = $ttl_scan_ms"
		[[ -z $ttl_interval_ms ]] || echo "ttl_change_interval_ms = $ttl_interval_ms"
		[[ -z $dead_after_ms ]] || echo "dead_after_ms = $dead_after_ms"
		[[ -z $split_bytes ]] || echo "split_bytes = $split_bytes"
		[[ -z $table_partitions ]] || echo "table_partitions = $table_partitions"
		[[ -z $split_units ]] || echo "split_units = $split_units"
		[[ -z $split_throttled ]] || echo "split_throttled = $split_throttled"
		[[ -z $auto_groups ]] || echo "auto_groups = 1"
		[[ -z $stream_retention_s ]] || echo "stream_retention_s = $stream_retention_s"
		for ((i = 1; i <= nodes; i++)); do
			local block=$((base + 100 * i))
			echo
			echo "[node.$i]"
			echo "raft = $(node_addr "$i"):$block"
			echo "rpc = tcp://$(node_addr "$i"):$((block + 80))"
			echo "metrics = $(node_addr "$i"):$((block + 90))"
		done
		echo
		echo "[router]"
		echo "listen = $(client_scheme)://$(router_addr 1):$(router_port 1)"
		echo "metrics = $(router_addr 1):$(($(router_port 1) + 1))"
		if ((!plain)); then
			echo
			echo "[tls]"
			echo "dir = $dir/tls"
		fi
	} >"$conf"
}

endpoints() {
	local list=() r
	for ((r = 1; r <= routers; r++)); do list+=("$(client_scheme)://$(router_addr "$r"):$(router_port "$r")"); done
	(IFS=,; echo "${list[*]}")
}

# Polls until the routers answer and every storage group has a leader.
wait_serving() {
	local deadline=$((SECONDS + wait_secs))
	# (file://D/router.endpoint: shoal finds D/tls/ca.pem for --tls)
	while ((SECONDS < deadline)); do
		if own_shoal status --output json >"$dir/status.json" 2>/dev/null &&
			! grep -q '"LeaderNode": 0\b\|"Role": "unreachable"' "$dir/status.json" &&
			own_shoal list-tables >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}

case $cmd in
up)
	[[ -x $bin/shoal-node && -x $bin/shoal-router && -x $bin/shoal ]] ||
		die "binaries not found in $bin (run make first, or set SHOAL_BIN)"
	for f in "$dir"/node-*.pid "$dir"/router-*.pid; do
		[[ -e $f ]] && alive "$f" && die "a cluster is already running in $dir (cluster.sh down --dir $dir)"
	done
	if [[ -n $netns ]]; then
		# Whatever fails from here on, nothing stays behind.
		trap 'echo "cluster.sh: up failed; removing what it made" >&2; "$0" down --dir "$dir" >&2' EXIT
		"$here/netns.sh" create "$netns" "$nodes" "$routers" $netns_subnet --dir "$dir"
		read -r _ netns_subnet _ <"$dir/netns"
	fi
	((plain && client_tls)) && die "--tls needs the cluster's certificates (not --plain)"
	write_config
	if ((!plain)); then
		"$here/certs.sh" --dir "$dir/tls" --config "$conf" >/dev/null ||
			die "making the cluster's certificates failed"
	fi
	rm -f "$dir/http.endpoint" "$dir/http.credentials" "$dir/aws-credentials"
	[[ $http_creds == auto ]] && http_creds=$(make_credentials)
	if [[ -n $http_creds ]]; then
		[[ -r $http_creds ]] || die "cannot read the credentials file $http_creds"
		write_client_credentials
		echo "$http_creds" >"$dir/http.credentials"
	fi
	for ((i = 1; i <= nodes; i++)); do start_node "$i"; done
	for ((r = 1; r <= routers; r++)); do start_router "$r"; done
	endpoints >"$dir/router.endpoint"
	echo "$nodes $routers $base $http_port $client_tls" >"$dir/shape"
	((http_port > 0)) && echo "$(http_scheme)://$(router_addr 1):$http_port" >"$dir/http.endpoint"
	if ! wait_serving; then
		echo "cluster.sh: the cluster did not become ready within ${wait_secs}s; logs in $dir" >&2
		tail -n 5 "$dir"/*.log >&2 || true
		exit 1
	fi
	trap - EXIT
	echo "cluster up: $nodes nodes, $routers router(s), $groups groups; endpoint $(cat "$dir/router.endpoint")$( ((http_port > 0)) && echo ", http $(cat "$dir/http.endpoint")") (dir $dir)"
	[[ -z $http_creds ]] ||
		echo "clients must sign: keys in $http_creds; an unrestricted one in $dir/aws-credentials (shoal --endpoint file://$dir/router.endpoint finds it; boto3 and aws: AWS_SHARED_CREDENTIALS_FILE=$dir/aws-credentials)"
	;;
status)
	for f in "$dir"/node-*.pid "$dir"/router-*.pid; do
		[[ -e $f ]] || continue
		name=$(basename "$f" .pid)
		if alive "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
	done
	[[ -f $dir/router.endpoint ]] && own_shoal status
	;;
stop-node)
	[[ -n $target ]] || die "stop-node needs a node id"
	stop_pid "$dir/node-$target.pid" "$hard"
	wait_unlocked "$dir/node-$target" 20 || die "node $target's data directory is still locked"
	;;
start-node)
	[[ -n $target ]] || die "start-node needs a node id"
	from=$(stat -c %s "$dir/node-$target.log" 2>/dev/null || echo 0)
	start_node "$target"
	wait_node_ready "$target" "$from"
	;;
wait)
	wait_serving || die "the cluster did not serve within ${wait_secs}s; logs in $dir"
	;;
stop-router)
	[[ -n $target ]] || die "stop-router needs a router id"
	stop_pid "$dir/router-$target.pid" "$hard"
	;;
start-router)
	[[ -n $target ]] || die "start-router needs a router id"
	start_router "$target"
	;;
add-node)
	add_node
	;;
down)
	for f in "$dir"/router-*.pid "$dir"/node-*.pid; do
		[[ -e $f ]] && stop_pid "$f" "$hard"
	done
	[[ -z $netns ]] || "$here/netns.sh" destroy --dir "$dir"
	echo "cluster down ($dir)"
	;;
*) die "unknown command $cmd" ;;
esac
