#!/usr/bin/env bash
# scripts/trace_timeline.py on a real trace: `plugboard run --trace` of a program with host callbacks
# (compile, copies, an execution on the device track, a blocking and ordered callbacks, a delivery
# thread) drawn whole, zoomed on its execution (--focus) and on one category, then joined with a second
# run's trace (two processes, as a merged cluster trace has), and a named track's lanes (one row when
# their spans nest, two when they overlap otherwise); each picture a PNG of
# the expected size holding every span of the trace (counted here from the JSON, independently of the
# script). Then the refusals: a missing file, a truncated trace, JSON that is not a trace, a span
# without a numeric dur, a --focus naming no span, an output that cannot be written: exit 1, a message
# naming the file (or span), no PNG.
#   trace_timeline_test.sh PLOT_PYTHON TIMELINE_SCRIPT PLUGBOARD PLUGIN EXAMPLES_DIR WORKDIR
# PLOT_PYTHON is the plot venv's python (scripts/setup.sh makes it with scripts/plot_venv.sh).
set -uo pipefail
python=$1 script=$2 pb=$3 plugin=$4 examples=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
if ! "$python" -c "import matplotlib" 2>/dev/null; then
  echo "FAIL: no matplotlib in $python: scripts/setup.sh makes the plot venv (or scripts/plot_venv.sh BUILD_DIR)" >&2
  exit 1
fi

"$pb" run "$examples/callbacks.mlir" --plugin "$plugin" -i "$examples/x.npy" \
  --callback "host_scale=python3 $examples/host_scale.py" --trace "$work/run.json" > "$work/run.txt" 2>&1 ||
  { cat "$work/run.txt"; echo "FAIL: plugboard run --trace" >&2; exit 1; }

# counts CATEGORY|'' [FOCUS [first]]: "SPANS TRACKS PROCESSES" of the trace's X events (those of
# CATEGORY, or those overlapping the longest span named FOCUS, or the first in time, with its margin).
counts() {
  python3 - "$work/run.json" "$@" <<'PY'
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
if len(sys.argv) > 2 and sys.argv[2]:
    spans = [e for e in spans if e["cat"] == sys.argv[2]]
if len(sys.argv) > 3:
    named = sorted((e for e in spans if e["name"] == sys.argv[3]), key=lambda e: e["ts"])
    f = named[0] if len(sys.argv) > 4 else max(named, key=lambda e: e["dur"])
    lo, hi = f["ts"] - max(0.03 * f["dur"], 0.5), f["ts"] + f["dur"] + max(0.03 * f["dur"], 0.5)
    spans = [e for e in spans if e["ts"] < hi and e["ts"] + e["dur"] > lo]
print(len(spans), len({(e["pid"], e["tid"]) for e in spans}), len({e["pid"] for e in spans}))
PY
}

# png_size FILE: "WIDTH HEIGHT" from the PNG's IHDR, or nothing when FILE is not a PNG.
png_size() {
  python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read(33)
if len(b) == 33 and b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR":
    print(*struct.unpack(">II", b[16:24]))
PY
}

# draws NAME WANT ARGS...: draws the trace into NAME.png with ARGS and checks the summary line says
# WANT ("SPANS TRACKS PROCESSES"), and that the PNG is 1300 px wide, 150-1600 high, 8-200 KB.
draws() {
  local name=$1 want=$2
  shift 2
  local out="$work/$name.png"
  if ! "$python" "$script" "$work/run.json" "$out" "$@" > "$work/$name.txt" 2>&1; then
    cat "$work/$name.txt"; fail "$name: trace_timeline.py failed"; return
  fi
  read -r spans tracks processes <<< "$want"
  grep -q "^wrote $out: $spans spans on $tracks tracks in $processes processes, window " "$work/$name.txt" ||
    fail "$name: summary '$(cat "$work/$name.txt")', want $spans spans on $tracks tracks in $processes processes"
  read -r w h <<< "$(png_size "$out")"
  [ "${w:-0}" -eq 1300 ] && [ "${h:-0}" -ge 150 ] && [ "${h:-0}" -le 1600 ] || fail "$name: PNG ${w:-?}x${h:-?}, want 1300 x 150..1600"
  local bytes
  bytes=$(stat -c %s "$out")
  [ "$bytes" -ge 8000 ] && [ "$bytes" -le 200000 ] || fail "$name: PNG of $bytes bytes"
  echo "ok: $name ($(cat "$work/$name.txt"), ${w}x${h}, $bytes bytes)"
}

all=$(counts '')
read -r n _ _ <<< "$all"
[ "$n" -ge 20 ] || fail "the trace has $n spans (compile, copies, execution and callbacks: 20 or more)"
draws whole "$all" --title "callbacks.mlir"
draws focus "$(counts '' launch)" --focus launch
draws device "$(counts device)" --category device
first=$(counts '' launch first)
draws first "$first" --focus launch --occurrence 1
[ "$(cut -d' ' -f1 <<< "$first")" -lt $((n / 2)) ] || fail "--focus on the self-test's launch should leave most spans out"

# Two processes in one document (as a merged cluster trace is): a second run's trace joined to the
# first, each process's tracks under it.
"$pb" run "$examples/softmax.mlir" --plugin "$plugin" -i "$examples/x.npy" --trace "$work/second.json" > "$work/run2.txt" 2>&1 ||
  { cat "$work/run2.txt"; fail "the second plugboard run --trace"; }
python3 - "$work/run.json" "$work/second.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert {e["pid"] for e in a["traceEvents"]}.isdisjoint(e["pid"] for e in b["traceEvents"])
a["traceEvents"] += b["traceEvents"]
json.dump(a, open(sys.argv[1], "w"))
PY
draws two_processes "$(counts '')" --title "two runs"
grep -q " in 2 processes, " "$work/two_processes.txt" || fail "two_processes: $(cat "$work/two_processes.txt")"

# A named track's lanes ("elixir x [2]"): drawn as one row when their spans nest (the recorder puts a
# span on a new lane when it holds one recorded before it), kept apart when they overlap otherwise.
lanes() {
  python3 - "$work/lanes.json" "$1" <<'PY'
import json, sys
outer_end = {"nest": 100, "overlap": 20}[sys.argv[2]]
meta = [{"ph": "M", "pid": 7, "tid": 0, "name": "process_name", "args": {"name": "p"}}] + [
    {"ph": "M", "pid": 7, "tid": t, "name": "thread_name", "args": {"name": n}}
    for t, n in ((40, "elixir x"), (41, "elixir x [2]"))]
spans = [{"ph": "X", "pid": 7, "tid": 40, "name": "inner", "cat": "nx", "ts": 10, "dur": 50},
         {"ph": "X", "pid": 7, "tid": 41, "name": "outer", "cat": "nx", "ts": 0, "dur": outer_end}]
json.dump({"traceEvents": meta + spans}, open(sys.argv[1], "w"))
PY
  "$python" "$script" "$work/lanes.json" "$work/lanes.png" > "$work/lanes.txt" 2>&1 || fail "lanes $1: $(cat "$work/lanes.txt")"
}
lanes nest
grep -q ": 2 spans on 1 tracks in 1 processes" "$work/lanes.txt" || fail "nesting lanes: $(cat "$work/lanes.txt"), want one track"
lanes overlap
grep -q ": 2 spans on 2 tracks in 1 processes" "$work/lanes.txt" || fail "overlapping lanes: $(cat "$work/lanes.txt"), want two tracks"

# refuses ARGS... -- PATTERN: trace_timeline.py ARGS exits 1 with PATTERN on stderr and writes no PNG.
refuses() {
  local args=() pattern
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  pattern=$2
  rm -f "$work/bad.png"
  "$python" "$script" "${args[@]}" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || fail "${args[*]}: exit $rc, want 1"
  grep -qF -- "$pattern" "$work/err.txt" || fail "${args[*]}: stderr '$(cat "$work/err.txt")' lacks '$pattern'"
  [ ! -e "$work/bad.png" ] || fail "${args[*]}: wrote a PNG"
}
refuses "$work/missing.json" "$work/bad.png" -- "trace_timeline: cannot read trace '$work/missing.json': No such file or directory"
head -c 300 "$work/run.json" > "$work/truncated.json"
refuses "$work/truncated.json" "$work/bad.png" -- "trace '$work/truncated.json' is not JSON: "
echo '{"spans": []}' > "$work/other.json"
refuses "$work/other.json" "$work/bad.png" -- "trace '$work/other.json' is not a Chrome trace: no traceEvents list"
echo '{"traceEvents": [{"ph": "X", "name": "s", "pid": 1, "tid": 1, "ts": 5, "dur": "x"}]}' > "$work/nodur.json"
refuses "$work/nodur.json" "$work/bad.png" -- "trace '$work/nodur.json': event 0 ('s') has no numeric dur"
echo '{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}]}' > "$work/empty.json"
refuses "$work/empty.json" "$work/bad.png" -- "trace '$work/empty.json' has no span to draw"
refuses "$work/run.json" "$work/bad.png" --focus no_such_span -- "trace '$work/run.json' has no span named 'no_such_span' (--focus); its spans: "
launches=$(python3 -c 'import json,sys; print(sum(e["name"] == "launch" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$work/run.json")
refuses "$work/run.json" "$work/bad.png" --focus launch --occurrence $((launches + 1)) -- "has $launches spans named 'launch'; --occurrence $((launches + 1)) is not one of 1..$launches"
"$python" "$script" "$work/run.json" "$work/last.png" --focus launch --occurrence "$launches" > "$work/last.txt" 2>&1 ||
  fail "--occurrence $launches (the last launch): $(cat "$work/last.txt")"
"$python" "$script" "$work/run.json" "$work/median.png" --focus launch --occurrence median > "$work/median.txt" 2>&1 ||
  fail "--occurrence median: $(cat "$work/median.txt")"
refuses "$work/run.json" "$work/no/such/dir/bad.png" -- "trace_timeline: cannot write '$work/no/such/dir/bad.png'"

[ $failures -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "trace_timeline: all checks passed"
