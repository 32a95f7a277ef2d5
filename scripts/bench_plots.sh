#!/usr/bin/env bash
# The scaling benchmarks (issue 16) as tables and PNG plots: executions per second against threads on
# one client and compile time and dispatch against program size (each against the raw C API in the
# same run), ordered-callback delivery against receivers, boot time against the targets in a bundle.
# matplotlib goes into build/plot-venv from the wheels pinned in bench/requirements-plots.txt
# (scripts/plot_venv.sh).
# Not part of CI.
#
#   scripts/bench_plots.sh [--plugin PATH]... [--quick]      (PNGs into docs/images/scaling_*.png, which docs/performance.md shows)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
python=$("$root/scripts/plot_venv.sh" "$build_dir")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$root/scripts/bench.sh" --only threads --only size "$@" | tee "$out/bench.txt"
cmake --build "$build_dir" --target delivery_bench > /dev/null
"$build_dir/bench/delivery_bench" | tee "$out/delivery.txt"
"$root/scripts/bench_boot.sh" | tee "$out/boot.txt"
"$python" "$root/bench/plot_scaling.py" "$out/bench.txt" "$out/delivery.txt" "$out/boot.txt" "$root/docs/images"
