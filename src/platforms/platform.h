// What plugboard knows about one platform (CPU, CUDA, ROCm, TPU), as a plain value: its device probe,
// its default boot priority, the words in a plugin's name that say it serves the platform, and how
// host callbacks reach it. Each platform's folder (cpu/, cuda/, ...) makes one; registry.h holds them.
// Nothing here depends on selection or callbacks: those layers read these values.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace plugboard::platforms {

// Which device probe rules a candidate in or out before it is loaded: none, or one platform's.
enum class ProbeKind { kNone, kCuda, kRocm, kTpu };

// What a probe may look at, as plain values (selection fills them in from the process or a test).
struct ProbeInputs {
  std::filesystem::path dev_root = "/dev";
  // Reads an environment variable; unset: every variable reads as unset.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // Resolves a system library ("libcuda.so.1") as the loader would; nullopt when it cannot.
  std::function<std::optional<std::filesystem::path>(const std::string&)> find_library;
};

struct ProbeResult {
  bool available = true;
  std::string reason;  // why not, naming the variable, node or library; or what was found
};

using DeviceProbe = ProbeResult (*)(const ProbeInputs&);

// The vendor-runtime half of host callbacks (callback/device_bridge_abi.h), a shared object of its own,
// named by the rule of bridge_file.h.
struct DeviceBridgeFile {
  std::string file_name;  // what the build writes, a bundle ships beside the plugin, the runtime looks for
  std::string variable;   // the environment variable that names a bridge file
  std::string build_hint;  // how a plugboard build gets one: "build plugboard with nvcc"
};

// How host callbacks reach a client of the platform.
struct CallbackPath {
  std::string ffi_platform;                // the FFI platform handlers are registered under: "Host", "CUDA"
  std::optional<DeviceBridgeFile> bridge;  // needed when operands live on the device
};

struct PlatformTraits {
  std::string name;  // "cuda": a candidate's platform, a manifest's "platform", a known package's
  int priority = 0;  // default boot priority (higher first): accelerators before CPU
  ProbeKind probe = ProbeKind::kNone;
  DeviceProbe run_probe = nullptr;  // null for kNone
  // Never loaded without its probe, even with probes off, and never loaded to be bundled: the
  // platform's runtime start-up can hang on a machine without the device.
  bool probe_mandatory = false;
  // Lower-case words in a plugin's target or file name that say it serves this platform.
  std::vector<std::string> name_patterns;
  // Lower-case names a client of this platform's plugin reports (Client::platform_name()).
  std::vector<std::string> client_platform_names;
  std::optional<CallbackPath> callbacks;  // unset: host callbacks have no path here
  // Device buffers live in host memory: 64-byte-aligned host memory can be adopted without a copy.
  bool buffers_in_host_memory = false;
};

}  // namespace plugboard::platforms
