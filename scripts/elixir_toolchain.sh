# Sourced by the scripts that run Elixir. Defines modern_elixir_bin: prints the bin/ folder of an
# Elixir >= 1.17 (what current Nx needs): the `elixir` on PATH when it is new enough, else one built
# once from the sources in PLUGBOARD_ELIXIR_SRC (default: ../shared/vendor/elixir-1.18.4 beside the
# repository) into ${XDG_CACHE_HOME:-~/.cache}/plugboard/elixir-VERSION, keyed by the version and
# reused (a copy of the sources is built there: the sources may be read-only). Returns 1, with a
# line on stderr naming the variable, when there is neither.
#
#   . scripts/elixir_toolchain.sh; bin=$(modern_elixir_bin "$root") && PATH="$bin:$PATH" mix test

elixir_at_least() {  # elixir_at_least ELIXIR MIN: true when ELIXIR's version is MIN or later
  local v
  v=$("$1" -e 'IO.write(System.version())' 2>/dev/null) || return 1
  [ "$(printf '%s\n%s\n' "$2" "$v" | sort -V | head -n 1)" = "$2" ]
}

modern_elixir_bin() {
  local root=$1 min=1.17
  if command -v elixir >/dev/null 2>&1 && elixir_at_least elixir "$min"; then
    dirname "$(command -v elixir)"
    return 0
  fi
  local src=${PLUGBOARD_ELIXIR_SRC:-$root/../shared/vendor/elixir-1.18.4}
  if [ ! -f "$src/VERSION" ]; then
    echo "no Elixir >= $min on PATH, and no Elixir sources at $src (set PLUGBOARD_ELIXIR_SRC to an Elixir source folder)" >&2
    return 1
  fi
  local version cache dest
  version=$(tr -d '[:space:]' < "$src/VERSION")
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/plugboard
  dest="$cache/elixir-$version"
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -x "$dest/bin/elixir" ]; then
      echo "[elixir] building Elixir $version from $src into $dest (once; about a minute on 2 cores)" >&2
      rm -rf "$dest.tmp"
      cp -r "$src" "$dest.tmp" && chmod -R u+w "$dest.tmp" &&
        make -C "$dest.tmp" compile >"$dest.build.log" 2>&1 && mv "$dest.tmp" "$dest" ||
        { echo "building Elixir $version failed: see $dest.build.log" >&2; exit 1; }
    fi
  ) 9>"$dest.lock" || return 1
  if ! elixir_at_least "$dest/bin/elixir" "$min"; then
    echo "$dest/bin/elixir is not an Elixir >= $min" >&2
    return 1
  fi
  echo "$dest/bin"
}
