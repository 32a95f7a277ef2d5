# Sourced by this folder's benchmark scripts: the install tree of a C++ build as the package's native
# library, Mix and Hex state of the build's own (:telemetry from Hex: scripts/hex_registry.sh's local
# registry while the script runs, or hex.pm), the project compiled, and the shell in it.
#
#   BUILD_DIR=DIR; export MIX_ENV=test; . "$(dirname "$0")/env.sh"   (defaults: <repo>/build, prod)
#
# Sets `root` (the repository), `build` and `deps` (the plugins' folder).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
# The toolchain these benchmarks run on, for scripts/bench_record.sh's record.
[ -n "${PLUGBOARD_RECORD_INFO:-}" ] && elixir -e 'IO.puts("elixir #{System.version()} #{System.otp_release()}")' >> "$PLUGBOARD_RECORD_INFO"
cmake --install "$build" --prefix "$build/elixir-prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$build/elixir-prefix" MIX_ENV=${MIX_ENV:-prod}
export MIX_HOME=${MIX_HOME:-$build/mix-home} HEX_HOME=${HEX_HOME:-$build/hex-home}
. "$root/scripts/hex_registry.sh"
hex_deps_get "$root/bindings/elixir/plugboard"
cd "$root/bindings/elixir/plugboard"
mix compile >/dev/null
