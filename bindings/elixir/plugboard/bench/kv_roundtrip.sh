#!/usr/bin/env bash
# The multi-host key-value store's cost per call across two nodes (bench/kv_roundtrip.exs).
#
#   bindings/elixir/plugboard/bench/kv_roundtrip.sh [BUILD_DIR] [CALLS]      (after scripts/setup.sh)
set -euo pipefail
BUILD_DIR=${1:-${BUILD_DIR:-}}
. "$(dirname "$0")/env.sh"
mix run --no-start bench/kv_roundtrip.exs "${2:-2000}"
