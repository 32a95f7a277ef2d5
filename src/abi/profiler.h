// The PJRT profiler extension (PJRT_Extension_Type_Profiler): the plugin's own profiler (on the CUDA
// plugin, CUPTI's record of kernels and copies on each stream), driven through a function table the
// plugin hands out. No package plugboard fetches ships its header, so its structs are declared here
// from the public layout (xla/pjrt/c/pjrt_c_api_profiler_extension.h, extension version 1, and
// xla/backends/profiler/plugin/profiler_c_api.h, PLUGIN_PROFILER_VERSION 1):
//
//   extension: PJRT_Extension_Base (struct_size, type, next), then a PLUGIN_Profiler_Api* and an int64
//   traceme_context_id (40 bytes in jax-cuda13-pjrt 0.116);
//   table: struct_size, priv, error_destroy, error_message, error_get_code, create, destroy, start,
//   stop, collect_data.
//
// A profiler is made with serialized tensorflow.ProfileOptions, started, stopped, and its data
// collected as a serialized tensorflow.profiler.XSpace (XLA's plugins hand out their own buffer on the
// first call; others give the size, then fill the caller's buffer on a second). Its
// errors are PLUGIN_Profiler_Error, not PJRT_Error, and are read and freed through the same table.
// Every slot is read only where the plugin's struct_size reaches it.
#pragma once

#include <pjrt_c_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "abi/api.h"
#include "base/status.h"

extern "C" {

struct PB_PLUGIN_Profiler;        // the plugin's profiler, opaque
struct PB_PLUGIN_Profiler_Error;  // the plugin's profiler error, opaque

struct PB_PLUGIN_Profiler_Error_Destroy_Args {
  size_t struct_size;
  void* priv;
  PB_PLUGIN_Profiler_Error* error;
};
struct PB_PLUGIN_Profiler_Error_Message_Args {
  size_t struct_size;
  void* priv;
  const PB_PLUGIN_Profiler_Error* error;
  const char* message;  // out, lives as long as the error
  size_t message_size;  // out
};
struct PB_PLUGIN_Profiler_Error_GetCode_Args {
  size_t struct_size;
  void* priv;
  const PB_PLUGIN_Profiler_Error* error;
  int code;  // out
};
struct PB_PLUGIN_Profiler_Create_Args {
  size_t struct_size;
  const char* options;  // serialized tensorflow.ProfileOptions
  size_t options_size;
  PB_PLUGIN_Profiler* profiler;  // out
};
struct PB_PLUGIN_Profiler_Handle_Args {  // Destroy, Start and Stop take the same struct
  size_t struct_size;
  PB_PLUGIN_Profiler* profiler;
};
struct PB_PLUGIN_Profiler_CollectData_Args {
  size_t struct_size;
  PB_PLUGIN_Profiler* profiler;
  uint8_t* buffer;              // in null: the plugin gives the size (and, XLA's, its own buffer here)
  size_t buffer_size_in_bytes;  // out
};

typedef void PB_PLUGIN_Profiler_Error_Destroy(PB_PLUGIN_Profiler_Error_Destroy_Args* args);
typedef void PB_PLUGIN_Profiler_Error_Message(PB_PLUGIN_Profiler_Error_Message_Args* args);
typedef PB_PLUGIN_Profiler_Error* PB_PLUGIN_Profiler_Error_GetCode(PB_PLUGIN_Profiler_Error_GetCode_Args* args);
typedef PB_PLUGIN_Profiler_Error* PB_PLUGIN_Profiler_Create(PB_PLUGIN_Profiler_Create_Args* args);
typedef PB_PLUGIN_Profiler_Error* PB_PLUGIN_Profiler_Handle_Fn(PB_PLUGIN_Profiler_Handle_Args* args);
typedef PB_PLUGIN_Profiler_Error* PB_PLUGIN_Profiler_CollectData(PB_PLUGIN_Profiler_CollectData_Args* args);

struct PB_PLUGIN_Profiler_Api {
  size_t struct_size;
  void* priv;
  PB_PLUGIN_Profiler_Error_Destroy* error_destroy;
  PB_PLUGIN_Profiler_Error_Message* error_message;
  PB_PLUGIN_Profiler_Error_GetCode* error_get_code;
  PB_PLUGIN_Profiler_Create* create;
  PB_PLUGIN_Profiler_Handle_Fn* destroy;
  PB_PLUGIN_Profiler_Handle_Fn* start;
  PB_PLUGIN_Profiler_Handle_Fn* stop;
  PB_PLUGIN_Profiler_CollectData* collect_data;
};

struct PB_PJRT_Profiler_Extension {
  PJRT_Extension_Base base;
  PB_PLUGIN_Profiler_Api* profiler_api;  // may be null
  int64_t traceme_context_id;            // only for the extension given as an argument
};

}  // extern "C"

namespace plugboard::abi {

// The plugin's profiler table, or an error naming the plugin: UNIMPLEMENTED when its extension chain
// has no profiler, or one whose extension or table is too small to reach collect_data (an older
// layout), or whose table has a null function.
Expected<const PB_PLUGIN_Profiler_Api*> find_profiler_api(const Api& api);

// The calls, each an error naming the plugin and the function on failure (the plugin's message and
// code, its error freed).
Expected<PB_PLUGIN_Profiler*> profiler_create(const Api& api, const PB_PLUGIN_Profiler_Api& table,
                                              std::string_view options);
Status profiler_start(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler);
Status profiler_stop(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler);
Status profiler_destroy(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler);
// The serialized XSpace; at most `max_bytes` (RESOURCE_EXHAUSTED past it).
Expected<std::string> profiler_collect(const Api& api, const PB_PLUGIN_Profiler_Api& table,
                                       PB_PLUGIN_Profiler* profiler, size_t max_bytes);

}  // namespace plugboard::abi
