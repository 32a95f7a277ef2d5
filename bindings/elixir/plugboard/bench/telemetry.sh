#!/usr/bin/env bash
# What plugboard's per-run :telemetry events cost on Plugboard.run!, per CPU plugin (bench/telemetry.exs: off
# as by default, run_events on with no handler, run_events on with a handler). :telemetry comes
# from Hex (scripts/hex_registry.sh's local registry, or hex.pm).
#
#   bindings/elixir/plugboard/bench/telemetry.sh [BUILD_DIR]      (after scripts/setup.sh)
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/each_plugin.sh" telemetry.exs "$@"
