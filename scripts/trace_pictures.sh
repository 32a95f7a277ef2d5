#!/usr/bin/env bash
# The trace pictures of docs/traces.md (docs/images/trace_*.png), drawn by scripts/trace_timeline.py
# with the plot venv (scripts/plot_venv.sh):
#   trace_cli_callbacks.png   `plugboard run --trace` of examples/callbacks.mlir (made here, on the
#                             CPU plugin 0.81, its callback the command cp): the plugin's self-test,
#                             a compile-cache hit, copies, the execution with a blocking host
#                             callback and two ordered ones (prints)
#   trace_training_step.png, trace_training_step_first.png   an Nx training step (a cached call, the first)
#   trace_runtime_call.png      an Nx program with io_call and runtime_call
#   trace_cluster_request.png   a serving request between two nodes
# from the traces the Elixir tests save when PLUGBOARD_TRACE_OUT names a folder (docs/traces.md says
# which tests), the newest of training_step*.json, *runtime_call*.json and cluster_requests*.json (the
# median of its requests; else cluster_request.*json, one request); a trace not there is reported (exit 1).
#
#   scripts/trace_pictures.sh [TRACES_DIR]       (default: BUILD_DIR/trace-out, BUILD_DIR=build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
traces=${1:-$build_dir/trace-out}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
python=$("$root/scripts/plot_venv.sh" "$build_dir")
images="$root/docs/images"
mkdir -p "$images" "$traces"
draw() { "$python" "$root/scripts/trace_timeline.py" "$@"; }

"$build_dir/tools/plugboard/plugboard" run "$root/examples/callbacks.mlir" \
  --plugin "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" -i "$root/examples/x.npy" \
  --callback 'host_scale=cp "$1" "$2"' --trace "$traces/cli_callbacks.json" > /dev/null
draw "$traces/cli_callbacks.json" "$images/trace_cli_callbacks.png" \
  --title "plugboard run examples/callbacks.mlir: the host-callback self-test, a compile-cache hit, an execution with a blocking host callback (cp)"

missing=0
# picture PATTERN PNG ARGS...: draws the newest trace of TRACES_DIR whose name matches PATTERN.
picture() {
  local pattern=$1 png=$images/$2 trace
  shift 2
  trace=$(ls -t "$traces"/$pattern 2>/dev/null | head -n 1 || true)
  if [ -n "$trace" ]; then
    draw "$trace" "$png" "$@"
  else
    echo "[trace-pictures] no $traces/$pattern: $png not redrawn (docs/traces.md: how the tests save it)" >&2
    missing=$((missing + 1))
  fi
}
picture 'training_step*.json' trace_training_step.png --focus jit --occurrence -1 \
  --title "An Nx training step (an MLP's step, jit-compiled, cached): Plugboard.Nx.jit on the CPU plugin"
picture 'training_step*.json' trace_training_step_first.png \
  --title "The same training step's first call: the cache lookup misses, the program is emitted and compiled, then run"
picture '*runtime_call*.json' trace_runtime_call.png --focus run --width 16 \
  --title "An Nx program with two io_calls (ordered) and a runtime_call (blocking): its execution"
if ls "$traces"/cluster_requests*.json > /dev/null 2>&1; then  # 30 requests: the one of median length
  picture 'cluster_requests*.json' trace_cluster_request.png --focus serving_run --occurrence median \
    --title "A serving request across two nodes (the median of 30): routed on the caller, served (batched, run) on the member"
else
  picture 'cluster_request.*json' trace_cluster_request.png \
    --title "A serving request across two nodes: routed on the caller, served (batched, run) on the member"
fi
ls -l "$images"/trace_*.png
[ $missing -eq 0 ] || { echo "[trace-pictures] $missing trace(s) missing" >&2; exit 1; }
