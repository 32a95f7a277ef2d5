// Internal: the FFI handlers plugboard registers in plugins. One handler function per (plugin,
// target name) pair, drawn from a fixed pool: the call frame does not say which target it was
// called for, so each registered pair gets a handler of its own that knows its slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "abi/ffi.h"
#include "base/status.h"
#include "callback/device_bridge_abi.h"

namespace plugboard::internal {

inline constexpr size_t kMaxCallbackTargets = 512;

struct TargetSlot {
  std::string name;      // the custom-call target
  std::string plugin;    // the plugin's path, for messages
  int64_t type_id = 0;   // the plugin's id for ExecutionState user data
  const PbDeviceBridge* bridge = nullptr;  // null: operands are in host memory (CPU)
};

// Binds `slot` to a free handler and returns the handler (RESOURCE_EXHAUSTED when all are taken).
// Slots are never released: a plugin keeps its registrations for the life of the process.
Expected<XLA_FFI_Handler*> bind_target_slot(std::unique_ptr<TargetSlot> slot);

}  // namespace plugboard::internal
