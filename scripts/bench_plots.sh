#!/usr/bin/env bash
# The scaling benchmarks (issue 16) as tables and PNG plots: executions per second against threads on
# one client, compile time and dispatch against program size, each against the raw C API in the same
# run. matplotlib goes into build/plot-venv from the wheels pinned in bench/requirements-plots.txt.
# Not part of CI.
#
#   scripts/bench_plots.sh [--plugin PATH]... [--quick]      (PNGs into bench/plots/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
venv="$build_dir/plot-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  echo "[bench] installing matplotlib into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --require-hashes --only-binary=:all: -r "$root/bench/requirements-plots.txt"
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$root/scripts/bench.sh" --only threads --only size "$@" | tee "$out"
mkdir -p "$root/bench/plots"
"$venv/bin/python" "$root/bench/plot_scaling.py" "$out" "$root/bench/plots"
