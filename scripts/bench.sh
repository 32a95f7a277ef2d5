#!/usr/bin/env bash
# Builds plugboard_bench in build/ and runs it; arguments go to the benchmark:
#
#   scripts/bench.sh [--plugin PATH]... [--quick] [--runs N] [--cases DIR] [--only dispatch|transfer|compile|cache|threads|size]...
#
# --runs 3 repeats the whole benchmark three times in a row and checks a goal only when all three
# runs met it (the issue-16 criterion).
#
# Environment: BUILD_DIR (default: <repo>/build). A missing build folder is set up with scripts/setup.sh.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  echo "[bench] $build_dir is not configured: running scripts/setup.sh" >&2
  "$root/scripts/setup.sh" --build-dir "$build_dir"
fi
if ! grep -q '^PLUGBOARD_BENCH:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  cmake -S "$root" -B "$build_dir" -DPLUGBOARD_BENCH=ON >/dev/null
fi
cmake --build "$build_dir" --target plugboard_bench --parallel "$(nproc)"
exec "$build_dir/bench/plugboard_bench" "$@"
