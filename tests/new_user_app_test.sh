#!/usr/bin/env bash
# A new user's application, end to end, as a user on a machine with Hex gets it:
#   - `mix new`, `{:plugboard_nx, "~> 0.1"}`, `mix deps.get` from a Hex registry on 127.0.0.1 that
#     holds Nx and its neighbours (PLUGBOARD_HEX_PACKAGES) and the packages scripts/package.sh built;
#   - `mix compile` with no C/C++ compiler, CMake, Ninja or make on PATH: the precompiled native
#     archive is downloaded from 127.0.0.1 and checked against the package's checksum.exs;
#   - Nx.Defn.jit runs on a CPU plugin (PLUGBOARD_PLUGIN_PATH, no bundle);
#   - a tampered archive is refused naming it and not kept; an unreachable URL fails naming the URL
#     and PLUGBOARD_BUILD (`mix deps.compile --force` empties the dependency's build folder first,
#     so that priv/ keeps what it had when an archive is refused is checked in test/precompiled_test.exs);
#   - `mix release` with two targets (cpu + cuda13, offline from the wheels), booted on a bare Debian
#     bookworm root (scripts/bare_root.sh) where it picks cpu and runs the jit;
#   - the :plugboard package as fetched (deps/plugboard: the Hex package unpacked, alone) builds its
#     native part from its own sources with PLUGBOARD_BUILD=true.
# Prints the time of `mix deps.get` + `mix compile` with the precompiled archive and with
# PLUGBOARD_BUILD=true (the figures the README gives).
#
#   tests/new_user_app_test.sh PACKAGES_DIR WORKDIR
#       PACKAGES_DIR: what scripts/package.sh wrote (the two .tar and precompiled/)
#   env: PLUGBOARD_DEPS_DIR (wheels and the CPU plugin), an Elixir >= 1.17 first on PATH;
#        PLUGBOARD_BARE_SUITES (default "bookworm"; empty: skip the bare-root boot)
set -uo pipefail
packages=$(cd "${1:?usage: new_user_app_test.sh PACKAGES_DIR WORKDIR}" && pwd)
work=${2:?usage: new_user_app_test.sh PACKAGES_DIR WORKDIR}
: "${PLUGBOARD_DEPS_DIR:?the deps folder scripts/setup.sh fills}"
root=$(cd "$(dirname "$0")/.." && pwd)
plugin=$PLUGBOARD_DEPS_DIR/files/xla_cpu_081/xla_cpu_pjrt.so
[ -f "$plugin" ] || { echo "FAIL: $plugin is missing (run scripts/setup.sh)"; exit 1; }
compgen -G "$packages/plugboard_nx-*.tar" > /dev/null || { echo "FAIL: no plugboard_nx package in $packages (scripts/package.sh)"; exit 1; }

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
has() { if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3 (no '$2' in $1)"; tail -n 25 "$1" | sed 's/^/    | /'; fi; }
now_ms() { date +%s%3N; }

rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
# The bare roots and the Hex client built from source stay in the machine's cache, not the user's.
machine_cache=${XDG_CACHE_HOME:-$HOME/.cache}
# A user of their own: Mix's, Hex's and plugboard's caches all start empty.
export MIX_HOME=$work/mix-home HEX_HOME=$work/hex-home XDG_CACHE_HOME=$work/cache
unset PLUGBOARD_PREFIX PLUGBOARD_BUILD PLUGBOARD_TARGET PLUGBOARD_TARGETS PLUGBOARD_PLUGIN_PATH PJRT_NAMES_AND_LIBRARY_PATHS MIX_BUILD_ROOT MIX_ENV

. "$root/scripts/hex_registry.sh"
XDG_CACHE_HOME=$machine_cache hex_registry_start "$work/registry" "$packages"/plugboard-*.tar "$packages"/plugboard_nx-*.tar || exit 1
mkdir -p "$work/registry/public/precompiled"
cp "$packages"/precompiled/*.tar.gz "$work/registry/public/precompiled/"
XDG_CACHE_HOME=$machine_cache hex_use_registry "$MIX_HOME" || exit 1
archive=$(basename "$(ls "$packages"/precompiled/*.tar.gz | head -n 1)")
export PLUGBOARD_PRECOMPILED_URL="$HEX_REGISTRY_URL/precompiled/{filename}"

# PATH without any compiler: every command of the system's bin folders but those.
nocc=$work/no-compiler-bin
mkdir -p "$nocc"
for dir in /usr/local/bin /usr/bin /bin; do
  for f in "$dir"/*; do
    name=$(basename "$f")
    case "$name" in
      cc|c++|c89|c99|gcc|g++|cpp|clang*|*-gcc|*-g++|*-gcc-[0-9]*|*-g++-[0-9]*|gcc-[0-9]*|g++-[0-9]*|cmake|ctest|ninja|make|gmake|ld|ld.*|*-ld|as|nvcc) continue ;;
    esac
    [ -e "$nocc/$name" ] || ln -s "$f" "$nocc/$name"
  done
done
elixir_bin=$(dirname "$(command -v elixir)")
no_compiler_path="$elixir_bin:$nocc"
if PATH=$no_compiler_path command -v cc gcc c++ cmake ninja make > /dev/null 2>&1; then
  fail "the compiler-free PATH still has a compiler"; fi

# --- 1. mix new, the dependency, deps.get + compile without a compiler ----------------------------
(cd "$work" && mix new hello > /dev/null) || { echo "FAIL: mix new"; exit 1; }
app=$work/hello
python3 - "$app/mix.exs" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('      deps: deps()\n', '''      deps: deps(),
      releases: [
        hello: [
          steps: [:assemble, &Plugboard.Release.embed/1],
          plugboard: [targets: [cpu: "xla-cpu-pjrt==0.0.1", cuda13: "jax-cuda13-pjrt==0.12.0.1"]]
        ]
      ]
''')
s = s.replace('      # {:dep_from_hexpm, "~> 0.3.0"},\n', '      {:plugboard_nx, "~> 0.1"},\n')
open(p, "w").write(s)
PY
cat > "$app/lib/hello.ex" <<'EOF'
defmodule Hello do
  @moduledoc "A new user's first jit on plugboard."
  def run do
    {:ok, _} = Application.ensure_all_started(:plugboard_nx)
    x = Nx.tensor([1.0, 2.0, 3.0])
    y = Nx.Defn.jit(fn x -> Nx.add(Nx.multiply(x, x), 1) end, compiler: Plugboard.Nx).(x)
    IO.puts("hello jit on #{Plugboard.report() && Plugboard.report().chosen}: #{inspect(Nx.to_flat_list(y))}")
  end
end
EOF
grep -q 'plugboard_nx, "~> 0.1"' "$app/mix.exs" || { echo "FAIL: could not add the dependency to mix.exs"; exit 1; }

t0=$(now_ms)
(cd "$app" && PATH=$no_compiler_path mix deps.get) > "$work/deps.log" 2>&1 && pass "mix deps.get from the local registry" || fail "mix deps.get"
t1=$(now_ms)
(cd "$app" && PATH=$no_compiler_path mix compile) > "$work/compile.log" 2>&1 && pass "mix compile with no compiler on PATH" || fail "mix compile with no compiler on PATH"
t2=$(now_ms)
has "$work/deps.log" "plugboard_nx 0.1.0" "deps.get resolved plugboard_nx from Hex"
has "$work/deps.log" "nx 0.13.1" "deps.get resolved nx from Hex"
has "$work/compile.log" "the precompiled native part $archive ($HEX_REGISTRY_URL/precompiled/$archive)" "the native part came precompiled from 127.0.0.1"
[ -f "$XDG_CACHE_HOME/plugboard/precompiled/$archive" ] && pass "the archive is kept in the cache" || fail "the archive is not in $XDG_CACHE_HOME/plugboard/precompiled"
echo "FIGURE: deps.get $((t1 - t0)) ms + compile $((t2 - t1)) ms with the precompiled archive"

(cd "$app" && PATH=$no_compiler_path PLUGBOARD_PLUGIN_PATH=$plugin mix run -e 'Hello.run()') > "$work/run.log" 2>&1
has "$work/run.log" "hello jit on" "Nx.Defn.jit ran"
has "$work/run.log" "[2.0, 5.0, 10.0]" "x*x + 1 computed on the CPU plugin"

# --- 2. a tampered archive, an unreachable URL ------------------------------------------------------
served=$work/registry/public/precompiled/$archive
cp "$served" "$work/archive.good"
# One byte flipped (whatever it was), so the archive surely changed.
python3 - "$served" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1000); b = f.read(1); f.seek(1000); f.write(bytes([b[0] ^ 0xFF]))
PY
cmp -s "$served" "$work/archive.good" && fail "flipping a byte left the archive as it was"
rm -rf "$XDG_CACHE_HOME/plugboard/precompiled"
(cd "$app" && PATH=$no_compiler_path mix deps.compile plugboard --force) > "$work/tampered.log" 2>&1 \
  && fail "a tampered archive was accepted" || pass "a tampered archive fails the build"
has "$work/tampered.log" "the precompiled archive $archive downloaded from $HEX_REGISTRY_URL/precompiled/$archive has sha256" "the refusal names the archive and where it came from"
has "$work/tampered.log" "refused and not kept" "the refusal says the archive was not kept"
[ -e "$XDG_CACHE_HOME/plugboard/precompiled/$archive" ] && fail "the tampered archive stayed in the cache" || pass "the tampered archive is not kept"
cp "$work/archive.good" "$served"

rm -rf "$XDG_CACHE_HOME/plugboard/precompiled"
(cd "$app" && PATH=$no_compiler_path PLUGBOARD_PRECOMPILED_URL="http://127.0.0.1:9/nowhere/{filename}" mix deps.compile plugboard --force) \
  > "$work/unreachable.log" 2>&1 && fail "an unreachable URL built" || pass "an unreachable URL fails the build"
has "$work/unreachable.log" "cannot download the precompiled native part from http://127.0.0.1:9/nowhere/$archive" "the failure names the URL"
has "$work/unreachable.log" "PLUGBOARD_BUILD=true" "the failure names PLUGBOARD_BUILD"
(cd "$app" && PATH=$no_compiler_path mix deps.compile plugboard --force) > "$work/recompile.log" 2>&1 \
  && pass "the good archive installs again" || fail "reinstalling the good archive"

# --- 3. mix release with two targets, booted on a bare Debian root ---------------------------------
(cd "$app" && PATH=$no_compiler_path MIX_ENV=prod PLUGBOARD_WHEELS=$PLUGBOARD_DEPS_DIR/wheels mix do deps.get + release --overwrite) \
  > "$work/release.log" 2>&1 && pass "mix release hello (cpu + cuda13) with no compiler" || fail "mix release"
rel=$app/_build/prod/rel/hello
has "$work/release.log" "cuda13" "the release step bundled cuda13"
if [ -x "$rel/bin/hello" ]; then
  echo "FIGURE: release size $(du -sh "$rel" | cut -f1) (cpu + cuda13)"
  (cd "$rel" && timeout 120 bin/hello eval 'Hello.run()') > "$work/boot.log" 2>&1
  has "$work/boot.log" "hello jit on cpu: [2.0, 5.0, 10.0]" "the release boots here, picks cpu and runs the jit"
  [ -n "${PLUGBOARD_BARE_SUITES-bookworm}" ] || echo "SKIPPED: the boot on a bare root (PLUGBOARD_BARE_SUITES is empty: chroot needs root)"
  for suite in ${PLUGBOARD_BARE_SUITES-bookworm}; do
    XDG_CACHE_HOME=$machine_cache "$root/scripts/bare_root.sh" run --copy "$rel:hello" --cd /opt/hello --timeout 300 "$suite" -- \
      bin/hello eval 'Hello.run()' > "$work/bare-$suite.log" 2>&1
    has "$work/bare-$suite.log" "hello jit on cpu: [2.0, 5.0, 10.0]" "the release boots on a bare $suite root and runs the jit"
  done
fi

# --- 4. the package alone builds its native part from its own sources ------------------------------
t0=$(now_ms)
# The compiler's results are kept by ccache in the machine's cache when it is installed (the sources
# sit at the same path every run: an unchanged package recompiles in seconds, a changed file alone).
launcher=(); command -v ccache > /dev/null && launcher=(CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR="$machine_cache/plugboard/ccache")
(cd "$app" && env "${launcher[@]}" PLUGBOARD_BUILD=true PLUGBOARD_CUDA_BRIDGE=OFF mix deps.compile plugboard --force) > "$work/build-from-source.log" 2>&1 \
  && pass "PLUGBOARD_BUILD=true builds the native part from deps/plugboard's own sources" || fail "PLUGBOARD_BUILD=true"
t1=$(now_ms)
has "$work/build-from-source.log" "building the native library from $app/deps/plugboard/native" "the build used the package's native/ folder"
(cd "$app" && PLUGBOARD_PLUGIN_PATH=$plugin mix run -e 'Hello.run()') > "$work/run-built.log" 2>&1
has "$work/run-built.log" "[2.0, 5.0, 10.0]" "the jit runs on the native part built from the package"
echo "FIGURE: compile $((t1 - t0)) ms with PLUGBOARD_BUILD=true (the library, the CLI and the NIF from source)"

if [ $failures -eq 0 ]; then echo "PASS: a new user's app, end to end"; else echo "FAIL: $failures check(s) failed"; exit 1; fi
