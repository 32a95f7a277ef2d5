#!/usr/bin/env bash
# Issue 24's figures, per CPU plugin (bench/parked.exs): compile latency on an idle client with 0
# and with 1000 executions parked in unanswered host callbacks, and a 2 s while loop's long_schedule
# events (count, max ms) in the process that ran it.
#
#   bindings/elixir/plugboard/bench/parked.sh [BUILD_DIR]      (after scripts/setup.sh)
exec "$(dirname "$0")/each_plugin.sh" parked.exs "$@"
