#include "callback_route.h"

#include <algorithm>
#include <cstring>
#include <atomic>
#include <mutex>
#include <thread>

#include "reply_gate.h"
#include "resources.h"

namespace plugboard::nif {

Status PendingCall::wait(std::optional<std::chrono::milliseconds> limit) {
  // An Elixir process usually answers within tens of microseconds: look for the answer for a short
  // while before sleeping (a sleeping thread takes as long again to wake).
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (!decided_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  std::unique_lock lock(mutex_);
  auto decided = [&] { return state_ != State::kWaiting; };
  if (limit) {
    if (!answered_.wait_for(lock, *limit, decided)) {
      state_ = State::kGaveUp;
      return make_error(Code::kDeadlineExceeded, "host callback " + name_ + " got no answer within " +
                                                     std::to_string(limit->count()) + " ms");
    }
  } else {
    answered_.wait(lock, decided);
  }
  if (state_ == State::kAnswered) return ok();
  return std::unexpected(*error_);
}

void PendingCall::fail(Error error) {
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::kWaiting) return;
    state_ = State::kFailed;
    error_ = std::move(error);
    decided_.store(true, std::memory_order_release);
  }
  answered_.notify_all();
}

Status PendingCall::answer(ErlNifEnv* env, ERL_NIF_TERM results) {
  Status written;
  {
    std::lock_guard lock(mutex_);
    switch (state_) {
      case State::kWaiting: break;
      case State::kAnswered: return make_error(Code::kFailedPrecondition, "host callback " + name_ + " was answered already");
      case State::kFailed: return make_error(Code::kFailedPrecondition, "host callback " + name_ + " failed already: " + error_->message());
      case State::kGaveUp: return make_error(Code::kDeadlineExceeded, "host callback " + name_ + " timed out before this answer");
    }
    written = write_results(env, results);
    if (written) {
      state_ = State::kAnswered;
    } else {
      state_ = State::kFailed;
      error_ = written.error();
    }
    decided_.store(true, std::memory_order_release);
  }
  answered_.notify_all();
  return written;
}

Status PendingCall::write_results(ErlNifEnv* env, ERL_NIF_TERM results) {
  unsigned length = 0;
  if (!enif_get_list_length(env, results, &length))
    return invalid_argument("the answer to host callback " + name_ + " must be a list of results");
  if (length != results_.size())
    return invalid_argument("host callback " + name_ + " returns " + std::to_string(results_.size()) +
                            " result(s), the answer has " + std::to_string(length));
  ERL_NIF_TERM head, tail = results;
  for (size_t i = 0; enif_get_list_cell(env, tail, &head, &tail); ++i) {
    const MutableTensorView& slot = results_[i];
    const std::string what = "result " + std::to_string(i) + " of host callback " + name_;
    ERL_NIF_TERM data = head;
    if (enif_is_map(env, head)) {
      auto d = map_get(env, head, "data");
      auto t = map_get(env, head, "dtype");
      auto s = map_get(env, head, "shape");
      if (!d || !t || !s) return invalid_argument(what + " must be a binary or a %Plugboard.HostTensor{}");
      PB_ASSIGN_OR_RETURN(DType dtype, get_dtype(env, *t, what + " dtype"));
      PB_ASSIGN_OR_RETURN(std::vector<int64_t> dims, get_shape(env, *s, what + " shape"));
      if (dtype != slot.dtype || !std::equal(dims.begin(), dims.end(), slot.dims.begin(), slot.dims.end()))
        return invalid_argument(what + " must be " + slot.shape() + ", the answer is " + shape_string(dtype, dims));
      data = *d;
    }
    ErlNifBinary bin;
    if (!enif_inspect_binary(env, data, &bin)) return invalid_argument(what + " must be a binary or a %Plugboard.HostTensor{}");
    if (bin.size != slot.bytes.size())
      return invalid_argument(what + " (" + slot.shape() + ") must be " + std::to_string(slot.bytes.size()) +
                              " bytes, the answer has " + std::to_string(bin.size));
    if (slot.dtype == DType::kBool) PB_RETURN_IF_ERROR(check_bool_bytes({bin.data, bin.size}, what));
    if (bin.size) std::memcpy(slot.bytes.data(), bin.data, bin.size);
  }
  return ok();
}

Status check_bool_bytes(std::span<const unsigned char> bytes, std::string_view what) {
  unsigned char seen = 0;
  for (unsigned char b : bytes) seen |= b;  // one pass the compiler vectorizes; located only on refusal
  if (seen <= 1) return ok();
  const auto bad = std::find_if(bytes.begin(), bytes.end(), [](unsigned char b) { return b > 1; });
  return invalid_argument(std::string(what) + ": a :bool element must be the byte 0 or 1; element " +
                          std::to_string(bad - bytes.begin()) + " is " + std::to_string(*bad));
}

CallResource::~CallResource() {
  if (call) call->fail(Error(Code::kAborted, "host callback " + call->name() + "'s call was dropped without an answer"));
}

void call_handler_down(CallResource* resource) {
  if (resource->call)
    resource->call->fail(Error(Code::kAborted, "the process handling host callback " + resource->call->name() +
                                                   " exited before answering"));
}

namespace {

// Every blocking call waiting for its answer: its handler process, the client and device of its
// execution, and what says whether it still waits (valid while listed: send_blocking holds them).
struct AnsweringEntry {
  ErlNifPid pid;
  const void* client;
  int device;
  ReplyGate* gate;
  const PendingCall* call;
};
std::mutex g_answering_mutex;  // taken before a gate's own lock, never the other way round
std::vector<AnsweringEntry> g_answering;
std::atomic<int> g_answering_count{0};  // g_answering's size, read without the lock

// Lists a call for as long as send_blocking waits for it.
class Answering {
 public:
  explicit Answering(AnsweringEntry entry) : call_(entry.call) {
    std::lock_guard lock(g_answering_mutex);
    g_answering.push_back(entry);  // may throw bad_alloc: send_blocking reports it
    g_answering_count.fetch_add(1, std::memory_order_relaxed);
  }
  ~Answering() {
    std::lock_guard lock(g_answering_mutex);
    g_answering_count.fetch_sub(static_cast<int>(std::erase_if(g_answering, [&](const AnsweringEntry& e) { return e.call == call_; })),
                                std::memory_order_relaxed);
  }
  Answering(const Answering&) = delete;
  Answering& operator=(const Answering&) = delete;

 private:
  const PendingCall* call_;
};

ERL_NIF_TERM make_attributes(ErlNifEnv* env, std::span<const CallbackAttribute> attributes) {
  ERL_NIF_TERM map = enif_make_new_map(env);
  for (const CallbackAttribute& a : attributes) {
    ERL_NIF_TERM value = std::visit(
        [&](const auto& v) -> ERL_NIF_TERM {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) return make_string(env, v);
          else if constexpr (std::is_same_v<V, int64_t>) return enif_make_int64(env, v);
          else if constexpr (std::is_same_v<V, double>) return enif_make_double(env, v);
          else return atom(env, v ? "true" : "false");
        },
        a.value);
    enif_make_map_put(env, map, make_string(env, a.name), value, &map);
  }
  return map;
}

Status send_blocking(const ExecutionRoutes& routes, const ErlNifPid& pid, const BlockingCall& call) try {
  const std::string name(call.name());
  auto pending = std::make_shared<PendingCall>(name, call.results());
  OwnedEnv msg;
  if (!msg) return make_error(Code::kResourceExhausted, "no memory for host callback " + name + "'s message");
  ErlNifEnv* env = msg.get();
  auto owned = std::make_unique<CallResource>(pending);
  CallResource* object = owned.get();
  auto [resource, handle] = make_resource_term(env, std::move(owned));
  if (enif_monitor_process(nullptr, handle, &pid, &object->monitor) != 0)
    return make_error(Code::kAborted, "the process handling host callback " + name + " is not alive");
  object->monitored = true;
  std::vector<ERL_NIF_TERM> operands, results;
  for (const TensorView& t : call.operands()) operands.push_back(make_host_tensor(env, t.dtype, t.dims, t.bytes));
  for (const MutableTensorView& t : call.results())
    results.push_back(enif_make_tuple2(env, make_dtype(env, t.dtype), make_shape(env, t.dims)));
  ERL_NIF_TERM value = make_struct(env, "Elixir.Plugboard.Call",
                                   {{"resource", resource},
                                    {"name", make_string(env, name)},
                                    {"operands", make_list(env, operands)},
                                    {"results", make_list(env, results)},
                                    {"attributes", make_attributes(env, call.attributes())}});
  Answering answering({pid, routes.client, routes.device, routes.gate.get(), pending.get()});
  if (!routes.gate->send_call(pid, pending, msg, value)) {
    if (routes.gate->closed())
      return make_error(Code::kCancelled, "host callback " + name + ": the caller gave up waiting for the execution");
    return make_error(Code::kAborted, "the process handling host callback " + name + " is not alive");
  }
  Status outcome = pending->wait(routes.blocking_limit);
  routes.gate->forget(pending.get());
  return outcome;
} catch (const std::exception& e) {
  return make_error(Code::kResourceExhausted, "host callback " + std::string(call.name()) + ": " + e.what());
}

Status send_ordered(const ExecutionRoutes& routes, const ErlNifPid& pid, const OrderedCall& call) try {
  OwnedEnv msg;
  if (!msg) return make_error(Code::kResourceExhausted, "no memory for host callback " + call.name + "'s message");
  ErlNifEnv* env = msg.get();
  std::vector<ERL_NIF_TERM> operands;
  for (const io::HostArray& a : call.operands)
    operands.push_back(make_host_tensor(env, a.dtype, a.dims, std::span<const std::byte>(a.data)));
  ERL_NIF_TERM value = make_struct(env, "Elixir.Plugboard.OrderedCall",
                                   {{"name", make_string(env, call.name)},
                                    {"execution", enif_make_uint64(env, call.execution)},
                                    {"sequence", enif_make_uint64(env, call.sequence)},
                                    {"operands", make_list(env, operands)},
                                    {"attributes", make_attributes(env, call.attributes)}});
  if (routes.gate->send_to(pid, "plugboard_ordered", msg, value)) return ok();
  if (routes.gate->closed()) return ok();  // nobody waits for this execution any more: dropped
  return make_error(Code::kUnavailable, "the process receiving ordered host calls to " + call.name + " is not alive");
} catch (const std::exception& e) {
  return make_error(Code::kResourceExhausted, "host callback " + call.name + ": " + e.what());
}

}  // namespace

bool anyone_answering() noexcept { return g_answering_count.load(std::memory_order_relaxed) > 0; }

bool answering_for(const ErlNifPid& pid, const void* client, std::span<const int> devices) {
  std::lock_guard lock(g_answering_mutex);
  return std::any_of(g_answering.begin(), g_answering.end(), [&](const AnsweringEntry& e) {
    return e.client == client && std::find(devices.begin(), devices.end(), e.device) != devices.end() &&
           enif_compare_pids(&e.pid, &pid) == 0 && !e.call->decided() && !e.gate->closed();
  });
}

Expected<api::HostCallbacks> make_receiver(std::shared_ptr<const ExecutionRoutes> routes) {
  PB_ASSIGN_OR_RETURN(api::HostCallbacks receiver, api::HostCallbacks::create());
  for (const CallRoute& route : routes->routes) {
    const ErlNifPid pid = route.pid;
    if (route.ordered) {
      PB_RETURN_IF_ERROR(receiver.add_ordered(route.name, [routes, pid](const OrderedCall& call) {
        return send_ordered(*routes, pid, call);
      }));
    } else {
      PB_RETURN_IF_ERROR(receiver.add_blocking(route.name, [routes, pid](const BlockingCall& call) {
        return send_blocking(*routes, pid, call);
      }));
    }
  }
  return receiver;
}

Expected<api::HostCallbacks> declaration_receiver(const std::vector<std::string>& names) {
  PB_ASSIGN_OR_RETURN(api::HostCallbacks receiver, api::HostCallbacks::create());
  for (const std::string& name : names)
    PB_RETURN_IF_ERROR(receiver.add_blocking(name, [name](const BlockingCall&) -> Status {
      return make_error(Code::kInternal, "host callback " + name + " was only declared");
    }));
  return receiver;
}

}  // namespace plugboard::nif
