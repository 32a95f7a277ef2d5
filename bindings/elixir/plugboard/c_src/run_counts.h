// What every execution started through the NIF came to, counted where its outcome is known (the
// NIF call that finished it inline, or the completion that sends it): a few relaxed atomic additions
// a run, read when asked (run_counts/0, Plugboard.Telemetry.Summary). Also the executions in flight,
// which the launch policy reads (nif_execute.cpp). The execution's own outcome: a run whose caller
// stopped waiting, or whose ordered callback failed in Elixir, counts as the plugin finished it. One
// library's counts: a hot upgrade of the NIF starts them again (runs in flight then finish into the
// old library's).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace plugboard::nif {

struct RunCounts {
  std::atomic<uint64_t> finished{0};  // with an outcome, errors included
  std::atomic<uint64_t> errors{0};    // refused at the call, or failed
  std::atomic<int64_t> total_ns{0};   // from the NIF call to the outcome, summed over finished runs
  std::atomic<int64_t> last_ns{0};    // a recent run's (the last to store it, among runs finishing together)
  std::atomic<int> in_flight{0};      // started and not complete yet, on every client
};

RunCounts& run_counts() noexcept;

// One run came to an outcome (`ok` or not) `since` its NIF call began.
inline void count_run(bool ok, std::chrono::steady_clock::time_point since) noexcept {
  RunCounts& c = run_counts();
  const int64_t took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count();
  c.finished.fetch_add(1, std::memory_order_relaxed);
  if (!ok) c.errors.fetch_add(1, std::memory_order_relaxed);
  c.total_ns.fetch_add(took, std::memory_order_relaxed);
  c.last_ns.store(took, std::memory_order_relaxed);
}

// Counts one execution in flight for as long as it lives.
struct InFlight {
  InFlight() { run_counts().in_flight.fetch_add(1, std::memory_order_relaxed); }
  ~InFlight() { run_counts().in_flight.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

}  // namespace plugboard::nif
