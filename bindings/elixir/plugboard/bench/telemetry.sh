#!/usr/bin/env bash
# What plugboard's :telemetry events cost on Plugboard.run!, per CPU plugin (bench/telemetry.exs: off
# as without :telemetry, on with no handler, on with Plugboard.Telemetry.Summary). :telemetry comes
# from Hex (scripts/hex_registry.sh's local registry, or hex.pm).
#
#   bindings/elixir/plugboard/bench/telemetry.sh [BUILD_DIR]      (after scripts/setup.sh)
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/each_plugin.sh" telemetry.exs "$@"
