// Raw device addresses (src/runtime/device_address.cpp): a buffer's address on its device, and
// buffers that view device memory someone else owns. On the three real CPU plugins (where a device
// address is a host address, so the test can read and write the memory itself), and on the fault
// plugin: one whose PJRT_Api ends before both functions, one with null slots, and a view's release
// under every allocation failure.
#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <memory>
#include <vector>

#include "alloc_sweep.h"
#include "runtime/client.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::make_client;
using testing::RealPlugin;

const int64_t kDims4[] = {4};

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

std::vector<float> floats(const Buffer& b) {
  std::vector<float> out(b.byte_size() / sizeof(float));
  auto copied = b.to_host(std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(copied) << copied.error().to_string();
  return out;
}

// Waits up to 10 s for `count` to reach `want`: a plugin may let go of a view's memory after the view
// is destroyed, on its own thread, once work that read it is done (XLA's 0.106 CPU client does).
bool eventually_equals(const std::atomic<int>& count, int want) {
  for (int i = 0; i < 1000 && count.load() != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return count.load() == want;
}

// Host memory the test owns, aligned as XLA's CPU client wants device memory.
struct alignas(64) Block {
  float v[16];
};

class DeviceAddressTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    client_ = make_client(GetParam().path);
    ASSERT_TRUE(client_);
  }
  std::shared_ptr<Client> client_;
};

TEST_P(DeviceAddressTest, ABuffersDevicePointerIsWhereItsBytesAre) {
  const std::vector<float> data = {1.5f, -2, 3, 4};
  auto buffer = client_->buffer_from_host(bytes_of(data), DType::kF32, kDims4);
  PB_ASSERT_OK(buffer);
  auto address = buffer->device_pointer();
  PB_ASSERT_OK(address);
  ASSERT_NE(*address, 0u);
  auto again = buffer->device_pointer();
  PB_ASSERT_OK(again);
  EXPECT_EQ(*again, *address);
  // A CPU device's memory is the host's: the address is readable here.
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(*address), data.data(), sizeof(float) * 4), 0);
}

TEST_P(DeviceAddressTest, AViewOfABuffersAddressReadsItsBytesAndReleasesOnceWhenDropped) {
  const std::vector<float> data = {10, 20, 30, 40};
  auto source = client_->buffer_from_host(bytes_of(data), DType::kF32, kDims4);
  PB_ASSERT_OK(source);
  auto address = source->device_pointer();
  PB_ASSERT_OK(address);
  auto released = std::make_shared<std::atomic<int>>(0);
  {
    auto view = client_->view_of_device_memory(*address, DType::kF32, kDims4, 0, [released] { ++*released; });
    PB_ASSERT_OK(view);
    EXPECT_EQ(floats(*view), data);
    EXPECT_FALSE(view->donatable());
    EXPECT_EQ(view->view(), BufferView::kForeignDevice);
    EXPECT_EQ(view->shape_string(), "f32[4]");
    auto view_address = view->device_pointer();
    PB_ASSERT_OK(view_address);
    EXPECT_EQ(*view_address, *address);
    EXPECT_EQ(released->load(), 0);  // not while the view lives
  }
  EXPECT_TRUE(eventually_equals(*released, 1)) << released->load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(released->load(), 1);  // and once only
  EXPECT_EQ(floats(*source), data);  // the source is untouched by the view's end
}

TEST_P(DeviceAddressTest, AViewOfHostMemoryTheCallerOwnsReadsWhatWasWrittenWithoutACopy) {
  auto block = std::make_unique<Block>();
  for (int i = 0; i < 16; ++i) block->v[i] = static_cast<float>(i) * 0.5f;
  const int64_t dims[] = {4, 4};
  auto view = client_->view_of_device_memory(reinterpret_cast<uintptr_t>(block->v), DType::kF32, dims);
  PB_ASSERT_OK(view);
  std::vector<float> expected(block->v, block->v + 16);
  EXPECT_EQ(floats(*view), expected);
  // No copy was made: a write to the memory is what the view reads next.
  block->v[5] = 123.0f;
  expected[5] = 123.0f;
  EXPECT_EQ(floats(*view), expected);
  view = Expected<Buffer>(Buffer());  // the view goes before the memory
}

TEST_P(DeviceAddressTest, AnExecutionReadsAViewAndRefusesToTakeItByDonation) {
  auto program = Program::from_bytes(testing::kAddF32x4, "add");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  PB_ASSERT_OK(exe);
  auto block = std::make_unique<Block>();
  for (int i = 0; i < 4; ++i) block->v[i] = static_cast<float>(i + 1);
  auto view = client_->view_of_device_memory(reinterpret_cast<uintptr_t>(block->v), DType::kF32, kDims4);
  PB_ASSERT_OK(view);
  Buffer* args[] = {&*view, &*view};
  auto outputs = (*exe)->execute(args);
  PB_ASSERT_OK(outputs);
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ(floats((*outputs)[0]), (std::vector<float>{2, 4, 6, 8}));

  auto other = client_->buffer_from_host(bytes_of({1, 1, 1, 1}), DType::kF32, kDims4);
  PB_ASSERT_OK(other);
  Buffer* donated_args[] = {&*view, &*other};
  ExecuteOptions donate;
  donate.donate = {0};
  auto refused = (*exe)->execute(donated_args, donate);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("device memory it does not own"), std::string::npos)
      << refused.error().to_string();
  EXPECT_TRUE(view->valid());
  EXPECT_EQ(block->v[0], 1.0f);
}

TEST_P(DeviceAddressTest, RefusedArgumentsAreErrorsAndStillReleaseOnce) {
  auto block = std::make_unique<Block>();
  const auto address = reinterpret_cast<uintptr_t>(block->v);
  struct Case {
    const char* what;
    uintptr_t address;
    DType dtype;
    std::vector<int64_t> dims;
    int device;
    Code code;
    const char* says;
  };
  const Case cases[] = {
      {"address 0", 0, DType::kF32, {4}, 0, Code::kInvalidArgument, "address 0"},
      {"device out of range", address, DType::kF32, {4}, 7, Code::kInvalidArgument, "device index 7"},
      {"negative dimension", address, DType::kF32, {-1}, 0, Code::kInvalidArgument, "invalid dimensions"},
      {"no dtype", address, DType::kInvalid, {4}, 0, Code::kInvalidArgument, "unsupported dtype"},
      // XLA's CPU client wants aligned device memory: the plugin's own refusal comes back.
      {"misaligned", address + 4, DType::kF32, {4}, 0, Code::kInvalidArgument, "CreateViewOfDeviceBuffer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int released = 0;
    auto view = client_->view_of_device_memory(c.address, c.dtype, c.dims, c.device, [&] { ++released; });
    ASSERT_FALSE(view);
    EXPECT_EQ(view.error().code(), c.code) << view.error().to_string();
    EXPECT_NE(view.error().to_string().find(c.says), std::string::npos) << view.error().to_string();
    EXPECT_EQ(released, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, DeviceAddressTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

// A plugin whose PJRT_Api ends before both functions: UNIMPLEMENTED naming the plugin and the
// function, no call through the table.
TEST(DeviceAddressFault, APluginTooOldForTheFunctionsIsUnimplementedNamingThem) {
  auto client = make_client(PLUGBOARD_FIXTURE_FAULT_NO_DEVICE_ADDRESS);
  ASSERT_TRUE(client);
  auto buffer = client->buffer_from_host(bytes_of({1, 2, 3, 4}), DType::kF32, kDims4);
  PB_ASSERT_OK(buffer);
  auto address = buffer->device_pointer();
  ASSERT_FALSE(address);
  EXPECT_EQ(address.error().code(), Code::kUnimplemented);
  EXPECT_NE(address.error().message().find("libfault_no_device_address.so"), std::string::npos) << address.error().to_string();
  EXPECT_NE(address.error().message().find("too small to hold PJRT_Buffer_UnsafePointer"), std::string::npos)
      << address.error().to_string();

  int released = 0;
  auto block = std::make_unique<Block>();
  auto view = client->view_of_device_memory(reinterpret_cast<uintptr_t>(block->v), DType::kF32, kDims4, 0,
                                            [&] { ++released; });
  ASSERT_FALSE(view);
  EXPECT_EQ(view.error().code(), Code::kUnimplemented);
  EXPECT_NE(view.error().message().find("libfault_no_device_address.so"), std::string::npos) << view.error().to_string();
  EXPECT_NE(view.error().message().find("too small to hold PJRT_Client_CreateViewOfDeviceBuffer"), std::string::npos)
      << view.error().to_string();
  EXPECT_EQ(released, 1);
}

// A table that holds the slots but leaves UnsafePointer null; its views work and call on_delete.
TEST(DeviceAddressFault, ANullSlotIsUnimplementedAndAViewReleasesThroughThePlugin) {
  auto client = make_client(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  ASSERT_TRUE(client);
  auto buffer = client->buffer_from_host(bytes_of({1, 2, 3, 4}), DType::kF32, kDims4);
  PB_ASSERT_OK(buffer);
  auto address = buffer->device_pointer();
  ASSERT_FALSE(address);
  EXPECT_EQ(address.error().code(), Code::kUnimplemented);
  EXPECT_NE(address.error().message().find("has a null PJRT_Buffer_UnsafePointer"), std::string::npos)
      << address.error().to_string();

  int released = 0;
  auto view = client->view_of_device_memory(0x1000, DType::kF32, kDims4, 0, [&] { ++released; });
  PB_ASSERT_OK(view);
  EXPECT_EQ(released, 0);
  Buffer moved = std::move(*view);
  EXPECT_EQ(released, 0);
  moved = Buffer();
  EXPECT_EQ(released, 1);
}

// Whatever allocation fails, the call returns (a view or an error) and on_release runs exactly once.
TEST(DeviceAddressFault, OnReleaseRunsExactlyOnceUnderEveryAllocationFailure) {
  auto client = make_client(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  ASSERT_TRUE(client);
  long n = 0;
  bool all_once = true;
  auto result = plugboard::testing::sweep([&] {
    plugboard::testing::disarm();
    auto released = std::make_shared<int>(0);
    std::function<void()> on_release = [released] { ++*released; };
    plugboard::testing::rearm(++n);
    bool made;
    {
      auto view = client->view_of_device_memory(0x2000, DType::kF32, kDims4, 0, std::move(on_release));
      plugboard::testing::disarm();
      made = view.has_value();
      if (made && *released != 0) all_once = false;
    }
    if (*released != 1) all_once = false;
    return made;
  });
  EXPECT_GT(result.calls, 2);
  EXPECT_GT(result.errors, 0);
  EXPECT_TRUE(all_once);
}

}  // namespace
}  // namespace plugboard
