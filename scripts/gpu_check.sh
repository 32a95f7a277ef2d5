#!/usr/bin/env bash
# The GPU check of issue 25, in two halves, for a session lent a GPU machine (the `device` tool):
#
#   scripts/gpu_check.sh prepare [BUILD_DIR]    here, no GPU needed (~5 min)
#   scripts/gpu_check.sh run                    there: the `device` tool's run, with carry ["gpu-check"]
#                                               and this command (under 5 minutes)
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
# the CPU's, and a donated buffer written in place. Exit 0 when all hold. Its output is also written to $OUT/gpu_check.txt when $OUT is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/gpu-check
mode=${1:-}

line_of() { grep '^gpu_check: ' "$1" | tail -n 1; }

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
  python3 - "$out/cpu_reference.txt" "$log" <<'PY'
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
  ;;
*)
  echo "usage: scripts/gpu_check.sh prepare [BUILD_DIR] | run" >&2
  exit 2
  ;;
esac
