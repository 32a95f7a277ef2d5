// The PJRT FFI extension and the XLA FFI C API, the two halves of a host callback.
//
//  - The PJRT FFI extension (PJRT_Extension_Type_FFI) is how a client registers things in the plugin's
//    own FFI registry: a user-data type, a handler for a custom-call target, and user data attached to
//    one execution's PJRT_ExecuteContext. No package ships its header, so its structs are declared
//    here from the public layout (xla/pjrt/c/pjrt_c_api_ffi_extension.h, extension version 3).
//  - The XLA FFI C API (xla/ffi/api/c_api.h, from the jaxlib wheel that set-up fetches) is what the
//    plugin hands a handler: the call frame with its operands, results and attributes, and the
//    function table (errors, execution-context lookup, the device stream).
//
// Both grow between versions without a version bump of their own, so every read is checked against
// the struct_size the plugin gives.
#pragma once

#include <pjrt_c_api.h>
#include <xla/ffi/api/c_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abi/api.h"
#include "base/dtype.h"
#include "base/status.h"

extern "C" {

// --- PJRT FFI extension, version 3 layout (declared here; see the file comment). ---
struct PB_PJRT_FFI_Type_Info {
  void (*deleter)(void* object);
  void (*serialize)(void);    // unused by plugboard; present in the layout
  void (*deserialize)(void);  // unused by plugboard; present in the layout
};

struct PB_PJRT_FFI_Type_Register_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* type_name;
  size_t type_name_size;
  int64_t type_id;  // in-out: 0 asks the plugin to assign one
  const PB_PJRT_FFI_Type_Info* type_info;
};

struct PB_PJRT_FFI_UserData {
  int64_t type_id;
  void* data;
};

struct PB_PJRT_FFI_UserData_Add_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;
  PB_PJRT_FFI_UserData user_data;
};

struct PB_PJRT_FFI_Register_Handler_Args {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // XLA_FFI_Handler*
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;
};

typedef PJRT_Error* PB_PJRT_FFI_Type_Register(PB_PJRT_FFI_Type_Register_Args* args);
typedef PJRT_Error* PB_PJRT_FFI_UserData_Add(PB_PJRT_FFI_UserData_Add_Args* args);
typedef PJRT_Error* PB_PJRT_FFI_Register_Handler(PB_PJRT_FFI_Register_Handler_Args* args);

struct PB_PJRT_FFI_Extension {
  PJRT_Extension_Base base;
  PB_PJRT_FFI_Type_Register* type_register;
  PB_PJRT_FFI_UserData_Add* user_data_add;
  PB_PJRT_FFI_Register_Handler* register_handler;
};

}  // extern "C"

namespace plugboard::abi {

// The plugin's FFI extension, or an error naming the plugin: missing, or too small to hold
// register_handler (an extension older than version 3).
Expected<const PB_PJRT_FFI_Extension*> find_ffi_extension(const Api& api);

// Registers a user-data type by name in the plugin's registry; returns the id the plugin assigned.
Expected<int64_t> ffi_register_type(const Api& api, const PB_PJRT_FFI_Extension& ext, std::string_view type_name);

// Registers `handler` for custom-call target `target` on `platform` ("Host", "CUDA").
Status ffi_register_handler(const Api& api, const PB_PJRT_FFI_Extension& ext, std::string_view target,
                            std::string_view platform, XLA_FFI_Handler* handler);

// Attaches `data` under `type_id` to one execution's context.
Status ffi_add_user_data(const Api& api, const PB_PJRT_FFI_Extension& ext, PJRT_ExecuteContext* context,
                         int64_t type_id, void* data);

// --- Inside a handler: reading the call frame the plugin gives. ---

// True when `api`'s table reaches the function at `offset` (offsetof(XLA_FFI_Api, fn)).
inline bool ffi_api_covers(const XLA_FFI_Api* api, size_t offset) {
  return api && api->struct_size >= offset + sizeof(void*);
}

// XLA FFI element types use XLA's PrimitiveType numbering, not PJRT_Buffer_Type's.
DType dtype_from_ffi(int ffi_type);

// An XLA_FFI_Error for the runtime to carry back to the caller (never throws; null only when the
// plugin's table has no Error_Create).
XLA_FFI_Error* ffi_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const char* message) noexcept;
XLA_FFI_Error_Code ffi_code(Code code) noexcept;

// When the frame is the registration-time metadata query, answers it (the API version the plugin
// speaks, never above this header's, writing only what the given struct_size covers) and returns true.
bool ffi_answer_metadata(XLA_FFI_CallFrame* frame) noexcept;

// The user data of type `type_id` attached to this execution, or null.
void* ffi_execution_user_data(const XLA_FFI_CallFrame* frame, int64_t type_id) noexcept;

}  // namespace plugboard::abi
