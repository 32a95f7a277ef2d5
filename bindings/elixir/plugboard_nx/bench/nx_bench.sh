#!/usr/bin/env bash
# Nx on plugboard's benchmarks (bench/nx_bench.exs) on each CPU plugin, with the environment the
# tests use (bench/env.sh).
#
#   bench/nx_bench.sh              prints the figures
#   bench/nx_bench.sh --record     also writes them to docs/data/nx_bench-PLUGIN.json (with the machine,
#                                  the software and the command) and remakes the Nx guide's table and
#                                  plot from them (bench/nx_figures.py: docs/nx.md, docs/images/nx_dispatch.png)
set -euo pipefail
record=0
[ "${1:-}" = "--record" ] && record=1
. "$(dirname "$0")/env.sh"
if [ $record -eq 1 ]; then
  export PLUGBOARD_BENCH_RESULTS="$root/docs/data" PLUGBOARD_BENCH_COMMAND="bindings/elixir/plugboard_nx/bench/nx_bench.sh --record"
fi
each_plugin bench/nx_bench.exs
if [ $record -eq 1 ]; then
  python=$("$root/scripts/plot_venv.sh")
  "$python" "$here/bench/nx_figures.py" "$root"
fi
