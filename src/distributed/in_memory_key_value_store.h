// A KeyValueStore within one process: a map under a mutex, getters waiting on a condition variable.
// What a single-host job (num_nodes = 1) or a test gives PJRT; the shape every other store follows.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "plugboard/key_value_store.h"

namespace plugboard::distributed {

class InMemoryKeyValueStore final : public KeyValueStore {
 public:
  Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) noexcept override;
  Expected<std::string> try_get(std::string_view key) noexcept override;
  Status put(std::string_view key, std::string_view value) noexcept override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace plugboard::distributed
