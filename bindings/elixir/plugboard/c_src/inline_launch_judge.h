// Whether an executable's next execution may start on the calling scheduler, judged from the wall time
// its launches took (the call into the plugin's execute, wherever it ran). Pure: no clock, no NIF
// types, so that tests/inline_launch_judge_test.cpp drives it with made-up durations.
//
// An executable that compile_policy.h allows inline starts there. Two launches in a row over the
// budget, or one far over it, send its executions to the launch pool: one overrun may be the OS
// preempting the scheduler thread, a program that is really slow overruns every time. (A quick launch
// forgives an overrun: a program whose launches alternate between quick and up to 20 ms stays
// inline.) Its launches on the pool, those it was sent there for, are still judged: after
// `come_back_after` of them in a row within the budget it may start inline again, so that a moment of
// load (a preempted scheduler, a GC, a loaded machine) does not send a small program through a thread
// hop for the rest of its life. Each return doubles the count needed for the next one, up to
// kMaxComeBackAfter (it never comes down), so a program that is slow in runs of two or more costs a
// scheduler at most two overruns per that many executions.
//
// Executions of one executable may run from many processes at once: the counts are atomics, read and
// written without a lock, so concurrent launches may miscount a run of quick launches by a few; one
// thread alone brings the executable back and doubles the count.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>

namespace plugboard::nif {

class InlineLaunchJudge {
 public:
  static constexpr std::chrono::nanoseconds kBudget = std::chrono::microseconds(500);
  static constexpr std::chrono::nanoseconds kFarOver = std::chrono::milliseconds(20);
  static constexpr int kFirstComeBackAfter = 16;
  static constexpr int kMaxComeBackAfter = 4096;

  // `allowed`: compile_policy.h's verdict; an executable it refuses never starts inline.
  explicit InlineLaunchJudge(bool allowed) : allowed_(allowed), inline_(allowed) {}
  InlineLaunchJudge(const InlineLaunchJudge&) = delete;
  InlineLaunchJudge& operator=(const InlineLaunchJudge&) = delete;

  bool allowed() const { return allowed_; }
  bool may_launch_inline() const { return inline_.load(std::memory_order_relaxed); }

  // One launch took `took`: on the calling scheduler, or on a pool thread that this judge sent it to
  // (a launch on the pool for another reason, such as many executions in flight, is not judged).
  void judge(std::chrono::nanoseconds took) {
    if (!allowed_) return;
    if (took <= kBudget) {
      if (overruns_.load(std::memory_order_relaxed) != 0) overruns_.store(0, std::memory_order_relaxed);
      if (inline_.load(std::memory_order_relaxed)) return;
      if (fast_on_pool_.fetch_add(1, std::memory_order_relaxed) + 1 < come_back_after_.load(std::memory_order_relaxed)) return;
      bool on_pool = false;
      if (!inline_.compare_exchange_strong(on_pool, true, std::memory_order_relaxed)) return;  // another thread did
      fast_on_pool_.store(0, std::memory_order_relaxed);
      come_back_after_.store(std::min(2 * come_back_after_.load(std::memory_order_relaxed), kMaxComeBackAfter),
                             std::memory_order_relaxed);
      return;
    }
    fast_on_pool_.store(0, std::memory_order_relaxed);
    if (took > kFarOver || overruns_.fetch_add(1, std::memory_order_relaxed) >= 1) {
      overruns_.store(0, std::memory_order_relaxed);
      inline_.store(false, std::memory_order_relaxed);
    }
  }

  // Launches on the pool in a row within the budget that bring the executable back inline (now).
  int come_back_after() const { return come_back_after_.load(std::memory_order_relaxed); }

 private:
  const bool allowed_;
  std::atomic<bool> inline_;
  std::atomic<int> overruns_{0};      // launches in a row over the budget
  std::atomic<int> fast_on_pool_{0};  // launches in a row within it while sent to the pool
  std::atomic<int> come_back_after_{kFirstComeBackAfter};
};

}  // namespace plugboard::nif
