// Bundles: writing one (identical files stored once), reading its manifest strictly (malformed and
// hostile manifests refused, naming the field), and discovery from the environment's variables.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "base/sha256.h"
#include "bundle/assemble.h"
#include "callback/device_bridge.h"
#include "bundle/discovery.h"
#include "bundle/manifest.h"
#include "bundle/precompiled_host.h"
#include "bundle/replace.h"
#include "compile_cache/host_cpu.h"
#include "select/select.h"
#include "select/verify.h"
#include "test_env.h"
#include "zip_writer.h"

namespace plugboard::bundle {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pb_bundle_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A small bundle of the fault plugin under two names, plus the null-API fixture.
std::filesystem::path small_bundle(const std::string& name) {
  auto dir = temp_dir(name);
  std::vector<TargetSource> s(3);
  s[0].name = "one";
  s[0].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
  s[1].name = "two";
  s[1].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
  s[1].create_options = {{"fault", std::string("client_error")}, {"count", int64_t{4}}};
  s[2].name = "tpu";
  s[2].file = PLUGBOARD_FIXTURE_NULL_API;
  s[2].probe = select::ProbeKind::kTpu;
  auto m = write_bundle(dir, s);
  EXPECT_TRUE(m) << m.error().to_string();
  return dir;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Bundle, IdenticalFilesAreStoredOnceAndTheManifestRoundTrips) {
  auto dir = small_bundle("roundtrip");
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  ASSERT_EQ(m->targets.size(), 3u);
  EXPECT_EQ(m->targets[0].file, m->targets[1].file);
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "plugins"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
  EXPECT_EQ(m->targets[0].sha256, *sha256_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_EQ(m->targets[0].pjrt_api.value_or(""), "0.81");
  EXPECT_FALSE(m->targets[2].pjrt_api) << "a TPU target is never loaded to read its version";
  ASSERT_EQ(m->targets[1].create_options.size(), 2u);
  EXPECT_EQ(std::get<std::string>(m->targets[1].create_options[0].value), "client_error");
  EXPECT_EQ(std::get<int64_t>(m->targets[1].create_options[1].value), 4);
  auto cs = bundle_candidates(dir, *m);
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[2].probe, select::ProbeKind::kTpu);
  EXPECT_TRUE(std::filesystem::exists(cs[0].path));
  EXPECT_EQ(cs[0].sha256, m->targets[0].sha256);
}

struct BadManifest {
  std::string name;
  std::string edit_from, edit_to;  // a textual edit of a good manifest
  std::string message;             // a piece of the error
};

class MalformedManifest : public ::testing::TestWithParam<BadManifest> {};

TEST_P(MalformedManifest, IsRefusedNamingTheField) {
  auto dir = small_bundle("bad_" + GetParam().name);
  std::string text = read_text(dir / kManifestName);
  const auto& p = GetParam();
  if (p.edit_from.empty()) text = p.edit_to;
  else {
    size_t at = text.find(p.edit_from);
    ASSERT_NE(at, std::string::npos) << p.edit_from << " in\n" << text;
    text.replace(at, p.edit_from.size(), p.edit_to);
  }
  std::ofstream(dir / kManifestName) << text;
  auto m = read_manifest(dir);
  ASSERT_FALSE(m) << p.name;
  EXPECT_NE(m.error().message().find(p.message), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find(kManifestName), std::string::npos) << "the error names the file";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedManifest,
    ::testing::Values(BadManifest{"NotJson", "", "{\"schema\": 1, \"targets\": [", "not valid JSON"},
                      BadManifest{"NoSchema", "\"schema\": 1,", "", "schema"},
                      BadManifest{"FutureSchema", "\"schema\": 1,", "\"schema\": 2,", "reads schema 1"},
                      BadManifest{"TargetsNotList", "", "{\"schema\": 1, \"targets\": {}}", "targets is missing or not a list"},
                      BadManifest{"NoName", "\"name\": \"one\",", "", "targets[0].name is missing"},
                      BadManifest{"DuplicateName", "\"name\": \"two\"", "\"name\": \"one\"", "targets[1].name 'one' appears twice"},
                      BadManifest{"BadSha", "\"sha256\": \"", "\"sha256\": \"XYZ", "targets[0].sha256"},
                      BadManifest{"SizeNotNumber", "\"size\": ", "\"size\": \"big\", \"x\": ", "targets[0].size"},
                      BadManifest{"AbsoluteFile", "\"file\": \"plugins/", "\"file\": \"/etc/plugins/", "targets[0].file is an absolute path"},
                      BadManifest{"DotDotFile", "\"file\": \"plugins/", "\"file\": \"../plugins/", "targets[0].file contains '..'"},
                      BadManifest{"BadProbe", "\"probe\": \"tpu\"", "\"probe\": \"quantum\"", "targets[2].probe"},
                      BadManifest{"BadCreateOption", "\"count\": 4", "\"count\": {\"nested\": 1}", "targets[1].create_options"}),
    [](const auto& info) { return info.param.name; });

TEST(Bundle, SymlinkLeadingOutIsRefused) {
  auto dir = small_bundle("symlink");
  auto outside = temp_dir("outside");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, outside / "evil.so");
  std::filesystem::create_directory_symlink(outside, dir / "plugins/escape");
  std::string text = read_text(dir / kManifestName);
  const std::string from = "\"file\": \"plugins/";
  text.replace(text.find(from), from.size() + 16, "\"file\": \"plugins/escape");
  size_t name_at = text.find("plugins/escape/") + std::string("plugins/escape/").size();
  text.replace(name_at, text.find('"', name_at) - name_at, "evil.so");
  std::ofstream(dir / kManifestName) << text;
  auto m = read_manifest(dir);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("targets[0].file"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find("leads outside the bundle"), std::string::npos) << m.error().message();
}

TEST(Bundle, AFileThatDisagreesWithTheManifestIsRefusedAtBoot) {
  auto dir = small_bundle("disagree");
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  // Replace the stored plugin by another library: same place, other bytes.
  const auto stored = dir / m->targets[0].file;
  std::filesystem::remove(stored);
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_NO_GET_PJRT_API, stored);
  auto cs = bundle_candidates(dir, *m);
  select::VerifyOptions o{"", false};
  auto v = select::verify_candidate(cs[0], o);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code(), Code::kDataLoss);
  EXPECT_NE(v.error().message().find("targets[0]"), std::string::npos) << v.error().message();
}

TEST(Bundle, MissingManifestNamesTheFolder) {
  auto dir = temp_dir("empty");
  auto m = read_manifest(dir);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code(), Code::kNotFound);
  EXPECT_NE(m.error().message().find(dir.string()), std::string::npos);
}

TEST(Discovery, JaxNamesAndLibraryPaths) {
  std::vector<std::string> notes;
  auto cs = candidates_from_jax_names("cuda13:/opt/a/xla_cuda_plugin.so,garbage,cpu:/opt/b/cpu.so", notes);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].name, "cuda13");
  EXPECT_EQ(cs[0].platform, "cuda");
  EXPECT_EQ(cs[0].probe, select::ProbeKind::kCuda);
  EXPECT_EQ(cs[1].path, "/opt/b/cpu.so");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("garbage"), std::string::npos);
}

TEST(Discovery, PluginPathHoldsPluginsAndBundles) {
  auto root = temp_dir("plugin_path");
  std::filesystem::create_directories(root / "loose");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, root / "loose/libpjrt_cpu_test.so");
  auto b = small_bundle("in_path");
  std::filesystem::rename(b, root / "loose/mybundle");
  std::vector<std::string> notes;
  auto cs = candidates_from_plugin_path((root / "loose").string() + ":/nonexistent", notes);
  ASSERT_EQ(cs.size(), 4u);  // three from the bundle, one loose plugin
  EXPECT_EQ(cs[3].name, "pjrt_cpu_test");
  EXPECT_EQ(cs[3].platform, "cpu");
  EXPECT_NE(cs[0].source.find("mybundle"), std::string::npos);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("/nonexistent"), std::string::npos);

  ::setenv("PLUGBOARD_PLUGIN_PATH", (root / "loose").string().c_str(), 1);
  ::setenv("PJRT_NAMES_AND_LIBRARY_PATHS", "rocm7:/opt/rocm.so", 1);
  auto d = discover(DiscoveryOptions{});
  ::unsetenv("PLUGBOARD_PLUGIN_PATH");
  ::unsetenv("PJRT_NAMES_AND_LIBRARY_PATHS");
  PB_ASSERT_OK(d);
  ASSERT_EQ(d->candidates.size(), 5u);
  EXPECT_EQ(d->candidates.back().name, "rocm7");
}

// A PLUGBOARD_PLUGIN_PATH entry that names a file (issue 24): a plugin file is a candidate; any other
// file is refused with a note naming it (it was ignored as "not a folder" before).
TEST(Discovery, PluginPathEntryThatIsAFile) {
  auto root = temp_dir("plugin_path_file");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, root / "libpjrt_cpu_file.so");
  std::ofstream(root / "notes.txt") << "not a plugin";
  std::vector<std::string> notes;
  auto cs = candidates_from_plugin_path((root / "libpjrt_cpu_file.so").string() + ":" + (root / "notes.txt").string(), notes);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].name, "pjrt_cpu_file");
  EXPECT_EQ(cs[0].platform, "cpu");
  EXPECT_EQ(cs[0].path, root / "libpjrt_cpu_file.so");
  EXPECT_EQ(cs[0].source, "PLUGBOARD_PLUGIN_PATH " + (root / "libpjrt_cpu_file.so").string());
  EXPECT_EQ(cs[0].origin, "environment");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("refused the file " + (root / "notes.txt").string()), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("not a PJRT plugin"), std::string::npos) << notes[0];

  // A shared library that exports no GetPjrtApi is refused too (the gtest binary itself is an ELF file).
  notes.clear();
  EXPECT_TRUE(candidates_from_plugin_path("/proc/self/exe", notes).empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("not a PJRT plugin"), std::string::npos) << notes[0];

  // Through discover(): the file's candidate, with its notes.
  ::setenv("PLUGBOARD_PLUGIN_PATH", (root / "libpjrt_cpu_file.so").string().c_str(), 1);
  auto d = discover(DiscoveryOptions{});
  ::unsetenv("PLUGBOARD_PLUGIN_PATH");
  PB_ASSERT_OK(d);
  ASSERT_EQ(d->candidates.size(), 1u);
  EXPECT_EQ(d->candidates[0].name, "pjrt_cpu_file");
  std::filesystem::remove_all(root);
}

// Issue 24: a bundle is replaced whole. A build that does not commit leaves the old bundle as it was
// and no staging folder; a commit swaps the new one in; the lock lives beside the folder.
TEST(BundleReplacement, SwapsInOnlyWhenComplete) {
  auto root = temp_dir("replace");
  const auto dir = root / "bundle";
  std::filesystem::rename(small_bundle("replace_old"), dir);
  const std::string before = read_text(dir / kManifestName);
  {
    auto r = BundleReplacement::begin(dir);
    PB_ASSERT_OK(r);
    EXPECT_EQ((*r)->staging(), root / ".bundle.staging");
    std::vector<TargetSource> s(1);
    s[0].name = "half";
    s[0].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
    PB_ASSERT_OK(write_bundle((*r)->staging(), s));
    // dropped without commit: a failed build
  }
  EXPECT_EQ(read_text(dir / kManifestName), before);
  EXPECT_FALSE(std::filesystem::exists(root / ".bundle.staging"));
  EXPECT_TRUE(std::filesystem::exists(root / "bundle.lock"));

  auto r = BundleReplacement::begin(dir);
  PB_ASSERT_OK(r);
  std::vector<TargetSource> s(1);
  s[0].name = "fresh";
  s[0].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
  PB_ASSERT_OK(write_bundle((*r)->staging(), s));
  PB_ASSERT_OK((*r)->commit());
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  ASSERT_EQ(m->targets.size(), 1u);
  EXPECT_EQ(m->targets[0].name, "fresh");
  EXPECT_FALSE(std::filesystem::exists(root / ".bundle.staging"));
  r->reset();
  std::filesystem::remove_all(root);
}

// Two replacements of one folder at once (threads; processes take the same flock) leave one whole
// bundle: each target file present with its manifest sha256.
TEST(BundleReplacement, ConcurrentBuildsLeaveOneGoodBundle) {
  auto root = temp_dir("replace_concurrent");
  const auto dir = root / "bundle";
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto r = BundleReplacement::begin(dir);
      if (!r) return void(++failures);
      std::vector<TargetSource> s(2);
      s[0].name = "a" + std::to_string(t);
      s[0].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
      s[1].name = "b" + std::to_string(t);
      s[1].file = PLUGBOARD_FIXTURE_NULL_API;
      if (!write_bundle((*r)->staging(), s)) return void(++failures);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!(*r)->commit()) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  ASSERT_EQ(m->targets.size(), 2u);
  EXPECT_EQ(m->targets[0].name.substr(1), m->targets[1].name.substr(1));  // one build's pair
  for (const auto& t : m->targets) {
    const std::string text = read_text(dir / t.file);
    EXPECT_EQ(sha256_hex(std::as_bytes(std::span(text.data(), text.size()))), t.sha256) << t.file;
  }
  EXPECT_FALSE(std::filesystem::exists(root / ".bundle.staging"));
  std::filesystem::remove_all(root);
}

// Issue 24: precompiled CPU programs carry the processor they were compiled on ("built_on"); a boot on
// another processor says so, and why, instead of compiling again without a word.
constexpr const char* kCpuA =
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU A\nflags\t\t: fpu sse2 avx2 avx512f\n\n"
    "processor\t: 1\nmodel name\t: Test CPU A\nflags\t\t: fpu sse2 avx2 avx512f\n";
constexpr const char* kCpuB = "processor\t: 0\nmodel name\t: Test CPU B\nflags\t\t: fpu sse2 avx2 sha_ni\n\n";

TEST(PrecompiledHost, CpuinfoIsReadAsTheCacheKeyReadsIt) {
  const compile_cache::HostCpu a = compile_cache::parse_cpuinfo(kCpuA);
  EXPECT_EQ(a.model, "Test CPU A");
  EXPECT_EQ(a.flags, (std::vector<std::string>{"fpu", "sse2", "avx2", "avx512f"}));
  // The digest the keys have always held: the first processor's "model name" and "flags" lines.
  const std::string picked = "model name\t: Test CPU A\nflags\t\t: fpu sse2 avx2 avx512f\n";
  EXPECT_EQ(a.digest, sha256_hex(std::as_bytes(std::span(picked.data(), picked.size()))));
  EXPECT_TRUE(compile_cache::parse_cpuinfo("nothing here\n").digest.empty());
  auto here = compile_cache::this_host_cpu();
  PB_ASSERT_OK(here);
  EXPECT_FALSE(here->model.empty());
}

TEST(PrecompiledHost, AnotherProcessorIsNamedWithTheFeaturesThatDiffer) {
  const compile_cache::HostCpu a = compile_cache::parse_cpuinfo(kCpuA), b = compile_cache::parse_cpuinfo(kCpuB);
  TargetEntry e;
  e.name = "cpu";
  std::string flags;
  for (const auto& f : a.flags) flags += (flags.empty() ? "" : " ") + f;
  e.precompiled.push_back({"model.mlir", "compiled/cpu/x.pbx", 1, std::string(64, '0'), BuiltOn{a.model, a.digest, flags, ""}});
  EXPECT_EQ(precompiled_mismatch(e, a, ""), "");
  const std::string why = precompiled_mismatch(e, b, "");
  EXPECT_NE(why.find("1 of 1 precompiled program of target cpu will not load on this host"), std::string::npos) << why;
  EXPECT_NE(why.find("built on \"Test CPU A\", this host is \"Test CPU B\""), std::string::npos) << why;
  EXPECT_NE(why.find("features there, not here: avx512f"), std::string::npos) << why;
  EXPECT_NE(why.find("here, not there: sha_ni"), std::string::npos) << why;
  EXPECT_NE(precompiled_mismatch(e, std::nullopt, "").find("cannot be identified"), std::string::npos);
  const std::string flags_why = precompiled_mismatch(e, a, "--xla_cpu_enable_fast_math=true");
  EXPECT_NE(flags_why.find("XLA_FLAGS=\"\", this process has XLA_FLAGS=\"--xla_cpu_enable_fast_math=true\""), std::string::npos)
      << flags_why;
  // A bundle made before "built_on" says nothing.
  e.precompiled[0].built_on.reset();
  EXPECT_EQ(precompiled_mismatch(e, b, "x"), "");
}

// Through the manifest: "built_on" round-trips, and the bundle's candidate carries the mismatch to the
// boot report (its text included).
TEST(PrecompiledHost, ABundleCandidateCarriesTheMismatchIntoTheReport) {
  auto dir = small_bundle("built_on");
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  std::filesystem::create_directories(dir / "compiled/one");
  const std::string key(64, 'a');
  std::ofstream(dir / ("compiled/one/" + key + ".pbx")) << "entry";
  m->targets[0].precompiled.push_back({"model.mlir", "compiled/one/" + key + ".pbx", 5, std::string(64, '0'),
                                       BuiltOn{"Test CPU 9000", std::string(64, 'f'), "fpu avx9000", ""}});
  PB_ASSERT_OK(write_manifest(dir, *m));
  auto again = read_manifest(dir);
  PB_ASSERT_OK(again);
  ASSERT_TRUE(again->targets[0].precompiled[0].built_on);
  EXPECT_EQ(again->targets[0].precompiled[0].built_on->cpu, "Test CPU 9000");
  EXPECT_EQ(again->targets[0].precompiled[0].built_on->cpu_flags, "fpu avx9000");
  auto cs = bundle_candidates(dir, *again);
  EXPECT_NE(cs[0].precompiled_mismatch.find("built on \"Test CPU 9000\", this host is \""), std::string::npos)
      << cs[0].precompiled_mismatch;
  EXPECT_NE(cs[0].precompiled_mismatch.find("features there, not here: avx9000"), std::string::npos);
  EXPECT_EQ(cs[0].origin, "bundle");
  EXPECT_EQ(cs[1].precompiled_mismatch, "");
  select::SelectOptions options;
  options.target = "one";
  options.before_loading_only = true;
  const select::Selection sel = select::select_target(cs, options);
  EXPECT_NE(sel.report.to_text().find("precompiled: 1 of 1 precompiled program of target one will not load"), std::string::npos)
      << sel.report.to_text();
  std::filesystem::remove_all(dir);
}

TEST(Discovery, SitePackagesPluginFolders) {
  auto site = temp_dir("site");
  std::filesystem::create_directories(site / "jax_plugins/xla_cuda13");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, site / "jax_plugins/xla_cuda13/xla_cuda_plugin.so");
  std::filesystem::create_directories(site / "jax_plugins/empty_pkg");
  std::vector<std::string> notes;
  auto cs = candidates_from_site_packages(site, notes);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].name, "cuda13");
  EXPECT_EQ(cs[0].probe, select::ProbeKind::kCuda);
  EXPECT_EQ(notes.size(), 1u);
}

}  // namespace
}  // namespace plugboard::bundle

namespace plugboard::bundle {
namespace {

// A wheel (a zip) holding `members` (path in the wheel -> file on disk).
void write_wheel(const std::filesystem::path& wheel, const std::vector<std::pair<std::string, std::filesystem::path>>& members) {
  std::vector<plugboard::testing::ZipMember> zip;
  for (const auto& [name, file] : members) zip.push_back({.name = name, .file = file, .method = "deflated"});
  plugboard::testing::write_zip(wheel, zip);
}

TEST(Companions, AWheelOfLibrariesIsLaidOutWhereTheRunpathLooksAndVerified) {
  auto dir = temp_dir("companions");
  // The fixture needs a vendor library but is no PJRT plugin, which write_bundle refuses: its entry is
  // written by hand.
  {
    const std::string sha = *sha256_file(PLUGBOARD_FIXTURE_NEEDS_VENDOR);
    TargetEntry e;
    e.name = "vendor";
    e.platform = "unknown";
    e.file = "plugins/" + sha.substr(0, 16) + "/libneeds_vendor.so";
    e.size = std::filesystem::file_size(PLUGBOARD_FIXTURE_NEEDS_VENDOR);
    e.sha256 = sha;
    std::filesystem::create_directories((dir / e.file).parent_path());
    std::filesystem::copy_file(PLUGBOARD_FIXTURE_NEEDS_VENDOR, dir / e.file);
    Manifest manifest;
    manifest.targets.push_back(e);
    PB_ASSERT_OK(write_manifest(dir, manifest));
  }
  select::SelectOptions o;
  o.verify.stamp_dir = "";
  {
    auto m = read_manifest(dir);
    PB_ASSERT_OK(m);
    auto sel = select::select_target(bundle_candidates(dir, *m), o);
    ASSERT_EQ(sel.report.candidates[0].failed_stage, select::Stage::kDependencies) << sel.report.to_text();
    EXPECT_NE(sel.report.candidates[0].error->message().find("libcompanion_dep.so"), std::string::npos);
  }
  auto scratch = temp_dir("companion_wheel");
  std::ofstream(scratch / "__init__.py") << "";
  write_wheel(scratch / "vendor_libs-1.0-py3-none-any.whl",
              {{"vendor/lib/libcompanion_dep.so", PLUGBOARD_FIXTURE_COMPANION_DEP}, {"vendor/__init__.py", scratch / "__init__.py"}});
  auto added = add_companion_wheel(dir, "vendor", scratch / "vendor_libs-1.0-py3-none-any.whl", "vendor-libs==1.0");
  PB_ASSERT_OK(added);
  EXPECT_EQ(*added, 1u);  // the .py is not a library
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  ASSERT_EQ(m->targets[0].companions.size(), 1u);
  EXPECT_EQ(m->targets[0].companions[0].file, "plugins/vendor/lib/libcompanion_dep.so");
  EXPECT_EQ(m->targets[0].companions[0].sha256, *sha256_file(PLUGBOARD_FIXTURE_COMPANION_DEP));
  auto sel = select::select_target(bundle_candidates(dir, *m), o);
  const auto& r = sel.report.candidates[0];
  // The dependency stage now finds it in the bundle; the fixture is no PJRT plugin, so loading stops it.
  EXPECT_EQ(r.failed_stage, select::Stage::kLoaded) << sel.report.to_text();

  // A tampered companion is refused at the verified stage, naming the companion.
  {
    std::fstream f(dir / m->targets[0].companions[0].file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(64);
    const char old = static_cast<char>(f.get());
    f.seekp(64);
    f.put(static_cast<char>(~old));
  }
  auto tampered = select::select_target(bundle_candidates(dir, *m), o);
  ASSERT_EQ(tampered.report.candidates[0].failed_stage, select::Stage::kVerified) << tampered.report.to_text();
  EXPECT_NE(tampered.report.candidates[0].error->to_string().find("companion"), std::string::npos);

  auto unknown = add_companion_wheel(dir, "nosuch", scratch / "vendor_libs-1.0-py3-none-any.whl", "x");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("no target nosuch"), std::string::npos);
}

// What `plugboard bundle` does for a CUDA target: plugboard's callback bridge goes beside the plugin,
// where host callbacks look first, recorded and verified like any companion.
TEST(Companions, AFileBesideThePluginIsShippedWhereTheBridgeSearchLooks) {
  auto dir = temp_dir("bridge_beside");
  std::vector<TargetSource> s(1);
  s[0].name = "gpu";
  s[0].file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
  s[0].platform = "cuda";
  PB_ASSERT_OK(write_bundle(dir, s));
  auto scratch = temp_dir("bridge_file");
  const auto bridge = scratch / device_bridge_file_name("CUDA");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_COMPANION_DEP, bridge);  // a stand-in: any shared library
  PB_ASSERT_OK(add_companion_file(dir, "gpu", bridge, "plugboard CUDA callback bridge"));
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  const auto& t = m->targets[0];
  ASSERT_EQ(t.companions.size(), 1u);
  const auto beside = std::filesystem::path(t.file).parent_path() / "libplugboard_cuda_bridge.so";
  EXPECT_EQ(t.companions[0].file, beside.string());
  EXPECT_EQ(t.companions[0].sha256, *sha256_file(bridge));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / beside));
  ::unsetenv("PLUGBOARD_CUDA_BRIDGE");
  auto path = device_bridge_search_path("CUDA", dir / t.file);
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(std::filesystem::weakly_canonical(path[0]), std::filesystem::weakly_canonical(dir / beside));
  auto unknown = add_companion_file(dir, "nosuch", bridge, "x");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("no target nosuch"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------
// Assembling a bundle from hostile or conflicting input (issue 11): all or nothing, one run at a time.

// Every file of a folder with its bytes: equal snapshots mean an untouched bundle.
std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[std::filesystem::relative(e.path(), dir).string()] = read_text(e.path());
  return out;
}

TargetSource fault_target(const std::string& name) {
  TargetSource t;
  t.name = name;
  t.file = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;
  return t;
}

TEST(Assemble, AFileThatIsNoPjrtPluginIsRefusedAndNothingIsWritten) {
  auto scratch = temp_dir("not_plugin_files");
  const auto text = scratch / "notplugin.so";
  std::ofstream(text) << "not a plugin\n";
  const auto link = scratch / "link.so";
  std::filesystem::create_symlink(text, link);
  const auto fifo = scratch / "fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::filesystem::path& bad : {text, link, fifo, std::filesystem::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API)}) {
    auto dir = temp_dir("not_plugin");
    std::filesystem::remove(dir);
    TargetSource t = fault_target("cpu");
    t.file = bad;
    auto m = write_bundle(dir, {t});
    ASSERT_FALSE(m) << bad;
    EXPECT_NE(m.error().to_string().find(bad.string()), std::string::npos) << m.error().to_string();
    EXPECT_NE(m.error().to_string().find("target cpu"), std::string::npos) << m.error().to_string();
    EXPECT_FALSE(std::filesystem::exists(dir)) << "a failed run left " << dir;
  }
}

TEST(Assemble, AnyErrorLeavesAGoodBundleAsItWas) {
  auto dir = small_bundle("all_or_nothing");
  const auto before = snapshot(dir);
  auto scratch = temp_dir("all_or_nothing_wheel");
  write_wheel(scratch / "vendor_libs-1.0-py3-none-any.whl", {{"vendor/lib/libcompanion_dep.so", PLUGBOARD_FIXTURE_COMPANION_DEP}});
  write_wheel(scratch / "empty-1.0-py3-none-any.whl", {{"empty/README", PLUGBOARD_FIXTURE_COMPANION_DEP}});
  TargetSource with_dup_option = fault_target("opts");
  with_dup_option.create_options = {{"fault", std::string("crash")}, {"fault", std::string("hang")}};
  TargetSource nul_name = fault_target(std::string("nul\0name", 8));
  TargetSource new_one = fault_target("fresh");
  new_one.file = PLUGBOARD_FIXTURE_FAULT_INIT_ERROR;  // a file the bundle does not hold yet
  struct Case {
    std::string what;
    BundlePlan plan;
  };
  const std::vector<Case> cases = {
      {"a bad name after a good target", {{new_one, fault_target("bad name")}, {}, {}}},
      {"a name given twice", {{new_one, fault_target("fresh")}, {}, {}}},
      {"a NUL in a name", {{new_one, nul_name}, {}, {}}},
      {"a create option given twice", {{new_one, with_dup_option}, {}, {}}},
      {"a companion for a target that is not there", {{new_one}, {{"nosuch", scratch / "vendor_libs-1.0-py3-none-any.whl", "x"}}, {}}},
      {"a companion wheel without libraries", {{new_one}, {{"fresh", scratch / "empty-1.0-py3-none-any.whl", "x"}}, {}}},
      {"a companion file that is not there", {{new_one}, {}, {{"fresh", "", scratch / "missing.so", "x"}}}},
  };
  for (const Case& c : cases) {
    auto a = assemble_bundle(dir, c.plan);
    EXPECT_FALSE(a) << c.what;
    EXPECT_EQ(snapshot(dir), before) << c.what << " changed the bundle";
  }
  auto m = read_manifest(dir);
  PB_ASSERT_OK(m);
  EXPECT_EQ(m->targets.size(), 3u);
}

// Several runs on one bundle at once, each adding its own target: every target is there at the end.
TEST(Assemble, ConcurrentRunsOnOneBundleLoseNoTarget) {
  for (int round = 0; round < 5; ++round) {
    auto dir = temp_dir("concurrent");
    std::filesystem::remove(dir);
    constexpr int kRuns = 4;
    std::vector<std::optional<Expected<Manifest>>> results(kRuns);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRuns; ++i)
      threads.emplace_back([&, i] { results[i] = write_bundle(dir, {fault_target("t" + std::to_string(i))}); });
    for (auto& t : threads) t.join();
    for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(*results[i]) << "run " << i << ": " << results[i]->error().to_string();
    auto m = read_manifest(dir);
    PB_ASSERT_OK(m);
    std::set<std::string> names;
    for (const auto& t : m->targets) names.insert(t.name);
    EXPECT_EQ(names.size(), static_cast<size_t>(kRuns)) << "round " << round << ": a target was lost";
  }
}

}  // namespace
}  // namespace plugboard::bundle
