#!/usr/bin/env bash
# The Elixir package's tests (bindings/elixir): ExUnit on the three real CPU plugins, then the
# end-to-end release test (the sample app's compute release built, booted and run here).
# Uses the C++ build in BUILD_DIR (default build/): its install tree becomes the package's native
# library (PLUGBOARD_PREFIX), its fault plugins the tests' (PLUGBOARD_FAULT_DIR).
#
#   scripts/test_elixir.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}

prefix="$build/elixir-prefix"
cmake --install "$build" --prefix "$prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$prefix" PLUGBOARD_FAULT_DIR="$build/tests" PLUGBOARD_DEPS_DIR="$deps"
export PLUGBOARD_WERROR=${PLUGBOARD_WERROR:-ON}
# Mix's own state (it never needs Hex here: the package has no Hex dependencies).
export MIX_HOME=${MIX_HOME:-$build/mix-home}

echo "[elixir] ExUnit (bindings/elixir)"
(cd "$root/bindings/elixir" && MIX_ENV=test mix test)

if [ -x "$root/tests/elixir_release_test.sh" ]; then
  echo "[elixir] the sample app's compute release, end to end"
  export PLUGBOARD_FAULT_PLUGIN="$build/tests/libfault_init_error.so"
  "$root/tests/elixir_release_test.sh" "$build/elixir-release-test"
fi
echo "[elixir] all tests passed"
