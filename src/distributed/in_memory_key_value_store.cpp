#include "distributed/in_memory_key_value_store.h"

#include "base/no_throw.h"
#include "plugboard/deadline.h"

namespace plugboard::distributed {

Expected<std::string> InMemoryKeyValueStore::get(std::string_view key, std::chrono::milliseconds timeout) noexcept {
  return no_throw("reading the key-value store", [&]() -> Expected<std::string> {
    // No deadline the clock can hold (INT64_MAX ms): wait for the put however long it takes.
    const auto deadline = deadline_after(std::chrono::steady_clock::now(), timeout);
    std::unique_lock lock(mutex_);
    for (;;) {
      if (auto it = values_.find(key); it != values_.end()) return it->second;
      if (!deadline) {
        changed_.wait(lock);
        continue;
      }
      if (changed_.wait_until(lock, *deadline) == std::cv_status::timeout) {
        if (auto it = values_.find(key); it != values_.end()) return it->second;
        return make_error(Code::kDeadlineExceeded, "key-value store: no value for key '" + std::string(key) +
                                                       "' within " + std::to_string(timeout.count()) + " ms");
      }
    }
  });
}

Expected<std::string> InMemoryKeyValueStore::try_get(std::string_view key) noexcept {
  return no_throw("reading the key-value store", [&]() -> Expected<std::string> {
    std::lock_guard lock(mutex_);
    if (auto it = values_.find(key); it != values_.end()) return it->second;
    return make_error(Code::kNotFound, "key-value store: no value for key '" + std::string(key) + "'");
  });
}

Status InMemoryKeyValueStore::put(std::string_view key, std::string_view value) noexcept {
  return no_throw("writing the key-value store", [&]() -> Status {
    {
      std::lock_guard lock(mutex_);
      values_.insert_or_assign(std::string(key), std::string(value));
    }
    changed_.notify_all();
    return ok();
  });
}

}  // namespace plugboard::distributed
