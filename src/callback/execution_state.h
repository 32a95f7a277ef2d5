// Internal: what one execution with host callbacks carries to the FFI handler (attached to its
// PJRT_ExecuteContext as user data), and what the handler reports back.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "base/status.h"
#include "callback/host_callbacks.h"
#include "runtime/execute_context.h"

namespace plugboard::internal {

struct ExecutionState : std::enable_shared_from_this<ExecutionState> {
  std::shared_ptr<const HostCallbacks> receiver;
  uint64_t id = 0;
  std::atomic<uint64_t> next_sequence{0};  // ordered calls issued so far
  std::atomic<uint64_t> last_ticket{0};    // the delivery ticket of the latest ordered call
  std::atomic<uint64_t> blocking_calls{0};
  ExecuteContext context;

  std::mutex mutex;
  std::optional<Error> ordered_error;  // the first ordered callback that failed

  void record_ordered_error(Error e) {
    std::lock_guard lock(mutex);
    if (!ordered_error) ordered_error = std::move(e);
  }
  void note_ticket(uint64_t ticket) {
    uint64_t seen = last_ticket.load(std::memory_order_relaxed);
    while (seen < ticket && !last_ticket.compare_exchange_weak(seen, ticket)) {
    }
  }
};

}  // namespace plugboard::internal
