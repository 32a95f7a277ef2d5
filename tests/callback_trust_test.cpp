// Host callbacks against what they cannot trust: call-frame entries whose sizes overflow or whose
// dims are negative, FFI registrations the plugin refuses (the handler slots must come back), a device
// bridge that hands back bad tensors or whose ordered call cannot be queued (await must fail), and
// the CUDA bridge's size arithmetic (bridge_sizes.h, which nvcc compiles apart from plugboard) checked
// against base's byte_size().
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "abi/ffi.h"
#include "platforms/cuda/bridge/bridge_sizes.h"
#include "callback/device_bridge_abi.h"
#include "callback/execute.h"
#include "callback/ffi_dispatch.h"
#include "callback/host_callbacks.h"
#include "callback/plugin_ffi.h"
#include "callback/registry.h"
#include "test_env.h"

namespace plugboard {
namespace {

constexpr int64_t kHuge = (int64_t{1} << 62) + 4;

XLA_FFI_Buffer buffer(XLA_FFI_DataType dtype, std::vector<int64_t>& dims, void* data) {
  XLA_FFI_Buffer b;
  std::memset(&b, 0, sizeof(b));
  b.struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
  b.dtype = dtype;
  b.data = data;
  b.rank = static_cast<int64_t>(dims.size());
  b.dims = dims.data();
  return b;
}

// --- The size of a call-frame entry: the checked byte_size, never a wrapped product. ---

TEST(FrameBuffer, AByteSizePastTheAddressSpaceIsRefusedNotWrapped) {
  float data[4] = {};
  // 2^62 + 4 f32 elements: the product wraps to 16 bytes in 64 bits.
  std::vector<int64_t> dims = {kHuge};
  XLA_FFI_Buffer b = buffer(XLA_FFI_DataType_F32, dims, data);
  PbHostTensor t{};
  auto st = internal::describe_frame_buffer("pb_f", "operand", 1, XLA_FFI_ArgType_BUFFER, &b, t);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code(), Code::kOutOfRange) << st.error().to_string();
  EXPECT_NE(st.error().message().find("operand 1 of host callback 'pb_f'"), std::string::npos) << st.error().message();

  std::vector<int64_t> two = {int64_t{1} << 31, int64_t{1} << 31, 8};  // 2^65 c128 elements
  XLA_FFI_Buffer c = buffer(XLA_FFI_DataType_C128, two, data);
  auto st2 = internal::describe_frame_buffer("pb_f", "result", 0, XLA_FFI_RetType_BUFFER, &c, t);
  ASSERT_FALSE(st2);
  EXPECT_EQ(st2.error().code(), Code::kOutOfRange);
}

TEST(FrameBuffer, NegativeDimsAreRefusedEvenWhenTheirProductIsPositive) {
  float data[6] = {};
  for (std::vector<int64_t> dims : {std::vector<int64_t>{-1}, {2, -3}, {-2, -3}, {0, -1}}) {
    XLA_FFI_Buffer b = buffer(XLA_FFI_DataType_F32, dims, data);
    PbHostTensor t{};
    auto st = internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &b, t);
    ASSERT_FALSE(st) << dims[0];
    EXPECT_EQ(st.error().code(), Code::kInvalidArgument);
    EXPECT_NE(st.error().message().find("negative"), std::string::npos) << st.error().message();
  }
}

TEST(FrameBuffer, GoodEntriesAreDescribedWithTheirBytes) {
  double data[6] = {};
  std::vector<int64_t> dims = {2, 3};
  XLA_FFI_Buffer b = buffer(XLA_FFI_DataType_F64, dims, data);
  PbHostTensor t{};
  PB_ASSERT_OK(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &b, t));
  EXPECT_EQ(t.size_bytes, 48u);
  EXPECT_EQ(t.rank, 2);
  EXPECT_EQ(t.data, data);
  // A zero dimension makes an empty array whatever the others are, and needs no data.
  std::vector<int64_t> empty = {0, kHuge};
  XLA_FFI_Buffer e = buffer(XLA_FFI_DataType_F64, empty, nullptr);
  PB_ASSERT_OK(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &e, t));
  EXPECT_EQ(t.size_bytes, 0u);
  // Rank 0 is one element.
  std::vector<int64_t> scalar;
  XLA_FFI_Buffer s = buffer(XLA_FFI_DataType_S16, scalar, data);
  PB_ASSERT_OK(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &s, t));
  EXPECT_EQ(t.size_bytes, 2u);
}

TEST(FrameBuffer, MissingDimsOrDataAndUnknownTypesAreRefused) {
  float data[4] = {};
  std::vector<int64_t> dims = {4};
  PbHostTensor t{};
  XLA_FFI_Buffer no_dims = buffer(XLA_FFI_DataType_F32, dims, data);
  no_dims.dims = nullptr;
  EXPECT_FALSE(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &no_dims, t));
  XLA_FFI_Buffer negative_rank = buffer(XLA_FFI_DataType_F32, dims, data);
  negative_rank.rank = -1;
  EXPECT_FALSE(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &negative_rank, t));
  XLA_FFI_Buffer no_data = buffer(XLA_FFI_DataType_F32, dims, nullptr);
  EXPECT_FALSE(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &no_data, t));
  XLA_FFI_Buffer token = buffer(XLA_FFI_DataType_TOKEN, dims, data);
  EXPECT_FALSE(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, &token, t));
  EXPECT_FALSE(internal::describe_frame_buffer("pb_f", "operand", 0, XLA_FFI_ArgType_BUFFER, nullptr, t));
}

TEST(HostTensor, ASizeThatDisagreesWithTheDimsIsRefused) {
  float data[4] = {};
  const int64_t dims[1] = {4};
  PbHostTensor good{XLA_FFI_DataType_F32, 1, dims, data, 16};
  PB_ASSERT_OK(internal::check_host_tensor("pb_f", "operand", 0, good));
  PbHostTensor lying = good;
  lying.size_bytes = size_t{1} << 62;
  auto st = internal::check_host_tensor("pb_f", "operand", 2, lying);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message().find("operand 2 of host callback 'pb_f' comes with"), std::string::npos)
      << st.error().message();
  const int64_t negative[1] = {-4};
  PbHostTensor neg{XLA_FFI_DataType_F32, 1, negative, data, 16};
  EXPECT_FALSE(internal::check_host_tensor("pb_f", "operand", 0, neg));
  const int64_t huge[1] = {kHuge};
  PbHostTensor wraps{XLA_FFI_DataType_F32, 1, huge, data, 16};  // 16 is what the old product gave
  EXPECT_FALSE(internal::check_host_tensor("pb_f", "operand", 0, wraps));
}

// --- The handler slot pool. ---

TEST(SlotPool, AReservationNotKeptGoesBackToThePool) {
  const size_t before = internal::bound_target_slots();
  for (size_t i = 0; i < internal::kMaxCallbackTargets + 100; ++i) {
    auto slot = std::make_unique<internal::TargetSlot>();
    slot->name = "pb_reserved_" + std::to_string(i);
    auto binding = internal::bind_target_slot(std::move(slot));
    ASSERT_TRUE(binding) << i << ": " << binding.error().to_string();
    EXPECT_NE(binding->handler(), nullptr);
  }
  EXPECT_EQ(internal::bound_target_slots(), before);
}

TEST(SlotPool, AFullPoolIsRefusedByNameAndRecoversWhenSlotsComeBack) {
  std::vector<internal::SlotBinding> held;
  for (size_t i = internal::bound_target_slots(); i < internal::kMaxCallbackTargets; ++i) {
    auto slot = std::make_unique<internal::TargetSlot>();
    slot->name = "pb_held";
    auto binding = internal::bind_target_slot(std::move(slot));
    ASSERT_TRUE(binding);
    held.push_back(std::move(*binding));
  }
  auto slot = std::make_unique<internal::TargetSlot>();
  slot->name = "pb_one_too_many";
  slot->plugin = "some_plugin.so";
  auto refused = internal::bind_target_slot(std::move(slot));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Code::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("'pb_one_too_many' with some_plugin.so"), std::string::npos);
  held.clear();
  auto again = std::make_unique<internal::TargetSlot>();
  again->name = "pb_after";
  EXPECT_TRUE(internal::bind_target_slot(std::move(again)));
}

// The plugin's own register_handler, called the way a plugin that refuses registrations is: with
// arguments it rejects (a struct_size it does not accept), so the error is the plugin's own.
PB_PJRT_FFI_Register_Handler* g_real_register = nullptr;
PJRT_Error* refusing_register(PB_PJRT_FFI_Register_Handler_Args* args) {
  PB_PJRT_FFI_Register_Handler_Args bad = *args;
  bad.struct_size = 1;
  return g_real_register(&bad);
}

std::string one_call_program(const std::string& target) {
  return "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
         "  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
         "    %0 = stablehlo.custom_call @" + target + "(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>\n"
         "    return %0 : tensor<4xf32>\n  }\n}\n";
}

// Registrations the plugin refuses, more of them than there are slots: each gives its slot back, and
// a good registration afterwards still gets one and works. (The CPU plugins accept every well-formed
// registration, duplicates included, so the refusal is injected: the plugin's FFI extension is
// swapped for a copy whose register_handler passes the plugin arguments it rejects.)
TEST(SlotPool, RefusedRegistrationsOnARealPluginDoNotUseUpTheSlots) {
  auto client = testing::make_client(testing::cpu_plugins()[1].path);  // 0.106 checks struct_size
  ASSERT_TRUE(client);
  PB_ASSERT_OK(self_test_callbacks(*client));
  auto ffi = internal::plugin_ffi(*client);
  PB_ASSERT_OK(ffi);
  const PB_PJRT_FFI_Extension* real = (*ffi)->extension;
  static PB_PJRT_FFI_Extension refusing;
  refusing = *real;
  g_real_register = real->register_handler;
  refusing.register_handler = &refusing_register;
  const size_t before = internal::bound_target_slots();
  (*ffi)->extension = &refusing;
  for (size_t i = 0; i < internal::kMaxCallbackTargets + 20; ++i) {
    const std::string name = "pb_refused_" + std::to_string(i);
    auto st = declare_callback_target(*client, name);
    ASSERT_FALSE(st) << name;
    ASSERT_EQ(st.error().code(), Code::kInvalidArgument) << "the plugin's refusal, not a full pool: " << st.error().to_string();
    if (i == 0) {
      EXPECT_NE(st.error().to_string().find("registering host callback '" + name + "'"), std::string::npos)
          << st.error().to_string();
      EXPECT_NE(st.error().to_string().find("Unexpected PJRT_FFI_Register_Handler_Args size"), std::string::npos)
          << st.error().to_string();
    }
    ASSERT_EQ(internal::bound_target_slots(), before) << "after " << i + 1 << " refused registrations";
  }
  (*ffi)->extension = real;
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_after_refusals", [](const BlockingCall& call) -> Status {
    return call.set_result(0, call.operands()[0]);
  }));
  PB_ASSERT_OK(declare_callbacks(*client, *receiver));
  EXPECT_EQ(internal::bound_target_slots(), before + 1) << "a registration that succeeded keeps its slot";
  auto program = Program::from_bytes(one_call_program("pb_after_refusals"), "after.mlir");
  PB_ASSERT_OK(program);
  auto exe = client->compile(*program);
  PB_ASSERT_OK(exe);
  const float in[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  auto x = client->buffer_from_host(std::as_bytes(std::span(in)), DType::kF32, dims);
  PB_ASSERT_OK(x);
  Buffer* args[] = {&*x};
  auto out = execute_with_callbacks(**exe, args, receiver);
  PB_ASSERT_OK(out);
  auto bytes = (*out)[0].to_host();
  PB_ASSERT_OK(bytes);
  ASSERT_EQ(bytes->size(), sizeof(in));
  EXPECT_EQ(std::memcmp(bytes->data(), in, sizeof(in)), 0);
}

// --- A device bridge (a fake one, on the CPU plugin) that the host side cannot trust. ---

// How the fake bridge hands the ordered call's operand to the host side.
enum class Hand { kGood, kLyingSize };
Hand g_hand = Hand::kGood;

XLA_FFI_Error* fake_run_ordered(XLA_FFI_CallFrame* frame, const PbHostDispatch* host) {
  // As the CUDA bridge's stream callback does: the operand is in host memory (here it always is),
  // enqueue's result cannot reach the plugin any more, and release comes once.
  PbHostTensor t{};
  for (int64_t i = 0; i < frame->args.size; ++i) {
    auto* b = static_cast<XLA_FFI_Buffer*>(frame->args.args[i]);
    if (b->dtype == XLA_FFI_DataType_TOKEN) continue;
    if (!internal::describe_frame_buffer("fake", "operand", i, frame->args.types[i], frame->args.args[i], t)) break;
  }
  if (g_hand == Hand::kLyingSize) t.size_bytes = size_t{1} << 62;
  char message[256] = {0};
  (void)host->enqueue(host->ctx, &t, 1, message, sizeof(message));
  host->release(host->ctx);
  return nullptr;
}

XLA_FFI_Error* fake_run_blocking(XLA_FFI_CallFrame*, const PbHostDispatch*) { return nullptr; }
int fake_available(char*, size_t) { return 0; }

const PbDeviceBridge kFakeBridge = {sizeof(PbDeviceBridge), PB_DEVICE_BRIDGE_VERSION, "Host",
                                    &fake_available,        &fake_run_blocking,      &fake_run_ordered};

class FakeBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = testing::make_client(testing::cpu_plugins()[0].path);
    ASSERT_TRUE(client_);
    PB_ASSERT_OK(self_test_callbacks(*client_));
    auto ffi = internal::plugin_ffi(*client_);
    PB_ASSERT_OK(ffi);
    // Registered by hand with a slot that goes through the bridge (plugboard would only do that for
    // a CUDA client).
    if (!registered_) {
      auto slot = std::make_unique<internal::TargetSlot>();
      slot->name = kTarget;
      slot->plugin = client_->plugin().path().string();
      slot->type_id = (*ffi)->type_id;
      slot->bridge = &kFakeBridge;
      auto binding = internal::bind_target_slot(std::move(slot));
      PB_ASSERT_OK(binding);
      PB_ASSERT_OK(abi::ffi_register_handler(client_->plugin().api(), *(*ffi)->extension, kTarget, (*ffi)->platform,
                                             binding->handler()));
      binding->keep();
      registered_ = true;
    }
    const std::string text =
        "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
        "  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    %t0 = stablehlo.after_all : !stablehlo.token\n"
        "    %t1 = stablehlo.custom_call @" + std::string(kTarget) +
        "(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> "
        "!stablehlo.token\n"
        "    return %x : tensor<4xf32>\n  }\n}\n";
    auto program = Program::from_bytes(text, "bridge.mlir");
    PB_ASSERT_OK(program);
    auto exe = client_->compile(*program);
    PB_ASSERT_OK(exe);
    exe_ = *exe;
  }

  Status run(std::vector<std::vector<float>>& delivered) {
    auto receiver = std::make_shared<HostCallbacks>();
    PB_RETURN_IF_ERROR(receiver->add_ordered(kTarget, [&](const OrderedCall& call) -> Status {
      std::vector<float> v(call.operands.at(0).data.size() / sizeof(float));
      std::memcpy(v.data(), call.operands[0].data.data(), v.size() * sizeof(float));
      delivered.push_back(v);
      return ok();
    }));
    const float in[4] = {1, 2, 3, 4};
    const int64_t dims[1] = {4};
    PB_ASSIGN_OR_RETURN(Buffer x, client_->buffer_from_host(std::as_bytes(std::span(in)), DType::kF32, dims));
    Buffer* args[] = {&x};
    PB_ASSIGN_OR_RETURN(CallbackExecution execution, execute_with_callbacks_async(*exe_, args, receiver));
    return execution.await();
  }

  static constexpr const char* kTarget = "pb_fake_bridge_ordered";
  static inline bool registered_ = false;
  std::shared_ptr<Client> client_;
  std::shared_ptr<Executable> exe_;
};

TEST_F(FakeBridgeTest, AnOrderedCallTheBridgeQueuesIsDelivered) {
  g_hand = Hand::kGood;
  std::vector<std::vector<float>> delivered;
  PB_ASSERT_OK(run(delivered));
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0], (std::vector<float>{1, 2, 3, 4}));
}

// The bridge ignores enqueue's result (it cannot hand it to the plugin): the host side must not lose
// the call silently, await() fails with the reason.
TEST_F(FakeBridgeTest, AnOrderedCallThatCouldNotBeQueuedFailsAwait) {
  g_hand = Hand::kLyingSize;
  std::vector<std::vector<float>> delivered;
  auto st = run(delivered);
  g_hand = Hand::kGood;
  ASSERT_FALSE(st) << "an ordered call was lost and await() succeeded";
  EXPECT_TRUE(delivered.empty());
  const std::string m = st.error().to_string();
  EXPECT_NE(m.find("ordered host callback '" + std::string(kTarget) + "' (call 0) was not delivered"), std::string::npos)
      << m;
  EXPECT_NE(m.find("comes with 4611686018427387904 bytes, but f32[4] takes 16"), std::string::npos) << m;
}

// --- The CUDA bridge's own size arithmetic, against byte_size(). ---

TEST(CudaBridgeSizes, ElementSizesAreBaseDtypeSizes) {
  for (int t = 0; t < 64; ++t) {
    const DType d = abi::dtype_from_ffi(t);
    EXPECT_EQ(plugboard_cuda::element_size(t), d == DType::kInvalid ? 0 : dtype_size(d)) << "XLA type " << t;
  }
}

TEST(CudaBridgeSizes, TheCheckedProductAgreesWithByteSize) {
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {7}, {2, 3, 4}, {0, kHuge}, {kHuge, 0}, {kHuge}, {int64_t{1} << 31, int64_t{1} << 31, 4},
      {-1}, {2, -3}, {-2, -3}, {std::numeric_limits<int64_t>::max()}, {3, std::numeric_limits<int64_t>::max()},
      {int64_t{1} << 60}, {int64_t{1} << 59}};
  for (int t : {XLA_FFI_DataType_PRED, XLA_FFI_DataType_S16, XLA_FFI_DataType_F32, XLA_FFI_DataType_C64,
                XLA_FFI_DataType_C128}) {
    const DType d = abi::dtype_from_ffi(t);
    for (const auto& dims : shapes) {
      size_t got = 12345;
      const bool ok = plugboard_cuda::checked_byte_size(plugboard_cuda::element_size(t),
                                                        static_cast<int64_t>(dims.size()), dims.data(), &got);
      auto want = byte_size(d, dims);
      ASSERT_EQ(ok, want.has_value()) << dtype_name(d) << " rank " << dims.size();
      if (ok) {
        EXPECT_EQ(got, *want) << dtype_name(d) << " rank " << dims.size();
      }
    }
  }
  size_t out = 0;
  EXPECT_FALSE(plugboard_cuda::checked_byte_size(4, -1, nullptr, &out));
  EXPECT_FALSE(plugboard_cuda::checked_byte_size(4, 2, nullptr, &out));
  EXPECT_FALSE(plugboard_cuda::checked_byte_size(0, 0, nullptr, &out));
}

TEST(CudaBridgeSizes, TheArenaGrowsGeometricallyAndNeverOverflows) {
  // The arena's capacity used to be zeroed before it was doubled, so it grew to exactly each request.
  EXPECT_EQ(plugboard_cuda::grown_capacity(4096, 5000), 8192u);
  EXPECT_EQ(plugboard_cuda::grown_capacity(4096, 10000), 10000u);
  EXPECT_EQ(plugboard_cuda::grown_capacity(0, 100), 100u);
  EXPECT_EQ(plugboard_cuda::grown_capacity(8192, 100), 8192u);
  EXPECT_EQ(plugboard_cuda::grown_capacity(SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2), SIZE_MAX / 2 + 2);
  size_t capacity = 0, grows = 0;
  for (size_t want = 1; want < (size_t{1} << 20); want += 1000) {
    if (want > capacity) {
      capacity = plugboard_cuda::grown_capacity(capacity, want);
      ++grows;
    }
  }
  EXPECT_LE(grows, 16u) << "a slowly growing demand reallocates O(log n) times, not once per request";

  size_t total = 0;
  EXPECT_TRUE(plugboard_cuda::add_aligned(&total, 1));
  EXPECT_TRUE(plugboard_cuda::add_aligned(&total, 64));
  EXPECT_EQ(total, 128u);
  EXPECT_FALSE(plugboard_cuda::add_aligned(&total, SIZE_MAX - 10));
  EXPECT_EQ(total, 128u);
  size_t near = SIZE_MAX - 100;
  EXPECT_FALSE(plugboard_cuda::add_aligned(&near, 200));
}

}  // namespace
}  // namespace plugboard
