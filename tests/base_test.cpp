// The base layer's defences against hostile input: regular files only, strict numbers, bounded
// nesting, strict JSON, checked sizes, and Dims that stay consistent when moved from; SHA-256 on
// FIPS 180-4's vectors.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/dims.h"
#include "base/dtype.h"
#include "base/nesting.h"
#include "base/parse_number.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "base/strict_json.h"
#include "test_env.h"

namespace plugboard {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// --- regular files ---

TEST(RegularFile, ReadsARegularFileWhole) {
  ScratchDir d;
  write(d.path() / "a", "hello");
  auto r = read_regular_file(d.path() / "a", 100);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, "hello");
}

TEST(RegularFile, RefusesCharacterDevicesWithoutReading) {
  for (const char* dev : {"/dev/zero", "/dev/urandom", "/dev/null"}) {
    auto r = read_regular_file(dev, kMaxArrayBytes);
    ASSERT_FALSE(r) << dev;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
    EXPECT_NE(r.error().message().find("a character device"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(dev), std::string::npos);
  }
}

TEST(RegularFile, RefusesASymlinkToADevice) {
  ScratchDir d;
  fs::create_symlink("/dev/zero", d.path() / "plugboard.json");
  auto r = read_regular_file(d.path() / "plugboard.json", kMaxManifestBytes);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("a character device"), std::string::npos) << r.error().message();
}

TEST(RegularFile, RefusesAFifoWithoutHanging) {
  ScratchDir d;
  const fs::path fifo = d.path() / "in.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = read_regular_file(fifo, kMaxArrayBytes);  // no writer: a blocking open would never return
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("a FIFO"), std::string::npos) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(RegularFile, RefusesADirectory) {
  ScratchDir d;
  auto r = read_regular_file(d.path(), 100);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("a directory"), std::string::npos) << r.error().message();
}

TEST(RegularFile, RefusesAFileOverTheLimitBeforeReadingIt) {
  ScratchDir d;
  write(d.path() / "big", std::string(1000, 'x'));
  auto r = read_regular_file(d.path() / "big", 999);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  EXPECT_NE(r.error().message().find("1000 bytes, more than the limit of 999"), std::string::npos)
      << r.error().message();
}

TEST(RegularFile, NoFollowRefusesASymlink) {
  ScratchDir d;
  write(d.path() / "real", "x");
  fs::create_symlink(d.path() / "real", d.path() / "link");
  EXPECT_TRUE(read_regular_file(d.path() / "link", 10));
  auto r = read_regular_file(d.path() / "link", 10, OpenOptions{.no_follow = true});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("symbolic link"), std::string::npos) << r.error().message();
}

TEST(RegularFile, MissingFileIsNotFound) {
  auto r = read_regular_file("/nonexistent/x.npy", 10);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kNotFound);
  EXPECT_NE(r.error().message().find("/nonexistent/x.npy"), std::string::npos);
}

TEST(RegularFile, IdentityChangesWhenAFileIsRewrittenInPlaceWithItsMtimeRestored) {
  ScratchDir d;
  const fs::path p = d.path() / "plugin.so";
  write(p, "version one");
  auto before = file_identity(p);
  ASSERT_TRUE(before);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  ::usleep(20000);
  write(p, "version two");  // same size
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);  // mtime put back
  auto after = file_identity(p);
  ASSERT_TRUE(after);
  EXPECT_EQ(before->size, after->size);
  EXPECT_EQ(before->mtime_ns, after->mtime_ns);
  EXPECT_NE(before->ctime_ns, after->ctime_ns);
  EXPECT_FALSE(*before == *after);
}

std::string hex_of(const std::string& text, Sha256::Engine engine = Sha256::Engine::kFastest) {
  Sha256 hash(engine);
  hash.update(std::as_bytes(std::span(text.data(), text.size())));
  return hash.hex_digest();
}

constexpr Sha256::Engine kEngines[] = {Sha256::Engine::kFastest, Sha256::Engine::kPortable};

// FIPS 180-4's examples (and NIST's long-message vectors), through both compression functions.
TEST(Sha256, KnownVectors) {
  struct Vector {
    std::string message, digest;
  };
  const Vector vectors[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",  // 448 bits: the padding takes a block of its own
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (Sha256::Engine engine : kEngines)
    for (const Vector& v : vectors) {
      EXPECT_EQ(hex_of(v.message, engine), v.digest) << v.message.size() << " bytes, engine " << static_cast<int>(engine);
      if (engine == Sha256::Engine::kFastest) {
        EXPECT_EQ(sha256_hex(std::as_bytes(std::span(v.message.data(), v.message.size()))), v.digest);
      }
    }
  // An empty span with no data at all (a null pointer): the empty message, and nothing copied from
  // null (UndefinedBehaviorSanitizer's nonnull check on memcpy).
  EXPECT_EQ(sha256_hex({}), vectors[0].digest);
  for (Sha256::Engine engine : kEngines) {
    Sha256 hash(engine);
    hash.update(std::span<const std::byte>());
    hash.update(std::as_bytes(std::span(std::string_view("abc"))));
    hash.update(std::span<const std::byte>());  // with bytes pending
    EXPECT_EQ(hash.hex_digest(), vectors[1].digest) << "engine " << static_cast<int>(engine);
  }
}

// A multi-block message fed in pieces that straddle block boundaries (1, 63, 64, 65, ... bytes)
// hashes as the whole does, and a digest taken midway does not end the hash.
TEST(Sha256, StreamedInPiecesEqualsOneShot) {
  std::string message(1000, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 7 % 251);
  const std::string expected = "59425e4412e296fc74736673ce067027f384203f59c0d2c3e6be7b13347b3ffc";
  const auto bytes = std::as_bytes(std::span(message.data(), message.size()));
  for (Sha256::Engine engine : kEngines) {
    EXPECT_EQ(hex_of(message, engine), expected);
    for (const std::vector<size_t>& pieces : std::vector<std::vector<size_t>>{
             {1, 63, 64, 65, 127, 128, 129, 3, 0, 55, 56, 57, 200}, {999, 1}, {0, 1000}, {7, 7, 7, 500, 479}}) {
      Sha256 hash(engine);
      size_t at = 0;
      std::vector<std::pair<size_t, std::string>> midway;  // (bytes so far, digest then)
      for (size_t n : pieces) {
        hash.update(bytes.subspan(at, std::min(n, bytes.size() - at)));
        at = std::min(at + n, bytes.size());
        midway.emplace_back(at, hash.hex_digest());
      }
      hash.update(bytes.subspan(at));
      EXPECT_EQ(hash.hex_digest(), expected) << "engine " << static_cast<int>(engine) << ", " << pieces.size() << " pieces";
      EXPECT_EQ(hash.hex_digest(), expected);  // reading the digest twice changes nothing
      for (const auto& [n, digest] : midway) EXPECT_EQ(digest, hex_of(message.substr(0, n))) << n;
    }
  }
}

// The SHA extensions against the portable code, at every length around the padding's edges (55, 56,
// 63, 64 bytes mod 64). Where the processor has no SHA extensions, kFastest is the portable code
// itself and the comparison would prove nothing: skipped, saying so (and the test's XML records it).
TEST(Sha256, ShaExtensionsAgreeWithThePortableCode) {
  const bool accelerated = Sha256::hardware_accelerated();
  ::testing::Test::RecordProperty("sha_extensions", accelerated ? "used" : "absent");
  std::cout << "[ sha256   ] SHA extensions: " << (accelerated ? "used" : "absent on this processor") << std::endl;
  if (!accelerated) GTEST_SKIP() << "this processor has no SHA extensions: kFastest is the portable code, nothing to compare";
  std::string message(300, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 7 % 251);
  for (size_t n = 0; n <= message.size(); ++n)
    EXPECT_EQ(hex_of(message.substr(0, n), Sha256::Engine::kFastest), hex_of(message.substr(0, n), Sha256::Engine::kPortable)) << n;
}

// A file larger than sha256_file's 1 MiB block, read in three blocks.
TEST(Sha256, FileOfSeveralBlocks) {
  ScratchDir d;
  write(d / "big.so", std::string(3000000, 'a'));
  uint64_t last = 0;
  int calls = 0;
  auto h = sha256_file(d / "big.so", [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, 3000000u);
    last = done;
    ++calls;
  });
  ASSERT_TRUE(h) << h.error().to_string();
  EXPECT_EQ(*h, "2a152c894398719c0570f83fac34ac03a0f6e8e474b995c2403aa5434f7b9dd4");
  EXPECT_EQ(last, 3000000u);
  EXPECT_EQ(calls, 3);
}

TEST(Sha256, HashesOnlyRegularFilesAndTheDescriptorsOwnBytes) {
  ScratchDir d;
  auto fifo = sha256_file(d.fifo("wheel.whl"));  // fopen would have waited for a writer forever
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message().find("a FIFO"), std::string::npos) << fifo.error().to_string();
  // The bytes of the file the descriptor holds, whatever the path names by the time they are read.
  write(d / "plugin.so", "verified bytes");
  auto fd = open_regular_file(d / "plugin.so");
  ASSERT_TRUE(fd) << fd.error().to_string();
  fs::rename(d / "plugin.so", d / "old.so");
  write(d / "plugin.so", "other bytes");
  EXPECT_EQ(sha256_fd(fd->get(), d / "plugin.so").value(), sha256_file(d / "old.so").value());
  EXPECT_NE(sha256_file(d / "plugin.so").value(), sha256_file(d / "old.so").value());
}

// --- numbers ---

TEST(ParseNumber, TakesOnlyTheWholeTextInRange) {
  EXPECT_EQ(parse_int64("42", "--n").value(), 42);
  EXPECT_EQ(parse_int64("-7", "--n").value(), -7);
  EXPECT_EQ(parse_uint64("18446744073709551615", "--n").value(), UINT64_MAX);
  for (const char* bad : {"", "abc", "5s", "1e3", " 5", "5 ", "+5", "0x10", "1.5", "--1"}) {
    auto r = parse_int64(bad, "PLUGBOARD_ISOLATE_TIMEOUT_MS");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.error().message().find("PLUGBOARD_ISOLATE_TIMEOUT_MS"), std::string::npos);
  }
  auto wide = parse_int64("99999999999", "--priority cpu", INT32_MIN, INT32_MAX);
  ASSERT_FALSE(wide);
  EXPECT_EQ(wide.error().code(), Code::kOutOfRange);
  EXPECT_NE(wide.error().message().find("--priority cpu: 99999999999 is out of range"), std::string::npos)
      << wide.error().message();
  EXPECT_FALSE(parse_int64("99999999999999999999", "--create-option"));
  EXPECT_FALSE(parse_uint64("-1", "--print-limit"));
  EXPECT_FALSE(parse_int64("-1", "--timeout-ms", 0));
}

TEST(ParseNumber, DoublesAreFiniteAndWhole) {
  EXPECT_DOUBLE_EQ(parse_double("0.5", "x").value(), 0.5);
  EXPECT_DOUBLE_EQ(parse_double("-1e-3", "x").value(), -1e-3);
  for (const char* bad : {"", "nan", "inf", "1e999", "0.5x", "0x1p3", " 1"}) EXPECT_FALSE(parse_double(bad, "x")) << bad;
}

// --- nesting ---

TEST(Nesting, RefusesDeepMlirAttributesAndTypesBeforeAnyParser) {
  const std::string deep_attr = "x = " + std::string(20000, '[') + std::string(20000, ']');
  auto r = check_nesting(deep_attr, Syntax::kMlir, "deep.mlir");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("deep.mlir: nesting deeper than 256 levels at line 1, column 261"),
            std::string::npos)
      << r.error().message();
  std::string deep_tuple;
  for (int i = 0; i < 50000; ++i) deep_tuple += "tuple<";
  EXPECT_FALSE(check_nesting(deep_tuple, Syntax::kMlir, "t.mlir"));
}

TEST(Nesting, CountsOnlyRealBrackets) {
  // Arrows, brackets inside strings and comments do not nest.
  std::string text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { \"[[[[[[\" // ((((((\n }";
  EXPECT_TRUE(check_nesting(text, Syntax::kMlir, "f.mlir", 3));
  EXPECT_FALSE(check_nesting("{{{{", Syntax::kMlir, "f.mlir", 3));
  EXPECT_TRUE(check_nesting(std::string(256, '[') + std::string(256, ']'), Syntax::kJson, "a.json"));
  EXPECT_FALSE(check_nesting(std::string(257, '['), Syntax::kJson, "a.json"));
  // JSON does not count parentheses or angle brackets; a string with an escaped quote stays a string.
  EXPECT_TRUE(check_nesting("{\"k\": \"\\\"[[[[\"}", Syntax::kJson, "a.json", 1));
  EXPECT_TRUE(check_nesting("((((<<<<", Syntax::kJson, "a.json", 1));
}

// --- strict JSON ---

TEST(StrictJson, RefusesDeepNestingDuplicateKeysAndNonObjects) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  auto d = strict_json::parse(deep, "plugboard.json");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("nesting deeper than"), std::string::npos) << d.error().message();

  auto dup = strict_json::parse(R"({"schema": 1, "targets": [{"name": "a", "name": "b"}]})", "plugboard.json");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message().find("\"name\" twice"), std::string::npos) << dup.error().message();
  // The same key in two different objects is fine.
  EXPECT_TRUE(strict_json::parse(R"({"a": {"k": 1}, "b": {"k": 2}})", "x.json"));

  EXPECT_FALSE(strict_json::parse("[1, 2]", "x.json"));
  EXPECT_TRUE(strict_json::parse("[1, 2]", "x.json", /*want_object=*/false));
  auto broken = strict_json::parse("{\"a\": ", "x.json");
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message().find("x.json is not valid JSON"), std::string::npos);
}

TEST(StrictJson, IntegersAreRangeCheckedNeverConverted) {
  auto doc = strict_json::parse(
      R"({"schema": 4294967297, "max": 18446744073709551615, "neg": -1, "half": 1.5, "big": 1e30, "p": 2147483648})",
      "m.json");
  ASSERT_TRUE(doc) << doc.error().to_string();
  auto schema = strict_json::get_uint(*doc, "schema", "", UINT32_MAX);
  ASSERT_FALSE(schema);
  EXPECT_NE(schema.error().message().find("schema is 4294967297, more than 4294967295"), std::string::npos)
      << schema.error().message();
  EXPECT_FALSE(strict_json::get_int(*doc, "max", ""));  // beyond int64: refused, not -1
  EXPECT_EQ(strict_json::get_uint(*doc, "max", "").value(), UINT64_MAX);
  EXPECT_FALSE(strict_json::get_uint(*doc, "neg", ""));
  EXPECT_EQ(strict_json::get_int(*doc, "neg", "").value(), -1);
  EXPECT_FALSE(strict_json::get_int(*doc, "half", ""));
  EXPECT_FALSE(strict_json::get_int(*doc, "big", ""));
  auto p = strict_json::get_int(*doc, "p", "targets[0]", INT32_MIN, INT32_MAX);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("targets[0].p is 2147483648, out of range"), std::string::npos)
      << p.error().message();
  auto missing = strict_json::get_int(*doc, "nope", "targets[0]");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("targets[0].nope is missing"), std::string::npos);
}

TEST(StrictJson, StringsWithNulOrControlCharactersAreRefused) {
  auto doc = strict_json::parse(R"({"file": "a.so\u0000evil", "name": "cpu\u001b[2J", "ok": "x", "n": 3})", "m.json");
  ASSERT_TRUE(doc) << doc.error().to_string();
  auto file = strict_json::get_string(*doc, "file", "targets[0]");
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message().find("targets[0].file holds the control character NUL at byte 4"),
            std::string::npos)
      << file.error().message();
  auto name = strict_json::get_string(*doc, "name", "targets[0]");
  ASSERT_FALSE(name);
  EXPECT_NE(name.error().message().find("0x1b"), std::string::npos) << name.error().message();
  EXPECT_TRUE(strict_json::get_string(*doc, "name", "", strict_json::Text::kAny));
  EXPECT_EQ(strict_json::get_string(*doc, "ok", "").value(), "x");
  EXPECT_FALSE(strict_json::get_string(*doc, "n", ""));  // a number is not a string
}

// --- sizes ---

TEST(ByteSize, IsCheckedAgainstOverflowAndNegativeDims) {
  EXPECT_EQ(byte_size(DType::kF32, std::vector<int64_t>{4, 8}).value(), 128u);
  EXPECT_EQ(byte_size(DType::kF32, std::vector<int64_t>{}).value(), 4u);
  // 2^62 + 4 elements of 4 bytes wraps to 16 bytes in an unchecked multiply.
  auto wrap = byte_size(DType::kF32, std::vector<int64_t>{(int64_t{1} << 62) + 4});
  ASSERT_FALSE(wrap);
  EXPECT_EQ(wrap.error().code(), Code::kOutOfRange);
  auto neg = byte_size(DType::kF32, std::vector<int64_t>{2, -3});
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.error().message().find("dimension 1 is negative (-3)"), std::string::npos);
  // A zero dimension makes the array empty however large the others are.
  EXPECT_EQ(byte_size(DType::kF64, std::vector<int64_t>{INT64_MAX, 0, INT64_MAX}).value(), 0u);
  EXPECT_FALSE(byte_size(DType::kInvalid, std::vector<int64_t>{1}));
}

// --- Dims ---

TEST(Dims, AMovedFromDimsIsEmptyForEveryRank) {
  for (size_t rank : {size_t{0}, size_t{3}, Dims::kInline, Dims::kInline + 1, size_t{7}}) {
    std::vector<int64_t> v(rank);
    for (size_t i = 0; i < rank; ++i) v[i] = static_cast<int64_t>(i + 2);
    Dims a(v);
    Dims b(std::move(a));
    EXPECT_EQ(b.to_vector(), v);
    EXPECT_EQ(a.size(), 0u) << "rank " << rank;  // NOLINT(bugprone-use-after-move): what is tested
    EXPECT_TRUE(a.span().empty());
    Dims c;
    c = std::move(b);
    EXPECT_EQ(c.to_vector(), v);
    EXPECT_EQ(b.size(), 0u);  // NOLINT(bugprone-use-after-move)
    a = c;  // a moved-from Dims is usable again
    EXPECT_EQ(a.to_vector(), v);
  }
}

}  // namespace
}  // namespace plugboard
