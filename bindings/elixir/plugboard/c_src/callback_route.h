// Host callbacks into Elixir. Each execution gets its own receiver (api::HostCallbacks) whose
// functions send the call to the process the run names for it:
//   - blocking: {:plugboard_call, ref, %Plugboard.Call{}}; the plugin's thread waits until the
//     process answers (Plugboard.reply/2 → PendingCall::answer), fails it, dies (a monitor), drops
//     the call without answering (the resource's destructor), or the time limit passes;
//   - ordered: {:plugboard_ordered, ref, %Plugboard.OrderedCall{}}, sent from a delivery thread one
//     at a time in program order.
#pragma once

#include <erl_nif.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plugboard/plugboard.h"
#include "terms.h"

namespace plugboard::nif {

// One blocking call's rendezvous between the plugin thread that waits and the process that answers.
// The first outcome wins (answer, failure, time-out); later ones are refused.
class PendingCall {
 public:
  PendingCall(std::string name, std::span<const MutableTensorView> results) : name_(std::move(name)), results_(results) {}
  // On the plugin's thread: until an outcome (nullopt: no limit).
  Status wait(std::optional<std::chrono::milliseconds> limit);
  // From Plugboard.reply/2: `results` is a list of binaries or %Plugboard.HostTensor{}, one per result,
  // of the program's types. A bad answer fails the call with the same error it returns.
  Status answer(ErlNifEnv* env, ERL_NIF_TERM results);
  // The call fails with `error` unless it has an outcome already.
  void fail(Error error);
  const std::string& name() const { return name_; }
  // An outcome is in (answer, failure, time-out): nobody waits for this call any more.
  bool decided() const { return decided_.load(std::memory_order_acquire); }

 private:
  enum class State { kWaiting, kAnswered, kFailed, kGaveUp };
  Status write_results(ErlNifEnv* env, ERL_NIF_TERM results);
  std::mutex mutex_;
  std::condition_variable answered_;
  std::atomic<bool> decided_{false};  // state_ left kWaiting: lets wait() spin without the lock
  State state_ = State::kWaiting;
  std::optional<Error> error_;
  std::string name_;
  std::span<const MutableTensorView> results_;  // valid while kWaiting: the waiting thread holds them
};

struct CallResource;
// The monitor's notice: the process handling a call died before answering it.
void call_handler_down(CallResource* call);

struct CallRoute {
  std::string name;
  ErlNifPid pid;
  bool ordered = false;
};

class ReplyGate;
// Where one execution's host calls go: through the run's gate (its reference is in every message).
struct ExecutionRoutes {
  std::shared_ptr<ReplyGate> gate;
  const void* client = nullptr;  // the executable's client (identity only): see answering_for
  int device = 0;                // the device the execution runs on (index into the client's devices)
  std::vector<CallRoute> routes;
  std::optional<std::chrono::milliseconds> blocking_limit;
};

// Whether `pid` is being asked now for the answer of a blocking call of an execution on `client`
// running on one of `devices` (the call undecided, its caller still waiting for the execution).
// An execution that process starts on that device would wait behind the one waiting for the process
// (XLA's CPU client runs a device's asynchronous executions in order): it would wait for itself,
// until the call's time limit. nif_execute refuses it at once instead. Another device of the same
// client has its own queue: work there is not refused.
bool answering_for(const ErlNifPid& pid, const void* client, std::span<const int> devices);
// Whether any blocking call is waiting for its answer at all (one atomic load): the execute path
// asks answering_for, which locks, only then.
bool anyone_answering() noexcept;

// The bytes of a :bool element must be 0 or 1 (XLA reads any other byte differently per plugin).
Status check_bool_bytes(std::span<const unsigned char> bytes, std::string_view what);

// A receiver binding every route of `routes`.
Expected<api::HostCallbacks> make_receiver(std::shared_ptr<const ExecutionRoutes> routes);

// A receiver binding `names` to functions that refuse every call: for declaring the names on a
// client before a program that calls them is compiled (executions bind their own).
Expected<api::HostCallbacks> declaration_receiver(const std::vector<std::string>& names);

}  // namespace plugboard::nif
