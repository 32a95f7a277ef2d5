#!/usr/bin/env bash
# Nx on plugboard's benchmarks (bench/nx_bench.exs) on each CPU plugin, with the environment the
# tests use (bench/env.sh).
#
#   bench/nx_bench.sh              prints the figures (and each plugin's as one `figures: {JSON}` line)
#   bench/nx_bench.sh --record     records the run with scripts/bench_record.sh (docs/data/nx_bench.json:
#                                  the output with the machine, the commit and the command) and remakes
#                                  the Nx guide's table and plot from it (bench/nx_figures.py: docs/nx.md,
#                                  docs/images/nx_dispatch.png)
set -euo pipefail
if [ "${1:-}" = "--record" ]; then
  root=$(cd "$(dirname "$0")/../../../.." && pwd)
  "$root/scripts/bench_record.sh" nx_bench bindings/elixir/plugboard_nx/bench/nx_bench.sh
  python=$("$root/scripts/plot_venv.sh")
  exec "$python" "$root/bindings/elixir/plugboard_nx/bench/nx_figures.py" "$root"
fi
. "$(dirname "$0")/env.sh"
each_plugin bench/nx_bench.exs
