// Internal: what plugboard registered in one plugin's FFI registry.
#pragma once

#include <cstdint>
#include <set>
#include <mutex>
#include <optional>
#include <string>

#include "abi/ffi.h"
#include "base/status.h"
#include "callback/context_pool.h"
#include "callback/device_bridge_abi.h"
#include "runtime/client.h"

namespace plugboard::internal {

struct PluginFfi {
  const Plugin* plugin = nullptr;
  const PB_PJRT_FFI_Extension* extension = nullptr;
  int64_t type_id = 0;                     // ExecutionState's id in this plugin's registry
  std::string platform;                    // "Host", "CUDA"
  const PbDeviceBridge* bridge = nullptr;  // null on the host platform
  std::set<std::string, std::less<>> targets;  // registered names
  std::set<std::string, std::less<>> builtins;  // plugboard's own kernels registered (declare_builtin_target)
  std::optional<Status> self_test;
  // Execute contexts for executions with host callbacks (thread-safe on its own, no g_mutex). The
  // registry keeps every PluginFfi for the life of the process.
  ContextPool contexts;
};

// The plugin's registrations, made on first use (the FFI extension found, the user-data type
// registered, the device bridge loaded where the platform needs one). Thread-safe; the result
// lives as long as the process. On the execute path: a thread asking again for the same plugin
// takes no lock.
Expected<PluginFfi*> plugin_ffi(const Client& client);

}  // namespace plugboard::internal
