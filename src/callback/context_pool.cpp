#include "callback/context_pool.h"

#include "runtime/client.h"

namespace plugboard::internal {

PooledContext::PooledContext(ContextPool* pool, std::unique_ptr<Entry> entry) : pool_(pool), entry_(std::move(entry)) {}

PooledContext::PooledContext(PooledContext&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), entry_(std::move(other.entry_)) {}

PooledContext& PooledContext::operator=(PooledContext&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

PooledContext::~PooledContext() { release(); }

void PooledContext::release() noexcept {
  if (!entry_) return;
  entry_->slot.state.store(nullptr, std::memory_order_relaxed);
  pool_->give_back(std::move(entry_));
  pool_ = nullptr;
}

PJRT_ExecuteContext* PooledContext::raw() const { return entry_ ? entry_->context.raw() : nullptr; }
ContextSlot& PooledContext::slot() const { return entry_->slot; }

ContextPool::~ContextPool() = default;

Expected<PooledContext> ContextPool::acquire(const Client& client, const PB_PJRT_FFI_Extension& extension,
                                             int64_t type_id) {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<PooledContext::Entry> entry = std::move(idle_.back());
      idle_.pop_back();
      return PooledContext(this, std::move(entry));
    }
  }
  auto entry = std::make_unique<PooledContext::Entry>();
  PB_ASSIGN_OR_RETURN(entry->context, ExecuteContext::create(client));
  PB_RETURN_IF_ERROR(abi::ffi_add_user_data(client.plugin().api(), extension, entry->context.raw(), type_id, &entry->slot));
  return PooledContext(this, std::move(entry));
}

size_t ContextPool::idle() const {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

void ContextPool::give_back(std::unique_ptr<PooledContext::Entry> entry) noexcept {
  std::lock_guard lock(mutex_);
  // Within the capacity reserved up front: push_back cannot throw. Beyond max_idle_, `entry` (and
  // its context) is destroyed when this function has returned, outside the lock.
  if (idle_.size() < max_idle_) idle_.push_back(std::move(entry));
}

}  // namespace plugboard::internal
