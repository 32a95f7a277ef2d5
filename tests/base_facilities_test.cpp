// The small facilities of src/base that every layer shares instead of writing its own: hex text, the
// errno mapping, the pread loop, the stage clock.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/errno_error.h"
#include "base/hex.h"
#include "base/read_at.h"
#include "base/unique_fd.h"
#include "test_env.h"

namespace plugboard {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

// --- hex ---

TEST(Hex, EncodesEveryByteAsTwoLowercaseDigits) {
  const std::array<unsigned char, 4> bytes = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(hex_encode(std::span<const unsigned char>(bytes)), "000fa0ff");
  EXPECT_EQ(hex_encode(std::span<const std::byte>()), "");
}

TEST(Hex, EscapesABytePaddedToTwoDigits) {
  std::string out = "x";
  append_hex_escape(out, 0x05);
  append_hex_escape(out, 0x93);
  EXPECT_EQ(out, "x\\x05\\x93");
}

TEST(Hex, WritesNumbersWithoutLeadingZeros) {
  EXPECT_EQ(hex_number(0), "0x0");
  EXPECT_EQ(hex_number(0x40), "0x40");
  EXPECT_EQ(hex_number(~uint64_t{0}), "0xffffffffffffffff");
}

// --- errno ---

TEST(ErrnoError, MapsErrnoToTheCodeThatSaysWhatHappened) {
  EXPECT_EQ(code_from_errno(ENOENT), Code::kNotFound);
  EXPECT_EQ(code_from_errno(EACCES), Code::kPermissionDenied);
  EXPECT_EQ(code_from_errno(ENOSPC), Code::kResourceExhausted);
  EXPECT_EQ(code_from_errno(EEXIST), Code::kAlreadyExists);
  EXPECT_EQ(code_from_errno(ELOOP), Code::kInvalidArgument);
  EXPECT_EQ(code_from_errno(EIO), Code::kUnknown);
  const Error e = errno_error(ENOENT, "cannot open /x").error();
  EXPECT_EQ(e.code(), Code::kNotFound);
  EXPECT_EQ(e.message(), "cannot open /x: No such file or directory");
}

// --- read_at ---

TEST(ReadAt, ReadsAtAnOffsetAndStopsAtTheEndOfTheFile) {
  ScratchDir d;
  std::ofstream(d.path() / "f", std::ios::binary) << "0123456789";
  UniqueFd fd(::open((d.path() / "f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  std::array<std::byte, 4> buf{};
  auto n = read_at(fd.get(), buf, 3, "reading f");
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(static_cast<char>(buf[0]), '3');
  EXPECT_EQ(static_cast<char>(buf[3]), '6');
  n = read_at(fd.get(), buf, 8, "reading f");  // only two bytes are left
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(static_cast<char>(buf[1]), '9');
}

TEST(ReadAt, AReadErrorNamesWhatWasRead) {
  ScratchDir d;
  UniqueFd dir(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  std::array<std::byte, 4> buf{};
  auto n = read_at(dir.get(), buf, 0, "reading the folder");  // EISDIR
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code(), Code::kInvalidArgument);
  EXPECT_NE(n.error().message().find("reading the folder: "), std::string::npos);
}

// --- clock ---

TEST(Clock, MsSinceCountsMilliseconds) {
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double ms = ms_since(t0);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 10000.0);
}

}  // namespace
}  // namespace plugboard
