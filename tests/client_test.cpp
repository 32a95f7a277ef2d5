// Clients, devices and buffers on the real plugins.
#include <chrono>
#include <cstring>
#include <thread>
#include <numeric>

#include "runtime/client.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::make_client;
using testing::RealPlugin;

class CpuClientTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(CpuClientTest, HasCpuDevices) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  EXPECT_EQ(client->platform_name(), "cpu");
  ASSERT_FALSE(client->devices().empty());
  for (size_t i = 0; i < client->devices().size(); ++i) {
    EXPECT_EQ(client->devices()[i].kind, "cpu");
    EXPECT_EQ(client->devices()[i].id, static_cast<int>(i));
    EXPECT_FALSE(client->devices()[i].description.empty());
  }
}

TEST_P(CpuClientTest, CreateOptionsReachThePlugin) {
  // The CPU plugins take "cpu_device_count": a typed NamedValue (int64) that changes what comes back.
  auto plugin = load_plugin(GetParam().path);
  PB_ASSERT_OK(plugin);
  ClientOptions options;
  options.create_options.push_back({"cpu_device_count", int64_t{3}});
  auto client = Client::create(*plugin, options);
  PB_ASSERT_OK(client);
  EXPECT_EQ((*client)->devices().size(), 3u);
}

TEST_P(CpuClientTest, EveryDtypeRoundTrips) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  for (DType t : all_dtypes()) {
    std::vector<int64_t> dims = {2, 3};
    std::vector<std::byte> data(6 * dtype_size(t));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 7 + 1) & 0x3f);
    if (t == DType::kBool)
      for (auto& b : data) b = static_cast<std::byte>(static_cast<int>(b) & 1);
    auto buffer = client->buffer_from_host(data, t, dims);
    PB_ASSERT_OK(buffer);
    EXPECT_EQ(buffer->dtype(), t);
    EXPECT_EQ(std::vector<int64_t>(buffer->dims().begin(), buffer->dims().end()), dims);
    auto ready = buffer->ready_event();
    PB_ASSERT_OK(ready);
    PB_ASSERT_OK(ready->await());
    auto back = buffer->to_host();
    PB_ASSERT_OK(back);
    EXPECT_EQ(*back, data) << dtype_name(t);
  }
}

TEST_P(CpuClientTest, RankZeroAndZeroSizeBuffers) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  float x = 2.5f;
  auto scalar = client->buffer_from_host(std::as_bytes(std::span(&x, 1)), DType::kF32, {});
  PB_ASSERT_OK(scalar);
  EXPECT_EQ(scalar->dims().size(), 0u);
  float y = 0;
  PB_ASSERT_OK(scalar->to_host(std::as_writable_bytes(std::span(&y, 1))));
  EXPECT_EQ(y, 2.5f);

  std::vector<int64_t> dims = {0};
  auto empty = client->buffer_from_host({}, DType::kF32, dims);
  PB_ASSERT_OK(empty);
  EXPECT_EQ(empty->byte_size(), 0u);
  PB_ASSERT_OK(empty->to_host(std::span<std::byte>()));
}

TEST_P(CpuClientTest, BadBufferArgumentsAreRefusedBeforeThePlugin) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  std::vector<std::byte> data(12);
  std::vector<int64_t> dims = {4};
  auto short_data = client->buffer_from_host(std::span(data).first(8), DType::kF32, dims);
  ASSERT_FALSE(short_data);
  EXPECT_EQ(short_data.error().code(), Code::kInvalidArgument);
  EXPECT_NE(short_data.error().message().find("f32[4] needs 16 bytes, 8 given"), std::string::npos)
      << short_data.error().to_string();

  std::vector<int64_t> negative = {-1};
  auto neg = client->buffer_from_host(data, DType::kF32, negative);
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.error().message().find("negative"), std::string::npos);

  std::vector<int64_t> three = {3};
  auto device = client->buffer_from_host(data, DType::kF32, three, 99);
  ASSERT_FALSE(device);
  EXPECT_NE(device.error().message().find("device index 99 out of range"), std::string::npos);

  auto unknown = client->buffer_from_host(data, static_cast<DType>(42), three);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("unsupported dtype"), std::string::npos);
}

TEST_P(CpuClientTest, DestinationOfWrongSizeIsRefused) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<int64_t> dims = {4};
  auto buffer = client->buffer_from_host(std::as_bytes(std::span(x)), DType::kF32, dims);
  PB_ASSERT_OK(buffer);
  std::vector<std::byte> small(8);
  auto r = buffer->to_host(small);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("destination holds 8 bytes"), std::string::npos) << r.error().to_string();
}

TEST_P(CpuClientTest, AdoptedMemoryIsAliasedAndReleasedWhenThePluginIsDone) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  constexpr size_t n = 1024;
  std::shared_ptr<float> block(static_cast<float*>(std::aligned_alloc(64, n * sizeof(float))), std::free);
  std::iota(block.get(), block.get() + n, 0.0f);
  std::weak_ptr<float> watch = block;
  std::vector<int64_t> dims = {static_cast<int64_t>(n)};
  {
    auto buffer = client->buffer_from_host_adopt(std::as_bytes(std::span(block.get(), n)), block, HostMemory::kMutable, DType::kF32, dims);
    PB_ASSERT_OK(buffer);
    block.reset();
    EXPECT_FALSE(watch.expired()) << "the memory must stay alive while the device buffer uses it";
    std::vector<float> back(n);
    PB_ASSERT_OK(buffer->to_host(std::as_writable_bytes(std::span(back))));
    EXPECT_EQ(back[0], 0.0f);
    EXPECT_EQ(back[n - 1], static_cast<float>(n - 1));
  }
  // The plugin signals "done with the host memory" on its own thread, shortly after the buffer goes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(watch.expired()) << "the memory must be released once the buffer is gone";
}

TEST_P(CpuClientTest, BuffersOutliveTheirClientHandle) {
  auto client = make_client(GetParam().path);
  ASSERT_TRUE(client);
  std::vector<int32_t> x = {7, 8, 9};
  std::vector<int64_t> dims = {3};
  auto buffer = client->buffer_from_host(std::as_bytes(std::span(x)), DType::kI32, dims);
  PB_ASSERT_OK(buffer);
  client.reset();  // the buffer keeps the client alive
  auto back = buffer->to_host();
  PB_ASSERT_OK(back);
  EXPECT_EQ(std::memcmp(back->data(), x.data(), 12), 0);
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, CpuClientTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

TEST(FaultPluginClientTest, ApiTooSmallForAFunctionIsRefusedBeforeCallingIt) {
  // The table ends before PJRT_Client_Create: the guard must refuse the call, not read past the end.
  auto plugin = load_plugin(PLUGBOARD_FIXTURE_FAULT_SMALL_API);
  PB_ASSERT_OK(plugin);
  auto client = Client::create(*plugin);
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code(), Code::kUnimplemented);
  const std::string m = client.error().message();
  EXPECT_NE(m.find("is too small to hold PJRT_Client_Create"), std::string::npos) << m;
  EXPECT_NE(m.find("fault_small_api"), std::string::npos) << m;
}

TEST(CudaClientTest, NoGpuComesBackAsAnErrorValueAndTheProcessGoesOn) {
  auto plugin = load_plugin(testing::cuda_plugin().path);
  PB_ASSERT_OK(plugin);
  auto client = Client::create(*plugin);
  if (client) GTEST_SKIP() << "a GPU is visible on this machine: " << (*client)->devices().size() << " device(s)";
  const std::string text = client.error().to_string();
  EXPECT_NE(text.find("No visible GPU devices"), std::string::npos) << text;
  EXPECT_NE(text.find("PJRT_Client_Create"), std::string::npos) << text;
  EXPECT_NE(text.find("xla_cuda_plugin.so"), std::string::npos) << text;
  EXPECT_EQ(client.error().code(), Code::kFailedPrecondition);

  // The same process still runs programs on a CPU plugin.
  auto cpu = make_client(cpu_plugins()[0].path);
  ASSERT_TRUE(cpu);
  auto program = Program::from_bytes(testing::kAddF32x4);
  PB_ASSERT_OK(program);
  auto exe = cpu->compile(*program);
  PB_ASSERT_OK(exe);
}

}  // namespace
}  // namespace plugboard
