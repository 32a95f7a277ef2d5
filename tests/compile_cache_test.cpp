// The compile caches against the real CPU plugins: the persistent cache (hit and miss, a key change
// for each key part, corrupt, truncated and foreign entries, concurrent writers, eviction) and a
// bundle's precompiled programs (used without compiling, refused when tampered with).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/regular_file.h"
#include "bundle/assemble.h"
#include "bundle/boot.h"
#include "bundle/precompile.h"
#include "compile_cache/cache_key.h"
#include "compile_cache/cached_compile.h"
#include "compile_cache/description_text.h"
#include "compile_cache/entry.h"
#include "compile_cache/plugin_fingerprint.h"
#include "test_env.h"

namespace plugboard {
namespace {

using compile_cache::CompileOutcome;
using compile_cache::CompileSources;
using compile_cache::DiskCache;
using compile_cache::Origin;
using testing::RealPlugin;
using testing::ScratchDir;

constexpr const char* kAdd = R"(module @add {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";
constexpr const char* kMul = R"(module @mul {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.multiply %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";
constexpr const char* kSub = R"(module @sub {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.subtract %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";

Program program(const char* text, const std::string& name) {
  auto p = Program::from_bytes(text, name);
  EXPECT_TRUE(p) << p.error().to_string();
  return *p;
}

// Runs a 2-input f32[4] program on {1,2,3,4} and {10,20,30,40}.
std::vector<float> run(const Client& client, const Executable& exe) {
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  const int64_t dims[1] = {4};
  auto ba = client.buffer_from_host(std::as_bytes(std::span(a)), DType::kF32, dims);
  auto bb = client.buffer_from_host(std::as_bytes(std::span(b)), DType::kF32, dims);
  EXPECT_TRUE(ba && bb);
  Buffer* args[2] = {&*ba, &*bb};
  auto out = exe.execute(args);
  EXPECT_TRUE(out) << out.error().to_string();
  if (!out) return {};
  auto bytes = (*out)[0].to_host();
  EXPECT_TRUE(bytes);
  std::vector<float> v(4);
  std::memcpy(v.data(), bytes->data(), 16);
  return v;
}

Expected<CompileOutcome> compile_with(const Client& client, const Program& p, const DiskCache& cache,
                                      const CompileOptions& options = CompileOptions()) {
  CompileSources sources;
  sources.cache = cache;
  return compile_cache::compile(client, p, options, sources);
}

std::string joined(const std::vector<std::string>& notes) {
  std::string s;
  for (const auto& n : notes) s += n + "\n";
  return s;
}

class CompileCacheTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(CompileCacheTest, AMissCompilesAndStoresThenTheSameProgramIsAHitThatRunsAlike) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  auto client = testing::make_client(GetParam().path);
  ASSERT_TRUE(client);
  const Program add = program(kAdd, "add.mlir");
  auto first = compile_with(*client, add, cache);
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_EQ(first->origin, Origin::kCompiled) << joined(first->notes);
  EXPECT_EQ(first->key.size(), 64u);
  EXPECT_TRUE(std::filesystem::is_regular_file(cache.entry_path(first->key)));
  auto second = compile_with(*client, add, cache);
  ASSERT_TRUE(second) << second.error().to_string();
  EXPECT_EQ(second->origin, Origin::kCompileCache) << joined(second->notes);
  EXPECT_EQ(second->key, first->key);
  EXPECT_TRUE(second->notes.empty()) << joined(second->notes);
  EXPECT_EQ(run(*client, *second->executable), (std::vector<float>{11, 22, 33, 44}));
  // The hit's description (stored with the entry, the plugin not asked) is the compiled one's.
  const Signature& a = first->executable->signature();
  const Signature& b = second->executable->signature();
  EXPECT_EQ(second->executable->name(), first->executable->name());
  EXPECT_EQ(b.parameters_known, a.parameters_known);
  EXPECT_EQ(b.parameters, a.parameters);
  EXPECT_EQ(b.results, a.results);
  EXPECT_EQ(b.results_dynamic, a.results_dynamic);
  EXPECT_EQ(b.custom_call_targets, a.custom_call_targets);
  EXPECT_EQ(b.parameters.size(), 2u);
  // And it refuses a wrong call as the compiled one does.
  const int64_t dims[1] = {4};
  const float v[4] = {1, 2, 3, 4};
  auto only = client->buffer_from_host(std::as_bytes(std::span(v)), DType::kF32, dims);
  ASSERT_TRUE(only);
  Buffer* one_arg[1] = {&*only};
  auto wrong = second->executable->execute(one_arg);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message().find("takes 2 argument(s), 1 given"), std::string::npos) << wrong.error().to_string();
  auto stats = cache.stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->entries, 1u);
}

TEST_P(CompileCacheTest, EachKeyPartChangesTheKey) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  auto client = testing::make_client(GetParam().path);
  ASSERT_TRUE(client);
  auto add = compile_with(*client, program(kAdd, "add.mlir"), cache);
  ASSERT_TRUE(add);
  // Another program.
  auto mul = compile_with(*client, program(kMul, "mul.mlir"), cache);
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->origin, Origin::kCompiled);
  EXPECT_NE(mul->key, add->key);
  EXPECT_EQ(run(*client, *mul->executable), (std::vector<float>{10, 40, 90, 160}));
  // Other options.
  CompileOptions other;
  ASSERT_TRUE(other.set_from_text("xla_cpu_enable_fast_min_max=true"));
  auto with_options = compile_with(*client, program(kAdd, "add.mlir"), cache, other);
  ASSERT_TRUE(with_options);
  EXPECT_EQ(with_options->origin, Origin::kCompiled);
  EXPECT_NE(with_options->key, add->key);
  // Another plugin build, other device kinds, another platform: each its own key.
  auto target = compile_cache::target_of(*client, 1);
  ASSERT_TRUE(target);
  const std::string options = CompileOptions().serialize();
  const std::string base = compile_cache::cache_key(*target, options, kAdd);
  EXPECT_EQ(base, add->key);
  auto other_plugin = *target;
  other_plugin.plugin_sha256[0] = other_plugin.plugin_sha256[0] == 'a' ? 'b' : 'a';
  EXPECT_NE(compile_cache::cache_key(other_plugin, options, kAdd), base);
  auto other_kinds = *target;
  other_kinds.device_kinds.push_back("cpu");
  EXPECT_NE(compile_cache::cache_key(other_kinds, options, kAdd), base);
  // A CPU entry is tied to this machine's processor.
  EXPECT_EQ(target->host_cpu, *compile_cache::host_cpu_features());
  EXPECT_EQ(target->host_cpu.size(), 64u);
  auto other_cpu = *target;
  other_cpu.host_cpu = std::string(64, '0');
  EXPECT_NE(compile_cache::cache_key(other_cpu, options, kAdd), base);
  // XLA_FLAGS, which XLA reads when it compiles.
  auto other_flags = *target;
  other_flags.xla_flags = "--xla_cpu_enable_fast_math=true";
  EXPECT_NE(compile_cache::cache_key(other_flags, options, kAdd), base);
  {
    testing::ScopedEnv flags("XLA_FLAGS", "--xla_cpu_enable_fast_math=true");
    auto with_flags = compile_cache::target_of(*client, 1);
    ASSERT_TRUE(with_flags);
    EXPECT_EQ(with_flags->xla_flags, "--xla_cpu_enable_fast_math=true");
  }
  // Only the devices the executable runs on: a one-device program on a four-device client keys one.
  EXPECT_EQ(target->device_kinds.size(), 1u);
  auto two = compile_cache::target_of(*client, 2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->device_kinds.size(), std::min<size_t>(2, client->devices().size()));
  auto other_platform = *target;
  other_platform.platform_name = "cuda";
  EXPECT_NE(compile_cache::cache_key(other_platform, options, kAdd), base);
}

// Regression: another process assembling a bundle hard-links the plugin (tests run in parallel do),
// which moves the file's ctime; hashing took that for a rewrite and the compile cache went unused.
TEST(PluginFingerprint, HardLinksMadeWhileAFileIsHashedDoNotCountAsAChange) {
  ScratchDir dir;
  const auto file = dir.path() / "plugin.so";
  {
    std::ofstream out(file, std::ios::binary);
    std::string block(1 << 20, 'x');
    for (int i = 0; i < 64; ++i) out << block;
  }
  std::atomic<bool> stop{false};
  std::thread linker([&] {
    for (int i = 0; !stop.load(); ++i) {
      const auto link = dir.path() / ("link" + std::to_string(i % 2));
      std::error_code ec;
      std::filesystem::create_hard_link(file, link, ec);
      std::filesystem::remove(link, ec);
    }
  });
  std::string first;
  for (int i = 0; i < 5; ++i) {
    auto hashed = compile_cache::hash_file(file);
    ASSERT_TRUE(hashed) << hashed.error().to_string();
    if (i == 0) first = hashed->sha256;
    EXPECT_EQ(hashed->sha256, first);
  }
  stop = true;
  linker.join();
  // A rewrite still counts: same size, new mtime.
  auto before = file_identity(file);
  ASSERT_TRUE(before);
  std::filesystem::last_write_time(file, std::filesystem::last_write_time(file) + std::chrono::seconds(5));
  auto after = file_identity(file);
  ASSERT_TRUE(after);
  EXPECT_FALSE(same_contents(*before, *after));
}

TEST(CompileCacheAcrossPlugins, AnEntryMadeByOnePluginIsNeverUsedByAnother) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  const auto& plugins = testing::cpu_plugins();
  std::string first_key;
  for (const RealPlugin& p : plugins) {
    auto client = testing::make_client(p.path);
    ASSERT_TRUE(client);
    auto out = compile_with(*client, program(kAdd, "add.mlir"), cache);
    ASSERT_TRUE(out) << out.error().to_string();
    EXPECT_EQ(out->origin, Origin::kCompiled) << p.name << " used another plugin's entry";
    EXPECT_NE(out->key, first_key);
    if (first_key.empty()) first_key = out->key;
    EXPECT_EQ(run(*client, *out->executable), (std::vector<float>{11, 22, 33, 44}));
  }
  auto stats = cache.stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->entries, plugins.size());
}

// Damages the stored entry of `add`, then compiles it again: compiled, with a note that names the
// damage; the entry is replaced by a good one (the next compile is a hit).
void expect_damage_is_reported_and_repaired(const RealPlugin& plugin, const std::function<void(const std::filesystem::path&)>& damage,
                                            const std::string& expected_note) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  auto client = testing::make_client(plugin.path);
  ASSERT_TRUE(client);
  const Program add = program(kAdd, "add.mlir");
  auto first = compile_with(*client, add, cache);
  ASSERT_TRUE(first);
  damage(cache.entry_path(first->key));
  auto again = compile_with(*client, add, cache);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->origin, Origin::kCompiled);
  EXPECT_NE(joined(again->notes).find(expected_note), std::string::npos) << joined(again->notes);
  EXPECT_EQ(run(*client, *again->executable), (std::vector<float>{11, 22, 33, 44}));
  auto third = compile_with(*client, add, cache);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->origin, Origin::kCompileCache) << joined(third->notes);
  EXPECT_TRUE(third->notes.empty()) << joined(third->notes);
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_P(CompileCacheTest, ACorruptEntryIsReportedAndReplaced) {
  expect_damage_is_reported_and_repaired(GetParam(), [](const std::filesystem::path& p) {
    std::string bytes = read_all(p);
    bytes[bytes.size() / 2] ^= 0x5a;
    write_all(p, bytes);
  }, "corrupt");
}

TEST_P(CompileCacheTest, ATruncatedEntryIsReportedAndReplaced) {
  expect_damage_is_reported_and_repaired(GetParam(), [](const std::filesystem::path& p) {
    std::filesystem::resize_file(p, std::filesystem::file_size(p) - 100);
  }, "truncated");
}

TEST_P(CompileCacheTest, AForeignEntryUnderThisKeyIsReportedAndReplaced) {
  const RealPlugin& plugin = GetParam();
  expect_damage_is_reported_and_repaired(plugin, [&](const std::filesystem::path& p) {
    // Another program's entry (valid in itself) copied over this key's file.
    ScratchDir other;
    const DiskCache other_cache(other.path());
    auto client = testing::make_client(plugin.path);
    auto mul = compile_with(*client, program(kMul, "mul.mlir"), other_cache);
    ASSERT_TRUE(mul);
    write_all(p, read_all(other_cache.entry_path(mul->key)));
  }, "foreign");
}

TEST_P(CompileCacheTest, AnEntryThePluginRefusesIsReportedAndReplaced) {
  expect_damage_is_reported_and_repaired(GetParam(), [](const std::filesystem::path& p) {
    // Well-formed, checksum right, but not an executable this plugin can load.
    auto entry = compile_cache::decode_entry(read_all(p), "", p.string());
    ASSERT_TRUE(entry);
    entry->payload = std::string(64, 'x');
    write_all(p, *compile_cache::encode_entry(*entry));
  }, "not used");
}

TEST_P(CompileCacheTest, AnEntryWithoutADescriptionIsDescribedByThePlugin) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  auto client = testing::make_client(GetParam().path);
  ASSERT_TRUE(client);
  const Program add = program(kAdd, "add.mlir");
  auto first = compile_with(*client, add, cache);
  ASSERT_TRUE(first);
  const auto path = cache.entry_path(first->key);
  auto entry = compile_cache::decode_entry(read_all(path), "", path.string());
  ASSERT_TRUE(entry);
  for (const char* k : {"name", "parameters", "results", "results_dynamic", "custom_calls"}) entry->metadata.erase(k);
  write_all(path, *compile_cache::encode_entry(*entry));
  auto hit = compile_with(*client, add, cache);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->origin, Origin::kCompileCache);
  EXPECT_EQ(hit->executable->signature().parameters, first->executable->signature().parameters);
  EXPECT_EQ(run(*client, *hit->executable), (std::vector<float>{11, 22, 33, 44}));
}

TEST(CompileCacheDescription, ADescriptionRoundTripsThroughMetadataAndBadTextIsIgnored) {
  Description d;
  d.name = "main";
  d.signature.parameters_known = true;
  d.signature.parameters = {{DType::kF32, Dims{4, 8}}, {DType::kI32, Dims{}}};
  d.signature.results = {{DType::kBF16, Dims{0, 3}}};
  d.signature.results_dynamic = {true};
  d.signature.custom_call_targets = std::vector<std::string>{"plugboard.print", "host_scale"};
  std::map<std::string, std::string> m;
  compile_cache::put_description(d, m);
  auto back = compile_cache::get_description(m);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name, "main");
  EXPECT_EQ(back->signature.parameters, d.signature.parameters);
  EXPECT_EQ(back->signature.results, d.signature.results);
  EXPECT_EQ(back->signature.results_dynamic, d.signature.results_dynamic);
  EXPECT_EQ(back->signature.custom_call_targets, d.signature.custom_call_targets);
  m["parameters"] = "f32[4,x]";
  EXPECT_FALSE(compile_cache::get_description(m));
  m["parameters"] = "?";
  auto unknown = compile_cache::get_description(m);
  ASSERT_TRUE(unknown);
  EXPECT_FALSE(unknown->signature.parameters_known);
  m["results_dynamic"] = "11";  // one result
  EXPECT_FALSE(compile_cache::get_description(m));
}

TEST(CompileCacheEntry, MetadataOverTheLimitIsRefusedWhenEncoding) {
  compile_cache::Entry e{std::string(64, 'a'), {{"program", std::string(compile_cache::kMaxMetadataBytes, 'x')}}, "p"};
  auto bytes = compile_cache::encode_entry(e);
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().code(), Code::kInvalidArgument);
  // A description too large for the metadata is left out (the plugin describes the executable).
  Description d;
  d.name = "main";
  d.signature.parameters_known = true;
  d.signature.parameters.assign(20000, ArrayType{DType::kF32, Dims{4}});
  std::map<std::string, std::string> m;
  compile_cache::put_description(d, m);
  EXPECT_TRUE(m.empty());
}

TEST(CompileCacheTrust, AFolderOfAnotherUserOrWritableByOthersIsNotUsed) {
  ScratchDir dir;
  const std::filesystem::path shared = dir / "shared";
  std::filesystem::create_directories(shared);
  std::filesystem::permissions(shared, std::filesystem::perms::all);  // 0777
  const DiskCache cache(shared);
  auto client = testing::make_client(testing::cpu_plugins()[0].path);
  ASSERT_TRUE(client);
  auto out = compile_with(*client, program(kAdd, "add.mlir"), cache);
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(out->origin, Origin::kCompiled);
  EXPECT_NE(joined(out->notes).find("writable by others"), std::string::npos) << joined(out->notes);
  auto found = cache.find(out->key);
  EXPECT_FALSE(found.entry);
  // A folder the cache makes is 0700.
  const DiskCache fresh(dir / "fresh");
  ASSERT_TRUE(compile_with(*client, program(kAdd, "add.mlir"), fresh));
  EXPECT_EQ(std::filesystem::status(dir / "fresh").permissions() & std::filesystem::perms::all, std::filesystem::perms::owner_all);
}

TEST(CompileCacheEntry, HeadersThatAreNotEntriesOrFromAnotherVersionAreRefused) {
  EXPECT_EQ(compile_cache::decode_entry("hello", "", "f").error().code(), Code::kInvalidArgument);
  compile_cache::Entry e{std::string(64, 'a'), {{"program", "p"}}, "payload"};
  std::string bytes = *compile_cache::encode_entry(e);
  auto back = compile_cache::decode_entry(bytes, e.key, "f");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->payload, "payload");
  EXPECT_EQ(back->metadata["program"], "p");
  EXPECT_EQ(compile_cache::decode_entry(bytes.substr(0, 40), "", "f").error().code(), Code::kDataLoss);
  std::string other_version = bytes;
  other_version[8] = 9;
  auto v = compile_cache::decode_entry(other_version, "", "f");
  EXPECT_EQ(v.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(v.error().message().find("format version 9"), std::string::npos);
  EXPECT_NE(compile_cache::decode_entry(bytes + "x", "", "f").error().message().find("after its payload"), std::string::npos);
}

TEST(CompileCacheConcurrency, ThreadsCompilingTheSameProgramAllSucceedAndLeaveOneValidEntry) {
  ScratchDir dir;
  const DiskCache cache(dir.path());
  auto client = testing::make_client(testing::cpu_plugins()[0].path);
  ASSERT_TRUE(client);
  const Program add = program(kAdd, "add.mlir");
  std::vector<std::thread> threads;
  std::atomic<int> succeeded{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto out = compile_with(*client, add, cache);
      if (out && out->notes.empty() && run(*client, *out->executable) == std::vector<float>{11, 22, 33, 44}) ++succeeded;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(succeeded.load(), 8);
  auto checks = cache.verify();
  ASSERT_TRUE(checks);
  ASSERT_EQ(checks->size(), 1u);
  EXPECT_TRUE((*checks)[0].status) << (*checks)[0].status.error().to_string();
  // No temporary file left behind.
  size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path()))
    if (f.is_regular_file()) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(CompileCacheEviction, TheLeastRecentlyUsedEntriesGoFirstAtTheSizeLimit) {
  ScratchDir dir;
  auto client = testing::make_client(testing::cpu_plugins()[0].path);
  ASSERT_TRUE(client);
  const DiskCache unlimited(dir.path());
  auto add = compile_with(*client, program(kAdd, "add.mlir"), unlimited);
  auto mul = compile_with(*client, program(kMul, "mul.mlir"), unlimited);
  ASSERT_TRUE(add && mul);
  const auto add_size = std::filesystem::file_size(unlimited.entry_path(add->key));
  const auto mul_size = std::filesystem::file_size(unlimited.entry_path(mul->key));
  // add is used after mul: mul is the least recently used.
  const auto now = std::filesystem::file_time_type::clock::now();
  std::filesystem::last_write_time(unlimited.entry_path(mul->key), now - std::chrono::hours(2));
  std::filesystem::last_write_time(unlimited.entry_path(add->key), now - std::chrono::hours(1));
  auto hit = compile_with(*client, program(kAdd, "add.mlir"), unlimited);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->origin, Origin::kCompileCache);
  // Room for two entries (the third, sub, is about their size): storing sub evicts mul only.
  const DiskCache limited(dir.path(), add_size + mul_size + 64);
  auto sub = compile_with(*client, program(kSub, "sub.mlir"), limited);
  ASSERT_TRUE(sub);
  EXPECT_FALSE(std::filesystem::exists(limited.entry_path(mul->key)));
  EXPECT_TRUE(std::filesystem::exists(limited.entry_path(add->key)));
  EXPECT_TRUE(std::filesystem::exists(limited.entry_path(sub->key)));
  auto stats = limited.stats();
  ASSERT_TRUE(stats);
  EXPECT_LE(stats->bytes, add_size + mul_size + 64);
}

TEST(CompileCacheSettings, TheEnvironmentTurnsTheCacheOffAndBadValuesAreNamed) {
  {
    testing::ScopedEnv off("PLUGBOARD_COMPILE_CACHE", "off");
    auto s = compile_cache::settings_from_environment();
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->enabled);
  }
  {
    testing::ScopedEnv bad("PLUGBOARD_COMPILE_CACHE", "maybe");
    auto s = compile_cache::settings_from_environment();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("PLUGBOARD_COMPILE_CACHE"), std::string::npos);
  }
  {
    testing::ScopedEnv bad("PLUGBOARD_COMPILE_CACHE_MAX_MB", "12x");
    auto s = compile_cache::settings_from_environment();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().to_string().find("PLUGBOARD_COMPILE_CACHE_MAX_MB"), std::string::npos);
  }
  testing::ScopedEnv dir("PLUGBOARD_COMPILE_CACHE_DIR", "/somewhere/else");
  testing::ScopedEnv mb("PLUGBOARD_COMPILE_CACHE_MAX_MB", "3");
  auto s = compile_cache::settings_from_environment();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dir, "/somewhere/else");
  EXPECT_EQ(s->max_bytes, uint64_t{3} << 20);
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, CompileCacheTest, ::testing::ValuesIn(testing::cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

// ---- Precompiled programs in a bundle.

struct PrecompiledBundle {
  ScratchDir dir;
  std::filesystem::path bundle = dir / "bundle";
  std::filesystem::path program = dir / "add.mlir";
};

void make_precompiled_bundle(PrecompiledBundle& b) {
  std::ofstream(b.program) << kAdd;
  bundle::TargetSource cpu;
  cpu.name = "cpu";
  cpu.file = testing::cpu_plugins()[0].path;
  cpu.platform = "cpu";
  ASSERT_TRUE(bundle::write_bundle(b.bundle, {cpu}));
  bundle::PrecompileRequest request;
  request.programs = {b.program};
  auto outcomes = bundle::precompile_bundle(b.bundle, request);
  ASSERT_TRUE(outcomes) << outcomes.error().to_string();
  ASSERT_EQ(outcomes->size(), 1u);
  ASSERT_FALSE((*outcomes)[0].skipped) << (*outcomes)[0].skipped->to_string();
}

// Boots the bundle and compiles add.mlir through what the boot's chosen target carries.
Expected<CompileOutcome> boot_and_compile(const PrecompiledBundle& b) {
  bundle::BootOptions options;
  options.discovery.bundle = b.bundle;
  options.discovery.environment = false;
  auto booted = bundle::boot(options);
  if (!booted) return std::unexpected(booted.error());
  PB_RETURN_IF_ERROR(booted->selection.status());
  CompileSources sources;  // the bundle alone: no persistent cache to hit instead
  for (const auto& f : booted->selection.report.chosen_report()->candidate.precompiled)
    sources.precompiled.push_back({f.path, f.size, f.sha256});
  EXPECT_EQ(sources.precompiled.size(), 1u);
  auto p = Program::from_file(b.program);
  if (!p) return std::unexpected(p.error());
  auto out = compile_cache::compile(*booted->selection.client, *p, CompileOptions(), sources);
  if (out) {
    EXPECT_EQ(run(*booted->selection.client, *out->executable), (std::vector<float>{11, 22, 33, 44}));
  }
  return out;
}

TEST(PrecompiledBundle, TheChosenTargetRunsAPrecompiledProgramWithoutCompiling) {
  PrecompiledBundle b;
  make_precompiled_bundle(b);
  auto manifest = bundle::read_manifest(b.bundle);
  ASSERT_TRUE(manifest);
  ASSERT_EQ(manifest->targets[0].precompiled.size(), 1u);
  EXPECT_EQ(manifest->targets[0].precompiled[0].program, b.program.string());
  auto out = boot_and_compile(b);
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(out->origin, Origin::kPrecompiled) << joined(out->notes);
  EXPECT_TRUE(out->notes.empty()) << joined(out->notes);
}

TEST(PrecompiledBundle, ATamperedPrecompiledEntryIsRefusedByTheManifestHashAndTheProgramCompiled) {
  PrecompiledBundle b;
  make_precompiled_bundle(b);
  auto manifest = bundle::read_manifest(b.bundle);
  ASSERT_TRUE(manifest);
  const std::filesystem::path entry = b.bundle / manifest->targets[0].precompiled[0].file;
  // Same size, one byte changed, and the entry's own checksum made right again: only the manifest's
  // sha256 can tell.
  auto decoded = compile_cache::decode_entry(read_all(entry), "", entry.string());
  ASSERT_TRUE(decoded);
  decoded->metadata["program"] = "evi.mlir";
  write_all(entry, *compile_cache::encode_entry(*decoded));
  auto out = boot_and_compile(b);
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(out->origin, Origin::kCompiled);
  EXPECT_NE(joined(out->notes).find("the manifest says"), std::string::npos) << joined(out->notes);
}

TEST(PrecompiledBundle, TargetsThatCannotCompileHereAreLeftWithTheReason) {
  PrecompiledBundle b;
  std::ofstream(b.program) << kAdd;
  bundle::TargetSource cpu;
  cpu.name = "cpu";
  cpu.file = testing::cpu_plugins()[0].path;
  cpu.platform = "cpu";
  bundle::TargetSource cuda;
  cuda.name = "cuda13";
  cuda.file = testing::cuda_plugin().path;
  cuda.platform = "cuda";
  ASSERT_TRUE(bundle::write_bundle(b.bundle, {cpu, cuda}));
  bundle::PrecompileRequest request;
  request.programs = {b.program};
  auto outcomes = bundle::precompile_bundle(b.bundle, request);
  ASSERT_TRUE(outcomes) << outcomes.error().to_string();
  ASSERT_EQ(outcomes->size(), 2u);
  EXPECT_FALSE((*outcomes)[0].skipped);
  ASSERT_TRUE((*outcomes)[1].skipped);
  EXPECT_NE((*outcomes)[1].skipped->message().find("GPU target configuration"), std::string::npos);
  // A program that does not compile fails the run, naming the program and the target.
  std::ofstream(b.dir / "bad.mlir") << "module { func.func @main() { stablehlo.bogus } }";
  request.programs = {b.dir / "bad.mlir"};
  auto bad = bundle::precompile_bundle(b.bundle, request);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().to_string().find("bad.mlir for target cpu"), std::string::npos) << bad.error().to_string();
}

}  // namespace
}  // namespace plugboard

namespace plugboard {
namespace {

// The CUDA plugin compiles for an H200 described by a GPU target configuration, with no GPU here:
// the executable is stored in the bundle under the key a client on an H200 computes.
TEST(PrecompiledBundle, ACudaTargetPrecompilesWithoutAGpuFromAGpuTargetConfiguration) {
  PrecompiledBundle b;
  std::ofstream(b.program) << kAdd;
  bundle::TargetSource cuda;
  cuda.name = "cuda13";
  cuda.file = testing::cuda_plugin().path;
  cuda.platform = "cuda";
  ASSERT_TRUE(bundle::write_bundle(b.bundle, {cuda}));
  auto config = read_regular_file(std::filesystem::path(PLUGBOARD_SOURCE_DIR) / "examples/gpu/h200.textproto", 1 << 20);
  ASSERT_TRUE(config);
  bundle::PrecompileRequest request;
  request.programs = {b.program};
  request.topologies["cuda13"] = bundle::gpu_topology_options(*config);
  auto outcomes = bundle::precompile_bundle(b.bundle, request);
  ASSERT_TRUE(outcomes) << outcomes.error().to_string();
  ASSERT_EQ(outcomes->size(), 1u);
  ASSERT_FALSE((*outcomes)[0].skipped) << (*outcomes)[0].skipped->to_string();
  auto manifest = bundle::read_manifest(b.bundle);
  ASSERT_TRUE(manifest);
  ASSERT_EQ(manifest->targets[0].precompiled.size(), 1u);
  const auto& pp = manifest->targets[0].precompiled[0];
  auto entry = compile_cache::read_precompiled({b.bundle / pp.file, pp.size, pp.sha256});
  ASSERT_TRUE(entry) << entry.error().to_string();
  EXPECT_EQ(entry->metadata["device_kinds"], "NVIDIA H200");
  EXPECT_EQ(entry->metadata["platform"], "cuda");
  EXPECT_GT(entry->payload.size(), 1000u);
  // The key is the one a client of this plugin with one NVIDIA H200 computes for this program.
  compile_cache::Target h200{manifest->targets[0].sha256, "cuda", "", {"NVIDIA H200"}};
  EXPECT_EQ(entry->key, compile_cache::cache_key(h200, CompileOptions().serialize(), kAdd));
  // A configuration that is not one is the plugin's error, naming the target.
  request.topologies["cuda13"] = bundle::gpu_topology_options("not a config {");
  auto bad = bundle::precompile_bundle(b.bundle, request);
  ASSERT_TRUE(bad) << bad.error().to_string();
  ASSERT_TRUE((*bad)[0].skipped);
  EXPECT_NE((*bad)[0].skipped->to_string().find("GpuTargetConfigProto"), std::string::npos) << (*bad)[0].skipped->to_string();
}

}  // namespace
}  // namespace plugboard
