#!/usr/bin/env bash
# The Elixir packages' tests: :plugboard's ExUnit on the three real CPU plugins (bindings/elixir/plugboard,
# on Debian's Elixir, then on Elixir >= 1.17: scripts/elixir_toolchain.sh), then the end-to-end
# release test (the sample app's compute release built, booted and run here, with its Nx job), the
# cluster test (web and two compute nodes of those releases), then Nx on plugboard
# (bindings/elixir/plugboard_nx: its tests, the documentation of both packages (scripts/docs.sh), Nx's
# own suite and Axon's own suite twice, on Elixir >= 1.17).
# Hex dependencies are plain requirements ({:nx, "~> 0.13"}), resolved through a local Hex registry
# on 127.0.0.1 (scripts/hex_registry.sh: PLUGBOARD_HEX_PACKAGES' tarballs, Hex from PLUGBOARD_HEX_SRC);
# Nx's and Axon's own suites run from their sources (PLUGBOARD_HEX_MIRROR, default
# ../shared/vendor/hex-nx0.13), the only place where sources stand in for packages.
# Uses the C++ build in BUILD_DIR (default build/): its install tree becomes the package's native
# library (PLUGBOARD_PREFIX), its fault plugins the tests' (PLUGBOARD_FAULT_DIR).
#
# With --sanitize, BUILD_DIR is an ASan + UBSan build (scripts/setup.sh --sanitize): the NIF is built
# with the sanitizers too, into a build root of its own, and ExUnit runs with the ASan runtime
# preloaded into the VM (the BEAM itself is not instrumented; leak checks are off, since the VM does
# not free everything at exit; tests tagged glibc_malloc, which check glibc's allocator as the NIF tunes
# it, are excluded: ASan replaces it; so are tests tagged sanitizer_speed, whose count depends on how
# fast native code runs against a time budget, several times slower under ASan). The release test
# runs in the regular pass only.
#
#   scripts/test_elixir.sh [--sanitize] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=0
[ "${1:-}" = "--sanitize" ] && { sanitize=1; shift; }
build=$(cd "${1:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}

prefix="$build/elixir-prefix"
cmake --install "$build" --prefix "$prefix" --strip >/dev/null
export PLUGBOARD_PREFIX="$prefix" PLUGBOARD_FAULT_DIR="$build/tests" PLUGBOARD_DEPS_DIR="$deps"
export PLUGBOARD_WERROR=${PLUGBOARD_WERROR:-ON}
# Mix's and Hex's own state. :plugboard's ExUnit on Debian's Elixir runs in a MIX_HOME without Hex:
# a build without Hex has no :telemetry (the optional dependency), so the telemetry-absent paths are
# tested there, and the current-Elixir pass below, with Hex, tests them present.
export MIX_HOME=$build/mix-home-nohex HEX_HOME=$build/hex-home
rm -rf "$MIX_HOME/archives"
. "$root/scripts/hex_registry.sh"

if [ $sanitize -eq 1 ]; then
  echo "[elixir] ExUnit with the NIF and libplugboard under ASan + UBSan"
  asan=$(gcc -print-file-name=libasan.so)
  (cd "$root/bindings/elixir/plugboard" && MIX_ENV=test MIX_BUILD_ROOT="$build/elixir-build" PLUGBOARD_NIF_SANITIZE=ON PLUGBOARD_EXPECT_TELEMETRY=0 \
     LD_PRELOAD="$asan" ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1" \
     UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" mix test --exclude glibc_malloc --exclude sanitizer_speed)
  echo "[elixir] no sanitizer report"
  exit 0
fi

echo "[elixir] ExUnit (bindings/elixir/plugboard) on $(elixir --version | tail -n 1)"
(cd "$root/bindings/elixir/plugboard" && MIX_ENV=test PLUGBOARD_EXPECT_TELEMETRY=0 mix test)

# The same on a current Elixir (>= 1.17, what current Nx needs): the one on PATH, else one built once
# from PLUGBOARD_ELIXIR_SRC (scripts/elixir_toolchain.sh). :plugboard supports both; the release test
# and Nx on plugboard run on it.
. "$root/scripts/elixir_toolchain.sh"
modern_bin=
if modern_bin=$(modern_elixir_bin "$root"); then
  # Hex, pointed at the local registry (or hex.pm), for everything on the current Elixir.
  if PATH="$modern_bin:$PATH" hex_for "$build/mix-home-modern" "$build/hex-registry"; then
    echo "[elixir] ExUnit (bindings/elixir/plugboard, with Hex and :telemetry) on $("$modern_bin/elixir" --version | tail -n 1)"
    (cd "$root/bindings/elixir/plugboard" && PATH="$modern_bin:$PATH" MIX_ENV=test MIX_HOME="$build/mix-home-modern" \
       MIX_BUILD_ROOT="$build/elixir-build-modern" PLUGBOARD_EXPECT_TELEMETRY=1 sh -c 'mix deps.get > /dev/null && mix test')
  else
    modern_bin=
    echo "[elixir] SKIPPED everything on Elixir >= 1.17 (ExUnit with :telemetry, the Nx jobs, Nx on plugboard, the packages, the documentation): no Hex repository (set PLUGBOARD_HEX_PACKAGES to a folder of Hex tarballs, such as ../shared/vendor/hex-packages, and PLUGBOARD_HEX_SRC to the Hex client's sources)"
  fi
else
  modern_bin=
  echo "[elixir] SKIPPED ExUnit on Elixir >= 1.17, the release test's Nx job, Nx on plugboard and the Elixir documentation: no Elixir >= 1.17 on PATH and none could be built (set PLUGBOARD_ELIXIR_SRC to Elixir's sources)"
fi

# Nx's and Axon's own suites run from their sources (Hex tarballs carry no tests): the folder
# PLUGBOARD_HEX_MIRROR names (default: ../shared/vendor/hex-nx0.13 beside the repository).
mirror=${PLUGBOARD_HEX_MIRROR:-}
[ -z "$mirror" ] && [ -d "$root/../shared/vendor/hex-nx0.13/nx" ] && mirror=$(cd "$root/../shared/vendor/hex-nx0.13" && pwd)
if [ -n "$mirror" ]; then export PLUGBOARD_HEX_MIRROR="$mirror"; else unset PLUGBOARD_HEX_MIRROR; fi
# Nx (plugboard_nx, the sample's Nx jobs) needs the Elixir above.
if [ -n "$modern_bin" ]; then export PLUGBOARD_WITH_NX=1; else export PLUGBOARD_WITH_NX=0; fi
with_nx_elixir() { if [ -n "$modern_bin" ]; then PATH="$modern_bin:$PATH" MIX_HOME="$build/mix-home-modern" "$@"; else "$@"; fi; }

if [ -x "$root/tests/elixir_release_test.sh" ]; then
  echo "[elixir] the sample app's compute release, end to end (on $(with_nx_elixir elixir --version | tail -n 1))"
  export PLUGBOARD_FAULT_PLUGIN="$build/tests/libfault_init_error.so"
  with_nx_elixir "$root/tests/elixir_release_test.sh" "$build/elixir-release-test"
  # One release, one cluster: web and two compute nodes (different targets) as OS processes on
  # 127.0.0.1, on the release test's build (nothing recompiled) and plugin cache.
  if [ "$PLUGBOARD_WITH_NX" = 1 ]; then
    echo "[elixir] the sample's releases as one cluster (tests/elixir_cluster_test.sh)"
    with_nx_elixir env MIX_BUILD_ROOT="$build/elixir-release-test/_build" XDG_CACHE_HOME="$build/elixir-release-test/cache" \
      "$root/tests/elixir_cluster_test.sh" "$build/elixir-cluster-test"
  fi
  # Deploy anywhere: that compute release copied into bare Debian roots (debootstrap minbase, cached;
  # chroot needs root, as on CI).
  if [ "$(id -u)" -eq 0 ]; then
    echo "[elixir] the compute release on bare Debian roots, bookworm and trixie (tests/bare_host_test.sh)"
    "$root/tests/bare_host_test.sh" "$build/elixir-release-test/_build/prod/rel/compute"
  else
    echo "[elixir] SKIPPED the bare-root boots: chroot needs root"
  fi
fi

# The Hex packages as published (scripts/package.sh: :plugboard with its sources and checksum.exs,
# :plugboard_nx, the precompiled archive), then a new user's app installed from them through a
# registry of its own, compiled with no compiler, released with two targets and booted on a bare root.
if [ "$PLUGBOARD_WITH_NX" = 1 ]; then
  echo "[elixir] the Hex packages and the precompiled native part (scripts/package.sh)"
  with_nx_elixir "$root/scripts/package.sh" "$build/packages" "$build"
  echo "[elixir] a new user's app from the packages (tests/new_user_app_test.sh)"
  bare_suites=bookworm; [ "$(id -u)" -eq 0 ] || bare_suites=
  with_nx_elixir env PLUGBOARD_BARE_SUITES="$bare_suites" "$root/tests/new_user_app_test.sh" "$build/packages" "$build/new-user-app"
fi

if [ "$PLUGBOARD_WITH_NX" = 1 ]; then
  nx_build="$build/elixir-build-nx"
  echo "[elixir] Nx on plugboard (bindings/elixir/plugboard_nx; Nx from Hex)"
  (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_ENV=test MIX_BUILD_ROOT="$nx_build" sh -c 'mix deps.get >/dev/null && mix test')
  # The documentation as readers get it: both packages' `mix docs` with the guides (a warning fails
  # it), then the pages opened in headless Chromium (screenshots kept in $build/docs/screenshots).
  echo "[elixir] the documentation (scripts/docs.sh: mix docs of both packages, then the pages in headless Chromium)"
  with_nx_elixir "$root/scripts/docs.sh" "$build"
  # The same tests on Nx's main branch (the Nx 1.0 contract: io_call, hooks: always a map), built from
  # its sources (PLUGBOARD_NX_MAIN, default ../shared/vendor/hex-nxmain; copied first, the folder is
  # read-only) through PLUGBOARD_NX_PATH, in a build root of its own.
  nx_main=${PLUGBOARD_NX_MAIN:-$root/../shared/vendor/hex-nxmain}
  if [ -f "$nx_main/nx/mix.exs" ]; then
    nx_main_src="$build/nx-main-src"
    rm -rf "$nx_main_src" && mkdir -p "$nx_main_src" && cp -a "$nx_main"/. "$nx_main_src/" && chmod -R u+w "$nx_main_src"
    echo "[elixir] Nx on plugboard on Nx's main branch ($nx_main)"
    (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_ENV=test MIX_BUILD_ROOT="$build/elixir-build-nxmain" \
       PLUGBOARD_NX_PATH="$nx_main_src/nx" mix test)
    echo "[elixir] Nx main's own suite with Plugboard.Nx as the default compiler"
    (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_BUILD_ROOT="$build/elixir-build-nxmain" \
       PLUGBOARD_HEX_MIRROR="$nx_main_src" PLUGBOARD_NX_PATH="$nx_main_src/nx" \
       PLUGBOARD_NX_SUITE_EXPECTED="$root/bindings/elixir/plugboard_nx/test/nx_suite/expected_failures_nxmain.txt" \
       test/nx_suite/run.sh --timeout 60000)
    # Axon 0.8.1 on Nx main (its axon/ and polaris/ beside nx/): Axon's own suite, accepted by the same
    # lists as on 0.13.1 (Nx main's Evaluator run fails the same 78 doctests), and the sample's Axon
    # job trained by mix run (sample/nx_deps.exs takes Nx and Axon from PLUGBOARD_NX_PATH's folder).
    if [ -f "$nx_main_src/axon/mix.exs" ] && [ -f "$nx_main_src/polaris/mix.exs" ]; then
      echo "[elixir] Axon's own suite on Nx main with Plugboard.Nx as the default compiler, then Plugboard.Nx.Backend as the default backend"
      (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_BUILD_ROOT="$build/elixir-build-nxmain" \
         PLUGBOARD_HEX_MIRROR="$nx_main_src" PLUGBOARD_NX_PATH="$nx_main_src/nx" test/axon_suite/run.sh compiler backend)
      echo "[elixir] the sample's Axon job on Nx main (tests/sample_axon_job_test.sh)"
      with_nx_elixir env MIX_BUILD_ROOT="$build/sample-axon-nxmain/_build" PLUGBOARD_NX_PATH="$nx_main_src/nx" \
        "$root/tests/sample_axon_job_test.sh" "$build/sample-axon-nxmain"
    else
      echo "[elixir] SKIPPED Axon on Nx's main branch: no axon/ and polaris/ beside $nx_main/nx"
    fi
  else
    echo "[elixir] SKIPPED plugboard_nx on Nx's main branch: no Nx sources at $nx_main (set PLUGBOARD_NX_MAIN to a folder holding nx/, complex/, telemetry/, such as ../shared/vendor/hex-nxmain)"
  fi
  [ -n "$mirror" ] || { echo "[elixir] no Nx sources for Nx's and Axon's own suites (set PLUGBOARD_HEX_MIRROR to a folder holding nx/, complex/, telemetry/, axon/ and polaris/, such as ../shared/vendor/hex-nx0.13)"; exit 1; }
  echo "[elixir] Nx's own suite with Plugboard.Nx as the default compiler"
  (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_BUILD_ROOT="$nx_build" test/nx_suite/run.sh --timeout 60000)
  # The JAX benchmark's four models (bench/jax_models.exs) on tiny shapes, on each CPU plugin, against
  # the outputs JAX 0.10.2 gave for the same inputs (stored in bench/fixtures/jax_tiny: no JAX here).
  echo "[elixir] Plugboard.Nx against JAX's outputs on the JAX benchmark's models (bench/jax_bench.sh --check)"
  with_nx_elixir env MIX_ENV=test MIX_BUILD_ROOT="$nx_build" "$root/bindings/elixir/plugboard_nx/bench/jax_bench.sh" --check
  # Axon's own suite (its sources from the mirror), unchanged but for the defaults, twice on one build
  # of it: no failure beyond the Evaluator's and those listed with reasons (test/axon_suite/*.txt).
  echo "[elixir] Axon's own suite with Plugboard.Nx as the default compiler, then Plugboard.Nx.Backend as the default backend"
  (cd "$root/bindings/elixir/plugboard_nx" && with_nx_elixir env MIX_BUILD_ROOT="$nx_build" test/axon_suite/run.sh compiler backend)
else
  echo "[elixir] SKIPPED bindings/elixir/plugboard_nx, Nx's and Axon's own suites: no Elixir >= 1.17 (PLUGBOARD_ELIXIR_SRC)"
fi
echo "[elixir] all tests passed"
