// Runtime-internal: a device description's kind ("cpu", "NVIDIA H200"), for clients' devices and
// for topologies described without devices.
#pragma once

#include <string>

#include "abi/api.h"

namespace plugboard::internal {

inline Expected<std::string> device_kind(const abi::Api& api, PJRT_DeviceDescription* description) {
  auto kind = PB_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
  kind.device_description = description;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_DeviceDescription_Kind, kind));
  return std::string(abi::view(kind.device_kind, kind.device_kind_size));
}

}  // namespace plugboard::internal
