// `plugboard doctor [--bundle DIR] [--json]`: every candidate through every stage, the load and create
// stages isolated in a child process with a time limit; one row per candidate, and the choice a boot
// would make.
#include <cstdio>
#include <memory>
#include <string>

#include "bundle/boot.h"
#include "commands.h"

namespace plugboard::cli {
namespace {
struct Options {
  std::string bundle, target;
  std::vector<std::string> site_packages;
  bool json = false, no_probes = false, rehash = false;
  int timeout_ms = 30000;
};
}  // namespace

Command add_doctor_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("doctor", "explain which target this machine can start, and why not the others");
  sub->add_option("--bundle", o->bundle, "a bundle folder (plugboard.json)");
  sub->add_option("--target", o->target, "examine as an explicit choice of this target (as PLUGBOARD_TARGET)");
  sub->add_option("--site-packages", o->site_packages, "also look for jax_plugins/ and xla_plugins/ here");
  sub->add_flag("--no-probes", o->no_probes, "skip the device probes (try loading everything)");
  sub->add_flag("--rehash", o->rehash, "hash every plugin again, ignoring stamps");
  sub->add_option("--timeout-ms", o->timeout_ms, "time limit of each isolated start-up");
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
            b.select.isolation.timeout = std::chrono::milliseconds(o->timeout_ms);
            auto result = bundle::boot(b);
            if (!result) {
              print_error(result.error());
              return 1;
            }
            if (o->json) std::printf("%s\n", result->selection.report.to_json().c_str());
            else {
              for (const auto& n : result->notes) std::printf("note: %s\n", n.c_str());
              std::printf("%s", result->selection.report.to_text().c_str());
            }
            return result->selection.report.chosen ? 0 : 1;
          }};
}

}  // namespace plugboard::cli
