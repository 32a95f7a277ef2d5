#!/usr/bin/env bash
# `plugboard bundle` and `plugboard fetch` given hostile command lines (issue 11): bad numbers are usage
# errors (exit 2) naming the flag, a bad target leaves a good bundle as it was, a file that is no PJRT
# plugin is refused, a FIFO in --from is refused without hanging, two runs on one bundle lose nothing.
#   cli_bundle_hostile_test.sh PLUGBOARD FAULT_PLUGIN OTHER_PLUGIN WORKDIR
set -uo pipefail
pb=$1 fault=$2 other=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME="$work/cache"
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN -- command...: exit status CODE and PATTERN in stderr.
expect() {
  local code=$1 pattern=$2; shift 3
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  [ "$rc" = "$code" ] || { cat "$work/err" >&2; fail "exit $rc (expected $code): $*"; }
  grep -q -- "$pattern" "$work/err" || { cat "$work/err" >&2; fail "no '$pattern' in stderr: $*"; }
}

# 1. Numbers: strict, the flag named, exit 2, nothing written.
expect 2 "--priority cpu" -- "$pb" bundle --target cpu="$fault" --out "$work/n" --priority cpu=abc
expect 2 "--priority cpu" -- "$pb" bundle --target cpu="$fault" --out "$work/n" --priority cpu=99999999999
expect 2 "--priority" -- "$pb" bundle --target cpu="$fault" --out "$work/n" --priority cpu=
expect 2 "--create-option cpu:k" -- "$pb" bundle --target cpu="$fault" --out "$work/n" --create-option cpu:k=99999999999999999999
expect 2 "NAME==VERSION" -- "$pb" fetch -- "--index-url=http://example.invalid"
[ ! -e "$work/n" ] || fail "a usage error wrote $work/n"
"$pb" bundle --target cpu="$fault" --out "$work/n" --priority cpu=-2147483648 --create-option cpu:k=-9223372036854775808 > /dev/null \
  || fail "the extremes of the ranges are valid"
grep -q '"priority": -2147483648' "$work/n/plugboard.json" || fail "priority not kept"
grep -q '"k": -9223372036854775808' "$work/n/plugboard.json" || fail "create option not kept"

# 2. A good bundle stays as it was whatever is wrong with the next run.
"$pb" bundle --target cpu="$fault" --out "$work/good" > /dev/null || fail "good bundle"
cp -a "$work/good" "$work/good.before"
expect 2 "bad name.*is not a valid target name" -- "$pb" bundle --target ok="$other" --target "bad name=$fault" --out "$work/good"
diff -r "$work/good" "$work/good.before" > /dev/null || fail "a bad target name changed the bundle"
echo "not a plugin" > "$work/notplugin.so"
expect 1 "notplugin.so is not a PJRT plugin" -- "$pb" bundle --target ok="$other" --target cpu="$work/notplugin.so" --out "$work/good"
diff -r "$work/good" "$work/good.before" > /dev/null || fail "a file that is no plugin changed the bundle"
expect 2 "given twice" -- "$pb" bundle --target a="$other" --target a="$fault" --out "$work/good"
diff -r "$work/good" "$work/good.before" > /dev/null || fail "a duplicate name changed the bundle"

# 3. A FIFO named like a wheel in --from: refused, not waited on.
mkdir -p "$work/wheels" && mkfifo "$work/wheels/fake_pjrt_plugin-1.0-py3-none-any.whl"
expect 1 "FIFO" -- timeout 60 "$pb" bundle --target x=fake-pjrt-plugin==1.0 --offline --from "$work/wheels" --out "$work/f" \
  --lock-file "$work/plugboard.lock"

# 4. Two runs on one bundle at once, five times: the lock makes them take turns, so both succeed and
#    both targets are there (a failure, even one that says why, is a regression).
for round in 1 2 3 4 5; do
  out="$work/same$round"
  "$pb" bundle --target a="$fault" --out "$out" > "$work/a.out" 2> "$work/a.err" & pa=$!
  "$pb" bundle --target b="$other" --out "$out" > "$work/b.out" 2> "$work/b.err" & pb_pid=$!
  wait $pa; ra=$?
  wait $pb_pid; rb=$?
  for t in a b; do
    r=$([ $t = a ] && echo $ra || echo $rb)
    [ "$r" = 0 ] || fail "round $round: target $t failed ($r): $(cat "$work/$t.err")"
    grep -q "\"name\": \"$t\"" "$out/plugboard.json" || fail "round $round: target $t exited 0 but is gone"
  done
done
echo ok
