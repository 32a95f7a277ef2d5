// Boot benchmark: time from process start to a ready client, the full bundle's boot-time choice
// ({cpu, cuda13, rocm7, fault targets}: probes, stamps, fallback) against loading the CPU plugin alone,
// measured in the same run. Each sample is a fresh process (this binary, spawned in a child mode),
// timed from posix_spawn to its exit right after the client is ready. Also: bundle bytes for N targets
// against N single-target bundles.
//
//   boot_bench BUNDLE_DIR CPU_PLUGIN [--samples N]
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "bundle/boot.h"
#include "bundle/manifest.h"

extern char** environ;

namespace {
using namespace plugboard;

int child_bundle(const char* dir) {
  bundle::BootOptions b;
  b.discovery.bundle = dir;
  b.discovery.environment = false;
  auto booted = bundle::boot(b);
  if (!booted || !booted->selection.client) {
    std::fprintf(stderr, "boot failed\n");
    std::_Exit(1);
  }
  std::_Exit(0);
}

int child_plugin(const char* path) {
  auto plugin = load_plugin(path);
  if (!plugin) std::_Exit(1);
  auto client = Client::create(*plugin);
  std::_Exit(client ? 0 : 1);
}

double spawn_ms(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);  // the plugins' logs
  auto t0 = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&fa);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return ms_since(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child-bundle") == 0) return child_bundle(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "--child-plugin") == 0) return child_plugin(argv[2]);
  if (argc < 3) {
    std::fprintf(stderr, "usage: boot_bench BUNDLE_DIR CPU_PLUGIN [--samples N]\n");
    return 2;
  }
  const std::string self = "/proc/self/exe";
  char exe[4096];
  ssize_t n = readlink(self.c_str(), exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  const std::string dir = argv[1], cpu = argv[2];
  int samples = 15;
  if (argc == 5 && std::strcmp(argv[3], "--samples") == 0) samples = std::atoi(argv[4]);

  auto manifest = bundle::read_manifest(dir);
  if (!manifest) {
    std::fprintf(stderr, "%s\n", manifest.error().to_string().c_str());
    return 1;
  }
  // Warm-up: page cache and the verification stamps (the first boot after bundling hashes everything).
  spawn_ms({exe, "--child-bundle", dir});
  spawn_ms({exe, "--child-plugin", cpu});
  std::vector<double> with_bundle, alone;
  for (int i = 0; i < samples; ++i) {  // interleaved, so drift hits both alike
    with_bundle.push_back(spawn_ms({exe, "--child-bundle", dir}));
    alone.push_back(spawn_ms({exe, "--child-plugin", cpu}));
  }
  if (std::count(with_bundle.begin(), with_bundle.end(), -1.0) || std::count(alone.begin(), alone.end(), -1.0)) {
    std::fprintf(stderr, "a child failed to reach a ready client\n");
    return 1;
  }
  const double b = median(with_bundle), a = median(alone);
  std::printf("process start -> ready client, median of %d fresh processes each\n", samples);
  std::printf("  %-48s %8.1f ms\n", "CPU plugin alone (load_plugin + Client::create)", a);
  std::printf("  %-48s %8.1f ms\n", ("bundle boot (" + std::to_string(manifest->targets.size()) + " targets)").c_str(), b);
  std::printf("  ratio bundle / alone: %.3f  (goal <= 1.10)\n", b / a);

  // Bytes: the bundle stores each distinct file once; N single-target bundles store one each.
  std::map<std::string, uint64_t> distinct;
  uint64_t separate = 0;
  for (const auto& t : manifest->targets) {
    distinct[t.sha256] = t.size;
    separate += t.size;
  }
  uint64_t together = 0;
  for (const auto& [sha, size] : distinct) together += size;
  std::printf("bundle bytes: %zu targets in one bundle %.1f MiB; %zu single-target bundles %.1f MiB; ratio %.3f\n",
              manifest->targets.size(), together / 1048576.0, manifest->targets.size(), separate / 1048576.0,
              static_cast<double>(together) / static_cast<double>(separate));
  return 0;
}
