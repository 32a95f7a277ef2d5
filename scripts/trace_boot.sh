#!/usr/bin/env bash
# Where a boot's time goes, from traces: `plugboard run --bundle B --trace` of a tiny program, N times
# per bundle, and per bundle the medians of the chosen candidate's stages and of the time spent on the
# candidates that failed before it. Bundles: those scripts/bench_boot.sh built (build/bench-bundle-N),
# or the folders given.
#
#   scripts/trace_boot.sh [--runs N] [BUNDLE...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
runs=7
if [ "${1:-}" = "--runs" ]; then runs=$2; shift 2; fi
bundles=("$@")
[ ${#bundles[@]} -gt 0 ] || bundles=("$build_dir"/bench-bundle-1 "$build_dir"/bench-bundle-20)
for b in "${bundles[@]}"; do
  [ -f "$b/bundle.json" ] || [ -d "$b" ] || { echo "trace_boot: $b is not a bundle folder (scripts/bench_boot.sh builds build/bench-bundle-N)" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'func.func public @main(%%x: tensor<4xf32>) -> tensor<4xf32> {\n  %%0 = stablehlo.add %%x, %%x : tensor<4xf32>\n  return %%0 : tensor<4xf32>\n}\n' > "$out/add.mlir"
# An .npy of f32[4] (header by the format's rules, then 16 zero bytes).
python3 - "$out/x.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
header += " " * (64 - 10 - len(header) - 1) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(16))
PY
i=0
for b in "${bundles[@]}"; do
  for r in $(seq "$runs"); do
    "$build_dir/tools/plugboard/plugboard" run --bundle "$b" -i "$out/x.npy" --trace "$out/$i.$r.json" "$out/add.mlir" > /dev/null 2> "$out/err" ||
      { echo "trace_boot: plugboard run --bundle $b failed:" >&2; cat "$out/err" >&2; exit 1; }
  done
  i=$((i + 1))
done
python3 - "$out" "$runs" "${bundles[@]}" <<'PY'
import json, statistics, sys
out, runs, bundles = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
stages = ("found", "verified", "probed", "dependencies", "loaded", "initialized", "client", "devices")
for i, bundle in enumerate(bundles):
    rows = []
    for r in range(1, runs + 1):
        events = [e for e in json.load(open(f"{out}/{i}.{r}.json"))["traceEvents"] if e.get("ph") == "X"]
        candidates = [e for e in events if e["name"] == "candidate"]
        chosen = [c for c in candidates if c.get("args", {}).get("verdict") == "chosen"]
        if not chosen:
            sys.exit(f"trace_boot: no chosen candidate in the trace of {bundle}")
        c = chosen[0]
        inside = [e for e in events if e["name"] in stages and e["ts"] >= c["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 0.001]
        row = {s: sum(e["dur"] for e in inside if e["name"] == s) for s in stages}
        row["failed before it"] = sum(e["dur"] for e in candidates if e is not c)
        row["chosen candidate"] = c["dur"]
        row["candidates"] = len(candidates)
        rows.append(row)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    parts = ", ".join(f"{s} {med[s] / 1000:.2f}" for s in stages if med[s] >= 1)
    print(f"{bundle}: {med['candidates']:.0f} candidates; medians of {runs} boots (ms): {med['failed before it'] / 1000:.2f} on the "
          f"candidates that failed, {med['chosen candidate'] / 1000:.2f} on the chosen one ({parts})")
PY
