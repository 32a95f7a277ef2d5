// Threads of the NIF's own for work that must not run on a BEAM scheduler and may wait. (Compiles,
// with the declaration of their host callbacks, run on the library's compile threads instead:
// api::post_compile_work, one compile pool per process; a compilation never waits on anything a
// user controls.)
//   - launch_pool(): execution launches that may not return at once (a program the plugin may run
//     inside PJRT_LoadedExecutable_Execute, a blocking host callback waiting for its answer) and the
//     teardown of clients. It grows whenever no thread is idle, so work that waits (a callback nobody
//     answers) never holds up work that does not; idle threads beyond a few retire.
// Threads live as long as the VM or retire when idle; the pools themselves are never destroyed (the
// NIF is never unloaded while its threads run).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace plugboard::nif {

class WorkPool {
 public:
  struct Limits {
    size_t max_threads;                 // posting beyond this many busy threads queues the task
    size_t kept_idle;                   // idle threads that never retire
    std::chrono::milliseconds retire_after;  // how long an extra idle thread waits before it exits
  };
  explicit WorkPool(Limits limits) : limits_(limits) {}
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Runs `task` on a pool thread. False when it could not be queued (no memory, no thread at all).
  bool post(std::function<void()> task) noexcept;

  struct Counts {
    size_t threads, idle, queued;
  };
  Counts counts() noexcept;

 private:
  void work();
  const Limits limits_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  size_t threads_ = 0, idle_ = 0;
};

WorkPool& launch_pool();

}  // namespace plugboard::nif
