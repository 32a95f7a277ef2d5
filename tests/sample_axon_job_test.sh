#!/usr/bin/env bash
# The sample's Axon job (bindings/elixir/sample/apps/compute/lib/compute/axon_job.ex) without a
# release: `mix run` in the compute app boots the CPU plugin from PLUGBOARD_PLUGIN_PATH and runs
# Compute.AxonJob once (train a CNN with Axon.Loop, evaluate, save, read back, serve). It checks what
# tests/elixir_release_test.sh checks of the job: the held-back loss falls below half, the accuracy
# rises to at least 0.5, the parameters are saved, and the served answers equal the direct prediction.
# Meant for an Nx tree the release test does not build, such as Nx's main branch:
#
#   PLUGBOARD_NX_PATH=/path/to/nx tests/sample_axon_job_test.sh WORKDIR
#
# (nx/'s neighbours axon/, polaris/, complex/ and telemetry/ come with it: sample/nx_deps.exs).
# Without PLUGBOARD_NX_PATH the sample's deps come from Hex (mix deps.get first). Elixir >= 1.17 on
# PATH; PLUGBOARD_PREFIX as for :plugboard; MIX_BUILD_ROOT (default WORKDIR/_build);
# PLUGBOARD_AXON_JOB_PLUGIN (default: the deps cache's xla_cpu_081 plugin).
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 WORKDIR" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$1
mkdir -p "$work"
work=$(cd "$work" && pwd)
plugin=${PLUGBOARD_AXON_JOB_PLUGIN:-${PLUGBOARD_DEPS_DIR:-$HOME/.cache/plugboard/deps}/files/xla_cpu_081/xla_cpu_pjrt.so}
[ -f "$plugin" ] || { echo "FAIL: no CPU plugin at $plugin (set PLUGBOARD_AXON_JOB_PLUGIN)"; exit 1; }
failed=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; failed=1; }
. "$(dirname "$0")/axon_job_checks.sh"

rm -f "$work/digits_cnn.nx"
(cd "$repo/bindings/elixir/sample/apps/compute" && \
   env MIX_BUILD_ROOT="${MIX_BUILD_ROOT:-$work/_build}" PLUGBOARD_PLUGIN_PATH="$plugin" COMPUTE_MODEL_DIR="$work" \
   mix run -e 'Code.ensure_loaded?(Compute.AxonJob) || raise "Compute.AxonJob was not compiled (no Axon or Plugboard.Nx in this build)"; Compute.AxonJob.run(Plugboard.client!())') \
  > "$work/job.log" 2>&1 || { fail "mix run of Compute.AxonJob exited non-zero"; tail -n 30 "$work/job.log" | sed 's/^/    | /'; exit 1; }

check_axon_job_training "$work/job.log"
[ -s "$work/digits_cnn.nx" ] && pass "the trained parameters were saved ($(stat -c %s "$work/digits_cnn.nx") bytes)" || fail "no saved parameters in $work/digits_cnn.nx"
grep -q "answers equal the direct prediction: true" "$work/job.log" && pass "the Nx.Serving's answers equal the direct prediction" || fail "the serving's answers are missing or differ: $(grep Compute.Digits "$work/job.log")"
exit $failed
