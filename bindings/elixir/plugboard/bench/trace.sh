#!/usr/bin/env bash
# What Plugboard.Trace costs from Elixir (bench/trace.exs): Plugboard.run! of add f32[4] and a
# Plugboard.Trace.span/4 around nothing, tracing off and on in alternating rounds, in reductions and
# in ns a call; then stop/0 and to_json/1 of a trace of 200,000 spans. On the 0.81 CPU plugin.
#
#   bindings/elixir/plugboard/bench/trace.sh [BUILD_DIR] [ROUNDS]      (after scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=test
export MIX_HOME=${MIX_HOME:-$build/mix-home} HEX_HOME=${HEX_HOME:-$build/hex-home}
. "$root/scripts/hex_registry.sh"
hex_deps_get "$root/bindings/elixir/plugboard"
cd "$root/bindings/elixir/plugboard"
mix compile >/dev/null
mix run bench/trace.exs "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" ${2:+"$2"} 2> >(grep -v "^[EWI]0000" >&2)
