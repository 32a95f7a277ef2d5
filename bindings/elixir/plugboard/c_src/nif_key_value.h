// A KeyValueStore (include/plugboard/key_value_store.h) whose calls an Elixir process answers: what
// Plugboard.KeyValueStore gives a client of a multi-host job, so the plugin's kv_get / kv_put /
// kv_try_get reach the cluster's store over Erlang distribution.
//
// A call (on the plugin's thread, or a launch-pool thread for kv_call/5 and open_distributed/6; never
// a scheduler: refused there, it would block it) sends the handler process
//   {:plugboard_kv, id, :get, key, timeout_ms} | {:plugboard_kv, id, :try_get, key, nil}
//   | {:plugboard_kv, id, :put, key, value}
// and waits for kv_reply(store, id, reply), reply being {:ok, value} | :ok | {:error, code, message}.
// The handler answers get within timeout_ms (DEADLINE_EXCEEDED after it); the call itself waits at
// most timeout_ms + the store's call timeout, saturating (get; milliseconds::max() waits as long as
// the handler takes) or the call timeout (try_get, put) for an answer
// that never comes (DEADLINE_EXCEEDED naming the handler). Once the handler process is gone (a
// monitor), every waiting and later call is UNAVAILABLE at once.
#pragma once

#include <erl_nif.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "plugboard/key_value_store.h"

namespace plugboard::nif {

class ErlangKeyValueStore final : public KeyValueStore {
 public:
  ErlangKeyValueStore(ErlNifPid handler, std::chrono::milliseconds call_timeout)
      : handler_(handler), call_timeout_(call_timeout) {}

  Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) noexcept override;
  Expected<std::string> try_get(std::string_view key) noexcept override;
  Status put(std::string_view key, std::string_view value) noexcept override;

  // The handler's answer to request `id`: a value (get, try_get), nothing (put) or an error. False
  // when no call waits for it any more (it gave up, or the id was never asked).
  bool answer(uint64_t id, Expected<std::optional<std::string>> outcome);
  // The handler process is gone: waiting calls and later ones fail UNAVAILABLE.
  void handler_gone();

 private:
  enum class Op { kGet, kTryGet, kPut };
  Expected<std::optional<std::string>> call(Op op, std::string_view key, std::string_view value,
                                            std::chrono::milliseconds timeout);

  const ErlNifPid handler_;
  const std::chrono::milliseconds call_timeout_;
  std::mutex mutex_;
  std::condition_variable answered_;
  bool gone_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::optional<Expected<std::optional<std::string>>>> waiting_;  // id -> answer once come
};

// The resource behind a store term: the store (shared with the clients it was given to, which may
// outlive the term) and the monitor on its handler.
struct KeyValueResource {
  explicit KeyValueResource(std::shared_ptr<ErlangKeyValueStore> s) : store(std::move(s)) {}
  ~KeyValueResource() { store->handler_gone(); }  // no term left: no handler can answer it any more
  void handler_down() { store->handler_gone(); }
  std::shared_ptr<ErlangKeyValueStore> store;
};

}  // namespace plugboard::nif
