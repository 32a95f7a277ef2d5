#!/usr/bin/env bash
# Elixir's overhead over the C++ library, per CPU plugin: the C++ dispatch figure comes from
# plugboard_bench (build/bench) in the same run, then bench/overhead.exs measures the Elixir side.
#
#   bindings/elixir/bench/overhead.sh [BUILD_DIR]      (after scripts/setup.sh; builds the benchmark)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
if ! grep -q '^PLUGBOARD_BENCH:BOOL=ON' "$build/CMakeCache.txt"; then cmake -S "$root" -B "$build" -DPLUGBOARD_BENCH=ON >/dev/null; fi
cmake --build "$build" --target plugboard_bench --parallel "$(nproc)" >/dev/null
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=prod
(cd "$root/bindings/elixir" && mix compile >/dev/null)
for plugin in "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "$deps/files/xla_cpu_106/libpjrt_cpu.so" "$deps/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"; do
  # The "add f32[4]" row: raw C API, plugboard (ns/iter).
  cxx=$("$build/bench/plugboard_bench" --plugin "$plugin" --only dispatch | awk '/add f32\[4\]/ {print $4; exit}')
  (cd "$root/bindings/elixir" && CXX_NS="$cxx.0" mix run --no-start bench/overhead.exs "$plugin")
  echo
done
