#include "reply_gate.h"

#include <algorithm>

#include "callback_route.h"

namespace plugboard::nif {

ERL_NIF_TERM ReplyGate::message(OwnedEnv& env, const char* tag, ERL_NIF_TERM value) {
  ErlNifEnv* e = env.get();
  return enif_make_tuple3(e, atom(e, tag), enif_make_copy(e, ref_), value);
}

bool ReplyGate::send_to(const ErlNifPid& to, const char* tag, OwnedEnv& env, ERL_NIF_TERM value) {
  std::lock_guard lock(mutex_);
  if (!open_) return false;
  return send_from_thread(to, env, message(env, tag, value));
}

bool ReplyGate::send_call(const ErlNifPid& to, const std::shared_ptr<PendingCall>& call, OwnedEnv& env, ERL_NIF_TERM value) {
  std::lock_guard lock(mutex_);
  if (!open_) return false;
  waiting_.push_back(call);  // may throw bad_alloc: nothing sent then
  if (send_from_thread(to, env, message(env, "plugboard_call", value))) return true;
  waiting_.pop_back();
  return false;
}

void ReplyGate::send_failure(const char* tag, const char* what) noexcept {
  try {
    OwnedEnv msg;
    if (!msg) return;
    send(tag, msg, make_error(msg.get(), Code::kResourceExhausted, std::string(what) + ": out of memory"));
  } catch (...) {
    // Nothing left to answer with.
  }
}

void ReplyGate::forget(const PendingCall* call) {
  std::lock_guard lock(mutex_);
  std::erase_if(waiting_, [&](const auto& c) { return c.get() == call; });
}

void ReplyGate::close() {
  std::vector<std::shared_ptr<PendingCall>> waiting;
  {
    std::lock_guard lock(mutex_);
    open_ = false;
    waiting.swap(waiting_);
  }
  for (const auto& call : waiting)
    call->fail(Error(Code::kCancelled, "host callback " + call->name() + ": the caller gave up waiting for the execution"));
}

bool ReplyGate::closed() {
  std::lock_guard lock(mutex_);
  return !open_;
}

}  // namespace plugboard::nif
