// The small facilities of src/base that every layer shares instead of writing its own: hex text, the
// errno mapping, the pread loop, the stage clock, atomic files, subprocesses and the host block pool.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <iterator>
#include <string_view>
#include <thread>
#include <vector>

#include "base/host_block_pool.h"
#include "base/atomic_file.h"
#include "base/clock.h"
#include "base/errno_error.h"
#include "base/hex.h"
#include "base/read_at.h"
#include "base/subprocess.h"
#include "base/temp_dir.h"
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

// --- atomic files ---

size_t entries_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

std::string content_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AtomicFile, ReplacesTheDestinationWholeWithTheModeAsked) {
  ScratchDir d;
  std::ofstream(d.path() / "out.json") << "old content, longer than the new";
  ASSERT_TRUE(write_file_atomically(d.path() / "out.json", std::string_view("new"), 0640));
  EXPECT_EQ(content_of(d.path() / "out.json"), "new");
  struct stat st {};
  ASSERT_EQ(::stat((d.path() / "out.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries_in(d.path()), 1u);  // no temporary left beside it
}

TEST(AtomicFile, AFileNotCommittedIsRemoved) {
  ScratchDir d;
  {
    auto f = AtomicFile::create(d.path());
    ASSERT_TRUE(f) << f.error().to_string();
    ASSERT_TRUE(f->write_all(std::string_view("partial")));
    EXPECT_EQ(entries_in(d.path()), 1u);
  }
  EXPECT_EQ(entries_in(d.path()), 0u);
}

TEST(AtomicFile, AMissingFolderIsNotFoundAndNamed) {
  ScratchDir d;
  auto s = write_file_atomically(d.path() / "no_such_dir" / "a", std::string_view("x"), 0644);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), Code::kNotFound);
  EXPECT_NE(s.error().message().find("no_such_dir"), std::string::npos) << s.error().message();
}

TEST(AtomicFile, MoveFileDurablyRenamesIntoPlace) {
  ScratchDir d;
  std::ofstream(d.path() / "a") << "bytes";
  ASSERT_TRUE(move_file_durably(d.path() / "a", d.path() / "b"));
  EXPECT_FALSE(fs::exists(d.path() / "a"));
  EXPECT_EQ(content_of(d.path() / "b"), "bytes");
  EXPECT_EQ(move_file_durably(d.path() / "a", d.path() / "c").error().code(), Code::kNotFound);
}

TEST(TempDir, IsRemovedWithWhatIsInIt) {
  ScratchDir d;
  fs::path inside;
  {
    auto t = TempDir::create(d.path(), "x-");
    ASSERT_TRUE(t) << t.error().to_string();
    inside = t->path();
    std::ofstream(inside / "f") << "x";
    EXPECT_EQ(inside.filename().string().rfind("x-", 0), 0u);
  }
  EXPECT_FALSE(fs::exists(inside));
}

// --- subprocesses ---

bool is_zombie(pid_t pid) {
  const std::string stat = content_of("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

TEST(Subprocess, CapturesStdoutAndStderrAndTheExitStatus) {
  auto child = Subprocess::spawn({.argv = {"/bin/sh", "-c", "echo out; echo err >&2; read x; echo \"stdin:$x\"; exit 3"},
                                  .capture = Capture::kCombined});
  ASSERT_TRUE(child) << child.error().to_string();
  std::string output;
  EXPECT_TRUE(child->read_output_until(Clock::now() + std::chrono::seconds(30), output));
  EXPECT_TRUE(child->wait_until(Clock::now() + std::chrono::seconds(30)));
  const ExitStatus status = child->reap();
  EXPECT_EQ(output, "out\nerr\nstdin:\n");  // stdin is /dev/null
  EXPECT_TRUE(status.exited());
  EXPECT_EQ(status.exit_code(), 3);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.describe(), "exited with status 3");
}

TEST(Subprocess, PassesTheEnvironmentGivenAndSearchesPath) {
  auto child = Subprocess::spawn(
      {.argv = {"sh", "-c", "echo \"$PB_X\""}, .env = std::vector<std::string>{"PB_X=42", "PATH=/bin:/usr/bin"},
       .search_path = true, .capture = Capture::kCombined});
  ASSERT_TRUE(child) << child.error().to_string();
  std::string output;
  EXPECT_TRUE(child->read_output_until(Clock::now() + std::chrono::seconds(30), output));
  EXPECT_TRUE(child->reap().success());
  EXPECT_EQ(output, "42\n");
}

TEST(Subprocess, AMissingProgramIsNotFound) {
  auto child = Subprocess::spawn({.argv = {"/no/such/program"}});
  ASSERT_FALSE(child);
  EXPECT_EQ(child.error().code(), Code::kNotFound);
  EXPECT_NE(child.error().message().find("cannot start /no/such/program"), std::string::npos);
}

TEST(Subprocess, ADeadlineStopsWaitingAndKillEndsTheWholeGroup) {
  ScratchDir d;
  const fs::path pid_file = d.path() / "grandchild.pid";
  // The child starts a grandchild in its group, records its pid, and both sleep.
  auto child = Subprocess::spawn({.argv = {"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file.string() + "; sleep 60"},
                                  .new_process_group = true});
  ASSERT_TRUE(child) << child.error().to_string();
  for (int i = 0; i < 3000 && content_of(pid_file).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_FALSE(content_of(pid_file).empty());
  const auto t0 = Clock::now();
  EXPECT_FALSE(child->wait_until(t0 + std::chrono::milliseconds(100)));
  EXPECT_GE(ms_since(t0), 99.0);
  child->kill();
  const ExitStatus status = child->reap();
  EXPECT_TRUE(status.signaled());
  EXPECT_EQ(status.term_signal(), SIGKILL);
  EXPECT_EQ(status.describe(), "was killed by signal 9");
  const pid_t grandchild = static_cast<pid_t>(std::stol(content_of(pid_file)));
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {
    gone = ::kill(grandchild, 0) != 0 || is_zombie(grandchild);  // killed (reaped or waiting to be)
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(gone) << "the grandchild " << grandchild << " outlived its group's kill";
}

TEST(Subprocess, ReadingOutputStopsAtTheDeadline) {
  auto child = Subprocess::spawn({.argv = {"/bin/sh", "-c", "echo started; sleep 60"}, .new_process_group = true,
                                  .capture = Capture::kCombined});
  ASSERT_TRUE(child) << child.error().to_string();
  std::string output;
  EXPECT_FALSE(child->read_output_until(Clock::now() + std::chrono::milliseconds(300), output));
  EXPECT_EQ(output, "started\n");
  // Destroyed without a reap: the destructor kills the group and reaps the child, without waiting 60 s.
}

TEST(HostBlockPool, BlocksArePageAlignedWarmAndReusedForTheSameSize) {
  HostBlockPool pool;
  std::byte* first = nullptr;
  {
    auto block = pool.acquire(10'000);
    ASSERT_TRUE(block) << block.error().to_string();
    first = block->get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_GE(HostBlockPool::block_size(10'000), 10'000u);
    std::memset(first, 0x5a, 10'000);  // writable, every byte
    EXPECT_EQ(pool.stats().blocks_in_use, 1u);
  }
  EXPECT_EQ(pool.stats().blocks_in_use, 0u);
  EXPECT_EQ(pool.stats().bytes_kept, HostBlockPool::block_size(10'000));
  auto again = pool.acquire(9'000);  // the same page-rounded size: the same block
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->get(), first);
  EXPECT_EQ(pool.stats().reuses, 1u);
  auto other = pool.acquire(1 << 20);  // another size: a new block
  ASSERT_TRUE(other) << other.error().to_string();
  EXPECT_NE(other->get(), first);
  EXPECT_EQ(pool.stats().blocks_mapped, 2u);
}

TEST(HostBlockPool, KeepsNoMoreThanItsLimitAndBlocksMayOutliveThePool) {
  const size_t block = HostBlockPool::block_size(1 << 20);
  std::shared_ptr<std::byte> survivor;
  {
    HostBlockPool pool(block);  // room for one idle block
    auto a = pool.acquire(1 << 20), b = pool.acquire(1 << 20);
    ASSERT_TRUE(a) << a.error().to_string();
    ASSERT_TRUE(b) << b.error().to_string();
    a->reset();
    b->reset();
    EXPECT_EQ(pool.stats().bytes_kept, block);
    EXPECT_EQ(pool.stats().blocks_mapped, 1u);  // the second was unmapped
    auto c = pool.acquire(1 << 20);
    ASSERT_TRUE(c) << c.error().to_string();
    survivor = *c;
  }
  survivor.get()[0] = std::byte{1};  // still mapped after the pool is gone
  survivor.reset();                  // and unmapped now (ASan and the kernel would tell otherwise)
}

TEST(HostBlockPool, ThreadsAcquireAndGiveBackAtOnce) {
  HostBlockPool pool(size_t{8} << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 200; ++i) {
        auto block = pool.acquire(size_t{4096} * (1 + (i + t) % 3));
        ASSERT_TRUE(block);
        block->get()[0] = std::byte{static_cast<unsigned char>(i)};
      }
    });
  for (auto& th : threads) th.join();
  const auto stats = pool.stats();
  EXPECT_EQ(stats.blocks_in_use, 0u);
  EXPECT_GT(stats.reuses, 0u);
}

}  // namespace
}  // namespace plugboard
