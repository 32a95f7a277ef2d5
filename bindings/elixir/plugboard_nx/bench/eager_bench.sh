#!/usr/bin/env bash
# Plugboard.Nx.Backend's eager operations against a cached jit and Nx.BinaryBackend
# (bench/eager_bench.exs) on each CPU plugin, with the environment the tests use (bench/env.sh).
set -euo pipefail
. "$(dirname "$0")/env.sh"
each_plugin bench/eager_bench.exs
