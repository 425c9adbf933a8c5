#!/usr/bin/env bash
# netns.sh -- the network of a test cluster run with `cluster.sh up --netns
# PREFIX`: one network namespace per process, and faults injected by the
# kernel.  cluster.sh calls `create` and `destroy`; the fault commands are
# also reachable as `cluster.sh <command> ... --dir D`.
#
#   netns.sh check                        can namespaces be made here?  (exit 0,
#                                         or 1 with the reason on stdout)
#   netns.sh create PREFIX NODES ROUTERS [SUBNET] --dir D
#   netns.sh destroy --dir D              (also: netns.sh destroy-prefix PREFIX)
#   netns.sh addr EP --dir D              the address of an endpoint
#   netns.sh exec EP CMD... --dir D       run CMD in the endpoint's namespace
#   netns.sh cut A B --dir D              A and B cannot reach each other
#   netns.sh oneway A B --dir D           A cannot send to B (B still sends to A)
#   netns.sh isolate A --dir D            A cut from every other node; routers
#                                         still reach it, it still reaches them
#   netns.sh heal A B --dir D             undo cut/oneway between A and B (both ways)
#   netns.sh heal-all --dir D             every cut, loss and netem removed
#   netns.sh loss A PCT --dir D           drop PCT% of the packets to and from A
#                                         (nftables numgen; 0 removes it)
#   netns.sh netem A ARGS... --dir D      `tc qdisc replace ... netem ARGS` on both
#                                         ends of A's veth ("delay 50ms 10ms loss 5%
#                                         reorder 25%"); "netem A off" removes it.
#                                         Exit 3 if the kernel has no netem.
#   netns.sh slow A RATE --dir D          a slow link: both ends of A's veth send at
#                                         most RATE (tc tbf, e.g. "1mbit"), packets
#                                         queue up to 2 s and are dropped past it;
#                                         "slow A off" removes it (as heal-all does).
#                                         tbf is in every kernel with tc; netem's
#                                         delay and reordering are not (see netem).
#   netns.sh probe A B PORT --dir D       TCP connect from A to B:PORT within 1 s:
#                                         prints "reachable" (connected or refused:
#                                         packets flow) or "unreachable" (no answer)
#                                         -- both directions must flow for a TCP answer
#   netns.sh probe-udp A B PORT --dir D   one datagram from A to B:PORT, received
#                                         by a listener started in B: "reachable"
#                                         or "unreachable" (one direction only)
#
# Endpoints (A, B): a node id ("2" or "n2"), a router ("r1"), or "host" (the
# root namespace, where clients run).
#
# Layout, all on this machine.  SUBNET ("10.X.Y", default derived from PREFIX,
# 10.200-249.*) is a private /24; node i is SUBNET.i in namespace PREFIX-ni,
# router r is SUBNET.(100+r) in namespace PREFIX-rr, each with one veth (host
# side named like its namespace, namespace side eth0) on the bridge PREFIX-br
# in the root namespace.  The bridge holds SUBNET.254: clients and the
# cluster.sh CLI run in the root namespace and reach the routers over the
# bridge.  The namespaces have no default route: nothing leaves the machine.
# Faults are filtered where packets cross the bridge, in one nftables table
# (bridge family, `shoal_PREFIX`, forward hook): a set of (source, destination)
# address pairs that are dropped, and per-node loss rules.  Drops are silent
# (no RST, no ICMP), as on a cut cable.  D/netns records
# "PREFIX SUBNET NODES ROUTERS".
set -euo pipefail

die() { echo "netns.sh: $*" >&2; exit 1; }

cmd=${1:-}; [[ -n $cmd ]] || die "usage: netns.sh check|create|destroy|addr|exec|cut|oneway|isolate|heal|heal-all|loss|netem|slow|probe ..."
shift
dir= pos=()
while (($#)); do
	case $1 in
	--dir) dir=$2; shift 2 ;;
	--base-port) shift 2 ;; # passed along by cluster.sh; ports are its business
	--) shift; pos+=("$@"); break ;;
	*) pos+=("$1"); shift ;;
	esac
done

# --- the layout, from D/netns --------------------------------------------------
prefix= subnet= nodes=0 routers=0
load() {
	[[ -n $dir && -f $dir/netns ]] || die "no namespaced cluster in ${dir:-(no --dir)}"
	read -r prefix subnet nodes routers <"$dir/netns"
}
table() { echo "shoal_$prefix"; }
bridge() { echo "$prefix-br"; }

# endpoint -> "namespace address"; "host" has namespace "-".
resolve() {
	local ep=$1
	case $ep in
	host) echo "- $subnet.254" ;;
	r[0-9]*) ((${ep#r} >= 1 && ${ep#r} <= routers)) || die "no router ${ep#r}"
		echo "$prefix-$ep $subnet.$((100 + ${ep#r}))" ;;
	n[0-9]* | [0-9]*) local i=${ep#n}
		((i >= 1 && i <= nodes)) || die "no node $i"
		echo "$prefix-n$i $subnet.$i" ;;
	*) die "bad endpoint $ep (a node id, n<i>, r<r> or host)" ;;
	esac
}
ns_of() { local r; r=$(resolve "$1"); echo "${r% *}"; }
addr_of() { local r; r=$(resolve "$1"); echo "${r#* }"; }
name_of() { case $1 in host | r*) echo "$1" ;; *) echo "n${1#n}" ;; esac; }

# Runs a command in an endpoint's namespace (the root namespace for host).
in_ns() {
	local ns=$1; shift
	if [[ $ns == - ]]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

# --- creation and removal -------------------------------------------------------
derive_subnet() { # prefix -> 10.X.Y, X in 200..249
	local h
	h=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	echo "10.$((200 + h % 50)).$(((h / 50) % 256))"
}

# Removes everything a PREFIX may have: namespaces (their veth ends go with
# them), host veths, the bridge, the nftables table.  Every step tolerates
# absence: it also cleans up after a create that failed halfway.
destroy_prefix() {
	local p=$1 ns link
	nft delete table bridge "shoal_$p" 2>/dev/null && echo "netns: deleted nftables table bridge shoal_$p"
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$p-[nr][0-9]+\$" || true); do
		ip netns delete "$ns" && echo "netns: deleted namespace $ns"
	done
	for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
		grep -E "^$p-([nr][0-9]+|br)\$" || true); do
		ip link delete "$link" 2>/dev/null && echo "netns: deleted link $link"
	done
	return 0
}

check() {
	((EUID == 0)) || { echo "not root (namespaces need CAP_NET_ADMIN)"; return 1; }
	command -v ip >/dev/null || { echo "no ip command (Debian package iproute2)"; return 1; }
	command -v nft >/dev/null || { echo "no nft command (Debian package nftables; deploy/install-deps.sh)"; return 1; }
	local ns=shoalchk$$
	ip netns add "$ns" 2>/dev/null || { echo "ip netns add failed"; return 1; }
	if ! ip link add "$ns" type veth peer name eth0 netns "$ns" 2>/dev/null; then
		ip netns delete "$ns"
		echo "cannot create veth pairs"
		return 1
	fi
	ip link delete "$ns" 2>/dev/null || true
	ip netns delete "$ns"
	if ! nft add table bridge "$ns" 2>/dev/null; then
		echo "nftables bridge tables unavailable"
		return 1
	fi
	nft delete table bridge "$ns"
	return 0
}

add_endpoint() { # namespace address
	local ns=$1 addr=$2
	ip netns add "$ns"
	ip link add "$ns" type veth peer name eth0 netns "$ns"
	ip link set "$ns" master "$(bridge)" up
	ip -n "$ns" addr add "$addr/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
}

create() {
	[[ ${#pos[@]} -ge 3 ]] || die "usage: netns.sh create PREFIX NODES ROUTERS [SUBNET] --dir D"
	prefix=${pos[0]} nodes=${pos[1]} routers=${pos[2]} subnet=${pos[3]:-}
	[[ -n $dir ]] || die "create needs --dir"
	[[ $prefix =~ ^[A-Za-z][A-Za-z0-9]{0,8}$ ]] ||
		die "PREFIX must be 1-9 letters/digits, starting with a letter (link names are <= 15 bytes)"
	((nodes >= 1 && nodes <= 99 && routers >= 1 && routers <= 99)) || die "1-99 nodes and routers"
	[[ -n $subnet ]] || subnet=$(derive_subnet "$prefix")
	[[ $subnet =~ ^10\.([0-9]{1,3})\.([0-9]{1,3})$ ]] && ((BASH_REMATCH[1] < 256 && BASH_REMATCH[2] < 256)) ||
		die "SUBNET must be 10.X.Y (a private /24)"
	ip netns list | grep -qE "^$prefix-[nr][0-9]+( |\$)" && die "namespaces $prefix-* exist already (netns.sh destroy-prefix $prefix)"
	[[ -z $(ip -4 route show to match "$subnet.1" | grep -v '^default') ]] ||
		die "$subnet.0/24 is already routed here; pick another --netns-subnet"
	mkdir -p "$dir"
	echo "$prefix $subnet $nodes $routers" >"$dir/netns"
	# A failure from here on removes what was made.
	trap 'destroy_prefix "$prefix" >&2' ERR
	ip link add "$(bridge)" type bridge
	ip addr add "$subnet.254/24" dev "$(bridge)"
	ip link set "$(bridge)" up
	local i
	for ((i = 1; i <= nodes; i++)); do add_endpoint "$prefix-n$i" "$subnet.$i"; done
	for ((i = 1; i <= routers; i++)); do add_endpoint "$prefix-r$i" "$subnet.$((100 + i))"; done
	nft -f - <<EOF
table bridge $(table) {
	set cut { type ipv4_addr . ipv4_addr; }
	chain forward {
		type filter hook forward priority 0; policy accept;
		ip saddr . ip daddr @cut drop
	}
}
EOF
	trap - ERR
	echo "netns: $nodes node and $routers router namespaces $prefix-*, subnet $subnet.0/24, bridge $(bridge) at $subnet.254"
}

# --- faults -------------------------------------------------------------------------
set_pair() { # add|delete A B
	nft "$1" element bridge "$(table)" cut "{ $(addr_of "$2") . $(addr_of "$3") }" 2>/dev/null ||
		[[ $1 == delete ]] # deleting a pair that is not there is fine
}

# Handles of the rules whose comment is $1.
rule_handles() {
	nft -a list chain bridge "$(table)" forward | grep -F "comment \"$1\"" | sed -n 's/.*# handle \([0-9]*\)$/\1/p'
}

fault() {
	local a b i n
	case $cmd in
	cut)
		a=${pos[0]:?cut A B} b=${pos[1]:?cut A B}
		set_pair add "$a" "$b"; set_pair add "$b" "$a"
		echo "netns: cut $(name_of "$a") ($(addr_of "$a")) <-/-> $(name_of "$b") ($(addr_of "$b"))" ;;
	oneway)
		a=${pos[0]:?oneway A B} b=${pos[1]:?oneway A B}
		set_pair add "$a" "$b"
		echo "netns: one-way cut: $(name_of "$a") ($(addr_of "$a")) -/-> $(name_of "$b") ($(addr_of "$b")); the reverse direction still flows" ;;
	isolate)
		a=${pos[0]:?isolate A}
		n=()
		for ((i = 1; i <= nodes; i++)); do
			[[ $(addr_of "$i") == "$(addr_of "$a")" ]] && continue
			set_pair add "$a" "$i"; set_pair add "$i" "$a"; n+=("n$i")
		done
		echo "netns: isolated $(name_of "$a") ($(addr_of "$a")) from nodes ${n[*]}; routers and host still reach it" ;;
	heal)
		a=${pos[0]:?heal A B} b=${pos[1]:?heal A B}
		set_pair delete "$a" "$b"; set_pair delete "$b" "$a"
		echo "netns: healed $(name_of "$a") <-> $(name_of "$b")" ;;
	heal-all)
		nft flush set bridge "$(table)" cut
		for h in $(nft -a list chain bridge "$(table)" forward | grep -F 'comment "loss-' |
			sed -n 's/.*# handle \([0-9]*\)$/\1/p'); do
			nft delete rule bridge "$(table)" forward handle "$h"
		done
		for ((i = 1; i <= nodes; i++)); do netem_off "$i"; done
		for ((i = 1; i <= routers; i++)); do netem_off "r$i"; done
		echo "netns: healed all: no cuts, no loss, no netem or slow links" ;;
	loss)
		a=${pos[0]:?loss A PCT} n=${pos[1]:?loss A PCT}
		[[ $n =~ ^[0-9]+$ ]] && ((n <= 100)) || die "PCT must be 0-100"
		local tag="loss-$(name_of "$a")" h
		for h in $(rule_handles "$tag"); do nft delete rule bridge "$(table)" forward handle "$h"; done
		local m=()
		((n < 100)) && m=(numgen random mod 100 '<' "$n")
		if ((n > 0)); then
			nft add rule bridge "$(table)" forward ip saddr "$(addr_of "$a")" "${m[@]}" drop comment "\"$tag\""
			nft add rule bridge "$(table)" forward ip daddr "$(addr_of "$a")" "${m[@]}" drop comment "\"$tag\""
		fi
		echo "netns: loss $n% on packets to and from $(name_of "$a") ($(addr_of "$a"))" ;;
	netem)
		a=${pos[0]:?netem A ARGS|off}
		[[ $(ns_of "$a") != - ]] || die "netem applies to a node or router"
		if [[ ${pos[1]:-} == off ]]; then
			netem_off "$a"
			echo "netns: netem removed from $(name_of "$a")"
			return
		fi
		[[ ${#pos[@]} -ge 2 ]] || die "netem A ARGS (e.g. delay 50ms 10ms loss 5% reorder 25%)"
		local err
		if ! err=$(tc qdisc replace dev "$(ns_of "$a")" root netem "${pos[@]:1}" 2>&1); then
			if grep -q 'qdisc kind is unknown' <<<"$err"; then
				echo "netns.sh: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM); use loss for packet loss" >&2
				exit 3
			fi
			die "tc netem ${pos[*]:1}: $err"
		fi
		tc -n "$(ns_of "$a")" qdisc replace dev eth0 root netem "${pos[@]:1}"
		echo "netns: netem ${pos[*]:1} on both ends of $(name_of "$a")'s veth" ;;
	slow)
		a=${pos[0]:?slow A RATE|off} n=${pos[1]:?slow A RATE|off}
		[[ $(ns_of "$a") != - ]] || die "slow applies to a node or router"
		if [[ $n == off ]]; then
			netem_off "$a"
			echo "netns: slow link removed from $(name_of "$a")"
			return
		fi
		tc qdisc replace dev "$(ns_of "$a")" root tbf rate "$n" burst 32kbit latency 2s
		tc -n "$(ns_of "$a")" qdisc replace dev eth0 root tbf rate "$n" burst 32kbit latency 2s
		echo "netns: $(name_of "$a")'s link slowed to $n (both ways)" ;;
	probe)
		a=${pos[0]:?probe A B PORT} b=${pos[1]:?probe A B PORT} n=${pos[2]:?probe A B PORT}
		local out rc=0
		out=$(in_ns "$(ns_of "$a")" timeout 1 bash -c "exec 3<>/dev/tcp/$(addr_of "$b")/$n" 2>&1) || rc=$?
		if ((rc == 0)) || grep -q 'refused' <<<"$out"; then
			echo "reachable: $(name_of "$a") -> $(name_of "$b") ($(addr_of "$b"):$n)"
		elif ((rc == 124)); then
			echo "unreachable: $(name_of "$a") -> $(name_of "$b") ($(addr_of "$b"):$n): no answer within 1 s"
		else
			die "probe $a -> $b: $out"
		fi ;;
	probe-udp)
		a=${pos[0]:?probe-udp A B PORT} b=${pos[1]:?probe-udp A B PORT} n=${pos[2]:?probe-udp A B PORT}
		local py got
		py=$(command -v /usr/bin/python3 python3 | head -n 1)
		[[ -n $py ]] || die "probe-udp needs python3"
		# The listener binds first (it prints "bound"), then A sends a few
		# datagrams; it prints what arrived within 1 s.
		coproc LISTEN { in_ns "$(ns_of "$b")" "$py" -c "
import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('$(addr_of "$b")',$n)); s.settimeout(1.0)
print('bound',flush=True)
try: print(s.recv(64).decode(),flush=True)
except socket.timeout: print('none',flush=True)
"; }
		local fd pid=$LISTEN_PID
		exec {fd}<&"${LISTEN[0]}"
		read -r got <&"$fd" || got=
		[[ $got == bound ]] || die "probe-udp: the listener in $(name_of "$b") did not start"
		for i in 1 2 3; do
			in_ns "$(ns_of "$a")" bash -c "echo probe >/dev/udp/$(addr_of "$b")/$n" 2>/dev/null || true
		done
		read -r got <&"$fd" || got=none
		exec {fd}<&-
		wait "$pid" 2>/dev/null || true
		if [[ $got == probe ]]; then
			echo "reachable (udp): $(name_of "$a") -> $(name_of "$b") ($(addr_of "$b"):$n)"
		else
			echo "unreachable (udp): $(name_of "$a") -> $(name_of "$b") ($(addr_of "$b"):$n): nothing within 1 s"
		fi ;;
	esac
}

netem_off() {
	local ns
	ns=$(ns_of "$1")
	tc qdisc del dev "$ns" root 2>/dev/null || true
	tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
}

case $cmd in
check) check ;;
create) create ;;
destroy)
	[[ -n $dir ]] || die "destroy needs --dir"
	[[ -f $dir/netns ]] || exit 0
	read -r prefix _ <"$dir/netns"
	destroy_prefix "$prefix"
	rm -f "$dir/netns" ;;
destroy-prefix) destroy_prefix "${pos[0]:?destroy-prefix PREFIX}" ;;
addr) load; addr_of "${pos[0]:?addr EP}" ;;
exec) load; ns=$(ns_of "${pos[0]:?exec EP CMD...}"); in_ns "$ns" "${pos[@]:1}" ;;
cut | oneway | isolate | heal | heal-all | loss | netem | slow | probe | probe-udp) load; fault ;;
*) die "unknown command $cmd" ;;
esac
