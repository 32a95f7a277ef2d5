// A KeyValueStore as PJRT_Client_Create's kv_get / kv_try_get / kv_put callbacks.
//
// Each callback takes the store from its user_arg (a KeyValueStore*), calls it, and answers as the
// header asks: a value is handed out in memory of ours (new char[]) with value_deleter_callback set
// to free it (delete[], which is also what plugins from before the deleter field do); an error
// becomes a PJRT_Error made by the plugin's own callback_error, carrying the store's code
// (DEADLINE_EXCEEDED, NOT_FOUND, ...) and message. kv_get honours timeout_in_ms (a negative one looks
// once). Nothing throws into the plugin.
#pragma once

#include <pjrt_c_api.h>

#include "plugboard/key_value_store.h"

namespace plugboard::distributed {

PJRT_Error* kv_get_callback(PJRT_KeyValueGetCallback_Args* args) noexcept;
PJRT_Error* kv_try_get_callback(PJRT_KeyValueTryGetCallback_Args* args) noexcept;
PJRT_Error* kv_put_callback(PJRT_KeyValuePutCallback_Args* args) noexcept;

// PJRT 0.61 added kv_try_get_callback to PJRT_Client_Create_Args: an older plugin's struct ends
// before it (and reads nothing there).
inline constexpr int kKvTryGetMinor = 61;

// Sets the create args' kv callbacks to `store` (which must outlive the client). kv_try_get only for
// a plugin of PJRT minor >= kKvTryGetMinor (`plugin_minor`), and only when `args.struct_size` holds it.
void attach_key_value_store(PJRT_Client_Create_Args& args, KeyValueStore* store, int plugin_minor) noexcept;

}  // namespace plugboard::distributed
