// The host callbacks `plugboard run` gives a program:
//  - the print hook: an ordered call to `plugboard.print` shows its operands, in program order, the
//    way Nx's print_value does (`backend_config = {label = "..."}` names them);
//  - `--callback NAME=COMMAND`: a blocking call to NAME runs COMMAND with /bin/sh, passing the
//    operand files and then the result files to write as arguments ($1.. are operands as .npy, the
//    rest are the .npy paths the results go to; appended to COMMAND unless it places them itself with
//    $1.., $@ or $*); the results must have the program's dtypes and dims. $PLUGBOARD_CALLBACK is NAME.
//    Each call runs in a process group of its own, at most `timeout_seconds` (--callback-timeout,
//    default 60 s), and its files in a temporary folder; see callback_processes.h for how both end.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "callback/host_callbacks.h"

namespace plugboard::cli {

inline constexpr char kPrintTarget[] = "plugboard.print";
inline constexpr double kDefaultCallbackTimeoutSeconds = 60;
inline constexpr double kMaxCallbackTimeoutSeconds = 31'536'000;  // a year

struct RunCallbackOptions {
  std::vector<std::string> commands;  // NAME=COMMAND
  size_t print_limit = 50;            // values shown per printed tensor
  std::FILE* print_to = stdout;
  double timeout_seconds = kDefaultCallbackTimeoutSeconds;  // per call of a --callback command
};

// The receiver for one `run`: the print hook and every --callback. Errors name the bad argument.
Expected<std::shared_ptr<HostCallbacks>> make_run_callbacks(const RunCallbackOptions& options);

// --callback-timeout: a finite number of seconds, more than 0 and at most a year ("0.5", "60"),
// parsed strictly (no unit, no blanks). The error names the flag.
Expected<double> parse_callback_timeout(std::string_view text);
// The same as a CLI11 check, so that a bad value is a usage error (exit 2).
CLI::Validator callback_timeout_check();

// "x: f32[4] [1, 2, 3, 4]" (no label: "f32[4] ..."), as the print hook writes it.
std::string format_printed(const std::string& label, const io::HostArray& value, size_t limit);

}  // namespace plugboard::cli
