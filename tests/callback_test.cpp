// Host callbacks on the three real CPU plugins (PJRT 0.81, 0.106, 0.115): blocking and ordered calls,
// dtypes and shapes, loops, errors, routing per execution, and the refusals.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "callback/context_pool.h"
#include "callback/execute.h"
#include "callback/host_callbacks.h"
#include "callback/ordered_delivery.h"
#include "callback/plugin_ffi.h"
#include "callback/registry.h"
#include "base/thread_pool.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::RealPlugin;

std::string module(const std::string& body_args, const std::string& result_types, const std::string& body) {
  return "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
         "  func.func public @main(" + body_args + ") -> " + result_types + " {\n" + body + "  }\n}\n";
}

template <class T>
std::vector<T> read(const Buffer& b) {
  auto bytes = b.to_host();
  EXPECT_TRUE(bytes) << bytes.error().to_string();
  std::vector<T> out(bytes ? bytes->size() / sizeof(T) : 0);
  if (bytes && !bytes->empty()) std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

template <class T>
std::vector<T> values_of(const TensorView& v) {
  std::vector<T> out(v.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
  return out;
}

class CallbackTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    client_ = testing::make_client(GetParam().path);
    ASSERT_TRUE(client_);
  }

  // Declares the receiver's names on the client, then compiles `text`.
  std::shared_ptr<Executable> compile(const std::string& text, const HostCallbacks& receiver) {
    auto declared = declare_callbacks(*client_, receiver);
    EXPECT_TRUE(declared) << declared.error().to_string();
    auto program = Program::from_bytes(text, "callback_test.mlir");
    EXPECT_TRUE(program) << program.error().to_string();
    auto exe = client_->compile(*program);
    EXPECT_TRUE(exe) << exe.error().to_string();
    return exe ? *exe : nullptr;
  }

  template <class T>
  Buffer upload(const std::vector<T>& v, DType dtype, std::vector<int64_t> dims) {
    auto b = client_->buffer_from_host(std::as_bytes(std::span(v)), dtype, dims);
    EXPECT_TRUE(b) << b.error().to_string();
    return b ? std::move(*b) : Buffer();
  }

  std::shared_ptr<Client> client_;
};

TEST_P(CallbackTest, SelfTestPasses) { PB_ASSERT_OK(self_test_callbacks(*client_)); }

TEST_P(CallbackTest, BlockingCallbackComputesWhatTheProgramUses) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<float> seen;
  PB_ASSERT_OK(receiver->add_blocking("pb_test_scale", [&](const BlockingCall& call) -> Status {
    const TensorView& x = call.operands()[0];
    if (x.shape() != "f32[4]") return invalid_argument("unexpected operand " + x.shape());
    seen = values_of<float>(x);
    const AttributeValue* factor = call.attribute("factor");
    if (!factor || !std::holds_alternative<double>(*factor)) return invalid_argument("no factor attribute");
    std::vector<float> out = seen;
    for (float& v : out) v *= static_cast<float>(std::get<double>(*factor));
    return call.set_result(0, TensorView{DType::kF32, x.dims, std::as_bytes(std::span(out))});
  }));
  auto exe = compile(module("%x: tensor<4xf32>", "tensor<4xf32>",
                            "    %0 = stablehlo.custom_call @pb_test_scale(%x) {api_version = 4 : i32, "
                            "backend_config = {factor = 2.5 : f32}} : (tensor<4xf32>) -> tensor<4xf32>\n"
                            "    %1 = stablehlo.add %0, %x : tensor<4xf32>\n    return %1 : tensor<4xf32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{1, 2, 3, -4}, DType::kF32, {4});
  Buffer* args[] = {&x};
  auto out = execute_with_callbacks(*exe, args, receiver);
  PB_ASSERT_OK(out);
  EXPECT_EQ(seen, (std::vector<float>{1, 2, 3, -4}));
  EXPECT_EQ(read<float>((*out)[0]), (std::vector<float>{3.5f, 7, 10.5f, -14}));
}

// Every dtype plugboard handles, as scalars, zero-size and 2-d arrays: the host sees the program's
// dtype, dims and bytes, and its results come back byte for byte.
TEST_P(CallbackTest, OperandsAndResultsOfEveryDtypeAndShape) {
  const std::vector<std::pair<DType, std::string>> types = {
      {DType::kBool, "i1"}, {DType::kI8, "i8"},     {DType::kI16, "i16"},  {DType::kI32, "i32"},
      {DType::kI64, "i64"}, {DType::kU8, "ui8"},    {DType::kU16, "ui16"}, {DType::kU32, "ui32"},
      {DType::kU64, "ui64"}, {DType::kF16, "f16"},  {DType::kBF16, "bf16"}, {DType::kF32, "f32"},
      {DType::kF64, "f64"}, {DType::kC64, "complex<f32>"}, {DType::kC128, "complex<f64>"}};
  const std::vector<std::pair<std::vector<int64_t>, std::string>> shapes = {
      {{}, ""}, {{0, 3}, "0x3x"}, {{2, 3}, "2x3x"}};
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<std::string> seen;
  // Returns the operand with every byte inverted, so the result is not the operand passed through.
  PB_ASSERT_OK(receiver->add_blocking("pb_test_invert", [&](const BlockingCall& call) -> Status {
    const TensorView& x = call.operands()[0];
    seen.push_back(x.shape());
    std::vector<std::byte> bytes(x.bytes.begin(), x.bytes.end());
    for (auto& b : bytes) b = ~b;
    if (x.dtype == DType::kBool)
      for (auto& b : bytes) b &= std::byte{1};
    return call.set_result(0, TensorView{x.dtype, x.dims, bytes});
  }));
  PB_ASSERT_OK(declare_callbacks(*client_, *receiver));
  for (const auto& [dtype, mlir] : types) {
    for (const auto& [dims, prefix] : shapes) {
      const std::string t = "tensor<" + prefix + mlir + ">";
      auto exe = compile(module("%x: " + t, t,
                                "    %0 = stablehlo.custom_call @pb_test_invert(%x) {api_version = 4 : i32} : (" + t +
                                    ") -> " + t + "\n    return %0 : " + t + "\n"),
                         *receiver);
      ASSERT_TRUE(exe) << t;
      const size_t n = element_count(dims).value() * dtype_size(dtype);
      std::vector<uint8_t> input(n);
      for (size_t i = 0; i < n; ++i) input[i] = static_cast<uint8_t>(dtype == DType::kBool ? (i % 2) : (i * 37 + 11));
      auto x = client_->buffer_from_host(std::as_bytes(std::span(input)), dtype, dims);
      PB_ASSERT_OK(x);
      Buffer* args[] = {&*x};
      seen.clear();
      auto out = execute_with_callbacks(*exe, args, receiver);
      PB_ASSERT_OK(out);
      if (n == 0) {
        // XLA folds a zero-size result to an empty array without making the call.
        ASSERT_LE(seen.size(), 1u) << t;
      } else {
        ASSERT_EQ(seen.size(), 1u) << t;
      }
      if (!seen.empty()) {
        EXPECT_EQ(seen[0], shape_string(dtype, dims)) << t;
      }
      auto got = read<uint8_t>((*out)[0]);
      ASSERT_EQ(got.size(), n) << t;
      for (size_t i = 0; i < n; ++i) {
        const uint8_t want = dtype == DType::kBool ? static_cast<uint8_t>(~input[i] & 1) : static_cast<uint8_t>(~input[i]);
        ASSERT_EQ(got[i], want) << t << " byte " << i;
      }
    }
  }
}

TEST_P(CallbackTest, SeveralCallbacksInOneProgramWithSeveralOperandsAndResults) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<std::string> order;
  PB_ASSERT_OK(receiver->add_blocking("pb_test_sum_and_diff", [&](const BlockingCall& call) -> Status {
    order.push_back("sum_and_diff");
    auto a = values_of<int32_t>(call.operands()[0]);
    auto b = values_of<int32_t>(call.operands()[1]);
    std::vector<int32_t> sum(a.size()), diff(a.size());
    for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i], diff[i] = a[i] - b[i];
    PB_RETURN_IF_ERROR(call.set_result(0, TensorView{DType::kI32, call.operands()[0].dims, std::as_bytes(std::span(sum))}));
    return call.set_result(1, TensorView{DType::kI32, call.operands()[0].dims, std::as_bytes(std::span(diff))});
  }));
  PB_ASSERT_OK(receiver->add_blocking("pb_test_total", [&](const BlockingCall& call) -> Status {
    order.push_back("total");
    int64_t total = 0;
    for (const TensorView& v : call.operands())
      for (int32_t x : values_of<int32_t>(v)) total += x;
    return call.set_result(0, TensorView{DType::kI64, {}, std::as_bytes(std::span(&total, 1))});
  }));
  auto exe = compile(module("%a: tensor<3xi32>, %b: tensor<3xi32>", "(tensor<3xi32>, tensor<i64>)",
                            "    %s, %d = stablehlo.custom_call @pb_test_sum_and_diff(%a, %b) {api_version = 4 : i32} : "
                            "(tensor<3xi32>, tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>)\n"
                            "    %t = stablehlo.custom_call @pb_test_total(%s, %d) {api_version = 4 : i32} : "
                            "(tensor<3xi32>, tensor<3xi32>) -> tensor<i64>\n"
                            "    return %s, %t : tensor<3xi32>, tensor<i64>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer a = upload(std::vector<int32_t>{10, 20, 30}, DType::kI32, {3});
  Buffer b = upload(std::vector<int32_t>{1, 2, 3}, DType::kI32, {3});
  Buffer* args[] = {&a, &b};
  auto out = execute_with_callbacks(*exe, args, receiver);
  PB_ASSERT_OK(out);
  EXPECT_EQ(order, (std::vector<std::string>{"sum_and_diff", "total"}));
  EXPECT_EQ(read<int32_t>((*out)[0]), (std::vector<int32_t>{11, 22, 33}));
  EXPECT_EQ(read<int64_t>((*out)[1]), (std::vector<int64_t>{11 + 22 + 33 + 9 + 18 + 27}));
}

// A zero-size operand next to ordinary ones reaches the host with its dims and no bytes.
TEST_P(CallbackTest, AZeroSizeOperandBesideOthersIsPassedWithItsDims) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<std::string> seen;
  PB_ASSERT_OK(receiver->add_blocking("pb_test_zero", [&](const BlockingCall& call) -> Status {
    for (const TensorView& v : call.operands()) seen.push_back(v.shape() + ":" + std::to_string(v.bytes.size()));
    for (const MutableTensorView& r : call.results()) seen.push_back("->" + r.shape());
    PB_RETURN_IF_ERROR(call.set_result(0, call.operands()[1]));
    return call.set_result(1, call.operands()[0]);
  }));
  auto exe = compile(module("%z: tensor<0x3xf32>, %s: tensor<i64>", "(tensor<i64>, tensor<0x3xf32>)",
                            "    %a, %b = stablehlo.custom_call @pb_test_zero(%z, %s) {api_version = 4 : i32} : "
                            "(tensor<0x3xf32>, tensor<i64>) -> (tensor<i64>, tensor<0x3xf32>)\n"
                            "    return %a, %b : tensor<i64>, tensor<0x3xf32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer z = upload(std::vector<float>{}, DType::kF32, {0, 3});
  Buffer s = upload(std::vector<int64_t>{-42}, DType::kI64, {});
  Buffer* args[] = {&z, &s};
  auto out = execute_with_callbacks(*exe, args, receiver);
  PB_ASSERT_OK(out);
  EXPECT_EQ(seen, (std::vector<std::string>{"f32[0,3]:0", "i64[]:8", "->i64[]", "->f32[0,3]"}));
  EXPECT_EQ(read<int64_t>((*out)[0]), (std::vector<int64_t>{-42}));
  EXPECT_TRUE(read<float>((*out)[1]).empty());
}

constexpr const char* kLoopBody = R"(
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %r:2 = stablehlo.while(%i = %c0, %acc = %c0) : tensor<i32>, tensor<i32>
      cond {
        %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        CALL
        %i2 = stablehlo.add %i, %c1 : tensor<i32>
        stablehlo.return %i2, %acc2 : tensor<i32>, tensor<i32>
      }
    return %r#1 : tensor<i32>
)";

std::string loop_program(const std::string& call) {
  std::string body = kLoopBody;
  body.replace(body.find("CALL"), 4, call);
  return module("%n: tensor<i32>", "tensor<i32>", body);
}

TEST_P(CallbackTest, BlockingCallbackInAWhileLoopRunsAThousandTimesInOrder) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<int32_t> seen;
  PB_ASSERT_OK(receiver->add_blocking("pb_test_double", [&](const BlockingCall& call) -> Status {
    const int32_t i = values_of<int32_t>(call.operands()[0])[0];
    const int32_t acc = values_of<int32_t>(call.operands()[1])[0];
    seen.push_back(i);
    const int32_t next = acc + 2 * i;
    return call.set_result(0, TensorView{DType::kI32, {}, std::as_bytes(std::span(&next, 1))});
  }));
  auto exe = compile(loop_program("%acc2 = stablehlo.custom_call @pb_test_double(%i, %acc) {api_version = 4 : i32} : "
                                  "(tensor<i32>, tensor<i32>) -> tensor<i32>"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer n = upload(std::vector<int32_t>{1000}, DType::kI32, {});
  Buffer* args[] = {&n};
  auto run = execute_with_callbacks_async(*exe, args, receiver);
  PB_ASSERT_OK(run);
  PB_ASSERT_OK(run->await());
  EXPECT_EQ(run->blocking_calls(), 1000u);
  ASSERT_EQ(seen.size(), 1000u);
  for (int32_t i = 0; i < 1000; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
  EXPECT_EQ(read<int32_t>(run->outputs[0]), (std::vector<int32_t>{999 * 1000}));
}

TEST_P(CallbackTest, OrderedCallbacksArriveInProgramOrderAndAllBeforeAwaitReturns) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::mutex m;
  std::vector<std::pair<uint64_t, int32_t>> seen;  // (sequence, value)
  std::vector<std::string> labels;
  std::atomic<std::thread::id> thread{};
  PB_ASSERT_OK(receiver->add_ordered("pb_test_log", [&](const OrderedCall& call) -> Status {
    std::lock_guard lock(m);
    thread = std::this_thread::get_id();
    seen.emplace_back(call.sequence, values_of<int32_t>(TensorView{call.operands[0].dtype, call.operands[0].dims,
                                                                   call.operands[0].data})[0]);
    if (const AttributeValue* label = call.attribute("label")) labels.push_back(attribute_to_string(*label));
    return ok();
  }));
  auto exe = compile(loop_program("stablehlo.custom_call @pb_test_log(%i) {api_version = 4 : i32, has_side_effect = true, "
                                  "backend_config = {label = \"i\"}} : (tensor<i32>) -> ()\n"
                                  "        %acc2 = stablehlo.add %acc, %i : tensor<i32>"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer n = upload(std::vector<int32_t>{1000}, DType::kI32, {});
  Buffer* args[] = {&n};
  for (int round = 0; round < 3; ++round) {
    {
      std::lock_guard lock(m);
      seen.clear();
      labels.clear();
    }
    auto run = execute_with_callbacks_async(*exe, args, receiver);
    PB_ASSERT_OK(run);
    PB_ASSERT_OK(run->await());
    // No sleeping, no polling: await() itself guarantees delivery.
    std::lock_guard lock(m);
    ASSERT_EQ(seen.size(), 1000u) << "round " << round;
    for (size_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(seen[i].first, i);
      ASSERT_EQ(seen[i].second, static_cast<int32_t>(i));
    }
    EXPECT_EQ(labels.size(), 1000u);
    EXPECT_EQ(labels.front(), "i");
    EXPECT_EQ(read<int32_t>(run->outputs[0]), (std::vector<int32_t>{999 * 1000 / 2}));
  }
}

// XLA runs independent side-effecting calls in an order of its own (the CPU plugins run twelve
// independent prints last to first); a token threaded through the calls, as JAX threads its ordered
// effects, fixes program order. Tokens are not passed to host functions, and an ordered call may
// return one. A blocking call may take and return a token too.
TEST_P(CallbackTest, ATokenThreadedThroughTheCallsKeepsProgramOrder) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::vector<std::string> seen;
  std::mutex m;
  PB_ASSERT_OK(receiver->add_ordered("pb_test_tok_log", [&](const OrderedCall& call) -> Status {
    std::lock_guard lock(m);
    if (call.operands.size() != 1) return invalid_argument("one array operand expected, tokens left out");
    seen.push_back(attribute_to_string(*call.attribute("label")));
    return ok();
  }));
  PB_ASSERT_OK(receiver->add_blocking("pb_test_tok_neg", [&](const BlockingCall& call) -> Status {
    if (call.operands().size() != 1 || call.results().size() != 1) return invalid_argument("tokens must be left out");
    std::lock_guard lock(m);
    seen.push_back("neg");
    float v = -values_of<float>(call.operands()[0])[0];
    return call.set_result(0, TensorView{DType::kF32, {}, std::as_bytes(std::span(&v, 1))});
  }));
  std::string body = "    %t0 = stablehlo.after_all : !stablehlo.token\n";
  std::vector<std::string> want;
  for (int i = 0; i < 12; ++i) {
    const std::string n = std::to_string(i), next = std::to_string(i + 1);
    body += "    %c" + n + " = stablehlo.constant dense<" + n + ".0> : tensor<3xf32>\n";
    if (i == 6) {
      body += "    %t" + next + ", %neg = stablehlo.custom_call @pb_test_tok_neg(%t" + n + ", %x) {api_version = 4 : i32, "
              "has_side_effect = true} : (!stablehlo.token, tensor<f32>) -> (!stablehlo.token, tensor<f32>)\n";
      want.push_back("neg");
    } else {
      body += "    %t" + next + " = stablehlo.custom_call @pb_test_tok_log(%t" + n + ", %c" + n +
              ") {api_version = 4 : i32, has_side_effect = true, backend_config = {label = \"p" + n +
              "\"}} : (!stablehlo.token, tensor<3xf32>) -> !stablehlo.token\n";
      want.push_back("p" + n);
    }
  }
  body += "    return %neg : tensor<f32>\n";
  auto exe = compile(module("%x: tensor<f32>", "tensor<f32>", body), *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{2.5f}, DType::kF32, {});
  Buffer* args[] = {&x};
  for (int round = 0; round < 3; ++round) {
    seen.clear();
    auto out = execute_with_callbacks(*exe, args, receiver);
    PB_ASSERT_OK(out);
    EXPECT_EQ(seen, want) << "round " << round;
    EXPECT_EQ(read<float>((*out)[0]), (std::vector<float>{-2.5f}));
  }
}

TEST_P(CallbackTest, TheProgramDoesNotWaitForAnOrderedCallback) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> delivered{0};
  PB_ASSERT_OK(receiver->add_ordered("pb_test_slow_log", [&](const OrderedCall&) -> Status {
    released.wait();  // the host is stuck until the test lets it go
    ++delivered;
    return ok();
  }));
  auto exe = compile(module("%x: tensor<4xf32>", "tensor<4xf32>",
                            "    stablehlo.custom_call @pb_test_slow_log(%x) {api_version = 4 : i32, has_side_effect = "
                            "true} : (tensor<4xf32>) -> ()\n    %0 = stablehlo.add %x, %x : tensor<4xf32>\n"
                            "    stablehlo.custom_call @pb_test_slow_log(%0) {api_version = 4 : i32, has_side_effect = "
                            "true} : (tensor<4xf32>) -> ()\n    return %0 : tensor<4xf32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{1, 2, 3, 4}, DType::kF32, {4});
  Buffer* args[] = {&x};
  auto run = execute_with_callbacks_async(*exe, args, receiver);
  PB_ASSERT_OK(run);
  PB_ASSERT_OK(run->wait_executed());  // finished while the host function is still blocked
  EXPECT_EQ(read<float>(run->outputs[0]), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(delivered.load(), 0);
  release.set_value();
  PB_ASSERT_OK(run->await());
  EXPECT_EQ(delivered.load(), 2);
  EXPECT_EQ(run->ordered_calls(), 2u);
}

TEST_P(CallbackTest, AFailingCallbackFailsThatExecutionOnlyWithItsMessage) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::atomic<int> mode{0};  // 0 fine, 1 error, 2 throw, 3 wrong result type
  PB_ASSERT_OK(receiver->add_blocking("pb_test_flaky", [&](const BlockingCall& call) -> Status {
    if (mode == 1) return make_error(Code::kOutOfRange, "the host refused value 7");
    if (mode == 2) throw std::runtime_error("host exploded");
    if (mode == 3) {
      const double wrong[4] = {0, 0, 0, 0};
      const int64_t dims[1] = {4};
      return call.set_result(0, TensorView{DType::kF64, dims, std::as_bytes(std::span(wrong))});
    }
    return call.set_result(0, call.operands()[0]);
  }));
  auto exe = compile(module("%x: tensor<4xf32>", "tensor<4xf32>",
                            "    %0 = stablehlo.custom_call @pb_test_flaky(%x) {api_version = 4 : i32} : (tensor<4xf32>) "
                            "-> tensor<4xf32>\n    return %0 : tensor<4xf32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{1, 2, 3, 4}, DType::kF32, {4});
  Buffer* args[] = {&x};
  const std::vector<std::pair<int, std::string>> failures = {
      {1, "the host refused value 7"},
      {2, "host exploded"},
      {3, "result 0 of host callback 'pb_test_flaky': the program expects f32[4], the host function gave f64[4]"}};
  for (const auto& [m, message] : failures) {
    mode = m;
    auto out = execute_with_callbacks(*exe, args, receiver);
    ASSERT_FALSE(out) << "mode " << m;
    EXPECT_NE(out.error().to_string().find(message), std::string::npos) << out.error().to_string();
    EXPECT_NE(out.error().to_string().find("pb_test_flaky"), std::string::npos) << out.error().to_string();
    mode = 0;  // the client goes on working
    auto again = execute_with_callbacks(*exe, args, receiver);
    PB_ASSERT_OK(again);
    EXPECT_EQ(read<float>((*again)[0]), (std::vector<float>{1, 2, 3, 4}));
  }
}

// Executable::execute_into of a program whose callback has no receiver in this execution (no
// context of its own): the plugin's PJRT_LoadedExecutable_Execute fails it ("carries no plugboard
// receiver"). The caller's output storage, which here holds the call's own argument, must come out
// as it went in.
TEST_P(CallbackTest, AFailedExecuteIntoLeavesTheCallersOutputsAsTheyWere) {
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_test_unrouted", [&](const BlockingCall& call) -> Status {
    return call.set_result(0, call.operands()[0]);
  }));
  auto exe = compile(module("%x: tensor<4xf32>", "tensor<4xf32>",
                            "    %0 = stablehlo.custom_call @pb_test_unrouted(%x) {api_version = 4 : i32} : (tensor<4xf32>) "
                            "-> tensor<4xf32>\n    return %0 : tensor<4xf32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  std::vector<Buffer> outputs;
  outputs.push_back(upload(std::vector<float>{1, 2, 3, 4}, DType::kF32, {4}));
  Buffer* args[] = {&outputs[0]};
  auto failed = exe->execute_into(args, outputs);
  ASSERT_FALSE(failed) << "a callback without a receiver must fail the execution";
  EXPECT_NE(failed.error().to_string().find("carries no plugboard receiver"), std::string::npos) << failed.error().to_string();
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_TRUE(outputs[0].valid());
  EXPECT_EQ(read<float>(outputs[0]), (std::vector<float>{1, 2, 3, 4}));
}

TEST_P(CallbackTest, AFailingOrderedCallbackIsReportedByAwait) {
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_ordered("pb_test_bad_log", [&](const OrderedCall& call) -> Status {
    if (call.sequence == 1) return make_error(Code::kDataLoss, "disk full");
    return ok();
  }));
  auto exe = compile(loop_program("stablehlo.custom_call @pb_test_bad_log(%i) {api_version = 4 : i32, has_side_effect = "
                                  "true} : (tensor<i32>) -> ()\n        %acc2 = stablehlo.add %acc, %i : tensor<i32>"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer n = upload(std::vector<int32_t>{3}, DType::kI32, {});
  Buffer* args[] = {&n};
  auto out = execute_with_callbacks(*exe, args, receiver);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Code::kDataLoss);
  EXPECT_NE(out.error().to_string().find("ordered host callback 'pb_test_bad_log' (call 1)"), std::string::npos)
      << out.error().to_string();
}

TEST_P(CallbackTest, TwoThreadsRunningOneProgramEachReachTheirOwnReceiver) {
  struct Caller {
    std::shared_ptr<HostCallbacks> receiver = std::make_shared<HostCallbacks>();
    std::vector<float> seen;
    std::vector<uint64_t> ordered_seen;
  };
  Caller callers[2];
  for (int c = 0; c < 2; ++c) {
    Caller& me = callers[c];
    PB_ASSERT_OK(me.receiver->add_blocking("pb_test_route", [&me, c](const BlockingCall& call) -> Status {
      me.seen.push_back(values_of<float>(call.operands()[0])[0]);
      const float tag = static_cast<float>(c + 1) * 1000;
      return call.set_result(0, TensorView{DType::kF32, {}, std::as_bytes(std::span(&tag, 1))});
    }));
    PB_ASSERT_OK(me.receiver->add_ordered("pb_test_route_log", [&me](const OrderedCall& call) -> Status {
      me.ordered_seen.push_back(call.execution);
      return ok();
    }));
  }
  auto exe = compile(module("%x: tensor<f32>", "tensor<f32>",
                            "    %0 = stablehlo.custom_call @pb_test_route(%x) {api_version = 4 : i32} : (tensor<f32>) -> "
                            "tensor<f32>\n    stablehlo.custom_call @pb_test_route_log(%x) {api_version = 4 : i32, "
                            "has_side_effect = true} : (tensor<f32>) -> ()\n"
                            "    %1 = stablehlo.add %0, %x : tensor<f32>\n    return %1 : tensor<f32>\n"),
                     *callers[0].receiver);
  ASSERT_TRUE(exe);
  constexpr int kRuns = 100;
  std::atomic<int> failures{0};
  auto work = [&](int c) {
    for (int i = 0; i < kRuns; ++i) {
      const float v = static_cast<float>(c * 100000 + i);
      auto x = client_->buffer_from_host(std::as_bytes(std::span(&v, 1)), DType::kF32, {});
      if (!x) { ++failures; continue; }
      Buffer* args[] = {&*x};
      auto out = execute_with_callbacks(*exe, args, callers[c].receiver);
      if (!out) { ++failures; continue; }
      auto bytes = (*out)[0].to_host();
      float got = 0;
      if (bytes) std::memcpy(&got, bytes->data(), sizeof(got));
      if (got != static_cast<float>(c + 1) * 1000 + v) ++failures;
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures.load(), 0);
  for (int c = 0; c < 2; ++c) {
    ASSERT_EQ(callers[c].seen.size(), static_cast<size_t>(kRuns)) << "caller " << c;
    for (int i = 0; i < kRuns; ++i) EXPECT_EQ(callers[c].seen[static_cast<size_t>(i)], static_cast<float>(c * 100000 + i));
    ASSERT_EQ(callers[c].ordered_seen.size(), static_cast<size_t>(kRuns));
    for (int i = 0; i < kRuns; ++i) EXPECT_EQ(callers[c].ordered_seen[static_cast<size_t>(i)], static_cast<uint64_t>(i + 1));
  }
}

// Executions one after another take the same execute context from the plugin's pool, and the
// context's slot points each one at its own receiver.
TEST_P(CallbackTest, ExecutionsOneAfterAnotherReuseAContextAndEachReachesItsOwnReceiver) {
  std::shared_ptr<HostCallbacks> receivers[2] = {std::make_shared<HostCallbacks>(), std::make_shared<HostCallbacks>()};
  std::vector<float> seen[2];
  for (int r = 0; r < 2; ++r)
    PB_ASSERT_OK(receivers[r]->add_blocking("pb_test_reuse", [&seen, r](const BlockingCall& call) -> Status {
      seen[r].push_back(values_of<float>(call.operands()[0])[0]);
      const float tag = static_cast<float>(r + 1);
      return call.set_result(0, TensorView{DType::kF32, {}, std::as_bytes(std::span(&tag, 1))});
    }));
  auto exe = compile(module("%x: tensor<f32>", "tensor<f32>",
                            "    %0 = stablehlo.custom_call @pb_test_reuse(%x) {api_version = 4 : i32} : (tensor<f32>) -> "
                            "tensor<f32>\n    return %0 : tensor<f32>\n"),
                     *receivers[0]);
  ASSERT_TRUE(exe);
  auto ffi = internal::plugin_ffi(*client_);
  PB_ASSERT_OK(ffi);
  const size_t idle_before = std::max<size_t>((*ffi)->contexts.idle(), 1);  // earlier tests may have left more
  for (int i = 0; i < 10; ++i) {
    const int r = i % 2;
    Buffer x = upload(std::vector<float>{static_cast<float>(i)}, DType::kF32, {});
    Buffer* args[] = {&x};
    auto out = execute_with_callbacks(*exe, args, receivers[r]);
    PB_ASSERT_OK(out);
    EXPECT_EQ(read<float>((*out)[0]), (std::vector<float>{static_cast<float>(r + 1)})) << "execution " << i;
    EXPECT_EQ((*ffi)->contexts.idle(), idle_before) << "execution " << i << " made a context of its own";
  }
  EXPECT_EQ(seen[0], (std::vector<float>{0, 2, 4, 6, 8}));
  EXPECT_EQ(seen[1], (std::vector<float>{1, 3, 5, 7, 9}));
}

// Awaiting needs no delivery thread when the execution has no ordered calls: with every delivery
// thread held up elsewhere (slow completion functions of other executions), await() still returns.
// (Before, the completion went through the receiver's queue and the delivery pool, and waited.)
TEST_P(CallbackTest, AwaitingNeedsNoDeliveryThreadWhenThereAreNoOrderedCalls) {
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_test_no_pool", [](const BlockingCall& call) -> Status {
    return call.set_result(0, call.operands()[0]);
  }));
  auto exe = compile(module("%x: tensor<f32>", "tensor<f32>",
                            "    %0 = stablehlo.custom_call @pb_test_no_pool(%x) {api_version = 4 : i32} : (tensor<f32>) -> "
                            "tensor<f32>\n    return %0 : tensor<f32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  ThreadPool& pool = delivery_pool();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  struct ReleaseOnExit {  // the delivery threads are let go however the test ends
    std::promise<void>& p;
    bool done = false;
    void now() {
      if (!done) p.set_value();
      done = true;
    }
    ~ReleaseOnExit() { now(); }
  } release_on_exit{release};
  std::atomic<size_t> holding{0};
  for (size_t i = 0; i < pool.max_threads(); ++i)
    pool.post([released, &holding] {
      ++holding;
      released.wait();
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (holding.load() < pool.max_threads() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(holding.load(), pool.max_threads()) << "the delivery threads did not all start";
  Buffer x = upload(std::vector<float>{4}, DType::kF32, {});
  auto awaited = std::async(std::launch::async, [&] {
    Buffer* args[] = {&x};
    auto out = execute_with_callbacks(*exe, args, receiver);
    return out ? read<float>((*out)[0]) : std::vector<float>{};
  });
  const bool returned = awaited.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  release_on_exit.now();
  EXPECT_TRUE(returned) << "await() waited for a delivery thread";
  EXPECT_EQ(awaited.get(), (std::vector<float>{4}));
}

// Once host callbacks are set up on a plugin, its plain executions carry an execute context too
// (Plugin::require_execute_context): the plugin's one empty context, which every client of the
// plugin and concurrent executions share (it used to be made and destroyed for every execution).
TEST_P(CallbackTest, PlainExecutionsAfterCallbacksRunConcurrentlyOnOneSharedEmptyContext) {
  PB_ASSERT_OK(self_test_callbacks(*client_));
  ASSERT_TRUE(client_->plugin().needs_execute_context());
  auto first = client_->empty_execute_context();
  PB_ASSERT_OK(first);
  ASSERT_NE(*first, nullptr);
  auto program = Program::from_bytes(module("%x: tensor<4xf32>", "tensor<4xf32>",
                                            "    %0 = stablehlo.add %x, %x : tensor<4xf32>\n    return %0 : tensor<4xf32>\n"),
                                     "plain.mlir");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  PB_ASSERT_OK(exe);
  std::atomic<int> wrong{0};
  auto work = [&](int t) {
    Buffer x = upload(std::vector<float>{1, 2, 3, static_cast<float>(t)}, DType::kF32, {4});
    Buffer* args[] = {&x};
    std::vector<Buffer> outs;
    for (int i = 0; i < 50; ++i) {
      if (!(*exe)->execute_into(args, outs) || read<float>(outs[0]) != std::vector<float>{2, 4, 6, 2.0f * t}) ++wrong;
      auto async = (*exe)->execute_async(args);
      if (!async || !async->done.await() || read<float>(async->outputs[0]) != std::vector<float>{2, 4, 6, 2.0f * t}) ++wrong;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  auto other_client = testing::make_client(GetParam().path);
  ASSERT_TRUE(other_client);
  auto again = other_client->empty_execute_context();
  PB_ASSERT_OK(again);
  EXPECT_EQ(*again, *first);
}

// Moving another execution onto one that is still running drops the running one as its destructor
// would: its state (receiver, pooled context) stays until the plugin is done, and its later calls
// still reach its receiver. (A defaulted move assignment freed the state mid-run: the second call
// found no receiver, or another execution's.)
TEST_P(CallbackTest, AnExecutionAssignedOverWhileRunningStillReachesItsReceiver) {
  auto receiver = std::make_shared<HostCallbacks>();
  std::promise<void> open_gate;
  std::shared_future<void> gate = open_gate.get_future().share();
  std::atomic<bool> gate_ran_inline{false};
  const auto launcher = std::this_thread::get_id();
  std::promise<float> after;
  std::future<float> after_ran = after.get_future();
  PB_ASSERT_OK(receiver->add_blocking("pb_test_gate", [&](const BlockingCall& call) -> Status {
    if (std::this_thread::get_id() == launcher) gate_ran_inline = true;
    else gate.wait_for(std::chrono::seconds(10));
    return call.set_result(0, call.operands()[0]);
  }));
  PB_ASSERT_OK(receiver->add_blocking("pb_test_after_gate", [&](const BlockingCall& call) -> Status {
    after.set_value(values_of<float>(call.operands()[0])[0]);
    return call.set_result(0, call.operands()[0]);
  }));
  // Beside a 32x32 matrix product: XLA's CPU client runs a program of under 1,000 flops inline inside
  // Execute (see facade_test's kHeavyCallbacks), and this one has 65,536.
  auto exe = compile(module("%x: tensor<f32>, %m: tensor<32x32xf32>", "(tensor<f32>, tensor<32x32xf32>)",
                            R"(    %d = "stablehlo.dot"(%m, %m) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %0 = stablehlo.custom_call @pb_test_gate(%x) {api_version = 4 : i32} : (tensor<f32>) -> tensor<f32>
    %1 = stablehlo.custom_call @pb_test_after_gate(%0) {api_version = 4 : i32} : (tensor<f32>) -> tensor<f32>
    return %1, %d : tensor<f32>, tensor<32x32xf32>
)"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{7}, DType::kF32, {});
  Buffer m = upload(std::vector<float>(32 * 32, 0.5f), DType::kF32, {32, 32});
  Buffer* args[] = {&x, &m};
  auto running = execute_with_callbacks_async(*exe, args, receiver);
  PB_ASSERT_OK(running);
  if (gate_ran_inline) {
    open_gate.set_value();
    GTEST_SKIP() << "this plugin ran the program on the launching thread: nothing was running to assign over";
  }
  // Another execution (of a program without callbacks) assigned over the running one.
  auto plain = compile(module("%x: tensor<f32>", "tensor<f32>", "    return %x : tensor<f32>\n"), *receiver);
  ASSERT_TRUE(plain);
  Buffer* plain_args[] = {&x};
  auto other = execute_with_callbacks_async(*plain, plain_args, receiver);
  PB_ASSERT_OK(other);
  *running = std::move(*other);
  open_gate.set_value();
  ASSERT_EQ(after_ran.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the dropped execution's second call never reached its receiver";
  EXPECT_EQ(after_ran.get(), 7.0f);
  auto st = running->await();  // the plain one, queued behind it on the device
  EXPECT_TRUE(st) << st.error().to_string();
}

TEST(ContextPool, KeepsAtMostItsIdleLimitAndHandsOutFreshSlots) {
  auto client = testing::make_client(cpu_plugins().front().path);
  ASSERT_TRUE(client);
  auto ffi = internal::plugin_ffi(*client);
  PB_ASSERT_OK(ffi);
  internal::ContextPool pool(2);
  std::vector<internal::PooledContext> taken;
  for (int i = 0; i < 3; ++i) {
    auto c = pool.acquire(*client, *(*ffi)->extension, (*ffi)->type_id);
    PB_ASSERT_OK(c);
    ASSERT_NE(c->raw(), nullptr);
    taken.push_back(std::move(*c));
  }
  EXPECT_EQ(pool.idle(), 0u);
  for (auto& c : taken)  // each pointed at an execution, as execute_with_callbacks does
    c.slot().state.store(reinterpret_cast<internal::ExecutionState*>(&taken), std::memory_order_relaxed);
  taken.clear();
  EXPECT_EQ(pool.idle(), 2u);  // the third was destroyed
  for (size_t left = 2; left > 0; --left) {
    auto again = pool.acquire(*client, *(*ffi)->extension, (*ffi)->type_id);
    PB_ASSERT_OK(again);
    EXPECT_EQ(pool.idle(), left - 1);
    EXPECT_EQ(again->slot().state.load(), nullptr) << "a context came back still pointing at its last execution";
    taken.push_back(std::move(*again));
  }
}

TEST_P(CallbackTest, ANameBoundTwiceIsRefused) {
  HostCallbacks receiver;
  auto fn = [](const BlockingCall&) -> Status { return ok(); };
  PB_ASSERT_OK(receiver.add_blocking("pb_test_twice", fn));
  auto again = receiver.add_ordered("pb_test_twice", [](const OrderedCall&) -> Status { return ok(); });
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), Code::kAlreadyExists);
  EXPECT_NE(again.error().message().find("'pb_test_twice' is bound already"), std::string::npos);
  auto bad = receiver.add_blocking("9 lives", fn);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("'9 lives' cannot name a host callback"), std::string::npos);
  // Declaring a name twice on one plugin costs nothing and is not an error.
  PB_ASSERT_OK(declare_callback_target(*client_, "pb_test_twice"));
  PB_ASSERT_OK(declare_callback_target(*client_, "pb_test_twice"));
}

TEST_P(CallbackTest, ACallToANameNeverRegisteredFailsToCompileWithThePluginsMessage) {
  auto program = Program::from_bytes(module("%x: tensor<4xf32>", "tensor<4xf32>",
                                            "    %0 = stablehlo.custom_call @pb_test_never_registered(%x) {api_version = 4 "
                                            ": i32} : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>\n"),
                                     "unregistered.mlir");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.error().to_string().find("pb_test_never_registered"), std::string::npos) << exe.error().to_string();
  // The client is fine afterwards.
  PB_ASSERT_OK(self_test_callbacks(*client_));
}

TEST_P(CallbackTest, ANameTheReceiverDoesNotBindOrNoReceiverAtAllFailsTheExecution) {
  PB_ASSERT_OK(declare_callback_target(*client_, "pb_test_unbound"));
  auto program = Program::from_bytes(module("%x: tensor<4xf32>", "tensor<4xf32>",
                                            "    %0 = stablehlo.custom_call @pb_test_unbound(%x) {api_version = 4 : i32} : "
                                            "(tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>\n"),
                                     "unbound.mlir");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  PB_ASSERT_OK(exe);
  Buffer x = upload(std::vector<float>{1, 2, 3, 4}, DType::kF32, {4});
  Buffer* args[] = {&x};
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_test_other", [](const BlockingCall&) -> Status { return ok(); }));
  auto out = execute_with_callbacks(**exe, args, receiver);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().to_string().find("host callback 'pb_test_unbound', which this execution's receiver does not bind "
                                         "(it binds: pb_test_other)"),
            std::string::npos)
      << out.error().to_string();
  auto plain = (*exe)->execute(args);
  ASSERT_FALSE(plain);
  EXPECT_NE(plain.error().to_string().find("carries no plugboard receiver"), std::string::npos) << plain.error().to_string();
}

TEST_P(CallbackTest, AReceiverIsFixedOnceUsed) {
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_test_fixed", [](const BlockingCall& c) { return c.set_result(0, c.operands()[0]); }));
  auto exe = compile(module("%x: tensor<f32>", "tensor<f32>",
                            "    %0 = stablehlo.custom_call @pb_test_fixed(%x) {api_version = 4 : i32} : (tensor<f32>) -> "
                            "tensor<f32>\n    return %0 : tensor<f32>\n"),
                     *receiver);
  ASSERT_TRUE(exe);
  Buffer x = upload(std::vector<float>{1}, DType::kF32, {});
  Buffer* args[] = {&x};
  PB_ASSERT_OK(execute_with_callbacks(*exe, args, receiver));
  auto late = receiver->add_blocking("pb_test_late", [](const BlockingCall&) -> Status { return ok(); });
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code(), Code::kFailedPrecondition);
}

// Plugins whose callbacks cannot work say why, and nothing is registered in them.
TEST(CallbackSupport, APluginWithoutAUsableFfiExtensionIsReportedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {PLUGBOARD_FIXTURE_FAULT_CPU_NO_FFI, "has no FFI extension: it cannot run host callbacks"},
      {PLUGBOARD_FIXTURE_FAULT_CPU_SMALL_FFI, "has an FFI extension of 40 bytes, too old to register handlers (needs 48)"},
      {PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, "host callbacks have no path for platform 'fault'"}};
  for (const auto& [path, message] : cases) {
    auto client = testing::make_client(path);
    ASSERT_TRUE(client) << path;
    auto st = self_test_callbacks(*client);
    ASSERT_FALSE(st) << path;
    EXPECT_NE(st.error().to_string().find(message), std::string::npos) << st.error().to_string();
    EXPECT_NE(st.error().to_string().find(path), std::string::npos) << "names the plugin: " << st.error().to_string();
    HostCallbacks receiver;
    PB_ASSERT_OK(receiver.add_blocking("pb_test_nowhere", [](const BlockingCall&) -> Status { return ok(); }));
    EXPECT_FALSE(declare_callbacks(*client, receiver));
  }
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, CallbackTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard
