#!/usr/bin/env bash
# Installs every Debian 12 package Shoal needs to build, test and run.
# Idempotent and non-interactive; works as root or through sudo.
# Usage: deploy/install-deps.sh [--check] [--bench] [--peers]
#   --check: exit 1 if anything is missing, install nothing
#   --bench: also wrk, the HTTP load tool of `make bench-http` (tests/tools/bench-http.sh
#            passes it; make test and make demo never do)
#   --peers: also what `make bench-peers` needs (only that target passes it; make test and
#            make demo never do): etcd-server etcd-client wrk, and nodejs npm when no `node`
#            or `npm` is on PATH (a Node.js already installed, e.g. NodeSource's, is kept).
#            Under systemd, Debian's etcd-server starts its own etcd on 2379/2380; the
#            benchmark uses other ports and its own data directories.
set -euo pipefail

check=0 bench=0 peers=0
for a in "$@"; do
  case $a in
  --check) check=1 ;;
  --bench) bench=1 ;;
  --peers) peers=1 ;;
  *) echo "install-deps: unknown option $a" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential pkg-config
  libnng-dev                      # messaging: REQ/REP, HTTP server
  libprotobuf-c-dev protobuf-c-compiler  # wire format
  liblmdb-dev                     # storage
  libraft-dev libuv1-dev          # consensus (canonical/raft 0.15) and its I/O loop
  check                           # unit tests
  libxxhash-dev                   # partition hashing
  libjansson-dev                  # DynamoDB JSON
  libinih-dev                     # config files
  clang-format                    # make format
  clang libclang-rt-14-dev        # make fuzz and make test's fuzz suite: libFuzzer, ASan, UBSan
  jq                              # make demo: compact JSON output
  nettle-dev                      # SHA-256 / HMAC for SigV4 on the HTTP endpoint
  zlib1g-dev                      # CRC-32 (x-amz-crc32) on the HTTP endpoint
  python3-boto3 awscli            # tests/integration/http: DynamoDB's own clients
  gnuplot-nox                     # tests/integration/it_hot (make hot): the PNG plots
  tmux                            # tests/integration/it_top: `shoal top` in a real terminal
  nftables                        # tests/integration/it_netns: faults between namespaces (deploy/netns.sh)
  openssl                         # deploy/certs.sh: the cluster CA and the members' certificates
  libmbedtls-dev                  # node/transport_tls.c: Raft's TLS in the node's loop (nng's TLS library)
)
if ((bench)) && ! ((peers)); then
  PACKAGES+=(wrk)   # make bench-http: the HTTP load tool
fi
if ((peers)); then
  PACKAGES+=(etcd-server etcd-client wrk)   # make bench-peers: etcd 3.4 and the HTTP load tool
  command -v node >/dev/null && command -v npm >/dev/null || PACKAGES+=(nodejs npm)  # dynalite
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi
if ((check)); then
  echo "missing packages: ${missing[*]}" >&2
  exit 1
fi

SUDO=
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo -n"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
