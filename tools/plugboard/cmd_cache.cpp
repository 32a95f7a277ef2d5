// plugboard cache stats|clear|verify: the persistent compile cache (src/compile_cache/disk_cache.h),
// the folder PLUGBOARD_COMPILE_CACHE_DIR names or $XDG_CACHE_HOME/plugboard/compiled.
#include <cstdio>

#include "commands.h"
#include "compile_cache/disk_cache.h"
#include "json_output.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::string action;
  std::string dir;  // --dir, else the environment's
  bool json = false;
};

int run_cache(const Options& o) {
  auto settings = compile_cache::settings_from_environment();
  if (!settings) return usage_error(settings.error());
  const compile_cache::DiskCache cache(o.dir.empty() ? settings->dir : std::filesystem::path(o.dir), settings->max_bytes);
  if (o.action == "stats") {
    auto s = cache.stats();
    if (!s) {
    print_error(s.error());
    return kExitFailure;
  }
    nlohmann::json j = {{"dir", s->dir.string()}, {"entries", s->entries}, {"bytes", s->bytes},
                        {"max_bytes", s->max_bytes}, {"enabled", settings->enabled}};
    if (o.json) std::printf("%s\n", json_text(j).c_str());
    else
      std::printf("compile cache %s%s\n  %llu entries, %.1f MiB of %.0f MiB\n", s->dir.string().c_str(),
                  settings->enabled ? "" : " (off: PLUGBOARD_COMPILE_CACHE)", static_cast<unsigned long long>(s->entries),
                  s->bytes / 1048576.0, s->max_bytes / 1048576.0);
    return kExitOk;
  }
  if (o.action == "clear") {
    auto removed = cache.clear();
    if (!removed) {
    print_error(removed.error());
    return kExitFailure;
  }
    if (o.json) std::printf("%s\n", json_text({{"dir", cache.dir().string()}, {"removed", *removed}}).c_str());
    else std::printf("removed %llu entries from %s\n", static_cast<unsigned long long>(*removed), cache.dir().string().c_str());
    return kExitOk;
  }
  auto checks = cache.verify();
  if (!checks) {
    print_error(checks.error());
    return kExitFailure;
  }
  size_t bad = 0;
  nlohmann::json entries = nlohmann::json::array();
  for (const compile_cache::EntryCheck& c : *checks) {
    if (!c.status) ++bad;
    entries.push_back({{"path", c.path.string()}, {"ok", c.status.has_value()}, {"program", c.program},
                       {"error", c.status ? "" : c.status.error().to_string()}});
    if (!o.json) {
      if (c.status) std::printf("ok   %s (%s)\n", c.path.string().c_str(), c.program.c_str());
      else std::printf("BAD  %s: %s\n", c.path.string().c_str(), c.status.error().to_string().c_str());
    }
  }
  if (o.json) std::printf("%s\n", json_text({{"dir", cache.dir().string()}, {"entries", entries}, {"bad", bad}}).c_str());
  else std::printf("%zu entries, %zu bad (a bad entry is replaced by a fresh compile when its program is next compiled)\n",
                   checks->size(), bad);
  return bad == 0 ? kExitOk : kExitFailure;
}

}  // namespace

Command add_cache_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("cache", "the persistent compile cache: stats, clear, verify");
  sub->add_option("action", o->action, "stats | clear | verify")->required()->check(CLI::IsMember({"stats", "clear", "verify"}));
  sub->add_option("--dir", o->dir, "the cache folder (default: PLUGBOARD_COMPILE_CACHE_DIR, else $XDG_CACHE_HOME/plugboard/compiled)");
  sub->add_flag("--json", o->json, "print JSON");
  return {sub, [o] { return run_cache(*o); }};
}

}  // namespace plugboard::cli
