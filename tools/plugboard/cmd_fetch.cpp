// `plugboard fetch PKG==VER...`: fetch PJRT plugins from their wheels into the cache (pip, or a folder
// of wheels with --offline --from), checked against plugboard.lock and recorded there with --lock.
// One line per plugin: package, platform, sha256 (short), size, file in the cache, "(cached)".
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "json_output.h"
#include "fetch/fetch.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::vector<std::string> specs;
  bool lock = false;
  std::string lock_file = "plugboard.lock";
  bool offline = false;
  std::string from;
  std::string cache;
  std::string python = "python3";
  bool json = false;
};

std::string human_size(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  return buf;
}

nlohmann::ordered_json to_json(const fetch::FetchedPlugin& f) {
  return {{"package", f.spec.name},       {"version", f.spec.version},         {"platform", f.platform},
          {"probe", f.probe},             {"priority", f.priority},            {"wheel", f.wheel},
          {"wheel_sha256", f.wheel_sha256}, {"plugin_path", f.plugin_path},     {"plugin_sha256", f.plugin_sha256},
          {"size", f.size},               {"file", f.file.string()},           {"from_cache", f.from_cache}};
}

int run(const Options& opts) {
  std::vector<fetch::PackageSpec> specs;
  for (const std::string& text : opts.specs) {
    auto spec = fetch::parse_package_spec(text);
    if (!spec) return usage_error(spec.error());  // a bad NAME==VERSION is a bad command line
    specs.push_back(std::move(*spec));
  }
  fetch::FetchOptions options;
  std::error_code ec;
  options.cache_dir = opts.cache.empty() ? fetch::default_cache_dir() : std::filesystem::absolute(opts.cache, ec);
  options.lock_path = opts.lock_file;
  options.write_lock = opts.lock;
  if (opts.offline) options.offline_from = opts.from;
  options.progress = ::isatty(STDERR_FILENO) == 1;
  options.python = opts.python;

  auto fetched = fetch::fetch(specs, options);
  if (!fetched) {
    print_error(fetched.error());
    return 1;
  }
  if (opts.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& f : *fetched) all.push_back(to_json(f));
    std::printf("%s\n", json_text(all, 2).c_str());
    return 0;
  }
  for (const auto& f : *fetched)
    std::printf("%-36s %-8s sha256:%.12s  %10s  %s%s\n", f.spec.to_string().c_str(), f.platform.c_str(),
                f.plugin_sha256.c_str(), human_size(f.size).c_str(), f.file.c_str(), f.from_cache ? "  (cached)" : "");
  if (opts.lock) std::printf("locked in %s\n", opts.lock_file.c_str());
  return 0;
}

}  // namespace

Command add_fetch_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  auto* sub = app.add_subcommand("fetch", "fetch PJRT plugins from their wheels (pip) into the plugin cache");
  sub->add_option("packages", opts->specs, "packages as NAME==VERSION")->required();
  sub->add_flag("--lock", opts->lock, "record the fetched wheels and plugins in the lock file");
  sub->add_option("--lock-file", opts->lock_file, "the lock file (default: ./plugboard.lock)");
  auto* offline = sub->add_flag("--offline", opts->offline, "do not run pip: take the wheels from --from");
  auto* from = sub->add_option("--from", opts->from, "folder of wheels for --offline")->check(CLI::ExistingDirectory);
  offline->needs(from);
  from->needs(offline);
  sub->add_option("--cache", opts->cache, "the plugin cache (default: $XDG_CACHE_HOME/plugboard or ~/.cache/plugboard)");
  sub->add_option("--python", opts->python, "the Python interpreter whose pip downloads the wheels (default: python3)");
  sub->add_flag("--json", opts->json, "print JSON");
  return {sub, [opts] { return run(*opts); }};
}

}  // namespace plugboard::cli
