#!/usr/bin/env bash
# Sets everything up, then runs the main job on the default CPU plugin (xla-cpu-pjrt, PJRT 0.81):
# compiles examples/softmax.mlir and runs it on examples/x.npy, printing the outputs and the plugin.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
"$root/scripts/setup.sh" --build-dir "$root/build"
exec "$root/build/tools/plugboard/plugboard" run "$root/examples/softmax.mlir" \
  --plugin "$deps/files/xla_cpu_081/xla_cpu_pjrt.so" -i "$root/examples/x.npy" "$@"
