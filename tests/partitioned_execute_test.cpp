// One program on several devices of a client (SPMD): compile options with num_partitions, a
// partitioner and a device assignment; Executable::devices and execute_partitioned, one argument list
// per device; the work really split (each device holds its part only, and a sum over all parts
// reaches every device through the collective XLA inserts); which sharding forms each CPU plugin
// splits with which partitioner; and every refusal, by name.
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "runtime/client.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::RealPlugin;

// The two forms of sharding annotation: GSPMD's mhlo.sharding strings, and Shardy's sdy dialect.
enum class Form { kGspmd, kShardy };

std::string form_name(Form f) { return f == Form::kGspmd ? "gspmd" : "shardy"; }

// x: f32[2n] split over n devices (two elements each). Returns 2x (split as x is: XLA's propagation
// gives the output x's sharding) and the sum of all of x (one scalar, the same on every device:
// XLA adds an all-reduce across the devices).
std::string double_and_sum(Form form, int n) {
  const std::string len = std::to_string(2 * n);
  const std::string tensor = "tensor<" + len + "xf32>";
  std::string header, arg_attr;
  if (form == Form::kGspmd) {
    std::string ids;
    for (int i = 0; i < n; ++i) ids += (i ? "," : "") + std::to_string(i);
    header = "module @split attributes {mhlo.num_partitions = " + std::to_string(n) + " : i32, mhlo.num_replicas = 1 : i32} {\n";
    arg_attr = "{mhlo.sharding = \"{devices=[" + std::to_string(n) + "]" + ids + "}\"}";
  } else {
    header = "module @split attributes {mhlo.num_partitions = " + std::to_string(n) + " : i32, mhlo.num_replicas = 1 : i32} {\n" +
             "  sdy.mesh @mesh = <[\"x\"=" + std::to_string(n) + "]>\n";
    arg_attr = "{sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}";
  }
  return header + "  func.func public @main(%x: " + tensor + " " + arg_attr + ") -> (" + tensor + ", tensor<f32>) {\n" +
         "    %two = stablehlo.constant dense<2.0> : " + tensor + "\n" +
         "    %y = stablehlo.multiply %x, %two : " + tensor + "\n" +
         "    %zero = stablehlo.constant dense<0.0> : tensor<f32>\n" +
         "    %s = \"stablehlo.reduce\"(%x, %zero) <{dimensions = array<i64: 0>}> ({\n" +
         "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n" +
         "      %t = stablehlo.add %a, %b : tensor<f32>\n" +
         "      stablehlo.return %t : tensor<f32>\n" +
         "    }) : (" + tensor + ", tensor<f32>) -> tensor<f32>\n" +
         "    return %y, %s : " + tensor + ", tensor<f32>\n" +
         "  }\n}\n";
}

std::shared_ptr<Client> client_with(const RealPlugin& plugin, int64_t devices) {
  auto loaded = load_plugin(plugin.path);
  EXPECT_TRUE(loaded) << loaded.error().to_string();
  if (!loaded) return nullptr;
  ClientOptions options;
  options.create_options.push_back({"cpu_device_count", devices});
  auto client = Client::create(*loaded, options);
  EXPECT_TRUE(client) << client.error().to_string();
  return client ? *client : nullptr;
}

Buffer f32_on(const Client& client, std::vector<float> values, int device) {
  std::vector<int64_t> dims = {static_cast<int64_t>(values.size())};
  auto b = client.buffer_from_host(std::as_bytes(std::span(values)), DType::kF32, dims, device);
  EXPECT_TRUE(b) << b.error().to_string();
  return b ? std::move(*b) : Buffer();
}

std::vector<float> read_f32(const Buffer& b) {
  std::vector<float> out(b.element_count());
  auto st = b.to_host(std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(st) << st.error().to_string();
  return out;
}

Expected<std::shared_ptr<Executable>> compile_split(const Client& client, Form form, Partitioner partitioner, int n,
                                                    std::vector<int64_t> device_ids = {}) {
  auto program = Program::from_bytes(double_and_sum(form, n), "split_" + form_name(form) + ".mlir");
  if (!program) return std::unexpected(program.error());
  CompileOptions options;
  options.num_partitions = n;
  options.partitioner = partitioner;
  options.device_ids = std::move(device_ids);
  return client.compile(*program, options);
}

// Runs the split program with x = 1..2n, device k holding x[2k], x[2k+1], and checks every device's
// outputs: its part of 2x, and the whole sum; each output on the device it ran on.
void run_and_check(const Client& client, const Executable& exe, const std::vector<int>& expected_devices) {
  const int n = static_cast<int>(expected_devices.size());
  ASSERT_EQ(exe.devices(), expected_devices);
  std::vector<Buffer> owned;
  owned.reserve(static_cast<size_t>(n));
  std::vector<std::vector<Buffer*>> lists;
  for (int k = 0; k < n; ++k) owned.push_back(f32_on(client, {2.0f * k + 1, 2.0f * k + 2}, expected_devices[k]));
  for (auto& b : owned) lists.push_back({&b});
  auto runs = exe.execute_partitioned(lists);
  ASSERT_TRUE(runs) << runs.error().to_string();
  ASSERT_EQ(runs->size(), static_cast<size_t>(n));
  const float total = static_cast<float>(2 * n * (2 * n + 1) / 2);
  for (int k = 0; k < n; ++k) {
    Execution& run = (*runs)[static_cast<size_t>(k)];
    ASSERT_TRUE(run.done.await());
    ASSERT_EQ(run.outputs.size(), 2u);
    // Each device holds its part of 2x only: the program was split, not copied.
    EXPECT_EQ(run.outputs[0].device_index(), expected_devices[k]);
    EXPECT_EQ(read_f32(run.outputs[0]), (std::vector<float>{2.0f * (2 * k + 1), 2.0f * (2 * k + 2)})) << "device " << k;
    // And the sum of every device's part: the collective reached it.
    EXPECT_EQ(run.outputs[1].device_index(), expected_devices[k]);
    EXPECT_EQ(run.outputs[1].dims().size(), 0u);
    EXPECT_EQ(read_f32(run.outputs[1]), (std::vector<float>{total})) << "device " << k;
  }
}

// The combinations the three CPU plugins split as written (docs/nx.md, "Many devices"): each form with
// its own partitioner, and sdy shardings with the GSPMD partitioner too. (GSPMD shardings with the
// Shardy partitioner are refused: PartitionedRefusalTest.)
struct Case {
  RealPlugin plugin;
  Form form;                // the program's annotations
  Partitioner partitioner;  // the compile option
  int devices;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.plugin.name << "_" << form_name(c.form) << "_" << partitioner_name(c.partitioner) << "_" << c.devices;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& p : cpu_plugins())
    for (auto [form, partitioner] : {std::pair{Form::kGspmd, Partitioner::kGspmd}, std::pair{Form::kShardy, Partitioner::kShardy},
                                     std::pair{Form::kShardy, Partitioner::kGspmd}})
      for (int n : {2, 4}) out.push_back({p, form, partitioner, n});
  return out;
}

class PartitionedTest : public ::testing::TestWithParam<Case> {};

TEST_P(PartitionedTest, TheProgramIsSplitOverTheDevicesAndTheirPartsCombine) {
  const Case& c = GetParam();
  auto client = client_with(c.plugin, 4);
  ASSERT_TRUE(client);
  auto exe = compile_split(*client, c.form, c.partitioner, c.devices);
  ASSERT_TRUE(exe) << exe.error().to_string();
  std::vector<int> first(static_cast<size_t>(c.devices));
  std::iota(first.begin(), first.end(), 0);
  run_and_check(*client, **exe, first);
}

TEST_P(PartitionedTest, ADeviceAssignmentChoosesTheDevices) {
  const Case& c = GetParam();
  auto client = client_with(c.plugin, 4);
  ASSERT_TRUE(client);
  // Partition 0 on device 3, partition 1 on device 1, ...: devices() lists them partition by partition.
  const std::vector<int> chosen = c.devices == 2 ? std::vector<int>{3, 1} : std::vector<int>{2, 0, 3, 1};
  std::vector<int64_t> ids;
  for (int d : chosen) ids.push_back(client->devices()[static_cast<size_t>(d)].id);
  auto exe = compile_split(*client, c.form, c.partitioner, c.devices, ids);
  ASSERT_TRUE(exe) << exe.error().to_string();
  run_and_check(*client, **exe, chosen);
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, PartitionedTest, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& c = info.param;
  return c.plugin.name + "_" + form_name(c.form) + "_by_" + (c.partitioner == Partitioner::kGspmd ? "gspmd" : "shardy") + "_" +
         std::to_string(c.devices);
});

class PartitionedRefusalTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(PartitionedRefusalTest, OptionsThatCannotGoTogetherAreRefusedByName) {
  auto client = client_with(GetParam(), 4);
  ASSERT_TRUE(client);
  auto program = Program::from_bytes(double_and_sum(Form::kGspmd, 2), "split.mlir");
  ASSERT_TRUE(program);
  const auto refused = [&](CompileOptions options, const std::string& says) {
    auto exe = client->compile(*program, options);
    ASSERT_FALSE(exe) << says;
    EXPECT_EQ(exe.error().code(), Code::kInvalidArgument) << exe.error().to_string();
    EXPECT_NE(exe.error().to_string().find(says), std::string::npos) << exe.error().to_string();
  };
  CompileOptions no_partitioner;
  no_partitioner.num_partitions = 2;
  refused(no_partitioner, "needs a partitioner");
  CompileOptions portable;
  portable.num_partitions = 2;
  portable.partitioner = Partitioner::kGspmd;
  portable.portable = true;
  refused(portable, "a portable program runs on one device");
  CompileOptions three_ids;
  three_ids.num_partitions = 2;
  three_ids.partitioner = Partitioner::kGspmd;
  three_ids.device_ids = {0, 1, 2};
  refused(three_ids, "names 3 device(s)");
  CompileOptions twice;
  twice.num_partitions = 2;
  twice.partitioner = Partitioner::kGspmd;
  twice.device_ids = {1, 1};
  refused(twice, "device id 1 appears twice");
  CompileOptions zero;
  zero.num_partitions = 0;
  refused(zero, "num_partitions must be between 1 and");
}

// Without the refusal, XLA 0.81 and 0.106 compile the program unsplit (each device would run it on
// whole arrays) and 0.115 aborts the process in its Shardy import.
TEST_P(PartitionedRefusalTest, GspmdShardingsWithTheShardyPartitionerAreRefusedNamingThePluginAndTheForm) {
  auto client = client_with(GetParam(), 4);
  ASSERT_TRUE(client);
  auto exe = compile_split(*client, Form::kGspmd, Partitioner::kShardy, 2);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.error().code(), Code::kInvalidArgument);
  const std::string text = exe.error().to_string();
  EXPECT_NE(text.find("GSPMD shardings (mhlo.sharding)"), std::string::npos) << text;
  EXPECT_NE(text.find("the Shardy partitioner does not read them"), std::string::npos) << text;
  EXPECT_NE(text.find(GetParam().path.string()), std::string::npos) << text;
}

// Where the plugin itself cannot split a program (more partitions than the client has devices),
// its error comes back naming the plugin, the device count and the partitioner.
TEST_P(PartitionedRefusalTest, APluginsRefusalNamesThePluginAndThePartitioner) {
  auto client = client_with(GetParam(), 2);
  ASSERT_TRUE(client);
  auto exe = compile_split(*client, Form::kShardy, Partitioner::kShardy, 4);
  ASSERT_FALSE(exe);
  const std::string text = exe.error().to_string();
  EXPECT_NE(text.find(GetParam().path.string()), std::string::npos) << text;
  EXPECT_NE(text.find("for 4 device(s), partitioner Shardy (sdy dialect)"), std::string::npos) << text;
}

TEST_P(PartitionedRefusalTest, ExecutionsOfAPartitionedProgramAreCheckedPerDevice) {
  auto client = client_with(GetParam(), 4);
  ASSERT_TRUE(client);
  auto exe = compile_split(*client, Form::kGspmd, Partitioner::kGspmd, 2);
  ASSERT_TRUE(exe) << exe.error().to_string();
  Buffer on0 = f32_on(*client, {1, 2}, 0), on1 = f32_on(*client, {3, 4}, 1), on2 = f32_on(*client, {5, 6}, 2);
  // One device's execute: the program needs all of its devices at once.
  Buffer* one[] = {&on0};
  auto single = (*exe)->execute(one);
  ASSERT_FALSE(single);
  EXPECT_NE(single.error().message().find("execute_partitioned"), std::string::npos) << single.error().to_string();
  // One list for two devices.
  std::vector<std::vector<Buffer*>> short_lists = {{&on0}};
  auto too_few = (*exe)->execute_partitioned(short_lists);
  ASSERT_FALSE(too_few);
  EXPECT_NE(too_few.error().message().find("1 argument list(s) given"), std::string::npos) << too_few.error().to_string();
  // Device 1's list holds a buffer on device 2.
  std::vector<std::vector<Buffer*>> misplaced = {{&on0}, {&on2}};
  auto wrong_device = (*exe)->execute_partitioned(misplaced);
  ASSERT_FALSE(wrong_device);
  EXPECT_NE(wrong_device.error().to_string().find("argument list 1 (device 1)"), std::string::npos)
      << wrong_device.error().to_string();
  EXPECT_NE(wrong_device.error().message().find("is on device 2"), std::string::npos) << wrong_device.error().to_string();
  // A list of another length than the first.
  std::vector<std::vector<Buffer*>> ragged = {{&on0}, {&on1, &on1}};
  EXPECT_EQ((*exe)->execute_partitioned(ragged).error().code(), Code::kInvalidArgument);
  // A device to run on is the program's to say.
  std::vector<std::vector<Buffer*>> lists = {{&on0}, {&on1}};
  ExecuteOptions elsewhere;
  elsewhere.device = 1;
  EXPECT_EQ((*exe)->execute_partitioned(lists, elsewhere).error().code(), Code::kInvalidArgument);
  // Nothing refused consumed anything: the right lists still run.
  auto runs = (*exe)->execute_partitioned(lists);
  ASSERT_TRUE(runs) << runs.error().to_string();
  for (Execution& run : *runs) ASSERT_TRUE(run.done.await());
  EXPECT_EQ(read_f32((*runs)[1].outputs[1]), (std::vector<float>{10}));
}

TEST_P(PartitionedRefusalTest, DonatedArgumentsAreGivenUpOnEveryDevice) {
  auto client = client_with(GetParam(), 4);
  ASSERT_TRUE(client);
  auto exe = compile_split(*client, Form::kGspmd, Partitioner::kGspmd, 2);
  ASSERT_TRUE(exe) << exe.error().to_string();
  Buffer on0 = f32_on(*client, {1, 2}, 0), on1 = f32_on(*client, {3, 4}, 1);
  std::vector<std::vector<Buffer*>> lists = {{&on0}, {&on1}};
  ExecuteOptions donate;
  donate.donate = {0};
  auto runs = (*exe)->execute_partitioned(lists, donate);
  ASSERT_TRUE(runs) << runs.error().to_string();
  for (Execution& run : *runs) ASSERT_TRUE(run.done.await());
  EXPECT_FALSE(on0.valid());
  EXPECT_FALSE(on1.valid());
  EXPECT_EQ(read_f32((*runs)[0].outputs[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(read_f32((*runs)[1].outputs[0]), (std::vector<float>{6, 8}));
}

TEST_P(PartitionedRefusalTest, AOneDeviceProgramListsItsDeviceAndAPortableOneNone) {
  auto client = client_with(GetParam(), 2);
  ASSERT_TRUE(client);
  const char kAdd[] = R"mlir(
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
)mlir";
  auto program = Program::from_bytes(kAdd, "add.mlir");
  ASSERT_TRUE(program);
  auto plain = client->compile(*program);
  ASSERT_TRUE(plain) << plain.error().to_string();
  EXPECT_EQ((*plain)->devices(), std::vector<int>{0});
  CompileOptions portable;
  portable.portable = true;
  auto anywhere = client->compile(*program, portable);
  ASSERT_TRUE(anywhere) << anywhere.error().to_string();
  EXPECT_TRUE((*anywhere)->devices().empty());
  Buffer b = f32_on(*client, {1, 2}, 1);
  std::vector<std::vector<Buffer*>> lists = {{&b}};
  auto refused = (*anywhere)->execute_partitioned(lists);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("compiled portable"), std::string::npos) << refused.error().to_string();
  // A one-device program runs through execute_partitioned too, with its one list.
  Buffer b0 = f32_on(*client, {1, 2}, 0);
  std::vector<std::vector<Buffer*>> one = {{&b0}};
  auto runs = (*plain)->execute_partitioned(one);
  ASSERT_TRUE(runs) << runs.error().to_string();
  ASSERT_TRUE((*runs)[0].done.await());
  EXPECT_EQ(read_f32((*runs)[0].outputs[0]), (std::vector<float>{2, 4}));
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, PartitionedRefusalTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard
