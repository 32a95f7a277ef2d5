// Verify-then-load: the file hashed is the file loaded. A plugin rewritten in place with its mtime
// restored is hashed again (ctime is in the stamp), and a plugin or CUDA bridge replaced or rewritten
// between verification and dlopen is refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/sha256.h"
#include "callback/device_bridge.h"
#include "plugin/native_library.h"
#include "plugin/plugin.h"
#include "select/verify.h"
#include "test_env.h"

namespace plugboard {
namespace {

using select::Candidate;
using select::VerifyOptions;

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Candidate candidate_for(const std::filesystem::path& path) {
  Candidate c;
  c.name = "fault";
  c.platform = "fault";
  c.source = "test";
  c.path = path;
  c.size = std::filesystem::file_size(path);
  c.sha256 = *sha256_file(path);
  return c;
}

struct timespec mtime_of(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return st.st_mtim;
}

// Writes `bytes` over the file in place (same inode), then puts its mtime back, as `touch -r` would.
void rewrite_in_place_keeping_mtime(const std::filesystem::path& p, const std::string& bytes) {
  const struct timespec mtime = mtime_of(p);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const struct timespec times[2] = {mtime, mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  ASSERT_EQ(mtime_of(p).tv_nsec, mtime.tv_nsec);
  ASSERT_EQ(mtime_of(p).tv_sec, mtime.tv_sec);
}

// The ctime of a file rewritten now may equal the ctime it had at verification when both fall in the
// same clock tick: wait until the clock has moved on.
void let_the_clock_tick() { ::usleep(20000); }

TEST(VerifyLoadTest, InPlaceRewriteWithMtimeRestoredIsHashedAgain) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  const auto plugin = dir / "plugin.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, plugin);
  const Candidate c = candidate_for(plugin);
  const VerifyOptions o{dir / "stamps", false};
  auto first = select::verify_candidate(c, o);
  PB_ASSERT_OK(first);
  EXPECT_EQ(first->how, select::Verification::kHashed);
  auto second = select::verify_candidate(c, o);
  PB_ASSERT_OK(second);
  EXPECT_EQ(second->how, select::Verification::kStampVouched) << "the stamp vouches for an unchanged file";

  // The same bytes written again, mtime restored: only ctime tells, and it is enough to hash again.
  let_the_clock_tick();
  const std::string original = read_all(plugin);
  rewrite_in_place_keeping_mtime(plugin, original);
  auto same = select::verify_candidate(c, o);
  PB_ASSERT_OK(same);
  EXPECT_EQ(same->how, select::Verification::kHashed) << "a stamp without ctime vouched for a rewritten file";

  // Other bytes of the same size, mtime restored: hashed, and refused.
  let_the_clock_tick();
  std::string tampered = original;
  tampered[tampered.size() - 1] = static_cast<char>(tampered.back() ^ 0x5a);
  rewrite_in_place_keeping_mtime(plugin, tampered);
  auto refused = select::verify_candidate(c, o);
  ASSERT_FALSE(refused) << "the stale stamp let a rewritten plugin through";
  EXPECT_EQ(refused.error().code(), Code::kDataLoss);
  EXPECT_NE(refused.error().message().find("sha256"), std::string::npos) << refused.error().to_string();
  std::filesystem::remove_all(dir);
}

TEST(VerifyLoadTest, SymlinkIsNotVerified) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  const auto real = dir / "real.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, real);
  std::filesystem::create_symlink(real, dir / "link.so");
  Candidate c = candidate_for(real);
  c.path = dir / "link.so";
  auto r = select::verify_candidate(c, VerifyOptions{});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("symbolic link"), std::string::npos) << r.error().to_string();
  std::filesystem::remove_all(dir);
}

TEST(VerifyLoadTest, PluginReplacedBetweenVerifyAndLoadIsRefused) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  const auto plugin = dir / "plugin.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, plugin);
  PB_ASSERT_OK(select::verify_candidate(candidate_for(plugin), VerifyOptions{}));
  auto recorded = verified_identity(plugin);
  ASSERT_TRUE(recorded.has_value());

  // Between the stages (probe, dependency scan, an isolation child): the file is swapped for another
  // one, even one with the same bytes.
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "swap.so");
  std::filesystem::rename(dir / "swap.so", plugin);
  auto r = load_plugin(plugin);
  ASSERT_FALSE(r) << "a plugin replaced after verification was loaded";
  EXPECT_EQ(r.error().code(), Code::kDataLoss);
  EXPECT_NE(r.error().message().find("changed between verification and load"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message().find(plugin.filename().string()), std::string::npos);

  // Verified again, the new file loads.
  PB_ASSERT_OK(select::verify_candidate(candidate_for(plugin), VerifyOptions{}));
  PB_ASSERT_OK(load_plugin(plugin));
  std::filesystem::remove_all(dir);
}

TEST(VerifyLoadTest, PluginRewrittenInPlaceBetweenVerifyAndLoadIsRefused) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  const auto plugin = dir / "plugin.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, plugin);
  PB_ASSERT_OK(select::verify_candidate(candidate_for(plugin), VerifyOptions{}));
  let_the_clock_tick();
  std::string tampered = read_all(plugin);
  tampered.back() = static_cast<char>(tampered.back() ^ 0x5a);
  rewrite_in_place_keeping_mtime(plugin, tampered);  // other bytes: same inode, size and mtime
  auto r = load_plugin(plugin);
  ASSERT_FALSE(r) << "a plugin rewritten after verification was loaded";
  EXPECT_EQ(r.error().code(), Code::kDataLoss);
  EXPECT_NE(r.error().message().find("changed between verification and load"), std::string::npos) << r.error().to_string();
  std::filesystem::remove_all(dir);
}

TEST(VerifyLoadTest, AHardLinkOrAChmodBetweenVerifyAndLoadIsNoChange) {
  // Bundles hard-link plugins from the fetch cache: a link made to a file while another process
  // verifies and loads it moves the file's ctime and nothing else. The content decides (hashed
  // again), so the load goes on.
  const testing::ScratchDir scratch;
  const std::filesystem::path plugin = scratch / "plugin.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, plugin);
  PB_ASSERT_OK(select::verify_candidate(candidate_for(plugin), VerifyOptions{}));
  let_the_clock_tick();
  std::filesystem::create_hard_link(plugin, scratch / "linked.so");
  ASSERT_EQ(::chmod(plugin.c_str(), 0755), 0);
  auto loaded = load_plugin(plugin);
  EXPECT_TRUE(loaded) << loaded.error().to_string();
}

TEST(VerifyLoadTest, APluginThatChangesAsItIsMappedIsRefusedForGoodAndNeverInitialized) {
  // The fixture's constructor changes its own file's ctime while dlopen maps it, so the check after
  // dlopen fails. The library is mapped by then: a second load must not take dlopen's handle back and
  // initialize (and run) what was refused.
  const testing::ScratchDir scratch;
  const std::filesystem::path plugin = scratch / "plugin.so";
  const std::filesystem::path count = scratch / "initialized";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_TOUCH_SELF, plugin);
  const testing::ScopedEnv counting("PLUGBOARD_FAULT_INIT_COUNT", count.string());
  auto first = load_plugin(plugin);
  ASSERT_FALSE(first) << "a plugin whose file changed while it was mapped was loaded";
  EXPECT_EQ(first.error().code(), Code::kDataLoss) << first.error().to_string();
  EXPECT_NE(first.error().message().find("while it was being loaded"), std::string::npos) << first.error().to_string();
  auto second = load_plugin(plugin);
  ASSERT_FALSE(second) << "the refused library was initialized on the second try";
  EXPECT_EQ(second.error().code(), Code::kDataLoss) << second.error().to_string();
  EXPECT_FALSE(std::filesystem::exists(count)) << "PJRT_Plugin_Initialize ran";
}

TEST(VerifyLoadTest, UnverifiedPluginStillLoads) {
  // No verification in this process (run --plugin): nothing to compare against, the checks before
  // dlopen still apply.
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "plugin.so");
  EXPECT_FALSE(verified_identity(dir / "plugin.so").has_value());
  PB_ASSERT_OK(load_plugin(dir / "plugin.so"));
  std::filesystem::remove_all(dir);
}

TEST(VerifyLoadTest, BundleBridgeWinsOverTheEnvironmentVariable) {
  ::setenv("PLUGBOARD_CUDA_BRIDGE", "/elsewhere/libplugboard_cuda_bridge.so", 1);
  auto path = device_bridge_search_path("CUDA", "/app/bundle/plugins/0123/xla_cuda_plugin.so");
  ::unsetenv("PLUGBOARD_CUDA_BRIDGE");
  ASSERT_GE(path.size(), 2u);
  EXPECT_EQ(path[0], std::filesystem::path("/app/bundle/plugins/0123/libplugboard_cuda_bridge.so"));
  EXPECT_EQ(path[1], std::filesystem::path("/elsewhere/libplugboard_cuda_bridge.so"));
}

TEST(VerifyLoadTest, BundleBridgeChangedAfterVerificationIsRefused) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  std::filesystem::create_directories(dir / "plugins/0123");
  const auto plugin = dir / "plugins/0123/xla_cuda_plugin.so";
  const auto bridge = dir / "plugins/0123" / device_bridge_file_name("CUDA");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, plugin);
  // Any shared library stands in for the bridge: it is refused before dlopen, so its content never runs.
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_NO_GET_PJRT_API, bridge);
  Candidate c = candidate_for(plugin);
  c.companions.push_back({bridge, std::filesystem::file_size(bridge), *sha256_file(bridge)});
  PB_ASSERT_OK(select::verify_candidate(c, VerifyOptions{}));
  ASSERT_TRUE(verified_identity(bridge).has_value()) << "companions are recorded like the plugin";

  let_the_clock_tick();
  std::string tampered = read_all(bridge);
  tampered.back() = static_cast<char>(tampered.back() ^ 0x5a);
  rewrite_in_place_keeping_mtime(bridge, tampered);
  auto r = load_device_bridge("CUDA", plugin);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kDataLoss) << r.error().to_string();
  EXPECT_NE(r.error().message().find("device bridge " + bridge.string() + " changed between verification and load"),
            std::string::npos)
      << r.error().to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plugboard
