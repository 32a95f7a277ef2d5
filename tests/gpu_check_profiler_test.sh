#!/usr/bin/env bash
# scripts/gpu_check.sh's plugin-profiler check, run as far as a machine without a GPU allows:
#   - `profiler PLUGIN` on each CPU plugin: no profiler extension, said, and a pass;
#   - `check-trace` on traces plugin_profiler_test writes: the synthetic XSpace of the fault plugin's
#     profiler (a GPU plane's kernels) passes; a profiler whose collection failed, and a run of a CPU
#     plugin (no plugin spans at all), fail, each saying why.
# Usage: gpu_check_profiler_test.sh PLUGIN_PROFILER_TEST PLUGBOARD_CLI CPU_PLUGIN...
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
test_bin=$1 cli=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PLUGBOARD_CLI=$cli
failed=0
fail() { echo "FAILED: $*"; failed=1; }

for plugin in "$@"; do
  out=$("$root/scripts/gpu_check.sh" profiler "$plugin" "$work/cpu.json" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 0 ] || fail "profiler on $plugin exited $rc"
  grep -q "has no profiler extension" <<< "$out" || fail "profiler on $plugin did not say it has no profiler extension"
done

PLUGBOARD_PROFILER_TEST_TRACES=$work "$test_bin" \
  --gtest_filter='PluginProfiler.ASyntheticXSpaceBecomesSpansOnTheTracesClock:Modes/PluginProfilerFailure.*/fail_collect' \
  > "$work/gtest.log" 2>&1 || { tail -n 20 "$work/gtest.log"; fail "plugin_profiler_test failed"; }

# (the nested kernel of the synthetic stream shares its stream's track: inner spans are recorded before
# the outer ones, so one lane holds them: 1 track)
# expect TRACE RC TEXT: check-trace exits RC and prints TEXT.
expect() {
  local out rc
  out=$("$root/scripts/gpu_check.sh" check-trace "$1" 2>&1)
  rc=$?
  echo "--- check-trace $(basename "$1") (exit $rc)"
  echo "$out"
  [ $rc -eq "$2" ] || fail "check-trace $1 exited $rc, not $2"
  grep -qF -- "$3" <<< "$out" || fail "check-trace $1 did not say: $3"
}
expect "$work/synthetic.json" 0 "PASS: spans of the plugin's device planes: 3 on 1 tracks"
expect "$work/fail_collect.json" 1 "FAIL: the plugin's profiler ran and was collected (plugin profiler spans: ['failed'"
expect "$work/fail_collect.json" 1 "FAIL: no trace notes (['plugin profiler: "
# A CPU run's trace: plugboard's own spans, nothing of a plugin profiler.
case_dir=$root/tests/conformance/cases/add_f32
"$cli" run --plugin "$1" "$case_dir/program.mlir" -i "$case_dir/in0.npy" -i "$case_dir/in1.npy" --trace "$work/cpu_run.json" \
  > /dev/null 2>&1 || fail "the traced CPU run failed"
expect "$work/cpu_run.json" 1 "FAIL: spans of the plugin's device planes: 0"
exit $failed
