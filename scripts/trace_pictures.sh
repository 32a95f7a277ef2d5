#!/usr/bin/env bash
# The trace pictures of docs/traces.md (docs/images/trace_*.png), drawn by scripts/trace_timeline.py
# with the plot venv (scripts/plot_venv.sh):
#   trace_cli_callbacks.png   `plugboard run --trace` of examples/callbacks.mlir (made here, on the
#                             CPU plugin 0.81, its callback the command cp): the plugin's self-test,
#                             a compile-cache hit, copies, the execution with a blocking host
#                             callback and two ordered ones (prints)
#   trace_training_step.png   an Nx training step        } from the traces the Elixir tests save when
#   trace_runtime_call.png    an io_call/runtime_call    } PLUGBOARD_TRACE_OUT names a folder (docs/
#   trace_cluster_request.png a cluster request          } traces.md says which tests), the newest of
#     *train*.json, *runtime_call*.json and *cluster*.json; a trace not there is reported (exit 1)
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
  --title "plugboard run examples/callbacks.mlir: the plugin's self-test, a compile-cache hit, one execution with a blocking host callback (cp)"

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
picture '*train*.json' trace_training_step.png --title "An Nx training step"
picture '*runtime_call*.json' trace_runtime_call.png --title "An Nx program with io_call and runtime_call"
picture '*cluster*.json' trace_cluster_request.png --title "A cluster request"
ls -l "$images"/trace_*.png
[ $missing -eq 0 ] || { echo "[trace-pictures] $missing trace(s) missing" >&2; exit 1; }
