#!/usr/bin/env bash
# The host-callback benchmark: plugboard's blocking and ordered callbacks against JAX's
# jax.pure_callback and io_callback(ordered=True), measured in the same run on this machine's CPU.
#
#   scripts/bench_callbacks.sh [--quick]
#
# JAX 0.10.2 goes into a virtual environment (build/bench-venv) from the wheels pinned in
# bench/requirements-jax.txt (versions and sha256). Not part of CI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
venv="$build_dir/bench-venv"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then "$root/scripts/setup.sh" --build-dir "$build_dir"; fi
cmake --build "$build_dir" --target callback_bench --parallel "$(nproc)" >/dev/null
if [ ! -x "$venv/bin/python" ]; then
  echo "[bench] installing JAX 0.10.2 into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --require-hashes --only-binary=:all: -r "$root/bench/requirements-jax.txt"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Interleaved: JAX, plugboard, JAX again, so that both see the same machine.
"$venv/bin/python" "$root/bench/jax_callbacks.py" "$@" > "$out/jax1.json" 2>/dev/null
"$build_dir/bench/callback_bench" --json "$@" > "$out/pb.json" 2> >(grep -v '^[WIE][0-9]' >&2)
"$venv/bin/python" "$root/bench/jax_callbacks.py" "$@" > "$out/jax2.json" 2>/dev/null
python3 - "$out" <<'PY'
import json, statistics, sys, os
d = sys.argv[1]
jax = [json.load(open(os.path.join(d, f))) for f in ("jax1.json", "jax2.json")]
j = {k: statistics.mean(r[k] for r in jax) for k in jax[0] if k.endswith("_us")}
pb = [json.loads(l) for l in open(os.path.join(d, "pb.json")) if l.strip()]
print(f"JAX {jax[0]['jax']} on CPU (mean of two runs around plugboard's):")
print(f"  jit(x + x)                      {j['plain_us']:8.2f} µs")
print(f"  pure_callback              cost {j['pure_callback_cost_us']:8.2f} µs")
print(f"  io_callback                cost {j['io_callback_cost_us']:8.2f} µs")
print(f"  io_callback(ordered=True)  cost {j['io_callback_ordered_cost_us']:8.2f} µs")
print()
print("A callback's cost: its program's time minus the plain program's (one call per execution), and")
print("per call in a 1,000-iteration loop. Ratios use the larger of the two, so they never flatter plugboard.")
print()
print("| plugin | plain execute | blocking: one call / per call in loop | vs pure_callback | ordered, awaited: one call / per call in loop | ordered, program only | vs io_callback(ordered=True) |")
print("|---|---|---|---|---|---|---|")
for r in pb:
    b = max(r["blocking_cost_us"], r["loop_blocking_cost_us"])
    o = max(r["ordered_awaited_cost_us"], r["loop_ordered_cost_us"])
    print(f"| {r['plugin']} | {r['plain_us']:.2f} µs | {r['blocking_cost_us']:.2f} / {r['loop_blocking_cost_us']:.3f} µs | "
          f"{j['pure_callback_cost_us'] / b:.0f}× cheaper | {r['ordered_awaited_cost_us']:.2f} / {r['loop_ordered_cost_us']:.3f} µs | "
          f"{r['ordered_program_cost_us']:.2f} µs | {j['io_callback_ordered_cost_us'] / o:.0f}× cheaper |")
PY
