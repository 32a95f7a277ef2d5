// src/lapack's own pieces below the kernels: the workspace size taken from LAPACK's answer to a
// workspace query (workspace.h), and where LAPACK is opened from (library.h): PLUGBOARD_LAPACK, unless
// a confined boot said the environment is not read. Those run in a child process each (the library
// is opened once per process).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <string>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lapack/library.h"
#include "lapack/workspace.h"

namespace plugboard::lapack {
namespace {

// 16777217 (2^24 + 1) is the first integer a float cannot hold: a LAPACK that rounds it down
// answers 16777216.0f, and one that rounds to nearest may too. The workspace must cover 16777217.
TEST(LapackWorkspace, AFloatAnswerRoundedDownStillGetsTheWholeWorkspace) {
  auto size = workspace_size<float>("t", 16777216.0f);
  ASSERT_TRUE(size) << size.error().to_string();
  EXPECT_GE(*size, 16777217);
  // 100000001 is held by a float as 100000000: the next float above is 100000008.
  size = workspace_size<float>("t", 100000001.0f);
  ASSERT_TRUE(size);
  EXPECT_GE(*size, 100000001);
  EXPECT_LE(*size, 100000008);
}

TEST(LapackWorkspace, ExactAnswersGetAtLeastTheirSizeAndLittleMore) {
  for (double n : {0.0, 1.0, 7.0, 1234.0, 2147483646.0}) {
    auto size = workspace_size<double>("t", n);
    ASSERT_TRUE(size) << n;
    EXPECT_GE(*size, static_cast<Int>(n));
    EXPECT_LE(*size, static_cast<Int>(n) + 1);
  }
  auto size = workspace_size<float>("t", 12.5f);  // a fractional answer is rounded up
  ASSERT_TRUE(size);
  EXPECT_GE(*size, 13);
}

TEST(LapackWorkspace, TheSlackNeverPassesTheLargestLapackInteger) {
  // 2147483520 is the largest float below 2^31: the next float up is 2^31, which LAPACK's integer
  // cannot hold, but LAPACK computed the size in that integer, so INT_MAX covers it.
  auto size = workspace_size<float>("t", 2147483520.0f);
  ASSERT_TRUE(size) << size.error().to_string();
  EXPECT_EQ(*size, INT_MAX);
  size = workspace_size<double>("t", double(INT_MAX));
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, INT_MAX);
}

TEST(LapackWorkspace, AFloatAnswerOfExactly2To31IsAnySizeUpToIntMaxRoundedAndGetsIntMax) {
  // Every size in (2^31 - 64, 2^31 - 1] comes back from a float query as 2^31 (rounded up or to
  // nearest): LAPACK's integer held it, so INT_MAX covers it.
  EXPECT_EQ(static_cast<float>(INT_MAX), 2147483648.0f);
  EXPECT_EQ(static_cast<float>(INT_MAX - 63), 2147483648.0f);
  auto size = workspace_size<float>("plugboard_lapack_sgesdd", 2147483648.0f);
  ASSERT_TRUE(size) << size.error().to_string();
  EXPECT_EQ(*size, INT_MAX);
  // The next float above it is no rounding of a LAPACK integer: refused.
  size = workspace_size<float>("plugboard_lapack_sgesdd", std::nextafter(2147483648.0f, 1e30f));
  ASSERT_FALSE(size);
  EXPECT_EQ(size.error().code(), Code::kOutOfRange);
}

TEST(LapackWorkspace, AnAnswerAboveIntMaxIsRefusedNamingTheTargetAndTheSize) {
  for (double n : {2147483648.0, 4e9, 1e30}) {
    auto size = workspace_size<double>("plugboard_lapack_dgesdd", n);
    ASSERT_FALSE(size) << n << " gave " << *size;
    EXPECT_EQ(size.error().code(), Code::kOutOfRange);
    EXPECT_NE(size.error().message().find("plugboard_lapack_dgesdd"), std::string::npos) << size.error().to_string();
    EXPECT_NE(size.error().message().find("2147483647"), std::string::npos) << size.error().to_string();
  }
  auto size = workspace_size<float>("plugboard_lapack_ssyevd", 3e9f);
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().message().find("3000000000"), std::string::npos) << size.error().to_string();
}

TEST(LapackWorkspace, ANegativeOrNaNAnswerIsRefused) {
  for (float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    auto size = workspace_size<float>("plugboard_lapack_ssyevd", bad);
    ASSERT_FALSE(size) << bad;
    EXPECT_NE(size.error().message().find("plugboard_lapack_ssyevd"), std::string::npos);
  }
}

// A library that exists and loads but is no LAPACK: if it were opened it would be in the process's
// memory map, and functions() would name its missing routines.
constexpr char kBogus[] = PLUGBOARD_FIXTURE_FAULT_WELL_FORMED;

bool mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(path) != std::string::npos;
}

// Runs `check` in a child; a false check prints `what` there and fails.
#define IN_CHILD(check)                                                      \
  EXPECT_EXIT(                                                               \
      {                                                                      \
        std::string why = (check);                                           \
        if (!why.empty()) std::cerr << "FAILED: " << why << std::endl;       \
        std::exit(why.empty() ? 0 : 1);                                      \
      },                                                                     \
      ::testing::ExitedWithCode(0), "")

std::string environment_is_read() {
  setenv("PLUGBOARD_LAPACK", kBogus, 1);
  auto fns = functions();
  if (fns) return "PLUGBOARD_LAPACK's library was not opened";
  if (fns.error().message().find(std::string(kBogus) + ") has no ssyevd_") == std::string::npos) return fns.error().to_string();
  if (!mapped(kBogus)) return "not in /proc/self/maps";
  const std::string line = describe();
  if (line.find("(from PLUGBOARD_LAPACK)") == std::string::npos) return line;
  return "";
}

std::string environment_is_ignored() {
  setenv("PLUGBOARD_LAPACK", kBogus, 1);
  ignore_environment();
  auto fns = functions();
  if (!fns) return fns.error().to_string();
  if (mapped(kBogus)) return std::string(kBogus) + " was loaded";
  const std::string line = describe();
  if (line.find("LAPACK: /") != 0) return "no file named: " + line;
  if (line.find("liblapack.so.3 on the loader's path; PLUGBOARD_LAPACK=" + std::string(kBogus) +
                " not read: use_environment is false") == std::string::npos)
    return line;
  if (!mapped(line.substr(std::string("LAPACK: ").size(), line.find(" (") - std::string("LAPACK: ").size())))
    return "the file named is not the one mapped: " + line;
  return "";
}

std::string an_unprintable_variable_is_spelled_out() {
  setenv("PLUGBOARD_LAPACK", "/x\x1b[2J\nforged", 1);
  ignore_environment();
  const std::string line = describe();
  if (line.find('\x1b') != std::string::npos || line.find('\n') != std::string::npos) return "raw control characters: " + line;
  if (line.find("PLUGBOARD_LAPACK=/x\\e[2J\\nforged not read") == std::string::npos) return line;
  return "";
}

// describe() (a boot report's line) opens nothing: neither PLUGBOARD_LAPACK's library nor the
// system's is mapped after it, and it names what the first LAPACK call will open.
std::string describing_opens_nothing() {
  setenv("PLUGBOARD_LAPACK", kBogus, 1);
  std::string line = describe();
  if (mapped(kBogus)) return "describe() opened " + std::string(kBogus);
  if (line != "LAPACK: " + std::string(kBogus) + ", opened at its first use (from PLUGBOARD_LAPACK)") return line;
  ignore_environment();
  line = describe();
  if (mapped("liblapack")) return "describe() opened the system's LAPACK";
  if (line != "LAPACK: liblapack.so.3, opened at its first use (liblapack.so.3 on the loader's path; PLUGBOARD_LAPACK=" +
                  std::string(kBogus) + " not read: use_environment is false)")
    return line;
  return "";
}

TEST(LapackLibrary, DescribingLapackForABootReportOpensNothingAndNamesWhatWillBeOpened) { IN_CHILD(describing_opens_nothing()); }

TEST(LapackLibrary, PlugboardLapackIsOpenedWhenTheEnvironmentIsRead) { IN_CHILD(environment_is_read()); }

TEST(LapackLibrary, AConfinedBootLeavesPlugboardLapackUnreadAndNamesTheFileItOpened) { IN_CHILD(environment_is_ignored()); }

TEST(LapackLibrary, TheReportSpellsOutControlCharactersOfTheVariable) { IN_CHILD(an_unprintable_variable_is_spelled_out()); }

}  // namespace
}  // namespace plugboard::lapack
