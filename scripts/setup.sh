#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian machine: system packages, the pinned plugin wheels, the
# PJRT header, matplotlib for the pictures (BUILD_DIR/plot-venv), then a CMake build. Safe to run again:
# each step is skipped when already done.
#
#   scripts/setup.sh [--build-dir DIR] [--sanitize] [--no-build]
#
# Environment: PLUGBOARD_DEPS_DIR (default: ${XDG_CACHE_HOME:-~/.cache}/plugboard/deps) is where the
# wheels and the files extracted from them live, outside the repository. PLUGBOARD_CUDA_BRIDGE=ON
# requires the CUDA callback bridge to build (nvcc), OFF skips it, AUTO (default) builds it when
# nvcc is found. PLUGBOARD_WERROR=OFF lets warnings pass (default ON: warnings are errors, as in CI).
# PLUGBOARD_BENCH=OFF leaves the benchmarks out of a new build (scripts/bench.sh turns them on).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build"
sanitize=OFF
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --sanitize) sanitize=ON; shift ;;
    --no-build) do_build=0; shift ;;
    *) echo "setup.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
log() { echo "[setup] $*"; }

# 1. Debian packages (apt-get only when something is missing).
missing=()
while read -r pkg; do
  [ -z "$pkg" ] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < "$root/deps/apt-packages.txt"
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# 2. Wheels, pinned by version and sha256 (pip checks every hash; --no-deps: only the plugins).
python=${PYTHON:-python3}
mkdir -p "$deps/wheels"
need_download=0
while read -r name prefix member role; do
  case "$name" in ''|\#*) continue ;; esac
  ls "$deps/wheels/$prefix"*.whl >/dev/null 2>&1 || need_download=1
done < "$root/deps/plugins.tsv"
if [ $need_download -eq 1 ]; then
  log "downloading plugin wheels into $deps/wheels"
  "$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
    -r "$root/deps/requirements.txt" -d "$deps/wheels"
fi

# 3. Extract the plugin files and the header (temp file + rename: an interrupted run leaves nothing
#    half-written). The stamp beside each file records the wheel it came from.
while read -r name prefix member role; do
  case "$name" in ''|\#*) continue ;; esac
  wheel=$(ls "$deps/wheels/$prefix"*.whl | head -n 1)
  dest="$deps/files/$name/$(basename "$member")"
  stamp="$dest.from"
  if [ -f "$dest" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(basename "$wheel"):$member" ]; then
    continue
  fi
  log "extracting $member from $(basename "$wheel")"
  mkdir -p "$(dirname "$dest")"
  "$python" - "$wheel" "$member" "$dest.tmp" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  chmod 0755 "$dest.tmp"
  mv -f "$dest.tmp" "$dest"
  echo "$(basename "$wheel"):$member" > "$stamp"
done < "$root/deps/plugins.tsv"

# 4. matplotlib in BUILD_DIR/plot-venv, from pinned wheels (the trace timeline test draws with it).
"$root/scripts/plot_venv.sh" "$build_dir" > /dev/null

# 5. Build.
if [ $do_build -eq 1 ]; then
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    log "configuring $build_dir (sanitizers: $sanitize)"
    # Sanitizer builds: -O1 and line tables only (what their reports need; a third less compile time).
    sanitizer_flags=()
    [ "$sanitize" = ON ] && sanitizer_flags=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
                                             -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${sanitizer_flags[@]}" \
      -DPLUGBOARD_DEPS_DIR="$deps" -DPLUGBOARD_SANITIZE="$sanitize" \
      -DPLUGBOARD_CUDA_BRIDGE="${PLUGBOARD_CUDA_BRIDGE:-AUTO}" -DPLUGBOARD_WERROR="${PLUGBOARD_WERROR:-ON}" \
      -DPLUGBOARD_BENCH="$([ "$sanitize" = ON ] && echo OFF || echo "${PLUGBOARD_BENCH:-ON}")"
  fi
  log "building $build_dir"
  cmake --build "$build_dir" --parallel "$(nproc)"
fi
log "done (deps: $deps)"
