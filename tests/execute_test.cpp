// Compiling and executing on the real CPU plugins: signatures, argument checks, donation, threads,
// StableHLO versions, compile options.
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/client.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::make_client;
using testing::RealPlugin;

std::shared_ptr<Executable> compile_text(const Client& client, std::string text) {
  auto program = Program::from_bytes(std::move(text), "test.mlir");
  EXPECT_TRUE(program);
  auto exe = client.compile(*program);
  EXPECT_TRUE(exe) << exe.error().to_string();
  return exe ? *exe : nullptr;
}

Buffer f32_buffer(const Client& client, std::vector<float> values) {
  std::vector<int64_t> dims = {static_cast<int64_t>(values.size())};
  auto b = client.buffer_from_host(std::as_bytes(std::span(values)), DType::kF32, dims);
  EXPECT_TRUE(b) << b.error().to_string();
  return b ? std::move(*b) : Buffer();
}

std::vector<float> read_f32(const Buffer& b) {
  std::vector<float> out(b.element_count());
  auto st = b.to_host(std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(st) << st.error().to_string();
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first parameter may alias the output (as jax.jit(donate_argnums=0) lowers it).
const char kDonatingAdd[] = R"mlir(
module @donate attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

class ExecuteTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    client_ = make_client(GetParam().path);
    ASSERT_TRUE(client_);
  }
  std::shared_ptr<Client> client_;
};

TEST_P(ExecuteTest, AddsAndReportsItsSignature) {
  auto exe = compile_text(*client_, testing::kAddF32x4);
  ASSERT_TRUE(exe);
  const Signature& sig = exe->signature();
  ASSERT_TRUE(sig.parameters_known);
  ASSERT_EQ(sig.parameters.size(), 2u);
  EXPECT_EQ(sig.parameters[0].to_string(), "f32[4]");
  ASSERT_EQ(sig.results.size(), 1u);
  EXPECT_EQ(sig.results[0].to_string(), "f32[4]");

  Buffer a = f32_buffer(*client_, {1, 2, 3, 4});
  Buffer b = f32_buffer(*client_, {10, 20, 30, 40});
  Buffer* args[] = {&a, &b};
  auto out = exe->execute(args);
  PB_ASSERT_OK(out);
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(read_f32((*out)[0]), (std::vector<float>{11, 22, 33, 44}));

  // Asynchronous form: outputs come with an event that says when they are computed.
  auto run = exe->execute_async(args);
  PB_ASSERT_OK(run);
  PB_ASSERT_OK(run->done.await());
  EXPECT_TRUE(run->done.is_ready());
  EXPECT_EQ(read_f32(run->outputs[0]), (std::vector<float>{11, 22, 33, 44}));
}

TEST_P(ExecuteTest, WrongArityDtypeAndShapeAreCaughtBeforeThePlugin) {
  auto exe = compile_text(*client_, testing::kAddF32x4);
  ASSERT_TRUE(exe);
  Buffer a = f32_buffer(*client_, {1, 2, 3, 4});
  Buffer short_buf = f32_buffer(*client_, {1, 2, 3});
  std::vector<int32_t> ints = {1, 2, 3, 4};
  std::vector<int64_t> dims = {4};
  auto i = client_->buffer_from_host(std::as_bytes(std::span(ints)), DType::kI32, dims);
  PB_ASSERT_OK(i);

  Buffer* one[] = {&a};
  auto arity = exe->execute(one);
  ASSERT_FALSE(arity);
  EXPECT_EQ(arity.error().code(), Code::kInvalidArgument);
  EXPECT_NE(arity.error().message().find("takes 2 argument(s), 1 given"), std::string::npos) << arity.error().to_string();

  Buffer* wrong_dtype[] = {&a, &*i};
  auto dtype = exe->execute(wrong_dtype);
  ASSERT_FALSE(dtype);
  EXPECT_NE(dtype.error().message().find("argument 1"), std::string::npos) << dtype.error().to_string();
  EXPECT_NE(dtype.error().message().find("expected f32[4], given i32[4]"), std::string::npos) << dtype.error().to_string();

  Buffer* wrong_shape[] = {&short_buf, &a};
  auto shape = exe->execute(wrong_shape);
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message().find("argument 0"), std::string::npos);
  EXPECT_NE(shape.error().message().find("expected f32[4], given f32[3]"), std::string::npos) << shape.error().to_string();

  Buffer* null_arg[] = {&a, nullptr};
  auto null = exe->execute(null_arg);
  ASSERT_FALSE(null);
  EXPECT_NE(null.error().message().find("argument 1 of"), std::string::npos);

  Buffer empty;
  Buffer* empty_arg[] = {&a, &empty};
  auto e = exe->execute(empty_arg);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("empty buffer"), std::string::npos);

  // The executable still works after all those refusals.
  Buffer* good[] = {&a, &a};
  auto ok = exe->execute(good);
  PB_ASSERT_OK(ok);
  EXPECT_EQ(read_f32((*ok)[0]), (std::vector<float>{2, 4, 6, 8}));
}

TEST_P(ExecuteTest, BufferOfAnotherClientIsRefused) {
  auto other = make_client(GetParam().path);
  ASSERT_TRUE(other);
  auto exe = compile_text(*client_, testing::kAddF32x4);
  ASSERT_TRUE(exe);
  Buffer a = f32_buffer(*client_, {1, 2, 3, 4});
  Buffer foreign = f32_buffer(*other, {1, 2, 3, 4});
  Buffer* args[] = {&a, &foreign};
  auto r = exe->execute(args);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("belongs to another client"), std::string::npos) << r.error().to_string();
}

TEST_P(ExecuteTest, MalformedMlirIsAnErrorNamingTheProgram) {
  auto program = Program::from_bytes("module { this is not mlir", "broken.mlir");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  ASSERT_FALSE(exe);
  const std::string text = exe.error().to_string();
  EXPECT_NE(text.find("compiling broken.mlir"), std::string::npos) << text;
  EXPECT_NE(text.find("PJRT_Client_Compile"), std::string::npos) << text;

  auto empty = Program::from_bytes("", "empty.mlir");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message().find("empty.mlir is empty"), std::string::npos);
  auto missing = Program::from_file("/nonexistent/prog.mlir");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_NE(missing.error().message().find("/nonexistent/prog.mlir"), std::string::npos);
}

TEST_P(ExecuteTest, DonatedInputIsConsumedOthersStayValid) {
  auto exe = compile_text(*client_, kDonatingAdd);
  ASSERT_TRUE(exe);
  Buffer a = f32_buffer(*client_, {1, 2, 3, 4});
  Buffer b = f32_buffer(*client_, {1, 1, 1, 1});
  Buffer* args[] = {&a, &b};

  // Not donated: both inputs survive unchanged.
  auto kept = exe->execute(args);
  PB_ASSERT_OK(kept);
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(read_f32(a), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(read_f32((*kept)[0]), (std::vector<float>{2, 3, 4, 5}));

  // Donated: the buffer object becomes empty, and using it again is a clear error.
  ExecuteOptions donate;
  donate.donate = {0};
  auto out = exe->execute(args, donate);
  PB_ASSERT_OK(out);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(read_f32((*out)[0]), (std::vector<float>{2, 3, 4, 5}));
  auto again = exe->execute(args);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find("donated to an earlier execution"), std::string::npos)
      << again.error().to_string();

  // Bad donation lists are refused.
  Buffer c = f32_buffer(*client_, {1, 2, 3, 4});
  Buffer* twice[] = {&c, &c};
  auto aliasing = exe->execute(twice, donate);
  ASSERT_FALSE(aliasing);
  EXPECT_NE(aliasing.error().message().find("also passed as argument 1"), std::string::npos);
  ExecuteOptions out_of_range;
  out_of_range.donate = {5};
  Buffer* fine[] = {&c, &b};
  auto range = exe->execute(fine, out_of_range);
  ASSERT_FALSE(range);
  EXPECT_NE(range.error().message().find("donated argument index 5 out of range"), std::string::npos);
  EXPECT_TRUE(c.valid());
}

// The plugin is really given the donated buffer: the output the program aliases to it is written into
// its memory (same device address), with the alias declared either way JAX writes it; without
// donation the same program leaves the argument's memory alone. Every CPU plugin here honours both.
TEST_P(ExecuteTest, DonationWritesTheAliasedOutputIntoTheDonatedMemory) {
  for (const char* attribute : {"tf.aliasing_output = 0 : i32", "jax.buffer_donor = true"}) {
    SCOPED_TRACE(attribute);
    const std::string text = std::string(R"mlir(
func.func public @main(%a: tensor<256xf32> {)mlir") + attribute + R"mlir(}, %b: tensor<256xf32>) -> tensor<256xf32> {
  %0 = stablehlo.add %a, %b : tensor<256xf32>
  return %0 : tensor<256xf32>
}
)mlir";
    auto exe = compile_text(*client_, text);
    ASSERT_TRUE(exe);
    Buffer a = f32_buffer(*client_, std::vector<float>(256, 1.0f));
    Buffer b = f32_buffer(*client_, std::vector<float>(256, 2.0f));
    auto a_address = a.device_pointer();
    auto b_address = b.device_pointer();
    PB_ASSERT_OK(a_address);
    PB_ASSERT_OK(b_address);
    Buffer* args[] = {&a, &b};

    auto kept = exe->execute(args);
    PB_ASSERT_OK(kept);
    auto kept_address = (*kept)[0].device_pointer();
    PB_ASSERT_OK(kept_address);
    EXPECT_NE(*kept_address, *a_address);
    EXPECT_NE(*kept_address, *b_address);
    EXPECT_EQ(read_f32(a), std::vector<float>(256, 1.0f));

    ExecuteOptions donate;
    donate.donate = {0};
    auto out = exe->execute(args, donate);
    PB_ASSERT_OK(out);
    auto out_address = (*out)[0].device_pointer();
    PB_ASSERT_OK(out_address);
    EXPECT_EQ(*out_address, *a_address);
    EXPECT_EQ(read_f32((*out)[0]), std::vector<float>(256, 3.0f));
    EXPECT_EQ(read_f32(b), std::vector<float>(256, 2.0f));
    // Every use of the donated buffer says so.
    EXPECT_FALSE(a.valid());
    auto read = a.to_host();
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error().code(), Code::kFailedPrecondition);
    EXPECT_NE(read.error().message().find("the f32[256] buffer was donated to an execution"), std::string::npos)
        << read.error().to_string();
    auto address = a.device_pointer();
    ASSERT_FALSE(address);
    EXPECT_NE(address.error().message().find("buffer was donated"), std::string::npos) << address.error().to_string();
    auto again = exe->execute(args);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message().find("argument 0 of"), std::string::npos) << again.error().to_string();
    EXPECT_NE(again.error().message().find("(f32[256]) was donated to an earlier execution"), std::string::npos)
        << again.error().to_string();
    // A buffer that is merely empty does not claim it was donated; one given a new buffer is no longer donated.
    Buffer moved = std::move(b);
    auto empty = b.to_host();
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().message().find("donated"), std::string::npos) << empty.error().to_string();
    a = std::move(moved);
    EXPECT_FALSE(a.donated());
    EXPECT_EQ(read_f32(a), std::vector<float>(256, 2.0f));
  }
}

TEST_P(ExecuteTest, ExecuteIntoReusesTheCallersOutputsAndFeedsThemBack) {
  auto exe = compile_text(*client_, testing::kAddF32x4);
  ASSERT_TRUE(exe);
  Buffer one = f32_buffer(*client_, {1, 1, 1, 1});
  Buffer x = f32_buffer(*client_, {0, 1, 2, 3});
  // Storage holding buffers of another shape and count is resized and rebound.
  std::vector<Buffer> outputs;
  outputs.push_back(f32_buffer(*client_, {7, 7}));
  outputs.push_back(f32_buffer(*client_, {8}));
  Buffer* first[] = {&x, &one};
  PB_ASSERT_OK(exe->execute_into(first, outputs));
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].dims(), Dims({4}));
  EXPECT_EQ(read_f32(outputs[0]), (std::vector<float>{1, 2, 3, 4}));

  // x <- x + 1 in place: the output is the next call's argument, plain and donated.
  Buffer* again[] = {&outputs[0], &one};
  PB_ASSERT_OK(exe->execute_into(again, outputs));
  ExecuteOptions donate;
  donate.donate = {0};
  PB_ASSERT_OK(exe->execute_into(again, outputs, donate));
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(read_f32(outputs[0]), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_TRUE(one.valid());
  EXPECT_EQ(read_f32(x), (std::vector<float>{0, 1, 2, 3}));

  // A refused call runs nothing and loses nothing: the outputs stay, even when they are its arguments.
  Buffer* wrong[] = {&outputs[0]};
  auto refused = exe->execute_into(wrong, outputs);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("takes 2 argument(s), 1 given"), std::string::npos);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(read_f32(outputs[0]), (std::vector<float>{3, 4, 5, 6}));
  PB_ASSERT_OK(exe->execute_into(first, outputs));
  EXPECT_EQ(read_f32(outputs[0]), (std::vector<float>{1, 2, 3, 4}));
}

// Copies through the client's warm host blocks: the device buffer aliases a pool block, which must
// not go back to the pool (and be handed out again) while anything still reads it, donation included.
TEST_P(ExecuteTest, PooledCopiesKeepTheirBlockWhileABufferOrADonatedOutputUsesIt) {
  auto exe = compile_text(*client_, kDonatingAdd);
  ASSERT_TRUE(exe);
  const HostBlockPool& pool = client_->host_pool();
  const auto base = pool.stats();
  std::vector<float> host = {1, 2, 3, 4};
  std::vector<int64_t> dims = {4};
  auto a = client_->buffer_from_host_pooled(std::as_bytes(std::span(host)), DType::kF32, dims);
  PB_ASSERT_OK(a);
  host = {9, 9, 9, 9};  // a copy: the caller's memory may change at once
  EXPECT_EQ(read_f32(*a), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(a->donatable());
  EXPECT_EQ(pool.stats().blocks_in_use, base.blocks_in_use + 1);

  Buffer b = f32_buffer(*client_, {10, 20, 30, 40});
  Buffer* args[] = {&*a, &b};
  ExecuteOptions donate;
  donate.donate = {0};
  std::vector<Buffer> out;
  PB_ASSERT_OK(exe->execute_into(args, out, donate));
  EXPECT_FALSE(a->valid());
  // The output may live in the donated block: the block stays out of the pool, and a second pooled
  // copy gets another one, leaving the output as it was.
  auto c = client_->buffer_from_host_pooled(std::as_bytes(std::span(host)), DType::kF32, dims);
  PB_ASSERT_OK(c);
  EXPECT_EQ(read_f32(out[0]), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(read_f32(*c), (std::vector<float>{9, 9, 9, 9}));
  *c = Buffer();
  out.clear();
  // Both blocks come back once the plugin is done with them (its event, on its own thread).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.stats().blocks_in_use != base.blocks_in_use && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(pool.stats().blocks_in_use, base.blocks_in_use);
  // And the next copy of that size reuses a warm one.
  auto d = client_->buffer_from_host_pooled(std::as_bytes(std::span(host)), DType::kF32, dims);
  PB_ASSERT_OK(d);
  EXPECT_GT(pool.stats().reuses, base.reuses);

  // Bad input is refused before any copy, naming the shape.
  auto wrong = client_->buffer_from_host_pooled(std::as_bytes(std::span(host)), DType::kF32, std::vector<int64_t>{5});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message().find("f32[5] needs 20 bytes, 16 given"), std::string::npos) << wrong.error().to_string();
}

TEST_P(ExecuteTest, TwoThreadsExecuteOneExecutableAtOnce) {
  auto exe = compile_text(*client_, testing::kAddF32x4);
  ASSERT_TRUE(exe);
  std::atomic<int> failures{0};
  auto worker = [&](float base) {
    Buffer a = f32_buffer(*client_, {base, base, base, base});
    Buffer b = f32_buffer(*client_, {1, 2, 3, 4});
    Buffer* args[] = {&a, &b};
    for (int i = 0; i < 200; ++i) {
      auto out = exe->execute(args);
      if (!out || read_f32((*out)[0]) != std::vector<float>{base + 1, base + 2, base + 3, base + 4}) ++failures;
    }
  };
  std::thread t1(worker, 100.0f), t2(worker, 200.0f);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(ExecuteTest, PortableArtifactNewerThanThePluginIsRefusedWithBothVersions) {
  auto path = testing::conformance_dir() / "cases/add_f32/program.mlirbc";
  std::string bytes = read_file(path);
  ASSERT_NE(bytes.find("StableHLO_v1.0.0"), std::string::npos);
  auto good = Program::from_bytes(bytes, "add_f32.mlirbc");
  PB_ASSERT_OK(good);
  EXPECT_EQ(good->format(), ProgramFormat::kMlirBytecode);
  EXPECT_EQ(good->stablehlo_version(), (SemVer{1, 0, 0}));

  // The same artifact, claiming a StableHLO from the future.
  bytes.replace(bytes.find("StableHLO_v1.0.0"), 16, "StableHLO_v9.9.9");
  auto future = Program::from_bytes(bytes, "future.mlirbc");
  PB_ASSERT_OK(future);
  auto exe = client_->compile(*future);
  ASSERT_FALSE(exe);
  const std::string text = exe.error().to_string();
  EXPECT_EQ(exe.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(text.find("StableHLO 9.9.9"), std::string::npos) << text;
  EXPECT_NE(text.find("stablehlo_current_version " + client_->plugin().stablehlo_current_version()->to_string()),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("future.mlirbc"), std::string::npos) << text;
}

TEST_P(ExecuteTest, JaxNumericsByDefaultPluginDefaultsOnRequest) {
  // max(1, NaN): NaN with JAX's options (plugboard's default), 1 with the plugin's own defaults.
  constexpr const char* kMax = R"mlir(
module @max attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.maximum %a, %b : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
)mlir";
  auto program = Program::from_bytes(kMax, "max.mlir");
  PB_ASSERT_OK(program);
  Buffer one = f32_buffer(*client_, {1, 1});
  Buffer nan = f32_buffer(*client_, {std::nanf(""), 2});
  Buffer* args[] = {&one, &nan};

  auto jax = client_->compile(*program);
  PB_ASSERT_OK(jax);
  auto out = (*jax)->execute(args);
  PB_ASSERT_OK(out);
  auto v = read_f32((*out)[0]);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 2);

  auto fast = client_->compile(*program, CompileOptions::plugin_defaults());
  PB_ASSERT_OK(fast);
  auto out2 = (*fast)->execute(args);
  PB_ASSERT_OK(out2);
  EXPECT_EQ(read_f32((*out2)[0])[0], 1.0f);

  // A user option reaches XLA: turning fast min/max back on by name.
  CompileOptions options;
  PB_ASSERT_OK(options.set_from_text("xla_cpu_enable_fast_min_max=true"));
  auto user = client_->compile(*program, options);
  PB_ASSERT_OK(user);
  auto out3 = (*user)->execute(args);
  PB_ASSERT_OK(out3);
  EXPECT_EQ(read_f32((*out3)[0])[0], 1.0f);
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, ExecuteTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

TEST(CompileOptionsTest, PluginDefaultsSerializeToTheMinimumSixBytes) {
  EXPECT_EQ(CompileOptions::plugin_defaults().serialize(), std::string("\x1a\x04\x20\x01\x28\x01", 6));
}

TEST(CompileOptionsTest, OptionsFromText) {
  CompileOptions o = CompileOptions::plugin_defaults();
  PB_ASSERT_OK(o.set_from_text("a=true"));
  PB_ASSERT_OK(o.set_from_text("b=12"));
  PB_ASSERT_OK(o.set_from_text("c=0.5"));
  PB_ASSERT_OK(o.set_from_text("d=text"));
  EXPECT_EQ(std::get<bool>(o.xla_options["a"]), true);
  EXPECT_EQ(std::get<int64_t>(o.xla_options["b"]), 12);
  EXPECT_EQ(std::get<double>(o.xla_options["c"]), 0.5);
  EXPECT_EQ(std::get<std::string>(o.xla_options["d"]), "text");
  auto bad = o.set_from_text("novalue");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("'novalue'"), std::string::npos);
}

TEST(MultiPluginTest, ThreeCpuBuildsRunSideBySideInTwoThreads) {
  std::vector<std::shared_ptr<Client>> clients;
  std::vector<std::shared_ptr<Executable>> exes;
  for (const auto& p : cpu_plugins()) {
    clients.push_back(make_client(p.path));
    ASSERT_TRUE(clients.back());
    exes.push_back(compile_text(*clients.back(), testing::kAddF32x4));
    ASSERT_TRUE(exes.back());
  }
  // Three different plugins really are three different libraries.
  EXPECT_NE(&clients[0]->plugin(), &clients[1]->plugin());
  EXPECT_NE(&clients[1]->plugin(), &clients[2]->plugin());
  std::atomic<int> failures{0};
  auto worker = [&](size_t first) {
    for (int i = 0; i < 60; ++i) {
      size_t k = (first + static_cast<size_t>(i)) % clients.size();
      Buffer a = f32_buffer(*clients[k], {1, 2, 3, 4});
      Buffer* args[] = {&a, &a};
      auto out = exes[k]->execute(args);
      if (!out || read_f32((*out)[0]) != std::vector<float>{2, 4, 6, 8}) ++failures;
    }
  };
  std::thread t1(worker, 0), t2(worker, 1);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace plugboard
