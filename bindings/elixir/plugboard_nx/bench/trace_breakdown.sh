#!/usr/bin/env bash
# Where a call's time goes, from traces (bench/trace_breakdown.exs), on each CPU plugin, with the
# environment the tests use (bench/env.sh). PLUGBOARD_TRACE_OUT=dir keeps the traces.
set -euo pipefail
. "$(dirname "$0")/env.sh"
each_plugin bench/trace_breakdown.exs
