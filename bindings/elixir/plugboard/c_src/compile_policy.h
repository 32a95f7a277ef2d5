// Whether an executable's executions may start on the calling BEAM scheduler (nif_execute.cpp).
// XLA's CPU client runs a program it thinks cheap inside PJRT_LoadedExecutable_Execute, and its cost
// model counts a `while` body once and knows nothing of a custom call's work, so a "cheap" program
// can run for seconds there. A launch may stay on the scheduler only when nothing says it could run
// long: no host callbacks or other custom calls, small results, and none of the operations XLA runs
// as loops or library calls (while, sort, scatter, fft, the linear-algebra expanders, RNG), no
// collective or SPMD program (they wait on their peers and on a key-value store) named
// anywhere in the program's bytes (text or bytecode: a false match only costs a thread hop). Each
// launch on the scheduler is timed as well, and one over budget ends them for that executable.
#pragma once

#include <string_view>

#include "plugboard/plugboard.h"

namespace plugboard::nif {

bool may_launch_inline(std::string_view program_bytes, const api::Executable& executable);

}  // namespace plugboard::nif
