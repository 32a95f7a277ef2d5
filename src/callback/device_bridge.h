// Finding and loading a device bridge (device_bridge_abi.h), the vendor-runtime half of host
// callbacks on an accelerator. Only ever loaded for a client of that vendor's plugin, so the base
// library runs on machines without any GPU software.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "base/status.h"

extern "C" {
struct PbDeviceBridge;  // callback/device_bridge_abi.h
}

namespace plugboard {

// `platform` is an FFI platform ("CUDA"); its bridge's file name and variable are the platform's
// (platforms/registry.h), or for a platform without a bridge the ones platforms/bridge_file.h gives.

// The file name a bridge for `platform` has: "libplugboard_cuda_bridge.so" for "CUDA".
std::string device_bridge_file_name(std::string_view platform);

// Where the bridge for `platform` is looked for, in order: the folder of the plugin (a bundle ships it
// beside its CUDA target, hashed in the manifest as a companion), the platform's variable
// ($PLUGBOARD_CUDA_BRIDGE: a file; read with environment_override, so never in a setuid process), the
// running program's folder, that folder's ../lib, and the folder this build wrote it to.
std::vector<std::filesystem::path> device_bridge_search_path(std::string_view platform,
                                                              const std::filesystem::path& plugin_path);

// Loads (once per file; never unloaded) the first bridge found and checks its version and platform.
// The file gets the checks of plugin/native_library.h: a bundle's bridge verified at boot that changed
// since is refused (DATA_LOSS). NOT_FOUND lists every place looked in.
Expected<const PbDeviceBridge*> load_device_bridge(std::string_view platform, const std::filesystem::path& plugin_path);

}  // namespace plugboard
