#!/usr/bin/env bash
# Plugboard.Nx's two routes for Nx.LinAlg.eigh and svd side by side (test/fixtures/lapack/routes_bench.exs):
# plugboard's LAPACK kernels against the in-program Jacobi, per op, type and size, the median time
# of a call and each route's accuracy, with the environment the tests use (bench/env.sh).
#
#   bindings/elixir/plugboard_nx/bench/linalg_routes.sh [PLUGIN] [SIZES] [ROUNDS]    (defaults: the 0.115 plugin, 64,256, 7)
set -euo pipefail
. "$(dirname "$0")/env.sh"
MIX_ENV=test mix run test/fixtures/lapack/routes_bench.exs "$@" 2>&1 | grep -v "^[EWI]0000"
