#!/usr/bin/env bash
# The documentation as its readers get it, into BUILD_DIR/docs (default build/docs):
#   plugboard/, plugboard_nx/   `mix docs` of the two Mix projects (ex_doc from Hex; the guides in docs/
#                               as extras, bindings/elixir/docs_config.exs), MIX_ENV=docs, a warning
#                               (a broken link or reference) fails the build;
#   cpp/html/                   the C++ API reference of include/plugboard/ (Doxygen, docs/Doxyfile): an
#                               undocumented public name fails the build;
# then opens them in headless Chromium (tests/docs_browser_test.py): screenshots in BUILD_DIR/docs/screenshots.
# Needs an Elixir >= 1.17 (scripts/elixir_toolchain.sh) and Hex (scripts/hex_registry.sh: the local
# registry of PLUGBOARD_HEX_PACKAGES' tarballs, else hex.pm), and Debian's doxygen and chromium
# (deps/apt-packages.txt).
#
#   scripts/docs.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
out="$build/docs"
. "$root/scripts/elixir_toolchain.sh"
. "$root/scripts/hex_registry.sh"
modern_bin=$(modern_elixir_bin "$root") || { echo "[docs] no Elixir >= 1.17 (PLUGBOARD_ELIXIR_SRC): ex_doc needs one" >&2; exit 1; }
export PATH="$modern_bin:$PATH" MIX_HOME="${MIX_HOME:-$build/mix-home-modern}" HEX_HOME="${HEX_HOME:-$build/hex-home}"
export PLUGBOARD_PREFIX=${PLUGBOARD_PREFIX:-$build/elixir-prefix}
[ -d "$PLUGBOARD_PREFIX" ] || cmake --install "$build" --prefix "$PLUGBOARD_PREFIX" --strip > /dev/null
hex_for "$MIX_HOME" "$build/hex-registry"

rm -rf "$out" && mkdir -p "$out"
for app in plugboard plugboard_nx; do
  echo "[docs] mix docs ($app)"
  (cd "$root/bindings/elixir/$app" && export MIX_ENV=docs MIX_BUILD_ROOT="$build/elixir-build-docs-$app" &&
     mix deps.get > /dev/null && mix docs --warnings-as-errors --output "$out/$app")
  # Every page loads docs_config.js, which HexDocs writes for a published package (its list of
  # versions); a local build has no other version to list.
  echo "// The versions of these docs: this build's only (HexDocs writes this file for a published package)." > "$out/$app/docs_config.js"
done

# The C++ API reference of the public headers (include/plugboard/): Doxygen, every public name
# documented, a warning fails it (docs/Doxyfile).
echo "[docs] the C++ API reference (doxygen docs/Doxyfile)"
command -v doxygen > /dev/null || { echo "[docs] no doxygen (Debian's doxygen package, deps/apt-packages.txt)" >&2; exit 1; }
mkdir -p "$out/cpp"
(cd "$root" && PLUGBOARD_DOXYGEN_OUT="$out/cpp" doxygen docs/Doxyfile) ||
  { echo "[docs] doxygen failed: every public name in include/plugboard/ must be documented" >&2; exit 1; }

echo "[docs] the pages in headless Chromium (tests/docs_browser_test.py)"
python3 "$root/tests/docs_browser_test.py" "$out"
echo "[docs] built into $out"
