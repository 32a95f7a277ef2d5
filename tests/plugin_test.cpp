// Loading and verifying real plugins, and refusing files that are not plugins.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "plugin/plugin.h"
#include "test_env.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::cuda_plugin;
using testing::RealPlugin;

class RealPluginTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(RealPluginTest, LoadsWithVersionAttributesAndExtensions) {
  const RealPlugin& rp = GetParam();
  ASSERT_TRUE(std::filesystem::exists(rp.path)) << rp.path << " is missing: run scripts/setup.sh";
  auto plugin = load_plugin(rp.path);
  PB_ASSERT_OK(plugin);
  const Plugin& p = **plugin;
  EXPECT_EQ(p.version().major, 0);
  EXPECT_EQ(p.version().minor, rp.pjrt_minor);
  EXPECT_TRUE(p.path().is_absolute());
  auto current = p.stablehlo_current_version();
  auto minimum = p.stablehlo_minimum_version();
  ASSERT_TRUE(current && minimum);
  EXPECT_LE(*minimum, *current);
  EXPECT_GE(*current, (SemVer{1, 13, 0}));
  EXPECT_TRUE(p.int_attribute("xla_version").has_value());
  // Every plugin at hand carries the FFI extension (type 5, 48 bytes) the callback work builds on.
  const ExtensionInfo* ffi = p.extension(5);
  ASSERT_NE(ffi, nullptr);
  EXPECT_EQ(ffi->name, "FFI");
  EXPECT_GE(ffi->struct_size, 48u);
  // The Layouts extension grew between versions: 72 bytes in 0.81, 80 later.
  if (const ExtensionInfo* layouts = p.extension(4)) {
    EXPECT_EQ(layouts->struct_size, rp.pjrt_minor == 81 ? 72u : 80u);
  }
}

INSTANTIATE_TEST_SUITE_P(AllRealPlugins, RealPluginTest,
                         ::testing::Values(cpu_plugins()[0], cpu_plugins()[1], cpu_plugins()[2], cuda_plugin()),
                         [](const auto& info) { return info.param.name; });

TEST(PluginTest, CudaPluginReportsItsCudaVersion) {
  auto plugin = load_plugin(cuda_plugin().path);
  PB_ASSERT_OK(plugin);
  EXPECT_EQ((*plugin)->int_attribute("cuda_version"), 13000);
  EXPECT_EQ((*plugin)->stablehlo_current_version(), (SemVer{1, 22, 0}));
}

TEST(PluginTest, SameFileTwiceIsOnePlugin) {
  const auto& path = cpu_plugins()[0].path;
  auto a = load_plugin(path);
  auto b = load_plugin(path);
  PB_ASSERT_OK(a);
  PB_ASSERT_OK(b);
  EXPECT_EQ(a->get(), b->get());

  // Through a symlink and a relative-looking path too: identity is the file, not the spelling.
  auto link = std::filesystem::temp_directory_path() / ("plugboard_link_" + std::to_string(::getpid()) + ".so");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(path, link);
  auto c = load_plugin(link);
  std::filesystem::remove(link);
  PB_ASSERT_OK(c);
  EXPECT_EQ(a->get(), c->get());
  EXPECT_EQ((*c)->path(), std::filesystem::canonical(path));

  size_t count = 0;
  for (const auto& p : loaded_plugins()) count += p.get() == a->get();
  EXPECT_EQ(count, 1u);
}

TEST(PluginTest, MissingFileIsNotFoundAndNamesThePath) {
  auto r = load_plugin("/nonexistent/dir/libnothing.so");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kNotFound);
  EXPECT_NE(r.error().to_string().find("/nonexistent/dir/libnothing.so"), std::string::npos) << r.error().to_string();
}

TEST(PluginTest, DirectoryIsRefused) {
  auto r = load_plugin(testing::fixtures_dir());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_NE(r.error().message().find("not a regular file"), std::string::npos);
}

TEST(PluginTest, NotAnElfFileIsRefusedBeforeDlopen) {
  auto path = std::filesystem::temp_directory_path() / ("plugboard_not_elf_" + std::to_string(::getpid()) + ".so");
  std::ofstream(path) << "this is a text file, not a shared library\n";
  auto r = load_plugin(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_NE(r.error().message().find("is not an ELF file"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message().find(path.filename().string()), std::string::npos);
}

TEST(PluginTest, TruncatedElfIsRefusedBeforeDlopen) {
  // An ELF identification and nothing after it: refused by the ELF check, never handed to dlopen.
  auto path = std::filesystem::temp_directory_path() / ("plugboard_truncated_" + std::to_string(::getpid()) + ".so");
  std::ofstream(path, std::ios::binary) << "\x7f" "ELF\x02\x01\x01";
  auto r = load_plugin(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_NE(r.error().message().find("truncated ELF file"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message().find(path.filename().string()), std::string::npos);
}

TEST(PluginTest, ElfWithoutGetPjrtApiIsNotAPlugin) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_NO_GET_PJRT_API);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.error().message().find("does not export GetPjrtApi"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message().find("no_get_pjrt_api"), std::string::npos);
}

TEST(PluginTest, NullApiIsRefused) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_NULL_API);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("GetPjrtApi of"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message().find("returned null"), std::string::npos);
  // The outcome is remembered: asking again gives the same answer without a second dlopen.
  auto again = load_plugin(PLUGBOARD_FIXTURE_NULL_API);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message(), r.error().message());
}

// The fault-injection plugin: what no real plugin does on demand.

TEST(FaultPluginTest, WellFormedFaultPluginLoads) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  PB_ASSERT_OK(r);
  EXPECT_EQ((*r)->string_attribute("fault_mode"), "plugboard test fixture");
  EXPECT_TRUE((*r)->extensions().empty());
}

TEST(FaultPluginTest, WrongMajorVersionIsRefusedNamingBothVersions) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_FAULT_WRONG_MAJOR);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  const std::string m = r.error().message();
  EXPECT_NE(m.find("has PJRT API version 1.81, a different major version"), std::string::npos) << m;
  EXPECT_NE(m.find("plugboard supports PJRT API 0." + std::to_string(kMinPjrtMinor)), std::string::npos) << m;
  EXPECT_NE(m.find("fault_wrong_major"), std::string::npos) << m;
}

TEST(FaultPluginTest, TooOldMinorVersionIsRefused) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_FAULT_OLD_MINOR);
  ASSERT_FALSE(r);
  const std::string m = r.error().message();
  EXPECT_NE(m.find("has PJRT API version 0.3, too old"), std::string::npos) << m;
  EXPECT_NE(m.find("built against 0.81"), std::string::npos) << m;
}

TEST(FaultPluginTest, InitializeErrorCarriesThePluginsCodeAndMessage) {
  auto r = load_plugin(PLUGBOARD_FIXTURE_FAULT_INIT_ERROR);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kInternal);
  EXPECT_EQ(r.error().message(), "fault plugin: PJRT_Plugin_Initialize fails on purpose");
  const std::string text = r.error().to_string();
  EXPECT_NE(text.find("initializing "), std::string::npos) << text;
  EXPECT_NE(text.find("PJRT_Plugin_Initialize in "), std::string::npos) << text;
}

// A plugin whose PJRT_Plugin_Initialize blocks (until a gate file exists) holds up the loads of that
// file only: another plugin loads meanwhile, from another thread, within a bound.
TEST(FaultPluginTest, HangingInitializeDoesNotBlockOtherPlugins) {
  const auto gate = std::filesystem::temp_directory_path() / ("plugboard_init_gate_" + std::to_string(::getpid()));
  std::filesystem::remove(gate);
  ::setenv("PLUGBOARD_FAULT_INIT_GATE", gate.c_str(), 1);
  auto open_gate = [&] { std::ofstream(gate) << "go"; };

  auto hanging = std::async(std::launch::async, [] { return load_plugin(PLUGBOARD_FIXTURE_FAULT_INIT_WAIT); });
  // Let the first load reach PJRT_Plugin_Initialize.
  EXPECT_EQ(hanging.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "the fixture's Initialize did not wait for its gate";

  auto other = std::async(std::launch::async, [] { return load_plugin(PLUGBOARD_FIXTURE_FAULT_CPU_NO_FFI); });
  const bool in_time = other.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  open_gate();  // release the hanging plugin either way, so that the test ends
  ASSERT_TRUE(in_time) << "loading another plugin waited for a hanging PJRT_Plugin_Initialize";
  PB_ASSERT_OK(other.get());
  auto first = hanging.get();
  PB_ASSERT_OK(first);

  // The same file is still initialized once: a second load gets the remembered plugin.
  auto again = load_plugin(PLUGBOARD_FIXTURE_FAULT_INIT_WAIT);
  PB_ASSERT_OK(again);
  EXPECT_EQ(again->get(), first->get());
  ::unsetenv("PLUGBOARD_FAULT_INIT_GATE");
  std::filesystem::remove(gate);
}

// A file replaced at a path already loaded (another inode): dlopen hands back the library it mapped
// for that path, and that library is the plugin already loaded, not a second initialization of it.
TEST(FaultPluginTest, FileReplacedAtALoadedPathIsTheLoadedPlugin) {
  const auto dir = std::filesystem::temp_directory_path() / ("plugboard_replaced_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "plugin.so");
  auto first = load_plugin(dir / "plugin.so");
  PB_ASSERT_OK(first);
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "new.so");
  std::filesystem::rename(dir / "new.so", dir / "plugin.so");
  auto second = load_plugin(dir / "plugin.so");
  PB_ASSERT_OK(second);
  EXPECT_EQ(first->get(), second->get());
  size_t count = 0;
  for (const auto& p : loaded_plugins()) count += p.get() == first->get();
  EXPECT_EQ(count, 1u);
  std::filesystem::remove_all(dir);
}

// Two threads loading the same file at once get one plugin, initialized once.
TEST(FaultPluginTest, ConcurrentLoadsOfOneFileShareOnePlugin) {
  const auto gate = std::filesystem::temp_directory_path() / ("plugboard_init_gate2_" + std::to_string(::getpid()));
  std::filesystem::remove(gate);
  // A copy: the fixture itself may be loaded by the test above in this process.
  const auto copy = std::filesystem::temp_directory_path() / ("plugboard_init_wait_" + std::to_string(::getpid()) + ".so");
  std::filesystem::remove(copy);
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_INIT_WAIT, copy);
  ::setenv("PLUGBOARD_FAULT_INIT_GATE", gate.c_str(), 1);
  auto a = std::async(std::launch::async, [&] { return load_plugin(copy); });
  auto b = std::async(std::launch::async, [&] { return load_plugin(copy); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::ofstream(gate) << "go";
  auto ra = a.get();
  auto rb = b.get();
  PB_ASSERT_OK(ra);
  PB_ASSERT_OK(rb);
  EXPECT_EQ(ra->get(), rb->get());
  ::unsetenv("PLUGBOARD_FAULT_INIT_GATE");
  std::filesystem::remove(gate);
  std::filesystem::remove(copy);
}

}  // namespace
}  // namespace plugboard
