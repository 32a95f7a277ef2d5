// plugboard_bench: plugboard against the raw PJRT C API, per plugin, in one run.
//
//   plugboard_bench [--plugin PATH]... [--quick] [--runs N] [--cases DIR] [--only dispatch|transfer|compile|cache|threads|size|trace]...
//
// With no --plugin: the three XLA CPU plugins from the dependency cache, where present.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <functional>
#include <string>
#include <vector>

#include "abi/api.h"
#include "bench_util.h"
#include "plugin/plugin.h"

#ifndef PLUGBOARD_DEPS_DIR
#define PLUGBOARD_DEPS_DIR ""
#endif
#ifndef PLUGBOARD_CONFORMANCE_DIR
#define PLUGBOARD_CONFORMANCE_DIR ""
#endif

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: plugboard_bench [--plugin PATH]... [--quick] [--runs N] [--cases DIR] [--only NAME]...\n"
               "  --plugin PATH  a PJRT plugin to measure (repeatable; default: the XLA CPU plugins 0.81,\n"
               "                 0.106, 0.115 under %s/files)\n"
               "  --quick        fewer and shorter repetitions (under ~15 s for three plugins)\n"
               "  --runs N       the whole benchmark N times in a row; the summary shows every run's figure\n"
               "                 and checks a goal only when all N met it (default 1)\n"
               "  --cases DIR    the conformance cases folder (default %s/cases)\n"
               "  --only NAME    run only dispatch, transfer, compile, cache, threads, size or trace (repeatable)\n",
               PLUGBOARD_DEPS_DIR, PLUGBOARD_CONFORMANCE_DIR);
}

std::vector<std::filesystem::path> default_plugins() {
  const std::filesystem::path files = std::filesystem::path(PLUGBOARD_DEPS_DIR) / "files";
  std::vector<std::filesystem::path> out;
  for (const char* rel : {"xla_cpu_081/xla_cpu_pjrt.so", "xla_cpu_106/libpjrt_cpu.so",
                          "xla_cpu_115/pjrt_c_api_cpu_plugin.so"}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(files / rel, ec)) out.push_back(files / rel);
  }
  return out;
}

// Every wanted benchmark on one plugin, printing its tables and adding its goals to `goals`.
// Returns the number of failures (a plugin that does not load, a benchmark that throws).
int measure_plugin(const std::filesystem::path& path, const pbbench::Options& opt,
                   const std::function<bool(const char*)>& wanted, pbbench::RunGoals& goals) {
  using namespace pbbench;
  int failures = 0;
  const auto t_plugin = Clock::now();
  auto plugin = plugboard::load_plugin(path);
  if (!plugin) {
    std::printf("== %s: cannot load: %s\n\n", path.c_str(), plugin.error().to_string().c_str());
    return 1;
  }
  auto client = plugboard::Client::create(*plugin);
  if (!client) {
    std::printf("== %s: cannot create a client: %s\n\n", path.c_str(), client.error().to_string().c_str());
    return 1;
  }
  const double setup_s = std::chrono::duration<double>(Clock::now() - t_plugin).count();
  Context ctx;
  ctx.client = *client;
  ctx.api = (*plugin)->api().raw();
  ctx.raw_client = ctx.client->raw();
  ctx.raw_device = ctx.client->device_handle(0);
  ctx.opt = opt;
  ctx.label = path.filename().string() + " (PJRT " + (*plugin)->version().to_string() + ")";
  std::printf("== %s  PJRT %s, platform %s %s, %zu device(s)\n   %s (load + client: %.1f s)\n\n",
              path.filename().c_str(), (*plugin)->version().to_string().c_str(), ctx.client->platform_name().c_str(),
              ctx.client->platform_version().c_str(), ctx.client->devices().size(), path.c_str(), setup_s);
  std::fflush(stdout);

  struct Entry {
    const char* name;
    Table (*fn)(Context&);
  };
  for (const Entry& e : {Entry{"dispatch", &bench_dispatch}, Entry{"transfer", &bench_transfer},
                         Entry{"compile", &bench_compile}, Entry{"cache", &bench_compile_cache},
                         Entry{"threads", &bench_threads}, Entry{"threads", &bench_threads_callbacks},
                         Entry{"size", &bench_program_size}, Entry{"trace", &bench_trace}}) {
    if (!wanted(e.name)) continue;
    try {
      const auto t0 = Clock::now();
      Table table = e.fn(ctx);
      table.notes.push_back(fmt("(%s took %.1f s)", e.name, std::chrono::duration<double>(Clock::now() - t0).count()));
      table.print();
      for (const Goal& g : table.goals) goals.emplace_back(ctx.label, g);
    } catch (const std::exception& ex) {
      std::printf(" %s: FAILED: %s\n\n", e.name, ex.what());
      ++failures;
    }
    std::fflush(stdout);
  }
  std::printf("   (%s: %.1f s)\n\n", path.filename().c_str(),
              std::chrono::duration<double>(Clock::now() - t_plugin).count());
  return failures;
}

// Runs `body` in a forked child (this process has loaded no plugin yet) and collects the goals it
// measured through a pipe, one per line: label, what, target, measured and met, tab-separated.
// Returns the child's failures (1 when it did not finish).
int run_in_child(const std::function<int(pbbench::RunGoals&)>& body, pbbench::RunGoals& goals) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("plugboard_bench: pipe");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("plugboard_bench: fork");
    return 1;
  }
  if (pid == 0) {
    close(fds[0]);
    pbbench::RunGoals measured;
    const int failures = body(measured);
    std::string lines;
    for (const auto& [label, g] : measured)
      lines += label + "\t" + g.what + "\t" + g.target + "\t" + g.measured + "\t" + (g.met ? "1" : "0") + "\n";
    for (size_t done = 0; done < lines.size();) {
      const ssize_t n = write(fds[1], lines.data() + done, lines.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    std::fflush(stdout);
    _exit(std::min(failures, 100));
  }
  close(fds[1]);
  std::string text;
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n > 0) text.append(chunk, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;  // a cut-off last line (the child died writing)
    std::vector<std::string> cells;
    for (size_t c = at; c <= end;) {
      const size_t tab = std::min(text.find('\t', c), end);
      cells.push_back(text.substr(c, tab - c));
      c = tab + 1;
    }
    if (cells.size() == 5) goals.emplace_back(cells[0], pbbench::Goal{cells[1], cells[2], cells[3], cells[4] == "1"});
    at = end + 1;
  }
  if (!WIFEXITED(status)) return 1;
  return WEXITSTATUS(status);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pbbench;
  Options opt;
  opt.cases = std::filesystem::path(PLUGBOARD_CONFORMANCE_DIR) / "cases";
  std::vector<std::filesystem::path> plugins;
  std::vector<std::string> only;
  int runs = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "plugboard_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--plugin") plugins.emplace_back(next());
    else if (a == "--quick") opt.quick = true;
    else if (a == "--cases") opt.cases = next();
    else if (a == "--only") only.push_back(next());
    else if (a == "--runs") {
      const std::string n = next();
      runs = std::atoi(n.c_str());
      if (runs < 1 || runs > 100 || std::to_string(runs) != n) {
        std::fprintf(stderr, "plugboard_bench: --runs takes a whole number from 1 to 100, not '%s'\n", n.c_str());
        return 2;
      }
    }
    else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "plugboard_bench: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  for (const auto& o : only)
    if (o != "dispatch" && o != "transfer" && o != "compile" && o != "cache" && o != "threads" && o != "size" && o != "trace") {
      std::fprintf(stderr, "plugboard_bench: --only takes dispatch, transfer, compile, cache, threads, size or trace, not '%s'\n",
                   o.c_str());
      return 2;
    }
  std::function<bool(const char*)> wanted = [&](const char* name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  if (plugins.empty()) plugins = default_plugins();
  if (plugins.empty()) {
    std::fprintf(stderr, "plugboard_bench: no plugins given and none found under %s/files (run scripts/setup.sh)\n",
                 PLUGBOARD_DEPS_DIR);
    return 2;
  }

  const auto t_start = Clock::now();
  int failures = 0;
  std::vector<RunGoals> goals(static_cast<size_t>(runs));
  std::printf("plugboard_bench%s: %zu plugin(s); medians over interleaved repetitions\n\n",
              opt.quick ? " --quick" : "", plugins.size());
  if (runs == 1) {
    for (const auto& path : plugins) failures += measure_plugin(path, opt, wanted, goals.front());
  } else {
    // Each run in a fresh process, as consecutive invocations would be: a plugin is loaded once per
    // process and keeps what a run did to it (host callbacks set up by the threads table make every
    // later execution of that plugin carry an execute context).
    for (int run = 0; run < runs; ++run) {
      std::printf("######## run %d of %d (a fresh process)\n\n", run + 1, runs);
      std::fflush(stdout);
      failures += run_in_child([&](RunGoals& child_goals) {
        int child_failures = 0;
        for (const auto& path : plugins) child_failures += measure_plugin(path, opt, wanted, child_goals);
        return child_failures;
      }, goals[static_cast<size_t>(run)]);
    }
  }
  bool any_goal = false;
  for (const RunGoals& run : goals) any_goal = any_goal || !run.empty();
  if (any_goal) print_goal_summary(goals);
  std::printf("total %.1f s%s\n", std::chrono::duration<double>(Clock::now() - t_start).count(),
              failures ? fmt(", %d failure(s)", failures).c_str() : "");
  return failures ? 1 : 0;
}
