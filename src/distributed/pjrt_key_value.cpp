#include "distributed/pjrt_key_value.h"

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

#include "base/no_throw.h"

namespace plugboard::distributed {
namespace {

void delete_value(char* value) { delete[] value; }

// The plugin's PJRT_Error for `error`. A plugin that passes no callback_error cannot be told of an
// error: null then (the header makes the field mandatory; every XLA plugin sets it).
PJRT_Error* to_pjrt_error(PJRT_CallbackError* callback_error, const Error& error) noexcept {
  if (!callback_error || !*callback_error) return nullptr;
  std::string message;
  try {
    message = error.to_string();
  } catch (...) {
    // Out of memory building the message: the code alone still reaches the plugin.
  }
  return (*callback_error)(static_cast<PJRT_Error_Code>(static_cast<int>(error.code())), message.data(),
                           message.size());
}

Expected<KeyValueStore*> store_of(void* user_arg, const char* callback) {
  if (!user_arg)
    return make_error(Code::kFailedPrecondition, std::string(callback) + " called without a store in user_arg");
  return static_cast<KeyValueStore*>(user_arg);
}

// Copies `value` into memory the plugin frees through the deleter.
template <class Args>
Status hand_out(Args* args, const std::string& value) {
  return no_throw("handing a key-value store value to the plugin", [&]() -> Status {
    char* copy = new char[value.size()];
    std::memcpy(copy, value.data(), value.size());
    args->value = copy;
    args->value_size = value.size();
    args->value_deleter_callback = &delete_value;
    return ok();
  });
}

template <class Args>
PJRT_Error* answer(Args* args, Expected<std::string> value) noexcept {
  if (!value) return to_pjrt_error(args->callback_error, value.error());
  if (Status handed = hand_out(args, *value); !handed) return to_pjrt_error(args->callback_error, handed.error());
  return nullptr;
}

std::string_view key_of(const char* key, size_t size) { return key ? std::string_view(key, size) : std::string_view(); }

}  // namespace

PJRT_Error* kv_get_callback(PJRT_KeyValueGetCallback_Args* args) noexcept {
  if (!args) return nullptr;
  auto store = store_of(args->user_arg, "kv_get_callback");
  if (!store) return to_pjrt_error(args->callback_error, store.error());
  std::chrono::milliseconds timeout(args->timeout_in_ms < 0 ? 0 : args->timeout_in_ms);
  return answer(args, (*store)->get(key_of(args->key, args->key_size), timeout));
}

PJRT_Error* kv_try_get_callback(PJRT_KeyValueTryGetCallback_Args* args) noexcept {
  if (!args) return nullptr;
  auto store = store_of(args->user_arg, "kv_try_get_callback");
  if (!store) return to_pjrt_error(args->callback_error, store.error());
  return answer(args, (*store)->try_get(key_of(args->key, args->key_size)));
}

PJRT_Error* kv_put_callback(PJRT_KeyValuePutCallback_Args* args) noexcept {
  if (!args) return nullptr;
  auto store = store_of(args->user_arg, "kv_put_callback");
  if (!store) return to_pjrt_error(args->callback_error, store.error());
  Status put = (*store)->put(key_of(args->key, args->key_size),
                             args->value ? std::string_view(args->value, args->value_size) : std::string_view());
  return put ? nullptr : to_pjrt_error(args->callback_error, put.error());
}

void attach_key_value_store(PJRT_Client_Create_Args& args, KeyValueStore* store, int plugin_minor) noexcept {
  args.kv_get_callback = &kv_get_callback;
  args.kv_get_user_arg = store;
  args.kv_put_callback = &kv_put_callback;
  args.kv_put_user_arg = store;
  constexpr size_t kTryGetEnd = offsetof(PJRT_Client_Create_Args, kv_try_get_user_arg) + sizeof(void*);
  if (plugin_minor >= kKvTryGetMinor && args.struct_size >= kTryGetEnd) {
    args.kv_try_get_callback = &kv_try_get_callback;
    args.kv_try_get_user_arg = store;
  }
}

}  // namespace plugboard::distributed
