// Hostile input against the runtime and the .npy reader (issue 11): programs nested deep enough to
// overflow a plugin's recursive parser, devices, FIFOs and files whose size disagrees with their header,
// shapes whose byte size overflows, bytecode with a version that does not parse, compile options typed
// by their declared XLA type, events that outlive every other reference to their client, and outputs
// whose dims come from the buffer (dynamic shapes). Against the real CPU plugins.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/nesting.h"
#include "base/regular_file.h"
#include "io/npy.h"
#include "runtime/client.h"
#include "runtime/xla_option_types.h"
#include "test_env.h"

namespace plugboard {
namespace {

namespace fs = std::filesystem;
using testing::cpu_plugins;
using testing::make_client;
using testing::RealPlugin;
using testing::ScratchDir;

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// An attribute `n` brackets deep: the module's attribute dict is one level, so the deepest point is
// n + 1 levels.
std::string deep_attribute_program(size_t n) {
  return "module @deep attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32, pb.deep = " +
         repeat("[", n) + "1" + repeat("]", n) + R"mlir(} {
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}
)mlir";
}

// A parameter type `n` tuples deep: the module's body and the argument list are two levels, the tensor
// inside one more, so the deepest point is n + 3 levels.
std::string deep_tuple_program(size_t n) {
  return "module @deep_tuple {\n  func.func public @main(%a: " + repeat("tuple<", n) + "tensor<f32>" +
         repeat(">", n) + R"mlir() -> tensor<f32> {
    %0 = stablehlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}
)mlir";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A .npy header for `dict` with the data to follow it (version 1.0, padded to 64 bytes like numpy).
std::string npy_header(std::string dict) {
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string file = "\x93NUMPY\x01";
  file += '\0';
  file += static_cast<char>(dict.size() & 0xFF);
  file += static_cast<char>(dict.size() >> 8);
  return file + dict;
}

// ---- item: MLIR nested deep enough to overflow the plugins' parsers -------------------------------------

class HostileProgramTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    client_ = make_client(GetParam().path);
    ASSERT_TRUE(client_);
  }
  std::shared_ptr<Client> client_;
};

TEST_P(HostileProgramTest, DeeplyNestedProgramsAreRefusedBeforeThePlugin) {
  // Each of these crashed every plugin (SIGSEGV in its recursive MLIR parser) when compiled.
  for (const auto& [what, text] : {std::pair{"20000 [", deep_attribute_program(20000)},
                                   std::pair{"50000 tuple<", deep_tuple_program(50000)}}) {
    SCOPED_TRACE(what);
    auto program = Program::from_bytes(text, "deep.mlir");
    ASSERT_FALSE(program) << "a program nested " << what << " deep was accepted";
    EXPECT_EQ(program.error().code(), Code::kInvalidArgument);
    const std::string message = program.error().to_string();
    EXPECT_NE(message.find("program deep.mlir: nesting deeper than " + std::to_string(kMaxNesting) + " levels"),
              std::string::npos)
        << message;
    // Nothing reaches the plugin: this client still compiles.
    auto fine = Program::from_bytes(testing::kAddF32x4, "add.mlir");
    PB_ASSERT_OK(fine);
    PB_ASSERT_OK(client_->compile(*fine));
  }
}

TEST_P(HostileProgramTest, ProgramsNestedExactlyToTheLimitReachThePluginWithoutCrashing) {
  const std::string attribute = deep_attribute_program(kMaxNesting - 1);
  const std::string tuple = deep_tuple_program(kMaxNesting - 3);
  PB_ASSERT_OK(check_nesting(attribute, Syntax::kMlir, "attribute"));
  PB_ASSERT_OK(check_nesting(tuple, Syntax::kMlir, "tuple"));
  // One level more is refused: the limit is exactly where the test puts it.
  ASSERT_FALSE(check_nesting(deep_attribute_program(kMaxNesting), Syntax::kMlir, "attribute"));
  ASSERT_FALSE(check_nesting(deep_tuple_program(kMaxNesting - 2), Syntax::kMlir, "tuple"));
  for (const auto& [what, text] : {std::pair{"attribute", attribute}, std::pair{"tuple", tuple}}) {
    SCOPED_TRACE(what);
    auto program = Program::from_bytes(text, "limit.mlir");
    PB_ASSERT_OK(program);
    // Success or the plugin's own error are both fine; a crash is not (it would end the test binary).
    auto exe = client_->compile(*program);
    if (!exe) {
      EXPECT_NE(exe.error().to_string().find("compiling limit.mlir"), std::string::npos);
    }
  }
}

TEST_P(HostileProgramTest, DeeplyNestedProgramFileIsRefused) {
  ScratchDir dir;
  const fs::path path = dir.path() / "deep.mlir";
  std::ofstream(path, std::ios::binary) << deep_attribute_program(20000);
  auto program = Program::from_file(path);
  ASSERT_FALSE(program);
  EXPECT_NE(program.error().message().find(path.string() + ": nesting deeper than"), std::string::npos)
      << program.error().to_string();
}

// The StableHLO version of a portable artifact is checked against the plugin; a version that does not
// parse must not skip that check.
TEST_P(HostileProgramTest, BytecodeWithAnUnparsableVersionIsRefused) {
  const std::string good = read_file(testing::conformance_dir() / "cases/add_f32/program.mlirbc");
  const size_t at = good.find("StableHLO_v1.0.0");
  ASSERT_NE(at, std::string::npos);
  for (const std::string bad : {"StableHLO_v1.x.0", "StableHLO_v12345678901234567890.0.0", "StableHLO_v-1.0.0",
                                "StableHLO_v1.0.0junk", "StableHLO_v"}) {
    SCOPED_TRACE(bad);
    std::string bytes = good;
    bytes.replace(at, 16, bad);
    auto program = Program::from_bytes(bytes, "add_f32.mlirbc");
    ASSERT_FALSE(program) << "accepted; it would have been compiled without a version check";
    EXPECT_EQ(program.error().code(), Code::kInvalidArgument);
    const std::string message = program.error().message();
    EXPECT_NE(message.find("program add_f32.mlirbc"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + bad + "' does not parse"), std::string::npos) << message;
  }
  // The untouched artifact still compiles.
  auto program = Program::from_bytes(good, "add_f32.mlirbc");
  PB_ASSERT_OK(program);
  PB_ASSERT_OK(client_->compile(*program));
}

// ---- item: typed XLA options --------------------------------------------------------------------------

TEST_P(HostileProgramTest, StringOptionsWithNumberLikeValuesReachThePlugin) {
  auto program = Program::from_bytes(testing::kAddF32x4, "add.mlir");
  PB_ASSERT_OK(program);
  // xla_dump_hlo_module_re is a string field: "123" was sent as an int64 and the plugin refused it.
  // (A regex only: nothing is dumped without xla_dump_to.)
  for (const char* option : {"xla_dump_hlo_module_re=123", "xla_dump_hlo_module_re=1e23",
                             "xla_backend_optimization_level=2", "xla_cpu_enable_fast_math=false"}) {
    SCOPED_TRACE(option);
    CompileOptions options;
    PB_ASSERT_OK(options.set_from_text(option));
    PB_ASSERT_OK(client_->compile(*program, options));
  }
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, HostileProgramTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

TEST(HostileProgramFiles, ConformanceProgramsAreWithinTheNestingLimit) {
  size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(testing::conformance_dir() / "cases")) {
    for (const char* file : {"program.mlir", "program.mlirbc"}) {
      const fs::path path = entry.path() / file;
      if (!fs::exists(path)) continue;
      SCOPED_TRACE(path.string());
      PB_ASSERT_OK(Program::from_file(path));
      ++checked;
    }
  }
  EXPECT_GE(checked, 90u);
}

TEST(HostileProgramFiles, DevicesFifosAndHugeFilesAreRefusedWithoutReading) {
  ScratchDir dir;
  auto zero = Program::from_file("/dev/zero");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code(), Code::kInvalidArgument);
  EXPECT_NE(zero.error().message().find("/dev/zero: it is a character device"), std::string::npos)
      << zero.error().to_string();

  const fs::path fifo = dir.fifo("program.mlir");
  auto from_fifo = Program::from_file(fifo);
  ASSERT_FALSE(from_fifo);
  EXPECT_NE(from_fifo.error().message().find("it is a FIFO"), std::string::npos) << from_fifo.error().to_string();

  // One byte over the limit: refused by its size, before a byte is read.
  const fs::path huge = dir.sparse("huge.mlir", "module {}", kMaxProgramBytes + 1);
  auto big = Program::from_file(huge);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), Code::kResourceExhausted);
  EXPECT_NE(big.error().message().find("more than the limit"), std::string::npos) << big.error().to_string();
}

TEST(HostileCompileOptions, ValuesAreTypedByTheDeclaredType) {
  EXPECT_EQ(xla_option_type("xla_dump_to"), XlaOptionType::kString);
  EXPECT_EQ(xla_option_type("xla_cpu_enable_fast_min_max"), XlaOptionType::kBool);
  EXPECT_EQ(xla_option_type("xla_backend_optimization_level"), XlaOptionType::kInt32);
  EXPECT_EQ(xla_option_type("xla_step_marker_location"), XlaOptionType::kEnum);
  EXPECT_EQ(xla_option_type("no_such_option"), std::nullopt);

  CompileOptions o = CompileOptions::plugin_defaults();
  PB_ASSERT_OK(o.set_from_text("xla_dump_to=123"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["xla_dump_to"]), "123");
  PB_ASSERT_OK(o.set_from_text("xla_dump_hlo_module_re=1e23"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["xla_dump_hlo_module_re"]), "1e23");  // exactly as given
  PB_ASSERT_OK(o.set_from_text("xla_dump_hlo_pass_re=true"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["xla_dump_hlo_pass_re"]), "true");
  PB_ASSERT_OK(o.set_from_text("xla_backend_optimization_level=3"));
  EXPECT_EQ(std::get<int64_t>(o.xla_options["xla_backend_optimization_level"]), 3);
  PB_ASSERT_OK(o.set_from_text("xla_cpu_enable_fast_min_max=true"));
  EXPECT_EQ(std::get<bool>(o.xla_options["xla_cpu_enable_fast_min_max"]), true);

  struct Bad {
    const char* assignment;
    Code code;
    const char* says;
  };
  for (const Bad& b : {
           Bad{"xla_backend_optimization_level=abc", Code::kInvalidArgument, "'abc' is not an integer"},
           Bad{"xla_backend_optimization_level=2.5", Code::kInvalidArgument, "'2.5' is not an integer"},
           Bad{"xla_backend_optimization_level=99999999999", Code::kOutOfRange, "99999999999 is out of range"},
           Bad{"xla_cpu_enable_fast_min_max=1", Code::kInvalidArgument, "'1' is not true or false"},
           Bad{"xla_cpu_enable_fast_min_max=yes", Code::kInvalidArgument, "'yes' is not true or false"},
       }) {
    SCOPED_TRACE(b.assignment);
    auto st = o.set_from_text(b.assignment);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code(), b.code);
    const std::string text = st.error().to_string();
    EXPECT_NE(text.find(b.says), std::string::npos) << text;
    const std::string name(std::string_view(b.assignment).substr(0, std::string_view(b.assignment).find('=')));
    EXPECT_NE(text.find("XLA option " + name), std::string::npos) << text;
  }

  // A name the table does not know: inferred, but never refused and never rewritten.
  PB_ASSERT_OK(o.set_from_text("unknown_a=100000000000000000000000"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["unknown_a"]), "100000000000000000000000");
  PB_ASSERT_OK(o.set_from_text("unknown_b=7"));
  EXPECT_EQ(std::get<int64_t>(o.xla_options["unknown_b"]), 7);
  PB_ASSERT_OK(o.set_from_text("unknown_c=/tmp/dump"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["unknown_c"]), "/tmp/dump");
  PB_ASSERT_OK(o.set_from_text("unknown_d=nan"));
  EXPECT_EQ(std::get<std::string>(o.xla_options["unknown_d"]), "nan");
}

// ---- item: .npy files read by their header, never to EOF ------------------------------------------------

TEST(HostileNpy, DevicesAndFifosAreRefusedWithoutReading) {
  ScratchDir dir;
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    SCOPED_TRACE(device);
    auto r = io::read_npy(device);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
    EXPECT_NE(r.error().message().find(std::string(device) + ": it is a character device"), std::string::npos)
        << r.error().to_string();
  }
  // A FIFO with no writer: opening it used to block forever.
  const fs::path fifo = dir.fifo("in.npy");
  const auto start = std::chrono::steady_clock::now();
  auto r = io::read_npy(fifo);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("it is a FIFO"), std::string::npos) << r.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(HostileNpy, TheHeaderDecidesHowMuchIsRead) {
  ScratchDir dir;
  const std::string f32x4 = npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }");

  // 16 bytes of data, then 64 GiB of junk (a hole): refused by the sizes alone, nothing allocated.
  const fs::path junk = dir.sparse("junk.npy", f32x4 + std::string(16, '\1'), f32x4.size() + 16 + (uint64_t{1} << 36));
  auto trailing = io::read_npy(junk);
  ASSERT_FALSE(trailing);
  EXPECT_EQ(trailing.error().code(), Code::kInvalidArgument);
  EXPECT_NE(trailing.error().message().find("trailing bytes after the data: expects 16 bytes for f32[4]"),
            std::string::npos)
      << trailing.error().to_string();

  // A header that claims more than the file has.
  const fs::path short_file = dir.sparse("short.npy", f32x4 + std::string(8, '\1'), f32x4.size() + 8);
  auto lost = io::read_npy(short_file);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code(), Code::kDataLoss);
  EXPECT_NE(lost.error().message().find("data truncated: expects 16 bytes for f32[4], file has 8"), std::string::npos)
      << lost.error().to_string();

  // A file that really is as large as its header says, but larger than plugboard reads: 128 GiB.
  const std::string huge_header =
      npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (34359738368,), }");
  const fs::path huge = dir.sparse("huge.npy", huge_header, huge_header.size() + (uint64_t{1} << 37));
  auto big = io::read_npy(huge);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), Code::kResourceExhausted);
  EXPECT_NE(big.error().message().find("more than the limit"), std::string::npos) << big.error().to_string();

  // The same header over exactly the right data still reads.
  const fs::path good = dir.sparse("good.npy", f32x4 + std::string(16, '\2'), f32x4.size() + 16);
  auto read = io::read_npy(good);
  PB_ASSERT_OK(read);
  EXPECT_EQ(read->dims, std::vector<int64_t>{4});
  EXPECT_EQ(read->data, std::vector<std::byte>(16, std::byte{2}));
}

// ---- item: one checked byte size ---------------------------------------------------------------------

TEST(HostileShapes, HostArrayByteSizeIsChecked) {
  // (2^62 + 4) f32 elements is 2^64 + 16 bytes: the unchecked product wrapped to 16.
  io::HostArray a{DType::kF32, {(int64_t{1} << 62) + 4}, std::vector<std::byte>(16)};
  EXPECT_FALSE(a.checked_byte_size());
  EXPECT_NE(a.byte_size(), 16u);
  ScratchDir dir;
  auto written = io::write_npy(dir.path() / "wrapped.npy", a);
  ASSERT_FALSE(written) << "a file claiming 2^62+4 elements over 16 bytes was written";
  EXPECT_NE(written.error().message().find("invalid shape"), std::string::npos) << written.error().to_string();
  EXPECT_FALSE(fs::exists(dir.path() / "wrapped.npy"));
}

class HostileClientTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    client_ = make_client(GetParam().path);
    ASSERT_TRUE(client_);
  }
  std::shared_ptr<Client> client_;
};

TEST_P(HostileClientTest, BufferSizesThatOverflowAreRefusedBeforeThePlugin) {
  std::vector<std::byte> sixteen(16);
  struct Case {
    DType dtype;
    std::vector<int64_t> dims;
    Code code;
    const char* says;
  };
  for (const Case& c : {
           Case{DType::kF32, {(int64_t{1} << 62) + 4}, Code::kOutOfRange, "larger than the address space"},
           Case{DType::kC128, {(int64_t{1} << 60) + 1}, Code::kOutOfRange, "larger than the address space"},
           Case{DType::kF32, {int64_t{1} << 31, int64_t{1} << 31, 2}, Code::kOutOfRange,
                "larger than the address space"},
           Case{DType::kF32, {4, -1}, Code::kInvalidArgument, "dimension 1 is negative"},
       }) {
    SCOPED_TRACE(shape_string(c.dtype, c.dims));
    for (bool adopt : {false, true}) {
      auto b = adopt ? client_->buffer_from_host_adopt(sixteen, nullptr, HostMemory::kMutable, c.dtype, c.dims)
                     : client_->buffer_from_host(sixteen, c.dtype, c.dims);
      ASSERT_FALSE(b) << "accepted: the plugin would have been handed a buffer far larger than 16 bytes";
      EXPECT_EQ(b.error().code(), c.code);
      EXPECT_NE(b.error().to_string().find(c.says), std::string::npos) << b.error().to_string();
    }
  }
}

// ---- item: an event keeps its client alive -------------------------------------------------------------

TEST_P(HostileClientTest, AnEventKeepsItsClientAliveUntilItIsDestroyed) {
  std::weak_ptr<Client> weak = client_;
  Event done;
  Event copied;
  std::vector<float> host(4);
  {
    auto program = Program::from_bytes(testing::kAddF32x4, "add.mlir");
    PB_ASSERT_OK(program);
    auto exe = client_->compile(*program);
    PB_ASSERT_OK(exe);
    std::vector<float> v = {1, 2, 3, 4};
    const int64_t dims[] = {4};
    auto a = client_->buffer_from_host(std::as_bytes(std::span(v)), DType::kF32, dims);
    PB_ASSERT_OK(a);
    Buffer* args[] = {&*a, &*a};
    auto run = (*exe)->execute_async(args);
    PB_ASSERT_OK(run);
    done = std::move(run->done);
    ASSERT_FALSE(done.empty());
    PB_ASSERT_OK(done.await());
    auto to_host = run->outputs[0].to_host_async(std::as_writable_bytes(std::span(host)));
    PB_ASSERT_OK(to_host);
    copied = std::move(*to_host);
    EXPECT_EQ(copied.client().get(), client_.get());
  }
  // The executable, the buffers and the outputs are gone; now the last other reference goes too.
  client_.reset();
  ASSERT_FALSE(weak.expired()) << "the events no longer keep their client: PJRT_Client_Destroy has run under them";
  PB_ASSERT_OK(done.await());
  EXPECT_TRUE(done.is_ready());
  PB_ASSERT_OK(copied.await());
  EXPECT_EQ(host, (std::vector<float>{2, 4, 6, 8}));
  done = Event();
  EXPECT_FALSE(weak.expired());  // `copied` still holds it
  copied = Event();
  EXPECT_TRUE(weak.expired()) << "an empty event must not hold a client";
}

// ---- item: output dims from the buffer (dynamic shapes) ------------------------------------------------

TEST_P(HostileClientTest, OutputDimsComeFromTheBufferNotTheSignature) {
  // The output's dimension is bounded by 8 and set to `n` at run time.
  auto program = Program::from_bytes(R"mlir(
module @dynamic attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>> {
    %0 = stablehlo.set_dimension_size %a, %n, dim = 0 : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    return %0 : tensor<?xf32, #stablehlo.bounds<8>>
  }
}
)mlir",
                                     "dynamic.mlir");
  PB_ASSERT_OK(program);
  auto exe = client_->compile(*program);
  PB_ASSERT_OK(exe);
  ASSERT_EQ((*exe)->signature().results.size(), 1u);
  EXPECT_EQ((*exe)->signature().results[0].to_string(), "f32[8]");  // the bound

  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t dims[] = {8};
  auto a = client_->buffer_from_host(std::as_bytes(std::span(v)), DType::kF32, dims);
  PB_ASSERT_OK(a);
  for (int32_t n : {3, 8, 0}) {
    SCOPED_TRACE(n);
    auto count = client_->buffer_from_host(std::as_bytes(std::span(&n, 1)), DType::kI32, {});
    PB_ASSERT_OK(count);
    Buffer* args[] = {&*a, &*count};
    auto out = (*exe)->execute(args);
    PB_ASSERT_OK(out);
    const Buffer& result = (*out)[0];
    EXPECT_EQ(result.shape_string(), "f32[" + std::to_string(n) + "]");
    EXPECT_EQ(result.byte_size(), static_cast<size_t>(n) * 4);
    auto bytes = result.to_host();
    PB_ASSERT_OK(bytes);
    ASSERT_EQ(bytes->size(), static_cast<size_t>(n) * 4);
    std::vector<float> values(static_cast<size_t>(n));
    if (n > 0) std::memcpy(values.data(), bytes->data(), bytes->size());
    EXPECT_EQ(values, std::vector<float>(v.begin(), v.begin() + n));

    auto run = (*exe)->execute_async(args);
    PB_ASSERT_OK(run);
    PB_ASSERT_OK(run->done.await());
    EXPECT_EQ(run->outputs[0].shape_string(), "f32[" + std::to_string(n) + "]");
  }
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, HostileClientTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard
