#!/usr/bin/env bash
# The boot benchmark (bench/boot_bench.cpp): builds bundles of 1, 2, 5, 10 and 20 targets from the
# wheels set-up fetched (cpu; then cuda13 and rocm7, which the probes rule out here; then fault targets:
# TPU ones the probe skips, and ones whose client creation fails, tried before cpu), then times process
# start -> ready client through each bundle's boot against loading the CPU plugin alone, paired sample
# by sample in the same run.
#
#   scripts/bench_boot.sh [--samples N] [--runs N] [--targets "1 2 5 10 20"]
#
# --runs 2 measures everything twice in a row and shows how far apart the two runs are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
counts="1 2 5 10 20"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --targets) counts=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -f "$build_dir/CMakeCache.txt" ] || "$root/scripts/setup.sh" --build-dir "$build_dir"
cmake --build "$build_dir" --target boot_bench plugboard fault_well_formed --parallel "$(nproc)" >/dev/null
fault="$build_dir/tests/libfault_well_formed.so"
bundles=()
for n in $counts; do
  # The targets, in order: cpu, cuda13, rocm7, then fault targets alternately probed out (tpu) and
  # failing at client creation (priority 50: tried before cpu, and fallen back from).
  spec=(--target cpu=xla-cpu-pjrt==0.0.1)
  [ "$n" -ge 2 ] && spec+=(--target cuda13=jax-cuda13-pjrt==0.12.0.1)
  [ "$n" -ge 3 ] && spec+=(--target rocm7=jax-rocm7-pjrt==0.12.0)
  for ((i = 4; i <= n; i++)); do
    if ((i % 2 == 0)); then
      spec+=(--target "tpu-fault-$i=$fault" --probe "tpu-fault-$i=tpu")
    else
      spec+=(--target "fault-client-$i=$fault" --create-option "fault-client-$i:fault=client_error" --priority "fault-client-$i=50")
    fi
  done
  bundle="$build_dir/bench-bundle-$n"
  rm -rf "$bundle"
  "$build_dir/tools/plugboard/plugboard" bundle --offline --from "$deps/wheels" --lock-file "$build_dir/bench.lock" \
    --out "$bundle" "${spec[@]}" > /dev/null 2> "$bundle.log" || { cat "$bundle.log" >&2; exit 1; }
  bundles+=("$bundle")
done
exec "$build_dir/bench/boot_bench" "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "${bundles[@]}" "${args[@]}"
