#!/usr/bin/env bash
# Builds what a release of the Elixir packages publishes, into OUT_DIR:
#   OUT_DIR/plugboard-VERSION.tar       the :plugboard Hex package: lib/, mix/, c_src/ (the NIF), native/
#                                       (the library's CMake sources, with the PJRT and XLA FFI headers
#                                       under native/deps) and checksum.exs (the archive's sha256)
#   OUT_DIR/plugboard_nx-VERSION.tar    the :plugboard_nx Hex package (Elixir only)
#   OUT_DIR/precompiled/plugboard-nif-NIF-TARGET-VERSION.tar.gz
#                                       the precompiled native part for this machine's NIF version and
#                                       target triple (upload it where the package's URL template points)
# Each package is built by `mix hex.build` from a copy of its folder holding only what it ships, so a
# package can never reach outside itself. The native part comes from the C++ build in BUILD_DIR
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
rm -rf "$stage" "$out/precompiled" "$out"/*.tar
mkdir -p "$stage"

headers=("$deps/files/pjrt_header/pjrt_c_api.h" "$deps/files/ffi_header/include/xla/ffi/api/c_api.h")
for h in "${headers[@]}"; do [ -f "$h" ] || { echo "package.sh: $h is missing (run scripts/setup.sh)" >&2; exit 1; }; done

# :plugboard: the Elixir package, the library's sources beside it, the third-party headers.
pkg="$stage/plugboard"
mkdir -p "$pkg/native/deps/files/pjrt_header" "$pkg/native/deps/files/ffi_header/include/xla/ffi/api"
cp -r "$root/bindings/elixir/plugboard/"{lib,mix,c_src,mix.exs,README.md} "$pkg/"
cp -r "$root/"{CMakeLists.txt,cmake,include,src,tools} "$pkg/native/"
cp "${headers[0]}" "$pkg/native/deps/files/pjrt_header/"
cp "${headers[1]}" "$pkg/native/deps/files/ffi_header/include/xla/ffi/api/"
find "$pkg" -name '*.swp' -delete

prefix="$out/stage/prefix"
cmake --install "$build" --prefix "$prefix" --strip > /dev/null
echo "[package] the precompiled native part"
(cd "$pkg" && MIX_ENV=prod PLUGBOARD_PREFIX="$prefix" MIX_BUILD_ROOT="$stage/_build" mix plugboard.precompile "$out/precompiled")
# What it holds needs nothing a glibc Linux lacks (the audit fails naming file and library).
mkdir -p "$stage/audit" && tar -xzf "$out"/precompiled/*.tar.gz -C "$stage/audit"
"$root/scripts/audit_native.sh" "$stage/audit" > "$out/audit.txt" || { cat "$out/audit.txt"; exit 1; }
tail -n 2 "$out/audit.txt"
echo "[package] mix hex.build (plugboard)"
(cd "$pkg" && MIX_ENV=prod MIX_BUILD_ROOT="$stage/_build" mix hex.build --output "$out/plugboard-$(sed -n 's/^  @version "\(.*\)"/\1/p' mix.exs).tar") > "$out/plugboard.build.log"

# :plugboard_nx: alone in its folder, so its mix.exs asks for {:plugboard, "~> 0.1"} from Hex.
nx="$stage/alone/plugboard_nx"
mkdir -p "$nx"
cp -r "$root/bindings/elixir/plugboard_nx/"{lib,mix.exs,README.md} "$nx/"
echo "[package] mix hex.build (plugboard_nx)"
(cd "$nx" && MIX_ENV=prod MIX_BUILD_ROOT="$stage/_build" mix hex.build --output "$out/plugboard_nx-$(sed -n 's/^      version: "\(.*\)",/\1/p' mix.exs).tar") > "$out/plugboard_nx.build.log"
rm -rf "$stage"
ls -la "$out"/*.tar "$out"/precompiled/*
