#include "platforms/bridge_file.h"

namespace plugboard::platforms {

DeviceBridgeFile device_bridge_file(std::string_view ffi_platform, std::string build_hint) {
  std::string lower(ffi_platform), upper(ffi_platform);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (char& c : upper)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return {"libplugboard_" + lower + "_bridge.so", "PLUGBOARD_" + upper + "_BRIDGE", std::move(build_hint)};
}

}  // namespace plugboard::platforms
