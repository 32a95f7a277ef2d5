#!/usr/bin/env bash
# The multi-host key-value store's cost per call across two nodes (bench/kv_roundtrip.exs).
#
#   bindings/elixir/plugboard/bench/kv_roundtrip.sh [BUILD_DIR] [CALLS]      (after scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=prod
export MIX_HOME=${MIX_HOME:-$build/mix-home} HEX_HOME=${HEX_HOME:-$build/hex-home}
. "$root/scripts/hex_registry.sh"
hex_deps_get "$root/bindings/elixir/plugboard"
cd "$root/bindings/elixir/plugboard"
mix compile >/dev/null
mix run --no-start bench/kv_roundtrip.exs "${2:-2000}"
