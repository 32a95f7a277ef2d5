#!/usr/bin/env bash
# The Python with matplotlib that draws the project's pictures (scripts/bench_plots.sh's scaling plots,
# scripts/trace_pictures.sh's trace timelines, the trace_timeline test): a venv at BUILD_DIR/plot-venv
# made from the wheels pinned by version and sha256 in bench/requirements-plots.txt (pip checks every
# hash). Idempotent: an existing venv that imports matplotlib is kept. Prints the venv's python.
#
#   scripts/plot_venv.sh [BUILD_DIR]            (default: $BUILD_DIR or ROOT/build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-${BUILD_DIR:-$root/build}}
venv="$build_dir/plot-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  echo "[plot-venv] installing matplotlib into $venv" >&2
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet --require-hashes --only-binary=:all: -r "$root/bench/requirements-plots.txt" >&2
fi
echo "$venv/bin/python"
