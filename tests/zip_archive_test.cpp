// The zip reader (src/fetch/zip_archive.h) and the Wheel over it, on archives Python's zipfile wrote
// (tests/zip_writer.h), then damaged byte by byte: stored and deflated members read back exactly,
// zip64 archives, and every damage an error (DATA_LOSS naming the wheel and the member), never bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/regular_file.h"
#include "base/sha256.h"
#include "fetch/wheel.h"
#include "fetch/zip_archive.h"
#include "test_env.h"
#include "zip_writer.h"

namespace plugboard::fetch {
namespace {

namespace fs = std::filesystem;
using plugboard::testing::ScratchDir;
using plugboard::testing::write_zip;
using plugboard::testing::ZipMember;
using plugboard::testing::ZipOptions;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A text of `size` bytes that deflate does not shrink to nothing (so it spans several 1 MiB chunks
// of compressed data too).
std::string varied_text(size_t size) {
  std::string s(size, '\0');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>('a' + (x >> 16) % 26);
  }
  return s;
}

// All of `name`'s bytes through Wheel::read.
Expected<std::string> read_member(const Wheel& w, const std::string& name) {
  const WheelMember* m = w.find(name);
  if (m == nullptr) return make_error(Code::kNotFound, name + " is not in the wheel");
  std::string out;
  PB_RETURN_IF_ERROR(w.read(*m, [&](std::span<const std::byte> chunk) -> Status {
    out.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    return ok();
  }, false));
  return out;
}

// Little-endian fields of a one-member archive's local header (at 0) and central header (the last
// "PK\1\2"), set alike in both: what a corrupted or forged archive looks like.
struct Field {
  size_t local, central, bytes;
};
constexpr Field kFlags{6, 8, 2}, kMethod{8, 10, 2}, kCrc{14, 16, 4}, kCompressedSize{18, 20, 4}, kSize{22, 24, 4};

void set_field(const fs::path& zip, const Field& f, uint32_t value, bool local = true, bool central = true) {
  std::string bytes = read_text(zip);
  ASSERT_EQ(bytes.compare(0, 4, "PK\x03\x04"), 0);
  const size_t central_at = bytes.rfind("PK\x01\x02");
  ASSERT_NE(central_at, std::string::npos);
  std::vector<size_t> at;
  if (local) at.push_back(f.local);
  if (central) at.push_back(central_at + f.central);
  for (size_t a : at)
    for (size_t i = 0; i < f.bytes; ++i) bytes[a + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  write_text(zip, bytes);
}
uint32_t get_field(const fs::path& zip, const Field& f) {
  const std::string bytes = read_text(zip);
  uint32_t v = 0;
  for (size_t i = 0; i < f.bytes; ++i) v |= uint32_t{static_cast<unsigned char>(bytes[f.local + i])} << (8 * i);
  return v;
}

// An error that is DATA_LOSS and names every one of `parts`.
void expect_data_loss(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), Code::kDataLoss) << s.error().to_string();
  for (const std::string& part : parts)
    EXPECT_NE(s.error().to_string().find(part), std::string::npos) << part << " not in: " << s.error().to_string();
}
template <class T>
Status status_of(const Expected<T>& e) {
  if (e) return ok();
  return std::unexpected(e.error());
}

TEST(ZipArchive, StoredAndDeflatedMembersReadBackExactly) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  const std::string big = varied_text((size_t{5} << 20) + 123);  // more than one 1 MiB chunk
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {
      {.name = "pkg/libstored.so", .file = fs::path(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED)},
      {.name = "pkg/big.txt", .content = big},
      {.name = "pkg/big_stored.bin", .content = big, .method = "stored"},
      {.name = "pkg/zeros.bin", .content = std::string(1, '\0'), .repeat = 3000000},
      {.name = "pkg/empty.txt", .content = ""},
      {.name = "pkg/empty.so", .content = ""},
      {.name = "pkg/run.sh", .content = "#!/bin/sh\n", .mode = S_IFREG | 0755},
  }));
  auto w = Wheel::open(wheel);
  PB_ASSERT_OK(w);
  ASSERT_EQ(w->members().size(), 7u);
  EXPECT_EQ(w->members()[0].name, "pkg/libstored.so");
  EXPECT_EQ(w->members()[0].size, fs::file_size(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_EQ(w->members()[0].compressed_size, w->members()[0].size);  // stored
  EXPECT_LT(w->members()[1].compressed_size, w->members()[1].size);  // deflated
  for (const WheelMember& m : w->members()) EXPECT_FALSE(m.symlink) << m.name;

  auto so = read_member(*w, "pkg/libstored.so");
  PB_ASSERT_OK(so);
  EXPECT_EQ(*so, read_text(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED));
  EXPECT_EQ(read_member(*w, "pkg/big.txt").value(), big);
  EXPECT_EQ(read_member(*w, "pkg/big_stored.bin").value(), big);
  EXPECT_EQ(read_member(*w, "pkg/zeros.bin").value(), std::string(3000000, '\0'));
  EXPECT_EQ(read_member(*w, "pkg/empty.txt").value(), "");
  EXPECT_EQ(read_member(*w, "pkg/empty.so").value(), "");
  EXPECT_EQ(read_member(*w, "pkg/run.sh").value(), "#!/bin/sh\n");

  // extract() writes the same bytes and hashes them.
  auto x = w->extract(*w->find("pkg/big.txt"), dir.path(), false);
  PB_ASSERT_OK(x);
  EXPECT_EQ(x->size, big.size());
  EXPECT_EQ(x->sha256, sha256_hex(std::as_bytes(std::span(big.data(), big.size()))));
}

// Zip64 throughout (Python's zipfile with a small limit, as CPython's own tests do): sizes and
// offsets in the central directory's zip64 extra fields, a zip64 end record and its locator, and a
// zip64 local header.
TEST(ZipArchive, Zip64ArchiveReadsLikeAnyOther) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  const std::string text = varied_text(50000);
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {
      {.name = "pkg/a.txt", .content = text},
      {.name = "pkg/lib.so", .file = fs::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API)},
      {.name = "pkg/small.txt", .content = "small"},  // its offset is past the limit
      {.name = "pkg/forced.txt", .content = "forced", .force_zip64 = true},
  }, ZipOptions{.zip64_limit = 1000}));
  const std::string bytes = read_text(wheel);
  ASSERT_NE(bytes.find("PK\x06\x06"), std::string::npos) << "no zip64 end record: the test wrote no zip64 archive";
  ASSERT_NE(bytes.find("PK\x06\x07"), std::string::npos) << "no zip64 locator";
  const size_t central = bytes.find("PK\x01\x02");
  ASSERT_EQ(bytes.compare(central + 20, 8, std::string(8, '\xff')), 0) << "sizes not in a zip64 extra field";

  auto w = Wheel::open(wheel);
  PB_ASSERT_OK(w);
  ASSERT_EQ(w->members().size(), 4u);
  EXPECT_EQ(w->members()[0].size, text.size());
  EXPECT_EQ(read_member(*w, "pkg/a.txt").value(), text);
  EXPECT_EQ(read_member(*w, "pkg/lib.so").value(), read_text(PLUGBOARD_FIXTURE_NO_GET_PJRT_API));
  EXPECT_EQ(read_member(*w, "pkg/small.txt").value(), "small");
  EXPECT_EQ(read_member(*w, "pkg/forced.txt").value(), "forced");

  // The zip64 end record is the one read: one that disagrees with the short end record is refused.
  std::string forged = bytes;
  const size_t record = forged.find("PK\x06\x06");
  forged[record + 32] = 3;  // its entry count
  write_text(wheel, forged);
  expect_data_loss(status_of(Wheel::open(wheel)), {wheel.string(), "zip64"});
}

// An archive written as to a pipe (Python's zipfile on a stream that cannot seek): every member's
// local header has general purpose flag bit 3 and zeros for its CRC-32 and sizes, which follow its
// data in a data descriptor; the central directory has them. Read back exactly, zip64 too (a
// descriptor with 8-byte sizes), and its CRC-32 still checked.
TEST(ZipArchive, MembersWithDataDescriptorsReadLikeAnyOther) {
  ScratchDir dir;
  const std::string text = varied_text(200000);
  const std::vector<ZipMember> members = {
      {.name = "pkg/a.txt", .content = text},
      {.name = "pkg/lib.so", .file = fs::path(PLUGBOARD_FIXTURE_NO_GET_PJRT_API)},
      {.name = "pkg/stored.bin", .content = text, .method = "stored"},
      {.name = "pkg/empty.txt", .content = ""},
  };
  for (const bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip32");
    const fs::path wheel = dir / (zip64 ? "zip64-1.0-py3-none-any.whl" : "zip32-1.0-py3-none-any.whl");
    ASSERT_NO_FATAL_FAILURE(write_zip(wheel, members,
                                      ZipOptions{.zip64_limit = zip64 ? std::optional<uint64_t>(1000) : std::nullopt,
                                                 .streamed = true}));
    // Every local header says "data descriptor", with no CRC-32 or sizes of its own.
    const std::string bytes = read_text(wheel);
    size_t locals = 0;
    for (size_t at = bytes.find("PK\x03\x04"); at != std::string::npos; at = bytes.find("PK\x03\x04", at + 4)) {
      if (at + 30 > bytes.size()) break;
      const auto field = [&](size_t off, size_t n) {
        uint32_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= uint32_t{static_cast<unsigned char>(bytes[at + off + i])} << (8 * i);
        return v;
      };
      if (field(26, 2) == 0 || at + 30 + field(26, 2) > bytes.size() ||
          bytes.compare(at + 30, 4, "pkg/") != 0)
        continue;  // "PK\3\4" inside some member's data
      ++locals;
      EXPECT_NE(field(kFlags.local, 2) & 0x0008, 0u) << "no data descriptor flag at offset " << at;
      EXPECT_EQ(field(kCrc.local, 4), 0u) << "a CRC-32 in the local header at offset " << at;
    }
    ASSERT_EQ(locals, members.size()) << "not the archive a stream that cannot seek gets";
    ASSERT_NE(bytes.find("PK\x07\x08"), std::string::npos) << "no data descriptor signature";

    auto w = Wheel::open(wheel);
    PB_ASSERT_OK(w);
    ASSERT_EQ(w->members().size(), members.size());
    EXPECT_EQ(read_member(*w, "pkg/a.txt").value(), text);
    EXPECT_EQ(read_member(*w, "pkg/lib.so").value(), read_text(PLUGBOARD_FIXTURE_NO_GET_PJRT_API));
    EXPECT_EQ(read_member(*w, "pkg/stored.bin").value(), text);
    EXPECT_EQ(read_member(*w, "pkg/empty.txt").value(), "");
  }

  // The CRC-32 the central directory holds is checked all the same.
  const fs::path one = dir / "one-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(one, {{.name = "pkg/a.txt", .content = text}}, ZipOptions{.streamed = true}));
  std::string bytes = read_text(one);
  const size_t central = bytes.rfind("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  bytes[central + kCrc.central] = static_cast<char>(bytes[central + kCrc.central] ^ 1);
  write_text(one, bytes);
  auto w = Wheel::open(one);
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.txt")), {one.string(), "pkg/a.txt", "CRC-32"});
  // Without bit 3 its local header's zeros are a CRC-32 and sizes, which disagree with the central directory.
  ASSERT_NO_FATAL_FAILURE(write_zip(one, {{.name = "pkg/a.txt", .content = text}}, ZipOptions{.streamed = true}));
  ASSERT_NO_FATAL_FAILURE(set_field(one, kFlags, get_field(one, kFlags) & ~0x0008u, /*local=*/true, /*central=*/false));
  auto unflagged = Wheel::open(one);
  PB_ASSERT_OK(unflagged);
  expect_data_loss(status_of(read_member(*unflagged, "pkg/a.txt")), {one.string(), "pkg/a.txt", "local header"});
}

TEST(ZipArchive, ACorruptCrcIsDataLossNamingWheelAndMember) {
  ScratchDir dir;
  // A deflated member whose data is intact and whose CRC-32 (in both headers) is not.
  const fs::path deflated = dir / "deflated-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(deflated, {{.name = "pkg/a.txt", .content = varied_text(100000)}}));
  ASSERT_NO_FATAL_FAILURE(set_field(deflated, kCrc, get_field(deflated, kCrc) ^ 0x10000));
  auto w = Wheel::open(deflated);
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.txt")), {deflated.string(), "pkg/a.txt", "CRC-32"});
  // A stored member with one byte of its data flipped.
  const fs::path stored = dir / "stored-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(stored, {{.name = "pkg/lib.so", .content = varied_text(5000)}}));
  std::string bytes = read_text(stored);
  bytes[30 + 10 + 2500] ^= 0x01;  // past the local header and its name
  write_text(stored, bytes);
  auto s = Wheel::open(stored);
  PB_ASSERT_OK(s);
  expect_data_loss(status_of(read_member(*s, "pkg/lib.so")), {stored.string(), "pkg/lib.so", "CRC-32"});
  // extract() leaves no file behind.
  auto x = s->extract(*s->find("pkg/lib.so"), dir.path(), false);
  ASSERT_FALSE(x);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);  // the two wheels
}

// Cut anywhere, an archive is refused when opened (its end record is gone), never read short.
TEST(ZipArchive, ATruncatedArchiveIsDataLoss) {
  ScratchDir dir;
  const fs::path whole = dir / "whole.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(whole, {{.name = "pkg/a.txt", .content = varied_text(300)},
                                            {.name = "pkg/b.so", .content = "stored bytes"}}));
  const std::string bytes = read_text(whole);
  const fs::path cut = dir / "cut-1.0-py3-none-any.whl";
  for (size_t size = 0; size < bytes.size(); ++size) {
    write_text(cut, bytes.substr(0, size));
    auto w = Wheel::open(cut);
    ASSERT_FALSE(w) << "cut to " << size << " of " << bytes.size() << " bytes";
    EXPECT_EQ(w.error().code(), Code::kDataLoss) << w.error().to_string();
    EXPECT_NE(w.error().to_string().find(cut.string()), std::string::npos) << w.error().to_string();
  }
  // A deflate stream cut short inside an archive that is otherwise whole: its compressed size says
  // less than the stream needs.
  const fs::path short_stream = dir / "short-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(short_stream, {{.name = "pkg/a.txt", .content = varied_text(100000)}}));
  ASSERT_NO_FATAL_FAILURE(set_field(short_stream, kCompressedSize, get_field(short_stream, kCompressedSize) - 100));
  auto w = Wheel::open(short_stream);
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.txt")), {short_stream.string(), "pkg/a.txt", "truncated"});
  // A compressed size that runs into the central directory.
  ASSERT_NO_FATAL_FAILURE(set_field(short_stream, kCompressedSize, get_field(short_stream, kCompressedSize) + 1000));
  auto past = Wheel::open(short_stream);
  PB_ASSERT_OK(past);
  expect_data_loss(status_of(read_member(*past, "pkg/a.txt")), {short_stream.string(), "pkg/a.txt", "central directory"});
}

TEST(ZipArchive, AnUnsupportedMethodIsRefusedNamingIt) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.txt", .content = "bzip2'd", .method = "bzip2"},
                                            {.name = "pkg/b.txt", .content = "deflated"}}));
  auto w = Wheel::open(wheel);  // the archive is fine; that member cannot be read
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.txt")), {wheel.string(), "pkg/a.txt", "compression method 12"});
  EXPECT_EQ(read_member(*w, "pkg/b.txt").value(), "deflated");
}

TEST(ZipArchive, AnEncryptedMemberIsRefused) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.so", .content = "secret"}}));
  ASSERT_NO_FATAL_FAILURE(set_field(wheel, kFlags, get_field(wheel, kFlags) | 1));
  auto w = Wheel::open(wheel);
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.so")), {wheel.string(), "pkg/a.so", "encrypted"});
}

TEST(ZipArchive, ALocalHeaderThatDisagreesWithTheCentralDirectoryIsRefused) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  for (const Field& f : {kCrc, kSize, kMethod}) {
    ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.so", .content = "some bytes"}}));
    ASSERT_NO_FATAL_FAILURE(set_field(wheel, f, get_field(wheel, f) ^ 8, /*local=*/true, /*central=*/false));
    auto w = Wheel::open(wheel);
    PB_ASSERT_OK(w);
    expect_data_loss(status_of(read_member(*w, "pkg/a.so")), {wheel.string(), "pkg/a.so", "local header"});
  }
  // A stored member whose sizes differ: more data than it declares is never delivered.
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.so", .content = "some bytes"}}));
  ASSERT_NO_FATAL_FAILURE(set_field(wheel, kSize, 4));
  auto w = Wheel::open(wheel);
  PB_ASSERT_OK(w);
  expect_data_loss(status_of(read_member(*w, "pkg/a.so")), {wheel.string(), "pkg/a.so", "stored"});
}

TEST(ZipArchive, MalformedArchivesAreRefusedWhenOpened) {
  ScratchDir dir;
  const fs::path wheel = dir / "pkg-1.0-py3-none-any.whl";
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.txt", .content = "a"}}));
  const std::string good = read_text(wheel);
  struct Case {
    std::string bytes, expect;
  };
  const size_t central = good.rfind("PK\x01\x02"), end = good.rfind("PK\x05\x06");
  auto with = [&](size_t at, std::string value) {
    std::string b = good;
    b.replace(at, value.size(), value);
    return b;
  };
  const std::vector<Case> cases = {
      {"", "only 0 bytes"},
      {"not a zip archive at all, but long enough", "no end-of-central-directory record"},
      {good + "trailing", "no end-of-central-directory record"},
      {with(end + 16, std::string("\x00\x00\x01\x00", 4)), "central directory"},   // its offset past the end
      {with(end + 8, std::string("\x02\x00\x02\x00", 4)), "declares 2 entries"},  // room for one
      {with(end + 4, std::string("\x01\x00", 2)), "disks"},
      {with(central + 42, std::string("\xff\xff\x00\x00", 4)), "local header offset"},
      {with(central, "PK\x01\x03"), "signature"},
  };
  for (const Case& c : cases) {
    write_text(wheel, c.bytes);
    auto w = Wheel::open(wheel);
    ASSERT_FALSE(w) << c.expect;
    EXPECT_EQ(w.error().code(), Code::kDataLoss) << w.error().to_string();
    EXPECT_NE(w.error().to_string().find(c.expect), std::string::npos) << c.expect << " not in: " << w.error().to_string();
    EXPECT_NE(w.error().to_string().find(wheel.string()), std::string::npos) << w.error().to_string();
  }
  // Two entries of one name: which one a reader takes is not to be guessed.
  ASSERT_NO_FATAL_FAILURE(write_zip(wheel, {{.name = "pkg/a.so", .content = "one"}, {.name = "pkg/a.so", .content = "two"}}));
  auto twice = Wheel::open(wheel);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().to_string().find("two entries are named pkg/a.so"), std::string::npos) << twice.error().to_string();
}

}  // namespace
}  // namespace plugboard::fetch
