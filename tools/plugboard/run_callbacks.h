// The host callbacks `plugboard run` gives a program:
//  - the print hook: an ordered call to `plugboard.print` shows its operands, in program order, the
//    way Nx's print_value does (`backend_config = {label = "..."}` names them);
//  - `--callback NAME=COMMAND`: a blocking call to NAME runs COMMAND with /bin/sh, passing the
//    operand files and then the result files to write as arguments ($1.. are operands as .npy, the
//    rest are the .npy paths the results go to; appended to COMMAND unless it places them itself with
//    $1.., $@ or $*); the results must have the program's dtypes and dims. $PLUGBOARD_CALLBACK is NAME.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "callback/host_callbacks.h"

namespace plugboard::cli {

inline constexpr char kPrintTarget[] = "plugboard.print";

struct RunCallbackOptions {
  std::vector<std::string> commands;  // NAME=COMMAND
  size_t print_limit = 50;            // values shown per printed tensor
  std::FILE* print_to = stdout;
};

// The receiver for one `run`: the print hook and every --callback. Errors name the bad argument.
Expected<std::shared_ptr<HostCallbacks>> make_run_callbacks(const RunCallbackOptions& options);

// "x: f32[4] [1, 2, 3, 4]" (no label: "f32[4] ..."), as the print hook writes it.
std::string format_printed(const std::string& label, const io::HostArray& value, size_t limit);

}  // namespace plugboard::cli
