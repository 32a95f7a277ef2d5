#!/usr/bin/env bash
# What Plugboard.Trace costs from Elixir (bench/trace.exs): Plugboard.run! of add f32[4] and a
# Plugboard.Trace.span/4 around nothing, tracing off and on in alternating rounds, in reductions and
# in ns a call; then stop/0 and to_json/1 of a trace of 200,000 spans. On the 0.81 CPU plugin.
#
#   bindings/elixir/plugboard/bench/trace.sh [BUILD_DIR] [ROUNDS]      (after scripts/setup.sh)
set -euo pipefail
BUILD_DIR=${1:-${BUILD_DIR:-}}
export MIX_ENV=test
. "$(dirname "$0")/env.sh"
mix run bench/trace.exs "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" ${2:+"$2"} 2> >(grep -v "^[EWI]0000" >&2)
