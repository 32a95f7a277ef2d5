#!/usr/bin/env bash
# Bare Debian roots, to try a build where nothing but the base system is installed (issue 33).
#
# A root per Debian suite, made once with `debootstrap --variant=minbase SUITE DIR
# http://deb.debian.org/debian` and cached under ${XDG_CACHE_HOME:-~/.cache}/plugboard/roots/SUITE
# (made under a lock into SUITE.tmp, then renamed: an interrupted run leaves no half-made root; its
# log is SUITE.log, the time it took SUITE.made). debootstrap is installed with apt-get when missing.
# Needs root (debootstrap, mount, chroot).
#
# A command runs in a throwaway view of the cached root, which stays as debootstrap left it: an
# overlay (the root below, a temporary folder above) in a mount namespace of its own. Where overlayfs
# is not to be had, or mounting it fails (TMPDIR on an overlayfs cannot hold the upper folder), the
# copy way, chosen by itself: the run's files go into the root's /opt/bare-run.PID (one folder per
# run, so that runs side by side do not clobber each other's copies), which the command sees as /opt
# (a bind mount in the run's mount namespace); all of it is removed afterwards, and what a killed
# run left behind by the next run. Without unshare, the copies are linked as /opt/NAME in the root
# itself (refused while another live run holds NAME). /proc, /dev (bind) and /sys are mounted for the
# command and unmounted after it, whatever happens (trap). The command runs with `env -i`: HOME (a
# fresh folder), PATH, LANG=C.UTF-8 and the --env given, under a timeout (exit 124 when it ran out).
#
#   scripts/bare_root.sh root SUITE                 print the cached root of SUITE (made once)
#   scripts/bare_root.sh run [OPTIONS] SUITE -- COMMAND [ARG...]
#       --copy SRC[:NAME]   copy file or folder SRC into the root as /opt/NAME (default: SRC's name)
#       --env NAME=VALUE    set in the command's environment (repeatable)
#       --cd DIR            the command's working folder inside the root (default /)
#       --timeout SECONDS   default 1800
#
# Sourced (`. scripts/bare_root.sh`), it defines bare_root SUITE and bare_run [OPTIONS] SUITE -- CMD...
# with the same meaning. Environment: XDG_CACHE_HOME, PLUGBOARD_DEBIAN_MIRROR (default
# http://deb.debian.org/debian), BARE_ROOT_NO_OVERLAY=1 (use the copy way).

bare_root_dir() {  # bare_root_dir SUITE: where the cached root of SUITE is (made or not)
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/roots/$1"
}

# bare_root_ensure_tool COMMAND PACKAGE...: installs the Debian PACKAGEs when COMMAND is missing.
bare_root_ensure_tool() {
  local cmd=$1; shift
  command -v "$cmd" > /dev/null 2>&1 && return 0
  echo "[bare_root] $cmd is missing: apt-get install $*" >&2
  command -v apt-get > /dev/null 2>&1 || { echo "bare_root: $cmd is missing and there is no apt-get to install $*" >&2; return 1; }
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } > /dev/null ||
    { echo "bare_root: apt-get install $* failed (needed for $cmd)" >&2; return 1; }
  command -v "$cmd" > /dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" > /dev/null 2>&1 ||
    { echo "bare_root: $cmd still missing after apt-get install $*" >&2; return 1; }
}

# bare_root_unmount_under DIR: unmounts whatever is mounted at or below DIR, deepest first.
bare_root_unmount_under() {
  local dir m
  dir=$(readlink -f "$1" 2> /dev/null) || return 0
  # DIR and the folders below it, compared as strings (not a pattern); /proc/self/mounts writes a
  # space, tab, newline and backslash in a path as \040, \011, \012 and \134.
  BARE_ROOT_UNDER=$dir awk '
    function unescape(s) { gsub(/\\040/, " ", s); gsub(/\\011/, "\t", s); gsub(/\\012/, "\n", s); gsub(/\\134/, "\\", s); return s }
    BEGIN { d = ENVIRON["BARE_ROOT_UNDER"]; prefix = d == "/" ? "/" : d "/" }
    { m = unescape($2); if (m == d || index(m, prefix) == 1) print m }' /proc/self/mounts | sort -r |
    while IFS= read -r m; do
      umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || true
    done
}

# bare_root_valid DIR: whether DIR is a made root (a shell and the dynamic loader).
bare_root_valid() {
  [ -x "$1/bin/sh" ] && { [ -e "$1/lib64/ld-linux-x86-64.so.2" ] || [ -e "$1/lib/ld-linux-aarch64.so.1" ]; }
}

# bare_root SUITE: prints the cached root of SUITE, making it first when it is not there.
bare_root() {
  local suite=${1:?usage: bare_root SUITE}
  local dir tmp lock log made mirror t0 t1 rc pid
  dir=$(bare_root_dir "$suite")
  if bare_root_valid "$dir"; then
    echo "$dir"; return 0
  fi
  [ "$(id -u)" -eq 0 ] || { echo "bare_root: making the $suite root needs root (debootstrap)" >&2; return 1; }
  # debootstrap, chroot and the tools it runs are in the sbin folders (for this function and what it
  # starts only: a caller that sourced this file keeps its PATH).
  local -x PATH="$PATH:/usr/sbin:/sbin"
  bare_root_ensure_tool debootstrap debootstrap debian-archive-keyring || return 1
  bare_root_ensure_tool flock util-linux || return 1
  bare_root_ensure_tool setsid util-linux || return 1
  mkdir -p "$(dirname "$dir")" || return 1
  tmp=$dir.tmp lock=$dir.lock log=$dir.log made=$dir.made
  mirror=${PLUGBOARD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  (
    flock 9
    bare_root_valid "$dir" && exit 0   # made by another run while this one waited for the lock
    if [ -e "$tmp" ] || [ -L "$tmp" ]; then   # left by an interrupted run: start again (nothing mounted there survives)
      echo "[bare_root] removing $tmp (an interrupted run's)" >&2
      bare_root_unmount_under "$tmp"
      rm -rf --one-file-system "$tmp"
    fi
    if [ -e "$dir" ] || [ -L "$dir" ]; then   # not a root (checked above): what a failed or older run left
      echo "[bare_root] removing $dir: not a usable root (no /bin/sh or no dynamic loader)" >&2
      bare_root_unmount_under "$dir"
      rm -rf --one-file-system "$dir" || { echo "bare_root: cannot remove $dir" >&2; exit 1; }
    fi
    echo "[bare_root] debootstrap --variant=minbase $suite $tmp $mirror (once; log: $log)" >&2
    t0=$(date +%s)
    # In a session (and so a process group) of its own, waited for in the background: a TERM or INT
    # stops debootstrap and everything it started (it would go on holding the lock and writing into
    # SUITE.tmp, its dpkg and apt in the chroot too); the next run starts again. In this subshell
    # job control is off, so the background process is no group leader and setsid needs no fork:
    # $! is debootstrap's process, and its group.
    setsid debootstrap --variant=minbase "$suite" "$tmp" "$mirror" > "$log" 2>&1 9>&- &
    pid=$!
    # (Its group, or itself when the signal came before setsid made the group.)
    trap '{ kill -TERM -- -$pid || kill -TERM $pid; } 2> /dev/null; wait $pid; kill -KILL -- -$pid 2> /dev/null; bare_root_unmount_under "$tmp"
          echo "bare_root: making the $suite root was interrupted" >&2; exit 1' TERM INT HUP
    wait $pid; rc=$?
    trap - TERM INT HUP
    t1=$(date +%s)
    bare_root_unmount_under "$tmp"
    if [ $rc -ne 0 ] || ! grep -q "Base system installed successfully" "$log"; then
      echo "bare_root: debootstrap of the $suite root failed (exit $rc): see $log" >&2
      tail -n 5 "$log" | sed 's/^/    | /' >&2
      rm -rf --one-file-system "$tmp"
      exit 1
    fi
    # -T: $dir is the new root's name, never a folder to move it into.
    mv -T "$tmp" "$dir" || exit 1
    echo "debootstrap --variant=minbase $suite: $((t1 - t0)) s ($(date -u +%FT%TZ), $mirror)" > "$made"
    echo "[bare_root] $suite root made in $((t1 - t0)) s: $dir" >&2
  ) 9> "$lock" || return 1
  echo "$dir"
}

# bare_run [--copy SRC[:NAME]]... [--env N=V]... [--cd DIR] [--timeout S] SUITE -- COMMAND [ARG...]
# (in a subshell: the signal traps stay out of a caller that sourced this file).
bare_run() { (bare_run_main "$@"); }

bare_run_main() {
  local copies=() envs=() cd=/ timeout=1800
  while [ $# -gt 0 ]; do
    case $1 in
      --copy) copies+=("$2"); shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --cd) cd=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --) echo "bare_run: no SUITE before --" >&2; return 2 ;;
      -*) echo "bare_run: unknown option $1" >&2; return 2 ;;
      *) break ;;
    esac
  done
  local suite=${1:?usage: bare_run [OPTIONS] SUITE -- COMMAND [ARG...]}; shift
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || { echo "bare_run: no command" >&2; return 2; }
  local root
  root=$(bare_root "$suite") || return 1
  # A mount namespace of its own when unshare can make one (the overlay, the copy way's /opt and
  # the /proc, /dev and /sys mounts are the run's alone), and an overlay where overlayfs is to be had.
  local ns=1 overlay=1
  unshare --mount --propagation private true 2> /dev/null || ns=0
  [ -n "${BARE_ROOT_NO_OVERLAY:-}" ] && overlay=0
  [ $ns -eq 1 ] || overlay=0
  if [ $overlay -eq 1 ] && ! grep -qw overlay /proc/filesystems 2> /dev/null && ! modprobe overlay 2> /dev/null; then overlay=0; fi
  # The work is done by this script in a fresh bash (in a mount namespace of its own when it can):
  # the mounts live and die with that process.
  local self
  self=$(readlink -f "${BASH_SOURCE[0]}")
  local args=("$overlay" "$ns" "$root" "$timeout" "$cd" "${#copies[@]}" "${copies[@]}" "${#envs[@]}" "${envs[@]}" "$@")
  local launch=()
  [ $ns -eq 1 ] && launch=(unshare --mount --propagation private)
  # A TERM or INT here is passed on to the run, which cleans up before it exits.
  local pid rc
  exec 3<&0
  "${launch[@]}" bash "$self" __inside "${args[@]}" <&3 &
  pid=$!
  trap 'kill -TERM $pid 2> /dev/null' TERM INT HUP
  while :; do
    wait $pid; rc=$?
    kill -0 $pid 2> /dev/null || return $rc
  done
}

# bare_run_live_folder FOLDER: whether FOLDER (ROOT/opt/bare-run.PID) is a live run's.
bare_run_live_folder() {
  local pid=${1##*.}
  [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" != $$ ] && kill -0 "$pid" 2> /dev/null
}

# The body of bare_run, in its own process:
#   __inside OVERLAY NS ROOT TIMEOUT CD NCOPIES COPIES... NENVS ENVS... COMMAND...
bare_run_inside() {
  local overlay=$1 ns=$2 root=$3 timeout=$4 cd=$5; shift 5
  local n=$1; shift
  local copies=("${@:1:$n}"); shift "$n"
  n=$1; shift
  local envs=("${@:1:$n}"); shift "$n"
  local view run c
  # work: the overlay's temporary folder; folder: the copy way's ROOT/opt/bare-run.PID.
  work='' folder='' mounted=() linked=()
  cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
      umount "${mounted[i]}" 2> /dev/null || umount -l "${mounted[i]}" 2> /dev/null ||
        echo "bare_run: could not unmount ${mounted[i]}" >&2
    done
    mounted=()
    for c in "${linked[@]}"; do rm -f "$c"; done
    [ -n "$work" ] && rm -rf --one-file-system "$work"
    [ -n "$folder" ] && rm -rf --one-file-system "$folder"
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
  if [ "$overlay" = 1 ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/bare-run.XXXXXX") || exit 1
    mkdir -p "$work/upper" "$work/work" "$work/view" || exit 1
    if mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$work/view" 2> "$work/mount.err"; then
      mounted+=("$work/view")
      view=$work/view run=/opt/bare-run
    else
      echo "[bare_run] cannot mount an overlay of $root with its upper folder in ${TMPDIR:-/tmp} ($(head -n 1 "$work/mount.err")):" \
           "copying into the root instead" >&2
      rm -rf --one-file-system "$work"
      work='' overlay=0
    fi
  fi
  if [ "$overlay" = 0 ]; then
    # What runs that died (killed before their trap ran) left goes first: their folders, and the
    # links to them.
    local stale
    for stale in "$root"/opt/bare-run.*; do
      [ -d "$stale" ] && ! [ -L "$stale" ] || continue
      bare_run_live_folder "$stale" && continue
      bare_root_unmount_under "$stale"
      rm -rf --one-file-system "$stale"
    done
    for stale in "$root"/opt/*; do
      [ -L "$stale" ] && [[ $(readlink "$stale") == /opt/bare-run.* ]] && ! [ -e "$root$(readlink "$stale")" ] && rm -f "$stale"
    done
    folder=$root/opt/bare-run.$$
    rm -rf --one-file-system "$folder"
    mkdir -p "$folder" || exit 1
    view=$root
    if [ "$ns" = 1 ]; then
      # The command's /opt is this run's own folder (the root's /opt stays as it is for other runs).
      mkdir -p "$folder/opt" && mount --bind "$folder/opt" "$root/opt" && mounted+=("$root/opt") ||
        { echo "bare_run: cannot bind $folder/opt to $root/opt" >&2; exit 1; }
      mount --make-private "$root/opt" 2> /dev/null || true
      run=/opt/bare-run
    else
      run=/opt/bare-run.$$
    fi
  fi
  mkdir -p "$view$run/home" "$view/opt" || exit 1
  local src name
  for c in "${copies[@]}"; do
    src=${c%%:*} name=${c#*:}
    [ "$name" = "$c" ] && name=$(basename "$src")
    [ -e "$src" ] || { echo "bare_run: $src does not exist" >&2; exit 1; }
    if [ "$overlay" = 0 ] && [ "$ns" = 0 ]; then
      # No namespace: the copy is this run's (ROOT/opt/bare-run.PID/NAME), linked as /opt/NAME.
      local at=$view/opt/$name target
      if [ -e "$at" ] || [ -L "$at" ]; then
        target=$(readlink "$at" 2> /dev/null) || target=""
        if [[ $target == /opt/bare-run.* ]] && bare_run_live_folder "${target%/*}"; then
          echo "bare_run: /opt/$name in $root is another run's (${target%/*}); without unshare, runs that copy the same name cannot run side by side" >&2
          exit 1
        fi
        [[ $target == /opt/bare-run.* ]] || { echo "bare_run: $at is in the way (not a run's link): remove it" >&2; exit 1; }
        rm -f "$at"
      fi
      cp -a "$src" "$view$run/$name" || { echo "bare_run: copying $src into $run/$name failed" >&2; exit 1; }
      ln -s "$run/$name" "$at" && linked+=("$at") || { echo "bare_run: cannot link /opt/$name" >&2; exit 1; }
      continue
    fi
    rm -rf --one-file-system "${view:?}/opt/$name"
    cp -a "$src" "$view/opt/$name" || { echo "bare_run: copying $src into /opt/$name failed" >&2; exit 1; }
  done
  mount -t proc proc "$view/proc" && mounted+=("$view/proc") || { echo "bare_run: cannot mount /proc in $view" >&2; exit 1; }
  mount --bind /dev "$view/dev" && mounted+=("$view/dev") || { echo "bare_run: cannot bind /dev into $view" >&2; exit 1; }
  mount --make-private "$view/dev" 2> /dev/null || true
  mount -t sysfs sysfs "$view/sys" && mounted+=("$view/sys") || { echo "bare_run: cannot mount /sys in $view" >&2; exit 1; }
  # In the background and waited for, so that a TERM or INT reaches the trap at once: it is passed
  # on to timeout (which passes it on to the command), then the EXIT trap cleans up.
  local rc=0 cpid
  exec 3<&0
  timeout --kill-after=30 "$timeout" chroot "$view" /usr/bin/env -i HOME="$run/home" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb \
    XDG_CACHE_HOME="$run/home/.cache" BARE_RUN_DIR="$run" "${envs[@]}" \
    /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$cd" "$@" <&3 &
  cpid=$!
  trap 'kill -TERM $cpid 2> /dev/null; wait $cpid; exit 143' TERM HUP
  trap 'kill -INT $cpid 2> /dev/null; wait $cpid; exit 130' INT
  wait $cpid; rc=$?
  [ $rc -eq 124 ] && echo "bare_run: the command ran past its ${timeout} s timeout" >&2
  exit $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case ${1:-} in
    root) shift; bare_root "$@" ;;
    run) shift; bare_run_main "$@" ;;
    __inside) shift; bare_run_inside "$@" ;;
    *) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
fi
