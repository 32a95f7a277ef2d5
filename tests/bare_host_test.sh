#!/usr/bin/env bash
# The sample's `compute` release on bare Debian hosts (issue 33 item 2): a built release copied into
# a bare root of each suite (debootstrap --variant=minbase, cached: scripts/bare_root.sh) and run
# there with chroot, on a throwaway view of the root (the cached root stays as it was made):
#   - no ELF file of the release (erts, plugboard's priv/lib and priv/bin, the bundle's plugins, any
#     other) needs a library the host lacks: the dynamic loader's trace of each (what ldd does; the
#     loader's --list stops at the first missing library) shows no "not found"; else each file is
#     named with its missing libraries;
#   - `bin/compute eval 'Compute.Demo.main()'` (what scripts/demo.sh runs) boots cpu and runs the
#     demo: the print hook and the blocking Elixir callback with their values, the precompiled model;
#     with Nx in the release, the Nx job trains (its loss falls) and the Axon job trains, saves and
#     serves;
#   - `priv/bin/plugboard doctor --bundle priv/bundle` exits 0 and chooses cpu;
#   - once (on bookworm, else the first suite): the release with a NIF that needs a library no host has
#     (patchelf --add-needed) fails `eval` with a non-zero exit and one line naming that library and
#     what to do; Plugboard.client/0 returns that reason.
# Prints the release's size and each target's, the time each root took to make (once) and each suite's run.
#
#   tests/bare_host_test.sh RELEASE_DIR [SUITE...]      (default suites: bookworm trixie)
#
# RELEASE_DIR: a built compute release (e.g. MIX_BUILD_ROOT/prod/rel/compute). Needs root (chroot,
# mount, debootstrap) and, the first time per suite, Debian's mirror (PLUGBOARD_DEBIAN_MIRROR);
# debootstrap and patchelf are installed with apt-get when missing. Roots are cached under
# ${XDG_CACHE_HOME:-~/.cache}/plugboard/roots. BARE_HOST_TIMEOUT: seconds per suite (default 1200).
# PLUGBOARD_WITH_NX=1 (what scripts/test_elixir.sh sets where Nx can be had): the release must have
# Nx, and the Nx and Axon jobs must run; a release without lib/nx-* or a demo without their output
# fails (without it, a release with no Nx skips those checks).
set -uo pipefail

# --- inside the root: bare_host_test.sh --inside RELEASE SUITE DEVICE_RUNTIME [BROKEN_NIF] ----------
# DEVICE_RUNTIME: a file of "FILE<tab>LIBRARY" lines, what the bundle's plugins need that the build
# host lacked too; BROKEN_NIF: a NIF that needs a library no host has (once, on one suite).
# PLUGBOARD_WITH_NX=1 in the environment: Nx is required.
if [ "${1:-}" = "--inside" ]; then
  rel=$2 suite=$3 device_runtime=${4:-} broken=${5:-}
  with_nx=${PLUGBOARD_WITH_NX:-0}
  failures=0
  pass() { echo "PASS: [$suite] $*"; }
  fail() { echo "FAIL: [$suite] $*"; failures=$((failures + 1)); }
  has() { if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3 (no '$2' in the output)"; tail -n 30 "$1" | sed 's/^/    | /'; fi; }
  hasnt() { if grep -qF -- "$2" "$1"; then fail "$3 ('$2' in the output)"; grep -F -- "$2" "$1" | head -n 3 | sed 's/^/    | /'; else pass "$3"; fi; }
  line() { grep -nF -- "$2" "$1" | head -n 1 | cut -d: -f1 | grep . || echo 0; }
  out=$HOME
  loader=/lib64/ld-linux-x86-64.so.2
  [ -x "$loader" ] || { echo "FAIL: [$suite] no $loader in this root"; exit 1; }
  echo "[$suite] $(. /etc/os-release && echo "$PRETTY_NAME"), $("$loader" --version | head -n 1)"

  # 1. Every ELF file of the release, traced by this host's dynamic loader.
  cd "$rel" || exit 1
  app=$(ls -d lib/plugboard-*/ | head -n 1); app=${app%/}
  n=0 bad=0
  : > "$out/elf.txt"
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" 2> /dev/null | tr -d '\000')" = "$(printf '\177ELF')" ] || continue
    n=$((n + 1)); echo "$f" >> "$out/elf.txt"
    missing=$(LD_TRACE_LOADED_OBJECTS=1 "$loader" "$f" 2>&1 | awk '/=> not found/ { print $1; next } /not found/ { print }' | sort -u)
    # A GPU target's plugin needs its device runtime (ROCm's libamdhip64, ...), which comes with the
    # device's host, not with the release: what the build host lacked too is named, not counted.
    if [ -n "$missing" ] && [ -n "$device_runtime" ] && [[ $f == ./$app/priv/bundle/plugins/* ]]; then
      runtime=$(awk -F'\t' -v f="${f#./}" '$1 == f { print $2 }' "$device_runtime" | sort -u)
      if [ -n "$runtime" ]; then
        echo "NOTE: [$suite] ${f#./} needs its device runtime, absent on the build host too: $(paste -sd, - <<< "$runtime" | sed 's/,/, /g')"
        missing=$(comm -23 <(echo "$missing") <(echo "$runtime"))
      fi
    fi
    missing=$(paste -sd, - <<< "$missing" | sed 's/,/, /g')
    if [ -n "$missing" ]; then bad=$((bad + 1)); fail "${f#./} needs $missing: not found on $suite"; fi
  done < <(find . -type f -print0 | sort -z)
  for want in "erts-*/bin/beam.smp" "$app/priv/lib/plugboard_nif.so" "$app/priv/lib/libplugboard.so.0" "$app/priv/bin/plugboard" \
              "$app/priv/bin/plugboard-isolate" "$app/priv/bundle/plugins/*/*.so"; do
    found=0
    # shellcheck disable=SC2053  # $want is a pattern
    while IFS= read -r f; do [[ ${f#./} == $want ]] && { found=1; break; }; done < "$out/elf.txt"
    [ $found -eq 1 ] || fail "no ELF file $want in the release"
  done
  [ $bad -eq 0 ] && pass "$n ELF files (erts, $app/priv/lib, priv/bin, the bundle's plugins): none needs a library $suite lacks"

  # 2. The demo, with its Nx and Axon jobs when the release has Nx.
  t0=$(date +%s%3N)
  (COMPUTE_MODEL_DIR=$out timeout 600 bin/compute eval 'Compute.Demo.main()') > "$out/demo.log" 2>&1; rc=$?
  t1=$(date +%s%3N)
  if [ $rc -eq 0 ]; then pass "bin/compute eval 'Compute.Demo.main()' exits 0 ($((t1 - t0)) ms)"; else
    fail "bin/compute eval 'Compute.Demo.main()' exited $rc"; grep -v '^[WIE][0-9]' "$out/demo.log" | tail -n 15 | sed 's/^/    | /'
  fi
  if [ $rc -eq 0 ]; then
    has "$out/demo.log" "chosen: cpu (" "the boot chose cpu"
    for t in cuda13 rocm7; do
      grep -qF "\"name\": \"$t\"" "$app/priv/bundle/plugboard.json" || continue
      if grep -qE "^  $t \[[a-z0-9]+\]  failed at probed" "$out/demo.log"; then pass "report: $t ruled out by its probe (no device here)"; else fail "report: $t not ruled out by its probe"; fi
    done
    has "$out/demo.log" "compute: running on target cpu (cpu, $rel/$app/priv/bundle/plugins/" "the demo runs on the embedded cpu plugin"
    x='print: plugboard.print x: f32[2,4] [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, 0.25]'
    cb='host_scale: called in #PID<'
    cbx='(the running process) with f32[2,4] [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, 0.25]'
    sx='print: plugboard.print host_scale(x): f32[2,4] [3.0, 6.0, 9.0, 12.0, -3.0, -6.0, 1.5, 0.75]'
    result='result: f32[2,4] [4.0, 8.0, 12.0, 16.0, -4.0, -8.0, 2.0, 1.0]'
    has "$out/demo.log" "$x" "print hook: x as the program saw it"
    has "$out/demo.log" "$cbx" "blocking callback: the Elixir function ran in the running process on x"
    has "$out/demo.log" "$sx" "print hook: host_scale(x) = 3x"
    has "$out/demo.log" "$result" "result: host_scale(x) + x = 4x"
    a=$(line "$out/demo.log" "$x") b=$(line "$out/demo.log" "$cb") c=$(line "$out/demo.log" "$sx") d=$(line "$out/demo.log" "$result")
    if [ "$a" -gt 0 ] && [ "$a" -lt "$b" ] && [ "$b" -lt "$c" ] && [ "$c" -lt "$d" ]; then pass "program order: print x, host_scale, print host_scale(x), result"; else fail "order of the demo's lines: $a $b $c $d"; fi
    has "$out/demo.log" "model.mlir: precompiled in the bundle (loaded in" "the precompiled model loads from the bundle (no compile)"
    has "$out/demo.log" "model: f32[2,3] [16.5, 20.0, 23.5, 0.0, 0.0, 0.0]" "model: relu(x·w + b) computed"
    if [ "$with_nx" = 1 ] && ! compgen -G "lib/nx-*" > /dev/null; then
      fail "PLUGBOARD_WITH_NX=1, but the release has no lib/nx-*: the Nx and Axon jobs cannot run"
    elif compgen -G "lib/nx-*" > /dev/null; then
      if loss=$(grep -o "nx: MLP on Plugboard.Nx.Backend: loss [0-9.e-]* -> [0-9.e-]*" "$out/demo.log"); then
        awk '{ if ($(NF-2) + 0 > $NF + 0) exit 0; exit 1 }' <<< "$loss" && pass "the Nx job trains: ${loss#nx: }" || fail "the Nx job's loss did not fall: $loss"
      else
        fail "no Nx job output in the demo"
      fi
      if axon=$(grep -o "axon: CNN on cpu .*held-back loss [0-9.e-]* -> [0-9.e-]*, accuracy [0-9.e-]* -> [0-9.e-]*" "$out/demo.log"); then
        read -r l0 l1 <<< "$(sed -E 's/.*loss ([0-9.e-]+) -> ([0-9.e-]+), accuracy.*/\1 \2/' <<< "$axon")"
        awk -v a="$l0" -v b="$l1" 'BEGIN { exit !(b < a / 2) }' && pass "the Axon job trains: ${axon#axon: }" || fail "the Axon job's held-back loss did not halve: $axon"
      else
        fail "no Axon job output in the demo"
      fi
      has "$out/demo.log" "answers equal the direct prediction: true" "the Axon model is served through Nx.Serving"
    else
      echo "SKIPPED: [$suite] the Nx and Axon jobs: a release built without Nx (Elixir >= 1.17 and Hex)"
    fi
  fi
  hasnt "$out/demo.log" "cannot load" "the NIF loaded"

  # 3. The CLI the release carries.
  "$app/priv/bin/plugboard" doctor --bundle "$app/priv/bundle" > "$out/doctor.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then pass "priv/bin/plugboard doctor --bundle priv/bundle exits 0"; else
    fail "priv/bin/plugboard doctor --bundle priv/bundle exited $rc"; grep -v '^[WIE][0-9]' "$out/doctor.log" | tail -n 5 | sed 's/^/    | /'
  fi
  [ $rc -eq 0 ] && has "$out/doctor.log" "chosen: cpu (" "doctor: chooses cpu"

  # 4. A NIF that cannot load: the boot fails, with one line naming the library and what to do.
  if [ -n "$broken" ]; then
    nif=$app/priv/lib/plugboard_nif.so
    mv "$nif" "$out/plugboard_nif.so.good" && cp "$broken" "$nif"
    (timeout 300 bin/compute eval 'Compute.Demo.main()') > "$out/broken.log" 2>&1; rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "a NIF needing libplugboard_test_missing.so.9: eval fails (exit $rc)"; else fail "a NIF needing libplugboard_test_missing.so.9: eval exited $rc"; fi
    want="plugboard: cannot load $rel/$nif: "
    n=$(grep -cF -- "$want" "$out/broken.log")
    l=$(grep -F -- "$want" "$out/broken.log" | head -n 1)
    if [ "$n" -eq 1 ] && [[ $l == *libplugboard_test_missing.so.9* ]] && [[ $l == *"not found on this host (the native part must be self-contained; install"* ]] &&
       [[ $l == *"PLUGBOARD_BUILD=true mix compile)" ]]; then
      pass "one line names the missing library and what to do: ${l#*\[error\] }"
    else
      fail "no single line naming libplugboard_test_missing.so.9 and what to do ($n lines with '$want')"; grep -v '^[WIE][0-9]' "$out/broken.log" | tail -n 12 | sed 's/^/    | /'
    fi
    hasnt "$out/broken.log" ":undef" "no undef crash"
    hasnt "$out/broken.log" "has not booted a target" "no 'has not booted a target'"
    (timeout 120 bin/compute eval 'case Plugboard.client() do {:error, e} -> IO.puts("client: error " <> Exception.message(e)); other -> IO.inspect(other, label: "client") end') > "$out/client.log" 2>&1
    has "$out/client.log" "client: error FAILED_PRECONDITION: cannot load $rel/$nif: " "Plugboard.client/0 returns the load error"
    has "$out/client.log" "libplugboard_test_missing.so.9" "which names the missing library"
    rm -f "$nif" && mv "$out/plugboard_nif.so.good" "$nif"
  fi

  [ $failures -eq 0 ] && { echo "PASS: [$suite] the release on a bare $suite root"; exit 0; }
  echo "FAIL: [$suite] $failures check(s) failed"; exit 1
fi

# --- on the host --------------------------------------------------------------------------------
rel_arg=${1:?usage: bare_host_test.sh RELEASE_DIR [SUITE...]}; shift
suites=("$@"); [ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie)
repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/tests/$(basename "$0")
# shellcheck source=../scripts/bare_root.sh
. "$repo/scripts/bare_root.sh"
now_ms() { date +%s%3N; }

[ "$(id -u)" -eq 0 ] || { echo "FAIL: bare_host_test.sh needs root (chroot, mount, debootstrap)"; exit 1; }
rel=$(cd "$rel_arg" 2> /dev/null && pwd) || { echo "FAIL: no release at $rel_arg"; exit 1; }
[ -x "$rel/bin/compute" ] || { echo "FAIL: $rel is not a built compute release (no bin/compute)"; exit 1; }
app=$(ls -d "$rel"/lib/plugboard-*/ 2> /dev/null | head -n 1); app=${app%/}
[ -f "$app/priv/lib/plugboard_nif.so" ] || { echo "FAIL: no plugboard NIF in $rel"; exit 1; }
bare_root_ensure_tool patchelf patchelf || { echo "FAIL: patchelf is needed"; exit 1; }

# The release's size, and each target's in its bundle.
echo "[bare_host] release $rel: $(du -sh "$rel" | cut -f1)"
if [ -f "$app/priv/bundle/plugboard.json" ]; then
  python3 - "$app/priv/bundle" <<'PY' || true
import json, os, subprocess, sys
b = sys.argv[1]
for t in json.load(open(os.path.join(b, "plugboard.json")))["targets"]:
    d = os.path.join(b, os.path.dirname(t["file"]))
    size = subprocess.run(["du", "-sh", d], capture_output=True, text=True).stdout.split()[0]
    print(f"[bare_host]   target {t['name']}: {size} ({os.path.relpath(d, b)}: {os.path.basename(t['file'])})")
PY
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bare-host.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$app/priv/lib/plugboard_nif.so" "$work/plugboard_nif.broken.so"
patchelf --add-needed libplugboard_test_missing.so.9 "$work/plugboard_nif.broken.so" ||
  { echo "FAIL: patchelf --add-needed on a copy of the NIF"; exit 1; }
# What the bundle's plugins need that this (the build) host lacks too: their device runtime.
: > "$work/device_runtime.tsv"
if [ -d "$app/priv/bundle/plugins" ]; then
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | tr -d '\000')" = "$(printf '\177ELF')" ] || continue
    LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 "$f" 2>&1 | awk -v f="${f#"$rel"/}" '/=> not found/ { print f "\t" $1 }'
  done < <(find "$app/priv/bundle/plugins" -type f -print0) >> "$work/device_runtime.tsv"
fi
broken_suite=${suites[0]}
for s in "${suites[@]}"; do [ "$s" = bookworm ] && broken_suite=bookworm; done

failed=()
for suite in "${suites[@]}"; do
  t0=$(now_ms)
  root=$(bare_root "$suite") || { echo "FAIL: [$suite] no bare root (see above)"; failed+=("$suite"); continue; }
  t1=$(now_ms)
  made=$(cat "$root.made" 2> /dev/null || echo "made before; time not recorded")
  echo "[bare_host] $suite root: $root ($made; ready in $((t1 - t0)) ms now)"
  extra=() args=(/opt/device_runtime.tsv)
  if [ "$suite" = "$broken_suite" ]; then extra=(--copy "$work/plugboard_nif.broken.so:plugboard_nif.broken.so"); args+=(/opt/plugboard_nif.broken.so); fi
  bare_run --timeout "${BARE_HOST_TIMEOUT:-1200}" --copy "$rel:compute" --copy "$self:bare_host_test.sh" \
    --copy "$work/device_runtime.tsv:device_runtime.tsv" "${extra[@]}" \
    --env CUDA_VISIBLE_DEVICES= --env HIP_VISIBLE_DEVICES= --env ROCR_VISIBLE_DEVICES= --env ERL_CRASH_DUMP_SECONDS=0 \
    --env PLUGBOARD_WITH_NX="${PLUGBOARD_WITH_NX:-0}" \
    "$suite" -- bash /opt/bare_host_test.sh --inside /opt/compute "$suite" "${args[@]}"
  rc=$?
  t2=$(now_ms)
  echo "[bare_host] $suite: $((t2 - t1)) ms (copying the release in, the checks, cleaning up)"
  [ $rc -eq 0 ] || failed+=("$suite")
done

if [ ${#failed[@]} -eq 0 ]; then echo "PASS: the compute release on bare ${suites[*]}"; else echo "FAIL: the compute release on bare ${failed[*]}"; exit 1; fi
