#!/usr/bin/env bash
# The CLI as a user drives it: bundle a real CPU plugin with fault targets, then doctor explains the
# choice (crash and hang isolated, fallback to CPU) and run uses the bundle; an explicit fault target fails.
#   cli_bundle_test.sh PLUGBOARD CPU_PLUGIN FAULT_PLUGIN PROGRAM IN0 IN1 WORKDIR
set -euo pipefail
pb=$1 cpu=$2 fault=$3 program=$4 in0=$5 in1=$6 work=$7
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME="$work/cache"
"$pb" bundle --out "$work/b" --target cpu="$cpu" --target crash="$fault" --target hang="$fault" \
  --create-option crash:fault=crash --create-option hang:fault=hang --priority crash=200 --priority hang=150
"$pb" doctor --bundle "$work/b" --timeout-ms 2000 --json > "$work/doctor.json"
python3 - "$work/doctor.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {c["name"]: c for c in r["candidates"]}
assert r["chosen"] == "cpu", r["chosen"]
assert by["crash"]["failed_stage"] == "client" and "SIGSEGV" in by["crash"]["reason"], by["crash"]
assert by["hang"]["failed_stage"] == "client" and "did not finish within 2000 ms" in by["hang"]["reason"], by["hang"]
PY
grep -q "out0" <<< "$(PLUGBOARD_ISOLATE=1 PLUGBOARD_ISOLATE_TIMEOUT_MS=2000 "$pb" run --bundle "$work/b" "$program" -i "$in0" -i "$in1")"
if PLUGBOARD_ISOLATE=1 "$pb" run --bundle "$work/b" --target crash "$program" -i "$in0" -i "$in1" 2> "$work/explicit.err"; then
  echo "an explicit crash target must fail" >&2; exit 1
fi
grep -q "crash: client: .*died of SIGSEGV" "$work/explicit.err" || { cat "$work/explicit.err" >&2; exit 1; }
