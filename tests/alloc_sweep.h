// Allocation-failure sweeps: a test binary linked with alloc_sweep.cpp can make the Nth allocation on
// the calling thread fail (std::bad_alloc), and sweep() calls an entry point with N = 1, 2, 3, ...
// until a call finishes without reaching its Nth allocation. Every one of those calls must return
// (an error value or a result), never throw.
#pragma once

#include <gtest/gtest.h>

#include <functional>

namespace plugboard::testing {

struct SweepResult {
  long calls = 0;
  long errors = 0;
};

// Ends the failing window: called by each sweep's call right after the entry point returns, so that
// the test's own checks never see a failed allocation.
void disarm();
// Arms the window again inside a call, after test-side work: the `n`th allocation from now fails.
void rearm(long n);

// Calls `call` with the 1st, 2nd, ... allocation failing until one run finishes without reaching the
// failing allocation; `call` returns whether it produced a value.
SweepResult sweep(const std::function<bool()>& call, long max_calls = 20000);

}  // namespace plugboard::testing
