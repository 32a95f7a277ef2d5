#!/usr/bin/env bash
# Runs one of this folder's benchmark scripts once per CPU plugin, over the install tree of a C++
# build (what overhead.sh and parked.sh do). :telemetry from Hex (scripts/hex_registry.sh's local
# registry while it runs, or hex.pm).
#
#   bindings/elixir/plugboard/bench/each_plugin.sh SCRIPT.exs [BUILD_DIR]      (after scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
script=$1
build=$(cd "${2:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=prod
export MIX_HOME=${MIX_HOME:-$build/mix-home} HEX_HOME=${HEX_HOME:-$build/hex-home}
. "$root/scripts/hex_registry.sh"
hex_deps_get "$root/bindings/elixir/plugboard"
(cd "$root/bindings/elixir/plugboard" && mix compile >/dev/null)
for plugin in "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "$deps/files/xla_cpu_106/libpjrt_cpu.so" "$deps/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"; do
  # The newer plugins log a warning per compile-cache entry loaded on this processor: not a figure.
  (cd "$root/bindings/elixir/plugboard" && mix run --no-start "bench/$script" "$plugin" 2> >(grep -v cpu_aot_loader >&2))
  echo
done
