// Where the tests find the real plugins, the conformance suite and the fixtures (the build passes the
// folders in as compile definitions). No library header: tests of the installed facade use it too.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace plugboard::testing {

struct RealPlugin {
  std::string name;  // for test names: "xla_cpu_081"
  std::filesystem::path path;
  int pjrt_minor;
};

// Test names and failure messages print the plugin's short name, not its bytes.
inline void PrintTo(const RealPlugin& p, std::ostream* os) { *os << p.name; }

inline std::filesystem::path deps_dir() { return PLUGBOARD_DEPS_DIR; }
inline std::filesystem::path conformance_dir() { return PLUGBOARD_CONFORMANCE_DIR; }
inline std::filesystem::path fixtures_dir() { return PLUGBOARD_FIXTURES_DIR; }

inline const std::vector<RealPlugin>& cpu_plugins() {
  static const std::vector<RealPlugin> all = {
      {"xla_cpu_081", deps_dir() / "files/xla_cpu_081/xla_cpu_pjrt.so", 81},
      {"xla_cpu_106", deps_dir() / "files/xla_cpu_106/libpjrt_cpu.so", 106},
      {"xla_cpu_115", deps_dir() / "files/xla_cpu_115/pjrt_c_api_cpu_plugin.so", 115},
  };
  return all;
}

inline RealPlugin cuda_plugin() { return {"cuda13_116", deps_dir() / "files/cuda13_116/xla_cuda_plugin.so", 116}; }

}  // namespace plugboard::testing
