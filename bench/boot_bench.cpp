// Boot benchmark: time from process start to a ready client through each bundle's boot-time choice
// (probes, stamps, fallback past targets that fail) against loading the CPU plugin alone, measured in
// the same run, sample by sample. Each sample is a fresh process (this binary, spawned in a child
// mode), timed from posix_spawn to its exit right after the client is ready. Also: bundle bytes for
// N targets against N single-target bundles. With --runs N, the whole measurement N times in a row,
// and how far the runs' flatness figures are apart (the goal: within 5% run to run).
//
//   boot_bench CPU_PLUGIN BUNDLE_DIR... [--samples N] [--runs N]
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

// One bundle's figures: its boot against the plugin alone, paired sample by sample.
struct BundleRow {
  std::string dir;
  size_t targets = 0;
  double boot_ms = 0, alone_ms = 0, paired_ratio = 0;
  double together_mib = 0, separate_mib = 0;
};

bool measure(const std::string& exe, const std::string& dir, const std::string& cpu, int samples, BundleRow& row) {
  auto manifest = bundle::read_manifest(dir);
  if (!manifest) {
    std::fprintf(stderr, "%s\n", manifest.error().to_string().c_str());
    return false;
  }
  row.dir = dir;
  row.targets = manifest->targets.size();
  // Warm-up: page cache and the verification stamps (the first boot after bundling hashes everything).
  spawn_ms({exe, "--child-bundle", dir});
  spawn_ms({exe, "--child-plugin", cpu});
  std::vector<double> with_bundle, alone, ratios;
  for (int i = 0; i < samples; ++i) {  // interleaved and paired, so drift hits both alike
    with_bundle.push_back(spawn_ms({exe, "--child-bundle", dir}));
    alone.push_back(spawn_ms({exe, "--child-plugin", cpu}));
    if (with_bundle.back() < 0 || alone.back() < 0) {
      std::fprintf(stderr, "%s: a child failed to reach a ready client\n", dir.c_str());
      return false;
    }
    ratios.push_back(with_bundle.back() / alone.back());
  }
  row.boot_ms = median(with_bundle);
  row.alone_ms = median(alone);
  row.paired_ratio = median(ratios);
  // Bytes: the bundle stores each distinct file once; N single-target bundles store one each.
  std::map<std::string, uint64_t> distinct;
  uint64_t separate = 0;
  for (const auto& t : manifest->targets) {
    distinct[t.sha256] = t.size;
    separate += t.size;
  }
  uint64_t together = 0;
  for (const auto& [sha, size] : distinct) together += size;
  row.together_mib = together / 1048576.0;
  row.separate_mib = separate / 1048576.0;
  return true;
}

void print_rows(const std::vector<BundleRow>& rows, int samples) {
  std::printf("process start -> ready client: each bundle's boot against the CPU plugin alone (load_plugin +\n"
              "Client::create), %d fresh processes each, interleaved; ratio: median of the paired per-sample ratios\n",
              samples);
  // Flatness: each bundle's paired ratio over the first bundle's (one target, when given first).
  std::printf("  %8s %10s %10s %10s %14s %14s %18s\n", "targets", "boot ms", "alone ms", "ratio", "vs first", "goal",
              "bytes: one / N");
  for (const auto& r : rows) {
    const double flat = r.paired_ratio / rows.front().paired_ratio;
    std::printf("  %8zu %10.1f %10.1f %10.3f %14.3f %14s %8.1f / %.1f MiB\n", r.targets, r.boot_ms, r.alone_ms,
                r.paired_ratio, flat, flat <= 1.10 ? "<=1.10 \u2713" : "<=1.10 \u2717", r.together_mib, r.separate_mib);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child-bundle") == 0) return child_bundle(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "--child-plugin") == 0) return child_plugin(argv[2]);
  std::vector<std::string> bundles;
  std::string cpu;
  int samples = 25, runs = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--samples") == 0 && i + 1 < argc) samples = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (cpu.empty()) cpu = argv[i];
    else bundles.emplace_back(argv[i]);
  }
  if (cpu.empty() || bundles.empty() || samples < 1 || runs < 1 || runs > 20) {
    std::fprintf(stderr, "usage: boot_bench CPU_PLUGIN BUNDLE_DIR... [--samples N] [--runs N]\n");
    return 2;
  }
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;

  std::vector<std::vector<BundleRow>> all_runs;
  for (int run = 0; run < runs; ++run) {
    std::vector<BundleRow> rows;
    for (const auto& dir : bundles) {
      BundleRow row;
      if (!measure(exe, dir, cpu, samples, row)) return 1;
      rows.push_back(row);
    }
    if (runs > 1) std::printf("run %d of %d: ", run + 1, runs);
    print_rows(rows, samples);
    all_runs.push_back(std::move(rows));
  }
  if (runs > 1) {
    // Run to run: each bundle's "vs first" figure, and how far apart the runs are (max / min - 1).
    std::printf("run to run: each bundle's boot against the first bundle's, per run; goal: within 5%%\n");
    std::printf("  %8s %28s %12s %14s\n", "targets", "vs first, run by run", "apart", "goal");
    for (size_t b = 0; b < bundles.size(); ++b) {
      std::string figures;
      double lo = 1e300, hi = 0;
      for (const auto& rows : all_runs) {
        const double flat = rows[b].paired_ratio / rows.front().paired_ratio;
        char cell[32];
        std::snprintf(cell, sizeof cell, "%s%.3f", figures.empty() ? "" : " / ", flat);
        figures += cell;
        lo = std::min(lo, flat);
        hi = std::max(hi, flat);
      }
      const double apart = hi / lo - 1;
      if (b == 0) {  // the first bundle is the reference: 1 by definition
        std::printf("  %8zu %28s %12s %14s\n", all_runs.front()[b].targets, figures.c_str(), "-", "-");
        continue;
      }
      std::printf("  %8zu %28s %11.1f%% %14s\n", all_runs.front()[b].targets, figures.c_str(), apart * 100,
                  apart <= 0.05 ? "<=5% \u2713" : "<=5% \u2717");
    }
  }
  return 0;
}
