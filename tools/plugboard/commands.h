// The plugboard CLI's subcommands. Each registers itself on the CLI11 app and runs when chosen;
// `run_*` return the process exit code: kExitOk, kExitFailure (the operation failed) or kExitUsage (the
// command line is wrong: an unknown flag, a missing argument, a value that does not parse or is out of
// range). CLI11's own parse errors are mapped to kExitUsage too (see main.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "base/status.h"

namespace plugboard::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

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
Command add_cache_command(CLI::App& app);

// Prints an error (and its context) to stderr as "plugboard: error: ...".
void print_error(const Error& e);
// Prints a usage error ("plugboard: usage error: ...", naming the flag) and returns kExitUsage.
int usage_error(const Error& e);

}  // namespace plugboard::cli
