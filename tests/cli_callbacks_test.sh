#!/usr/bin/env bash
# `plugboard run` with host callbacks, on each CPU plugin given: the print hook shows tensors in
# program order before the outputs, --callback runs a blocking host command, and its failures (a
# command that fails, a result of the wrong type, a callback left unbound) are reported by name.
#   cli_callbacks_test.sh PLUGBOARD EXAMPLES_DIR WORKDIR PLUGIN...
set -euo pipefail
pb=$1 examples=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
program="$examples/callbacks.mlir" input="$examples/x.npy"
fail() { echo "FAIL: $*" >&2; exit 1; }
for plugin in "$@"; do
  echo "== $plugin"
  "$pb" run "$program" --plugin "$plugin" -i "$input" \
    --callback "host_scale=python3 $examples/host_scale.py" > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/err.txt"; fail "run"; }
  grep -v '^callbacks\|^plugin\|^program' "$work/out.txt" > "$work/lines.txt"
  cat > "$work/want.txt" <<'TXT'
x: f32[2,4] [[1, 2, 3, 4], [-1, 0, 1, nan]]
host_scale(x): f32[2,4] [[10, 20, 30, 40], [-10, 0, 10, nan]]
out0     f32[2,4]       [11, 22, 33, 44, -11, 0, 11, nan]
TXT
  diff "$work/want.txt" "$work/lines.txt" || fail "printed lines differ"
  grep -q "^callbacks 1 blocking, 2 ordered (print) calls" "$work/out.txt" || fail "call counts"

  # --json: the report alone on stdout, the print hook on stderr.
  "$pb" run "$program" --plugin "$plugin" -i "$input" --callback 'host_scale=cp "$1" "$2"' --json \
    > "$work/report.json" 2> "$work/err.txt"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["callbacks"]=={"blocking_calls":1,"ordered_calls":2}, r; assert r["outputs"][0]["values"].startswith("[2, 4, 6, 8"), r' "$work/report.json"
  grep -q '^x: f32\[2,4\]' "$work/err.txt" || fail "print hook with --json goes to stderr"

  # A failing command fails the run with its name and status; the print before it was delivered.
  if "$pb" run "$program" --plugin "$plugin" -i "$input" --callback 'host_scale=exit 3' > "$work/out.txt" 2> "$work/err.txt"; then
    fail "a failing callback command must fail the run"
  fi
  grep -q "host callback 'host_scale' failed: .*--callback host_scale: \`exit 3\` exited with status 3" "$work/err.txt" || { cat "$work/err.txt"; fail "failure message"; }
  grep -q '^x: f32\[2,4\]' "$work/out.txt" || fail "the print before the failure"

  # A result of the wrong dtype is refused with both types.
  printf '\x93NUMPY\x01\x00\x76\x00{'"'"'descr'"'"': '"'"'<f8'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (2, 4), }' > "$work/f64.npy"
  python3 -c 'import sys; h=open(sys.argv[1],"rb").read(); h=h[:10]+h[10:].ljust(118," ".encode())[:117]+b"\n"; open(sys.argv[1],"wb").write(h+bytes(64))' "$work/f64.npy"
  if "$pb" run "$program" --plugin "$plugin" -i "$input" --callback "host_scale=cp $work/f64.npy \"\$2\"" > /dev/null 2> "$work/err.txt"; then
    fail "a result of the wrong dtype must fail the run"
  fi
  grep -q "result 0 of host callback 'host_scale': .*f32\[2,4\].*f64\[2,4\]" "$work/err.txt" || { cat "$work/err.txt"; fail "dtype message"; }

  # Left unbound: the compile error says how to bind it.
  if "$pb" run "$program" --plugin "$plugin" -i "$input" > /dev/null 2> "$work/err.txt"; then fail "unbound must fail"; fi
  grep -q "does not bind: give it with --callback NAME=COMMAND" "$work/err.txt" || { cat "$work/err.txt"; fail "unbound message"; }
  grep -q "host_scale" "$work/err.txt" || fail "unbound message names the callback"
done
echo "ok"
