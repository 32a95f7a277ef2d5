#!/usr/bin/env bash
# The GPU check of issue 25, in two halves, for a session lent a GPU machine (the `device` tool):
#
#   scripts/gpu_check.sh prepare [BUILD_DIR]    here, no GPU needed (~5 min)
#   scripts/gpu_check.sh run                    there: the `device` tool's run, with carry ["gpu-check"]
#                                               and this command (under 5 minutes)
#   scripts/gpu_check.sh profiler PLUGIN [TRACE]  the plugin-profiler check alone, on any plugin (below)
#   scripts/gpu_check.sh check-trace TRACE        its trace checks alone, on a trace file
#
# prepare builds, into gpu-check/ (ignored; about 40 MB, under the tool's 64 MiB):
#   - rel/: the sample's `gpu_check` release (compute with Plugboard.Nx, no embedded bundle; ERTS
#     included, so the GPU machine needs no Erlang), on Elixir >= 1.17 with Nx 0.13 (as the tests);
#   - libplugboard_cuda_bridge.so from BUILD_DIR, which must be configured with
#     PLUGBOARD_CUDA_BRIDGE=ON (CI's is; nvcc builds it without a GPU);
#   - cpu_reference.txt: Compute.GpuCheck's line on the CPU plugin here (a training step of the
#     sample's MLP for 20 steps, and a runtime_call).
# run boots that release on the CUDA plugin the GPU machine's image has (jax-cuda13-pjrt; or the
# plugin PLUGBOARD_GPU_CHECK_PLUGIN names), with the bridge, runs the same line there, and compares:
# platform cuda, the runtime_call's and the ordered hook's exact answers, both losses within 1e-3 of
# the CPU's, and a donated buffer written in place. Then the plugin's own profiler (the PJRT profiler
# extension, docs/traces.md): `plugboard run --trace` of tests/conformance/cases/add_f32 on the same
# plugin must give a trace whose "plugin profiler" span says "collected", with spans of the plugin's
# device planes (tracks "plugin /device:GPU:N ...": the kernels CUPTI saw) inside the trace's time, and
# no notes. On a plugin without the extension (the CPU plugins) that check says so and passes; on the
# CUDA plugin without a GPU it fails (the run cannot make a client). prepare keeps the stripped CLI
# (gpu-check/plugboard) for it. Exit 0 when all hold. Its output is also written to $OUT/gpu_check.txt when $OUT is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/gpu-check
mode=${1:-}

line_of() { grep '^gpu_check: ' "$1" | tail -n 1; }

# The plugboard CLI: gpu-check/plugboard (prepared), else PLUGBOARD_CLI, else the build's.
cli_path() {
  local c
  for c in "${PLUGBOARD_CLI:-}" "$out/plugboard" "$root/build/tools/plugboard/plugboard"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  echo "no plugboard CLI (gpu-check/plugboard, PLUGBOARD_CLI or build/tools/plugboard/plugboard)" >&2
  return 1
}

# check_trace TRACE: the plugin profiler's part of a trace (see the header). Exit 0 when it holds.
check_trace() {
  python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc.get("traceEvents", [])
other = doc.get("otherData", {})
tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
spans = [e for e in events if e.get("ph") == "X"]
ok = True
def check(what, good):
    global ok
    print(("PASS: " if good else "FAIL: ") + what)
    ok = ok and good
summaries = [e for e in spans if e["name"] == "plugin profiler"]
outcomes = [e.get("args", {}).get("outcome") for e in summaries]
check(f"the plugin's profiler ran and was collected (plugin profiler spans: {outcomes})", outcomes != [] and all(o == "collected" for o in outcomes))
for e in summaries:
    a = e.get("args", {})
    print(f"  plugin profiler: {a.get('plugin')}: {a.get('planes')} planes, {a.get('events')} events kept, "
          f"{a.get('events_before_trace')} before the trace, {a.get('bytes')} bytes, wall clock moved {a.get('clock_offset_change_ns')} ns")
device = [e for e in spans if e.get("cat") == "plugin" and tracks.get(e["tid"], "").startswith("plugin /device:")]
names = {}
for e in device:
    names[e["name"]] = names.get(e["name"], 0) + 1
top = sorted(names.items(), key=lambda kv: -kv[1])[:5]
check(f"spans of the plugin's device planes: {len(device)} on {len({tracks[e['tid']] for e in device})} tracks (most: {top})", len(device) > 0)
t0, t1 = other.get("started_ns", 0) / 1000.0, other.get("stopped_ns", 0) / 1000.0
outside = [e for e in device if e["ts"] < t0 or e["ts"] + e["dur"] > t1]
check(f"every device span inside the trace's time ({len(outside)} outside)", not outside)
# How well the clocks line up: the plugin's kernels against plugboard's own span of each execution.
executes = [e for e in spans if e["name"] == "execute" and e.get("cat") == "device"]
if executes and device:
    inside = [d for d in device if any(x["ts"] - 1000 <= d["ts"] <= x["ts"] + x["dur"] + 1000 for x in executes)]
    print(f"  note: {len(inside)} of {len(device)} device spans lie within 1 ms of plugboard's execute spans")
notes = other.get("notes", [])
check(f"no trace notes ({notes})", not notes)
sys.exit(0 if ok else 1)
PY
}

# profiler_check PLUGIN TRACE: a traced run on PLUGIN, then check_trace; passes with a word when the
# plugin has no profiler extension.
profiler_check() {
  local plugin=$1 trace=$2 cli case_dir=$root/tests/conformance/cases/add_f32
  cli=$(cli_path) || return 1
  local has
  has=$("$cli" plugins --json "$plugin" 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit("unreadable")
p = d[0] if isinstance(d, list) else d
print("yes" if any(e.get("name") == "Profiler" for e in p.get("extensions", [])) else "no")
' || true)
  case "$has" in
  no) echo "PASS: $plugin has no profiler extension: nothing of the plugin's own to collect"; return 0 ;;
  yes) ;;
  *) echo "FAIL: could not list the extensions of $plugin ($has)"; return 1 ;;
  esac
  echo "[gpu_check] the plugin's own profiler: a traced run on $plugin"
  if ! "$cli" run --plugin "$plugin" "$case_dir/program.mlir" -i "$case_dir/in0.npy" -i "$case_dir/in1.npy" \
       --trace "$trace" > "$trace.log" 2>&1; then
    echo "FAIL: the traced run on $plugin failed:"; tail -n 5 "$trace.log"; return 1
  fi
  grep '^plugboard: trace' "$trace.log" || true
  check_trace "$trace"
}

case "$mode" in
prepare)
  build=$(cd "${2:-$root/build}" && pwd)
  bridge=$(find "$build" -name libplugboard_cuda_bridge.so -print -quit)
  [ -n "$bridge" ] || { echo "no libplugboard_cuda_bridge.so in $build: configure it with PLUGBOARD_CUDA_BRIDGE=ON (scripts/setup.sh)" >&2; exit 1; }
  . "$root/scripts/elixir_toolchain.sh"
  bin=$(modern_elixir_bin "$root")
  deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
  cpu=${PLUGBOARD_GPU_CHECK_CPU_PLUGIN:-$deps/files/xla_cpu_081/xla_cpu_pjrt.so}
  rm -rf "$out" && mkdir -p "$out"
  cmake --install "$build" --prefix "$out/prefix" --strip > /dev/null
  echo "[gpu_check] building the gpu_check release (Elixir: $bin)"
  # Nx from Hex (scripts/hex_registry.sh's local registry where the public one cannot be reached).
  export MIX_HOME="$out/mix-home" HEX_HOME="$out/hex-home"
  . "$root/scripts/hex_registry.sh"
  PATH="$bin:$PATH" hex_deps_get "$root/bindings/elixir/sample"
  (cd "$root/bindings/elixir/sample" && PATH="$bin:$PATH" MIX_ENV=prod MIX_BUILD_ROOT="$out/_build" \
     PLUGBOARD_PREFIX="$out/prefix" \
     mix release gpu_check --overwrite --path "$out/rel") > "$out/release.log" 2>&1 ||
    { tail -n 30 "$out/release.log"; exit 1; }
  hex_registry_stop
  cp "$out/prefix/bin/plugboard" "$out/plugboard"  # the CLI, for the plugin-profiler check
  rm -rf "$out/_build" "$out/mix-home" "$out/mix-home.registry" "$out/hex-home" "$out/prefix"
  cp "$bridge" "$out/libplugboard_cuda_bridge.so"
  echo "[gpu_check] the CPU reference ($cpu)"
  PLUGBOARD_PLUGIN_PATH=$cpu timeout 300 "$out/rel/bin/gpu_check" eval \
    'Application.ensure_all_started(:compute); Compute.GpuCheck.run()' > "$out/cpu.log" 2>&1 ||
    { tail -n 30 "$out/cpu.log"; exit 1; }
  line_of "$out/cpu.log" > "$out/cpu_reference.txt"
  [ -s "$out/cpu_reference.txt" ] || { echo "no gpu_check line on the CPU" >&2; tail -n 30 "$out/cpu.log"; exit 1; }
  cat "$out/cpu_reference.txt"
  echo "[gpu_check] ready: $(du -sh "$out" | cut -f1) in gpu-check/; on the GPU machine: scripts/gpu_check.sh run (carry gpu-check)"
  ;;
run)
  [ -x "$out/rel/bin/gpu_check" ] && [ -s "$out/cpu_reference.txt" ] || { echo "gpu-check/ is not prepared: scripts/gpu_check.sh prepare here first, and carry gpu-check" >&2; exit 1; }
  plugin=${PLUGBOARD_GPU_CHECK_PLUGIN:-$(python3 - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("jax_plugins.xla_cuda13")
if spec is None: sys.exit("no jax_plugins.xla_cuda13 here (set PLUGBOARD_GPU_CHECK_PLUGIN)")
print(os.path.join(list(spec.submodule_search_locations)[0], "xla_cuda_plugin.so"))
PY
)}
  log=${OUT:-$out}/gpu_check.txt
  mkdir -p "$(dirname "$log")"
  { command -v nvidia-smi > /dev/null && nvidia-smi -L; echo "plugin: $plugin"; } | tee "$log"
  PLUGBOARD_PLUGIN_PATH=$plugin PLUGBOARD_CUDA_BRIDGE=$out/libplugboard_cuda_bridge.so timeout 240 \
    "$out/rel/bin/gpu_check" eval 'Application.ensure_all_started(:compute); Compute.GpuCheck.run()' 2>&1 | tee -a "$log"
  status=0
  python3 - "$out/cpu_reference.txt" "$log" <<'PY' || status=1
import sys
def fields(path):
    line = [l for l in open(path) if l.startswith("gpu_check: ")][-1]
    return dict(kv.split("=", 1) for kv in line.split()[1:])
cpu, gpu = fields(sys.argv[1]), fields(sys.argv[2])
ok = True
def check(what, good):
    global ok
    print(("PASS: " if good else "FAIL: ") + what)
    ok = ok and good
check(f"the GPU run booted a cuda client (platform={gpu['platform']}, devices={gpu['devices']})", gpu["platform"].lower() == "cuda")
check(f"runtime_call through the CUDA bridge: {gpu['runtime_call']} (CPU {cpu['runtime_call']}, exact 618.0)", float(gpu["runtime_call"]) == 618.0 == float(cpu["runtime_call"]))
for k in ("loss_first", "loss_last"):
    g, c = float(gpu[k]), float(cpu[k])
    check(f"{k}: GPU {g} CPU {c} (within 1e-3 relative)", abs(g - c) <= 1e-3 * abs(c))
check("the loss fell on the GPU", float(gpu["loss_last"]) < float(gpu["loss_first"]))
check(f"an ordered hook (io_call) through the CUDA bridge saw sum(2 * iota(8)) = {gpu['hook']} (CPU {cpu['hook']}, exact 56.0)", gpu["hook"] != ":none" and float(gpu["hook"]) == 56.0 == float(cpu["hook"]))
check(f"a donated buffer took the aliased output in place (GPU {gpu['donated_in_place']}, CPU {cpu['donated_in_place']})", gpu["donated_in_place"] == "true" == cpu["donated_in_place"])
sys.exit(0 if ok else 1)
PY
  profiler_out=${OUT:-$out}/gpu_profile.txt
  profiler_check "$plugin" "${OUT:-$out}/gpu_profile.trace.json" > "$profiler_out" 2>&1 || status=1
  tee -a "$log" < "$profiler_out"
  exit $status
  ;;
profiler)
  [ -n "${2:-}" ] || { echo "usage: scripts/gpu_check.sh profiler PLUGIN [TRACE]" >&2; exit 2; }
  trace=${3:-$(mktemp -d)/profile.trace.json}
  profiler_check "$2" "$trace"
  ;;
check-trace)
  [ -n "${2:-}" ] || { echo "usage: scripts/gpu_check.sh check-trace TRACE" >&2; exit 2; }
  check_trace "$2"
  ;;
*)
  echo "usage: scripts/gpu_check.sh prepare [BUILD_DIR] | run | profiler PLUGIN [TRACE] | check-trace TRACE" >&2
  exit 2
  ;;
esac
