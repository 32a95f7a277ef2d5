# Sourced by the benchmark scripts here (nx_bench.sh, jax_bench.sh): the environment the tests use,
# run from bindings/elixir/plugboard_nx. PLUGBOARD_PREFIX (an installed plugboard; default
# build/elixir-prefix after scripts/test_elixir.sh), Nx from Hex (the local registry of
# scripts/hex_registry.sh while the script runs, or hex.pm), an Elixir >= 1.17 (scripts/elixir_toolchain.sh).
# Sets `root` (the repository) and `bench_plugins` (the three CPU plugins' files).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../../.." && pwd)
export PLUGBOARD_PREFIX=${PLUGBOARD_PREFIX:-$root/build/elixir-prefix}
. "$root/scripts/elixir_toolchain.sh"
PATH="$(modern_elixir_bin "$root"):$PATH"
# The toolchain these benchmarks run on, for scripts/bench_record.sh's record.
[ -n "${PLUGBOARD_RECORD_INFO:-}" ] && elixir -e 'IO.puts("elixir #{System.version()} #{System.otp_release()}")' >> "$PLUGBOARD_RECORD_INFO"
export MIX_HOME=${MIX_HOME:-$root/build/mix-home-modern} HEX_HOME=${HEX_HOME:-$root/build/hex-home}
. "$root/scripts/hex_registry.sh"
hex_deps_get "$here"
deps=${PLUGBOARD_DEPS_DIR:-$HOME/.cache/plugboard/deps}
bench_plugins=()
for p in xla_cpu_081/xla_cpu_pjrt.so xla_cpu_106/libpjrt_cpu.so xla_cpu_115/pjrt_c_api_cpu_plugin.so; do
  bench_plugins+=("$deps/files/$p")
done
cd "$here"
# each_plugin SCRIPT.exs: runs SCRIPT with `mix run` once per CPU plugin (PLUGBOARD_BENCH_PLUGIN),
# XLA's log lines filtered, a blank line between plugins.
each_plugin() {
  for p in "${bench_plugins[@]}"; do
    PLUGBOARD_BENCH_PLUGIN="$p" MIX_ENV=${MIX_ENV:-prod} mix run "$1" 2>&1 | grep -v "^[EW]0000"
    echo
  done
}
