// Internal: what one execution with host callbacks carries to the FFI handler (attached to its
// PJRT_ExecuteContext as user data), and what the handler reports back.
#pragma once

#include <atomic>
#include <latch>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "base/status.h"
#include "callback/host_callbacks.h"
#include "runtime/execute_context.h"
#include "runtime/executable.h"

namespace plugboard::internal {

struct ExecutionState : std::enable_shared_from_this<ExecutionState> {
  std::shared_ptr<const HostCallbacks> receiver;
  std::shared_ptr<const Executable> executable;  // kept until the plugin is done with the execution
  std::string name;                              // the executable's, for messages
  uint64_t id = 0;
  std::atomic<uint64_t> next_sequence{0};  // ordered calls issued so far
  std::atomic<uint64_t> last_ticket{0};    // the delivery ticket of the latest ordered call
  std::atomic<uint64_t> blocking_calls{0};
  ExecuteContext context;

  std::mutex mutex;
  std::optional<Error> ordered_error;         // the first ordered callback that failed
  std::optional<Status> outcome;              // set by complete(), after the last ordered call
  std::function<void(Status)> on_complete;    // who to tell then
  bool on_complete_taken = false;
  // Counted down twice once the execution is complete: by the completion task and by the plugin's
  // thread that queued it, each after letting go of this state. await() waits for both, so that the
  // last owner of the execution's plugin objects (context, program) is the caller, never a plugin or
  // delivery thread that might still be running them down while the caller goes on (or exits).
  std::shared_ptr<std::latch> completed = std::make_shared<std::latch>(2);

  void record_ordered_error(Error e) {
    std::lock_guard lock(mutex);
    if (!ordered_error) ordered_error = std::move(e);
  }
  void note_ticket(uint64_t ticket) {
    uint64_t seen = last_ticket.load(std::memory_order_relaxed);
    while (seen < ticket && !last_ticket.compare_exchange_weak(seen, ticket)) {
    }
  }
  // What the execution comes to, once the plugin says `executed` and every ordered call returned:
  // the execution's error, else the first ordered callback's.
  Status outcome_of(Status executed) {
    if (!executed) return std::unexpected(std::move(executed).error().annotate("executing " + name));
    std::lock_guard lock(mutex);
    if (ordered_error) return std::unexpected(Error(*ordered_error).annotate("executing " + name));
    return ok();
  }
  // Runs as the receiver's task after every ordered call of the execution: records the outcome and
  // tells whoever asked (on_complete).
  void complete(Status executed) {
    Status result = outcome_of(std::move(executed));
    std::function<void(Status)> tell;
    {
      std::lock_guard lock(mutex);
      outcome = result;
      tell = std::move(on_complete);
    }
    if (!tell) return;
    try {
      tell(std::move(result));
    } catch (...) {
      // A caller's function that throws has nobody to throw to on a delivery thread.
    }
  }
};

}  // namespace plugboard::internal
