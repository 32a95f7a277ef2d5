# The checks of the sample's Axon job (Compute.AxonJob) on the log of a run of it, shared by
# tests/elixir_release_test.sh (the job in the release) and tests/sample_axon_job_test.sh (by mix run).
# Sourced; uses the caller's pass and fail.
#
#   check_axon_job_training LOG    a CNN trained: held-back loss below half, accuracy up to >= 0.5
check_axon_job_training() {
  local log=$1 axon l0 l1 a0 a1
  if axon=$(grep -o "axon: CNN on cpu .*held-back loss [0-9.e-]* -> [0-9.e-]*, accuracy [0-9.e-]* -> [0-9.e-]*" "$log"); then
    pass "the Axon job trained a CNN (${axon#axon: })"
    read -r l0 l1 a0 a1 <<< "$(sed -E 's/.*loss ([0-9.e-]+) -> ([0-9.e-]+), accuracy ([0-9.e-]+) -> ([0-9.e-]+)/\1 \2 \3 \4/' <<< "$axon")"
    awk -v a="$l0" -v b="$l1" 'BEGIN { exit !(b < a / 2) }' && pass "its held-back loss fell below half ($l0 -> $l1)" || fail "the Axon job's held-back loss did not halve: $l0 -> $l1"
    awk -v a="$a0" -v b="$a1" 'BEGIN { exit !(b > a && b >= 0.5) }' && pass "its held-back accuracy rose to at least 0.5 of 10 classes ($a0 -> $a1)" || fail "the Axon job's accuracy: $a0 -> $a1"
  else
    fail "no Axon job output in $log"; tail -n 20 "$log" | sed 's/^/    | /'
  fi
}
