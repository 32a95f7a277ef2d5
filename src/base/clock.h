// The one clock plugboard times its stages with (steady: never jumps with the wall clock), and the
// milliseconds elapsed since a point of it, as reports and traces print them.
#pragma once

#include <chrono>

namespace plugboard {

using Clock = std::chrono::steady_clock;

// Milliseconds (fractional) from `start` to now.
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace plugboard
