#!/usr/bin/env bash
# Elixir's overhead over the C++ library, per CPU plugin (bench/overhead.exs: the C++ baseline is
# measured in the same process, interleaved with the Elixir calls).
#
#   bindings/elixir/bench/overhead.sh [BUILD_DIR]      (after scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=prod
(cd "$root/bindings/elixir" && mix compile >/dev/null)
for plugin in "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "$deps/files/xla_cpu_106/libpjrt_cpu.so" "$deps/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"; do
  (cd "$root/bindings/elixir" && mix run --no-start bench/overhead.exs "$plugin")
  echo
done
