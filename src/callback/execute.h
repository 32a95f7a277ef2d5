// Running a program with host callbacks: each execution gets its own PJRT_ExecuteContext carrying
// the receiver (a HostCallbacks), so concurrent executions of one program reach their own callers.
#pragma once

#include <memory>
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

// An execution with host callbacks that may still be running.
class CallbackExecution {
 public:
  CallbackExecution(CallbackExecution&&) noexcept;
  CallbackExecution& operator=(CallbackExecution&&) noexcept;
  // Awaits, when await() was not called: the plugin may still be using the execution's context.
  ~CallbackExecution();

  std::vector<Buffer> outputs;

  // Waits for the execution to finish and then for every one of its ordered callbacks to have been
  // delivered (returned). Returns the execution's error (a failed blocking callback's message among
  // them), else the first failed ordered callback's error. Call once; later calls return the same.
  Status await();
  // Waits for the plugin to finish the program only: ordered callbacks may still be in delivery.
  // (The program never waits for an ordered callback's host function.)
  Status wait_executed() const;
  // How many calls of each kind this execution made (meaningful after await()).
  uint64_t blocking_calls() const;
  uint64_t ordered_calls() const;

 private:
  friend Expected<CallbackExecution> execute_with_callbacks_async(const Executable&, std::span<Buffer* const>,
                                                                  std::shared_ptr<const HostCallbacks>,
                                                                  ExecuteOptions) noexcept;
  CallbackExecution() = default;
  Event done_;
  std::shared_ptr<internal::ExecutionState> state_;
  std::string name_;
  bool awaited_ = false;
  std::optional<Status> result_;
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
