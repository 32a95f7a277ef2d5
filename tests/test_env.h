// Where the tests find the real plugins, the conformance suite and the fixtures. The build passes the
// folders in as compile definitions; a missing real plugin fails the test (set-up did not run), it is
// never silently skipped.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/client.h"

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

// A client of the plugin at `path`; a failure fails the calling test (and returns null).
inline std::shared_ptr<Client> make_client(const std::filesystem::path& path) {
  auto plugin = load_plugin(path);
  EXPECT_TRUE(plugin) << plugin.error().to_string();
  if (!plugin) return nullptr;
  auto client = Client::create(*plugin);
  EXPECT_TRUE(client) << client.error().to_string();
  return client ? *client : nullptr;
}

// A program as MLIR text, for tests that need one of their own.
inline constexpr const char* kAddF32x4 = R"mlir(
module @add attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

}  // namespace plugboard::testing

// Asserts that an Expected/Status holds a value, printing the error otherwise.
#define PB_ASSERT_OK(expr)                                                          \
  do {                                                                              \
    const auto& pb_r_ = (expr);                                                     \
    ASSERT_TRUE(pb_r_.has_value()) << "error: " << pb_r_.error().to_string();       \
  } while (0)
