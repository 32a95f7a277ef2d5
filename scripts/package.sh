#!/usr/bin/env bash
# Builds what a release of the Elixir packages publishes, into OUT_DIR:
#   OUT_DIR/plugboard-VERSION.tar       the :plugboard Hex package: lib/, mix/, c_src/ (the NIF), native/
#                                       (the library's CMake sources, with the PJRT and XLA FFI headers
#                                       under native/deps) and checksum.exs (the archive's sha256)
#   OUT_DIR/plugboard_nx-VERSION.tar    the :plugboard_nx Hex package (Elixir only)
#   OUT_DIR/precompiled/plugboard-nif-NIF-TARGET-VERSION.tar.gz
#                                       the precompiled native part for this machine's NIF version and
#                                       target triple (upload it where the package's URL template points)
# Each package is built by `mix hex.build` from a copy of its folder holding only what it ships (the
# files git tracks), so a package can never reach outside itself. The native part comes from the C++ build in BUILD_DIR
# (default build/; scripts/setup.sh) and the NIF is compiled over it.
#
#   scripts/package.sh OUT_DIR [BUILD_DIR]     (needs Hex in MIX_HOME: scripts/hex_registry.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/package.sh OUT_DIR [BUILD_DIR]}
build=$(cd "${2:-$root/build}" && pwd)
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
mkdir -p "$out" && out=$(cd "$out" && pwd)
stage="$out/stage"
trap 'rm -rf "$stage"' EXIT
rm -rf "$stage" "$out/precompiled" "$out"/plugboard-[0-9]*.tar "$out"/plugboard_nx-[0-9]*.tar
mkdir -p "$stage"
# ship FROM DEST PATH...: the files git tracks under FROM/PATH, copied to DEST with their paths
# relative to FROM (never an untracked or ignored file lying in the working tree).
ship() {
  local from=$1 dest=$2
  shift 2
  (cd "$from" && git ls-files -z -- "$@" | xargs -0 cp --parents -t "$dest")
}

headers=("$deps/files/pjrt_header/pjrt_c_api.h" "$deps/files/ffi_header/include/xla/ffi/api/c_api.h")
for h in "${headers[@]}"; do [ -f "$h" ] || { echo "package.sh: $h is missing (run scripts/setup.sh)" >&2; exit 1; }; done

# :plugboard: the Elixir package, the library's sources beside it, the third-party headers.
pkg="$stage/plugboard"
mkdir -p "$pkg/native/deps/files/pjrt_header" "$pkg/native/deps/files/ffi_header/include/xla/ffi/api"
ship "$root/bindings/elixir/plugboard" "$pkg" lib mix c_src mix.exs README.md
ship "$root" "$pkg/native" CMakeLists.txt cmake include src tools
cp "${headers[0]}" "$pkg/native/deps/files/pjrt_header/"
cp "${headers[1]}" "$pkg/native/deps/files/ffi_header/include/xla/ffi/api/"

prefix="$out/stage/prefix"
cmake --install "$build" --prefix "$prefix" --strip > /dev/null
echo "[package] the precompiled native part"
(cd "$pkg" && MIX_ENV=prod PLUGBOARD_PREFIX="$prefix" MIX_BUILD_ROOT="$stage/_build" mix plugboard.precompile "$out/precompiled")
# What it holds needs nothing a glibc Linux lacks (the audit fails naming file and library).
mkdir -p "$stage/audit" && tar -xzf "$out"/precompiled/*.tar.gz -C "$stage/audit"
"$root/scripts/audit_native.sh" "$stage/audit" > "$out/audit.txt" || { cat "$out/audit.txt"; exit 1; }
tail -n 2 "$out/audit.txt"
echo "[package] mix hex.build (plugboard)"
(cd "$pkg" && MIX_ENV=prod MIX_BUILD_ROOT="$stage/_build" mix hex.build --output "$out/plugboard-$(sed -n 's/^  @version "\(.*\)"/\1/p' mix.exs).tar") \
  > "$out/plugboard.build.log" 2>&1 || { cat "$out/plugboard.build.log"; exit 1; }

# :plugboard_nx: alone in its folder, so its mix.exs asks for {:plugboard, "~> 0.1"} from Hex.
nx="$stage/alone/plugboard_nx"
mkdir -p "$nx"
ship "$root/bindings/elixir/plugboard_nx" "$nx" lib mix.exs README.md
echo "[package] mix hex.build (plugboard_nx)"
(cd "$nx" && env -u PLUGBOARD_NX_PATH MIX_ENV=prod MIX_BUILD_ROOT="$stage/_build" mix hex.build --output "$out/plugboard_nx-$(sed -n 's/^      version: "\(.*\)",/\1/p' mix.exs).tar") \
  > "$out/plugboard_nx.build.log" 2>&1 || { cat "$out/plugboard_nx.build.log"; exit 1; }
ls -la "$out"/*.tar "$out"/precompiled/*
