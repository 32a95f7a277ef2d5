#!/usr/bin/env bash
# The scaling figures (issue 16) as PNG plots, made from recorded data: executions per second against
# threads on one client and compile time and dispatch against program size (each against the raw C
# API in the same run: plugboard_bench, docs/data/bench.json), ordered-callback delivery against
# receivers (delivery_bench, docs/data/delivery.json), boot time against the targets in a bundle
# (scripts/bench_boot.sh, docs/data/boot.json). matplotlib goes into build/plot-venv from the wheels
# pinned in bench/requirements-plots.txt (scripts/plot_venv.sh). Not part of CI.
#
#   scripts/bench_plots.sh             the plots from the data recorded last (PNGs into docs/images/scaling_*.png)
#   scripts/bench_plots.sh --record    record the three benchmarks first (scripts/bench_record.sh; ~6 min)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
if [ "${1:-}" = "--record" ]; then
  "$root/scripts/bench_record.sh" bench scripts/bench.sh
  cmake --build "$build_dir" --target delivery_bench > /dev/null
  "$root/scripts/bench_record.sh" delivery "${build_dir#"$root"/}/bench/delivery_bench"
  "$root/scripts/bench_record.sh" boot scripts/bench_boot.sh --runs 2
elif [ $# -gt 0 ]; then
  echo "bench_plots.sh: unknown argument '$1' (--record, or nothing)" >&2
  exit 2
fi
python=$("$root/scripts/plot_venv.sh" "$build_dir")
data=$root/docs/data
for f in bench delivery boot; do
  [ -f "$data/$f.json" ] || { echo "bench_plots.sh: no docs/data/$f.json: run scripts/bench_plots.sh --record" >&2; exit 1; }
done
"$python" "$root/bench/plot_scaling.py" "$data/bench.json" "$data/delivery.json" "$data/boot.json" "$root/docs/images"
