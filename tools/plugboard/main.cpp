#include <cstdio>
#include <vector>

#include "base/status.h"
#include "commands.h"

namespace plugboard::cli {
void print_error(const Error& e) { std::fprintf(stderr, "plugboard: error: %s\n", e.to_string().c_str()); }
}  // namespace plugboard::cli

int main(int argc, char** argv) {
  using namespace plugboard::cli;
  CLI::App app{"plugboard: load PJRT plugins and run StableHLO programs on them"};
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_version_command(app), add_plugins_command(app), add_run_command(app),
                                         add_conform_command(app), add_fetch_command(app),
                                         add_bundle_command(app), add_doctor_command(app)};
  CLI11_PARSE(app, argc, argv);
  for (const auto& c : commands)
    if (c.app->parsed()) return c.run();
  return 2;
}
