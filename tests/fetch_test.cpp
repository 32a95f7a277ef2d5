// The fetch layer on real wheels (from scripts/setup.sh, in PLUGBOARD_DEPS_DIR/wheels) and on fake
// wheels built here (by Python's zipfile, tests/zip_writer.h) around the fixture libraries:
// extraction byte for byte, cache reuse, plugboard.lock checks, concurrency, inspection of unknown
// packages, pip's errors. No network.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "base/sha256.h"
#include "base/unique_fd.h"
#include "fetch/fetch.h"
#include "fetch/known_packages.h"
#include "fetch/package_spec.h"
#include "fetch/wheel.h"
#include "test_env.h"
#include "zip_writer.h"

namespace plugboard::fetch {
namespace {

namespace fs = std::filesystem;
using plugboard::testing::ScopedEnv;
using plugboard::testing::ScratchDir;
using plugboard::testing::deps_dir;

fs::path wheels_dir() { return deps_dir() / "wheels"; }

// A fresh folder, removed at the end of the test.
PackageSpec spec(const std::string& text) {
  auto s = parse_package_spec(text);
  EXPECT_TRUE(s) << s.error().to_string();
  return s ? *s : PackageSpec{};
}

Expected<FetchedPlugin> fetch_one(const PackageSpec& s, const FetchOptions& options) {
  PB_ASSIGN_OR_RETURN(std::vector<FetchedPlugin> all, fetch(std::span(&s, 1), options));
  return all.at(0);
}

FetchOptions offline(const fs::path& cache, const fs::path& lock, const fs::path& from = wheels_dir()) {
  FetchOptions o;
  o.cache_dir = cache;
  o.lock_path = lock;
  o.offline_from = from;
  return o;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// Regular files under `dir`, recursively, whose path contains `part` (all when empty).
std::vector<fs::path> files_under(const fs::path& dir, const std::string& part = "") {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().string().find(part) != std::string::npos) out.push_back(e.path());
  return out;
}

// Leftover temporaries anywhere in a cache: ".tmp-" files and "tmp-" folders.
std::vector<fs::path> temporaries(const fs::path& cache) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().filename().string().find("tmp-") != std::string::npos) out.push_back(e.path());
  return out;
}

// A zip written by Python's zipfile: each member is a file on disk or literal content; .so members are
// stored uncompressed (so a test can find and flip their bytes).
struct Member {
  std::string name;
  std::optional<fs::path> file;
  std::string content;
};
void make_wheel(const fs::path& path, const std::vector<Member>& members) {
  std::vector<plugboard::testing::ZipMember> zip;
  for (const Member& m : members) zip.push_back({.name = m.name, .file = m.file, .content = m.content});
  plugboard::testing::write_zip(path, zip);
}

const char* kFakeWheel = "fake_pjrt_plugin-1.0-py3-none-linux_x86_64.whl";
const char* kFakeMember = "fake_pjrt_plugin/libfake_plugin.so";

// fake-pjrt-plugin==1.0: a plugin (the well-formed fault fixture), a library that is not one, Python.
void make_fake_plugin_wheel(const fs::path& dir, const std::string& init_py = "") {
  make_wheel(dir / kFakeWheel, {{"fake_pjrt_plugin/__init__.py", std::nullopt, init_py},
                                {"fake_pjrt_plugin/libhelper.so", fs::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API), ""},
                                {kFakeMember, fs::path(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED), ""},
                                {"fake_pjrt_plugin-1.0.dist-info/RECORD", std::nullopt, "fake_pjrt_plugin/__init__.py,,\n"}});
}

std::string sha_of(const fs::path& p) {
  auto h = sha256_file(p);
  EXPECT_TRUE(h) << h.error().to_string();
  return h ? *h : "";
}

// ---------------------------------------------------------------------------------------------------

TEST(PackageSpec, ParsesAnExactPin) {
  auto s = parse_package_spec(" xla-cpu-pjrt==0.0.1 ");
  PB_ASSERT_OK(s);
  EXPECT_EQ(s->name, "xla-cpu-pjrt");
  EXPECT_EQ(s->version, "0.0.1");
  EXPECT_EQ(s->to_string(), "xla-cpu-pjrt==0.0.1");
  PB_ASSERT_OK(parse_package_spec("jax_cuda13_pjrt==0.12.0.1"));
  PB_ASSERT_OK(parse_package_spec("libtpu==0.0.17.dev20250101+nightly"));
}

TEST(PackageSpec, ErrorsNameTheArgument) {
  for (const char* bad : {"xla-cpu-pjrt", "xla-cpu-pjrt>=0.0.1", "xla-cpu-pjrt==", "==0.0.1", "-bad==1.0",
                          "xla cpu==1.0", "xla-cpu-pjrt===0.0.1", "xla-cpu-pjrt==1.*", "xla-cpu-pjrt==1.0,<2"}) {
    auto s = parse_package_spec(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.error().to_string().find(std::string("\"") + bad + "\""), std::string::npos) << s.error().to_string();
  }
}

TEST(PackageSpec, NormalizesNamesAndMatchesWheelFileNames) {
  EXPECT_EQ(normalize_package_name("Jax_CUDA13.pjrt"), "jax-cuda13-pjrt");
  EXPECT_EQ(normalize_package_name("xla__cpu--pjrt"), "xla-cpu-pjrt");
  const auto wheel = parse_wheel_file_name("xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl");
  ASSERT_TRUE(wheel);
  EXPECT_EQ(wheel->name, "xla_cpu_pjrt");
  EXPECT_EQ(wheel->version, "0.0.1");
  EXPECT_FALSE(parse_wheel_file_name("xla_cpu_pjrt-0.0.1.tar.gz"));
  EXPECT_FALSE(parse_wheel_file_name("not-a-wheel.whl"));
  EXPECT_TRUE(wheel_is_for("xla_cpu_pjrt-0.0.1-py3-none-any.whl", spec("XLA.cpu-pjrt==0.0.1")));
  EXPECT_TRUE(wheel_is_for("pkg-1.0-1-py3-none-any.whl", spec("pkg==1.0")));  // with a build tag
  EXPECT_FALSE(wheel_is_for("xla_cpu_pjrt-0.0.10-py3-none-any.whl", spec("xla-cpu-pjrt==0.0.1")));
  EXPECT_FALSE(wheel_is_for("xla_cpu_pjrt_extra-0.0.1-py3-none-any.whl", spec("xla-cpu-pjrt==0.0.1")));
}

TEST(KnownPackages, EmbeddedTableIsWellFormed) {
  PB_ASSERT_OK(embedded_known_packages());
  EXPECT_GE(known_packages().size(), 7u);
  for (const KnownPackage& k : known_packages()) {
    EXPECT_EQ(k.package, normalize_package_name(k.package));
    EXPECT_TRUE(k.plugin_path.ends_with(".so")) << k.package;
    EXPECT_TRUE(k.platform == "cpu" || k.platform == "cuda" || k.platform == "rocm" || k.platform == "tpu") << k.package;
  }
}

TEST(KnownPackages, LookupNormalizesTheName) {
  const KnownPackage* cuda = find_known_package("JAX_cuda13.PJRT");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->plugin_path, "jax_plugins/xla_cuda13/xla_cuda_plugin.so");
  EXPECT_EQ(cuda->platform, "cuda");
  EXPECT_EQ(cuda->probe, "cuda");
  EXPECT_EQ(cuda->priority, 100);
  EXPECT_NE(cuda->companions_note.find("cu13"), std::string::npos);
  const KnownPackage* cpu = find_known_package("xla_cpu_pjrt");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->plugin_path, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
  EXPECT_EQ(cpu->probe, "none");
  ASSERT_NE(find_known_package("jax-rocm7-pjrt"), nullptr);
  EXPECT_EQ(find_known_package("jax-rocm7-pjrt")->platform, "rocm");
  ASSERT_NE(find_known_package("libtpu"), nullptr);
  EXPECT_GT(find_known_package("libtpu")->priority, cuda->priority);
  EXPECT_EQ(find_known_package("numpy"), nullptr);
}

TEST(KnownPackages, MalformedTableNamesTheField) {
  auto t = parse_known_packages(R"({"schema": 1, "packages": [{"package": "a", "platform": "cpu"}]})", "t.json");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message().find("t.json: packages[0].plugin_path"), std::string::npos) << t.error().message();
  EXPECT_FALSE(parse_known_packages(R"({"schema": 2, "packages": []})", "t.json"));
  EXPECT_FALSE(parse_known_packages("{", "t.json"));
}

// ---------------------------------------------------------------------------------------------------
// plugboard.lock

LockEntry sample_entry(const std::string& package) {
  return {package, "1.0", package + "-1.0-py3-none-any.whl", std::string(64, 'a'), package + "/p.so", std::string(64, 'b')};
}

TEST(LockFile, MissingFileIsAnEmptyLock) {
  ScratchDir dir;
  auto lock = read_lock(dir / "plugboard.lock");
  PB_ASSERT_OK(lock);
  EXPECT_TRUE(lock->entries.empty());
}

TEST(LockFile, RoundTripsSortedByPackage) {
  ScratchDir dir;
  LockFile lock;
  lock.entries = {sample_entry("zeta"), sample_entry("alpha")};
  PB_ASSERT_OK(write_lock(dir / "plugboard.lock", lock));
  auto back = read_lock(dir / "plugboard.lock");
  PB_ASSERT_OK(back);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[0].package, "alpha");
  EXPECT_EQ(back->entries[1].package, "zeta");
  EXPECT_EQ(back->entries[1].plugin_sha256, std::string(64, 'b'));
  ASSERT_NE(back->find("Zeta", "1.0"), nullptr);
  EXPECT_EQ(back->find("zeta", "2.0"), nullptr);
  EXPECT_EQ(files_under(dir.path()).size(), 1u);  // no temporary left next to it
}

TEST(LockFile, MalformedLockNamesTheFileAndField) {
  ScratchDir dir;
  const fs::path path = dir / "plugboard.lock";
  struct Case {
    std::string text, expect;
  };
  const std::string good_hash(64, 'c');
  const std::vector<Case> cases = {
      {"{", ": not valid JSON"},
      {R"({"packages": []})", ": schema"},
      {R"({"schema": 7, "packages": []})", ": schema: version 7"},
      {R"({"schema": 1})", ": packages"},
      {R"({"schema": 1, "packages": [{"package": "a", "version": "1", "wheel": "w.whl", "wheel_sha256": ")" + good_hash +
           R"(", "plugin_path": "a/p.so"}]})",
       ": packages[0].plugin_sha256: missing"},
      {R"({"schema": 1, "packages": [{"package": "a", "version": "1", "wheel": "w.whl", "wheel_sha256": "xyz",
           "plugin_path": "a/p.so", "plugin_sha256": ")" + good_hash + R"("}]})",
       ": packages[0].wheel_sha256: \"xyz\" is not a sha256"},
      {R"({"schema": 1, "packages": [{"package": "A_b", "version": "1", "wheel": "w.whl", "wheel_sha256": ")" + good_hash +
           R"(", "plugin_path": "a/p.so", "plugin_sha256": ")" + good_hash + R"("}]})",
       ": packages[0].package: \"A_b\" is not a normalized name"},
  };
  for (const Case& c : cases) {
    write_text(path, c.text);
    auto lock = read_lock(path);
    ASSERT_FALSE(lock) << c.text;
    EXPECT_EQ(lock.error().code(), Code::kInvalidArgument);
    EXPECT_NE(lock.error().message().find(path.string() + c.expect), std::string::npos) << lock.error().message();
  }
  // fetch refuses to run on it too, naming it.
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", path));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().to_string().find(path.string()), std::string::npos) << f.error().to_string();
}

// ---------------------------------------------------------------------------------------------------
// Real wheels. One cache for the suite: the fastatomstruct wheel's plugin is the file set-up extracted
// as files/xla_cpu_106/libpjrt_cpu.so, which gives an independent hash to compare with.

class RealWheel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = new ScratchDir;
    auto f = fetch_one(parse_package_spec(kSpec).value(), offline(cache_->path() / "cache", cache_->path() / "unused.lock"));
    ASSERT_TRUE(f) << f.error().to_string();
    first_ = new FetchedPlugin(*f);
  }
  static void TearDownTestSuite() {
    delete first_;
    delete cache_;
  }
  static fs::path cache() { return cache_->path() / "cache"; }

  static constexpr const char* kSpec = "fastatomstruct-xla-cpu==2026.6.23";
  static inline ScratchDir* cache_ = nullptr;
  static inline FetchedPlugin* first_ = nullptr;
};

TEST_F(RealWheel, OfflineFetchExtractsThePluginByteForByte) {
  ASSERT_NE(first_, nullptr);
  const FetchedPlugin& f = *first_;
  const fs::path reference = deps_dir() / "files/xla_cpu_106/libpjrt_cpu.so";
  ASSERT_TRUE(fs::exists(reference)) << reference << " missing: run scripts/setup.sh";
  const std::string expected = sha_of(reference);
  EXPECT_EQ(f.plugin_sha256, expected);
  EXPECT_EQ(sha_of(f.file), expected);
  EXPECT_EQ(f.file, cache() / "plugins" / expected / "libpjrt_cpu.so");
  EXPECT_EQ(f.size, fs::file_size(reference));
  EXPECT_EQ(f.plugin_path, "fastatomstruct_xla_cpu/libpjrt_cpu.so");
  EXPECT_EQ(f.wheel, "fastatomstruct_xla_cpu-2026.6.23-py3-none-manylinux_2_27_x86_64.whl");
  EXPECT_EQ(f.wheel_sha256, sha_of(wheels_dir() / f.wheel));
  EXPECT_EQ(f.platform, "cpu");
  EXPECT_EQ(f.probe, "none");
  EXPECT_FALSE(f.from_cache);
  EXPECT_EQ(fs::status(f.file).permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
  EXPECT_TRUE(temporaries(cache()).empty());
}

TEST_F(RealWheel, SecondFetchReusesTheCache) {
  ASSERT_NE(first_, nullptr);
  const auto mtime = fs::last_write_time(first_->file);
  ScratchDir dir;
  auto again = fetch_one(spec(kSpec), offline(cache(), dir / "plugboard.lock"));
  PB_ASSERT_OK(again);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->file, first_->file);
  EXPECT_EQ(again->plugin_sha256, first_->plugin_sha256);
  EXPECT_EQ(fs::last_write_time(again->file), mtime);  // not extracted again
  EXPECT_EQ(files_under(cache() / "plugins").size(), 1u);
}

TEST_F(RealWheel, LockRecordsTheFetchAndRefusesATamperedLock) {
  ASSERT_NE(first_, nullptr);
  ScratchDir dir;
  const fs::path lock_path = dir / "plugboard.lock";
  FetchOptions options = offline(cache(), lock_path);
  options.write_lock = true;
  PB_ASSERT_OK(fetch_one(spec(kSpec), options));
  auto lock = read_lock(lock_path);
  PB_ASSERT_OK(lock);
  ASSERT_EQ(lock->entries.size(), 1u);
  const LockEntry entry = lock->entries[0];
  EXPECT_EQ(entry.package, "fastatomstruct-xla-cpu");
  EXPECT_EQ(entry.version, "2026.6.23");
  EXPECT_EQ(entry.wheel, first_->wheel);
  EXPECT_EQ(entry.wheel_sha256, first_->wheel_sha256);
  EXPECT_EQ(entry.plugin_path, first_->plugin_path);
  EXPECT_EQ(entry.plugin_sha256, first_->plugin_sha256);

  // The lock as written is honoured (without --lock too).
  options.write_lock = false;
  PB_ASSERT_OK(fetch_one(spec("FastAtomStruct_XLA_CPU==2026.6.23"), options));

  auto tampered = [&](auto edit) {
    LockFile l = *lock;
    edit(l.entries[0]);
    EXPECT_TRUE(write_lock(lock_path, l));
    return fetch_one(spec(kSpec), options);
  };
  std::string wrong = entry.wheel_sha256;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  auto f = tampered([&](LockEntry& e) { e.wheel_sha256 = wrong; });
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kDataLoss);
  for (const std::string& part : {std::string(kSpec), lock_path.string(), wrong, entry.wheel_sha256, std::string("wheel")})
    EXPECT_NE(f.error().to_string().find(part), std::string::npos) << part << " not in: " << f.error().to_string();

  std::string wrong_plugin = entry.plugin_sha256;
  wrong_plugin[5] = wrong_plugin[5] == 'a' ? 'b' : 'a';
  f = tampered([&](LockEntry& e) { e.plugin_sha256 = wrong_plugin; });
  ASSERT_FALSE(f);
  for (const std::string& part : {std::string(kSpec), lock_path.string(), wrong_plugin, entry.plugin_sha256, std::string("plugin")})
    EXPECT_NE(f.error().to_string().find(part), std::string::npos) << part << " not in: " << f.error().to_string();

  f = tampered([&](LockEntry& e) { e.plugin_path = "fastatomstruct_xla_cpu/other.so"; });
  ASSERT_FALSE(f);
  for (const std::string& part : {std::string(kSpec), lock_path.string(), std::string("fastatomstruct_xla_cpu/other.so")})
    EXPECT_NE(f.error().to_string().find(part), std::string::npos) << part << " not in: " << f.error().to_string();

  // --lock replaces the package's entry (another version of it included) and keeps the others.
  LockFile other = *lock;
  other.entries[0].version = "2020.1.1";
  other.entries.push_back(sample_entry("zz-other"));
  ASSERT_TRUE(write_lock(lock_path, other));
  options.write_lock = true;
  PB_ASSERT_OK(fetch_one(spec(kSpec), options));
  auto updated = read_lock(lock_path);
  PB_ASSERT_OK(updated);
  ASSERT_EQ(updated->entries.size(), 2u);
  EXPECT_EQ(updated->entries[0].version, "2026.6.23");
  EXPECT_EQ(updated->entries[1].package, "zz-other");
}

TEST(Offline, MissingWheelIsNotFoundNamingPackageAndFolder) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");  // another package's wheel is not a match
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kNotFound);
  const std::string message = f.error().to_string();
  EXPECT_NE(message.find("xla-cpu-pjrt==0.0.1"), std::string::npos) << message;
  EXPECT_NE(message.find((dir / "wheels").string()), std::string::npos) << message;
  EXPECT_NE(message.find("xla_cpu_pjrt-0.0.1-*.whl"), std::string::npos) << message;

  auto no_dir = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", dir / "plugboard.lock", dir / "nowhere"));
  ASSERT_FALSE(no_dir);
  EXPECT_EQ(no_dir.error().code(), Code::kNotFound);
  EXPECT_NE(no_dir.error().to_string().find((dir / "nowhere").string()), std::string::npos);
}

// Two threads fetch the same package into the same empty cache: one extracts, the other waits and reuses.
TEST(Concurrency, TwoThreadsShareOneExtraction) {
  ScratchDir dir;
  const FetchOptions options = offline(dir / "cache", dir / "plugboard.lock");
  const PackageSpec s = spec("lammps-jax-pjrt-cpu==0.11.2");
  std::optional<Expected<FetchedPlugin>> a, b;
  std::thread ta([&] { a = fetch_one(s, options); });
  std::thread tb([&] { b = fetch_one(s, options); });
  ta.join();
  tb.join();
  ASSERT_TRUE(*a) << a->error().to_string();
  ASSERT_TRUE(*b) << b->error().to_string();
  EXPECT_EQ((*a)->file, (*b)->file);
  EXPECT_NE((*a)->from_cache, (*b)->from_cache);  // exactly one extracted
  const auto plugins = files_under(dir / "cache" / "plugins");
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].filename(), "pjrt_c_api_cpu_plugin.so");
  EXPECT_EQ(sha_of(plugins[0]), (*a)->plugin_sha256);
  EXPECT_EQ(plugins[0].parent_path().filename(), (*a)->plugin_sha256);
  EXPECT_TRUE(temporaries(dir / "cache").empty());
}

// Four processes fetch (and lock) the same package at once.
TEST(Concurrency, ForkedProcessesShareOneFileAndOneLock) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  FetchOptions options = offline(dir / "cache", dir / "plugboard.lock", dir / "wheels");
  options.write_lock = true;
  const PackageSpec s = spec("fake-pjrt-plugin==1.0");
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto f = fetch_one(s, options);
      if (!f) std::fprintf(stderr, "child: %s\n", f.error().to_string().c_str());
      std::_Exit(f ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto plugins = files_under(dir / "cache" / "plugins");
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(sha_of(plugins[0]), sha_of(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_TRUE(temporaries(dir / "cache").empty());
  auto lock = read_lock(dir / "plugboard.lock");
  PB_ASSERT_OK(lock);
  ASSERT_EQ(lock->entries.size(), 1u);
  EXPECT_EQ(lock->entries[0].plugin_sha256, sha_of(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_EQ(files_under(dir.path(), "plugboard.lock").size(), 1u);
}

// ---------------------------------------------------------------------------------------------------
// Packages not in the table: the plugin is the .so that exports GetPjrtApi.

TEST(UnknownPackage, InspectionChoosesTheLibraryExportingGetPjrtApi) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  auto f = fetch_one(spec("fake_pjrt_plugin==1.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  PB_ASSERT_OK(f);
  EXPECT_EQ(f->plugin_path, kFakeMember);
  EXPECT_EQ(f->plugin_sha256, sha_of(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_EQ(f->file.filename(), "libfake_plugin.so");
  EXPECT_EQ(f->platform, "unknown");
  EXPECT_FALSE(f->from_cache);
  // The library that is not the plugin was inspected and removed; nothing else is left.
  EXPECT_EQ(files_under(dir / "cache" / "plugins").size(), 1u);
  EXPECT_TRUE(temporaries(dir / "cache").empty());
  // The choice is remembered with the wheel's hash: no inspection the second time.
  auto again = fetch_one(spec("fake-pjrt-plugin==1.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  PB_ASSERT_OK(again);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->plugin_path, kFakeMember);
}

TEST(UnknownPackage, WheelWithoutPluginIsAClearError) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_wheel(dir / "wheels" / "not_a_plugin-2.0-py3-none-any.whl",
             {{"not_a_plugin/__init__.py", std::nullopt, "x = 1\n"},
              {"not_a_plugin/libhelper.so", fs::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API), ""},
              {"not_a_plugin/data.so.txt", std::nullopt, "not a library"}});
  auto f = fetch_one(spec("not-a-plugin==2.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kFailedPrecondition);
  const std::string message = f.error().to_string();
  for (const char* part : {"not-a-plugin==2.0", "not_a_plugin-2.0-py3-none-any.whl", "not_a_plugin/libhelper.so", "GetPjrtApi"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  EXPECT_TRUE(files_under(dir / "cache" / "plugins").empty());

  make_wheel(dir / "wheels" / "pure_python-1.0-py3-none-any.whl", {{"pure_python/__init__.py", std::nullopt, ""}});
  auto pure = fetch_one(spec("pure-python==1.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(pure);
  EXPECT_NE(pure.error().to_string().find("no shared library"), std::string::npos) << pure.error().to_string();
}

// ---------------------------------------------------------------------------------------------------
// Damaged wheels and cache entries.

TEST(Integrity, TamperedWheelIsRefusedByTheLock) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  FetchOptions options = offline(dir / "cache", dir / "plugboard.lock", dir / "wheels");
  options.write_lock = true;
  auto locked = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  PB_ASSERT_OK(locked);
  make_fake_plugin_wheel(dir / "wheels", "import os  # changed\n");  // same name, other bytes
  const std::string actual = sha_of(dir / "wheels" / kFakeWheel);
  options.write_lock = false;
  auto f = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kDataLoss);
  const std::string message = f.error().to_string();
  for (const std::string& part : {std::string("fake-pjrt-plugin==1.0"), (dir / "plugboard.lock").string(),
                                  locked->wheel_sha256, actual})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

TEST(Integrity, CorruptMemberIsAnErrorAndLeavesNoFile) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  // Flip a byte inside the stored plugin member (found by its ELF magic after the first .so).
  std::string bytes = read_text(dir / "wheels" / kFakeWheel);
  const size_t first_elf = bytes.find("\x7f" "ELF");
  const size_t second_elf = bytes.find("\x7f" "ELF", first_elf + 4);
  ASSERT_NE(second_elf, std::string::npos);
  bytes[second_elf + 200] ^= 0x5a;
  write_text(dir / "wheels" / kFakeWheel, bytes);
  auto f = fetch_one(spec("fake-pjrt-plugin==1.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kDataLoss) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find(kFakeWheel), std::string::npos) << f.error().to_string();
  EXPECT_TRUE(files_under(dir / "cache" / "plugins").empty());
}

TEST(Integrity, DamagedCacheEntryIsExtractedAgain) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  const FetchOptions options = offline(dir / "cache", dir / "plugboard.lock", dir / "wheels");
  auto first = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  PB_ASSERT_OK(first);
  fs::resize_file(first->file, 100);  // truncated behind the cache's back
  auto second = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  PB_ASSERT_OK(second);
  EXPECT_FALSE(second->from_cache);
  EXPECT_EQ(sha_of(second->file), first->plugin_sha256);
}

// ---------------------------------------------------------------------------------------------------
// pip: real runs, kept off the network by PIP_NO_INDEX.

TEST(Pip, InterpreterThatCannotRunIsNamed) {
  ScratchDir dir;
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.python = (dir / "no-such-python3").string();
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), options);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().to_string().find(options.python), std::string::npos) << f.error().to_string();
  EXPECT_TRUE(temporaries(dir / "cache").empty());
}

TEST(Pip, ReportsPipsOwnMessage) {
  ScratchDir dir;
  ScopedEnv no_index("PIP_NO_INDEX", "1");
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  auto f = fetch_one(spec("plugboard-no-such-package==0.0.0"), options);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kNotFound);
  const std::string message = f.error().to_string();
  EXPECT_NE(message.find("plugboard-no-such-package==0.0.0"), std::string::npos) << message;
  EXPECT_NE(message.find("No matching distribution"), std::string::npos) << message;
  EXPECT_TRUE(temporaries(dir / "cache").empty());
}

TEST(Pip, DownloadsIntoTheCacheThenExtracts) {
  ScratchDir dir;
  ScopedEnv no_index("PIP_NO_INDEX", "1");
  ScopedEnv find_links("PIP_FIND_LINKS", wheels_dir().string());
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.write_lock = true;
  auto f = fetch_one(spec("lammps_jax_pjrt_cpu==0.11.2"), options);
  PB_ASSERT_OK(f);
  EXPECT_TRUE(fs::exists(dir / "cache" / "wheels" / f->wheel));
  EXPECT_EQ(f->wheel_sha256, sha_of(wheels_dir() / f->wheel));
  EXPECT_EQ(sha_of(f->file), f->plugin_sha256);
  EXPECT_TRUE(temporaries(dir / "cache").empty());
  // Locked, the wheel already in the cache is used without pip (an interpreter that cannot run proves it).
  options.write_lock = false;
  options.python = (dir / "no-such-python3").string();
  auto again = fetch_one(spec("lammps-jax-pjrt-cpu==0.11.2"), options);
  PB_ASSERT_OK(again);
  EXPECT_TRUE(again->from_cache);
}

// ---------------------------------------------------------------------------------------------------
// Hostile input (issue 11): files that are not files, wheels that lie, JSON that is not what it seems,
// pip that never ends, specs that look like options.

namespace hostile {

// Runs `f` on a thread; a call still blocked after `limit` on the FIFO `fifo` is a failure, and the
// FIFO is then opened for writing so that the blocked reader (and the test) can finish.
template <class F>
auto within(std::chrono::seconds limit, const fs::path& fifo, F f) {
  auto result = std::async(std::launch::async, f);
  if (result.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "still blocked on the FIFO " << fifo << " after " << limit.count() << " s";
    for (int i = 0; i < 100 && result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready; ++i) {
      UniqueFd writer(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // opened and closed at once
    }
  }
  return result.get();
}

// A shell script that stands in for python: it records its arguments (and a requirements file given
// with -r) in `record`, then runs `then`.
fs::path fake_python(const fs::path& dir, const fs::path& record, const std::string& then) {
  const fs::path script = dir / "fake-python3";
  write_text(script, "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" + record.string() +
                         "'\nprev=\nfor a; do if [ \"$prev\" = -r ]; then cat \"$a\" >> '" + record.string() +
                         "'; fi; prev=$a; done\n" + then + "\n");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(read_text(p));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A wheel of xla-cpu-pjrt==0.0.1 (a known package) whose plugin member is `content`.
const char* kKnownWheel = "xla_cpu_pjrt-0.0.1-py3-none-any.whl";
const char* kKnownMember = "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";

// Sets the uncompressed size of the only member of a zip, in its local and its central header alike.
void declare_size(const fs::path& zip_path, uint32_t size) {
  std::string bytes = read_text(zip_path);
  ASSERT_EQ(bytes.compare(0, 4, "PK\x03\x04"), 0);
  const size_t central = bytes.rfind("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  for (size_t at : {size_t{22}, central + 24})
    for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  write_text(zip_path, bytes);
}

}  // namespace hostile

TEST(Hostile, AFifoNamedLikeAWheelIsRefusedNotWaitedOn) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  const fs::path fifo = dir / "wheels" / kFakeWheel;
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto f = hostile::within(std::chrono::seconds(20), fifo, [&] {
    return fetch_one(spec("fake-pjrt-plugin==1.0"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  });
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().to_string().find(fifo.string()), std::string::npos) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find("FIFO"), std::string::npos) << f.error().to_string();
  // A companion wheel is opened the same way.
  auto w = hostile::within(std::chrono::seconds(20), fifo, [&] { return Wheel::open(fifo); });
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().to_string().find("FIFO"), std::string::npos) << w.error().to_string();
  // So is a lock file.
  const fs::path lock_fifo = dir / "fifo.lock";
  ASSERT_EQ(::mkfifo(lock_fifo.c_str(), 0644), 0);
  auto lock = hostile::within(std::chrono::seconds(20), lock_fifo, [&] { return read_lock(lock_fifo); });
  ASSERT_FALSE(lock);
  EXPECT_NE(lock.error().to_string().find(lock_fifo.string()), std::string::npos) << lock.error().to_string();
}

TEST(Hostile, AKnownPackageWhosePluginIsATextFileIsRefusedAndNotCached) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_wheel(dir / "wheels" / hostile::kKnownWheel, {{hostile::kKnownMember, std::nullopt, "this is no plugin\n"}});
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kFailedPrecondition) << f.error().to_string();
  for (const std::string& part : {std::string(hostile::kKnownMember), std::string(hostile::kKnownWheel), std::string("GetPjrtApi")})
    EXPECT_NE(f.error().to_string().find(part), std::string::npos) << part << " not in: " << f.error().to_string();
  EXPECT_TRUE(files_under(dir / "cache" / "plugins").empty());
  EXPECT_TRUE(files_under(dir / "cache" / "index").empty());
}

TEST(Hostile, APluginMemberThatIsASymlinkIsRefused) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  const fs::path wheel = dir / "wheels" / hostile::kKnownWheel;
  ASSERT_NO_FATAL_FAILURE(plugboard::testing::write_zip(
      wheel, {{.name = hostile::kKnownMember, .content = "../../../../usr/lib/libc.so.6", .mode = S_IFLNK | 0777}}));
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().to_string().find("symbolic link"), std::string::npos) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find(hostile::kKnownMember), std::string::npos) << f.error().to_string();
  EXPECT_TRUE(files_under(dir / "cache" / "plugins").empty());
}

// 64 MiB of zeros in a ~64 KiB wheel: refused from its entry, before a byte is inflated.
TEST(Hostile, AZipBombIsRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  const fs::path wheel = dir / "wheels" / hostile::kKnownWheel;
  ASSERT_NO_FATAL_FAILURE(plugboard::testing::write_zip(
      wheel, {{.name = hostile::kKnownMember, .content = std::string(1, '\0'), .repeat = uint64_t{64} << 20, .method = "deflated"}}));
  ASSERT_LT(fs::file_size(wheel), size_t{1} << 20);
  auto f = fetch_one(spec("xla-cpu-pjrt==0.0.1"), offline(dir / "cache", dir / "plugboard.lock", dir / "wheels"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kResourceExhausted) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find("refused before extraction"), std::string::npos) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find(hostile::kKnownMember), std::string::npos) << f.error().to_string();
  EXPECT_TRUE(files_under(dir / "cache" / "plugins").empty());
  EXPECT_TRUE(temporaries(dir / "cache").empty());
}

// An entry that declares 1000 bytes and inflates to 4 MiB: the extraction stops at byte 1001.
TEST(Hostile, AnEntryThatLiesAboutItsSizeStopsAtTheFirstExtraByte) {
  ScratchDir dir;
  const fs::path wheel = dir / "liar-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(plugboard::testing::write_zip(
      wheel, {{.name = "liar/libliar.so", .content = "A", .repeat = uint64_t{4} << 20, .method = "deflated"}}));
  hostile::declare_size(wheel, 1000);
  auto w = Wheel::open(wheel);
  PB_ASSERT_OK(w);
  const WheelMember* m = w->find("liar/libliar.so");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->size, 1000u);
  uint64_t delivered = 0;
  auto read = w->read(*m, [&](std::span<const std::byte> chunk) -> Status {
    delivered += chunk.size();
    return ok();
  }, false);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code(), Code::kDataLoss);
  EXPECT_NE(read.error().to_string().find("liar/libliar.so"), std::string::npos) << read.error().to_string();
  EXPECT_NE(read.error().to_string().find(wheel.string()), std::string::npos) << read.error().to_string();
  EXPECT_LE(delivered, 1000u);
  auto x = w->extract(*m, dir.path(), false);
  ASSERT_FALSE(x);
  EXPECT_EQ(files_under(dir.path()).size(), 1u);  // the wheel alone: no temporary left
}

TEST(Hostile, ADamagedCacheIndexIsAnErrorNamingIt) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  make_fake_plugin_wheel(dir / "wheels");
  const FetchOptions options = offline(dir / "cache", dir / "plugboard.lock", dir / "wheels");
  auto first = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  PB_ASSERT_OK(first);
  const fs::path index = dir / "cache" / "index" / (first->wheel_sha256 + ".json");
  ASSERT_TRUE(fs::exists(index));
  const std::string good = read_text(index);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& bad : {std::string(R"({"schema": 1, "plugin_path": 5, "plugin_sha256": "x", "size": "big", "mtime_ns": []})"),
                                 "{\"schema\": 1, \"schema\": 1, " + good.substr(good.find('{') + 1),
                                 "{\"plugin_path\": " + deep + ", " + good.substr(good.find('{') + 1)}) {
    write_text(index, bad);
    auto f = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
    ASSERT_FALSE(f) << bad.substr(0, 80);
    EXPECT_EQ(f.error().code(), Code::kDataLoss) << f.error().to_string();
    EXPECT_NE(f.error().to_string().find(index.string()), std::string::npos) << f.error().to_string();
  }
}

TEST(Hostile, AHostileLockFileIsAnErrorNamingIt) {
  ScratchDir dir;
  const fs::path path = dir / "plugboard.lock";
  const std::string entry = R"({"package": "a", "version": "1", "wheel": "w.whl", "wheel_sha256": ")" + std::string(64, 'c') +
                            R"(", "plugin_path": "a/p.so", "plugin_sha256": ")" + std::string(64, 'c') + R"("})";
  for (const std::string& bad : {R"({"schema": 1, "packages": [], "packages": [)" + entry + "]}",
                                 R"({"schema": 1, "packages": [{"package": "a", "package": "b", )" + entry.substr(1) + "]}",
                                 R"({"schema": 1, "packages": [{"kind": 7, )" + entry.substr(1) + "]}",
                                 R"({"schema": 1, "x": )" + std::string(100000, '{') + "}"}) {
    write_text(path, bad);
    auto lock = read_lock(path);
    ASSERT_FALSE(lock) << bad.substr(0, 80);
    EXPECT_NE(lock.error().to_string().find(path.string()), std::string::npos) << lock.error().to_string();
  }
}

TEST(Pip, SpecsComeAfterDoubleDashAndPipHasATimeout) {
  ScratchDir dir;
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.python = hostile::fake_python(dir.path(), dir / "args", "exit 1").string();
  auto f = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  ASSERT_FALSE(f);
  const auto args = hostile::lines_of(dir / "args");
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[args.size() - 2], "--");
  EXPECT_EQ(args.back(), "fake-pjrt-plugin==1.0");
  EXPECT_NE(std::find(args.begin(), args.end(), "--timeout"), args.end());
}

TEST(Pip, FetchRefusesASpecThatIsAnOptionBeforePipRuns) {
  ScratchDir dir;
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.python = hostile::fake_python(dir.path(), dir / "args", "exit 1").string();
  for (const PackageSpec& bad : {PackageSpec{"--index-url=http://example.invalid/simple", "1.0"},
                                 PackageSpec{"pkg", "1.0 --extra-index-url=http://example.invalid"},
                                 PackageSpec{" pkg", "1.0"}}) {
    auto f = fetch_one(bad, options);
    ASSERT_FALSE(f) << bad.to_string();
    EXPECT_EQ(f.error().code(), Code::kInvalidArgument) << f.error().to_string();
    EXPECT_FALSE(fs::exists(dir / "args")) << "pip ran for " << bad.to_string();
    auto w = fetch_wheel(bad, options);
    ASSERT_FALSE(w) << bad.to_string();
    EXPECT_FALSE(fs::exists(dir / "args")) << "pip ran for " << bad.to_string();
  }
}

TEST(Pip, APipThatNeverEndsIsKilledAtItsTimeLimit) {
  ScratchDir dir;
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.python = hostile::fake_python(dir.path(), dir / "args", "sleep 30").string();
  options.pip_time_limit = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto f = fetch_one(spec("fake-pjrt-plugin==1.0"), options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kDeadlineExceeded) << f.error().to_string();
  EXPECT_NE(f.error().to_string().find("did not finish within 300 ms"), std::string::npos) << f.error().to_string();
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_TRUE(temporaries(dir / "cache").empty());
}

TEST(Pip, ALockedWheelIsDownloadedWithRequireHashes) {
  ScratchDir dir;
  const std::string hash(64, 'd');
  LockFile lock;
  lock.entries = {{"fake-pjrt-plugin", "1.0", kFakeWheel, hash, kFakeMember, std::string(64, 'e'), false},
                  {"vendor-libs", "1.0", "vendor_libs-1.0-py3-none-any.whl", std::string(64, 'f'), "", "", true}};
  PB_ASSERT_OK(write_lock(dir / "plugboard.lock", lock));
  FetchOptions options;
  options.cache_dir = dir / "cache";
  options.lock_path = dir / "plugboard.lock";
  options.python = hostile::fake_python(dir.path(), dir / "args", "exit 1").string();
  ASSERT_FALSE(fetch_one(spec("fake-pjrt-plugin==1.0"), options));
  auto args = hostile::lines_of(dir / "args");
  EXPECT_NE(std::find(args.begin(), args.end(), "--require-hashes"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "fake-pjrt-plugin==1.0 --hash=sha256:" + hash), args.end());
  // A companion wheel too.
  ASSERT_FALSE(fetch_wheel(spec("vendor-libs==1.0"), options));
  args = hostile::lines_of(dir / "args");
  EXPECT_NE(std::find(args.begin(), args.end(), "--require-hashes"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "vendor-libs==1.0 --hash=sha256:" + std::string(64, 'f')), args.end());
}

TEST(Companions, AreRecordedInTheLockAndHeldToIt) {
  ScratchDir dir;
  fs::create_directories(dir / "wheels");
  const fs::path wheel = dir / "wheels" / "vendor_libs-1.0-py3-none-any.whl";
  make_wheel(wheel, {{"vendor/lib/libcompanion_dep.so", fs::path(PLUGBOARD_FIXTURE_COMPANION_DEP), ""}});
  FetchOptions options = offline(dir / "cache", dir / "plugboard.lock", dir / "wheels");
  options.write_lock = true;
  auto w = fetch_wheel(spec("Vendor_Libs==1.0"), options);
  PB_ASSERT_OK(w);
  auto lock = read_lock(dir / "plugboard.lock");
  PB_ASSERT_OK(lock);
  ASSERT_EQ(lock->entries.size(), 1u);
  EXPECT_TRUE(lock->entries[0].companion);
  EXPECT_EQ(lock->entries[0].package, "vendor-libs");
  EXPECT_EQ(lock->entries[0].version, "1.0");
  EXPECT_EQ(lock->entries[0].wheel, wheel.filename().string());
  EXPECT_EQ(lock->entries[0].wheel_sha256, sha_of(wheel));
  EXPECT_NE(read_text(dir / "plugboard.lock").find("\"companion\""), std::string::npos);

  make_wheel(wheel, {{"vendor/lib/libcompanion_dep.so", fs::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API), ""}});  // other bytes
  options.write_lock = false;
  auto tampered = fetch_wheel(spec("vendor-libs==1.0"), options);
  ASSERT_FALSE(tampered);
  EXPECT_EQ(tampered.error().code(), Code::kDataLoss);
  for (const std::string& part : {(dir / "plugboard.lock").string(), lock->entries[0].wheel_sha256, sha_of(wheel)})
    EXPECT_NE(tampered.error().to_string().find(part), std::string::npos) << part << " not in: " << tampered.error().to_string();
}

}  // namespace
}  // namespace plugboard::fetch
