#include "compile_policy.h"

#include <array>

namespace plugboard::nif {
namespace {

// Results larger than this are not computed on a scheduler.
constexpr size_t kInlineResultBytes = 64 * 1024;

// Operation names (StableHLO, CHLO and MHLO spell them alike) that make a program's run time
// unbounded by its size or hidden from XLA's cost model.
// Also the operations that wait on something outside the program (infeed, outfeed, send, recv).
constexpr std::array<std::string_view, 14> kLongRunning = {
    "while", "custom_call", "sort",  "scatter", "fft",     "cholesky", "triangular_solve",
    "rng",   "eigh",        "top_k", "infeed",  "outfeed", "send",     "recv"};

}  // namespace

bool may_launch_inline(std::string_view program_bytes, const api::Executable& executable) {
  if (!executable.host_callbacks_needed().empty()) return false;
  const auto custom_calls = executable.custom_call_targets();
  if (!custom_calls || !custom_calls->empty()) return false;  // unknown, or library work XLA cannot cost
  size_t result_bytes = 0;
  for (const api::ArrayType& r : executable.results()) {
    auto bytes = byte_size(r.dtype, r.dims);
    if (!bytes) return false;
    result_bytes += *bytes;
  }
  if (result_bytes > kInlineResultBytes) return false;
  for (std::string_view name : kLongRunning)
    if (program_bytes.find(name) != std::string_view::npos) return false;
  return true;
}

}  // namespace plugboard::nif
