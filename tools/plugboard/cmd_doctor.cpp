// `plugboard doctor [--bundle DIR] [--json]`: every candidate through every stage, the load and create
// stages isolated in a child process with a time limit; one row per candidate, and the choice a boot
// would make.
#include <cstdio>
#include <memory>
#include <string>

#include "base/parse_number.h"
#include "base/terminal_text.h"
#include "bundle/boot.h"
#include "compile_cache/cached_compile.h"
#include "commands.h"

namespace plugboard::cli {
namespace {
struct Options {
  std::string bundle, target;
  std::vector<std::string> site_packages;
  bool json = false, no_probes = false, rehash = false;
  std::string timeout_ms;  // parsed strictly (parse_number.h), not by CLI11
};

// Each target's precompiled programs (a bundle's --precompile), each read and checked as a boot would.
void print_precompiled(const select::BootReport& report) {
  bool header = false;
  for (const select::CandidateReport& c : report.candidates) {
    for (const select::ExpectedFile& f : c.candidate.precompiled) {
      if (!header) std::printf("precompiled programs:\n");
      header = true;
      auto entry = compile_cache::read_precompiled({f.path, f.size, f.sha256});
      if (entry)
        std::printf("  %-14s %s  ok (%.0f KiB, %s)\n", c.candidate.name.c_str(), terminal_safe(entry->metadata["program"]).c_str(),
                    f.size / 1024.0, f.path.filename().string().substr(0, 16).c_str());
      else
        std::printf("  %-14s %s  REFUSED: %s\n", c.candidate.name.c_str(), f.path.filename().string().c_str(),
                    terminal_safe(entry.error().to_string()).c_str());
    }
  }
}

// The whole of a text, NULs included (printf's %s would stop at the first one).
void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }
}  // namespace

Command add_doctor_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("doctor", "explain which target this machine can start, and why not the others");
  sub->add_option("--bundle", o->bundle, "a bundle folder (plugboard.json)");
  sub->add_option("--target", o->target, "examine as an explicit choice of this target (as PLUGBOARD_TARGET)");
  sub->add_option("--site-packages", o->site_packages, "also look for jax_plugins/ and xla_plugins/ here");
  sub->add_flag("--no-probes", o->no_probes, "skip the device probes (try loading everything but a TPU target)");
  sub->add_flag("--rehash", o->rehash, "hash every plugin again, ignoring stamps");
  sub->add_option("--timeout-ms", o->timeout_ms, "time limit of each isolated start-up, in ms (default 30000)");
  sub->add_flag("--json", o->json, "print the report as JSON");
  return {sub, [o] {
            bundle::BootOptions b;
            if (!o->bundle.empty()) b.discovery.bundle = o->bundle;
            for (const auto& s : o->site_packages) b.discovery.site_packages.push_back(s);
            select::SelectOptions base;
            if (!o->target.empty()) {
              base.target = o->target;
              base.policy_source = "--target";
            }
            if (o->no_probes) base.probes = false;
            base.verify.rehash = o->rehash;
            b.select = select::options_from_environment(base);
            if (o->no_probes) b.select.probes = false;
            b.select.examine_all = true;
            if (!o->timeout_ms.empty()) {
              auto ms = parse_int64(o->timeout_ms, "--timeout-ms", 1, select::kMaxIsolateTimeoutMs);
              if (!ms) return usage_error(ms.error());
              b.select.isolation.timeout = std::chrono::milliseconds(*ms);
            }
            auto result = bundle::boot(b);
            if (!result) {
              print_error(result.error());  // control characters spelled out: it can quote a manifest
              return kExitFailure;
            }
            if (o->json) print(result->selection.report.to_json() + "\n");
            else {
              for (const auto& n : result->notes) print("note: " + terminal_safe(n) + "\n");
              print(result->selection.report.to_text());
              print_precompiled(result->selection.report);
            }
            return result->selection.report.chosen ? kExitOk : kExitFailure;
          }};
}

}  // namespace plugboard::cli
