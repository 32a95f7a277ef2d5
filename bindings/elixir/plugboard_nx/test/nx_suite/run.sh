#!/usr/bin/env bash
# Nx's own test suite (Nx 0.13) with Plugboard.Nx as the global default compiler: the vendored nx/ (and
# its complex/ and telemetry/) copied to a temporary folder, its test helper extended to load
# plugboard and plugboard_nx (built here, MIX_ENV=test) and to set the compiler, then its mix test.
#
#   test/nx_suite/run.sh [MIX TEST ARGS...]     (PLUGBOARD_HEX_MIRROR, PLUGBOARD_PREFIX as for mix test;
#                                                PLUGBOARD_NX_SUITE_LOG=FILE keeps Nx's whole output)
#
# Nx's main branch (the Nx 1.0 contract, ../shared/vendor/hex-nxmain): PLUGBOARD_HEX_MIRROR names its
# folder and PLUGBOARD_NX_PATH its nx/ (so that plugboard_nx is built against the same Nx that the
# suite runs on: see mix.exs), and PLUGBOARD_NX_SUITE_EXPECTED the list of that tree's expected
# failures (default: expected_failures.txt, Nx 0.13.1's; Nx main's is expected_failures_nxmain.txt).
#
# Results are sent to Nx.BinaryBackend (output_backend:), so that the suite's own assertions (== on
# tensor structs, assert_all_close) judge every value Plugboard.Nx computed. Prints Nx's own summary
# line, then classify.py's account of the failures: doctests and == assertions differing only in the
# last digits are counted apart; every other failure must be listed in
# test/nx_suite/expected_failures.txt with its reason, or this script fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${PLUGBOARD_HEX_MIRROR:?set PLUGBOARD_HEX_MIRROR to the folder holding nx/, complex/ and telemetry/}
plugin=${PLUGBOARD_NX_SUITE_PLUGIN:-${PLUGBOARD_DEPS_DIR:-$HOME/.cache/plugboard/deps}/files/xla_cpu_081/xla_cpu_pjrt.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$mirror/nx" "$mirror/complex" "$mirror/telemetry" "$work/"
chmod -R u+w "$work"

(cd "$here" && MIX_ENV=test mix compile > /dev/null)
ebins=$(ls -d "${MIX_BUILD_ROOT:-$here/_build}"/test/lib/{plugboard,plugboard_nx}/ebin)
{
  echo '# Added by plugboard_nx/test/nx_suite/run.sh: every defn runs through Plugboard.Nx.'
  for e in $ebins; do echo "Code.prepend_path(\"$e\")"; done
  echo '{:ok, _} = Application.ensure_all_started(:plugboard)'
  echo '{:ok, _} = Application.ensure_all_started(:plugboard_nx)'
  echo "{:ok, client} = Plugboard.open(\"$plugin\")"
  echo 'Plugboard.Nx.put_default_client(client)'
  echo 'Nx.Defn.global_default_options(compiler: Plugboard.Nx, output_backend: Nx.BinaryBackend)'
  cat "$work/nx/test/test_helper.exs"
} > "$work/nx/test/test_helper.exs.new"
mv "$work/nx/test/test_helper.exs.new" "$work/nx/test/test_helper.exs"
cd "$work/nx"
set +e
# Nx's own build folder, not the caller's: in MIX_BUILD_ROOT it would overwrite the build of the nx
# dependency that plugboard_nx was compiled against, and the next plugboard_nx build would recompile
# Nx and everything above it.
MIX_ENV=test MIX_BUILD_ROOT="$work/_build" mix test --exclude distributed "$@" > "$work/nx_test.log" 2>&1
set -e
[ -n "${PLUGBOARD_NX_SUITE_LOG:-}" ] && cp "$work/nx_test.log" "$PLUGBOARD_NX_SUITE_LOG"
grep -E "^(Finished in|[0-9]+ doctests)" "$work/nx_test.log" || { tail -n 40 "$work/nx_test.log"; exit 1; }
python3 "$here/test/nx_suite/classify.py" "$work/nx_test.log" --expected "${PLUGBOARD_NX_SUITE_EXPECTED:-$here/test/nx_suite/expected_failures.txt}"
