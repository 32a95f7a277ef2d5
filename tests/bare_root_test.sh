#!/usr/bin/env bash
# scripts/bare_root.sh on a tiny root made by a stand-in debootstrap (the host's sh, env, cat, sleep
# and their libc: no mirror needed):
#   - a stale SUITE folder that is no root is replaced (the new root is not moved into it);
#   - making a root leaves the PATH of a caller that sourced the script as it was;
#   - bare_root_unmount_under DIR unmounts DIR and below only, DIR a string, not a pattern;
#   - a TERM to the making stops debootstrap and everything it started, and the next make succeeds;
#   - bare_run: the copies as /opt/NAME through an overlay, the root left as it was; with TMPDIR on an
#     overlayfs (no upper folder there) the copy way by itself; in the copy way two runs side by side
#     each see their own /opt/NAME (in their mount namespaces, and without unshare one is refused).
#
#   bare_root_test.sh BARE_ROOT_SCRIPT
#
# Needs root, unshare and overlayfs (exit 77, skipped, without them).
set -uo pipefail
script=$(readlink -f "${1:?usage: bare_root_test.sh BARE_ROOT_SCRIPT}")
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (mount, chroot)"; exit 77; }
unshare --mount --propagation private true 2> /dev/null || { echo "SKIP: unshare --mount does not work here"; exit 77; }
grep -qw overlay /proc/filesystems 2> /dev/null || modprobe overlay 2> /dev/null || { echo "SKIP: no overlayfs"; exit 77; }

w=$(mktemp -d "${TMPDIR:-/tmp}/bare-root-test.XXXXXX")
cleanup() {
  # Whatever a failed check left mounted under the scratch folder, then the folder.
  awk '{ print $2 }' /proc/self/mounts | while IFS= read -r m; do
    case $m in "$w" | "$w"/*) echo "$m" ;; esac
  done | sort -r | while IFS= read -r m; do umount -l "$m"; done
  rm -rf --one-file-system "$w"
}
trap cleanup EXIT
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

export XDG_CACHE_HOME=$w/cache
roots=$XDG_CACHE_HOME/plugboard/roots
mkdir -p "$w/fakebin" "$w/fake" "$roots"

# The stand-in debootstrap: debootstrap --variant=minbase SUITE DIR MIRROR. With FAKE_HANG set it
# starts a child that sleeps (as debootstrap's dpkg would run) and waits for it.
cat > "$w/fakebin/debootstrap" << 'EOF'
#!/usr/bin/env bash
dir=$3
echo $$ > "$FAKE_DIR/debootstrap.pid"
echo $PPID > "$FAKE_DIR/debootstrap.ppid"
if [ -n "${FAKE_HANG:-}" ]; then
  mkdir -p "$dir"
  sleep 1000 &
  echo $! > "$FAKE_DIR/child.pid"
  wait
  exit 1
fi
mkdir -p "$dir"/{bin,usr/bin,lib64,lib/x86_64-linux-gnu,proc,dev,sys,opt,tmp} || exit 1
for f in /bin/dash:bin/sh /usr/bin/env:usr/bin/env /usr/bin/cat:bin/cat /usr/bin/sleep:bin/sleep /usr/bin/ls:bin/ls; do
  cp "${f%%:*}" "$dir/${f#*:}" || exit 1
  for lib in $(ldd "${f%%:*}" | grep -o '/[^ ]*'); do
    mkdir -p "$dir$(dirname "$lib")" && cp -L "$lib" "$dir$lib" || exit 1
  done
done
echo "I: Base system installed successfully."
EOF
chmod +x "$w/fakebin/debootstrap"
export FAKE_DIR=$w/fake PATH=$w/fakebin:$PATH
valid() { [ -x "$1/bin/sh" ] && [ -e "$1/lib64/ld-linux-x86-64.so.2" ]; }
# dead PID: the process is gone (or a zombie waiting for its parent).
dead() { local s; s=$(ps -o stat= -p "$1" 2> /dev/null) || return 0; [[ $s == Z* ]]; }

# 1. A stale folder where the root goes, which is no root: replaced, the new root not moved into it.
mkdir -p "$roots/stale/leftover"
out=$("$script" root stale 2> "$w/stale.err"); rc=$?
if [ $rc -eq 0 ] && [ "$out" = "$roots/stale" ] && valid "$roots/stale" && ! [ -e "$roots/stale/stale.tmp" ] &&
   ! [ -e "$roots/stale/leftover" ]; then
  pass "a stale, invalid root folder is replaced by the new root"
else
  fail "stale root folder: exit $rc, printed '$out', contents: $(ls "$roots/stale" 2> /dev/null | tr '\n' ' ')"; sed 's/^/    | /' "$w/stale.err"
fi

# 2. Sourced: making a root leaves the caller's PATH as it was.
(
  # shellcheck source=../scripts/bare_root.sh
  . "$script"
  before=$PATH
  bare_root pathcheck > /dev/null 2>&1 || { echo "bare_root pathcheck failed"; exit 1; }
  [ "$PATH" = "$before" ] || { echo "PATH changed: $PATH"; exit 1; }
) > "$w/path.out" 2>&1 && pass "making a root leaves a sourcing caller's PATH alone" || { fail "sourced bare_root: $(cat "$w/path.out")"; }

# 3. bare_root_unmount_under DIR: a string prefix, not a pattern ('.' is no wildcard), in a mount
# namespace of its own.
mkdir -p "$w/u/m.x/in" "$w/u/mAx"
unshare --mount --propagation private bash -c '
  . "$1"; u=$2
  mount -t tmpfs t "$u/mAx" && mount -t tmpfs t "$u/m.x/in" || exit 2
  bare_root_unmount_under "$u/m.x"
  mountpoint -q "$u/m.x/in" && { echo "$u/m.x/in still mounted"; exit 1; }
  mountpoint -q "$u/mAx" || { echo "$u/mAx unmounted: the folder was read as a pattern"; exit 1; }
  exit 0' sh "$script" "$w/u" > "$w/unmount.out" 2>&1 &&
  pass "bare_root_unmount_under takes its folder as a string" || fail "bare_root_unmount_under: $(cat "$w/unmount.out")"

# 4. A TERM to the making (the process that waits for debootstrap) stops debootstrap and its children.
rm -f "$FAKE_DIR"/*.pid "$FAKE_DIR"/*.ppid
FAKE_HANG=1 "$script" root hang > /dev/null 2> "$w/hang.err" &
maker=$!
for _ in $(seq 100); do [ -s "$FAKE_DIR/child.pid" ] && [ -s "$FAKE_DIR/debootstrap.ppid" ] && break; sleep 0.1; done
if ! [ -s "$FAKE_DIR/child.pid" ]; then
  fail "the stand-in debootstrap did not start"; kill -- -"$maker" 2> /dev/null
else
  child=$(cat "$FAKE_DIR/child.pid") deboot=$(cat "$FAKE_DIR/debootstrap.pid") waiter=$(cat "$FAKE_DIR/debootstrap.ppid")
  kill -TERM "$waiter"
  for _ in $(seq 100); do kill -0 "$maker" 2> /dev/null || break; sleep 0.1; done
  wait "$maker"; rc=$?
  for _ in $(seq 50); do dead "$child" && dead "$deboot" && break; sleep 0.1; done
  if [ $rc -ne 0 ] && dead "$deboot" && dead "$child" && grep -q "was interrupted" "$w/hang.err"; then
    pass "a TERM while debootstrap runs stops it and what it started (exit $rc)"
  else
    fail "TERM while making: exit $rc; debootstrap $(dead "$deboot" && echo gone || echo "still running"), its child" \
         "$(dead "$child" && echo gone || echo "still running")"; sed 's/^/    | /' "$w/hang.err"
  fi
  kill "$child" "$deboot" 2> /dev/null
  "$script" root hang > /dev/null 2>&1 && valid "$roots/hang" && ! [ -e "$roots/hang.tmp" ] &&
    pass "the next make starts again and succeeds" || fail "the make after an interrupted one"
fi

# 5. bare_run through an overlay: /opt/NAME is the copy, the root stays as it was.
"$script" root run > /dev/null 2> "$w/make.err" || { fail "making a root"; sed 's/^/    | /' "$w/make.err"; }
root=$roots/run
mkdir -p "$w/a" "$w/b"
echo A > "$w/a/id"; echo B > "$w/b/id"
out=$("$script" run --copy "$w/a:app" --cd /opt/app run -- cat id 2> "$w/run.err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = A ] && pass "bare_run (overlay): /opt/app is the copy" || { fail "bare_run (overlay): exit $rc, '$out'"; sed 's/^/    | /' "$w/run.err"; }
[ -d "$root/opt" ] && [ -z "$(ls -A "$root/opt")" ] && pass "the root's /opt is as it was" || fail "the root's /opt after a run: $(ls -A "$root/opt")"

# 6. TMPDIR on an overlayfs, which cannot hold an overlay's upper folder: the copy way, by itself.
mkdir -p "$w/ovl/lower" "$w/ovl/upper" "$w/ovl/work" "$w/ovl/merged"
unshare --mount --propagation private bash -c '
  mount -t overlay overlay -o "lowerdir=$1/lower,upperdir=$1/upper,workdir=$1/work" "$1/merged" || exit 2
  TMPDIR=$1/merged "$2" run --copy "$3:app" run -- cat /opt/app/id' sh "$w/ovl" "$script" "$w/a" > "$w/ovl.out" 2> "$w/ovl.err"; rc=$?
if [ $rc -eq 0 ] && [ "$(cat "$w/ovl.out")" = A ] && grep -q "copying into the root instead" "$w/ovl.err"; then
  pass "an overlay that cannot be mounted (TMPDIR on overlayfs): the copy way instead"
elif [ $rc -eq 0 ] && [ "$(cat "$w/ovl.out")" = A ]; then
  echo "NOTE: this kernel mounts an overlay with its upper folder on an overlayfs: the fallback was not needed"
else
  fail "TMPDIR on overlayfs: exit $rc, '$(cat "$w/ovl.out")'"; sed 's/^/    | /' "$w/ovl.err"
fi
[ -d "$root/opt" ] && [ -z "$(ls -A "$root/opt")" ] && pass "the root's /opt is as it was" || fail "the root's /opt after a copy-way run: $(ls -A "$root/opt")"

# 7. The copy way, two runs side by side copying the same name: each sees its own.
side_by_side() {  # side_by_side LABEL: run A (slow) and B under the current environment
  local label=$1
  "$script" run --copy "$w/a:app" run -- sh -c 'sleep 2; cat /opt/app/id' > "$w/a.out" 2> "$w/a.err" &
  local a=$!
  for _ in $(seq 50); do [ -n "$(ls -d "$root"/opt/bare-run.* 2> /dev/null)" ] && break; sleep 0.1; done
  "$script" run --copy "$w/b:app" run -- cat /opt/app/id > "$w/b.out" 2> "$w/b.err"; brc=$?
  wait $a; arc=$?
  [ $arc -eq 0 ] && [ "$(cat "$w/a.out")" = A ] && pass "$label: the first run sees its own /opt/app" ||
    { fail "$label: the first run: exit $arc, '$(cat "$w/a.out")'"; sed 's/^/    | /' "$w/a.err"; }
}
BARE_ROOT_NO_OVERLAY=1 side_by_side "copy way"
[ $brc -eq 0 ] && [ "$(cat "$w/b.out")" = B ] && pass "copy way: the second run sees its own /opt/app" ||
  { fail "copy way: the second run: exit $brc, '$(cat "$w/b.out")'"; sed 's/^/    | /' "$w/b.err"; }
[ -d "$root/opt" ] && [ -z "$(ls -A "$root/opt")" ] && pass "the root's /opt is as it was" || fail "the root's /opt after copy-way runs: $(ls -A "$root/opt")"

# Without unshare (a stand-in that fails): /opt/app is a link to the run's copy; a second run that
# copies the same name while the first lives is refused, not let to clobber it.
mkdir -p "$w/nounshare"
printf '#!/bin/sh\nexit 1\n' > "$w/nounshare/unshare"; chmod +x "$w/nounshare/unshare"
PATH=$w/nounshare:$PATH side_by_side "copy way without unshare"
[ $brc -ne 0 ] && grep -q "another run's" "$w/b.err" && pass "without unshare: the second run is refused, naming the first" ||
  { fail "without unshare: the second run: exit $brc, '$(cat "$w/b.out")'"; sed 's/^/    | /' "$w/b.err"; }
[ -d "$root/opt" ] && [ -z "$(ls -A "$root/opt")" ] && pass "the root's /opt is as it was" || fail "the root's /opt after runs without unshare: $(ls -A "$root/opt")"
PATH=$w/nounshare:$PATH "$script" run --copy "$w/b:app" run -- cat /opt/app/id > "$w/b.out" 2> "$w/b.err" &&
  [ "$(cat "$w/b.out")" = B ] && pass "without unshare, alone: /opt/app is the copy" ||
  { fail "without unshare, alone: '$(cat "$w/b.out")'"; sed 's/^/    | /' "$w/b.err"; }

[ $failures -eq 0 ] && { echo "bare_root test passed"; exit 0; }
echo "bare_root test: $failures check(s) failed"; exit 1
