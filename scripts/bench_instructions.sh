#!/usr/bin/env bash
# Instructions per dispatch (callgrind), beside the wall time scripts/bench.sh measures: the machine's
# run-to-run spread is larger than the gap between plugboard and the raw C API. Runs plugboard_bench
# --only dispatch --only threads --only trace (a span off and on, the dispatch loop traced) under valgrind's callgrind (each loop counted alone:
# bench/instruction_count.h; the threads benchmark counts its host-callback program on one thread) and
# prints, per plugin and program, the raw C API's instructions per iteration, plugboard's extra, and
# how many of them plugboard's own code (src/) spends.
#
#   scripts/bench_instructions.sh [--plugin PATH]...      (needs valgrind: apt-get install valgrind)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
command -v valgrind > /dev/null || { echo "bench_instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
"$root/scripts/bench.sh" --only dispatch --quick "$@" > /dev/null  # builds plugboard_bench (with valgrind's header)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
plugins=("$@")
if [ ${#plugins[@]} -eq 0 ]; then
  deps=${PLUGBOARD_DEPS_DIR:-$HOME/.cache/plugboard/deps}/files
  plugins=(--plugin "$deps/xla_cpu_081/xla_cpu_pjrt.so" --plugin "$deps/xla_cpu_106/libpjrt_cpu.so"
           --plugin "$deps/xla_cpu_115/pjrt_c_api_cpu_plugin.so")
fi
i=0
while [ $i -lt ${#plugins[@]} ]; do
  flag=${plugins[$i]}; path=${plugins[$((i + 1))]}; i=$((i + 2))
  mkdir -p "$out/$i"
  valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$out/$i/cg.%p" \
    "$build_dir/bench/plugboard_bench" --only dispatch --only threads --only trace "$flag" "$path" > /dev/null 2> "$out/$i/log" ||
    { tail -n 20 "$out/$i/log"; exit 1; }
  echo "== $path"
  python3 - "$out/$i" <<'PY'
import glob, re, subprocess, sys
counts, own = {}, {}
for f in glob.glob(sys.argv[1] + "/cg.*"):
    text = open(f, errors="replace").read()
    name = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
    total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if not (name and total):
        continue
    program, variant = name.group(1).removeprefix("dispatch ").split(" | ")
    counts.setdefault(program, {})[variant] = int(total.group(1)) / 2000  # kCountedIterations
    if variant != "raw":
        # plugboard's own instructions: the self cost of every function compiled from src/ (the
        # plugin's work, its threads' included, and libc's are left out).
        listing = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", f],
                                 capture_output=True, text=True).stdout
        own[(program, variant)] = sum(int(m.group(1).replace(",", "")) for m in
                                      re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+src/", listing, re.M)) / 2000
print(f"   {'program':20} {'plugboard call':24} {'raw C API':>10} {'plugboard':>18} {'own code':>9}   (instructions per iteration)")
for program, v in sorted(counts.items()):
    raw = v.get("raw")  # none for the trace benchmark's span loops: counted alone
    for variant in sorted(k for k in v if k != "raw"):
        if raw is None:
            print(f"   {program:20} {variant:24} {'':>10} {v[variant]:10.0f} {'':8} {own.get((program, variant), 0):9.0f}")
            continue
        print(f"   {program:20} {variant:24} {raw:10.0f} {v[variant]:10.0f} (+{v[variant] - raw:5.0f}) "
              f"{own.get((program, variant), 0):9.0f}")
print("   own code: instructions the plugboard call spends in plugboard's own functions (src/), per call;")
print("   the totals also count the plugin's worker threads, whose spinning varies from run to run")
PY
done
