#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "json_output.h"
#include "conformance/runner.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::string cases_dir;
  std::string plugin;
  std::string format = "both";
  std::vector<std::string> only;
  bool json = false;
};

}  // namespace

Command add_conform_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("conform", "run every conformance case on a plugin and compare with JAX's outputs");
  sub->add_option("cases_dir", o->cases_dir, "folder of case folders (each with case.json)")->required();
  sub->add_option("--plugin", o->plugin, "PJRT plugin shared library")->required();
  sub->add_option("--format", o->format, "text, bytecode or both")->check(CLI::IsMember({"text", "bytecode", "both"}));
  sub->add_option("--only", o->only, "run only these cases");
  sub->add_flag("--json", o->json, "print JSON");
  return {sub, [o] {
            auto cases = conformance::load_cases(o->cases_dir);
            if (!cases) return print_error(cases.error()), 1;
            auto plugin = load_plugin(o->plugin);
            if (!plugin) return print_error(plugin.error()), 1;
            auto client = Client::create(*plugin);
            if (!client) return print_error(client.error()), 1;

            std::vector<ProgramFormat> formats;
            if (o->format != "bytecode") formats.push_back(ProgramFormat::kMlirText);
            if (o->format != "text") formats.push_back(ProgramFormat::kMlirBytecode);
            std::vector<conformance::CaseResult> results;
            for (const auto& c : *cases) {
              if (!o->only.empty() && std::find(o->only.begin(), o->only.end(), c.name) == o->only.end()) continue;
              for (auto f : formats) {
                results.push_back(conformance::run_case(**client, c, f));
                if (!o->json) {
                  const auto& r = results.back();
                  std::printf("%-22s %-13s %-10s %7.1f ms  %s\n", r.name.c_str(), format_name(f).c_str(),
                              conformance::outcome_name(r.outcome).c_str(), r.seconds * 1e3, r.reason.c_str());
                  std::fflush(stdout);
                }
              }
            }
            size_t pass = 0, fail = 0, limited = 0;
            nlohmann::json j = {{"plugin", (*plugin)->path().string()}, {"cases", nlohmann::json::array()}};
            for (const auto& r : results) {
              pass += r.outcome == conformance::Outcome::kPass;
              fail += r.outcome == conformance::Outcome::kFail;
              limited += r.outcome == conformance::Outcome::kLimitation;
              j["cases"].push_back({{"name", r.name}, {"format", format_name(r.format)},
                                    {"outcome", conformance::outcome_name(r.outcome)}, {"reason", r.reason},
                                    {"seconds", r.seconds}});
            }
            j["passed"] = pass;
            j["failed"] = fail;
            j["limitations"] = limited;
            if (o->json) std::printf("%s\n", json_text(j, 2).c_str());
            else std::printf("%zu passed, %zu failed, %zu known limitations on %s\n", pass, fail, limited,
                             (*plugin)->path().string().c_str());
            return fail == 0 && !results.empty() ? 0 : 1;
          }};
}

}  // namespace plugboard::cli
