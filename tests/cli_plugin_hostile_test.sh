#!/usr/bin/env bash
# A truncated plugin is refused by name before dlopen (it died of SIGBUS inside dlopen), on each way a
# plugin reaches the loader: `plugins`, `run --plugin`, and a PJRT_NAMES_AND_LIBRARY_PATHS candidate.
#   cli_plugin_hostile_test.sh PLUGBOARD PLUGIN.so PROGRAM IN0 IN1 WORKDIR
set -uo pipefail
pb=$1 plugin=$2 program=$3 in0=$4 in1=$5 work=$6
rm -rf "$work"; mkdir -p "$work"
head -c 100000 "$plugin" > "$work/truncated.so"
fail=0
check() {  # check WANT_RC PATTERN -- COMMAND...
  local want=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL: $* exited $rc (expected $want): $out"; fail=1; return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL: $* did not say /$pattern/: $out"; fail=1; return; fi
  echo "ok: $*"
}
outside="truncated.so.*lies outside the file \\(100000 bytes\\)"
check 1 "$outside" -- "$pb" plugins "$work/truncated.so"
check 1 "$outside" -- "$pb" run "$program" --plugin "$work/truncated.so" -i "$in0" -i "$in1"
# As a JAX-style candidate the boot falls back past it and says why.
check 0 "$outside" -- env PJRT_NAMES_AND_LIBRARY_PATHS="broken:$work/truncated.so,cpu:$plugin" PLUGBOARD_PROBES=0 \
  "$pb" doctor
exit $fail
