# Sourced by the scripts that resolve Hex packages. The public Hex repository cannot be reached from
# every machine that builds plugboard (this workplace's cannot), so the tests serve a local Hex
# registry on 127.0.0.1, signed with a key made at run time, from a folder of Hex tarballs; the
# projects keep the plain requirements every user has ({:nx, "~> 0.13"}), and Mix resolves them
# through Hex exactly as against hex.pm.
#
#   . scripts/hex_registry.sh
#   hex_client_archive                    # prints the path of Hex's archive (built once, cached)
#   hex_registry_start WORK [TARBALL...]   # builds WORK/public from PLUGBOARD_HEX_PACKAGES' tarballs
#                                          # and the extra ones, serves it; sets HEX_REGISTRY_URL
#   hex_use_registry MIX_HOME              # installs Hex into MIX_HOME and points its hexpm there
#   hex_registry_stop                      # (also run at the shell's exit)
#   hex_for MIX_HOME WORK                  # the local registry when PLUGBOARD_HEX_PACKAGES' tarballs
#                                          # are there, else the public Hex repository (mix local.hex)
#   hex_deps_get PROJECT_DIR               # hex_for the exported MIX_HOME (registry in
#                                          # $MIX_HOME.registry), then mix deps.get in PROJECT_DIR
#
# Environment: PLUGBOARD_HEX_PACKAGES (default: ../shared/vendor/hex-packages beside the repository)
# holds the tarballs; PLUGBOARD_HEX_SRC (default: ../shared/vendor/hex-2.5.1) Hex's sources, built
# with the `mix` on PATH into ${XDG_CACHE_HOME:-~/.cache}/plugboard/hex-VERSION-elixir-V/hex.ez once.
# Any mix task run with such a MIX_HOME should also get a HEX_HOME of its own (Hex caches tarballs by
# name and version there; the project's own packages change between runs with the same version).

hex_registry_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

hex_client_archive() {
  local src=${PLUGBOARD_HEX_SRC:-$hex_registry_root/../shared/vendor/hex-2.5.1}
  if [ ! -f "$src/mix.exs" ]; then
    echo "no Hex sources at $src (set PLUGBOARD_HEX_SRC to the Hex client's source folder)" >&2
    return 1
  fi
  local version cache dest
  version=$(sed -n 's/^ *@version "\(.*\)"/\1/p' "$src/mix.exs" | head -n 1)
  [ -n "$version" ] || { echo "cannot read Hex's version from $src/mix.exs" >&2; return 1; }
  # Keyed by the Elixir that builds it too: the archive is compiled for it.
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/hex-$version-elixir-$(elixir -e 'IO.write(System.version())')
  dest="$cache/hex.ez"
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$dest" ]; then
      echo "[hex] building the Hex client $version from $src into $dest (once; under a minute)" >&2
      rm -rf "$cache/src"
      cp -r "$src" "$cache/src" && chmod -R u+w "$cache/src" &&
        (cd "$cache/src" && MIX_HOME="$cache/mix-home" MIX_ENV=prod mix archive.build -o "$dest.tmp") \
          >"$cache/build.log" 2>&1 && mv "$dest.tmp" "$dest" ||
        { echo "building the Hex client failed: see $cache/build.log" >&2; exit 1; }
      rm -rf "$cache/src"
    fi
  ) 9>"$cache/lock" || return 1
  echo "$dest"
}

# Signs WORK/public again (after tarballs were added); a fresh key the first time.
hex_registry_sign() {
  local work=$1
  # The registry's key, made by Erlang's public_key (no openssl command needed).
  [ -f "$work/key.pem" ] || elixir -e '
    key = :public_key.generate_key({:rsa, 2048, 65537})
    File.write!(hd(System.argv()), :public_key.pem_encode([:public_key.pem_entry_encode(:RSAPrivateKey, key)]))' \
    "$work/key.pem" || { echo "making the registry's key failed" >&2; return 1; }
  (cd "$work" && MIX_HOME="$work/mix-home" mix hex.registry build public --name=hexpm --private-key=key.pem) \
    >"$work/registry.log" 2>&1 || { echo "mix hex.registry build failed: see $work/registry.log" >&2; return 1; }
}

hex_registry_start() {
  local work=$1; shift
  local packages=${PLUGBOARD_HEX_PACKAGES:-$hex_registry_root/../shared/vendor/hex-packages}
  if ! ls "$packages"/*.tar >/dev/null 2>&1; then
    echo "no Hex tarballs in $packages (set PLUGBOARD_HEX_PACKAGES to a folder of Hex package tarballs)" >&2
    return 1
  fi
  local hex
  hex=$(hex_client_archive) || return 1
  # A server left by an interrupted run of the same WORK goes first.
  [ -f "$work/server.pid" ] && kill "$(cat "$work/server.pid")" 2>/dev/null
  rm -rf "$work"
  mkdir -p "$work/public/tarballs" || return 1
  MIX_HOME="$work/mix-home" mix archive.install --force "$hex" >/dev/null || return 1
  cp "$packages"/*.tar "$work/public/tarballs/" || return 1
  if [ $# -gt 0 ]; then cp "$@" "$work/public/tarballs/" || return 1; fi
  hex_registry_sign "$work" || return 1
  # Port 0: the kernel picks a free one; the server writes it down once it listens. A session of its
  # own (setsid), so that a Ctrl-C of the caller's job does not leave it half-stopped; stopped by
  # hex_registry_stop, at the caller's exit, or by the next start in the same WORK.
  setsid python3 - "$work/public" "$work/port" >"$work/server.log" 2>&1 <<'PY' &
import functools, http.server, os, sys
root, port_file = sys.argv[1:3]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
PY
  hex_registry_pid=$!
  echo "$hex_registry_pid" > "$work/server.pid"
  # Added to the caller's EXIT trap, not in place of it.
  local previous
  previous=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
  trap "hex_registry_stop${previous:+; $previous}" EXIT
  local i
  for i in $(seq 100); do [ -f "$work/port" ] && break; sleep 0.1; done
  [ -f "$work/port" ] || { echo "the registry server did not start: see $work/server.log" >&2; return 1; }
  export HEX_REGISTRY_URL="http://127.0.0.1:$(cat "$work/port")"
  export HEX_REGISTRY_PUBLIC_KEY="$work/public/public_key"
  echo "[hex] local Hex registry at $HEX_REGISTRY_URL ($(ls "$work/public/tarballs" | wc -l) packages)"
}

hex_use_registry() {
  local mix_home=$1 hex
  hex=$(hex_client_archive) || return 1
  mkdir -p "$mix_home"
  MIX_HOME="$mix_home" mix archive.install --force "$hex" >/dev/null &&
    MIX_HOME="$mix_home" mix hex.repo set hexpm --url "$HEX_REGISTRY_URL" --public-key "$HEX_REGISTRY_PUBLIC_KEY" >/dev/null
}

hex_registry_stop() {
  if [ -n "${hex_registry_pid:-}" ]; then
    kill "$hex_registry_pid" 2>/dev/null || true
    wait "$hex_registry_pid" 2>/dev/null || true
    hex_registry_pid=
  fi
}

# The Hex repository MIX_HOME resolves from: the one a calling script serves (HEX_REGISTRY_URL), else
# a local one started in WORK when the tarballs are there, else hex.pm, with Hex installed by
# `mix local.hex` (a machine that reaches it).
hex_for() {
  local mix_home=$1 work=$2
  local packages=${PLUGBOARD_HEX_PACKAGES:-$hex_registry_root/../shared/vendor/hex-packages}
  if [ -n "${HEX_REGISTRY_URL:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/${HEX_REGISTRY_URL##*:}") 2>/dev/null; then
    hex_use_registry "$mix_home"   # a registry a calling script serves
  elif ls "$packages"/*.tar >/dev/null 2>&1; then
    hex_registry_start "$work" || return 1
    hex_use_registry "$mix_home"
  else
    echo "[hex] no Hex tarballs in $packages: the public Hex repository" >&2
    MIX_HOME="$mix_home" mix local.hex --force --if-missing >/dev/null
  fi
}

# What a script that runs a Mix project here needs first (MIX_HOME and HEX_HOME exported).
hex_deps_get() {
  hex_for "${MIX_HOME:?hex_deps_get needs MIX_HOME}" "$MIX_HOME.registry" >&2 || return 1
  (cd "$1" && mix deps.get > /dev/null) || { echo "mix deps.get failed in $1" >&2; return 1; }
}
