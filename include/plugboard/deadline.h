/// \file
/// Deadline arithmetic that cannot overflow: a timeout is whatever int64 milliseconds a plugin passes
/// (PJRT's timeout_in_ms, INT64_MAX for "forever" included), and adding to it, or turning it into a
/// steady_clock time point (nanoseconds), must saturate rather than wrap to a time in the past.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>

namespace plugboard {

/// a + b, clamped to milliseconds' range.
constexpr std::chrono::milliseconds saturating_add(std::chrono::milliseconds a, std::chrono::milliseconds b) noexcept {
  using Rep = std::chrono::milliseconds::rep;
  Rep sum;
  if (__builtin_add_overflow(a.count(), b.count(), &sum))
    return std::chrono::milliseconds(b.count() > 0 ? std::numeric_limits<Rep>::max() : std::numeric_limits<Rep>::min());
  return std::chrono::milliseconds(sum);
}

/// The steady_clock time `timeout` after `now` (a negative timeout is `now`), or nullopt when that
/// lies beyond what the clock can represent: wait without a deadline then.
inline std::optional<std::chrono::steady_clock::time_point> deadline_after(std::chrono::steady_clock::time_point now,
                                                                          std::chrono::milliseconds timeout) noexcept {
  using std::chrono::steady_clock;
  if (timeout <= std::chrono::milliseconds::zero()) return now;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::time_point::max() - now);
  if (timeout >= room) return std::nullopt;
  return now + timeout;
}

}  // namespace plugboard
