#!/usr/bin/env bash
# Installs every Debian 12 package Shoal needs to build, test and run.
# Idempotent and non-interactive; works as root or through sudo.
# Usage: deploy/install-deps.sh [--check]   (--check: exit 1 if anything is missing, install nothing)
set -euo pipefail

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
  jq                              # make demo: compact JSON output
  nettle-dev                      # SHA-256 / HMAC for SigV4 on the HTTP endpoint
  zlib1g-dev                      # CRC-32 (x-amz-crc32) on the HTTP endpoint
  python3-boto3 awscli            # tests/integration/http: DynamoDB's own clients
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ ${1:-} == --check ]]; then
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
