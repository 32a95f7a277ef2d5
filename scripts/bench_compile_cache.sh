#!/usr/bin/env bash
# The compile cache's benchmarks (issue 14), on the three CPU plugins:
#  1. a warm compile-cache hit against a cold compile and against the raw C API's
#     PJRT_Executable_DeserializeAndLoad, for mlp_tiny and an RNG program (plugboard_bench --only cache);
#  2. process start -> first result: `plugboard run --bundle` of the RNG program from a bundle with
#     the program precompiled against the same bundle without (the persistent cache off in both),
#     interleaved runs, medians.
#
#   scripts/bench_compile_cache.sh [--quick]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
runs=9
[ "${1:-}" = "--quick" ] && runs=3
"$root/scripts/bench.sh" --only cache ${1:+"$1"}

pb=$build/tools/plugboard/plugboard
cases=$root/tests/conformance/cases
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "== process start -> first result: plugboard run --bundle (RNG program, persistent cache off, median of $runs)"
printf '%-14s %12s %12s %8s\n' plugin "compiles" "precompiled" "ratio"
for p in xla_cpu_081/xla_cpu_pjrt.so xla_cpu_106/libpjrt_cpu.so xla_cpu_115/pjrt_c_api_cpu_plugin.so; do
  name=${p%%/*}
  "$pb" bundle --target cpu="$deps/files/$p" --out "$work/$name-plain" > /dev/null
  "$pb" bundle --target cpu="$deps/files/$p" --out "$work/$name-pre" --precompile "$cases/rng_threefry_bits/program.mlir" > /dev/null
  plain=() pre=()
  for i in $(seq "$runs"); do
    for kind in plain pre; do
      t0=$(now_ms)
      out=$(PLUGBOARD_COMPILE_CACHE=off "$pb" run "$cases/rng_threefry_bits/program.mlir" --bundle "$work/$name-$kind" \
              -i "$cases/rng_threefry_bits/in0.npy" 2>&1)
      t1=$(now_ms)
      case "$kind:$out" in
        plain:*"compiled in"*) plain+=($((t1 - t0))) ;;
        pre:*"precompiled in the bundle"*) pre+=($((t1 - t0))) ;;
        *) echo "unexpected output for $name $kind:"; echo "$out"; exit 1 ;;
      esac
    done
  done
  a=$(printf '%s\n' "${plain[@]}" | median) b=$(printf '%s\n' "${pre[@]}" | median)
  printf '%-14s %10s ms %10s ms %8s\n' "$name" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')"
done
