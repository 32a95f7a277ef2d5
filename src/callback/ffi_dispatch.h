// Internal: the FFI handlers plugboard registers in plugins. One handler function per (plugin,
// target name) pair, drawn from a fixed pool: the call frame does not say which target it was
// called for, so each registered pair gets a handler of its own that knows its slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

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

// A handler bound to a slot of the pool, for one registration attempt. Until keep() is called the
// slot is only reserved: destroying the binding returns it to the pool (the registration failed, so
// the plugin does not hold the handler). After keep() the slot stays bound for the life of the
// process: a plugin keeps the handler pointers it registered for its lifetime, and plugins are never
// unloaded, so a slot whose registration succeeded can never be reused safely.
class SlotBinding {
 public:
  SlotBinding(SlotBinding&& o) noexcept;
  SlotBinding& operator=(SlotBinding&&) = delete;
  SlotBinding(const SlotBinding&) = delete;
  SlotBinding& operator=(const SlotBinding&) = delete;
  ~SlotBinding();

  XLA_FFI_Handler* handler() const;
  void keep();  // the registration succeeded

 private:
  friend Expected<SlotBinding> bind_target_slot(std::unique_ptr<TargetSlot> slot);
  explicit SlotBinding(size_t index) : index_(index) {}
  size_t index_;
  bool kept_ = false;
  bool owns_ = true;
};

// Binds `slot` to a free handler (RESOURCE_EXHAUSTED, naming the callback and plugin, when all
// kMaxCallbackTargets are taken). Thread-safe.
Expected<SlotBinding> bind_target_slot(std::unique_ptr<TargetSlot> slot);
// Slots bound or reserved now (for tests and messages).
size_t bound_target_slots();

// Checks one operand or result the plugin put in a call frame (`type` an XLA_FFI_ArgType or RetType,
// `raw` its entry) and describes it as a host tensor: an array of a dtype plugboard passes to host
// functions, with dimensions, none negative, and a byte size from the checked byte_size(). Errors
// name the entry ("operand 1 of host callback 'f'") and what is wrong with it.
Status describe_frame_buffer(std::string_view callback, const char* what, int64_t index, int type, void* raw,
                             PbHostTensor& out);

// Checks a host tensor a device bridge hands back (operands copied to host memory): a dtype plugboard
// passes, dims for its rank, none negative, size_bytes equal to byte_size(dtype, dims), data for a
// non-empty array.
Status check_host_tensor(std::string_view callback, const char* what, size_t index, const PbHostTensor& t);

}  // namespace plugboard::internal
