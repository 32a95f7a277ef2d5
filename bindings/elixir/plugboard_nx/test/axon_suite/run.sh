#!/usr/bin/env bash
# Axon's own test suite (Axon 0.8.1 with Polaris 0.1.0) on plugboard: the vendored axon/ (and its
# polaris/, nx/, complex/ and telemetry/) copied to a temporary folder, its test helper extended to
# load plugboard and plugboard_nx (built here, MIX_ENV=test) and to set Nx's global defaults, then its
# mix test, once per MODE given (one copy and one build of Axon serve them all). MODE:
#   evaluator  the suite as shipped (Nx.Defn.Evaluator, Nx.BinaryBackend): makes the reference list
#   compiler   Plugboard.Nx as the global default compiler (results sent to Nx.BinaryBackend, the
#              default backend: tests compare them with == as tensor structs)
#   backend    Plugboard.Nx as the global default compiler and Plugboard.Nx.Backend as the global
#              default backend (results stay on the device)
#
#   test/axon_suite/run.sh MODE... [MIX TEST ARGS...]   (PLUGBOARD_HEX_MIRROR, PLUGBOARD_PREFIX as for mix
#       test; PLUGBOARD_AXON_SUITE_LOG=PREFIX keeps each mode's output as PREFIX.MODE.log)
#
# Axon's test cases (Axon.Case) set the compiler and the backend per test process, from
# AxonTestUtil.test_compiler/0 and test_backend/0 (EXLA when USE_EXLA is set, else the Evaluator and
# the binary backend), over any global default. In the compiler and backend modes those two
# functions answer the global defaults' compiler and backend instead (so those tests keep their
# results on the device, as under EXLA): the one change made to Axon's sources (made after an
# evaluator run, which sees the suite as shipped).
# Every failure must be named, by test name, in test/axon_suite/evaluator_failures.txt (the suite's
# failures under the Evaluator) or, each with its reason, in compiler_failures.txt (both modes) or
# backend_failures.txt (backend mode), or this script fails.
set -euo pipefail
modes=()
while [ $# -gt 0 ]; do
  case "$1" in
    evaluator | compiler | backend) modes+=("$1"); shift ;;
    *) break ;;
  esac
done
[ ${#modes[@]} -gt 0 ] || { echo "usage: $0 evaluator|compiler|backend... [MIX TEST ARGS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${PLUGBOARD_HEX_MIRROR:?set PLUGBOARD_HEX_MIRROR to the folder holding axon/, polaris/, nx/, complex/ and telemetry/}
plugin=${PLUGBOARD_AXON_SUITE_PLUGIN:-${PLUGBOARD_DEPS_DIR:-$HOME/.cache/plugboard/deps}/files/xla_cpu_081/xla_cpu_pjrt.so}
for p in axon polaris nx complex telemetry; do
  [ -d "$mirror/$p" ] || { echo "PLUGBOARD_HEX_MIRROR=$mirror: no $p folder there" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$mirror/axon" "$mirror/polaris" "$mirror/nx" "$mirror/complex" "$mirror/telemetry" "$work/"
chmod -R u+w "$work"
cp "$work/axon/test/test_helper.exs" "$work/test_helper.exs.shipped"
patched=0

# Axon's test cases follow Nx's global defaults (see above).
follow_defaults() {
  python3 - "$work/axon/test/support/axon_test_util.ex" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
for old, new in [("else: Nx.Defn.Evaluator", "else: Keyword.get(Nx.Defn.default_options(), :compiler, Nx.Defn.Evaluator)"),
                 ("true -> Nx.BinaryBackend", "true -> Nx.default_backend()")]:
    if text.count(old) != 1:
        sys.exit(f"axon_suite/run.sh: {path} no longer holds `{old}` once: look at how Axon's tests choose their compiler")
    text = text.replace(old, new)
open(path, "w").write(text)
PY
}

# Axon's test helper: as shipped for the evaluator, else preceded by loading plugboard and
# plugboard_nx and setting the defaults.
write_helper() {
  local mode=$1 defaults
  case "$mode" in
    evaluator) cp "$work/test_helper.exs.shipped" "$work/axon/test/test_helper.exs"; return ;;
    compiler) defaults='Nx.Defn.global_default_options(compiler: Plugboard.Nx, output_backend: Nx.BinaryBackend)' ;;
    backend) defaults='Nx.Defn.global_default_options(compiler: Plugboard.Nx); Nx.global_default_backend(Plugboard.Nx.Backend)' ;;
  esac
  {
    echo "# Added by plugboard_nx/test/axon_suite/run.sh ($mode): every defn runs through Plugboard.Nx."
    for e in $ebins; do echo "Code.prepend_path(\"$e\")"; done
    echo '{:ok, _} = Application.ensure_all_started(:plugboard)'
    echo '{:ok, _} = Application.ensure_all_started(:plugboard_nx)'
    echo "{:ok, client} = Plugboard.open(\"$plugin\")"
    echo 'Plugboard.Nx.put_default_client(client)'
    echo "$defaults"
    cat "$work/test_helper.exs.shipped"
  } > "$work/axon/test/test_helper.exs"
}

ebins=
for mode in "${modes[@]}"; do
  if [ "$mode" != evaluator ] && [ -z "$ebins" ]; then
    (cd "$here" && MIX_ENV=test mix compile > "$work/compile.log" 2>&1) || { cat "$work/compile.log"; exit 1; }
    ebins=$(ls -d "${MIX_BUILD_ROOT:-$here/_build}"/test/lib/{plugboard,plugboard_nx}/ebin)
  fi
done

status=0
for mode in "${modes[@]}"; do
  if [ "$mode" != evaluator ] && [ $patched -eq 0 ]; then follow_defaults; patched=1; fi
  write_helper "$mode"
  log="$work/axon_test.$mode.log"
  echo "[axon suite: $mode]"
  set +e
  # Axon's own build folder, not the caller's (MIX_BUILD_ROOT would mix its deps with plugboard_nx's).
  # A test may compile hundreds of programs (trainer/3's basic case: every loss with every
  # optimizer): with a cold compile cache on a loaded machine that passed ExUnit's default 60 s.
  (cd "$work/axon" && MIX_ENV=test MIX_BUILD_ROOT="$work/_build" mix test --timeout 600000 "$@") > "$log" 2>&1
  set -e
  [ -n "${PLUGBOARD_AXON_SUITE_LOG:-}" ] && cp "$log" "$PLUGBOARD_AXON_SUITE_LOG.$mode.log"
  if ! grep -E "^(Finished in|[0-9]+ doctests)" "$log"; then
    tail -n 40 "$log"
    status=1
    continue
  fi
  lists=(--expected "$here/test/axon_suite/evaluator_failures.txt")
  [ "$mode" != evaluator ] && lists+=(--expected "$here/test/axon_suite/compiler_failures.txt")
  [ "$mode" = backend ] && lists+=(--expected "$here/test/axon_suite/backend_failures.txt")
  python3 "$here/test/nx_suite/classify.py" "$log" --strict "${lists[@]}" || status=1
done
exit $status
