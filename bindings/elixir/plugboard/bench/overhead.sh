#!/usr/bin/env bash
# Elixir's overhead over the C++ library, per CPU plugin (bench/overhead.exs: the C++ baseline is
# measured in the same process, interleaved with the Elixir calls).
#
#   bindings/elixir/plugboard/bench/overhead.sh [BUILD_DIR]      (after scripts/setup.sh)
exec "$(dirname "$0")/each_plugin.sh" overhead.exs "$@"
