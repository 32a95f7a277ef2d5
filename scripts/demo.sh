#!/usr/bin/env bash
# Sets everything up, then runs the main job: bundles two real plugins (the default CPU plugin
# xla-cpu-pjrt, PJRT 0.81, and the CUDA 13 plugin jax-cuda13-pjrt) from the wheels set-up fetched with
# pip, runs examples/softmax.mlir from the bundle on whichever target this machine can start (the CPU one
# on a machine without a GPU), runs examples/callbacks.mlir there (a print hook and a blocking host
# callback), lets `plugboard doctor` explain that choice, and builds and boots the Elixir sample
# app's `compute` release (three targets in one release; bindings/elixir/sample).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
"$root/scripts/setup.sh" --build-dir "$root/build"
pb="$root/build/tools/plugboard/plugboard"
bundle="$root/build/demo-bundle"
echo "[demo] plugboard bundle -> $bundle"
"$pb" bundle --offline --from "$deps/wheels" --lock --lock-file "$root/build/demo-bundle.lock" --out "$bundle" \
  --target cpu=xla-cpu-pjrt==0.0.1 --target cuda13=jax-cuda13-pjrt==0.12.0.1
echo "[demo] plugboard run --bundle $bundle examples/softmax.mlir"
"$pb" run --bundle "$bundle" "$root/examples/softmax.mlir" -i "$root/examples/x.npy" "$@" 2> >(grep -v '^[WIE][0-9]' >&2)
echo "[demo] plugboard run --bundle $bundle examples/callbacks.mlir (a print hook and a blocking host callback)"
"$pb" run --bundle "$bundle" "$root/examples/callbacks.mlir" -i "$root/examples/x.npy" \
  --callback "host_scale=python3 $root/examples/host_scale.py" 2> >(grep -v '^[WIE][0-9]' >&2)
echo "[demo] plugboard doctor --bundle $bundle"
"$pb" doctor --bundle "$bundle" 2> >(grep -v '^[WIE][0-9]' >&2)

# The Elixir side: the sample umbrella's `compute` release (cpu + cuda13 + rocm7 in one release, from
# the same wheels, offline), built and booted here: it chooses its target and runs a program with a
# print hook and a blocking Elixir callback.
if command -v mix > /dev/null; then
  prefix="$root/build/elixir-prefix"
  cmake --install "$root/build" --prefix "$prefix" --strip > /dev/null
  # :plugboard's Hex dependency (the optional :telemetry) from a Hex repository: the local registry
  # of scripts/hex_registry.sh where the public one cannot be reached.
  export MIX_HOME=${MIX_HOME:-$root/build/mix-home} HEX_HOME=${HEX_HOME:-$root/build/hex-home}
  . "$root/scripts/hex_registry.sh"
  hex_deps_get "$root/bindings/elixir/sample"
  echo "[demo] MIX_ENV=prod mix release compute (bindings/elixir/sample)"
  (cd "$root/bindings/elixir/sample" && PLUGBOARD_PREFIX="$prefix" PLUGBOARD_WHEELS="$deps/wheels" \
     MIX_ENV=prod MIX_BUILD_ROOT="$root/build/sample-build" mix release compute --overwrite --quiet)
  echo "[demo] bin/compute eval 'Compute.Demo.main()'"
  "$root/build/sample-build/prod/rel/compute/bin/compute" eval 'Compute.Demo.main()' 2> >(grep -v '^[WIE][0-9]' >&2)
fi
