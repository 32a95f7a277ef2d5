// Where the tests find the real plugins, the conformance suite and the fixtures. The build passes the
// folders in as compile definitions; a missing real plugin fails the test (set-up did not run), it is
// never silently skipped.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "real_plugins.h"
#include "runtime/client.h"

namespace plugboard::testing {

// A client of the plugin at `path`; a failure fails the calling test (and returns null).
inline std::shared_ptr<Client> make_client(const std::filesystem::path& path) {
  auto plugin = load_plugin(path);
  EXPECT_TRUE(plugin) << plugin.error().to_string();
  if (!plugin) return nullptr;
  auto client = Client::create(*plugin);
  EXPECT_TRUE(client) << client.error().to_string();
  return client ? *client : nullptr;
}

// A fresh folder for one test, removed with all it holds when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string name = (std::filesystem::temp_directory_path() / "plugboard-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(name.data()), nullptr) << std::strerror(errno);
    path_ = name;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // A FIFO with no writer: what a reader that opens it blocking would wait on forever.
  std::filesystem::path fifo(const std::string& name) const {
    const std::filesystem::path p = path_ / name;
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0) << std::strerror(errno);
    return p;
  }
  // A file of `size` bytes that starts with `head` and is a hole after it (no disk space used).
  std::filesystem::path sparse(const std::string& name, std::string_view head, uint64_t size) const {
    const std::filesystem::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << head;
    EXPECT_EQ(::truncate(p.c_str(), static_cast<off_t>(size)), 0) << std::strerror(errno);
    return p;
  }

 private:
  std::filesystem::path path_;
};

// An environment variable set for a scope; what was there before comes back when it ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

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
