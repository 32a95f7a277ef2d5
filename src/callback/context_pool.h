// Internal: PJRT execute contexts kept for reuse by executions with host callbacks, one pool per
// plugin. Making a context, attaching plugboard's user data to it and destroying it again cost the
// plugin about 1,100 instructions an execution (callgrind, PJRT 0.81) and three allocations. A
// pooled context is made once with its ContextSlot attached once as its user data; each execution
// points the slot at its own state, and gives the context back when the plugin is done with it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "abi/ffi.h"
#include "base/status.h"
#include "runtime/execute_context.h"

namespace plugboard {
class Client;
}

namespace plugboard::internal {

struct ExecutionState;

// What the plugin hands the FFI handler: the execution that uses the context now.
struct ContextSlot {
  std::atomic<ExecutionState*> state{nullptr};
};

class ContextPool;

// One context taken from a pool; destroying it gives the context back (or destroys it when the pool
// keeps enough idle ones). Destroy it only once the plugin is done with the execution it carried.
class PooledContext {
 public:
  PooledContext() = default;
  PooledContext(PooledContext&& other) noexcept;
  PooledContext& operator=(PooledContext&& other) noexcept;
  PooledContext(const PooledContext&) = delete;
  PooledContext& operator=(const PooledContext&) = delete;
  ~PooledContext();

  PJRT_ExecuteContext* raw() const;
  ContextSlot& slot() const;

  struct Entry {
    ExecuteContext context;
    ContextSlot slot;  // attached to `context` as its user data: its address never changes
  };

 private:
  friend class ContextPool;
  PooledContext(ContextPool* pool, std::unique_ptr<Entry> entry);
  void release() noexcept;

  ContextPool* pool_ = nullptr;
  std::unique_ptr<Entry> entry_;
};

class ContextPool {
 public:
  // At most `max_idle` contexts are kept between executions; more are destroyed when given back.
  explicit ContextPool(size_t max_idle = 64) : max_idle_(max_idle) { idle_.reserve(max_idle); }
  ContextPool(const ContextPool&) = delete;
  ContextPool& operator=(const ContextPool&) = delete;
  ~ContextPool();

  // An idle context, else a new one of `client`'s plugin whose slot is attached as the user data of
  // type `type_id` through `extension`. The slot points at no execution.
  Expected<PooledContext> acquire(const Client& client, const PB_PJRT_FFI_Extension& extension, int64_t type_id);

  size_t idle() const;

 private:
  friend class PooledContext;
  void give_back(std::unique_ptr<PooledContext::Entry> entry) noexcept;

  const size_t max_idle_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<PooledContext::Entry>> idle_;
};

}  // namespace plugboard::internal
