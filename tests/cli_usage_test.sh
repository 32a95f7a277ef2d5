#!/usr/bin/env bash
# Usage errors exit 2, as the README documents (CLI11's own codes are 101-115), and say what is wrong.
#   cli_usage_test.sh PLUGBOARD
set -uo pipefail
pb=$1
fail=0
expect() {  # expect CODE PATTERN -- ARGS...
  local want=$1 pattern=$2; shift 3
  local out rc
  out=$("$pb" "$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL: plugboard $* exited $rc, expected $want: $out"; fail=1; return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL: plugboard $* did not say /$pattern/: $out"; fail=1; return; fi
  echo "ok: plugboard $* -> $rc"
}
expect 2 "subcommand"          -- 
expect 2 "subcommand|no-such-command" -- no-such-command
expect 2 "no-such-flag"        -- run --no-such-flag x.mlir
expect 2 "required|program"    -- run
expect 2 "plugin|required"     -- conform
expect 0 "Usage"               -- run --help
expect 0 "plugboard"           -- version
exit $fail
