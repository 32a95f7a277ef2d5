#!/usr/bin/env bash
# Nx on plugboard's benchmarks (bench/nx_bench.exs) on each CPU plugin, with the environment the
# tests use (bench/env.sh).
set -euo pipefail
. "$(dirname "$0")/env.sh"
each_plugin bench/nx_bench.exs
