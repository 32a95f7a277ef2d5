// The plugboard CLI's subcommands. Each registers itself on the CLI11 app and runs when chosen;
// `run_*` return the process exit code (0 success, 1 the operation failed; CLI11 uses 2 for usage).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "base/status.h"

namespace plugboard::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_version_command(CLI::App& app);
Command add_plugins_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_conform_command(CLI::App& app);
Command add_fetch_command(CLI::App& app);
Command add_bundle_command(CLI::App& app);
Command add_doctor_command(CLI::App& app);

// Prints an error (and its context) to stderr as "plugboard: error: ...".
void print_error(const Error& e);

}  // namespace plugboard::cli
