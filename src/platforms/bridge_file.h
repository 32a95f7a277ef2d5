// How a device bridge is named (platform.h, DeviceBridgeFile), one rule for every FFI platform: "CUDA"
// → libplugboard_cuda_bridge.so, found through PLUGBOARD_CUDA_BRIDGE. A platform folder names its
// bridge with it; callbacks look for a platform that has none under the same rule (and say where).
#pragma once

#include <string>
#include <string_view>

#include "platforms/platform.h"

namespace plugboard::platforms {

DeviceBridgeFile device_bridge_file(std::string_view ffi_platform, std::string build_hint = "");

}  // namespace plugboard::platforms
