#!/usr/bin/env bash
# End to end: the sample umbrella's `compute` release (bindings/elixir/sample) built with
# Plugboard.Release.embed/1 (cpu + cuda13 + rocm7 from the wheels folder, offline, plus a fault target
# from PLUGBOARD_EXTRA_TARGETS), then booted and run from inside the release:
#   - the boot chooses cpu, and the report says why not cuda13, rocm7 and the fault target;
#   - the demo runs a program with the print hook and a blocking Elixir host callback (real values),
#     and with Nx and Axon: an MLP and an Axon CNN trained on the target, the CNN saved, read back and
#     served through a named Nx.Serving that batches concurrent requests;
#   - PLUGBOARD_TARGET=cuda13 and PLUGBOARD_TARGET=nosuch fail the boot loudly (non-zero exit, reason);
#   - the booted release considers only its bundle: PLUGBOARD_PLUGIN_PATH / PJRT_NAMES_AND_LIBRARY_PATHS
#     add no candidate (issue 24);
#   - precompiled programs built on another processor (the manifest's built_on, edited) are named in
#     the boot log with the reason;
#   - a rebuild that fails after `mix release` recopied the app (no bundle left) gives a release that
#     does not boot (non-zero exit, the reason in the log);
#   - a tampered plugin file in the release is refused at boot;
#   - an unknown package, a wheel whose hash does not match the lock, and no network fail the build
#     with the target named and the CLI's error;
#   - a second build extracts nothing (every plugin from the cache) and leaves the lock as it was.
#   elixir_release_test.sh WORKDIR      (env: PLUGBOARD_PREFIX, PLUGBOARD_DEPS_DIR, PLUGBOARD_FAULT_PLUGIN;
#                                        PLUGBOARD_WITH_NX=1 when Nx can be had from Hex: the Nx and
#                                        Axon jobs are then built and checked)
set -uo pipefail

work=${1:?usage: elixir_release_test.sh WORKDIR}
: "${PLUGBOARD_PREFIX:?an installed plugboard (cmake --install BUILD --prefix P)}"
: "${PLUGBOARD_DEPS_DIR:?the deps folder scripts/setup.sh fills (wheels in \$PLUGBOARD_DEPS_DIR/wheels)}"
: "${PLUGBOARD_FAULT_PLUGIN:?the fault plugin whose PJRT_Plugin_Initialize fails (libfault_init_error.so)}"
repo=$(cd "$(dirname "$0")/.." && pwd)
sample=$repo/bindings/elixir/sample
wheels=$PLUGBOARD_DEPS_DIR/wheels

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
. "$(dirname "$0")/axon_job_checks.sh"
# has FILE TEXT WHAT: FILE contains the fixed string TEXT.
has() { if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3 (no '$2' in $1)"; tail -n 30 "$1" | sed 's/^/    | /'; fi; }
hasnt() { if grep -qF -- "$2" "$1"; then fail "$3 ('$2' in $1)"; else pass "$3"; fi; }
# line FILE TEXT: the number of the first line of FILE holding TEXT (0 if none).
line() { grep -nF -- "$2" "$1" | head -n 1 | cut -d: -f1 | grep . || echo 0; }
now_ms() { date +%s%3N; }

command -v mix > /dev/null || { echo "FAIL: mix (Elixir) is not installed"; exit 1; }
[ -x "$PLUGBOARD_PREFIX/bin/plugboard" ] || { echo "FAIL: $PLUGBOARD_PREFIX/bin/plugboard is missing"; exit 1; }
[ -f "$PLUGBOARD_FAULT_PLUGIN" ] || { echo "FAIL: $PLUGBOARD_FAULT_PLUGIN is missing"; exit 1; }
for w in xla_cpu_pjrt-0.0.1 jax_cuda13_pjrt-0.12.0.1 jax_rocm7_pjrt-0.12.0; do
  compgen -G "$wheels/$w-*.whl" > /dev/null || { echo "FAIL: no $w wheel in $wheels (run scripts/setup.sh)"; exit 1; }
done

rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
export MIX_ENV=prod MIX_BUILD_ROOT=$work/_build XDG_CACHE_HOME=$work/cache PLUGBOARD_WHEELS=$wheels
export PLUGBOARD_EXTRA_TARGETS="fault=$PLUGBOARD_FAULT_PLUGIN" ERL_CRASH_DUMP_SECONDS=0
unset PLUGBOARD_TARGET PLUGBOARD_TARGETS PLUGBOARD_PLUGIN_PATH PJRT_NAMES_AND_LIBRARY_PATHS PLUGBOARD_PROBES
# On a machine with GPUs the expectations below (cpu chosen, cuda13 refused) hold with the devices hidden.
if compgen -G "/dev/nvidia[0-9]*" > /dev/null || [ -e /dev/kfd ]; then
  export CUDA_VISIBLE_DEVICES="" HIP_VISIBLE_DEVICES="" ROCR_VISIBLE_DEVICES=""
fi
rel=$MIX_BUILD_ROOT/prod/rel/compute
lock=$sample/plugboard.lock
[ -f "$lock" ] && cp "$lock" "$work/lock.before"

# The sample's Hex dependencies (:telemetry; Nx and Axon with PLUGBOARD_WITH_NX: plain requirements,
# from the Hex repository MIX_HOME's Hex is pointed at).
(cd "$sample" && mix deps.get) > "$work/deps.log" 2>&1 || { echo "FAIL: mix deps.get in the sample"; tail -n 20 "$work/deps.log"; exit 1; }

build() {  # build LOG [ENV=VALUE...]: the compute release; the exit status of mix
  local log=$1; shift
  (cd "$sample" && env "$@" mix release compute --overwrite) > "$log" 2>&1
}

# --- 1. the first build: every plugin extracted from its wheel into the (empty) cache -------------
t0=$(now_ms)
build "$work/build1.log"; rc=$?
t1=$(now_ms)
if [ $rc -eq 0 ]; then pass "first release build (offline from $wheels, $((t1 - t0)) ms)"; else
  fail "first release build exited $rc"; tail -n 40 "$work/build1.log" | sed 's/^/    | /'
  echo "FAIL: $failures check(s) failed"; exit 1
fi
app=$(ls -d "$rel"/lib/plugboard-*/ 2> /dev/null | head -n 1)
bundle=${app%/}/priv/bundle
has "$work/build1.log" "bundle $bundle: 4 target(s)" "the bundle is laid out in the release's plugboard app (4 targets)"
[ -f "$bundle/plugboard.json" ] && pass "manifest at ${bundle#"$work"/}/plugboard.json" || fail "no manifest in $bundle"
for t in '"name": "cpu"' '"name": "cuda13"' '"name": "rocm7"' '"name": "fault"' 'CUDA callback bridge'; do
  has "$bundle/plugboard.json" "$t" "manifest holds $t"
done
if compgen -G "$bundle/plugins/*/libplugboard_cuda_bridge.so" > /dev/null; then pass "the CUDA callback bridge ships beside the cuda13 plugin"; else fail "no CUDA bridge in $bundle/plugins"; fi
for p in xla-cpu-pjrt==0.0.1 jax-cuda13-pjrt==0.12.0.1 jax-rocm7-pjrt==0.12.0; do
  if grep -F "plugboard: $p " "$work/build1.log" | grep -qvF "(cached)"; then pass "first build extracted $p into the cache"; else fail "first build: no fresh fetch line for $p"; fi
done
if [ -f "$work/lock.before" ] && cmp -s "$lock" "$work/lock.before"; then pass "the sample's plugboard.lock is enforced and left unchanged"; else fail "plugboard.lock changed or is missing"; fi

# --- 2. the default boot: cpu chosen, the report says why not the others; the demo -------------------
(cd "$rel" && COMPUTE_MODEL_DIR=$work timeout 300 bin/compute eval 'Compute.Demo.main()') > "$work/demo.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "bin/compute eval 'Compute.Demo.main()' exits 0" || fail "the demo exited $rc"
has "$work/demo.log" "chosen: cpu (" "the boot chose cpu"
has "$work/demo.log" "policy: priority (accelerators before CPU)" "by the manifest's priorities"
has "$work/demo.log" "cuda13 [cuda]  failed at probed" "report: cuda13 ruled out by its probe"
has "$work/demo.log" "reason: UNAVAILABLE: cuda probe:" "report: the cuda probe's reason"
has "$work/demo.log" "rocm7 [rocm]  failed at probed" "report: rocm7 ruled out by its probe"
has "$work/demo.log" "reason: UNAVAILABLE: rocm probe:" "report: the rocm probe's reason"
has "$work/demo.log" "fault [unknown]  not tried" "report: fault not tried (priority 0, below the chosen cpu)"
has "$work/demo.log" "compute: running on target cpu (cpu, $bundle/plugins/" "the demo runs on the embedded cpu plugin"
x='print: plugboard.print x: f32[2,4] [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, 0.25]'
cb='host_scale: called in #PID<'
cbx='(the running process) with f32[2,4] [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, 0.25]'
sx='print: plugboard.print host_scale(x): f32[2,4] [3.0, 6.0, 9.0, 12.0, -3.0, -6.0, 1.5, 0.75]'
result='result: f32[2,4] [4.0, 8.0, 12.0, 16.0, -4.0, -8.0, 2.0, 1.0]'
has "$work/demo.log" "$x" "print hook: x as the program saw it"
has "$work/demo.log" "$cbx" "blocking callback: the Elixir function ran in the running process on x"
has "$work/demo.log" "$sx" "print hook: host_scale(x) = 3x"
has "$work/demo.log" "$result" "result: host_scale(x) + x = 4x"
a=$(line "$work/demo.log" "$x") b=$(line "$work/demo.log" "$cb") c=$(line "$work/demo.log" "$sx") d=$(line "$work/demo.log" "$result")
if [ "$a" -gt 0 ] && [ "$a" -lt "$b" ] && [ "$b" -lt "$c" ] && [ "$c" -lt "$d" ]; then pass "program order: print x, host_scale, print host_scale(x), result"; else fail "order of the demo's lines: $a $b $c $d"; fi
# The model precompiled into the bundle (precompile: in the sample's mix.exs): loaded, not compiled.
has "$work/build1.log" "precompiled for cpu: apps/compute/programs/model.mlir" "release build: model.mlir precompiled for cpu"
has "$work/build1.log" "precompiled for cuda13: apps/compute/programs/model.mlir" "release build: model.mlir precompiled for cuda13 (no GPU here)"
has "$work/build1.log" "not precompiled for rocm7" "release build: rocm7 not precompiled, with the reason"
has "$work/demo.log" "model.mlir: precompiled in the bundle (loaded in" "the release's first request of model.mlir runs without compiling"
has "$work/demo.log" "model: f32[2,3] [16.5, 20.0, 23.5, 0.0, 0.0, 0.0]" "model: relu(x·w + b) computed"
# The Nx job (built when Nx is available from Hex): an MLP trained on the target.
if [ "${PLUGBOARD_WITH_NX:-0}" = 1 ]; then
  if loss=$(grep -o "nx: MLP on Plugboard.Nx.Backend: loss [0-9.e-]* -> [0-9.e-]*" "$work/demo.log"); then
    pass "the Nx job ran in the release ($loss)"
    awk '{ if ($(NF-2) + 0 > $NF + 0) exit 0; exit 1 }' <<< "$loss" && pass "the Nx job's loss went down" || fail "the Nx job's loss did not go down: $loss"
  else
    fail "no Nx job output in the demo"; tail -n 20 "$work/demo.log" | sed 's/^/    | /'
  fi
  # The Axon job: a CNN trained with Axon.Loop on the booted target, evaluated on held-back data,
  # saved, read back and served through a named Nx.Serving that batches concurrent requests.
  check_axon_job_training "$work/demo.log"
  [ -s "$work/digits_cnn.nx" ] && pass "the trained parameters were saved (COMPUTE_MODEL_DIR/digits_cnn.nx, $(stat -c %s "$work/digits_cnn.nx") bytes)" || fail "no saved parameters in $work/digits_cnn.nx"
  has "$work/demo.log" "and read back" "the saved parameters were read back"
  if served=$(grep -o "Compute.Digits answered 64 concurrent requests in [0-9]* batches (batch_size 16, 64 images); answers equal the direct prediction: true" "$work/demo.log"); then
    n=$(awk '{ print $7 }' <<< "$served")
    [ "$n" -lt 64 ] && pass "Nx.Serving batched 64 concurrent requests into $n batches, answers equal to the direct prediction" || fail "Nx.Serving did not batch: $served"
  else
    fail "the named serving's answers are missing or differ from the direct prediction"; grep "Compute.Digits" "$work/demo.log" | sed 's/^/    | /'
  fi
fi

# A preference that falls back: the fault target is tried first, fails at initialize, cpu runs.
(cd "$rel" && PLUGBOARD_TARGETS=fault,cpu COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/prefer.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "PLUGBOARD_TARGETS=fault,cpu bin/compute start runs the demo and halts 0" || fail "PLUGBOARD_TARGETS=fault,cpu exited $rc"
has "$work/prefer.log" "fault [unknown]  failed at initialized" "report: fault failed at initialize"
has "$work/prefer.log" "PJRT_Plugin_Initialize fails on purpose" "report: with the plugin's own error"
has "$work/prefer.log" "plugboard: skipped fault [unknown] failed at initialized" "the fallback is logged"
has "$work/prefer.log" "$result" "and cpu ran the program"

# Precompiled programs built on another processor: the manifest's built_on says so, the boot log says why.
cp "$bundle/plugboard.json" "$work/manifest.saved"
python3 - "$bundle/plugboard.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for t in m["targets"]:
    for p in t.get("precompiled", []):
        b = p.get("built_on", {})
        if b.get("cpu_digest"):
            b.update(cpu="Test CPU 9000", cpu_digest="0" * 64, cpu_flags="avx9000 " + b.get("cpu_flags", ""))
json.dump(m, open(sys.argv[1], "w"), indent=2)
PY
(cd "$rel" && COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/othercpu.log" 2>&1; rc=$?
cp "$work/manifest.saved" "$bundle/plugboard.json"
[ $rc -eq 0 ] && pass "precompiled for another processor: the release still boots and runs" || fail "othercpu: exited $rc"
has "$work/othercpu.log" "1 of 1 precompiled program of target cpu will not load on this host" "othercpu: the boot log says the precompiled programs do not match"
has "$work/othercpu.log" 'built on "Test CPU 9000", this host is "' "othercpu: and names both processors"
has "$work/othercpu.log" "features there, not here: avx9000" "othercpu: with the features that differ"
# (Only the record was edited: the entry's key is this host's, so the model still loads from the bundle.)

# --- 3. boots that must fail loudly ----------------------------------------------------------------
(cd "$rel" && PLUGBOARD_TARGET=cuda13 COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/cuda13.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "PLUGBOARD_TARGET=cuda13 bin/compute start fails (exit $rc)"; else fail "PLUGBOARD_TARGET=cuda13 exited $rc"; fi
has "$work/cuda13.log" "no target could start (explicit target cuda13" "cuda13: the explicit target is named"
has "$work/cuda13.log" "no target started (PLUGBOARD_TARGET=cuda13)" "cuda13: the log names PLUGBOARD_TARGET"
has "$work/cuda13.log" "cuda13: probed: UNAVAILABLE: cuda probe:" "cuda13: the reason is in the output"
has "$work/cuda13.log" "application_start_failure,plugboard" "cuda13: the :plugboard application did not start"
hasnt "$work/cuda13.log" "result:" "cuda13: nothing ran"
[ -e "$rel/erl_crash.dump" ] && fail "a crash dump was written" || pass "no erl_crash.dump (ERL_CRASH_DUMP_SECONDS=0)"

(cd "$rel" && PLUGBOARD_TARGET=nosuch timeout 120 bin/compute start) > "$work/nosuch.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "PLUGBOARD_TARGET=nosuch bin/compute start fails (exit $rc)"; else fail "PLUGBOARD_TARGET=nosuch exited $rc"; fi
has "$work/nosuch.log" "the candidates are: cpu, cuda13, rocm7, fault" "nosuch: the embedded targets are listed"
has "$work/nosuch.log" "no candidate is named nosuch" "nosuch: the name is given"

# The environment adds no candidate to a booted release (its bundle only, unless use_environment: true).
outside="PLUGBOARD_PLUGIN_PATH=$PLUGBOARD_FAULT_PLUGIN PJRT_NAMES_AND_LIBRARY_PATHS=evil:$PLUGBOARD_FAULT_PLUGIN"
(cd "$rel" && env $outside PLUGBOARD_TARGET=evil timeout 120 bin/compute start) > "$work/evil.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "PLUGBOARD_TARGET=evil (a PJRT_NAMES_AND_LIBRARY_PATHS plugin) fails (exit $rc)"; else fail "PLUGBOARD_TARGET=evil exited $rc"; fi
has "$work/evil.log" "the candidates are: cpu, cuda13, rocm7, fault" "evil: only the bundle's targets are candidates"
(cd "$rel" && env $outside COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/outside.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "with plugins in the environment the release boots its bundle's cpu" || fail "outside: exited $rc"
has "$work/outside.log" "chosen: cpu (" "outside: cpu chosen"
hasnt "$work/outside.log" "PJRT_NAMES_AND_LIBRARY_PATHS" "outside: no candidate from PJRT_NAMES_AND_LIBRARY_PATHS"
hasnt "$work/outside.log" "from PLUGBOARD_PLUGIN_PATH" "outside: no candidate from PLUGBOARD_PLUGIN_PATH"

# A plugin changed in the release (a copy with one byte flipped put in its place: the cache's file,
# which the bundle may share by hard link, stays as it was).
cpu_plugin=$(ls "$bundle"/plugins/*/xla_cpu_pjrt.so)
cp "$cpu_plugin" "$cpu_plugin.tmp" && python3 - "$cpu_plugin.tmp" <<'PY' && mv "$cpu_plugin.tmp" "$cpu_plugin"
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1 << 20); b = f.read(1); f.seek(1 << 20); f.write(bytes([b[0] ^ 0xFF]))
PY
(cd "$rel" && COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/tamper.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "a tampered cpu plugin: the boot fails (exit $rc)"; else fail "tampered plugin: exited $rc"; fi
has "$work/tamper.log" "cpu: verified: DATA_LOSS: $cpu_plugin has sha256" "tampered: refused at the verified stage, file named"
has "$work/tamper.log" "the file was changed; refusing to load it" "tampered: never loaded"
hasnt "$work/tamper.log" "result:" "tampered: nothing ran"
cached_cpu=$(ls "$XDG_CACHE_HOME"/plugboard/plugins/88c3f28c*/xla_cpu_pjrt.so)
if [ "$(sha256sum < "$cached_cpu" | cut -c1-64)" = "$(basename "$(dirname "$cached_cpu")")" ]; then pass "the cache's copy is intact"; else fail "the cache's cpu plugin changed"; fi

# --- 4. builds that must fail, naming the target and carrying the CLI's error -----------------------
build "$work/unknown.log" PLUGBOARD_EXTRA_TARGETS="bogus=no-such-pjrt==1.0"; rc=$?
[ $rc -ne 0 ] && pass "unknown package: the build fails (exit $rc)" || fail "unknown package: the build succeeded"
has "$work/unknown.log" "cannot embed target(s) bogus (no-such-pjrt==1.0)" "unknown package: the target is named"
has "$work/unknown.log" "NOT_FOUND: no wheel of no-such-pjrt==1.0 in $wheels" "unknown package: the CLI's error"
# mix recopied lib/plugboard-VSN/ (the old bundle with it) before the step failed: the release must not
# boot quietly without its targets.
[ -f "$bundle/plugboard.json" ] && fail "the failed build left a bundle (expected none after mix's recopy)" || pass "the failed build left no bundle"
[ -f "$app/priv/bundle.required" ] && pass "the release is marked as needing its bundle (priv/bundle.required)" || fail "no priv/bundle.required in $app"
(cd "$rel" && COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/nobundle.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then pass "a release without its bundle fails its boot (exit $rc)"; else fail "no bundle: exited $rc"; fi
has "$work/nobundle.log" "this release expects its bundle at $bundle" "no bundle: the reason is in the log"
has "$work/nobundle.log" "application_start_failure,plugboard" "no bundle: the :plugboard application did not start"
hasnt "$work/nobundle.log" "result:" "no bundle: nothing ran"

mkdir -p "$work/badwheels"
for w in "$wheels"/*.whl; do ln -s "$w" "$work/badwheels/"; done
cpu_wheel=$(ls "$wheels"/xla_cpu_pjrt-0.0.1-*.whl)
rm "$work/badwheels/$(basename "$cpu_wheel")" && cp "$cpu_wheel" "$work/badwheels/" && printf 'x' >> "$work/badwheels/$(basename "$cpu_wheel")"
build "$work/mismatch.log" PLUGBOARD_WHEELS="$work/badwheels"; rc=$?
[ $rc -ne 0 ] && pass "wheel hash mismatch: the build fails (exit $rc)" || fail "wheel hash mismatch: the build succeeded"
has "$work/mismatch.log" "cannot embed target(s) cpu (xla-cpu-pjrt==0.0.1)" "hash mismatch: the target is named"
has "$work/mismatch.log" "DATA_LOSS: xla-cpu-pjrt==0.0.1: the sha256 of wheel $work/badwheels/" "hash mismatch: the CLI's error"
has "$work/mismatch.log" "does not match $lock" "hash mismatch: against the lock"

# No network: pip (online, an empty cache) reaches no index.
build "$work/offline.log" PLUGBOARD_WHEELS= XDG_CACHE_HOME="$work/cache-empty" PIP_INDEX_URL=http://127.0.0.1:9/simple \
  PIP_FIND_LINKS= PIP_RETRIES=0 PIP_DEFAULT_TIMEOUT=5 PIP_CONFIG_FILE=/dev/null; rc=$?
[ $rc -ne 0 ] && pass "no network: the build fails (exit $rc)" || fail "no network: the build succeeded"
has "$work/offline.log" "cannot embed target(s) cpu (xla-cpu-pjrt==0.0.1)" "no network: the target is named"
has "$work/offline.log" "pip could not download xla-cpu-pjrt==0.0.1" "no network: the CLI's error"
if cmp -s "$lock" "$work/lock.before"; then pass "failed builds left plugboard.lock unchanged"; else fail "a failed build changed plugboard.lock"; fi

# --- 5. the second build: nothing fetched or extracted, the release boots again -------------------
ls -i "$XDG_CACHE_HOME"/plugboard/plugins/*/* | sort > "$work/cache.before"
t0=$(now_ms)
build "$work/build2.log"; rc=$?
t1=$(now_ms)
[ $rc -eq 0 ] && pass "second release build ($((t1 - t0)) ms)" || { fail "second build exited $rc"; tail -n 30 "$work/build2.log" | sed 's/^/    | /'; }
n=$(grep -cE '^plugboard: (xla-cpu-pjrt|jax-cuda13-pjrt|jax-rocm7-pjrt)==.*\(cached\)$' "$work/build2.log")
[ "$n" -eq 3 ] && pass "second build: all 3 plugins from the cache (nothing extracted)" || fail "second build: $n of 3 plugins from the cache"
ls -i "$XDG_CACHE_HOME"/plugboard/plugins/*/* | sort > "$work/cache.after"
cmp -s "$work/cache.before" "$work/cache.after" && pass "second build: the cache is as it was" || fail "second build changed the cache"
cmp -s "$lock" "$work/lock.before" && pass "second build: plugboard.lock unchanged" || fail "second build changed plugboard.lock"
(cd "$rel" && COMPUTE_DEMO=1 timeout 120 bin/compute start) > "$work/demo2.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "the rebuilt release boots and runs the demo" || fail "rebuilt release exited $rc"
has "$work/demo2.log" "$result" "rebuilt release: the result"

# --- 6. the other releases of the umbrella carry no plugin -----------------------------------------
(cd "$sample" && mix release web --overwrite) > "$work/web.log" 2>&1 && (cd "$MIX_BUILD_ROOT/prod/rel/web" && bin/web eval 'IO.puts(Web.hello())') > "$work/web.out" 2>&1
has "$work/web.out" "web up" "the web release runs"
# With Nx, web carries plugboard_nx (and so plugboard) for its cluster client, but never a plugin.
compgen -G "$MIX_BUILD_ROOT/prod/rel/web/lib/plugboard-*/priv/bundle" > /dev/null && fail "the web release carries a bundle" || pass "the web release carries no bundle"
if [ "${PLUGBOARD_WITH_NX:-0}" = 1 ]; then
  compgen -G "$MIX_BUILD_ROOT/prod/rel/web/lib/plugboard_nx-*" > /dev/null && pass "the web release carries the cluster client (plugboard_nx)" || fail "the web release lacks plugboard_nx"
else
  compgen -G "$MIX_BUILD_ROOT/prod/rel/web/lib/plugboard-*" > /dev/null && fail "the web release carries plugboard without Nx" || pass "the web release carries no plugboard (built without Nx)"
fi

[ -f "$work/lock.before" ] && ! cmp -s "$lock" "$work/lock.before" && cp "$work/lock.before" "$lock"
if [ $failures -eq 0 ]; then echo "PASS: elixir release end to end"; else echo "FAIL: $failures check(s) failed"; exit 1; fi
