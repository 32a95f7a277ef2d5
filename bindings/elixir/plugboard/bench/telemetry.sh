#!/usr/bin/env bash
# What plugboard's :telemetry events cost on Plugboard.run!, per CPU plugin (bench/telemetry.exs: off
# as without :telemetry, on with no handler, on with Plugboard.Telemetry.Summary). :telemetry comes
# from PLUGBOARD_HEX_MIRROR (default: ../shared/vendor/hex-nx0.13 beside the repository).
#
#   bindings/elixir/plugboard/bench/telemetry.sh [BUILD_DIR]      (after scripts/setup.sh)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
if [ -z "${PLUGBOARD_HEX_MIRROR:-}" ] && [ -d "$root/../shared/vendor/hex-nx0.13/telemetry" ]; then
  export PLUGBOARD_HEX_MIRROR=$(cd "$root/../shared/vendor/hex-nx0.13" && pwd)
fi
exec "$here/each_plugin.sh" telemetry.exs "$@"
