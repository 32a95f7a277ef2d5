#include <cstdio>

#include "commands.h"
#include "plugin/plugin.h"

namespace plugboard::cli {

Command add_version_command(CLI::App& app) {
  auto* sub = app.add_subcommand("version", "print plugboard's version and the PJRT API versions it loads");
  return {sub, [] {
    std::printf("plugboard %s\nPJRT C API: loads 0.%d and newer 0.x\n", PLUGBOARD_VERSION, kMinPjrtMinor);
    return 0;
  }};
}

}  // namespace plugboard::cli
