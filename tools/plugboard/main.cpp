#include <cstdio>
#include <vector>

#include "base/status.h"
#include "base/terminal_text.h"
#include "commands.h"

namespace plugboard::cli {
// Errors carry text from files and plugins: printed with control characters spelled out.
void print_error(const Error& e) {
  std::fprintf(stderr, "plugboard: error: %s\n", terminal_safe(e.to_string()).c_str());
}
int usage_error(const Error& e) {
  std::fprintf(stderr, "plugboard: usage error: %s\n", terminal_safe(e.to_string()).c_str());
  return kExitUsage;
}
}  // namespace plugboard::cli

int main(int argc, char** argv) {
  using namespace plugboard::cli;
  CLI::App app{"plugboard: load PJRT plugins and run StableHLO programs on them"};
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_version_command(app), add_plugins_command(app), add_run_command(app),
                                         add_conform_command(app), add_fetch_command(app),
                                         add_bundle_command(app), add_doctor_command(app), add_cache_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0; every other parse error is a usage error, exit 2
    // (CLI11's own codes, 101-115, are not what the README documents).
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (const auto& c : commands)
    if (c.app->parsed()) return c.run();
  return kExitUsage;
}
