#!/usr/bin/env bash
# The cluster's figures (issue 27): tests/elixir_cluster_test.sh --figures, in the environment of the
# other benchmarks here (env.sh). Three OS nodes of the sample's releases on 127.0.0.1 (web,
# compute1 on cpu = 0.81 with 4 devices, compute2 on cpu115 = 0.115 with 2 devices), 2000 requests
# at concurrency 32 per line: one compute node against two, the serving called on a compute node
# itself (no distribution), Nx.Serving.batched_run/2 from web, Plugboard.Serving.run/3 by weight and
# by load with compute1 made slower (SLOW_MS per batch, default 80), closed-loop and open-loop (RATE per second, default 2000), with and without a node killed.
# Prints each run's rps, p50/p99, batch fill, and the ratios; no check on time. ~2 min.
#
#   bindings/elixir/plugboard_nx/bench/cluster_bench.sh [WORKDIR]    (default build/cluster-bench)
set -euo pipefail
. "$(dirname "$0")/env.sh"
export PLUGBOARD_DEPS_DIR=$deps
exec "$root/tests/elixir_cluster_test.sh" --figures "${1:-$root/build/cluster-bench}"
