#!/usr/bin/env bash
# certs.sh -- makes a cluster's certificate authority and the certificates of
# its nodes and routers (common/tls.h says how they are used).
#
#   deploy/certs.sh --dir TLSDIR --config cluster.ini [--days N] [--force]
#   deploy/certs.sh --dir TLSDIR --nodes N            [--days N] [--force]
#
# In TLSDIR (created 0700):
#   ca.pem, ca.key     the cluster CA (ECDSA P-256); ca.key signs new members:
#                      keep it, but off the cluster's machines in production
#   node-<id>.pem      each node's certificate and key (one file, 0600), for
#                      every [node.<id>] of the cluster file (or ids 1..N)
#   router.pem         the routers' certificate and key (0600)
# Every certificate names 127.0.0.1, localhost and the node's Raft host as
# subject alternative names, and may serve and dial (mutual TLS).
# An existing CA is reused and existing certificates are kept (so a node can
# be added by running this again), unless --force.  Then point the cluster
# file at the directory:
#   [tls]
#   dir = TLSDIR
# deploy/cluster.sh up does all this itself (TLSDIR = its --dir/tls).
set -euo pipefail

die() { echo "certs.sh: $*" >&2; exit 1; }

dir="" config="" nodes="" days=3650 force=0
while (($#)); do
	case $1 in
	--dir) dir=$2; shift 2 ;;
	--config) config=$2; shift 2 ;;
	--nodes) nodes=$2; shift 2 ;;
	--days) days=$2; shift 2 ;;
	--force) force=1; shift ;;
	-h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument: $1 (--help)" ;;
	esac
done
[[ -n $dir ]] || die "--dir is required"
[[ -n $config || -n $nodes ]] || die "--config FILE or --nodes N is required"
command -v openssl >/dev/null || die "openssl is not installed (deploy/install-deps.sh installs it)"

# "id host" per node: from the cluster file's [node.<id>] raft = host:port.
members() {
	if [[ -n $config ]]; then
		[[ -r $config ]] || die "cannot read $config"
		awk '
			/^[[:space:]]*\[node\.[0-9]+\]/ { match($0, /[0-9]+/); id = substr($0, RSTART, RLENGTH); next }
			/^[[:space:]]*\[/ { id = ""; next }
			id != "" && /^[[:space:]]*raft[[:space:]]*=/ {
				v = $0; sub(/^[^=]*=[[:space:]]*/, "", v); sub(/[[:space:]]*;.*$/, "", v)
				sub(/:[0-9]+[[:space:]]*$/, "", v); print id, v
			}' "$config"
	else
		for ((i = 1; i <= nodes; i++)); do echo "$i 127.0.0.1"; done
	fi
}

umask 077
mkdir -p "$dir"
chmod 700 "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ((force)) || [[ ! -s $dir/ca.pem || ! -s $dir/ca.key ]]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
		-keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" \
		-subj "/O=Shoal/CN=Shoal cluster CA" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>"$tmp/err" ||
		die "making the CA failed: $(cat "$tmp/err")"
	chmod 600 "$dir/ca.key"
	chmod 644 "$dir/ca.pem"
	force=1 # new CA: every certificate is remade
fi

# issue NAME HOST
issue() {
	local name=$1 host=$2 out=$dir/$1.pem san="DNS:localhost,IP:127.0.0.1"
	((force)) || [[ ! -s $out ]] || return 0
	if [[ $host =~ ^[0-9.]+$ ]]; then
		[[ $host == 127.0.0.1 ]] || san+=",IP:$host"
	elif [[ $host != localhost ]]; then
		san+=",DNS:$host"
	fi
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
		-keyout "$tmp/$name.key" -out "$tmp/$name.csr" -subj "/O=Shoal/CN=$name" 2>"$tmp/err" ||
		die "$name: $(cat "$tmp/err")"
	printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
		"keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth,clientAuth" >"$tmp/ext"
	openssl x509 -req -sha256 -in "$tmp/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-CAcreateserial -CAserial "$dir/ca.srl" -days "$days" -extfile "$tmp/ext" \
		-out "$tmp/$name.crt" 2>"$tmp/err" || die "$name: $(cat "$tmp/err")"
	cat "$tmp/$name.crt" "$tmp/$name.key" >"$out.new"
	chmod 600 "$out.new"
	mv "$out.new" "$out"
	echo "certs.sh: $out ($san)"
}

n=0
while read -r id host; do
	issue "node-$id" "$host"
	n=$((n + 1))
done < <(members)
((n > 0)) || die "no [node.<id>] with a raft address in $config"
issue router 127.0.0.1
