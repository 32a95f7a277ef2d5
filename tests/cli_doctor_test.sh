#!/usr/bin/env bash
# `plugboard doctor` against hostile input (issue 11): a manifest whose platform holds a NUL or an escape
# sequence is refused naming the field, and nothing raw reaches the terminal; a --timeout-ms or a
# PLUGBOARD_ISOLATE_TIMEOUT_MS that is not a whole number of milliseconds is refused naming it.
#   cli_doctor_test.sh PLUGBOARD FAULT_PLUGIN WORKDIR
set -euo pipefail
pb=$1 fault=$2 work=$3
rm -rf "$work" && mkdir -p "$work/b/plugins"
export XDG_CACHE_HOME="$work/cache"
cp "$fault" "$work/b/plugins/p.so"
size=$(stat -c %s "$work/b/plugins/p.so")
sha=$(sha256sum "$work/b/plugins/p.so" | cut -d' ' -f1)
manifest() {  # PLATFORM (JSON-escaped)
  printf '{"schema": 1, "targets": [{"name": "a", "platform": "%s", "file": "plugins/p.so", "size": %s, "sha256": "%s"}]}' \
    "$1" "$size" "$sha" > "$work/b/plugboard.json"
}
expect() {  # EXIT_CODE PATTERN COMMAND...
  local want=$1 pattern=$2; shift 2
  set +e; "$@" > "$work/out" 2> "$work/err"; local rc=$?; set -e
  if [ "$rc" != "$want" ]; then echo "exit $rc, expected $want: $*" >&2; cat "$work/out" "$work/err" >&2; exit 1; fi
  grep -q -- "$pattern" "$work/err" || { echo "no '$pattern' in:" >&2; cat "$work/err" >&2; exit 1; }
  if LC_ALL=C grep -q -P '[\x00\x1b]' "$work/out" "$work/err"; then echo "a raw NUL or ESC was printed: $*" >&2; exit 1; fi
}
manifest 'cpu\u0000hidden'
expect 1 "targets\[0\].platform holds the control character NUL" "$pb" doctor --bundle "$work/b"
manifest 'cpu\u001b]0;pwned\u0007'
expect 1 "targets\[0\].platform holds the control character" "$pb" doctor --bundle "$work/b"
manifest cpu
for bad in -1 0 5s 1e3 abc 99999999999999999999; do
  expect 2 "--timeout-ms" "$pb" doctor --bundle "$work/b" --timeout-ms "$bad"
  expect 1 "PLUGBOARD_ISOLATE_TIMEOUT_MS" env PLUGBOARD_ISOLATE_TIMEOUT_MS="$bad" "$pb" doctor --bundle "$work/b"
done
grep -q "chosen: a" <<< "$("$pb" doctor --bundle "$work/b" --timeout-ms 5000)"
