#!/usr/bin/env bash
# Runs one of this folder's benchmark scripts once per CPU plugin, over the install tree of a C++
# build (what overhead.sh, parked.sh and telemetry.sh do; the environment is bench/env.sh's).
#
#   bindings/elixir/plugboard/bench/each_plugin.sh SCRIPT.exs [BUILD_DIR]      (after scripts/setup.sh)
set -euo pipefail
script=$1
BUILD_DIR=${2:-${BUILD_DIR:-}}
. "$(dirname "$0")/env.sh"
for plugin in "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "$deps/files/xla_cpu_106/libpjrt_cpu.so" "$deps/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"; do
  # The newer plugins log a warning per compile-cache entry loaded on this processor: not a figure.
  mix run --no-start "bench/$script" "$plugin" 2> >(grep -v cpu_aot_loader >&2)
  echo
done
