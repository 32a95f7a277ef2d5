#include "callback/device_bridge.h"

#include "callback/device_bridge_abi.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <mutex>

#include "base/environment.h"
#include "base/self_location.h"
#include "platforms/bridge_file.h"
#include "platforms/registry.h"
#include "plugin/native_library.h"

namespace plugboard {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The bridge file of the platform whose callbacks register under `platform`; for a platform that has
// none, the file it would have (so a missing one is named with every place looked in).
platforms::DeviceBridgeFile bridge_file(std::string_view platform) {
  const platforms::PlatformTraits* p = platforms::platform_for_ffi(platform);
  if (p && p->callbacks->bridge) return *p->callbacks->bridge;
  return platforms::device_bridge_file(platform);
}

}  // namespace

std::string device_bridge_file_name(std::string_view platform) { return bridge_file(platform).file_name; }

std::vector<std::filesystem::path> device_bridge_search_path(std::string_view platform,
                                                              const std::filesystem::path& plugin_path) {
  std::vector<std::filesystem::path> out;
  const platforms::DeviceBridgeFile bridge = bridge_file(platform);
  const std::string& file = bridge.file_name;
  // The bundle's copy (beside its plugin, verified with it as a companion) wins over the variable.
  if (!plugin_path.empty()) out.push_back(plugin_path.parent_path() / file);
  if (auto env = environment_override(bridge.variable.c_str())) out.emplace_back(*env);
  // Installed: beside the executable or in its ../lib, or beside libplugboard.so.
  const std::filesystem::path exe_dir = running_executable_folder();
  if (!exe_dir.empty()) {
    out.push_back(exe_dir / file);
    out.push_back(exe_dir.parent_path() / "lib" / file);
  }
  if (const auto code_dir = plugboard_code_folder(); !code_dir.empty() && code_dir != exe_dir) out.push_back(code_dir / file);
#ifdef PLUGBOARD_BUILD_TREE_BRIDGE_DIR
  // Where this build put it, for programs that run inside the build tree (tests) only.
  if (exe_dir.string().starts_with(PLUGBOARD_BUILD_DIR)) out.push_back(std::filesystem::path(PLUGBOARD_BUILD_TREE_BRIDGE_DIR) / file);
#endif
  return out;
}

Expected<const PbDeviceBridge*> load_device_bridge(std::string_view platform, const std::filesystem::path& plugin_path) {
  static std::mutex mutex;
  static std::map<std::filesystem::path, const PbDeviceBridge*> loaded;
  std::lock_guard lock(mutex);
  std::string looked;
  for (const auto& candidate : device_bridge_search_path(platform, plugin_path)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(candidate, ec)) {
      looked += "\n  " + candidate.string();
      continue;
    }
    // The checks every native library gets (plugin/native_library.h): a regular, well-formed ELF
    // shared library, and the file verified with its target when it came from a bundle.
    PB_ASSIGN_OR_RETURN(InspectedLibrary lib, annotate(inspect_library(candidate, "device bridge"), "loading the device bridge"));
    const std::filesystem::path& path = lib.canonical;
    if (auto it = loaded.find(path); it != loaded.end()) return it->second;
    PB_ASSIGN_OR_RETURN(void* handle, annotate(open_inspected_library(lib, "device bridge"), "loading the device bridge"));
    auto* get = reinterpret_cast<PbGetDeviceBridge*>(dlsym(handle, "plugboard_device_bridge"));
    const PbDeviceBridge* bridge = get ? get() : nullptr;
    if (!bridge)
      return make_error(Code::kFailedPrecondition,
                        "device bridge " + path.string() + " exports no plugboard_device_bridge (or it returned null)");
    if (bridge->struct_size < sizeof(PbDeviceBridge) || bridge->version != PB_DEVICE_BRIDGE_VERSION)
      return make_error(Code::kFailedPrecondition, "device bridge " + path.string() + " speaks bridge version " +
                                                       std::to_string(bridge->version) + "; this plugboard speaks " +
                                                       std::to_string(PB_DEVICE_BRIDGE_VERSION));
    if (!bridge->platform || lower(bridge->platform) != lower(platform))
      return make_error(Code::kFailedPrecondition, "device bridge " + path.string() + " serves platform " +
                                                       (bridge->platform ? bridge->platform : "(none)") + ", not " +
                                                       std::string(platform));
    loaded.emplace(path, bridge);
    return bridge;
  }
  return make_error(Code::kNotFound, "no device bridge for platform " + std::string(platform) + " (" +
                                         device_bridge_file_name(platform) + "); looked in:" + looked);
}

}  // namespace plugboard
