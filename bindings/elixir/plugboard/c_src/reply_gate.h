// Where an asynchronous NIF call answers, and whether its caller still waits. compile/6, execute/8
// and buffer_to_binary/3 answer {tag, ref, outcome} to the calling process through a gate; the
// messages of an execution's host callbacks pass through it too. A caller that gives up waiting
// (a `timeout:`) closes the gate (cancel/1): from then on nothing is sent for that call, and the
// blocking host calls it has waiting fail, which frees the threads they hold.
#pragma once

#include <erl_nif.h>

#include <memory>
#include <mutex>
#include <vector>

#include "terms.h"

namespace plugboard::nif {

class PendingCall;

class ReplyGate {
 public:
  ReplyGate(ErlNifPid caller, ERL_NIF_TERM ref) : caller_(caller), ref_(enif_make_copy(ref_env_.get(), ref)) {}
  ReplyGate(const ReplyGate&) = delete;
  ReplyGate& operator=(const ReplyGate&) = delete;

  const ErlNifPid& caller() const { return caller_; }
  // {tag, ref, value} (built in `env`, which is cleared) to the caller, or to `to`; false when the
  // gate is closed or the process is gone.
  bool send(const char* tag, OwnedEnv& env, ERL_NIF_TERM value) { return send_to(caller_, tag, env, value); }
  bool send_to(const ErlNifPid& to, const char* tag, OwnedEnv& env, ERL_NIF_TERM value);
  // {tag, ref, {:error, %Plugboard.Error{code: :resource_exhausted}}} naming `what`, for an answer
  // that could not be built (no memory): the caller still gets one. Never throws.
  void send_failure(const char* tag, const char* what) noexcept;
  // Sends a blocking call's message and keeps the call, to fail it on close(); false (nothing sent)
  // when the gate is closed or the process is gone.
  bool send_call(const ErlNifPid& to, const std::shared_ptr<PendingCall>& call, OwnedEnv& env, ERL_NIF_TERM value);
  // The call has its outcome: close() need not fail it.
  void forget(const PendingCall* call);
  // The caller gave up: nothing more is sent; waiting calls fail with CANCELLED. Idempotent.
  void close();
  bool closed();

 private:
  ERL_NIF_TERM message(OwnedEnv& env, const char* tag, ERL_NIF_TERM value);
  std::mutex mutex_;
  bool open_ = true;
  ErlNifPid caller_;
  OwnedEnv ref_env_;
  ERL_NIF_TERM ref_;
  std::vector<std::shared_ptr<PendingCall>> waiting_;
};

}  // namespace plugboard::nif
