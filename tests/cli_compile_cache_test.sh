#!/usr/bin/env bash
# The compile cache as a user meets it through the CLI: processes compiling the same program at once
# all succeed and leave one valid entry; the next run is a hit; a damaged entry is reported, replaced
# and found by `cache verify`; --no-compile-cache and PLUGBOARD_COMPILE_CACHE=off compile; a bad
# setting is named; a bundle built with --precompile runs without compiling, and doctor lists it.
#   cli_compile_cache_test.sh PLUGBOARD CPU_PLUGIN PROGRAM IN0 IN1 WORKDIR
set -euo pipefail
pb=$1 cpu=$2 program=$3 in0=$4 in1=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME="$work/xdg" PLUGBOARD_COMPILE_CACHE_DIR="$work/cache"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { "$pb" run "$program" --plugin "$cpu" -i "$in0" -i "$in1" "$@"; }

# 1. Four processes at once on an empty cache.
pids=()
for i in 1 2 3 4; do run > "$work/p$i.out" 2> "$work/p$i.err" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent run failed: $(cat "$work"/p*.err)"; done
for i in 1 2 3 4; do grep -q "^out0" "$work/p$i.out" || fail "run $i printed no output"; done
"$pb" cache verify > "$work/verify1.txt" || fail "verify after concurrent writers: $(cat "$work/verify1.txt")"
grep -q "^1 entries, 0 bad" "$work/verify1.txt" || fail "expected one valid entry: $(cat "$work/verify1.txt")"
[ "$(find "$work/cache" -type f | wc -l)" -eq 1 ] || fail "temporary files left: $(find "$work/cache" -type f)"

# 2. The next run is a hit; --no-compile-cache and PLUGBOARD_COMPILE_CACHE=off compile.
grep -q "compile-cache hit (loaded in" <<< "$(run)" || fail "the fifth run was not a hit"
grep -q "compiled in" <<< "$(run --no-compile-cache)" || fail "--no-compile-cache did not compile"
grep -q "compiled in" <<< "$(PLUGBOARD_COMPILE_CACHE=off run)" || fail "PLUGBOARD_COMPILE_CACHE=off did not compile"
if PLUGBOARD_COMPILE_CACHE=sometimes run 2> "$work/bad.err"; then fail "a bad PLUGBOARD_COMPILE_CACHE was accepted"; fi
grep -q "PLUGBOARD_COMPILE_CACHE='sometimes'" "$work/bad.err" || fail "the bad setting is not named: $(cat "$work/bad.err")"
grep -q "1 entries" <<< "$("$pb" cache stats)" || fail "cache stats"

# 3. A damaged entry: verify finds it (exit 1), a run reports and replaces it, then it is a hit again.
entry=$(find "$work/cache" -name '*.pbx')
printf 'XXXX' | dd of="$entry" bs=1 seek=200 conv=notrunc status=none
if "$pb" cache verify > "$work/verify2.txt"; then fail "verify passed a damaged entry"; fi
grep -q "^BAD .*corrupt" "$work/verify2.txt" || fail "verify did not name the damage: $(cat "$work/verify2.txt")"
run > "$work/repair.out" 2> "$work/repair.err"
grep -q "compiled in" "$work/repair.out" || fail "a damaged entry was used"
grep -q "plugboard: note: compile cache: .*corrupt" "$work/repair.err" || fail "the damage was not reported: $(cat "$work/repair.err")"
grep -q "compile-cache hit" <<< "$(run)" || fail "the replaced entry is not a hit"
grep -q "removed 1 entries" <<< "$("$pb" cache clear)" || fail "cache clear"

# 4. A bundle with the program precompiled: run from it without compiling (the cache off), doctor lists it.
"$pb" bundle --out "$work/b" --target cpu="$cpu" --precompile "$program" > "$work/bundle.out"
grep -q "precompiled for cpu: $program" "$work/bundle.out" || fail "bundle --precompile: $(cat "$work/bundle.out")"
grep -q "precompiled in the bundle" <<< "$(PLUGBOARD_COMPILE_CACHE=off "$pb" run "$program" --bundle "$work/b" -i "$in0" -i "$in1")" \
  || fail "the bundle's precompiled program was not used"
grep -q "cpu .*$(basename "$program")  ok" <<< "$("$pb" doctor --bundle "$work/b")" || fail "doctor does not list the precompiled program"
# Tampered: refused by the manifest's sha256, compiled instead, the refusal said.
pbx=$(find "$work/b/compiled" -name '*.pbx')
printf 'Y' | dd of="$pbx" bs=1 seek=100 conv=notrunc status=none
PLUGBOARD_COMPILE_CACHE=off "$pb" run "$program" --bundle "$work/b" -i "$in0" -i "$in1" > "$work/tampered.out" 2> "$work/tampered.err"
grep -q "compiled in" "$work/tampered.out" || fail "a tampered precompiled entry was used"
grep -q "note: .*precompiled entry .* the manifest says" "$work/tampered.err" || fail "the refusal is not reported: $(cat "$work/tampered.err")"
grep -q "REFUSED" <<< "$("$pb" doctor --bundle "$work/b")" || fail "doctor does not show the tampered entry"
echo "PASS: compile cache through the CLI"
