#!/usr/bin/env bash
# `plugboard run` against hostile input (issue 11): devices and FIFOs as inputs or programs are refused
# at once with their kind named (never read to EOF, never a hang), a program nested 20,000 deep is
# refused before the plugin sees it (no SIGSEGV), numeric flags parse strictly and are usage errors
# (exit 2) naming the flag, XLA options are typed by their declared type.
#   cli_run_hostile_test.sh PLUGBOARD PLUGIN CASES_DIR WORKDIR
set -uo pipefail
pb=$1 plugin=$2 cases=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
program="$cases/add_f32/program.mlir" in0="$cases/add_f32/in0.npy" in1="$cases/add_f32/in1.npy"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect RC PATTERN -- ARGS...: runs `plugboard ARGS...` (at most 60 s) and checks its exit code and that
# stderr matches PATTERN.
expect() {
  local want_rc=$1 pattern=$2
  shift 3
  timeout 60 "$pb" "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  if [[ $rc -ne $want_rc ]]; then
    fail "plugboard $* exited $rc, expected $want_rc"; sed 's/^/    /' "$work/err.txt" | grep -v '^    [IW]0' >&2
    return
  fi
  if [[ -n $pattern ]] && ! grep -Eq -- "$pattern" "$work/err.txt"; then
    fail "plugboard $*: stderr does not match /$pattern/"; sed 's/^/    /' "$work/err.txt" >&2
  fi
}

# Inputs and programs that are not regular files.
mkfifo "$work/fifo.npy" "$work/fifo.mlir"
expect 1 '/dev/zero: it is a character device' -- run "$program" --plugin "$plugin" -i /dev/zero -i "$in1"
expect 1 '/dev/urandom: it is a character device' -- run "$program" --plugin "$plugin" -i "$in0" -i /dev/urandom
expect 1 'fifo.npy: it is a FIFO' -- run "$program" --plugin "$plugin" -i "$in0" -i "$work/fifo.npy"
expect 1 'fifo.mlir: it is a FIFO' -- run "$work/fifo.mlir" --plugin "$plugin" -i "$in0" -i "$in1"
expect 1 '/dev/zero: it is a character device' -- run /dev/zero --plugin "$plugin" -i "$in0" -i "$in1"

# A header that claims more data than the file has, and trailing junk after the data.
head -c 128 "$in0" > "$work/short.npy"
expect 1 'short.npy: data truncated' -- run "$program" --plugin "$plugin" -i "$work/short.npy" -i "$in1"
{ cat "$in0"; printf 'junk'; } > "$work/junk.npy"
expect 1 'junk.npy: trailing bytes after the data' -- run "$program" --plugin "$plugin" -i "$work/junk.npy" -i "$in1"

# 20,000 '[' deep: a SIGSEGV in the plugin's parser before; now refused by name.
deep=$(printf '[%.0s' $(seq 20000))1$(printf ']%.0s' $(seq 20000))
printf 'module @deep attributes {pb.deep = %s} {\n  func.func public @main(%%a: tensor<4xf32>) -> tensor<4xf32> {\n    return %%a : tensor<4xf32>\n  }\n}\n' "$deep" > "$work/deep.mlir"
expect 1 'deep.mlir: nesting deeper than 256 levels at line 1' -- run "$work/deep.mlir" --plugin "$plugin" -i "$in0"

# Numbers on the command line: the whole text, in range, or a usage error naming the flag.
expect 2 "--donate: 'abc' is not an integer" -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --donate abc
expect 2 '--donate: -1 is out of range' -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --donate -1
expect 2 "--donate: '1x' is not an integer" -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --donate 1x
expect 2 "--print-limit: '-1' is not a non-negative integer" -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --print-limit -1
expect 2 '--print-limit: 99999999999999999999 is out of range' -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --print-limit 99999999999999999999
expect 0 '' -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --print-limit 0

# XLA options typed by their declared type: a string option with a number-like value reaches the plugin,
# a value that does not parse as the declared type is a usage error naming the option.
expect 0 '' -- run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --xla-option xla_dump_hlo_module_re=123
expect 2 "XLA option xla_backend_optimization_level: 'abc' is not an integer" -- \
  run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --xla-option xla_backend_optimization_level=abc
expect 2 "XLA option xla_cpu_enable_fast_min_max: '1' is not true or false" -- \
  run "$program" --plugin "$plugin" -i "$in0" -i "$in1" --xla-option xla_cpu_enable_fast_min_max=1

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
