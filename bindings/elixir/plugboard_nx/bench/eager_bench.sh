#!/usr/bin/env bash
# Plugboard.Nx.Backend's eager operations against a cached jit and Nx.BinaryBackend
# (bench/eager_bench.exs) on each CPU plugin, with the environment the tests use (bench/env.sh).
set -euo pipefail
. "$(dirname "$0")/env.sh"
for p in "${bench_plugins[@]}"; do
  PLUGBOARD_BENCH_PLUGIN="$p" MIX_ENV=prod mix run bench/eager_bench.exs 2>&1 | grep -v "^[EW]0000"
  echo
done
