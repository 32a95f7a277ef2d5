// Running a program with host callbacks: each execution gets its own PJRT_ExecuteContext carrying
// the receiver (a HostCallbacks), so concurrent executions of one program reach their own callers.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "callback/host_callbacks.h"
#include "runtime/buffer.h"
#include "runtime/event.h"
#include "runtime/executable.h"

namespace plugboard {

namespace internal {
struct ExecutionState;
}

// An execution with host callbacks that may still be running. One owner at a time (not
// thread-safe itself); the work it stands for runs on plugin and delivery threads.
class CallbackExecution {
 public:
  CallbackExecution(CallbackExecution&&) noexcept;
  // Drops the execution this one held as the destructor does, then takes `other`'s.
  CallbackExecution& operator=(CallbackExecution&&) noexcept;
  // Does not wait. An unfinished execution keeps its context, its receiver and its program alive
  // until the plugin is done with them; its ordered calls are still delivered, and an on_complete
  // still runs. (Only when the plugin cannot continue its event, out of memory or with
  // PJRT_Event_OnReady failing, does this wait for the execution instead.)
  ~CallbackExecution();

  std::vector<Buffer> outputs;

  // Waits for the execution to finish and then for every one of its ordered callbacks to have been
  // delivered (returned). Returns the execution's error (a failed blocking callback's message among
  // them), else the first failed ordered callback's error. Later calls return the same.
  Status await();
  // Waits for the plugin to finish the program only: ordered callbacks may still be in delivery.
  // (The program never waits for an ordered callback's host function.)
  Status wait_executed() const;
  // Calls `done` with what await() returns once the outputs are ready and every ordered call of this
  // execution has been delivered: on a delivery thread, never on the caller's thread nor a plugin's,
  // whether the execution is still running or long finished. Nobody waits for it, so a binding can
  // send a message from it instead of blocking a thread. One per execution (FAILED_PRECONDITION for
  // a second); `done` must not block for long (it holds the receiver's queue while it runs).
  Status on_complete(std::function<void(Status)> done);
  // How many calls of each kind this execution made (meaningful after await() or in on_complete).
  uint64_t blocking_calls() const;
  uint64_t ordered_calls() const;

 private:
  friend Expected<CallbackExecution> execute_with_callbacks_async(const Executable&, std::span<Buffer* const>,
                                                                  std::shared_ptr<const HostCallbacks>,
                                                                  ExecuteOptions) noexcept;
  CallbackExecution() = default;
  // Completes the execution behind its ordered calls once the plugin's event fires, on plugin and
  // delivery threads (for on_complete, or for an execution dropped unfinished). Once: later calls do
  // nothing. An execution that is only awaited never needs it: await() completes it on its own thread.
  void queue_completion() noexcept;

  Event done_;
  std::shared_ptr<internal::ExecutionState> state_;
  std::optional<Status> result_;
  bool completion_queued_ = false;
};

// Executes `executable` with `callbacks` as the receiver of its host calls. The names it calls must
// have been declared on the client (declare_callbacks) before the program was compiled.
// `options.context` must be null: the context is this function's.
Expected<CallbackExecution> execute_with_callbacks_async(const Executable& executable, std::span<Buffer* const> args,
                                                         std::shared_ptr<const HostCallbacks> callbacks,
                                                         ExecuteOptions options = {}) noexcept;
// The same, waiting as CallbackExecution::await() does.
Expected<std::vector<Buffer>> execute_with_callbacks(const Executable& executable, std::span<Buffer* const> args,
                                                     std::shared_ptr<const HostCallbacks> callbacks,
                                                     ExecuteOptions options = {}) noexcept;

}  // namespace plugboard
