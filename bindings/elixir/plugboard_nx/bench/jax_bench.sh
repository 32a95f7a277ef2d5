#!/usr/bin/env bash
# Plugboard.Nx against JAX 0.10.2 on the same four models (bench/jax_bench.exs) on each CPU plugin:
# steady-state step and first call (compile) timed in interleaved rounds, Plugboard.Nx and JAX's
# worker pinned to the same cores (JAXBENCH_CPUS, default all of them: taskset, which the worker
# inherits), ratios Plugboard.Nx / JAX printed per plugin.
#
#   bindings/elixir/plugboard_nx/bench/jax_bench.sh [--models mlp,cnn,transformer,add] [--rounds N]
#   bindings/elixir/plugboard_nx/bench/jax_bench.sh --check      (the test command's: tiny shapes against
#                                                                  bench/fixtures/jax_tiny; no JAX needed)
#   bindings/elixir/plugboard_nx/bench/jax_bench.sh --fixtures   (rewrites bench/fixtures/jax_tiny from JAX)
#   bindings/elixir/plugboard_nx/bench/jax_bench.sh --settings [--models mlp] [--only default,donate]
#                                    (bench/jax_settings.exs: each setting told to the plugin, against JAX)
#
# JAX goes into a virtual environment (JAXBENCH_VENV, default build/bench-venv, as
# scripts/bench_callbacks.sh's) from the wheels pinned in bench/requirements-jax.txt, once.
# The environment otherwise is the tests' (bench/env.sh); MIX_ENV defaults to prod.
set -euo pipefail
. "$(dirname "$0")/env.sh"
export MIX_ENV=${MIX_ENV:-prod}
run() { mix run bench/jax_bench.exs "$@" 2>&1 | grep -v "^[EW]0000"; }
if [ "${1:-}" = "--check" ]; then
  for p in "${bench_plugins[@]}"; do PLUGBOARD_BENCH_PLUGIN="$p" run --check; done
  exit 0
fi
venv=${JAXBENCH_VENV:-$root/build/bench-venv}
if ! "$venv/bin/python" -c "import jax" 2>/dev/null; then
  echo "[jax_bench] installing JAX 0.10.2 into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --require-hashes --only-binary=:all: -r "$root/bench/requirements-jax.txt"
fi
export JAXBENCH_PYTHON="$venv/bin/python"
# First calls are timed compiling: not loading from plugboard's persistent compile cache.
export PLUGBOARD_COMPILE_CACHE=off
# The VM's schedulers do not spin while a process waits for an execution (JAXBENCH_ERL_FLAGS; "" for
# the VM's defaults): spinning schedulers take the cores XLA's threads run on. With the defaults a
# run of x + 1 sometimes settled at 1.5-3x JAX's time, CPU time 4.5x (3 runs in 12 on a loaded
# 2-core machine); with these, 6 runs in 6 at 0.81-0.90x.
export ERL_FLAGS="${ERL_FLAGS:-} ${JAXBENCH_ERL_FLAGS-+sbwt none +sbwtdcpu none +sbwtdio none}"
cpus=${JAXBENCH_CPUS:-0-$(($(nproc) - 1))}
if [ "${1:-}" = "--fixtures" ]; then
  # JAX's outputs do not depend on the plugin: written once, then each plugin checked against them.
  PLUGBOARD_BENCH_PLUGIN="${bench_plugins[0]}" run --fixtures
  for p in "${bench_plugins[@]:1}"; do PLUGBOARD_BENCH_PLUGIN="$p" run --check; done
  exit 0
fi
script=bench/jax_bench.exs
[ "${1:-}" = "--settings" ] && { script=bench/jax_settings.exs; shift; }
for p in "${bench_plugins[@]}"; do
  PLUGBOARD_BENCH_PLUGIN="$p" taskset -c "$cpus" mix run "$script" "$@" 2>&1 | grep -v "^[EWI]0000"
  echo
done
