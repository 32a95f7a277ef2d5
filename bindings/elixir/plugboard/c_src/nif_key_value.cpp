// The KeyValueStore an Elixir process answers (nif_key_value.h), and its NIFs:
//   kv_store_new(handler, call_timeout_ms) -> store           (monitors `handler`)
//   kv_reply(store, id, reply) -> :ok | :late                 (the handler's answer)
//   kv_call(store, op, key, arg, ref) -> :ok, then {ref, result} to the caller: get/try_get/put run
//     on a launch-pool thread through the very C++ object a client's plugin calls (a get's arg: ms in
//     0..2^32-1 or :infinity, the C++ store's milliseconds::max()); a put's value, and kv_reply's,
//     larger than kDirtyCopyBytes is copied on a dirty scheduler
//   open_distributed(plugin, create_options, store | nil, node_id | nil, num_nodes | nil, ref) -> :ok,
//     then {ref, {:ok, client} | {:error, error}}: PJRT_Client_Create may wait on the store, so it
//     runs on a launch-pool thread, never on a scheduler.
#include "nif_key_value.h"

#include <algorithm>
#include <cstring>

#include "nif_functions.h"
#include "plugboard/deadline.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

constexpr const char* kHandler = "the store's Elixir handler process";

// A store call never throws into the plugin: an exception (no memory) becomes an error value.
template <class F>
auto safely(const char* what, F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_error(Code::kResourceExhausted, std::string(what) + ": out of memory");
  } catch (...) {
    return make_error(Code::kInternal, std::string(what) + ": unexpected exception");
  }
}

ERL_NIF_TERM make_key(ErlNifEnv* env, std::string_view bytes) {
  return make_bytes(env, std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
}

}  // namespace

Expected<std::optional<std::string>> ErlangKeyValueStore::call(Op op, std::string_view key, std::string_view value,
                                                               std::chrono::milliseconds timeout) {
  // The answer comes through a NIF call on a scheduler: waiting for it there could wait forever.
  if (enif_thread_type() != ERL_NIF_THR_UNDEFINED)
    return make_error(Code::kFailedPrecondition,
                      "key-value store: called on a BEAM scheduler thread, where waiting for the handler's answer would "
                      "block it (call it from the plugin's or plugboard's threads)");
  uint64_t id;
  {
    std::lock_guard lock(mutex_);
    if (gone_) return make_error(Code::kUnavailable, std::string("key-value store: ") + kHandler + " is gone");
    id = next_id_++;
    waiting_.emplace(id, std::nullopt);
  }
  auto forget = [&] {
    std::lock_guard lock(mutex_);
    waiting_.erase(id);
  };
  OwnedEnv msg_env;
  if (!msg_env) {
    forget();
    return make_error(Code::kResourceExhausted, "key-value store: no memory for the request message");
  }
  ErlNifEnv* e = msg_env.get();
  const char* op_name = op == Op::kGet ? "get" : op == Op::kTryGet ? "try_get" : "put";
  ERL_NIF_TERM arg = op == Op::kGet    ? enif_make_int64(e, std::max<int64_t>(0, timeout.count()))
                     : op == Op::kPut  ? make_key(e, value)
                                       : make_nil(e);
  ERL_NIF_TERM message[] = {atom(e, "plugboard_kv"), enif_make_uint64(e, id), atom(e, op_name), make_key(e, key), arg};
  if (!send_from_thread(handler_, msg_env, enif_make_tuple_from_array(e, message, 5))) {
    forget();
    handler_gone();
    return make_error(Code::kUnavailable, std::string("key-value store: ") + kHandler + " is gone");
  }
  // Saturating: a get of milliseconds::max() waits without a deadline rather than none at all.
  const auto limit = saturating_add(op == Op::kGet ? std::max(timeout, std::chrono::milliseconds(0)) : std::chrono::milliseconds(0), call_timeout_);
  const auto deadline = deadline_after(std::chrono::steady_clock::now(), limit);
  auto done = [&] { return gone_ || waiting_.at(id).has_value(); };
  std::unique_lock lock(mutex_);
  bool came = true;
  if (deadline) came = answered_.wait_until(lock, *deadline, done);
  else answered_.wait(lock, done);
  auto node = waiting_.extract(id);
  if (came && node.mapped().has_value()) return std::move(*node.mapped());
  if (gone_) return make_error(Code::kUnavailable, std::string("key-value store: ") + kHandler + " went away before answering " + op_name + " of '" + std::string(key) + "'");
  return make_error(Code::kDeadlineExceeded, std::string("key-value store: ") + kHandler + " did not answer " + op_name + " of '" +
                                                 std::string(key) + "' within " + std::to_string(limit.count()) + " ms");
}

Expected<std::string> ErlangKeyValueStore::get(std::string_view key, std::chrono::milliseconds timeout) noexcept {
  return safely("reading the key-value store", [&]() -> Expected<std::string> {
    PB_ASSIGN_OR_RETURN(std::optional<std::string> v, call(Op::kGet, key, {}, timeout));
    if (!v) return make_error(Code::kInternal, "key-value store: the handler answered get of '" + std::string(key) + "' without a value");
    return std::move(*v);
  });
}

Expected<std::string> ErlangKeyValueStore::try_get(std::string_view key) noexcept {
  return safely("reading the key-value store", [&]() -> Expected<std::string> {
    PB_ASSIGN_OR_RETURN(std::optional<std::string> v, call(Op::kTryGet, key, {}, {}));
    if (!v) return make_error(Code::kInternal, "key-value store: the handler answered try_get of '" + std::string(key) + "' without a value");
    return std::move(*v);
  });
}

Status ErlangKeyValueStore::put(std::string_view key, std::string_view value) noexcept {
  return safely("writing the key-value store", [&]() -> Status {
    PB_RETURN_IF_ERROR(call(Op::kPut, key, value, {}));
    return ok();
  });
}

bool ErlangKeyValueStore::answer(uint64_t id, Expected<std::optional<std::string>> outcome) {
  {
    std::lock_guard lock(mutex_);
    auto it = waiting_.find(id);
    if (it == waiting_.end() || it->second.has_value()) return false;
    it->second = std::move(outcome);
  }
  answered_.notify_all();
  return true;
}

void ErlangKeyValueStore::handler_gone() {
  {
    std::lock_guard lock(mutex_);
    gone_ = true;
  }
  answered_.notify_all();
}

namespace {

Expected<KeyValueResource*> get_store(ErlNifEnv* env, ERL_NIF_TERM term) {
  auto* kv = get_resource<KeyValueResource>(env, term);
  if (!kv) return invalid_argument("not a plugboard key-value store");
  return kv;
}

// {:ok, binary} | :ok | {:error, code_atom, message}
Expected<Expected<std::optional<std::string>>> get_reply(ErlNifEnv* env, ERL_NIF_TERM term) {
  if (enif_is_identical(term, atom(env, "ok"))) return Expected<std::optional<std::string>>(std::nullopt);
  int arity;
  const ERL_NIF_TERM* items;
  if (enif_get_tuple(env, term, &arity, &items)) {
    if (arity == 2 && enif_is_identical(items[0], atom(env, "ok"))) {
      PB_ASSIGN_OR_RETURN(ErlNifBinary bin, get_binary(env, items[1], "reply value"));
      return Expected<std::optional<std::string>>(std::string(reinterpret_cast<const char*>(bin.data), bin.size));
    }
    if (arity == 3 && enif_is_identical(items[0], atom(env, "error"))) {
      char code[64];
      if (enif_get_atom(env, items[1], code, sizeof(code), ERL_NIF_LATIN1) <= 0)
        return invalid_argument("reply: the error code must be an atom");
      PB_ASSIGN_OR_RETURN(std::string message, get_string(env, items[2], "reply message"));
      Code c = Code::kUnknown;
      for (int i = 0; i <= static_cast<int>(Code::kUnauthenticated); ++i) {
        std::string name = code_name(static_cast<Code>(i));
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (name == code) c = static_cast<Code>(i);
      }
      return Expected<std::optional<std::string>>(std::unexpected(Error(c, std::move(message))));
    }
  }
  return invalid_argument("reply must be {:ok, binary}, :ok or {:error, code, message}");
}

}  // namespace

PB_NIF(nif_kv_store_new) {
  (void)argc;
  return guarded(env, "making a key-value store", [&] {
    auto handler = get_pid(env, argv[0], "handler");
    if (!handler) return make_error(env, handler.error());
    auto timeout = get_int_in(env, argv[1], "call_timeout", 0, kMaxTimeoutMs);
    if (!timeout) return make_error(env, timeout.error());
    auto store = std::make_shared<ErlangKeyValueStore>(*handler, std::chrono::milliseconds(*timeout));
    NewResource made = make_resource_term(env, std::make_unique<KeyValueResource>(store));
    ErlNifMonitor monitor;
    // A handler already gone: the monitor's down callback runs at once and the store refuses calls.
    if (enif_monitor_process(env, made.handle, &*handler, &monitor) != 0) store->handler_gone();
    return make_ok(env, made.term);
  });
}

namespace {
// The bytes of a reply's value ({:ok, binary}), 0 for any other reply.
size_t reply_bytes(ErlNifEnv* env, ERL_NIF_TERM reply) {
  int arity;
  const ERL_NIF_TERM* items;
  ErlNifBinary bin;
  if (enif_get_tuple(env, reply, &arity, &items) && arity == 2 && enif_inspect_binary(env, items[1], &bin)) return bin.size;
  return 0;
}
}  // namespace

PB_NIF(nif_kv_reply) {
  return guarded(env, "answering a key-value store call", [&] {
    // A large value is copied on a dirty scheduler.
    if (on_normal_scheduler() && reply_bytes(env, argv[2]) > kDirtyCopyBytes)
      return enif_schedule_nif(env, "kv_reply", ERL_NIF_DIRTY_JOB_CPU_BOUND, nif_kv_reply, argc, argv);
    auto kv = get_store(env, argv[0]);
    if (!kv) return make_error(env, kv.error());
    auto id = get_uint64(env, argv[1], "request id");
    if (!id) return make_error(env, id.error());
    auto reply = get_reply(env, argv[2]);
    if (!reply) return make_error(env, reply.error());
    return atom(env, (*kv)->store->answer(*id, std::move(*reply)) ? "ok" : "late");
  });
}

PB_NIF(nif_kv_call) {
  return guarded(env, "calling a key-value store", [&] {
    auto kv = get_store(env, argv[0]);
    if (!kv) return make_error(env, kv.error());
    char op[16];
    if (enif_get_atom(env, argv[1], op, sizeof(op), ERL_NIF_LATIN1) <= 0)
      return make_error(env, Code::kInvalidArgument, "op must be :get, :try_get or :put");
    const std::string which = op;
    if (which != "get" && which != "try_get" && which != "put")
      return make_error(env, Code::kInvalidArgument, "op must be :get, :try_get or :put, not :" + which);
    auto key = get_binary(env, argv[2], "key");
    if (!key) return make_error(env, key.error());
    std::string key_bytes(reinterpret_cast<const char*>(key->data), key->size);
    std::string value;
    int64_t timeout_ms = 0;
    if (which == "get" && enif_is_identical(argv[3], atom(env, "infinity"))) {
      timeout_ms = std::chrono::milliseconds::max().count();  // the C++ store's "forever"
    } else if (which == "get") {
      auto t = get_int_in(env, argv[3], "timeout", 0, kMaxTimeoutMs);
      if (!t) return make_error(env, t.error());
      timeout_ms = *t;
    } else if (which == "put") {
      auto v = get_binary(env, argv[3], "value");
      if (!v) return make_error(env, v.error());
      // A large value is copied on a dirty scheduler.
      if (on_normal_scheduler() && v->size > kDirtyCopyBytes)
        return enif_schedule_nif(env, "kv_call", ERL_NIF_DIRTY_JOB_CPU_BOUND, nif_kv_call, argc, argv);
      value.assign(reinterpret_cast<const char*>(v->data), v->size);
    }
    ErlNifPid caller;
    if (!enif_self(env, &caller)) return make_error(env, Code::kInternal, "kv_call: no calling process");
    auto ref_env = std::make_shared<OwnedEnv>();
    if (!*ref_env) return make_error(env, Code::kResourceExhausted, "kv_call: no memory for the reply");
    ERL_NIF_TERM ref = enif_make_copy(ref_env->get(), argv[4]);
    std::shared_ptr<ErlangKeyValueStore> store = (*kv)->store;
    bool posted = launch_pool().post([=, key_bytes = std::move(key_bytes), value = std::move(value)]() mutable {
      ErlNifEnv* e = ref_env->get();
      ERL_NIF_TERM result;
      if (which == "get") {
        auto v = store->get(key_bytes, std::chrono::milliseconds(timeout_ms));
        result = v ? make_ok(e, make_key(e, *v)) : make_error(e, v.error());
      } else if (which == "try_get") {
        auto v = store->try_get(key_bytes);
        result = v ? make_ok(e, make_key(e, *v)) : make_error(e, v.error());
      } else {
        result = make_status(e, store->put(key_bytes, value));
      }
      (void)send_from_thread(caller, *ref_env, enif_make_tuple2(e, ref, result));
    });
    if (!posted) return make_error(env, Code::kResourceExhausted, "kv_call: no thread to run the call on");
    return atom(env, "ok");
  });
}

PB_NIF(nif_open_distributed) {
  (void)argc;
  return guarded(env, "opening a plugin as a node of a multi-host job", [&] {
    auto path = get_path(env, argv[0], "plugin");
    if (!path) return make_error(env, path.error());
    auto options = get_create_options(env, argv[1]);
    if (!options) return make_error(env, options.error());
    api::Distribution distribution;
    if (!is_nil(env, argv[2])) {
      auto kv = get_store(env, argv[2]);
      if (!kv) return make_error(env, kv.error());
      distribution.kv_store = (*kv)->store;
    }
    if (!is_nil(env, argv[3])) {
      auto id = get_int_in(env, argv[3], "node_id", 0, INT32_MAX);
      if (!id) return make_error(env, id.error());
      distribution.node_id = *id;
    }
    if (!is_nil(env, argv[4])) {
      auto n = get_int_in(env, argv[4], "num_nodes", 1, INT32_MAX);
      if (!n) return make_error(env, n.error());
      distribution.num_nodes = *n;
    }
    ErlNifPid caller;
    if (!enif_self(env, &caller)) return make_error(env, Code::kInternal, "open_distributed: no calling process");
    auto reply_env = std::make_shared<OwnedEnv>();
    if (!*reply_env) return make_error(env, Code::kResourceExhausted, "open_distributed: no memory for the reply");
    ERL_NIF_TERM ref = enif_make_copy(reply_env->get(), argv[5]);
    bool posted = launch_pool().post([=, plugin = std::move(*path), options = std::move(*options)] {
      ErlNifEnv* e = reply_env->get();
      auto client = api::Client::open(plugin, options, distribution);
      ERL_NIF_TERM result = client ? make_ok(e, make_client_term(e, std::move(*client))) : make_error(e, client.error());
      (void)send_from_thread(caller, *reply_env, enif_make_tuple2(e, ref, result));
    });
    if (!posted) return make_error(env, Code::kResourceExhausted, "open_distributed: no thread to open the plugin on");
    return atom(env, "ok");
  });
}

}  // namespace plugboard::nif
