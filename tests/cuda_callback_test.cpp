// Host callbacks and CUDA: the base binaries never need a CUDA library; the CUDA device bridge builds,
// needs only the driver, and is loaded for a CUDA client only. The tests that need a GPU run where
// the CUDA plugin can create a client and are skipped (with the plugin's own reason) elsewhere.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <regex>

#include "callback/device_bridge.h"
#include "callback/device_bridge_abi.h"
#include "callback/execute.h"
#include "callback/registry.h"
#include "select/elf_dependencies.h"
#include "test_env.h"

namespace plugboard {
namespace {

bool is_cuda_library(const std::string& name) {
  static const std::regex cuda(R"(^lib(cuda|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|nvrtc|nvJitLink|cudnn|nccl)\b.*)");
  return std::regex_search(name, cuda);
}

// Every library the loader would map for `path`, by name.
std::vector<std::string> all_needed(const std::filesystem::path& path) {
  auto report = select::resolve_dependencies(path);
  EXPECT_TRUE(report) << report.error().to_string();
  std::vector<std::string> names;
  if (report)
    for (const auto& d : report->dependencies) names.push_back(d.name);
  return names;
}

TEST(CudaIndependence, TheCliTheIsolatorAndThisTestNeedNoCudaLibrary) {
  for (const std::filesystem::path& binary : {std::filesystem::path(PLUGBOARD_CLI_PATH), std::filesystem::path(PLUGBOARD_ISOLATE_PATH),
                                             std::filesystem::read_symlink("/proc/self/exe")}) {
    const auto names = all_needed(binary);
    EXPECT_FALSE(names.empty()) << binary;
    for (const auto& n : names) EXPECT_FALSE(is_cuda_library(n)) << binary << " needs " << n;
  }
}

#ifdef PLUGBOARD_CUDA_BRIDGE_PATH
TEST(CudaBridge, NeedsOnlyTheDriverAndLoadsOnAMachineWithoutOne) {
  const std::filesystem::path bridge = PLUGBOARD_CUDA_BRIDGE_PATH;
  auto info = select::read_elf_dynamic_info(bridge);
  PB_ASSERT_OK(info);
  for (const auto& n : info->needed) EXPECT_FALSE(is_cuda_library(n)) << "the bridge links " << n << " dynamically";
  ::setenv("PLUGBOARD_CUDA_BRIDGE", bridge.c_str(), 1);
  auto loaded = load_device_bridge("CUDA", {});
  ::unsetenv("PLUGBOARD_CUDA_BRIDGE");
  PB_ASSERT_OK(loaded);
  EXPECT_STREQ((*loaded)->platform, "CUDA");
  char why[512] = {0};
  const int rc = (*loaded)->available(why, sizeof(why));
  if (rc != 0) {
    // No driver or no device here: the reason is the CUDA runtime's.
    EXPECT_NE(std::string(why).find("cudaGetDeviceCount"), std::string::npos) << why;
    std::printf("bridge loaded; CUDA not usable here: %s\n", why);
  }
}
#endif

TEST(CudaBridge, AMissingBridgeIsNamedWithEveryPlaceLookedIn) {
  // ROCm has no bridge (the build tree holds the CUDA one, which the search would find).
  ::setenv("PLUGBOARD_ROCM_BRIDGE", "/nonexistent/libplugboard_rocm_bridge.so", 1);
  auto loaded = load_device_bridge("ROCM", "/nowhere/plugin.so");
  ::unsetenv("PLUGBOARD_ROCM_BRIDGE");
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code(), Code::kNotFound);
  EXPECT_NE(loaded.error().message().find("/nonexistent/libplugboard_rocm_bridge.so"), std::string::npos);
  EXPECT_NE(loaded.error().message().find("/nowhere/libplugboard_rocm_bridge.so"), std::string::npos);
}

// A CUDA client, or the reason there is none here (the test is then skipped, not passed).
std::shared_ptr<Client> cuda_client(std::string& why) {
  auto plugin = load_plugin(testing::cuda_plugin().path);
  if (!plugin) {
    why = plugin.error().to_string();
    return nullptr;
  }
  auto client = Client::create(*plugin);
  if (!client) {
    why = client.error().to_string();
    return nullptr;
  }
  return *client;
}

std::string cuda_module(const std::string& body) {
  return "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n" + body + "}\n";
}

TEST(CudaCallbacks, BlockingAndOrderedCallbacksOnTheGpu) {
  std::string why;
  auto client = cuda_client(why);
  if (!client) GTEST_SKIP() << "no CUDA client on this machine: " << why;
  PB_ASSERT_OK(self_test_callbacks(*client));
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<int32_t> logged;
  PB_ASSERT_OK(receiver->add_blocking("pb_cuda_scale", [](const BlockingCall& call) -> Status {
    std::vector<float> v(call.operands()[0].bytes.size() / 4);
    std::memcpy(v.data(), call.operands()[0].bytes.data(), v.size() * 4);
    for (float& x : v) x *= 3;
    return call.set_result(0, TensorView{DType::kF32, call.operands()[0].dims, std::as_bytes(std::span(v))});
  }));
  PB_ASSERT_OK(receiver->add_ordered("pb_cuda_log", [&](const OrderedCall& call) -> Status {
    int32_t i;
    std::memcpy(&i, call.operands[0].data.data(), 4);
    logged.push_back(i);
    return ok();
  }));
  PB_ASSERT_OK(declare_callbacks(*client, *receiver));
  auto program = Program::from_bytes(cuda_module(R"(
  func.func public @main(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<i32>) {
    %y = stablehlo.custom_call @pb_cuda_scale(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>
    %z = stablehlo.add %y, %x : tensor<4xf32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %r:2 = stablehlo.while(%i = %c0, %acc = %c0) : tensor<i32>, tensor<i32>
      cond {
        %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        stablehlo.custom_call @pb_cuda_log(%i) {api_version = 4 : i32, has_side_effect = true} : (tensor<i32>) -> ()
        %a = stablehlo.add %acc, %i : tensor<i32>
        %i2 = stablehlo.add %i, %c1 : tensor<i32>
        stablehlo.return %i2, %a : tensor<i32>, tensor<i32>
      }
    return %z, %r#1 : tensor<4xf32>, tensor<i32>
  }
)"), "cuda_callbacks.mlir");
  PB_ASSERT_OK(program);
  auto exe = client->compile(*program);
  PB_ASSERT_OK(exe);
  const float x[4] = {1, 2, 3, 4};
  const int32_t n = 1000;
  auto bx = client->buffer_from_host(std::as_bytes(std::span(x)), DType::kF32, std::vector<int64_t>{4});
  auto bn = client->buffer_from_host(std::as_bytes(std::span(&n, 1)), DType::kI32, std::vector<int64_t>{});
  PB_ASSERT_OK(bx);
  PB_ASSERT_OK(bn);
  Buffer* args[] = {&*bx, &*bn};
  auto out = execute_with_callbacks(**exe, args, receiver);
  PB_ASSERT_OK(out);
  auto z = (*out)[0].to_host();
  PB_ASSERT_OK(z);
  float got[4];
  std::memcpy(got, z->data(), sizeof(got));
  EXPECT_EQ(std::vector<float>(got, got + 4), (std::vector<float>{4, 8, 12, 16}));
  ASSERT_EQ(logged.size(), 1000u);
  for (int32_t i = 0; i < 1000; ++i) ASSERT_EQ(logged[static_cast<size_t>(i)], i);
}

}  // namespace
}  // namespace plugboard
