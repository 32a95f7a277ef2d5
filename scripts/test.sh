#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs all tests: a regular build with the Elixir package's
# tests over it (scripts/test_elixir.sh: ExUnit, the releases, Nx on plugboard, and the documentation
# built and opened in a browser, scripts/docs.sh), then the C++ tests and ExUnit under AddressSanitizer +
# UndefinedBehaviorSanitizer, then the threaded tests under ThreadSanitizer.
#
#   scripts/test.sh [--no-sanitize]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0
jobs=$(nproc)

"$root/scripts/setup.sh" --build-dir "$root/build"
echo "[test] regular build"
(cd "$root/build" && ctest --output-on-failure -j "$jobs")
"$root/scripts/test_elixir.sh" "$root/build"

if [ $sanitize -eq 1 ]; then
  "$root/scripts/setup.sh" --build-dir "$root/build-sanitize" --sanitize
  echo "[test] ASan + UBSan build"
  # The plugins are not instrumented and keep process-lifetime allocations (they are never unloaded):
  # leaks are reported only for plugboard's own code, see tests/lsan.supp.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  (cd "$root/build-sanitize" && ctest --output-on-failure -j "$jobs")
  "$root/scripts/test_elixir.sh" --sanitize "$root/build-sanitize"
  echo "[test] ThreadSanitizer build (threaded callbacks, fetches, plugin loads, bundle assembly, CLI callback commands)"
  "$root/scripts/tsan.sh" "$root/build-tsan"
fi
echo "[test] all tests passed"
