#!/usr/bin/env bash
# make demo: the storage engine on the seed 002 edtech-platform table.
# (The cluster issue turns this into a local multi-node cluster demo.)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
exec "$build/bin/st_demo" deploy/demo/edtech-items.json
