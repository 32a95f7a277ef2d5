// No public entry point lets an exception out, even when an allocation fails anywhere inside it.
//
// This binary replaces the global operator new with one that can be told to fail the Nth allocation
// made on the calling thread. Each entry point is then called with N = 1, 2, 3, ... until a call
// completes without reaching its Nth allocation: every one of those calls must come back (an error
// value or a result), never with an exception (the entry points are noexcept: an exception that
// slipped past no_throw would end in std::terminate and fail this test with it). Only plugboard's own
// code and the fault plugin (C, no operator new) run here: the real plugins' allocations are not ours
// to fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <string>

#include "io/npy.h"
#include "plugin/plugin.h"
#include "runtime/client.h"
#include "runtime/program.h"
#include "alloc_sweep.h"
#include "test_env.h"

namespace plugboard {
namespace {

namespace fs = std::filesystem;
using plugboard::testing::conformance_dir;
using plugboard::testing::disarm;
using plugboard::testing::rearm;
using plugboard::testing::sweep;
using plugboard::testing::SweepResult;

class NoThrowTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(NoThrowTest, ReadingAProgramFile) {
  const fs::path program = conformance_dir() / "cases/add_f32/program.mlir";
  SweepResult r = sweep([&] {
    const bool ok = Program::from_file(program).has_value();
    disarm();
    return ok;
  });
  EXPECT_GT(r.calls, 1);
  std::printf("Program::from_file: %ld calls, %ld errors\n", r.calls, r.errors);
}

TEST_F(NoThrowTest, ReadingAnNpyFile) {
  const fs::path input = conformance_dir() / "cases/add_f32/in0.npy";
  SweepResult r = sweep([&] {
    const bool ok = io::read_npy(input).has_value();
    disarm();
    return ok;
  });
  EXPECT_GT(r.calls, 1);
}

TEST_F(NoThrowTest, LoadingAPluginAndCreatingAClient) {
  // A fresh copy of the fault plugin for every call, so that each is a first load (a load that fails
  // once the library is mapped is final for that file: it is never initialized twice).
  long copies = 0;
  fs::path copy;
  SweepResult loads = sweep([&] {
    disarm();
    copy = dir_ / ("libfault_copy_" + std::to_string(++copies) + ".so");
    fs::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, copy);
    rearm(copies);  // re-armed: the copy above is the test's, not the call's
    const bool ok = load_plugin(copy).has_value();
    disarm();
    return ok;
  });
  EXPECT_GT(loads.calls, 1);
  auto plugin = load_plugin(copy);
  ASSERT_TRUE(plugin) << plugin.error().to_string();
  SweepResult clients = sweep([&] {
    const bool ok = Client::create(*plugin).has_value();
    disarm();
    return ok;
  });
  EXPECT_GT(clients.calls, 10);
}

// Not swept: entry points that hold nlohmann::json values (manifests, lock files, the cache index,
// boot and bundle assembly, which read them). nlohmann::json 3.11 allocates while it destroys a
// non-empty object or array, inside its noexcept destructor, so a failure injected there ends in
// std::terminate whatever plugboard does; their exceptions from hostile input (wrong types, depth,
// duplicate keys) are covered by manifest_test, fetch_test and select_test instead.

}  // namespace
}  // namespace plugboard
