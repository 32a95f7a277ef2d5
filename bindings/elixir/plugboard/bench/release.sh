#!/usr/bin/env bash
# Benchmark (not a test): what carrying several targets in one release costs.
#   - release bytes: one `compute` release with cpu + cuda13 + rocm7 against three single-target
#     releases (their sum: what shipping one release per accelerator takes);
#   - boot to first result: `bin/<release> start` (COMPUTE_DEMO=1) until the demo prints its result,
#     3 targets against 1 (cpu), median of RUNS runs after one warm-up run (verification stamps
#     written), and once more as a first boot on a new host: each run with a cache folder of its own
#     (XDG_CACHE_HOME), so no stamp spares the hashing of every plugin. (PLUGBOARD_REHASH cannot do
#     this: a release boots from its bundle with use_environment: false, which does not read it.)
# The releases are the sample's compute app (bindings/elixir/sample/apps/compute) in a project made
# under WORKDIR, built offline from the wheels folder.
#   bench/release.sh [WORKDIR]     env: PLUGBOARD_PREFIX (an installed plugboard; else the Mix
#                                  compiler builds the library), PLUGBOARD_WHEELS (default
#                                  $PLUGBOARD_DEPS_DIR/wheels), RUNS (default 5)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
compute=$(cd "$here/../../sample/apps/compute" && pwd)
sample_lock=$(cd "$here/../../sample" && pwd)/plugboard.lock
work=${1:-${TMPDIR:-/tmp}/plugboard-release-bench}
runs=${RUNS:-5}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
export PLUGBOARD_WHEELS=${PLUGBOARD_WHEELS:-$deps/wheels}
export MIX_ENV=prod ERL_CRASH_DUMP_SECONDS=0
unset PLUGBOARD_TARGET PLUGBOARD_TARGETS PLUGBOARD_EXTRA_TARGETS MIX_BUILD_ROOT

mkdir -p "$work/project"
work=$(cd "$work" && pwd)
proj=$work/project
lock=$work/plugboard.lock   # a copy of the sample's: the hashes are held to it, the source tree is not written
cp "$sample_lock" "$lock"
cat > "$proj/mix.exs" <<EOF
defmodule ReleaseBench.MixProject do
  use Mix.Project

  @targets [cpu: "xla-cpu-pjrt==0.0.1", cuda13: "jax-cuda13-pjrt==0.12.0.1", rocm7: "jax-rocm7-pjrt==0.12.0"]

  def project do
    [app: :release_bench, version: "0.1.0", deps: [{:compute, path: "$compute"}], releases: releases()]
  end

  defp releases do
    [{:compute, @targets} | for({name, spec} <- @targets, do: {:"compute_#{name}", [{name, spec}]})]
    |> Enum.map(fn {release, targets} ->
      {release,
       [applications: [compute: :permanent], steps: [:assemble, &Plugboard.Release.embed/1],
        plugboard: [targets: targets, lock_file: "$lock"]]}
    end)
  end
end
EOF
rel=$proj/_build/prod/rel
releases="compute compute_cpu compute_cuda13 compute_rocm7"

# :compute's Hex dependencies (:plugboard's optional :telemetry) from a Hex repository (scripts/hex_registry.sh).
export MIX_HOME=${MIX_HOME:-$work/mix-home} HEX_HOME=${HEX_HOME:-$work/hex-home}
. "$here/../../../../scripts/hex_registry.sh"
hex_deps_get "$proj"
echo "building $releases (offline from $PLUGBOARD_WHEELS) in $proj"
for r in $releases; do
  (cd "$proj" && mix release "$r" --overwrite) > "$work/build-$r.log" 2>&1 || { tail -n 30 "$work/build-$r.log"; exit 1; }
done

bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", s }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# Milliseconds from launching the release to its first "result:" line.
first_result_ms() {
  local bin=$1; shift
  local start ms=""
  start=$(date +%s%N)
  while IFS= read -r l; do
    if [[ -z $ms && $l == result:* ]]; then ms=$((($(date +%s%N) - start) / 1000000)); fi
  done < <(env COMPUTE_DEMO=1 "$@" "$bin" start 2>&1)
  [ -n "$ms" ] || { echo "no result from $bin" >&2; exit 1; }
  echo "$ms"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
boot() {  # boot RELEASE [first]: the median of $runs boots, after one warm-up; `first`: each with no stamps
  local r=$1 first=${2:-}
  first_result_ms "$rel/$r/bin/$r" > /dev/null
  for _ in $(seq "$runs"); do
    if [ -n "$first" ]; then
      local fresh; fresh=$(mktemp -d)
      first_result_ms "$rel/$r/bin/$r" XDG_CACHE_HOME="$fresh"
      rm -rf "$fresh"
    else
      first_result_ms "$rel/$r/bin/$r"
    fi
  done | median
}

all=$(bytes "$rel/compute")
sum=0
echo
echo "release bytes (every file, hard links counted per file)"
printf "  %-16s %14s  %s   (bundle %s)\n" compute "$all" "$(mib "$all")" "$(mib "$(bytes "$rel/compute/lib/"plugboard-*/priv/bundle)")"
for r in compute_cpu compute_cuda13 compute_rocm7; do
  b=$(bytes "$rel/$r")
  sum=$((sum + b))
  printf "  %-16s %14s  %s   (bundle %s)\n" "$r" "$b" "$(mib "$b")" "$(mib "$(bytes "$rel/$r/lib/"plugboard-*/priv/bundle)")"
done
printf "  %-16s %14s  %s\n" "sum of the 3" "$sum" "$(mib "$sum")"
awk -v a="$all" -v s="$sum" 'BEGIN { printf "  one 3-target release / three 1-target releases = %.3f (saves %.1f MiB)\n", a / s, (s - a) / 1048576 }'

echo
echo "boot to first result (bin/<release> start, COMPUTE_DEMO=1), median of $runs"
warm3=$(boot compute) warm1=$(boot compute_cpu)
cold3=$(boot compute first) cold1=$(boot compute_cpu first)
printf "  %-34s %8s ms   %-12s %8s ms   ratio %s\n" "3 targets (cpu chosen)" "$warm3" "1 target (cpu)" "$warm1" "$(awk -v a="$warm3" -v b="$warm1" 'BEGIN { printf "%.2f", a / b }')"
printf "  %-34s %8s ms   %-12s %8s ms   ratio %s\n" "3 targets, first boot (no stamps)" "$cold3" "1 target" "$cold1" "$(awk -v a="$cold3" -v b="$cold1" 'BEGIN { printf "%.2f", a / b }')"
