#!/usr/bin/env bash
# `plugboard run` with host callbacks, on each CPU plugin given: the print hook shows tensors in
# program order before the outputs, --callback runs a blocking host command, and its failures (a
# command that fails, a result of the wrong type, a callback left unbound) are reported by name; a
# command that never ends is killed at --callback-timeout (and with plugboard on SIGTERM), and no call
# folder or process is left behind; a result that is a device, a FIFO or too large is refused.
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

# --- Callback commands that do not end, and results that are not files (first plugin only). ---
plugin=$1
tmp="$work/tmp" && mkdir -p "$tmp"
export TMPDIR="$tmp"   # where the call folders go: each must be gone after the run
no_call_folders() { ! ls "$tmp" | grep -q '^plugboard-callback-' || { ls -la "$tmp"; fail "$1: a call folder was left behind"; }; }
alive() {  # a process that exists and is not a zombie (PID 1 of a container may not reap orphans)
  local state
  state=$(sed -E 's/.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]
}
gone_soon() {  # $1: pid, $2: what: the process ends within 3 s
  for _ in $(seq 30); do alive "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  fail "$2: process $1 is still running (an orphan)"
}
# The command's shell waits for a grandchild: killing only the shell would leave the sleep running.
sleeper="host_scale=: \"\$@\"; sleep 1000 & echo \$! > $work/sleep.pid; wait"

# A command that never ends fails the run once --callback-timeout passes, naming the callback and the
# timeout, and its whole process group is killed.
rm -f "$work/sleep.pid"
start=$(date +%s)
if timeout 60 "$pb" run "$program" --plugin "$plugin" -i "$input" --callback "$sleeper" --callback-timeout 1 \
    > /dev/null 2> "$work/err.txt"; then
  fail "a callback past its timeout must fail the run"
fi
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 60 ] || fail "the timed-out run took ${elapsed}s (a 1 s timeout)"
grep -q -- "--callback host_scale: .* did not finish within 1 s (--callback-timeout): its process group was killed" "$work/err.txt" \
  || { cat "$work/err.txt"; fail "timeout message"; }
[ -s "$work/sleep.pid" ] || fail "the sleeper did not start"
gone_soon "$(cat "$work/sleep.pid")" "after the timeout"
no_call_folders "after the timeout"

# --callback-timeout is parsed strictly: zero, negative, units and words are usage errors (exit 2).
for bad in 0 -1 -0.5 5s abc 1e30 ""; do
  set +e
  "$pb" run "$program" --plugin "$plugin" -i "$input" --callback 'host_scale=cp "$1" "$2"' --callback-timeout "$bad" \
    > /dev/null 2> "$work/err.txt"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$work/err.txt"; fail "--callback-timeout '$bad' exited $rc, not 2"; }
  grep -q -- "--callback-timeout" "$work/err.txt" || { cat "$work/err.txt"; fail "--callback-timeout '$bad': names the flag"; }
done
"$pb" run "$program" --plugin "$plugin" -i "$input" --callback 'host_scale=cp "$1" "$2"' --callback-timeout 0.5 \
  > /dev/null || fail "a fractional timeout is accepted"
no_call_folders "after a good run"

# SIGTERM to plugboard while a callback sleeps: the command's group is killed, the call folder
# removed, and plugboard ends with the signal's status (143).
rm -f "$work/sleep.pid"
"$pb" run "$program" --plugin "$plugin" -i "$input" --callback "$sleeper" > /dev/null 2> "$work/err.txt" &
pb_pid=$!
for _ in $(seq 1200); do [ -s "$work/sleep.pid" ] && break; sleep 0.05; done
[ -s "$work/sleep.pid" ] || { kill -KILL "$pb_pid"; fail "the sleeper did not start"; }
kill -TERM "$pb_pid"
set +e
wait "$pb_pid"
rc=$?
set -e
[ "$rc" -eq 143 ] || { cat "$work/err.txt"; fail "plugboard stopped by SIGTERM exited $rc, not 143"; }
gone_soon "$(cat "$work/sleep.pid")" "after SIGTERM"
no_call_folders "after SIGTERM"

# A command that exits but leaves a process behind in its group: that process is killed too.
rm -f "$work/sleep.pid"
"$pb" run "$program" --plugin "$plugin" -i "$input" \
  --callback "host_scale=cp \"\$1\" \"\$2\"; sleep 1000 > /dev/null 2>&1 & echo \$! > $work/sleep.pid" > /dev/null \
  || fail "a command that leaves a process behind still succeeds"
gone_soon "$(cat "$work/sleep.pid")" "left behind by a command that exited"
no_call_folders "after a command that left a process behind"

# A result that is not a regular file (a link to /dev/zero, a FIFO, a folder) or is far larger than
# the program's result is refused at once, naming the callback and the result.
for case in 'ln -s /dev/zero "$2"|a character device' 'mkfifo "$2"|a FIFO' 'mkdir "$2"|a directory' \
            'truncate -s 8G "$2"|more than the limit of'; do
  cmd=${case%%|*} want=${case#*|}
  if timeout 30 "$pb" run "$program" --plugin "$plugin" -i "$input" --callback "host_scale=$cmd" > /dev/null 2> "$work/err.txt"; then
    fail "result from \`$cmd\` must fail the run"
  fi
  grep -q -- "--callback host_scale: reading result 0 that .* was to write: .*$want" "$work/err.txt" \
    || { cat "$work/err.txt"; fail "result from \`$cmd\`: message"; }
  no_call_folders "after \`$cmd\`"
done
echo "ok"
