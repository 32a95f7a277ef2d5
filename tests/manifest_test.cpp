// Hostile bundle manifests and discovery inputs (issue 11): each is refused with an error naming the
// file and the field, or noted and skipped, and none crashes, hangs, throws or is silently changed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <climits>
#include <fstream>

#include "base/sha256.h"
#include "bundle/boot.h"
#include "bundle/discovery.h"
#include "bundle/manifest.h"
#include "test_env.h"

namespace plugboard::bundle {
namespace {
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("pb_manifest_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A bundle folder holding one plugin file (the fault plugin) at plugins/p.so, no manifest yet.
struct Scratch {
  fs::path dir;
  uint64_t size = 0;
  std::string sha;
  explicit Scratch(const std::string& name) : dir(temp_dir(name)) {
    fs::create_directories(dir / "plugins");
    fs::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "plugins/p.so");
    size = fs::file_size(dir / "plugins/p.so");
    sha = *sha256_file(dir / "plugins/p.so");
  }
  // One target's JSON; `extra` is spliced in before the closing brace (", \"priority\": 5").
  std::string target(const std::string& name, const std::string& extra = "", const std::string& platform = "cpu",
                     const std::string& file = "plugins/p.so") const {
    return "{\"name\": \"" + name + "\", \"platform\": \"" + platform + "\", \"file\": \"" + file +
           "\", \"size\": " + std::to_string(size) + ", \"sha256\": \"" + sha + "\"" + extra + "}";
  }
  void write(const std::string& text) const { std::ofstream(dir / kManifestName, std::ios::binary) << text; }
  std::string manifest(const std::vector<std::string>& targets, const std::string& schema = "1") const {
    std::string t;
    for (const auto& s : targets) t += (t.empty() ? "" : ", ") + s;
    return "{\"schema\": " + schema + ", \"targets\": [" + t + "]}";
  }
};

void expect_refused(const Expected<Manifest>& m, const std::string& piece, const std::string& what) {
  ASSERT_FALSE(m) << what << ": accepted";
  const std::string msg = m.error().message();
  EXPECT_NE(msg.find(piece), std::string::npos) << what << ": " << msg;
  EXPECT_NE(msg.find(kManifestName), std::string::npos) << what << ": the error names the file: " << msg;
  EXPECT_EQ(msg.find('\0'), std::string::npos) << what << ": a NUL in the message cuts it";
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << what << ": an escape sequence in the message";
}

TEST(ManifestHostile, DeepNestingIsRefusedNotACrash) {
  Scratch s("deep");
  const size_t depth = 100000;
  std::string objects = "{\"schema\": 1, \"targets\": [], \"x\": ";
  for (size_t i = 0; i < depth; ++i) objects += "{\"a\": ";
  objects += "1" + std::string(depth, '}') + "}";
  s.write(objects);
  expect_refused(read_manifest(s.dir), "nesting", "100,000 nested objects");

  std::string arrays = "{\"schema\": 1, \"targets\": [], \"x\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  s.write(arrays);
  expect_refused(read_manifest(s.dir), "nesting", "100,000 nested arrays");
}

TEST(ManifestHostile, ADeviceSymlinkIsRefusedWithoutReading) {
  Scratch s("devzero");
  fs::create_symlink("/dev/zero", s.dir / kManifestName);
  auto m = read_manifest(s.dir);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("character device"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find((s.dir / kManifestName).string()), std::string::npos) << m.error().message();
}

TEST(ManifestHostile, AFifoIsRefusedWithoutHanging) {
  Scratch s("fifo");
  ASSERT_EQ(::mkfifo((s.dir / kManifestName).c_str(), 0600), 0);
  auto m = read_manifest(s.dir);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("FIFO"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find((s.dir / kManifestName).string()), std::string::npos) << m.error().message();
}

struct BadValue {
  std::string name;
  std::string schema;                // "" = 1
  std::string extra, platform, file; // spliced into targets[0] (defaults when empty)
  std::string target_name;           // "" = "a"
  std::string piece;                 // a piece of the error
};

class ManifestValue : public ::testing::TestWithParam<BadValue> {};

// Each value was accepted (or changed, or cut) by the old reader; each is refused, naming the field.
TEST_P(ManifestValue, IsRefusedNamingFileAndField) {
  const BadValue& p = GetParam();
  Scratch s("value_" + p.name);
  const std::string name = p.target_name.empty() ? "a" : p.target_name;
  const std::string t = s.target(name, p.extra, p.platform.empty() ? "cpu" : p.platform, p.file.empty() ? "plugins/p.so" : p.file);
  s.write(s.manifest({t, s.target("b")}, p.schema.empty() ? "1" : p.schema));
  expect_refused(read_manifest(s.dir), p.piece, p.name);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ManifestValue,
    ::testing::Values(
        BadValue{"SchemaPast32Bits", "4294967297", "", "", "", "", "schema is 4294967297"},
        BadValue{"SchemaU64Max", "18446744073709551615", "", "", "", "", "schema is 18446744073709551615"},
        BadValue{"SchemaNegative", "-1", "", "", "", "", "schema must be a non-negative integer"},
        BadValue{"PriorityPast31Bits", "", ", \"priority\": 2147483648", "", "", "", "targets[0].priority is 2147483648"},
        BadValue{"PriorityWrapsTo10", "", ", \"priority\": 4294967306", "", "", "", "targets[0].priority"},
        BadValue{"PriorityFloat", "", ", \"priority\": 1.5", "", "", "", "targets[0].priority must be an integer"},
        BadValue{"DuplicateKey", "", ", \"name\": \"b2\"", "", "", "", "twice"},
        BadValue{"NulInFile", "", "", "", "plugins/p.so\\u0000.evil", "", "targets[0].file holds the control character NUL"},
        BadValue{"NulInName", "", "", "", "", "a\\u0000b", "targets[0].name holds the control character NUL"},
        BadValue{"NulInPlatform", "", "", "cpu\\u0000hidden", "", "", "targets[0].platform holds the control character NUL"},
        BadValue{"EscapeInPlatform", "", "", "cpu\\u001b[2J", "", "", "targets[0].platform holds the control character"},
        BadValue{"EscapeInName", "", "", "", "", "a\\u001b]0;x\\u0007", "targets[0].name holds the control character"},
        BadValue{"EscapeInPjrtApi", "", ", \"pjrt_api\": \"0.81\\u001b[31m\"", "", "", "", "targets[0].pjrt_api"},
        BadValue{"StablehloNotAnObject", "", ", \"stablehlo\": 5", "", "", "", "targets[0].stablehlo must be an object"},
        BadValue{"StablehloVersionNotAString", "", ", \"stablehlo\": {\"current\": 1}", "", "", "", "targets[0].stablehlo.current"},
        BadValue{"CreateOptionPastInt64", "", ", \"create_options\": {\"n\": 18446744073709551615}", "", "", "",
                 "targets[0].create_options.n"},
        BadValue{"CreateOptionPastFloat", "", ", \"create_options\": {\"x\": 1e300}", "", "", "", "targets[0].create_options.x"},
        BadValue{"CreateOptionEscape", "", ", \"create_options\": {\"k\": \"v\\u001b[2J\"}", "", "", "", "targets[0].create_options.k"},
        BadValue{"ProvenanceNul", "", ", \"provenance\": {\"package\": \"p\\u0000q\", \"version\": \"1\"}", "", "", "",
                 "targets[0].provenance.package"},
        BadValue{"CompanionSizeNegative", "", ", \"companions\": [{\"file\": \"plugins/p.so\", \"size\": -1, \"sha256\": \"x\"}]",
                 "", "", "", "targets[0].companions[0].size"}),
    [](const auto& info) { return info.param.name; });

TEST(ManifestHostile, SizePastOffTIsRefused) {
  Scratch s("size");
  std::string t = s.target("a");
  t.replace(t.find(std::to_string(s.size)), std::to_string(s.size).size(), "9223372036854775808");
  s.write(s.manifest({t}));
  expect_refused(read_manifest(s.dir), "targets[0].size is 9223372036854775808", "size 2^63");
}

TEST(ManifestHostile, NumbersAtTheirLimitsAreKeptExactly) {
  Scratch s("limits");
  s.write(s.manifest({s.target("hi", ", \"priority\": 2147483647, \"create_options\": {\"n\": 9223372036854775807, \"f\": 0.5}"),
                      s.target("lo", ", \"priority\": -2147483648")}));
  auto m = read_manifest(s.dir);
  PB_ASSERT_OK(m);
  EXPECT_EQ(m->targets[0].priority, INT_MAX);
  EXPECT_EQ(m->targets[1].priority, INT_MIN);
  ASSERT_EQ(m->targets[0].create_options.size(), 2u);
  for (const auto& o : m->targets[0].create_options) {
    if (o.name == "n") {
      EXPECT_EQ(std::get<int64_t>(o.value), INT64_MAX);
    } else {
      EXPECT_EQ(std::get<float>(o.value), 0.5f);
    }
  }
}

TEST(ManifestHostile, ANameThatIsNotUtf8IsAnErrorWhenWritten) {
  Scratch s("write_utf8");
  Manifest m;
  TargetEntry e;
  e.name = "a";
  e.platform = "cpu";
  e.file = "plugins/\xff\xfe.so";
  e.sha256 = s.sha;
  m.targets.push_back(e);
  Status st = ok();
  EXPECT_NO_THROW(st = write_manifest(s.dir, m));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message().find(kManifestName), std::string::npos) << st.error().message();
}

// `"targets": []` in an explicit bundle: the boot says the bundle has no targets, naming it (it said
// "no PJRT plugin was found (no bundle, ...)" although a bundle was given).
TEST(ManifestHostile, AnEmptyBundleIsNamed) {
  Scratch s("empty_targets");
  s.write(s.manifest({}));
  BootOptions b;
  b.discovery.bundle = s.dir;
  b.discovery.environment = false;
  b.select.verify.stamp_dir = "";
  auto booted = boot(b);
  ASSERT_FALSE(booted) << booted->selection.report.to_text();
  const std::string msg = booted.error().to_string();
  EXPECT_NE(msg.find("has no targets"), std::string::npos) << msg;
  EXPECT_NE(msg.find(s.dir.string()), std::string::npos) << msg;
  EXPECT_EQ(msg.find("no bundle"), std::string::npos) << msg;

  // In PLUGBOARD_PLUGIN_PATH it is a note naming it.
  std::vector<std::string> notes;
  auto cs = candidates_from_plugin_path(s.dir.string(), notes);
  EXPECT_TRUE(cs.empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("has no targets"), std::string::npos) << notes[0];
}

// A folder in PLUGBOARD_PLUGIN_PATH whose plugboard.json cannot be looked at (a symlink loop: ELOOP;
// root ignores EACCES): a note naming it, never a std::filesystem_error out of the library.
TEST(DiscoveryHostile, AManifestThatCannotBeLookedAtIsANoteNotAThrow) {
  auto root = temp_dir("eloop");
  fs::create_directories(root / "self");
  fs::create_symlink(kManifestName, root / "self" / kManifestName);  // points at itself
  fs::create_directories(root / "parent/sub");
  fs::create_symlink(kManifestName, root / "parent/sub" / kManifestName);
  std::vector<std::string> notes;
  std::vector<select::Candidate> cs;
  EXPECT_NO_THROW(cs = candidates_from_plugin_path((root / "self").string() + ":" + (root / "parent").string(), notes));
  EXPECT_TRUE(cs.empty());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find((root / "self" / kManifestName).string()), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find((root / "parent/sub" / kManifestName).string()), std::string::npos) << notes[1];

  ::setenv("PLUGBOARD_PLUGIN_PATH", (root / "self").string().c_str(), 1);
  Expected<Discovery> d = Discovery{};
  EXPECT_NO_THROW(d = discover(DiscoveryOptions{}));
  ::unsetenv("PLUGBOARD_PLUGIN_PATH");
  PB_ASSERT_OK(d);
  EXPECT_EQ(d->notes.size(), 1u);

  // An explicit bundle through a file ("file/sub": ENOTDIR) or a name too long: an error naming it.
  std::ofstream(root / "file") << "x";
  for (const fs::path& bad : {root / "file/sub", root / std::string(300, 'n')}) {
    DiscoveryOptions o;
    o.bundle = bad;
    o.environment = false;
    Expected<Discovery> e = Discovery{};
    EXPECT_NO_THROW(e = discover(o));
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message().find(bad.string()), std::string::npos) << e.error().message();
  }
}

}  // namespace
}  // namespace plugboard::bundle
