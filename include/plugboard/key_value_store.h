/// \file
/// A key-value store shared by the processes (hosts) of one multi-host PJRT job.
///
/// PJRT_Client_Create takes kv_get / kv_put / kv_try_get callbacks: a plugin that spans several hosts
/// (the CUDA plugin with num_nodes > 1) publishes what each host has (its devices, its collective
/// communicator ids) under keys of its own and waits for the other hosts' keys. plugboard hands a
/// KeyValueStore to those callbacks (ClientOptions::kv_store, api::Distribution::kv_store); the
/// caller chooses where the data lives (in memory for one process, Erlang distribution in the Elixir
/// binding). Keys of different jobs must not collide: a store serves one job, or namespaces its keys.
///
/// Thread-safety is part of the contract: the plugin calls from its own threads, several at once.
/// Errors as values (never an exception): get's DEADLINE_EXCEEDED and try_get's NOT_FOUND are what
/// the plugin expects; any other error reaches the plugin as is (and fails its client creation).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "plugboard/status.h"

namespace plugboard {

/// The store a multi-host client's plugin publishes to and reads from. Implement it to put the data
/// where the job's hosts can reach it; every function may be called from several threads at once.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;  ///< destroyed after every client that uses it
  /// The value of `key`, waiting for it to be put for at most `timeout`; DEADLINE_EXCEEDED, naming the
  /// key, once it has passed. A timeout of zero or less looks once.
  virtual Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) noexcept = 0;
  /// The value of `key` now, or NOT_FOUND (naming the key) at once.
  virtual Expected<std::string> try_get(std::string_view key) noexcept = 0;
  /// Sets `key` to `value` (a later put replaces it) and wakes every get waiting for it.
  virtual Status put(std::string_view key, std::string_view value) noexcept = 0;
};

}  // namespace plugboard
