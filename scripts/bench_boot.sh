#!/usr/bin/env bash
# The boot benchmark (bench/boot_bench.cpp): builds a bundle {cpu, cuda13, rocm7, fault targets} from the
# wheels set-up fetched, then times process start -> ready client through the bundle's boot-time choice
# against loading the CPU plugin alone, in the same run.
#
#   scripts/bench_boot.sh [--samples N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
[ -f "$build_dir/CMakeCache.txt" ] || "$root/scripts/setup.sh" --build-dir "$build_dir"
cmake --build "$build_dir" --target boot_bench plugboard fault_well_formed --parallel "$(nproc)" >/dev/null
bundle="$build_dir/bench-bundle"
fault="$build_dir/tests/libfault_well_formed.so"
# The fault targets a boot rules out without isolation: a TPU target the probe skips, and one whose
# client creation fails (crash and hang need isolation, which doctor uses; see the README).
"$build_dir/tools/plugboard/plugboard" bundle --offline --from "$deps/wheels" --lock-file "$build_dir/bench.lock" \
  --out "$bundle" --target cpu=xla-cpu-pjrt==0.0.1 --target cuda13=jax-cuda13-pjrt==0.12.0.1 \
  --target rocm7=jax-rocm7-pjrt==0.12.0 --target tpu-fault="$fault" --probe tpu-fault=tpu \
  --target fault-client="$fault" --create-option fault-client:fault=client_error --priority fault-client=50 >/dev/null
exec "$build_dir/bench/boot_bench" "$bundle" "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" "$@"
