// Internal: what one execution with host callbacks carries to the FFI handler (reached through the
// ContextSlot attached to its PJRT_ExecuteContext as user data), and what the handler reports back.
#pragma once

#include <atomic>
#include <latch>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "base/status.h"
#include "callback/host_callbacks.h"
#include "callback/context_pool.h"
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
  PooledContext context;  // given back to its pool with the state, once the plugin is done
  std::shared_ptr<SpanUntilReady> device_span;  // ended before the outcome is handed on (traced_event.h)

  std::mutex mutex;
  std::optional<Error> ordered_error;         // the first ordered callback that failed
  std::optional<Status> outcome;              // set by complete(), after the last ordered call
  std::function<void(Status)> on_complete;    // who to tell then
  bool on_complete_taken = false;
  // Used when the completion is queued (CallbackExecution::queue_completion). Counted down twice
  // once the execution is complete: by the plugin's thread that queued the completion (which keeps no
  // reference to this state), and by the delivery-pool task that ran the caller's on_complete and let
  // go of its reference. await() waits for both, so that whoever awaits holds the last reference to
  // the execution's plugin objects (context, program): they are never run down by a pool thread while
  // the caller goes on (or the process exits), nor ever on a plugin thread inside its own event
  // callback. Made with the state, so that queuing the completion cannot fail for want of memory.
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
  // Runs as the receiver's task after every ordered call of the execution, when the completion was
  // queued (on_complete, or the execution dropped unfinished), on whichever thread runs the queue: a
  // delivery thread, an awaiting caller, a blocking call's plugin thread. Records the outcome and
  // hands the rest to a delivery-pool thread, with this queue's reference to the state: the caller's
  // on_complete, then the release of the state, then the count-down.
  static void complete(std::shared_ptr<ExecutionState> self, Status executed) noexcept;
};

}  // namespace plugboard::internal
