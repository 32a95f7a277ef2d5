// A fixed set of worker threads that run posted tasks, for work that must not run on the caller's
// thread (a plugin's thread, a BEAM scheduler). Threads start on the first post, so a process that
// never posts has none. Tasks run in no particular order across threads; callback/ordered_delivery.h
// builds one-at-a-time, in-order queues on top. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace plugboard {

class ThreadPool {
 public:
  // `threads` workers at most (at least 1). `name` shows in a debugger (pthread name, 15 chars).
  ThreadPool(std::string name, size_t threads);
  // Lets every queued task run, then joins the workers. Must not be called from a worker.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`. Never runs it on the calling thread and never waits for it. Tasks must not throw
  // (one that does ends the process, as an exception leaving a thread does). When queuing fails (an
  // exception: no memory, no thread at all), `task` is left as it was.
  void post(std::function<void()>&& task);
  size_t max_threads() const;
  // Workers started so far (they are started as work arrives, up to max_threads()).
  size_t started_threads() const;
  // True on one of this pool's workers.
  bool on_worker() const;
  // Waits up to `limit` until no task is queued or running (what a process about to exit lets
  // finish); false if some still is then. Not from a worker (it would wait for itself).
  bool await_idle(std::chrono::milliseconds limit) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace plugboard
